/* The eager Adam/AdamW update in one pass (adam_fused.c). */
#ifndef JG_OPTIM_ADAM_FUSED_H
#define JG_OPTIM_ADAM_FUSED_H

#include <stdbool.h>

#include <jitgrad.h>

/* The numbers of one update, as optim.c's composed ops receive them: each
 * is converted to the tensors' dtype by the kernel, as the scalar ops do. */
typedef struct {
    bool decoupled;    /* AdamW: p *= decay first */
    bool maximize;     /* the gradient negated */
    bool weight_decay; /* Adam: g += p * wd (when wd != 0) */
    double decay;      /* 1 - lr * weight_decay (AdamW) */
    double wd;         /* weight_decay (Adam) */
    double beta1, one_minus_beta1, beta2, one_minus_beta2;
    double rbc2; /* the reciprocal of sqrt(bias_correction2), as div_scalar rounds it */
    double eps;
    double neg_step_size; /* -lr / bias_correction1 */
    double lr;            /* a traced step's adam_update derives the two above from it */
} jg_adam_fused_args;

/* Runs the update on param, exp_avg, exp_avg_sq (and max_exp_avg_sq when
 * not NULL) with the bits of optim.c's composed ops, if every tensor is
 * a dense, untraced f32 or f64 tensor of one shape and dtype and no two
 * share memory; returns false (nothing written) otherwise. */
bool jg_adam_fused_(jg_tensor *param, jg_tensor *grad, jg_tensor *exp_avg, jg_tensor *exp_avg_sq,
                    jg_tensor *max_exp_avg_sq, const jg_adam_fused_args *args);

/* Sets a's rbc2 and neg_step_size from the step's numbers, as the
 * composed ops round them (the division by bias_correction2_sqrt is
 * div_scalar's multiplication by its reciprocal in the tensors' dtype d). */
void jg_adam_fused_scalars(jg_adam_fused_args *a, jg_dtype d, double step_size,
                           double bias_correction2_sqrt);

/* Adam's step_size = lr / (1 - beta1 ** step) and bias_correction2_sqrt =
 * sqrt(1 - beta2 ** step), in double with libm's pow, as PyTorch's Python
 * floats: the eager step and the adam_update kernel both call this, so a
 * compiled step has the eager step's numbers. */
void jg_adam_bias_scalars(double lr, double beta1, double beta2, double step, double *step_size,
                          double *bias_correction2_sqrt);

/* A traced step (a compiled whole training step): the adam_moments and
 * adam_update graph nodes (adam_fused.c), whose results param, exp_avg and
 * exp_avg_sq take as their values (untraced: copied into them).  step is the
 * parameter's step count after this step's increment (a one-element float
 * tensor): adam_update derives step_size and bias_correction2_sqrt from it
 * and args->lr; args' other numbers become the nodes' attributes (its
 * maximize must be false: a traced step negates the gradient as an op
 * first).  Returns 0 or -1. */
int jg_adam_step_traced_(jg_tensor *param, jg_tensor *grad, jg_tensor *exp_avg,
                         jg_tensor *exp_avg_sq, jg_tensor *step, const jg_adam_fused_args *args);

/* The numbers an adam_moments / adam_update node's attributes hold (rbc2, neg_step_size
 * and maximize left zero), for its kernel and the graph printer. */
struct jg_attrs;
void jg_adam_step_attrs_read(const struct jg_attrs *at, jg_adam_fused_args *a);

/* The c backend's one pass for an adam_moments node and the adam_update
 * node after it (backend/cgen.c, "updates in place"): the new param,
 * exp_avg and exp_avg_sq overwrite the old ones, with the bits the two
 * nodes' kernels give; at are the nodes' attributes, step the update's
 * count.  param, exp_avg and exp_avg_sq are dense and share no memory;
 * grad is dense or column-major (jg_adam_grad_banded).  Returns 0 or -1. */
int jg_adam_step_inplace_(const struct jg_attrs *at, jg_tensor *param, jg_tensor *grad,
                          jg_tensor *exp_avg, jg_tensor *exp_avg_sq, const jg_tensor *step);

/* Whether adam_moments reads the gradient grad where it is, without a
 * dense copy: a column-major matrix it gathers in bands. */
bool jg_adam_grad_banded(const jg_tensor *grad);

/* Whether optim.c takes the fused path when it can (default: yes, unless
 * the environment sets JITGRAD_OPTIM_FUSED=0); the composed path stays
 * callable so tests can compare the two.  Returns the previous setting. */
bool jg_adam_fused_set_enabled(bool on);
bool jg_adam_fused_enabled(void);

#endif
