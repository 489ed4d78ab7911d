/* The kernels' thread pool: jg_set_num_threads / jg_get_num_threads and
 * JITGRAD_NUM_THREADS; large kernels give the same bits for any thread
 * count; nested loops, more threads than chunks, concurrent callers and
 * fork all work. */
#include "testutil.h"

#include "core/parallel.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void sleep_us(long us) {
    struct timespec t = {us / 1000000, us % 1000000 * 1000};
    nanosleep(&t, NULL);
}

static char self_path[4096];

static void test_set_get(void **state) {
    (void)state;
    int before = jg_get_num_threads();
    assert_true(before >= 1);
    assert_int_equal(jg_set_num_threads(3), 0);
    assert_int_equal(jg_get_num_threads(), 3);
    jg_clear_error();
    assert_int_equal(jg_set_num_threads(0), -1);
    TU_ERROR("expected num_threads > 0, got 0");
    assert_int_equal(jg_set_num_threads(-2), -1);
    TU_ERROR("expected num_threads > 0, got -2");
    assert_int_equal(jg_get_num_threads(), 3); /* a refused call changes nothing */
    assert_int_equal(jg_set_num_threads(100000), 0);
    assert_int_equal(jg_get_num_threads(), JG_PARALLEL_MAX_THREADS);
    assert_int_equal(jg_set_num_threads(before), 0);
    assert_int_equal(jg_get_num_threads(), before);
}

extern int openblas_get_num_threads(void) __attribute__((weak));

extern void openblas_set_num_threads(int n) __attribute__((weak));

/* OpenBLAS stays on one thread (matmul splits itself over jitgrad's pool),
 * whatever jitgrad's count; a count a program set is undone by the next
 * matmul. */
static void test_openblas_single_thread(void **state) {
    (void)state;
    if (!openblas_get_num_threads || !openblas_set_num_threads)
        skip();
    int before = jg_get_num_threads();
    assert_int_equal(jg_set_num_threads(1), 0);
    assert_int_equal(openblas_get_num_threads(), 1);
    assert_int_equal(jg_set_num_threads(2), 0);
    assert_int_equal(openblas_get_num_threads(), 1);
    openblas_set_num_threads(2);
    jg_tensor *x = jg_full(JG_F32, 2, TU_SHAPE(8, 8), 1.0);
    assert_non_null(jg_matmul(x, x));
    assert_int_equal(openblas_get_num_threads(), 1);
    assert_int_equal(jg_set_num_threads(before), 0);
}

/* What jg_get_num_threads says in a fresh process with this environment
 * value of JITGRAD_NUM_THREADS (NULL: unset); *blas: OpenBLAS's count there
 * (-1 without OpenBLAS). */
static int threads_in_child(const char *env, int *blas) {
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        if (env)
            setenv("JITGRAD_NUM_THREADS", env, 1);
        else
            unsetenv("JITGRAD_NUM_THREADS");
        execl(self_path, self_path, "--print-threads", (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char buf[32] = {0};
    ssize_t got = read(fds[0], buf, sizeof buf - 1);
    close(fds[0]);
    int status;
    waitpid(pid, &status, 0);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_true(got > 0);
    int n = 0;
    assert_int_equal(sscanf(buf, "%d %d", &n, blas), 2);
    return n;
}

static void test_env_var(void **state) {
    (void)state;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int blas;
    int dflt = threads_in_child(NULL, &blas); /* the cores this process may use */
    assert_true(dflt >= 1 && dflt <= (cores < 1 ? 1 : cores));
    assert_int_equal(threads_in_child("1", &blas), 1);
    assert_int_equal(threads_in_child("5", &blas), 5);
    if (blas != -1) /* OpenBLAS is on one thread from the start */
        assert_int_equal(blas, 1);
    /* unusable values are ignored */
    assert_int_equal(threads_in_child("0", &blas), dflt);
    assert_int_equal(threads_in_child("abc", &blas), dflt);
    assert_int_equal(threads_in_child("-3", &blas), dflt);
}

enum { N_RESULTS = 15 };

/* Large kernels through the public API: dense rows, broadcasts and
 * transposed operands (jg_iter_run), in place, dtype copies, reductions. */
static void run_kernels(jg_tensor *x, jg_tensor *y, jg_tensor *col, jg_tensor **res) {
    int i = 0;
    res[i++] = jg_add(x, y);
    res[i++] = jg_mul(x, y);
    res[i++] = jg_relu(x);
    res[i++] = jg_tanh(x);
    res[i++] = jg_sigmoid(y);
    res[i++] = jg_add(x, col);                                       /* broadcast column */
    res[i++] = jg_mul(jg_transpose(x, 0, 1), jg_transpose(y, 0, 1)); /* strided operands */
    res[i++] = jg_contiguous(jg_transpose(y, 0, 1));
    res[i++] = jg_to_dtype(x, JG_F64);
    jg_tensor *z = jg_mul_scalar(x, 1.5);
    assert_int_equal(jg_add_(z, y), 0); /* in place */
    res[i++] = z;
    res[i++] = jg_sum(x);
    int d0 = 0, d1 = 1;
    res[i++] = jg_sum_dims(y, 1, &d0, false);
    res[i++] = jg_sum_dims(y, 1, &d1, true);
    res[i++] = jg_softmax(x, 1);
    res[i++] = jg_clamp(x, true, -0.5, true, 0.5);
    assert_int_equal(i, N_RESULTS);
    for (int k = 0; k < N_RESULTS; k++)
        if (!res[k])
            fail_msg("kernel %d: %s", k, jg_last_error());
}

static void test_bitwise_any_thread_count(void **state) {
    (void)state;
    int before = jg_get_num_threads();
    jg_manual_seed(11);
    /* 700 x 701: not a multiple of the chunk size, rows split across chunks */
    jg_tensor *x = jg_randn(JG_F32, 2, TU_SHAPE(700, 701));
    jg_tensor *y = jg_randn(JG_F32, 2, TU_SHAPE(700, 701));
    jg_tensor *col = jg_randn(JG_F32, 2, TU_SHAPE(700, 1));
    jg_tensor *want[N_RESULTS], *got[N_RESULTS];
    assert_int_equal(jg_set_num_threads(1), 0);
    run_kernels(x, y, col, want);
    static const int counts[] = {2, 3, 4, 7};
    for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
        assert_int_equal(jg_set_num_threads(counts[c]), 0);
        run_kernels(x, y, col, got);
        for (int k = 0; k < N_RESULTS; k++)
            TU_SAME(got[k], want[k]);
    }
    assert_int_equal(jg_set_num_threads(before), 0);
}

/* f64 and integer dtypes too, and a 3-d broadcast. */
static void test_bitwise_dtypes(void **state) {
    (void)state;
    int before = jg_get_num_threads();
    jg_manual_seed(5);
    jg_tensor *a = jg_randn(JG_F64, 3, TU_SHAPE(4, 300, 257));
    jg_tensor *b = jg_randn(JG_F64, 2, TU_SHAPE(300, 1));
    jg_tensor *ai = jg_to_dtype(jg_mul_scalar(a, 1000.0), JG_I64);
    jg_tensor *want[4], *got[4];
    for (int t = 1; t <= 4; t++) {
        assert_int_equal(jg_set_num_threads(t), 0);
        jg_tensor **r = t == 1 ? want : got;
        r[0] = jg_exp(a);
        r[1] = jg_mul(a, b);
        r[2] = jg_add(ai, ai);
        r[3] = jg_gt(a, b);
        for (int k = 0; k < 4; k++) {
            assert_non_null(r[k]);
            if (t > 1)
                TU_SAME(got[k], want[k]);
        }
    }
    assert_int_equal(jg_set_num_threads(before), 0);
}

/* Each index of [0, n) counted once, wherever its chunk ran. */
typedef struct {
    _Atomic int *hits;
    int64_t n_inner;
    _Atomic int nested_inline; /* inner loops that ran inside a chunk */
} cover_ctx;

static void count_chunk(void *vc, int64_t lo, int64_t hi) {
    cover_ctx *c = vc;
    for (int64_t i = lo; i < hi; i++)
        c->hits[i]++;
}

static void inner_loop_chunk(void *vc, int64_t lo, int64_t hi) {
    cover_ctx *c = vc;
    for (int64_t i = lo; i < hi; i++) {
        /* a loop inside a chunk runs inline on this thread */
        if (jg_parallel_inside())
            c->nested_inline++;
        cover_ctx inner = {c->hits + i * c->n_inner, 0, 0};
        jg_parallel_for(c->n_inner, 7, count_chunk, &inner);
    }
}

static void test_nested_loops(void **state) {
    (void)state;
    int before = jg_get_num_threads();
    assert_int_equal(jg_set_num_threads(3), 0);
    enum { OUTER = 40, INNER = 50 };
    _Atomic int *hits = calloc(OUTER * INNER, sizeof *hits);
    assert_non_null(hits);
    cover_ctx c = {hits, INNER, 0};
    jg_parallel_for(OUTER, 3, inner_loop_chunk, &c);
    for (int i = 0; i < OUTER * INNER; i++)
        assert_int_equal(hits[i], 1);
    assert_int_equal(c.nested_inline, OUTER);
    assert_false(jg_parallel_inside());
    free(hits);
    assert_int_equal(jg_set_num_threads(before), 0);
}

static void test_more_threads_than_chunks(void **state) {
    (void)state;
    int before = jg_get_num_threads();
    assert_int_equal(jg_set_num_threads(7), 0);
    enum { N = 1001 };
    _Atomic int *hits = calloc(N, sizeof *hits);
    assert_non_null(hits);
    static const int64_t grains[] = {1000, 501, 334, 1, 2000};
    for (int round = 0; round < 50; round++) {
        for (size_t g = 0; g < sizeof grains / sizeof *grains; g++) {
            cover_ctx c = {hits, 0, 0};
            memset(hits, 0, N * sizeof *hits);
            jg_parallel_for(N, grains[g], count_chunk, &c);
            for (int i = 0; i < N; i++)
                assert_int_equal(hits[i], 1);
        }
    }
    cover_ctx c = {hits, 0, 0};
    jg_parallel_for(0, 5, count_chunk, &c); /* nothing to do */
    free(hits);
    assert_int_equal(jg_set_num_threads(before), 0);
}

/* The pool really runs chunks on another thread: the first chunk taken
 * waits (up to 10 s) until the other chunk ran on a different thread. */
typedef struct {
    pthread_t first;
    _Atomic int started;
    _Atomic bool first_set;
    _Atomic bool other_ran;
} two_ctx;

static void wait_for_other(void *vc, int64_t lo, int64_t hi) {
    two_ctx *c = vc;
    (void)lo, (void)hi;
    if (c->started++ == 0) {
        c->first = pthread_self();
        c->first_set = true;
        for (int i = 0; i < 10000 && !c->other_ran; i++)
            sleep_us(1000);
    } else {
        while (!c->first_set)
            sleep_us(100);
        c->other_ran = !pthread_equal(c->first, pthread_self());
    }
}

static void test_chunks_run_on_workers(void **state) {
    (void)state;
    int before = jg_get_num_threads();
    assert_int_equal(jg_set_num_threads(2), 0);
    two_ctx c = {0};
    jg_parallel_for(2, 1, wait_for_other, &c);
    assert_true(c.other_ran);
    assert_int_equal(jg_set_num_threads(before), 0);
}

/* Two program threads running large kernels at once: one gets the pool,
 * the other computes inline; both get the serial bits. */
typedef struct {
    jg_tensor *x, *y, *want;
    bool ok;
} conc_job;

static void *conc_main(void *v) {
    conc_job *j = v;
    j->ok = true;
    for (int r = 0; r < 20 && j->ok; r++) {
        jg_tensor *s = jg_add(j->x, j->y), *t = s ? jg_tanh(s) : NULL;
        j->ok = t && memcmp(jg_data(t), jg_data(j->want), (size_t)jg_numel(t) * 4) == 0;
        jg_release(t);
        jg_release(s);
    }
    return NULL;
}

static void test_concurrent_callers(void **state) {
    (void)state;
    int before = jg_get_num_threads();
    assert_int_equal(jg_set_num_threads(2), 0);
    jg_manual_seed(3);
    jg_tensor *x = jg_randn(JG_F32, 1, TU_SHAPE(200000));
    jg_tensor *y = jg_randn(JG_F32, 1, TU_SHAPE(200000));
    assert_int_equal(jg_set_num_threads(1), 0);
    jg_tensor *want = jg_tanh(jg_add(x, y));
    assert_int_equal(jg_set_num_threads(2), 0);
    conc_job jobs[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        jobs[i] = (conc_job){x, y, want, false};
        assert_int_equal(pthread_create(&th[i], NULL, conc_main, &jobs[i]), 0);
    }
    for (int i = 0; i < 3; i++) {
        pthread_join(th[i], NULL);
        assert_true(jobs[i].ok);
    }
    assert_int_equal(jg_set_num_threads(before), 0);
}

/* A child forked after the pool started has no workers; its large kernels
 * start a pool of their own. */
static void test_fork_child(void **state) {
    (void)state;
    int before = jg_get_num_threads();
    assert_int_equal(jg_set_num_threads(2), 0);
    jg_manual_seed(9);
    jg_tensor *x = jg_randn(JG_F32, 1, TU_SHAPE(300000));
    jg_tensor *want = jg_relu(x); /* the pool is running now */
    assert_non_null(want);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        jg_tensor *got = jg_relu(x);
        int bad = !got || memcmp(jg_data(got), jg_data(want), 300000 * 4) != 0;
        _exit(bad);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(jg_set_num_threads(before), 0);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--print-threads") == 0) {
        printf("%d %d\n", jg_get_num_threads(),
               openblas_get_num_threads ? openblas_get_num_threads() : -1);
        return 0;
    }
    ssize_t len = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
    if (len <= 0)
        return 1;
    self_path[len] = '\0';
    const struct CMUnitTest tests[] = {
        TU_TEST(test_set_get),
        TU_TEST(test_openblas_single_thread),
        TU_TEST(test_env_var),
        TU_TEST(test_bitwise_any_thread_count),
        TU_TEST(test_bitwise_dtypes),
        TU_TEST(test_nested_loops),
        TU_TEST(test_more_threads_than_chunks),
        TU_TEST(test_chunks_run_on_workers),
        TU_TEST(test_concurrent_callers),
        TU_TEST(test_fork_child),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
