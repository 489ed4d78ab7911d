/* A dynamic entry on the c backend: the cost of a call at a batch size not
 * seen before, once the entry serves every size (the graph of the size is
 * built from the template and its plan made; the generated code takes
 * sizes as parameters, so no compiler runs), next to a call at a size
 * already seen.  Runs in a fresh cache directory; prints the times and the
 * number of objects compiled. */
#include <jitgrad.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static jg_tensor *w1, *b1, *w2, *b2;

static int p_loss(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *h = jg_relu(jg_add(jg_matmul(in[0], w1), b1));
    out[0] = jg_mse_loss(jg_add(jg_matmul(h, w2), b2), in[1], JG_REDUCTION_MEAN);
    return out[0] ? 1 : -1;
}

static double call(jg_compiled *c, int64_t b) {
    jg_scope_push();
    jg_tensor *in[2] = {jg_randn(JG_F32, 2, (int64_t[]){b, 64}),
                        jg_randn(JG_F32, 2, (int64_t[]){b, 10})},
              *out[1];
    double t0 = now();
    if (jg_compiled_call(c, NULL, 0, 2, in, out) != 1 || jg_backward(out[0], NULL, 0) < 0) {
        fprintf(stderr, "error: %s\n", jg_last_error());
        exit(1);
    }
    double t = now() - t0;
    jg_scope_pop();
    return t;
}

int main(void) {
    char dir[] = "/tmp/jg-bench-dyn-XXXXXX";
    if (!mkdtemp(dir) || setenv("JITGRAD_CACHE_DIR", dir, 1) < 0)
        return 1;
    jg_manual_seed(0);
    jg_tensor **p[4] = {&w1, &b1, &w2, &b2};
    const int64_t shapes[4][2] = {{64, 256}, {256, 0}, {256, 10}, {10, 0}};
    for (int i = 0; i < 4; i++) {
        *p[i] = jg_keep(jg_randn(JG_F32, shapes[i][1] ? 2 : 1, shapes[i]));
        jg_set_requires_grad(*p[i], true);
    }
    jg_compiled *c = jg_compile(p_loss, NULL, &(jg_compile_options){.backend = "c"});
    if (!c || jg_compiled_set_dynamic(c, JG_DYNAMIC_AUTO) < 0)
        return 1;
    double first = call(c, 64), second = call(c, 48); /* traces: the entry goes dynamic */
    const int64_t fresh[] = {17, 33, 5, 100, 71, 250};
    double t_new = 0, t_seen = 0;
    for (int i = 0; i < 6; i++) {
        t_new += call(c, fresh[i]);
        t_seen += call(c, fresh[i]);
    }
    printf("dynamic MLP loss (c backend, fwd+bwd): first call %.1f ms, second size %.1f ms; "
           "a new size %.2f ms, a size seen %.3f ms (mean of 6); entries %d\n",
           first * 1e3, second * 1e3, t_new / 6 * 1e3, t_seen / 6 * 1e3, jg_compiled_entries(c));
    fflush(stdout);
    jg_compiled_free(c);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "n=$(ls %s/*.so | wc -l); echo \"objects compiled: $n\"; rm -rf %s",
             dir, dir);
    return system(cmd) == 0 ? 0 : 1;
}
