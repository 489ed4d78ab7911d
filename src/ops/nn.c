/* The nn part's ops: gelu (exact and tanh approximation) and silu, with
 * VJPs written as jitgrad ops (PyTorch's gelu_backward / silu_backward as
 * one elementwise op each; their own VJPs composed, for double backward). */
#include "ops/decls.h"

#include <math.h>

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
    if (approximate != JG_GELU_TANH || !jg_grad_mode || !jg_requires_grad(a))
        return jg_ew_call(approximate == JG_GELU_TANH ? JG_OP_GELU_TANH : JG_OP_GELU, a, NULL);
    /* a backward will follow: keep the tanh for it (nn.def) */
    jg_scope_push();
    bool mode = jg_grad_mode;
    jg_grad_mode = false;
    jg_tensor *t = jg_ew_call(JG_OP_GELU_TANH_T, a, NULL);
    jg_grad_mode = mode;
    jg_tensor *y = t ? jg_ew_call(JG_OP_GELU_TANH_Y, a, t) : NULL;
    jg_keep(y);
    jg_scope_pop();
    return jg_scope_track(y);
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

/* gelu_tanh_y(x, t), t = gelu_tanh_t(x): x's gradient is g * f'(x) with
 * the saved t, gelu_tanh_grad's bits; t gets none (it is f's own part).
 * With a graph to make (double backward), gelu_tanh_grad, whose VJP is
 * composed. */
int jg_vjp_gelu_tanh_y(VJP_ARGS) {
    UNUSED_ARGS;
    if (!needs[0])
        return 0;
    if (jg_grad_mode) {
        gin[0] = SUM_TO(jg_ew_call(JG_OP_GELU_TANH_GRAD, gout[0], in[0]), 0);
    } else {
        jg_tensor *d = jg_ew_call(JG_OP_GELU_TANH_D, in[0], in[1]);
        gin[0] = d ? SUM_TO(jg_mul(gout[0], d), 0) : NULL;
    }
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

jg_tensor *jg_hardswish(jg_tensor *a) {
    if (!float_input(a, "hardswish_cpu"))
        return NULL;
    return jg_ew_call(JG_OP_HARDSWISH, a, NULL);
}

jg_tensor *jg_hardsigmoid(jg_tensor *a) {
    if (!float_input(a, "hardsigmoid_cpu"))
        return NULL;
    return jg_ew_call(JG_OP_HARDSIGMOID, a, NULL);
}

jg_tensor *jg_leaky_relu(jg_tensor *a, double negative_slope) {
    if (!float_input(a, "leaky_relu_cpu"))
        return NULL;
    return jg_ew_call_scalar(JG_OP_LEAKY_RELU, a, negative_slope);
}

int jg_vjp_leaky_relu(VJP_ARGS) {
    UNUSED_ARGS;
    jg_attrs at = {.s = a->s};
    gin[0] = jg_op1(JG_OP_LEAKY_RELU_GRAD, &at, gout[0], in[0]);
    CHECK(0);
    return 0;
}

/* leaky_relu_backward's derivatives: the same mask for g, zeros for x (the
 * mask is piecewise constant), as PyTorch's */
int jg_vjp_leaky_relu_grad(VJP_ARGS) {
    UNUSED_ARGS;
    jg_attrs at = {.s = a->s};
    if (needs[0])
        gin[0] = SUM_TO(jg_op1(JG_OP_LEAKY_RELU_GRAD, &at, gout[0], in[1]), 0);
    if (needs[1])
        gin[1] = jg_full(meta[1].dtype, meta[1].ndim, meta[1].shape, 0.0);
    CHECK(0);
    CHECK(1);
    return 0;
}

jg_tensor *jg_hardtanh(jg_tensor *a, double min_val, double max_val) {
    jg_scope_push();
    jg_tensor *lo = jg_ew_call_scalar(JG_OP_HARDTANH_LO, a, min_val);
    jg_tensor *y = lo ? jg_ew_call_scalar(JG_OP_HARDTANH_HI, lo, max_val) : NULL;
    jg_keep(y);
    jg_scope_pop();
    return jg_scope_track(y);
}

/* One bound's part of hardtanh's backward: the gradient masked where the
 * row's input is at or past the bound. */
static int hardtanh_part(jg_opcode grad_op, const jg_attrs *a, jg_tensor *x, jg_tensor *g,
                         jg_tensor **gin) {
    jg_attrs at = {.s = a->s};
    gin[0] = jg_op1(grad_op, &at, g, x);
    return gin[0] ? 0 : -1;
}

int jg_vjp_hardtanh_lo(VJP_ARGS) {
    UNUSED_ARGS;
    return hardtanh_part(JG_OP_HARDTANH_LO_GRAD, a, in[0], gout[0], gin);
}

int jg_vjp_hardtanh_hi(VJP_ARGS) {
    UNUSED_ARGS;
    return hardtanh_part(JG_OP_HARDTANH_HI_GRAD, a, in[0], gout[0], gin);
}

/* the masks' derivatives: the same mask for g, zeros for x */
static int hardtanh_grad_vjp(jg_opcode op, const jg_attrs *a, const jg_meta *meta,
                             jg_tensor *const *in, jg_tensor *const *gout, const bool *needs,
                             jg_tensor **gin) {
    jg_attrs at = {.s = a->s};
    if (needs[0])
        gin[0] = SUM_TO(jg_op1(op, &at, gout[0], in[1]), 0);
    if (needs[1])
        gin[1] = jg_full(meta[1].dtype, meta[1].ndim, meta[1].shape, 0.0);
    CHECK(0);
    CHECK(1);
    return 0;
}

int jg_vjp_hardtanh_lo_grad(VJP_ARGS) {
    UNUSED_ARGS;
    return hardtanh_grad_vjp(JG_OP_HARDTANH_LO_GRAD, a, meta, in, gout, needs, gin);
}

int jg_vjp_hardtanh_hi_grad(VJP_ARGS) {
    UNUSED_ARGS;
    return hardtanh_grad_vjp(JG_OP_HARDTANH_HI_GRAD, a, meta, in, gout, needs, gin);
}

int jg_vjp_hardswish(VJP_ARGS) {
    UNUSED_ARGS;
    gin[0] = jg_ew_call(JG_OP_HARDSWISH_GRAD, gout[0], in[0]);
    CHECK(0);
    return 0;
}

/* PyTorch's hardswish_backward derivative: d/dg hardswish_backward(gg, x);
 * d/dx gg * g / 3 on the open (-3, 3), else 0 */
int jg_vjp_hardswish_grad(VJP_ARGS) {
    UNUSED_ARGS;
    if (needs[0])
        gin[0] = SUM_TO(jg_ew_call(JG_OP_HARDSWISH_GRAD, gout[0], in[1]), 0);
    if (needs[1]) {
        jg_tensor *x = in[1];
        jg_tensor *inside = jg_logical_and(jg_gt_scalar(x, -3.0), jg_lt_scalar(x, 3.0));
        jg_tensor *gg = jg_mul(gout[0], in[0]);
        jg_dtype dt = gg ? jg_dtype_of(gg) : JG_F32;
        jg_tensor *v = gg ? jg_div(gg, jg_full(dt, 0, NULL, 3.0)) : NULL;
        jg_tensor *z = jg_full(dt, 0, NULL, 0.0);
        gin[1] = inside && z ? SUM_TO(jg_where(inside, v, z), 1) : NULL;
    }
    CHECK(0);
    CHECK(1);
    return 0;
}

int jg_vjp_hardsigmoid(VJP_ARGS) {
    UNUSED_ARGS;
    gin[0] = jg_ew_call(JG_OP_HARDSIGMOID_GRAD, gout[0], in[0]);
    CHECK(0);
    return 0;
}

/* x's part is refused, as PyTorch 1.13 refuses it */
int jg_vjp_hardsigmoid_grad(VJP_ARGS) {
    UNUSED_ARGS;
    if (needs[1])
        return jg_errorf("derivative for aten::hardsigmoid_backward is not implemented");
    if (needs[0])
        gin[0] = SUM_TO(jg_ew_call(JG_OP_HARDSIGMOID_GRAD, gout[0], in[1]), 0);
    CHECK(0);
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
    /* the index expanded, not copied: gather and its backward's scatter_add
     * take a row of one index as one strided row (ops/index.c) */
    jg_tensor *full = col ? jg_expand(col, 2, (const int64_t[]){n, d}) : NULL;
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

/* ---- nll_loss / cross_entropy with class weights and label smoothing ----
 * The per-row -logp[i, t_i] is the library's nll_loss op (which checks the
 * targets when it runs); the weights of the rows' targets are a gather of
 * weight at the targets (ignored rows read class 0 and are masked out);
 * the smoothing term is -sum_c logp[i, c] * weight[c].  Reductions as
 * PyTorch 1.13's: a weighted mean divides by the sum of the rows' weights,
 * the smoothing term by the same divisor. */
static jg_tensor *nll_composed(jg_tensor *logp, jg_tensor *target, const jg_loss_options *o) {
    int64_t c = jg_shape(logp)[1];
    jg_dtype dt = jg_dtype_of(logp);
    bool weighted = o->weight != NULL, smooth = o->label_smoothing > 0.0;
    jg_attrs at = jg_nll_attrs(true, o->ignore_index, JG_REDUCTION_NONE, c);
    jg_tensor *rows = jg_op1(JG_OP_NLL_LOSS, &at, logp, target); /* [N], 0 where ignored */
    jg_tensor *keep_b = jg_ne_scalar(target, (double)o->ignore_index);
    jg_tensor *keep = keep_b ? jg_to_dtype(keep_b, dt) : NULL;
    if (!rows || !keep)
        return NULL;
    jg_tensor *w_rows = keep; /* each row's weight (0 where ignored) */
    if (weighted) {
        jg_tensor *safe = jg_mul(target, jg_to_dtype(keep_b, JG_I64));
        jg_attrs ga = {.n = 1};
        jg_tensor *wt = safe ? jg_op1(JG_OP_GATHER, &ga, o->weight, safe) : NULL;
        w_rows = wt ? jg_mul(wt, keep) : NULL;
        rows = w_rows ? jg_mul(rows, w_rows) : NULL;
    }
    jg_tensor *srows = NULL;
    if (rows && smooth) {
        jg_tensor *lw = weighted ? jg_mul(logp, o->weight) : logp;
        jg_tensor *s = lw ? jg_sum_dims(lw, 1, (const int[]){1}, false) : NULL;
        srows = s ? jg_mul(jg_neg(s), keep) : NULL;
        if (!srows)
            return NULL;
    }
    if (!rows || !w_rows)
        return NULL;
    double eps = o->label_smoothing, sk = eps / (double)c;
    switch (o->reduction) {
    case JG_REDUCTION_NONE:
        return smooth ? jg_add(jg_mul_scalar(rows, 1.0 - eps), jg_mul_scalar(srows, sk)) : rows;
    case JG_REDUCTION_SUM:
        return smooth ? jg_add(jg_mul_scalar(jg_sum(rows), 1.0 - eps),
                               jg_mul_scalar(jg_sum(srows), sk))
                      : jg_sum(rows);
    default: {
        jg_tensor *den = jg_sum(w_rows);
        jg_tensor *m = jg_div(jg_sum(rows), den);
        return smooth ? jg_add(jg_mul_scalar(m, 1.0 - eps),
                               jg_mul_scalar(jg_div(jg_sum(srows), den), sk))
                      : m;
    }
    }
}

static int check_loss_args(const char *fn, jg_tensor *x, jg_tensor *target,
                           const jg_loss_options *o) {
    if (!x || !target || !o)
        return jg_errorf("%s: NULL argument", fn);
    if ((int)o->reduction < JG_REDUCTION_MEAN || (int)o->reduction > JG_REDUCTION_NONE)
        return jg_errorf("%s: invalid reduction %d", fn, (int)o->reduction);
    if (!(o->label_smoothing >= 0.0 && o->label_smoothing <= 1.0))
        return jg_errorf("label_smoothing must be between 0.0 and 1.0. Got: %g",
                         o->label_smoothing);
    if (jg_ndim(x) != 2)
        return jg_errorf("%s: expected a 2-D input [N, C], got %d-D", fn, jg_ndim(x));
    if (!jg_dtype_is_float(jg_dtype_of(x)))
        return jg_errorf("\"nll_loss_out_frame\" not implemented for '%s'",
                         jg_dtype_torch_name(jg_dtype_of(x)));
    if (jg_dtype_of(target) != JG_I64)
        return jg_errorf("expected scalar type Long but found %s",
                         jg_dtype_torch_name(jg_dtype_of(target)));
    if (jg_ndim(target) != 1 || jg_shape(target)[0] != jg_shape(x)[0])
        return jg_errorf("Expected input batch_size (%lld) to match target batch_size (%lld).",
                         (long long)jg_shape(x)[0],
                         (long long)(jg_ndim(target) ? jg_shape(target)[0] : 1));
    jg_tensor *w = o->weight;
    if (w && (jg_ndim(w) != 1 || jg_shape(w)[0] != jg_shape(x)[1]))
        return jg_errorf("weight tensor should be defined either for all %lld classes or no "
                         "classes but got weight tensor of shape: [%lld]",
                         (long long)jg_shape(x)[1], (long long)(jg_ndim(w) ? jg_shape(w)[0] : 1));
    if (w && jg_dtype_of(w) != jg_dtype_of(x))
        return jg_errorf("expected scalar type %s but found %s",
                         jg_dtype_torch_name(jg_dtype_of(x)), jg_dtype_torch_name(jg_dtype_of(w)));
    return 0;
}

static jg_tensor *loss_nn(jg_tensor *x, jg_tensor *target, const jg_loss_options *o,
                          bool from_logits) {
    if (check_loss_args(from_logits ? "cross_entropy" : "nll_loss", x, target, o) < 0)
        return NULL;
    if (!o->weight && o->label_smoothing == 0.0) {
        if (from_logits)
            return jg_cross_entropy_ex(x, target, o->reduction, o->ignore_index);
        jg_attrs at = jg_nll_attrs(true, o->ignore_index, o->reduction, jg_shape(x)[1]);
        return jg_op1(JG_OP_NLL_LOSS, &at, x, target);
    }
    jg_scope_push();
    jg_tensor *logp = from_logits ? jg_log_softmax(x, 1) : x;
    jg_tensor *r = logp ? nll_composed(logp, target, o) : NULL;
    jg_keep(r);
    jg_scope_pop();
    return jg_scope_track(r);
}

jg_tensor *jg_nll_loss(jg_tensor *logp, jg_tensor *target, const jg_loss_options *o) {
    return loss_nn(logp, target, o, false);
}

jg_tensor *jg_cross_entropy_opts(jg_tensor *logits, jg_tensor *target, const jg_loss_options *o) {
    return loss_nn(logits, target, o, true);
}

/* ---- regression losses (PyTorch's kernels' formulas), composed ---- */

static jg_tensor *reduce_loss(jg_tensor *l, jg_reduction r) {
    if (!l)
        return NULL;
    return r == JG_REDUCTION_MEAN ? jg_mean(l) : r == JG_REDUCTION_SUM ? jg_sum(l) : l;
}

static int check_regression(const char *fn, jg_tensor *input, jg_tensor *target, jg_reduction r) {
    if (!input || !target)
        return jg_errorf("%s: NULL argument", fn);
    if ((int)r < JG_REDUCTION_MEAN || (int)r > JG_REDUCTION_NONE)
        return jg_errorf("%s: invalid reduction %d", fn, (int)r);
    return 0;
}

static jg_tensor *regression(int kind, jg_tensor *input, jg_tensor *target, jg_reduction r,
                             double beta) {
    static const char *names[3] = {"mse_loss", "l1_loss", "smooth_l1_loss"};
    if (check_regression(names[kind], input, target, r) < 0)
        return NULL;
    if (kind == 2 && !(beta >= 0.0))
        return jg_errorf_null("smooth_l1_loss does not support negative values for beta.");
    jg_scope_push();
    jg_tensor *d = jg_sub(input, target), *l = NULL;
    if (d && kind == 0) {
        l = jg_mul(d, d);
    } else if (d && (kind == 1 || beta == 0.0)) {
        l = jg_abs(d);
    } else if (d) { /* z < beta ? 0.5 * z * z / beta : z - 0.5 * beta */
        jg_tensor *z = jg_abs(d);
        jg_tensor *b = z ? jg_full(jg_dtype_of(z), 0, NULL, beta) : NULL;
        jg_tensor *quad = b ? jg_div(jg_mul(jg_mul_scalar(z, 0.5), z), b) : NULL;
        jg_tensor *lin = z ? jg_add_scalar(z, -0.5 * beta) : NULL;
        l = quad && lin ? jg_where(jg_lt_scalar(z, beta), quad, lin) : NULL;
    }
    jg_tensor *out = reduce_loss(l, r);
    jg_keep(out);
    jg_scope_pop();
    return jg_scope_track(out);
}

jg_tensor *jg_mse_loss(jg_tensor *input, jg_tensor *target, jg_reduction reduction) {
    return regression(0, input, target, reduction, 0.0);
}

jg_tensor *jg_l1_loss(jg_tensor *input, jg_tensor *target, jg_reduction reduction) {
    return regression(1, input, target, reduction, 0.0);
}

jg_tensor *jg_smooth_l1_loss(jg_tensor *input, jg_tensor *target, jg_reduction reduction,
                             double beta) {
    return regression(2, input, target, reduction, beta);
}

/* scaled_dot_product_attention: softmax(q k^T * scale [+ mask]) v over the
 * last two dims (batch dims broadcast), scale 1/sqrt(E); is_causal masks
 * key j > query i with -inf; a bool attn_mask keeps where true, a float one
 * is added; dropout_p > 0 drops attention weights (the library's
 * generator).  Composed of library ops. */
jg_tensor *jg_scaled_dot_product_attention(jg_tensor *q, jg_tensor *k, jg_tensor *v,
                                           jg_tensor *attn_mask, double dropout_p, bool is_causal) {
    if (!q || !k || !v)
        return jg_errorf_null("scaled_dot_product_attention: NULL argument");
    int qn = jg_ndim(q), kn = jg_ndim(k);
    if (qn < 2 || kn < 2 || jg_ndim(v) < 2)
        return jg_errorf_null("scaled_dot_product_attention: query, key and value need at least "
                              "2 dims");
    if (is_causal && attn_mask)
        return jg_errorf_null("_scaled_dot_product_attention: Explicit attn_mask should not be "
                              "set when is_causal=True");
    int64_t L = jg_shape(q)[qn - 2], S = jg_shape(k)[kn - 2], E = jg_shape(q)[qn - 1];
    jg_scope_push();
    jg_tensor *s =
        jg_mul_scalar(jg_matmul(q, jg_transpose(k, kn - 2, kn - 1)), 1.0 / sqrt((double)E));
    if (s && is_causal) {
        jg_tensor *m = jg_tensor_new(JG_BOOL, 2, (const int64_t[]){L, S}, NULL);
        if (m) {
            bool *p = jg_data(m);
            for (int64_t i = 0; i < L; i++)
                for (int64_t j = 0; j < S; j++)
                    p[i * S + j] = j > i;
        }
        s = m ? jg_masked_fill(s, m, -INFINITY) : NULL;
    } else if (s && attn_mask) {
        s = jg_dtype_of(attn_mask) == JG_BOOL
                ? jg_masked_fill(s, jg_logical_not(attn_mask), -INFINITY)
                : jg_add(s, attn_mask);
    }
    jg_tensor *a = s ? jg_softmax(s, jg_ndim(s) - 1) : NULL;
    if (a && dropout_p > 0.0)
        a = jg_dropout(a, dropout_p, true);
    jg_tensor *out = a ? jg_matmul(a, v) : NULL;
    jg_keep(out);
    jg_scope_pop();
    return jg_scope_track(out);
}
