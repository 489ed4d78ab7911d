/* A thread's exit functions all run, however many are registered: a full
 * registry once made the error buffer unregistrable, and every message of
 * that thread read "". */
#include "testutil.h"

#include "core/thread.h"

#include <pthread.h>
#include <string.h>

enum { N_FNS = 40 };

static _Atomic int ran;

#define EXIT_FN(i)                                                                                 \
    static void exit_fn_##i(void) {                                                                \
        ran++;                                                                                     \
    }
EXIT_FN(0)
EXIT_FN(1)
EXIT_FN(2)
EXIT_FN(3)

static void (*const fns[4])(void) = {exit_fn_0, exit_fn_1, exit_fn_2, exit_fn_3};

static void *worker(void *arg) {
    (void)arg;
    for (int i = 0; i < N_FNS; i++)
        if (!jg_at_thread_exit(fns[i % 4]))
            return (void *)1;
    /* the library's own registrations still work, so errors keep their text */
    jg_set_error("jitgrad test: error %d", 7);
    return strcmp(jg_last_error(), "jitgrad test: error 7") ? (void *)1 : NULL;
}

static void test_many_exit_functions(void **state) {
    (void)state;
    pthread_t t;
    void *rc;
    assert_int_equal(pthread_create(&t, NULL, worker, NULL), 0);
    assert_int_equal(pthread_join(t, &rc), 0);
    assert_null(rc);
    assert_int_equal(ran, N_FNS);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_many_exit_functions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
