/* Strided N-d iteration: the one loop nest every elementwise kernel and copy
 * uses.  Kernels supply an inner loop over one row; this walks the rest. */
#ifndef JG_CORE_ITER_H
#define JG_CORE_ITER_H

#include "core/tensor.h"

#define JG_ITER_MAX_OPS 4

/* ptrs[k] points at row element 0 of operand k; strides[k] is its byte step. */
typedef void (*jg_inner_fn)(void *ctx, int64_t n, char **ptrs, const int64_t *strides);

/* Iterates `shape` in row-major order.  strides[k][d] is operand k's byte
 * stride along d (0 where broadcast).  Dims that are contiguous for every
 * operand are merged, so contiguous operands become one long row.
 * Large iterations (jg_parallel_worth) whose output elements are distinct
 * and whose inputs are the output or disjoint from it run in chunks on the
 * pool, rows split anywhere: fn must compute each output element from the
 * inputs' elements at its own index only, and treat ctx as read-only. */
void jg_iter_run(int ndim, const int64_t *shape, int nops, char *const *base,
                 int64_t strides[][JG_MAX_DIMS], jg_inner_fn fn, void *ctx);

/* Byte strides of t seen through a broadcast to out_ndim/out_shape (t's
 * shape must broadcast; leading and size-1 dims get stride 0). */
void jg_broadcast_strides(const jg_tensor *t, int out_ndim, const int64_t *out_shape,
                          int64_t *strides_out);

/* Copies src into dst elementwise (shapes equal, or src broadcast to dst),
 * converting dtype.  Pure data movement: no autograd, no version bump. */
void jg_copy_data(jg_tensor *dst, const jg_tensor *src);

#endif
