/* The training step of a small MLP (linear, relu, cross-entropy, SGD): the
 * optimizer's one-pass update gives the bits of the composed ops, and a
 * whole step gives the same bits at 1 and 2 threads, eagerly and compiled
 * (interp, c). */
#include "testutil.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* x.add_(g, alpha) as the composed ops compute it: x + g * alpha */
static jg_tensor *composed_update(jg_tensor *x, jg_tensor *g, double alpha) {
    return jg_add(x, jg_mul_scalar(g, alpha));
}

/* SGD's update p -= lr * g on dense parameters: the fused pass equals
 * mul_scalar then add, for both float dtypes, small and pool-sized, at 1
 * and 2 threads, and bumps the parameter's version once. */
static void test_sgd_update_matches_composed_ops(void **state) {
    (void)state;
    const jg_dtype dts[2] = {JG_F32, JG_F64};
    const int64_t sizes[3] = {1, 1000, 3 * 65536 + 17};
    int saved = jg_get_num_threads();
    for (int d = 0; d < 2; d++)
        for (int s = 0; s < 3; s++)
            for (int threads = 1; threads <= 2; threads++) {
                assert_int_equal(jg_set_num_threads(threads), 0);
                jg_manual_seed(5);
                jg_tensor *p = jg_randn(dts[d], 1, &sizes[s]);
                jg_tensor *g = jg_randn(dts[d], 1, &sizes[s]);
                assert_non_null(p);
                assert_non_null(g);
                jg_tensor *want = composed_update(p, g, -0.1);
                jg_set_requires_grad(p, true);
                assert_int_equal(jg_set_grad(p, g), 0);
                jg_optim *opt = jg_optim_sgd(&p, 1, 0.1, 0, 0, 0, false);
                assert_non_null(opt);
                uint64_t v = jg_version(p);
                assert_int_equal(jg_optim_step(opt), 0);
                assert_int_equal(jg_version(p), v + 1);
                TU_SAME(jg_detach(p), want);
                jg_optim_free(opt);
            }
    jg_set_num_threads(saved);
}

/* A parameter whose gradient is not laid out like it (a transposed grad)
 * takes the composed ops: same values. */
static void test_sgd_update_strided_grad(void **state) {
    (void)state;
    jg_manual_seed(6);
    jg_tensor *p = jg_randn(JG_F32, 2, TU_SHAPE(300, 400));
    jg_tensor *g = jg_contiguous(jg_randn(JG_F32, 2, TU_SHAPE(400, 300)));
    jg_tensor *gt = jg_transpose(g, 0, 1);
    jg_tensor *want = composed_update(p, gt, -0.05);
    jg_set_requires_grad(p, true);
    assert_int_equal(jg_set_grad(p, gt), 0);
    jg_optim *opt = jg_optim_sgd(&p, 1, 0.05, 0, 0, 0, false);
    assert_int_equal(jg_optim_step(opt), 0);
    TU_SAME(jg_detach(p), want);
    jg_optim_free(opt);
}

/* ------------------------------------------------------------- matmul */

/* Products large enough to be split over the pool (and small ones), with
 * transposed operands, batched, f32 and f64: the same bits at 1 to 4
 * threads, also with ragged tails (m, n not multiples of the kernels'
 * tiles) and with k over several panels.  64x784 @ 784x256 gave different
 * bits with OpenBLAS's own 1 and 2 threads; a split that followed the
 * thread count gave different bits on OpenBLAS's AVX2 kernels (ctest runs
 * this file again as test_mlp_step_haswell, with OPENBLAS_CORETYPE=Haswell). */
/* Under valgrind (scripts/memcheck.sh sets JITGRAD_MEMCHECK) the same code
 * paths on less work: what memcheck looks for (uninitialised reads) does
 * not depend on the sizes, and full sizes take many minutes there. */
static bool light(void) {
    return getenv("JITGRAD_MEMCHECK") != NULL;
}

static void test_matmul_bitwise_any_thread_count(void **state) {
    (void)state;
    static const int64_t shapes[][3] = {
        {64, 784, 256}, {64, 256, 256},  {784, 64, 256},  {256, 64, 10},   {64, 10, 256},
        {3, 5, 7},      {1, 300, 2000},  {2000, 300, 1},  {130, 517, 129}, {256, 512, 512},
        {515, 300, 77}, {99, 1500, 333}, {1037, 61, 263},
    };
    const int ns = (int)(sizeof shapes / sizeof shapes[0]);
    int saved = jg_get_num_threads();
    for (int d = 0; d < 2; d++) {
        jg_dtype dt = d ? JG_F64 : JG_F32;
        for (int i = 0; i < ns; i++) {
            int64_t m = shapes[i][0], k = shapes[i][1], n = shapes[i][2];
            /* (light: one product split in two blocks, one not split) */
            if (light() && (d || !((m == 3 && k == 5) || (m == 130 && k == 517))))
                continue;
            jg_manual_seed(10 + i);
            jg_tensor *a = jg_randn(dt, 2, TU_SHAPE(m, k));
            jg_tensor *b = jg_randn(dt, 2, TU_SHAPE(k, n));
            jg_tensor *at = jg_contiguous(jg_transpose(a, 0, 1)); /* k x m */
            jg_tensor *bt = jg_contiguous(jg_transpose(b, 0, 1)); /* n x k */
            jg_tensor *ref[5] = {NULL};
            for (int threads = 1; threads <= 4; threads++) {
                assert_int_equal(jg_set_num_threads(threads), 0);
                jg_tensor *r[5] = {
                    jg_matmul(a, b),
                    jg_matmul(jg_transpose(at, 0, 1), b),                /* A as CblasTrans */
                    jg_matmul(a, jg_transpose(bt, 0, 1)),                /* B as CblasTrans */
                    jg_matmul(jg_stack(2, (jg_tensor *[]){a, a}, 0), b), /* folded batch */
                    jg_matmul(jg_expand(jg_reshape(a, 3, TU_SHAPE(1, m, k)), 3, TU_SHAPE(2, m, k)),
                              jg_stack(2, (jg_tensor *[]){b, b}, 0)), /* batch loop */
                };
                for (int q = 0; q < 5; q++) {
                    assert_non_null(r[q]);
                    if (threads == 1)
                        ref[q] = r[q];
                    else
                        TU_SAME(r[q], ref[q]);
                }
            }
        }
    }
    jg_set_num_threads(saved);
}

/* ------------------------------------------------------------ the MLP step */

enum { B = 64, D0 = 784, D1 = 256, D2 = 256, D3 = 10, STEPS = 3 };

/* the steps run (light: one) */
static int n_steps(void) {
    return light() ? 1 : STEPS;
}

static int p_mlp(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *h = jg_relu(jg_add(jg_matmul(in[0], in[1]), in[2]));
    h = jg_relu(jg_add(jg_matmul(h, in[3]), in[4]));
    out[0] = jg_cross_entropy(jg_add(jg_matmul(h, in[5]), in[6]), in[7]);
    return out[0] ? 1 : -1;
}

/* STEPS SGD steps of the MLP (eagerly, or compiled with backend) at the
 * given thread count; the final parameters and losses are kept in
 * res[0..6) (loss of every step concatenated in res[6]). */
static void run_steps(const char *backend, int threads, jg_tensor **res) {
    assert_int_equal(jg_set_num_threads(threads), 0);
    jg_manual_seed(2);
    const int64_t dims[4] = {D0, D1, D2, D3};
    jg_tensor *in[8];
    in[0] = jg_randn(JG_F32, 2, TU_SHAPE(B, D0));
    for (int l = 0; l < 3; l++) {
        jg_tensor *w = jg_randn(JG_F32, 2, TU_SHAPE(dims[l], dims[l + 1]));
        in[1 + 2 * l] = jg_mul_scalar(w, 1.0 / sqrt((double)dims[l]));
        in[2 + 2 * l] = jg_mul_scalar(jg_randn(JG_F32, 1, TU_SHAPE(dims[l + 1])), 0.1);
    }
    int64_t tv[B];
    for (int i = 0; i < B; i++)
        tv[i] = (i * 7) % D3;
    in[7] = jg_tensor_new(JG_I64, 1, TU_SHAPE(B), tv);
    for (int i = 1; i < 7; i++)
        jg_set_requires_grad(in[i], true);
    jg_optim *opt = jg_optim_sgd(in + 1, 6, 0.05, 0, 0, 0, false);
    assert_non_null(opt);
    jg_compiled *c =
        backend ? jg_compile(p_mlp, NULL, &(jg_compile_options){.backend = backend}) : NULL;
    if (backend)
        assert_non_null(c);
    jg_tensor *losses[STEPS];
    for (int s = 0; s < n_steps(); s++) {
        jg_tensor *loss;
        int rc = c ? jg_compiled_call(c, NULL, 0, 8, in, &loss) : p_mlp(NULL, NULL, 8, in, &loss);
        assert_int_equal(rc, 1);
        assert_int_equal(jg_backward(loss, NULL, 0), 0);
        /* every parameter has its gradient before the update */
        for (int i = 1; i < 7; i++)
            assert_non_null(jg_grad(in[i]));
        assert_int_equal(jg_optim_step(opt), 0);
        assert_int_equal(jg_optim_zero_grad(opt, true), 0);
        losses[s] = jg_reshape(jg_detach(loss), 1, TU_SHAPE(1));
    }
    for (int i = 0; i < 6; i++)
        res[i] = jg_detach(in[1 + i]);
    res[6] = jg_cat(n_steps(), losses, 0);
    jg_compiled_free(c);
    jg_optim_free(opt);
}

/* The step's bits depend neither on the thread count nor on compiling. */
static void test_mlp_step_bitwise_threads_and_backends(void **state) {
    (void)state;
    int saved = jg_get_num_threads();
    jg_tensor *ref[7], *got[7];
    run_steps(NULL, 1, ref);
    const char *backends[3] = {NULL, "interp", "c"};
    for (int b = 0; b < 3; b++) {
        if (backends[b] && !jg_compile_backend_available(backends[b]))
            continue;
        for (int threads = 1; threads <= 2; threads++) {
            /* (light: eager at 2 threads and c at 2 threads only) */
            if ((!backends[b] && threads == 1) ||
                (light() && (threads == 1 || (backends[b] && strcmp(backends[b], "c")))))
                continue;
            run_steps(backends[b], threads, got);
            for (int i = 0; i < 7; i++)
                TU_SAME(got[i], ref[i]);
        }
    }
    jg_set_num_threads(saved);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_sgd_update_matches_composed_ops),
        TU_TEST(test_sgd_update_strided_grad),
        TU_TEST(test_matmul_bitwise_any_thread_count),
        TU_TEST(test_mlp_step_bitwise_threads_and_backends),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
