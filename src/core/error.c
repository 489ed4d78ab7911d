/* Thread-local error text: failing calls set it and return NULL / -1. */
#include "core/tensor.h"
#include "core/thread.h"

#include <stdio.h>
#include <stdlib.h>

/* The text lives on the heap, allocated at a thread's first error and
 * freed at its exit: thread-local storage holds only the pointer, which
 * keeps the shared library's static TLS block small (see CMakeLists.txt). */
#define ERR_SIZE 1024
static _Thread_local char *err_buf;

static void err_free(void) {
    free(err_buf);
    err_buf = NULL;
}

const char *jg_last_error(void) {
    return err_buf ? err_buf : "";
}

void jg_clear_error(void) {
    if (err_buf)
        err_buf[0] = '\0';
}

static void jg_verror(const char *fmt, va_list ap) {
    if (!err_buf) {
        char *b = malloc(ERR_SIZE);
        if (!b)
            return; /* the message is lost; the call still fails */
        if (!jg_at_thread_exit(err_free)) {
            free(b);
            return;
        }
        err_buf = b;
    }
    vsnprintf(err_buf, ERR_SIZE, fmt, ap);
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
