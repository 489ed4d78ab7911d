/* backward() inside a program jg_compile traces: graph autodiff of the
 * graph recorded so far (the root its seed) is replayed into that graph,
 * and each leaf's gradient is accumulated as the eager engine's
 * AccumulateGrad would: the .grad it had (None: the gradient becomes it;
 * a tensor: added in place, a traced write of a captured tensor; with
 * create_graph out of place, with history).  The resulting .grad is what
 * the program reads afterwards and what jg_compile applies to the real
 * leaves after each call.  retain_graph is per backward, as eager's: one
 * without it marks the nodes it went through freed, and only a later
 * backward through one of those is refused. */
#include "autodiff/autodiff.h"
#include "trace/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A graph break (the eager run does the backward), with its reason as the
 * error of this call. */
static int untraceable_as(const char *call, const char *why) {
    jg_trace_note_break("%s inside the program cannot be traced: %s", call, why);
    return jg_errorf("%s inside the program cannot be traced: %s", call, why);
}

static int untraceable(const char *why) {
    return untraceable_as("backward()", why);
}

static int grad_untraceable(const char *why) {
    return untraceable_as("autograd.grad()", why);
}

/* A later backward through a node an earlier traced backward freed
 * (retain_graph=False): eager fails there, so the eager run decides. */
static int check_freed(const jg_graph *g, const jg_autodiff_result *r, const char *call) {
    for (int i = 0; i < g->n_nodes; i++)
        if (r->node_ran[i] && jg_trace_node_freed(i))
            return untraceable_as(call, "a second backward through the same graph (the first one "
                                        "freed it: retain_graph=False)");
    return 0;
}

/* A value the backward reads as eager's saved tensor that the program
 * overwrote in place since: eager's backward fails there, with the
 * tensor's versions, so the eager run decides (the compiled piece before
 * it keeps the check, compile/mutation.c). */
static int check_stale(const jg_graph *g, const jg_autodiff_result *r, const char *call) {
    const jg_trace_overwrite *ow, *w;
    bool direct;
    int n_ow = jg_trace_overwrites(&ow);
    if (r->checked_by &&
        jg_trace_stale_saved(g, ow, n_ow, r->n_in, r->in_src, r->checked_by, &w, &direct) >= 0)
        return untraceable_as(call, "a tensor it reads as saved for backward was modified by an "
                                    "inplace operation since");
    return 0;
}

static int trace_backward(jg_tensor *root, jg_tensor *grad, unsigned flags) {
    jg_graph *g = jg_trace_graph();
    if (!jg_trace_in_program() || !g || root->sym->graph != g->id)
        return 1; /* (the engine's graph break) */
    /* create_graph: the backward is replayed with grad mode on, so the
     * gradients (and the .grad they become) have history in the program */
    bool create = flags & JG_CREATE_GRAPH;
    if (!root->requires_grad || !g->vals[root->sym->value].requires_grad)
        return 1; /* the eager run raises eager's error */
    if (grad ? grad->ndim != root->ndim ||
                   memcmp(grad->shape, root->shape, sizeof(int64_t) * (size_t)root->ndim) ||
                   (grad->sym && grad->sym->graph != g->id)
             : root->numel != 1)
        return 1; /* (eager's error, or a gradient of another trace: a break) */
    jg_autodiff_result r = {0};
    int seed = root->sym->value, n_nodes = g->n_nodes;
    if (jg_autodiff_capture(g, 1, &seed, 0, NULL, 0, NULL, &r) < 0) {
        char why[400];
        snprintf(why, sizeof why, "%s", jg_last_error());
        jg_autodiff_result_free(&r);
        return untraceable(why);
    }
    int rc = check_freed(g, &r, "backward()");
    if (rc == 0)
        rc = check_stale(g, &r, "backward()");
    /* every contribution's target must be a leaf the engine would write
     * (only those a gradient reaches: the layout names every input) */
    for (int c = 0; c < r.n_contrib && rc == 0; c++) {
        if (r.bwd->outputs[c] < 0)
            continue;
        jg_tensor *t = jg_trace_input_tensor(g->inputs[r.contrib_input[c]]);
        if (!t || t->grad_fn || !t->requires_grad)
            rc = untraceable("a gradient reaches a tensor that is no leaf (its history continues "
                             "outside the program)");
        else if (t->has_grad_hooks)
            rc = untraceable("a gradient reaches a leaf with gradient hooks (they run eagerly)");
    }
    if (rc == 0 && jg_autodiff_sum_contribs(r.bwd, g, r.contrib_input, NULL) < 0)
        rc = -1;
    jg_scope_push();
    bool prev = jg_set_grad_enabled(create);
    jg_tensor **in = rc == 0 ? calloc((size_t)(r.n_in ? r.n_in : 1), sizeof *in) : NULL;
    jg_tensor **out = rc == 0 ? calloc((size_t)(r.n_contrib ? r.n_contrib : 1), sizeof *out) : NULL;
    if (rc == 0 && (!in || !out))
        rc = jg_errorf("out of memory tracing backward");
    for (int i = 0; i < r.n_in && rc == 0; i++) {
        /* the seed as the engine's: the gradient in the root's dtype, or
         * ones; then the values the VJPs read */
        in[i] = r.in_src[i] >= 0             ? jg_scope_track(jg_trace_tensor(r.in_src[i]))
                : !grad                      ? jg_full(root->dtype, root->ndim, root->shape, 1.0)
                : grad->dtype == root->dtype ? grad
                                             : jg_to_dtype(grad, root->dtype);
        if (!in[i])
            rc = -1;
    }
    if (rc == 0)
        rc = jg_trace_replay(r.bwd, in, out);
    /* AccumulateGrad, leaf by leaf, as the engine's commit_leaf: without
     * create_graph the sum becomes .grad or is added into it in place; with
     * it .grad becomes a clone of the sum or .grad + sum (a new tensor),
     * both recorded */
    for (int c = 0; c < r.n_contrib && rc == 0; c++) {
        if (!out[c])
            continue;
        jg_tensor *t = jg_trace_input_tensor(g->inputs[r.contrib_input[c]]);
        jg_tensor *cur = jg_grad(t);
        if (!create) {
            rc = cur ? jg_add_(cur, out[c]) : jg_trace_grad_set(t, out[c]);
        } else {
            jg_tensor *v = cur ? jg_add(cur, out[c]) : jg_clone(out[c]);
            rc = v ? jg_trace_grad_set(t, v) : -1;
        }
    }
    jg_set_grad_enabled(prev);
    jg_scope_pop();
    free(in);
    free(out);
    if (rc == 0 && !(flags & (JG_RETAIN_GRAPH | JG_CREATE_GRAPH)))
        rc = jg_trace_nodes_free(n_nodes, r.node_reached);
    jg_autodiff_result_free(&r);
    return rc;
}

/* The graph input that tensor t is in graph g (its index in g->inputs), -1
 * when it is none: a captured tensor the program never used (no gradient
 * reaches it), -2 when t is an intermediate value of the program. */
static int input_index(const jg_graph *g, const jg_tensor *t) {
    if (t->sym && t->sym->graph == g->id) {
        for (int k = 0; k < g->n_inputs; k++)
            if (g->inputs[k] == t->sym->value)
                return k;
        return -2;
    }
    for (int k = 0; k < g->n_inputs; k++)
        if (jg_trace_input_tensor(g->inputs[k]) == t)
            return k;
    return -1;
}

/* autograd.grad() inside a program jg_compile traces:
 * graph autodiff of the graph recorded so far, the outputs its seeds
 * (grad_outputs or ones; an output named twice is seeded twice, its
 * gradients added in order as the engine adds them), replayed into that
 * graph; each requested input's contributions are summed inside it in the
 * eager engine's order (jg_autodiff_sum_contribs), an intermediate value's
 * gradient is the sum graph autodiff holds for it when it reaches the
 * value's node (jg_autodiff_capture: the engine's input buffer of that
 * node), so the symbolic results are bitwise eager's.  No .grad is
 * written. */
static int trace_grad(int n_out, jg_tensor *const *outs, jg_tensor *const *gouts, int n_in,
                      jg_tensor *const *ins, unsigned flags, jg_tensor **results) {
    jg_graph *g = jg_trace_graph();
    if (!jg_trace_in_program() || !g)
        return 1; /* (the engine's graph break) */
    /* create_graph: the replayed backward records history in the graph, so
     * the results can be differentiated again, in the program or through
     * its compiled node; the graph is retained, as eager's */
    bool create = flags & JG_CREATE_GRAPH;
    int *seeds = calloc((size_t)n_out, sizeof *seeds);
    int *in_idx = calloc((size_t)n_in, sizeof *in_idx);
    int *cap = calloc((size_t)n_in, sizeof *cap), n_cap = 0;
    if (!seeds || !in_idx || !cap) {
        free(seeds);
        free(in_idx);
        free(cap);
        return jg_errorf("out of memory tracing autograd.grad");
    }
    int rc = 0;
    /* eager's checks of the outputs (check_roots in the engine) */
    for (int r = 0; r < n_out && rc == 0; r++) {
        jg_tensor *t = outs[r], *go = gouts ? gouts[r] : NULL;
        if (!t || !t->sym || t->sym->graph != g->id || g->vals[t->sym->value].kind != JG_VAL_NODE) {
            /* a concrete output beside symbolic ones, or one that is not a
             * value the program computed: the engine's graph break */
            rc = 1;
            break;
        }
        if (!t->requires_grad || !g->vals[t->sym->value].requires_grad) {
            rc = jg_errorf("element %d of tensors does not require grad and does not have a "
                           "grad_fn",
                           r);
            break;
        }
        if (!go && t->numel != 1) {
            rc = jg_errorf("grad can be implicitly created only for scalar outputs");
            break;
        }
        if (go && (go->ndim != t->ndim ||
                   memcmp(go->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim))) {
            char gs[160], ts[160];
            jg_format_shape(gs, sizeof gs, go->ndim, go->shape);
            jg_format_shape(ts, sizeof ts, t->ndim, t->shape);
            rc = jg_errorf("Mismatch in shape: grad_output[%d] has a shape of %s and output[%d] "
                           "has a shape of %s.",
                           r, gs, r, ts);
            break;
        }
        seeds[r] = t->sym->value;
    }
    /* an intermediate input (also an output) is captured, once per value */
    for (int i = 0; i < n_in && rc == 0; i++) {
        if ((in_idx[i] = input_index(g, ins[i])) != -2)
            continue;
        int v = ins[i]->sym->value, k = 0;
        while (k < n_cap && cap[k] != v)
            k++;
        if (k == n_cap)
            cap[n_cap++] = v;
        in_idx[i] = -3 - k;
    }
    jg_autodiff_result r = {0};
    int n_nodes = g->n_nodes;
    if (rc == 0 && jg_autodiff_capture(g, n_out, seeds, 0, NULL, n_cap, cap, &r) < 0) {
        char why[400];
        snprintf(why, sizeof why, "%s", jg_last_error());
        rc = grad_untraceable(why);
    }
    if (rc == 0)
        rc = check_freed(g, &r, "autograd.grad()");
    if (rc == 0)
        rc = check_stale(g, &r, "autograd.grad()");
    free(seeds);
    free(cap);
    if (rc != 0) {
        jg_autodiff_result_free(&r);
        free(in_idx);
        return rc;
    }
    if (jg_autodiff_sum_contribs_n(r.bwd, r.n_contrib, g, r.contrib_input, NULL) < 0)
        rc = -1;
    jg_scope_push();
    bool prev = jg_set_grad_enabled(create);
    int n_bout = r.n_contrib + r.n_capture;
    jg_tensor **in = rc == 0 ? calloc((size_t)(r.n_in ? r.n_in : 1), sizeof *in) : NULL;
    jg_tensor **out = rc == 0 ? calloc((size_t)(n_bout ? n_bout : 1), sizeof *out) : NULL;
    if (rc == 0 && (!in || !out))
        rc = jg_errorf("out of memory tracing autograd.grad");
    for (int i = 0; i < r.n_in && rc == 0; i++) {
        if (r.in_src[i] >= 0) {
            in[i] = jg_scope_track(jg_trace_tensor(r.in_src[i]));
        } else {
            /* seed k: its grad_output in the output's dtype, or ones, as the engine's */
            int k = -1 - r.in_src[i];
            jg_tensor *t = outs[k], *go = gouts ? gouts[k] : NULL;
            in[i] = !go                     ? jg_full(t->dtype, t->ndim, t->shape, 1.0)
                    : go->dtype == t->dtype ? go
                                            : jg_to_dtype(go, t->dtype);
        }
        if (!in[i])
            rc = -1;
    }
    if (rc == 0)
        rc = jg_trace_replay(r.bwd, in, out);
    /* a leaf's sum is its group's first contribution (the others none); an
     * intermediate value's gradient is its capture */
    for (int i = 0; i < n_in && rc == 0; i++) {
        if (in_idx[i] <= -3 && out[r.n_contrib - 3 - in_idx[i]])
            results[i] = jg_retain(out[r.n_contrib - 3 - in_idx[i]]);
        for (int c = 0; c < r.n_contrib && in_idx[i] >= 0; c++)
            if (r.contrib_input[c] == in_idx[i] && out[c]) {
                results[i] = jg_retain(out[c]);
                break;
            }
        if (!results[i] && !(flags & JG_ALLOW_UNUSED))
            rc = jg_errorf("One of the differentiated Tensors appears to not have been used in "
                           "the graph. Set allow_unused=True if this is the desired behavior.");
    }
    jg_set_grad_enabled(prev);
    jg_scope_pop();
    for (int i = 0; i < n_in; i++) {
        if (rc == 0) {
            jg_scope_track(results[i]);
        } else {
            jg_release(results[i]);
            results[i] = NULL;
        }
    }
    free(in);
    free(out);
    free(in_idx);
    if (rc == 0 && !(flags & (JG_RETAIN_GRAPH | JG_CREATE_GRAPH)))
        rc = jg_trace_nodes_free(n_nodes, r.node_reached);
    jg_autodiff_result_free(&r);
    return rc;
}

void jg_trace_backward_init(void) {
    jg_hooks.trace_backward = trace_backward;
    jg_hooks.trace_grad = trace_grad;
}
