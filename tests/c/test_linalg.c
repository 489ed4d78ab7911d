/* matmul: every rank combination (dot, mm, vm, mv, batched with broadcast
 * batch dims, N-D against 1-D/2-D), strided operands (transposed views go to
 * BLAS as CblasTrans, layouts BLAS cannot describe are copied), empty and
 * k = 0 products, dtype promotion, gradients against finite differences
 * (first and second order), and PyTorch's error messages. */
#include "testutil.h"

#include "ops/optable.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void lcg_fill(double *v, int64_t n, uint64_t seed) {
    uint64_t s = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    for (int64_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        v[i] = (double)((s >> 33) % 4096) / 1024.0 - 2.0;
    }
}

enum { CONTIG, TRANSPOSED, PERMUTED, EXPANDED, SLICED, N_LAYOUTS };

/* A tensor of the given logical shape laid out as `layout`:
 * TRANSPOSED: last two dims swapped from a contiguous base (CblasTrans);
 * PERMUTED: last dim moved to the front of the base, so neither matrix dim
 *   has unit stride (BLAS cannot take it: copied);
 * EXPANDED: dim -2 (or 0 of a 1-D) broadcast from size 1 (stride 0: copied);
 * SLICED: a column slice of a wider base (row stride > cols: lda). */
static jg_tensor *make_operand(jg_dtype dt, int ndim, const int64_t *shape, int layout,
                               uint64_t seed) {
    double v[2048];
    int64_t n = tu_numel(ndim, shape);
    assert_true(3 * n + 8 <= 2048);
    lcg_fill(v, 3 * n + 8, seed);
    int64_t bs[JG_MAX_DIMS];
    memcpy(bs, shape, sizeof(int64_t) * (size_t)ndim);
    jg_tensor *t = NULL;
    if (layout == TRANSPOSED && ndim >= 2) {
        bs[ndim - 1] = shape[ndim - 2];
        bs[ndim - 2] = shape[ndim - 1];
        t = jg_transpose(tu_tensor(dt, ndim, bs, v), -1, -2);
    } else if (layout == PERMUTED && ndim >= 2) {
        int perm[JG_MAX_DIMS];
        bs[0] = shape[ndim - 1];
        for (int d = 1; d < ndim; d++)
            bs[d] = shape[d - 1];
        for (int d = 0; d < ndim - 1; d++)
            perm[d] = d + 1;
        perm[ndim - 1] = 0;
        t = jg_permute(tu_tensor(dt, ndim, bs, v), perm);
    } else if (layout == EXPANDED) {
        int d = ndim >= 2 ? ndim - 2 : 0;
        bs[d] = 1;
        t = jg_expand(tu_tensor(dt, ndim, bs, v), ndim, shape);
    } else if (layout == SLICED) {
        bs[ndim - 1] = shape[ndim - 1] + 3;
        t = jg_slice(tu_tensor(dt, ndim, bs, v), ndim - 1, 2, 2 + shape[ndim - 1]);
    } else {
        t = tu_tensor(dt, ndim, shape, v);
    }
    assert_non_null(t);
    for (int d = 0; d < ndim; d++)
        assert_int_equal(jg_shape(t)[d], shape[d]);
    return t;
}

/* Naive matmul on row-major values (a, b as read by tu_values). */
static void naive_matmul(int na, const int64_t *sa, const double *a, int nb, const int64_t *sb,
                         const double *b, int *no, int64_t *so, double *out) {
    /* promote to [batch.., n, k] and [batch.., k, p] */
    int64_t n = na >= 2 ? sa[na - 2] : 1, k = sa[na - 1], p = nb >= 2 ? sb[nb - 1] : 1;
    int ba = na > 2 ? na - 2 : 0, bb = nb > 2 ? nb - 2 : 0, bo = ba > bb ? ba : bb;
    int64_t bshape[JG_MAX_DIMS];
    for (int d = 0; d < bo; d++) {
        int da = d - (bo - ba), db = d - (bo - bb);
        int64_t xa = da >= 0 ? sa[da] : 1, xb = db >= 0 ? sb[db] : 1;
        bshape[d] = xa == 1 ? xb : xa;
    }
    int64_t nbat = tu_numel(bo, bshape);
    for (int64_t bi = 0; bi < nbat; bi++) {
        /* offsets of batch bi in a and b (broadcast) */
        int64_t rem = bi, oa = 0, ob = 0, ma = 1, mb = 1;
        for (int d = bo - 1; d >= 0; d--) {
            int64_t id = rem % bshape[d];
            rem /= bshape[d];
            int da = d - (bo - ba), db = d - (bo - bb);
            if (da >= 0) {
                oa += (sa[da] == 1 ? 0 : id) * ma;
                ma *= sa[da];
            }
            if (db >= 0) {
                ob += (sb[db] == 1 ? 0 : id) * mb;
                mb *= sb[db];
            }
        }
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < p; j++) {
                double acc = 0;
                for (int64_t q = 0; q < k; q++)
                    acc += a[oa * n * k + i * k + q] * b[ob * k * p + q * p + j];
                out[(bi * n + i) * p + j] = acc;
            }
    }
    *no = bo;
    memcpy(so, bshape, sizeof(int64_t) * (size_t)bo);
    if (na >= 2)
        so[(*no)++] = n;
    if (nb >= 2)
        so[(*no)++] = p;
}

typedef struct {
    int na;
    int64_t sa[4];
    int nb;
    int64_t sb[4];
} mm_case;

static const mm_case mm_cases[] = {
    {1, {3}, 1, {3}},                /* dot */
    {2, {2, 3}, 2, {3, 4}},          /* mm */
    {1, {3}, 2, {3, 4}},             /* vm */
    {2, {2, 3}, 1, {3}},             /* mv */
    {3, {2, 2, 3}, 2, {3, 4}},       /* batched . 2-D (folds) */
    {3, {2, 2, 3}, 1, {3}},          /* batched . 1-D */
    {1, {3}, 3, {2, 3, 4}},          /* 1-D . batched */
    {2, {2, 3}, 3, {5, 3, 4}},       /* 2-D . batched */
    {3, {5, 2, 3}, 3, {5, 3, 4}},    /* bmm */
    {4, {2, 1, 2, 3}, 3, {3, 3, 4}}, /* broadcast batch dims */
    {3, {1, 2, 3}, 4, {2, 3, 3, 2}}, /* broadcast the other way */
    {2, {1, 3}, 2, {3, 1}},          /* unit dims */
    {2, {4, 1}, 2, {1, 5}},          /* outer product (k = 1) */
    /* products of at least 8 x 8 with m n k <= 100^3: a transposed b runs
     * as a copy of b^T and a plain product where OpenBLAS's kernels make
     * that faster (ops/linalg.c) */
    {3, {2, 16, 12}, 3, {2, 12, 20}},    /* bmm */
    {3, {3, 16, 12}, 2, {12, 20}},       /* folds */
    {4, {2, 1, 16, 12}, 3, {3, 12, 16}}, /* broadcast batch dims */
    {2, {8, 9}, 2, {9, 8}},              /* the smallest such */
    {2, {7, 9}, 2, {9, 30}},             /* a dim under 8: as before */
};

static void check_case(const mm_case *c, jg_dtype dt, int la, int lb, uint64_t seed) {
    jg_tensor *a = make_operand(dt, c->na, c->sa, la, seed);
    jg_tensor *b = make_operand(dt, c->nb, c->sb, lb, seed + 1);
    jg_tensor *y = jg_matmul(a, b);
    if (!y)
        fail_msg("matmul failed: %s", jg_last_error());
    assert_int_equal(jg_dtype_of(y), dt);
    double av[2048], bv[2048], want[2048];
    tu_values(a, av);
    tu_values(b, bv);
    int no;
    int64_t so[JG_MAX_DIMS];
    naive_matmul(c->na, c->sa, av, c->nb, c->sb, bv, &no, so, want);
    TU_CHECK(y, no, so, want, dt == JG_F32 ? 1e-5 : 1e-13);
}

static void test_matmul_forward(void **state) {
    (void)state;
    const jg_dtype dts[] = {JG_F32, JG_F64};
    for (size_t c = 0; c < sizeof mm_cases / sizeof mm_cases[0]; c++)
        for (int t = 0; t < 2; t++)
            for (int la = 0; la < N_LAYOUTS; la++)
                for (int lb = 0; lb < N_LAYOUTS; lb++)
                    check_case(&mm_cases[c], dts[t], la, lb, c * 31 + (uint64_t)(la * 5 + lb));
    /* the operands are left untouched (no in-place copy) */
    jg_tensor *a = make_operand(JG_F64, 2, TU_SHAPE(3, 3), TRANSPOSED, 1);
    assert_false(jg_is_contiguous(a));
    assert_non_null(jg_matmul(a, a));
    assert_false(jg_is_contiguous(a));
}

static void test_matmul_special(void **state) {
    (void)state;
    /* a hand-computed product */
    jg_tensor *a = tu_tensor(JG_F32, 2, TU_SHAPE(2, 3), TU_VALS(1, 2, 3, 4, 5, 6));
    jg_tensor *b = tu_tensor(JG_F32, 2, TU_SHAPE(3, 2), TU_VALS(7, 8, 9, 10, 11, 12));
    TU_CHECK(jg_matmul(a, b), 2, TU_SHAPE(2, 2), TU_VALS(58, 64, 139, 154), 0);
    jg_tensor *v = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(1, -1, 2));
    TU_CHECK(jg_matmul(v, v), 0, NULL, TU_VALS(6), 0);
    TU_CHECK(jg_matmul(a, v), 1, TU_SHAPE(2), TU_VALS(5, 11), 0);
    /* k = 0: zeros; an empty output */
    jg_tensor *z1 = jg_tensor_new(JG_F64, 2, TU_SHAPE(2, 0), NULL);
    jg_tensor *z2 = jg_tensor_new(JG_F64, 2, TU_SHAPE(0, 3), NULL);
    TU_CHECK(jg_matmul(z1, z2), 2, TU_SHAPE(2, 3), TU_VALS(0, 0, 0, 0, 0, 0), 0);
    jg_tensor *e = jg_matmul(z2, tu_tensor(JG_F64, 2, TU_SHAPE(3, 0), NULL));
    TU_CHECK(e, 2, TU_SHAPE(0, 0), NULL, 0);
    jg_tensor *zb = jg_tensor_new(JG_F32, 3, TU_SHAPE(0, 2, 3), NULL);
    TU_CHECK(jg_matmul(zb, b), 3, TU_SHAPE(0, 2, 2), NULL, 0);
    /* int64 operands are computed in float32 (documented in linalg.c) */
    jg_tensor *ia = tu_tensor(JG_I64, 2, TU_SHAPE(2, 3), TU_VALS(1, 2, 3, 4, 5, 6));
    jg_tensor *ib = tu_tensor(JG_I64, 2, TU_SHAPE(3, 2), TU_VALS(7, 8, 9, 10, 11, 12));
    jg_tensor *iy = jg_matmul(ia, ib);
    assert_int_equal(jg_dtype_of(iy), JG_F32);
    TU_CHECK(iy, 2, TU_SHAPE(2, 2), TU_VALS(58, 64, 139, 154), 0);
    /* f32 . f64 promotes to f64 */
    jg_tensor *bd = tu_tensor(JG_F64, 2, TU_SHAPE(3, 2), TU_VALS(7, 8, 9, 10, 11, 12));
    jg_tensor *md = jg_matmul(a, bd);
    assert_int_equal(jg_dtype_of(md), JG_F64);
    TU_CHECK(md, 2, TU_SHAPE(2, 2), TU_VALS(58, 64, 139, 154), 0);
    /* name of the node */
    jg_tensor *w = tu_tensor(JG_F32, 2, TU_SHAPE(3, 2), TU_VALS(7, 8, 9, 10, 11, 12));
    jg_set_requires_grad(w, true);
    assert_string_equal(jg_grad_fn_name(jg_matmul(a, w)), "MmBackward0");
}

/* ---- gradients ---- */

typedef struct {
    int ta, tb; /* transpose the last two dims of the operand inside fn */
} mm_fn_args;

static jg_tensor *mm_fn(void *user, int n, jg_tensor *const *in) {
    (void)n;
    const mm_fn_args *f = user;
    jg_tensor *a = f->ta ? jg_transpose(in[0], -1, -2) : in[0];
    jg_tensor *b = f->tb ? jg_transpose(in[1], -1, -2) : in[1];
    return jg_matmul(a, b);
}

static void test_matmul_gradcheck(void **state) {
    (void)state;
    for (size_t c = 0; c < sizeof mm_cases / sizeof mm_cases[0]; c++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                const mm_case *mc = &mm_cases[c];
                if ((ta && mc->na < 2) || (tb && mc->nb < 2))
                    continue;
                /* (the larger cases are for the forward's BLAS paths) */
                if (tu_numel(mc->na, mc->sa) > 256 || tu_numel(mc->nb, mc->sb) > 256)
                    continue;
                int64_t sa[4], sb[4];
                memcpy(sa, mc->sa, sizeof sa);
                memcpy(sb, mc->sb, sizeof sb);
                if (ta) { /* the leaf holds the transposed shape */
                    sa[mc->na - 1] = mc->sa[mc->na - 2];
                    sa[mc->na - 2] = mc->sa[mc->na - 1];
                }
                if (tb) {
                    sb[mc->nb - 1] = mc->sb[mc->nb - 2];
                    sb[mc->nb - 2] = mc->sb[mc->nb - 1];
                }
                double va[256], vb[256];
                lcg_fill(va, 256, c + 100);
                lcg_fill(vb, 256, c + 200);
                jg_tensor *in[2] = {tu_tensor(JG_F64, mc->na, sa, va),
                                    tu_tensor(JG_F64, mc->nb, sb, vb)};
                jg_set_requires_grad(in[0], true);
                jg_set_requires_grad(in[1], true);
                mm_fn_args args = {ta, tb};
                if (jg_gradcheck(mm_fn, &args, 2, in, 1e-6, 1e-5, 1e-3) < 0)
                    fail_msg("case %zu ta %d tb %d: %s", c, ta, tb, jg_last_error());
            }
}

/* Gradient values by hand: y = a @ b, L = sum(y * w). */
static void test_matmul_grad_values(void **state) {
    (void)state;
    jg_tensor *a = tu_tensor(JG_F32, 2, TU_SHAPE(2, 3), TU_VALS(1, 2, 3, 4, 5, 6));
    jg_tensor *b = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(1, -1, 2));
    jg_set_requires_grad(a, true);
    jg_set_requires_grad(b, true);
    jg_tensor *w = tu_tensor(JG_F32, 1, TU_SHAPE(2), TU_VALS(10, 100));
    assert_int_equal(jg_backward(jg_sum(jg_mul(jg_matmul(a, b), w)), NULL, 0), 0);
    /* dL/da[i][k] = w[i] b[k]; dL/db[k] = sum_i w[i] a[i][k] */
    TU_CHECK(jg_grad(a), 2, TU_SHAPE(2, 3), TU_VALS(10, -10, 20, 100, -100, 200), 0);
    TU_CHECK(jg_grad(b), 1, TU_SHAPE(3), TU_VALS(410, 520, 630), 0);
    /* dot: dL/du = g v */
    jg_tensor *u = tu_tensor(JG_F64, 1, TU_SHAPE(2), TU_VALS(3, 4));
    jg_set_requires_grad(u, true);
    jg_tensor *d = jg_matmul(u, u);
    assert_int_equal(jg_backward(jg_mul_scalar(d, 0.5), NULL, 0), 0);
    TU_CHECK(jg_grad(u), 1, TU_SHAPE(2), TU_VALS(3, 4), 0);
    /* batch broadcast: b shared by every batch gets the sum */
    jg_tensor *x = tu_tensor(JG_F64, 3, TU_SHAPE(2, 1, 2), TU_VALS(1, 2, 3, 4));
    jg_tensor *m = tu_tensor(JG_F64, 2, TU_SHAPE(2, 1), TU_VALS(5, 6));
    jg_set_requires_grad(m, true);
    assert_int_equal(jg_backward(jg_sum(jg_matmul(x, m)), NULL, 0), 0);
    TU_CHECK(jg_grad(m), 2, TU_SHAPE(2, 1), TU_VALS(4, 6), 0);
}

/* x @ W.t() (a Linear): the gradient reaching W is contiguous, made in the
 * layout of W.t()'s base ((g^T x)^T), not a transposed view that .grad would
 * have to copy; exact values, 2-d and 3-d x. */
static void test_matmul_grad_transposed_weight(void **state) {
    (void)state;
    jg_tensor *wt = tu_tensor(JG_F32, 2, TU_SHAPE(2, 3), TU_VALS(1, 2, 3, 4, 5, 6)); /* [p, k] */
    jg_set_requires_grad(wt, true);
    jg_tensor *x2 = tu_tensor(JG_F32, 2, TU_SHAPE(2, 3), TU_VALS(1, -1, 2, 0, 3, 1));
    jg_set_requires_grad(x2, true); /* (the node then saves w, whose layout decides) */
    jg_tensor *x3 = jg_reshape(x2, 3, TU_SHAPE(2, 1, 3));
    jg_tensor *g2 = tu_tensor(JG_F32, 2, TU_SHAPE(2, 2), TU_VALS(1, 10, 100, 1000));
    jg_tensor *g3 = jg_reshape(g2, 3, TU_SHAPE(2, 1, 2));
    jg_tensor *xs[2] = {x2, x3}, *gs[2] = {g2, g3};
    for (int c = 0; c < 2; c++) {
        jg_tensor *y = jg_matmul(xs[c], jg_transpose(wt, 0, 1));
        jg_tensor *r;
        assert_int_equal(jg_autograd_grad(1, &y, &gs[c], 1, &wt, 0, &r), 0);
        /* dW[j][i] = sum_r g[r][j] x[r][i] */
        TU_CHECK(r, 2, TU_SHAPE(2, 3), TU_VALS(1, 299, 102, 10, 2990, 1020), 0);
        assert_true(jg_is_contiguous(r));
    }
    /* through backward: .grad the same, and leaves other layouts alone */
    assert_int_equal(jg_backward(jg_sum(jg_matmul(x2, jg_transpose(wt, 0, 1))), NULL, 0), 0);
    TU_CHECK(jg_grad(wt), 2, TU_SHAPE(2, 3), TU_VALS(1, 2, 3, 1, 2, 3), 0);
}

/* Second order: the gradient of sum((a @ b)^2) w.r.t. a (or b), built with
 * JG_CREATE_GRAPH, checked against finite differences of itself. */
typedef struct {
    int wrt;
    int ta;
} gg_args;

static jg_tensor *grad_fn(void *user, int n, jg_tensor *const *in) {
    (void)n;
    const gg_args *g = user;
    jg_tensor *a = g->ta ? jg_transpose(in[0], -1, -2) : in[0];
    jg_tensor *y = jg_matmul(a, in[1]);
    jg_tensor *l = y ? jg_sum(jg_mul(y, y)) : NULL;
    jg_tensor *r;
    if (!l || jg_autograd_grad(1, &l, NULL, 1, &in[g->wrt], JG_CREATE_GRAPH, &r) < 0)
        return NULL;
    return r;
}

static void test_matmul_double_backward(void **state) {
    (void)state;
    const mm_case cs[] = {{2, {2, 3}, 2, {3, 4}},
                          {3, {2, 2, 3}, 2, {3, 2}},
                          {1, {3}, 3, {2, 3, 2}},
                          {1, {3}, 1, {3}}};
    for (size_t c = 0; c < 4; c++)
        for (int wrt = 0; wrt < 2; wrt++)
            for (int ta = 0; ta < 2; ta++) {
                if (ta && cs[c].na < 2)
                    continue;
                int64_t sa[4];
                memcpy(sa, cs[c].sa, sizeof sa);
                if (ta) {
                    sa[cs[c].na - 1] = cs[c].sa[cs[c].na - 2];
                    sa[cs[c].na - 2] = cs[c].sa[cs[c].na - 1];
                }
                double va[64], vb[64];
                lcg_fill(va, 64, c + 7);
                lcg_fill(vb, 64, c + 9);
                jg_tensor *in[2] = {tu_tensor(JG_F64, cs[c].na, sa, va),
                                    tu_tensor(JG_F64, cs[c].nb, cs[c].sb, vb)};
                jg_set_requires_grad(in[0], true);
                jg_set_requires_grad(in[1], true);
                gg_args args = {wrt, ta};
                if (jg_gradcheck(grad_fn, &args, 2, in, 1e-6, 1e-5, 1e-3) < 0)
                    fail_msg("case %zu wrt %d ta %d: %s", c, wrt, ta, jg_last_error());
            }
    /* and by hand: L = sum((a b)^2) with scalars-as-matrices a = [[2]],
     * b = [[3]]: dL/da = 2ab^2 = 36; d/db of that = 4ab = 24 */
    jg_tensor *a = tu_tensor(JG_F64, 2, TU_SHAPE(1, 1), TU_VALS(2));
    jg_tensor *b = tu_tensor(JG_F64, 2, TU_SHAPE(1, 1), TU_VALS(3));
    jg_set_requires_grad(a, true);
    jg_set_requires_grad(b, true);
    jg_tensor *y = jg_matmul(a, b);
    jg_tensor *l = jg_sum(jg_mul(y, y)), *ga;
    assert_int_equal(jg_autograd_grad(1, &l, NULL, 1, &a, JG_CREATE_GRAPH, &ga), 0);
    TU_CHECK(ga, 2, TU_SHAPE(1, 1), TU_VALS(36), 0);
    assert_int_equal(jg_backward(jg_sum(ga), NULL, 0), 0);
    TU_CHECK(jg_grad(b), 2, TU_SHAPE(1, 1), TU_VALS(24), 0);
    TU_CHECK(jg_grad(a), 2, TU_SHAPE(1, 1), TU_VALS(18), 0); /* 2 b^2 */
}

/* ---- errors ---- */

static void expect_mm_error(int na, const int64_t *sa, int nb, const int64_t *sb, const char *msg) {
    jg_tensor *a = jg_tensor_new(JG_F32, na, sa, NULL);
    jg_tensor *b = jg_tensor_new(JG_F32, nb, sb, NULL);
    assert_non_null(a);
    assert_non_null(b);
    jg_clear_error();
    assert_null(jg_matmul(a, b));
    TU_ERROR(msg);
}

static void test_matmul_errors(void **state) {
    (void)state;
    /* messages as PyTorch 1.13 prints them (torch.ones(...) @ torch.ones(...)) */
    expect_mm_error(0, NULL, 1, TU_SHAPE(3),
                    "both arguments to matmul need to be at least 1D, but they are 0D and 1D");
    expect_mm_error(1, TU_SHAPE(3), 0, NULL,
                    "both arguments to matmul need to be at least 1D, but they are 1D and 0D");
    expect_mm_error(1, TU_SHAPE(3), 1, TU_SHAPE(4),
                    "inconsistent tensor size, expected tensor [3] and src [4] to have the same "
                    "number of elements, but got 3 and 4 elements respectively");
    expect_mm_error(2, TU_SHAPE(2, 3), 2, TU_SHAPE(4, 5),
                    "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)");
    expect_mm_error(1, TU_SHAPE(3), 2, TU_SHAPE(4, 5),
                    "mat1 and mat2 shapes cannot be multiplied (1x3 and 4x5)");
    expect_mm_error(2, TU_SHAPE(2, 3), 1, TU_SHAPE(4), "size mismatch, got 2, 2x3,4");
    expect_mm_error(3, TU_SHAPE(2, 2, 3), 1, TU_SHAPE(4), "size mismatch, got 4, 4x3,4");
    expect_mm_error(3, TU_SHAPE(2, 2, 3), 2, TU_SHAPE(4, 5),
                    "mat1 and mat2 shapes cannot be multiplied (4x3 and 4x5)");
    expect_mm_error(1, TU_SHAPE(3), 3, TU_SHAPE(2, 4, 5), "size mismatch, got 10, 10x4,3");
    expect_mm_error(2, TU_SHAPE(2, 3), 3, TU_SHAPE(2, 4, 5),
                    "mat1 and mat2 shapes cannot be multiplied (10x4 and 3x2)");
    expect_mm_error(3, TU_SHAPE(2, 2, 3), 3, TU_SHAPE(2, 4, 5),
                    "Expected size for first two dimensions of batch2 tensor to be: [2, 3] but "
                    "got: [2, 4].");
    expect_mm_error(4, TU_SHAPE(2, 1, 2, 3), 3, TU_SHAPE(3, 4, 5),
                    "Expected size for first two dimensions of batch2 tensor to be: [6, 3] but "
                    "got: [6, 4].");
    expect_mm_error(3, TU_SHAPE(2, 1, 3), 4, TU_SHAPE(1, 4, 3, 5),
                    "The size of tensor a (2) must match the size of tensor b (4) at "
                    "non-singleton dimension 1");
    expect_mm_error(3, TU_SHAPE(5, 2, 3), 3, TU_SHAPE(4, 3, 5),
                    "The size of tensor a (5) must match the size of tensor b (4) at "
                    "non-singleton dimension 0");
    /* NULL operand */
    jg_tensor *a = tu_tensor(JG_F32, 1, TU_SHAPE(1), TU_VALS(1));
    assert_null(jg_matmul(a, NULL));
    TU_ERROR("argument 1 is NULL");
}

/* ------------------------------------------- gradients in the operand's layout */

static bool row_major(const jg_tensor *t) {
    const int64_t *s = jg_strides(t), *sh = jg_shape(t);
    return jg_ndim(t) == 2 && s[1] == 1 && s[0] == sh[1];
}

/* small integers: every product and sum below is exact in f32 */
static jg_tensor *ints(int ndim, const int64_t *shape, uint64_t seed) {
    double v[256];
    int64_t n = tu_numel(ndim, shape);
    assert_true(n <= 256);
    lcg_fill(v, n, seed);
    for (int64_t i = 0; i < n; i++)
        v[i] = floor(v[i] * 2);
    return tu_tensor(JG_F32, ndim, shape, v);
}

/* y = x @ w.t() (nn.Linear; w [5, 7] row-major, so w.t() is column-major):
 * as PyTorch's mm backward, w's gradient is computed as (g^T x)^T and comes
 * out row-major like w, for a 2-D x, a 1-D x and an N-D x (folded); a
 * second backward adds into .grad and keeps its layout.  A column-major x
 * (X.t()) gets a row-major gradient for X the same way. */
static void test_matmul_grad_in_operand_layout(void **state) {
    (void)state;
    const int64_t xshapes[3][3] = {{4, 7}, {7}, {2, 3, 7}};
    const int xnd[3] = {2, 1, 3};
    for (int c = 0; c < 3; c++) {
        jg_tensor *w = ints(2, TU_SHAPE(5, 7), 1);
        jg_tensor *x = ints(xnd[c], xshapes[c], 2);
        jg_set_requires_grad(w, true);
        jg_set_requires_grad(x, true);
        jg_tensor *y = jg_matmul(x, jg_transpose(w, 0, 1));
        jg_tensor *cw = ints(jg_ndim(y), jg_shape(y), 3);
        /* the gradient itself, before .grad (which would copy a strided one) */
        jg_tensor *l = jg_sum(jg_mul(y, cw)), *gw;
        assert_int_equal(jg_autograd_grad(1, &l, NULL, 1, &w, JG_RETAIN_GRAPH, &gw), 0);
        assert_true(row_major(gw));
        for (int pass = 1; pass <= 2; pass++) {
            assert_int_equal(jg_backward(jg_sum(jg_mul(y, cw)), NULL, 0), 0);
            /* dL/dw = cw^T x over the rows (x, cw folded to 2-D) */
            int64_t rows = xnd[c] == 1 ? 1 : (xnd[c] == 2 ? 4 : 6);
            jg_tensor *x2 = jg_reshape(jg_detach(x), 2, TU_SHAPE(rows, 7));
            jg_tensor *c2 = jg_reshape(cw, 2, TU_SHAPE(rows, 5));
            jg_tensor *want = jg_matmul(jg_transpose(c2, 0, 1), x2);
            if (pass == 2)
                want = jg_add(want, want);
            assert_true(row_major(jg_grad(w)));
            TU_SAME(jg_grad(w), want);
            /* x's gradient is unchanged: cw @ w */
            jg_tensor *gx = jg_matmul(cw, jg_detach(w));
            TU_SAME(jg_grad(x), pass == 2 ? jg_add(gx, gx) : gx);
            if (pass == 1)
                y = jg_matmul(x, jg_transpose(w, 0, 1));
        }
    }
    /* column-major a: X [7, 4] row-major, a = X.t() */
    jg_tensor *X = ints(2, TU_SHAPE(7, 4), 4), *b = ints(2, TU_SHAPE(7, 5), 5);
    jg_set_requires_grad(X, true);
    jg_set_requires_grad(b, true);
    jg_tensor *cw = ints(2, TU_SHAPE(4, 5), 6), *gX;
    jg_tensor *l = jg_sum(jg_mul(jg_matmul(jg_transpose(X, 0, 1), b), cw));
    assert_int_equal(jg_autograd_grad(1, &l, NULL, 1, &X, JG_RETAIN_GRAPH, &gX), 0);
    assert_true(row_major(gX));
    assert_int_equal(jg_backward(l, NULL, 0), 0);
    assert_true(row_major(jg_grad(X)));
    TU_SAME(jg_grad(X), jg_matmul(jg_detach(b), jg_transpose(cw, 0, 1))); /* (cw b^T)^T */
    TU_SAME(jg_grad(b), jg_matmul(jg_detach(X), cw));                     /* X cw */
}

/* in: x, w, cw -> sum((x @ w.t()) * cw) */
static int p_linear(void *user, const void *args, int n, jg_tensor *const *in, jg_tensor **out) {
    (void)user, (void)args, (void)n;
    out[0] = jg_sum(jg_mul(jg_matmul(in[0], jg_transpose(in[1], 0, 1)), in[2]));
    return out[0] ? 1 : -1;
}

/* Compiled (interp, c), the flag is in the traced graph and the gradients
 * are eager's bits, in eager's layout (random values: real rounding). */
static void test_matmul_grad_layout_compiled(void **state) {
    (void)state;
    const char *backends[2] = {"interp", "c"};
    jg_manual_seed(3);
    jg_tensor *x = jg_randn(JG_F32, 2, TU_SHAPE(64, 100));
    jg_tensor *w = jg_randn(JG_F32, 2, TU_SHAPE(30, 100));
    jg_tensor *cw = jg_randn(JG_F32, 2, TU_SHAPE(64, 30));
    jg_tensor *in[3] = {x, w, cw}, *loss;
    jg_set_requires_grad(x, true);
    jg_set_requires_grad(w, true);
    assert_int_equal(p_linear(NULL, NULL, 3, in, &loss), 1);
    assert_int_equal(jg_backward(loss, NULL, 0), 0);
    assert_true(row_major(jg_grad(w)));
    jg_tensor *gw = jg_clone(jg_grad(w)), *gx = jg_clone(jg_grad(x)); /* (.grad is reset below) */
    for (int b = 0; b < 2; b++) {
        if (!jg_compile_backend_available(backends[b]))
            continue;
        jg_set_grad(w, NULL);
        jg_set_grad(x, NULL);
        jg_compiled *c = jg_compile(p_linear, NULL, &(jg_compile_options){.backend = backends[b]});
        assert_non_null(c);
        assert_int_equal(jg_compiled_call(c, NULL, 0, 3, in, &loss), 1);
        assert_int_equal(jg_backward(loss, NULL, 0), 0);
        assert_true(row_major(jg_grad(w)));
        TU_SAME(jg_grad(w), gw);
        TU_SAME(jg_grad(x), gx);
        char *graph = jg_compiled_graph(c, 0);
        assert_non_null(graph);
        assert_non_null(strstr(graph, "b_col_major"));
        free(graph);
        jg_compiled_free(c);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_matmul_forward),
        TU_TEST(test_matmul_special),
        TU_TEST(test_matmul_gradcheck),
        TU_TEST(test_matmul_grad_values),
        TU_TEST(test_matmul_double_backward),
        TU_TEST(test_matmul_errors),
        TU_TEST(test_matmul_grad_transposed_weight),
        TU_TEST(test_matmul_grad_in_operand_layout),
        TU_TEST(test_matmul_grad_layout_compiled),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
