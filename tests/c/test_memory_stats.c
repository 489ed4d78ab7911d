/* jg_memory_allocated / jg_max_memory_allocated / jg_reset_peak_memory_stats:
 * the bytes of tensor data held (views and small tensors add nothing), the
 * peak, counts from other threads, and a compiled forward+backward whose
 * peak is not above eager's. */
#include "testutil.h"

#include <pthread.h>

static void test_counts_and_views(void **state) {
    (void)state;
    int64_t base = jg_memory_allocated();
    jg_tensor *x = jg_keep(jg_full(JG_F32, 1, TU_SHAPE(1000), 0.0));
    assert_int_equal(jg_memory_allocated(), base + 4000);
    jg_tensor *v = jg_keep(jg_view(x, 2, TU_SHAPE(10, 100)));
    assert_int_equal(jg_memory_allocated(), base + 4000);
    jg_release(x); /* the view keeps the storage */
    assert_int_equal(jg_memory_allocated(), base + 4000);
    jg_release(v);
    assert_int_equal(jg_memory_allocated(), base);
    jg_tensor *small = jg_keep(jg_full(JG_F32, 1, TU_SHAPE(16), 0.0)); /* 64 bytes: inline */
    assert_int_equal(jg_memory_allocated(), base);
    jg_release(small);
}

static void test_peak_and_reset(void **state) {
    (void)state;
    int64_t base = jg_memory_allocated();
    jg_reset_peak_memory_stats();
    assert_int_equal(jg_max_memory_allocated(), base);
    jg_release(jg_keep(jg_full(JG_F64, 1, TU_SHAPE(1 << 16), 0.0)));
    assert_int_equal(jg_memory_allocated(), base);
    assert_int_equal(jg_max_memory_allocated(), base + 8 * (1 << 16));
    jg_reset_peak_memory_stats();
    assert_int_equal(jg_max_memory_allocated(), base);
}

static void *alloc_on_thread(void *arg) {
    jg_tensor **out = arg;
    *out = jg_keep(jg_full(JG_F32, 1, TU_SHAPE(2500), 0.0));
    return NULL;
}

static void test_other_thread(void **state) {
    (void)state;
    int64_t base = jg_memory_allocated();
    jg_tensor *t = NULL;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, alloc_on_thread, &t), 0);
    pthread_join(th, NULL);
    assert_non_null(t);
    assert_int_equal(jg_memory_allocated(), base + 10000);
    jg_release(t);
    assert_int_equal(jg_memory_allocated(), base);
}

/* t = a; 8 times t = (t * b).tanh(); t.sum() */
static int p_chain(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *t = in[0];
    for (int i = 0; i < 8; i++)
        t = jg_tanh(jg_mul(t, in[1]));
    out[0] = jg_sum(t);
    return out[0] ? 1 : -1;
}

/* peak bytes above the start of one forward+backward (after a warm-up) */
static int64_t step_peak(jg_compiled *c, jg_tensor *a, jg_tensor *b) {
    int64_t peak = 0;
    for (int i = 0; i < 2; i++) {
        jg_scope_push();
        jg_set_grad(a, NULL);
        jg_set_grad(b, NULL);
        int64_t base = jg_memory_allocated();
        jg_reset_peak_memory_stats();
        jg_tensor *o[1];
        if (c)
            assert_int_equal(jg_compiled_call(c, NULL, 0, 2, (jg_tensor *[]){a, b}, o), 1);
        else
            assert_int_equal(p_chain(NULL, NULL, 2, (jg_tensor *[]){a, b}, o), 1);
        assert_int_equal(jg_backward(o[0], NULL, 0), 0);
        peak = jg_max_memory_allocated() - base;
        jg_scope_pop();
    }
    return peak;
}

static void compiled_peak(const char *backend) {
    jg_tensor *a = jg_keep(jg_detach(jg_randn(JG_F32, 1, TU_SHAPE(50000))));
    jg_tensor *b = jg_keep(jg_detach(jg_randn(JG_F32, 1, TU_SHAPE(50000))));
    jg_set_requires_grad(a, true);
    jg_set_requires_grad(b, true);
    jg_compiled *c = jg_compile(p_chain, NULL, &(jg_compile_options){.backend = backend});
    assert_non_null(c);
    int64_t eager = step_peak(NULL, a, b), compiled = step_peak(c, a, b);
    assert_true(eager > 0);
    assert_true(compiled <= eager);
    jg_compiled_free(c);
    jg_release(a);
    jg_release(b);
}

static void test_compiled_peak_interp(void **state) {
    (void)state;
    compiled_peak("interp");
}

static void test_compiled_peak_c(void **state) {
    (void)state;
    if (!jg_compile_backend_available("c"))
        skip();
    compiled_peak("c");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_counts_and_views), TU_TEST(test_peak_and_reset),
        TU_TEST(test_other_thread),     TU_TEST(test_compiled_peak_interp),
        TU_TEST(test_compiled_peak_c),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
