/* Tracing: symbolic tensors record nodes into a graph.
 *
 * A trace FRAME records into one graph.  Frames nest (a thread-local stack):
 * jg_compile opens one for the program, graph autodiff opens one for the
 * backward graph, and a custom function call traced inside a program can open
 * one per callback to capture its forward/backward subgraphs.  Every public op
 * called with a symbolic operand lands in jg_trace_op_hook (ops/dispatch.c),
 * which appends a node to the innermost frame's graph and returns symbolic
 * outputs; kernels never see symbolic tensors.
 *
 * A symbolic tensor (storage NULL) carries a jg_sym naming its graph (by id) and
 * value.  Concrete tensors used as operands become constants of the graph
 * (retained).  A capturing frame (JG_TRACE_LIFT, jg_compile's) instead traces
 * every op, also one whose operands are all concrete, and makes each concrete
 * tensor from outside the program an extra graph input ("lifted"), which
 * jg_compile reads again and guards at every call; only tensors the program
 * itself made during the trace (and that do not require grad) stay
 * constants. */
#ifndef JG_TRACE_TRACE_H
#define JG_TRACE_TRACE_H

#include "graph/graph.h"

enum {
    JG_TRACE_LIFT = 1u << 0,    /* capture: every op is traced, outside tensors become inputs */
    JG_TRACE_CAPTURE = 1u << 1, /* every op is traced, outside tensors are constants (read at
                                   run time): a custom function's callbacks in a compiled
                                   program */
};

/* Am I tracing?  (some frame is open on this thread) */
bool jg_tracing(void);
/* The graph the innermost frame records into (NULL when not tracing). */
jg_graph *jg_trace_graph(void);
/* Opens a frame recording into g (nested frames allowed: the new one is the
 * innermost until jg_trace_end).  0 or -1. */
int jg_trace_begin(jg_graph *g, unsigned flags);
/* Closes the innermost frame.  Lifted tensors not taken are released. */
void jg_trace_end(void);

/* A new placeholder input of the innermost graph and its symbolic tensor
 * (new reference, not tracked by a scope).  name NULL: "x<k>".  value_rg is
 * what autodiff sees; the tensor's requires_grad (what the program sees) is
 * tensor_rg. */
jg_tensor *jg_trace_placeholder(const jg_meta *m, bool value_rg, bool tensor_rg, const char *name);
/* The value of t in the innermost graph: its own if symbolic there, else a
 * constant (deduplicated by pointer) or a lifted input.  -1 + error for a
 * symbolic tensor of another graph. */
int jg_trace_value(jg_tensor *t);
/* Lets the innermost frame take in symbolic tensors of other graphs: a
 * custom call's backward may use tensors its forward made and kept (in the
 * ctx, not saved); resolve returns the value standing for t in the frame's
 * graph, or -1 + error.  Cleared when the frame ends. */
typedef int (*jg_trace_resolve_fn)(void *user, jg_tensor *t);
void jg_trace_set_resolver(jg_trace_resolve_fn resolve, void *user);
/* A symbolic tensor for value v of the innermost graph (new reference,
 * untracked). */
jg_tensor *jg_trace_tensor(int v);

/* Graph breaks: things the innermost frame could not capture (a read of a
 * symbolic tensor's values, an untraceable call).  The reason of the first
 * one is kept. */
int jg_trace_breaks(void);
const char *jg_trace_break_reason(void);
/* Records a break in the innermost frame (for callers like jg_apply's hook). */
void jg_trace_note_break(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* How many of the innermost frame's breaks were value reads (jg_item,
 * jg_copy_to, jg_data ...) or retry breaks (an optimizer creating its
 * state) in the program itself (not inside a custom function's callbacks
 * or a traced backward): the breaks a program run in pieces splits at
 * (compile/segments.c). */
int jg_trace_read_breaks(void);

/* Running a program in pieces (compile/segments.c): the innermost frame
 * keeps every symbolic tensor of its graph made from now on (retained, so
 * a refcount above 1 means the program still holds it), and a value read
 * in the program itself calls fn instead of breaking: fn runs the graph so
 * far and makes the stand-ins concrete (read: the tensor read), closing
 * this frame and opening the next; 0, or -1 + error when it cannot (the
 * read is then a break).  Cleared when the frame ends. */
typedef int (*jg_trace_segment_fn)(void *user, const jg_tensor *read, const char *what);
void jg_trace_set_segmenter(jg_trace_segment_fn fn, void *user);
/* The symbolic tensors the innermost frame kept (array and references move
 * to the caller), in the order they were made. */
int jg_trace_take_symbolic(jg_tensor ***syms);

/* A break that holds for this call only: the program changes state that
 * decides what it does (an optimizer creating its state on the first step),
 * so jg_compile runs the call eagerly without caching an entry and traces
 * the next call again.  Whether the first break was one: */
void jg_trace_note_retry_break(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
bool jg_trace_break_retry(void);

/* Binds concrete tensor t (borrowed; it must outlive the frame) to value v of
 * the innermost graph: jg_compile's call inputs, so a program that reaches an
 * input through its scope as well uses the input's placeholder.  input is
 * the caller's index for jg_trace_bound_used.  0 or -1. */
int jg_trace_bind(jg_tensor *t, int value, int input);
/* Whether the program reached the tensor bound with this index other than
 * through its placeholder (jg_trace_value found it). */
int jg_trace_bound_used(int input);
/* Suspends capturing (jg_trace_capture = 0) around work done at trace time
 * that must compute, not trace; resume with the returned id. */
uint32_t jg_trace_capture_pause(void);
void jg_trace_capture_resume(uint32_t id);
/* Makes the innermost frame capture (until resumed with the returned id):
 * ops on its constants are traced, not computed. */
uint32_t jg_trace_capture_all(void);

/* Concrete tensors the innermost frame lifted into graph inputs, in input
 * order (they follow the placeholders made before them).  The array and the
 * references move to the caller (free() the array, jg_release each). */
int jg_trace_take_lifted(jg_tensor ***lifted);

/* The captured tensors whose .grad the program read (jg_grad), and the
 * .grad each had then (NULL: none).  Arrays and references move to the
 * caller. */
int jg_trace_take_grad_reads(jg_tensor ***owners, jg_tensor ***grads);
/* While jg_compile traces: the program's graph relies on the current values
 * of concrete tensor t (small, contiguous; e.g. an optimizer's
 * hyperparameters, baked into the graph as constants), so the entry is used
 * only for calls where t holds the same bytes; other values trace again.
 * 0 (also when nothing is traced), or -1. */
int jg_trace_guard_value(jg_tensor *t);
/* Those guards: the tensors (retained) and a copy of their bytes at trace
 * time (malloc'd); the arrays and references move to the caller. */
int jg_trace_take_value_guards(jg_tensor ***ts, void ***bytes);
/* jg_compile's frame (innermost, capturing) records that captured tensor
 * t's .grad is now grad (NULL: none; a symbolic tensor of the frame's graph,
 * or t's own concrete .grad): what jg_grad(t) returns for the rest of the
 * trace, applied to t after each call.  0 or -1. */
int jg_trace_grad_set(jg_tensor *t, jg_tensor *grad);
/* Those records (arrays and references move to the caller). */
int jg_trace_take_grad_sets(jg_tensor ***owners, jg_tensor ***grads);
/* The concrete tensor behind graph input `value` of jg_compile's frame (a
 * call input or a lifted tensor), or NULL. */
jg_tensor *jg_trace_input_tensor(int value);
/* jg_compile's frame records that a traced backward without retain_graph
 * went through nodes[i] (n_nodes flags, by node index of its graph): eager
 * frees those nodes' saved tensors, so a later backward through one of them
 * fails eagerly (jg_trace_node_freed).  0 or -1. */
int jg_trace_nodes_free(int n_nodes, const bool *nodes);
/* The innermost frame's first in-place write with grad mode on of traced
 * tensor t, directly or through a view of it (jg_hooks.traced_write): its
 * order among the first writes of the tensors written so, with *via_view;
 * -1 when there was none. */
int jg_trace_first_write(const jg_tensor *t, bool *via_view);
/* An in-place write of a traced tensor: value, the tensor's value until
 * then (a saved tensor holding it, or a view of it, is stale for eager's
 * backward); version, the tensor's version then (what such a saved tensor
 * expects; counted from the call for an input); end_version, its version
 * after the program's last write. */
typedef struct jg_trace_overwrite {
    int value;
    int input; /* the tensor is this graph input (its placeholder), or -1 */
    uint64_t version, end_version;
    bool via_view; /* the write went through a view of the tensor */
    int next_val;  /* the graph's values from this one on came after the write began */
    int last;      /* the tensor's last write: its index in the list */
} jg_trace_overwrite;
/* The innermost frame's writes so far, in order (borrowed: valid until the
 * next traced write or the frame's end). */
int jg_trace_overwrites(const jg_trace_overwrite **ow);
/* trace/stale.c.  After graph autodiff of g (in_src, checked_by: its
 * jg_autodiff_result's): the first backward input, in autodiff's order,
 * that reads as eager's saved tensor a value one of the writes ow[0..n_ow)
 * replaced (the value, or the value it views) after the reader saved it:
 * its index, with the write (*write) and whether it replaced the value
 * itself (*direct); -1: none. */
int jg_trace_stale_saved(const jg_graph *g, const jg_trace_overwrite *ow, int n_ow, int n_in,
                         const int *in_src, const int *checked_by, const jg_trace_overwrite **write,
                         bool *direct);
/* Whether saved value v is an output of the node whose output r reads it:
 * eager's saved output, named in the message by that node. */
bool jg_trace_saved_output(const jg_graph *g, int r, int v);
/* The value write ow made: the first one after it began that reads the
 * value it replaced (-1: none). */
int jg_trace_written_value(const jg_graph *g, const jg_trace_overwrite *ow);
/* Whether traced tensor t (or its view's base) required grad when the
 * innermost frame's program wrote it in place without grad mode. */
int jg_trace_written_without_grad(const jg_tensor *t);
bool jg_trace_node_freed(int node);
/* Whether jg_compile's frame is open (a program is traced). */
bool jg_trace_in_program(void);
/* Installs the backward hook (trace/backward.c). */
void jg_trace_backward_init(void);
/* The lifted tensors of the innermost frame so far (borrowed), and how many. */
int jg_trace_n_lifted(jg_tensor *const **lifted);
/* How many in-place ops wrote lifted tensor k (ops/inplace.c), and its value
 * in the graph now (*value: its placeholder when none did). */
int jg_trace_lifted_written(int k, int *value);

/* Runs subgraph g again in the current context: every node goes back through
 * the public entry points (jg_op_call, jg_apply), so inside a trace it is
 * recorded into the innermost frame (also a node whose operands are the
 * subgraph's constants), and outside one it computes.  inputs:
 * one tensor per graph input; outputs: one per graph output (borrowed from
 * the current scope, NULL for a "none" output).  0 or -1. */
int jg_trace_replay(const jg_graph *g, jg_tensor *const *inputs, jg_tensor **outputs);
/* The same, where uses (NULL: none) gives, per operand slot of every node
 * (nodes in order, each node's slots in order: jg_gnode_n_slots), a tensor
 * that slot reads instead of its value (NULL: the value itself), live
 * (NULL: all) says which nodes run (the others' outputs stay NULL), and
 * preset (NULL: none), per value id, a tensor to take for that value (unless
 * a node that runs computes it); vals (NULL: not wanted) gets every value's
 * tensor (NULL where none was computed), borrowed like the outputs. */
int jg_trace_replay_uses(const jg_graph *g, jg_tensor *const *inputs, jg_tensor *const *uses,
                         const bool *live, jg_tensor *const *preset, jg_tensor **outputs,
                         jg_tensor **vals);

#endif
