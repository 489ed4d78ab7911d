/* Dead code elimination: walks nodes backwards, dropping those whose outputs
 * nobody uses (removing one can make its operands dead in turn).  A node
 * that can fail on its operands' values (JG_OPF_CHECKS), a custom call whose
 * forward holds one, and an opaque call (user code runs) are kept: a
 * compiled program fails where eager fails. */
#include "passes/passes.h"

#include <stdlib.h>

static bool must_run(const jg_gnode *n) {
    if (n->kind == JG_GN_OP)
        return (jg_ops[n->op].flags & JG_OPF_CHECKS) != 0;
    const jg_gcustom *c = n->custom;
    if (c->opaque)
        return !c->opaque_backward;
    for (int i = 0; c->fwd && i < c->fwd->n_nodes; i++)
        if (must_run(&c->fwd->nodes[i]))
            return true;
    return false;
}

int jg_pass_dce(jg_graph *g) {
    if (!g->n_nodes)
        return 0;
    bool *dead = calloc((size_t)g->n_nodes, sizeof *dead);
    if (!dead)
        return jg_errorf("out of memory in DCE");
    int removed = 0;
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        jg_gnode *n = &g->nodes[i];
        bool used = false;
        for (int k = 0; k < n->n_out && !used; k++)
            used = g->vals[n->out[k]].uses > 0;
        if (used || must_run(n))
            continue;
        dead[i] = true;
        removed++;
        /* release its operand uses now so earlier producers can die too;
         * jg_graph_remove_nodes must not subtract them again */
        for (int k = 0; k < n->n_in; k++)
            g->vals[n->in[k]].uses--;
        n->n_in = 0;
    }
    if (removed)
        jg_graph_remove_nodes(g, dead);
    free(dead);
    return removed;
}
