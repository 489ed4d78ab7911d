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

/* tanh of an f32, correctly rounded for every f32 input (checked over all
 * 2^32 of them against long-double tanh, see docs/performance.md).
 *
 * Why not libm's tanhf: it is a scalar call of about 60 cycles and was a
 * third of the time of a chain of small eager ops.  This one is branch-free
 * straight-line double arithmetic, so the kernel loops vectorize, and the
 * double intermediate makes the rounding exact.
 *
 * tanh|x| = e / (e + 2) with e = expm1(2|x|); expm1(z) = 2^k (expm1(r) + 1)
 * - 1 with z = k ln2 + r, |r| <= ln2/2, and expm1(r) a degree-13 Taylor
 * polynomial in Estrin form (truncation error below 2^-58 relative).  |x|
 * is clamped to 9.5 first, where tanh already rounds to 1 in f32; NaN is
 * not clamped and stays NaN.  The sign is copied back at the end, so
 * tanh(-0) = -0.  Selects are done on integer bits with masks: a ?:
 * on doubles would make gcc branch, and branches stop vectorization. */
static inline float jg_ew_tanhf(float xf) {
    int32_t xu, yu;
    memcpy(&xu, &xf, 4);
    const int32_t au = xu & INT32_MAX;
    const int32_t clamp = -(int32_t)((au > 0x41180000) & (au <= 0x7f800000)); /* 9.5 < |x| <= inf */
    const int32_t cu = (0x41180000 & clamp) | (au & ~clamp);
    float cf;
    memcpy(&cf, &cu, 4);
    const double z = 2.0 * (double)cf;
    const double kd = z * 1.4426950408889634 + 0x1.8p52; /* k = round(z / ln2) in the low bits */
    uint64_t ku;
    memcpy(&ku, &kd, 8);
    const double k = kd - 0x1.8p52;
    const double r = (z - k * 6.93147180369123816490e-01) - k * 1.90821492927058770002e-10;
    const double r2 = r * r, r4 = r2 * r2;
    const double a0 = 1.0 / 2 + r * (1.0 / 6), a1 = 1.0 / 24 + r * (1.0 / 120);
    const double a2 = 1.0 / 720 + r * (1.0 / 5040), a3 = 1.0 / 40320 + r * (1.0 / 362880);
    const double a4 = 1.0 / 3628800 + r * (1.0 / 39916800);
    const double a5 = 1.0 / 479001600 + r * (1.0 / 6227020800.0);
    const double b0 = a0 + r2 * a1, b1 = a2 + r2 * a3, b2 = a4 + r2 * a5;
    const double p = r + r2 * ((b0 + r4 * b1) + (r4 * r4) * b2); /* expm1(r) */
    const uint64_t su = (ku << 52) + ((uint64_t)1023 << 52);     /* 2^k, 0 <= k <= 28 */
    double s;
    memcpy(&s, &su, 8);
    const double e = (s - 1.0) + s * p;
    const float t = (float)(e / (e + 2.0));
    memcpy(&yu, &t, 4);
    yu |= xu & INT32_MIN;
    float y;
    memcpy(&y, &yu, 4);
    return y;
}

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

/* tanh for the expression of every dtype: f32 above, libm's tanh otherwise
 * (f64; the i64 instantiation, which dispatch never runs, converts). */
#define jg_ew_tanh(x) _Generic((x), float : jg_ew_tanhf, default : tanh)(x)

#endif
