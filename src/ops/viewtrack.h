/* Differentiable views and their bases (ops/viewtrack.c).
 *
 * A view made by a view op (reshape, permute, slice, expand) while grad mode
 * is on -- or while tracing, where views carry no storage -- records its
 * base (the root tensor it views) and the view ops that remake it from that
 * root (jg_view_info).  In-place ops use this to keep histories right:
 *
 *  - writing into a view gives the base the history "base with this region
 *    replaced by the new values" (PyTorch's CopySlices), built from
 *    slice_scatter / reshape / permute;
 *  - any in-place op bumps the base's version (traced: gives the base a new
 *    value), and a view whose recorded version is stale remakes its history
 *    (traced: its value) from the base before it is used. */
#ifndef JG_OPS_VIEWTRACK_H
#define JG_OPS_VIEWTRACK_H

#include "ops/optable.h"

/* The end of PyTorch's messages for a view made in no_grad mode that is
 * written in place, or used after its base was, with grad mode on */
#define JG_MSG_NO_GRAD_VIEW_TAIL                                                                   \
    "Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify "     \
    "your code by moving both the view and the inplace either both inside the no_grad block (if "  \
    "you don't want the inplace to be tracked) or both outside (if you want the inplace to be "    \
    "tracked)."

/* PyTorch's computeStride: new_stride for seeing the old geometry with
 * new_shape, or false when reshape has to copy (ops/view.c). */
bool jg_reshape_strides(int old_nd, const int64_t *old_shape, const int64_t *old_stride, int new_nd,
                        const int64_t *new_shape, int64_t *new_stride);

/* The geometry eager would give traced tensor t -- shape, strides and
 * offset in its base's memory, the base laid out as its strides say (a
 * traced value's are eager's) -- replayed through its view ops.
 * false when unknown. */
bool jg_view_traced_geometry(const jg_tensor *t, int *ndim, int64_t *shape, int64_t *stride,
                             int64_t *offset);

/* Traced t's strides as eager's tensor has them: a traced view's own
 * strides are not its layout (an expand's zero strides), its geometry is
 * (jg_view_traced_geometry); anything else carries eager's already. */
void jg_view_traced_strides(const jg_tensor *t, int64_t *stride);

/* After view op `op` made `out` from `in`: records out's base and steps when
 * out is a differentiable view (same storage, grad mode on; or traced).
 * 0 or -1. */
int jg_view_track(jg_opcode op, const jg_attrs *a, jg_tensor *in, jg_tensor *out);
/* View steps (view ops and their attributes, applied in order) as
 * jg_view_track_steps takes them: malloc'd (free() it) in *steps.  0 or -1. */
int jg_view_steps_make(int n, const jg_opcode *ops, const jg_attrs *const *attrs, void **steps);
/* Records concrete out, which views in's memory, as in's view through
 * `steps` (from jg_view_steps_make), as jg_view_track would have step by
 * step: a compiled call's output that is a view of an input is one in eager
 * mode too, so an in-place op on the base later remakes its history.
 * 0 or -1. */
int jg_view_track_steps(jg_tensor *in, jg_tensor *out, const void *steps, int n);
/* Records out, an alias of in that does not require grad, as in's view
 * made without grad mode (PyTorch's _view_as_self_with_no_grad: what a
 * custom function returns for a non-differentiable input output).  0 or
 * -1. */
int jg_view_track_alias(jg_tensor *in, jg_tensor *out);
/* A view without history requires grad while its base does (PyTorch's
 * views ask their base), its gradients dropped as a no_grad view's: t's
 * flags brought up to date (part of jg_view_refresh). */
void jg_view_follow_base(jg_tensor *t);
/* Remakes t's history (traced: its value) from its base if the base changed
 * since it was made.  0 or -1. */
int jg_view_refresh(jg_tensor *t);
static inline int jg_view_sync(jg_tensor *t) {
    return t && t->view ? jg_view_refresh(t) : 0;
}
/* Whether tracked view t's base was written since t's history was made. */
bool jg_view_stale(const jg_tensor *t);
/* -1 with PyTorch's error when t, a view made without grad mode, is used
 * (an op's operand, a backward's root or input) with grad mode on after its
 * base was written while the base requires grad; else 0. */
int jg_view_check_use(const jg_tensor *t);
/* jg_view_sync for a tensor being used: jg_view_check_use first. */
static inline int jg_view_sync_use(jg_tensor *t) {
    return t && t->view ? (jg_view_check_use(t) < 0 ? -1 : jg_view_refresh(t)) : 0;
}
/* Traced view t, whose base is concrete now (a program run in pieces: the
 * piece that computed the base ran), becomes the view eager mode has: its
 * view ops replayed on the base (with history unless t was made without
 * grad mode), their memory and history taken in place.  0 or -1. */
int jg_view_become_concrete(jg_tensor *t);
/* As jg_view_become_concrete, but t takes the history of `value`, the
 * concrete result of t's own traced value (a piece's output, whose
 * compiled backward sums t's gradient terms where eager mode does), and
 * keeps its memory and tracking as a view of its base.  0 or -1. */
int jg_view_become_output(jg_tensor *t, jg_tensor *value);
/* Gives t, which has no view record, a copy of from's (t takes over
 * from's memory: a piece's output that views a captured tensor), so t is
 * that tensor's tracked view as in eager mode.  0 or -1. */
int jg_view_copy_record(jg_tensor *t, const jg_tensor *from);
/* The value the base of view t takes when t's elements become src (t's
 * shape and dtype): computed out of place with history.  Borrowed from the
 * current scope, or NULL + error. */
jg_tensor *jg_view_scatter(jg_tensor *t, jg_tensor *src);

/* The end of every in-place op (ops/inplace.c), also used for custom
 * functions' dirty inputs: self takes r's values and history (r: self's
 * shape and dtype; its own storage, or an alias of exactly self's memory).
 * Traced: self (or its base) takes r's value.  0 or -1. */
int jg_inplace_commit(jg_tensor *self, jg_tensor *r);
/* dst.copy_(src) for a src no one uses afterwards (a fused op's result):
 * traced, with src of dst's shape and dtype and neither a view, dst takes
 * src's value itself (no clone node in the graph); else jg_copy_. */
int jg_inplace_take_(jg_tensor *dst, jg_tensor *src);

#endif
