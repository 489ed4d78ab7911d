/* The opsmath ops from C: values against PyTorch 1.13's (written here),
 * gradients against finite differences in f64 (first and second order),
 * NaN / tie / zero semantics, error messages, and compiled == eager bitwise
 * on both backends. */
#include "testutil.h"

#include <math.h>
#include <string.h>

static jg_tensor *t64(int ndim, const int64_t *shape, const double *v) {
    jg_tensor *t = tu_tensor(JG_F64, ndim, shape, v);
    jg_set_requires_grad(t, true);
    return t;
}

static const double X6[] = {0.5, -1.25, 2.0, 0.75, 3.0, -0.5};

static void test_opsmath_elementwise_values(void **state) {
    (void)state;
    jg_tensor *x = tu_tensor(JG_F64, 1, TU_SHAPE(3), TU_VALS(0.5, -1.25, 2.0));
    TU_CHECK(jg_sin(x), 1, TU_SHAPE(3), TU_VALS(sin(0.5), sin(-1.25), sin(2.0)), 1e-15);
    TU_CHECK(jg_cos(x), 1, TU_SHAPE(3), TU_VALS(cos(0.5), cos(-1.25), cos(2.0)), 1e-15);
    TU_CHECK(jg_erf(x), 1, TU_SHAPE(3), TU_VALS(erf(0.5), erf(-1.25), erf(2.0)), 1e-15);
    TU_CHECK(jg_clamp(x, true, -1.0, true, 1.0), 1, TU_SHAPE(3), TU_VALS(0.5, -1.0, 1.0), 0);
    jg_tensor *y = tu_tensor(JG_F64, 1, TU_SHAPE(3), TU_VALS(1.0, -2.0, 2.0));
    TU_CHECK(jg_maximum(x, y), 1, TU_SHAPE(3), TU_VALS(1.0, -1.25, 2.0), 0);
    TU_CHECK(jg_minimum(x, y), 1, TU_SHAPE(3), TU_VALS(0.5, -2.0, 2.0), 0);
    jg_tensor *p = tu_tensor(JG_F64, 1, TU_SHAPE(3), TU_VALS(2.0, 3.0, 0.5));
    TU_CHECK(jg_pow(p, y), 1, TU_SHAPE(3), TU_VALS(2.0, 1.0 / 9.0, 0.25), 1e-15);
    /* integer sin computes in float32 */
    jg_tensor *i = tu_tensor(JG_I64, 1, TU_SHAPE(2), TU_VALS(1, 2));
    assert_int_equal(jg_dtype_of(jg_sin(i)), JG_F32);
    assert_int_equal(jg_dtype_of(jg_pow(i, i)), JG_I64);
    TU_CHECK(jg_pow(i, i), 1, TU_SHAPE(2), TU_VALS(1, 4), 0);
}

/* maximum / minimum / clamp: NaN propagates, a tie keeps the first operand
 * (-0.0 vs 0.0), as PyTorch's kernels do */
static void test_opsmath_nan_and_signed_zero(void **state) {
    (void)state;
    jg_tensor *a = tu_tensor(JG_F32, 1, TU_SHAPE(4), TU_VALS(NAN, 1.0, -0.0, 0.0));
    jg_tensor *b = tu_tensor(JG_F32, 1, TU_SHAPE(4), TU_VALS(1.0, NAN, 0.0, -0.0));
    float v[4];
    jg_copy_to(jg_maximum(a, b), v, sizeof v);
    assert_true(isnan(v[0]) && isnan(v[1]) && signbit(v[2]) && !signbit(v[3]));
    jg_copy_to(jg_minimum(a, b), v, sizeof v);
    assert_true(isnan(v[0]) && isnan(v[1]) && signbit(v[2]) && !signbit(v[3]));
    jg_copy_to(jg_clamp_min(a, 0.0), v, sizeof v);
    assert_true(isnan(v[0]) && v[1] == 1.0f && signbit(v[2]) && !signbit(v[3]));
}

static void test_opsmath_reductions_values(void **state) {
    (void)state;
    jg_tensor *x = tu_tensor(JG_F64, 2, TU_SHAPE(2, 3), X6);
    TU_CHECK(jg_prod(x), 0, NULL, TU_VALS(0.5 * -1.25 * 2.0 * 0.75 * 3.0 * -0.5), 1e-15);
    TU_CHECK(jg_prod_dim(x, 1, true), 2, TU_SHAPE(2, 1), TU_VALS(-1.25, -1.125), 1e-15);
    /* values from torch.var / std / norm */
    TU_CHECK(jg_var(x, 1, (int[]){1}, 1.0, false), 1, TU_SHAPE(2),
             TU_VALS(2.6458333333333335, 3.1458333333333335), 1e-14);
    TU_CHECK(jg_std(x, 0, NULL, 0.0, false), 0, NULL, TU_VALS(1.4288690166235205), 1e-14);
    TU_CHECK(jg_norm(x, 2.0, 0, NULL, false), 0, NULL, TU_VALS(3.952847075210474), 1e-14);
    TU_CHECK(jg_norm(x, 1.0, 1, (int[]){0}, false), 1, TU_SHAPE(3), TU_VALS(1.25, 4.25, 2.5),
             1e-15);
    TU_CHECK(jg_norm(x, INFINITY, 1, (int[]){-1}, true), 2, TU_SHAPE(2, 1), TU_VALS(2.0, 3.0), 0);
    TU_CHECK(jg_cumsum(x, 1), 2, TU_SHAPE(2, 3), TU_VALS(0.5, -0.75, 1.25, 0.75, 3.75, 3.25), 0);
    TU_CHECK(jg_argmax(x), 0, NULL, TU_VALS(4), 0);
    TU_CHECK(jg_argmin_dim(x, 1, false), 1, TU_SHAPE(2), TU_VALS(1, 2), 0);
    jg_tensor *v, *m;
    assert_int_equal(jg_var_mean(x, 1, (int[]){0}, 0.0, false, &v, &m), 0);
    TU_CHECK(v, 1, TU_SHAPE(3), TU_VALS(0.015625, 4.515625, 1.5625), 1e-15);
    TU_CHECK(m, 1, TU_SHAPE(3), TU_VALS(0.625, 0.875, 0.75), 1e-15);
    jg_tensor *vals, *idx;
    assert_int_equal(jg_topk(x, 2, 1, true, &vals, &idx), 0);
    TU_CHECK(vals, 2, TU_SHAPE(2, 2), TU_VALS(2.0, 0.5, 3.0, 0.75), 0);
    TU_CHECK(idx, 2, TU_SHAPE(2, 2), TU_VALS(2, 0, 1, 0), 0);
    assert_int_equal(jg_sort(x, 0, true, &vals, &idx), 0);
    TU_CHECK(vals, 2, TU_SHAPE(2, 3), TU_VALS(0.75, 3.0, 2.0, 0.5, -1.25, -0.5), 0);
    TU_CHECK(idx, 2, TU_SHAPE(2, 3), TU_VALS(1, 1, 0, 0, 0, 1), 0);
    /* int32 cumsum and bool prod give int64 */
    jg_tensor *i = tu_tensor(JG_I32, 1, TU_SHAPE(3), TU_VALS(1, 2, 3));
    assert_int_equal(jg_dtype_of(jg_cumsum(i, 0)), JG_I64);
    TU_CHECK(jg_cumsum(i, 0), 1, TU_SHAPE(3), TU_VALS(1, 3, 6), 0);
    assert_int_equal(jg_dtype_of(jg_prod(jg_gt_scalar(i, 0))), JG_I64);
}

/* sort is stable; NaN sorts as the largest value */
static void test_opsmath_sort_stable_nan(void **state) {
    (void)state;
    jg_tensor *x = tu_tensor(JG_F32, 1, TU_SHAPE(7), TU_VALS(2.0, NAN, 1.0, 2.0, -1.0, NAN, 1.0));
    jg_tensor *v, *i;
    assert_int_equal(jg_sort(x, 0, false, &v, &i), 0);
    TU_CHECK(i, 1, TU_SHAPE(7), TU_VALS(4, 2, 6, 0, 3, 1, 5), 0);
    assert_int_equal(jg_sort(x, 0, true, &v, &i), 0);
    TU_CHECK(i, 1, TU_SHAPE(7), TU_VALS(1, 5, 0, 3, 2, 6, 4), 0);
    TU_CHECK(jg_argmax(x), 0, NULL, TU_VALS(1), 0);
    TU_CHECK(jg_argmin(x), 0, NULL, TU_VALS(1), 0);
}

/* gradients PyTorch gives at ties, zeros and clamp bounds */
static void test_opsmath_grad_special_points(void **state) {
    (void)state;
    jg_tensor *x = t64(1, TU_SHAPE(3), TU_VALS(1.0, 2.0, 3.0));
    jg_tensor *y = t64(1, TU_SHAPE(3), TU_VALS(1.0, 0.0, 3.0));
    assert_int_equal(jg_backward(jg_sum(jg_maximum(x, y)), NULL, 0), 0);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(3), TU_VALS(0.5, 1.0, 0.5), 0);
    TU_CHECK(jg_grad(y), 1, TU_SHAPE(3), TU_VALS(0.5, 0.0, 0.5), 0);
    jg_tensor *z = t64(1, TU_SHAPE(4), TU_VALS(1.0, 2.0, 0.5, NAN));
    assert_int_equal(jg_backward(jg_sum(jg_clamp(z, true, 1.0, true, 2.0)), NULL, 0), 0);
    TU_CHECK(jg_grad(z), 1, TU_SHAPE(4), TU_VALS(1, 1, 0, 0), 0);
    /* clamp with tensor bounds: PyTorch's masks, min > max included */
    jg_tensor *c = t64(1, TU_SHAPE(4), TU_VALS(1.0, 2.0, 3.0, 0.5));
    jg_tensor *lo = t64(1, TU_SHAPE(4), TU_VALS(2.0, 2.0, 0.0, 0.0));
    jg_tensor *hi = t64(1, TU_SHAPE(4), TU_VALS(2.5, 1.0, 2.0, 1.0));
    jg_tensor *cl = jg_clamp_tensor(c, lo, hi);
    TU_CHECK(cl, 1, TU_SHAPE(4), TU_VALS(2.0, 1.0, 2.0, 0.5), 0);
    assert_int_equal(jg_backward(jg_sum(cl), NULL, 0), 0);
    TU_CHECK(jg_grad(c), 1, TU_SHAPE(4), TU_VALS(0, 0, 0, 1), 0);
    TU_CHECK(jg_grad(lo), 1, TU_SHAPE(4), TU_VALS(1, 0, 0, 0), 0);
    TU_CHECK(jg_grad(hi), 1, TU_SHAPE(4), TU_VALS(0, 1, 1, 0), 0);
    /* prod with zeros: the product of the others, exactly */
    jg_tensor *p = t64(1, TU_SHAPE(3), TU_VALS(0.0, 2.0, 3.0));
    assert_int_equal(jg_backward(jg_prod(p), NULL, 0), 0);
    TU_CHECK(jg_grad(p), 1, TU_SHAPE(3), TU_VALS(6.0, 0.0, 0.0), 0);
    /* pow at 0: no NaN from 0 * log(0) */
    jg_tensor *b = t64(1, TU_SHAPE(2), TU_VALS(0.0, 2.0));
    jg_tensor *e = t64(1, TU_SHAPE(2), TU_VALS(2.0, 0.0));
    assert_int_equal(jg_backward(jg_sum(jg_pow(b, e)), NULL, 0), 0);
    TU_CHECK(jg_grad(b), 1, TU_SHAPE(2), TU_VALS(0.0, 0.0), 0);
    TU_CHECK(jg_grad(e), 1, TU_SHAPE(2), TU_VALS(0.0, log(2.0)), 1e-15);
    /* std of a constant: gradient 0, not NaN (PyTorch masks grad / (2 * 0)) */
    jg_tensor *k = t64(1, TU_SHAPE(3), TU_VALS(0.7, 0.7, 0.7));
    assert_int_equal(jg_backward(jg_std(k, 0, NULL, 0.0, false), NULL, 0), 0);
    TU_CHECK(jg_grad(k), 1, TU_SHAPE(3), TU_VALS(0.0, 0.0, 0.0), 0);
    /* the 2-norm of zeros: gradient 0, not NaN */
    jg_tensor *n = t64(1, TU_SHAPE(2), TU_VALS(0.0, 0.0));
    assert_int_equal(jg_backward(jg_norm(n, 2.0, 0, NULL, false), NULL, 0), 0);
    TU_CHECK(jg_grad(n), 1, TU_SHAPE(2), TU_VALS(0.0, 0.0), 0);
}

/* ---- gradcheck, first and second order ---- */

typedef jg_tensor *(*unary_fn)(jg_tensor *);

static jg_tensor *gc_sum(jg_tensor *t) {
    return t ? jg_sum(jg_mul(t, t)) : NULL; /* a non-linear head for second order */
}

static jg_tensor *f_sin(jg_tensor *x) {
    return jg_sin(x);
}
static jg_tensor *f_cos(jg_tensor *x) {
    return jg_cos(x);
}
static jg_tensor *f_erf(jg_tensor *x) {
    return jg_erf(x);
}
static jg_tensor *f_clamp(jg_tensor *x) {
    return jg_mul(jg_clamp(x, true, -1.0, true, 1.0), x);
}
static jg_tensor *f_clamp_t(jg_tensor *x) {
    return jg_mul(jg_clamp_tensor(x, jg_mul_scalar(jg_cos(x), 0.5), jg_add_scalar(x, 0.3)), x);
}
static jg_tensor *f_max(jg_tensor *x) {
    return jg_maximum(x, jg_cos(x));
}
static jg_tensor *f_min(jg_tensor *x) {
    return jg_minimum(jg_sin(x), x);
}
static jg_tensor *f_pow(jg_tensor *x) {
    /* (small values: finite differences of a large power are too coarse) */
    return jg_pow(jg_add_scalar(jg_mul_scalar(jg_abs(x), 0.25), 0.5), jg_mul_scalar(x, 0.5));
}
static jg_tensor *f_var(jg_tensor *x) {
    return jg_var(x, 1, (int[]){1}, 1.0, false);
}
static jg_tensor *f_std(jg_tensor *x) {
    return jg_std(x, 1, (int[]){0}, 0.0, true);
}
static jg_tensor *f_norm(jg_tensor *x) {
    return jg_norm(x, 2.0, 1, (int[]){1}, false);
}
static jg_tensor *f_norm3(jg_tensor *x) {
    return jg_norm(x, 3.0, 0, NULL, false);
}
static jg_tensor *f_norm1(jg_tensor *x) {
    return jg_norm(x, 1.0, 0, NULL, false);
}
static jg_tensor *f_cumsum(jg_tensor *x) {
    return jg_mul(jg_cumsum(x, 1), x);
}
static jg_tensor *f_topk(jg_tensor *x) {
    jg_tensor *v, *i;
    return jg_topk(x, 2, 1, true, &v, &i) < 0 ? NULL : jg_mul(v, v);
}
static jg_tensor *f_sort(jg_tensor *x) {
    jg_tensor *v, *i;
    return jg_sort(x, 0, false, &v, &i) < 0 ? NULL : jg_mul(v, x);
}
static jg_tensor *f_prod(jg_tensor *x) {
    return jg_prod_dim(x, 1, false);
}

static jg_tensor *gc_first(void *user, int n, jg_tensor *const *in) {
    (void)n;
    return gc_sum(((unary_fn)user)(in[0]));
}

/* the gradient of gc_first, as a function (second order) */
static jg_tensor *gc_second(void *user, int n, jg_tensor *const *in) {
    (void)n;
    jg_tensor *y = gc_first(user, 1, in);
    jg_tensor *g[1];
    jg_tensor *x = in[0];
    if (!y || jg_autograd_grad(1, &y, NULL, 1, &x, JG_CREATE_GRAPH, g) < 0)
        return NULL;
    return jg_sum(jg_mul(g[0], g[0])); /* (g[0] belongs to the scope) */
}

static void test_opsmath_gradcheck(void **state) {
    (void)state;
    struct {
        const char *name;
        unary_fn f;
        bool second;
    } fs[] = {{"sin", f_sin, true},     {"cos", f_cos, true},         {"erf", f_erf, true},
              {"clamp", f_clamp, true}, {"clamp_t", f_clamp_t, true}, {"maximum", f_max, true},
              {"minimum", f_min, true}, {"pow", f_pow, true},         {"var", f_var, true},
              {"std", f_std, true},     {"norm", f_norm, true},       {"norm3", f_norm3, true},
              {"norm1", f_norm1, true}, {"cumsum", f_cumsum, true},   {"topk", f_topk, true},
              {"sort", f_sort, true},   {"prod", f_prod, true}};
    for (size_t k = 0; k < sizeof fs / sizeof *fs; k++) {
        jg_tensor *x = t64(2, TU_SHAPE(2, 3), X6);
        if (jg_gradcheck(gc_first, (void *)fs[k].f, 1, &x, 1e-6, 1e-6, 1e-5) < 0)
            fail_msg("%s: %s", fs[k].name, jg_last_error());
        if (fs[k].second && jg_gradcheck(gc_second, (void *)fs[k].f, 1, &x, 1e-6, 1e-5, 1e-4) < 0)
            fail_msg("%s (second order): %s", fs[k].name, jg_last_error());
    }
}

/* a prod with zeros (the product of the others, exact) to second order */
static jg_tensor *f_prod0(jg_tensor *x) {
    return jg_prod(jg_mul(x, jg_add_scalar(jg_mul_scalar(x, 0.0), 1.0)));
}

static void test_opsmath_prod_second_order_third_refused(void **state) {
    (void)state;
    jg_tensor *x = t64(2, TU_SHAPE(2, 3), TU_VALS(0.0, 2.0, 3.0, 0.0, -1.5, 0.5));
    if (jg_gradcheck(gc_second, (void *)f_prod0, 1, &x, 1e-6, 1e-5, 1e-4) < 0)
        fail_msg("prod with zeros (second order): %s", jg_last_error());
    jg_tensor *y = gc_second((void *)f_prod, 1, &x); /* second order with a graph */
    assert_non_null(y);
    jg_tensor *g;
    assert_int_equal(jg_autograd_grad(1, &y, NULL, 1, &x, JG_CREATE_GRAPH, &g), 0);
    assert_int_equal(jg_backward(jg_sum(g), NULL, 0), -1);
    TU_ERROR("the third derivative of prod() is not supported");
}

static void test_opsmath_errors(void **state) {
    (void)state;
    jg_tensor *i = tu_tensor(JG_I64, 1, TU_SHAPE(2), TU_VALS(1, 2));
    jg_tensor *f = tu_tensor(JG_F32, 1, TU_SHAPE(2), TU_VALS(1, 2));
    jg_tensor *b = jg_gt_scalar(f, 1.0);
    jg_tensor *v, *ix;
    assert_null(jg_var(i, 0, NULL, 1.0, false));
    TU_ERROR("std and var only support floating point and complex dtypes");
    assert_null(jg_norm(b, 2.0, 0, NULL, false));
    TU_ERROR("norm(): input dtype should be either floating point or complex. Got Bool instead.");
    assert_null(jg_argmax(b));
    TU_ERROR("\"argmax_cpu\" not implemented for 'Bool'");
    assert_int_equal(jg_topk(f, 3, 0, true, &v, &ix), -1);
    TU_ERROR("selected index k out of range");
    assert_int_equal(jg_topk(b, 1, 0, true, &v, &ix), -1);
    TU_ERROR("\"topk_cpu\" not implemented for 'Bool'");
    assert_null(jg_cumsum(f, 1));
    TU_ERROR("Dimension out of range (expected to be in range of [-1, 0], but got 1)");
    assert_null(jg_clamp(f, false, 0, false, 0));
    TU_ERROR("At least one of 'min' or 'max' must not be None");
    assert_null(jg_argmax(jg_full(JG_F32, 1, TU_SHAPE(0), 0)));
    TU_ERROR("Expected reduction dim to be specified for input.numel() == 0.");
    assert_null(jg_argmax_dim(jg_full(JG_F32, 2, TU_SHAPE(0, 2), 0), 0, false));
    TU_ERROR("Expected reduction dim 0 to have non-zero size.");
    assert_null(jg_pow(b, b));
    TU_ERROR("not implemented for 'Bool'");
    assert_null(jg_var(f, 2, (int[]){0, 0}, 1.0, false));
    TU_ERROR("dim 0 appears multiple times in the list of dims");
    assert_null(jg_sin(NULL));
    assert_int_equal(jg_sort(NULL, 0, false, &v, &ix), -1);
}

/* ---- compiled == eager, bitwise, outputs and gradients ---- */

static int p_math(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *x = in[0], *y = in[1];
    jg_tensor *a = jg_add(jg_maximum(jg_sin(x), jg_cos(y)), jg_erf(jg_minimum(x, y)));
    jg_tensor *b = jg_add(jg_mul(jg_clamp(a, true, -0.5, true, 0.75), jg_clamp_min(x, 0.0)),
                          jg_pow(jg_add_scalar(jg_abs(x), 0.5), y));
    b = jg_add(b, jg_clamp_tensor(x, y, jg_add_scalar(y, 0.5)));
    jg_tensor *v, *m;
    if (jg_var_mean(b, 1, (int[]){1}, 1.0, true, &v, &m) < 0)
        return -1;
    jg_tensor *c =
        jg_add(jg_div(jg_sub(b, m), jg_sqrt(jg_add_scalar(v, 1.0))),
               jg_add(jg_std(b, 1, (int[]){0}, 1.0, false), jg_norm(b, 2.0, 1, (int[]){1}, true)));
    jg_tensor *d = jg_add(jg_cumsum(c, 1), jg_prod_dim(c, 1, true));
    jg_tensor *tv, *ti, *sv, *si;
    if (jg_topk(d, 2, 1, true, &tv, &ti) < 0 || jg_sort(d, 0, true, &sv, &si) < 0)
        return -1;
    out[0] = jg_add(jg_add(jg_sum(tv), jg_sum(sv)), jg_norm(d, 3.0, 0, NULL, false));
    out[1] = d;
    out[2] = ti;
    out[3] = si;
    out[4] = jg_argmax_dim(d, 1, false);
    out[5] = jg_argmin(d);
    for (int k = 0; k < 6; k++)
        if (!out[k])
            return -1;
    return 6;
}

static void test_opsmath_compiled_matches_eager(void **state) {
    (void)state;
    jg_manual_seed(11);
    jg_tensor *in[2] = {jg_randn(JG_F32, 2, TU_SHAPE(4, 6)), jg_randn(JG_F32, 2, TU_SHAPE(4, 6))};
    ((float *)jg_data(in[1]))[0] = ((float *)jg_data(in[0]))[0]; /* a tie */
    jg_set_requires_grad(in[0], true);
    jg_set_requires_grad(in[1], true);
    jg_tensor *eo[6];
    assert_int_equal(p_math(NULL, NULL, 2, in, eo), 6);
    assert_int_equal(jg_backward(eo[0], NULL, 0), 0);
    jg_tensor *eg[2] = {jg_clone(jg_grad(in[0])), jg_clone(jg_grad(in[1]))};
    const char *modes[2] = {"interp", "c"};
    for (int mo = 0; mo < 2; mo++) {
        if (mo == 1 && !jg_compile_backend_available("c")) {
            print_message("skipping the c backend: %s\n", jg_last_error());
            continue;
        }
        jg_compiled *c = jg_compile(p_math, NULL, &(jg_compile_options){modes[mo], true, false});
        assert_non_null(c);
        for (int rep = 0; rep < 2; rep++) {
            jg_clear_grad(in[0]);
            jg_clear_grad(in[1]);
            jg_tensor *co[6];
            if (jg_compiled_call(c, NULL, 0, 2, in, co) != 6)
                fail_msg("%s: %s", modes[mo], jg_last_error());
            for (int k = 0; k < 6; k++)
                TU_SAME(co[k], eo[k]);
            assert_int_equal(jg_backward(co[0], NULL, 0), 0);
            TU_SAME(jg_grad(in[0]), eg[0]);
            TU_SAME(jg_grad(in[1]), eg[1]);
        }
        assert_int_equal(jg_compiled_fallbacks(c), 0);
        jg_compiled_free(c);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_opsmath_elementwise_values),
        TU_TEST(test_opsmath_nan_and_signed_zero),
        TU_TEST(test_opsmath_reductions_values),
        TU_TEST(test_opsmath_sort_stable_nan),
        TU_TEST(test_opsmath_grad_special_points),
        TU_TEST(test_opsmath_gradcheck),
        TU_TEST(test_opsmath_prod_second_order_third_refused),
        TU_TEST(test_opsmath_errors),
        TU_TEST(test_opsmath_compiled_matches_eager),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
