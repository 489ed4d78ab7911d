/* surface2 ops: min (all elements / over one dim), amax / amin over a dim
 * list, and var_mean / std_mean as single two-output ops (PyTorch's
 * VarMeanBackward0 / StdMeanBackward0 nodes).
 *
 * min mirrors max (ops/reduce.c): the first NaN, else the first minimum; the
 * full reduction shares its gradient evenly among the ties, min over a dim
 * sends it to the index it returned.  amax / amin split the gradient evenly
 * among the ties of each reduced slice, as PyTorch's scale_grad_by_count. */
#include "autograd/node.h"
#include "core/tensor.h"
#include "ops/decls.h"
#include "ops/sum_order.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

/* ---- min of all elements ---- */

int jg_infer_min_all(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    (void)a;
    int64_t n = 1;
    for (int d = 0; d < in[0].ndim; d++)
        n *= in[0].shape[d];
    if (n == 0)
        return jg_errorf("min(): Expected reduction dim to be specified for input.numel() == 0. "
                         "Specify the reduction dim with the 'dim' argument.");
    memset(&out[0], 0, sizeof out[0]);
    out[0].dtype = in[0].dtype;
    return 0;
}

/* The first NaN, else the first minimum, in row-major order. */
#define MIN_ALL(T)                                                                                 \
    do {                                                                                           \
        T best = *(const T *)base;                                                                 \
        for (int64_t i = 0; i < x->numel; i++) {                                                   \
            int64_t off = 0;                                                                       \
            for (int d = 0; d < x->ndim; d++)                                                      \
                off += idx[d] * x->stride[d];                                                      \
            T v = ((const T *)base)[off];                                                          \
            if (!(v >= best)) {                                                                    \
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
int jg_k_min_all(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    (void)a;
    const jg_tensor *x = in[0];
    if (jg_max_all_fast(x, out[0], true))
        return 0;
    int64_t idx[JG_MAX_DIMS] = {0};
    const char *base = jg_tensor_ptr(x);
    if (x->dtype == JG_F32)
        MIN_ALL(float);
    else if (x->dtype == JG_F64)
        MIN_ALL(double);
    else if (x->dtype == JG_I64)
        MIN_ALL(int64_t);
    else if (x->dtype == JG_I32)
        MIN_ALL(int32_t);
    else
        MIN_ALL(bool);
    return 0;
}
#pragma GCC diagnostic pop

/* ---- min over one dim ---- */

int jg_infer_min_dim(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    int nd = in[0].ndim;
    int64_t d = a->i[0];
    if (a->n != 1 || d < 0 || d >= (nd ? nd : 1))
        return jg_errorf("min(): bad dim %lld for a %d-d input", (long long)d, nd);
    if (nd > 0 && in[0].shape[d] == 0)
        return jg_errorf("min(): Expected reduction dim %lld to have non-zero size.", (long long)d);
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

/* The first strictly smaller value wins; the first NaN wins and ends the scan. */
#define MIN_SCAN(T)                                                                                \
    do {                                                                                           \
        const char *p = (const char *)src;                                                         \
        T best = *(const T *)p;                                                                    \
        int64_t bi = 0;                                                                            \
        for (int64_t i = 0; i < len; i++) {                                                        \
            T v = *(const T *)(p + i * step);                                                      \
            if (!(v >= best)) {                                                                    \
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
static void min_scan(jg_dtype dt, const void *src, int64_t len, int64_t step, void *vals,
                     int64_t *idx, int64_t o) {
    if (dt == JG_F32)
        MIN_SCAN(float);
    else if (dt == JG_F64)
        MIN_SCAN(double);
    else if (dt == JG_I64)
        MIN_SCAN(int64_t);
    else if (dt == JG_I32)
        MIN_SCAN(int32_t);
    else
        MIN_SCAN(bool);
}
#pragma GCC diagnostic pop

int jg_k_min_dim(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    const jg_tensor *x = in[0];
    int dim = (int)a->i[0];
    int64_t es = (int64_t)jg_dtype_size(x->dtype);
    int64_t len = x->ndim ? x->shape[dim] : 1;
    int64_t step = x->ndim ? x->stride[dim] * es : 0;
    int64_t outer = x->ndim ? x->numel / (len ? len : 1) : 1;
    if (x->numel == 0)
        return 0; /* another dim is empty: so is the output */
    if (jg_max_dim_fast(x, dim, out[0], out[1], true))
        return 0;
    int64_t idx[JG_MAX_DIMS] = {0};
    const char *base = jg_tensor_ptr(x);
    void *vals = jg_tensor_ptr(out[0]);
    int64_t *ind = (int64_t *)jg_tensor_ptr(out[1]);
    for (int64_t o = 0; o < outer; o++) {
        int64_t off = 0;
        for (int d = 0; d < x->ndim; d++)
            off += idx[d] * x->stride[d];
        min_scan(x->dtype, base + off * es, len, step, vals, ind, o);
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

/* ---- amax / amin over attrs.i[0..n) (sorted; n == 0: every dim) ---- */

static void amax_mask(const jg_attrs *a, int ndim, bool *mask) {
    memset(mask, 0, sizeof(bool) * JG_MAX_DIMS);
    for (int d = 0; d < ndim; d++)
        mask[d] = a->n == 0;
    for (int k = 0; k < a->n; k++)
        if (a->i[k] < ndim)
            mask[a->i[k]] = true;
}

static int infer_amax(const char *fn, const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    int nd = in[0].ndim;
    for (int k = 0; k < a->n; k++)
        if (a->i[k] < 0 || a->i[k] >= (nd ? nd : 1) || (k && a->i[k] <= a->i[k - 1]))
            return jg_errorf("%s(): bad dim list", fn);
    bool mask[JG_MAX_DIMS];
    amax_mask(a, nd, mask);
    int64_t n = 1;
    for (int d = 0; d < nd; d++)
        n *= in[0].shape[d];
    if (n == 0) {
        if (a->n == 0)
            return jg_errorf("%s(): Expected reduction dim to be specified for input.numel() == 0. "
                             "Specify the reduction dim with the 'dim' argument.",
                             fn);
        for (int d = 0; d < nd; d++)
            if (mask[d] && in[0].shape[d] == 0)
                return jg_errorf("%s(): Expected reduction dim %d to have non-zero size.", fn, d);
    }
    memset(&out[0], 0, sizeof out[0]);
    out[0].dtype = in[0].dtype;
    for (int d = 0; d < nd; d++) {
        if (!mask[d])
            out[0].shape[out[0].ndim++] = in[0].shape[d];
        else if (a->keepdim)
            out[0].shape[out[0].ndim++] = 1;
    }
    return 0;
}

int jg_infer_amax(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    return infer_amax("amax", a, in, out);
}

int jg_infer_amin(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    return infer_amax("amin", a, in, out);
}

/* Every input element in row-major order against its output slot; the first
 * element of a slot initialises it, a NaN sticks. */
#define AMAX_LOOP(T, BETTER)                                                                       \
    do {                                                                                           \
        T *o = (T *)jg_tensor_ptr(out[0]);                                                         \
        const T *base = (const T *)jg_tensor_ptr(x);                                               \
        for (int64_t i = 0; i < x->numel; i++) {                                                   \
            int64_t off = 0, oo = 0;                                                               \
            bool first = true;                                                                     \
            for (int d = 0; d < x->ndim; d++) {                                                    \
                off += idx[d] * x->stride[d];                                                      \
                oo += idx[d] * ost[d];                                                             \
                if (mask[d] && idx[d])                                                             \
                    first = false;                                                                 \
            }                                                                                      \
            T v = base[off];                                                                       \
            if (first || (o[oo] == o[oo] && (BETTER)))                                             \
                o[oo] = v;                                                                         \
            for (int d = x->ndim - 1; d >= 0; d--) {                                               \
                if (++idx[d] < x->shape[d])                                                        \
                    break;                                                                         \
                idx[d] = 0;                                                                        \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* Dense float inputs reduced over every dim or over one dim: the values of
 * max / min's vectorized paths, which follow the same rules (the first NaN,
 * else the first extremum: the same bits as AMAX_LOOP).  False if x is not
 * such an input. */
static bool amax_fast(const jg_tensor *x, const bool *mask, jg_tensor *out, bool min) {
    int nred = 0, dim = 0;
    for (int d = 0; d < x->ndim; d++)
        if (mask[d])
            nred++, dim = d;
    if (nred == x->ndim)
        return jg_max_all_fast(x, out, min);
    return nred == 1 && jg_max_dim_fast(x, dim, out, NULL, min);
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wtautological-compare"
static int amax_kernel(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out, bool is_max) {
    const jg_tensor *x = in[0];
    bool mask[JG_MAX_DIMS];
    amax_mask(a, x->ndim, mask);
    /* the output's element stride for each input dim (0 along reduced dims) */
    int64_t ost[JG_MAX_DIMS] = {0}, s = 1;
    for (int d = x->ndim - 1; d >= 0; d--) {
        if (!mask[d]) {
            ost[d] = s;
            s *= x->shape[d];
        }
    }
    int64_t idx[JG_MAX_DIMS] = {0};
    if (x->numel == 0)
        return 0;
    if (amax_fast(x, mask, out[0], !is_max))
        return 0;
    if (is_max) {
        if (x->dtype == JG_F32)
            AMAX_LOOP(float, v != v || v > o[oo]);
        else if (x->dtype == JG_F64)
            AMAX_LOOP(double, v != v || v > o[oo]);
        else if (x->dtype == JG_I64)
            AMAX_LOOP(int64_t, v > o[oo]);
        else if (x->dtype == JG_I32)
            AMAX_LOOP(int32_t, v > o[oo]);
        else
            AMAX_LOOP(bool, v > o[oo]);
    } else {
        if (x->dtype == JG_F32)
            AMAX_LOOP(float, v != v || v < o[oo]);
        else if (x->dtype == JG_F64)
            AMAX_LOOP(double, v != v || v < o[oo]);
        else if (x->dtype == JG_I64)
            AMAX_LOOP(int64_t, v < o[oo]);
        else if (x->dtype == JG_I32)
            AMAX_LOOP(int32_t, v < o[oo]);
        else
            AMAX_LOOP(bool, v < o[oo]);
    }
    return 0;
}
#pragma GCC diagnostic pop

int jg_k_amax(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    return amax_kernel(a, in, out, true);
}

int jg_k_amin(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    return amax_kernel(a, in, out, false);
}

/* PyTorch's scale_grad_by_count: with the result and g restored to the
 * keepdim shape, mask = (x == result), gin = (g / mask.sum(dims)) * mask.
 * A NaN result matches nothing, so its slice gets NaN, as in PyTorch. */
int jg_vjp_amax(VJP_ARGS) {
    (void)needs;
    const jg_meta *m = &meta[0];
    bool mask[JG_MAX_DIMS];
    amax_mask(a, m->ndim, mask);
    int64_t ks[JG_MAX_DIMS];
    int dims[JG_MAX_DIMS], nd = 0;
    for (int d = 0; d < m->ndim; d++) {
        ks[d] = mask[d] ? 1 : m->shape[d];
        if (mask[d])
            dims[nd++] = d;
    }
    jg_tensor *r = jg_reshape(out[0], m->ndim, ks);
    jg_tensor *g = r ? jg_reshape(gout[0], m->ndim, ks) : NULL;
    jg_tensor *eq = g ? jg_eq(in[0], r) : NULL;
    jg_tensor *mk = eq ? jg_to_dtype(eq, m->dtype) : NULL;
    jg_tensor *count = mk ? jg_sum_dims(mk, nd, dims, true) : NULL;
    jg_tensor *share = count ? jg_div(g, count) : NULL;
    gin[0] = share ? jg_mul(share, mk) : NULL;
    return gin[0] ? 0 : -1;
}

/* ---- var_mean / std_mean: attrs as var's (dims, keepdim, correction) ---- */

static jg_attrs mean_attrs(const jg_attrs *a) {
    jg_attrs m = *a;
    m.s = 0;
    return m;
}

static int infer_moments(const char *fn, const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    if (!jg_dtype_is_float(in[0].dtype))
        return jg_errorf("%s only support floating point and complex dtypes", fn);
    if (jg_infer_var(a, in, &out[0]) < 0)
        return -1;
    out[1] = out[0];
    return 0;
}

int jg_infer_var_mean(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    return infer_moments("var_mean", a, in, out);
}

int jg_infer_std_mean(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    return infer_moments("std_mean", a, in, out);
}

int jg_k_var_mean(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    jg_attrs ma = mean_attrs(a);
    if (jg_k_var(a, in, &out[0]) < 0)
        return -1;
    return jg_k_mean(&ma, in, &out[1]);
}

int jg_k_std_mean(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    jg_attrs ma = mean_attrs(a);
    if (jg_k_std(a, in, &out[0]) < 0)
        return -1;
    return jg_k_mean(&ma, in, &out[1]);
}

/* PyTorch's var_mean_backward / std_mean_backward: the var (std) gradient
 * plus the mean's, each only where its output got a gradient. */
static int vm_vjp(VJP_ARGS, bool sd) {
    jg_tensor *gv = NULL, *gm = NULL;
    if (gout[0] && (sd ? jg_vjp_std : jg_vjp_var)(a, meta, in, out, gout, needs, &gv) < 0)
        return -1;
    if (gout[1]) {
        jg_attrs ma = mean_attrs(a);
        if (jg_vjp_mean(&ma, meta, in, out, &gout[1], needs, &gm) < 0)
            return -1;
    }
    gin[0] = gv && gm ? jg_add(gv, gm) : gv ? gv : gm;
    return gin[0] || (!gv && !gm) ? 0 : -1;
}

int jg_vjp_var_mean(VJP_ARGS) {
    return vm_vjp(a, meta, in, out, gout, needs, gin, false);
}

int jg_vjp_std_mean(VJP_ARGS) {
    return vm_vjp(a, meta, in, out, gout, needs, gin, true);
}

/* ---- clamp with number bounds: attrs.i[0] / i[1] whether min / max apply,
 * min in attrs.s, max's bits in attrs.i[2] (one node, PyTorch's
 * ClampBackward1; the values are clamp_min's then clamp_max's kernels') ---- */

static void clamp_split(const jg_attrs *a, jg_attrs *lo, jg_attrs *hi) {
    memset(lo, 0, sizeof *lo);
    memset(hi, 0, sizeof *hi);
    lo->s = a->s;
    memcpy(&hi->s, &a->i[2], sizeof hi->s);
}

int jg_k_clamp(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    jg_attrs lo, hi;
    clamp_split(a, &lo, &hi);
    if (a->i[0] && jg_k_clamp_min(&lo, in, out) < 0)
        return -1;
    if (!a->i[1])
        return 0;
    return jg_k_clamp_max(&hi, a->i[0] ? out : in, out);
}

/* PyTorch's clamp_backward: the gradient where min <= x <= max, else 0 */
int jg_vjp_clamp(VJP_ARGS) {
    jg_attrs lo, hi;
    clamp_split(a, &lo, &hi);
    jg_tensor *g = gout[0];
    if (a->i[0] && jg_vjp_clamp_min(&lo, meta, in, out, &g, needs, &g) < 0)
        return -1;
    if (a->i[1] && jg_vjp_clamp_max(&hi, meta, in, out, &g, needs, &g) < 0)
        return -1;
    gin[0] = g;
    return 0;
}

static int clamp_attrs(bool has_min, double min, bool has_max, double max, jg_attrs *at) {
    if (!has_min && !has_max)
        return jg_errorf("torch.clamp: At least one of 'min' or 'max' must not be None");
    memset(at, 0, sizeof *at);
    at->n = 3;
    at->s = has_min ? min : 0.0;
    at->i[0] = has_min;
    at->i[1] = has_max;
    if (has_max)
        memcpy(&at->i[2], &max, sizeof max);
    return 0;
}

jg_tensor *jg_clamp(jg_tensor *a, bool has_min, double min, bool has_max, double max) {
    jg_attrs at;
    if (clamp_attrs(has_min, min, has_max, max, &at) < 0)
        return NULL;
    return jg_op1(JG_OP_CLAMP, &at, a, NULL);
}

int jg_clamp_(jg_tensor *a, bool has_min, double min, bool has_max, double max) {
    jg_attrs at;
    if (clamp_attrs(has_min, min, has_max, max, &at) < 0)
        return -1;
    return jg_inplace_op("clamp_", JG_OP_CLAMP, &at, a, NULL);
}

int jg_clamp_min_(jg_tensor *a, double min) {
    jg_attrs at = {.s = min};
    return jg_inplace_op("clamp_min_", JG_OP_CLAMP_MIN, &at, a, NULL);
}

int jg_clamp_max_(jg_tensor *a, double max) {
    jg_attrs at = {.s = max};
    return jg_inplace_op("clamp_max_", JG_OP_CLAMP_MAX, &at, a, NULL);
}

/* ---- public entry points ---- */

jg_tensor *jg_min(jg_tensor *a) {
    return jg_op1(JG_OP_MIN_ALL, NULL, a, NULL);
}

int jg_min_dim(jg_tensor *a, int dim, bool keepdim, jg_tensor **values, jg_tensor **indices) {
    if (!a || !values || !indices)
        return jg_errorf("jg_min_dim: NULL argument");
    int d = jg_wrap_dim(dim, a->ndim);
    if (d < 0)
        return -1;
    jg_attrs at = {.n = 1, .keepdim = keepdim};
    at.i[0] = d;
    jg_tensor *out[2];
    if (jg_op_call(JG_OP_MIN_DIM, &at, &a, out) < 0)
        return -1;
    *values = out[0];
    *indices = out[1];
    return 0;
}

static jg_tensor *amax_call(jg_opcode op, jg_tensor *a, int n_dims, const int *dims, bool keepdim) {
    const char *fn = op == JG_OP_AMAX ? "amax" : "amin";
    if (!a)
        return jg_errorf_null("%s(): tensor is NULL", fn);
    if (n_dims < 0 || n_dims > JG_MAX_DIMS || (n_dims > 0 && !dims))
        return jg_errorf_null("%s(): bad dim list", fn);
    bool seen[JG_MAX_DIMS] = {0};
    for (int k = 0; k < n_dims; k++) {
        int d = jg_wrap_dim(dims[k], a->ndim);
        if (d < 0)
            return NULL;
        if (a->ndim == 0)
            continue;
        if (seen[d])
            return jg_errorf_null("dim %d appears multiple times in the list of dims", d);
        seen[d] = true;
    }
    jg_attrs at = {.keepdim = keepdim};
    for (int d = 0; d < a->ndim; d++)
        if (seen[d])
            at.i[at.n++] = d;
    return jg_op1(op, &at, a, NULL);
}

jg_tensor *jg_amax(jg_tensor *a, int n_dims, const int *dims, bool keepdim) {
    return amax_call(JG_OP_AMAX, a, n_dims, dims, keepdim);
}

jg_tensor *jg_amin(jg_tensor *a, int n_dims, const int *dims, bool keepdim) {
    return amax_call(JG_OP_AMIN, a, n_dims, dims, keepdim);
}

/* ---- cross_entropy with class-probability targets ----
 * PyTorch 1.13's cross_entropy_loss_prob_target, composed: logp =
 * log_softmax(x, class dim), target smoothed as t * (1 - eps) + eps / C,
 * loss = -(logp * t [* weight]) summed over the class dim (none), over all
 * (sum), or that sum / (numel / C) (mean; NaN for an empty input). */
static int check_probs(jg_tensor *x, jg_tensor *t, const jg_loss_options *o) {
    if (!x || !t || !o)
        return jg_errorf("cross_entropy: NULL argument");
    if ((int)o->reduction < JG_REDUCTION_MEAN || (int)o->reduction > JG_REDUCTION_NONE)
        return jg_errorf("cross_entropy: invalid reduction %d", (int)o->reduction);
    if (!(o->label_smoothing >= 0.0 && o->label_smoothing <= 1.0))
        return jg_errorf("label_smoothing must be between 0.0 and 1.0. Got: %g",
                         o->label_smoothing);
    if (x->ndim < 1 || !jg_same_shape(x, t)) {
        char s1[160], s2[160];
        jg_format_shape(s1, sizeof s1, x->ndim, x->shape);
        jg_format_shape(s2, sizeof s2, t->ndim, t->shape);
        return jg_errorf("cross_entropy: a target of class probabilities must have the input's "
                         "shape %s (at least 1-D), got %s",
                         s1, s2);
    }
    if (!jg_dtype_is_float(t->dtype))
        return jg_errorf("Expected floating point type for target with class probabilities, got %s",
                         jg_dtype_torch_name(t->dtype));
    if (o->ignore_index >= 0)
        return jg_errorf("ignore_index is not supported for floating point target");
    if (!jg_dtype_is_float(x->dtype))
        return jg_errorf("\"%s\" not implemented for '%s'",
                         x->ndim <= 2 ? "log_softmax_lastdim_kernel_impl" : "host_softmax",
                         jg_dtype_torch_name(x->dtype));
    int64_t c = x->shape[x->ndim == 1 ? 0 : 1];
    jg_tensor *w = o->weight;
    if (w && (w->ndim != 1 || w->shape[0] != c))
        return jg_errorf("cross_entropy: weight tensor should be defined either for all %lld "
                         "classes or no classes but got weight tensor of shape: [%lld]",
                         (long long)c, (long long)(w->ndim ? w->shape[0] : 1));
    return 0;
}

static jg_tensor *ce_probs(jg_tensor *x, jg_tensor *t, const jg_loss_options *o) {
    int cd = x->ndim == 1 ? 0 : 1;
    int64_t c = x->shape[cd];
    double eps = o->label_smoothing;
    jg_tensor *logp = jg_log_softmax(x, cd);
    jg_tensor *tg = eps > 0.0 ? jg_add_scalar(jg_mul_scalar(t, 1.0 - eps), eps / (double)c) : t;
    jg_tensor *p = logp && tg ? jg_mul(logp, tg) : NULL;
    if (p && o->weight) {
        int64_t ws[JG_MAX_DIMS];
        for (int d = 0; d < x->ndim; d++)
            ws[d] = d == cd ? c : 1;
        jg_tensor *wv = jg_reshape(o->weight, x->ndim, ws);
        p = wv ? jg_mul(p, wv) : NULL;
    }
    if (!p)
        return NULL;
    switch (o->reduction) {
    case JG_REDUCTION_NONE:
        return jg_neg(jg_sum_dims(p, 1, &cd, false));
    case JG_REDUCTION_SUM:
        return jg_neg(jg_sum(p));
    default: {
        int64_t rows = c ? x->numel / c : 0;
        jg_tensor *n = jg_scalar(jg_dtype_of(p), (double)rows);
        return n ? jg_div(jg_neg(jg_sum(p)), n) : NULL;
    }
    }
}

jg_tensor *jg_cross_entropy_probs(jg_tensor *logits, jg_tensor *target, const jg_loss_options *o) {
    if (check_probs(logits, target, o) < 0)
        return NULL;
    jg_scope_push();
    jg_tensor *r = ce_probs(logits, target, o);
    jg_keep(r);
    jg_scope_pop();
    return jg_scope_track(r);
}

/* ---- split / split_with_sizes / unbind: views (jg_narrow) named after
 * PyTorch's nodes (SplitBackward0, SplitWithSizesBackward0,
 * UnbindBackward0); the pieces are new references in the current scope ---- */

static int split_dim(const char *fn, jg_tensor *a, int dim, jg_tensor **out) {
    if (!a || !out)
        return jg_errorf("%s: NULL argument", fn);
    if (a->ndim == 0) {
        jg_errorf("Dimension out of range (expected to be in range of [-1, 0], but got %d)", dim);
        return -1;
    }
    return jg_wrap_dim(dim, a->ndim);
}

static int pieces(jg_tensor *a, int d, int n, const int64_t *sizes, const char *name,
                  jg_tensor **out) {
    int64_t start = 0;
    for (int k = 0; k < n; k++) {
        if (!(out[k] = jg_narrow(a, d, start, sizes[k]))) {
            for (int j = 0; j < k; j++)
                jg_release(jg_keep(out[j]));
            return -1;
        }
        jg_autograd_name_node(out[k], name);
        start += sizes[k];
    }
    return n;
}

int jg_split_with_sizes(jg_tensor *a, int dim, int n, const int64_t *sizes, jg_tensor **out) {
    int d = split_dim("split_with_sizes", a, dim, out);
    if (d < 0)
        return -1;
    if (n < 1 || !sizes)
        return jg_errorf("split_with_sizes: expected at least one size");
    int64_t total = 0;
    bool neg = false;
    for (int k = 0; k < n; k++) {
        total += sizes[k];
        neg |= sizes[k] < 0;
    }
    if (neg || total != a->shape[d]) {
        char buf[256] = "[";
        size_t len = 1;
        for (int k = 0; k < n && len < sizeof buf - 24; k++)
            len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%lld", k ? ", " : "",
                                    (long long)sizes[k]);
        snprintf(buf + len, sizeof buf - len, "]");
        return jg_errorf("split_with_sizes expects split_sizes to sum exactly to %lld (input "
                         "tensor's size at dimension %d), but got split_sizes=%s",
                         (long long)a->shape[d], d, buf);
    }
    return pieces(a, d, n, sizes, "SplitWithSizesBackward0", out);
}

int jg_split(jg_tensor *a, int dim, int64_t split_size, int max_out, jg_tensor **out) {
    int d = split_dim("split", a, dim, out);
    if (d < 0)
        return -1;
    int64_t len = a->shape[d];
    if (split_size < 0)
        return jg_errorf("split expects split_size be non-negative, but got split_size=%lld",
                         (long long)split_size);
    if (split_size == 0 && len != 0)
        return jg_errorf("split_size can only be 0 if dimension size is 0, but got dimension "
                         "size of %lld",
                         (long long)len);
    int64_t n = split_size ? (len + split_size - 1) / split_size : 1;
    if (n == 0)
        n = 1; /* an empty dim: one empty piece */
    if (n > max_out)
        return jg_errorf("split: %lld pieces, room for %d", (long long)n, max_out);
    int64_t *sizes = malloc(sizeof(int64_t) * (size_t)n);
    if (!sizes)
        return jg_errorf("out of memory");
    for (int64_t k = 0; k < n; k++)
        sizes[k] = split_size
                       ? (len - k * split_size < split_size ? len - k * split_size : split_size)
                       : 0;
    int rc = pieces(a, d, (int)n, sizes, "SplitBackward0", out);
    free(sizes);
    return rc;
}

int jg_unbind(jg_tensor *a, int dim, int max_out, jg_tensor **out) {
    int d = split_dim("unbind", a, dim, out);
    if (d < 0)
        return -1;
    int64_t n = a->shape[d];
    if (n > max_out)
        return jg_errorf("unbind: %lld pieces, room for %d", (long long)n, max_out);
    int64_t shape[JG_MAX_DIMS];
    for (int k = 0, j = 0; k < a->ndim; k++)
        if (k != d)
            shape[j++] = a->shape[k];
    for (int64_t k = 0; k < n; k++) {
        jg_tensor *s = jg_narrow(a, d, k, 1);
        if (!s || !(out[k] = jg_reshape(s, a->ndim - 1, shape))) {
            for (int64_t j = 0; j < k; j++)
                jg_release(jg_keep(out[j]));
            return -1;
        }
        jg_autograd_name_node(out[k], "UnbindBackward0");
    }
    return (int)n;
}

/* ---- masked_fill_ (one node, MaskedFillBackward0) and x[mask] = value
 * (the same, named IndexPutBackward0 as PyTorch's index_put_) ---- */

int jg_masked_fill_(jg_tensor *a, jg_tensor *mask, double value) {
    jg_attrs at = {.s = value};
    return jg_inplace_op("masked_fill_", JG_OP_MASKED_FILL, &at, a, mask);
}

int jg_index_put_mask_(jg_tensor *a, jg_tensor *mask, double value) {
    if (jg_masked_fill_(a, mask, value) < 0)
        return -1;
    if (!a->view) /* (a view's base becomes CopySlices) */
        jg_autograd_name_node(a, "IndexPutBackward0");
    return 0;
}
