/* 1 vs N threads on the kernels of issue 12's scaling target, outside
 * Python and the suite's batching:
 *
 *   scaling KERNEL THREADS [CALLS [GAP_US]]
 *
 * KERNEL: max_dim1 (max over dim 1 of 1024x1024 f32, values and indices),
 * tanh (1M f32), sum_all (sum of 1M f32), sum_dim1 (sum over dim 1 of
 * 1024x1024 f32), sum_dim1_half (of 512x1024: one thread's share of
 * sum_dim1 at 2 threads), softmax_dim1 / log_softmax_dim1 (1024x1024) or
 * softmax_causal (over the last dim of [16, 64, 64], -inf above the
 * diagonal, as a causal attention), grad mode off.  Prints the best, 10th percentile and
 * median wall time of one call over CALLS calls, and the process's CPU time
 * per call (every thread's).  GAP_US: a busy wait between calls; past the
 * pool's spin time (20 us, src/core/parallel.c) the workers sleep, and each
 * call then pays their wake-up.  On a loaded machine the best call shows
 * what the kernel does when it has the cores; the median what it got. */
#include "bench.h"

#include <jitgrad.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static double cpu_now(void) {
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return (double)(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
           (double)(r.ru_utime.tv_usec + r.ru_stime.tv_usec) * 1e-6;
}

int main(int argc, char **argv) {
    static const char *const kernels[] = {"max_dim1",         "tanh",          "sum_all",
                                          "sum_dim1",         "sum_dim1_half", "softmax_dim1",
                                          "log_softmax_dim1", "softmax_causal"};
    enum { N_KERNELS = (int)(sizeof kernels / sizeof *kernels) };
    int kern = -1;
    for (int k = 0; argc >= 3 && k < N_KERNELS; k++)
        if (!strcmp(argv[1], kernels[k]))
            kern = k;
    if (kern < 0) {
        fprintf(stderr, "usage: %s KERNEL THREADS [CALLS [GAP_US]]; KERNEL:", argv[0]);
        for (int k = 0; k < N_KERNELS; k++)
            fprintf(stderr, " %s", kernels[k]);
        fprintf(stderr, "\n");
        return 2;
    }
    int threads = atoi(argv[2]), calls = argc > 3 ? atoi(argv[3]) : 300;
    double gap = argc > 4 ? atof(argv[4]) * 1e-6 : 0;
    if (threads < 1 || calls < 1 || jg_set_num_threads(threads) < 0) {
        fprintf(stderr, "scaling: bad thread or call count\n");
        return 2;
    }
    jg_set_grad_enabled(false);
    jg_manual_seed(0);
    bool flat = kern == 1 || kern == 2;
    jg_tensor *x = flat        ? jg_randn(JG_F32, 1, (int64_t[]){1 << 20})
                   : kern == 4 ? jg_randn(JG_F32, 2, (int64_t[]){512, 1024})
                   : kern == 7 ? jg_randn(JG_F32, 3, (int64_t[]){16, 64, 64})
                               : jg_randn(JG_F32, 2, (int64_t[]){1024, 1024});
    if (x && kern == 7) /* -inf above the diagonal */
        x = jg_masked_fill(
            x, jg_gt_scalar(jg_triu(jg_full(JG_F32, 3, (int64_t[]){16, 64, 64}, 1.0), 1), 0.5),
            -1.0 / 0.0);
    double *t = malloc(sizeof(double) * (size_t)calls);
    if (!x || !t) {
        fprintf(stderr, "scaling: %s\n", x ? "out of memory" : jg_last_error());
        return 1;
    }
    double c0 = cpu_now();
    for (int i = -3; i < calls; i++) {
        jg_scope_push();
        double t0 = bench_now();
        jg_tensor *v = NULL, *ix = NULL;
        jg_tensor *r = NULL;
        int rc = 0;
        switch (kern) {
        case 0:
            rc = jg_max_dim(x, 1, false, &v, &ix);
            break;
        case 1:
            r = jg_tanh(x);
            break;
        case 2:
            r = jg_sum(x);
            break;
        case 5:
            r = jg_softmax(x, 1);
            break;
        case 6:
            r = jg_log_softmax(x, 1);
            break;
        case 7:
            r = jg_softmax(x, 2);
            break;
        default: /* sum_dim1, sum_dim1_half */
            r = jg_sum_dims(x, 1, (const int[]){1}, false);
            break;
        }
        if (kern != 0 && !r)
            rc = -1;
        double dt = bench_now() - t0;
        jg_scope_pop();
        if (rc < 0) {
            fprintf(stderr, "scaling: %s\n", jg_last_error());
            return 1;
        }
        if (i < 0)
            c0 = cpu_now(); /* warm-up calls: not counted */
        else
            t[i] = dt;
        for (double g0 = bench_now(); bench_now() - g0 < gap;)
            ;
    }
    double cpu = (cpu_now() - c0) / calls;
    qsort(t, (size_t)calls, sizeof *t, bench_cmp);
    printf("jitgrad scaling_%s threads=%d gap_us=%.0f best_us=%.4g p10_us=%.4g median_us=%.4g "
           "cpu_per_call_us=%.4g\n",
           argv[1], threads, gap * 1e6, t[0] * 1e6, t[calls / 10] * 1e6, t[calls / 2] * 1e6,
           cpu * 1e6);
    free(t);
    return 0;
}
