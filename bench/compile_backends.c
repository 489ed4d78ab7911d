/* Backends side by side: eager vs jg_compile "interp" vs "c" for
 *   chain: an 8-op arithmetic elementwise chain on 1M float32 elements,
 *          summed (forward + backward, and forward alone without grad), the
 *          same with tanh and sigmoid in it, and
 *   qk:    the small (q * (k + k)).sum() on 16 elements (overhead bound).
 * Medians of many repetitions, measured side by side in one run; prints the
 * ratios and, for the 1M chain, the bytes it must move against a plain-C
 * bandwidth reference (out[i] = a[i] + b[i] over the same arrays).
 *   build/bench/compile_backends        (needs a C compiler for "c") */
#include "bench.h"
#include <jitgrad.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N_LARGE (1 << 20)

/* 8 arithmetic elementwise ops, then sum: memory bound when not fused */
static int p_chain(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *x = in[0], *y = in[1];
    jg_tensor *t = jg_mul(x, y);   /* 1 */
    t = jg_add(t, x);              /* 2 */
    t = jg_mul_scalar(t, 1.7);     /* 3 */
    t = jg_sub(t, y);              /* 4 */
    t = jg_neg(t);                 /* 5 */
    t = jg_relu(t);                /* 6 */
    t = jg_add_scalar(t, 1);       /* 7 */
    out[0] = jg_sum(jg_mul(t, y)); /* 8 */
    return out[0] ? 1 : -1;
}

/* the same length with tanh and sigmoid: tanh is jitgrad's own vectorized
 * f32 tanh, sigmoid's expf is the one scalar libm call */
static int p_chain_tr(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *x = in[0], *y = in[1];
    jg_tensor *t = jg_mul(x, y);
    t = jg_add(t, x);
    t = jg_tanh(t);
    t = jg_mul_scalar(t, 1.7);
    t = jg_sub(t, y);
    t = jg_neg(t);
    t = jg_sigmoid(t);
    out[0] = jg_sum(jg_add_scalar(t, 1));
    return out[0] ? 1 : -1;
}

/* eager, interp, c: medians in t[0..3) (t[2] < 0 when c is unavailable) */
static void bench3(const char *name, jg_program_fn f, int n, jg_tensor *const *in, int samples,
                   int inner, bool backward, double *t) {
    const char *be[2] = {"interp", "c"};
    t[0] = bench_median_call(NULL, f, n, in, samples, inner, backward);
    for (int k = 0; k < 2; k++) {
        t[k + 1] = -1;
        if (!jg_compile_backend_available(be[k]))
            continue;
        jg_compiled *c = jg_compile(f, NULL, &(jg_compile_options){.backend = be[k]});
        bench_median_call(c, f, n, in, 3, 1, backward); /* trace + compile outside the timing */
        t[k + 1] = bench_median_call(c, f, n, in, samples, inner, backward);
        jg_compiled_free(c);
    }
    printf("%-24s eager_us=%-9.4g interp_us=%-9.4g c_us=%-9.4g eager/c=%-6.3g interp/c=%.3g\n",
           name, t[0] * 1e6, t[1] * 1e6, t[2] * 1e6, t[2] > 0 ? t[0] / t[2] : 0,
           t[2] > 0 ? t[1] / t[2] : 0);
}

static double bandwidth_ref(void) {
    float *a = malloc(sizeof(float) * N_LARGE), *b = malloc(sizeof(float) * N_LARGE),
          *o = malloc(sizeof(float) * N_LARGE);
    for (int i = 0; i < N_LARGE; i++)
        a[i] = (float)i, b[i] = 1.0f, o[i] = 0;
    double t[41];
    for (int s = 0; s < 41; s++) {
        double t0 = bench_now();
        for (int i = 0; i < N_LARGE; i++)
            o[i] = a[i] + b[i];
        t[s] = bench_now() - t0;
        __asm__ volatile("" : : "r"(o) : "memory");
    }
    qsort(t, 41, sizeof *t, bench_cmp);
    free(a), free(b), free(o);
    return 3.0 * sizeof(float) * N_LARGE / t[20]; /* bytes per second */
}

int main(void) {
    if (!jg_compile_backend_available("c"))
        printf("# the c backend is not available here: %s\n", jg_last_error());
    jg_scope_push();
    jg_manual_seed(0);
    double t[3];
    jg_tensor *x = jg_randn(JG_F32, 1, (int64_t[]){N_LARGE});
    jg_tensor *y = jg_randn(JG_F32, 1, (int64_t[]){N_LARGE});
    jg_set_requires_grad(x, true);
    jg_set_requires_grad(y, true);
    bench3("chain_1M_fwd_bwd", p_chain, 2, (jg_tensor *[]){x, y}, 21, 1, true, t);
    double t_tr[3];
    bench3("chain_tanh_1M_fwd_bwd", p_chain_tr, 2, (jg_tensor *[]){x, y}, 11, 1, true, t_tr);
    bool prev = jg_set_grad_enabled(false);
    bench3("chain_tanh_1M_fwd_nograd", p_chain_tr, 2, (jg_tensor *[]){x, y}, 11, 1, false, t_tr);
    bench3("chain_1M_fwd_nograd", p_chain, 2, (jg_tensor *[]){x, y}, 41, 1, false, t);
    jg_set_grad_enabled(prev);
    /* the fused forward must read x and y and write one f32 per element (the
     * sum reads it back): 4 x 4 bytes per element at best; eager moves ~3 x 4
     * bytes per op */
    double bw = bandwidth_ref(), bytes = 4.0 * sizeof(float) * N_LARGE;
    printf("bandwidth_ref (o=a+b, 1M f32) GBps=%.4g\n", bw / 1e9);
    if (t[2] > 0)
        printf("chain_1M_fwd_nograd c: %.4g GBps of its minimum traffic (%.0f MB) = %.2f of the "
               "bandwidth reference\n",
               bytes / t[2] / 1e9, bytes / 1e6, bytes / t[2] / bw);
    jg_tensor *q = jg_randn(JG_F32, 1, (int64_t[]){16}), *k = jg_randn(JG_F32, 1, (int64_t[]){16});
    jg_set_requires_grad(q, true);
    jg_set_requires_grad(k, true);
    bench3("qk_16_fwd_bwd", bench_qk, 2, (jg_tensor *[]){q, k}, 41, 200, true, t);
    jg_scope_pop();
    return 0;
}
