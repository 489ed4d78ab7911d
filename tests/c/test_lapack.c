/* jg_linalg_inv, jg_linalg_slogdet (LAPACK by LU), jg_linalg_cholesky and jg_linalg_eigh: values
 * and gradients against PyTorch 1.13, batches, float32, a singular matrix and bad shapes. */
#include "testutil.h"

#include <math.h>
#include <string.h>

static const double a3[9] = {2, 1, 0, 1, 3, 1, 0, -1, 4};
/* PyTorch 1.13 in f64: linalg.inv(A), A's gradient of inv(A).sum(), and
 * slogdet(A) with the gradient of its logabsdet */
static const double want_inv[9] = {
    0.5909090909090909,    -0.18181818181818182, 0.045454545454545456,
    -0.18181818181818182,  0.36363636363636365,  -0.09090909090909091,
    -0.045454545454545456, 0.09090909090909091,  0.22727272727272727};
static const double want_inv_grad[9] = {
    -0.16528925619834714, -0.03305785123966942,  -0.09917355371900825,
    -0.12396694214876033, -0.024793388429752067, -0.0743801652892562,
    -0.08264462809917356, -0.01652892561983471,  -0.04958677685950413};
static const double want_logabsdet = 3.091042453358316;
static const double want_slogdet_grad[9] = {
    0.5909090909090909,   -0.18181818181818182, -0.045454545454545456,
    -0.18181818181818182, 0.36363636363636365,  0.09090909090909091,
    0.045454545454545456, -0.09090909090909091, 0.22727272727272727};

static void test_inv_values_and_gradient(void **state) {
    (void)state;
    jg_dtype dts[2] = {JG_F64, JG_F32};
    for (int d = 0; d < 2; d++) {
        double tol = dts[d] == JG_F64 ? 1e-13 : 1e-6;
        jg_tensor *A = tu_tensor(dts[d], 2, TU_SHAPE(3, 3), a3);
        jg_set_requires_grad(A, true);
        jg_tensor *Y = jg_linalg_inv(A);
        TU_CHECK(Y, 2, TU_SHAPE(3, 3), want_inv, tol);
        assert_int_equal(jg_backward(jg_sum(Y), NULL, 0), 0);
        TU_CHECK(jg_grad(A), 2, TU_SHAPE(3, 3), want_inv_grad, tol * 10);
    }
}

static void test_inv_batched_and_strided(void **state) {
    (void)state;
    double two[18];
    memcpy(two, a3, sizeof a3);
    memcpy(two + 9, a3, sizeof a3);
    jg_tensor *A = tu_tensor(JG_F64, 3, TU_SHAPE(2, 3, 3), two);
    double want[18];
    memcpy(want, want_inv, sizeof want_inv);
    memcpy(want + 9, want_inv, sizeof want_inv);
    TU_CHECK(jg_linalg_inv(A), 3, TU_SHAPE(2, 3, 3), want, 1e-13);
    /* the inverse of A^T (a strided view) is inv(A)^T */
    jg_tensor *Yt = jg_linalg_inv(jg_transpose(A, 1, 2));
    TU_SAME(jg_contiguous(jg_transpose(Yt, 1, 2)), jg_linalg_inv(A));
}

static void test_slogdet(void **state) {
    (void)state;
    jg_tensor *A = tu_tensor(JG_F64, 2, TU_SHAPE(3, 3), a3);
    jg_set_requires_grad(A, true);
    jg_tensor *sign, *logabs;
    assert_int_equal(jg_linalg_slogdet(A, &sign, &logabs), 0);
    TU_CHECK(sign, 0, TU_SHAPE(0), TU_VALS(1.0), 0);
    TU_CHECK(logabs, 0, TU_SHAPE(0), TU_VALS(want_logabsdet), 1e-14);
    assert_int_equal(jg_backward(logabs, NULL, 0), 0);
    TU_CHECK(jg_grad(A), 2, TU_SHAPE(3, 3), want_slogdet_grad, 1e-13);
    /* a row swap: sign -1; singular: sign 0, log|det| -inf */
    jg_tensor *P = tu_tensor(JG_F32, 2, TU_SHAPE(2, 2), TU_VALS(0, 1, 1, 0));
    assert_int_equal(jg_linalg_slogdet(P, &sign, &logabs), 0);
    TU_CHECK(sign, 0, TU_SHAPE(0), TU_VALS(-1.0), 0);
    TU_CHECK(logabs, 0, TU_SHAPE(0), TU_VALS(0.0), 0);
    jg_tensor *S = tu_tensor(JG_F64, 3, TU_SHAPE(1, 2, 2), TU_VALS(1, 2, 2, 4));
    assert_int_equal(jg_linalg_slogdet(S, &sign, &logabs), 0);
    TU_CHECK(sign, 1, TU_SHAPE(1), TU_VALS(0.0), 0);
    double l;
    tu_values(logabs, &l);
    assert_true(isinf(l) && l < 0);
}

static void test_bad_input(void **state) {
    (void)state;
    jg_tensor *S = tu_tensor(JG_F64, 2, TU_SHAPE(2, 2), TU_VALS(1, 2, 2, 4));
    assert_null(jg_linalg_inv(S));
    TU_ERROR("linalg.inv: The diagonal element 2 is zero, the inversion could not be completed "
             "because the input matrix is singular.");
    jg_tensor *Z = jg_full(JG_F32, 3, TU_SHAPE(2, 2, 2), 0.0);
    assert_null(jg_linalg_inv(Z));
    TU_ERROR("linalg.inv: (Batch element 0): The diagonal element 1 is zero");
    assert_null(jg_linalg_inv(jg_full(JG_F32, 2, TU_SHAPE(2, 3), 0.0)));
    TU_ERROR("linalg.inv: A must be batches of square matrices, but they are 2 by 3 matrices");
    assert_null(jg_linalg_inv(jg_full(JG_F32, 1, TU_SHAPE(3), 0.0)));
    TU_ERROR("linalg.inv: The input tensor A must have at least 2 dimensions.");
    assert_null(jg_linalg_inv(jg_full(JG_I64, 2, TU_SHAPE(2, 2), 0.0)));
    TU_ERROR("linalg.inv: Expected a floating point or complex tensor as input. Got Long");
    jg_tensor *s, *l;
    assert_int_equal(jg_linalg_slogdet(jg_full(JG_F32, 2, TU_SHAPE(2, 3), 0.0), &s, &l), -1);
    TU_ERROR("linalg.slogdet: A must be batches of square matrices");
}

static void test_cholesky(void **state) {
    (void)state;
    /* PyTorch 1.13 in f64: linalg.cholesky(A) and A's gradient of its sum;
     * the 9 above the diagonal is never read */
    static const double spd[9] = {4, 9, 0, 2, 5, 9, 0, 1, 3};
    static const double want_l[9] = {2, 0, 0, 1, 2, 0, 0, 0.5, 1.6583123951777};
    static const double want_g[9] = {0.17658611475902755, 0.1468277704819449,  0.16268891807222047,
                                     0.1468277704819449,  0.20634445903611023, 0.1746221638555591,
                                     0.16268891807222047, 0.1746221638555591,  0.30151134457776363};
    jg_tensor *A = tu_tensor(JG_F64, 2, TU_SHAPE(3, 3), spd);
    jg_set_requires_grad(A, true);
    jg_tensor *L = jg_linalg_cholesky(A);
    TU_CHECK(L, 2, TU_SHAPE(3, 3), want_l, 1e-14);
    assert_int_equal(jg_backward(jg_sum(L), NULL, 0), 0);
    TU_CHECK(jg_grad(A), 2, TU_SHAPE(3, 3), want_g, 1e-13);
    jg_tensor *B = tu_tensor(JG_F32, 3, TU_SHAPE(2, 2, 2), TU_VALS(1, 0, 0, 1, 1, 2, 2, 1));
    assert_null(jg_linalg_cholesky(B));
    TU_ERROR("linalg.cholesky: (Batch element 1): The factorization could not be completed "
             "because the input is not positive-definite (the leading minor of order 2 is not "
             "positive-definite).");
}

static void test_eigh(void **state) {
    (void)state;
    /* [[2, 1], [1, 2]]: eigenvalues 1, 3, eigenvectors (1, -1) / sqrt 2 and
     * (1, 1) / sqrt 2 up to sign; the gradient of their sum is I (the
     * trace's), of the larger one v v^T; the 9 is outside the lower
     * triangle and never read */
    jg_tensor *A = tu_tensor(JG_F64, 2, TU_SHAPE(2, 2), TU_VALS(2, 9, 1, 2));
    jg_set_requires_grad(A, true);
    jg_tensor *L, *V;
    assert_int_equal(jg_linalg_eigh(A, false, &L, &V), 0);
    TU_CHECK(L, 1, TU_SHAPE(2), TU_VALS(1, 3), 1e-14);
    double v[4];
    tu_values(V, v);
    double r = sqrt(0.5);
    assert_true(fabs(fabs(v[0]) - r) < 1e-14 && fabs(fabs(v[3]) - r) < 1e-14);
    assert_true(fabs(v[0] + v[2]) < 1e-14 && fabs(v[1] - v[3]) < 1e-14);
    assert_int_equal(jg_backward(jg_sum(L), NULL, 0), 0);
    TU_CHECK(jg_grad(A), 2, TU_SHAPE(2, 2), TU_VALS(1, 0, 0, 1), 1e-14);
    /* upper: reads the 9 */
    assert_int_equal(jg_linalg_eigh(A, true, &L, &V), 0);
    TU_CHECK(L, 1, TU_SHAPE(2), TU_VALS(-7, 11), 1e-13);
    assert_int_equal(jg_linalg_eigh(jg_full(JG_F32, 2, TU_SHAPE(2, 3), 0.0), false, &L, &V), -1);
    TU_ERROR("linalg.eigh: A must be batches of square matrices, but they are 2 by 3 matrices");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TEST(test_inv_values_and_gradient),
        TU_TEST(test_inv_batched_and_strided),
        TU_TEST(test_slogdet),
        TU_TEST(test_bad_input),
        TU_TEST(test_cholesky),
        TU_TEST(test_eigh),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
