/* Engine semantics: accumulation, retain_graph, failure atomicity, root
 * checks, grad mode, jg_autograd_grad, in-place ops and version counters,
 * very long chains, scopes, read accessors, grad_fn names and the RNG. */
#include "testutil.h"

#include <math.h>
#include <string.h>

static jg_tensor *leaf(jg_dtype dt, int ndim, const int64_t *shape, const double *v) {
    jg_tensor *t = tu_tensor(dt, ndim, shape, v);
    jg_set_requires_grad(t, true);
    return t;
}

static void test_accumulation(void **state) {
    (void)state;
    jg_tensor *x = leaf(JG_F32, 1, TU_SHAPE(3), TU_VALS(1, 2, 3));
    assert_null(jg_grad(x));
    assert_int_equal(jg_backward(jg_sum(jg_mul_scalar(x, 2)), NULL, 0), 0);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(3), TU_VALS(2, 2, 2), 0);
    jg_tensor *g1 = jg_grad(x);
    assert_int_equal(jg_backward(jg_sum(jg_mul(x, x)), NULL, 0), 0);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(3), TU_VALS(4, 6, 8), 0);
    assert_ptr_equal(jg_grad(x), g1); /* accumulated in place */
    assert_false(jg_requires_grad(jg_grad(x)));
    /* an explicit gradient for a non-scalar root */
    jg_clear_grad(x);
    jg_tensor *go = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(1, 10, 100));
    assert_int_equal(jg_backward(jg_mul_scalar(x, 3), go, 0), 0);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(3), TU_VALS(3, 30, 300), 0);
    /* backward on a leaf itself */
    jg_clear_grad(x);
    assert_int_equal(jg_backward(x, go, 0), 0);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(3), TU_VALS(1, 10, 100), 0);
    assert_false(jg_same_storage(jg_grad(x), go)); /* .grad never aliases the seed */
    /* a wrong-shaped explicit gradient */
    jg_tensor *bad = jg_full(JG_F32, 1, TU_SHAPE(2), 1);
    assert_int_equal(jg_backward(jg_mul_scalar(x, 3), bad, 0), -1);
    TU_ERROR("Mismatch in shape: grad_output[0] has a shape of [2] and output[0] has a shape of "
             "[3].");
}

static void test_retain_graph(void **state) {
    (void)state;
    jg_tensor *x = leaf(JG_F64, 1, TU_SHAPE(2), TU_VALS(1, 2));
    jg_tensor *y = jg_sum(jg_mul(x, x)); /* mul saves its inputs */
    assert_int_equal(jg_backward(y, NULL, JG_RETAIN_GRAPH), 0);
    assert_int_equal(jg_backward(y, NULL, 0), 0);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(2), TU_VALS(4, 8), 0);
    assert_int_equal(jg_backward(y, NULL, 0), -1);
    TU_ERROR("Trying to backward through the graph a second time");
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(2), TU_VALS(4, 8), 0);
    /* a graph with no saved tensors can be run again */
    jg_tensor *z = jg_sum(jg_add_scalar(x, 1));
    assert_int_equal(jg_backward(z, NULL, 0), 0);
    assert_int_equal(jg_backward(z, NULL, 0), 0);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(2), TU_VALS(6, 10), 0);
}

static void test_failed_backward_changes_nothing(void **state) {
    (void)state;
    jg_tensor *x = leaf(JG_F32, 1, TU_SHAPE(2), TU_VALS(1, 2));
    jg_tensor *w = leaf(JG_F32, 1, TU_SHAPE(2), TU_VALS(3, 4));
    jg_tensor *a = jg_sum(jg_mul(x, x));        /* saves */
    jg_tensor *b = jg_sum(jg_mul_scalar(w, 3)); /* saves nothing */
    assert_int_equal(jg_backward(jg_add(a, b), NULL, 0), 0);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(2), TU_VALS(2, 4), 0);
    TU_CHECK(jg_grad(w), 1, TU_SHAPE(2), TU_VALS(3, 3), 0);
    /* b's branch would add 3 to w.grad, but a's branch fails: nothing changes */
    jg_tensor *l2 = jg_add(b, jg_mul_scalar(a, 5));
    jg_tensor *x_before = jg_grad(x);
    assert_int_equal(jg_backward(l2, NULL, 0), -1);
    TU_ERROR("second time");
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(2), TU_VALS(2, 4), 0);
    TU_CHECK(jg_grad(w), 1, TU_SHAPE(2), TU_VALS(3, 3), 0);
    assert_ptr_equal(jg_grad(x), x_before);
    /* also a leaf without a .grad yet stays without one */
    jg_tensor *v = leaf(JG_F32, 1, TU_SHAPE(2), TU_VALS(1, 1));
    jg_tensor *l3 = jg_add(jg_sum(v), jg_mul_scalar(a, 2));
    assert_int_equal(jg_backward(l3, NULL, 0), -1);
    assert_null(jg_grad(v));
}

static void test_root_checks(void **state) {
    (void)state;
    jg_tensor *x = leaf(JG_F32, 1, TU_SHAPE(3), TU_VALS(1, 2, 3));
    assert_int_equal(jg_backward(jg_mul(x, x), NULL, 0), -1);
    TU_ERROR("grad can be implicitly created only for scalar outputs");
    jg_tensor *c = tu_tensor(JG_F32, 0, NULL, TU_VALS(1));
    assert_int_equal(jg_backward(c, NULL, 0), -1);
    TU_ERROR("element 0 of tensors does not require grad and does not have a grad_fn");
    assert_int_equal(jg_backward(NULL, NULL, 0), -1);
    assert_int_equal(jg_backward(jg_sum(x), NULL, 64), -1);
    TU_ERROR("unknown flags");
    assert_null(jg_grad(x));
    /* a 1-element non-0-d root is fine */
    assert_int_equal(jg_backward(jg_slice(x, 0, 1, 2), NULL, 0), 0);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(3), TU_VALS(0, 1, 0), 0);
}

static void test_grad_mode(void **state) {
    (void)state;
    jg_tensor *x = leaf(JG_F32, 1, TU_SHAPE(2), TU_VALS(1, 2));
    assert_true(jg_is_grad_enabled());
    assert_true(jg_set_grad_enabled(false));
    assert_false(jg_is_grad_enabled());
    jg_tensor *y = jg_mul(jg_exp(x), x);
    assert_false(jg_requires_grad(y));
    assert_true(jg_is_leaf(y));
    assert_null(jg_grad_fn_name(y));
    /* in-place on a leaf is allowed without grad mode */
    assert_int_equal(jg_mul_scalar_(x, 2), 0);
    assert_false(jg_set_grad_enabled(true));
    TU_CHECK(x, 1, TU_SHAPE(2), TU_VALS(2, 4), 0);
    assert_true(jg_requires_grad(jg_mul(x, x)));
    assert_int_equal(jg_backward(jg_sum(y), NULL, 0), -1);
    TU_ERROR("does not require grad");
    /* requires_grad on non-leaves cannot be turned off */
    jg_tensor *z = jg_mul(x, x);
    jg_clear_error();
    jg_set_requires_grad(z, false);
    TU_ERROR("you can only change requires_grad flags of leaf variables");
    assert_true(jg_requires_grad(z));
}

static void test_autograd_grad(void **state) {
    (void)state;
    jg_tensor *x = leaf(JG_F64, 1, TU_SHAPE(2), TU_VALS(1, 2));
    jg_tensor *w = leaf(JG_F64, 1, TU_SHAPE(2), TU_VALS(3, 5));
    jg_tensor *u = leaf(JG_F64, 1, TU_SHAPE(2), TU_VALS(0, 0)); /* unused */
    jg_tensor *h = jg_mul(x, w);
    jg_tensor *y = jg_sum(jg_mul(h, h)); /* sum (xw)^2 */
    jg_tensor *in[3] = {x, h, w}, *res[3];
    assert_int_equal(jg_autograd_grad(1, &y, NULL, 3, in, JG_RETAIN_GRAPH, res), 0);
    TU_CHECK(res[0], 1, TU_SHAPE(2), TU_VALS(2 * 3 * 3, 2 * 10 * 5), 0); /* 2 x w^2 */
    TU_CHECK(res[1], 1, TU_SHAPE(2), TU_VALS(6, 20), 0);                 /* 2h */
    TU_CHECK(res[2], 1, TU_SHAPE(2), TU_VALS(2 * 3 * 1, 2 * 10 * 2), 0); /* 2 x^2 w */
    assert_null(jg_grad(x));
    assert_null(jg_grad(w));
    /* unused input */
    jg_tensor *in2[2] = {x, u}, *res2[2];
    assert_int_equal(jg_autograd_grad(1, &y, NULL, 2, in2, JG_RETAIN_GRAPH, res2), -1);
    TU_ERROR("One of the differentiated Tensors appears to not have been used in the graph. Set "
             "allow_unused=True if this is the desired behavior.");
    assert_null(res2[0]);
    assert_null(res2[1]);
    assert_int_equal(jg_autograd_grad(1, &y, NULL, 2, in2, JG_RETAIN_GRAPH | JG_ALLOW_UNUSED, res2),
                     0);
    TU_CHECK(res2[0], 1, TU_SHAPE(2), TU_VALS(18, 100), 0);
    assert_null(res2[1]);
    /* an input that does not require grad */
    jg_tensor *c = tu_tensor(JG_F64, 1, TU_SHAPE(2), TU_VALS(1, 1));
    assert_int_equal(jg_autograd_grad(1, &y, NULL, 1, &c, 0, res), -1);
    TU_ERROR("One of the differentiated Tensors does not require grad");
    /* grad_outputs for a non-scalar output; two outputs sum */
    jg_tensor *outs[2] = {h, jg_sum(x)};
    jg_tensor *gos[2] = {tu_tensor(JG_F64, 1, TU_SHAPE(2), TU_VALS(1, -1)), NULL};
    assert_int_equal(jg_autograd_grad(2, outs, gos, 1, &x, JG_RETAIN_GRAPH, res), 0);
    TU_CHECK(res[0], 1, TU_SHAPE(2), TU_VALS(3 + 1, -5 + 1), 0);
    /* the last call without retain frees the graph */
    assert_int_equal(jg_autograd_grad(1, &y, NULL, 1, &x, 0, res), 0);
    assert_int_equal(jg_autograd_grad(1, &y, NULL, 1, &x, 0, res), -1);
    TU_ERROR("second time");
    assert_null(jg_grad(x));
}

static void test_inplace(void **state) {
    (void)state;
    jg_tensor *x = leaf(JG_F32, 1, TU_SHAPE(3), TU_VALS(1, 2, 3));
    jg_tensor *one = jg_full(JG_F32, 1, TU_SHAPE(3), 1);
    uint64_t v0 = jg_version(x);
    assert_int_equal(jg_add_(x, one), -1);
    TU_ERROR("a leaf Variable that requires grad is being used in an in-place operation.");
    assert_true(jg_version(x) == v0);
    TU_CHECK(x, 1, TU_SHAPE(3), TU_VALS(1, 2, 3), 0);
    assert_int_equal(jg_mul_scalar_(x, 2), -1);
    assert_int_equal(jg_zero_(x), -1);
    assert_int_equal(jg_copy_(x, one), -1);

    /* every in-place op bumps the version once */
    jg_tensor *p = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(1, 2, 3));
    uint64_t pv = jg_version(p);
    assert_int_equal(jg_add_(p, one), 0);
    assert_true(jg_version(p) == pv + 1);
    assert_int_equal(jg_sub_(p, one), 0);
    assert_int_equal(jg_mul_(p, p), 0);
    assert_int_equal(jg_mul_scalar_(p, 0.5), 0);
    assert_true(jg_version(p) == pv + 4);
    TU_CHECK(p, 1, TU_SHAPE(3), TU_VALS(0.5, 2, 4.5), 0);
    assert_int_equal(jg_zero_(p), 0);
    assert_int_equal(jg_copy_(p, jg_scalar(JG_F64, 7)), 0);
    assert_true(jg_version(p) == pv + 6);
    TU_CHECK(p, 1, TU_SHAPE(3), TU_VALS(7, 7, 7), 0);

    /* modifying a tensor saved for backward */
    jg_tensor *y = jg_mul_scalar(x, 2);
    jg_tensor *z = jg_mul(y, y); /* saves y at version 0 */
    assert_int_equal(jg_add_(y, one), 0);
    assert_int_equal(jg_version(y), 1);
    jg_tensor *grad_before = jg_grad(x);
    assert_int_equal(jg_backward(jg_sum(z), NULL, 0), -1);
    TU_ERROR("one of the variables needed for gradient computation has been modified by an "
             "inplace operation: [f32 [3]], which is output 0 of AddBackward0, is at version 1; "
             "expected version 0 instead");
    assert_ptr_equal(jg_grad(x), grad_before);
    /* a saved output (sigmoid) modified in place names its producer */
    jg_tensor *s = jg_sigmoid(x);
    assert_int_equal(jg_mul_scalar_(s, 2), 0);
    assert_int_equal(jg_backward(jg_sum(s), NULL, 0), -1);
    TU_ERROR("[f32 [3]], which is output 0 of SigmoidBackward0, is at version 1; expected "
             "version 0 instead");

    /* in-place on a non-leaf with history: y = 2x; y *= (x + 1); y += x -> 2x^2 + 3x */
    jg_tensor *a = jg_mul_scalar(x, 2);
    jg_tensor *b = jg_add_scalar(x, 1);
    assert_int_equal(jg_mul_(a, b), 0);
    assert_string_equal(jg_grad_fn_name(a), "MulBackward0");
    assert_int_equal(jg_add_(a, x), 0);
    assert_string_equal(jg_grad_fn_name(a), "AddBackward0");
    TU_CHECK(a, 1, TU_SHAPE(3), TU_VALS(5, 14, 27), 0);
    assert_int_equal(jg_backward(jg_sum(a), NULL, 0), 0);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(3), TU_VALS(7, 11, 15), 0); /* 4x + 3 */
    /* q.mul_(q): the forward works; as in PyTorch, backward then finds the
     * saved other operand (q itself) modified */
    jg_clear_grad(x);
    jg_tensor *q = jg_mul_scalar(x, 1);
    if (jg_mul_(q, q) != 0)
        print_error("mul_(q, q): %s\n", jg_last_error());
    TU_CHECK(q, 1, TU_SHAPE(3), TU_VALS(1, 4, 9), 0);
    assert_int_equal(jg_backward(jg_sum(q), NULL, 0), -1);
    TU_ERROR("modified by an inplace operation: [f32 [3]], which is output 0 of ");
    TU_ERROR(", is at version 1; expected version 0 instead");
    assert_null(jg_grad(x));
    /* copy_ from a tensor requiring grad routes the gradient to the source only */
    jg_clear_grad(x);
    jg_tensor *dst = jg_full(JG_F32, 1, TU_SHAPE(3), 0);
    assert_int_equal(jg_copy_(dst, jg_mul_scalar(x, 5)), 0);
    assert_true(jg_requires_grad(dst));
    assert_int_equal(jg_backward(jg_sum(dst), NULL, 0), 0);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(3), TU_VALS(5, 5, 5), 0);
}

static void test_long_chain(void **state) {
    (void)state;
    enum { N = 1000000 };
    jg_tensor *x = leaf(JG_F32, 0, NULL, TU_VALS(0));
    jg_tensor *y = jg_retain(x);
    for (int i = 0; i < N; i++) {
        jg_scope_push();
        jg_tensor *n = jg_keep(jg_add_scalar(y, 1));
        jg_scope_pop();
        assert_non_null(n);
        jg_release(y);
        y = n;
    }
    assert_true(jg_item(y) == (float)N);
    jg_release(y); /* frees a million nodes without recursion */
    /* backward through a long chain works too */
    y = jg_retain(x);
    for (int i = 0; i < 100000; i++) {
        jg_scope_push();
        jg_tensor *n = jg_keep(jg_mul_scalar(y, 1.0));
        jg_scope_pop();
        jg_release(y);
        y = n;
    }
    assert_int_equal(jg_backward(y, NULL, 0), 0);
    TU_CHECK(jg_grad(x), 0, NULL, TU_VALS(1), 0);
    jg_release(y);
}

static void test_scopes(void **state) {
    (void)state;
    jg_tensor *kept;
    jg_scope_push();
    jg_tensor *a = jg_full(JG_F64, 1, TU_SHAPE(2), 3);
    jg_scope_push();
    kept = jg_keep(jg_add(a, a));
    jg_tensor *r = jg_retain(jg_mul(a, a)); /* an extra reference survives the pop */
    jg_scope_pop();
    TU_CHECK(kept, 1, TU_SHAPE(2), TU_VALS(6, 6), 0);
    TU_CHECK(r, 1, TU_SHAPE(2), TU_VALS(9, 9), 0);
    jg_release(r);
    jg_scope_pop(); /* releases a; kept is ours */
    TU_CHECK(kept, 1, TU_SHAPE(2), TU_VALS(6, 6), 0);
    jg_release(kept);
    /* keep of a tensor not in the innermost scope changes nothing */
    jg_tensor *outer = jg_full(JG_F32, 0, NULL, 1);
    jg_scope_push();
    assert_ptr_equal(jg_keep(outer), outer);
    jg_scope_pop();
    assert_true(jg_item(outer) == 1);
    assert_null(jg_keep(NULL));
    /* a tensor kept out of the test's own scope must be released by hand */
    jg_tensor *mine = jg_keep(jg_full(JG_F32, 0, NULL, 2));
    assert_true(jg_item(mine) == 2);
    jg_release(mine);
}

static void test_accessors(void **state) {
    (void)state;
    jg_tensor *t = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(1, 2, 3));
    double v = jg_item(t);
    assert_true(isnan(v));
    TU_ERROR("a Tensor with 3 elements cannot be converted to Scalar");
    assert_true(jg_item(jg_slice(t, 0, 2, 3)) == 3);
    float buf[4];
    assert_int_equal(jg_copy_to(t, buf, sizeof buf), -1);
    TU_ERROR("jg_copy_to: destination holds 16 bytes but f32[3] needs 12");
    assert_int_equal(jg_copy_to(t, NULL, 12), -1);
    TU_ERROR("destination is NULL");
    assert_int_equal(
        jg_copy_to(jg_transpose(tu_tensor(JG_F32, 2, TU_SHAPE(2, 2), TU_VALS(1, 2, 3, 4)), 0, 1),
                   buf, 16),
        0);
    assert_true(buf[0] == 1 && buf[1] == 3 && buf[2] == 2 && buf[3] == 4);
    char d[32];
    jg_describe(jg_full(JG_I64, 2, TU_SHAPE(2, 3), 0), d, sizeof d);
    assert_string_equal(d, "i64[2, 3]");
    assert_string_equal(jg_dtype_name(JG_F64), "float64");
    /* grad_fn names */
    jg_tensor *x = leaf(JG_F32, 1, TU_SHAPE(3), TU_VALS(1, 2, 3));
    assert_null(jg_grad_fn_name(x));
    assert_string_equal(jg_grad_fn_name(jg_mul(x, x)), "MulBackward0");
    assert_string_equal(jg_grad_fn_name(jg_mul_scalar(x, 2)), "MulBackward1");
    assert_string_equal(jg_grad_fn_name(jg_sum(x)), "SumBackward0");
    /* set_grad checks */
    assert_int_equal(jg_set_grad(x, jg_full(JG_F32, 1, TU_SHAPE(2), 0)), -1);
    TU_ERROR("assigned grad has data of a different size");
    assert_int_equal(jg_set_grad(x, jg_full(JG_F64, 1, TU_SHAPE(3), 0)), -1);
    TU_ERROR("assigned grad has data of a different type");
    assert_int_equal(jg_set_grad(x, jg_full(JG_F32, 1, TU_SHAPE(3), 5)), 0);
    assert_int_equal(jg_backward(jg_sum(x), NULL, 0), 0);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(3), TU_VALS(6, 6, 6), 0);
}

static void moments(jg_tensor *t, double *mean, double *var, double *lo, double *hi) {
    double v[10000];
    tu_values(t, v);
    double s = 0, ss = 0;
    *lo = INFINITY, *hi = -INFINITY;
    for (int i = 0; i < 10000; i++) {
        s += v[i];
        *lo = v[i] < *lo ? v[i] : *lo;
        *hi = v[i] > *hi ? v[i] : *hi;
    }
    *mean = s / 10000;
    for (int i = 0; i < 10000; i++)
        ss += (v[i] - *mean) * (v[i] - *mean);
    *var = ss / 9999;
}

static void test_rng(void **state) {
    (void)state;
    for (int dti = 0; dti < 2; dti++) {
        jg_dtype dt = dti ? JG_F64 : JG_F32;
        jg_manual_seed(1234);
        jg_tensor *a = jg_randn(dt, 2, TU_SHAPE(100, 100));
        jg_tensor *u = jg_rand(dt, 1, TU_SHAPE(10000));
        jg_manual_seed(1234);
        jg_tensor *b = jg_randn(dt, 2, TU_SHAPE(100, 100));
        jg_tensor *u2 = jg_rand(dt, 1, TU_SHAPE(10000));
        TU_SAME(a, b);
        TU_SAME(u, u2);
        jg_manual_seed(1235);
        jg_tensor *c = jg_randn(dt, 2, TU_SHAPE(100, 100));
        double va[10000], vc[10000];
        tu_values(a, va);
        tu_values(c, vc);
        assert_true(memcmp(va, vc, sizeof va) != 0);
        /* the stream continues: a second draw differs from the first */
        jg_manual_seed(1234);
        jg_tensor *a1 = jg_randn(dt, 1, TU_SHAPE(5));
        jg_tensor *a2 = jg_randn(dt, 1, TU_SHAPE(5));
        double v1[5], v2[5];
        tu_values(a1, v1);
        tu_values(a2, v2);
        assert_true(memcmp(v1, v2, sizeof v1) != 0);
        double mean, var, lo, hi;
        moments(a, &mean, &var, &lo, &hi);
        assert_true(fabs(mean) < 0.05);
        assert_true(fabs(var - 1) < 0.06);
        assert_true(lo < -3 && hi > 3);
        moments(u, &mean, &var, &lo, &hi);
        assert_true(fabs(mean - 0.5) < 0.02);
        assert_true(fabs(var - 1.0 / 12) < 0.006);
        assert_true(lo >= 0 && hi < 1);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_accumulation),
        TU_TEST(test_retain_graph),
        TU_TEST(test_failed_backward_changes_nothing),
        TU_TEST(test_root_checks),
        TU_TEST(test_grad_mode),
        TU_TEST(test_autograd_grad),
        TU_TEST(test_inplace),
        TU_TEST(test_long_chain),
        TU_TEST(test_scopes),
        TU_TEST(test_accessors),
        TU_TEST(test_rng),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
