/* Replaying a recorded subgraph through the public entry points. */
#include "trace/custom.h"
#include "trace/trace.h"

#include <stdlib.h>
#include <string.h>

int jg_trace_replay(const jg_graph *g, jg_tensor *const *inputs, jg_tensor **outputs) {
    return jg_trace_replay_uses(g, inputs, NULL, NULL, NULL, outputs, NULL);
}

int jg_trace_replay_uses(const jg_graph *g, jg_tensor *const *inputs, jg_tensor *const *uses,
                         const bool *live, jg_tensor *const *preset, jg_tensor **outputs,
                         jg_tensor **vals) {
    jg_tensor **v = calloc((size_t)(g->n_vals ? g->n_vals : 1), sizeof *v);
    if (!v)
        return jg_errorf("out of memory replaying a graph");
    for (int k = 0; k < g->n_inputs; k++)
        v[g->inputs[k]] = inputs[k];
    for (int c = 0; c < g->n_consts; c++)
        v[g->const_vals[c]] = g->consts[c];
    for (int i = 0; preset && i < g->n_vals; i++)
        if (preset[i])
            v[i] = preset[i];
    /* a node on constants only (a tensor a custom backward read from
     * outside) is traced too: its value is read at run time */
    uint32_t capture = jg_tracing() ? jg_trace_capture_all() : jg_trace_capture;
    int rc = 0, u = 0;
    for (int i = 0; i < g->n_nodes && rc == 0; i++) {
        const jg_gnode *n = &g->nodes[i];
        jg_tensor *in[64], *out[JG_MAX_OUTPUTS + 64] = {0};
        jg_tensor *const *use = uses ? uses + u : NULL;
        u += jg_gnode_n_slots(n);
        if (live && !live[i])
            continue;
        if (n->kind == JG_GN_OP) {
            for (int k = 0; k < n->n_in; k++)
                in[k] = use && use[k] ? use[k] : v[n->in[k]];
            rc = jg_op_call(n->op, &n->attrs, in, out);
            for (int k = 0; k < n->n_out && rc == 0; k++)
                v[n->out[k]] = out[k];
            continue;
        }
        /* a custom call: apply it again (its saved-value outputs are only
         * read by graph autodiff, never by other nodes) */
        const jg_gcustom *c = n->custom;
        const jg_custom_info *info = c->user;
        if (c->opaque_backward) {
            /* the eager backward of an opaque call, traced again with grad
             * mode on (create_graph inside the program): it is no call of
             * the function, and its callback's ops cannot be recorded; the
             * program runs eagerly */
            jg_trace_note_break("a backward with create_graph through %s, whose call runs its "
                                "callbacks eagerly (opaque)",
                                c->fn->name ? c->fn->name : "a custom function");
            rc = jg_errorf("a backward with create_graph through the opaque call of %s cannot be "
                           "traced",
                           c->fn->name ? c->fn->name : "a custom function");
            break;
        }
        /* (a traced call has at most 64 slots: trace/custom.c refuses more) */
        JG_ASSERT(c->n_slots <= 64);
        for (int s = 0; s < c->n_slots; s++)
            in[s] = use && use[s] ? use[s] : v[jg_gnode_slot_value(n, s)];
        /* lifted slots go along: the callback rebuilds the objects that
         * held them (it answers no gradient for them, as in eager mode) */
        const void *args = c->args;
        char *patched = NULL;
        if (info->n_arg_ptrs) {
            if (!(patched = malloc(c->args_size))) {
                rc = jg_errorf("out of memory replaying a graph");
                break;
            }
            memcpy(patched, c->args, c->args_size);
            for (int k = 0; k < info->n_arg_ptrs; k++)
                memcpy(patched + info->arg_ptr_off[k], &in[info->arg_ptr_slot[k]],
                       sizeof(jg_tensor *));
            args = patched;
        }
        int got = jg_apply_lifted(c->fn, c->n_slots, info->n_args, in, args, c->args_size, out);
        free(patched);
        if (got < 0 || got != info->n_call_out) {
            rc = got < 0 ? -1
                         : jg_errorf("replay: %s returned %d outputs, %d when traced", c->fn->name,
                                     got, info->n_call_out);
            break;
        }
        for (int k = 0; k < got; k++)
            v[n->out[k]] = out[k];
        /* the tensors the call's ctx saved stand for its saved-value
         * outputs (a rerun for create_graph restores their forward-time
         * data, cnode.c) */
        const jg_ctx *ctx = NULL;
        for (int k = 0; k < got && !ctx; k++)
            ctx = out[k] ? jg_function_node_ctx(out[k]->grad_fn) : NULL;
        for (int s = 0; ctx && vals && s < info->n_saved && s < ctx->n_saved; s++)
            if (info->saved_out && info->saved_out[s] >= 0 && ctx->saved[s].t)
                v[n->out[info->saved_out[s]]] = ctx->saved[s].t;
    }
    jg_trace_capture_resume(capture);
    for (int k = 0; k < g->n_outputs && rc == 0; k++)
        outputs[k] = g->outputs[k] >= 0 ? v[g->outputs[k]] : NULL;
    for (int i = 0; vals && rc == 0 && i < g->n_vals; i++)
        vals[i] = v[i];
    free(v);
    return rc;
}
