/* Optimizers (PyTorch's torch.optim): SGD, Adam, AdamW, Adagrad, RMSprop,
 * Adadelta.
 *
 * jg_optim_update is the whole algorithm for one parameter; it mirrors
 * PyTorch 1.13's _single_tensor_<name> functions line by line, using the
 * same order of operations and the same temporaries, so results agree with
 * PyTorch's to rounding: PyTorch's CPU kernels evaluate `a + alpha * b` (add
 * with alpha, addcmul) with a fused multiply-add where the CPU has one,
 * jitgrad never fuses.
 * Inside a compiled program the step count cannot be read (a graph break):
 * the numbers PyTorch computes from it in double become graph ops on 0-d
 * f64 tensors (scal below), so a whole training step is one graph.
 * A jg_optim is parameter groups plus per-parameter state on top of it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jitgrad.h>

#include "core/tensor.h"
#include "ops/optable.h"
#include "optim/adam_fused.h"
#include "trace/trace.h"

#define MAX_STATE JG_OPTIM_MAX_STATE

typedef struct {
    jg_tensor *param;
    jg_tensor *state[MAX_STATE];
} optim_param;

typedef struct {
    jg_optim_hparams h;
    optim_param *params;
    int n;
    /* h's fields as f64 [HP_FIELDS], kept equal to h: a step traced by
     * jg_compile bakes them into its graph, and guards on this tensor's
     * values (a new lr traces again instead of replaying the old one) */
    jg_tensor *hp;
} optim_group;

enum { HP_FIELDS = 14 };

static void pack_hparams(const jg_optim_hparams *h, jg_tensor *hp) {
    double *d = (double *)(void *)jg_tensor_ptr(hp); /* (never a graph input) */
    const double v[HP_FIELDS] = {h->lr,
                                 h->momentum,
                                 h->dampening,
                                 h->nesterov,
                                 h->beta1,
                                 h->beta2,
                                 h->amsgrad,
                                 h->eps,
                                 h->weight_decay,
                                 h->lr_decay,
                                 h->initial_accumulator_value,
                                 h->alpha,
                                 h->centered,
                                 h->maximize};
    memcpy(d, v, sizeof v);
}

struct jg_optim {
    jg_optim_kind kind;
    optim_group *groups;
    int n_groups;
};

static const char *const state_names[][MAX_STATE + 1] = {
    [JG_OPTIM_SGD] = {"momentum_buffer", NULL},
    [JG_OPTIM_ADAM] = {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq", NULL},
    [JG_OPTIM_ADAMW] = {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq", NULL},
    [JG_OPTIM_ADAGRAD] = {"step", "sum", NULL},
    [JG_OPTIM_RMSPROP] = {"step", "square_avg", "momentum_buffer", "grad_avg", NULL},
    [JG_OPTIM_ADADELTA] = {"step", "square_avg", "acc_delta", NULL},
};

static bool kind_ok(jg_optim_kind kind) {
    return (int)kind >= JG_OPTIM_SGD && kind <= JG_OPTIM_ADADELTA;
}

const char *jg_optim_state_name(jg_optim_kind kind, int i) {
    if (!kind_ok(kind) || i < 0 || i >= MAX_STATE)
        return NULL;
    return state_names[kind][i];
}

static int state_index(jg_optim_kind kind, const char *name) {
    for (int i = 0; name && state_names[kind][i]; i++)
        if (!strcmp(state_names[kind][i], name))
            return i;
    return -1;
}

jg_optim_hparams jg_optim_defaults(jg_optim_kind kind) {
    jg_optim_hparams h = {0};
    h.beta1 = 0.9;
    h.beta2 = 0.999;
    switch (kind) {
    case JG_OPTIM_SGD:
        h.lr = 1e-3;
        break;
    case JG_OPTIM_ADAM:
        h.lr = 1e-3;
        h.eps = 1e-8;
        break;
    case JG_OPTIM_ADAMW:
        h.lr = 1e-3;
        h.eps = 1e-8;
        h.weight_decay = 1e-2;
        break;
    case JG_OPTIM_ADAGRAD:
        h.lr = 1e-2;
        h.eps = 1e-10;
        break;
    case JG_OPTIM_RMSPROP:
        h.lr = 1e-2;
        h.alpha = 0.99;
        h.eps = 1e-8;
        break;
    case JG_OPTIM_ADADELTA:
        h.lr = 1.0;
        h.rho = 0.9;
        h.eps = 1e-6;
        break;
    }
    return h;
}

/* PyTorch's constructor checks, with its messages ("!(x >= 0)" so NaN fails). */
static int check_hparams(jg_optim_kind kind, const jg_optim_hparams *h) {
    if (!kind_ok(kind))
        return jg_set_error("jg_optim: unknown optimizer kind %d", (int)kind);
    if (!h)
        return jg_set_error("jg_optim: hparams is NULL");
    if (!(h->lr >= 0))
        return jg_set_error("Invalid learning rate: %g", h->lr);
    switch (kind) {
    case JG_OPTIM_SGD:
        if (!(h->momentum >= 0))
            return jg_set_error("Invalid momentum value: %g", h->momentum);
        if (!(h->weight_decay >= 0))
            return jg_set_error("Invalid weight_decay value: %g", h->weight_decay);
        if (h->nesterov && (h->momentum <= 0 || h->dampening != 0))
            return jg_set_error("Nesterov momentum requires a momentum and zero dampening");
        break;
    case JG_OPTIM_ADAM:
    case JG_OPTIM_ADAMW:
        if (!(h->eps >= 0))
            return jg_set_error("Invalid epsilon value: %g", h->eps);
        if (!(h->beta1 >= 0 && h->beta1 < 1))
            return jg_set_error("Invalid beta parameter at index 0: %g", h->beta1);
        if (!(h->beta2 >= 0 && h->beta2 < 1))
            return jg_set_error("Invalid beta parameter at index 1: %g", h->beta2);
        if (!(h->weight_decay >= 0))
            return jg_set_error("Invalid weight_decay value: %g", h->weight_decay);
        break;
    case JG_OPTIM_ADAGRAD:
        if (!(h->lr_decay >= 0))
            return jg_set_error("Invalid lr_decay value: %g", h->lr_decay);
        if (!(h->weight_decay >= 0))
            return jg_set_error("Invalid weight_decay value: %g", h->weight_decay);
        if (!(h->initial_accumulator_value >= 0))
            return jg_set_error("Invalid initial_accumulator_value value: %g",
                                h->initial_accumulator_value);
        if (!(h->eps >= 0))
            return jg_set_error("Invalid epsilon value: %g", h->eps);
        break;
    case JG_OPTIM_RMSPROP:
        if (!(h->eps >= 0))
            return jg_set_error("Invalid epsilon value: %g", h->eps);
        if (!(h->momentum >= 0))
            return jg_set_error("Invalid momentum value: %g", h->momentum);
        if (!(h->weight_decay >= 0))
            return jg_set_error("Invalid weight_decay value: %g", h->weight_decay);
        if (!(h->alpha >= 0))
            return jg_set_error("Invalid alpha value: %g", h->alpha);
        break;
    case JG_OPTIM_ADADELTA:
        if (!(h->rho >= 0 && h->rho <= 1))
            return jg_set_error("Invalid rho value: %g", h->rho);
        if (!(h->eps >= 0))
            return jg_set_error("Invalid epsilon value: %g", h->eps);
        if (!(h->weight_decay >= 0))
            return jg_set_error("Invalid weight_decay value: %g", h->weight_decay);
        break;
    }
    return 0;
}

static bool is_float(jg_dtype d) {
    return d == JG_F32 || d == JG_F64;
}

static bool same_geometry(const jg_tensor *a, const jg_tensor *b) {
    return jg_dtype_of(a) == jg_dtype_of(b) && jg_ndim(a) == jg_ndim(b) &&
           !memcmp(jg_shape(a), jg_shape(b), sizeof(int64_t) * (size_t)jg_ndim(a));
}

/* ---------------------------------------------------------- the updates */

/* `x / s` for a Python scalar s: PyTorch's CPU division by a scalar
 * multiplies by its reciprocal, computed in the tensor's dtype. */
static jg_tensor *div_scalar(jg_tensor *x, double s) {
    double r = jg_dtype_of(x) == JG_F32 ? (double)(1.0f / (float)s) : 1.0 / s;
    return jg_mul_scalar(x, r);
}

/* x + alpha * y (PyTorch's x.add(y, alpha=alpha)) */
static jg_tensor *add_alpha(jg_tensor *x, jg_tensor *y, double alpha) {
    return jg_add(x, alpha == 1 ? y : jg_mul_scalar(y, alpha));
}

/* x.add_(y, alpha=alpha): one pass for dense operands (the bits of the
 * composed ops, without the temporary) */
static int add_alpha_(jg_tensor *x, jg_tensor *y, double alpha) {
    if (x && y && alpha != 1 && jg_add_scaled_dense_(x, y, alpha))
        return 0;
    jg_tensor *t = alpha == 1 ? y : jg_mul_scalar(y, alpha);
    return t ? jg_add_(x, t) : -1;
}

/* x.addcmul_(a, b, value=v): x + v * a * b */
static int addcmul_(jg_tensor *x, jg_tensor *a, jg_tensor *b, double v) {
    jg_tensor *t = jg_mul(jg_mul_scalar(a, v), b);
    return t ? jg_add_(x, t) : -1;
}

/* x.addcdiv_(a, b, value=v): x + v * a / b */
static int addcdiv_(jg_tensor *x, jg_tensor *a, jg_tensor *b, double v) {
    jg_tensor *t = jg_div(jg_mul_scalar(a, v), b);
    return t ? jg_add_(x, t) : -1;
}

/* state_steps[i] += 1 */
static int bump_step(jg_tensor *step) {
    jg_tensor *one = jg_scalar(jg_dtype_of(step), 1.0);
    return one ? jg_add_(step, one) : -1;
}

/* A number that depends on the step count (bias corrections, Adagrad's
 * clr).  Eager: a double computed from step.item(), as PyTorch's Python
 * floats.  While tracing, reading the count would break the graph: t is a
 * 0-d f64 tensor computed by graph ops from the count tensor instead, the
 * same libm functions (pow, sqrt) and operations in the same order, so it
 * holds the same double at run time. */
typedef struct {
    double v;
    jg_tensor *t; /* NULL: v holds it */
} scal;

static jg_tensor *f64(double v) {
    return jg_scalar(JG_F64, v);
}

/* The count as a double (step_t.item()), as a number or as a tensor. */
static int step_count(jg_tensor *step, scal *out) {
    out->v = 0;
    if (jg_tracing()) {
        out->t = jg_to_dtype(step, JG_F64);
        return out->t ? 0 : -1;
    }
    /* a NaN count (a loaded state) is no error: PyTorch's update then
     * makes the parameter NaN (jg_item cannot fail: one float element) */
    out->t = NULL;
    out->v = jg_item(step);
    return 0;
}

static scal neg_s(scal s) {
    return s.t ? (scal){0, jg_neg(s.t)} : (scal){-s.v, NULL};
}

/* x * s for a Python scalar s: the kernel converts s to x's dtype first
 * (MUL_SCALAR's a * (T)s); a tensor s is converted the same way. */
static jg_tensor *mul_s(jg_tensor *x, scal s) {
    if (!s.t)
        return jg_mul_scalar(x, s.v);
    return x ? jg_mul(x, jg_to_dtype(s.t, jg_dtype_of(x))) : NULL;
}

/* x / s: div_scalar's reciprocal in x's dtype, then the product */
static jg_tensor *div_s(jg_tensor *x, scal s) {
    if (!s.t)
        return div_scalar(x, s.v);
    if (!x)
        return NULL;
    jg_dtype d = jg_dtype_of(x);
    return jg_mul(x, jg_div(jg_scalar(d, 1.0), jg_to_dtype(s.t, d)));
}

/* addcdiv_ with a step-dependent value */
static int addcdiv_s_(jg_tensor *x, jg_tensor *a, jg_tensor *b, scal v) {
    jg_tensor *t = jg_div(mul_s(a, v), b);
    return t ? jg_add_(x, t) : -1;
}

static jg_tensor *new_state(jg_tensor *like, double value) {
    return jg_full(jg_dtype_of(like), jg_ndim(like), jg_shape(like), value);
}

/* Creates the missing state (kept out of the caller's scope: the state
 * array owns it). */
static int init_state(jg_optim_kind kind, const jg_optim_hparams *h, jg_tensor *param,
                      jg_tensor **state) {
    for (int i = 0; state_names[kind][i]; i++) {
        if (state[i])
            continue;
        const char *name = state_names[kind][i];
        jg_tensor *t = NULL;
        if (!strcmp(name, "step"))
            t = jg_scalar(JG_F32, 0.0);
        else if (!strcmp(name, "sum"))
            t = new_state(param, h->initial_accumulator_value);
        else if (kind == JG_OPTIM_SGD)
            continue; /* the first step's gradient becomes the buffer */
        else if (!strcmp(name, "max_exp_avg_sq") && !h->amsgrad)
            continue;
        else if (kind == JG_OPTIM_RMSPROP && !strcmp(name, "momentum_buffer") && !(h->momentum > 0))
            continue;
        else if (kind == JG_OPTIM_RMSPROP && !strcmp(name, "grad_avg") && !h->centered)
            continue;
        else
            t = new_state(param, 0.0);
        if (!t)
            return -1;
        state[i] = jg_keep(t);
    }
    return 0;
}

/* Whether a step would create state (init_state, or SGD's momentum buffer). */
static bool state_missing(jg_optim_kind kind, const jg_optim_hparams *h, jg_tensor **state) {
    for (int i = 0; state_names[kind][i]; i++) {
        const char *name = state_names[kind][i];
        if (state[i] || (!strcmp(name, "max_exp_avg_sq") && !h->amsgrad) ||
            (kind == JG_OPTIM_RMSPROP && !strcmp(name, "momentum_buffer") && !(h->momentum > 0)) ||
            (kind == JG_OPTIM_RMSPROP && !strcmp(name, "grad_avg") && !h->centered) ||
            (kind == JG_OPTIM_SGD && h->momentum == 0))
            continue;
        return true;
    }
    return false;
}

static int sgd(const jg_optim_hparams *h, jg_tensor *param, jg_tensor *d_p, jg_tensor **state) {
    if (h->weight_decay != 0)
        d_p = add_alpha(d_p, param, h->weight_decay);
    if (h->momentum != 0) {
        jg_tensor *buf = state[0];
        if (!buf) {
            buf = jg_clone(d_p);
            if (!buf)
                return -1;
            state[0] = jg_keep(buf);
        } else if (jg_mul_scalar_(buf, h->momentum) < 0 ||
                   add_alpha_(buf, d_p, 1 - h->dampening) < 0) {
            return -1;
        }
        d_p = h->nesterov ? add_alpha(d_p, buf, h->momentum) : buf;
    }
    return d_p ? add_alpha_(param, d_p, -h->lr) : -1;
}

/* Adam's step_size = lr / (1 - beta1 ** step) and
 * bias_correction2_sqrt = sqrt(1 - beta2 ** step) */
static int adam_scalars(const jg_optim_hparams *h, scal step, scal *step_size,
                        scal *bias_correction2_sqrt) {
    if (!step.t) {
        double ss, bc2s;
        jg_adam_bias_scalars(h->lr, h->beta1, h->beta2, step.v, &ss, &bc2s);
        *step_size = (scal){ss, NULL};
        *bias_correction2_sqrt = (scal){bc2s, NULL};
        return 0;
    }
    jg_tensor *bias_correction1 = jg_sub(f64(1), jg_pow(f64(h->beta1), step.t));
    jg_tensor *bias_correction2 = jg_sub(f64(1), jg_pow(f64(h->beta2), step.t));
    *step_size = (scal){0, jg_div(f64(h->lr), bias_correction1)};
    *bias_correction2_sqrt = (scal){0, jg_sqrt(bias_correction2)};
    return step_size->t && bias_correction2_sqrt->t ? 0 : -1;
}

/* The numbers of the eager fused update (adam_fused.c): those the
 * composed ops below receive, the division by bias_correction2_sqrt as
 * div_scalar's reciprocal in the tensors' dtype. */
static jg_adam_fused_args fused_args(bool decoupled, const jg_optim_hparams *h, jg_dtype d,
                                     double step_size, double bias_correction2_sqrt) {
    jg_adam_fused_args a = {
        .decoupled = decoupled,
        .maximize = h->maximize,
        .weight_decay = !decoupled && h->weight_decay != 0,
        .decay = 1 - h->lr * h->weight_decay,
        .wd = h->weight_decay,
        .beta1 = h->beta1,
        .one_minus_beta1 = 1 - h->beta1,
        .beta2 = h->beta2,
        .one_minus_beta2 = 1 - h->beta2,
        .eps = h->eps,
    };
    jg_adam_fused_scalars(&a, d, step_size, bias_correction2_sqrt);
    return a;
}

/* grad is the parameter's gradient as given (maximize not yet applied). */
static int adam(bool decoupled, const jg_optim_hparams *h, jg_tensor *param, jg_tensor *grad,
                jg_tensor **state) {
    jg_tensor *exp_avg = state[1], *exp_avg_sq = state[2];
    /* (traced: the graph negates first, as it always has) */
    bool negated = h->maximize && jg_tracing();
    if (negated && !(grad = jg_neg(grad)))
        return -1;
    scal step;
    if (bump_step(state[0]) < 0 || step_count(state[0], &step) < 0)
        return -1;
    scal step_size, bias_correction2_sqrt;
    if (!step.t) {
        /* eager: one pass instead of the ops below, same bits */
        if (adam_scalars(h, step, &step_size, &bias_correction2_sqrt) < 0)
            return -1;
        jg_adam_fused_args a =
            fused_args(decoupled, h, jg_dtype_of(param), step_size.v, bias_correction2_sqrt.v);
        if (jg_adam_fused_(param, grad, exp_avg, exp_avg_sq, h->amsgrad ? state[3] : NULL, &a))
            return 0;
    }
    if (step.t && !h->amsgrad && jg_adam_fused_enabled() &&
        jg_dtype_of(grad) == jg_dtype_of(param) &&
        (jg_dtype_of(param) == JG_F32 || jg_dtype_of(param) == JG_F64) &&
        jg_ndim(grad) == jg_ndim(param) &&
        !memcmp(jg_shape(grad), jg_shape(param), sizeof(int64_t) * (size_t)jg_ndim(param))) {
        /* traced: two nodes (adam_moments, adam_update) instead of the ops below, same bits;
         * adam_update derives the bias corrections from the count itself */
        jg_adam_fused_args a = fused_args(decoupled, h, jg_dtype_of(param), 0, 1);
        a.maximize = false; /* negated above */
        a.lr = h->lr;
        return jg_adam_step_traced_(param, grad, exp_avg, exp_avg_sq, state[0], &a);
    }
    if (h->maximize && !negated && !(grad = jg_neg(grad)))
        return -1;
    if (decoupled) {
        if (jg_mul_scalar_(param, 1 - h->lr * h->weight_decay) < 0)
            return -1;
    } else if (h->weight_decay != 0) {
        grad = add_alpha(grad, param, h->weight_decay);
    }
    if (!grad || jg_mul_scalar_(exp_avg, h->beta1) < 0 ||
        add_alpha_(exp_avg, grad, 1 - h->beta1) < 0 || jg_mul_scalar_(exp_avg_sq, h->beta2) < 0 ||
        addcmul_(exp_avg_sq, grad, grad, 1 - h->beta2) < 0)
        return -1;
    if (adam_scalars(h, step, &step_size, &bias_correction2_sqrt) < 0)
        return -1;
    jg_tensor *sq = exp_avg_sq;
    if (h->amsgrad) {
        /* torch.maximum(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq):
         * a NaN on either side wins */
        jg_tensor *m = state[3], *b = exp_avg_sq;
        jg_tensor *mx = jg_where(jg_ne(b, b), b, jg_where(jg_lt(m, b), b, m));
        if (!mx || jg_copy_(m, mx) < 0)
            return -1;
        sq = m;
    }
    jg_tensor *denom = div_s(jg_sqrt(sq), bias_correction2_sqrt);
    denom = jg_add_scalar(denom, h->eps);
    return denom ? addcdiv_s_(param, exp_avg, denom, neg_s(step_size)) : -1;
}

static int adagrad(const jg_optim_hparams *h, jg_tensor *param, jg_tensor *grad,
                   jg_tensor **state) {
    jg_tensor *state_sum = state[1];
    scal step;
    if (bump_step(state[0]) < 0 || step_count(state[0], &step) < 0)
        return -1;
    if (h->weight_decay != 0)
        grad = add_alpha(grad, param, h->weight_decay);
    /* clr = lr / (1 + (step - 1) * lr_decay) */
    scal clr = {0, NULL};
    if (step.t) {
        clr.t =
            jg_div(f64(h->lr), jg_add(f64(1), jg_mul(jg_sub(step.t, f64(1)), f64(h->lr_decay))));
        if (!clr.t)
            return -1;
    } else {
        clr.v = h->lr / (1 + (step.v - 1) * h->lr_decay);
    }
    if (!grad || addcmul_(state_sum, grad, grad, 1) < 0)
        return -1;
    jg_tensor *std = jg_add_scalar(jg_sqrt(state_sum), h->eps);
    return std ? addcdiv_s_(param, grad, std, neg_s(clr)) : -1;
}

static int rmsprop(const jg_optim_hparams *h, jg_tensor *param, jg_tensor *grad,
                   jg_tensor **state) {
    jg_tensor *square_avg = state[1];
    if (bump_step(state[0]) < 0) /* PyTorch counts; the update does not read it */
        return -1;
    if (h->weight_decay != 0)
        grad = add_alpha(grad, param, h->weight_decay);
    if (!grad || jg_mul_scalar_(square_avg, h->alpha) < 0 ||
        addcmul_(square_avg, grad, grad, 1 - h->alpha) < 0)
        return -1;
    jg_tensor *avg;
    if (h->centered) {
        jg_tensor *grad_avg = state[3];
        if (jg_mul_scalar_(grad_avg, h->alpha) < 0 || add_alpha_(grad_avg, grad, 1 - h->alpha) < 0)
            return -1;
        /* square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_() */
        avg = jg_sqrt(jg_add(square_avg, jg_mul(jg_mul_scalar(grad_avg, -1), grad_avg)));
    } else {
        avg = jg_sqrt(square_avg);
    }
    avg = jg_add_scalar(avg, h->eps);
    if (!avg)
        return -1;
    if (h->momentum > 0) {
        jg_tensor *buf = state[2];
        if (jg_mul_scalar_(buf, h->momentum) < 0 || addcdiv_(buf, grad, avg, 1) < 0)
            return -1;
        return add_alpha_(param, buf, -h->lr);
    }
    return addcdiv_(param, grad, avg, -h->lr);
}

/* PyTorch 1.13's _single_tensor_adadelta, op for op */
static int adadelta(const jg_optim_hparams *h, jg_tensor *param, jg_tensor *grad,
                    jg_tensor **state) {
    jg_tensor *square_avg = state[1], *acc_delta = state[2];
    if (bump_step(state[0]) < 0) /* PyTorch counts; the update does not read it */
        return -1;
    if (h->weight_decay != 0)
        grad = add_alpha(grad, param, h->weight_decay);
    if (!grad || jg_mul_scalar_(square_avg, h->rho) < 0 ||
        addcmul_(square_avg, grad, grad, 1 - h->rho) < 0)
        return -1;
    /* std = (square_avg + eps).sqrt(); delta = (acc_delta + eps).sqrt() / std * grad */
    jg_tensor *std = jg_sqrt(jg_add_scalar(square_avg, h->eps));
    jg_tensor *delta = jg_mul(jg_div(jg_sqrt(jg_add_scalar(acc_delta, h->eps)), std), grad);
    if (!delta || jg_mul_scalar_(acc_delta, h->rho) < 0 ||
        addcmul_(acc_delta, delta, delta, 1 - h->rho) < 0)
        return -1;
    return add_alpha_(param, delta, -h->lr);
}

static int check_param(const char *what, jg_tensor *param) {
    if (!param)
        return jg_set_error("%s: parameter is NULL", what);
    if (!is_float(jg_dtype_of(param)))
        return jg_set_error("%s: can only optimize floating point tensors, got %s", what,
                            jg_dtype_name(jg_dtype_of(param)));
    if (!jg_is_leaf(param))
        return jg_set_error("can't optimize a non-leaf Tensor");
    return 0;
}

int jg_optim_update(jg_optim_kind kind, const jg_optim_hparams *h, jg_tensor *param,
                    jg_tensor *grad, jg_tensor **state) {
    if (jg_tracing() && state && state_missing(kind, h, state) && jg_hooks.on_symbolic_read &&
        jg_hooks.on_symbolic_read(NULL, "an optimizer step that creates its state (it runs "
                                        "eagerly)")) {
        /* a program run in pieces: the piece before ran, this first step
         * runs here, eagerly, and the next piece goes on */
        uint64_t saved = jg_hooks.trace_suspend();
        int rc = jg_optim_update(kind, h, param, grad, state);
        jg_hooks.trace_resume(saved);
        return rc;
    }
    if (jg_tracing() && state && state_missing(kind, h, state)) {
        /* The first step creates state that outlives the program: a tensor
         * made while tracing must not reach it.  The call runs eagerly
         * (which creates the state) and the next call is traced again; the
         * update itself is in-place ops on captured tensors, traced as
         * mutations the compiled call writes back. */
        static const char why[] = "an optimizer step inside a compiled program creates its state "
                                  "(the first step): this call runs eagerly, the next one is "
                                  "traced";
        jg_trace_note_retry_break("%s", why);
        return jg_set_error("%s", why);
    }
    if (check_hparams(kind, h) < 0 || check_param("jg_optim_update", param) < 0)
        return -1;
    if (!grad || !state)
        return jg_set_error("jg_optim_update: %s is NULL", grad ? "state" : "grad");
    char pd[64], gd[64];
    if (!same_geometry(param, grad)) {
        jg_describe(param, pd, sizeof pd);
        jg_describe(grad, gd, sizeof gd);
        return jg_set_error("jg_optim_update: gradient %s does not match parameter %s", gd, pd);
    }
    for (int i = 0; state_names[kind][i]; i++) {
        jg_tensor *s = state[i];
        bool step = !strcmp(state_names[kind][i], "step");
        if (s &&
            (step ? jg_numel(s) != 1 || !is_float(jg_dtype_of(s)) : !same_geometry(param, s))) {
            jg_describe(param, pd, sizeof pd);
            jg_describe(s, gd, sizeof gd);
            return jg_set_error("jg_optim_update: state '%s' %s does not fit parameter %s",
                                state_names[kind][i], gd, pd);
        }
    }
    bool was = jg_set_grad_enabled(false);
    jg_scope_push();
    int rc = init_state(kind, h, param, state);
    if (rc == 0) {
        /* (Adam negates it itself, in its fused loop when it can) */
        bool adam_kind = kind == JG_OPTIM_ADAM || kind == JG_OPTIM_ADAMW;
        if (h->maximize && !adam_kind)
            grad = jg_neg(grad);
        if (!grad)
            rc = -1;
    }
    if (rc == 0) {
        switch (kind) {
        case JG_OPTIM_SGD:
            rc = sgd(h, param, grad, state);
            break;
        case JG_OPTIM_ADAM:
        case JG_OPTIM_ADAMW:
            rc = adam(kind == JG_OPTIM_ADAMW, h, param, grad, state);
            break;
        case JG_OPTIM_ADAGRAD:
            rc = adagrad(h, param, grad, state);
            break;
        case JG_OPTIM_RMSPROP:
            rc = rmsprop(h, param, grad, state);
            break;
        case JG_OPTIM_ADADELTA:
            rc = adadelta(h, param, grad, state);
            break;
        }
    }
    jg_scope_pop();
    jg_set_grad_enabled(was);
    return rc < 0 ? -1 : 0;
}

/* ---------------------------------------------------------- the object */

static int check_group(const jg_optim *opt, int group) {
    if (!opt)
        return jg_set_error("jg_optim: optimizer is NULL");
    if (group < 0 || group >= opt->n_groups)
        return jg_set_error("jg_optim: no parameter group %d (the optimizer has %d)", group,
                            opt->n_groups);
    return 0;
}

static bool seen(const jg_optim *opt, jg_tensor *p) {
    for (int g = 0; g < opt->n_groups; g++)
        for (int i = 0; i < opt->groups[g].n; i++)
            if (opt->groups[g].params[i].param == p)
                return true;
    return false;
}

int jg_optim_add_param_group(jg_optim *opt, jg_tensor *const *params, int n,
                             const jg_optim_hparams *hparams) {
    if (!opt)
        return jg_set_error("jg_optim_add_param_group: optimizer is NULL");
    if (!hparams && opt->n_groups == 0)
        return jg_set_error("jg_optim_add_param_group: hparams is NULL");
    /* a copy: growing the group array below may move the first group's */
    const jg_optim_hparams hcopy = hparams ? *hparams : opt->groups[0].h, *h = &hcopy;
    if (check_hparams(opt->kind, h) < 0)
        return -1;
    if (n <= 0 || !params)
        return jg_set_error("optimizer got an empty parameter list");
    for (int i = 0; i < n; i++) {
        if (check_param("jg_optim", params[i]) < 0)
            return -1;
        for (int j = 0; j < i; j++)
            if (params[j] == params[i])
                return jg_set_error("optimizer contains a parameter group with duplicate "
                                    "parameters (parameter %d repeats parameter %d)",
                                    i, j);
        if (seen(opt, params[i]))
            return jg_set_error("some parameters appear in more than one parameter group");
    }
    optim_group *groups = realloc(opt->groups, sizeof *groups * (size_t)(opt->n_groups + 1));
    if (!groups)
        return jg_set_error("jg_optim: out of memory");
    opt->groups = groups;
    optim_param *ps = calloc((size_t)n, sizeof *ps);
    if (!ps)
        return jg_set_error("jg_optim: out of memory");
    jg_tensor *hp = jg_keep(jg_full(JG_F64, 1, (const int64_t[]){HP_FIELDS}, 0.0));
    if (!hp) {
        free(ps);
        return -1;
    }
    pack_hparams(h, hp);
    for (int i = 0; i < n; i++)
        ps[i].param = jg_retain(params[i]);
    groups[opt->n_groups] = (optim_group){*h, ps, n, hp};
    return opt->n_groups++;
}

jg_optim *jg_optim_new(jg_optim_kind kind, jg_tensor *const *params, int n,
                       const jg_optim_hparams *hparams) {
    if (check_hparams(kind, hparams) < 0)
        return NULL;
    jg_optim *opt = calloc(1, sizeof *opt);
    if (!opt) {
        jg_set_error("jg_optim: out of memory");
        return NULL;
    }
    opt->kind = kind;
    if (jg_optim_add_param_group(opt, params, n, hparams) < 0) {
        free(opt);
        return NULL;
    }
    return opt;
}

jg_optim *jg_optim_sgd(jg_tensor *const *params, int n, double lr, double momentum,
                       double dampening, double weight_decay, bool nesterov) {
    jg_optim_hparams h = jg_optim_defaults(JG_OPTIM_SGD);
    h.lr = lr;
    h.momentum = momentum;
    h.dampening = dampening;
    h.weight_decay = weight_decay;
    h.nesterov = nesterov;
    return jg_optim_new(JG_OPTIM_SGD, params, n, &h);
}

static jg_optim *adam_like(jg_optim_kind kind, jg_tensor *const *params, int n, double lr,
                           double beta1, double beta2, double eps, double weight_decay) {
    jg_optim_hparams h = jg_optim_defaults(kind);
    h.lr = lr;
    h.beta1 = beta1;
    h.beta2 = beta2;
    h.eps = eps;
    h.weight_decay = weight_decay;
    return jg_optim_new(kind, params, n, &h);
}

jg_optim *jg_optim_adam(jg_tensor *const *params, int n, double lr, double beta1, double beta2,
                        double eps, double weight_decay) {
    return adam_like(JG_OPTIM_ADAM, params, n, lr, beta1, beta2, eps, weight_decay);
}

jg_optim *jg_optim_adamw(jg_tensor *const *params, int n, double lr, double beta1, double beta2,
                         double eps, double weight_decay) {
    return adam_like(JG_OPTIM_ADAMW, params, n, lr, beta1, beta2, eps, weight_decay);
}

jg_optim *jg_optim_adagrad(jg_tensor *const *params, int n, double lr, double lr_decay,
                           double weight_decay, double initial_accumulator_value, double eps) {
    jg_optim_hparams h = jg_optim_defaults(JG_OPTIM_ADAGRAD);
    h.lr = lr;
    h.lr_decay = lr_decay;
    h.weight_decay = weight_decay;
    h.initial_accumulator_value = initial_accumulator_value;
    h.eps = eps;
    return jg_optim_new(JG_OPTIM_ADAGRAD, params, n, &h);
}

jg_optim *jg_optim_rmsprop(jg_tensor *const *params, int n, double lr, double alpha, double eps,
                           double weight_decay, double momentum, bool centered) {
    jg_optim_hparams h = jg_optim_defaults(JG_OPTIM_RMSPROP);
    h.lr = lr;
    h.alpha = alpha;
    h.eps = eps;
    h.weight_decay = weight_decay;
    h.momentum = momentum;
    h.centered = centered;
    return jg_optim_new(JG_OPTIM_RMSPROP, params, n, &h);
}

jg_optim *jg_optim_adadelta(jg_tensor *const *params, int n, double lr, double rho, double eps,
                            double weight_decay) {
    jg_optim_hparams h = jg_optim_defaults(JG_OPTIM_ADADELTA);
    h.lr = lr;
    h.rho = rho;
    h.eps = eps;
    h.weight_decay = weight_decay;
    return jg_optim_new(JG_OPTIM_ADADELTA, params, n, &h);
}

void jg_optim_free(jg_optim *opt) {
    if (!opt)
        return;
    for (int g = 0; g < opt->n_groups; g++) {
        for (int i = 0; i < opt->groups[g].n; i++) {
            optim_param *p = &opt->groups[g].params[i];
            jg_release(p->param);
            for (int s = 0; s < MAX_STATE; s++)
                if (p->state[s])
                    jg_release(p->state[s]);
        }
        free(opt->groups[g].params);
        jg_release(opt->groups[g].hp);
    }
    free(opt->groups);
    free(opt);
}

jg_optim_kind jg_optim_kind_of(const jg_optim *opt) {
    return opt ? opt->kind : JG_OPTIM_SGD;
}

int jg_optim_n_groups(const jg_optim *opt) {
    return opt ? opt->n_groups : 0;
}

int jg_optim_group_size(const jg_optim *opt, int group) {
    if (check_group(opt, group) < 0)
        return -1;
    return opt->groups[group].n;
}

static optim_param *param_at(const jg_optim *opt, int group, int i) {
    if (check_group(opt, group) < 0)
        return NULL;
    if (i < 0 || i >= opt->groups[group].n) {
        jg_set_error("jg_optim: no parameter %d in group %d (it has %d)", i, group,
                     opt->groups[group].n);
        return NULL;
    }
    return &opt->groups[group].params[i];
}

jg_tensor *jg_optim_param(const jg_optim *opt, int group, int i) {
    optim_param *p = param_at(opt, group, i);
    return p ? p->param : NULL;
}

int jg_optim_get_hparams(const jg_optim *opt, int group, jg_optim_hparams *out) {
    if (check_group(opt, group) < 0)
        return -1;
    if (!out)
        return jg_set_error("jg_optim_get_hparams: out is NULL");
    *out = opt->groups[group].h;
    return 0;
}

int jg_optim_set_hparams(jg_optim *opt, int group, const jg_optim_hparams *hparams) {
    if (check_group(opt, group) < 0 || check_hparams(opt->kind, hparams) < 0)
        return -1;
    opt->groups[group].h = *hparams;
    pack_hparams(hparams, opt->groups[group].hp);
    return 0;
}

double jg_optim_get_lr(const jg_optim *opt, int group) {
    if (check_group(opt, group) < 0)
        return NAN;
    return opt->groups[group].h.lr;
}

int jg_optim_set_lr(jg_optim *opt, int group, double lr) {
    if (check_group(opt, group) < 0)
        return -1;
    jg_optim_hparams h = opt->groups[group].h;
    h.lr = lr;
    return jg_optim_set_hparams(opt, group, &h);
}

int jg_optim_step(jg_optim *opt) {
    if (!opt)
        return jg_set_error("jg_optim_step: optimizer is NULL");
    for (int g = 0; g < opt->n_groups; g++) {
        optim_group *grp = &opt->groups[g];
        if (jg_tracing() && jg_trace_guard_value(grp->hp) < 0)
            return -1;
        for (int i = 0; i < grp->n; i++) {
            jg_tensor *grad = jg_grad(grp->params[i].param);
            if (grad && jg_optim_update(opt->kind, &grp->h, grp->params[i].param, grad,
                                        grp->params[i].state) < 0)
                return -1;
        }
    }
    return 0;
}

int jg_optim_zero_grad(jg_optim *opt, bool set_to_none) {
    if (!opt)
        return jg_set_error("jg_optim_zero_grad: optimizer is NULL");
    for (int g = 0; g < opt->n_groups; g++) {
        for (int i = 0; i < opt->groups[g].n; i++) {
            jg_tensor *p = opt->groups[g].params[i].param;
            jg_tensor *grad = jg_grad(p);
            if (!grad)
                continue;
            if (set_to_none) {
                if (jg_set_grad(p, NULL) < 0) /* (refused while a program is traced) */
                    return -1;
                continue;
            }
            /* PyTorch detaches a grad with history first (requires_grad_(False)
             * on a leaf grad, a detached copy otherwise), then zeroes it. */
            if (jg_grad_fn_name(grad)) {
                jg_tensor *d = jg_keep(jg_detach(grad));
                int rc = d ? jg_set_grad(p, d) : -1;
                if (d)
                    jg_release(d);
                if (rc < 0)
                    return -1;
                grad = jg_grad(p);
            } else {
                jg_set_requires_grad(grad, false);
            }
            bool was = jg_set_grad_enabled(false);
            int rc = jg_zero_(grad);
            jg_set_grad_enabled(was);
            if (rc < 0)
                return -1;
        }
    }
    return 0;
}

jg_tensor *jg_optim_state(const jg_optim *opt, int group, int i, const char *name) {
    optim_param *p = param_at(opt, group, i);
    if (!p)
        return NULL;
    int s = state_index(opt->kind, name);
    if (s < 0) {
        jg_set_error(
            "jg_optim_state: %s has no state '%s'",
            (const char *[]){"SGD", "Adam", "AdamW", "Adagrad", "RMSprop", "Adadelta"}[opt->kind],
            name ? name : "(null)");
        return NULL;
    }
    return p->state[s];
}

int jg_optim_set_state(jg_optim *opt, int group, int i, const char *name, jg_tensor *value) {
    optim_param *p = param_at(opt, group, i);
    if (!p)
        return -1;
    int s = state_index(opt->kind, name);
    if (s < 0) {
        jg_optim_state(opt, group, i, name); /* sets the message */
        return -1;
    }
    if (!value) {
        if (p->state[s])
            jg_release(p->state[s]);
        p->state[s] = NULL;
        return 0;
    }
    bool step = !strcmp(name, "step");
    char pd[64], vd[64];
    if (step ? jg_numel(value) != 1
             : jg_ndim(value) != jg_ndim(p->param) ||
                   memcmp(jg_shape(value), jg_shape(p->param),
                          sizeof(int64_t) * (size_t)jg_ndim(value))) {
        jg_describe(p->param, pd, sizeof pd);
        jg_describe(value, vd, sizeof vd);
        return jg_set_error("jg_optim_set_state: state '%s' %s does not fit parameter %s", name, vd,
                            pd);
    }
    /* A copy, so that steps never write into the caller's tensor; "step"
     * stays f32 as PyTorch keeps it. */
    jg_tensor *copy;
    if (step) {
        copy = jg_scalar(JG_F32, jg_item(value));
    } else {
        bool was = jg_set_grad_enabled(false);
        copy = jg_tensor_new(jg_dtype_of(p->param), jg_ndim(value), jg_shape(value), NULL);
        if (copy && jg_copy_(copy, value) < 0) {
            jg_release(jg_keep(copy));
            copy = NULL;
        }
        jg_set_grad_enabled(was);
    }
    if (!copy)
        return -1;
    copy = jg_keep(copy);
    if (p->state[s])
        jg_release(p->state[s]);
    p->state[s] = copy;
    return 0;
}
