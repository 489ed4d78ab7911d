/* The nn ops: gelu (none, tanh), silu, leaky_relu and hardtanh — values against PyTorch 1.13,
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
    jg_tensor *ints = tu_tensor(JG_I64, 1, TU_SHAPE(2), TU_VALS(1, 2));
    assert_null(jg_gelu(ints, JG_GELU_TANH));
    TU_ERROR("\"GeluKernelImpl\" not implemented for 'Long'");
    assert_null(jg_silu(tu_tensor(JG_BOOL, 1, TU_SHAPE(1), TU_VALS(1))));
    TU_ERROR("\"silu_cpu\" not implemented for 'Bool'");
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

/* gelu_tanh of an input that requires grad keeps its tanh for the backward
 * (gelu_tanh_t/_y/_d in nn.def); without a grad, and in a backward that
 * makes a graph, it is the one-expression gelu_tanh / gelu_tanh_grad.  Both
 * forms must give the same bits, over inputs from -12 to 12 (both tanh
 * branches, the clamp). */
static void check_gelu_tanh_forms(jg_dtype dt) {
    enum { N = 4801 };
    double *v = malloc(N * sizeof *v), *gv = malloc(N * sizeof *gv);
    for (int i = 0; i < N; i++) {
        v[i] = -12.0 + 24.0 * i / (N - 1) + 1e-3 * sin(i);
        gv[i] = cos(0.37 * i);
    }
    jg_tensor *x = tu_tensor(dt, 1, TU_SHAPE(N), v), *g = tu_tensor(dt, 1, TU_SHAPE(N), gv);
    jg_tensor *plain = jg_gelu(x, JG_GELU_TANH); /* no grad: one expression */
    jg_set_requires_grad(x, true);
    jg_tensor *y = jg_gelu(x, JG_GELU_TANH);
    TU_SAME(y, plain);
    jg_tensor *gx[2];
    for (int k = 0; k < 2; k++) {
        jg_tensor *yk = jg_gelu(x, JG_GELU_TANH);
        assert_int_equal(jg_autograd_grad(1, &yk, &g, 1, &x, k ? JG_CREATE_GRAPH : 0, &gx[k]), 0);
        assert_true(jg_requires_grad(gx[k]) == (k == 1));
    }
    TU_SAME(gx[0], gx[1]);
    free(v);
    free(gv);
}

static void test_gelu_tanh_saved_tanh_same_bits(void **state) {
    (void)state;
    check_gelu_tanh_forms(JG_F32);
    check_gelu_tanh_forms(JG_F64);
}

/* rows of w at [[0, 2], [2, 1]] with padding_idx 2; sum(y * y) */
static int p_emb(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *y = jg_embedding(in[0], in[1], 2);
    out[0] = y ? jg_sum(jg_mul(y, y)) : NULL;
    return out[0] ? 1 : -1;
}

/* leaky_relu and hardtanh: PyTorch's values and gradient masks (the bounds
 * themselves get no gradient, x == 0 gets the slope), and a gradient made
 * with create_graph that requires grad with zero derivative, so a second
 * backward through it gives zeros (PyTorch's LeakyReluBackwardBackward0,
 * HardtanhBackwardBackward0) instead of failing. */
static void test_leaky_relu_hardtanh(void **state) {
    (void)state;
    jg_dtype dts[2] = {JG_F64, JG_F32};
    for (int d = 0; d < 2; d++) {
        jg_tensor *x = tu_tensor(dts[d], 1, TU_SHAPE(6), TU_VALS(-3, -1, -0.5, 0, 1, 6));
        TU_CHECK(jg_leaky_relu(x, 0.25), 1, TU_SHAPE(6), TU_VALS(-0.75, -0.25, -0.125, 0, 1, 6), 0);
        TU_CHECK(jg_hardtanh(x, -1, 1), 1, TU_SHAPE(6), TU_VALS(-1, -1, -0.5, 0, 1, 1), 0);
        TU_CHECK(jg_hardtanh(x, 0, 6), 1, TU_SHAPE(6), TU_VALS(0, 0, 0, 0, 1, 6), 0);
        jg_set_requires_grad(x, true);
        jg_tensor *ys[3] = {jg_leaky_relu(x, 0.25), jg_hardtanh(x, -1, 1), jg_hardtanh(x, 0, 6)};
        const double want[3][6] = {
            {0.25, 0.25, 0.25, 0.25, 1, 1}, {0, 0, 1, 1, 0, 0}, {0, 0, 0, 0, 1, 0}};
        const char *names[3] = {"LeakyReluBackwardBackward0", "HardtanhBackwardBackward0",
                                "HardtanhBackwardBackward0"};
        for (int k = 0; k < 3; k++) {
            jg_tensor *root = jg_sum(ys[k]), *g = NULL, *gg = NULL;
            assert_int_equal(jg_autograd_grad(1, &root, NULL, 1, &x, JG_CREATE_GRAPH, &g), 0);
            TU_CHECK(g, 1, TU_SHAPE(6), want[k], 0);
            assert_true(jg_requires_grad(g));
            assert_string_equal(jg_grad_fn_name(g), names[k]);
            jg_tensor *r2 = jg_sum(jg_mul(g, g));
            assert_int_equal(jg_autograd_grad(1, &r2, NULL, 1, &x, 0, &gg), 0);
            TU_CHECK(gg, 1, TU_SHAPE(6), TU_VALS(0, 0, 0, 0, 0, 0), 0);
        }
    }
    assert_null(jg_leaky_relu(tu_tensor(JG_I64, 1, TU_SHAPE(2), TU_VALS(1, -2)), 0.01));
    TU_ERROR("\"leaky_relu_cpu\" not implemented for 'Long'");
    TU_CHECK(jg_hardtanh(tu_tensor(JG_I64, 1, TU_SHAPE(3), TU_VALS(1, -2, 7)), 0, 6), 1,
             TU_SHAPE(3), TU_VALS(1, 0, 6), 0);
}

static void test_embedding(void **state) {
    (void)state;
    const double wv[] = {1, 2, 3, 4, 5, 6, 7, 8};
    jg_tensor *w = tu_tensor(JG_F32, 2, TU_SHAPE(4, 2), wv);
    jg_set_requires_grad(w, true);
    jg_tensor *ix = tu_tensor(JG_I64, 2, TU_SHAPE(2, 2), TU_VALS(0, 2, 2, 1));
    jg_tensor *y = jg_embedding(w, ix, 2);
    TU_CHECK(y, 3, TU_SHAPE(2, 2, 2), TU_VALS(1, 2, 5, 6, 5, 6, 3, 4), 0);
    assert_int_equal(jg_backward(jg_sum(jg_mul(y, y)), NULL, 0), 0);
    /* row 0 once, row 1 once, row 2 (padding) none, row 3 unused */
    TU_CHECK(jg_grad(w), 2, TU_SHAPE(4, 2), TU_VALS(2, 4, 6, 8, 0, 0, 0, 0), 0);
    jg_clear_grad(w);
    /* int32 indices, no padding: duplicates are summed */
    jg_tensor *i32 = tu_tensor(JG_I32, 1, TU_SHAPE(3), TU_VALS(3, 3, 0));
    y = jg_embedding(w, i32, -1);
    TU_CHECK(y, 2, TU_SHAPE(3, 2), TU_VALS(7, 8, 7, 8, 1, 2), 0);
    assert_int_equal(jg_backward(jg_sum(y), NULL, 0), 0);
    TU_CHECK(jg_grad(w), 2, TU_SHAPE(4, 2), TU_VALS(1, 1, 0, 0, 0, 0, 2, 2), 0);
    jg_clear_grad(w);
    /* bad input */
    assert_null(jg_embedding(w, tu_tensor(JG_I64, 1, TU_SHAPE(1), TU_VALS(4)), -1));
    TU_ERROR("out of bounds");
    assert_null(jg_embedding(w, tu_tensor(JG_F32, 1, TU_SHAPE(1), TU_VALS(0)), -1));
    TU_ERROR("'indices' to have one of the following scalar types: Long, Int");
    assert_null(jg_embedding(w, ix, 4));
    TU_ERROR("Padding_idx must be within num_embeddings");
    /* compiled == eager, both backends */
    const char *backends[2] = {"interp", "c"};
    for (int b = 0; b < 2; b++) {
        if (b == 1 && !jg_compile_backend_available("c"))
            break;
        jg_tensor *in[2] = {w, ix}, *eout, *cout;
        assert_int_equal(p_emb(NULL, NULL, 2, in, &eout), 1);
        assert_int_equal(jg_backward(eout, NULL, 0), 0);
        jg_tensor *g = jg_clone(jg_grad(w));
        jg_clear_grad(w);
        jg_compile_options o = {.backend = backends[b], .fullgraph = true};
        jg_compiled *c = jg_compile(p_emb, NULL, &o);
        if (jg_compiled_call(c, NULL, 0, 2, in, &cout) != 1)
            fail_msg("%s", jg_last_error());
        TU_SAME(cout, eout);
        assert_int_equal(jg_backward(cout, NULL, 0), 0);
        TU_SAME(jg_grad(w), g);
        jg_clear_grad(w);
        /* an out-of-range index fails in the compiled program too */
        jg_tensor *bad[2] = {w, tu_tensor(JG_I64, 2, TU_SHAPE(2, 2), TU_VALS(0, 9, 1, 1))};
        assert_int_equal(jg_compiled_call(c, NULL, 0, 2, bad, &cout), -1);
        TU_ERROR("out of bounds");
        jg_compiled_free(c);
    }
}

static jg_tensor *f_ln(void *user, int n, jg_tensor *const *in) {
    (void)user;
    return jg_layer_norm(in[0], 2, n > 1 ? in[1] : NULL, n > 2 ? in[2] : NULL, 1e-5);
}

static void test_layer_norm(void **state) {
    (void)state;
    /* PyTorch 1.13, f64: F.layer_norm(x, [3], w, b) for x = [[1, 2, 4], [0, -1, 5]] */
    jg_tensor *x = tu_tensor(JG_F64, 2, TU_SHAPE(2, 3), TU_VALS(1, 2, 4, 0, -1, 5));
    jg_tensor *w = tu_tensor(JG_F64, 1, TU_SHAPE(3), TU_VALS(0.5, 1, 2));
    jg_tensor *b = tu_tensor(JG_F64, 1, TU_SHAPE(3), TU_VALS(0, 0.25, -1));
    TU_CHECK(jg_layer_norm(x, 1, w, b, 1e-5), 2, TU_SHAPE(2, 3),
             TU_VALS(-0.5345207657251, -0.01726038286257, 1.672603828626, -0.2540000696456,
                     -0.6390002437595, 1.794000766101),
             1e-10);
    /* gradients (and double backward through the composition) over 2 dims */
    jg_manual_seed(5);
    jg_tensor *in[3] = {jg_randn(JG_F64, 3, TU_SHAPE(2, 3, 4)), jg_randn(JG_F64, 2, TU_SHAPE(3, 4)),
                        jg_randn(JG_F64, 2, TU_SHAPE(3, 4))};
    for (int k = 0; k < 3; k++)
        jg_set_requires_grad(in[k], true);
    if (jg_gradcheck(f_ln, NULL, 3, in, 1e-6, 1e-6, 1e-5) < 0)
        fail_msg("%s", jg_last_error());
    dbl d = {f_ln, NULL};
    if (jg_gradcheck(f_grad, &d, 1, in, 1e-6, 1e-5, 1e-4) < 0)
        fail_msg("double backward: %s", jg_last_error());
    assert_null(jg_layer_norm(x, 3, NULL, NULL, 1e-5));
    TU_ERROR("normalized_shape must have 1 to 2 dims");
    assert_null(jg_layer_norm(x, 1, b, tu_tensor(JG_F64, 1, TU_SHAPE(2), TU_VALS(0, 0)), 1e-5));
    TU_ERROR("bias must have the normalized shape");
}

static void test_dropout(void **state) {
    (void)state;
    jg_manual_seed(2);
    jg_tensor *x = jg_full(JG_F32, 1, TU_SHAPE(4000), 1.0);
    jg_set_requires_grad(x, true);
    jg_tensor *y = jg_dropout(x, 0.25, true);
    double *v = malloc(4000 * sizeof *v);
    tu_values(y, v);
    int zeros = 0;
    for (int i = 0; i < 4000; i++) {
        if (v[i] == 0.0)
            zeros++;
        else
            assert_true(v[i] == (double)(1.0f / 0.75f) || v[i] == (double)(float)(1.0 / 0.75));
    }
    assert_true(zeros > 850 && zeros < 1150);
    /* the gradient is the same mask and scale */
    assert_int_equal(jg_backward(jg_sum(y), NULL, 0), 0);
    double *g = malloc(4000 * sizeof *g);
    tu_values(jg_grad(x), g);
    for (int i = 0; i < 4000; i++)
        assert_true((g[i] == 0.0) == (v[i] == 0.0));
    free(v);
    free(g);
    jg_tensor *same = jg_dropout(x, 0.25, false);
    assert_true(same == x);
    jg_tensor *none = jg_dropout(x, 1.0, true);
    double z[4];
    jg_tensor *head = jg_slice(none, 0, 0, 4);
    tu_values(head, z);
    assert_true(z[0] == 0.0 && z[3] == 0.0);
    assert_null(jg_dropout(x, 1.5, true));
    TU_ERROR("dropout probability has to be between 0 and 1, but got 1.5");
}

static const double ce_x[] = {1, 2, 0.5, 0, -1, 3, 2, 2, -2, 0.5, 0, 1};

static jg_tensor *f_ce(void *user, int n, jg_tensor *const *in) {
    (void)n;
    jg_loss_options o = {JG_REDUCTION_MEAN, -100, in[1], *(double *)user};
    jg_tensor *t = tu_tensor(JG_I64, 1, TU_SHAPE(4), TU_VALS(0, 2, 1, -100));
    return jg_cross_entropy_opts(in[0], t, &o);
}

static void test_loss_options(void **state) {
    (void)state;
    jg_tensor *x = tu_tensor(JG_F64, 2, TU_SHAPE(4, 3), ce_x);
    jg_tensor *t = tu_tensor(JG_I64, 1, TU_SHAPE(4), TU_VALS(0, 2, 1, -100));
    jg_tensor *w = tu_tensor(JG_F64, 1, TU_SHAPE(3), TU_VALS(0.5, 2, 1));
    /* PyTorch 1.13 values */
    jg_loss_options o = {JG_REDUCTION_MEAN, -100, w, 0.2};
    TU_CHECK(jg_cross_entropy_opts(x, t, &o), 0, NULL, TU_VALS(0.880856100892205), 1e-13);
    o = (jg_loss_options){JG_REDUCTION_SUM, -100, w, 0.0};
    TU_CHECK(jg_cross_entropy_opts(x, t, &o), 0, NULL, TU_VALS(2.20259493868959), 1e-13);
    o = (jg_loss_options){JG_REDUCTION_NONE, -100, NULL, 0.1};
    TU_CHECK(jg_cross_entropy_opts(x, t, &o), 1, TU_SHAPE(4),
             TU_VALS(1.44770211744128, 0.299217237090762, 0.835596654772429, 0), 1e-13);
    o = (jg_loss_options){JG_REDUCTION_MEAN, -100, w, 0.0};
    TU_CHECK(jg_nll_loss(jg_log_softmax(x, 1), t, &o), 0, NULL, TU_VALS(0.629312839625598), 1e-13);
    /* gradients (weight too) and double backward */
    double eps[2] = {0.0, 0.3};
    for (int k = 0; k < 2; k++) {
        jg_tensor *in[2] = {jg_clone(x), jg_clone(w)};
        jg_set_requires_grad(in[0], true);
        jg_set_requires_grad(in[1], true);
        if (jg_gradcheck(f_ce, &eps[k], 2, in, 1e-6, 1e-7, 1e-6) < 0)
            fail_msg("%s", jg_last_error());
        dbl d = {f_ce, &eps[k]};
        if (jg_gradcheck(f_grad, &d, 2, in, 1e-6, 1e-6, 1e-5) < 0)
            fail_msg("double backward: %s", jg_last_error());
    }
    /* bad input, with PyTorch's messages */
    jg_tensor *bad = tu_tensor(JG_I64, 1, TU_SHAPE(4), TU_VALS(0, 3, 1, 1));
    o = (jg_loss_options){JG_REDUCTION_MEAN, -100, w, 0.1};
    assert_null(jg_cross_entropy_opts(x, bad, &o));
    TU_ERROR("Target 3 is out of bounds.");
    o.label_smoothing = 1.5;
    assert_null(jg_cross_entropy_opts(x, t, &o));
    TU_ERROR("label_smoothing must be between 0.0 and 1.0. Got: 1.5");
    o = (jg_loss_options){JG_REDUCTION_MEAN, -100, tu_tensor(JG_F64, 1, TU_SHAPE(2), TU_VALS(1, 1)),
                          0.0};
    assert_null(jg_nll_loss(x, t, &o));
    TU_ERROR("weight tensor should be defined either for all 3 classes or no classes but got "
             "weight tensor of shape: [2]");
}

/* mean cross entropy with weights and smoothing of x [4, 3] at in[1] */
static int p_ce(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    jg_loss_options o = {JG_REDUCTION_MEAN, 1, user, 0.15};
    out[0] = jg_cross_entropy_opts(jg_mul(in[0], in[0]), in[1], &o);
    return out[0] ? 1 : -1;
}

static void test_loss_options_compiled(void **state) {
    (void)state;
    jg_tensor *w = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(0.5, 2, 1));
    jg_tensor *x = tu_tensor(JG_F32, 2, TU_SHAPE(4, 3), ce_x);
    jg_set_requires_grad(x, true);
    jg_tensor *t = tu_tensor(JG_I64, 1, TU_SHAPE(4), TU_VALS(0, 2, 1, 1));
    const char *backends[2] = {"interp", "c"};
    for (int b = 0; b < 2; b++) {
        if (b == 1 && !jg_compile_backend_available("c"))
            break;
        jg_tensor *in[2] = {x, t}, *eout, *cout;
        assert_int_equal(p_ce(w, NULL, 2, in, &eout), 1);
        assert_int_equal(jg_backward(eout, NULL, 0), 0);
        jg_tensor *g = jg_clone(jg_grad(x));
        jg_clear_grad(x);
        jg_compile_options o = {.backend = backends[b], .fullgraph = true};
        jg_compiled *c = jg_compile(p_ce, w, &o);
        if (jg_compiled_call(c, NULL, 0, 2, in, &cout) != 1)
            fail_msg("%s", jg_last_error());
        TU_SAME(cout, eout);
        assert_int_equal(jg_backward(cout, NULL, 0), 0);
        TU_SAME(jg_grad(x), g);
        jg_clear_grad(x);
        jg_tensor *bad[2] = {x, tu_tensor(JG_I64, 1, TU_SHAPE(4), TU_VALS(0, 7, 1, 1))};
        assert_int_equal(jg_compiled_call(c, NULL, 0, 2, bad, &cout), -1);
        TU_ERROR("Target 7 is out of bounds.");
        jg_compiled_free(c);
    }
}

static jg_tensor *f_smooth(void *user, int n, jg_tensor *const *in) {
    (void)user, (void)n;
    return jg_add(jg_smooth_l1_loss(in[0], in[1], JG_REDUCTION_SUM, 0.8),
                  jg_mse_loss(in[0], in[1], JG_REDUCTION_MEAN));
}

static void test_regression_losses(void **state) {
    (void)state;
    jg_tensor *x = tu_tensor(JG_F64, 1, TU_SHAPE(4), TU_VALS(0.5, -1, 2, 0.1));
    jg_tensor *y = tu_tensor(JG_F64, 1, TU_SHAPE(4), TU_VALS(0, 0.5, -1, 0.3));
    /* PyTorch 1.13 values */
    TU_CHECK(jg_mse_loss(x, y, JG_REDUCTION_MEAN), 0, NULL, TU_VALS(2.885), 1e-14);
    TU_CHECK(jg_l1_loss(x, y, JG_REDUCTION_SUM), 0, NULL, TU_VALS(5.2), 1e-14);
    TU_CHECK(jg_smooth_l1_loss(x, y, JG_REDUCTION_NONE, 0.8), 1, TU_SHAPE(4),
             TU_VALS(0.15625, 1.1, 2.6, 0.025), 1e-14);
    jg_tensor *in[2] = {jg_clone(x), jg_clone(y)};
    jg_set_requires_grad(in[0], true);
    jg_set_requires_grad(in[1], true);
    if (jg_gradcheck(f_smooth, NULL, 2, in, 1e-6, 1e-7, 1e-6) < 0)
        fail_msg("%s", jg_last_error());
    assert_null(jg_smooth_l1_loss(x, y, JG_REDUCTION_MEAN, -1.0));
    TU_ERROR("smooth_l1_loss does not support negative values for beta.");
    assert_null(jg_mse_loss(x, y, (jg_reduction)9));
    TU_ERROR("invalid reduction 9");
}

static jg_tensor *f_sdpa(void *user, int n, jg_tensor *const *in) {
    (void)n;
    return jg_scaled_dot_product_attention(in[0], in[1], in[2], user, 0.0, user == NULL);
}

static int p_sdpa(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *y = jg_scaled_dot_product_attention(in[0], in[1], in[2], NULL, 0.0, true);
    out[0] = y ? jg_sum(jg_mul(y, y)) : NULL;
    return out[0] ? 1 : -1;
}

static void test_sdpa(void **state) {
    (void)state;
    jg_manual_seed(6);
    jg_tensor *in[3] = {jg_randn(JG_F64, 3, TU_SHAPE(2, 3, 4)),
                        jg_randn(JG_F64, 3, TU_SHAPE(2, 3, 4)),
                        jg_randn(JG_F64, 3, TU_SHAPE(2, 3, 4))};
    for (int k = 0; k < 3; k++)
        jg_set_requires_grad(in[k], true);
    /* causal == an explicit lower-triangular bool mask */
    jg_tensor *tril = tu_tensor(JG_BOOL, 2, TU_SHAPE(3, 3), TU_VALS(1, 0, 0, 1, 1, 0, 1, 1, 1));
    TU_SAME(f_sdpa(NULL, 3, in), f_sdpa(tril, 3, in));
    if (jg_gradcheck(f_sdpa, NULL, 3, in, 1e-6, 1e-7, 1e-6) < 0)
        fail_msg("%s", jg_last_error());
    assert_null(jg_scaled_dot_product_attention(in[0], in[1], in[2], tril, 0.0, true));
    TU_ERROR("Explicit attn_mask should not be set when is_causal=True");
    const char *backends[2] = {"interp", "c"};
    for (int b = 0; b < 2; b++) {
        if (b == 1 && !jg_compile_backend_available("c"))
            break;
        jg_tensor *eout, *cout, *g[3];
        assert_int_equal(p_sdpa(NULL, NULL, 3, in, &eout), 1);
        assert_int_equal(jg_backward(eout, NULL, 0), 0);
        for (int k = 0; k < 3; k++) {
            g[k] = jg_clone(jg_grad(in[k]));
            jg_clear_grad(in[k]);
        }
        jg_compile_options o = {.backend = backends[b], .fullgraph = true};
        jg_compiled *c = jg_compile(p_sdpa, NULL, &o);
        if (jg_compiled_call(c, NULL, 0, 3, in, &cout) != 1)
            fail_msg("%s", jg_last_error());
        TU_SAME(cout, eout);
        assert_int_equal(jg_backward(cout, NULL, 0), 0);
        for (int k = 0; k < 3; k++) {
            TU_SAME(jg_grad(in[k]), g[k]);
            jg_clear_grad(in[k]);
        }
        jg_compiled_free(c);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_values_match_torch),
        TU_TEST(test_gradients_and_double_backward),
        TU_TEST(test_bad_input),
        TU_TEST(test_compiled_equals_eager),
        TU_TEST(test_gelu_tanh_saved_tanh_same_bits),
        TU_TEST(test_leaky_relu_hardtanh),
        TU_TEST(test_embedding),
        TU_TEST(test_layer_norm),
        TU_TEST(test_dropout),
        TU_TEST(test_loss_options),
        TU_TEST(test_loss_options_compiled),
        TU_TEST(test_regression_losses),
        TU_TEST(test_sdpa),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
