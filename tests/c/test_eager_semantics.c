/* Eager details that follow PyTorch (values checked against PyTorch 1.13):
 * tensors over caller memory, relu at NaN and -0.0, zero second
 * derivatives of abs and relu, zero_ and div_ with history, max() sharing
 * the gradient among ties, in-place ops on max(dim).values, views made
 * under no_grad, custom functions returning and saving their input, and
 * the layout of elementwise results. */
#include "testutil.h"

#include <math.h>
#include <string.h>

static void check_strides(const jg_tensor *t, int ndim, const int64_t *stride) {
    assert_int_equal(jg_ndim(t), ndim);
    for (int d = 0; d < ndim; d++)
        if (jg_shape(t)[d] != 1)
            assert_int_equal(jg_strides(t)[d], stride[d]);
}

/* bitwise: tells -0.0 from 0.0 and matches NaN */
static void check_bits_f32(const jg_tensor *t, int n, const float *want) {
    float got[16];
    assert_true(n <= 16 && jg_numel(t) == n);
    assert_int_equal(jg_copy_to(t, got, sizeof(float) * (size_t)n), 0);
    for (int i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], sizeof(float)) != 0)
            fail_msg("element %d: got %g, want %g", i, (double)got[i], (double)want[i]);
}

/* ------------------------------------------------------------ from_blob */

static int released;
static void count_release(void *p) {
    assert_ptr_equal(p, &released);
    released++;
}

static void test_from_blob_shares_memory_and_releases_once(void **state) {
    (void)state;
    double buf[6] = {0, 1, 2, 3, 4, 5};
    released = 0;
    /* a transposed view of the 2x3 buffer */
    jg_tensor *t = jg_keep(jg_tensor_from_blob(JG_F64, 2, TU_SHAPE(3, 2), TU_SHAPE(1, 3), buf,
                                               count_release, &released));
    assert_non_null(t);
    TU_CHECK(t, 2, TU_SHAPE(3, 2), TU_VALS(0, 3, 1, 4, 2, 5), 0);
    buf[1] = 10;
    TU_CHECK(t, 2, TU_SHAPE(3, 2), TU_VALS(0, 3, 10, 4, 2, 5), 0);
    jg_scope_push();
    assert_int_equal(jg_mul_scalar_(t, 2.0), 0);
    jg_tensor *v = jg_keep(jg_slice(t, 0, 1, 3)); /* a view outlives t */
    jg_scope_pop();
    assert_true(buf[1] == 20 && buf[5] == 10);
    jg_release(t);
    assert_int_equal(released, 0);
    TU_CHECK(v, 2, TU_SHAPE(2, 2), TU_VALS(20, 8, 4, 10), 0);
    jg_release(v);
    assert_int_equal(released, 1);
    /* row-major when strides are NULL; f32 and i64 */
    float f[4] = {1, 2, 3, 4};
    jg_tensor *g = jg_tensor_from_blob(JG_F32, 2, TU_SHAPE(2, 2), NULL, f, NULL, NULL);
    TU_CHECK(g, 2, TU_SHAPE(2, 2), TU_VALS(1, 2, 3, 4), 0);
    int64_t i[2] = {7, 8};
    TU_CHECK(jg_tensor_from_blob(JG_I64, 1, TU_SHAPE(2), NULL, i, NULL, NULL), 1, TU_SHAPE(2),
             TU_VALS(7, 8), 0);
}

static void test_from_blob_bad_input(void **state) {
    (void)state;
    double buf[4] = {0};
    released = 0;
    assert_null(
        jg_tensor_from_blob(JG_F64, 1, TU_SHAPE(4), TU_SHAPE(-1), buf, count_release, &released));
    TU_ERROR("negative stride");
    assert_null(jg_tensor_from_blob(JG_F64, 2, TU_SHAPE(INT64_C(1) << 62, 1 << 10), NULL, buf,
                                    count_release, &released));
    TU_ERROR("Storage size calculation overflowed");
    assert_null(jg_tensor_from_blob(JG_F64, 3, TU_SHAPE(0, INT64_C(1) << 62, 1 << 10), NULL, buf,
                                    count_release, &released));
    TU_ERROR("Storage size calculation overflowed");
    assert_null(jg_tensor_from_blob(JG_F64, 1, TU_SHAPE(4), NULL, NULL, NULL, NULL));
    TU_ERROR("data is NULL");
    assert_int_equal(released, 0); /* failure: the caller keeps its memory */
}

/* ------------------------------------------------------------ relu, abs */

static void test_relu_nan_and_negative_zero(void **state) {
    (void)state;
    const float in[5] = {NAN, -0.0f, 0.0f, 1.0f, -1.0f};
    jg_tensor *x = jg_tensor_new(JG_F32, 1, TU_SHAPE(5), in);
    jg_set_requires_grad(x, true);
    jg_tensor *y = jg_relu(x);
    check_bits_f32(y, 5, (const float[]){NAN, -0.0f, 0.0f, 1.0f, 0.0f});
    assert_int_equal(jg_backward(jg_sum(y), NULL, 0), 0);
    /* threshold_backward: zero where the output is <= 0, the gradient at NaN */
    check_bits_f32(jg_grad(x), 5, (const float[]){1, 0, 0, 1, 0});
}

static void test_second_derivative_of_abs_and_relu_is_zeros(void **state) {
    (void)state;
    jg_tensor *(*fns[2])(jg_tensor *) = {jg_abs, jg_relu};
    for (int f = 0; f < 2; f++) {
        jg_tensor *p = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(1, -2, 0));
        jg_set_requires_grad(p, true);
        jg_tensor *g, *g2;
        assert_int_equal(jg_autograd_grad(1, (jg_tensor *[]){jg_sum(fns[f](p))}, NULL, 1, &p,
                                          JG_CREATE_GRAPH, &g),
                         0);
        assert_int_equal(
            jg_autograd_grad(1, (jg_tensor *[]){jg_sum(g)}, NULL, 1, &p, JG_ALLOW_UNUSED, &g2), 0);
        assert_non_null(g2); /* zeros, not "unused" */
        TU_CHECK(g2, 1, TU_SHAPE(3), TU_VALS(0, 0, 0), 0);
    }
}

/* ------------------------------------------------------------ in place */

static void test_zero_keeps_history(void **state) {
    (void)state;
    jg_tensor *x = tu_tensor(JG_F32, 1, TU_SHAPE(2), TU_VALS(1, 2));
    jg_set_requires_grad(x, true);
    jg_tensor *y = jg_mul_scalar(x, 2.0);
    assert_int_equal(jg_zero_(y), 0);
    assert_true(jg_requires_grad(y));
    assert_string_equal(jg_grad_fn_name(y), "ZeroBackward0");
    TU_CHECK(y, 1, TU_SHAPE(2), TU_VALS(0, 0), 0);
    assert_int_equal(jg_backward(jg_sum(jg_add(y, x)), NULL, 0), 0);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(2), TU_VALS(1, 1), 0);
    /* without history: just zeros, and no history appears */
    jg_tensor *z = tu_tensor(JG_F32, 1, TU_SHAPE(2), TU_VALS(NAN, 3));
    uint64_t v0 = jg_version(z);
    assert_int_equal(jg_zero_(z), 0);
    TU_CHECK(z, 1, TU_SHAPE(2), TU_VALS(0, 0), 0);
    assert_false(jg_requires_grad(z));
    assert_true(jg_version(z) == v0 + 1);
}

static void test_div_inplace_with_history(void **state) {
    (void)state;
    jg_tensor *x = tu_tensor(JG_F32, 1, TU_SHAPE(2), TU_VALS(1, 2));
    jg_tensor *q = tu_tensor(JG_F32, 1, TU_SHAPE(2), TU_VALS(2, 4));
    jg_set_requires_grad(x, true);
    jg_set_requires_grad(q, true);
    jg_tensor *y = jg_mul_scalar(x, 3.0);
    assert_int_equal(jg_div_(y, q), 0);
    assert_string_equal(jg_grad_fn_name(y), "DivBackward0");
    TU_CHECK(y, 1, TU_SHAPE(2), TU_VALS(1.5, 1.5), 0);
    assert_int_equal(jg_backward(jg_sum(y), NULL, 0), 0);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(2), TU_VALS(1.5, 0.75), 0);
    TU_CHECK(jg_grad(q), 1, TU_SHAPE(2), TU_VALS(-0.75, -0.375), 0);
    /* int64 / anything is float: refused in place, the tensor untouched */
    jg_tensor *i = tu_tensor(JG_I64, 1, TU_SHAPE(2), TU_VALS(4, 6));
    assert_int_equal(jg_div_(i, tu_tensor(JG_I64, 1, TU_SHAPE(2), TU_VALS(2, 3))), -1);
    TU_ERROR("result type Float can't be cast to the desired output type Long");
    TU_CHECK(i, 1, TU_SHAPE(2), TU_VALS(4, 6), 0);
}

static void test_inplace_on_max_values_keeps_backward(void **state) {
    (void)state;
    jg_tensor *x = tu_tensor(JG_F32, 2, TU_SHAPE(2, 2), TU_VALS(1, 3, 4, 2));
    jg_set_requires_grad(x, true);
    jg_tensor *v, *i;
    assert_int_equal(jg_max_dim(x, 1, false, &v, &i), 0);
    assert_int_equal(jg_mul_scalar_(v, 2.0), 0);
    assert_int_equal(jg_backward(jg_sum(v), NULL, 0), 0);
    TU_CHECK(jg_grad(x), 2, TU_SHAPE(2, 2), TU_VALS(0, 2, 2, 0), 0);
}

/* ------------------------------------------------------------ max() */

static void test_max_ties_share_the_gradient(void **state) {
    (void)state;
    jg_tensor *x = tu_tensor(JG_F32, 2, TU_SHAPE(2, 2), TU_VALS(1, 3, 3, 2));
    jg_set_requires_grad(x, true);
    jg_tensor *m = jg_max(x);
    assert_int_equal(jg_ndim(m), 0);
    assert_string_equal(jg_grad_fn_name(m), "MaxBackward1");
    assert_int_equal(jg_backward(jg_mul_scalar(m, 3.0), NULL, 0), 0);
    TU_CHECK(jg_grad(x), 2, TU_SHAPE(2, 2), TU_VALS(0, 1.5, 1.5, 0), 0);
    /* NaN is the max; the NaNs share the gradient */
    jg_tensor *n = tu_tensor(JG_F64, 1, TU_SHAPE(4), TU_VALS(1, NAN, 2, NAN));
    jg_set_requires_grad(n, true);
    jg_tensor *mn = jg_max(n);
    assert_true(isnan(jg_item(mn)));
    assert_int_equal(jg_backward(mn, NULL, 0), 0);
    TU_CHECK(jg_grad(n), 1, TU_SHAPE(4), TU_VALS(0, 0.5, 0, 0.5), 0);
    /* a transposed input, int64, and no elements */
    jg_tensor *t =
        jg_transpose(tu_tensor(JG_I64, 2, TU_SHAPE(2, 3), TU_VALS(1, 9, 2, 3, 4, 5)), 0, 1);
    assert_true(jg_item(jg_max(t)) == 9);
    assert_null(jg_max(jg_full(JG_F32, 1, TU_SHAPE(0), 0)));
    TU_ERROR("Expected reduction dim to be specified for input.numel() == 0");
}

/* ------------------------------------------------------------ no_grad views */

static void test_view_made_under_no_grad_drops_gradients(void **state) {
    (void)state;
    jg_tensor *x = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(1, 1, 1));
    jg_tensor *w = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(1, 2, 3));
    jg_set_requires_grad(x, true);
    jg_set_requires_grad(w, true);
    bool prev = jg_set_grad_enabled(false);
    jg_tensor *v = jg_slice(x, 0, 0, 3);
    jg_tensor *c = jg_mul_scalar(x, 1.0); /* not a view: no grad */
    jg_set_grad_enabled(prev);
    assert_true(jg_requires_grad(v)); /* as PyTorch: the base's flag shows */
    assert_true(jg_is_leaf(v));
    assert_false(jg_requires_grad(c));
    assert_int_equal(jg_backward(jg_sum(jg_mul(v, w)), NULL, 0), 0);
    assert_null(jg_grad(x)); /* neither the base nor the view gets one */
    assert_null(jg_grad(v));
    TU_CHECK(jg_grad(w), 1, TU_SHAPE(3), TU_VALS(1, 1, 1), 0);
    /* modified in place with grad mode on: refused (PyTorch's message); under
     * no_grad: fine, and the base sees it */
    assert_int_equal(jg_mul_scalar_(v, 2.0), -1);
    TU_ERROR("A view was created in no_grad mode and is being modified inplace with grad mode "
             "enabled");
    prev = jg_set_grad_enabled(false);
    assert_int_equal(jg_mul_scalar_(v, 2.0), 0);
    jg_set_grad_enabled(prev);
    TU_CHECK(x, 1, TU_SHAPE(3), TU_VALS(2, 2, 2), 0);
    /* used with grad mode on after that write (its base requires grad):
     * refused, as PyTorch refuses it when it asks for the view's grad_fn */
    jg_set_requires_grad(v, true);
    assert_null(jg_mul(v, w));
    TU_ERROR("A view was created in no_grad mode and its base or another view of its base has "
             "been modified inplace with grad mode enabled. Given that");
    /* one made since, made to require grad of its own, accumulates */
    prev = jg_set_grad_enabled(false);
    jg_tensor *v2 = jg_slice(x, 0, 0, 3);
    jg_set_grad_enabled(prev);
    jg_set_requires_grad(v2, true);
    assert_int_equal(jg_backward(jg_sum(jg_mul(v2, w)), NULL, 0), 0);
    TU_CHECK(jg_grad(v2), 1, TU_SHAPE(3), TU_VALS(1, 2, 3), 0);
    assert_null(jg_grad(x));
}

/* Regression (in-place sweep seeds 14020, 20971, 934): a view made under
 * no_grad of a tensor that does not require grad was not tracked, where
 * PyTorch refuses it written with grad mode on once anything involved
 * requires grad, and used after its base was written once the base does. */
static void test_view_made_under_no_grad_of_base_without_grad(void **state) {
    (void)state;
    jg_tensor *x = tu_tensor(JG_F32, 1, TU_SHAPE(4), TU_VALS(1, 2, 3, 4));
    jg_tensor *y = tu_tensor(JG_F32, 1, TU_SHAPE(1), TU_VALS(0.5));
    jg_set_requires_grad(y, true);
    bool prev = jg_set_grad_enabled(false);
    jg_tensor *v = jg_slice(x, 0, 1, 4);
    jg_set_grad_enabled(prev);
    /* written with a value that requires grad: refused, nothing written */
    assert_int_equal(jg_add_(v, y), -1);
    TU_ERROR("A view was created in no_grad mode and is being modified inplace with grad mode "
             "enabled. Given that");
    TU_CHECK(x, 1, TU_SHAPE(4), TU_VALS(1, 2, 3, 4), 0);
    /* nothing requires grad: fine */
    assert_int_equal(jg_mul_scalar_(v, 2.0), 0);
    TU_CHECK(x, 1, TU_SHAPE(4), TU_VALS(1, 4, 6, 8), 0);
    /* its base takes history through another view: the view requires grad
     * and, its base written since it was made, is refused when used with
     * grad mode on (written too), and not under no_grad */
    assert_int_equal(jg_add_(jg_slice(x, 0, 0, 1), y), 0);
    assert_true(jg_requires_grad(v));
    assert_null(jg_mul(v, v));
    TU_ERROR("A view was created in no_grad mode and its base or another view of its base has "
             "been modified inplace with grad mode enabled. Given that");
    assert_int_equal(jg_mul_scalar_(v, 2.0), -1);
    TU_ERROR("A view was created in no_grad mode and is being modified inplace");
    prev = jg_set_grad_enabled(false);
    assert_non_null(jg_mul(v, v));
    jg_set_grad_enabled(prev);
    TU_CHECK(x, 1, TU_SHAPE(4), TU_VALS(1.5, 4, 6, 8), 0);
}

/* Regression (in-place sweep seed 1585): a view made while its base did not
 * require grad, written in place after the base took history through
 * another view and before the view was used: PyTorch reads the view's own
 * grad_fn (none yet) and refuses it as a leaf.  Used first, it is fine. */
static void test_view_without_history_written_after_base_took_some(void **state) {
    (void)state;
    jg_tensor *y = tu_tensor(JG_F32, 1, TU_SHAPE(1), TU_VALS(0.5));
    jg_set_requires_grad(y, true);
    for (int used = 0; used < 2; used++) {
        jg_tensor *x = tu_tensor(JG_F32, 1, TU_SHAPE(4), TU_VALS(1, 2, 3, 4));
        jg_tensor *v = jg_slice(x, 0, 1, 4);
        assert_int_equal(jg_add_(jg_slice(x, 0, 0, 1), y), 0);
        if (used)
            assert_non_null(jg_mul(v, v));
        int rc = jg_mul_scalar_(v, 2.0);
        if (used) {
            assert_int_equal(rc, 0);
            assert_string_equal(jg_grad_fn_name(x), "CopySlices");
            TU_CHECK(x, 1, TU_SHAPE(4), TU_VALS(1.5, 4, 6, 8), 0);
        } else {
            assert_int_equal(rc, -1);
            TU_ERROR("a leaf Variable that requires grad is being used in an in-place operation.");
            TU_CHECK(x, 1, TU_SHAPE(4), TU_VALS(1.5, 2, 3, 4), 0);
        }
    }
}

/* ------------------------------------------------------------ custom functions */

static int id_save_forward(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)n;
    if (jg_ctx_save_for_backward(ctx, 1, in) < 0)
        return -1;
    out[0] = in[0];
    return 1;
}

static int id_save_backward(jg_ctx *ctx, int n_out, jg_tensor *const *gout, int n_in,
                            jg_tensor **gin) {
    (void)n_out, (void)n_in;
    jg_tensor *x = jg_ctx_saved(ctx, 0);
    gin[0] = x ? jg_mul(gout[0], x) : NULL;
    return gin[0] ? 1 : -1;
}

static const jg_function IdSave = {"IdSave", id_save_forward, id_save_backward, NULL};

static void test_identity_function_saving_its_input_double_backward(void **state) {
    (void)state;
    jg_tensor *x = tu_tensor(JG_F32, 1, TU_SHAPE(2), TU_VALS(1, 2));
    jg_set_requires_grad(x, true);
    jg_tensor *y, *g;
    assert_int_equal(jg_apply(&IdSave, 1, &x, NULL, 0, &y), 1);
    assert_int_equal(
        jg_autograd_grad(1, (jg_tensor *[]){jg_sum(y)}, NULL, 1, &x, JG_CREATE_GRAPH, &g), 0);
    TU_CHECK(g, 1, TU_SHAPE(2), TU_VALS(1, 2), 0);
    /* the saved tensor is the input itself: d(sum(g))/dx = 1, not through IdSave again */
    assert_int_equal(jg_backward(jg_sum(g), NULL, 0), 0);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(2), TU_VALS(1, 1), 0);
}

/* ------------------------------------------------------------ layout */

static void test_elementwise_results_keep_the_operands_layout(void **state) {
    (void)state;
    jg_tensor *a = jg_transpose(jg_full(JG_F32, 2, TU_SHAPE(2, 3), 1.0), 0, 1); /* [3, 2] */
    jg_tensor *c = jg_full(JG_F32, 2, TU_SHAPE(3, 2), 1.0);
    check_strides(jg_add(a, a), 2, TU_SHAPE(1, 3));
    check_strides(jg_exp(a), 2, TU_SHAPE(1, 3));
    check_strides(jg_mul_scalar(a, 2.0), 2, TU_SHAPE(1, 3));
    check_strides(jg_add(a, c), 2, TU_SHAPE(1, 3)); /* the first operand decides */
    check_strides(jg_add(c, a), 2, TU_SHAPE(2, 1));
    check_strides(jg_add(a, jg_full(JG_F32, 1, TU_SHAPE(2), 1.0)), 2, TU_SHAPE(1, 3));
    check_strides(jg_to_dtype(a, JG_F64), 2, TU_SHAPE(1, 3));
    check_strides(jg_clone(a), 2, TU_SHAPE(2, 1)); /* contiguous() is a clone */
    /* so flattening such a result copies (and .view fails) as in PyTorch */
    jg_tensor *s = jg_add(a, a);
    assert_false(jg_same_storage(jg_reshape(s, 1, TU_SHAPE(6)), s));
    /* 3-d: dims ordered by the operands' strides */
    jg_tensor *p = jg_permute(jg_full(JG_F32, 3, TU_SHAPE(2, 3, 4), 1.0), (const int[]){2, 0, 1});
    check_strides(jg_neg(p), 3, TU_SHAPE(1, 12, 4));
    TU_CHECK(jg_add(a, c), 2, TU_SHAPE(3, 2), TU_VALS(2, 2, 2, 2, 2, 2), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_from_blob_shares_memory_and_releases_once),
        TU_TEST(test_from_blob_bad_input),
        TU_TEST(test_relu_nan_and_negative_zero),
        TU_TEST(test_second_derivative_of_abs_and_relu_is_zeros),
        TU_TEST(test_zero_keeps_history),
        TU_TEST(test_div_inplace_with_history),
        TU_TEST(test_inplace_on_max_values_keeps_backward),
        TU_TEST(test_max_ties_share_the_gradient),
        TU_TEST(test_view_made_under_no_grad_drops_gradients),
        TU_TEST(test_view_made_under_no_grad_of_base_without_grad),
        TU_TEST(test_view_without_history_written_after_base_took_some),
        TU_TEST(test_identity_function_saving_its_input_double_backward),
        TU_TEST(test_elementwise_results_keep_the_operands_layout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
