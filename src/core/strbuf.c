/* See strbuf.h. */
#include "core/strbuf.h"

#include <stdio.h>
#include <stdlib.h>

int jg_vappendf(char **buf, size_t *len, size_t *cap, const char *fmt, va_list ap) {
    for (;;) {
        va_list aq;
        va_copy(aq, ap);
        size_t room = *buf ? *cap - *len : 0;
        int n = vsnprintf(*buf ? *buf + *len : NULL, room, fmt, aq);
        va_end(aq);
        if (n < 0)
            return -1;
        if (*buf && (size_t)n < room) {
            *len += (size_t)n;
            return 0;
        }
        size_t c = *cap ? *cap : 1024;
        while (c <= *len + (size_t)n)
            c *= 2;
        char *b = realloc(*buf, c);
        if (!b) {
            if (*buf)
                (*buf)[*len] = 0; /* undo the partial write */
            return -1;
        }
        *buf = b;
        *cap = c;
    }
}
