/* Captures jg_apply while tracing: the user's forward callback is traced into
 * a subgraph with one placeholder per SLOT, and the call becomes one custom
 * node in the enclosing graph.  Nothing is deduplicated here — the same value
 * in two slots is two operands — so the per-slot structure reaches the
 * dedup pass and graph autodiff intact. */
#include "trace/custom.h"

#include "autograd/function.h"
#include "trace/trace.h"

#include <stdio.h>
#include <string.h>

static const char *fn_name(const jg_function *fn) {
    return fn->name ? fn->name : "Function";
}

/* Runs the forward callback on placeholders inside subgraph F.  Returns the
 * output count, or -1 (error or a graph break inside F). */
static int trace_forward(jg_graph *F, jg_ctx *ctx, int n, jg_tensor *const *inputs,
                         jg_tensor **outs, char *why, size_t why_n) {
    jg_tensor *ph[64];
    if (n > 64)
        return jg_errorf("jg_apply(%s): at most 64 inputs can be traced", fn_name(ctx->fn));
    if (jg_trace_begin(F, 0) < 0)
        return -1;
    int rc = 0;
    for (int i = 0; i < n; i++) {
        jg_meta m;
        jg_meta_of(inputs[i], &m);
        char name[16];
        snprintf(name, sizeof name, "in%d", i);
        ph[i] = jg_trace_placeholder(&m, false, inputs[i]->requires_grad, name);
        if (!ph[i]) {
            for (int j = 0; j < i; j++)
                jg_release(ph[j]);
            jg_trace_end();
            return -1;
        }
    }
    int n_out = jg_function_run_forward(ctx, n, ph, outs);
    if (jg_trace_breaks()) {
        snprintf(why, why_n, "%s", jg_trace_break_reason());
        if (n_out > 0)
            for (int k = 0; k < n_out; k++)
                jg_release(outs[k]);
        n_out = -1;
    }
    /* F's outputs: the call's outputs, then the saved values */
    int vals[JG_MAX_OUTPUTS + 64], nv = 0;
    for (int k = 0; k < n_out && rc == 0; k++)
        if ((vals[nv++] = jg_trace_value(outs[k])) < 0)
            rc = -1;
    for (int s = 0; s < ctx->n_saved && n_out > 0 && rc == 0; s++) {
        jg_tensor *t = ctx->saved[s].t;
        if (!t)
            continue;
        if (nv == JG_MAX_OUTPUTS + 64)
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
    return n_out;
}

static int trace_apply(const jg_function *fn, int n, jg_tensor *const *inputs, const void *args,
                       size_t args_size, jg_tensor **outputs) {
    jg_graph *G = jg_trace_graph();
    if (!G)
        return jg_errorf("jg_apply(%s): a traced tensor was used outside its trace", fn_name(fn));
    int operands[64];
    if (n > 64)
        return jg_errorf("jg_apply(%s): at most 64 inputs can be traced", fn_name(fn));
    for (int i = 0; i < n; i++)
        if ((operands[i] = jg_trace_value(inputs[i])) < 0)
            return -1;
    jg_ctx *ctx = jg_ctx_new(fn, n, inputs, args, args_size);
    if (!ctx)
        return -1;
    jg_graph *F = jg_graph_new_child(G);
    if (!F) {
        jg_ctx_free(ctx);
        return -1;
    }
    char fname[96], why[512] = "";
    snprintf(fname, sizeof fname, "%s.forward", fn_name(fn));
    F->name = jg_arena_strdup(&F->arena, fname);
    jg_tensor *outs[JG_MAX_OUTPUTS];
    int n_out = trace_forward(F, ctx, n, inputs, outs, why, sizeof why);
    if (n_out < 0) {
        if (why[0]) {
            /* the callback read tensor values: this call cannot be a graph */
            jg_trace_note_break("jg_apply(%s): the forward callback cannot be traced: %s",
                                fn_name(fn), why);
            jg_errorf("jg_apply(%s): the forward callback cannot be traced: %s", fn_name(fn), why);
        }
        jg_ctx_free(ctx);
        return -1;
    }
    /* the call's record: differentiable outputs, saved entries */
    jg_custom_info *info = jg_arena_alloc(&G->arena, sizeof *info);
    bool *diff = jg_arena_alloc(&G->arena, sizeof(bool) * (size_t)n_out);
    int *saved_out = jg_arena_alloc(&G->arena, sizeof(int) * (size_t)(ctx->n_saved + 1));
    jg_meta metas[JG_MAX_OUTPUTS + 64];
    bool rgs[JG_MAX_OUTPUTS + 64];
    int rc = info && diff && saved_out ? 0 : -1;
    bool any_rg = false;
    for (int i = 0; i < n; i++)
        any_rg |= ctx->needs_input_grad[i];
    for (int k = 0; k < F->n_outputs && rc == 0; k++)
        metas[k] = F->vals[F->outputs[k]].meta;
    for (int k = 0; k < n_out && rc == 0; k++) {
        diff[k] = jg_dtype_is_float(metas[k].dtype);
        for (int j = 0; j < ctx->n_non_diff; j++)
            diff[k] &= ctx->non_diff[j] != outs[k];
        rgs[k] = any_rg && diff[k];
    }
    for (int k = n_out; k < F->n_outputs; k++)
        rgs[k] = false;
    if (rc == 0) {
        int next = n_out;
        for (int s = 0; s < ctx->n_saved; s++)
            saved_out[s] = ctx->saved[s].t ? next++ : -1;
        *info = (jg_custom_info){n_out, diff, ctx->n_saved, saved_out, ctx->materialize_grads};
    }
    int out_vals[JG_MAX_OUTPUTS + 64];
    jg_gcustom call = {.fn = fn,
                       .args = (void *)args,
                       .args_size = args_size,
                       .fwd = F,
                       .n_slots = n,
                       .n_call_out = n_out,
                       .user = info};
    if (rc == 0)
        rc = jg_graph_add_custom(G, &call, n, operands, F->n_outputs, metas, rgs, out_vals) < 0 ? -1
                                                                                                : 0;
    for (int k = 0; k < n_out; k++) {
        jg_release(outs[k]);
        outs[k] = NULL;
    }
    jg_ctx_free(ctx);
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

void jg_trace_custom_init(void) {
    jg_trace_apply_hook = trace_apply;
}

__attribute__((constructor)) static void custom_init(void) {
    jg_trace_custom_init();
}
