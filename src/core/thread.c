/* One pthread key for the whole library: its destructor runs each thread's
 * registered exit functions (see thread.h). */
#include "core/thread.h"

#include <pthread.h>
#include <stddef.h>

#define MAX_EXIT_FNS 8 /* the library registers 5 */

static _Thread_local void (*exit_fns[MAX_EXIT_FNS])(void);
static _Thread_local int n_exit_fns;
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
static bool exit_key_ok;

static void run_exit_fns(void *unused) {
    (void)unused;
    while (n_exit_fns > 0) {
        void (*fn)(void) = exit_fns[--n_exit_fns];
        fn(); /* may register again: then the key's value is set again, and
                 the destructor runs once more (up to glibc's 4 rounds) */
    }
}

static void make_key(void) {
    exit_key_ok = pthread_key_create(&exit_key, run_exit_fns) == 0;
}

bool jg_at_thread_exit(void (*fn)(void)) {
    pthread_once(&exit_once, make_key);
    if (!exit_key_ok || n_exit_fns == MAX_EXIT_FNS)
        return false;
    /* the key's value only makes the destructor run for this thread */
    if (n_exit_fns == 0 && pthread_setspecific(exit_key, &n_exit_fns) != 0)
        return false;
    exit_fns[n_exit_fns++] = fn;
    return true;
}
