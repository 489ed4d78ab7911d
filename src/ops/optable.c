/* The op table, instantiated from ops.def. */
#include "ops/decls.h"

const jg_op_info jg_ops[JG_OP_COUNT] = {
#define JG_OP(ID, name, bw_name, n_in, n_out, flags, infer, kernel, vjp, cexpr)                    \
    [JG_OP_##ID] = {name, bw_name, n_in, n_out, flags, infer, kernel, vjp, cexpr},
#include "ops/ops.def"
#undef JG_OP
};

bool jg_op_saves_output(jg_opcode op, int k, jg_dtype d) {
    unsigned f = jg_ops[op].flags;
    if (op == JG_OP_STD_MEAN) /* (the mean's gradient reads no output) */
        return k == 0;
    if (op == JG_OP_BATCH_NORM) /* the statistics, not y (PyTorch's save_mean/invstd) */
        return k == 1;
    if (op == JG_OP_LAYER_NORM) /* the statistics (PyTorch's mean and rstd) */
        return k == 1;
    return (f & JG_OPF_SAVE_OUT) && (!(f & JG_OPF_SAVE_IDX) || d == JG_I64);
}

/* PyTorch saves an input only when a formula that is needed reads it
 * (derivatives.yaml plus should_compute_output): saving more makes an
 * in-place change of an operand the backward never reads fail with "modified
 * by an inplace operation".  needs[k]: input k gets a gradient. */
unsigned jg_op_saved_inputs(jg_opcode op, const bool *needs) {
    const jg_op_info *info = &jg_ops[op];
    if (!(info->flags & JG_OPF_SAVE_IN))
        return 0;
    switch (op) {
    case JG_OP_MUL:    /* grad * other, grad * self */
    case JG_OP_MATMUL: /* grad @ other^T, self^T @ grad */
        return (needs[1] ? 1u : 0u) | (needs[0] ? 2u : 0u);
    case JG_OP_DIV: /* grad / other; -grad * self / other / other */
    case JG_OP_TANH_GRAD:
    case JG_OP_SIGMOID_GRAD: /* (grad, y): y by both, grad only by y's formula */
        return (needs[1] ? 1u : 0u) | 2u;
    case JG_OP_MASKED_FILL: /* the mask */
    case JG_OP_SCATTER_ADD: /* the index */
    case JG_OP_SCATTER:
    case JG_OP_SCATTER_VALUE:
    case JG_OP_SCATTER_ADD_INTO:
    case JG_OP_NLL_LOSS_BACKWARD: /* the targets */
    case JG_OP_RELU_GRAD:         /* relu's output */
    case JG_OP_ABS_GRAD:          /* abs's input */
        return 2u;
    case JG_OP_WHERE: /* the condition */
        return 1u;
    case JG_OP_CONV2D: /* both gradient rows take (g, x, w); the bias's reads neither */
    case JG_OP_CONV2D_BIAS:
        return needs[0] || needs[1] ? 3u : 0u;
    case JG_OP_CONV2D_INPUT_GRAD: /* (g, x, w): conv2d(gg, w), weight_grad(g, gg, w) */
        return (needs[0] || needs[2] ? 4u : 0u) | (needs[2] ? 1u : 0u);
    case JG_OP_CONV2D_WEIGHT_GRAD: /* (g, x, w): conv2d(x, gw), input_grad(g, x, gw) */
        return (needs[0] || needs[1] ? 2u : 0u) | (needs[1] ? 1u : 0u);
    case JG_OP_MAX_POOL2D_BACKWARD: /* the indices */
        return 4u;
    case JG_OP_MAX_POOL2D: /* x only for its gradient's operand */
    case JG_OP_AVG_POOL2D:
    case JG_OP_ADAPTIVE_AVG_POOL2D:
        return needs[0] ? 1u : 0u;
    case JG_OP_BATCH_NORM: /* input and weight; the bias is never read */
    case JG_OP_LAYER_NORM:
        return 3u;
    default: /* (gather and nll_loss keep self, as PyTorch does) */
        return (1u << info->n_in) - 1;
    }
}

const char *jg_op_node_name(jg_opcode op, const jg_attrs *a) {
    if (a && a->whole) { /* PyTorch's overload without dims */
        switch (op) {
        case JG_OP_SUM:
            return "SumBackward0";
        case JG_OP_MEAN:
            return "MeanBackward0";
        case JG_OP_PROD:
            return "ProdBackward0";
        default:
            break;
        }
    }
    /* (attrs dim 0, start 0, end, step 1, copy 1: ops/inplace.c over_history) */
    if (op == JG_OP_SLICE_SCATTER && a && a->n >= 5 && a->i[4])
        return "CopyBackwards";
    return jg_ops[op].bw_name;
}
