/* softmax and log_softmax over attrs.i[0] (numerically stable: the slice's
 * maximum is subtracted before exp), and nll_loss: -logp[i, target[i]] per
 * row, reduced as PyTorch's reduction= says, rows whose target is the
 * ignore_index left out (no class weights).
 *
 * Per slice: m = max; e_i = exp(x_i - m) summed in the dtype in the
 * blocked lane order of ops/sum_order.h (the same for any layout and
 * thread count); softmax_i = e_i * (1 / sum) (as PyTorch's vectorised
 * kernel: one division per slice, not per element), log_softmax_i = (x_i -
 * m) - log(sum).  Slices run on the pool when the input is large.
 *
 * nll_loss attrs: n == 0 (none given): mean over all rows, no ignored
 * target; n == 4: i[0] nonzero if i[1] is an ignore_index, i[2] the
 * jg_reduction, i[3] the number of classes (read by nll_loss_backward, whose
 * attrs are always these four).  Every other target must lie in [0, C).  A
 * mean over no rows is 0 / 0 = NaN, as in PyTorch. */
#include "core/parallel.h"
#include "ops/decls.h"
#include "ops/ew_math.h"
#include "ops/sum_order.h"

#include <math.h>
#include <string.h>

/* The passes vectorize with the dynamic cost model (gcc's -O2 one never
 * vectorizes an unknown trip count), and get AVX2 and AVX-512 F clones
 * picked at run time, as the elementwise kernels (ops/elementwise.c): exp
 * in f32 runs 8 / 16 lanes per vector there.  No FMA is enabled, so all
 * clones compute the same bits.  Loops stay loops (no memset / memcpy
 * calls): a causal attention's rows are short, a call per row cost more
 * than the stores. */
#define SOFTMAX_VECTORIZE                                                                          \
    __attribute__((                                                                                \
        optimize("tree-vectorize", "vect-cost-model=dynamic", "no-tree-loop-distribute-patterns"), \
        target_clones("avx512f", "avx2", "default")))

/* The largest element of x[0, n), n >= 1, for the slices' shift: 4 vectors of
 * 32 bytes (8 f32 lanes on AVX2) of a > b ? a : b lanes as integer masks,
 * which gcc lowers to the target's vectors, then the lanes and the tail in
 * order.  A NaN may or may not be picked: either way every output of a
 * slice holding a NaN is NaN, as in PyTorch.  Which zero is picked when the
 * maximum is 0 depends only on the values (not on threads or layout). */
#define MAX_RUN(TY, T, I)                                                                          \
    typedef T v_##TY __attribute__((vector_size(32)));                                             \
    typedef T vu_##TY __attribute__((vector_size(32), aligned(sizeof(T)), may_alias));             \
    typedef I vi_##TY __attribute__((vector_size(32)));                                            \
    static inline __attribute__((always_inline)) T max_run_##TY(const T *x, int64_t n) {           \
        enum { W = (int)(32 / sizeof(T)) };                                                        \
        v_##TY m0 = (v_##TY){0} + x[0], m1 = m0, m2 = m0, m3 = m0;                                 \
        int64_t i = 0;                                                                             \
        for (; i + 4 * W <= n; i += 4 * W) {                                                       \
            const vu_##TY *p = (const vu_##TY *)(x + i);                                           \
            VMAX(vi_##TY, m0, p[0]);                                                               \
            VMAX(vi_##TY, m1, p[1]);                                                               \
            VMAX(vi_##TY, m2, p[2]);                                                               \
            VMAX(vi_##TY, m3, p[3]);                                                               \
        }                                                                                          \
        VMAX(vi_##TY, m0, m1);                                                                     \
        VMAX(vi_##TY, m2, m3);                                                                     \
        VMAX(vi_##TY, m0, m2);                                                                     \
        T l[W], m = x[0];                                                                          \
        memcpy(l, &m0, sizeof l);                                                                  \
        for (int j = 0; j < W; j++)                                                                \
            m = l[j] > m ? l[j] : m;                                                               \
        for (; i < n; i++)                                                                         \
            m = x[i] > m ? x[i] : m;                                                               \
        return m;                                                                                  \
    }
/* m = v > m ? v : m per lane (VI: the integer vector of the lanes' size) */
#define VMAX(VI, m, v)                                                                             \
    do {                                                                                           \
        VI g_ = (v) > (m);                                                                         \
        m = (__typeof__(m))(((VI)(v)&g_) | ((VI)(m) & ~g_));                                       \
    } while (0)
MAX_RUN(f32, float, int32_t)
MAX_RUN(f64, double, int64_t)

/* y = exp(x - m) over n elements, f32: as the exp op's loops
 * (ops/elementwise.c), blocks whose every |x - m| is at most
 * JG_EW_EXPF_NORMAL_MAX run jg_ew_expf_normal (jg_ew_expf's bits there,
 * with a third fewer instructions) and a block holding a larger one, a
 * positive inf or a NaN is redone with jg_ew_expf.  Masked logits (-inf, or
 * any x - m <= -104, whose exp jg_ew_expf rounds to 0) would send nearly
 * every block of a causal attention's rows down that slow pass: a second
 * fast pass zeroes them by a mask instead, and only what is left out of
 * range (NaN, +inf, x - m in (-104, -86)) takes the slow one.  The mask
 * costs a fifth of the plain pass, so rows without masked logits keep to
 * the plain pass: *masked (the caller's, kept over the slices it runs)
 * says whether the last block needed the mask, and a block starts with the
 * pass its predecessor needed.  Every path gives jg_ew_expf's bits. */
enum { EXP_NBLK = 512 };
#define EXP_ZERO_MIN 0x42d00000u /* 104.0f: exp(-104) and below round to 0 */

/* The plain fast pass over [i0, i1): the largest |x - m| (f32 bits). */
static inline __attribute__((always_inline)) uint32_t
exp_plain_f32(float *restrict y, const float *restrict x, int64_t i0, int64_t i1, float m) {
    uint32_t big = 0;
    for (int64_t i = i0; i < i1; i++) {
        const float d = x[i] - m;
        const uint32_t du = (uint32_t)jg_ew_f32bits(d) & 0x7fffffffu;
        big = du > big ? du : big;
        y[i] = jg_ew_expf_normal(d);
    }
    return big;
}

/* The masked fast pass over [i0, i1): 0 where x - m is in [-inf, -104];
 * the largest |x - m| of the other elements, and in *any whether some
 * element was masked. */
static inline __attribute__((always_inline)) uint32_t exp_masked_f32(float *restrict y,
                                                                     const float *restrict x,
                                                                     int64_t i0, int64_t i1,
                                                                     float m, bool *any) {
    uint32_t big = 0, zs = 0;
    for (int64_t i = i0; i < i1; i++) {
        const float d = x[i] - m;
        const int32_t db = jg_ew_f32bits(d);
        const uint32_t du = (uint32_t)db & 0x7fffffffu;
        /* all ones where d is in [-inf, -104] */
        const uint32_t z =
            (uint32_t)JG_EW_MASK32((db < 0) & (du >= EXP_ZERO_MIN) & (du <= 0x7f800000u));
        const uint32_t dk = du & ~z;
        big = dk > big ? dk : big;
        zs |= z;
        y[i] = jg_ew_f32((int32_t)((uint32_t)jg_ew_f32bits(jg_ew_expf_normal(d)) & ~z));
    }
    *any = zs != 0;
    return big;
}

static inline __attribute__((always_inline)) void
exp_shift_f32(float *restrict y, const float *restrict x, int64_t n, float m, bool *masked) {
    for (int64_t i0 = 0; i0 < n; i0 += EXP_NBLK) {
        const int64_t i1 = n - i0 < EXP_NBLK ? n : i0 + EXP_NBLK;
        uint32_t big = 0;
        if (!*masked) {
            big = exp_plain_f32(y, x, i0, i1, m);
            if (big <= JG_EW_EXPF_NORMAL_MAX)
                continue;
        }
        bool any;
        big = exp_masked_f32(y, x, i0, i1, m, &any);
        *masked = any;
        if (big > JG_EW_EXPF_NORMAL_MAX)
            for (int64_t i = i0; i < i1; i++)
                y[i] = jg_ew_expf(x[i] - m);
    }
}
static inline __attribute__((always_inline)) void
exp_shift_f64(double *restrict y, const double *restrict x, int64_t n, double m, bool *masked) {
    (void)masked;
    for (int64_t i = 0; i < n; i++)
        y[i] = jg_ew_expd(x[i] - m);
}

/* jg_sum_run_f32(y, n) for n <= JG_SUM_BLOCK (ops/sum_order.h: element i
 * into lane i % 32 from +0, lanes folded by halving), inlined into the
 * softmax loop: a short row's sum was a fifth of its time as a call. */
typedef float sm_v16f __attribute__((vector_size(64)));
typedef float sm_v16f_u __attribute__((vector_size(64), aligned(4), may_alias));
typedef float sm_v8f __attribute__((vector_size(32)));
typedef float sm_v4f __attribute__((vector_size(16)));
typedef float sm_v2f __attribute__((vector_size(8)));
static inline __attribute__((always_inline)) float block_sum_f32(const float *y, int64_t n) {
    /* lanes 0-15 in lo, 16-31 in hi; a partial last run is padded with +0,
     * which changes no lane (a lane is never -0) */
    sm_v16f lo = {0}, hi = {0};
    int64_t i = 0;
    for (; i + JG_SUM_LANES_F32 <= n; i += JG_SUM_LANES_F32) {
        lo += *(const sm_v16f_u *)(y + i);
        hi += *(const sm_v16f_u *)(y + i + 16);
    }
    if (i < n) {
        /* (an element loop: memcpy of a variable size is a library call) */
        float t[JG_SUM_LANES_F32] = {0};
        for (int64_t k = 0; k < n - i; k++)
            t[k] = y[i + k];
        lo += *(const sm_v16f_u *)t;
        hi += *(const sm_v16f_u *)(t + 16);
    }
    lo += hi; /* lane j += lane j + 16, then + 8, + 4, + 2, + 1 */
    sm_v8f h8 = __builtin_shufflevector(lo, lo, 0, 1, 2, 3, 4, 5, 6, 7) +
                __builtin_shufflevector(lo, lo, 8, 9, 10, 11, 12, 13, 14, 15);
    /* (in registers: folding through an array stored the lanes and read
     * them back narrower, a quarter of a short row's time) */
    sm_v4f h4 =
        __builtin_shufflevector(h8, h8, 0, 1, 2, 3) + __builtin_shufflevector(h8, h8, 4, 5, 6, 7);
    sm_v2f h2 = __builtin_shufflevector(h4, h4, 0, 1) + __builtin_shufflevector(h4, h4, 2, 3);
    return h2[0] + h2[1];
}
static inline __attribute__((always_inline)) float row_sum_f32(const float *y, int64_t n) {
    return n <= JG_SUM_BLOCK ? block_sum_f32(y, n) : jg_sum_run_f32(y, n);
}
static inline __attribute__((always_inline)) double row_sum_f64(const double *y, int64_t n) {
    return jg_sum_run_f64(y, n);
}

/* The length of x[0, n) without the whole runs of MASKED_RUN -inf elements
 * at its end (one vector compare each; the exp pass's vectors stay whole). */
enum { MASKED_RUN = 16 };
#define MASKED_TAIL(TY, T)                                                                         \
    static inline __attribute__((always_inline)) int64_t masked_tail_##TY(const T *x, int64_t n) { \
        while (n >= MASKED_RUN) {                                                                  \
            int all = 1;                                                                           \
            for (int k = 0; k < MASKED_RUN; k++)                                                   \
                all &= x[n - MASKED_RUN + k] == -(T)INFINITY;                                      \
            if (!all)                                                                              \
                break;                                                                             \
            n -= MASKED_RUN;                                                                       \
        }                                                                                          \
        return n;                                                                                  \
    }
MASKED_TAIL(f32, float)
MASKED_TAIL(f64, double)

/* One slice of len elements at x (step xst) into y (step yst), steps in
 * elements.  Separate simple passes, so that each vectorizes (exp and log
 * are jitgrad's own from ops/ew_math.h, the same the exp and log ops
 * compute): m = max; y = exp(x - m); s = sum(y) in the blocked lane
 * order of ops/sum_order.h, whatever the steps; then y = y * (1 / s), or
 * y = (x - m) - log(s). */
#define SOFTMAX_SLICE(TY, T, EXP, LOG)                                                             \
    static SOFTMAX_VECTORIZE void softmax_slice_##TY(const T *x, int64_t xst, T *y, int64_t yst,   \
                                                     int64_t len, bool log_, bool *masked) {       \
        T m;                                                                                       \
        if (xst == 1) {                                                                            \
            m = max_run_##TY(x, len);                                                              \
        } else {                                                                                   \
            m = x[0];                                                                              \
            for (int64_t i = 1; i < len; i++)                                                      \
                m = x[i * xst] > m ? x[i * xst] : m;                                               \
        }                                                                                          \
        if (xst == 1 && yst == 1) {                                                                \
            T *restrict yc = y;                                                                    \
            const T *restrict xc = x;                                                              \
            /* a row ending in -inf (a causal attention's): exp(-inf - m)                          \
             * is +0 there for a finite m, written without the exp */                              \
            int64_t n = len;                                                                       \
            if (m > -(T)INFINITY && m < (T)INFINITY)                                               \
                n = masked_tail_##TY(xc, len);                                                     \
            exp_shift_##TY(yc, xc, n, m, masked);                                                  \
            for (int64_t i = n; i < len; i++)                                                      \
                yc[i] = 0;                                                                         \
            T s = row_sum_##TY(yc, n); /* (the +0s after n change no lane) */                      \
            if (log_) {                                                                            \
                T ls = LOG(s);                                                                     \
                for (int64_t i = 0; i < len; i++)                                                  \
                    yc[i] = (xc[i] - m) - ls;                                                      \
            } else {                                                                               \
                T r = 1 / s;                                                                       \
                for (int64_t i = 0; i < len; i++)                                                  \
                    yc[i] = yc[i] * r;                                                             \
            }                                                                                      \
            return;                                                                                \
        }                                                                                          \
        for (int64_t i = 0; i < len; i++)                                                          \
            y[i * yst] = EXP(x[i * xst] - m);                                                      \
        T s = jg_sum_strided_##TY(y, len, yst);                                                    \
        if (log_) {                                                                                \
            T ls = LOG(s);                                                                         \
            for (int64_t i = 0; i < len; i++)                                                      \
                y[i * yst] = (x[i * xst] - m) - ls;                                                \
        } else {                                                                                   \
            T r = 1 / s;                                                                           \
            for (int64_t i = 0; i < len; i++)                                                      \
                y[i * yst] = y[i * yst] * r;                                                       \
        }                                                                                          \
    }
SOFTMAX_SLICE(f32, float, jg_ew_expf, jg_ew_logf)
SOFTMAX_SLICE(f64, double, jg_ew_expd, jg_ew_logd)

/* Slices along a dim that is not the last, of a dense input into a dense
 * output: the input seen as [A, len, C], a unit is (a, a tile of up to
 * COLS columns) and every pass runs along rows of the tile, vectorized
 * across its columns.  The sum keeps each slice's lane order: one set of
 * lane accumulators per column. */
enum { COLS = 64 };
#define SOFTMAX_COLS(TY, T, EXP, LOG, L)                                                           \
    static SOFTMAX_VECTORIZE void softmax_cols_##TY(                                               \
        const T *restrict x, T *restrict y, int64_t len, int64_t C, int64_t w, bool log_) {        \
        T m[COLS], s[COLS], acc[L][COLS];                                                          \
        for (int64_t j = 0; j < w; j++)                                                            \
            m[j] = x[j];                                                                           \
        for (int64_t i = 1; i < len; i++)                                                          \
            for (int64_t j = 0; j < w; j++)                                                        \
                m[j] = x[i * C + j] > m[j] ? x[i * C + j] : m[j];                                  \
        for (int64_t i = 0; i < len; i++)                                                          \
            for (int64_t j = 0; j < w; j++)                                                        \
                y[i * C + j] = x[i * C + j] - m[j];                                                \
        for (int64_t i = 0; i < len; i++)                                                          \
            for (int64_t j = 0; j < w; j++)                                                        \
                y[i * C + j] = EXP(y[i * C + j]);                                                  \
        for (int64_t b0 = 0; b0 == 0 || b0 < len; b0 += JG_SUM_BLOCK) {                            \
            int64_t mb = len - b0 < JG_SUM_BLOCK ? len - b0 : JG_SUM_BLOCK;                        \
            for (int k = 0; k < L; k++)                                                            \
                for (int64_t j = 0; j < w; j++)                                                    \
                    acc[k][j] = 0;                                                                 \
            for (int64_t i = 0; i < mb; i++) {                                                     \
                T *a = acc[i % L];                                                                 \
                const T *r = y + (b0 + i) * C;                                                     \
                for (int64_t j = 0; j < w; j++)                                                    \
                    a[j] += r[j];                                                                  \
            }                                                                                      \
            for (int h = L / 2; h >= 1; h /= 2)                                                    \
                if (h < mb)                                                                        \
                    for (int k = 0; k < h; k++)                                                    \
                        for (int64_t j = 0; j < w; j++)                                            \
                            acc[k][j] += acc[k + h][j];                                            \
            for (int64_t j = 0; j < w; j++)                                                        \
                s[j] = b0 == 0 ? acc[0][j] : s[j] + acc[0][j];                                     \
        }                                                                                          \
        if (log_) {                                                                                \
            for (int64_t j = 0; j < w; j++)                                                        \
                s[j] = LOG(s[j]);                                                                  \
            for (int64_t i = 0; i < len; i++)                                                      \
                for (int64_t j = 0; j < w; j++)                                                    \
                    y[i * C + j] = (x[i * C + j] - m[j]) - s[j];                                   \
        } else {                                                                                   \
            for (int64_t j = 0; j < w; j++)                                                        \
                s[j] = 1 / s[j];                                                                   \
            for (int64_t i = 0; i < len; i++)                                                      \
                for (int64_t j = 0; j < w; j++)                                                    \
                    y[i * C + j] = y[i * C + j] * s[j];                                            \
        }                                                                                          \
    }
SOFTMAX_COLS(f32, float, jg_ew_expf, jg_ew_logf, JG_SUM_LANES_F32)
SOFTMAX_COLS(f64, double, jg_ew_expd, jg_ew_logd, JG_SUM_LANES_F64)

typedef struct {
    const char *x;
    char *y;
    int64_t len, C, tiles;
    jg_dtype dt;
    bool log_;
} cols_ctx;

static void softmax_col_units(void *vc, int64_t lo, int64_t hi) {
    const cols_ctx *c = vc;
    for (int64_t u = lo; u < hi; u++) {
        int64_t a = u / c->tiles, j0 = (u % c->tiles) * COLS;
        int64_t w = c->C - j0 < COLS ? c->C - j0 : COLS, off = a * c->len * c->C + j0;
        if (c->dt == JG_F32)
            softmax_cols_f32((const float *)c->x + off, (float *)c->y + off, c->len, c->C, w,
                             c->log_);
        else
            softmax_cols_f64((const double *)c->x + off, (double *)c->y + off, c->len, c->C, w,
                             c->log_);
    }
}

typedef struct {
    const jg_tensor *x;
    jg_tensor *y;
    int dim;
    int64_t len;
    bool log_;
} softmax_ctx;

/* Element offsets of slice o (row-major over the dims other than dim). */
static void slice_offsets(const softmax_ctx *c, int64_t o, int64_t *xo, int64_t *yo) {
    *xo = *yo = 0;
    for (int d = c->x->ndim - 1; d >= 0; d--) {
        if (d == c->dim)
            continue;
        int64_t i = o % c->x->shape[d];
        o /= c->x->shape[d];
        *xo += i * c->x->stride[d];
        *yo += i * c->y->stride[d];
    }
}

static void softmax_slices(void *vc, int64_t lo, int64_t hi) {
    const softmax_ctx *c = vc;
    const jg_tensor *x = c->x;
    jg_tensor *y = c->y;
    int64_t xst = x->ndim ? x->stride[c->dim] : 0, yst = y->ndim ? y->stride[c->dim] : 0;
    if (c->len == 1)
        xst = yst = 1;   /* any step reads the one element */
    bool masked = false; /* the exp pass's hint (exp_shift_f32) */
    /* rows of dense tensors (attention's scores): slice o starts at o * len,
     * without slice_offsets' divisions (most of a short row's time) */
    bool rows = c->dim == x->ndim - 1 && jg_is_contiguous(x) && jg_is_contiguous(y);
    for (int64_t o = lo; o < hi; o++) {
        int64_t xo, yo;
        if (rows)
            xo = yo = o * c->len;
        else
            slice_offsets(c, o, &xo, &yo);
        if (x->dtype == JG_F32)
            softmax_slice_f32((const float *)jg_tensor_ptr(x) + xo, xst,
                              (float *)jg_tensor_ptr(y) + yo, yst, c->len, c->log_, &masked);
        else
            softmax_slice_f64((const double *)jg_tensor_ptr(x) + xo, xst,
                              (double *)jg_tensor_ptr(y) + yo, yst, c->len, c->log_, &masked);
    }
}

static int softmax_run(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out, bool log_) {
    const jg_tensor *x = in[0];
    jg_tensor *y = out[0];
    JG_ASSERT(x->dtype == JG_F32 || x->dtype == JG_F64);
    int dim = (int)a->i[0];
    int64_t len = x->ndim ? x->shape[dim] : 1;
    if (x->numel == 0)
        return 0;
    int64_t outer = x->numel / len;
    if (dim < x->ndim - 1 && len > 1 && jg_dense(x) && jg_dense(y)) {
        cols_ctx c = {jg_tensor_ptr(x), jg_tensor_ptr(y), len, outer, 0, x->dtype, log_};
        for (int d = 0; d < dim; d++)
            c.C /= x->shape[d];
        c.tiles = (c.C + COLS - 1) / COLS;
        int64_t units = (outer / c.C) * c.tiles, per = len * (c.C < COLS ? c.C : COLS);
        if (x->numel < JG_PAR_MIN)
            softmax_col_units(&c, 0, units);
        else
            jg_parallel_for(units, per >= JG_PAR_MIN ? 1 : JG_PAR_MIN / per, softmax_col_units, &c);
        return 0;
    }
    softmax_ctx c = {x, y, dim, len, log_};
    if (x->numel < JG_PAR_MIN)
        softmax_slices(&c, 0, outer);
    else
        jg_parallel_for(outer, len >= JG_PAR_MIN ? 1 : JG_PAR_MIN / len, softmax_slices, &c);
    return 0;
}

static int check_softmax_attrs(const char *fn, const jg_attrs *a, int ndim) {
    int nd = ndim ? ndim : 1;
    if (a->n != 1 || a->i[0] < 0 || a->i[0] >= nd)
        return jg_errorf("%s(): bad dim attribute for a %d-d input", fn, ndim);
    return 0;
}

int jg_k_softmax(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    if (check_softmax_attrs("softmax", a, in[0]->ndim) < 0)
        return -1;
    return softmax_run(a, in, out, false);
}

int jg_k_log_softmax(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    if (check_softmax_attrs("log_softmax", a, in[0]->ndim) < 0)
        return -1;
    return softmax_run(a, in, out, true);
}

/* _softmax_backward_data: (grad - sum(grad * out, dim, keepdim)) * out. */
int jg_vjp_softmax(VJP_ARGS) {
    (void)meta, (void)in, (void)needs;
    int dim = (int)a->i[0];
    jg_tensor *g = gout[0], *y = out[0];
    jg_tensor *s = jg_sum_dims(jg_mul(g, y), 1, &dim, true);
    gin[0] = s ? jg_mul(jg_sub(g, s), y) : NULL;
    return gin[0] ? 0 : -1;
}

/* _log_softmax_backward_data: grad - exp(out) * sum(grad, dim, keepdim). */
int jg_vjp_log_softmax(VJP_ARGS) {
    (void)meta, (void)in, (void)needs;
    int dim = (int)a->i[0];
    jg_tensor *g = gout[0], *y = out[0];
    jg_tensor *s = jg_sum_dims(g, 1, &dim, true);
    gin[0] = s ? jg_sub(g, jg_mul(jg_exp(y), s)) : NULL;
    return gin[0] ? 0 : -1;
}

/* ---- nll_loss ---- */

typedef struct {
    bool has_ignore;
    int64_t ignore;
    int reduction; /* jg_reduction */
} nll_opts;

static nll_opts nll_options(const jg_attrs *a) {
    if (!a || a->n == 0)
        return (nll_opts){false, 0, JG_REDUCTION_MEAN};
    return (nll_opts){a->i[0] != 0, a->i[1], (int)a->i[2]};
}

static bool nll_ignored(const nll_opts *o, int64_t c) {
    return o->has_ignore && c == o->ignore;
}

int jg_infer_nll_loss(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    const jg_meta *x = &in[0], *t = &in[1];
    if (!jg_dtype_is_float(x->dtype))
        return jg_errorf("\"nll_loss_out_frame\" not implemented for '%s'",
                         jg_dtype_torch_name(x->dtype));
    if (x->ndim != 2)
        return jg_errorf("nll_loss(): expected a 2-D input [N, C], got %d-D", x->ndim);
    if (t->dtype != JG_I64)
        return jg_errorf("expected scalar type Long but found %s", jg_dtype_torch_name(t->dtype));
    if (t->ndim != 1)
        return jg_errorf("1D target tensor expected, multi-target not supported");
    if (t->shape[0] != x->shape[0])
        return jg_errorf("Expected input batch_size (%lld) to match target batch_size (%lld).",
                         (long long)x->shape[0], (long long)t->shape[0]);
    nll_opts o = nll_options(a);
    if (o.reduction < JG_REDUCTION_MEAN || o.reduction > JG_REDUCTION_NONE)
        return jg_errorf("nll_loss(): invalid reduction %d", o.reduction);
    memset(&out[0], 0, sizeof out[0]);
    out[0].dtype = x->dtype;
    if (o.reduction == JG_REDUCTION_NONE) { /* one loss per row */
        out[0].ndim = 1;
        out[0].shape[0] = x->shape[0];
    }
    return 0;
}

/* Rows in order; the sum of the kept rows' -x[i, t_i] in the dtype, then
 * divided by their count for the mean. */
#define NLL_FWD(T)                                                                                 \
    do {                                                                                           \
        const T *xp = (const T *)jg_tensor_ptr(x);                                                 \
        T *op = (T *)jg_tensor_ptr(out[0]), acc = 0;                                               \
        int64_t count = 0;                                                                         \
        for (int64_t i = 0; i < n; i++) {                                                          \
            int64_t c = tp[i * t->stride[0]];                                                      \
            if (nll_ignored(&o, c)) {                                                              \
                if (o.reduction == JG_REDUCTION_NONE)                                              \
                    op[i] = 0;                                                                     \
                continue;                                                                          \
            }                                                                                      \
            if (c < 0 || c >= n_cls)                                                               \
                return jg_errorf("Target %lld is out of bounds.", (long long)c);                   \
            T v = -xp[i * x->stride[0] + c * x->stride[1]];                                        \
            if (o.reduction == JG_REDUCTION_NONE)                                                  \
                op[i] = v;                                                                         \
            else                                                                                   \
                acc += v;                                                                          \
            count++;                                                                               \
        }                                                                                          \
        if (o.reduction == JG_REDUCTION_MEAN)                                                      \
            *op = acc / (T)count;                                                                  \
        else if (o.reduction == JG_REDUCTION_SUM)                                                  \
            *op = acc;                                                                             \
    } while (0)

int jg_k_nll_loss(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    const jg_tensor *x = in[0], *t = in[1];
    nll_opts o = nll_options(a);
    int64_t n = x->shape[0], n_cls = x->shape[1];
    const int64_t *tp = (const int64_t *)jg_tensor_ptr(t);
    if (x->dtype == JG_F32)
        NLL_FWD(float);
    else
        NLL_FWD(double);
    return 0;
}

jg_attrs jg_nll_attrs(bool has_ignore, int64_t ignore_index, int reduction, int64_t n_cls) {
    jg_attrs a = {.n = 4};
    a.i[0] = has_ignore;
    a.i[1] = ignore_index;
    a.i[2] = reduction;
    a.i[3] = n_cls;
    return a;
}

/* PyTorch's nll_loss_backward: grad_input[i, t_i] = -(grad / count) for
 * the mean, -grad for the sum, -grad[i] for none; 0 elsewhere and on
 * ignored rows.  Its own gradient is nll_loss again (it is linear in grad),
 * so nll_loss differentiates to any order. */
int jg_vjp_nll_loss(VJP_ARGS) {
    (void)out, (void)needs;
    nll_opts o = nll_options(a);
    jg_attrs b = jg_nll_attrs(o.has_ignore, o.ignore, o.reduction, meta[0].shape[1]);
    gin[1] = NULL; /* targets are not differentiable */
    gin[0] = jg_op1(JG_OP_NLL_LOSS_BACKWARD, &b, gout[0], in[1]);
    return gin[0] ? 0 : -1;
}

int jg_infer_nll_loss_backward(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    const jg_meta *g = &in[0], *t = &in[1];
    nll_opts o = nll_options(a);
    if (a->n != 4 || a->i[3] < 0 || o.reduction < JG_REDUCTION_MEAN ||
        o.reduction > JG_REDUCTION_NONE)
        return jg_errorf("nll_loss_backward(): bad attributes");
    if (!jg_dtype_is_float(g->dtype) || t->dtype != JG_I64 || t->ndim != 1)
        return jg_errorf("nll_loss_backward(): expected a float gradient and 1-D i64 targets");
    bool per_row = o.reduction == JG_REDUCTION_NONE;
    if (per_row ? g->ndim != 1 || g->shape[0] != t->shape[0] : g->ndim != 0)
        return jg_errorf("nll_loss_backward(): the gradient must have the loss's shape");
    memset(&out[0], 0, sizeof out[0]);
    out[0].dtype = g->dtype;
    out[0].ndim = 2;
    out[0].shape[0] = t->shape[0];
    out[0].shape[1] = a->i[3];
    return 0;
}

#define NLL_BWD(T)                                                                                 \
    do {                                                                                           \
        const T *gp = (const T *)jg_tensor_ptr(g);                                                 \
        T *op = (T *)jg_tensor_ptr(out[0]);                                                        \
        memset(op, 0, sizeof(T) * (size_t)(n * n_cls));                                            \
        int64_t count = 0;                                                                         \
        for (int64_t i = 0; i < n; i++) {                                                          \
            int64_t c = tp[i * t->stride[0]];                                                      \
            if (nll_ignored(&o, c))                                                                \
                continue;                                                                          \
            if (c < 0 || c >= n_cls)                                                               \
                return jg_errorf("Target %lld is out of bounds.", (long long)c);                   \
            count++;                                                                               \
        }                                                                                          \
        bool per_row = o.reduction == JG_REDUCTION_NONE;                                           \
        T v = per_row ? 0 : o.reduction == JG_REDUCTION_MEAN ? -(gp[0] / (T)count) : -gp[0];       \
        for (int64_t i = 0; i < n; i++) {                                                          \
            int64_t c = tp[i * t->stride[0]];                                                      \
            if (!nll_ignored(&o, c))                                                               \
                op[i * n_cls + c] = per_row ? -gp[i * g->stride[0]] : v;                           \
        }                                                                                          \
    } while (0)

int jg_k_nll_loss_backward(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    const jg_tensor *g = in[0], *t = in[1];
    nll_opts o = nll_options(a);
    int64_t n = t->shape[0], n_cls = a->i[3];
    const int64_t *tp = (const int64_t *)jg_tensor_ptr(t);
    if (g->dtype == JG_F32)
        NLL_BWD(float);
    else
        NLL_BWD(double);
    return 0;
}

/* d/dgrad of nll_loss_backward is nll_loss of the incoming gradient. */
int jg_vjp_nll_loss_backward(VJP_ARGS) {
    (void)out, (void)needs, (void)meta;
    gin[1] = NULL;
    gin[0] = jg_op1(JG_OP_NLL_LOSS, a, gout[0], in[1]);
    return gin[0] ? 0 : -1;
}
