/* The nn ops: gelu (none, tanh) and silu — values against PyTorch 1.13,
 * gradients and double backward by finite differences, bad input, and
 * compiled == eager bitwise on both backends. */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const double xs[] = {-3.0, -1.5, -0.25, 0.0, 0.5, 1.0, 2.75, 4.0};
#define NX 8

/* PyTorch 1.13 in f64: F.gelu(x), F.gelu(x, approximate="tanh"), F.silu(x) */
static const double want_gelu[NX] = {
    -0.00404969409489031, -0.100210801903287, -0.1003234185792691, 0.0,
    0.3457312306370066,   0.841344746068543,  2.7418056511036,     3.999873315032668};
static const double want_gelu_tanh[NX] = {
    -0.003637392081772994, -0.1004284230197671, -0.100324649298315, 0.0,
    0.3457140098251439,    0.8411919906082768,  2.742276855926382,  3.999929754051808};
static const double want_silu[NX] = {
    -0.1422776195327004, -0.2736382857095345, -0.1094558747785505, 0.0,
    0.3112296656009273,  0.7310585786300049,  2.584761712021479,   3.928055160151634};

static jg_tensor *input(jg_dtype dt) {
    return tu_tensor(dt, 1, TU_SHAPE(NX), xs);
}

static void test_values_match_torch(void **state) {
    (void)state;
    jg_dtype dts[2] = {JG_F64, JG_F32};
    for (int d = 0; d < 2; d++) {
        double tol = dts[d] == JG_F64 ? 1e-12 : 2e-6;
        jg_tensor *x = input(dts[d]);
        TU_CHECK(jg_gelu(x, JG_GELU_NONE), 1, TU_SHAPE(NX), want_gelu, tol);
        TU_CHECK(jg_gelu(x, JG_GELU_TANH), 1, TU_SHAPE(NX), want_gelu_tanh, tol);
        TU_CHECK(jg_silu(x), 1, TU_SHAPE(NX), want_silu, tol);
    }
}

static jg_tensor *f_gelu(void *user, int n, jg_tensor *const *in) {
    (void)n;
    return jg_gelu(in[0], (jg_gelu_approximate)(intptr_t)user);
}
static jg_tensor *f_silu(void *user, int n, jg_tensor *const *in) {
    (void)user, (void)n;
    return jg_silu(in[0]);
}

/* the gradient as a function of x, built with create_graph: its gradcheck
 * checks the backward ops' own VJPs (double backward) */
typedef struct {
    jg_gradcheck_fn f;
    void *user;
} dbl;

static jg_tensor *f_grad(void *user, int n, jg_tensor *const *in) {
    dbl *d = user;
    jg_tensor *y = d->f(d->user, n, in);
    jg_tensor *gy = jg_mul(y, y); /* a nonlinear head: grad depends on y */
    jg_tensor *g = NULL, *root = jg_sum(gy);
    if (!root || jg_autograd_grad(1, &root, NULL, 1, in, JG_CREATE_GRAPH, &g) < 0)
        return NULL;
    return g;
}

static void test_gradients_and_double_backward(void **state) {
    (void)state;
    jg_gradcheck_fn fns[3] = {f_gelu, f_gelu, f_silu};
    void *users[3] = {(void *)(intptr_t)JG_GELU_NONE, (void *)(intptr_t)JG_GELU_TANH, NULL};
    for (int i = 0; i < 3; i++) {
        jg_tensor *x = input(JG_F64);
        jg_set_requires_grad(x, true);
        if (jg_gradcheck(fns[i], users[i], 1, &x, 1e-6, 1e-7, 1e-6) < 0)
            fail_msg("op %d: %s", i, jg_last_error());
        dbl d = {fns[i], users[i]};
        if (jg_gradcheck(f_grad, &d, 1, &x, 1e-6, 1e-6, 1e-5) < 0)
            fail_msg("op %d double backward: %s", i, jg_last_error());
    }
}

static void test_bad_input(void **state) {
    (void)state;
    jg_tensor *x = input(JG_F32);
    assert_null(jg_gelu(x, (jg_gelu_approximate)7));
    TU_ERROR("approximate argument must be either none or tanh");
    assert_null(jg_silu(NULL));
}

/* sum(gelu(x) * silu(w) + gelu_tanh(x * w)) */
static int p_act(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *a = jg_mul(jg_gelu(in[0], JG_GELU_NONE), jg_silu(in[1]));
    out[0] = jg_sum(jg_add(a, jg_gelu(jg_mul(in[0], in[1]), JG_GELU_TANH)));
    return out[0] ? 1 : -1;
}

static void check_compiled(const char *backend, jg_dtype dt) {
    jg_manual_seed(11);
    jg_tensor *x = jg_randn(dt, 2, TU_SHAPE(5, 7)), *w = jg_randn(dt, 2, TU_SHAPE(5, 7));
    jg_set_requires_grad(x, true);
    jg_set_requires_grad(w, true);
    jg_tensor *in[2] = {x, w}, *eout, *cout;
    assert_int_equal(p_act(NULL, NULL, 2, in, &eout), 1);
    assert_int_equal(jg_backward(eout, NULL, 0), 0);
    jg_tensor *gx = jg_clone(jg_grad(x)), *gw = jg_clone(jg_grad(w));
    jg_clear_grad(x);
    jg_clear_grad(w);
    jg_compile_options o = {.backend = backend, .fullgraph = true};
    jg_compiled *c = jg_compile(p_act, NULL, &o);
    assert_non_null(c);
    if (jg_compiled_call(c, NULL, 0, 2, in, &cout) != 1)
        fail_msg("%s", jg_last_error());
    TU_SAME(cout, eout);
    assert_int_equal(jg_backward(cout, NULL, 0), 0);
    TU_SAME(jg_grad(x), gx);
    TU_SAME(jg_grad(w), gw);
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
        TU_TEST(test_bad_input),
        TU_TEST(test_compiled_equals_eager),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
