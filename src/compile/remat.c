/* Rematerialization in the forward/backward partition (c backend).
 *
 * A forward value the backward reads is normally stored by the forward (an
 * extra output) and loaded back by the backward.  When it is a short chain
 * of cheap elementwise ops over values the backward reads anyway, the
 * backward graph recomputes it instead: the forward stores one array less,
 * the backward loads one array less and computes a few operations in its
 * fused loop.  The recompute is the forward's own nodes (same ops, same
 * attributes, same operand values), so its bits are the forward's.
 *
 * Only safe cases:
 * - the value is produced by an op node (no custom call), requires grad
 *   (the create_graph rerun recomputes such values anyway; values without
 *   history stay saved, see cnode.c), is no program output and is read by
 *   no view op, so no tensor the user holds shares its storage: nothing can
 *   change it in place, and eager's version check on it could never fail;
 * - every tensor the recompute reads is saved for the backward anyway and
 *   version-checked there (an in-place change of it fails the backward with
 *   eager's message before anything is computed from it), and stays saved;
 * - every graph input the value is computed from (through any node) is
 *   such a saved, checked tensor: a create_graph rerun recomputes from the
 *   inputs as they are then and restores only saved values, so a value
 *   derived from an input changed in place unnoticed must stay saved;
 * - the ops are pure, cheap elementwise ones (no tanh, exp, division) and a
 *   chain is at most JG_REMAT_MAX_NODES long. */
#include "compile/compile.h"

#include "core/tensor.h"
#include "ops/optable.h"

#include <stdlib.h>
#include <string.h>

#define JG_REMAT_MAX_NODES 4

static bool cheap_op(jg_opcode op) {
    switch (op) {
    case JG_OP_ADD:
    case JG_OP_SUB:
    case JG_OP_MUL:
    case JG_OP_NEG:
    case JG_OP_ABS:
    case JG_OP_RELU:
    case JG_OP_ADD_SCALAR:
    case JG_OP_MUL_SCALAR:
    case JG_OP_CLAMP_MIN:
    case JG_OP_CLAMP_MAX:
    case JG_OP_MAXIMUM:
    case JG_OP_MINIMUM:
        return (jg_ops[op].flags & JG_OPF_ELEMENTWISE) && !(jg_ops[op].flags & JG_OPF_NOFUSE);
    default:
        return false;
    }
}

typedef struct {
    const jg_graph *f;
    const bool *leaf;    /* per forward value: saved, checked, not rematerialized */
    const bool *exposed; /* per forward value: a program output or read by a view op */
} remat_ctx;

/* Number of nodes recomputing v takes (0: v is a leaf), or -1 when v cannot
 * be recomputed within budget nodes. */
static int chain_cost(const remat_ctx *c, int v, int budget) {
    if (c->leaf[v])
        return 0;
    const jg_value *val = &c->f->vals[v];
    if (val->kind != JG_VAL_NODE || c->exposed[v] || budget <= 0)
        return -1;
    const jg_gnode *n = &c->f->nodes[val->node];
    if (n->kind != JG_GN_OP || n->n_out != 1 || !cheap_op(n->op))
        return -1;
    int cost = 1;
    for (int k = 0; k < n->n_in; k++) {
        int sub = chain_cost(c, n->in[k], budget - cost);
        if (sub < 0)
            return -1;
        cost += sub;
    }
    return cost <= budget ? cost : -1;
}

int jg_entry_remat_choose(jg_entry *e, const jg_autodiff_result *r) {
    const jg_graph *f = e->fwd_ad;
    if (strcmp(e->backend->name, "c") || !f) /* (any mode of c) */
        return 0;
    size_t nv = (size_t)f->n_vals;
    bool *leaf = calloc(3 * nv + 1, sizeof *leaf), *exposed = leaf + nv, *remat = exposed + nv;
    if (!leaf)
        return jg_errorf("out of memory in jg_compile");
    for (int j = 0; j < f->n_outputs; j++)
        if (f->outputs[j] >= 0)
            exposed[f->outputs[j]] = true;
    for (int i = 0; i < f->n_nodes; i++) {
        const jg_gnode *n = &f->nodes[i];
        if (n->kind == JG_GN_OP && (jg_ops[n->op].flags & JG_OPF_VIEW))
            for (int k = 0; k < n->n_in; k++)
                exposed[n->in[k]] = true;
        if (n->kind == JG_GN_CUSTOM) /* a custom call may return an operand as itself */
            for (int k = 0; k < n->n_in; k++)
                exposed[n->in[k]] = true;
    }
    for (int k = 0; k < r->n_in; k++)
        if (r->in_src[k] >= 0 && r->in_checked[k])
            leaf[r->in_src[k]] = true;
    /* clean: every graph input v is computed from is saved and checked (see
     * above) */
    bool *clean = calloc(nv + 1, sizeof *clean);
    if (!clean) {
        free(leaf);
        return jg_errorf("out of memory in jg_compile");
    }
    for (int v = 0; v < f->n_vals; v++)
        if (f->vals[v].kind == JG_VAL_INPUT)
            clean[v] = leaf[v];
        else if (f->vals[v].kind == JG_VAL_CONST)
            clean[v] = true;
    for (int i = 0; i < f->n_nodes; i++) {
        const jg_gnode *n = &f->nodes[i];
        bool ok = n->kind == JG_GN_OP;
        for (int k = 0; k < jg_gnode_n_slots(n) && ok; k++)
            ok = clean[jg_gnode_slot_value(n, k)];
        for (int k = 0; k < n->n_out; k++)
            if (n->out[k] >= 0)
                clean[n->out[k]] = ok;
    }
    /* decide in forward order: a value recomputed is no leaf for later ones
     * (they may recompute through it, within the same node budget) */
    int n_remat = 0;
    for (int v = 0; v < f->n_vals; v++) {
        bool saved = false;
        for (int k = 0; k < r->n_in && !saved; k++)
            saved = r->in_src[k] == v;
        const jg_value *val = &f->vals[v];
        if (!saved || val->kind != JG_VAL_NODE || !val->requires_grad || exposed[v] || !clean[v])
            continue;
        leaf[v] = false;
        remat_ctx c = {f, leaf, exposed};
        if (chain_cost(&c, v, JG_REMAT_MAX_NODES) > 0) {
            remat[v] = true;
            n_remat++;
        } else {
            /* stays saved: a leaf again if it was one */
            for (int k = 0; k < r->n_in; k++)
                if (r->in_src[k] == v && r->in_checked[k])
                    leaf[v] = true;
        }
    }
    free(clean);
    if (!n_remat) {
        free(leaf);
        return 0;
    }
    if (!(e->remat = calloc(nv + 1, sizeof *e->remat))) {
        free(leaf);
        return jg_errorf("out of memory in jg_compile");
    }
    for (size_t v = 0; v < nv; v++)
        e->remat[v] = remat[v] ? JG_REMAT_RECOMPUTE : leaf[v] ? JG_REMAT_LEAF : 0;
    free(leaf);
    return 0;
}

typedef struct {
    const jg_graph *f;
    const unsigned char *remat;
    jg_graph *g;
    int *bval;    /* per forward value: its value in g, or -1 */
    int **in_src; /* g's input sources (grown when a leaf is not read yet) */
    bool **checked;
    int *n_in;
} apply_ctx;

/* g's value for forward value v: an input of g, or nodes appended to g. */
static int emit(apply_ctx *a, int v) {
    if (a->bval[v] >= 0)
        return a->bval[v];
    const jg_value *val = &a->f->vals[v];
    if (a->remat[v] == JG_REMAT_LEAF) { /* saved, but this graph does not read it yet */
        int k = *a->n_in;
        int *s = realloc(*a->in_src, sizeof(int) * (size_t)(k + 1));
        if (!s)
            return jg_errorf("out of memory building a backward graph");
        *a->in_src = s;
        if (a->checked) {
            bool *c = realloc(*a->checked, sizeof(bool) * (size_t)(k + 1));
            if (!c)
                return jg_errorf("out of memory building a backward graph");
            *a->checked = c;
            (*a->checked)[k] = true;
        }
        const char *name = val->kind == JG_VAL_INPUT ? a->f->input_names[val->index] : "r";
        int id = jg_graph_add_input(a->g, &val->meta, false, name);
        if (id < 0)
            return -1;
        s[k] = v;
        (*a->n_in)++;
        return a->bval[v] = id;
    }
    /* recomputed, or an intermediate of a recomputed chain */
    JG_ASSERT(val->kind == JG_VAL_NODE);
    const jg_gnode *n = &a->f->nodes[val->node];
    int in[4];
    JG_ASSERT(n->n_in <= 4);
    for (int k = 0; k < n->n_in; k++)
        if ((in[k] = emit(a, n->in[k])) < 0)
            return -1;
    int out;
    if (jg_graph_add_op(a->g, n->op, &n->attrs, n->n_in, in, &val->meta, false, &out) < 0)
        return -1;
    return a->bval[v] = out;
}

int jg_entry_remat_apply(const jg_entry *e, jg_graph *g, int **in_src, bool **checked, int *n_in) {
    if (!e->remat)
        return 0;
    const jg_graph *f = e->fwd_ad;
    bool any = false;
    for (int k = 0; k < *n_in && !any; k++)
        any = (*in_src)[k] >= 0 && e->remat[(*in_src)[k]] == JG_REMAT_RECOMPUTE;
    if (!any)
        return 0;
    int *bval = malloc(sizeof(int) * ((size_t)f->n_vals + 1));
    if (!bval)
        return jg_errorf("out of memory building a backward graph");
    for (int v = 0; v < f->n_vals; v++)
        bval[v] = -1;
    int n_orig = *n_in;
    for (int k = 0; k < n_orig; k++)
        if ((*in_src)[k] >= 0 && e->remat[(*in_src)[k]] != JG_REMAT_RECOMPUTE)
            bval[(*in_src)[k]] = g->inputs[k];
    apply_ctx a = {f, e->remat, g, bval, in_src, checked, n_in};
    int first_new = g->n_nodes, rc = 0;
    for (int k = 0; k < n_orig && rc == 0; k++) {
        int src = (*in_src)[k];
        if (src < 0 || e->remat[src] != JG_REMAT_RECOMPUTE)
            continue;
        int nv = emit(&a, src);
        if (nv < 0)
            rc = -1;
        else
            jg_graph_replace_uses(g, g->inputs[k], nv);
    }
    free(bval);
    if (rc < 0)
        return -1;
    /* the recompute runs first: move its nodes in front of the others */
    int n_new = g->n_nodes - first_new;
    if (n_new > 0) {
        jg_gnode *tmp = malloc(sizeof *tmp * (size_t)g->n_nodes);
        if (!tmp)
            return jg_errorf("out of memory building a backward graph");
        memcpy(tmp, g->nodes + first_new, sizeof *tmp * (size_t)n_new);
        memcpy(tmp + n_new, g->nodes, sizeof *tmp * (size_t)first_new);
        memcpy(g->nodes, tmp, sizeof *tmp * (size_t)g->n_nodes);
        free(tmp);
        for (int i = 0; i < g->n_nodes; i++)
            for (int k = 0; k < g->nodes[i].n_out; k++)
                if (g->nodes[i].out[k] >= 0)
                    g->vals[g->nodes[i].out[k]].node = i;
    }
    /* drop the placeholders of recomputed values (now unused) */
    int w = 0;
    for (int k = 0; k < *n_in; k++) {
        int src = (*in_src)[k], id = g->inputs[k];
        if (src >= 0 && e->remat[src] == JG_REMAT_RECOMPUTE) {
            JG_ASSERT(g->vals[id].uses == 0);
            g->vals[id].kind = JG_VAL_DEAD;
            continue;
        }
        g->inputs[w] = id;
        g->input_names[w] = g->input_names[k];
        g->vals[id].index = w;
        (*in_src)[w] = src;
        if (checked)
            (*checked)[w] = (*checked)[k];
        w++;
    }
    g->n_inputs = w;
    *n_in = w;
    return jg_graph_verify(g);
}
