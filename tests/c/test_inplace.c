/* In-place ops on views and their bases, eager (values and gradients checked
 * against PyTorch 1.13), and in-place ops inside compiled programs (compiled
 * == eager bitwise on both backends). */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

static jg_tensor *leaf(int n, const double *v) {
    jg_tensor *t = tu_tensor(JG_F32, 1, (int64_t[]){n}, v);
    jg_set_requires_grad(t, true);
    return t;
}

/* A view taken before an in-place op on its base sees the base's new
 * history: v = (p*1)[0:2]; base *= q; v.sum().backward() -> p.grad = q[0:2],
 * q.grad = p[0:2] (torch: [3, 4, 0], [1, 2, 0]). */
static void test_view_rebased_after_base_inplace(void **state) {
    (void)state;
    jg_tensor *p = leaf(3, TU_VALS(1, 2, 3)), *q = leaf(3, TU_VALS(3, 4, 5));
    jg_tensor *base = jg_mul_scalar(p, 1.0);
    jg_tensor *v = jg_slice(base, 0, 0, 2);
    assert_int_equal(jg_mul_(base, q), 0);
    TU_CHECK(v, 1, TU_SHAPE(2), TU_VALS(3, 8), 0);
    assert_int_equal(jg_backward(jg_sum(v), NULL, 0), 0);
    TU_CHECK(jg_grad(p), 1, TU_SHAPE(3), TU_VALS(3, 4, 0), 0);
    assert_non_null(jg_grad(q));
    TU_CHECK(jg_grad(q), 1, TU_SHAPE(3), TU_VALS(1, 2, 0), 0);
}

/* A view of a base without grad starts requiring grad when the base is
 * written with a value that does (torch: v.requires_grad becomes True). */
static void test_view_requires_grad_after_base_write(void **state) {
    (void)state;
    jg_tensor *b = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(0, 0, 0));
    jg_tensor *v = jg_slice(b, 0, 0, 2);
    assert_int_equal(jg_mul_scalar_(b, 1.0), 0);
    assert_false(jg_requires_grad(v));
    jg_tensor *o = leaf(3, TU_VALS(1, 1, 1));
    assert_int_equal(jg_add_(b, o), 0);
    assert_true(jg_requires_grad(v));
    assert_int_equal(jg_backward(jg_sum(v), NULL, 0), 0);
    TU_CHECK(jg_grad(o), 1, TU_SHAPE(3), TU_VALS(1, 1, 0), 0);
}

/* Writing into a view rebases the base's history (CopySlices):
 * base = p*1; base[0:2] *= q; (base * [1, 10, 100]).sum().backward() ->
 * p.grad [3, 40, 100], q.grad [1, 20]. */
static void test_inplace_on_view_copyslices(void **state) {
    (void)state;
    jg_tensor *p = leaf(3, TU_VALS(1, 2, 3)), *q = leaf(2, TU_VALS(3, 4));
    jg_tensor *base = jg_mul_scalar(p, 1.0);
    jg_tensor *v = jg_slice(base, 0, 0, 2);
    assert_int_equal(jg_mul_(v, q), 0);
    TU_CHECK(base, 1, TU_SHAPE(3), TU_VALS(3, 8, 3), 0);
    jg_tensor *w = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(1, 10, 100));
    assert_int_equal(jg_backward(jg_sum(jg_mul(base, w)), NULL, 0), 0);
    TU_CHECK(jg_grad(p), 1, TU_SHAPE(3), TU_VALS(3, 40, 100), 0);
    TU_CHECK(jg_grad(q), 1, TU_SHAPE(2), TU_VALS(1, 20), 0);
}

/* Through a chain of views (reshape, transpose, row): base = p*1;
 * base.view(2,2).t()[0] *= [5, 7]; base.backward([1, 2, 3, 4]) ->
 * p.grad [5, 2, 21, 4]. */
static void test_inplace_on_view_chain(void **state) {
    (void)state;
    jg_tensor *p = leaf(4, TU_VALS(1, 2, 3, 4));
    jg_tensor *base = jg_mul_scalar(p, 1.0);
    jg_tensor *t = jg_transpose(jg_reshape(base, 2, TU_SHAPE(2, 2)), 0, 1);
    jg_tensor *row = jg_reshape(jg_slice(t, 0, 0, 1), 1, TU_SHAPE(2));
    jg_tensor *c = tu_tensor(JG_F32, 1, TU_SHAPE(2), TU_VALS(5, 7));
    assert_int_equal(jg_mul_(row, c), 0);
    TU_CHECK(base, 1, TU_SHAPE(4), TU_VALS(5, 2, 21, 4), 0);
    jg_tensor *g = tu_tensor(JG_F32, 1, TU_SHAPE(4), TU_VALS(1, 2, 3, 4));
    assert_int_equal(jg_backward(base, g, 0), 0);
    TU_CHECK(jg_grad(p), 1, TU_SHAPE(4), TU_VALS(5, 2, 21, 4), 0);
}

/* copy_ and zero_ into a view: the region's old history gets no gradient. */
static void test_copy_into_view(void **state) {
    (void)state;
    jg_tensor *p = leaf(3, TU_VALS(1, 2, 3)), *q = leaf(1, TU_VALS(9));
    jg_tensor *base = jg_mul_scalar(p, 2.0);
    assert_int_equal(jg_copy_(jg_slice(base, 0, 1, 2), q), 0);
    assert_int_equal(jg_zero_(jg_slice(base, 0, 2, 3)), 0);
    TU_CHECK(base, 1, TU_SHAPE(3), TU_VALS(2, 9, 0), 0);
    jg_tensor *w = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(1, 10, 100));
    assert_int_equal(jg_backward(jg_sum(jg_mul(base, w)), NULL, 0), 0);
    TU_CHECK(jg_grad(p), 1, TU_SHAPE(3), TU_VALS(2, 0, 0), 0);
    TU_CHECK(jg_grad(q), 1, TU_SHAPE(1), TU_VALS(10), 0);
}

static void test_inplace_on_view_of_leaf_refused(void **state) {
    (void)state;
    jg_tensor *p = leaf(3, TU_VALS(1, 2, 3));
    assert_int_equal(jg_mul_scalar_(jg_slice(p, 0, 0, 2), 2.0), -1);
    TU_ERROR("a view of a leaf Variable that requires grad is being used in an in-place "
             "operation.");
    TU_CHECK(p, 1, TU_SHAPE(3), TU_VALS(1, 2, 3), 0);
    bool prev = jg_set_grad_enabled(false); /* allowed without grad mode */
    assert_int_equal(jg_mul_scalar_(jg_slice(p, 0, 0, 2), 2.0), 0);
    jg_set_grad_enabled(prev);
    TU_CHECK(p, 1, TU_SHAPE(3), TU_VALS(2, 4, 3), 0);
}

#define MSG_INTERNAL                                                                               \
    "unsupported operation: more than one element of the written-to tensor refers to a single "    \
    "memory location. Please clone() the tensor before performing the operation."

/* Writing into an expanded view is refused with PyTorch's message, data and
 * version untouched. */
static void test_inplace_into_expand_refused(void **state) {
    (void)state;
    jg_tensor *z = tu_tensor(JG_F32, 1, TU_SHAPE(1), TU_VALS(0));
    jg_tensor *e = jg_expand(z, 1, TU_SHAPE(3));
    jg_tensor *one = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(1, 1, 1));
    uint64_t ver = jg_version(z);
    assert_int_equal(jg_add_(e, one), -1);
    TU_ERROR(MSG_INTERNAL);
    assert_int_equal(jg_mul_scalar_(e, 2.0), -1);
    TU_ERROR(MSG_INTERNAL);
    assert_int_equal(jg_copy_(e, one), -1);
    TU_ERROR(MSG_INTERNAL);
    assert_int_equal(jg_zero_(e), -1);
    TU_ERROR(MSG_INTERNAL);
    assert_true(jg_version(z) == ver);
    TU_CHECK(z, 1, TU_SHAPE(1), TU_VALS(0), 0);
    /* with autograd too */
    jg_tensor *p = leaf(1, TU_VALS(1));
    jg_tensor *b = jg_mul_scalar(p, 1.0);
    assert_int_equal(jg_add_(jg_expand(b, 1, TU_SHAPE(3)), one), -1);
    TU_ERROR(MSG_INTERNAL);
}

/* copy_ between overlapping views: dense ones partly overlapping are refused
 * as PyTorch does; strided ones are copied through a temporary, never with
 * overlapping memcpy (ASan memcpy-param-overlap). */
static void test_copy_overlapping_views(void **state) {
    (void)state;
    double v[64];
    for (int i = 0; i < 64; i++)
        v[i] = i;
    jg_tensor *x = tu_tensor(JG_F64, 1, TU_SHAPE(64), v);
    assert_int_equal(jg_copy_(jg_slice(x, 0, 1, 64), jg_slice(x, 0, 0, 63)), -1);
    TU_ERROR("some elements of the input tensor and the written-to tensor refer to a single "
             "memory location");
    TU_CHECK(x, 1, TU_SHAPE(64), v, 0);
    /* the same region: a no-op */
    assert_int_equal(jg_copy_(jg_slice(x, 0, 0, 63), jg_slice(x, 0, 0, 63)), 0);
    TU_CHECK(x, 1, TU_SHAPE(64), v, 0);
    /* columns 1..2 of an [8, 8] matrix from columns 0..1 (strided: copied) */
    jg_tensor *m = jg_reshape(x, 2, TU_SHAPE(8, 8));
    assert_int_equal(jg_copy_(jg_slice(m, 1, 1, 3), jg_slice(m, 1, 0, 2)), 0);
    double want[64];
    memcpy(want, v, sizeof want);
    for (int r = 0; r < 8; r++) {
        want[r * 8 + 1] = v[r * 8 + 0];
        want[r * 8 + 2] = v[r * 8 + 1];
    }
    TU_CHECK(x, 1, TU_SHAPE(64), want, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_view_rebased_after_base_inplace),
        TU_TEST(test_view_requires_grad_after_base_write),
        TU_TEST(test_inplace_on_view_copyslices),
        TU_TEST(test_inplace_on_view_chain),
        TU_TEST(test_copy_into_view),
        TU_TEST(test_inplace_on_view_of_leaf_refused),
        TU_TEST(test_inplace_into_expand_refused),
        TU_TEST(test_copy_overlapping_views),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
