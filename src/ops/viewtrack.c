/* Differentiable views: base tracking, history rebasing and the scatter that
 * writes a view's new values into its base (see ops/viewtrack.h). */
#include "ops/viewtrack.h"

#include <stdlib.h>
#include <string.h>

typedef struct view_step {
    jg_opcode op;
    jg_attrs a;
} view_step;

/* Concrete: the storage's version counter; traced: the base's current value
 * (a new jg_sym per in-place op), which changes exactly when it is written. */
static uint64_t base_version(const jg_tensor *b) {
    /* traced: a write gives the base a new value (its record is copied in) */
    return b->sym ? ((uint64_t)b->sym->graph << 32) ^ (uint32_t)b->sym->value : b->storage->version;
}

bool jg_view_traced_geometry(const jg_tensor *t, int *ndim, int64_t *shape, int64_t *stride,
                             int64_t *offset) {
    const jg_tensor *b = t->view ? t->view->base : t;
    int nd = b->ndim;
    int64_t off = 0, ns[JG_MAX_DIMS];
    memcpy(shape, b->shape, sizeof(int64_t) * JG_MAX_DIMS);
    /* the base's own layout: a traced value carries eager's (an input's,
     * guarded; an elementwise result follows its operands'), and reshape
     * of a transposed one copies as eager's does */
    memcpy(stride, b->stride, sizeof(int64_t) * (size_t)nd);
    int n = t->view ? t->view->n_steps : 0;
    const view_step *s = t->view ? t->view->steps : NULL;
    for (int k = 0; k < n; k++) {
        const jg_attrs *sa = &s[k].a;
        switch (s[k].op) {
        case JG_OP_SLICE: {
            int64_t st = sa->n >= 4 ? sa->i[3] : 1;
            off += sa->i[1] * stride[sa->i[0]];
            shape[sa->i[0]] = (sa->i[2] - sa->i[1] + st - 1) / st;
            stride[sa->i[0]] *= st;
            break;
        }
        case JG_OP_PERMUTE: {
            int64_t sh[JG_MAX_DIMS], st[JG_MAX_DIMS];
            for (int d = 0; d < nd; d++) {
                sh[d] = shape[sa->i[d]];
                st[d] = stride[sa->i[d]];
            }
            memcpy(shape, sh, sizeof(int64_t) * (size_t)nd);
            memcpy(stride, st, sizeof(int64_t) * (size_t)nd);
            break;
        }
        case JG_OP_EXPAND: {
            int lead = sa->n - nd;
            for (int d = sa->n - 1; d >= 0; d--) {
                int64_t st = d < lead ? 0 : stride[d - lead], sh = d < lead ? 1 : shape[d - lead];
                stride[d] = sh == 1 && sa->i[d] != 1 ? 0 : st;
                shape[d] = sa->i[d];
            }
            nd = sa->n;
            break;
        }
        case JG_OP_RESHAPE:
            if (!jg_reshape_strides(nd, shape, stride, sa->n, sa->i, ns))
                return false; /* (cannot happen: such a step is not recorded) */
            nd = sa->n;
            memcpy(shape, sa->i, sizeof(int64_t) * (size_t)nd);
            memcpy(stride, ns, sizeof(int64_t) * (size_t)nd);
            break;
        default:
            return false;
        }
    }
    *ndim = nd;
    *offset = off;
    return true;
}

void jg_view_traced_strides(const jg_tensor *t, int64_t *stride) {
    int nd;
    int64_t shape[JG_MAX_DIMS], st[JG_MAX_DIMS], off;
    if (t->sym && t->view && jg_view_traced_geometry(t, &nd, shape, st, &off) && nd == t->ndim)
        memcpy(stride, st, sizeof(int64_t) * (size_t)nd);
    else
        memcpy(stride, t->stride, sizeof(int64_t) * (size_t)t->ndim);
}

/* Eager reshape copies when the layout does not allow a view, and then
 * writes do not reach the base. */
static bool traced_reshape_is_view(const jg_tensor *in, const jg_attrs *a) {
    int nd;
    int64_t shape[JG_MAX_DIMS], stride[JG_MAX_DIMS], off, ns[JG_MAX_DIMS];
    return jg_view_traced_geometry(in, &nd, shape, stride, &off) &&
           jg_reshape_strides(nd, shape, stride, a->n, a->i, ns);
}

int jg_view_track(jg_opcode op, const jg_attrs *a, jg_tensor *in, jg_tensor *out) {
    if (out->sym ? !in->sym : out->storage != in->storage)
        return 0;
    if (out->sym && op == JG_OP_RESHAPE && !traced_reshape_is_view(in, a)) {
        out->is_view = false; /* eagerly a copy */
        return 0;
    }
    /* concrete views made without grad mode (whatever their base) are
     * tracked only to refuse what PyTorch's creation meta refuses: an
     * in-place op on them, or a use after their base was written, once
     * their base requires grad (jg_view_refresh) */
    bool no_grad = !out->sym && (!jg_grad_mode || (in->view && in->view->no_grad));
    if (!in->view && in->is_view && !in->sym)
        return 0; /* a view whose base is unknown (made without grad mode, detach) */
    jg_tensor *base = in->view ? in->view->base : in;
    int n = in->view ? in->view->n_steps : 0;
    jg_view_info *v = malloc(sizeof *v);
    view_step *s = malloc(sizeof *s * (size_t)(n + 1));
    if (!v || !s) {
        free(v);
        free(s);
        return jg_errorf("out of memory recording a view");
    }
    if (n)
        memcpy(s, in->view->steps, sizeof *s * (size_t)n);
    s[n].op = op;
    s[n].a = *a;
    v->base = jg_retain(base);
    v->version = base_version(base);
    v->no_grad = no_grad;
    v->n_steps = n + 1;
    v->steps = s;
    out->view = v;
    return 0;
}

int jg_view_steps_make(int n, const jg_opcode *ops, const jg_attrs *const *attrs, void **steps) {
    view_step *s = malloc(sizeof *s * (size_t)(n > 0 ? n : 1));
    if (!s)
        return jg_errorf("out of memory recording a view");
    for (int k = 0; k < n; k++) {
        s[k].op = ops[k];
        s[k].a = *attrs[k];
    }
    *steps = s;
    return 0;
}

int jg_view_track_steps(jg_tensor *in, jg_tensor *out, const void *steps, int n) {
    if (n <= 0 || out->view || out->sym || in->sym || out->storage != in->storage)
        return 0;
    bool no_grad = !jg_grad_mode || (in->view && in->view->no_grad);
    if (!in->view && in->is_view)
        return 0; /* a view whose base is unknown */
    jg_tensor *base = in->view ? in->view->base : in;
    int m = in->view ? in->view->n_steps : 0;
    jg_view_info *v = malloc(sizeof *v);
    view_step *s = malloc(sizeof *s * (size_t)(m + n));
    if (!v || !s) {
        free(v);
        free(s);
        return jg_errorf("out of memory recording a view");
    }
    if (m)
        memcpy(s, in->view->steps, sizeof *s * (size_t)m);
    memcpy(s + m, steps, sizeof *s * (size_t)n);
    v->base = jg_retain(base);
    v->version = base_version(base);
    v->no_grad = no_grad;
    v->n_steps = m + n;
    v->steps = s;
    out->view = v;
    out->is_view = true;
    return 0;
}

/* The first `upto` steps of v applied to x (borrowed from the scope). */
static jg_tensor *replay(const jg_view_info *v, int upto, jg_tensor *x) {
    const view_step *s = v->steps;
    for (int k = 0; k < upto && x; k++)
        x = jg_op1(s[k].op, &s[k].a, x, NULL);
    return x;
}

/* Traced view t's base became a tracked view itself (a piece's output
 * viewing a captured tensor): t is recorded from that view's base, through
 * its steps and then t's, as eager records a view of a view.  0 or -1. */
static int rebase_on_root(jg_tensor *t) {
    jg_view_info *v = t->view;
    const jg_view_info *bv = v->base->view;
    if (!bv)
        return 0;
    view_step *s = malloc(sizeof *s * (size_t)(bv->n_steps + v->n_steps));
    if (!s)
        return jg_errorf("out of memory recording a view");
    memcpy(s, bv->steps, sizeof *s * (size_t)bv->n_steps);
    memcpy(s + bv->n_steps, v->steps, sizeof *s * (size_t)v->n_steps);
    jg_tensor *old = v->base;
    v->base = jg_retain(bv->base);
    v->no_grad = v->no_grad || bv->no_grad;
    free(v->steps);
    v->steps = s;
    v->n_steps += bv->n_steps;
    jg_release(old);
    return 0;
}

int jg_view_become_concrete(jg_tensor *t) {
    jg_view_info *v = t->view;
    JG_ASSERT(v && t->sym && !v->base->sym);
    if (rebase_on_root(t) < 0)
        return -1;
    bool gm = jg_grad_mode;
    jg_grad_mode = !v->no_grad;
    jg_scope_push();
    jg_tensor *r = replay(v, v->n_steps, v->base);
    if (r && r->storage != v->base->storage)
        r = jg_errorf_null("internal error: a traced view does not view its base's memory once "
                           "the base is computed");
    if (r) {
        jg_tensor_become(t, r);
        v->version = base_version(v->base);
    }
    jg_scope_pop();
    jg_grad_mode = gm;
    return r ? 0 : -1;
}

int jg_view_become_output(jg_tensor *t, jg_tensor *value) {
    jg_view_info *v = t->view;
    JG_ASSERT(v && t->sym && !v->base->sym && !value->sym);
    if (!value->grad_fn) /* (no history to take: the base's, as eager's) */
        return jg_view_become_concrete(t);
    if (rebase_on_root(t) < 0)
        return -1;
    bool gm = jg_grad_mode;
    jg_grad_mode = false; /* (the memory only: the history is value's) */
    jg_scope_push();
    jg_tensor *r = replay(v, v->n_steps, v->base);
    if (r && r->storage != v->base->storage)
        r = jg_errorf_null("internal error: a traced view does not view its base's memory once "
                           "the base is computed");
    if (r) {
        jg_tensor_become(t, r);
        jg_node_retain(value->grad_fn);
        jg_node_release(t->grad_fn);
        t->grad_fn = value->grad_fn;
        t->output_nr = value->output_nr;
        t->requires_grad = value->requires_grad;
        t->no_grad_view = false;
        v->version = base_version(v->base);
    }
    jg_scope_pop();
    jg_grad_mode = gm;
    return r ? 0 : -1;
}

int jg_view_copy_record(jg_tensor *t, const jg_tensor *from) {
    const jg_view_info *f = from->view;
    if (!f || t->view)
        return 0;
    jg_view_info *v = malloc(sizeof *v);
    view_step *s = malloc(sizeof *s * (size_t)(f->n_steps ? f->n_steps : 1));
    if (!v || !s) {
        free(v);
        free(s);
        return jg_errorf("out of memory recording a view");
    }
    memcpy(s, f->steps, sizeof *s * (size_t)f->n_steps);
    *v = *f;
    v->base = jg_retain(f->base);
    v->steps = s;
    t->view = v;
    t->is_view = true;
    return 0;
}

int jg_view_track_alias(jg_tensor *in, jg_tensor *out) {
    if (out == in || out->view || out->sym || in->sym || out->storage != in->storage ||
        in->requires_grad || (!in->view && in->is_view))
        return 0;
    jg_tensor *base = in->view ? in->view->base : in;
    int m = in->view ? in->view->n_steps : 0;
    jg_view_info *v = malloc(sizeof *v);
    view_step *s = malloc(sizeof *s * (size_t)(m + 1));
    if (!v || !s) {
        free(v);
        free(s);
        return jg_errorf("out of memory recording a view");
    }
    if (m)
        memcpy(s, in->view->steps, sizeof *s * (size_t)m);
    s[m].op = JG_OP_RESHAPE; /* (to its own shape: view_as(self)) */
    s[m].a = (jg_attrs){.n = in->ndim};
    memcpy(s[m].a.i, in->shape, sizeof(int64_t) * (size_t)in->ndim);
    v->base = jg_retain(base);
    v->version = base_version(base);
    v->no_grad = true;
    v->n_steps = m + 1;
    v->steps = s;
    out->view = v;
    out->is_view = true;
    return 0;
}

void jg_view_follow_base(jg_tensor *t) {
    const jg_view_info *v = t->view;
    if (v && !t->grad_fn && !t->sym && v->base->requires_grad != t->requires_grad &&
        (v->base->requires_grad || t->no_grad_view))
        t->requires_grad = t->no_grad_view = v->base->requires_grad;
}

bool jg_view_stale(const jg_tensor *t) {
    return t->view && base_version(t->view->base) != t->view->version;
}

int jg_view_check_use(const jg_tensor *t) {
    const jg_view_info *v = t->view;
    if (!v || !jg_grad_mode)
        return 0;
    /* a concrete view made without grad mode before the trace (by an
     * earlier piece of a program run in pieces, or before the call) may
     * have a base the trace wrote since, which its version does not show
     * yet */
    bool refused = v->no_grad && !t->sym && (t->grad_fn || v->base->requires_grad);
    bool pending =
        refused && !v->base->sym && jg_hooks.captured_written && jg_hooks.captured_written(v->base);
    if (!pending && base_version(v->base) == v->version)
        return 0;
    /* a view made without grad mode is never remade from its base; used
     * with grad mode on once its base (or another view) was written while
     * the base requires grad, PyTorch refuses it (when its grad_fn is asked).
     * Run in pieces, the piece so far runs first, so that eager's earlier
     * writes (a traced one of the base among them) are done when it fails;
     * in one graph, a traced write of the base pending: a graph break, and
     * the eager run refuses it */
    if (refused) {
        static const char why[] = "a use with grad mode on of a view made without it, after a "
                                  "write of its base (eager mode refuses it)";
        if (!(jg_hooks.on_symbolic_read && jg_hooks.on_symbolic_read(NULL, why)) && pending) {
            if (jg_hooks.on_untraceable)
                jg_hooks.on_untraceable(why);
            return jg_errorf("%s", why);
        }
        if (base_version(v->base) != v->version)
            return jg_errorf("A view was created in no_grad mode and its base or another view of "
                             "its base has been modified inplace with grad mode enabled. %s",
                             JG_MSG_NO_GRAD_VIEW_TAIL);
        return 0;
    }
    /* traced (a traced view follows its base): a graph break, so that the
     * call runs eagerly and fails there, after eager's earlier writes */
    if (t->sym && t->no_grad_view && v->base->requires_grad) {
        const char *why = "a view made without grad mode is used with grad mode on after its base "
                          "was written: eager mode refuses it";
        if (jg_hooks.on_untraceable)
            jg_hooks.on_untraceable(why);
        return jg_errorf("%s", why);
    }
    return 0;
}

int jg_view_refresh(jg_tensor *t) {
    jg_view_info *v = t->view;
    jg_view_follow_base(t);
    uint64_t ver = base_version(v->base);
    if (ver == v->version || v->no_grad)
        return 0;
    /* a view without history of a base that does not require grad keeps
     * its own flag: a leaf made by requires_grad_ on a view stays that
     * leaf, as PyTorch's grad_fn() leaves such a view alone */
    if (!t->sym && !t->grad_fn && !v->base->requires_grad)
        return 0;
    /* PyTorch remakes the history whatever the grad mode (traced too, so
     * a compiled program sees the view eager mode sees) */
    bool gm = jg_grad_mode;
    jg_grad_mode = true;
    /* a view of an enclosing trace's tensor (reached inside a custom
     * function's traced forward) is remade in its own graph, where it lives */
    uint64_t outer = 0;
    bool entered = t->sym && jg_hooks.enter_graph && jg_hooks.enter_graph(t->sym->graph, &outer);
    /* a concrete view of a concrete base gets concrete history, also while
     * a program is traced (its base was written between two pieces of a
     * program run in pieces, compile/segments.c) */
    uint32_t capture = jg_trace_capture;
    if (!t->sym && !v->base->sym)
        jg_trace_capture = 0;
    jg_scope_push();
    jg_tensor *r = replay(v, v->n_steps, v->base);
    jg_trace_capture = capture;
    if (r) {
        if (t->sym) {
            *t->sym = *r->sym; /* the record lives in each tensor */
        } else {
            jg_node_retain(r->grad_fn);
            jg_node_release(t->grad_fn);
            t->grad_fn = r->grad_fn;
            t->output_nr = r->output_nr;
            /* (history from its base now: not a view without history that
             * only followed its base's flag, jg_view_follow_base) */
            t->no_grad_view = false;
        }
        t->requires_grad = r->requires_grad;
        v->version = ver;
    }
    jg_scope_pop();
    if (entered)
        jg_hooks.leave_graph(outer);
    jg_grad_mode = gm;
    return r ? 0 : -1;
}

/* base's new value when src replaces all of it through a view: still a
 * slice_scatter over the whole base, so backward gives the old value the
 * gradient with all of it replaced, keeping the gradient's history under
 * create_graph (PyTorch's CopySlices: grad.clone() with the view's part
 * overwritten), rather than no history at all. */
static jg_tensor *scatter_all(jg_tensor *base, jg_tensor *src) {
    int64_t one = 1;
    jg_tensor *b = base->ndim ? base : jg_reshape(base, 1, &one);
    jg_tensor *x = base->ndim ? src : jg_reshape(src, 1, &one);
    if (!b || !x)
        return NULL;
    jg_attrs a = {.n = 3};
    a.i[2] = b->shape[0];
    jg_tensor *o = jg_op1(JG_OP_SLICE_SCATTER, &a, b, x);
    return o && !base->ndim ? jg_reshape(o, 0, NULL) : o;
}

jg_tensor *jg_view_scatter(jg_tensor *t, jg_tensor *src) {
    const jg_view_info *v = t->view;
    const view_step *s = v->steps;
    int n = v->n_steps;
    jg_tensor *small[8], **parents = small;
    if (n > 8 && !(parents = malloc(sizeof *parents * (size_t)n)))
        return jg_errorf_null("out of memory writing into a view");
    /* parents[k]: the tensor step k was applied to */
    parents[0] = v->base;
    jg_tensor *cur = src;
    bool sliced = false;
    for (int k = 1; k < n && cur; k++)
        if (!(parents[k] = jg_op1(s[k - 1].op, &s[k - 1].a, parents[k - 1], NULL)))
            cur = NULL;
    for (int k = n - 1; k >= 0 && cur; k--) {
        jg_tensor *p = parents[k];
        switch (s[k].op) {
        case JG_OP_SLICE:
            cur = jg_op1(JG_OP_SLICE_SCATTER, &s[k].a, p, cur);
            sliced = true;
            break;
        case JG_OP_PERMUTE: {
            int inv[JG_MAX_DIMS];
            for (int d = 0; d < s[k].a.n; d++)
                inv[s[k].a.i[d]] = d;
            cur = jg_permute(cur, inv);
            break;
        }
        case JG_OP_RESHAPE:
        case JG_OP_EXPAND: /* (an expand that adds no overlap only adds size-1 dims) */
            if (jg_shape_numel(p->ndim, p->shape) != cur->numel) {
                cur = jg_errorf_null("unsupported operation: more than one element of the "
                                     "written-to tensor refers to a single memory location. "
                                     "Please clone() the tensor before performing the operation.");
                break;
            }
            cur = jg_reshape(cur, p->ndim, p->shape);
            break;
        default:
            cur = jg_errorf_null("internal error: view step %d has no scatter", (int)s[k].op);
        }
    }
    if (parents != small)
        free(parents);
    return cur && !sliced ? scatter_all(v->base, cur) : cur;
}
