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
    if ((info->flags & JG_OPF_FLOAT) && d == JG_I64)
        d = JG_F32;
    return d;
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
    if (!x || !y || x->sym || y->sym || x->view || y->view || x->dtype != y->dtype ||
        ((info->flags & JG_OPF_FLOAT) && x->dtype == JG_I64))
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
        if (jg_view_sync(in[k]) < 0)
            return -1;
        symbolic |= in[k]->sym != NULL;
    }
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
        rc = info->kernel(a, in, out);
        if (rc == 0)
            have_out = true;
        if (rc == 0 && !(info->flags & JG_OPF_NONDIFF) && jg_any_requires_grad(info->n_in, in))
            rc = jg_autograd_record_op(op, given, info->n_in, in, info->n_out, out);
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
