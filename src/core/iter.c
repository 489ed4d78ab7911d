/* Strided iteration and the generic dtype-converting copy. */
#include "core/iter.h"

#include "core/copy.h"
#include "core/parallel.h"

#include <stdlib.h>
#include <string.h>

/* An iteration after jg_iter_run merged its dims: nd dims of shp, inner the
 * last; each chunk [lo, hi) of the flat element index runs its part rows. */
typedef struct {
    int nd, nops;
    const int64_t *shp;
    int64_t (*st)[JG_MAX_DIMS];
    char *const *ptrs;
    jg_inner_fn fn;
    void *ctx;
} iter_split;

static void iter_chunk(void *vc, int64_t lo, int64_t hi) {
    const iter_split *c = vc;
    int nd = c->nd, last = nd - 1;
    int64_t len = c->shp[last];
    int64_t idx[JG_MAX_DIMS], r = lo / len, col = lo % len;
    char *ptrs[JG_ITER_MAX_OPS];
    int64_t inner[JG_ITER_MAX_OPS];
    for (int d = last - 1; d >= 0; d--) {
        idx[d] = r % c->shp[d];
        r /= c->shp[d];
    }
    for (int k = 0; k < c->nops; k++) {
        inner[k] = c->st[k][last];
        ptrs[k] = c->ptrs[k] + col * inner[k];
        for (int d = 0; d < last; d++)
            ptrs[k] += idx[d] * c->st[k][d];
    }
    for (int64_t pos = lo; pos < hi;) {
        int64_t n = len - col < hi - pos ? len - col : hi - pos;
        char *p[JG_ITER_MAX_OPS];
        for (int k = 0; k < c->nops; k++)
            p[k] = ptrs[k];
        c->fn(c->ctx, n, p, inner);
        pos += n;
        if (pos >= hi)
            break;
        /* next row: back to column 0, odometer over the outer dims */
        for (int k = 0; k < c->nops; k++)
            ptrs[k] -= col * inner[k];
        col = 0;
        for (int d = last - 1; d >= 0; d--) {
            idx[d]++;
            for (int k = 0; k < c->nops; k++)
                ptrs[k] += c->st[k][d];
            if (idx[d] < c->shp[d])
                break;
            for (int k = 0; k < c->nops; k++)
                ptrs[k] -= c->st[k][d] * c->shp[d];
            idx[d] = 0;
        }
    }
}

/* Bytes an operand may touch: [lo, hi), elements taken as 8 bytes (the
 * largest dtype). */
static void iter_span(const char *p, int nd, const int64_t *shp, const int64_t *st, uintptr_t *lo,
                      uintptr_t *hi) {
    intptr_t a = 0, b = 0;
    for (int d = 0; d < nd; d++) {
        intptr_t e = (intptr_t)((shp[d] - 1) * st[d]);
        if (e < 0)
            a += e;
        else
            b += e;
    }
    *lo = (uintptr_t)p + (uintptr_t)a;
    *hi = (uintptr_t)p + (uintptr_t)b + 8;
}

/* Chunks may run at once only if no two elements of the output share an
 * address (a reduction's output, stride 0, does not qualify) and every
 * operand is exactly the output or shares no byte with it. */
static bool iter_splittable(int nd, int nops, const int64_t *shp, int64_t st[][JG_MAX_DIMS],
                            char *const *ptrs) {
    int64_t as[JG_MAX_DIMS];
    int order[JG_MAX_DIMS];
    for (int d = 0; d < nd; d++) {
        as[d] = st[0][d] < 0 ? -st[0][d] : st[0][d];
        int j = d;
        for (; j > 0 && as[order[j - 1]] > as[d]; j--)
            order[j] = order[j - 1];
        order[j] = d;
    }
    int64_t extent = 0; /* span of the dims with smaller strides, exclusive */
    for (int j = 0; j < nd; j++) {
        int d = order[j];
        if (as[d] <= extent)
            return false;
        extent += as[d] * (shp[d] - 1);
    }
    uintptr_t olo, ohi;
    iter_span(ptrs[0], nd, shp, st[0], &olo, &ohi);
    for (int k = 1; k < nops; k++) {
        bool same = ptrs[k] == ptrs[0];
        for (int d = 0; d < nd && same; d++)
            same = st[k][d] == st[0][d];
        if (same)
            continue;
        uintptr_t lo, hi;
        iter_span(ptrs[k], nd, shp, st[k], &lo, &hi);
        if (lo < ohi && olo < hi)
            return false;
    }
    return true;
}

void jg_iter_run(int ndim, const int64_t *shape, int nops, char *const *base,
                 int64_t strides[][JG_MAX_DIMS], jg_inner_fn fn, void *ctx) {
    int64_t shp[JG_MAX_DIMS];
    int64_t st[JG_ITER_MAX_OPS][JG_MAX_DIMS];
    int nd = 0;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == 0)
            return;
        if (shape[d] == 1)
            continue; /* size-1 dims never move the pointers */
        bool merge = nd > 0;
        for (int k = 0; k < nops && merge; k++)
            merge = st[k][nd - 1] == strides[k][d] * shape[d];
        if (merge) {
            shp[nd - 1] *= shape[d];
            for (int k = 0; k < nops; k++)
                st[k][nd - 1] = strides[k][d];
        } else {
            shp[nd] = shape[d];
            for (int k = 0; k < nops; k++)
                st[k][nd] = strides[k][d];
            nd++;
        }
    }
    char *ptrs[JG_ITER_MAX_OPS];
    int64_t inner[JG_ITER_MAX_OPS];
    for (int k = 0; k < nops; k++) {
        ptrs[k] = base[k];
        inner[k] = nd ? st[k][nd - 1] : 0;
    }
    int64_t rows = 1;
    for (int d = 0; d < nd - 1; d++)
        rows *= shp[d];
    if (nd >= 1 && jg_parallel_worth(rows * shp[nd - 1]) &&
        iter_splittable(nd, nops, shp, st, ptrs)) {
        iter_split c = {nd, nops, shp, st, ptrs, fn, ctx};
        jg_parallel_for(rows * shp[nd - 1], JG_PARALLEL_GRAIN, iter_chunk, &c);
        return;
    }
    if (nd <= 1) {
        fn(ctx, nd ? shp[0] : 1, ptrs, inner);
        return;
    }
    /* Each row's pointers are computed afresh from the odometer's indices:
     * copying pointers the odometer had just stepped in memory (a memcpy
     * call per row, as gcc compiled that loop, or wide loads of narrow
     * stores) cost the GPT step more than its bias adds' arithmetic. */
    int64_t idx[JG_MAX_DIMS] = {0};
    for (int64_t r = 0; r < rows; r++) {
        char *p[JG_ITER_MAX_OPS];
        for (int k = 0; k < nops; k++) {
            char *q = ptrs[k];
            for (int d = 0; d < nd - 1; d++)
                q += idx[d] * st[k][d];
            p[k] = q;
        }
        fn(ctx, shp[nd - 1], p, inner);
        for (int d = nd - 2; d >= 0 && ++idx[d] == shp[d]; d--)
            idx[d] = 0;
    }
}

void jg_broadcast_strides(const jg_tensor *t, int out_ndim, const int64_t *out_shape,
                          int64_t *strides_out) {
    int64_t es = (int64_t)jg_dtype_size(t->dtype);
    int lead = out_ndim - t->ndim;
    for (int d = 0; d < out_ndim; d++) {
        int sd = d - lead;
        if (sd < 0 || t->shape[sd] == 1 || out_shape[d] == 1)
            strides_out[d] = 0;
        else
            strides_out[d] = t->stride[sd] * es;
    }
}

typedef struct {
    jg_dtype dst, src;
} copy_ctx;

#define COPY_LOOP(TD, TS)                                                                          \
    for (int64_t i = 0; i < n; i++)                                                                \
        *(TD *)(p[0] + i * s[0]) = (TD) * (const TS *)(p[1] + i * s[1]);

static void copy_inner(void *vctx, int64_t n, char **p, const int64_t *s) {
    const copy_ctx *c = vctx;
    if (c->dst == c->src) {
        size_t es = jg_dtype_size(c->dst);
        if (s[0] == (int64_t)es && s[1] == (int64_t)es) {
            if (p[0] != p[1]) /* (a tensor copied onto itself: memcpy forbids it) */
                memcpy(p[0], p[1], (size_t)n * es);
            return;
        }
        if (es == 1) {
            COPY_LOOP(uint8_t, uint8_t)
        } else if (es == 4) {
            COPY_LOOP(uint32_t, uint32_t)
        } else {
            COPY_LOOP(uint64_t, uint64_t)
        }
        return;
    }
    /* C's conversions; to bool that is x != 0 (NaN is true), as in PyTorch */
#define COPY_FROM(TD)                                                                              \
    switch (c->src) {                                                                              \
    case JG_F32:                                                                                   \
        COPY_LOOP(TD, float) break;                                                                \
    case JG_F64:                                                                                   \
        COPY_LOOP(TD, double) break;                                                               \
    case JG_I64:                                                                                   \
        COPY_LOOP(TD, int64_t) break;                                                              \
    case JG_BOOL:                                                                                  \
        COPY_LOOP(TD, bool) break;                                                                 \
    case JG_I32:                                                                                   \
        COPY_LOOP(TD, int32_t) break;                                                              \
    }
    switch (c->dst) {
    case JG_F32:
        COPY_FROM(float) break;
    case JG_F64:
        COPY_FROM(double) break;
    case JG_I64:
        COPY_FROM(int64_t) break;
    case JG_BOOL:
        COPY_FROM(bool) break;
    case JG_I32:
        COPY_FROM(int32_t) break;
    }
#undef COPY_FROM
}

void jg_copy_data(jg_tensor *dst, const jg_tensor *src) {
    if (jg_copy_blocked(dst, src))
        return;
    int64_t st[2][JG_MAX_DIMS];
    jg_broadcast_strides(dst, dst->ndim, dst->shape, st[0]);
    jg_broadcast_strides(src, dst->ndim, dst->shape, st[1]);
    char *base[2] = {jg_tensor_ptr(dst), jg_tensor_ptr(src)};
    copy_ctx c = {dst->dtype, src->dtype};
    jg_iter_run(dst->ndim, dst->shape, 2, base, st, copy_inner, &c);
}
