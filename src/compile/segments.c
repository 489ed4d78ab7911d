/* Partial graphs: a program whose trace reads a value (jg_item, jg_copy_to,
 * jg_data: Python's item(), bool(), tolist(), numpy()) runs as compiled
 * pieces around each read instead of eagerly.
 *
 * The program runs traced as usual, its inputs the call's real tensors
 * (lifted like any tensor it captures).  At a read in the program itself
 * the piece traced so far is closed: its outputs are the stand-ins the
 * program still holds (a reference count above the frame's own; a view
 * with history is one too, for its gradient, but takes its memory from its
 * base, as one without history does) plus the tensors it wrote in place
 * and the .grad it set; it is compiled (or found in the piece cache: same graph,
 * same guards) and run as an ordinary compiled call, so its outputs carry
 * its compiled backward node; each stand-in then takes its real tensor's
 * memory and history in place (jg_tensor_become), the read goes on with
 * the real value, and the next piece is traced in a fresh frame.  The end
 * of the program closes the last piece.  backward() of a computed tensor
 * in the program splits the same way: it runs eagerly between two pieces,
 * where eager mode runs it. */
#include "compile/compile.h"
#include "ops/viewtrack.h"
#include "trace/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { CACHE_MAX = 64 };

typedef struct cached {
    char *key;
    size_t key_len;
    jg_entry *e;
} cached;

struct jg_segments {
    cached *cache; /* most recently used last */
    int n_cache;
    /* the last call in pieces: its pieces that ran (retained) and its
     * breaks */
    jg_entry **last;
    int n_last, cap_last;
    char **breaks;
    int n_breaks, cap_breaks;
    char *shown; /* the breaks JITGRAD_LOG=graph_breaks printed last (joined) */
    long graphs; /* pieces run, every call */
};

typedef struct run {
    jg_segments *s;
    const jg_segments_env *env;
    int n_ran;     /* pieces closed (their side effects happened) */
    bool open;     /* a frame of ours is the innermost */
    char why[700]; /* why a piece could not close */
} run;

void jg_segments_free(jg_segments *s) {
    if (!s)
        return;
    for (int i = 0; i < s->n_cache; i++) {
        free(s->cache[i].key);
        jg_entry_release(s->cache[i].e);
    }
    free(s->cache);
    for (int i = 0; i < s->n_last; i++)
        jg_entry_release(s->last[i]);
    free(s->last);
    for (int i = 0; i < s->n_breaks; i++)
        free(s->breaks[i]);
    free(s->breaks);
    free(s->shown);
    free(s);
}

long jg_segments_graphs(const jg_segments *s) {
    return s ? s->graphs : 0;
}

int jg_segments_breaks(const jg_segments *s, const char *const **reasons) {
    *reasons = s ? (const char *const *)s->breaks : NULL;
    return s ? s->n_breaks : 0;
}

static int note_break(jg_segments *s, const char *fmt, const char *what, const char *d,
                      const char *site) {
    if (s->n_breaks == s->cap_breaks) {
        int cap = s->cap_breaks ? s->cap_breaks * 2 : 4;
        char **b = realloc(s->breaks, sizeof *b * (size_t)cap);
        if (!b)
            return jg_errorf("out of memory running a program in pieces");
        s->breaks = b;
        s->cap_breaks = cap;
    }
    size_t n = strlen(fmt) + strlen(what) + strlen(d) + strlen(site) + 8;
    char *r = malloc(n);
    if (!r)
        return jg_errorf("out of memory running a program in pieces");
    int len = snprintf(r, n, fmt, what, d);
    if (site[0])
        snprintf(r + len, n - (size_t)len, " at %s", site);
    s->breaks[s->n_breaks++] = r;
    return 0;
}

/* ---------------------------------------------------------------- cache */

typedef struct buf {
    char *p;
    size_t len, cap;
    bool oom;
} buf;

static void put(buf *b, const void *data, size_t n) {
    if (b->oom)
        return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 1024;
        while (cap < b->len + n)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
}

/* Everything a piece's compiled form depends on: the graph as printed,
 * each value's requires_grad, the constants' bytes, the captured tensors'
 * guards and what is written back.  NULL when the piece is not cached (a
 * custom function call keeps per-trace state) or out of memory. */
static char *piece_key(const jg_entry *e, const jg_graph *g, size_t *len) {
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].kind != JG_GN_OP)
            return NULL;
    if (g->n_children)
        return NULL;
    buf b = {0};
    size_t cap = 0;
    if (jg_graph_print_to(g, &b.p, &b.len, &cap) < 0) {
        free(b.p);
        jg_clear_error();
        return NULL;
    }
    b.cap = cap;
    for (int v = 0; v < g->n_vals; v++)
        put(&b, &g->vals[v].requires_grad, sizeof(bool));
    for (int c = 0; c < g->n_consts; c++) {
        const jg_tensor *t = g->consts[c];
        /* (constants are contiguous copies or tensors the program made) */
        if (!jg_dense(t)) {
            free(b.p);
            return NULL;
        }
        put(&b, jg_tensor_ptr(t), (size_t)t->numel * jg_dtype_size(t->dtype));
    }
    put(&b, &e->n_lifted, sizeof e->n_lifted);
    for (int i = 0; i < e->n_lifted; i++) { /* (field by field: no padding bytes) */
        const jg_capture_key *k = &e->lifted_key[i];
        int head[4] = {(int)k->meta.dtype, k->meta.ndim, k->requires_grad, k->storage_as};
        put(&b, head, sizeof head);
        put(&b, k->meta.shape, sizeof(int64_t) * (size_t)k->meta.ndim);
        put(&b, k->stride, sizeof(int64_t) * (size_t)k->meta.ndim);
    }
    put(&b, &e->n_lmut, sizeof e->n_lmut);
    for (int m = 0; m < e->n_lmut; m++) {
        put(&b, &e->lmut_lifted[m], sizeof(int));
        put(&b, &e->lmut_writes[m], sizeof(uint64_t));
    }
    put(&b, &e->n_gset, sizeof e->n_gset);
    for (int m = 0; m < e->n_gset; m++) {
        put(&b, &e->gset_out[m], sizeof(int));
        /* which captured tensor's .grad: by its place among the lifted
         * ones (-1: another) */
        int at = -1;
        for (int i = 0; i < e->n_lifted && at < 0; i++)
            if (e->lifted[i] == e->gset_owner[m])
                at = i;
        put(&b, &at, sizeof at);
    }
    for (int j = 0; j < g->n_outputs - e->n_lmut - e->n_gset_out; j++) { /* (the stand-ins') */
        bool r = e->out_relayout && e->out_relayout[j];
        put(&b, &r, sizeof r);
        if (r)
            put(&b, e->out_stride[j], sizeof(int64_t) * (size_t)g->vals[g->outputs[j]].meta.ndim);
    }
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    *len = b.len;
    return b.p;
}

/* A cached piece with this key, moved to the end (most recent). */
static jg_entry *cache_find(jg_segments *s, const char *key, size_t len) {
    for (int i = s->n_cache - 1; i >= 0; i--) {
        if (s->cache[i].key_len != len || memcmp(s->cache[i].key, key, len))
            continue;
        cached c = s->cache[i];
        memmove(&s->cache[i], &s->cache[i + 1], sizeof *s->cache * (size_t)(s->n_cache - i - 1));
        s->cache[s->n_cache - 1] = c;
        return c.e;
    }
    return NULL;
}

/* Keeps e under key (the key moves to the cache; freed when it cannot). */
static void cache_add(jg_segments *s, char *key, size_t len, jg_entry *e) {
    if (!s->cache && !(s->cache = malloc(sizeof *s->cache * CACHE_MAX))) {
        free(key);
        return;
    }
    if (s->n_cache == CACHE_MAX) { /* the least recently used goes */
        free(s->cache[0].key);
        jg_entry_release(s->cache[0].e);
        memmove(&s->cache[0], &s->cache[1], sizeof *s->cache * (size_t)(CACHE_MAX - 1));
        s->n_cache--;
    }
    e->refcount++;
    s->cache[s->n_cache++] = (cached){key, len, e};
}

/* A cached piece runs with this trace's tensors: the same graph reads them
 * in the same places. */
static void take_tensors(jg_entry *dst, jg_entry *src) {
    jg_tensor **l = dst->lifted;
    dst->lifted = src->lifted;
    src->lifted = l;
    jg_capture_key *k = dst->lifted_key;
    dst->lifted_key = src->lifted_key;
    src->lifted_key = k;
    jg_tensor **o = dst->gset_owner;
    dst->gset_owner = src->gset_owner;
    src->gset_owner = o;
    /* the .grad owners and value guards too: the earlier call's go with
     * src, freed with it, so a cached piece holds no tensor of an earlier
     * call */
    jg_tensor **gro = dst->gr_owner;
    bool *grh = dst->gr_had;
    int *lgo = dst->lifted_grad_of, ngr = dst->n_gr;
    dst->gr_owner = src->gr_owner, dst->gr_had = src->gr_had;
    dst->lifted_grad_of = src->lifted_grad_of, dst->n_gr = src->n_gr;
    src->gr_owner = gro, src->gr_had = grh, src->lifted_grad_of = lgo, src->n_gr = ngr;
    jg_tensor **vgt = dst->vg_t;
    void **vgb = dst->vg_bytes;
    int nvg = dst->n_vg;
    dst->vg_t = src->vg_t, dst->vg_bytes = src->vg_bytes, dst->n_vg = src->n_vg;
    src->vg_t = vgt, src->vg_bytes = vgb, src->n_vg = nvg;
}

/* After a piece ran: its entry (cached, kept for jg_compiled_graph, held by
 * its compiled node) lets go of this call's tensors.  Nothing reads them
 * later (the node's backward reads what it saved; a cached piece takes the
 * next call's, take_tensors), and one of them can come to hold the node: a
 * captured tensor written eagerly after the piece through a view, with the
 * piece's output as operand, gets a history through the node, which holds
 * the entry, which would hold the tensor -- a reference cycle. */
static void drop_call_tensors(jg_entry *e) {
    for (int i = 0; i < e->n_lifted; i++) {
        jg_release(e->lifted[i]);
        e->lifted[i] = NULL;
    }
    for (int i = 0; i < e->n_gr; i++) {
        jg_release(e->gr_owner[i]);
        e->gr_owner[i] = NULL;
    }
    for (int i = 0; i < e->n_vg; i++) {
        jg_release(e->vg_t[i]);
        e->vg_t[i] = NULL;
    }
    for (int i = 0; i < e->n_gset; i++) {
        jg_release(e->gset_owner[i]);
        e->gset_owner[i] = NULL;
    }
}

/* ---------------------------------------------------------------- pieces */

static int on_read(void *user, const jg_tensor *read, const char *what);

static int open_frame(run *r) {
    jg_graph *g = jg_graph_new();
    if (!g)
        return jg_errorf("out of memory running a program in pieces");
    g->name = "forward";
    if (jg_trace_begin(g, JG_TRACE_LIFT) < 0) {
        jg_graph_free(g);
        return -1;
    }
    jg_trace_set_segmenter(on_read, r);
    r->open = true;
    return 0;
}

static void close_frame(run *r) {
    jg_graph *g = jg_trace_graph();
    jg_trace_end();
    jg_graph_free(g);
    r->open = false;
}

/* Whether stand-in t can become the piece's value: 1 with r->why when not. */
static int convertible(run *r, const jg_graph *g, jg_tensor *t, jg_tensor *const *live,
                       int n_live) {
    char d[64];
    jg_describe(t, d, sizeof d);
    if (t->view) {
        const jg_tensor *b = t->view->base;
        bool ok = !b->sym;
        for (int i = 0; i < n_live && !ok; i++)
            ok = live[i] == b && !b->view;
        if (!ok) {
            snprintf(r->why, sizeof r->why,
                     "the program holds a view %s of a tensor of another trace across the read", d);
            return 1;
        }
        return 0;
    }
    const jg_value *v = &g->vals[t->sym->value];
    if (v->kind == JG_VAL_INPUT && v->requires_grad) {
        snprintf(r->why, sizeof r->why,
                 "the program holds an alias %s of a captured tensor that requires grad across "
                 "the read",
                 d);
        return 1;
    }
    return 0;
}

/* Closes the innermost frame's piece: compiles and runs it, turns the
 * stand-ins the program holds into its results.  read: the tensor read
 * (or NULL); outs: the program's outputs (at its end).  0, 1 with r->why
 * when the piece cannot close (nothing ran; the frame stays open and
 * follows no more stand-ins), or -1 + error. */
static int close_piece(run *r, const jg_tensor *read, int n_out, jg_tensor *const *outs) {
    jg_graph *g = jg_trace_graph();
    if (jg_trace_breaks()) {
        snprintf(r->why, sizeof r->why, "%s", jg_trace_break_reason());
        return 1;
    }
    for (int j = 0; j < n_out; j++)
        if (outs[j]->sym && outs[j]->sym->graph != g->id) {
            snprintf(r->why, sizeof r->why,
                     "the program returns a traced tensor of another trace (output %d)", j);
            return 1;
        }
    if (read && read->sym && read->sym->graph != g->id) {
        snprintf(r->why, sizeof r->why,
                 "the program reads a traced tensor of another trace (one kept from an earlier "
                 "call's trace)");
        return 1;
    }
    jg_tensor **syms;
    int n_syms = jg_trace_take_symbolic(&syms), rc = 0;
    /* live: what the program holds (the frame holds one reference) */
    jg_tensor **live = malloc(sizeof *live * (size_t)(n_syms + 1));
    int *vals = malloc(sizeof(int) * (size_t)(n_syms + 1));
    /* own[i]: live[i] is one of the piece's outputs (a value, or a view
     * with history) */
    bool *own = malloc(sizeof *own * (size_t)(n_syms + 1));
    jg_entry *e = calloc(1, sizeof *e);
    int n_live = 0, n_val = 0;
    if (!live || !vals || !own || !e)
        rc = jg_errorf("out of memory running a program in pieces");
    for (int i = 0; i < n_syms && rc == 0; i++)
        if (syms[i]->refcount > 1 || syms[i] == read)
            live[n_live++] = syms[i];
    for (int i = 0; i < n_live && rc == 0; i++)
        rc = convertible(r, g, live[i], live, n_live);
    /* a view whose base was written after it was made takes its value from
     * the base's current one first (as a call's outputs do, and as eager
     * remakes the view's history before it is used): its stale value would
     * give the piece's output the history of the base before the write */
    for (int i = 0; i < n_live && rc == 0; i++)
        if (live[i]->view && live[i]->sym)
            rc = jg_view_sync(live[i]);
    /* a view with history is an output too, its own value: its gradient
     * then enters the compiled backward at the view and is summed there
     * with the piece's uses of it, in eager's order (remade from its base,
     * it would reach the piece through the base); it still takes its
     * memory from the base (jg_view_become_output) */
    for (int i = 0; i < n_live && rc == 0; i++)
        own[i] = !live[i]->view ||
                 (!live[i]->view->no_grad && g->vals[live[i]->sym->value].requires_grad);
    /* the piece's entry: no call inputs, everything lifted */
    if (rc == 0) {
        e->refcount = 1;
        e->backend = r->env->backend;
        e->index = r->n_ran;
        e->key.grad_mode = true;
        if (!(e->key.in = malloc(sizeof *e->key.in)) ||
            !(e->out_relayout = calloc((size_t)n_live + 1, sizeof *e->out_relayout)) ||
            !(e->out_stride = calloc((size_t)n_live + 1, sizeof *e->out_stride)))
            rc = jg_errorf("out of memory running a program in pieces");
    }
    for (int i = 0; i < n_live && rc == 0; i++) {
        jg_tensor *t = live[i];
        if (!own[i])
            continue; /* remade from its base */
        /* (a view's memory is its base's: no relayout) */
        e->out_relayout[n_val] = !t->view && !jg_dense(t);
        memcpy(e->out_stride[n_val], t->stride, sizeof(int64_t) * (size_t)t->ndim);
        vals[n_val++] = t->sym->value;
    }
    jg_tensor **valt = rc == 0 ? malloc(sizeof *valt * (size_t)(n_val + 1)) : NULL;
    if (rc == 0 && !valt)
        rc = jg_errorf("out of memory running a program in pieces");
    for (int i = 0, k = 0; i < n_live && rc == 0; i++)
        if (own[i])
            valt[k++] = live[i];
    if (rc == 0) {
        rc = jg_lifted_mutations_find(e, &e->key, NULL, n_val, valt, &vals, n_val, r->why,
                                      sizeof r->why);
    }
    /* (a written captured tensor's views would alias its old value) */
    if (rc == 0 && n_val && !e->n_lmut)
        rc = jg_compile_output_views(e, g, n_val, vals);
    if (rc == 0)
        rc = jg_grad_sets_find(e, &vals, n_val + e->n_lmut);
    if (rc == 0)
        rc = jg_graph_set_outputs(g, n_val + e->n_lmut + e->n_gset_out, vals);
    if (rc == 0)
        rc = jg_compile_take_captures(e);
    free(vals);
    if (rc == 0)
        rc = jg_overwrites_keep(e);
    if (rc != 0) {
        for (int i = 0; i < n_syms; i++)
            jg_release(syms[i]);
        free(syms);
        free(live);
        free(own);
        free(valt);
        jg_entry_release(e);
        return rc;
    }
    /* the frame is done: the piece runs, and the stand-ins take its values,
     * outside any trace */
    jg_trace_end();
    r->open = false;
    bool empty = g->n_nodes == 0 && !n_val && !e->n_gset;
    jg_entry *run_e = NULL;
    size_t key_len = 0;
    char *key = empty ? NULL : piece_key(e, g, &key_len);
    if (empty) {
        jg_graph_free(g);
    } else if (key && (run_e = cache_find(r->s, key, key_len))) {
        take_tensors(run_e, e);
        run_e->refcount++;
        jg_graph_free(g);
        free(key);
    } else if (jg_compile_build(e, g) < 0) { /* (g is e's from here) */
        rc = -1;
        free(key);
    } else {
        run_e = e;
        e->refcount++;
        if (r->env->log_graphs) {
            char *text = jg_compiled_graph_of(e);
            if (text)
                fprintf(stderr, "jitgrad: new piece %d of entry %d\n%s", r->n_ran, r->env->entry,
                        text);
            jg_clear_error();
            free(text);
        }
        if (key)
            cache_add(r->s, key, key_len, e);
    }
    jg_entry_release(e);
    jg_tensor **ro = NULL, **view_val = calloc((size_t)n_live + 1, sizeof *view_val);
    if (!view_val)
        rc = jg_errorf("out of memory running a program in pieces");
    if (run_e && rc == 0) {
        ro = calloc((size_t)run_e->n_prog_out + 1, sizeof *ro);
        if (!ro)
            rc = jg_errorf("out of memory running a program in pieces");
    }
    if (run_e && rc == 0) {
        /* the values' requires_grad holds the grad mode they were traced
         * under: the compiled node is attached whatever the mode now */
        bool gm = jg_grad_mode;
        /* a captured view whose base was written since it was made (an
         * eager write between two pieces) takes its history from the base
         * now, as eager does before it is used */
        for (int i = 0; i < run_e->n_lifted && rc == 0; i++)
            rc = jg_view_sync(run_e->lifted[i]);
        jg_grad_mode = true;
        int n = rc < 0                           ? -1
                : run_e->n_lmut || run_e->n_gset ? jg_entry_run_mutating(run_e, 0, NULL, ro)
                                                 : jg_entry_run(run_e, NULL, ro);
        jg_grad_mode = gm;
        rc = n < 0 ? -1 : 0;
        if (rc == 0)
            r->s->graphs++;
    }
    if (run_e && rc == 0) {
        if (r->s->n_last == r->s->cap_last) {
            int cap = r->s->cap_last ? r->s->cap_last * 2 : 4;
            jg_entry **l = realloc(r->s->last, sizeof *l * (size_t)cap);
            if (l) {
                r->s->last = l;
                r->s->cap_last = cap;
            }
        }
        if (r->s->n_last < r->s->cap_last) {
            run_e->refcount++;
            r->s->last[r->s->n_last++] = run_e;
        }
    }
    /* the stand-ins become the results: first the values, then the views
     * of them (and of captured tensors) */
    for (int i = 0, k = 0; i < n_live && rc == 0; i++) {
        jg_tensor *t = live[i];
        if (!own[i])
            continue;
        jg_tensor *v = ro[k++];
        bool ngv = t->no_grad_view; /* (made without grad mode: jg_tensor_become resets it) */
        if (t->view) {
            view_val[i] = v; /* (its history, once its base is real) */
            continue;
        }
        const jg_value *gv = &run_e->fwd->vals[run_e->fwd->outputs[k - 1]];
        if (gv->kind == JG_VAL_CONST && !(v = jg_clone(v))) /* (the graph keeps its own) */
            rc = -1;
        else
            jg_tensor_become(t, v);
        /* a view of a captured tensor (the trace keeps no record of those)
         * comes back as that tensor's tracked view: a later write through
         * it gets eager's checks and reaches the tensor, as in eager mode;
         * made without grad mode, it is eager's no_grad view (requiring
         * grad while its base does) */
        if (rc == 0 && v->view && !t->view && (rc = jg_view_copy_record(t, v)) == 0) {
            t->view->no_grad = ngv; /* (as the program made it, not as the piece ran) */
            if (ngv)
                t->requires_grad = t->no_grad_view = t->view->base->requires_grad;
        }
    }
    for (int i = 0; i < n_live && rc == 0; i++)
        if (live[i]->view && live[i]->sym) {
            /* (made without grad mode: remade so, as eager made it) */
            live[i]->view->no_grad = live[i]->no_grad_view;
            rc = view_val[i] ? jg_view_become_output(live[i], view_val[i])
                             : jg_view_become_concrete(live[i]);
        }
    if (run_e)
        drop_call_tensors(run_e);
    jg_entry_release(run_e);
    free(ro);
    free(view_val);
    free(own);
    for (int i = 0; i < n_syms; i++)
        jg_release(syms[i]);
    free(syms);
    free(live);
    free(valt);
    r->n_ran++;
    return rc;
}

static int on_read(void *user, const jg_tensor *read, const char *what) {
    run *r = user;
    char d[64] = "";
    if (read)
        jg_describe(read, d, sizeof d);
    char site[300] = "";
    if (r->env->site && r->env->site(r->env->site_user, site, sizeof site) < 0)
        site[0] = 0;
    int rc = close_piece(r, read, 0, NULL);
    if (rc == 1)
        return jg_errorf("%s", r->why);
    if (rc < 0 ||
        note_break(r->s, read ? "%s() read the values of %s" : "%s%s", what, d, site) < 0 ||
        open_frame(r) < 0) {
        /* (a failure after pieces ran: the call fails) */
        snprintf(r->why, sizeof r->why, "%s", jg_last_error());
        return jg_errorf("%s", r->why);
    }
    if (read && read->sym)
        return jg_errorf("internal error: a read tensor stayed traced after its piece ran");
    return 0;
}

static void log_breaks(jg_segments *s, int entry) {
    size_t n = 1;
    for (int i = 0; i < s->n_breaks; i++)
        n += strlen(s->breaks[i]) + 1;
    char *all = malloc(n);
    if (!all)
        return;
    all[0] = 0;
    for (int i = 0; i < s->n_breaks; i++) {
        strcat(all, s->breaks[i]);
        strcat(all, "\n");
    }
    if (s->shown && !strcmp(s->shown, all)) {
        free(all);
        return;
    }
    fprintf(stderr, "jitgrad: entry %d runs in %d graphs around %d graph breaks:\n", entry,
            s->n_last, s->n_breaks);
    for (int i = 0; i < s->n_breaks; i++)
        fprintf(stderr, "jitgrad:   break %d: %s\n", i, s->breaks[i]);
    free(s->shown);
    s->shown = all;
}

int jg_segments_call(jg_segments **sp, const jg_segments_env *env, const void *args, int n,
                     jg_tensor *const *inputs, jg_tensor **outputs) {
    if (!*sp && !(*sp = calloc(1, sizeof **sp)))
        return jg_errorf("out of memory running a program in pieces");
    jg_segments *s = *sp;
    for (int i = 0; i < s->n_last; i++)
        jg_entry_release(s->last[i]);
    s->n_last = 0;
    for (int i = 0; i < s->n_breaks; i++)
        free(s->breaks[i]);
    s->n_breaks = 0;
    run r = {.s = s, .env = env};
    jg_scope_push();
    int n_out = open_frame(&r) < 0 ? -1 : env->fn(env->user, args, n, inputs, outputs);
    int rc = 0;
    if (!r.open) {
        rc = -1; /* (a piece failed to run; its error is set) */
    } else if (jg_trace_breaks()) {
        rc = 1;
        snprintf(r.why, sizeof r.why, "%s", jg_trace_break_reason());
    } else if (n_out < 0) {
        /* the eager run fails with eager's own error, when no piece ran */
        rc = r.n_ran ? -1 : 1;
        snprintf(r.why, sizeof r.why, "%s", jg_last_error());
    } else {
        for (int j = 0; j < n_out && rc == 0; j++)
            if (!outputs[j])
                rc = jg_errorf("jg_compiled_call: the program returned NULL for output %d", j);
        if (rc == 0)
            rc = close_piece(&r, NULL, n_out, outputs);
    }
    if (rc == 0)
        for (int j = 0; j < n_out; j++)
            jg_retain(outputs[j]);
    if (r.open)
        close_frame(&r);
    jg_scope_pop();
    if (rc == 0) {
        for (int j = 0; j < n_out; j++)
            outputs[j] = jg_scope_track(outputs[j]);
        if (env->log_breaks)
            log_breaks(s, env->entry);
        return n_out;
    }
    if (rc == 1 && !r.n_ran) { /* nothing ran: the call runs eagerly */
        jg_errorf("%s", r.why);
        return JG_SEGMENTS_EAGER;
    }
    if (rc == 1) {
        jg_errorf("jg_compiled_call: after %d compiled pieces of the program ran, it broke where "
                  "it cannot be split: %s",
                  r.n_ran, r.why);
        return JG_SEGMENTS_BROKE;
    }
    return -1;
}

char *jg_segments_graph(const jg_segments *s, int entry) {
    buf b = {0};
    char line[160];
    snprintf(line, sizeof line, "entry %d runs in pieces; its last call ran %d graphs:\n", entry,
             s ? s->n_last : 0);
    put(&b, line, strlen(line));
    for (int i = 0; s && i < s->n_breaks; i++) {
        snprintf(line, sizeof line, "graph break %d: ", i);
        put(&b, line, strlen(line));
        put(&b, s->breaks[i], strlen(s->breaks[i]));
        put(&b, "\n", 1);
    }
    for (int i = 0; s && i < s->n_last; i++) {
        snprintf(line, sizeof line, "piece %d:\n", i);
        put(&b, line, strlen(line));
        char *t = jg_compiled_graph_of(s->last[i]);
        if (!t) {
            free(b.p);
            return NULL;
        }
        put(&b, t, strlen(t));
        free(t);
    }
    put(&b, "", 1);
    if (b.oom) {
        free(b.p);
        return jg_errorf_null("out of memory printing a graph");
    }
    return b.p;
}
