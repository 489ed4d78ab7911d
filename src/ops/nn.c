/* The nn part's ops: gelu (exact and tanh approximation) and silu, with
 * VJPs written as jitgrad ops (PyTorch's gelu_backward / silu_backward as
 * one elementwise op each; their own VJPs composed, for double backward). */
#include "ops/decls.h"

#define SUM_TO(g, k) ((g) ? jg_sum_to((g), meta[k].ndim, meta[k].shape) : NULL)
#define CHECK(k)                                                                                   \
    if (needs[k] && !gin[k])                                                                       \
    return -1

/* PyTorch's kernels take floating dtypes only (no promotion) */
static bool float_input(jg_tensor *a, const char *kernel) {
    if (!a || jg_dtype_is_float(jg_dtype_of(a)))
        return true;
    jg_errorf_null("\"%s\" not implemented for '%s'", kernel, jg_dtype_torch_name(jg_dtype_of(a)));
    return false;
}

jg_tensor *jg_gelu(jg_tensor *a, jg_gelu_approximate approximate) {
    if (approximate != JG_GELU_NONE && approximate != JG_GELU_TANH)
        return jg_errorf_null("approximate argument must be either none or tanh.");
    if (!float_input(a, "GeluKernelImpl"))
        return NULL;
    return jg_ew_call(approximate == JG_GELU_TANH ? JG_OP_GELU_TANH : JG_OP_GELU, a, NULL);
}

jg_tensor *jg_silu(jg_tensor *a) {
    if (!float_input(a, "silu_cpu"))
        return NULL;
    return jg_ew_call(JG_OP_SILU, a, NULL);
}

int jg_vjp_gelu(VJP_ARGS) {
    UNUSED_ARGS;
    gin[0] = jg_ew_call(JG_OP_GELU_GRAD, gout[0], in[0]);
    CHECK(0);
    return 0;
}

int jg_vjp_gelu_tanh(VJP_ARGS) {
    UNUSED_ARGS;
    gin[0] = jg_ew_call(JG_OP_GELU_TANH_GRAD, gout[0], in[0]);
    CHECK(0);
    return 0;
}

/* gelu_backward(g, x) = g * f'(x): d/dg = gelu_backward(grad, x);
 * d/dx = grad * g * f''(x), f''(x) = pdf(x) * (2 - x^2) */
int jg_vjp_gelu_grad(VJP_ARGS) {
    UNUSED_ARGS;
    if (needs[0])
        gin[0] = SUM_TO(jg_ew_call(JG_OP_GELU_GRAD, gout[0], in[1]), 0);
    if (needs[1]) {
        jg_tensor *x = in[1], *xx = jg_mul(x, x);
        jg_tensor *pdf = jg_mul_scalar(jg_exp(jg_mul_scalar(xx, -0.5)), 0.39894228040143267794);
        jg_tensor *d2 = jg_mul(pdf, jg_add_scalar(jg_neg(xx), 2.0));
        gin[1] = SUM_TO(jg_mul(jg_mul(gout[0], in[0]), d2), 1);
    }
    CHECK(0);
    CHECK(1);
    return 0;
}

/* The tanh form: with u = k (x + c x^3), t = tanh(u), u' = k (1 + 3 c x^2),
 * u'' = 6 k c x:  f'' = (1 - t^2) (u' + x/2 (u'' - 2 t u'^2)) */
int jg_vjp_gelu_tanh_grad(VJP_ARGS) {
    UNUSED_ARGS;
    if (needs[0])
        gin[0] = SUM_TO(jg_ew_call(JG_OP_GELU_TANH_GRAD, gout[0], in[1]), 0);
    if (needs[1]) {
        const double k = 0.79788456080286535588, c = 0.044715;
        jg_tensor *x = in[1], *xx = jg_mul(x, x);
        jg_tensor *t = jg_tanh(jg_mul_scalar(jg_add(x, jg_mul_scalar(jg_mul(xx, x), c)), k));
        jg_tensor *du = jg_mul_scalar(jg_add_scalar(jg_mul_scalar(xx, 3.0 * c), 1.0), k);
        jg_tensor *ddu = jg_mul_scalar(x, 6.0 * k * c);
        jg_tensor *inner = jg_sub(ddu, jg_mul(jg_mul_scalar(t, 2.0), jg_mul(du, du)));
        jg_tensor *d2 = jg_mul(jg_add_scalar(jg_neg(jg_mul(t, t)), 1.0),
                               jg_add(du, jg_mul(jg_mul_scalar(x, 0.5), inner)));
        gin[1] = SUM_TO(jg_mul(jg_mul(gout[0], in[0]), d2), 1);
    }
    CHECK(0);
    CHECK(1);
    return 0;
}

int jg_vjp_silu(VJP_ARGS) {
    UNUSED_ARGS;
    gin[0] = jg_ew_call(JG_OP_SILU_GRAD, gout[0], in[0]);
    CHECK(0);
    return 0;
}

/* silu_backward(g, x): with s = sigmoid(x), f'' = s (1 - s) (2 + x (1 - 2 s)) */
int jg_vjp_silu_grad(VJP_ARGS) {
    UNUSED_ARGS;
    if (needs[0])
        gin[0] = SUM_TO(jg_ew_call(JG_OP_SILU_GRAD, gout[0], in[1]), 0);
    if (needs[1]) {
        jg_tensor *x = in[1], *s = jg_sigmoid(x);
        jg_tensor *ds = jg_mul(s, jg_add_scalar(jg_neg(s), 1.0));
        jg_tensor *d2 =
            jg_mul(ds, jg_add_scalar(jg_mul(x, jg_add_scalar(jg_mul_scalar(s, -2.0), 1.0)), 2.0));
        gin[1] = SUM_TO(jg_mul(jg_mul(gout[0], in[0]), d2), 1);
    }
    CHECK(0);
    CHECK(1);
    return 0;
}

/* embedding: weight's rows at indices, composed as a gather over dim 0 (its
 * VJP scatter-adds the rows' gradients, what PyTorch's dense
 * embedding_backward sums).  The padding row is read through a detached
 * alias, so it gets no gradient, as in PyTorch. */
jg_tensor *jg_embedding(jg_tensor *weight, jg_tensor *indices, int64_t padding_idx) {
    if (!weight || !indices)
        return jg_errorf_null("jg_embedding: NULL argument");
    if (jg_ndim(weight) != 2)
        return jg_errorf_null("'weight' must be 2-D");
    jg_dtype it = jg_dtype_of(indices);
    if (it != JG_I64 && it != JG_I32)
        return jg_errorf_null("Expected tensor for argument #1 'indices' to have one of the "
                              "following scalar types: Long, Int; but got %s instead (while "
                              "checking arguments for embedding)",
                              jg_dtype_name(it));
    const int64_t *ws = jg_shape(weight);
    if (padding_idx >= ws[0] || padding_idx < -ws[0])
        return jg_errorf_null("Padding_idx must be within num_embeddings");
    if (padding_idx < 0)
        padding_idx = -1; /* none */
    int nd = jg_ndim(indices);
    if (nd + 1 > JG_MAX_DIMS)
        return jg_errorf_null("embedding(): indices have too many dimensions");
    int64_t n = jg_numel(indices), d = ws[1];
    int64_t oshape[JG_MAX_DIMS];
    for (int k = 0; k < nd; k++)
        oshape[k] = jg_shape(indices)[k];
    oshape[nd] = d;
    jg_scope_push();
    jg_tensor *ix = it == JG_I64 ? indices : jg_to_dtype(indices, JG_I64);
    jg_tensor *col = ix ? jg_reshape(ix, 2, (const int64_t[]){n, 1}) : NULL;
    jg_tensor *full = col ? jg_contiguous(jg_expand(col, 2, (const int64_t[]){n, d})) : NULL;
    jg_attrs ga = {.n = 1};
    jg_tensor *rows = full ? jg_op1(JG_OP_GATHER, &ga, weight, full) : NULL;
    if (rows && padding_idx >= 0) {
        jg_tensor *pad = jg_eq_scalar(col, (double)padding_idx);
        rows = pad ? jg_where(pad, jg_detach(rows), rows) : NULL;
    }
    jg_tensor *r = rows ? jg_reshape(rows, nd + 1, oshape) : NULL;
    jg_keep(r);
    jg_scope_pop();
    return jg_scope_track(r);
}

/* layer_norm over the last n_norm dims: (x - mean) / sqrt(var + eps), var
 * the biased variance of the centred values, then * weight + bias (either
 * may be NULL; both have the normalized shape).  Composed of library ops, so
 * its gradient (and double backward) follows from theirs. */
jg_tensor *jg_layer_norm(jg_tensor *x, int n_norm, jg_tensor *weight, jg_tensor *bias, double eps) {
    if (!x)
        return jg_errorf_null("jg_layer_norm: NULL input");
    int nd = jg_ndim(x);
    if (n_norm < 1 || n_norm > nd)
        return jg_errorf_null("layer_norm: normalized_shape must have 1 to %d dims (the input's "
                              "last), got %d",
                              nd, n_norm);
    if (jg_dtype_of(x) != JG_F32 && jg_dtype_of(x) != JG_F64)
        return jg_errorf_null("\"LayerNormKernelImpl\" not implemented for '%s'",
                              jg_dtype_name(jg_dtype_of(x)));
    jg_tensor *affine[2] = {weight, bias};
    for (int k = 0; k < 2; k++) {
        if (!affine[k])
            continue;
        bool ok = jg_ndim(affine[k]) == n_norm;
        for (int d = 0; ok && d < n_norm; d++)
            ok = jg_shape(affine[k])[d] == jg_shape(x)[nd - n_norm + d];
        if (!ok)
            return jg_errorf_null("layer_norm: %s must have the normalized shape (the input's last "
                                  "%d dims)",
                                  k ? "bias" : "weight", n_norm);
    }
    int dims[JG_MAX_DIMS];
    for (int d = 0; d < n_norm; d++)
        dims[d] = nd - n_norm + d;
    jg_scope_push();
    jg_tensor *c = jg_sub(x, jg_mean_dims(x, n_norm, dims, true));
    jg_tensor *var = c ? jg_mean_dims(jg_mul(c, c), n_norm, dims, true) : NULL;
    jg_tensor *y = var ? jg_div(c, jg_sqrt(jg_add_scalar(var, eps))) : NULL;
    if (y && weight)
        y = jg_mul(y, weight);
    if (y && bias)
        y = jg_add(y, bias);
    jg_keep(y);
    jg_scope_pop();
    return jg_scope_track(y);
}

/* dropout: in training, x * (U[0,1) < 1 - p) / (1 - p) with the library's
 * generator (PyTorch's bernoulli(1 - p) mask); p == 1 gives zeros; not
 * training, or p == 0: x itself (a new reference).  Drawing numbers cannot
 * be traced: under jg_compile a training-mode dropout runs eagerly. */
jg_tensor *jg_dropout(jg_tensor *x, double p, bool train) {
    if (!x)
        return jg_errorf_null("jg_dropout: NULL input");
    if (!(p >= 0.0 && p <= 1.0))
        return jg_errorf_null("dropout probability has to be between 0 and 1, but got %g", p);
    if (!train || p == 0.0)
        return jg_scope_track(jg_retain(x));
    if (p == 1.0)
        return jg_mul_scalar(x, 0.0);
    jg_scope_push();
    jg_tensor *u = jg_rand(jg_dtype_of(x), jg_ndim(x), jg_shape(x));
    jg_tensor *keep = u ? jg_to_dtype(jg_lt_scalar(u, 1.0 - p), jg_dtype_of(x)) : NULL;
    jg_tensor *y = keep ? jg_mul_scalar(jg_mul(x, keep), 1.0 / (1.0 - p)) : NULL;
    jg_keep(y);
    jg_scope_pop();
    return jg_scope_track(y);
}
