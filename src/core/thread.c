/* One pthread key for the whole library: its destructor runs each thread's
 * registered exit functions (see thread.h). */
#include "core/thread.h"

#include <pthread.h>
#include <stddef.h>

#include <stdlib.h>

/* Most threads need the first few slots only; more grow on the heap, so a
 * registration fails only when memory does. */
#define INLINE_EXIT_FNS 8

typedef void (*exit_fn)(void);
static _Thread_local exit_fn inline_fns[INLINE_EXIT_FNS];
static _Thread_local exit_fn *exit_fns; /* inline_fns, or a heap copy */
static _Thread_local int n_exit_fns, cap_exit_fns;
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
static bool exit_key_ok;

static void run_exit_fns(void *unused) {
    (void)unused;
    while (n_exit_fns > 0) {
        exit_fn fn = exit_fns[--n_exit_fns];
        fn(); /* may register again: then the key's value is set again, and
                 the destructor runs once more (up to glibc's 4 rounds) */
    }
    if (exit_fns != inline_fns)
        free(exit_fns);
    exit_fns = NULL;
    cap_exit_fns = 0;
}

static void make_key(void) {
    exit_key_ok = pthread_key_create(&exit_key, run_exit_fns) == 0;
}

bool jg_at_thread_exit(void (*fn)(void)) {
    pthread_once(&exit_once, make_key);
    if (!exit_key_ok)
        return false;
    if (!exit_fns) {
        exit_fns = inline_fns;
        cap_exit_fns = INLINE_EXIT_FNS;
    }
    if (n_exit_fns == cap_exit_fns) {
        exit_fn *f = malloc(sizeof *f * (size_t)cap_exit_fns * 2);
        if (!f)
            return false;
        for (int i = 0; i < n_exit_fns; i++)
            f[i] = exit_fns[i];
        if (exit_fns != inline_fns)
            free(exit_fns);
        exit_fns = f;
        cap_exit_fns *= 2;
    }
    /* the key's value only makes the destructor run for this thread */
    if (n_exit_fns == 0 && pthread_setspecific(exit_key, &n_exit_fns) != 0)
        return false;
    exit_fns[n_exit_fns++] = fn;
    return true;
}
