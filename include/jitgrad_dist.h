/* jitgrad_dist.h: data-parallel training over MPI (libjitgrad_dist, built
 * when CMake finds MPI; link it and MPI besides libjitgrad).  See
 * docs/distributed.md.
 *
 * Every call returns 0 (or a value >= 0) on success, -1 after setting the
 * thread's error (jg_last_error()).  Collective calls must be made by every
 * rank of the communicator in the same order.  A rank that waits longer than
 * the timeout (jg_dist_set_timeout, env JITGRAD_DIST_TIMEOUT, default 300 s)
 * for a collective that another rank never joined prints why and aborts
 * every rank (MPI_Abort): no rank is left hanging. */
#ifndef JITGRAD_DIST_H
#define JITGRAD_DIST_H

#include <jitgrad.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { JG_DIST_SUM = 0, JG_DIST_AVG = 1 } jg_dist_op;

/* Over MPI_COMM_WORLD; initializes MPI (MPI_THREAD_SERIALIZED) unless the
 * program did; argc/argv may be NULL. */
int jg_dist_init(int *argc, char ***argv);
/* Over a communicator the program made: mpi_comm points at an MPI_Comm
 * (duplicated; MPI must be initialized). */
int jg_dist_init_comm(const void *mpi_comm);
/* Frees the communicator; finalizes MPI if jg_dist_init initialized it. */
int jg_dist_finalize(void);
bool jg_dist_is_initialized(void);
int jg_dist_rank(void);       /* -1 + error before init */
int jg_dist_world_size(void); /* -1 + error before init */
void jg_dist_set_timeout(double seconds);
int jg_dist_barrier(void);

/* In place, on every rank (f32, f64; i64 and i32 for SUM).  Deterministic:
 * every rank's values are gathered and summed in rank order,
 * ((t0 + t1) + t2) + ..., so the result is bitwise the same on every rank
 * and every run; AVG then divides by the world size.  The _mpi variant uses
 * MPI's own sum (MPI_Allreduce): less memory and traffic, but the order of
 * additions is the library's and may differ between runs and ranks. */
int jg_dist_all_reduce(jg_tensor *t, jg_dist_op op);
int jg_dist_all_reduce_mpi(jg_tensor *t, jg_dist_op op);
/* In place: every rank gets root's values (shapes and dtypes must agree). */
int jg_dist_broadcast(jg_tensor *t, int root);

/* ---- data-parallel training ----
 * jg_dist_ddp_new registers the parameters (those that require grad),
 * broadcasts them from rank 0 and hooks their gradients: in each backward
 * the gradients are packed, as they become final, into buckets (reverse
 * registration order, at most bucket_bytes each) and a bucket's non-blocking
 * reduction starts once all its gradients are in; backward returns after
 * every reduction completed, with .grad holding the reduced (averaged)
 * gradient, bitwise equal on every rank.  A backward that fails on one rank
 * fails on every rank, .grad untouched. */
typedef struct jg_dist_ddp jg_dist_ddp;
typedef struct jg_dist_ddp_options {
    size_t bucket_bytes;         /* 0: 25 MiB */
    bool nondeterministic;       /* true: MPI's own sum (MPI_Iallreduce) */
    bool find_unused_parameters; /* false: a parameter without a gradient is an error */
    bool sum;                    /* true: sum the gradients instead of averaging */
} jg_dist_ddp_options;

jg_dist_ddp *jg_dist_ddp_new(int n_params, jg_tensor *const *params,
                             const jg_dist_ddp_options *opts /* NULL: defaults */);
void jg_dist_ddp_free(jg_dist_ddp *d);
int jg_dist_ddp_n_buckets(const jg_dist_ddp *d);

/* What the last backward did (MPI_Wtime seconds). */
typedef struct jg_dist_ddp_stats {
    int n_buckets;
    int launched_during_backward; /* buckets whose reduction started before backward's
                                     computations ended */
    double first_ready;           /* the first gradient hook of the backward ran */
    double first_launch;          /* the first bucket's reduction started */
    double last_ready;            /* the last gradient hook ran */
    double compute_end;           /* backward computed its last gradient */
    double reduce_end;            /* every reduction completed */
    double wait_seconds;   /* reduce_end - compute_end: reduction not hidden under backward */
    double reduce_seconds; /* sum over buckets of launch -> completion seen */
} jg_dist_ddp_stats;
int jg_dist_ddp_stats_get(const jg_dist_ddp *d, jg_dist_ddp_stats *out);

#ifdef __cplusplus
}
#endif

#endif
