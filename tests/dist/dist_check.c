/* Data-parallel checks, run under mpirun by tests/dist/run.sh (any number of
 * ranks).  Exit 0 = pass; every failure prints the rank and the reason.
 *   dist_check api       all_reduce / broadcast / barrier and their errors
 *   dist_check train B   DDP with buckets of B bytes: after every step the
 *                        parameters are bitwise equal on every rank and to
 *                        one process accumulating the same micro-batches'
 *                        gradients in rank order (docs/distributed.md); the
 *                        first bucket's reduction starts during backward
 *   dist_check fail N    rank 1 fails mid-backward (N 1: after the last
 *                        layer's gradients are final; 2: before any is):
 *                        every rank's backward fails, no .grad changes, the
 *                        next step works
 *   dist_check unused    a parameter without a gradient: an error on every
 *                        rank (find_unused_parameters=false), none with it
 *   dist_check hang      rank 1 never runs its backward: the others give up
 *                        after JITGRAD_DIST_TIMEOUT and every rank ends (exit != 0) */
#include <jitgrad_dist.h>

#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank, size, failures;

#define CHECK(c, ...)                                                                              \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "dist_check rank %d line %d: ", rank, __LINE__);                       \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, " (last error: %s)\n", jg_last_error());                               \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

enum { IN = 4, HID = 8, OUT = 3, BATCH = 12, N_PARAMS = 4 };

typedef struct {
    jg_tensor *p[N_PARAMS]; /* w1 [IN,HID], b1 [HID], w2 [HID,OUT], b2 [OUT] */
} mlp;

static void mlp_init(mlp *m, uint64_t seed) {
    static const int64_t shapes[N_PARAMS][2] = {{IN, HID}, {HID, 0}, {HID, OUT}, {OUT, 0}};
    jg_manual_seed(seed);
    for (int i = 0; i < N_PARAMS; i++) {
        int nd = shapes[i][1] ? 2 : 1;
        m->p[i] = jg_keep(jg_mul_scalar(jg_randn(JG_F32, nd, shapes[i]), 0.5));
        jg_set_requires_grad(m->p[i], true);
    }
}

static void mlp_copy(mlp *dst, const mlp *src) {
    jg_set_grad_enabled(false); /* (a leaf copy, no history) */
    for (int i = 0; i < N_PARAMS; i++) {
        dst->p[i] = jg_keep(jg_clone(src->p[i]));
        jg_set_requires_grad(dst->p[i], true);
    }
    jg_set_grad_enabled(true);
}

static void mlp_free(mlp *m) {
    for (int i = 0; i < N_PARAMS; i++)
        jg_release(m->p[i]);
}

/* The deterministic data of rows [lo, hi) of the global batch of step s. */
static jg_tensor *rows(int s, int lo, int hi, int width, int salt) {
    float v[BATCH * HID];
    for (int i = lo; i < hi; i++)
        for (int j = 0; j < width; j++)
            v[(i - lo) * width + j] = (float)sin(0.37 * (i + 1) * (j + salt) + 1.3 * s + salt);
    return jg_tensor_new(JG_F32, 2, (const int64_t[]){hi - lo, width}, v);
}

/* Failure injection: a custom function whose backward fails. */
static int fail_fwd(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)ctx, (void)n;
    out[0] = jg_mul_scalar(in[0], 1);
    return 1;
}
static int fail_bwd(jg_ctx *ctx, int n_out, jg_tensor *const *dout, int n_in, jg_tensor **din) {
    (void)ctx, (void)n_out, (void)dout, (void)n_in, (void)din;
    return jg_set_error("injected failure on rank %d", rank);
}
static const jg_function Fail = {"Fail", fail_fwd, fail_bwd, NULL};

/* fail_at: 0 none, 1 between the layers (after the last layer's gradients
 * are final), 2 at the loss (before any is) */
static jg_tensor *loss_of(const mlp *m, int s, int lo, int hi, int fail_at, bool skip_b2) {
    jg_tensor *x = rows(s, lo, hi, IN, 1), *y = rows(s, lo, hi, OUT, 2);
    jg_tensor *h = jg_tanh(jg_add(jg_matmul(x, m->p[0]), m->p[1]));
    if (fail_at == 1 && jg_apply(&Fail, 1, &h, NULL, 0, &h) < 0)
        return NULL;
    jg_tensor *o = jg_matmul(h, m->p[2]);
    if (!skip_b2)
        o = jg_add(o, m->p[3]);
    jg_tensor *d = jg_sub(o, y);
    jg_tensor *l = jg_mul_scalar(jg_sum(jg_mul(d, d)), 1.0 / ((hi - lo) * OUT));
    if (fail_at == 2 && jg_apply(&Fail, 1, &l, NULL, 0, &l) < 0)
        return NULL;
    return l;
}

static void sgd(mlp *m, double lr) {
    bool prev = jg_set_grad_enabled(false);
    for (int i = 0; i < N_PARAMS; i++) {
        if (jg_grad(m->p[i]))
            jg_add_(m->p[i], jg_mul_scalar(jg_grad(m->p[i]), -lr));
        jg_clear_grad(m->p[i]);
    }
    jg_set_grad_enabled(prev);
}

static bool same_bits(jg_tensor *a, jg_tensor *b) {
    int64_t n = jg_numel(a);
    float *x = malloc(sizeof(float) * (size_t)n * 2);
    jg_copy_to(a, x, sizeof(float) * (size_t)n);
    jg_copy_to(b, x + n, sizeof(float) * (size_t)n);
    bool same = memcmp(x, x + n, sizeof(float) * (size_t)n) == 0;
    free(x);
    return same;
}

/* every rank holds the same bits as rank 0 */
static bool same_on_all_ranks(jg_tensor *t) {
    int64_t n = jg_numel(t);
    float *mine = malloc(sizeof(float) * (size_t)n), *r0 = malloc(sizeof(float) * (size_t)n);
    jg_copy_to(t, mine, sizeof(float) * (size_t)n);
    memcpy(r0, mine, sizeof(float) * (size_t)n);
    MPI_Bcast(r0, (int)n, MPI_FLOAT, 0, MPI_COMM_WORLD);
    int ok = memcmp(mine, r0, sizeof(float) * (size_t)n) == 0, all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    free(mine);
    free(r0);
    return all_ok;
}

static void check_api(void) {
    jg_tensor *t = jg_tensor_new(JG_F32, 1, (const int64_t[]){3},
                                 (const float[]){rank + 0.5f, 2.0f * rank, 1.0f});
    CHECK(jg_dist_all_reduce(t, JG_DIST_SUM) == 0, "all_reduce");
    float want[3] = {0, 0, 0}, got[3];
    for (int r = 0; r < size; r++)
        want[0] += r + 0.5f, want[1] += 2.0f * r, want[2] += 1.0f;
    jg_copy_to(t, got, sizeof got);
    CHECK(!memcmp(got, want, sizeof got), "all_reduce SUM: %g %g %g", got[0], got[1], got[2]);
    CHECK(jg_dist_all_reduce(t, JG_DIST_AVG) == 0, "all_reduce AVG");
    jg_copy_to(t, got, sizeof got);
    CHECK(got[2] == 1.0f * size, "AVG of equal values: %g", got[2]);
    jg_tensor *u = jg_tensor_new(JG_F64, 1, (const int64_t[]){2}, (const double[]){rank, 1});
    CHECK(jg_dist_all_reduce_mpi(u, JG_DIST_SUM) == 0, "all_reduce_mpi");
    CHECK(jg_item(jg_sum(u)) == size * (size - 1) / 2.0 + size, "all_reduce_mpi sum");
    jg_tensor *i64 =
        jg_tensor_new(JG_I64, 1, (const int64_t[]){1}, (const int64_t[]){(int64_t)rank});
    CHECK(jg_dist_all_reduce(i64, JG_DIST_AVG) == -1 &&
              strstr(jg_last_error(), "AVG needs a floating-point tensor"),
          "AVG on int64 refused");
    CHECK(jg_dist_all_reduce(NULL, JG_DIST_SUM) == -1, "NULL refused");
    /* broadcast from the last rank; version bumped (an in-place write) */
    jg_tensor *b = jg_tensor_new(JG_F32, 2, (const int64_t[]){2, 2},
                                 (const float[]){rank, rank + 1.0f, rank + 2.0f, rank + 3.0f});
    uint64_t v0 = jg_version(b);
    CHECK(jg_dist_broadcast(b, size - 1) == 0, "broadcast");
    CHECK(jg_item(jg_sum(b)) == 4.0 * (size - 1) + 6, "broadcast values");
    CHECK(rank == size - 1 || jg_version(b) > v0, "broadcast bumps the version");
    CHECK(jg_dist_broadcast(b, size) == -1 && strstr(jg_last_error(), "Invalid rootRank"),
          "bad root refused");
    jg_tensor *odd = jg_full(JG_F32, 1, (const int64_t[]){rank ? 2 : 3}, 1);
    CHECK(size == 1 ||
              (jg_dist_broadcast(odd, 0) == -1 && strstr(jg_last_error(), "differ in size")),
          "size mismatch refused on every rank");
    CHECK(jg_dist_barrier() == 0, "barrier");
    CHECK(jg_dist_init(NULL, NULL) == -1 && strstr(jg_last_error(), "twice"), "double init");
}

static void check_train(size_t bucket_bytes, bool nondet) {
    mlp m, ref;
    mlp_init(&m, 1234 + (uint64_t)rank); /* different on each rank: DDP broadcasts rank 0's */
    jg_dist_ddp_options o = {.bucket_bytes = bucket_bytes, .nondeterministic = nondet};
    jg_dist_ddp *d = jg_dist_ddp_new(N_PARAMS, m.p, &o);
    CHECK(d != NULL, "ddp_new");
    if (!d)
        return;
    for (int i = 0; i < N_PARAMS; i++)
        CHECK(same_on_all_ranks(m.p[i]), "parameter %d broadcast from rank 0", i);
    mlp_copy(&ref, &m); /* the one-process reference, no hooks */
    int per = BATCH / size;
    for (int s = 0; s < 4; s++) {
        jg_scope_push();
        jg_tensor *l = loss_of(&m, s, rank * per, (rank + 1) * per, 0, false);
        CHECK(jg_backward(l, NULL, 0) == 0, "DDP backward step %d", s);
        jg_dist_ddp_stats st;
        jg_dist_ddp_stats_get(d, &st);
        if (s == 0 && rank == 0)
            printf("np %d buckets %d: first bucket started %.1f us after the first gradient, "
                   "backward computed %.1f us after that; %d bucket(s) started during "
                   "backward; waited %.1f us after it\n",
                   size, st.n_buckets, 1e6 * (st.first_launch - st.first_ready),
                   1e6 * (st.compute_end - st.first_launch), st.launched_during_backward,
                   1e6 * st.wait_seconds);
        CHECK(st.launched_during_backward >= 1 && st.first_launch <= st.compute_end &&
                  st.first_launch >= st.first_ready,
              "the first bucket's reduction starts before backward ends");
        CHECK(st.n_buckets == 1 || st.first_launch < st.last_ready,
              "with several buckets, the first starts before the last gradient is computed");
        /* one process: the same micro-batches, gradients accumulated in
         * rank order, averaged */
        for (int r = 0; r < size; r++)
            CHECK(jg_backward(loss_of(&ref, s, r * per, (r + 1) * per, 0, false), NULL, 0) == 0,
                  "reference backward");
        if (!o.sum)
            for (int i = 0; i < N_PARAMS; i++)
                jg_set_grad(ref.p[i], jg_div(jg_grad(ref.p[i]), jg_full(JG_F32, 0, NULL, size)));
        for (int i = 0; i < N_PARAMS && !nondet; i++)
            CHECK(same_bits(jg_grad(m.p[i]), jg_grad(ref.p[i])),
                  "step %d: gradient %d differs from one process's", s, i);
        sgd(&m, 0.1);
        sgd(&ref, 0.1);
        for (int i = 0; i < N_PARAMS; i++) {
            CHECK(same_on_all_ranks(m.p[i]), "step %d: parameter %d differs between ranks", s, i);
            if (!nondet)
                CHECK(same_bits(m.p[i], ref.p[i]),
                      "step %d: parameter %d differs from one "
                      "process's",
                      s, i);
            else
                CHECK(fabs(jg_item(jg_sum(jg_sub(m.p[i], ref.p[i])))) < 1e-4,
                      "step %d: parameter %d far from one process's", s, i);
        }
        jg_scope_pop();
    }
    jg_dist_ddp_free(d);
    mlp_free(&m);
    mlp_free(&ref);
}

static void check_fail(int fail_at) {
    mlp m;
    mlp_init(&m, 99);
    jg_dist_ddp *d = jg_dist_ddp_new(N_PARAMS, m.p, &(jg_dist_ddp_options){.bucket_bytes = 64});
    int per = BATCH / size;
    jg_scope_push();
    jg_tensor *l = loss_of(&m, 0, rank * per, (rank + 1) * per, rank == 1 ? fail_at : 0, false);
    int rc = jg_backward(l, NULL, 0);
    CHECK(rc == -1, "backward fails on every rank");
    if (rank == 1)
        CHECK(strstr(jg_last_error(), "injected failure on rank 1") != NULL, "own message");
    else
        CHECK(strstr(jg_last_error(), "backward failed on rank 1;") != NULL,
              "the others name the failed rank");
    for (int i = 0; i < N_PARAMS; i++)
        CHECK(jg_grad(m.p[i]) == NULL, "no gradient written after a failed step");
    jg_scope_pop();
    /* the state is intact: the next step works */
    jg_scope_push();
    CHECK(jg_backward(loss_of(&m, 1, rank * per, (rank + 1) * per, 0, false), NULL, 0) == 0,
          "the step after a failure");
    for (int i = 0; i < N_PARAMS; i++)
        CHECK(jg_grad(m.p[i]) && same_on_all_ranks(jg_grad(m.p[i])), "gradients agree");
    jg_scope_pop();
    jg_dist_ddp_free(d);
    mlp_free(&m);
}

static void check_unused(void) {
    for (int find = 0; find < 2; find++) {
        mlp m;
        mlp_init(&m, 5);
        jg_dist_ddp *d = jg_dist_ddp_new(
            N_PARAMS, m.p,
            &(jg_dist_ddp_options){.bucket_bytes = 64, .find_unused_parameters = find});
        jg_scope_push();
        int per = BATCH / size;
        /* b2 unused on rank 0 only (used elsewhere when size > 1) */
        int rc = jg_backward(loss_of(&m, 0, rank * per, (rank + 1) * per, 0, rank == 0), NULL, 0);
        if (!find) {
            CHECK(rc == -1, "a parameter without gradient is an error on every rank");
            CHECK(rank != 0 || strstr(jg_last_error(), "find_unused_parameters=True"),
                  "PyTorch's message on the rank that lacks it");
            CHECK(jg_grad(m.p[0]) == NULL, "nothing written");
        } else {
            CHECK(rc == 0, "find_unused_parameters");
            CHECK((size == 1) == (jg_grad(m.p[3]) == NULL),
                  "b2 gets a gradient iff another rank used it");
            for (int i = 0; i < N_PARAMS; i++)
                CHECK(!jg_grad(m.p[i]) || same_on_all_ranks(jg_grad(m.p[i])), "agree");
        }
        jg_scope_pop();
        jg_dist_ddp_free(d);
        mlp_free(&m);
    }
}

int main(int argc, char **argv) {
    if (jg_dist_init(&argc, &argv) < 0) {
        fprintf(stderr, "dist_check: %s\n", jg_last_error());
        return 1;
    }
    rank = jg_dist_rank();
    size = jg_dist_world_size();
    const char *mode = argc > 1 ? argv[1] : "api";
    if (!strcmp(mode, "api")) {
        check_api();
    } else if (!strcmp(mode, "train")) {
        check_train(argc > 2 ? (size_t)atol(argv[2]) : 0, argc > 3 && !strcmp(argv[3], "mpi"));
    } else if (!strcmp(mode, "fail")) {
        if (size < 2) {
            fprintf(stderr, "dist_check fail: needs 2 ranks\n");
            return 1;
        }
        check_fail(argc > 2 ? atoi(argv[2]) : 1);
    } else if (!strcmp(mode, "unused")) {
        check_unused();
    } else if (!strcmp(mode, "hang")) {
        mlp m;
        mlp_init(&m, 7);
        jg_dist_ddp *d = jg_dist_ddp_new(N_PARAMS, m.p, NULL);
        if (rank == 1) { /* stalls: the others must not wait forever */
            fflush(stdout);
            for (;;)
                pause();
        }
        jg_backward(loss_of(&m, 0, 0, 2, 0, false), NULL, 0); /* aborts after the timeout */
        jg_dist_ddp_free(d);
    } else {
        fprintf(stderr, "dist_check: unknown mode %s\n", mode);
        return 2;
    }
    int all = 0;
    MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("dist_check %s np %d: %s\n", mode, size, all ? "FAILED" : "ok");
    jg_dist_finalize();
    return all ? 1 : 0;
}
