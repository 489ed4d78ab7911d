/* View ops: reshape, permute/transpose, slice, expand (and slice_backward):
 * values, shapes, strides, storage sharing, views of views, the copy that
 * reshape makes when no view is possible, gradients against finite
 * differences, contiguous/clone/detach, and error messages. */
#include "testutil.h"

#include "ops/optable.h"

#include <math.h>
#include <string.h>

static jg_tensor *arange(jg_dtype dt, int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    double v[256];
    assert_true(n <= 256);
    for (int64_t i = 0; i < n; i++)
        v[i] = (double)i;
    return tu_tensor(dt, ndim, shape, v);
}

static void check_geom(const jg_tensor *t, int ndim, const int64_t *shape, const int64_t *stride,
                       int64_t offset) {
    assert_non_null(t);
    assert_int_equal(jg_ndim(t), ndim);
    for (int d = 0; d < ndim; d++) {
        assert_int_equal(jg_shape(t)[d], shape[d]);
        assert_int_equal(jg_strides(t)[d], stride[d]);
    }
    assert_int_equal(jg_storage_offset(t), offset);
}

/* ------------------------------------------------------------ forward */

static void test_reshape_view(void **state) {
    (void)state;
    jg_tensor *x = arange(JG_F32, 2, TU_SHAPE(2, 3));
    jg_tensor *r = jg_reshape(x, 2, TU_SHAPE(3, 2));
    check_geom(r, 2, TU_SHAPE(3, 2), TU_SHAPE(2, 1), 0);
    TU_CHECK(r, 2, TU_SHAPE(3, 2), TU_VALS(0, 1, 2, 3, 4, 5), 0);
    assert_true(jg_same_storage(r, x));
    assert_true(jg_is_contiguous(r));
    /* -1 is inferred */
    jg_tensor *f = jg_reshape(x, 1, TU_SHAPE(-1));
    check_geom(f, 1, TU_SHAPE(6), TU_SHAPE(1), 0);
    jg_tensor *g = jg_reshape(x, 3, TU_SHAPE(1, -1, 2));
    check_geom(g, 3, TU_SHAPE(1, 3, 2), TU_SHAPE(6, 2, 1), 0);
    /* writes through the view show in the base, and bump the shared version */
    uint64_t v0 = jg_version(x);
    assert_int_equal(jg_mul_scalar_(r, 10), 0);
    TU_CHECK(x, 2, TU_SHAPE(2, 3), TU_VALS(0, 10, 20, 30, 40, 50), 0);
    assert_true(jg_version(x) == v0 + 1);
    assert_true(jg_version(r) == jg_version(x));
    /* 0-d <-> one element */
    jg_tensor *s = jg_scalar(JG_F64, 7);
    jg_tensor *s11 = jg_reshape(s, 2, TU_SHAPE(1, 1));
    TU_CHECK(s11, 2, TU_SHAPE(1, 1), TU_VALS(7), 0);
    assert_true(jg_same_storage(s, s11));
    jg_tensor *s0 = jg_reshape(s11, 0, NULL);
    TU_CHECK(s0, 0, NULL, TU_VALS(7), 0);
    assert_true(jg_same_storage(s, s0));
    /* empty tensors */
    jg_tensor *e = jg_tensor_new(JG_F32, 2, TU_SHAPE(0, 3), NULL);
    jg_tensor *e2 = jg_reshape(e, 3, TU_SHAPE(3, 0, 5));
    assert_non_null(e2);
    assert_int_equal(jg_numel(e2), 0);
    assert_int_equal(jg_shape(e2)[2], 5);
}

static void test_permute_transpose(void **state) {
    (void)state;
    jg_tensor *x = arange(JG_F64, 3, TU_SHAPE(2, 3, 4));
    jg_tensor *p = jg_permute(x, (const int[]){2, 0, 1});
    check_geom(p, 3, TU_SHAPE(4, 2, 3), TU_SHAPE(1, 12, 4), 0);
    assert_true(jg_same_storage(p, x));
    assert_false(jg_is_contiguous(p));
    double want[24];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 2; j++)
            for (int k = 0; k < 3; k++)
                want[(i * 2 + j) * 3 + k] = j * 12 + k * 4 + i;
    TU_CHECK(p, 3, TU_SHAPE(4, 2, 3), want, 0);
    /* negative dims */
    jg_tensor *p2 = jg_permute(x, (const int[]){-1, 0, -2});
    TU_SAME(p2, p);
    jg_tensor *t = jg_transpose(x, 0, -1);
    check_geom(t, 3, TU_SHAPE(4, 3, 2), TU_SHAPE(1, 4, 12), 0);
    jg_tensor *tt = jg_transpose(t, 2, 0);
    TU_SAME(tt, x);
    check_geom(tt, 3, TU_SHAPE(2, 3, 4), TU_SHAPE(12, 4, 1), 0);
    assert_true(jg_is_contiguous(tt));
    /* 0-d permute */
    jg_tensor *s = jg_scalar(JG_F32, 3);
    jg_tensor *ps = jg_permute(s, NULL);
    TU_CHECK(ps, 0, NULL, TU_VALS(3), 0);
}

static void test_slice(void **state) {
    (void)state;
    jg_tensor *x = arange(JG_F32, 2, TU_SHAPE(4, 3));
    jg_tensor *s = jg_slice(x, 0, 1, 3);
    check_geom(s, 2, TU_SHAPE(2, 3), TU_SHAPE(3, 1), 3);
    TU_CHECK(s, 2, TU_SHAPE(2, 3), TU_VALS(3, 4, 5, 6, 7, 8), 0);
    assert_true(jg_same_storage(s, x));
    jg_tensor *c = jg_slice(x, -1, -2, 100); /* columns 1..2, end clamped */
    check_geom(c, 2, TU_SHAPE(4, 2), TU_SHAPE(3, 1), 1);
    TU_CHECK(c, 2, TU_SHAPE(4, 2), TU_VALS(1, 2, 4, 5, 7, 8, 10, 11), 0);
    jg_tensor *e = jg_slice(x, 0, 3, 1); /* empty */
    assert_non_null(e);
    assert_int_equal(jg_shape(e)[0], 0);
    assert_int_equal(jg_numel(e), 0);
    /* in-place through a slice writes the base */
    assert_int_equal(jg_mul_scalar_(c, -1), 0);
    TU_CHECK(x, 2, TU_SHAPE(4, 3), TU_VALS(0, -1, -2, 3, -4, -5, 6, -7, -8, 9, -10, -11), 0);
    jg_tensor *one = jg_scalar(JG_F32, 100);
    assert_int_equal(jg_copy_(jg_slice(x, 0, 0, 1), one), 0);
    TU_CHECK(jg_slice(x, 0, 0, 1), 2, TU_SHAPE(1, 3), TU_VALS(100, 100, 100), 0);
}

static void test_expand(void **state) {
    (void)state;
    jg_tensor *x = arange(JG_F64, 2, TU_SHAPE(3, 1));
    jg_tensor *e = jg_expand(x, 3, TU_SHAPE(2, 3, 4));
    check_geom(e, 3, TU_SHAPE(2, 3, 4), TU_SHAPE(0, 1, 0), 0);
    assert_true(jg_same_storage(e, x));
    double want[24];
    for (int i = 0; i < 24; i++)
        want[i] = (i / 4) % 3;
    TU_CHECK(e, 3, TU_SHAPE(2, 3, 4), want, 0);
    jg_tensor *k = jg_expand(x, 2, TU_SHAPE(-1, 5)); /* -1 keeps */
    check_geom(k, 2, TU_SHAPE(3, 5), TU_SHAPE(1, 0), 0);
    jg_tensor *same = jg_expand(x, 2, TU_SHAPE(3, 1));
    check_geom(same, 2, TU_SHAPE(3, 1), TU_SHAPE(1, 1), 0);
    jg_tensor *s = jg_scalar(JG_F32, 2);
    jg_tensor *se = jg_expand(s, 2, TU_SHAPE(2, 2));
    check_geom(se, 2, TU_SHAPE(2, 2), TU_SHAPE(0, 0), 0);
    TU_CHECK(se, 2, TU_SHAPE(2, 2), TU_VALS(2, 2, 2, 2), 0);
    /* an expanded view reads correctly in elementwise ops */
    TU_CHECK(jg_add(se, se), 2, TU_SHAPE(2, 2), TU_VALS(4, 4, 4, 4), 0);
}

static void test_views_of_views(void **state) {
    (void)state;
    jg_tensor *x = arange(JG_F32, 2, TU_SHAPE(4, 6));
    jg_tensor *t = jg_transpose(x, 0, 1); /* [6, 4], strides (1, 6) */
    jg_tensor *s = jg_slice(t, 0, 1, 4);  /* [3, 4], offset 1 */
    jg_tensor *s2 = jg_slice(s, 1, 2, 4); /* [3, 2], offset 1 + 12 */
    check_geom(s, 2, TU_SHAPE(3, 4), TU_SHAPE(1, 6), 1);
    check_geom(s2, 2, TU_SHAPE(3, 2), TU_SHAPE(1, 6), 13);
    double want[6];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++)
            want[i * 2 + j] = (j + 2) * 6 + (i + 1); /* x[j+2][i+1] */
    TU_CHECK(s2, 2, TU_SHAPE(3, 2), want, 0);
    assert_true(jg_same_storage(s2, x));
    jg_tensor *e = jg_expand(jg_reshape(s2, 3, TU_SHAPE(3, 1, 2)), 3, TU_SHAPE(3, 2, 2));
    assert_non_null(e);
    assert_true(jg_same_storage(e, x)); /* reshape inserting a 1 is a view */
    double want_e[12];
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 2; k++)
            for (int j = 0; j < 2; j++)
                want_e[(i * 2 + k) * 2 + j] = want[i * 2 + j];
    TU_CHECK(e, 3, TU_SHAPE(3, 2, 2), want_e, 0);
    /* reshape of a non-contiguous tensor that cannot be a view copies */
    jg_tensor *flat = jg_reshape(s2, 1, TU_SHAPE(6));
    assert_non_null(flat);
    assert_false(jg_same_storage(flat, x));
    assert_true(jg_is_contiguous(flat));
    TU_CHECK(flat, 1, TU_SHAPE(6), want, 0);
    jg_tensor *tf = jg_reshape(t, 1, TU_SHAPE(24));
    assert_false(jg_same_storage(tf, x));
    double want_t[24];
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 4; j++)
            want_t[i * 4 + j] = j * 6 + i;
    TU_CHECK(tf, 1, TU_SHAPE(24), want_t, 0);
    /* ... while a contiguous slice, or splitting a strided dim, stays a view */
    jg_tensor *rows = jg_slice(x, 0, 1, 3);
    jg_tensor *rv = jg_reshape(rows, 1, TU_SHAPE(12));
    check_geom(rv, 1, TU_SHAPE(12), TU_SHAPE(1), 6);
    assert_true(jg_same_storage(rv, x));
    jg_tensor *split = jg_reshape(t, 3, TU_SHAPE(2, 3, 4)); /* splits the stride-1 dim */
    check_geom(split, 3, TU_SHAPE(2, 3, 4), TU_SHAPE(3, 1, 6), 0);
    assert_true(jg_same_storage(split, x));
    jg_tensor *cols = jg_slice(x, 1, 0, 3); /* [4, 3] strides (6, 1) */
    jg_tensor *cv = jg_reshape(cols, 3, TU_SHAPE(2, 2, 3));
    check_geom(cv, 3, TU_SHAPE(2, 2, 3), TU_SHAPE(12, 6, 1), 0);
    /* writes through a view of a view reach the base */
    assert_int_equal(jg_mul_scalar_(s2, 0), 0);
    double xv[24];
    tu_values(x, xv);
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 6; c++) {
            bool hit = r >= 2 && c >= 1 && c < 4;
            assert_true(xv[r * 6 + c] == (hit ? 0 : r * 6 + c));
        }
}

/* Small tensors keep their data inside the tensor struct (core/tensor.c):
 * views must keep that data alive after the tensor that owns it is gone,
 * see each other's writes and bump one version counter; the memory goes
 * when the last view does (ASan checks the frees). */
static void test_views_outlive_small_base(void **state) {
    (void)state;
    jg_scope_push(); /* every tensor below is kept: this test holds the only reference */
    jg_tensor *x = jg_keep(arange(JG_F32, 2, TU_SHAPE(2, 3))); /* 24 bytes: inline */
    jg_tensor *x64 = jg_keep(arange(JG_F64, 1, TU_SHAPE(8)));  /* 64 bytes: inline */
    jg_tensor *big = jg_keep(arange(JG_F64, 1, TU_SHAPE(9)));  /* 72 bytes: own block */
    jg_tensor *t = jg_keep(jg_transpose(x, 0, 1));
    jg_tensor *s = jg_keep(jg_slice(x, 1, 1, 3));
    jg_tensor *v64 = jg_keep(jg_slice(x64, 0, 2, 8));
    jg_tensor *vbig = jg_keep(jg_slice(big, 0, 1, 9));
    jg_scope_pop();
    jg_release(x); /* the tensor dies, its data stays with t and s */
    jg_release(x64);
    jg_release(big);
    assert_true(jg_same_storage(t, s));
    TU_CHECK(t, 2, TU_SHAPE(3, 2), ((double[]){0, 3, 1, 4, 2, 5}), 0);
    uint64_t v0 = jg_version(t);
    assert_int_equal(jg_mul_scalar_(s, 10), 0); /* x[:, 1:3] *= 10 */
    assert_true(jg_version(t) == v0 + 1);
    TU_CHECK(t, 2, TU_SHAPE(3, 2), ((double[]){0, 3, 10, 40, 20, 50}), 0);
    jg_release(t);
    TU_CHECK(s, 2, TU_SHAPE(2, 2), ((double[]){10, 20, 40, 50}), 0);
    jg_release(s); /* the last reference: the block is freed */
    TU_CHECK(v64, 1, TU_SHAPE(6), ((double[]){2, 3, 4, 5, 6, 7}), 0);
    TU_CHECK(vbig, 1, TU_SHAPE(8), ((double[]){1, 2, 3, 4, 5, 6, 7, 8}), 0);
    jg_release(v64);
    jg_release(vbig);
}

static void test_grad_fn_names(void **state) {
    (void)state;
    jg_tensor *x = arange(JG_F32, 2, TU_SHAPE(2, 3));
    jg_set_requires_grad(x, true);
    assert_string_equal(jg_grad_fn_name(jg_reshape(x, 1, TU_SHAPE(6))), "ViewBackward0");
    assert_string_equal(jg_grad_fn_name(jg_transpose(x, 0, 1)), "PermuteBackward0");
    assert_string_equal(jg_grad_fn_name(jg_slice(x, 1, 0, 2)), "SliceBackward0");
    assert_string_equal(jg_grad_fn_name(jg_expand(x, 3, TU_SHAPE(2, 2, 3))), "ExpandBackward0");
    assert_true(jg_requires_grad(jg_slice(x, 1, 0, 2)));
    assert_false(jg_is_leaf(jg_slice(x, 1, 0, 2)));
}

/* ------------------------------------------------------------ backward */

static void test_backward_values(void **state) {
    (void)state;
    jg_tensor *x = tu_tensor(JG_F32, 1, TU_SHAPE(4), TU_VALS(1, 2, 3, 4));
    jg_set_requires_grad(x, true);
    jg_tensor *y = jg_sum(jg_mul_scalar(jg_slice(x, 0, 1, 3), 3));
    assert_int_equal(jg_backward(y, NULL, 0), 0);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(4), TU_VALS(0, 3, 3, 0), 0);
    jg_clear_grad(x);
    jg_tensor *c = jg_reshape(x, 2, TU_SHAPE(4, 1));
    y = jg_sum(jg_expand(c, 3, TU_SHAPE(2, 4, 5)));
    assert_int_equal(jg_backward(y, NULL, 0), 0);
    TU_CHECK(jg_grad(x), 1, TU_SHAPE(4), TU_VALS(10, 10, 10, 10), 0);
    jg_clear_grad(x);
    /* permute: grad of sum(w * x^T) is w^T */
    jg_tensor *m = arange(JG_F32, 2, TU_SHAPE(2, 3));
    jg_set_requires_grad(m, true);
    jg_tensor *w = arange(JG_F32, 2, TU_SHAPE(3, 2));
    y = jg_sum(jg_mul(jg_transpose(m, 0, 1), w));
    assert_int_equal(jg_backward(y, NULL, 0), 0);
    TU_CHECK(jg_grad(m), 2, TU_SHAPE(2, 3), TU_VALS(0, 2, 4, 1, 3, 5), 0);
}

/* gradcheck targets: user points at an int selecting the view chain */
static jg_tensor *view_fn(void *user, int n, jg_tensor *const *in) {
    (void)n;
    jg_tensor *x = in[0], *w = in[1];
    switch (*(int *)user) {
    case 0: /* reshape (a view) */
        return jg_mul(jg_reshape(x, 2, TU_SHAPE(4, 3)), jg_reshape(w, 2, TU_SHAPE(4, 3)));
    case 1: /* permute */
        return jg_mul(jg_permute(x, (const int[]){1, 0}), jg_reshape(w, 2, TU_SHAPE(6, 2)));
    case 2: /* slice in both dims */
        return jg_mul(jg_slice(jg_slice(x, 1, 1, 4), 0, 1, 3),
                      jg_slice(jg_reshape(w, 2, TU_SHAPE(2, 6)), 1, 0, 3));
    case 3: /* expand */
        return jg_mul(
            jg_expand(jg_reshape(jg_slice(x, 1, 0, 1), 3, TU_SHAPE(2, 1, 1)), 3, TU_SHAPE(2, 3, 6)),
            jg_reshape(jg_expand(w, 2, TU_SHAPE(3, 12)), 3, TU_SHAPE(2, 3, 6)));
    case 4: /* reshape of a non-contiguous tensor (a copy) */
        return jg_mul(jg_reshape(jg_transpose(x, 0, 1), 1, TU_SHAPE(12)),
                      jg_reshape(w, 1, TU_SHAPE(12)));
    case 5: { /* a chain of everything, squared so the VJP depends on x */
        jg_tensor *v = jg_slice(jg_transpose(x, 0, 1), 0, 1, 6);                  /* [5, 2] */
        v = jg_expand(jg_reshape(v, 3, TU_SHAPE(1, 5, 2)), 3, TU_SHAPE(2, 5, 2)); /* [2, 5, 2] */
        return jg_sum(jg_mul(jg_mul(v, v), jg_slice(jg_reshape(w, 3, TU_SHAPE(2, 3, 2)), 1, 0, 1)));
    }
    case 6: { /* slice_backward directly, and its own VJP (a slice) */
        jg_attrs a = {.n = 5};
        a.i[0] = 1, a.i[1] = 2, a.i[2] = 4, a.i[3] = 2, a.i[4] = 7;
        jg_tensor *sb = jg_op1(JG_OP_SLICE_BACKWARD, &a, jg_slice(x, 1, 0, 2), NULL);
        return jg_mul(jg_mul(sb, sb), jg_slice(jg_reshape(w, 2, TU_SHAPE(2, 6)), 1, 0, 1));
    }
    case 7: /* a permutation that is not its own inverse */
        return jg_mul(jg_permute(jg_reshape(x, 3, TU_SHAPE(2, 3, 2)), (const int[]){2, 0, 1}),
                      jg_reshape(w, 3, TU_SHAPE(2, 2, 3)));
    }
    return NULL;
}

static void test_backward_gradcheck(void **state) {
    (void)state;
    jg_manual_seed(3);
    for (int which = 0; which <= 7; which++) {
        jg_scope_push();
        jg_tensor *x = jg_randn(JG_F64, 2, TU_SHAPE(2, 6));
        jg_tensor *w = jg_randn(JG_F64, 1, TU_SHAPE(12));
        jg_set_requires_grad(x, true);
        jg_set_requires_grad(w, true);
        jg_tensor *in[2] = {x, w};
        int rc = jg_gradcheck(view_fn, &which, 2, in, 1e-6, 1e-7, 1e-5);
        if (rc != 0)
            print_error("case %d: %s\n", which, jg_last_error());
        assert_int_equal(rc, 0);
        assert_null(jg_grad(x)); /* gradcheck touches no .grad */
        assert_null(jg_grad(w));
        jg_scope_pop();
    }
}

static void test_slice_backward_forward(void **state) {
    (void)state;
    jg_tensor *g = tu_tensor(JG_F32, 2, TU_SHAPE(2, 2), TU_VALS(1, 2, 3, 4));
    jg_attrs a = {.n = 5};
    a.i[0] = 1, a.i[1] = 1, a.i[2] = 3, a.i[3] = 2, a.i[4] = 4;
    jg_tensor *r = jg_op1(JG_OP_SLICE_BACKWARD, &a, jg_transpose(g, 0, 1), NULL);
    TU_CHECK(r, 2, TU_SHAPE(2, 4), TU_VALS(0, 1, 3, 0, 0, 2, 4, 0), 0);
    assert_false(jg_same_storage(r, g));
    /* a gradient that does not fit the slice */
    a.i[2] = 4;
    assert_null(jg_op1(JG_OP_SLICE_BACKWARD, &a, g, NULL));
    TU_ERROR("slice_backward");
}

static void test_double_backward_through_views(void **state) {
    (void)state;
    /* y = sum(expand(slice(x))^3); dy/dx via create_graph, then d/dx of sum(dy/dx) */
    jg_tensor *x = tu_tensor(JG_F64, 1, TU_SHAPE(3), TU_VALS(1, 2, 3));
    jg_set_requires_grad(x, true);
    jg_tensor *v =
        jg_expand(jg_reshape(jg_slice(x, 0, 1, 3), 2, TU_SHAPE(1, 2)), 2, TU_SHAPE(4, 2));
    jg_tensor *y = jg_sum(jg_pow_scalar(v, 3));
    jg_tensor *g;
    assert_int_equal(jg_autograd_grad(1, &y, NULL, 1, &x, JG_CREATE_GRAPH, &g), 0);
    TU_CHECK(g, 1, TU_SHAPE(3), TU_VALS(0, 4 * 3 * 4, 4 * 3 * 9), 1e-12);
    assert_true(jg_requires_grad(g));
    jg_tensor *gg;
    jg_tensor *sg = jg_sum(g);
    assert_int_equal(jg_autograd_grad(1, &sg, NULL, 1, &x, 0, &gg), 0);
    TU_CHECK(gg, 1, TU_SHAPE(3), TU_VALS(0, 4 * 6 * 2, 4 * 6 * 3), 1e-12);
}

/* ---------------------------------------------- contiguous/clone/detach */

static void test_contiguous_clone_detach(void **state) {
    (void)state;
    jg_tensor *x = arange(JG_F32, 2, TU_SHAPE(2, 3));
    jg_set_requires_grad(x, true);
    jg_tensor *c = jg_contiguous(x);
    assert_ptr_equal(c, x); /* already contiguous: x itself */
    jg_tensor *t = jg_transpose(x, 0, 1);
    jg_tensor *tc = jg_contiguous(t);
    assert_false(jg_same_storage(tc, x));
    assert_true(jg_is_contiguous(tc));
    TU_CHECK(tc, 2, TU_SHAPE(3, 2), TU_VALS(0, 3, 1, 4, 2, 5), 0);
    assert_true(jg_requires_grad(tc));
    assert_int_equal(jg_backward(jg_sum(jg_mul(tc, tc)), NULL, 0), 0);
    TU_CHECK(jg_grad(x), 2, TU_SHAPE(2, 3), TU_VALS(0, 2, 4, 6, 8, 10), 0);

    jg_tensor *cl = jg_clone(t);
    assert_false(jg_same_storage(cl, x));
    assert_true(jg_is_contiguous(cl));
    assert_string_equal(jg_grad_fn_name(cl), "CloneBackward0");
    TU_SAME(cl, tc);

    jg_tensor *d = jg_detach(t);
    assert_true(jg_same_storage(d, x));
    assert_false(jg_requires_grad(d));
    assert_true(jg_is_leaf(d));
    assert_null(jg_grad_fn_name(d));
    check_geom(d, 2, TU_SHAPE(3, 2), TU_SHAPE(1, 3), 0);
    /* the detached alias may be written in place; the base sees it */
    assert_int_equal(jg_mul_scalar_(d, 2), 0);
    double xv[6];
    tu_values(x, xv);
    for (int i = 0; i < 6; i++)
        assert_true(xv[i] == 2 * i);
    /* and contiguous() of an expanded tensor materialises it */
    jg_tensor *e = jg_contiguous(jg_expand(jg_scalar(JG_F64, 1.5), 1, TU_SHAPE(3)));
    check_geom(e, 1, TU_SHAPE(3), TU_SHAPE(1), 0);
    TU_CHECK(e, 1, TU_SHAPE(3), TU_VALS(1.5, 1.5, 1.5), 0);
}

/* -------------------------------------------------------------- errors */

static void test_errors(void **state) {
    (void)state;
    jg_tensor *x = arange(JG_F32, 2, TU_SHAPE(2, 3));
    uint64_t v0 = jg_version(x);

    assert_null(jg_reshape(x, 2, TU_SHAPE(4, 4)));
    TU_ERROR("shape '[4, 4]' is invalid for input of size 6");
    assert_null(jg_reshape(x, 2, TU_SHAPE(-1, 4)));
    TU_ERROR("shape '[-1, 4]' is invalid for input of size 6");
    assert_null(jg_reshape(x, 2, TU_SHAPE(-1, -1)));
    TU_ERROR("only one dimension can be inferred");
    assert_null(jg_reshape(x, 2, TU_SHAPE(-2, 3)));
    TU_ERROR("invalid shape dimension -2");
    assert_null(jg_reshape(NULL, 1, TU_SHAPE(6)));
    TU_ERROR("NULL");

    assert_null(jg_slice(x, 2, 0, 1));
    TU_ERROR("Dimension out of range (expected to be in range of [-2, 1], but got 2)");
    assert_null(jg_slice(x, -3, 0, 1));
    TU_ERROR("Dimension out of range (expected to be in range of [-2, 1], but got -3)");
    assert_null(jg_slice(jg_scalar(JG_F32, 1), 0, 0, 1));
    TU_ERROR("slice() cannot be applied to a 0-dim tensor.");
    assert_null(jg_transpose(x, 0, 2));
    TU_ERROR("Dimension out of range (expected to be in range of [-2, 1], but got 2)");

    assert_null(jg_expand(x, 2, TU_SHAPE(3, 3)));
    TU_ERROR("The expanded size of the tensor (3) must match the existing size (2) at "
             "non-singleton dimension 0.  Target sizes: [3, 3].  Tensor sizes: [2, 3]");
    assert_null(jg_expand(x, 1, TU_SHAPE(6)));
    TU_ERROR("the number of sizes provided (1) must be greater or equal to the number of "
             "dimensions in the tensor (2)");
    assert_null(jg_expand(x, 3, TU_SHAPE(-1, 2, 3)));
    TU_ERROR("The expanded size of the tensor (-1)");

    assert_null(jg_permute(x, (const int[]){0, 0}));
    TU_ERROR("permute(): duplicate dims are not allowed.");
    assert_null(jg_permute(x, (const int[]){1, -1}));
    TU_ERROR("permute(): duplicate dims are not allowed.");
    assert_null(jg_permute(x, (const int[]){0, 5}));
    TU_ERROR("Dimension out of range (expected to be in range of [-2, 1], but got 5)");
    assert_null(jg_permute(x, NULL));
    TU_ERROR("NULL");

    /* the internal ops validate their attributes too */
    jg_attrs bad = {.n = 2};
    bad.i[0] = 0, bad.i[1] = 0;
    assert_null(jg_op1(JG_OP_PERMUTE, &bad, x, NULL));
    TU_ERROR("permute(): duplicate dims are not allowed.");
    jg_attrs bs = {.n = 3};
    bs.i[0] = 1, bs.i[1] = 2, bs.i[2] = 5;
    assert_null(jg_op1(JG_OP_SLICE, &bs, x, NULL));
    TU_ERROR("slice");

    /* nothing changed */
    assert_true(jg_version(x) == v0);
    TU_CHECK(x, 2, TU_SHAPE(2, 3), TU_VALS(0, 1, 2, 3, 4, 5), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_reshape_view),
        TU_TEST(test_permute_transpose),
        TU_TEST(test_slice),
        TU_TEST(test_expand),
        TU_TEST(test_views_of_views),
        TU_TEST(test_views_outlive_small_base),
        TU_TEST(test_grad_fn_names),
        TU_TEST(test_backward_values),
        TU_TEST(test_backward_gradcheck),
        TU_TEST(test_slice_backward_forward),
        TU_TEST(test_double_backward_through_views),
        TU_TEST(test_contiguous_clone_detach),
        TU_TEST(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
