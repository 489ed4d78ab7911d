/* Slice-gradient fusion: add(slice_backward(a), slice_backward(b)) of one
 * shape and dtype (f32 / f64), the two ranges of one dim disjoint, becomes
 * slice_backward2(a', b'): one write of the sum instead of two zero-filled
 * whole-shape buffers and a third pass adding them.  a' is a with the
 * reshapes that made it dropped (slice_backward2 reads its operands in
 * row-major order, which a reshape keeps), so the copy a reshape of a
 * permuted gradient makes goes too; slice_backwards over a whole dim (the
 * other dims of x[:, :, :C]) are copies, looked through the same way.  The kernel writes x + 0
 * where the add did x + 0 or 0 + x: the same bits (-0 becomes +0, NaNs are quieted). */
#include "passes/passes.h"

/* value v's defining op node if it is one of op `op` (else NULL) */
static const jg_gnode *def_op(const jg_graph *g, int v, jg_opcode op) {
    const jg_value *x = &g->vals[v];
    if (x->kind != JG_VAL_NODE)
        return NULL;
    const jg_gnode *n = &g->nodes[x->node];
    return n->kind == JG_GN_OP && n->op == op ? n : NULL;
}

/* a slice_backward over its whole dim (x[:, :, :C] slices dims 0 and 1 whole
 * too): a copy of its operand, same shape, same bits */
static const jg_gnode *whole_slice(const jg_graph *g, int v) {
    const jg_gnode *n = def_op(g, v, JG_OP_SLICE_BACKWARD);
    return n && n->attrs.i[1] == 0 && n->attrs.i[2] == n->attrs.i[3 + n->attrs.i[0]] ? n : NULL;
}

/* what value v copies: v through reshapes and whole-dim slice_backwards */
static int source_of(const jg_graph *g, int v) {
    for (const jg_gnode *r; (r = def_op(g, v, JG_OP_RESHAPE)) || (r = whole_slice(g, v));)
        v = r->in[0];
    return v;
}

int jg_pass_slices(jg_graph *g) {
    int fused = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        jg_gnode *n = &g->nodes[i];
        if (n->kind != JG_GN_OP || n->op != JG_OP_ADD)
            continue;
        const jg_value *o = &g->vals[n->out[0]];
        int nd = o->meta.ndim;
        /* (slice_backward2 has no VJP: a value with a gradient keeps its ops;
         * its attributes hold 5 + nd integers) */
        if (o->requires_grad || (o->meta.dtype != JG_F32 && o->meta.dtype != JG_F64) || nd < 1 ||
            5 + nd > JG_MAX_DIMS + 4)
            continue;
        const jg_gnode *sb[2];
        bool ok = true;
        for (int k = 0; k < 2 && ok; k++) {
            /* (used only here, of the add's shape and dtype: no broadcast,
             * no promotion; through whole-dim slice_backwards, each used
             * once, to the one that slices) */
            int u = n->in[k];
            for (const jg_gnode *w; g->vals[u].uses == 1 && (w = whole_slice(g, u));)
                u = w->in[0];
            sb[k] = def_op(g, u, JG_OP_SLICE_BACKWARD);
            ok = sb[k] && g->vals[u].uses == 1 && !whole_slice(g, u) &&
                 jg_meta_equal(&g->vals[u].meta, &o->meta);
        }
        if (!ok || sb[0]->attrs.i[0] != sb[1]->attrs.i[0])
            continue;
        int64_t s0 = sb[0]->attrs.i[1], e0 = sb[0]->attrs.i[2];
        int64_t s1 = sb[1]->attrs.i[1], e1 = sb[1]->attrs.i[2];
        if (s0 < e1 && s1 < e0)
            continue; /* overlapping ranges add there */
        jg_attrs a = {.n = 5 + nd};
        a.i[0] = sb[0]->attrs.i[0];
        a.i[1] = s0;
        a.i[2] = e0;
        a.i[3] = s1;
        a.i[4] = e1;
        for (int d = 0; d < nd; d++)
            a.i[5 + d] = o->meta.shape[d];
        for (int k = 0; k < 2; k++) {
            int src = source_of(g, sb[k]->in[0]);
            g->vals[n->in[k]].uses--; /* (the slice_backward dies: DCE drops it) */
            g->vals[src].uses++;
            n->in[k] = src;
        }
        n->op = JG_OP_SLICE_BACKWARD2;
        n->attrs = a;
        fused++;
    }
    return fused;
}
