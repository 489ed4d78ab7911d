/* Custom functions under jg_compile: what a forward saves or keeps for its
 * backward (inputs, outputs, intermediates, views, tensors kept in the ctx
 * state), multi-output functions chained, and errors of a backward callback
 * that must wait for backward.  Every program is checked against eager:
 * outputs and gradients bitwise, on both backends, traced more than once. */
#include "testutil.h"
#include "testutil_fns.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ functions */

/* y = exp(2x); args: what forward saves (SAVE_*), backward rebuilds dy/dx
 * = 2 exp(2x) from it */
enum { SAVE_INPUT, SAVE_OUTPUT, SAVE_INTERMEDIATE, SAVE_VIEW, SAVE_ALL, SAVE_STATE, SAVE_N };

static void release_state(void *p) {
    jg_release(p);
}

static int exp2_forward(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)n;
    int mode = *(const int *)jg_ctx_args(ctx);
    jg_tensor *x = in[0], *t = jg_mul_scalar(x, 2.0), *y = jg_exp(t);
    jg_tensor *v = jg_slice(x, 0, 0, jg_shape(x)[0]); /* a view of the input */
    if (!t || !y || !v)
        return -1;
    jg_tensor *all[4] = {x, y, t, v};
    int rc = 0;
    switch (mode) {
    case SAVE_INPUT:
    case SAVE_OUTPUT:
    case SAVE_INTERMEDIATE:
    case SAVE_VIEW:
        rc = jg_ctx_save_for_backward(ctx, 1, &all[mode]);
        break;
    case SAVE_ALL:
        rc = jg_ctx_save_for_backward(ctx, 4, all);
        break;
    case SAVE_STATE: /* kept in the ctx, not saved (PyTorch: ctx.t = t) */
        jg_ctx_set_state(ctx, jg_retain(t), release_state);
        break;
    }
    out[0] = y;
    return rc < 0 ? -1 : 1;
}

static int exp2_backward(jg_ctx *ctx, int n_out, jg_tensor *const *g, int n_in, jg_tensor **din) {
    (void)n_out;
    int mode = *(const int *)jg_ctx_args(ctx);
    jg_tensor *d = NULL;
    switch (mode) {
    case SAVE_INPUT:
    case SAVE_VIEW:
        d = jg_exp(jg_mul_scalar(jg_ctx_saved(ctx, 0), 2.0));
        break;
    case SAVE_OUTPUT:
        d = jg_ctx_saved(ctx, 0);
        break;
    case SAVE_INTERMEDIATE:
        d = jg_exp(jg_ctx_saved(ctx, 0));
        break;
    case SAVE_ALL: /* reads all four */
        d = jg_mul(jg_ctx_saved(ctx, 1),
                   jg_exp(jg_sub(jg_ctx_saved(ctx, 2), jg_mul_scalar(jg_ctx_saved(ctx, 3), 2.0))));
        d = jg_mul(d, jg_exp(jg_sub(jg_ctx_saved(ctx, 0), jg_ctx_saved(ctx, 0))));
        break;
    case SAVE_STATE:
        d = jg_exp(jg_ctx_state(ctx));
        break;
    }
    din[0] = d ? jg_mul(g[0], jg_mul_scalar(d, 2.0)) : NULL;
    return din[0] ? n_in : -1;
}

static const jg_function exp2_fn = {"Exp2", exp2_forward, exp2_backward, NULL};

/* PyTorch's MyCube: (x^3, 3x^2), saves x and the second output */
static int cube_forward(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)n;
    jg_tensor *x = in[0];
    out[0] = jg_pow_scalar(x, 3.0);
    out[1] = jg_mul_scalar(jg_pow_scalar(x, 2.0), 3.0);
    jg_tensor *s[2] = {x, out[1]};
    return out[0] && out[1] && jg_ctx_save_for_backward(ctx, 2, s) == 0 ? 2 : -1;
}

static int cube_backward(jg_ctx *ctx, int n_out, jg_tensor *const *g, int n_in, jg_tensor **din) {
    (void)n_out;
    jg_tensor *x = jg_ctx_saved(ctx, 0), *dx = jg_ctx_saved(ctx, 1);
    din[0] = jg_add(jg_mul(g[0], dx), jg_mul(jg_mul_scalar(g[1], 6.0), x));
    return din[0] ? n_in : -1;
}

static const jg_function cube_fn = {"MyCube", cube_forward, cube_backward, NULL};

/* (2x, 3x) with materialize_grads off; args: the count backward returns
 * (PyTorch's "incorrect number of gradients" when it is not 1) */
static int two_forward(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)n;
    jg_ctx_set_materialize_grads(ctx, false);
    out[0] = jg_mul_scalar(in[0], 2.0);
    out[1] = jg_mul_scalar(in[0], 3.0);
    return out[0] && out[1] ? 2 : -1;
}

static int two_backward(jg_ctx *ctx, int n_out, jg_tensor *const *g, int n_in, jg_tensor **din) {
    (void)n_out, (void)n_in;
    int count = *(const int *)jg_ctx_args(ctx);
    if (!g[1]) /* a user backward that needs both gradients */
        return jg_set_error("TwoBackward: the second gradient is missing");
    din[0] = jg_add(jg_mul_scalar(g[0], 2.0), jg_mul_scalar(g[1], 3.0));
    return din[0] ? count : -1;
}

static const jg_function two_fn = {"Two", two_forward, two_backward, NULL};

/* x * t, where t reaches forward through the args (a pointer), not as a
 * tensor argument; backward: g * t (kept in the state) */
static int via_args_forward(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)n;
    jg_tensor *t = *(jg_tensor *const *)jg_ctx_args(ctx);
    jg_ctx_set_state(ctx, jg_retain(t), release_state);
    out[0] = jg_mul(in[0], t);
    return out[0] ? 1 : -1;
}

static int via_args_backward(jg_ctx *ctx, int n_out, jg_tensor *const *g, int n_in,
                             jg_tensor **din) {
    (void)n_out;
    din[0] = jg_mul(g[0], jg_ctx_state(ctx));
    return din[0] ? n_in : -1;
}

static const jg_function via_args_fn = {"ViaArgs", via_args_forward, via_args_backward, NULL};

/* x * t, t reached through the args and saved; backward: g * tanh(t) */
static int args_saved_forward(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)n;
    jg_tensor *t = *(jg_tensor *const *)jg_ctx_args(ctx);
    if (jg_ctx_save_for_backward(ctx, 1, &t) < 0)
        return -1;
    out[0] = jg_mul(in[0], t);
    return out[0] ? 1 : -1;
}

static int args_saved_backward(jg_ctx *ctx, int n_out, jg_tensor *const *g, int n_in,
                               jg_tensor **din) {
    (void)n_out;
    din[0] = jg_mul(g[0], jg_tanh(jg_ctx_saved(ctx, 0)));
    return din[0] ? n_in : -1;
}

static const jg_function args_saved_fn = {"ArgsSaved", args_saved_forward, args_saved_backward,
                                          NULL};

/* ------------------------------------------------------------- programs */

/* sum(Exp2(x) * Exp2(tanh(x))): one call on a graph input, one on a node */
static int p_exp2(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)n;
    jg_tensor *a = in[0], *b = jg_tanh(in[0]);
    jg_tensor *ya = tf_apply1(&exp2_fn, 1, &a, args, sizeof(int));
    jg_tensor *yb = tf_apply1(&exp2_fn, 1, &b, args, sizeof(int));
    out[0] = jg_sum(jg_mul(ya, yb));
    return out[0] ? 1 : -1;
}

/* y, _ = MyCube(x); z, _ = MyCube(y); z (PyTorch's chained two-output test) */
static int p_cube2(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *o1[JG_MAX_OUTPUTS], *o2[JG_MAX_OUTPUTS];
    if (jg_apply(&cube_fn, 1, in, NULL, 0, o1) < 0 || jg_apply(&cube_fn, 1, o1, NULL, 0, o2) < 0)
        return -1;
    out[0] = jg_sum(o2[0]);
    return out[0] ? 1 : -1;
}

/* a, b = Two(x); args: the count; returns a + b, or a alone when user is set */
static int p_two(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)n;
    jg_tensor *o[JG_MAX_OUTPUTS];
    if (jg_apply(&two_fn, 1, in, args, sizeof(int), o) < 0)
        return -1;
    out[0] = jg_sum(user ? o[0] : jg_add(o[0], o[1]));
    return out[0] ? 1 : -1;
}

/* sum(ViaArgs(x; tanh(x))) */
static int p_via_args(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *t = jg_tanh(in[0]);
    out[0] = jg_sum(tf_apply1(&via_args_fn, 1, in, &t, sizeof t));
    return out[0] ? 1 : -1;
}

/* sum(ArgsSaved(x; exp(x))) */
static int p_args_saved(void *user, const void *args, int n, jg_tensor *const *in,
                        jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *t = jg_exp(in[0]);
    out[0] = jg_sum(tf_apply1(&args_saved_fn, 1, in, &t, sizeof t));
    return out[0] ? 1 : -1;
}

/* sum(x * t), where t = exp(x) is made by the first call and kept in *user:
 * a traced tensor that escapes its trace */
static int p_escape(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    jg_tensor **keep = user;
    if (!*keep)
        *keep = jg_retain(jg_exp(in[0]));
    jg_tensor *m = jg_mul(in[0], *keep);
    out[0] = m ? jg_sum(m) : NULL;
    return out[0] ? 1 : -1;
}

/* ---------------------------------------------------------------- check */

static jg_tensor *leaf(int64_t n, uint64_t seed) {
    jg_manual_seed(seed);
    jg_tensor *x = jg_mul_scalar(jg_randn(JG_F32, 1, TU_SHAPE(n)), 0.5);
    jg_set_requires_grad(x, true);
    return x;
}

/* Runs prog on a fresh [n] leaf, eagerly or through c, and returns the
 * output and the leaf's gradient (kept). */
static int run_once(jg_compiled *c, jg_program_fn prog, void *user, const void *args,
                    size_t args_size, int64_t n, jg_tensor **y, jg_tensor **grad) {
    jg_tensor *x = leaf(n, 7 + (uint64_t)n), *out[JG_MAX_OUTPUTS];
    int k = c ? jg_compiled_call(c, args, args_size, 1, &x, out) : prog(user, args, 1, &x, out);
    if (k < 1 || jg_backward(out[0], NULL, 0) < 0)
        return -1;
    *y = jg_keep(out[0]);
    *grad = jg_grad(x) ? jg_retain(jg_grad(x)) : NULL;
    return 0;
}

static const char *backends[] = {"interp", "c"};

/* Compiled == eager (output and gradient, bitwise) for shapes [3] then [5]
 * (a second trace) on every backend, and again through a second compiled
 * wrapper of the same program. */
static void check_matches_eager(jg_program_fn prog, void *user, const void *args, size_t size,
                                bool fullgraph) {
    for (int b = 0; b < 2; b++) {
        if (b == 1 && !jg_compile_backend_available("c"))
            continue;
        jg_compile_options o = {.backend = backends[b], .fullgraph = fullgraph};
        for (int w = 0; w < 2; w++) {
            jg_compiled *c = jg_compile(prog, user, &o);
            assert_non_null(c);
            for (int64_t n = 3; n <= 5; n += 2) {
                jg_tensor *ye, *ge, *yc, *gc;
                assert_int_equal(run_once(NULL, prog, user, args, size, n, &ye, &ge), 0);
                if (run_once(c, prog, user, args, size, n, &yc, &gc) < 0)
                    fail_msg("%s (n %lld): %s", backends[b], (long long)n, jg_last_error());
                TU_SAME(yc, ye);
                assert_non_null(gc);
                TU_SAME(gc, ge);
                jg_release(ye), jg_release(ge), jg_release(yc), jg_release(gc);
            }
            jg_compiled_free(c);
        }
    }
}

/* ---------------------------------------------------------------- tests */

/* A saved tensor the forward created (its output, an intermediate) made the
 * node's saved-value outputs carry uninitialised metadata: the second trace
 * crashed in autodiff.  Every kind of saved tensor, traced again. */
static void test_saved_created_tensor_traced_twice(void **state) {
    (void)state;
    for (int mode = SAVE_INPUT; mode <= SAVE_ALL; mode++)
        for (int fg = 0; fg < 2; fg++)
            check_matches_eager(p_exp2, NULL, &mode, sizeof mode, fg);
}

/* MyCube twice in a chain under fullgraph: PyTorch's gradient for x = 1 is
 * 9 x^8 = 9 (and eager == compiled bitwise for random x). */
static void test_two_output_function_chained_fullgraph(void **state) {
    (void)state;
    check_matches_eager(p_cube2, NULL, NULL, 0, true);
    jg_compiled *c = jg_compile(p_cube2, NULL, &(jg_compile_options){.fullgraph = true});
    jg_tensor *x = jg_full(JG_F32, 1, TU_SHAPE(2), 1.0), *out[JG_MAX_OUTPUTS];
    jg_set_requires_grad(x, true);
    assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, out), 1);
    assert_int_equal(jg_backward(out[0], NULL, 0), 0);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(2), TU_VALS(9, 9), 0);
    jg_compiled_free(c);
}

/* A tensor the forward keeps in the ctx state (not saved) and the backward
 * reads: eager works, so compiled must too (it is saved implicitly). */
static void test_state_tensor_read_in_backward(void **state) {
    (void)state;
    int mode = SAVE_STATE;
    for (int fg = 0; fg < 2; fg++)
        check_matches_eager(p_exp2, NULL, &mode, sizeof mode, fg);
}

/* A backward that returns the wrong number of gradients fails only when
 * backward runs, with eager's message; the compiled forward succeeds. */
static void test_backward_error_waits_for_backward(void **state) {
    (void)state;
    int count = 2;
    for (int b = 0; b < 2; b++) {
        if (b == 1 && !jg_compile_backend_available("c"))
            continue;
        for (int fg = 0; fg < 2; fg++) {
            jg_compile_options o = {.backend = backends[b], .fullgraph = fg};
            jg_compiled *c = jg_compile(p_two, NULL, &o);
            jg_tensor *x = leaf(3, 1), *out[JG_MAX_OUTPUTS];
            if (jg_compiled_call(c, &count, sizeof count, 1, &x, out) != 1)
                fail_msg("%s: forward failed: %s", backends[b], jg_last_error());
            assert_int_equal(jg_backward(out[0], NULL, 0), -1);
            TU_ERROR("function TwoBackward returned an incorrect number of gradients (expected "
                     "1, got 2)");
            jg_compiled_free(c);
        }
    }
}

/* With materialize_grads off, a backward that fails when one output's
 * gradient is missing fails in backward (as eager), not while compiling,
 * and works when the gradient arrives. */
static void test_backward_error_depends_on_arrived_grads(void **state) {
    (void)state;
    int count = 1;
    check_matches_eager(p_two, NULL, &count, sizeof count, true);
    for (int b = 0; b < 2; b++) {
        if (b == 1 && !jg_compile_backend_available("c"))
            continue;
        jg_compile_options o = {.backend = backends[b], .fullgraph = true};
        jg_compiled *c = jg_compile(p_two, (void *)1, &o);
        jg_tensor *x = leaf(3, 1), *out[JG_MAX_OUTPUTS];
        if (jg_compiled_call(c, &count, sizeof count, 1, &x, out) != 1)
            fail_msg("%s: forward failed: %s", backends[b], jg_last_error());
        assert_int_equal(jg_backward(out[0], NULL, 0), -1);
        TU_ERROR("TwoBackward: the second gradient is missing");
        jg_compiled_free(c);
    }
}

/* A traced tensor that reaches a function other than as a tensor argument
 * is a lifted slot of its node when forward reads it; one the backward
 * reads (kept in the state) cannot be fed to the traced backward: a graph
 * break (eager fallback, equal to eager), and with fullgraph a clear error
 * naming the function. */
static void test_traced_tensor_outside_arguments_breaks(void **state) {
    (void)state;
    jg_compiled *c = jg_compile(p_via_args, NULL, NULL);
    jg_tensor *ye, *ge, *yc, *gc;
    assert_int_equal(run_once(NULL, p_via_args, NULL, NULL, 0, 3, &ye, &ge), 0);
    assert_int_equal(run_once(c, p_via_args, NULL, NULL, 0, 3, &yc, &gc), 0);
    TU_SAME(yc, ye);
    TU_SAME(gc, ge);
    assert_int_equal(jg_compiled_fallbacks(c), 1);
    jg_compiled_free(c);
    c = jg_compile(p_via_args, NULL, &(jg_compile_options){.fullgraph = true});
    assert_int_equal(run_once(c, p_via_args, NULL, NULL, 0, 3, &yc, &gc), -1);
    TU_ERROR("ViaArgs.backward used a traced tensor that is not one of its tensor arguments");
    jg_compiled_free(c);
    jg_release(ye), jg_release(ge), jg_release(yc), jg_release(gc);
}

/* A traced tensor the forward reaches through its args (and saves) is a
 * lifted slot of the node: compiled == eager with fullgraph (it was a graph
 * break); it gets no gradient through the call, as in eager mode. */
static void test_traced_tensor_in_args_lifted(void **state) {
    (void)state;
    check_matches_eager(p_args_saved, NULL, NULL, 0, true);
}

/* A traced tensor kept past its trace (and its graph) is refused with a
 * clear error when a later trace uses it; it used to be read through the
 * freed graph. */
static void test_escaped_traced_tensor_refused(void **state) {
    (void)state;
    jg_tensor *kept = NULL, *x = jg_full(JG_F32, 1, TU_SHAPE(3), 1.0), *out[JG_MAX_OUTPUTS];
    jg_compiled *c = jg_compile(p_escape, &kept, NULL);
    assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, out), 1);
    jg_compiled_free(c); /* the graph kept's value belonged to is gone */
    c = jg_compile(p_escape, &kept, NULL);
    assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, out), -1);
    TU_ERROR("a traced tensor of another trace (an enclosing one, or one that has ended)");
    jg_compiled_free(c);
    jg_release(kept);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_saved_created_tensor_traced_twice),
        TU_TEST(test_two_output_function_chained_fullgraph),
        TU_TEST(test_state_tensor_read_in_backward),
        TU_TEST(test_backward_error_waits_for_backward),
        TU_TEST(test_backward_error_depends_on_arrived_grads),
        TU_TEST(test_traced_tensor_outside_arguments_breaks),
        TU_TEST(test_escaped_traced_tensor_refused),
        TU_TEST(test_traced_tensor_in_args_lifted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
