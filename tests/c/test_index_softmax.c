/* gather / scatter_add (the internal index ops), softmax, log_softmax,
 * nll_loss and cross_entropy: forward against naive loops written here,
 * strided inputs, gradients against finite differences in f64 (first and
 * second order), cross_entropy against values computed by PyTorch, and
 * every error path by message. */
#include "testutil.h"

#include "ops/optable.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void lcg_fill(double *v, int64_t n, uint64_t seed) {
    uint64_t s = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    for (int64_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        v[i] = (double)((s >> 33) % 4096) / 512.0 - 4.0;
    }
}

static void lcg_index(double *v, int64_t n, int64_t hi, uint64_t seed) {
    uint64_t s = seed * 2862933555777941757ULL + 3037000493ULL;
    for (int64_t i = 0; i < n; i++) {
        s = s * 2862933555777941757ULL + 3037000493ULL;
        v[i] = (double)((s >> 33) % (uint64_t)hi);
    }
}

/* Values of the given shape; transposed: the last two dims of a contiguous
 * base swapped (a non-contiguous view). */
static jg_tensor *make_x(jg_dtype dt, int ndim, const int64_t *shape, bool transposed,
                         uint64_t seed) {
    double v[512];
    lcg_fill(v, tu_numel(ndim, shape), seed);
    if (!transposed || ndim < 2)
        return tu_tensor(dt, ndim, shape, v);
    int64_t bs[JG_MAX_DIMS];
    memcpy(bs, shape, sizeof(int64_t) * (size_t)ndim);
    bs[ndim - 1] = shape[ndim - 2];
    bs[ndim - 2] = shape[ndim - 1];
    jg_tensor *t = jg_transpose(tu_tensor(dt, ndim, bs, v), -1, -2);
    assert_non_null(t);
    if (shape[ndim - 1] > 1 && shape[ndim - 2] > 1)
        assert_false(jg_is_contiguous(t));
    return t;
}

static jg_tensor *gather(jg_tensor *x, int dim, jg_tensor *idx) {
    jg_attrs at = {.n = 1};
    at.i[0] = dim;
    return jg_op1(JG_OP_GATHER, &at, x, idx);
}

static jg_tensor *scatter_add(jg_tensor *src, int dim, jg_tensor *idx, int ndim,
                              const int64_t *shape) {
    jg_attrs at = {.n = 1 + ndim};
    at.i[0] = dim;
    memcpy(&at.i[1], shape, sizeof(int64_t) * (size_t)ndim);
    return jg_op1(JG_OP_SCATTER_ADD, &at, src, idx);
}

/* Row-major flat offset of multi-index pos in shape. */
static int64_t flat(int ndim, const int64_t *shape, const int64_t *pos) {
    int64_t o = 0;
    for (int d = 0; d < ndim; d++)
        o = o * shape[d] + pos[d];
    return o;
}

static void unflat(int ndim, const int64_t *shape, int64_t i, int64_t *pos) {
    for (int d = ndim - 1; d >= 0; d--) {
        pos[d] = i % shape[d];
        i /= shape[d];
    }
}

/* ---- gather / scatter_add ---- */

typedef struct {
    int ndim;
    int64_t xshape[3], ishape[3];
    int dim;
} gather_case;

static const gather_case gcases[] = {
    {2, {3, 4}, {3, 2}, 1},       {2, {3, 4}, {5, 4}, 0},       {2, {3, 4}, {2, 3}, 0},
    {3, {2, 3, 4}, {2, 2, 3}, 1}, {3, {2, 3, 4}, {1, 3, 6}, 2}, {1, {5}, {7}, 0},
};

static void test_gather_forward(void **state) {
    (void)state;
    const jg_dtype dts[] = {JG_F32, JG_F64, JG_I64};
    for (size_t c = 0; c < sizeof gcases / sizeof gcases[0]; c++)
        for (int t = 0; t < 3; t++)
            for (int tr = 0; tr < 2; tr++) {
                const gather_case *g = &gcases[c];
                jg_tensor *x = make_x(dts[t], g->ndim, g->xshape, tr, c + 1);
                double iv[128], xv[128], want[128];
                int64_t ni = tu_numel(g->ndim, g->ishape);
                lcg_index(iv, ni, g->xshape[g->dim], c + 5);
                jg_tensor *idx = tu_tensor(JG_I64, g->ndim, g->ishape, iv);
                jg_tensor *y = gather(x, g->dim, idx);
                if (!y)
                    fail_msg("gather case %zu: %s", c, jg_last_error());
                assert_int_equal(jg_dtype_of(y), dts[t]);
                tu_values(x, xv);
                for (int64_t i = 0; i < ni; i++) {
                    int64_t pos[3];
                    unflat(g->ndim, g->ishape, i, pos);
                    pos[g->dim] = (int64_t)iv[i];
                    want[i] = xv[flat(g->ndim, g->xshape, pos)];
                }
                TU_CHECK(y, g->ndim, g->ishape, want, 0);
            }
    /* a hand example: torch.gather(x, 1, [[0, 0], [1, 0]]) */
    jg_tensor *x = tu_tensor(JG_F32, 2, TU_SHAPE(2, 2), TU_VALS(1, 2, 3, 4));
    jg_tensor *i = tu_tensor(JG_I64, 2, TU_SHAPE(2, 2), TU_VALS(0, 0, 1, 0));
    TU_CHECK(gather(x, 1, i), 2, TU_SHAPE(2, 2), TU_VALS(1, 1, 4, 3), 0);
    /* 0-d with a 0-d index */
    jg_tensor *s = jg_scalar(JG_F64, 9);
    jg_tensor *i0 = tu_tensor(JG_I64, 0, NULL, TU_VALS(0));
    TU_CHECK(gather(s, 0, i0), 0, NULL, TU_VALS(9), 0);
    /* a strided index (transposed) */
    jg_tensor *it = jg_transpose(tu_tensor(JG_I64, 2, TU_SHAPE(2, 2), TU_VALS(1, 0, 1, 1)), 0, 1);
    TU_CHECK(gather(x, 1, it), 2, TU_SHAPE(2, 2), TU_VALS(2, 2, 3, 4), 0);
}

static void test_scatter_add_forward(void **state) {
    (void)state;
    const jg_dtype dts[] = {JG_F32, JG_F64, JG_I64};
    for (int t = 0; t < 3; t++)
        for (int tr = 0; tr < 2; tr++)
            for (int dim = 0; dim < 2; dim++) {
                int64_t sshape[2] = {4, 5}, oshape[2] = {dim == 0 ? 3 : 4, dim == 1 ? 3 : 5};
                jg_tensor *src = make_x(dts[t], 2, sshape, tr, 40 + dim);
                double iv[20], sv[20], want[20] = {0};
                lcg_index(iv, 20, 3, 50 + dim); /* duplicates accumulate */
                jg_tensor *idx = tu_tensor(JG_I64, 2, sshape, iv);
                jg_tensor *y = scatter_add(src, dim, idx, 2, oshape);
                if (!y)
                    fail_msg("scatter_add: %s", jg_last_error());
                tu_values(src, sv);
                for (int64_t i = 0; i < 20; i++) { /* row-major order, like the kernel */
                    int64_t pos[2];
                    unflat(2, sshape, i, pos);
                    pos[dim] = (int64_t)iv[i];
                    int64_t o = flat(2, oshape, pos);
                    want[o] = dts[t] == JG_F32 ? (double)(float)(want[o] + sv[i]) : want[o] + sv[i];
                }
                TU_CHECK(y, 2, oshape, want, 0);
            }
    /* index and src smaller than the output in the other dim */
    jg_tensor *src = tu_tensor(JG_F64, 2, TU_SHAPE(1, 2), TU_VALS(5, 7));
    jg_tensor *idx = tu_tensor(JG_I64, 2, TU_SHAPE(1, 2), TU_VALS(2, 2));
    TU_CHECK(scatter_add(src, 1, idx, 2, TU_SHAPE(2, 3)), 2, TU_SHAPE(2, 3),
             TU_VALS(0, 0, 12, 0, 0, 0), 0);
}

/* The embedding's pattern: an index [N, 1] expanded to [N, C] (stride 0
 * along the rows the kernels walk), gathering rows of a [V, C] table and
 * scatter-adding them back with repeated rows (their sums in index order,
 * f32 rounding at each step), and the same index out of range in the
 * middle of a row: PyTorch's message. */
static void test_gather_scatter_expanded_index(void **state) {
    (void)state;
    enum { V = 5, C = 7, N = 9 };
    double xv[V * C], iv[N], sv[N * C];
    for (int i = 0; i < V * C; i++)
        xv[i] = (double)(float)(0.37 * i - 3.1);
    for (int i = 0; i < N * C; i++)
        sv[i] = (double)(float)(1.0 / (i + 3));
    lcg_index(iv, N, V, 77); /* repeats rows */
    jg_tensor *x = tu_tensor(JG_F32, 2, TU_SHAPE(V, C), xv);
    jg_tensor *i1 = tu_tensor(JG_I64, 2, TU_SHAPE(N, 1), iv);
    jg_tensor *idx = jg_expand(i1, 2, TU_SHAPE(N, C));
    assert_non_null(idx);
    double rows[N * C], want[V * C];
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++)
            rows[n * C + c] = xv[(int)iv[n] * C + c];
    TU_CHECK(gather(x, 0, idx), 2, TU_SHAPE(N, C), rows, 0);
    memset(want, 0, sizeof want);
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            double *w = &want[(int)iv[n] * C + c];
            *w = (double)(float)(*w + sv[n * C + c]);
        }
    jg_tensor *src = tu_tensor(JG_F32, 2, TU_SHAPE(N, C), sv);
    TU_CHECK(scatter_add(src, 0, idx, 2, TU_SHAPE(V, C)), 2, TU_SHAPE(V, C), want, 0);
    /* along the walked dim itself: dim 1 of the expanded index */
    jg_tensor *xt = tu_tensor(JG_F32, 2, TU_SHAPE(N, V), sv);
    jg_tensor *ir = jg_expand(tu_tensor(JG_I64, 2, TU_SHAPE(1, N), iv), 2, TU_SHAPE(N, N));
    assert_non_null(ir);
    double wr[N * N];
    for (int r = 0; r < N; r++)
        for (int k = 0; k < N; k++)
            wr[r * N + k] = sv[r * V + (int)iv[k]];
    TU_CHECK(gather(xt, 1, ir), 2, TU_SHAPE(N, N), wr, 0);
    iv[4] = V; /* out of range */
    jg_tensor *bad = jg_expand(tu_tensor(JG_I64, 2, TU_SHAPE(N, 1), iv), 2, TU_SHAPE(N, C));
    assert_null(gather(x, 0, bad));
    assert_string_equal(jg_last_error(), "index 5 is out of bounds for dimension 0 with size 5");
    assert_null(scatter_add(src, 0, bad, 2, TU_SHAPE(V, C)));
}

typedef struct {
    int op; /* 0 gather, 1 scatter_add, 2 d/dx sum(gather(x)^3) */
    int dim;
    jg_tensor *idx;
    int ndim;
    int64_t shape[3];
} idx_fn_args;

static jg_tensor *idx_fn(void *user, int n, jg_tensor *const *in) {
    (void)n;
    const idx_fn_args *f = user;
    if (f->op == 0)
        return gather(in[0], f->dim, f->idx);
    if (f->op == 1)
        return scatter_add(in[0], f->dim, f->idx, f->ndim, f->shape);
    jg_tensor *l = jg_sum(jg_pow_scalar(gather(in[0], f->dim, f->idx), 3)), *g;
    if (!l || jg_autograd_grad(1, &l, NULL, 1, &in[0], JG_CREATE_GRAPH, &g) < 0)
        return NULL;
    return g;
}

static void test_index_gradcheck(void **state) {
    (void)state;
    double xv[24], iv[24];
    lcg_fill(xv, 24, 77);
    lcg_index(iv, 24, 3, 78); /* repeats: gather's backward must add them */
    jg_tensor *x = tu_tensor(JG_F64, 2, TU_SHAPE(3, 4), xv);
    jg_set_requires_grad(x, true);
    jg_tensor *i1 = tu_tensor(JG_I64, 2, TU_SHAPE(3, 5), iv); /* dim 1: columns 0..2 of 4 */
    jg_tensor *i0 = tu_tensor(JG_I64, 2, TU_SHAPE(6, 4), iv); /* dim 0, size 3 */
    idx_fn_args cs[] = {
        {0, 1, i1, 0, {0}},
        {0, 0, i0, 0, {0}},
        {2, 1, i1, 0, {0}},
        {2, 0, i0, 0, {0}},
    };
    for (size_t c = 0; c < 4; c++)
        if (jg_gradcheck(idx_fn, &cs[c], 1, &x, 1e-6, 1e-5, 1e-3) < 0)
            fail_msg("gather case %zu: %s", c, jg_last_error());
    /* scatter_add w.r.t. src, and its double backward through gather */
    jg_tensor *src = tu_tensor(JG_F64, 2, TU_SHAPE(3, 5), xv);
    jg_set_requires_grad(src, true);
    idx_fn_args sc = {1, 1, i1, 2, {3, 3}};
    if (jg_gradcheck(idx_fn, &sc, 1, &src, 1e-6, 1e-5, 1e-3) < 0)
        fail_msg("scatter_add: %s", jg_last_error());
    /* the gradient of gather sums repeated picks, by hand */
    jg_tensor *v = tu_tensor(JG_F64, 1, TU_SHAPE(3), TU_VALS(1, 2, 3));
    jg_set_requires_grad(v, true);
    jg_tensor *pick = tu_tensor(JG_I64, 1, TU_SHAPE(4), TU_VALS(2, 0, 2, 2));
    assert_int_equal(jg_backward(jg_sum(gather(v, 0, pick)), NULL, 0), 0);
    TU_CHECK(jg_grad(v), 1, TU_SHAPE(3), TU_VALS(1, 0, 3), 0);
    assert_string_equal(jg_grad_fn_name(gather(v, 0, pick)), "GatherBackward0");
}

static void test_index_errors(void **state) {
    (void)state;
    jg_tensor *x = tu_tensor(JG_F32, 2, TU_SHAPE(2, 3), TU_VALS(1, 2, 3, 4, 5, 6));
    /* messages as PyTorch 1.13 prints them for torch.ones(2, 3).gather(...) */
    jg_tensor *bad = tu_tensor(JG_I64, 2, TU_SHAPE(1, 2), TU_VALS(0, 5));
    assert_null(gather(x, 1, bad));
    TU_ERROR("index 5 is out of bounds for dimension 1 with size 3");
    jg_tensor *neg = tu_tensor(JG_I64, 2, TU_SHAPE(1, 2), TU_VALS(0, -1));
    assert_null(gather(x, 1, neg));
    TU_ERROR("index -1 is out of bounds for dimension 1 with size 3");
    assert_null(gather(x, 1, tu_tensor(JG_I64, 1, TU_SHAPE(2), TU_VALS(0, 1))));
    TU_ERROR("Index tensor must have the same number of dimensions as input tensor");
    assert_null(gather(x, 1, tu_tensor(JG_F32, 2, TU_SHAPE(1, 2), TU_VALS(0, 1))));
    TU_ERROR("gather(): Expected dtype int64 for index");
    assert_null(gather(x, 1, tu_tensor(JG_I64, 2, TU_SHAPE(3, 2), TU_VALS(0, 1, 0, 1, 0, 1))));
    TU_ERROR("Size does not match at dimension 0 expected index [3, 2] to be smaller than self "
             "[2, 3] apart from dimension 1");
    assert_null(gather(x, 2, bad));
    TU_ERROR("Dimension out of range");
    /* scatter_add */
    jg_tensor *src = tu_tensor(JG_F32, 2, TU_SHAPE(1, 2), TU_VALS(1, 1));
    assert_null(scatter_add(src, 1, bad, 2, TU_SHAPE(2, 3)));
    TU_ERROR("index 5 is out of bounds for dimension 1 with size 3");
    assert_null(scatter_add(src, 1, tu_tensor(JG_F32, 2, TU_SHAPE(1, 2), TU_VALS(0, 1)), 2,
                            TU_SHAPE(2, 3)));
    TU_ERROR("scatter_add(): Expected dtype int64 for index");
    assert_null(
        scatter_add(src, 1, tu_tensor(JG_I64, 2, TU_SHAPE(1, 1), TU_VALS(0)), 2, TU_SHAPE(2, 3)));
    TU_ERROR("scatter_add(): index [1, 1] and src [1, 2] must have the same shape");
    assert_null(scatter_add(src, 0, bad, 1, TU_SHAPE(3)));
    TU_ERROR("Index tensor must have the same number of dimensions as self tensor");
    jg_tensor *big = tu_tensor(JG_F32, 2, TU_SHAPE(3, 2), TU_VALS(1, 1, 1, 1, 1, 1));
    jg_tensor *bigi = tu_tensor(JG_I64, 2, TU_SHAPE(3, 2), TU_VALS(0, 0, 0, 0, 0, 0));
    assert_null(scatter_add(big, 1, bigi, 2, TU_SHAPE(2, 3)));
    TU_ERROR("Expected index [3, 2] to be smaller than self [2, 3] apart from dimension 1 and to "
             "be smaller size than src [3, 2]");
}

/* ---- softmax / log_softmax ---- */

static void naive_softmax(int ndim, const int64_t *shape, int dim, const double *x, double *y,
                          bool log_) {
    int64_t len = ndim ? shape[dim] : 1, inner = 1, outer = 1;
    for (int d = 0; d < dim; d++)
        outer *= shape[d];
    for (int d = dim + 1; d < ndim; d++)
        inner *= shape[d];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double m = -INFINITY, s = 0;
            for (int64_t j = 0; j < len; j++)
                m = fmax(m, x[(o * len + j) * inner + i]);
            for (int64_t j = 0; j < len; j++)
                s += exp(x[(o * len + j) * inner + i] - m);
            for (int64_t j = 0; j < len; j++) {
                double v = x[(o * len + j) * inner + i] - m;
                y[(o * len + j) * inner + i] = log_ ? v - log(s) : exp(v) / s;
            }
        }
}

static void test_softmax_forward(void **state) {
    (void)state;
    const struct {
        int ndim;
        int64_t shape[3];
    } shapes[] = {{2, {3, 4}}, {3, {2, 3, 4}}, {1, {6}}, {2, {1, 5}}};
    const jg_dtype dts[] = {JG_F32, JG_F64};
    for (size_t s = 0; s < 4; s++)
        for (int t = 0; t < 2; t++)
            for (int tr = 0; tr < 2; tr++)
                for (int dim = -shapes[s].ndim; dim < shapes[s].ndim; dim++)
                    for (int lg = 0; lg < 2; lg++) {
                        jg_tensor *x = make_x(dts[t], shapes[s].ndim, shapes[s].shape, tr, s + 3);
                        jg_tensor *y = lg ? jg_log_softmax(x, dim) : jg_softmax(x, dim);
                        assert_non_null(y);
                        assert_int_equal(jg_dtype_of(y), dts[t]);
                        double xv[64], want[64];
                        tu_values(x, xv);
                        int d = dim < 0 ? dim + shapes[s].ndim : dim;
                        naive_softmax(shapes[s].ndim, shapes[s].shape, d, xv, want, lg);
                        TU_CHECK(y, shapes[s].ndim, shapes[s].shape, want,
                                 dts[t] == JG_F32 ? 1e-6 : 1e-14);
                    }
    /* stability: exp(1000) would overflow without subtracting the max */
    jg_tensor *big = tu_tensor(JG_F64, 1, TU_SHAPE(2), TU_VALS(1000, 1000 + log(3.0)));
    TU_CHECK(jg_softmax(big, 0), 1, TU_SHAPE(2), TU_VALS(0.25, 0.75), 1e-12);
    TU_CHECK(jg_log_softmax(big, 0), 1, TU_SHAPE(2), TU_VALS(log(0.25), log(0.75)), 1e-12);
    jg_tensor *big32 = tu_tensor(JG_F32, 1, TU_SHAPE(2), TU_VALS(-1000, 1000));
    TU_CHECK(jg_softmax(big32, 0), 1, TU_SHAPE(2), TU_VALS(0, 1), 0);
    TU_CHECK(jg_log_softmax(big32, 0), 1, TU_SHAPE(2), TU_VALS(-2000, 0), 0);
    /* -inf entries get probability 0 */
    jg_tensor *ninf = tu_tensor(JG_F64, 1, TU_SHAPE(3), TU_VALS(-INFINITY, 0, 0));
    TU_CHECK(jg_softmax(ninf, 0), 1, TU_SHAPE(3), TU_VALS(0, 0.5, 0.5), 0);
    TU_CHECK(jg_log_softmax(ninf, 0), 1, TU_SHAPE(3), TU_VALS(-INFINITY, -log(2.0), -log(2.0)), 0);
    /* 0-d: softmax 1, log_softmax 0 */
    jg_tensor *s = jg_scalar(JG_F64, 3);
    TU_CHECK(jg_softmax(s, 0), 0, NULL, TU_VALS(1), 0);
    TU_CHECK(jg_log_softmax(s, -1), 0, NULL, TU_VALS(0), 0);
    /* int64 input is computed in float32 */
    jg_tensor *xi = tu_tensor(JG_I64, 1, TU_SHAPE(2), TU_VALS(0, 0));
    jg_tensor *yi = jg_softmax(xi, 0);
    assert_int_equal(jg_dtype_of(yi), JG_F32);
    TU_CHECK(yi, 1, TU_SHAPE(2), TU_VALS(0.5, 0.5), 0);
    /* empty */
    jg_tensor *e = jg_tensor_new(JG_F32, 2, TU_SHAPE(0, 3), NULL);
    TU_CHECK(jg_softmax(e, 1), 2, TU_SHAPE(0, 3), NULL, 0);
    /* errors */
    jg_tensor *x = tu_tensor(JG_F32, 2, TU_SHAPE(2, 2), TU_VALS(1, 2, 3, 4));
    assert_null(jg_softmax(x, 2));
    TU_ERROR("Dimension out of range (expected to be in range of [-2, 1], but got 2)");
    assert_null(jg_log_softmax(x, -3));
    TU_ERROR("Dimension out of range (expected to be in range of [-2, 1], but got -3)");
    assert_null(jg_softmax(NULL, 0));
    TU_ERROR("argument 0 is NULL");
}

typedef struct {
    int op; /* 0 softmax, 1 log_softmax, then +2: their gradient (2nd order) */
    int dim;
    bool transpose;
    jg_tensor *w; /* weights making the 2nd-order loss non-trivial */
} sm_fn_args;

static jg_tensor *sm_fn(void *user, int n, jg_tensor *const *in) {
    (void)n;
    const sm_fn_args *f = user;
    jg_tensor *x = f->transpose ? jg_transpose(in[0], 0, 1) : in[0];
    jg_tensor *y = (f->op & 1) ? jg_log_softmax(x, f->dim) : jg_softmax(x, f->dim);
    if (f->op < 2 || !y)
        return y;
    jg_tensor *l = jg_sum(jg_mul(jg_mul(y, y), f->w)), *g;
    if (!l || jg_autograd_grad(1, &l, NULL, 1, &in[0], JG_CREATE_GRAPH, &g) < 0)
        return NULL;
    return g;
}

static void test_softmax_gradcheck(void **state) {
    (void)state;
    double xv[12], wv[12];
    lcg_fill(xv, 12, 91);
    lcg_fill(wv, 12, 92);
    jg_tensor *x = tu_tensor(JG_F64, 2, TU_SHAPE(3, 4), xv);
    jg_set_requires_grad(x, true);
    jg_tensor *w = tu_tensor(JG_F64, 2, TU_SHAPE(3, 4), wv);
    jg_tensor *wt = tu_tensor(JG_F64, 2, TU_SHAPE(4, 3), wv);
    for (int op = 0; op < 4; op++)
        for (int tr = 0; tr < 2; tr++)
            for (int dim = -2; dim < 2; dim++) {
                sm_fn_args f = {op, dim, tr, tr ? wt : w};
                if (jg_gradcheck(sm_fn, &f, 1, &x, 1e-6, 1e-5, 1e-3) < 0)
                    fail_msg("op %d transpose %d dim %d: %s", op, tr, dim, jg_last_error());
            }
    assert_string_equal(jg_grad_fn_name(jg_softmax(x, 1)), "SoftmaxBackward0");
    assert_string_equal(jg_grad_fn_name(jg_log_softmax(x, 1)), "LogSoftmaxBackward0");
    /* by hand: softmax of [0, 0] is [.5, .5]; d y0 / d x = [.25, -.25] */
    jg_tensor *z = tu_tensor(JG_F64, 1, TU_SHAPE(2), TU_VALS(0, 0));
    jg_set_requires_grad(z, true);
    jg_tensor *y = jg_softmax(z, 0);
    jg_tensor *g = tu_tensor(JG_F64, 1, TU_SHAPE(2), TU_VALS(1, 0));
    assert_int_equal(jg_backward(y, g, 0), 0);
    TU_CHECK(jg_grad(z), 1, TU_SHAPE(2), TU_VALS(0.25, -0.25), 0);
}

/* ---- nll_loss / cross_entropy ---- */

static jg_tensor *nll(jg_tensor *logp, jg_tensor *t) {
    return jg_op1(JG_OP_NLL_LOSS, NULL, logp, t);
}

static jg_tensor *nll_fn(void *user, int n, jg_tensor *const *in) {
    (void)n;
    return nll(in[0], (jg_tensor *)user);
}

static jg_tensor *ce_fn(void *user, int n, jg_tensor *const *in) {
    (void)n;
    return jg_cross_entropy(in[0], (jg_tensor *)user);
}

/* d/dx of cross_entropy, as a function (its gradient is 2nd order). */
static jg_tensor *ce_grad_fn(void *user, int n, jg_tensor *const *in) {
    (void)n;
    jg_tensor *l = jg_cross_entropy(in[0], (jg_tensor *)user), *g;
    if (!l || jg_autograd_grad(1, &l, NULL, 1, &in[0], JG_CREATE_GRAPH, &g) < 0)
        return NULL;
    return g;
}

static void test_nll_loss(void **state) {
    (void)state;
    double xv[15];
    lcg_fill(xv, 15, 13);
    const jg_dtype dts[] = {JG_F32, JG_F64};
    for (int t = 0; t < 2; t++)
        for (int tr = 0; tr < 2; tr++) {
            jg_tensor *x = make_x(dts[t], 2, TU_SHAPE(5, 3), tr, 13);
            jg_tensor *tg = tu_tensor(JG_I64, 1, TU_SHAPE(5), TU_VALS(2, 0, 1, 1, 2));
            jg_tensor *l = nll(x, tg);
            assert_non_null(l);
            assert_int_equal(jg_dtype_of(l), dts[t]);
            double v[15], acc = 0;
            tu_values(x, v);
            const int tv[5] = {2, 0, 1, 1, 2};
            for (int i = 0; i < 5; i++) /* sequential, rounded like the dtype */
                acc = dts[t] == JG_F32 ? (double)(float)(acc + -v[i * 3 + tv[i]])
                                       : acc + -v[i * 3 + tv[i]];
            acc = dts[t] == JG_F32 ? (double)(float)(acc / 5) : acc / 5;
            TU_CHECK(l, 0, NULL, TU_VALS(acc), 0);
        }
    /* gradient: -1/N at each target, by hand and by finite differences */
    jg_tensor *x = tu_tensor(JG_F64, 2, TU_SHAPE(2, 3), xv);
    jg_set_requires_grad(x, true);
    jg_tensor *tg = tu_tensor(JG_I64, 1, TU_SHAPE(2), TU_VALS(1, 1));
    jg_tensor *l = nll(x, tg);
    assert_string_equal(jg_grad_fn_name(l), "NllLossBackward0");
    assert_int_equal(jg_backward(l, NULL, 0), 0);
    TU_CHECK(jg_grad(x), 2, TU_SHAPE(2, 3), TU_VALS(0, -0.5, 0, 0, -0.5, 0), 0);
    if (jg_gradcheck(nll_fn, tg, 1, &x, 1e-6, 1e-5, 1e-3) < 0)
        fail_msg("nll_loss: %s", jg_last_error());
    /* nll's gradient is itself differentiable (w.r.t. the incoming grad) */
    jg_tensor *go = jg_scalar(JG_F64, 2);
    jg_set_requires_grad(go, true);
    jg_tensor *gx;
    jg_tensor *l2 = nll(x, tg);
    assert_int_equal(jg_autograd_grad(1, &l2, &go, 1, &x, JG_CREATE_GRAPH, &gx), 0);
    TU_CHECK(gx, 2, TU_SHAPE(2, 3), TU_VALS(0, -1, 0, 0, -1, 0), 0);
    assert_int_equal(jg_backward(jg_sum(gx), NULL, 0), 0);
    TU_CHECK(jg_grad(go), 0, NULL, TU_VALS(-1), 0);
    /* no rows: NaN, like PyTorch */
    jg_tensor *e = jg_tensor_new(JG_F32, 2, TU_SHAPE(0, 3), NULL);
    jg_tensor *et = jg_tensor_new(JG_I64, 1, TU_SHAPE(0), NULL);
    assert_true(isnan(jg_item(nll(e, et))));
}

/* Expected values computed with /usr/bin/python3 and torch 1.13:
 *   x = torch.tensor([[0.5,-1.25,2.0,0.75],[1.5,0.25,-0.5,3.0],
 *                     [-2.0,1.0,0.0,-0.25]], dtype=..., requires_grad=True)
 *   l = torch.nn.functional.cross_entropy(x, torch.tensor([2,0,1]))
 *   l.backward(); print(l.item(), x.grad.flatten().tolist())            */
static void test_cross_entropy(void **state) {
    (void)state;
    const double xs[12] = {0.5, -1.25, 2.0, 0.75, 1.5, 0.25, -0.5, 3.0, -2.0, 1.0, 0.0, -0.25};
    const double want64 = 0.9152857823559701;
    const double grad64[12] = {0.048034280433328275,  0.008347106331704011, -0.11805862371373244,
                               0.061677236948700156,  -0.27686993240157387, 0.016177035213989215,
                               0.0076414903576020885, 0.25305140682998256,  0.009738275367995335,
                               -0.13773484386129403,  0.07195666300095205,  0.056039905492346644};
    const double want32 = 0.9152857661247253;
    const double grad32[12] = {0.04803428053855896,  0.008347105234861374, -0.11805862188339233,
                               0.0616772398352623,   -0.2768699526786804,  0.016177035868167877,
                               0.007641490548849106, 0.25305142998695374,  0.009738275781273842,
                               -0.13773483037948608, 0.07195666432380676,  0.05603991076350212};
    jg_tensor *tg = tu_tensor(JG_I64, 1, TU_SHAPE(3), TU_VALS(2, 0, 1));
    for (int t = 0; t < 2; t++) {
        jg_dtype dt = t ? JG_F64 : JG_F32;
        jg_tensor *x = tu_tensor(dt, 2, TU_SHAPE(3, 4), xs);
        jg_set_requires_grad(x, true);
        jg_tensor *l = jg_cross_entropy(x, tg);
        assert_non_null(l);
        assert_int_equal(jg_dtype_of(l), dt);
        TU_CHECK(l, 0, NULL, t ? &want64 : &want32, t ? 1e-15 : 1e-7);
        assert_int_equal(jg_backward(l, NULL, 0), 0);
        TU_CHECK(jg_grad(x), 2, TU_SHAPE(3, 4), t ? grad64 : grad32, t ? 1e-15 : 1e-7);
    }
    /* finite differences, first and second order */
    jg_tensor *x = tu_tensor(JG_F64, 2, TU_SHAPE(3, 4), xs);
    jg_set_requires_grad(x, true);
    if (jg_gradcheck(ce_fn, tg, 1, &x, 1e-6, 1e-5, 1e-3) < 0)
        fail_msg("cross_entropy: %s", jg_last_error());
    if (jg_gradcheck(ce_grad_fn, tg, 1, &x, 1e-6, 1e-5, 1e-3) < 0)
        fail_msg("cross_entropy 2nd order: %s", jg_last_error());
}

/* reduction= and ignore_index, against PyTorch 1.13 (f64, same x as above):
 *   l = F.cross_entropy(x, torch.tensor([2, -100, 1]), reduction=r)
 *   (l.sum() if r == "none" else l).backward()
 * and an all-ignored batch (F.cross_entropy(x, [3, 3, 3], ignore_index=3):
 * mean NaN, sum 0, gradient 0). */
static jg_tensor *ce_ex_fn(void *user, int n, jg_tensor *const *in) {
    (void)n;
    jg_tensor *l = jg_cross_entropy_ex(in[0], (jg_tensor *)user, JG_REDUCTION_NONE, -100);
    return l ? jg_sum(jg_mul(l, l)) : NULL; /* a non-linear use of the per-row losses */
}

static jg_tensor *ce_ex_grad_fn(void *user, int n, jg_tensor *const *in) {
    (void)n;
    jg_tensor *l = jg_cross_entropy_ex(in[0], (jg_tensor *)user, JG_REDUCTION_MEAN, -100), *g;
    if (!l || jg_autograd_grad(1, &l, NULL, 1, &in[0], JG_CREATE_GRAPH, &g) < 0)
        return NULL;
    return g;
}

static void test_cross_entropy_options(void **state) {
    (void)state;
    const double xs[12] = {0.5, -1.25, 2.0, 0.75, 1.5, 0.25, -0.5, 3.0, -2.0, 1.0, 0.0, -0.25};
    const double mean_v = 0.48515350694630915, sum_v = 0.9703070138926183;
    const double none_v[3] = {0.43722805861390257, 0.0, 0.5330789552787157};
    const double g_mean[12] = {0.07205142064999241,
                               0.012520659497556017,
                               -0.17708793557059865,
                               0.09251585542305024,
                               0,
                               0,
                               0,
                               0,
                               0.014607413051993003,
                               -0.20660226579194108,
                               0.10793499450142809,
                               0.08405985823851997};
    const double g_sum[12] = {0.14410284129998482,
                              0.025041318995112034,
                              -0.3541758711411973,
                              0.18503171084610048,
                              0,
                              0,
                              0,
                              0,
                              0.029214826103986007,
                              -0.41320453158388215,
                              0.21586998900285617,
                              0.16811971647703994};
    jg_tensor *tg = tu_tensor(JG_I64, 1, TU_SHAPE(3), TU_VALS(2, -100, 1));
    const jg_reduction reds[3] = {JG_REDUCTION_MEAN, JG_REDUCTION_SUM, JG_REDUCTION_NONE};
    for (int r = 0; r < 3; r++) {
        jg_tensor *x = tu_tensor(JG_F64, 2, TU_SHAPE(3, 4), xs);
        jg_set_requires_grad(x, true);
        jg_tensor *l = jg_cross_entropy_ex(x, tg, reds[r], -100);
        assert_non_null(l);
        if (r == 2)
            TU_CHECK(l, 1, TU_SHAPE(3), none_v, 1e-15);
        else
            TU_CHECK(l, 0, NULL, r ? &sum_v : &mean_v, 1e-15);
        assert_int_equal(jg_backward(jg_sum(l), NULL, 0), 0);
        TU_CHECK(jg_grad(x), 2, TU_SHAPE(3, 4), r ? g_sum : g_mean, 1e-15);
    }
    /* the default: -100 is ignored, as PyTorch's */
    jg_tensor *x = tu_tensor(JG_F64, 2, TU_SHAPE(3, 4), xs);
    TU_CHECK(jg_cross_entropy(x, tg), 0, NULL, &mean_v, 1e-15);
    /* finite differences: per-row losses used non-linearly, and 2nd order */
    jg_set_requires_grad(x, true);
    if (jg_gradcheck(ce_ex_fn, tg, 1, &x, 1e-6, 1e-5, 1e-3) < 0)
        fail_msg("cross_entropy(reduction=none): %s", jg_last_error());
    if (jg_gradcheck(ce_ex_grad_fn, tg, 1, &x, 1e-6, 1e-5, 1e-3) < 0)
        fail_msg("cross_entropy(ignore_index) 2nd order: %s", jg_last_error());
    /* every row ignored: the mean is NaN, the sum 0, no gradient */
    jg_tensor *all = tu_tensor(JG_I64, 1, TU_SHAPE(3), TU_VALS(3, 3, 3));
    jg_tensor *lm = jg_cross_entropy_ex(x, all, JG_REDUCTION_MEAN, 3);
    assert_true(isnan(jg_item(lm)));
    assert_true(jg_item(jg_cross_entropy_ex(x, all, JG_REDUCTION_SUM, 3)) == 0.0);
    assert_int_equal(jg_backward(lm, NULL, 0), 0);
    double gz[12];
    tu_values(jg_grad(x), gz);
    for (int i = 0; i < 12; i++)
        assert_true(gz[i] == 0.0);
    /* an ignore_index other than -100 still leaves -100 out of bounds */
    assert_null(jg_cross_entropy_ex(x, tg, JG_REDUCTION_MEAN, 0));
    TU_ERROR("Target -100 is out of bounds.");
    assert_null(jg_cross_entropy_ex(x, tg, (jg_reduction)7, -100));
    TU_ERROR("jg_cross_entropy: invalid reduction 7");
}

static void test_nll_errors(void **state) {
    (void)state;
    jg_tensor *x = tu_tensor(JG_F32, 2, TU_SHAPE(2, 3), TU_VALS(0, 0, 0, 0, 0, 0));
    /* messages as torch.nn.functional.nll_loss / cross_entropy print them */
    assert_null(nll(x, tu_tensor(JG_I64, 1, TU_SHAPE(2), TU_VALS(0, 7))));
    TU_ERROR("Target 7 is out of bounds.");
    assert_null(nll(x, tu_tensor(JG_I64, 1, TU_SHAPE(2), TU_VALS(-1, 0))));
    TU_ERROR("Target -1 is out of bounds.");
    assert_null(nll(x, tu_tensor(JG_I64, 1, TU_SHAPE(3), TU_VALS(0, 1, 1))));
    TU_ERROR("Expected input batch_size (2) to match target batch_size (3).");
    assert_null(nll(x, tu_tensor(JG_F32, 1, TU_SHAPE(2), TU_VALS(0, 1))));
    TU_ERROR("expected scalar type Long but found Float");
    assert_null(nll(x, tu_tensor(JG_I64, 2, TU_SHAPE(2, 1), TU_VALS(0, 1))));
    TU_ERROR("1D target tensor expected, multi-target not supported");
    assert_null(nll(tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(0, 0, 0)),
                    tu_tensor(JG_I64, 1, TU_SHAPE(3), TU_VALS(0, 1, 1))));
    TU_ERROR("nll_loss(): expected a 2-D input [N, C], got 1-D");
    assert_null(nll(tu_tensor(JG_I64, 2, TU_SHAPE(1, 1), TU_VALS(0)),
                    tu_tensor(JG_I64, 1, TU_SHAPE(1), TU_VALS(0))));
    TU_ERROR("\"nll_loss_out_frame\" not implemented for 'Long'");
    /* through cross_entropy: the bad target is found after log_softmax ran,
     * and nothing leaks (ASan's leak check runs at exit) */
    jg_set_requires_grad(x, true);
    assert_null(jg_cross_entropy(x, tu_tensor(JG_I64, 1, TU_SHAPE(2), TU_VALS(3, 0))));
    TU_ERROR("Target 3 is out of bounds.");
    assert_null(jg_cross_entropy(x, tu_tensor(JG_I64, 1, TU_SHAPE(3), TU_VALS(0, 1, 1))));
    TU_ERROR("Expected input batch_size (2) to match target batch_size (3).");
    assert_null(jg_grad(x));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_gather_forward),
        TU_TEST(test_scatter_add_forward),
        TU_TEST(test_gather_scatter_expanded_index),
        TU_TEST(test_index_gradcheck),
        TU_TEST(test_index_errors),
        TU_TEST(test_softmax_forward),
        TU_TEST(test_softmax_gradcheck),
        TU_TEST(test_nll_loss),
        TU_TEST(test_cross_entropy),
        TU_TEST(test_cross_entropy_options),
        TU_TEST(test_nll_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
