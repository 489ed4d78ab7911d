/* Dedup-inputs: a custom call whose slots hold the same value several times
 * gets each distinct value once as an operand, and a slot_map from slots to
 * operands.  It changes no gradient: graph autodiff still hands every slot's
 * backward value to its source one by one (see autodiff.c). */
#include "passes/passes.h"

int jg_pass_dedup(jg_graph *g) {
    int merged = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        jg_gnode *n = &g->nodes[i];
        if (n->kind != JG_GN_CUSTOM)
            continue;
        jg_gcustom *c = n->custom;
        int *ops = jg_arena_alloc(&g->arena, sizeof(int) * (size_t)(c->n_slots ? c->n_slots : 1));
        if (!ops)
            return -1;
        int n_ops = 0;
        for (int s = 0; s < c->n_slots; s++) {
            int v = n->in[c->slot_map[s]], k = 0;
            while (k < n_ops && ops[k] != v)
                k++;
            if (k == n_ops)
                ops[n_ops++] = v;
            c->slot_map[s] = k;
        }
        /* uses count operand positions: drop the old ones, add the new */
        for (int k = 0; k < n->n_in; k++)
            g->vals[n->in[k]].uses--;
        for (int k = 0; k < n_ops; k++)
            g->vals[ops[k]].uses++;
        merged += n->n_in - n_ops;
        n->in = ops;
        n->n_in = n_ops;
    }
    return merged;
}
