/* Running a cache entry, and the autograd node a compiled call's outputs
 * share: its apply runs the backward graph, its edges go to the call's
 * inputs (one per gradient contribution), it saves what the backward graph
 * reads, and the call's inputs for a backward that records history. */
#include "autodiff/autodiff.h"
#include "autograd/engine.h"
#include "autograd/node.h"
#include "compile/compile.h"
#include "ops/viewtrack.h"
#include "passes/passes.h"
#include "trace/trace.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    jg_node base;
    jg_entry *e;
    int n_saved, n_inputs;
    jg_saved *saved; /* n_saved values the backward graphs read, then the n_inputs graph
                      * inputs (read only by a backward with JG_CREATE_GRAPH) */
    /* saved is left empty: every output leads to a node the program's own
     * backward freed, so any gradient arriving fails before a read */
    bool unsaved;
    /* NULL, or per node output: the eager node (retained) and its output
     * that a create_graph backward's rerun of the forward produced it with;
     * later backwards go there (cnode_redirect) */
    struct cnode_redirect {
        jg_node *fn;
        int nr;
    } * redir;
} compiled_node;

int jg_compile_passes(jg_graph *g, bool cse) {
    if (jg_graph_verify(g) < 0)
        return -1;
    if (jg_pass_dedup(g) < 0 || jg_graph_verify(g) < 0)
        return -1;
    if (cse && (jg_pass_cse(g) < 0 || jg_graph_verify(g) < 0))
        return -1;
    if (cse && (jg_pass_slices(g) < 0 || jg_graph_verify(g) < 0))
        return -1;
    if (jg_pass_dce(g) < 0 || jg_graph_verify(g) < 0)
        return -1;
    return 0;
}

static void variant_free(const jg_entry *e, jg_bwd_variant *v) {
    e->backend->plan_free(v->plan);
    jg_graph_free(v->g);
    free(v->in_src);
    free(v->mask);
}

void jg_entry_release(jg_entry *e) {
    if (!e || --e->refcount > 0)
        return;
    for (int i = 0; i < e->n_bwd; i++)
        variant_free(e, &e->bwd[i]);
    free(e->bwd);
    e->backend->plan_free(e->fplan);
    if (e->fwd != e->fwd_ad)
        jg_graph_free(e->fwd);
    jg_graph_free(e->fwd_ad);
    jg_graph_free(e->traced);
    free(e->sizes.use);
    for (int i = 0; i < e->n_lifted; i++)
        jg_release(e->lifted[i]);
    free(e->lifted);
    free(e->lifted_key);
    for (int i = 0; i < e->n_gr; i++)
        jg_release(e->gr_owner[i]);
    free(e->gr_owner);
    free(e->gr_had);
    free(e->lifted_grad_of);
    for (int i = 0; i < e->n_vg; i++) {
        jg_release(e->vg_t[i]);
        free(e->vg_bytes[i]);
    }
    free(e->vg_t);
    free(e->vg_bytes);
    for (int i = 0; i < e->n_gset; i++)
        jg_release(e->gset_owner[i]);
    free(e->gset_owner);
    free(e->gset_out);
    free(e->lmut_lifted);
    free(e->lmut_writes);
    for (int i = 0; i < e->n_pinned; i++)
        jg_release(e->pinned[i]);
    free(e->pinned);
    free(e->pinned_input);
    free(e->graph_input_of);
    free(e->call_input_of);
    free(e->saved_val);
    free(e->saved_src);
    free(e->saved_check);
    free(e->ow);
    free(e->remat);
    free(e->node_out_val);
    free(e->node_out_prog);
    free(e->edge_input);
    free(e->mut_input);
    free(e->mut_writes);
    free(e->mut_check);
    free(e->out_freed);
    free(e->out_input);
    for (int j = 0; e->out_view_steps && j < e->n_out_view; j++)
        free(e->out_view_steps[j]);
    free(e->out_view_steps);
    free(e->out_view_in);
    free(e->out_view_n);
    free(e->out_relayout);
    free(e->out_stride);
    free(e->key.in);
    free((void *)e->key.args);
    free(e->break_reason);
    free(e);
}

/* Edge h heads a group (the first edge to its input) with more edges after
 * it. */
static bool multi_head(const jg_entry *e, int h) {
    int k = 0;
    while (k < h && e->edge_input[k] != e->edge_input[h])
        k++;
    if (k < h)
        return false;
    for (k = h + 1; k < e->n_edges; k++)
        if (e->edge_input[k] == e->edge_input[h])
            return true;
    return false;
}

int jg_entry_count_groups(const jg_entry *e) {
    int n = 0;
    for (int h = 0; h < e->n_edges; h++)
        n += multi_head(e, h);
    return n;
}

int jg_entry_sum_in_graph(jg_entry *e, jg_bwd_variant *v) {
    bool *init = calloc((size_t)(e->n_edges ? e->n_edges : 1), sizeof *init);
    if (!init)
        return jg_errorf("out of memory building a backward graph");
    const unsigned char *held = v->mask + e->n_node_out; /* per group */
    int g = 0;
    for (int h = 0; h < e->n_edges; h++)
        if (multi_head(e, h))
            init[h] = held[g++];
    int n_init = jg_autodiff_sum_contribs(v->g, e->fwd_ad, e->edge_input, init);
    int *in_src =
        n_init < 0 ? NULL : realloc(v->in_src, sizeof(int) * (size_t)(v->n_in + n_init + 1));
    if (in_src) {
        v->in_src = in_src;
        for (int h = 0; h < e->n_edges; h++)
            if (init[h])
                v->in_src[v->n_in++] = -1 - e->n_node_out - h;
    }
    free(init);
    if (n_init >= 0 && !in_src)
        return jg_errorf("out of memory building a backward graph");
    return n_init < 0 ? -1 : 0;
}

/* Makes the gradient sent along each edge h with fold[h] the input's .grad
 * plus it (jg_engine_leaf_grad), where the graph computes one:
 * placeholders read as in_src -1 - n_node_out - n_edges - h. */
static int fold_grads(jg_entry *e, jg_bwd_variant *v, const unsigned char *fold) {
    bool *head = calloc((size_t)(e->n_edges ? e->n_edges : 1), sizeof *head);
    if (!head)
        return jg_errorf("out of memory building a backward graph");
    for (int h = 0; h < e->n_edges; h++)
        head[h] = fold[h];
    int n_fold = jg_autodiff_fold_grads(v->g, e->fwd_ad, e->edge_input, head);
    int *in_src =
        n_fold < 0 ? NULL : realloc(v->in_src, sizeof(int) * (size_t)(v->n_in + n_fold + 1));
    if (in_src) {
        v->in_src = in_src;
        for (int h = 0; h < e->n_edges; h++)
            if (head[h])
                v->in_src[v->n_in++] = -1 - e->n_node_out - e->n_edges - h;
    }
    free(head);
    if (n_fold >= 0 && !in_src)
        return jg_errorf("out of memory building a backward graph");
    return n_fold < 0 ? -1 : 0;
}

jg_bwd_variant *jg_entry_backward(jg_entry *e, const unsigned char *mask, uint64_t sum) {
    /* the key: per node output, per input group (held), per edge (fold) */
    size_t nm = (size_t)e->n_node_out, nk = nm + (size_t)e->n_groups + (size_t)e->n_edges;
    for (int i = 0; i < e->n_bwd; i++)
        if (!memcmp(e->bwd[i].mask, mask, nk) && e->bwd[i].sum == sum)
            return &e->bwd[i];
    if (e->n_bwd == e->cap_bwd) {
        int cap = e->cap_bwd ? e->cap_bwd * 2 : 2;
        jg_bwd_variant *b = realloc(e->bwd, (size_t)cap * sizeof *b);
        if (!b)
            return jg_errorf_null("out of memory building a backward graph");
        e->bwd = b;
        e->cap_bwd = cap;
    }
    /* seeds, seed_out (the node output of each seed), reach, and the
     * variant's copy of the mask: one allocation but the last */
    int *seeds = malloc(sizeof(int) * 3 * (nm ? nm : 1)), n_seeds = 0, n_reach = 0;
    unsigned char *own = malloc(nk ? nk : 1);
    if (!seeds || !own) {
        free(seeds);
        free(own);
        return jg_errorf_null("out of memory building a backward graph");
    }
    int *seed_out = seeds + nm, *reach = seed_out + nm;
    memcpy(own, mask, nk);
    for (int k = 0; k < e->n_node_out; k++) {
        if (mask[k] == JG_BWD_GRAD) {
            seed_out[n_seeds] = k;
            seeds[n_seeds++] = e->node_out_val[k];
        } else if (mask[k] == JG_BWD_REACHED) {
            reach[n_reach++] = e->node_out_val[k];
        }
    }
    jg_autodiff_result r;
    if (jg_autodiff(e->fwd_ad, n_seeds, seeds, n_reach, reach, &r) < 0) {
        free(seeds);
        free(own);
        return NULL;
    }
    JG_ASSERT(r.n_contrib == e->n_edges);
    jg_bwd_variant v = {own, r.bwd, NULL, r.n_in, r.in_src, sum};
    r.bwd = NULL;
    r.in_src = NULL;
    jg_autodiff_result_free(&r);
    if (jg_entry_remat_apply(e, v.g, &v.in_src, NULL, &v.n_in) < 0) {
        free(seeds);
        variant_free(e, &v);
        return NULL;
    }
    for (int k = 0; k < v.n_in; k++) {
        int src = v.in_src[k];
        if (src < 0) {
            v.in_src[k] = -1 - seed_out[-1 - src];
            continue;
        }
        int i = 0;
        while (i < e->n_saved && e->saved_val[i] != src)
            i++;
        if (i == e->n_saved) {
            /* cannot happen: a partial backward reads a subset of what the
             * full one reads */
            free(seeds);
            variant_free(e, &v);
            return jg_errorf_null("internal error: a partial backward graph reads forward value "
                                  "%d, which the forward does not save",
                                  src);
        }
        v.in_src[k] = i;
    }
    free(seeds);
    if (sum && jg_entry_sum_in_graph(e, &v) < 0) {
        variant_free(e, &v);
        return NULL;
    }
    if (memchr(own + nm + e->n_groups, 1, (size_t)e->n_edges) &&
        fold_grads(e, &v, own + nm + e->n_groups) < 0) {
        variant_free(e, &v);
        return NULL;
    }
    if (jg_compile_passes(v.g, true) < 0 || !(v.plan = e->backend->plan_new(v.g))) {
        variant_free(e, &v);
        return NULL;
    }
    e->bwd[e->n_bwd] = v;
    return &e->bwd[e->n_bwd++];
}

/* ------------------------------------------------------------------ node */

/* ------------------------------------------------ create_graph backward */

/* The stand-in for one use of an input in a create_graph rerun: an alias
 * of the input whose node redirects to the input itself, so every node of
 * the rerun -- and every node made later from the rerun's saved tensors (a
 * second derivative's) -- adds into the input on its own, as eager's nodes,
 * made from the input itself, do.  (A separate tensor per use, so the
 * rerun's ops see the operands eager's saw, distinct where the program's
 * were: `through` is set once the rerun is done.) */
typedef struct {
    jg_node base;
    bool through;
} use_node;

static int use_apply(jg_node *n, jg_tensor *const *gout, const bool *reached, jg_tensor **gin,
                     bool create_graph) {
    (void)n;
    (void)reached;
    (void)create_graph;
    gin[0] = gout[0];
    return 0;
}

static void use_release(jg_node *n) {
    (void)n;
}

static const char *use_name(const jg_node *n) {
    (void)n;
    return "CompiledInputUseBackward";
}

static bool use_redirect(const jg_node *n, int nr, jg_edge *to) {
    (void)nr;
    if (!((const use_node *)n)->through)
        return false;
    *to = n->next[0];
    return true;
}

static const jg_node_vt use_vt = {use_apply, use_release, use_release,  use_name,
                                  false,     NULL,        use_redirect, NULL};

static jg_tensor *use_new(jg_tensor *in, bool fresh) {
    jg_tensor *a = NULL;
    if (fresh) { /* (a copy of its own: see stale inputs below) */
        bool prev = jg_set_grad_enabled(false);
        jg_scope_push();
        a = jg_keep(jg_clone(in));
        jg_scope_pop();
        jg_set_grad_enabled(prev);
        if (a) {
            a->requires_grad = false;
            jg_node_release(a->grad_fn);
            a->grad_fn = NULL;
        }
    } else {
        a = jg_alias_no_history(in);
    }
    jg_node *n = a ? jg_node_alloc(sizeof(use_node), &use_vt, 1, 1) : NULL;
    if (!n) {
        jg_release(a);
        return jg_errorf_null("out of memory in backward");
    }
    jg_node_set_edge(n, 0, in);
    jg_node_set_outputs(n, 1, &a);
    jg_node_release(n); /* (a holds it) */
    return jg_scope_track(a);
}

static bool cnode_redirect(const jg_node *n, int nr, jg_edge *to) {
    const compiled_node *c = (const compiled_node *)n;
    if (!c->redir || !c->redir[nr].fn)
        return false;
    *to = (jg_edge){c->redir[nr].fn, c->redir[nr].nr, NULL};
    return true;
}

/* The rerun's forward nodes (created from seq `first` on, reached from its
 * values) take the places just before the call's node, where eager's
 * forward nodes of the call are: the engine runs them in eager's order
 * among the other nodes. */
static int place_rerun_nodes(int n_out, jg_tensor *const *outs, uint64_t first, uint64_t call_seq) {
    uint64_t last = 0;
    for (int k = 0; k < n_out; k++)
        if (outs[k] && outs[k]->grad_fn && outs[k]->grad_fn->seq > last)
            last = outs[k]->grad_fn->seq;
    if (last < first)
        return 0;
    size_t n_new = (size_t)((last - first) / JG_NODE_SEQ_STRIDE + 1);
    if (n_new >= JG_NODE_SEQ_STRIDE || call_seq <= JG_NODE_SEQ_STRIDE)
        return 0; /* no room: they run after the call's place (still correct) */
    jg_node **stack = malloc(n_new * sizeof *stack), **seen = calloc(n_new, sizeof *seen);
    if (!stack || !seen) {
        free(stack);
        free(seen);
        return jg_errorf("out of memory in backward");
    }
    /* seen[(seq - first) / stride]: each new node has a seq of its own */
    size_t sp = 0;
    for (int k = 0; k < n_out; k++) {
        jg_node *n = outs[k] ? outs[k]->grad_fn : NULL;
        if (n && n->seq >= first && n->seq <= last && !seen[(n->seq - first) / JG_NODE_SEQ_STRIDE])
            seen[(n->seq - first) / JG_NODE_SEQ_STRIDE] = stack[sp++] = n;
    }
    while (sp) {
        jg_node *n = stack[--sp];
        for (int k = 0; k < n->n_next; k++) {
            jg_node *nx = n->next[k].fn;
            if (nx && nx->seq >= first && nx->seq <= last &&
                (nx->seq - first) % JG_NODE_SEQ_STRIDE == 0 &&
                !seen[(nx->seq - first) / JG_NODE_SEQ_STRIDE])
                seen[(nx->seq - first) / JG_NODE_SEQ_STRIDE] = stack[sp++] = nx;
        }
    }
    for (size_t i = 0; i < n_new; i++)
        if (seen[i])
            seen[i]->seq = call_seq - JG_NODE_SEQ_STRIDE + 1 + i;
    free(stack);
    free(seen);
    return 0;
}

/* For a rerun from stale inputs (cnode_apply_create_graph): the values the
 * forward saved get their forward-time data back in the rerun's tensors (not
 * those sharing storage with a current input), and the stale inputs'
 * stand-ins move to a new version. */
static bool shares_input(const jg_entry *e, jg_tensor *const *in, const bool *stale,
                         const jg_tensor *t) {
    for (int k = 0; k < e->n_graph_inputs; k++)
        if (in[k] && !stale[k] && in[k]->storage == t->storage)
            return true;
    return false;
}

static int restore_saved(compiled_node *c, jg_tensor *const *vals, jg_tensor *const *in,
                         const bool *stale, int n_stand, jg_tensor *const *stand) {
    jg_entry *e = c->e;
    const jg_graph *f = e->fwd_ad;
    /* dep[v]: the rerun computed v from a stale input; done[v]: v has its
     * forward-time data again */
    bool *dep = calloc(2 * (size_t)f->n_vals + 1, sizeof *dep), *done = dep + f->n_vals;
    if (!dep)
        return jg_errorf("out of memory in backward");
    for (int k = 0; k < e->n_graph_inputs; k++)
        dep[f->inputs[k]] = stale[k];
    for (int i = 0; i < f->n_nodes; i++) {
        const jg_gnode *n = &f->nodes[i];
        bool d = false;
        for (int s = 0; s < jg_gnode_n_slots(n); s++)
            d |= dep[jg_gnode_slot_value(n, s)];
        for (int k = 0; k < n->n_out; k++)
            if (n->out[k] >= 0)
                dep[n->out[k]] = d;
    }
    for (int i = 0; i < e->n_saved; i++) {
        jg_tensor *rv = vals[e->saved_val[i]];
        if (!rv || f->vals[e->saved_val[i]].kind == JG_VAL_INPUT || !rv->storage ||
            shares_input(e, in, stale, rv))
            continue;
        jg_tensor *fwd = jg_saved_unpack(&c->saved[i], &c->base, false);
        if (!fwd) {
            free(dep);
            return -1;
        }
        jg_copy_data(rv, fwd); /* (no version bump: the forward's values) */
        done[e->saved_val[i]] = true;
    }
    /* Any other value the rerun computed from a stale input holds data the
     * forward never had: its version moves on, so a rerun node that saved
     * it fails when read (eager's in-place message) rather than computing
     * a wrong gradient -- unless it shares storage with a restored value
     * or a current input (a view of them). */
    for (int v = 0; v < f->n_vals; v++) {
        jg_tensor *t = vals[v];
        if (!dep[v] || done[v] || !t || !t->storage || f->vals[v].kind == JG_VAL_INPUT ||
            shares_input(e, in, stale, t))
            continue;
        bool restored = false;
        for (int w = 0; w < f->n_vals && !restored; w++)
            restored = done[w] && vals[w] && vals[w]->storage == t->storage;
        if (!restored)
            t->storage->version++;
    }
    free(dep);
    for (int j = 0; j < n_stand; j++) {
        jg_tensor *t = stand[j];
        bool fresh = true;
        for (int k = 0; k < e->n_graph_inputs && fresh; k++)
            fresh = !in[k] || in[k]->storage != t->storage;
        if (fresh && t->storage)
            t->storage->version++;
    }
    for (int k = 0; k < e->n_graph_inputs; k++) /* (the copies made for stale inputs) */
        if (stale[k] && in[k] && !f->vals[f->inputs[k]].requires_grad && in[k]->storage)
            in[k]->storage->version++;
    return 0;
}

/* A backward that records history (JG_CREATE_GRAPH).  The compiled forward
 * kept no history, so the traced forward graph is run again through the
 * eager ops (custom calls through jg_apply_lifted) with grad mode on, from
 * the call's inputs: eager's own forward nodes, made now.  The call's
 * outputs in this backward then stand at those nodes (cnode_redirect, for
 * this and every later backward), and the engine runs them in this
 * backward in the call's place (JG_NODE_SPLICED): the gradients and their
 * history are eager's, summed in eager's order, and a later backward (a
 * second derivative, a plain backward of the outputs) finds eager's
 * structure.  Every use of an input that requires grad reads it through a
 * stand-in of its own that redirects to the input. */
static int cnode_apply_create_graph(compiled_node *c, jg_tensor *const *gout, const bool *reached) {
    jg_entry *e = c->e;
    const jg_graph *f = e->fwd_ad;
    int ng = e->n_graph_inputs, nf = f->n_outputs, nu = 0;
    /* outputs of this backward: with a gradient, or reached (a custom call
     * behind it runs on zeros, as in eager) */
    bool *in_run = calloc((size_t)e->n_node_out + 1, sizeof *in_run), any = false;
    if (!in_run)
        return jg_errorf("out of memory in backward");
    for (int k = 0; k < e->n_node_out; k++)
        any |= in_run[k] = gout[k] || (reached[k] && e->has_custom);
    if (!any) {
        free(in_run);
        return 1;
    }
    for (int i = 0; i < f->n_nodes; i++)
        nu += jg_gnode_n_slots(&f->nodes[i]);
    size_t words = (size_t)ng + (size_t)nu + (size_t)nf;
    /* (+ n_node_out: the outputs of this backward, at the end) */
    jg_tensor **in = calloc(words + (size_t)e->n_node_out + 1, sizeof *in);
    if (!in) {
        free(in_run);
        return jg_errorf("out of memory in backward");
    }
    jg_tensor **uses = in + ng, **fo = uses + nu;
    jg_scope_push();
    int rc = 0;
    /* only the nodes that lead to an output of this backward run again (as
     * only they are part of eager's backward), and only the inputs they
     * read are unpacked: an input or captured tensor the rest reads may have
     * changed in place since the call, which eager's backward would not
     * notice either */
    bool *need = calloc((size_t)f->n_vals + (size_t)f->n_nodes + 1, sizeof *need);
    bool *live = need + f->n_vals;
    /* A value without history that the forward saved (a comparison's
     * mask, say) is taken as saved rather than recomputed, as eager's
     * nodes saved it: recomputing it would read what it was computed from
     * (a captured tensor), which may have changed in place since the call
     * although eager's backward never reads it. */
    int *avail = calloc((size_t)f->n_vals + 1, sizeof *avail);
    jg_tensor **pre = calloc((size_t)f->n_vals + 1, sizeof *pre);
    jg_tensor **stand = calloc((size_t)nu + 1, sizeof *stand);
    if (!need || !avail || !pre || !stand)
        rc = jg_errorf("out of memory in backward");
    for (int i = 0; i < e->n_saved && rc == 0; i++) {
        const jg_value *sv = &f->vals[e->saved_val[i]];
        if (sv->kind != JG_VAL_INPUT && !sv->requires_grad)
            avail[e->saved_val[i]] = i + 1;
    }
    for (int k = 0; k < e->n_node_out && rc == 0; k++)
        if (in_run[k])
            need[e->node_out_val[k]] = true;
    for (int i = f->n_nodes - 1; i >= 0 && rc == 0; i--) {
        const jg_gnode *n = &f->nodes[i];
        for (int k = 0; k < n->n_out && !live[i]; k++)
            live[i] = n->out[k] >= 0 && need[n->out[k]] && !avail[n->out[k]];
        for (int s = 0; s < jg_gnode_n_slots(n) && live[i]; s++)
            need[jg_gnode_slot_value(n, s)] = true;
    }
    for (int v = 0; v < f->n_vals && rc == 0; v++)
        if (need[v] && avail[v] &&
            !(pre[v] = jg_saved_unpack(&c->saved[avail[v] - 1], &c->base, true)))
            rc = -1;
    /* An input changed in place since the call (stale) cannot give the
     * forward-time values eager's nodes saved.  The rerun computes from its
     * current values, through a stand-in of its own; then every value the
     * forward saved (what the nodes' backward reads) gets its forward-time
     * data back, and the stand-in's version moves on, so a rerun node that
     * saved the input itself fails when read, with eager's message, as
     * eager's node would. */
    bool *stale = calloc(2 * (size_t)ng + 1, sizeof *stale), any_stale = false;
    bool *flipped = stale ? stale + ng : NULL;
    if (!stale && rc == 0)
        rc = jg_errorf("out of memory in backward");
    for (int k = 0; k < ng && rc == 0; k++) {
        if (!need[f->inputs[k]])
            continue;
        jg_saved *sk = &c->saved[c->n_saved + k];
        any_stale |= stale[k] = sk->t && sk->t->storage && sk->t->storage->version != sk->version;
        bool was = sk->unchecked;
        sk->unchecked |= stale[k];
        if (!(in[k] = jg_saved_unpack(sk, &c->base, true)))
            rc = -1;
        sk->unchecked = was;
        if (rc == 0 && !f->vals[f->inputs[k]].requires_grad && in[k]->requires_grad) {
            /* it did not require grad at the call (a captured tensor whose
             * requires_grad was switched on since): eager's nodes have no
             * edge to it, nor may the rerun's.  A leaf is read as itself
             * with requires_grad off for the rerun: eager's nodes saved the
             * leaf itself, so a second derivative through what they saved
             * reaches it now. */
            if (!stale[k] && !in[k]->grad_fn) {
                in[k]->requires_grad = false;
                flipped[k] = true;
            } else if (!(in[k] = jg_detach(in[k]))) {
                rc = -1;
            }
        } else if (rc == 0 && f->vals[f->inputs[k]].requires_grad && !in[k]->requires_grad &&
                   !in[k]->grad_fn && !stale[k]) {
            /* the reverse: a leaf that required grad at the call and no longer
             * does.  Eager's nodes have history and an edge to it (which gives
             * it nothing while it is off) and saved the leaf itself (no
             * second derivative through it while it is off): the rerun reads
             * it as itself, requiring grad as at the call, without a
             * stand-in. */
            in[k]->requires_grad = true;
            flipped[k] = true;
        }
        if (rc == 0 && stale[k] && !f->vals[f->inputs[k]].requires_grad) {
            /* no stand-in for it: a copy of its own in its place */
            bool prev = jg_set_grad_enabled(false);
            if (!(in[k] = jg_clone(in[k])))
                rc = -1;
            jg_set_grad_enabled(prev);
        }
    }
    int n_stand = 0;
    for (int i = 0, u = 0; i < f->n_nodes && rc == 0; i++) {
        const jg_gnode *n = &f->nodes[i];
        int ns = jg_gnode_n_slots(n);
        for (int s = 0; s < ns && rc == 0 && live[i]; s++) {
            const jg_value *ov = &f->vals[jg_gnode_slot_value(n, s)];
            /* (an input that no longer requires grad -- switched off since
             * the call -- gets none: eager's node's edge to it gives it
             * nothing now, and what it computes has no history) */
            if (ov->kind != JG_VAL_INPUT || !ov->requires_grad || !in[ov->index] ||
                !in[ov->index]->requires_grad || flipped[ov->index])
                continue;
            if (!(uses[u + s] = stand[n_stand++] = use_new(in[ov->index], stale[ov->index])))
                rc = -1;
        }
        u += ns;
    }
    uint64_t first = jg_node_next_seq();
    jg_tensor **vals = calloc((size_t)f->n_vals + 1, sizeof *vals);
    if (!vals && rc == 0)
        rc = jg_errorf("out of memory in backward");
    if (rc == 0)
        rc = jg_trace_replay_uses(f, in, uses, live, pre, fo, vals);
    for (int k = 0; k < ng && flipped; k++)
        if (flipped[k])
            in[k]->requires_grad = !in[k]->requires_grad;
    if (rc == 0 && any_stale)
        rc = restore_saved(c, vals, in, stale, n_stand, stand);
    for (int j = 0; j < n_stand && rc == 0; j++)
        ((use_node *)stand[j]->grad_fn)->through = true;
    jg_tensor **outs = fo + nf;
    for (int k = 0; k < e->n_node_out; k++) {
        outs[k] = fo[e->node_out_prog[k]];
        /* An output without a gradient in this backward that the rerun made
         * anyway (it feeds one that has one) stands at the rerun's node too:
         * a tensor the program holds -- a piece's result kept in an object
         * that a custom call's forward saved -- then sends a later gradient
         * into the same node as the rerun's uses of its value, summed there
         * in eager's order, not through the compiled backward beside it. */
        if (!in_run[k] &&
            (rc < 0 || !outs[k] || !outs[k]->grad_fn || outs[k]->grad_fn->seq < first))
            outs[k] = NULL;
    }
    /* every node of the rerun: also those no output leads to (a value a
     * custom call reaches through an object, which is no input of its node) */
    if (rc == 0)
        rc = place_rerun_nodes(f->n_vals, vals, first, c->base.seq);
    free(vals);
    if (rc == 0 && !c->redir && !(c->redir = calloc((size_t)e->n_node_out, sizeof *c->redir)))
        rc = jg_errorf("out of memory in backward");
    for (int k = 0; k < e->n_node_out && rc == 0; k++) {
        if (!in_run[k] && !outs[k])
            continue;
        if (!outs[k] || !outs[k]->grad_fn) {
            rc = jg_errorf("internal error: output %d of a compiled call has no history when "
                           "its forward runs again for a create_graph backward",
                           k);
            break;
        }
        jg_node_release(c->redir[k].fn);
        c->redir[k].fn = outs[k]->grad_fn;
        c->redir[k].nr = outs[k]->output_nr;
        jg_node_retain(outs[k]->grad_fn);
    }
    jg_scope_pop();
    free(need);
    free(avail);
    free(pre);
    free(stand);
    free(stale);
    free(in);
    free(in_run);
    return rc < 0 ? -1 : JG_NODE_SPLICED;
}

/* Whether the contributions of each input can be summed inside the backward
 * graph with the engine's result: every input's edges add into one
 * accumulator of their own (as they do unless two inputs' gradients meet in
 * one node), and a gradient it already holds, the sum starts from (taken
 * from the engine: held_out[g] for the g-th input with several
 * contributions).  JG_SUM_IN_GRAPH, or 0: let the engine add them one by
 * one (held_out all 0). */
static uint64_t sum_mode(const jg_node *n, const jg_entry *e, const void **tgt, jg_tensor ***acc,
                         unsigned char *held_out) {
    memset(held_out, 0, (size_t)e->n_groups);
    bool any = false;
    for (int k = 0; k < e->n_edges; k++)
        if (jg_engine_edge_acc(n, k, &tgt[k], &acc[k]) < 0)
            return 0;
    for (int k = 0; k < e->n_edges; k++)
        for (int j = 0; j < k; j++)
            if ((e->edge_input[j] == e->edge_input[k]) != (tgt[j] == tgt[k]) && tgt[k])
                return 0;
    for (int h = 0, g = 0; h < e->n_edges; h++) {
        if (!multi_head(e, h))
            continue;
        any = true;
        jg_tensor *held = acc[h] ? *acc[h] : NULL;
        if (held) {
            jg_meta m;
            jg_meta_of(held, &m);
            if (held->requires_grad ||
                !jg_meta_equal(&m, &e->fwd_ad->vals[e->fwd_ad->inputs[e->edge_input[h]]].meta)) {
                memset(held_out, 0, (size_t)e->n_groups);
                return 0;
            }
            held_out[g] = 1;
        }
        g++;
    }
    return any ? JG_SUM_IN_GRAPH : 0;
}

/* Which edges' leaves get their .grad folded into the gradient this call
 * sends (jg_engine_leaf_grad): the first edge of an input whose whole
 * gradient one output carries (its only edge, or its sum in the graph), when
 * every edge of this call to that leaf comes from that input.  Only under
 * the c backend, where the add joins the loop that computes the gradient;
 * the interpreter would run it as a kernel of its own into a new buffer,
 * one more stream than the engine's in-place add.  Sets fold[h] per edge,
 * returns how many. */
static int fold_mode(const jg_node *n, const jg_entry *e, uint64_t sum, const void *const *tgt,
                     unsigned char *fold) {
    memset(fold, 0, (size_t)e->n_edges);
    int n_fold = 0;
    if (e->backend != &jg_backend_c)
        return 0;
    for (int h = 0; h < e->n_edges; h++) {
        bool head = true, whole = true;
        for (int k = 0; k < e->n_edges && head; k++)
            if (k != h && e->edge_input[k] == e->edge_input[h]) {
                head = k > h;
                whole = sum == JG_SUM_IN_GRAPH;
            }
        if (!head || !whole || !tgt[h])
            continue;
        bool own = true;
        for (int k = 0; k < e->n_edges && own; k++)
            own = tgt[k] != tgt[h] || e->edge_input[k] == e->edge_input[h];
        jg_tensor *g = own ? jg_engine_leaf_grad(n, h) : NULL;
        jg_meta m;
        if (g) {
            jg_meta_of(g, &m);
            if (jg_meta_equal(&m, &e->fwd_ad->vals[e->fwd_ad->inputs[e->edge_input[h]]].meta)) {
                fold[h] = 1;
                n_fold++;
            }
        }
    }
    return n_fold;
}

static int cnode_apply(jg_node *n, jg_tensor *const *gout, const bool *reached, jg_tensor **gin,
                       bool create_graph) {
    compiled_node *c = (compiled_node *)n;
    jg_entry *e = c->e;
    for (int k = 0; e->out_freed && k < e->n_node_out; k++)
        if (gout[k] && e->out_freed[e->node_out_prog[k]])
            return jg_errorf("%s", JG_SAVED_FREED_MSG);
    if (c->unsaved)
        return 1; /* no gradient arrived (one would have failed above): not run */
    for (int k = 0; e->stale && k < e->n_node_out; k++)
        if (gout[k]) {
            /* a saved value the program overwrote: eager's backward fails */
            const jg_saved *in = e->stale_input >= 0 && c->saved[e->n_saved + e->stale_input].t
                                     ? &c->saved[e->n_saved + e->stale_input]
                                     : NULL;
            return jg_stale_saved_error(e, in ? in->version : 0, in ? jg_version(in->t) : 0,
                                        in ? in->t->grad_fn : NULL, in ? in->t->output_nr : 0);
        }
    /* outputs reached without a gradient matter only to custom calls, whose
     * backward runs anyway (as eager runs it) */
    if (create_graph)
        return cnode_apply_create_graph(c, gout, reached);
    /* the variant's key: per node output, then per input group (sum_mode) */
    unsigned char mask_small[64], *mask = mask_small;
    int nk = e->n_node_out + e->n_groups + e->n_edges;
    if (nk > 64 && !(mask = malloc((size_t)nk)))
        return jg_errorf("out of memory in backward");
    bool any = false;
    for (int k = 0; k < e->n_node_out; k++) {
        mask[k] = gout[k] ? JG_BWD_GRAD : reached[k] && e->has_custom ? JG_BWD_REACHED : 0;
        any |= mask[k] != 0;
    }
    if (!any) {
        if (mask != mask_small)
            free(mask);
        return 1; /* nothing arrived and nothing runs regardless: not run */
    }
    const void *tgt_small[32], **tgt = tgt_small;
    jg_tensor **acc_small[32], ***acc = acc_small;
    if (e->n_edges > 32 && (!(tgt = malloc(sizeof *tgt * (size_t)e->n_edges)) ||
                            !(acc = malloc(sizeof *acc * (size_t)e->n_edges)))) {
        if (tgt != tgt_small)
            free(tgt);
        if (mask != mask_small)
            free(mask);
        return jg_errorf("out of memory in backward");
    }
    uint64_t sum = sum_mode(n, e, tgt, acc, mask + e->n_node_out);
    unsigned char *fold = mask + e->n_node_out + e->n_groups;
    int n_fold = fold_mode(n, e, sum, tgt, fold);
    jg_bwd_variant *v = jg_entry_backward(e, mask, sum);
    if (mask != mask_small)
        free(mask);
    if (!v) {
        if (tgt != tgt_small)
            free(tgt);
        if (acc != acc_small)
            free(acc);
        return -1;
    }
    jg_tensor *small_in[32], **bin = small_in, *small_out[32], **bout = small_out;
    int n_out = v->g->n_outputs;
    if ((v->n_in > 32 && !(bin = malloc((size_t)v->n_in * sizeof *bin))) ||
        (n_out > 32 && !(bout = malloc((size_t)n_out * sizeof *bout)))) {
        if (bin != small_in)
            free(bin);
        return jg_errorf("out of memory in backward");
    }
    int rc = 0;
    for (int k = 0; k < v->n_in && rc == 0; k++) {
        int src = v->in_src[k];
        if (src <= -1 - e->n_node_out - e->n_edges) {
            if (!(bin[k] = jg_engine_leaf_grad(n, -1 - e->n_node_out - e->n_edges - src)))
                rc = jg_errorf("internal error: the .grad to fold in is gone");
        } else if (src <= -1 - e->n_node_out)
            bin[k] = *acc[-1 - e->n_node_out - src];
        else if (src < 0)
            bin[k] = gout[-1 - src];
        else if (!(bin[k] = jg_saved_read(e, src, &c->saved[src], n)))
            rc = -1;
    }
    if (rc == 0)
        rc = e->backend->run(v->plan, bin, bout);
    if (rc == 0) {
        for (int k = 0; k < n_out; k++)
            gin[k] = jg_scope_track(bout[k]); /* borrowed from the engine's scope */
        /* the sums include what the engine held: it starts again from them
         * (and .grad, where folded, is replaced by them at the commit) */
        for (int k = 0; n_fold && k < v->n_in; k++)
            if (v->in_src[k] <= -1 - e->n_node_out - e->n_edges)
                jg_engine_leaf_grad_folded(n, -1 - e->n_node_out - e->n_edges - v->in_src[k]);
        for (int k = 0; k < v->n_in; k++)
            if (v->in_src[k] <= -1 - e->n_node_out &&
                v->in_src[k] > -1 - e->n_node_out - e->n_edges) {
                jg_tensor **a = acc[-1 - e->n_node_out - v->in_src[k]];
                jg_release(*a);
                *a = NULL;
            }
    }
    if (tgt != tgt_small)
        free((void *)tgt);
    if (acc != acc_small)
        free(acc);
    if (rc == 0 && jg_debug_corrupt_backward && n_out && gin[0])
        gin[0] = jg_mul_scalar(gin[0], 2.0);
    if (bin != small_in)
        free(bin);
    if (bout != small_out)
        free(bout);
    return rc;
}

static void cnode_release_saved(jg_node *n) {
    compiled_node *c = (compiled_node *)n;
    for (int i = 0; i < c->n_saved + c->n_inputs; i++)
        jg_saved_free(&c->saved[i]);
}

static void cnode_destroy(jg_node *n) {
    compiled_node *c = (compiled_node *)n;
    cnode_release_saved(n);
    free(c->saved);
    if (c->redir)
        for (int k = 0; k < c->e->n_node_out; k++)
            jg_node_release(c->redir[k].fn);
    free(c->redir);
    jg_entry_release(c->e);
}

static const char *cnode_name(const jg_node *n) {
    (void)n;
    return "CompiledFunctionBackward";
}

/* The edges eager's nodes would reach: those the reached outputs lead to
 * inside the call (an input used only on the way to an unreached output is
 * not part of this backward, so a custom function before it does not run). */
static void cnode_edges_reached(const jg_node *n, jg_tensor *const *gout, const bool *reached,
                                bool *edge_reached) {
    const jg_entry *e = ((const compiled_node *)n)->e;
    int from_small[64] = {0}, *from = from_small, n_from = 0;
    if (e->n_node_out > 64 && !(from = malloc(sizeof(int) * (size_t)e->n_node_out)))
        n_from = -1; /* out of memory: every edge, below */
    for (int k = 0; k < e->n_node_out && n_from >= 0; k++)
        if (gout[k] || reached[k])
            from[n_from++] = e->node_out_val[k];
    int rc = n_from < 0 ? -1 : jg_autodiff_edges_reached(e->fwd_ad, n_from, from, edge_reached);
    if (from != from_small)
        free(from);
    if (rc < 0) {
        jg_clear_error();
        for (int k = 0; k < n->n_next; k++)
            edge_reached[k] = true; /* out of memory: every edge, as before */
    }
}

/* Custom functions' callbacks (opaque, or a traced one's own backward) are
 * user code. */
static bool cnode_pure(const jg_node *n) {
    return !((const compiled_node *)n)->e->has_custom;
}

static const jg_node_vt cnode_vt = {cnode_apply, cnode_release_saved, cnode_destroy,  cnode_name,
                                    true,        cnode_edges_reached, cnode_redirect, cnode_pure};

const char *jg_node_eager_name(const jg_node *fn, int nr, int *eager_nr) {
    *eager_nr = nr;
    if (fn->vt == &cnode_vt) {
        /* output nr of a compiled call: eager's node is the op that made it */
        const jg_entry *e = ((const compiled_node *)fn)->e;
        const jg_graph *g = e->fwd_ad;
        const jg_value *v = g && nr < e->n_node_out ? &g->vals[e->node_out_val[nr]] : NULL;
        if (v && v->kind == JG_VAL_NODE && g->nodes[v->node].kind == JG_GN_OP &&
            jg_ops[g->nodes[v->node].op].bw_name) {
            *eager_nr = v->index;
            return jg_gnode_eager_name(&g->nodes[v->node]);
        }
    }
    return fn->vt->name(fn);
}

/* ------------------------------------------------------------------- run */

/* The backends' results are row-major; an output eager lays out in its
 * operands' dim order (jg_ew_layout) is copied into that layout, so the
 * caller's next ops (contiguous(), view(), the layout of further results,
 * and with them the order autograd sums gradients in) act as after eager. */
static int relayout_outputs(const jg_entry *e, jg_tensor *const *gt, int ng, jg_tensor **fo) {
    /* (out_relayout covers the program's own outputs, not the new values of
     * written tensors after them) */
    int n_user = e->n_prog_out - e->n_mut - e->n_lmut - e->n_gset_out;
    for (int j = 0; j < n_user; j++) {
        jg_tensor *t = fo[j];
        if (!e->out_relayout[j] || t->is_view || !jg_dense(t))
            continue;
        bool input = false;
        for (int k = 0; k < ng && !input; k++)
            input = gt[k] == t;
        if (input)
            continue;
        jg_tensor *r = jg_tensor_alloc(t->dtype, t->ndim, t->shape);
        if (!r)
            return -1;
        memcpy(r->stride, e->out_stride[j], sizeof(int64_t) * (size_t)t->ndim);
        jg_tensor *in1[1] = {t}, *out1[1] = {r};
        if (jg_ops[JG_OP_CLONE].kernel(NULL, in1, out1) < 0) {
            jg_release(r);
            return -1;
        }
        for (int i = j + 1; i < e->n_prog_out; i++) /* the same value again */
            if (fo[i] == t) {
                jg_release(fo[i]);
                fo[i] = jg_retain(r);
            }
        jg_release(t);
        fo[j] = r;
    }
    return 0;
}

/* Saves in `slots` the graph inputs (gt) that a create_graph rerun may
 * read.  A tensor saved here may come to hold this node: written in place
 * after the call with an operand the call made (as a program run in pieces
 * does between two pieces), its new history leads here, and the node
 * holding it would make a reference cycle.  So, as
 * eager's nodes keep nothing of a tensor they do not save: an input that
 * leads to no output of the node is not kept (cnode_apply_create_graph
 * unpacks no other), and one with history is kept as an alias with its
 * history at the call, without the tensor (as jg_saved_init keeps a view).
 * A leaf is kept itself (the rerun's edges and second derivatives reach
 * it), and so is the stale input (its error names its history now). */
static void save_inputs(const jg_entry *e, jg_tensor *const *gt, jg_saved *slots) {
    const jg_graph *f = e->fwd_ad;
    /* (NULL, out of memory: every input is kept, as before) */
    bool *need = f ? calloc((size_t)f->n_vals + 1, sizeof *need) : NULL;
    if (need) {
        for (int k = 0; k < e->n_node_out; k++)
            need[e->node_out_val[k]] = true;
        for (int i = f->n_nodes - 1; i >= 0; i--) {
            const jg_gnode *n = &f->nodes[i];
            bool live = false;
            for (int k = 0; k < n->n_out && !live; k++)
                live = n->out[k] >= 0 && need[n->out[k]];
            for (int s = 0; s < jg_gnode_n_slots(n) && live; s++)
                need[jg_gnode_slot_value(n, s)] = true;
        }
    }
    for (int k = 0; k < e->n_graph_inputs; k++) {
        jg_tensor *t = gt[k];
        bool stale = e->stale && e->stale_input == k;
        if (need && !need[f->inputs[k]] && !stale)
            continue;
        jg_saved_init(&slots[k], t);
        if (stale || !t || !t->grad_fn || t->view || t->sym)
            continue;
        jg_tensor *a = jg_alias_no_history(t);
        if (!a)
            jg_fatal("out of memory saving a tensor for backward");
        jg_node_retain(t->grad_fn);
        a->grad_fn = t->grad_fn;
        a->output_nr = t->output_nr;
        a->requires_grad = t->requires_grad;
        jg_release(slots[k].t);
        slots[k].t = a;
    }
    free(need);
}

int jg_entry_run(jg_entry *e, jg_tensor *const *inputs, jg_tensor **outputs) {
    int ng = e->n_graph_inputs, nf = e->fwd->n_outputs;
    jg_tensor *small_g[16], **gt = small_g, *small_f[32], **fo = small_f;
    if ((ng > 16 && !(gt = malloc((size_t)ng * sizeof *gt))) ||
        (nf > 32 && !(fo = malloc((size_t)nf * sizeof *fo)))) {
        if (gt != small_g)
            free(gt);
        return jg_errorf("out of memory running a compiled function");
    }
    for (int k = 0; k < e->n_distinct; k++)
        gt[k] = inputs[e->call_input_of[k]];
    for (int k = 0; k < e->n_lifted; k++)
        gt[e->n_distinct + k] = e->lifted[k];
    int rc = e->backend->run(e->fplan, gt, fo);
    bool ran = rc == 0;
    if (rc == 0)
        rc = jg_entry_unmerge_outputs(e, fo);
    if (rc == 0)
        rc = relayout_outputs(e, gt, ng, fo);
    if (rc == 0 && e->n_node_out && jg_grad_mode) {
        compiled_node *c = (compiled_node *)jg_node_alloc(sizeof(compiled_node), &cnode_vt,
                                                          e->n_edges, e->n_node_out);
        if (c && !(c->saved = calloc((size_t)(e->n_saved + e->n_graph_inputs), sizeof *c->saved))) {
            jg_node_release(&c->base);
            c = NULL;
            jg_errorf("out of memory running a compiled function");
        }
        if (!c) {
            rc = -1;
        } else {
            c->e = e;
            e->refcount++;
            for (int k = 0; k < e->n_edges; k++)
                jg_node_set_edge(&c->base, k, gt[e->edge_input[k]]);
            c->n_saved = e->n_saved;
            c->n_inputs = e->n_graph_inputs;
            /* A whole training step's returned loss: the step's backward
             * (without retain_graph) freed what any backward from an output
             * would go through, and cnode_apply refuses that before reading
             * anything saved.  So nothing is saved -- eager's freed nodes
             * hold nothing either -- and no saved view shares the memory of
             * the parameters the call writes: the write-back swaps them
             * (jg_tensor_take_memory) instead of copying.  (Not with custom
             * calls: their backward runs when reached without a gradient.) */
            c->unsaved = e->out_freed && !e->has_custom;
            for (int k = 0; k < e->n_node_out && c->unsaved; k++)
                c->unsaved = e->out_freed[e->node_out_prog[k]];
            for (int i = 0; i < e->n_saved && !c->unsaved; i++) {
                int src = e->saved_src[i];
                jg_saved_init(&c->saved[i], src < 0 ? gt[-1 - src] : fo[src]);
                c->saved[i].unchecked = !e->saved_check[i];
                for (int k = 0; k < e->n_node_out; k++)
                    if (e->node_out_val[k] == e->saved_val[i]) {
                        /* a saved output: keep an alias without history so
                         * the node does not own itself */
                        jg_saved_mark_output(&c->saved[i], k);
                        break;
                    }
            }
            /* the inputs, for a backward with JG_CREATE_GRAPH (it runs the
             * forward again) */
            if (!c->unsaved)
                save_inputs(e, gt, &c->saved[e->n_saved]);
            c->base.has_saved = e->n_saved > 0 && !c->unsaved;
            jg_tensor *outs_small[16], **outs = outs_small;
            if (e->n_node_out > 16 && !(outs = malloc(sizeof *outs * (size_t)e->n_node_out)))
                rc = jg_errorf("out of memory running a compiled function");
            for (int k = 0; k < e->n_node_out && rc == 0; k++)
                outs[k] = fo[e->node_out_prog[k]];
            if (rc == 0)
                jg_node_set_outputs(&c->base, e->n_node_out, outs);
            if (outs != outs_small)
                free(outs);
            jg_node_release(&c->base); /* the outputs hold it */
        }
    }
    /* outputs that view an input are tracked views of it, as in eager */
    for (int j = 0; rc == 0 && e->out_view_in && j < e->n_out_view; j++)
        if (e->out_view_in[j] >= 0)
            rc = e->out_view_n[j] ? jg_view_track_steps(gt[e->out_view_in[j]], fo[j],
                                                        e->out_view_steps[j], e->out_view_n[j])
                                  : jg_view_track_alias(gt[e->out_view_in[j]], fo[j]);
    if (rc == 0) {
        for (int j = 0; j < e->n_prog_out; j++)
            outputs[j] = jg_scope_track(fo[j]);
        for (int j = e->n_prog_out; j < nf; j++)
            jg_release(fo[j]);
    } else if (ran) {
        for (int j = 0; j < nf; j++)
            jg_release(fo[j]);
    }
    if (gt != small_g)
        free(gt);
    if (fo != small_f)
        free(fo);
    return rc < 0 ? -1 : e->n_prog_out;
}
