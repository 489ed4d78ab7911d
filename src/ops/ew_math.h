/* Math functions of the elementwise expressions that jitgrad defines itself
 * rather than taking from libm (see elementwise.def).
 *
 * This file is pasted verbatim into every source the c backend generates
 * (backend/cgen.c, through the build's ew_math_text.h), so the eager
 * kernels, the interpreter and generated code run the same operations and
 * agree bit for bit.  It must stay self-contained C11: <stdint.h> and
 * <string.h> only, no other jitgrad header. */
#ifndef JG_OPS_EW_MATH_H
#define JG_OPS_EW_MATH_H

#include <stdint.h>
#include <string.h>

/* |x| by clearing the sign bit, as fabs does (|-0| = 0, NaN keeps its
 * payload), without a libm call; int64 wraps like two's complement (|min|
 * is min, as in PyTorch). */
static inline float jg_ew_absf(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    u &= 0x7fffffffu;
    memcpy(&x, &u, 4);
    return x;
}
static inline double jg_ew_absd(double x) {
    uint64_t u;
    memcpy(&u, &x, 8);
    u &= ~((uint64_t)1 << 63);
    memcpy(&x, &u, 8);
    return x;
}
static inline int64_t jg_ew_absi(int64_t x) {
    return x < 0 ? (int64_t)(0 - (uint64_t)x) : x;
}
#define jg_ew_abs(x) _Generic((x), float : jg_ew_absf, double : jg_ew_absd, default : jg_ew_absi)(x)

/* Always inlined: an out-of-line call (gcc's choice for the long ones)
 * would keep the kernel loops from vectorizing. */
#if defined(__GNUC__)
#define JG_EW_INLINE static inline __attribute__((always_inline))
#else
#define JG_EW_INLINE static inline
#endif

/* ---- helpers of the functions below ----
 * Selects are done on integer bits with masks (all ones: take a): a ?: on
 * doubles can make gcc branch, and a branch stops vectorization. */
JG_EW_INLINE uint64_t jg_ew_d2u(double x) {
    uint64_t u;
    memcpy(&u, &x, 8);
    return u;
}
JG_EW_INLINE double jg_ew_u2d(uint64_t u) {
    double x;
    memcpy(&x, &u, 8);
    return x;
}
#define JG_EW_MASK(c) ((uint64_t)0 - (uint64_t)(c))
JG_EW_INLINE double jg_ew_seld(uint64_t m, double a, double b) {
    return jg_ew_u2d((jg_ew_d2u(a) & m) | (jg_ew_d2u(b) & ~m));
}
#define JG_EW_MAGIC 0x1.8p52 /* x + 1.5 2^52 - 1.5 2^52 rounds |x| < 2^51 to an integer */
#define JG_EW_LN2_HI 6.93147180369123816490e-01 /* 32 bits: k * LN2_HI is exact */
#define JG_EW_LN2_LO 1.90821492927058770002e-10
#define JG_EW_DNAN 0xfff8000000000000u /* the default NaN of x86 (what 0/0 gives) */

/* exp(r) - 1 - r for |r| <= ln2/2: the Taylor polynomial of degree 13 in
 * Estrin form (truncation below 2^-58 relative). */
JG_EW_INLINE double jg_ew_expm1_13(double r) {
    const double r2 = r * r, r4 = r2 * r2;
    const double a0 = 1.0 / 2 + r * (1.0 / 6), a1 = 1.0 / 24 + r * (1.0 / 120);
    const double a2 = 1.0 / 720 + r * (1.0 / 5040), a3 = 1.0 / 40320 + r * (1.0 / 362880);
    const double a4 = 1.0 / 3628800 + r * (1.0 / 39916800);
    const double a5 = 1.0 / 479001600 + r * (1.0 / 6227020800.0);
    const double b0 = a0 + r2 * a1, b1 = a2 + r2 * a3, b2 = a4 + r2 * a5;
    return r2 * ((b0 + r4 * b1) + (r4 * r4) * b2);
}

/* exp of a double: x = k ln2 + r (Cody-Waite, ln2 in two parts), |r| <=
 * ln2/2, exp(x) = 2^k (1 + expm1(r)).  2^k is applied as 2^k1 2^k2 (k1 =
 * round(k/2)): both halves are normal doubles for every k in [-1077, 1025],
 * the first product is exact and the second rounds once, so gradual
 * underflow and overflow to inf are right.  x is clamped to [-746, 710]
 * first (exp rounds to 0 below, overflows above; NaN is not clamped). */
JG_EW_INLINE double jg_ew_expd(double x) {
    x = jg_ew_seld(JG_EW_MASK(x > 710.0), 710.0, x);
    x = jg_ew_seld(JG_EW_MASK(x < -746.0), -746.0, x);
    const double kd = x * 1.4426950408889634 + JG_EW_MAGIC;
    const double k = kd - JG_EW_MAGIC;
    const double rh = x - k * JG_EW_LN2_HI, rl = k * JG_EW_LN2_LO; /* rh exact */
    const double r = rh - rl, rc = (rh - r) - rl;                  /* r + rc = rh - rl */
    /* 1 + r = t + e exactly (|r| < 1), so that 1 + p rounds once */
    const double t = 1.0 + r, e = (1.0 - t) + r;
    const double y = t + (e + (jg_ew_expm1_13(r) + rc));
    const double k1d = k * 0.5 + JG_EW_MAGIC;
    const double k2d = (k - (k1d - JG_EW_MAGIC)) + JG_EW_MAGIC;
    /* the integer sits in the low mantissa bits of k1d/k2d: shifting it into
     * the exponent field drops the magic's bits */
    const double s1 = jg_ew_u2d((jg_ew_d2u(k1d) + 1023) << 52);
    const double s2 = jg_ew_u2d((jg_ew_d2u(k2d) + 1023) << 52);
    return (y * s1) * s2;
}

/* exp for f32 results, in double: the same reduction with a degree 9
 * polynomial (truncation below 2^-37), one scale 2^k (k in [-151, 129] is a
 * normal double); x clamped to [-104, 89] (f32 exp is 0 below, inf above). */
JG_EW_INLINE double jg_ew_exp_f32core(double x) {
    x = jg_ew_seld(JG_EW_MASK(x > 89.0), 89.0, x);
    x = jg_ew_seld(JG_EW_MASK(x < -104.0), -104.0, x);
    const double kd = x * 1.4426950408889634 + JG_EW_MAGIC;
    const double k = kd - JG_EW_MAGIC;
    const double r = (x - k * JG_EW_LN2_HI) - k * JG_EW_LN2_LO;
    const double r2 = r * r, r4 = r2 * r2;
    const double a0 = 1.0 / 2 + r * (1.0 / 6), a1 = 1.0 / 24 + r * (1.0 / 120);
    const double a2 = 1.0 / 720 + r * (1.0 / 5040), a3 = 1.0 / 40320 + r * (1.0 / 362880);
    const double p = r + r2 * ((a0 + r2 * a1) + r4 * (a2 + r2 * a3));
    const double s = jg_ew_u2d((jg_ew_d2u(kd) + 1023) << 52);
    return s + s * p;
}
/* Selects in the f32 functions compare and mask 32-bit integers (the f32
 * bits): SSE2 has no 64-bit integer compare, and gcc vectorizes neither
 * those nor double compares turned into masks. */
JG_EW_INLINE float jg_ew_f32(int32_t u) {
    float x;
    memcpy(&x, &u, 4);
    return x;
}
JG_EW_INLINE int32_t jg_ew_f32bits(float x) {
    int32_t u;
    memcpy(&u, &x, 4);
    return u;
}
#define JG_EW_MASK32(c) (-(int32_t)(c))

/* exp of an f32, in f32 arithmetic (8 lanes per AVX2 vector; at most 0.896
 * ulp over all f32, see docs/kernels.md).  x = k ln2 + r: k = round(x /
 * ln2) by the 1.5 2^23 trick (k sits in the low mantissa bits of kf), r by
 * Cody-Waite with ln2 in two f32 parts (k LN2F_HI is exact for |k| < 2^9,
 * and so is rh = x - k LN2F_HI).  exp(r) = 1 + (rh + (r^2 P(r) - k
 * LN2F_LO)): the linear term is added as its two parts, so r = rh - k
 * LN2F_LO rounds only inside the polynomial's small term.  P of degree 4
 * (a least squares fit of (exp(r) - 1 - r) / r^2 on |r| <= 0.35, relative
 * error below 2^-27.9; scripts/ew_math_coeffs.py), Estrin form (a shorter
 * dependency chain than Horner's).  The result y is in [0.70, 1.42]. */
#define JG_EW_LN2F_HI 0x1.62e4p-1f    /* 15 significant bits */
#define JG_EW_LN2F_LO 0x1.7f7d1cp-20f /* ln2 - LN2F_HI, rounded */
JG_EW_INLINE float jg_ew_expf_y(float x, float *kfp) {
    const float kf = x * 0x1.715476p0f + 0x1.8p23f; /* 1/ln2 */
    const float k = kf - 0x1.8p23f;
    const float rh = x - k * JG_EW_LN2F_HI, rl = k * JG_EW_LN2F_LO;
    const float r = rh - rl, r2 = r * r;
    const float p01 = 0x1.fffff8p-2f + r * 0x1.555486p-3f;
    const float p23 = 0x1.555b94p-5f + r * 0x1.124188p-7f;
    const float p = p01 + r2 * (p23 + r2 * 0x1.686acap-10f);
    *kfp = kf;
    return 1.0f + (rh + (r2 * p - rl));
}

/* exp of an f32 for every input.  2^k is applied as 2^k1 2^k2 with k1 = k
 * >> 1: y 2^k1 is exact (a normal f32 for every k in [-151, 151], made by
 * adding k1 to y's exponent bits) and the product with 2^k2 rounds once, so
 * gradual underflow and overflow to inf come out right.  |x| is clamped to
 * 104 first (exp(104) overflows f32, exp(-104) rounds to 0); a NaN x gives
 * itself back, quieted.  >> of a negative int32 is arithmetic in gcc and
 * clang (the only compilers of this file and of generated code). */
JG_EW_INLINE float jg_ew_expf(float xf) {
    const int32_t u = jg_ew_f32bits(xf), au = u & INT32_MAX;
    /* |x| clamped to 104 by an unsigned min (one instruction), NaN included:
     * a NaN x is put back at the end */
    const uint32_t cu = (uint32_t)au < 0x42d00000u ? (uint32_t)au : 0x42d00000u;
    float kf;
    const float y = jg_ew_expf_y(jg_ew_f32((int32_t)cu | (u & INT32_MIN)), &kf);
    const int32_t ki = jg_ew_f32bits(kf) - 0x4b400000; /* k from kf's bits */
    const int32_t k1 = ki >> 1, k2 = ki - k1;
    const float y1 = jg_ew_f32((int32_t)((uint32_t)jg_ew_f32bits(y) + ((uint32_t)k1 << 23)));
    const float s2 = jg_ew_f32((int32_t)(((uint32_t)k2 + 127u) << 23));
    const int32_t nan = JG_EW_MASK32(au > 0x7f800000); /* x, quieted */
    return jg_ew_f32(((u | 0x00400000) & nan) | (jg_ew_f32bits(y1 * s2) & ~nan));
}

/* jg_ew_expf for |x| <= 86 only (JG_EW_EXPF_NORMAL_MAX: the f32 bits of
 * |x|), where it gives the same bits: there k is in [-124, 124], so y 2^k
 * is a normal f32 and exact, made by adding k to y's exponent bits (kf's
 * bits shifted left by 23 are k << 23), with no clamp, no NaN test and one
 * scale step.  The eager exp and sigmoid loops run it over blocks whose
 * every |x| is in range (ops/elementwise.c), jg_ew_expf over the others. */
#define JG_EW_EXPF_NORMAL_MAX 0x42ac0000u /* 86.0f */
JG_EW_INLINE float jg_ew_expf_normal(float x) {
    float kf;
    const float y = jg_ew_expf_y(x, &kf);
    /* unsigned: defined for any x (the loops compute it before their range
     * test) */
    return jg_ew_f32((int32_t)((uint32_t)jg_ew_f32bits(y) + ((uint32_t)jg_ew_f32bits(kf) << 23)));
}

/* tanh of an f32, in f32 arithmetic (8 lanes per AVX2 vector): at most
 * 1.043 ulp from the exact value (see docs/kernels.md;
 * tests/c/test_ew_math.c sweeps it against long-double tanh).  With a = |x|
 * clamped to 9.5 (tanh rounds to 1 in f32 from about 9.01; NaN is put
 * back at the end):
 * - a < 0.8: tanh a = a + a (z q(z)), z = a^2, q of degree 6 (a least
 *   squares fit of (tanh(a) / a - 1) / z in relative error of tanh on
 *   [0, 0.8], scripts/ew_math_coeffs.py), Horner's rule;
 * - a >= 0.8: tanh a = 1 - 2 / (e + 1), e = exp(2a) from jg_ew_expf_y
 *   (2a <= 19, so e = y 2^k is a normal f32, made exactly by adding k to
 *   y's exponent bits).
 * Both are computed and one is picked by a mask (a branch would stop
 * vectorization); the sign is copied back, so tanh(-0) = -0.  Computing
 * in double instead rounds correctly but takes 2.2x the time (1M f32,
 * AVX2, 4 lanes and a double division), and tanh is most of the time of
 * a chain of tanh layers. */
#define JG_EW_TANHF_SMALL 0x3f4ccccd /* 0.8f: the f32 bits of a's bound */
JG_EW_INLINE float jg_ew_tanhf(float xf) {
    const int32_t u = jg_ew_f32bits(xf), au = u & INT32_MAX;
    const uint32_t cu = (uint32_t)au < 0x41180000u ? (uint32_t)au : 0x41180000u; /* 9.5f */
    /* Each formula gets its argument clamped to its own range (unsigned
     * max on the bits), so that no operation sees or makes a subnormal,
     * which costs a microcode assist per instruction (a tanh chain whose
     * values shrink ran 2x slower): the polynomial a >= 2^-12, below which
     * the result is a itself (picked at the end; the polynomial's a z q(z)
     * is under half an ulp of a there, so it gives a too), and
     * 1 - 2 / (e + 1) a >= 0.8. */
    const float a = jg_ew_f32((int32_t)(cu > 0x39800000u ? cu : 0x39800000u));
    const float al =
        jg_ew_f32((int32_t)(cu > (uint32_t)JG_EW_TANHF_SMALL ? cu : (uint32_t)JG_EW_TANHF_SMALL));
    const float z = a * a;
    const float q =
        -0x1.555554p-2f +
        z * (0x1.111088p-3f +
             z * (-0x1.b9fd64p-5f +
                  z * (0x1.64b946p-6f +
                       z * (-0x1.16d6acp-7f + z * (0x1.75e7d0p-9f + z * -0x1.2bc5c8p-11f)))));
    const float ts = a + a * (z * q);
    float kf;
    const float y = jg_ew_expf_y(al + al, &kf);
    const float e =
        jg_ew_f32((int32_t)((uint32_t)jg_ew_f32bits(y) + ((uint32_t)jg_ew_f32bits(kf) << 23)));
    const float tl = 1.0f - 2.0f / (e + 1.0f);
    const int32_t small = JG_EW_MASK32(au < JG_EW_TANHF_SMALL);
    const int32_t tiny = JG_EW_MASK32(au < 0x39800000); /* 2^-12 */
    const int32_t t =
        (au & tiny) | (((jg_ew_f32bits(ts) & small) | (jg_ew_f32bits(tl) & ~small)) & ~tiny);
    const int32_t nan = JG_EW_MASK32(au > 0x7f800000); /* x, quieted */
    return jg_ew_f32(((u | 0x00400000) & nan) | ((t | (u & INT32_MIN)) & ~nan));
}

/* jg_ew_expf_normal(x), keeping the largest |x| (its f32 bits) in *big: the
 * generated loops' first pass over a block (backend/cgen.c, exp_guard),
 * redone with jg_ew_expf when *big ends over JG_EW_EXPF_NORMAL_MAX.  *big is
 * a local of the loop, a max reduction once this is inlined. */
JG_EW_INLINE float jg_ew_expf_track(uint32_t *big, float x) {
    const uint32_t au = (uint32_t)jg_ew_f32bits(x) & 0x7fffffffu;
    *big = au > *big ? au : *big;
    return jg_ew_expf_normal(x);
}

/* log's special values: +inf and NaN give x, x < 0 (-inf included) NaN,
 * +-0 -inf; r is the value for every other (positive finite) x. */
JG_EW_INLINE double jg_ew_log_special(double x, double r) {
    const uint64_t u = jg_ew_d2u(x);
    r = jg_ew_seld(JG_EW_MASK(u >= 0x7ff0000000000000u && u < 0x8000000000000000u), x, r);
    r = jg_ew_seld(JG_EW_MASK(u > 0x8000000000000000u), jg_ew_u2d(JG_EW_DNAN), r);
    return jg_ew_seld(JG_EW_MASK((u << 1) == 0), -1.0 / 0.0, r);
}

/* x = 2^k z with z in [sqrt(2)/2, sqrt(2)) for a positive normal x (integer
 * arithmetic on the bits); returns z - 1 (exact) and k as a double. */
JG_EW_INLINE double jg_ew_log_reduce(uint64_t u, double *k) {
    const uint64_t t = u + 0x00095f619980c433u; /* 1.0's bits - sqrt(2)/2's */
    *k = jg_ew_u2d((t >> 52) | 0x4330000000000000u) - (0x1p52 + 1023.0);
    return jg_ew_u2d(u - ((t & 0xfff0000000000000u) - 0x3ff0000000000000u)) - 1.0;
}

/* log of a double: log(2^k (1 + f)) = k ln2 + log(1 + f), log(1 + f) =
 * 2 atanh(s) = f - s (f - R) with s = f / (2 + f), |s| <= 0.1716 and R =
 * sum 2 s^2j / (2j + 1), j = 1..10 (truncation below 2^-60).  Subnormals
 * are scaled by 2^54 first. */
JG_EW_INLINE double jg_ew_logd(double x) {
    const uint64_t sub = JG_EW_MASK(jg_ew_d2u(x) < 0x0010000000000000u);
    double k;
    const double f = jg_ew_log_reduce(jg_ew_d2u(jg_ew_seld(sub, x * 0x1p54, x)), &k);
    k = k - jg_ew_seld(sub, 54.0, 0.0);
    const double s = f / (2.0 + f), z = s * s;
    const double R =
        z * (2.0 / 3 +
             z * (2.0 / 5 +
                  z * (2.0 / 7 +
                       z * (2.0 / 9 +
                            z * (2.0 / 11 +
                                 z * (2.0 / 13 +
                                      z * (2.0 / 15 +
                                           z * (2.0 / 17 + z * (2.0 / 19 + z * (2.0 / 21))))))))));
    /* k ln2_hi + f with its rounding error e (exact: |k ln2_hi| >= |f| or
     * k = 0), so that only the final addition rounds a large term */
    const double h = k * JG_EW_LN2_HI, t = h + f, e = (h - t) + f;
    const double r = t + (e - (s * (f - R) - k * JG_EW_LN2_LO));
    return jg_ew_log_special(x, r);
}

/* log for f32 arguments, in double (an f32 is a normal double): j = 1..6
 * (truncation below 2^-40). */
JG_EW_INLINE double jg_ew_log_f32core(double x) {
    double k;
    const double f = jg_ew_log_reduce(jg_ew_d2u(x), &k);
    const double s = f / (2.0 + f), z = s * s;
    const double R =
        z *
        (2.0 / 3 + z * (2.0 / 5 + z * (2.0 / 7 + z * (2.0 / 9 + z * (2.0 / 11 + z * (2.0 / 13))))));
    const double r = k * JG_EW_LN2_HI + ((f - s * (f - R)) + k * JG_EW_LN2_LO);
    return jg_ew_log_special(x, r);
}
JG_EW_INLINE float jg_ew_logf(float xf) {
    const int32_t u = jg_ew_f32bits(xf), au = u & INT32_MAX;
    double k;
    const double f = jg_ew_log_reduce(jg_ew_d2u((double)xf), &k);
    const double s = f / (2.0 + f), z = s * s;
    const double R =
        z *
        (2.0 / 3 + z * (2.0 / 5 + z * (2.0 / 7 + z * (2.0 / 9 + z * (2.0 / 11 + z * (2.0 / 13))))));
    const double h = k * JG_EW_LN2_HI, t = h + f, e = (h - t) + f;
    int32_t r = jg_ew_f32bits((float)(t + (e - (s * (f - R) - k * JG_EW_LN2_LO))));
    /* +inf, NaN: x + x; x < 0: NaN; +-0: -inf */
    int32_t m = JG_EW_MASK32(u >= 0x7f800000);
    r = (jg_ew_f32bits(xf + xf) & m) | (r & ~m);
    m = JG_EW_MASK32((u < 0) & (au != 0));
    r = ((int32_t)0xffc00000 & m) | (r & ~m);
    m = JG_EW_MASK32(au == 0);
    r = ((int32_t)0xff800000 & m) | (r & ~m);
    return jg_ew_f32(r);
}

/* x's sign bit on r */
JG_EW_INLINE double jg_ew_signd(double r, double x) {
    return jg_ew_u2d(jg_ew_d2u(r) | (jg_ew_d2u(x) & 0x8000000000000000u));
}

/* erf of a double.  |x| < 1: erf(x) = x + x P(x^2), P the Taylor series of
 * erf(x)/x - 1 to degree 19 (truncation below 2^-62).  1 <= |x| < 6:
 * erf(x) = 1 - exp(-x^2) erfcx(x), erfcx the degree 32 Chebyshev
 * interpolant on [1, 6] (below 2^-60 relative) in powers of u = 0.4 x - 1.4
 * (Horner; the terms alternate in sign, so at x = 1 they add up).
 * |x| >= 6: 1 (erfc(6) < 2^-54).  Odd: computed on |x|, sign copied back.
 * Coefficients: scripts/ew_math_coeffs.py. */
JG_EW_INLINE double jg_ew_erfd(double x) {
    const double a = jg_ew_absd(x), z = a * a;
    const double P =
        0.1283791670955126 +
        z * (-0.37612638903183754 +
             z * (0.11283791670955126 +
                  z * (-0.026866170645131252 +
                       z * (0.005223977625442188 +
                            z * (-0.0008548327023450853 +
                                 z * (0.00012055332981789664 +
                                      z * (-1.492565035840625e-05 +
                                           z * (1.6462114365889248e-06 +
                                                z * (-1.6365844691234924e-07 +
                                                     z * (1.4807192815879218e-08 +
                                                          z * (-1.2290555301717928e-09 +
                                                               z * (9.422759064650411e-11 +
                                                                    z * (-6.7113668551641105e-12 +
                                                                         z * (4.4632242632864775e-13 +
                                                                              z * (-2.7835162072109215e-14 +
                                                                                   z * (1.6342614095367152e-15 +
                                                                                        z * (-9.063970842808673e-17 +
                                                                                             z * (4.763348040515068e-18 +
                                                                                                  z * -2.3784598852774293e-19))))))))))))))))));
    const double e1 = a + a * P;
    double c = jg_ew_seld(JG_EW_MASK(a < 1.0), 1.0, a);
    c = jg_ew_seld(JG_EW_MASK(c > 6.0), 6.0, c);
    const double u = c * 0.4 - 1.4; /* [1, 6] -> [-1, 1] */
    const double
        g = 0.1552936556088943 +
            u * (-0.10330894458313122 +
                 u * (0.06663208245319109 +
                      u * (-0.04176678811943213 +
                           u * (0.02549555964370687 + u * (-0.015182511545603131 +
                                                           u * (0.008833423916369909 +
                                                                u * (-0.005028067969161398 +
                                                                     u * (0.0028033261869905178 +
                                                                          u * (-0.0015325157035151074 +
                                                                               u * (0.0008222552501464321 +
                                                                                    u * (-0.00043336177593107634 + u * (0.00022452998169178307 + u * (-0.00011444204945600709 + u * (5.7420529308733565e-05 + u * (-2.837805395520576e-05 + u * (1.382171637485785e-05 + u * (-6.637031036059054e-06 + u * (3.144504458493601e-06 +
                                                                                                                                                                                                                                                                                                            u * (-1.4724400682084666e-06 + u * (6.796318867882667e-07 + u * (-3.062179679746091e-07 +
                                                                                                                                                                                                                                                                                                                                                                             u * (1.3817260840039235e-07 +
                                                                                                                                                                                                                                                                                                                                                                                  u * (-6.627176775580798e-08 + u * (2.8973972113384538e-08 +
                                                                                                                                                                                                                                                                                                                                                                                                                     u * (-8.189811621964053e-09 + u * (3.678412606045173e-09 +
                                                                                                                                                                                                                                                                                                                                                                                                                                                        u * (-4.500263997900908e-09 +
                                                                                                                                                                                                                                                                                                                                                                                                                                                             u * (1.8274474769713163e-09 + u * (5.38316104712033e-10 +
                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                u * (-2.0218186673710816e-10 +
                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                     u * (-2.6484952497212817e-10 + u * (1.0489417289693005e-10))))))))))))))))))))))))))))))));
    /* c^2 = q + ql exactly (Veltkamp split, no fma): exp(-c^2) = exp(-q) (1 - ql) */
    const double cs = c * 134217729.0, ch = cs - (cs - c), cl = c - ch;
    const double q = c * c, ql = ((ch * ch - q) + 2.0 * ch * cl) + cl * cl;
    const double ex = jg_ew_expd(-q);
    const double e2 = 1.0 - (ex - ex * ql) * g;
    double r = jg_ew_seld(JG_EW_MASK(a < 1.0), e1, e2);
    r = jg_ew_seld(JG_EW_MASK(a >= 6.0), 1.0, r);
    return jg_ew_signd(r, x);
}

/* erf of an f32, in f32 arithmetic (8 lanes per AVX2 vector): at most
 * 1.31 ulp from the exact value (docs/kernels.md; tests/c/test_ew_math.c
 * sweeps it against long-double erf).  With a = |x|:
 * - a < 1: erf a = a + a P(z), z = a^2, P of degree 6 (a least squares
 *   fit of erf(a) / a - 1 in relative error of erf on [0, 1],
 *   scripts/ew_math_coeffs.py), Horner's rule;
 * - 1 <= a: erf a = 1 - exp(-a^2) g(v), g erfcx's degree 12 fit on [1, 4]
 *   in relative error (v = (2a - 5) / 3 in [-1, 1]; the terms alternate
 *   in sign, so at a = 1 they add up), a clamped to [1, 4] (from 3.92
 *   the result rounds to 1).  a^2 = ah^2 + d with ah a's 12 high bits
 *   (ah^2 exact) and d = (a - ah)(a + ah): exp(-a^2) is jg_ew_expf_y's
 *   reduction of -ah^2 with d folded into the low part of the reduced
 *   argument, so that the rounding of a^2 (up to 2^-20 for a near 4, 16
 *   ulps of exp) does not reach the result.  k is in [-24, -1], so the
 *   scale 2^k is added to y's exponent bits exactly.
 * Both are computed and one is picked by a mask; the sign is copied back;
 * a NaN x is given back, quieted.  Neither formula's argument is clamped
 * with ?: (gcc turned a clamp to a constant into a branch, as the clamped
 * lanes' whole formula folds to a constant, and stopped vectorizing):
 * the a < 1 formula takes a itself (inf or NaN for large a, masked out),
 * the other a clamp made of integer masks.  Computing in double instead
 * rounds correctly (0.5 ulp) but took about 4x the time (AVX2, 1M f32),
 * and erf is most of the exact GELU's time. */
JG_EW_INLINE float jg_ew_erff(float xf) {
    const int32_t u = jg_ew_f32bits(xf), au = u & INT32_MAX;
    const float a = jg_ew_f32(au), z = a * a;
    const float P =
        0x1.06eba8p-3f +
        z * (-0x1.81274p-2f +
             z * (0x1.ce2d4p-4f +
                  z * (-0x1.b7fd3cp-6f +
                       z * (0x1.5422a6p-8f + z * (-0x1.a4b50ep-11f + z * 0x1.4b4662p-14f)))));
    const float e1 = a + a * P;
    /* c = a clamped to [1, 4] (NaN to 4: its result is replaced below) */
    const int32_t lo = JG_EW_MASK32(au < 0x3f800000), hi = JG_EW_MASK32(au > 0x40800000);
    const int32_t cu = (0x3f800000 & lo) | (0x40800000 & hi) | (au & ~(lo | hi));
    const float c = jg_ew_f32(cu), ch = jg_ew_f32(cu & (int32_t)0xfffff000);
    const float d = (c - ch) * (c + ch);                   /* c - ch exact */
    const float kf = (c * c) * -0x1.715476p0f + 0x1.8p23f; /* -1/ln2 */
    const float k = kf - 0x1.8p23f;
    /* -ch^2 - k LN2F_HI is exact: both are multiples of 2^-20, the
     * difference below 0.36 */
    const float rh = -(ch * ch) - k * JG_EW_LN2F_HI, rl = k * JG_EW_LN2F_LO + d;
    const float r = rh - rl, r2 = r * r;
    const float p01 = 0x1.fffff8p-2f + r * 0x1.555486p-3f;
    const float p23 = 0x1.555b94p-5f + r * 0x1.124188p-7f;
    const float p = p01 + r2 * (p23 + r2 * 0x1.686acap-10f);
    const float y = 1.0f + (rh + (r2 * p - rl));
    const float ex =
        jg_ew_f32((int32_t)((uint32_t)jg_ew_f32bits(y) + ((uint32_t)jg_ew_f32bits(kf) << 23)));
    const float v = c * (2.0f / 3) - 5.0f / 3;
    const float g =
        0x1.afbb4p-3f +
        v * (-0x1.c8ca4p-4f +
             v * (0x1.cba848p-5f +
                  v * (-0x1.ba75fep-6f +
                       v * (0x1.993eccp-7f +
                            v * (-0x1.6ce1acp-8f +
                                 v * (0x1.3b19p-9f +
                                      v * (-0x1.0a7032p-10f +
                                           v * (0x1.ade7aep-12f +
                                                v * (-0x1.2f720ep-13f +
                                                     v * (0x1.ef198cp-15f +
                                                          v * (-0x1.337be6p-15f +
                                                               v * 0x1.a19b5p-17f)))))))))));
    const float e2 = 1.0f - ex * g;
    const int32_t small = JG_EW_MASK32(au < 0x3f800000);
    const int32_t r32 = (jg_ew_f32bits(e1) & small) | (jg_ew_f32bits(e2) & ~small);
    const int32_t nan = JG_EW_MASK32(au > 0x7f800000); /* x, quieted */
    return jg_ew_f32(((u | 0x00400000) & nan) | ((r32 | (u & INT32_MIN)) & ~nan));
}

/* pow for f32, in double: exp(y log|x|) (log and exp of the f32 cores:
 * |y log|x|| <= 104 where the result is finite and nonzero, so their
 * errors stay below 2^-32 relative), then C99's special cases: x**0 = 1
 * and 1**y = 1 (NaN included), (-1)**+-inf = 1, a negative x with an odd
 * integer y gives a negative result, with a finite non-integer y NaN;
 * +-0 and +-inf follow from log(0) = -inf and log(inf) = inf. */
JG_EW_INLINE float jg_ew_powf(float xf, float yf) {
    const double x = (double)xf, y = (double)yf, ax = jg_ew_absd(x), ay = jg_ew_absd(y);
    double r = jg_ew_exp_f32core(y * jg_ew_log_f32core(ax));
    /* |y| < 2^24: integer and odd from y + 1.5 2^52; above: even integers */
    const double yk = ay + JG_EW_MAGIC;
    const uint64_t small = JG_EW_MASK(ay < 0x1p24);
    const uint64_t yint = JG_EW_MASK(yk - JG_EW_MAGIC == ay) | ~small;
    const uint64_t odd = small & JG_EW_MASK(yk - JG_EW_MAGIC == ay) & (0 - (jg_ew_d2u(yk) & 1));
    r = jg_ew_u2d(jg_ew_d2u(r) ^ (odd & jg_ew_d2u(x) & 0x8000000000000000u));
    r = jg_ew_seld(JG_EW_MASK(x < 0.0 && x > -1.0 / 0.0) & ~yint, jg_ew_u2d(JG_EW_DNAN), r);
    r = jg_ew_seld(JG_EW_MASK(y == 0.0 || x == 1.0 || (ax == 1.0 && ay == 1.0 / 0.0)), 1.0, r);
    return (float)r;
}

/* The names the expressions use, for every dtype: f32 and f64 jitgrad's
 * own; integer arguments (instantiations dispatch never runs for exp, log,
 * erf; pow of integer tensors) convert to double.  pow of f64 and integer
 * tensors stays libm's pow (integer results exact below 2^53). */
#define jg_ew_exp(x) _Generic((x), float : jg_ew_expf, default : jg_ew_expd)(x)
#define jg_ew_log(x) _Generic((x), float : jg_ew_logf, default : jg_ew_logd)(x)
#define jg_ew_erf(x) _Generic((x), float : jg_ew_erff, default : jg_ew_erfd)(x)
#define jg_ew_pow(x, y) _Generic((x), float : jg_ew_powf, default : pow)(x, y)

/* b * b for tanh's gradient a * (1 - b^2) (tanh_grad, elementwise.def),
 * b the tanh output: |b| is raised to 2^-13 (f32) or 2^-28 (f64) when
 * below, so that the square is never subnormal -- each instruction making
 * one costs a microcode assist for all its lanes, and the values of a tanh
 * chain shrink geometrically where its weight is small: the backward of 16
 * (t * b).tanh() steps spent half its time there -- while 1 - b^2 keeps its
 * bits: below the bound b^2 is at most a quarter ulp of 1 either way, so
 * 1 - b^2 rounds to 1.  Larger |b|, inf and NaN (its sign and payload
 * included) are squared as they are.  Only where b has the result's type T
 * (t: a T value); otherwise b * b. */
JG_EW_INLINE float jg_ew_sq1f(float x) {
    const int32_t u = jg_ew_f32bits(x);
    const int32_t raise = JG_EW_MASK32(((uint32_t)u & 0x7fffffffu) < 0x39000000u); /* 2^-13 */
    const float a = jg_ew_f32((0x39000000 & raise) | (u & ~raise));
    return a * a;
}
JG_EW_INLINE double jg_ew_sq1d(double x) {
    const uint64_t u = jg_ew_d2u(x);
    const uint64_t raise = JG_EW_MASK((u & 0x7fffffffffffffffu) < 0x3e30000000000000u); /* 2^-28 */
    const double a = jg_ew_u2d((0x3e30000000000000u & raise) | (u & ~raise));
    return a * a;
}
#define jg_ew_sq1(x, t)                                                                            \
    _Generic((t), float                                                                            \
             : _Generic((x), float                                                                 \
                        : jg_ew_sq1f((float)(x)), default                                          \
                        : (x) * (x)),                                                              \
               double                                                                              \
             : _Generic((x), double                                                                \
                        : jg_ew_sq1d((double)(x)), default                                         \
                        : (x) * (x)),                                                              \
               default                                                                             \
             : (x) * (x))

/* tanh for the expression of every dtype: f32 above, libm's tanh otherwise
 * (f64; the i64 instantiation, which dispatch never runs, converts). */
#define jg_ew_tanh(x) _Generic((x), float : jg_ew_tanhf, default : tanh)(x)

/* floor, ceil, trunc and round (half to even, as PyTorch's nearbyint) for
 * the expression of every dtype: libm's float and double functions (named,
 * not called, so <tgmath.h> at the use site declares them), the identity
 * for integer and bool values (an int64 above 2^53 keeps every bit). */
JG_EW_INLINE int64_t jg_ew_ident(int64_t x) {
    return x;
}
#define jg_ew_floor(x) _Generic((x), float : floorf, double : floor, default : jg_ew_ident)(x)
#define jg_ew_ceil(x) _Generic((x), float : ceilf, double : ceil, default : jg_ew_ident)(x)
#define jg_ew_trunc(x) _Generic((x), float : truncf, double : trunc, default : jg_ew_ident)(x)
#define jg_ew_round(x)                                                                             \
    _Generic((x), float : nearbyintf, double : nearbyint, default : jg_ew_ident)(x)

/* remainder, fmod and floor division as PyTorch's CPU kernels compute them:
 * remainder is fmod's result moved into the divisor's sign, floor_divide is
 * c10's div_floor_floating.  Integers compute in int64; a zero divisor
 * gives 0 (eager refuses it first with PyTorch's ZeroDivisionError) and -1
 * is special-cased so INT64_MIN / -1 does not trap.  (gcc builtins: this
 * header is used without <math.h> too.) */
JG_EW_INLINE float jg_ew_fmodf(float a, float b) {
    return __builtin_fmodf(a, b);
}
JG_EW_INLINE double jg_ew_fmodd(double a, double b) {
    return __builtin_fmod(a, b);
}
JG_EW_INLINE float jg_ew_remf(float a, float b) {
    float m = __builtin_fmodf(a, b);
    return m != 0 && ((b < 0) != (m < 0)) ? m + b : m;
}
JG_EW_INLINE double jg_ew_remd(double a, double b) {
    double m = __builtin_fmod(a, b);
    return m != 0 && ((b < 0) != (m < 0)) ? m + b : m;
}
JG_EW_INLINE int64_t jg_ew_remi(int64_t a, int64_t b) {
    if (b == 0 || b == -1)
        return 0;
    int64_t r = a % b;
    return r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
}
JG_EW_INLINE int64_t jg_ew_fmodi(int64_t a, int64_t b) {
    return b == 0 || b == -1 ? 0 : a % b;
}
JG_EW_INLINE float jg_ew_floordivf(float a, float b) {
    if (b == 0)
        return a / b;
    float mod = __builtin_fmodf(a, b), div = (a - mod) / b;
    if (mod != 0 && (b < 0) != (mod < 0))
        div -= 1;
    if (div == 0)
        return __builtin_copysignf(0, a / b);
    float fd = __builtin_floorf(div);
    return div - fd > 0.5f ? fd + 1 : fd;
}
JG_EW_INLINE double jg_ew_floordivd(double a, double b) {
    if (b == 0)
        return a / b;
    double mod = __builtin_fmod(a, b), div = (a - mod) / b;
    if (mod != 0 && (b < 0) != (mod < 0))
        div -= 1;
    if (div == 0)
        return __builtin_copysign(0, a / b);
    double fd = __builtin_floor(div);
    return div - fd > 0.5 ? fd + 1 : fd;
}
JG_EW_INLINE int64_t jg_ew_floordivi(int64_t a, int64_t b) {
    if (b == 0)
        return 0;
    if (b == -1)
        return (int64_t)(0u - (uint64_t)a);
    int64_t q = a / b;
    return (a < 0) != (b < 0) && a % b ? q - 1 : q;
}
#define jg_ew_remainder(x, y)                                                                      \
    _Generic((x), float : jg_ew_remf, double : jg_ew_remd, default : jg_ew_remi)(x, y)
#define jg_ew_fmod(x, y)                                                                           \
    _Generic((x), float : jg_ew_fmodf, double : jg_ew_fmodd, default : jg_ew_fmodi)(x, y)
#define jg_ew_floor_divide(x, y)                                                                   \
    _Generic((x), float                                                                            \
             : jg_ew_floordivf, double                                                             \
             : jg_ew_floordivd, default                                                            \
             : jg_ew_floordivi)(x, y)

/* ---- special functions ----
 * digamma and trigamma as PyTorch 1.13's calc_digamma / calc_trigamma
 * (ATen/native/Math.h) compute them, in the element's type: reflection
 * below 0 (poles at 0 and the negative integers), recurrence up to 10 (6
 * for trigamma), then the asymptotic series.  (libm through the compiler's
 * builtins: this file is pasted into generated code and included where
 * <math.h> is not.) */
#define JG_EW_DIGAMMA_BODY(T, TRUNC, LOG, SUF)                                                     \
    static const T A[] = {8.33333333333333333333E-2##SUF, -2.10927960927960927961E-2##SUF,         \
                          7.57575757575757575758E-3##SUF, -4.16666666666666666667E-3##SUF,         \
                          3.96825396825396825397E-3##SUF, -8.33333333333333333333E-3##SUF,         \
                          8.33333333333333333333E-2##SUF};                                         \
    T result = 0;                                                                                  \
    while (x < 10) {                                                                               \
        result -= 1 / x;                                                                           \
        x += 1;                                                                                    \
    }                                                                                              \
    if (x == 10)                                                                                   \
        return result + 2.25175258906672110764##SUF;                                               \
    T y = 0;                                                                                       \
    if (x < 1.0e17##SUF) {                                                                         \
        T z = 1 / (x * x), p = A[0];                                                               \
        for (int i = 1; i <= 6; i++)                                                               \
            p = p * z + A[i];                                                                      \
        y = z * p;                                                                                 \
    }                                                                                              \
    return result + LOG(x) - (0.5##SUF / x) - y;

static inline double jg_ew_digamma_posd(double x) {
    JG_EW_DIGAMMA_BODY(double, __builtin_trunc, __builtin_log, )
}
static inline float jg_ew_digamma_posf(float x) {
    JG_EW_DIGAMMA_BODY(float, __builtin_truncf, __builtin_logf, f)
}
static inline double jg_ew_digammad(double x) {
    const double pi = 3.14159265358979323846;
    if (x == 0)
        return __builtin_copysign(__builtin_inf(), -x);
    if (x < 0) {
        if (x == __builtin_trunc(x))
            return __builtin_nan("");
        double r = x - __builtin_trunc(x);
        return jg_ew_digamma_posd(1 - x) - pi / __builtin_tan(pi * r);
    }
    return jg_ew_digamma_posd(x);
}
static inline float jg_ew_digammaf(float x) {
    const double pi = 3.14159265358979323846;
    if (x == 0)
        return __builtin_copysignf(__builtin_inff(), -x);
    if (x < 0) {
        if (x == __builtin_truncf(x))
            return __builtin_nanf("");
        double r = (double)x - __builtin_trunc((double)x);
        float pi_over_tan = (float)(pi / __builtin_tan(pi * r));
        return jg_ew_digamma_posf(1 - x) - pi_over_tan;
    }
    return jg_ew_digamma_posf(x);
}

#define JG_EW_TRIGAMMA_BODY(T, SIN, PI)                                                            \
    T sign = +1, result = 0;                                                                       \
    if (x < (T)0.5) {                                                                              \
        sign = -1;                                                                                 \
        const T s = SIN(PI * x);                                                                   \
        result -= (PI * PI) / (s * s);                                                             \
        x = 1 - x;                                                                                 \
    }                                                                                              \
    for (int i = 0; i < 6; ++i) {                                                                  \
        result += 1 / (x * x);                                                                     \
        x += 1;                                                                                    \
    }                                                                                              \
    const T ixx = 1 / (x * x);                                                                     \
    result += (1 + 1 / (2 * x) + ixx * ((T)1 / 6 - ixx * ((T)1 / 30 - ixx * ((T)1 / 42)))) / x;    \
    return sign * result;

static inline double jg_ew_trigammad(double x) {
    JG_EW_TRIGAMMA_BODY(double, __builtin_sin, 3.14159265358979323846)
}
static inline float jg_ew_trigammaf(float x) {
    JG_EW_TRIGAMMA_BODY(float, __builtin_sinf, 3.14159265358979323846f)
}
#define jg_ew_digamma(x) _Generic((x), float : jg_ew_digammaf, default : jg_ew_digammad)(x)
#define jg_ew_trigamma(x) _Generic((x), float : jg_ew_trigammaf, default : jg_ew_trigammad)(x)

#endif
