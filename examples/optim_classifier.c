/* A small classifier trained with the optimizer API: AdamW with weight
 * decay on the weights only (two parameter groups), the learning rate
 * halved every 20 steps (PyTorch's StepLR), zero_grad / backward / step.
 *
 *   make && ./build/examples/optim_classifier
 *
 * With --dump it also prints the data, the initial parameters and every
 * step's loss in full precision (python/tests/test_surface2.py replays the
 * run in PyTorch and compares the losses).
 */
#include <jitgrad.h>
#include <stdio.h>
#include <string.h>

#define N 120    /* samples */
#define D 2      /* features */
#define H 16     /* hidden units */
#define C 3      /* classes */
#define STEPS 60 /* optimizer steps */

/* Three Gaussian blobs around the vertices of a triangle. */
static void make_data(jg_tensor **x, jg_tensor **y) {
    static const double centre[C][D] = {{0, 2}, {-1.7, -1}, {1.7, -1}};
    float xs[N][D], nz[N][D];
    int64_t ys[N];
    jg_copy_to(jg_randn(JG_F32, 2, (int64_t[]){N, D}), nz, sizeof nz);
    for (int i = 0; i < N; i++) {
        ys[i] = i % C;
        for (int d = 0; d < D; d++)
            xs[i][d] = (float)(centre[ys[i]][d] + 0.6 * nz[i][d]);
    }
    *x = jg_tensor_new(JG_F32, 2, (int64_t[]){N, D}, xs);
    *y = jg_tensor_new(JG_I64, 1, (int64_t[]){N}, ys);
}

static jg_tensor *param(int64_t rows, int64_t cols, double scale) {
    jg_tensor *w = jg_mul_scalar(jg_randn(JG_F32, 2, (int64_t[]){rows, cols}), scale);
    jg_set_requires_grad(w, true);
    return w;
}

static jg_tensor *forward(jg_tensor *x, jg_tensor *const *p) {
    jg_tensor *h = jg_relu(jg_add(jg_matmul(x, p[0]), p[1]));
    return jg_add(jg_matmul(h, p[2]), p[3]);
}

/* "name v0 v1 ..." with every value of a float32 / int64 tensor */
static void dump(const char *name, const jg_tensor *t) {
    int64_t n = jg_numel(t);
    double v[N * H > N * D ? N * H : N * D];
    float f[sizeof v / sizeof *v];
    int64_t k[sizeof v / sizeof *v];
    bool is_int = jg_dtype_of(t) == JG_I64;
    if (n > (int64_t)(sizeof v / sizeof *v) ||
        jg_copy_to(t, is_int ? (void *)k : (void *)f, (size_t)n * (is_int ? 8 : 4)) < 0)
        return;
    printf("%s", name);
    for (int64_t i = 0; i < n; i++)
        is_int ? printf(" %lld", (long long)k[i]) : printf(" %.9g", (double)f[i]);
    printf("\n");
}

static int fail(void) {
    fprintf(stderr, "error: %s\n", jg_last_error());
    return 1;
}

int main(int argc, char **argv) {
    bool full = argc > 1 && strcmp(argv[1], "--dump") == 0;
    jg_manual_seed(7);
    jg_scope_push();
    jg_tensor *x, *y;
    make_data(&x, &y);
    jg_tensor *p[] = {param(D, H, 0.5), param(1, H, 0.0), param(H, C, 0.3), param(1, C, 0.0)};
    jg_tensor *weights[] = {p[0], p[2]}, *biases[] = {p[1], p[3]};
    if (full) {
        dump("x", x);
        dump("y", y);
        dump("w1", p[0]);
        dump("w2", p[2]);
    }

    jg_optim *opt = jg_optim_adamw(weights, 2, 0.05, 0.9, 0.999, 1e-8, 0.01);
    jg_optim_hparams h;
    if (!opt || jg_optim_get_hparams(opt, 0, &h) < 0)
        return fail();
    h.weight_decay = 0; /* no decay on biases */
    if (jg_optim_add_param_group(opt, biases, 2, &h) < 0)
        return fail();

    double first = 0, last = 0;
    for (int step = 0; step < STEPS; step++) {
        jg_scope_push();
        jg_tensor *loss = jg_cross_entropy(forward(x, p), y);
        if (jg_optim_zero_grad(opt, true) < 0 || !loss || jg_backward(loss, NULL, 0) < 0 ||
            jg_optim_step(opt) < 0)
            return fail();
        if (step % 20 == 19) /* StepLR(step_size=20, gamma=0.5) */
            for (int g = 0; g < jg_optim_n_groups(opt); g++)
                jg_optim_set_lr(opt, g, jg_optim_get_lr(opt, g) * 0.5);
        last = jg_item(loss);
        if (step == 0)
            first = last;
        if (full)
            printf("loss %d %.9g\n", step, last);
        else if (step % 10 == 0 || step == STEPS - 1)
            printf("step %2d  lr %.4f  loss %.4f\n", step, jg_optim_get_lr(opt, 0), last);
        jg_scope_pop();
    }

    jg_scope_push();
    bool prev = jg_set_grad_enabled(false);
    jg_tensor *best, *idx;
    if (jg_max_dim(forward(x, p), 1, false, &best, &idx) < 0)
        return fail();
    int64_t pred[N], lab[N];
    jg_copy_to(idx, pred, sizeof pred);
    jg_copy_to(y, lab, sizeof lab);
    int right = 0;
    for (int i = 0; i < N; i++)
        right += pred[i] == lab[i];
    jg_set_grad_enabled(prev);
    printf("accuracy %d/%d, loss %.4f -> %.4f\n", right, N, first, last);
    jg_scope_pop();
    jg_optim_free(opt);
    jg_scope_pop();
    return last < first && right > N * 0.8 ? 0 : 1;
}
