/* What the benchmarks share: the eager chain workload, the small
 * (q * (k + k)).sum() program, and the compiled-call benchmarks' timing
 * (medians of repeated calls, measured with the monotonic clock). */
#ifndef JG_BENCH_H
#define JG_BENCH_H

#include <jitgrad.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* The eager chain (bench/eager_ops.c, bench/chain_iters.c): y = x, then
 * BENCH_CHAIN_LEN ops cycling add_scalar(y, 0.5), mul_scalar(y, 0.75),
 * tanh(y), mul(y, x) (25 of each), then sum.  Values stay in (-2, 2).
 * NULL (with jg_last_error) if an op fails. */
#define BENCH_CHAIN_LEN 100
static inline jg_tensor *bench_chain(jg_tensor *x) {
    jg_tensor *y = x;
    for (int i = 0; i < BENCH_CHAIN_LEN && y; i++) {
        switch (i % 4) {
        case 0:
            y = jg_add_scalar(y, 0.5);
            break;
        case 1:
            y = jg_mul_scalar(y, 0.75);
            break;
        case 2:
            y = jg_tanh(y);
            break;
        default:
            y = jg_mul(y, x);
            break;
        }
    }
    return y ? jg_sum(y) : NULL;
}

/* (q * (k + k)).sum() of inputs q, k (a jg_program_fn): the small program of
 * bench/compile_overhead.c and bench/compile_backends.c. */
static inline int bench_qk(void *user, const void *args, int n, jg_tensor *const *in,
                           jg_tensor **out) {
    (void)user, (void)args, (void)n;
    out[0] = jg_sum(jg_mul(in[0], jg_add(in[1], in[1])));
    return out[0] ? 1 : -1;
}

static inline double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline int bench_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median seconds of one call of f (compiled through c when c is set), plus
 * backward when asked; `inner` calls per sample, each in its own scope. */
static inline double bench_median_call(jg_compiled *c, jg_program_fn f, int n, jg_tensor *const *in,
                                       int samples, int inner, bool backward) {
    double *t = malloc(sizeof(double) * (size_t)samples);
    for (int s = 0; s < samples; s++) {
        double t0 = bench_now();
        for (int r = 0; r < inner; r++) {
            jg_scope_push();
            jg_tensor *out;
            int rc = c ? jg_compiled_call(c, NULL, 0, n, in, &out) : f(NULL, NULL, n, in, &out);
            if (rc < 0 || (backward && jg_backward(out, NULL, 0) < 0)) {
                fprintf(stderr, "error: %s\n", jg_last_error());
                exit(1);
            }
            jg_scope_pop();
        }
        t[s] = (bench_now() - t0) / inner;
    }
    qsort(t, (size_t)samples, sizeof *t, bench_cmp);
    double m = t[samples / 2];
    free(t);
    return m;
}

#endif
