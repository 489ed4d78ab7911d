/* Reductions: sum, mean (dim lists, keepdim, negative dims, 0-d and empty
 * inputs) and max over a dim (first maximum, NaN propagation, indices).
 * Forward results are compared with naive loops written here, bit for bit:
 * the reference follows the documented summation order (ops/reduce.c:
 * blocked lanes folded by halving for float sums over trailing dims,
 * sequential in row-major order otherwise, in the input's dtype); backward against finite
 * differences in f64; error paths by message. */
#include "testutil.h"

#include "ops/optable.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Deterministic values in [-4, 4) with few mantissa bits, distinct enough
 * for max. */
static void lcg_fill(double *v, int64_t n, uint64_t seed) {
    uint64_t s = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    for (int64_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        v[i] = (double)((s >> 33) % 8192) / 1024.0 - 4.0 + (double)((s >> 20) % 7) / 3.0;
    }
}

/* A tensor of the given logical shape; `layout` 0: contiguous, 1: the
 * transpose of a contiguous tensor (last two dims swapped), 2: a slice
 * [1:1+shape[0]] along dim 0 of a bigger tensor. */
static jg_tensor *make_input(jg_dtype dt, int ndim, const int64_t *shape, int layout,
                             uint64_t seed) {
    double v[512];
    int64_t n = tu_numel(ndim, shape);
    assert_true(n + 64 <= 512);
    lcg_fill(v, n + 64, seed);
    if (layout == 1 && ndim >= 2) {
        int64_t ts[JG_MAX_DIMS];
        memcpy(ts, shape, sizeof(int64_t) * (size_t)ndim);
        ts[ndim - 1] = shape[ndim - 2];
        ts[ndim - 2] = shape[ndim - 1];
        jg_tensor *base = tu_tensor(dt, ndim, ts, v);
        jg_tensor *t = jg_transpose(base, -1, -2);
        assert_non_null(t);
        assert_false(jg_is_contiguous(t) && shape[ndim - 1] > 1 && shape[ndim - 2] > 1);
        return t;
    }
    if (layout == 2 && ndim >= 1) {
        int64_t bs[JG_MAX_DIMS];
        memcpy(bs, shape, sizeof(int64_t) * (size_t)ndim);
        bs[0] = shape[0] + 2;
        jg_tensor *base = tu_tensor(dt, ndim, bs, v);
        jg_tensor *t = jg_slice(base, 0, 1, 1 + shape[0]);
        assert_non_null(t);
        return t;
    }
    return tu_tensor(dt, ndim, shape, v);
}

/* Rounds to the dtype (f32 arithmetic done in double then rounded equals
 * f32 arithmetic for + and /). */
static double rnd(jg_dtype dt, double x) {
    return dt == JG_F32 ? (double)(float)x : x;
}

/* True if mask reduces exactly the trailing dims (all of them included). */
static bool trailing(int ndim, const bool *mask) {
    int r = ndim;
    while (r > 0 && mask[r - 1])
        r--;
    for (int d = 0; d < r; d++)
        if (mask[d])
            return false;
    return true;
}

/* Naive sum/mean in the documented order; out has the keepdim shape.
 * Returns the count per output. */
static int64_t naive_reduce(jg_dtype dt, int ndim, const int64_t *shape, const bool *mask,
                            const double *x, double *out, bool mean) {
    int64_t kshape[JG_MAX_DIMS], n = tu_numel(ndim, shape), count = 1;
    for (int d = 0; d < ndim; d++) {
        kshape[d] = mask[d] ? 1 : shape[d];
        count *= mask[d] ? shape[d] : 1;
    }
    int64_t on = tu_numel(ndim, kshape);
    for (int64_t o = 0; o < on; o++)
        out[o] = 0;
    if (dt != JG_I64 && trailing(ndim, mask)) {
        /* output o sums inputs [o * count, (o + 1) * count) in blocks of
         * 4096: input i of a block goes to lane i % L (32 f32, 16 f64),
         * lanes folded by halving, blocks added in order */
        int L = dt == JG_F32 ? 32 : 16;
        for (int64_t o = 0; o < on; o++) {
            double s = 0;
            for (int64_t b0 = 0; b0 == 0 || b0 < count; b0 += 4096) {
                double l[32] = {0};
                for (int64_t i = b0; i < count && i < b0 + 4096; i++)
                    l[(i - b0) % L] = rnd(dt, l[(i - b0) % L] + x[o * count + i]);
                for (int w = L / 2; w >= 1; w /= 2)
                    for (int j = 0; j < w; j++)
                        l[j] = rnd(dt, l[j] + l[j + w]);
                s = b0 == 0 ? l[0] : rnd(dt, s + l[0]);
            }
            out[o] = s;
        }
    } else {
        for (int64_t i = 0; i < n; i++) {
            int64_t rem = i, o = 0, mul = 1;
            for (int d = ndim - 1; d >= 0; d--) {
                int64_t id = rem % shape[d];
                rem /= shape[d];
                if (!mask[d])
                    o += id * mul;
                mul *= kshape[d];
            }
            out[o] = dt == JG_I64 ? out[o] + x[i] : rnd(dt, out[o] + x[i]);
        }
    }
    if (mean)
        for (int64_t o = 0; o < on; o++)
            out[o] = rnd(dt, out[o] / (double)count);
    return count;
}

typedef struct {
    int ndim;
    int64_t shape[4];
    int n_dims;
    int dims[4]; /* as the caller passes them (may be negative) */
} reduce_case;

static const reduce_case cases[] = {
    {2, {3, 4}, 1, {0}},
    {2, {3, 4}, 1, {1}},
    {2, {3, 4}, 1, {-1}},
    {2, {3, 4}, 2, {0, 1}},
    {2, {3, 4}, 2, {-1, 0}},
    {3, {2, 3, 4}, 1, {1}},
    {3, {2, 3, 4}, 2, {0, 2}},
    {3, {2, 3, 4}, 2, {-3, -1}},
    {3, {2, 3, 4}, 3, {2, 1, 0}},
    {3, {2, 1, 4}, 1, {1}},
    {4, {2, 3, 2, 3}, 2, {1, 3}},
    {1, {7}, 1, {0}},
    {2, {3, 4}, 0, {0}}, /* empty list: every dim */
    /* float sums over trailing dims with whole lane rounds and a tail */
    {2, {3, 37}, 1, {1}},
    {3, {5, 2, 9}, 2, {1, 2}},
    {1, {64}, 0, {0}},
};

static void run_reduce_case(const reduce_case *c, jg_dtype dt, int layout, bool keepdim,
                            bool mean) {
    jg_tensor *x = make_input(dt, c->ndim, c->shape, layout, (uint64_t)(c - cases) + 7);
    jg_tensor *y = mean ? jg_mean_dims(x, c->n_dims, c->dims, keepdim)
                        : jg_sum_dims(x, c->n_dims, c->dims, keepdim);
    assert_non_null(y);
    assert_int_equal(jg_dtype_of(y), dt);
    bool mask[JG_MAX_DIMS] = {0};
    for (int k = 0; k < c->n_dims; k++)
        mask[(c->dims[k] + c->ndim) % c->ndim] = true;
    if (c->n_dims == 0)
        for (int d = 0; d < c->ndim; d++)
            mask[d] = true;
    double xv[512], want[512];
    tu_values(x, xv);
    naive_reduce(dt, c->ndim, c->shape, mask, xv, want, mean);
    int64_t oshape[JG_MAX_DIMS];
    int on = 0;
    for (int d = 0; d < c->ndim; d++)
        if (!mask[d])
            oshape[on++] = c->shape[d];
        else if (keepdim)
            oshape[on++] = 1;
    TU_CHECK(y, on, oshape, want, 0);
}

static void test_sum_forward(void **state) {
    (void)state;
    const jg_dtype dts[] = {JG_F32, JG_F64, JG_I64};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int t = 0; t < 3; t++)
            for (int layout = 0; layout < 3; layout++)
                for (int kd = 0; kd < 2; kd++)
                    run_reduce_case(&cases[c], dts[t], layout, kd, false);
    /* jg_sum: all dims to 0-d, and a 0-d input */
    jg_tensor *x = tu_tensor(JG_F32, 2, TU_SHAPE(2, 2), TU_VALS(1, 2, 3, 4.5));
    TU_CHECK(jg_sum(x), 0, NULL, TU_VALS(10.5), 0);
    jg_tensor *s = jg_scalar(JG_F64, 2.5);
    TU_CHECK(jg_sum(s), 0, NULL, TU_VALS(2.5), 0);
    TU_CHECK(jg_sum_dims(s, 1, (const int[]){0}, true), 0, NULL, TU_VALS(2.5), 0);
    TU_CHECK(jg_sum_dims(s, 1, (const int[]){-1}, false), 0, NULL, TU_VALS(2.5), 0);
    /* empty input: sum 0; empty reduced output */
    jg_tensor *e = jg_tensor_new(JG_F32, 2, TU_SHAPE(0, 3), NULL);
    TU_CHECK(jg_sum_dims(e, 1, (const int[]){0}, false), 1, TU_SHAPE(3), TU_VALS(0, 0, 0), 0);
    TU_CHECK(jg_sum_dims(e, 1, (const int[]){1}, true), 2, TU_SHAPE(0, 1), NULL, 0);
    /* int64 stays int64 */
    jg_tensor *xi = tu_tensor(JG_I64, 1, TU_SHAPE(3), TU_VALS(1, 2, 3));
    jg_tensor *si = jg_sum(xi);
    assert_int_equal(jg_dtype_of(si), JG_I64);
    TU_CHECK(si, 0, NULL, TU_VALS(6), 0);
}

static void test_mean_forward(void **state) {
    (void)state;
    const jg_dtype dts[] = {JG_F32, JG_F64};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int t = 0; t < 2; t++)
            for (int layout = 0; layout < 3; layout++)
                for (int kd = 0; kd < 2; kd++)
                    run_reduce_case(&cases[c], dts[t], layout, kd, true);
    jg_tensor *x = tu_tensor(JG_F32, 1, TU_SHAPE(3), TU_VALS(1, 2, 4));
    TU_CHECK(jg_mean(x), 0, NULL, TU_VALS((double)(7.0f / 3.0f)), 0);
    /* mean of nothing is NaN, like PyTorch */
    jg_tensor *e = jg_tensor_new(JG_F64, 1, TU_SHAPE(0), NULL);
    assert_true(isnan(jg_item(jg_mean(e))));
}

/* ---- backward ---- */

typedef struct {
    int op; /* 0 sum, 1 mean, 2 max values */
    int n_dims;
    int dims[4];
    bool keepdim;
    bool transpose; /* apply to a transposed view of the input */
} red_fn_args;

static jg_tensor *red_fn(void *user, int n, jg_tensor *const *in) {
    (void)n;
    const red_fn_args *r = user;
    jg_tensor *x = r->transpose ? jg_transpose(in[0], 0, 1) : in[0];
    if (r->op == 0)
        return jg_sum_dims(x, r->n_dims, r->dims, r->keepdim);
    if (r->op == 1)
        return jg_mean_dims(x, r->n_dims, r->dims, r->keepdim);
    jg_tensor *v, *i;
    if (jg_max_dim(x, r->dims[0], r->keepdim, &v, &i) < 0)
        return NULL;
    return v;
}

static void test_reduce_gradcheck(void **state) {
    (void)state;
    double v[64];
    lcg_fill(v, 64, 3);
    jg_tensor *x3 = tu_tensor(JG_F64, 3, TU_SHAPE(2, 3, 4), v);
    jg_tensor *x2 = tu_tensor(JG_F64, 2, TU_SHAPE(3, 4), v);
    jg_set_requires_grad(x3, true);
    jg_set_requires_grad(x2, true);
    for (int op = 0; op < 3; op++)
        for (int kd = 0; kd < 2; kd++) {
            red_fn_args cases3[] = {
                {op, 1, {1}, kd, false},
                {op, op == 2 ? 1 : 2, {-1, 0}, kd, false},
                {op, 1, {0}, kd, true},
                {op, op == 2 ? 1 : 3, {0, 1, 2}, kd, false},
            };
            for (size_t c = 0; c < sizeof cases3 / sizeof cases3[0]; c++) {
                jg_tensor *x = cases3[c].transpose ? x2 : x3;
                if (cases3[c].transpose && cases3[c].n_dims == 3)
                    continue;
                int rc = jg_gradcheck(red_fn, &cases3[c], 1, &x, 1e-6, 1e-5, 1e-3);
                if (rc < 0)
                    fail_msg("op %d case %zu keepdim %d: %s", op, c, kd, jg_last_error());
            }
        }
    /* the names PyTorch gives these nodes */
    jg_tensor *s = jg_sum(x3);
    assert_string_equal(jg_grad_fn_name(s), "SumBackward0");
    assert_string_equal(jg_grad_fn_name(jg_mean(x3)), "MeanBackward0");
}

static void test_sum_mean_grad_values(void **state) {
    (void)state;
    jg_tensor *x = tu_tensor(JG_F32, 2, TU_SHAPE(2, 3), TU_VALS(1, 2, 3, 4, 5, 6));
    jg_set_requires_grad(x, true);
    /* d/dx sum(mean(x, 1) * [1, 2]) = [[1/3]*3, [2/3]*3] */
    jg_tensor *w = tu_tensor(JG_F32, 1, TU_SHAPE(2), TU_VALS(1, 2));
    jg_tensor *y = jg_sum(jg_mul(jg_mean_dims(x, 1, (const int[]){1}, false), w));
    assert_int_equal(jg_backward(y, NULL, 0), 0);
    float third = 1.0f / 3.0f, two_thirds = 2.0f / 3.0f;
    TU_CHECK(jg_grad(x), 2, TU_SHAPE(2, 3),
             TU_VALS(third, third, third, two_thirds, two_thirds, two_thirds), 0);
    /* sum over dim 0 with keepdim, then backward with an explicit gradient */
    jg_clear_grad(x);
    jg_tensor *s = jg_sum_dims(x, 1, (const int[]){0}, true);
    jg_tensor *g = tu_tensor(JG_F32, 2, TU_SHAPE(1, 3), TU_VALS(1, 10, 100));
    assert_int_equal(jg_backward(s, g, 0), 0);
    TU_CHECK(jg_grad(x), 2, TU_SHAPE(2, 3), TU_VALS(1, 10, 100, 1, 10, 100), 0);
}

/* ---- max ---- */

static void naive_max(int ndim, const int64_t *shape, int dim, const double *x, double *vals,
                      double *idx) {
    int64_t outer = 1, inner = 1, len = shape[dim];
    for (int d = 0; d < dim; d++)
        outer *= shape[d];
    for (int d = dim + 1; d < ndim; d++)
        inner *= shape[d];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double best = x[o * len * inner + i];
            int64_t bi = 0;
            for (int64_t j = 0; j < len; j++) {
                double v = x[(o * len + j) * inner + i];
                if (isnan(v)) {
                    best = v;
                    bi = j;
                    break;
                }
                if (v > best) {
                    best = v;
                    bi = j;
                }
            }
            vals[o * inner + i] = best;
            idx[o * inner + i] = (double)bi;
        }
}

static void test_max_forward(void **state) {
    (void)state;
    const jg_dtype dts[] = {JG_F32, JG_F64, JG_I64};
    const struct {
        int ndim;
        int64_t shape[3];
    } shapes[] = {{2, {3, 4}}, {3, {2, 3, 4}}, {1, {5}}, {3, {2, 1, 3}}};
    for (int t = 0; t < 3; t++)
        for (size_t s = 0; s < 4; s++)
            for (int layout = 0; layout < 3; layout++)
                for (int dim = -shapes[s].ndim; dim < shapes[s].ndim; dim++)
                    for (int kd = 0; kd < 2; kd++) {
                        jg_tensor *x =
                            make_input(dts[t], shapes[s].ndim, shapes[s].shape, layout, s * 3 + 11);
                        jg_tensor *v, *i;
                        assert_int_equal(jg_max_dim(x, dim, kd, &v, &i), 0);
                        assert_int_equal(jg_dtype_of(v), dts[t]);
                        assert_int_equal(jg_dtype_of(i), JG_I64);
                        int d = dim < 0 ? dim + shapes[s].ndim : dim;
                        double xv[128], wv[128], wi[128];
                        tu_values(x, xv);
                        naive_max(shapes[s].ndim, shapes[s].shape, d, xv, wv, wi);
                        int64_t os[3];
                        int on = 0;
                        for (int k = 0; k < shapes[s].ndim; k++)
                            if (k != d)
                                os[on++] = shapes[s].shape[k];
                            else if (kd)
                                os[on++] = 1;
                        TU_CHECK(v, on, os, wv, 0);
                        TU_CHECK(i, on, os, wi, 0);
                    }
    /* ties: the first maximum; NaN: the first NaN, and it propagates */
    jg_tensor *x = tu_tensor(JG_F32, 2, TU_SHAPE(2, 4), TU_VALS(1, 3, 3, 2, 1, NAN, 5, NAN));
    jg_tensor *v, *i;
    assert_int_equal(jg_max_dim(x, 1, false, &v, &i), 0);
    TU_CHECK(v, 1, TU_SHAPE(2), TU_VALS(3, NAN), 0);
    TU_CHECK(i, 1, TU_SHAPE(2), TU_VALS(1, 1), 0);
    jg_tensor *x0 = tu_tensor(JG_F64, 1, TU_SHAPE(3), TU_VALS(NAN, 7, 1));
    assert_int_equal(jg_max_dim(x0, 0, true, &v, &i), 0);
    TU_CHECK(v, 1, TU_SHAPE(1), TU_VALS(NAN), 0);
    TU_CHECK(i, 1, TU_SHAPE(1), TU_VALS(0), 0);
    /* 0-d input */
    jg_tensor *s = jg_scalar(JG_F32, 4);
    assert_int_equal(jg_max_dim(s, -1, true, &v, &i), 0);
    TU_CHECK(v, 0, NULL, TU_VALS(4), 0);
    TU_CHECK(i, 0, NULL, TU_VALS(0), 0);
    /* an empty non-reduced dim is fine */
    jg_tensor *e = jg_tensor_new(JG_F32, 2, TU_SHAPE(0, 3), NULL);
    assert_int_equal(jg_max_dim(e, 1, false, &v, &i), 0);
    assert_int_equal(jg_numel(v), 0);
}

static void test_max_backward(void **state) {
    (void)state;
    /* the gradient lands on the first maximum only */
    jg_tensor *x = tu_tensor(JG_F64, 2, TU_SHAPE(2, 3), TU_VALS(1, 5, 5, 7, 2, 3));
    jg_set_requires_grad(x, true);
    jg_tensor *v, *i;
    assert_int_equal(jg_max_dim(x, 1, false, &v, &i), 0);
    assert_string_equal(jg_grad_fn_name(v), "MaxBackward0");
    jg_tensor *w = tu_tensor(JG_F64, 1, TU_SHAPE(2), TU_VALS(10, 20));
    assert_int_equal(jg_backward(jg_sum(jg_mul(v, w)), NULL, 0), 0);
    TU_CHECK(jg_grad(x), 2, TU_SHAPE(2, 3), TU_VALS(0, 10, 0, 20, 0, 0), 0);
    /* 0-d: the gradient passes through */
    jg_tensor *s = jg_scalar(JG_F64, 3);
    jg_set_requires_grad(s, true);
    assert_int_equal(jg_max_dim(s, 0, false, &v, &i), 0);
    assert_int_equal(jg_backward(jg_mul(v, v), NULL, 0), 0);
    TU_CHECK(jg_grad(s), 0, NULL, TU_VALS(6), 0);
    /* double backward through scatter_add -> gather: d/dx of
     * sum((dL/dx)^2) with L = sum(max(x, 0) * x_max^2)... use grad of
     * sum(v^3): g = 3 v^2 at argmax; sum(g^2) = sum 9 v^4 -> 36 v^3 */
    jg_clear_grad(x);
    assert_int_equal(jg_max_dim(x, 0, false, &v, &i), 0);
    jg_tensor *l = jg_sum(jg_pow_scalar(v, 3));
    jg_tensor *gx;
    assert_int_equal(jg_autograd_grad(1, &l, NULL, 1, &x, JG_CREATE_GRAPH, &gx), 0);
    TU_CHECK(gx, 2, TU_SHAPE(2, 3), TU_VALS(0, 75, 75, 147, 0, 0), 1e-12);
    assert_int_equal(jg_backward(jg_sum(jg_mul(gx, gx)), NULL, 0), 0);
    /* d/dv sum(9 v^4) = 36 v^3 at the argmax of each column */
    TU_CHECK(jg_grad(x), 2, TU_SHAPE(2, 3), TU_VALS(0, 36.0 * 125, 36.0 * 125, 36.0 * 343, 0, 0),
             1e-12);
}

/* ---- errors ---- */

static void test_reduce_errors(void **state) {
    (void)state;
    jg_tensor *x = tu_tensor(JG_F32, 2, TU_SHAPE(2, 3), TU_VALS(1, 2, 3, 4, 5, 6));
    jg_tensor *xi = tu_tensor(JG_I64, 2, TU_SHAPE(2, 3), TU_VALS(1, 2, 3, 4, 5, 6));
    jg_tensor *v = NULL, *i = NULL;

    assert_null(jg_mean(xi));
    TU_ERROR("mean(): could not infer output dtype. Input dtype must be either a floating point "
             "or complex dtype. Got: Long");
    assert_null(jg_mean_dims(xi, 1, (const int[]){0}, false));
    TU_ERROR("Got: Long");

    assert_null(jg_sum_dims(x, 1, (const int[]){2}, false));
    TU_ERROR("Dimension out of range (expected to be in range of [-2, 1], but got 2)");
    assert_null(jg_mean_dims(x, 2, (const int[]){0, -2}, false));
    TU_ERROR("dim 0 appears multiple times in the list of dims");

    jg_tensor *e = jg_tensor_new(JG_F32, 2, TU_SHAPE(2, 0), NULL);
    assert_int_equal(jg_max_dim(e, 1, false, &v, &i), -1);
    TU_ERROR("max(): Expected reduction dim 1 to have non-zero size.");
    assert_null(v);
    assert_int_equal(jg_max_dim(x, -3, false, &v, &i), -1);
    TU_ERROR("Dimension out of range (expected to be in range of [-2, 1], but got -3)");

    /* the internal op validates raw attributes too */
    jg_attrs bad = {.n = 2};
    bad.i[0] = 1;
    bad.i[1] = 0; /* unsorted */
    assert_null(jg_op1(JG_OP_SUM, &bad, x, NULL));
    TU_ERROR("dims must be sorted");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_sum_forward),      TU_TEST(test_mean_forward),
        TU_TEST(test_reduce_gradcheck), TU_TEST(test_sum_mean_grad_values),
        TU_TEST(test_max_forward),      TU_TEST(test_max_backward),
        TU_TEST(test_reduce_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
