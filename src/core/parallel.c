/* jg_parallel_for's thread pool (see parallel.h) and the public thread
 * count.
 *
 * The pool starts on the first loop with more than one chunk and holds
 * threads - 1 workers; the caller takes chunks too.  One loop runs on the
 * pool at a time: a second thread calling in meanwhile, or a loop nested in
 * a chunk, runs its chunks inline.  Each thread takes the chunks of its
 * own contiguous range first, then what is left of the others' ranges;
 * workers spin briefly for the next loop, then sleep on a condition
 * variable.  A forked child starts without a pool (the workers are not
 * copied); the library's destructor joins the workers at exit or dlclose. */
#define _GNU_SOURCE /* sched_getaffinity */
#include "core/parallel.h"

#include "core/blas.h"
#include "core/tensor.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* OpenBLAS runs on one thread (see jg_blas_single_thread).  Weak: a BLAS
 * without these links too, and the calls are skipped. */
extern void openblas_set_num_threads(int n) __attribute__((weak));
extern int openblas_get_num_threads(void) __attribute__((weak));

/* How long a worker watches for the next loop before it sleeps (and the
 * caller for the workers' last chunks before it sleeps): back-to-back large
 * kernels skip the wake-up, and an idle pool soon leaves the cores alone. */
#define SPIN_NS 20000

_Atomic int jg_parallel_nthreads_; /* 0 until resolved (see resolve_threads) */
_Thread_local bool jg_parallel_inside_;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; /* guards job and workers */
static pthread_cond_t wake_cv = PTHREAD_COND_INITIALIZER;
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;
/* held by the thread whose loop runs on the pool, and while resizing */
static pthread_mutex_t run_mu = PTHREAD_MUTEX_INITIALIZER;

static struct {
    jg_parallel_fn fn;
    void *ctx;
    int64_t n, grain, nchunks;
    int parts;            /* participants: the caller and the workers */
    _Atomic uint64_t gen; /* bumped per loop */
    bool open;            /* workers may still join */
    _Atomic int active;   /* workers inside the loop */
} job;

/* Participant p (0: the caller, 1 + i: worker i) owns the contiguous range
 * of chunks [p * nchunks / parts, (p + 1) * nchunks / parts) and takes its
 * chunks first, then takes what is left of the others' ranges, so a slow
 * or sleeping thread's chunks are still taken by the others.  Each range's
 * counter has a cache line of its own: with one counter for all, every
 * chunk taken moved its line between the cores (some 100 ns each: about
 * 1 us of a 1M-element sum at 2 threads, 32 chunks of some 2.5 us); now a
 * thread touches another's line only to steal. */
typedef struct {
    _Alignas(64) _Atomic int64_t next; /* the next chunk of the range to take */
    int64_t end;
} range;
static range ranges[JG_PARALLEL_MAX_THREADS];

static pthread_t *workers;
static int n_workers;
static bool stopping; /* workers leave */
static bool shut;     /* after the destructor: no pool any more */

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Spinning: true while fewer than SPIN_NS passed since *end was set (the
 * clock is read every 64th round). */
static bool spin_on(unsigned *round, uint64_t *end) {
    cpu_relax();
    if (++*round % 64)
        return true;
    uint64_t t = now_ns();
    if (*round == 64)
        *end = t + SPIN_NS;
    return t < *end;
}

/* Participant self's chunks, then the rest of the others' ranges. */
static void take_chunks(int self) {
    jg_parallel_fn fn = job.fn;
    void *ctx = job.ctx;
    int64_t n = job.n, grain = job.grain;
    int parts = job.parts;
    for (int r = 0; r < parts; r++) {
        range *q = &ranges[(self + r) % parts];
        for (;;) {
            int64_t k = atomic_fetch_add_explicit(&q->next, 1, memory_order_relaxed);
            if (k >= q->end)
                break;
            int64_t lo = k * grain;
            fn(ctx, lo, n - lo > grain ? lo + grain : n);
        }
    }
}

/* The loop count when the pool started: the first loop after it is each
 * new worker's to join, even if it was posted before the thread ran. */
static uint64_t start_gen;

/* arg: the worker's participant number (1, 2, ...). */
static void *worker_main(void *arg) {
    jg_parallel_inside_ = true; /* loops inside chunks run inline */
    const int self = (int)(uintptr_t)arg;
    uint64_t seen = start_gen;
    pthread_mutex_lock(&mu);
    for (;;) {
        if (!stopping && (atomic_load(&job.gen) == seen || !job.open)) {
            pthread_mutex_unlock(&mu);
            unsigned round = 0;
            uint64_t end = 0;
            while (atomic_load_explicit(&job.gen, memory_order_relaxed) == seen &&
                   spin_on(&round, &end))
                ;
            pthread_mutex_lock(&mu);
            while (!stopping && (atomic_load(&job.gen) == seen || !job.open))
                pthread_cond_wait(&wake_cv, &mu);
        }
        if (stopping)
            break;
        seen = atomic_load(&job.gen);
        atomic_fetch_add(&job.active, 1);
        pthread_mutex_unlock(&mu);
        take_chunks(self);
        pthread_mutex_lock(&mu);
        if (atomic_fetch_sub(&job.active, 1) == 1)
            pthread_cond_signal(&done_cv);
    }
    pthread_mutex_unlock(&mu);
    return NULL;
}

/* Joins the workers.  mu not held; run_mu held or no loop possible. */
static void stop_pool(void) {
    pthread_mutex_lock(&mu);
    stopping = true;
    pthread_cond_broadcast(&wake_cv);
    pthread_mutex_unlock(&mu);
    for (int i = 0; i < n_workers; i++)
        pthread_join(workers[i], NULL);
    free(workers);
    workers = NULL;
    n_workers = 0;
    stopping = false;
}

/* Starts threads - 1 workers (run_mu held).  False if none could start;
 * fewer than asked still work (the caller takes the rest of the chunks). */
static bool start_pool(int threads) {
    workers = malloc(sizeof *workers * (size_t)(threads - 1));
    if (!workers)
        return false;
    /* workers take no signals: they go to the program's own threads */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    start_gen = atomic_load(&job.gen); /* pthread_create publishes it */
    while (n_workers < threads - 1 && pthread_create(&workers[n_workers], NULL, worker_main,
                                                     (void *)(uintptr_t)(n_workers + 1)) == 0)
        n_workers++;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (n_workers == 0) {
        free(workers);
        workers = NULL;
        return false;
    }
    return true;
}

static int default_threads(void) {
    const char *env = getenv("JITGRAD_NUM_THREADS");
    if (env && *env) {
        char *end;
        long v = strtol(env, &end, 10);
        if (*end == '\0' && v >= 1 && v <= JG_PARALLEL_MAX_THREADS)
            return (int)v;
        /* an unusable value is ignored, as OMP_NUM_THREADS's are */
    }
    /* the cores this process may run on (taskset, cpusets), as nproc says */
    cpu_set_t set;
    long cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set)
                                                             : sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1)
        cores = 1;
    return cores > JG_PARALLEL_MAX_THREADS ? JG_PARALLEL_MAX_THREADS : (int)cores;
}

int jg_parallel_resolve_threads_(void) {
    int t = atomic_load(&jg_parallel_nthreads_);
    if (t)
        return t;
    int want = default_threads();
    int expected = 0;
    atomic_compare_exchange_strong(&jg_parallel_nthreads_, &expected, want);
    return atomic_load(&jg_parallel_nthreads_);
}

void jg_parallel_for(int64_t n, int64_t grain, jg_parallel_fn fn, void *ctx) {
    if (grain < 1)
        grain = 1;
    int64_t nchunks = jg_parallel_chunks(n, grain);
    int threads = jg_parallel_threads();
    if (threads <= 1 || nchunks <= 1 || jg_parallel_inside_ || pthread_mutex_trylock(&run_mu) != 0)
        goto serial;
    if (n_workers == 0 && (shut || !start_pool(threads))) {
        pthread_mutex_unlock(&run_mu);
        goto serial;
    }
    pthread_mutex_lock(&mu);
    job.fn = fn;
    job.ctx = ctx;
    job.n = n;
    job.grain = grain;
    job.nchunks = nchunks;
    job.parts = n_workers + 1;
    for (int p = 0; p < job.parts; p++) {
        atomic_store_explicit(&ranges[p].next, nchunks * p / job.parts, memory_order_relaxed);
        ranges[p].end = nchunks * (p + 1) / job.parts;
    }
    job.open = true;
    atomic_fetch_add(&job.gen, 1);
    if (nchunks - 1 >= n_workers)
        pthread_cond_broadcast(&wake_cv);
    else
        for (int64_t i = 0; i < nchunks - 1; i++)
            pthread_cond_signal(&wake_cv);
    pthread_mutex_unlock(&mu);

    jg_parallel_inside_ = true;
    take_chunks(0);
    jg_parallel_inside_ = false;

    /* Close the loop, then wait for the workers in it: they may still be
     * computing their last chunks. */
    pthread_mutex_lock(&mu);
    job.open = false;
    pthread_mutex_unlock(&mu);
    unsigned round = 0;
    uint64_t end = 0;
    while (atomic_load(&job.active) > 0 && spin_on(&round, &end))
        ;
    pthread_mutex_lock(&mu);
    while (atomic_load(&job.active) > 0)
        pthread_cond_wait(&done_cv, &mu);
    pthread_mutex_unlock(&mu);
    pthread_mutex_unlock(&run_mu);
    return;

serial:
    for (int64_t lo = 0; lo < n; lo += grain)
        fn(ctx, lo, n - lo > grain ? lo + grain : n);
}

int jg_set_num_threads(int n) {
    if (n < 1)
        return jg_errorf("jg_set_num_threads: expected num_threads > 0, got %d", n);
    if (n > JG_PARALLEL_MAX_THREADS)
        n = JG_PARALLEL_MAX_THREADS;
    jg_parallel_resolve_threads_();
    pthread_mutex_lock(&run_mu); /* waits for a loop on the pool to end */
    if (atomic_load(&jg_parallel_nthreads_) != n) {
        if (n_workers)
            stop_pool(); /* the next large loop starts one of the new size */
        atomic_store(&jg_parallel_nthreads_, n);
    }
    pthread_mutex_unlock(&run_mu);
    jg_blas_single_thread();
    return 0;
}

void jg_blas_single_thread(void) {
    jg_blas_init(); /* OpenBLAS's kernels are chosen before its first call */
    if (openblas_set_num_threads && (!openblas_get_num_threads || openblas_get_num_threads() != 1))
        openblas_set_num_threads(1);
}

int jg_get_num_threads(void) {
    return jg_parallel_threads();
}

/* fork: the child has none of the parent's workers.  mu is held across the
 * fork so that the child's copy of the job is consistent; the child then
 * starts over with fresh locks and no pool (it keeps the thread count). */
static void atfork_prepare(void) {
    pthread_mutex_lock(&mu);
}
static void atfork_parent(void) {
    pthread_mutex_unlock(&mu);
}
static void atfork_child(void) {
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t c = PTHREAD_COND_INITIALIZER;
    mu = m;
    run_mu = m;
    wake_cv = c;
    done_cv = c;
    free(workers);
    workers = NULL;
    n_workers = 0;
    stopping = false;
    job.open = false;
    atomic_store(&job.active, 0);
    jg_parallel_inside_ = false;
}

__attribute__((constructor)) static void parallel_init(void) {
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
    jg_blas_single_thread();
}

/* At exit (or when the shared library is unloaded) the workers leave, so
 * that no thread runs code that goes away and nothing is left unjoined. */
__attribute__((destructor)) static void parallel_fini(void) {
    pthread_mutex_lock(&run_mu);
    shut = true;
    if (n_workers)
        stop_pool();
    pthread_mutex_unlock(&run_mu);
}
