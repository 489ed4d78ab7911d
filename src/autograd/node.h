/* Autograd graph nodes and edges, and the pieces every node kind shares:
 * saved tensors and the per-slot gradient routing rule. */
#ifndef JG_AUTOGRAD_NODE_H
#define JG_AUTOGRAD_NODE_H

#include "core/tensor.h"

/* Where the gradient of one input SLOT goes: into gradient input `nr` of node
 * `fn`, or into the .grad of `leaf`; both NULL when the slot's tensor needs no
 * gradient.  A tensor filling several slots has several edges to the same
 * place; their gradients are summed there (see jg_grad_accumulate). */
typedef struct jg_edge {
    jg_node *fn;
    int nr;
    jg_tensor *leaf; /* retained */
} jg_edge;

typedef struct jg_node_vt {
    /* Computes per-slot input gradients gin[0..n_next) (new references or NULL)
     * from output gradients gout[0..n_out) (NULL = no gradient reached that
     * output).  reached[k]: output k is part of this backward's graph (a root,
     * or an edge of a node that ran leads to it) even if no gradient arrived.
     * Runs inside a scope, with grad mode == create_graph.  Returns 0, -1, or
     * 1 when (called without gradients) it has nothing to do: it contributes
     * nothing. */
    int (*apply)(jg_node *n, jg_tensor *const *gout, const bool *reached, jg_tensor **gin,
                 bool create_graph);
    /* (apply may also return JG_NODE_SPLICED: it computed no gradients, but
     * made its redirect hook send each output in this backward -- with a
     * gradient or reached -- to nodes that stand for it; the engine moves
     * the output gradients there and runs those nodes in this backward.) */
    /* Frees what only backward needs (after a backward without
     * JG_RETAIN_GRAPH). */
    void (*release_saved)(jg_node *n);
    /* Frees the node's own resources (not the edges; the caller does). */
    void (*destroy)(jg_node *n);
    const char *(*name)(const jg_node *n);
    /* Runs even when no gradient reached any output (gout all NULL), as
     * PyTorch runs a custom Function's backward (with materialized zeros)
     * whenever its node is part of the backward graph.  Op nodes leave it
     * false: with no gradient they contribute nothing. */
    bool run_without_grads;
    /* Which edges are part of this backward's graph, given which outputs
     * are (reached[k], or a gradient in gout[k]); NULL: every edge.  A node
     * that stands for several eager nodes (a compiled call) answers so that
     * an edge only the eager nodes of unreached outputs lead to is not
     * reached, as in eager mode. */
    void (*edges_reached)(const jg_node *n, jg_tensor *const *gout, const bool *reached,
                          bool *edge_reached);
    /* NULL, or: true and *to = where the gradient of output nr of n goes
     * instead of n (a node's input, or a leaf; borrowed), false if it still
     * goes to n.  The engine follows it for every edge, root and captured
     * tensor.  A compiled call whose forward was run again eagerly for a
     * create_graph backward answers with the eager nodes of that run, so a
     * later backward sends the output's gradient into the nodes the first
     * derivatives came through and sums it there, as eager mode does; the
     * per-use stand-ins of that run's inputs answer with the inputs. */
    bool (*redirect)(const jg_node *n, int nr, jg_edge *to);
    /* NULL, or true when apply runs only library code (no custom function
     * callbacks, no nested backward): then nothing but the engine's commit
     * touches a .grad while the node's backward runs (jg_engine_leaf_grad). */
    bool (*pure)(const jg_node *n);
} jg_node_vt;

/* Consecutive nodes' seq differ by this much: a node created later may be
 * given a seq that places it among earlier ones (a compiled call's forward,
 * run again for a double backward, goes where eager's nodes would be). */
#define JG_NODE_SEQ_STRIDE ((uint64_t)1 << 20)

/* jg_node_vt.apply's answer for "my outputs now stand elsewhere". */
#define JG_NODE_SPLICED 2

struct jg_node {
    int64_t refcount; /* must stay first: core releases nodes by it */
    const jg_node_vt *vt;
    uint64_t seq;      /* creation order; the engine runs later nodes first */
    int n_out;         /* forward outputs = gradients this node receives */
    int run_idx;       /* engine: index in the last backward run that found it (a hint) */
    jg_meta *out_meta; /* NULL for op nodes (autograd/opnode.c), which never read it */
    int n_next;        /* input slots */
    jg_edge *next;
    bool has_saved;      /* holds tensors that backward frees */
    bool saved_released; /* ... and they were freed */
};

/* Allocates a node of `size` bytes (a struct starting with jg_node) with
 * room for its edges and output metadata; refcount 1. */
jg_node *jg_node_alloc(size_t size, const jg_node_vt *vt, int n_next, int n_out);
/* The same with only the jg_node header and the edges zeroed: for callers
 * that write every other byte they read (op nodes, autograd/opnode.c). */
jg_node *jg_node_alloc_fields(size_t size, const jg_node_vt *vt, int n_next, int n_out);
/* The seq the next node created on this thread will get. */
uint64_t jg_node_next_seq(void);
/* Points slot `slot` of n at tensor t (its grad_fn, or itself if a leaf that
 * requires grad). */
void jg_node_set_edge(jg_node *n, int slot, jg_tensor *t);
/* Makes outputs[0..n) the outputs of n: grad_fn, output_nr, requires_grad and
 * the node's output metadata. */
void jg_node_set_outputs(jg_node *n, int n_outputs, jg_tensor *const *outputs);
/* Registers core's destroy hook (called once at library load). */
void jg_autograd_init(void);

/* ---- the accumulation rule (eager engine and graph autodiff share it) ----
 * *acc += g, where NULL means "nothing yet": the first contribution is taken
 * as is, later ones are added with jg_add (so it records history under create
 * graph, and records IR nodes while tracing).  Consumes the reference to g. */
int jg_grad_accumulate(jg_tensor **acc, jg_tensor *g);
/* The eager engine's shortcut for a slice's (step 1) gradient g: *acc +=
 * slice_backward(g) computed in place, without the zero-filled whole-shape
 * tensor, when jg_grad_accumulate would add in place (an accumulator
 * nothing else sees, grad mode off): every element gets the addition it
 * would get (acc + 0 outside the slice, acc + g inside), so the bits are
 * jg_grad_accumulate's, and graph autodiff (which keeps slice_backward and
 * the add) sums the same.  The pieces of a split then add into the one
 * buffer the first piece's slice_backward made.  Returns 1 if done, 0 if
 * not applicable (the caller takes the VJP's path), -1 on error.  Borrows g. */
struct jg_attrs;
int jg_grad_accumulate_slice(jg_tensor **acc, jg_tensor *g, const struct jg_attrs *slice);
/* THE slot rule: adds each non-NULL per-slot gradient, in slot order, into
 * the accumulator its slot's source owns (targets[s]; NULL = the source needs
 * no gradient).  A tensor filling several slots has several targets pointing
 * at its one accumulator, so every slot's contribution is summed there; NULL
 * gradients add nothing, and a source whose slots are all NULL stays NULL.
 * The eager engine (targets: the next node's input buffer or the leaf's
 * pending .grad) and graph autodiff (targets: a forward value's gradient or a
 * compiled-node edge) both call this.  Borrowed slot_grads. */
int jg_slots_accumulate(int n_slots, jg_tensor *const *slot_grads, jg_tensor **const *targets);
/* Makes a gradient fit its input as PyTorch's engine does: sums a broadcast
 * shape down, casts a different dtype; errors otherwise with "function
 * <fn_name> returned an invalid gradient at index <slot> - got [..] but
 * expected shape compatible with [..]".  Consumes *g, replaces it. */
int jg_grad_validate(const char *fn_name, int slot, const jg_meta *expect, jg_tensor **g);

/* ---- saved tensors ---- */
typedef struct jg_saved {
    jg_tensor *t;     /* retained; for an output of the owner: an alias without history */
    uint64_t version; /* storage version when saved */
    int output_nr;    /* >= 0: t is that output of the owner node */
    bool unchecked;   /* read as it is at backward (a compiled custom function's ctx
                         attribute), no version check */
} jg_saved;

void jg_saved_init(jg_saved *s, jg_tensor *t);
/* Turns a saved tensor that is output `nr` of `owner` into the no-history
 * form (breaking the owner -> saved -> owner cycle). */
void jg_saved_mark_output(jg_saved *s, int nr);
/* The tensor to use in backward (borrowed, valid during the node's apply);
 * NULL + PyTorch's message if it was modified in place or freed. */
jg_tensor *jg_saved_unpack(jg_saved *s, jg_node *owner, bool create_graph);
void jg_saved_free(jg_saved *s);

#define JG_SAVED_FREED_MSG                                                                         \
    "Trying to backward through the graph a second time (or directly access saved tensors after "  \
    "they have already been freed). Saved intermediate values of the graph are freed when you "    \
    "call backward or jg_autograd_grad. Specify JG_RETAIN_GRAPH if you need to backward through "  \
    "the graph a second time or if you need to access saved tensors after calling backward."

/* The node built-in ops record (autograd/opnode.c). */
int jg_autograd_record_op(int op, const void *attrs, int n_in, jg_tensor *const *in, int n_out,
                          jg_tensor *const *out);
/* Gives the op node that made t (if any) the name of the PyTorch node a
 * composite op stands for (a static string: "CatBackward0"); only
 * grad_fn's name changes. */
void jg_autograd_name_node(jg_tensor *t, const char *name);
/* True if grad mode is on and some input requires grad. */
bool jg_any_requires_grad(int n, jg_tensor *const *in);

/* A fresh alias of t that shares storage and has no history. */
jg_tensor *jg_alias_no_history(jg_tensor *t);

#endif
