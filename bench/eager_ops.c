/* Eager-mode cost of jitgrad: per-op overhead on a long chain of tiny ops,
 * and (q*(k+k)).sum() forward+backward at 16 and 1,048,576 elements, with a
 * plain-C memory-bandwidth reference for the large case.
 *
 * Method: every workload is warmed up, then timed in BATCHES batches; a
 * batch times N back-to-back iterations with clock_gettime(CLOCK_MONOTONIC)
 * (N is calibrated so a batch lasts about TARGET_BATCH_S) and the reported
 * figure is the MEDIAN over batches of (batch time / N).  Each iteration runs
 * inside jg_scope_push()/jg_scope_pop(), so nothing accumulates, and clears
 * the leaves' .grad (as `x.grad = None` does in the PyTorch script).
 *
 * Output: one line per figure, `<impl> <workload> key=value ...`; the first
 * key is the headline figure (bench/run.sh reads it). */
#include "bench.h"
#include <jitgrad.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BATCHES 15
#define TARGET_BATCH_S 0.02
#define CHAIN_LEN BENCH_CHAIN_LEN
#define SMALL_N 16
#define LARGE_N (1 << 20)

static void die(const char *what) {
    fprintf(stderr, "eager_ops: %s failed: %s\n", what, jg_last_error());
    exit(1);
}

typedef struct {
    double median, min, max; /* seconds per iteration */
    long iters;              /* per batch */
} timing;

/* Times fn(user) as described at the top of the file. */
static timing measure(void (*fn)(void *), void *user) {
    for (int i = 0; i < 3; i++) /* warm-up: caches, allocator, page faults */
        fn(user);
    long n = 1;
    for (;;) { /* calibrate: double n until one batch takes TARGET_BATCH_S / 4 */
        double t0 = bench_now();
        for (long i = 0; i < n; i++)
            fn(user);
        double dt = bench_now() - t0;
        if (dt >= TARGET_BATCH_S / 4 || n >= (1L << 24)) {
            double per = dt / (double)n;
            n = per > 0 ? (long)(TARGET_BATCH_S / per) : n;
            break;
        }
        n *= 2;
    }
    if (n < 3)
        n = 3;
    double per[BATCHES];
    for (int b = 0; b < BATCHES; b++) {
        double t0 = bench_now();
        for (long i = 0; i < n; i++)
            fn(user);
        per[b] = (bench_now() - t0) / (double)n;
    }
    qsort(per, BATCHES, sizeof per[0], bench_cmp);
    return (timing){per[BATCHES / 2], per[0], per[BATCHES - 1], n};
}

/* ------------------------------------------------------------ the chain */

/* The chain (bench.h), dying on error. */
static jg_tensor *chain_forward(jg_tensor *x) {
    jg_tensor *s = bench_chain(x);
    if (!s)
        die("chain");
    return s;
}

/* The same chain in plain C (f32 steps, as the kernels do) for a check. */
static double chain_reference(const float *x, int n) {
    double total = 0;
    for (int e = 0; e < n; e++) {
        float y = x[e];
        for (int i = 0; i < CHAIN_LEN; i++) {
            switch (i % 4) {
            case 0:
                y = y + 0.5f;
                break;
            case 1:
                y = y * 0.75f;
                break;
            case 2:
                y = tanhf(y);
                break;
            default:
                y = y * x[e];
                break;
            }
        }
        total += y;
    }
    return total;
}

static void chain_fwd_bwd(void *user) {
    jg_tensor *x = user;
    jg_scope_push();
    jg_tensor *s = chain_forward(x);
    if (jg_backward(s, NULL, 0) < 0)
        die("jg_backward (chain)");
    jg_scope_pop();
    jg_clear_grad(x);
}

static void chain_fwd_only(void *user) {
    jg_tensor *x = user;
    jg_scope_push();
    chain_forward(x);
    jg_scope_pop();
}

static void chain_fwd_nograd(void *user) {
    jg_tensor *x = user;
    bool prev = jg_set_grad_enabled(false);
    jg_scope_push();
    chain_forward(x);
    jg_scope_pop();
    jg_set_grad_enabled(prev);
}

/* --------------------------------------------------- (q * (k + k)).sum() */

typedef struct {
    jg_tensor *q, *k;
} qk_args;

static void qkk_fwd_bwd(void *user) {
    qk_args *a = user;
    jg_scope_push();
    jg_tensor *s = jg_sum(jg_mul(a->q, jg_add(a->k, a->k)));
    if (!s || jg_backward(s, NULL, 0) < 0)
        die("(q*(k+k)).sum() backward");
    jg_scope_pop();
    jg_clear_grad(a->q);
    jg_clear_grad(a->k);
}

static void qkk_fwd_nograd(void *user) {
    qk_args *a = user;
    bool prev = jg_set_grad_enabled(false);
    jg_scope_push();
    if (!jg_sum(jg_mul(a->q, jg_add(a->k, a->k))))
        die("(q*(k+k)).sum()");
    jg_scope_pop();
    jg_set_grad_enabled(prev);
}

/* grad q = 2k and grad k = 2q exactly in f32. */
static void qkk_check(qk_args *a, int64_t n) {
    jg_scope_push();
    jg_tensor *s = jg_sum(jg_mul(a->q, jg_add(a->k, a->k)));
    if (!s || jg_backward(s, NULL, 0) < 0)
        die("(q*(k+k)).sum() check");
    const float *q = jg_data(a->q), *k = jg_data(a->k);
    const float *gq = jg_data(jg_grad(a->q)), *gk = jg_data(jg_grad(a->k));
    for (int64_t i = 0; i < n; i++)
        if (gq[i] != 2 * k[i] || gk[i] != 2 * q[i]) {
            fprintf(stderr, "eager_ops: wrong gradient at %lld\n", (long long)i);
            exit(1);
        }
    jg_scope_pop();
    jg_clear_grad(a->q);
    jg_clear_grad(a->k);
}

/* --------------------------------------------- plain-C bandwidth reference */

typedef struct {
    float *q, *k, *t, *p, *gq, *gt, *gk;
    float *a, *b, *out;
    volatile float sink;
} cref_bufs;

/* The memory traffic of an unfused eager (q*(k+k)).sum() forward+backward,
 * one loop per op over separate 4 MiB buffers, no framework at all:
 *   t = k + k      (read 1, write 1)     p = q * t   (read 2, write 1)
 *   s = sum(p)     (read 1)
 *   gq = 1 * t     (read 1, write 1)     gt = 1 * q  (read 1, write 1)
 *   gk = gt + gt   (read 1, write 1)
 * = 7 array reads + 5 array writes of LARGE_N floats (48 MiB). */
static void cref_qkk(void *user) {
    cref_bufs *c = user;
    const int n = LARGE_N;
    float *restrict t = c->t, *restrict p = c->p;
    for (int i = 0; i < n; i++)
        t[i] = c->k[i] + c->k[i];
    for (int i = 0; i < n; i++)
        p[i] = c->q[i] * t[i];
    float s = 0;
    for (int i = 0; i < n; i++)
        s += p[i];
    c->sink = s;
    float g = 1.0f;
    for (int i = 0; i < n; i++)
        c->gq[i] = g * t[i];
    for (int i = 0; i < n; i++)
        c->gt[i] = g * c->q[i];
    for (int i = 0; i < n; i++)
        c->gk[i] = c->gt[i] + c->gt[i];
}

static void cref_mul(void *user) {
    cref_bufs *c = user;
    float *restrict out = c->out;
    const float *restrict a = c->a, *restrict b = c->b;
    for (int i = 0; i < LARGE_N; i++)
        out[i] = a[i] * b[i];
}

static void cref_memcpy(void *user) {
    cref_bufs *c = user;
    memcpy(c->out, c->a, (size_t)LARGE_N * sizeof(float));
}

static float *fbuf(float fill) {
    float *p = aligned_alloc(64, (size_t)LARGE_N * sizeof(float));
    if (!p) {
        fprintf(stderr, "eager_ops: out of memory\n");
        exit(1);
    }
    for (int i = 0; i < LARGE_N; i++)
        p[i] = fill + (float)(i % 7) * 0.125f;
    return p;
}

/* ------------------------------------------------------------------ main */

static void print_timing(const char *impl, const char *name, const char *head, double head_val,
                         timing t) {
    printf("%s %s %s=%.4g iter_us=%.4g min_us=%.4g max_us=%.4g iters_per_batch=%ld batches=%d\n",
           impl, name, head, head_val, t.median * 1e6, t.min * 1e6, t.max * 1e6, t.iters, BATCHES);
    fflush(stdout);
}

/* Runs workload `name` unless the command line picked another one. */
static bool wanted(const char *only, const char *name) {
    return !only || !strcmp(only, name);
}

int main(int argc, char **argv) {
    /* `eager_ops chain` / `eager_ops qkk16` / `eager_ops qkk1m` / `eager_ops cref` run one
     * workload group (for profilers); no argument runs everything. */
    const char *only = argc > 1 ? argv[1] : NULL;
    if (only && !wanted(only, "chain") && !wanted(only, "qkk16") && !wanted(only, "qkk1m") &&
        !wanted(only, "cref")) {
        fprintf(stderr, "usage: %s [chain|qkk16|qkk1m|cref]\n", argv[0]);
        return 2;
    }
    jg_manual_seed(1234);
    timing t;

    /* (1) the chain */
    if (wanted(only, "chain")) {
        int64_t sshape[1] = {SMALL_N};
        jg_tensor *x = jg_rand(JG_F32, 1, sshape); /* U[0,1) */
        if (!x)
            die("jg_rand");
        jg_set_requires_grad(x, true);
        jg_scope_push();
        double got = jg_item(chain_forward(x));
        double want = chain_reference(jg_data(x), SMALL_N);
        jg_scope_pop();
        if (!(fabs(got - want) <= 1e-4 * (1 + fabs(want)))) {
            fprintf(stderr, "eager_ops: chain value %.9g, plain C gives %.9g\n", got, want);
            return 1;
        }
        t = measure(chain_fwd_bwd, x);
        print_timing("jitgrad", "chain100_f32x16", "per_op_us", t.median * 1e6 / CHAIN_LEN, t);
        t = measure(chain_fwd_only, x);
        print_timing("jitgrad", "chain100_f32x16_fwd", "per_op_us", t.median * 1e6 / CHAIN_LEN, t);
        t = measure(chain_fwd_nograd, x);
        print_timing("jitgrad", "chain100_f32x16_nograd", "per_op_us", t.median * 1e6 / CHAIN_LEN,
                     t);
        jg_release(x);
    }

    /* (2) (q*(k+k)).sum() */
    const int64_t sizes[2] = {SMALL_N, LARGE_N};
    for (int s = 0; s < 2; s++) {
        if (!wanted(only, s == 0 ? "qkk16" : "qkk1m"))
            continue;
        int64_t shape[1] = {sizes[s]};
        qk_args a = {jg_randn(JG_F32, 1, shape), jg_randn(JG_F32, 1, shape)};
        if (!a.q || !a.k)
            die("jg_randn");
        jg_set_requires_grad(a.q, true);
        jg_set_requires_grad(a.k, true);
        qkk_check(&a, sizes[s]);
        char name[64];
        snprintf(name, sizeof name, "qkk_f32x%lld", (long long)sizes[s]);
        t = measure(qkk_fwd_bwd, &a);
        print_timing("jitgrad", name, "us", t.median * 1e6, t);
        snprintf(name, sizeof name, "qkk_f32x%lld_nograd", (long long)sizes[s]);
        t = measure(qkk_fwd_nograd, &a);
        print_timing("jitgrad", name, "us", t.median * 1e6, t);
        jg_release(a.q);
        jg_release(a.k);
    }
    if (!wanted(only, "cref"))
        return 0;

    /* (3) plain-C bandwidth reference for the 1M-element case */
    cref_bufs c = {fbuf(1), fbuf(2), fbuf(0), fbuf(0), fbuf(0), fbuf(0),
                   fbuf(0), fbuf(1), fbuf(2), fbuf(0), 0};
    const double mib = (double)LARGE_N * sizeof(float) / (1024.0 * 1024.0);
    t = measure(cref_memcpy, &c);
    double memcpy_bytes = 2 * mib * 1048576.0; /* read + write */
    double memcpy_bw = memcpy_bytes / t.median;
    printf("cref memcpy_f32x%d us=%.4g GBps=%.4g bytes=%.0f\n", LARGE_N, t.median * 1e6,
           memcpy_bw / 1e9, memcpy_bytes);
    t = measure(cref_mul, &c);
    double mul_bytes = 3 * mib * 1048576.0; /* 2 reads + 1 write */
    double mul_bw = mul_bytes / t.median;
    printf("cref mul_f32x%d us=%.4g GBps=%.4g bytes=%.0f\n", LARGE_N, t.median * 1e6, mul_bw / 1e9,
           mul_bytes);
    t = measure(cref_qkk, &c);
    double qkk_bytes = 12 * mib * 1048576.0; /* 7 reads + 5 writes, see cref_qkk */
    printf("cref qkk_f32x%d_loops us=%.4g GBps=%.4g bytes=%.0f\n", LARGE_N, t.median * 1e6,
           qkk_bytes / t.median / 1e9, qkk_bytes);
    /* the bound: the same bytes at the best streaming rate measured above */
    double best_bw = memcpy_bw > mul_bw ? memcpy_bw : mul_bw;
    printf("cref qkk_f32x%d_bound us=%.4g GBps=%.4g bytes=%.0f\n", LARGE_N,
           qkk_bytes / best_bw * 1e6, best_bw / 1e9, qkk_bytes);
    float *bufs[] = {c.q, c.k, c.t, c.p, c.gq, c.gt, c.gk, c.a, c.b, c.out};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    return 0;
}
