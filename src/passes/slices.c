/* Slice-gradient fusion: add(slice_backward(a), slice_backward(b)) of one
 * shape and dtype (f32 / f64), the two ranges of one dim disjoint, becomes
 * slice_backward2(a', b'): one write of the sum instead of two zero-filled
 * whole-shape buffers and a third pass adding them.  a' is a with the
 * reshapes that made it dropped (slice_backward2 reads its operands in
 * row-major order, which a reshape keeps), so the copy a reshape of a
 * permuted gradient makes goes too.  The kernel writes x + 0 where the add
 * did x + 0 or 0 + x: the same bits (-0 becomes +0, NaNs are quieted). */
#include "passes/passes.h"

/* value v's defining op node if it is one of op `op` (else NULL) */
static const jg_gnode *def_op(const jg_graph *g, int v, jg_opcode op) {
    const jg_value *x = &g->vals[v];
    if (x->kind != JG_VAL_NODE)
        return NULL;
    const jg_gnode *n = &g->nodes[x->node];
    return n->kind == JG_GN_OP && n->op == op ? n : NULL;
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
            const jg_value *v = &g->vals[n->in[k]];
            sb[k] = def_op(g, n->in[k], JG_OP_SLICE_BACKWARD);
            /* (used only here, of the add's shape and dtype: no broadcast,
             * no promotion) */
            ok = sb[k] && v->uses == 1 && jg_meta_equal(&v->meta, &o->meta);
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
            int src = sb[k]->in[0];
            for (const jg_gnode *r; (r = def_op(g, src, JG_OP_RESHAPE));)
                src = r->in[0];
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
