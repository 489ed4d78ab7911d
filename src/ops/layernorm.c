/* layer_norm: normalization of each row (x's last n_norm dims) as PyTorch's
 * native_layer_norm.  Two op-table rows: LAYER_NORM (y and each row's mean
 * and rstd) and LAYER_NORM_BACKWARD (the input's gradient and the weight's
 * and bias's column sums, one pass over the rows).  LAYER_NORM's VJP uses
 * the backward row when no graph is being made (the usual backward, eager
 * or compiled); with grad mode on (create_graph) or when the statistics
 * themselves have a gradient (the backward of such a graph) it is written
 * with library ops, so double backward, tracing and both backends follow
 * from theirs.  The backward row is then never differentiated. */
#include "core/iter.h"
#include "core/parallel.h"
#include "ops/decls.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* attrs of both rows: i[0] n_norm, i[1] / i[2] whether weight / bias apply
 * (an absent one's slot holds x and gets no gradient), s eps */

/* rows (outer) and row length (inner) of x's layout for n_norm trailing dims */
static void ln_split(const jg_meta *m, int64_t n_norm, int64_t *rows, int64_t *len) {
    *rows = *len = 1;
    for (int d = 0; d < m->ndim; d++) {
        if (d < m->ndim - n_norm)
            *rows *= m->shape[d];
        else
            *len *= m->shape[d];
    }
}

static bool normalized_shape_of(const jg_meta *x, const jg_meta *v, int64_t n_norm) {
    if (v->ndim != n_norm)
        return false;
    for (int d = 0; d < n_norm; d++)
        if (v->shape[d] != x->shape[x->ndim - n_norm + d])
            return false;
    return true;
}

int jg_infer_layer_norm(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    int64_t n_norm = a->i[0];
    if (n_norm < 1 || n_norm > in[0].ndim)
        return jg_errorf("layer_norm: normalized_shape must have 1 to %d dims (the input's last), "
                         "got %lld",
                         in[0].ndim, (long long)n_norm);
    for (int k = 1; k < 3; k++)
        if (a->i[k] && !normalized_shape_of(&in[0], &in[k], n_norm))
            return jg_errorf("layer_norm: %s must have the normalized shape (the input's last %lld "
                             "dims)",
                             k == 1 ? "weight" : "bias", (long long)n_norm);
    int64_t rows, len;
    ln_split(&in[0], n_norm, &rows, &len);
    out[0] = in[0];
    out[1] = (jg_meta){.dtype = in[0].dtype, .ndim = 2, .shape = {2, rows}};
    return 0;
}

int jg_infer_layer_norm_backward(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    int64_t rows, len;
    ln_split(&in[1], a->i[0], &rows, &len);
    if (in[0].ndim != in[1].ndim ||
        memcmp(in[0].shape, in[1].shape, (size_t)in[0].ndim * sizeof in[0].shape[0]) ||
        (a->i[1] && !normalized_shape_of(&in[1], &in[2], a->i[0])) || in[3].ndim != 2 ||
        in[3].shape[0] != 2 || in[3].shape[1] != rows)
        return jg_errorf("layer_norm_backward: operands of mismatched shapes");
    out[0] = in[1];
    out[1] = (jg_meta){.dtype = in[1].dtype, .ndim = 2, .shape = {2, len}};
    return 0;
}

/* t's data densely laid out: t's own, or a copy in *tmp (released by the caller) */
static const char *dense_data(jg_tensor *t, jg_tensor **tmp) {
    *tmp = NULL;
    if (jg_dense(t))
        return jg_tensor_ptr(t);
    if (!(*tmp = jg_tensor_alloc(t->dtype, t->ndim, t->shape)))
        return NULL;
    jg_copy_data(*tmp, t);
    return jg_tensor_ptr(*tmp);
}

/* Row sums in double in one fixed order: element j goes to lane j % 8 (so
 * the lanes are independent chains the compiler may vectorize), and the
 * lanes are added pairwise at the end. */
#define LANES 8

/* As softmax's passes (ops/softmax.c): the dynamic cost model and an AVX2
 * clone picked at run time; no FMA is enabled, so both clones compute the
 * same bits. */
#define LN_VECTORIZE                                                                               \
    __attribute__((optimize("tree-vectorize", "vect-cost-model=dynamic"),                          \
                   target_clones("avx512f", "avx2", "default")))
static inline double lanes_total(const double *acc) {
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/* Rows are taken LN_ROWS at a time: each row's sums keep the order of one
 * row (lanes j % LANES, added pairwise), but the rows' chains of adds are
 * independent, so their latencies overlap (a lone row of 128 waits on its
 * adds: 4x slower).  Leftover rows go one at a time, in the same order. */
#define LN_ROWS 4

/* mean and rstd = 1 / sqrt(var + eps) of R rows, var the biased variance
 * of the centred values (two passes, both in double); y = (x - mean) * rstd
 * (* w + b) in T */
#define LN_FWD_BLOCK(T, R)                                                                         \
    do {                                                                                           \
        double acc[R][LANES] = {{0}}, mean[R], rstd[R];                                            \
        int64_t j = 0;                                                                             \
        for (; j + LANES <= len; j += LANES)                                                       \
            _Pragma("GCC unroll 8") for (int i = 0; i < (R); i++) for (int k = 0; k < LANES; k++)  \
                acc[i][k] += (double)p[i * len + j + k];                                           \
        for (; j < len; j++)                                                                       \
            for (int i = 0; i < (R); i++)                                                          \
                acc[i][j % LANES] += (double)p[i * len + j];                                       \
        for (int i = 0; i < (R); i++)                                                              \
            mean[i] = lanes_total(acc[i]) / (double)len;                                           \
        memset(acc, 0, sizeof acc);                                                                \
        for (j = 0; j + LANES <= len; j += LANES)                                                  \
            _Pragma("GCC unroll 8") for (int i = 0; i < (R); i++) for (int k = 0; k < LANES;       \
                                                                       k++) {                      \
                double c = (double)p[i * len + j + k] - mean[i];                                   \
                acc[i][k] += c * c;                                                                \
            }                                                                                      \
        for (; j < len; j++)                                                                       \
            for (int i = 0; i < (R); i++) {                                                        \
                double c = (double)p[i * len + j] - mean[i];                                       \
                acc[i][j % LANES] += c * c;                                                        \
            }                                                                                      \
        for (int i = 0; i < (R); i++)                                                              \
            rstd[i] = 1.0 / sqrt(lanes_total(acc[i]) / (double)len + eps);                         \
        for (int i = 0; i < (R); i++) {                                                            \
            const T *pi = p + i * len;                                                             \
            T *qi = q + i * len, m = (T)mean[i], s = (T)rstd[i];                                   \
            if (w && b)                                                                            \
                for (j = 0; j < len; j++)                                                          \
                    qi[j] = (pi[j] - m) * s * w[j] + b[j];                                         \
            else if (w)                                                                            \
                for (j = 0; j < len; j++)                                                          \
                    qi[j] = (pi[j] - m) * s * w[j];                                                \
            else if (b)                                                                            \
                for (j = 0; j < len; j++)                                                          \
                    qi[j] = (pi[j] - m) * s + b[j];                                                \
            else                                                                                   \
                for (j = 0; j < len; j++)                                                          \
                    qi[j] = (pi[j] - m) * s;                                                       \
            mean_out[r + i] = m;                                                                   \
            rstd_out[r + i] = s;                                                                   \
        }                                                                                          \
    } while (0)

#define LN_FWD(T)                                                                                  \
    static LN_VECTORIZE void ln_fwd_##T(const T *x, T *y, const T *w, const T *b, int64_t rows,    \
                                        int64_t len, double eps, T *mean_out, T *rstd_out) {       \
        int64_t r = 0;                                                                             \
        for (; r + LN_ROWS <= rows; r += LN_ROWS) {                                                \
            const T *p = x + r * len;                                                              \
            T *q = y + r * len;                                                                    \
            LN_FWD_BLOCK(T, LN_ROWS);                                                              \
        }                                                                                          \
        for (; r < rows; r++) {                                                                    \
            const T *p = x + r * len;                                                              \
            T *q = y + r * len;                                                                    \
            LN_FWD_BLOCK(T, 1);                                                                    \
        }                                                                                          \
    }
LN_FWD(float)
LN_FWD(double)

/* Rows are split into chunks of about JG_PARALLEL_GRAIN elements (whole
 * rows; the split depends on the shape only, and rows are independent, so
 * any thread count gives the same bits). */
static int64_t rows_per_chunk(int64_t len) {
    return len >= JG_PARALLEL_GRAIN ? 1 : JG_PARALLEL_GRAIN / (len ? len : 1);
}

typedef struct {
    const char *x, *w, *b;
    char *y, *st;
    int64_t rows, len;
    double eps;
    bool f32;
} ln_fwd_ctx;

static void ln_fwd_rows(void *vc, int64_t lo, int64_t hi) {
    const ln_fwd_ctx *c = vc;
    int64_t n = hi - lo, off = lo * c->len;
    if (c->f32) {
        float *st = (float *)c->st;
        ln_fwd_float((const float *)c->x + off, (float *)c->y + off, (const float *)c->w,
                     (const float *)c->b, n, c->len, c->eps, st + lo, st + c->rows + lo);
    } else {
        double *st = (double *)c->st;
        ln_fwd_double((const double *)c->x + off, (double *)c->y + off, (const double *)c->w,
                      (const double *)c->b, n, c->len, c->eps, st + lo, st + c->rows + lo);
    }
}

int jg_k_layer_norm(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    int64_t rows, len;
    jg_meta m;
    jg_meta_of(in[0], &m);
    ln_split(&m, a->i[0], &rows, &len);
    if (!rows) /* (rows of no values get NaN statistics, as PyTorch's) */
        return 0;
    jg_tensor *tmp[3];
    const char *x = dense_data(in[0], &tmp[0]);
    const char *w = a->i[1] ? dense_data(in[1], &tmp[1]) : (tmp[1] = NULL, "");
    const char *b = a->i[2] ? dense_data(in[2], &tmp[2]) : (tmp[2] = NULL, "");
    int rc = 0;
    if (!x || !w || !b) {
        rc = jg_errorf("out of memory in layer_norm");
    } else {
        ln_fwd_ctx c = {x,
                        a->i[1] ? w : NULL,
                        a->i[2] ? b : NULL,
                        jg_tensor_ptr(out[0]),
                        jg_tensor_ptr(out[1]),
                        rows,
                        len,
                        a->s,
                        out[0]->dtype == JG_F32};
        jg_parallel_for(rows, rows_per_chunk(len), ln_fwd_rows, &c);
    }
    for (int k = 0; k < 3; k++)
        jg_release(tmp[k]);
    return rc;
}

/* The backward's block of R rows: each row's sums in its lane order (as the
 * forward's), the rows' chains independent; the column sums dw, db get the
 * R rows' terms one row after the other (the order of a row-by-row pass),
 * held in registers over the block (one load and store per R rows). */
#define LN_BWD_BLOCK(T, R)                                                                         \
    do {                                                                                           \
        double m[R], s[R], a1[R][LANES] = {{0}}, a2[R][LANES] = {{0}}, c1[R], c2[R];               \
        for (int i = 0; i < (R); i++) {                                                            \
            m[i] = (double)mean[r + i];                                                            \
            s[i] = (double)rstd[r + i];                                                            \
        }                                                                                          \
        int64_t j = 0;                                                                             \
        for (; j + LANES <= len; j += LANES) {                                                     \
            double cw[LANES], cb[LANES];                                                           \
            for (int k = 0; k < LANES; k++) {                                                      \
                cw[k] = dw[j + k];                                                                 \
                cb[k] = db[j + k];                                                                 \
            }                                                                                      \
            _Pragma("GCC unroll 8") for (int i = 0; i < (R); i++) for (int k = 0; k < LANES;       \
                                                                       k++) {                      \
                double gv = (double)gp[i * len + j + k];                                           \
                double xh = ((double)xp[i * len + j + k] - m[i]) * s[i];                           \
                double gw = gv * wd[j + k];                                                        \
                a1[i][k] += gw;                                                                    \
                a2[i][k] += gw * xh;                                                               \
                cw[k] += gv * xh;                                                                  \
                cb[k] += gv;                                                                       \
            }                                                                                      \
            for (int k = 0; k < LANES; k++) {                                                      \
                dw[j + k] = cw[k];                                                                 \
                db[j + k] = cb[k];                                                                 \
            }                                                                                      \
        }                                                                                          \
        for (; j < len; j++)                                                                       \
            for (int i = 0; i < (R); i++) {                                                        \
                double gv = (double)gp[i * len + j], xh = ((double)xp[i * len + j] - m[i]) * s[i]; \
                double gw = gv * wd[j];                                                            \
                a1[i][j % LANES] += gw;                                                            \
                a2[i][j % LANES] += gw * xh;                                                       \
                dw[j] += gv * xh;                                                                  \
                db[j] += gv;                                                                       \
            }                                                                                      \
        for (int i = 0; i < (R); i++) {                                                            \
            c1[i] = lanes_total(a1[i]) / (double)len;                                              \
            c2[i] = lanes_total(a2[i]) / (double)len;                                              \
        }                                                                                          \
        for (int i = 0; i < (R); i++) {                                                            \
            const T *gi = gp + i * len, *xi = xp + i * len;                                        \
            T *di = dp + i * len;                                                                  \
            for (j = 0; j < len; j++) {                                                            \
                double gw = (double)gi[j] * wd[j];                                                 \
                double xh = ((double)xi[j] - m[i]) * s[i];                                         \
                di[j] = (T)(s[i] * (gw - c1[i] - xh * c2[i]));                                     \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* With xhat = (x - mean) * rstd and gw = g * w over a row of n values:
 * dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)) (row sums in double,
 * as the forward's, LN_ROWS rows at a time), and over the rows dw =
 * sum(g * xhat), db = sum(g) (column sums in double, in row order).  wd:
 * w in double (cols + 2 len), converted once. */
#define LN_BWD(T)                                                                                  \
    static LN_VECTORIZE void ln_bwd_##T(const T *g, const T *x, const T *w, const T *mean,         \
                                        const T *rstd, int64_t rows, int64_t len, T *dx,           \
                                        double *cols, double *wd) {                                \
        double *dw = cols, *db = cols + len;                                                       \
        for (int64_t j = 0; j < len; j++)                                                          \
            wd[j] = (double)w[j];                                                                  \
        int64_t r = 0;                                                                             \
        for (; r + LN_ROWS <= rows; r += LN_ROWS) {                                                \
            const T *gp = g + r * len, *xp = x + r * len;                                          \
            T *dp = dx + r * len;                                                                  \
            LN_BWD_BLOCK(T, LN_ROWS);                                                              \
        }                                                                                          \
        for (; r < rows; r++) {                                                                    \
            const T *gp = g + r * len, *xp = x + r * len;                                          \
            T *dp = dx + r * len;                                                                  \
            LN_BWD_BLOCK(T, 1);                                                                    \
        }                                                                                          \
    }
LN_BWD(float)
LN_BWD(double)

typedef struct {
    const char *g, *x, *w, *st;
    char *dx;
    double *cols; /* per chunk: 2 * len column partials */
    double *wd;   /* per chunk: len, the weight in double */
    int64_t rows, len, grain;
    bool f32;
} ln_bwd_ctx;

static void ln_bwd_rows(void *vc, int64_t lo, int64_t hi) {
    const ln_bwd_ctx *c = vc;
    int64_t n = hi - lo, off = lo * c->len;
    double *cols = c->cols + (lo / c->grain) * 2 * c->len, *wd = c->wd + (lo / c->grain) * c->len;
    if (c->f32) {
        const float *st = (const float *)c->st;
        ln_bwd_float((const float *)c->g + off, (const float *)c->x + off, (const float *)c->w,
                     st + lo, st + c->rows + lo, n, c->len, (float *)c->dx + off, cols, wd);
    } else {
        const double *st = (const double *)c->st;
        ln_bwd_double((const double *)c->g + off, (const double *)c->x + off, (const double *)c->w,
                      st + lo, st + c->rows + lo, n, c->len, (double *)c->dx + off, cols, wd);
    }
}

/* Chunks of rows as the forward's, each with its own column partials,
 * which are then added in chunk order (the same bits for any thread
 * count). */
int jg_k_layer_norm_backward(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    int64_t rows = in[3]->shape[1], len = out[1]->shape[1];
    int64_t grain = rows_per_chunk(len), chunks = jg_parallel_chunks(rows, grain);
    size_t es = jg_dtype_size(out[0]->dtype);
    jg_tensor *tmp[4] = {NULL, NULL, NULL, NULL};
    /* the column partials, then (without a weight) ones to multiply by: the
     * loops stay free of branches, and g * 1 is g exactly */
    double *cols = calloc((size_t)((chunks ? chunks : 1) * 2 * len + 1), sizeof *cols);
    double *wd = malloc((size_t)((chunks ? chunks : 1) * len + 1) * sizeof *wd);
    char *ones = a->i[1] ? NULL : malloc((size_t)(len + 1) * es);
    const char *g = dense_data(in[0], &tmp[0]);
    const char *x = dense_data(in[1], &tmp[1]);
    const char *w = a->i[1] ? dense_data(in[2], &tmp[2]) : ones;
    const char *st = dense_data(in[3], &tmp[3]);
    int rc = 0;
    if (!cols || !wd || !g || !x || !w || !st) {
        rc = jg_errorf("out of memory in layer_norm_backward");
    } else {
        bool f32 = out[0]->dtype == JG_F32;
        for (int64_t j = 0; ones && j < len; j++)
            if (f32)
                ((float *)ones)[j] = 1.0f;
            else
                ((double *)ones)[j] = 1.0;
        ln_bwd_ctx c = {g, x, w, st, jg_tensor_ptr(out[0]), cols, wd, rows, len, grain, f32};
        jg_parallel_for(rows, grain, ln_bwd_rows, &c);
        for (int64_t k = 1; k < chunks; k++)
            for (int64_t j = 0; j < 2 * len; j++)
                cols[j] += cols[k * 2 * len + j];
        for (int64_t j = 0; j < 2 * len; j++)
            if (f32)
                ((float *)jg_tensor_ptr(out[1]))[j] = (float)cols[j];
            else
                ((double *)jg_tensor_ptr(out[1]))[j] = cols[j];
    }
    free(cols);
    free(wd);
    free(ones);
    for (int k = 0; k < 4; k++)
        jg_release(tmp[k]);
    return rc;
}

/* a [rows]-long row of the statistics viewed as x's outer dims then n_norm ones */
static jg_tensor *per_row(jg_tensor *stats, int k, const jg_meta *m, int64_t n_norm) {
    int64_t shape[JG_MAX_DIMS];
    for (int d = 0; d < m->ndim; d++)
        shape[d] = d < m->ndim - n_norm ? m->shape[d] : 1;
    return jg_reshape(jg_slice(stats, 0, k, k + 1), m->ndim, shape);
}

/* The VJP in library ops: dx as the kernel's formula, plus the gradients
 * that reach the statistics (mean: 1/n per value; rstd: -rstd^2 xhat / n
 * per value), which a backward of a create_graph backward brings. */
static int vjp_composed(VJP_ARGS) {
    const jg_meta *m = &meta[0];
    int nd = m->ndim, n_norm = (int)a->i[0], nr = nd - n_norm;
    int outer[JG_MAX_DIMS], inner[JG_MAX_DIMS];
    for (int d = 0; d < nr; d++)
        outer[d] = d;
    for (int d = nr; d < nd; d++)
        inner[d - nr] = d;
    int64_t rows, len;
    ln_split(m, n_norm, &rows, &len);
    jg_tensor *mean = per_row(out[1], 0, m, n_norm), *rstd = per_row(out[1], 1, m, n_norm);
    jg_tensor *xhat = mean && rstd ? jg_mul(jg_sub(in[0], mean), rstd) : NULL;
    if (!xhat)
        return -1;
    jg_tensor *gx = NULL;
    gin[1] = gin[2] = NULL;
    if (gout[0]) {
        jg_tensor *g = gout[0];
        /* (no outer dims: one row, its own column sums) */
        if (a->i[1] && needs[1] &&
            !(gin[1] = nr ? jg_sum_dims(jg_mul(g, xhat), nr, outer, false) : jg_mul(g, xhat)))
            return -1;
        if (a->i[2] && needs[2] &&
            !(gin[2] = nr ? jg_sum_dims(g, nr, outer, false) : jg_mul_scalar(g, 1.0)))
            return -1;
        if (needs[0]) {
            jg_tensor *gw = a->i[1] ? jg_mul(g, in[1]) : g;
            jg_tensor *t =
                gw ? jg_sub(jg_sub(gw, jg_mean_dims(gw, n_norm, inner, true)),
                            jg_mul(xhat, jg_mean_dims(jg_mul(gw, xhat), n_norm, inner, true)))
                   : NULL;
            if (!(gx = t ? jg_mul(t, rstd) : NULL))
                return -1;
        }
    }
    if (needs[0] && gout[1]) {
        jg_tensor *gmean = per_row(gout[1], 0, m, n_norm);
        jg_tensor *grstd = per_row(gout[1], 1, m, n_norm);
        jg_tensor *e = gmean ? jg_add(jg_mul_scalar(gmean, 1.0 / (double)len),
                                      jg_mul(xhat, jg_mul_scalar(jg_mul(grstd, jg_mul(rstd, rstd)),
                                                                 -1.0 / (double)len)))
                             : NULL;
        if (!(gx = e && gx ? jg_add(gx, e) : e))
            return -1;
    }
    gin[0] = needs[0] ? gx : NULL;
    return 0;
}

int jg_vjp_layer_norm(VJP_ARGS) {
    if (jg_is_grad_enabled() || gout[1] || !gout[0])
        return vjp_composed(a, meta, in, out, gout, needs, gin);
    /* the backward row; its unused outputs cost a column sum each */
    jg_attrs ba = *a;
    jg_tensor *bin[4] = {gout[0], in[0], a->i[1] ? in[1] : in[0], out[1]}, *bout[2];
    if (jg_op_call(JG_OP_LAYER_NORM_BACKWARD, &ba, bin, bout) < 0)
        return -1;
    const jg_meta *m = &meta[0];
    int n_norm = (int)a->i[0];
    const int64_t *nshape = m->shape + m->ndim - n_norm;
    gin[0] = needs[0] ? bout[0] : NULL;
    gin[1] = a->i[1] && needs[1] ? jg_reshape(jg_slice(bout[1], 0, 0, 1), n_norm, nshape) : NULL;
    gin[2] = a->i[2] && needs[2] ? jg_reshape(jg_slice(bout[1], 0, 1, 2), n_norm, nshape) : NULL;
    if ((a->i[1] && needs[1] && !gin[1]) || (a->i[2] && needs[2] && !gin[2]))
        return -1;
    return 0;
}

jg_tensor *jg_layer_norm(jg_tensor *x, int n_norm, jg_tensor *weight, jg_tensor *bias, double eps) {
    if (!x)
        return jg_errorf_null("jg_layer_norm: NULL input");
    int nd = jg_ndim(x);
    if (n_norm < 1 || n_norm > nd)
        return jg_errorf_null("layer_norm: normalized_shape must have 1 to %d dims (the input's "
                              "last), got %d",
                              nd, n_norm);
    if (jg_dtype_of(x) != JG_F32 && jg_dtype_of(x) != JG_F64)
        return jg_errorf_null("\"LayerNormKernelImpl\" not implemented for '%s'",
                              jg_dtype_torch_name(jg_dtype_of(x)));
    jg_tensor *affine[2] = {weight, bias};
    for (int k = 0; k < 2; k++) {
        if (!affine[k])
            continue;
        bool ok = jg_ndim(affine[k]) == n_norm;
        for (int d = 0; ok && d < n_norm; d++)
            ok = jg_shape(affine[k])[d] == jg_shape(x)[nd - n_norm + d];
        if (!ok)
            return jg_errorf_null("layer_norm: %s must have the normalized shape (the input's last "
                                  "%d dims)",
                                  k ? "bias" : "weight", n_norm);
        if (jg_dtype_of(affine[k]) != JG_F32 && jg_dtype_of(affine[k]) != JG_F64)
            return jg_errorf_null("layer_norm: %s must be a floating tensor, got %s",
                                  k ? "bias" : "weight", jg_dtype_name(jg_dtype_of(affine[k])));
    }
    /* weight and bias inside the row, as PyTorch's node */
    jg_attrs at = {.n = 3, .s = eps};
    at.i[0] = n_norm;
    at.i[1] = weight != NULL;
    at.i[2] = bias != NULL;
    jg_tensor *in[3] = {x, weight ? weight : x, bias ? bias : x}, *out[2] = {NULL, NULL};
    jg_scope_push();
    jg_tensor *y = jg_op_call(JG_OP_LAYER_NORM, &at, in, out) < 0 ? NULL : out[0];
    jg_keep(y);
    jg_scope_pop();
    return jg_scope_track(y);
}
