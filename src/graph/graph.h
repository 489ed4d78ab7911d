/* The IR: a graph of SSA values and nodes in topological order.
 *
 * Values are numbered 0..n_vals in a graph; each is defined exactly once, by
 * a graph input (placeholder), a constant (a retained concrete tensor) or one
 * output of a node.  Nodes are kept in topological (= execution) order; a
 * node names its operands by value id, one operand per input SLOT (mul(x, x)
 * has operands {x, x}: two uses of one value).  Every value carries its
 * dtype/shape (jg_meta), whether it requires grad, and its use count (operand
 * slots plus graph-output positions that name it).
 *
 * Node kinds:
 *   JG_GN_OP      a row of the op table (jg_opcode + jg_attrs).
 *   JG_GN_CUSTOM  a custom function call (jg_apply): holds the jg_function,
 *                 a copy of its non-tensor args, a forward and a backward
 *                 subgraph and a slot_map (slot -> operand after dedup).
 *                 The fields exist; the tracer/autodiff/interp support is
 *                 added on top of this IR (see docs/compiler.md).
 *
 * Memory: everything a graph allocates (values, nodes, operand lists, names,
 * custom args) comes from the graph's arena and is freed at once by
 * jg_graph_free; constants are retained tensors released there; subgraphs
 * are owned by their parent and freed with it.  Symbolic tensors name a
 * graph by its id, so they may outlive it. */
#ifndef JG_GRAPH_GRAPH_H
#define JG_GRAPH_GRAPH_H

#include "ops/optable.h"

/* ---- arena ---- */
typedef struct jg_arena_chunk jg_arena_chunk;
typedef struct jg_arena {
    jg_arena_chunk *head;
} jg_arena;
void *jg_arena_alloc(jg_arena *a, size_t n); /* zeroed, 16-aligned; NULL + error */
char *jg_arena_strdup(jg_arena *a, const char *s);
void jg_arena_free(jg_arena *a);

/* ---- values ---- */
typedef enum {
    JG_VAL_INPUT, /* placeholder: graph input number `index` */
    JG_VAL_CONST, /* constant number `index` (g->consts[index]) */
    JG_VAL_NODE,  /* output `index` of node `node` */
    JG_VAL_DEAD,  /* its defining node was removed by a pass */
} jg_val_kind;

typedef struct jg_value {
    jg_val_kind kind;
    int node;  /* JG_VAL_NODE: defining node's position in g->nodes */
    int index; /* input / constant / output number */
    jg_meta meta;
    bool requires_grad; /* the eager rule: derived from a requires-grad input */
    int uses;           /* operand slots + graph output positions naming it */
} jg_value;

/* ---- nodes ---- */
typedef enum { JG_GN_OP, JG_GN_CUSTOM } jg_gnode_kind;

typedef struct jg_graph jg_graph;

/* A custom function call (jg_apply) captured as one node. */
typedef struct jg_gcustom {
    const jg_function *fn;
    void *args; /* copy of the call's non-tensor args (part of the guard) */
    size_t args_size;
    jg_graph *fwd;    /* one placeholder per slot -> the call's outputs */
    jg_graph *bwd;    /* (output grads, saved values, kept values) -> one value per slot, -1 =
                         none: when set, autodiff replays it instead of tracing the backward
                         callback (an instance of a dynamic-size entry, compile/dynamic.c) */
    uint64_t kept_id; /* the id of the forward subgraph as traced: the ctx's kept tensors
                         name it (a copy of the record has a forward of another id) */
    int n_slots;
    int *slot_map;        /* slot -> operand index (identity before dedup) */
    int n_call_out;       /* outputs [0, n_call_out) are the call's; the rest are values the
                             forward saved for backward (0: all are the call's) */
    bool opaque;          /* callbacks run at run time (they touched raw data) */
    bool opaque_backward; /* the backward half of an opaque call (see trace/custom.h) */
    bool no_grads;        /* that half, reached without gradients (materialize off): operands
                             are every output with history, then the leaves */
    void *user;           /* for whatever the custom path needs to keep */
    /* per-call state freed with the graph that made the record (clones share
     * records and do not free them) */
    void *state;
    void (*free_state)(void *);
    jg_graph *owner;
} jg_gcustom;

typedef struct jg_gnode {
    jg_gnode_kind kind;
    jg_opcode op; /* JG_GN_OP */
    jg_attrs attrs;
    int n_in, n_out;
    int *in;            /* operand value ids */
    int *out;           /* output value ids */
    jg_gcustom *custom; /* JG_GN_CUSTOM */
} jg_gnode;

/* A node's input slots: a custom call's slots map to its (deduplicated)
 * operands through slot_map; an op's slots are its operands.  The one place
 * that mapping is spelled out. */
static inline int jg_gnode_n_slots(const jg_gnode *n) {
    return n->kind == JG_GN_CUSTOM ? n->custom->n_slots : n->n_in;
}
static inline int jg_gnode_slot_value(const jg_gnode *n, int s) {
    return n->kind == JG_GN_CUSTOM ? n->in[n->custom->slot_map[s]] : n->in[s];
}

struct jg_graph {
    jg_arena arena;
    jg_value *vals;
    int n_vals, cap_vals;
    jg_gnode *nodes;
    int n_nodes, cap_nodes;
    int *inputs; /* value id of each placeholder */
    const char **input_names;
    int n_inputs, cap_inputs;
    jg_tensor **consts; /* retained */
    int *const_vals;
    int n_consts, cap_consts;
    int *outputs; /* value ids; -1 = "none" (a backward graph's missing gradient) */
    int n_outputs;
    jg_graph **children; /* subgraphs owned by this graph */
    int n_children, cap_children;
    const char *name; /* "graph" unless set */
    uint64_t id;      /* unique for the process's lifetime (symbolic tensors name it) */
};

jg_graph *jg_graph_new(void);
void jg_graph_free(jg_graph *g); /* also frees subgraphs, releases constants */
/* A copy with the same value ids (constants retained again).  Custom call
 * records and subgraphs are shared, so the copy must not outlive g. */
jg_graph *jg_graph_clone(const jg_graph *g);
/* A graph owned (and freed) by parent, e.g. a custom node's subgraph. */
jg_graph *jg_graph_new_child(jg_graph *parent);
/* Makes child (a graph of its own) a subgraph parent owns and frees.  0 or
 * -1 + error (child is then not owned). */
int jg_graph_adopt(jg_graph *parent, jg_graph *child);

/* Builders: return the new value id, or -1 + error (out of memory). */
int jg_graph_add_input(jg_graph *g, const jg_meta *m, bool requires_grad, const char *name);
int jg_graph_add_const(jg_graph *g, jg_tensor *t); /* retains t */
/* Appends an op node; operands must be existing values.  out_vals (may be
 * NULL) receives the ids of its n_out outputs.  Returns the node index. */
int jg_graph_add_op(jg_graph *g, jg_opcode op, const jg_attrs *a, int n_in, const int *in,
                    const jg_meta *out_meta, bool requires_grad, int *out_vals);
/* Appends a custom node with operands in[0..n_in); slot_map may be NULL
 * (identity, n_slots == n_in).  custom->args is copied into the arena. */
int jg_graph_add_custom(jg_graph *g, const jg_gcustom *custom, int n_in, const int *in, int n_out,
                        const jg_meta *out_meta, const bool *out_requires_grad, int *out_vals);
/* Sets the graph outputs (-1 entries allowed); counts their uses. */
int jg_graph_set_outputs(jg_graph *g, int n, const int *vals);
/* Replaces every use of value `from` by `to` (operands and outputs). */
void jg_graph_replace_uses(jg_graph *g, int from, int to);
/* Drops nodes flagged dead[i] (their outputs must be unused); keeps order. */
void jg_graph_remove_nodes(jg_graph *g, const bool *dead);

/* Printer: torch.fx-like text (caller frees).  See docs/compiler.md. */
char *jg_graph_print(const jg_graph *g);
/* Appends the printed graph to *buf (realloc'd; *len updated).  0 or -1. */
int jg_graph_print_to(const jg_graph *g, char **buf, size_t *len, size_t *cap);

/* Verifier: checks every invariant; -1 with a message naming the broken one. */
int jg_graph_verify(const jg_graph *g);

#endif
