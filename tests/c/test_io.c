/* Storage access for checkpoints: jg_storage_nbytes and jg_storage_view
 * (the memory a tensor views, and tensors rebuilt over it). */
#include "testutil.h"

#include <string.h>

static void test_storage_nbytes_whole_memory(void **state) {
    (void)state;
    jg_tensor *a = jg_full(JG_F32, 2, TU_SHAPE(4, 5), 1.0);
    jg_tensor *s = jg_slice(a, 1, 1, 3);
    assert_non_null(s);
    /* a view reports the whole storage, not its own elements */
    assert_int_equal(jg_storage_nbytes(s), 80);
    assert_int_equal(jg_storage_nbytes(a), 80);
    jg_tensor *small = jg_full(JG_I64, 1, TU_SHAPE(3), 2.0); /* data held inline */
    assert_int_equal(jg_storage_nbytes(small), 24);
}

static void test_storage_view_shares_memory(void **state) {
    (void)state;
    jg_tensor *a = tu_tensor(JG_F64, 1, TU_SHAPE(6), TU_VALS(0, 1, 2, 3, 4, 5));
    jg_set_requires_grad(a, true);
    jg_tensor *v = jg_storage_view(a, 2, TU_SHAPE(2, 2), TU_SHAPE(1, 2), 1);
    assert_non_null(v);
    TU_CHECK(v, 2, TU_SHAPE(2, 2), TU_VALS(1, 3, 2, 4), 0);
    assert_true(jg_same_storage(a, v));
    assert_false(jg_requires_grad(v)); /* no history */
    assert_null(jg_grad_fn_name(v));
    ((double *)jg_data(v))[0] = 10; /* element [0,0] is a[1] */
    double got[6];
    tu_values(a, got);
    assert_true(got[1] == 10);
    /* 0-d and empty views */
    jg_tensor *z = jg_storage_view(a, 0, NULL, NULL, 5);
    assert_non_null(z);
    assert_true(jg_item(z) == 5);
    jg_tensor *e = jg_storage_view(a, 1, TU_SHAPE(0), TU_SHAPE(1), 6);
    assert_non_null(e);
    assert_int_equal(jg_numel(e), 0);
}

static void test_storage_view_out_of_bounds(void **state) {
    (void)state;
    jg_tensor *a = jg_full(JG_F32, 1, TU_SHAPE(3), 0.0);
    assert_null(jg_storage_view(a, 2, TU_SHAPE(2, 3), TU_SHAPE(3, 1), 0));
    TU_ERROR("setStorage: sizes [2, 3], strides [3, 1], storage offset 0, and itemsize 4 requiring "
             "a storage size of 24 are out of bounds for storage of size 12");
    jg_clear_error();
    assert_null(jg_storage_view(a, 1, TU_SHAPE(1), TU_SHAPE(1), 3));
    TU_ERROR("out of bounds");
    jg_clear_error();
    assert_null(jg_storage_view(a, 1, TU_SHAPE(2), TU_SHAPE(-1), 0));
    TU_ERROR("Negative strides");
    jg_clear_error();
    assert_null(jg_storage_view(a, 1, TU_SHAPE(2), TU_SHAPE(1), -1));
    TU_ERROR("Negative storage offset");
    jg_clear_error();
    assert_null(jg_storage_view(a, 1, TU_SHAPE(INT64_MAX), TU_SHAPE(INT64_MAX), 0));
    TU_ERROR("larger than memory");
    jg_clear_error();
    assert_null(jg_storage_view(NULL, 1, TU_SHAPE(1), TU_SHAPE(1), 0));
    TU_ERROR("NULL");
    jg_clear_error();
    assert_int_equal(jg_storage_nbytes(NULL), -1);
    jg_clear_error();
    /* state intact: a is still usable */
    TU_CHECK(a, 1, TU_SHAPE(3), TU_VALS(0, 0, 0), 0);
}

/* jg_tensor_from_blob sized int32 and bool memory as 8-byte elements, so the
 * storage claimed bytes past the caller's buffer (a checkpoint writer saving
 * it read beyond the end). */
static void test_from_blob_storage_size_per_dtype(void **state) {
    (void)state;
    int32_t i32[3] = {1, 2, 3};
    jg_tensor *a = jg_tensor_from_blob(JG_I32, 1, TU_SHAPE(3), NULL, i32, NULL, NULL);
    assert_non_null(a);
    assert_int_equal(jg_storage_nbytes(a), 12);
    bool b[5] = {true, false, true, false, true};
    jg_tensor *m = jg_tensor_from_blob(JG_BOOL, 1, TU_SHAPE(5), NULL, b, NULL, NULL);
    assert_non_null(m);
    assert_int_equal(jg_storage_nbytes(m), 5);
    float f[6] = {0};
    jg_tensor *s = jg_tensor_from_blob(JG_F32, 2, TU_SHAPE(2, 2), TU_SHAPE(3, 1), f, NULL, NULL);
    assert_int_equal(jg_storage_nbytes(s), 20); /* up to element 4: 5 floats */
    /* a view past the caller's memory is refused */
    assert_null(jg_storage_view(a, 1, TU_SHAPE(4), TU_SHAPE(1), 0));
    TU_ERROR("out of bounds");
    jg_clear_error();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_storage_nbytes_whole_memory),
        TU_TEST(test_storage_view_shares_memory),
        TU_TEST(test_storage_view_out_of_bounds),
        TU_TEST(test_from_blob_storage_size_per_dtype),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
