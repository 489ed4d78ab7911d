/* jitgrad against the machine's bounds, measured in the same run:
 *
 *   roofline triad   [threads]  STREAM triad a[i] = b[i] + s * c[i], 4M f32
 *   roofline fused   [threads]  (a*b+c).relu().sum() forward+backward, 4M f32
 *                               leaves: eager, interp, c, and the memory bound
 *                               (minimum bytes / the triad rate just measured);
 *                               fused_relu_4M_fwd_bwd sets the gradients to
 *                               None after each backward (as bench/kernels.py
 *                               and PyTorch's run of it do),
 *                               fused_relu_4M_fwd_bwd_acc keeps them, so each
 *                               backward adds into the existing .grad
 *                               (gradient accumulation); cpu_us: the
 *                               median CPU time of the calling thread (at 1
 *                               thread the whole cost, not stretched by other
 *                               processes on the machine), faults: page
 *                               faults per call
 *                               fused_one_program: the same step with the
 *                               backward inside the compiled program
 *                               (loss.backward() traced with the forward, as
 *                               in a whole training step): one pass over a,
 *                               b, c writing the sum and the 3 gradients,
 *                               against its bound of 24 B per element
 *   roofline mlp     [threads]  MLP 784-256-256-10, batch 64, one SGD step:
 *                               eager, interp, c, and the sgemm bound (the
 *                               step's matmul FLOPs / cblas_sgemm's rate at
 *                               the same shapes); cpu_us as for fused
 *   roofline latency            first call of the compiled (c backend) MLP
 *                               step: trace + code generation + gcc (empty
 *                               cache) or + loading (warm disk cache); run it
 *                               twice with one fresh JITGRAD_CACHE_DIR
 *
 * Thread count: [threads] goes to openblas_set_num_threads here; jitgrad's
 * own kernels follow JITGRAD_NUM_THREADS, which bench/suite.py sets (with
 * OPENBLAS_NUM_THREADS and OMP_NUM_THREADS) for every process it starts.
 * Output: `<impl> <workload> <key>=<value> ...` lines (bench/suite.py). */
#include "bench.h"
#include <jitgrad.h>

#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define FUSED_N (4 << 20)
#define SAMPLES 11

static void die(const char *what) {
    fprintf(stderr, "roofline: %s failed: %s\n", what, jg_last_error());
    exit(1);
}

static int g_threads = 1;
/* bytes/s of the triad by the calling thread's CPU time (best sample): at 1
 * thread the rate of a run no other process interrupted */
static double g_triad_cpu_rate;

static double thread_cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static long minor_faults(void) {
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return r.ru_minflt;
}

/* ------------------------------------------------------------ STREAM triad */

typedef struct {
    float *a;
    const float *b, *c;
    int64_t lo, hi;
} triad_part;

static void *triad_run(void *p) {
    triad_part *t = p;
    float *restrict a = t->a;
    const float *restrict b = t->b, *restrict c = t->c;
    for (int64_t i = t->lo; i < t->hi; i++)
        a[i] = b[i] + 3.0f * c[i];
    return NULL;
}

/* Best-of-SAMPLES triad rate in bytes/s (STREAM reports the best time), over
 * g_threads threads each streaming its own contiguous part. */
static double triad_rate(bool print) {
    const int64_t n = FUSED_N;
    float *a = aligned_alloc(64, sizeof(float) * n), *b = aligned_alloc(64, sizeof(float) * n),
          *c = aligned_alloc(64, sizeof(float) * n);
    if (!a || !b || !c) {
        fprintf(stderr, "roofline: out of memory\n");
        exit(1);
    }
    for (int64_t i = 0; i < n; i++)
        a[i] = 0, b[i] = 1.0f, c[i] = (float)(i % 7);
    triad_part parts[64];
    int nt = g_threads < 1 ? 1 : g_threads > 64 ? 64 : g_threads;
    for (int k = 0; k < nt; k++)
        parts[k] = (triad_part){a, b, c, n * k / nt, n * (k + 1) / nt};
    double t[SAMPLES], cpu[SAMPLES];
    for (int s = 0; s < SAMPLES; s++) {
        pthread_t th[64];
        double t0 = bench_now(), c0 = thread_cpu_now();
        for (int k = 1; k < nt; k++)
            pthread_create(&th[k], NULL, triad_run, &parts[k]);
        triad_run(&parts[0]);
        for (int k = 1; k < nt; k++)
            pthread_join(th[k], NULL);
        t[s] = bench_now() - t0;
        cpu[s] = thread_cpu_now() - c0;
        __asm__ volatile("" : : "r"(a) : "memory");
    }
    qsort(t, SAMPLES, sizeof *t, bench_cmp);
    qsort(cpu, SAMPLES, sizeof *cpu, bench_cmp);
    g_triad_cpu_rate = 3.0 * sizeof(float) * (double)n / cpu[0];
    double bytes = 3.0 * sizeof(float) * (double)n; /* STREAM's count: no write-allocate */
    if (print)
        printf("cref triad_4M GBps=%.4g best_us=%.4g median_us=%.4g bytes=%.0f threads=%d\n",
               bytes / t[0] / 1e9, t[0] * 1e6, t[SAMPLES / 2] * 1e6, bytes, nt);
    free(a), free(b), free(c);
    return bytes / t[0];
}

/* ------------------------------------------------- (a*b+c).relu().sum() */

static int p_fused(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    out[0] = jg_sum(jg_relu(jg_add(jg_mul(in[0], in[1]), in[2])));
    return out[0] ? 1 : -1;
}

/* The forward and the backward in one program: what a compiled training
 * step holds.  The loss is returned without history (the gradients are
 * already in .grad). */
static int p_fused_step(void *user, const void *args, int n, jg_tensor *const *in,
                        jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *loss = jg_sum(jg_relu(jg_add(jg_mul(in[0], in[1]), in[2])));
    if (!loss || jg_backward(loss, NULL, 0) < 0)
        return -1;
    out[0] = jg_detach(loss);
    return out[0] ? 1 : -1;
}

/* Also measured by fused_median: the median CPU time of the calling thread
 * (the whole cost at 1 thread, whatever else runs on the machine) and the
 * page faults per call. */
static double g_cpu_median, g_faults;

/* Median seconds of one forward (compiled through c when set) + backward of
 * f; acc: the leaves' gradients accumulate from call to call, else they are
 * set to None after each backward (inside the timing, as a training step's
 * zero_grad(set_to_none=True)). */
static bool g_inner_backward; /* the program runs the backward itself */

static double fused_median(jg_compiled *c, jg_program_fn f, int n, jg_tensor *const *in,
                           int samples, bool acc) {
    double *t = malloc(sizeof(double) * 2 * (size_t)samples), *cpu = t + samples;
    if (!t) {
        fprintf(stderr, "roofline: out of memory\n");
        exit(1);
    }
    long f0 = minor_faults();
    for (int s = 0; s < samples; s++) {
        double t0 = bench_now(), c0 = thread_cpu_now();
        jg_scope_push();
        jg_tensor *out;
        int rc = c ? jg_compiled_call(c, NULL, 0, n, in, &out) : f(NULL, NULL, n, in, &out);
        if (rc < 0 || (!g_inner_backward && jg_backward(out, NULL, 0) < 0))
            die("fused fwd+bwd");
        for (int i = 0; i < n && !acc; i++)
            if (jg_set_grad(in[i], NULL) < 0)
                die("jg_set_grad");
        jg_scope_pop();
        t[s] = bench_now() - t0;
        cpu[s] = thread_cpu_now() - c0;
    }
    g_faults = (double)(minor_faults() - f0) / samples;
    qsort(t, (size_t)samples, sizeof *t, bench_cmp);
    qsort(cpu, (size_t)samples, sizeof *cpu, bench_cmp);
    double m = t[samples / 2];
    g_cpu_median = cpu[samples / 2];
    free(t);
    return m;
}

/* eager, interp, c medians of one forward+backward (seconds; < 0: no c) */
static void time_backends(const char *name, jg_program_fn f, int n, jg_tensor *const *in,
                          int samples, bool acc, double *t) {
    const char *be[2] = {"interp", "c"};
    double cpu[3] = {0}, faults[3] = {0};
    fused_median(NULL, f, n, in, 2, acc); /* warm-up */
    t[0] = fused_median(NULL, f, n, in, samples, acc);
    cpu[0] = g_cpu_median, faults[0] = g_faults;
    for (int k = 0; k < 2; k++) {
        t[k + 1] = -1;
        if (!jg_compile_backend_available(be[k]))
            continue;
        jg_compiled *c = jg_compile(f, NULL, &(jg_compile_options){.backend = be[k]});
        if (!c)
            die("jg_compile");
        fused_median(c, f, n, in, 2, acc); /* trace + compile outside the timing */
        t[k + 1] = fused_median(c, f, n, in, samples, acc);
        cpu[k + 1] = g_cpu_median, faults[k + 1] = g_faults;
        jg_compiled_free(c);
    }
    for (int k = 0; k < 3; k++)
        if (t[k] > 0)
            printf("jitgrad %s_%s us=%.4g threads=%d cpu_us=%.4g faults=%.0f\n", name,
                   k == 0 ? "eager" : be[k - 1], t[k] * 1e6, g_threads, cpu[k] * 1e6, faults[k]);
}

static void run_fused(void) {
    jg_scope_push();
    jg_manual_seed(1);
    int64_t shape[1] = {FUSED_N};
    jg_tensor *in[3];
    for (int i = 0; i < 3; i++) {
        in[i] = jg_randn(JG_F32, 1, shape);
        if (!in[i])
            die("jg_randn");
        jg_set_requires_grad(in[i], true);
    }
    double rate = triad_rate(true);
    double t[3];
    /* The least a forward call and a later backward can move (STREAM's
     * count: no write-allocate): the forward reads a, b, c; the backward
     * reads them again (or what it computes from them) and writes the three
     * gradients (b*mask, a*mask, mask); the sum never reaches memory.  With
     * accumulation the backward also reads the three .grad it adds to.  (One
     * pass over a, b, c writing the gradients, 6 floats per element, would
     * need the backward inside the forward's loop: printed as onepass_us.) */
    for (int acc = 0; acc < 2; acc++) {
        const char *name = acc ? "fused_relu_4M_fwd_bwd_acc" : "fused_relu_4M_fwd_bwd";
        time_backends(name, p_fused, 3, in, SAMPLES, acc, t);
        double bytes = (acc ? 12.0 : 9.0) * sizeof(float) * FUSED_N;
        double onepass = (acc ? 9.0 : 6.0) * sizeof(float) * FUSED_N;
        printf("bound %s us=%.4g bytes=%.0f triad_GBps=%.4g onepass_us=%.4g threads=%d "
               "cpu_us=%.4g\n",
               name, bytes / rate * 1e6, bytes, rate / 1e9, onepass / rate * 1e6, g_threads,
               bytes / g_triad_cpu_rate * 1e6);
    }
    /* One program: the forward reads a, b, c, the backward's loop is the
     * forward's (the sum's gradient is its seed, not its value), so the
     * least it moves is a, b, c read once and the 3 gradients written. */
    g_inner_backward = true;
    time_backends("fused_one_program", p_fused_step, 3, in, SAMPLES, false, t);
    g_inner_backward = false;
    double bytes = 6.0 * sizeof(float) * FUSED_N;
    printf("bound fused_one_program us=%.4g bytes=%.0f triad_GBps=%.4g threads=%d cpu_us=%.4g\n",
           bytes / rate * 1e6, bytes, rate / 1e9, g_threads, bytes / g_triad_cpu_rate * 1e6);
    jg_scope_pop();
}

/* ------------------------------------------------------------------ MLP */

enum { B = 64, D0 = 784, D1 = 256, D2 = 256, D3 = 10 };

/* in: x, w1, b1, w2, b2, w3, b3, target -> cross-entropy loss */
static int p_mlp(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *h = jg_relu(jg_add(jg_matmul(in[0], in[1]), in[2]));
    h = jg_relu(jg_add(jg_matmul(h, in[3]), in[4]));
    out[0] = jg_cross_entropy(jg_add(jg_matmul(h, in[5]), in[6]), in[7]);
    return out[0] ? 1 : -1;
}

typedef struct {
    jg_tensor *in[8];
    jg_optim *opt;
} mlp_state;

static void mlp_init(mlp_state *m) {
    jg_manual_seed(2);
    const int64_t dims[4] = {D0, D1, D2, D3};
    m->in[0] = jg_randn(JG_F32, 2, (int64_t[]){B, D0});
    for (int l = 0; l < 3; l++) {
        jg_tensor *w = jg_randn(JG_F32, 2, (int64_t[]){dims[l], dims[l + 1]});
        if (!w)
            die("jg_randn");
        m->in[1 + 2 * l] = jg_mul_scalar(w, 1.0 / sqrt((double)dims[l]));
        m->in[2 + 2 * l] = jg_full(JG_F32, 1, (int64_t[]){dims[l + 1]}, 0.0);
    }
    int64_t tv[B];
    for (int i = 0; i < B; i++)
        tv[i] = i % D3;
    m->in[7] = jg_tensor_new(JG_I64, 1, (int64_t[]){B}, tv);
    for (int i = 0; i < 8; i++)
        if (!m->in[i])
            die("mlp inputs");
    for (int i = 1; i < 7; i++)
        jg_set_requires_grad(m->in[i], true);
    m->opt = jg_optim_sgd(m->in + 1, 6, 0.01, 0, 0, 0, false);
    if (!m->opt)
        die("jg_optim_sgd");
}

/* One step: forward (compiled when c is set), backward, update, grads to None. */
static void mlp_step(mlp_state *m, jg_compiled *c) {
    jg_scope_push();
    jg_tensor *loss;
    int rc = c ? jg_compiled_call(c, NULL, 0, 8, m->in, &loss) : p_mlp(NULL, NULL, 8, m->in, &loss);
    if (rc < 0 || jg_backward(loss, NULL, 0) < 0 || jg_optim_step(m->opt) < 0 ||
        jg_optim_zero_grad(m->opt, true) < 0)
        die("mlp step");
    jg_scope_pop();
}

/* Median wall seconds per step; *cpu (when set): median CPU seconds of the
 * calling thread (at 1 thread the whole cost, not stretched by other
 * processes on the machine). */
static double mlp_median(mlp_state *m, jg_compiled *c, int samples, double *cpu) {
    double *t = malloc(sizeof(double) * (size_t)samples * 2), *ct = t + samples;
    for (int s = 0; s < samples; s++) {
        double t0 = bench_now(), c0 = thread_cpu_now();
        mlp_step(m, c);
        t[s] = bench_now() - t0;
        ct[s] = thread_cpu_now() - c0;
    }
    qsort(t, (size_t)samples, sizeof *t, bench_cmp);
    qsort(ct, (size_t)samples, sizeof *ct, bench_cmp);
    double r = t[samples / 2];
    if (cpu)
        *cpu = ct[samples / 2];
    free(t);
    return r;
}

/* The step's matmuls as cblas_sgemm calls (row-major): forward x@w1, h1@w2,
 * h2@w3; backward dW = h^T @ dY for the three layers and dX = dY @ W^T for
 * the two hidden inputs (x needs no gradient).  Returns FLOPs, sets *secs to
 * the median time of one pass over all eight. */
static double sgemm_step(double *secs) {
    struct {
        int m, n, k;
        bool ta, tb;
    } g[8] = {
        {B, D1, D0, false, false}, {B, D2, D1, false, false}, {B, D3, D2, false, false},
        {D2, D3, B, true, false},  {B, D2, D3, false, true},  {D1, D2, B, true, false},
        {B, D1, D2, false, true},  {D0, D1, B, true, false},
    };
    float *a = calloc((size_t)D0 * D1, sizeof(float)), *b = calloc((size_t)D0 * D1, sizeof(float)),
          *c = calloc((size_t)D0 * D1, sizeof(float));
    if (!a || !b || !c) {
        fprintf(stderr, "roofline: out of memory\n");
        exit(1);
    }
    for (int i = 0; i < D0 * D1; i++) /* ordinary values, as in the step */
        a[i] = (float)(i % 13) * 0.01f - 0.06f, b[i] = (float)(i % 7) * 0.02f - 0.06f;
    double flops = 0;
    for (int i = 0; i < 8; i++)
        flops += 2.0 * g[i].m * g[i].n * g[i].k;
    double t[41];
    for (int s = -3; s < 41; s++) {
        double t0 = bench_now();
        for (int i = 0; i < 8; i++) {
            int lda = g[i].ta ? g[i].m : g[i].k, ldb = g[i].tb ? g[i].k : g[i].n;
            cblas_sgemm(CblasRowMajor, g[i].ta ? CblasTrans : CblasNoTrans,
                        g[i].tb ? CblasTrans : CblasNoTrans, g[i].m, g[i].n, g[i].k, 1.0f, a, lda,
                        b, ldb, 0.0f, c, g[i].n);
        }
        if (s >= 0)
            t[s] = bench_now() - t0;
    }
    qsort(t, 41, sizeof *t, bench_cmp);
    *secs = t[20];
    free(a), free(b), free(c);
    return flops;
}

static void run_mlp(void) {
    jg_scope_push();
    mlp_state m;
    mlp_init(&m);
    double secs, flops = sgemm_step(&secs);
    printf("cref sgemm_mlp_step GFLOPs=%.4g us=%.4g flops=%.0f threads=%d\n", flops / secs / 1e9,
           secs * 1e6, flops, g_threads);
    const char *be[3] = {"eager", "interp", "c"};
    for (int k = 0; k < 3; k++) {
        jg_compiled *c = NULL;
        if (k > 0) {
            if (!jg_compile_backend_available(be[k]))
                continue;
            c = jg_compile(p_mlp, NULL, &(jg_compile_options){.backend = be[k]});
            if (!c)
                die("jg_compile");
        }
        mlp_median(&m, c, 3, NULL); /* warm-up (trace, compile) */
        double cpu, t = mlp_median(&m, c, 31, &cpu);
        printf("jitgrad mlp_784_256_256_10_b64_sgd_step_%s us=%.4g threads=%d cpu_us=%.4g\n", be[k],
               t * 1e6, g_threads, cpu * 1e6);
        jg_compiled_free(c);
    }
    printf(
        "bound mlp_784_256_256_10_b64_sgd_step us=%.4g flops=%.0f sgemm_GFLOPs=%.4g threads=%d\n",
        secs * 1e6, flops, flops / secs / 1e9, g_threads);
    jg_optim_free(m.opt);
    jg_scope_pop();
}

/* ------------------------------------------------------- compile latency */

static void run_latency(void) {
    if (!jg_compile_backend_available("c")) {
        printf("# roofline: the c backend is not available: %s\n", jg_last_error());
        return;
    }
    jg_scope_push();
    mlp_state m;
    mlp_init(&m);
    jg_compiled *c = jg_compile(p_mlp, NULL, &(jg_compile_options){.backend = "c"});
    if (!c)
        die("jg_compile");
    double t0 = bench_now();
    mlp_step(&m, c);
    double first = bench_now() - t0;
    double hot = mlp_median(&m, c, 11, NULL);
    const char *dir = getenv("JITGRAD_CACHE_DIR");
    printf("jitgrad compile_latency_mlp_c first_call_us=%.4g hot_call_us=%.4g cache_dir=%s\n",
           first * 1e6, hot * 1e6, dir ? dir : "(default)");
    jg_compiled_free(c);
    jg_optim_free(m.opt);
    jg_scope_pop();
}

int main(int argc, char **argv) {
    const char *what = argc > 1 ? argv[1] : "";
    g_threads = argc > 2 ? atoi(argv[2]) : 1;
    if (g_threads < 1)
        g_threads = 1;
    openblas_set_num_threads(g_threads);
    const char *env = getenv("JITGRAD_NUM_THREADS");
    printf("jitgrad meta_roofline threads=%d JITGRAD_NUM_THREADS=%s\n", g_threads,
           env ? env : "unset");
    if (!strcmp(what, "triad"))
        triad_rate(true);
    else if (!strcmp(what, "fused"))
        run_fused();
    else if (!strcmp(what, "mlp"))
        run_mlp();
    else if (!strcmp(what, "latency"))
        run_latency();
    else {
        fprintf(stderr, "usage: %s triad|fused|mlp|latency [threads]\n", argv[0]);
        return 2;
    }
    return 0;
}
