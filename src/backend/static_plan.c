/* The static memory plan of mode "reduce-overhead" (see static_plan.h). */
#include "backend/static_plan.h"

#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

struct jg_static_plan {
    int n_vals;
    int *slot; /* per value: its slot, or -1 (no buffer of its own: a view, an input) */
    int n_slots, cap_slots;
    jg_tensor **buf; /* per slot: its buffer (a reference of the plan's) or NULL */
    int *users;      /* per slot: how many values the lifetimes gave it */
};

static _Atomic int64_t total_reused, total_fresh;

void jg_static_plan_free(jg_static_plan *sp) {
    if (!sp)
        return;
    for (int s = 0; s < sp->n_slots; s++)
        jg_release(sp->buf[s]);
    free(sp->slot);
    free(sp->buf);
    free(sp->users);
    free(sp);
}

static bool allocates(const jg_gnode *n) {
    return n->kind == JG_GN_OP && !(jg_ops[n->op].flags & JG_OPF_VIEW);
}

jg_static_plan *jg_static_plan_new(const jg_graph *g) {
    int nv = g->n_vals, nn = g->n_nodes;
    jg_static_plan *sp = calloc(1, sizeof *sp);
    int *last = malloc(sizeof(int) * (size_t)(nv ? nv : 1));
    int *until = malloc(sizeof(int) * (size_t)(nv ? nv : 1)); /* per slot: its value's last use */
    const jg_meta **smeta = malloc(sizeof *smeta * (size_t)(nv ? nv : 1));
    if (sp) {
        sp->n_vals = nv;
        sp->cap_slots = nv ? 2 * nv : 1; /* each value split off at most once */
        sp->slot = malloc(sizeof(int) * (size_t)(nv ? nv : 1));
        sp->buf = calloc((size_t)sp->cap_slots, sizeof *sp->buf);
        sp->users = calloc((size_t)sp->cap_slots, sizeof *sp->users);
    }
    if (!sp || !last || !until || !smeta || !sp->slot || !sp->buf || !sp->users) {
        free(last);
        free(until);
        free(smeta);
        jg_static_plan_free(sp);
        return jg_errorf_null("out of memory planning the buffers of a graph");
    }
    /* a value lives from its node to its last reader; graph outputs escape */
    for (int v = 0; v < nv; v++) {
        sp->slot[v] = -1;
        last[v] = g->vals[v].kind == JG_VAL_NODE ? g->vals[v].node : -1;
    }
    for (int i = 0; i < nn; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++)
            if (last[g->nodes[i].in[k]] < i)
                last[g->nodes[i].in[k]] = i;
    for (int k = 0; k < g->n_outputs; k++)
        if (g->outputs[k] >= 0)
            last[g->outputs[k]] = INT_MAX;
    /* a view keeps what it views alive: backwards, so chains of views
     * reach their root */
    for (int i = nn - 1; i >= 0; i--) {
        const jg_gnode *n = &g->nodes[i];
        if (n->kind != JG_GN_OP || !(jg_ops[n->op].flags & JG_OPF_VIEW))
            continue;
        for (int o = 0; o < n->n_out; o++)
            for (int k = 0; k < n->n_in; k++)
                if (last[n->in[k]] < last[n->out[o]])
                    last[n->in[k]] = last[n->out[o]];
    }
    /* greedy: a node's outputs take a slot of the same dtype and shape whose
     * value died before the node (not at it: no output shares a buffer with
     * an operand), else a new one.  Values that escape (graph outputs, and
     * what they view) get none: the caller's tensor may take history whose
     * node holds this plan's entry, and a slot holding it would make a
     * cycle */
    for (int i = 0; i < nn; i++) {
        const jg_gnode *n = &g->nodes[i];
        if (!allocates(n))
            continue;
        for (int o = 0; o < n->n_out; o++) {
            int v = n->out[o], s;
            const jg_meta *m = &g->vals[v].meta;
            if (last[v] == INT_MAX)
                continue;
            for (s = 0; s < sp->n_slots; s++)
                if (until[s] < i && jg_meta_equal(smeta[s], m))
                    break;
            if (s == sp->n_slots) {
                sp->n_slots++;
                smeta[s] = m;
            }
            sp->users[s]++;
            until[s] = last[v];
            sp->slot[v] = s;
        }
    }
    free(last);
    free(until);
    free(smeta);
    return sp;
}

/* Nothing but the slot sees t or its data: overwriting it is invisible. */
static bool unshared(const jg_tensor *t) {
    return t->refcount == 1 && t->storage && t->storage->refcount == 1 && !t->is_view && !t->view &&
           !t->grad && !t->grad_fn && !t->has_grad_hooks && t->offset == 0 && jg_is_contiguous(t);
}

jg_tensor *jg_static_plan_alloc(jg_static_plan *sp, int v, const jg_meta *m) {
    int s = v >= 0 && v < sp->n_vals ? sp->slot[v] : -1;
    jg_tensor *t = s >= 0 ? sp->buf[s] : NULL;
    if (t && t->dtype == m->dtype && t->ndim == m->ndim &&
        !memcmp(t->shape, m->shape, sizeof(int64_t) * (size_t)m->ndim) && unshared(t)) {
        atomic_fetch_add_explicit(&total_reused, 1, memory_order_relaxed);
        t->requires_grad = false;
        t->no_grad_view = false;
        return jg_retain(t);
    }
    jg_tensor *n = jg_tensor_alloc(m->dtype, m->ndim, m->shape);
    if (!n || s < 0)
        return n;
    atomic_fetch_add_explicit(&total_fresh, 1, memory_order_relaxed);
    if (t && sp->users[s] > 1 && sp->n_slots < sp->cap_slots) {
        /* a value of this run still holds the shared buffer: v gets a slot
         * of its own, so the next replay finds both free */
        sp->users[s]--;
        s = sp->n_slots++;
        sp->users[s] = 1;
        sp->slot[v] = s;
    } else {
        /* empty, or resized: the new buffer replaces it */
        jg_release(t);
    }
    sp->buf[s] = jg_retain(n);
    return n;
}

void jg_static_plan_totals(jg_static_plan_stats *out) {
    out->reused = atomic_load(&total_reused);
    out->fresh = atomic_load(&total_fresh);
}
