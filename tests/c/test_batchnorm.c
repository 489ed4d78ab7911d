/* jg_batch_norm: values and running statistics against PyTorch 1.13,
 * gradients of input, weight and bias by finite differences (training and
 * evaluation), bad input, and compiled == eager bitwise on both backends,
 * the running statistics written back by each compiled call included. */
#include "testutil.h"

#include <string.h>

/* PyTorch 1.13, f64: x [4, 3], w, b, running stats (0.1, 0.2, 0.3) and
 * (1, 2, 3); F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.25) */
static const double xv[] = {1, 2, 4, 0, -1, 5, 3, 3, -2, 0.5, 1, 1};
static const double want_train[] = {
    -0.054881918402314656, 0.7570913937723917,  0.46059251295242554, -0.49393726562083184,
    -1.2712741813171748,   1.1908887694286383,  0.8232287760347197,  1.4332132521355805,
    -3.921185025904851,    -0.2744095920115732, 0.08096953540920282, -1.7302962564762128};
/* ... then the same call with training=False reads the updated stats */
static const double want_eval[] = {0.2960213913047122,  1.2797762709071123,  2.0053429501871296,
                                   -0.1638176631492097, -0.7295432820823751, 2.9230049197099173,
                                   1.2156995002125561,  1.9495494552369415,  -3.5006288669495964,
                                   0.06610186407775126, 0.6100030865772832,  -0.7476429583812334};

static void test_values_and_running_stats(void **state) {
    (void)state;
    jg_tensor *x = tu_tensor(JG_F64, 2, TU_SHAPE(4, 3), xv);
    jg_tensor *w = tu_tensor(JG_F64, 1, TU_SHAPE(3), TU_VALS(0.5, 1, 2));
    jg_tensor *b = tu_tensor(JG_F64, 1, TU_SHAPE(3), TU_VALS(0, 0.25, -1));
    jg_tensor *rm = tu_tensor(JG_F64, 1, TU_SHAPE(3), TU_VALS(0.1, 0.2, 0.3));
    jg_tensor *rv = tu_tensor(JG_F64, 1, TU_SHAPE(3), TU_VALS(1, 2, 3));
    TU_CHECK(jg_batch_norm(x, rm, rv, w, b, true, 0.25, 1e-5), 2, TU_SHAPE(4, 3), want_train,
             1e-12);
    TU_CHECK(rm, 1, TU_SHAPE(3), TU_VALS(0.35625, 0.4625, 0.725), 1e-14);
    TU_CHECK(rv, 1, TU_SHAPE(3), TU_VALS(1.1822916666666667, 2.2291666666666665, 4.75), 1e-14);
    TU_CHECK(jg_batch_norm(x, rm, rv, w, b, false, 0.25, 1e-5), 2, TU_SHAPE(4, 3), want_eval,
             1e-12);
    /* evaluation leaves the stats alone; no stats in training: none kept */
    TU_CHECK(rm, 1, TU_SHAPE(3), TU_VALS(0.35625, 0.4625, 0.725), 1e-14);
    TU_CHECK(jg_batch_norm(x, NULL, NULL, w, b, true, 0.25, 1e-5), 2, TU_SHAPE(4, 3), want_train,
             1e-12);
}

static jg_tensor *f_train(void *user, int n, jg_tensor *const *in) {
    (void)user, (void)n;
    return jg_batch_norm(in[0], NULL, NULL, in[1], in[2], true, 0.1, 1e-5);
}

static jg_tensor *f_eval(void *user, int n, jg_tensor *const *in) {
    jg_tensor **stats = user;
    (void)n;
    return jg_batch_norm(in[0], stats[0], stats[1], in[1], in[2], false, 0.1, 1e-5);
}

/* the gradient of sum(f(x, w, b)^2 * x) w.r.t. x, for double backward */
static jg_tensor *f_grad(void *user, int n, jg_tensor *const *in) {
    (void)user;
    jg_tensor *y = f_train(NULL, n, in);
    jg_tensor *s = y ? jg_sum(jg_mul(jg_mul(y, y), in[0])) : NULL;
    jg_tensor *g = NULL;
    if (!s || jg_autograd_grad(1, &s, NULL, 1, in, JG_CREATE_GRAPH, &g) < 0)
        return NULL;
    return g;
}

static void test_gradients(void **state) {
    (void)state;
    jg_manual_seed(3);
    jg_tensor *in[3] = {jg_randn(JG_F64, 4, TU_SHAPE(3, 2, 2, 3)), jg_randn(JG_F64, 1, TU_SHAPE(2)),
                        jg_randn(JG_F64, 1, TU_SHAPE(2))};
    for (int k = 0; k < 3; k++)
        jg_set_requires_grad(in[k], true);
    if (jg_gradcheck(f_train, NULL, 3, in, 1e-6, 1e-6, 1e-5) < 0)
        fail_msg("training: %s", jg_last_error());
    if (jg_gradcheck(f_grad, NULL, 3, in, 1e-6, 1e-5, 1e-4) < 0)
        fail_msg("double backward: %s", jg_last_error());
    assert_string_equal(jg_grad_fn_name(f_train(NULL, 3, in)), "NativeBatchNormBackward0");
    jg_tensor *stats[2] = {tu_tensor(JG_F64, 1, TU_SHAPE(2), TU_VALS(0.5, -1)),
                           tu_tensor(JG_F64, 1, TU_SHAPE(2), TU_VALS(2, 0.5))};
    if (jg_gradcheck(f_eval, stats, 3, in, 1e-6, 1e-6, 1e-5) < 0)
        fail_msg("evaluation: %s", jg_last_error());
}

static void test_bad_input(void **state) {
    (void)state;
    jg_tensor *x = tu_tensor(JG_F32, 2, TU_SHAPE(4, 3), xv);
    jg_tensor *rm = jg_full(JG_F32, 1, TU_SHAPE(3), 0), *rv = jg_full(JG_F32, 1, TU_SHAPE(3), 1);
    jg_tensor *four = jg_full(JG_F32, 1, TU_SHAPE(4), 0);
    assert_null(jg_batch_norm(x, four, rv, NULL, NULL, true, 0.1, 1e-5));
    TU_ERROR("running_mean should contain 3 elements not 4");
    assert_null(jg_batch_norm(x, rm, four, NULL, NULL, true, 0.1, 1e-5));
    TU_ERROR("running_var should contain 3 elements not 4");
    assert_null(jg_batch_norm(x, rm, rv, four, NULL, true, 0.1, 1e-5));
    TU_ERROR("weight should contain 3 elements not 4");
    assert_null(jg_batch_norm(x, rm, rv, NULL, four, true, 0.1, 1e-5));
    TU_ERROR("bias should contain 3 elements not 4");
    assert_null(jg_batch_norm(x, NULL, NULL, NULL, NULL, false, 0.1, 1e-5));
    TU_ERROR("running_mean must be defined in evaluation mode");
    jg_tensor *one = tu_tensor(JG_F32, 2, TU_SHAPE(1, 3), TU_VALS(1, 2, 3));
    assert_null(jg_batch_norm(one, rm, rv, NULL, NULL, true, 0.1, 1e-5));
    TU_ERROR("Expected more than 1 value per channel when training, got input size [1, 3]");
    assert_null(jg_batch_norm(jg_full(JG_I64, 2, TU_SHAPE(2, 3), 0), NULL, NULL, NULL, NULL, true,
                              0.1, 1e-5));
    TU_ERROR("\"batch_norm\" not implemented for");
    assert_null(
        jg_batch_norm(jg_full(JG_F32, 1, TU_SHAPE(3), 0), NULL, NULL, NULL, NULL, true, 0.1, 1e-5));
    TU_ERROR("at least 2 dims");
    /* a failed call leaves the running stats as they were */
    TU_CHECK(rm, 1, TU_SHAPE(3), TU_VALS(0, 0, 0), 0);
    TU_CHECK(rv, 1, TU_SHAPE(3), TU_VALS(1, 1, 1), 0);
}

/* sum((batch_norm(x) * x)^2) with running stats captured from outside */
static int p_bn(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    jg_tensor **stats = user;
    (void)args, (void)n;
    jg_tensor *y = jg_batch_norm(in[0], stats[0], stats[1], in[1], in[2], true, 0.1, 1e-5);
    jg_tensor *z = y ? jg_mul(y, in[0]) : NULL;
    out[0] = z ? jg_sum(jg_mul(z, z)) : NULL;
    return out[0] ? 1 : -1;
}

static void check_compiled(const char *backend, jg_dtype dt) {
    jg_manual_seed(11);
    jg_tensor *in[3] = {jg_randn(dt, 4, TU_SHAPE(4, 3, 2, 5)), jg_randn(dt, 1, TU_SHAPE(3)),
                        jg_randn(dt, 1, TU_SHAPE(3))};
    for (int k = 0; k < 3; k++)
        jg_set_requires_grad(in[k], true);
    jg_tensor *es[2] = {jg_full(dt, 1, TU_SHAPE(3), 0), jg_full(dt, 1, TU_SHAPE(3), 1)};
    jg_tensor *cs[2] = {jg_full(dt, 1, TU_SHAPE(3), 0), jg_full(dt, 1, TU_SHAPE(3), 1)};
    jg_compile_options o = {.backend = backend, .fullgraph = true};
    jg_compiled *c = jg_compile(p_bn, cs, &o);
    assert_non_null(c);
    for (int step = 0; step < 3; step++) {
        jg_tensor *eout, *cout;
        assert_int_equal(p_bn(es, NULL, 3, in, &eout), 1);
        assert_int_equal(jg_backward(eout, NULL, 0), 0);
        jg_tensor *g[3];
        for (int k = 0; k < 3; k++) {
            g[k] = jg_clone(jg_grad(in[k]));
            jg_clear_grad(in[k]);
        }
        if (jg_compiled_call(c, NULL, 0, 3, in, &cout) != 1)
            fail_msg("%s: %s", backend, jg_last_error());
        TU_SAME(cout, eout);
        assert_int_equal(jg_backward(cout, NULL, 0), 0);
        for (int k = 0; k < 3; k++) {
            TU_SAME(jg_grad(in[k]), g[k]);
            jg_clear_grad(in[k]);
        }
        TU_SAME(cs[0], es[0]);
        TU_SAME(cs[1], es[1]);
    }
    assert_int_equal(jg_compiled_fallbacks(c), 0);
    jg_compiled_free(c);
}

static void test_compiled_equals_eager(void **state) {
    (void)state;
    check_compiled("interp", JG_F32);
    check_compiled("interp", JG_F64);
    if (!jg_compile_backend_available("c"))
        skip();
    check_compiled("c", JG_F32);
    check_compiled("c", JG_F64);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_values_and_running_stats),
        TU_TEST(test_gradients),
        TU_TEST(test_bad_input),
        TU_TEST(test_compiled_equals_eager),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
