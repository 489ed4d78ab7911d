/* The backward engine (autograd/engine.c). */
#ifndef JG_AUTOGRAD_ENGINE_H
#define JG_AUTOGRAD_ENGINE_H

#include "core/tensor.h"

/* Runs backward from roots (root_grads may be NULL or hold NULLs for scalar
 * roots).  Without captures, accumulates into leaves' .grad once everything
 * has succeeded.  With captures, writes the gradient reaching each
 * capture[c] into captured[c] (new reference, NULL if none; all NULL on
 * entry) and touches no .grad. */
/* flags: roots with a NULL root_grads entry are reached without a gradient
 * (their nodes run as a node eager reaches with none: a custom function's
 * backward with None) instead of seeded with ones */
#define JG_ENGINE_NO_GRAD_ROOTS 0x100u
int jg_engine_run(int n_roots, jg_tensor *const *roots, jg_tensor *const *root_grads,
                  unsigned flags, int n_capture, jg_tensor *const *capture, jg_tensor **captured);

/* While the engine runs node n's apply: where the gradient n sends along
 * edge k will be added.  *target names the accumulator (equal for edges that
 * add into the same one; NULL: the gradient is dropped) and *acc points at
 * the gradient it holds so far (*acc NULL: empty; acc itself NULL when the
 * accumulator is empty and has no storage yet).  The caller may take that
 * gradient (set *acc = NULL, owning the reference) if what it sends along
 * the edge then includes it, added first: a compiled call sums the
 * contributions of one input inside its graph this way, in the engine's
 * order.  Returns -1 when n is not the node being applied. */
int jg_engine_edge_acc(const jg_node *n, int k, const void **target, jg_tensor ***acc);

/* While the engine runs node n's apply: the .grad of the leaf edge k leads
 * to (borrowed), when n may fold it into what it sends along its edges to
 * that leaf, so that the gradient it sends is the leaf's new .grad, formed
 * as the engine would form it (.grad + this backward's sum, the sum being
 * n's contributions added in edge order).  That saves the engine's pass
 * adding the sum into .grad.  Only where nobody can tell the difference:
 * no other node of this backward sends to the leaf, the leaf holds no
 * gradient of this run yet, .grad is a dense tensor of the leaf's dtype and
 * shape in memory of its own (not a caller's blob) that nothing else
 * references (the new one replaces it), and no code but the library's runs
 * in this backward (no hooks, every node pure, not create_graph, not
 * autograd.grad).  NULL otherwise.  A caller that folds it must call
 * jg_engine_leaf_grad_folded(n, k) before returning. */
jg_tensor *jg_engine_leaf_grad(const jg_node *n, int k);
void jg_engine_leaf_grad_folded(const jg_node *n, int k);

/* How many gradients stored into .grad were copies (the engine could not
 * take the one it had: a view of memory something else holds, a strided
 * tensor, a reference held elsewhere): what the tests read to check that
 * the usual case takes the gradient as it is.  This thread's count. */
int64_t jg_engine_grad_copies(void);

#endif
