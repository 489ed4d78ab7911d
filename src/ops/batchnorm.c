/* batch_norm: normalization per channel (dim 1) over every other dim, as
 * PyTorch's native_batch_norm.  Training is one op-table row (BATCH_NORM:
 * a kernel that accumulates the statistics in double, as PyTorch's CPU
 * kernel, and a VJP written with library ops, so double backward, tracing
 * and both backends follow); evaluation with running statistics is
 * composed of library ops.  The running statistics are updated with
 * jg_copy_ with grad mode off: a plain in-place write eagerly, and under
 * jg_compile a captured tensor's traced mutation, written back after each
 * call exactly as eager writes it. */
#include "ops/decls.h"

#include <math.h>
#include <stdio.h>

/* a [C] tensor viewed as [1, C, 1, ...] against an nd-dim input */
static jg_tensor *per_channel(jg_tensor *v, int nd, int64_t c) {
    int64_t shape[JG_MAX_DIMS] = {0};
    for (int d = 0; d < nd; d++)
        shape[d] = d == 1 ? c : 1;
    return jg_reshape(v, nd, shape);
}

static void shape_str(const jg_tensor *x, char *buf, size_t size) {
    size_t n = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < jg_ndim(x) && n < size; d++)
        n +=
            (size_t)snprintf(buf + n, size - n, "%s%lld", d ? ", " : "", (long long)jg_shape(x)[d]);
    if (n < size)
        snprintf(buf + n, size - n, "]");
}

/* ---- the BATCH_NORM row ---- */

int jg_infer_batch_norm(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    if (in[0].ndim < 2)
        return jg_errorf("batch_norm: expected an input with at least 2 dims (N, C, ...), got %d",
                         in[0].ndim);
    int64_t c = in[0].shape[1];
    for (int k = 1; k < 3; k++)
        if (a->i[k - 1] && (in[k].ndim != 1 || in[k].shape[0] != c))
            return jg_errorf("%s should contain %lld elements", k == 1 ? "weight" : "bias",
                             (long long)c);
    out[0] = in[0];
    out[1] = (jg_meta){.dtype = in[0].dtype, .ndim = 2, .shape = {2, c}};
    return 0;
}

#define BN_KERNEL(T)                                                                               \
    static void bn_##T(T *y, int64_t outer, int64_t c, int64_t inner, const char *w, int64_t ws,   \
                       const char *b, int64_t bs, double eps, T *mean_out, T *var_out) {           \
        int64_t n = outer * inner;                                                                 \
        for (int64_t ch = 0; ch < c; ch++) {                                                       \
            double sum = 0, ss = 0;                                                                \
            for (int64_t o = 0; o < outer; o++) {                                                  \
                const T *p = y + (o * c + ch) * inner;                                             \
                for (int64_t i = 0; i < inner; i++)                                                \
                    sum += (double)p[i];                                                           \
            }                                                                                      \
            double mean = sum / (double)n;                                                         \
            for (int64_t o = 0; o < outer; o++) {                                                  \
                const T *p = y + (o * c + ch) * inner;                                             \
                for (int64_t i = 0; i < inner; i++)                                                \
                    ss += ((double)p[i] - mean) * ((double)p[i] - mean);                           \
            }                                                                                      \
            double invstd = 1.0 / sqrt(ss / (double)n + eps);                                      \
            double wv = w ? (double)*(const T *)(w + ch * ws) : 1.0;                               \
            double bv = b ? (double)*(const T *)(b + ch * bs)                                      \
                          : 0.0; /* PyTorch's transform: y = x * alpha + beta */                   \
            T alpha = (T)(invstd * wv), beta = (T)(bv - mean * (invstd * wv));                     \
            for (int64_t o = 0; o < outer; o++) {                                                  \
                T *p = y + (o * c + ch) * inner;                                                   \
                for (int64_t i = 0; i < inner; i++)                                                \
                    p[i] = p[i] * alpha + beta;                                                    \
            }                                                                                      \
            mean_out[ch] = (T)mean;                                                                \
            var_out[ch] = (T)(ss / (double)n);                                                     \
        }                                                                                          \
    }
BN_KERNEL(float)
BN_KERNEL(double)

int jg_k_batch_norm(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    jg_tensor *y = out[0];
    jg_copy_data(y, in[0]); /* contiguous: the kernel works in place on it */
    int64_t c = y->shape[1], outer = y->shape[0], inner = 1;
    for (int d = 2; d < y->ndim; d++)
        inner *= y->shape[d];
    if (!c)
        return 0;
    const char *w = a->i[0] ? jg_tensor_ptr(in[1]) : NULL;
    const char *b = a->i[1] ? jg_tensor_ptr(in[2]) : NULL;
    int64_t es = (int64_t)jg_dtype_size(y->dtype);
    int64_t ws = a->i[0] ? in[1]->stride[0] * es : 0, bs = a->i[1] ? in[2]->stride[0] * es : 0;
    if (y->dtype == JG_F32)
        bn_float((float *)jg_tensor_ptr(y), outer, c, inner, w, ws, b, bs, a->s,
                 (float *)jg_tensor_ptr(out[1]), (float *)jg_tensor_ptr(out[1]) + c);
    else
        bn_double((double *)jg_tensor_ptr(y), outer, c, inner, w, ws, b, bs, a->s,
                  (double *)jg_tensor_ptr(out[1]), (double *)jg_tensor_ptr(out[1]) + c);
    return 0;
}

/* With xhat = (x - mean) * invstd over the n values of a channel:
 * dx = w * invstd * (g - mean(g) - xhat * mean(g * xhat)), dw = sum(g *
 * xhat), db = sum(g) (PyTorch's batch_norm_backward), plus the gradients
 * that reach the mean and variance outputs (1/n and 2 (x - mean) / n per
 * value), which double backward needs. */
int jg_vjp_batch_norm(VJP_ARGS) {
    const jg_meta *m = &meta[0];
    int nd = m->ndim, dims[JG_MAX_DIMS], nr = 0;
    int64_t c = m->shape[1], n = 1;
    for (int d = 0; d < nd; d++)
        if (d != 1) {
            dims[nr++] = d;
            n *= m->shape[d];
        }
    jg_tensor *mean = per_channel(jg_slice(out[1], 0, 0, 1), nd, c);
    jg_tensor *var = per_channel(jg_slice(out[1], 0, 1, 2), nd, c);
    jg_tensor *cen = mean ? jg_sub(in[0], mean) : NULL;
    jg_tensor *invstd = var ? jg_rsqrt(jg_add_scalar(var, a->s)) : NULL;
    if (!cen || !invstd)
        return -1;
    jg_tensor *gx = NULL;
    gin[1] = gin[2] = NULL;
    if (gout[0]) {
        jg_tensor *g = gout[0];
        jg_tensor *xhat = jg_mul(cen, invstd);
        jg_tensor *gxh = xhat ? jg_mul(g, xhat) : NULL;
        if (!gxh)
            return -1;
        if (a->i[0] && needs[1] &&
            !(gin[1] = jg_reshape(jg_sum_dims(gxh, nr, dims, false), 1, (const int64_t[]){c})))
            return -1;
        if (a->i[1] && needs[2] &&
            !(gin[2] = jg_reshape(jg_sum_dims(g, nr, dims, false), 1, (const int64_t[]){c})))
            return -1;
        if (needs[0]) {
            jg_tensor *t = jg_sub(jg_sub(g, jg_mean_dims(g, nr, dims, true)),
                                  jg_mul(xhat, jg_mean_dims(gxh, nr, dims, true)));
            jg_tensor *scale = a->i[0] ? jg_mul(invstd, per_channel(in[1], nd, c)) : invstd;
            if (!(gx = t && scale ? jg_mul(t, scale) : NULL))
                return -1;
        }
    }
    /* the statistics' gradient: row 0 the mean's, row 1 the variance's */
    jg_tensor *gmean = gout[1] ? jg_slice(gout[1], 0, 0, 1) : NULL;
    jg_tensor *gvar = gout[1] ? jg_slice(gout[1], 0, 1, 2) : NULL;
    if (needs[0] && gmean) {
        jg_tensor *gm = jg_mul_scalar(per_channel(gmean, nd, c), 1.0 / (double)n);
        jg_tensor *e = gm ? jg_contiguous(jg_expand(gm, nd, m->shape)) : NULL;
        if (!(gx = e && gx ? jg_add(gx, e) : e))
            return -1;
    }
    if (needs[0] && gvar) {
        jg_tensor *gv = jg_mul(cen, jg_mul_scalar(per_channel(gvar, nd, c), 2.0 / (double)n));
        if (!(gx = gv && gx ? jg_add(gx, gv) : gv))
            return -1;
    }
    gin[0] = needs[0] ? gx : NULL;
    return 0;
}

/* running_mean = (1 - m) * running_mean + m * mean, running_var likewise
 * with the unbiased batch variance (var * n / (n - 1)), as PyTorch's
 * batch_norm_cpu_update_stats. */
static int update_stats(jg_tensor *rm, jg_tensor *rv, jg_tensor *mean, jg_tensor *var, int64_t n,
                        double momentum) {
    bool was = jg_set_grad_enabled(false);
    int rc = 0;
    if (rm) {
        jg_tensor *m = jg_to_dtype(jg_reshape(jg_detach(mean), 1, (const int64_t[]){jg_numel(rm)}),
                                   jg_dtype_of(rm));
        jg_tensor *nm =
            m ? jg_add(jg_mul_scalar(m, momentum), jg_mul_scalar(rm, 1.0 - momentum)) : NULL;
        rc = nm ? jg_copy_(rm, nm) : -1;
    }
    if (rc == 0 && rv) {
        jg_tensor *s = jg_reshape(jg_detach(var), 1, (const int64_t[]){jg_numel(rv)});
        jg_tensor *uv =
            s ? jg_to_dtype(jg_mul_scalar(s, (double)n / (double)(n - 1)), jg_dtype_of(rv)) : NULL;
        jg_tensor *nv =
            uv ? jg_add(jg_mul_scalar(uv, momentum), jg_mul_scalar(rv, 1.0 - momentum)) : NULL;
        rc = nv ? jg_copy_(rv, nv) : -1;
    }
    jg_set_grad_enabled(was);
    return rc;
}

jg_tensor *jg_batch_norm(jg_tensor *x, jg_tensor *running_mean, jg_tensor *running_var,
                         jg_tensor *weight, jg_tensor *bias, bool training, double momentum,
                         double eps) {
    if (!x)
        return jg_errorf_null("jg_batch_norm: NULL input");
    int nd = jg_ndim(x);
    if (nd < 2)
        return jg_errorf_null("batch_norm: expected an input with at least 2 dims (N, C, ...), "
                              "got %d",
                              nd);
    jg_dtype dt = jg_dtype_of(x);
    if (dt != JG_F32 && dt != JG_F64)
        return jg_errorf_null("\"batch_norm\" not implemented for '%s'", jg_dtype_name(dt));
    int64_t c = jg_shape(x)[1];
    const char *names[4] = {"running_mean", "running_var", "weight", "bias"};
    jg_tensor *vecs[4] = {running_mean, running_var, weight, bias};
    for (int k = 0; k < 4; k++)
        if (vecs[k] && jg_numel(vecs[k]) != c)
            return jg_errorf_null("%s should contain %lld elements not %lld", names[k],
                                  (long long)c, (long long)jg_numel(vecs[k]));
    for (int k = 0; k < 4; k++)
        if (vecs[k] && jg_dtype_of(vecs[k]) != JG_F32 && jg_dtype_of(vecs[k]) != JG_F64)
            return jg_errorf_null("batch_norm: %s must be a floating tensor, got %s", names[k],
                                  jg_dtype_name(jg_dtype_of(vecs[k])));
    if (!training && (!running_mean || !running_var))
        return jg_errorf_null("%s must be defined in evaluation mode",
                              running_mean ? "running_var" : "running_mean");
    int64_t n = jg_numel(x) / (c ? c : 1);
    if (training && n <= 1) {
        char s[256];
        shape_str(x, s, sizeof s);
        return jg_errorf_null("Expected more than 1 value per channel when training, got input "
                              "size %s",
                              s);
    }
    jg_scope_push();
    jg_tensor *y;
    if (training) { /* weight and bias inside the row, as PyTorch's node */
        jg_attrs at = {.n = 2, .s = eps};
        at.i[0] = weight != NULL;
        at.i[1] = bias != NULL;
        jg_tensor *w1 = weight ? jg_reshape(weight, 1, (const int64_t[]){c}) : x;
        jg_tensor *b1 = bias ? jg_reshape(bias, 1, (const int64_t[]){c}) : x;
        jg_tensor *in[3] = {x, w1, b1}, *out[2] = {NULL, NULL};
        if (!w1 || !b1 || jg_op_call(JG_OP_BATCH_NORM, &at, in, out) < 0)
            y = NULL;
        else
            y = out[0];
        if (y && (running_mean || running_var) &&
            update_stats(running_mean, running_var, jg_slice(out[1], 0, 0, 1),
                         jg_slice(out[1], 0, 1, 2), n, momentum) < 0)
            y = NULL;
    } else {
        jg_tensor *rm = per_channel(jg_to_dtype(running_mean, dt), nd, c);
        jg_tensor *rv = per_channel(jg_to_dtype(running_var, dt), nd, c);
        y = rm && rv ? jg_div(jg_sub(x, rm), jg_sqrt(jg_add_scalar(rv, eps))) : NULL;
        if (y && weight)
            y = jg_mul(y, per_channel(weight, nd, c));
        if (y && bias)
            y = jg_add(y, per_channel(bias, nd, c));
    }
    jg_keep(y);
    jg_scope_pop();
    return jg_scope_track(y);
}
