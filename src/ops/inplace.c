/* In-place ops.  Without history they run the kernel straight into the
 * tensor.  With history they compute out of place (so the recorded node and
 * its VJP are the ordinary ones), copy the result in and move the tensor onto
 * the new node — PyTorch's "rebase history"; a view writes through to its
 * base's history (see ops/viewtrack.h).  Every one bumps the version.
 * Traced, they are functionalized: the tensor (and its base) take the out
 * of place result as their new value; jg_compile writes mutated inputs back
 * after the call (compile/mutation.c). */
#include "autograd/node.h"
#include "core/iter.h"
#include "ops/optable.h"
#include "ops/viewtrack.h"

#include <stdio.h>
#include <string.h>

/* bool < integer < floating, the kinds PyTorch's can_cast orders */
static int kind(jg_dtype d) {
    return d == JG_BOOL ? 0 : jg_dtype_is_float(d) ? 2 : 1;
}
#define MSG_INTERNAL_OVERLAP                                                                       \
    "unsupported operation: more than one element of the written-to tensor refers to a single "    \
    "memory location. Please clone() the tensor before performing the operation."
#define MSG_PARTIAL_OVERLAP                                                                        \
    "unsupported operation: some elements of the input tensor and the written-to tensor refer to " \
    "a single memory location. Please clone() the tensor before performing the operation."

static int untraceable(const char *why) {
    if (jg_hooks.on_untraceable)
        jg_hooks.on_untraceable(why);
    return jg_errorf("%s", why);
}

#define MSG_NO_GRAD_VIEW                                                                           \
    "A view was created in no_grad mode and is being modified inplace with grad mode "             \
    "enabled. " JG_MSG_NO_GRAD_VIEW_TAIL

static int check_target(const char *fn, jg_tensor *self, jg_tensor *other) {
    if (!self)
        return jg_errorf("%s: tensor is NULL", fn);
    if (jg_trace_captured(self) || (!self->sym && other && jg_trace_captured(other))) {
        /* it would happen once, at trace time: a graph break (nothing was
         * written; the eager run writes) */
        char why[200];
        snprintf(why, sizeof why,
                 "%s() on a tensor captured from outside the program: in-place operations "
                 "involving captured tensors cannot be traced yet",
                 fn);
        return untraceable(why);
    }
    /* PyTorch checks the written view before it asks any operand for its
     * history (which may fail for a stale no_grad view: jg_view_refresh) */
    if (!self->sym && jg_grad_mode && self->view && self->view->no_grad &&
        (self->requires_grad || self->view->base->requires_grad || (other && other->requires_grad)))
        return jg_errorf(MSG_NO_GRAD_VIEW);
    /* a view made while its base did not require grad has no history of its
     * own until it is brought up to date: PyTorch takes it for a leaf when
     * its base (not a leaf) was written since (its check reads the view's
     * grad_fn without remaking it) */
    if (!self->sym && jg_grad_mode && self->view && !self->view->no_grad && !self->grad_fn &&
        self->view->base->requires_grad && self->view->base->grad_fn && jg_view_stale(self))
        return jg_errorf("a leaf Variable that requires grad is being used in an in-place "
                         "operation.");
    /* traced, such a view (no history while its base's value has some):
     * a graph break, so that the eager run decides */
    if (self->sym && jg_grad_mode && self->view && !self->no_grad_view && !self->requires_grad &&
        self->view->base->requires_grad && jg_view_stale(self))
        return untraceable("an in-place write into a view made before its base required grad, "
                           "written since: eager mode may take the view for a leaf");
    if (jg_view_sync(self) < 0 || jg_view_sync_use(other) < 0)
        return -1;
    if (!self->sym && other && other->sym)
        return jg_errorf("%s: writing a traced value into a tensor the program did not receive "
                         "as an input cannot be traced; pass that tensor as an input",
                         fn);
    /* traced: the eager run raises the error */
    if (self->sym && self->custom_view && self->requires_grad && jg_grad_mode) {
        char why[200];
        snprintf(why, sizeof why,
                 "%s() on a view a custom Function returned, which eager mode refuses", fn);
        return untraceable(why);
    }
    /* traced: whether an input is a leaf is checked when the call writes it
     * back (compile/mutation.c), for its first write with grad mode on */
    if (self->sym && jg_hooks.traced_write &&
        jg_hooks.traced_write(self->view ? self->view->base : self, self->view != NULL) < 0)
        return -1;
    if (self->sym || !jg_grad_mode)
        return 0;
    if (self->custom_view && self->requires_grad)
        return jg_errorf(
            "Output %d of %s is a view and is being modified inplace. %s", self->output_nr,
            self->grad_fn ? self->grad_fn->vt->name(self->grad_fn) : "a custom Function",
            self->custom_view_multi
                ? "This view is the output of a function that returns multiple views. Such "
                  "functions do not allow the output views to be modified inplace. You should "
                  "replace the inplace operation by an out-of-place one."
                : "This view was created inside a custom Function (or because an input was "
                  "returned as-is) and the autograd logic to handle view+inplace would override "
                  "the custom backward associated with the custom Function, leading to incorrect "
                  "gradients. This behavior is forbidden. You can fix this by cloning the output "
                  "of the custom Function.");
    if ((self->no_grad_view && !self->grad_fn && !(self->view && !self->view->no_grad)) ||
        (self->view && self->view->no_grad && self->view->base->requires_grad))
        return jg_errorf(MSG_NO_GRAD_VIEW);
    if (self->view && self->view->base->requires_grad && !self->view->base->grad_fn)
        return jg_errorf("a view of a leaf Variable that requires grad is being used in an "
                         "in-place operation.");
    if (self->requires_grad && !self->grad_fn)
        return jg_errorf("a leaf Variable that requires grad is being used in an in-place "
                         "operation.");
    return 0;
}

static bool same_geometry(const jg_tensor *a, const jg_tensor *b) {
    if (a->offset != b->offset || !jg_same_shape(a, b))
        return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] > 1 && a->stride[d] != b->stride[d])
            return false;
    return true;
}

/* First and last element offsets t touches in its storage. */
static void extent(const jg_tensor *t, int64_t *lo, int64_t *hi) {
    *lo = *hi = t->offset;
    for (int d = 0; d < t->ndim; d++) {
        int64_t span = (t->shape[d] - 1) * t->stride[d];
        if (span < 0)
            *lo += span;
        else
            *hi += span;
    }
}

/* PyTorch's memory-overlap checks for a written tensor: self must not have
 * two elements at one address; other must not partly overlap self.  Where
 * an overlap is too irregular to judge (strided operands), other is read
 * through a copy (*copy_other), so no kernel reads what it already wrote. */
static int check_overlap(const jg_tensor *self, const jg_tensor *other, bool *copy_other) {
    *copy_other = false;
    if (self->numel == 0)
        return 0;
    for (int d = 0; d < self->ndim; d++)
        if (self->shape[d] > 1 && self->stride[d] == 0)
            return jg_errorf(MSG_INTERNAL_OVERLAP);
    if (!other || other == self || other->storage != self->storage || other->numel == 0 ||
        same_geometry(self, other))
        return 0;
    int64_t lo1, hi1, lo2, hi2;
    extent(self, &lo1, &hi1);
    extent(other, &lo2, &hi2);
    if (hi1 < lo2 || hi2 < lo1)
        return 0;
    if (jg_dense(self) && jg_dense(other) && self->dtype == other->dtype)
        return jg_errorf(MSG_PARTIAL_OVERLAP);
    *copy_other = true;
    return 0;
}

/* Traced: the overlap checks eager would make, on the geometry the traced
 * views would have in their base's memory (a base stands for its storage). */
static int check_overlap_traced(jg_tensor *self, jg_tensor *other) {
    jg_tensor ga, gb; /* (only geometry, dtype and the storage identity are read) */
    jg_tensor *g[2] = {&ga, &gb}, *t[2] = {self, other && other->sym ? other : NULL};
    for (int k = 0; k < 2 && t[k]; k++) {
        g[k]->dtype = t[k]->dtype;
        g[k]->storage = (jg_storage *)(void *)(t[k]->view ? t[k]->view->base : t[k]);
        if (!jg_view_traced_geometry(t[k], &g[k]->ndim, g[k]->shape, g[k]->stride, &g[k]->offset))
            return 0;
        g[k]->numel = jg_shape_numel(g[k]->ndim, g[k]->shape);
    }
    bool copy_other;
    return check_overlap(&ga, t[1] ? &gb : NULL, &copy_other);
}

static void set_history(jg_tensor *t, jg_tensor *r) {
    jg_node_retain(r->grad_fn);
    jg_node_release(t->grad_fn);
    t->grad_fn = r->grad_fn;
    t->output_nr = r->output_nr;
    t->requires_grad = r->requires_grad;
}

/* (r may be self's own memory: ctx.mark_dirty hands over an alias) */
static void copy_unless_same(jg_tensor *self, const jg_tensor *r) {
    if (r->storage != self->storage || !same_geometry(self, r))
        jg_copy_data(self, r);
}

/* Traced: self becomes r's value (functionalization).  Writing into a
 * traced view gives its base a new value with the view's region replaced;
 * the view and the base's other views take theirs from it when next used. */
static int commit_traced(jg_tensor *self, jg_tensor *r) {
    (self->view ? self->view->base : self)->inline_storage.version++;
    if (!r->sym) { /* a value computed from constants only (zero_, copy_ of one) */
        static const jg_attrs none;
        jg_meta m;
        jg_meta_of(r, &m);
        jg_tensor *t;
        if (jg_trace_op_hook(JG_OP_CLONE, &none, &r, &m, &t) < 0)
            return -1;
        r = jg_scope_track(t);
    }
    if (self->view) {
        jg_tensor *b = self->view->base, *nb = jg_view_scatter(self, r);
        if (!nb)
            return -1;
        *b->sym = *nb->sym; /* the record lives in each tensor */
        b->requires_grad = nb->requires_grad;
        return jg_view_refresh(self);
    }
    *self->sym = *r->sym;
    self->requires_grad = r->requires_grad;
    return 0;
}

/* Makes self hold r's values and history (r: self's shape and dtype; its
 * own storage, or exactly self's memory).  A root tensor moves onto r's history (PyTorch's "rebase
 * history"); a tracked view writes through to its base, whose history
 * becomes "the base with this region replaced" (CopySlices), and then
 * remakes its own from the base's. */
int jg_inplace_commit(jg_tensor *self, jg_tensor *r) {
    if (self->sym)
        return commit_traced(self, r);
    if (self->view && !self->view->no_grad) {
        jg_tensor *b = self->view->base;
        jg_tensor *nb = r->requires_grad || b->requires_grad ? jg_view_scatter(self, r) : NULL;
        if ((r->requires_grad || b->requires_grad) && !nb)
            return -1;
        copy_unless_same(self, r);
        self->storage->version++;
        if (nb) {
            set_history(b, nb);
            jg_autograd_name_node(b, "CopySlices"); /* PyTorch's node of a write into a view */
        }
        return jg_view_refresh(self);
    }
    /* a root, or a view outside autograd (of a detached tensor): its own
     * history moves, as PyTorch's does */
    copy_unless_same(self, r);
    self->storage->version++;
    set_history(self, r);
    return 0;
}

/* While jg_compile traces, an in-place op on a tensor the program made
 * itself (not traced: a constant of the graph; check_target refused captured
 * ones) computes it now instead of tracing the ops it is made of.  On a
 * traced tensor capture stays on: a captured operand (`v.copy_(K)`) must
 * become a lifted input, not a snapshot of its value at trace time. */
#define UNTRACED(call)                                                                             \
    do {                                                                                           \
        uint32_t capture_ = jg_trace_capture;                                                      \
        jg_trace_capture = 0;                                                                      \
        int rc_ = (call);                                                                          \
        jg_trace_capture = capture_;                                                               \
        return rc_;                                                                                \
    } while (0)

static int inplace_run(const char *fn, jg_opcode op, const jg_attrs *a, jg_tensor *self,
                       jg_tensor *other);

static int copy_run(jg_tensor *dst, jg_tensor *src);

/* A program run in pieces: closes the piece before the write (its
 * stand-ins, self among them, become real), then writes eagerly, with
 * eager's checks and history; the next piece reads what it wrote.  1 when
 * the program cannot be split here (nothing happened). */
static int write_between_pieces(const char *fn, jg_opcode op, const jg_attrs *a, jg_tensor *self,
                                jg_tensor *other, bool copy, const char *what) {
    if (!jg_hooks.on_symbolic_read || !jg_hooks.on_symbolic_read(NULL, what))
        return 1;
    if (self->sym || (other && other->sym))
        return jg_errorf("internal error: %s() on a tensor that stayed traced after its piece ran",
                         fn);
    uint64_t saved = jg_hooks.trace_suspend();
    int rc = check_target(fn, self, other) < 0 ? -1
             : copy                            ? copy_run(self, other)
                                               : inplace_run(fn, op, a, self, other);
    jg_hooks.trace_resume(saved);
    return rc;
}

/* Why a write into traced tensor self cannot be traced (NULL: it can):
 * self views a tensor from outside the trace (a captured one, or one the
 * program made that requires grad), for which the trace records no base,
 * so the write would not reach it; or self is a view made without grad
 * mode (no_grad_view) written with grad mode on when it, its base or the
 * operand requires grad: eager refuses it (after any error of an earlier
 * write the call checks, a leaf input: so the eager run decides). */
static const char *untraced_write(const jg_tensor *self, const jg_tensor *other) {
    const jg_tensor *root = self->view ? self->view->base : self;
    if (root->sym && root->is_view && !root->view)
        return "through a view of a tensor captured from outside the program: the write would "
               "not reach the tensor";
    if (jg_grad_mode && self->view && self->no_grad_view && root->requires_grad)
        return "with grad mode on into a view made without it: eager mode refuses it";
    if (jg_grad_mode && self->view && self->no_grad_view &&
        (self->requires_grad || (other && other->requires_grad)))
        return "with history into a view made without grad mode: eager mode refuses it";
    return NULL;
}

/* An in-place op (copy: jg_copy_) writing a tensor captured from outside
 * the program being traced: it is traced on a stand-in holding the
 * tensor's value in the graph, whose new value then becomes the tensor's
 * (a mutation jg_compile writes back after every call; nothing is written
 * now).  Writes that cannot be traced that way are graph breaks. */
static int inplace_captured(const char *fn, jg_opcode op, const jg_attrs *a, jg_tensor *self,
                            jg_tensor *other, bool copy) {
    char why[300] = "";
    /* a tracked view (made by an earlier piece) is written between two
     * pieces: eager's checks (a view of a leaf that requires grad, a view
     * made without grad mode) and the write through to its base, which a
     * written-back copy of the view could not order with the base's uses */
    if (self->view) {
        int rc = write_between_pieces(fn, op, a, self, other, copy,
                                      "an in-place write through a view of a captured tensor "
                                      "(it runs eagerly)");
        if (rc != 1)
            return rc;
    }
    jg_tensor *s = jg_hooks.captured_write_begin
                       ? jg_hooks.captured_write_begin(self, other, why, sizeof why)
                       : NULL;
    if (!s) {
        int rc = write_between_pieces(fn, op, a, self, other, copy,
                                      "an in-place write the trace cannot hold (it runs eagerly)");
        if (rc != 1)
            return rc;
    }
    if (!s) {
        char msg[400];
        snprintf(msg, sizeof msg, "%s() on a tensor captured from outside the program: %s", fn,
                 why[0] ? why
                        : "in-place operations involving captured tensors cannot be "
                          "traced yet");
        return untraceable(msg);
    }
    jg_scope_track(s);
    if (check_target(fn, s, other) < 0)
        return -1;
    int rc = copy ? copy_run(s, other) : inplace_run(fn, op, a, s, other);
    return rc < 0 ? -1 : jg_hooks.captured_write_end(self, s);
}

/* A traced write that cannot be traced (untraced_write: why): written
 * between two pieces when the program runs in pieces, else a graph break
 * (the call runs eagerly). */
static int inplace_untraced(const char *fn, jg_opcode op, const jg_attrs *a, jg_tensor *self,
                            jg_tensor *other, bool copy, const char *why) {
    int rc = write_between_pieces(fn, op, a, self, other, copy,
                                  "an in-place write the trace cannot hold (it runs eagerly)");
    if (rc != 1)
        return rc;
    char msg[400];
    snprintf(msg, sizeof msg, "%s() %s", fn, why);
    return untraceable(msg);
}

static int inplace(const char *fn, jg_opcode op, const jg_attrs *a, jg_tensor *self,
                   jg_tensor *other) {
    if (self && jg_trace_captured(self))
        return inplace_captured(fn, op, a, self, other, false);
    const char *why = self && self->sym ? untraced_write(self, other) : NULL;
    if (why)
        return inplace_untraced(fn, op, a, self, other, false, why);
    if (check_target(fn, self, other) < 0)
        return -1;
    if (self->sym)
        return inplace_run(fn, op, a, self, other);
    UNTRACED(inplace_run(fn, op, a, self, other));
}

static int inplace_run(const char *fn, jg_opcode op, const jg_attrs *a, jg_tensor *self,
                       jg_tensor *other) {
    const jg_op_info *info = &jg_ops[op];
    if (info->n_in == 2 && !other)
        return jg_errorf("%s: argument 1 is NULL", fn);
    jg_meta im[2], om;
    jg_meta_of(self, &im[0]);
    if (other)
        jg_meta_of(other, &im[1]);
    if (info->infer(a, im, &om) < 0)
        return -1;
    if (om.ndim != self->ndim || memcmp(om.shape, self->shape, sizeof(int64_t) * (size_t)om.ndim)) {
        char s1[160], s2[160];
        jg_format_shape(s1, sizeof s1, self->ndim, self->shape);
        jg_format_shape(s2, sizeof s2, om.ndim, om.shape);
        return jg_errorf("output with shape %s doesn't match the broadcast shape %s", s1, s2);
    }
    /* the result type: int64 inputs of a FLOAT op (div) compute in float32 */
    jg_dtype rt = (info->flags & JG_OPF_FLOAT) && om.dtype == JG_I64 ? JG_F32 : om.dtype;
    if (self->dtype == JG_I64 && rt != JG_I64) /* int64 += float, int64 /= int64 */
        return jg_errorf("result type %s can't be cast to the desired output type Long",
                         jg_dtype_torch_name(rt));
    /* PyTorch's can_cast: the result may not move to a higher kind (bool <
     * integer < floating) than self's */
    if (other && kind(jg_dtype_promote(self->dtype, other->dtype)) > kind(self->dtype))
        return jg_errorf("result type %s can't be cast to the desired output type %s",
                         jg_dtype_torch_name(jg_dtype_promote(self->dtype, other->dtype)),
                         jg_dtype_torch_name(self->dtype));
    if ((info->flags & JG_OPF_NOBOOL) && self->dtype == JG_BOOL &&
        (!other || other->dtype == JG_BOOL))
        return jg_bool_refused(op);
    bool copy_other = false;
    if (self->sym ? check_overlap_traced(self, other) < 0
                  : check_overlap(self, other, &copy_other) < 0)
        return -1;
    jg_tensor *in[2] = {self, other};
    int n_in = info->n_in;
    if (!self->sym && !jg_any_requires_grad(n_in, in)) {
        jg_scope_push();
        int rc = 0;
        /* (masked_fill's operand is its bool mask, read as such) */
        bool cast = other && other->dtype != self->dtype && op != JG_OP_MASKED_FILL;
        if (other && (cast || copy_other))
            rc = (in[1] = cast ? jg_to_dtype(other, self->dtype) : jg_clone(other)) ? 0 : -1;
        if (rc == 0)
            rc = info->kernel(a, in, &self);
        if (rc == 0)
            self->storage->version++;
        jg_scope_pop();
        return rc;
    }
    jg_scope_push();
    int rc = -1;
    /* a VJP that reads self must see its old values, not the new ones */
    bool needs[2] = {self->requires_grad, other && other->requires_grad};
    if (!self->sym && (jg_op_saved_inputs(op, needs) & 1u)) {
        in[0] = jg_clone(self);
        /* self as the other operand too (a.mul_(a)): the node must not save
         * self, which becomes its output (a reference cycle, leaked); an
         * alias with self's current history shares storage and version */
        if (in[0] && in[1] == self) {
            jg_tensor *al = jg_alias_no_history(self);
            if (al) {
                jg_node_retain(self->grad_fn);
                al->grad_fn = self->grad_fn;
                al->output_nr = self->output_nr;
                al->requires_grad = self->requires_grad;
            }
            in[0] = (in[1] = jg_scope_track(al)) ? in[0] : NULL;
        }
    }
    jg_tensor *r = in[0] ? jg_op1(op, a, in[0], in[1]) : NULL;
    if (r && r->dtype != self->dtype)
        r = jg_to_dtype(r, self->dtype);
    if (r)
        rc = jg_inplace_commit(self, r);
    jg_scope_pop();
    return rc;
}

int jg_inplace_op(const char *fn, jg_opcode op, const jg_attrs *a, jg_tensor *self,
                  jg_tensor *other) {
    return inplace(fn, op, a, self, other);
}

int jg_add_(jg_tensor *a, jg_tensor *b) {
    return inplace("jg_add_", JG_OP_ADD, NULL, a, b);
}

int jg_sub_(jg_tensor *a, jg_tensor *b) {
    return inplace("jg_sub_", JG_OP_SUB, NULL, a, b);
}

int jg_mul_(jg_tensor *a, jg_tensor *b) {
    return inplace("jg_mul_", JG_OP_MUL, NULL, a, b);
}

int jg_div_(jg_tensor *a, jg_tensor *b) {
    return inplace("jg_div_", JG_OP_DIV, NULL, a, b);
}

int jg_mul_scalar_(jg_tensor *a, double s) {
    jg_attrs at = {.s = s};
    return inplace("jg_mul_scalar_", JG_OP_MUL_SCALAR, &at, a, NULL);
}

int jg_zero_(jg_tensor *a) {
    return inplace("jg_zero_", JG_OP_ZERO, NULL, a, NULL);
}

/* r's values, with a history that also gives dst's old history a zero
 * gradient (PyTorch's CopyBackwards: dst keeps requiring grad and its old
 * history stays reachable): a slice_scatter over all of dst. */
static jg_tensor *over_history(jg_tensor *dst, jg_tensor *r) {
    int64_t one = 1;
    jg_tensor *d = dst->ndim ? dst : jg_reshape(dst, 1, &one);
    jg_tensor *s = dst->ndim ? r : jg_reshape(r, 1, &one);
    if (!d || !s)
        return NULL;
    /* attrs (dim 0, start 0, end, step 1, copy 1): the copy flag tells
     * backward that dst's old value was replaced as a whole */
    jg_attrs a = {.n = 5};
    a.i[2] = d->shape[0];
    a.i[3] = 1;
    a.i[4] = 1;
    jg_tensor *o = jg_op1(JG_OP_SLICE_SCATTER, &a, d, s);
    return o && !dst->ndim ? jg_reshape(o, 0, NULL) : o;
}

int jg_copy_(jg_tensor *dst, jg_tensor *src) {
    if (dst && jg_trace_captured(dst))
        return inplace_captured("jg_copy_", JG_OP_CLONE, NULL, dst, src, true);
    const char *why = dst && dst->sym ? untraced_write(dst, src) : NULL;
    if (why)
        return inplace_untraced("jg_copy_", JG_OP_CLONE, NULL, dst, src, true, why);
    if (check_target("jg_copy_", dst, src) < 0)
        return -1;
    if (dst->sym)
        return copy_run(dst, src);
    UNTRACED(copy_run(dst, src));
}

int jg_inplace_take_(jg_tensor *dst, jg_tensor *src) {
    if (!dst || !src || !src->sym || src->view || dst->view ||
        (dst->sym && untraced_write(dst, src)) || dst->dtype != src->dtype ||
        dst->ndim != src->ndim ||
        memcmp(dst->shape, src->shape, sizeof(int64_t) * (size_t)dst->ndim))
        return jg_copy_(dst, src);
    jg_tensor *s = dst;
    if (jg_trace_captured(dst)) { /* as inplace_captured, committing instead of copying */
        char why[300] = "";
        s = jg_hooks.captured_write_begin ? jg_hooks.captured_write_begin(dst, src, why, sizeof why)
                                          : NULL;
        if (!s) {
            char msg[400];
            snprintf(msg, sizeof msg,
                     "jg_copy_() on a tensor captured from outside the program: %s",
                     why[0] ? why
                            : "in-place operations involving captured tensors cannot be traced "
                              "yet");
            return untraceable(msg);
        }
        jg_scope_track(s);
    }
    if (!s->sym)
        return jg_copy_(dst, src);
    if (check_target("jg_copy_", s, src) < 0)
        return -1;
    int rc = s->view ? copy_run(s, src) : jg_inplace_commit(s, src);
    if (rc < 0)
        return -1;
    return s != dst ? jg_hooks.captured_write_end(dst, s) : 0;
}

static int copy_run(jg_tensor *dst, jg_tensor *src) {
    if (!src)
        return jg_errorf("jg_copy_: source is NULL");
    jg_meta dm, sm, bm;
    jg_meta_of(dst, &dm);
    jg_meta_of(src, &sm);
    if (jg_broadcast_shapes(&dm, &sm, &bm) < 0 || bm.ndim != dst->ndim ||
        memcmp(bm.shape, dst->shape, sizeof(int64_t) * (size_t)bm.ndim)) {
        char s1[160], s2[160];
        jg_format_shape(s1, sizeof s1, dst->ndim, dst->shape);
        jg_format_shape(s2, sizeof s2, src->ndim, src->shape);
        return jg_errorf("The size of tensor a (%s) must match the size of tensor b (%s): "
                         "copy_ source does not broadcast to the destination",
                         s1, s2);
    }
    bool copy_src = false;
    if (dst->sym ? check_overlap_traced(dst, src) < 0 : check_overlap(dst, src, &copy_src) < 0)
        return -1;
    jg_tensor *in[2] = {dst, src};
    if (!dst->sym && !jg_any_requires_grad(2, in)) {
        jg_scope_push();
        jg_tensor *s = copy_src ? jg_clone(src) : src;
        if (s) {
            jg_copy_data(dst, s);
            dst->storage->version++;
        }
        jg_scope_pop();
        return s ? 0 : -1;
    }
    /* the new values depend on src only: dst's old history gets a zero
     * gradient (none when dst did not require grad); a view's base gets the
     * region replaced (jg_inplace_commit) */
    jg_scope_push();
    jg_tensor *e = jg_expand(src, dst->ndim, dst->shape);
    jg_tensor *c = e ? jg_to_dtype(e, dst->dtype) : NULL;
    jg_tensor *r = c ? jg_clone(c) : NULL;
    if (r && dst->requires_grad && !(dst->view && !dst->view->no_grad))
        r = over_history(dst, r);
    int rc = r ? jg_inplace_commit(dst, r) : -1;
    jg_scope_pop();
    return rc;
}
