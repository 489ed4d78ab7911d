/* The public autograd calls: requires_grad, .grad, grad mode, backward. */
#include "autograd/engine.h"
#include "autograd/node.h"
#include "ops/viewtrack.h"

#include <string.h>

/* A view whose base was written since its history was made remakes it
 * before anyone reads it (ops/viewtrack.h); a getter has no way to report
 * a failure, which leaves the old history and the error message. */
static void sync(const jg_tensor *t) {
    (void)jg_view_sync((jg_tensor *)t);
}

bool jg_set_grad_enabled(bool on) {
    bool prev = jg_grad_mode;
    jg_grad_mode = on;
    return prev;
}

bool jg_is_grad_enabled(void) {
    return jg_grad_mode;
}

void jg_set_requires_grad(jg_tensor *t, bool on) {
    if (!t) {
        jg_errorf("jg_set_requires_grad: tensor is NULL");
        return;
    }
    if (t->grad_fn) {
        if (!on)
            jg_errorf("you can only change requires_grad flags of leaf variables. If you want to "
                      "use a computed variable in a subgraph that doesn't require differentiation "
                      "use var_no_grad = var.detach().");
        return; /* a non-leaf already requires grad */
    }
    if (on && !jg_dtype_is_float(t->dtype)) {
        jg_errorf("only Tensors of floating point dtype can require gradients");
        return;
    }
    t->requires_grad = on;
    t->no_grad_view = false; /* its own flag now: gradients accumulate in it */
}

int jg_detach_(jg_tensor *t) {
    if (!t)
        return jg_errorf("jg_detach_: tensor is NULL");
    if (t->view)
        return jg_errorf(
            "Can't detach views in-place. Use detach() instead. If you are using "
            "DistributedDataParallel (DDP) for training, and gradient_as_bucket_view is set as "
            "True, gradients are views of DDP buckets, and hence detach_() cannot be called on "
            "these gradients. To fix this error, please refer to the Optimizer.zero_grad() "
            "function in torch/optim/optimizer.py as the solution.");
    /* a traced program replays graph ops only: a change of a tensor's
     * history made at trace time would not happen on later calls */
    static const char why[] =
        "detach_() inside a compiled program (a compiled call would not detach "
        "again)";
    if (jg_graph_break(why) < 0)
        return -1;
    if (t->sym) /* (traced outside a program: nothing to fall back to) */
        return jg_errorf("%s", why);
    jg_node_release(t->grad_fn);
    t->grad_fn = NULL;
    t->output_nr = 0;
    t->requires_grad = false;
    t->no_grad_view = false;
    return 0;
}

bool jg_requires_grad(const jg_tensor *t) {
    sync(t);
    return t && t->requires_grad;
}

bool jg_is_leaf(const jg_tensor *t) {
    sync(t);
    return t && !t->grad_fn;
}

const char *jg_grad_fn_name(const jg_tensor *t) {
    sync(t);
    return t && t->grad_fn ? t->grad_fn->vt->name(t->grad_fn) : NULL;
}

jg_tensor *jg_grad(const jg_tensor *t) {
    jg_tensor *traced;
    if (t && jg_trace_captured(t) && jg_hooks.on_grad_read &&
        jg_hooks.on_grad_read((jg_tensor *)t, t->grad, &traced))
        return traced;
    return t ? t->grad : NULL;
}

void jg_clear_grad(jg_tensor *t) {
    if (!t)
        return;
    jg_release(t->grad);
    t->grad = NULL;
}

int jg_set_grad(jg_tensor *t, jg_tensor *g) {
    if (!t)
        return jg_errorf("jg_set_grad: tensor is NULL");
    if (jg_trace_captured(t) && !g && jg_hooks.on_grad_clear && jg_hooks.on_grad_clear(t) == 0)
        return 0; /* recorded: applied after each call */
    if (jg_trace_captured(t)) {
        /* it would happen once, at trace time, and never at run time */
        static const char why[] = "assigning the .grad of a tensor captured from outside the "
                                  "program cannot be traced yet";
        if (jg_hooks.on_untraceable)
            jg_hooks.on_untraceable(why);
        return jg_errorf("%s", why);
    }
    if (g) {
        if (g->sym || t->sym)
            return jg_errorf("jg_set_grad: not supported on traced tensors");
        if (g->dtype != t->dtype)
            return jg_errorf("assigned grad has data of a different type");
        if (g->ndim != t->ndim || memcmp(g->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim))
            return jg_errorf("assigned grad has data of a different size");
    }
    jg_retain(g);
    jg_release(t->grad);
    t->grad = g;
    return 0;
}

int jg_backward(jg_tensor *root, jg_tensor *grad, unsigned flags) {
    if (flags & ~(JG_RETAIN_GRAPH | JG_CREATE_GRAPH))
        return jg_errorf("jg_backward: unknown flags 0x%x", flags);
    if (jg_view_sync_use(root) < 0)
        return -1;
    return jg_engine_run(1, &root, &grad, flags, 0, NULL, NULL);
}

int jg_autograd_grad(int n_outputs, jg_tensor *const *outputs, jg_tensor *const *grad_outputs,
                     int n_inputs, jg_tensor *const *inputs, unsigned flags, jg_tensor **results) {
    if (n_outputs <= 0 || !outputs || n_inputs <= 0 || !inputs || !results)
        return jg_errorf("jg_autograd_grad: needs at least one output and one input");
    for (int i = 0; i < n_outputs; i++)
        if (jg_view_sync_use(outputs[i]) < 0)
            return -1;
    for (int i = 0; i < n_inputs; i++) {
        results[i] = NULL;
        if (jg_view_sync_use(inputs[i]) < 0)
            return -1;
        if (!inputs[i])
            return jg_errorf("jg_autograd_grad: input %d is NULL", i);
        if (!inputs[i]->requires_grad)
            return jg_errorf("One of the differentiated Tensors does not require grad");
    }
    bool symbolic = false;
    for (int i = 0; i < n_outputs; i++)
        symbolic = symbolic || (outputs[i] && outputs[i]->sym);
    if (symbolic && jg_hooks.trace_grad) { /* traced into the program's graph (trace/backward.c) */
        int rc =
            jg_hooks.trace_grad(n_outputs, outputs, grad_outputs, n_inputs, inputs, flags, results);
        if (rc <= 0)
            return rc;
    }
    if (jg_engine_run(n_outputs, outputs, grad_outputs, flags & ~JG_ALLOW_UNUSED, n_inputs, inputs,
                      results) < 0)
        return -1;
    for (int i = 0; i < n_inputs; i++) {
        if (!results[i] && !(flags & JG_ALLOW_UNUSED)) {
            for (int j = 0; j < n_inputs; j++) {
                jg_release(results[j]);
                results[j] = NULL;
            }
            return jg_errorf("One of the differentiated Tensors appears to not have been used in "
                             "the graph. Set allow_unused=True if this is the desired behavior.");
        }
    }
    for (int i = 0; i < n_inputs; i++) /* only once none can fail: no double release */
        jg_scope_track(results[i]);
    return 0;
}
