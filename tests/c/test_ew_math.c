/* The math functions of src/ops/ew_math.h (exp, log, erf, pow, sigmoid,
 * tanh, sqrt of f32 and f64): maximum error in ulp against long-double libm
 * over strided sweeps of the f32 bit patterns and a few million f64 inputs,
 * against the bounds docs/kernels.md documents; exact special values; and
 * eager == compiled (interp and c) bitwise for a chain of these ops. */
#include "testutil.h"

#include "backend/cgen.h"
#include "ops/ew_math.h"

#include <fenv.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ ulp error */

/* Error of y in ulps of the f32 (or f64: mant 52, emin -1022) format at the
 * exact value ref.  NaN must give NaN; a result beyond the largest finite
 * value must be inf of its sign (then the error is 0). */
static double ulp_err(long double y, long double ref, int mant, int emin, long double maxv) {
    if (isnan(ref))
        return isnan(y) ? 0.0 : INFINITY;
    if (isnan(y))
        return INFINITY;
    if (isinf(y) || isinf(ref)) {
        long double lim =
            maxv + ldexpl(1.0L, ilogbl(maxv) - mant - 1); /* rounds to inf from here */
        if (isinf(y) && (y > 0) == (ref > 0) && fabsl(ref) >= lim)
            return 0.0;
        return y == ref ? 0.0 : INFINITY;
    }
    int e = ref == 0 ? emin : ilogbl(ref);
    if (e < emin)
        e = emin;
    return (double)(fabsl(y - ref) / ldexpl(1.0L, e - mant));
}
static double ulpf(float y, long double ref) {
    return ulp_err(y, ref, 23, -126, FLT_MAX);
}
static double ulpd(double y, long double ref) {
    return ulp_err(y, ref, 52, -1022, DBL_MAX);
}

static float bits_f(uint32_t u) {
    float x;
    memcpy(&x, &u, 4);
    return x;
}
static double bits_d(uint64_t u) {
    double x;
    memcpy(&x, &u, 8);
    return x;
}
static uint64_t rng_state = 0x9e3779b97f4a7c15u;
static uint64_t rng64(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* The reference functions and the ones under test, f32 and f64. */
static long double ref_sigmoid(long double x) {
    return 1.0L / (1.0L + expl(-x));
}
static float sigmoidf_(float x) { /* the SIGMOID row's expression at T = float */
    return 1.0f / (1.0f + jg_ew_expf(-x));
}
static double sigmoidd_(double x) {
    return 1.0 / (1.0 + jg_ew_expd(-x));
}
static float tanhf_(float x) {
    return jg_ew_tanhf(x);
}
static float sqrtf_(float x) {
    return sqrtf(x);
}

typedef struct {
    const char *name;
    float (*f)(float);
    double (*d)(double);
    long double (*ref)(long double);
    double max_f32, max_f64; /* the documented bounds (docs/kernels.md) */
} fn1;

static const fn1 FNS[] = {
    {"exp", jg_ew_expf, jg_ew_expd, expl, 0.9, 1.0},
    {"log", jg_ew_logf, jg_ew_logd, logl, 0.501, 1.0},
    {"erf", jg_ew_erff, jg_ew_erfd, erfl, 1.33, 1.5},
    {"sigmoid", sigmoidf_, sigmoidd_, ref_sigmoid, 3.0, 3.0},
    {"tanh", tanhf_, NULL, tanhl, 1.05, 0},
    {"sqrt", sqrtf_, NULL, sqrtl, 0.5, 0},
};

/* Every 4099th f32 bit pattern (all exponents, both signs) plus the
 * specials: max error of fn against its reference. */
static double sweep_f32(const fn1 *fn, float *worst) {
    double mx = 0;
    for (uint64_t u = 0; u <= 0xffffffffu; u += 4099) {
        float x = bits_f((uint32_t)u);
        double e = ulpf(fn->f(x), fn->ref((long double)x));
        if (fn->f == sigmoidf_ && x < -0x1.62e42ep6f) /* exp(-x) overflows: 0, as PyTorch */
            e = fn->f(x) == 0.0f ? 0.0 : INFINITY;
        if (e > mx)
            mx = e, *worst = x;
    }
    static const float sp[] = {0.0f,      -0.0f,     1.0f,       -1.0f,    INFINITY,
                               -INFINITY, NAN,       FLT_MIN,    -FLT_MIN, FLT_MAX,
                               -FLT_MAX,  0x1p-149f, -0x1p-149f, 88.72f,   -103.9f};
    for (size_t i = 0; i < sizeof sp / sizeof *sp; i++) {
        double e = ulpf(fn->f(sp[i]), fn->ref((long double)sp[i]));
        if (e > mx)
            mx = e, *worst = sp[i];
    }
    return mx;
}

/* n random doubles: half uniform in [lo, hi], half random bit patterns
 * (every exponent), plus the specials. */
static double sweep_f64(const fn1 *fn, double lo, double hi, int n, double *worst) {
    double mx = 0;
    for (int i = 0; i < n; i++) {
        double x = i % 2 ? lo + (hi - lo) * ((double)(rng64() >> 11) * 0x1p-53) : bits_d(rng64());
        double e = ulpd(fn->d(x), fn->ref((long double)x));
        if (fn->d == sigmoidd_ && x < -709.79) /* exp(-x) overflows: 0, as PyTorch */
            e = fn->d(x) == 0.0 ? 0.0 : INFINITY;
        if (e > mx)
            mx = e, *worst = x;
    }
    static const double sp[] = {0.0,    -0.0,    1.0,      -1.0,    INFINITY, -INFINITY,
                                NAN,    DBL_MIN, -DBL_MIN, DBL_MAX, -DBL_MAX, 0x1p-1074,
                                709.78, -745.1,  -708.4,   6.0,     1.0};
    for (size_t i = 0; i < sizeof sp / sizeof *sp; i++) {
        double e = ulpd(fn->d(sp[i]), fn->ref((long double)sp[i]));
        if (e > mx)
            mx = e, *worst = sp[i];
    }
    return mx;
}

/* The sweeps measure against long double.  Where it is not wider than
 * double (valgrind runs x87 code in double precision), the reference is
 * too coarse to measure ulps: those tests skip. */
static bool long_double_is_wide(void) {
    volatile long double one = 1.0L, tiny = 0x1p-60L;
    return one + tiny != one;
}

static void test_ulp_f32(void **state) {
    if (!long_double_is_wide())
        skip();
    (void)state;
    for (size_t i = 0; i < sizeof FNS / sizeof *FNS; i++) {
        float w = 0;
        double mx = sweep_f32(&FNS[i], &w);
        print_message("f32 %-8s max %.4f ulp (at %a)\n", FNS[i].name, mx, (double)w);
        if (!(mx <= FNS[i].max_f32))
            fail_msg("f32 %s: %.4f ulp at %a > %.3f", FNS[i].name, mx, (double)w, FNS[i].max_f32);
    }
}

static void test_ulp_f64(void **state) {
    if (!long_double_is_wide())
        skip();
    (void)state;
    /* ranges where the results are neither 0/1/inf nor NaN */
    static const double lo[] = {-745.2, 0.0, -6.5, -40.0}, hi[] = {709.8, 1e6, 6.5, 40.0};
    for (size_t i = 0; i < sizeof FNS / sizeof *FNS; i++) {
        if (!FNS[i].d)
            continue;
        double w = 0;
        double mx = sweep_f64(&FNS[i], lo[i], hi[i], 1000000, &w);
        if (i == 1) { /* log: also just around 1, where log(1 + f) ~ f */
            double w2 = 0, m2 = sweep_f64(&FNS[i], 0.5, 2.0, 500000, &w2);
            if (m2 > mx)
                mx = m2, w = w2;
        }
        if (i == 2) {
            double w2 = 0, m2 = sweep_f64(&FNS[i], -1.5, 1.5, 500000, &w2);
            if (m2 > mx)
                mx = m2, w = w2;
        }
        print_message("f64 %-8s max %.4f ulp (at %a)\n", FNS[i].name, mx, w);
        if (!(mx <= FNS[i].max_f64))
            fail_msg("f64 %s: %.4f ulp at %a > %.3f", FNS[i].name, mx, w, FNS[i].max_f64);
    }
}

/* Same value, or both NaN (the sign of zero counts). */
static bool same_f(float a, float b) {
    return (isnan(a) && isnan(b)) || (a == b && signbit(a) == signbit(b));
}
static bool same_d(double a, double b) {
    return (isnan(a) && isnan(b)) || (a == b && signbit(a) == signbit(b));
}

/* IEEE/C99 special values, as glibc gives them: NaN in -> NaN out, +-inf,
 * -0, overflow to inf, underflow to 0 and subnormals. */
static void test_special_values(void **state) {
    (void)state;
    static const double xs[] = {0.0,     -0.0,    INFINITY, -INFINITY, NAN,       -NAN,
                                1.0,     -1.0,    0x1p-149, -0x1p-149, 0x1p-1074, DBL_MIN,
                                FLT_MAX, DBL_MAX, -DBL_MAX, 88.8,      -104.0,    -103.2,
                                709.8,   -745.2,  -744.0,   100.0,     -100.0,    6.0,
                                -6.0,    4.0,     3.9,      1e-300,    -1e-300,   0.5};
    for (size_t i = 0; i < sizeof xs / sizeof *xs; i++) {
        double x = xs[i];
        float xf = (float)x;
        /* f32 exp is within 0.9 ulp, not correctly rounded: exact where
         * glibc's result is special (0, inf, NaN, 1 at +-0) */
        float ef = expf(xf);
        if (!(isnan(ef) || isinf(ef) || ef == 0.0f || ef == 1.0f)
                ? ulpf(jg_ew_expf(xf), expl(xf)) > 0.9
                : !same_f(jg_ew_expf(xf), ef))
            fail_msg("expf(%a) = %a, libm %a", (double)xf, (double)jg_ew_expf(xf), (double)ef);
        if (!same_f(jg_ew_logf(xf), logf(xf)))
            fail_msg("logf(%a) = %a, libm %a", (double)xf, (double)jg_ew_logf(xf),
                     (double)logf(xf));
        /* f32 erf is within 1.33 ulp: exact where glibc's result is
         * special (NaN, +-1, +-0) or the input is subnormal (x + x P) */
        float rf = erff(xf);
        if (!(isnan(rf) || rf == 1.0f || rf == -1.0f || rf == 0.0f || fabsf(xf) < FLT_MIN)
                ? ulpf(jg_ew_erff(xf), erfl(xf)) > 1.33
                : !same_f(jg_ew_erff(xf), rf))
            fail_msg("erff(%a) = %a, libm %a", (double)xf, (double)jg_ew_erff(xf), (double)rf);
        if (!same_d(jg_ew_expd(x), exp(x)))
            fail_msg("exp(%a) = %a, libm %a", x, jg_ew_expd(x), exp(x));
        if (!same_d(jg_ew_logd(x), log(x)))
            fail_msg("log(%a) = %a, libm %a", x, jg_ew_logd(x), log(x));
        if (!same_d(jg_ew_erfd(x), erf(x)))
            fail_msg("erf(%a) = %a, libm %a", x, jg_ew_erfd(x), erf(x));
    }
    /* sigmoid extremes (PyTorch's 1 / (1 + exp(-x))) */
    assert_true(same_f(sigmoidf_(-INFINITY), 0.0f) && same_f(sigmoidf_(INFINITY), 1.0f));
    assert_true(same_f(sigmoidf_(-200.0f), 0.0f) && same_f(sigmoidf_(200.0f), 1.0f));
    assert_true(isnan(sigmoidf_(NAN)) && isnan(sigmoidd_(NAN)));
    assert_true(same_d(sigmoidd_(-INFINITY), 0.0) && same_d(sigmoidd_(INFINITY), 1.0));
    assert_true(same_f(jg_ew_expf(-104.0f), 0.0f) && jg_ew_expf(-103.0f) > 0.0f);
    /* f32 exp gives a NaN argument back, quieted (its clamp covers NaN too) */
    assert_true(jg_ew_f32bits(jg_ew_expf(bits_f(0x7f800001u))) == 0x7fc00001);
    assert_true(jg_ew_f32bits(jg_ew_expf(bits_f(0xffc00000u))) == (int32_t)0xffc00000u);
    assert_true(same_d(jg_ew_expd(-0x1.74385446d71c3p9), 0x1p-1074)); /* smallest subnormal */
}

/* f32 exp on every f32 of the ranges where its scaling is delicate: near
 * overflow (88.72: FLT_MAX or inf), through the subnormal results (-87.3 to
 * -103.97, where 2^k is applied in two steps) to where it rounds to 0, and
 * around 0 (k = 0, 1, -1).  Within the bound, and 0 / inf exactly where the
 * exact value rounds to them. */
static void test_expf_dense_ranges(void **state) {
    if (!long_double_is_wide())
        skip();
    (void)state;
    /* bit-pattern ranges [from, to] (a negative float's magnitude grows with
     * its bits) and the step through them; around 0 every 97th */
    static const struct {
        float from, to;
        uint32_t step;
    } rg[] = {{88.0f, 89.0f, 1}, {-86.0f, -104.0f, 1}, {0.0f, 1.5f, 97}, {-0.0f, -1.5f, 97}};
    double mx = 0;
    float w = 0;
    for (size_t r = 0; r < sizeof rg / sizeof *rg; r++) {
        uint32_t u0, u1;
        memcpy(&u0, &rg[r].from, 4);
        memcpy(&u1, &rg[r].to, 4);
        for (uint32_t u = u0; u <= u1; u += rg[r].step) {
            float x = bits_f(u);
            double e = ulpf(jg_ew_expf(x), expl((long double)x));
            if (e > mx)
                mx = e, w = x;
        }
    }
    print_message("f32 exp dense ranges max %.4f ulp (at %a)\n", mx, (double)w);
    if (!(mx <= 0.9))
        fail_msg("f32 exp: %.4f ulp at %a", mx, (double)w);
    assert_true(same_f(jg_ew_expf(-0x1.9fe368p6f), 0x1p-149f)); /* rounds up to the least */
    assert_true(same_f(jg_ew_expf(-0x1.9fe36ap6f), 0.0f));
    assert_true(same_f(jg_ew_expf(0x1.62e42ep6f), 0x1.ffff08p127f));
    assert_true(isinf(jg_ew_expf(0x1.62e430p6f)));
}

/* f32 tanh where its error is largest or its cases meet: every f32 within
 * 2^16 bit patterns of the switch from the polynomial to 1 - 2 / (e + 1)
 * at 0.8, every 389th in [0, 9.5] (and its negation: tanh(-x) = -tanh(x)
 * bit for bit), and every f32 from 8.9 to 9.6, where the result becomes 1.
 * Within the bound; specials: +-0 keep their sign, +-inf give +-1, a NaN
 * comes back quieted, subnormals give themselves. */
static void test_tanhf_dense_ranges(void **state) {
    if (!long_double_is_wide())
        skip();
    (void)state;
    static const struct {
        uint32_t from, to, step;
    } rg[] = {{JG_EW_TANHF_SMALL - 0x10000, JG_EW_TANHF_SMALL + 0x10000, 1},
              {0, 0x41180000u, 389},
              {0x410e6666u, 0x4119999au, 1}};
    double mx = 0;
    float w = 0;
    for (size_t r = 0; r < sizeof rg / sizeof *rg; r++)
        for (uint32_t u = rg[r].from; u <= rg[r].to; u += rg[r].step) {
            float x = bits_f(u), y = jg_ew_tanhf(x);
            double e = ulpf(y, tanhl((long double)x));
            if (e > mx)
                mx = e, w = x;
            if (!same_f(jg_ew_tanhf(-x), -y))
                fail_msg("tanh(-%a) = %a, not -tanh(%a) = %a", (double)x, (double)jg_ew_tanhf(-x),
                         (double)x, (double)-y);
        }
    print_message("f32 tanh dense ranges max %.4f ulp (at %a)\n", mx, (double)w);
    if (!(mx <= 1.05))
        fail_msg("f32 tanh: %.4f ulp at %a", mx, (double)w);
    assert_true(same_f(jg_ew_tanhf(0.0f), 0.0f) && same_f(jg_ew_tanhf(-0.0f), -0.0f));
    assert_true(same_f(jg_ew_tanhf(INFINITY), 1.0f) && same_f(jg_ew_tanhf(-INFINITY), -1.0f));
    assert_true(same_f(jg_ew_tanhf(9.5f), 1.0f) && same_f(jg_ew_tanhf(-1e30f), -1.0f));
    assert_true(same_f(jg_ew_tanhf(0x1p-149f), 0x1p-149f));
    assert_true(same_f(jg_ew_tanhf(-0x1.8p-127f), -0x1.8p-127f));
    assert_true(jg_ew_f32bits(jg_ew_tanhf(bits_f(0x7f800001u))) == 0x7fc00001);
    assert_true(jg_ew_f32bits(jg_ew_tanhf(bits_f(0xffc00000u))) == (int32_t)0xffc00000u);
}

/* f32 erf: every f32 within 2^19 bit patterns of 1 (where its two formulas
 * meet and both are least accurate: the measured maximum over all f32 is
 * 1.3251 ulp at 0x1.f07f6ap-1) and every 61st from 0.5 to 4.5 (the
 * erfc part, up to where it rounds to 1), against long double erfl; erf
 * is odd bit for bit; exact values at 0, 1, inf, NaN and subnormals. */
static void test_erff_dense_ranges(void **state) {
    if (!long_double_is_wide())
        skip();
    (void)state;
    static const struct {
        uint32_t from, to, step;
    } rg[] = {{0x3f800000u - 0x80000, 0x3f800000u + 0x80000, 1}, {0x3f000000u, 0x40900000u, 61}};
    double mx = 0;
    float w = 0;
    for (size_t r = 0; r < sizeof rg / sizeof *rg; r++)
        for (uint32_t u = rg[r].from; u <= rg[r].to; u += rg[r].step) {
            float x = bits_f(u), y = jg_ew_erff(x);
            double e = ulpf(y, erfl((long double)x));
            if (e > mx)
                mx = e, w = x;
            if (!same_f(jg_ew_erff(-x), -y))
                fail_msg("erf(-%a) = %a, not -erf(%a) = %a", (double)x, (double)jg_ew_erff(-x),
                         (double)x, (double)-y);
        }
    print_message("f32 erf dense ranges max %.4f ulp (at %a)\n", mx, (double)w);
    if (!(mx <= 1.33))
        fail_msg("f32 erf: %.4f ulp at %a", mx, (double)w);
    assert_true(same_f(jg_ew_erff(0.0f), 0.0f) && same_f(jg_ew_erff(-0.0f), -0.0f));
    assert_true(same_f(jg_ew_erff(INFINITY), 1.0f) && same_f(jg_ew_erff(-INFINITY), -1.0f));
    assert_true(same_f(jg_ew_erff(3.92f), 1.0f) && same_f(jg_ew_erff(-1e30f), -1.0f));
    assert_true(jg_ew_erff(3.9f) < 1.0f);
    assert_true(same_f(jg_ew_erff(1.0f), erff(1.0f)));
    assert_true(same_f(jg_ew_erff(0x1p-149f), 0x1p-149f));
    assert_true(jg_ew_f32bits(jg_ew_erff(bits_f(0x7f800001u))) == 0x7fc00001);
    assert_true(jg_ew_f32bits(jg_ew_erff(bits_f(0xffc00000u))) == (int32_t)0xffc00000u);
}

/* f32 tanh makes no subnormal on the way (each costs a microcode assist
 * per vector instruction: a chain of tanh layers whose values shrank ran 2x
 * slower): no operation may raise the underflow flag, for every f32 below
 * 2^-11 in steps of 4099 (subnormals included, both signs) and around the
 * switch at 0.8.  The results there are x itself below 2^-12. */
static void test_tanhf_no_underflow(void **state) {
    (void)state;
    feclearexcept(FE_ALL_EXCEPT);
    volatile float sink = 0.0f;
    for (uint32_t u = 0; u < 0x3a000000u; u += 4099) {
        for (int sgn = 0; sgn < 2; sgn++) {
            volatile float x = bits_f(u | (sgn ? 0x80000000u : 0));
            const float y = jg_ew_tanhf(x);
            sink = y;
            if (u < 0x39800000u && !same_f(y, x))
                fail_msg("tanh(%a) = %a, want x itself", (double)x, (double)y);
        }
    }
    for (uint32_t u = JG_EW_TANHF_SMALL - 4096; u < JG_EW_TANHF_SMALL + 4096; u++) {
        volatile float x = bits_f(u);
        sink = jg_ew_tanhf(x);
    }
    (void)sink;
    if (fetestexcept(FE_UNDERFLOW))
        fail_msg("f32 tanh raised the underflow flag (a subnormal intermediate)");
}

/* pow: every pair of special values equals glibc's powf (the C99 rules),
 * and random pairs stay within the bound. */
static void test_powf(void **state) {
    if (!long_double_is_wide())
        skip();
    (void)state;
    static const float v[] = {0.0f,     -0.0f,     1.0f,   -1.0f,   2.0f,  -2.0f,
                              0.5f,     -0.5f,     3.0f,   -3.0f,   2.5f,  -2.5f,
                              INFINITY, -INFINITY, NAN,    1e-30f,  1e30f, 0x1p24f,
                              -0x1p24f, 0x1p-149f, 127.0f, -127.0f, 0.1f,  16777215.0f};
    const size_t n = sizeof v / sizeof *v;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            float got = jg_ew_powf(v[i], v[j]), want = powf(v[i], v[j]);
            if (!same_f(got, want) && !(ulpf(got, powl(v[i], v[j])) <= 0.501))
                fail_msg("powf(%a, %a) = %a, libm %a", (double)v[i], (double)v[j], (double)got,
                         (double)want);
        }
    double mx = 0;
    for (int i = 0; i < 1000000; i++) {
        float x = bits_f((uint32_t)rng64() & 0x7fffffffu), y;
        if (i % 2) { /* results in range: y log x within [-100, 88] */
            x = (float)(((double)(rng64() >> 11) * 0x1p-53) * 1000.0);
            y = (float)(((double)(rng64() >> 11) * 0x1p-53) * 30.0 - 15.0);
        } else
            y = (float)(((double)(rng64() >> 11) * 0x1p-53) * 4.0 - 2.0);
        if (i % 3 == 0)
            x = -x, y = (float)(int)y;
        double e = ulpf(jg_ew_powf(x, y), powl(x, y));
        if (e > mx)
            mx = e;
    }
    print_message("f32 pow      max %.4f ulp\n", mx);
    assert_true(mx <= 0.501);
}

/* ------------------------------------------------------------ eager == compiled */

static int p_math(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *x = in[0];
    jg_tensor *t = jg_exp(jg_mul_scalar(x, 0.5));
    t = jg_add(jg_log(jg_add_scalar(t, 0.25)), jg_sigmoid(x));
    t = jg_erf(jg_mul(t, jg_tanh(x)));
    t = jg_add(t, jg_gelu(x, JG_GELU_NONE));
    t = jg_add(t, jg_silu(x));
    t = jg_pow_scalar(jg_add_scalar(jg_relu(t), 0.125), 1.7);
    out[0] = jg_sqrt(t);
    return out[0] ? 1 : -1;
}

/* eager, interp and c give the same bits for the outputs and the gradient
 * (f32 and f64), with the ops fused into loops on the c backend. */
static void test_compiled_same(void **state) {
    (void)state;
    const char *backends[2] = {"interp", "c"};
    for (int dt = 0; dt < 2; dt++) {
        const int64_t n = 4099;
        double *v = malloc(sizeof(double) * (size_t)n);
        for (int64_t i = 0; i < n; i++)
            v[i] = (double)(i - n / 2) * 0.013;
        v[0] = NAN, v[1] = INFINITY, v[2] = -INFINITY, v[3] = -0.0, v[4] = 100.0, v[5] = -100.0;
        jg_tensor *x = tu_tensor(dt ? JG_F64 : JG_F32, 1, TU_SHAPE(n), v);
        free(v);
        jg_set_requires_grad(x, true);
        jg_tensor *eo;
        assert_int_equal(p_math(NULL, NULL, 1, &x, &eo), 1);
        assert_int_equal(jg_backward(jg_sum(eo), NULL, 0), 0);
        jg_tensor *eg = jg_clone(jg_grad(x));
        for (int b = 0; b < 2; b++) {
            if (b == 1 && !jg_compile_backend_available("c"))
                continue;
            jg_clear_grad(x);
            jg_compiled *c = jg_compile(
                p_math, NULL, &(jg_compile_options){.backend = backends[b], .fullgraph = true});
            assert_non_null(c);
            jg_tensor *co;
            assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, &co), 1);
            TU_SAME(co, eo);
            assert_int_equal(jg_backward(jg_sum(co), NULL, 0), 0);
            TU_SAME(jg_grad(x), eg);
            jg_compiled_free(c);
        }
        if (jg_compile_backend_available("c")) { /* forward without grad: fused */
            bool prev = jg_set_grad_enabled(false);
            jg_compiled *c = jg_compile(p_math, NULL, &(jg_compile_options){.backend = "c"});
            jg_tensor *co;
            assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, &co), 1);
            TU_SAME(co, eo);
            int loops, fused;
            jg_cgen_last_stats(&loops, &fused, NULL);
            print_message("%s: %d loops, %d fused nodes\n", dt ? "f64" : "f32", loops, fused);
            assert_true(fused >= 10);
            jg_set_grad_enabled(prev);
            jg_compiled_free(c);
        }
        jg_clear_grad(x);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_ulp_f32),
        TU_TEST(test_ulp_f64),
        TU_TEST(test_special_values),
        TU_TEST(test_expf_dense_ranges),
        TU_TEST(test_tanhf_dense_ranges),
        TU_TEST(test_erff_dense_ranges),
        TU_TEST(test_tanhf_no_underflow),
        TU_TEST(test_powf),
        TU_TEST(test_compiled_same),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
