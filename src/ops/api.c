/* The public op functions: argument checks, attributes, then dispatch. */
#include "ops/optable.h"

#include <stdio.h>
#include <string.h>

#define UNARY(fn, OP)                                                                              \
    jg_tensor *fn(jg_tensor *a) {                                                                  \
        return jg_ew_call(JG_OP_##OP, a, NULL);                                                    \
    }
#define BINARY(fn, OP)                                                                             \
    jg_tensor *fn(jg_tensor *a, jg_tensor *b) {                                                    \
        return jg_ew_call(JG_OP_##OP, a, b);                                                       \
    }
#define SCALAR(fn, OP)                                                                             \
    jg_tensor *fn(jg_tensor *a, double s) {                                                        \
        return jg_ew_call_scalar(JG_OP_##OP, a, s);                                                \
    }

BINARY(jg_add, ADD)
BINARY(jg_sub, SUB)
BINARY(jg_mul, MUL)
BINARY(jg_div, DIV)
UNARY(jg_neg, NEG)
UNARY(jg_exp, EXP)
UNARY(jg_log, LOG)
UNARY(jg_tanh, TANH)
UNARY(jg_abs, ABS)
UNARY(jg_relu, RELU)
UNARY(jg_sigmoid, SIGMOID)
UNARY(jg_sqrt, SQRT)
SCALAR(jg_pow_scalar, POW_SCALAR)
SCALAR(jg_add_scalar, ADD_SCALAR)
SCALAR(jg_mul_scalar, MUL_SCALAR)
/* PyTorch's mm backward returns a column-major operand's gradient in
 * column-major order (grad_b = (g^T a)^T instead of a^T g): the gradient of
 * w.t() (nn.Linear's weight) is then laid out like w itself, so .grad takes
 * it without a transposed copy or add.  jitgrad's VJP does the same from
 * these flags, recorded where mm would be called (2-D operands; b also when
 * a is folded to 2-D), from the strides, which a traced tensor carries as
 * eager's: eager and compiled programs compute the same products. */
static bool col_major(const jg_tensor *t) {
    return t->ndim == 2 && t->stride[0] == 1 && t->stride[1] == t->shape[0];
}

jg_tensor *jg_matmul(jg_tensor *a, jg_tensor *b) {
    int flags = 0;
    if (a && b && a->ndim == 2 && b->ndim == 2 && col_major(a))
        flags |= JG_MATMUL_A_COL_MAJOR;
    if (a && b && a->ndim >= 1 && b->ndim == 2 && col_major(b))
        flags |= JG_MATMUL_B_COL_MAJOR;
    if (!flags) /* (no attributes: the common case stays on the shortcut) */
        return jg_ew_call(JG_OP_MATMUL, a, b);
    jg_attrs at = {.n = 1, .i = {flags}};
    return jg_op1(JG_OP_MATMUL, &at, a, b);
}
UNARY(jg_clone, CLONE)

jg_tensor *jg_to_dtype(jg_tensor *a, jg_dtype dtype) {
    if (!jg_dtype_valid((int)dtype))
        return jg_errorf_null("jg_to_dtype: invalid dtype %d", (int)dtype);
    jg_attrs at = {.dtype = dtype};
    return jg_op1(JG_OP_TO_DTYPE, &at, a, NULL);
}

/* A traced tensor carries the strides eager would give it (the tracer
 * records view layouts, compiled calls guard on their inputs' strides), so
 * contiguous() of a contiguous value is the value itself there too. */
jg_tensor *jg_contiguous(jg_tensor *a) {
    if (a && jg_is_contiguous(a))
        return jg_scope_track(jg_retain(a));
    return jg_clone(a);
}

jg_tensor *jg_view(jg_tensor *a, int ndim, const int64_t *shape) {
    jg_tensor *r = jg_reshape(a, ndim, shape);
    if (r && r->numel > 0 && !jg_reshape_is_view(a, r->ndim, r->shape)) {
        jg_release(jg_keep(r)); /* out of the scope, then freed */
        return jg_errorf_null("view size is not compatible with input tensor's size and stride (at "
                              "least one dimension spans across two contiguous subspaces). Use "
                              ".reshape(...) instead.");
    }
    return r;
}

jg_tensor *jg_detach(jg_tensor *a) {
    if (!a)
        return jg_errorf_null("jg_detach: tensor is NULL");
    if (a->sym || jg_trace_capture) /* traced: a node that stops the gradient */
        return jg_op1(JG_OP_DETACH, NULL, a, NULL);
    return jg_scope_track(jg_tensor_view_of(a, a->ndim, a->shape, a->stride, a->offset));
}

/* ---- reductions ---- */

/* Normalises and checks a dim list into attrs (sorted, no repeats). */
static int reduce_attrs(const char *fn, jg_tensor *a, int n_dims, const int *dims, bool keepdim,
                        jg_attrs *at) {
    if (!a)
        return jg_errorf("%s: tensor is NULL", fn);
    if (n_dims < 0 || (n_dims > 0 && !dims))
        return jg_errorf("%s: bad dim list", fn);
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
        if (seen[d])
            at->i[at->n++] = d;
    at->keepdim = keepdim;
    return 0;
}

static jg_tensor *reduce_all(jg_opcode op, jg_tensor *a) {
    if (!a)
        return jg_errorf_null("%s(): argument 0 is NULL", jg_ops[op].name);
    jg_attrs at = {.whole = 1};
    for (int d = 0; d < a->ndim; d++)
        at.i[at.n++] = d;
    return jg_op1(op, &at, a, NULL);
}

jg_tensor *jg_sum(jg_tensor *a) {
    return reduce_all(JG_OP_SUM, a);
}

jg_tensor *jg_max(jg_tensor *a) {
    return jg_op1(JG_OP_MAX_ALL, NULL, a, NULL);
}

jg_tensor *jg_mean(jg_tensor *a) {
    return reduce_all(JG_OP_MEAN, a);
}

jg_tensor *jg_sum_dims(jg_tensor *a, int n_dims, const int *dims, bool keepdim) {
    jg_attrs at = {0};
    if (reduce_attrs("jg_sum_dims", a, n_dims, dims, keepdim, &at) < 0)
        return NULL;
    return jg_op1(JG_OP_SUM, &at, a, NULL);
}

jg_tensor *jg_mean_dims(jg_tensor *a, int n_dims, const int *dims, bool keepdim) {
    jg_attrs at = {0};
    if (reduce_attrs("jg_mean_dims", a, n_dims, dims, keepdim, &at) < 0)
        return NULL;
    return jg_op1(JG_OP_MEAN, &at, a, NULL);
}

int jg_max_dim(jg_tensor *a, int dim, bool keepdim, jg_tensor **values, jg_tensor **indices) {
    if (!a || !values || !indices)
        return jg_errorf("jg_max_dim: NULL argument");
    int d = jg_wrap_dim(dim, a->ndim);
    if (d < 0)
        return -1;
    jg_attrs at = {.n = 1, .keepdim = keepdim};
    at.i[0] = d;
    jg_tensor *out[2];
    if (jg_op_call(JG_OP_MAX_DIM, &at, &a, out) < 0)
        return -1;
    *values = out[0];
    *indices = out[1];
    return 0;
}

/* ---- views ---- */

jg_tensor *jg_reshape(jg_tensor *a, int ndim, const int64_t *shape) {
    if (!a)
        return jg_errorf_null("jg_reshape: tensor is NULL");
    if (ndim < 0 || ndim > JG_MAX_DIMS || (ndim && !shape))
        return jg_errorf_null("jg_reshape: bad shape (ndim %d)", ndim);
    jg_attrs at = {.n = ndim};
    int infer = -1;
    int64_t known = 1;
    bool ovf = false; /* such a shape never fits the input */
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == -1) {
            if (infer >= 0)
                return jg_errorf_null("only one dimension can be inferred");
            infer = d;
        } else if (shape[d] < 0) {
            return jg_errorf_null("invalid shape dimension %lld", (long long)shape[d]);
        } else {
            ovf |= __builtin_mul_overflow(known, shape[d], &known);
        }
        at.i[d] = shape[d];
    }
    if (!ovf && infer >= 0 && known != 0 && a->numel % known == 0)
        at.i[infer] = a->numel / known;
    if (ovf || (infer >= 0 && (known == 0 || a->numel % known != 0)) ||
        (infer < 0 && known != a->numel)) {
        char s[160];
        jg_format_shape(s, sizeof s, ndim, shape);
        return jg_errorf_null("shape '%s' is invalid for input of size %lld", s,
                              (long long)a->numel);
    }
    return jg_op1(JG_OP_RESHAPE, &at, a, NULL);
}

jg_tensor *jg_permute(jg_tensor *a, const int *perm) {
    if (!a || (a->ndim && !perm))
        return jg_errorf_null("jg_permute: NULL argument");
    jg_attrs at = {.n = a->ndim};
    bool seen[JG_MAX_DIMS] = {0};
    for (int d = 0; d < a->ndim; d++) {
        int p = jg_wrap_dim(perm[d], a->ndim);
        if (p < 0)
            return NULL;
        if (seen[p])
            return jg_errorf_null("permute(): duplicate dims are not allowed.");
        seen[p] = true;
        at.i[d] = p;
    }
    return jg_op1(JG_OP_PERMUTE, &at, a, NULL);
}

jg_tensor *jg_transpose(jg_tensor *a, int dim0, int dim1) {
    if (!a)
        return jg_errorf_null("jg_transpose: tensor is NULL");
    int d0 = jg_wrap_dim(dim0, a->ndim), d1 = d0 < 0 ? -1 : jg_wrap_dim(dim1, a->ndim);
    if (d1 < 0)
        return NULL;
    int perm[JG_MAX_DIMS];
    for (int d = 0; d < a->ndim; d++)
        perm[d] = d;
    if (a->ndim) {
        perm[d0] = d1;
        perm[d1] = d0;
    }
    return jg_permute(a, perm);
}

jg_tensor *jg_slice(jg_tensor *a, int dim, int64_t start, int64_t end) {
    if (!a)
        return jg_errorf_null("jg_slice: tensor is NULL");
    if (a->ndim == 0)
        return jg_errorf_null("slice() cannot be applied to a 0-dim tensor.");
    int d = jg_wrap_dim(dim, a->ndim);
    if (d < 0)
        return NULL;
    int64_t n = a->shape[d];
    /* Python slice semantics: negative from the end, clamped to [0, n]. */
    if (start < 0)
        start += n;
    if (end < 0)
        end += n;
    start = start < 0 ? 0 : start > n ? n : start;
    end = end < start ? start : end > n ? n : end;
    jg_attrs at = {.n = 3};
    at.i[0] = d;
    at.i[1] = start;
    at.i[2] = end;
    return jg_op1(JG_OP_SLICE, &at, a, NULL);
}

jg_tensor *jg_expand(jg_tensor *a, int ndim, const int64_t *shape) {
    if (!a || (ndim && !shape))
        return jg_errorf_null("jg_expand: NULL argument");
    if (ndim < a->ndim || ndim > JG_MAX_DIMS) {
        return jg_errorf_null("expand: the number of sizes provided (%d) must be greater or "
                              "equal to the number of dimensions in the tensor (%d)",
                              ndim, a->ndim);
    }
    jg_attrs at = {.n = ndim};
    for (int d = 0; d < ndim; d++) {
        int sd = d - (ndim - a->ndim);
        int64_t cur = sd >= 0 ? a->shape[sd] : 1;
        int64_t want = shape[d] == -1 && sd >= 0 ? cur : shape[d];
        if (want < 0 || (cur != 1 && cur != want)) {
            char s1[160], s2[160];
            jg_format_shape(s1, sizeof s1, ndim, shape);
            jg_format_shape(s2, sizeof s2, a->ndim, a->shape);
            return jg_errorf_null("The expanded size of the tensor (%lld) must match the existing "
                                  "size (%lld) at non-singleton dimension %d.  Target sizes: %s.  "
                                  "Tensor sizes: %s",
                                  (long long)want, (long long)cur, d, s1, s2);
        }
        at.i[d] = want;
    }
    return jg_op1(JG_OP_EXPAND, &at, a, NULL);
}

/* ---- softmax family ---- */

static jg_tensor *dim_op(jg_opcode op, jg_tensor *a, int dim) {
    if (!a)
        return jg_errorf_null("%s(): argument 0 is NULL", jg_ops[op].name);
    int d = jg_wrap_dim(dim, a->ndim);
    if (d < 0)
        return NULL;
    jg_attrs at = {.n = 1};
    at.i[0] = d;
    return jg_op1(op, &at, a, NULL);
}

jg_tensor *jg_softmax(jg_tensor *a, int dim) {
    return dim_op(JG_OP_SOFTMAX, a, dim);
}

jg_tensor *jg_log_softmax(jg_tensor *a, int dim) {
    return dim_op(JG_OP_LOG_SOFTMAX, a, dim);
}

jg_tensor *jg_cross_entropy_ex(jg_tensor *logits, jg_tensor *target, jg_reduction reduction,
                               int64_t ignore_index) {
    if (!logits || !target)
        return jg_errorf_null("jg_cross_entropy: NULL argument");
    if ((int)reduction < JG_REDUCTION_MEAN || (int)reduction > JG_REDUCTION_NONE)
        return jg_errorf_null("jg_cross_entropy: invalid reduction %d", (int)reduction);
    if (logits->ndim != 2)
        return jg_errorf_null("cross_entropy: expected 2-D logits [N, C], got %d-D", logits->ndim);
    if (target->dtype != JG_I64)
        return jg_errorf_null("expected scalar type Long but found %s",
                              jg_dtype_torch_name(target->dtype));
    if (target->ndim != 1 || target->shape[0] != logits->shape[0])
        return jg_errorf_null("Expected input batch_size (%lld) to match target batch_size "
                              "(%lld).",
                              (long long)logits->shape[0],
                              (long long)(target->ndim ? target->shape[0] : 1));
    jg_attrs at = jg_nll_attrs(true, ignore_index, reduction, logits->shape[1]);
    jg_scope_push();
    jg_tensor *lsm = jg_log_softmax(logits, 1);
    jg_tensor *loss = lsm ? jg_op1(JG_OP_NLL_LOSS, &at, lsm, target) : NULL;
    jg_keep(loss);
    jg_scope_pop();
    return jg_scope_track(loss);
}

jg_tensor *jg_cross_entropy(jg_tensor *logits, jg_tensor *target) {
    return jg_cross_entropy_ex(logits, target, JG_REDUCTION_MEAN, -100);
}

/* ---- helpers for VJP rules ---- */

jg_tensor *jg_sum_to(jg_tensor *g, int ndim, const int64_t *shape) {
    if (g->ndim == ndim) { /* (a loop: ndim is tiny, a memcmp call costs more) */
        int d = 0;
        while (d < ndim && g->shape[d] == shape[d])
            d++;
        if (d == ndim)
            return g;
    }
    int lead = g->ndim - ndim;
    JG_ASSERT(lead >= 0);
    int dims[JG_MAX_DIMS], n = 0;
    for (int d = 0; d < g->ndim; d++)
        if (d < lead || (shape[d - lead] == 1 && g->shape[d] != 1))
            dims[n++] = d;
    jg_tensor *s = jg_sum_dims(g, n, dims, true);
    if (!s)
        return NULL;
    return jg_reshape(s, ndim, shape);
}
