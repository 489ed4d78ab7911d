/* Custom functions shared by the eager and compiled aliasing tests. */
#ifndef JG_TESTUTIL_FNS_H
#define JG_TESTUTIL_FNS_H

#include <jitgrad.h>

/* The seed program's function: out = q * (k + v); args: bool mask_v_grad.
 * backward: (g*(k+v), g*q + g*q, NULL) with the mask, else (g*(k+v), g*q,
 * g*q). */
extern const jg_function tf_myfn;

/* out = a * b; args: tf_mul_cfg.  backward: (b*g, a*g) with either slot
 * optionally NULL. */
typedef struct {
    bool null0, null1;
    int extra_count; /* returns n_in + extra_count */
} tf_mul_cfg;
extern const jg_function tf_mul;
int tf_mul_forward(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out);
int tf_mul_backward(jg_ctx *ctx, int n_out, jg_tensor *const *g, int n_in, jg_tensor **din);

/* Programs shared by the compile tests (jg_program_fn):
 * tf_mlp: log(relu(tanh(x @ W1 + b1) @ W2) + 1).mean(), inputs x, W1, b1, W2;
 * tf_ce: cross_entropy(logits * w, target) + softmax(logits, 1)[:, 0].sum();
 * tf_bcast: ((a + b) * c - a / (b*b + 1)).exp().sum(), a [3,1], b [4], c [];
 * tf_qk: (q * (k + k)).sum(), inputs q, k;
 * tf_seed: tf_myfn(q, k, k), inputs q, k, args the bool mask_v_grad;
 * tf_all_slots: tf_myfn(x, x, x), input x, args the bool mask_v_grad. */
int tf_mlp(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out);
int tf_ce(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out);
int tf_bcast(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out);
int tf_qk(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out);
int tf_seed(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out);
int tf_all_slots(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out);

/* Applies fn to n inputs with args and returns its first output (NULL on
 * error). */
jg_tensor *tf_apply1(const jg_function *fn, int n, jg_tensor *const *in, const void *args,
                     size_t size);

#endif
