/* Thread-local error text: failing calls set it and return NULL / -1. */
#include "core/tensor.h"

#include <stdio.h>
#include <stdlib.h>

static _Thread_local char jg_err_buf[1024];

const char *jg_last_error(void) {
    return jg_err_buf;
}

void jg_clear_error(void) {
    jg_err_buf[0] = '\0';
}

static void jg_verror(const char *fmt, va_list ap) {
    vsnprintf(jg_err_buf, sizeof jg_err_buf, fmt, ap);
}

int jg_errorf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    jg_verror(fmt, ap);
    va_end(ap);
    return -1;
}

int jg_set_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    jg_verror(fmt, ap);
    va_end(ap);
    return -1;
}

void *jg_errorf_null(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    jg_verror(fmt, ap);
    va_end(ap);
    return NULL;
}

_Noreturn void jg_fatal(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("jitgrad: fatal: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}
