/* Rematerialization under the c backend (src/compile/remat.c): a cheap
 * elementwise value the backward reads is recomputed there from values it
 * reads anyway instead of being saved by the forward.  Compiled == eager
 * bitwise (outputs, every gradient, f32 and f64, below and above the
 * parallel threshold), the saved set shrinks (the printed graphs), output
 * mask variants and create_graph reruns agree with eager, and in-place
 * changes fail as in eager. */
#include "testutil.h"

#include "core/parallel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE_C()                                                                                \
    do {                                                                                           \
        if (!jg_compile_backend_available("c")) {                                                  \
            print_message("skipping: the c backend is not available here: %s\n", jg_last_error()); \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

#define N_BIG (3 * JG_PARALLEL_GRAIN + 4099)

/* y = (a * b).relu(); (y * b).sum(): y is recomputed from a, b (saved by
 * both muls) */
static int p_relu(void *u, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)u, (void)args, (void)n;
    jg_tensor *y = jg_relu(jg_mul(in[0], in[1]));
    out[0] = jg_sum(jg_mul(y, in[1]));
    return out[0] ? 1 : -1;
}

/* t = a; 4x: t = tanh(t * b) * b + (b * 0.25 + c): each t (saved by the
 * next mul) is recomputed from the saved tanh output and b; c is not saved
 * (add does not save), so b * 0.25 + c stays a value of its own */
static int p_mlp(void *u, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)u, (void)args, (void)n;
    jg_tensor *t = in[0];
    for (int k = 0; k < 4 && t; k++)
        t = jg_add(jg_mul(jg_tanh(jg_mul(t, in[1])), in[1]), jg_mul_scalar(in[1], 0.25));
    out[0] = t ? jg_sum(jg_mul(t, in[2])) : NULL;
    return out[0] ? 1 : -1;
}

/* two outputs reading y = (a * b).relu() */
static int p_two(void *u, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)u, (void)args, (void)n;
    jg_tensor *y = jg_relu(jg_mul(in[0], in[1]));
    out[0] = jg_sum(jg_mul(y, in[1]));
    out[1] = jg_sum(jg_mul(y, in[2]));
    return out[0] && out[1] ? 2 : -1;
}

/* y returned: the user holds it, so it stays saved (its in-place change
 * must fail the backward as in eager) */
static int p_exposed(void *u, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)u, (void)args, (void)n;
    jg_tensor *y = jg_relu(jg_mul(in[0], in[1]));
    out[0] = jg_sum(jg_mul(y, in[1]));
    out[1] = y;
    return out[0] && y ? 2 : -1;
}

typedef struct {
    int n_out;
    jg_tensor *out[2], *grad[3];
} result;

static void make_inputs(jg_tensor **in, jg_dtype dt, int64_t n) {
    jg_manual_seed(11);
    for (int i = 0; i < 3; i++) {
        in[i] = jg_mul_scalar(jg_randn(dt, 1, (int64_t[]){n}), i == 1 ? 0.7 : 1.0);
        assert_non_null(in[i]);
        jg_set_requires_grad(in[i], true);
    }
}

/* forward, then backward of output `which` (-1: of the sum of all) */
static result run_once(jg_compiled *c, jg_program_fn prog, jg_tensor *const *in, int which) {
    result r = {0};
    for (int i = 0; i < 3; i++)
        jg_clear_grad(in[i]);
    r.n_out = c ? jg_compiled_call(c, NULL, 0, 3, in, r.out) : prog(NULL, NULL, 3, in, r.out);
    if (r.n_out < 1)
        fail_msg("%s: %s", c ? "c" : "eager", jg_last_error());
    jg_tensor *loss = which >= 0 ? r.out[which] : r.out[0];
    for (int k = 1; which < 0 && k < r.n_out; k++)
        loss = jg_add(loss, jg_numel(r.out[k]) == 1 ? r.out[k] : jg_sum(r.out[k]));
    if (!loss || jg_backward(loss, NULL, 0) < 0)
        fail_msg("backward: %s", jg_last_error());
    for (int i = 0; i < 3; i++)
        r.grad[i] = jg_grad(in[i]) ? jg_clone(jg_grad(in[i])) : NULL;
    return r;
}

static void same(const result *a, const result *b) {
    assert_int_equal(a->n_out, b->n_out);
    for (int k = 0; k < a->n_out; k++)
        TU_SAME(a->out[k], b->out[k]);
    for (int i = 0; i < 3; i++) {
        assert_true((a->grad[i] == NULL) == (b->grad[i] == NULL));
        if (a->grad[i])
            TU_SAME(a->grad[i], b->grad[i]);
    }
}

static void check_same(jg_program_fn prog, jg_dtype dt, int64_t n, int which) {
    jg_tensor *in[3];
    make_inputs(in, dt, n);
    result eager = run_once(NULL, prog, in, which);
    jg_compiled *c = jg_compile(prog, NULL, &(jg_compile_options){.backend = "c"});
    assert_non_null(c);
    for (int rep = 0; rep < 2; rep++) { /* the trace, then the compiled graphs */
        result r = run_once(c, prog, in, which);
        same(&r, &eager);
    }
    assert_int_equal(jg_compiled_fallbacks(c), 0);
    jg_compiled_free(c);
}

static void test_cgen_remat_same_as_eager(void **state) {
    (void)state;
    REQUIRE_C();
    const int64_t sizes[] = {1, 1000, N_BIG};
    const jg_dtype dts[] = {JG_F32, JG_F64};
    for (size_t s = 0; s < 3; s++)
        for (size_t d = 0; d < 2; d++) {
            check_same(p_relu, dts[d], sizes[s], -1);
            check_same(p_mlp, dts[d], sizes[s], -1);
            check_same(p_two, dts[d], sizes[s], -1);
            check_same(p_exposed, dts[d], sizes[s], -1);
        }
}

/* a backward reaching only one output: the mask variant recomputes too */
static void test_cgen_remat_output_mask(void **state) {
    (void)state;
    REQUIRE_C();
    check_same(p_two, JG_F32, 1000, 1);
    check_same(p_two, JG_F32, 1000, 0);
    check_same(p_two, JG_F64, N_BIG, 1);
}

/* The printed graphs: what the backward reads. */
static char *graphs(jg_program_fn prog) {
    jg_tensor *in[3];
    make_inputs(in, JG_F32, 64);
    jg_compiled *c = jg_compile(prog, NULL, &(jg_compile_options){.backend = "c"});
    assert_non_null(c);
    jg_tensor *out[2];
    assert_true(jg_compiled_call(c, NULL, 0, 3, in, out) > 0);
    char *text = jg_compiled_graph(c, 0);
    assert_non_null(text);
    jg_compiled_free(c);
    return text;
}

static void test_cgen_remat_saved_set_shrinks(void **state) {
    (void)state;
    REQUIRE_C();
    char *t = graphs(p_relu);
    /* the forward returns its output only; the backward reads inputs only */
    assert_non_null(strstr(t, "return (%3)\nbackward("));
    assert_non_null(strstr(t, "backward(g0: f32[], x1: f32[64], x0: f32[64]):"));
    free(t);
    /* the mlp chain: 4 tanh outputs saved, the 3 intermediate t not */
    t = graphs(p_mlp);
    const char *b = strstr(t, "backward(");
    assert_non_null(b);
    int n_s = 0;
    for (const char *p = b; (p = strstr(p, ": f32[64]")) && p < strchr(b, '\n'); p++)
        n_s++;
    assert_int_equal(n_s, 4 + 3); /* 4 tanh outputs, a, b, c */
    free(t);
    /* exposed: y stays saved */
    t = graphs(p_exposed);
    assert_non_null(strstr(t, "s0: f32[64]"));
    free(t);
    /* the interpreter saves what it always saved */
    jg_tensor *in[3];
    make_inputs(in, JG_F32, 64);
    jg_compiled *c = jg_compile(p_relu, NULL, &(jg_compile_options){.backend = "interp"});
    jg_tensor *out[2];
    assert_true(jg_compiled_call(c, NULL, 0, 3, in, out) > 0);
    t = jg_compiled_graph(c, 0);
    assert_non_null(strstr(t, "s0: f32[64]"));
    free(t);
    jg_compiled_free(c);
}

/* grad of the loss w.r.t. a with create_graph, then the backward of the sum
 * of its squares: first and second derivatives */
static void create_graph_run(jg_compiled *c, jg_program_fn prog, jg_tensor *const *in,
                             jg_tensor **res) {
    for (int i = 0; i < 3; i++)
        jg_clear_grad(in[i]);
    jg_tensor *out[2];
    int n = c ? jg_compiled_call(c, NULL, 0, 3, in, out) : prog(NULL, NULL, 3, in, out);
    assert_true(n > 0);
    jg_tensor *g[2];
    if (jg_autograd_grad(1, out, NULL, 2, in, JG_CREATE_GRAPH, g) < 0)
        fail_msg("grad: %s", jg_last_error());
    jg_tensor *loss = jg_add(jg_sum(jg_mul(g[0], g[0])), jg_sum(jg_mul(g[1], g[0])));
    if (!loss || jg_backward(loss, NULL, 0) < 0)
        fail_msg("backward: %s", jg_last_error());
    res[0] = jg_clone(g[0]);
    res[1] = jg_clone(g[1]);
    for (int i = 0; i < 3; i++)
        res[2 + i] = jg_grad(in[i]) ? jg_clone(jg_grad(in[i])) : NULL;
}

static void check_create_graph(jg_program_fn prog, jg_dtype dt, int64_t n) {
    jg_tensor *in[3], *want[5], *got[5];
    make_inputs(in, dt, n);
    create_graph_run(NULL, prog, in, want);
    jg_compiled *c = jg_compile(prog, NULL, &(jg_compile_options){.backend = "c"});
    assert_non_null(c);
    for (int rep = 0; rep < 2; rep++) {
        create_graph_run(c, prog, in, got);
        for (int k = 0; k < 5; k++) {
            assert_true((want[k] == NULL) == (got[k] == NULL));
            if (want[k])
                TU_SAME(got[k], want[k]);
        }
    }
    jg_compiled_free(c);
}

static void test_cgen_remat_create_graph(void **state) {
    (void)state;
    REQUIRE_C();
    check_create_graph(p_relu, JG_F32, 1000);
    check_create_graph(p_mlp, JG_F64, 1000);
    check_create_graph(p_mlp, JG_F32, N_BIG);
}

/* What the recompute reads is version-checked: changing it in place after
 * the call fails the backward with eager's message. */
static void test_cgen_remat_inplace_error(void **state) {
    (void)state;
    REQUIRE_C();
    for (int mode = 0; mode < 2; mode++) {
        jg_tensor *in[3];
        make_inputs(in, JG_F32, 1000);
        jg_tensor *a2 = jg_mul_scalar(in[0], 1.0); /* a non-leaf we may change */
        jg_tensor *args[3] = {a2, in[1], in[2]};
        jg_compiled *c =
            mode ? jg_compile(p_relu, NULL, &(jg_compile_options){.backend = "c"}) : NULL;
        for (int rep = 0; rep < 2; rep++) {
            jg_tensor *out[2];
            int n =
                c ? jg_compiled_call(c, NULL, 0, 3, args, out) : p_relu(NULL, NULL, 3, args, out);
            assert_int_equal(n, 1);
            assert_int_equal(jg_add_(a2, in[2]), 0);
            assert_true(jg_backward(out[0], NULL, 0) < 0);
            TU_ERROR("modified by an inplace operation");
        }
        if (c)
            jg_compiled_free(c);
    }
}

/* sin(x * (2 - c)) with c captured: 2 - c is saved (a checked leaf of
 * x * (2 - c)) but c is not; after c changes in place a create_graph
 * backward reruns the forward from the current c and restores saved values
 * only, so x * (2 - c) (computed from c) must stay saved: the gradients are
 * eager's. */
static int p_stale(void *u, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    jg_tensor *c = u;
    out[0] = jg_sin(jg_mul(in[0], jg_add_scalar(jg_mul_scalar(c, -1.0), 2.0)));
    return out[0] ? 1 : -1;
}

static void stale_run(const char *backend, jg_tensor **res) {
    jg_tensor *c = jg_keep(tu_tensor(JG_F32, 1, TU_SHAPE(1), TU_VALS(0.7)));
    jg_set_requires_grad(c, true);
    jg_tensor *x = tu_tensor(JG_F32, 2, TU_SHAPE(1, 2), TU_VALS(1.5, 0.5));
    jg_set_requires_grad(x, true);
    jg_compiled *f =
        backend ? jg_compile(p_stale, c, &(jg_compile_options){.backend = backend}) : NULL;
    jg_tensor *o, *y;
    assert_int_equal(f ? jg_compiled_call(f, NULL, 0, 1, &x, &o) : p_stale(c, NULL, 1, &x, &o), 1);
    bool prev = jg_set_grad_enabled(false);
    assert_int_equal(jg_mul_scalar_(c, 0.5), 0);
    jg_set_grad_enabled(prev);
    assert_int_equal(f ? jg_compiled_call(f, NULL, 0, 1, &o, &y) : p_stale(c, NULL, 1, &o, &y), 1);
    jg_tensor *loss = jg_sum(jg_mul(y, y));
    jg_tensor *wrt[2] = {c, x};
    if (jg_autograd_grad(1, &loss, NULL, 2, wrt, JG_CREATE_GRAPH, res) < 0)
        fail_msg("grad: %s", jg_last_error());
    if (f)
        jg_compiled_free(f);
    jg_release(c);
}

static void test_cgen_remat_stale_capture_rerun(void **state) {
    (void)state;
    REQUIRE_C();
    jg_tensor *want[2], *got[2];
    stale_run(NULL, want);
    stale_run("c", got);
    for (int k = 0; k < 2; k++)
        TU_SAME(got[k], want[k]);
}

/* t = a; 3x: t = (t * b).tanh(): b's three contributions are summed as they
 * appear (each add right after its terms), not after the last tanh_grad */
static int p_tanh3(void *u, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)u, (void)args, (void)n;
    jg_tensor *t = in[0];
    for (int k = 0; k < 3 && t; k++)
        t = jg_tanh(jg_mul(t, in[1]));
    out[0] = t ? jg_sum(t) : NULL;
    return out[0] ? 1 : -1;
}

static void test_cgen_remat_sum_terms_early(void **state) {
    (void)state;
    REQUIRE_C();
    char *t = graphs(p_tanh3);
    const char *b = strstr(t, "backward(");
    assert_non_null(b);
    const char *first_add = strstr(b, "= add(");
    const char *last = NULL;
    for (const char *p = b; (p = strstr(p, "= tanh_grad(")); p++)
        last = p;
    assert_non_null(first_add);
    assert_non_null(last);
    assert_true(first_add < last);
    free(t);
    check_same(p_tanh3, JG_F32, N_BIG, -1);
    check_same(p_tanh3, JG_F64, 1000, -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_cgen_remat_same_as_eager),     TU_TEST(test_cgen_remat_output_mask),
        TU_TEST(test_cgen_remat_saved_set_shrinks), TU_TEST(test_cgen_remat_create_graph),
        TU_TEST(test_cgen_remat_inplace_error),     TU_TEST(test_cgen_remat_stale_capture_rerun),
        TU_TEST(test_cgen_remat_sum_terms_early),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
