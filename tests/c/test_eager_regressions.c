/* Eager autograd details the differential fuzzer found differing from
 * PyTorch: which inputs an op's node saves, AccumulateGrad on a leaf that no
 * longer requires grad, mark_non_differentiable on a freed temporary. */
#include "testutil.h"

#include <string.h>

static jg_tensor *leaf(double a, double b, bool rg) {
    jg_tensor *t = tu_tensor(JG_F32, 1, TU_SHAPE(2), TU_VALS(a, b));
    jg_set_requires_grad(t, rg);
    return t;
}

/* Changes t in place without recording history (torch.no_grad + add_). */
static void bump(jg_tensor *t) {
    bool prev = jg_set_grad_enabled(false);
    assert_int_equal(jg_add_(t, jg_full(JG_F32, 1, TU_SHAPE(2), 1.0)), 0);
    jg_set_grad_enabled(prev);
}

/* Seed 335: c.requires_grad_(False) after a graph through c was built; a
 * later backward through that graph leaves c.grad alone (PyTorch's
 * AccumulateGrad returns early for such a leaf). */
static void test_leaf_stops_requiring_grad_gets_no_grad(void **s) {
    (void)s;
    jg_tensor *x = leaf(1, 2, true), *c = leaf(2, 4, true);
    jg_tensor *y = jg_sum(jg_div(x, c));
    assert_int_equal(jg_backward(y, NULL, JG_RETAIN_GRAPH), 0);
    TU_CHECK(jg_grad(c), 1, TU_SHAPE(2), TU_VALS(-0.25, -0.125), 0);
    jg_set_requires_grad(c, false);
    assert_int_equal(jg_backward(y, NULL, 0), 0);
    TU_CHECK(jg_grad(c), 1, TU_SHAPE(2), TU_VALS(-0.25, -0.125), 0); /* unchanged */
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(2), TU_VALS(1.0, 0.5), 0);      /* x still accumulates */
}

/* Seed 1788: c / d with only c requiring grad saves d alone (c's gradient
 * is grad / d), so changing c in place does not break backward. */
static void test_div_saves_only_what_backward_reads(void **s) {
    (void)s;
    jg_tensor *c = leaf(1, 2, true), *d = leaf(2, 4, false);
    jg_tensor *y = jg_sum(jg_div(c, d));
    bump(c);
    assert_int_equal(jg_backward(y, NULL, 0), 0);
    TU_CHECK(jg_grad(c), 1, TU_SHAPE(2), TU_VALS(0.5, 0.25), 0);
    /* d requiring grad reads c too: PyTorch fails then, and so do we */
    c = leaf(1, 2, false);
    d = leaf(2, 4, true);
    y = jg_sum(jg_div(c, d));
    bump(c);
    assert_int_not_equal(jg_backward(y, NULL, 0), 0);
    TU_ERROR("modified by an inplace operation");
    /* the denominator is read by both formulas */
    c = leaf(1, 2, true);
    d = leaf(2, 4, false);
    y = jg_sum(jg_div(c, d));
    bump(d);
    assert_int_not_equal(jg_backward(y, NULL, 0), 0);
    TU_ERROR("modified by an inplace operation");
}

static void test_mul_and_matmul_save_only_the_other_operand(void **s) {
    (void)s;
    for (int op = 0; op < 2; op++) {
        jg_tensor *x = leaf(1, 2, true), *k = leaf(3, 5, false);
        jg_tensor *y = jg_sum(op ? jg_matmul(x, k) : jg_mul(x, k));
        bump(x); /* not read by x's gradient */
        assert_int_equal(jg_backward(y, NULL, 0), 0);
        TU_CHECK(jg_grad(x), 1, TU_SHAPE(2), TU_VALS(3, 5), 0);
        x = leaf(1, 2, true);
        y = jg_sum(op ? jg_matmul(k, x) : jg_mul(k, x));
        bump(x);
        assert_int_equal(jg_backward(y, NULL, 0), 0);
        TU_CHECK(jg_grad(x), 1, TU_SHAPE(2), TU_VALS(3, 5), 0);
        x = leaf(1, 2, true);
        y = jg_sum(op ? jg_matmul(x, k) : jg_mul(x, k));
        bump(k); /* read by x's gradient */
        assert_int_not_equal(jg_backward(y, NULL, 0), 0);
        TU_ERROR("modified by an inplace operation");
    }
}

/* matmul's gradient of one operand from the saved other one only, for
 * every rank combination the VJP reshapes (1-D, 2-D, batched). */
static void test_matmul_grad_without_the_unsaved_operand(void **s) {
    (void)s;
    const int64_t shapes[][2][3] = {
        {{3}, {3, 2}}, {{2, 3}, {3}}, {{2, 2, 3}, {3, 2}}, {{2, 3}, {2, 3, 2}}};
    const int nd[][2] = {{1, 2}, {2, 1}, {3, 2}, {2, 3}};
    for (int c = 0; c < 4; c++)
        for (int which = 0; which < 2; which++) {
            jg_manual_seed((uint64_t)c);
            jg_tensor *a = jg_randn(JG_F64, nd[c][0], shapes[c][0]);
            jg_tensor *b = jg_randn(JG_F64, nd[c][1], shapes[c][1]);
            jg_tensor *both[2] = {jg_clone(a), jg_clone(b)};
            jg_set_requires_grad(both[0], true);
            jg_set_requires_grad(both[1], true);
            assert_int_equal(jg_backward(jg_sum(jg_matmul(both[0], both[1])), NULL, 0), 0);
            jg_set_requires_grad(which ? b : a, true);
            assert_int_equal(jg_backward(jg_sum(jg_matmul(a, b)), NULL, 0), 0);
            TU_SAME(jg_grad(which ? b : a), jg_grad(both[which]));
        }
}

/* masked_fill saves the mask, where the condition: an in-place change of
 * the values does not break backward (PyTorch saves only those). */
static void test_masked_fill_and_where_save_only_the_mask(void **s) {
    (void)s;
    jg_tensor *x = leaf(1, -2, true), *z = leaf(5, 6, true);
    jg_tensor *m = jg_gt_scalar(jg_detach(x), 0.0);
    jg_tensor *y = jg_add(jg_sum(jg_masked_fill(x, m, 0.0)), jg_sum(jg_where(m, x, z)));
    bump(x);
    bump(z);
    assert_int_equal(jg_backward(y, NULL, 0), 0);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(2), TU_VALS(1, 1), 0);
    TU_CHECK(jg_grad(z), 1, TU_SHAPE(2), TU_VALS(0, 1), 0);
}

/* In-place ops follow the same rule: x.mul_(k) with k not requiring grad
 * reads only k, so its result is exact and backward runs. */
static void test_inplace_mul_with_constant_operand(void **s) {
    (void)s;
    jg_tensor *p = leaf(1, 2, true), *k = leaf(3, 5, false);
    jg_tensor *x = jg_mul_scalar(p, 2.0);
    assert_int_equal(jg_mul_(x, k), 0);
    assert_int_equal(jg_backward(jg_sum(x), NULL, 0), 0);
    TU_CHECK(jg_grad(p), 1, TU_SHAPE(2), TU_VALS(6, 10), 0);
}

/* A forward that marks a temporary it then frees: a new tensor that gets
 * the freed one's address must not count as marked. */
static int temp_mark_forward(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)n;
    for (int i = 0; i < 8; i++) { /* several, so one address is likely reused */
        jg_scope_push();
        jg_ctx_mark_non_differentiable(ctx, jg_mul_scalar(in[0], 3.0));
        jg_scope_pop();
    }
    out[0] = jg_mul_scalar(in[0], 2.0);
    return 1;
}

static int temp_mark_backward(jg_ctx *ctx, int n_out, jg_tensor *const *g, int n_in,
                              jg_tensor **gin) {
    (void)ctx, (void)n_out, (void)n_in;
    gin[0] = jg_mul_scalar(g[0], 2.0);
    return 1;
}

static const jg_function TempMark = {"TempMark", temp_mark_forward, temp_mark_backward, NULL};

static void test_mark_non_differentiable_freed_temporary(void **s) {
    (void)s;
    jg_tensor *x = leaf(1, 2, true), *y;
    int rc = jg_apply(&TempMark, 1, &x, NULL, 0, &y);
    if (rc != 1)
        print_error("%s\n", jg_last_error());
    assert_int_equal(rc, 1);
    assert_true(jg_requires_grad(y));
    rc = jg_backward(jg_sum(y), NULL, 0);
    if (rc != 0)
        print_error("%s\n", jg_last_error());
    assert_int_equal(rc, 0);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(2), TU_VALS(2, 2), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_leaf_stops_requiring_grad_gets_no_grad),
        TU_TEST(test_div_saves_only_what_backward_reads),
        TU_TEST(test_mul_and_matmul_save_only_the_other_operand),
        TU_TEST(test_matmul_grad_without_the_unsaved_operand),
        TU_TEST(test_masked_fill_and_where_save_only_the_mask),
        TU_TEST(test_inplace_mul_with_constant_operand),
        TU_TEST(test_mark_non_differentiable_freed_temporary),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
