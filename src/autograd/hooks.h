/* Gradient hooks on leaves (autograd/hooks.c): what the engine calls. */
#ifndef JG_AUTOGRAD_HOOKS_H
#define JG_AUTOGRAD_HOOKS_H

#include <jitgrad.h>
#include <stdbool.h>

enum { JG_HOOK_READY = 1, JG_HOOK_POST = 2, JG_HOOK_EXPECTED = 3 };

/* Whether any tensor has hooks (the engine skips its bookkeeping if not). */
bool jg_grad_hooks_any(void);
/* Whether t has a hook of this kind. */
bool jg_grad_hooks_has(const jg_tensor *t, int kind);
/* Runs t's hooks of one kind (grad: the would-be gradient, for READY).
 * 0, or -1 at the first that fails. */
int jg_grad_hooks_run(jg_tensor *t, int kind, jg_tensor *grad);

#endif
