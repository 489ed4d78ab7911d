/* The backward engine: finds the nodes reachable from the roots, runs each
 * once all its gradient contributions have arrived (latest-created first, so
 * sums are formed in the same order as graph autodiff forms them), routes
 * each slot's gradient along its edge, and only at the end touches .grad:
 * a backward that fails leaves every .grad exactly as it was. */
#include "autograd/engine.h"
#include "autograd/hooks.h"
#include "autograd/node.h"
#include "core/iter.h"
#include "core/thread.h"

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

/* ---- per-run state ----
 * One run_state per backward.  Its arrays (node table, edge targets,
 * gradient buffers, heap, maps) are kept per thread between runs and reused,
 * so a backward of a graph like the last one allocates nothing here. */
typedef struct {
    jg_node *node;
    int deps;
    int buf;  /* first of node->n_out gradient accumulators in run_state.grads */
    int next; /* first of node->n_next entries in run_state.next_idx */
    bool needed;
    bool ran;
} node_info;

typedef struct {
    jg_tensor *leaf;
    jg_tensor *grad; /* pending contribution */
    int pending;     /* grad-ready hooks: edges of nodes still to run that lead here */
    bool fired;      /* its gradient is final (its grad-ready hooks ran) */
    int n_in;        /* edges of needed nodes leading here (once rs->fold is 1) */
    bool folded;     /* grad already includes .grad (jg_engine_leaf_grad_folded) */
} leaf_info;

typedef struct {
    jg_backward_callback_fn fn;
    void *user;
} queued_cb;

typedef struct {
    node_info *nodes;
    int n_nodes, cap_nodes;
    jg_tensor **grads; /* gradient accumulators of all nodes */
    int n_grads, cap_grads;
    bool *reached; /* per accumulator: a root or an edge of a node that ran leads to it */
    int cap_reached;
    int *next_idx; /* per edge: index of the edge's node in nodes[], or -1 */
    int n_next, cap_next;
    leaf_info *leaves;
    int n_leaves, cap_leaves;
    ptrmap leaf_idx;
    int *heap;
    int heap_len, cap_heap;
    int *stack; /* discovery's */
    int cap_stack;
    int n_capture; /* this run's captured tensors (for splice) */
    jg_tensor *const *capture;
    bool hooks_on;     /* some tensor has gradient hooks and this run writes .grad */
    bool create_graph; /* hooks run in this grad mode (PyTorch: no_grad unless create_graph) */
    int fold;          /* jg_engine_leaf_grad: 0 not asked yet, 1 allowed (n_in counted), -1 not */
    queued_cb *cbs;    /* jg_backward_queue_callback's */
    int n_cbs, cap_cbs;
    bool node_hooks; /* some node has tensor hooks: check each node before it runs */
    jg_tensor **ret; /* retain_grad: (non-leaf, gradient) pairs to commit, retained */
    int n_ret, cap_ret;
} run_state;

static __attribute__((noinline)) int grow_slow(void **p, int *cap, int need, size_t elem,
                                               int first) {
    int c = *cap ? *cap : first;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, (size_t)c * elem);
    if (!q)
        return jg_errorf("out of memory in backward");
    *p = q;
    *cap = c;
    return 0;
}

static inline int grow(void **p, int *cap, int need, size_t elem, int first) {
    return need <= *cap ? 0 : grow_slow(p, cap, need, elem, first);
}

static void map_clear(ptrmap *m) {
    if (m->len)
        memset(m->keys, 0, m->cap * sizeof *m->keys);
    m->len = 0;
}

static int add_node(run_state *rs, jg_node *n) {
    int n_out = n->n_out;
    if (grow((void **)&rs->nodes, &rs->cap_nodes, rs->n_nodes + 1, sizeof *rs->nodes, 64) < 0 ||
        grow((void **)&rs->grads, &rs->cap_grads, rs->n_grads + n_out, sizeof *rs->grads, 128) <
            0 ||
        grow((void **)&rs->reached, &rs->cap_reached, rs->n_grads + n_out, sizeof *rs->reached,
             128) < 0 ||
        grow((void **)&rs->next_idx, &rs->cap_next, rs->n_next + n->n_next, sizeof *rs->next_idx,
             128) < 0)
        return -1;
    n->run_idx = rs->n_nodes;
    if (n_out == 1) { /* (the loop would become a memset call) */
        rs->grads[rs->n_grads] = NULL;
        rs->reached[rs->n_grads] = false;
    } else {
        for (int k = 0; k < n_out; k++) {
            rs->grads[rs->n_grads + k] = NULL;
            rs->reached[rs->n_grads + k] = false;
        }
    }
    rs->nodes[rs->n_nodes] = (node_info){n, 0, rs->n_grads, rs->n_next, false, false};
    rs->n_grads += n_out;
    rs->n_next += n->n_next;
    return rs->n_nodes++;
}

/* n's index in this run, or -1 if discovery has not found it.  The node's
 * run_idx is only a hint (another run -- a nested backward, or an earlier one
 * -- may have set it), so it is checked against the table.  Lookups happen
 * before any node runs, so a nested run cannot overwrite the hint of a node
 * this run still has to look up. */
static inline int node_index(const run_state *rs, const jg_node *n) {
    int i = n->run_idx;
    return i >= 0 && i < rs->n_nodes && rs->nodes[i].node == n ? i : -1;
}

static inline jg_tensor **node_buf(run_state *rs, const node_info *ni) {
    return rs->grads + ni->buf;
}

/* Where a gradient sent along e goes: e itself, or where the redirect
 * hooks of the nodes on the way send it (borrowed). */
static inline jg_edge resolve_edge(jg_edge e) {
    jg_edge to;
    while (e.fn && e.fn->vt->redirect && e.fn->vt->redirect(e.fn, e.nr, &to))
        e = to;
    return e;
}

/* The node that receives output *nr of fn's gradient (a root's or a
 * captured tensor's), following redirects that lead to nodes. */
static inline jg_node *resolve(jg_node *fn, int *nr) {
    jg_edge to;
    while (fn && fn->vt->redirect && fn->vt->redirect(fn, *nr, &to) && to.fn) {
        fn = to.fn;
        *nr = to.nr;
    }
    return fn;
}

static int leaf_slot(run_state *rs, jg_tensor *leaf) {
    int i = map_get(&rs->leaf_idx, leaf);
    if (i >= 0)
        return i;
    if (grow((void **)&rs->leaves, &rs->cap_leaves, rs->n_leaves + 1, sizeof *rs->leaves, 16) < 0)
        return -1;
    if (map_put(&rs->leaf_idx, leaf, rs->n_leaves) < 0)
        return -1;
    rs->leaves[rs->n_leaves] = (leaf_info){leaf, NULL, 0, false, 0, false};
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

static void run_free_arrays(run_state *rs) {
    free(rs->nodes);
    free(rs->grads);
    free(rs->reached);
    free(rs->next_idx);
    free(rs->leaves);
    free(rs->heap);
    free(rs->stack);
    free(rs->cbs);
    free(rs->ret);
    map_free(&rs->leaf_idx);
    free(rs);
}

/* The thread's spare run_state (NULL while a run uses it: a backward inside
 * a backward, e.g. from a custom function, gets a fresh one). */
static _Thread_local run_state *spare_state;
static _Thread_local bool spare_registered;

/* At thread exit. */
static void spare_destroy(void) {
    if (spare_state) {
        run_free_arrays(spare_state);
        spare_state = NULL;
    }
    spare_registered = false;
}

static run_state *run_acquire(void) {
    run_state *rs = spare_state;
    if (rs) {
        spare_state = NULL;
        return rs;
    }
    return calloc(1, sizeof *rs);
}

/* Drops the run's references and gives its arrays back to the thread (or
 * frees them: a nested run's, or a very large graph's). */
static void run_release(run_state *rs) {
    for (int i = 0; i < rs->n_grads; i++)
        jg_release(rs->grads[i]);
    for (int i = 0; i < rs->n_leaves; i++)
        jg_release(rs->leaves[i].grad);
    for (int i = 0; i < rs->n_ret; i++)
        jg_release(rs->ret[i]);
    rs->n_ret = 0;
    if (spare_state || rs->cap_nodes > (1 << 16)) {
        run_free_arrays(rs);
        return;
    }
    if (!spare_registered && !(spare_registered = jg_at_thread_exit(spare_destroy))) {
        run_free_arrays(rs);
        return;
    }
    rs->n_nodes = rs->n_grads = rs->n_next = rs->n_leaves = rs->heap_len = rs->n_cbs = 0;
    rs->hooks_on = rs->node_hooks = false;
    rs->fold = 0;
    map_clear(&rs->leaf_idx);
    spare_state = rs;
}

/* Adds n (if new) and every node reachable from it (iteratively), and fills
 * in the edge targets (next_idx) of the nodes it adds.  Every edge counts in
 * its target's deps (mark_needed recounts).  Returns n's index or -1. */
static int discover_from(run_state *rs, jg_node *n, bool count_deps) {
    int i = node_index(rs, n);
    if (i >= 0)
        return i;
    if ((i = add_node(rs, n)) < 0 ||
        grow((void **)&rs->stack, &rs->cap_stack, 1, sizeof *rs->stack, 64) < 0)
        return -1;
    int sp = 0;
    rs->stack[sp++] = i;
    while (sp) {
        int ci = rs->stack[--sp];
        jg_node *cur = rs->nodes[ci].node;
        for (int k = 0; k < cur->n_next; k++) {
            jg_node *nx = resolve_edge(cur->next[k]).fn;
            int j = nx ? node_index(rs, nx) : -1;
            if (nx && j < 0) {
                if ((j = add_node(rs, nx)) < 0 ||
                    grow((void **)&rs->stack, &rs->cap_stack, sp + 1, sizeof *rs->stack, 64) < 0)
                    return -1;
                rs->stack[sp++] = j;
            }
            rs->next_idx[rs->nodes[ci].next + k] = j;
            if (j >= 0 && count_deps)
                rs->nodes[j].deps++;
        }
    }
    return i;
}

/* Finds every node reachable from the roots. */
static int discover(run_state *rs, int n_roots, jg_tensor *const *roots) {
    for (int r = 0; r < n_roots; r++) {
        int nr = roots[r]->output_nr;
        jg_node *n = resolve(roots[r]->grad_fn, &nr);
        if (n && discover_from(rs, n, true) < 0)
            return -1;
    }
    return 0;
}

/* needed[i] for the nodes from `from` on: node i leads to a captured
 * tensor (or, without captures, to anything).  Computed by iterating to a
 * fixed point in reverse discovery order, which is cheap since most graphs
 * settle in one or two passes.  from == 0: the whole run (discovery counted
 * every edge in deps; with captures they are recounted); from > 0: nodes a
 * splice added (discovered without counting), whose edges to needed nodes
 * are counted here. */
static void mark_needed(run_state *rs, int from) {
    int n_capture = rs->n_capture;
    jg_tensor *const *capture = rs->capture;
    if (!n_capture) { /* all needed */
        for (int i = from; i < rs->n_nodes; i++)
            rs->nodes[i].needed = true;
        for (int i = from; from > 0 && i < rs->n_nodes; i++) {
            const int *nx = rs->next_idx + rs->nodes[i].next;
            for (int k = 0, nn = rs->nodes[i].node->n_next; k < nn; k++)
                if (nx[k] >= 0)
                    rs->nodes[nx[k]].deps++;
        }
        return;
    }
    for (int c = 0; c < n_capture; c++) {
        if (capture[c]->grad_fn) {
            int nr = capture[c]->output_nr;
            int i = node_index(rs, resolve(capture[c]->grad_fn, &nr));
            if (i >= from)
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
        for (int i = rs->n_nodes - 1; i >= from; i--) {
            node_info *ni = &rs->nodes[i];
            if (ni->needed)
                continue;
            for (int k = 0; k < ni->node->n_next && !ni->needed; k++) {
                jg_edge e = resolve_edge(ni->node->next[k]);
                if (e.fn)
                    ni->needed = rs->nodes[rs->next_idx[ni->next + k]].needed;
                else if (e.leaf)
                    ni->needed = map_get(&leafset, e.leaf) >= 0;
            }
            changed |= ni->needed;
        }
    }
    map_free(&leafset);
    /* dependencies count only edges between needed nodes */
    for (int i = from; from == 0 && i < rs->n_nodes; i++)
        rs->nodes[i].deps = 0;
    for (int i = from; i < rs->n_nodes; i++) {
        node_info *ni = &rs->nodes[i];
        if (!ni->needed)
            continue;
        const int *nx = rs->next_idx + ni->next;
        for (int k = 0, nn = ni->node->n_next; k < nn; k++)
            if (nx[k] >= 0 && rs->nodes[nx[k]].needed) /* (edges to nodes: nx >= 0) */
                rs->nodes[nx[k]].deps++;
    }
}

/* Hands each slot's gradient to the accumulator its edge names: the next
 * node's input buffer or a leaf's pending gradient (the slot rule shared with
 * graph autodiff, jg_slots_accumulate). */
/* edge_reached[k] for node ni's edges: NULL when every edge is (the rule for
 * all but compiled nodes), else er (n_next entries, or a new array). */
static const bool *edges_reached(run_state *rs, const node_info *ni, bool *small, int n_small) {
    const jg_node *n = ni->node;
    if (!n->vt->edges_reached || !n->n_next)
        return NULL;
    bool *er = n->n_next <= n_small ? small : malloc((size_t)n->n_next * sizeof *er);
    if (!er)
        return NULL; /* out of memory: over-approximate (every edge) */
    n->vt->edges_reached(n, node_buf(rs, ni), rs->reached + ni->buf, er);
    return er;
}

static int route(run_state *rs, const node_info *src, jg_tensor *const *gin) {
    jg_node *n = src->node;
    bool er_small[16];
    const bool *er = edges_reached(rs, src, er_small, 16);
    int li_small[8], *li = li_small;
    jg_tensor **t_small[8], ***targets = t_small;
    if (n->n_next > 8) {
        li = malloc(sizeof *li * (size_t)n->n_next);
        targets = malloc(sizeof *targets * (size_t)n->n_next);
        if (!li || !targets) {
            if (li != li_small)
                free(li);
            if (targets != t_small)
                free(targets);
            return jg_errorf("out of memory in backward");
        }
    }
    int rc = 0;
    /* leaf slots first: finding one may grow the leaf array */
    for (int k = 0; k < n->n_next && rc == 0; k++) {
        jg_edge e = gin[k] ? resolve_edge(n->next[k]) : (jg_edge){0};
        if ((li[k] = !e.fn && e.leaf ? leaf_slot(rs, e.leaf) : -1) < -1)
            rc = -1;
        else if (li[k] >= 0 && rs->leaves[li[k]].fired)
            rc = jg_errorf("internal error: a gradient reached a leaf after its gradient-ready "
                           "hooks ran");
        else if (li[k] >= 0 && rs->leaves[li[k]].folded && rs->leaves[li[k]].grad)
            rc = jg_errorf("internal error: a second gradient reached a leaf whose .grad was "
                           "folded into the first");
    }
    for (int k = 0; k < n->n_next && rc == 0; k++) {
        jg_edge e = resolve_edge(n->next[k]);
        targets[k] = NULL;
        if (e.fn) {
            node_info *dst = &rs->nodes[rs->next_idx[src->next + k]];
            if (dst->needed) {
                targets[k] = &node_buf(rs, dst)[e.nr];
                if (!er || er[k])
                    rs->reached[dst->buf + e.nr] = true;
            }
        } else if (li[k] >= 0) {
            targets[k] = &rs->leaves[li[k]].grad;
        }
    }
    if (rc == 0)
        rc = jg_slots_accumulate(n->n_next, gin, targets);
    if (li != li_small)
        free(li);
    if (targets != t_small)
        free(targets);
    if (er && er != er_small)
        free((void *)er);
    return rc;
}

/* A node that contributes nothing: the nodes its edges lead to are still
 * part of the backward graph. */
static void skip_node(run_state *rs, const node_info *ni) {
    const jg_node *n = ni->node;
    const int *nx = rs->next_idx + ni->next;
    bool er_small[16];
    const bool *er = edges_reached(rs, ni, er_small, 16);
    for (int k = 0; k < n->n_next; k++)
        if (nx[k] >= 0 && rs->nodes[nx[k]].needed && (!er || er[k]))
            rs->reached[rs->nodes[nx[k]].buf + resolve_edge(n->next[k]).nr] = true;
    if (er && er != er_small)
        free((void *)er);
}

/* After node idx answered JG_NODE_SPLICED: the nodes its outputs now stand
 * at (and what they reach) join this backward, its output gradients move
 * there, and they run in seq order among the rest, as if they had been
 * part of the graph from the start. */
static int splice(run_state *rs, int idx) {
    jg_node *n = rs->nodes[idx].node;
    int from = rs->n_nodes, n_out = n->n_out, rc = 0;
    int small[2 * 16], *tgt = n_out <= 16 ? small : malloc(2 * sizeof(int) * (size_t)n_out);
    if (!tgt)
        return jg_errorf("out of memory in backward");
    int *tnr = tgt + n_out;
    for (int k = 0; k < n_out && rc == 0; k++) {
        node_info *ni = &rs->nodes[idx];
        tgt[k] = -1;
        if (!rs->grads[ni->buf + k] && !rs->reached[ni->buf + k])
            continue;
        int nr = k;
        jg_node *t = resolve(n, &nr);
        if (t == n)
            rc = jg_errorf("internal error: %s spliced, but its output %d stands nowhere",
                           n->vt->name(n), k);
        else if ((tgt[k] = discover_from(rs, t, false)) < 0)
            rc = -1;
        tnr[k] = nr;
    }
    if (rc == 0) {
        mark_needed(rs, from);
        rc = grow((void **)&rs->heap, &rs->cap_heap, rs->n_nodes, sizeof *rs->heap, 64);
    }
    for (int k = 0; k < n_out && rc == 0; k++) {
        if (tgt[k] < 0 || !rs->nodes[tgt[k]].needed)
            continue;
        node_info *dst = &rs->nodes[tgt[k]];
        if (dst->ran) {
            rc = jg_errorf("internal error: %s spliced into a node that already ran",
                           n->vt->name(n));
            break;
        }
        rs->reached[dst->buf + tnr[k]] = true;
        jg_tensor *g = rs->grads[rs->nodes[idx].buf + k];
        if (g)
            rc = jg_grad_accumulate(&rs->grads[dst->buf + tnr[k]], jg_retain(g));
    }
    for (int i = from; i < rs->n_nodes && rc == 0; i++)
        if (rs->nodes[i].needed && rs->nodes[i].deps == 0)
            heap_push(rs, i);
    if (tgt != small)
        free(tgt);
    return rc;
}

/* The node whose apply is running (jg_engine_edge_acc), per thread; nested
 * runs save and restore it. */
static _Thread_local run_state *applying_rs;
static _Thread_local int applying_idx = -1;

int jg_engine_edge_acc(const jg_node *n, int k, const void **target, jg_tensor ***acc) {
    run_state *rs = applying_rs;
    if (!rs || applying_idx < 0 || rs->nodes[applying_idx].node != n || k < 0 || k >= n->n_next)
        return -1;
    const node_info *src = &rs->nodes[applying_idx];
    jg_edge e = resolve_edge(n->next[k]);
    *target = NULL;
    *acc = NULL;
    if (e.fn) {
        node_info *dst = &rs->nodes[rs->next_idx[src->next + k]];
        if (dst->needed) {
            *acc = &node_buf(rs, dst)[e.nr];
            *target = *acc;
        }
    } else if (e.leaf) {
        int li = map_get(&rs->leaf_idx, e.leaf);
        *target = e.leaf;
        if (li >= 0)
            *acc = &rs->leaves[li].grad;
    }
    return 0;
}

/* Whether this run lets a node fold .grad in (see engine.h); counts each
 * leaf's incoming edges the first time it is asked. */
static bool fold_allowed(run_state *rs) {
    if (rs->fold)
        return rs->fold > 0;
    rs->fold = -1;
    if (rs->hooks_on || rs->create_graph || rs->n_capture || rs->n_cbs)
        return false;
    for (int i = 0; i < rs->n_nodes; i++)
        if (rs->nodes[i].needed &&
            !(rs->nodes[i].node->vt->pure && rs->nodes[i].node->vt->pure(rs->nodes[i].node)))
            return false;
    for (int i = 0; i < rs->n_leaves; i++)
        rs->leaves[i].n_in = 0;
    for (int i = 0; i < rs->n_nodes; i++) {
        const jg_node *n = rs->nodes[i].node;
        for (int k = 0; rs->nodes[i].needed && k < n->n_next; k++) {
            jg_edge e = resolve_edge(n->next[k]);
            int li = -1;
            if (!e.fn && e.leaf && (li = leaf_slot(rs, e.leaf)) < 0) {
                jg_clear_error(); /* out of memory: just no folding */
                return false;
            }
            if (li >= 0)
                rs->leaves[li].n_in++;
        }
    }
    rs->fold = 1;
    return true;
}

/* The leaf slot of edge k of the node being applied when its .grad may be
 * folded in (engine.h), else -1. */
static int fold_slot(const jg_node *n, int k) {
    run_state *rs = applying_rs;
    if (!rs || applying_idx < 0 || rs->nodes[applying_idx].node != n || k < 0 || k >= n->n_next ||
        !fold_allowed(rs))
        return -1;
    jg_edge e = resolve_edge(n->next[k]);
    int li = !e.fn && e.leaf ? map_get(&rs->leaf_idx, e.leaf) : -1;
    if (li < 0)
        return -1;
    const leaf_info *l = &rs->leaves[li];
    int mine = 0; /* n's own edges to the leaf */
    for (int j = 0; j < n->n_next; j++) {
        jg_edge ej = resolve_edge(n->next[j]);
        mine += !ej.fn && ej.leaf == e.leaf;
    }
    const jg_tensor *g = l->leaf->grad;
    if (l->grad || l->folded || l->n_in != mine || !l->leaf->requires_grad || !g ||
        g->refcount != 1 || g->requires_grad || g->grad_fn || g->is_view || g->sym ||
        g->offset != 0 || !g->storage || g->storage->refcount != 1 ||
        g->storage->kind == JG_STORAGE_EXTERNAL || !jg_is_contiguous(g) ||
        g->dtype != l->leaf->dtype || g->ndim != l->leaf->ndim ||
        memcmp(g->shape, l->leaf->shape, sizeof(int64_t) * (size_t)g->ndim))
        return -1;
    return li;
}

jg_tensor *jg_engine_leaf_grad(const jg_node *n, int k) {
    int li = fold_slot(n, k);
    return li < 0 ? NULL : applying_rs->leaves[li].leaf->grad;
}

void jg_engine_leaf_grad_folded(const jg_node *n, int k) {
    run_state *rs = applying_rs;
    JG_ASSERT(rs && applying_idx >= 0 && rs->nodes[applying_idx].node == n && rs->fold > 0 &&
              k >= 0 && k < n->n_next);
    jg_edge e = resolve_edge(n->next[k]);
    int li = !e.fn && e.leaf ? map_get(&rs->leaf_idx, e.leaf) : -1;
    JG_ASSERT(li >= 0 && !rs->leaves[li].grad);
    rs->leaves[li].folded = true;
}

/* ---- gradient hooks (autograd/hooks.c) ---- */

/* The run that jg_backward_set_grad / jg_backward_queue_callback act on. */
static _Thread_local run_state *current_run;

/* Counts, for each leaf with hooks, the edges of needed nodes [from, n_nodes)
 * that lead to it: its gradient is final once they all ran. */
static int count_hooked(run_state *rs, int from) {
    for (int i = from; i < rs->n_nodes; i++) {
        const jg_node *n = rs->nodes[i].node;
        if (!rs->nodes[i].needed)
            continue;
        for (int k = 0; k < n->n_next; k++) {
            jg_edge e = resolve_edge(n->next[k]);
            if (!e.fn && e.leaf && e.leaf->has_grad_hooks) {
                int li = leaf_slot(rs, e.leaf);
                if (li < 0)
                    return -1;
                rs->leaves[li].pending++;
            }
        }
    }
    return 0;
}

/* Leaf li's gradient is final: its tensor hooks may replace it, then its
 * grad-ready hooks see it. */
static int leaf_ready(run_state *rs, int li) {
    if (rs->leaves[li].fired)
        return 0;
    rs->leaves[li].fired = true;
    jg_tensor *leaf = rs->leaves[li].leaf, *g = rs->leaves[li].grad;
    if (!g || !leaf->requires_grad || !leaf->has_grad_hooks)
        return 0;
    /* (a hook may add leaves to the run: no pointer into leaves[] is held) */
    bool prev = jg_set_grad_enabled(rs->create_graph);
    int rc = 0;
    if (jg_tensor_hooks_has(leaf)) {
        jg_retain(g);
        rc = jg_tensor_hooks_run(leaf, 0, &g, NULL, NULL);
        jg_release(rs->leaves[li].grad);
        rs->leaves[li].grad = g;
    }
    if (rc == 0) {
        g = jg_retain(rs->leaves[li].grad);
        rc = jg_grad_hooks_run(leaf, JG_HOOK_READY, g);
        jg_release(g);
    }
    jg_set_grad_enabled(prev);
    return rc;
}

/* retain_grad's part of a node's hooks: the gradient t's .grad gets at
 * the commit. */
static int retain_cb(void *ctx, jg_tensor *t, jg_tensor *g) {
    run_state *rs = ctx;
    if (grow((void **)&rs->ret, &rs->cap_ret, rs->n_ret + 2, sizeof *rs->ret, 8) < 0)
        return -1;
    rs->ret[rs->n_ret++] = jg_retain(t);
    rs->ret[rs->n_ret++] = jg_retain(g);
    return 0;
}

/* Whether a gradient node idx sends on reaches a captured tensor (PyTorch
 * 1.13 runs only such nodes in autograd.grad: a node whose output is
 * captured but that leads to no other capture is not run, nor its hooks). */
static bool leads_to_capture(const run_state *rs, int idx) {
    const jg_node *n = rs->nodes[idx].node;
    for (int k = 0; k < n->n_next; k++) {
        jg_edge e = resolve_edge(n->next[k]);
        int j = rs->next_idx[rs->nodes[idx].next + k];
        if (e.fn && j >= 0 && rs->nodes[j].needed)
            return true;
        for (int c = 0; !e.fn && e.leaf && c < rs->n_capture; c++)
            if (rs->capture[c] == e.leaf)
                return true;
    }
    return false;
}

/* Node idx is about to run: every gradient of its outputs is final, so the
 * tensor hooks of the non-leaves it made see them (PyTorch's tensor
 * pre-hooks on grad_fn) and may replace them. */
static int node_tensor_hooks(run_state *rs, int idx) {
    jg_node *n = rs->nodes[idx].node;
    if (!jg_tensor_hooks_has(n) || (rs->n_capture && !leads_to_capture(rs, idx)))
        return 0;
    bool prev = jg_set_grad_enabled(rs->create_graph);
    int rc = 0;
    for (int k = 0; k < n->n_out && rc == 0; k++) {
        int b = rs->nodes[idx].buf + k;
        jg_tensor *g = rs->grads[b];
        if (!g)
            continue; /* (no gradient reached this output: nothing to see) */
        rs->grads[b] = NULL;
        rc = jg_tensor_hooks_run(n, k, &g, retain_cb, rs);
        rs->grads[rs->nodes[idx].buf + k] = g;
    }
    jg_set_grad_enabled(prev);
    return rc;
}

/* Node idx ran (or was passed over): the leaves its edges lead to have one
 * contribution fewer to wait for. */
static int node_done(run_state *rs, int idx) {
    const jg_node *n = rs->nodes[idx].node;
    for (int k = 0; k < n->n_next; k++) {
        jg_edge e = resolve_edge(n->next[k]);
        if (e.fn || !e.leaf || !e.leaf->has_grad_hooks)
            continue;
        int li = map_get(&rs->leaf_idx, e.leaf);
        if (li >= 0 && rs->leaves[li].pending > 0 && --rs->leaves[li].pending == 0 &&
            leaf_ready(rs, li) < 0)
            return -1;
    }
    return 0;
}

/* Runs the queued callbacks once (status 0: may fail the run; status -1:
 * the run failed, the error text is kept). */
static int run_callbacks(run_state *rs, int status) {
    int rc = 0;
    for (int i = 0; i < rs->n_cbs; i++) {
        queued_cb cb = rs->cbs[i];
        if (status < 0) {
            char *keep = strdup(jg_last_error());
            cb.fn(cb.user, -1);
            if (keep) {
                jg_errorf("%s", keep);
                free(keep);
            }
        } else if (rc == 0) {
            rc = cb.fn(cb.user, 0) < 0 ? -1 : 0;
        } else {
            /* an earlier callback failed: the rest learn of it */
            char *keep = strdup(jg_last_error());
            cb.fn(cb.user, -1);
            if (keep) {
                jg_errorf("%s", keep);
                free(keep);
            }
        }
    }
    rs->n_cbs = 0;
    return rc;
}

int jg_backward_queue_callback(jg_backward_callback_fn fn, void *user) {
    run_state *rs = current_run;
    if (!fn)
        return jg_errorf("jg_backward_queue_callback: fn is NULL");
    if (!rs || !rs->hooks_on)
        return jg_errorf("jg_backward_queue_callback: no backward with hooks is running");
    if (grow((void **)&rs->cbs, &rs->cap_cbs, rs->n_cbs + 1, sizeof *rs->cbs, 4) < 0)
        return jg_errorf("out of memory in jg_backward_queue_callback");
    rs->cbs[rs->n_cbs++] = (queued_cb){fn, user};
    return 0;
}

int jg_backward_set_grad(jg_tensor *t, jg_tensor *grad) {
    run_state *rs = current_run;
    if (!rs || !rs->hooks_on)
        return jg_errorf("jg_backward_set_grad: no backward with hooks is running");
    if (!t || t->grad_fn)
        return jg_errorf("jg_backward_set_grad: not a leaf");
    if (grad && (grad->sym || grad->dtype != t->dtype || grad->ndim != t->ndim ||
                 memcmp(grad->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim))) {
        char gs[160], ts[160];
        jg_describe(grad, gs, sizeof gs);
        jg_describe(t, ts, sizeof ts);
        return jg_errorf("jg_backward_set_grad: gradient %s does not match the leaf %s", gs, ts);
    }
    int li = leaf_slot(rs, t);
    if (li < 0)
        return -1;
    if (rs->leaves[li].pending > 0)
        return jg_errorf("jg_backward_set_grad: the leaf's gradient is not final yet");
    rs->leaves[li].fired = true;
    jg_release(rs->leaves[li].grad);
    rs->leaves[li].grad = jg_retain(grad);
    return 0;
}

static int run_node(run_state *rs, int idx, bool create_graph) {
    node_info *ni = &rs->nodes[idx];
    jg_node *n = ni->node;
    jg_tensor **buf = node_buf(rs, ni);
    bool any = false, reached = false;
    for (int k = 0; k < n->n_out; k++) {
        any |= buf[k] != NULL;
        reached |= rs->reached[ni->buf + k];
    }
    /* Found only along edges of a compiled call that its reached outputs do
     * not lead to (cnode_edges_reached), directly or through such nodes:
     * not part of eager's backward graph, so it neither runs (a custom
     * function would run on zeros) nor passes "reached" on. */
    if (!any && !reached)
        return 0;
    /* A node of the backward graph counts as run even when it is skipped:
     * like PyTorch, a backward without JG_RETAIN_GRAPH frees its saved
     * tensors too. */
    ni->ran = true;
    if (!any && !n->vt->run_without_grads) {
        skip_node(rs, ni); /* no gradient reached it */
        return 0;
    }
    /* (without gradients, apply decides: it may have nothing to do, and
     * reading a freed saved tensor fails there with the same message) */
    if (any && n->has_saved && n->saved_released)
        return jg_errorf("%s", JG_SAVED_FREED_MSG);
    jg_tensor *gin_small[8] = {0}, **gin = gin_small;
    if (n->n_next > 8 && !(gin = calloc((size_t)n->n_next, sizeof *gin)))
        return jg_errorf("out of memory in backward");
    size_t mark = jg_scope_mark(); /* (the run loop's scope is open) */
    bool prev = jg_grad_mode;
    jg_grad_mode = create_graph;
    run_state *prev_rs = applying_rs;
    int prev_idx = applying_idx;
    applying_rs = rs;
    applying_idx = idx;
    int rc = n->vt->apply(n, buf, rs->reached + ni->buf, gin, create_graph);
    applying_rs = prev_rs;
    applying_idx = prev_idx;
    if (rc == JG_NODE_SPLICED) {
        rc = splice(rs, idx);
    } else if (rc > 0) {
        skip_node(rs, &rs->nodes[idx]);
        rc = 0;
    } else if (rc == 0) {
        rc = route(rs, &rs->nodes[idx], gin); /* (leaf_slot never moves nodes[]) */
    }
    jg_grad_mode = prev;
    jg_scope_release_to(mark);
    if (gin != gin_small)
        free(gin);
    return rc;
}

/* AccumulateGrad: the only place .grad changes.  folded: g is .grad plus
 * this backward's sum already (jg_engine_leaf_grad), and replaces .grad,
 * which nothing else references: as if added in place (its version moves
 * on as jg_add_ would move it).  (Should anything have taken a reference
 * to .grad since, the sum is copied into it instead.) */
static _Thread_local int64_t grad_copies;

int64_t jg_engine_grad_copies(void) {
    return grad_copies;
}

static int commit_leaf(jg_tensor *leaf, jg_tensor *g, bool create_graph, bool folded) {
    bool prev = jg_set_grad_enabled(create_graph);
    int rc = 0;
    JG_ASSERT(!folded || (!create_graph && leaf->grad));
    if (folded && (leaf->grad->refcount != 1 || leaf->grad->storage->refcount != 1)) {
        jg_copy_data(leaf->grad, g);
        leaf->grad->storage->version++;
    } else if (folded) {
        jg_tensor *n = g;
        if (!g->grad_fn && jg_tensor_claim(g)) {
            jg_retain(g);
        } else {
            grad_copies++;
            jg_scope_push();
            n = jg_keep(jg_clone(g));
            jg_scope_pop();
        }
        if (n) {
            n->storage->version = leaf->grad->storage->version + 1;
            jg_release(leaf->grad);
            leaf->grad = n;
        }
        rc = n ? 0 : -1;
    } else if (!leaf->grad) {
        /* A gradient the user can see must not alias anything else. */
        if (!create_graph && !g->grad_fn && jg_tensor_claim(g)) {
            leaf->grad = jg_retain(g);
        } else {
            grad_copies++;
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

static int check_roots(int n_roots, jg_tensor *const *roots, jg_tensor *const *grads,
                       bool no_grad_roots) {
    for (int r = 0; r < n_roots; r++) {
        jg_tensor *t = roots[r];
        if (!t)
            return jg_errorf("backward: output %d is NULL", r);
        if (t->sym || jg_trace_capture) {
            /* a graph break: without fullgraph the program runs eagerly */
            const char *why = "backward() or autograd.grad() inside the program cannot be traced "
                              "yet: differentiate the compiled function's outputs instead";
            if (jg_hooks.on_untraceable)
                jg_hooks.on_untraceable(why);
            return jg_errorf("%s", why);
        }
        if (!t->requires_grad)
            return jg_errorf("element %d of tensors does not require grad and does not have a "
                             "grad_fn",
                             r);
        jg_tensor *g = grads ? grads[r] : NULL;
        if (!g) {
            if (no_grad_roots)
                continue;
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
                  unsigned flags, int n_capture, jg_tensor *const *capture_t,
                  jg_tensor **captured) {
    jg_tensor *const *capture = capture_t;
    bool no_grad_roots = flags & JG_ENGINE_NO_GRAD_ROOTS;
    bool concrete = n_roots > 0 && roots;
    for (int r = 0; r < n_roots && concrete; r++)
        concrete =
            roots[r] && !roots[r]->sym && (!root_grads || !root_grads[r] || !root_grads[r]->sym);
    if (concrete && jg_trace_capture && jg_hooks.on_symbolic_read &&
        jg_hooks.on_symbolic_read(NULL, "backward() of a computed tensor (it runs eagerly)")) {
        /* a program run in pieces differentiates what an earlier piece
         * computed: the piece before this point ran, so the backward runs
         * here, eagerly, as in eager mode; then the next piece */
        uint64_t saved = jg_hooks.trace_suspend();
        int rc = jg_engine_run(n_roots, roots, root_grads, flags, n_capture, capture_t, captured);
        jg_hooks.trace_resume(saved);
        return rc;
    }
    if (n_roots == 1 && roots && roots[0] && roots[0]->sym && !n_capture && !no_grad_roots &&
        jg_hooks.trace_backward) { /* traced into the program's graph (trace/backward.c) */
        int rc = jg_hooks.trace_backward(roots[0], root_grads ? root_grads[0] : NULL, flags);
        if (rc <= 0)
            return rc;
    }
    if (check_roots(n_roots, roots, root_grads, no_grad_roots) < 0)
        return -1;
    bool create_graph = flags & JG_CREATE_GRAPH;
    bool retain = (flags & JG_RETAIN_GRAPH) || create_graph;
    run_state *rs = run_acquire();
    if (!rs)
        return jg_errorf("out of memory in backward");
    run_state *prev_run = current_run;
    current_run = rs;
    int rc = discover(rs, n_roots, roots);
    if (rc < 0)
        goto out;
    rs->n_capture = n_capture;
    rs->capture = capture;
    mark_needed(rs, 0);
    if (jg_node_hooks_any())
        jg_retain_grad_relocate();
    rs->node_hooks = jg_node_hooks_any();
    rs->hooks_on = !n_capture && jg_grad_hooks_any();
    rs->create_graph = create_graph;
    bool hooks_prev_mode = jg_is_grad_enabled();
    if (rs->hooks_on && (rc = count_hooked(rs, 0)) < 0)
        goto out;
    /* expected hooks: the leaves this backward will compute a gradient for */
    if (rs->hooks_on)
        jg_set_grad_enabled(create_graph);
    for (int i = 0; rs->hooks_on && i < rs->n_leaves && rc == 0; i++) {
        jg_tensor *leaf = rs->leaves[i].leaf;
        if (rs->leaves[i].pending > 0 && leaf->requires_grad &&
            jg_grad_hooks_has(leaf, JG_HOOK_EXPECTED))
            rc = jg_grad_hooks_run(leaf, JG_HOOK_EXPECTED, NULL);
    }
    if (rs->hooks_on)
        jg_set_grad_enabled(hooks_prev_mode);
    if (rc < 0)
        goto out;
    /* seed the roots' gradients */
    for (int r = 0; r < n_roots && rc == 0; r++) {
        jg_tensor *t = roots[r], *g;
        int nr = t->output_nr;
        jg_node *fn = resolve(t->grad_fn, &nr);
        if (no_grad_roots && !(root_grads && root_grads[r])) {
            if (fn) {
                node_info *ni = &rs->nodes[node_index(rs, fn)];
                if (ni->needed)
                    rs->reached[ni->buf + nr] = true;
            }
            continue;
        }
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
        } else if (fn) {
            node_info *ni = &rs->nodes[node_index(rs, fn)];
            if (ni->needed) {
                rs->reached[ni->buf + nr] = true;
                rc = jg_grad_accumulate(&node_buf(rs, ni)[nr], jg_retain(g));
            }
        } else {
            int li = leaf_slot(rs, t);
            rc = li < 0 ? -1 : jg_grad_accumulate(&rs->leaves[li].grad, jg_retain(g));
        }
        jg_scope_pop();
    }
    if (rc < 0)
        goto out;
    if ((rc = grow((void **)&rs->heap, &rs->cap_heap, rs->n_nodes, sizeof *rs->heap, 64)) < 0)
        goto out;
    rs->heap_len = 0;
    for (int i = 0; i < rs->n_nodes; i++)
        if (rs->nodes[i].needed && rs->nodes[i].deps == 0)
            heap_push(rs, i);
    /* captured non-leaf tensors read their node's buffer before it runs;
     * each node's temporaries are released when it is done (run_node) */
    jg_scope_push();
    while (rs->heap_len && rc == 0) {
        int i = heap_pop(rs);
        {
            node_info *ni = &rs->nodes[i];
            jg_tensor **buf = node_buf(rs, ni);
            for (int c = 0; c < n_capture; c++) {
                int nr = capture[c]->output_nr;
                if (capture[c]->grad_fn && resolve(capture[c]->grad_fn, &nr) == ni->node &&
                    !captured[c] && buf[nr])
                    captured[c] = jg_retain(buf[nr]);
            }
        }
        int before = rs->n_nodes;
        if (rs->node_hooks && (rc = node_tensor_hooks(rs, i)) < 0)
            break;
        rc = run_node(rs, i, create_graph);
        if (rc == 0 && rs->hooks_on && rs->n_nodes > before)
            rc = count_hooked(rs, before); /* a splice added nodes */
        if (rc == 0 && rs->hooks_on)
            rc = node_done(rs, i);
        if (rc < 0)
            break;
        const int *nx = rs->next_idx + rs->nodes[i].next;
        for (int k = 0, nn = rs->nodes[i].node->n_next; k < nn; k++) {
            int j = nx[k];
            if (j >= 0 && rs->nodes[j].needed && --rs->nodes[j].deps == 0)
                heap_push(rs, j);
        }
    }
    jg_scope_pop();
    if (rc < 0)
        goto out;
    if (n_capture) {
        for (int c = 0; c < n_capture; c++) {
            if (capture[c]->grad_fn)
                continue;
            int li = map_get(&rs->leaf_idx, capture[c]);
            if (li >= 0 && rs->leaves[li].grad)
                captured[c] = jg_retain(rs->leaves[li].grad);
        }
    } else {
        if (rs->hooks_on) {
            /* leaves no counted edge led to (a root that is a leaf) */
            for (int i = 0; i < rs->n_leaves && rc == 0; i++)
                if (rs->leaves[i].leaf->has_grad_hooks)
                    rc = leaf_ready(rs, i);
            if (rc == 0) {
                bool prev = jg_set_grad_enabled(create_graph);
                rc = run_callbacks(rs, 0);
                jg_set_grad_enabled(prev);
            }
            if (rc < 0)
                goto out;
        }
        /* The nodes' gradients are spent: once they are dropped, a leaf's
         * gradient that is a view of one of them (TransposeBackward's, for
         * a weight used as w.t()) is the only holder of its memory and
         * becomes .grad without a copy. */
        for (int i = 0; i < rs->n_grads; i++) {
            jg_release(rs->grads[i]);
            rs->grads[i] = NULL;
        }
        /* commit: everything succeeded, now .grad may change */
        /* (PyTorch's AccumulateGrad skips a leaf that no longer requires
         * grad: requires_grad_(False) after the graph was built) */
        for (int i = 0; i < rs->n_leaves && rc == 0; i++)
            if (rs->leaves[i].grad && rs->leaves[i].leaf->requires_grad)
                rc = commit_leaf(rs->leaves[i].leaf, rs->leaves[i].grad, create_graph,
                                 rs->leaves[i].folded);
        /* post-accumulate hooks: .grad holds this backward's sum now */
        bool prev = jg_set_grad_enabled(create_graph);
        for (int i = 0; i < rs->n_leaves && rc == 0 && rs->hooks_on; i++) {
            jg_tensor *leaf = rs->leaves[i].leaf;
            if (rs->leaves[i].grad && leaf->requires_grad && leaf->has_grad_hooks &&
                jg_grad_hooks_has(leaf, JG_HOOK_POST))
                rc = jg_grad_hooks_run(leaf, JG_HOOK_POST, NULL);
        }
        jg_set_grad_enabled(prev);
    }
    /* retain_grad's .grad, last: like a leaf's, it changes only once the
     * backward succeeded */
    for (int i = 0; i + 1 < rs->n_ret && rc == 0; i += 2)
        rc = commit_leaf(rs->ret[i], rs->ret[i + 1], create_graph, false);
    if (rc == 0 && !retain)
        for (int i = 0; i < rs->n_nodes; i++)
            if (rs->nodes[i].ran && rs->nodes[i].node->has_saved) {
                rs->nodes[i].node->vt->release_saved(rs->nodes[i].node);
                rs->nodes[i].node->saved_released = true;
            }
out:
    if (rc < 0 && rs->n_cbs)
        run_callbacks(rs, -1);
    current_run = prev_run;
    if (rc < 0)
        for (int c = 0; c < n_capture; c++) {
            jg_release(captured[c]);
            captured[c] = NULL;
        }
    run_release(rs);
    return rc < 0 ? -1 : 0;
}
