/* Gradient contributions of one input used many times are summed inside the
 * compiled backward graph (jg_autodiff_sum_contribs), in the engine's order,
 * so compiled gradients stay bitwise eager's: chains t = f(t, b) of 1..20
 * steps, f32 and f64, b of shape [N] and [1], both backends; and the cases
 * where the engine already holds a gradient for the input when the compiled
 * node runs (the same compiled call used twice, eager uses of the input
 * after the call, a non-leaf input, autograd.grad, an existing .grad). */
#include "testutil.h"

#include <stdlib.h>

#include "backend/cgen.h"

#include <stdio.h>
#include <string.h>

enum { F_LIN, F_RELU, F_TANH, F_MLP, N_F };

typedef struct chain_args {
    int f;
    int steps;
} chain_args;

static jg_tensor *step(int f, jg_tensor *t, jg_tensor *b) {
    switch (f) {
    case F_LIN:
        return jg_add(jg_mul_scalar(t, 1.5), b);
    case F_RELU:
        return jg_relu(jg_sub(t, b));
    case F_TANH:
        return jg_tanh(jg_mul(t, b));
    default: /* one parameter read by every layer, several times */
        return jg_add(jg_mul(jg_tanh(jg_mul(t, b)), b), jg_mul_scalar(b, 0.25));
    }
}

static int chain(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user;
    (void)n;
    const chain_args *a = args;
    jg_tensor *t = in[0];
    for (int s = 0; s < a->steps && t; s++)
        t = step(a->f, t, in[1]);
    out[0] = t;
    return t ? 1 : -1;
}

static const char *mode_name[3] = {"eager", "interp", "c"};

/* One forward through prog (mode 0) or a compiled one. */
static jg_tensor *call(jg_compiled *c, const chain_args *a, jg_tensor *x, jg_tensor *b) {
    jg_tensor *in[2] = {x, b}, *out[1] = {NULL};
    int rc = c ? jg_compiled_call(c, a, sizeof *a, 2, in, out) : chain(NULL, a, 2, in, out);
    if (rc != 1)
        fail_msg("forward: %s", jg_last_error());
    return out[0];
}

static jg_tensor *leaf(jg_dtype dt, int64_t n, double scale, double shift) {
    jg_tensor *t = jg_randn(dt, 1, &n);
    t = jg_add_scalar(jg_mul_scalar(t, scale), shift);
    t = jg_detach(t);
    jg_set_requires_grad(t, true);
    return jg_keep(t);
}

/* The scenarios around one chain; each returns the gradients of a and b
 * (clones) after its backward. */
enum { S_PLAIN, S_TWICE, S_EAGER_AFTER, S_EAGER_BEFORE, S_NONLEAF, S_GRAD_API, S_EXISTING, N_S };

static void scenario(int s, jg_compiled *c, const chain_args *ca, jg_tensor *a, jg_tensor *b,
                     jg_tensor **ga, jg_tensor **gb) {
    jg_clear_grad(a);
    jg_clear_grad(b);
    jg_tensor *loss = NULL;
    switch (s) {
    case S_PLAIN:
        loss = jg_sum(call(c, ca, a, b));
        break;
    case S_TWICE: /* the second call's node runs first: b holds a gradient then */
        loss = jg_sum(call(c, ca, call(c, ca, a, b), b));
        break;
    case S_EAGER_AFTER: /* an eager use made after the call runs before it in backward */
        loss = jg_add(jg_sum(call(c, ca, a, b)), jg_sum(jg_mul_scalar(b, 3.0)));
        break;
    case S_EAGER_BEFORE:
        loss = jg_add(jg_sum(jg_mul_scalar(b, 3.0)), jg_sum(call(c, ca, a, b)));
        break;
    case S_NONLEAF: { /* b's gradient goes into a node's input buffer */
        jg_tensor *b2 = jg_mul_scalar(b, 0.5);
        loss = jg_add(jg_sum(call(c, ca, a, b2)), jg_sum(jg_mul(b2, b2)));
        break;
    }
    case S_GRAD_API: {
        jg_tensor *l = jg_sum(call(c, ca, call(c, ca, a, b), b));
        jg_tensor *in[2] = {a, b}, *g[2] = {NULL, NULL};
        if (jg_autograd_grad(1, &l, NULL, 2, in, 0, g) < 0)
            fail_msg("grad: %s", jg_last_error());
        *ga = g[0] ? jg_keep(jg_clone(g[0])) : NULL;
        *gb = g[1] ? jg_keep(jg_clone(g[1])) : NULL;
        return;
    }
    default: /* a .grad from an earlier backward: the new sum is added to it */
        if (jg_backward(jg_sum(jg_mul_scalar(b, 2.0)), NULL, 0) < 0)
            fail_msg("backward: %s", jg_last_error());
        loss = jg_sum(call(c, ca, a, b));
        break;
    }
    if (!loss || jg_backward(loss, NULL, 0) < 0)
        fail_msg("backward: %s", jg_last_error());
    *ga = jg_grad(a) ? jg_keep(jg_clone(jg_grad(a))) : NULL;
    *gb = jg_grad(b) ? jg_keep(jg_clone(jg_grad(b))) : NULL;
}

static void same_or_null(jg_tensor *x, jg_tensor *y, const char *what, const chain_args *ca, int s,
                         int m) {
    if (!x || !y) {
        if (x != y)
            fail_msg("%s: f %d steps %d scenario %d %s: one gradient is None", what, ca->f,
                     ca->steps, s, mode_name[m]);
        return;
    }
    TU_SAME(x, y);
}

static void check_chain(const chain_args *ca, jg_dtype dt, int64_t n, int64_t nb, bool with_c,
                        int n_scen) {
    jg_manual_seed((uint64_t)(ca->f * 1000 + ca->steps * 10 + (int)nb));
    jg_tensor *a = leaf(dt, n, 1.0, 0.0);
    jg_tensor *b = leaf(dt, nb, ca->f == F_TANH || ca->f == F_MLP ? 0.5 : 1.0,
                        ca->f == F_TANH || ca->f == F_MLP ? 0.8 : 0.0);
    jg_tensor *ea[N_S], *eb[N_S];
    for (int s = 0; s < n_scen; s++)
        scenario(s, NULL, ca, a, b, &ea[s], &eb[s]);
    for (int m = 1; m <= (with_c ? 2 : 1); m++) {
        jg_compile_options o = {.backend = mode_name[m], .fullgraph = true};
        jg_compiled *c = jg_compile(chain, NULL, &o);
        assert_non_null(c);
        for (int rep = 0; rep < 2; rep++)
            for (int s = 0; s < n_scen; s++) {
                jg_tensor *ga, *gb;
                scenario(s, c, ca, a, b, &ga, &gb);
                same_or_null(ga, ea[s], "grad a", ca, s, m);
                same_or_null(gb, eb[s], "grad b", ca, s, m);
                jg_release(ga);
                jg_release(gb);
            }
        assert_int_equal(jg_compiled_fallbacks(c), 0);
        jg_compiled_free(c);
    }
    for (int s = 0; s < n_scen; s++) {
        jg_release(ea[s]);
        jg_release(eb[s]);
    }
    jg_release(a);
    jg_release(b);
}

/* Every chain length 1..20 on the interpreter (cheap), b of shape [N].
 * Under valgrind (scripts/memcheck.sh sets JITGRAD_MEMCHECK) the lengths
 * 1-3, 16 and 20 only: the same code paths, a quarter of the work. */
static void test_accum_chains_interp(void **state) {
    (void)state;
    bool memcheck = getenv("JITGRAD_MEMCHECK") != NULL;
    for (int f = 0; f < N_F; f++)
        for (int steps = 1; steps <= 20; steps++)
            for (int d = 0; d < 2 && !(memcheck && steps > 3 && steps != 16 && steps != 20); d++) {
                chain_args ca = {f, steps};
                check_chain(&ca, d ? JG_F64 : JG_F32, 257, 257, false, N_S);
            }
}

/* b of shape [1]: each contribution is a reduction; their sum is [1]. */
static void test_accum_chains_broadcast_b(void **state) {
    (void)state;
    static const int steps[] = {1, 2, 5, 16};
    for (int f = 0; f < N_F; f++)
        for (int i = 0; i < 4; i++)
            for (int d = 0; d < 2; d++) {
                chain_args ca = {f, steps[i]};
                check_chain(&ca, d ? JG_F64 : JG_F32, 300, 1, jg_compile_backend_available("c"),
                            i == 3 ? N_S : 2);
            }
}

/* The c backend: every generated loop sums b's contributions itself. */
static void test_accum_chains_c(void **state) {
    (void)state;
    if (!jg_compile_backend_available("c")) {
        print_message("skipping: the c backend is not available here: %s\n", jg_last_error());
        skip();
    }
    static const int steps[] = {1, 2, 3, 16, 20};
    for (int f = 0; f < N_F; f++)
        for (int i = 0; i < 5; i++)
            for (int d = 0; d < 2; d++) {
                chain_args ca = {f, steps[i]};
                /* every scenario on the long chains, the plain ones elsewhere */
                check_chain(&ca, d ? JG_F64 : JG_F32, 1000, 1000, true, i >= 3 ? N_S : 2);
            }
}

/* ---- a custom function's body is fused under c like the rest */

/* y = tanh(x * w) + w * 0.5 */
static int shift_tanh_fwd(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)n;
    jg_ctx_save_for_backward(ctx, 2, in);
    out[0] = jg_add(jg_tanh(jg_mul(in[0], in[1])), jg_mul_scalar(in[1], 0.5));
    return out[0] ? 1 : -1;
}

static int shift_tanh_bwd(jg_ctx *ctx, int n_out, jg_tensor *const *g, int n_in, jg_tensor **din) {
    (void)n_out;
    jg_tensor *x = jg_ctx_saved(ctx, 0), *w = jg_ctx_saved(ctx, 1);
    jg_tensor *y = jg_tanh(jg_mul(x, w));
    jg_tensor *dy = jg_mul(g[0], jg_add_scalar(jg_neg(jg_mul(y, y)), 1.0));
    din[0] = jg_mul(dy, w);
    din[1] = jg_add(jg_mul(dy, x), jg_mul_scalar(g[0], 0.5));
    return n_in;
}

static const jg_function shift_tanh = {"ShiftTanh", shift_tanh_fwd, shift_tanh_bwd, NULL};

static int custom_chain(void *user, const void *args, int n, jg_tensor *const *in,
                        jg_tensor **out) {
    (void)user, (void)n;
    jg_tensor *t = in[0];
    for (int s = 0; s < *(const int *)args && t; s++) {
        jg_tensor *o[1], *io[2] = {t, in[1]};
        t = jg_apply(&shift_tanh, 2, io, NULL, 0, o) == 1 ? o[0] : NULL;
    }
    out[0] = t;
    return t ? 1 : -1;
}

static void test_custom_body_fused(void **state) {
    (void)state;
    if (!jg_compile_backend_available("c")) {
        print_message("skipping: the c backend is not available here: %s\n", jg_last_error());
        skip();
    }
    for (int d = 0; d < 2; d++) {
        jg_dtype dt = d ? JG_F64 : JG_F32;
        int steps = 6;
        jg_manual_seed(11);
        jg_tensor *a = leaf(dt, 300, 1.0, 0.0), *b = leaf(dt, 300, 0.5, 0.8);
        jg_tensor *in[2] = {a, b}, *out[1];
        assert_int_equal(custom_chain(NULL, &steps, 2, in, out), 1);
        jg_tensor *eo = jg_keep(jg_clone(out[0]));
        assert_int_equal(jg_backward(jg_sum(out[0]), NULL, 0), 0);
        jg_tensor *ega = jg_keep(jg_clone(jg_grad(a))), *egb = jg_keep(jg_clone(jg_grad(b)));
        for (int m = 1; m <= 2; m++) {
            jg_compile_options o = {.backend = mode_name[m], .fullgraph = true};
            jg_compiled *c = jg_compile(custom_chain, NULL, &o);
            assert_non_null(c);
            for (int rep = 0; rep < 2; rep++) {
                jg_clear_grad(a);
                jg_clear_grad(b);
                if (jg_compiled_call(c, &steps, sizeof steps, 2, in, out) != 1)
                    fail_msg("%s: %s", mode_name[m], jg_last_error());
                if (m == 2 && rep == 0) {
                    /* the forward (the last plan made): the six calls' bodies
                     * (mul, tanh, mul_scalar, add each) in one loop */
                    int n_loops = 0, n_fused = 0;
                    jg_cgen_last_stats(&n_loops, &n_fused, NULL);
                    assert_int_equal(n_loops, 1);
                    assert_int_equal(n_fused, 4 * steps);
                }
                TU_SAME(out[0], eo);
                assert_int_equal(jg_backward(jg_sum(out[0]), NULL, 0), 0);
                TU_SAME(jg_grad(a), ega);
                TU_SAME(jg_grad(b), egb);
            }
            jg_compiled_free(c);
        }
        jg_clear_grad(a);
        jg_clear_grad(b);
        jg_release(eo), jg_release(ega), jg_release(egb), jg_release(a), jg_release(b);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_accum_chains_interp),
        TU_TEST(test_accum_chains_broadcast_b),
        TU_TEST(test_accum_chains_c),
        TU_TEST(test_custom_body_fused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
