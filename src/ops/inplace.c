/* In-place ops.  Without history they run the kernel straight into the
 * tensor.  With history they compute out of place (so the recorded node and
 * its VJP are the ordinary ones), copy the result in and move the tensor onto
 * the new node — PyTorch's "rebase history".  Every one bumps the version. */
#include "autograd/node.h"
#include "core/iter.h"
#include "ops/optable.h"

#include <stdio.h>
#include <string.h>

/* bool < integer < floating, the kinds PyTorch's can_cast orders */
static int kind(jg_dtype d) {
    return d == JG_BOOL ? 0 : jg_dtype_is_float(d) ? 2 : 1;
}

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
        if (jg_hooks.on_untraceable)
            jg_hooks.on_untraceable(why);
        return jg_errorf("%s", why);
    }
    if (self->sym || (other && other->sym))
        return jg_errorf("%s: in-place operations cannot be traced; use the out-of-place op", fn);
    if (jg_grad_mode && self->no_grad_view && !self->grad_fn)
        return jg_errorf("A view was created in no_grad mode and is being modified inplace with "
                         "grad mode enabled. Given that this use case is ambiguous and "
                         "error-prone, it is forbidden. You can clarify your code by moving both "
                         "the view and the inplace either both inside the no_grad block (if you "
                         "don't want the inplace to be tracked) or both outside (if you want the "
                         "inplace to be tracked).");
    if (jg_grad_mode && self->requires_grad && !self->grad_fn)
        return jg_errorf("a leaf Variable that requires grad is being used in an in-place "
                         "operation.");
    return 0;
}

/* Makes self hold r's values and history. */
static int rebase(jg_tensor *self, jg_tensor *r) {
    jg_copy_data(self, r);
    self->storage->version++;
    if (r->grad_fn) {
        jg_node_retain(r->grad_fn);
        jg_node_release(self->grad_fn);
        self->grad_fn = r->grad_fn;
        self->output_nr = r->output_nr;
        self->requires_grad = true;
    }
    return 0;
}

/* While jg_compile traces, an in-place op reaches here only on tensors the
 * program made itself (check_target): constants of the graph, so it computes
 * them now instead of tracing the ops it is made of. */
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

static int inplace(const char *fn, jg_opcode op, const jg_attrs *a, jg_tensor *self,
                   jg_tensor *other) {
    if (check_target(fn, self, other) < 0)
        return -1;
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
    jg_tensor *in[2] = {self, other};
    int n_in = info->n_in;
    if (!jg_any_requires_grad(n_in, in)) {
        jg_scope_push();
        int rc = 0;
        if (other && other->dtype != self->dtype)
            rc = (in[1] = jg_to_dtype(other, self->dtype)) ? 0 : -1;
        if (rc == 0)
            rc = info->kernel(a, in, &self);
        if (rc == 0)
            self->storage->version++;
        jg_scope_pop();
        return rc;
    }
    if (self->is_view)
        return jg_errorf("%s: in-place operations on views that take part in autograd are not "
                         "supported; use the out-of-place op",
                         fn);
    jg_scope_push();
    int rc = -1;
    /* a VJP that reads self must see its old values, not the new ones */
    if (info->flags & JG_OPF_SAVE_IN) {
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
        rc = rebase(self, r);
    jg_scope_pop();
    return rc;
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

static int copy_run(jg_tensor *dst, jg_tensor *src);

int jg_copy_(jg_tensor *dst, jg_tensor *src) {
    if (check_target("jg_copy_", dst, src) < 0)
        return -1;
    UNTRACED(copy_run(dst, src));
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
    jg_tensor *in[2] = {dst, src};
    if (!jg_any_requires_grad(2, in)) {
        jg_copy_data(dst, src);
        dst->storage->version++;
        return 0;
    }
    if (dst->is_view)
        return jg_errorf("jg_copy_: in-place operations on views that take part in autograd are "
                         "not supported; use the out-of-place op");
    /* the new values depend on src only: dst's old history gets no gradient */
    jg_scope_push();
    jg_tensor *e = jg_expand(src, dst->ndim, dst->shape);
    jg_tensor *c = e ? jg_to_dtype(e, dst->dtype) : NULL;
    jg_tensor *r = c ? jg_clone(c) : NULL;
    int rc = r ? rebase(dst, r) : -1;
    if (rc == 0 && !r->grad_fn) {
        jg_node_release(dst->grad_fn); /* src needs no grad: dst now has none */
        dst->grad_fn = NULL;
        dst->requires_grad = false;
    }
    jg_scope_pop();
    return rc;
}
