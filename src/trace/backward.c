/* backward() inside a program jg_compile traces: graph autodiff of the
 * graph recorded so far (the root its seed) is replayed into that graph,
 * and each leaf's gradient is accumulated as the eager engine's
 * AccumulateGrad would: the .grad it had (None: the gradient becomes it;
 * a tensor: added in place, a traced write of a captured tensor).  The
 * resulting .grad is what the program reads afterwards and what jg_compile
 * applies to the real leaves after each call. */
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

static int trace_backward(jg_tensor *root, jg_tensor *grad, unsigned flags) {
    bool *done = jg_trace_backward_done();
    jg_graph *g = jg_trace_graph();
    if (!done || !g || root->sym->graph != g->id)
        return 1; /* (the engine's graph break) */
    if (grad || (flags & JG_CREATE_GRAPH))
        return untraceable("only backward() of a scalar without create_graph is traced");
    if (!root->requires_grad || root->numel != 1 || !g->vals[root->sym->value].requires_grad)
        return 1; /* the eager run raises eager's error */
    if (*done)
        return untraceable("a second backward through the same graph (the first one freed it: "
                           "retain_graph=False)");
    jg_autodiff_result r = {0};
    int seed = root->sym->value;
    if (jg_autodiff(g, 1, &seed, 0, NULL, &r) < 0) {
        char why[400];
        snprintf(why, sizeof why, "%s", jg_last_error());
        return untraceable(why);
    }
    int rc = 0;
    /* every contribution's target must be a leaf the engine would write */
    for (int c = 0; c < r.n_contrib && rc == 0; c++) {
        jg_tensor *t = jg_trace_input_tensor(g->inputs[r.contrib_input[c]]);
        if (!t || t->grad_fn || !t->requires_grad)
            rc = untraceable("a gradient reaches a tensor that is no leaf (its history continues "
                             "outside the program)");
    }
    if (rc == 0 && jg_autodiff_sum_contribs(r.bwd, g, r.contrib_input, NULL) < 0)
        rc = -1;
    jg_scope_push();
    bool prev = jg_set_grad_enabled(false);
    jg_tensor **in = rc == 0 ? calloc((size_t)(r.n_in ? r.n_in : 1), sizeof *in) : NULL;
    jg_tensor **out = rc == 0 ? calloc((size_t)(r.n_contrib ? r.n_contrib : 1), sizeof *out) : NULL;
    if (rc == 0 && (!in || !out))
        rc = jg_errorf("out of memory tracing backward");
    for (int i = 0; i < r.n_in && rc == 0; i++) {
        /* the seed: ones, as the engine's; the values the VJPs read */
        in[i] = r.in_src[i] < 0 ? jg_full(root->dtype, root->ndim, root->shape, 1.0)
                                : jg_scope_track(jg_trace_tensor(r.in_src[i]));
        if (!in[i])
            rc = -1;
    }
    if (rc == 0)
        rc = jg_trace_replay(r.bwd, in, out);
    /* AccumulateGrad, leaf by leaf in the engine's order */
    for (int c = 0; c < r.n_contrib && rc == 0; c++) {
        if (!out[c])
            continue;
        jg_tensor *t = jg_trace_input_tensor(g->inputs[r.contrib_input[c]]);
        jg_tensor *cur = jg_grad(t);
        if (!cur)
            rc = jg_trace_grad_set(t, out[c]);
        else
            rc = jg_add_(cur, out[c]);
    }
    jg_set_grad_enabled(prev);
    jg_scope_pop();
    free(in);
    free(out);
    jg_autodiff_result_free(&r);
    if (rc == 0 && !(flags & JG_RETAIN_GRAPH))
        *done = true;
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
 * (grad_outputs or ones), replayed into that graph; each requested input's
 * contributions are summed inside it in the eager engine's order
 * (jg_autodiff_sum_contribs), so the symbolic results are bitwise eager's.
 * No .grad is written. */
static int trace_grad(int n_out, jg_tensor *const *outs, jg_tensor *const *gouts, int n_in,
                      jg_tensor *const *ins, unsigned flags, jg_tensor **results) {
    bool *done = jg_trace_backward_done();
    jg_graph *g = jg_trace_graph();
    if (!done || !g)
        return 1; /* (the engine's graph break) */
    /* create_graph: the replayed backward records history in the graph, so
     * the results can be differentiated again, in the program or through
     * its compiled node; the graph is retained, as eager's */
    bool create = flags & JG_CREATE_GRAPH;
    int *seeds = calloc((size_t)n_out, sizeof *seeds);
    int *in_idx = calloc((size_t)n_in, sizeof *in_idx);
    if (!seeds || !in_idx) {
        free(seeds);
        free(in_idx);
        return jg_errorf("out of memory tracing autograd.grad");
    }
    int rc = 0;
    /* eager's checks of the outputs (check_roots in the engine) */
    for (int r = 0; r < n_out && rc == 0; r++) {
        jg_tensor *t = outs[r], *go = gouts ? gouts[r] : NULL;
        if (!t || !t->sym || t->sym->graph != g->id) {
            rc = 1; /* a concrete output beside symbolic ones: the eager run */
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
        for (int q = 0; q < r && rc == 0; q++)
            if (seeds[q] == seeds[r])
                rc = grad_untraceable("the same output twice");
    }
    bool any_inter = false;
    for (int i = 0; i < n_in && rc == 0; i++) {
        in_idx[i] = input_index(g, ins[i]);
        any_inter = any_inter || in_idx[i] == -2;
    }
    if (rc == 0 && *done)
        rc = grad_untraceable("a second backward through the same graph (the first one freed it: "
                              "retain_graph=False)");
    /* Gradients w.r.t. intermediate values: graph autodiff derives them for
     * graph inputs only, so a copy of the graph reads each such value from
     * a new input instead (its uses replaced); the contributions to it are
     * those eager adds into that value's gradient, in the same order. */
    jg_graph *fg = g, *copy = NULL;
    int n_wrt = 0, *wrt_val = NULL, *wrt_ph = NULL;
    if (rc == 0 && any_inter) {
        bool *up = calloc((size_t)g->n_vals, sizeof *up);
        wrt_val = calloc((size_t)n_in, sizeof *wrt_val);
        wrt_ph = calloc((size_t)n_in, sizeof *wrt_ph);
        copy = up && wrt_val && wrt_ph ? jg_graph_clone(g) : NULL;
        if (!copy)
            rc = jg_errorf("out of memory tracing autograd.grad");
        /* up: strict ancestors of the requested intermediate values (their
         * gradients flow through those values, which the copy cuts) */
        for (int k = g->n_nodes - 1; k >= 0 && rc == 0; k--) {
            const jg_gnode *nd = &g->nodes[k];
            bool hit = false;
            for (int o = 0; o < nd->n_out && !hit; o++)
                for (int i = 0; i < n_in && !hit; i++)
                    hit = up[nd->out[o]] || (in_idx[i] == -2 && ins[i]->sym->value == nd->out[o]);
            for (int j = 0; hit && j < nd->n_in; j++)
                up[nd->in[j]] = true;
        }
        for (int i = 0; i < n_in && rc == 0; i++) {
            int v = in_idx[i] == -2  ? ins[i]->sym->value
                    : in_idx[i] >= 0 ? g->inputs[in_idx[i]]
                                     : -1;
            if (v >= 0 && up[v])
                rc = grad_untraceable("a gradient with respect to a value and to one it is "
                                      "computed from");
            for (int r2 = 0; r2 < n_out && rc == 0 && in_idx[i] == -2; r2++)
                if (seeds[r2] == v)
                    rc = grad_untraceable("a gradient of an output with respect to itself");
        }
        for (int i = 0; i < n_in && rc == 0; i++) {
            if (in_idx[i] != -2)
                continue;
            int v = ins[i]->sym->value, w = 0;
            while (w < n_wrt && wrt_val[w] != v)
                w++;
            if (w == n_wrt) {
                int ph = jg_graph_add_input(copy, &g->vals[v].meta, true, "wrt");
                if (ph < 0) {
                    rc = -1;
                    break;
                }
                jg_graph_replace_uses(copy, v, ph);
                wrt_val[w] = v, wrt_ph[w] = ph, n_wrt++;
            }
            in_idx[i] = copy->vals[wrt_ph[w]].index;
        }
        free(up);
        fg = copy;
    }
    jg_autodiff_result r = {0};
    if (rc == 0 && jg_autodiff(fg, n_out, seeds, 0, NULL, &r) < 0) {
        char why[400];
        snprintf(why, sizeof why, "%s", jg_last_error());
        rc = grad_untraceable(why);
    }
    if (rc != 0) {
        jg_autodiff_result_free(&r);
        if (copy)
            jg_graph_free(copy);
        free(wrt_val);
        free(wrt_ph);
        free(seeds);
        free(in_idx);
        return rc;
    }
    if (jg_autodiff_sum_contribs(r.bwd, fg, r.contrib_input, NULL) < 0)
        rc = -1;
    jg_scope_push();
    bool prev = jg_set_grad_enabled(create);
    jg_tensor **in = rc == 0 ? calloc((size_t)(r.n_in ? r.n_in : 1), sizeof *in) : NULL;
    jg_tensor **out = rc == 0 ? calloc((size_t)(r.n_contrib ? r.n_contrib : 1), sizeof *out) : NULL;
    if (rc == 0 && (!in || !out))
        rc = jg_errorf("out of memory tracing autograd.grad");
    for (int i = 0; i < r.n_in && rc == 0; i++) {
        if (r.in_src[i] >= 0) {
            int v = r.in_src[i]; /* (a copy's new input stands for its value) */
            for (int w = 0; w < n_wrt; w++)
                if (wrt_ph[w] == v)
                    v = wrt_val[w];
            in[i] = jg_scope_track(jg_trace_tensor(v));
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
    /* each input's sum is its group's first contribution (the others none) */
    for (int i = 0; i < n_in && rc == 0; i++) {
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
    free(seeds);
    free(in_idx);
    jg_autodiff_result_free(&r);
    if (copy)
        jg_graph_free(copy);
    free(wrt_val);
    free(wrt_ph);
    if (rc == 0 && !(flags & (JG_RETAIN_GRAPH | JG_CREATE_GRAPH)))
        *done = true;
    return rc;
}

void jg_trace_backward_init(void) {
    jg_hooks.trace_backward = trace_backward;
    jg_hooks.trace_grad = trace_grad;
}
