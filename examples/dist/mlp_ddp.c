/* examples/mlp.c trained data-parallel: each process holds a replica, takes
 * its share of the global batch, and jg_dist_ddp averages the gradients
 * while backward runs.
 *
 *   mpirun -np 2 ./build/examples/mlp_ddp        (make demo-dist)
 *
 * Every step, each rank also runs the one-process reference this is
 * bitwise equal to (docs/distributed.md): one process computing the same
 * micro-batches' gradients, accumulated in rank order and averaged, with the
 * same SGD step.  It prints the check, and how far the parameters are from
 * one process training on the whole batch at once (close, not bitwise: the
 * additions happen in another order). */
#include <jitgrad_dist.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define N 96     /* samples (the global batch) */
#define D 2      /* features */
#define H 32     /* hidden units */
#define C 3      /* classes */
#define STEPS 60 /* SGD steps */

static void make_data(jg_tensor **x, jg_tensor **y) {
    static const double centre[C][D] = {{0, 2}, {-1.7, -1}, {1.7, -1}};
    float xs[N][D], nz[N][D];
    int64_t ys[N];
    jg_copy_to(jg_randn(JG_F32, 2, (int64_t[]){N, D}), nz, sizeof nz);
    for (int i = 0; i < N; i++) {
        ys[i] = i % C;
        for (int d = 0; d < D; d++)
            xs[i][d] = (float)(centre[ys[i]][d] + 0.5 * nz[i][d]);
    }
    *x = jg_tensor_new(JG_F32, 2, (int64_t[]){N, D}, xs);
    *y = jg_tensor_new(JG_I64, 1, (int64_t[]){N}, ys);
}

typedef struct {
    jg_tensor *p[4]; /* w1, b1, w2, b2 */
} model;

static void init(model *m) {
    static const int64_t shapes[4][2] = {{D, H}, {1, H}, {H, C}, {1, C}};
    static const double scale[4] = {0.5, 0, 0.2, 0};
    for (int i = 0; i < 4; i++) {
        m->p[i] = jg_mul_scalar(jg_randn(JG_F32, 2, shapes[i]), scale[i]);
        jg_set_requires_grad(m->p[i], true);
    }
}

static void copy(model *dst, const model *src) {
    bool prev = jg_set_grad_enabled(false);
    for (int i = 0; i < 4; i++) {
        dst->p[i] = jg_clone(src->p[i]);
        jg_set_requires_grad(dst->p[i], true);
    }
    jg_set_grad_enabled(prev);
}

/* mean cross entropy of rows [lo, hi) */
static jg_tensor *loss_of(const model *m, jg_tensor *x, jg_tensor *y, int64_t lo, int64_t hi) {
    jg_tensor *xs = jg_slice(x, 0, lo, hi), *ys = jg_slice(y, 0, lo, hi);
    jg_tensor *h = jg_tanh(jg_add(jg_matmul(xs, m->p[0]), m->p[1]));
    return jg_cross_entropy(jg_add(jg_matmul(h, m->p[2]), m->p[3]), ys);
}

static void sgd(model *m, double lr) {
    bool prev = jg_set_grad_enabled(false);
    for (int i = 0; i < 4; i++) {
        jg_add_(m->p[i], jg_mul_scalar(jg_grad(m->p[i]), -lr));
        jg_clear_grad(m->p[i]);
    }
    jg_set_grad_enabled(prev);
}

static bool same_bits(jg_tensor *a, jg_tensor *b) {
    float x[H * C], y[H * C];
    size_t n = sizeof(float) * (size_t)jg_numel(a);
    jg_copy_to(a, x, n);
    jg_copy_to(b, y, n);
    return memcmp(x, y, n) == 0;
}

static double max_diff(jg_tensor *a, jg_tensor *b) {
    float x[H * C], y[H * C];
    int64_t n = jg_numel(a);
    jg_copy_to(a, x, sizeof(float) * (size_t)n);
    jg_copy_to(b, y, sizeof(float) * (size_t)n);
    double d = 0;
    for (int64_t i = 0; i < n; i++)
        d = fmax(d, fabs((double)x[i] - y[i]));
    return d;
}

#define TRY(c)                                                                                     \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "error: %s\n", jg_last_error());                                       \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv) {
    TRY(jg_dist_init(&argc, &argv) == 0);
    int rank = jg_dist_rank(), size = jg_dist_world_size();
    if (N % size) {
        fprintf(stderr, "mlp_ddp: %d processes do not divide the batch of %d\n", size, N);
        return 1;
    }
    jg_scope_push();
    jg_manual_seed(42); /* the same data everywhere; rank 0's parameters win */
    jg_tensor *x, *y;
    make_data(&x, &y);
    model m, ref, whole;
    init(&m);
    jg_dist_ddp *ddp = jg_dist_ddp_new(4, m.p, NULL);
    TRY(ddp);
    copy(&ref, &m);
    copy(&whole, &m);
    const double lr = 0.5;
    int64_t per = N / size;
    bool equal = true;
    double first = 0, last = 0;
    for (int step = 0; step < STEPS; step++) {
        jg_scope_push();
        jg_tensor *loss = loss_of(&m, x, y, rank * per, (rank + 1) * per);
        TRY(loss && jg_backward(loss, NULL, 0) == 0);
        /* the reference: the ranks' micro-batches in one process */
        for (int r = 0; r < size; r++)
            TRY(jg_backward(loss_of(&ref, x, y, r * per, (r + 1) * per), NULL, 0) == 0);
        for (int i = 0; i < 4; i++)
            jg_set_grad(ref.p[i], jg_div(jg_grad(ref.p[i]), jg_full(JG_F32, 0, NULL, size)));
        TRY(jg_backward(loss_of(&whole, x, y, 0, N), NULL, 0) == 0);
        sgd(&m, lr);
        sgd(&ref, lr);
        sgd(&whole, lr);
        for (int i = 0; i < 4; i++)
            equal &= same_bits(m.p[i], ref.p[i]);
        jg_tensor *l = jg_keep(jg_clone(loss));
        jg_dist_all_reduce(l, JG_DIST_AVG);
        last = jg_item(l);
        if (step == 0)
            first = last;
        if (rank == 0 && (step % 20 == 0 || step == STEPS - 1))
            printf("step %2d  loss %.4f (mean over %d processes)\n", step, last, size);
        jg_release(l);
        jg_scope_pop();
    }
    double far = 0;
    for (int i = 0; i < 4; i++)
        far = fmax(far, max_diff(m.p[i], whole.p[i]));
    int ok = equal, all_ok = 0;
    jg_tensor *flag = jg_full(JG_F32, 1, (int64_t[]){1}, ok);
    jg_dist_all_reduce(flag, JG_DIST_SUM);
    all_ok = (int)jg_item(flag) == size;
    if (rank == 0) {
        printf("%d processes, %d steps: parameters %s the 1-process run over the same %d "
               "micro-batches (bitwise, on every rank)\n",
               size, STEPS, all_ok ? "EQUAL" : "DIFFER FROM", size);
        printf("largest difference from 1 process training on the whole batch at once: %.3g "
               "(rounding: the sums run in another order)\n",
               far);
    }
    jg_dist_ddp_free(ddp);
    jg_scope_pop();
    jg_dist_finalize();
    return all_ok && last < first ? 0 : 1;
}
