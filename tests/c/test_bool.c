/* The bool (and int32) dtype: storage, casts and promotion; comparisons,
 * logical ops, where, masked_fill, any/all and bool-mask row selection,
 * with PyTorch's values, dtypes, gradients and messages; and compiled ==
 * eager bitwise for them on both backends. */
#include "testutil.h"

#include "ops/optable.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define B(t, ...)                                                                                  \
    TU_CHECK((t), 1, TU_SHAPE(sizeof(TU_VALS(__VA_ARGS__)) / sizeof(double)),                      \
             TU_VALS(__VA_ARGS__), 0)

static jg_tensor *vec(jg_dtype d, int n, const double *v) {
    return tu_tensor(d, 1, TU_SHAPE(n), v);
}

static void test_bool_dtype_storage_and_casts(void **state) {
    (void)state;
    assert_string_equal(jg_dtype_name(JG_BOOL), "bool");
    assert_string_equal(jg_dtype_name(JG_I32), "int32");
    /* any nonzero byte given is stored as true */
    unsigned char raw[3] = {0, 7, 1};
    jg_tensor *b = jg_tensor_new(JG_BOOL, 1, TU_SHAPE(3), raw);
    unsigned char back[3];
    assert_int_equal(jg_copy_to(b, back, 3), 0);
    assert_memory_equal(back, ((unsigned char[]){0, 1, 1}), 3);
    assert_int_equal(jg_copy_to(b, back, 2), -1);
    TU_ERROR("needs 3");
    assert_true(jg_item(jg_scalar(JG_BOOL, 0.5)) == 1.0);
    /* float -> bool is x != 0, NaN included (PyTorch) */
    jg_tensor *f = vec(JG_F32, 4, TU_VALS(0, -0.0, NAN, 2.5));
    jg_tensor *fb = jg_to_dtype(f, JG_BOOL);
    assert_int_equal(jg_dtype_of(fb), JG_BOOL);
    B(fb, 0, 0, 1, 1);
    B(jg_to_dtype(fb, JG_F64), 0, 0, 1, 1);
    B(jg_to_dtype(jg_to_dtype(vec(JG_F32, 2, TU_VALS(-2.5, 3.5)), JG_I32), JG_I64), -2, 3);
    /* a cast to bool of a tensor requiring grad does not require grad */
    jg_tensor *x = vec(JG_F32, 2, TU_VALS(1, 0));
    jg_set_requires_grad(x, true);
    assert_false(jg_requires_grad(jg_to_dtype(x, JG_BOOL)));
    /* bool tensors cannot require grad */
    jg_set_requires_grad(b, true);
    TU_ERROR("only Tensors of floating point dtype can require gradients");
    assert_false(jg_requires_grad(b));
}

static void test_bool_promotion_and_arithmetic(void **state) {
    (void)state;
    jg_tensor *t = vec(JG_BOOL, 3, TU_VALS(1, 0, 1)), *u = vec(JG_BOOL, 3, TU_VALS(1, 0, 0));
    /* bool + bool is or, bool * bool is and, still bool (PyTorch) */
    jg_tensor *s = jg_add(t, u), *p = jg_mul(t, u);
    assert_int_equal(jg_dtype_of(s), JG_BOOL);
    B(s, 1, 0, 1);
    B(p, 1, 0, 0);
    /* bool < int32 < int64 < float32 < float64 */
    jg_tensor *i = vec(JG_I32, 3, TU_VALS(1, 2, 3)), *l = vec(JG_I64, 3, TU_VALS(1, 2, 3));
    jg_tensor *f = vec(JG_F32, 3, TU_VALS(0.5, 0.5, 0.5));
    assert_int_equal(jg_dtype_of(jg_add(t, i)), JG_I32);
    assert_int_equal(jg_dtype_of(jg_add(i, l)), JG_I64);
    assert_int_equal(jg_dtype_of(jg_mul(t, f)), JG_F32);
    B(jg_mul(t, f), 0.5, 0, 0.5);
    B(jg_add(t, i), 2, 2, 4);
    /* float-only ops take bool as float32 */
    assert_int_equal(jg_dtype_of(jg_exp(t)), JG_F32);
    /* sums of bool and int32 are int64 */
    jg_tensor *st = jg_sum(t);
    assert_int_equal(jg_dtype_of(st), JG_I64);
    assert_true(jg_item(st) == 2);
    assert_int_equal(jg_dtype_of(jg_sum(i)), JG_I64);
    /* max of a bool tensor */
    jg_tensor *mv, *mi;
    assert_int_equal(jg_max_dim(vec(JG_BOOL, 3, TU_VALS(0, 1, 1)), 0, false, &mv, &mi), 0);
    assert_true(jg_item(mv) == 1 && jg_item(mi) == 1);
}

static void test_bool_refusals(void **state) {
    (void)state;
    jg_tensor *t = vec(JG_BOOL, 2, TU_VALS(1, 0));
    assert_null(jg_sub(t, t));
    TU_ERROR("Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` "
             "or `logical_xor()` operator instead.");
    assert_null(jg_neg(t));
    TU_ERROR("Negation, the `-` operator, on a bool tensor is not supported.");
    assert_null(jg_relu(t));
    TU_ERROR("Boolean inputs not supported for relu");
    assert_null(jg_abs(t));
    TU_ERROR("\"abs_cpu\" not implemented for 'Bool'");
    assert_null(jg_mean(t));
    TU_ERROR("Input dtype must be either a floating point or complex dtype. Got: Bool");
    /* in place: PyTorch's refusals, and its can_cast (no result of a higher
     * kind than self: bool < integer < floating) */
    jg_tensor *u = vec(JG_BOOL, 2, TU_VALS(1, 1));
    assert_int_equal(jg_sub_(u, t), -1);
    TU_ERROR("Subtraction, the `-` operator, with two bool tensors is not supported.");
    assert_int_equal(jg_add_(u, vec(JG_I64, 2, TU_VALS(1, 1))), -1);
    TU_ERROR("result type Long can't be cast to the desired output type Bool");
    assert_int_equal(jg_add_(vec(JG_I32, 2, TU_VALS(1, 1)), vec(JG_F64, 2, TU_VALS(1, 1))), -1);
    TU_ERROR("result type Double can't be cast to the desired output type Int");
    B(u, 1, 1);
    assert_int_equal(jg_add_(u, t), 0); /* or */
    B(u, 1, 1);
    jg_tensor *w = vec(JG_I64, 2, TU_VALS(1, 1));
    assert_int_equal(jg_add_(w, vec(JG_I32, 2, TU_VALS(2, 3))), 0);
    B(w, 3, 4);
    /* bool minus int is fine */
    B(jg_sub(t, vec(JG_I64, 2, TU_VALS(1, 1))), 0, -1);
}

static void test_comparisons(void **state) {
    (void)state;
    jg_tensor *a = tu_tensor(JG_F32, 2, TU_SHAPE(2, 2), TU_VALS(1, 2, NAN, -0.0));
    jg_tensor *b = vec(JG_I64, 2, TU_VALS(1, 0)); /* promoted to float32, broadcast */
    jg_set_requires_grad(a, true);
    jg_tensor *e = jg_eq(a, b);
    assert_int_equal(jg_dtype_of(e), JG_BOOL);
    assert_false(jg_requires_grad(e));
    assert_null(jg_grad_fn_name(e));
    TU_CHECK(e, 2, TU_SHAPE(2, 2), TU_VALS(1, 0, 0, 1), 0);
    TU_CHECK(jg_ne(a, b), 2, TU_SHAPE(2, 2), TU_VALS(0, 1, 1, 0), 0);
    TU_CHECK(jg_lt(a, b), 2, TU_SHAPE(2, 2), TU_VALS(0, 0, 0, 0), 0);
    TU_CHECK(jg_le(a, b), 2, TU_SHAPE(2, 2), TU_VALS(1, 0, 0, 1), 0);
    TU_CHECK(jg_gt(a, b), 2, TU_SHAPE(2, 2), TU_VALS(0, 1, 0, 0), 0);
    TU_CHECK(jg_ge(a, b), 2, TU_SHAPE(2, 2), TU_VALS(1, 1, 0, 1), 0);
    /* scalars: converted to a float tensor's dtype (0.1f == 0.1 is true) */
    B(jg_eq_scalar(vec(JG_F32, 2, TU_VALS(0.1, 0.2)), 0.1), 1, 0);
    B(jg_eq_scalar(vec(JG_F64, 2, TU_VALS(0.1, 0.2)), 0.1), 1, 0);
    /* an int tensor against a fraction compares in float */
    B(jg_lt_scalar(vec(JG_I64, 3, TU_VALS(0, 1, -1)), 0.5), 1, 0, 1);
    /* a bool tensor against 2 compares in int64: true != 2 */
    B(jg_eq_scalar(vec(JG_BOOL, 2, TU_VALS(1, 0)), 2), 0, 0);
    B(jg_eq_scalar(vec(JG_BOOL, 2, TU_VALS(1, 0)), 1), 1, 0);
    B(jg_ne_scalar(vec(JG_F32, 2, TU_VALS(NAN, 1)), NAN), 1, 1);
    B(jg_ge_scalar(vec(JG_I32, 3, TU_VALS(-3, 3, 4)), 3), 0, 1, 1);
    B(jg_gt_scalar(vec(JG_F32, 2, TU_VALS(1, 2)), 1), 0, 1);
    B(jg_le_scalar(vec(JG_F32, 2, TU_VALS(1, 2)), 1), 1, 0);
    /* broadcast failure */
    assert_null(jg_eq(vec(JG_F32, 2, TU_VALS(1, 2)), vec(JG_F32, 3, TU_VALS(1, 2, 3))));
    TU_ERROR("The size of tensor a (2) must match the size of tensor b (3) at non-singleton "
             "dimension 0");
    assert_null(jg_eq(NULL, b));
    TU_ERROR("argument 0 is NULL");
    assert_null(jg_eq_scalar(NULL, 1));
    TU_ERROR("argument 0 is NULL");
}

static void test_logical_ops(void **state) {
    (void)state;
    jg_tensor *a = vec(JG_F32, 4, TU_VALS(0, NAN, 2, 0));
    jg_tensor *b = vec(JG_I64, 4, TU_VALS(0, 3, 0, 1));
    B(jg_logical_and(a, b), 0, 1, 0, 0);
    B(jg_logical_or(a, b), 0, 1, 1, 1);
    B(jg_logical_xor(a, b), 0, 0, 1, 1);
    B(jg_logical_not(a), 1, 0, 0, 1);
    assert_int_equal(jg_dtype_of(jg_logical_not(b)), JG_BOOL);
}

static void test_where_and_masked_fill(void **state) {
    (void)state;
    jg_tensor *c = vec(JG_BOOL, 3, TU_VALS(1, 0, 1));
    jg_tensor *x = tu_tensor(JG_F32, 2, TU_SHAPE(2, 3), TU_VALS(1, 2, 3, 4, 5, 6));
    jg_tensor *y = jg_scalar(JG_F32, -1);
    jg_set_requires_grad(x, true);
    jg_set_requires_grad(y, true);
    jg_tensor *w = jg_where(c, x, y);
    assert_string_equal(jg_grad_fn_name(w), "WhereBackward0");
    TU_CHECK(w, 2, TU_SHAPE(2, 3), TU_VALS(1, -1, 3, 4, -1, 6), 0);
    assert_int_equal(jg_backward(jg_sum(jg_mul(w, w)), NULL, 0), 0);
    TU_CHECK(jg_grad(x), 2, TU_SHAPE(2, 3), TU_VALS(2, 0, 6, 8, 0, 12), 0);
    TU_CHECK(jg_grad(y), 0, NULL, TU_VALS(-4), 0); /* summed over the broadcast */
    /* promotion of x and y */
    jg_tensor *wd = jg_where(c, vec(JG_I64, 3, TU_VALS(1, 2, 3)), jg_scalar(JG_F64, 0.5));
    assert_int_equal(jg_dtype_of(wd), JG_F64);
    B(wd, 1, 0.5, 3);
    assert_null(jg_where(vec(JG_F32, 3, TU_VALS(1, 0, 1)), x, y));
    TU_ERROR("where expected condition to be a boolean tensor, but got a tensor with dtype Float");

    jg_clear_grad(x);
    jg_tensor *m = jg_masked_fill(x, c, 0.5);
    assert_string_equal(jg_grad_fn_name(m), "MaskedFillBackward0");
    TU_CHECK(m, 2, TU_SHAPE(2, 3), TU_VALS(0.5, 2, 0.5, 0.5, 5, 0.5), 0);
    assert_int_equal(jg_backward(jg_sum(jg_mul(m, x)), NULL, 0), 0);
    TU_CHECK(jg_grad(x), 2, TU_SHAPE(2, 3), TU_VALS(0.5, 4, 0.5, 0.5, 10, 0.5), 0);
    /* the mask may be larger than x: the result broadcasts, x's gradient sums */
    jg_tensor *x1 = vec(JG_F64, 1, TU_VALS(3));
    jg_set_requires_grad(x1, true);
    jg_tensor *m2 = jg_masked_fill(x1, c, 0);
    B(m2, 0, 3, 0);
    assert_int_equal(jg_backward(jg_sum(m2), NULL, 0), 0);
    B(jg_grad(x1), 1);
    assert_null(jg_masked_fill(x, vec(JG_F32, 3, TU_VALS(1, 0, 1)), 0));
    TU_ERROR("masked_fill_ only supports boolean masks, but got mask with dtype float32");
    assert_null(jg_masked_fill(x, vec(JG_BOOL, 2, TU_VALS(1, 0)), 0));
    TU_ERROR("must match the size");
}

/* masked_fill's dense rows (contiguous x, out and mask: a vectorized
 * bit select) give the strided loop's bits: x read through a transposed
 * view takes the strided loop.  f32 with NaN payloads, -0 and inf, f64,
 * int64; out of place and in place (masked_fill_). */
static void test_masked_fill_dense_same_bits(void **state) {
    (void)state;
    const jg_dtype dts[] = {JG_F32, JG_F64, JG_I64};
    for (int d = 0; d < 3; d++) {
        jg_manual_seed(7 + d);
        jg_tensor *x = jg_randn(dts[d] == JG_I64 ? JG_F64 : dts[d], 2, TU_SHAPE(7, 301));
        if (dts[d] == JG_F32) {
            float *xv = jg_data(x);
            const uint32_t specials[] = {0x7fc01234u, 0xffa00001u, 0x80000000u, 0x7f800000u};
            for (int i = 0; i < 4; i++)
                memcpy(&xv[i * 97 + 3], &specials[i], 4);
        }
        if (dts[d] == JG_I64)
            x = jg_to_dtype(jg_mul_scalar(x, 1000.0), JG_I64);
        jg_tensor *m = jg_gt_scalar(jg_randn(JG_F32, 1, TU_SHAPE(301)), 0.3);
        jg_tensor *xs = jg_transpose(jg_contiguous(jg_transpose(x, 0, 1)), 0, 1); /* strided */
        jg_tensor *want = jg_masked_fill(xs, m, -2.5);
        jg_tensor *got = jg_masked_fill(x, m, -2.5);
        assert_non_null(want);
        assert_non_null(got);
        TU_SAME(got, want);
        jg_tensor *in = jg_clone(x);
        assert_int_equal(jg_masked_fill_(in, m, -2.5), 0);
        TU_SAME(in, want);
    }
}

static jg_tensor *gc_where(void *user, int n, jg_tensor *const *in) {
    (void)n;
    jg_tensor *w = jg_where(user, in[0], in[1]);
    return jg_sum(jg_mul(jg_masked_fill(w, jg_logical_not(user), 2.0), w));
}

static void test_where_masked_fill_gradcheck(void **state) {
    (void)state;
    jg_tensor *c = tu_tensor(JG_BOOL, 2, TU_SHAPE(2, 2), TU_VALS(1, 0, 0, 1));
    jg_tensor *in[2] = {tu_tensor(JG_F64, 2, TU_SHAPE(2, 2), TU_VALS(0.3, -1.2, 2.5, 0.7)),
                        vec(JG_F64, 2, TU_VALS(1.5, -0.4))};
    jg_set_requires_grad(in[0], true);
    jg_set_requires_grad(in[1], true);
    if (jg_gradcheck(gc_where, c, 2, in, 1e-6, 1e-8, 1e-6) < 0)
        fail_msg("%s", jg_last_error());
}

static void test_any_all(void **state) {
    (void)state;
    jg_tensor *a = tu_tensor(JG_F32, 2, TU_SHAPE(2, 3), TU_VALS(0, 0, 1, 0, 0, 0));
    jg_tensor *any = jg_any(a), *all = jg_all(a);
    assert_int_equal(jg_dtype_of(any), JG_BOOL);
    assert_int_equal(jg_ndim(any), 0);
    assert_true(jg_item(any) == 1 && jg_item(all) == 0);
    B(jg_any_dim(a, 1, false), 1, 0);
    TU_CHECK(jg_any_dim(a, 0, true), 2, TU_SHAPE(1, 3), TU_VALS(0, 0, 1), 0);
    assert_true(jg_item(jg_all_dim(vec(JG_BOOL, 2, TU_VALS(1, 1)), 0, false)) == 1);
    /* no elements: any is false, all is true */
    jg_tensor *e = jg_tensor_new(JG_F32, 1, TU_SHAPE(0), NULL);
    assert_true(jg_item(jg_any(e)) == 0 && jg_item(jg_all(e)) == 1);
    assert_null(jg_any_dim(a, 2, false));
    TU_ERROR("Dimension out of range");
}

static void test_mask_select_rows(void **state) {
    (void)state;
    jg_tensor *x = tu_tensor(JG_F32, 2, TU_SHAPE(3, 2), TU_VALS(1, 2, 3, 4, 5, 6));
    jg_set_requires_grad(x, true);
    jg_tensor *r = jg_mask_select_rows(x, vec(JG_BOOL, 3, TU_VALS(1, 0, 1)));
    TU_CHECK(r, 2, TU_SHAPE(2, 2), TU_VALS(1, 2, 5, 6), 0);
    assert_int_equal(jg_backward(jg_sum(jg_mul(r, r)), NULL, 0), 0);
    TU_CHECK(jg_grad(x), 2, TU_SHAPE(3, 2), TU_VALS(2, 4, 0, 0, 10, 12), 0);
    /* a full-shape mask gives a 1-D result; bool tensors select too */
    jg_tensor *m = tu_tensor(JG_BOOL, 2, TU_SHAPE(3, 2), TU_VALS(0, 1, 1, 0, 0, 1));
    B(jg_mask_select_rows(x, m), 2, 3, 6);
    B(jg_mask_select_rows(m, m), 1, 1, 1);
    TU_CHECK(jg_mask_select_rows(x, vec(JG_BOOL, 3, TU_VALS(0, 0, 0))), 2, TU_SHAPE(0, 2), NULL, 0);
    assert_null(jg_mask_select_rows(x, vec(JG_BOOL, 2, TU_VALS(1, 0))));
    TU_ERROR("The shape of the mask [2] at index 0 does not match the shape of the indexed tensor "
             "[3, 2] at index 0");
    assert_null(jg_mask_select_rows(x, vec(JG_I64, 3, TU_VALS(1, 0, 1))));
    TU_ERROR("bool");
}

/* ---- compiled == eager ---- */

static int p_mix(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *x = in[0], *y = in[1];
    jg_tensor *gt = jg_gt(x, y), *small = jg_lt_scalar(x, 0.25);
    jg_tensor *both = jg_logical_or(jg_logical_and(gt, jg_logical_not(small)),
                                    jg_logical_xor(jg_eq(x, y), jg_ne_scalar(y, 0.5)));
    jg_tensor *w = jg_where(both, jg_mul(x, y), jg_tanh(y));
    jg_tensor *m = jg_masked_fill(w, jg_le(x, y), -2.0);
    out[0] = jg_add(jg_mul(m, x), jg_masked_fill(y, jg_ge_scalar(x, 0), 0.5));
    out[1] = both;
    out[2] = jg_any_dim(gt, 1, false);
    out[3] = jg_all(jg_eq_scalar(x, 1));
    out[4] = jg_add(jg_to_dtype(both, JG_F32), jg_to_dtype(gt, JG_I32));
    return out[0] && out[1] && out[2] && out[3] && out[4] ? 5 : -1;
}

static void test_bool_compiled_matches_eager(void **state) {
    (void)state;
    jg_manual_seed(7);
    jg_tensor *in[2] = {jg_randn(JG_F32, 2, TU_SHAPE(4, 8)), jg_randn(JG_F32, 2, TU_SHAPE(4, 8))};
    float *p = jg_data(in[1]);
    p[3] = 0.5f; /* some exact hits for eq and ne */
    memcpy(p + 5, (float *)jg_data(in[0]) + 5, 8);
    jg_set_requires_grad(in[0], true);
    jg_set_requires_grad(in[1], true);
    jg_tensor *eo[5];
    assert_int_equal(p_mix(NULL, NULL, 2, in, eo), 5);
    assert_int_equal(jg_backward(jg_sum(eo[0]), NULL, 0), 0);
    jg_tensor *eg[2] = {jg_clone(jg_grad(in[0])), jg_clone(jg_grad(in[1]))};
    for (int k = 1; k < 5; k++)
        assert_false(jg_requires_grad(eo[k]));
    const char *modes[2] = {"interp", "c"};
    for (int mo = 0; mo < 2; mo++) {
        if (mo == 1 && !jg_compile_backend_available("c")) {
            print_message("skipping the c backend: %s\n", jg_last_error());
            continue;
        }
        jg_compiled *c = jg_compile(p_mix, NULL, &(jg_compile_options){modes[mo], true, false});
        assert_non_null(c);
        for (int rep = 0; rep < 2; rep++) {
            jg_clear_grad(in[0]);
            jg_clear_grad(in[1]);
            jg_tensor *co[5];
            if (jg_compiled_call(c, NULL, 0, 2, in, co) != 5)
                fail_msg("%s: %s", modes[mo], jg_last_error());
            for (int k = 0; k < 5; k++) {
                TU_SAME(co[k], eo[k]);
                assert_int_equal(jg_requires_grad(co[k]), jg_requires_grad(eo[k]));
            }
            assert_int_equal(jg_backward(jg_sum(co[0]), NULL, 0), 0);
            TU_SAME(jg_grad(in[0]), eg[0]);
            TU_SAME(jg_grad(in[1]), eg[1]);
        }
        assert_int_equal(jg_compiled_fallbacks(c), 0);
        jg_compiled_free(c);
    }
}

/* Every elementwise row (arithmetic, comparisons, masked_fill, casts) on
 * bool and int32 operands, compiled with both backends: bitwise eager's. */
typedef struct {
    jg_opcode op;
    jg_attrs at;
} row_case;

static int p_row(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)args, (void)n;
    const row_case *c = user;
    out[0] = jg_op1(c->op, &c->at, in[0], jg_ops[c->op].n_in > 1 ? in[1] : NULL);
    return out[0] ? 1 : -1;
}

static void test_every_row_on_bool_and_int32_compiled(void **state) {
    (void)state;
    static const double av[] = {1, 0, 1, 1, 0, 0, 1, 0, -3, 7, 2, -1};
    static const double bv[] = {1, 1, 0, 0, 0, 1, 1, 0, 2, -2, 5, 0};
    const jg_dtype dts[2] = {JG_BOOL, JG_I32};
    int checked = 0;
    for (int di = 0; di < 2; di++)
        for (int op = 0; op < JG_OP_COUNT; op++) {
            const jg_op_info *info = &jg_ops[op];
            if (!(info->flags & JG_OPF_ELEMENTWISE))
                continue;
            row_case c = {.op = (jg_opcode)op, .at = {.s = 2.0, .dtype = JG_F32}};
            jg_tensor *in[2] = {tu_tensor(dts[di], 2, TU_SHAPE(3, 4), av),
                                tu_tensor(dts[di], 1, TU_SHAPE(4), bv)};
            if (op == JG_OP_MASKED_FILL)
                in[1] = jg_gt_scalar(in[1], 0);
            jg_tensor *eo;
            if (p_row(&c, NULL, 2, in, &eo) < 0) {
                assert_true(info->flags & JG_OPF_NOBOOL); /* refused, as in PyTorch */
                continue;
            }
            const char *modes[2] = {"interp", "c"};
            for (int mo = 0; mo < 2; mo++) {
                if (mo == 1 && !jg_compile_backend_available("c"))
                    continue;
                jg_compiled *cp = jg_compile(p_row, &c, &(jg_compile_options){modes[mo], true, 0});
                jg_tensor *co;
                if (!cp || jg_compiled_call(cp, NULL, 0, info->n_in, in, &co) != 1)
                    fail_msg("%s %s on %s: %s", modes[mo], info->name, jg_dtype_name(dts[di]),
                             jg_last_error());
                TU_SAME(co, eo);
                jg_compiled_free(cp);
                checked++;
            }
        }
    assert_true(checked > 40);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_bool_dtype_storage_and_casts),
        TU_TEST(test_bool_promotion_and_arithmetic),
        TU_TEST(test_bool_refusals),
        TU_TEST(test_comparisons),
        TU_TEST(test_logical_ops),
        TU_TEST(test_where_and_masked_fill),
        TU_TEST(test_masked_fill_dense_same_bits),
        TU_TEST(test_where_masked_fill_gradcheck),
        TU_TEST(test_any_all),
        TU_TEST(test_mask_select_rows),
        TU_TEST(test_bool_compiled_matches_eager),
        TU_TEST(test_every_row_on_bool_and_int32_compiled),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
