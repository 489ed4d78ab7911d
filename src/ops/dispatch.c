/* Eager dispatch: the one path every op call takes.  It promotes dtypes,
 * applies the op's shape rule, then either hands a traced call to the tracer
 * or runs the kernel and records autograd history. */
#include "autograd/node.h"
#include "core/iter.h"
#include "ops/decls.h"
#include "ops/viewtrack.h"

#include <string.h>

jg_trace_op_fn jg_trace_op_hook;

static jg_dtype target_dtype(const jg_op_info *info, jg_tensor *const *in) {
    jg_dtype d = in[0]->dtype;
    if (info->flags & JG_OPF_PROMOTE)
        for (int k = 1; k < info->n_in; k++)
            d = jg_dtype_promote(d, in[k]->dtype);
    if ((info->flags & JG_OPF_FLOAT) && !jg_dtype_is_float(d))
        d = JG_F32;
    return d;
}

int jg_bool_refused(jg_opcode op) {
    switch (op) {
    case JG_OP_SUB:
        return jg_errorf("Subtraction, the `-` operator, with two bool tensors is not supported. "
                         "Use the `^` or `logical_xor()` operator instead.");
    case JG_OP_NEG:
        return jg_errorf("Negation, the `-` operator, on a bool tensor is not supported. If you "
                         "are trying to invert a mask, use the `~` or `logical_not()` operator "
                         "instead.");
    case JG_OP_RELU:
        return jg_errorf("Boolean inputs not supported for relu");
    case JG_OP_FLOOR:
    case JG_OP_CEIL:
    case JG_OP_TRUNC:
    case JG_OP_ROUND:
        return jg_errorf("\"%s_vml_cpu\" not implemented for 'Bool'", jg_ops[op].name);
    case JG_OP_ADDCMUL:
        return jg_errorf("\"addcmul_cpu_out\" not implemented for 'Bool'");
    case JG_OP_FLOOR_DIVIDE:
        return jg_errorf("\"div_floor_cpu\" not implemented for 'Bool'");
    default:
        return jg_errorf("\"%s_cpu\" not implemented for 'Bool'", jg_ops[op].name);
    }
}

/* The shape rule's result without running it: elementwise ops whose inputs
 * (after promotion) all have one shape give an output of that shape and
 * dtype, which is what jg_infer_ew1/jg_infer_ew2 compute (and they cannot
 * fail then). */
static bool same_shape_ew(const jg_op_info *info, jg_tensor *const *in) {
    if (info->infer == jg_infer_ew1)
        return true;
    if (info->infer != jg_infer_ew2)
        return false;
    return jg_same_shape(in[0], in[1]);
}

/* {.s = s}, zeroed with plain stores (gcc's `rep stos` for the 120-byte
 * struct costs more than the rest of a tiny op). */
static __attribute__((optimize("no-tree-loop-distribute-patterns"))) void scalar_attrs(jg_attrs *at,
                                                                                       double s) {
    _Static_assert(sizeof *at % sizeof(uint64_t) == 0, "jg_attrs size");
    uint64_t *w = (uint64_t *)(void *)at;
#pragma GCC unroll 16
    for (size_t i = 0; i < sizeof *at / sizeof *w; i++)
        w[i] = 0;
    at->s = s;
}

/* Integer remainder / fmod / floor_divide: their kernels refuse a zero
 * divisor, which the dense rows of the shortcut would not. */
static inline bool int_div(jg_opcode op, jg_dtype dt) {
    return !jg_dtype_is_float(dt) &&
           (op == JG_OP_REMAINDER || op == JG_OP_FMOD || op == JG_OP_FLOOR_DIVIDE);
}

/* The common eager case, taken before anything else: an elementwise.def op
 * (to_dtype is not one) on concrete, dense operands of one dtype and one shape that
 * needs no promotion.  It does what the general path below does for them --
 * no casts, the output has the input's shape and dtype (jg_infer_ew1/ew2),
 * one kernel row call, history, scope -- with fewer checks.  `a` is the
 * call's attributes; when it is NULL for a JG_OPF_SCALAR op, the attributes
 * are {.s = s} and are only built if history is recorded.  Returns 1 when
 * the call does not qualify. */
static inline __attribute__((always_inline)) int ew_shortcut(jg_opcode op, const jg_op_info *info,
                                                             const jg_attrs *a, double s,
                                                             jg_tensor *x, jg_tensor *y,
                                                             jg_tensor **out) {
    if (info->n_in == 1)
        y = x;
    /* (tracked views take the general path, which brings their history up to date) */
    if (!x || !y || x->sym || y->sym || jg_trace_capture || x->view || y->view ||
        x->dtype != y->dtype || (x->dtype == JG_BOOL && (info->flags & JG_OPF_NOBOOL)) ||
        ((info->flags & JG_OPF_FLOAT) && !jg_dtype_is_float(x->dtype)) || int_div(op, x->dtype))
        return 1;
    if (x != y && (!jg_same_shape(x, y) || !jg_dense(y)))
        return 1;
    if (!jg_dense(x))
        return 1;
    jg_tensor *o = jg_tensor_alloc(x->dtype, x->ndim, x->shape);
    if (!o)
        return -1;
    if (o->numel > 0) /* the dense loop jg_ew_run's one row call runs here (o is fresh) */
        jg_ew_dense[op][x->dtype](o->numel, o->storage->data, jg_tensor_ptr(x), jg_tensor_ptr(y),
                                  s);
    if (!(info->flags & JG_OPF_NONDIFF) && jg_grad_mode && (x->requires_grad || y->requires_grad)) {
        jg_attrs at;
        if (!a && (info->flags & JG_OPF_SCALAR)) {
            scalar_attrs(&at, s);
            a = &at;
        }
        jg_tensor *in[2] = {x, y};
        if (jg_autograd_record_op(op, a, info->n_in, in, 1, &o) < 0) {
            jg_release(o);
            return -1;
        }
    }
    out[0] = jg_scope_track(o);
    return 0;
}

static inline bool has_row(jg_opcode op) {
    return jg_ew_dense[op][0] != NULL; /* the elementwise.def ops (to_dtype is not one) */
}

static int op_call_general(jg_opcode op, const jg_attrs *a, jg_tensor *const *in_arg,
                           jg_tensor **out);

/* The public elementwise functions: the shortcut, else straight to the
 * general path (jg_op_call would only try the shortcut again). */
jg_tensor *jg_ew_call(jg_opcode op, jg_tensor *x, jg_tensor *y) {
    jg_tensor *o, *in[2] = {x, y};
    int r = has_row(op) ? ew_shortcut(op, &jg_ops[op], NULL, 0.0, x, y, &o) : 1;
    if (r > 0)
        r = op_call_general(op, NULL, in, &o);
    return r == 0 ? o : NULL;
}

jg_tensor *jg_ew_call_scalar(jg_opcode op, jg_tensor *x, double s) {
    jg_tensor *o, *in[2] = {x, NULL};
    int r = has_row(op) ? ew_shortcut(op, &jg_ops[op], NULL, s, x, NULL, &o) : 1;
    if (r > 0) {
        jg_attrs at;
        scalar_attrs(&at, s);
        r = op_call_general(op, &at, in, &o);
    }
    return r == 0 ? o : NULL;
}

/* PyTorch's is_non_overlapping_and_dense: some permutation of t's dims is
 * row-major dense (size-1 dims aside). */
static bool dense_in_some_order(const jg_tensor *t) {
    int nd = t->ndim, perm[JG_MAX_DIMS], n = 0;
    for (int d = 0; d < nd; d++)
        if (t->shape[d] >= 2)
            perm[n++] = d;
    for (int i = 1; i < n; i++) /* by stride, ascending */
        for (int j = i; j > 0 && t->stride[perm[j]] < t->stride[perm[j - 1]]; j--) {
            int x = perm[j];
            perm[j] = perm[j - 1];
            perm[j - 1] = x;
        }
    int64_t need = 1;
    for (int i = 0; i < n; i++) {
        if (t->stride[perm[i]] != need)
            return false;
        need *= t->shape[perm[i]];
    }
    return true;
}

/* The layout PyTorch's TensorIterator gives an elementwise result, so that
 * .view() and .stride() answer as there (the strides of size-1 dims aside,
 * which neither reads): contiguous when every operand is;
 * the operands' strides when they all have the result's shape and the same
 * dense strides; otherwise dims ordered by the operands' strides (the
 * first operand whose strides differ decides; broadcast dims do not vote;
 * equal strides put the smaller dim inner).  Writes st and returns true
 * when the result is not simply contiguous. */
bool jg_ew_layout(int n_in, jg_tensor *const *in, const jg_meta *om, int64_t *st) {
    int nd = om->ndim;
    if (nd < 2)
        return false;
    bool same = true, contig = true, dense = true;
    for (int k = 0; k < n_in; k++) {
        bool sh = in[k]->ndim == nd;
        for (int d = 0; d < nd && sh; d++)
            sh = in[k]->shape[d] == om->shape[d];
        same &= sh;
        contig &= jg_dense(in[k]);
        dense &= sh && dense_in_some_order(in[k]);
        if (dense && k > 0)
            dense = !memcmp(in[k]->stride, in[0]->stride, sizeof(int64_t) * (size_t)nd);
    }
    if (same && contig)
        return false;
    if (same && dense) {
        memcpy(st, in[0]->stride, sizeof(int64_t) * (size_t)nd);
        return true;
    }
    int64_t bst[4][JG_MAX_DIMS]; /* strides aligned to the result; 0 where broadcast */
    for (int k = 0; k < n_in; k++)
        for (int d = 0; d < nd; d++) {
            int e = d - (nd - in[k]->ndim);
            bst[k][d] = e < 0 || (in[k]->shape[e] == 1 && om->shape[d] != 1) ? 0 : in[k]->stride[e];
        }
    int perm[JG_MAX_DIMS]; /* innermost first */
    for (int j = 0; j < nd; j++)
        perm[j] = nd - 1 - j;
    for (int i = 1; i < nd; i++) { /* TensorIterator's insertion sort with ties */
        int d1 = i;
        for (int d0 = i - 1; d0 >= 0; d0--) {
            int a = perm[d0], b = perm[d1], cmp = 0;
            for (int k = 0; k < n_in && !cmp; k++) {
                int64_t s0 = bst[k][a], s1 = bst[k][b];
                if (s0 == 0 || s1 == 0)
                    continue;
                cmp = s0 < s1 ? -1 : s0 > s1 ? 1 : om->shape[a] > om->shape[b] ? 1 : 0;
            }
            if (cmp > 0) {
                perm[d0] = b;
                perm[d1] = a;
                d1 = d0;
            } else if (cmp < 0) {
                break;
            }
        }
    }
    bool plain = true;
    int64_t next = 1;
    for (int j = 0; j < nd; j++) {
        plain &= perm[j] == nd - 1 - j;
        st[perm[j]] = next;
        next *= om->shape[perm[j]];
    }
    return !plain;
}

/* Everything else (kept out of line, so the shortcut runs without this
 * path's large stack frame). */
static __attribute__((noinline)) int op_call_general(jg_opcode op, const jg_attrs *a,
                                                     jg_tensor *const *in_arg, jg_tensor **out) {
    const jg_op_info *info = &jg_ops[op];
    const jg_attrs *given = a; /* NULL attrs: the op node keeps no copy */
    jg_tensor *in[4] = {0}, *casts[4] = {0};
    int n_casts = 0; /* casts[0..n_casts) may be non-NULL */
    bool symbolic = false;
    for (int k = 0; k < info->n_in; k++) {
        if (!in_arg[k])
            return jg_errorf("%s(): argument %d is NULL", info->name, k);
        in[k] = in_arg[k];
        if (jg_view_sync_use(in[k]) < 0)
            return -1;
        symbolic |= in[k]->sym != NULL;
    }
    if ((info->flags & JG_OPF_NOBOOL) && target_dtype(info, in) == JG_BOOL)
        return jg_bool_refused(op);
    /* jg_compile's trace records ops on captured tensors too (and on tensors
     * that require grad: their history is the graph's); ops on tensors the
     * program made itself compute now, their results constants */
    for (int k = 0; k < info->n_in && !symbolic && jg_trace_capture; k++)
        symbolic = jg_trace_captured(in[k]) || (in[k]->requires_grad && jg_grad_mode);
    /* Promotion goes through the to_dtype op, so it has a gradient too. */
    if (info->flags & (JG_OPF_PROMOTE | JG_OPF_FLOAT)) {
        jg_dtype d = target_dtype(info, in);
        int n_cast = (info->flags & JG_OPF_PROMOTE) ? info->n_in : 1;
        for (int k = 0; k < n_cast; k++) {
            if (in[k]->dtype == d)
                continue;
            jg_attrs ca = {.dtype = d};
            jg_tensor *c;
            if (jg_op_call(JG_OP_TO_DTYPE, &ca, &in[k], &c) < 0)
                goto fail;
            in[k] = casts[k] = jg_keep(c);
            n_casts = k + 1;
        }
    }
    jg_meta om[2];
    static const jg_attrs no_attrs;
    if (!a)
        a = &no_attrs;
    bool quick = !symbolic && same_shape_ew(info, in);
    if (!quick) {
        jg_meta im[4] = {{0}}; /* (n_in may be 0) */
        for (int k = 0; k < info->n_in; k++)
            jg_meta_of(in[k], &im[k]);
        if (info->infer(a, im, om) < 0)
            goto fail;
    }
    int rc;
    if (symbolic) {
        if (!jg_trace_op_hook) {
            jg_errorf("%s(): a symbolic tensor outside a trace", info->name);
            goto fail;
        }
        rc = jg_trace_op_hook(op, a, in, om, out);
        if (rc == 0 && (info->flags & JG_OPF_VIEW) && !(info->flags & JG_OPF_NONDIFF) &&
            (rc = jg_view_track(op, a, in[0], out[0])) < 0)
            jg_release(out[0]);
        if (rc == 0 && (info->flags & JG_OPF_VIEW) && !(info->flags & JG_OPF_NONDIFF))
            out[0]->no_grad_view =
                !jg_grad_mode || in[0]->no_grad_view || (in[0]->view && in[0]->view->no_grad);
    } else {
        bool have_out = !(info->flags & JG_OPF_VIEW); /* views make their own */
        if (have_out)
            for (int k = 0; k < info->n_out; k++) {
                out[k] = quick ? jg_tensor_alloc(in[0]->dtype, in[0]->ndim, in[0]->shape)
                               : jg_tensor_alloc(om[k].dtype, om[k].ndim, om[k].shape);
                if (!out[k]) {
                    for (int j = 0; j < k; j++)
                        jg_release(out[j]);
                    goto fail;
                }
            }
        /* (clone stays contiguous: jg_contiguous is a clone) */
        if (have_out && (info->flags & JG_OPF_ELEMENTWISE) && op != JG_OP_CLONE &&
            out[0]->numel > 1) {
            jg_meta m;
            jg_meta_of(out[0], &m);
            jg_ew_layout(info->n_in, in, &m, out[0]->stride);
        }
        rc = info->kernel(a, in, out);
        if (rc == 0)
            have_out = true;
        if (rc == 0 && !(info->flags & JG_OPF_NONDIFF) && jg_any_requires_grad(info->n_in, in))
            rc = jg_autograd_record_op(op, given, info->n_in, in, info->n_out, out);
        else if (rc == 0 && (info->flags & JG_OPF_VIEW) && !(info->flags & JG_OPF_NONDIFF) &&
                 !jg_grad_mode && in[0]->requires_grad && out[0]->storage == in[0]->storage)
            out[0]->requires_grad = out[0]->no_grad_view = true; /* see core/tensor.h */
        if (rc == 0 && (info->flags & JG_OPF_VIEW) && !(info->flags & JG_OPF_NONDIFF))
            rc = jg_view_track(op, a, in[0], out[0]);
        if (rc < 0 && have_out)
            for (int k = 0; k < info->n_out; k++)
                jg_release(out[k]);
    }
    for (int k = 0; k < n_casts; k++)
        jg_release(casts[k]);
    if (rc < 0)
        return -1;
    for (int k = 0; k < info->n_out; k++)
        jg_scope_track(out[k]);
    return 0;
fail:
    for (int k = 0; k < n_casts; k++)
        jg_release(casts[k]);
    return -1;
}

int jg_op_call(jg_opcode op, const jg_attrs *a, jg_tensor *const *in_arg, jg_tensor **out) {
    const jg_op_info *info = &jg_ops[op];
    if (has_row(op)) {
        int r = ew_shortcut(op, info, a, a ? a->s : 0.0, in_arg[0],
                            info->n_in == 2 ? in_arg[1] : NULL, out);
        if (r <= 0)
            return r;
    }
    return op_call_general(op, a, in_arg, out);
}

jg_tensor *jg_op1(jg_opcode op, const jg_attrs *a, jg_tensor *a0, jg_tensor *a1) {
    jg_tensor *in[2] = {a0, a1}, *out[2];
    JG_ASSERT(jg_ops[op].n_out == 1);
    return jg_op_call(op, a, in, out) < 0 ? NULL : out[0];
}
