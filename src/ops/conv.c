/* Convolution and pooling over 4-D [N, C, H, W] tensors, float32 and
 * float64 (the public functions in this file turn a 3-D unbatched input
 * into a batch of one).
 *
 * conv2d(x, w[, b]) attrs (CA_* below): stride, padding at the start (top,
 * left), dilation, groups, padding at the end (bottom, right; equal to the
 * start except for padding='same' with an even dilated kernel, where
 * PyTorch pads one more at the end).  The forward runs per image and group:
 * im2col of the image into a [C/g * kh * kw, Ho * Wo] matrix, then one gemm
 * with the group's weight rows; the bias fills the output first and the
 * gemm adds to it (beta = 1), as PyTorch's slow_conv2d does.  Images run on
 * the pool, each with its own column buffer; an image's bits never depend
 * on which thread runs it.
 *
 * Its gradients are rows of their own, so that their VJPs (double
 * backward) are rows too: conv2d_input_grad(g, x, w) = col2im(w^T g) and
 * conv2d_weight_grad(g, x, w) = sum over images of g im2col(x)^T (images in
 * order, one gemm each accumulating into the result).  The three are
 * bilinear, so each one's VJP is the other two.
 *
 * The pools take 3-D input as it is (every dim but the last two is a
 * plane), as PyTorch's kernels do.
 * max_pool2d(x) -> (values, int64 indices into each H * W plane), PyTorch's
 * rule: the first maximum of the window wins, a NaN beats every number;
 * its gradient max_pool2d_backward(g, x, indices) adds g at the indices.
 * avg_pool2d(x) and its gradient avg_pool2d_backward(g, x).  The gradient
 * rows take x (and the conv ones x and w) as operands although only their
 * shapes matter, as PyTorch's backward functions do: their results require
 * grad exactly when PyTorch's do, and x's gradient through them is zeros
 * (pools) or none (conv), as PyTorch's double backward gives. */
#include "core/iter.h"
#include "core/parallel.h"
#include "ops/decls.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* conv attrs (the gradient rows have conv2d's) */
enum { CA_SH, CA_SW, CA_PT, CA_PL, CA_DH, CA_DW, CA_G, CA_PB, CA_PR, CA_N };
/* max_pool2d attrs */
enum { MP_KH, MP_KW, MP_SH, MP_SW, MP_PH, MP_PW, MP_DH, MP_DW, MP_CEIL, MP_N };
/* avg_pool2d attrs (avg_pool2d_backward has the same) */
enum { AP_KH, AP_KW, AP_SH, AP_SW, AP_PH, AP_PW, AP_CEIL, AP_INCL, AP_DIV, AP_N };

/* ------------------------------------------------------------ helpers */

/* t's data in row-major order: t's own, or a contiguous copy in *copy
 * (released by the caller) */
static const char *dense_data(jg_tensor *t, jg_tensor **copy) {
    *copy = NULL;
    if (jg_dense(t))
        return jg_tensor_ptr(t);
    if (!(*copy = jg_tensor_alloc(t->dtype, t->ndim, t->shape)))
        return NULL;
    jg_copy_data(*copy, t);
    return jg_tensor_ptr(*copy);
}

static void gemm(jg_dtype dt, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n,
                 int64_t k, const void *pa, int64_t lda, const void *pb, int64_t ldb, double beta,
                 void *pc, int64_t ldc) {
    if (dt == JG_F32)
        cblas_sgemm(CblasRowMajor, ta, tb, (blasint)m, (blasint)n, (blasint)k, 1.0f,
                    (const float *)pa, (blasint)lda, (const float *)pb, (blasint)ldb, (float)beta,
                    (float *)pc, (blasint)ldc);
    else
        cblas_dgemm(CblasRowMajor, ta, tb, (blasint)m, (blasint)n, (blasint)k, 1.0,
                    (const double *)pa, (blasint)lda, (const double *)pb, (blasint)ldb, beta,
                    (double *)pc, (blasint)ldc);
}

/* Chunks of n units for a loop of `work` multiply-adds in all: one chunk
 * (inline) for small work, else one per thread.  Any chunking gives the same
 * bits here (a unit's result never depends on its chunk); the count only
 * sizes the per-chunk scratch. */
static int64_t unit_grain(int64_t n, int64_t work) {
    int64_t nt = jg_parallel_threads();
    if (n <= 1 || nt <= 1 || jg_parallel_inside() || work < 4 * (int64_t)JG_PARALLEL_GRAIN * 32)
        return n > 0 ? n : 1;
    int64_t nch = nt < n ? nt : n;
    return (n + nch - 1) / nch;
}

/* ------------------------------------------------------------ conv geometry */

typedef struct {
    int64_t N, C, H, W; /* input */
    int64_t O, kh, kw;  /* weight [O, C / g, kh, kw] */
    int64_t Ho, Wo, P;  /* output plane, P = Ho * Wo */
    int64_t sh, sw, pt, pl, dh, dw, g;
    int64_t Cg, Og, K; /* C / g, O / g, Cg * kh * kw */
} conv_geo;

static void geo_fill(conv_geo *q, const jg_attrs *a, const int64_t *x4, int64_t O, int64_t kh,
                     int64_t kw) {
    memset(q, 0, sizeof *q);
    q->N = x4[0], q->C = x4[1], q->H = x4[2], q->W = x4[3];
    q->O = O, q->kh = kh, q->kw = kw;
    q->sh = a->i[CA_SH], q->sw = a->i[CA_SW], q->pt = a->i[CA_PT], q->pl = a->i[CA_PL];
    q->dh = a->i[CA_DH], q->dw = a->i[CA_DW], q->g = a->i[CA_G];
    q->Ho = (q->H + q->pt + a->i[CA_PB] - q->dh * (kh - 1) - 1) / q->sh + 1;
    q->Wo = (q->W + q->pl + a->i[CA_PR] - q->dw * (kw - 1) - 1) / q->sw + 1;
    q->P = q->Ho * q->Wo;
    q->Cg = q->C / q->g, q->Og = O / q->g;
    q->K = q->Cg * kh * kw;
}

/* the attrs' own checks (PyTorch's ConvParams checks) */
static int check_conv_attrs(const jg_attrs *a, int n) {
    if (a->n != n)
        return jg_errorf("conv2d(): bad attributes (n = %d)", a->n);
    if (a->i[CA_SH] <= 0 || a->i[CA_SW] <= 0)
        return jg_errorf("non-positive stride is not supported");
    /* (a negative end padding only crops the output: conv_transpose2d's
     * output_padding of a stride or more) */
    if (a->i[CA_PT] < 0 || a->i[CA_PL] < 0)
        return jg_errorf("negative padding is not supported");
    if (a->i[CA_DH] <= 0 || a->i[CA_DW] <= 0)
        return jg_errorf("non-positive dilation is not supported");
    if (a->i[CA_G] <= 0)
        return jg_errorf("non-positive groups is not supported");
    return 0;
}

/* the C++ type names PyTorch's bias check prints */
static const char *c_type_name(jg_dtype d) {
    switch (d) {
    case JG_F32:
        return "float";
    case JG_F64:
        return "double";
    case JG_I64:
        return "long int";
    case JG_I32:
        return "int";
    default:
        return "bool";
    }
}

static int check_float(jg_dtype d) {
    if (d != JG_F32 && d != JG_F64)
        return jg_errorf("conv2d(): jitgrad computes float32 and float64 convolutions only, got "
                         "'%s'",
                         jg_dtype_torch_name(d));
    return 0;
}

/* conv2d's shape rule: PyTorch's checks in its order, then the output
 * [N, O, Ho, Wo] */
static int infer_conv(const jg_attrs *a, const jg_meta *in, jg_meta *out, bool has_bias) {
    const jg_meta *x = &in[0], *w = &in[1];
    char sx[160], sw[160], sb[160];
    if (check_conv_attrs(a, CA_N) < 0)
        return -1;
    if (x->ndim != 4)
        return jg_errorf("Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input "
                         "of size: %s",
                         (jg_format_shape(sx, sizeof sx, x->ndim, x->shape), sx));
    jg_format_shape(sx, sizeof sx, x->ndim, x->shape);
    jg_format_shape(sw, sizeof sw, w->ndim, w->shape);
    if (w->ndim != 4)
        return jg_errorf("Expected 4-dimensional weight for 4-dimensional input %s, but got "
                         "%d-dimensional weight of size %s instead",
                         sx, w->ndim, sw);
    if (check_float(x->dtype) < 0)
        return -1;
    if (w->dtype != x->dtype)
        return jg_errorf("Input type (torch.%sTensor) and weight type (torch.%sTensor) should be "
                         "the same or input should be a MKLDNN tensor and weight is a dense tensor",
                         jg_dtype_torch_name(x->dtype), jg_dtype_torch_name(w->dtype));
    int64_t g = a->i[CA_G];
    if (w->shape[0] % g != 0)
        return jg_errorf("Given groups=%lld, expected weight to be divisible by %lld at dimension "
                         "0, but got weight of size [%s] instead",
                         (long long)g, (long long)g, sw);
    if (x->shape[1] != w->shape[1] * g)
        return jg_errorf("Given groups=%lld, weight of size %s, expected input%s to have %lld "
                         "channels, but got %lld channels instead",
                         (long long)g, sw, sx, (long long)(w->shape[1] * g),
                         (long long)x->shape[1]);
    if (has_bias) {
        const jg_meta *b = &in[2];
        if (b->ndim != 1 || b->shape[0] != w->shape[0])
            return jg_errorf("Given weight of size %s, expected bias to be 1-dimensional with "
                             "%lld elements, but got bias of size %s instead",
                             sw, (long long)w->shape[0],
                             (jg_format_shape(sb, sizeof sb, b->ndim, b->shape), sb));
        if (b->dtype != x->dtype)
            return jg_errorf("Input type (%s) and bias type (%s) should be the same",
                             c_type_name(x->dtype), c_type_name(b->dtype));
    }
    int64_t ph = x->shape[2] + a->i[CA_PT] + a->i[CA_PB];
    int64_t pw = x->shape[3] + a->i[CA_PL] + a->i[CA_PR];
    int64_t kh = a->i[CA_DH] * (w->shape[2] - 1) + 1, kw = a->i[CA_DW] * (w->shape[3] - 1) + 1;
    if (ph < kh || pw < kw)
        return jg_errorf("Calculated padded input size per channel: (%lld x %lld). Kernel size: "
                         "(%lld x %lld). Kernel size can't be greater than actual input size",
                         (long long)ph, (long long)pw, (long long)kh, (long long)kw);
    conv_geo q;
    geo_fill(&q, a, x->shape, w->shape[0], w->shape[2], w->shape[3]);
    memset(&out[0], 0, sizeof out[0]);
    out[0].dtype = x->dtype;
    out[0].ndim = 4;
    out[0].shape[0] = q.N, out[0].shape[1] = q.O, out[0].shape[2] = q.Ho, out[0].shape[3] = q.Wo;
    return 0;
}

int jg_infer_conv2d(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    return infer_conv(a, in, out, false);
}
int jg_infer_conv2d_bias(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    return infer_conv(a, in, out, true);
}

/* ------------------------------------------------------------ im2col / col2im */

/* col[(c * kh + i) * kw + j][oh * Wo + ow] = x[c][oh * sh - pt + i * dh][ow * sw - pl + j * dw]
 * (0 in the padding), for the Cg channels at x */
#define IM2COL(TY, T)                                                                              \
    static void im2col_##TY(const conv_geo *q, const T *x, T *col) {                               \
        for (int64_t c = 0; c < q->Cg; c++)                                                        \
            for (int64_t i = 0; i < q->kh; i++)                                                    \
                for (int64_t j = 0; j < q->kw; j++) {                                              \
                    T *dst = col + ((c * q->kh + i) * q->kw + j) * q->P;                           \
                    for (int64_t oh = 0; oh < q->Ho; oh++) {                                       \
                        int64_t ih = oh * q->sh - q->pt + i * q->dh;                               \
                        T *d = dst + oh * q->Wo;                                                   \
                        if (ih < 0 || ih >= q->H) {                                                \
                            for (int64_t ow = 0; ow < q->Wo; ow++)                                 \
                                d[ow] = 0;                                                         \
                            continue;                                                              \
                        }                                                                          \
                        const T *s = x + (c * q->H + ih) * q->W;                                   \
                        for (int64_t ow = 0; ow < q->Wo; ow++) {                                   \
                            int64_t iw = ow * q->sw - q->pl + j * q->dw;                           \
                            d[ow] = iw >= 0 && iw < q->W ? s[iw] : (T)0;                           \
                        }                                                                          \
                    }                                                                              \
                }                                                                                  \
    }                                                                                              \
    /* x (Cg channels, zeroed by the caller) += the columns back in place */                       \
    static void col2im_##TY(const conv_geo *q, const T *col, T *x) {                               \
        for (int64_t c = 0; c < q->Cg; c++)                                                        \
            for (int64_t i = 0; i < q->kh; i++)                                                    \
                for (int64_t j = 0; j < q->kw; j++) {                                              \
                    const T *src = col + ((c * q->kh + i) * q->kw + j) * q->P;                     \
                    for (int64_t oh = 0; oh < q->Ho; oh++) {                                       \
                        int64_t ih = oh * q->sh - q->pt + i * q->dh;                               \
                        if (ih < 0 || ih >= q->H)                                                  \
                            continue;                                                              \
                        const T *s = src + oh * q->Wo;                                             \
                        T *d = x + (c * q->H + ih) * q->W;                                         \
                        for (int64_t ow = 0; ow < q->Wo; ow++) {                                   \
                            int64_t iw = ow * q->sw - q->pl + j * q->dw;                           \
                            if (iw >= 0 && iw < q->W)                                              \
                                d[iw] += s[ow];                                                    \
                        }                                                                          \
                    }                                                                              \
                }                                                                                  \
    }
IM2COL(f32, float)
IM2COL(f64, double)

static void im2col(jg_dtype dt, const conv_geo *q, const void *x, void *col) {
    if (dt == JG_F32)
        im2col_f32(q, x, col);
    else
        im2col_f64(q, x, col);
}
static void col2im(jg_dtype dt, const conv_geo *q, const void *col, void *x) {
    if (dt == JG_F32)
        col2im_f32(q, col, x);
    else
        col2im_f64(q, col, x);
}

/* A 1x1 kernel with stride 1 and no padding: the image is its own column
 * matrix. */
static bool cols_are_input(const conv_geo *q) {
    return q->kh == 1 && q->kw == 1 && q->sh == 1 && q->sw == 1 && q->pt == 0 && q->pl == 0 &&
           q->Ho == q->H && q->Wo == q->W;
}

/* ------------------------------------------------------------ conv kernels */

typedef struct {
    conv_geo q;
    jg_dtype dt;
    size_t es;
    const char *x, *w, *b, *g; /* dense operands (g: the output gradient) */
    char *y;                   /* the result */
    char *cols;                /* one K x P buffer per chunk */
    int64_t grain;
} conv_ctx;

static void conv_fwd_chunk(void *arg, int64_t lo, int64_t hi) {
    const conv_ctx *c = arg;
    const conv_geo *q = &c->q;
    size_t es = c->es;
    char *col = c->cols ? c->cols + (size_t)(lo / c->grain) * (size_t)(q->K * q->P) * es : NULL;
    for (int64_t n = lo; n < hi; n++)
        for (int64_t gi = 0; gi < q->g; gi++) {
            const char *xi = c->x + (size_t)((n * q->C + gi * q->Cg) * q->H * q->W) * es;
            char *yo = c->y + (size_t)((n * q->O + gi * q->Og) * q->P) * es;
            const char *src = xi;
            if (col) {
                im2col(c->dt, q, xi, col);
                src = col;
            }
            double beta = 0;
            if (c->b) {
                for (int64_t o = 0; o < q->Og; o++)
                    for (int64_t p = 0; p < q->P; p++) {
                        if (c->dt == JG_F32)
                            ((float *)yo)[o * q->P + p] = ((const float *)c->b)[gi * q->Og + o];
                        else
                            ((double *)yo)[o * q->P + p] = ((const double *)c->b)[gi * q->Og + o];
                    }
                beta = 1;
            }
            gemm(c->dt, CblasNoTrans, CblasNoTrans, q->Og, q->P, q->K,
                 c->w + (size_t)(gi * q->Og * q->K) * es, q->K, src, q->P, beta, yo, q->P);
        }
}

static int kernel_conv(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out, bool has_bias) {
    jg_tensor *x = in[0], *w = in[1], *y = out[0];
    conv_ctx c = {.dt = x->dtype, .es = jg_dtype_size(x->dtype)};
    geo_fill(&c.q, a, x->shape, w->shape[0], w->shape[2], w->shape[3]);
    const conv_geo *q = &c.q;
    if (y->numel == 0)
        return 0;
    jg_tensor *cx = NULL, *cw = NULL, *cb = NULL;
    int rc = -1;
    c.x = dense_data(x, &cx);
    c.w = dense_data(w, &cw);
    c.b = has_bias ? dense_data(in[2], &cb) : NULL;
    c.y = jg_tensor_ptr(y);
    if (!c.x || !c.w || (has_bias && !c.b))
        goto out;
    if (q->K == 0) { /* no input channels: the bias alone */
        for (int64_t i = 0; i < y->numel; i++) {
            int64_t o = i / q->P % q->O;
            if (c.dt == JG_F32)
                ((float *)c.y)[i] = c.b ? ((const float *)c.b)[o] : 0.0f;
            else
                ((double *)c.y)[i] = c.b ? ((const double *)c.b)[o] : 0.0;
        }
        rc = 0;
        goto out;
    }
    jg_blas_single_thread();
    c.grain = unit_grain(q->N, q->N * q->O * q->P * q->K);
    if (!cols_are_input(q)) {
        int64_t nch = jg_parallel_chunks(q->N, c.grain);
        if (!(c.cols = malloc((size_t)(nch * q->K * q->P) * c.es))) {
            jg_errorf("conv2d(): out of memory");
            goto out;
        }
    }
    jg_parallel_for(q->N, c.grain, conv_fwd_chunk, &c);
    free(c.cols);
    rc = 0;
out:
    if (cx)
        jg_release(cx);
    if (cw)
        jg_release(cw);
    if (cb)
        jg_release(cb);
    return rc;
}

int jg_k_conv2d(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    return kernel_conv(a, in, out, false);
}
int jg_k_conv2d_bias(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    return kernel_conv(a, in, out, true);
}

/* The gradient rows' operands: (g, x, w), as PyTorch's convolution_backward
 * (its result then requires grad when any of them does); checks that they
 * fit each other. */
static int check_conv_grad(const char *fn, const jg_attrs *a, const jg_meta *in) {
    const jg_meta *g = &in[0], *x = &in[1], *w = &in[2];
    if (check_conv_attrs(a, CA_N) < 0)
        return -1;
    if (g->ndim != 4 || x->ndim != 4 || w->ndim != 4 || check_float(g->dtype) < 0 ||
        x->dtype != g->dtype || w->dtype != g->dtype || w->shape[0] % a->i[CA_G] != 0 ||
        x->shape[1] != w->shape[1] * a->i[CA_G] || g->shape[0] != x->shape[0] ||
        g->shape[1] != w->shape[0])
        return jg_errorf("%s(): gradient, input and weight do not match", fn);
    conv_geo q;
    geo_fill(&q, a, x->shape, w->shape[0], w->shape[2], w->shape[3]);
    if (q.Ho != g->shape[2] || q.Wo != g->shape[3])
        return jg_errorf("%s(): the gradient's shape does not match the output's", fn);
    return 0;
}

/* conv2d_input_grad(g, x, w) -> x's shape (x's values are not read) */
int jg_infer_conv2d_input_grad(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    if (check_conv_grad("conv2d_input_grad", a, in) < 0)
        return -1;
    out[0] = in[1];
    return 0;
}

static void conv_bwd_input_chunk(void *arg, int64_t lo, int64_t hi) {
    const conv_ctx *c = arg;
    const conv_geo *q = &c->q;
    size_t es = c->es;
    char *col = c->cols + (size_t)(lo / c->grain) * (size_t)(q->K * q->P) * es;
    for (int64_t n = lo; n < hi; n++)
        for (int64_t gi = 0; gi < q->g; gi++) {
            char *xo = c->y + (size_t)((n * q->C + gi * q->Cg) * q->H * q->W) * es;
            const char *gg = c->g + (size_t)((n * q->O + gi * q->Og) * q->P) * es;
            const char *wg = c->w + (size_t)(gi * q->Og * q->K) * es;
            if (cols_are_input(q)) { /* the columns are the image itself */
                gemm(c->dt, CblasTrans, CblasNoTrans, q->K, q->P, q->Og, wg, q->K, gg, q->P, 0, xo,
                     q->P);
                continue;
            }
            gemm(c->dt, CblasTrans, CblasNoTrans, q->K, q->P, q->Og, wg, q->K, gg, q->P, 0, col,
                 q->P);
            memset(xo, 0, (size_t)(q->Cg * q->H * q->W) * es);
            col2im(c->dt, q, col, xo);
        }
}

int jg_k_conv2d_input_grad(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    jg_tensor *g = in[0], *w = in[2], *y = out[0];
    conv_ctx c = {.dt = g->dtype, .es = jg_dtype_size(g->dtype)};
    geo_fill(&c.q, a, y->shape, w->shape[0], w->shape[2], w->shape[3]);
    const conv_geo *q = &c.q;
    if (y->numel == 0)
        return 0;
    if (q->K == 0 || q->P == 0 || q->Og == 0) {
        memset(jg_tensor_ptr(y), 0, (size_t)y->numel * c.es);
        return 0;
    }
    jg_tensor *cg = NULL, *cw = NULL;
    int rc = -1;
    c.g = dense_data(g, &cg);
    c.w = dense_data(w, &cw);
    c.y = jg_tensor_ptr(y);
    if (!c.g || !c.w)
        goto out;
    jg_blas_single_thread();
    c.grain = unit_grain(q->N, q->N * q->O * q->P * q->K);
    int64_t nch = jg_parallel_chunks(q->N, c.grain);
    if (!(c.cols = malloc((size_t)(nch * q->K * q->P) * c.es))) {
        jg_errorf("conv2d_input_grad(): out of memory");
        goto out;
    }
    jg_parallel_for(q->N, c.grain, conv_bwd_input_chunk, &c);
    free(c.cols);
    rc = 0;
out:
    if (cg)
        jg_release(cg);
    if (cw)
        jg_release(cw);
    return rc;
}

/* conv2d_weight_grad(g, x, w) -> w's shape (w's values are not read) */
int jg_infer_conv2d_weight_grad(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    if (check_conv_grad("conv2d_weight_grad", a, in) < 0)
        return -1;
    out[0] = in[2];
    return 0;
}

/* Images in order, each one gemm per group adding into the result (the
 * first one writing it): the same sum for any thread count. */
int jg_k_conv2d_weight_grad(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    jg_tensor *g = in[0], *x = in[1], *y = out[0];
    conv_geo q;
    geo_fill(&q, a, x->shape, g->shape[1], y->shape[2], y->shape[3]);
    jg_dtype dt = x->dtype;
    size_t es = jg_dtype_size(dt);
    if (y->numel == 0)
        return 0;
    if (q.N == 0 || q.P == 0) {
        memset(jg_tensor_ptr(y), 0, (size_t)y->numel * es);
        return 0;
    }
    jg_tensor *cx = NULL, *cg = NULL;
    char *col = NULL;
    int rc = -1;
    const char *xp = dense_data(x, &cx), *gp = dense_data(g, &cg);
    char *yp = jg_tensor_ptr(y);
    if (!xp || !gp)
        goto out;
    if (!cols_are_input(&q) && !(col = malloc((size_t)(q.K * q.P) * es))) {
        jg_errorf("conv2d_weight_grad(): out of memory");
        goto out;
    }
    jg_blas_single_thread();
    for (int64_t n = 0; n < q.N; n++)
        for (int64_t gi = 0; gi < q.g; gi++) {
            const char *xi = xp + (size_t)((n * q.C + gi * q.Cg) * q.H * q.W) * es;
            const char *src = xi;
            if (col) {
                im2col(dt, &q, xi, col);
                src = col;
            }
            gemm(dt, CblasNoTrans, CblasTrans, q.Og, q.K, q.P,
                 gp + (size_t)((n * q.O + gi * q.Og) * q.P) * es, q.P, src, q.P, n ? 1.0 : 0.0,
                 yp + (size_t)(gi * q.Og * q.K) * es, q.K);
        }
    rc = 0;
out:
    free(col);
    if (cx)
        jg_release(cx);
    if (cg)
        jg_release(cg);
    return rc;
}

/* ------------------------------------------------------------ conv VJPs */

/* op(g, x, w) of a gradient row */
static jg_tensor *op3(jg_opcode op, const jg_attrs *a, jg_tensor *g, jg_tensor *x, jg_tensor *w) {
    jg_tensor *in[3] = {g, x, w}, *y;
    return jg_op_call(op, a, in, &y) < 0 ? NULL : y;
}

static int vjp_conv(VJP_ARGS, bool has_bias) {
    (void)out, (void)meta;
    jg_tensor *g = gout[0];
    gin[0] = gin[1] = NULL;
    if (needs[0] && !(gin[0] = op3(JG_OP_CONV2D_INPUT_GRAD, a, g, in[0], in[1])))
        return -1;
    if (needs[1] && !(gin[1] = op3(JG_OP_CONV2D_WEIGHT_GRAD, a, g, in[0], in[1])))
        return -1;
    if (has_bias) {
        gin[2] = NULL;
        if (needs[2]) {
            jg_attrs s = {.n = 3, .i = {0, 2, 3}};
            if (!(gin[2] = jg_op1(JG_OP_SUM, &s, g, NULL)))
                return -1;
        }
    }
    return 0;
}

int jg_vjp_conv2d(VJP_ARGS) {
    return vjp_conv(a, meta, in, out, gout, needs, gin, false);
}
int jg_vjp_conv2d_bias(VJP_ARGS) {
    return vjp_conv(a, meta, in, out, gout, needs, gin, true);
}

/* input_grad(g, x, w) is bilinear in (g, w): d/dg = conv2d(gg, w), d/dw =
 * weight_grad(g, gg, w); x only gave the shape (PyTorch's double backward
 * gives it no gradient either) */
int jg_vjp_conv2d_input_grad(VJP_ARGS) {
    (void)out, (void)meta;
    jg_tensor *gg = gout[0];
    gin[0] = gin[1] = gin[2] = NULL;
    if (needs[0] && !(gin[0] = jg_op1(JG_OP_CONV2D, a, gg, in[2])))
        return -1;
    if (needs[2] && !(gin[2] = op3(JG_OP_CONV2D_WEIGHT_GRAD, a, in[0], gg, in[2])))
        return -1;
    return 0;
}

/* weight_grad(g, x, w): d/dg = conv2d(x, gw), d/dx = input_grad(g, x, gw) */
int jg_vjp_conv2d_weight_grad(VJP_ARGS) {
    (void)out, (void)meta;
    jg_tensor *gw = gout[0];
    gin[0] = gin[1] = gin[2] = NULL;
    if (needs[0] && !(gin[0] = jg_op1(JG_OP_CONV2D, a, in[1], gw)))
        return -1;
    if (needs[1] && !(gin[1] = op3(JG_OP_CONV2D_INPUT_GRAD, a, in[0], in[1], gw)))
        return -1;
    return 0;
}

/* ------------------------------------------------------------ pooling geometry */

/* PyTorch's pooling_output_shape: floor or ceil, and a last window that
 * would start in the end padding dropped */
static int64_t pool_out(int64_t in, int64_t k, int64_t pad, int64_t s, int64_t d, bool ceil_) {
    int64_t num = in + 2 * pad - d * (k - 1) - 1 + (ceil_ ? s - 1 : 0);
    int64_t o = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
    if (ceil_ && (o - 1) * s >= in + pad)
        o--;
    return o;
}

/* PyTorch's pool2d checks, in its order; writes the output plane size */
static int check_pool(const char *fn, const jg_meta *x, int64_t kh, int64_t kw, int64_t sh,
                      int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw, bool ceil_,
                      int64_t *ho, int64_t *wo) {
    char s[160];
    if (x->dtype != JG_F32 && x->dtype != JG_F64)
        return jg_errorf("\"%s\" not implemented for '%s'", fn, jg_dtype_torch_name(x->dtype));
    if (x->ndim != 3 && x->ndim != 4)
        return jg_errorf("%s(): expected a 3-D or 4-D input", fn);
    const int64_t *chw = x->shape + x->ndim - 3;
    if (sh <= 0 || sw <= 0)
        return jg_errorf("stride should not be zero");
    if (ph < 0 || pw < 0)
        return jg_errorf("pad must be non-negative, but got pad: %lld",
                         (long long)(ph < 0 ? ph : pw));
    if (ph > kh / 2 || pw > kw / 2)
        return jg_errorf("pad should be at most half of kernel size, but got pad=%lld and "
                         "kernel_size=%lld",
                         (long long)(ph > kh / 2 ? ph : pw), (long long)(ph > kh / 2 ? kh : kw));
    if (kh <= 0 || kw <= 0)
        return jg_errorf("kernel size should be greater than zero, but got kH: %lld kW: %lld",
                         (long long)kh, (long long)kw);
    if (dh <= 0 || dw <= 0)
        return jg_errorf("dilation should be greater than zero, but got dilationH: %lld "
                         "dilationW: %lld",
                         (long long)dh, (long long)dw);
    if (chw[0] == 0 || chw[1] == 0 || chw[2] == 0)
        return jg_errorf("Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size "
                         "for input, but got:%s",
                         (jg_format_shape(s, sizeof s, x->ndim, x->shape), s));
    *ho = pool_out(chw[1], kh, ph, sh, dh, ceil_);
    *wo = pool_out(chw[2], kw, pw, sw, dw, ceil_);
    if (*ho < 1 || *wo < 1)
        return jg_errorf("Given input size: (%lldx%lldx%lld). Calculated output size: "
                         "(%lldx%lldx%lld). Output size is too small",
                         (long long)chw[0], (long long)chw[1], (long long)chw[2], (long long)chw[0],
                         (long long)*ho, (long long)*wo);
    return 0;
}

static void pool_meta(jg_meta *o, const jg_meta *x, int64_t ho, int64_t wo, jg_dtype dt) {
    *o = *x;
    o->dtype = dt;
    o->shape[x->ndim - 2] = ho, o->shape[x->ndim - 1] = wo;
}

/* the planes of a 3-D or 4-D tensor: every dim but the last two */
static int64_t planes_of(const jg_tensor *t) {
    return t->ndim == 4 ? t->shape[0] * t->shape[1] : t->shape[0];
}

/* ------------------------------------------------------------ max_pool2d */

int jg_infer_max_pool2d(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    const int64_t *i = a->i;
    int64_t ho, wo;
    if (a->n != MP_N)
        return jg_errorf("max_pool2d(): bad attributes (n = %d)", a->n);
    if (check_pool("max_pool2d", &in[0], i[MP_KH], i[MP_KW], i[MP_SH], i[MP_SW], i[MP_PH], i[MP_PW],
                   i[MP_DH], i[MP_DW], i[MP_CEIL] != 0, &ho, &wo) < 0)
        return -1;
    pool_meta(&out[0], &in[0], ho, wo, in[0].dtype);
    pool_meta(&out[1], &in[0], ho, wo, JG_I64);
    return 0;
}

typedef struct {
    const jg_attrs *a;
    int64_t H, W, Ho, Wo;
    const char *x;
    char *y, *idx; /* idx: max_pool2d's indices */
    jg_dtype dt;
} pool_ctx;

/* PyTorch's cpu_max_pool: the window's first valid element starts, a
 * larger one or a NaN replaces it */
#define MAXPOOL(TY, T)                                                                             \
    static void max_pool_##TY(const pool_ctx *c, int64_t plane) {                                  \
        const int64_t *at = c->a->i;                                                               \
        const T *x = (const T *)c->x + plane * c->H * c->W;                                        \
        T *y = (T *)c->y + plane * c->Ho * c->Wo;                                                  \
        int64_t *ix = (int64_t *)c->idx + plane * c->Ho * c->Wo;                                   \
        for (int64_t oh = 0; oh < c->Ho; oh++)                                                     \
            for (int64_t ow = 0; ow < c->Wo; ow++) {                                               \
                int64_t h0 = oh * at[MP_SH] - at[MP_PH], w0 = ow * at[MP_SW] - at[MP_PW];          \
                int64_t h1 = h0 + (at[MP_KH] - 1) * at[MP_DH] + 1;                                 \
                int64_t w1 = w0 + (at[MP_KW] - 1) * at[MP_DW] + 1;                                 \
                h1 = h1 < c->H ? h1 : c->H;                                                        \
                w1 = w1 < c->W ? w1 : c->W;                                                        \
                while (h0 < 0)                                                                     \
                    h0 += at[MP_DH];                                                               \
                while (w0 < 0)                                                                     \
                    w0 += at[MP_DW];                                                               \
                int64_t best = h0 * c->W + w0;                                                     \
                T m = -(T)INFINITY;                                                                \
                for (int64_t h = h0; h < h1; h += at[MP_DH])                                       \
                    for (int64_t w = w0; w < w1; w += at[MP_DW]) {                                 \
                        T v = x[h * c->W + w];                                                     \
                        if (v > m || v != v) {                                                     \
                            m = v;                                                                 \
                            best = h * c->W + w;                                                   \
                        }                                                                          \
                    }                                                                              \
                y[oh * c->Wo + ow] = m;                                                            \
                ix[oh * c->Wo + ow] = best;                                                        \
            }                                                                                      \
    }
MAXPOOL(f32, float)
MAXPOOL(f64, double)

static void max_pool_chunk(void *arg, int64_t lo, int64_t hi) {
    const pool_ctx *c = arg;
    for (int64_t p = lo; p < hi; p++) {
        if (c->dt == JG_F32)
            max_pool_f32(c, p);
        else
            max_pool_f64(c, p);
    }
}

/* planes of `per` elements of work each, in chunks of about the kernels'
 * grain (a plane's result never depends on its chunk) */
static int64_t plane_grain(int64_t per) {
    int64_t g = JG_PARALLEL_GRAIN / (per > 0 ? per : 1);
    return g > 0 ? g : 1;
}

int jg_k_max_pool2d(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    jg_tensor *x = in[0], *cx = NULL;
    pool_ctx c = {.a = a,
                  .H = x->shape[x->ndim - 2],
                  .W = x->shape[x->ndim - 1],
                  .Ho = out[0]->shape[x->ndim - 2],
                  .Wo = out[0]->shape[x->ndim - 1],
                  .dt = x->dtype};
    if (out[0]->numel == 0)
        return 0;
    if (!(c.x = dense_data(x, &cx)))
        return -1;
    c.y = jg_tensor_ptr(out[0]);
    c.idx = jg_tensor_ptr(out[1]);
    jg_parallel_for(planes_of(x), plane_grain(c.Ho * c.Wo * a->i[MP_KH] * a->i[MP_KW]),
                    max_pool_chunk, &c);
    if (cx)
        jg_release(cx);
    return 0;
}

/* the gradient lands at the indices: max_pool2d_backward(g, x, indices),
 * x for the shape and, as in PyTorch, so that the result requires grad
 * when x does */
int jg_vjp_max_pool2d(VJP_ARGS) {
    (void)meta, (void)needs;
    gin[0] = NULL;
    if (!gout[0])
        return 0; /* only the indices got a gradient: they carry none */
    jg_tensor *args[3] = {gout[0], in[0], out[1]};
    return jg_op_call(JG_OP_MAX_POOL2D_BACKWARD, a, args, &gin[0]);
}

int jg_infer_max_pool2d_backward(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    const jg_meta *g = &in[0], *x = &in[1], *ix = &in[2];
    jg_meta want[2];
    if (jg_infer_max_pool2d(a, x, want) < 0)
        return -1;
    if (!jg_meta_equal(g, &want[0]) || !jg_meta_equal(ix, &want[1]))
        return jg_errorf("max_pool2d_backward(): the gradient or indices do not match the output");
    out[0] = *x;
    return 0;
}

#define MAXPOOL_BWD(TY, T)                                                                         \
    static int max_pool_bwd_##TY(const T *g, const int64_t *ix, T *y, int64_t planes, int64_t hw,  \
                                 int64_t howo) {                                                   \
        memset(y, 0, sizeof(T) * (size_t)(planes * hw));                                           \
        for (int64_t p = 0; p < planes; p++)                                                       \
            for (int64_t j = 0; j < howo; j++) {                                                   \
                int64_t k = ix[p * howo + j];                                                      \
                if (k < 0 || k >= hw)                                                              \
                    return jg_errorf("max_pool2d_backward(): index %lld out of range",             \
                                     (long long)k);                                                \
                y[p * hw + k] += g[p * howo + j];                                                  \
            }                                                                                      \
        return 0;                                                                                  \
    }
MAXPOOL_BWD(f32, float)
MAXPOOL_BWD(f64, double)

/* each plane's gradients added at its indices, in output order (PyTorch's
 * loop) */
int jg_k_max_pool2d_backward(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    (void)a;
    jg_tensor *g = in[0], *ix = in[2], *y = out[0], *cg = NULL, *ci = NULL;
    int nd = y->ndim;
    int64_t hw = y->shape[nd - 2] * y->shape[nd - 1];
    int64_t howo = g->shape[nd - 2] * g->shape[nd - 1];
    if (y->numel == 0)
        return 0;
    const char *gp = dense_data(g, &cg), *ip = dense_data(ix, &ci);
    int rc = -1;
    if (gp && ip) {
        if (y->dtype == JG_F32)
            rc = max_pool_bwd_f32((const float *)gp, (const int64_t *)ip, (float *)jg_tensor_ptr(y),
                                  planes_of(y), hw, howo);
        else
            rc = max_pool_bwd_f64((const double *)gp, (const int64_t *)ip,
                                  (double *)jg_tensor_ptr(y), planes_of(y), hw, howo);
    }
    if (cg)
        jg_release(cg);
    if (ci)
        jg_release(ci);
    return rc;
}

/* d/dg gathers at the indices (PyTorch's max_pool_double_backward); x gets
 * zeros (PyTorch's formula for self) */
int jg_vjp_max_pool2d_backward(VJP_ARGS) {
    (void)a, (void)out;
    jg_tensor *gg = gout[0];
    gin[0] = gin[1] = gin[2] = NULL;
    if (needs[0]) {
        const jg_meta *g = &meta[0], *x = &meta[1];
        int nd = g->ndim;
        int64_t planes = jg_shape_numel(nd - 2, g->shape);
        int64_t sx[2] = {planes, x->shape[nd - 2] * x->shape[nd - 1]};
        int64_t si[2] = {planes, g->shape[nd - 2] * g->shape[nd - 1]};
        jg_tensor *src = jg_reshape(gg, 2, sx), *idx = jg_reshape(in[2], 2, si);
        jg_attrs ga = {.n = 1, .i = {1}};
        jg_tensor *r = src && idx ? jg_op1(JG_OP_GATHER, &ga, src, idx) : NULL;
        if (!r || !(gin[0] = jg_reshape(r, nd, g->shape)))
            return -1;
    }
    if (needs[1] && !(gin[1] = jg_full(meta[1].dtype, meta[1].ndim, meta[1].shape, 0.0)))
        return -1;
    return 0;
}

/* ------------------------------------------------------------ avg_pool2d */

int jg_infer_avg_pool2d(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    const int64_t *i = a->i;
    int64_t ho, wo;
    if (a->n != AP_N)
        return jg_errorf("avg_pool2d(): bad attributes (n = %d)", a->n);
    if (check_pool("avg_pool2d", &in[0], i[AP_KH], i[AP_KW], i[AP_SH], i[AP_SW], i[AP_PH], i[AP_PW],
                   1, 1, i[AP_CEIL] != 0, &ho, &wo) < 0)
        return -1;
    if (i[AP_DIV] < 0)
        return jg_errorf("divisor must be not zero");
    pool_meta(&out[0], &in[0], ho, wo, in[0].dtype);
    return 0;
}

/* avg_pool2d_backward(g, x) -> x's shape (x's values are not read; x is an
 * operand as in PyTorch, whose result requires grad when x does) */
int jg_infer_avg_pool2d_backward(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    jg_meta want;
    if (jg_infer_avg_pool2d(a, &in[1], &want) < 0)
        return -1;
    if (!jg_meta_equal(&in[0], &want))
        return jg_errorf("avg_pool2d_backward(): the gradient's shape does not match the output's");
    out[0] = in[1];
    return 0;
}

/* PyTorch's cpu_avg_pool window: [h0, h1) clipped to the padded input gives
 * the count with padding, then clipped to the input the summed elements;
 * the divisor is the override, or one of the two counts */
typedef struct {
    int64_t h0, h1, w0, w1, div;
} avg_win;

static avg_win avg_window(const int64_t *at, int64_t H, int64_t W, int64_t oh, int64_t ow) {
    avg_win r;
    r.h0 = oh * at[AP_SH] - at[AP_PH];
    r.w0 = ow * at[AP_SW] - at[AP_PW];
    r.h1 = r.h0 + at[AP_KH] < H + at[AP_PH] ? r.h0 + at[AP_KH] : H + at[AP_PH];
    r.w1 = r.w0 + at[AP_KW] < W + at[AP_PW] ? r.w0 + at[AP_KW] : W + at[AP_PW];
    int64_t padded = (r.h1 - r.h0) * (r.w1 - r.w0);
    r.h0 = r.h0 > 0 ? r.h0 : 0;
    r.w0 = r.w0 > 0 ? r.w0 : 0;
    r.h1 = r.h1 < H ? r.h1 : H;
    r.w1 = r.w1 < W ? r.w1 : W;
    r.div = at[AP_DIV] ? at[AP_DIV] : at[AP_INCL] ? padded : (r.h1 - r.h0) * (r.w1 - r.w0);
    return r;
}

#define AVGPOOL(TY, T)                                                                             \
    static void avg_pool_##TY(const pool_ctx *c, int64_t plane) {                                  \
        const int64_t *at = c->a->i;                                                               \
        const T *x = (const T *)c->x + plane * c->H * c->W;                                        \
        T *y = (T *)c->y + plane * c->Ho * c->Wo;                                                  \
        for (int64_t oh = 0; oh < c->Ho; oh++)                                                     \
            for (int64_t ow = 0; ow < c->Wo; ow++) {                                               \
                avg_win r = avg_window(at, c->H, c->W, oh, ow);                                    \
                if (r.h0 >= r.h1 || r.w0 >= r.w1) {                                                \
                    y[oh * c->Wo + ow] = 0;                                                        \
                    continue;                                                                      \
                }                                                                                  \
                T s = 0;                                                                           \
                for (int64_t h = r.h0; h < r.h1; h++)                                              \
                    for (int64_t w = r.w0; w < r.w1; w++)                                          \
                        s += x[h * c->W + w];                                                      \
                y[oh * c->Wo + ow] = s / (T)r.div;                                                 \
            }                                                                                      \
    }                                                                                              \
    /* (c->x is the gradient [Ho, Wo], c->y the input's [H, W]) */                                 \
    static void avg_pool_bwd_##TY(const pool_ctx *c, int64_t plane) {                              \
        const int64_t *at = c->a->i;                                                               \
        const T *g = (const T *)c->x + plane * c->Ho * c->Wo;                                      \
        T *y = (T *)c->y + plane * c->H * c->W;                                                    \
        for (int64_t i = 0; i < c->H * c->W; i++)                                                  \
            y[i] = 0;                                                                              \
        for (int64_t oh = 0; oh < c->Ho; oh++)                                                     \
            for (int64_t ow = 0; ow < c->Wo; ow++) {                                               \
                avg_win r = avg_window(at, c->H, c->W, oh, ow);                                    \
                T v = g[oh * c->Wo + ow] / (T)r.div;                                               \
                for (int64_t h = r.h0; h < r.h1; h++)                                              \
                    for (int64_t w = r.w0; w < r.w1; w++)                                          \
                        y[h * c->W + w] += v;                                                      \
            }                                                                                      \
    }
AVGPOOL(f32, float)
AVGPOOL(f64, double)

static void avg_pool_chunk(void *arg, int64_t lo, int64_t hi) {
    const pool_ctx *c = arg;
    for (int64_t p = lo; p < hi; p++) {
        if (c->dt == JG_F32)
            avg_pool_f32(c, p);
        else
            avg_pool_f64(c, p);
    }
}
static void avg_pool_bwd_chunk(void *arg, int64_t lo, int64_t hi) {
    const pool_ctx *c = arg;
    for (int64_t p = lo; p < hi; p++) {
        if (c->dt == JG_F32)
            avg_pool_bwd_f32(c, p);
        else
            avg_pool_bwd_f64(c, p);
    }
}

int jg_k_avg_pool2d(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    jg_tensor *x = in[0], *cx = NULL;
    pool_ctx c = {.a = a,
                  .H = x->shape[x->ndim - 2],
                  .W = x->shape[x->ndim - 1],
                  .Ho = out[0]->shape[x->ndim - 2],
                  .Wo = out[0]->shape[x->ndim - 1],
                  .dt = x->dtype};
    if (out[0]->numel == 0)
        return 0;
    if (!(c.x = dense_data(x, &cx)))
        return -1;
    c.y = jg_tensor_ptr(out[0]);
    jg_parallel_for(planes_of(x), plane_grain(c.Ho * c.Wo * a->i[AP_KH] * a->i[AP_KW]),
                    avg_pool_chunk, &c);
    if (cx)
        jg_release(cx);
    return 0;
}

int jg_k_avg_pool2d_backward(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    jg_tensor *g = in[0], *cg = NULL;
    pool_ctx c = {.a = a,
                  .H = out[0]->shape[g->ndim - 2],
                  .W = out[0]->shape[g->ndim - 1],
                  .Ho = g->shape[g->ndim - 2],
                  .Wo = g->shape[g->ndim - 1],
                  .dt = g->dtype};
    if (out[0]->numel == 0)
        return 0;
    if (!(c.x = dense_data(g, &cg)))
        return -1;
    c.y = jg_tensor_ptr(out[0]);
    jg_parallel_for(planes_of(g), plane_grain(c.Ho * c.Wo * a->i[AP_KH] * a->i[AP_KW]),
                    avg_pool_bwd_chunk, &c);
    if (cg)
        jg_release(cg);
    return 0;
}

int jg_vjp_avg_pool2d(VJP_ARGS) {
    (void)out, (void)needs, (void)meta;
    jg_tensor *args[2] = {gout[0], in[0]};
    return jg_op_call(JG_OP_AVG_POOL2D_BACKWARD, a, args, &gin[0]);
}

/* d/dg = avg_pool2d(gg); x gets zeros (PyTorch's formula for self) */
int jg_vjp_avg_pool2d_backward(VJP_ARGS) {
    (void)in, (void)out;
    gin[0] = gin[1] = NULL;
    if (needs[0] && !(gin[0] = jg_op1(JG_OP_AVG_POOL2D, a, gout[0], NULL)))
        return -1;
    if (needs[1] && !(gin[1] = jg_full(meta[1].dtype, meta[1].ndim, meta[1].shape, 0.0)))
        return -1;
    return 0;
}

/* ------------------------------------------------------------ adaptive_avg_pool2d */

/* attrs i[0], i[1]: the output's (oh, ow).  PyTorch's cpu_adaptive_avg_pool
 * window of output row o over n input rows: [floor(o * n / on),
 * ceil((o + 1) * n / on)). */
static int64_t ad_start(int64_t o, int64_t on, int64_t n) {
    return o * n / on;
}
static int64_t ad_end(int64_t o, int64_t on, int64_t n) {
    return ((o + 1) * n + on - 1) / on;
}

int jg_infer_adaptive_avg_pool2d(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    const jg_meta *x = &in[0];
    char sx[160];
    if (a->n != 2 || a->i[0] < 0 || a->i[1] < 0)
        return jg_errorf("adaptive_avg_pool2d: elements of output_size must be greater than or "
                         "equal to 0 but received {%lld, %lld}",
                         (long long)a->i[0], (long long)a->i[1]);
    if (x->dtype != JG_F32 && x->dtype != JG_F64)
        return jg_errorf("\"adaptive_avg_pool2d\" not implemented for '%s'",
                         jg_dtype_torch_name(x->dtype));
    if ((x->ndim != 3 && x->ndim != 4) || x->shape[x->ndim - 2] == 0 || x->shape[x->ndim - 1] == 0)
        return jg_errorf("adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got %s",
                         (jg_format_shape(sx, sizeof sx, x->ndim, x->shape), sx));
    pool_meta(&out[0], x, a->i[0], a->i[1], x->dtype);
    return 0;
}

/* adaptive_avg_pool2d_backward(g, x) -> x's shape (x as PyTorch's operand) */
int jg_infer_adaptive_avg_pool2d_backward(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    jg_meta want;
    if (jg_infer_adaptive_avg_pool2d(a, &in[1], &want) < 0)
        return -1;
    if (!jg_meta_equal(&in[0], &want))
        return jg_errorf("adaptive_avg_pool2d_backward(): the gradient's shape does not match "
                         "the output's");
    out[0] = in[1];
    return 0;
}

#define ADAPTIVE(TY, T)                                                                            \
    static void adaptive_##TY(const pool_ctx *c, int64_t plane) {                                  \
        const T *x = (const T *)c->x + plane * c->H * c->W;                                        \
        T *y = (T *)c->y + plane * c->Ho * c->Wo;                                                  \
        for (int64_t oh = 0; oh < c->Ho; oh++) {                                                   \
            int64_t h0 = ad_start(oh, c->Ho, c->H), h1 = ad_end(oh, c->Ho, c->H);                  \
            for (int64_t ow = 0; ow < c->Wo; ow++) {                                               \
                int64_t w0 = ad_start(ow, c->Wo, c->W), w1 = ad_end(ow, c->Wo, c->W);              \
                T s = 0;                                                                           \
                for (int64_t h = h0; h < h1; h++)                                                  \
                    for (int64_t w = w0; w < w1; w++)                                              \
                        s += x[h * c->W + w];                                                      \
                y[oh * c->Wo + ow] = s / (T)((h1 - h0) * (w1 - w0));                               \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    /* (c->x is the gradient [Ho, Wo], c->y the input's [H, W]) */                                 \
    static void adaptive_bwd_##TY(const pool_ctx *c, int64_t plane) {                              \
        const T *g = (const T *)c->x + plane * c->Ho * c->Wo;                                      \
        T *y = (T *)c->y + plane * c->H * c->W;                                                    \
        for (int64_t i = 0; i < c->H * c->W; i++)                                                  \
            y[i] = 0;                                                                              \
        for (int64_t oh = 0; oh < c->Ho; oh++) {                                                   \
            int64_t h0 = ad_start(oh, c->Ho, c->H), h1 = ad_end(oh, c->Ho, c->H);                  \
            for (int64_t ow = 0; ow < c->Wo; ow++) {                                               \
                int64_t w0 = ad_start(ow, c->Wo, c->W), w1 = ad_end(ow, c->Wo, c->W);              \
                T v = g[oh * c->Wo + ow] / (T)((h1 - h0) * (w1 - w0));                             \
                for (int64_t h = h0; h < h1; h++)                                                  \
                    for (int64_t w = w0; w < w1; w++)                                              \
                        y[h * c->W + w] += v;                                                      \
            }                                                                                      \
        }                                                                                          \
    }
ADAPTIVE(f32, float)
ADAPTIVE(f64, double)

static void adaptive_chunk(void *arg, int64_t lo, int64_t hi) {
    const pool_ctx *c = arg;
    for (int64_t p = lo; p < hi; p++) {
        if (c->dt == JG_F32)
            adaptive_f32(c, p);
        else
            adaptive_f64(c, p);
    }
}
static void adaptive_bwd_chunk(void *arg, int64_t lo, int64_t hi) {
    const pool_ctx *c = arg;
    for (int64_t p = lo; p < hi; p++) {
        if (c->dt == JG_F32)
            adaptive_bwd_f32(c, p);
        else
            adaptive_bwd_f64(c, p);
    }
}

/* src (dense copy if needed) of `planes` planes into out; bwd: the gradient
 * direction */
static int adaptive_run(const jg_attrs *a, jg_tensor *src, jg_tensor *big, jg_tensor *small,
                        jg_tensor *dst, bool bwd) {
    int nd = big->ndim;
    pool_ctx c = {.a = a,
                  .H = big->shape[nd - 2],
                  .W = big->shape[nd - 1],
                  .Ho = small->shape[nd - 2],
                  .Wo = small->shape[nd - 1],
                  .dt = big->dtype};
    if (dst->numel == 0)
        return 0;
    jg_tensor *cs = NULL;
    if (!(c.x = dense_data(src, &cs)))
        return -1;
    c.y = jg_tensor_ptr(dst);
    jg_parallel_for(planes_of(dst), plane_grain(c.H * c.W),
                    bwd ? adaptive_bwd_chunk : adaptive_chunk, &c);
    if (cs)
        jg_release(cs);
    return 0;
}

int jg_k_adaptive_avg_pool2d(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    return adaptive_run(a, in[0], in[0], out[0], out[0], false);
}

int jg_k_adaptive_avg_pool2d_backward(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    if (out[0]->numel && in[0]->numel == 0) { /* an empty output plane: no gradient */
        memset(jg_tensor_ptr(out[0]), 0, (size_t)out[0]->numel * jg_dtype_size(out[0]->dtype));
        return 0;
    }
    return adaptive_run(a, in[0], out[0], in[0], out[0], true);
}

int jg_vjp_adaptive_avg_pool2d(VJP_ARGS) {
    (void)out, (void)needs, (void)meta;
    jg_tensor *args[2] = {gout[0], in[0]};
    return jg_op_call(JG_OP_ADAPTIVE_AVG_POOL2D_BACKWARD, a, args, &gin[0]);
}

/* d/dg = adaptive_avg_pool2d(gg); x gets zeros (PyTorch's formula for self) */
int jg_vjp_adaptive_avg_pool2d_backward(VJP_ARGS) {
    (void)in, (void)out;
    gin[0] = gin[1] = NULL;
    if (needs[0] && !(gin[0] = jg_op1(JG_OP_ADAPTIVE_AVG_POOL2D, a, gout[0], NULL)))
        return -1;
    if (needs[1] && !(gin[1] = jg_full(meta[1].dtype, meta[1].ndim, meta[1].shape, 0.0)))
        return -1;
    return 0;
}

/* ------------------------------------------------------------ public functions */

/* x as a batch: x itself (4-D) or a batch of one (3-D; *unbatched set) */
static jg_tensor *as_batch(jg_tensor *x, bool *unbatched) {
    *unbatched = x->ndim == 3;
    if (!*unbatched)
        return x;
    int64_t s[4] = {1, x->shape[0], x->shape[1], x->shape[2]};
    return jg_reshape(x, 4, s);
}
static jg_tensor *unbatch(jg_tensor *y, bool unbatched) {
    if (!y || !unbatched)
        return y;
    return jg_reshape(y, 3, y->shape + 1);
}

static jg_tensor *conv_call(jg_tensor *x, jg_tensor *w, jg_tensor *b, jg_attrs *at) {
    char s[160];
    if (!x || !w)
        return jg_errorf_null("conv2d: NULL argument");
    if (x->ndim != 3 && x->ndim != 4)
        return jg_errorf_null("Expected 3D (unbatched) or 4D (batched) input to conv2d, but got "
                              "input of size: %s",
                              (jg_format_shape(s, sizeof s, x->ndim, x->shape), s));
    bool ub;
    jg_scope_push(); /* (the batched input and result of an unbatched call) */
    jg_tensor *xb = as_batch(x, &ub), *in[3] = {xb, w, b}, *y = NULL;
    if (xb && jg_op_call(b ? JG_OP_CONV2D_BIAS : JG_OP_CONV2D, at, in, &y) == 0)
        y = unbatch(y, ub);
    else
        y = NULL;
    jg_keep(y);
    jg_scope_pop();
    return jg_scope_track(y);
}

jg_tensor *jg_conv2d(jg_tensor *x, jg_tensor *w, jg_tensor *bias, const int64_t stride[2],
                     const int64_t padding[2], const int64_t dilation[2], int64_t groups) {
    if (!stride || !padding || !dilation)
        return jg_errorf_null("conv2d: NULL argument");
    jg_attrs at = {.n = CA_N};
    at.i[CA_SH] = stride[0], at.i[CA_SW] = stride[1];
    at.i[CA_PT] = at.i[CA_PB] = padding[0];
    at.i[CA_PL] = at.i[CA_PR] = padding[1];
    at.i[CA_DH] = dilation[0], at.i[CA_DW] = dilation[1];
    at.i[CA_G] = groups;
    return conv_call(x, w, bias, &at);
}

/* PyTorch 1.13's padding='same': total dilation * (k - 1) per dim, half at
 * the start and the rest (one more for an odd total) at the end */
jg_tensor *jg_conv2d_same(jg_tensor *x, jg_tensor *w, jg_tensor *bias, const int64_t dilation[2],
                          int64_t groups) {
    if (!x || !w || !dilation)
        return jg_errorf_null("conv2d: NULL argument");
    jg_attrs at = {.n = CA_N};
    at.i[CA_SH] = at.i[CA_SW] = 1;
    at.i[CA_DH] = dilation[0], at.i[CA_DW] = dilation[1];
    at.i[CA_G] = groups;
    if (w->ndim == 4) {
        int64_t th = dilation[0] * (w->shape[2] - 1), tw = dilation[1] * (w->shape[3] - 1);
        at.i[CA_PT] = th / 2, at.i[CA_PB] = th - th / 2;
        at.i[CA_PL] = tw / 2, at.i[CA_PR] = tw - tw / 2;
    }
    return conv_call(x, w, bias, &at);
}

/* The transposed convolution is conv2d_input_grad(x, y0, w) of the
 * convolution that maps an output-sized y0 to x: x [N, Cin, H, W] plays the
 * gradient, w [Cin, Cout / g, kh, kw] is that convolution's weight, and y0
 * (a broadcast zero; only its shape is read) gives the output's size.  Its
 * gradients are then the existing rows: conv2d(gy, w) for x and
 * conv2d_weight_grad(x, gy, w) for w.  The end padding p - s * (op / s)
 * makes the convolution of the output size give back H exactly (negative
 * when output_padding >= stride, which PyTorch allows below the dilation). */
jg_tensor *jg_conv_transpose2d(jg_tensor *x, jg_tensor *w, jg_tensor *bias, const int64_t stride[2],
                               const int64_t padding[2], const int64_t output_padding[2],
                               const int64_t dilation[2], int64_t groups) {
    char sx[160], sw[160], sb[160];
    if (!x || !w || !stride || !padding || !output_padding || !dilation)
        return jg_errorf_null("conv_transpose2d: NULL argument");
    if (x->ndim != 3 && x->ndim != 4)
        return jg_errorf_null("Expected 3D (unbatched) or 4D (batched) input to conv_transpose2d, "
                              "but got input of size: %s",
                              (jg_format_shape(sx, sizeof sx, x->ndim, x->shape), sx));
    if (stride[0] <= 0 || stride[1] <= 0)
        return jg_errorf_null("non-positive stride is not supported");
    if (padding[0] < 0 || padding[1] < 0)
        return jg_errorf_null("negative padding is not supported");
    if (output_padding[0] < 0 || output_padding[1] < 0)
        return jg_errorf_null("negative output_padding is not supported");
    if (groups <= 0)
        return jg_errorf_null("non-positive groups is not supported");
    if (dilation[0] <= 0 || dilation[1] <= 0)
        return jg_errorf_null("dilation should be greater than zero, but got dilation_height: "
                              "%lld, dilation_width: %lld",
                              (long long)dilation[0], (long long)dilation[1]);
    jg_format_shape(sw, sizeof sw, w->ndim, w->shape);
    int64_t cin = x->shape[x->ndim - 3];
    jg_format_shape(sx, sizeof sx, x->ndim, x->shape);
    if (w->ndim != 4)
        return jg_errorf_null("Expected 4-dimensional weight for %d-dimensional input %s, but got "
                              "%d-dimensional weight of size %s instead",
                              x->ndim, sx, w->ndim, sw);
    if (check_float(x->dtype) < 0)
        return NULL;
    if (w->dtype != x->dtype || (bias && bias->dtype != x->dtype))
        return jg_errorf_null("expected scalar type %s but found %s", jg_dtype_torch_name(x->dtype),
                              jg_dtype_torch_name(w->dtype != x->dtype ? w->dtype : bias->dtype));
    if (w->shape[0] % groups != 0)
        return jg_errorf_null("Given groups=%lld, expected weight to be divisible by %lld at "
                              "dimension 0, but got weight of size [%s] instead",
                              (long long)groups, (long long)groups, sw);
    if (cin != w->shape[0])
        return jg_errorf_null("Given transposed=1, weight of size %s, expected input%s to have "
                              "%lld channels, but got %lld channels instead",
                              sw, sx, (long long)w->shape[0], (long long)cin);
    int64_t cout = w->shape[1] * groups;
    if (bias && (bias->ndim != 1 || bias->shape[0] != cout))
        return jg_errorf_null("Given transposed=1, weight of size %s, expected bias to be "
                              "1-dimensional with %lld elements, but got bias of size %s instead",
                              sw, (long long)cout,
                              (jg_format_shape(sb, sizeof sb, bias->ndim, bias->shape), sb));
    if ((output_padding[0] >= stride[0] && output_padding[0] >= dilation[0]) ||
        (output_padding[1] >= stride[1] && output_padding[1] >= dilation[1]))
        return jg_errorf_null("output padding must be smaller than either stride or dilation, but "
                              "got output_padding_height: %lld output_padding_width: %lld "
                              "stride_height: %lld stride_width: %lld dilation_height: %lld "
                              "dilation_width: %lld",
                              (long long)output_padding[0], (long long)output_padding[1],
                              (long long)stride[0], (long long)stride[1], (long long)dilation[0],
                              (long long)dilation[1]);
    int64_t H = x->shape[x->ndim - 2], W = x->shape[x->ndim - 1], out[2];
    for (int d = 0; d < 2; d++)
        out[d] = ((d ? W : H) - 1) * stride[d] - 2 * padding[d] +
                 dilation[d] * (w->shape[2 + d] - 1) + output_padding[d] + 1;
    if (out[0] < 1 || out[1] < 1)
        return jg_errorf_null("Given input size per channel: (%lld x %lld). Calculated output "
                              "size per channel: (%lld x %lld). Output size is too small",
                              (long long)H, (long long)W, (long long)out[0], (long long)out[1]);
    jg_attrs at = {.n = CA_N};
    at.i[CA_SH] = stride[0], at.i[CA_SW] = stride[1];
    at.i[CA_PT] = padding[0], at.i[CA_PL] = padding[1];
    at.i[CA_PB] = padding[0] - stride[0] * (output_padding[0] / stride[0]);
    at.i[CA_PR] = padding[1] - stride[1] * (output_padding[1] / stride[1]);
    at.i[CA_DH] = dilation[0], at.i[CA_DW] = dilation[1];
    at.i[CA_G] = groups;
    bool ub;
    jg_scope_push(); /* (the batched input, the shape operand, the result before the bias) */
    jg_tensor *xb = as_batch(x, &ub), *y = NULL;
    int64_t ys[4] = {xb ? xb->shape[0] : 0, cout, out[0], out[1]};
    jg_tensor *zero = jg_scalar(x->dtype, 0.0);
    jg_tensor *y0 = zero ? jg_expand(zero, 4, ys) : NULL;
    jg_tensor *in[3] = {xb, y0, w};
    if (xb && y0 && jg_op_call(JG_OP_CONV2D_INPUT_GRAD, &at, in, &y) == 0) {
        int64_t bs[3] = {cout, 1, 1};
        /* the bias after the columns are summed, as PyTorch's kernel */
        if (bias)
            y = jg_add(y, jg_reshape(bias, 3, bs));
        y = unbatch(y, ub);
    } else {
        y = NULL;
    }
    jg_keep(y);
    jg_scope_pop();
    return jg_scope_track(y);
}

static int pool_input(const char *fn, jg_tensor *x) {
    char s[160];
    if (!x)
        return jg_errorf("%s: NULL argument", fn);
    if (x->ndim != 3 && x->ndim != 4)
        return jg_errorf("Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size "
                         "for input, but got:%s",
                         (jg_format_shape(s, sizeof s, x->ndim, x->shape), s));
    return 0;
}

jg_tensor *jg_max_pool2d(jg_tensor *x, const int64_t kernel[2], const int64_t stride[2],
                         const int64_t padding[2], const int64_t dilation[2], bool ceil_mode,
                         jg_tensor **indices) {
    if (pool_input("max_pool2d", x) < 0)
        return NULL;
    if (!kernel || !stride || !padding || !dilation)
        return jg_errorf_null("max_pool2d: NULL argument");
    jg_attrs at = {.n = MP_N,
                   .i = {kernel[0], kernel[1], stride[0], stride[1], padding[0], padding[1],
                         dilation[0], dilation[1], ceil_mode}};
    jg_tensor *out[2];
    jg_scope_push(); /* (the indices, when not wanted) */
    int rc = jg_op_call(JG_OP_MAX_POOL2D, &at, &x, out);
    if (rc == 0) {
        jg_keep(out[0]);
        if (indices)
            jg_keep(out[1]);
    }
    jg_scope_pop();
    if (rc < 0)
        return NULL;
    if (indices)
        *indices = jg_scope_track(out[1]);
    return jg_scope_track(out[0]);
}

jg_tensor *jg_avg_pool2d(jg_tensor *x, const int64_t kernel[2], const int64_t stride[2],
                         const int64_t padding[2], bool ceil_mode, bool count_include_pad,
                         int64_t divisor_override) {
    if (pool_input("avg_pool2d", x) < 0)
        return NULL;
    if (!kernel || !stride || !padding)
        return jg_errorf_null("avg_pool2d: NULL argument");
    if (divisor_override < 0)
        return jg_errorf_null("divisor must be not zero");
    jg_attrs at = {.n = AP_N,
                   .i = {kernel[0], kernel[1], stride[0], stride[1], padding[0], padding[1],
                         ceil_mode, count_include_pad, divisor_override}};
    jg_tensor *y;
    return jg_op_call(JG_OP_AVG_POOL2D, &at, &x, &y) < 0 ? NULL : y;
}

/* PyTorch 1.13 computes a (1, 1) output as a mean over the last two dims
 * (its node is then MeanBackward1); other sizes run the row. */
jg_tensor *jg_adaptive_avg_pool2d(jg_tensor *x, const int64_t output_size[2]) {
    if (!x || !output_size)
        return jg_errorf_null("adaptive_avg_pool2d: NULL argument");
    jg_attrs at = {.n = 2, .i = {output_size[0], output_size[1]}};
    jg_meta m, om;
    jg_meta_of(x, &m);
    if (jg_infer_adaptive_avg_pool2d(&at, &m, &om) < 0)
        return NULL;
    if (output_size[0] == 1 && output_size[1] == 1) {
        int dims[2] = {x->ndim - 2, x->ndim - 1};
        return jg_mean_dims(x, 2, dims, true);
    }
    jg_tensor *y;
    return jg_op_call(JG_OP_ADAPTIVE_AVG_POOL2D, &at, &x, &y) < 0 ? NULL : y;
}
