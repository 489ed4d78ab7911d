/* Nodes, edges, saved tensors and the gradient accumulation rule. */
#include "autograd/node.h"
#include "autograd/hooks.h"

#include "core/iter.h"
#include "core/thread.h"
#include "ops/optable.h"
#include "ops/viewtrack.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local uint64_t next_seq = JG_NODE_SEQ_STRIDE;

/* ---- node blocks ----
 * Eager mode frees nodes in bursts (a scope pop releases a whole history),
 * more than glibc's tcache keeps per size, so calloc/free of nodes went
 * through _int_malloc/_int_free.  Freed blocks are kept on per-thread LIFO
 * lists, one per 64-byte size class up to NODE_CLASSES * 64 bytes, at most
 * NODE_CACHE_MAX_BYTES per thread; they are freed when the thread exits.  Each
 * block starts with a 16-byte header holding its class (the node follows, so
 * it stays 16-byte aligned).  Off under AddressSanitizer, so a use after free
 * is still caught there; -DJG_NODE_CACHE=0 turns it off elsewhere. */
#ifndef JG_NODE_CACHE
#if defined(__SANITIZE_ADDRESS__)
#define JG_NODE_CACHE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define JG_NODE_CACHE 0
#endif
#endif
#endif
#ifndef JG_NODE_CACHE
#define JG_NODE_CACHE 1
#endif
#define NODE_HDR 16
#define NODE_CLASS_BYTES 64
#define NODE_CLASSES 32 /* blocks up to 2 KiB are kept */
#define NODE_CACHE_MAX_BYTES ((size_t)8 << 20)

typedef union node_blk {
    union node_blk *next; /* while on a free list */
    size_t cls;           /* while in use: size class, or NODE_CLASSES if not kept */
    char pad[NODE_HDR];
} node_blk;

static _Thread_local node_blk *node_free[NODE_CLASSES];
static _Thread_local size_t node_cached_bytes;
static _Thread_local bool node_registered;

/* At thread exit: the cached blocks go back to malloc. */
static void node_cache_flush(void) {
    for (int c = 0; c < NODE_CLASSES; c++)
        while (node_free[c]) {
            node_blk *b = node_free[c];
            node_free[c] = b->next;
            free(b);
        }
    node_cached_bytes = 0;
    node_registered = false;
}

/* A block with room for `bytes` bytes of node after the header; zeroed if
 * `zero` (else what a cached block held, or zeros). */
static void *node_block_alloc(size_t bytes, bool zero) {
    size_t total = NODE_HDR + bytes;
    size_t cls = (total + NODE_CLASS_BYTES - 1) / NODE_CLASS_BYTES - 1;
    node_blk *b;
    if (JG_NODE_CACHE && cls < NODE_CLASSES) {
        size_t block = (cls + 1) * NODE_CLASS_BYTES;
        if ((b = node_free[cls])) {
            node_free[cls] = b->next;
            node_cached_bytes -= block;
            if (zero) /* (the block's tail past the node is never read) */
                memset(b, 0, total);
        } else if (!(b = calloc(1, block))) {
            return NULL;
        }
    } else {
        cls = NODE_CLASSES;
        if (!(b = calloc(1, total)))
            return NULL;
    }
    b->cls = cls;
    return (char *)b + NODE_HDR;
}

static void node_block_free(void *p) {
    node_blk *b = (node_blk *)((char *)p - NODE_HDR);
    size_t cls = b->cls, total = (cls + 1) * NODE_CLASS_BYTES;
    if (JG_NODE_CACHE && cls < NODE_CLASSES && node_cached_bytes + total <= NODE_CACHE_MAX_BYTES) {
        if (!node_registered && !(node_registered = jg_at_thread_exit(node_cache_flush))) {
            free(b);
            return;
        }
        b->next = node_free[cls];
        node_free[cls] = b;
        node_cached_bytes += total;
        return;
    }
    free(b);
}

static void node_destroy(jg_node *n) {
    jg_node_hooks_free(n); /* (a non-leaf's tensor hooks; costs nothing without hooks) */
    n->vt->destroy(n);
    for (int i = 0; i < n->n_next; i++) {
        jg_node_release(n->next[i].fn);
        jg_release(n->next[i].leaf);
    }
    node_block_free(n);
}

__attribute__((constructor)) static void autograd_init(void) {
    jg_autograd_init();
}

void jg_autograd_init(void) {
    jg_hooks.node_destroy = node_destroy;
}

static jg_node *node_alloc(size_t size, const jg_node_vt *vt, int n_next, int n_out, bool all) {
    size_t base = (size + 15) & ~(size_t)15;
    size_t edges = (size_t)n_next * sizeof(jg_edge);
    size_t bytes = base + edges + (size_t)n_out * sizeof(jg_meta);
    jg_node *n = node_block_alloc(bytes, all);
    if (!n)
        return jg_errorf_null("out of memory allocating an autograd node");
    if (!all) { /* the header and the edges; the caller writes the rest */
        memset(n, 0, sizeof *n);
        memset((char *)n + base, 0, edges);
    }
    n->refcount = 1;
    n->vt = vt;
    n->seq = next_seq;
    next_seq += JG_NODE_SEQ_STRIDE;
    n->n_next = n_next;
    n->next = (jg_edge *)((char *)n + base);
    n->n_out = n_out;
    n->out_meta = (jg_meta *)((char *)n + base + edges);
    return n;
}

jg_node *jg_node_alloc(size_t size, const jg_node_vt *vt, int n_next, int n_out) {
    return node_alloc(size, vt, n_next, n_out, true);
}

jg_node *jg_node_alloc_fields(size_t size, const jg_node_vt *vt, int n_next, int n_out) {
    return node_alloc(size, vt, n_next, n_out, false);
}

uint64_t jg_node_next_seq(void) {
    return next_seq;
}

void jg_node_set_edge(jg_node *n, int slot, jg_tensor *t) {
    jg_edge *e = &n->next[slot];
    if (!t || !t->requires_grad || (t->no_grad_view && !t->grad_fn))
        return;
    if (t->grad_fn) {
        jg_node_retain(t->grad_fn);
        e->fn = t->grad_fn;
        e->nr = t->output_nr;
    } else {
        e->leaf = jg_retain(t);
    }
}

void jg_node_set_outputs(jg_node *n, int n_outputs, jg_tensor *const *outputs) {
    for (int i = 0; i < n_outputs; i++) {
        jg_tensor *t = outputs[i];
        jg_meta_of(t, &n->out_meta[i]);
        if (!jg_dtype_is_float(t->dtype))
            continue; /* integer outputs (indices) are never differentiable */
        jg_node_retain(n);
        jg_node_release(t->grad_fn);
        t->grad_fn = n;
        t->output_nr = i;
        t->requires_grad = true;
    }
}

bool jg_any_requires_grad(int n, jg_tensor *const *in) {
    if (!jg_grad_mode)
        return false;
    for (int i = 0; i < n; i++)
        if (in[i] && in[i]->requires_grad)
            return true;
    return false;
}

/* ------------------------------------------------------------ accumulate */

int jg_grad_accumulate(jg_tensor **acc, jg_tensor *g) {
    if (!g)
        return 0;
    if (!*acc) {
        *acc = g;
        return 0;
    }
    jg_tensor *a = *acc;
    /* A buffer nothing else can see takes the sum in place: the same
     * additions in the same order, without an allocation.  Not while
     * recording history (create_graph) or tracing. */
    if (!jg_grad_mode && a->refcount == 1 && a->storage && a->storage->refcount == 1 &&
        !a->grad_fn && !a->requires_grad && g->storage && a->dtype == g->dtype &&
        jg_same_shape(a, g) && jg_dense(a)) {
        int rc = 0;
        if (jg_dense(g)) { /* the one row call jg_k_add makes for these operands */
            int64_t es = a->dtype == JG_F32 ? 4 : 8, one = a->numel == 1 ? 0 : es;
            int64_t st[3] = {es, one, one};
            char *pa = (char *)a->storage->data + a->offset * es;
            char *base[3] = {pa, pa, (char *)g->storage->data + g->offset * es};
            double s = 0.0;
            if (a->numel > 0)
                jg_ew_rows[JG_OP_ADD][a->dtype](&s, a->numel, base, st);
        } else {
            jg_tensor *in[2] = {a, g};
            rc = jg_ops[JG_OP_ADD].kernel(NULL, in, &a);
        }
        jg_release(g);
        return rc;
    }
    jg_tensor *sum = jg_keep(jg_add(a, g));
    jg_release(g);
    if (!sum)
        return -1;
    jg_release(*acc);
    *acc = sum;
    return 0;
}

/* dst: the part [lo, hi) along dim d of the dense tensor a */
static void part_of(jg_tensor *dst, const jg_tensor *a, int d, int64_t lo, int64_t hi) {
    *dst = *a;
    dst->shape[d] = hi - lo;
    dst->numel = jg_shape_numel(dst->ndim, dst->shape);
    dst->offset = a->offset + lo * a->stride[d];
}

int jg_grad_accumulate_slice(jg_tensor **acc, jg_tensor *g, const jg_attrs *slice) {
    jg_tensor *a = *acc;
    bool direct = slice->n == 3 || (slice->n == 4 && slice->i[3] == 1);
    /* jg_grad_accumulate's in-place case */
    if (!direct || !a || jg_grad_mode || a->refcount != 1 || !a->storage ||
        a->storage->refcount != 1 || a->grad_fn || a->requires_grad || !g->storage ||
        a->dtype != g->dtype || a->ndim != g->ndim || !jg_dense(a))
        return 0;
    int d = (int)slice->i[0];
    int64_t lo = slice->i[1], hi = slice->i[2];
    for (int k = 0; k < a->ndim; k++)
        if (k == d ? g->shape[k] != hi - lo || hi > a->shape[k] : g->shape[k] != a->shape[k])
            return 0;
    /* a + slice_backward(g) element by element: a + 0 outside the slice (a
     * no-op but for -0.0, which becomes +0.0), a + g inside */
    jg_tensor part;
    jg_attrs zero = {.s = 0.0};
    int64_t bounds[3][2] = {{0, lo}, {hi, a->shape[d]}, {lo, hi}};
    for (int k = 0; k < 3; k++) {
        part_of(&part, a, d, bounds[k][0], bounds[k][1]);
        if (!part.numel)
            continue;
        jg_tensor *in[2] = {&part, g}, *out = &part;
        int rc = k < 2 ? jg_ops[JG_OP_ADD_SCALAR].kernel(&zero, in, &out)
                       : jg_ops[JG_OP_ADD].kernel(NULL, in, &out);
        if (rc < 0)
            return -1;
    }
    return 1;
}

int jg_slots_accumulate(int n_slots, jg_tensor *const *slot_grads, jg_tensor **const *targets) {
    for (int s = 0; s < n_slots; s++)
        if (slot_grads[s] && targets[s] &&
            jg_grad_accumulate(targets[s], jg_retain(slot_grads[s])) < 0)
            return -1;
    return 0;
}

/* Is `from` broadcastable to `to` (so sum_to(to -> from) recovers it)? */
static bool expandable(const jg_meta *from, const jg_meta *to) {
    if (from->ndim > to->ndim)
        return false;
    for (int i = 0; i < from->ndim; i++) {
        int64_t f = from->shape[from->ndim - 1 - i], t = to->shape[to->ndim - 1 - i];
        if (f != t && f != 1)
            return false;
    }
    return true;
}

int jg_grad_validate(const char *fn_name, int slot, const jg_meta *expect, jg_tensor **g) {
    jg_meta got;
    jg_meta_of(*g, &got);
    got.dtype = expect->dtype;
    if (!jg_meta_equal(&got, expect)) {
        if (!expandable(expect, &got)) {
            char gs[160], es[160];
            jg_format_shape(gs, sizeof gs, got.ndim, got.shape);
            jg_format_shape(es, sizeof es, expect->ndim, expect->shape);
            return jg_errorf("Function %s returned an invalid gradient at index %d - got %s but "
                             "expected shape compatible with %s",
                             fn_name, slot, gs, es);
        }
        jg_tensor *r = jg_sum_to(*g, expect->ndim, expect->shape);
        if (!r)
            return -1;
        *g = r;
    }
    if ((*g)->dtype != expect->dtype) {
        jg_tensor *r = jg_to_dtype(*g, expect->dtype);
        if (!r)
            return -1;
        *g = r;
    }
    return 0;
}

/* --------------------------------------------------------- saved tensors */

jg_tensor *jg_alias_no_history(jg_tensor *t) {
    if (t->sym) { /* traced: the same graph value, a tensor of its own */
        jg_meta m;
        jg_meta_of(t, &m);
        jg_tensor *a = jg_tensor_symbolic(&m, t->sym);
        if (a) /* the same layout, as a concrete alias has */
            jg_view_traced_strides(t, a->stride);
        return a;
    }
    jg_tensor *a = jg_tensor_view_of(t, t->ndim, t->shape, t->stride, t->offset);
    if (a)
        a->is_view = t->is_view;
    return a;
}

void jg_saved_init(jg_saved *s, jg_tensor *t) {
    s->t = jg_retain(t);
    /* A view that is a leaf requiring grad of its own (requires_grad_ on a
     * view) is saved itself, as PyTorch saves a leaf: double backward must
     * reach that leaf, and an alias would be another leaf no gradient asks
     * for.  Writing this node's result into the view's base in place then
     * makes a reference cycle (view -> base -> history -> node -> view),
     * which PyTorch's saved leaf makes too; backward through it is refused
     * by the saved version check. */
    bool own_leaf = t && !t->grad_fn && t->requires_grad && !t->no_grad_view;
    if (t && t->view && !t->sym && !own_leaf) {
        /* a tracked view holds its base, whose history may come to hold this
         * node (x[0:2] *= x[2:4]): save an alias with the view's history but
         * without the link to the base, so no cycle forms */
        jg_tensor *a = jg_alias_no_history(t);
        if (!a)
            jg_fatal("out of memory saving a tensor for backward");
        jg_node_retain(t->grad_fn);
        a->grad_fn = t->grad_fn;
        a->output_nr = t->output_nr;
        a->requires_grad = t->requires_grad;
        jg_release(s->t);
        s->t = a;
    }
    s->version = t && t->storage ? t->storage->version : 0;
    s->output_nr = -1;
    s->unchecked = false;
}

void jg_saved_mark_output(jg_saved *s, int nr) {
    jg_tensor *a = jg_alias_no_history(s->t);
    if (!a)
        jg_fatal("out of memory saving an output for backward");
    jg_release(s->t);
    s->t = a;
    s->output_nr = nr;
}

jg_tensor *jg_saved_unpack(jg_saved *s, jg_node *owner, bool create_graph) {
    if (!s->t)
        return jg_errorf_null("%s", JG_SAVED_FREED_MSG);
    jg_tensor *t = s->t;
    if (t->storage && !s->unchecked && t->storage->version != s->version) {
        char d[96], made[128] = "";
        jg_describe(t, d, sizeof d);
        if (s->output_nr >= 0)
            snprintf(made, sizeof made, ", which is output %d of %s,", s->output_nr,
                     owner->vt->name(owner));
        else if (t->grad_fn) {
            /* a stand-in (a compiled call's per-use input) is named as what
             * it redirects to: a leaf by no node, as eager's message has it */
            jg_edge to = {t->grad_fn, t->output_nr, NULL};
            if (t->grad_fn->vt->redirect &&
                !t->grad_fn->vt->redirect(t->grad_fn, t->output_nr, &to))
                to = (jg_edge){t->grad_fn, t->output_nr, NULL};
            if (to.fn)
                snprintf(made, sizeof made, ", which is output %d of %s,", to.nr,
                         to.fn->vt->name(to.fn));
        }
        return jg_errorf_null("one of the variables needed for gradient computation has been "
                              "modified by an inplace operation: [%.3s %s]%s is at version %llu; "
                              "expected version %llu instead",
                              d, d + 3, made, (unsigned long long)t->storage->version,
                              (unsigned long long)s->version);
    }
    if (s->output_nr >= 0 && create_graph && jg_dtype_is_float(t->dtype)) {
        /* double backward must see the output with its history: this node */
        jg_tensor *a = jg_alias_no_history(t);
        if (!a)
            return NULL;
        jg_node_retain(owner);
        a->grad_fn = owner;
        a->output_nr = s->output_nr;
        a->requires_grad = true;
        return jg_scope_track(a);
    }
    return t;
}

void jg_saved_free(jg_saved *s) {
    jg_release(s->t);
    s->t = NULL;
}
