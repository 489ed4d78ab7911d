/* Which value a backward reads as eager's saved tensor the traced program
 * overwrote in place after the tensor was saved (jg_trace_stale_saved):
 * eager's backward fails on it, so the compiled node's does (compile/
 * mutation.c), and a backward traced inside the program leaves it to the
 * eager run (trace/backward.c). */
#include "trace/trace.h"

#include <stdlib.h>

/* The write that overwrote value v, or the value v views (through view
 * ops, which eager's views share memory with); NULL when none did. */
static const jg_trace_overwrite *overwrite_of(const jg_trace_overwrite *ow, int n_ow,
                                              const jg_graph *g, int v, bool *direct) {
    for (int steps = 0; steps < 64; steps++) {
        *direct = steps == 0;
        for (int i = 0; i < n_ow; i++)
            if (ow[i].value == v)
                return &ow[i];
        if (g->vals[v].kind != JG_VAL_NODE)
            return NULL;
        const jg_gnode *nd = &g->nodes[g->vals[v].node];
        if (nd->kind != JG_GN_OP || !(jg_ops[nd->op].flags & JG_OPF_VIEW))
            return NULL;
        v = nd->in[0];
    }
    return NULL;
}

int jg_trace_written_value(const jg_graph *g, const jg_trace_overwrite *ow) {
    for (int w = ow->next_val; w < g->n_vals; w++) {
        const jg_value *val = &g->vals[w];
        if (val->kind != JG_VAL_NODE)
            continue;
        const jg_gnode *nd = &g->nodes[val->node];
        for (int s = 0; s < nd->n_in; s++)
            if (nd->in[s] == ow->value)
                return w;
    }
    return -1;
}

bool jg_trace_saved_output(const jg_graph *g, int r, int v) {
    return r >= 0 && r < g->n_vals && v >= 0 && g->vals[r].kind == JG_VAL_NODE &&
           g->vals[v].kind == JG_VAL_NODE && g->vals[r].node == g->vals[v].node;
}

int jg_trace_stale_saved(const jg_graph *g, const jg_trace_overwrite *ow, int n_ow, int n_in,
                         const int *in_src, const int *checked_by, const jg_trace_overwrite **write,
                         bool *direct) {
    /* (in the order autodiff met them: eager's backward unpacks the latest
     * node's saved tensors first) */
    for (int k = 0; k < n_in && n_ow; k++) {
        int v = in_src[k];
        if (v < 0)
            continue;
        const jg_trace_overwrite *o = overwrite_of(ow, n_ow, g, v, direct);
        int r = checked_by[v];
        /* (read by a node made before the write: the write's own nodes
         * read the value it replaces; a reader whose value the write then
         * copies in, x.copy_(x * x), saved the old value as eagerly, and a
         * node's saved output is its own, which the write replaces) */
        if (!o || r >= o->next_val)
            continue;
        *write = o;
        return k;
    }
    return -1;
}
