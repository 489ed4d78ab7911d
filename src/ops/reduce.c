/* Reductions: sum, mean (attrs.i[0..n) = sorted reduced dims, n == 0 means
 * every dim; attrs.keepdim) and max over one dim (attrs.i[0]) with the index
 * of the first maximum.
 *
 * Summation order, in the input's own dtype (f32 sums in f32), one fixed
 * order for eager, interpreted and compiled code alike, whatever the number
 * of threads (docs/kernels.md, "Reductions"):
 * - f32/f64 reduced over trailing dims (sum(), sum(dim=-1), ...): each
 *   output's inputs, a run in row-major order, are summed in the blocked
 *   lane order of ops/sum_order.h (blocks of 4096, 32 f32 / 16 f64 lanes
 *   folded by halving, block results added in order).
 * - anything else: every output element accumulates its inputs
 *   sequentially in row-major order of the input, from 0 (one run of
 *   adjacent non-trailing dims vectorizes across the outputs).
 * A non-dense input of the fast paths is copied first, so the order depends
 * only on the logical element order. */
#include "core/iter.h"
#include "core/parallel.h"
#include "ops/decls.h"
#include "ops/sum_order.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* Which dims of an ndim-d input attrs reduce (n == 0: all). */
static int reduced_mask(const jg_attrs *a, int ndim, bool *mask) {
    memset(mask, 0, sizeof(bool) * JG_MAX_DIMS);
    if (a->n < 0 || a->n > (ndim ? ndim : 1))
        return jg_errorf("reduce: bad dim list (%d dims for a %d-d input)", a->n, ndim);
    if (a->n == 0) {
        for (int d = 0; d < ndim; d++)
            mask[d] = true;
        return 0;
    }
    for (int k = 0; k < a->n; k++) {
        int64_t d = a->i[k];
        if (ndim == 0 && d == 0)
            continue; /* dim 0 of a 0-d tensor: nothing to reduce */
        if (d < 0 || d >= ndim || (k > 0 && d <= a->i[k - 1]))
            return jg_errorf("reduce: dims must be sorted, distinct and in [0, %d), got %lld", ndim,
                             (long long)d);
        mask[d] = true;
    }
    return 0;
}

/* The keepdim shape of a reduction: reduced dims become 1. */
static void keepdim_shape(const jg_meta *m, const bool *mask, int64_t *shape) {
    for (int d = 0; d < m->ndim; d++)
        shape[d] = mask[d] ? 1 : m->shape[d];
}

int jg_infer_reduce(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    bool mask[JG_MAX_DIMS];
    if (reduced_mask(a, in[0].ndim, mask) < 0)
        return -1;
    memset(&out[0], 0, sizeof out[0]);
    /* bool and int32 sum to int64, as in PyTorch */
    out[0].dtype = in[0].dtype == JG_BOOL || in[0].dtype == JG_I32 ? JG_I64 : in[0].dtype;
    for (int d = 0; d < in[0].ndim; d++) {
        if (!mask[d])
            out[0].shape[out[0].ndim++] = in[0].shape[d];
        else if (a->keepdim)
            out[0].shape[out[0].ndim++] = 1;
    }
    return 0;
}

/* mean has no integer form in PyTorch: it refuses instead of promoting. */
int jg_infer_mean(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    if (!jg_dtype_is_float(in[0].dtype))
        return jg_errorf("mean(): could not infer output dtype. Input dtype must be either a "
                         "floating point or complex dtype. Got: %s",
                         jg_dtype_torch_name(in[0].dtype));
    return jg_infer_reduce(a, in, out);
}

/* ---- sum / mean kernels ---- */

/* p[0] = output (byte stride 0 along reduced dims), p[1] = input. */
#define SUM_ROW(TY, T)                                                                             \
    static void sum_row_##TY(void *ctx, int64_t n, char **p, const int64_t *st) {                  \
        (void)ctx;                                                                                 \
        if (st[0] == 0) {                                                                          \
            T acc = *(T *)p[0];                                                                    \
            for (int64_t i = 0; i < n; i++)                                                        \
                acc += *(const T *)(p[1] + i * st[1]);                                             \
            *(T *)p[0] = acc;                                                                      \
            return;                                                                                \
        }                                                                                          \
        for (int64_t i = 0; i < n; i++)                                                            \
            *(T *)(p[0] + i * st[0]) += *(const T *)(p[1] + i * st[1]);                            \
    }
SUM_ROW(f32, float)
SUM_ROW(f64, double)
SUM_ROW(i64, int64_t)

/* The lanes live in vectors: 8 of 16 bytes (sum_block) or 4 of 32 bytes
 * (sum_block_wide), lane j in vector j / W either way, W the lanes per
 * vector.  Both do the same arithmetic on every target (the wide form's
 * default clone in two 16-byte halves), so they give the same bits and
 * the choice between them may follow the data's size and the thread count:
 * the AVX2 clone of the wide form sums a 2 MB run resident in L2 (a
 * thread's half of a 1024x1024 sum at 2 threads) a seventh faster, with
 * half the loads and adds, but a 4 MB one streamed from L3 about 5% slower
 * (one thread, this machine: docs/performance.md).  sum_wide picks. */
typedef float v4f __attribute__((vector_size(16)));
typedef double v2d __attribute__((vector_size(16)));
typedef float v8f __attribute__((vector_size(32)));
typedef double v4d __attribute__((vector_size(32)));
/* Unaligned loads of them from the element arrays. */
typedef float v4f_u __attribute__((vector_size(16), aligned(4), may_alias));
typedef double v2d_u __attribute__((vector_size(16), aligned(8), may_alias));
typedef float v8f_u __attribute__((vector_size(32), aligned(4), may_alias));
typedef double v4d_u __attribute__((vector_size(32), aligned(8), may_alias));

/* Folding by halving from one vector down: lane j += lane j + w for w =
 * W/2, ..., 1.  (A lane is never -0 -- it starts at +0 -- so folding empty
 * lanes in is exact.) */
#define SUM_FOLD(T, V, a0)                                                                         \
    T l[sizeof(V) / sizeof(T)];                                                                    \
    memcpy(l, &a0, sizeof l);                                                                      \
    for (int w = (int)(sizeof(V) / sizeof(T)) / 2; w >= 1; w /= 2)                                 \
        for (int j = 0; j < w; j++)                                                                \
            l[j] += l[j + w];                                                                      \
    return l[0]

/* One block of n <= JG_SUM_BLOCK elements in the lane order. */
#define SUM_BLOCK(TY, T, V, VU, L)                                                                 \
    static T sum_block_##TY(const T *x, int64_t n) {                                               \
        V a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, a4 = {0}, a5 = {0}, a6 = {0}, a7 = {0};          \
        int64_t i = 0;                                                                             \
        for (; i + L <= n; i += L) {                                                               \
            const VU *v = (const VU *)(x + i);                                                     \
            a0 += v[0], a1 += v[1], a2 += v[2], a3 += v[3];                                        \
            a4 += v[4], a5 += v[5], a6 += v[6], a7 += v[7];                                        \
        }                                                                                          \
        if (i < n) { /* the tail, zero-padded: adding +0 leaves a lane as it is */                 \
            T t[L] = {0};                                                                          \
            memcpy(t, x + i, sizeof(T) * (size_t)(n - i));                                         \
            const VU *v = (const VU *)t;                                                           \
            a0 += v[0], a1 += v[1], a2 += v[2], a3 += v[3];                                        \
            a4 += v[4], a5 += v[5], a6 += v[6], a7 += v[7];                                        \
        }                                                                                          \
        /* lane j + L/2 sits in vector k + 4 where lane j sits in vector k,                        \
         * and so on down to one vector */                                                         \
        a0 += a4, a1 += a5, a2 += a6, a3 += a7;                                                    \
        a0 += a2, a1 += a3;                                                                        \
        a0 += a1;                                                                                  \
        SUM_FOLD(T, V, a0);                                                                        \
    }
SUM_BLOCK(f32, float, v4f, v4f_u, JG_SUM_LANES_F32)
SUM_BLOCK(f64, double, v2d, v2d_u, JG_SUM_LANES_F64)

/* The same block with the lanes in 4 vectors of 32 bytes. */
#define SUM_BLOCK_WIDE(TY, T, V, VU, L)                                                            \
    static __attribute__((target_clones("avx2", "default")))                                       \
    T sum_block_wide_##TY(const T *x, int64_t n) {                                                 \
        V a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};                                                  \
        int64_t i = 0;                                                                             \
        for (; i + L <= n; i += L) {                                                               \
            const VU *v = (const VU *)(x + i);                                                     \
            a0 += v[0], a1 += v[1], a2 += v[2], a3 += v[3];                                        \
        }                                                                                          \
        if (i < n) {                                                                               \
            T t[L] = {0};                                                                          \
            memcpy(t, x + i, sizeof(T) * (size_t)(n - i));                                         \
            const VU *v = (const VU *)t;                                                           \
            a0 += v[0], a1 += v[1], a2 += v[2], a3 += v[3];                                        \
        }                                                                                          \
        /* lane j + L/2 sits in vector k + 2 where lane j sits in vector k,                        \
         * lane j + L/4 in vector 1 where lane j sits in vector 0 */                               \
        a0 += a2, a1 += a3;                                                                        \
        a0 += a1;                                                                                  \
        SUM_FOLD(T, V, a0);                                                                        \
    }
SUM_BLOCK_WIDE(f32, float, v8f, v8f_u, JG_SUM_LANES_F32)
SUM_BLOCK_WIDE(f64, double, v4d, v4d_u, JG_SUM_LANES_F64)

/* Whether a sum whose threads read `bytes` each should use the wide
 * blocks: when that share fits in a core's L2 (sysconf's size, else 1 MB). */
static bool sum_wide(int64_t bytes) {
    static _Atomic long l2;
    long c = atomic_load_explicit(&l2, memory_order_relaxed);
    if (!c) {
        c = sysconf(_SC_LEVEL2_CACHE_SIZE);
        if (c <= 0)
            c = 1L << 20;
        atomic_store_explicit(&l2, c, memory_order_relaxed);
    }
    return bytes <= c;
}

/* A whole run: block results added in block order; a large run computes
 * its blocks on the pool first. */
#define SUM_RUN(TY, T)                                                                             \
    static T sum_serial_##TY(const T *x, int64_t n, bool wide) {                                   \
        T (*blk)(const T *, int64_t) = wide ? sum_block_wide_##TY : sum_block_##TY;                \
        T s = blk(x, n < JG_SUM_BLOCK ? n : JG_SUM_BLOCK);                                         \
        for (int64_t o = JG_SUM_BLOCK; o < n; o += JG_SUM_BLOCK)                                   \
            s += blk(x + o, n - o < JG_SUM_BLOCK ? n - o : JG_SUM_BLOCK);                          \
        return s;                                                                                  \
    }                                                                                              \
    typedef struct {                                                                               \
        const T *x;                                                                                \
        int64_t n;                                                                                 \
        T *part;                                                                                   \
        bool wide;                                                                                 \
    } run_ctx_##TY;                                                                                \
    static void sum_blocks_##TY(void *vc, int64_t lo, int64_t hi) {                                \
        run_ctx_##TY *c = vc;                                                                      \
        T (*blk)(const T *, int64_t) = c->wide ? sum_block_wide_##TY : sum_block_##TY;             \
        for (int64_t b = lo; b < hi; b++) {                                                        \
            int64_t s = b * JG_SUM_BLOCK;                                                          \
            c->part[b] = blk(c->x + s, c->n - s < JG_SUM_BLOCK ? c->n - s : JG_SUM_BLOCK);         \
        }                                                                                          \
    }                                                                                              \
    /* wide: -1 to choose by the size, else whether to use the wide blocks */                      \
    static T sum_run_##TY(const T *x, int64_t n, int wide) {                                       \
        if (n < 2 * JG_PAR_MIN)                                                                    \
            return sum_serial_##TY(x, n, wide < 0 ? sum_wide(n * (int64_t)sizeof(T)) : wide);      \
        int64_t nb = (n + JG_SUM_BLOCK - 1) / JG_SUM_BLOCK;                                        \
        int64_t parts =                                                                            \
            jg_parallel_worth(n) ? jg_parallel_chunks(nb, JG_PAR_MIN / JG_SUM_BLOCK) : 1;          \
        if (parts > jg_parallel_threads())                                                         \
            parts = jg_parallel_threads();                                                         \
        bool w = wide < 0 ? sum_wide(n * (int64_t)sizeof(T) / parts) : wide;                       \
        T stack[512], *part = nb <= 512 ? stack : malloc(sizeof(T) * (size_t)nb);                  \
        if (!part) /* no room for the partials: the same order, serially */                        \
            return sum_serial_##TY(x, n, w);                                                       \
        run_ctx_##TY c = {x, n, part, w};                                                          \
        jg_parallel_for(nb, JG_PAR_MIN / JG_SUM_BLOCK, sum_blocks_##TY, &c);                       \
        T s = part[0];                                                                             \
        for (int64_t b = 1; b < nb; b++)                                                           \
            s += part[b];                                                                          \
        if (part != stack)                                                                         \
            free(part);                                                                            \
        return s;                                                                                  \
    }                                                                                              \
    T jg_sum_run_##TY(const T *x, int64_t n) {                                                     \
        return sum_run_##TY(x, n, -1);                                                             \
    }
SUM_RUN(f32, float)
SUM_RUN(f64, double)

/* The same order over x[0], x[st], x[2 st], ... (st in elements): each
 * lane gets the same elements in the same order as in a contiguous run. */
#define SUM_STRIDED(TY, T, L)                                                                      \
    T jg_sum_strided_##TY(const T *x, int64_t n, int64_t st) {                                     \
        if (st == 1)                                                                               \
            return jg_sum_run_##TY(x, n);                                                          \
        T s = 0;                                                                                   \
        for (int64_t b0 = 0; b0 == 0 || b0 < n; b0 += JG_SUM_BLOCK) {                              \
            int64_t m = n - b0 < JG_SUM_BLOCK ? n - b0 : JG_SUM_BLOCK;                             \
            T l[L] = {0};                                                                          \
            for (int64_t i = 0; i < m; i++)                                                        \
                l[i % L] += x[(b0 + i) * st];                                                      \
            for (int w = L / 2; w >= 1; w /= 2)                                                    \
                if (w < m)                                                                         \
                    for (int j = 0; j < w; j++)                                                    \
                        l[j] += l[j + w];                                                          \
            s = b0 == 0 ? l[0] : s + l[0];                                                         \
        }                                                                                          \
        return s;                                                                                  \
    }
SUM_STRIDED(f32, float, JG_SUM_LANES_F32)
SUM_STRIDED(f64, double, JG_SUM_LANES_F64)

/* If a reduces exactly the trailing dims of an ndim-d input (all of them
 * for a full reduction), the first reduced dim; else -1. */
static int trailing_reduction(const bool *mask, int ndim) {
    int r = ndim;
    while (r > 0 && mask[r - 1])
        r--;
    for (int d = 0; d < r; d++)
        if (mask[d])
            return -1;
    return r;
}

/* in is dense; output j sums the run of m inputs starting at j * m. */
typedef struct {
    const char *x;
    char *o;
    int64_t m;
    jg_dtype dt;
    int wide; /* sum_run's: -1 (a lone row: its own choice) or sum_wide's */
} rows_ctx;

static void sum_rows(void *vc, int64_t lo, int64_t hi) {
    const rows_ctx *c = vc;
    if (c->dt == JG_F32) {
        const float *x = (const float *)c->x;
        for (int64_t j = lo; j < hi; j++)
            ((float *)c->o)[j] = sum_run_f32(x + j * c->m, c->m, c->wide);
    } else {
        const double *x = (const double *)c->x;
        for (int64_t j = lo; j < hi; j++)
            ((double *)c->o)[j] = sum_run_f64(x + j * c->m, c->m, c->wide);
    }
}

static void sum_trailing(const jg_tensor *in, jg_tensor *out, int64_t m) {
    int64_t n = out->numel, grain = m >= JG_PAR_MIN ? 1 : JG_PAR_MIN / (m ? m : 1);
    bool serial = n * m < JG_PAR_MIN || n == 1;
    /* the threads that share the rows (a lone row splits its blocks itself) */
    int64_t parts = serial ? 1 : jg_parallel_chunks(n, grain);
    if (parts > jg_parallel_threads())
        parts = jg_parallel_threads();
    rows_ctx c = {jg_tensor_ptr(in), jg_tensor_ptr(out), m, in->dtype,
                  n == 1 ? -1 : sum_wide(n * m * (int64_t)jg_dtype_size(in->dtype) / parts)};
    if (serial)
        sum_rows(&c, 0, n);
    else
        jg_parallel_for(n, grain, sum_rows, &c);
}

/* The tile width, in columns, of a reduction over the middle dim of
 * [A, R, C] whose usual tile is tile columns.  Each output column is
 * computed alone, by the same operations in the same order, whatever tile
 * holds it: so the width changes only how the work splits, never a bit,
 * and may follow the thread count.  A large reduction with fewer units
 * (A * tiles) than threads (sum(dim=0) of a square matrix: one unit) gets
 * narrower tiles, a multiple of 16 columns (whole cache lines), one per
 * thread, while each keeps JG_PAR_MIN elements; otherwise tile.  Tiles
 * narrower than OUTER_SPLIT_MIN columns are not worth it: rows cut into
 * short segments cost more in all than they save (a [131072, 32] sum split
 * in two 16-column halves took twice the CPU time), so those stay whole. */
enum { OUTER_SPLIT_MIN = 128 };
static int64_t outer_tile(int64_t A, int64_t R, int64_t C, int64_t tile) {
    if (C <= 16 || !jg_parallel_worth(A * R * C))
        return tile;
    int64_t t = jg_parallel_threads(), tiles = (C + tile - 1) / tile;
    if (A * tiles >= t)
        return tile;
    int64_t per_a = (t + A - 1) / A;
    int64_t w = ((C + per_a - 1) / per_a + 15) / 16 * 16;
    int64_t wmin = (JG_PAR_MIN / (R ? R : 1) + 15) / 16 * 16;
    w = w < wmin ? wmin : w;
    if (w < OUTER_SPLIT_MIN)
        return tile;
    return w < tile ? w : tile;
}

/* A dense input seen as [A, R, C] summed over R: out[a, c] adds
 * x[a, 0, c], x[a, 1, c], ... in order, from 0.  Work units are (a, a tile
 * of w columns); the rows of a unit stream through a row of outputs that
 * stays in L1. */
enum { TILE_C = 1024 };
typedef struct {
    const char *x;
    char *o;
    int64_t r, c, w, tiles;
    jg_dtype dt;
} outer_ctx;

/* Eight rows per pass over the outputs, then four, then one (added one
 * after the other: the same order), so the outputs are loaded and stored
 * an eighth as often.  The AVX2 clone runs the same adds. */
#define SUM_OUTER(TY, T)                                                                           \
    static __attribute__((                                                                         \
        optimize("tree-vectorize"),                                                                \
        target_clones("avx2", "default"))) void sum_outer_##TY(T *restrict o, const T *restrict x, \
                                                               int64_t r, int64_t c, int64_t w) {  \
        for (int64_t j = 0; j < w; j++)                                                            \
            o[j] = 0;                                                                              \
        int64_t k = 0;                                                                             \
        for (; k + 8 <= r; k += 8) {                                                               \
            const T *restrict r0 = x + k * c, *restrict r1 = r0 + c, *restrict r2 = r1 + c;        \
            const T *restrict r3 = r2 + c, *restrict r4 = r3 + c, *restrict r5 = r4 + c;           \
            const T *restrict r6 = r5 + c, *restrict r7 = r6 + c;                                  \
            for (int64_t j = 0; j < w; j++)                                                        \
                o[j] =                                                                             \
                    (((((((o[j] + r0[j]) + r1[j]) + r2[j]) + r3[j]) + r4[j]) + r5[j]) + r6[j]) +   \
                    r7[j];                                                                         \
        }                                                                                          \
        for (; k + 4 <= r; k += 4) {                                                               \
            const T *restrict r0 = x + k * c, *restrict r1 = r0 + c, *restrict r2 = r1 + c;        \
            const T *restrict r3 = r2 + c;                                                         \
            for (int64_t j = 0; j < w; j++)                                                        \
                o[j] = (((o[j] + r0[j]) + r1[j]) + r2[j]) + r3[j];                                 \
        }                                                                                          \
        for (; k < r; k++) {                                                                       \
            const T *restrict row = x + k * c;                                                     \
            for (int64_t j = 0; j < w; j++)                                                        \
                o[j] += row[j];                                                                    \
        }                                                                                          \
    }
SUM_OUTER(f32, float)
SUM_OUTER(f64, double)
SUM_OUTER(i64, int64_t)

static void sum_outer_units(void *vc, int64_t lo, int64_t hi) {
    const outer_ctx *c = vc;
    size_t es = jg_dtype_size(c->dt);
    for (int64_t u = lo; u < hi; u++) {
        int64_t a = u / c->tiles, j0 = (u % c->tiles) * c->w;
        int64_t w = c->c - j0 < c->w ? c->c - j0 : c->w;
        const char *x = c->x + (size_t)(a * c->r * c->c + j0) * es;
        char *o = c->o + (size_t)(a * c->c + j0) * es;
        if (c->dt == JG_F32)
            sum_outer_f32((float *)o, (const float *)x, c->r, c->c, w);
        else if (c->dt == JG_F64)
            sum_outer_f64((double *)o, (const double *)x, c->r, c->c, w);
        else
            sum_outer_i64((int64_t *)o, (const int64_t *)x, c->r, c->c, w);
    }
}

/* If a reduces one run of adjacent dims [d0, d1) with d1 < ndim, sets
 * A, R, C and returns true. */
static bool outer_reduction(const jg_tensor *in, const bool *mask, int64_t *A, int64_t *R,
                            int64_t *C) {
    int d0 = 0;
    while (d0 < in->ndim && !mask[d0])
        d0++;
    int d1 = d0;
    while (d1 < in->ndim && mask[d1])
        d1++;
    if (d1 == d0 || d1 == in->ndim)
        return false;
    for (int d = d1; d < in->ndim; d++)
        if (mask[d])
            return false;
    *A = *R = *C = 1;
    for (int d = 0; d < in->ndim; d++)
        *(d < d0 ? A : d < d1 ? R : C) *= in->shape[d];
    return true;
}

static void sum_outer(const jg_tensor *in, jg_tensor *out, int64_t A, int64_t R, int64_t C) {
    int64_t w = outer_tile(A, R, C, TILE_C);
    outer_ctx c = {jg_tensor_ptr(in), jg_tensor_ptr(out), R, C, w, (C + w - 1) / w, in->dtype};
    int64_t units = A * c.tiles, per = R * (C < w ? C : w);
    if (units * per < JG_PAR_MIN)
        sum_outer_units(&c, 0, units);
    else
        jg_parallel_for(units, per >= JG_PAR_MIN ? 1 : JG_PAR_MIN / (per ? per : 1),
                        sum_outer_units, &c);
}

/* out = sum of in over the reduced dims of a (out is contiguous); -1 if a
 * copy of a non-dense input cannot be allocated.  A non-dense input of the
 * fast paths is copied first: the order depends only on the logical order
 * of the elements, never on their layout. */
static int sum_into(const jg_attrs *a, const jg_tensor *in, jg_tensor *out) {
    static const jg_inner_fn rows[3] = {sum_row_f32, sum_row_f64, sum_row_i64};
    bool mask[JG_MAX_DIMS];
    JG_ASSERT(reduced_mask(a, in->ndim, mask) == 0);
    int r = jg_dtype_is_float(in->dtype) ? trailing_reduction(mask, in->ndim) : -1;
    int64_t A, R, C;
    bool outer = r < 0 && in->numel > 0 && outer_reduction(in, mask, &A, &R, &C);
    if (r >= 0 || outer) {
        jg_tensor *c = NULL;
        if (!jg_dense(in)) {
            if (!(c = jg_tensor_alloc(in->dtype, in->ndim, in->shape)))
                return -1;
            jg_copy_data(c, in);
            in = c;
        }
        if (outer && C > 1) {
            sum_outer(in, out, A, R, C);
        } else if (outer) { /* only size-1 dims after the reduced run: each
                             * output sums a contiguous run, in sum()'s order
                             * (as PyTorch's, whose x.sum(0) of [n, 1] and
                             * x.sum() agree) */
            sum_trailing(in, out, R);
        } else {
            int64_t m = 1;
            for (int d = r; d < in->ndim; d++)
                m *= in->shape[d];
            sum_trailing(in, out, m);
        }
        if (c)
            jg_release(c);
        return 0;
    }
    memset(jg_tensor_ptr(out), 0, (size_t)out->numel * jg_dtype_size(out->dtype));
    /* Output byte strides seen along each input dim. */
    int64_t st[2][JG_MAX_DIMS];
    int64_t es = (int64_t)jg_dtype_size(out->dtype);
    int od = 0;
    for (int d = 0; d < in->ndim; d++) {
        if (mask[d]) {
            st[0][d] = 0;
            od += a->keepdim ? 1 : 0;
        } else {
            st[0][d] = out->stride[od++] * es;
        }
        st[1][d] = in->stride[d] * es;
    }
    char *base[2] = {jg_tensor_ptr(out), jg_tensor_ptr(in)};
    jg_iter_run(in->ndim, in->shape, 2, base, st, rows[in->dtype], NULL);
    return 0;
}

int jg_k_sum(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    if (in[0]->dtype == out[0]->dtype)
        return sum_into(a, in[0], out[0]);
    /* bool and int32 sum in int64 (PyTorch's result dtype) */
    jg_tensor *c = jg_tensor_alloc(out[0]->dtype, in[0]->ndim, in[0]->shape);
    if (!c)
        return -1;
    jg_copy_data(c, in[0]);
    int rc = sum_into(a, c, out[0]);
    jg_release(c);
    return rc;
}

static int64_t reduced_count(const jg_attrs *a, const jg_meta *m) {
    bool mask[JG_MAX_DIMS];
    JG_ASSERT(reduced_mask(a, m->ndim, mask) == 0);
    int64_t n = 1;
    for (int d = 0; d < m->ndim; d++)
        if (mask[d])
            n *= m->shape[d];
    return n;
}

/* mean = sum / count, the division done in the dtype as PyTorch's
 * sum(...).div_(count) does (0 / 0 gives NaN for an empty reduction). */
int jg_k_mean(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    if (sum_into(a, in[0], out[0]) < 0)
        return -1;
    jg_meta m;
    jg_meta_of(in[0], &m);
    int64_t count = reduced_count(a, &m);
    int64_t n = out[0]->numel;
    if (out[0]->dtype == JG_F32) {
        float *o = (float *)jg_tensor_ptr(out[0]), c = (float)count;
        for (int64_t i = 0; i < n; i++)
            o[i] = o[i] / c;
    } else {
        JG_ASSERT(out[0]->dtype == JG_F64);
        double *o = (double *)jg_tensor_ptr(out[0]), c = (double)count;
        for (int64_t i = 0; i < n; i++)
            o[i] = o[i] / c;
    }
    return 0;
}

/* ---- sum / mean VJPs ---- */

/* g (the reduced shape) reshaped to keepdim form and expanded to meta's
 * shape: a tensor owned by the current scope, or NULL. */
static jg_tensor *expand_back(const jg_attrs *a, const jg_meta *m, jg_tensor *g) {
    bool mask[JG_MAX_DIMS];
    if (reduced_mask(a, m->ndim, mask) < 0)
        return NULL;
    int64_t kshape[JG_MAX_DIMS];
    keepdim_shape(m, mask, kshape);
    if (!a->keepdim && !(g = jg_reshape(g, m->ndim, kshape)))
        return NULL;
    return jg_expand(g, m->ndim, m->shape);
}

int jg_vjp_sum(VJP_ARGS) {
    (void)in, (void)out, (void)needs;
    gin[0] = expand_back(a, &meta[0], gout[0]);
    return gin[0] ? 0 : -1;
}

/* PyTorch's mean_backward is sum_backward(grad, ...) / count: the expanded
 * gradient DIVIDED by the count (not multiplied by 1/count, which rounds
 * differently).  The count is a 0-d tensor of the gradient's dtype, so the
 * division happens in that dtype, as the forward kernel's does. */
int jg_vjp_mean(VJP_ARGS) {
    (void)in, (void)out, (void)needs;
    jg_tensor *e = expand_back(a, &meta[0], gout[0]);
    jg_tensor *count = e ? jg_scalar(jg_dtype_of(e), (double)reduced_count(a, &meta[0])) : NULL;
    gin[0] = count ? jg_div(e, count) : NULL;
    return gin[0] ? 0 : -1;
}

/* ---- max: vectorized scans of contiguous runs ---- */

typedef int32_t v4i __attribute__((vector_size(16)));
typedef int64_t v2l __attribute__((vector_size(16)));

/* The largest (NAME max, GT >) or smallest (min, <) non-NaN value of
 * x[0, n) (n >= 1; which zero, when it is ±0, is unspecified) and whether a
 * NaN occurs.  Blends instead of a compare-and-branch so that it
 * vectorizes; the value does not depend on the order of the comparisons. */
#define MAX_VALUE(NAME, TY, T, V, VU, VI, VMAX, GT)                                                \
    static T NAME##_value_##TY(const T *x, int64_t n, bool *nan) {                                 \
        enum { W = (int)(sizeof(V) / sizeof(T)) };                                                 \
        V m0 = (V){0} + x[0], m1 = m0, m2 = m0, m3 = m0;                                           \
        VI bad = {0};                                                                              \
        int64_t i = 0;                                                                             \
        for (; i + 4 * W <= n; i += 4 * W) {                                                       \
            const VU *p = (const VU *)(x + i);                                                     \
            V v0 = p[0], v1 = p[1], v2 = p[2], v3 = p[3];                                          \
            m0 = VMAX(v0, m0), m1 = VMAX(v1, m1), m2 = VMAX(v2, m2), m3 = VMAX(v3, m3);            \
            bad |= (v0 != v0) | (v1 != v1) | (v2 != v2) | (v3 != v3);                              \
        }                                                                                          \
        V ms[4] = {m0, m1, m2, m3};                                                                \
        T l[4 * W], m = x[0];                                                                      \
        int64_t bw[2];                                                                             \
        memcpy(l, ms, sizeof l);                                                                   \
        memcpy(bw, &bad, sizeof bw);                                                               \
        bool b = (bw[0] | bw[1]) != 0;                                                             \
        for (int j = 0; j < 4 * W; j++)                                                            \
            m = l[j] GT m ? l[j] : m;                                                              \
        for (; i < n; i++) {                                                                       \
            m = x[i] GT m ? x[i] : m;                                                              \
            b |= x[i] != x[i];                                                                     \
        }                                                                                          \
        *nan = b || m != m;                                                                        \
        return m;                                                                                  \
    }
/* a > b ? a : b (a < b ? a : b) per lane: one instruction on SSE2
 * (maxps / minps ... compute exactly that, NaN operands included), a blend
 * elsewhere. */
#if defined(__SSE2__)
#define VMAX_F32(a, b) ((v4f)_mm_max_ps((__m128)(a), (__m128)(b)))
#define VMAX_F64(a, b) ((v2d)_mm_max_pd((__m128d)(a), (__m128d)(b)))
#define VMIN_F32(a, b) ((v4f)_mm_min_ps((__m128)(a), (__m128)(b)))
#define VMIN_F64(a, b) ((v2d)_mm_min_pd((__m128d)(a), (__m128d)(b)))
#else
static inline v4f vmax_f32(v4f a, v4f b) {
    v4i g = a > b;
    return (v4f)(((v4i)a & g) | ((v4i)b & ~g));
}
static inline v2d vmax_f64(v2d a, v2d b) {
    v2l g = a > b;
    return (v2d)(((v2l)a & g) | ((v2l)b & ~g));
}
static inline v4f vmin_f32(v4f a, v4f b) {
    v4i g = a < b;
    return (v4f)(((v4i)a & g) | ((v4i)b & ~g));
}
static inline v2d vmin_f64(v2d a, v2d b) {
    v2l g = a < b;
    return (v2d)(((v2l)a & g) | ((v2l)b & ~g));
}
#define VMAX_F32(a, b) vmax_f32(a, b)
#define VMAX_F64(a, b) vmax_f64(a, b)
#define VMIN_F32(a, b) vmin_f32(a, b)
#define VMIN_F64(a, b) vmin_f64(a, b)
#endif
MAX_VALUE(max, f32, float, v4f, v4f_u, v4i, VMAX_F32, >)
MAX_VALUE(max, f64, double, v2d, v2d_u, v2l, VMAX_F64, >)
MAX_VALUE(min, f32, float, v4f, v4f_u, v4i, VMIN_F32, <)
MAX_VALUE(min, f64, double, v2d, v2d_u, v2l, VMIN_F64, <)

/* PyTorch's rule on a contiguous run: the index of the first NaN, else of
 * the first element equal to the maximum (minimum). */
#define MAX_FIRST(NAME, TY, T)                                                                     \
    static int64_t NAME##_first_##TY(const T *x, int64_t n) {                                      \
        bool nan;                                                                                  \
        T m = NAME##_value_##TY(x, n, &nan);                                                       \
        int64_t i = 0;                                                                             \
        if (nan)                                                                                   \
            while (x[i] == x[i])                                                                   \
                i++;                                                                               \
        else                                                                                       \
            while (x[i] != m)                                                                      \
                i++;                                                                               \
        return i;                                                                                  \
    }
MAX_FIRST(max, f32, float)
MAX_FIRST(max, f64, double)
MAX_FIRST(min, f32, float)
MAX_FIRST(min, f64, double)

/* max of all elements of a dense float tensor: per-chunk maxima (on the
 * pool when large), the first chunk with a NaN gives it, else the largest
 * chunk maximum; a zero maximum is taken from its first occurrence, as the
 * sequential scan would. */
typedef struct {
    const char *x;
    int64_t n;
    jg_dtype dt;
    double *m; /* per chunk, exact in double for f32 and f64 */
    bool *nan;
    bool min; /* the minimum instead */
} max_all_ctx;

static void max_all_chunks(void *vc, int64_t lo, int64_t hi) {
    const max_all_ctx *c = vc;
    for (int64_t k = lo; k < hi; k++) {
        int64_t s = k * JG_PAR_MIN, e = s + JG_PAR_MIN < c->n ? s + JG_PAR_MIN : c->n;
        const float *xf = (const float *)c->x + s;
        const double *xd = (const double *)c->x + s;
        if (c->dt == JG_F32)
            c->m[k] = c->min ? min_value_f32(xf, e - s, &c->nan[k])
                             : max_value_f32(xf, e - s, &c->nan[k]);
        else
            c->m[k] = c->min ? min_value_f64(xd, e - s, &c->nan[k])
                             : max_value_f64(xd, e - s, &c->nan[k]);
    }
}

/* Returns false when the partials cannot be allocated (the caller scans). */
static bool max_all_dense(const jg_tensor *x, jg_tensor *out, bool min) {
    int64_t n = x->numel, nc = jg_parallel_chunks(n, JG_PAR_MIN);
    double sm[64], *m = nc <= 64 ? sm : malloc(sizeof(double) * (size_t)nc);
    bool sn[64], *nan = nc <= 64 ? sn : malloc((size_t)nc);
    if (!m || !nan) {
        if (m != sm)
            free(m);
        if (nan != sn)
            free(nan);
        return false;
    }
    max_all_ctx c = {jg_tensor_ptr(x), n, x->dtype, m, nan, min};
    jg_parallel_for(nc, 1, max_all_chunks, &c);
    int64_t k = 0;
    while (k < nc && !nan[k]) /* k: the first chunk with a NaN, if any */
        k++;
    double best = m[0];
    for (int64_t j = 1; j < nc; j++)
        best = (min ? m[j] < best : m[j] > best) ? m[j] : best;
    if (m != sm)
        free(m);
    if (nan != sn)
        free(nan);
#define MAX_ALL_PICK(T, TY)                                                                        \
    do {                                                                                           \
        const T *p = (const T *)c.x;                                                               \
        int64_t i = k < nc ? k * JG_PAR_MIN : 0;                                                   \
        if (k < nc)                                                                                \
            while (p[i] == p[i])                                                                   \
                i++;                                                                               \
        else if (best == 0)                                                                        \
            while (p[i] != 0)                                                                      \
                i++;                                                                               \
        *(T *)jg_tensor_ptr(out) = k < nc || best == 0 ? p[i] : (T)best;                           \
    } while (0)
    if (x->dtype == JG_F32)
        MAX_ALL_PICK(float, f32);
    else
        MAX_ALL_PICK(double, f64);
#undef MAX_ALL_PICK
    return true;
}

/* A row-major copy of a strided float input for the fast paths below (the
 * rules depend only on the logical order of the elements, never on their
 * layout); NULL if x is dense, small (its generic scan is cheaper than a
 * copy) or the copy cannot be allocated. */
enum { MAX_COPY_MIN = 4096 };
static jg_tensor *dense_copy(const jg_tensor *x) {
    if (jg_dense(x) || x->numel < MAX_COPY_MIN)
        return NULL;
    jg_tensor *c = jg_tensor_alloc(x->dtype, x->ndim, x->shape);
    if (c)
        jg_copy_data(c, x);
    return c;
}

bool jg_max_all_fast(const jg_tensor *x, jg_tensor *out, bool min) {
    if (!jg_dtype_is_float(x->dtype) || x->numel == 0)
        return false;
    jg_tensor *c = dense_copy(x);
    bool done = (c || jg_dense(x)) && max_all_dense(c ? c : x, out, min);
    if (c)
        jg_release(c);
    return done;
}

/* ---- max of all elements ---- */

int jg_infer_max_all(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    (void)a;
    int64_t n = 1;
    for (int d = 0; d < in[0].ndim; d++)
        n *= in[0].shape[d];
    if (n == 0)
        return jg_errorf("max(): Expected reduction dim to be specified for input.numel() == 0. "
                         "Specify the reduction dim with the 'dim' argument.");
    memset(&out[0], 0, sizeof out[0]);
    out[0].dtype = in[0].dtype;
    return 0;
}

/* The first NaN, else the first maximum, in row-major order. */
#define MAX_ALL(T)                                                                                 \
    do {                                                                                           \
        T best = *(const T *)base;                                                                 \
        for (int64_t i = 0; i < x->numel; i++) {                                                   \
            int64_t off = 0;                                                                       \
            for (int d = 0; d < x->ndim; d++)                                                      \
                off += idx[d] * x->stride[d];                                                      \
            T v = ((const T *)base)[off];                                                          \
            if (!(v <= best)) {                                                                    \
                best = v;                                                                          \
                if (v != v)                                                                        \
                    break;                                                                         \
            }                                                                                      \
            for (int d = x->ndim - 1; d >= 0; d--) {                                               \
                if (++idx[d] < x->shape[d])                                                        \
                    break;                                                                         \
                idx[d] = 0;                                                                        \
            }                                                                                      \
        }                                                                                          \
        *(T *)jg_tensor_ptr(out[0]) = best;                                                        \
    } while (0)

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wtautological-compare"
int jg_k_max_all(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    (void)a;
    const jg_tensor *x = in[0];
    if (jg_max_all_fast(x, out[0], false))
        return 0;
    int64_t idx[JG_MAX_DIMS] = {0};
    const char *base = jg_tensor_ptr(x);
    if (x->dtype == JG_F32)
        MAX_ALL(float);
    else if (x->dtype == JG_F64)
        MAX_ALL(double);
    else
        MAX_ALL(int64_t);
    return 0;
}
#pragma GCC diagnostic pop

/* PyTorch's evenly_distribute_backward: grad / count at every element equal
 * to the max (every NaN when it is NaN), zero elsewhere — a masked fill,
 * done by threshold_backward over the 0/1 mask (so double backward works). */
int jg_vjp_max_all(VJP_ARGS) {
    (void)a, (void)meta, (void)needs;
    jg_tensor *mask = jg_ew_call(JG_OP_MAX_MASK, in[0], out[0]);
    jg_tensor *count = mask ? jg_sum(mask) : NULL;
    jg_tensor *share = count ? jg_div(gout[0], count) : NULL;
    gin[0] = share ? jg_ew_call(JG_OP_RELU_GRAD, share, mask) : NULL;
    return gin[0] ? 0 : -1;
}

/* ---- max over one dim ---- */

int jg_infer_max_dim(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    int nd = in[0].ndim;
    int64_t d = a->i[0];
    if (a->n != 1 || d < 0 || d >= (nd ? nd : 1))
        return jg_errorf("max(): bad dim %lld for a %d-d input", (long long)d, nd);
    if (nd > 0 && in[0].shape[d] == 0)
        return jg_errorf("max(): Expected reduction dim %lld to have non-zero size.", (long long)d);
    memset(&out[0], 0, sizeof out[0]);
    out[0].dtype = in[0].dtype;
    for (int k = 0; k < nd; k++) {
        if (k != d)
            out[0].shape[out[0].ndim++] = in[0].shape[k];
        else if (a->keepdim)
            out[0].shape[out[0].ndim++] = 1;
    }
    out[1] = out[0];
    out[1].dtype = JG_I64;
    return 0;
}

/* PyTorch's compare loop: the first strictly greater value wins; the first
 * NaN wins and ends the scan (NaN propagates). */
#define MAX_SCAN(T)                                                                                \
    do {                                                                                           \
        const char *p = (const char *)src;                                                         \
        T best = *(const T *)p;                                                                    \
        int64_t bi = 0;                                                                            \
        for (int64_t i = 0; i < len; i++) {                                                        \
            T v = *(const T *)(p + i * step);                                                      \
            if (!(v <= best)) {                                                                    \
                best = v;                                                                          \
                bi = i;                                                                            \
                if (v != v)                                                                        \
                    break;                                                                         \
            }                                                                                      \
        }                                                                                          \
        ((T *)vals)[o] = best;                                                                     \
        idx[o] = bi;                                                                               \
    } while (0)

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wtautological-compare"
static void max_scan(jg_dtype dt, const void *src, int64_t len, int64_t step, void *vals,
                     int64_t *idx, int64_t o) {
    if (dt == JG_F32)
        MAX_SCAN(float);
    else if (dt == JG_F64)
        MAX_SCAN(double);
    else if (dt == JG_I64)
        MAX_SCAN(int64_t);
    else if (dt == JG_I32)
        MAX_SCAN(int32_t);
    else
        MAX_SCAN(bool);
}
#pragma GCC diagnostic pop

/* Rows of a dense float input reduced over its last dim. */
typedef struct {
    const char *x;
    char *vals;
    int64_t *idx, len;
    jg_dtype dt;
    bool min;
} max_rows_ctx;

static void max_rows(void *vc, int64_t lo, int64_t hi) {
    const max_rows_ctx *c = vc;
    for (int64_t o = lo; o < hi; o++) {
        if (c->dt == JG_F32) {
            const float *r = (const float *)c->x + o * c->len;
            float m = 0;
            bool nan = false;
            if (!c->idx) /* values only: the scan for the index when it decides the bits */
                m = c->min ? min_value_f32(r, c->len, &nan) : max_value_f32(r, c->len, &nan);
            if (c->idx || nan || m == 0) {
                int64_t i = c->min ? min_first_f32(r, c->len) : max_first_f32(r, c->len);
                m = r[i];
                if (c->idx)
                    c->idx[o] = i;
            }
            ((float *)c->vals)[o] = m;
        } else {
            const double *r = (const double *)c->x + o * c->len;
            double m = 0;
            bool nan = false;
            if (!c->idx)
                m = c->min ? min_value_f64(r, c->len, &nan) : max_value_f64(r, c->len, &nan);
            if (c->idx || nan || m == 0) {
                int64_t i = c->min ? min_first_f64(r, c->len) : max_first_f64(r, c->len);
                m = r[i];
                if (c->idx)
                    c->idx[o] = i;
            }
            ((double *)c->vals)[o] = m;
        }
    }
}

/* A dense input seen as [A, len, C] reduced over len (a dim other than the
 * last): per unit (a, a tile of columns), the compare loop of MAX_SCAN run
 * for all the tile's columns at once, row by row, as selects so that it
 * vectorizes: a column's best is replaced by a value that is not <= it,
 * unless the best is already a NaN. */
enum { MAX_COLS = 256 };
#define MAX_COLS_FN(NAME, TY, T, LE)                                                               \
    static __attribute__((                                                                         \
        optimize("tree-vectorize", "vect-cost-model=dynamic"),                                     \
        target_clones("avx2", "default"))) void NAME##_cols_##TY(const T *restrict x,              \
                                                                 T *restrict v,                    \
                                                                 int64_t *restrict ix,             \
                                                                 int64_t len, int64_t C,           \
                                                                 int64_t w) {                      \
        T b[MAX_COLS];                                                                             \
        int64_t bi[MAX_COLS];                                                                      \
        for (int64_t j = 0; j < w; j++)                                                            \
            b[j] = x[j], bi[j] = 0;                                                                \
        for (int64_t i = 1; i < len; i++) {                                                        \
            const T *restrict r = x + i * C;                                                       \
            for (int64_t j = 0; j < w; j++) {                                                      \
                bool c = !(r[j] LE b[j]) && b[j] == b[j];                                          \
                b[j] = c ? r[j] : b[j];                                                            \
                bi[j] = c ? i : bi[j];                                                             \
            }                                                                                      \
        }                                                                                          \
        for (int64_t j = 0; j < w; j++)                                                            \
            v[j] = b[j], ix[j] = bi[j];                                                            \
    }
MAX_COLS_FN(max, f32, float, <=)
MAX_COLS_FN(max, f64, double, <=)
MAX_COLS_FN(min, f32, float, >=)
MAX_COLS_FN(min, f64, double, >=)
/* The same selects without the indices (amax / amin). */
#define MAX_COLS_VAL_FN(NAME, TY, T, LE)                                                           \
    static __attribute__((                                                                         \
        optimize("tree-vectorize", "vect-cost-model=dynamic"),                                     \
        target_clones("avx2", "default"))) void NAME##_colv_##TY(const T *restrict x,              \
                                                                 T *restrict v, int64_t len,       \
                                                                 int64_t C, int64_t w) {           \
        T b[MAX_COLS];                                                                             \
        for (int64_t j = 0; j < w; j++)                                                            \
            b[j] = x[j];                                                                           \
        for (int64_t i = 1; i < len; i++) {                                                        \
            const T *restrict r = x + i * C;                                                       \
            for (int64_t j = 0; j < w; j++)                                                        \
                b[j] = !(r[j] LE b[j]) && b[j] == b[j] ? r[j] : b[j];                              \
        }                                                                                          \
        for (int64_t j = 0; j < w; j++)                                                            \
            v[j] = b[j];                                                                           \
    }
MAX_COLS_VAL_FN(max, f32, float, <=)
MAX_COLS_VAL_FN(max, f64, double, <=)
MAX_COLS_VAL_FN(min, f32, float, >=)
MAX_COLS_VAL_FN(min, f64, double, >=)

typedef struct {
    const char *x;
    char *v;
    int64_t *ix, len, C, w, tiles;
    jg_dtype dt;
    bool min;
} max_cols_ctx;

static void max_col_units(void *vc, int64_t lo, int64_t hi) {
    const max_cols_ctx *c = vc;
    for (int64_t u = lo; u < hi; u++) {
        int64_t a = u / c->tiles, j0 = (u % c->tiles) * c->w;
        int64_t w = c->C - j0 < c->w ? c->C - j0 : c->w;
        int64_t xo = a * c->len * c->C + j0, oo = a * c->C + j0;
        const float *xf = (const float *)c->x + xo;
        const double *xd = (const double *)c->x + xo;
        float *vf = (float *)c->v + oo;
        double *vd = (double *)c->v + oo;
        if (!c->ix && c->dt == JG_F32)
            (c->min ? min_colv_f32 : max_colv_f32)(xf, vf, c->len, c->C, w);
        else if (!c->ix)
            (c->min ? min_colv_f64 : max_colv_f64)(xd, vd, c->len, c->C, w);
        else if (c->dt == JG_F32 && c->min)
            min_cols_f32(xf, vf, c->ix + oo, c->len, c->C, w);
        else if (c->dt == JG_F32)
            max_cols_f32(xf, vf, c->ix + oo, c->len, c->C, w);
        else if (c->min)
            min_cols_f64(xd, vd, c->ix + oo, c->len, c->C, w);
        else
            max_cols_f64(xd, vd, c->ix + oo, c->len, c->C, w);
    }
}

static bool max_dim_dense(const jg_tensor *x, int dim, jg_tensor *vals, jg_tensor *ind, bool min);

bool jg_max_dim_fast(const jg_tensor *x, int dim, jg_tensor *vals, jg_tensor *ind, bool min) {
    if (!jg_dtype_is_float(x->dtype) || x->ndim == 0 || x->numel == 0)
        return false;
    jg_tensor *c = dense_copy(x);
    bool done = (c || jg_dense(x)) && max_dim_dense(c ? c : x, dim, vals, ind, min);
    if (c)
        jg_release(c);
    return done;
}

static bool max_dim_dense(const jg_tensor *x, int dim, jg_tensor *vals, jg_tensor *ind, bool min) {
    int64_t len = x->shape[dim], outer = x->numel / len;
    int64_t *ip = ind ? (int64_t *)jg_tensor_ptr(ind) : NULL;
    if (dim == x->ndim - 1) {
        max_rows_ctx c = {jg_tensor_ptr(x), jg_tensor_ptr(vals), ip, len, x->dtype, min};
        if (x->numel < JG_PAR_MIN)
            max_rows(&c, 0, outer);
        else
            jg_parallel_for(outer, len >= JG_PAR_MIN ? 1 : JG_PAR_MIN / len, max_rows, &c);
        return true;
    }
    if (len == 1)
        return false;
    max_cols_ctx c = {jg_tensor_ptr(x), jg_tensor_ptr(vals), ip, len, 1, 0, 0, x->dtype, min};
    for (int d = dim + 1; d < x->ndim; d++)
        c.C *= x->shape[d];
    c.w = outer_tile(outer / c.C, len, c.C, MAX_COLS); /* <= MAX_COLS: max_cols' arrays */
    c.tiles = (c.C + c.w - 1) / c.w;
    int64_t units = outer / c.C * c.tiles, per = len * (c.C < c.w ? c.C : c.w);
    if (x->numel < JG_PAR_MIN)
        max_col_units(&c, 0, units);
    else
        jg_parallel_for(units, per >= JG_PAR_MIN ? 1 : JG_PAR_MIN / per, max_col_units, &c);
    return true;
}

int jg_k_max_dim(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    const jg_tensor *x = in[0];
    int dim = (int)a->i[0];
    int64_t es = (int64_t)jg_dtype_size(x->dtype);
    int64_t len = x->ndim ? x->shape[dim] : 1;
    int64_t step = x->ndim ? x->stride[dim] * es : 0;
    int64_t outer = x->ndim ? x->numel / (len ? len : 1) : 1;
    if (x->numel == 0)
        return 0; /* another dim is empty: so is the output */
    if (jg_max_dim_fast(x, dim, out[0], out[1], false))
        return 0;
    int64_t idx[JG_MAX_DIMS] = {0};
    const char *base = jg_tensor_ptr(x);
    void *vals = jg_tensor_ptr(out[0]);
    int64_t *ind = (int64_t *)jg_tensor_ptr(out[1]);
    for (int64_t o = 0; o < outer; o++) {
        int64_t off = 0;
        for (int d = 0; d < x->ndim; d++)
            off += idx[d] * x->stride[d];
        max_scan(x->dtype, base + off * es, len, step, vals, ind, o);
        for (int d = x->ndim - 1; d >= 0; d--) { /* odometer, skipping dim */
            if (d == dim)
                continue;
            if (++idx[d] < x->shape[d])
                break;
            idx[d] = 0;
        }
    }
    return 0;
}

/* PyTorch's value_selecting_reduction_backward: zeros of the input's shape
 * with g put at the indices along dim.  Done with scatter_add (each slice
 * holds one index, so it equals scatter), whose VJP (gather) gives double
 * backward. */
int jg_vjp_max_dim(VJP_ARGS) {
    (void)in, (void)needs;
    const jg_meta *m = &meta[0];
    jg_tensor *g = gout[0];
    if (!g) {
        gin[0] = NULL; /* only the indices got a gradient: they carry none */
        return 0;
    }
    if (m->ndim == 0) {
        gin[0] = g;
        return 0;
    }
    int dim = (int)a->i[0];
    jg_tensor *idx = out[1];
    if (!a->keepdim) {
        int64_t kshape[JG_MAX_DIMS];
        memcpy(kshape, m->shape, sizeof kshape);
        kshape[dim] = 1;
        if (!(g = jg_reshape(g, m->ndim, kshape)) || !(idx = jg_reshape(idx, m->ndim, kshape)))
            return -1;
    }
    jg_attrs sa = {.n = 1 + m->ndim};
    sa.i[0] = dim;
    memcpy(&sa.i[1], m->shape, sizeof(int64_t) * (size_t)m->ndim);
    gin[0] = jg_op1(JG_OP_SCATTER_ADD, &sa, g, idx);
    return gin[0] ? 0 : -1;
}
