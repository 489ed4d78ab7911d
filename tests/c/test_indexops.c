/* The index and common tensor ops of ops/surface3.c from C: values
 * (PyTorch 1.13's, written here), repeated indices accumulating in index
 * order, gradients against finite differences in f64 (first and second
 * order), PyTorch's error messages with the operands left intact, and
 * compiled == eager bitwise on both backends, including an index out of
 * range failing at run time. */
#include "testutil.h"

#include <math.h>
#include <string.h>

static const double X6[] = {0.5, -1.25, 2.0, 0.75, 3.0, -0.5};

static jg_tensor *t64(int ndim, const int64_t *shape, const double *v) {
    jg_tensor *t = tu_tensor(JG_F64, ndim, shape, v);
    jg_set_requires_grad(t, true);
    return t;
}

static jg_tensor *i64(int ndim, const int64_t *shape, const double *v) {
    return tu_tensor(JG_I64, ndim, shape, v);
}

static void test_indexops_gather_scatter_values(void **state) {
    (void)state;
    jg_tensor *x = tu_tensor(JG_F32, 2, TU_SHAPE(2, 3), X6);
    jg_tensor *ix = i64(2, TU_SHAPE(2, 2), TU_VALS(2, 0, 1, 1));
    TU_CHECK(jg_gather(x, 1, ix), 2, TU_SHAPE(2, 2), TU_VALS(2.0, 0.5, 3.0, 3.0), 0);
    jg_tensor *src = tu_tensor(JG_F32, 2, TU_SHAPE(2, 3), TU_VALS(10, 20, 30, 40, 50, 60));
    /* src larger than index: only index's extent is read */
    TU_CHECK(jg_scatter(x, 1, ix, src), 2, TU_SHAPE(2, 3),
             TU_VALS(20.0, -1.25, 10.0, 0.75, 50.0, -0.5), 0);
    TU_CHECK(jg_scatter_value(x, 1, ix, -7.0), 2, TU_SHAPE(2, 3),
             TU_VALS(-7.0, -1.25, -7.0, 0.75, -7.0, -0.5), 0);
    TU_CHECK(jg_scatter_add(x, 1, ix, src), 2, TU_SHAPE(2, 3),
             TU_VALS(20.5, -1.25, 12.0, 0.75, 93.0, -0.5), 0);
    /* index order: (1e8 + 1) - 1e8 + 1 in f32 is 1, not 2 */
    jg_tensor *z = tu_tensor(JG_F32, 1, TU_SHAPE(1), TU_VALS(0));
    jg_tensor *s4 = tu_tensor(JG_F32, 1, TU_SHAPE(4), TU_VALS(1e8, 1, -1e8, 1));
    TU_CHECK(jg_scatter_add(z, 0, i64(1, TU_SHAPE(4), TU_VALS(0, 0, 0, 0)), s4), 1, TU_SHAPE(1),
             TU_VALS(1.0), 0);
    TU_CHECK(jg_index_add(z, 0, i64(1, TU_SHAPE(4), TU_VALS(0, 0, 0, 0)), s4, 1.0), 1, TU_SHAPE(1),
             TU_VALS(1.0), 0);
    jg_tensor *r2 = tu_tensor(JG_F32, 2, TU_SHAPE(2, 3), TU_VALS(1, 1, 1, 2, 2, 2));
    TU_CHECK(jg_index_add(x, 0, i64(1, TU_SHAPE(2), TU_VALS(1, 1)), r2, 0.5), 2, TU_SHAPE(2, 3),
             TU_VALS(0.5, -1.25, 2.0, 2.25, 4.5, 1.0), 0);
    TU_CHECK(jg_index_copy(x, 1, i64(1, TU_SHAPE(1), TU_VALS(2)),
                           tu_tensor(JG_F32, 2, TU_SHAPE(2, 1), TU_VALS(9, 8))),
             2, TU_SHAPE(2, 3), TU_VALS(0.5, -1.25, 9.0, 0.75, 3.0, 8.0), 0);
    TU_CHECK(jg_index_fill(x, 1, i64(1, TU_SHAPE(1), TU_VALS(-1)), 4.0), 2, TU_SHAPE(2, 3),
             TU_VALS(0.5, -1.25, 4.0, 0.75, 3.0, 4.0), 0);
    jg_tensor *m = jg_gt_scalar(x, 0.6);
    TU_CHECK(jg_masked_select(x, m), 1, TU_SHAPE(3), TU_VALS(2.0, 0.75, 3.0), 0);
    assert_string_equal(
        jg_grad_fn_name(jg_scatter_add(t64(1, TU_SHAPE(2), X6), 0, i64(1, TU_SHAPE(1), TU_VALS(0)),
                                       t64(1, TU_SHAPE(1), X6))),
        "ScatterAddBackward0");
}

/* An index expanded along the row (stride 0: the embedding's) runs each
 * row as one strided copy or add: the same values, order and errors as a
 * contiguous copy of the index, with unit and other steps. */
static void test_gather_scatter_expanded_index(void **state) {
    (void)state;
    double xv[30], sv[24];
    for (int k = 0; k < 30; k++)
        xv[k] = k * 0.25 - 3.0;
    for (int k = 0; k < 24; k++)
        sv[k] = k == 0 ? 1e8 : k == 12 ? -1e8 : k + 0.5;
    jg_tensor *x = tu_tensor(JG_F32, 2, TU_SHAPE(5, 6), xv);
    /* the same values with steps (1, 5): a transposed base */
    jg_tensor *xt = jg_contiguous(jg_transpose(x, 0, 1));
    xt = jg_transpose(xt, 0, 1);
    jg_tensor *col = i64(2, TU_SHAPE(4, 1), TU_VALS(3, 0, 3, 4));
    jg_tensor *ie = jg_expand(col, 2, TU_SHAPE(4, 6)), *ic = jg_contiguous(ie);
    assert_false(jg_is_contiguous(ie));
    double want[24];
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 6; c++)
            want[r * 6 + c] = xv[(r == 1 ? 0 : r == 3 ? 4 : 3) * 6 + c];
    TU_CHECK(jg_gather(x, 0, ie), 2, TU_SHAPE(4, 6), want, 0);
    TU_CHECK(jg_gather(xt, 0, ie), 2, TU_SHAPE(4, 6), want, 0);
    TU_CHECK(jg_gather(x, 0, ic), 2, TU_SHAPE(4, 6), want, 0);
    /* scatter_add: rows 0 and 2 both go to row 3, in index order ((1.5 +
     * 1e8) - 1e8 is 0 in f32, 1.5 + (1e8 - 1e8) would be 1.5) */
    jg_tensor *src = tu_tensor(JG_F32, 2, TU_SHAPE(4, 6), sv);
    jg_tensor *a = jg_scatter_add(x, 0, ie, src), *b = jg_scatter_add(x, 0, ic, src);
    assert_non_null(a);
    assert_non_null(b);
    double sa[30], sb[30];
    tu_values(a, sa);
    tu_values(b, sb);
    assert_memory_equal(sa, sb, sizeof sa);
    assert_true(xv[18] == 1.5 && sa[18] == 0.0);
    assert_true(sa[19] == (double)((1.75f + 1.5f) + 13.5f));
    /* the embedding's gradient through it */
    jg_tensor *w = t64(2, TU_SHAPE(5, 6), xv);
    jg_tensor *e = jg_embedding(w, i64(1, TU_SHAPE(4), TU_VALS(3, 0, 3, 4)), -1);
    assert_non_null(e);
    assert_int_equal(jg_backward(jg_sum(e), NULL, 0), 0);
    double gw[30];
    tu_values(jg_grad(w), gw);
    for (int k = 0; k < 30; k++)
        assert_true(gw[k] == (k / 6 == 3 ? 2.0 : k / 6 == 0 || k / 6 == 4 ? 1.0 : 0.0));
    /* an index out of range, checked once per row: the same error */
    jg_tensor *bad = jg_expand(i64(2, TU_SHAPE(2, 1), TU_VALS(1, 5)), 2, TU_SHAPE(2, 6));
    assert_null(jg_gather(x, 0, bad));
    TU_ERROR("index 5 is out of bounds for dimension 0 with size 5");
    assert_null(jg_scatter_add(x, 0, bad, src));
    TU_ERROR("index 5 is out of bounds for dimension 0 with size 5");
}

static void test_indexops_shuffles_values(void **state) {
    (void)state;
    jg_tensor *x = tu_tensor(JG_F64, 2, TU_SHAPE(2, 3), X6);
    TU_CHECK(jg_flip(x, 2, (int[]){0, -1}), 2, TU_SHAPE(2, 3),
             TU_VALS(-0.5, 3.0, 0.75, 2.0, -1.25, 0.5), 0);
    TU_CHECK(jg_roll(x, 1, TU_SHAPE(1), 1, (int[]){1}), 2, TU_SHAPE(2, 3),
             TU_VALS(2.0, 0.5, -1.25, -0.5, 0.75, 3.0), 0);
    TU_CHECK(jg_roll(x, 1, TU_SHAPE(-2), 0, NULL), 2, TU_SHAPE(2, 3),
             TU_VALS(2.0, 0.75, 3.0, -0.5, 0.5, -1.25), 0);
    TU_CHECK(jg_repeat(jg_narrow(x, 0, 0, 1), 3, TU_SHAPE(2, 1, 2)), 3, TU_SHAPE(2, 1, 6),
             TU_VALS(0.5, -1.25, 2.0, 0.5, -1.25, 2.0, 0.5, -1.25, 2.0, 0.5, -1.25, 2.0), 0);
    TU_CHECK(jg_repeat_interleave(x, 2, NULL, 0, true), 2, TU_SHAPE(4, 3),
             TU_VALS(0.5, -1.25, 2.0, 0.5, -1.25, 2.0, 0.75, 3.0, -0.5, 0.75, 3.0, -0.5), 0);
    TU_CHECK(jg_repeat_interleave(x, 0, i64(1, TU_SHAPE(3), TU_VALS(0, 2, 1)), 1, true), 2,
             TU_SHAPE(2, 3), TU_VALS(-1.25, -1.25, 2.0, 3.0, 3.0, -0.5), 0);
    TU_CHECK(jg_argsort(x, 1, true), 2, TU_SHAPE(2, 3), TU_VALS(2, 0, 1, 1, 0, 2), 0);
    TU_CHECK(jg_trace(x), 0, NULL, TU_VALS(3.5), 0);
    TU_CHECK(jg_outer(jg_narrow(jg_reshape(x, 1, TU_SHAPE(6)), 0, 0, 2),
                      i64(1, TU_SHAPE(2), TU_VALS(2, 3))),
             2, TU_SHAPE(2, 2), TU_VALS(1.0, 1.5, -2.5, -3.75), 0);
    jg_tensor *v = tu_tensor(JG_F64, 1, TU_SHAPE(3), TU_VALS(1, 2, 3));
    TU_CHECK(jg_mv(x, v), 1, TU_SHAPE(2), TU_VALS(4.0, 5.25), 0);
    TU_CHECK(jg_dot(v, v), 0, NULL, TU_VALS(14.0), 0);
    TU_CHECK(
        jg_addmm(v, jg_reshape(v, 2, TU_SHAPE(3, 1)), jg_reshape(v, 2, TU_SHAPE(1, 3)), 0.5, 2.0),
        2, TU_SHAPE(3, 3), TU_VALS(2.5, 5, 7.5, 4.5, 9, 13.5, 6.5, 13, 19.5), 0);
}

static void test_indexops_math_values(void **state) {
    (void)state;
    jg_tensor *a = tu_tensor(JG_F32, 1, TU_SHAPE(6), TU_VALS(5.5, -5.5, 5.5, -5.5, 0.0, -0.0));
    jg_tensor *b = tu_tensor(JG_F32, 1, TU_SHAPE(6), TU_VALS(2, 2, -2, -2, 3, 3));
    TU_CHECK(jg_remainder(a, b), 1, TU_SHAPE(6), TU_VALS(1.5, 0.5, -0.5, -1.5, 0, 0), 0);
    TU_CHECK(jg_fmod(a, b), 1, TU_SHAPE(6), TU_VALS(1.5, -1.5, 1.5, -1.5, 0, 0), 0);
    TU_CHECK(jg_floor_divide(a, b), 1, TU_SHAPE(6), TU_VALS(2, -3, -3, 2, 0, -0.0), 0);
    jg_tensor *ia = i64(1, TU_SHAPE(4), TU_VALS(7, -7, 7, -7));
    jg_tensor *ib = i64(1, TU_SHAPE(4), TU_VALS(2, 2, -2, -1));
    TU_CHECK(jg_remainder(ia, ib), 1, TU_SHAPE(4), TU_VALS(1, 1, -1, 0), 0);
    TU_CHECK(jg_fmod(ia, ib), 1, TU_SHAPE(4), TU_VALS(1, -1, 1, 0), 0);
    TU_CHECK(jg_floor_divide(ia, ib), 1, TU_SHAPE(4), TU_VALS(3, -4, -4, 7), 0);
    jg_tensor *sp = tu_tensor(JG_F64, 1, TU_SHAPE(4), TU_VALS(INFINITY, -INFINITY, NAN, 1.5));
    TU_CHECK(jg_isnan(sp), 1, TU_SHAPE(4), TU_VALS(0, 0, 1, 0), 0);
    TU_CHECK(jg_isinf(sp), 1, TU_SHAPE(4), TU_VALS(1, 1, 0, 0), 0);
    TU_CHECK(jg_isfinite(sp), 1, TU_SHAPE(4), TU_VALS(0, 0, 0, 1), 0);
    TU_CHECK(jg_nan_to_num(sp, 0.5, &(double){9.0}, NULL), 1, TU_SHAPE(4),
             TU_VALS(9.0, -1.7976931348623157e308, 0.5, 1.5), 0);
    TU_CHECK(jg_isfinite(ia), 1, TU_SHAPE(4), TU_VALS(1, 1, 1, 1), 0);
    jg_tensor *x = tu_tensor(JG_F64, 2, TU_SHAPE(2, 3), X6);
    /* torch.logsumexp(x, 1) */
    TU_CHECK(jg_logsumexp(x, 1, (int[]){1}, false), 1, TU_SHAPE(2),
             TU_VALS(2.2326219831020326, 3.1271581586310475), 1e-14);
    TU_CHECK(jg_logsumexp(sp, 1, (int[]){0}, false), 0, NULL, TU_VALS(NAN), 0);
}

static jg_tensor *f_gather(jg_tensor *x) {
    return jg_gather(x, 1, i64(2, TU_SHAPE(2, 3), TU_VALS(2, 2, 0, 1, 1, 1)));
}
static jg_tensor *f_scatter(jg_tensor *x) {
    jg_tensor *ix = i64(2, TU_SHAPE(1, 2), TU_VALS(2, 0));
    return jg_mul(jg_scatter(x, 1, ix, jg_mul(x, x)), jg_scatter_value(x, 1, ix, 0.5));
}
static jg_tensor *f_scatter_add(jg_tensor *x) {
    jg_tensor *ix = i64(2, TU_SHAPE(2, 3), TU_VALS(0, 0, 2, 1, 1, 1));
    return jg_scatter_add(x, 1, ix, jg_exp(x));
}
static jg_tensor *f_index(jg_tensor *x) {
    jg_tensor *i = i64(1, TU_SHAPE(3), TU_VALS(1, 1, 0));
    jg_tensor *a = jg_index_add(x, 0, i, jg_repeat(jg_narrow(x, 0, 0, 1), 2, TU_SHAPE(3, 1)), -1.5);
    jg_tensor *c = jg_index_copy(a, 1, i64(1, TU_SHAPE(1), TU_VALS(0)), jg_narrow(x, 1, 2, 1));
    return jg_mul(jg_index_fill(c, 1, i64(1, TU_SHAPE(1), TU_VALS(1)), 2.0), x);
}
static jg_tensor *f_shuffle(jg_tensor *x) {
    jg_tensor *r = jg_roll(jg_flip(x, 1, (int[]){1}), 2, TU_SHAPE(1, 1), 2, (int[]){0, 1});
    return jg_mul(jg_repeat_interleave(r, 2, NULL, 1, true), jg_repeat(x, 2, TU_SHAPE(1, 2)));
}
static jg_tensor *f_math(jg_tensor *x) {
    jg_tensor *y = jg_add_scalar(jg_mul(x, x), 0.3);
    jg_tensor *l = jg_logsumexp(jg_mul(x, y), 1, (int[]){1}, true);
    return jg_add(jg_mul(jg_remainder(x, y), l), jg_fmod(y, jg_add_scalar(x, 3.1)));
}
static jg_tensor *f_linalg(jg_tensor *x) {
    jg_tensor *v = jg_narrow(jg_reshape(x, 1, TU_SHAPE(6)), 0, 0, 3);
    jg_tensor *o = jg_addmm(jg_outer(v, v), jg_transpose(x, 0, 1), x, 0.5, 2.0);
    return jg_add(jg_mul(o, jg_dot(v, v)), jg_mul(jg_trace(o), jg_mv(o, v)));
}
static jg_tensor *gc_sum(jg_tensor *t) {
    return t ? jg_sum(jg_mul(t, t)) : NULL;
}
typedef jg_tensor *(*unary_fn)(jg_tensor *);
static jg_tensor *gc_first(void *user, int n, jg_tensor *const *in) {
    (void)n;
    return gc_sum(((unary_fn)user)(in[0]));
}
static jg_tensor *gc_second(void *user, int n, jg_tensor *const *in) {
    (void)n;
    jg_tensor *y = gc_first(user, 1, in);
    jg_tensor *g[1];
    jg_tensor *x = in[0];
    if (!y || jg_autograd_grad(1, &y, NULL, 1, &x, JG_CREATE_GRAPH, g) < 0)
        return NULL;
    return jg_sum(jg_mul(g[0], g[0]));
}

static void test_indexops_gradcheck(void **state) {
    (void)state;
    struct {
        const char *name;
        unary_fn f;
    } fs[] = {{"gather", f_gather}, {"scatter", f_scatter}, {"scatter_add", f_scatter_add},
              {"index", f_index},   {"shuffle", f_shuffle}, {"math", f_math},
              {"linalg", f_linalg}};
    for (size_t k = 0; k < sizeof fs / sizeof *fs; k++) {
        jg_tensor *x = t64(2, TU_SHAPE(2, 3), X6);
        if (jg_gradcheck(gc_first, (void *)fs[k].f, 1, &x, 1e-6, 1e-6, 1e-5) < 0)
            fail_msg("%s: %s", fs[k].name, jg_last_error());
        if (jg_gradcheck(gc_second, (void *)fs[k].f, 1, &x, 1e-6, 1e-5, 1e-4) < 0)
            fail_msg("%s (second order): %s", fs[k].name, jg_last_error());
    }
}

static void test_indexops_errors(void **state) {
    (void)state;
    jg_tensor *x = t64(2, TU_SHAPE(2, 3), X6);
    jg_tensor *i1 = i64(1, TU_SHAPE(2), TU_VALS(0, 1));
    assert_null(jg_gather(x, 1, i1));
    TU_ERROR("Index tensor must have the same number of dimensions as input tensor");
    assert_null(jg_gather(x, 1, i64(2, TU_SHAPE(1, 1), TU_VALS(3))));
    TU_ERROR("index 3 is out of bounds for dimension 1 with size 3");
    assert_null(jg_gather(x, 1, tu_tensor(JG_I32, 2, TU_SHAPE(1, 1), TU_VALS(0))));
    TU_ERROR("gather(): Expected dtype int64 for index");
    assert_null(jg_scatter_add(x, 0, i64(2, TU_SHAPE(1, 1), TU_VALS(-1)), x));
    TU_ERROR("index -1 is out of bounds for dimension 0 with size 2");
    assert_null(jg_scatter(x, 0, i64(2, TU_SHAPE(1, 1), TU_VALS(0)), jg_to_dtype(x, JG_F32)));
    TU_ERROR("scatter(): Expected self.dtype to be equal to src.dtype");
    assert_null(jg_scatter_value(x, 1, i64(2, TU_SHAPE(3, 1), TU_VALS(0, 0, 0)), 1.0));
    TU_ERROR("Expected index [3, 1] to be smaller than self [2, 3] apart from dimension 1");
    assert_null(jg_index_add(x, 0, i64(1, TU_SHAPE(1), TU_VALS(2)), jg_narrow(x, 0, 0, 1), 1.0));
    TU_ERROR("index out of range in self");
    assert_null(jg_index_add(x, 0, i1, jg_narrow(x, 0, 0, 1), 1.0));
    TU_ERROR("index_add_(): Number of indices (2) should be equal to source.size(dim): (1), for "
             "dim: 0");
    assert_null(jg_index_copy(x, 1, i64(1, TU_SHAPE(1), TU_VALS(5)), jg_narrow(x, 1, 0, 1)));
    TU_ERROR("index_copy_(): index 5 is out of bounds for dimension 1 with size 3");
    assert_null(jg_index_fill(x, 0, i64(1, TU_SHAPE(1), TU_VALS(-3)), 1.0));
    TU_ERROR("index -3 is out of bounds for dimension 0 with size 2");
    assert_null(jg_flip(x, 2, (int[]){1, -1}));
    TU_ERROR("dim 1 appears multiple times in the list of dims");
    assert_null(jg_roll(x, 2, TU_SHAPE(1, 1), 1, (int[]){0}));
    TU_ERROR("shifts and dimensions must align. shifts: 2, dims:1");
    assert_null(jg_repeat(x, 1, TU_SHAPE(2)));
    TU_ERROR("Number of dimensions of repeat dims can not be smaller than number of dimensions of "
             "tensor");
    assert_null(jg_repeat(x, 2, TU_SHAPE(-1, 2)));
    TU_ERROR("Trying to create tensor with negative dimension -2: [-2, 6]");
    assert_null(jg_repeat_interleave(x, -1, NULL, 0, false));
    TU_ERROR("repeats can not be negative");
    assert_null(jg_masked_select(x, x));
    TU_ERROR("masked_select: expected BoolTensor or ByteTensor for mask");
    jg_tensor *ia = i64(1, TU_SHAPE(2), TU_VALS(1, 2)), *iz = i64(1, TU_SHAPE(2), TU_VALS(1, 0));
    assert_null(jg_remainder(ia, iz));
    TU_ERROR("ZeroDivisionError");
    assert_null(jg_floor_divide(ia, iz));
    TU_ERROR("ZeroDivisionError");
    assert_null(jg_dot(ia, x));
    TU_ERROR("1D tensors expected, but got 1D and 2D tensors");
    assert_null(jg_mv(x, ia));
    TU_ERROR("size mismatch, got 2, 2x3,2");
    assert_null(jg_addmm(x, x, x, 1, 1));
    TU_ERROR("mat1 and mat2 shapes cannot be multiplied (2x3 and 2x3)");
    assert_null(jg_trace(ia));
    TU_ERROR("trace: expected a matrix, but got tensor with dim 1");
    /* nothing changed */
    TU_CHECK(x, 2, TU_SHAPE(2, 3), X6, 0);
    assert_null(jg_grad(x));
}

/* floor_divide's output requires grad, as PyTorch's, and a backward that
 * reaches its node fails with PyTorch's message, leaving .grad alone */
static void test_floor_divide_backward_refused(void **state) {
    (void)state;
    jg_tensor *x = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(1.5, -2.5, 4));
    jg_set_requires_grad(x, true);
    assert_int_equal(jg_backward(jg_sum(jg_mul(x, x)), NULL, 0), 0);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(3), TU_VALS(3, -5, 8), 0);
    jg_tensor *q = jg_floor_divide(x, tu_tensor(JG_F32, 0, NULL, TU_VALS(2)));
    assert_true(jg_requires_grad(q));
    assert_string_equal(jg_grad_fn_name(q), "NotImplemented");
    assert_int_equal(jg_backward(jg_sum(jg_add(q, x)), NULL, 0), -1);
    TU_ERROR("derivative for aten::floor_divide is not implemented");
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(3), TU_VALS(3, -5, 8), 0);
}

/* every op of this file in one program */
static int p_index(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *x = in[0], *ix = in[1];
    jg_tensor *a = jg_add(f_gather(x), f_scatter(x));
    a = jg_add(a, jg_add(f_scatter_add(x), f_index(x)));
    jg_tensor *s = jg_add(jg_sum(f_shuffle(x)), jg_sum(f_math(x)));
    s = jg_add(s, jg_sum(jg_scatter_add(x, 1, ix, x)));
    jg_tensor *xd = jg_detach(x); /* (floor_divide has no derivative) */
    s = jg_add(s, jg_sum(jg_floor_divide(xd, jg_add_scalar(xd, 0.7))));
    s = jg_add(s, jg_sum(jg_nan_to_num(jg_div(x, jg_round(x)), 0.0, NULL, NULL)));
    jg_tensor *v = jg_narrow(jg_reshape(x, 1, TU_SHAPE(6)), 0, 0, 3);
    s = jg_add(s, jg_sum(jg_addmm(jg_outer(v, v), jg_transpose(x, 0, 1), x, 0.5, 2.0)));
    s = jg_add(s, jg_add(jg_dot(v, v), jg_trace(x)));
    out[0] = jg_add(jg_sum(a), jg_add(s, jg_sum(jg_mv(x, v))));
    out[1] = jg_argsort(x, 1, false);
    out[2] = jg_isfinite(jg_div(x, jg_round(x)));
    for (int k = 0; k < 3; k++)
        if (!out[k])
            return -1;
    return 3;
}

static void test_indexops_compiled_matches_eager(void **state) {
    (void)state;
    jg_manual_seed(7);
    jg_tensor *in[2] = {jg_randn(JG_F32, 2, TU_SHAPE(2, 3)),
                        i64(2, TU_SHAPE(2, 2), TU_VALS(2, 2, 0, 1))};
    jg_set_requires_grad(in[0], true);
    jg_tensor *eo[3];
    assert_int_equal(p_index(NULL, NULL, 2, in, eo), 3);
    assert_int_equal(jg_backward(eo[0], NULL, 0), 0);
    jg_tensor *eg = jg_clone(jg_grad(in[0]));
    const char *modes[2] = {"interp", "c"};
    for (int mo = 0; mo < 2; mo++) {
        if (mo == 1 && !jg_compile_backend_available("c")) {
            print_message("skipping the c backend: %s\n", jg_last_error());
            continue;
        }
        jg_compiled *c = jg_compile(p_index, NULL, &(jg_compile_options){modes[mo], true, false});
        assert_non_null(c);
        for (int rep = 0; rep < 2; rep++) {
            jg_clear_grad(in[0]);
            jg_tensor *co[3];
            if (jg_compiled_call(c, NULL, 0, 2, in, co) != 3)
                fail_msg("%s: %s", modes[mo], jg_last_error());
            for (int k = 0; k < 3; k++)
                TU_SAME(co[k], eo[k]);
            assert_int_equal(jg_backward(co[0], NULL, 0), 0);
            TU_SAME(jg_grad(in[0]), eg);
        }
        /* an index out of range at run time: the call fails like eager */
        jg_tensor *bad[2] = {in[0], i64(2, TU_SHAPE(2, 2), TU_VALS(2, 3, 0, 1))}, *co[3];
        assert_int_equal(jg_compiled_call(c, NULL, 0, 2, bad, co), -1);
        TU_ERROR("index 3 is out of bounds for dimension 1 with size 3");
        assert_int_equal(jg_compiled_fallbacks(c), 0);
        jg_compiled_free(c);
    }
}

/* Integer remainder / fmod / floor_divide by a zero divisor: the public
 * functions and a compiled program (whose divisor is computed when it
 * runs) refuse it with PyTorch's "ZeroDivisionError"; a compiled program
 * used to return numbers.  (test_cgen's generic-path cases avoid zero.) */
static int p_int_div(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    jg_tensor *q = jg_floor_divide(in[0], jg_mul(in[1], in[1]));
    out[0] = q ? jg_add(q, jg_remainder(in[0], in[1])) : NULL;
    return out[0] ? 1 : -1;
}

static void test_int_div_zero_every_path(void **state) {
    (void)state;
    jg_tensor *a = i64(1, TU_SHAPE(3), TU_VALS(5, -7, 9));
    jg_tensor *ok = i64(1, TU_SHAPE(3), TU_VALS(2, -3, 4));
    jg_tensor *zero = i64(1, TU_SHAPE(3), TU_VALS(2, 0, 4));
    jg_tensor *(*fns[3])(jg_tensor *, jg_tensor *) = {jg_remainder, jg_fmod, jg_floor_divide};
    for (int k = 0; k < 3; k++) {
        assert_non_null(fns[k](a, ok));
        assert_null(fns[k](a, zero));
        TU_ERROR("ZeroDivisionError");
    }
    assert_null(jg_remainder(a, zero));
    TU_ERROR("ZeroDivisionError");
    const char *modes[2] = {"interp", "c"};
    for (int mo = 0; mo < 2; mo++) {
        if (mo == 1 && !jg_compile_backend_available("c"))
            continue;
        jg_compiled *c = jg_compile(p_int_div, NULL, &(jg_compile_options){modes[mo], true, false});
        assert_non_null(c);
        jg_tensor *in[2] = {a, ok}, *out[1], *eo[1];
        assert_int_equal(p_int_div(NULL, NULL, 2, in, eo), 1);
        assert_int_equal(jg_compiled_call(c, NULL, 0, 2, in, out), 1);
        TU_SAME(out[0], eo[0]);
        in[1] = zero;
        assert_int_equal(jg_compiled_call(c, NULL, 0, 2, in, out), -1);
        TU_ERROR("ZeroDivisionError");
        jg_compiled_free(c);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_indexops_gather_scatter_values),
        TU_TEST(test_gather_scatter_expanded_index),
        TU_TEST(test_indexops_shuffles_values),
        TU_TEST(test_indexops_math_values),
        TU_TEST(test_indexops_gradcheck),
        TU_TEST(test_indexops_errors),
        TU_TEST(test_floor_divide_backward_refused),
        TU_TEST(test_indexops_compiled_matches_eager),
        TU_TEST(test_int_div_zero_every_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
