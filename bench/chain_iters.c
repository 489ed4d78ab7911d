/* The chain of bench/eager_ops.c (100 ops on 16 f32, then sum and
 * backward) run a fixed number of times, for instruction counts:
 *
 *   valgrind --tool=callgrind build/bench/chain_iters 10
 *   valgrind --tool=callgrind build/bench/chain_iters 30
 *
 * (I(30) - I(10)) / 20 is the cost of one iteration, start-up cancelled.
 * Prints the gradient's checksum, so a change can be checked to leave the
 * results bitwise alone. */
#include "bench.h"
#include <jitgrad.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 10;
    jg_manual_seed(1);
    jg_tensor *x = jg_randn(JG_F32, 1, (int64_t[]){16});
    jg_set_requires_grad(x, true);
    unsigned long long sum = 0;
    for (int i = 0; i < n; i++) {
        jg_scope_push();
        jg_tensor *s = bench_chain(x);
        if (!s || jg_backward(s, NULL, 0) < 0) {
            fprintf(stderr, "chain_iters: %s\n", jg_last_error());
            return 1;
        }
        jg_scope_pop();
        const float *g = jg_data(jg_grad(x));
        for (int k = 0; k < 16; k++) {
            unsigned int b;
            memcpy(&b, &g[k], sizeof b);
            sum = sum * 31 + b;
        }
        jg_clear_grad(x);
    }
    printf("chain_iters: %d iterations, gradient checksum %016llx\n", n, sum);
    jg_release(x);
    return 0;
}
