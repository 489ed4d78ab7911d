/* What the tracer records about a captured custom function call, beyond the
 * IR's jg_gcustom (it hangs off jg_gcustom.user, in the graph's arena; the
 * call's jg_ctx is jg_gcustom.state, so forward and backward share one ctx as
 * they do in eager mode).
 *
 * A traced call is one JG_GN_CUSTOM node.  Its forward subgraph has one
 * placeholder per SLOT and returns the call's outputs followed by the values
 * the forward saved for backward; the node has the same outputs, so graph
 * autodiff can hand the saved values to the traced backward like any other
 * forward value.
 *
 * Tensors of the program the forward reaches other than as arguments are
 * extra slots after the call's own (jg_custom_info.n_args).
 *
 * An OPAQUE call (a callback read tensor values while traced) has no
 * subgraphs: at run time the interpreter applies the function eagerly to one
 * fresh leaf per slot, and the node's outputs are the call's outputs
 * (without history), the same outputs with the eager history, and the slot
 * leaves.  Its backward half, a node with opaque_backward set, asks the eager
 * engine for the slot leaves' gradients, so the user's backward runs exactly
 * as in eager mode, slot by slot.  Its jg_gcustom.user is NULL or, per slot
 * it asks for, whether that slot must answer NULL (see none_slot). */
#ifndef JG_TRACE_CUSTOM_H
#define JG_TRACE_CUSTOM_H

#include "autograd/function.h"
#include "graph/graph.h"

typedef struct jg_custom_info {
    int n_call_out; /* node outputs [0, n_call_out) are the call's outputs */
    bool *diff;     /* per call output: differentiable (not marked otherwise) */
    int n_saved;    /* the ctx's saved entries */
    int *saved_out; /* per saved entry: its node output index, or -1 (NULL) */
    bool materialize;
    /* tensors the forward made and kept for backward without saving them
     * (in the ctx state, PyTorch's ctx.attr = t), found by tracing the
     * backward: their values in the forward subgraph, and the node outputs
     * (from kept_out on) that carry them to the backward */
    int n_kept;
    int *kept_fval;
    int kept_out;
    /* opaque calls: per slot, whether the backward answered NULL when run
     * once on zeros at trace time (NULL: not known).  Such a slot adds no
     * gradient upstream, as in eager mode; at run time it must answer NULL
     * again. */
    const bool *none_slot;
    /* the call's tensor arguments: slots from n_args on are tensors of the
     * program its forward reached otherwise (an object's field, a closure),
     * lifted so the node can feed them; they get no gradient (forward runs
     * without grad, as in eager mode) */
    int n_args;
    /* From C: where the args bytes hold a lifted tensor's address itself (a
     * pointer-sized field): byte offset and slot.  A replay of the forward
     * (a create_graph rerun) writes the slot's tensor there in a copy of
     * the bytes, as the Python binding rebuilds an object from its lifted
     * slots: the callback reads the rerun's value, and nothing needs to
     * keep the traced call's tensor alive for it. */
    int n_arg_ptrs;
    const int *arg_ptr_off;
    const int *arg_ptr_slot;
} jg_custom_info;

/* Makes sure the tracer's jg_apply hook is installed (it is at load). */
void jg_trace_custom_init(void);

/* Calls of these functions are traced as opaque calls on this thread (the
 * compiler's retry when a call's backward cannot be traced for the output
 * gradients that actually reach it).  The list is borrowed until replaced;
 * the previous one is returned through prev/n_prev so that a nested
 * compile can put it back. */
void jg_trace_custom_force_opaque(const jg_function *const *fns, int n,
                                  const jg_function *const **prev, int *n_prev);

/* Runs ctx's backward callback with `saved` standing in for the tensors the
 * forward saved (one per saved entry, NULL where NULL was saved), inside the
 * innermost trace frame (whose resolver maps the kept tensors).  gin: per slot, borrowed from the
 * current scope.  A read of traced values fails it (-1) after recording a graph break. */
int jg_custom_trace_backward(jg_ctx *ctx, int n_out, const jg_meta *out_meta,
                             jg_tensor *const *gout, jg_tensor *const *saved, jg_tensor **gin);

/* Records the backward half of opaque call `call` into the innermost frame:
 * operands are the arrived output gradients g[k] (NULL: none arrived), the
 * call's outputs with history and its slot leaves (both node outputs of the
 * forward half, given as tensors of this frame).  Per slot that needs a
 * gradient: raw[s] (NULL at run time when the slot answered NULL) and
 * filled[s] (zeros instead of NULL).  Symbolic tensors, borrowed from the
 * current scope; slots needing no gradient get NULL. */
int jg_trace_opaque_backward(const jg_gcustom *call, const bool *slot_needs, int n_out,
                             jg_tensor *const *g, jg_tensor *const *hist, jg_tensor *const *leaves,
                             jg_tensor **raw, jg_tensor **filled);

#endif
