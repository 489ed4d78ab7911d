/* Reductions on the thread pool give the same bits for 1, 2 and 3 threads:
 * sum, mean and max over dim 0, dim 1 and all elements of inputs above the
 * parallel threshold, including the reductions over a leading dim whose
 * columns are split among the threads (sum(dim=0) of a square matrix).
 * Sums over a leading dim also equal the documented order (each output
 * adds its inputs one after the other from 0) whatever the split.
 * min, amax and amin take max's vectorized paths (strided inputs copied
 * to row-major order first): they equal a naive scan
 * (the first NaN, else the first extremum, its index; a zero from its
 * first place) at every thread count.
 * softmax / log_softmax (their kernels have AVX2 clones) give the bits of
 * the same steps computed here by the baseline build of ops/ew_math.h, at
 * every thread count. */
#include "testutil.h"

#include "ops/ew_math.h"
#include "ops/sum_order.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double rnd(jg_dtype dt, double x) {
    return dt == JG_F32 ? (double)(float)x : dt == JG_I64 ? nearbyint(x) : x;
}

/* Values with a wide exponent range (the order shows in the bits); for
 * max, repeated values (ties) and a few NaNs when nan is set. */
static double *fill(int64_t n, uint64_t seed, jg_dtype dt, bool nan) {
    double *v = malloc(sizeof(double) * (size_t)n);
    uint64_t s = seed * 2862933555777941757ULL + 3037000493ULL;
    for (int64_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        double m = (double)(s >> 11) / 9007199254740992.0 - 0.5;
        v[i] = dt == JG_I64 ? (double)((int64_t)(s >> 40) % 2001 - 1000)
                            : rnd(dt, ldexp(m, (int)((s >> 3) % 24) - 8));
        if (nan && (s >> 20) % 9973 == 0)
            v[i] = NAN;
        if ((s >> 30) % 17 == 0)
            v[i] = 1.0; /* ties */
    }
    return v;
}

static const int THREADS[] = {1, 2, 3};
enum { NT = sizeof THREADS / sizeof THREADS[0] };

typedef enum { SUM, MEAN, MAXV, MAXI } red_kind;

/* kind over dim (-1: all elements) at each thread count: same bits. */
static void check_threads(jg_tensor *x, red_kind kind, int dim) {
    int before = jg_get_num_threads();
    jg_tensor *first = NULL;
    for (int k = 0; k < NT; k++) {
        assert_int_equal(jg_set_num_threads(THREADS[k]), 0);
        jg_tensor *r = NULL, *vals = NULL, *idx = NULL;
        const int dims[1] = {dim};
        switch (kind) {
        case SUM:
            r = dim < 0 ? jg_sum(x) : jg_sum_dims(x, 1, dims, false);
            break;
        case MEAN:
            r = dim < 0 ? jg_mean(x) : jg_mean_dims(x, 1, dims, false);
            break;
        case MAXV:
        case MAXI:
            if (dim < 0) {
                r = jg_max(x);
            } else {
                assert_int_equal(jg_max_dim(x, dim, false, &vals, &idx), 0);
                r = kind == MAXV ? vals : idx;
            }
            break;
        }
        assert_non_null(r);
        if (first)
            TU_SAME(r, first);
        else
            first = r;
    }
    assert_int_equal(jg_set_num_threads(before), 0);
}

/* Every reduction of x at every thread count. */
static void check_all_kinds(jg_tensor *x, bool with_mean) {
    int nd = (int)jg_ndim(x);
    for (int dim = -1; dim < nd && dim < 2; dim++) {
        check_threads(x, SUM, dim);
        if (with_mean)
            check_threads(x, MEAN, dim);
        check_threads(x, MAXV, dim);
        if (dim >= 0)
            check_threads(x, MAXI, dim);
    }
}

/* sum over dim 0 of [R, C] equals the sequential order at 1, 2, 3 threads. */
static void check_dim0_order(jg_dtype dt, int64_t R, int64_t C) {
    double *v = fill(R * C, (uint64_t)(R * 31 + C), dt, false);
    jg_tensor *x = tu_tensor(dt, 2, TU_SHAPE(R, C), v);
    double *want = malloc(sizeof(double) * (size_t)C);
    for (int64_t c = 0; c < C; c++) {
        double s = 0;
        for (int64_t r = 0; r < R; r++)
            s = rnd(dt, s + v[r * C + c]);
        want[c] = s;
    }
    int before = jg_get_num_threads();
    for (int k = 0; k < NT; k++) {
        assert_int_equal(jg_set_num_threads(THREADS[k]), 0);
        TU_CHECK(jg_sum_dims(x, 1, (const int[]){0}, false), 1, TU_SHAPE(C), want, 0);
    }
    assert_int_equal(jg_set_num_threads(before), 0);
    free(want);
    free(v);
}

/* The case the column split exists for: one tile of columns (C <= 1024,
 * A = 1), split among the threads; odd widths leave a short last tile. */
static void test_sum_dim0_split_order(void **state) {
    (void)state;
    check_dim0_order(JG_F32, 1024, 1024);
    check_dim0_order(JG_F32, 700, 1000);
    check_dim0_order(JG_F32, 4099, 33);
    check_dim0_order(JG_F64, 600, 999);
    check_dim0_order(JG_I64, 300, 517);
}

static void test_square_f32(void **state) {
    (void)state;
    double *v = fill(1024 * 1024, 1, JG_F32, true);
    check_all_kinds(tu_tensor(JG_F32, 2, TU_SHAPE(1024, 1024), v), true);
    free(v);
}

static void test_odd_shapes(void **state) {
    (void)state;
    static const int64_t shapes[][2] = {{333, 1021}, {70000, 3}, {5, 40000}, {257, 255}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t n = shapes[s][0] * shapes[s][1];
        double *v = fill(n, 10 + s, JG_F32, s % 2 == 0);
        check_all_kinds(tu_tensor(JG_F32, 2, shapes[s], v), true);
        free(v);
    }
}

static void test_f64_and_i64(void **state) {
    (void)state;
    double *v = fill(600 * 500, 20, JG_F64, true);
    check_all_kinds(tu_tensor(JG_F64, 2, TU_SHAPE(600, 500), v), true);
    free(v);
    v = fill(600 * 500, 21, JG_I64, false);
    jg_tensor *xi = tu_tensor(JG_I64, 2, TU_SHAPE(600, 500), v);
    for (int dim = -1; dim < 2; dim++)
        check_threads(xi, SUM, dim);
    free(v);
}

/* 3-d: dim 1 is a middle dim ([A, R, C] with A = 3 units of columns). */
static void test_middle_dim(void **state) {
    (void)state;
    double *v = fill(3 * 300 * 700, 30, JG_F32, true);
    jg_tensor *x = tu_tensor(JG_F32, 3, TU_SHAPE(3, 300, 700), v);
    check_all_kinds(x, true);
    free(v);
}

/* A non-dense input (a transpose) is copied first: same bits as its
 * contiguous copy at every thread count. */
static void test_transposed_input(void **state) {
    (void)state;
    double *v = fill(512 * 768, 40, JG_F32, false);
    jg_tensor *x = tu_tensor(JG_F32, 2, TU_SHAPE(512, 768), v);
    jg_tensor *t = jg_transpose(x, 0, 1), *tc = jg_contiguous(t);
    check_all_kinds(t, true);
    TU_SAME(jg_sum_dims(t, 1, (const int[]){0}, false),
            jg_sum_dims(tc, 1, (const int[]){0}, false));
    free(v);
}

/* softmax / log_softmax of [R, N] (values scaled into exp's easy range)
 * along dim 1 and dim 0 against the steps of ops/softmax.c computed here,
 * in this file's baseline (non-AVX2) code: m = max, e = exp(x - m),
 * s = the ordered sum, then e * (1 / s) or (x - m) - log(s). */
static void check_softmax(int64_t R, int64_t N, bool log_) {
    double *v = fill(R * N, (uint64_t)(R + N), JG_F32, false);
    float *xf = malloc(sizeof(float) * (size_t)(R * N)), *e = malloc(sizeof(float) * (size_t)N);
    double *want = malloc(sizeof(double) * (size_t)(R * N));
    for (int64_t i = 0; i < R * N; i++)
        v[i] = xf[i] = (float)(v[i] * 1e-2);
    for (int64_t r = 0; r < R; r++) {
        const float *x = xf + r * N;
        float m = x[0];
        for (int64_t i = 1; i < N; i++)
            m = x[i] > m ? x[i] : m;
        for (int64_t i = 0; i < N; i++)
            e[i] = jg_ew_expf(x[i] - m);
        float s = jg_sum_run_f32(e, N), ls = jg_ew_logf(s), inv = 1 / s;
        for (int64_t i = 0; i < N; i++)
            want[r * N + i] = log_ ? (x[i] - m) - ls : e[i] * inv;
    }
    jg_tensor *x = tu_tensor(JG_F32, 2, TU_SHAPE(R, N), v);
    jg_tensor *xt = jg_contiguous(jg_transpose(x, 0, 1)); /* [N, R]: dim 0 */
    int before = jg_get_num_threads();
    for (int k = 0; k < NT; k++) {
        assert_int_equal(jg_set_num_threads(THREADS[k]), 0);
        jg_tensor *(*f)(jg_tensor *, int) = log_ ? jg_log_softmax : jg_softmax;
        TU_CHECK(f(x, 1), 2, TU_SHAPE(R, N), want, 0);
        TU_CHECK(jg_transpose(f(xt, 0), 0, 1), 2, TU_SHAPE(R, N), want, 0);
    }
    assert_int_equal(jg_set_num_threads(before), 0);
    free(want);
    free(e);
    free(xf);
    free(v);
}

static void test_softmax_threads_baseline(void **state) {
    (void)state;
    check_softmax(300, 1000, false);
    check_softmax(300, 1000, true);
    check_softmax(40, 5003, false);
}

/* The naive scan over x[0], x[st], ... x[(n-1) st]: PyTorch's rule. */
static int64_t ref_pick(const double *x, int64_t n, int64_t st, bool min) {
    int64_t b = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = x[i * st], c = x[b * st];
        if (v != v)
            return i;
        if (min ? v < c : v > c)
            b = i;
    }
    return b;
}

/* Bits of the elements of t (f32 or f64) as doubles, NaN sign included. */
static void check_pick(jg_tensor *got, const double *x, const int64_t *at, int64_t n) {
    double *g = malloc(sizeof(double) * (size_t)n);
    tu_values(got, g);
    for (int64_t i = 0; i < n; i++) {
        double w = x[at[i]];
        if (w != w)
            assert_true(g[i] != g[i] && signbit(g[i]) == signbit(w));
        else
            assert_true(g[i] == w && signbit(g[i]) == signbit(w));
    }
    free(g);
}

/* max, min, amax, amin over dim 0, dim 1 and all of [R, C] (with NaNs,
 * ties and signed zeros) against ref_pick, at 1, 2, 3 threads. */
static void check_extrema(jg_dtype dt, int64_t R, int64_t C, bool nan, bool transposed) {
    double *v = fill(R * C, (uint64_t)(R * 3 + C), dt, nan);
    for (int64_t i = 0; i < R * C; i += 97)
        v[i] = i % 2 ? -0.0 : 0.0;
    if (R * C < 100) /* only signed zeros: the first one is the extremum */
        for (int64_t i = 0; i < R * C; i++)
            v[i] = (i * 7) % 3 ? -0.0 : 0.0;
    jg_tensor *x = tu_tensor(dt, 2, TU_SHAPE(R, C), v);
    if (transposed) { /* the same logical values, strided (copied first) */
        double *vt = malloc(sizeof(double) * (size_t)(R * C));
        for (int64_t r = 0; r < R; r++)
            for (int64_t c = 0; c < C; c++)
                vt[c * R + r] = v[r * C + c];
        x = jg_transpose(tu_tensor(dt, 2, TU_SHAPE(C, R), vt), 0, 1);
        free(vt);
    }
    int64_t *at = malloc(sizeof(int64_t) * (size_t)(R > C ? R : C));
    int64_t *ix = malloc(sizeof(int64_t) * (size_t)(R > C ? R : C));
    int before = jg_get_num_threads();
    for (int k = 0; k < NT; k++) {
        assert_int_equal(jg_set_num_threads(THREADS[k]), 0);
        for (int mn = 0; mn < 2; mn++) {
            for (int dim = 0; dim < 2; dim++) {
                int64_t n = dim ? R : C, len = dim ? C : R;
                for (int64_t o = 0; o < n; o++) {
                    int64_t base = dim ? o * C : o, st = dim ? 1 : C;
                    ix[o] = ref_pick(v + base, len, st, mn);
                    at[o] = base + ix[o] * st;
                }
                jg_tensor *vals, *ind;
                if (mn)
                    assert_int_equal(jg_min_dim(x, dim, false, &vals, &ind), 0);
                else
                    assert_int_equal(jg_max_dim(x, dim, false, &vals, &ind), 0);
                check_pick(vals, v, at, n);
                double *gi = malloc(sizeof(double) * (size_t)n);
                tu_values(ind, gi);
                for (int64_t o = 0; o < n; o++)
                    assert_true(gi[o] == (double)ix[o]);
                free(gi);
                const int dims[1] = {dim};
                check_pick(mn ? jg_amin(x, 1, dims, false) : jg_amax(x, 1, dims, false), v, at, n);
            }
            at[0] = ref_pick(v, R * C, 1, mn);
            check_pick(mn ? jg_min(x) : jg_max(x), v, at, 1);
            check_pick(mn ? jg_amin(x, 0, NULL, false) : jg_amax(x, 0, NULL, false), v, at, 1);
        }
    }
    assert_int_equal(jg_set_num_threads(before), 0);
    free(ix);
    free(at);
    free(v);
}

static void test_min_amax_fast_paths(void **state) {
    (void)state;
    check_extrema(JG_F32, 1024, 1024, true, false);
    check_extrema(JG_F32, 300, 700, false, false);
    check_extrema(JG_F64, 513, 129, true, false);
    check_extrema(JG_F32, 7, 5, true, false);   /* small: inline; zeros only */
    check_extrema(JG_F64, 9, 10, false, false); /* zeros only */
    check_extrema(JG_F32, 700, 300, true, true);
    check_extrema(JG_F32, 6, 8, true, true);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_sum_dim0_split_order),
        TU_TEST(test_square_f32),
        TU_TEST(test_odd_shapes),
        TU_TEST(test_f64_and_i64),
        TU_TEST(test_middle_dim),
        TU_TEST(test_transposed_input),
        TU_TEST(test_softmax_threads_baseline),
        TU_TEST(test_min_amax_fast_paths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
