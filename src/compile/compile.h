/* jg_compile internals: cache entries and the compiled call's autograd node.
 *
 * An ENTRY is one trace of the program for one set of guards.  It holds the
 * forward graph that runs (after CSE/DCE), the traced forward graph autodiff
 * read (kept so backward graphs for other output-gradient masks can be made
 * later with exactly the eager order), and backward graph variants keyed by
 * which outputs received a gradient.  Entries are reference counted: the
 * jg_compiled and every live compiled autograd node hold one. */
#ifndef JG_COMPILE_COMPILE_H
#define JG_COMPILE_COMPILE_H

#include "autodiff/autodiff.h"
#include "autograd/node.h"
#include "backend/interp.h"
#include "graph/graph.h"
#include "trace/trace.h"

/* A backend: a plan per graph, made once, run per call (jg_interp_run's
 * contract).  "interp" (backend/interp.c) and "c" (backend/cgen.c). */
typedef struct jg_backend {
    const char *name;
    void *(*plan_new)(const jg_graph *g);
    int (*run)(void *plan, jg_tensor *const *inputs, jg_tensor **outputs);
    void (*plan_free)(void *plan);
    const char *mode; /* PyTorch's mode= it serves (compile/modes.c); NULL: "default" */
} jg_backend;
extern const jg_backend jg_backend_interp, jg_backend_c;
/* Mode "reduce-overhead" of each (compile/modes.c). */
extern const jg_backend jg_backend_interp_ro, jg_backend_c_ro;
/* The backend running base (interp or c, any mode) in mode (NULL:
 * "default"); NULL + PyTorch's error for an unknown mode. */
const jg_backend *jg_mode_backend(const jg_backend *base, const char *mode);
/* Test hook: when >= 0, max-autotune keeps variant number
 * jg_modes_debug_force of each graph it tunes (when the graph has it)
 * whatever the timings, so tests can check every variant's bits. */
extern int jg_modes_debug_force;
/* How many tensors of more than JG_INLINE_BYTES a compiled call's
 * write-back (compile/mutation.c) copied instead of taking the new value's
 * memory (a parameter something else shares, a .grad that is a strided
 * view...): the tests' check that a training step copies none.  This
 * thread's count. */
int64_t jg_writeback_copies(void);

typedef struct jg_in_key {
    jg_meta meta;
    int64_t stride[JG_MAX_DIMS]; /* traced tensors carry them (contiguous(), view()) */
    bool requires_grad;
    int same_as;    /* first earlier input that is the same jg_tensor*, or -1 */
    int storage_as; /* first earlier input sharing its storage, or -1 */
} jg_in_key;

/* The guard of a captured tensor (a lifted graph input): what it was when
 * traced.  Its identity is fixed (the entry holds it); its storage aliasing
 * with the call's inputs and earlier captured tensors is checked. */
typedef struct jg_capture_key {
    jg_meta meta;
    int64_t stride[JG_MAX_DIMS];
    bool requires_grad;
    int storage_as; /* first call input (k) or earlier lifted tensor (n_inputs + k) sharing its
                       storage, or -1 */
} jg_capture_key;

typedef struct jg_call_key {
    bool grad_mode;
    int n_inputs;
    jg_in_key *in;
    const void *args;
    size_t args_size;
} jg_call_key;

typedef struct jg_bwd_variant {
    /* per node output k (n_node_out of them): JG_BWD_GRAD, it received a
     * gradient; JG_BWD_REACHED, it was reached without one (only when the
     * graph has custom calls); else 0.  Then per input with several
     * contributions (n_groups of them, in edge order): 1 when its sum in the
     * graph starts from the gradient the engine held for it (owned).  Then
     * per edge h (n_edges): 1 when the gradient sent along it is the
     * input's .grad plus the gradient (jg_engine_leaf_grad; h is the
     * input's first edge) */
    unsigned char *mask;
    jg_graph *g;
    void *plan; /* of the entry's backend */
    int n_in;
    int *in_src; /* >= 0: saved index; < 0: -1 - k, gradient of node output k;
                    <= -1 - n_node_out: -1 - n_node_out - h, the gradient the engine
                    held for the input of edge h before the call added to it;
                    <= -1 - n_node_out - n_edges: -1 - n_node_out - n_edges - h, the
                    .grad of edge h's leaf (folded in) */
    /* 0: one output per contribution, the engine sums them; or
     * JG_SUM_IN_GRAPH: the contributions of each input are summed in the
     * graph (jg_autodiff_sum_contribs), from a held gradient as the mask's
     * tail says */
    uint64_t sum;
} jg_bwd_variant;
#define JG_SUM_IN_GRAPH (1ull << 63)
enum { JG_BWD_GRAD = 1, JG_BWD_REACHED = 2 };

/* What a traced program did with sizes (jg_sizes_note), in order. */
typedef struct jg_sizes_record {
    int n, cap;
    struct jg_size_use {
        int op;
        int64_t a, b;
    } * use;
} jg_sizes_record;
/* Starts recording into r (until jg_sizes_record_end(the returned previous
 * recorder)). */
jg_sizes_record *jg_sizes_record_begin(jg_sizes_record *r);
void jg_sizes_record_end(jg_sizes_record *prev);

typedef struct jg_entry {
    int refcount;
    int index;
    jg_call_key key; /* owns in[] and args */
    /* a graph break: calls matching this key run eagerly */
    bool eager;
    /* ... or, when every break was a value read in the program, in compiled
     * pieces around the reads (compile/segments.c) */
    bool pieces;
    /* ... for this call only: the entry is not kept (jg_trace_note_retry_break) */
    bool retry;
    char *break_reason;
    jg_graph *fwd_ad; /* traced forward, read by autodiff (NULL: no backward) */
    jg_graph *fwd;    /* what runs */
    /* the graph as traced, before the pipeline (NULL unless dynamic sizes
     * may use it: compile/dynamic.h) */
    jg_graph *traced;
    jg_sizes_record sizes; /* the trace's comparisons of sizes (dynamic.c) */
    const jg_backend *backend;
    void *fplan;
    int n_graph_inputs;  /* distinct call inputs, then lifted tensors */
    int n_distinct;      /* distinct call inputs */
    int *graph_input_of; /* per call input */
    int *call_input_of;  /* per distinct graph input: its first call input */
    jg_tensor **lifted;  /* captured tensors, graph inputs after the distinct ones (retained) */
    jg_capture_key *lifted_key;
    int n_lifted;
    /* captured tensors whose .grad the program read (retained): guarded to
     * have a .grad or none as when traced; a lifted tensor that was such a
     * .grad (lifted_grad_of[k] >= 0: of gr_owner[that]) is read from the
     * owner's .grad at every call, as the program would read it */
    jg_tensor **gr_owner;
    bool *gr_had;
    int n_gr;
    int *lifted_grad_of;
    /* tensors whose values the graph relies on (jg_trace_guard_value,
     * retained) and their bytes then: the entry matches only while they hold
     * those bytes */
    jg_tensor **vg_t;
    void **vg_bytes;
    int n_vg;
    /* call inputs the program also reached through its scope: the guard is
     * that the call passes that very tensor there again (retained) */
    jg_tensor **pinned;
    int *pinned_input;
    int n_pinned;
    int n_prog_out;
    /* program outputs eager gives a non-row-major layout (an elementwise
     * result of strided operands): the compiled call hands them out in it */
    bool *out_relayout;                 /* per graph output (NULL: none) */
    int64_t (*out_stride)[JG_MAX_DIMS]; /* ... its layout */
    /* values the backward graphs read: the forward value id and where its
     * tensor comes from at run time (>= 0: forward output; < 0: -1 - graph
     * input) */
    int n_saved;
    int *saved_val, *saved_src;
    bool *saved_check; /* per saved value: version-checked when read (autodiff's in_checked) */
    /* per fwd_ad value (NULL: none): JG_REMAT_RECOMPUTE, the backward graphs
     * recompute it rather than read it (remat.c); JG_REMAT_LEAF, saved and
     * checked, what recomputes read */
    unsigned char *remat;
    /* the compiled node's outputs: distinct program outputs requiring grad */
    int n_node_out;
    int *node_out_val, *node_out_prog;
    bool has_custom; /* the traced forward has custom calls */
    /* the node's edges: one per gradient contribution to a graph input (see
     * autodiff.h), to that input's tensor */
    int n_edges;
    int *edge_input;
    int n_groups; /* inputs with several edges (a backward variant's mask tail) */
    jg_bwd_variant *bwd;
    int n_bwd, cap_bwd;
    /* inputs the program writes in place (compile/mutation.c): their new
     * values are the last n_mut graph outputs */
    int n_mut;
    int *mut_input;       /* per mutation output: the call input written */
    uint64_t *mut_writes; /* ... and how many in-place writes it received */
    /* ... and its first write with grad mode on, which eager mode checks
     * for a leaf that requires grad: its order among those writes times 2,
     * plus 1 when it went through a view of the input; -1: none; -2: it
     * required grad and was written only without grad mode (its values are
     * written back, its history kept, as eager's) */
    int *mut_check;
    /* per graph output (NULL: none): a backward from it goes through a node
     * an in-program backward without retain_graph freed, one that saves
     * tensors: eager's second backward fails there, so the call's fails too */
    bool *out_freed;
    int *out_input; /* per program output: the written call input it is, or -1 */
    /* the traced program's in-place writes (jg_trace_overwrites), kept from
     * the trace's end until build() reads them */
    jg_trace_overwrite *ow;
    int n_ow;
    /* a value the backward reads as eager's saved tensor, which the program
     * wrote in place after that: eager's backward fails on it, so the
     * compiled node's does, with eager's message (jg_stale_saved_error) */
    bool stale;
    int stale_val;   /* the forward value (what the message describes) */
    int stale_input; /* the graph input written (its version at the call counts), or -1 */
    uint64_t stale_expected, stale_actual; /* versions, counted from the call */
    /* eager names the tensor's node at backward, its last write's when the
     * value itself (not a view of it) was saved: that node (NULL: none, or
     * not named so) and its output; a saved output is named by the node
     * that saved it (eager's saved output keeps no history of its own) */
    const char *stale_name;
    int stale_name_nr;
    char stale_name_buf[112]; /* (a custom function's node name) */
    /* captured tensors the program writes in place (an optimizer's update of
     * parameters and state): their new values are the graph outputs after
     * the n_mut above, written back after each call */
    int n_lmut;
    int *lmut_lifted;      /* per such output: the lifted tensor written */
    uint64_t *lmut_writes; /* ... and how many in-place writes it received */
    /* captured tensors whose .grad the program set (a traced backward,
     * zero_grad(set_to_none)): after each call, .grad becomes the graph
     * output after the lifted mutations' (gset_out[i], counted among
     * them), or None (-1) */
    int n_gset, n_gset_out;
    jg_tensor **gset_owner; /* (retained) */
    int *gset_out;
    /* per program output that the program made as a view of a graph input:
     * that input (else -1) and the view steps from it (ops/viewtrack.h) */
    int *out_view_in;
    void **out_view_steps;
    int *out_view_n;
    int n_out_view; /* the length of the three above */
} jg_entry;

void jg_entry_release(jg_entry *e);
/* Runs an entry's forward and, with grad mode on, attaches the autograd node.
 * outputs get new references tracked by the current scope. */
int jg_entry_run(jg_entry *e, jg_tensor *const *inputs, jg_tensor **outputs);
/* After the forward ran (fo: its n_prog_out program outputs, owned): program
 * outputs that CSE merged into one tensor but that the traced program
 * computed separately get their own copies, as eager returns distinct
 * tensors (each with its own gradient slot, and no shared storage); views
 * of an input get their own tensors over its memory, as eager's views. */
int jg_entry_unmerge_outputs(const jg_entry *e, jg_tensor **fo);
/* After tracing: finds the inputs whose placeholder got a new value (orig:
 * each call input's value id before the program ran) and records them in e.
 * 1 with `why` when such an input shares storage with another input (the
 * graph cannot see the write through the other one), 0, or -1 + error. */
int jg_mutations_find(jg_entry *e, const jg_call_key *k, jg_tensor *const *sym, const int *orig,
                      int n_out, jg_tensor *const *outs, char *why, size_t why_size);
/* After tracing, before the frame ends: finds the lifted tensors the
 * program wrote in place, records them in e and appends their new values to
 * vals (which holds n_vals).  1 with `why` when such a write cannot be
 * compiled (the tensor shares storage with an input or another captured
 * tensor, or is returned), 0, or -1 + error.  *vals (malloc'd) grows as
 * needed. */
int jg_lifted_mutations_find(jg_entry *e, const jg_call_key *k, jg_tensor *const *inputs, int n_out,
                             jg_tensor *const *outs, int **vals, int n_vals, char *why,
                             size_t why_size);
/* After the lifted mutations: the captured tensors whose .grad the program
 * set, their new .grad values appended to *vals (holding n_vals; malloc'd,
 * grown as needed).  0, or -1 + error. */
int jg_grad_sets_find(jg_entry *e, int **vals, int n_vals);
/* Before the trace's frame ends: keeps its in-place writes in e (e->ow).
 * 0 or -1 + error. */
int jg_overwrites_keep(jg_entry *e);
/* After autodiff of e's forward g: the first value the backward reads as
 * eager's saved tensor (checked_by: autodiff's) that the program wrote in
 * place after that, recorded in e (e->stale); frees e->ow. */
void jg_stale_saved_find(jg_entry *e, const jg_graph *g, int n_in, const int *in_src,
                         const int *checked_by);
/* Eager's error for e->stale, when a compiled node's backward runs: base,
 * the written input's version at the call (0 for a value the program made),
 * now, the version of the tensor the call read for it now; fn and nr, that
 * input's history at the call (fn NULL: none).  -1. */
int jg_stale_saved_error(const jg_entry *e, uint64_t base, uint64_t now, const jg_node *fn, int nr);
/* The name eager's message gives output nr of node fn (*eager_nr: its
 * number there): a compiled node's output is named by the op that made it. */
const char *jg_node_eager_name(const jg_node *fn, int nr, int *eager_nr);
/* Eager's name of graph op node nd's backward node: PyTorch's overload
 * without dims for a whole-tensor reduction, as autograd/opnode.c names it. */
const char *jg_gnode_eager_name(const jg_gnode *nd);
/* Saved value i of a compiled node (slot s, owner the node), as
 * jg_saved_unpack reads it for a backward; one the program made, changed
 * in place since the call, fails with eager's message, which names the op
 * that made it (eager's node), not the compiled node.  NULL + error. */
jg_tensor *jg_saved_read(const jg_entry *e, int i, jg_saved *s, jg_node *owner);
/* jg_entry_run for an entry that writes inputs or captured tensors: checks them as eager would,
 * runs, writes the new values back (history onto the call).  Returns the number of
 * program outputs. */
int jg_entry_run_mutating(jg_entry *e, int n_inputs, jg_tensor *const *inputs, jg_tensor **outputs);
/* The backward variant for a mask, built on first use. */
jg_bwd_variant *jg_entry_backward(jg_entry *e, const unsigned char *mask, uint64_t sum);
/* Whether some input has several contributions (edges): then backward
 * variants sum them in the graph when the engine allows (v->sum). */
enum { JG_REMAT_RECOMPUTE = 1, JG_REMAT_LEAF = 2 };
/* Chooses what the backward graphs recompute (e->remat) from what the full
 * backward r reads; with the c backend only. 0 or -1 + error. */
int jg_entry_remat_choose(jg_entry *e, const jg_autodiff_result *r);
/* Rewrites backward graph g (inputs standing for (*in_src)[k], < 0 for a
 * gradient; *checked may be NULL) to recompute e->remat values: their inputs
 * go, nodes recomputing them come first, saved values they read and g did
 * not are appended as inputs.  0 or -1 + error. */
int jg_entry_remat_apply(const jg_entry *e, jg_graph *g, int **in_src, bool **checked, int *n_in);
/* The number of inputs with several edges (e->n_groups). */
int jg_entry_count_groups(const jg_entry *e);
/* Rewrites v->g (fresh from autodiff) to sum each input's contributions as
 * v->sum says, adding the inputs it reads to v->in_src. */
int jg_entry_sum_in_graph(jg_entry *e, jg_bwd_variant *v);
/* Printed forward and backward graphs of an entry (caller frees). */
char *jg_compiled_graph_of(const jg_entry *e);
/* The verify option (verify.c): runs the program eagerly on copies of the
 * inputs and fails naming the output or input whose value or gradient
 * differs from the compiled call's. */
int jg_compile_verify(jg_program_fn fn, void *user, const void *args, int n,
                      jg_tensor *const *inputs, int n_out, jg_tensor *const *outs);
/* Test hook: when set, compiled backward doubles its first gradient, so tests
 * can check that verify notices a wrong backend result. */
extern int jg_debug_corrupt_backward;

/* For compile/segments.c: moves the innermost frame's captured tensors
 * into e with their guards (e has no call inputs), and builds e from its
 * traced graph g (e owns g from then on, also when it fails).  0 or -1. */
int jg_compile_take_captures(jg_entry *e);
int jg_compile_build(jg_entry *e, jg_graph *g);
/* Records which of the first n_out outputs (graph values vals) are made by
 * view ops from a graph input: the call hands them out as tracked views of
 * that input's tensor (jg_entry.out_view_in).  0 or -1. */
int jg_compile_output_views(jg_entry *e, const jg_graph *g, int n_out, const int *vals);

/* Partial graphs (compile/segments.c): an entry whose trace read values
 * runs as compiled pieces around each read. */
typedef struct jg_segments jg_segments;
typedef struct jg_segments_env {
    jg_program_fn fn;
    void *user;
    const jg_backend *backend;
    int entry; /* (for the log) */
    bool log_graphs, log_breaks;
    jg_break_site_fn site; /* (may be NULL) */
    void *site_user;
} jg_segments_env;
/* jg_segments_call's answer when the program broke, before any piece ran,
 * where it cannot be split: the call runs eagerly. */
#define JG_SEGMENTS_EAGER (-2)
/* ... and when it broke so after pieces ran: the call fails (their effects
 * happened), later calls of the entry run eagerly. */
#define JG_SEGMENTS_BROKE (-3)
/* Runs the program in pieces (*s: the pieces' cache, made on first use).
 * The number of outputs, JG_SEGMENTS_EAGER, JG_SEGMENTS_BROKE + error, or
 * -1 + error. */
int jg_segments_call(jg_segments **s, const jg_segments_env *env, const void *args, int n,
                     jg_tensor *const *inputs, jg_tensor **outputs);
void jg_segments_free(jg_segments *s);
/* The last call's breaks (owned by s), and how many. */
int jg_segments_breaks(const jg_segments *s, const char *const **reasons);
/* Graphs run by pieces, all calls. */
long jg_segments_graphs(const jg_segments *s);
/* The last call's pieces, printed (caller frees). */
char *jg_segments_graph(const jg_segments *s, int entry);

/* Verifies g, then runs dedup, CSE (when cse is true) and DCE on it,
 * verifying again after each pass. */
int jg_compile_passes(jg_graph *g, bool cse);

#endif
