/* Internal tensor, storage and error machinery shared by every layer. */
#ifndef JG_CORE_TENSOR_H
#define JG_CORE_TENSOR_H

#include <jitgrad.h>
#include <stdarg.h>

typedef struct jg_node jg_node;
/* A traced value (src/trace): the id of the graph it belongs to (jg_graph.id,
 * never reused, so a symbolic tensor that outlives its graph is recognised
 * as foreign without touching freed memory) and its value there. */
typedef struct jg_sym {
    uint64_t graph;
    int value;
} jg_sym;

/* Where a storage lives (see tensor.c, "storage"). */
typedef enum {
    JG_STORAGE_BLOCK,   /* its own allocation: this header, then the data */
    JG_STORAGE_INLINE,  /* inside the tensor that made it (small data) */
    JG_STORAGE_ORPHAN,  /* inline, and that tensor is gone: views keep it */
    JG_STORAGE_EXTERNAL /* memory the caller owns (jg_tensor_from_blob); see tensor.c */
} jg_storage_kind;

/* Data plus what every tensor viewing it shares: a reference count and the
 * version counter. */
typedef struct jg_storage {
    int64_t refcount;
    uint64_t version; /* bumped by in-place ops; checked by saved tensors */
    size_t nbytes;
    void *data;        /* 64-byte aligned, except for EXTERNAL storage */
    uint8_t kind;      /* a jg_storage_kind (a byte: room for pinned in the 40 bytes) */
    bool pinned;       /* its address left the library (jg_data): the memory never moves */
    uint32_t trace_id; /* jg_trace_capture when it was made: made by the program being traced */
} jg_storage;

/* A differentiable view's link to its base (ops/viewtrack.c): the root tensor
 * whose storage (traced: whose value) it views and the view ops that remake
 * it from that root.  An in-place op on the root or on any of its views gives
 * the root a new history; a view whose recorded version is stale remakes its
 * own history from the root's before it is used (PyTorch's view rebasing). */
typedef struct jg_view_info {
    jg_tensor *base;  /* retained; never a tracked view itself */
    uint64_t version; /* the base's version when the view's history was made */
    bool no_grad;     /* made without grad mode: never takes history from the base */
    int n_steps;
    void *steps; /* the ops layer's view steps (malloc'd; freed with the info) */
} jg_view_info;

/* Data of at most this many bytes is stored inside the tensor struct. */
#define JG_INLINE_BYTES 64

/* What allocation, release and autograd read comes first (64 bytes: structs
 * are allocated 64-byte aligned, so that is one cache line), then the inline
 * storage header and the geometry, then inline data: a 1-D tensor with
 * inline data touches 4 of the struct's 5 cache lines. */
struct jg_tensor {
    int64_t refcount;
    jg_storage *storage; /* NULL for a symbolic (traced) tensor */
    jg_tensor *grad;
    jg_node *grad_fn; /* NULL for leaves */
    jg_sym *sym;      /* non-NULL for a symbolic tensor: points into inline_data */
    jg_dtype dtype;
    int ndim;
    int output_nr; /* which output of grad_fn this tensor is */
    bool requires_grad;
    bool is_view; /* shares storage with the tensor it was made from */
    /* a view made in no_grad mode of a tensor that requires grad: it
     * requires grad too, but while it has no grad_fn the gradients that
     * reach it are dropped (no edge leads to it), as in PyTorch.  Traced:
     * any view made in no_grad mode (or of such a view), whatever its base
     * (a traced view's record cannot say it: it follows its base's value) */
    bool no_grad_view;
    bool has_grad_hooks : 1; /* autograd/hooks.c holds hooks for it */
    /* a view that a custom function returned as a differentiable output (or
     * a view of one): an in-place op on it in grad mode is refused, its
     * history (through the base) would bypass the function's backward.
     * PyTorch's creation metas IN_CUSTOM_FUNCTION and, with _multi (the
     * function had several differentiable outputs), MULTI_OUTPUT_NODE */
    bool custom_view : 1;
    bool custom_view_multi : 1;
    int64_t offset; /* in elements */
    int64_t numel;
    jg_view_info *view; /* NULL unless a tracked differentiable view */
    /* kind JG_STORAGE_INLINE when storage points here; a traced tensor has
     * no storage and counts the in-place writes it received in .version */
    jg_storage inline_storage;
    /* only the first ndim entries of shape and stride are meaningful */
    int64_t shape[JG_MAX_DIMS];
    int64_t stride[JG_MAX_DIMS]; /* in elements */
    _Alignas(64) unsigned char inline_data[JG_INLINE_BYTES];
};

/* Symbolic tensor s takes concrete r's memory, layout and history in place
 * (s's view link stays): a program run in pieces turns the stand-ins it
 * still holds into the values a piece computed (compile/segments.c).  The
 * same dtype and shape. */
void jg_tensor_become(jg_tensor *s, jg_tensor *r);

/* dst takes src's memory as its new value, src gets dst's old memory, when
 * no one can tell the memory moved: each is the one tensor over a block
 * storage of its own (same size, contiguous from offset 0, no view, no
 * address handed out by jg_data) and nothing else holds src.  Each keeps its
 * version counter.  A compiled call's write-back of a new value (compiled
 * mutation) is then a swap instead of a copy.  Returns false, changing
 * nothing, when any condition fails: the caller copies. */
bool jg_tensor_take_memory(jg_tensor *dst, jg_tensor *src);

/* Whether t may be handed over as a tensor of its own (a gradient stored as
 * .grad without a copy, as PyTorch's AccumulateGrad steals one): nothing
 * else holds t or its memory, which it covers densely from offset 0, and
 * that address never left the library.  A view whose base is gone passes
 * and stops being a view (a copy would not be one either).  Returns false,
 * changing nothing, when a condition fails: the caller copies. */
bool jg_tensor_claim(jg_tensor *t);

/* Shape and dtype of a value without data: what shape rules compute. */
typedef struct jg_meta {
    jg_dtype dtype;
    int ndim;
    int64_t shape[JG_MAX_DIMS];
} jg_meta;

/* ---- errors ---- */
/* Sets this thread's error (printf-style) and returns -1, so `return
 * jg_errorf(...)` reads naturally. */
int jg_errorf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void *jg_errorf_null(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Broken internal invariant: print and abort. */
_Noreturn void jg_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define JG_ASSERT(c)                                                                               \
    do {                                                                                           \
        if (!(c))                                                                                  \
            jg_fatal("%s:%d: internal invariant failed: %s", __FILE__, __LINE__, #c);              \
    } while (0)

/* ---- dtypes ---- */
_Noreturn void jg_dtype_bad(jg_dtype d);
/* Bytes per element (inline: every kernel's pointer arithmetic uses it). */
static inline size_t jg_dtype_size(jg_dtype d) {
    switch (d) {
    case JG_F32:
    case JG_I32:
        return 4;
    case JG_F64:
    case JG_I64:
        return 8;
    case JG_BOOL:
        return 1;
    }
    jg_dtype_bad(d);
}
/* How many dtypes there are: tables indexed by dtype have this many rows. */
#define JG_NDTYPES 5
/* "f32", as the IR printer and jg_describe write dtypes. */
const char *jg_dtype_short(jg_dtype d);
/* "Float", "Double", "Long", "Bool", "Int": PyTorch's scalar type names in its messages. */
const char *jg_dtype_torch_name(jg_dtype d);
bool jg_dtype_is_float(jg_dtype d);
/* int32, int64 (not bool) */
bool jg_dtype_is_int(jg_dtype d);
bool jg_dtype_valid(int d);
jg_dtype jg_dtype_promote(jg_dtype a, jg_dtype b);
/* The element of dtype d at p, as a double (bool: 0 or 1). */
double jg_elem_to_double(jg_dtype d, const void *p);
/* "[2, 3]" */
void jg_format_shape(char *buf, size_t n, int ndim, const int64_t *shape);

/* ---- tensors ---- */
/* A new contiguous tensor with uninitialised data; not registered in a scope. */
jg_tensor *jg_tensor_alloc(jg_dtype dtype, int ndim, const int64_t *shape);
/* A new tensor struct viewing t's storage with the given geometry. */
jg_tensor *jg_tensor_view_of(jg_tensor *t, int ndim, const int64_t *shape, const int64_t *stride,
                             int64_t offset);
/* Symbolic tensor: geometry only, no storage. */
jg_tensor *jg_tensor_symbolic(const jg_meta *m, const jg_sym *sym); /* copies *sym */
void jg_meta_of(const jg_tensor *t, jg_meta *m);
bool jg_meta_equal(const jg_meta *a, const jg_meta *b);
int64_t jg_shape_numel(int ndim, const int64_t *shape);
void jg_contiguous_strides(int ndim, const int64_t *shape, int64_t *stride);
static inline char *jg_tensor_ptr(const jg_tensor *t) {
    return (char *)t->storage->data + t->offset * (int64_t)jg_dtype_size(t->dtype);
}
/* Laid out densely in row-major order (size-1 dims may have any stride):
 * what jg_is_contiguous answers, inline for the hot paths. */
static inline bool jg_dense(const jg_tensor *t) {
    if (t->ndim == 1)
        return t->stride[0] == 1 || t->shape[0] == 1;
    int64_t s = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] != 1 && t->stride[d] != s)
            return false;
        s *= t->shape[d];
    }
    return true;
}
static inline bool jg_same_shape(const jg_tensor *a, const jg_tensor *b) {
    if (a->ndim != b->ndim)
        return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d])
            return false;
    return true;
}
/* Register a new reference with the innermost scope (if any); returns t. */
jg_tensor *jg_scope_track(jg_tensor *t);
/* A lighter jg_scope_push/pop pair for a loop inside an open scope: the
 * innermost scope's current height, and releasing what was tracked since. */
size_t jg_scope_mark(void);
void jg_scope_release_to(size_t mark);
/* Error text "jg_item: ..." if t is symbolic; also notifies the tracer. */
int jg_check_concrete(const jg_tensor *t, const char *what);

/* ---- deferred release: frees long chains without recursion ---- */
void jg_node_retain(jg_node *n);
void jg_node_release(jg_node *n);

/* ---- hooks installed by higher layers (data flows down; calls go up only
 * through these) ---- */
typedef struct jg_core_hooks {
    /* Called when a symbolic (or captured) tensor's values are read; `what`
     * names the read.  True when the tracer made t concrete (a program run
     * in pieces: compile/segments.c), so the read goes on. */
    bool (*on_symbolic_read)(const jg_tensor *t, const char *what);
    /* Called for every new symbolic tensor (the tracer keeps the ones of a
     * program run in pieces). */
    void (*on_symbolic_new)(jg_tensor *t);
    /* Hides every open trace frame (nothing is traced or captured) until
     * trace_resume(the returned value): work a program run in pieces does
     * eagerly between two pieces. */
    uint64_t (*trace_suspend)(void);
    void (*trace_resume)(uint64_t saved);
    /* Called when a program being traced does what a graph cannot hold
     * (draws random numbers, writes into a captured tensor): a graph break,
     * `why` its reason. */
    void (*on_untraceable)(const char *why);
    /* Destroys a node (autograd layer). */
    void (*node_destroy)(jg_node *n);
    /* Makes the open trace frame of graph `graph` (a jg_sym.graph) the
     * innermost one until leave_graph(*save): work on a tensor of an
     * enclosing trace (bringing a view of it up to date) is then recorded in
     * that tensor's own graph.  False, changing nothing, when no enclosing
     * frame traces it. */
    bool (*enter_graph)(uint64_t graph, uint64_t *save);
    void (*leave_graph)(uint64_t save);
    /* Whether the innermost trace frame is a compiled program's own (it
     * lifts outside tensors into graph inputs and writes them back): random
     * draws are graph ops there. */
    bool (*lifting)(void);
    /* An in-place op is about to write tensor t, captured from outside the
     * program being traced (other: its other operand, or NULL): a symbolic
     * stand-in holding t's current value in the program's graph (a new
     * reference) to run the op on, or NULL with the reason in why when the
     * write cannot be traced (a graph break).  After the op wrote the
     * stand-in, captured_write_end makes its value t's value in the graph
     * (jg_compile writes it back into t after each call). */
    jg_tensor *(*captured_write_begin)(jg_tensor *t, const jg_tensor *other, char *why,
                                       size_t why_size);
    int (*captured_write_end)(jg_tensor *t, jg_tensor *stand_in);
    /* The program being traced read the .grad (NULL: none) of tensor t,
     * captured from outside it (jg_compile reads it again at every call).
     * True when the trace holds t's .grad itself (a traced backward or
     * assignment wrote it): *as_traced is what the program sees (NULL: none). */
    bool (*on_grad_read)(jg_tensor *t, jg_tensor *grad, jg_tensor **as_traced);
    /* The program being traced sets captured tensor t's .grad to None: 0
     * when the trace records it, else -1 (a graph break). */
    int (*on_grad_clear)(jg_tensor *t);
    /* An in-place op writes traced tensor `root` (the written tensor, or
     * the base of the written view: via_view).  With grad mode on, eager
     * mode would check for a leaf that requires grad: jg_compile checks the
     * first such write of each input at every call.  Without grad mode,
     * eager keeps a tensor's history through the write, which a traced
     * value cannot: a later use or write of it with grad mode on is a graph
     * break (-1 + error), as is such a write here. */
    int (*traced_write)(const jg_tensor *root, bool via_view);
    /* backward() on symbolic root (grad: NULL or its gradient) while a
     * program is traced: 0 (the backward was traced), -1 + error, or 1 when
     * it cannot be traced (a graph break). */
    int (*trace_backward)(jg_tensor *root, jg_tensor *grad, unsigned flags);
    /* jg_autograd_grad with a symbolic output while a program is traced
     * (its arguments): 0 (traced: results are symbolic tensors of the
     * program, tracked in the caller's scope), -1 + error, or 1 when it
     * cannot be traced (a graph break). */
    int (*trace_grad)(int n_out, jg_tensor *const *outs, jg_tensor *const *gouts, int n_in,
                      jg_tensor *const *ins, unsigned flags, jg_tensor **results);
    /* A tensor with has_grad_hooks dies: drop its hooks (autograd layer). */
    void (*grad_hooks_free)(jg_tensor *t);
    /* Whether the program being traced wrote captured tensor t in place
     * (a traced write: t itself holds its old value until the call, or the
     * piece, runs). */
    bool (*captured_written)(const jg_tensor *t);
} jg_core_hooks;
extern jg_core_hooks jg_hooks;

/* This thread's random generator state (jg_compile keeps a trace from
 * consuming random numbers). */
uint64_t jg_rng_state(void);
void jg_rng_set_state(uint64_t state);
/* Random draws (from any generator) after a checkpoint are undone by
 * rolling back to its mark, innermost first (jg_compile keeps a trace from
 * consuming random numbers). */
int jg_rng_checkpoint(void);
void jg_rng_rollback(int mark);
/* The generator's next 64 random bits (advances the state). */
uint64_t jg_rng_next(void);
/* Counter-based draws: draw k (from 1) of a generator at state s is
 * jg_rng_mix(s + k * JG_RNG_GAMMA), and n draws leave the state at
 * s + n * JG_RNG_GAMMA, so a range of draws can be computed from the state
 * alone (the graph ops rng_uniform / rng_normal, ops/random.c). */
#define JG_RNG_GAMMA 0x9e3779b97f4a7c15ULL
uint64_t jg_rng_mix(uint64_t z);
/* Takes n draws from the current generator (journaled like jg_rng_next):
 * returns the state before them. */
uint64_t jg_rng_take(uint64_t n);
/* Fills t (f32 or f64, contiguous) as jg_rand / jg_randn do from state s;
 * the draws that takes. */
uint64_t jg_rng_fill_uniform(jg_tensor *t, uint64_t s);
uint64_t jg_rng_fill_normal(jg_tensor *t, uint64_t s);
/* A 0-d int64 tensor over the current generator's state (borrowed; lives as
 * long as the generator): what a compiled program reads and writes back to
 * draw random numbers inside its graph. */
jg_tensor *jg_rng_state_tensor(void);
/* jg_rand (normal false) / jg_randn computed now, whatever the trace. */
jg_tensor *jg_rng_draw(bool normal, jg_dtype dtype, int ndim, const int64_t *shape);

/* Whether JITGRAD_LOG names `topic` (or "all"). */
bool jg_log_topic(const char *topic);

/* Grad mode (thread-local). */
extern _Thread_local bool jg_grad_mode;

/* Nonzero while the innermost trace frame captures every tensor the program
 * reaches (jg_compile's frame; src/trace): the frame's id.  Ops on concrete
 * tensors are then traced too, and storages made meanwhile carry the id (a
 * tensor the program created, not one it captured).  Eager code pays one
 * thread-local read. */
extern _Thread_local uint32_t jg_trace_capture;
/* A tensor that exists outside the program jg_compile is tracing (captured
 * from its scope), as opposed to one the program made during the trace. */
static inline bool jg_trace_captured(const jg_tensor *t) {
    return jg_trace_capture && t->storage && t->storage->trace_id != jg_trace_capture;
}

#endif
