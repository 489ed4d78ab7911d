/* Gradient routing of compiled calls: which node receives which output's
 * gradient, which backward runs, None versus zeros, and errors that must
 * survive compilation.  Every program runs eagerly and compiled (fullgraph)
 * on both backends; gradients must be bitwise equal (NULL included) and
 * equal PyTorch's values. */
#include "testutil.h"

#include <string.h>

static const char *backend = "interp";

static jg_compiled *compile(jg_program_fn prog) {
    jg_compile_options o = {.backend = backend, .fullgraph = true};
    jg_compiled *c = jg_compile(prog, NULL, &o);
    assert_non_null(c);
    return c;
}

/* Runs prog eagerly (c NULL) or compiled. */
static int call(jg_compiled *c, jg_program_fn prog, int n, jg_tensor **in, jg_tensor **out) {
    if (!c)
        return prog(NULL, NULL, n, in, out);
    return jg_compiled_call(c, NULL, 0, n, in, out);
}

static jg_tensor *leaf(const double *v, int64_t n) {
    jg_tensor *t = tu_tensor(JG_F32, 1, TU_SHAPE(n), v);
    jg_set_requires_grad(t, true);
    return t;
}

/* ---- item 4: an identity function whose input is also returned ---- */

static int ident_fwd(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)ctx, (void)n;
    out[0] = in[0];
    return 1;
}
static int ident_bwd(jg_ctx *ctx, int n_out, jg_tensor *const *g, int n_in, jg_tensor **gin) {
    (void)ctx, (void)n_out, (void)n_in;
    gin[0] = jg_mul_scalar(g[0], 3.0);
    return 1;
}
static const jg_function Ident = {"Ident", ident_fwd, ident_bwd, NULL};

static int p_ident(void *u, const void *a, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)u, (void)a, (void)n;
    out[0] = jg_mul_scalar(in[0], 2.0);
    return jg_apply(&Ident, 1, &out[0], NULL, 0, &out[1]) < 0 ? -1 : 2;
}

static int p_ident_of_input(void *u, const void *a, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)u, (void)a, (void)n;
    out[0] = in[0];
    return jg_apply(&Ident, 1, &in[0], NULL, 0, &out[1]) < 0 ? -1 : 2;
}

static void test_identity_function_keeps_plain_output_gradient(void **s) {
    (void)s;
    jg_program_fn progs[2] = {p_ident, p_ident_of_input};
    const double want_plain[2] = {-1.0, -0.5}; /* d(-0.5 * a)/dp */
    const double want_both[2] = {5.0, 2.5};    /* ... + d(sum y)/dp through 3g */
    for (int k = 0; k < 2; k++) {
        jg_compiled *c = compile(progs[k]);
        for (int mode = 0; mode < 2; mode++) {
            jg_compiled *cc = mode ? c : NULL;
            jg_tensor *p = leaf(TU_VALS(1, 2), 2), *out[2];
            assert_int_equal(call(cc, progs[k], 1, &p, out), 2);
            assert_int_equal(jg_backward(jg_sum(jg_mul_scalar(out[0], -0.5)), NULL, 0), 0);
            TU_CHECK(jg_grad(p), 1, TU_SHAPE(2), TU_VALS(want_plain[k], want_plain[k]), 0);
            /* item 4b: under autograd.grad the function's backward runs */
            jg_tensor *q = leaf(TU_VALS(1, 2), 2), *g;
            assert_int_equal(call(cc, progs[k], 1, &q, out), 2);
            jg_tensor *loss = jg_add(jg_sum(jg_mul_scalar(out[0], -0.5)), jg_sum(out[1]));
            assert_int_equal(jg_autograd_grad(1, &loss, NULL, 1, &q, 0, &g), 0);
            TU_CHECK(g, 1, TU_SHAPE(2), TU_VALS(want_both[k], want_both[k]), 0);
            assert_null(jg_grad(q));
        }
        jg_compiled_free(c);
    }
}

/* ---- item 7: a function feeding a slot answered NULL still runs ---- */

static int b_fwd(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)ctx, (void)n;
    out[0] = jg_mul_scalar(in[0], 2.0);
    return 1;
}
static int b_bwd(jg_ctx *ctx, int n_out, jg_tensor *const *g, int n_in, jg_tensor **gin) {
    (void)ctx, (void)n_out, (void)n_in;
    gin[0] = jg_mul_scalar(g[0], 2.0);
    return 1;
}
static const jg_function B = {"B", b_fwd, b_bwd, NULL};

static int a_fwd(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)ctx, (void)n;
    out[0] = jg_add(in[0], in[1]);
    return 1;
}
static int a_bwd(jg_ctx *ctx, int n_out, jg_tensor *const *g, int n_in, jg_tensor **gin) {
    (void)ctx, (void)n_out, (void)n_in;
    gin[0] = g[0];
    gin[1] = NULL;
    return 2;
}
static const jg_function A = {"A", a_fwd, a_bwd, NULL};

static int p_none_slot(void *u, const void *a, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)u, (void)a, (void)n;
    jg_tensor *b, *y;
    if (jg_apply(&B, 1, &in[1], NULL, 0, &b) < 0 ||
        jg_apply(&A, 2, (jg_tensor *[]){in[0], b}, NULL, 0, &y) < 0)
        return -1;
    out[0] = jg_sum(y);
    return 1;
}

static void test_function_feeding_null_slot_runs_backward(void **s) {
    (void)s;
    jg_compiled *c = compile(p_none_slot);
    for (int mode = 0; mode < 2; mode++) {
        jg_tensor *in[2] = {leaf(TU_VALS(1, 2), 2), leaf(TU_VALS(3, 4), 2)}, *out;
        assert_int_equal(call(mode ? c : NULL, p_none_slot, 2, in, &out), 1);
        assert_int_equal(jg_backward(out, NULL, 0), 0);
        TU_CHECK(jg_grad(in[0]), 1, TU_SHAPE(2), TU_VALS(1, 1), 0);
        /* PyTorch: B.backward runs on materialized zeros -> zeros, not None */
        assert_non_null(jg_grad(in[1]));
        TU_CHECK(jg_grad(in[1]), 1, TU_SHAPE(2), TU_VALS(0, 0), 0);
    }
    jg_compiled_free(c);
}

/* ---- item 4c: contiguous() of a contiguous input is the input ---- */

static int p_contig(void *u, const void *a, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)u, (void)a, (void)n;
    jg_tensor *c = jg_contiguous(in[0]);
    out[0] = jg_add(jg_add(jg_sum(jg_mul(in[0], in[1])), jg_sum(jg_mul(c, in[2]))),
                    jg_add(jg_sum(jg_mul(c, in[3])), jg_sum(jg_mul(in[0], in[3]))));
    return 1;
}

static void test_contiguous_of_contiguous_is_identity_bitwise(void **s) {
    (void)s;
    jg_manual_seed(3);
    int64_t n = 1000;
    jg_tensor *in[4];
    for (int i = 0; i < 4; i++)
        in[i] = jg_randn(JG_F32, 1, &n);
    jg_set_requires_grad(in[0], true);
    jg_tensor *out, *g[2];
    jg_compiled *c = compile(p_contig);
    for (int mode = 0; mode < 2; mode++) {
        jg_clear_grad(in[0]);
        assert_int_equal(call(mode ? c : NULL, p_contig, 4, in, &out), 1);
        assert_int_equal(jg_backward(out, NULL, 0), 0);
        g[mode] = jg_clone(jg_grad(in[0]));
    }
    TU_SAME(g[1], g[0]);
    jg_compiled_free(c);
}

/* ---- item 9b: errors that compiled code must keep ---- */

static int p_view(void *u, const void *a, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)u, (void)a, (void)n;
    jg_tensor *v = jg_view(in[0], 1, TU_SHAPE(-1));
    return v && (out[0] = jg_mul_scalar(v, 2.0)) ? 1 : -1;
}

static void test_view_of_transposed_input_fails(void **s) {
    (void)s;
    jg_tensor *x = jg_full(JG_F32, 2, TU_SHAPE(3, 4), 1.0), *t = jg_transpose(x, 0, 1), *out;
    jg_compiled *c = compile(p_view);
    for (int mode = 0; mode < 2; mode++) {
        jg_compiled *cc = mode ? c : NULL;
        assert_int_equal(call(cc, p_view, 1, &t, &out), -1);
        TU_ERROR("view size is not compatible with input tensor's size and stride");
        jg_tensor *ct = jg_contiguous(t);
        assert_int_equal(call(cc, p_view, 1, &ct, &out), 1);
        assert_int_equal(jg_numel(out), 12);
        assert_int_equal(call(cc, p_view, 1, &t, &out), -1); /* the guard keeps both apart */
    }
    assert_int_equal(jg_compiled_entries(c), 1); /* failed traces cache nothing */
    jg_compiled_free(c);
}

static int p_unused_ce(void *u, const void *a, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)u, (void)a, (void)n;
    if (!jg_cross_entropy(in[0], in[1]))
        return -1;
    out[0] = jg_sum(jg_mul_scalar(in[0], 2.0));
    return 1;
}

static void test_unused_cross_entropy_bad_target_fails(void **s) {
    (void)s;
    jg_tensor *x = jg_full(JG_F32, 2, TU_SHAPE(3, 4), 0.5);
    jg_tensor *bad = tu_tensor(JG_I64, 1, TU_SHAPE(3), TU_VALS(0, 5, 1));
    jg_tensor *ok = tu_tensor(JG_I64, 1, TU_SHAPE(3), TU_VALS(0, 3, 1));
    jg_compiled *c = compile(p_unused_ce);
    for (int mode = 0; mode < 2; mode++) {
        jg_tensor *out, *in[2] = {x, bad};
        assert_int_equal(call(mode ? c : NULL, p_unused_ce, 2, in, &out), -1);
        TU_ERROR("Target 5 is out of bounds.");
        in[1] = ok;
        assert_int_equal(call(mode ? c : NULL, p_unused_ce, 2, in, &out), 1);
        assert_true(jg_item(out) == 12.0);
    }
    jg_compiled_free(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_identity_function_keeps_plain_output_gradient),
        TU_TEST(test_function_feeding_null_slot_runs_backward),
        TU_TEST(test_contiguous_of_contiguous_is_identity_bitwise),
        TU_TEST(test_view_of_transposed_input_fails),
        TU_TEST(test_unused_cross_entropy_bad_target_fails),
    };
    int failed = cmocka_run_group_tests_name("interp", tests, NULL, NULL);
    if (!jg_compile_backend_available("c")) {
        print_message("the c backend is not available here: %s\n", jg_last_error());
        return failed;
    }
    backend = "c";
    return failed + cmocka_run_group_tests_name("c", tests, NULL, NULL);
}
