/* Compiled (interp backend) vs eager: forward + backward time per call for a
 * tiny program, where dispatch and bookkeeping dominate, and for an MLP
 * training step.  Medians of many repetitions, measured side by side in one
 * run; prints the ratios. */
#include <jitgrad.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int p_qk(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    out[0] = jg_sum(jg_mul(in[0], jg_add(in[1], in[1])));
    return out[0] ? 1 : -1;
}

static int p_mlp(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *h = jg_relu(jg_add(jg_matmul(in[0], in[1]), in[2]));
    jg_tensor *logits = jg_add(jg_matmul(h, in[3]), in[4]);
    out[0] = jg_cross_entropy(logits, in[5]);
    return out[0] ? 1 : -1;
}

/* Median seconds of one call + backward, `inner` calls per sample. */
static double measure(jg_compiled *c, jg_program_fn f, int n, jg_tensor *const *in, int samples,
                      int inner) {
    double *t = malloc(sizeof(double) * (size_t)samples);
    for (int s = 0; s < samples; s++) {
        double t0 = now();
        for (int r = 0; r < inner; r++) {
            jg_scope_push();
            jg_tensor *out;
            int rc = c ? jg_compiled_call(c, NULL, 0, n, in, &out) : f(NULL, NULL, n, in, &out);
            if (rc < 0 || jg_backward(out, NULL, 0) < 0) {
                fprintf(stderr, "error: %s\n", jg_last_error());
                exit(1);
            }
            jg_scope_pop();
        }
        t[s] = (now() - t0) / inner;
    }
    qsort(t, (size_t)samples, sizeof *t, cmp);
    double m = t[samples / 2];
    free(t);
    return m;
}

static void bench(const char *name, jg_program_fn f, int n, jg_tensor *const *in, int samples,
                  int inner) {
    jg_compiled *c = jg_compile(f, NULL, NULL);
    measure(c, f, n, in, 3, inner); /* warm up: trace, pools */
    measure(NULL, f, n, in, 3, inner);
    double e = 0, k = 0;
    /* interleave to share machine noise */
    double es[5], ks[5];
    for (int r = 0; r < 5; r++) {
        es[r] = measure(NULL, f, n, in, samples, inner);
        ks[r] = measure(c, f, n, in, samples, inner);
    }
    qsort(es, 5, sizeof(double), cmp);
    qsort(ks, 5, sizeof(double), cmp);
    e = es[2];
    k = ks[2];
    printf("%-34s eager %9.2f us   compiled %9.2f us   compiled/eager %.2fx\n", name, e * 1e6,
           k * 1e6, k / e);
    jg_compiled_free(c);
}

int main(void) {
    jg_scope_push();
    jg_manual_seed(0);
    int64_t s16[] = {16};
    jg_tensor *q = jg_randn(JG_F32, 1, s16), *k = jg_randn(JG_F32, 1, s16);
    jg_set_requires_grad(q, true);
    jg_set_requires_grad(k, true);
    bench("(q*(k+k)).sum() [16] fwd+bwd", p_qk, 2, (jg_tensor *[]){q, k}, 201, 200);

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
