/* Table-driven tests of every elementwise op: forward against a naive
 * reference (the same expression evaluated here with <tgmath.h>, so f32 rows
 * use the float functions and must match exactly; f32 tanh, jitgrad's own,
 * against ops/ew_math.h and within its bound over a sweep of all f32),
 * broadcasting, strided
 * inputs, dtype promotion, backward and double backward against finite
 * differences in f64, and the autograd cases x*x and fan-out. */
#include "testutil.h"

#include "ops/decls.h"
#include "ops/ew_math.h"

#include <stdlib.h>
#include <string.h>
#include <tgmath.h>

/* ---- the table ---- */

#define REF(name, expr)                                                                            \
    static double ref_##name##_d(double a, double b, double s) {                                   \
        typedef double T;                                                                          \
        (void)a, (void)b, (void)s;                                                                 \
        return (T)(expr);                                                                          \
    }                                                                                              \
    static double ref_##name##_f(double ad, double bd, double sd) {                                \
        typedef float T;                                                                           \
        T a = (T)ad, b = (T)bd;                                                                    \
        double s = sd;                                                                             \
        (void)a, (void)b, (void)s;                                                                 \
        return (T)(expr);                                                                          \
    }

REF(add, a + b)
REF(sub, a - b)
REF(mul, a *b)
REF(div, a / b)
REF(neg, -a)
REF(exp, exp(a))
REF(log, log(a))
/* f32 tanh is jitgrad's own (ops/ew_math.h, within 1.05 ulp, see
 * test_tanh_f32_kernel); f64 tanh is libm's. */
REF(tanh, sizeof(T) == sizeof(float) ? (T)jg_ew_tanhf((float)a) : tanh(a))
REF(abs, a < 0 ? -a : a)
REF(relu, a > 0 ? a : (T)0)
REF(sigmoid, (T)1 / ((T)1 + exp(-a)))
REF(sqrt, sqrt(a))
REF(pow_scalar, pow(a, (T)s))
REF(add_scalar, a + (T)s)
REF(mul_scalar, a *(T)s)
REF(relu_grad, b > 0 ? a : (T)0)
REF(abs_grad, a *(b > 0 ? (T)1 : b < 0 ? (T)-1 : (T)0))
REF(tanh_grad, a *(-(b *b) + (T)1))
REF(sigmoid_grad, (a * (-b + (T)1)) * b)
REF(clone, a)
REF(to_dtype, a)

static jg_tensor *w_pow(jg_tensor *a, double s) {
    return jg_pow_scalar(a, s);
}
/* the fused backward ops of tanh and sigmoid (internal: no public wrapper) */
static jg_tensor *jg_relu_grad(jg_tensor *g, jg_tensor *y) {
    return jg_op1(JG_OP_RELU_GRAD, NULL, g, y);
}
static jg_tensor *jg_abs_grad(jg_tensor *g, jg_tensor *x) {
    return jg_op1(JG_OP_ABS_GRAD, NULL, g, x);
}
static jg_tensor *jg_tanh_grad(jg_tensor *g, jg_tensor *y) {
    return jg_op1(JG_OP_TANH_GRAD, NULL, g, y);
}
static jg_tensor *jg_sigmoid_grad(jg_tensor *g, jg_tensor *y) {
    return jg_op1(JG_OP_SIGMOID_GRAD, NULL, g, y);
}
static jg_tensor *w_to_f64(jg_tensor *a) {
    return jg_to_dtype(a, JG_F64);
}

typedef struct {
    const char *name;
    int arity;                                  /* 1 or 2 */
    jg_tensor *(*f1)(jg_tensor *);              /* unary */
    jg_tensor *(*f2)(jg_tensor *, jg_tensor *); /* binary */
    jg_tensor *(*fs)(jg_tensor *, double);      /* unary with a scalar */
    double s;
    double (*ref_d)(double, double, double);
    double (*ref_f)(double, double, double);
    bool positive; /* domain needs a > 0 (and b away from 0) */
    const char *bw_name;
} ew_row;

#define ROW2(n, bw)                                                                                \
    { #n, 2, NULL, jg_##n, NULL, 0, ref_##n##_d, ref_##n##_f, false, bw }
#define ROW1(n, pos, bw)                                                                           \
    { #n, 1, jg_##n, NULL, NULL, 0, ref_##n##_d, ref_##n##_f, pos, bw }
#define ROWS(n, f, s, pos, bw)                                                                     \
    { #n, 1, NULL, NULL, f, s, ref_##n##_d, ref_##n##_f, pos, bw }

static const ew_row rows[] = {
    ROW2(add, "AddBackward0"),
    ROW2(sub, "SubBackward0"),
    ROW2(mul, "MulBackward0"),
    ROW2(div, "DivBackward0"),
    ROW1(neg, false, "NegBackward0"),
    ROW1(exp, false, "ExpBackward0"),
    ROW1(log, true, "LogBackward0"),
    ROW1(tanh, false, "TanhBackward0"),
    ROW1(abs, false, "AbsBackward0"),
    ROW1(relu, false, "ReluBackward0"),
    ROW1(sigmoid, false, "SigmoidBackward0"),
    ROW1(sqrt, true, "SqrtBackward0"),
    ROWS(pow_scalar, w_pow, 2.5, true, "PowBackward0"),
    ROWS(add_scalar, jg_add_scalar, -1.75, false, "AddBackward1"),
    ROWS(mul_scalar, jg_mul_scalar, 3.25, false, "MulBackward1"),
    ROW2(relu_grad, "ThresholdBackwardBackward0"),
    ROW2(abs_grad, "AbsBackwardBackward0"),
    ROW2(tanh_grad, "TanhBackwardBackward0"),
    ROW2(sigmoid_grad, "SigmoidBackwardBackward0"),
    ROW1(clone, false, "CloneBackward0"),
    {"to_dtype", 1, w_to_f64, NULL, NULL, 0, ref_to_dtype_d, ref_to_dtype_f, false,
     "ToCopyBackward0"},
};
#define N_ROWS ((int)(sizeof rows / sizeof rows[0]))

static jg_tensor *apply_row(const ew_row *r, jg_tensor *a, jg_tensor *b) {
    if (r->arity == 2)
        return r->f2(a, b);
    if (r->fs)
        return r->fs(a, r->s);
    return r->f1(a);
}

/* Inputs: a mix of signs, none at a kink; positive where the domain needs it. */
static const double A_VALS[] = {0.5, -1.25, 2.0, -0.75, 1.5, 3.0, -2.5, 0.25, 1.1, -0.3, 0.9, -1.7};
static const double B_VALS[] = {1.5, 0.8, -2.0, 2.5, -1.1, 0.6, 1.3, -0.4, 2.2, -1.9, 0.7, 1.05};

static void input_vals(const ew_row *r, int64_t n, double *a, double *b) {
    for (int64_t i = 0; i < n; i++) {
        a[i] = A_VALS[i % 12];
        b[i] = B_VALS[i % 12];
        if (r->positive)
            a[i] = fabs(a[i]) + 0.1;
    }
}

/* Checks out == ref(a, b) elementwise, a and b given broadcast to out. */
static void check_forward(const ew_row *r, jg_dtype dt, jg_tensor *out, int ndim,
                          const int64_t *shape, const double *a, const double *b) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    double *want = malloc((size_t)n * sizeof *want);
    for (int64_t i = 0; i < n; i++)
        want[i] = (dt == JG_F32 ? r->ref_f : r->ref_d)(a[i], b[i], r->s);
    if (!out)
        print_error("%s: %s\n", r->name, jg_last_error());
    assert_non_null(out);
    jg_dtype want_dt = !strcmp(r->name, "to_dtype") ? JG_F64 : dt;
    assert_int_equal(jg_dtype_of(out), want_dt);
    TU_CHECK(out, ndim, shape, want, 0);
    free(want);
}

static void test_forward_table(void **state) {
    (void)state;
    for (int k = 0; k < N_ROWS; k++) {
        const ew_row *r = &rows[k];
        for (int dti = 0; dti < 2; dti++) {
            jg_dtype dt = dti ? JG_F64 : JG_F32;
            jg_scope_push();
            double a[12], b[12];
            input_vals(r, 12, a, b);
            /* same shapes */
            jg_tensor *ta = tu_tensor(dt, 2, TU_SHAPE(3, 4), a);
            jg_tensor *tb = tu_tensor(dt, 2, TU_SHAPE(3, 4), b);
            check_forward(r, dt, apply_row(r, ta, tb), 2, TU_SHAPE(3, 4), a, b);
            /* strided (transposed) inputs */
            jg_tensor *at = jg_transpose(ta, 0, 1), *bt = jg_transpose(tb, 0, 1);
            double a2[12], b2[12];
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 3; j++) {
                    a2[i * 3 + j] = a[j * 4 + i];
                    b2[i * 3 + j] = b[j * 4 + i];
                }
            check_forward(r, dt, apply_row(r, at, bt), 2, TU_SHAPE(4, 3), a2, b2);
            /* 0-d */
            jg_tensor *s0 = tu_tensor(dt, 0, NULL, a + 2);
            jg_tensor *s1 = tu_tensor(dt, 0, NULL, b + 2);
            check_forward(r, dt, apply_row(r, s0, s1), 0, NULL, a + 2, b + 2);
            if (r->arity == 2) {
                /* [3, 1] with [4] -> [3, 4] */
                jg_tensor *c = tu_tensor(dt, 2, TU_SHAPE(3, 1), a);
                jg_tensor *d = tu_tensor(dt, 1, TU_SHAPE(4), b);
                double ab[12], bb[12];
                for (int i = 0; i < 3; i++)
                    for (int j = 0; j < 4; j++) {
                        ab[i * 4 + j] = a[i];
                        bb[i * 4 + j] = b[j];
                    }
                check_forward(r, dt, r->f2(c, d), 2, TU_SHAPE(3, 4), ab, bb);
                /* [4] with [3, 1]: operand order kept */
                for (int i = 0; i < 3; i++)
                    for (int j = 0; j < 4; j++) {
                        ab[i * 4 + j] = b[j];
                        bb[i * 4 + j] = a[i];
                    }
                check_forward(r, dt, r->f2(d, c), 2, TU_SHAPE(3, 4), ab, bb);
                /* 0-d scalar with [2, 3], both ways */
                jg_tensor *e = tu_tensor(dt, 2, TU_SHAPE(2, 3), b);
                for (int i = 0; i < 6; i++)
                    ab[i] = a[2];
                check_forward(r, dt, r->f2(s0, e), 2, TU_SHAPE(2, 3), ab, b);
                check_forward(r, dt, r->f2(e, s0), 2, TU_SHAPE(2, 3), b, ab);
            }
            jg_scope_pop();
        }
    }
}

/* The f32 tanh kernel gives jg_ew_tanhf's bits (ops/ew_math.h), within
 * its bound of 1.05 ulp (the exact value from long double tanh): every
 * 997th f32 bit pattern (4.3 million values, all exponents, both signs,
 * subnormals, inf and NaN), with the sign of zero.  The full 2^32 sweep is
 * in docs/kernels.md. */
static void test_tanh_f32_kernel(void **state) {
    (void)state;
    const uint64_t step = 997;
    const int64_t n = (int64_t)((UINT64_C(1) << 32) / step) + 1;
    jg_scope_push();
    jg_tensor *x = jg_tensor_new(JG_F32, 1, (int64_t[]){n}, NULL);
    uint32_t *xb = jg_data(x);
    for (int64_t i = 0; i < n; i++)
        xb[i] = (uint32_t)((uint64_t)i * step);
    jg_tensor *y = jg_tanh(x);
    assert_non_null(y);
    const uint32_t *yb = jg_data(y);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        float xf, yf, want;
        memcpy(&xf, &xb[i], 4);
        memcpy(&yf, &yb[i], 4);
        want = jg_ew_tanhf(xf);
        uint32_t wb;
        memcpy(&wb, &want, 4);
        /* error in ulp of the exact value's binade (subnormal: 2^-149) */
        long double ref = tanhl((long double)xf);
        int e = ref == 0 ? -200 : ilogbl(ref);
        long double err = fabsl((long double)yf - ref) / ldexpl(1.0L, (e < -126 ? -126 : e) - 23);
        bool same = isnan(xf) ? (yb[i] & 0x7fffffffu) > 0x7f800000u : yb[i] == wb && err <= 1.05L;
        if (!same && bad++ < 5)
            print_error("tanh(%a) = 0x%08x, want 0x%08x (%.3Lf ulp)\n", (double)xf, yb[i], wb, err);
    }
    assert_int_equal(bad, 0);
    /* specials, through the same kernel */
    const float sx[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 9.5f, -10.0f, 1e-45f, -3e38f};
    const float sy[] = {0.0f, -0.0f, 1.0f, -1.0f, NAN, 1.0f, -1.0f, 1e-45f, -1.0f};
    jg_tensor *s = jg_tanh(jg_tensor_new(JG_F32, 1, (int64_t[]){9}, sx));
    const float *sv = jg_data(s);
    for (int i = 0; i < 9; i++) {
        if (isnan(sx[i])) {
            assert_true(isnan(sv[i]));
            continue;
        }
        assert_true(sv[i] == sy[i]);
        assert_int_equal(signbit(sv[i]) != 0, signbit(sy[i]) != 0);
    }
    jg_scope_pop();
}

/* In-place kernels (ops/elementwise.c): out exactly the operand's row takes
 * a vectorized loop; any other overlap between out and an operand runs
 * element by element in order, so later elements see earlier writes.
 * Checked against that sequential reference. */
static void test_inplace_rows_and_overlap(void **state) {
    (void)state;
    jg_scope_push();
    for (int n = 1; n <= 37; n += 4) {
        double v[40], w[40], want[40];
        for (int i = 0; i < n; i++) {
            v[i] = i * 1.5 - 7;
            w[i] = 3 - i * 0.25;
        }
        /* x += y, x *= 2.5, x = tanh(x) in place, y untouched */
        jg_tensor *x = tu_tensor(JG_F32, 1, (int64_t[]){n}, v);
        jg_tensor *y = tu_tensor(JG_F32, 1, (int64_t[]){n}, w);
        assert_int_equal(jg_add_(x, y), 0);
        assert_int_equal(jg_mul_scalar_(x, 2.5), 0);
        for (int i = 0; i < n; i++)
            want[i] = (double)(((float)v[i] + (float)w[i]) * 2.5f);
        TU_CHECK(x, 1, ((int64_t[]){n}), want, 0);
        TU_CHECK(y, 1, ((int64_t[]){n}), w, 0);
        /* x += x[2] broadcast: an operand too irregular to judge is read as it
         * was before the op (through a copy), so every element adds the old x[2] */
        if (n >= 3) {
            jg_tensor *z = tu_tensor(JG_F64, 1, (int64_t[]){n}, v);
            jg_tensor *e = jg_expand(jg_slice(z, 0, 2, 3), 1, (int64_t[]){n});
            assert_int_equal(jg_add_(z, e), 0);
            double seq[40];
            for (int i = 0; i < n; i++)
                seq[i] = v[i] + v[2];
            TU_CHECK(z, 1, ((int64_t[]){n}), seq, 0);
        }
        /* x[1:] += x[:-1]: dense rows overlapping in part are refused, as
         * PyTorch does */
        if (n >= 2) {
            jg_tensor *z = tu_tensor(JG_F64, 1, (int64_t[]){n}, v);
            assert_int_equal(jg_add_(jg_slice(z, 0, 1, n), jg_slice(z, 0, 0, n - 1)), -1);
            TU_ERROR("some elements of the input tensor and the written-to tensor refer to a "
                     "single memory location");
            TU_CHECK(z, 1, ((int64_t[]){n}), v, 0);
        }
    }
    jg_scope_pop();
}

/* abs at its kink and at specials, as PyTorch: |-0| = +0, |NaN| is NaN,
 * d|x|/dx = sign(x), 0 at 0 and at NaN; int64 wraps at its minimum. */
static void test_abs_specials(void **state) {
    (void)state;
    jg_scope_push();
    const double xv[] = {-0.0, 0.0, -2.5, 3.0, -INFINITY, NAN};
    for (int dt = 0; dt < 2; dt++) {
        jg_tensor *x = tu_tensor(dt ? JG_F64 : JG_F32, 1, (int64_t[]){6}, xv);
        jg_set_requires_grad(x, true);
        jg_tensor *y = jg_abs(x);
        double yv[6];
        tu_values(y, yv);
        for (int i = 0; i < 5; i++) {
            assert_true(yv[i] == fabs(xv[i]));
            assert_false(signbit(yv[i]));
        }
        assert_true(isnan(yv[5]));
        assert_string_equal(jg_grad_fn_name(y), "AbsBackward0");
        assert_int_equal(jg_backward(jg_sum(y), NULL, 0), 0);
        double gv[6];
        tu_values(jg_grad(x), gv);
        assert_true(gv[0] == 0 && gv[1] == 0 && gv[2] == -1 && gv[3] == 1 && gv[4] == -1);
        assert_true(gv[5] == 0);
    }
    int64_t iv[3] = {-7, 7, INT64_MIN};
    jg_tensor *xi = jg_tensor_new(JG_I64, 1, (int64_t[]){3}, iv);
    const int64_t *ai = jg_data(jg_abs(xi));
    assert_true(ai[0] == 7 && ai[1] == 7 && ai[2] == INT64_MIN);
    jg_scope_pop();
}

static void test_int64_and_promotion(void **state) {
    (void)state;
    jg_tensor *i1 = tu_tensor(JG_I64, 1, TU_SHAPE(3), TU_VALS(7, -3, 4));
    jg_tensor *i2 = tu_tensor(JG_I64, 1, TU_SHAPE(3), TU_VALS(2, 2, -8));
    jg_tensor *f = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(0.5, 1.5, 2.5));
    jg_tensor *d = tu_tensor(JG_F64, 1, TU_SHAPE(3), TU_VALS(0.1, 0.2, 0.3));
    jg_tensor *r;

    r = jg_add(f, d); /* f32 + f64 -> f64 */
    assert_int_equal(jg_dtype_of(r), JG_F64);
    TU_CHECK(r, 1, TU_SHAPE(3), TU_VALS(0.5 + 0.1, 1.5 + 0.2, 2.5 + 0.3), 0);
    r = jg_mul(i1, f); /* i64 * f32 -> f32 */
    assert_int_equal(jg_dtype_of(r), JG_F32);
    TU_CHECK(r, 1, TU_SHAPE(3), TU_VALS(3.5, -4.5, 10), 0);
    r = jg_add(i1, i2); /* i64 + i64 stays i64 */
    assert_int_equal(jg_dtype_of(r), JG_I64);
    TU_CHECK(r, 1, TU_SHAPE(3), TU_VALS(9, -1, -4), 0);
    r = jg_mul(i1, i2);
    assert_int_equal(jg_dtype_of(r), JG_I64);
    TU_CHECK(r, 1, TU_SHAPE(3), TU_VALS(14, -6, -32), 0);
    r = jg_div(i1, i2); /* true division -> f32 */
    assert_int_equal(jg_dtype_of(r), JG_F32);
    TU_CHECK(r, 1, TU_SHAPE(3), TU_VALS(3.5, -1.5, -0.5), 0);
    r = jg_exp(i2); /* float ops on i64 -> f32 */
    assert_int_equal(jg_dtype_of(r), JG_F32);
    TU_CHECK(r, 1, TU_SHAPE(3), TU_VALS(expf(2), expf(2), expf(-8)), 0);
    r = jg_sqrt(jg_tensor_new(JG_I64, 1, TU_SHAPE(2), (const int64_t[]){4, 9}));
    assert_int_equal(jg_dtype_of(r), JG_F32);
    TU_CHECK(r, 1, TU_SHAPE(2), TU_VALS(2, 3), 0);
    r = jg_neg(i1); /* sign ops keep i64 */
    assert_int_equal(jg_dtype_of(r), JG_I64);
    TU_CHECK(r, 1, TU_SHAPE(3), TU_VALS(-7, 3, -4), 0);
    r = jg_relu(i1);
    assert_int_equal(jg_dtype_of(r), JG_I64);
    TU_CHECK(r, 1, TU_SHAPE(3), TU_VALS(7, 0, 4), 0);
    r = jg_mul_scalar(i1, 2);
    assert_int_equal(jg_dtype_of(r), JG_I64);
    TU_CHECK(r, 1, TU_SHAPE(3), TU_VALS(14, -6, 8), 0);
    r = jg_to_dtype(f, JG_I64); /* truncation toward zero */
    assert_int_equal(jg_dtype_of(r), JG_I64);
    TU_CHECK(r, 1, TU_SHAPE(3), TU_VALS(0, 1, 2), 0);
    /* a 0-d f64 with an f32 tensor promotes to f64 too (no "scalar" special case) */
    r = jg_add(jg_scalar(JG_F64, 1), f);
    assert_int_equal(jg_dtype_of(r), JG_F64);

    /* gradients flow back through the promotion in the input's dtype */
    jg_set_requires_grad(f, true);
    jg_tensor *y = jg_sum(jg_mul(f, d));
    assert_int_equal(jg_dtype_of(y), JG_F64);
    assert_int_equal(jg_backward(y, NULL, 0), 0);
    assert_int_equal(jg_dtype_of(jg_grad(f)), JG_F32);
    TU_CHECK(jg_grad(f), 1, TU_SHAPE(3), TU_VALS((float)0.1, (float)0.2, (float)0.3), 0);
    jg_clear_grad(f);
    y = jg_sum(jg_to_dtype(f, JG_F64));
    assert_string_equal(jg_grad_fn_name(jg_to_dtype(f, JG_F64)), "ToCopyBackward0");
    assert_int_equal(jg_backward(y, NULL, 0), 0);
    assert_int_equal(jg_dtype_of(jg_grad(f)), JG_F32);
    TU_CHECK(jg_grad(f), 1, TU_SHAPE(3), TU_VALS(1, 1, 1), 0);
    /* int tensors never require grad */
    jg_set_requires_grad(i1, true);
    TU_ERROR("only Tensors of floating point dtype can require gradients");
    assert_false(jg_requires_grad(i1));
}

/* ---- backward vs finite differences ---- */

typedef struct {
    const ew_row *r;
    int order;    /* 1: the op itself; 2: its gradient (create_graph) */
    int wrt;      /* order 2: which input's gradient to return */
    jg_tensor *w; /* order 2: weights making the first gradient non-trivial */
} gc_user;

static jg_tensor *gc_fn(void *user, int n, jg_tensor *const *in) {
    (void)n;
    gc_user *u = user;
    jg_tensor *y = apply_row(u->r, in[0], in[1]);
    if (u->order == 1 || !y)
        return y;
    jg_tensor *s = jg_sum(jg_mul(y, u->w));
    if (!s)
        return NULL;
    jg_tensor *g[2];
    jg_tensor *const *wrt = in;
    int n_wrt = u->r->arity;
    if (jg_autograd_grad(1, &s, NULL, n_wrt, wrt, JG_CREATE_GRAPH | JG_ALLOW_UNUSED, g) < 0)
        return NULL;
    jg_tensor *res = g[u->wrt];
    if (!res) /* no dependence: a zero gradient */
        res = jg_mul_scalar(jg_detach(in[u->wrt]), 0.0);
    return res;
}

static void test_backward_gradcheck(void **state) {
    (void)state;
    for (int k = 0; k < N_ROWS; k++) {
        const ew_row *r = &rows[k];
        for (int bc = 0; bc < (r->arity == 2 ? 2 : 1); bc++) {
            jg_scope_push();
            double a[12], b[12];
            input_vals(r, 12, a, b);
            /* bc: [3, 1] with [4], so the gradients are summed back */
            jg_tensor *ta = bc ? tu_tensor(JG_F64, 2, TU_SHAPE(3, 1), a)
                               : tu_tensor(JG_F64, 2, TU_SHAPE(3, 4), a);
            jg_tensor *tb =
                bc ? tu_tensor(JG_F64, 1, TU_SHAPE(4), b) : tu_tensor(JG_F64, 2, TU_SHAPE(3, 4), b);
            jg_set_requires_grad(ta, true);
            jg_set_requires_grad(tb, r->arity == 2);
            jg_tensor *in[2] = {ta, tb};
            jg_tensor *y = apply_row(r, ta, tb);
            assert_non_null(y);
            assert_string_equal(jg_grad_fn_name(y), r->bw_name);
            gc_user u = {r, 1, 0, NULL};
            int rc = jg_gradcheck(gc_fn, &u, 2, in, 1e-6, 1e-8, 1e-6);
            if (rc)
                print_error("%s (broadcast %d): %s\n", r->name, bc, jg_last_error());
            assert_int_equal(rc, 0);
            /* double backward: the gradient itself, checked the same way */
            u.order = 2;
            u.w = jg_randn(JG_F64, 2, TU_SHAPE(3, 4));
            for (u.wrt = 0; u.wrt < r->arity; u.wrt++) {
                rc = jg_gradcheck(gc_fn, &u, 2, in, 1e-6, 1e-7, 1e-5);
                if (rc)
                    print_error("%s (broadcast %d) double backward wrt %d: %s\n", r->name, bc,
                                u.wrt, jg_last_error());
                assert_int_equal(rc, 0);
            }
            assert_null(jg_grad(ta));
            assert_null(jg_grad(tb));
            jg_scope_pop();
        }
    }
}

/* gradcheck itself must be able to fail: x * detach(x) hides half the gradient */
static jg_tensor *wrong_fn(void *user, int n, jg_tensor *const *in) {
    (void)user, (void)n;
    return jg_mul(in[0], jg_detach(in[0]));
}

static jg_tensor *sum_fn(void *user, int n, jg_tensor *const *in) {
    (void)user, (void)n;
    return jg_sum(jg_mul(in[0], in[1]));
}

static void test_gradcheck_detects_errors(void **state) {
    (void)state;
    jg_tensor *x = tu_tensor(JG_F64, 1, TU_SHAPE(3), TU_VALS(1, 2, 3));
    jg_set_requires_grad(x, true);
    uint64_t v0 = jg_version(x);
    assert_int_equal(jg_gradcheck(wrong_fn, NULL, 1, &x, 1e-6, 1e-8, 1e-6), -1);
    TU_ERROR("input 0, element 0");
    TU_ERROR("numerical 2");
    TU_ERROR("analytical 1");
    /* the inputs are restored exactly, with no version bump and no .grad */
    TU_CHECK(x, 1, TU_SHAPE(3), TU_VALS(1, 2, 3), 0);
    assert_true(jg_version(x) == v0);
    assert_null(jg_grad(x));
    /* float32 inputs are refused */
    jg_tensor *f = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(1, 2, 3));
    jg_tensor *in[2] = {x, f};
    assert_int_equal(jg_gradcheck(sum_fn, NULL, 2, in, 1e-6, 1e-8, 1e-6), -1);
    TU_ERROR("gradcheck expects float64 inputs; input 1 is float32");
    /* nothing to check */
    jg_tensor *c = tu_tensor(JG_F64, 1, TU_SHAPE(3), TU_VALS(1, 2, 3));
    jg_tensor *in2[2] = {c, c};
    assert_int_equal(jg_gradcheck(sum_fn, NULL, 2, in2, 1e-6, 1e-8, 1e-6), -1);
    TU_ERROR("at least one input tensor to require gradient");
    /* a strided (non-contiguous) input is perturbed element by element correctly */
    jg_tensor *m = tu_tensor(JG_F64, 2, TU_SHAPE(2, 3), TU_VALS(1, 2, 3, 4, 5, 6));
    jg_tensor *mt = jg_detach(jg_transpose(m, 0, 1));
    jg_set_requires_grad(mt, true);
    jg_tensor *w = tu_tensor(JG_F64, 2, TU_SHAPE(3, 2), TU_VALS(1, -2, 3, -4, 5, -6));
    jg_tensor *in3[2] = {mt, w};
    assert_int_equal(jg_gradcheck(sum_fn, NULL, 2, in3, 1e-6, 1e-8, 1e-6), 0);
    TU_CHECK(m, 2, TU_SHAPE(2, 3), TU_VALS(1, 2, 3, 4, 5, 6), 0);
}

/* ---- autograd cases ---- */

static void test_same_tensor_twice_and_fanout(void **state) {
    (void)state;
    jg_tensor *x = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(1, -2, 3));
    jg_set_requires_grad(x, true);
    assert_int_equal(jg_backward(jg_sum(jg_mul(x, x)), NULL, 0), 0);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(3), TU_VALS(2, -4, 6), 0);
    jg_clear_grad(x);
    /* y = x*3 + x*x: dy/dx = 3 + 2x */
    jg_tensor *y = jg_add(jg_mul_scalar(x, 3), jg_mul(x, x));
    assert_int_equal(jg_backward(jg_sum(y), NULL, 0), 0);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(3), TU_VALS(5, -1, 9), 0);
    jg_clear_grad(x);
    /* x - x and x / x: both slots of one tensor */
    assert_int_equal(jg_backward(jg_sum(jg_sub(x, x)), NULL, 0), 0);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(3), TU_VALS(0, 0, 0), 0);
    jg_clear_grad(x);
    assert_int_equal(jg_backward(jg_sum(jg_div(x, x)), NULL, 0), 0);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(3), TU_VALS(0, 0, 0), 1e-7);
    jg_clear_grad(x);
    /* a broadcast operand used against itself: x[3,1] * x^T-like [3] */
    jg_tensor *c = jg_reshape(x, 2, TU_SHAPE(3, 1));
    assert_int_equal(jg_backward(jg_sum(jg_mul(c, x)), NULL, 0), 0);
    /* d/dx_i sum_jk x_j x_k = 2 * sum(x) */
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(3), TU_VALS(4, 4, 4), 0);
}

static void test_double_backward_closed_forms(void **state) {
    (void)state;
    const double xs[4] = {-1.3, -0.2, 0.4, 1.7};
    for (int which = 0; which < 4; which++) {
        jg_scope_push();
        jg_tensor *x = tu_tensor(JG_F64, 1, TU_SHAPE(4), xs);
        jg_set_requires_grad(x, true);
        jg_tensor *y;
        switch (which) {
        case 0:
            y = jg_tanh(x);
            break;
        case 1:
            y = jg_exp(x);
            break;
        case 2:
            y = jg_mul(jg_mul(x, x), x);
            break;
        default:
            y = jg_sigmoid(x);
            break;
        }
        jg_tensor *s = jg_sum(y), *g;
        assert_int_equal(jg_autograd_grad(1, &s, NULL, 1, &x, JG_CREATE_GRAPH, &g), 0);
        assert_true(jg_requires_grad(g));
        assert_int_equal(jg_backward(jg_sum(g), NULL, 0), 0);
        double d1[4], d2[4];
        for (int i = 0; i < 4; i++) {
            double v = xs[i], t = tanh(v), e = exp(v), sg = 1 / (1 + exp(-v));
            d1[i] = which == 0   ? 1 - t * t
                    : which == 1 ? e
                    : which == 2 ? 3 * v * v
                                 : sg * (1 - sg);
            d2[i] = which == 0   ? -2 * t * (1 - t * t)
                    : which == 1 ? e
                    : which == 2 ? 6 * v
                                 : sg * (1 - sg) * (1 - 2 * sg);
        }
        TU_CHECK(g, 1, TU_SHAPE(4), d1, 1e-14);
        TU_CHECK(jg_grad(x), 1, TU_SHAPE(4), d2, 1e-14);
        jg_scope_pop();
    }
}

/* ---- errors ---- */

static void test_errors(void **state) {
    (void)state;
    jg_tensor *a = jg_full(JG_F32, 2, TU_SHAPE(2, 3), 1);
    jg_tensor *b = jg_full(JG_F32, 2, TU_SHAPE(2, 4), 1);
    assert_null(jg_add(a, b));
    TU_ERROR("The size of tensor a (3) must match the size of tensor b (4) at non-singleton "
             "dimension 1");
    assert_null(jg_mul(jg_full(JG_F64, 1, TU_SHAPE(5), 1), a));
    TU_ERROR("The size of tensor a (5) must match the size of tensor b (3) at non-singleton "
             "dimension 1");
    assert_null(jg_add(NULL, a));
    TU_ERROR("argument 0 is NULL");
    assert_null(jg_mul(a, NULL));
    TU_ERROR("argument 1 is NULL");
    assert_null(jg_exp(NULL));
    TU_ERROR("NULL");
    assert_null(jg_pow_scalar(NULL, 2));
    TU_ERROR("NULL");
    assert_null(jg_to_dtype(a, (jg_dtype)7));
    TU_ERROR("invalid dtype");
    assert_null(jg_clone(NULL));
    TU_ERROR("NULL");
    /* in-place with a shape that would have to grow */
    assert_int_equal(jg_add_(jg_full(JG_F32, 1, TU_SHAPE(3), 1), a), -1);
    TU_ERROR("output with shape [3] doesn't match the broadcast shape [2, 3]");
    /* failures leave the inputs as they were */
    TU_CHECK(a, 2, TU_SHAPE(2, 3), TU_VALS(1, 1, 1, 1, 1, 1), 0);
}

/* A binary op with one column-major operand on a row-major output (ops/
 * elementwise.c, ew_transposed2: tiles through a row-major buffer) gives
 * the bits of the same op on a contiguous copy: either operand transposed,
 * in place (x.add_(w.t()), a transposed gradient into .grad), a column
 * stride wider than the rows (a sliced base), ragged tiles, sizes below the
 * tiling threshold, f32 and f64, at 1 and 2 threads. */
static void test_transposed_operand_tiles(void **state) {
    (void)state;
    typedef jg_tensor *(*binop)(jg_tensor *, jg_tensor *);
    const binop ops[4] = {jg_add, jg_sub, jg_mul, jg_div};
    const int64_t shapes[4][2] = {{300, 517}, {64, 100}, {33, 200}, {10, 10}};
    int saved = jg_get_num_threads();
    for (int d = 0; d < 2; d++)
        for (int sh = 0; sh < 4; sh++)
            for (int threads = 1; threads <= 2; threads++) {
                assert_int_equal(jg_set_num_threads(threads), 0);
                jg_dtype dt = d ? JG_F64 : JG_F32;
                int64_t r = shapes[sh][0], c = shapes[sh][1];
                jg_manual_seed(40 + sh);
                jg_tensor *a = jg_randn(dt, 2, TU_SHAPE(r, c));
                /* bt: [r, c] column-major with column stride r + 3 */
                jg_tensor *base = jg_randn(dt, 2, TU_SHAPE(c, r + 3));
                jg_tensor *bt = jg_transpose(jg_slice(base, 1, 0, r), 0, 1);
                jg_tensor *bc = jg_contiguous(bt);
                assert_non_null(bc);
                for (int o = 0; o < 4; o++) {
                    TU_SAME(ops[o](a, bt), ops[o](a, bc));
                    TU_SAME(ops[o](bt, a), ops[o](bc, a));
                }
                jg_tensor *x = jg_clone(a);
                assert_int_equal(jg_add_(x, bt), 0);
                TU_SAME(x, jg_add(a, bc));
                /* w.t() of a contiguous w: the column stride is the rows */
                jg_tensor *w = jg_contiguous(jg_transpose(bc, 0, 1));
                x = jg_clone(a);
                assert_int_equal(jg_add_(x, jg_transpose(w, 0, 1)), 0);
                TU_SAME(x, jg_add(a, bc));
            }
    jg_set_num_threads(saved);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_forward_table),
        TU_TEST(test_tanh_f32_kernel),
        TU_TEST(test_inplace_rows_and_overlap),
        TU_TEST(test_abs_specials),
        TU_TEST(test_int64_and_promotion),
        TU_TEST(test_backward_gradcheck),
        TU_TEST(test_gradcheck_detects_errors),
        TU_TEST(test_same_tensor_twice_and_fanout),
        TU_TEST(test_double_backward_closed_forms),
        TU_TEST(test_errors),
        TU_TEST(test_transposed_operand_tiles),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
