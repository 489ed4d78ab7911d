/* One thread's time per element of the eager kernels by family, for
 * comparing builds (or CPUs): GELU (tanh form) forward and forward +
 * backward, tanh, exp, sigmoid, erf, softmax and log_softmax over rows of
 * 256, mul, div, add, sum, and an AdamW step.  Each figure is the best of
 * 25 batches of 10 calls (best, not median: the machine is shared, and a
 * kernel's own cost is its fastest run).
 *
 *   build/bench/kernel_families [N [FAMILY]]     N f32 elements (default 262144)
 *
 * Output: `<family> n=<N> ns_per_elem=<t>`, one line each. */
#include "bench.h"
#include <jitgrad.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const NAMES[] = {
    "gelu_tanh", "gelu_tanh_fwd_bwd", "tanh", "exp", "sigmoid", "erf",
    "softmax",   "log_softmax",       "mul",  "div", "add",     "sum",
    "adamw"};
enum { NFAM = (int)(sizeof NAMES / sizeof *NAMES) };

static jg_tensor *a, *b, *m, *p;
static jg_optim *opt;

static void die(const char *what) {
    fprintf(stderr, "kernel_families: %s failed: %s\n", what, jg_last_error());
    exit(1);
}

static void run(int f) {
    jg_tensor *o = NULL;
    switch (f) {
    case 0:
        o = jg_gelu(a, JG_GELU_TANH);
        break;
    case 1:
        o = jg_sum(jg_mul(jg_gelu(a, JG_GELU_TANH), b));
        if (o && jg_backward(o, NULL, 0) < 0)
            o = NULL;
        jg_clear_grad(a);
        break;
    case 2:
        o = jg_tanh(a);
        break;
    case 3:
        o = jg_exp(a);
        break;
    case 4:
        o = jg_sigmoid(a);
        break;
    case 5:
        o = jg_erf(a);
        break;
    case 6:
        o = jg_softmax(m, 1);
        break;
    case 7:
        o = jg_log_softmax(m, 1);
        break;
    case 8:
        o = jg_mul(a, b);
        break;
    case 9:
        o = jg_div(a, b);
        break;
    case 10:
        o = jg_add(a, b);
        break;
    case 11:
        o = jg_sum(a);
        break;
    default:
        o = jg_optim_step(opt) < 0 ? NULL : a;
        break;
    }
    if (!o)
        die(NAMES[f]);
}

int main(int argc, char **argv) {
    int64_t n = argc > 1 ? atoll(argv[1]) : 262144;
    const char *only = argc > 2 ? argv[2] : NULL;
    if (n < 256 || n % 256) {
        fprintf(stderr, "usage: kernel_families [N (a multiple of 256)] [FAMILY]\n");
        return 2;
    }
    jg_set_num_threads(1);
    jg_manual_seed(1);
    a = jg_keep(jg_mul_scalar(jg_randn(JG_F32, 1, (int64_t[]){n}), 2.0));
    b = jg_keep(jg_add_scalar(jg_rand(JG_F32, 1, (int64_t[]){n}), 0.5));
    m = jg_keep(jg_randn(JG_F32, 2, (int64_t[]){n / 256, 256}));
    p = jg_keep(jg_clone(a));
    if (!a || !b || !m || !p)
        die("inputs");
    jg_set_requires_grad(a, true);
    jg_set_requires_grad(p, true);
    jg_optim_hparams h = jg_optim_defaults(JG_OPTIM_ADAMW);
    if (!(opt = jg_optim_new(JG_OPTIM_ADAMW, &p, 1, &h)))
        die("jg_optim_new");
    jg_scope_push();
    if (jg_backward(jg_sum(jg_mul(p, b)), NULL, 0) < 0)
        die("jg_backward");
    jg_scope_pop();
    for (int f = 0; f < NFAM; f++) {
        if (only && strcmp(only, NAMES[f]))
            continue;
        double best = 1e30;
        for (int r = 0; r < 25; r++) {
            jg_scope_push();
            double t0 = bench_now();
            for (int k = 0; k < 10; k++)
                run(f);
            double dt = (bench_now() - t0) / 10;
            jg_scope_pop();
            best = dt < best ? dt : best;
        }
        printf("%s n=%lld ns_per_elem=%.3f\n", NAMES[f], (long long)n, best * 1e9 / (double)n);
    }
    jg_optim_free(opt);
    return 0;
}
