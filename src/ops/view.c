/* View ops: reshape, permute, slice, expand (outputs alias input 0's storage
 * with new geometry; views of views compose strides and offsets) and
 * slice_backward, the op slice's VJP is made of.  Shape rules, kernels and
 * VJP rules live together here. */
#include "core/iter.h"
#include "ops/decls.h"

#include <string.h>

/* ------------------------------------------------------------ reshape */

int jg_infer_reshape(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    if (a->n < 0 || a->n > JG_MAX_DIMS)
        return jg_errorf("reshape: bad number of dims %d", a->n);
    out[0].dtype = in[0].dtype;
    out[0].ndim = a->n;
    memset(out[0].shape, 0, sizeof out[0].shape);
    for (int d = 0; d < a->n; d++) {
        if (a->i[d] < 0)
            return jg_errorf("invalid shape dimension %lld", (long long)a->i[d]);
        out[0].shape[d] = a->i[d];
    }
    if (jg_shape_numel(a->n, out[0].shape) != jg_shape_numel(in[0].ndim, in[0].shape)) {
        char s[160];
        jg_format_shape(s, sizeof s, a->n, out[0].shape);
        return jg_errorf("shape '%s' is invalid for input of size %lld", s,
                         (long long)jg_shape_numel(in[0].ndim, in[0].shape));
    }
    return 0;
}

/* PyTorch's computeStride (aten/src/ATen/TensorUtils.cpp): strides that let
 * a tensor of old geometry be seen with the new shape, or false when the
 * memory layout does not allow a view (ops/optable.h). */
bool jg_reshape_strides(int old_nd, const int64_t *old_shape, const int64_t *old_stride, int new_nd,
                        const int64_t *new_shape, int64_t *new_stride) {
    if (old_nd == 0) {
        for (int d = 0; d < new_nd; d++)
            new_stride[d] = 1;
        return true;
    }
    int64_t numel = jg_shape_numel(old_nd, old_shape);
    if (numel == 0) {
        if (old_nd == new_nd && !memcmp(old_shape, new_shape, sizeof(int64_t) * (size_t)new_nd)) {
            memcpy(new_stride, old_stride, sizeof(int64_t) * (size_t)new_nd);
            return true;
        }
        jg_contiguous_strides(new_nd, new_shape, new_stride);
        return true;
    }
    int view_d = new_nd - 1;
    int64_t chunk_base_stride = old_stride[old_nd - 1];
    int64_t tensor_numel = 1, view_numel = 1;
    for (int tensor_d = old_nd - 1; tensor_d >= 0; tensor_d--) {
        tensor_numel *= old_shape[tensor_d];
        if (tensor_d == 0 || (old_shape[tensor_d - 1] != 1 &&
                              old_stride[tensor_d - 1] != tensor_numel * chunk_base_stride)) {
            while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
                new_stride[view_d] = view_numel * chunk_base_stride;
                view_numel *= new_shape[view_d];
                view_d--;
            }
            if (view_numel != tensor_numel)
                return false;
            if (tensor_d > 0) {
                chunk_base_stride = old_stride[tensor_d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    return view_d == -1;
}

int jg_k_reshape(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    jg_tensor *x = in[0];
    int nd = a->n;
    const int64_t *shape = a->i;
    int64_t stride[JG_MAX_DIMS];
    if (jg_reshape_strides(x->ndim, x->shape, x->stride, nd, shape, stride)) {
        out[0] = jg_tensor_view_of(x, nd, shape, stride, x->offset);
        return out[0] ? 0 : -1;
    }
    /* no view possible: a contiguous copy, read in x's row-major order */
    jg_tensor *r = jg_tensor_alloc(x->dtype, nd, shape);
    if (!r)
        return -1;
    jg_tensor dst = *r; /* r's memory seen with x's shape */
    dst.ndim = x->ndim;
    memcpy(dst.shape, x->shape, sizeof dst.shape);
    jg_contiguous_strides(x->ndim, x->shape, dst.stride);
    jg_copy_data(&dst, x);
    out[0] = r;
    return 0;
}

bool jg_reshape_is_view(const jg_tensor *x, int ndim, const int64_t *shape) {
    int64_t stride[JG_MAX_DIMS];
    return jg_reshape_strides(x->ndim, x->shape, x->stride, ndim, shape, stride);
}

void jg_view_strides(jg_opcode op, const jg_attrs *a, const jg_tensor *x, int out_ndim,
                     const int64_t *out_shape, int64_t *stride) {
    switch (op) {
    case JG_OP_RESHAPE:
        if (!jg_reshape_strides(x->ndim, x->shape, x->stride, out_ndim, out_shape, stride))
            jg_contiguous_strides(out_ndim, out_shape, stride);
        return;
    case JG_OP_PERMUTE:
        for (int d = 0; d < x->ndim; d++)
            stride[d] = x->stride[a->i[d]];
        return;
    case JG_OP_EXPAND: {
        int lead = a->n - x->ndim;
        for (int d = 0; d < a->n; d++)
            stride[d] =
                d < lead || (x->shape[d - lead] == 1 && a->i[d] != 1) ? 0 : x->stride[d - lead];
        return;
    }
    case JG_OP_SLICE:
        memcpy(stride, x->stride, sizeof(int64_t) * (size_t)x->ndim);
        if (a->n >= 4)
            stride[a->i[0]] *= a->i[3];
        return;
    case JG_OP_DETACH:
        memcpy(stride, x->stride, sizeof(int64_t) * (size_t)x->ndim);
        return;
    default:
        jg_contiguous_strides(out_ndim, out_shape, stride);
        return;
    }
}

int jg_vjp_reshape(VJP_ARGS) {
    UNUSED_ARGS;
    gin[0] = jg_reshape(gout[0], meta[0].ndim, meta[0].shape);
    return gin[0] ? 0 : -1;
}

/* ------------------------------------------------------------ permute */

static int check_perm(const jg_attrs *a, int ndim) {
    if (a->n != ndim)
        return jg_errorf("number of dims don't match in permute (tensor has %d, perm has %d)", ndim,
                         a->n);
    bool seen[JG_MAX_DIMS] = {0};
    for (int d = 0; d < ndim; d++) {
        int64_t p = a->i[d];
        if (p < 0 || p >= ndim)
            return jg_errorf("Dimension out of range (expected to be in range of [%d, %d], but "
                             "got %lld)",
                             -ndim, ndim - 1, (long long)p);
        if (seen[p])
            return jg_errorf("permute(): duplicate dims are not allowed.");
        seen[p] = true;
    }
    return 0;
}

int jg_infer_permute(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    if (check_perm(a, in[0].ndim) < 0)
        return -1;
    out[0] = in[0];
    for (int d = 0; d < in[0].ndim; d++)
        out[0].shape[d] = in[0].shape[a->i[d]];
    return 0;
}

int jg_k_permute(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    jg_tensor *x = in[0];
    int64_t shape[JG_MAX_DIMS], stride[JG_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) {
        shape[d] = x->shape[a->i[d]];
        stride[d] = x->stride[a->i[d]];
    }
    out[0] = jg_tensor_view_of(x, x->ndim, shape, stride, x->offset);
    return out[0] ? 0 : -1;
}

int jg_vjp_permute(VJP_ARGS) {
    UNUSED_ARGS;
    int inv[JG_MAX_DIMS];
    for (int d = 0; d < meta[0].ndim; d++)
        inv[a->i[d]] = d;
    gin[0] = jg_permute(gout[0], inv);
    return gin[0] ? 0 : -1;
}

/* -------------------------------------------------------------- slice */

/* slice and slice_scatter: attrs (dim, start, end[, step]); no step: 1.  The
 * view holds the elements start, start + step, ... below end. */
static int64_t slice_step(const jg_attrs *a) {
    return a->n >= 4 ? a->i[3] : 1;
}

static int64_t slice_len(const jg_attrs *a) {
    int64_t st = slice_step(a);
    return (a->i[2] - a->i[1] + st - 1) / st;
}

static int check_slice(const jg_attrs *a, const jg_meta *m, int64_t step) {
    if (m->ndim == 0)
        return jg_errorf("slice() cannot be applied to a 0-dim tensor.");
    if (a->i[0] < 0 || a->i[0] >= m->ndim)
        return jg_errorf("Dimension out of range (expected to be in range of [%d, %d], but got "
                         "%lld)",
                         -m->ndim, m->ndim - 1, (long long)a->i[0]);
    int64_t n = m->shape[a->i[0]];
    if (a->i[1] < 0 || a->i[1] > a->i[2] || a->i[2] > n)
        return jg_errorf("slice: bad range [%lld, %lld) for a dimension of size %lld",
                         (long long)a->i[1], (long long)a->i[2], (long long)n);
    if (step < 1)
        return jg_errorf("slice step must be positive");
    return 0;
}

int jg_infer_slice(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    if ((a->n < 3 || a->n > 5) || check_slice(a, &in[0], slice_step(a)) < 0)
        return a->n < 3 || a->n > 5 ? jg_errorf("slice: bad attributes (n = %d)", a->n) : -1;
    out[0] = in[0];
    out[0].shape[a->i[0]] = slice_len(a);
    return 0;
}

int jg_k_slice(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    jg_tensor *x = in[0];
    int d = (int)a->i[0];
    int64_t shape[JG_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[d] = slice_len(a);
    int64_t stride[JG_MAX_DIMS];
    memcpy(stride, x->stride, sizeof stride);
    stride[d] *= slice_step(a);
    /* an empty slice still gets a valid offset (PyTorch keeps start*stride) */
    out[0] = jg_tensor_view_of(x, x->ndim, shape, stride, x->offset + a->i[1] * x->stride[d]);
    return out[0] ? 0 : -1;
}

int jg_vjp_slice(VJP_ARGS) {
    UNUSED_ARGS;
    if (slice_step(a) != 1) { /* zeros with g scattered into the stepped slice */
        jg_tensor *z = jg_full(meta[0].dtype, meta[0].ndim, meta[0].shape, 0.0);
        gin[0] = z ? jg_op1(JG_OP_SLICE_SCATTER, a, z, gout[0]) : NULL;
        return gin[0] ? 0 : -1;
    }
    jg_attrs sa = {.n = 3 + meta[0].ndim};
    sa.i[0] = a->i[0];
    sa.i[1] = a->i[1];
    sa.i[2] = a->i[2];
    for (int d = 0; d < meta[0].ndim; d++)
        sa.i[3 + d] = meta[0].shape[d];
    gin[0] = jg_op1(JG_OP_SLICE_BACKWARD, &sa, gout[0], NULL);
    return gin[0] ? 0 : -1;
}

/* ------------------------------------------------------------- expand */

int jg_infer_expand(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    if (a->n < in[0].ndim || a->n > JG_MAX_DIMS)
        return jg_errorf("expand: the number of sizes provided (%d) must be greater or equal to "
                         "the number of dimensions in the tensor (%d)",
                         a->n, in[0].ndim);
    out[0].dtype = in[0].dtype;
    out[0].ndim = a->n;
    memset(out[0].shape, 0, sizeof out[0].shape);
    int lead = a->n - in[0].ndim;
    for (int d = 0; d < a->n; d++) {
        int64_t cur = d >= lead ? in[0].shape[d - lead] : 1, want = a->i[d];
        if (want < 0 || (cur != 1 && cur != want)) {
            char s1[160], s2[160];
            jg_format_shape(s1, sizeof s1, a->n, a->i);
            jg_format_shape(s2, sizeof s2, in[0].ndim, in[0].shape);
            return jg_errorf("The expanded size of the tensor (%lld) must match the existing size "
                             "(%lld) at non-singleton dimension %d.  Target sizes: %s.  Tensor "
                             "sizes: %s",
                             (long long)want, (long long)cur, d, s1, s2);
        }
        out[0].shape[d] = want;
    }
    return 0;
}

int jg_k_expand(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    jg_tensor *x = in[0];
    int lead = a->n - x->ndim;
    int64_t stride[JG_MAX_DIMS];
    for (int d = 0; d < a->n; d++) {
        if (d < lead)
            stride[d] = 0;
        else if (x->shape[d - lead] == 1 && a->i[d] != 1)
            stride[d] = 0;
        else
            stride[d] = x->stride[d - lead];
    }
    out[0] = jg_tensor_view_of(x, a->n, a->i, stride, x->offset);
    return out[0] ? 0 : -1;
}

int jg_vjp_expand(VJP_ARGS) {
    UNUSED_ARGS;
    gin[0] = jg_sum_to(gout[0], meta[0].ndim, meta[0].shape);
    return gin[0] ? 0 : -1;
}

/* ----------------------------------------------------- slice_backward */

int jg_infer_slice_backward(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    int nd = a->n - 3;
    if (nd < 1 || nd > JG_MAX_DIMS || nd != in[0].ndim)
        return jg_errorf("slice_backward: gradient has %d dims, expected %d", in[0].ndim, nd);
    jg_meta full = {.dtype = in[0].dtype, .ndim = nd};
    for (int d = 0; d < nd; d++) {
        if (a->i[3 + d] < 0)
            return jg_errorf("slice_backward: negative size %lld", (long long)a->i[3 + d]);
        full.shape[d] = a->i[3 + d];
    }
    if (check_slice(a, &full, 1) < 0)
        return -1;
    for (int d = 0; d < nd; d++) {
        int64_t want = d == a->i[0] ? a->i[2] - a->i[1] : full.shape[d];
        if (in[0].shape[d] != want) {
            char s1[160], s2[160];
            jg_format_shape(s1, sizeof s1, in[0].ndim, in[0].shape);
            jg_format_shape(s2, sizeof s2, nd, full.shape);
            return jg_errorf("slice_backward: gradient of shape %s does not fit slice [%lld, "
                             "%lld) of dim %lld of %s",
                             s1, (long long)a->i[1], (long long)a->i[2], (long long)a->i[0], s2);
        }
    }
    out[0] = full;
    return 0;
}

int jg_k_slice_backward(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    jg_tensor *r = out[0];
    int d = (int)a->i[0];
    size_t es = jg_dtype_size(r->dtype);
    if (jg_dense(r)) { /* zeros outside the slice only: g's copy fills the rest */
        int64_t outer = 1, inner = 1, n = r->shape[d];
        for (int k = 0; k < d; k++)
            outer *= r->shape[k];
        for (int k = d + 1; k < r->ndim; k++)
            inner *= r->shape[k];
        char *p = jg_tensor_ptr(r);
        size_t row = (size_t)(n * inner) * es, head = (size_t)(a->i[1] * inner) * es,
               tail = (size_t)((n - a->i[2]) * inner) * es;
        for (int64_t o = 0; o < outer && (head || tail); o++) {
            memset(p + (size_t)o * row, 0, head);
            memset(p + (size_t)o * row + row - tail, 0, tail);
        }
    } else {
        memset(jg_tensor_ptr(r), 0, (size_t)r->numel * es);
    }
    jg_tensor dst = *r; /* the slice of r that g fills */
    dst.shape[d] = a->i[2] - a->i[1];
    dst.numel = jg_shape_numel(dst.ndim, dst.shape);
    dst.offset = r->offset + a->i[1] * r->stride[d];
    if (dst.numel)
        jg_copy_data(&dst, in[0]);
    return 0;
}

int jg_vjp_slice_backward(VJP_ARGS) {
    UNUSED_ARGS;
    jg_attrs sa = {.n = 3};
    sa.i[0] = a->i[0];
    sa.i[1] = a->i[1];
    sa.i[2] = a->i[2];
    gin[0] = jg_op1(JG_OP_SLICE, &sa, gout[0], NULL);
    return gin[0] ? 0 : -1;
}

/* ---------------------------------------------------- slice_backward2 */

/* The elements slice_backward2's operand p fills: outer * (end - start) * inner. */
static int64_t sb2_piece_numel(const jg_attrs *a, int p) {
    int nd = a->n - 5, d = (int)a->i[0];
    int64_t n = a->i[2 + 2 * p] - a->i[1 + 2 * p];
    for (int k = 0; k < nd; k++)
        if (k != d)
            n *= a->i[5 + k];
    return n;
}

int jg_infer_slice_backward2(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    int nd = a->n - 5;
    if (nd < 1 || nd > JG_MAX_DIMS)
        return jg_errorf("slice_backward2: %d attributes, expected 6 to %d", a->n, 5 + JG_MAX_DIMS);
    jg_meta full = {.dtype = in[0].dtype, .ndim = nd};
    for (int d = 0; d < nd; d++) {
        if (a->i[5 + d] < 0)
            return jg_errorf("slice_backward2: negative size %lld", (long long)a->i[5 + d]);
        full.shape[d] = a->i[5 + d];
    }
    int64_t d = a->i[0];
    if (d < 0 || d >= nd)
        return jg_errorf("slice_backward2: dim %lld out of range for %d dims", (long long)d, nd);
    if (in[0].dtype != in[1].dtype || (in[0].dtype != JG_F32 && in[0].dtype != JG_F64))
        return jg_errorf("slice_backward2: operands of dtypes %s and %s, expected both float32 or "
                         "both float64",
                         jg_dtype_name(in[0].dtype), jg_dtype_name(in[1].dtype));
    for (int p = 0; p < 2; p++) {
        int64_t s = a->i[1 + 2 * p], e = a->i[2 + 2 * p];
        if (s < 0 || s > e || e > full.shape[d])
            return jg_errorf("slice_backward2: range [%lld, %lld) does not fit dim %lld of size "
                             "%lld",
                             (long long)s, (long long)e, (long long)d, (long long)full.shape[d]);
        if (jg_shape_numel(in[p].ndim, in[p].shape) != sb2_piece_numel(a, p))
            return jg_errorf("slice_backward2: operand %d has %lld elements, its range %lld", p,
                             (long long)jg_shape_numel(in[p].ndim, in[p].shape),
                             (long long)sb2_piece_numel(a, p));
    }
    if (a->i[1] < a->i[4] && a->i[3] < a->i[2])
        return jg_errorf("slice_backward2: ranges [%lld, %lld) and [%lld, %lld) overlap",
                         (long long)a->i[1], (long long)a->i[2], (long long)a->i[3],
                         (long long)a->i[4]);
    out[0] = full;
    return 0;
}

static int64_t gcd64(int64_t a, int64_t b) {
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* o[j] = p[j] + 0 for j < n (-0 becomes +0, as an add of zeros gives);
 * o is the op's new buffer, p an operand: they never overlap.  Vectorized
 * (the tree is built at -O2), which changes no result. */
#define SB2_VECTORIZE __attribute__((optimize("tree-vectorize", "vect-cost-model=dynamic")))
static SB2_VECTORIZE void add0_f32(float *restrict o, const float *restrict p, int64_t n) {
    for (int64_t j = 0; j < n; j++)
        o[j] = p[j] + 0.0f;
}
static SB2_VECTORIZE void add0_f64(double *restrict o, const double *restrict p, int64_t n) {
    for (int64_t j = 0; j < n; j++)
        o[j] = p[j] + 0.0;
}

/* Writes x + 0 (what add(slice_backward(x), zeros) gives: -0 becomes +0,
 * NaNs are quieted) into r's range [s, e) of dim d, x read in row-major
 * order through its strides (dims merged where they are one run), in runs
 * that cross neither a row of x nor a row of the range. */
static void sb2_place(jg_tensor *r, int d, int64_t s, int64_t e, const jg_tensor *x) {
    int64_t outer = 1, inner = 1, n = r->shape[d];
    for (int k = 0; k < d; k++)
        outer *= r->shape[k];
    for (int k = d + 1; k < r->ndim; k++)
        inner *= r->shape[k];
    int64_t row = (e - s) * inner, total = outer * row;
    if (total == 0)
        return;
    int64_t sh[JG_MAX_DIMS], st[JG_MAX_DIMS];
    int cn = 0;
    for (int k = 0; k < x->ndim; k++) {
        if (x->shape[k] == 1)
            continue;
        if (cn && st[cn - 1] == x->stride[k] * x->shape[k]) {
            sh[cn - 1] *= x->shape[k];
            st[cn - 1] = x->stride[k];
        } else {
            sh[cn] = x->shape[k];
            st[cn++] = x->stride[k];
        }
    }
    if (!cn) {
        sh[0] = 1;
        st[0] = 0;
        cn = 1;
    }
    int64_t run = gcd64(sh[cn - 1], row), ist = st[cn - 1], idx[JG_MAX_DIMS] = {0}, off = 0;
    bool f64 = r->dtype == JG_F64;
    char *dst = jg_tensor_ptr(r);
    const char *src = jg_tensor_ptr(x);
    /* (at: where the run goes, rem of it into its row of the range) */
    for (int64_t f = 0, at = s * inner, rem = 0; f < total; f += run) {
        if (f64) {
            double *o = (double *)dst + at;
            const double *p = (const double *)src + off;
            if (ist == 1)
                add0_f64(o, p, run);
            else
                for (int64_t j = 0; j < run; j++)
                    o[j] = p[j * ist] + 0.0;
        } else {
            float *o = (float *)dst + at;
            const float *p = (const float *)src + off;
            if (ist == 1)
                add0_f32(o, p, run);
            else
                for (int64_t j = 0; j < run; j++)
                    o[j] = p[j * ist] + 0.0f;
        }
        at += run;
        if ((rem += run) == row) {
            rem = 0;
            at += (n - (e - s)) * inner;
        }
        idx[cn - 1] += run;
        off += run * ist;
        for (int k = cn - 1; k > 0 && idx[k] == sh[k]; k--) {
            off += st[k - 1] - idx[k] * st[k];
            idx[k] = 0;
            idx[k - 1]++;
        }
    }
}

int jg_k_slice_backward2(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    jg_tensor *r = out[0];
    int d = (int)a->i[0];
    if (!jg_dense(r)) /* (outputs come from the allocator, contiguous) */
        return jg_errorf("slice_backward2: output is not contiguous");
    if (r->numel == 0)
        return 0;
    int64_t outer = 1, inner = 1, n = r->shape[d];
    for (int k = 0; k < d; k++)
        outer *= r->shape[k];
    for (int k = d + 1; k < r->ndim; k++)
        inner *= r->shape[k];
    /* zeros where neither range is: [0, lo), [mid0, mid1), [hi, n) of dim d */
    int lo = a->i[1] <= a->i[3] ? 0 : 1;
    int64_t cut[4] = {a->i[1 + 2 * lo], a->i[2 + 2 * lo], a->i[3 - 2 * lo], a->i[4 - 2 * lo]};
    int64_t gap[3][2] = {{0, cut[0]}, {cut[1], cut[2]}, {cut[3], n}};
    size_t es = jg_dtype_size(r->dtype);
    char *p = jg_tensor_ptr(r);
    for (int64_t o = 0; o < outer; o++)
        for (int k = 0; k < 3; k++)
            if (gap[k][1] > gap[k][0])
                memset(p + (size_t)((o * n + gap[k][0]) * inner) * es, 0,
                       (size_t)((gap[k][1] - gap[k][0]) * inner) * es);
    for (int q = 0; q < 2; q++)
        sb2_place(r, d, a->i[1 + 2 * q], a->i[2 + 2 * q], in[q]);
    return 0;
}

/* ------------------------------------------------------ slice_scatter */

int jg_infer_slice_scatter(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    jg_meta want;
    if (jg_infer_slice(a, &in[0], &want) < 0)
        return -1;
    if (!jg_meta_equal(&want, &in[1])) {
        char s1[160], s2[160];
        jg_format_shape(s1, sizeof s1, in[1].ndim, in[1].shape);
        jg_format_shape(s2, sizeof s2, want.ndim, want.shape);
        return jg_errorf("slice_scatter: src of shape %s (%s) does not match the slice shape %s "
                         "(%s)",
                         s1, jg_dtype_short(in[1].dtype), s2, jg_dtype_short(want.dtype));
    }
    out[0] = in[0];
    return 0;
}

int jg_k_slice_scatter(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    jg_tensor *r = out[0];
    if (r->numel)
        jg_copy_data(r, in[0]);
    jg_tensor dst = *r; /* the slice of r that src fills */
    int d = (int)a->i[0];
    dst.shape[d] = slice_len(a);
    dst.stride[d] *= slice_step(a);
    dst.numel = jg_shape_numel(dst.ndim, dst.shape);
    dst.offset = r->offset + a->i[1] * r->stride[d];
    if (dst.numel)
        jg_copy_data(&dst, in[1]);
    return 0;
}

int jg_vjp_slice_scatter(VJP_ARGS) {
    UNUSED_ARGS;
    if (needs[0] && a->n >= 5 && a->i[4]) {
        /* copy_ over a tensor with history: zeros that do not depend on the
         * gradient, as PyTorch's CopyBackwards gives (no history under
         * create_graph).  A write through a view that happens to cover all
         * of its base keeps the gradient's history below (CopySlices). */
        if (!(gin[0] = jg_full(meta[0].dtype, meta[0].ndim, meta[0].shape, 0.0)))
            return -1;
    } else if (needs[0]) {
        jg_tensor *z = jg_full(meta[1].dtype, meta[1].ndim, meta[1].shape, 0.0);
        if (!z || !(gin[0] = jg_op1(JG_OP_SLICE_SCATTER, a, gout[0], z)))
            return -1;
    }
    if (needs[1] && !(gin[1] = jg_op1(JG_OP_SLICE, a, gout[0], NULL)))
        return -1;
    return 0;
}

int jg_k_detach(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    (void)a;
    jg_tensor *t = in[0];
    return (out[0] = jg_tensor_view_of(t, t->ndim, t->shape, t->stride, t->offset)) ? 0 : -1;
}

int jg_vjp_detach(VJP_ARGS) {
    (void)a, (void)meta, (void)in, (void)out, (void)gout, (void)needs;
    gin[0] = NULL; /* never called: the row is JG_OPF_NONDIFF */
    return 0;
}
