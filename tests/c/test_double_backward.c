/* Double backward (JG_CREATE_GRAPH) through compiled calls: gradients of
 * gradients equal eager ones bitwise, on both backends, through custom
 * functions (traced and opaque), jg_autograd_grad and mixed eager +
 * compiled programs; the values are PyTorch's. */
#include "testutil.h"
#include "testutil_fns.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_IN 4

/* ------------------------------------------------------ custom functions */

/* Cube: x**3 computed without history, backward g * 3x^2 from the saved
 * input (differentiable again: its ops record history under create_graph). */
static int cube_forward(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)n;
    jg_ctx_save_for_backward(ctx, 1, in);
    out[0] = jg_mul(in[0], jg_mul(in[0], in[0]));
    return out[0] ? 1 : -1;
}
static int cube_backward(jg_ctx *ctx, int n_out, jg_tensor *const *g, int n_in, jg_tensor **din) {
    (void)n_out, (void)n_in;
    jg_tensor *x = jg_ctx_saved(ctx, 0);
    din[0] = jg_mul(g[0], jg_mul_scalar(jg_mul(x, x), 3.0));
    return din[0] ? 1 : -1;
}
static const jg_function cube_fn = {"Cube", cube_forward, cube_backward, NULL};

/* Identity that saves its input; backward g * x (a custom gradient that
 * reads the saved input, so its second derivative is g). */
static int ident_forward(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)n;
    jg_ctx_save_for_backward(ctx, 1, in);
    out[0] = in[0]; /* returned as is (kept by the library) */
    return 1;
}
static int ident_backward(jg_ctx *ctx, int n_out, jg_tensor *const *g, int n_in, jg_tensor **din) {
    (void)n_out, (void)n_in;
    din[0] = jg_mul(g[0], jg_ctx_saved(ctx, 0));
    return din[0] ? 1 : -1;
}
static const jg_function ident_fn = {"Ident", ident_forward, ident_backward, NULL};

/* Square whose backward reads a value (so a compiled call makes it an
 * opaque node): 2 * g * x. */
static int osq_forward(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)n;
    jg_ctx_save_for_backward(ctx, 1, in);
    out[0] = jg_mul(in[0], in[0]);
    return out[0] ? 1 : -1;
}
static int osq_backward(jg_ctx *ctx, int n_out, jg_tensor *const *g, int n_in, jg_tensor **din) {
    (void)n_out, (void)n_in;
    jg_tensor *x = jg_ctx_saved(ctx, 0);
    double v = jg_item(jg_sum(x)); /* reads a value: not traceable */
    din[0] = jg_mul(jg_mul_scalar(g[0], isnan(v) ? v : 2.0), x);
    return din[0] ? 1 : -1;
}
static const jg_function osq_fn = {"OpaqueSquare", osq_forward, osq_backward, NULL};

/* ------------------------------------------------------------- programs */

/* sum(x ** 3) */
static int p_cube(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    out[0] = jg_sum(jg_pow_scalar(in[0], 3.0));
    return out[0] ? 1 : -1;
}

/* sum(exp(tanh(x)) * x) */
static int p_chain(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    out[0] = jg_sum(jg_mul(jg_exp(jg_tanh(in[0])), in[0]));
    return out[0] ? 1 : -1;
}

/* sum(tanh(a @ b)) */
static int p_matmul(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    out[0] = jg_sum(jg_tanh(jg_matmul(in[0], in[1])));
    return out[0] ? 1 : -1;
}

/* sum(x * x): one input, two contributions */
static int p_square(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    out[0] = jg_sum(jg_mul(in[0], in[0]));
    return out[0] ? 1 : -1;
}

/* sum(Cube(tanh(x)) * w) */
static int p_cubefn(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *t = jg_tanh(in[0]);
    out[0] = jg_sum(jg_mul(tf_apply1(&cube_fn, 1, &t, NULL, 0), in[1]));
    return out[0] ? 1 : -1;
}

/* sum(Ident(x) * x) */
static int p_ident(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    out[0] = jg_sum(jg_mul(tf_apply1(&ident_fn, 1, in, NULL, 0), in[0]));
    return out[0] ? 1 : -1;
}

/* sum(OpaqueSquare(exp(x)) * w) */
static int p_opaque(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *t = jg_exp(in[0]);
    out[0] = jg_sum(jg_mul(tf_apply1(&osq_fn, 1, &t, NULL, 0), in[1]));
    return out[0] ? 1 : -1;
}

/* abs(mean(p)) */
static int p_absmean(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    out[0] = jg_abs(jg_mean(in[0]));
    return out[0] ? 1 : -1;
}

/* two outputs: sum(tanh(x) * x) and exp(tanh(x)); the tests use only the
 * first */
static int p_two(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *t = jg_tanh(in[0]);
    out[0] = jg_sum(jg_mul(t, in[0]));
    out[1] = jg_exp(t);
    return out[0] && out[1] ? 2 : -1;
}

/* --------------------------------------------------------------- harness */

typedef struct {
    jg_program_fn fn;
    int n_in;
    int ndim[MAX_IN];
    int64_t shape[MAX_IN][2];
    jg_dtype dtype;
} prog;

/* What one run produced: first derivatives (with history) and the leaves'
 * .grad after backward of the gradient penalty sum(g * g). */
typedef struct {
    jg_tensor *x[MAX_IN];
    jg_tensor *g[MAX_IN];
    jg_tensor *grad[MAX_IN];
} result;

static void result_free(result *r) {
    for (int i = 0; i < MAX_IN; i++) {
        jg_release(r->x[i]);
        jg_release(r->g[i]);
        jg_release(r->grad[i]);
    }
}

/* backend NULL: eager; else compiled with that backend.  Leaves come from
 * a fixed seed, so every run sees the same values. */
static void run(const prog *p, const char *backend, result *r) {
    memset(r, 0, sizeof *r);
    jg_compiled *c = NULL;
    if (backend)
        assert_non_null(c = jg_compile(p->fn, NULL, &(jg_compile_options){.backend = backend}));
    jg_scope_push();
    jg_manual_seed(7);
    jg_tensor *x[MAX_IN], *out[JG_MAX_OUTPUTS];
    for (int i = 0; i < p->n_in; i++) {
        x[i] = jg_randn(p->dtype, p->ndim[i], p->shape[i]);
        jg_set_requires_grad(x[i], true);
    }
    int n_out =
        c ? jg_compiled_call(c, NULL, 0, p->n_in, x, out) : p->fn(NULL, NULL, p->n_in, x, out);
    assert_true(n_out >= 1);
    jg_tensor *g[MAX_IN];
    assert_int_equal(
        jg_autograd_grad(1, out, NULL, p->n_in, x, JG_CREATE_GRAPH | JG_ALLOW_UNUSED, g), 0);
    jg_tensor *pen = NULL;
    for (int i = 0; i < p->n_in; i++) {
        r->g[i] = jg_retain(g[i]);
        if (g[i] && jg_requires_grad(g[i])) {
            jg_tensor *s = jg_sum(jg_mul(g[i], g[i]));
            pen = pen ? jg_add(pen, s) : s;
        }
    }
    if (pen)
        assert_int_equal(jg_backward(pen, NULL, 0), 0);
    for (int i = 0; i < p->n_in; i++) {
        r->x[i] = jg_retain(x[i]);
        r->grad[i] = jg_retain(jg_grad(x[i]));
    }
    jg_scope_pop();
    jg_compiled_free(c);
}

static void check_same_result(const result *a, const result *b, int n) {
    for (int i = 0; i < n; i++) {
        assert_int_equal(a->g[i] != NULL, b->g[i] != NULL);
        if (a->g[i])
            TU_SAME(a->g[i], b->g[i]);
        assert_int_equal(a->grad[i] != NULL, b->grad[i] != NULL);
        if (a->grad[i])
            TU_SAME(a->grad[i], b->grad[i]);
    }
}

/* compiled (interp, and c where available) == eager, bitwise */
static void check_program(const prog *p, result *eager) {
    run(p, NULL, eager);
    const char *backends[] = {"interp", "c"};
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        result r;
        run(p, backends[b], &r);
        check_same_result(eager, &r, p->n_in);
        result_free(&r);
    }
}

static void values(const jg_tensor *t, double *out) {
    tu_values(t, out);
}

/* ----------------------------------------------------------------- tests */

/* d/dx sum(x^3) = 3x^2; backward of sum((3x^2)^2) gives 36 x^3 */
static void test_cube_second_derivative(void **state) {
    (void)state;
    prog p = {p_cube, 1, {1}, {{5}}, JG_F64};
    result e;
    check_program(&p, &e);
    double x[5], g[5], gg[5];
    values(e.x[0], x);
    values(e.g[0], g);
    values(e.grad[0], gg);
    for (int i = 0; i < 5; i++) {
        assert_true(fabs(g[i] - 3 * x[i] * x[i]) <= 1e-12 * (1 + fabs(g[i])));
        assert_true(fabs(gg[i] - 36 * x[i] * x[i] * x[i]) <= 1e-12 * (1 + fabs(gg[i])));
    }
    result_free(&e);
}

static void test_chain_tanh_exp(void **state) {
    (void)state;
    prog p = {p_chain, 1, {2}, {{2, 3}}, JG_F32};
    result e;
    check_program(&p, &e);
    result_free(&e);
    p.dtype = JG_F64;
    check_program(&p, &e);
    result_free(&e);
}

static void test_matmul(void **state) {
    (void)state;
    prog p = {p_matmul, 2, {2, 2}, {{2, 3}, {3, 4}}, JG_F64};
    result e;
    check_program(&p, &e);
    assert_non_null(e.grad[0]);
    assert_non_null(e.grad[1]);
    result_free(&e);
}

static void test_input_used_twice(void **state) {
    (void)state;
    prog p = {p_square, 1, {1}, {{4}}, JG_F32};
    result e;
    check_program(&p, &e);
    result_free(&e);
}

/* a custom function whose backward is itself differentiable (traced) */
static void test_custom_differentiable_backward(void **state) {
    (void)state;
    prog p = {p_cubefn, 2, {1, 1}, {{4}, {4}}, JG_F64};
    result e;
    check_program(&p, &e);
    assert_non_null(e.grad[0]);
    assert_non_null(e.grad[1]);
    result_free(&e);
}

/* PyTorch: y = Ident(x) * x with backward g * x_saved: g = x*x + x, and the
 * saved input keeps the input's own history (it is not the call's output),
 * so dg/dx = x (the saved x) + x (mul's saved x) + x (Ident's backward of the
 * output's path) = 3x; the penalty sum(g^2) gives 2 g 3x. */
static void test_identity_function_saved_input(void **state) {
    (void)state;
    prog p = {p_ident, 1, {1}, {{3}}, JG_F64};
    result e;
    check_program(&p, &e);
    double x[3], g[3], gg[3];
    values(e.x[0], x);
    values(e.g[0], g);
    values(e.grad[0], gg);
    for (int i = 0; i < 3; i++) {
        assert_true(fabs(g[i] - (x[i] * x[i] + x[i])) <= 1e-12 * (1 + fabs(g[i])));
        assert_true(fabs(gg[i] - 2 * g[i] * 3 * x[i]) <= 1e-12 * (1 + fabs(gg[i])));
    }
    result_free(&e);
}

/* an opaque custom node (its backward reads a value) */
static void test_opaque_custom(void **state) {
    (void)state;
    prog p = {p_opaque, 2, {1, 1}, {{3}, {3}}, JG_F64};
    result e;
    check_program(&p, &e);
    jg_compiled *c = jg_compile(p_opaque, NULL, NULL);
    jg_tensor *in[2] = {e.x[0], e.x[1]}, *o;
    assert_int_equal(jg_compiled_call(c, NULL, 0, 2, in, &o), 1);
    char *graph = jg_compiled_graph(c, 0);
    assert_non_null(strstr(graph, "opaque"));
    free(graph);
    jg_compiled_free(c);
    assert_non_null(e.grad[0]);
    assert_non_null(e.grad[1]);
    result_free(&e);
}

/* PyTorch: the second derivative of abs(mean(p)) is zeros */
static void test_abs_mean_second_derivative(void **state) {
    (void)state;
    prog p = {p_absmean, 1, {1}, {{4}}, JG_F64};
    result e;
    check_program(&p, &e);
    assert_non_null(e.grad[0]);
    TU_CHECK(e.grad[0], 1, TU_SHAPE(4), TU_VALS(0, 0, 0, 0), 0);
    result_free(&e);
}

/* only one of two outputs gets a gradient (a backward for that mask) */
static void test_one_of_two_outputs(void **state) {
    (void)state;
    prog p = {p_two, 1, {1}, {{3}}, JG_F64};
    result e;
    check_program(&p, &e);
    result_free(&e);
}

/* eager code before and after a compiled call, x also used eagerly: the
 * compiled call's contributions join eager ones as in eager mode.  With
 * `square`, the result depends on the call's output nonlinearly, so the
 * second backward sends a gradient into the compiled node as well as into
 * the recomputed forward, where eager sums both at each forward node first:
 * equal up to rounding there, bitwise otherwise. */
static void mixed(const char *backend, bool square, result *r) {
    memset(r, 0, sizeof *r);
    jg_compiled *c = NULL;
    if (backend)
        assert_non_null(c = jg_compile(p_chain, NULL, &(jg_compile_options){.backend = backend}));
    jg_scope_push();
    jg_manual_seed(11);
    jg_tensor *x = jg_randn(JG_F64, 1, TU_SHAPE(4)), *o;
    jg_set_requires_grad(x, true);
    jg_tensor *h = jg_mul_scalar(jg_sigmoid(x), 1.5);
    if (c)
        assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &h, &o), 1);
    else
        assert_int_equal(p_chain(NULL, NULL, 1, &h, &o), 1);
    jg_tensor *z = jg_add(square ? jg_mul(o, o) : jg_mul_scalar(o, 3.0), jg_sum(jg_mul(x, x)));
    jg_tensor *g;
    assert_int_equal(jg_autograd_grad(1, &z, NULL, 1, &x, JG_CREATE_GRAPH, &g), 0);
    r->g[0] = jg_retain(g);
    assert_int_equal(jg_backward(jg_sum(jg_mul(g, g)), NULL, 0), 0);
    r->grad[0] = jg_retain(jg_grad(x));
    jg_scope_pop();
    jg_compiled_free(c);
}

static void test_mixed_eager_compiled(void **state) {
    (void)state;
    result e, r;
    mixed(NULL, false, &e);
    mixed("interp", false, &r);
    check_same_result(&e, &r, 1);
    result_free(&r);
    if (jg_compile_backend_available("c")) {
        mixed("c", false, &r);
        check_same_result(&e, &r, 1);
        result_free(&r);
    }
    result_free(&e);
    /* nonlinear in the output: first derivatives still bitwise */
    mixed(NULL, true, &e);
    mixed("interp", true, &r);
    TU_SAME(e.g[0], r.g[0]);
    double a[4], b[4];
    tu_values(e.grad[0], a);
    tu_values(r.grad[0], b);
    for (int i = 0; i < 4; i++)
        assert_true(fabs(a[i] - b[i]) <= 1e-13 * fabs(a[i]));
    result_free(&r);
    result_free(&e);
}

/* sum(tanh(d @ W) * x) with W captured (user; lifted when it requires grad)
 * and d data that requires no grad */
static int p_captured(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    out[0] = jg_sum(jg_mul(jg_tanh(jg_matmul(in[0], user)), in[1]));
    return out[0] ? 1 : -1;
}

/* sum(exp(a) * (b + b * a)), called with the same tensor twice */
static int p_ab(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    out[0] = jg_sum(jg_mul(jg_exp(in[0]), jg_add(in[1], jg_mul(in[1], in[0]))));
    return out[0] ? 1 : -1;
}

/* gradient penalty over x and W of p_captured, or over x of p_ab(x, x) */
static void special(int which, const char *backend, result *r) {
    memset(r, 0, sizeof *r);
    jg_program_fn fn = which == 0 ? p_captured : p_ab;
    jg_scope_push();
    jg_manual_seed(5);
    jg_tensor *W = jg_randn(JG_F64, 2, TU_SHAPE(3, 2)), *d = jg_randn(JG_F64, 2, TU_SHAPE(4, 3));
    jg_tensor *x = jg_randn(JG_F64, 2, TU_SHAPE(4, 2)), *o;
    jg_set_requires_grad(W, true);
    jg_set_requires_grad(x, true);
    jg_compiled *c = NULL;
    if (backend)
        assert_non_null(c = jg_compile(fn, W, &(jg_compile_options){.backend = backend}));
    jg_tensor *in[2] = {which == 0 ? d : x, x};
    if (c)
        assert_int_equal(jg_compiled_call(c, NULL, 0, 2, in, &o), 1);
    else
        assert_int_equal(fn(W, NULL, 2, in, &o), 1);
    jg_tensor *wrt[2] = {x, W}, *g[2] = {0};
    int nw = which == 0 ? 2 : 1;
    assert_int_equal(jg_autograd_grad(1, &o, NULL, nw, wrt, JG_CREATE_GRAPH, g), 0);
    jg_tensor *pen = jg_sum(jg_mul(g[0], g[0]));
    if (nw == 2)
        pen = jg_add(pen, jg_sum(jg_mul(g[1], g[1])));
    assert_int_equal(jg_backward(pen, NULL, 0), 0);
    for (int i = 0; i < nw; i++) {
        r->g[i] = jg_retain(g[i]);
        r->grad[i] = jg_retain(jg_grad(wrt[i]));
        assert_non_null(r->grad[i]);
    }
    assert_null(jg_grad(d));
    jg_scope_pop();
    jg_compiled_free(c);
}

/* a data input that requires no grad, a captured weight that does (a lifted
 * graph input), and one tensor passed twice (one graph input, several
 * contributions) */
static void test_data_captured_and_repeated_inputs(void **state) {
    (void)state;
    const char *backends[] = {"interp", "c"};
    for (int which = 0; which < 2; which++) {
        result e;
        special(which, NULL, &e);
        for (int b = 0; b < 2; b++) {
            if (!jg_compile_backend_available(backends[b]))
                continue;
            result r;
            special(which, backends[b], &r);
            check_same_result(&e, &r, 2);
            result_free(&r);
        }
        result_free(&e);
    }
}

/* third derivative of sum(x^3) is 6, through .backward(create_graph) */
static void test_third_order(void **state) {
    (void)state;
    jg_compiled *c = jg_compile(p_cube, NULL, NULL);
    jg_tensor *x = tu_tensor(JG_F64, 1, TU_SHAPE(2), TU_VALS(0.5, -2.0)), *o, *g, *h;
    jg_set_requires_grad(x, true);
    assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, &o), 1);
    assert_int_equal(jg_autograd_grad(1, &o, NULL, 1, &x, JG_CREATE_GRAPH, &g), 0);
    TU_CHECK(g, 1, TU_SHAPE(2), TU_VALS(0.75, 12.0), 0);
    jg_tensor *gs = jg_sum(g);
    assert_int_equal(jg_autograd_grad(1, &gs, NULL, 1, &x, JG_CREATE_GRAPH, &h), 0);
    TU_CHECK(h, 1, TU_SHAPE(2), TU_VALS(3.0, -12.0), 0);
    assert_int_equal(jg_backward(jg_sum(h), NULL, JG_CREATE_GRAPH), 0);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(2), TU_VALS(6.0, 6.0), 0);
    jg_clear_grad(x); /* a .grad with history refers back to x (PyTorch's cycle) */
    jg_compiled_free(c);
}

/* .backward(create_graph) leaves .grad with history; a second backward of
 * it reaches the input again */
static void test_backward_create_graph(void **state) {
    (void)state;
    jg_compiled *c = jg_compile(p_cube, NULL, NULL);
    jg_tensor *x = tu_tensor(JG_F64, 1, TU_SHAPE(2), TU_VALS(1.0, 2.0)), *o;
    jg_set_requires_grad(x, true);
    assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, &o), 1);
    assert_int_equal(jg_backward(o, NULL, JG_CREATE_GRAPH), 0);
    jg_tensor *g = jg_retain(jg_grad(x));
    TU_CHECK(g, 1, TU_SHAPE(2), TU_VALS(3.0, 12.0), 0);
    assert_true(jg_requires_grad(g));
    jg_clear_grad(x);
    assert_int_equal(jg_backward(jg_sum(g), NULL, 0), 0);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(2), TU_VALS(6.0, 12.0), 0);
    jg_release(g);
    jg_compiled_free(c);
}

/* the recomputation reads the call's inputs: one changed in place since
 * the call is refused with eager's message, not used with its new values */
static void test_input_modified_in_place(void **state) {
    (void)state;
    jg_compiled *c = jg_compile(p_chain, NULL, NULL);
    jg_tensor *x = tu_tensor(JG_F64, 1, TU_SHAPE(2), TU_VALS(1.0, 2.0)), *o, *g;
    jg_set_requires_grad(x, true);
    jg_tensor *h = jg_mul_scalar(x, 2.0);
    assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &h, &o), 1);
    assert_int_equal(jg_mul_scalar_(h, 3.0), 0);
    assert_int_equal(jg_autograd_grad(1, &o, NULL, 1, &x, JG_CREATE_GRAPH, &g), -1);
    TU_ERROR("modified by an inplace operation");
    jg_compiled_free(c);
}

/* sum(exp(tanh(x)) * x) compiled on a leaf x that eager code also uses
 * (after the call, so its contributions reach x first): each use inside the
 * call adds into x's gradient on its own, after eager's, as in eager mode
 * (not summed inside the call first) -- first AND second derivatives */
static void interleaved(const char *backend, int seed, result *r) {
    memset(r, 0, sizeof *r);
    jg_compiled *c = NULL;
    if (backend)
        assert_non_null(c = jg_compile(p_chain, NULL, &(jg_compile_options){.backend = backend}));
    jg_scope_push();
    jg_manual_seed((uint64_t)seed);
    jg_tensor *x = jg_randn(JG_F32, 1, TU_SHAPE(16)), *o;
    jg_set_requires_grad(x, true);
    if (c)
        assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, &o), 1);
    else
        assert_int_equal(p_chain(NULL, NULL, 1, &x, &o), 1);
    jg_tensor *z = jg_add(jg_mul_scalar(o, 0.3), jg_sum(jg_mul(jg_tanh(x), x)));
    jg_tensor *g;
    assert_int_equal(jg_autograd_grad(1, &z, NULL, 1, &x, JG_CREATE_GRAPH, &g), 0);
    r->g[0] = jg_retain(g);
    assert_int_equal(jg_backward(jg_sum(jg_mul(g, g)), NULL, 0), 0);
    r->grad[0] = jg_retain(jg_grad(x));
    jg_scope_pop();
    jg_compiled_free(c);
}

static void test_uses_interleaved_with_eager(void **state) {
    (void)state;
    const char *backends[] = {"interp", "c"};
    for (int seed = 1; seed <= 8; seed++) {
        result e;
        interleaved(NULL, seed, &e);
        for (int b = 0; b < 2; b++) {
            if (!jg_compile_backend_available(backends[b]))
                continue;
            result r;
            interleaved(backends[b], seed, &r);
            check_same_result(&e, &r, 1);
            result_free(&r);
        }
        result_free(&e);
    }
}

/* (sum(k), sum(tanh(x))): only the second output gets a gradient */
static int p_unread(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    out[0] = jg_sum(in[1]);
    out[1] = jg_sum(jg_tanh(in[0]));
    return out[0] && out[1] ? 2 : -1;
}

/* an input changed in place after the call that only nodes outside this
 * backward read: eager does not fail, nor does the recomputation (it runs
 * only the nodes that lead to outputs with a gradient) */
static void test_unread_input_modified_in_place(void **state) {
    (void)state;
    const char *backends[] = {NULL, "interp", "c"};
    jg_tensor *ref = NULL;
    for (int b = 0; b < 3; b++) {
        if (backends[b] && !jg_compile_backend_available(backends[b]))
            continue;
        jg_compiled *c = NULL;
        if (backends[b])
            assert_non_null(
                c = jg_compile(p_unread, NULL, &(jg_compile_options){.backend = backends[b]}));
        jg_scope_push();
        jg_tensor *x = tu_tensor(JG_F64, 1, TU_SHAPE(2), TU_VALS(0.5, -1.0));
        jg_tensor *k = tu_tensor(JG_F64, 1, TU_SHAPE(2), TU_VALS(1.0, 2.0)), *o[2], *g;
        jg_set_requires_grad(x, true);
        jg_set_requires_grad(k, true);
        jg_tensor *in[2] = {x, k};
        assert_int_equal(
            c ? jg_compiled_call(c, NULL, 0, 2, in, o) : p_unread(NULL, NULL, 2, in, o), 2);
        bool prev = jg_set_grad_enabled(false);
        assert_int_equal(jg_mul_scalar_(k, 3.0), 0);
        jg_set_grad_enabled(prev);
        assert_int_equal(jg_autograd_grad(1, &o[1], NULL, 1, &x, JG_CREATE_GRAPH, &g), 0);
        assert_int_equal(jg_backward(jg_sum(jg_mul(g, g)), NULL, 0), 0);
        if (!ref)
            ref = jg_retain(jg_grad(x));
        else
            TU_SAME(ref, jg_grad(x));
        jg_scope_pop();
        jg_compiled_free(c);
    }
    jg_release(ref);
}

/* A leaf made by requires_grad on a view of a tensor that does not require
 * grad (jg_reshape, then jg_set_requires_grad): its first and second
 * derivatives, .grad included, equal those of the same values as a leaf of
 * its own (a clone) bitwise.  Regression: saved for backward, such a view
 * became an alias that was another leaf, so a double backward lost every
 * term through the saved tensor (d2/dw2 sum(w^3) gave 2w, not 6w). */
static jg_tensor *view_kind(int kind, jg_tensor *base) {
    switch (kind) {
    case 0:
        return jg_reshape(base, 1, TU_SHAPE(6));
    case 1:
        return jg_view(base, 2, TU_SHAPE(3, 2));
    case 2:
        return jg_transpose(base, 0, 1);
    case 3:
        return jg_slice(base, 1, 1, 3);
    case 4: /* a view of a view */
        return jg_transpose(jg_slice(base, 0, 0, 1), 0, 1);
    default:
        return jg_expand(jg_slice(base, 0, 1, 2), 2, TU_SHAPE(4, 3));
    }
}

/* g = d/dw sum(w^3 + sin w) with history, d/dw sum(g*g) by jg_autograd_grad
 * and into .grad by jg_backward */
static void view_leaf_grads(jg_tensor *w, jg_tensor **g, jg_tensor **gg, jg_tensor **acc) {
    jg_tensor *f = jg_sum(jg_add(jg_mul(w, jg_mul(w, w)), jg_sin(w)));
    assert_int_equal(jg_autograd_grad(1, &f, NULL, 1, &w, JG_CREATE_GRAPH, g), 0);
    jg_tensor *s = jg_sum(jg_mul(*g, *g));
    assert_int_equal(jg_autograd_grad(1, &s, NULL, 1, &w, JG_RETAIN_GRAPH, gg), 0);
    jg_clear_grad(w);
    assert_int_equal(jg_backward(s, NULL, 0), 0);
    *acc = jg_grad(w);
}

static void test_view_leaf_double_backward(void **state) {
    (void)state;
    for (int kind = 0; kind < 6; kind++) {
        jg_scope_push();
        jg_tensor *base =
            tu_tensor(JG_F64, 2, TU_SHAPE(2, 3), TU_VALS(0.5, 2.0, -1.3, 0.7, -0.2, 1.1));
        for (int written = 0; written < 2; written++) {
            jg_tensor *w = view_kind(kind, base);
            assert_non_null(w);
            jg_set_requires_grad(w, true);
            if (written) { /* the base (no grad) written after: w stays that leaf */
                assert_int_equal(jg_mul_scalar_(base, 2.0), 0);
                assert_true(jg_is_leaf(w));
                assert_true(jg_requires_grad(w));
            }
            bool prev = jg_set_grad_enabled(false);
            jg_tensor *c = jg_clone(w); /* the same values, a leaf of its own */
            jg_set_grad_enabled(prev);
            jg_set_requires_grad(c, true);
            jg_tensor *g, *gg, *acc, *cg, *cgg, *cacc;
            view_leaf_grads(w, &g, &gg, &acc);
            view_leaf_grads(c, &cg, &cgg, &cacc);
            TU_SAME(g, cg);
            TU_SAME(gg, cgg);
            TU_SAME(acc, cacc);
            TU_SAME(gg, acc);
            /* d/dw sum(g^2) = 2 g (6w - sin w), g = 3w^2 + cos w */
            double wv[12], ggv[12];
            tu_values(w, wv);
            tu_values(gg, ggv);
            for (int64_t i = 0; i < jg_numel(w); i++) {
                double gi = 3 * wv[i] * wv[i] + cos(wv[i]);
                double want = 2 * gi * (6 * wv[i] - sin(wv[i]));
                assert_true(fabs(ggv[i] - want) <= 1e-12 * (1 + fabs(want)));
            }
            jg_clear_grad(w);
            jg_clear_grad(c);
        }
        /* w itself written in place: refused, a leaf that requires grad */
        jg_tensor *w = view_kind(kind, base);
        jg_set_requires_grad(w, true);
        assert_int_equal(jg_mul_scalar_(w, 2.0), -1);
        TU_ERROR("leaf Variable that requires grad");
        jg_scope_pop();
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_cube_second_derivative),
        TU_TEST(test_chain_tanh_exp),
        TU_TEST(test_matmul),
        TU_TEST(test_input_used_twice),
        TU_TEST(test_custom_differentiable_backward),
        TU_TEST(test_identity_function_saved_input),
        TU_TEST(test_opaque_custom),
        TU_TEST(test_abs_mean_second_derivative),
        TU_TEST(test_one_of_two_outputs),
        TU_TEST(test_mixed_eager_compiled),
        TU_TEST(test_data_captured_and_repeated_inputs),
        TU_TEST(test_uses_interleaved_with_eager),
        TU_TEST(test_unread_input_modified_in_place),
        TU_TEST(test_third_order),
        TU_TEST(test_backward_create_graph),
        TU_TEST(test_input_modified_in_place),
        TU_TEST(test_view_leaf_double_backward),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
