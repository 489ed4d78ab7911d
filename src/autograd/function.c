/* Custom differentiable functions, with PyTorch's autograd.Function
 * semantics: one edge per input SLOT (the same tensor in two slots gets two
 * edges, and the engine sums both slots' gradients into it), NULL gradients
 * contribute nothing, returned gradients are validated like PyTorch's engine
 * validates them. */
#include "ops/viewtrack.h"
#include "autograd/function.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

jg_trace_apply_fn jg_trace_apply_hook;

typedef struct {
    jg_node base;
    jg_ctx *ctx;
    char name[96];
} fn_node;

/* ------------------------------------------------------------------ ctx */

jg_ctx *jg_ctx_new_meta(const jg_function *fn, int n_inputs, const jg_meta *in_meta,
                        const bool *needs, const void *args, size_t args_size) {
    jg_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return jg_errorf_null("out of memory in jg_apply");
    ctx->fn = fn;
    ctx->refcount = 1;
    ctx->n_inputs = ctx->n_own = n_inputs;
    ctx->materialize_grads = true;
    ctx->needs_input_grad = calloc((size_t)(n_inputs ? n_inputs : 1), sizeof(bool));
    ctx->in_meta = calloc((size_t)(n_inputs ? n_inputs : 1), sizeof(jg_meta));
    ctx->args = malloc(args_size ? args_size : 1);
    if (!ctx->needs_input_grad || !ctx->in_meta || !ctx->args) {
        jg_ctx_free(ctx);
        return jg_errorf_null("out of memory in jg_apply");
    }
    if (args_size)
        memcpy(ctx->args, args, args_size);
    ctx->args_size = args_size;
    if (n_inputs) {
        memcpy(ctx->needs_input_grad, needs, sizeof(bool) * (size_t)n_inputs);
        memcpy(ctx->in_meta, in_meta, sizeof(jg_meta) * (size_t)n_inputs);
    }
    return ctx;
}

jg_ctx *jg_ctx_new(const jg_function *fn, int n_inputs, jg_tensor *const *inputs, const void *args,
                   size_t args_size) {
    jg_meta metas[64] = {0},
            *m = n_inputs <= 64 ? metas : malloc(sizeof(jg_meta) * (size_t)n_inputs);
    bool needs_s[64] = {0},
         *needs = n_inputs <= 64 ? needs_s : malloc(sizeof(bool) * (size_t)n_inputs);
    jg_ctx *ctx = NULL;
    if (m && needs) {
        for (int i = 0; i < n_inputs; i++) {
            needs[i] = jg_grad_mode && inputs[i]->requires_grad;
            jg_meta_of(inputs[i], &m[i]);
        }
        ctx = jg_ctx_new_meta(fn, n_inputs, m, needs, args, args_size);
    } else {
        jg_errorf("out of memory in jg_apply");
    }
    if (m != metas)
        free(m);
    if (needs != needs_s)
        free(needs);
    return ctx;
}

jg_ctx *jg_ctx_retain(jg_ctx *ctx) {
    if (ctx)
        ctx->refcount++;
    return ctx;
}

void jg_ctx_free(jg_ctx *ctx) {
    if (!ctx || --ctx->refcount > 0)
        return;
    for (int i = 0; i < ctx->n_saved; i++)
        jg_saved_free(&ctx->saved[i]);
    free(ctx->saved);
    for (int k = 0; !ctx->non_diff_final && k < ctx->n_non_diff; k++)
        jg_release(ctx->non_diff[k]);
    if (ctx->free_state)
        ctx->free_state(ctx->state);
    free(ctx->needs_input_grad);
    free(ctx->in_meta);
    free(ctx->args);
    free(ctx);
}

int jg_ctx_save_for_backward(jg_ctx *ctx, int n, jg_tensor *const *tensors) {
    if (!ctx)
        return jg_errorf("jg_ctx_save_for_backward: ctx is NULL");
    if (ctx->in_backward || ctx->node)
        return jg_errorf("jg_ctx_save_for_backward can only be called from forward");
    if (n < 0 || (n > 0 && !tensors))
        return jg_errorf("jg_ctx_save_for_backward: bad tensor list");
    jg_saved *s = calloc((size_t)(n ? n : 1), sizeof *s);
    if (!s)
        return jg_errorf("out of memory in jg_ctx_save_for_backward");
    for (int i = 0; i < n; i++)
        jg_saved_init(&s[i], tensors[i]); /* NULL entries allowed, as None in PyTorch */
    /* Like PyTorch, a second call replaces what the first saved. */
    for (int i = 0; i < ctx->n_saved; i++)
        jg_saved_free(&ctx->saved[i]);
    free(ctx->saved);
    for (int k = 0; !ctx->non_diff_final && k < ctx->n_non_diff; k++)
        jg_release(ctx->non_diff[k]);
    ctx->saved = s;
    ctx->n_saved = n;
    return 0;
}

int jg_ctx_n_saved(const jg_ctx *ctx) {
    return ctx ? ctx->n_saved : 0;
}

jg_tensor *jg_ctx_saved(jg_ctx *ctx, int i) {
    if (!ctx)
        return jg_errorf_null("jg_ctx_saved: ctx is NULL");
    if (i < 0 || i >= ctx->n_saved)
        return jg_errorf_null("jg_ctx_saved: index %d out of range (%d tensors saved)", i,
                              ctx->n_saved);
    if (!ctx->node) /* forward: no history to re-attach yet */
        return ctx->saved[i].t;
    if (!ctx->saved[i].t && !ctx->node->saved_released)
        return NULL; /* a NULL that was saved */
    jg_tensor *t = jg_saved_unpack(&ctx->saved[i], ctx->node, ctx->create_graph);
    if (!t && !ctx->saved_failed) {
        /* like PyTorch's exception: the backward fails even if the callback
         * does not check */
        ctx->saved_failed = true;
        snprintf(ctx->saved_error, sizeof ctx->saved_error, "%s", jg_last_error());
    }
    return t;
}

bool jg_ctx_needs_input_grad(const jg_ctx *ctx, int slot) {
    return ctx && slot >= 0 && slot < ctx->n_inputs && ctx->needs_input_grad[slot];
}

const void *jg_ctx_args(const jg_ctx *ctx) {
    return ctx && ctx->args_size ? ctx->args : NULL;
}

size_t jg_ctx_args_size(const jg_ctx *ctx) {
    return ctx ? ctx->args_size : 0;
}

void jg_ctx_mark_non_differentiable(jg_ctx *ctx, jg_tensor *output) {
    /* (only forward's marks count: the outputs are classified when it returns) */
    if (ctx && output && !ctx->non_diff_final && ctx->n_non_diff < JG_MAX_OUTPUTS)
        ctx->non_diff[ctx->n_non_diff++] = jg_retain(output);
}

void jg_ctx_mark_dirty(jg_ctx *ctx, jg_tensor *input) {
    if (!ctx || !input || ctx->node)
        return;
    for (int d = 0; d < ctx->n_dirty; d++)
        if (ctx->dirty[d] == input)
            return;
    if (ctx->n_dirty < JG_MAX_OUTPUTS)
        ctx->dirty[ctx->n_dirty++] = input;
}

void jg_ctx_set_materialize_grads(jg_ctx *ctx, bool on) {
    if (ctx)
        ctx->materialize_grads = on;
}

const jg_function *jg_ctx_function(const jg_ctx *ctx) {
    return ctx ? ctx->fn : NULL;
}

void jg_ctx_set_state(jg_ctx *ctx, void *state, void (*free_state)(void *)) {
    if (!ctx)
        return;
    if (ctx->free_state && ctx->state != state)
        ctx->free_state(ctx->state);
    ctx->state = state;
    ctx->free_state = free_state;
}

void *jg_ctx_state(const jg_ctx *ctx) {
    return ctx ? ctx->state : NULL;
}

/* -------------------------------------------------------------- forward */

static const char *fn_name(const jg_function *fn) {
    return fn->name ? fn->name : "Function";
}

/* PyTorch's rule for a non-differentiable output (no input needs grad, or
 * marked) that requires grad: an input is returned as a detached alias (the
 * alias made above has no history), and any other tensor that is not a view
 * is detached in place -- the caller's tensor stops requiring grad.  A
 * traced or lifted one is only flagged: the tracer makes the program run
 * eagerly. */
static int detach_non_differentiable(jg_ctx *ctx, int n_inputs, jg_tensor *const *inputs, int n,
                                     jg_tensor *const *outs, jg_tensor *const *outputs) {
    bool any_grad = false;
    for (int k = 0; k < n_inputs; k++)
        any_grad |= ctx->needs_input_grad[k];
    for (int i = 0; i < n; i++) {
        jg_tensor *o = outs[i];
        bool is_input = false, is_lifted = false;
        for (int k = 0; k < n_inputs; k++) {
            is_input |= k < ctx->n_own && inputs[k] == o;
            is_lifted |= k >= ctx->n_own && inputs[k] == o;
        }
        if (any_grad && !ctx->out_non_diff[i])
            continue;
        if (is_input && !o->requires_grad && outputs[i] != o &&
            jg_view_track_alias(o, outputs[i]) < 0)
            return -1;
        if (is_input || o->is_view || !(o->requires_grad || o->grad_fn))
            continue;
        if (o->sym || is_lifted) {
            ctx->detaches_traced = true;
            continue;
        }
        jg_node_release(o->grad_fn);
        o->grad_fn = NULL;
        o->requires_grad = o->no_grad_view = false;
    }
    return 0;
}

int jg_function_run_forward(jg_ctx *ctx, int n_inputs, jg_tensor *const *inputs,
                            jg_tensor **outputs) {
    const jg_function *fn = ctx->fn;
    jg_tensor *outs[JG_MAX_OUTPUTS] = {0};
    jg_clear_error();
    jg_scope_push();
    bool prev = jg_set_grad_enabled(false);
    int n = fn->forward(ctx, n_inputs, inputs, outs);
    jg_set_grad_enabled(prev);
    int rc = n;
    if (n < 0) {
        if (!jg_last_error()[0])
            jg_errorf("%s.forward failed without an error message", fn_name(fn));
        rc = -1;
    } else if (n < 1 || n > JG_MAX_OUTPUTS) {
        rc = jg_errorf("%s.forward returned %d outputs; expected between 1 and %d", fn_name(fn), n,
                       JG_MAX_OUTPUTS);
    } else {
        for (int i = 0; i < n && rc >= 0; i++)
            if (!outs[i])
                rc = jg_errorf("%s.forward returned %d outputs but output %d is NULL", fn_name(fn),
                               n, i);
    }
    for (int i = 0; i < n && rc >= 0; i++) {
        jg_tensor *o = outs[i];
        bool shared = o->grad_fn || o->requires_grad;
        for (int k = 0; k < n_inputs && !shared; k++)
            shared = inputs[k] == o;
        for (int k = 0; k < i && !shared; k++)
            shared = outs[k] == o;
        /* An output that is an input (or already has history) becomes a new
         * alias, so attaching this call's history does not rewrite it. */
        outputs[i] = shared ? jg_alias_no_history(o) : jg_retain(o);
        if (outputs[i] && shared && o->no_grad_view && !o->grad_fn) /* x[:] under no_grad */
            outputs[i]->requires_grad = outputs[i]->no_grad_view = true;
        if (!outputs[i]) {
            for (int k = 0; k < i; k++)
                jg_release(outputs[k]);
            rc = -1;
        }
    }
    for (int d = 0; d < ctx->n_dirty && rc >= 0; d++) {
        /* returned twice: the tensor is the last of those outputs (PyTorch
         * sets its output_nr once per output, the last one stays) */
        ctx->dirty_out[d] = -1;
        for (int i = 0; i < n; i++)
            if (outs[i] == ctx->dirty[d])
                ctx->dirty_out[d] = i;
        bool is_input = false;
        for (int k = 0; k < n_inputs; k++)
            is_input |= inputs[k] == ctx->dirty[d];
        if (!is_input || ctx->dirty_out[d] < 0) {
            rc = jg_errorf("Some elements marked as dirty during the forward method were not "
                           "returned as output. The inputs that are modified inplace must all be "
                           "outputs of the Function.");
        } else if (jg_grad_mode && !ctx->dirty[d]->sym && ctx->dirty[d]->requires_grad &&
                   !ctx->dirty[d]->grad_fn) {
            rc = jg_errorf("a leaf Variable that requires grad has been used in an in-place "
                           "operation.");
        } else if (jg_grad_mode && n > 1 && !ctx->dirty[d]->sym && ctx->dirty[d]->view &&
                   !ctx->dirty[d]->view->no_grad && ctx->dirty[d]->requires_grad) {
            /* the write goes through the base (CopySlices), which has room
             * for the history of one output only */
            rc = jg_errorf(
                "If your Function modifies inplace an input that is a view of another Tensor, "
                "your Function cannot return more than one Tensor. This is not supported by the "
                "current autograd engine. You should either make sure the input is not a view "
                "(using .clone() for example) or make your Function only return one Tensor "
                "(potentially splitting it into two Functions: one doing the inplace that "
                "returns a single Tensor and a second one that does the other operations). You "
                "can ask on the forum https://discuss.pytorch.org/ if you need help to do this "
                "change.");
        }
        if (rc < 0)
            for (int k = 0; k < n; k++)
                jg_release(outputs[k]);
    }
    if (rc >= 0) {
        /* saved outputs would form a cycle node -> saved -> output -> node.
         * A returned input (or tensor with history) is not one: the output is
         * a new alias, and the saved tensor keeps its own history (PyTorch:
         * a saved tensor is an output only if this node is its grad_fn). */
        for (int s = 0; s < ctx->n_saved; s++) {
            for (int i = 0; i < n; i++)
                if (ctx->saved[s].t && ctx->saved[s].t == outs[i] && outputs[i] == outs[i] &&
                    ctx->saved[s].output_nr < 0)
                    jg_saved_mark_output(&ctx->saved[s], i);
        }
    }
    for (int i = 0; rc >= 0 && i < n; i++) {
        ctx->out_non_diff[i] = false;
        for (int k = 0; k < ctx->n_non_diff; k++)
            ctx->out_non_diff[i] |= ctx->non_diff[k] == outs[i];
    }
    if (rc >= 0 && detach_non_differentiable(ctx, n_inputs, inputs, n, outs, outputs) < 0) {
        for (int k = 0; k < n; k++)
            jg_release(outputs[k]);
        rc = -1;
    }
    /* each mark becomes the output it is (borrowed), or NULL */
    for (int k = 0; k < ctx->n_non_diff; k++) {
        jg_tensor *m = ctx->non_diff[k];
        ctx->non_diff[k] = NULL;
        for (int i = 0; rc >= 0 && i < n; i++)
            if (m == outs[i])
                ctx->non_diff[k] = outputs[i];
        jg_release(m);
    }
    ctx->non_diff_final = true;
    /* a saved output marked non-differentiable comes back without history,
     * as PyTorch's (its node is not its grad_fn) */
    for (int si = 0; rc >= 0 && si < ctx->n_saved; si++) {
        int nr = ctx->saved[si].output_nr;
        for (int k = 0; nr >= 0 && k < ctx->n_non_diff; k++)
            if (ctx->non_diff[k] && ctx->non_diff[k] == outputs[nr])
                ctx->saved[si].output_nr = nr = -1;
    }
    jg_scope_pop();
    return rc;
}

/* ------------------------------------------------------------- backward */

int jg_function_run_backward(jg_ctx *ctx, int n_out, const jg_meta *out_meta,
                             jg_tensor *const *gout, jg_tensor **gin) {
    const jg_function *fn = ctx->fn;
    char bw_name[96];
    snprintf(bw_name, sizeof bw_name, "%sBackward", fn_name(fn));
    if (!fn->backward)
        return jg_errorf("function %s is not differentiable: it has no backward", bw_name);
    jg_tensor *g[JG_MAX_OUTPUTS];
    for (int i = 0; i < n_out; i++) {
        g[i] = gout[i];
        if (!g[i] && ctx->materialize_grads &&
            !(g[i] = jg_full(out_meta[i].dtype, out_meta[i].ndim, out_meta[i].shape, 0.0)))
            return -1;
    }
    int n_in = ctx->n_inputs;
    for (int i = 0; i < n_in; i++)
        gin[i] = NULL;
    jg_clear_error();
    ctx->in_backward = true;
    ctx->saved_failed = false;
    int got = fn->backward(ctx, n_out, g, n_in, gin);
    ctx->in_backward = false;
    if (ctx->saved_failed)
        return jg_errorf("%s", ctx->saved_error);
    if (got < 0) {
        if (!jg_last_error()[0])
            jg_errorf("%s failed without an error message", bw_name);
        return -1;
    }
    if (got != n_in)
        return jg_errorf("function %s returned an incorrect number of gradients (expected %d, "
                         "got %d)",
                         bw_name, n_in, got);
    for (int i = 0; i < n_in; i++) {
        if (!gin[i])
            continue;
        if (!ctx->needs_input_grad[i]) {
            gin[i] = NULL; /* the slot's tensor does not require grad: dropped */
            continue;
        }
        if (jg_grad_validate(bw_name, i, &ctx->in_meta[i], &gin[i]) < 0)
            return -1;
    }
    return 0;
}

/* ---------------------------------------------------------- eager node */

static int fn_apply(jg_node *n, jg_tensor *const *gout, const bool *reached, jg_tensor **gin,
                    bool create_graph) {
    (void)reached;
    fn_node *f = (fn_node *)n;
    f->ctx->create_graph = create_graph;
    return jg_function_run_backward(f->ctx, n->n_out, n->out_meta, gout, gin);
}

static void fn_release_saved(jg_node *n) {
    jg_ctx *ctx = ((fn_node *)n)->ctx;
    for (int i = 0; i < ctx->n_saved; i++)
        jg_saved_free(&ctx->saved[i]);
}

static void fn_destroy(jg_node *n) {
    jg_ctx_free(((fn_node *)n)->ctx);
}

static const char *fn_node_name(const jg_node *n) {
    return ((const fn_node *)n)->name;
}

static const jg_node_vt fn_vt = {
    fn_apply, fn_release_saved, fn_destroy, fn_node_name, true, NULL, NULL, NULL};

jg_ctx *jg_function_node_ctx(const jg_node *n) {
    return n && n->vt == &fn_vt ? ((const fn_node *)n)->ctx : NULL;
}

static int apply_impl(const jg_function *fn, int n_inputs, int n_own, jg_tensor *const *inputs,
                      const void *args, size_t args_size, jg_tensor **outputs);

/* Outputs that are views (of an input returned as is, or made in forward)
 * refuse in-place ops, as PyTorch's _wrap_outputs marks them: a dirty input
 * is not one (its write is the call's); with several differentiable
 * outputs every view is (MULTI_OUTPUT_NODE's message). */
static void mark_custom_views(const jg_ctx *ctx, int n_own, jg_tensor *const *inputs, int n,
                              jg_tensor *const *outs) {
    int n_diff = 0;
    for (int i = 0; i < n; i++)
        n_diff += !ctx->out_non_diff[i];
    for (int i = 0; i < n; i++) {
        jg_tensor *o = outs[i];
        bool view = o->is_view, dirty = false;
        for (int k = 0; k < n_own && !view; k++)
            view = inputs[k]->storage == o->storage;
        for (int d = 0; d < ctx->n_dirty; d++)
            dirty |= ctx->dirty[d] == o || (ctx->dirty_out[d] == i);
        if (!view || o->sym)
            continue;
        if (!dirty && !ctx->out_non_diff[i])
            o->custom_view = true;
        if (n_diff > 1) {
            o->custom_view = true;
            o->custom_view_multi = true;
        }
    }
}

int jg_apply(const jg_function *fn, int n_inputs, jg_tensor *const *inputs, const void *args,
             size_t args_size, jg_tensor **outputs) {
    return apply_impl(fn, n_inputs, n_inputs, inputs, args, args_size, outputs);
}

int jg_apply_lifted(const jg_function *fn, int n_inputs, int n_own, jg_tensor *const *inputs,
                    const void *args, size_t args_size, jg_tensor **outputs) {
    return apply_impl(fn, n_inputs, n_own, inputs, args, args_size, outputs);
}

static int apply_impl(const jg_function *fn, int n_inputs, int n_own, jg_tensor *const *inputs,
                      const void *args, size_t args_size, jg_tensor **outputs) {
    if (!fn || !fn->forward)
        return jg_errorf("jg_apply: function or its forward is NULL");
    if (n_inputs < 0 || (n_inputs > 0 && !inputs))
        return jg_errorf("jg_apply(%s): bad input list", fn_name(fn));
    if (!outputs)
        return jg_errorf("jg_apply(%s): outputs is NULL", fn_name(fn));
    if (args_size && !args)
        return jg_errorf("jg_apply(%s): args is NULL but args_size is %zu", fn_name(fn), args_size);
    bool symbolic = false;
    for (int i = 0; i < n_inputs; i++) {
        if (!inputs[i])
            return jg_errorf("jg_apply(%s): input %d is NULL", fn_name(fn), i);
        if (jg_view_sync_use(inputs[i]) < 0)
            return -1;
        symbolic |= inputs[i]->sym != NULL;
    }
    if (symbolic || jg_trace_capture) {
        if (!jg_trace_apply_hook)
            return jg_errorf("jg_apply(%s): symbolic input outside a trace", fn_name(fn));
        return jg_trace_apply_hook(fn, n_inputs, inputs, args, args_size, outputs);
    }
    jg_ctx *ctx = jg_ctx_new(fn, n_inputs, inputs, args, args_size);
    if (!ctx)
        return -1;
    ctx->n_own = n_own;
    for (int i = n_own; i < n_inputs; i++)
        ctx->needs_input_grad[i] = false; /* (not inputs in eager mode: no edge) */
    jg_tensor *outs[JG_MAX_OUTPUTS];
    int n = jg_function_run_forward(ctx, n_inputs, inputs, outs);
    if (n < 0) {
        jg_ctx_free(ctx);
        return -1;
    }
    bool any_grad = false;
    for (int i = 0; i < n_inputs; i++)
        any_grad |= ctx->needs_input_grad[i];
    jg_tensor *dirty[JG_MAX_OUTPUTS]; /* (the ctx may go away below) */
    int dirty_out[JG_MAX_OUTPUTS], n_dirty = ctx->n_dirty;
    for (int d = 0; d < n_dirty; d++) {
        dirty[d] = ctx->dirty[d];
        dirty_out[d] = ctx->dirty_out[d];
        ctx->dirty[d] = NULL; /* borrowed: the node outlives the call */
    }
    if (!any_grad) {
        jg_ctx_free(ctx);
    } else {
        fn_node *f = (fn_node *)jg_node_alloc(sizeof(fn_node), &fn_vt, n_inputs, n);
        if (!f) {
            for (int i = 0; i < n; i++)
                jg_release(outs[i]);
            jg_ctx_free(ctx);
            return -1;
        }
        f->ctx = ctx;
        snprintf(f->name, sizeof f->name, "%sBackward", fn_name(fn));
        for (int i = 0; i < n_own; i++)
            jg_node_set_edge(&f->base, i, inputs[i]);
        f->base.has_saved = ctx->n_saved > 0;
        for (int i = 0; i < n; i++) {
            if (!ctx->out_non_diff[i]) {
                jg_node_set_outputs(&f->base, 1, &outs[i]);
            } else {
                jg_meta_of(outs[i], &f->base.out_meta[i]);
                if (!outs[i]->grad_fn) /* (a view of an input made in forward) */
                    outs[i]->requires_grad = outs[i]->no_grad_view = false;
            }
        }
        /* jg_node_set_outputs numbers outputs from 0: fix output_nr and metas */
        for (int i = 0; i < n; i++) {
            jg_meta_of(outs[i], &f->base.out_meta[i]);
            if (outs[i]->grad_fn == &f->base)
                outs[i]->output_nr = i;
        }
        ctx->node = &f->base;
        jg_node_release(&f->base); /* the outputs hold it */
        mark_custom_views(ctx, n_own, inputs, n, outs);
    }
    /* a dirty input is returned as itself, its history moved onto the call
     * (through its base when it is a view), as PyTorch's mark_dirty does */
    int rc = 0;
    for (int d = 0; d < n_dirty; d++) {
        jg_tensor **o = &outs[dirty_out[d]];
        if (any_grad && rc == 0)
            rc = jg_inplace_commit(dirty[d], *o);
        jg_release(*o);
        /* no history to attach (grad mode off): an input that requires grad
         * comes back as a detached alias, as PyTorch's _wrap_outputs */
        *o = !any_grad && dirty[d]->requires_grad ? jg_alias_no_history(dirty[d])
                                                  : jg_retain(dirty[d]);
        if (!*o && rc == 0)
            rc = -1;
    }
    if (rc < 0) {
        for (int i = 0; i < n; i++)
            jg_release(outs[i]);
        return -1;
    }
    /* PyTorch takes the saved tensors' versions once forward has returned
     * and the dirty inputs are committed: a write inside forward after
     * save_for_backward (or the one that made an input dirty) is no error */
    for (int si = 0; any_grad && si < ctx->n_saved; si++)
        if (ctx->saved[si].t)
            ctx->saved[si].version = jg_version(ctx->saved[si].t);
    for (int i = 0; i < n; i++)
        outputs[i] = jg_scope_track(outs[i]);
    return n;
}
