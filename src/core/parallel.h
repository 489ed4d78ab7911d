/* Parallel loops of the kernels.
 *
 * A kernel splits its work into chunks whose boundaries depend only on the
 * problem (n and grain), never on the number of threads, and computes each
 * chunk the same way wherever it runs: so results are bitwise the same for
 * 1, 2, 3 ... threads.  Reductions keep one partial per chunk and combine
 * the partials in chunk order afterwards. */
#ifndef JG_CORE_PARALLEL_H
#define JG_CORE_PARALLEL_H

#include <stdbool.h>
#include <stdint.h>

/* fn(ctx, lo, hi) over [0, n) in chunks [k*grain, min((k+1)*grain, n)).
 * Each chunk is one call; chunks may run concurrently on the pool's threads
 * and in any order.  Runs inline on the caller when there is one chunk, one
 * thread, when already inside a parallel loop, or while another thread's
 * loop has the pool.  Returns when every chunk is done.  grain >= 1. */
typedef void (*jg_parallel_fn)(void *ctx, int64_t lo, int64_t hi);
void jg_parallel_for(int64_t n, int64_t grain, jg_parallel_fn fn, void *ctx);

/* Number of chunks jg_parallel_for makes of n with this grain. */
static inline int64_t jg_parallel_chunks(int64_t n, int64_t grain) {
    return n <= 0 ? 0 : (n + grain - 1) / grain;
}

/* The chunk size of the kernels' loops, in elements: an op on fewer than
 * twice this many runs inline on the caller, without touching the pool. */
#define JG_PARALLEL_GRAIN 32768
#define JG_PARALLEL_MAX_THREADS 256

/* Keeps OpenBLAS single-threaded: jitgrad's matmuls split large products
 * over jitgrad's pool themselves (ops/linalg.c).  Sets OpenBLAS's count back
 * to 1 when a program changed it; one call and a comparison otherwise. */
void jg_blas_single_thread(void);

/* fn must not fail and must not need the caller's thread-local state
 * (grad mode, error text, scopes, caches): chunks do pure arithmetic on the
 * memory ctx describes, and may run on another thread. */

extern _Atomic int jg_parallel_nthreads_;
extern _Thread_local bool jg_parallel_inside_;
int jg_parallel_resolve_threads_(void);

/* The thread count loops use (jg_get_num_threads). */
static inline int jg_parallel_threads(void) {
    int t = jg_parallel_nthreads_;
    return t ? t : jg_parallel_resolve_threads_();
}

/* True inside a chunk of a loop on the pool: a loop there runs inline. */
static inline bool jg_parallel_inside(void) {
    return jg_parallel_inside_;
}

/* Makes this thread's loops run inline on it (on) or as usual (off) until
 * called again; returns the previous setting.  Mode max-autotune times a
 * graph both ways (results are the same, only the speed differs). */
static inline bool jg_parallel_set_inline(bool on) {
    bool prev = jg_parallel_inside_;
    jg_parallel_inside_ = on;
    return prev;
}

/* True if a loop over n elements in chunks of JG_PARALLEL_GRAIN would run on
 * the pool: the test kernels make before splitting their work. */
static inline bool jg_parallel_worth(int64_t n) {
    return n >= 2 * JG_PARALLEL_GRAIN && !jg_parallel_inside_ && jg_parallel_threads() > 1;
}

#endif
