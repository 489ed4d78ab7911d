/* Graph autodiff (see autodiff.h). */
#include "autodiff/autodiff.h"

#include "autograd/function.h"
#include "autograd/node.h"
#include "trace/custom.h"
#include "trace/trace.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const jg_graph *f;
    jg_tensor **fsym; /* per forward value: its stand-in in the backward trace */
    int *in_src;
    bool *in_checked;
    int *checked_by; /* per forward value (jg_autodiff_result) */
    int reader;      /* an output value of the node being differentiated */
    int n_in, cap_in, n_saved;
} ad_state;

static int note_input(ad_state *s, int src, bool checked) {
    if (s->n_in == s->cap_in) {
        int cap = s->cap_in ? s->cap_in * 2 : 16;
        int *n = realloc(s->in_src, (size_t)cap * sizeof *n);
        if (!n)
            return jg_errorf("out of memory in autodiff");
        s->in_src = n;
        bool *c = realloc(s->in_checked, (size_t)cap * sizeof *c);
        if (!c)
            return jg_errorf("out of memory in autodiff");
        s->in_checked = c;
        s->cap_in = cap;
    }
    s->in_checked[s->n_in] = checked;
    s->in_src[s->n_in++] = src;
    return 0;
}

/* The backward graph's stand-in for forward value v (borrowed).  checked:
 * the eager reader holds it as a saved tensor, whose in-place change fails
 * backward; a custom function's ctx attribute (kept) is read as it is then. */
static jg_tensor *fwd_value(ad_state *s, int v, bool checked) {
    if (checked && s->checked_by && s->reader < s->checked_by[v])
        s->checked_by[v] = s->reader;
    if (s->fsym[v]) {
        for (int k = 0; checked && k < s->n_in; k++)
            if (s->in_src[k] == v)
                s->in_checked[k] = true;
        return s->fsym[v];
    }
    const jg_value *val = &s->f->vals[v];
    if (val->kind == JG_VAL_CONST)
        return s->fsym[v] = jg_retain(s->f->consts[val->index]);
    char name[32];
    if (val->kind == JG_VAL_INPUT)
        snprintf(name, sizeof name, "%.31s", s->f->input_names[val->index]);
    else
        snprintf(name, sizeof name, "s%d", s->n_saved++);
    if (note_input(s, v, checked) < 0)
        return NULL;
    return s->fsym[v] = jg_trace_placeholder(&val->meta, false, false, name);
}

/* Hands each slot's gradient to its source, in slot order, with the rule the
 * eager engine uses (jg_slots_accumulate): a slot whose operand is a graph
 * input becomes its own contribution (an edge of the compiled node, added by
 * the engine like eager's per-slot edges); any other operand accumulates it. */
static int route_slots(const jg_graph *f, const jg_gnode *n, jg_tensor *const *gin, jg_tensor **acc,
                       jg_tensor **contrib) {
    int ns = jg_gnode_n_slots(n), c = 0;
    jg_tensor **targets[64];
    JG_ASSERT(ns <= 64);
    for (int k = 0; k < ns; k++) {
        int v = jg_gnode_slot_value(n, k);
        bool needs = f->vals[v].requires_grad;
        if (f->vals[v].kind == JG_VAL_INPUT && needs)
            targets[k] = &contrib[c++];
        else
            targets[k] = needs ? &acc[v] : NULL;
    }
    return jg_slots_accumulate(ns, gin, targets);
}

/* An opaque call's backward: one node that, at run time, asks the eager
 * engine for the gradients of the call's slot leaves (see trace/custom.h).
 * A slot whose operand is a graph input takes the raw value (NULL at run
 * time when the slot answered NULL, so no contribution is added); other
 * slots take the zero-filled one. */
static int opaque_vjp(ad_state *s, const jg_gnode *n, jg_tensor **acc, jg_tensor **gin) {
    const jg_gcustom *c = n->custom;
    int nco = c->n_call_out, ns = c->n_slots;
    jg_tensor *g[JG_MAX_OUTPUTS] = {0}, *hist[JG_MAX_OUTPUTS] = {0}, *leaves[64] = {0};
    jg_tensor *raw[64], *filled[64];
    bool needs[64], any = false;
    for (int k = 0; k < nco; k++)
        any |= acc[n->out[k]] != NULL;
    const jg_custom_info *info = c->user;
    /* reached without gradients and materialize off: its backward still
     * runs, with None for every output (the replay's roots carry none) */
    for (int k = 0; k < nco; k++) {
        const jg_meta *m = &s->f->vals[n->out[k]].meta;
        /* reached without gradients: eager materializes zeros */
        g[k] =
            any || !info->materialize ? acc[n->out[k]] : jg_full(m->dtype, m->ndim, m->shape, 0.0);
        if (!any && info->materialize && !g[k])
            return -1;
        /* every output's history, also one no gradient reaches now: a
         * backward for fewer outputs may materialize zeros for all of them,
         * and must read only values the full backward reads (those are what
         * the forward saves) */
        /* (roots and targets only: their values are never read, so an
         * in-place change since the call is no error here; what the user's
         * forward saved is checked by its own eager node, as in eager) */
        if (!(hist[k] = fwd_value(s, n->out[nco + k], false)))
            return -1;
    }
    for (int k = 0; k < ns; k++) {
        /* lifted slots (tensors the forward reached through an object) get
         * no gradient through the call, as in eager mode */
        needs[k] = k < info->n_args && s->f->vals[jg_gnode_slot_value(n, k)].requires_grad;
        if (needs[k] && !(leaves[k] = fwd_value(s, n->out[2 * nco + k], false)))
            return -1;
    }
    if (jg_trace_opaque_backward(c, needs, nco, g, hist, leaves, raw, filled) < 0)
        return -1;
    for (int k = 0; k < ns; k++) {
        const jg_value *v = &s->f->vals[jg_gnode_slot_value(n, k)];
        if (!needs[k] || (info->none_slot && info->none_slot[k]))
            gin[k] = NULL; /* answers NULL: no contribution, as in eager mode */
        else
            gin[k] = v->kind == JG_VAL_INPUT ? raw[k] : filled[k];
    }
    return 0;
}

/* While a custom call's backward is traced into B: the tensors its forward
 * kept (symbolic tensors of its forward subgraph) map to B's placeholders. */
typedef struct {
    uint64_t fwd_id; /* the forward subgraph as traced (kept tensors name it) */
    const jg_custom_info *info;
    jg_tensor *const *ph;
    const char *name;
} kept_map;

static int resolve_kept(void *user, jg_tensor *t) {
    const kept_map *m = user;
    for (int j = 0; t->sym->graph == m->fwd_id && j < m->info->n_kept; j++)
        if (m->info->kept_fval[j] == t->sym->value)
            return m->ph[j]->sym->value;
    return jg_errorf("the backward of %s used a tensor of another trace (its forward's, not "
                     "saved, or an enclosing program's)",
                     m->name);
}

/* Traces call n's backward callback (with its own ctx, as in eager mode)
 * into B: placeholders for the output gradients present[k] says arrived,
 * then each saved value (saved_m[j]; skipped where saved_out[j] < 0), then
 * each kept value (kept_m[j]); B's outputs are one value per slot, -1 where
 * the callback wrote NULL.  out_meta: the call's outputs. */
static int trace_custom_bwd(jg_graph *B, const jg_gnode *n, const jg_meta *out_meta,
                            const bool *present, const jg_meta *saved_m, const jg_meta *kept_m) {
    const jg_gcustom *c = n->custom;
    const jg_custom_info *info = c->user;
    const char *name = c->fn->name ? c->fn->name : "Function";
    int ns = c->n_slots, nco = info->n_call_out, nr = 0, rc = 0;
    jg_tensor *ph[JG_MAX_OUTPUTS + 128] = {0}, *saved_ph[64] = {0}, *kept_ph[64] = {0};
    jg_tensor *gout_b[JG_MAX_OUTPUTS] = {0}, *gin_b[64] = {0};
    /* the backward callback's ops on tensors it reaches from outside are
     * traced, those tensors read at run time (custom.c's backward_traces
     * tries it the same way) */
    if (jg_trace_begin(B, JG_TRACE_CAPTURE) < 0)
        return -1;
    char bname[96];
    snprintf(bname, sizeof bname, "%s.backward", name);
    B->name = jg_arena_strdup(&B->arena, bname);
    for (int k = 0; k < nco && rc == 0; k++) {
        if (!present[k])
            continue;
        char pn[24];
        snprintf(pn, sizeof pn, "g%d", k);
        if (!(ph[nr++] = gout_b[k] = jg_trace_placeholder(&out_meta[k], false, false, pn)))
            rc = -1;
    }
    for (int j = 0; j < info->n_saved && rc == 0; j++) {
        if (info->saved_out[j] < 0)
            continue;
        char pn[24];
        snprintf(pn, sizeof pn, "saved%d", j);
        if (!(ph[nr++] = saved_ph[j] = jg_trace_placeholder(&saved_m[j], false, false, pn)))
            rc = -1;
    }
    for (int j = 0; j < info->n_kept && rc == 0; j++) {
        char pn[24];
        snprintf(pn, sizeof pn, "kept%d", j);
        if (!(ph[nr++] = kept_ph[j] = jg_trace_placeholder(&kept_m[j], false, false, pn)))
            rc = -1;
    }
    kept_map km = {c->kept_id ? c->kept_id : c->fwd->id, info, kept_ph, name};
    jg_trace_set_resolver(resolve_kept, &km);
    int outs[64];
    if (rc == 0) {
        jg_scope_push();
        rc = jg_custom_trace_backward(c->state, nco, out_meta, gout_b, saved_ph, gin_b);
        for (int k = 0; k < ns && rc == 0; k++)
            if ((outs[k] = gin_b[k] ? jg_trace_value(gin_b[k]) : -1) < -1)
                rc = -1;
        if (rc == 0)
            rc = jg_graph_set_outputs(B, ns, outs);
        jg_scope_pop();
    }
    jg_trace_end();
    for (int k = 0; k < nr; k++)
        jg_release(ph[k]);
    return rc;
}

/* Where the value the forward subgraph of custom call n computes as fv
 * (saved or kept for backward) is read from: the slot's operand for an
 * input, the call's own output for one of its outputs (as eager saves
 * them: with their history, the call's node, so a double backward goes
 * through the call again), else own, the node output carrying it. */
static int call_value(const jg_gnode *n, int fv, int own) {
    const jg_gcustom *c = n->custom;
    const jg_custom_info *info = c->user;
    if (c->fwd->vals[fv].kind == JG_VAL_INPUT)
        return jg_gnode_slot_value(n, c->fwd->vals[fv].index);
    for (int k = 0; k < info->n_call_out; k++)
        if (c->fwd->outputs[k] == fv)
            return n->out[k];
    return own;
}

/* A custom call's backward: the user's backward callback traced into a
 * subgraph (trace_custom_bwd), which is then replayed into the backward
 * graph; or, for a call that carries its backward already (an instance of
 * a dynamic-size entry: the template's backward at this size), that one,
 * every output gradient present (a missing one is zeros, as the callback
 * gets it with materialize_grads, the only case such a call has).
 * gin[slot] are borrowed from the current scope. */
static int custom_vjp(ad_state *s, const jg_gnode *n, jg_tensor **acc, jg_tensor **gin) {
    const jg_gcustom *c = n->custom;
    if (c->opaque)
        return opaque_vjp(s, n, acc, gin);
    const jg_custom_info *info = c->user;
    const char *name = c->fn->name ? c->fn->name : "Function";
    int ns = c->n_slots, nco = info->n_call_out, nr = 0;
    /* replay inputs: arrived grads, then saved, then kept values */
    jg_tensor *rin[JG_MAX_OUTPUTS + 128];
    jg_tensor *saved_in[64] = {0}, *kept_in[64] = {0};
    jg_meta out_meta[JG_MAX_OUTPUTS], saved_m[64], kept_m[64];
    bool present[JG_MAX_OUTPUTS];
    if (ns > 64 || info->n_saved > 64 || info->n_kept > 64)
        return jg_errorf("autodiff: %s has more than 64 slots, saved or kept tensors", name);
    /* the saved values' stand-ins in the backward graph (made before B's
     * frame opens: they are inputs of the backward graph, not of B); a saved
     * input of the call is read where it comes from */
    for (int j = 0; j < info->n_saved; j++) {
        if (info->saved_out[j] < 0)
            continue;
        int fo = c->fwd->outputs[info->saved_out[j]];
        int v = call_value(n, fo, n->out[info->saved_out[j]]);
        if (!(saved_in[j] = fwd_value(s, v, true)))
            return -1;
        jg_meta_of(saved_in[j], &saved_m[j]);
    }
    for (int j = 0; j < info->n_kept; j++) {
        int v = call_value(n, info->kept_fval[j], n->out[info->kept_out + j]);
        if (!(kept_in[j] = fwd_value(s, v, false)))
            return -1;
        jg_meta_of(kept_in[j], &kept_m[j]);
    }
    for (int k = 0; k < nco; k++) {
        out_meta[k] = s->f->vals[n->out[k]].meta;
        jg_tensor *g = acc[n->out[k]];
        present[k] = g || c->bwd;
        if (!g && c->bwd &&
            !(g = jg_full(out_meta[k].dtype, out_meta[k].ndim, out_meta[k].shape, 0.0)))
            return -1;
        if (g)
            rin[nr++] = g;
    }
    for (int j = 0; j < info->n_saved; j++)
        if (saved_in[j])
            rin[nr++] = saved_in[j];
    for (int j = 0; j < info->n_kept; j++)
        rin[nr++] = kept_in[j];
    if (c->bwd)
        return jg_trace_replay(c->bwd, rin, gin);
    jg_graph *B = jg_graph_new_child(jg_trace_graph());
    if (!B || trace_custom_bwd(B, n, out_meta, present, saved_m, kept_m) < 0)
        return -1;
    return jg_trace_replay(B, rin, gin);
}

jg_graph *jg_custom_backward_template(const jg_graph *f, const jg_gnode *n) {
    const jg_gcustom *c = n->custom;
    const jg_custom_info *info = c->user;
    jg_meta out_meta[JG_MAX_OUTPUTS], saved_m[64], kept_m[64];
    bool present[JG_MAX_OUTPUTS];
    if (c->n_slots > 64 || info->n_saved > 64 || info->n_kept > 64 ||
        info->n_call_out > JG_MAX_OUTPUTS)
        return jg_errorf_null("autodiff: a custom call has more than 64 slots, saved or kept "
                              "tensors");
    for (int k = 0; k < info->n_call_out; k++) {
        out_meta[k] = f->vals[n->out[k]].meta;
        present[k] = true;
    }
    for (int j = 0; j < info->n_saved; j++)
        if (info->saved_out[j] >= 0)
            saved_m[j] = f->vals[n->out[info->saved_out[j]]].meta;
    for (int j = 0; j < info->n_kept; j++)
        kept_m[j] = f->vals[n->out[info->kept_out + j]].meta;
    jg_graph *B = jg_graph_new();
    bool prev = jg_set_grad_enabled(false); /* (as autodiff runs it) */
    int rc = B ? trace_custom_bwd(B, n, out_meta, present, saved_m, kept_m) : -1;
    jg_set_grad_enabled(prev);
    if (rc < 0) {
        jg_graph_free(B);
        return NULL;
    }
    return B;
}

/* A custom call's info, whose n_args says where its lifted slots start;
 * NULL for other nodes. */
static const jg_custom_info *lifted_info(const jg_gnode *n) {
    return n->kind == JG_GN_CUSTOM && !n->custom->opaque_backward
               ? (const jg_custom_info *)n->custom->user
               : NULL;
}

/* A reached node's differentiable operands are reached too, except a custom
 * call's lifted slots (tensors its forward reached through an object or a
 * closure): in eager mode they are no inputs of the call's node, so nothing
 * before them is part of the backward graph through it (a custom function
 * there would otherwise run its backward on zeros). */
static void mark_operands_reached(const jg_graph *f, const jg_gnode *n, bool *reached) {
    const jg_custom_info *info = lifted_info(n);
    for (int s = 0; s < jg_gnode_n_slots(n); s++) {
        int v = jg_gnode_slot_value(n, s);
        if (f->vals[v].requires_grad && !(info && s >= info->n_args))
            reached[v] = true;
    }
}

int jg_autodiff(const jg_graph *f, int n_seeds, const int *seeds, int n_reach, const int *reach,
                jg_autodiff_result *r) {
    int rc = jg_autodiff_capture(f, n_seeds, seeds, n_reach, reach, 0, NULL, r);
    /* (the compiler takes r's arrays one by one: none it does not know) */
    free(r->node_reached);
    free(r->node_ran);
    r->node_reached = r->node_ran = NULL;
    return rc;
}

int jg_autodiff_capture(const jg_graph *f, int n_seeds, const int *seeds, int n_reach,
                        const int *reach, int n_capture, const int *capture,
                        jg_autodiff_result *r) {
    memset(r, 0, sizeof *r);
    jg_graph *b = jg_graph_new();
    if (!b)
        return -1;
    b->name = "backward";
    int nv = f->n_vals ? f->n_vals : 1;
    ad_state s = {.f = f};
    s.fsym = calloc((size_t)nv, sizeof *s.fsym);
    if ((s.checked_by = malloc(sizeof(int) * (size_t)nv)))
        for (int v = 0; v < nv; v++)
            s.checked_by[v] = INT_MAX;
    jg_tensor **acc = calloc((size_t)nv, sizeof *acc);
    /* contribution layout: (node, slot) with a graph input operand that
     * requires grad, latest node first */
    int n_contrib = 0;
    for (int i = f->n_nodes - 1; i >= 0; i--)
        for (int k = 0; k < jg_gnode_n_slots(&f->nodes[i]); k++) {
            const jg_value *ov = &f->vals[jg_gnode_slot_value(&f->nodes[i], k)];
            n_contrib += ov->kind == JG_VAL_INPUT && ov->requires_grad;
        }
    int *first = malloc(sizeof(int) * (size_t)(f->n_nodes + 1)); /* node -> first contrib */
    int *cin = malloc(sizeof(int) * (size_t)(n_contrib ? n_contrib : 1));
    jg_tensor **contrib = calloc((size_t)(n_contrib ? n_contrib : 1), sizeof *contrib);
    int *outs = malloc((size_t)(n_contrib + n_capture ? n_contrib + n_capture : 1) * sizeof *outs);
    bool *node_reached = calloc((size_t)(f->n_nodes ? f->n_nodes : 1), sizeof *node_reached);
    bool *node_ran = calloc((size_t)(f->n_nodes ? f->n_nodes : 1), sizeof *node_ran);
    if (first && cin) {
        int c = 0;
        for (int i = f->n_nodes - 1; i >= 0; i--) {
            first[i] = c;
            for (int k = 0; k < jg_gnode_n_slots(&f->nodes[i]); k++) {
                const jg_value *ov = &f->vals[jg_gnode_slot_value(&f->nodes[i], k)];
                if (ov->kind == JG_VAL_INPUT && ov->requires_grad)
                    cin[c++] = ov->index;
            }
        }
    }
    if (!s.fsym || !acc || !outs || !first || !cin || !contrib || !node_reached || !node_ran ||
        jg_trace_begin(b, 0) < 0) {
        free(node_reached);
        free(node_ran);
        free(s.fsym);
        free(acc);
        free(outs);
        free(first);
        free(cin);
        free(contrib);
        jg_graph_free(b);
        return jg_errorf("out of memory in autodiff");
    }
    bool prev = jg_set_grad_enabled(false);
    jg_scope_push();
    int rc = 0;
    for (int k = 0; k < n_seeds && rc == 0; k++) {
        char name[16];
        snprintf(name, sizeof name, "g%d", k);
        const jg_value *sv = &f->vals[seeds[k]];
        JG_ASSERT(sv->requires_grad);
        jg_tensor *g = jg_trace_placeholder(&sv->meta, false, false, name);
        if (!g || note_input(&s, -1 - k, true) < 0 || jg_grad_accumulate(&acc[seeds[k]], g) < 0)
            rc = -1;
    }
    /* reached[v]: v leads to a seed through differentiable operands, i.e.
     * its node is part of eager's backward graph even if no gradient
     * arrives (a custom function's slot answered NULL upstream) */
    bool *reached = calloc((size_t)nv, sizeof *reached);
    if (!reached)
        rc = jg_errorf("out of memory in autodiff");
    for (int k = 0; k < n_seeds && rc == 0; k++)
        reached[seeds[k]] = true;
    for (int k = 0; k < n_reach && rc == 0; k++)
        reached[reach[k]] = true;
    /* latest node first, slots in order: the eager engine's order */
    for (int i = f->n_nodes - 1; i >= 0 && rc == 0; i--) {
        const jg_gnode *n = &f->nodes[i];
        bool any_out = false, any_need = false, any_reached = false;
        for (int k = 0; k < n->n_out; k++) {
            any_out |= acc[n->out[k]] != NULL;
            any_reached |= reached[n->out[k]];
        }
        for (int k = 0; k < n->n_in; k++)
            any_need |= f->vals[n->in[k]].requires_grad;
        if (any_reached)
            mark_operands_reached(f, n, reached);
        /* a custom function's backward runs whenever its node is reached,
         * with materialized zeros (the eager engine's run_without_grads);
         * an op's VJP only when a gradient arrived */
        bool runs = any_out || (n->kind == JG_GN_CUSTOM && any_reached);
        node_reached[i] = any_reached && any_need;
        node_ran[i] = runs && any_need;
        if (!runs || !any_need)
            continue;
        s.reader = n->n_out ? n->out[0] : INT_MAX;
        if (n->kind == JG_GN_CUSTOM) {
            jg_scope_push();
            jg_tensor *gin[64] = {0};
            rc = custom_vjp(&s, n, acc, gin);
            if (rc < 0 && !n->custom->opaque)
                r->failed_fn = n->custom->fn;
            if (rc == 0)
                rc = route_slots(f, n, gin, acc, contrib + first[i]);
            jg_scope_pop();
            continue;
        }
        const jg_op_info *info = &jg_ops[n->op];
        if (info->flags & JG_OPF_NONDIFF)
            continue;
        jg_tensor *in[4] = {0}, *out[2] = {0}, *gout[2] = {0}, *gin[4] = {0};
        jg_meta meta[4];
        bool needs[4];
        for (int k = 0; k < n->n_in; k++) {
            meta[k] = f->vals[n->in[k]].meta;
            needs[k] = f->vals[n->in[k]].requires_grad;
        }
        /* (the inputs eager's node saves: an in-place change of another
         * one fails neither) */
        unsigned saved_in = jg_op_saved_inputs(n->op, needs);
        for (int k = 0; k < n->n_in && rc == 0; k++)
            if ((saved_in & (1u << k)) && !(in[k] = fwd_value(&s, n->in[k], true)))
                rc = -1;
        for (int k = 0; k < n->n_out && rc == 0; k++) {
            gout[k] = acc[n->out[k]];
            /* (checked as eager saves it: max(dim)'s values are read but
             * only its indices saved) */
            bool saved = jg_op_saves_output(n->op, k, f->vals[n->out[k]].meta.dtype);
            if ((info->flags & JG_OPF_SAVE_OUT) && !(out[k] = fwd_value(&s, n->out[k], saved)))
                rc = -1;
        }
        if (rc < 0)
            break;
        jg_scope_push();
        rc = info->vjp(&n->attrs, meta, in, out, gout, needs, gin);
        if (rc == 0)
            rc = route_slots(f, n, gin, acc, contrib + first[i]);
        jg_scope_pop();
    }
    for (int k = 0; k < n_contrib && rc == 0; k++) {
        outs[k] = -1;
        if (contrib[k] && (outs[k] = jg_trace_value(contrib[k])) < 0)
            rc = -1;
    }
    /* a value's gradient is complete once the loop passed its node: every
     * use comes later in the forward graph (eager's input buffer of the
     * value's node when that node runs) */
    for (int k = 0; k < n_capture && rc == 0; k++) {
        jg_tensor *gv = acc[capture[k]];
        outs[n_contrib + k] = -1;
        if (gv && (outs[n_contrib + k] = jg_trace_value(gv)) < 0)
            rc = -1;
    }
    if (rc == 0)
        rc = jg_graph_set_outputs(b, n_contrib + n_capture, outs);
    for (int v = 0; v < f->n_vals; v++) {
        jg_release(acc[v]);
        jg_release(s.fsym[v]);
    }
    for (int k = 0; k < n_contrib; k++)
        jg_release(contrib[k]);
    free(contrib);
    free(reached);
    free(first);
    jg_scope_pop();
    jg_set_grad_enabled(prev);
    jg_trace_end();
    free(acc);
    free(s.fsym);
    free(outs);
    if (rc < 0) {
        free(s.in_src);
        free(s.in_checked);
        free(s.checked_by);
        free(cin);
        free(node_reached);
        free(node_ran);
        jg_graph_free(b);
        return -1; /* r keeps failed_fn */
    }
    r->node_reached = node_reached;
    r->node_ran = node_ran;
    r->n_capture = n_capture;
    r->contrib_input = cin;
    r->n_contrib = n_contrib;
    r->bwd = b;
    r->in_src = s.in_src;
    r->in_checked = s.in_checked;
    r->checked_by = s.checked_by;
    r->n_in = s.n_in;
    return 0;
}

int jg_autodiff_edges_reached(const jg_graph *f, int n_from, const int *from,
                              bool *contrib_reached) {
    bool *reached = calloc((size_t)(f->n_vals ? f->n_vals : 1), sizeof *reached);
    if (!reached)
        return jg_errorf("out of memory in autodiff");
    for (int k = 0; k < n_from; k++)
        reached[from[k]] = true;
    int c = 0;
    for (int i = f->n_nodes - 1; i >= 0; i--) { /* the layout of jg_autodiff */
        const jg_gnode *n = &f->nodes[i];
        bool any = false;
        for (int k = 0; k < n->n_out; k++)
            any |= reached[n->out[k]];
        if (any)
            mark_operands_reached(f, n, reached);
        const jg_custom_info *info = lifted_info(n);
        for (int k = 0; k < jg_gnode_n_slots(n); k++) {
            const jg_value *ov = &f->vals[jg_gnode_slot_value(n, k)];
            if (ov->kind == JG_VAL_INPUT && ov->requires_grad)
                contrib_reached[c++] = any && !(info && k >= info->n_args);
        }
    }
    free(reached);
    return 0;
}

void jg_autodiff_result_free(jg_autodiff_result *r) {
    jg_graph_free(r->bwd);
    free(r->in_src);
    free(r->in_checked);
    free(r->checked_by);
    free(r->contrib_input);
    free(r->node_reached);
    free(r->node_ran);
    memset(r, 0, sizeof *r);
}

/* Moves nodes [first, n_nodes) (appended last) each to just after the
 * latest node it reads from, keeping their relative order: a sum of
 * contributions then runs as soon as each term exists, so under the c
 * backend a loop keeps one running sum instead of holding every term until
 * the end.  Every node computes the same value wherever it runs. */
static int hoist_appended(jg_graph *g, int first) {
    int nn = g->n_nodes, n_new = nn - first;
    if (n_new <= 0)
        return 0;
    int *ready = malloc(sizeof(int) * (size_t)n_new);
    jg_gnode *order = malloc(sizeof *order * (size_t)nn);
    if (!ready || !order) {
        free(ready);
        free(order);
        return jg_errorf("out of memory building a backward graph");
    }
    for (int j = 0; j < n_new; j++) {
        const jg_gnode *n = &g->nodes[first + j];
        ready[j] = -1;
        for (int k = 0; k < n->n_in; k++) {
            const jg_value *v = &g->vals[n->in[k]];
            int r = v->kind != JG_VAL_NODE ? -1
                    : v->node < first      ? v->node
                                           : ready[v->node - first];
            if (r > ready[j])
                ready[j] = r;
        }
    }
    int w = 0;
    for (int i = -1; i < first; i++) {
        if (i >= 0)
            order[w++] = g->nodes[i];
        for (int j = 0; j < n_new; j++)
            if (ready[j] == i)
                order[w++] = g->nodes[first + j];
    }
    JG_ASSERT(w == nn);
    memcpy(g->nodes, order, sizeof *order * (size_t)nn);
    for (int i = 0; i < nn; i++)
        for (int k = 0; k < g->nodes[i].n_out; k++)
            if (g->nodes[i].out[k] >= 0)
                g->vals[g->nodes[i].out[k]].node = i;
    free(ready);
    free(order);
    return 0;
}

int jg_autodiff_sum_contribs(jg_graph *bwd, const jg_graph *fwd, const int *contrib_input,
                             const bool *init_head) {
    return jg_autodiff_sum_contribs_n(bwd, bwd->n_outputs, fwd, contrib_input, init_head);
}

int jg_autodiff_sum_contribs_n(jg_graph *bwd, int n, const jg_graph *fwd, const int *contrib_input,
                               const bool *init_head) {
    int n_all = bwd->n_outputs, n_init = 0, first = bwd->n_nodes;
    JG_ASSERT(n <= n_all);
    int *outs = malloc(sizeof(int) * (size_t)(n_all ? n_all : 1));
    if (!outs)
        return jg_errorf("out of memory building a backward graph");
    memcpy(outs, bwd->outputs, sizeof(int) * (size_t)n_all);
    for (int h = 0; h < n; h++) {
        int k = 0;
        while (k < h && contrib_input[k] != contrib_input[h])
            k++;
        if (k < h)
            continue; /* not the group's first contribution: summed below */
        const jg_meta *m = &fwd->vals[fwd->inputs[contrib_input[h]]].meta;
        int acc = -1;
        if (init_head && init_head[h]) {
            char name[32];
            snprintf(name, sizeof name, "acc%d", n_init);
            if ((acc = jg_graph_add_input(bwd, m, false, name)) < 0)
                goto fail;
            n_init++;
        }
        /* the engine's order: the gradient held so far, then each
         * contribution along the edges in order, acc + c (jg_grad_accumulate) */
        for (int c = h; c < n; c++) {
            if (contrib_input[c] != contrib_input[h] || outs[c] < 0)
                continue;
            int v = outs[c];
            outs[c] = -1;
            if (acc < 0) {
                acc = v;
                continue;
            }
            const jg_value *va = &bwd->vals[acc], *vc = &bwd->vals[v];
            if (va->meta.dtype != vc->meta.dtype || !jg_meta_equal(&va->meta, &vc->meta)) {
                free(outs);
                return jg_errorf("internal error: contributions to input %d differ in dtype or "
                                 "shape",
                                 contrib_input[h]);
            }
            int in[2] = {acc, v}, sum;
            jg_meta sm = va->meta;
            if (jg_graph_add_op(bwd, JG_OP_ADD, NULL, 2, in, &sm, false, &sum) < 0)
                goto fail;
            acc = sum;
        }
        outs[h] = acc;
    }
    int rc = jg_graph_set_outputs(bwd, n_all, outs); /* (outputs after n as they were) */
    free(outs);
    if (rc == 0)
        rc = hoist_appended(bwd, first);
    return rc < 0 ? rc : n_init;
fail:
    free(outs);
    return -1;
}

int jg_autodiff_fold_grads(jg_graph *bwd, const jg_graph *fwd, const int *contrib_input,
                           bool *fold_head) {
    int n = bwd->n_outputs, n_fold = 0, first = bwd->n_nodes;
    int *outs = malloc(sizeof(int) * (size_t)(n ? n : 1));
    if (!outs)
        return jg_errorf("out of memory building a backward graph");
    memcpy(outs, bwd->outputs, sizeof(int) * (size_t)n);
    for (int h = 0; h < n; h++) {
        if (!fold_head[h])
            continue;
        const jg_meta *m = &fwd->vals[fwd->inputs[contrib_input[h]]].meta;
        if (outs[h] < 0) { /* no gradient in this backward: .grad stays as it is */
            fold_head[h] = false;
            continue;
        }
        if (!jg_meta_equal(&bwd->vals[outs[h]].meta, m)) {
            free(outs);
            return jg_errorf("internal error: no gradient of input %d to add .grad to",
                             contrib_input[h]);
        }
        char name[32];
        snprintf(name, sizeof name, "grad%d", n_fold);
        int held = jg_graph_add_input(bwd, m, false, name), sum;
        jg_meta sm = *m;
        /* held first: jg_add_(leaf->grad, sum) */
        if (held < 0 || jg_graph_add_op(bwd, JG_OP_ADD, NULL, 2, (int[]){held, outs[h]}, &sm, false,
                                        &sum) < 0) {
            free(outs);
            return -1;
        }
        outs[h] = sum;
        n_fold++;
    }
    int rc = jg_graph_set_outputs(bwd, n, outs);
    free(outs);
    if (rc == 0)
        rc = hoist_appended(bwd, first);
    return rc < 0 ? rc : n_fold;
}
