/* The motivating program: one tensor in two slots of a custom function whose
 * backward pre-aggregates the two slots' gradients (returns dk + dv for k and
 * NULL for v).  Eager and compiled mode must both give k.grad == 2q.
 *
 *   make demo
 */
#include <jitgrad.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int myfn_forward(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)n;
    jg_ctx_save_for_backward(ctx, 3, in);
    out[0] = jg_mul(in[0], jg_add(in[1], in[2])); /* q * (k + v) */
    return 1;
}

static int myfn_backward(jg_ctx *ctx, int n_out, jg_tensor *const *dout, int n_in,
                         jg_tensor **din) {
    (void)n_out;
    (void)n_in;
    jg_tensor *q = jg_ctx_saved(ctx, 0), *k = jg_ctx_saved(ctx, 1), *v = jg_ctx_saved(ctx, 2);
    bool mask_v_grad = *(const bool *)jg_ctx_args(ctx);
    jg_tensor *dk = jg_mul(dout[0], q), *dv = jg_mul(dout[0], q);
    din[0] = jg_mul(dout[0], jg_add(k, v));
    if (mask_v_grad) { /* pre-aggregated: one slot carries both */
        din[1] = jg_add(dk, dv);
        din[2] = NULL;
    } else {
        din[1] = dk;
        din[2] = dv;
    }
    return 3;
}

static const jg_function MyFn = {"MyFn", myfn_forward, myfn_backward, NULL};

/* f(q, k) = MyFn.apply(q, k, k, mask).sum(): k fills slots 1 and 2 */
static int f(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user;
    (void)n;
    jg_tensor *y;
    if (jg_apply(&MyFn, 3, (jg_tensor *[]){in[0], in[1], in[1]}, args, sizeof(bool), &y) < 0)
        return -1;
    out[0] = jg_sum(y);
    return 1;
}

static void leaves(jg_tensor **q, jg_tensor **k) {
    jg_manual_seed(0);
    *q = jg_randn(JG_F32, 1, (int64_t[]){16});
    *k = jg_randn(JG_F32, 1, (int64_t[]){16});
    jg_set_requires_grad(*q, true);
    jg_set_requires_grad(*k, true);
}

static double max_abs(const jg_tensor *t) {
    if (!t)
        return NAN;
    float v[16];
    jg_copy_to(t, v, sizeof v);
    double m = 0;
    for (int i = 0; i < 16; i++)
        m = fabs(v[i]) > m ? fabs(v[i]) : m;
    return m;
}

/* Runs f eagerly or compiled, backward, and returns max|k.grad - 2q|. */
static double run(const char *label, jg_compiled *c, bool mask) {
    jg_scope_push();
    jg_tensor *q, *k, *loss;
    leaves(&q, &k);
    int rc = c ? jg_compiled_call(c, &mask, sizeof mask, 2, (jg_tensor *[]){q, k}, &loss)
               : f(NULL, &mask, 2, (jg_tensor *[]){q, k}, &loss);
    if (rc < 0 || jg_backward(loss, NULL, 0) < 0) {
        fprintf(stderr, "%s: %s\n", label, jg_last_error());
        exit(1);
    }
    double err = max_abs(jg_sub(jg_grad(k), jg_mul_scalar(q, 2.0)));
    printf("%-8s mask_v_grad=%d  k.grad max|.| = %.6f  q.grad max|.| = %.6f  "
           "max|k.grad - 2q| = %g\n",
           label, mask, max_abs(jg_grad(k)), max_abs(jg_grad(q)), err);
    jg_scope_pop();
    return err;
}

int main(void) {
    jg_compile_options opts = {.backend = "interp", .fullgraph = true};
    jg_compiled *c = jg_compile(f, NULL, &opts);
    if (!c) {
        fprintf(stderr, "jg_compile: %s\n", jg_last_error());
        return 1;
    }
    double worst = 0;
    for (int m = 1; m >= 0; m--) {
        double e1 = run("eager", NULL, m), e2 = run("compiled", c, m);
        worst = fmax(worst, fmax(e1, e2));
    }
    char *g = jg_compiled_graph(c, 0);
    printf("\ncompiled graph (entry 0 of %d):\n%s\n", jg_compiled_entries(c), g ? g : "?");
    free(g);
    jg_compiled_free(c);
    printf("%s\n", worst == 0 ? "eager and compiled agree: k.grad == 2q exactly"
                              : "MISMATCH between eager and compiled gradients");
    return worst == 0 ? 0 : 1;
}
