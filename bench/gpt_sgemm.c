/* cblas_sgemm's rate at the products of the GPT step (examples/gpt, the
 * default config: 256 tokens, width 128, MLP 512, heads of 64 x 32), row
 * major as jitgrad calls it: the linear layers' forward (N T), input
 * gradient (N N) and weight gradient (T N), and the attention's per-head
 * products.  It tells how fast the step's matmuls can go on this CPU with
 * the OpenBLAS kernels in use (OPENBLAS_CORETYPE picks others): the
 * step's floor, whatever the library around them does.
 *
 *   build/bench/gpt_sgemm          (OPENBLAS_NUM_THREADS=1 for one thread)
 *
 * Output: one line per product, `<op> m n k us GFLOP/s`, best of 5 batches
 * (each about 0.2 GFLOP), and the OpenBLAS core jitgrad reports. */
#include "bench.h"
#include <jitgrad.h>

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>

/* (the library's, src/core/blas.c; NULL where the BLAS does not say) */
const char *jg_blas_corename(void);

typedef struct {
    int ta, tb, m, n, k;
} shape;

static const shape SHAPES[] = {
    {0, 1, 256, 384, 128}, {0, 1, 256, 128, 128}, {0, 1, 256, 512, 128}, {0, 1, 256, 128, 512},
    {0, 0, 256, 128, 384}, {0, 0, 256, 128, 128}, {0, 0, 256, 128, 512}, {0, 0, 256, 512, 128},
    {1, 0, 384, 128, 256}, {1, 0, 128, 128, 256}, {1, 0, 512, 128, 256}, {1, 0, 128, 512, 256},
    {0, 0, 64, 64, 32},    {0, 1, 64, 64, 32},    {0, 0, 64, 32, 64},    {1, 0, 64, 32, 64},
    {1, 0, 32, 64, 64},
};

int main(void) {
    enum { MAXE = 512 * 512 };
    float *a = malloc(sizeof(float) * MAXE), *b = malloc(sizeof(float) * MAXE),
          *c = malloc(sizeof(float) * MAXE);
    if (!a || !b || !c) {
        fprintf(stderr, "gpt_sgemm: out of memory\n");
        return 1;
    }
    for (int i = 0; i < MAXE; i++) {
        a[i] = (float)(i % 7) * 0.125f - 0.375f;
        b[i] = (float)(i % 5) * 0.25f - 0.5f;
        c[i] = 0;
    }
    const char *core = jg_blas_corename();
    printf("OpenBLAS core (jitgrad's view): %s\n", core ? core : "(not said)");
    for (size_t s = 0; s < sizeof SHAPES / sizeof *SHAPES; s++) {
        const shape *p = &SHAPES[s];
        double flops = 2.0 * p->m * p->n * p->k, best = 1e30;
        int reps = (int)(2e8 / flops) + 1, lda = p->ta ? p->m : p->k, ldb = p->tb ? p->k : p->n;
        for (int r = 0; r < 5; r++) {
            double t0 = bench_now();
            for (int i = 0; i < reps; i++)
                cblas_sgemm(CblasRowMajor, p->ta ? CblasTrans : CblasNoTrans,
                            p->tb ? CblasTrans : CblasNoTrans, p->m, p->n, p->k, 1.0f, a, lda, b,
                            ldb, 0.0f, c, p->n);
            double t = (bench_now() - t0) / reps;
            best = t < best ? t : best;
        }
        printf("%s%s %4d %4d %4d %9.2f us %7.1f GFLOP/s\n", p->ta ? "T" : "N", p->tb ? "T" : "N",
               p->m, p->n, p->k, best * 1e6, flops / best * 1e-9);
    }
    free(a);
    free(b);
    free(c);
    return 0;
}
