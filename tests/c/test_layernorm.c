/* jg_layer_norm as the LAYER_NORM row: values and gradients against
 * PyTorch 1.13 (f32), gradients and double backward by finite differences
 * (weight and bias, weight only, neither; 1 and 2 normalized dims), the
 * node's name, no rows, the same bits for any thread count, bad input, and compiled == eager
 * bitwise on both backends (the backward row's gradients included). */
#include "testutil.h"

static jg_tensor *ln_all(jg_tensor *const *in, int n, int n_norm) {
    return jg_layer_norm(in[0], n_norm, n > 1 ? in[1] : NULL, n > 2 ? in[2] : NULL, 0.01);
}

static jg_tensor *f_ln1(void *user, int n, jg_tensor *const *in) {
    (void)user;
    return ln_all(in, n, 1);
}

static jg_tensor *f_ln2(void *user, int n, jg_tensor *const *in) {
    (void)user;
    return ln_all(in, n, 2);
}

/* the gradients of sum(ln(x)^2 * x) w.r.t. every input, made with
 * create_graph and summed with weights, for double backward */
static jg_tensor *f_grad(void *user, int n, jg_tensor *const *in) {
    jg_tensor *y = ((jg_tensor * (*)(void *, int, jg_tensor *const *)) user)(NULL, n, in);
    jg_tensor *s = y ? jg_sum(jg_mul(jg_mul(y, y), in[0])) : NULL;
    jg_tensor *g[3] = {NULL, NULL, NULL};
    if (!s || jg_autograd_grad(1, &s, NULL, n, in, JG_CREATE_GRAPH, g) < 0)
        return NULL;
    jg_tensor *r = jg_sum(jg_mul(g[0], g[0]));
    for (int k = 1; r && k < n; k++)
        r = jg_add(r, jg_mul_scalar(jg_sum(jg_mul(g[k], g[k])), 0.5 + k));
    return r;
}

static void test_values_match_torch(void **state) {
    (void)state;
    /* PyTorch 1.13, f32: F.layer_norm(x, [3], w, b, 1e-5), then backward of
     * sum(y * go) */
    jg_tensor *x = tu_tensor(JG_F32, 2, TU_SHAPE(2, 3), TU_VALS(1, 2, 4, 0, -1, 5));
    jg_tensor *w = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(0.5, 1, 2));
    jg_tensor *b = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(0, 0.25, -1));
    jg_tensor *go = tu_tensor(JG_F32, 2, TU_SHAPE(2, 3), TU_VALS(1, -2, 0.5, 3, 1, -1));
    jg_set_requires_grad(x, true);
    jg_set_requires_grad(w, true);
    jg_set_requires_grad(b, true);
    jg_tensor *y = jg_layer_norm(x, 1, w, b, 1e-5);
    TU_CHECK(y, 2, TU_SHAPE(2, 3),
             TU_VALS(-0.53452068567276, -0.017260313034057617, 1.6726036071777344,
                     -0.25400006771087646, -0.6390002369880676, 1.7940006256103516),
             1e-6);
    assert_string_equal(jg_grad_fn_name(y), "NativeLayerNormBackward0");
    assert_int_equal(jg_backward(jg_sum(jg_mul(y, go)), NULL, 0), 0);
    TU_CHECK(jg_grad(x), 2, TU_SHAPE(2, 3),
             TU_VALS(0.9163186550140381, -1.3744823932647705, 0.4581637978553772,
                     0.2212262749671936, -0.18435421586036682, -0.03687205910682678),
             1e-6);
    TU_CHECK(jg_grad(w), 1, TU_SHAPE(3),
             TU_VALS(-2.5930418968200684, -0.3544796109199524, -0.7288494110107422), 1e-6);
    TU_CHECK(jg_grad(b), 1, TU_SHAPE(3), TU_VALS(4, -1, -0.5), 0);
}

static void test_gradients_and_double_backward(void **state) {
    (void)state;
    jg_manual_seed(5);
    for (int n = 1; n <= 3; n++) {
        jg_tensor *in[3] = {jg_randn(JG_F64, 3, TU_SHAPE(2, 3, 4)),
                            jg_randn(JG_F64, 1, TU_SHAPE(4)), jg_randn(JG_F64, 1, TU_SHAPE(4))};
        jg_tensor *in2[3] = {in[0], jg_randn(JG_F64, 2, TU_SHAPE(3, 4)),
                             jg_randn(JG_F64, 2, TU_SHAPE(3, 4))};
        for (int k = 0; k < 3; k++) {
            jg_set_requires_grad(in[k], true);
            jg_set_requires_grad(in2[k], true);
        }
        if (jg_gradcheck(f_ln1, NULL, n, in, 1e-6, 1e-6, 1e-5) < 0)
            fail_msg("1 dim, %d inputs: %s", n, jg_last_error());
        if (jg_gradcheck(f_ln2, NULL, n, in2, 1e-6, 1e-6, 1e-5) < 0)
            fail_msg("2 dims, %d inputs: %s", n, jg_last_error());
        if (jg_gradcheck(f_grad, (void *)f_ln1, n, in, 1e-6, 1e-5, 1e-4) < 0)
            fail_msg("double backward, 1 dim, %d inputs: %s", n, jg_last_error());
        if (jg_gradcheck(f_grad, (void *)f_ln2, n, in2, 1e-6, 1e-5, 1e-4) < 0)
            fail_msg("double backward, 2 dims, %d inputs: %s", n, jg_last_error());
    }
}

/* an input of no rows: an empty y, zero weight and bias gradients */
static void test_no_rows(void **state) {
    (void)state;
    jg_tensor *x = jg_full(JG_F32, 2, TU_SHAPE(0, 3), 0);
    jg_tensor *w = jg_full(JG_F32, 1, TU_SHAPE(3), 1), *b = jg_full(JG_F32, 1, TU_SHAPE(3), 0);
    jg_set_requires_grad(x, true);
    jg_set_requires_grad(w, true);
    jg_set_requires_grad(b, true);
    jg_tensor *y = jg_layer_norm(x, 1, w, b, 1e-5);
    assert_non_null(y);
    assert_int_equal(jg_numel(y), 0);
    assert_int_equal(jg_backward(jg_sum(y), NULL, 0), 0);
    TU_CHECK(jg_grad(w), 1, TU_SHAPE(3), TU_VALS(0, 0, 0), 0);
    TU_CHECK(jg_grad(b), 1, TU_SHAPE(3), TU_VALS(0, 0, 0), 0);
    assert_int_equal(jg_numel(jg_grad(x)), 0);
}

/* Rows split into chunks (here 3, the weight's and bias's column sums
 * added in chunk order): the same bits for 1 and 3 threads. */
static void test_threads_same_bits(void **state) {
    (void)state;
    jg_manual_seed(4);
    int before = jg_get_num_threads();
    for (int dt = 0; dt < 2; dt++) {
        jg_dtype d = dt ? JG_F64 : JG_F32;
        jg_tensor *x = jg_randn(d, 2, TU_SHAPE(300, 256)), *go = jg_randn(d, 2, TU_SHAPE(300, 256));
        jg_tensor *w = jg_randn(d, 1, TU_SHAPE(256)), *b = jg_randn(d, 1, TU_SHAPE(256));
        jg_tensor *r[2][4];
        for (int t = 0; t < 2; t++) {
            assert_int_equal(jg_set_num_threads(t ? 3 : 1), 0);
            jg_tensor *in[3] = {jg_clone(x), jg_clone(w), jg_clone(b)};
            for (int k = 0; k < 3; k++)
                jg_set_requires_grad(in[k], true);
            r[t][0] = jg_layer_norm(in[0], 1, in[1], in[2], 1e-5);
            assert_int_equal(jg_backward(jg_sum(jg_mul(r[t][0], go)), NULL, 0), 0);
            for (int k = 0; k < 3; k++)
                r[t][k + 1] = jg_grad(in[k]);
        }
        for (int k = 0; k < 4; k++)
            TU_SAME(r[1][k], r[0][k]);
    }
    assert_int_equal(jg_set_num_threads(before), 0);
}

static void test_bad_input(void **state) {
    (void)state;
    jg_tensor *x = jg_full(JG_F32, 2, TU_SHAPE(2, 3), 1);
    assert_null(jg_layer_norm(x, 3, NULL, NULL, 1e-5));
    TU_ERROR("normalized_shape must have 1 to 2 dims");
    assert_null(jg_layer_norm(x, 1, jg_full(JG_F32, 1, TU_SHAPE(2), 1), NULL, 1e-5));
    TU_ERROR("weight must have the normalized shape");
    assert_null(jg_layer_norm(x, 1, NULL, jg_full(JG_F32, 2, TU_SHAPE(1, 3), 1), 1e-5));
    TU_ERROR("bias must have the normalized shape");
    assert_null(jg_layer_norm(jg_full(JG_I64, 2, TU_SHAPE(2, 3), 1), 1, NULL, NULL, 1e-5));
    TU_ERROR("\"LayerNormKernelImpl\" not implemented for 'Long'");
    assert_null(jg_layer_norm(NULL, 1, NULL, NULL, 1e-5));
    TU_ERROR("NULL input");
}

/* sum((layer_norm(x) * x)^2) over the last dim, and over the last two
 * without affine parameters on a transposed x */
static int p_ln(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *y = jg_layer_norm(in[0], 1, in[1], in[2], 1e-5);
    jg_tensor *z = y ? jg_mul(y, in[0]) : NULL;
    jg_tensor *y2 = jg_layer_norm(jg_transpose(in[0], 1, 2), 2, NULL, NULL, 1e-3);
    out[0] = z && y2 ? jg_add(jg_sum(jg_mul(z, z)), jg_sum(jg_mul(y2, y2))) : NULL;
    return out[0] ? 1 : -1;
}

static void check_compiled(const char *backend, jg_dtype dt) {
    jg_manual_seed(11);
    jg_tensor *in[3] = {jg_randn(dt, 3, TU_SHAPE(4, 3, 5)), jg_randn(dt, 1, TU_SHAPE(5)),
                        jg_randn(dt, 1, TU_SHAPE(5))};
    for (int k = 0; k < 3; k++)
        jg_set_requires_grad(in[k], true);
    jg_compile_options o = {.backend = backend, .fullgraph = true};
    jg_compiled *c = jg_compile(p_ln, NULL, &o);
    assert_non_null(c);
    for (int step = 0; step < 2; step++) {
        jg_tensor *eout, *cout;
        assert_int_equal(p_ln(NULL, NULL, 3, in, &eout), 1);
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
        TU_TEST(test_values_match_torch),
        TU_TEST(test_gradients_and_double_backward),
        TU_TEST(test_no_rows),
        TU_TEST(test_threads_same_bits),
        TU_TEST(test_bad_input),
        TU_TEST(test_compiled_equals_eager),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
