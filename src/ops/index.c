/* gather(x, idx) along attrs.i[0] (PyTorch's torch.gather) and its adjoint
 * scatter_add(src, idx): zeros of shape attrs.i[1..n) (n = 1 + ndim) with
 * src[p] added at p with p[dim] replaced by idx[p].  Each one's VJP is the
 * other, so gradients of any order exist.  As in PyTorch a 0-d tensor counts
 * as one of shape [1] here.
 *
 * Unlike torch.scatter_add, the (internal) scatter_add op requires index and
 * src to have the same shape, so that its VJP, a gather, has src's shape. */
#include "ops/decls.h"

#include <stdio.h>
#include <string.h>

/* A 0-d shape as [1]: returns the number of dims (>= 1). */
static int nonempty_shape(int ndim, const int64_t *shape, int64_t *s) {
    if (ndim == 0) {
        s[0] = 1;
        return 1;
    }
    memcpy(s, shape, sizeof(int64_t) * (size_t)ndim);
    return ndim;
}

static int check_dim(const char *fn, int64_t dim, int ndim) {
    int nd = ndim ? ndim : 1;
    if (dim < 0 || dim >= nd)
        return jg_errorf("%s(): Dimension out of range (expected to be in range of [%d, %d], but "
                         "got %lld)",
                         fn, -nd, nd - 1, (long long)dim);
    return 0;
}

int jg_infer_gather(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    const jg_meta *x = &in[0], *ix = &in[1];
    if (a->n != 1 || check_dim("gather", a->i[0], x->ndim) < 0)
        return a->n != 1 ? jg_errorf("gather(): expects one dim attribute") : -1;
    if (ix->dtype != JG_I64)
        return jg_errorf("gather(): Expected dtype int64 for index");
    int64_t xs[JG_MAX_DIMS], is[JG_MAX_DIMS];
    int xn = nonempty_shape(x->ndim, x->shape, xs), in_ = nonempty_shape(ix->ndim, ix->shape, is);
    if (xn != in_)
        return jg_errorf("Index tensor must have the same number of dimensions as input tensor");
    for (int d = 0; d < xn; d++)
        if (d != a->i[0] && is[d] > xs[d]) {
            char s1[160], s2[160];
            jg_format_shape(s1, sizeof s1, ix->ndim, ix->shape);
            jg_format_shape(s2, sizeof s2, x->ndim, x->shape);
            return jg_errorf("Size does not match at dimension %d expected index %s to be smaller "
                             "than self %s apart from dimension %lld",
                             d, s1, s2, (long long)a->i[0]);
        }
    out[0] = *ix;
    out[0].dtype = x->dtype;
    return 0;
}

int jg_infer_scatter_add(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    const jg_meta *src = &in[0], *ix = &in[1];
    int ondim = a->n - 1;
    if (ondim < 0 || ondim > JG_MAX_DIMS)
        return jg_errorf("scatter_add(): bad attributes (n = %d)", a->n);
    for (int d = 0; d < ondim; d++)
        if (a->i[1 + d] < 0)
            return jg_errorf("scatter_add(): negative output size %lld", (long long)a->i[1 + d]);
    if (check_dim("scatter_add", a->i[0], ondim) < 0)
        return -1;
    if (ix->dtype != JG_I64)
        return jg_errorf("scatter_add(): Expected dtype int64 for index");
    int64_t os[JG_MAX_DIMS], ss[JG_MAX_DIMS], is[JG_MAX_DIMS];
    int on = nonempty_shape(ondim, &a->i[1], os), sn = nonempty_shape(src->ndim, src->shape, ss),
        in_ = nonempty_shape(ix->ndim, ix->shape, is);
    if (in_ != on)
        return jg_errorf("Index tensor must have the same number of dimensions as self tensor");
    if (sn != in_ || memcmp(ss, is, sizeof(int64_t) * (size_t)sn)) {
        char s1[160], s2[160];
        jg_format_shape(s1, sizeof s1, ix->ndim, ix->shape);
        jg_format_shape(s2, sizeof s2, src->ndim, src->shape);
        return jg_errorf("scatter_add(): index %s and src %s must have the same shape", s1, s2);
    }
    for (int d = 0; d < on; d++)
        if (d != a->i[0] && is[d] > os[d]) {
            char s1[160], s2[160], s3[160];
            jg_format_shape(s1, sizeof s1, ix->ndim, ix->shape);
            jg_format_shape(s2, sizeof s2, ondim, &a->i[1]);
            jg_format_shape(s3, sizeof s3, src->ndim, src->shape);
            return jg_errorf("Expected index %s to be smaller than self %s apart from dimension "
                             "%lld and to be smaller size than src %s",
                             s1, s2, (long long)a->i[0], s3);
        }
    memset(&out[0], 0, sizeof out[0]);
    out[0].dtype = src->dtype;
    out[0].ndim = ondim;
    memcpy(out[0].shape, &a->i[1], sizeof(int64_t) * (size_t)ondim);
    return 0;
}

/* Walks idx in row-major order; for each element calls the body with `xo`
 * (element offset into the indexed tensor `x`, dim replaced by the index)
 * and `vo` (element offset into the tensor `v` that has idx's shape).
 * Fails with PyTorch's message on an index out of range. */
typedef struct {
    int nd, dim;
    int64_t shape[JG_MAX_DIMS];                                   /* idx's (non-empty) shape */
    int64_t ist[JG_MAX_DIMS], xst[JG_MAX_DIMS], vst[JG_MAX_DIMS]; /* element strides */
    int64_t xsize;                                                /* x's size along dim */
} walk;

static void nonempty_strides(const jg_tensor *t, int64_t *st) {
    if (t->ndim == 0)
        st[0] = 0;
    else
        memcpy(st, t->stride, sizeof(int64_t) * (size_t)t->ndim);
}

static void walk_init(walk *w, int dim, const jg_tensor *idx, const jg_tensor *x,
                      const jg_tensor *v) {
    w->dim = dim;
    w->nd = nonempty_shape(idx->ndim, idx->shape, w->shape);
    nonempty_strides(idx, w->ist);
    nonempty_strides(v, w->vst);
    nonempty_strides(x, w->xst);
    w->xsize = x->ndim ? x->shape[dim] : 1;
}

/* The offsets of the outer dims (all but the last) are worked out once per
 * row of idx's last dim, which runs as a plain loop (the embedding's
 * gather and its backward's scatter_add walk rows of the width): the same
 * elements in the same order as an element-by-element walk, so
 * scatter_add's duplicates accumulate in the same order. */
#define WALK(w, idx_base, BODY)                                                                    \
    do {                                                                                           \
        const int l_ = (w).nd - 1;                                                                 \
        const int64_t n_ = (w).shape[l_], is_ = (w).ist[l_], vs_ = (w).vst[l_];                    \
        const int64_t xs_ = l_ == (w).dim ? 0 : (w).xst[l_], xd_ = (w).xst[(w).dim];               \
        int64_t pos_[JG_MAX_DIMS] = {0}, rows_ = 1;                                                \
        for (int d_ = 0; d_ < l_; d_++)                                                            \
            rows_ *= (w).shape[d_];                                                                \
        for (int64_t r_ = 0; r_ < rows_ && n_ > 0; r_++) {                                         \
            int64_t io0_ = 0, xo0_ = 0, vo0_ = 0;                                                  \
            for (int d_ = 0; d_ < l_; d_++) {                                                      \
                io0_ += pos_[d_] * (w).ist[d_];                                                    \
                vo0_ += pos_[d_] * (w).vst[d_];                                                    \
                if (d_ != (w).dim)                                                                 \
                    xo0_ += pos_[d_] * (w).xst[d_];                                                \
            }                                                                                      \
            if (is_ == 0 && l_ != (w).dim) {                                                       \
                /* one index for the whole row (an expanded index: the                             \
                 * embedding's): checked once, then a strided row */                               \
                const int64_t j_ = (idx_base)[io0_];                                               \
                if (j_ < 0 || j_ >= (w).xsize)                                                     \
                    return jg_errorf("index %lld is out of bounds for dimension %d with size "     \
                                     "%lld",                                                       \
                                     (long long)j_, (w).dim, (long long)(w).xsize);                \
                const int64_t xb_ = xo0_ + j_ * xd_;                                               \
                if (xs_ == 1 && vs_ == 1) /* unit steps: a loop that vectorizes */                 \
                    for (int64_t k_ = 0; k_ < n_; k_++) {                                          \
                        const int64_t xo = xb_ + k_, vo = vo0_ + k_;                               \
                        BODY;                                                                      \
                    }                                                                              \
                else                                                                               \
                    for (int64_t k_ = 0; k_ < n_; k_++) {                                          \
                        const int64_t xo = xb_ + k_ * xs_, vo = vo0_ + k_ * vs_;                   \
                        BODY;                                                                      \
                    }                                                                              \
            } else {                                                                               \
                for (int64_t k_ = 0; k_ < n_; k_++) {                                              \
                    const int64_t j_ = (idx_base)[io0_ + k_ * is_];                                \
                    if (j_ < 0 || j_ >= (w).xsize)                                                 \
                        return jg_errorf("index %lld is out of bounds for dimension %d with size " \
                                         "%lld",                                                   \
                                         (long long)j_, (w).dim, (long long)(w).xsize);            \
                    const int64_t xo = xo0_ + k_ * xs_ + j_ * xd_, vo = vo0_ + k_ * vs_;           \
                    BODY;                                                                          \
                }                                                                                  \
            }                                                                                      \
            for (int d_ = l_ - 1; d_ >= 0; d_--) {                                                 \
                if (++pos_[d_] < (w).shape[d_])                                                    \
                    break;                                                                         \
                pos_[d_] = 0;                                                                      \
            }                                                                                      \
        }                                                                                          \
    } while (0)

int jg_k_gather(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    jg_tensor *x = in[0], *ix = in[1], *o = out[0];
    walk w;
    walk_init(&w, (int)a->i[0], ix, x, o);
    const int64_t *ip = (const int64_t *)jg_tensor_ptr(ix);
    switch (x->dtype) {
    case JG_F32: {
        const float *xp = (const float *)jg_tensor_ptr(x);
        float *op = (float *)jg_tensor_ptr(o);
        WALK(w, ip, op[vo] = xp[xo]);
        break;
    }
    case JG_F64: {
        const double *xp = (const double *)jg_tensor_ptr(x);
        double *op = (double *)jg_tensor_ptr(o);
        WALK(w, ip, op[vo] = xp[xo]);
        break;
    }
    case JG_I64: {
        const int64_t *xp = (const int64_t *)jg_tensor_ptr(x);
        int64_t *op = (int64_t *)jg_tensor_ptr(o);
        WALK(w, ip, op[vo] = xp[xo]);
        break;
    }
    case JG_I32: {
        const int32_t *xp = (const int32_t *)jg_tensor_ptr(x);
        int32_t *op = (int32_t *)jg_tensor_ptr(o);
        WALK(w, ip, op[vo] = xp[xo]);
        break;
    }
    case JG_BOOL: {
        const bool *xp = (const bool *)jg_tensor_ptr(x);
        bool *op = (bool *)jg_tensor_ptr(o);
        WALK(w, ip, op[vo] = xp[xo]);
        break;
    }
    }
    return 0;
}

int jg_k_scatter_add(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    jg_tensor *src = in[0], *ix = in[1], *o = out[0];
    memset(jg_tensor_ptr(o), 0, (size_t)o->numel * jg_dtype_size(o->dtype));
    walk w;
    walk_init(&w, (int)a->i[0], ix, o, src);
    const int64_t *ip = (const int64_t *)jg_tensor_ptr(ix);
    switch (o->dtype) {
    case JG_F32: {
        const float *sp = (const float *)jg_tensor_ptr(src);
        float *op = (float *)jg_tensor_ptr(o);
        WALK(w, ip, op[xo] += sp[vo]);
        break;
    }
    case JG_F64: {
        const double *sp = (const double *)jg_tensor_ptr(src);
        double *op = (double *)jg_tensor_ptr(o);
        WALK(w, ip, op[xo] += sp[vo]);
        break;
    }
    case JG_I64: {
        const int64_t *sp = (const int64_t *)jg_tensor_ptr(src);
        int64_t *op = (int64_t *)jg_tensor_ptr(o);
        WALK(w, ip, op[xo] += sp[vo]);
        break;
    }
    case JG_I32: {
        const int32_t *sp = (const int32_t *)jg_tensor_ptr(src);
        int32_t *op = (int32_t *)jg_tensor_ptr(o);
        WALK(w, ip, op[xo] += sp[vo]);
        break;
    }
    case JG_BOOL: {
        const bool *sp = (const bool *)jg_tensor_ptr(src);
        bool *op = (bool *)jg_tensor_ptr(o);
        WALK(w, ip, op[xo] += sp[vo]);
        break;
    }
    }
    return 0;
}

/* gather_backward: zeros(self.sizes()).scatter_add_(dim, index, grad). */
int jg_vjp_gather(VJP_ARGS) {
    (void)out, (void)needs;
    const jg_meta *m = &meta[0];
    jg_attrs sa = {.n = 1 + m->ndim};
    sa.i[0] = a->i[0];
    memcpy(&sa.i[1], m->shape, sizeof(int64_t) * (size_t)m->ndim);
    gin[0] = jg_op1(JG_OP_SCATTER_ADD, &sa, gout[0], in[1]);
    gin[1] = NULL; /* indices are not differentiable */
    return gin[0] ? 0 : -1;
}

/* scatter_add's src gradient: grad.gather(dim, index). */
int jg_vjp_scatter_add(VJP_ARGS) {
    (void)meta, (void)out, (void)needs;
    jg_attrs ga = {.n = 1};
    ga.i[0] = a->i[0];
    gin[0] = jg_op1(JG_OP_GATHER, &ga, gout[0], in[1]);
    gin[1] = NULL;
    return gin[0] ? 0 : -1;
}

/* ------------------------------------------------ scatter / scatter_add */

/* torch.scatter(x, dim, idx, src), scatter(x, dim, idx, value) and
 * scatter_add(x, dim, idx, src): x's copy with, at each position p of idx,
 * the element p[dim] := idx[p] written (or added) from src[p] (or the value
 * attrs.s).  src may be larger than idx (only idx's extent is read), as in
 * PyTorch; its gradient is then zero outside that extent.  attrs.i[0]: dim. */
static int scatter_check(const jg_attrs *a, const jg_meta *x, const jg_meta *ix,
                         const jg_meta *src) {
    if (a->n != 1 || check_dim("scatter", a->i[0], x->ndim) < 0)
        return a->n != 1 ? jg_errorf("scatter(): expects one dim attribute") : -1;
    if (ix->dtype != JG_I64)
        return jg_errorf("scatter(): Expected dtype int64 for index");
    if (src && src->dtype != x->dtype)
        return jg_errorf("scatter(): Expected self.dtype to be equal to src.dtype");
    int64_t xs[JG_MAX_DIMS], is[JG_MAX_DIMS], ss[JG_MAX_DIMS];
    int xn = nonempty_shape(x->ndim, x->shape, xs), in_ = nonempty_shape(ix->ndim, ix->shape, is);
    int sn = src ? nonempty_shape(src->ndim, src->shape, ss) : in_;
    if (in_ != xn)
        return jg_errorf("Index tensor must have the same number of dimensions as self tensor");
    if (src && sn != in_)
        return jg_errorf("Index tensor must have the same number of dimensions as src tensor");
    for (int d = 0; d < in_; d++)
        if ((d != a->i[0] && is[d] > xs[d]) || (src && is[d] > ss[d])) {
            char s1[160], s2[160], s3[160];
            jg_format_shape(s1, sizeof s1, ix->ndim, ix->shape);
            jg_format_shape(s2, sizeof s2, x->ndim, x->shape);
            if (!src)
                return jg_errorf("Expected index %s to be smaller than self %s apart from "
                                 "dimension %lld",
                                 s1, s2, (long long)a->i[0]);
            jg_format_shape(s3, sizeof s3, src->ndim, src->shape);
            return jg_errorf("Expected index %s to be smaller than self %s apart from dimension "
                             "%lld and to be smaller size than src %s",
                             s1, s2, (long long)a->i[0], s3);
        }
    return 0;
}

int jg_infer_scatter(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    if (scatter_check(a, &in[0], &in[1], &in[2]) < 0)
        return -1;
    out[0] = in[0];
    return 0;
}

int jg_infer_scatter_value(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    if (scatter_check(a, &in[0], &in[1], NULL) < 0)
        return -1;
    out[0] = in[0];
    return 0;
}

/* One case per dtype: C is the element type, BODY reads xp/op/sp. */
#define SCATTER_DTYPES(dt, BODY)                                                                   \
    switch (dt) {                                                                                  \
    case JG_F32: {                                                                                 \
        typedef float C;                                                                           \
        BODY;                                                                                      \
        break;                                                                                     \
    }                                                                                              \
    case JG_F64: {                                                                                 \
        typedef double C;                                                                          \
        BODY;                                                                                      \
        break;                                                                                     \
    }                                                                                              \
    case JG_I64: {                                                                                 \
        typedef int64_t C;                                                                         \
        BODY;                                                                                      \
        break;                                                                                     \
    }                                                                                              \
    case JG_I32: {                                                                                 \
        typedef int32_t C;                                                                         \
        BODY;                                                                                      \
        break;                                                                                     \
    }                                                                                              \
    case JG_BOOL: {                                                                                \
        typedef bool C;                                                                            \
        BODY;                                                                                      \
        break;                                                                                     \
    }                                                                                              \
    }

/* mode 0: write src, 1: add src, 2: write the value attrs.s */
static int scatter_kernel(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out, int mode) {
    jg_tensor *ix = in[1], *src = mode == 2 ? in[1] : in[2], *o = out[0];
    jg_copy_data(o, in[0]);
    walk w;
    walk_init(&w, (int)a->i[0], ix, o, src);
    const int64_t *ip = (const int64_t *)jg_tensor_ptr(ix);
    SCATTER_DTYPES(o->dtype, {
        C *op = (C *)jg_tensor_ptr(o);
        const C *sp = (const C *)jg_tensor_ptr(src);
        const C v = (C)a->s;
        if (mode == 0)
            WALK(w, ip, op[xo] = sp[vo]);
        else if (mode == 1)
            WALK(w, ip, op[xo] += sp[vo]);
        else
            WALK(w, ip, ((void)vo, op[xo] = v));
    })
    return 0;
}

int jg_k_scatter(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    return scatter_kernel(a, in, out, 0);
}
int jg_k_scatter_add_into(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    return scatter_kernel(a, in, out, 1);
}
int jg_k_scatter_value(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    return scatter_kernel(a, in, out, 2);
}

/* g (idx's shape) padded with zeros to src's shape m (0-d counts as [1]). */
static jg_tensor *pad_to(jg_tensor *g, const jg_meta *m) {
    if (!g || m->ndim == 0) /* (then idx is 0-d or [1] too: g has one element) */
        return g && g->ndim ? jg_reshape(g, 0, NULL) : g;
    for (int d = 0; d < m->ndim && g; d++) {
        if (g->shape[d] == m->shape[d])
            continue;
        jg_attrs sb = {.n = 3 + g->ndim};
        sb.i[0] = d, sb.i[1] = 0, sb.i[2] = g->shape[d];
        memcpy(&sb.i[3], g->shape, sizeof(int64_t) * (size_t)g->ndim);
        sb.i[3 + d] = m->shape[d];
        g = jg_op1(JG_OP_SLICE_BACKWARD, &sb, g, NULL);
    }
    return g;
}

/* The gradient of src: grad.gather(dim, index), padded to src's shape. */
static jg_tensor *src_grad(const jg_attrs *a, const jg_meta *srcm, jg_tensor *g, jg_tensor *ix) {
    jg_attrs ga = {.n = 1};
    ga.i[0] = a->i[0];
    return pad_to(jg_op1(JG_OP_GATHER, &ga, g, ix), srcm);
}

/* scatter: self's gradient is grad with the written positions zeroed (a
 * scatter of 0), src's the gathered grad. */
int jg_vjp_scatter(VJP_ARGS) {
    (void)out;
    gin[0] = gin[1] = gin[2] = NULL;
    if (needs[0]) {
        jg_attrs z = *a;
        z.s = 0;
        jg_tensor *ops[2] = {gout[0], in[1]};
        if (jg_op_call(JG_OP_SCATTER_VALUE, &z, ops, &gin[0]) < 0)
            return -1;
    }
    if (needs[2] && !(gin[2] = src_grad(a, &meta[2], gout[0], in[1])))
        return -1;
    return 0;
}

int jg_vjp_scatter_value(VJP_ARGS) {
    (void)meta, (void)out, (void)needs;
    jg_attrs z = *a;
    z.s = 0;
    jg_tensor *ops[2] = {gout[0], in[1]};
    gin[1] = NULL;
    return jg_op_call(JG_OP_SCATTER_VALUE, &z, ops, &gin[0]);
}

/* scatter_add: self's gradient is grad itself, src's the gathered grad. */
int jg_vjp_scatter_add_into(VJP_ARGS) {
    (void)out;
    gin[0] = needs[0] ? gout[0] : NULL;
    gin[1] = gin[2] = NULL;
    if (needs[2] && !(gin[2] = src_grad(a, &meta[2], gout[0], in[1])))
        return -1;
    return 0;
}
