/* Appending printf output to a growing heap string: the one implementation
 * used by the IR printer and the C code generator. */
#ifndef JG_CORE_STRBUF_H
#define JG_CORE_STRBUF_H

#include <stdarg.h>
#include <stddef.h>

/* Appends fmt's output to *buf (NUL-terminated; *len chars of *cap bytes),
 * growing it as needed; no length limit.  0, or -1 when out of memory (the
 * string is then unchanged). */
int jg_vappendf(char **buf, size_t *len, size_t *cap, const char *fmt, va_list ap);

#endif
