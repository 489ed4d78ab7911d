/* IR graphs: arena, builders and the edits passes make. */
#include "graph/graph.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ arena */

struct jg_arena_chunk {
    jg_arena_chunk *next;
    size_t used, cap;
    _Alignas(16) char data[];
};

#define ARENA_CHUNK 8192

void *jg_arena_alloc(jg_arena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    jg_arena_chunk *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > ARENA_CHUNK ? n : ARENA_CHUNK;
        c = malloc(sizeof *c + cap);
        if (!c)
            return jg_errorf_null("out of memory in a graph arena");
        c->cap = cap;
        c->used = 0;
        c->next = a->head;
        a->head = c;
    }
    void *p = c->data + c->used;
    c->used += n;
    memset(p, 0, n);
    return p;
}

char *jg_arena_strdup(jg_arena *a, const char *s) {
    size_t n = strlen(s) + 1;
    char *p = jg_arena_alloc(a, n);
    if (p)
        memcpy(p, s, n);
    return p;
}

void jg_arena_free(jg_arena *a) {
    while (a->head) {
        jg_arena_chunk *n = a->head->next;
        free(a->head);
        a->head = n;
    }
}

/* Grows an arena array (old storage is simply abandoned to the arena). */
static int grow(jg_arena *a, void **arr, int *cap, int need, size_t elem) {
    if (need <= *cap)
        return 0;
    int ncap = *cap ? *cap * 2 : 16;
    while (ncap < need)
        ncap *= 2;
    void *n = jg_arena_alloc(a, (size_t)ncap * elem);
    if (!n)
        return -1;
    if (*arr)
        memcpy(n, *arr, (size_t)*cap * elem);
    *arr = n;
    *cap = ncap;
    return 0;
}
#define GROW(g, arr, cap, need) grow(&(g)->arena, (void **)&(arr), &(cap), (need), sizeof *(arr))

/* ------------------------------------------------------------------ graph */

jg_graph *jg_graph_new(void) {
    jg_graph *g = calloc(1, sizeof *g);
    if (!g)
        return jg_errorf_null("out of memory allocating a graph");
    g->name = "graph";
    static _Atomic uint64_t last_id;
    g->id = atomic_fetch_add(&last_id, 1) + 1;
    return g;
}

/* A custom call's state belongs to the graph that recorded the call. */
static void free_custom_state(jg_graph *g, jg_gnode *n) {
    jg_gcustom *c = n->kind == JG_GN_CUSTOM ? n->custom : NULL;
    if (c && c->owner == g && c->free_state) {
        c->free_state(c->state);
        c->free_state = NULL;
        c->state = NULL;
    }
}

void jg_graph_free(jg_graph *g) {
    if (!g)
        return;
    for (int i = 0; i < g->n_nodes; i++)
        free_custom_state(g, &g->nodes[i]);
    for (int i = 0; i < g->n_children; i++)
        jg_graph_free(g->children[i]);
    for (int i = 0; i < g->n_consts; i++)
        jg_release(g->consts[i]);
    jg_arena_free(&g->arena);
    free(g);
}

jg_graph *jg_graph_new_child(jg_graph *parent) {
    if (GROW(parent, parent->children, parent->cap_children, parent->n_children + 1) < 0)
        return NULL;
    jg_graph *c = jg_graph_new();
    if (c)
        parent->children[parent->n_children++] = c;
    return c;
}

int jg_graph_adopt(jg_graph *parent, jg_graph *child) {
    if (GROW(parent, parent->children, parent->cap_children, parent->n_children + 1) < 0)
        return -1;
    parent->children[parent->n_children++] = child;
    return 0;
}

static int new_value(jg_graph *g, jg_val_kind kind, int node, int index, const jg_meta *m,
                     bool rg) {
    if (GROW(g, g->vals, g->cap_vals, g->n_vals + 1) < 0)
        return -1;
    jg_value *v = &g->vals[g->n_vals];
    v->kind = kind;
    v->node = node;
    v->index = index;
    v->meta = *m;
    v->requires_grad = rg;
    v->uses = 0;
    return g->n_vals++;
}

int jg_graph_add_input(jg_graph *g, const jg_meta *m, bool requires_grad, const char *name) {
    int cap = g->cap_inputs;
    if (GROW(g, g->inputs, cap, g->n_inputs + 1) < 0 ||
        GROW(g, g->input_names, g->cap_inputs, g->n_inputs + 1) < 0)
        return -1;
    int v = new_value(g, JG_VAL_INPUT, -1, g->n_inputs, m, requires_grad);
    if (v < 0)
        return -1;
    char buf[32];
    if (!name) {
        snprintf(buf, sizeof buf, "x%d", g->n_inputs);
        name = buf;
    }
    if (!(g->input_names[g->n_inputs] = jg_arena_strdup(&g->arena, name)))
        return -1;
    g->inputs[g->n_inputs++] = v;
    return v;
}

int jg_graph_add_const(jg_graph *g, jg_tensor *t) {
    int cap = g->cap_consts;
    if (GROW(g, g->consts, cap, g->n_consts + 1) < 0 ||
        GROW(g, g->const_vals, g->cap_consts, g->n_consts + 1) < 0)
        return -1;
    jg_meta m;
    jg_meta_of(t, &m);
    int v = new_value(g, JG_VAL_CONST, -1, g->n_consts, &m, false);
    if (v < 0)
        return -1;
    g->consts[g->n_consts] = jg_retain(t);
    g->const_vals[g->n_consts++] = v;
    return v;
}

static int add_node(jg_graph *g, jg_gnode_kind kind, int n_in, const int *in, int n_out,
                    const jg_meta *out_meta, const bool *rg_each, bool rg_all, int *out_vals) {
    if (GROW(g, g->nodes, g->cap_nodes, g->n_nodes + 1) < 0)
        return -1;
    int *ins = jg_arena_alloc(&g->arena, (size_t)(n_in ? n_in : 1) * sizeof *ins);
    int *outs = jg_arena_alloc(&g->arena, (size_t)(n_out ? n_out : 1) * sizeof *outs);
    if (!ins || !outs)
        return -1;
    int idx = g->n_nodes;
    for (int k = 0; k < n_in; k++) {
        JG_ASSERT(in[k] >= 0 && in[k] < g->n_vals);
        ins[k] = in[k];
    }
    for (int k = 0; k < n_out; k++) {
        bool rg = rg_each ? rg_each[k] : rg_all;
        if ((outs[k] = new_value(g, JG_VAL_NODE, idx, k, &out_meta[k], rg)) < 0)
            return -1;
        if (out_vals)
            out_vals[k] = outs[k];
    }
    for (int k = 0; k < n_in; k++)
        g->vals[in[k]].uses++;
    jg_gnode *n = &g->nodes[idx];
    memset(n, 0, sizeof *n);
    n->kind = kind;
    n->n_in = n_in;
    n->n_out = n_out;
    n->in = ins;
    n->out = outs;
    g->n_nodes++;
    return idx;
}

int jg_graph_add_op(jg_graph *g, jg_opcode op, const jg_attrs *a, int n_in, const int *in,
                    const jg_meta *out_meta, bool requires_grad, int *out_vals) {
    const jg_op_info *info = &jg_ops[op];
    JG_ASSERT(n_in == info->n_in);
    bool rg[4];
    for (int k = 0; k < info->n_out; k++)
        rg[k] = requires_grad && jg_dtype_is_float(out_meta[k].dtype);
    int idx = add_node(g, JG_GN_OP, n_in, in, info->n_out, out_meta, rg, false, out_vals);
    if (idx < 0)
        return -1;
    g->nodes[idx].op = op;
    if (a)
        g->nodes[idx].attrs = *a;
    return idx;
}

int jg_graph_add_custom(jg_graph *g, const jg_gcustom *custom, int n_in, const int *in, int n_out,
                        const jg_meta *out_meta, const bool *out_requires_grad, int *out_vals) {
    jg_gcustom *c = jg_arena_alloc(&g->arena, sizeof *c);
    if (!c)
        return -1;
    *c = *custom;
    c->owner = g;
    if (custom->args_size) {
        if (!(c->args = jg_arena_alloc(&g->arena, custom->args_size)))
            return -1;
        memcpy(c->args, custom->args, custom->args_size);
    }
    int n_slots = custom->slot_map ? custom->n_slots : n_in;
    c->n_slots = n_slots;
    if (!(c->slot_map = jg_arena_alloc(&g->arena, (size_t)(n_slots ? n_slots : 1) * sizeof(int))))
        return -1;
    for (int s = 0; s < n_slots; s++)
        c->slot_map[s] = custom->slot_map ? custom->slot_map[s] : s;
    int idx =
        add_node(g, JG_GN_CUSTOM, n_in, in, n_out, out_meta, out_requires_grad, false, out_vals);
    if (idx < 0)
        return -1;
    g->nodes[idx].custom = c;
    return idx;
}

int jg_graph_set_outputs(jg_graph *g, int n, const int *vals) {
    for (int k = 0; k < g->n_outputs; k++)
        if (g->outputs[k] >= 0)
            g->vals[g->outputs[k]].uses--;
    int *o = jg_arena_alloc(&g->arena, (size_t)(n ? n : 1) * sizeof *o);
    if (!o)
        return -1;
    for (int k = 0; k < n; k++) {
        o[k] = vals[k];
        if (vals[k] >= 0)
            g->vals[vals[k]].uses++;
    }
    g->outputs = o;
    g->n_outputs = n;
    return 0;
}

void jg_graph_replace_uses(jg_graph *g, int from, int to) {
    if (from == to)
        return;
    for (int i = 0; i < g->n_nodes; i++) {
        jg_gnode *n = &g->nodes[i];
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] == from) {
                n->in[k] = to;
                g->vals[from].uses--;
                g->vals[to].uses++;
            }
    }
    for (int k = 0; k < g->n_outputs; k++)
        if (g->outputs[k] == from) {
            g->outputs[k] = to;
            g->vals[from].uses--;
            g->vals[to].uses++;
        }
}

void jg_graph_remove_nodes(jg_graph *g, const bool *dead) {
    int w = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        jg_gnode *n = &g->nodes[i];
        if (dead[i]) {
            free_custom_state(g, n);
            for (int k = 0; k < n->n_in; k++)
                g->vals[n->in[k]].uses--;
            for (int k = 0; k < n->n_out; k++) {
                JG_ASSERT(g->vals[n->out[k]].uses == 0);
                g->vals[n->out[k]].kind = JG_VAL_DEAD;
                g->vals[n->out[k]].node = -1;
            }
            continue;
        }
        if (w != i) {
            g->nodes[w] = *n;
            for (int k = 0; k < n->n_out; k++)
                g->vals[n->out[k]].node = w;
        }
        w++;
    }
    g->n_nodes = w;
}

static void *dup_arena(jg_arena *a, const void *src, size_t n) {
    void *p = jg_arena_alloc(a, n ? n : 1);
    if (p && n)
        memcpy(p, src, n);
    return p;
}

jg_graph *jg_graph_clone(const jg_graph *g) {
    jg_graph *c = jg_graph_new();
    if (!c)
        return NULL;
    jg_arena *a = &c->arena;
    uint64_t id = c->id;
    *c = *g;
    c->id = id;
    c->arena = (jg_arena){0};
    c->children = NULL;
    c->n_children = c->cap_children = 0;
    c->consts = NULL; /* set below, after the arrays exist */
    c->n_consts = 0;
    c->vals = dup_arena(a, g->vals, (size_t)g->cap_vals * sizeof *g->vals);
    c->nodes = dup_arena(a, g->nodes, (size_t)g->cap_nodes * sizeof *g->nodes);
    c->inputs = dup_arena(a, g->inputs, (size_t)g->cap_inputs * sizeof *g->inputs);
    c->input_names = dup_arena(a, g->input_names, (size_t)g->cap_inputs * sizeof(char *));
    c->const_vals = dup_arena(a, g->const_vals, (size_t)g->cap_consts * sizeof(int));
    c->outputs = dup_arena(a, g->outputs, (size_t)g->n_outputs * sizeof(int));
    jg_tensor **consts = dup_arena(a, g->consts, (size_t)g->cap_consts * sizeof(jg_tensor *));
    if (!c->vals || !c->nodes || !c->inputs || !c->input_names || !c->const_vals || !c->outputs ||
        !consts) {
        jg_graph_free(c);
        return NULL;
    }
    for (int i = 0; i < g->n_inputs; i++)
        if (!(c->input_names[i] = jg_arena_strdup(a, g->input_names[i]))) {
            jg_graph_free(c);
            return NULL;
        }
    for (int i = 0; i < g->n_nodes; i++) {
        jg_gnode *n = &c->nodes[i];
        n->in = dup_arena(a, n->in, (size_t)n->n_in * sizeof(int));
        n->out = dup_arena(a, n->out, (size_t)n->n_out * sizeof(int));
        if (!n->in || !n->out) {
            jg_graph_free(c);
            return NULL;
        }
        /* custom call records (and their subgraphs) stay shared with g: a
         * clone must not outlive the graph it was made from */
    }
    c->consts = consts;
    for (int i = 0; i < g->n_consts; i++)
        jg_retain(consts[i]);
    c->n_consts = g->n_consts;
    return c;
}
