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

/* A graph break (the eager run does the backward), with its reason as the
 * error of this call. */
static int untraceable(const char *why) {
    jg_trace_note_break("backward() inside the program cannot be traced: %s", why);
    return jg_errorf("backward() inside the program cannot be traced: %s", why);
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

void jg_trace_backward_init(void) {
    jg_hooks.trace_backward = trace_backward;
}
