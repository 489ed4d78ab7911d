/* Dead code elimination: walks nodes backwards, dropping those whose outputs
 * nobody uses (removing one can make its operands dead in turn). */
#include "passes/passes.h"

#include <stdlib.h>

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
        if (used)
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
