/* jg_compile end to end: tracing, guards and the cache, graph breaks, and the
 * central promise — compiled gradients are bitwise equal to eager ones. */
#include "testutil.h"
#include "testutil_fns.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ programs */

/* sum(x * x) */
static int p_square(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    out[0] = jg_sum(jg_mul(in[0], in[0]));
    return out[0] ? 1 : -1;
}

/* (a * (b + b)).sum() for two inputs that may be the same tensor */
static int p_ab(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    out[0] = jg_sum(jg_mul(jg_exp(in[0]), jg_add(in[1], jg_mul(in[1], in[0]))));
    return out[0] ? 1 : -1;
}

/* views: reshape, slice, transpose of a [6] input */
static int p_views(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *m = jg_reshape(in[0], 2, TU_SHAPE(2, 3));
    jg_tensor *s = jg_slice(m, 1, 1, 3);  /* [2, 2] */
    jg_tensor *t = jg_transpose(s, 0, 1); /* [2, 2] */
    jg_tensor *y = jg_mul(jg_sigmoid(t), jg_slice(m, 1, 0, 2));
    out[0] = jg_sum(jg_mul(y, jg_reshape(in[1], 2, TU_SHAPE(2, 2))));
    return out[0] ? 1 : -1;
}

/* two outputs: y = x * 3 (used or not) and z = exp(x) */
static int p_two(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *t = jg_tanh(in[0]);
    out[0] = jg_mul(t, in[0]);
    out[1] = jg_exp(t);
    return out[0] && out[1] ? 2 : -1;
}

/* uses a captured tensor (user) that requires grad */
static int p_captured(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    jg_tensor *w = user;
    out[0] = jg_sum(jg_mul(jg_tanh(in[0]), w));
    return out[0] ? 1 : -1;
}

/* args: a double scale */
static int p_args(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)n;
    double s = args ? *(const double *)args : 1.0;
    out[0] = jg_sum(jg_mul_scalar(in[0], s));
    return out[0] ? 1 : -1;
}

/* reads a value: data-dependent */
static int p_item(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *s = jg_sum(in[0]);
    double v = jg_item(s);
    if (v != v)
        return -1;
    out[0] = v > 0 ? jg_mul_scalar(s, 2) : jg_neg(s);
    return 1;
}

static int p_fail(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)out;
    if (args && *(const int *)args == 1) {
        jg_tensor *r = jg_reshape(in[0], 1, TU_SHAPE(7)); /* bad shape: error */
        (void)r;
        return -1;
    }
    if (args && *(const int *)args == 2)
        return 0; /* no outputs */
    if (args && *(const int *)args == 3) {
        out[0] = NULL;
        return 1;
    }
    if (n < 1)
        return -1;
    out[0] = jg_sum(in[0]);
    return 1;
}

/* returns an input unchanged plus a computed value */
static int p_passthrough(void *user, const void *args, int n, jg_tensor *const *in,
                         jg_tensor **out) {
    (void)user, (void)args, (void)n;
    out[0] = in[0];
    out[1] = jg_mul(in[0], in[0]);
    return 2;
}

/* ------------------------------------------------------------ helpers */

static jg_tensor *leaf(jg_dtype dt, int ndim, const int64_t *shape) {
    jg_tensor *t = jg_randn(dt, ndim, shape);
    jg_set_requires_grad(t, true);
    return t;
}

/* A copy of t's gradient (or NULL) that later backward calls cannot change. */
static jg_tensor *grad_copy(jg_tensor *t) {
    jg_tensor *g = jg_grad(t);
    return g ? jg_clone(g) : NULL;
}

#define MAXIN 8

/* Runs prog eagerly and compiled on the same inputs, backward through
 * output 0 (and the sum of the others), and checks outputs and every input
 * gradient are bitwise equal. */
static jg_compiled *check_same(jg_program_fn prog, void *user, const void *args, size_t args_size,
                               int n, jg_tensor *const *in) {
    jg_tensor *eout[JG_MAX_OUTPUTS], *cout[JG_MAX_OUTPUTS], *eg[MAXIN];
    for (int i = 0; i < n; i++)
        jg_clear_grad(in[i]);
    int ne = prog(user, args, n, in, eout);
    assert_true(ne >= 1);
    assert_int_equal(jg_backward(eout[0], NULL, 0), 0);
    for (int i = 0; i < n; i++) {
        eg[i] = grad_copy(in[i]);
        jg_clear_grad(in[i]);
    }
    jg_compiled *c = jg_compile(prog, user, NULL);
    assert_non_null(c);
    for (int rep = 0; rep < 2; rep++) { /* trace, then a cache hit */
        int nc = jg_compiled_call(c, args, args_size, n, in, cout);
        if (nc < 0)
            fail_msg("%s", jg_last_error());
        assert_int_equal(nc, ne);
        for (int j = 0; j < ne; j++)
            TU_SAME(cout[j], eout[j]);
        if (jg_backward(cout[0], NULL, 0) < 0)
            fail_msg("%s", jg_last_error());
        for (int i = 0; i < n; i++) {
            if (!eg[i]) {
                assert_null(jg_grad(in[i]));
                continue;
            }
            TU_SAME(jg_grad(in[i]), eg[i]);
            jg_clear_grad(in[i]);
        }
    }
    assert_int_equal(jg_compiled_entries(c), 1);
    assert_int_equal(jg_compiled_fallbacks(c), 0);
    return c;
}

/* ------------------------------------------------------------ gradients */

static void test_qk(void **state) {
    (void)state;
    jg_manual_seed(1);
    jg_tensor *in[2] = {leaf(JG_F32, 1, TU_SHAPE(16)), leaf(JG_F32, 1, TU_SHAPE(16))};
    jg_compiled_free(check_same(tf_qk, NULL, NULL, 0, 2, in));
}

static void test_square(void **state) {
    (void)state;
    jg_manual_seed(2);
    jg_tensor *in[1] = {leaf(JG_F64, 2, TU_SHAPE(3, 5))};
    jg_compiled_free(check_same(p_square, NULL, NULL, 0, 1, in));
}

static void test_mlp(void **state) {
    (void)state;
    jg_manual_seed(3);
    jg_tensor *in[4] = {jg_randn(JG_F32, 2, TU_SHAPE(8, 5)), leaf(JG_F32, 2, TU_SHAPE(5, 16)),
                        leaf(JG_F32, 1, TU_SHAPE(16)), leaf(JG_F32, 2, TU_SHAPE(16, 3))};
    jg_compiled_free(check_same(tf_mlp, NULL, NULL, 0, 4, in));
    jg_set_requires_grad(in[0], true); /* the data too */
    jg_compiled_free(check_same(tf_mlp, NULL, NULL, 0, 4, in));
}

static void test_cross_entropy(void **state) {
    (void)state;
    jg_manual_seed(4);
    jg_tensor *in[3] = {leaf(JG_F32, 2, TU_SHAPE(4, 3)), leaf(JG_F32, 1, TU_SHAPE(3)),
                        tu_tensor(JG_I64, 1, TU_SHAPE(4), TU_VALS(0, 2, 1, 2))};
    jg_compiled_free(check_same(tf_ce, NULL, NULL, 0, 3, in));
}

static void test_broadcast(void **state) {
    (void)state;
    jg_manual_seed(5);
    jg_tensor *in[3] = {leaf(JG_F32, 2, TU_SHAPE(3, 1)), leaf(JG_F32, 1, TU_SHAPE(4)),
                        leaf(JG_F32, 0, NULL)};
    jg_compiled_free(check_same(tf_bcast, NULL, NULL, 0, 3, in));
    /* mixed dtypes promote through recorded casts */
    jg_tensor *in2[3] = {leaf(JG_F64, 2, TU_SHAPE(3, 1)), leaf(JG_F32, 1, TU_SHAPE(4)),
                         leaf(JG_F32, 0, NULL)};
    jg_compiled_free(check_same(tf_bcast, NULL, NULL, 0, 3, in2));
}

static void test_views(void **state) {
    (void)state;
    jg_manual_seed(6);
    jg_tensor *in[2] = {leaf(JG_F64, 1, TU_SHAPE(6)), leaf(JG_F64, 1, TU_SHAPE(4))};
    jg_compiled_free(check_same(p_views, NULL, NULL, 0, 2, in));
}

static void test_same_tensor_twice(void **state) {
    (void)state;
    jg_manual_seed(7);
    jg_tensor *q = leaf(JG_F32, 1, TU_SHAPE(16));
    jg_tensor *in[2] = {q, q};
    jg_compiled *c = check_same(p_ab, NULL, NULL, 0, 2, in);
    /* one graph input for the two positions */
    char *s = jg_compiled_graph(c, 0);
    assert_non_null(s);
    assert_non_null(strstr(s, "forward(x0: f32[16]):"));
    free(s);
    /* a distinct tensor in position 1: the aliasing guard retraces */
    jg_tensor *k = leaf(JG_F32, 1, TU_SHAPE(16)), *out;
    assert_int_equal(jg_compiled_call(c, NULL, 0, 2, (jg_tensor *[]){q, k}, &out), 1);
    assert_int_equal(jg_compiled_entries(c), 2);
    jg_compiled_free(c);
}

static void test_inputs_are_views(void **state) {
    (void)state;
    jg_manual_seed(8);
    jg_tensor *x = leaf(JG_F64, 1, TU_SHAPE(8));
    jg_tensor *a = jg_slice(x, 0, 0, 4), *b = jg_slice(x, 0, 2, 6); /* overlapping views */
    jg_tensor *in[3] = {a, b, x};
    /* gradients reach x through the views' own history */
    jg_tensor *eout;
    assert_int_equal(p_ab(NULL, NULL, 2, in, &eout), 1);
    assert_int_equal(jg_backward(eout, NULL, 0), 0);
    jg_tensor *want = grad_copy(x);
    jg_clear_grad(x);
    jg_compiled *c = jg_compile(p_ab, NULL, NULL);
    jg_tensor *cout;
    assert_int_equal(jg_compiled_call(c, NULL, 0, 2, in, &cout), 1);
    TU_SAME(cout, eout);
    assert_int_equal(jg_backward(cout, NULL, 0), 0);
    TU_SAME(jg_grad(x), want);
    jg_compiled_free(c);
    /* views of a leaf as inputs (no history of their own: detached views) */
    jg_tensor *base = jg_randn(JG_F64, 1, TU_SHAPE(8));
    jg_tensor *u = jg_slice(base, 0, 0, 4), *w = jg_slice(base, 0, 4, 8);
    jg_set_requires_grad(u, true);
    jg_set_requires_grad(w, true);
    jg_tensor *in2[2] = {u, w};
    jg_compiled_free(check_same(p_ab, NULL, NULL, 0, 2, in2));
}

static void test_compose_with_eager(void **state) {
    (void)state;
    jg_manual_seed(9);
    jg_tensor *x = leaf(JG_F32, 2, TU_SHAPE(4, 4)), *w = leaf(JG_F32, 2, TU_SHAPE(4, 4));
    jg_tensor *k = leaf(JG_F32, 2, TU_SHAPE(4, 4));
    /* loss = sum(f(x', k) * w) + sum(f(w, x)) with x' = x*2 built outside */
    jg_tensor *e1, *e2;
    jg_tensor *x2 = jg_mul_scalar(x, 2);
    assert_int_equal(tf_qk(NULL, NULL, 2, (jg_tensor *[]){x2, k}, &e1), 1);
    assert_int_equal(p_ab(NULL, NULL, 2, (jg_tensor *[]){w, x}, &e2), 1);
    jg_tensor *eloss = jg_add(jg_mul(e1, jg_sum(w)), e2);
    assert_int_equal(jg_backward(eloss, NULL, JG_RETAIN_GRAPH), 0);
    assert_int_equal(jg_backward(eloss, NULL, 0), 0); /* twice: grads double */
    jg_tensor *gx = grad_copy(x), *gw = grad_copy(w), *gk = grad_copy(k);
    jg_clear_grad(x), jg_clear_grad(w), jg_clear_grad(k);

    jg_compiled *c1 = jg_compile(tf_qk, NULL, NULL), *c2 = jg_compile(p_ab, NULL, NULL);
    jg_tensor *o1, *o2;
    x2 = jg_mul_scalar(x, 2);
    assert_int_equal(jg_compiled_call(c1, NULL, 0, 2, (jg_tensor *[]){x2, k}, &o1), 1);
    assert_int_equal(jg_compiled_call(c2, NULL, 0, 2, (jg_tensor *[]){w, x}, &o2), 1);
    assert_string_equal(jg_grad_fn_name(o1), "CompiledFunctionBackward");
    jg_tensor *closs = jg_add(jg_mul(o1, jg_sum(w)), o2);
    TU_SAME(o1, e1);
    TU_SAME(o2, e2);
    TU_SAME(closs, eloss);
    assert_int_equal(jg_backward(closs, NULL, JG_RETAIN_GRAPH), 0);
    assert_int_equal(jg_backward(closs, NULL, 0), 0);
    TU_SAME(jg_grad(x), gx);
    TU_SAME(jg_grad(w), gw);
    TU_SAME(jg_grad(k), gk);
    /* the saved values are freed now, as eager frees them */
    assert_int_equal(jg_backward(closs, NULL, 0), -1);
    TU_ERROR("Trying to backward through the graph a second time");
    jg_compiled_free(c1);
    jg_compiled_free(c2);
}

static void test_outputs_outlive_compiled(void **state) {
    (void)state;
    jg_manual_seed(10);
    jg_tensor *q = leaf(JG_F32, 1, TU_SHAPE(16)), *k = leaf(JG_F32, 1, TU_SHAPE(16)), *o;
    jg_compiled *c = jg_compile(tf_qk, NULL, NULL);
    assert_int_equal(jg_compiled_call(c, NULL, 0, 2, (jg_tensor *[]){q, k}, &o), 1);
    jg_compiled_free(c); /* the node keeps its entry alive */
    assert_int_equal(jg_backward(o, NULL, 0), 0);
    assert_non_null(jg_grad(k));
}

static void test_partial_output_grads(void **state) {
    (void)state;
    jg_manual_seed(11);
    jg_tensor *x = leaf(JG_F64, 1, TU_SHAPE(5));
    jg_compiled *c = jg_compile(p_two, NULL, NULL);
    for (int which = 0; which < 3; which++) {
        jg_tensor *e[2], *o[2];
        assert_int_equal(p_two(NULL, NULL, 1, &x, e), 2);
        jg_tensor *el = which == 0   ? jg_sum(e[0])
                        : which == 1 ? jg_sum(e[1])
                                     : jg_sum(jg_mul(e[0], e[1]));
        assert_int_equal(jg_backward(el, NULL, 0), 0);
        jg_tensor *want = grad_copy(x);
        jg_clear_grad(x);
        assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, o), 2);
        jg_tensor *cl = which == 0   ? jg_sum(o[0])
                        : which == 1 ? jg_sum(o[1])
                                     : jg_sum(jg_mul(o[0], o[1]));
        assert_int_equal(jg_backward(cl, NULL, 0), 0);
        TU_SAME(jg_grad(x), want);
        jg_clear_grad(x);
    }
    assert_int_equal(jg_compiled_entries(c), 1);
    jg_compiled_free(c);
}

static void test_captured_requires_grad(void **state) {
    (void)state;
    jg_manual_seed(12);
    jg_tensor *w = leaf(JG_F32, 1, TU_SHAPE(6)), *x = leaf(JG_F32, 1, TU_SHAPE(6));
    jg_compiled *c = check_same(p_captured, w, NULL, 0, 1, &x);
    /* the captured tensor's gradient flows (it was lifted into an input) */
    jg_clear_grad(w);
    jg_tensor *e;
    assert_int_equal(p_captured(w, NULL, 1, &x, &e), 1);
    assert_int_equal(jg_backward(e, NULL, 0), 0);
    jg_tensor *want = grad_copy(w);
    jg_clear_grad(w);
    jg_clear_grad(x);
    jg_tensor *o;
    assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, &o), 1);
    assert_int_equal(jg_backward(o, NULL, 0), 0);
    TU_SAME(jg_grad(w), want);
    char *s = jg_compiled_graph(c, 0);
    assert_non_null(strstr(s, "lifted0: f32[6]"));
    free(s);
    /* no longer requiring grad: a guard miss; still an input (read at every call) */
    jg_set_requires_grad(w, false);
    assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, &o), 1);
    assert_int_equal(jg_compiled_entries(c), 2);
    s = jg_compiled_graph(c, 1);
    assert_non_null(strstr(s, "lifted0: f32[6]"));
    free(s);
    jg_compiled_free(c);
}

static void test_passthrough_output(void **state) {
    (void)state;
    jg_manual_seed(13);
    jg_tensor *x = leaf(JG_F32, 1, TU_SHAPE(3)), *o[2];
    jg_compiled *c = jg_compile(p_passthrough, NULL, NULL);
    assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, o), 2);
    assert_ptr_equal(o[0], x); /* the input itself, as eager returns it */
    assert_true(jg_is_leaf(o[0]));
    assert_int_equal(jg_backward(jg_sum(jg_add(o[0], o[1])), NULL, 0), 0);
    jg_tensor *e[2];
    jg_tensor *want = grad_copy(x);
    jg_clear_grad(x);
    assert_int_equal(p_passthrough(NULL, NULL, 1, &x, e), 2);
    assert_int_equal(jg_backward(jg_sum(jg_add(e[0], e[1])), NULL, 0), 0);
    TU_SAME(jg_grad(x), want);
    jg_compiled_free(c);
}

static void test_no_grad_call(void **state) {
    (void)state;
    jg_manual_seed(14);
    jg_tensor *q = leaf(JG_F32, 1, TU_SHAPE(16)), *k = leaf(JG_F32, 1, TU_SHAPE(16)), *o;
    jg_compiled *c = jg_compile(tf_qk, NULL, NULL);
    bool prev = jg_set_grad_enabled(false);
    assert_int_equal(jg_compiled_call(c, NULL, 0, 2, (jg_tensor *[]){q, k}, &o), 1);
    assert_false(jg_requires_grad(o));
    jg_set_grad_enabled(prev);
    char *s = jg_compiled_graph(c, 0);
    assert_non_null(strstr(s, "backward: none"));
    free(s);
    assert_int_equal(jg_compiled_call(c, NULL, 0, 2, (jg_tensor *[]){q, k}, &o), 1);
    assert_true(jg_requires_grad(o));
    assert_int_equal(jg_compiled_entries(c), 2);
    jg_compiled_free(c);
}

static void test_saved_modified_in_place(void **state) {
    (void)state;
    jg_manual_seed(15);
    jg_tensor *q = leaf(JG_F32, 1, TU_SHAPE(16)), *k = leaf(JG_F32, 1, TU_SHAPE(16)), *o;
    jg_compiled *c = jg_compile(tf_qk, NULL, NULL);
    assert_int_equal(jg_compiled_call(c, NULL, 0, 2, (jg_tensor *[]){q, k}, &o), 1);
    /* k itself is not saved (the mul saved q and k + k), as in eager */
    bool prev = jg_set_grad_enabled(false);
    assert_int_equal(jg_mul_scalar_(k, 2.0), 0);
    assert_int_equal(jg_mul_scalar_(q, 2.0), 0);
    jg_set_grad_enabled(prev);
    assert_int_equal(jg_backward(o, NULL, 0), -1);
    TU_ERROR("one of the variables needed for gradient computation has been modified by an "
             "inplace operation: [f32 [16]] is at version 1; expected version 0");
    assert_null(jg_grad(q));
    assert_null(jg_grad(k));
    jg_compiled_free(c);
}

/* With k + k not requiring grad, q's gradient reads only k + k: the mul
 * does not save q (as PyTorch), and changing q in place is harmless. */
static void test_unsaved_operand_modified_in_place(void **state) {
    (void)state;
    jg_manual_seed(15);
    jg_tensor *q = leaf(JG_F32, 1, TU_SHAPE(16)), *k = jg_randn(JG_F32, 1, TU_SHAPE(16)), *o;
    jg_tensor *want = jg_add(k, k);
    jg_compiled *c = jg_compile(tf_qk, NULL, NULL);
    assert_int_equal(jg_compiled_call(c, NULL, 0, 2, (jg_tensor *[]){q, k}, &o), 1);
    bool prev = jg_set_grad_enabled(false);
    assert_int_equal(jg_mul_scalar_(q, 2.0), 0);
    jg_set_grad_enabled(prev);
    assert_int_equal(jg_backward(o, NULL, 0), 0);
    TU_SAME(jg_grad(q), want);
    jg_compiled_free(c);
}

/* ------------------------------------------------------------ guards */

static void test_guards(void **state) {
    (void)state;
    jg_manual_seed(16);
    jg_compiled *c = jg_compile(p_args, NULL, NULL);
    jg_tensor *x3 = leaf(JG_F32, 1, TU_SHAPE(3)), *o;
    double s = 2.0;
    int want = 0;
#define CALL(x, args, size, entries)                                                               \
    do {                                                                                           \
        assert_int_equal(jg_compiled_call(c, (args), (size), 1, (jg_tensor *[]){x}, &o), 1);       \
        want = (entries);                                                                          \
        assert_int_equal(jg_compiled_entries(c), want);                                            \
    } while (0)
    CALL(x3, &s, sizeof s, 1);
    CALL(x3, &s, sizeof s, 1); /* hit */
    jg_tensor *y3 = leaf(JG_F32, 1, TU_SHAPE(3));
    CALL(y3, &s, sizeof s, 1); /* a different tensor, same guards: hit */
    s = 3.0;
    CALL(x3, &s, sizeof s, 2); /* args bytes */
    double v = jg_item(o);     /* the new scale is used */
    assert_true(v == jg_item(jg_sum(jg_mul_scalar(x3, 3.0))));
    s = 2.0;
    CALL(x3, &s, sizeof s, 2); /* back to entry 0: hit */
    jg_tensor *x4 = leaf(JG_F32, 1, TU_SHAPE(4));
    CALL(x4, &s, sizeof s, 3); /* shape */
    jg_tensor *x3d = leaf(JG_F64, 1, TU_SHAPE(3));
    CALL(x3d, &s, sizeof s, 4); /* dtype */
    jg_tensor *x3n = jg_randn(JG_F32, 1, TU_SHAPE(3));
    CALL(x3n, &s, sizeof s, 5); /* requires_grad */
    CALL(x3n, &s, sizeof s, 5);
    CALL(x3, &s, sizeof s, 5);
    CALL(x4, &s, sizeof s, 5);
    CALL(x3, NULL, 0, 6); /* args size */
#undef CALL
    jg_compiled_free(c);

    /* storage aliasing among inputs is part of the key */
    c = jg_compile(p_ab, NULL, NULL);
    jg_tensor *base = jg_randn(JG_F32, 1, TU_SHAPE(8));
    jg_tensor *u = jg_slice(base, 0, 0, 4), *w = jg_slice(base, 0, 4, 8);
    jg_tensor *a = jg_randn(JG_F32, 1, TU_SHAPE(4)), *b = jg_randn(JG_F32, 1, TU_SHAPE(4));
    assert_int_equal(jg_compiled_call(c, NULL, 0, 2, (jg_tensor *[]){a, b}, &o), 1);
    assert_int_equal(jg_compiled_call(c, NULL, 0, 2, (jg_tensor *[]){u, w}, &o), 1);
    assert_int_equal(jg_compiled_entries(c), 2);
    assert_int_equal(jg_compiled_call(c, NULL, 0, 2, (jg_tensor *[]){b, a}, &o), 1);
    assert_int_equal(jg_compiled_call(c, NULL, 0, 2, (jg_tensor *[]){w, u}, &o), 1);
    assert_int_equal(jg_compiled_entries(c), 2);
    jg_compiled_free(c);
}

static void log_run(void) {
    setenv("JITGRAD_LOG", "recompiles,graphs", 1);
    jg_compiled *c = jg_compile(p_square, NULL, NULL);
    unsetenv("JITGRAD_LOG");
    jg_tensor *a = leaf(JG_F32, 1, TU_SHAPE(3)), *b = leaf(JG_F32, 1, TU_SHAPE(4)), *o;
    assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &a, &o), 1);
    assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &b, &o), 1);
    assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &a, &o), 1);
    jg_compiled_free(c);
    setenv("JITGRAD_LOG", "recompiles", 1);
    c = jg_compile(p_ab, NULL, NULL);
    unsetenv("JITGRAD_LOG");
    assert_int_equal(jg_compiled_call(c, NULL, 0, 2, (jg_tensor *[]){a, a}, &o), 1);
    jg_tensor *a2 = leaf(JG_F32, 1, TU_SHAPE(3));
    assert_int_equal(jg_compiled_call(c, NULL, 0, 2, (jg_tensor *[]){a, a2}, &o), 1);
    jg_compiled_free(c);
}

static void test_log(void **state) {
    (void)state;
    char *s = tu_capture_stderr(log_run);
    assert_non_null(strstr(s, "jitgrad: recompiling (entry 1): input 0 shape [4] != [3]\n"));
    assert_non_null(strstr(s, "jitgrad: new entry 0\nforward(x0: f32[3]):\n"));
    assert_non_null(strstr(s, "backward(g0: f32[], x0: f32[3]):\n"));
    assert_null(strstr(s, "recompiling (entry 2)"));
    assert_non_null(strstr(s, "jitgrad: recompiling (entry 1): input 1 aliasing: a distinct tensor "
                              "!= the same tensor as input 0\n"));
    free(s);
}

/* ------------------------------------------------------------ printed graphs */

static void test_golden_graph(void **state) {
    (void)state;
    jg_tensor *q = leaf(JG_F32, 1, TU_SHAPE(16)), *k = leaf(JG_F32, 1, TU_SHAPE(16)), *o;
    jg_compiled *c = jg_compile(tf_qk, NULL, NULL);
    assert_int_equal(jg_compiled_call(c, NULL, 0, 2, (jg_tensor *[]){q, k}, &o), 1);
    char *s = jg_compiled_graph(c, 0);
    const char *golden = "forward(x0: f32[16], x1: f32[16]):\n"
                         "  %0 : f32[16] = add(x1, x1)\n"
                         "  %1 : f32[16] = mul(x0, %0)\n"
                         "  %2 : f32[] = sum(%1)\n"
                         "  return (%2, %0)\n"
                         "backward(g0: f32[], x0: f32[16], s0: f32[16]):\n"
                         "  %0 : f32[1] = reshape(g0, [1])\n"
                         "  %1 : f32[16] = expand(%0, [16])\n"
                         "  %2 : f32[16] = mul(%1, s0)\n"
                         "  %3 : f32[16] = mul(%1, x0)\n"
                         "  %4 : f32[16] = add(%3, %3)\n"
                         "  return (%2, %4, None)\n";
    if (strcmp(s, golden))
        fail_msg("printed graph differs:\n%s\nexpected:\n%s", s, golden);
    free(s);
    jg_compiled_free(c);
}

/* ------------------------------------------------------------ graph breaks, bad calls */

static void test_fullgraph_error(void **state) {
    (void)state;
    jg_tensor *x = leaf(JG_F32, 1, TU_SHAPE(3)), *o;
    jg_compiled *c = jg_compile(p_item, NULL, &(jg_compile_options){.fullgraph = true});
    assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, &o), -1);
    TU_ERROR("jg_compiled_call(fullgraph): the program cannot be captured in one graph: jg_item() "
             "read the values of traced tensor f32[] (value 1)");
    TU_ERROR("data-dependent code cannot be compiled");
    assert_int_equal(jg_compiled_entries(c), 0);
    assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, &o), -1); /* still usable */
    jg_compiled_free(c);
}

static void fallback_run(void) {
    jg_tensor *x = leaf(JG_F32, 1, TU_SHAPE(3)), *o = NULL, *e = NULL;
    jg_compiled *c = jg_compile(p_item, NULL, NULL);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, &o), 1);
        assert_int_equal(jg_backward(o, NULL, 0), 0);
    }
    jg_tensor *g = grad_copy(x);
    jg_clear_grad(x);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(p_item(NULL, NULL, 1, &x, &e), 1);
        assert_int_equal(jg_backward(e, NULL, 0), 0);
    }
    TU_SAME(jg_grad(x), g);
    /* a value read splits the program: two compiled graphs per call */
    assert_int_equal(jg_compiled_fallbacks(c), 0);
    assert_int_equal(jg_compiled_graphs_run(c), 6);
    assert_int_equal(jg_compiled_entries(c), 1);
    char *s = jg_compiled_graph(c, 0);
    assert_non_null(strstr(s, "entry 0 runs in pieces; its last call ran 2 graphs:\n"
                              "graph break 0: jg_item() read the values of f32[]\n"
                              "piece 0:\nforward("));
    free(s);
    jg_compiled_free(c);
}

static void test_fallback(void **state) {
    (void)state;
    char *s = tu_capture_stderr(fallback_run);
    assert_non_null(strstr(s, "jitgrad: graph break (entry 0): jg_item() read the values"));
    assert_non_null(strstr(s, "run as compiled pieces around each read"));
    free(s);
}

/* backward() through an input whose history continues outside the program:
 * a break that is no value read, so the call runs eagerly */
static int p_bwd_outside(void *user, const void *args, int n, jg_tensor *const *in,
                         jg_tensor **out) {
    (void)user, (void)args, (void)n;
    if (jg_backward(jg_sum(jg_mul(in[0], in[0])), NULL, 0) < 0)
        return -1;
    out[0] = jg_sum(jg_exp(in[0]));
    return out[0] ? 1 : -1;
}

static void fallback_eager_run(void) {
    jg_tensor *w = leaf(JG_F32, 1, TU_SHAPE(3)), *o = NULL;
    jg_tensor *x = jg_mul_scalar(w, 2.0); /* not a leaf: the gradient continues to w */
    jg_compiled *c = jg_compile(p_bwd_outside, NULL, NULL);
    for (int i = 0; i < 3; i++)
        assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, &o), 1);
    assert_int_equal(jg_compiled_fallbacks(c), 3);
    assert_int_equal(jg_compiled_graphs_run(c), 0);
    assert_non_null(jg_grad(w)); /* eager's backward reached w, three times */
    char *s = jg_compiled_graph(c, 0);
    assert_non_null(strstr(s, "entry 0 runs eagerly (graph break: "));
    assert_non_null(strstr(s, "no leaf"));
    free(s);
    jg_compiled_free(c);
}

static void test_fallback_eager(void **state) {
    (void)state;
    char *s = tu_capture_stderr(fallback_eager_run);
    assert_non_null(strstr(s, "jitgrad: graph break (entry 0): "));
    assert_non_null(strstr(s, "calls with these guards run eagerly"));
    free(s);
}

static void test_bad_calls(void **state) {
    (void)state;
    jg_tensor *x = leaf(JG_F32, 1, TU_SHAPE(3)), *o;
    jg_compiled *c = jg_compile(p_fail, NULL, NULL);
    assert_int_equal(jg_compiled_call(c, NULL, 0, 1, (jg_tensor *[]){NULL}, &o), -1);
    TU_ERROR("jg_compiled_call: input 0 is NULL");
    assert_int_equal(jg_compiled_call(c, NULL, 0, 1, NULL, &o), -1);
    TU_ERROR("bad input list");
    assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, NULL), -1);
    TU_ERROR("outputs is NULL");
    assert_int_equal(jg_compiled_call(c, NULL, 4, 1, &x, &o), -1);
    TU_ERROR("args is NULL but args_size is 4");
    int mode = 1;
    assert_int_equal(jg_compiled_call(c, &mode, sizeof mode, 1, &x, &o), -1);
    TU_ERROR("jg_compiled_call: the program failed while being traced: shape '[7]' is invalid "
             "for input of size 3");
    mode = 3;
    assert_int_equal(jg_compiled_call(c, &mode, sizeof mode, 1, &x, &o), -1);
    TU_ERROR("the program returned NULL for output 0");
    assert_int_equal(jg_compiled_call(c, NULL, 0, 0, NULL, &o), -1); /* n_inputs mismatch */
    TU_ERROR("the program failed while being traced");
    assert_int_equal(jg_compiled_entries(c), 0);
    /* the cache still works */
    assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, &o), 1);
    assert_int_equal(jg_compiled_entries(c), 1);
    assert_int_equal(jg_compiled_call(c, &mode, sizeof mode, 1, &x, &o), -1);
    assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, &o), 1);
    assert_int_equal(jg_compiled_entries(c), 1);
    mode = 2; /* no outputs is a valid program (it may only write its inputs) */
    assert_int_equal(jg_compiled_call(c, &mode, sizeof mode, 1, &x, &o), 0);
    assert_int_equal(jg_compiled_entries(c), 2);
    assert_null(jg_compile(NULL, NULL, NULL));
    TU_ERROR("program is NULL");
    assert_null(jg_compile(p_fail, NULL, &(jg_compile_options){.backend = "gpu"}));
    TU_ERROR("backend \"gpu\" is not available");
    assert_null(jg_compiled_graph(c, 5));
    TU_ERROR("entry 5 out of range (2 entries)");
    jg_compiled_free(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_qk),
        TU_TEST(test_square),
        TU_TEST(test_mlp),
        TU_TEST(test_cross_entropy),
        TU_TEST(test_broadcast),
        TU_TEST(test_views),
        TU_TEST(test_same_tensor_twice),
        TU_TEST(test_inputs_are_views),
        TU_TEST(test_compose_with_eager),
        TU_TEST(test_outputs_outlive_compiled),
        TU_TEST(test_partial_output_grads),
        TU_TEST(test_captured_requires_grad),
        TU_TEST(test_passthrough_output),
        TU_TEST(test_no_grad_call),
        TU_TEST(test_saved_modified_in_place),
        TU_TEST(test_unsaved_operand_modified_in_place),
        TU_TEST(test_guards),
        TU_TEST(test_log),
        TU_TEST(test_golden_graph),
        TU_TEST(test_fullgraph_error),
        TU_TEST(test_fallback),
        TU_TEST(test_fallback_eager),
        TU_TEST(test_bad_calls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
