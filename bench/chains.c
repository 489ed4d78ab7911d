/* Chains t = f(t, b) over two leaves a, b (b is read by every step), then
 * t.sum(): eager vs jg_compile "interp" vs "c", forward without grad and
 * forward + backward, medians of samples taken side by side (the three
 * modes in turn), with the ratios; then the peak memory of one forward +
 * backward per mode (MB).
 *   f:  lin   t * 1.5 + b
 *       relu  (t - b).relu()
 *       tanh  (t * b).tanh()
 *       mlp   tanh(t * b) * b + b * 0.25   (one parameter read 3x per layer)
 *   build/bench/chains [n [name]]   (n elements per leaf, default 100000;
 *                                    only the workloads whose name has name)
 * Peak memory: each mode runs in a fresh process (the maximum resident set
 * cannot be reset), growth over what it held once compiled. */
#include "bench.h"
#include <jitgrad.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

typedef struct cfg {
    int f, steps;
} cfg;

static const char *f_name[] = {"lin", "relu", "tanh", "mlp"};

static int chain(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    const cfg *c = user;
    jg_tensor *t = in[0], *b = in[1];
    for (int s = 0; s < c->steps && t; s++) {
        switch (c->f) {
        case 0:
            t = jg_add(jg_mul_scalar(t, 1.5), b);
            break;
        case 1:
            t = jg_relu(jg_sub(t, b));
            break;
        case 2:
            t = jg_tanh(jg_mul(t, b));
            break;
        default:
            t = jg_add(jg_mul(jg_tanh(jg_mul(t, b)), b), jg_mul_scalar(b, 0.25));
            break;
        }
    }
    out[0] = t ? jg_sum(t) : NULL;
    return out[0] ? 1 : -1;
}

static void one(jg_compiled *c, cfg *k, jg_tensor *const *in, bool backward) {
    jg_scope_push();
    jg_tensor *out;
    int rc = c ? jg_compiled_call(c, NULL, 0, 2, in, &out) : chain(k, NULL, 2, in, &out);
    if (rc < 0 || (backward && jg_backward(out, NULL, 0) < 0)) {
        fprintf(stderr, "error: %s\n", jg_last_error());
        exit(1);
    }
    jg_scope_pop();
}

static const char *be[3] = {NULL, "interp", "c"};

static void setup(jg_dtype dt, int64_t n, jg_tensor **in) {
    jg_manual_seed(0);
    for (int i = 0; i < 2; i++) {
        in[i] = jg_add_scalar(jg_mul_scalar(jg_randn(dt, 1, &n), 0.5), i ? 0.8 : 0.0);
        jg_set_requires_grad(in[i], true);
    }
}

static double rss_mb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

static double cur_rss_mb(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, res = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &res) != 2)
            res = 0;
        fclose(f);
    }
    return (double)res * (double)sysconf(_SC_PAGESIZE) / (1024.0 * 1024.0);
}

/* In a fresh process (argv: --peak f steps dtype n mode): the growth of the
 * maximum resident set over three forwards + backwards, after the inputs
 * exist and the program is compiled (on a tiny call: no buffers pooled). */
static int peak_child(char **argv) {
    cfg k = {atoi(argv[2]), atoi(argv[3])};
    jg_dtype dt = atoi(argv[4]) == 64 ? JG_F64 : JG_F32;
    int64_t n = atoll(argv[5]);
    int mode = atoi(argv[6]);
    jg_scope_push();
    jg_tensor *in[2];
    setup(dt, n, in);
    jg_compiled *c =
        mode ? jg_compile(chain, &k, &(jg_compile_options){.backend = be[mode]}) : NULL;
    jg_tensor *s[2];
    setup(dt, 3, s);
    one(c, &k, s, true);
    double base = rss_mb();
    if (cur_rss_mb() > base)
        base = cur_rss_mb();
    for (int r = 0; r < 3; r++)
        one(c, &k, in, true);
    printf("%.3f\n", rss_mb() - base);
    return 0;
}

static const char *self_exe;

static double peak_mb(cfg *k, jg_dtype dt, int64_t n, int mode) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' --peak %d %d %d %lld %d", self_exe, k->f, k->steps,
             dt == JG_F64 ? 64 : 32, (long long)n, mode);
    fflush(stdout);
    FILE *p = popen(cmd, "r");
    double d = -1;
    if (!p)
        return -1;
    if (fscanf(p, "%lf", &d) != 1)
        d = -1;
    pclose(p);
    return d;
}

static const char *only; /* run only the workloads whose name contains it */

static void run(cfg *k, jg_dtype dt, int64_t n, int samples, bool backward, bool mem) {
    char name[64];
    snprintf(name, sizeof name, "%s%d_%s_%s", f_name[k->f], k->steps, dt == JG_F32 ? "f32" : "f64",
             backward ? "fwd_bwd" : "fwd");
    if (only && !strstr(name, only))
        return;
    jg_tensor *in[2];
    setup(dt, n, in);
    bool prev = jg_set_grad_enabled(backward);
    jg_compiled *c[3] = {NULL, NULL, NULL};
    int modes = jg_compile_backend_available("c") ? 3 : 2;
    for (int m = 1; m < modes; m++) {
        c[m] = jg_compile(chain, k, &(jg_compile_options){.backend = be[m]});
        for (int w = 0; w < 2; w++)
            one(c[m], k, in, backward); /* trace + compile outside the timing */
    }
    double *t = malloc(sizeof(double) * 3 * (size_t)samples), med[3] = {-1, -1, -1};
    for (int s = 0; s < samples; s++)
        for (int m = 0; m < modes; m++) {
            double t0 = bench_now();
            one(c[m], k, in, backward);
            t[m * samples + s] = bench_now() - t0;
        }
    for (int m = 0; m < modes; m++) {
        qsort(t + m * samples, (size_t)samples, sizeof *t, bench_cmp);
        med[m] = t[m * samples + samples / 2];
        jg_compiled_free(c[m]);
    }
    free(t);
    jg_set_grad_enabled(prev);
    printf("%-22s eager_ms=%-8.3f interp_ms=%-8.3f c_ms=%-8.3f eager/c=%-6.2f interp/c=%-6.2f",
           name, med[0] * 1e3, med[1] * 1e3, med[2] * 1e3, med[2] > 0 ? med[0] / med[2] : 0,
           med[2] > 0 ? med[1] / med[2] : 0);
    if (mem) {
        printf(" peak_MB eager=%.1f interp=%.1f", peak_mb(k, dt, n, 0), peak_mb(k, dt, n, 1));
        if (modes == 3)
            printf(" c=%.1f", peak_mb(k, dt, n, 2));
    }
    printf("\n");
    fflush(stdout);
}

int main(int argc, char **argv) {
    if (argc == 7 && !strcmp(argv[1], "--peak"))
        return peak_child(argv);
    static char exe[4096];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    self_exe = len > 0 ? (exe[len] = 0, exe) : argv[0];
    int64_t n = argc > 1 ? atoll(argv[1]) : 100000;
    only = argc > 2 ? argv[2] : NULL;
    if (!jg_compile_backend_available("c"))
        printf("# the c backend is not available here: %s\n", jg_last_error());
    printf("# n=%lld per leaf; medians; peak_MB: resident-set growth of one fwd+bwd\n",
           (long long)n);
    jg_scope_push();
    for (int f = 0; f < 3; f++) {
        cfg k = {f, 16};
        run(&k, JG_F32, n, 21, false, false);
        run(&k, JG_F32, n, 21, true, true);
    }
    static const int steps[] = {4, 64};
    for (int f = 0; f < 3; f++)
        for (int i = 0; i < 2; i++) {
            cfg k = {f, steps[i]};
            run(&k, JG_F32, n, steps[i] > 16 ? 7 : 21, true, false);
        }
    for (int f = 0; f < 3; f++) {
        cfg k = {f, 16};
        run(&k, JG_F64, n, 11, true, false);
    }
    cfg mlp = {3, 16};
    run(&mlp, JG_F32, n, 11, false, false);
    run(&mlp, JG_F32, n, 11, true, true);
    jg_scope_pop();
    return 0;
}
