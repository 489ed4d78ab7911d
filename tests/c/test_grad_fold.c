/* A compiled backward that is the only source of a leaf's gradient adds the
 * existing .grad into that gradient inside its own graph (under the c
 * backend, inside the fused loop) and the engine swaps the result in as
 * .grad instead of adding it in a pass of its own (jg_engine_leaf_grad).
 * Checked: .grad bitwise eager's over repeated backwards (f32, f64, below
 * and above the parallel threshold, an input used twice, both backends);
 * the swap really happens (c backend only; the interpreter keeps the
 * engine's in-place add); and it does not where eager's in-place add could
 * be told apart: a held reference to .grad (it sees the update), another
 * node sending to the same leaf, a grad-ready hook; a backward that fails
 * after the compiled node ran leaves every .grad as it was. */
#include "testutil.h"

#include "core/parallel.h"

#include <stdio.h>
#include <string.h>

#define N_BIG (3 * JG_PARALLEL_GRAIN + 4099)

/* (a * b + c).relu().sum(): one contribution per input */
static int p_fused(void *u, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)u, (void)args, (void)n;
    out[0] = jg_sum(jg_relu(jg_add(jg_mul(in[0], in[1]), in[2])));
    return out[0] ? 1 : -1;
}

/* ((a * b + c).relu() * a).sum(): a's two contributions are summed in the
 * graph first, then .grad is added (eager: .grad + (c1 + c2)) */
static int p_twice(void *u, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)u, (void)args, (void)n;
    out[0] = jg_sum(jg_mul(jg_relu(jg_add(jg_mul(in[0], in[1]), in[2])), in[0]));
    return out[0] ? 1 : -1;
}

/* Two sets of leaves with the same values: e[] for eager, c[] compiled. */
static void make_inputs(jg_tensor **e, jg_tensor **c, jg_dtype dt, int64_t n) {
    jg_manual_seed(5);
    for (int i = 0; i < 3; i++) {
        e[i] = jg_randn(dt, 1, (int64_t[]){n});
        assert_non_null(e[i]);
        c[i] = jg_detach(jg_clone(e[i]));
        assert_non_null(c[i]);
        jg_set_requires_grad(e[i], true);
        jg_set_requires_grad(c[i], true);
    }
}

static jg_tensor *call(jg_compiled *cc, jg_program_fn prog, jg_tensor *const *in) {
    jg_tensor *out;
    int rc = cc ? jg_compiled_call(cc, NULL, 0, 3, in, &out) : prog(NULL, NULL, 3, in, &out);
    if (rc < 1)
        fail_msg("%s: %s", cc ? "compiled" : "eager", jg_last_error());
    return out;
}

/* Three backwards accumulating into .grad, compiled against eager; under
 * the c backend, from the second compiled call on, the .grad of every input
 * is a new tensor (swapped in, not added into); the interpreter keeps the
 * engine's in-place add. */
static void check_accumulates(jg_program_fn prog, const char *backend, jg_dtype dt, int64_t n) {
    jg_scope_push();
    jg_tensor *e[3], *c[3];
    make_inputs(e, c, dt, n);
    jg_compiled *cc = jg_compile(prog, NULL, &(jg_compile_options){.backend = backend});
    assert_non_null(cc);
    for (int rep = 0; rep < 3; rep++) {
        jg_tensor *before[3];
        for (int i = 0; i < 3; i++)
            before[i] = jg_grad(c[i]);
        assert_int_equal(jg_backward(call(NULL, prog, e), NULL, 0), 0);
        assert_int_equal(jg_backward(call(cc, prog, c), NULL, 0), 0);
        for (int i = 0; i < 3; i++) {
            TU_SAME(jg_grad(c[i]), jg_grad(e[i]));
            if (rep == 2 && !strcmp(backend, "c"))
                assert_ptr_not_equal(jg_grad(c[i]), before[i]);
            else if (rep == 2)
                assert_ptr_equal(jg_grad(c[i]), before[i]);
        }
    }
    assert_int_equal(jg_compiled_fallbacks(cc), 0);
    jg_compiled_free(cc);
    jg_scope_pop();
}

static void test_grad_fold_same_as_eager(void **state) {
    (void)state;
    const char *backends[] = {"interp", "c"};
    const int64_t sizes[] = {1, 1000, N_BIG};
    for (int b = 0; b < 2; b++) {
        if (b == 1 && !jg_compile_backend_available("c")) {
            print_message("the c backend is not available here: %s\n", jg_last_error());
            continue;
        }
        for (int s = 0; s < 3; s++) {
            check_accumulates(p_fused, backends[b], JG_F32, sizes[s]);
            check_accumulates(p_twice, backends[b], JG_F32, sizes[s]);
        }
        check_accumulates(p_fused, backends[b], JG_F64, N_BIG);
        check_accumulates(p_twice, backends[b], JG_F64, 1000);
    }
}

/* After a first backward (so .grad exists), one more compiled backward,
 * set up by `before` (which may return a loss term to add, or NULL); the
 * gradients equal eager's under the same setup. */
typedef jg_tensor *(*setup_fn)(jg_tensor *const *in, jg_tensor **held);

static void fold_case(setup_fn before, bool expect_swap) {
    jg_scope_push();
    jg_tensor *e[3], *c[3];
    make_inputs(e, c, JG_F32, 1000);
    jg_compiled *cc = jg_compile(p_fused, NULL, &(jg_compile_options){.backend = "c"});
    assert_non_null(cc);
    for (int rep = 0; rep < 2; rep++) { /* the trace, then the compiled graphs */
        assert_int_equal(jg_backward(call(NULL, p_fused, e), NULL, 0), 0);
        assert_int_equal(jg_backward(call(cc, p_fused, c), NULL, 0), 0);
    }
    jg_tensor *held_e = NULL, *held_c = NULL, *was = jg_grad(c[0]);
    jg_tensor *extra_e = before(e, &held_e), *extra_c = before(c, &held_c);
    jg_tensor *le = call(NULL, p_fused, e), *lc = call(cc, p_fused, c);
    if (extra_e)
        le = jg_add(le, extra_e), lc = jg_add(lc, extra_c);
    assert_int_equal(jg_backward(le, NULL, 0), 0);
    assert_int_equal(jg_backward(lc, NULL, 0), 0);
    for (int i = 0; i < 3; i++)
        TU_SAME(jg_grad(c[i]), jg_grad(e[i]));
    if (expect_swap) {
        assert_ptr_not_equal(jg_grad(c[0]), was);
    } else {
        assert_ptr_equal(jg_grad(c[0]), was);
    }
    if (held_c) { /* the reference the caller kept saw the update */
        TU_SAME(held_c, jg_grad(e[0]));
        jg_release(held_c);
        jg_release(held_e);
    }
    jg_compiled_free(cc);
    jg_scope_pop();
}

static jg_tensor *nothing(jg_tensor *const *in, jg_tensor **held) {
    (void)in, (void)held;
    return NULL;
}

static jg_tensor *hold_grad(jg_tensor *const *in, jg_tensor **held) {
    *held = jg_retain(jg_grad(in[0]));
    return NULL;
}

static jg_tensor *other_use(jg_tensor *const *in, jg_tensor **held) {
    (void)held;
    return jg_sum(jg_mul_scalar(in[0], 3.0));
}

static int ready_hook(void *user, jg_tensor *leaf, jg_tensor *grad) {
    (void)leaf, (void)grad;
    ++*(int *)user;
    return 0;
}

static int g_hook_calls;

static jg_tensor *hooked(jg_tensor *const *in, jg_tensor **held) {
    (void)held;
    assert_true(jg_register_grad_ready_hook(in[0], ready_hook, &g_hook_calls, NULL) > 0);
    return NULL;
}

#define REQUIRE_C()                                                                                \
    do {                                                                                           \
        if (!jg_compile_backend_available("c")) {                                                  \
            print_message("skipping: the c backend is not available here: %s\n", jg_last_error()); \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

static void test_grad_fold_only_where_unobservable(void **state) {
    (void)state;
    REQUIRE_C();
    fold_case(nothing, true);
    fold_case(hold_grad, false);
    fold_case(other_use, false);
    g_hook_calls = 0;
    fold_case(hooked, false);
    assert_int_equal(g_hook_calls, 2); /* eager's leaf and the compiled one's */
}

/* The compiled node runs (computing .grad + gradient for a, b, c), then an
 * eager node created before the call fails on its saved operand, changed in
 * place: the backward fails with eager's message and every .grad keeps its
 * tensor and its values. */
static void test_grad_fold_failed_backward_keeps_grads(void **state) {
    (void)state;
    REQUIRE_C();
    jg_scope_push();
    jg_tensor *e[3], *c[3];
    make_inputs(e, c, JG_F32, N_BIG);
    jg_tensor *d = jg_randn(JG_F32, 1, (int64_t[]){16}), *w = jg_randn(JG_F32, 1, (int64_t[]){16});
    jg_set_requires_grad(d, true);
    jg_compiled *cc = jg_compile(p_fused, NULL, &(jg_compile_options){.backend = "c"});
    assert_non_null(cc);
    for (int rep = 0; rep < 2; rep++)
        assert_int_equal(jg_backward(call(cc, p_fused, c), NULL, 0), 0);
    jg_tensor *was[3], *vals[3];
    for (int i = 0; i < 3; i++) {
        was[i] = jg_grad(c[i]);
        vals[i] = jg_detach(jg_clone(was[i]));
    }
    jg_tensor *dw = jg_mul(d, w); /* saves w; its node runs after the compiled one */
    jg_tensor *loss = jg_add(call(cc, p_fused, c), jg_sum(dw));
    assert_int_equal(jg_mul_scalar_(w, 2.0), 0);
    assert_int_equal(jg_backward(loss, NULL, 0), -1);
    TU_ERROR("modified by an inplace operation");
    for (int i = 0; i < 3; i++) {
        assert_ptr_equal(jg_grad(c[i]), was[i]);
        TU_SAME(jg_grad(c[i]), vals[i]);
    }
    assert_null(jg_grad(d));
    jg_compiled_free(cc);
    jg_scope_pop();
}

/* two outputs: sum(a * b) and sum(c * c) */
static int p_two(void *u, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)u, (void)args, (void)n;
    out[0] = jg_sum(jg_mul(in[0], in[1]));
    out[1] = jg_sum(jg_mul(in[2], in[2]));
    return out[0] && out[1] ? 2 : -1;
}

/* A backward through one output of a call whose other input has a .grad:
 * that input gets no gradient in this backward, nothing is added to it
 * (regression: folding asked for a gradient the graph does not compute
 * and failed the backward with an internal error). */
static void test_grad_fold_input_without_gradient(void **state) {
    (void)state;
    REQUIRE_C();
    jg_scope_push();
    jg_tensor *e[3], *c[3];
    make_inputs(e, c, JG_F32, 1000);
    jg_compiled *cc = jg_compile(p_two, NULL, &(jg_compile_options){.backend = "c"});
    assert_non_null(cc);
    for (int rep = 0; rep < 4; rep++) {
        jg_tensor *oe[2], *oc[2];
        assert_int_equal(p_two(NULL, NULL, 3, e, oe), 2);
        assert_int_equal(jg_compiled_call(cc, NULL, 0, 3, c, oc), 2);
        /* first both outputs, then only the first */
        jg_tensor *le = rep == 0 ? jg_add(oe[0], oe[1]) : oe[0];
        jg_tensor *lc = rep == 0 ? jg_add(oc[0], oc[1]) : oc[0];
        assert_int_equal(jg_backward(le, NULL, 0), 0);
        if (jg_backward(lc, NULL, 0) < 0)
            fail_msg("backward: %s", jg_last_error());
        for (int i = 0; i < 3; i++)
            TU_SAME(jg_grad(c[i]), jg_grad(e[i]));
    }
    jg_compiled_free(cc);
    jg_scope_pop();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_grad_fold_same_as_eager),
        TU_TEST(test_grad_fold_only_where_unobservable),
        TU_TEST(test_grad_fold_failed_backward_keeps_grads),
        TU_TEST(test_grad_fold_input_without_gradient),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
