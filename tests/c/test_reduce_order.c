/* The documented summation order (docs/kernels.md, "Reductions";
 * ops/sum_order.h) on inputs large enough for several blocks and the
 * parallel paths: sums equal a reference written here in that order, bit
 * for bit, for every layout (contiguous, transposed, sliced) and dims
 * combination; the order does not depend on how the blocks are chunked
 * (strided and contiguous runs, parallel and serial paths agree); softmax
 * gives the same bits along any dim and layout; max keeps PyTorch's
 * first-maximum / NaN rules on long rows; blocked copies are exact. */
#include "testutil.h"

#include "ops/sum_order.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static double rnd(jg_dtype dt, double x) {
    return dt == JG_F32 ? (double)(float)x : x;
}

/* The order of ops/sum_order.h over x[0], x[st], ... in dtype dt. */
static double ref_sum(jg_dtype dt, const double *x, int64_t n, int64_t st) {
    int L = dt == JG_F32 ? JG_SUM_LANES_F32 : JG_SUM_LANES_F64;
    double s = 0;
    for (int64_t b0 = 0; b0 == 0 || b0 < n; b0 += JG_SUM_BLOCK) {
        double l[32] = {0};
        for (int64_t i = b0; i < n && i < b0 + JG_SUM_BLOCK; i++)
            l[(i - b0) % L] = rnd(dt, l[(i - b0) % L] + x[i * st]);
        for (int w = L / 2; w >= 1; w /= 2)
            for (int j = 0; j < w; j++)
                l[j] = rnd(dt, l[j] + l[j + w]);
        s = b0 == 0 ? l[0] : rnd(dt, s + l[0]);
    }
    return s;
}

/* Values with a wide exponent range, so that the order shows in the bits. */
static double *fill(int64_t n, uint64_t seed, jg_dtype dt) {
    double *v = malloc(sizeof(double) * (size_t)n);
    uint64_t s = seed * 2862933555777941757ULL + 3037000493ULL;
    for (int64_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        double m = (double)(s >> 11) / 9007199254740992.0 - 0.5;
        v[i] = rnd(dt, ldexp(m, (int)((s >> 3) % 24) - 8));
    }
    return v;
}

static jg_tensor *tensor_of(jg_dtype dt, int nd, const int64_t *shape, const double *v) {
    return tu_tensor(dt, nd, shape, v);
}

/* sum over the last dim of [rows, n] and over all of it, in every layout. */
static void check_trailing(jg_dtype dt, int64_t rows, int64_t n) {
    double *v = fill(rows * n, (uint64_t)(rows * 7 + n), dt);
    jg_tensor *x = tensor_of(dt, 2, TU_SHAPE(rows, n), v);
    double *want = malloc(sizeof(double) * (size_t)rows);
    for (int64_t r = 0; r < rows; r++)
        want[r] = ref_sum(dt, v + r * n, n, 1);
    TU_CHECK(jg_sum_dims(x, 1, (const int[]){1}, false), 1, TU_SHAPE(rows), want, 0);
    /* the same logical values held transposed: the same bits */
    jg_tensor *xt = jg_contiguous(jg_transpose(x, 0, 1));
    TU_CHECK(jg_sum_dims(jg_transpose(xt, 0, 1), 1, (const int[]){-1}, true), 2, TU_SHAPE(rows, 1),
             want, 0);
    double all = ref_sum(dt, v, rows * n, 1);
    TU_CHECK(jg_sum(x), 0, NULL, &all, 0);
    TU_CHECK(jg_sum(jg_transpose(xt, 0, 1)), 0, NULL, &all, 0);
    double mean = rnd(dt, all / (double)(rows * n));
    TU_CHECK(jg_mean(x), 0, NULL, &mean, 0);
    free(want);
    free(v);
}

static void test_sum_trailing_order(void **state) {
    (void)state;
    for (int t = 0; t < 2; t++) {
        jg_dtype dt = t ? JG_F64 : JG_F32;
        check_trailing(dt, 1, 100003); /* one run: blocks on the parallel path */
        check_trailing(dt, 3, 4097);   /* a block and one element */
        check_trailing(dt, 40, 33);    /* a lane round and a tail */
        check_trailing(dt, 2000, 31);  /* many short rows on the pool */
        check_trailing(dt, 5, 1);
    }
}

/* Leading and middle dims: every output adds its inputs in row-major
 * order from 0 (A, R, C: kept, reduced, kept). */
static void check_outer(jg_dtype dt, int64_t A, int64_t R, int64_t C) {
    int64_t n = A * R * C;
    double *v = fill(n, (uint64_t)(A + 3 * R + 5 * C), dt);
    jg_tensor *x = tensor_of(dt, 3, TU_SHAPE(A, R, C), v);
    tu_values(x, v); /* the values as the dtype holds them */
    double *want = malloc(sizeof(double) * (size_t)(A * C));
    for (int64_t a = 0; a < A; a++)
        for (int64_t c = 0; c < C; c++) {
            double s = 0;
            for (int64_t r = 0; r < R; r++)
                s = dt == JG_I64 ? s + v[(a * R + r) * C + c] : rnd(dt, s + v[(a * R + r) * C + c]);
            want[a * C + c] = s;
        }
    TU_CHECK(jg_sum_dims(x, 1, (const int[]){1}, false), 2, TU_SHAPE(A, C), want, 0);
    /* a non-dense input with the same logical values */
    jg_tensor *p = jg_contiguous(jg_permute(x, (const int[]){2, 1, 0}));
    jg_tensor *back = jg_permute(p, (const int[]){2, 1, 0});
    assert_false(jg_is_contiguous(back));
    TU_CHECK(jg_sum_dims(back, 1, (const int[]){1}, false), 2, TU_SHAPE(A, C), want, 0);
    free(want);
    free(v);
}

static void test_sum_outer_order(void **state) {
    (void)state;
    const jg_dtype dts[] = {JG_F32, JG_F64, JG_I64};
    for (int t = 0; t < 3; t++) {
        check_outer(dts[t], 1, 1000, 1100); /* dim 0 of a matrix: tiles of columns */
        check_outer(dts[t], 3, 70, 33);
        check_outer(dts[t], 2, 5, 3000);
    }
    /* sum over dims (0, 2): the general walk, the same row-major order */
    double v[2 * 3 * 4];
    for (int i = 0; i < 24; i++)
        v[i] = ldexp(1.0, i % 5 * 9 - 20) * (i % 3 ? 1 : -1);
    jg_tensor *x = tu_tensor(JG_F32, 3, TU_SHAPE(2, 3, 4), v);
    double want[3];
    for (int j = 0; j < 3; j++) {
        double s = 0;
        for (int a = 0; a < 2; a++)
            for (int c = 0; c < 4; c++)
                s = rnd(JG_F32, s + v[(a * 3 + j) * 4 + c]);
        want[j] = s;
    }
    TU_CHECK(jg_sum_dims(x, 2, (const int[]){0, 2}, false), 1, TU_SHAPE(3), want, 0);
}

/* The blocks' results do not depend on which call computes them: a
 * strided run, a contiguous run (parallel above 64K elements) and the
 * reference agree, for lengths around the block and lane boundaries. */
static void test_sum_runs_agree(void **state) {
    (void)state;
    const int64_t ns[] = {0, 1, 2, 17, 31, 32, 33, 4095, 4096, 4097, 65535, 65536, 70001, 131073};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        int64_t n = ns[k];
        double *v = fill(n ? 2 * n : 1, (uint64_t)n + 11, JG_F32);
        float *f = malloc(sizeof(float) * (size_t)(2 * n + 1));
        double *d = malloc(sizeof(double) * (size_t)(2 * n + 1));
        for (int64_t i = 0; i < 2 * n; i++)
            f[i] = (float)v[i], d[i] = v[i];
        float rf = (float)ref_sum(JG_F32, v, n, 2);
        double rd = ref_sum(JG_F64, v, n, 2);
        assert_true(jg_sum_strided_f32(f, n, 2) == rf);
        assert_true(jg_sum_strided_f64(d, n, 2) == rd);
        for (int64_t i = 0; i < n; i++)
            f[i] = f[2 * i], d[i] = d[2 * i];
        float cf = jg_sum_run_f32(f, n);
        double cd = jg_sum_run_f64(d, n);
        assert_memory_equal(&cf, &rf, sizeof cf);
        assert_memory_equal(&cd, &rd, sizeof cd);
        free(f);
        free(d);
        free(v);
    }
}

static void test_sum_empty_nan(void **state) {
    (void)state;
    jg_tensor *e = jg_tensor_new(JG_F32, 2, TU_SHAPE(4, 0), NULL);
    TU_CHECK(jg_sum_dims(e, 1, (const int[]){1}, false), 1, TU_SHAPE(4), TU_VALS(0, 0, 0, 0), 0);
    TU_CHECK(jg_sum_dims(e, 1, (const int[]){0}, false), 1, TU_SHAPE(0), NULL, 0);
    TU_CHECK(jg_sum(e), 0, NULL, TU_VALS(0), 0);
    double *v = fill(70000, 5, JG_F32);
    v[50000] = NAN;
    jg_tensor *x = tu_tensor(JG_F32, 1, TU_SHAPE(70000), v);
    double s;
    tu_values(jg_sum(x), &s);
    assert_true(isnan(s));
    v[50000] = INFINITY;
    v[60000] = -INFINITY;
    tu_values(jg_sum(tu_tensor(JG_F64, 1, TU_SHAPE(70000), v)), &s);
    assert_true(isnan(s));
    free(v);
}

/* softmax / log_softmax of the same logical values along a dim that is
 * the last (row path), not the last (column tiles) or strided. */
static void test_softmax_layouts_agree(void **state) {
    (void)state;
    for (int t = 0; t < 2; t++) {
        jg_dtype dt = t ? JG_F64 : JG_F32;
        for (int lg = 0; lg < 2; lg++) {
            jg_tensor *(*f)(jg_tensor *, int) = lg ? jg_log_softmax : jg_softmax;
            int64_t R = 70, N = 4500;
            double *v = fill(R * N, 9, dt);
            for (int64_t i = 0; i < R * N; i++)
                v[i] = rnd(dt, v[i] * 1e-3);
            jg_tensor *x = tensor_of(dt, 2, TU_SHAPE(R, N), v);
            jg_tensor *rows = f(x, 1);
            jg_tensor *xt = jg_contiguous(jg_transpose(x, 0, 1)); /* [N, R] */
            TU_SAME(jg_contiguous(jg_transpose(f(xt, 0), 0, 1)), rows);
            TU_SAME(f(jg_transpose(xt, 0, 1), 1), rows);
            /* the reference sum of the first row */
            double e[4500], want = 0, got;
            double m = -INFINITY;
            for (int64_t i = 0; i < N; i++)
                m = v[i] > m ? v[i] : m;
            for (int64_t i = 0; i < N; i++)
                e[i] = dt == JG_F32 ? (double)expf((float)(v[i] - m)) : exp(v[i] - m);
            want = ref_sum(dt, e, N, 1);
            double *all = malloc(sizeof(double) * (size_t)(R * N));
            tu_values(rows, all);
            got = all[0];
            free(all);
            if (lg) {
                double ls = dt == JG_F32 ? (double)logf((float)want) : log(want);
                assert_true(got == rnd(dt, rnd(dt, v[0] - m) - ls));
            } else {
                assert_true(got == rnd(dt, e[0] / want));
            }
            free(v);
        }
    }
}

/* max over the last dim and of everything on rows longer than a chunk:
 * the first maximum, the first NaN, a zero maximum from its first place. */
static void test_max_long_rows(void **state) {
    (void)state;
    int64_t n = 70001;
    double *v = malloc(sizeof(double) * (size_t)(3 * n));
    for (int64_t i = 0; i < 3 * n; i++)
        v[i] = -1.0 - (double)(i % 7);
    v[0 * n + 40000] = v[0 * n + 69000] = 3.0;
    v[1 * n + 5] = 9.0;
    v[1 * n + 66000] = NAN;
    v[1 * n + 67000] = NAN;
    v[2 * n + 33000] = -0.0;
    v[2 * n + 34000] = 0.0;
    for (int t = 0; t < 2; t++) {
        jg_dtype dt = t ? JG_F64 : JG_F32;
        jg_tensor *x = tu_tensor(dt, 2, TU_SHAPE(3, n), v), *vals, *idx;
        assert_int_equal(jg_max_dim(x, 1, false, &vals, &idx), 0);
        TU_CHECK(idx, 1, TU_SHAPE(3), TU_VALS(40000, 66000, 33000), 0);
        double got[3];
        tu_values(vals, got);
        assert_true(got[0] == 3.0 && isnan(got[1]) && got[2] == 0.0 && signbit(got[2]));
        /* the same rows as columns: dim 0 of a dense [n, 3] */
        jg_tensor *xt = jg_contiguous(jg_transpose(x, 0, 1));
        assert_int_equal(jg_max_dim(xt, 0, true, &vals, &idx), 0);
        TU_CHECK(idx, 2, TU_SHAPE(1, 3), TU_VALS(40000, 66000, 33000), 0);
        tu_values(vals, got);
        assert_true(got[0] == 3.0 && isnan(got[1]) && got[2] == 0.0 && signbit(got[2]));
        double m;
        tu_values(jg_max(jg_slice(x, 0, 2, 3)), &m);
        assert_true(m == 0.0 && signbit(m)); /* the first zero */
        tu_values(jg_max(x), &m);
        assert_true(isnan(m));
        tu_values(jg_max(jg_slice(x, 0, 0, 1)), &m);
        assert_true(m == 3.0);
    }
    free(v);
}

/* Blocked copies (transpose and permutes, every dtype) equal the
 * elementwise definition. */
static void test_blocked_copies(void **state) {
    (void)state;
    const jg_dtype dts[] = {JG_F32, JG_F64, JG_I64, JG_I32, JG_BOOL};
    int64_t A = 37, B = 45, C = 70;
    double *v = fill(A * B * C, 3, JG_F64);
    for (int64_t i = 0; i < A * B * C; i++)
        v[i] = floor(v[i] * 1000);
    const int perms[][3] = {{0, 2, 1}, {2, 0, 1}, {1, 2, 0}, {2, 1, 0}};
    for (int t = 0; t < 5; t++) {
        jg_tensor *x = tu_tensor(dts[t], 3, TU_SHAPE(A, B, C), v);
        double *xv = malloc(sizeof(double) * (size_t)(A * B * C));
        double *want = malloc(sizeof(double) * (size_t)(A * B * C));
        tu_values(x, xv);
        for (int p = 0; p < 4; p++) {
            const int *pm = perms[p];
            int64_t sh[3] = {A, B, C}, ps[3] = {sh[pm[0]], sh[pm[1]], sh[pm[2]]};
            int64_t st[3] = {B * C, C, 1};
            for (int64_t i = 0; i < ps[0]; i++)
                for (int64_t j = 0; j < ps[1]; j++)
                    for (int64_t k = 0; k < ps[2]; k++)
                        want[(i * ps[1] + j) * ps[2] + k] =
                            xv[i * st[pm[0]] + j * st[pm[1]] + k * st[pm[2]]];
            jg_tensor *y = jg_contiguous(jg_permute(x, pm));
            TU_CHECK(y, 3, ps, want, 0);
            /* x copied into a permuted view of a fresh tensor */
            int inv[3];
            for (int d = 0; d < 3; d++)
                inv[pm[d]] = d;
            jg_tensor *z = jg_tensor_new(dts[t], 3, ps, NULL);
            assert_int_equal(jg_copy_(jg_permute(z, inv), x), 0);
            TU_CHECK(z, 3, ps, want, 0);
        }
        free(xv);
        free(want);
    }
    free(v);
}

/* Sums choose between two vector layouts of the same lanes by each
 * thread's share of the input (ops/reduce.c, sum_wide: up to the L2 size,
 * 32-byte vectors, else 16-byte ones): inputs of twice the L2 size, summed
 * at 1 thread (16-byte) and 3 threads (32-byte: a share of two thirds of
 * L2), rows with a tail and one long run, equal the reference bit for bit
 * either way. */
static void test_sum_vector_layouts(void **state) {
    (void)state;
    long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    if (l2 <= 0)
        l2 = 1L << 20;
    int threads = jg_get_num_threads();
    for (int nt = 1; nt <= 3; nt += 2) {
        jg_set_num_threads(nt);
        for (int t = 0; t < 2; t++) {
            jg_dtype dt = t ? JG_F64 : JG_F32;
            int64_t n = 2 * l2 / (t ? 8 : 4);
            check_trailing(dt, n / 1000 + 1, 1000); /* rows of 31 lane rounds and a tail */
            check_trailing(dt, 1, n + 13);          /* one run split into blocks */
        }
    }
    jg_set_num_threads(threads);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_sum_trailing_order),    TU_TEST(test_sum_outer_order),
        TU_TEST(test_sum_runs_agree),        TU_TEST(test_sum_empty_nan),
        TU_TEST(test_softmax_layouts_agree), TU_TEST(test_max_long_rows),
        TU_TEST(test_blocked_copies),        TU_TEST(test_sum_vector_layouts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
