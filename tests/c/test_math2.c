/* The math2 ops from C: values and dtypes against PyTorch 1.13's (written
 * here), gradients against finite differences in f64 (first and second
 * order), error messages, and compiled == eager bitwise on both backends. */
#include "testutil.h"

#include <math.h>
#include <string.h>

static jg_tensor *t64(int ndim, const int64_t *shape, const double *v) {
    jg_tensor *t = tu_tensor(JG_F64, ndim, shape, v);
    jg_set_requires_grad(t, true);
    return t;
}

static void test_math2_rounding(void **state) {
    (void)state;
    jg_tensor *x = tu_tensor(JG_F64, 1, TU_SHAPE(6), TU_VALS(0.5, 1.5, 2.5, -0.5, -1.75, 2.25));
    TU_CHECK(jg_floor(x), 1, TU_SHAPE(6), TU_VALS(0, 1, 2, -1, -2, 2), 0);
    TU_CHECK(jg_ceil(x), 1, TU_SHAPE(6), TU_VALS(1, 2, 3, -0.0, -1, 3), 0);
    TU_CHECK(jg_trunc(x), 1, TU_SHAPE(6), TU_VALS(0, 1, 2, -0.0, -1, 2), 0);
    /* half to even, as PyTorch's nearbyint */
    TU_CHECK(jg_round(x), 1, TU_SHAPE(6), TU_VALS(0, 2, 2, -0.0, -2, 2), 0);
    TU_CHECK(jg_frac(x), 1, TU_SHAPE(6), TU_VALS(0.5, 0.5, 0.5, -0.5, -0.75, 0.25), 0);
    /* torch.round(x, decimals=1) and decimals=-1 */
    jg_tensor *d = tu_tensor(JG_F64, 1, TU_SHAPE(3), TU_VALS(1.25, -3.14159, 149.0));
    TU_CHECK(jg_round_decimals(d, 1), 1, TU_SHAPE(3), TU_VALS(1.2, -3.1, 149.0), 0);
    TU_CHECK(jg_round_decimals(d, -1), 1, TU_SHAPE(3), TU_VALS(0.0, -0.0, 150.0), 0);
    /* integer dtypes are kept, values exact beyond 2^53 */
    jg_tensor *i = tu_tensor(JG_I64, 1, TU_SHAPE(2), TU_VALS(-3, 7));
    ((int64_t *)jg_data(i))[1] = INT64_MAX;
    jg_tensor *fl = jg_floor(i);
    assert_int_equal(jg_dtype_of(fl), JG_I64);
    assert_true(((int64_t *)jg_data(fl))[1] == INT64_MAX);
    assert_int_equal(jg_dtype_of(jg_round(jg_to_dtype(i, JG_I32))), JG_I32);
    jg_tensor *s = tu_tensor(JG_F32, 1, TU_SHAPE(5), TU_VALS(-2.0, -0.0, 0.0, NAN, 3.0));
    TU_CHECK(jg_sign(s), 1, TU_SHAPE(5), TU_VALS(-1, 0, 0, 0, 1), 0);
    TU_CHECK(jg_sgn(s), 1, TU_SHAPE(5), TU_VALS(-1, 0, 0, 0, 1), 0);
    jg_tensor *b = jg_gt_scalar(s, 0.0);
    assert_int_equal(jg_dtype_of(jg_sign(b)), JG_BOOL);
    TU_CHECK(jg_sign(b), 1, TU_SHAPE(5), TU_VALS(0, 0, 0, 0, 1), 0);
}

static void test_math2_functions(void **state) {
    (void)state;
    const double v[3] = {0.5, -0.25, 0.75};
    jg_tensor *x = tu_tensor(JG_F64, 1, TU_SHAPE(3), v);
    struct {
        jg_tensor *(*f)(jg_tensor *);
        double (*ref)(double);
    } fs[] = {{jg_log1p, log1p}, {jg_expm1, expm1}, {jg_sinh, sinh}, {jg_cosh, cosh}, {jg_tan, tan},
              {jg_asin, asin},   {jg_acos, acos},   {jg_atan, atan}, {jg_erfc, erfc}};
    for (size_t k = 0; k < sizeof fs / sizeof *fs; k++)
        TU_CHECK(fs[k].f(x), 1, TU_SHAPE(3),
                 TU_VALS(fs[k].ref(v[0]), fs[k].ref(v[1]), fs[k].ref(v[2])), 0);
    jg_tensor *p = tu_tensor(JG_F64, 1, TU_SHAPE(3), TU_VALS(4.0, 0.1, 1000.0));
    TU_CHECK(jg_log2(p), 1, TU_SHAPE(3), TU_VALS(2.0, log2(0.1), log2(1000.0)), 0);
    TU_CHECK(jg_log10(p), 1, TU_SHAPE(3), TU_VALS(log10(4.0), -1.0, 3.0), 0);
    TU_CHECK(jg_rsqrt(p), 1, TU_SHAPE(3), TU_VALS(0.5, 1 / sqrt(0.1), 1 / sqrt(1000.0)), 0);
    TU_CHECK(jg_reciprocal(p), 1, TU_SHAPE(3), TU_VALS(0.25, 1 / 0.1, 0.001), 0);
    TU_CHECK(jg_atan2(x, p), 1, TU_SHAPE(3),
             TU_VALS(atan2(0.5, 4.0), atan2(-0.25, 0.1), atan2(0.75, 1000.0)), 0);
    /* integers compute in float32 */
    jg_tensor *i = tu_tensor(JG_I64, 1, TU_SHAPE(2), TU_VALS(1, 4));
    assert_int_equal(jg_dtype_of(jg_log1p(i)), JG_F32);
    assert_int_equal(jg_dtype_of(jg_atan2(i, i)), JG_F32);
    TU_CHECK(jg_rsqrt(i), 1, TU_SHAPE(2), TU_VALS(1.0, 0.5), 0);
}

/* addcmul, addcdiv and lerp: PyTorch's values (its fused multiply-adds:
 * torch.addcmul / torch.lerp give these bits), dtypes, broadcasting */
static void test_math2_three_operand(void **state) {
    (void)state;
    jg_tensor *s = tu_tensor(JG_F32, 2, TU_SHAPE(2, 1), TU_VALS(1.0, -2.0));
    jg_tensor *u = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(0.1, 0.2, 0.3));
    jg_tensor *w = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(3.0, 7.0, -0.7));
    jg_tensor *r = jg_addcmul(s, u, w, 0.5);
    float want[6];
    for (int k = 0; k < 6; k++) {
        float sv = k < 3 ? 1.0f : -2.0f, uv = (float[]){0.1f, 0.2f, 0.3f}[k % 3],
              wv = (float[]){3.0f, 7.0f, -0.7f}[k % 3];
        want[k] = fmaf(0.5f * uv, wv, sv);
    }
    assert_int_equal(jg_ndim(r), 2);
    assert_memory_equal(jg_data(r), want, sizeof want);
    for (int k = 0; k < 6; k++) {
        float sv = k < 3 ? 1.0f : -2.0f, uv = (float[]){0.1f, 0.2f, 0.3f}[k % 3],
              wv = (float[]){3.0f, 7.0f, -0.7f}[k % 3];
        want[k] = sv + 0.5f * uv / wv;
    }
    assert_memory_equal(jg_data(jg_addcdiv(s, u, w, 0.5)), want, sizeof want);
    /* lerp: from self below 0.5, from end above; exact at the ends */
    jg_tensor *a = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(0.1, -3.0, 5.0));
    jg_tensor *e = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(0.7, 2.0, -1.0));
    float l[3];
    jg_copy_to(jg_lerp_scalar(a, e, 1.0), l, sizeof l);
    assert_true(l[0] == 0.7f && l[1] == 2.0f && l[2] == -1.0f);
    jg_copy_to(jg_lerp_scalar(a, e, 0.3), l, sizeof l);
    assert_true(l[0] == fmaf(0.3f, 0.7f - 0.1f, 0.1f));
    jg_tensor *wt = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(0.25, 0.75, 0.0));
    jg_copy_to(jg_lerp(a, e, wt), l, sizeof l);
    assert_true(l[0] == fmaf(0.25f, 0.7f - 0.1f, 0.1f));
    assert_true(l[1] == fmaf(-(2.0f - -3.0f), 1.0f - 0.75f, 2.0f));
    assert_true(l[2] == 5.0f);
    /* integers: addcmul keeps them (value truncated to the dtype, as PyTorch) */
    jg_tensor *i = tu_tensor(JG_I64, 1, TU_SHAPE(2), TU_VALS(2, 3));
    TU_CHECK(jg_addcmul(i, i, i, 2.0), 1, TU_SHAPE(2), TU_VALS(10, 21), 0);
    jg_tensor *i1 = tu_tensor(JG_I64, 1, TU_SHAPE(1), TU_VALS(4));
    assert_int_equal(jg_dtype_of(jg_addcdiv(i1, u, w, 1.0)), JG_F32);
}

static void test_math2_errors(void **state) {
    (void)state;
    jg_tensor *i = tu_tensor(JG_I64, 1, TU_SHAPE(2), TU_VALS(1, 2));
    jg_tensor *f = tu_tensor(JG_F32, 1, TU_SHAPE(2), TU_VALS(1, 2));
    jg_tensor *d = tu_tensor(JG_F64, 1, TU_SHAPE(2), TU_VALS(1, 2));
    jg_tensor *b = jg_gt_scalar(f, 1.0);
    assert_null(jg_floor(b));
    TU_ERROR("\"floor_vml_cpu\" not implemented for 'Bool'");
    assert_null(jg_round(b));
    TU_ERROR("\"round_vml_cpu\" not implemented for 'Bool'");
    assert_null(jg_frac(i));
    TU_ERROR("\"frac_cpu\" not implemented for 'Long'");
    assert_null(jg_round_decimals(i, 2));
    TU_ERROR("\"round_cpu\" not implemented for 'Long'");
    assert_null(jg_addcmul(b, b, b, 1.0));
    TU_ERROR("\"addcmul_cpu_out\" not implemented for 'Bool'");
    assert_null(jg_addcdiv(f, i, i, 1.0));
    TU_ERROR("Integer division with addcdiv is no longer supported");
    assert_null(jg_lerp_scalar(f, d, 0.5));
    TU_ERROR("expected dtype float for `end` but got dtype double");
    assert_null(jg_lerp(f, f, d));
    TU_ERROR("expected dtype float for `weight` but got dtype double");
    assert_null(jg_lerp_scalar(i, i, 0.5));
    TU_ERROR("\"lerp_kernel_scalar\" not implemented for 'Long'");
    assert_null(jg_lerp(i, i, i));
    TU_ERROR("\"lerp_kernel_tensor\" not implemented for 'Long'");
    jg_tensor *three = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(1, 2, 3));
    assert_null(jg_addcmul(f, three, f, 1.0));
    TU_ERROR("must match");
    assert_null(jg_atan2(NULL, f));
    assert_null(jg_lerp(f, f, NULL));
}

/* ---- gradcheck, first and second order ---- */

typedef jg_tensor *(*unary_fn)(jg_tensor *);

static jg_tensor *f_log1p(jg_tensor *x) {
    return jg_log1p(jg_mul_scalar(jg_abs(x), 0.5));
}
static jg_tensor *f_expm1(jg_tensor *x) {
    return jg_expm1(x);
}
static jg_tensor *f_log2(jg_tensor *x) {
    return jg_log2(jg_add_scalar(jg_abs(x), 0.5));
}
static jg_tensor *f_log10(jg_tensor *x) {
    return jg_log10(jg_add_scalar(jg_abs(x), 0.5));
}
static jg_tensor *f_rsqrt(jg_tensor *x) {
    return jg_rsqrt(jg_add_scalar(jg_abs(x), 0.5));
}
static jg_tensor *f_reciprocal(jg_tensor *x) {
    return jg_reciprocal(jg_add_scalar(jg_abs(x), 0.5));
}
static jg_tensor *f_sinh(jg_tensor *x) {
    return jg_sinh(x);
}
static jg_tensor *f_cosh(jg_tensor *x) {
    return jg_cosh(x);
}
static jg_tensor *f_tan(jg_tensor *x) {
    return jg_tan(jg_mul_scalar(x, 0.4));
}
static jg_tensor *f_asin(jg_tensor *x) {
    return jg_asin(jg_mul_scalar(x, 0.25));
}
static jg_tensor *f_acos(jg_tensor *x) {
    return jg_acos(jg_mul_scalar(x, 0.25));
}
static jg_tensor *f_atan(jg_tensor *x) {
    return jg_atan(x);
}
static jg_tensor *f_erfc(jg_tensor *x) {
    return jg_erfc(x);
}
static jg_tensor *f_atan2(jg_tensor *x) {
    return jg_atan2(x, jg_add_scalar(jg_cos(x), 1.5));
}
static jg_tensor *f_frac(jg_tensor *x) { /* (frac's gradient is 1; floor's 0) */
    return jg_add(jg_mul(jg_frac(x), x), jg_mul(jg_floor(x), x));
}
static jg_tensor *f_addcmul(jg_tensor *x) {
    return jg_addcmul(jg_sin(x), x, jg_cos(x), 0.75);
}
static jg_tensor *f_addcdiv(jg_tensor *x) {
    return jg_addcdiv(x, jg_sin(x), jg_add_scalar(jg_abs(x), 0.5), -1.5);
}
static jg_tensor *f_lerp(jg_tensor *x) {
    return jg_lerp(jg_sin(x), x, jg_mul_scalar(jg_cos(x), 0.8));
}
static jg_tensor *f_lerp_scalar(jg_tensor *x) {
    return jg_mul(jg_lerp_scalar(jg_sin(x), x, 0.3), jg_lerp_scalar(x, jg_cos(x), 0.8));
}

static jg_tensor *gc_first(void *user, int n, jg_tensor *const *in) {
    (void)n;
    jg_tensor *t = ((unary_fn)user)(in[0]);
    return t ? jg_sum(jg_mul(t, t)) : NULL;
}

static jg_tensor *gc_second(void *user, int n, jg_tensor *const *in) {
    (void)n;
    jg_tensor *y = gc_first(user, 1, in);
    jg_tensor *g[1];
    jg_tensor *x = in[0];
    if (!y || jg_autograd_grad(1, &y, NULL, 1, &x, JG_CREATE_GRAPH, g) < 0)
        return NULL;
    return jg_sum(jg_mul(g[0], g[0]));
}

static void test_math2_gradcheck(void **state) {
    (void)state;
    struct {
        const char *name;
        unary_fn f;
    } fs[] = {{"log1p", f_log1p},
              {"expm1", f_expm1},
              {"log2", f_log2},
              {"log10", f_log10},
              {"rsqrt", f_rsqrt},
              {"reciprocal", f_reciprocal},
              {"sinh", f_sinh},
              {"cosh", f_cosh},
              {"tan", f_tan},
              {"asin", f_asin},
              {"acos", f_acos},
              {"atan", f_atan},
              {"erfc", f_erfc},
              {"atan2", f_atan2},
              {"frac", f_frac},
              {"addcmul", f_addcmul},
              {"addcdiv", f_addcdiv},
              {"lerp", f_lerp},
              {"lerp_scalar", f_lerp_scalar}};
    /* (no element at a rounding step: floor's finite differences are 0 there) */
    const double v[6] = {0.45, -1.3, 2.2, 0.7, 1.6, -0.35};
    for (size_t k = 0; k < sizeof fs / sizeof *fs; k++) {
        jg_tensor *x = t64(2, TU_SHAPE(2, 3), v);
        if (jg_gradcheck(gc_first, (void *)fs[k].f, 1, &x, 1e-6, 1e-6, 1e-5) < 0)
            fail_msg("%s: %s", fs[k].name, jg_last_error());
        if (jg_gradcheck(gc_second, (void *)fs[k].f, 1, &x, 1e-6, 1e-5, 1e-4) < 0)
            fail_msg("%s (second order): %s", fs[k].name, jg_last_error());
    }
    /* the piecewise-constant ops give zeros (not "no gradient") */
    jg_tensor *x = t64(1, TU_SHAPE(3), TU_VALS(0.5, -1.5, 2.0));
    jg_tensor *y = jg_add(jg_add(jg_floor(x), jg_ceil(x)), jg_add(jg_round(x), jg_trunc(x)));
    y = jg_add(jg_add(y, jg_sign(x)), jg_add(jg_sgn(x), jg_round_decimals(x, 1)));
    assert_int_equal(jg_backward(jg_sum(y), NULL, 0), 0);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(3), TU_VALS(0, 0, 0), 0);
}

/* ---- compiled == eager, bitwise, outputs and gradients ---- */

static int p_math2(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *x = in[0], *y = in[1];
    jg_tensor *p = jg_add_scalar(jg_abs(y), 0.25);
    jg_tensor *a = jg_add(jg_log1p(p), jg_expm1(jg_mul_scalar(x, 0.5)));
    a = jg_add(a, jg_mul(jg_log2(p), jg_log10(p)));
    a = jg_add(a, jg_mul(jg_rsqrt(p), jg_reciprocal(p)));
    a = jg_add(a, jg_add(jg_sinh(x), jg_cosh(y)));
    a = jg_add(a, jg_mul(jg_tan(jg_mul_scalar(x, 0.3)), jg_atan(y)));
    jg_tensor *t = jg_tanh(x);
    a = jg_add(a, jg_add(jg_asin(t), jg_acos(jg_mul_scalar(t, 0.5))));
    a = jg_add(a, jg_mul(jg_erfc(x), jg_atan2(x, y)));
    jg_tensor *r = jg_add(jg_add(jg_floor(a), jg_ceil(x)), jg_add(jg_round(y), jg_trunc(a)));
    r = jg_add(r, jg_add(jg_frac(a), jg_mul(jg_sign(x), jg_sgn(y))));
    r = jg_add(r, jg_round_decimals(a, 2));
    jg_tensor *l = jg_lerp(x, y, jg_sigmoid(a));
    l = jg_add(l, jg_lerp_scalar(a, x, 0.7));
    out[0] = jg_sum(jg_add(jg_addcmul(r, a, l, 0.5), jg_addcdiv(a, l, p, -2.0)));
    out[1] = r;
    out[2] = l;
    for (int k = 0; k < 3; k++)
        if (!out[k])
            return -1;
    return 3;
}

static void test_math2_compiled_matches_eager(void **state) {
    (void)state;
    jg_manual_seed(12);
    jg_tensor *in[2] = {jg_randn(JG_F32, 2, TU_SHAPE(4, 6)), jg_randn(JG_F32, 2, TU_SHAPE(1, 6))};
    jg_set_requires_grad(in[0], true);
    jg_set_requires_grad(in[1], true);
    jg_tensor *eo[3];
    assert_int_equal(p_math2(NULL, NULL, 2, in, eo), 3);
    assert_int_equal(jg_backward(eo[0], NULL, 0), 0);
    jg_tensor *eg[2] = {jg_clone(jg_grad(in[0])), jg_clone(jg_grad(in[1]))};
    const char *modes[2] = {"interp", "c"};
    for (int mo = 0; mo < 2; mo++) {
        if (mo == 1 && !jg_compile_backend_available("c")) {
            print_message("skipping the c backend: %s\n", jg_last_error());
            continue;
        }
        jg_compiled *c = jg_compile(p_math2, NULL, &(jg_compile_options){modes[mo], true, false});
        assert_non_null(c);
        for (int rep = 0; rep < 2; rep++) {
            jg_clear_grad(in[0]);
            jg_clear_grad(in[1]);
            jg_tensor *co[3];
            if (jg_compiled_call(c, NULL, 0, 2, in, co) != 3)
                fail_msg("%s: %s", modes[mo], jg_last_error());
            for (int k = 0; k < 3; k++)
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
        TU_TEST(test_math2_rounding),      TU_TEST(test_math2_functions),
        TU_TEST(test_math2_three_operand), TU_TEST(test_math2_errors),
        TU_TEST(test_math2_gradcheck),     TU_TEST(test_math2_compiled_matches_eager),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
