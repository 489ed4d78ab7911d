/* OpenBLAS's kernels for this CPU (core/blas.c): where OpenBLAS falls back
 * to kernels without AVX2 on a CPU with AVX2 and FMA, jitgrad selects
 * SkylakeX or Haswell at load; JITGRAD_BLAS_CORETYPE=keep / =NAME,
 * OPENBLAS_CORETYPE and JITGRAD_LOG=blas in fresh processes; matmul on the
 * chosen kernels is still right.  Skipped against a BLAS that is not a
 * DYNAMIC_ARCH OpenBLAS. */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include "testutil.h"

#include "core/blas.h"

#include <dlfcn.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

static char self_path[4096];

static bool dynamic_openblas(void) {
    return dlsym(RTLD_DEFAULT, "gotoblas") && dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init") &&
           dlsym(RTLD_DEFAULT, "gotoblas_corename");
}

static bool cpu_avx2(void) {
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return false;
#endif
}

static bool cpu_avx512(void) {
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vl");
#else
    return false;
#endif
}

/* OpenBLAS's x86 cores whose kernels use AVX2 (0.3.21's names). */
static bool avx2_core(const char *name) {
    static const char *const cores[] = {"Haswell",        "Zen",      "SkylakeX", "Cooperlake",
                                        "Sapphirerapids", "Excavator"};
    for (size_t i = 0; i < sizeof cores / sizeof cores[0]; i++)
        if (!strcasecmp(name, cores[i]))
            return true;
    return false;
}

typedef struct {
    char out[4096]; /* stdout and stderr together */
    char core[64];  /* what jg_blas_corename says at the end */
    char first[64]; /* OpenBLAS's own "Core: X" line at its load (OPENBLAS_VERBOSE=2) */
    int core_lines; /* how many "Core: " lines OpenBLAS printed */
    /* the CPU as the child sees it: under valgrind the parent sees
     * valgrind's CPU (no AVX-512), the child (run natively) the host's */
    int avx2, avx512;
} child_result;

/* Runs this program with --corename in a fresh process, OPENBLAS_VERBOSE=2,
 * and the given values (NULL: unset) of JITGRAD_BLAS_CORETYPE,
 * OPENBLAS_CORETYPE and JITGRAD_LOG. */
static void run_child(const char *jg_core, const char *ob_core, const char *log, child_result *r) {
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        close(fds[0]);
        const char *names[] = {"JITGRAD_BLAS_CORETYPE", "OPENBLAS_CORETYPE", "JITGRAD_LOG"};
        const char *vals[] = {jg_core, ob_core, log};
        for (int i = 0; i < 3; i++) {
            if (vals[i])
                setenv(names[i], vals[i], 1);
            else
                unsetenv(names[i]);
        }
        setenv("OPENBLAS_VERBOSE", "2", 1);
        execl(self_path, self_path, "--corename", (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    memset(r, 0, sizeof *r);
    size_t len = 0;
    ssize_t got;
    while (len < sizeof r->out - 1 &&
           (got = read(fds[0], r->out + len, sizeof r->out - 1 - len)) > 0)
        len += (size_t)got;
    close(fds[0]);
    int status;
    waitpid(pid, &status, 0);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    for (const char *p = r->out; (p = strstr(p, "Core: ")); p += 6)
        if (r->core_lines++ == 0)
            assert_int_equal(sscanf(p + 6, "%63s", r->first), 1);
    const char *c = strstr(r->out, "corename=");
    assert_non_null(c);
    assert_int_equal(sscanf(c + 9, "%63s avx2=%d avx512=%d", r->core, &r->avx2, &r->avx512), 3);
}

/* In this process (no variable set by ctest): kernels with AVX2 wherever the
 * CPU has it. */
static void test_core_in_process(void **state) {
    (void)state;
    if (!dynamic_openblas())
        skip();
    const char *core = jg_blas_corename();
    assert_non_null(core);
    if (cpu_avx2() && !getenv("OPENBLAS_CORETYPE") && !getenv("JITGRAD_BLAS_CORETYPE")) {
        assert_true(avx2_core(core));
        assert_string_not_equal(core, "Prescott");
    }
}

/* No variable: OpenBLAS's choice stands unless it lacks AVX2 on a CPU with
 * it; then SkylakeX (AVX-512) or Haswell. */
static void test_default(void **state) {
    (void)state;
    if (!dynamic_openblas())
        skip();
    child_result r;
    run_child(NULL, NULL, NULL, &r);
    assert_true(r.core_lines >= 1);
    if (avx2_core(r.first) || !r.avx2) {
        assert_string_equal(r.core, r.first);
        assert_int_equal(r.core_lines, 1);
    } else {
        assert_string_equal(r.core, r.avx512 ? "SkylakeX" : "Haswell");
        /* OpenBLAS's load, then jitgrad's choice (asked again if OpenBLAS
         * fell back: src/core/blas.c) */
        assert_true(r.core_lines >= 2);
    }
}

static void test_keep(void **state) {
    (void)state;
    if (!dynamic_openblas())
        skip();
    child_result r;
    run_child("keep", NULL, NULL, &r);
    assert_int_equal(r.core_lines, 1);
    assert_string_equal(r.core, r.first);
    run_child("KEEP", NULL, NULL, &r);
    assert_string_equal(r.core, r.first);
}

/* A user's OPENBLAS_CORETYPE is left alone; JITGRAD_BLAS_CORETYPE=NAME wins
 * over it (and is case-insensitive). */
static void test_force(void **state) {
    (void)state;
    if (!dynamic_openblas())
        skip();
    child_result r;
    run_child(NULL, "Prescott", NULL, &r);
    assert_string_equal(r.core, "Prescott");
    run_child("prescott", NULL, NULL, &r);
    assert_string_equal(r.core, "Prescott");
    bool avx2 = r.avx2, avx512 = r.avx512;
    if (avx2) {
        run_child("Haswell", "Prescott", NULL, &r);
        assert_string_equal(r.core, "Haswell");
        assert_null(strstr(r.out, "jitgrad:")); /* quiet without JITGRAD_LOG */
    }
    if (avx512) {
        run_child("skylakex", NULL, NULL, &r);
        assert_string_equal(r.core, "SkylakeX");
    }
}

/* A name that cannot be had: said on stderr, OpenBLAS's choice kept. */
static void test_force_refused(void **state) {
    (void)state;
    if (!dynamic_openblas())
        skip();
    child_result keep, r;
    run_child("keep", NULL, NULL, &keep);
    run_child("NoSuchCore", NULL, NULL, &r);
    assert_string_equal(r.core, keep.core);
    assert_non_null(
        strstr(r.out, "jitgrad: JITGRAD_BLAS_CORETYPE=NoSuchCore: this OpenBLAS has no such core; "
                      "OpenBLAS core "));
    run_child("Sky/lakeX", NULL, NULL, &r); /* not a symbol's name */
    assert_string_equal(r.core, keep.core);
    assert_non_null(strstr(r.out, "this OpenBLAS has no such core"));
    if (!keep.avx512 && dlsym(RTLD_DEFAULT, "gotoblas_SKYLAKEX")) {
        run_child("SkylakeX", NULL, NULL, &r); /* would be illegal instructions */
        assert_string_equal(r.core, keep.core);
        assert_non_null(strstr(r.out, "this CPU lacks AVX-512 for it"));
    }
}

static void test_log(void **state) {
    (void)state;
    if (!dynamic_openblas())
        skip();
    child_result r;
    run_child(NULL, NULL, "blas", &r);
    char want[256];
    if (r.core_lines >= 2)
        snprintf(want, sizeof want, "jitgrad: OpenBLAS core %s (was %s; cpuid: ", r.core, r.first);
    else
        snprintf(want, sizeof want, "jitgrad: OpenBLAS core %s (kept: OpenBLAS's choice)", r.core);
    assert_non_null(strstr(r.out, want));
    run_child("keep", NULL, "graphs,blas", &r);
    snprintf(want, sizeof want, "jitgrad: OpenBLAS core %s (kept: JITGRAD_BLAS_CORETYPE=keep)",
             r.core);
    assert_non_null(strstr(r.out, want));
    run_child(NULL, "Prescott", "blas", &r);
    assert_non_null(
        strstr(r.out, "jitgrad: OpenBLAS core Prescott (kept: OPENBLAS_CORETYPE is set)"));
}

/* Matmul on the chosen kernels against a double-precision loop, at shapes
 * that take the single gemm and the split one, and a transposed operand. */
static void check_matmul(int64_t m, int64_t k, int64_t n, bool trans_b) {
    float *a = malloc((size_t)(m * k) * sizeof *a), *b = malloc((size_t)(k * n) * sizeof *b);
    assert_non_null(a);
    assert_non_null(b);
    for (int64_t i = 0; i < m * k; i++)
        a[i] = (float)((i * 7919 % 1009) / 1009.0 - 0.5);
    for (int64_t i = 0; i < k * n; i++)
        b[i] = (float)((i * 104729 % 997) / 997.0 - 0.5);
    jg_tensor *ta = jg_tensor_new(JG_F32, 2, TU_SHAPE(m, k), a);
    jg_tensor *tb = trans_b ? jg_transpose(jg_tensor_new(JG_F32, 2, TU_SHAPE(n, k), b), 0, 1)
                            : jg_tensor_new(JG_F32, 2, TU_SHAPE(k, n), b);
    assert_non_null(ta);
    assert_non_null(tb);
    jg_tensor *c = jg_matmul(ta, tb);
    assert_non_null(c);
    const float *pc = jg_data(jg_contiguous(c));
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0, mag = 0;
            for (int64_t l = 0; l < k; l++) {
                double bv = trans_b ? b[j * k + l] : b[l * n + j];
                s += (double)a[i * k + l] * bv;
                mag += fabs((double)a[i * k + l] * bv);
            }
            double err = fabs(pc[i * n + j] - s);
            if (err > 1e-6 * mag + 1e-6)
                fail_msg("matmul %ldx%ldx%ld [%ld, %ld]: %g, want %g", (long)m, (long)k, (long)n,
                         (long)i, (long)j, pc[i * n + j], s);
        }
    free(a);
    free(b);
}

static void test_matmul_right(void **state) {
    (void)state;
    check_matmul(5, 7, 3, false);
    check_matmul(64, 300, 96, true);
    check_matmul(256, 128, 512, false); /* 2^24 multiply-adds: split */
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--corename") == 0) {
        const char *core = jg_blas_corename();
        printf("corename=%s avx2=%d avx512=%d\n", core ? core : "(none)", cpu_avx2(), cpu_avx512());
        return 0;
    }
    ssize_t len = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
    if (len <= 0)
        return 1;
    self_path[len] = '\0';
    const struct CMUnitTest tests[] = {
        TU_TEST(test_core_in_process), TU_TEST(test_default),       TU_TEST(test_keep),
        TU_TEST(test_force),           TU_TEST(test_force_refused), TU_TEST(test_log),
        TU_TEST(test_matmul_right),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
