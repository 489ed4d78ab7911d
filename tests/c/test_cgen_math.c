/* The c backend's math functions against eager's, bitwise: exp, sigmoid,
 * silu, tanh and gelu (erf and tanh forms), forward and backward, over a
 * sweep of f32 inputs.  The generated loops run f32 exp as the eager exp /
 * sigmoid / silu loops do (blocks of in-range |x| with jg_ew_expf_normal,
 * the others redone with jg_ew_expf; backend/cgen.c, exp_guard), so the
 * sweep has blocks entirely in range, blocks with one edge value at varying
 * positions (just past 86, where f32 exp overflows or underflows, inf, NaN,
 * subnormals, +-0), and a strided sweep of all f32 bit patterns. */
#include "testutil.h"

#include "ops/optable.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE_C()                                                                                \
    do {                                                                                           \
        if (!jg_compile_backend_available("c")) {                                                  \
            print_message("skipping: the c backend is not available here: %s\n", jg_last_error()); \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

enum { NOPS = 6 };

static jg_tensor *apply(int k, jg_tensor *x) {
    switch (k) {
    case 0:
        return jg_exp(x);
    case 1:
        return jg_sigmoid(x);
    case 2:
        return jg_silu(x);
    case 3:
        return jg_tanh(x);
    case 4:
        return jg_gelu(x, JG_GELU_NONE);
    default:
        return jg_gelu(x, JG_GELU_TANH);
    }
}

/* out[k] = op k of in[k] */
static int p_math(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args;
    for (int k = 0; k < n; k++)
        if (!(out[k] = apply(k, in[k])))
            return -1;
    return n;
}

static float f32_of(uint32_t u) {
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* The sweep; *n gets its length. */
static float *sweep(int64_t *n) {
    const float edge[] = {
        0x1.580002p6f, -0x1.580002p6f, /* just past 86 */
        86.0f,         -86.0f,         88.7f,     -88.7f,        88.8f,           -88.8f,
        89.0f,         -89.0f,         103.9f,    -103.9f,       104.0f,          -104.0f,
        150.0f,        -150.0f,        1e30f,     -1e30f,        INFINITY,        -INFINITY,
        NAN,           -NAN,           0x1p-149f, -0x1p-149f,    0x1p-127f,       0.0f,
        -0.0f,         9.5f,           -9.5f,     0x1.300002p3f, 0x1.fffffep127f, -0x1.fffffep127f,
    };
    const int n_edge = (int)(sizeof edge / sizeof edge[0]);
    const int64_t n_in = 2 * 12288, n_blk = 256 * 2 * n_edge, n_all = 65536;
    *n = n_in + n_blk + n_all + 77; /* a ragged end */
    float *x = malloc((size_t)*n * sizeof *x);
    assert_non_null(x);
    int64_t i = 0;
    /* |x| <= 86 (0x42ac0000), 86 itself included: blocks all in range */
    for (int64_t j = 0; j < n_in / 2; j++) {
        uint32_t u = (uint32_t)(j * (0x42ac0000u / (n_in / 2 - 1)));
        if (j == n_in / 2 - 1)
            u = 0x42ac0000u;
        x[i++] = f32_of(u);
        x[i++] = -f32_of(u);
    }
    /* in-range blocks holding one edge value each, at a position that moves */
    for (int64_t j = 0; j < n_blk; j++)
        x[i + j] = (float)((j * 7919) % 17201) / 100.0f - 86.0f;
    for (int e = 0; e < 2 * n_edge; e++)
        x[i + 256 * e + (e * 37) % 256] = edge[e % n_edge];
    i += n_blk;
    /* every 65537th bit pattern */
    for (int64_t j = 0; j < n_all; j++)
        x[i++] = f32_of((uint32_t)(j * 65537));
    for (int64_t j = 0; j < 77; j++)
        x[i++] = (float)(j - 38) * 2.375f;
    return x;
}

/* Forward and backward (through the sum of every output's sum, so each
 * input's gradient is its op's derivative) eagerly, with "interp" and with
 * "c": every output and gradient must have eager's bits. */
static void test_math_same_bits(void **state) {
    (void)state;
    REQUIRE_C();
    int64_t n;
    float *x = sweep(&n);
    jg_tensor *in[NOPS], *eout[NOPS], *egrad[NOPS], *cout[NOPS];
    for (int k = 0; k < NOPS; k++) {
        in[k] = jg_tensor_from_blob(JG_F32, 1, TU_SHAPE(n), NULL, x, NULL, NULL);
        assert_non_null(in[k]);
        in[k] = jg_clone(in[k]);
        jg_set_requires_grad(in[k], true);
    }
    assert_int_equal(p_math(NULL, NULL, NOPS, in, eout), NOPS);
    jg_tensor *tot = jg_sum(eout[0]);
    for (int k = 1; k < NOPS; k++)
        tot = jg_add(tot, jg_sum(eout[k]));
    assert_int_equal(jg_backward(tot, NULL, 0), 0);
    for (int k = 0; k < NOPS; k++) {
        egrad[k] = jg_clone(jg_grad(in[k]));
        jg_clear_grad(in[k]);
    }
    const char *modes[2] = {"interp", "c"};
    for (int m = 0; m < 2; m++) {
        jg_compile_options o = {.backend = modes[m], .fullgraph = true};
        jg_compiled *c = jg_compile(p_math, NULL, &o);
        assert_non_null(c);
        if (jg_compiled_call(c, NULL, 0, NOPS, in, cout) != NOPS)
            fail_msg("%s: %s", modes[m], jg_last_error());
        tot = jg_sum(cout[0]);
        for (int k = 1; k < NOPS; k++)
            tot = jg_add(tot, jg_sum(cout[k]));
        assert_int_equal(jg_backward(tot, NULL, 0), 0);
        for (int k = 0; k < NOPS; k++) {
            TU_SAME(cout[k], eout[k]);
            TU_SAME(jg_grad(in[k]), egrad[k]);
            jg_clear_grad(in[k]);
        }
        assert_int_equal(jg_compiled_fallbacks(c), 0);
        jg_compiled_free(c);
    }
    free(x);
}

static void log_run(void) {
    setenv("JITGRAD_LOG", "code", 1);
    jg_tensor *x = jg_full(JG_F32, 1, TU_SHAPE(1000), 0.5), *o[NOPS];
    jg_tensor *in[NOPS] = {x, x, x, x, x, x};
    jg_compiled *c = jg_compile(p_math, NULL, &(jg_compile_options){.backend = "c"});
    assert_int_equal(jg_compiled_call(c, NULL, 0, 3, in, o), 3);
    unsetenv("JITGRAD_LOG");
    jg_compiled_free(c);
}

/* The generated loop of exp / sigmoid / silu takes the block fast path: a
 * first pass with jg_ew_expf_normal, redone only when a |x| is too large. */
static void test_math_code_fast_path(void **state) {
    (void)state;
    REQUIRE_C();
    char *s = tu_capture_stderr(log_run);
    assert_non_null(strstr(s, "        uint32_t jg_big = 0;\n"));
    assert_non_null(strstr(s, "= (float)(jg_ew_expf_track(&jg_big, v"));
    assert_non_null(strstr(s, "(float)1 / ((float)1 + jg_ew_expf_track(&jg_big, -v"));
    assert_non_null(strstr(s, "        if (jg_big > JG_EW_EXPF_NORMAL_MAX) {\n"));
    assert_non_null(strstr(s, "= (float)(jg_ew_exp(v"));
    free(s);
}

/* out[0] = tanh_grad(in[0], in[1]): the gradient times 1 - y^2 */
static int p_tanh_grad(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    out[0] = jg_op1(JG_OP_TANH_GRAD, NULL, in[0], in[1]);
    return out[0] ? 1 : -1;
}

/* tanh_grad squares y through jg_ew_sq1, which raises |y| below 2^-13
 * (f32) / 2^-28 (f64) so that no subnormal is made: eager, "interp" and
 * "c" still give the bits of a * (-(y * y) + 1) computed here plainly, for
 * y all over and below that bound (subnormals, +-0, the bound and its
 * neighbours), inf, NaNs of both signs and payloads, and gradients from
 * tiny to huge. */
static void test_tanh_grad_small_outputs(void **state) {
    (void)state;
    REQUIRE_C();
    enum { SWEEP = 6000 };
    for (int t = 0; t < 2; t++) {
        const jg_dtype dt = t ? JG_F64 : JG_F32;
        const double bound = t ? 0x1p-28 : 0x1p-13;
        double yv[2 * SWEEP + 32];
        int64_t n = 0;
        for (int j = 0; j < SWEEP; j++) { /* 2^-150 .. 2^-9, both signs */
            double y = bound * pow(2.0, (double)(j - SWEEP + 600) / (SWEEP / 140.0));
            yv[n++] = y;
            yv[n++] = -y * 1.1;
        }
        const double edge[] = {0.0,
                               -0.0,
                               bound,
                               -bound,
                               t ? nextafter(bound, 0) : nextafterf((float)bound, 0),
                               t ? nextafter(bound, 1) : nextafterf((float)bound, 1),
                               2 * bound,
                               0x1p-149,
                               -0x1p-149,
                               0x1p-1074,
                               0.5,
                               -0.999,
                               1.0,
                               INFINITY,
                               -INFINITY,
                               NAN,
                               -NAN};
        for (size_t k = 0; k < sizeof edge / sizeof *edge; k++)
            yv[n++] = edge[k];
        const double gv[] = {1.0, -3.5, 1e30, -1e-30, 0x1p-140, 0.0, INFINITY, NAN};
        jg_tensor *y = jg_full(dt, 1, TU_SHAPE(n), 0.0), *g = jg_full(dt, 1, TU_SHAPE(n), 0.0);
        jg_tensor *want = jg_full(dt, 1, TU_SHAPE(n), 0.0);
        assert_non_null(y);
        assert_non_null(g);
        assert_non_null(want);
        for (int64_t i = 0; i < n; i++) {
            double gi = gv[i % 8];
            if (t) {
                ((double *)jg_tensor_ptr(y))[i] = yv[i];
                ((double *)jg_tensor_ptr(g))[i] = gi;
                ((double *)jg_tensor_ptr(want))[i] = gi * (-(yv[i] * yv[i]) + 1.0);
            } else {
                float yf = (float)yv[i], gf = (float)gi;
                ((float *)jg_tensor_ptr(y))[i] = yf;
                ((float *)jg_tensor_ptr(g))[i] = gf;
                ((float *)jg_tensor_ptr(want))[i] = gf * (-(yf * yf) + 1.0f);
            }
        }
        /* a NaN with a payload and a negative one, as bits */
        if (!t) {
            uint32_t nb[2] = {0x7fc00123u, 0xffc00000u};
            memcpy((float *)jg_tensor_ptr(y) + n - 2, nb, sizeof nb);
            for (int64_t i = n - 2; i < n; i++) {
                float yf = ((float *)jg_tensor_ptr(y))[i], gf = ((float *)jg_tensor_ptr(g))[i];
                ((float *)jg_tensor_ptr(want))[i] = gf * (-(yf * yf) + 1.0f);
            }
        }
        jg_tensor *in[2] = {g, y}, *out;
        TU_SAME(jg_op1(JG_OP_TANH_GRAD, NULL, g, y), want);
        const char *modes[2] = {"interp", "c"};
        for (int m = 0; m < 2; m++) {
            jg_compiled *c = jg_compile(
                p_tanh_grad, NULL, &(jg_compile_options){.backend = modes[m], .fullgraph = true});
            assert_non_null(c);
            if (jg_compiled_call(c, NULL, 0, 2, in, &out) != 1)
                fail_msg("%s: %s", modes[m], jg_last_error());
            TU_SAME(out, want);
            jg_compiled_free(c);
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_math_same_bits),
        TU_TEST(test_math_code_fast_path),
        TU_TEST(test_tanh_grad_small_outputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
