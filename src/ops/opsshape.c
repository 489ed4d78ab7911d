/* Shape and indexing ops (PyTorch's cat, stack, narrow, stepped slices,
 * tril/triu, index_select, advanced indexing read and write) and the
 * creation functions eye, linspace, randint, randperm, multinomial.
 *
 * Most are compositions of existing rows, so their gradients, double
 * backward and compilation come with them: cat is a chain of slice_scatter
 * into the first piece's slice_backward, indexing is gather along one dim.
 * New rows: tril/triu (VJP: the same op on the gradient) and index_copy
 * (x with slices along a dim replaced by v's; VJP: index_copy of zeros into
 * the gradient for x, a gather for v). */
#include "autograd/node.h"
#include "core/iter.h"
#include "ops/decls.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ tril/triu */

/* attrs.i[0]: the diagonal (0: main, > 0 above, < 0 below) */
int jg_infer_tril(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    (void)a;
    if (in[0].ndim < 2)
        return jg_errorf("tril/triu: input tensor must have at least 2 dimensions");
    out[0] = in[0];
    return 0;
}

/* Copies x and zeroes, in each matrix, the elements whose column minus row is
 * above (tril) or below (triu) the diagonal. */
static int tri_kernel(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out, bool upper) {
    jg_tensor *o = out[0];
    if (!o->numel)
        return 0;
    jg_copy_data(o, in[0]);
    int64_t rows = o->shape[o->ndim - 2], cols = o->shape[o->ndim - 1];
    int64_t mats = o->numel / (rows * cols), k = a->i[0];
    size_t es = jg_dtype_size(o->dtype);
    char *p = jg_tensor_ptr(o);
    for (int64_t m = 0; m < mats; m++)
        for (int64_t r = 0; r < rows; r++) {
            char *row = p + (size_t)((m * rows + r) * cols) * es;
            /* tril keeps columns c <= r + k; triu keeps c >= r + k */
            int64_t edge = r + k + (upper ? 0 : 1);
            edge = edge < 0 ? 0 : edge > cols ? cols : edge;
            if (upper)
                memset(row, 0, (size_t)edge * es);
            else
                memset(row + (size_t)edge * es, 0, (size_t)(cols - edge) * es);
        }
    return 0;
}

int jg_k_tril(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    return tri_kernel(a, in, out, false);
}

int jg_k_triu(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    return tri_kernel(a, in, out, true);
}

int jg_vjp_tril(VJP_ARGS) {
    UNUSED_ARGS;
    gin[0] = jg_op1(JG_OP_TRIL, a, gout[0], NULL);
    return gin[0] ? 0 : -1;
}

int jg_vjp_triu(VJP_ARGS) {
    UNUSED_ARGS;
    gin[0] = jg_op1(JG_OP_TRIU, a, gout[0], NULL);
    return gin[0] ? 0 : -1;
}

static jg_tensor *tri(jg_opcode op, const char *fn, jg_tensor *x, int64_t diagonal) {
    if (!x)
        return jg_errorf_null("%s: tensor is NULL", fn);
    if (x->ndim < 2) /* PyTorch's message: it wraps dim -2 */
        return jg_errorf_null("Dimension out of range (expected to be in range of [-1, 0], but got "
                              "-2)");
    jg_attrs a = {.n = 1};
    a.i[0] = diagonal;
    return jg_op1(op, &a, x, NULL);
}

jg_tensor *jg_tril(jg_tensor *x, int64_t diagonal) {
    return tri(JG_OP_TRIL, "tril", x, diagonal);
}

jg_tensor *jg_triu(jg_tensor *x, int64_t diagonal) {
    return tri(JG_OP_TRIU, "triu", x, diagonal);
}

/* ----------------------------------------------------------- index_copy */

/* index_copy(x, idx, v) along attrs.i[0]: x with x[.., idx[k], ..] = v[.., k, ..];
 * idx is 1-D int64 (in range: the kernel checks), v has x's shape with the
 * dim's size replaced by idx's length.  Repeated indices: the last wins. */
int jg_infer_index_copy(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    const jg_meta *x = &in[0], *ix = &in[1], *v = &in[2];
    if (a->n != 1 || x->ndim < 1 || a->i[0] < 0 || a->i[0] >= x->ndim)
        return jg_errorf("index_copy(): bad dim %lld for a tensor of %d dims", (long long)a->i[0],
                         x->ndim);
    if (ix->dtype != JG_I64 || ix->ndim != 1)
        return jg_errorf("index_copy(): Index should have dimension 1 and dtype int64");
    jg_meta want = *x;
    want.shape[a->i[0]] = ix->shape[0];
    if (!jg_meta_equal(&want, v)) {
        char s1[160], s2[160];
        jg_format_shape(s1, sizeof s1, v->ndim, v->shape);
        jg_format_shape(s2, sizeof s2, want.ndim, want.shape);
        return jg_errorf("index_copy(): source of shape %s (%s) does not match %s (%s)", s1,
                         jg_dtype_short(v->dtype), s2, jg_dtype_short(want.dtype));
    }
    out[0] = *x;
    return 0;
}

/* The slice of t at position i of dim d, keeping the dim (size 1). */
static jg_tensor slice1(const jg_tensor *t, int d, int64_t i) {
    jg_tensor s = *t;
    s.shape[d] = 1;
    s.numel = jg_shape_numel(s.ndim, s.shape);
    s.offset = t->offset + i * t->stride[d];
    return s;
}

/* o's slices along d at the (in range) 1-D ix replaced by v's, in order. */
static void write_slices(jg_tensor *o, int d, const jg_tensor *ix, const jg_tensor *v) {
    const int64_t *ip = (const int64_t *)jg_tensor_ptr(ix);
    for (int64_t k = 0; k < ix->shape[0]; k++) {
        jg_tensor dst = slice1(o, d, ip[k * ix->stride[0]]), src = slice1(v, d, k);
        if (dst.numel)
            jg_copy_data(&dst, &src);
    }
}

int jg_k_index_copy(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    jg_tensor *x = in[0], *ix = in[1], *v = in[2], *o = out[0];
    int d = (int)a->i[0];
    int64_t n = ix->shape[0], size = x->shape[d];
    const int64_t *ip = (const int64_t *)jg_tensor_ptr(ix);
    for (int64_t k = 0; k < n; k++) { /* all checked first: a failure writes nothing */
        int64_t j = ip[k * ix->stride[0]];
        if (j < 0 || j >= size)
            return jg_errorf("index %lld is out of bounds for dimension %d with size %lld",
                             (long long)j, d, (long long)size);
    }
    if (o->numel)
        jg_copy_data(o, x);
    write_slices(o, d, ix, v);
    return 0;
}

static jg_tensor *gather_along(jg_tensor *x, int d, jg_tensor *idx1);

int jg_vjp_index_copy(VJP_ARGS) {
    (void)out;
    gin[1] = NULL; /* indices are not differentiable */
    if (needs[0]) {
        jg_tensor *z = jg_full(meta[2].dtype, meta[2].ndim, meta[2].shape, 0.0);
        jg_tensor *ops[3] = {gout[0], in[1], z}, *r = NULL;
        if (!z || jg_op_call(JG_OP_INDEX_COPY, a, ops, &r) < 0)
            return -1;
        gin[0] = r;
    }
    if (needs[2] && !(gin[2] = gather_along(gout[0], (int)a->i[0], in[1])))
        return -1;
    return 0;
}

/* ------------------------------------------------------------- indexing */

/* x along dim d at the 1-D int64 indices idx1 (in range: gather checks):
 * x's shape with that dim's size replaced by idx1's length.  A gather with
 * idx1 broadcast over the other dims. */
static jg_tensor *gather_along(jg_tensor *x, int d, jg_tensor *idx1) {
    int64_t shape[JG_MAX_DIMS], ones[JG_MAX_DIMS];
    for (int k = 0; k < x->ndim; k++) {
        shape[k] = k == d ? idx1->shape[0] : x->shape[k];
        ones[k] = k == d ? idx1->shape[0] : 1;
    }
    jg_tensor *r = jg_reshape(idx1, x->ndim, ones);
    jg_tensor *e = r ? jg_expand(r, x->ndim, shape) : NULL;
    jg_attrs ga = {.n = 1};
    ga.i[0] = d;
    return e ? jg_op1(JG_OP_GATHER, &ga, x, e) : NULL;
}

static bool readable(const jg_tensor *t) {
    return !t->sym && !jg_trace_captured(t);
}

/* idx (int64, any shape) made 1-D with negative entries counted from the end
 * of a dim of `size`; `dim` names that dim in the error for an entry out of
 * range.  Scope-owned.  A tensor whose values can be read now is checked
 * now; a traced one through a gather from arange(size), which fails when the
 * compiled program runs exactly where eager fails. */
static jg_tensor *wrap_index(jg_tensor *idx, int dim, int64_t size) {
    if (idx->dtype != JG_I64 && idx->dtype != JG_I32)
        return jg_errorf_null("tensors used as indices must be long, byte or bool tensors");
    int64_t n = idx->numel;
    if (readable(idx)) {
        jg_tensor *c = jg_to_dtype(idx, JG_I64);
        jg_tensor *flat = c ? jg_tensor_new(JG_I64, 1, &n, NULL) : NULL;
        if (!flat || jg_copy_to(c, jg_data(flat), (size_t)n * sizeof(int64_t)) < 0)
            return NULL;
        int64_t *p = jg_data(flat);
        for (int64_t k = 0; k < n; k++) {
            if (p[k] < -size || p[k] >= size)
                return jg_errorf_null("index %lld is out of bounds for dimension %d with size %lld",
                                      (long long)p[k], dim, (long long)size);
            if (p[k] < 0)
                p[k] += size;
        }
        return flat;
    }
    jg_tensor *c = idx->dtype == JG_I64 ? idx : jg_to_dtype(idx, JG_I64);
    jg_tensor *flat = c ? jg_reshape(c, 1, &n) : NULL;
    jg_tensor *neg = flat ? jg_lt_scalar(flat, 0) : NULL;
    jg_tensor *up = neg ? jg_add_scalar(flat, (double)size) : NULL;
    jg_tensor *w = up ? jg_where(neg, up, flat) : NULL;
    if (!w)
        return NULL;
    int64_t one = size;
    jg_tensor *table = jg_tensor_new(JG_I64, 1, &one, NULL);
    if (!table)
        return NULL;
    int64_t *tp = jg_data(table);
    for (int64_t k = 0; k < size; k++)
        tp[k] = k;
    jg_attrs ga = {.n = 1};
    return jg_op1(JG_OP_GATHER, &ga, table, w);
}

static int index_args(const char *fn, jg_tensor *x, int *dim, jg_tensor *idx) {
    if (!x || !idx)
        return jg_errorf("%s: tensor is NULL", fn);
    if (x->ndim == 0)
        return jg_errorf("%s: cannot index a 0-dim tensor along a dim", fn);
    int d = jg_wrap_dim(*dim, x->ndim);
    if (d < 0)
        return -1;
    *dim = d;
    if (x->ndim - 1 + idx->ndim > JG_MAX_DIMS)
        return jg_errorf("%s: the result would have more than %d dims", fn, JG_MAX_DIMS);
    return 0;
}

/* x's shape with dim d replaced by idx's shape */
static int indexed_shape(const jg_tensor *x, int d, const jg_tensor *idx, int64_t *shape) {
    int n = 0;
    for (int k = 0; k < x->ndim; k++) {
        if (k != d) {
            shape[n++] = x->shape[k];
            continue;
        }
        for (int j = 0; j < idx->ndim; j++)
            shape[n++] = idx->shape[j];
    }
    return n;
}

jg_tensor *jg_index(jg_tensor *x, int dim, jg_tensor *idx) {
    if (index_args("index", x, &dim, idx) < 0)
        return NULL;
    jg_scope_push();
    jg_tensor *w = wrap_index(idx, dim, x->shape[dim]);
    jg_tensor *g = w ? gather_along(x, dim, w) : NULL, *r = NULL;
    if (g) {
        int64_t shape[JG_MAX_DIMS];
        int n = indexed_shape(x, dim, idx, shape);
        r = jg_reshape(g, n, shape);
    }
    jg_autograd_name_node(r, "IndexBackward0");
    jg_keep(r);
    jg_scope_pop();
    return jg_scope_track(r);
}

jg_tensor *jg_index_select(jg_tensor *x, int dim, jg_tensor *idx) {
    if (!x || !idx)
        return jg_errorf_null("index_select: tensor is NULL");
    if (idx->ndim > 1)
        return jg_errorf_null("index_select(): Index is supposed to be a vector");
    if (idx->dtype != JG_I64 && idx->dtype != JG_I32)
        return jg_errorf_null("index_select(): Expected dtype int32 or int64 for index");
    int64_t one = 1;
    jg_scope_push();
    jg_tensor *x1 = x->ndim ? x : jg_reshape(x, 1, &one);
    jg_tensor *i1 = idx->ndim ? idx : jg_reshape(idx, 1, &one), *r = NULL;
    if (i1 && i1->dtype != JG_I64)
        i1 = jg_to_dtype(i1, JG_I64);
    int d = x1 && i1 ? jg_wrap_dim(dim, x1->ndim) : -1;
    if (d >= 0 && readable(i1)) { /* PyTorch does not count negative indices from the end */
        int64_t n = i1->numel, *v = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
        if (v && jg_copy_to(i1, v, sizeof(int64_t) * (size_t)n) == 0) {
            for (int64_t k = 0; k < n && d >= 0; k++)
                if (v[k] < 0 || v[k] >= x1->shape[d])
                    d = jg_errorf("INDICES element is out of DATA bounds, id=%lld axis_dim=%lld",
                                  (long long)v[k], (long long)x1->shape[d]);
        } else {
            d = v ? -1 : jg_errorf("out of memory");
        }
        free(v);
    }
    jg_tensor *g = d >= 0 ? gather_along(x1, d, i1) : NULL;
    r = g && !x->ndim ? jg_reshape(g, 0, NULL) : g;
    jg_autograd_name_node(r, "IndexSelectBackward0");
    jg_keep(r);
    jg_scope_pop();
    return jg_scope_track(r);
}

/* Do a's and b's elements share memory (by the extents they span)? */
static bool overlaps(const jg_tensor *a, const jg_tensor *b) {
    if (a->sym || b->sym || !jg_same_storage(a, b) || !a->numel || !b->numel)
        return false;
    int64_t lo[2], hi[2];
    const jg_tensor *t[2] = {a, b};
    for (int k = 0; k < 2; k++) {
        lo[k] = hi[k] = t[k]->offset;
        for (int d = 0; d < t[k]->ndim; d++) {
            int64_t span = (t[k]->shape[d] - 1) * t[k]->stride[d];
            if (span < 0)
                lo[k] += span;
            else
                hi[k] += span;
        }
    }
    return lo[0] <= hi[1] && lo[1] <= hi[0];
}

int jg_index_put_(jg_tensor *x, int dim, jg_tensor *idx, jg_tensor *values) {
    if (index_args("index_put_", x, &dim, idx) < 0)
        return -1;
    if (!values)
        return jg_errorf("index_put_: values is NULL");
    jg_scope_push();
    int rc = -1;
    int64_t shape[JG_MAX_DIMS], flat[JG_MAX_DIMS];
    int n = indexed_shape(x, dim, idx, shape);
    jg_tensor *w = wrap_index(idx, dim, x->shape[dim]), *v = NULL;
    if (!w)
        goto done;
    if (values->ndim > n) {
        char s1[160], s2[160];
        jg_format_shape(s1, sizeof s1, values->ndim, values->shape);
        jg_format_shape(s2, sizeof s2, n, shape);
        jg_errorf("shape mismatch: value tensor of shape %s cannot be broadcast to indexing "
                  "result of shape %s",
                  s1, s2);
        goto done;
    }
    for (int k = 0; k < values->ndim; k++) {
        int64_t vs = values->shape[k], ts = shape[n - values->ndim + k];
        if (vs != 1 && vs != ts) {
            char s1[160], s2[160];
            jg_format_shape(s1, sizeof s1, values->ndim, values->shape);
            jg_format_shape(s2, sizeof s2, n, shape);
            jg_errorf("shape mismatch: value tensor of shape %s cannot be broadcast to indexing "
                      "result of shape %s",
                      s1, s2);
            goto done;
        }
    }
    if (values->dtype != x->dtype) {
        jg_errorf("Index put requires the source and destination dtypes match, got %s for the "
                  "destination and %s for the source.",
                  jg_dtype_torch_name(x->dtype), jg_dtype_torch_name(values->dtype));
        goto done;
    }
    v = jg_expand(values, n, shape);
    memcpy(flat, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    flat[dim] = w->shape[0];
    v = v ? jg_reshape(v, x->ndim, flat) : NULL;
    if (!v)
        goto done;
    if (overlaps(x, values)) {
        jg_errorf("unsupported operation: some elements of the input tensor and the written-to "
                  "tensor refer to a single memory location. Please clone() the tensor before "
                  "performing the operation.");
        goto done;
    }
    jg_tensor *both[2] = {x, v};
    if (!jg_trace_capture && !x->sym && !w->sym && !v->sym && !jg_any_requires_grad(2, both)) {
        /* no history to record: write the slices in place */
        write_slices(x, dim, w, v);
        x->storage->version++;
        rc = 0;
        goto done;
    }
    /* index_copy saves its inputs, and x is about to change: copy it first
     * when a gradient will be computed (traced too: the compiled call's
     * check for saved values written later then sees a copy read, as eager) */
    jg_tensor *base = x;
    if (jg_grad_mode && (x->requires_grad || v->requires_grad))
        base = jg_clone(x);
    jg_attrs a = {.n = 1};
    a.i[0] = dim;
    jg_tensor *ops[3] = {base, w, v}, *r = NULL;
    if (base && jg_op_call(JG_OP_INDEX_COPY, &a, ops, &r) == 0)
        rc = jg_copy_(x, r);
    if (rc == 0 && !x->view) /* (a view's base becomes CopySlices) */
        jg_autograd_name_node(x, "IndexPutBackward0");
done:
    jg_scope_pop();
    return rc;
}

jg_tensor *jg_nonzero(jg_tensor *a) {
    if (!a)
        return jg_errorf_null("nonzero: tensor is NULL");
    if (jg_check_concrete(a, "nonzero") < 0)
        return NULL;
    int64_t n = a->numel, count = 0;
    jg_scope_push();
    jg_tensor *b = a->dtype == JG_BOOL ? a : jg_ne_scalar(a, 0);
    bool *flags = malloc((size_t)(n ? n : 1));
    jg_tensor *r = NULL;
    if (b && flags && jg_copy_to(b, flags, (size_t)n) == 0) {
        for (int64_t i = 0; i < n; i++)
            count += flags[i];
        int64_t shape[2] = {count, a->ndim};
        r = jg_keep(jg_tensor_new(JG_I64, 2, shape, NULL));
        int64_t *o = r ? jg_data(r) : NULL;
        for (int64_t i = 0, row = 0; o && i < n; i++) {
            if (!flags[i])
                continue;
            int64_t rest = i; /* row-major position -> coordinates */
            for (int d = a->ndim - 1; d >= 0; d--) {
                o[row * a->ndim + d] = rest % a->shape[d];
                rest /= a->shape[d];
            }
            row++;
        }
    } else if (!flags) {
        jg_errorf("out of memory");
    }
    free(flags);
    jg_scope_pop();
    return r ? jg_scope_track(r) : NULL;
}

/* ------------------------------------------------------ slices, narrow */

jg_tensor *jg_slice_step(jg_tensor *a, int dim, int64_t start, int64_t end, int64_t step) {
    if (!a)
        return jg_errorf_null("jg_slice_step: tensor is NULL");
    if (step <= 0)
        return jg_errorf_null("slice step must be positive");
    if (step == 1)
        return jg_slice(a, dim, start, end);
    if (a->ndim == 0)
        return jg_errorf_null("slice() cannot be applied to a 0-dim tensor.");
    int d = jg_wrap_dim(dim, a->ndim);
    if (d < 0)
        return NULL;
    int64_t n = a->shape[d];
    if (start < 0)
        start += n;
    if (end < 0)
        end += n;
    start = start < 0 ? 0 : start > n ? n : start;
    end = end < start ? start : end > n ? n : end;
    jg_attrs at = {.n = 4};
    at.i[0] = d;
    at.i[1] = start;
    at.i[2] = end;
    at.i[3] = step;
    return jg_op1(JG_OP_SLICE, &at, a, NULL);
}

jg_tensor *jg_narrow(jg_tensor *a, int dim, int64_t start, int64_t length) {
    if (!a)
        return jg_errorf_null("narrow: tensor is NULL");
    if (a->ndim == 0)
        return jg_errorf_null("narrow() cannot be applied to a 0-dim tensor.");
    int d = jg_wrap_dim(dim, a->ndim);
    if (d < 0)
        return NULL;
    int64_t n = a->shape[d];
    /* PyTorch wraps start like a dim (and so words its error), except start == size */
    if (start != n && (start < -(n ? n : 1) || start > (n ? n - 1 : 0)))
        return jg_errorf_null("Dimension out of range (expected to be in range of [%lld, %lld], "
                              "but got %lld)",
                              (long long)-(n ? n : 1), (long long)(n ? n - 1 : 0),
                              (long long)start);
    if (start < 0)
        start += n;
    if (length < 0 || start > n - length)
        return jg_errorf_null("start (%lld) + length (%lld) exceeds dimension size (%lld).",
                              (long long)start, (long long)length, (long long)n);
    return jg_slice(a, d, start, start + length);
}

/* ------------------------------------------------------------ cat/stack */

/* cat of n pieces of one dtype as ops with VJPs (scope-owned): the first
 * piece placed into zeros of the whole shape (slice_backward), each other
 * piece written over its range (slice_scatter).  Halves are joined
 * recursively, so each element is copied O(log n) times, not O(n). */
static jg_tensor *cat_ops(jg_tensor *const *ps, int n, int d, int64_t total) {
    if (n > 2) {
        int h = n / 2;
        int64_t left = 0;
        for (int k = 0; k < h; k++)
            left += ps[k]->shape[d];
        jg_tensor *halves[2] = {cat_ops(ps, h, d, left), NULL};
        halves[1] = halves[0] ? cat_ops(ps + h, n - h, d, total - left) : NULL;
        return halves[1] ? cat_ops(halves, 2, d, total) : NULL;
    }
    const jg_tensor *t0 = ps[0];
    jg_attrs sb = {.n = 3 + t0->ndim};
    sb.i[0] = d;
    sb.i[2] = t0->shape[d];
    for (int j = 0; j < t0->ndim; j++)
        sb.i[3 + j] = j == d ? total : t0->shape[j];
    jg_tensor *r = jg_op1(JG_OP_SLICE_BACKWARD, &sb, ps[0], NULL);
    if (r && n == 2) {
        jg_attrs sa = {.n = 3};
        sa.i[0] = d;
        sa.i[1] = t0->shape[d];
        sa.i[2] = total;
        r = jg_op1(JG_OP_SLICE_SCATTER, &sa, r, ps[1]);
    }
    return r;
}

jg_tensor *jg_cat(int n, jg_tensor *const *ts, int dim) {
    if (n <= 0 || !ts)
        return jg_errorf_null("torch.cat(): expected a non-empty list of Tensors");
    for (int k = 0; k < n; k++) {
        if (!ts[k])
            return jg_errorf_null("cat: tensor %d is NULL", k);
        if (ts[k]->ndim == 0)
            return jg_errorf_null("zero-dimensional tensor (at position %d) cannot be "
                                  "concatenated",
                                  k);
    }
    const jg_tensor *t0 = ts[0];
    int d = jg_wrap_dim(dim, t0->ndim);
    if (d < 0)
        return NULL;
    jg_dtype dt = t0->dtype;
    int64_t total = 0;
    for (int k = 0; k < n; k++) {
        const jg_tensor *t = ts[k];
        if (t->ndim != t0->ndim)
            return jg_errorf_null("Tensors must have same number of dimensions: got %d and %d",
                                  t0->ndim, t->ndim);
        for (int j = 0; j < t0->ndim; j++)
            if (j != d && t->shape[j] != t0->shape[j])
                return jg_errorf_null("Sizes of tensors must match except in dimension %d. "
                                      "Expected size %lld but got size %lld for tensor number %d "
                                      "in the list.",
                                      d, (long long)t0->shape[j], (long long)t->shape[j], k);
        total += t->shape[d];
        dt = jg_dtype_promote(dt, t->dtype);
    }
    jg_tensor *r = NULL;
    bool direct = !jg_trace_capture && !jg_any_requires_grad(n, ts);
    for (int k = 0; k < n && direct; k++)
        direct = !ts[k]->sym;
    if (direct) { /* no history to record: copy each piece into place */
        int64_t shape[JG_MAX_DIMS];
        memcpy(shape, t0->shape, sizeof shape);
        shape[d] = total;
        if (!(r = jg_tensor_alloc(dt, t0->ndim, shape)))
            return NULL;
        jg_scope_push();
        int64_t off = 0;
        for (int k = 0; k < n && r; k++) {
            jg_tensor *p = ts[k]->dtype == dt ? ts[k] : jg_to_dtype(ts[k], dt);
            jg_tensor dst = *r;
            dst.shape[d] = ts[k]->shape[d];
            dst.numel = jg_shape_numel(dst.ndim, dst.shape);
            dst.offset = r->offset + off * r->stride[d];
            off += ts[k]->shape[d];
            if (!p) {
                jg_release(r);
                r = NULL;
            } else if (dst.numel) {
                jg_copy_data(&dst, p);
            }
        }
        jg_scope_pop();
        return r ? jg_scope_track(r) : NULL;
    }
    jg_scope_push();
    jg_tensor **ps = malloc(sizeof(jg_tensor *) * (size_t)n);
    if (ps) {
        int k = 0;
        for (; k < n; k++)
            if (!(ps[k] = ts[k]->dtype == dt ? ts[k] : jg_to_dtype(ts[k], dt)))
                break;
        r = k == n ? cat_ops(ps, n, d, total) : NULL;
        jg_autograd_name_node(r, "CatBackward0");
        free(ps);
    } else {
        jg_errorf("out of memory");
    }
    jg_keep(r);
    jg_scope_pop();
    return jg_scope_track(r);
}

jg_tensor *jg_stack(int n, jg_tensor *const *ts, int dim) {
    if (n <= 0 || !ts)
        return jg_errorf_null("stack expects a non-empty TensorList");
    for (int k = 0; k < n; k++)
        if (!ts[k])
            return jg_errorf_null("stack: tensor %d is NULL", k);
    const jg_tensor *t0 = ts[0];
    for (int k = 1; k < n; k++)
        if (!jg_same_shape(ts[k], t0)) {
            char s1[160], s2[160];
            jg_format_shape(s1, sizeof s1, t0->ndim, t0->shape);
            jg_format_shape(s2, sizeof s2, ts[k]->ndim, ts[k]->shape);
            return jg_errorf_null("stack expects each tensor to be equal size, but got %s at "
                                  "entry 0 and %s at entry %d",
                                  s1, s2, k);
        }
    if (t0->ndim >= JG_MAX_DIMS)
        return jg_errorf_null("stack: the result would have more than %d dims", JG_MAX_DIMS);
    int d = jg_wrap_dim(dim, t0->ndim + 1);
    if (d < 0)
        return NULL;
    jg_tensor **us = malloc(sizeof(jg_tensor *) * (size_t)n);
    if (!us)
        return jg_errorf_null("out of memory");
    int64_t shape[JG_MAX_DIMS];
    for (int j = 0, m = 0; j <= t0->ndim; j++)
        shape[j] = j == d ? 1 : t0->shape[m++];
    jg_scope_push();
    jg_tensor *r = NULL;
    int k = 0;
    for (; k < n; k++)
        if (!(us[k] = jg_reshape(ts[k], t0->ndim + 1, shape)))
            break;
    if (k == n)
        r = jg_cat(n, us, d);
    jg_autograd_name_node(r, "StackBackward0");
    jg_keep(r);
    jg_scope_pop();
    free(us);
    return jg_scope_track(r);
}

/* ------------------------------------------------------------- creation */

static int check_dtype(const char *fn, jg_dtype dtype) {
    if (!jg_dtype_valid((int)dtype))
        return jg_errorf("%s: invalid dtype %d", fn, (int)dtype);
    return 0;
}

static void store(jg_tensor *t, int64_t i, double v) {
    char *p = (char *)t->storage->data;
    switch (t->dtype) {
    case JG_F32:
        ((float *)p)[i] = (float)v;
        break;
    case JG_F64:
        ((double *)p)[i] = v;
        break;
    case JG_I64:
        ((int64_t *)p)[i] = (int64_t)v;
        break;
    case JG_I32:
        ((int32_t *)p)[i] = (int32_t)v;
        break;
    case JG_BOOL:
        ((bool *)p)[i] = v != 0;
        break;
    }
}

jg_tensor *jg_eye(jg_dtype dtype, int64_t n, int64_t m) {
    if (check_dtype("eye", dtype) < 0)
        return NULL;
    if (n < 0)
        return jg_errorf_null("n must be greater or equal to 0, got %lld", (long long)n);
    if (m < 0)
        return jg_errorf_null("m must be greater or equal to 0, got %lld", (long long)m);
    int64_t shape[2] = {n, m};
    jg_tensor *t = jg_full(dtype, 2, shape, 0.0);
    if (t)
        for (int64_t i = 0; i < n && i < m; i++)
            store(t, i * m + i, 1.0);
    return t;
}

/* PyTorch 1.13's linspace kernel as the python3-torch reference runs it
 * (its AVX2 build): the elements go in groups of two 32-byte vectors while
 * a whole group fits; each vector starts from a base fma(step, i, start) —
 * or fma(-step, steps - 1 - i, end) from the middle on — and adds k * step
 * per lane; the remaining elements are computed one by one the same way.
 * Integer results compute in double from the truncated start and end. */
#define LINSPACE_LOOP(T, ACC, FMA, lanes)                                                          \
    do {                                                                                           \
        T *p_ = (T *)t->storage->data;                                                             \
        ACC s_ = (ACC)(T)start, e_ = (ACC)(T)end;                                                  \
        ACC step_ = steps > 1 ? (e_ - s_) / (ACC)(steps - 1) : (ACC)0;                             \
        int64_t half_ = steps / 2, i_ = 0;                                                         \
        for (; i_ + 2 * (lanes) <= steps; i_ += (lanes)) {                                         \
            ACC base_ =                                                                            \
                i_ < half_ ? FMA(step_, (ACC)i_, s_) : FMA(-step_, (ACC)(steps - i_ - 1), e_);     \
            for (int64_t k_ = 0; k_ < (lanes); k_++)                                               \
                p_[i_ + k_] = (T)((ACC)(T)base_ + (ACC)k_ * step_);                                \
            i_ += (lanes);                                                                         \
            base_ = i_ < half_ ? FMA(step_, (ACC)i_, s_) : FMA(-step_, (ACC)(steps - i_ - 1), e_); \
            for (int64_t k_ = 0; k_ < (lanes); k_++)                                               \
                p_[i_ + k_] = (T)((ACC)(T)base_ + (ACC)k_ * step_);                                \
        }                                                                                          \
        for (; i_ < steps; i_++)                                                                   \
            p_[i_] = (T)(i_ < half_ ? FMA(step_, (ACC)i_, s_)                                      \
                                    : FMA(-step_, (ACC)(steps - i_ - 1), e_));                     \
    } while (0)

jg_tensor *jg_linspace(jg_dtype dtype, double start, double end, int64_t steps) {
    if (check_dtype("linspace", dtype) < 0)
        return NULL;
    if (dtype == JG_BOOL)
        return jg_errorf_null("\"linspace_cpu\" not implemented for 'Bool'");
    if (steps < 0)
        return jg_errorf_null("number of steps must be non-negative");
    jg_tensor *t = jg_full(dtype, 1, &steps, 0.0);
    if (!t || steps == 0)
        return t;
    if (steps == 1) {
        store(t, 0, start);
        return t;
    }
    switch (dtype) {
    case JG_F32:
        LINSPACE_LOOP(float, float, fmaf, 8);
        break;
    case JG_F64:
        LINSPACE_LOOP(double, double, fma, 4);
        break;
    case JG_I64:
        LINSPACE_LOOP(int64_t, double, fma, 4);
        break;
    case JG_I32:
        LINSPACE_LOOP(int32_t, double, fma, 8);
        break;
    case JG_BOOL:
        break;
    }
    return t;
}

/* ---- random integers from the library generator (core/rng.c) ---- */

static void random_break(const char *fn) {
    if (jg_trace_capture && jg_hooks.on_untraceable) {
        char why[200];
        snprintf(why, sizeof why,
                 "%s() draws new random numbers at every call, and a graph has no random ops "
                 "(its values would be fixed at trace time)",
                 fn);
        jg_hooks.on_untraceable(why);
    }
}

/* uniform in [0, range) without modulo bias (range >= 1) */
static uint64_t below(uint64_t range) {
    uint64_t lim = -range % range, u;
    do
        u = jg_rng_next();
    while (u < lim);
    return u % range;
}

static double uniform01(void) {
    return (double)(jg_rng_next() >> 11) * 0x1.0p-53;
}

jg_tensor *jg_randint(jg_dtype dtype, int64_t low, int64_t high, int ndim, const int64_t *shape) {
    if (check_dtype("randint", dtype) < 0)
        return NULL;
    if (low >= high)
        return jg_errorf_null("random_ expects 'from' to be less than 'to', but got from=%lld >= "
                              "to=%lld",
                              (long long)low, (long long)high);
    jg_tensor *t = jg_full(dtype, ndim, shape, 0.0);
    if (!t)
        return NULL;
    random_break("randint");
    uint64_t range = (uint64_t)high - (uint64_t)low;
    for (int64_t i = 0; i < t->numel; i++)
        store(t, i, (double)(int64_t)((uint64_t)low + below(range)));
    return t;
}

jg_tensor *jg_randperm(jg_dtype dtype, int64_t n) {
    if (check_dtype("randperm", dtype) < 0)
        return NULL;
    if (n < 0)
        return jg_errorf_null("Trying to create tensor with negative dimension %lld: [%lld]",
                              (long long)n, (long long)n);
    int64_t *v = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (!v)
        return jg_errorf_null("out of memory");
    jg_tensor *t = jg_full(dtype, 1, &n, 0.0);
    if (t) {
        random_break("randperm");
        for (int64_t i = 0; i < n; i++)
            v[i] = i;
        for (int64_t i = n - 1; i > 0; i--) { /* Fisher-Yates */
            int64_t j = (int64_t)below((uint64_t)i + 1), s = v[i];
            v[i] = v[j];
            v[j] = s;
        }
        for (int64_t i = 0; i < n; i++)
            store(t, i, (double)v[i]);
    }
    free(v);
    return t;
}

jg_tensor *jg_multinomial(jg_tensor *probs, int64_t num_samples, bool replacement) {
    if (!probs)
        return jg_errorf_null("multinomial: tensor is NULL");
    if (probs->ndim < 1 || probs->ndim > 2)
        return jg_errorf_null("prob_dist must be 1 or 2 dim");
    if (!jg_dtype_is_float(probs->dtype))
        return jg_errorf_null("multinomial only supports floating-point dtypes for input, got: %s",
                              jg_dtype_torch_name(probs->dtype));
    if (num_samples <= 0)
        return jg_errorf_null("cannot sample n_sample <= 0 samples");
    int64_t cats = probs->shape[probs->ndim - 1], rows = probs->ndim == 2 ? probs->shape[0] : 1;
    if (!replacement && num_samples > cats)
        return jg_errorf_null("cannot sample n_sample > prob_dist.size(-1) samples without "
                              "replacement");
    if (jg_check_concrete(probs, "multinomial") < 0)
        return NULL;
    int64_t total = rows * cats;
    double *p = malloc(sizeof(double) * (size_t)(total ? total : 1));
    if (!p)
        return jg_errorf_null("out of memory");
    jg_tensor *t = NULL;
    jg_scope_push();
    jg_tensor *d = jg_to_dtype(probs, JG_F64);
    if (!d || jg_copy_to(d, p, sizeof(double) * (size_t)total) < 0)
        goto done;
    for (int64_t r = 0; r < rows; r++) {
        double sum = 0;
        for (int64_t c = 0; c < cats; c++) {
            double v = p[r * cats + c];
            if (!isfinite(v) || v < 0) {
                jg_errorf("probability tensor contains either `inf`, `nan` or element < 0");
                goto done;
            }
            sum += v;
        }
        if (!(sum > 0)) {
            jg_errorf("invalid multinomial distribution (sum of probabilities <= 0)");
            goto done;
        }
        if (!replacement) {
            int64_t nz = 0;
            for (int64_t c = 0; c < cats; c++)
                nz += p[r * cats + c] > 0;
            if (nz < num_samples) {
                jg_errorf("invalid multinomial distribution (with replacement=False, not enough "
                          "non-negative category to sample)");
                goto done;
            }
        }
    }
    int64_t shape[2] = {rows, num_samples};
    t = jg_keep(jg_tensor_new(JG_I64, probs->ndim, probs->ndim == 2 ? shape : shape + 1, NULL));
    if (!t)
        goto done;
    random_break("multinomial");
    int64_t *o = (int64_t *)t->storage->data;
    for (int64_t r = 0; r < rows; r++) {
        double *row = p + r * cats;
        for (int64_t s = 0; s < num_samples; s++) {
            double sum = 0;
            for (int64_t c = 0; c < cats; c++)
                sum += row[c];
            double u = uniform01() * sum, acc = 0;
            int64_t pick = -1;
            for (int64_t c = 0; c < cats; c++) {
                if (row[c] <= 0)
                    continue;
                pick = c; /* the last category with mass catches rounding */
                acc += row[c];
                if (u < acc)
                    break;
            }
            o[r * num_samples + s] = pick;
            if (!replacement)
                row[pick] = 0;
        }
    }
done:
    jg_scope_pop();
    free(p);
    return t ? jg_scope_track(t) : NULL;
}
