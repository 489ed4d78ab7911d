/* jg_detach_ (PyTorch's Tensor.detach_): a computed tensor or a leaf loses
 * its history in place; views and NULL are refused with nothing changed;
 * inside a compiled program it is a graph break whose call runs eagerly and
 * equals the eager program. */
#include "testutil.h"

static jg_tensor *leaf(jg_dtype dt, int ndim, const int64_t *shape, const double *v) {
    jg_tensor *t = tu_tensor(dt, ndim, shape, v);
    jg_set_requires_grad(t, true);
    return t;
}

static void test_detach_computed_and_leaf(void **state) {
    (void)state;
    jg_tensor *x = leaf(JG_F32, 1, TU_SHAPE(2), TU_VALS(1, 2));
    jg_tensor *y = jg_mul_scalar(x, 3);
    jg_tensor *z = jg_mul(y, y); /* saves y: its backward still runs */
    assert_false(jg_is_leaf(y));
    assert_int_equal(jg_detach_(y), 0);
    assert_true(jg_is_leaf(y));
    assert_false(jg_requires_grad(y));
    assert_null(jg_grad_fn_name(y));
    TU_CHECK(y, 1, TU_SHAPE(2), TU_VALS(3, 6), 0);
    /* z's history was recorded before: the gradient still reaches x */
    assert_int_equal(jg_backward(jg_sum(z), NULL, 0), 0);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(2), TU_VALS(18, 36), 0);
    /* y is a leaf without grad now: new uses record nothing */
    assert_false(jg_requires_grad(jg_mul(y, y)));
    /* a leaf that required grad keeps its .grad and its values */
    assert_int_equal(jg_detach_(x), 0);
    assert_false(jg_requires_grad(x));
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(2), TU_VALS(18, 36), 0);
    /* again: nothing left to do */
    assert_int_equal(jg_detach_(x), 0);
}

static void test_detach_refuses_views(void **state) {
    (void)state;
    jg_tensor *x = leaf(JG_F32, 1, TU_SHAPE(3), TU_VALS(1, 2, 3));
    jg_tensor *v = jg_slice(jg_mul_scalar(x, 2), 0, 1, 3);
    assert_int_equal(jg_detach_(v), -1);
    TU_ERROR("Can't detach views in-place. Use detach() instead.");
    assert_true(jg_requires_grad(v)); /* unchanged */
    assert_string_equal(jg_grad_fn_name(v), "SliceBackward0");
    /* a view of a tensor without grad is a view too (as in PyTorch) */
    jg_tensor *w = jg_slice(jg_full(JG_F32, 1, TU_SHAPE(3), 1), 0, 0, 2);
    assert_int_equal(jg_detach_(w), -1);
    TU_ERROR("Can't detach views in-place.");
    assert_int_equal(jg_detach_(NULL), -1);
    TU_ERROR("jg_detach_: tensor is NULL");
}

/* out = detach_(a * 2) * a */
static int p_detach(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *h = jg_mul_scalar(in[0], 2);
    if (!h || jg_detach_(h) < 0)
        return -1;
    out[0] = jg_mul(h, in[0]);
    return out[0] ? 1 : -1;
}

static void test_detach_in_compiled_program(void **state) {
    (void)state;
    jg_tensor *a = leaf(JG_F64, 1, TU_SHAPE(2), TU_VALS(1.5, -2));
    jg_tensor *eout = NULL;
    assert_int_equal(p_detach(NULL, NULL, 1, &a, &eout), 1);
    assert_int_equal(jg_backward(jg_sum(eout), NULL, 0), 0);
    TU_CHECK(jg_grad(a), 1, TU_SHAPE(2), TU_VALS(3, -4), 0); /* h is a constant */
    jg_clear_grad(a);
    const char *backends[] = {"interp", "c"};
    for (int k = 0; k < 2; k++) {
        if (!jg_compile_backend_available(backends[k]))
            continue;
        jg_compile_options o = {.backend = backends[k]};
        jg_compiled *c = jg_compile(p_detach, NULL, &o);
        for (int i = 0; i < 3; i++) {
            jg_tensor *cout;
            assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &a, &cout), 1);
            TU_SAME(cout, eout);
            assert_int_equal(jg_backward(jg_sum(cout), NULL, 0), 0);
            TU_CHECK(jg_grad(a), 1, TU_SHAPE(2), TU_VALS(3, -4), 0);
            jg_clear_grad(a);
        }
        assert_int_equal(jg_compiled_fallbacks(c), 3);
        jg_compiled_free(c);
        /* fullgraph: the break fails the call with its reason */
        o.fullgraph = true;
        c = jg_compile(p_detach, NULL, &o);
        jg_tensor *cout = NULL;
        assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &a, &cout), -1);
        TU_ERROR("detach_() inside a compiled program");
        jg_compiled_free(c);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_detach_computed_and_leaf),
        TU_TEST(test_detach_refuses_views),
        TU_TEST(test_detach_in_compiled_program),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
