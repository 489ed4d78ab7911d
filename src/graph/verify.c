/* The IR verifier: checks every invariant a pass must preserve.  jg_compile
 * runs it on every graph it builds, before the passes and after each one
 * (jg_compile_passes in compile/cnode.c); the tests also call it directly. */
#include "graph/graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail_meta(int node, const char *op, int k, const jg_meta *want, const jg_meta *got) {
    char w[160], h[160];
    jg_format_shape(w, sizeof w, want->ndim, want->shape);
    jg_format_shape(h, sizeof h, got->ndim, got->shape);
    return jg_errorf("graph verifier: node %d (%s) output %d is %s%s but the op's shape rule "
                     "gives %s%s",
                     node, op, k, jg_dtype_name(got->dtype), h, jg_dtype_name(want->dtype), w);
}

int jg_graph_verify(const jg_graph *g) {
    int *uses = calloc((size_t)(g->n_vals ? g->n_vals : 1), sizeof *uses);
    if (!uses)
        return jg_errorf("out of memory verifying a graph");
    int rc = -1;
    for (int k = 0; k < g->n_inputs; k++) {
        int v = g->inputs[k];
        if (v < 0 || v >= g->n_vals || g->vals[v].kind != JG_VAL_INPUT || g->vals[v].index != k) {
            jg_errorf("graph verifier: input %d does not name its placeholder value", k);
            goto out;
        }
    }
    for (int c = 0; c < g->n_consts; c++) {
        int v = g->const_vals[c];
        if (v < 0 || v >= g->n_vals || g->vals[v].kind != JG_VAL_CONST || g->vals[v].index != c ||
            !g->consts[c]) {
            jg_errorf("graph verifier: constant %d does not name its value", c);
            goto out;
        }
    }
    for (int v = 0; v < g->n_vals; v++) {
        const jg_value *val = &g->vals[v];
        if (val->kind == JG_VAL_NODE &&
            (val->node < 0 || val->node >= g->n_nodes || val->index >= g->nodes[val->node].n_out ||
             g->nodes[val->node].out[val->index] != v)) {
            jg_errorf("graph verifier: value %d claims a defining node that does not define it", v);
            goto out;
        }
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const jg_gnode *n = &g->nodes[i];
        const char *name = n->kind == JG_GN_OP ? jg_ops[n->op].name : "custom";
        jg_meta im[8];
        bool any_rg = false;
        for (int k = 0; k < n->n_in; k++) {
            int v = n->in[k];
            if (v < 0 || v >= g->n_vals || g->vals[v].kind == JG_VAL_DEAD) {
                jg_errorf("graph verifier: node %d (%s) operand %d names no live value", i, name,
                          k);
                goto out;
            }
            if (g->vals[v].kind == JG_VAL_NODE && g->vals[v].node >= i) {
                jg_errorf("graph verifier: node %d (%s) uses value %d before its definition "
                          "(node %d): not in SSA/topological order",
                          i, name, v, g->vals[v].node);
                goto out;
            }
            uses[v]++;
            any_rg |= g->vals[v].requires_grad;
            if (k < 8)
                im[k] = g->vals[v].meta;
        }
        for (int k = 0; k < n->n_out; k++) {
            int v = n->out[k];
            if (v < 0 || v >= g->n_vals || g->vals[v].kind != JG_VAL_NODE || g->vals[v].node != i ||
                g->vals[v].index != k) {
                jg_errorf("graph verifier: node %d (%s) output %d is not a value it defines", i,
                          name, k);
                goto out;
            }
            if (g->vals[v].requires_grad && !any_rg) {
                jg_errorf("graph verifier: node %d (%s) output %d requires grad but no operand "
                          "does",
                          i, name, k);
                goto out;
            }
        }
        if (n->kind == JG_GN_OP) {
            const jg_op_info *info = &jg_ops[n->op];
            if ((int)n->op < 0 || n->op >= JG_OP_COUNT || n->n_in != info->n_in ||
                n->n_out != info->n_out) {
                jg_errorf("graph verifier: node %d (%s) has %d operands and %d outputs; the op "
                          "table says %d and %d",
                          i, name, n->n_in, n->n_out, info->n_in, info->n_out);
                goto out;
            }
            jg_meta om[2];
            memset(om, 0, sizeof om);
            if (info->infer(&n->attrs, im, om) < 0) {
                char msg[400];
                snprintf(msg, sizeof msg, "%s", jg_last_error());
                jg_errorf("graph verifier: node %d (%s): shape rule rejects its operands: %s", i,
                          name, msg);
                goto out;
            }
            for (int k = 0; k < n->n_out; k++)
                if (!jg_meta_equal(&om[k], &g->vals[n->out[k]].meta)) {
                    fail_meta(i, name, k, &om[k], &g->vals[n->out[k]].meta);
                    goto out;
                }
        } else {
            const jg_gcustom *c = n->custom;
            if (!c || !c->slot_map) {
                jg_errorf("graph verifier: custom node %d has no call record", i);
                goto out;
            }
            bool used[64] = {0};
            for (int s = 0; s < c->n_slots; s++) {
                if (c->slot_map[s] < 0 || c->slot_map[s] >= n->n_in) {
                    jg_errorf("graph verifier: custom node %d slot %d maps to operand %d of %d", i,
                              s, c->slot_map[s], n->n_in);
                    goto out;
                }
                if (c->slot_map[s] < 64)
                    used[c->slot_map[s]] = true;
            }
            for (int k = 0; k < n->n_in && k < 64; k++)
                if (!used[k]) {
                    jg_errorf("graph verifier: custom node %d operand %d fills no slot", i, k);
                    goto out;
                }
            if (c->fwd && (c->fwd->n_inputs != c->n_slots || c->fwd->n_outputs != n->n_out)) {
                jg_errorf("graph verifier: custom node %d forward subgraph has %d inputs and %d "
                          "outputs; the call has %d slots and %d outputs",
                          i, c->fwd->n_inputs, c->fwd->n_outputs, c->n_slots, n->n_out);
                goto out;
            }
            if (c->bwd && c->bwd->n_outputs != c->n_slots) {
                jg_errorf("graph verifier: custom node %d backward subgraph returns %d gradients "
                          "for %d slots",
                          i, c->bwd->n_outputs, c->n_slots);
                goto out;
            }
            if ((c->fwd && jg_graph_verify(c->fwd) < 0) || (c->bwd && jg_graph_verify(c->bwd) < 0))
                goto out;
        }
    }
    for (int k = 0; k < g->n_outputs; k++) {
        int v = g->outputs[k];
        if (v == -1)
            continue;
        if (v < 0 || v >= g->n_vals || g->vals[v].kind == JG_VAL_DEAD) {
            jg_errorf("graph verifier: output %d names no live value", k);
            goto out;
        }
        uses[v]++;
    }
    for (int v = 0; v < g->n_vals; v++)
        if (uses[v] != g->vals[v].uses) {
            jg_errorf("graph verifier: value %d has use count %d but %d uses", v, g->vals[v].uses,
                      uses[v]);
            goto out;
        }
    rc = 0;
out:
    free(uses);
    return rc;
}
