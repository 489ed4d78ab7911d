/* A two-layer MLP trained with cross entropy and plain SGD on a synthetic
 * three-class problem: the tour of jitgrad's eager API.
 *
 *   make && ./build/examples/mlp
 */
#include <jitgrad.h>
#include <stdio.h>

#define N 96     /* samples */
#define D 2      /* features */
#define H 32     /* hidden units */
#define C 3      /* classes */
#define STEPS 60 /* SGD steps */

/* Three Gaussian blobs around the vertices of a triangle. */
static void make_data(jg_tensor **x, jg_tensor **y) {
    static const double centre[C][D] = {{0, 2}, {-1.7, -1}, {1.7, -1}};
    float xs[N][D];
    int64_t ys[N];
    jg_tensor *noise = jg_randn(JG_F32, 2, (int64_t[]){N, D});
    float nz[N][D];
    jg_copy_to(noise, nz, sizeof nz);
    for (int i = 0; i < N; i++) {
        ys[i] = i % C;
        for (int d = 0; d < D; d++)
            xs[i][d] = (float)(centre[ys[i]][d] + 0.5 * nz[i][d]);
    }
    *x = jg_tensor_new(JG_F32, 2, (int64_t[]){N, D}, xs);
    *y = jg_tensor_new(JG_I64, 1, (int64_t[]){N}, ys);
}

/* A parameter: scaled normal init, a leaf that requires grad. */
static jg_tensor *param(int64_t rows, int64_t cols, double scale) {
    jg_tensor *w = jg_mul_scalar(jg_randn(JG_F32, 2, (int64_t[]){rows, cols}), scale);
    jg_set_requires_grad(w, true);
    return w;
}

int main(void) {
    jg_manual_seed(42);
    jg_scope_push(); /* everything made in main is released at the end */
    jg_tensor *x, *y;
    make_data(&x, &y);
    jg_tensor *w1 = param(D, H, 0.5), *b1 = param(1, H, 0.0);
    jg_tensor *w2 = param(H, C, 0.2), *b2 = param(1, C, 0.0);
    jg_tensor *params[] = {w1, b1, w2, b2};
    const double lr = 0.5;

    double first = 0, last = 0;
    for (int step = 0; step < STEPS; step++) {
        jg_scope_push(); /* the step's temporaries die at the matching pop */
        jg_tensor *h = jg_tanh(jg_add(jg_matmul(x, w1), b1));
        jg_tensor *logits = jg_add(jg_matmul(h, w2), b2);
        jg_tensor *loss = jg_cross_entropy(logits, y);
        if (!loss || jg_backward(loss, NULL, 0) < 0) {
            fprintf(stderr, "error: %s\n", jg_last_error());
            return 1;
        }
        /* SGD: p -= lr * p.grad, outside autograd */
        bool prev = jg_set_grad_enabled(false);
        for (int i = 0; i < 4; i++) {
            jg_add_(params[i], jg_mul_scalar(jg_grad(params[i]), -lr));
            jg_clear_grad(params[i]);
        }
        jg_set_grad_enabled(prev);
        last = jg_item(loss);
        if (step == 0)
            first = last;
        if (step % 10 == 0 || step == STEPS - 1)
            printf("step %2d  loss %.4f\n", step, last);
        jg_scope_pop();
    }

    /* accuracy: argmax of the logits against the labels */
    jg_scope_push();
    bool prev = jg_set_grad_enabled(false);
    jg_tensor *logits = jg_add(jg_matmul(jg_tanh(jg_add(jg_matmul(x, w1), b1)), w2), b2), *best,
              *idx;
    jg_max_dim(logits, 1, false, &best, &idx);
    int64_t pred[N], lab[N];
    jg_copy_to(idx, pred, sizeof pred);
    jg_copy_to(y, lab, sizeof lab);
    int right = 0;
    for (int i = 0; i < N; i++)
        right += pred[i] == lab[i];
    jg_set_grad_enabled(prev);
    printf("accuracy %d/%d, loss %.4f -> %.4f\n", right, N, first, last);
    jg_scope_pop();
    jg_scope_pop();
    return last < first && right > N * 0.8 ? 0 : 1;
}
