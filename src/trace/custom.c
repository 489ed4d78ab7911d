/* Captures jg_apply while tracing: the user's forward callback is traced into
 * a subgraph with one placeholder per SLOT, and the call becomes one custom
 * node in the enclosing graph.  Nothing is deduplicated here — the same value
 * in two slots is two operands — so the per-slot structure reaches the dedup
 * pass and graph autodiff intact.  A call whose callbacks read tensor values
 * becomes an opaque node instead (see custom.h). */
#include "trace/custom.h"

#include "trace/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SLOTS 64

static const char *fn_name(const jg_function *fn) {
    return fn->name ? fn->name : "Function";
}

/* Removes (and frees) a subgraph that turned out to be of no use. */
static void drop_child(jg_graph *parent, jg_graph *child) {
    for (int i = 0; i < parent->n_children; i++)
        if (parent->children[i] == child) {
            parent->children[i] = parent->children[--parent->n_children];
            jg_graph_free(child);
            return;
        }
}

int jg_custom_trace_backward(jg_ctx *ctx, int n_out, const jg_meta *out_meta,
                             jg_tensor *const *gout, jg_tensor *const *saved, jg_tensor **gin) {
    /* the ctx keeps what the forward saved; backward sees the stand-ins */
    jg_saved *orig = ctx->saved, *tmp = NULL;
    if (ctx->n_saved && !(tmp = calloc((size_t)ctx->n_saved, sizeof *tmp)))
        return jg_errorf("out of memory tracing a backward");
    for (int j = 0; j < ctx->n_saved; j++)
        jg_saved_init(&tmp[j], saved[j]);
    ctx->saved = tmp;
    jg_node *node = ctx->node;
    ctx->node = NULL; /* saved tensors are handed out as they are */
    int breaks = jg_trace_breaks();
    int rc = jg_function_run_backward(ctx, n_out, out_meta, gout, gin);
    if (jg_trace_breaks() > breaks)
        rc = jg_errorf("the backward callback of %s cannot be traced: %s", fn_name(ctx->fn),
                       jg_trace_break_reason());
    ctx->node = node;
    ctx->saved = orig;
    for (int j = 0; j < ctx->n_saved; j++)
        jg_saved_free(&tmp[j]);
    free(tmp);
    return rc;
}

/* Runs the forward callback on placeholders inside subgraph F and sets F's
 * outputs (call outputs, then saved values).  Returns the output count, or
 * -1: an error, or a graph break inside F (why is set). */
static int trace_forward(jg_graph *F, jg_ctx *ctx, int n, jg_tensor *const *inputs,
                         jg_tensor **outs, char *why, size_t why_n, bool *wrote_input) {
    jg_tensor *ph[MAX_SLOTS];
    if (jg_trace_begin(F, 0) < 0)
        return -1;
    int rc = 0, n_out = -1;
    for (int i = 0; i < n && rc == 0; i++) {
        jg_meta m;
        jg_meta_of(inputs[i], &m);
        char name[24];
        snprintf(name, sizeof name, "in%d", i);
        if (!(ph[i] = jg_trace_placeholder(&m, false, inputs[i]->requires_grad, name))) {
            n = i;
            rc = -1;
        }
    }
    if (rc == 0)
        n_out = jg_function_run_forward(ctx, n, ph, outs);
    *wrote_input = false; /* an in-place write into a slot (counted by the placeholder) */
    for (int i = 0; i < n; i++)
        *wrote_input |= jg_version(ph[i]) > 0;
    if (jg_trace_breaks()) {
        snprintf(why, why_n, "%s", jg_trace_break_reason());
        for (int k = 0; k < n_out; k++)
            jg_release(outs[k]);
        n_out = -1;
    }
    int vals[JG_MAX_OUTPUTS + MAX_SLOTS], nv = 0;
    for (int k = 0; k < n_out && rc == 0; k++)
        if ((vals[nv++] = jg_trace_value(outs[k])) < 0)
            rc = -1;
    for (int s = 0; s < ctx->n_saved && n_out > 0 && rc == 0; s++) {
        jg_tensor *t = ctx->saved[s].t;
        if (!t)
            continue;
        if (nv == JG_MAX_OUTPUTS + MAX_SLOTS)
            rc = jg_errorf("jg_apply(%s): too many saved tensors to trace", fn_name(ctx->fn));
        else if ((vals[nv++] = jg_trace_value(t)) < 0)
            rc = -1;
    }
    if (n_out > 0 && rc == 0)
        rc = jg_graph_set_outputs(F, nv, vals);
    for (int i = 0; i < n; i++)
        jg_release(ph[i]);
    jg_trace_end();
    if (rc < 0 && n_out > 0) {
        for (int k = 0; k < n_out; k++)
            jg_release(outs[k]);
        return -1;
    }
    return rc < 0 ? -1 : n_out;
}

/* Does the backward callback trace?  Tried once on stand-ins in a scratch
 * graph, with every output's gradient present; a read of values makes the
 * call opaque. */
static bool backward_traces(jg_graph *G, jg_ctx *ctx, int n_out, const jg_meta *out_meta,
                            const jg_graph *F, char *why, size_t why_n) {
    jg_graph *S = jg_graph_new_child(G);
    if (!S || jg_trace_begin(S, 0) < 0)
        return true; /* out of memory: the real trace will report it */
    jg_tensor *g[JG_MAX_OUTPUTS] = {0}, *saved[MAX_SLOTS + JG_MAX_OUTPUTS] = {0};
    jg_tensor *gin[MAX_SLOTS];
    bool ok = true;
    for (int k = 0; k < n_out && ok; k++)
        ok = (g[k] = jg_trace_placeholder(&out_meta[k], false, false, "g")) != NULL;
    for (int j = 0, o = n_out; j < ctx->n_saved && ok; j++)
        if (ctx->saved[j].t)
            ok = (saved[j] = jg_trace_placeholder(&F->vals[F->outputs[o++]].meta, false, false,
                                                  "s")) != NULL;
    if (ok) {
        jg_scope_push();
        int rc = jg_custom_trace_backward(ctx, n_out, out_meta, g, saved, gin);
        jg_scope_pop();
        if (rc < 0 && jg_trace_breaks()) {
            snprintf(why, why_n, "%s", jg_trace_break_reason());
            ok = false;
        }
    }
    for (int k = 0; k < n_out; k++)
        jg_release(g[k]);
    for (int j = 0; j < ctx->n_saved; j++)
        jg_release(saved[j]);
    jg_trace_end();
    drop_child(G, S);
    return ok;
}

/* An opaque call: the forward runs once on zeros here, only to learn its
 * outputs' dtypes and shapes. */
static int opaque_metas(const jg_function *fn, int n, jg_tensor *const *inputs, const void *args,
                        size_t args_size, jg_meta *metas) {
    jg_tensor *z[MAX_SLOTS], *o[JG_MAX_OUTPUTS];
    bool needs[MAX_SLOTS];
    jg_meta im[MAX_SLOTS];
    jg_scope_push();
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        jg_meta_of(inputs[i], &im[i]);
        needs[i] = jg_grad_mode && inputs[i]->requires_grad;
        if (!(z[i] = jg_full(im[i].dtype, im[i].ndim, im[i].shape, 0.0)))
            rc = -1;
    }
    jg_ctx *ctx = rc == 0 ? jg_ctx_new_meta(fn, n, im, needs, args, args_size) : NULL;
    int n_out = ctx ? jg_function_run_forward(ctx, n, z, o) : -1;
    for (int k = 0; k < n_out; k++) {
        jg_meta_of(o[k], &metas[k]);
        jg_release(o[k]);
    }
    jg_ctx_free(ctx);
    jg_scope_pop();
    return n_out;
}

static void ctx_free(void *p) {
    jg_ctx_free(p);
}

static int trace_apply(const jg_function *fn, int n, jg_tensor *const *inputs, const void *args,
                       size_t args_size, jg_tensor **outputs) {
    jg_graph *G = jg_trace_graph();
    if (!G)
        return jg_errorf("jg_apply(%s): a traced tensor was used outside its trace", fn_name(fn));
    if (n > MAX_SLOTS)
        return jg_errorf("jg_apply(%s): at most %d inputs can be traced", fn_name(fn), MAX_SLOTS);
    int operands[MAX_SLOTS];
    for (int i = 0; i < n; i++)
        if ((operands[i] = jg_trace_value(inputs[i])) < 0)
            return -1;
    jg_ctx *ctx = jg_ctx_new(fn, n, inputs, args, args_size);
    jg_graph *F = ctx ? jg_graph_new_child(G) : NULL;
    if (!F) {
        jg_ctx_free(ctx);
        return -1;
    }
    char fname[96], why[512] = "";
    snprintf(fname, sizeof fname, "%s.forward", fn_name(fn));
    F->name = jg_arena_strdup(&F->arena, fname);
    jg_tensor *outs[JG_MAX_OUTPUTS] = {0};
    jg_meta metas[2 * JG_MAX_OUTPUTS + MAX_SLOTS];
    bool rgs[2 * JG_MAX_OUTPUTS + MAX_SLOTS] = {0};
    bool wrote = false;
    int n_out = trace_forward(F, ctx, n, inputs, outs, why, sizeof why, &wrote);
    if (ctx->n_dirty || wrote) { /* an input written in place: the program runs eagerly */
        jg_trace_note_break("%s.forward writes an input in place%s, which cannot be captured",
                            fn_name(fn), ctx->n_dirty ? " (ctx.mark_dirty)" : "");
        for (int k = 0; k < n_out; k++)
            jg_release(outs[k]);
        jg_ctx_free(ctx);
        drop_child(G, F);
        return jg_errorf("%s.forward writes an input in place; it cannot be traced", fn_name(fn));
    }
    if (n_out < 0 && !why[0]) {
        jg_ctx_free(ctx);
        drop_child(G, F);
        return -1;
    }
    for (int k = 0; k < n_out; k++)
        metas[k] = F->vals[F->outputs[k]].meta;
    bool opaque = n_out < 0 || !backward_traces(G, ctx, n_out, metas, F, why, sizeof why);
    int n_node_out = n_out > 0 ? F->n_outputs : 0;
    if (opaque) {
        /* outputs: the call's, the same with eager history, the slot leaves */
        for (int k = 0; k < n_out; k++)
            jg_release(outs[k]);
        drop_child(G, F);
        F = NULL;
        n_out = opaque_metas(fn, n, inputs, args, args_size, metas);
        if (n_out < 0) {
            jg_ctx_free(ctx);
            return -1;
        }
        for (int k = 0; k < n_out; k++)
            metas[n_out + k] = metas[k];
        for (int s = 0; s < n; s++)
            jg_meta_of(inputs[s], &metas[2 * n_out + s]);
        n_node_out = 2 * n_out + n;
        jg_ctx_free(ctx); /* each run makes its own, as eager calls do */
        ctx = NULL;
    }
    /* the call's record: differentiable outputs, saved entries */
    jg_custom_info *info = jg_arena_alloc(&G->arena, sizeof *info);
    bool *diff = jg_arena_alloc(&G->arena, sizeof(bool) * (size_t)n_out);
    int n_saved = ctx ? ctx->n_saved : 0;
    int *saved_out = jg_arena_alloc(&G->arena, sizeof(int) * (size_t)(n_saved + 1));
    int rc = info && diff && saved_out ? 0 : -1;
    bool any_rg = false;
    for (int i = 0; i < n; i++)
        any_rg |= jg_grad_mode && inputs[i]->requires_grad;
    for (int k = 0; k < n_out && rc == 0; k++) {
        diff[k] = jg_dtype_is_float(metas[k].dtype);
        for (int j = 0; ctx && j < ctx->n_non_diff; j++)
            diff[k] &= ctx->non_diff[j] != outs[k];
        rgs[k] = any_rg && diff[k];
    }
    if (rc == 0) {
        int next = n_out;
        for (int s = 0; s < n_saved; s++)
            saved_out[s] = ctx->saved[s].t ? next++ : -1;
        *info =
            (jg_custom_info){n_out, diff, n_saved, saved_out, ctx ? ctx->materialize_grads : true};
    }
    for (int k = 0; k < n_out && !opaque; k++) {
        jg_release(outs[k]);
        outs[k] = NULL;
    }
    int out_vals[2 * JG_MAX_OUTPUTS + MAX_SLOTS];
    jg_gcustom call = {.fn = fn,
                       .args = (void *)args,
                       .args_size = args_size,
                       .fwd = F,
                       .n_slots = n,
                       .n_call_out = n_out,
                       .opaque = opaque,
                       .user = info,
                       .state = ctx,
                       .free_state = ctx_free};
    if (rc == 0 && jg_graph_add_custom(G, &call, n, operands, n_node_out, metas, rgs, out_vals) < 0)
        rc = -1;
    if (rc < 0)
        jg_ctx_free(ctx); /* the graph did not take it */
    for (int k = 0; k < n_out && rc == 0; k++) {
        if (!(outputs[k] = jg_trace_tensor(out_vals[k]))) {
            for (int j = 0; j < k; j++)
                jg_release(outputs[j]);
            rc = -1;
        } else {
            jg_scope_track(outputs[k]);
        }
    }
    return rc < 0 ? -1 : n_out;
}

int jg_trace_opaque_backward(const jg_gcustom *call, const bool *slot_needs, int n_out,
                             jg_tensor *const *g, jg_tensor *const *hist, jg_tensor *const *leaves,
                             jg_tensor **raw, jg_tensor **filled) {
    jg_graph *G = jg_trace_graph();
    int ops[2 * JG_MAX_OUTPUTS + MAX_SLOTS], n_ops = 0, n_present = 0, n_need = 0;
    jg_meta metas[2 * MAX_SLOTS];
    bool rgs[2 * MAX_SLOTS] = {0};
    for (int k = 0; k < n_out; k++)
        if (g[k] && (ops[n_ops++] = jg_trace_value(g[k])) < 0)
            return -1;
    for (int k = 0; k < n_out; k++)
        if (g[k]) {
            n_present++;
            if ((ops[n_ops++] = jg_trace_value(hist[k])) < 0)
                return -1;
        }
    for (int s = 0; s < call->n_slots; s++) {
        raw[s] = filled[s] = NULL;
        if (!slot_needs[s])
            continue;
        if ((ops[n_ops++] = jg_trace_value(leaves[s])) < 0)
            return -1;
        jg_meta_of(leaves[s], &metas[2 * n_need]);
        metas[2 * n_need + 1] = metas[2 * n_need];
        n_need++;
    }
    JG_ASSERT(n_present > 0);
    /* operands: gradients, outputs with history, leaves; outputs: (raw,
     * filled) per slot that needs a gradient */
    jg_gcustom bw = *call;
    bw.fwd = bw.bwd = NULL;
    bw.slot_map = NULL;
    bw.n_slots = n_ops;
    bw.n_call_out = 0;
    bw.opaque = true;
    bw.opaque_backward = true;
    bw.state = NULL;
    bw.free_state = NULL;
    int outs[2 * MAX_SLOTS];
    if (jg_graph_add_custom(G, &bw, n_ops, ops, 2 * n_need, metas, rgs, outs) < 0)
        return -1;
    for (int s = 0, j = 0; s < call->n_slots; s++) {
        if (!slot_needs[s])
            continue;
        raw[s] = jg_scope_track(jg_trace_tensor(outs[2 * j]));
        filled[s] = jg_scope_track(jg_trace_tensor(outs[2 * j + 1]));
        if (!raw[s] || !filled[s])
            return -1;
        j++;
    }
    return 0;
}

void jg_trace_custom_init(void) {
    jg_trace_apply_hook = trace_apply;
}
