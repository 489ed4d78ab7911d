/* Tracing frames, the op hook dispatch calls for symbolic operands, and the
 * read hook that turns a data read into a graph break. */
#include "trace/trace.h"

#include "autograd/function.h"
#include "trace/custom.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    jg_tensor *t; /* retained by the graph as a constant, by lifted[] or (snapshot) by the entry;
                     a bound input: borrowed */
    int value;
    int input; /* a bound call input (jg_trace_bind), else -1 */
    bool used; /* a bound input the program reached by capture */
    /* a copy of a tensor the program made (value: the copy), taken at this
     * storage version: an in-place op on it afterwards makes a new copy */
    bool snapshot;
    uint64_t version;
    /* a lifted tensor the program wrote in place: value is its new value,
     * writes how many in-place ops wrote it (jg_trace_lifted_written) */
    int writes;
    /* a view op read it: traced views of a captured tensor keep no base,
     * so a traced write of it would not reach them */
    bool viewed;
} const_entry;

typedef struct frame {
    jg_graph *g;
    unsigned flags;
    uint32_t id;            /* capturing frames: jg_trace_capture while it is innermost */
    uint32_t outer_capture; /* jg_trace_capture to restore when it closes */
    const_entry *consts;
    int n_consts, cap_consts;
    jg_tensor **lifted;
    int n_lifted, cap_lifted;
    int breaks;
    bool retry; /* a break that holds for this call only (jg_trace_note_retry_break) */
    char reason[512];
    /* captured tensors whose .grad the program read (retained), and the
     * .grad it saw (retained; NULL: none) */
    jg_tensor **gr_owner, **gr_grad;
    int n_gr, cap_gr;
    /* captured tensors whose .grad the program set (a traced backward, an
     * assignment of None): the .grad it sees now (retained; NULL: none) */
    jg_tensor **gs_owner, **gs_grad;
    int n_gs, cap_gs;
    /* concrete tensors whose values the trace relied on (retained), and a
     * copy of their bytes then: the entry is kept only for calls where
     * they hold the same bytes (jg_trace_guard_value) */
    jg_tensor **vg_t;
    void **vg_bytes;
    int n_vg, cap_vg;
    /* per node of the graph: a traced backward without retain_graph went
     * through it (eager frees the saved tensors of those nodes) */
    bool *freed;
    int n_freed;
    int *lifted_val;             /* per lifted tensor: its placeholder */
    jg_trace_resolve_fn resolve; /* symbolic tensors of other graphs */
    void *resolve_user;
    int read_breaks; /* breaks that were value reads in the program itself */
    /* a program run in pieces (jg_trace_set_segmenter): the symbolic tensors
     * of the graph (retained) */
    jg_trace_segment_fn seg;
    void *seg_user;
    jg_tensor **syms;
    int n_syms, cap_syms;
    /* traced tensors written with grad mode on (jg_hooks.traced_write; not
     * retained, only compared), in the order of their first such write,
     * and whether that write went through a view */
    const jg_tensor **wr_root;
    bool *wr_view;
    int n_wr, cap_wr;
    /* traced tensors that required grad when written without grad mode
     * (not retained, which would make them live at a piece's end: one
     * freed meanwhile can only make a later tensor at its address a
     * needless break) */
    const jg_tensor **ng_root;
    int n_ng, cap_ng;
    bool any_writes; /* a captured tensor was written (captured_write_end) */
    /* the values captured tensors held before a traced write (stale_view) */
    int *cw_old;
    int n_cw, cap_cw;
    /* every in-place write of a traced tensor, in order: the value it held
     * until then and its version then (jg_trace_overwrites); roots are only
     * compared */
    const jg_tensor **ow_root;
    jg_trace_overwrite *ow;
    int n_ow, cap_ow;
} frame;

static _Thread_local frame *frames;
static _Thread_local int n_frames, cap_frames;

static frame *top(void) {
    return n_frames ? &frames[n_frames - 1] : NULL;
}

static bool lifting(void);
static bool written_without_grad(const frame *f, const jg_tensor *t);
static bool stale_view(const frame *f, const jg_tensor *t);
static bool on_symbolic_read(const jg_tensor *t, const char *what);
static const_entry *find_entry(frame *f, const jg_tensor *t);
static int nograd_break(const char *what);

bool jg_tracing(void) {
    return n_frames > 0;
}

jg_graph *jg_trace_graph(void) {
    return n_frames ? top()->g : NULL;
}

/* Frame ids are unique across threads, so a storage made by another
 * thread's trace never passes for one this program made. */
static atomic_uint_fast32_t next_id;

int jg_trace_begin(jg_graph *g, unsigned flags) {
    if (n_frames == cap_frames) {
        int cap = cap_frames ? cap_frames * 2 : 4;
        frame *f = realloc(frames, (size_t)cap * sizeof *f);
        if (!f)
            return jg_errorf("out of memory opening a trace");
        frames = f;
        cap_frames = cap;
    }
    uint32_t id = 0;
    while ((flags & (JG_TRACE_LIFT | JG_TRACE_CAPTURE)) && !id)
        id = (uint32_t)atomic_fetch_add(&next_id, 1) + 1;
    frames[n_frames++] =
        (frame){.g = g, .flags = flags, .id = id, .outer_capture = jg_trace_capture};
    jg_trace_capture = id;
    return 0;
}

void jg_trace_end(void) {
    JG_ASSERT(n_frames > 0);
    frame *f = top();
    for (int i = 0; i < f->n_lifted; i++)
        jg_release(f->lifted[i]);
    free(f->lifted);
    for (int i = 0; i < f->n_consts; i++)
        if (f->consts[i].snapshot)
            jg_release(f->consts[i].t);
    free(f->consts);
    for (int i = 0; i < f->n_gr; i++) {
        jg_release(f->gr_owner[i]);
        jg_release(f->gr_grad[i]);
    }
    free(f->gr_owner);
    free(f->gr_grad);
    for (int i = 0; i < f->n_vg; i++) {
        jg_release(f->vg_t[i]);
        free(f->vg_bytes[i]);
    }
    free(f->vg_t);
    free(f->vg_bytes);
    for (int i = 0; i < f->n_gs; i++) {
        jg_release(f->gs_owner[i]);
        jg_release(f->gs_grad[i]);
    }
    free(f->gs_owner);
    free(f->gs_grad);
    free(f->lifted_val);
    free(f->freed);
    free(f->wr_root);
    free(f->wr_view);
    free(f->ng_root);
    free(f->ow_root);
    free(f->ow);
    free(f->cw_old);
    for (int i = 0; i < f->n_syms; i++)
        jg_release(f->syms[i]);
    free(f->syms);
    jg_trace_capture = f->outer_capture;
    n_frames--;
    if (!n_frames) {
        free(frames);
        frames = NULL;
        cap_frames = 0;
    }
}

uint32_t jg_trace_capture_pause(void) {
    uint32_t id = jg_trace_capture;
    jg_trace_capture = 0;
    return id;
}

uint32_t jg_trace_capture_all(void) {
    uint32_t prev = jg_trace_capture;
    frame *f = top();
    if (f) {
        while (!f->id)
            f->id = (uint32_t)atomic_fetch_add(&next_id, 1) + 1;
        jg_trace_capture = f->id;
    }
    return prev;
}

void jg_trace_capture_resume(uint32_t id) {
    jg_trace_capture = id;
}

static int add_const_entry(frame *f, const_entry e) {
    if (f->n_consts == f->cap_consts) {
        int cap = f->cap_consts ? f->cap_consts * 2 : 8;
        const_entry *c = realloc(f->consts, (size_t)cap * sizeof *c);
        if (!c)
            return jg_errorf("out of memory while tracing");
        f->consts = c;
        f->cap_consts = cap;
    }
    f->consts[f->n_consts++] = e;
    return 0;
}

int jg_trace_bind(jg_tensor *t, int value, int input) {
    frame *f = top();
    JG_ASSERT(f && t && !t->sym && value >= 0 && value < f->g->n_vals);
    return add_const_entry(f, (const_entry){t, value, input, false, false, 0, 0, false});
}

int jg_trace_bound_used(int input) {
    frame *f = top();
    JG_ASSERT(f);
    for (int i = 0; i < f->n_consts; i++)
        if (f->consts[i].input == input)
            return f->consts[i].used;
    return 0;
}

int jg_trace_take_lifted(jg_tensor ***lifted) {
    frame *f = top();
    JG_ASSERT(f);
    *lifted = f->lifted;
    int n = f->n_lifted;
    f->lifted = NULL;
    f->n_lifted = f->cap_lifted = 0;
    return n;
}

int jg_trace_read_breaks(void) {
    return n_frames ? top()->read_breaks : 0;
}

void jg_trace_set_segmenter(jg_trace_segment_fn fn, void *user) {
    frame *f = top();
    JG_ASSERT(f);
    f->seg = fn;
    f->seg_user = user;
}

int jg_trace_take_symbolic(jg_tensor ***syms) {
    frame *f = top();
    JG_ASSERT(f);
    *syms = f->syms;
    int n = f->n_syms;
    f->syms = NULL;
    f->n_syms = f->cap_syms = 0;
    return n;
}

static void on_symbolic_new(jg_tensor *t) {
    frame *f = top();
    if (!f || !f->seg || t->sym->graph != f->g->id)
        return;
    if (f->n_syms == f->cap_syms) {
        int cap = f->cap_syms ? f->cap_syms * 2 : 64;
        jg_tensor **s = realloc(f->syms, (size_t)cap * sizeof *s);
        if (!s) { /* (the stand-in cannot be followed: no piece can close) */
            jg_trace_note_break("out of memory while tracing");
            return;
        }
        f->syms = s;
        f->cap_syms = cap;
    }
    f->syms[f->n_syms++] = jg_retain(t);
}

int jg_trace_breaks(void) {
    return n_frames ? top()->breaks : 0;
}

const char *jg_trace_break_reason(void) {
    return n_frames ? top()->reason : "";
}

void jg_trace_note_break(const char *fmt, ...) {
    frame *f = top();
    if (!f)
        return;
    if (!f->breaks++) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(f->reason, sizeof f->reason, fmt, ap);
        va_end(ap);
    }
}

static jg_tensor *make_sym(frame *f, int v) {
    jg_sym s = {f->g->id, v};
    jg_tensor *t = jg_tensor_symbolic(&f->g->vals[v].meta, &s);
    if (t)
        t->requires_grad = f->g->vals[v].requires_grad;
    return t;
}

jg_tensor *jg_trace_placeholder(const jg_meta *m, bool value_rg, bool tensor_rg, const char *name) {
    frame *f = top();
    if (!f)
        return jg_errorf_null("jg_trace_placeholder: no trace is open");
    int v = jg_graph_add_input(f->g, m, value_rg, name);
    jg_tensor *t = v < 0 ? NULL : make_sym(f, v);
    if (t)
        t->requires_grad = tensor_rg;
    return t;
}

void jg_trace_set_resolver(jg_trace_resolve_fn resolve, void *user) {
    frame *f = top();
    JG_ASSERT(f);
    f->resolve = resolve;
    f->resolve_user = user;
}

jg_tensor *jg_trace_tensor(int v) {
    frame *f = top();
    if (!f)
        return jg_errorf_null("jg_trace_tensor: no trace is open");
    JG_ASSERT(v >= 0 && v < f->g->n_vals);
    return make_sym(f, v);
}

int jg_trace_value(jg_tensor *t) {
    frame *f = top();
    if (!f)
        return jg_errorf("no trace is open");
    if (t->sym) {
        if (t->sym->graph != f->g->id && f->resolve)
            return f->resolve(f->resolve_user, t);
        if (t->sym->graph != f->g->id)
            return jg_errorf("a traced tensor of another trace (an enclosing one, or one that "
                             "has ended) was used; pass it as an input instead");
        return t->sym->value;
    }
    const_entry *hit = NULL;
    for (int i = 0; i < f->n_consts && !hit; i++)
        if (f->consts[i].t == t)
            hit = &f->consts[i];
    if (hit && (!hit->snapshot || hit->version == t->storage->version)) {
        if (hit->writes && t->requires_grad && jg_grad_mode) {
            /* eager's later uses differentiate into the tensor itself; the
             * graph's new value has no history */
            char d[64];
            jg_describe(t, d, sizeof d);
            jg_trace_note_break("captured tensor %s is used with grad mode on after the program "
                                "wrote it in place",
                                d);
        }
        hit->used = true;
        return hit->value;
    }
    int v;
    bool rg = t->requires_grad && jg_grad_mode;
    bool created = f->id && t->storage->trace_id == f->id;
    /* A capturing frame makes every tensor from outside the program an
     * input, read again at every call and guarded by jg_compile (a tensor
     * that requires grad also gets its gradient through the compiled call).
     * Tensors the program made while traced are constants: copies, since
     * the program may still write into them after this use. */
    /* (a lifted tensor's value requires grad when the tensor does: grad
     * mode decides per op, so a first use under no_grad does not cut the
     * gradient of a later use with grad mode on) */
    if ((f->flags & JG_TRACE_LIFT) && (t->requires_grad || !created)) {
        if (f->n_lifted == f->cap_lifted) {
            int cap = f->cap_lifted ? f->cap_lifted * 2 : 4;
            jg_tensor **l = realloc(f->lifted, (size_t)cap * sizeof *l);
            if (l)
                f->lifted = l;
            int *lv = l ? realloc(f->lifted_val, (size_t)cap * sizeof *lv) : NULL;
            if (!lv)
                return jg_errorf("out of memory while tracing");
            f->lifted_val = lv;
            f->cap_lifted = cap;
        }
        jg_meta m;
        jg_meta_of(t, &m);
        char name[32];
        snprintf(name, sizeof name, "lifted%d", f->n_lifted);
        /* (a view made under no_grad that has no history: eager gives it no
         * edge, so no gradient is computed for it, nor are the values that
         * gradient would read kept) */
        bool edge = t->requires_grad && !(t->no_grad_view && !t->grad_fn);
        if ((v = jg_graph_add_input(f->g, &m, edge, name)) < 0)
            return -1;
        f->lifted_val[f->n_lifted] = v;
        f->lifted[f->n_lifted++] = jg_retain(t);
    } else if (created && !rg) {
        uint32_t capture = jg_trace_capture_pause();
        jg_tensor *copy = jg_keep(jg_clone(t)); /* ours, scope or not */
        jg_trace_capture_resume(capture);
        v = copy ? jg_graph_add_const(f->g, copy) : -1;
        jg_release(copy);
        if (v < 0)
            return -1;
        /* the entry holds t, so its address is not reused for another
         * tensor while the frame is open */
        const_entry e = {jg_retain(t), v, -1, true, true, t->storage->version, 0, false};
        if (hit) {
            jg_release(hit->t);
            *hit = e;
            return v;
        }
        if (add_const_entry(f, e) < 0) {
            jg_release(t);
            return -1;
        }
        return v;
    } else if ((v = jg_graph_add_const(f->g, t)) < 0) {
        return -1;
    }
    if (add_const_entry(f, (const_entry){t, v, -1, true, false, 0, 0, false}) < 0)
        return -1;
    return v;
}

static const_entry *find_entry(frame *f, const jg_tensor *t) {
    for (int i = 0; i < f->n_consts; i++)
        if (f->consts[i].t == t)
            return &f->consts[i];
    return NULL;
}

/* In-place writes of captured tensors (ops/inplace.c): only into a lifted
 * tensor of jg_compile's frame, when eager would record no history for the
 * write (jg_compile refuses one sharing storage with another input); its
 * value in the graph is then the op's result. */
static jg_tensor *captured_write_begin(jg_tensor *t, const jg_tensor *other, char *why, size_t n) {
    frame *f = top();
    if (!f || !(f->flags & JG_TRACE_LIFT) || jg_trace_capture != f->id) {
        snprintf(why, n, "in-place operations involving captured tensors cannot be traced here");
        return NULL;
    }
    if (jg_grad_mode && (t->requires_grad || (other && other->requires_grad))) {
        snprintf(why, n,
                 "with grad mode on the write would record history (or fail on a leaf); "
                 "in-place updates of captured tensors are traced without grad");
        return NULL;
    }
    /* the graph reads every captured tensor as it was at the call: a write
     * through one alias would not be seen through another */
    for (int i = 0; i < f->n_lifted; i++)
        if (f->lifted[i] != t && jg_same_storage(f->lifted[i], t)) {
            snprintf(why, n, "it shares storage with another captured tensor");
            return NULL;
        }
    int v = jg_trace_value(t);
    if (v < 0) {
        snprintf(why, n, "%s", jg_last_error());
        return NULL;
    }
    const_entry *hit = find_entry(f, t);
    if (hit && hit->viewed && f->seg) {
        /* (run in pieces, the write runs eagerly between two: the views,
         * then its tracked views, see it; in one graph a use of such a view
         * after the write is a break, stale_view) */
        snprintf(why, n, "the program made views of it, which a traced write would not update");
        return NULL;
    }
    bool lifted = false;
    for (int i = 0; i < f->n_lifted && !lifted; i++)
        lifted = f->lifted[i] == t;
    if (!hit || !lifted) {
        snprintf(why, n, "the program writes a call input it reached through its scope");
        return NULL;
    }
    jg_tensor *s = make_sym(f, v);
    if (s) {
        memcpy(s->stride, t->stride, sizeof(int64_t) * (size_t)t->ndim);
        s->requires_grad = false;
    } else {
        snprintf(why, n, "%s", jg_last_error());
    }
    return s;
}

static int captured_write_end(jg_tensor *t, jg_tensor *s) {
    frame *f = top();
    const_entry *hit = f ? find_entry(f, t) : NULL;
    JG_ASSERT(hit && s->sym && s->sym->graph == f->g->id);
    if (f->n_cw == f->cap_cw) {
        int cap = f->cap_cw ? f->cap_cw * 2 : 4;
        int *o = realloc(f->cw_old, (size_t)cap * sizeof *o);
        if (!o)
            return jg_errorf("out of memory while tracing");
        f->cw_old = o;
        f->cap_cw = cap;
    }
    f->cw_old[f->n_cw++] = hit->value;
    hit->value = s->sym->value;
    hit->writes++;
    f->any_writes = true;
    return 0;
}

int jg_trace_lifted_written(int k, int *value) {
    frame *f = top();
    JG_ASSERT(f && k >= 0 && k < f->n_lifted);
    const_entry *hit = find_entry(f, f->lifted[k]);
    JG_ASSERT(hit);
    *value = hit->value;
    return hit->writes;
}

static bool captured_written(const jg_tensor *t) {
    const_entry *hit = lifting() ? find_entry(top(), t) : NULL;
    return hit && hit->writes > 0;
}

static void note_grad_read(frame *f, jg_tensor *t, jg_tensor *grad) {
    for (int i = 0; i < f->n_gr; i++)
        if (f->gr_owner[i] == t)
            return;
    if (f->n_gr == f->cap_gr) {
        int cap = f->cap_gr ? f->cap_gr * 2 : 8;
        jg_tensor **o = realloc(f->gr_owner, (size_t)cap * sizeof *o);
        if (o)
            f->gr_owner = o;
        jg_tensor **g = o ? realloc(f->gr_grad, (size_t)cap * sizeof *g) : NULL;
        if (g)
            f->gr_grad = g;
        if (!o || !g) {
            jg_trace_note_break("out of memory while tracing");
            return;
        }
        f->cap_gr = cap;
    }
    f->gr_owner[f->n_gr] = jg_retain(t);
    f->gr_grad[f->n_gr++] = grad ? jg_retain(grad) : NULL;
}

static frame *lift_frame(void) {
    frame *f = top();
    return f && (f->flags & JG_TRACE_LIFT) && jg_trace_capture == f->id ? f : NULL;
}

int jg_trace_guard_value(jg_tensor *t) {
    frame *f = lift_frame();
    if (!f)
        return 0;
    if (!t || t->sym || !jg_is_contiguous(t))
        return jg_errorf("internal error: a value guard needs a contiguous concrete tensor");
    for (int i = 0; i < f->n_vg; i++)
        if (f->vg_t[i] == t)
            return 0;
    size_t n = (size_t)t->numel * jg_dtype_size(t->dtype);
    if (f->n_vg == f->cap_vg) {
        int cap = f->cap_vg ? f->cap_vg * 2 : 4;
        jg_tensor **ts = realloc(f->vg_t, (size_t)cap * sizeof *ts);
        if (ts)
            f->vg_t = ts;
        void **bs = ts ? realloc(f->vg_bytes, (size_t)cap * sizeof *bs) : NULL;
        if (bs)
            f->vg_bytes = bs;
        if (!ts || !bs)
            return jg_errorf("out of memory while tracing");
        f->cap_vg = cap;
    }
    void *copy = malloc(n ? n : 1);
    if (!copy)
        return jg_errorf("out of memory while tracing");
    memcpy(copy, jg_tensor_ptr(t), n);
    f->vg_t[f->n_vg] = jg_retain(t);
    f->vg_bytes[f->n_vg++] = copy;
    return 0;
}

int jg_trace_take_value_guards(jg_tensor ***ts, void ***bytes) {
    frame *f = top();
    JG_ASSERT(f);
    *ts = f->vg_t;
    *bytes = f->vg_bytes;
    int n = f->n_vg;
    f->vg_t = NULL;
    f->vg_bytes = NULL;
    f->n_vg = f->cap_vg = 0;
    return n;
}

static bool on_grad_read(jg_tensor *t, jg_tensor *grad, jg_tensor **as_traced) {
    frame *f = lift_frame();
    if (!f)
        return false;
    note_grad_read(f, t, grad);
    for (int i = 0; i < f->n_gs; i++)
        if (f->gs_owner[i] == t) {
            *as_traced = f->gs_grad[i];
            return true;
        }
    return false;
}

int jg_trace_grad_set(jg_tensor *t, jg_tensor *grad) {
    frame *f = lift_frame();
    if (!f)
        return jg_errorf("jg_trace_grad_set: no program is traced");
    note_grad_read(f, t, t->grad); /* (guarded: what the program started from) */
    for (int i = 0; i < f->n_gs; i++)
        if (f->gs_owner[i] == t) {
            jg_retain(grad);
            jg_release(f->gs_grad[i]);
            f->gs_grad[i] = grad;
            return 0;
        }
    if (f->n_gs == f->cap_gs) {
        int cap = f->cap_gs ? f->cap_gs * 2 : 8;
        jg_tensor **o = realloc(f->gs_owner, (size_t)cap * sizeof *o);
        if (o)
            f->gs_owner = o;
        jg_tensor **g = o ? realloc(f->gs_grad, (size_t)cap * sizeof *g) : NULL;
        if (!g)
            return jg_errorf("out of memory while tracing");
        f->gs_grad = g;
        f->cap_gs = cap;
    }
    f->gs_owner[f->n_gs] = jg_retain(t);
    f->gs_grad[f->n_gs++] = jg_retain(grad);
    return 0;
}

static int on_grad_clear(jg_tensor *t) {
    return lift_frame() ? jg_trace_grad_set(t, NULL) : -1;
}

int jg_trace_take_grad_sets(jg_tensor ***owners, jg_tensor ***grads) {
    frame *f = top();
    JG_ASSERT(f);
    *owners = f->gs_owner;
    *grads = f->gs_grad;
    int n = f->n_gs;
    f->gs_owner = f->gs_grad = NULL;
    f->n_gs = f->cap_gs = 0;
    return n;
}

jg_tensor *jg_trace_input_tensor(int value) {
    frame *f = lift_frame();
    if (!f)
        return NULL;
    for (int i = 0; i < f->n_consts; i++)
        if (f->consts[i].input >= 0 && f->consts[i].value == value)
            return f->consts[i].t;
    for (int k = 0; k < f->n_lifted; k++)
        if (f->lifted_val[k] == value)
            return f->lifted[k];
    return NULL;
}

int jg_trace_nodes_free(int n_nodes, const bool *nodes) {
    frame *f = lift_frame();
    if (!f)
        return jg_errorf("jg_trace_nodes_free: no program is traced");
    if (n_nodes > f->n_freed) {
        bool *grown = realloc(f->freed, (size_t)n_nodes * sizeof *grown);
        if (!grown)
            return jg_errorf("out of memory while tracing");
        memset(grown + f->n_freed, 0, (size_t)(n_nodes - f->n_freed) * sizeof *grown);
        f->freed = grown;
        f->n_freed = n_nodes;
    }
    for (int i = 0; i < n_nodes; i++)
        f->freed[i] = f->freed[i] || nodes[i];
    return 0;
}

bool jg_trace_in_program(void) {
    return lift_frame() != NULL;
}

bool jg_trace_node_freed(int node) {
    frame *f = lift_frame();
    return f && node >= 0 && node < f->n_freed && f->freed[node];
}

int jg_trace_take_grad_reads(jg_tensor ***owners, jg_tensor ***grads) {
    frame *f = top();
    JG_ASSERT(f);
    *owners = f->gr_owner;
    *grads = f->gr_grad;
    int n = f->n_gr;
    f->gr_owner = f->gr_grad = NULL;
    f->n_gr = f->cap_gr = 0;
    return n;
}

int jg_trace_n_lifted(jg_tensor *const **lifted) {
    frame *f = top();
    JG_ASSERT(f);
    *lifted = f->lifted;
    return f->n_lifted;
}

void jg_trace_note_retry_break(const char *fmt, ...) {
    frame *f = top();
    if (!f)
        return;
    if (lifting())
        f->read_breaks++; /* (after a read, a run in pieces splits here too) */
    if (!f->breaks++) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(f->reason, sizeof f->reason, fmt, ap);
        va_end(ap);
        f->retry = true;
    }
}

bool jg_trace_break_retry(void) {
    return n_frames && top()->retry;
}

/* ---- hooks ---- */

static int trace_op(jg_opcode op, const jg_attrs *a, jg_tensor *const *in, const jg_meta *out_meta,
                    jg_tensor **out) {
    frame *f = top();
    const jg_op_info *info = &jg_ops[op];
    if (!f)
        return jg_errorf("%s(): a traced tensor was used outside its trace", info->name);
    /* in a program run in pieces, the piece that wrote a captured tensor
     * (without history) closes before: a use of it with grad mode on when it
     * requires grad (the next piece reads the tensor itself, so eager's
     * gradient reaches it; in one graph a break, jg_trace_value), a view of
     * it (made from the tensor itself, it is its view as in eager mode), a
     * use of another captured tensor sharing its memory (which sees the
     * write as in eager mode) */
    for (int k = 0; k < info->n_in && f->seg; k++) {
        if (in[k]->sym || !jg_trace_captured(in[k]))
            continue;
        const_entry *hit = find_entry(f, in[k]);
        bool split = hit && hit->writes &&
                     ((in[k]->requires_grad && jg_grad_mode) || (info->flags & JG_OPF_VIEW));
        for (int i = 0; i < f->n_lifted && !split; i++)
            if (f->lifted[i] != in[k] && jg_same_storage(f->lifted[i], in[k])) {
                const_entry *w = find_entry(f, f->lifted[i]);
                split = w && w->writes;
            }
        if (split && on_symbolic_read(NULL, "a use of a captured tensor after the program "
                                            "wrote it in place")) {
            f = top();
            break;
        }
    }
    int ids[4];
    bool rg = false;
    for (int k = 0; k < info->n_in; k++) {
        /* (a view op only passes it on: bringing a view up to date after
         * such a write runs one with grad mode on; its uses are checked) */
        if (jg_grad_mode && f->n_ng && in[k]->sym && !(info->flags & JG_OPF_VIEW) &&
            written_without_grad(f, in[k]))
            return nograd_break("used");
        if (f->any_writes && stale_view(f, in[k])) {
            jg_trace_note_break("a view of a captured tensor is used after the program wrote "
                                "the tensor in place (the traced view keeps its old values)");
            return jg_errorf("a view of a captured tensor is used after the program wrote the "
                             "tensor in place");
        }
        if ((ids[k] = jg_trace_value(in[k])) < 0)
            return -1;
        rg |= f->g->vals[ids[k]].requires_grad;
        const_entry *hit = (info->flags & JG_OPF_VIEW) && !in[k]->sym ? find_entry(f, in[k]) : NULL;
        if (hit)
            hit->viewed = true;
    }
    /* the eager rule: history is recorded when grad mode is on and some input
     * requires grad */
    rg = rg && jg_grad_mode && !(info->flags & JG_OPF_NONDIFF);
    int outs[2];
    if (jg_graph_add_op(f->g, op, a, info->n_in, ids, out_meta, rg, outs) < 0)
        return -1;
    for (int k = 0; k < info->n_out; k++) {
        if (!(out[k] = make_sym(f, outs[k]))) {
            for (int j = 0; j < k; j++)
                jg_release(out[j]);
            return -1;
        }
        if (info->flags & JG_OPF_VIEW) {
            out[k]->is_view = true;
            out[k]->custom_view = in[0]->custom_view; /* (as jg_tensor_view_of) */
            out[k]->custom_view_multi = in[0]->custom_view_multi;
            /* the layout eager would give it (non-views are contiguous, as
             * the backends' outputs are) */
            jg_view_strides(op, a, in[0], out[k]->ndim, out[k]->shape, out[k]->stride);
        } else if (k == 0 && (info->flags & JG_OPF_ELEMENTWISE) && op != JG_OP_CLONE &&
                   out[k]->numel > 1) {
            /* an elementwise result keeps its operands' dim order, as in
             * eager, so contiguous() and view() decide as there; the
             * compiled call hands such an output out in that layout */
            jg_ew_layout(info->n_in, in, &out_meta[0], out[k]->stride);
        }
    }
    return 0;
}

static bool on_symbolic_read(const jg_tensor *t, const char *what) {
    frame *f = top();
    bool program = lifting(); /* a read in the program itself */
    if (!t) /* a split point that reads nothing (backward() of a computed tensor) */
        return program && f->seg && !f->breaks && f->seg(f->seg_user, NULL, what) == 0;
    if (program && f->seg && !f->breaks) {
        if (f->seg(f->seg_user, t, what) == 0)
            return true; /* (f is closed: a new frame is the innermost) */
        char why[600];
        snprintf(why, sizeof why, "%s", jg_last_error());
        jg_trace_note_break("%s", why);
        return false;
    }
    if (program && f)
        f->read_breaks++;
    char d[64];
    jg_describe(t, d, sizeof d);
    if (!t->sym)
        jg_trace_note_break("%s() read the values of captured tensor %s; they are read again at "
                            "every call, so data-dependent code cannot be compiled into a graph",
                            what, d);
    else
        jg_trace_note_break("%s() read the values of traced tensor %s (value %d); its data does "
                            "not exist while the program is traced, so data-dependent code cannot "
                            "be compiled into a graph",
                            what, d, t->sym->value);
    return false;
}

/* Eager work between two pieces of a program run in pieces: no frame is
 * open meanwhile (a frame opened then gets an array of its own). */
static _Thread_local struct suspended {
    frame *frames;
    int n, cap;
    uint32_t capture;
} * suspended;
static _Thread_local int n_suspended;

static uint64_t trace_suspend(void) {
    struct suspended *s = realloc(suspended, sizeof *s * (size_t)(n_suspended + 1));
    JG_ASSERT(s); /* (a few bytes; the caller cannot recover a half-hidden stack) */
    suspended = s;
    s[n_suspended] = (struct suspended){frames, n_frames, cap_frames, jg_trace_capture};
    frames = NULL;
    n_frames = cap_frames = 0;
    jg_trace_capture = 0;
    return (uint64_t)n_suspended++;
}

static void trace_resume(uint64_t saved) {
    JG_ASSERT(n_frames == 0 && (int)saved == n_suspended - 1);
    free(frames);
    struct suspended *s = &suspended[--n_suspended];
    frames = s->frames;
    n_frames = s->n;
    cap_frames = s->cap;
    jg_trace_capture = s->capture;
    if (!n_suspended) {
        free(suspended);
        suspended = NULL;
    }
}

/* *save: the frames hidden (high half) and jg_trace_capture (low half). */
static bool enter_graph(uint64_t graph, uint64_t *save) {
    for (int i = n_frames - 2; i >= 0; i--)
        if (frames[i].g->id == graph) {
            *save = (uint64_t)(n_frames - 1 - i) << 32 | jg_trace_capture;
            /* what jg_trace_capture was while frame i was the innermost */
            jg_trace_capture = frames[i + 1].outer_capture;
            n_frames = i + 1;
            return true;
        }
    return false;
}

static void leave_graph(uint64_t save) {
    n_frames += (int)(save >> 32);
    JG_ASSERT(n_frames <= cap_frames);
    jg_trace_capture = (uint32_t)save;
}

static bool lifting(void) {
    frame *f = top();
    return f && (f->flags & JG_TRACE_LIFT) && jg_trace_capture == f->id;
}

/* Whether traced t, a view of a captured tensor (which the trace records
 * no base for), was made before a traced write of that tensor: its value
 * is one of the tensor's old ones, where eager's view shows the write. */
static bool stale_view(const frame *f, const jg_tensor *t) {
    if (t->sym && t->view && t->view->base->sym)
        t = t->view->base; /* (a tracked view of such a view is as stale as it) */
    if (!t->sym || !t->is_view || t->view || t->sym->graph != f->g->id)
        return false;
    int v = t->sym->value;
    for (int steps = 0; steps < 64 && f->g->vals[v].kind == JG_VAL_NODE; steps++) {
        const jg_gnode *nd = &f->g->nodes[f->g->vals[v].node];
        if (nd->kind != JG_GN_OP || !(jg_ops[nd->op].flags & JG_OPF_VIEW))
            break; /* (a value some write made) */
        v = nd->in[0];
    }
    for (int i = 0; i < f->n_lifted; i++)
        if (f->lifted_val[i] == v) {
            const_entry *hit = find_entry((frame *)f, f->lifted[i]);
            return hit && hit->writes && hit->value != v;
        }
    /* (or of a value the tensor held between two writes) */
    for (int i = 0; i < f->n_cw; i++)
        if (f->cw_old[i] == v)
            return true;
    return false;
}

static bool written_without_grad(const frame *f, const jg_tensor *t) {
    const jg_tensor *root = t->view ? t->view->base : t;
    for (int i = 0; i < f->n_ng; i++)
        if (f->ng_root[i] == root)
            return true;
    return false;
}

static int nograd_break(const char *what) {
    jg_trace_note_break("a traced tensor that requires grad is %s with grad mode on after the "
                        "program wrote it in place without grad mode (eager keeps its history)",
                        what);
    return jg_errorf("a traced tensor that requires grad is %s with grad mode on after the "
                     "program wrote it in place without grad mode",
                     what);
}

/* Notes that root's current value is overwritten: a saved tensor holding
 * it (or a view of it) fails eager's backward (jg_trace_overwrites). */
static int note_overwrite(frame *f, const jg_tensor *root, bool via_view) {
    if (!root->sym || root->sym->graph != f->g->id)
        return 0;
    if (f->n_ow == f->cap_ow) {
        int cap = f->cap_ow ? f->cap_ow * 2 : 8;
        const jg_tensor **r = realloc(f->ow_root, (size_t)cap * sizeof *r);
        if (r)
            f->ow_root = r;
        jg_trace_overwrite *o = r ? realloc(f->ow, (size_t)cap * sizeof *o) : NULL;
        if (!o)
            return jg_errorf("out of memory while tracing");
        f->ow = o;
        f->cap_ow = cap;
    }
    uint64_t v = jg_version(root);
    int value = root->sym->value, input = -1;
    if (f->g->vals[value].kind == JG_VAL_INPUT)
        input = f->g->vals[value].index;
    for (int i = 0; i < f->n_ow; i++) /* (one bump per write, as eager's) */
        if (f->ow_root[i] == root) {
            f->ow[i].end_version = v + 1;
            f->ow[i].last = f->n_ow;
            input = f->ow[i].input; /* (its first write saw the placeholder) */
        }
    f->ow_root[f->n_ow] = root;
    f->ow[f->n_ow] = (jg_trace_overwrite){value, input, v, v + 1, via_view, f->g->n_vals, f->n_ow};
    f->n_ow++;
    return 0;
}

static int traced_write(const jg_tensor *root, bool via_view) {
    frame *f = top();
    if (!f)
        return 0;
    if (note_overwrite(f, root, via_view) < 0)
        return -1;
    if (!jg_grad_mode) {
        if (!root->requires_grad || written_without_grad(f, root))
            return 0;
        if (f->n_ng == f->cap_ng) {
            int cap = f->cap_ng ? f->cap_ng * 2 : 4;
            const jg_tensor **r = realloc(f->ng_root, (size_t)cap * sizeof *r);
            if (!r)
                return jg_errorf("out of memory while tracing");
            f->ng_root = r;
            f->cap_ng = cap;
        }
        f->ng_root[f->n_ng++] = root;
        return 0;
    }
    if (written_without_grad(f, root))
        return nograd_break("written");
    for (int i = 0; i < f->n_wr; i++)
        if (f->wr_root[i] == root)
            return 0;
    if (f->n_wr == f->cap_wr) {
        int cap = f->cap_wr ? f->cap_wr * 2 : 4;
        const jg_tensor **r = realloc(f->wr_root, (size_t)cap * sizeof *r);
        if (r)
            f->wr_root = r;
        bool *v = r ? realloc(f->wr_view, (size_t)cap * sizeof *v) : NULL;
        if (!v)
            return jg_errorf("out of memory while tracing");
        f->wr_view = v;
        f->cap_wr = cap;
    }
    f->wr_root[f->n_wr] = root;
    f->wr_view[f->n_wr++] = via_view;
    return 0;
}

int jg_trace_written_without_grad(const jg_tensor *t) {
    frame *f = top();
    return f && written_without_grad(f, t);
}

int jg_trace_overwrites(const jg_trace_overwrite **ow) {
    frame *f = top();
    *ow = f ? f->ow : NULL;
    return f ? f->n_ow : 0;
}

int jg_trace_first_write(const jg_tensor *t, bool *via_view) {
    frame *f = top();
    for (int i = 0; f && i < f->n_wr; i++)
        if (f->wr_root[i] == t) {
            *via_view = f->wr_view[i];
            return i;
        }
    return -1;
}

int jg_graph_break(const char *why) {
    if (!jg_trace_in_program())
        return 0;
    jg_trace_note_break("%s", why ? why : "jg_graph_break");
    return jg_errorf("%s", why ? why : "jg_graph_break");
}

static void on_untraceable(const char *why) {
    jg_trace_note_break("%s", why);
}

__attribute__((constructor)) static void trace_init(void) {
    jg_hooks.on_untraceable = on_untraceable;
    jg_hooks.enter_graph = enter_graph;
    jg_hooks.leave_graph = leave_graph;
    jg_hooks.lifting = lifting;
    jg_hooks.captured_write_begin = captured_write_begin;
    jg_hooks.captured_write_end = captured_write_end;
    jg_hooks.on_grad_read = on_grad_read;
    jg_hooks.on_grad_clear = on_grad_clear;
    jg_hooks.captured_written = captured_written;
    jg_hooks.traced_write = traced_write;
    jg_trace_backward_init(); /* (links trace/backward.c into static programs) */
    jg_trace_op_hook = trace_op;
    jg_hooks.on_symbolic_read = on_symbolic_read;
    jg_hooks.on_symbolic_new = on_symbolic_new;
    jg_hooks.trace_suspend = trace_suspend;
    jg_hooks.trace_resume = trace_resume;
    jg_trace_custom_init(); /* also links trace/custom.c into static programs */
}
