/* Kernels run a fixed number of times, for instruction counts that the
 * machine's load does not change (docs/performance.md):
 *
 *   valgrind --tool=callgrind build/bench/kernel_iters NAME 1
 *   valgrind --tool=callgrind build/bench/kernel_iters NAME 3
 *
 * (I(3) - I(1)) / 2 is the cost of one call, start-up (and compiling, for
 * the compiled ones: the first call compiles or loads from the cache)
 * cancelled.  One thread.  NAME:
 *   tanh       tanh of 1M f32, eagerly
 *   matmul     256x1024 @ 1024x1024 f32
 *   tanh16_e   (t * b).tanh() 16 times, sum, backward; 100K f32; eager
 *   tanh16_c   the same compiled with the c backend
 *   sig8_c     (t * b).sigmoid() 8 times, sum, backward; 100K f32; c
 * Prints a checksum of the result, so a change can be checked to leave the
 * bits alone (or seen to change them). */
#include <jitgrad.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int steps, sig;

static int chain(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *t = in[0];
    for (int s = 0; s < steps && t; s++)
        t = sig ? jg_sigmoid(jg_mul(t, in[1])) : jg_tanh(jg_mul(t, in[1]));
    out[0] = t ? jg_sum(t) : NULL;
    return out[0] ? 1 : -1;
}

static unsigned long long checksum(jg_tensor *t) {
    jg_tensor *c = jg_contiguous(t);
    const unsigned char *p = jg_data(c);
    size_t nb = (size_t)jg_numel(c) * 4;
    unsigned long long h = 1469598103934665603ull;
    for (size_t i = 0; i < nb; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: kernel_iters tanh|matmul|tanh16_e|tanh16_c|sig8_c ITERS\n");
        return 2;
    }
    const char *name = argv[1];
    int iters = atoi(argv[2]);
    jg_set_num_threads(1);
    jg_manual_seed(1);
    unsigned long long h = 0;
    if (!strcmp(name, "tanh") || !strcmp(name, "matmul")) {
        bool mm = !strcmp(name, "matmul");
        jg_tensor *a = mm ? jg_randn(JG_F32, 2, (int64_t[]){256, 1024})
                          : jg_mul_scalar(jg_randn(JG_F32, 1, (int64_t[]){1 << 20}), 3.0);
        jg_tensor *b = mm ? jg_randn(JG_F32, 2, (int64_t[]){1024, 1024}) : NULL;
        for (int i = 0; i < iters; i++) {
            jg_scope_push();
            jg_tensor *y = mm ? jg_matmul(a, b) : jg_tanh(a);
            if (!y) {
                fprintf(stderr, "kernel_iters: %s\n", jg_last_error());
                return 1;
            }
            if (i == iters - 1) /* once: in I(1) and I(3) alike */
                h = checksum(y);
            jg_scope_pop();
        }
    } else {
        bool compiled = strstr(name, "_c") != NULL;
        sig = !strncmp(name, "sig", 3);
        steps = sig ? 8 : 16;
        jg_tensor *in[2] = {
            jg_randn(JG_F32, 1, (int64_t[]){100000}),
            jg_add_scalar(jg_mul_scalar(jg_rand(JG_F32, 1, (int64_t[]){100000}), 0.5), 0.75)};
        jg_set_requires_grad(in[0], true);
        jg_set_requires_grad(in[1], true);
        jg_compiled *c =
            compiled ? jg_compile(chain, NULL, &(jg_compile_options){.backend = "c"}) : NULL;
        if (compiled && !c) {
            fprintf(stderr, "kernel_iters: %s\n", jg_last_error());
            return 1;
        }
        for (int i = 0; i < iters; i++) {
            jg_scope_push();
            jg_tensor *s;
            if ((c ? jg_compiled_call(c, NULL, 0, 2, in, &s) : chain(NULL, NULL, 2, in, &s)) < 0 ||
                jg_backward(s, NULL, 0) < 0) {
                fprintf(stderr, "kernel_iters: %s\n", jg_last_error());
                return 1;
            }
            if (i == iters - 1)
                h = checksum(jg_grad(in[0])) ^ checksum(jg_grad(in[1]));
            jg_clear_grad(in[0]);
            jg_clear_grad(in[1]);
            jg_scope_pop();
        }
        jg_compiled_free(c);
    }
    printf("%s x%d checksum %016llx\n", name, iters, h);
    return 0;
}
