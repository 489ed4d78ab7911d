/* Bad input is a clear error, never a crash: NULL tensors given to every
 * public function, and shapes whose element or byte counts overflow. */
#include "testutil.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NULL_ERROR(call, needle)                                                                   \
    do {                                                                                           \
        jg_clear_error();                                                                          \
        (void)(call);                                                                              \
        TU_ERROR(needle);                                                                          \
    } while (0)

static void test_null_accessors(void **state) {
    (void)state;
    jg_clear_error();
    assert_int_equal(jg_numel(NULL), -1);
    TU_ERROR("jg_numel: tensor is NULL");
    assert_int_equal(jg_ndim(NULL), -1);
    TU_ERROR("jg_ndim: tensor is NULL");
    assert_int_equal((int)jg_dtype_of(NULL), -1);
    TU_ERROR("jg_dtype_of: tensor is NULL");
    assert_null(jg_shape(NULL));
    TU_ERROR("jg_shape: tensor is NULL");
    assert_null(jg_strides(NULL));
    TU_ERROR("jg_strides: tensor is NULL");
    assert_int_equal(jg_storage_offset(NULL), -1);
    TU_ERROR("jg_storage_offset: tensor is NULL");
    assert_false(jg_is_contiguous(NULL));
    TU_ERROR("jg_is_contiguous: tensor is NULL");
    assert_int_equal(jg_version(NULL), 0);
    TU_ERROR("jg_version: tensor is NULL");
    /* autograd getters answer for NULL as for a tensor without history */
    assert_false(jg_requires_grad(NULL));
    assert_false(jg_is_leaf(NULL));
    assert_null(jg_grad(NULL));
    assert_null(jg_grad_fn_name(NULL));
    jg_clear_grad(NULL);
    NULL_ERROR(jg_set_requires_grad(NULL, true), "jg_set_requires_grad: tensor is NULL");
    assert_true(jg_set_grad(NULL, NULL) < 0);
    assert_true(jg_copy_to(NULL, NULL, 0) < 0);
    TU_ERROR("jg_copy_to: tensor is NULL");
    assert_true(isnan(jg_item(NULL)));
    TU_ERROR("jg_item: tensor is NULL");
    assert_null(jg_data(NULL));
    assert_false(jg_same_storage(NULL, NULL));
    char d[64];
    jg_describe(NULL, d, sizeof d); /* describes, never crashes */
    assert_string_equal(d, "(null)");
    /* lifetime functions accept NULL as no-ops */
    assert_null(jg_retain(NULL));
    jg_release(NULL);
    assert_null(jg_keep(NULL));
}

static void test_null_ops(void **state) {
    (void)state;
    jg_tensor *x = jg_full(JG_F32, 1, TU_SHAPE(3), 1.0);
    jg_tensor *bin[][2] = {{NULL, x}, {x, NULL}, {NULL, NULL}};
    for (int i = 0; i < 3; i++) {
        jg_tensor *a = bin[i][0], *b = bin[i][1];
        assert_null(jg_add(a, b));
        assert_null(jg_sub(a, b));
        assert_null(jg_mul(a, b));
        assert_null(jg_div(a, b));
        assert_null(jg_matmul(a, b));
        assert_true(jg_add_(a, b) < 0);
        assert_true(jg_sub_(a, b) < 0);
        assert_true(jg_mul_(a, b) < 0);
        assert_true(jg_copy_(a, b) < 0);
    }
    assert_null(jg_neg(NULL));
    assert_null(jg_exp(NULL));
    assert_null(jg_log(NULL));
    assert_null(jg_tanh(NULL));
    assert_null(jg_abs(NULL));
    assert_null(jg_relu(NULL));
    assert_null(jg_sigmoid(NULL));
    assert_null(jg_sqrt(NULL));
    assert_null(jg_pow_scalar(NULL, 2));
    assert_null(jg_add_scalar(NULL, 1));
    assert_null(jg_mul_scalar(NULL, 1));
    assert_null(jg_sum(NULL));
    assert_null(jg_mean(NULL));
    assert_null(jg_sum_dims(NULL, 1, (int[]){0}, false));
    assert_null(jg_mean_dims(NULL, 1, (int[]){0}, false));
    assert_null(jg_reshape(NULL, 1, TU_SHAPE(3)));
    assert_null(jg_slice(NULL, 0, 0, 1));
    assert_null(jg_transpose(NULL, 0, 1));
    assert_null(jg_permute(NULL, (int[]){0}));
    jg_tensor *v = NULL, *ix = NULL;
    assert_true(jg_max_dim(NULL, 0, false, &v, &ix) < 0);
    assert_null(jg_expand(NULL, 1, TU_SHAPE(3)));
    assert_null(jg_contiguous(NULL));
    assert_null(jg_clone(NULL));
    assert_null(jg_detach(NULL));
    assert_null(jg_to_dtype(NULL, JG_F64));
    assert_null(jg_softmax(NULL, 0));
    assert_null(jg_log_softmax(NULL, 0));
    assert_null(jg_cross_entropy(NULL, NULL));
    assert_true(jg_mul_scalar_(NULL, 2) < 0);
    assert_true(jg_zero_(NULL) < 0);
    assert_true(jg_backward(NULL, NULL, 0) < 0);
    TU_ERROR("backward: output 0 is NULL");
}

/* Every shape whose element count or byte count does not fit is refused
 * with PyTorch's message, before any buffer is made. */
static void test_shape_overflow(void **state) {
    (void)state;
    const int64_t big = (int64_t)1 << 62;
    assert_null(jg_tensor_new(JG_F32, 2, TU_SHAPE(big + 1, 64), NULL));
    TU_ERROR("Storage size calculation overflowed with sizes=[4611686018427387905, 64]");
    assert_null(jg_full(JG_F64, 2, TU_SHAPE((int64_t)1 << 32, (int64_t)1 << 32), 1.0));
    TU_ERROR("Storage size calculation overflowed with sizes=[4294967296, 4294967296]");
    assert_null(jg_randn(JG_F32, 1, TU_SHAPE(big)));
    TU_ERROR("Storage size calculation overflowed with sizes=[4611686018427387904]");
    /* a product that overflows although one dim is 0: no strides exist */
    assert_null(jg_tensor_new(JG_F32, 3, TU_SHAPE(0, big, big), NULL));
    TU_ERROR("Storage size calculation overflowed");
    jg_tensor *x = jg_full(JG_F32, 2, TU_SHAPE(2, 3), 1.0);
    assert_null(jg_reshape(x, 2, TU_SHAPE(big + 1, 64)));
    TU_ERROR("shape '[4611686018427387905, 64]' is invalid for input of size 6");
    assert_null(jg_reshape(x, 3, TU_SHAPE(-1, big + 1, 64)));
    TU_ERROR("shape '[-1, 4611686018427387905, 64]' is invalid for input of size 6");
    jg_tensor *one = jg_full(JG_F32, 1, TU_SHAPE(1), 2.0);
    jg_tensor *e = jg_expand(one, 1, TU_SHAPE(big)); /* a view may exceed memory */
    assert_non_null(e);
    assert_int_equal(jg_numel(e), big);
    assert_null(jg_contiguous(e));
    TU_ERROR("Storage size calculation overflowed with sizes=[4611686018427387904]");
    assert_null(jg_clone(e));
    assert_null(jg_expand(one, 2, TU_SHAPE(big, 4)));
    TU_ERROR("numel: integer multiplication overflow");
    /* broadcasting to an impossible result */
    jg_tensor *col = jg_expand(jg_reshape(one, 2, TU_SHAPE(1, 1)), 2, TU_SHAPE(big, 1));
    jg_tensor *row = jg_expand(jg_reshape(one, 2, TU_SHAPE(1, 1)), 2, TU_SHAPE(1, 64));
    assert_non_null(col);
    assert_non_null(row);
    assert_null(jg_add(col, row));
    TU_ERROR("Storage size calculation overflowed with sizes=[4611686018427387904, 64]");
    /* large but representable: a clean out-of-memory error */
    assert_null(jg_tensor_new(JG_F64, 1, TU_SHAPE((int64_t)1 << 55), NULL));
    TU_ERROR("out of memory allocating a float64 tensor of shape [36028797018963968]");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_null_accessors),
        TU_TEST(test_null_ops),
        TU_TEST(test_shape_overflow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
