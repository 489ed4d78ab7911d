/* Compiled programs that failed where eager works. */
#include "testutil.h"

#include <stdlib.h>

static const char *backends[] = {"interp", "c"};

/* a training-step-like program: writes its first input, returns nothing */
static int step_fn(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n, (void)out;
    jg_tensor *d = jg_mul_scalar(in[1], 0.5);
    if (!d || jg_sub_(in[0], d) < 0)
        return -1;
    return 0;
}

/* reads its input, writes nothing and returns nothing */
static int nothing_fn(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n, (void)out;
    return jg_tanh(in[0]) ? 0 : -1;
}

static void test_zero_outputs_mutating(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++) {
        jg_compile_options o = {backends[b], true, false};
        jg_compiled *c = jg_compile(step_fn, NULL, &o);
        assert_non_null(c);
        jg_tensor *p = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(1, 2, 3));
        jg_tensor *g = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(2, 2, 4));
        jg_tensor *out[1] = {NULL};
        for (int call = 0; call < 2; call++)
            assert_int_equal(jg_compiled_call(c, NULL, 0, 2, (jg_tensor *[]){p, g}, out), 0);
        assert_null(out[0]);
        TU_CHECK(p, 1, TU_SHAPE(3), TU_VALS(-1, 0, -1), 0);
        assert_int_equal(jg_compiled_entries(c), 1);
        jg_compiled_free(c);
    }
}

static void test_zero_outputs_pure(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++) {
        jg_compile_options o = {backends[b], true, true}; /* verify: eager agrees */
        jg_compiled *c = jg_compile(nothing_fn, NULL, &o);
        assert_non_null(c);
        jg_tensor *x = tu_tensor(JG_F32, 1, TU_SHAPE(2), TU_VALS(1, 2));
        jg_tensor *out[1] = {NULL};
        assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, out), 0);
        assert_int_equal(jg_compiled_call(c, NULL, 0, 1, &x, out), 0);
        assert_null(out[0]);
        TU_CHECK(x, 1, TU_SHAPE(2), TU_VALS(1, 2), 0);
        jg_compiled_free(c);
    }
}

/* the same view of x twice, and a value with a backward (seed 279 of
 * python/tests/test_compile_inplace_view_fuzz.py) */
static int twin_views_fn(void *user, const void *args, int n, jg_tensor *const *in,
                         jg_tensor **out) {
    (void)user, (void)args, (void)n;
    out[0] = jg_slice(in[0], 0, 1, 4);
    out[1] = jg_slice(in[0], 0, 1, 4);
    out[2] = jg_sum(jg_mul_scalar(in[1], 2.0));
    return out[0] && out[1] && out[2] ? 3 : -1;
}

static void test_identical_views_alias_input(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++) {
        if (b == 1 && !jg_compile_backend_available("c"))
            continue;
        jg_compile_options o = {backends[b], true, false};
        jg_compiled *c = jg_compile(twin_views_fn, NULL, &o);
        assert_non_null(c);
        for (int call = 0; call < 2; call++) {
            jg_tensor *x = tu_tensor(JG_F32, 1, TU_SHAPE(4), TU_VALS(1, 2, 3, 4));
            jg_tensor *y = tu_tensor(JG_F32, 1, TU_SHAPE(1), TU_VALS(1));
            jg_set_requires_grad(y, true);
            jg_tensor *out[3];
            if (jg_compiled_call(c, NULL, 0, 2, (jg_tensor *[]){x, y}, out) != 3)
                fail_msg("%s", jg_last_error());
            /* two tensors, each a view of x: writing the second reaches x
             * (and the first) */
            assert_ptr_not_equal(out[0], out[1]);
            assert_ptr_equal(jg_data(out[1]), (char *)jg_data(x) + 4);
            assert_int_equal(jg_mul_scalar_(out[1], 2.0), 0);
            TU_CHECK(x, 1, TU_SHAPE(4), TU_VALS(1, 4, 6, 8), 0);
            TU_CHECK(out[0], 1, TU_SHAPE(3), TU_VALS(4, 6, 8), 0);
        }
        jg_compiled_free(c);
    }
}

/* reshape of a value laid out as its transposed input (x * 2 keeps x's
 * strides) copies eagerly: a write into it does not reach the value (fuzz
 * seed 3400977: the traced reshape was a view, judged on a contiguous
 * base) */
static int reshape_transposed_fn(void *user, const void *args, int n, jg_tensor *const *in,
                                 jg_tensor **out) {
    (void)user, (void)args, (void)n;
    out[0] = jg_mul_scalar(in[0], 2.0);
    out[1] = out[0] ? jg_reshape(out[0], 1, TU_SHAPE(4)) : NULL;
    return out[1] && jg_mul_scalar_(out[1], 10.0) == 0 ? 2 : -1;
}

static void test_reshape_of_transposed_value_copies(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++) {
        if (b == 1 && !jg_compile_backend_available("c"))
            continue;
        jg_compile_options o = {backends[b], true, false};
        jg_compiled *c = jg_compile(reshape_transposed_fn, NULL, &o);
        assert_non_null(c);
        for (int call = 0; call < 2; call++) {
            jg_tensor *x = tu_tensor(JG_F32, 2, TU_SHAPE(2, 2), TU_VALS(1, 2, 3, 4));
            jg_tensor *xt = jg_transpose(x, 0, 1);
            jg_tensor *out[2];
            if (jg_compiled_call(c, NULL, 0, 1, &xt, out) != 2)
                fail_msg("%s", jg_last_error());
            TU_CHECK(out[0], 2, TU_SHAPE(2, 2), TU_VALS(2, 6, 4, 8), 0);
            TU_CHECK(out[1], 1, TU_SHAPE(4), TU_VALS(20, 60, 40, 80), 0);
            TU_CHECK(x, 2, TU_SHAPE(2, 2), TU_VALS(1, 2, 3, 4), 0);
        }
        jg_compiled_free(c);
    }
}

/* a custom Function whose forward reads a value (an opaque call) and
 * returns its input unchanged */
static int reads_returns_input_fwd(jg_ctx *ctx, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)ctx, (void)n;
    jg_tensor *s = jg_sum(in[0]);
    if (!s)
        return -1;
    (void)jg_item(s); /* (traced: the call becomes opaque) */
    jg_clear_error();
    out[0] = in[0];
    return 1;
}

static int reads_returns_input_bwd(jg_ctx *ctx, int n_out, jg_tensor *const *g, int n_in,
                                   jg_tensor **gin) {
    (void)ctx, (void)n_out, (void)n_in;
    gin[0] = g[0];
    return 1;
}

static const jg_function reads_returns_input = {"ReadsReturnsInput", reads_returns_input_fwd,
                                                reads_returns_input_bwd, NULL};

/* fuzz seed 3901392: a value read splits the program; the custom call
 * returns (x * s).sum(1, keepdim) expanded, and the program flattens it */
static int custom_expanded_fn(void *user, const void *args, int n, jg_tensor *const *in,
                              jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *s = jg_sum(in[0]), *v, *r, *e, *y;
    if (!s)
        return -1;
    double sign = jg_item(s) > 0 ? 1.0 : -2.0;
    if (!(v = jg_mul_scalar(in[0], sign)) || !(r = jg_sum_dims(v, 1, (int[]){1}, true)) ||
        !(e = jg_expand(r, 2, TU_SHAPE(2, 3))) ||
        jg_apply(&reads_returns_input, 1, &e, NULL, 0, &y) != 1 ||
        !(out[0] = jg_reshape(y, 1, TU_SHAPE(6))))
        return -1;
    return 1;
}

static void test_custom_returns_expanded_input_reshape_copies(void **state) {
    (void)state;
    for (int b = 0; b < 2; b++) {
        if (b == 1 && !jg_compile_backend_available("c"))
            continue;
        jg_compile_options o = {backends[b], false, false};
        jg_compiled *c = jg_compile(custom_expanded_fn, NULL, &o);
        assert_non_null(c);
        for (int call = 0; call < 2; call++) {
            jg_tensor *x = tu_tensor(JG_F32, 2, TU_SHAPE(2, 3), TU_VALS(1, 2, 3, 4, 5, 6));
            jg_set_requires_grad(x, true); /* (the flattened copy then has history) */
            jg_tensor *out[1];
            if (jg_compiled_call(c, NULL, 0, 1, &x, out) != 1)
                fail_msg("%s", jg_last_error());
            TU_CHECK(out[0], 1, TU_SHAPE(6), TU_VALS(6, 6, 6, 15, 15, 15), 0);
        }
        jg_compiled_free(c);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_zero_outputs_mutating),
        TU_TEST(test_zero_outputs_pure),
        TU_TEST(test_identical_views_alias_input),
        TU_TEST(test_reshape_of_transposed_value_copies),
        TU_TEST(test_custom_returns_expanded_input_reshape_copies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
