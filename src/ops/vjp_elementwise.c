/* VJP rules of the elementwise ops, written with jitgrad ops (so they give
 * eager, traced and double backward).  Each follows PyTorch's formula and
 * operation order (derivatives.yaml) so results match it bit for bit where
 * the arithmetic is the same.  Broadcast inputs get their gradient summed
 * back to their own shape. */
#include "ops/decls.h"

#define SUM_TO(g, k) ((g) ? jg_sum_to((g), meta[k].ndim, meta[k].shape) : NULL)
#define CHECK(k)                                                                                   \
    if (needs[k] && !gin[k])                                                                       \
    return -1

int jg_vjp_add(VJP_ARGS) {
    UNUSED_ARGS;
    if (needs[0])
        gin[0] = SUM_TO(gout[0], 0);
    if (needs[1])
        gin[1] = SUM_TO(gout[0], 1);
    CHECK(0);
    CHECK(1);
    return 0;
}

int jg_vjp_sub(VJP_ARGS) {
    UNUSED_ARGS;
    if (needs[0])
        gin[0] = SUM_TO(gout[0], 0);
    if (needs[1])
        gin[1] = SUM_TO(jg_neg(gout[0]), 1);
    CHECK(0);
    CHECK(1);
    return 0;
}

int jg_vjp_mul(VJP_ARGS) {
    UNUSED_ARGS;
    if (needs[0])
        gin[0] = SUM_TO(jg_mul(gout[0], in[1]), 0);
    if (needs[1])
        gin[1] = SUM_TO(jg_mul(gout[0], in[0]), 1);
    CHECK(0);
    CHECK(1);
    return 0;
}

int jg_vjp_div(VJP_ARGS) {
    UNUSED_ARGS;
    if (needs[0])
        gin[0] = SUM_TO(jg_div(gout[0], in[1]), 0);
    if (needs[1]) /* -grad * ((self / other) / other) */
        gin[1] = SUM_TO(jg_mul(jg_neg(gout[0]), jg_div(jg_div(in[0], in[1]), in[1])), 1);
    CHECK(0);
    CHECK(1);
    return 0;
}

int jg_vjp_neg(VJP_ARGS) {
    UNUSED_ARGS;
    gin[0] = jg_neg(gout[0]);
    CHECK(0);
    return 0;
}

int jg_vjp_exp(VJP_ARGS) {
    UNUSED_ARGS;
    gin[0] = jg_mul(gout[0], out[0]);
    CHECK(0);
    return 0;
}

int jg_vjp_log(VJP_ARGS) {
    UNUSED_ARGS;
    gin[0] = jg_div(gout[0], in[0]);
    CHECK(0);
    return 0;
}

int jg_vjp_tanh(VJP_ARGS) { /* tanh_backward(grad, y) = grad * (1 - y*y), one op */
    UNUSED_ARGS;
    gin[0] = jg_ew_call(JG_OP_TANH_GRAD, gout[0], out[0]);
    CHECK(0);
    return 0;
}

/* tanh_backward(g, y): d/dg = tanh_backward(grad, y); d/dy = grad * (-2 * y * g) */
int jg_vjp_tanh_grad(VJP_ARGS) {
    UNUSED_ARGS;
    if (needs[0])
        gin[0] = SUM_TO(jg_ew_call(JG_OP_TANH_GRAD, gout[0], in[1]), 0);
    if (needs[1])
        gin[1] = SUM_TO(jg_mul(gout[0], jg_mul(jg_mul_scalar(in[1], -2.0), in[0])), 1);
    CHECK(0);
    CHECK(1);
    return 0;
}

int jg_vjp_abs(VJP_ARGS) { /* grad * sgn(x), one op */
    UNUSED_ARGS;
    gin[0] = jg_ew_call(JG_OP_ABS_GRAD, gout[0], in[0]);
    CHECK(0);
    return 0;
}

int jg_vjp_abs_grad(VJP_ARGS) {
    UNUSED_ARGS;
    if (needs[0])
        gin[0] = SUM_TO(jg_ew_call(JG_OP_ABS_GRAD, gout[0], in[1]), 0);
    /* the sign is piecewise constant: zeros, as PyTorch's SgnBackward gives
     * (not "no gradient": the input's .grad becomes zeros) */
    gin[1] = needs[1] ? jg_full(meta[1].dtype, meta[1].ndim, meta[1].shape, 0.0) : NULL;
    CHECK(0);
    CHECK(1);
    return 0;
}

int jg_vjp_relu(VJP_ARGS) {
    UNUSED_ARGS;
    gin[0] = jg_ew_call(JG_OP_RELU_GRAD, gout[0], out[0]);
    CHECK(0);
    return 0;
}

int jg_vjp_relu_grad(VJP_ARGS) {
    UNUSED_ARGS;
    if (needs[0])
        gin[0] = SUM_TO(jg_ew_call(JG_OP_RELU_GRAD, gout[0], in[1]), 0);
    /* the mask is piecewise constant: zeros, as PyTorch's threshold_backward */
    if (needs[1])
        gin[1] = jg_full(meta[1].dtype, meta[1].ndim, meta[1].shape, 0.0);
    CHECK(0);
    CHECK(1);
    return 0;
}

int jg_vjp_sigmoid(VJP_ARGS) { /* sigmoid_backward(grad, y) = grad * (1 - y) * y, one op */
    UNUSED_ARGS;
    gin[0] = jg_ew_call(JG_OP_SIGMOID_GRAD, gout[0], out[0]);
    CHECK(0);
    return 0;
}

/* sigmoid_backward(g, y): d/dg = sigmoid_backward(grad, y);
 * d/dy = grad * g * (-2 * y + 1) */
int jg_vjp_sigmoid_grad(VJP_ARGS) {
    UNUSED_ARGS;
    if (needs[0])
        gin[0] = SUM_TO(jg_ew_call(JG_OP_SIGMOID_GRAD, gout[0], in[1]), 0);
    if (needs[1])
        gin[1] = SUM_TO(
            jg_mul(jg_mul(gout[0], in[0]), jg_add_scalar(jg_mul_scalar(in[1], -2.0), 1.0)), 1);
    CHECK(0);
    CHECK(1);
    return 0;
}

int jg_vjp_sqrt(VJP_ARGS) { /* grad / (2 * y) */
    UNUSED_ARGS;
    gin[0] = jg_div(gout[0], jg_mul_scalar(out[0], 2.0));
    CHECK(0);
    return 0;
}

int jg_vjp_pow_scalar(VJP_ARGS) { /* grad * (e * x^(e-1)); zero for e == 0 */
    UNUSED_ARGS;
    if (a->s == 0.0)
        gin[0] = jg_mul_scalar(gout[0], 0.0);
    else
        gin[0] = jg_mul(gout[0], jg_mul_scalar(jg_pow_scalar(in[0], a->s - 1.0), a->s));
    CHECK(0);
    return 0;
}

int jg_vjp_add_scalar(VJP_ARGS) {
    UNUSED_ARGS;
    gin[0] = gout[0];
    return 0;
}

int jg_vjp_mul_scalar(VJP_ARGS) {
    UNUSED_ARGS;
    gin[0] = jg_mul_scalar(gout[0], a->s);
    CHECK(0);
    return 0;
}

int jg_vjp_clone(VJP_ARGS) {
    UNUSED_ARGS;
    gin[0] = gout[0];
    return 0;
}

int jg_vjp_max_mask(VJP_ARGS) { /* (NONDIFF: never called) */
    UNUSED_ARGS;
    gin[0] = gin[1] = NULL;
    return 0;
}

int jg_vjp_zero(VJP_ARGS) { /* zeros_like(grad): the input's values are gone */
    UNUSED_ARGS;
    gin[0] = jg_full(meta[0].dtype, meta[0].ndim, meta[0].shape, 0.0);
    CHECK(0);
    return 0;
}

int jg_vjp_to_dtype(VJP_ARGS) {
    UNUSED_ARGS;
    gin[0] = jg_to_dtype(gout[0], meta[0].dtype);
    CHECK(0);
    return 0;
}
