/* Custom differentiable functions (jg_function / jg_apply): the context and
 * the hook the tracer installs to capture calls into a graph. */
#ifndef JG_AUTOGRAD_FUNCTION_H
#define JG_AUTOGRAD_FUNCTION_H

#include "autograd/node.h"

struct jg_ctx {
    const jg_function *fn;
    void *args;
    size_t args_size;
    int n_inputs;
    bool *needs_input_grad; /* per slot */
    jg_meta *in_meta;       /* per slot: what a returned gradient must fit */
    jg_saved *saved;
    int n_saved;
    bool materialize_grads;
    bool in_backward;
    bool saved_failed; /* a jg_ctx_saved call failed: the backward fails too */
    char saved_error[512];
    bool create_graph; /* of the backward now running */
    jg_node *node;     /* the call's autograd node (NULL while forward runs) */
    /* the tensors jg_ctx_mark_non_differentiable marked: references while
     * forward runs (a temporary freed there must not match a new tensor at
     * its address), then the matching outputs, borrowed (non_diff_final) */
    jg_tensor *non_diff[JG_MAX_OUTPUTS];
    int n_non_diff;
    bool non_diff_final;
    /* per output, after forward: marked non-differentiable (a mark matches
     * every output that is the marked tensor, as PyTorch's by identity) */
    bool out_non_diff[JG_MAX_OUTPUTS];
    /* forward returned a traced tensor that requires grad as a
     * non-differentiable output, neither an input nor a view: eager detaches
     * such a tensor in place (PyTorch's rule), which a trace cannot capture */
    bool detaches_traced;
    int n_own; /* inputs before n_own are the call's own; the rest are lifted
                * (tensors reached through objects: no inputs in eager mode) */
    /* inputs the forward wrote in place (jg_ctx_mark_dirty; borrowed) and
     * the output each one is returned as */
    jg_tensor *dirty[JG_MAX_OUTPUTS];
    int dirty_out[JG_MAX_OUTPUTS];
    int n_dirty;
    void *state;
    void (*free_state)(void *);
    /* holders: the call's node or record, and the copies of a traced
     * graph that a compiled entry keeps to trace the backward again
     * (compile/dynamic.c); jg_ctx_free drops one */
    int refcount;
};

/* The context of a custom function's eager node n; NULL for other nodes. */
jg_ctx *jg_function_node_ctx(const jg_node *n);

/* Makes a context for a call of fn (args copied); NULL + error. */
jg_ctx *jg_ctx_new(const jg_function *fn, int n_inputs, jg_tensor *const *inputs, const void *args,
                   size_t args_size);
/* The same from per-slot metadata and needs_input_grad (the tracer's way). */
jg_ctx *jg_ctx_new_meta(const jg_function *fn, int n_inputs, const jg_meta *in_meta,
                        const bool *needs, const void *args, size_t args_size);
/* Drops one reference (the last frees it). */
void jg_ctx_free(jg_ctx *ctx);
/* One more reference to ctx (NULL stays NULL). */
jg_ctx *jg_ctx_retain(jg_ctx *ctx);

/* Runs fn->forward with grad mode off inside a scope and returns its outputs
 * as new references (aliases where the callback returned an input or a
 * tensor with history).  Returns the output count or -1. */
int jg_function_run_forward(jg_ctx *ctx, int n_inputs, jg_tensor *const *inputs,
                            jg_tensor **outputs);
/* Runs fn->backward for per-output gradients gout (NULL = none; materialised
 * as zeros of out_meta unless the callback turned that off) and validates
 * the per-slot results into gin (borrowed from the current scope; NULL for
 * "no contribution").  Shared by the eager node and by compiled graphs that
 * call the callbacks at run time. */
int jg_function_run_backward(jg_ctx *ctx, int n_out, const jg_meta *out_meta,
                             jg_tensor *const *gout, jg_tensor **gin);

/* jg_apply where inputs [n_own, n_inputs) are tensors the call reaches
 * otherwise (an object's fields, lifted by the tracer): the callbacks get
 * them, but they are no inputs of the call's node (no edge, needs no
 * gradient), as in eager mode.  For replaying a traced call. */
int jg_apply_lifted(const jg_function *fn, int n_inputs, int n_own, jg_tensor *const *inputs,
                    const void *args, size_t args_size, jg_tensor **outputs);

/* Set by the tracer: captures a jg_apply whose inputs include symbolic
 * tensors.  Same contract as jg_apply. */
typedef int (*jg_trace_apply_fn)(const jg_function *fn, int n_inputs, jg_tensor *const *inputs,
                                 const void *args, size_t args_size, jg_tensor **outputs);
extern jg_trace_apply_fn jg_trace_apply_hook;

#endif
