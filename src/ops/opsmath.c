/* The opsmath ops: the VJPs of sin, cos, erf, clamp_min/max, maximum,
 * minimum and pow (their kernels come from elementwise.def), and prod, var,
 * std, norm, cumsum, argmax/argmin, topk and sort (shape rules, kernels and
 * VJPs here), plus their public functions.
 *
 * VJPs follow PyTorch 1.13's derivatives.yaml, written with jitgrad ops so
 * that double backward and jg_compile see them.  Reductions walk every
 * output's inputs in the row-major order of the input's reduced dims,
 * sequentially (var, std and norm accumulate in double, as PyTorch's CPU
 * kernels accumulate float in double). */
#include "core/iter.h"
#include "ops/decls.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SUM_TO(g, k) ((g) ? jg_sum_to((g), meta[k].ndim, meta[k].shape) : NULL)
#define CHECK(k)                                                                                   \
    if (needs[k] && !gin[k])                                                                       \
    return -1

/* ------------------------------------------------------------ elementwise VJPs */

int jg_vjp_sin(VJP_ARGS) { /* grad * cos(x) */
    UNUSED_ARGS;
    gin[0] = jg_mul(gout[0], jg_cos(in[0]));
    CHECK(0);
    return 0;
}

int jg_vjp_cos(VJP_ARGS) { /* grad * -sin(x) */
    UNUSED_ARGS;
    gin[0] = jg_mul(gout[0], jg_neg(jg_sin(in[0])));
    CHECK(0);
    return 0;
}

int jg_vjp_erf(VJP_ARGS) { /* 2 / sqrt(pi) * exp(-(x^2)) * grad */
    UNUSED_ARGS;
    jg_tensor *e = jg_exp(jg_neg(jg_pow_scalar(in[0], 2.0)));
    gin[0] = jg_mul(jg_mul_scalar(e, 2.0 / sqrt(3.14159265358979323846)), gout[0]);
    CHECK(0);
    return 0;
}

/* where(keep, grad, 0): the zero a 0-d tensor of grad's dtype */
static jg_tensor *grad_where(jg_tensor *keep, jg_tensor *g) {
    jg_tensor *zero = keep && g ? jg_scalar(jg_dtype_of(g), 0.0) : NULL;
    return zero ? jg_where(keep, g, zero) : NULL;
}

int jg_vjp_clamp_min(VJP_ARGS) { /* where(x >= min, grad, 0) */
    UNUSED_ARGS;
    gin[0] = grad_where(jg_ge_scalar(in[0], a->s), gout[0]);
    CHECK(0);
    return 0;
}

int jg_vjp_clamp_max(VJP_ARGS) { /* where(x <= max, grad, 0) */
    UNUSED_ARGS;
    gin[0] = grad_where(jg_le_scalar(in[0], a->s), gout[0]);
    CHECK(0);
    return 0;
}

/* maximum: self gets where(a == b, grad / 2, grad).masked_fill(a < b, 0),
 * other the same masked where a > b (minimum: the masks swapped).  A tie
 * shares the gradient evenly. */
static int vjp_max_min(VJP_ARGS, bool is_max) {
    UNUSED_ARGS;
    jg_tensor *g = gout[0];
    jg_tensor *eq = jg_eq(in[0], in[1]);
    jg_tensor *split = eq ? jg_where(eq, jg_mul_scalar(g, 0.5), g) : NULL;
    if (!split)
        return -1;
    if (needs[0]) {
        jg_tensor *lose = is_max ? jg_lt(in[0], in[1]) : jg_gt(in[0], in[1]);
        gin[0] = lose ? SUM_TO(jg_masked_fill(split, lose, 0.0), 0) : NULL;
    }
    if (needs[1]) {
        jg_tensor *lose = is_max ? jg_gt(in[0], in[1]) : jg_lt(in[0], in[1]);
        gin[1] = lose ? SUM_TO(jg_masked_fill(split, lose, 0.0), 1) : NULL;
    }
    CHECK(0);
    CHECK(1);
    return 0;
}

int jg_vjp_maximum(VJP_ARGS) {
    return vjp_max_min(a, meta, in, out, gout, needs, gin, true);
}

int jg_vjp_minimum(VJP_ARGS) {
    return vjp_max_min(a, meta, in, out, gout, needs, gin, false);
}

/* self: where(b == 0, 0, grad * (b * a^(b - 1)));
 * exponent: grad * where(a == 0 & b >= 0, 0, result * log(a)) */
int jg_vjp_pow(VJP_ARGS) {
    UNUSED_ARGS;
    jg_tensor *g = gout[0], *x = in[0], *e = in[1];
    if (needs[0]) {
        jg_tensor *zero = jg_scalar(jg_dtype_of(g), 0.0);
        jg_tensor *d = jg_mul(g, jg_mul(e, jg_pow(x, jg_add_scalar(e, -1.0))));
        jg_tensor *c = jg_eq_scalar(e, 0.0);
        gin[0] = zero && d && c ? SUM_TO(jg_where(c, zero, d), 0) : NULL;
    }
    if (needs[1]) {
        jg_tensor *zero = jg_scalar(jg_dtype_of(g), 0.0);
        jg_tensor *c = jg_logical_and(jg_eq_scalar(x, 0.0), jg_ge_scalar(e, 0.0));
        jg_tensor *d = jg_mul(out[0], jg_log(x));
        gin[1] = zero && c && d ? SUM_TO(jg_mul(g, jg_where(c, zero, d)), 1) : NULL;
    }
    CHECK(0);
    CHECK(1);
    return 0;
}

/* ------------------------------------------------------------ clamp with tensor bounds */

int jg_infer_clamp_t(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    if (a->n != 2 || !(a->i[0] || a->i[1]))
        return jg_errorf("torch.clamp: At least one of 'min' or 'max' must not be None");
    jg_meta t;
    if (jg_broadcast_shapes(&in[0], &in[1], &t) < 0 || jg_broadcast_shapes(&t, &in[2], &out[0]) < 0)
        return -1;
    out[0].dtype = in[0].dtype;
    return 0;
}

/* maximum(x, min) then minimum(., max), NaN from any operand propagating,
 * as PyTorch's clamp with tensor bounds computes */
#define CLAMP_ROW(TY, T)                                                                           \
    static void clamp_row_##TY(void *ctx, int64_t n, char **p, const int64_t *st) {                \
        const int64_t *f = ctx;                                                                    \
        for (int64_t i = 0; i < n; i++) {                                                          \
            T v = *(const T *)(p[1] + i * st[1]);                                                  \
            if (f[0]) {                                                                            \
                T lo = *(const T *)(p[2] + i * st[2]);                                             \
                v = v != v ? v : lo != lo ? lo : v < lo ? lo : v;                                  \
            }                                                                                      \
            if (f[1]) {                                                                            \
                T hi = *(const T *)(p[3] + i * st[3]);                                             \
                v = v != v ? v : hi != hi ? hi : hi < v ? hi : v;                                  \
            }                                                                                      \
            *(T *)(p[0] + i * st[0]) = v;                                                          \
        }                                                                                          \
    }
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wtautological-compare"
CLAMP_ROW(f32, float)
CLAMP_ROW(f64, double)
CLAMP_ROW(i64, int64_t)
CLAMP_ROW(i32, int32_t)
#pragma GCC diagnostic pop

int jg_k_clamp_t(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    static const jg_inner_fn rows[JG_NDTYPES] = {[JG_F32] = clamp_row_f32,
                                                 [JG_F64] = clamp_row_f64,
                                                 [JG_I64] = clamp_row_i64,
                                                 [JG_I32] = clamp_row_i32};
    jg_tensor *o = out[0];
    if (!rows[o->dtype])
        return jg_errorf("\"clamp_cpu\" not implemented for '%s'", jg_dtype_torch_name(o->dtype));
    if (o->numel == 0)
        return 0;
    char *base[4] = {jg_tensor_ptr(o), jg_tensor_ptr(in[0]), jg_tensor_ptr(in[1]),
                     jg_tensor_ptr(in[2])};
    int64_t st[4][JG_MAX_DIMS];
    for (int k = 0; k < 4; k++)
        jg_broadcast_strides(k ? in[k - 1] : o, o->ndim, o->shape, st[k]);
    int64_t flags[2] = {a->i[0], a->i[1]};
    jg_iter_run(o->ndim, o->shape, 4, base, st, rows[o->dtype], flags);
    return 0;
}

/* PyTorch 1.13's clamp_backward_min_max: x where min <= x <= max; min where
 * x < min (and min < max); max where x > max (or max < min) */
int jg_vjp_clamp_t(VJP_ARGS) {
    (void)out;
    jg_tensor *g = gout[0], *x = in[0], *lo = in[1], *hi = in[2];
    bool has_lo = a->i[0], has_hi = a->i[1];
    gin[0] = gin[1] = gin[2] = NULL; /* (a missing bound's slot is x itself: no share) */
    if (needs[0]) {
        jg_tensor *k = has_lo && has_hi ? jg_logical_and(jg_ge(x, lo), jg_le(x, hi))
                       : has_lo         ? jg_ge(x, lo)
                                        : jg_le(x, hi);
        gin[0] = SUM_TO(grad_where(k, g), 0);
        CHECK(0);
    }
    if (needs[1] && has_lo) {
        jg_tensor *k = has_hi ? jg_logical_and(jg_lt(x, lo), jg_lt(lo, hi)) : jg_lt(x, lo);
        gin[1] = SUM_TO(grad_where(k, g), 1);
        CHECK(1);
    }
    if (needs[2] && has_hi) {
        jg_tensor *k = has_lo ? jg_logical_or(jg_gt(x, hi), jg_lt(hi, lo)) : jg_gt(x, hi);
        gin[2] = SUM_TO(grad_where(k, g), 2);
        CHECK(2);
    }
    return 0;
}

/* ------------------------------------------------------------ helpers */

/* Which dims attrs.i[0..n) names (sorted, distinct, in range; n == 0 on a
 * 0-d input) into mask; -1 with a message otherwise. */
static int dims_mask(const char *fn, const jg_attrs *a, int ndim, bool *mask) {
    memset(mask, 0, sizeof(bool) * JG_MAX_DIMS);
    if (a->n < 0 || a->n > ndim)
        return jg_errorf("%s(): bad dim list (%d dims for a %d-d input)", fn, a->n, ndim);
    for (int k = 0; k < a->n; k++) {
        int64_t d = a->i[k];
        if (d < 0 || d >= ndim || (k > 0 && d <= a->i[k - 1]))
            return jg_errorf("%s(): dims must be sorted, distinct and in [0, %d)", fn, ndim);
        mask[d] = true;
    }
    return 0;
}

/* The output shape of a reduction over mask. */
static void reduced_meta(const jg_meta *in, const bool *mask, bool keepdim, jg_dtype dt,
                         jg_meta *out) {
    memset(out, 0, sizeof *out);
    out->dtype = dt;
    for (int d = 0; d < in->ndim; d++) {
        if (!mask[d])
            out->shape[out->ndim++] = in->shape[d];
        else if (keepdim)
            out->shape[out->ndim++] = 1;
    }
}

/* A dense copy of x in dtype dt with the dims of mask moved last (in their
 * order), so output element j of a reduction over mask reads the *m
 * consecutive elements from j * *m.  A new reference, or NULL. */
static jg_tensor *blocks(const jg_tensor *x, const bool *mask, jg_dtype dt, int64_t *m) {
    int nd = x->ndim, n = 0, perm[JG_MAX_DIMS];
    for (int d = 0; d < nd; d++)
        if (!mask[d])
            perm[n++] = d;
    for (int d = 0; d < nd; d++)
        if (mask[d])
            perm[n++] = d;
    int64_t shape[JG_MAX_DIMS], stride[JG_MAX_DIMS];
    *m = 1;
    for (int j = 0; j < nd; j++) {
        shape[j] = x->shape[perm[j]];
        stride[j] = x->stride[perm[j]];
        if (mask[perm[j]])
            *m *= shape[j];
    }
    jg_tensor *v = jg_tensor_view_of((jg_tensor *)x, nd, shape, stride, x->offset);
    jg_tensor *c = v ? jg_tensor_alloc(dt, nd, shape) : NULL;
    if (c)
        jg_copy_data(c, v);
    jg_release(v);
    return c;
}

/* The element offsets of the starts of t's lines along dim, in row-major
 * order of the other dims (t->numel / len of them; malloc'd, or NULL). */
static int64_t *line_starts(const jg_tensor *t, int dim, int64_t *count) {
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++)
        if (d != dim)
            n *= t->shape[d];
    int64_t *s = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (!s) {
        jg_errorf("out of memory");
        return NULL;
    }
    int64_t idx[JG_MAX_DIMS] = {0};
    for (int64_t o = 0; o < n; o++) {
        int64_t off = t->offset;
        for (int d = 0; d < t->ndim; d++)
            off += idx[d] * t->stride[d];
        s[o] = off;
        for (int d = t->ndim - 1; d >= 0; d--) {
            if (d == dim)
                continue;
            if (++idx[d] < t->shape[d])
                break;
            idx[d] = 0;
        }
    }
    *count = n;
    return s;
}

/* g (a reduction's gradient) in keepdim form: a tensor of the scope. */
static jg_tensor *keep_shape(const jg_attrs *a, const jg_meta *m, jg_tensor *g) {
    if (a->keepdim || !g)
        return g;
    int64_t k[JG_MAX_DIMS];
    memcpy(k, m->shape, sizeof k);
    for (int j = 0; j < a->n; j++)
        k[a->i[j]] = 1;
    return jg_reshape(g, m->ndim, k);
}

/* ------------------------------------------------------------ prod */

int jg_infer_prod(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    bool mask[JG_MAX_DIMS];
    if (dims_mask("prod", a, in[0].ndim, mask) < 0)
        return -1;
    jg_dtype d = in[0].dtype == JG_BOOL || in[0].dtype == JG_I32 ? JG_I64 : in[0].dtype;
    reduced_meta(&in[0], mask, a->keepdim, d, &out[0]);
    return 0;
}

#define PROD_LOOP(T)                                                                               \
    do {                                                                                           \
        const T *x = (const T *)jg_tensor_ptr(c);                                                  \
        T *o = (T *)jg_tensor_ptr(out[0]);                                                         \
        for (int64_t j = 0; j < out[0]->numel; j++) {                                              \
            T acc = 1;                                                                             \
            for (int64_t i = 0; i < m; i++)                                                        \
                acc *= x[j * m + i];                                                               \
            o[j] = acc;                                                                            \
        }                                                                                          \
    } while (0)

int jg_k_prod(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    bool mask[JG_MAX_DIMS];
    JG_ASSERT(dims_mask("prod", a, in[0]->ndim, mask) == 0);
    int64_t m;
    jg_tensor *c = blocks(in[0], mask, out[0]->dtype, &m);
    if (!c)
        return -1;
    if (out[0]->dtype == JG_F32)
        PROD_LOOP(float);
    else if (out[0]->dtype == JG_F64)
        PROD_LOOP(double);
    else
        PROD_LOOP(int64_t);
    jg_release(c);
    return 0;
}

/* grad * (the product of the other elements): exact where some are zero,
 * unlike PyTorch's result / input shortcut (which it takes only without
 * zeros).  A full reduction runs over the flattened input. */
int jg_vjp_prod(VJP_ARGS) {
    (void)out, (void)needs;
    const jg_meta *m = &meta[0];
    if (m->ndim == 0) {
        gin[0] = gout[0];
        return 0;
    }
    jg_tensor *x = in[0];
    jg_tensor *g = keep_shape(a, m, gout[0]);
    jg_attrs po = {.n = 1};
    if (a->n == 1) {
        po.i[0] = a->i[0];
    } else if (a->n > 1) { /* several dims: flatten them last, one dim */
        int perm[JG_MAX_DIMS], n = 0, nk = 0;
        for (int d = 0; d < m->ndim; d++) {
            bool r = false;
            for (int k = 0; k < a->n; k++)
                r |= a->i[k] == d;
            if (!r)
                perm[n++] = d;
        }
        nk = n;
        for (int k = 0; k < a->n; k++)
            perm[n++] = (int)a->i[k];
        jg_tensor *p = jg_permute(x, perm);
        int64_t fs[JG_MAX_DIMS];
        int64_t r = 1;
        for (int j = 0; j < nk; j++)
            fs[j] = m->shape[perm[j]];
        for (int j = nk; j < m->ndim; j++)
            r *= m->shape[perm[j]];
        fs[nk] = r;
        po.i[0] = nk;
        jg_tensor *f = p ? jg_reshape(p, nk + 1, fs) : NULL;
        jg_tensor *o = f ? jg_op1(JG_OP_PROD_OTHERS, &po, f, NULL) : NULL;
        int64_t ps[JG_MAX_DIMS];
        for (int j = 0; j < m->ndim; j++)
            ps[j] = m->shape[perm[j]];
        jg_tensor *ob = o ? jg_reshape(o, m->ndim, ps) : NULL;
        int iv[JG_MAX_DIMS];
        for (int j = 0; j < m->ndim; j++)
            iv[perm[j]] = j;
        jg_tensor *back = ob ? jg_permute(ob, iv) : NULL;
        gin[0] = back && g ? jg_mul(g, back) : NULL;
        return gin[0] ? 0 : -1;
    }
    gin[0] = g ? jg_mul(g, jg_op1(JG_OP_PROD_OTHERS, &po, x, NULL)) : NULL;
    return gin[0] ? 0 : -1;
}

/* exclusive products from the front, then times those from the back */
#define OTHERS_LOOP(T)                                                                             \
    do {                                                                                           \
        const char *xb = (const char *)in[0]->storage->data;                                       \
        T *o = (T *)jg_tensor_ptr(out[0]);                                                         \
        int64_t xs = x->ndim ? x->stride[dim] : 0, os = out[0]->ndim ? out[0]->stride[dim] : 0;    \
        for (int64_t l = 0; l < n; l++) {                                                          \
            const T *xl = (const T *)xb + xst[l];                                                  \
            T *ol = o + (ost[l] - out[0]->offset);                                                 \
            T acc = 1;                                                                             \
            for (int64_t i = 0; i < len; i++) {                                                    \
                ol[i * os] = acc;                                                                  \
                acc *= xl[i * xs];                                                                 \
            }                                                                                      \
            acc = 1;                                                                               \
            for (int64_t i = len - 1; i >= 0; i--) {                                               \
                ol[i * os] *= acc;                                                                 \
                acc *= xl[i * xs];                                                                 \
            }                                                                                      \
        }                                                                                          \
    } while (0)

int jg_k_prod_others(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    const jg_tensor *x = in[0];
    int dim = (int)a->i[0];
    int64_t len = x->ndim ? x->shape[dim] : 1, n, n2;
    if (x->numel == 0)
        return 0;
    int64_t *xst = line_starts(x, dim, &n), *ost = xst ? line_starts(out[0], dim, &n2) : NULL;
    if (!ost) {
        free(xst);
        return -1;
    }
    if (x->dtype == JG_F32)
        OTHERS_LOOP(float);
    else if (x->dtype == JG_F64)
        OTHERS_LOOP(double);
    else if (x->dtype == JG_I64)
        OTHERS_LOOP(int64_t);
    else {
        free(xst);
        free(ost);
        return jg_errorf("prod_others(): unsupported dtype %s", jg_dtype_name(x->dtype));
    }
    free(xst);
    free(ost);
    return 0;
}

int jg_vjp_prod_others(VJP_ARGS) {
    (void)meta, (void)out, (void)needs;
    gin[0] = jg_op1(JG_OP_PROD_OTHERS_BACKWARD, a, in[0], gout[0]);
    return gin[0] ? 0 : -1;
}

/* for each j: the products of the others among x with x_j taken as 1, then
 * the sum of g_i times them over i != j (O(len^2) per line) */
#define OTHERS_BW_LOOP(T)                                                                          \
    do {                                                                                           \
        const T *xb = (const T *)in[0]->storage->data, *gb = (const T *)in[1]->storage->data;      \
        T *ob = (T *)out[0]->storage->data;                                                        \
        for (int64_t l = 0; l < n; l++) {                                                          \
            const T *xl = xb + xst[l], *gl = gb + gst[l];                                          \
            for (int64_t j = 0; j < len; j++) {                                                    \
                T acc = 1, sum = 0;                                                                \
                for (int64_t i = 0; i < len; i++) { /* prefix products into tmp */                 \
                    ((T *)tmp)[i] = acc;                                                           \
                    acc *= i == j ? (T)1 : xl[i * xs];                                             \
                }                                                                                  \
                acc = 1;                                                                           \
                for (int64_t i = len - 1; i >= 0; i--) {                                           \
                    if (i != j)                                                                    \
                        sum += gl[i * gs] * (((T *)tmp)[i] * acc);                                 \
                    acc *= i == j ? (T)1 : xl[i * xs];                                             \
                }                                                                                  \
                ob[ost[l] + j * os] = sum;                                                         \
            }                                                                                      \
        }                                                                                          \
    } while (0)

int jg_k_prod_others_backward(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    const jg_tensor *x = in[0];
    int dim = (int)a->i[0];
    int64_t len = x->ndim ? x->shape[dim] : 1, n, n2, n3;
    if (x->numel == 0)
        return 0;
    JG_ASSERT(jg_same_shape(in[0], in[1]));
    int64_t xs = x->ndim ? x->stride[dim] : 0, gs = x->ndim ? in[1]->stride[dim] : 0;
    int64_t os = x->ndim ? out[0]->stride[dim] : 0;
    int64_t *xst = line_starts(x, dim, &n), *gst = xst ? line_starts(in[1], dim, &n2) : NULL;
    int64_t *ost = gst ? line_starts(out[0], dim, &n3) : NULL;
    void *tmp = ost ? malloc(sizeof(double) * (size_t)len) : NULL;
    int rc = 0;
    if (!tmp)
        rc = ost ? jg_errorf("out of memory") : -1;
    else if (x->dtype == JG_F32)
        OTHERS_BW_LOOP(float);
    else if (x->dtype == JG_F64)
        OTHERS_BW_LOOP(double);
    else
        rc = jg_errorf("prod_others_backward(): unsupported dtype %s", jg_dtype_name(x->dtype));
    free(xst);
    free(gst);
    free(ost);
    free(tmp);
    return rc;
}

/* linear and symmetric in g: its VJP in g is itself; in x it would be a
 * third derivative of prod, which is not supported */
int jg_vjp_prod_others_backward(VJP_ARGS) {
    (void)meta, (void)out;
    gin[0] = gin[1] = NULL;
    if (needs[0])
        return jg_errorf("jitgrad: the third derivative of prod() is not supported");
    gin[1] = jg_op1(JG_OP_PROD_OTHERS_BACKWARD, a, in[0], gout[0]);
    return gin[1] ? 0 : -1;
}

/* ------------------------------------------------------------ var / std */

int jg_infer_var(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    if (!jg_dtype_is_float(in[0].dtype))
        return jg_errorf("std and var only support floating point and complex dtypes");
    bool mask[JG_MAX_DIMS];
    if (dims_mask("var", a, in[0].ndim, mask) < 0)
        return -1;
    reduced_meta(&in[0], mask, a->keepdim, in[0].dtype, &out[0]);
    return 0;
}

/* Welford's running mean and sum of squared deviations in double, as
 * PyTorch's CPU kernel computes them (a constant input gives exactly 0);
 * divided by max(0, N - correction) (0 gives inf or NaN, as in PyTorch) */
static int var_kernel(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out, bool sd) {
    bool mask[JG_MAX_DIMS];
    JG_ASSERT(dims_mask("var", a, in[0]->ndim, mask) == 0);
    int64_t m;
    jg_tensor *c = blocks(in[0], mask, JG_F64, &m);
    if (!c)
        return -1;
    const double *x = (const double *)jg_tensor_ptr(c);
    double dof = (double)m - a->s;
    if (dof < 0)
        dof = 0;
    for (int64_t j = 0; j < out[0]->numel; j++) {
        double mean = 0, q = 0;
        for (int64_t i = 0; i < m; i++) {
            double d = x[j * m + i] - mean;
            mean += d / (double)(i + 1);
            q += d * (x[j * m + i] - mean);
        }
        double v = (m ? q : NAN) / dof;
        if (sd)
            v = sqrt(v);
        if (out[0]->dtype == JG_F32)
            ((float *)jg_tensor_ptr(out[0]))[j] = (float)v;
        else
            ((double *)jg_tensor_ptr(out[0]))[j] = v;
    }
    jg_release(c);
    return 0;
}

int jg_k_var(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    return var_kernel(a, in, out, false);
}

int jg_k_std(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    return var_kernel(a, in, out, true);
}

static int64_t reduced_n(const jg_attrs *a, const jg_meta *m) {
    int64_t n = 1;
    for (int k = 0; k < a->n; k++)
        n *= m->shape[a->i[k]];
    return n;
}

/* PyTorch's var_backward: (2 / (N - correction)) * grad * (x - x.mean(dims)) */
static jg_tensor *var_backward(const jg_attrs *a, const jg_meta *m, jg_tensor *x, jg_tensor *g) {
    double dof = (double)reduced_n(a, m) - a->s;
    if (dof < 0)
        dof = 0;
    int dims[JG_MAX_DIMS];
    for (int k = 0; k < a->n; k++)
        dims[k] = (int)a->i[k];
    jg_tensor *mean = jg_mean_dims(x, a->n, dims, true);
    jg_tensor *gk = keep_shape(a, m, g);
    jg_tensor *s = gk ? jg_mul_scalar(gk, 2.0 / dof) : NULL;
    return s && mean ? jg_mul(s, jg_sub(x, mean)) : NULL;
}

int jg_vjp_var(VJP_ARGS) {
    (void)out, (void)needs;
    gin[0] = var_backward(a, &meta[0], in[0], gout[0]);
    return gin[0] ? 0 : -1;
}

/* PyTorch's std_backward: var_backward((grad / (result * 2)) with 0 where
 * the result is 0), so a constant input gets a zero gradient, not NaN */
int jg_vjp_std(VJP_ARGS) {
    (void)needs;
    jg_tensor *g =
        jg_masked_fill(jg_div(gout[0], jg_mul_scalar(out[0], 2.0)), jg_eq_scalar(out[0], 0.0), 0.0);
    if (!g)
        return -1;
    gin[0] = var_backward(a, &meta[0], in[0], g);
    return gin[0] ? 0 : -1;
}

/* ------------------------------------------------------------ norm */

int jg_infer_norm(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    if (!jg_dtype_is_float(in[0].dtype))
        return jg_errorf("norm(): input dtype should be either floating point or complex. Got %s "
                         "instead.",
                         jg_dtype_torch_name(in[0].dtype));
    bool mask[JG_MAX_DIMS];
    if (dims_mask("norm", a, in[0].ndim, mask) < 0)
        return -1;
    reduced_meta(&in[0], mask, a->keepdim, in[0].dtype, &out[0]);
    return 0;
}

int jg_k_norm(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    bool mask[JG_MAX_DIMS];
    JG_ASSERT(dims_mask("norm", a, in[0]->ndim, mask) == 0);
    int64_t m;
    jg_tensor *c = blocks(in[0], mask, JG_F64, &m);
    if (!c)
        return -1;
    const double *x = (const double *)jg_tensor_ptr(c);
    double p = a->s;
    for (int64_t j = 0; j < out[0]->numel; j++) {
        double r;
        const double *v = x + j * m;
        if (isinf(p)) {               /* max / min of |x|; NaN wins */
            r = m ? fabs(v[0]) : 0.0; /* (PyTorch's for no elements, either sign) */
            for (int64_t i = 0; i < m; i++) {
                double t = fabs(v[i]);
                if (t != t) {
                    r = t;
                    break;
                }
                r = p > 0 ? (t > r ? t : r) : (t < r ? t : r);
            }
        } else {
            r = 0;
            for (int64_t i = 0; i < m; i++) {
                double t = fabs(v[i]);
                r += p == 0 ? (t != 0) : p == 1 ? t : p == 2 ? t * t : pow(t, p);
            }
            if (p == 2)
                r = sqrt(r);
            else if (p != 0 && p != 1)
                r = pow(r, 1.0 / p);
        }
        if (out[0]->dtype == JG_F32)
            ((float *)jg_tensor_ptr(out[0]))[j] = (float)r;
        else
            ((double *)jg_tensor_ptr(out[0]))[j] = r;
    }
    jg_release(c);
    return 0;
}

/* PyTorch 1.13's norm_backward, grad and norm in keepdim form */
int jg_vjp_norm(VJP_ARGS) {
    (void)needs;
    const jg_meta *m = &meta[0];
    jg_tensor *x = in[0], *g = keep_shape(a, m, gout[0]), *nr = keep_shape(a, m, out[0]);
    double p = a->s;
    if (!g || !nr)
        return -1;
    if (p == 0) {
        gin[0] = jg_full(m->dtype, m->ndim, m->shape, 0.0);
    } else if (p == 1) { /* sgn(x) * grad */
        gin[0] = jg_ew_call(JG_OP_ABS_GRAD, jg_expand(g, m->ndim, m->shape), x);
    } else if (p == 2) { /* x * (grad / norm).masked_fill(norm == 0, 0) */
        jg_tensor *s = jg_masked_fill(jg_div(g, nr), jg_eq_scalar(nr, 0.0), 0.0);
        gin[0] = s ? jg_mul(x, s) : NULL;
    } else if (isinf(p)) { /* sgn(x) * (|x| == norm) * grad / count */
        jg_tensor *eq = jg_ew_call(JG_OP_MAX_MASK, jg_abs(x), nr);
        jg_tensor *scaled = eq ? jg_ew_call(JG_OP_ABS_GRAD, eq, x) : NULL;
        int dims[JG_MAX_DIMS];
        for (int k = 0; k < a->n; k++)
            dims[k] = (int)a->i[k];
        jg_tensor *cnt = eq ? jg_sum_dims(eq, a->n, dims, true) : NULL;
        gin[0] = scaled && cnt ? jg_mul(scaled, jg_div(g, cnt)) : NULL;
    } else {
        jg_tensor *ax = jg_abs(x);
        jg_tensor *scaled = p < 2 ? jg_ew_call(JG_OP_ABS_GRAD, jg_pow_scalar(ax, p - 1), x)
                                  : jg_mul(x, jg_pow_scalar(ax, p - 2));
        jg_tensor *sv =
            jg_masked_fill(jg_div(g, jg_pow_scalar(nr, p - 1)), jg_eq_scalar(nr, 0.0), 0.0);
        gin[0] = scaled && sv ? jg_mul(scaled, sv) : NULL;
    }
    return gin[0] ? 0 : -1;
}

/* ------------------------------------------------------------ cumsum */

int jg_infer_cumsum(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    int nd = in[0].ndim;
    if (a->n != 2 || a->i[0] < 0 || a->i[0] >= (nd ? nd : 1))
        return jg_errorf("cumsum(): bad dim");
    out[0] = in[0];
    if (!jg_dtype_is_float(in[0].dtype))
        out[0].dtype = JG_I64;
    return 0;
}

#define CUMSUM_LOOP(T)                                                                             \
    do {                                                                                           \
        const T *xb = (const T *)c->storage->data;                                                 \
        T *o = (T *)out[0]->storage->data;                                                         \
        for (int64_t l = 0; l < n; l++) {                                                          \
            T acc = 0;                                                                             \
            for (int64_t k = 0; k < len; k++) {                                                    \
                int64_t i = rev ? len - 1 - k : k;                                                 \
                acc += xb[xst[l] + i * xs];                                                        \
                o[ost[l] + i * os] = acc;                                                          \
            }                                                                                      \
        }                                                                                          \
    } while (0)

int jg_k_cumsum(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    jg_tensor *c = jg_retain(in[0]);
    if (c->dtype != out[0]->dtype) {
        jg_release(c);
        if (!(c = jg_tensor_alloc(out[0]->dtype, in[0]->ndim, in[0]->shape)))
            return -1;
        jg_copy_data(c, in[0]);
    }
    int dim = (int)a->i[0];
    bool rev = a->i[1] != 0;
    int64_t len = c->ndim ? c->shape[dim] : 1, n = 0, n2;
    int64_t xs = c->ndim ? c->stride[dim] : 0, os = c->ndim ? out[0]->stride[dim] : 0;
    int64_t *xst = c->numel ? line_starts(c, dim, &n) : NULL;
    int64_t *ost = xst ? line_starts(out[0], dim, &n2) : NULL;
    if (c->numel && !ost) {
        free(xst);
        jg_release(c);
        return -1;
    }
    if (c->numel) {
        if (c->dtype == JG_F32)
            CUMSUM_LOOP(float);
        else if (c->dtype == JG_F64)
            CUMSUM_LOOP(double);
        else
            CUMSUM_LOOP(int64_t);
    }
    free(xst);
    free(ost);
    jg_release(c);
    return 0;
}

/* the sum from the end: grad.flip(dim).cumsum(dim).flip(dim) */
int jg_vjp_cumsum(VJP_ARGS) {
    (void)in, (void)out, (void)needs, (void)meta;
    jg_attrs r = *a;
    r.i[1] = !a->i[1];
    gin[0] = jg_op1(JG_OP_CUMSUM, &r, gout[0], NULL);
    return gin[0] ? 0 : -1;
}

/* ------------------------------------------------------------ argmax / argmin */

int jg_infer_argmax(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    int nd = in[0].ndim;
    if (in[0].dtype == JG_BOOL)
        return jg_errorf("\"argmax_cpu\" not implemented for 'Bool'");
    memset(&out[0], 0, sizeof out[0]);
    out[0].dtype = JG_I64;
    if (a->n == 0) {
        if (jg_shape_numel(nd, in[0].shape) == 0)
            return jg_errorf("argmax(): Expected reduction dim to be specified for input.numel() "
                             "== 0.");
        if (a->keepdim)
            for (int d = 0; d < nd; d++)
                out[0].shape[out[0].ndim++] = 1;
        return 0;
    }
    int64_t dim = a->i[0];
    if (a->n != 1 || dim < 0 || dim >= (nd ? nd : 1))
        return jg_errorf("argmax(): bad dim");
    if (nd && in[0].shape[dim] == 0)
        return jg_errorf("argmax(): Expected reduction dim %lld to have non-zero size.",
                         (long long)dim);
    for (int d = 0; d < nd; d++) {
        if (d != dim)
            out[0].shape[out[0].ndim++] = in[0].shape[d];
        else if (a->keepdim)
            out[0].shape[out[0].ndim++] = 1;
    }
    return 0;
}

/* the first NaN, else the first strict extreme */
#define ARG_SCAN(T)                                                                                \
    do {                                                                                           \
        const T *v = (const T *)jg_tensor_ptr(c);                                                  \
        for (int64_t j = 0; j < nout; j++) {                                                       \
            const T *r = v + j * m;                                                                \
            T best = r[0];                                                                         \
            int64_t bi = 0;                                                                        \
            for (int64_t i = 0; i < m; i++) {                                                      \
                T t = r[i];                                                                        \
                if (t != t) {                                                                      \
                    bi = i;                                                                        \
                    break;                                                                         \
                }                                                                                  \
                if (is_max ? t > best : t < best) {                                                \
                    best = t;                                                                      \
                    bi = i;                                                                        \
                }                                                                                  \
            }                                                                                      \
            o[j] = bi;                                                                             \
        }                                                                                          \
    } while (0)

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wtautological-compare"
static int arg_kernel(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out, bool is_max) {
    bool mask[JG_MAX_DIMS] = {0};
    for (int d = 0; d < in[0]->ndim; d++)
        mask[d] = a->n == 0 || d == a->i[0];
    int64_t m, nout = out[0]->numel;
    if (in[0]->numel == 0)
        return 0;
    jg_dtype dt = in[0]->dtype == JG_I32 ? JG_I64 : in[0]->dtype;
    jg_tensor *c = blocks(in[0], mask, dt, &m);
    if (!c)
        return -1;
    int64_t *o = (int64_t *)jg_tensor_ptr(out[0]);
    if (dt == JG_F32)
        ARG_SCAN(float);
    else if (dt == JG_F64)
        ARG_SCAN(double);
    else
        ARG_SCAN(int64_t);
    jg_release(c);
    return 0;
}
#pragma GCC diagnostic pop

int jg_k_argmax(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    return arg_kernel(a, in, out, true);
}

int jg_k_argmin(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    return arg_kernel(a, in, out, false);
}

/* ------------------------------------------------------------ topk / sort */

int jg_infer_topk(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    int nd = in[0].ndim;
    int64_t dim = a->i[0], k = a->i[1];
    if (a->n != 3 || dim < 0 || dim >= (nd ? nd : 1))
        return jg_errorf("topk(): bad dim");
    int64_t len = nd ? in[0].shape[dim] : 1;
    if (k < 0 || k > len)
        return jg_errorf("selected index k out of range");
    out[0] = in[0];
    if (nd)
        out[0].shape[dim] = k;
    out[1] = out[0];
    out[1].dtype = JG_I64;
    return 0;
}

/* Stable merge sort of idx[0..n) by the values v[idx * step]; NaN is
 * larger than every number. */
#define SORT_FNS(TY, T)                                                                            \
    static bool before_##TY(const char *v, int64_t step, int64_t i, int64_t j, bool desc) {        \
        T x = *(const T *)(v + i * step), y = *(const T *)(v + j * step);                          \
        if (desc)                                                                                  \
            return x > y || (x != x && y == y);                                                    \
        return x < y || (y != y && x == x);                                                        \
    }
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wtautological-compare"
#pragma GCC diagnostic ignored "-Wbool-compare"
SORT_FNS(f32, float)
SORT_FNS(f64, double)
SORT_FNS(i64, int64_t)
SORT_FNS(i32, int32_t)
SORT_FNS(b8, bool)
#pragma GCC diagnostic pop

typedef bool (*before_fn)(const char *v, int64_t step, int64_t i, int64_t j, bool desc);

static void merge_sort(int64_t *idx, int64_t *tmp, int64_t n, before_fn before, const char *v,
                       int64_t step, bool desc) {
    if (n < 2)
        return;
    int64_t h = n / 2;
    merge_sort(idx, tmp, h, before, v, step, desc);
    merge_sort(idx + h, tmp, n - h, before, v, step, desc);
    int64_t i = 0, j = h, k = 0;
    while (i < h && j < n)
        tmp[k++] = before(v, step, idx[j], idx[i], desc) ? idx[j++] : idx[i++];
    while (i < h)
        tmp[k++] = idx[i++];
    while (j < n)
        tmp[k++] = idx[j++];
    memcpy(idx, tmp, sizeof(int64_t) * (size_t)n);
}

int jg_k_topk(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    const jg_tensor *x = in[0];
    int dim = (int)a->i[0];
    int64_t k = a->i[1];
    bool desc = a->i[2] != 0;
    int64_t len = x->ndim ? x->shape[dim] : 1;
    if (x->numel == 0 || k == 0)
        return 0;
    static const before_fn fns[JG_NDTYPES] = {[JG_F32] = before_f32,
                                              [JG_F64] = before_f64,
                                              [JG_I64] = before_i64,
                                              [JG_BOOL] = before_b8,
                                              [JG_I32] = before_i32};
    size_t es = jg_dtype_size(x->dtype);
    int64_t n, n2, n3;
    int64_t *xst = line_starts(x, dim, &n);
    int64_t *vst = xst ? line_starts(out[0], dim, &n2) : NULL;
    int64_t *ist = vst ? line_starts(out[1], dim, &n3) : NULL;
    int64_t *idx = ist ? malloc(sizeof(int64_t) * (size_t)len * 2) : NULL;
    if (!idx) {
        free(xst);
        free(vst);
        free(ist);
        return ist ? jg_errorf("out of memory") : -1;
    }
    int64_t xs = x->ndim ? x->stride[dim] * (int64_t)es : 0;
    int64_t vs = x->ndim ? out[0]->stride[dim] : 0, is = x->ndim ? out[1]->stride[dim] : 0;
    const char *xb = (const char *)x->storage->data;
    char *vb = (char *)out[0]->storage->data;
    int64_t *ib = (int64_t *)out[1]->storage->data;
    for (int64_t l = 0; l < n; l++) {
        const char *v = xb + xst[l] * (int64_t)es;
        for (int64_t i = 0; i < len; i++)
            idx[i] = i;
        merge_sort(idx, idx + len, len, fns[x->dtype], v, xs, desc);
        for (int64_t i = 0; i < k; i++) {
            memcpy(vb + (vst[l] + i * vs) * (int64_t)es, v + idx[i] * xs, es);
            ib[ist[l] + i * is] = idx[i];
        }
    }
    free(xst);
    free(vst);
    free(ist);
    free(idx);
    return 0;
}

/* zeros with grad put at the indices (each once): scatter_add, whose VJP
 * (gather) gives double backward */
int jg_vjp_topk(VJP_ARGS) {
    (void)in, (void)needs;
    const jg_meta *m = &meta[0];
    if (!gout[0]) {
        gin[0] = NULL;
        return 0;
    }
    if (m->ndim == 0) {
        gin[0] = gout[0];
        return 0;
    }
    jg_attrs sa = {.n = 1 + m->ndim};
    sa.i[0] = a->i[0];
    memcpy(&sa.i[1], m->shape, sizeof(int64_t) * (size_t)m->ndim);
    gin[0] = jg_op1(JG_OP_SCATTER_ADD, &sa, gout[0], out[1]);
    return gin[0] ? 0 : -1;
}

/* ------------------------------------------------------------ public functions */

jg_tensor *jg_sin(jg_tensor *a) {
    return jg_ew_call(JG_OP_SIN, a, NULL);
}
jg_tensor *jg_cos(jg_tensor *a) {
    return jg_ew_call(JG_OP_COS, a, NULL);
}
jg_tensor *jg_erf(jg_tensor *a) {
    return jg_ew_call(JG_OP_ERF, a, NULL);
}
jg_tensor *jg_clamp_min(jg_tensor *a, double min) {
    return jg_ew_call_scalar(JG_OP_CLAMP_MIN, a, min);
}
jg_tensor *jg_clamp_max(jg_tensor *a, double max) {
    return jg_ew_call_scalar(JG_OP_CLAMP_MAX, a, max);
}
jg_tensor *jg_maximum(jg_tensor *a, jg_tensor *b) {
    return jg_ew_call(JG_OP_MAXIMUM, a, b);
}
jg_tensor *jg_minimum(jg_tensor *a, jg_tensor *b) {
    return jg_ew_call(JG_OP_MINIMUM, a, b);
}
jg_tensor *jg_pow(jg_tensor *a, jg_tensor *b) {
    return jg_ew_call(JG_OP_POW, a, b);
}

jg_tensor *jg_clamp_tensor(jg_tensor *a, jg_tensor *min, jg_tensor *max) {
    if (!a)
        return jg_errorf_null("clamp(): tensor is NULL");
    if (!min && !max)
        return jg_errorf_null("torch.clamp: At least one of 'min' or 'max' must not be None");
    jg_attrs at = {.n = 2};
    at.i[0] = min != NULL;
    at.i[1] = max != NULL;
    jg_tensor *in[3] = {a, min ? min : a, max ? max : a}, *out[1];
    return jg_op_call(JG_OP_CLAMP_T, &at, in, out) < 0 ? NULL : out[0];
}

/* jg_clamp (one op with both number bounds): ops/surface2.c */

/* dims (any order, negative from the end) into sorted attrs; none: all */
static int dims_attrs(const char *fn, jg_tensor *a, int n_dims, const int *dims, bool keepdim,
                      jg_attrs *at) {
    if (!a)
        return jg_errorf("%s(): tensor is NULL", fn);
    if (n_dims < 0 || (n_dims > 0 && !dims))
        return jg_errorf("%s(): bad dim list", fn);
    bool seen[JG_MAX_DIMS] = {0};
    for (int k = 0; k < n_dims; k++) {
        int d = jg_wrap_dim(dims[k], a->ndim);
        if (d < 0)
            return -1;
        if (a->ndim == 0)
            continue;
        if (seen[d])
            return jg_errorf("dim %d appears multiple times in the list of dims", d);
        seen[d] = true;
    }
    at->n = 0;
    for (int d = 0; d < a->ndim; d++)
        if (seen[d] || n_dims == 0)
            at->i[at->n++] = d;
    at->keepdim = keepdim;
    return 0;
}

jg_tensor *jg_prod(jg_tensor *a) {
    jg_attrs at = {0};
    if (dims_attrs("prod", a, 0, NULL, false, &at) < 0)
        return NULL;
    at.whole = 1;
    return jg_op1(JG_OP_PROD, &at, a, NULL);
}

jg_tensor *jg_prod_dim(jg_tensor *a, int dim, bool keepdim) {
    jg_attrs at = {0};
    if (dims_attrs("prod", a, 1, &dim, keepdim, &at) < 0)
        return NULL;
    return jg_op1(JG_OP_PROD, &at, a, NULL);
}

static jg_tensor *var_like(jg_opcode op, const char *fn, jg_tensor *a, int n_dims, const int *dims,
                           double correction, bool keepdim) {
    jg_attrs at = {0};
    if (dims_attrs(fn, a, n_dims, dims, keepdim, &at) < 0)
        return NULL;
    at.s = correction;
    return jg_op1(op, &at, a, NULL);
}

jg_tensor *jg_var(jg_tensor *a, int n_dims, const int *dims, double correction, bool keepdim) {
    return var_like(JG_OP_VAR, "var", a, n_dims, dims, correction, keepdim);
}

jg_tensor *jg_std(jg_tensor *a, int n_dims, const int *dims, double correction, bool keepdim) {
    return var_like(JG_OP_STD, "std", a, n_dims, dims, correction, keepdim);
}

/* var_mean / std_mean: one two-output op (PyTorch's VarMeanBackward0 /
 * StdMeanBackward0 node), its kernels var's / std's and mean's (ops/surface2.c) */
static int moments(jg_opcode op, const char *fn, jg_tensor *a, int n_dims, const int *dims,
                   double correction, bool keepdim, jg_tensor **first, jg_tensor **mean) {
    if (!first || !mean)
        return jg_errorf("jg_%s: NULL argument", fn);
    jg_attrs at = {0};
    if (dims_attrs(fn, a, n_dims, dims, keepdim, &at) < 0)
        return -1;
    at.s = correction;
    jg_tensor *out[2];
    if (jg_op_call(op, &at, &a, out) < 0)
        return -1;
    *first = out[0];
    *mean = out[1];
    return 0;
}

int jg_var_mean(jg_tensor *a, int n_dims, const int *dims, double correction, bool keepdim,
                jg_tensor **var, jg_tensor **mean) {
    return moments(JG_OP_VAR_MEAN, "var_mean", a, n_dims, dims, correction, keepdim, var, mean);
}

int jg_std_mean(jg_tensor *a, int n_dims, const int *dims, double correction, bool keepdim,
                jg_tensor **std, jg_tensor **mean) {
    return moments(JG_OP_STD_MEAN, "std_mean", a, n_dims, dims, correction, keepdim, std, mean);
}

jg_tensor *jg_norm(jg_tensor *a, double p, int n_dims, const int *dims, bool keepdim) {
    if (p != p)
        return jg_errorf_null("norm(): p must not be NaN");
    return var_like(JG_OP_NORM, "norm", a, n_dims, dims, p, keepdim);
}

jg_tensor *jg_cumsum(jg_tensor *a, int dim) {
    if (!a)
        return jg_errorf_null("cumsum(): tensor is NULL");
    int d = jg_wrap_dim(dim, a->ndim);
    if (d < 0)
        return NULL;
    jg_attrs at = {.n = 2};
    at.i[0] = d;
    return jg_op1(JG_OP_CUMSUM, &at, a, NULL);
}

static jg_tensor *arg_call(jg_opcode op, jg_tensor *a, bool all, int dim, bool keepdim) {
    if (!a)
        return jg_errorf_null("%s(): tensor is NULL", jg_ops[op].name);
    jg_attrs at = {.keepdim = keepdim};
    if (!all) {
        int d = jg_wrap_dim(dim, a->ndim);
        if (d < 0)
            return NULL;
        at.n = 1;
        at.i[0] = d;
    }
    if (a->dtype == JG_BOOL)
        return jg_errorf_null("\"%s_cpu\" not implemented for 'Bool'", jg_ops[op].name);
    return jg_op1(op, &at, a, NULL);
}

jg_tensor *jg_argmax(jg_tensor *a) {
    return arg_call(JG_OP_ARGMAX, a, true, 0, false);
}
jg_tensor *jg_argmin(jg_tensor *a) {
    return arg_call(JG_OP_ARGMIN, a, true, 0, false);
}
jg_tensor *jg_argmax_dim(jg_tensor *a, int dim, bool keepdim) {
    return arg_call(JG_OP_ARGMAX, a, false, dim, keepdim);
}
jg_tensor *jg_argmin_dim(jg_tensor *a, int dim, bool keepdim) {
    return arg_call(JG_OP_ARGMIN, a, false, dim, keepdim);
}

static int sort_call(jg_opcode op, jg_tensor *a, int64_t k, int dim, bool desc, jg_tensor **values,
                     jg_tensor **indices) {
    if (!a || !values || !indices)
        return jg_errorf("%s(): NULL argument", jg_ops[op].name);
    int d = jg_wrap_dim(dim, a->ndim);
    if (d < 0)
        return -1;
    if (op == JG_OP_TOPK && a->dtype == JG_BOOL)
        return jg_errorf("\"topk_cpu\" not implemented for 'Bool'");
    if (k < 0)
        k = a->ndim ? a->shape[d] : 1;
    jg_attrs at = {.n = 3};
    at.i[0] = d;
    at.i[1] = k;
    at.i[2] = desc;
    jg_tensor *out[2];
    if (jg_op_call(op, &at, &a, out) < 0)
        return -1;
    *values = out[0];
    *indices = out[1];
    return 0;
}

int jg_topk(jg_tensor *a, int64_t k, int dim, bool largest, jg_tensor **values,
            jg_tensor **indices) {
    if (k < 0)
        return jg_errorf("selected index k out of range");
    return sort_call(JG_OP_TOPK, a, k, dim, largest, values, indices);
}

int jg_sort(jg_tensor *a, int dim, bool descending, jg_tensor **values, jg_tensor **indices) {
    return sort_call(JG_OP_SORT, a, -1, dim, descending, values, indices);
}
