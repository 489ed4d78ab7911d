/* Parallel loops of the kernels.
 *
 * A kernel splits its work into chunks whose boundaries depend only on the
 * problem (n and grain), never on the number of threads, and computes each
 * chunk the same way wherever it runs: so results are bitwise the same for
 * 1, 2, 3 ... threads.  Reductions keep one partial per chunk and combine
 * the partials in chunk order afterwards. */
#ifndef JG_CORE_PARALLEL_H
#define JG_CORE_PARALLEL_H

#include <stdint.h>

/* fn(ctx, lo, hi) over [0, n) in chunks [k*grain, min((k+1)*grain, n)).
 * Each chunk is one call; chunks may run concurrently on the pool's threads
 * and in any order.  Runs inline on the caller when there is one chunk, one
 * thread, or when already inside a parallel loop.  grain >= 1. */
typedef void (*jg_parallel_fn)(void *ctx, int64_t lo, int64_t hi);
void jg_parallel_for(int64_t n, int64_t grain, jg_parallel_fn fn, void *ctx);

/* Number of chunks jg_parallel_for makes of n with this grain. */
static inline int64_t jg_parallel_chunks(int64_t n, int64_t grain) {
    return n <= 0 ? 0 : (n + grain - 1) / grain;
}

#endif
