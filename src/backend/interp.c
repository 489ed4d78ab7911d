/* The interpreter backend (see interp.h). */
#include "backend/interp.h"
#include "backend/pool.h"

#include "autograd/engine.h"
#include "autograd/node.h"
#include "trace/custom.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

struct jg_interp_plan {
    const jg_graph *g;
    int *free_start; /* node i releases free_list[free_start[i] .. free_start[i+1]) */
    int *free_list;
    jg_buffer_pool pool;
    jg_tensor **vals; /* scratch: one tensor per value */
};

jg_interp_plan *jg_interp_plan_new(const jg_graph *g) {
    jg_interp_plan *p = calloc(1, sizeof *p);
    int nv = g->n_vals ? g->n_vals : 1, nn = g->n_nodes;
    int *last = malloc((size_t)nv * sizeof *last);
    if (p) {
        p->g = g;
        p->free_start = calloc((size_t)nn + 1, sizeof *p->free_start);
        p->free_list = malloc((size_t)nv * sizeof *p->free_list);
        p->vals = calloc((size_t)nv, sizeof *p->vals);
    }
    if (!p || !last || !p->free_start || !p->free_list || !p->vals) {
        free(last);
        jg_interp_plan_free(p);
        return jg_errorf_null("out of memory planning a graph");
    }
    /* last use of each node-defined value: the node after which it dies */
    for (int v = 0; v < g->n_vals; v++)
        last[v] = g->vals[v].kind == JG_VAL_NODE ? g->vals[v].node : -1;
    for (int i = 0; i < nn; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++) {
            int v = g->nodes[i].in[k];
            if (g->vals[v].kind == JG_VAL_NODE && last[v] < i)
                last[v] = i;
        }
    for (int k = 0; k < g->n_outputs; k++)
        if (g->outputs[k] >= 0)
            last[g->outputs[k]] = -1; /* escapes: never released by the plan */
    /* bucket the values by the node they die after (counting sort) */
    for (int v = 0; v < g->n_vals; v++)
        if (g->vals[v].kind == JG_VAL_NODE && last[v] >= 0)
            p->free_start[last[v] + 1]++;
    for (int i = 0; i < nn; i++)
        p->free_start[i + 1] += p->free_start[i];
    int *fill = calloc((size_t)nn + 1, sizeof *fill);
    if (!fill) {
        free(last);
        jg_interp_plan_free(p);
        return jg_errorf_null("out of memory planning a graph");
    }
    for (int v = 0; v < g->n_vals; v++)
        if (g->vals[v].kind == JG_VAL_NODE && last[v] >= 0)
            p->free_list[p->free_start[last[v]] + fill[last[v]]++] = v;
    free(fill);
    free(last);
    return p;
}

void jg_interp_plan_free(jg_interp_plan *p) {
    if (!p)
        return;
    jg_pool_clear(&p->pool);
    free(p->free_start);
    free(p->free_list);
    free(p->vals);
    free(p);
}

int jg_interp_plan_make_static(jg_interp_plan *p) {
    return jg_pool_make_static(&p->pool, p->g);
}

static void drop(jg_interp_plan *p, jg_tensor *t) {
    jg_pool_drop(&p->pool, t);
}

/* A custom call: its forward subgraph, with each slot bound to its operand
 * (the subgraph has one placeholder per slot).  Planned per call: custom
 * subgraphs are small, and the plan would otherwise have to live as long as
 * the shared call record. */
static int run_opaque(const jg_graph *g, const jg_gnode *n, jg_tensor **vals);
static int run_opaque_backward(const jg_graph *g, const jg_gnode *n, jg_tensor **vals);

static int run_custom(const jg_graph *g, const jg_gnode *n, jg_tensor **vals) {
    const jg_gcustom *c = n->custom;
    if (c->opaque_backward)
        return run_opaque_backward(g, n, vals);
    if (c->opaque)
        return run_opaque(g, n, vals);
    jg_tensor **io = malloc(sizeof *io * (size_t)(c->n_slots + n->n_out));
    jg_interp_plan *sub = io ? jg_interp_plan_new(c->fwd) : NULL;
    if (!sub) {
        free(io);
        return jg_errorf("out of memory running %s", c->fn->name);
    }
    jg_tensor **in = io, **out = io + c->n_slots;
    for (int s = 0; s < c->n_slots; s++)
        in[s] = vals[jg_gnode_slot_value(n, s)];
    int rc = jg_interp_run(sub, in, out);
    for (int k = 0; k < n->n_out && rc == 0; k++) {
        /* An output that is not computed by the subgraph (a slot returned
         * unchanged, a constant) or repeats an earlier one becomes a new
         * alias, as eager jg_apply makes it: the call's outputs are distinct
         * tensors, so the compiled node's history never lands on an input
         * or on another output. */
        int fv = c->fwd->outputs[k];
        bool shared = c->fwd->vals[fv].kind != JG_VAL_NODE;
        for (int j = 0; j < k && !shared; j++)
            shared = c->fwd->outputs[j] == fv;
        if (shared) {
            jg_tensor *a = jg_alias_no_history(out[k]);
            jg_release(out[k]);
            out[k] = a;
            if (!a) { /* the run's cleanup releases the outputs stored so far */
                for (int j = k + 1; j < n->n_out; j++)
                    jg_release(out[j]);
                rc = -1;
                break;
            }
        }
        vals[n->out[k]] = out[k];
    }
    jg_interp_plan_free(sub);
    free(io);
    return rc;
}

/* An opaque call (trace/custom.h): the function is applied eagerly to one
 * fresh leaf per slot, so the eager engine later routes each slot's gradient
 * to its own leaf.  Outputs: the call's outputs without history, the same
 * with the eager history, the leaves. */
static int run_opaque(const jg_graph *g, const jg_gnode *n, jg_tensor **vals) {
    const jg_gcustom *c = n->custom;
    const jg_custom_info *info = c->user; /* lifted slots (objects' tensors) get no gradient */
    int ns = c->n_slots, nco = c->n_call_out, rc = 0;
    jg_tensor *leaves[64] = {0}, *o[JG_MAX_OUTPUTS];
    bool history = false;
    if (ns > 64)
        return jg_errorf("interp: %s has more than 64 slots", c->fn->name);
    for (int k = 0; k < nco; k++)
        history |= g->vals[n->out[k]].requires_grad;
    for (int s = 0; s < ns && rc == 0; s++) {
        if (!(leaves[s] = jg_alias_no_history(vals[jg_gnode_slot_value(n, s)])))
            rc = -1;
        else
            leaves[s]->requires_grad = history && (!info || s < info->n_args) &&
                                       g->vals[jg_gnode_slot_value(n, s)].requires_grad;
    }
    bool prev = jg_set_grad_enabled(history);
    int got = rc == 0 ? jg_apply(c->fn, ns, leaves, c->args, c->args_size, o) : -1;
    jg_set_grad_enabled(prev);
    for (int k = 0; k < got; k++)
        jg_keep(o[k]);
    if (got >= 0 && got != nco)
        rc = jg_errorf("%s returned %d outputs at run time but %d when traced", c->fn->name, got,
                       nco);
    for (int k = 0; k < got && rc == 0; k++) {
        const jg_meta *m = &g->vals[n->out[k]].meta;
        jg_meta om;
        jg_meta_of(o[k], &om);
        if (!jg_meta_equal(&om, m)) {
            char a[96], b[96];
            jg_describe(o[k], a, sizeof a);
            jg_format_shape(b, sizeof b, m->ndim, m->shape);
            rc = jg_errorf("%s output %d is %s at run time but had shape %s when traced (an "
                           "opaque call's output shapes must not depend on its data)",
                           c->fn->name, k, a, b);
        }
    }
    if (got < 0 || rc < 0) {
        for (int k = 0; k < got; k++)
            jg_release(o[k]);
        for (int s = 0; s < ns; s++)
            jg_release(leaves[s]);
        return -1;
    }
    for (int k = 0; k < nco; k++) {
        vals[n->out[k]] = jg_alias_no_history(o[k]);
        vals[n->out[nco + k]] = o[k];
    }
    for (int s = 0; s < ns; s++)
        vals[n->out[2 * nco + s]] = leaves[s];
    return 0;
}

/* The backward half: operands are the arrived gradients, the outputs with
 * history and the leaves of the slots that need a gradient; outputs are
 * (raw, zero-filled) per such slot. */
static int run_opaque_backward(const jg_graph *g, const jg_gnode *n, jg_tensor **vals) {
    const jg_gcustom *c = n->custom;
    int n_need = n->n_out / 2, n_ops = c->n_slots;
    /* operands: gradients, outputs with history, leaves; no_grads: outputs
     * with history (roots reached without a gradient), leaves */
    int n_present = c->no_grads ? 0 : (n_ops - n_need) / 2;
    int n_hist = c->no_grads ? n_ops - n_need : n_present;
    jg_tensor *op[2 * JG_MAX_OUTPUTS + 64], *res[64] = {0};
    for (int s = 0; s < n_ops; s++)
        op[s] = vals[jg_gnode_slot_value(n, s)];
    /* the eager engine runs the user's backward; the compiled node decides
     * when the saved state goes, so the eager graph is always retained */
    /* an output the replay made without history (marked non-differentiable)
     * passes nothing on, as in eager: not a root */
    jg_tensor *roots[JG_MAX_OUTPUTS], *rgrads[JG_MAX_OUTPUTS];
    int n_roots = 0;
    for (int k = 0; k < n_hist; k++)
        if (op[n_present + k]->requires_grad) {
            roots[n_roots] = op[n_present + k];
            rgrads[n_roots++] = c->no_grads ? NULL : op[k];
        }
    if (n_roots && jg_autograd_grad(n_roots, roots, rgrads, n_need, op + n_present + n_hist,
                                    JG_RETAIN_GRAPH | JG_ALLOW_UNUSED |
                                        (c->no_grads ? JG_ENGINE_NO_GRAD_ROOTS : 0),
                                    res) < 0)
        return -1;
    const bool *expect_none = c->user;
    for (int j = 0; j < n_need && expect_none; j++)
        if (expect_none[j] && res[j])
            return jg_errorf(
                "%sBackward returned a gradient for an input at run time but None when "
                "traced on zeros (an opaque function must answer None for the same "
                "inputs whatever the values)",
                c->fn->name); /* (res[] belong to the scope) */
    for (int j = 0; j < n_need; j++) {
        const jg_meta *m = &g->vals[n->out[2 * j + 1]].meta;
        jg_tensor *r = jg_keep(res[j]);
        vals[n->out[2 * j]] = r;
        vals[n->out[2 * j + 1]] =
            r ? jg_retain(r) : jg_tensor_new(m->dtype, m->ndim, m->shape, NULL);
        jg_keep(vals[n->out[2 * j + 1]]);
    }
    return 0;
}

int jg_interp_run_op(jg_buffer_pool *pool, const jg_graph *g, const jg_gnode *n, jg_tensor **vals) {
    const jg_op_info *info = &jg_ops[n->op];
    jg_tensor *in[4], *out[2] = {0};
    int rc = 0;
    for (int k = 0; k < n->n_in; k++)
        in[k] = vals[n->in[k]];
    if (!(info->flags & JG_OPF_VIEW))
        for (int k = 0; k < n->n_out && rc == 0; k++)
            if (!(out[k] = jg_pool_alloc_value(pool, n->out[k], &g->vals[n->out[k]].meta)))
                rc = -1;
    if (rc == 0)
        rc = info->kernel(&n->attrs, in, out);
    if (rc < 0) {
        for (int k = 0; k < n->n_out; k++)
            jg_release(out[k]);
        return -1;
    }
    for (int k = 0; k < n->n_out; k++)
        vals[n->out[k]] = out[k];
    return 0;
}

int jg_interp_run(jg_interp_plan *p, jg_tensor *const *inputs, jg_tensor **outputs) {
    const jg_graph *g = p->g;
    jg_tensor **vals = p->vals;
    int rc = 0;
    for (int k = 0; k < g->n_inputs; k++)
        vals[g->inputs[k]] = inputs[k];
    for (int c = 0; c < g->n_consts; c++)
        vals[g->const_vals[c]] = g->consts[c];
    bool prev = jg_set_grad_enabled(false);
    int i;
    for (i = 0; i < g->n_nodes; i++) {
        const jg_gnode *n = &g->nodes[i];
        if (n->kind == JG_GN_CUSTOM) {
            if ((rc = run_custom(g, n, vals)) < 0)
                break;
            goto release;
        }
        if ((rc = jg_interp_run_op(&p->pool, g, n, vals)) < 0)
            break;
    release:
        for (int j = p->free_start[i]; j < p->free_start[i + 1]; j++) {
            drop(p, vals[p->free_list[j]]);
            vals[p->free_list[j]] = NULL;
        }
    }
    jg_set_grad_enabled(prev);
    if (rc == 0)
        for (int k = 0; k < g->n_outputs; k++)
            outputs[k] = g->outputs[k] >= 0 ? jg_retain(vals[g->outputs[k]]) : NULL;
    /* drop what is still held: escaping values (the outputs hold their own
     * references now) and, after an error, everything computed so far */
    for (int v = 0; v < g->n_vals; v++) {
        if (g->vals[v].kind == JG_VAL_NODE && vals[v])
            jg_release(vals[v]);
        vals[v] = NULL;
    }
    return rc < 0 ? -1 : 0;
}
