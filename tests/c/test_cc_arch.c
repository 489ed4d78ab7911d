/* The c backend at each instruction set level this machine runs (none,
 * avx2, avx512; JITGRAD_CC_ARCH): the same programs (elementwise math,
 * reductions, softmax, an MLP and an attention block, forward and
 * backward) give eager's bits at every level, each level's objects are
 * distinct cache entries compiled with their own flags, and a bad setting
 * is said once and ignored. */
#include "testutil.h"

#include "backend/cache.h"
#include "core/tensor.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REQUIRE_C()                                                                                \
    do {                                                                                           \
        if (!jg_compile_backend_available("c")) {                                                  \
            print_message("skipping: the c backend is not available here: %s\n", jg_last_error()); \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

enum { NIN = 7, NOUT = 16 };

/* in: x [B, D], w1 [D, H], b1 [H], w2 [H, C], b2 [C], q/k source a [B, H],
 * ln weight [D].  Outputs cover every family the generated code has. */
static int p_all(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *x = in[0];
    int k = 0;
    out[k++] = jg_exp(jg_mul(x, jg_scalar(JG_F32, 0.25)));
    out[k++] = jg_tanh(x);
    out[k++] = jg_sigmoid(x);
    out[k++] = jg_erf(x);
    out[k++] = jg_gelu(x, JG_GELU_NONE);
    out[k++] = jg_gelu(x, JG_GELU_TANH);
    out[k++] =
        jg_div(jg_sub(x, jg_scalar(JG_F32, 1.5)), jg_add(jg_mul(x, x), jg_scalar(JG_F32, 1)));
    out[k++] = jg_sum(x);
    out[k++] = jg_mean(jg_exp(jg_mul(x, jg_scalar(JG_F32, 0.1))));
    out[k++] = jg_max(x);
    out[k++] = jg_sum_dims(jg_tanh(x), 1, (const int[]){0}, false);
    out[k++] = jg_softmax(x, 1);
    out[k++] = jg_log_softmax(x, 1);
    /* an MLP: layer norm, linear, GELU, linear, cross entropy-like loss */
    jg_tensor *h = jg_layer_norm(x, 1, in[6], NULL, 1e-5);
    h = jg_gelu(jg_add(jg_matmul(h, in[1]), in[2]), JG_GELU_TANH);
    jg_tensor *logits = jg_add(jg_matmul(h, in[3]), in[4]);
    out[k++] = jg_mean(jg_neg(jg_log_softmax(logits, 1)));
    /* attention: softmax(q k^T / sqrt(d)) v */
    jg_tensor *q = jg_tanh(in[5]), *kk = jg_sigmoid(in[5]);
    jg_tensor *att =
        jg_softmax(jg_mul(jg_matmul(q, jg_transpose(kk, 0, 1)), jg_scalar(JG_F32, 0.125)), 1);
    out[k++] = jg_sum(jg_mul(jg_matmul(att, h), jg_matmul(att, h)));
    out[k++] = jg_sum(jg_mul(logits, logits));
    for (int i = 0; i < k; i++)
        if (!out[i])
            return -1;
    return k;
}

static jg_tensor *input(int64_t r, int64_t c, double scale) {
    jg_tensor *t = jg_mul(jg_randn(JG_F32, c ? 2 : 1, c ? TU_SHAPE(r, c) : TU_SHAPE(r)),
                          jg_scalar(JG_F32, scale));
    t = jg_keep(jg_clone(t));
    jg_set_requires_grad(t, true);
    return t;
}

/* Runs p_all (eagerly: c NULL) and the backward of the sum of all outputs;
 * keeps outputs and the inputs' gradients in res (NOUT + NIN). */
static void run(jg_compiled *c, jg_tensor **in, jg_tensor **res) {
    jg_tensor *out[NOUT];
    int n = c ? jg_compiled_call(c, NULL, 0, NIN, in, out) : p_all(NULL, NULL, NIN, in, out);
    if (n != NOUT)
        fail_msg("%d outputs: %s", n, jg_last_error());
    jg_tensor *tot = jg_sum(out[0]);
    for (int k = 1; k < NOUT; k++)
        tot = jg_add(tot, jg_sum(out[k]));
    assert_int_equal(jg_backward(tot, NULL, 0), 0);
    for (int k = 0; k < NOUT; k++)
        res[k] = jg_keep(jg_detach(out[k]));
    for (int i = 0; i < NIN; i++) {
        res[NOUT + i] = jg_keep(jg_clone(jg_grad(in[i])));
        jg_clear_grad(in[i]);
    }
}

/* How many files of dir end in .c and contain needle. */
static int sources_with(const char *dir, const char *needle) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 3 || strcmp(e->d_name + len - 2, ".c"))
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        assert_non_null(f);
        static char buf[1 << 22];
        size_t got = fread(buf, 1, sizeof buf - 1, f);
        buf[got] = 0;
        fclose(f);
        n += strstr(buf, needle) != NULL;
    }
    closedir(d);
    return n;
}

/* One program compiled at each level: eager's bits everywhere; a level's
 * objects are compiled anew (the flags are part of the cache key) and
 * carry that level's flags; compiling again at a level loads its objects. */
static void test_levels_same_bits(void **state) {
    (void)state;
    REQUIRE_C();
    char dir[] = "/tmp/jg-cc-arch-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char *old_dir = getenv("JITGRAD_CACHE_DIR") ? strdup(getenv("JITGRAD_CACHE_DIR")) : NULL;
    setenv("JITGRAD_CACHE_DIR", dir, 1);

    jg_manual_seed(5);
    enum { B = 37, D = 129, H = 64, C = 19 };
    jg_tensor *in[NIN] = {input(B, D, 3.0), input(D, H, 0.1), input(H, 0, 0.1), input(H, C, 0.1),
                          input(C, 0, 0.1), input(B, H, 2.0), input(D, 0, 1.0)};
    /* edge values in x: the exp/tanh/erf loops' special cases */
    const float edge[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 9.5f, -9.5f, 88.8f, -104.0f, 1e30f};
    float *xv = (float *)jg_tensor_ptr(in[0]);
    for (size_t i = 0; i < sizeof edge / sizeof *edge; i++)
        xv[i * 13 + 5] = edge[i];
    jg_tensor *want[NOUT + NIN];
    run(NULL, in, want);

    const int top = jg_cc_arch_supported();
    print_message("levels compiled: none..%s\n", jg_cc_arch_name(top));
    for (int round = 0; round < 2; round++)
        for (int lv = top; lv >= JG_CC_ARCH_NONE; lv--) {
            setenv("JITGRAD_CC_ARCH", jg_cc_arch_name(lv), 1);
            assert_int_equal(jg_cc_arch(), lv);
            long before = jg_cache_compiles();
            jg_compiled *c =
                jg_compile(p_all, NULL, &(jg_compile_options){.backend = "c", .fullgraph = true});
            assert_non_null(c);
            jg_tensor *got[NOUT + NIN];
            run(c, in, got);
            print_message("level %s\n", jg_cc_arch_name(lv));
            for (int k = 0; k < NOUT + NIN; k++)
                TU_SAME(got[k], want[k]);
            assert_int_equal(jg_compiled_fallbacks(c), 0);
            jg_compiled_free(c);
            long compiled = jg_cache_compiles() - before;
            if (round == 0)
                assert_true(compiled >= 2); /* forward and backward, not another level's */
            else
                assert_int_equal(compiled, 0); /* this level's objects, from the cache */
            for (int k = 0; k < NOUT + NIN; k++)
                jg_release(got[k]);
        }
    /* each object's key (the text of its flags, in its source) names its level */
    int n_512 = sources_with(dir, "-mprefer-vector-width=512 ");
    int n_avx2 = sources_with(dir, "-mavx2 ");
    int n_all = sources_with(dir, "-ffp-contract=off ");
    assert_true(n_all >= 2 * (top + 1));
    if (top == JG_CC_ARCH_AVX512)
        assert_true(n_512 >= 2 && n_512 < n_avx2);
    else
        assert_int_equal(n_512, 0);
    if (top >= JG_CC_ARCH_AVX2)
        assert_true(n_avx2 >= 2 && n_avx2 < n_all);

    unsetenv("JITGRAD_CC_ARCH");
    if (old_dir)
        setenv("JITGRAD_CACHE_DIR", old_dir, 1);
    else
        unsetenv("JITGRAD_CACHE_DIR");
    free(old_dir);
    for (int k = 0; k < NOUT + NIN; k++)
        jg_release(want[k]);
    for (int i = 0; i < NIN; i++)
        jg_release(in[i]);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void bad_setting(void) {
    setenv("JITGRAD_CC_ARCH", "avx513", 1);
    assert_int_equal(jg_cc_arch(), jg_cc_arch_supported());
    assert_int_equal(jg_cc_arch(), jg_cc_arch_supported());
    setenv("JITGRAD_CC_ARCH", "", 1);
    assert_int_equal(jg_cc_arch(), jg_cc_arch_supported());
    setenv("JITGRAD_CC_ARCH", "none", 1);
    assert_int_equal(jg_cc_arch(), JG_CC_ARCH_NONE);
    unsetenv("JITGRAD_CC_ARCH");
    assert_int_equal(jg_cc_arch(), jg_cc_arch_supported());
}

/* A bad JITGRAD_CC_ARCH: said once, the CPU's level used. */
static void test_bad_setting(void **state) {
    (void)state;
    char *s = tu_capture_stderr(bad_setting);
    char want[200];
    snprintf(want, sizeof want,
             "jitgrad: ignoring JITGRAD_CC_ARCH='avx513' (not avx512, avx2 or none; using %s)\n",
             jg_cc_arch_name(jg_cc_arch_supported()));
    assert_string_equal(s, want);
    free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_levels_same_bits),
        TU_TEST(test_bad_setting),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
