/* The one summation order of a contiguous run of floats, shared by sum, mean
 * and the softmax family (docs/kernels.md, "Reductions"):
 * the run is cut into blocks of JG_SUM_BLOCK elements; in a block, element i
 * goes to lane i % JG_SUM_LANES_* (each lane sums its elements in order
 * from +0); the lanes are folded by halving (lane j += lane j + w for
 * w = L/2, L/4, ..., 1); the block results are added in block order, from
 * the first block's.  Large runs compute their blocks on the thread pool;
 * the result does not depend on the number of threads. */
#ifndef JG_OPS_SUM_ORDER_H
#define JG_OPS_SUM_ORDER_H

#include <stdbool.h>
#include <stdint.h>

#define JG_SUM_BLOCK 4096
#define JG_SUM_LANES_F32 32
#define JG_SUM_LANES_F64 16
/* Inputs below this many elements stay on the caller's thread; parallel
 * chunks hold at least this many. */
#define JG_PAR_MIN 32768

float jg_sum_run_f32(const float *x, int64_t n);
double jg_sum_run_f64(const double *x, int64_t n);
/* The same order over x[0], x[st], ..., x[(n - 1) st]. */
float jg_sum_strided_f32(const float *x, int64_t n, int64_t st);
double jg_sum_strided_f64(const double *x, int64_t n, int64_t st);

#endif
