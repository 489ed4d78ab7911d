/* Common subexpression elimination over op nodes (hash of op, attrs and
 * operand ids; exact comparison on hits). */
#include "passes/passes.h"

#include <stdlib.h>
#include <string.h>

static uint64_t mix(uint64_t h, uint64_t x) {
    h ^= x + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h;
}

static uint64_t node_hash(const jg_gnode *n) {
    uint64_t h = (uint64_t)n->op;
    const unsigned char *p = (const unsigned char *)&n->attrs;
    for (size_t i = 0; i < sizeof n->attrs; i++)
        h = mix(h, p[i]);
    for (int k = 0; k < n->n_in; k++)
        h = mix(h, (uint64_t)n->in[k]);
    return h;
}

/* (outputs recorded under different grad modes are different values: a
 * use with grad mode on of the one recorded without would lose its
 * gradient, and the verifier refuses it) */
static bool same(const jg_graph *g, const jg_gnode *a, const jg_gnode *b) {
    if (a->op != b->op || a->n_in != b->n_in || memcmp(&a->attrs, &b->attrs, sizeof a->attrs))
        return false;
    for (int k = 0; k < a->n_in; k++)
        if (a->in[k] != b->in[k])
            return false;
    for (int k = 0; k < a->n_out; k++)
        if (g->vals[a->out[k]].requires_grad != g->vals[b->out[k]].requires_grad)
            return false;
    return true;
}

int jg_pass_cse(jg_graph *g) {
    if (!g->n_nodes)
        return 0;
    size_t cap = 16;
    while (cap < (size_t)g->n_nodes * 2)
        cap *= 2;
    int *table = malloc(cap * sizeof *table);
    uint64_t *hashes = malloc((size_t)g->n_nodes * sizeof *hashes);
    bool *dead = calloc((size_t)g->n_nodes, sizeof *dead);
    if (!table || !hashes || !dead) {
        free(table);
        free(hashes);
        free(dead);
        return jg_errorf("out of memory in CSE");
    }
    for (size_t i = 0; i < cap; i++)
        table[i] = -1;
    int removed = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        jg_gnode *n = &g->nodes[i];
        if (n->kind != JG_GN_OP)
            continue;
        hashes[i] = node_hash(n);
        size_t s = (size_t)hashes[i] & (cap - 1);
        for (; table[s] >= 0; s = (s + 1) & (cap - 1)) {
            int j = table[s];
            if (hashes[j] == hashes[i] && same(g, &g->nodes[j], n))
                break;
        }
        if (table[s] < 0) {
            table[s] = i;
            continue;
        }
        const jg_gnode *keep = &g->nodes[table[s]];
        for (int k = 0; k < n->n_out; k++)
            jg_graph_replace_uses(g, n->out[k], keep->out[k]);
        dead[i] = true;
        removed++;
    }
    if (removed)
        jg_graph_remove_nodes(g, dead);
    free(table);
    free(hashes);
    free(dead);
    return removed;
}
