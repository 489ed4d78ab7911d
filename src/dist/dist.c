/* Data-parallel training over MPI (include/jitgrad_dist.h).  Reaches the
 * engine only through the public gradient hooks: a grad-ready hook copies
 * each final gradient into its bucket and starts the bucket's non-blocking
 * reduction once the bucket is full; a callback queued for the end of the
 * backward completes the reductions and hands the reduced gradients to the
 * commit (jg_backward_set_grad).  docs/distributed.md explains the choices. */
#include <jitgrad_dist.h>

#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static struct {
    bool on;
    bool owns_mpi; /* jg_dist_init called MPI_Init_thread */
    MPI_Comm comm;
    int rank, size;
    double timeout;
} g = {.timeout = -1};

static double timeout_s(void) {
    if (g.timeout < 0) {
        const char *e = getenv("JITGRAD_DIST_TIMEOUT");
        double v = e ? atof(e) : 0;
        g.timeout = v > 0 ? v : 300;
    }
    return g.timeout;
}

void jg_dist_set_timeout(double seconds) {
    g.timeout = seconds > 0 ? seconds : -1;
}

static int mpi_fail(int err, const char *what) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(err, msg, &len) != MPI_SUCCESS)
        snprintf(msg, sizeof msg, "MPI error %d", err);
    return jg_set_error("%s: %s", what, msg);
}

static int need_init(const char *what) {
    if (!g.on)
        return jg_set_error("%s: Default process group has not been initialized, please make "
                            "sure to call jg_dist_init (init_process_group)",
                            what);
    return 0;
}

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...) {
    static int on = -1;
    if (on < 0) {
        const char *e = getenv("JITGRAD_DIST_LOG");
        on = e && *e && strcmp(e, "0") != 0;
    }
    if (!on)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "jg_dist rank %d t=%.6f: ", g.rank, MPI_Wtime());
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* Waits for n requests; past the timeout a rank that another rank abandoned
 * aborts them all (an MPI collective cannot be cancelled). */
static int wait_all(int n, MPI_Request *reqs, const char *what) {
    double deadline = MPI_Wtime() + timeout_s();
    int spins = 0;
    for (;;) {
        int done = 0;
        int err = MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
        if (err != MPI_SUCCESS)
            return mpi_fail(err, what);
        if (done)
            return 0;
        if (MPI_Wtime() > deadline) {
            fprintf(stderr,
                    "jitgrad.distributed: rank %d timed out after %.0f s waiting for %s: another "
                    "rank failed before joining it or stalled; aborting every rank\n",
                    g.rank, timeout_s(), what);
            fflush(stderr);
            MPI_Abort(g.comm, 3);
        }
        if (++spins > 1000) { /* (on an oversubscribed machine, let the others run) */
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        }
    }
}

static int setup_comm(MPI_Comm from) {
    int err = MPI_Comm_dup(from, &g.comm);
    if (err != MPI_SUCCESS)
        return mpi_fail(err, "jg_dist_init: MPI_Comm_dup");
    MPI_Comm_set_errhandler(g.comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(g.comm, &g.rank);
    MPI_Comm_size(g.comm, &g.size);
    g.on = true;
    return 0;
}

int jg_dist_init(int *argc, char ***argv) {
    if (g.on)
        return jg_set_error("jg_dist_init: trying to initialize the default process group twice!");
    int inited = 0, finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized)
        return jg_set_error("jg_dist_init: MPI was finalized in this process and cannot be "
                            "initialized again");
    MPI_Initialized(&inited);
    if (!inited) {
        int provided = 0;
        int err = MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
        if (err != MPI_SUCCESS)
            return mpi_fail(err, "jg_dist_init: MPI_Init_thread");
        g.owns_mpi = true;
    }
    return setup_comm(MPI_COMM_WORLD);
}

int jg_dist_init_comm(const void *mpi_comm) {
    if (g.on)
        return jg_set_error("jg_dist_init: trying to initialize the default process group twice!");
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited || !mpi_comm)
        return jg_set_error("jg_dist_init_comm: %s",
                            !mpi_comm ? "communicator is NULL" : "MPI is not initialized");
    return setup_comm(*(const MPI_Comm *)mpi_comm);
}

int jg_dist_finalize(void) {
    if (need_init("jg_dist_finalize") < 0)
        return -1;
    MPI_Comm_free(&g.comm);
    g.on = false;
    if (g.owns_mpi) {
        g.owns_mpi = false;
        int err = MPI_Finalize();
        if (err != MPI_SUCCESS)
            return mpi_fail(err, "jg_dist_finalize: MPI_Finalize");
    }
    return 0;
}

bool jg_dist_is_initialized(void) {
    return g.on;
}

int jg_dist_rank(void) {
    return need_init("get_rank") < 0 ? -1 : g.rank;
}

int jg_dist_world_size(void) {
    return need_init("get_world_size") < 0 ? -1 : g.size;
}

int jg_dist_barrier(void) {
    if (need_init("barrier") < 0)
        return -1;
    MPI_Request r;
    int err = MPI_Ibarrier(g.comm, &r);
    if (err != MPI_SUCCESS)
        return mpi_fail(err, "barrier");
    return wait_all(1, &r, "a barrier");
}

/* ---- tensors <-> buffers ---- */

static int mpi_type(jg_dtype dt, MPI_Datatype *type, size_t *esize, const char *what) {
    const char *name = jg_dtype_name(dt);
    if (!strcmp(name, "float32"))
        *type = MPI_FLOAT, *esize = 4;
    else if (!strcmp(name, "float64"))
        *type = MPI_DOUBLE, *esize = 8;
    else if (!strcmp(name, "int64"))
        *type = MPI_INT64_T, *esize = 8;
    else if (!strcmp(name, "int32"))
        *type = MPI_INT32_T, *esize = 4;
    else
        return jg_set_error("%s: tensors of dtype %s are not supported", what, name);
    return 0;
}

static bool is_float(MPI_Datatype t) {
    return t == MPI_FLOAT || t == MPI_DOUBLE;
}

/* dst[i] += src[i] for n elements of type t */
static void add_into(MPI_Datatype t, void *dst, const void *src, int64_t n) {
    if (t == MPI_FLOAT)
        for (int64_t i = 0; i < n; i++)
            ((float *)dst)[i] += ((const float *)src)[i];
    else if (t == MPI_DOUBLE)
        for (int64_t i = 0; i < n; i++)
            ((double *)dst)[i] += ((const double *)src)[i];
    else if (t == MPI_INT64_T)
        for (int64_t i = 0; i < n; i++)
            ((int64_t *)dst)[i] += ((const int64_t *)src)[i];
    else
        for (int64_t i = 0; i < n; i++)
            ((int32_t *)dst)[i] += ((const int32_t *)src)[i];
}

static void divide(MPI_Datatype t, void *x, int64_t n, int by) {
    if (t == MPI_FLOAT)
        for (int64_t i = 0; i < n; i++)
            ((float *)x)[i] /= (float)by;
    else
        for (int64_t i = 0; i < n; i++)
            ((double *)x)[i] /= (double)by;
}

/* The rank-order sum of a gathered buffer (size blocks of n): into out. */
static void fold(MPI_Datatype t, size_t esize, void *out, const void *gathered, int64_t n,
                 int size) {
    memcpy(out, gathered, (size_t)n * esize);
    for (int r = 1; r < size; r++)
        add_into(t, out, (const char *)gathered + (size_t)r * (size_t)n * esize, n);
}

/* Writes buf (row-major values) into t, in place, bumping its version. */
static int write_back(jg_tensor *t, const void *buf) {
    jg_scope_push();
    bool prev = jg_set_grad_enabled(false);
    jg_tensor *v = jg_tensor_new(jg_dtype_of(t), jg_ndim(t), jg_shape(t), buf);
    int rc = v ? jg_copy_(t, v) : -1;
    jg_set_grad_enabled(prev);
    jg_scope_pop();
    return rc;
}

static int all_reduce(jg_tensor *t, jg_dist_op op, bool deterministic, const char *what) {
    MPI_Datatype type;
    size_t es;
    if (need_init(what) < 0)
        return -1;
    if (!t)
        return jg_set_error("%s: tensor is NULL", what);
    if (jg_is_traced(t))
        return jg_set_error("%s: cannot run on a traced tensor", what);
    if (mpi_type(jg_dtype_of(t), &type, &es, what) < 0)
        return -1;
    if (op != JG_DIST_SUM && op != JG_DIST_AVG)
        return jg_set_error("%s: unknown op %d", what, (int)op);
    if (op == JG_DIST_AVG && !is_float(type))
        return jg_set_error("%s: AVG needs a floating-point tensor, got %s", what,
                            jg_dtype_name(jg_dtype_of(t)));
    int64_t n = jg_numel(t);
    if (n > (int64_t)1 << 30)
        return jg_set_error("%s: tensor too large (%lld elements)", what, (long long)n);
    size_t bytes = (size_t)n * es;
    char *buf = malloc(bytes ? bytes : 1);
    char *all = deterministic ? malloc(bytes * (size_t)g.size + 1) : NULL;
    int rc = -1;
    if (!buf || (deterministic && !all)) {
        jg_set_error("%s: out of memory", what);
        goto out;
    }
    if (jg_copy_to(t, buf, bytes) < 0)
        goto out;
    MPI_Request r;
    int err = deterministic ? MPI_Iallgather(buf, (int)n, type, all, (int)n, type, g.comm, &r)
                            : MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, type, MPI_SUM, g.comm, &r);
    if (err != MPI_SUCCESS) {
        mpi_fail(err, what);
        goto out;
    }
    if (wait_all(1, &r, "an all_reduce") < 0)
        goto out;
    if (deterministic)
        fold(type, es, buf, all, n, g.size);
    if (op == JG_DIST_AVG)
        divide(type, buf, n, g.size);
    rc = write_back(t, buf);
out:
    free(buf);
    free(all);
    return rc;
}

int jg_dist_all_reduce(jg_tensor *t, jg_dist_op op) {
    return all_reduce(t, op, true, "all_reduce");
}

int jg_dist_all_reduce_mpi(jg_tensor *t, jg_dist_op op) {
    return all_reduce(t, op, false, "all_reduce");
}

int jg_dist_broadcast(jg_tensor *t, int root) {
    MPI_Datatype type;
    size_t es;
    if (need_init("broadcast") < 0)
        return -1;
    if (!t)
        return jg_set_error("broadcast: tensor is NULL");
    if (jg_is_traced(t))
        return jg_set_error("broadcast: cannot run on a traced tensor");
    if (root < 0 || root >= g.size)
        return jg_set_error("broadcast: Invalid rootRank %d (world size %d)", root, g.size);
    if (mpi_type(jg_dtype_of(t), &type, &es, "broadcast") < 0)
        return -1;
    int64_t n = jg_numel(t);
    size_t bytes = (size_t)n * es;
    char *buf = malloc(bytes ? bytes : 1);
    if (!buf)
        return jg_set_error("broadcast: out of memory");
    int rc = -1;
    /* the shapes must agree: a mismatch would corrupt memory, so it is
     * checked first (every rank learns of it) */
    int64_t mine[2] = {n, (int64_t)es}, lo[2], hi[2];
    MPI_Request rq[2];
    int err = MPI_Iallreduce(mine, lo, 2, MPI_INT64_T, MPI_MIN, g.comm, &rq[0]);
    if (err == MPI_SUCCESS)
        err = MPI_Iallreduce(mine, hi, 2, MPI_INT64_T, MPI_MAX, g.comm, &rq[1]);
    if (err != MPI_SUCCESS) {
        mpi_fail(err, "broadcast");
        goto out;
    }
    if (wait_all(2, rq, "a broadcast") < 0)
        goto out;
    if (lo[0] != hi[0] || lo[1] != hi[1]) {
        jg_set_error("broadcast: the ranks' tensors differ in size (%lld to %lld elements of "
                     "%lld to %lld bytes)",
                     (long long)lo[0], (long long)hi[0], (long long)lo[1], (long long)hi[1]);
        goto out;
    }
    if (g.rank == root && jg_copy_to(t, buf, bytes) < 0)
        goto out; /* (cannot fail for a tensor that is not traced) */
    MPI_Request r;
    if ((err = MPI_Ibcast(buf, (int)n, type, root, g.comm, &r)) != MPI_SUCCESS) {
        mpi_fail(err, "broadcast");
        goto out;
    }
    if (wait_all(1, &r, "a broadcast") < 0)
        goto out;
    rc = g.rank == root ? 0 : write_back(t, buf);
out:
    free(buf);
    return rc;
}

/* ---- data-parallel training ---- */

typedef struct {
    jg_dist_ddp *d;
    jg_tensor *p;
    int bucket;
    int64_t offset; /* elements into the bucket */
    int64_t numel;
    int slot; /* its used flag's index among the bucket's flags */
    int hook, hook2;
    bool ready;
} ddp_param;

typedef struct {
    MPI_Datatype type;
    size_t esize;
    int64_t n_grad; /* gradient elements; then one used flag per param */
    int64_t n;
    int first, n_params, n_ready; /* params[first .. first + n_params) */
    char *buf;                    /* this rank's contribution */
    char *gathered;               /* deterministic: every rank's, in rank order */
    MPI_Request req;
    bool launched, complete;
    double t_launch, t_complete;
} ddp_bucket;

struct jg_dist_ddp {
    int n_params;
    ddp_param *params;
    int n_buckets;
    ddp_bucket *b;
    jg_dist_ddp_options o;
    bool active; /* a backward reached our hooks */
    int next_launch;
    bool local_fail;
    jg_dist_ddp_stats st;
};

static double value_at(const ddp_bucket *b, const char *base, int64_t i) {
    return b->type == MPI_FLOAT ? ((const float *)base)[i] : ((const double *)base)[i];
}

static void set_used(ddp_bucket *b, int slot, double v) {
    int64_t i = b->n_grad + slot;
    if (b->type == MPI_FLOAT)
        ((float *)b->buf)[i] = (float)v;
    else
        ((double *)b->buf)[i] = v;
}

static int launch(jg_dist_ddp *d, int k) {
    ddp_bucket *b = &d->b[k];
    int err = d->o.nondeterministic ? MPI_Iallreduce(MPI_IN_PLACE, b->buf, (int)b->n, b->type,
                                                     MPI_SUM, g.comm, &b->req)
                                    : MPI_Iallgather(b->buf, (int)b->n, b->type, b->gathered,
                                                     (int)b->n, b->type, g.comm, &b->req);
    b->launched = true;
    b->t_launch = MPI_Wtime();
    if (k == 0)
        d->st.first_launch = b->t_launch;
    logf_("bucket %d launched (%lld elements)", k, (long long)b->n);
    if (err != MPI_SUCCESS) {
        b->complete = true;
        return mpi_fail(err, "DistributedDataParallel: starting a gradient reduction");
    }
    return 0;
}

/* Starts, in bucket order (the same on every rank, as MPI requires), every
 * bucket whose gradients are all in; gives the started ones a chance to
 * progress (Open MPI moves non-blocking collectives on inside MPI calls). */
static int launch_ready(jg_dist_ddp *d) {
    while (d->next_launch < d->n_buckets &&
           d->b[d->next_launch].n_ready == d->b[d->next_launch].n_params)
        if (launch(d, d->next_launch++) < 0)
            return -1;
    for (int k = 0; k < d->next_launch; k++) {
        ddp_bucket *b = &d->b[k];
        if (b->complete)
            continue;
        int done = 0;
        if (MPI_Test(&b->req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return jg_set_error("DistributedDataParallel: a gradient reduction failed");
        if (!done)
            break;
        b->complete = true;
        b->t_complete = MPI_Wtime();
    }
    return 0;
}

static void reset_iteration(jg_dist_ddp *d) {
    d->active = false;
    d->next_launch = 0;
    d->local_fail = false;
    for (int k = 0; k < d->n_buckets; k++) {
        ddp_bucket *b = &d->b[k];
        b->n_ready = 0;
        b->launched = b->complete = false;
        memset(b->buf, 0, (size_t)b->n * b->esize);
    }
    for (int i = 0; i < d->n_params; i++)
        d->params[i].ready = false;
}

static int finish(void *user, int status);

/* A backward reaches our parameters: finish runs at its end, also when it
 * fails before any gradient is ready (the other ranks wait for ours). */
static int arm(jg_dist_ddp *d) {
    if (d->active)
        return 0;
    d->active = true;
    d->st = (jg_dist_ddp_stats){.n_buckets = d->n_buckets};
    return jg_backward_queue_callback(finish, d);
}

static int on_expected(void *user, jg_tensor *leaf) {
    (void)leaf;
    return arm(((ddp_param *)user)->d);
}

static int on_ready(void *user, jg_tensor *leaf, jg_tensor *grad) {
    ddp_param *pp = user;
    jg_dist_ddp *d = pp->d;
    (void)leaf;
    if (arm(d) < 0)
        return -1;
    if (!d->st.first_ready)
        d->st.first_ready = MPI_Wtime();
    if (pp->ready)
        return jg_set_error("DistributedDataParallel: a parameter's gradient was ready twice in "
                            "one backward");
    d->st.last_ready = MPI_Wtime();
    ddp_bucket *b = &d->b[pp->bucket];
    if (jg_copy_to(grad, b->buf + (size_t)pp->offset * b->esize, (size_t)pp->numel * b->esize) < 0)
        return -1;
    set_used(b, pp->slot, 1);
    pp->ready = true;
    b->n_ready++;
    return launch_ready(d);
}

/* The end of a backward that reached our hooks: every bucket is started (a
 * failed rank's with its status set, so the others learn of it), all are
 * completed, and the reduced gradients replace the ones to be committed. */
static int finish(void *user, int status) {
    jg_dist_ddp *d = user;
    char unused_msg[512] = "";
    d->st.compute_end = MPI_Wtime();
    for (int k = 0; k < d->next_launch; k++)
        d->st.launched_during_backward += d->b[k].launched;
    logf_("backward computed; %d of %d buckets started during it", d->next_launch, d->n_buckets);
    if (status < 0)
        d->local_fail = true;
    for (int i = 0; i < d->n_params; i++) {
        ddp_param *pp = &d->params[i];
        if (pp->ready)
            continue;
        if (!d->o.find_unused_parameters && !d->local_fail && !unused_msg[0])
            snprintf(unused_msg, sizeof unused_msg,
                     "Expected to have finished reduction in the prior iteration before starting "
                     "a new one. This error indicates that your module has parameters that were "
                     "not used in producing loss (parameter %d got no gradient on rank %d). You "
                     "can enable unused parameter detection by passing the keyword argument "
                     "`find_unused_parameters=True` to DistributedDataParallel",
                     i, g.rank);
        /* contributes zeros, flagged unused */
        d->b[pp->bucket].n_ready++;
        pp->ready = true;
    }
    if (unused_msg[0])
        d->local_fail = true;
    int rc = 0;
    /* every bucket is started, on a failed rank too: no rank waits forever */
    while (d->next_launch < d->n_buckets && rc == 0)
        rc = launch(d, d->next_launch++);
    for (int k = 0; k < d->n_buckets && rc == 0; k++) {
        ddp_bucket *b = &d->b[k];
        if (b->complete)
            continue;
        char what[96];
        snprintf(what, sizeof what, "the gradient reduction of bucket %d", k);
        rc = wait_all(1, &b->req, what);
        b->complete = true;
        b->t_complete = MPI_Wtime();
    }
    d->st.reduce_end = MPI_Wtime();
    d->st.wait_seconds = d->st.reduce_end - d->st.compute_end;
    for (int k = 0; k < d->n_buckets; k++)
        d->st.reduce_seconds += d->b[k].t_complete - d->b[k].t_launch;
    logf_("all reductions complete (waited %.6f s after backward)", d->st.wait_seconds);
    if (rc < 0) {
        reset_iteration(d);
        return -1;
    }
    /* which ranks failed: one last small exchange, after every bucket, so
     * that a failure after the last bucket started is seen too */
    int mine = d->local_fail, *all = malloc(sizeof(int) * (size_t)g.size);
    MPI_Request rq;
    if (!all) {
        reset_iteration(d);
        return jg_set_error("DistributedDataParallel: out of memory");
    }
    if ((rc = MPI_Iallgather(&mine, 1, MPI_INT, all, 1, MPI_INT, g.comm, &rq)) != MPI_SUCCESS)
        rc = mpi_fail(rc, "DistributedDataParallel: exchanging the ranks' status");
    else
        rc = wait_all(1, &rq, "the ranks' status after backward");
    char failed[256] = "";
    int n_failed = 0;
    for (int r = 0; r < g.size && rc == 0; r++)
        if (all[r]) {
            size_t l = strlen(failed);
            snprintf(failed + l, sizeof failed - l, "%s%d", n_failed ? ", " : "", r);
            n_failed++;
        }
    free(all);
    if (rc < 0) {
        reset_iteration(d);
        return -1;
    }
    if (n_failed || d->local_fail) {
        if (unused_msg[0])
            jg_set_error("%s", unused_msg);
        else if (!d->local_fail)
            jg_set_error("DistributedDataParallel: backward failed on rank%s %s; no gradient "
                         "was changed on any rank",
                         n_failed > 1 ? "s" : "", failed);
        reset_iteration(d);
        return -1; /* (a local failure keeps its own message) */
    }
    /* the reduced gradients */
    for (int k = 0; k < d->n_buckets && rc == 0; k++) {
        ddp_bucket *b = &d->b[k];
        if (!d->o.nondeterministic)
            fold(b->type, b->esize, b->buf, b->gathered, b->n, g.size);
        if (!d->o.sum)
            divide(b->type, b->buf, b->n_grad, g.size);
        for (int i = b->first; i < b->first + b->n_params && rc == 0; i++) {
            ddp_param *pp = &d->params[i];
            if (value_at(b, b->buf, b->n_grad + pp->slot) == 0)
                continue; /* no rank used it: no gradient, as on one process */
            jg_scope_push();
            jg_tensor *t = jg_tensor_new(jg_dtype_of(pp->p), jg_ndim(pp->p), jg_shape(pp->p),
                                         b->buf + (size_t)pp->offset * b->esize);
            rc = t ? jg_backward_set_grad(pp->p, t) : -1;
            jg_scope_pop();
        }
    }
    reset_iteration(d);
    return rc;
}

int jg_dist_ddp_n_buckets(const jg_dist_ddp *d) {
    return d ? d->n_buckets : -1;
}

int jg_dist_ddp_stats_get(const jg_dist_ddp *d, jg_dist_ddp_stats *out) {
    if (!d || !out)
        return jg_set_error("jg_dist_ddp_stats_get: NULL argument");
    *out = d->st;
    return 0;
}

void jg_dist_ddp_free(jg_dist_ddp *d) {
    if (!d)
        return;
    for (int i = 0; i < d->n_params; i++) {
        if (d->params[i].hook > 0)
            jg_remove_grad_hook(d->params[i].p, d->params[i].hook);
        if (d->params[i].hook2 > 0)
            jg_remove_grad_hook(d->params[i].p, d->params[i].hook2);
        jg_release(d->params[i].p);
    }
    for (int k = 0; k < d->n_buckets; k++) {
        free(d->b[k].buf);
        free(d->b[k].gathered);
    }
    free(d->b);
    free(d->params);
    free(d);
}

jg_dist_ddp *jg_dist_ddp_new(int n_params, jg_tensor *const *params,
                             const jg_dist_ddp_options *opts) {
    const char *what = "DistributedDataParallel";
    if (need_init(what) < 0)
        return NULL;
    if (n_params < 0 || (n_params && !params)) {
        jg_set_error("%s: bad parameter list", what);
        return NULL;
    }
    jg_dist_ddp *d = calloc(1, sizeof *d);
    if (!d) {
        jg_set_error("%s: out of memory", what);
        return NULL;
    }
    if (opts)
        d->o = *opts;
    if (!d->o.bucket_bytes)
        d->o.bucket_bytes = (size_t)25 << 20;
    d->params = calloc((size_t)n_params + 1, sizeof *d->params);
    d->b = calloc((size_t)n_params + 1, sizeof *d->b);
    if (!d->params || !d->b) {
        jg_set_error("%s: out of memory", what);
        goto fail;
    }
    for (int i = 0; i < n_params; i++) {
        jg_tensor *p = params[i];
        if (!p || jg_is_traced(p) || !jg_is_leaf(p)) {
            jg_set_error("%s: parameter %d is %s", what, i,
                         !p                ? "NULL"
                         : jg_is_traced(p) ? "a traced tensor"
                                           : "not a leaf");
            goto fail;
        }
        const char *dn = jg_dtype_name(jg_dtype_of(p));
        if (jg_requires_grad(p) && strcmp(dn, "float32") && strcmp(dn, "float64")) {
            jg_set_error("%s: parameter %d has dtype %s; only float32 and float64 gradients "
                         "are reduced",
                         what, i, dn);
            goto fail;
        }
    }
    /* every rank starts from rank 0's parameters (all of them, as PyTorch) */
    for (int i = 0; i < n_params; i++)
        if (jg_dist_broadcast(params[i], 0) < 0)
            goto fail;
    /* buckets, in reverse registration order: the order gradients become
     * final in a backward through layers registered first to last */
    int nb = -1;
    size_t bytes = 0;
    for (int i = n_params - 1; i >= 0; i--) {
        jg_tensor *p = params[i];
        if (!jg_requires_grad(p))
            continue;
        MPI_Datatype type;
        size_t es;
        mpi_type(jg_dtype_of(p), &type, &es, what);
        size_t pb = (size_t)jg_numel(p) * es;
        if (nb < 0 || d->b[nb].type != type || (bytes + pb > d->o.bucket_bytes && bytes > 0)) {
            nb++;
            d->b[nb] = (ddp_bucket){.type = type, .esize = es, .first = d->n_params};
            bytes = 0;
        }
        ddp_bucket *b = &d->b[nb];
        ddp_param *pp = &d->params[d->n_params++];
        *pp = (ddp_param){d, jg_retain(p), nb, b->n_grad, jg_numel(p), b->n_params, 0, 0, false};
        b->n_grad += jg_numel(p);
        b->n_params++;
        bytes += pb;
    }
    d->n_buckets = nb + 1;
    for (int k = 0; k < d->n_buckets; k++) {
        ddp_bucket *b = &d->b[k];
        b->n = b->n_grad + b->n_params;
        if (b->n > INT32_MAX) {
            jg_set_error("%s: bucket too large; lower bucket_bytes", what);
            goto fail;
        }
        b->buf = calloc((size_t)b->n, b->esize);
        b->gathered =
            d->o.nondeterministic ? malloc(1) : malloc((size_t)b->n * b->esize * (size_t)g.size);
        if (!b->buf || !b->gathered) {
            jg_set_error("%s: out of memory for the gradient buckets", what);
            goto fail;
        }
    }
    for (int i = 0; i < d->n_params; i++)
        if ((d->params[i].hook =
                 jg_register_grad_ready_hook(d->params[i].p, on_ready, &d->params[i], NULL)) < 0 ||
            (d->params[i].hook2 = jg_register_grad_expected_hook(d->params[i].p, on_expected,
                                                                 &d->params[i], NULL)) < 0)
            goto fail;
    d->st.n_buckets = d->n_buckets;
    return d;
fail:
    jg_dist_ddp_free(d);
    return NULL;
}
