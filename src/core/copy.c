/* jg_copy_blocked: a copy whose source and destination run contiguously
 * along different dims (t().contiguous(), permute, a copy into a transposed
 * view) read one of them with a large stride; walked in square tiles, the
 * lines of both stay in L1.  Copies are exact, so the tiling and the thread
 * count change no result. */
#include "core/copy.h"

#include "core/parallel.h"

#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

enum { TILE = 32, MIN_NUMEL = 4096, PAR_MIN = 32768 };

typedef struct {
    int nd, a, b;               /* a: dst's unit-stride dim, b: src's */
    int64_t shape[JG_MAX_DIMS]; /* merged dims, in elements */
    int64_t ds[JG_MAX_DIMS], ss[JG_MAX_DIMS];
    char *dst;
    const char *src;
    size_t es;
    int64_t tiles_b; /* tiles along b per outer index */
} plan;

/* Copies the tile rows [b0, b1) of b, every tile along a; d and s point at
 * element (a, b) = (0, b0).  Inner loop: dst's contiguous dim. */
#define COPY_TILES(T)                                                                              \
    do {                                                                                           \
        T *dp = (T *)d;                                                                            \
        const T *sp = (const T *)s;                                                                \
        for (int64_t a0 = 0; a0 < na; a0 += TILE) {                                                \
            int64_t a1 = a0 + TILE < na ? a0 + TILE : na;                                          \
            for (int64_t j = 0; j < b1 - b0; j++) {                                                \
                T *dr = dp + j * dsb;                                                              \
                const T *sr = sp + j;                                                              \
                for (int64_t i = a0; i < a1; i++)                                                  \
                    dr[i] = sr[i * ssa];                                                           \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* 4-byte elements: 4x4 blocks moved through registers (bit copies, NaN
 * payloads kept), the edges element by element. */
static void tiles_u32(uint32_t *dp, const uint32_t *sp, int64_t na, int64_t nb, int64_t dsb,
                      int64_t ssa) {
    for (int64_t a0 = 0; a0 < na; a0 += TILE) {
        int64_t a1 = a0 + TILE < na ? a0 + TILE : na, j = 0;
#if defined(__SSE2__)
        for (; j + 4 <= nb; j += 4) {
            int64_t i = a0;
            for (; i + 4 <= a1; i += 4) {
                const uint32_t *s = sp + i * ssa + j;
                __m128 r0 = _mm_loadu_ps((const float *)s);
                __m128 r1 = _mm_loadu_ps((const float *)(s + ssa));
                __m128 r2 = _mm_loadu_ps((const float *)(s + 2 * ssa));
                __m128 r3 = _mm_loadu_ps((const float *)(s + 3 * ssa));
                _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
                uint32_t *d = dp + j * dsb + i;
                _mm_storeu_ps((float *)d, r0);
                _mm_storeu_ps((float *)(d + dsb), r1);
                _mm_storeu_ps((float *)(d + 2 * dsb), r2);
                _mm_storeu_ps((float *)(d + 3 * dsb), r3);
            }
            for (; i < a1; i++)
                for (int m = 0; m < 4; m++)
                    dp[(j + m) * dsb + i] = sp[i * ssa + j + m];
        }
#endif
        for (; j < nb; j++)
            for (int64_t i = a0; i < a1; i++)
                dp[j * dsb + i] = sp[i * ssa + j];
    }
}

static void copy_units(void *vp, int64_t lo, int64_t hi) {
    const plan *p = vp;
    int64_t na = p->shape[p->a], nb = p->shape[p->b];
    int64_t dsb = p->ds[p->b], ssa = p->ss[p->a];
    for (int64_t u = lo; u < hi; u++) {
        int64_t o = u / p->tiles_b, b0 = (u % p->tiles_b) * TILE;
        int64_t b1 = b0 + TILE < nb ? b0 + TILE : nb;
        int64_t doff = b0 * dsb, soff = b0;
        for (int d = p->nd - 1; d >= 0; d--) { /* the outer index o */
            if (d == p->a || d == p->b)
                continue;
            int64_t i = o % p->shape[d];
            o /= p->shape[d];
            doff += i * p->ds[d];
            soff += i * p->ss[d];
        }
        char *d = p->dst + doff * (int64_t)p->es;
        const char *s = p->src + soff * (int64_t)p->es;
        if (p->es == 1)
            COPY_TILES(uint8_t);
        else if (p->es == 2)
            COPY_TILES(uint16_t);
        else if (p->es == 4)
            tiles_u32((uint32_t *)d, (const uint32_t *)s, na, b1 - b0, dsb, ssa);
        else
            COPY_TILES(uint64_t);
    }
}

bool jg_copy_blocked(jg_tensor *dst, const jg_tensor *src) {
    if (dst->dtype != src->dtype || dst->ndim != src->ndim || dst->numel < MIN_NUMEL ||
        dst->storage == src->storage)
        return false;
    plan p = {.es = jg_dtype_size(dst->dtype), .a = -1, .b = -1};
    for (int d = 0; d < dst->ndim; d++) {
        if (dst->shape[d] != src->shape[d])
            return false; /* a broadcast: the iterator's job */
        if (dst->shape[d] == 1)
            continue;
        int n = p.nd;
        if (n > 0 && p.ds[n - 1] == dst->stride[d] * dst->shape[d] &&
            p.ss[n - 1] == src->stride[d] * dst->shape[d]) {
            p.shape[n - 1] *= dst->shape[d]; /* contiguous for both: one dim */
            p.ds[n - 1] = dst->stride[d];
            p.ss[n - 1] = src->stride[d];
            continue;
        }
        p.shape[n] = dst->shape[d];
        p.ds[n] = dst->stride[d];
        p.ss[n] = src->stride[d];
        p.nd++;
    }
    for (int d = 0; d < p.nd; d++) {
        if (p.ds[d] == 1 && p.a < 0)
            p.a = d;
        if (p.ss[d] == 1 && p.b < 0)
            p.b = d;
    }
    if (p.a < 0 || p.b < 0 || p.a == p.b || p.shape[p.a] < 8 || p.shape[p.b] < 8)
        return false;
    p.dst = jg_tensor_ptr(dst);
    p.src = jg_tensor_ptr(src);
    p.tiles_b = (p.shape[p.b] + TILE - 1) / TILE;
    int64_t units = dst->numel / (p.shape[p.a] * p.shape[p.b]) * p.tiles_b;
    int64_t per = TILE * p.shape[p.a];
    if (dst->numel < PAR_MIN)
        copy_units(&p, 0, units);
    else
        jg_parallel_for(units, per >= PAR_MIN ? 1 : PAR_MIN / per, copy_units, &p);
    return true;
}
