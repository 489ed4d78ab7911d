/* The f32 exp, sigmoid and silu loops and softmax's exp pass run
 * jg_ew_expf_normal over blocks whose every |x| is in its range and
 * jg_ew_expf over the others (ops/elementwise.c, ops/softmax.c).  These
 * check that every element still gets the expression's bits: blocks with
 * and without out-of-range values (large, inf, NaN) at every position
 * class, lengths around the block size, in place and out of place, and
 * that jg_ew_expf_normal equals jg_ew_expf over a strided sweep of its
 * range. */
#include "testutil.h"

#include "ops/decls.h"
#include "ops/ew_math.h"
#include "ops/optable.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    jg_opcode op;
    const char *name;
} OPS[] = {{JG_OP_EXP, "exp"}, {JG_OP_SIGMOID, "sigmoid"}, {JG_OP_SILU, "silu"}};

static uint32_t fbits(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

/* n inputs in [-8, 8) with special values at `at` (-1: none) */
static void fill(float *x, int64_t n, uint64_t seed, int64_t at, float special) {
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        x[i] = (float)((double)(seed >> 40) / (double)(1 << 24) * 16.0 - 8.0);
    }
    if (at >= 0 && at < n)
        x[at] = special;
}

/* The reference: the op's row function over x read with a step of 2
 * elements, which takes its plain strided loop (the expression of
 * elementwise.def / nn.def with jg_ew_expf, element by element). */
static void check_row(const char *what, const char *op, jg_inner_fn row, const float *x,
                      const float *y, int64_t n) {
    float *xs = malloc((size_t)(2 * n) * sizeof *xs), *ys = malloc((size_t)(2 * n) * sizeof *ys);
    assert_non_null(xs);
    assert_non_null(ys);
    for (int64_t i = 0; i < n; i++)
        xs[2 * i] = x[i], xs[2 * i + 1] = 0.0f;
    double sc = 0.0;
    char *p[2] = {(char *)ys, (char *)xs};
    const int64_t st[2] = {8, 8};
    row(&sc, n, p, st);
    for (int64_t i = 0; i < n; i++)
        if (fbits(y[i]) != fbits(ys[2 * i]))
            fail_msg("%s %s n=%lld: element %lld (x = %a) gave %a, want %a", what, op, (long long)n,
                     (long long)i, (double)x[i], (double)y[i], (double)ys[2 * i]);
    free(xs);
    free(ys);
}

static void test_exp_blocks_match_expression(void **state) {
    (void)state;
    static const float specials[] = {86.0f,  86.00001f, -86.00001f, 87.5f, -100.0f, -104.0f,
                                     200.0f, INFINITY,  -INFINITY,  NAN,   -NAN,    0x1p-149f};
    static const int64_t lens[] = {1, 7, 8, 9, 511, 512, 513, 1023, 1024, 1025, 1600};
    enum { MAXN = 1600 };
    float *x = malloc(MAXN * sizeof *x), *y = malloc(MAXN * sizeof *y);
    assert_non_null(x);
    assert_non_null(y);
    for (size_t o = 0; o < sizeof OPS / sizeof *OPS; o++) {
        jg_dense_fn dense = jg_ew_dense[OPS[o].op][JG_F32];
        jg_inner_fn row = jg_ew_rows[OPS[o].op][JG_F32];
        for (size_t l = 0; l < sizeof lens / sizeof *lens; l++) {
            int64_t n = lens[l];
            const int64_t ats[] = {-1, 0, n / 2, n - 1, 511, 512, 1100};
            for (size_t a = 0; a < sizeof ats / sizeof *ats; a++)
                for (size_t s = 0; s < sizeof specials / sizeof *specials; s++) {
                    fill(x, n, 7 * l + a, ats[a], specials[s]);
                    dense(n, y, x, NULL, 0.0);
                    check_row("out of place", OPS[o].name, row, x, y, n);
                    /* in place: the row function with out == a */
                    memcpy(y, x, (size_t)n * sizeof *y);
                    double sc = 0.0;
                    char *p[2] = {(char *)y, (char *)y};
                    const int64_t st[2] = {4, 4};
                    row(&sc, n, p, st);
                    check_row("in place", OPS[o].name, row, x, y, n);
                    if (ats[a] < 0)
                        break; /* one run without a special value */
                }
        }
    }
    free(x);
    free(y);
}

/* jg_ew_expf_normal gives jg_ew_expf's bits for every |x| <= 86 (checked
 * here on every 509th f32 of the range, and exhaustively when it was
 * written). */
static void test_exp_normal_same_bits(void **state) {
    (void)state;
    for (uint32_t sign = 0; sign <= 1; sign++)
        for (uint32_t u = 0; u <= JG_EW_EXPF_NORMAL_MAX; u += 509) {
            float x = jg_ew_f32((int32_t)(u | sign << 31));
            if (jg_ew_f32bits(jg_ew_expf_normal(x)) != jg_ew_f32bits(jg_ew_expf(x)))
                fail_msg("exp normal(%a) = %a, exp %a", (double)x, (double)jg_ew_expf_normal(x),
                         (double)jg_ew_expf(x));
        }
}

/* softmax over rows whose spread is beyond the fast range (x - max below
 * -86, -inf) and within it: a dense row and the same row read with a step
 * (the strided pass, which calls jg_ew_expf per element) agree bitwise. */
static void test_softmax_exp_blocks(void **state) {
    (void)state;
    enum { R = 4, C = 1100 };
    float *x = malloc(R * C * sizeof *x);
    assert_non_null(x);
    for (int r = 0; r < R; r++)
        fill(x + r * C, C, 100 + (uint64_t)r, -1, 0.0f);
    x[0 * C + 5] = -90.0f;  /* row 0: beyond the range in the first block */
    x[1 * C + 700] = 95.0f; /* row 1: a large maximum, the rest below -86 */
    x[2 * C + 1099] = -INFINITY;
    jg_tensor *t = jg_tensor_from_blob(JG_F32, 2, TU_SHAPE(R, C), NULL, x, NULL, NULL);
    assert_non_null(t);
    jg_tensor *tt = jg_contiguous(jg_transpose(t, 0, 1)); /* [C, R] */
    assert_non_null(tt);
    for (int lg = 0; lg <= 1; lg++) {
        jg_tensor *dense = lg ? jg_log_softmax(t, 1) : jg_softmax(t, 1);
        jg_tensor *strided =
            lg ? jg_log_softmax(jg_transpose(tt, 0, 1), 1) : jg_softmax(jg_transpose(tt, 0, 1), 1);
        assert_non_null(dense);
        assert_non_null(strided);
        TU_SAME(dense, jg_contiguous(strided));
    }
    free(x);
}

/* softmax's exp pass gives 0 for x - max <= -104 (-inf included) in its
 * fast pass, without redoing the block: rows masked as a causal attention
 * masks them (-inf above the diagonal), rows with finite values at and
 * beyond -104 and just inside it (-103.9, -90: subnormal or small results,
 * the slow pass), NaN, +inf and an all -inf row, at 64 and 1100 columns
 * (one block, three blocks): the dense rows equal the strided pass (which
 * calls jg_ew_expf per element) bit for bit. */
static void test_softmax_masked_rows(void **state) {
    (void)state;
    static const int lens[] = {64, 1100};
    static const float specials[] = {-INFINITY, -1e30f, -200.0f, -104.0f,
                                     -103.9f,   -90.0f, NAN,     INFINITY};
    for (size_t l = 0; l < sizeof lens / sizeof *lens; l++) {
        const int C = lens[l], R = 64 + 3 * (int)(sizeof specials / sizeof *specials) + 1;
        float *x = malloc((size_t)R * (size_t)C * sizeof *x);
        assert_non_null(x);
        for (int r = 0; r < R; r++)
            fill(x + (size_t)r * (size_t)C, C, 300 + (uint64_t)r, -1, 0.0f);
        for (int r = 0; r < 64; r++) /* causal: row r sees columns <= r * C / 64 */
            for (int c = r * C / 64 + 1; c < C; c++)
                x[(size_t)r * (size_t)C + (size_t)c] = -INFINITY;
        int r = 64;
        for (size_t k = 0; k < sizeof specials / sizeof *specials; k++) {
            /* the special value in one element, in every other one, and
             * in every element but the first (its value alone sets the max
             * for -inf / large negative specials) */
            x[(size_t)r++ * (size_t)C + (size_t)(C / 2)] = specials[k];
            for (int c = 1; c < C; c += 2)
                x[(size_t)r * (size_t)C + (size_t)c] = specials[k];
            r++;
            for (int c = 1; c < C; c++)
                x[(size_t)r * (size_t)C + (size_t)c] = specials[k];
            r++;
        }
        for (int c = 0; c < C; c++) /* all -inf: NaN, as PyTorch */
            x[(size_t)r * (size_t)C + (size_t)c] = -INFINITY;
        jg_tensor *t = jg_tensor_from_blob(JG_F32, 2, TU_SHAPE(R, C), NULL, x, NULL, NULL);
        assert_non_null(t);
        jg_tensor *tt = jg_contiguous(jg_transpose(t, 0, 1));
        assert_non_null(tt);
        for (int lg = 0; lg <= 1; lg++) {
            jg_tensor *dense = lg ? jg_log_softmax(t, 1) : jg_softmax(t, 1);
            jg_tensor *strided = lg ? jg_log_softmax(jg_transpose(tt, 0, 1), 1)
                                    : jg_softmax(jg_transpose(tt, 0, 1), 1);
            assert_non_null(dense);
            assert_non_null(strided);
            TU_SAME(dense, jg_contiguous(strided));
        }
        /* the masked entries are exact zeros */
        jg_tensor *sm = jg_softmax(t, 1);
        assert_non_null(sm);
        const float *y = (const float *)jg_tensor_ptr(sm);
        for (int c = 1; c < C; c++)
            assert_true(fbits(y[c]) == 0u);
        free(x);
    }
}

/* Row kinds of test_softmax_mask_hint. */
enum { K_PLAIN, K_CAUSAL, K_SLOW, K_NAN, K_MASKED_SLOW, K_LATE_MASK, K_ALL_INF, N_KINDS };

static void fill_kind(float *x, int C, int kind, uint64_t seed) {
    fill(x, C, seed, -1, 0.0f);
    switch (kind) {
    case K_CAUSAL: /* -inf past a third of the row */
        for (int c = C / 3 + 1; c < C; c++)
            x[c] = -INFINITY;
        break;
    case K_SLOW: /* x - max in (-104, -86): the slow pass, nothing masked */
        x[C / 2] = -95.0f;
        break;
    case K_NAN:
        x[C - 1] = NAN;
        break;
    case K_MASKED_SLOW: /* masked and slow elements in one block */
        for (int c = 1; c < C; c += 3)
            x[c] = -INFINITY;
        x[C - 2] = -95.0f;
        break;
    case K_LATE_MASK: /* -inf in the last 40 elements only (the last block) */
        for (int c = C - 40; c < C; c++)
            x[c] = -INFINITY;
        break;
    case K_ALL_INF:
        for (int c = 0; c < C; c++)
            x[c] = -INFINITY;
        break;
    }
}

/* Which fast pass softmax's exp starts a block with follows the block
 * before it (masked logits or not), within a row and from row to row:
 * rows of every kind after rows of every kind (each ordered pair once) at
 * 64 and 1100 columns (one and three blocks per row), at 1 and 3 threads,
 * equal the strided pass (jg_ew_expf per element) bit for bit. */
static void test_softmax_mask_hint(void **state) {
    (void)state;
    static const int lens[] = {64, 1100};
    const int R = 2 * N_KINDS * N_KINDS;
    int threads = jg_get_num_threads();
    for (size_t l = 0; l < sizeof lens / sizeof *lens; l++) {
        const int C = lens[l];
        float *x = malloc((size_t)R * (size_t)C * sizeof *x);
        assert_non_null(x);
        int r = 0;
        for (int a = 0; a < N_KINDS; a++)
            for (int b = 0; b < N_KINDS; b++, r += 2) {
                fill_kind(x + (size_t)r * (size_t)C, C, a, 500 + (uint64_t)r);
                fill_kind(x + (size_t)(r + 1) * (size_t)C, C, b, 501 + (uint64_t)r);
            }
        jg_tensor *t = jg_tensor_from_blob(JG_F32, 2, TU_SHAPE(R, C), NULL, x, NULL, NULL);
        assert_non_null(t);
        jg_tensor *tt = jg_contiguous(jg_transpose(t, 0, 1));
        assert_non_null(tt);
        for (int nt = 1; nt <= 3; nt += 2) {
            jg_set_num_threads(nt);
            for (int lg = 0; lg <= 1; lg++) {
                jg_tensor *dense = lg ? jg_log_softmax(t, 1) : jg_softmax(t, 1);
                jg_tensor *strided = lg ? jg_log_softmax(jg_transpose(tt, 0, 1), 1)
                                        : jg_softmax(jg_transpose(tt, 0, 1), 1);
                assert_non_null(dense);
                assert_non_null(strided);
                TU_SAME(dense, jg_contiguous(strided));
            }
        }
        jg_set_num_threads(threads);
        free(x);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_exp_blocks_match_expression), TU_TEST(test_exp_normal_same_bits),
        TU_TEST(test_softmax_exp_blocks),          TU_TEST(test_softmax_masked_rows),
        TU_TEST(test_softmax_mask_hint),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
