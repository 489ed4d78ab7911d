/* Compiled programs with many outputs, writes and gradient-carrying inputs:
 * no fixed cap (JG_MAX_OUTPUTS bounds only a custom Function's own
 * outputs).  Each case runs a few calls and compares every output, written
 * tensor and gradient bitwise with the same program run eagerly, on both
 * backends, as one compiled graph (fullgraph, no fallback). */
#include "testutil.h"

#include <stdlib.h>

enum { N_OUT = 100, N_WRITE = 100, N_LEAF = 80, CALLS = 3 };

static const char *backends[] = {"interp", "c"};

/* --------------------------------------------------------- many outputs */

/* out[k] = tanh(x * (k + 1)) + k: N_OUT distinct node outputs. */
static int p_many_outputs(void *user, const void *args, int n, jg_tensor *const *in,
                          jg_tensor **out) {
    (void)user, (void)args, (void)n;
    for (int k = 0; k < N_OUT; k++)
        if (!(out[k] = jg_add_scalar(jg_tanh(jg_mul_scalar(in[0], k + 1.0)), k)))
            return -1;
    return N_OUT;
}

/* the backward of a few outputs (a partial mask: outputs 0, 50 and 99 get a
 * gradient, the other 97 none), then of the sum of all of them */
static void many_outputs_backward(jg_tensor *const *out, jg_tensor *x, jg_tensor **g_part,
                                  jg_tensor **g_all) {
    jg_tensor *part = jg_add(jg_add(jg_sum(out[0]), jg_sum(out[50])), jg_sum(out[99]));
    assert_int_equal(jg_backward(part, NULL, JG_RETAIN_GRAPH), 0);
    *g_part = jg_keep(jg_clone(jg_grad(x)));
    jg_tensor *all = jg_sum(out[0]);
    for (int k = 1; k < N_OUT; k++)
        all = jg_add(all, jg_sum(out[k]));
    assert_int_equal(jg_backward(all, NULL, 0), 0);
    *g_all = jg_keep(jg_clone(jg_grad(x)));
}

static void test_compile_many_outputs_match_eager(void **state) {
    (void)state;
    jg_tensor **eo = calloc(N_OUT, sizeof *eo), **co = calloc(N_OUT, sizeof *co);
    assert_non_null(eo);
    assert_non_null(co);
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        jg_compile_options o = {.backend = backends[b], .fullgraph = true};
        jg_compiled *c = jg_compile(p_many_outputs, NULL, &o);
        assert_non_null(c);
        for (int call = 0; call < CALLS; call++) {
            jg_scope_push();
            jg_manual_seed(100 + call);
            jg_tensor *xe = jg_randn(JG_F32, 2, TU_SHAPE(3, 5)), *xc = jg_clone(xe);
            jg_set_requires_grad(xe, true);
            jg_set_requires_grad(xc, true);
            assert_int_equal(p_many_outputs(NULL, NULL, 1, &xe, eo), N_OUT);
            assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &xc, co), N_OUT);
            for (int k = 0; k < N_OUT; k++)
                TU_SAME(eo[k], co[k]);
            jg_tensor *ep, *ea, *cp, *ca;
            many_outputs_backward(eo, xe, &ep, &ea);
            many_outputs_backward(co, xc, &cp, &ca);
            TU_SAME(ep, cp);
            TU_SAME(ea, ca);
            jg_release(ep), jg_release(ea), jg_release(cp), jg_release(ca);
            jg_scope_pop();
        }
        assert_int_equal(jg_compiled_entries(c), 1);
        assert_int_equal(jg_compiled_fallbacks(c), 0);
        jg_compiled_free(c);
    }
    free(eo);
    free(co);
}

/* ------------------------------------------- many captured tensors written */

typedef struct {
    jg_tensor *w[N_WRITE];
} bank;

static void bank_init(bank *k) {
    for (int i = 0; i < N_WRITE; i++)
        k->w[i] = jg_keep(jg_full(JG_F32, 1, TU_SHAPE(4), i * 0.25));
}

static void bank_free(bank *k) {
    for (int i = 0; i < N_WRITE; i++)
        jg_release(k->w[i]);
}

/* w[i] += x * (i + 1); w[i] *= 0.5 (two writes each), and returns sum(w[0]) */
static int p_write_captured(void *user, const void *args, int n, jg_tensor *const *in,
                            jg_tensor **out) {
    (void)args, (void)n;
    bank *k = user;
    for (int i = 0; i < N_WRITE; i++)
        if (jg_add_(k->w[i], jg_mul_scalar(in[0], i + 1.0)) < 0 || jg_mul_scalar_(k->w[i], 0.5) < 0)
            return -1;
    return (out[0] = jg_sum(k->w[0])) ? 1 : -1;
}

static void test_compile_many_captured_writes_match_eager(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        bank e, k;
        bank_init(&e);
        bank_init(&k);
        jg_compile_options o = {.backend = backends[b], .fullgraph = true};
        jg_compiled *c = jg_compile(p_write_captured, &k, &o);
        assert_non_null(c);
        for (int call = 0; call < CALLS; call++) {
            jg_scope_push();
            jg_manual_seed(200 + call);
            jg_tensor *x = jg_randn(JG_F32, 1, TU_SHAPE(4)), *eo[1], *co[1];
            assert_int_equal(p_write_captured(&e, NULL, 1, &x, eo), 1);
            assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, co), 1);
            TU_SAME(eo[0], co[0]);
            for (int i = 0; i < N_WRITE; i++) {
                TU_SAME(e.w[i], k.w[i]);
                assert_int_equal(jg_version(e.w[i]), jg_version(k.w[i]));
            }
            jg_scope_pop();
        }
        assert_int_equal(jg_compiled_entries(c), 1);
        assert_int_equal(jg_compiled_fallbacks(c), 0);
        jg_compiled_free(c);
        bank_free(&e);
        bank_free(&k);
    }
}

/* every input written in place: N_WRITE inputs, N_WRITE write-backs */
static int p_write_inputs(void *user, const void *args, int n, jg_tensor *const *in,
                          jg_tensor **out) {
    (void)user, (void)args;
    for (int i = 0; i < n; i++)
        if (jg_mul_scalar_(in[i], i + 2.0) < 0)
            return -1;
    (void)out;
    return 0;
}

static void test_compile_many_inputs_written_match_eager(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        bank e, k;
        bank_init(&e);
        bank_init(&k);
        jg_compile_options o = {.backend = backends[b], .fullgraph = true};
        jg_compiled *c = jg_compile(p_write_inputs, NULL, &o);
        assert_non_null(c);
        jg_tensor *none[1];
        for (int call = 0; call < CALLS; call++) {
            assert_int_equal(p_write_inputs(NULL, NULL, N_WRITE, e.w, none), 0);
            assert_int_equal(jg_compiled_call(c, NULL, 0, N_WRITE, k.w, none), 0);
            for (int i = 0; i < N_WRITE; i++) {
                TU_SAME(e.w[i], k.w[i]);
                assert_int_equal(jg_version(e.w[i]), jg_version(k.w[i]));
            }
        }
        assert_int_equal(jg_compiled_entries(c), 1);
        assert_int_equal(jg_compiled_fallbacks(c), 0);
        jg_compiled_free(c);
        bank_free(&e);
        bank_free(&k);
    }
}

/* ------------------------------------------------ many leaves with grads */

typedef struct {
    jg_tensor *p[N_LEAF];
    bool backward_inside; /* the program runs jg_backward itself (.grad sets) */
} leaves;

static void leaves_init(leaves *l) {
    jg_manual_seed(7);
    for (int i = 0; i < N_LEAF; i++) {
        l->p[i] = jg_keep(jg_randn(JG_F32, 1, TU_SHAPE(6)));
        jg_set_requires_grad(l->p[i], true);
    }
}

static void leaves_free(leaves *l) {
    for (int i = 0; i < N_LEAF; i++)
        jg_release(l->p[i]);
}

/* loss = sum_i sum(sin(p[i]) * x): half of the leaves are call inputs, the
 * other half captured */
static int p_leaves(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    leaves *l = user;
    jg_tensor *loss = NULL;
    for (int i = 0; i < N_LEAF; i++) {
        jg_tensor *p = i < N_LEAF / 2 ? in[1 + i] : l->p[i];
        jg_tensor *t = jg_sum(jg_mul(jg_sin(p), in[0]));
        loss = loss ? jg_add(loss, t) : t;
    }
    if (!loss || (l->backward_inside && jg_backward(loss, NULL, 0) < 0))
        return -1;
    out[0] = loss;
    return 1;
}

static void run_leaves(bool backward_inside, const char *backend) {
    leaves e, k;
    leaves_init(&e);
    leaves_init(&k);
    e.backward_inside = k.backward_inside = backward_inside;
    jg_compile_options o = {.backend = backend, .fullgraph = true};
    jg_compiled *c = jg_compile(p_leaves, &k, &o);
    assert_non_null(c);
    jg_tensor *ein[1 + N_LEAF / 2], *kin[1 + N_LEAF / 2];
    for (int i = 0; i < N_LEAF / 2; i++)
        ein[1 + i] = e.p[i], kin[1 + i] = k.p[i];
    for (int call = 0; call < CALLS; call++) {
        jg_scope_push();
        jg_manual_seed(300 + call);
        ein[0] = kin[0] = jg_randn(JG_F32, 1, TU_SHAPE(6));
        jg_tensor *eo[1], *co[1];
        assert_int_equal(p_leaves(&e, NULL, 1 + N_LEAF / 2, ein, eo), 1);
        assert_int_equal(jg_compiled_call(c, NULL, 0, 1 + N_LEAF / 2, kin, co), 1);
        TU_SAME(eo[0], co[0]);
        if (!backward_inside) {
            assert_true(jg_requires_grad(co[0]));
            assert_int_equal(jg_backward(eo[0], NULL, 0), 0);
            assert_int_equal(jg_backward(co[0], NULL, 0), 0);
        }
        for (int i = 0; i < N_LEAF; i++) {
            assert_non_null(jg_grad(k.p[i]));
            TU_SAME(jg_grad(e.p[i]), jg_grad(k.p[i])); /* (accumulated over the calls) */
        }
        jg_scope_pop();
    }
    assert_int_equal(jg_compiled_entries(c), backward_inside ? 2 : 1);
    assert_int_equal(jg_compiled_fallbacks(c), 0);
    jg_compiled_free(c);
    leaves_free(&e);
    leaves_free(&k);
}

/* the compiled call's node: N_LEAF edges, N_LEAF .grads from one backward */
static void test_compile_many_leaves_backward_match_eager(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++)
        if (jg_compile_backend_available(backends[b]))
            run_leaves(false, backends[b]);
}

/* jg_backward inside the program: N_LEAF .grad writes back per call */
static void test_compile_many_grad_sets_match_eager(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++)
        if (jg_compile_backend_available(backends[b]))
            run_leaves(true, backends[b]);
}

/* ------------------------- many inputs with several gradient contributions */

enum { N_TWICE = 70 };

/* sum_i sum(sin(p[i]) * x) + sum(p[i] * x): every p[i] gets two
 * contributions through the call's node, summed inside the backward graph
 * (one group per input, more groups than a 64-bit mask has bits) */
static int p_twice(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *loss = NULL;
    for (int i = 0; i < N_TWICE; i++) {
        jg_tensor *t =
            jg_add(jg_sum(jg_mul(jg_sin(in[1 + i]), in[0])), jg_sum(jg_mul(in[1 + i], in[0])));
        loss = loss ? jg_add(loss, t) : t;
    }
    return (out[0] = loss) ? 1 : -1;
}

static void test_compile_many_summed_contributions_match_eager(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        jg_compile_options o = {.backend = backends[b], .fullgraph = true};
        jg_compiled *c = jg_compile(p_twice, NULL, &o);
        assert_non_null(c);
        jg_tensor *ein[1 + N_TWICE], *kin[1 + N_TWICE];
        jg_manual_seed(9);
        for (int i = 0; i < N_TWICE; i++) {
            ein[1 + i] = jg_randn(JG_F32, 1, TU_SHAPE(5));
            kin[1 + i] = jg_clone(ein[1 + i]);
            jg_set_requires_grad(ein[1 + i], true);
            jg_set_requires_grad(kin[1 + i], true);
        }
        for (int call = 0; call < CALLS; call++) {
            jg_scope_push();
            ein[0] = kin[0] = jg_randn(JG_F32, 1, TU_SHAPE(5));
            jg_tensor *eo[1], *co[1];
            assert_int_equal(p_twice(NULL, NULL, 1 + N_TWICE, ein, eo), 1);
            assert_int_equal(jg_compiled_call(c, NULL, 0, 1 + N_TWICE, kin, co), 1);
            TU_SAME(eo[0], co[0]);
            /* (from the second call on, the engine holds .grad already) */
            assert_int_equal(jg_backward(eo[0], NULL, 0), 0);
            assert_int_equal(jg_backward(co[0], NULL, 0), 0);
            for (int i = 0; i < N_TWICE; i++)
                TU_SAME(jg_grad(ein[1 + i]), jg_grad(kin[1 + i]));
            jg_scope_pop();
        }
        assert_int_equal(jg_compiled_fallbacks(c), 0);
        jg_compiled_free(c);
    }
}

/* ------------------------------------- many custom functions made opaque */

enum { N_FN = 20 };

/* (2x, 3x) with materialize_grads off; backward needs both gradients */
static int two_forward(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)n;
    jg_ctx_set_materialize_grads(ctx, false);
    out[0] = jg_mul_scalar(in[0], 2.0);
    out[1] = jg_mul_scalar(in[0], 3.0);
    return out[0] && out[1] ? 2 : -1;
}

static int two_backward(jg_ctx *ctx, int n_out, jg_tensor *const *g, int n_in, jg_tensor **din) {
    (void)ctx, (void)n_out, (void)n_in;
    if (!g[1])
        return jg_set_error("TwoBackward: the second gradient is missing");
    din[0] = jg_add(jg_mul_scalar(g[0], 2.0), jg_mul_scalar(g[1], 3.0));
    return din[0] ? 1 : -1;
}

/* sum over N_FN distinct functions of the first output: no call's backward
 * can be traced (its second gradient never arrives), so each function in
 * turn is made opaque and the program traced again */
static int p_many_fns(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    const jg_function *fns = user;
    jg_tensor *sum = NULL;
    for (int i = 0; i < N_FN; i++) {
        jg_tensor *o[2];
        if (jg_apply(&fns[i], 1, in, NULL, 0, o) != 2)
            return -1;
        sum = sum ? jg_add(sum, o[0]) : o[0];
    }
    return (out[0] = jg_sum(sum)) ? 1 : -1;
}

/* the forward compiles (equal to eager) and the backward fails as eager's */
static void test_compile_many_opaque_functions(void **state) {
    (void)state;
    jg_function fns[N_FN];
    for (int i = 0; i < N_FN; i++)
        fns[i] = (jg_function){"Two", two_forward, two_backward, NULL};
    jg_tensor *x = jg_randn(JG_F32, 1, TU_SHAPE(3)), *eo[1], *co[1];
    jg_set_requires_grad(x, true);
    assert_int_equal(p_many_fns(fns, NULL, 1, &x, eo), 1);
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        jg_compile_options o = {.backend = backends[b], .fullgraph = true};
        jg_compiled *c = jg_compile(p_many_fns, fns, &o);
        if (jg_compiled_call(c, NULL, 0, 1, &x, co) != 1)
            fail_msg("%s: forward failed: %s", backends[b], jg_last_error());
        TU_SAME(eo[0], co[0]);
        assert_int_equal(jg_backward(co[0], NULL, 0), -1);
        TU_ERROR("TwoBackward: the second gradient is missing");
        jg_compiled_free(c);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_compile_many_outputs_match_eager),
        TU_TEST(test_compile_many_captured_writes_match_eager),
        TU_TEST(test_compile_many_inputs_written_match_eager),
        TU_TEST(test_compile_many_leaves_backward_match_eager),
        TU_TEST(test_compile_many_grad_sets_match_eager),
        TU_TEST(test_compile_many_summed_contributions_match_eager),
        TU_TEST(test_compile_many_opaque_functions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
