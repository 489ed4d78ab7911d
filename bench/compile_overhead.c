/* Compiled (interp backend, modes "default" and "reduce-overhead") vs
 * eager: forward + backward time per call for a tiny program, where
 * dispatch and bookkeeping dominate, and for an MLP training step.  Medians
 * of many repetitions, measured side by side in one run; prints the
 * ratios. */
#include "bench.h"
#include <jitgrad.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int p_mlp(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *h = jg_relu(jg_add(jg_matmul(in[0], in[1]), in[2]));
    jg_tensor *logits = jg_add(jg_matmul(h, in[3]), in[4]);
    out[0] = jg_cross_entropy(logits, in[5]);
    return out[0] ? 1 : -1;
}

static jg_compiled *compile_mode(jg_program_fn f, const char *mode) {
    jg_compiled *c = jg_compile(f, NULL, NULL);
    if (!c || jg_compiled_set_mode(c, mode) < 0) {
        fprintf(stderr, "error: %s\n", jg_last_error());
        exit(1);
    }
    return c;
}

static void bench(const char *name, jg_program_fn f, int n, jg_tensor *const *in, int samples,
                  int inner) {
    jg_compiled *c = compile_mode(f, "default"), *ro = compile_mode(f, "reduce-overhead");
    bench_median_call(c, f, n, in, 3, inner, true); /* warm up: trace, pools */
    bench_median_call(ro, f, n, in, 3, inner, true);
    bench_median_call(NULL, f, n, in, 3, inner, true);
    /* interleave to share machine noise */
    double es[5], ks[5], rs[5];
    for (int r = 0; r < 5; r++) {
        es[r] = bench_median_call(NULL, f, n, in, samples, inner, true);
        ks[r] = bench_median_call(c, f, n, in, samples, inner, true);
        rs[r] = bench_median_call(ro, f, n, in, samples, inner, true);
    }
    qsort(es, 5, sizeof(double), bench_cmp);
    qsort(ks, 5, sizeof(double), bench_cmp);
    qsort(rs, 5, sizeof(double), bench_cmp);
    double e = es[2], k = ks[2], ro_t = rs[2];
    printf("%-34s eager %9.2f us   compiled %9.2f us   compiled/eager %.2fx   "
           "reduce-overhead %9.2f us   /default %.2fx\n",
           name, e * 1e6, k * 1e6, k / e, ro_t * 1e6, ro_t / k);
    jg_compiled_free(c);
    jg_compiled_free(ro);
}

int main(void) {
    jg_scope_push();
    jg_manual_seed(0);
    int64_t s16[] = {16};
    jg_tensor *q = jg_randn(JG_F32, 1, s16), *k = jg_randn(JG_F32, 1, s16);
    jg_set_requires_grad(q, true);
    jg_set_requires_grad(k, true);
    bench("(q*(k+k)).sum() [16] fwd+bwd", bench_qk, 2, (jg_tensor *[]){q, k}, 201, 200);

    int64_t sx[] = {64, 128}, sw1[] = {128, 256}, sb1[] = {256}, sw2[] = {256, 10}, sb2[] = {10},
            st[] = {64};
    jg_tensor *x = jg_randn(JG_F32, 2, sx), *w1 = jg_randn(JG_F32, 2, sw1),
              *b1 = jg_randn(JG_F32, 1, sb1), *w2 = jg_randn(JG_F32, 2, sw2),
              *b2 = jg_randn(JG_F32, 1, sb2);
    int64_t *tv = malloc(sizeof(int64_t) * 64);
    for (int i = 0; i < 64; i++)
        tv[i] = i % 10;
    jg_tensor *t = jg_tensor_new(JG_I64, 1, st, tv);
    free(tv);
    jg_tensor *params[] = {w1, b1, w2, b2};
    for (int i = 0; i < 4; i++)
        jg_set_requires_grad(params[i], true);
    bench("MLP 64x128-256-10 step fwd+bwd", p_mlp, 6, (jg_tensor *[]){x, w1, b1, w2, b2, t}, 31,
          10);
    jg_scope_pop();
    return 0;
}
