/* The nn part's ops: gelu (exact and tanh approximation) and silu, with
 * VJPs written as jitgrad ops (PyTorch's gelu_backward / silu_backward as
 * one elementwise op each; their own VJPs composed, for double backward). */
#include "ops/decls.h"

#define SUM_TO(g, k) ((g) ? jg_sum_to((g), meta[k].ndim, meta[k].shape) : NULL)
#define CHECK(k)                                                                                   \
    if (needs[k] && !gin[k])                                                                       \
    return -1

jg_tensor *jg_gelu(jg_tensor *a, jg_gelu_approximate approximate) {
    if (approximate != JG_GELU_NONE && approximate != JG_GELU_TANH)
        return jg_errorf_null("approximate argument must be either none or tanh.");
    return jg_ew_call(approximate == JG_GELU_TANH ? JG_OP_GELU_TANH : JG_OP_GELU, a, NULL);
}

jg_tensor *jg_silu(jg_tensor *a) {
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
