/* Running a cache entry, and the autograd node a compiled call's outputs
 * share: its apply runs the backward graph, its edges go to the call's
 * inputs (one per gradient contribution), it saves what the backward graph
 * reads, and the call's inputs for a backward that records history. */
#include "autodiff/autodiff.h"
#include "autograd/node.h"
#include "compile/compile.h"
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
    if (jg_pass_dce(g) < 0 || jg_graph_verify(g) < 0)
        return -1;
    return 0;
}

static void variant_free(const jg_entry *e, jg_bwd_variant *v) {
    e->backend->plan_free(v->plan);
    jg_graph_free(v->g);
    free(v->in_src);
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
    for (int i = 0; i < e->n_lifted; i++)
        jg_release(e->lifted[i]);
    free(e->lifted);
    free(e->lifted_key);
    for (int i = 0; i < e->n_pinned; i++)
        jg_release(e->pinned[i]);
    free(e->pinned);
    free(e->pinned_input);
    free(e->graph_input_of);
    free(e->call_input_of);
    free(e->saved_val);
    free(e->saved_src);
    free(e->saved_check);
    free(e->node_out_val);
    free(e->node_out_prog);
    free(e->edge_input);
    free(e->mut_input);
    free(e->mut_writes);
    free(e->out_input);
    free(e->key.in);
    free((void *)e->key.args);
    free(e->break_reason);
    free(e);
}

jg_bwd_variant *jg_entry_backward(jg_entry *e, unsigned mask) {
    for (int i = 0; i < e->n_bwd; i++)
        if (e->bwd[i].mask == mask)
            return &e->bwd[i];
    if (e->n_bwd == e->cap_bwd) {
        int cap = e->cap_bwd ? e->cap_bwd * 2 : 2;
        jg_bwd_variant *b = realloc(e->bwd, (size_t)cap * sizeof *b);
        if (!b)
            return jg_errorf_null("out of memory building a backward graph");
        e->bwd = b;
        e->cap_bwd = cap;
    }
    int seeds[JG_MAX_OUTPUTS], n_seeds = 0, seed_out[JG_MAX_OUTPUTS];
    int reach[JG_MAX_OUTPUTS], n_reach = 0;
    for (int k = 0; k < e->n_node_out; k++) {
        if (mask & (1u << k)) {
            seed_out[n_seeds] = k;
            seeds[n_seeds++] = e->node_out_val[k];
        } else if (mask & (1u << (JG_MAX_OUTPUTS + k))) {
            reach[n_reach++] = e->node_out_val[k];
        }
    }
    jg_autodiff_result r;
    if (jg_autodiff(e->fwd_ad, n_seeds, seeds, n_reach, reach, &r) < 0)
        return NULL;
    JG_ASSERT(r.n_contrib == e->n_edges);
    jg_bwd_variant v = {mask, r.bwd, NULL, r.n_in, r.in_src};
    r.bwd = NULL;
    r.in_src = NULL;
    jg_autodiff_result_free(&r);
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
            variant_free(e, &v);
            return jg_errorf_null("internal error: backward graph for output mask %#x reads "
                                  "forward value %d, which the forward does not save",
                                  mask, src);
        }
        v.in_src[k] = i;
    }
    if (jg_compile_passes(v.g, true) < 0 || !(v.plan = e->backend->plan_new(v.g))) {
        variant_free(e, &v);
        return NULL;
    }
    e->bwd[e->n_bwd] = v;
    return &e->bwd[e->n_bwd++];
}

/* ------------------------------------------------------------------ node */

/* After a create_graph replay: the nodes it created (seq >= first) that
 * lead from the first derivatives back to the per-use identity views are
 * pointed past the views, at the inputs themselves.  In a later backward
 * (the second derivative), each of those nodes then adds its contribution
 * into the input's gradient on its own, as eager's nodes do, instead of
 * summing per view first. */
typedef struct {
    jg_node **set;
    size_t cap;
} node_set;

static size_t node_hash(const jg_node *n, size_t cap) {
    uint64_t x = (uint64_t)(uintptr_t)n;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x & (cap - 1);
}

/* true if n was already there */
static bool node_set_add(node_set *s, jg_node *n) {
    size_t i = node_hash(n, s->cap);
    for (; s->set[i]; i = (i + 1) & (s->cap - 1))
        if (s->set[i] == n)
            return true;
    s->set[i] = n;
    return false;
}

static bool node_set_has(const node_set *s, const jg_node *n) {
    for (size_t i = node_hash(n, s->cap); s->set[i]; i = (i + 1) & (s->cap - 1))
        if (s->set[i] == n)
            return true;
    return false;
}

static int bypass_views(int n_views, jg_tensor *const *views, int n_roots, jg_tensor *const *roots,
                        uint64_t first, uint64_t fwd_first, uint64_t fwd_last, uint64_t call_seq) {
    size_t n_new = 0;
    uint64_t last = 0;
    for (int r = 0; r < n_roots; r++)
        if (roots[r] && roots[r]->grad_fn && roots[r]->grad_fn->seq > last)
            last = roots[r]->grad_fn->seq;
    if (last < first)
        return 0;
    n_new = (size_t)((last - first) / JG_NODE_SEQ_STRIDE + 1) + (size_t)n_views;
    size_t cap = 16;
    while (cap < n_new * 2)
        cap *= 2;
    node_set views_set = {calloc(cap, sizeof(jg_node *)), cap};
    node_set seen = {calloc(cap, sizeof(jg_node *)), cap};
    jg_node **stack = malloc(n_new * sizeof *stack);
    if (!views_set.set || !seen.set || !stack) {
        free(views_set.set);
        free(seen.set);
        free(stack);
        return jg_errorf("out of memory in backward");
    }
    for (int j = 0; j < n_views; j++)
        if (views[j] && views[j]->grad_fn)
            node_set_add(&views_set, views[j]->grad_fn);
    size_t sp = 0;
    for (int r = 0; r < n_roots; r++) {
        jg_node *n = roots[r] ? roots[r]->grad_fn : NULL;
        if (n && n->seq >= first && !node_set_has(&views_set, n) && !node_set_add(&seen, n))
            stack[sp++] = n;
    }
    while (sp) {
        jg_node *n = stack[--sp];
        for (int k = 0; k < n->n_next; k++) {
            jg_edge *ed = &n->next[k];
            jg_node *nx = ed->fn;
            if (!nx || nx->seq < first)
                continue;
            if (node_set_has(&views_set, nx)) {
                jg_edge to = nx->next[0];
                if (to.fn)
                    jg_node_retain(to.fn);
                if (to.leaf)
                    jg_retain(to.leaf);
                *ed = to;
                jg_node_release(nx);
            } else if (!node_set_add(&seen, nx)) {
                JG_ASSERT(sp < n_new);
                stack[sp++] = nx;
            }
        }
    }
    /* the forward's nodes, created now, take the places just before the
     * call's node, where eager's forward nodes of the call are: a later
     * backward runs them in eager's order among the other nodes */
    uint64_t room = (fwd_last - fwd_first) / JG_NODE_SEQ_STRIDE + 1;
    if (fwd_last >= fwd_first && room < JG_NODE_SEQ_STRIDE && call_seq > JG_NODE_SEQ_STRIDE)
        for (size_t i = 0; i < seen.cap; i++) {
            jg_node *n = seen.set[i];
            if (n && n->seq >= fwd_first && n->seq <= fwd_last)
                n->seq =
                    call_seq - JG_NODE_SEQ_STRIDE + 1 + (n->seq - fwd_first) / JG_NODE_SEQ_STRIDE;
        }
    free(views_set.set);
    free(seen.set);
    free(stack);
    return 0;
}

/* The stand-in for one use of an input in a create_graph rerun: an alias
 * of the input whose node passes the gradient through.  The rerun's engine
 * stops at it (the use's own contribution), and once the rerun is done it
 * redirects to the input itself: the eager nodes made later from the
 * rerun's saved tensors (a second derivative's, under create_graph again)
 * add into the input one by one, as eager's nodes, made from the input
 * itself, do. */
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

static const jg_node_vt use_vt = {use_apply, use_release, use_release, use_name,
                                  false,     NULL,        use_redirect};

static jg_tensor *use_new(jg_tensor *in) {
    jg_tensor *a = jg_alias_no_history(in);
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

/* After a create_graph backward: each output that received a gradient is
 * from now on the rerun forward's output, for every later backward (the
 * engine follows cnode_redirect).  Eager mode has one set of forward nodes
 * that the first derivatives' history and the outputs' own gradients both
 * pass through, summed per node; without this, an output's gradient in a
 * later backward (a loss that depends on the output and on the first
 * derivatives, or a later compiled call rerun for the same backward) went
 * through the compiled backward graph, and met the other contributions
 * only at the inputs: equal up to rounding, not bitwise. */
static int set_redirects(compiled_node *c, jg_tensor *const *gout, jg_tensor *const *fo, int nw,
                         jg_tensor *const *views) {
    jg_entry *e = c->e;
    if (!c->redir && !(c->redir = calloc((size_t)e->n_node_out, sizeof *c->redir)))
        return jg_errorf("out of memory in backward");
    for (int k = 0; k < e->n_node_out; k++) {
        jg_tensor *o = fo[e->node_out_prog[k]];
        if (!gout[k] || !o || !o->grad_fn || c->redir[k].fn)
            continue;
        bool is_view = false; /* (an output that is an input's use itself) */
        for (int j = 0; j < nw && !is_view; j++)
            is_view = o->grad_fn == views[j]->grad_fn;
        if (is_view)
            continue;
        c->redir[k].fn = o->grad_fn;
        c->redir[k].nr = o->output_nr;
        jg_node_retain(o->grad_fn);
    }
    for (int j = 0; j < nw; j++)
        ((use_node *)views[j]->grad_fn)->through = true;
    return 0;
}

static bool cnode_redirect(const jg_node *n, int nr, jg_edge *to) {
    const compiled_node *c = (const compiled_node *)n;
    if (!c->redir || !c->redir[nr].fn)
        return false;
    *to = (jg_edge){c->redir[nr].fn, c->redir[nr].nr, NULL};
    return true;
}

/* A backward that records history (JG_CREATE_GRAPH).  The compiled forward
 * kept no history, so the traced forward graph is run again through the
 * eager ops (custom calls through jg_apply) with grad mode on, from the
 * call's inputs, and the eager engine differentiates that with create_graph:
 * the gradients are eager's own, and so is their history.  Every use of an
 * input that requires grad (an operand slot: one per edge of this node, in
 * the edges' order) reads the input through an identity view of its own, and
 * the engine is asked for the views' gradients: that stops it at the call's
 * boundary (an input computed from another input must not pass its gradient
 * on here; its own edge does that), and each use's contribution leaves on
 * its own edge unsummed, as the compiled backward graph's do, so the engine
 * adds them into the input's gradient one by one, as eager does. */
static int cnode_apply_create_graph(compiled_node *c, jg_tensor *const *gout, jg_tensor **gin) {
    jg_entry *e = c->e;
    const jg_graph *f = e->fwd_ad;
    int ng = e->n_graph_inputs, ne = e->n_edges, nf = f->n_outputs, nu = 0;
    for (int i = 0; i < f->n_nodes; i++)
        nu += jg_gnode_n_slots(&f->nodes[i]);
    size_t words = (size_t)ng + (size_t)ne * 2 + JG_MAX_OUTPUTS + (size_t)nu + (size_t)nf;
    jg_tensor **in = calloc(words ? words : 1, sizeof *in);
    if (!in)
        return jg_errorf("out of memory in backward");
    /* res: the first derivatives (nw <= ne), then the rerun outputs given
     * to bypass_views */
    jg_tensor **view = in + ng, **res = view + ne, **uses = res + ne + JG_MAX_OUTPUTS,
              **fo = uses + nu;
    jg_scope_push();
    int rc = 0;
    /* only the nodes that lead to an output with a gradient run again (as
     * only they are part of eager's backward), and only the inputs they
     * read are unpacked: an input or captured tensor the rest reads may have
     * changed in place since the call, which eager's backward would not
     * notice either */
    bool *need = calloc((size_t)f->n_vals + (size_t)f->n_nodes + 1, sizeof *need);
    bool *live = need + f->n_vals;
    int *wrt_of = calloc((size_t)ne + 1, sizeof *wrt_of);
    jg_tensor **wrt = calloc((size_t)ne + 1, sizeof *wrt);
    /* A value without history that the forward saved (a comparison's
     * mask, say) is taken as saved rather than recomputed, as eager's
     * nodes saved it: recomputing it would read what it was computed from
     * (a captured tensor), which may have changed in place since the call
     * although eager's backward never reads it. */
    int *avail = calloc((size_t)f->n_vals + 1, sizeof *avail);
    jg_tensor **pre = calloc((size_t)f->n_vals + 1, sizeof *pre);
    if (!need || !wrt_of || !wrt || !avail || !pre)
        rc = jg_errorf("out of memory in backward");
    for (int i = 0; i < e->n_saved && rc == 0; i++) {
        const jg_value *sv = &f->vals[e->saved_val[i]];
        if (sv->kind != JG_VAL_INPUT && !sv->requires_grad)
            avail[e->saved_val[i]] = i + 1;
    }
    for (int k = 0; k < e->n_node_out && rc == 0; k++)
        if (gout[k])
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
    for (int k = 0; k < ng && rc == 0; k++)
        if (need[f->inputs[k]] &&
            !(in[k] = jg_saved_unpack(&c->saved[c->n_saved + k], &c->base, true)))
            rc = -1;
    /* the edges' layout (graph autodiff's): latest node first, its slots in
     * order, one per slot whose operand is a graph input that requires grad */
    int nw = 0;
    for (int i = f->n_nodes - 1, j = 0, u = nu; i >= 0 && rc == 0; i--) {
        const jg_gnode *n = &f->nodes[i];
        int ns = jg_gnode_n_slots(n);
        u -= ns;
        for (int s = 0; s < ns && rc == 0; s++) {
            const jg_value *ov = &f->vals[jg_gnode_slot_value(n, s)];
            if (ov->kind != JG_VAL_INPUT || !ov->requires_grad)
                continue;
            JG_ASSERT(j < ne && e->edge_input[j] == ov->index);
            wrt_of[j] = -1;
            if (live[i]) {
                if (!(view[j] = use_new(in[ov->index])))
                    rc = -1;
                uses[u + s] = wrt[nw] = view[j];
                wrt_of[j] = nw++;
            }
            j++;
        }
    }
    uint64_t fwd_first = nw && wrt[nw - 1]->grad_fn ? wrt[nw - 1]->grad_fn->seq + 1 : 0,
             fwd_last = 0;
    if (rc == 0)
        rc = jg_trace_replay_uses(f, in, uses, live, pre, fo);
    jg_tensor *roots[JG_MAX_OUTPUTS], *grads[JG_MAX_OUTPUTS];
    int nr = 0;
    for (int k = 0; k < e->n_node_out && rc == 0; k++) {
        jg_tensor *o = fo[e->node_out_prog[k]];
        if (gout[k] && o && o->requires_grad) {
            roots[nr] = o;
            grads[nr++] = gout[k];
            if (o->grad_fn && o->grad_fn->seq > fwd_last)
                fwd_last = o->grad_fn->seq;
        }
    }
    if (rc == 0 && nr && nw)
        rc = jg_autograd_grad(nr, roots, grads, nw, wrt,
                              JG_CREATE_GRAPH | JG_RETAIN_GRAPH | JG_ALLOW_UNUSED, res);
    bool ok = rc == 0 && nr && nw;
    /* the nodes reached from the first derivatives and from the outputs
     * (the whole rerun forward the outputs lead to) point past the views */
    for (int k = 0; k < nr; k++)
        res[nw + k] = roots[k];
    if (ok && wrt[0]->grad_fn)
        rc = bypass_views(nw, wrt, nw + nr, res, wrt[0]->grad_fn->seq, fwd_first, fwd_last,
                          c->base.seq);
    ok = rc == 0 && ok;
    if (ok)
        rc = set_redirects(c, gout, fo, nw, wrt);
    ok = rc == 0 && ok;
    for (int j = 0; j < nw; j++)
        if (ok && res[j])
            jg_keep(res[j]); /* out of the scope popped below */
    jg_scope_pop();
    for (int j = 0; j < ne; j++)
        gin[j] = ok && wrt_of[j] >= 0 && res[wrt_of[j]] ? jg_scope_track(res[wrt_of[j]]) : NULL;
    free(need);
    free(avail);
    free(pre);
    free(wrt_of);
    free(wrt);
    free(in);
    return rc;
}

static int cnode_apply(jg_node *n, jg_tensor *const *gout, const bool *reached, jg_tensor **gin,
                       bool create_graph) {
    compiled_node *c = (compiled_node *)n;
    jg_entry *e = c->e;
    /* outputs reached without a gradient matter only to custom calls, whose
     * backward runs anyway (as eager runs it) */
    if (create_graph)
        return cnode_apply_create_graph(c, gout, gin);
    unsigned mask = 0;
    for (int k = 0; k < e->n_node_out; k++)
        if (gout[k])
            mask |= 1u << k;
        else if (reached[k] && e->has_custom)
            mask |= 1u << (JG_MAX_OUTPUTS + k);
    if (!mask)
        return 1; /* nothing arrived and nothing runs regardless: not run */
    jg_bwd_variant *v = jg_entry_backward(e, mask);
    if (!v)
        return -1;
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
        if (src < 0)
            bin[k] = gout[-1 - src];
        else if (!(bin[k] = jg_saved_unpack(&c->saved[src], n, false)))
            rc = -1;
    }
    if (rc == 0)
        rc = e->backend->run(v->plan, bin, bout);
    if (rc == 0)
        for (int k = 0; k < n_out; k++)
            gin[k] = jg_scope_track(bout[k]); /* borrowed from the engine's scope */
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
    int from[JG_MAX_OUTPUTS], n_from = 0;
    for (int k = 0; k < e->n_node_out; k++)
        if (gout[k] || reached[k])
            from[n_from++] = e->node_out_val[k];
    if (jg_autodiff_edges_reached(e->fwd_ad, n_from, from, edge_reached) < 0) {
        jg_clear_error();
        for (int k = 0; k < n->n_next; k++)
            edge_reached[k] = true; /* out of memory: every edge, as before */
    }
}

static const jg_node_vt cnode_vt = {cnode_apply, cnode_release_saved, cnode_destroy, cnode_name,
                                    true,        cnode_edges_reached, cnode_redirect};

/* ------------------------------------------------------------------- run */

/* The backends' results are row-major; an output eager lays out in its
 * operands' dim order (jg_ew_layout) is copied into that layout, so the
 * caller's next ops (contiguous(), view(), the layout of further results,
 * and with them the order autograd sums gradients in) act as after eager. */
static int relayout_outputs(const jg_entry *e, jg_tensor *const *gt, int ng, jg_tensor **fo) {
    for (int j = 0; j < e->n_prog_out; j++) {
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
            for (int i = 0; i < e->n_saved; i++) {
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
            for (int k = 0; k < e->n_graph_inputs; k++)
                jg_saved_init(&c->saved[e->n_saved + k], gt[k]);
            c->base.has_saved = e->n_saved > 0;
            jg_tensor *outs[JG_MAX_OUTPUTS];
            for (int k = 0; k < e->n_node_out; k++)
                outs[k] = fo[e->node_out_prog[k]];
            jg_node_set_outputs(&c->base, e->n_node_out, outs);
            jg_node_release(&c->base); /* the outputs hold it */
        }
    }
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
