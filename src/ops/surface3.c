/* Common PyTorch tensor ops: gather, scatter, scatter_add, index_add,
 * index_copy, index_fill, masked_select, flip, roll, repeat,
 * repeat_interleave, isnan / isinf / isfinite, nan_to_num, logsumexp,
 * remainder / fmod / floor_divide, argsort, outer, dot, mv, addmm, trace.
 *
 * scatter, scatter (value) and scatter_add are rows of their own
 * (ops/index.c), remainder, fmod and floor_divide elementwise rows; the
 * rest are compositions of existing rows (gather for the index-shuffling
 * ops, which copy values exactly, so results and gradients are PyTorch's),
 * named after PyTorch's autograd nodes.  Index tensors whose values can be
 * read now are checked now, with PyTorch's messages; a traced index is
 * checked by the gather/scatter kernels when the compiled program runs. */
#include "autograd/node.h"
#include "core/iter.h"
#include "ops/decls.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool readable(const jg_tensor *t) {
    return !t->sym && !jg_trace_captured(t);
}

/* r kept past the scope the caller pushed, named `node`, and tracked by the
 * enclosing scope: every public function here ends with it. */
static jg_tensor *finish(jg_tensor *r, const char *node) {
    if (r && node)
        jg_autograd_name_node(r, node);
    jg_keep(r);
    jg_scope_pop();
    return r ? jg_scope_track(r) : NULL;
}

/* A new int64 tensor [n] whose values the caller fills. */
static jg_tensor *new_index(int64_t n, int64_t **p) {
    jg_tensor *t = jg_tensor_new(JG_I64, 1, &n, NULL);
    *p = t ? (int64_t *)jg_data(t) : NULL;
    return t;
}

/* idx's values as a malloc'd int64 array (NULL with an error set). */
static int64_t *read_index(jg_tensor *idx) {
    int64_t n = idx->numel;
    jg_tensor *c = idx->dtype == JG_I64 ? idx : jg_to_dtype(idx, JG_I64);
    int64_t *v = c ? malloc(sizeof(int64_t) * (size_t)(n ? n : 1)) : NULL;
    if (c && !v)
        jg_errorf("out of memory");
    if (v && jg_copy_to(c, v, sizeof(int64_t) * (size_t)n) < 0) {
        free(v);
        v = NULL;
    }
    return v;
}

/* ------------------------------------------------------ gather / scatter */

jg_tensor *jg_gather(jg_tensor *a, int dim, jg_tensor *index) {
    if (!a || !index)
        return jg_errorf_null("gather: tensor is NULL");
    int d = jg_wrap_dim(dim, a->ndim);
    if (d < 0)
        return NULL;
    jg_attrs ga = {.n = 1};
    ga.i[0] = d;
    return jg_op1(JG_OP_GATHER, &ga, a, index);
}

static jg_tensor *scatter_call(jg_opcode op, jg_tensor *a, int dim, jg_tensor *index,
                               jg_tensor *src, double value) {
    if (!a || !index || (op != JG_OP_SCATTER_VALUE && !src))
        return jg_errorf_null("%s: tensor is NULL", jg_ops[op].name);
    int d = jg_wrap_dim(dim, a->ndim);
    if (d < 0)
        return NULL;
    jg_attrs at = {.n = 1, .s = value};
    at.i[0] = d;
    jg_tensor *ops[3] = {a, index, src}, *r = NULL;
    return jg_op_call(op, &at, ops, &r) == 0 ? r : NULL;
}

jg_tensor *jg_scatter(jg_tensor *a, int dim, jg_tensor *index, jg_tensor *src) {
    return scatter_call(JG_OP_SCATTER, a, dim, index, src, 0);
}

jg_tensor *jg_scatter_value(jg_tensor *a, int dim, jg_tensor *index, double value) {
    return scatter_call(JG_OP_SCATTER_VALUE, a, dim, index, NULL, value);
}

jg_tensor *jg_scatter_add(jg_tensor *a, int dim, jg_tensor *index, jg_tensor *src) {
    return scatter_call(JG_OP_SCATTER_ADD_INTO, a, dim, index, src, 0);
}

/* -------------------------------------------- index_add / _copy / _fill */

/* The checks index_add_ and index_copy_ share: dim wrapped into *d, a 1-D
 * (or 0-d) int32/int64 index, src of a's dtype with a's shape except
 * index's length at d.  `fn` names the op in the messages. */
static int index_src_args(const char *fn, jg_tensor *a, int dim, jg_tensor *idx, jg_tensor *src,
                          int *d) {
    if (!a || !idx || !src)
        return jg_errorf("%s: tensor is NULL", fn);
    if ((*d = jg_wrap_dim(dim, a->ndim)) < 0)
        return -1;
    if (idx->dtype != JG_I64 && idx->dtype != JG_I32)
        return jg_errorf("%s(): Expected dtype int32/int64 for index but got: %s", fn,
                         jg_dtype_torch_name(idx->dtype));
    if (idx->ndim > 1) {
        char s[160];
        jg_format_shape(s, sizeof s, idx->ndim, idx->shape);
        return jg_errorf("%s(): Index is supposed to be a vector, but got dim: %d with type: %s "
                         "and size: %s",
                         fn, idx->ndim, jg_dtype_torch_name(idx->dtype), s);
    }
    if (src->dtype != a->dtype)
        return jg_errorf("%s(): self (%s) and source (%s) must have the same scalar type", fn,
                         jg_dtype_torch_name(a->dtype), jg_dtype_torch_name(src->dtype));
    int an = a->ndim ? a->ndim : 1, sn = src->ndim ? src->ndim : 1;
    int64_t ssize = src->ndim ? src->shape[*d] : 1;
    if (an != sn)
        return jg_errorf("%s(): Source/destination tensor must have same slice shapes", fn);
    if (ssize != idx->numel)
        return jg_errorf("%s(): Number of indices (%lld) should be equal to source.size(dim): "
                         "(%lld), for dim: %d",
                         fn, (long long)idx->numel, (long long)ssize, *d);
    for (int k = 0, j = 0; k < a->ndim; k++) {
        if (k == *d)
            continue;
        if (a->shape[k] != src->shape[k])
            return jg_errorf("The size of tensor a (%lld) must match the size of tensor b (%lld) "
                             "at non-singleton dimension %d",
                             (long long)a->shape[k], (long long)src->shape[k], j);
        j++;
    }
    return 0;
}

/* idx (1-D or 0-d) as int64 [n] with readable values checked against
 * `size` (negative ones counted from the end when `wrap`); scope-owned. */
static jg_tensor *index_1d(const char *fn, jg_tensor *idx, int d, int64_t size, bool wrap) {
    int64_t n = idx->numel;
    if (!readable(idx)) {
        jg_tensor *c = idx->dtype == JG_I64 ? idx : jg_to_dtype(idx, JG_I64);
        return c ? jg_reshape(c, 1, &n) : NULL;
    }
    int64_t *v = read_index(idx), *p;
    jg_tensor *t = v ? new_index(n, &p) : NULL;
    for (int64_t k = 0; t && k < n; k++) {
        int64_t j = v[k];
        if (j < (wrap ? -size : 0) || j >= size) {
            if (!strcmp(fn, "index_add_"))
                jg_errorf("index out of range in self");
            else if (!strcmp(fn, "index_copy_"))
                jg_errorf("index_copy_(): index %lld is out of bounds for dimension %d with size "
                          "%lld",
                          (long long)j, d, (long long)size);
            else
                jg_errorf("index %lld is out of bounds for dimension %d with size %lld",
                          (long long)j, d, (long long)size);
            t = NULL;
            break;
        }
        p[k] = j < 0 ? j + size : j;
    }
    free(v);
    return t;
}

/* t as at least 1-D (a 0-d tensor as [1]) */
static jg_tensor *atleast_1d(jg_tensor *t) {
    int64_t one = 1;
    return t && !t->ndim ? jg_reshape(t, 1, &one) : t;
}

jg_tensor *jg_index_add(jg_tensor *a, int dim, jg_tensor *index, jg_tensor *src, double alpha) {
    int d = 0;
    if (index_src_args("index_add_", a, dim, index, src, &d) < 0)
        return NULL;
    jg_scope_push();
    jg_tensor *a1 = atleast_1d(a), *s1 = atleast_1d(src), *r = NULL;
    jg_tensor *w = a1 ? index_1d("index_add_", index, d, a1->shape[d], false) : NULL;
    if (w && s1) {
        /* index_add is scatter_add with the index broadcast over src: the
         * same additions in the same order (index order per element) */
        int64_t ones[JG_MAX_DIMS];
        for (int k = 0; k < s1->ndim; k++)
            ones[k] = k == d ? w->shape[0] : 1;
        jg_tensor *e = jg_reshape(w, s1->ndim, ones);
        e = e ? jg_expand(e, s1->ndim, s1->shape) : NULL;
        jg_tensor *sv = alpha == 1 ? s1 : jg_mul_scalar(s1, alpha);
        r = e && sv ? jg_scatter_add(a1, d, e, sv) : NULL;
        r = r && !a->ndim ? jg_reshape(r, 0, NULL) : r;
    }
    return finish(r, "IndexAddBackward0");
}

jg_tensor *jg_index_copy(jg_tensor *a, int dim, jg_tensor *index, jg_tensor *src) {
    int d = 0;
    if (index_src_args("index_copy_", a, dim, index, src, &d) < 0)
        return NULL;
    jg_scope_push();
    jg_tensor *a1 = atleast_1d(a), *s1 = atleast_1d(src), *r = NULL;
    jg_tensor *w = a1 ? index_1d("index_copy_", index, d, a1->shape[d], false) : NULL;
    jg_attrs at = {.n = 1};
    at.i[0] = d;
    jg_tensor *ops[3] = {a1, w, s1};
    if (w && s1 && jg_op_call(JG_OP_INDEX_COPY, &at, ops, &r) == 0 && !a->ndim)
        r = jg_reshape(r, 0, NULL);
    return finish(r, "IndexCopyBackward0");
}

jg_tensor *jg_index_fill(jg_tensor *a, int dim, jg_tensor *index, double value) {
    if (!a || !index)
        return jg_errorf_null("index_fill_: tensor is NULL");
    int d = jg_wrap_dim(dim, a->ndim);
    if (d < 0)
        return NULL;
    if (index->dtype != JG_I64)
        return jg_errorf_null("index_fill_(): Expected dtype int64 for index.");
    if (index->ndim > 1)
        return jg_errorf_null("Index has to be a vector/scalar");
    jg_scope_push();
    jg_tensor *a1 = atleast_1d(a), *r = NULL;
    jg_tensor *w = a1 ? index_1d("index_fill_", index, d, a1->shape[d], true) : NULL;
    if (w) {
        int64_t shape[JG_MAX_DIMS];
        memcpy(shape, a1->shape, sizeof(int64_t) * (size_t)a1->ndim);
        shape[d] = w->shape[0];
        jg_tensor *v = jg_scalar(a->dtype, value);
        v = v ? jg_expand(v, a1->ndim, shape) : NULL;
        jg_attrs at = {.n = 1};
        at.i[0] = d;
        jg_tensor *ops[3] = {a1, w, v};
        if (v && jg_op_call(JG_OP_INDEX_COPY, &at, ops, &r) == 0 && !a->ndim)
            r = jg_reshape(r, 0, NULL);
    }
    return finish(r, "IndexFillBackward0");
}

/* --------------------------------------------------------- masked_select */

jg_tensor *jg_masked_select(jg_tensor *a, jg_tensor *mask) {
    if (!a || !mask)
        return jg_errorf_null("masked_select: tensor is NULL");
    if (mask->dtype != JG_BOOL)
        return jg_errorf_null("masked_select: expected BoolTensor or ByteTensor for mask");
    jg_meta am = {.dtype = a->dtype, .ndim = a->ndim}, mm = {.dtype = JG_BOOL, .ndim = mask->ndim},
            bm;
    memcpy(am.shape, a->shape, sizeof(int64_t) * (size_t)a->ndim);
    memcpy(mm.shape, mask->shape, sizeof(int64_t) * (size_t)mask->ndim);
    if (jg_broadcast_shapes(&mm, &am, &bm) < 0) /* (PyTorch's order in the message) */
        return NULL;
    /* the result's length is the mask's count: its values are read now */
    if (jg_check_concrete(mask, "masked_select") < 0)
        return NULL;
    jg_scope_push();
    int64_t n = jg_shape_numel(bm.ndim, bm.shape), count = 0, *p;
    /* the mask's row-major element strides within the broadcast shape (0
     * along the dims it is broadcast over) */
    int64_t mst[JG_MAX_DIMS], step = 1;
    for (int d = bm.ndim - 1; d >= 0; d--) {
        int md = d - (bm.ndim - mask->ndim);
        mst[d] = md >= 0 && mask->shape[md] != 1 ? step : 0;
        step *= md >= 0 ? mask->shape[md] : 1;
    }
    bool *mv = malloc((size_t)(mask->numel ? mask->numel : 1));
    bool *hit = mv ? malloc((size_t)(n ? n : 1)) : NULL;
    jg_tensor *r = NULL;
    if (!hit)
        jg_errorf("out of memory");
    else if (jg_copy_to(mask, mv, (size_t)mask->numel) == 0) {
        int64_t pos[JG_MAX_DIMS] = {0};
        for (int64_t k = 0; k < n; k++) {
            int64_t off = 0;
            for (int d = 0; d < bm.ndim; d++)
                off += pos[d] * mst[d];
            count += (hit[k] = mv[off]);
            for (int d = bm.ndim - 1; d >= 0 && ++pos[d] == bm.shape[d]; d--)
                pos[d] = 0;
        }
        jg_tensor *idx = new_index(count, &p);
        for (int64_t k = 0, j = 0; idx && k < n; k++)
            if (hit[k])
                p[j++] = k;
        jg_tensor *x = idx ? jg_expand(a, bm.ndim, bm.shape) : NULL;
        x = x ? jg_reshape(x, 1, &n) : NULL;
        r = x ? jg_index_select(x, 0, idx) : NULL;
    }
    free(mv);
    free(hit);
    return finish(r, "MaskedSelectBackward0");
}

/* ------------------------------------------------------ flip, roll, repeat */

/* a with its elements along d reordered: position k takes a's perm[k] */
static jg_tensor *permute_along(jg_tensor *a, int d, int64_t n, int64_t shift, bool reverse) {
    int64_t *p;
    jg_tensor *idx = new_index(n, &p);
    if (!idx)
        return NULL;
    for (int64_t k = 0; k < n; k++)
        p[k] = reverse ? n - 1 - k : ((k - shift) % n + n) % n;
    return jg_index_select(a, d, idx);
}

jg_tensor *jg_flip(jg_tensor *a, int n_dims, const int *dims) {
    if (!a)
        return jg_errorf_null("flip: tensor is NULL");
    if (n_dims < 0 || n_dims > JG_MAX_DIMS)
        return jg_errorf_null("flip: bad number of dims %d", n_dims);
    bool seen[JG_MAX_DIMS] = {false};
    int ds[JG_MAX_DIMS];
    for (int k = 0; k < n_dims; k++) {
        if ((ds[k] = jg_wrap_dim(dims[k], a->ndim)) < 0)
            return NULL;
        if (seen[ds[k]])
            return jg_errorf_null("dim %d appears multiple times in the list of dims", ds[k]);
        seen[ds[k]] = true;
    }
    jg_scope_push();
    jg_tensor *r = a->ndim ? a : NULL;
    for (int k = 0; k < n_dims && r && a->ndim; k++)
        r = permute_along(r, ds[k], a->shape[ds[k]], 0, true);
    if (r == a || !a->ndim) /* nothing reordered: still a copy */
        r = jg_clone(a);
    return finish(r, "FlipBackward0");
}

jg_tensor *jg_roll(jg_tensor *a, int n_shifts, const int64_t *shifts, int n_dims, const int *dims) {
    if (!a)
        return jg_errorf_null("roll: tensor is NULL");
    if (n_shifts < 1 || n_shifts > JG_MAX_DIMS || n_dims < 0 || n_dims > JG_MAX_DIMS)
        return jg_errorf_null("`shifts` required");
    if (n_dims == 0 && n_shifts != 1)
        return jg_errorf_null("shifts and dimensions must align. shifts: %d, dims:%d", n_shifts,
                              n_dims);
    if (n_dims != 0 && n_dims != n_shifts)
        return jg_errorf_null("shifts and dimensions must align. shifts: %d, dims:%d", n_shifts,
                              n_dims);
    int ds[JG_MAX_DIMS];
    for (int k = 0; k < n_dims; k++)
        if ((ds[k] = jg_wrap_dim(dims[k], a->ndim)) < 0)
            return NULL;
    jg_scope_push();
    jg_tensor *r = NULL;
    if (n_dims == 0) { /* the flattened tensor rolled, then reshaped back */
        int64_t n = a->numel;
        jg_tensor *f = jg_reshape(a, 1, &n);
        f = f && n ? permute_along(f, 0, n, shifts[0], false) : f ? jg_clone(f) : NULL;
        r = f ? jg_reshape(f, a->ndim, a->shape) : NULL;
    } else {
        r = a;
        for (int k = 0; k < n_dims && r; k++) {
            int64_t n = a->ndim ? a->shape[ds[k]] : 1;
            if (n && a->ndim)
                r = permute_along(r, ds[k], n, shifts[k], false);
        }
        if (r == a)
            r = jg_clone(a);
    }
    return finish(r, "RollBackward0");
}

jg_tensor *jg_repeat(jg_tensor *a, int n, const int64_t *repeats) {
    if (!a)
        return jg_errorf_null("repeat: tensor is NULL");
    if (n < a->ndim)
        return jg_errorf_null("Number of dimensions of repeat dims can not be smaller than number "
                              "of dimensions of tensor");
    if (n > JG_MAX_DIMS)
        return jg_errorf_null("repeat: at most %d dims", JG_MAX_DIMS);
    int64_t padded[JG_MAX_DIMS], target[JG_MAX_DIMS], split[2 * JG_MAX_DIMS], big[2 * JG_MAX_DIMS];
    bool neg = false;
    for (int k = 0; k < n; k++) {
        padded[k] = k < n - a->ndim ? 1 : a->shape[k - (n - a->ndim)];
        target[k] = padded[k] * repeats[k];
        neg |= repeats[k] < 0;
    }
    if (neg) {
        char s[160];
        int64_t bad = 0;
        for (int k = 0; k < n && !bad; k++)
            bad = target[k] < 0 ? target[k] : 0;
        jg_format_shape(s, sizeof s, n, target);
        return jg_errorf_null("Trying to create tensor with negative dimension %lld: %s",
                              (long long)bad, s);
    }
    if (2 * n > JG_MAX_DIMS) /* the expanded [r0, s0, r1, s1, ...] form needs 2n dims */
        return jg_errorf_null("repeat: at most %d dims", JG_MAX_DIMS / 2);
    for (int k = 0; k < n; k++) {
        split[2 * k] = 1, split[2 * k + 1] = padded[k];
        big[2 * k] = repeats[k], big[2 * k + 1] = padded[k];
    }
    jg_scope_push();
    jg_tensor *x = jg_reshape(a, 2 * n, split);
    x = x ? jg_expand(x, 2 * n, big) : NULL;
    x = x ? jg_clone(x) : NULL;
    jg_tensor *r = x ? jg_reshape(x, n, target) : NULL;
    return finish(r, "RepeatBackward0");
}

/* repeats: an int (repeats_t NULL) or a 1-D / 0-d int tensor whose values
 * are read now; has_dim false: over the flattened tensor */
jg_tensor *jg_repeat_interleave(jg_tensor *a, int64_t repeats, jg_tensor *repeats_t, int dim,
                                bool has_dim) {
    if (!a)
        return jg_errorf_null("repeat_interleave: tensor is NULL");
    int d = 0;
    if (has_dim && (d = jg_wrap_dim(dim, a->ndim)) < 0)
        return NULL;
    if (repeats_t) {
        if (repeats_t->dtype != JG_I64 && repeats_t->dtype != JG_I32)
            return jg_errorf_null("repeat_interleave: repeats has to be Long or Int tensor");
        if (repeats_t->ndim > 1)
            return jg_errorf_null("repeats must be 0-dim or 1-dim tensor");
        if (jg_check_concrete(repeats_t, "repeat_interleave") < 0)
            return NULL;
    } else if (repeats < 0) {
        return jg_errorf_null("repeats can not be negative");
    }
    jg_scope_push();
    int64_t n = a->numel;
    jg_tensor *x = has_dim ? atleast_1d(a) : jg_reshape(a, 1, &n), *r = NULL;
    int64_t len = x ? x->shape[d] : 0, *rv = NULL, total = 0, *p;
    if (!x)
        goto done;
    if (repeats_t) {
        if (!(rv = read_index(repeats_t)))
            goto done;
        if (repeats_t->numel != len && repeats_t->numel != 1) {
            jg_errorf("repeats must have the same size as input along dim");
            goto done;
        }
    }
    for (int64_t k = 0; k < len; k++) {
        int64_t c = rv ? rv[repeats_t->numel == 1 ? 0 : k] : repeats;
        if (c < 0) {
            jg_errorf("repeats can not be negative");
            goto done;
        }
        total += c;
    }
    jg_tensor *idx = new_index(total, &p);
    for (int64_t k = 0, j = 0; idx && k < len; k++)
        for (int64_t c = rv ? rv[repeats_t->numel == 1 ? 0 : k] : repeats; c > 0; c--)
            p[j++] = k;
    r = idx ? jg_index_select(x, d, idx) : NULL;
done:
    free(rv);
    return finish(r, NULL);
}

/* ------------------------------------------- isnan, isinf, nan_to_num */

static bool is_float(const jg_tensor *a) {
    return a->dtype == JG_F32 || a->dtype == JG_F64;
}

jg_tensor *jg_isnan(jg_tensor *a) {
    if (!a)
        return jg_errorf_null("isnan: tensor is NULL");
    jg_scope_push();
    jg_tensor *x = jg_detach(a);
    return finish(x ? jg_ne(x, x) : NULL, NULL);
}

jg_tensor *jg_isinf(jg_tensor *a) {
    if (!a)
        return jg_errorf_null("isinf: tensor is NULL");
    jg_scope_push();
    jg_tensor *x = jg_detach(a), *r = NULL;
    if (x)
        r = is_float(a) ? jg_eq_scalar(jg_abs(x), INFINITY) : jg_ne(x, x);
    return finish(r, NULL);
}

jg_tensor *jg_isfinite(jg_tensor *a) {
    if (!a)
        return jg_errorf_null("isfinite: tensor is NULL");
    jg_scope_push();
    jg_tensor *x = jg_detach(a), *r = NULL;
    if (x) /* x - x is 0 exactly when x is finite (NaN for inf and NaN) */
        r = is_float(a) ? jg_eq_scalar(jg_sub(x, x), 0) : jg_eq(x, x);
    return finish(r, NULL);
}

/* attrs: the NaN replacement in s, the +inf and -inf ones' bits in i[0],
 * i[1] (converted to the dtype by the rows, as PyTorch converts them) */
int jg_k_nan_to_num(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    jg_attrs t;
    memset(&t, 0, sizeof t);
    t.s = a->s;
    jg_tensor *xx[2] = {in[0], in[0]}, *ox[2] = {out[0], in[0]};
    if (jg_k_ntn_nan(&t, xx, out) < 0)
        return -1;
    memcpy(&t.s, &a->i[0], sizeof t.s);
    if (jg_k_ntn_posinf(&t, ox, out) < 0)
        return -1;
    memcpy(&t.s, &a->i[1], sizeof t.s);
    return jg_k_ntn_neginf(&t, ox, out);
}

int jg_vjp_nan_to_num(VJP_ARGS) {
    UNUSED_ARGS;
    jg_tensor *fin = jg_isfinite(in[0]);
    gin[0] = fin ? jg_mul(gout[0], jg_to_dtype(fin, meta[0].dtype)) : NULL;
    return gin[0] ? 0 : -1;
}

jg_tensor *jg_nan_to_num(jg_tensor *a, double nan, const double *posinf, const double *neginf) {
    if (!a)
        return jg_errorf_null("nan_to_num: tensor is NULL");
    if (!is_float(a)) {
        jg_scope_push();
        return finish(jg_clone(a), "NanToNumBackward0");
    }
    double big = a->dtype == JG_F32 ? FLT_MAX : DBL_MAX;
    double p = posinf ? *posinf : big, m = neginf ? *neginf : -big;
    jg_attrs at;
    memset(&at, 0, sizeof at);
    at.n = 2;
    at.s = nan;
    memcpy(&at.i[0], &p, sizeof p);
    memcpy(&at.i[1], &m, sizeof m);
    return jg_op1(JG_OP_NAN_TO_NUM, &at, a, NULL);
}

/* ------------------------------------------------------------ logsumexp */

/* PyTorch's: m = amax over dims (0 where infinite), log(sum(exp(x - m))) + m.
 * m is detached: the result does not depend on it, and the gradient is
 * then exp(x - m) / sum, PyTorch's exp(x - result) up to rounding. */
jg_tensor *jg_logsumexp(jg_tensor *a, int n_dims, const int *dims, bool keepdim) {
    if (!a)
        return jg_errorf_null("logsumexp: tensor is NULL");
    jg_scope_push();
    jg_tensor *x = is_float(a) ? a : jg_to_dtype(a, JG_F32), *r = NULL;
    jg_tensor *m = x ? jg_amax(jg_detach(x), n_dims, dims, true) : NULL;
    jg_tensor *inf = m ? jg_eq_scalar(jg_abs(m), INFINITY) : NULL;
    jg_tensor *z = m ? jg_scalar(m->dtype, 0) : NULL;
    m = inf && z ? jg_where(inf, z, m) : NULL;
    jg_tensor *s = m ? jg_sum_dims(jg_exp(jg_sub(x, m)), n_dims, dims, keepdim) : NULL;
    jg_tensor *ms = s && !keepdim ? jg_reshape(m, s->ndim, s->shape) : m;
    r = s && ms ? jg_add(jg_log(s), ms) : NULL;
    return finish(r, "LogsumexpBackward0");
}

/* ------------------------------------------ remainder, fmod, floor_divide */

/* PyTorch refuses an integer division by zero ("ZeroDivisionError").  The
 * kernels check too (a compiled program's divisor is read when it runs);
 * this check gives eager the error before dispatch. */
static jg_tensor *int_div_call(jg_opcode op, jg_tensor *a, jg_tensor *b) {
    if (!a || !b)
        return jg_errorf_null("%s: tensor is NULL", jg_ops[op].name);
    if (!is_float(a) && !is_float(b) && !(a->dtype == JG_BOOL && b->dtype == JG_BOOL) &&
        readable(b)) {
        int64_t *v = read_index(b);
        if (!v)
            return NULL;
        bool zero = false;
        for (int64_t k = 0; k < b->numel; k++)
            zero |= v[k] == 0;
        free(v);
        if (zero)
            return jg_errorf_null("ZeroDivisionError");
    }
    return jg_ew_call(op, a, b);
}

jg_tensor *jg_remainder(jg_tensor *a, jg_tensor *b) {
    return int_div_call(JG_OP_REMAINDER, a, b);
}
jg_tensor *jg_fmod(jg_tensor *a, jg_tensor *b) {
    return int_div_call(JG_OP_FMOD, a, b);
}
jg_tensor *jg_floor_divide(jg_tensor *a, jg_tensor *b) {
    return int_div_call(JG_OP_FLOOR_DIVIDE, a, b);
}

/* div with rounding_mode: floats take the one-node rows (elementwise.def),
 * integers floor_divide (exact), and for "trunc" the quotient of a - fmod(a,
 * b), which is a multiple of b, so floor_divide is exact there too. */
jg_tensor *jg_div_floor(jg_tensor *a, jg_tensor *b) {
    if (a && b && (is_float(a) || is_float(b)))
        return jg_ew_call(JG_OP_DIV_FLOOR, a, b);
    return jg_floor_divide(a, b);
}

jg_tensor *jg_div_trunc(jg_tensor *a, jg_tensor *b) {
    if (a && b && (is_float(a) || is_float(b)))
        return jg_ew_call(JG_OP_DIV_TRUNC, a, b);
    jg_scope_push();
    jg_tensor *r = jg_fmod(a, b);
    jg_tensor *q = r ? jg_floor_divide(jg_sub(a, r), b) : NULL;
    jg_keep(q);
    jg_scope_pop();
    return jg_scope_track(q);
}

#define SUM_TO(g, k) ((g) ? jg_sum_to((g), meta[k].ndim, meta[k].shape) : NULL)

/* remainder: grad, and -grad * floor(self / other) (PyTorch's
 * self.div(other, rounding_mode="floor"), whose zero derivative keeps a
 * create_graph gradient connected to self and other, as PyTorch's) */
int jg_vjp_remainder(VJP_ARGS) {
    UNUSED_ARGS;
    gin[0] = needs[0] ? SUM_TO(gout[0], 0) : NULL;
    gin[1] = needs[1] ? SUM_TO(jg_mul(jg_neg(gout[0]), jg_div_floor(in[0], in[1])), 1) : NULL;
    return (needs[0] && !gin[0]) || (needs[1] && !gin[1]) ? -1 : 0;
}

int jg_vjp_floor_divide(VJP_ARGS) {
    UNUSED_ARGS;
    (void)gin;
    return jg_errorf("derivative for aten::floor_divide is not implemented");
}

/* fmod: grad, and -grad * trunc(self / other) (div's "trunc" mode) */
int jg_vjp_fmod(VJP_ARGS) {
    UNUSED_ARGS;
    gin[0] = needs[0] ? SUM_TO(gout[0], 0) : NULL;
    gin[1] = needs[1] ? SUM_TO(jg_mul(jg_neg(gout[0]), jg_div_trunc(in[0], in[1])), 1) : NULL;
    return (needs[0] && !gin[0]) || (needs[1] && !gin[1]) ? -1 : 0;
}

/* ---------------------------------------------------------------- argsort */

jg_tensor *jg_argsort(jg_tensor *a, int dim, bool descending) {
    if (!a)
        return jg_errorf_null("argsort: tensor is NULL");
    jg_scope_push();
    jg_tensor *v = NULL, *i = NULL;
    if (jg_sort(a, dim, descending, &v, &i) < 0)
        i = NULL;
    return finish(i, NULL);
}

/* ------------------------------------------- outer, dot, mv, addmm, trace */

jg_tensor *jg_outer(jg_tensor *a, jg_tensor *b) {
    if (!a || !b)
        return jg_errorf_null("outer: tensor is NULL");
    if (a->ndim != 1)
        return jg_errorf_null("outer: Expected 1-D argument self, but got %d-D", a->ndim);
    if (b->ndim != 1)
        return jg_errorf_null("outer: Expected 1-D argument vec2, but got %d-D", b->ndim);
    jg_scope_push();
    int64_t col[2] = {a->shape[0], 1};
    jg_tensor *c = jg_reshape(a, 2, col);
    return finish(c ? jg_mul(c, b) : NULL, NULL);
}

jg_tensor *jg_dot(jg_tensor *a, jg_tensor *b) {
    if (!a || !b)
        return jg_errorf_null("dot: tensor is NULL");
    if (a->ndim != 1 || b->ndim != 1)
        return jg_errorf_null("1D tensors expected, but got %dD and %dD tensors", a->ndim, b->ndim);
    if (a->dtype != b->dtype)
        return jg_errorf_null("dot : expected both vectors to have same dtype, but found %s and %s",
                              jg_dtype_torch_name(a->dtype), jg_dtype_torch_name(b->dtype));
    if (a->numel != b->numel)
        return jg_errorf_null("inconsistent tensor size, expected tensor [%lld] and src [%lld] to "
                              "have the same number of elements, but got %lld and %lld elements "
                              "respectively",
                              (long long)a->numel, (long long)b->numel, (long long)a->numel,
                              (long long)b->numel);
    if (a->dtype == JG_BOOL)
        return jg_errorf_null("\"dot\" not implemented for 'Bool'");
    jg_scope_push();
    jg_tensor *r = is_float(a) ? jg_matmul(a, b) : jg_sum(jg_mul(a, b));
    r = r && r->dtype != a->dtype ? jg_to_dtype(r, a->dtype) : r; /* (sum widens int32) */
    return finish(r, "DotBackward0");
}

jg_tensor *jg_mv(jg_tensor *m, jg_tensor *v) {
    if (!m || !v)
        return jg_errorf_null("mv: tensor is NULL");
    if (m->ndim != 2 || v->ndim != 1)
        return jg_errorf_null("vector + matrix @ vector expected, got 1, %d, %d", m->ndim, v->ndim);
    if (m->shape[1] != v->shape[0])
        return jg_errorf_null("size mismatch, got %lld, %lldx%lld,%lld", (long long)m->shape[0],
                              (long long)m->shape[0], (long long)m->shape[1],
                              (long long)v->shape[0]);
    if (m->dtype != v->dtype)
        return jg_errorf_null("expected scalar type %s but found %s", jg_dtype_torch_name(m->dtype),
                              jg_dtype_torch_name(v->dtype));
    jg_scope_push();
    return finish(jg_matmul(m, v), "MvBackward0");
}

jg_tensor *jg_addmm(jg_tensor *input, jg_tensor *m1, jg_tensor *m2, double beta, double alpha) {
    if (!input || !m1 || !m2)
        return jg_errorf_null("addmm: tensor is NULL");
    if (m1->ndim != 2)
        return jg_errorf_null("mat1 must be a matrix, got %d-D tensor", m1->ndim);
    if (m2->ndim != 2)
        return jg_errorf_null("mat2 must be a matrix, got %d-D tensor", m2->ndim);
    if (m1->shape[1] != m2->shape[0])
        return jg_errorf_null("mat1 and mat2 shapes cannot be multiplied (%lldx%lld and %lldx%lld)",
                              (long long)m1->shape[0], (long long)m1->shape[1],
                              (long long)m2->shape[0], (long long)m2->shape[1]);
    if (m1->dtype != m2->dtype || input->dtype != m1->dtype)
        return jg_errorf_null(
            "expected scalar type %s but found %s", jg_dtype_torch_name(m1->dtype),
            jg_dtype_torch_name(m1->dtype != m2->dtype ? m2->dtype : input->dtype));
    jg_scope_push();
    int64_t shape[2] = {m1->shape[0], m2->shape[1]};
    jg_tensor *e = jg_expand(input, 2, shape), *r = NULL;
    jg_tensor *mm = e ? jg_matmul(m1, m2) : NULL;
    mm = mm && alpha != 1 ? jg_mul_scalar(mm, alpha) : mm;
    if (mm && beta == 0) /* PyTorch ignores input then (NaN included) */
        r = mm;
    else if (mm)
        r = jg_add(beta == 1 ? e : jg_mul_scalar(e, beta), mm);
    return finish(r, "AddmmBackward0");
}

jg_tensor *jg_trace(jg_tensor *a) {
    if (!a)
        return jg_errorf_null("trace: tensor is NULL");
    if (a->ndim != 2)
        return jg_errorf_null("trace: expected a matrix, but got tensor with dim %d", a->ndim);
    jg_scope_push();
    int64_t rows = a->shape[0], cols = a->shape[1], n = rows < cols ? rows : cols, all = a->numel,
            *p;
    jg_tensor *idx = new_index(n, &p), *r = NULL;
    for (int64_t k = 0; idx && k < n; k++)
        p[k] = k * (cols + 1);
    jg_tensor *f = idx ? jg_reshape(a, 1, &all) : NULL;
    r = f ? jg_sum(jg_index_select(f, 0, idx)) : NULL;
    return finish(r, "TraceBackward0");
}
