/* Shape, indexing and creation ops (OPS-SHAPE): values, gradients
 * (gradcheck), errors that leave state intact, and compiled == eager. */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static jg_tensor *ramp(jg_dtype d, int ndim, const int64_t *shape) {
    int64_t n = tu_numel(ndim, shape);
    double *v = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        v[i] = (double)i;
    jg_tensor *t = tu_tensor(d, ndim, shape, v);
    free(v);
    return t;
}

static void test_cat_stack(void **state) {
    (void)state;
    jg_tensor *a = ramp(JG_F32, 2, TU_SHAPE(2, 2)), *b = ramp(JG_F32, 2, TU_SHAPE(2, 1));
    jg_tensor *ts[] = {a, b, a};
    TU_CHECK(jg_cat(3, ts, 1), 2, TU_SHAPE(2, 5), TU_VALS(0, 1, 0, 0, 1, 2, 3, 1, 2, 3), 0);
    jg_tensor *s2[] = {a, a};
    TU_CHECK(jg_stack(2, s2, 1), 3, TU_SHAPE(2, 2, 2), TU_VALS(0, 1, 0, 1, 2, 3, 2, 3), 0);
    /* dtypes promote */
    jg_tensor *i = ramp(JG_I64, 2, TU_SHAPE(2, 1));
    jg_tensor *mix[] = {i, a};
    assert_int_equal(jg_dtype_of(jg_cat(2, mix, 1)), JG_F32);
}

static void test_cat_errors_keep_state(void **state) {
    (void)state;
    jg_tensor *a = ramp(JG_F32, 2, TU_SHAPE(2, 3)), *b = ramp(JG_F32, 2, TU_SHAPE(3, 3));
    jg_tensor *ts[] = {a, b};
    assert_null(jg_cat(2, ts, 1));
    TU_ERROR("Sizes of tensors must match except in dimension 1. Expected size 2 but got size 3 "
             "for tensor number 1 in the list.");
    assert_null(jg_cat(0, ts, 0));
    TU_ERROR("expected a non-empty list of Tensors");
    assert_null(jg_stack(2, ts, 0));
    TU_ERROR("stack expects each tensor to be equal size, but got [2, 3] at entry 0 and [3, 3]");
    assert_null(jg_narrow(a, 1, 2, 2));
    TU_ERROR("start (2) + length (2) exceeds dimension size (3).");
    assert_null(jg_tril(jg_reshape(a, 1, TU_SHAPE(6)), 0));
    TU_ERROR("Dimension out of range");
}

typedef struct {
    int which;
} prog_sel;

static jg_tensor *shape_fn(void *user, int n, jg_tensor *const *in) {
    (void)n;
    int which = ((prog_sel *)user)->which;
    jg_tensor *x = in[0];
    switch (which) {
    case 0: {
        jg_tensor *ts[] = {x, jg_mul(x, x), x};
        return jg_sum(jg_mul(jg_cat(3, ts, 1), jg_cat(3, ts, 1)));
    }
    case 1:
        return jg_sum(jg_mul(jg_tril(x, 0), jg_triu(x, -1)));
    case 2: {
        jg_tensor *idx = tu_tensor(JG_I64, 2, TU_SHAPE(2, 2), TU_VALS(2, -1, 0, 2));
        jg_tensor *r = jg_index(x, 1, idx);
        return jg_sum(jg_mul(r, r));
    }
    case 3: {
        jg_tensor *s = jg_slice_step(x, 1, 0, 3, 2);
        return jg_sum(jg_mul(s, s));
    }
    default: {
        jg_tensor *c = jg_mul_scalar(x, 1.0);
        jg_tensor *idx = tu_tensor(JG_I64, 1, TU_SHAPE(1), TU_VALS(1));
        jg_tensor *v = jg_mul(jg_slice(x, 0, 0, 1), jg_slice(x, 0, 2, 3));
        if (jg_index_put_(c, 0, idx, v) < 0)
            return NULL;
        return jg_sum(jg_mul(c, c));
    }
    }
}

static void test_gradcheck(void **state) {
    (void)state;
    for (int w = 0; w < 5; w++) {
        jg_tensor *x = jg_randn(JG_F64, 2, TU_SHAPE(3, 3));
        jg_set_requires_grad(x, true);
        prog_sel sel = {w};
        if (jg_gradcheck(shape_fn, &sel, 1, &x, 1e-6, 1e-5, 1e-4) < 0)
            fail_msg("program %d: %s", w, jg_last_error());
    }
}

static void test_stepped_slice_view_writes_base(void **state) {
    (void)state;
    jg_tensor *x = ramp(JG_F32, 1, TU_SHAPE(7));
    jg_tensor *v = jg_slice_step(x, 0, 1, 7, 2); /* 1, 3, 5 */
    assert_int_equal(jg_strides(v)[0], 2);
    TU_CHECK(v, 1, TU_SHAPE(3), TU_VALS(1, 3, 5), 0);
    assert_int_equal(jg_mul_scalar_(v, 10), 0);
    TU_CHECK(x, 1, TU_SHAPE(7), TU_VALS(0, 10, 2, 30, 4, 50, 6), 0);
}

static void test_index_put_and_errors(void **state) {
    (void)state;
    jg_tensor *x = ramp(JG_F32, 2, TU_SHAPE(3, 2));
    jg_tensor *idx = tu_tensor(JG_I64, 1, TU_SHAPE(2), TU_VALS(-1, 0));
    jg_tensor *v = tu_tensor(JG_F32, 1, TU_SHAPE(2), TU_VALS(7, 8));
    assert_int_equal(jg_index_put_(x, 0, idx, v), 0);
    TU_CHECK(x, 2, TU_SHAPE(3, 2), TU_VALS(7, 8, 2, 3, 7, 8), 0);
    jg_tensor *bad = tu_tensor(JG_I64, 1, TU_SHAPE(2), TU_VALS(0, 3));
    assert_int_equal(jg_index_put_(x, 0, bad, v), -1);
    TU_ERROR("index 3 is out of bounds for dimension 0 with size 3");
    TU_CHECK(x, 2, TU_SHAPE(3, 2), TU_VALS(7, 8, 2, 3, 7, 8), 0);
    jg_tensor *v64 = tu_tensor(JG_F64, 1, TU_SHAPE(2), TU_VALS(7, 8));
    assert_int_equal(jg_index_put_(x, 0, idx, v64), -1);
    TU_ERROR("Index put requires the source and destination dtypes match");
    assert_null(jg_index(x, 0, bad));
    TU_ERROR("index 3 is out of bounds");
    assert_null(jg_index_select(x, 0, bad));
    TU_ERROR("INDICES element is out of DATA bounds, id=3 axis_dim=3");
}

static void test_creation(void **state) {
    (void)state;
    TU_CHECK(jg_eye(JG_F32, 2, 3), 2, TU_SHAPE(2, 3), TU_VALS(1, 0, 0, 0, 1, 0), 0);
    TU_CHECK(jg_linspace(JG_F64, 0, 1, 5), 1, TU_SHAPE(5), TU_VALS(0, .25, .5, .75, 1), 0);
    jg_manual_seed(5);
    jg_tensor *r = jg_randint(JG_I64, -2, 3, 1, TU_SHAPE(500));
    double v[500];
    tu_values(r, v);
    for (int i = 0; i < 500; i++)
        assert_true(v[i] >= -2 && v[i] < 3);
    jg_manual_seed(5);
    TU_SAME(r, jg_randint(JG_I64, -2, 3, 1, TU_SHAPE(500)));
    jg_tensor *p = jg_randperm(JG_I64, 20);
    double pv[20];
    int seen[20] = {0};
    tu_values(p, pv);
    for (int i = 0; i < 20; i++)
        seen[(int)pv[i]]++;
    for (int i = 0; i < 20; i++)
        assert_int_equal(seen[i], 1);
    jg_tensor *w = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(0, 1, 0));
    TU_CHECK(jg_multinomial(w, 4, true), 1, TU_SHAPE(4), TU_VALS(1, 1, 1, 1), 0);
    assert_null(jg_multinomial(w, 2, false));
    TU_ERROR("not enough non-negative category to sample");
}

static void test_nonzero(void **state) {
    (void)state;
    jg_tensor *x = tu_tensor(JG_F32, 2, TU_SHAPE(2, 3), TU_VALS(0, 1.5, 0, 2, 0, -1));
    TU_CHECK(jg_nonzero(x), 2, TU_SHAPE(3, 2), TU_VALS(0, 1, 1, 0, 1, 2), 0);
}

static jg_tensor *compiled_prog(void *user, int n, jg_tensor *const *in) {
    return shape_fn(user, n, in);
}

static int program(void *user, const void *args, int n_in, jg_tensor *const *in, jg_tensor **out) {
    (void)args;
    prog_sel sel = {*(const int *)user};
    out[0] = compiled_prog(&sel, n_in, in);
    return out[0] ? 1 : -1; /* the number of outputs */
}

static void test_compiled_equals_eager(void **state) {
    (void)state;
    const char *backends[] = {"interp", "c"};
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        for (int w = 0; w < 5; w++) {
            jg_tensor *x0 = jg_randn(JG_F32, 2, TU_SHAPE(3, 3));
            jg_tensor *xe = jg_clone(x0), *xc = jg_clone(x0);
            jg_set_requires_grad(xe, true);
            jg_set_requires_grad(xc, true);
            prog_sel sel = {w};
            jg_tensor *ye = shape_fn(&sel, 1, &xe);
            assert_non_null(ye);
            assert_int_equal(jg_backward(ye, NULL, 0), 0);
            jg_compile_options o = {.backend = backends[b], .fullgraph = true};
            jg_compiled *c = jg_compile(program, &w, &o);
            jg_tensor *yc = NULL;
            if (jg_compiled_call(c, NULL, 0, 1, &xc, &yc) < 0)
                fail_msg("%s program %d: %s", backends[b], w, jg_last_error());
            assert_int_equal(jg_backward(yc, NULL, 0), 0);
            TU_SAME(ye, yc);
            TU_SAME(jg_grad(xe), jg_grad(xc));
            jg_compiled_free(c);
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_cat_stack),
        TU_TEST(test_cat_errors_keep_state),
        TU_TEST(test_gradcheck),
        TU_TEST(test_stepped_slice_view_writes_base),
        TU_TEST(test_index_put_and_errors),
        TU_TEST(test_creation),
        TU_TEST(test_nonzero),
        TU_TEST(test_compiled_equals_eager),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
