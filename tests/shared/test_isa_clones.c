/* The library's loops with AVX-512 clones (target_clones, picked by CPUID
 * when the library is loaded) give the bits of their AVX2 clones: the same
 * eager computation (elementwise math, arithmetic, reductions, softmax,
 * layer norm, forward and backward, AdamW steps) runs in two processes
 * that load libjitgrad.so with dlopen, one as the CPU is and one with
 * AVX-512 hidden from CPUID, and their results are compared byte for byte.
 *
 * AVX-512 is hidden with CPUID faulting (arch_prctl ARCH_SET_CPUID, Linux
 * on x86 CPUs and hypervisors that support it): every CPUID instruction
 * then traps, and the SIGSEGV handler below answers it with the real
 * values minus the AVX-512 feature bits.  Without CPUID faulting (or under
 * valgrind) the test is skipped; on a CPU without AVX-512 both runs take
 * the same clones and the test passes trivially.
 * Argument: the path of libjitgrad.so. */
#define _GNU_SOURCE /* REG_RIP, syscall */
#include <jitgrad.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <cpuid.h>
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#define ARCH_SET_CPUID 0x1012 /* asm/prctl.h */
#define SKIP_STATUS 77

static const char *lib_path;
static char self_path[4096];
static volatile sig_atomic_t n_traps;

/* Answers a trapped CPUID without the AVX-512 features (leaf 7). */
static void on_cpuid(int sig, siginfo_t *si, void *ctx) {
    (void)si;
    ucontext_t *uc = ctx;
    greg_t *r = uc->uc_mcontext.gregs;
    const unsigned char *ip = (const unsigned char *)r[REG_RIP];
    if (ip[0] != 0x0f || ip[1] != 0xa2) { /* not CPUID: a real fault */
        signal(sig, SIG_DFL);
        return;
    }
    unsigned leaf = (unsigned)r[REG_RAX], sub = (unsigned)r[REG_RCX], a, b, c, d;
    syscall(SYS_arch_prctl, ARCH_SET_CPUID, 1);
    __cpuid_count(leaf, sub, a, b, c, d);
    syscall(SYS_arch_prctl, ARCH_SET_CPUID, 0);
    if (leaf == 7 && sub == 0) {
        /* F, DQ, IFMA, PF, ER, CD, BW, VL */
        b &= ~(1u << 16 | 1u << 17 | 1u << 21 | 1u << 26 | 1u << 27 | 1u << 28 | 1u << 30 |
               1u << 31);
        /* VBMI, VBMI2, VNNI, BITALG, VPOPCNTDQ */
        c &= ~(1u << 1 | 1u << 6 | 1u << 11 | 1u << 12 | 1u << 14);
        /* 4VNNIW, 4FMAPS, VP2INTERSECT, FP16 */
        d &= ~(1u << 2 | 1u << 3 | 1u << 8 | 1u << 23);
    } else if (leaf == 7 && sub == 1) {
        a &= ~(1u << 5); /* BF16 */
    }
    r[REG_RAX] = a, r[REG_RBX] = b, r[REG_RCX] = c, r[REG_RDX] = d;
    r[REG_RIP] += 2;
    n_traps++;
}

/* The library's functions, looked up by name in the loaded object. */
#define FN(name) __typeof__(&jg_##name) name = (__typeof__(&jg_##name))sym(dl, "jg_" #name)

static void *sym(void *dl, const char *name) {
    void *p = dlsym(dl, name);
    if (!p) {
        fprintf(stderr, "test_isa_clones: %s missing\n", name);
        exit(1);
    }
    return p;
}

static void put(FILE *f, void *dl, jg_tensor *t) {
    FN(contiguous);
    FN(data);
    FN(numel);
    FN(last_error);
    if (!t) {
        fprintf(stderr, "test_isa_clones: %s\n", last_error());
        exit(1);
    }
    jg_tensor *c = contiguous(t);
    fwrite(data(c), 4, (size_t)numel(c), f); /* all f32 */
}

/* The computation, in a process whose CPUID answers are already set:
 * writes the traps counted while loading, then every result's bytes. */
static int child(bool hide, const char *lib, const char *out) {
    if (hide) {
        struct sigaction sa = {.sa_sigaction = on_cpuid, .sa_flags = SA_SIGINFO};
        sigemptyset(&sa.sa_mask);
        sigaction(SIGSEGV, &sa, NULL);
        if (syscall(SYS_arch_prctl, ARCH_SET_CPUID, 0) != 0)
            return SKIP_STATUS; /* no CPUID faulting here */
    }
    void *dl = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        fprintf(stderr, "test_isa_clones: %s\n", dlerror());
        return 1;
    }
    long traps = n_traps;
    FILE *f = fopen(out, "wb");
    if (!f)
        return 1;
    fwrite(&traps, sizeof traps, 1, f);
    FN(set_num_threads);
    FN(manual_seed);
    FN(randn);
    FN(rand);
    FN(mul_scalar);
    FN(add_scalar);
    FN(clone);
    FN(set_requires_grad);
    FN(gelu);
    FN(tanh);
    FN(exp);
    FN(sigmoid);
    FN(silu);
    FN(erf);
    FN(mul);
    FN(div);
    FN(add);
    FN(sub);
    FN(softmax);
    FN(log_softmax);
    FN(sum);
    FN(mean);
    FN(max);
    FN(sum_dims);
    FN(layer_norm);
    FN(backward);
    FN(grad);
    FN(optim_defaults);
    FN(optim_new);
    FN(optim_step);
    FN(optim_free);
    FN(optim_zero_grad);
    FN(scope_push);
    set_num_threads(1);
    scope_push();
    manual_seed(7);
    /* odd row lengths: every loop's vector body and its tail */
    jg_tensor *x = clone(mul_scalar(randn(JG_F32, 2, (int64_t[]){37, 259}), 3.0));
    jg_tensor *y = clone(add_scalar(rand(JG_F32, 2, (int64_t[]){37, 259}), 0.25));
    jg_tensor *w = clone(randn(JG_F32, 1, (int64_t[]){259}));
    set_requires_grad(x, true);
    set_requires_grad(y, true);
    set_requires_grad(w, true);
    jg_tensor *o[] = {
        gelu(x, JG_GELU_TANH),
        gelu(x, JG_GELU_NONE),
        tanh(x),
        exp(x),
        sigmoid(x),
        silu(x),
        erf(x),
        mul(x, y),
        div(x, y),
        add(x, y),
        sub(x, y),
        softmax(x, 1),
        log_softmax(x, 1),
        softmax(x, 0),
        sum_dims(x, 1, (const int[]){0}, false),
        sum_dims(x, 1, (const int[]){1}, false),
        mean(x),
        max(x),
        layer_norm(x, 1, w, NULL, 1e-5),
    };
    const int n = (int)(sizeof o / sizeof *o);
    jg_tensor *loss = sum(mul(o[0], y));
    for (int i = 1; i < n; i++) {
        put(f, dl, o[i]);
        loss = add(loss, sum(mul(o[i], o[i])));
    }
    put(f, dl, o[0]);
    put(f, dl, loss);
    if (backward(loss, NULL, 0) < 0)
        put(f, dl, NULL);
    put(f, dl, grad(x));
    put(f, dl, grad(y));
    put(f, dl, grad(w));
    /* AdamW on a parameter with an odd length (the fused update's tail) */
    jg_tensor *p = clone(randn(JG_F32, 1, (int64_t[]){4099}));
    set_requires_grad(p, true);
    jg_optim_hparams h = optim_defaults(JG_OPTIM_ADAMW);
    h.lr = 0.01;
    h.weight_decay = 0.1;
    jg_optim *opt = optim_new(JG_OPTIM_ADAMW, &p, 1, &h);
    for (int s = 0; s < 3 && opt; s++) {
        if (optim_zero_grad(opt, true) < 0 || backward(sum(tanh(mul(p, p))), NULL, 0) < 0 ||
            optim_step(opt) < 0)
            put(f, dl, NULL);
        put(f, dl, p);
    }
    if (!opt)
        put(f, dl, NULL);
    optim_free(opt); /* its state would be a leak under the sanitizer build */
    return fclose(f) ? 1 : 0;
}

/* Runs this executable as a child; its exit status. */
static int spawn(const char *mode, const char *out) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        execl(self_path, "test_isa_clones", "--child", mode, lib_path, out, (char *)NULL);
        _exit(127);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc(*n + 1);
    assert_non_null(s);
    assert_int_equal(fread(s, 1, *n, f), *n);
    fclose(f);
    return s;
}

static void test_clones_same_bits(void **state) {
    (void)state;
    char dir[] = "/tmp/jg-isa-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char native[64], hidden[64];
    snprintf(native, sizeof native, "%s/native", dir);
    snprintf(hidden, sizeof hidden, "%s/hidden", dir);
    int st = spawn("hide", hidden);
    if (st == SKIP_STATUS) {
        rmdir(dir);
        print_message("skipping: no CPUID faulting here\n");
        skip();
    }
    assert_int_equal(st, 0);
    assert_int_equal(spawn("native", native), 0);
    size_t na, nb;
    char *a = slurp(native, &na), *b = slurp(hidden, &nb);
    long traps_native, traps_hidden;
    memcpy(&traps_native, a, sizeof(long));
    memcpy(&traps_hidden, b, sizeof(long));
    /* loading the library asked CPUID (the clones' resolvers), and was
     * answered by the handler */
    assert_int_equal(traps_native, 0);
    assert_true(traps_hidden > 0);
    __builtin_cpu_init();
    print_message("AVX-512 %s; CPUID trapped %ld times while loading\n",
                  __builtin_cpu_supports("avx512f") ? "hidden" : "absent anyway", traps_hidden);
    assert_int_equal(na, nb);
    assert_true(na > 100000);
    assert_memory_equal(a + sizeof(long), b + sizeof(long), na - sizeof(long));
    free(a);
    free(b);
    unlink(native);
    unlink(hidden);
    rmdir(dir);
}

int main(int argc, char **argv) {
    if (argc == 5 && !strcmp(argv[1], "--child"))
        return child(!strcmp(argv[2], "hide"), argv[3], argv[4]);
    if (argc < 2) {
        fprintf(stderr, "usage: test_isa_clones path/to/libjitgrad.so\n");
        return 2;
    }
    lib_path = argv[1];
    if (!realpath(argv[0], self_path))
        return 2;
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_clones_same_bits)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
