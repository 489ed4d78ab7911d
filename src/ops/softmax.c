/* softmax and log_softmax over attrs.i[0] (numerically stable: the slice's
 * maximum is subtracted before exp), and nll_loss: -logp[i, target[i]] per
 * row, reduced as PyTorch's reduction= says, rows whose target is the
 * ignore_index left out (no class weights).
 *
 * Per slice: m = max; e_i = exp(x_i - m) summed sequentially in the dtype;
 * softmax_i = e_i / sum, log_softmax_i = (x_i - m) - log(sum).  (PyTorch's
 * vectorised kernel multiplies by 1/sum; dividing is the exactly rounded
 * form and is what a compiled loop emits too.)
 *
 * nll_loss attrs: n == 0 (none given): mean over all rows, no ignored
 * target; n == 4: i[0] nonzero if i[1] is an ignore_index, i[2] the
 * jg_reduction, i[3] the number of classes (read by nll_loss_backward, whose
 * attrs are always these four).  Every other target must lie in [0, C).  A
 * mean over no rows is 0 / 0 = NaN, as in PyTorch. */
#include "ops/decls.h"

#include <math.h>
#include <string.h>

#define SOFTMAX_SLICE(T, EXP, LOG)                                                                 \
    do {                                                                                           \
        const T *x = (const T *)xs;                                                                \
        T *y = (T *)ys;                                                                            \
        T m = x[0];                                                                                \
        for (int64_t i = 1; i < len; i++)                                                          \
            if (x[i * xst] > m)                                                                    \
                m = x[i * xst];                                                                    \
        T sum = 0;                                                                                 \
        if (log_) {                                                                                \
            for (int64_t i = 0; i < len; i++)                                                      \
                sum += EXP(x[i * xst] - m);                                                        \
            T ls = LOG(sum);                                                                       \
            for (int64_t i = 0; i < len; i++)                                                      \
                y[i * yst] = (x[i * xst] - m) - ls;                                                \
        } else {                                                                                   \
            for (int64_t i = 0; i < len; i++) {                                                    \
                T e = EXP(x[i * xst] - m);                                                         \
                y[i * yst] = e;                                                                    \
                sum += e;                                                                          \
            }                                                                                      \
            for (int64_t i = 0; i < len; i++)                                                      \
                y[i * yst] = y[i * yst] / sum;                                                     \
        }                                                                                          \
    } while (0)

static void softmax_slice(jg_dtype dt, const void *xs, int64_t xst, void *ys, int64_t yst,
                          int64_t len, bool log_) {
    if (dt == JG_F32)
        SOFTMAX_SLICE(float, expf, logf);
    else
        SOFTMAX_SLICE(double, exp, log);
}

static int softmax_run(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out, bool log_) {
    const jg_tensor *x = in[0];
    jg_tensor *y = out[0];
    JG_ASSERT(x->dtype == JG_F32 || x->dtype == JG_F64);
    int dim = (int)a->i[0];
    int64_t len = x->ndim ? x->shape[dim] : 1;
    if (x->numel == 0)
        return 0;
    int64_t es = (int64_t)jg_dtype_size(x->dtype);
    int64_t xst = x->ndim ? x->stride[dim] : 0, yst = y->ndim ? y->stride[dim] : 0;
    int64_t outer = x->numel / len;
    int64_t idx[JG_MAX_DIMS] = {0};
    const char *xb = jg_tensor_ptr(x);
    char *yb = jg_tensor_ptr(y);
    for (int64_t o = 0; o < outer; o++) {
        int64_t xo = 0, yo = 0;
        for (int d = 0; d < x->ndim; d++) {
            xo += idx[d] * x->stride[d];
            yo += idx[d] * y->stride[d];
        }
        softmax_slice(x->dtype, xb + xo * es, xst, yb + yo * es, yst, len, log_);
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
