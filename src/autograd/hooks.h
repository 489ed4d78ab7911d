/* Gradient hooks (autograd/hooks.c): what the engine calls. */
#ifndef JG_AUTOGRAD_HOOKS_H
#define JG_AUTOGRAD_HOOKS_H

#include <jitgrad.h>
#include <stdbool.h>

enum {
    JG_HOOK_READY = 1,
    JG_HOOK_POST = 2,
    JG_HOOK_EXPECTED = 3,
    JG_HOOK_TENSOR = 4, /* jg_register_tensor_hook */
    JG_HOOK_RETAIN = 5  /* jg_retain_grad */
};

/* Whether any tensor has hooks (the engine skips its bookkeeping if not). */
bool jg_grad_hooks_any(void);
/* Whether any node has hooks (a non-leaf's tensor hooks or retain_grad). */
bool jg_node_hooks_any(void);
/* Whether t has a hook of this kind. */
bool jg_grad_hooks_has(const jg_tensor *t, int kind);
/* Runs t's hooks of one kind (grad: the would-be gradient, for READY).
 * 0, or -1 at the first that fails. */
int jg_grad_hooks_run(jg_tensor *t, int kind, jg_tensor *grad);

/* Whether owner (a leaf, or a node: a non-leaf's hooks live on its
 * grad_fn) has tensor hooks or a retain_grad. */
bool jg_tensor_hooks_has(const void *owner);
/* Runs them for the gradient *grad (owned, replaced by what the hooks
 * return) of output nr (0 for a leaf); a retain_grad calls retain(ctx, t,
 * g) with the gradient it saw (NULL retain: those are skipped).  0 or -1. */
int jg_tensor_hooks_run(const void *owner, int nr, jg_tensor **grad,
                        int (*retain)(void *ctx, jg_tensor *t, jg_tensor *g), void *ctx);
/* Moves each retain_grad whose tensor has another grad_fn now (an in-place
 * op) to that node. */
void jg_retain_grad_relocate(void);
/* A node with hooks dies (autograd/node.c). */
void jg_node_hooks_free(const void *node);

#endif
