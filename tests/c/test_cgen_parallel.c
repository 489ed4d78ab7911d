/* Generated loops of the c backend on the thread pool: tensors above the
 * threshold (2 * JG_PARALLEL_GRAIN elements) give the same bits with 1, 2
 * and 3 threads, forward and backward, and the same bits as eager mode:
 * plain fused loops, segmented loops (tanh, more than 6 streams), in-graph
 * sums of contributions, sums fused into loops (src/ops/sum_order.h's
 * order: block partials combined in block order), f32 and f64. */
#include "testutil.h"

#include "core/parallel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE_C()                                                                                \
    do {                                                                                           \
        if (!jg_compile_backend_available("c")) {                                                  \
            print_message("skipping: the c backend is not available here: %s\n", jg_last_error()); \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

/* Not a multiple of the grain nor of a loop's block: a partial last chunk. */
#define N_BIG (3 * JG_PARALLEL_GRAIN + 4099)

/* (a * b + c).relu().sum() */
static int p_relu(void *u, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)u, (void)args, (void)n;
    out[0] = jg_sum(jg_relu(jg_add(jg_mul(in[0], in[1]), in[2])));
    return out[0] ? 1 : -1;
}

/* t = a; 6x: t = (t * b).tanh(); returns t (segmented: a heavy node per pass) */
static int p_tanh(void *u, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)u, (void)args, (void)n;
    jg_tensor *t = in[0];
    for (int k = 0; k < 6; k++)
        t = jg_tanh(jg_mul(t, in[1]));
    out[0] = t;
    return t ? 1 : -1;
}

/* t = a; 10x: t = t * b + c: more than 6 streams per loop (segmented), and
 * b and c get 10 contributions each, summed inside the backward graph */
static int p_chain(void *u, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)u, (void)args, (void)n;
    jg_tensor *t = in[0];
    for (int k = 0; k < 10; k++)
        t = jg_add(jg_mul(t, in[1]), in[2]);
    out[0] = t;
    out[1] = jg_relu(t);
    return t && out[1] ? 2 : -1;
}

/* sums ending loops: one whose summand is stored (saved for backward),
 * one whose summand is not, a sum read by a later loop, a sum of a sum's
 * broadcast, and a partial reduction (not fused) */
static int p_sums(void *u, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)u, (void)args, (void)n;
    jg_tensor *s1 = jg_sum(jg_mul(in[0], in[1]));          /* a, b saved; a*b not stored */
    jg_tensor *s2 = jg_sum(jg_tanh(jg_add(in[2], in[0]))); /* tanh out saved and summed */
    jg_tensor *t = jg_relu(jg_mul(in[2], jg_add(s1, s2))); /* reads both sums */
    out[0] = jg_add(jg_sum(jg_mul(t, in[1])), s1);
    return out[0] ? 1 : -1;
}

typedef struct {
    int n_out;
    jg_tensor *out[2], *grad[3];
} result;

/* One forward + backward (through sum of output 0, or output 0 itself when
 * it has one element) of prog, compiled with c (c != NULL) or eager. */
static result run_once(jg_compiled *c, jg_program_fn prog, jg_tensor *const *in) {
    result r = {0};
    for (int i = 0; i < 3; i++)
        jg_clear_grad(in[i]);
    r.n_out = c ? jg_compiled_call(c, NULL, 0, 3, in, r.out) : prog(NULL, NULL, 3, in, r.out);
    if (r.n_out < 1)
        fail_msg("%s: %s", c ? "c" : "eager", jg_last_error());
    jg_tensor *loss = jg_numel(r.out[0]) == 1 ? r.out[0] : jg_sum(r.out[0]);
    if (!loss || jg_backward(loss, NULL, 0) < 0)
        fail_msg("backward: %s", jg_last_error());
    for (int i = 0; i < 3; i++)
        r.grad[i] = jg_grad(in[i]) ? jg_clone(jg_grad(in[i])) : NULL;
    return r;
}

static void same(const result *a, const result *b) {
    assert_int_equal(a->n_out, b->n_out);
    for (int k = 0; k < a->n_out; k++)
        TU_SAME(a->out[k], b->out[k]);
    for (int i = 0; i < 3; i++) {
        assert_true((a->grad[i] == NULL) == (b->grad[i] == NULL));
        if (a->grad[i])
            TU_SAME(a->grad[i], b->grad[i]);
    }
}

static void check_threads(jg_program_fn prog, jg_dtype dt, int64_t n, double scale) {
    REQUIRE_C();
    int before = jg_get_num_threads();
    jg_manual_seed(7);
    jg_tensor *in[3];
    for (int i = 0; i < 3; i++) {
        in[i] = jg_mul_scalar(jg_randn(dt, 1, (int64_t[]){n}), i == 1 ? scale : 1.0);
        assert_non_null(in[i]);
        jg_set_requires_grad(in[i], true);
    }
    assert_int_equal(jg_set_num_threads(1), 0);
    result eager = run_once(NULL, prog, in);
    const int threads[3] = {1, 2, 3};
    for (int t = 0; t < 3; t++) {
        assert_int_equal(jg_set_num_threads(threads[t]), 0);
        jg_compiled *c = jg_compile(prog, NULL, &(jg_compile_options){.backend = "c"});
        assert_non_null(c);
        for (int rep = 0; rep < 2; rep++) { /* the trace, then the compiled graphs */
            result r = run_once(c, prog, in);
            same(&r, &eager);
        }
        assert_int_equal(jg_compiled_fallbacks(c), 0);
        jg_compiled_free(c);
        /* eager itself at this thread count */
        result e = run_once(NULL, prog, in);
        same(&e, &eager);
    }
    assert_int_equal(jg_set_num_threads(before), 0);
}

static void test_cgen_parallel_relu_sum_f32(void **state) {
    (void)state;
    check_threads(p_relu, JG_F32, N_BIG, 1.0);
}

static void test_cgen_parallel_relu_sum_f64(void **state) {
    (void)state;
    check_threads(p_relu, JG_F64, N_BIG, 1.0);
}

static void test_cgen_parallel_tanh_chain(void **state) {
    (void)state;
    check_threads(p_tanh, JG_F32, N_BIG, 1.5);
}

static void test_cgen_parallel_long_chain(void **state) {
    (void)state;
    check_threads(p_chain, JG_F32, N_BIG, 0.5);
    check_threads(p_chain, JG_F64, N_BIG, 0.5);
}

/* below the threshold: the direct path, same results */
static void test_cgen_parallel_small(void **state) {
    (void)state;
    check_threads(p_chain, JG_F32, 2 * JG_PARALLEL_GRAIN - 1, 0.5);
    check_threads(p_relu, JG_F32, 1000, 1.0);
}

static void test_cgen_fused_sum(void **state) {
    (void)state;
    const int64_t sizes[] = {1, 31, 33, 4096, 4097, 2 * JG_PARALLEL_GRAIN - 1, N_BIG};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        check_threads(p_relu, JG_F32, sizes[k], 1.0);
        check_threads(p_sums, JG_F32, sizes[k], 0.01);
    }
    check_threads(p_sums, JG_F64, N_BIG, 0.01);
    check_threads(p_sums, JG_F64, 4097, 0.01);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_cgen_parallel_relu_sum_f32), TU_TEST(test_cgen_parallel_relu_sum_f64),
        TU_TEST(test_cgen_parallel_tanh_chain),   TU_TEST(test_cgen_parallel_long_chain),
        TU_TEST(test_cgen_parallel_small),        TU_TEST(test_cgen_fused_sum),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
