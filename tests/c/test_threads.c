/* Threads: errors, grad mode, scopes, the allocation caches and the backward
 * engine are per thread.  Programs run in several threads at once give each
 * thread the single-thread results bit for bit, a failure in one thread is
 * invisible to the others, and a finished thread's state is freed (the ASan
 * build's leak check covers that). */
#include "testutil.h"
#include "testutil_fns.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define N_THREADS 4
#define ROUNDS 40

typedef struct {
    int id;
    const char *backend; /* run the MLP through jg_compile with it; NULL: eagerly */
    double grads[4][64];
    bool ok;
    char why[200];
} job;

/* The MLP of testutil_fns (x [4, 3], W1 [3, 5], b1 [5], W2 [5, 2]): forward
 * and backward ROUNDS times, eagerly or compiled; the last gradients are
 * kept.  Every round also makes a failing call whose message must be this
 * thread's own. */
static void *run_job(void *user) {
    job *j = user;
    static const int64_t shapes[4][2] = {{4, 3}, {3, 5}, {5, 0}, {5, 2}};
    jg_manual_seed(7); /* the RNG is per thread too: same values everywhere */
    jg_tensor *in[4];  /* owned here, also in a thread with a scope open */
    for (int k = 0; k < 4; k++) {
        int nd = shapes[k][1] ? 2 : 1;
        in[k] = jg_keep(jg_randn(JG_F32, nd, shapes[k]));
        jg_set_requires_grad(in[k], true);
    }
    jg_compiled *c =
        j->backend ? jg_compile(tf_mlp, NULL, &(jg_compile_options){.backend = j->backend}) : NULL;
    j->ok = !j->backend || c;
    for (int r = 0; r < ROUNDS && j->ok; r++) {
        jg_scope_push();
        for (int k = 0; k < 4; k++)
            jg_clear_grad(in[k]);
        jg_tensor *loss;
        int rc = c ? jg_compiled_call(c, NULL, 0, 4, in, &loss) : tf_mlp(NULL, NULL, 4, in, &loss);
        if (rc != 1 || jg_backward(loss, NULL, 0) < 0) {
            snprintf(j->why, sizeof j->why, "round %d: %s", r, jg_last_error());
            j->ok = false;
        }
        /* a thread-specific failure: [id + 4] @ [3] */
        jg_tensor *bad = jg_matmul(jg_full(JG_F32, 1, (int64_t[]){j->id + 4}, 1.0),
                                   jg_full(JG_F32, 1, (int64_t[]){3}, 1.0));
        char want[64];
        snprintf(want, sizeof want, "expected tensor [%d] and src [3]", j->id + 4);
        if (bad || !strstr(jg_last_error(), want)) {
            snprintf(j->why, sizeof j->why, "round %d: error text \"%s\"", r, jg_last_error());
            j->ok = false;
        }
        jg_scope_pop();
    }
    for (int k = 0; k < 4 && j->ok; k++) {
        assert_true(jg_numel(in[k]) <= 64);
        tu_values(jg_grad(in[k]), j->grads[k]);
    }
    jg_compiled_free(c);
    for (int k = 0; k < 4; k++)
        jg_release(in[k]);
    return NULL;
}

static void check_threads(const char *backend) {
    job ref = {.id = 0, .backend = backend};
    run_job(&ref);
    if (!ref.ok)
        fail_msg("single thread: %s", ref.why);
    job jobs[N_THREADS];
    pthread_t th[N_THREADS];
    for (int t = 0; t < N_THREADS; t++) {
        jobs[t] = (job){.id = t, .backend = backend};
        assert_int_equal(pthread_create(&th[t], NULL, run_job, &jobs[t]), 0);
    }
    for (int t = 0; t < N_THREADS; t++)
        assert_int_equal(pthread_join(th[t], NULL), 0);
    for (int t = 0; t < N_THREADS; t++) {
        if (!jobs[t].ok)
            fail_msg("thread %d: %s", t, jobs[t].why);
        assert_memory_equal(jobs[t].grads, ref.grads, sizeof ref.grads);
    }
}

static void test_eager_in_threads(void **state) {
    (void)state;
    check_threads(NULL);
}

/* each thread compiles and runs its own jg_compiled; with "c" the threads
 * also compile the same sources into the cache at the same time */
static void test_compiled_in_threads(void **state) {
    (void)state;
    check_threads("interp");
    if (jg_compile_backend_available("c"))
        check_threads("c");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_eager_in_threads),
        TU_TEST(test_compiled_in_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
