/* The backward engine: finds the nodes reachable from the roots, runs each
 * once all its gradient contributions have arrived (latest-created first, so
 * sums are formed in the same order as graph autodiff forms them), routes
 * each slot's gradient along its edge, and only at the end touches .grad:
 * a backward that fails leaves every .grad exactly as it was. */
#include "autograd/engine.h"
#include "autograd/node.h"

#include <stdlib.h>
#include <string.h>

/* ---- pointer -> index map (open addressing) ---- */
typedef struct {
    const void **keys;
    int *vals;
    size_t cap, len;
} ptrmap;

static size_t hash_ptr(const void *p, size_t cap) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x & (cap - 1);
}

static int map_get(const ptrmap *m, const void *k) {
    if (!m->cap)
        return -1;
    for (size_t i = hash_ptr(k, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (!m->keys[i])
            return -1;
        if (m->keys[i] == k)
            return m->vals[i];
    }
}

static int map_put(ptrmap *m, const void *k, int v) {
    if ((m->len + 1) * 2 > m->cap) {
        ptrmap n = {0};
        n.cap = m->cap ? m->cap * 2 : 64;
        n.keys = calloc(n.cap, sizeof *n.keys);
        n.vals = malloc(n.cap * sizeof *n.vals);
        if (!n.keys || !n.vals) {
            free(n.keys);
            free(n.vals);
            return jg_errorf("out of memory in backward");
        }
        for (size_t i = 0; i < m->cap; i++)
            if (m->keys[i])
                map_put(&n, m->keys[i], m->vals[i]);
        free(m->keys);
        free(m->vals);
        *m = n;
    }
    size_t i = hash_ptr(k, m->cap);
    while (m->keys[i])
        i = (i + 1) & (m->cap - 1);
    m->keys[i] = k;
    m->vals[i] = v;
    m->len++;
    return 0;
}

static void map_free(ptrmap *m) {
    free(m->keys);
    free(m->vals);
}

/* ---- per-run state ---- */
typedef struct {
    jg_node *node;
    int deps;
    bool needed;
    bool ran;
    jg_tensor **buf; /* n_out gradient accumulators */
} node_info;

typedef struct {
    jg_tensor *leaf;
    jg_tensor *grad; /* pending contribution */
} leaf_info;

typedef struct {
    node_info *nodes;
    int n_nodes, cap_nodes;
    ptrmap node_idx;
    leaf_info *leaves;
    int n_leaves, cap_leaves;
    ptrmap leaf_idx;
    int *heap;
    int heap_len;
} run_state;

static int add_node(run_state *rs, jg_node *n) {
    if (rs->n_nodes == rs->cap_nodes) {
        int cap = rs->cap_nodes ? rs->cap_nodes * 2 : 32;
        node_info *ni = realloc(rs->nodes, (size_t)cap * sizeof *ni);
        if (!ni)
            return jg_errorf("out of memory in backward");
        rs->nodes = ni;
        rs->cap_nodes = cap;
    }
    jg_tensor **buf = calloc((size_t)(n->n_out ? n->n_out : 1), sizeof *buf);
    if (!buf || map_put(&rs->node_idx, n, rs->n_nodes) < 0) {
        free(buf);
        return jg_errorf("out of memory in backward");
    }
    rs->nodes[rs->n_nodes] = (node_info){n, 0, false, false, buf};
    return rs->n_nodes++;
}

static int leaf_slot(run_state *rs, jg_tensor *leaf) {
    int i = map_get(&rs->leaf_idx, leaf);
    if (i >= 0)
        return i;
    if (rs->n_leaves == rs->cap_leaves) {
        int cap = rs->cap_leaves ? rs->cap_leaves * 2 : 16;
        leaf_info *li = realloc(rs->leaves, (size_t)cap * sizeof *li);
        if (!li)
            return jg_errorf("out of memory in backward");
        rs->leaves = li;
        rs->cap_leaves = cap;
    }
    if (map_put(&rs->leaf_idx, leaf, rs->n_leaves) < 0)
        return -1;
    rs->leaves[rs->n_leaves] = (leaf_info){leaf, NULL};
    return rs->n_leaves++;
}

/* max-heap on node seq: the latest-created ready node runs first */
static void heap_push(run_state *rs, int idx) {
    int i = rs->heap_len++;
    rs->heap[i] = idx;
    while (i > 0) {
        int p = (i - 1) / 2;
        if (rs->nodes[rs->heap[p]].node->seq >= rs->nodes[rs->heap[i]].node->seq)
            break;
        int t = rs->heap[p];
        rs->heap[p] = rs->heap[i];
        rs->heap[i] = t;
        i = p;
    }
}

static int heap_pop(run_state *rs) {
    int top = rs->heap[0];
    rs->heap[0] = rs->heap[--rs->heap_len];
    int i = 0;
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < rs->heap_len && rs->nodes[rs->heap[l]].node->seq > rs->nodes[rs->heap[m]].node->seq)
            m = l;
        if (r < rs->heap_len && rs->nodes[rs->heap[r]].node->seq > rs->nodes[rs->heap[m]].node->seq)
            m = r;
        if (m == i)
            break;
        int t = rs->heap[m];
        rs->heap[m] = rs->heap[i];
        rs->heap[i] = t;
        i = m;
    }
    return top;
}

static void run_free(run_state *rs) {
    for (int i = 0; i < rs->n_nodes; i++) {
        for (int k = 0; k < rs->nodes[i].node->n_out; k++)
            jg_release(rs->nodes[i].buf[k]);
        free(rs->nodes[i].buf);
    }
    for (int i = 0; i < rs->n_leaves; i++)
        jg_release(rs->leaves[i].grad);
    free(rs->nodes);
    free(rs->leaves);
    free(rs->heap);
    map_free(&rs->node_idx);
    map_free(&rs->leaf_idx);
}

/* Finds every node reachable from the roots (iteratively). */
static int discover(run_state *rs, int n_roots, jg_tensor *const *roots) {
    int *stack = NULL, sp = 0, cap = 0;
    for (int r = 0; r < n_roots; r++) {
        jg_node *n = roots[r]->grad_fn;
        if (!n || map_get(&rs->node_idx, n) >= 0)
            continue;
        if (add_node(rs, n) < 0)
            goto oom;
        if (sp == cap) {
            cap = cap ? cap * 2 : 64;
            int *s = realloc(stack, (size_t)cap * sizeof *s);
            if (!s)
                goto oom;
            stack = s;
        }
        stack[sp++] = rs->n_nodes - 1;
        while (sp) {
            jg_node *cur = rs->nodes[stack[--sp]].node;
            for (int k = 0; k < cur->n_next; k++) {
                jg_node *nx = cur->next[k].fn;
                if (!nx || map_get(&rs->node_idx, nx) >= 0)
                    continue;
                if (add_node(rs, nx) < 0)
                    goto oom;
                if (sp == cap) {
                    cap = cap * 2;
                    int *s = realloc(stack, (size_t)cap * sizeof *s);
                    if (!s)
                        goto oom;
                    stack = s;
                }
                stack[sp++] = rs->n_nodes - 1;
            }
        }
    }
    free(stack);
    return 0;
oom:
    free(stack);
    return jg_errorf("out of memory in backward");
}

/* needed[i]: node i leads to a captured tensor (or, without captures, to
 * anything).  Computed by iterating to a fixed point in reverse discovery
 * order, which is cheap since most graphs settle in one or two passes. */
static void mark_needed(run_state *rs, int n_capture, jg_tensor *const *capture) {
    if (!n_capture) {
        for (int i = 0; i < rs->n_nodes; i++)
            rs->nodes[i].needed = true;
        return;
    }
    for (int c = 0; c < n_capture; c++) {
        if (capture[c]->grad_fn) {
            int i = map_get(&rs->node_idx, capture[c]->grad_fn);
            if (i >= 0)
                rs->nodes[i].needed = true;
        }
    }
    ptrmap leafset = {0};
    for (int c = 0; c < n_capture; c++)
        if (!capture[c]->grad_fn && map_get(&leafset, capture[c]) < 0)
            map_put(&leafset, capture[c], c);
    bool changed = true;
    while (changed) {
        changed = false;
        for (int i = rs->n_nodes - 1; i >= 0; i--) {
            node_info *ni = &rs->nodes[i];
            if (ni->needed)
                continue;
            for (int k = 0; k < ni->node->n_next && !ni->needed; k++) {
                jg_edge *e = &ni->node->next[k];
                if (e->fn)
                    ni->needed = rs->nodes[map_get(&rs->node_idx, e->fn)].needed;
                else if (e->leaf)
                    ni->needed = map_get(&leafset, e->leaf) >= 0;
            }
            changed |= ni->needed;
        }
    }
    map_free(&leafset);
}

static int route(run_state *rs, jg_node *n, jg_tensor *const *gin) {
    for (int k = 0; k < n->n_next; k++) {
        if (!gin[k])
            continue;
        jg_edge *e = &n->next[k];
        if (e->fn) {
            node_info *dst = &rs->nodes[map_get(&rs->node_idx, e->fn)];
            if (dst->needed && jg_grad_accumulate(&dst->buf[e->nr], jg_retain(gin[k])) < 0)
                return -1;
        } else if (e->leaf) {
            int li = leaf_slot(rs, e->leaf);
            if (li < 0 || jg_grad_accumulate(&rs->leaves[li].grad, jg_retain(gin[k])) < 0)
                return -1;
        }
    }
    return 0;
}

static int run_node(run_state *rs, node_info *ni, bool create_graph) {
    jg_node *n = ni->node;
    bool any = false;
    for (int k = 0; k < n->n_out; k++)
        any |= ni->buf[k] != NULL;
    if (!any)
        return 0; /* nothing reached it: it contributes nothing */
    if (n->has_saved && n->saved_released)
        return jg_errorf("%s", JG_SAVED_FREED_MSG);
    jg_tensor *gin_small[8], **gin = gin_small;
    if (n->n_next > 8 && !(gin = malloc((size_t)n->n_next * sizeof *gin)))
        return jg_errorf("out of memory in backward");
    memset(gin, 0, (size_t)n->n_next * sizeof *gin);
    jg_scope_push();
    bool prev = jg_set_grad_enabled(create_graph);
    int rc = n->vt->apply(n, ni->buf, gin, create_graph);
    if (rc == 0)
        rc = route(rs, n, gin);
    jg_set_grad_enabled(prev);
    jg_scope_pop();
    if (gin != gin_small)
        free(gin);
    ni->ran = true;
    return rc;
}

/* AccumulateGrad: the only place .grad changes. */
static int commit_leaf(jg_tensor *leaf, jg_tensor *g, bool create_graph) {
    bool prev = jg_set_grad_enabled(create_graph);
    int rc = 0;
    if (!leaf->grad) {
        /* A gradient the user can see must not alias anything else. */
        if (!create_graph && g->refcount == 1 && !g->grad_fn && !g->is_view &&
            jg_is_contiguous(g) && g->offset == 0 && g->storage->refcount == 1) {
            leaf->grad = jg_retain(g);
        } else {
            jg_scope_push();
            jg_tensor *c = jg_clone(g);
            leaf->grad = jg_keep(c);
            jg_scope_pop();
            rc = c ? 0 : -1;
        }
    } else if (!create_graph) {
        rc = jg_add_(leaf->grad, g);
    } else {
        jg_scope_push();
        jg_tensor *s = jg_keep(jg_add(leaf->grad, g));
        jg_scope_pop();
        if (s) {
            jg_release(leaf->grad);
            leaf->grad = s;
        } else {
            rc = -1;
        }
    }
    jg_set_grad_enabled(prev);
    return rc;
}

static int check_roots(int n_roots, jg_tensor *const *roots, jg_tensor *const *grads) {
    for (int r = 0; r < n_roots; r++) {
        jg_tensor *t = roots[r];
        if (!t)
            return jg_errorf("backward: output %d is NULL", r);
        if (t->sym)
            return jg_errorf("backward cannot run inside a traced program: differentiate the "
                             "compiled function's outputs instead");
        if (!t->requires_grad)
            return jg_errorf("element %d of tensors does not require grad and does not have a "
                             "grad_fn",
                             r);
        jg_tensor *g = grads ? grads[r] : NULL;
        if (!g) {
            if (t->numel != 1)
                return jg_errorf("grad can be implicitly created only for scalar outputs");
            continue;
        }
        if (g->sym)
            return jg_errorf("backward: gradient %d is a traced tensor", r);
        if (g->ndim != t->ndim || memcmp(g->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim)) {
            char gs[160], ts[160];
            jg_format_shape(gs, sizeof gs, g->ndim, g->shape);
            jg_format_shape(ts, sizeof ts, t->ndim, t->shape);
            return jg_errorf("Mismatch in shape: grad_output[%d] has a shape of %s and output[%d] "
                             "has a shape of %s.",
                             r, gs, r, ts);
        }
    }
    return 0;
}

int jg_engine_run(int n_roots, jg_tensor *const *roots, jg_tensor *const *root_grads,
                  unsigned flags, int n_capture, jg_tensor *const *capture, jg_tensor **captured) {
    if (check_roots(n_roots, roots, root_grads) < 0)
        return -1;
    bool create_graph = flags & JG_CREATE_GRAPH;
    bool retain = (flags & JG_RETAIN_GRAPH) || create_graph;
    run_state rs = {0};
    int rc = discover(&rs, n_roots, roots);
    if (rc < 0)
        goto out;
    mark_needed(&rs, n_capture, capture);
    /* dependencies among needed nodes */
    for (int i = 0; i < rs.n_nodes; i++) {
        jg_node *n = rs.nodes[i].node;
        if (!rs.nodes[i].needed)
            continue;
        for (int k = 0; k < n->n_next; k++)
            if (n->next[k].fn) {
                node_info *d = &rs.nodes[map_get(&rs.node_idx, n->next[k].fn)];
                if (d->needed)
                    d->deps++;
            }
    }
    /* seed the roots' gradients */
    for (int r = 0; r < n_roots && rc == 0; r++) {
        jg_tensor *t = roots[r], *g;
        jg_scope_push();
        bool prev = jg_set_grad_enabled(create_graph);
        if (root_grads && root_grads[r])
            g = root_grads[r]->dtype == t->dtype ? root_grads[r]
                                                 : jg_to_dtype(root_grads[r], t->dtype);
        else
            g = jg_full(t->dtype, t->ndim, t->shape, 1.0);
        jg_set_grad_enabled(prev);
        if (!g) {
            rc = -1;
        } else if (t->grad_fn) {
            node_info *ni = &rs.nodes[map_get(&rs.node_idx, t->grad_fn)];
            if (ni->needed)
                rc = jg_grad_accumulate(&ni->buf[t->output_nr], jg_retain(g));
        } else {
            int li = leaf_slot(&rs, t);
            rc = li < 0 ? -1 : jg_grad_accumulate(&rs.leaves[li].grad, jg_retain(g));
        }
        jg_scope_pop();
    }
    if (rc < 0)
        goto out;
    if (!(rs.heap = malloc((size_t)(rs.n_nodes ? rs.n_nodes : 1) * sizeof *rs.heap))) {
        rc = jg_errorf("out of memory in backward");
        goto out;
    }
    for (int i = 0; i < rs.n_nodes; i++)
        if (rs.nodes[i].needed && rs.nodes[i].deps == 0)
            heap_push(&rs, i);
    /* captured non-leaf tensors read their node's buffer before it runs */
    while (rs.heap_len && rc == 0) {
        int i = heap_pop(&rs);
        node_info *ni = &rs.nodes[i];
        for (int c = 0; c < n_capture; c++)
            if (capture[c]->grad_fn == ni->node && !captured[c] && ni->buf[capture[c]->output_nr])
                captured[c] = jg_retain(ni->buf[capture[c]->output_nr]);
        rc = run_node(&rs, ni, create_graph);
        for (int k = 0; k < ni->node->n_next && rc == 0; k++) {
            jg_node *nx = ni->node->next[k].fn;
            if (!nx)
                continue;
            int j = map_get(&rs.node_idx, nx);
            if (rs.nodes[j].needed && --rs.nodes[j].deps == 0)
                heap_push(&rs, j);
        }
    }
    if (rc < 0)
        goto out;
    if (n_capture) {
        for (int c = 0; c < n_capture; c++) {
            if (capture[c]->grad_fn)
                continue;
            int li = map_get(&rs.leaf_idx, capture[c]);
            if (li >= 0 && rs.leaves[li].grad)
                captured[c] = jg_retain(rs.leaves[li].grad);
        }
    } else {
        /* commit: everything succeeded, now .grad may change */
        for (int i = 0; i < rs.n_leaves && rc == 0; i++)
            if (rs.leaves[i].grad)
                rc = commit_leaf(rs.leaves[i].leaf, rs.leaves[i].grad, create_graph);
    }
    if (rc == 0 && !retain)
        for (int i = 0; i < rs.n_nodes; i++)
            if (rs.nodes[i].ran && rs.nodes[i].node->has_saved) {
                rs.nodes[i].node->vt->release_saved(rs.nodes[i].node);
                rs.nodes[i].node->saved_released = true;
            }
out:
    if (rc < 0)
        for (int c = 0; c < n_capture; c++) {
            jg_release(captured[c]);
            captured[c] = NULL;
        }
    run_free(&rs);
    return rc < 0 ? -1 : 0;
}
