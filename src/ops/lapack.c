/* LAPACK-backed linear algebra: the inverse and (sign, log|det|) of
 * batches of square matrices, by LU factorisation (OpenBLAS ships LAPACK;
 * Debian has no lapacke.h, so the Fortran entry points are declared here).
 *
 * Each matrix is copied into a column-major buffer (LAPACK's layout), so
 * getrf factors A itself, as PyTorch does: the pivots, and so the index of
 * a zero diagonal element in a singular matrix's error, are PyTorch's.
 * Float32 matrices are factored in single precision, as PyTorch does.
 *
 * The gradients are written with jitgrad ops (so they serve double
 * backward and compiled programs): inv's is -A^-T G A^-T, and log|det|'s is
 * g A^-T (PyTorch's formulas for real inputs); the sign has none. */
#include "core/tensor.h"
#include "ops/decls.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void sgetrf_(const int *m, const int *n, float *a, const int *lda, int *ipiv, int *info);
void dgetrf_(const int *m, const int *n, double *a, const int *lda, int *ipiv, int *info);
void sgetri_(const int *n, float *a, const int *lda, const int *ipiv, float *work, const int *lwork,
             int *info);
void dgetri_(const int *n, double *a, const int *lda, const int *ipiv, double *work,
             const int *lwork, int *info);

void spotrf_(const char *uplo, const int *n, float *a, const int *lda, int *info, size_t uplo_len);
void dpotrf_(const char *uplo, const int *n, double *a, const int *lda, int *info, size_t uplo_len);

void ssyevd_(const char *jobz, const char *uplo, const int *n, float *a, const int *lda, float *w,
             float *work, const int *lwork, int *iwork, const int *liwork, int *info,
             size_t jobz_len, size_t uplo_len);
void dsyevd_(const char *jobz, const char *uplo, const int *n, double *a, const int *lda, double *w,
             double *work, const int *lwork, int *iwork, const int *liwork, int *info,
             size_t jobz_len, size_t uplo_len);

/* The shape rule shared by the ops: a float batch of square matrices. */
static int square_batch(const char *fn, const jg_meta *A) {
    if (A->ndim < 2)
        return jg_errorf("%s: The input tensor A must have at least 2 dimensions.", fn);
    if (A->dtype != JG_F32 && A->dtype != JG_F64)
        return jg_errorf("%s: Expected a floating point or complex tensor as input. Got %s", fn,
                         jg_dtype_torch_name(A->dtype));
    int64_t r = A->shape[A->ndim - 2], c = A->shape[A->ndim - 1];
    if (r != c)
        return jg_errorf("%s: A must be batches of square matrices, but they are %lld by %lld "
                         "matrices",
                         fn, (long long)r, (long long)c);
    return 0;
}

int jg_infer_linalg_inv(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    (void)a;
    if (square_batch("linalg.inv", &in[0]) < 0)
        return -1;
    out[0] = in[0];
    return 0;
}

int jg_infer_linalg_slogdet(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    (void)a;
    if (square_batch("linalg.slogdet", &in[0]) < 0)
        return -1;
    memset(&out[0], 0, sizeof out[0]);
    out[0].dtype = in[0].dtype;
    out[0].ndim = in[0].ndim - 2;
    memcpy(out[0].shape, in[0].shape, sizeof(int64_t) * (size_t)out[0].ndim);
    out[1] = out[0];
    return 0;
}

/* The element offset of batch matrix b (row-major batch index) in t. */
static int64_t batch_offset(const jg_tensor *t, int64_t b) {
    int64_t off = t->offset;
    for (int d = t->ndim - 3; d >= 0; d--) {
        off += (b % t->shape[d]) * t->stride[d];
        b /= t->shape[d];
    }
    return off;
}

/* Matrix b of A into buf, column-major. */
static void load_colmajor(const jg_tensor *A, int64_t b, int64_t n, void *buf) {
    int64_t off = batch_offset(A, b);
    int64_t rs = A->stride[A->ndim - 2], cs = A->stride[A->ndim - 1];
    if (A->dtype == JG_F32) {
        const float *p = (const float *)A->storage->data + off;
        float *q = buf;
        for (int64_t j = 0; j < n; j++)
            for (int64_t i = 0; i < n; i++)
                q[j * n + i] = p[i * rs + j * cs];
    } else {
        const double *p = (const double *)A->storage->data + off;
        double *q = buf;
        for (int64_t j = 0; j < n; j++)
            for (int64_t i = 0; i < n; i++)
                q[j * n + i] = p[i * rs + j * cs];
    }
}

static int getrf(jg_dtype dt, int n, void *buf, int *ipiv) {
    int info = 0;
    if (dt == JG_F32)
        sgetrf_(&n, &n, buf, &n, ipiv, &info);
    else
        dgetrf_(&n, &n, buf, &n, ipiv, &info);
    return info;
}

int jg_k_linalg_inv(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    (void)a;
    const jg_tensor *A = in[0];
    jg_tensor *Y = out[0];
    int64_t n = A->shape[A->ndim - 1];
    int64_t nb = jg_shape_numel(A->ndim - 2, A->shape);
    if (n == 0 || nb == 0)
        return 0;
    if (n > 46340)
        return jg_errorf("linalg.inv: matrices of %lld rows are too large", (long long)n);
    size_t es = jg_dtype_size(A->dtype);
    void *buf = malloc((size_t)(n * n) * es * 2);
    int *ipiv = malloc(sizeof(int) * (size_t)n);
    if (!buf || !ipiv) {
        free(buf);
        free(ipiv);
        return jg_errorf("linalg.inv: out of memory");
    }
    void *work = (char *)buf + (size_t)(n * n) * es;
    int ni = (int)n, lwork = (int)(n * n), rc = 0;
    for (int64_t b = 0; b < nb && rc == 0; b++) {
        load_colmajor(A, b, n, buf);
        int info = getrf(A->dtype, ni, buf, ipiv);
        if (info > 0) {
            if (A->ndim > 2)
                rc = jg_errorf("linalg.inv: (Batch element %lld): The diagonal element %d is "
                               "zero, the inversion could not be completed because the input "
                               "matrix is singular.",
                               (long long)b, info);
            else
                rc = jg_errorf("linalg.inv: The diagonal element %d is zero, the inversion could "
                               "not be completed because the input matrix is singular.",
                               info);
            break;
        }
        if (A->dtype == JG_F32)
            sgetri_(&ni, buf, &ni, ipiv, work, &lwork, &info);
        else
            dgetri_(&ni, buf, &ni, ipiv, work, &lwork, &info);
        if (info != 0) {
            rc = jg_errorf("linalg.inv: LAPACK getri failed (info %d)", info);
            break;
        }
        /* column-major inverse -> row-major output */
        char *dst = jg_tensor_ptr(Y) + (size_t)(b * n * n) * es;
        if (A->dtype == JG_F32) {
            const float *q = buf;
            float *y = (float *)dst;
            for (int64_t i = 0; i < n; i++)
                for (int64_t j = 0; j < n; j++)
                    y[i * n + j] = q[j * n + i];
        } else {
            const double *q = buf;
            double *y = (double *)dst;
            for (int64_t i = 0; i < n; i++)
                for (int64_t j = 0; j < n; j++)
                    y[i * n + j] = q[j * n + i];
        }
    }
    free(buf);
    free(ipiv);
    return rc;
}

/* sign and log|det| from the LU factors: the product of U's diagonal
 * signs and of the pivots' swaps, the sum of log|u_ii| (a zero u_ii: sign
 * 0, log|det| -inf, as PyTorch gives for a singular matrix). */
int jg_k_linalg_slogdet(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    (void)a;
    const jg_tensor *A = in[0];
    int64_t n = A->shape[A->ndim - 1];
    int64_t nb = jg_shape_numel(A->ndim - 2, A->shape);
    if (nb == 0)
        return 0;
    if (n > 46340)
        return jg_errorf("linalg.slogdet: matrices of %lld rows are too large", (long long)n);
    size_t es = jg_dtype_size(A->dtype);
    void *buf = malloc((size_t)(n * n) * es + 1);
    int *ipiv = malloc(sizeof(int) * (size_t)n + 1);
    if (!buf || !ipiv) {
        free(buf);
        free(ipiv);
        return jg_errorf("linalg.slogdet: out of memory");
    }
    for (int64_t b = 0; b < nb; b++) {
        double sign = 1.0, logabs = 0.0;
        if (n > 0) {
            load_colmajor(A, b, n, buf);
            getrf(A->dtype, (int)n, buf, ipiv);
        }
        if (A->dtype == JG_F32) {
            const float *q = buf;
            float s = 1.0f, l = 0.0f;
            for (int64_t i = 0; i < n; i++) {
                float u = q[i * n + i];
                if (ipiv[i] != i + 1)
                    s = -s;
                if (u < 0)
                    s = -s;
                if (u == 0)
                    s = 0.0f;
                l += logf(fabsf(u));
            }
            ((float *)jg_tensor_ptr(out[0]))[b] = s;
            ((float *)jg_tensor_ptr(out[1]))[b] = l;
        } else {
            const double *q = buf;
            for (int64_t i = 0; i < n; i++) {
                double u = q[i * n + i];
                if (ipiv[i] != i + 1)
                    sign = -sign;
                if (u < 0)
                    sign = -sign;
                if (u == 0)
                    sign = 0.0;
                logabs += log(fabs(u));
            }
            ((double *)jg_tensor_ptr(out[0]))[b] = sign;
            ((double *)jg_tensor_ptr(out[1]))[b] = logabs;
        }
    }
    free(buf);
    free(ipiv);
    return 0;
}

/* d(A^-1) = -A^-1 dA A^-1, so A's gradient is -Y^T G Y^T (Y = A^-1). */
int jg_vjp_linalg_inv(VJP_ARGS) {
    UNUSED_ARGS;
    if (!needs[0])
        return 0;
    jg_tensor *yt = jg_transpose(out[0], -2, -1);
    jg_tensor *p = yt ? jg_matmul(yt, gout[0]) : NULL;
    p = p ? jg_matmul(p, yt) : NULL;
    gin[0] = p ? jg_neg(p) : NULL;
    return gin[0] ? 0 : -1;
}

/* d log|det A| = tr(A^-1 dA): A's gradient is g A^-T (each batch matrix
 * scaled by its g); the sign is piecewise constant. */
int jg_vjp_linalg_slogdet(VJP_ARGS) {
    UNUSED_ARGS;
    if (!needs[0] || !gout[1])
        return 0;
    jg_tensor *g = gout[1];
    int64_t shape[JG_MAX_DIMS];
    memcpy(shape, g->shape, sizeof(int64_t) * (size_t)g->ndim);
    shape[g->ndim] = 1;
    shape[g->ndim + 1] = 1;
    jg_tensor *inv = jg_linalg_inv(in[0]);
    jg_tensor *it = inv ? jg_transpose(inv, -2, -1) : NULL;
    jg_tensor *gs = jg_reshape(g, g->ndim + 2, shape);
    gin[0] = it && gs ? jg_mul(gs, it) : NULL;
    return gin[0] ? 0 : -1;
}

int jg_infer_linalg_cholesky(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    (void)a;
    if (square_batch("linalg.cholesky", &in[0]) < 0)
        return -1;
    out[0] = in[0];
    return 0;
}

/* L with A = L L^T from A's lower triangle (potrf 'L' on the column-major
 * copy); the strict upper triangle of L is zero. */
int jg_k_linalg_cholesky(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    (void)a;
    const jg_tensor *A = in[0];
    int64_t n = A->shape[A->ndim - 1];
    int64_t nb = jg_shape_numel(A->ndim - 2, A->shape);
    if (n == 0 || nb == 0)
        return 0;
    if (n > 46340)
        return jg_errorf("linalg.cholesky: matrices of %lld rows are too large", (long long)n);
    size_t es = jg_dtype_size(A->dtype);
    void *buf = malloc((size_t)(n * n) * es);
    if (!buf)
        return jg_errorf("linalg.cholesky: out of memory");
    int ni = (int)n, rc = 0;
    for (int64_t b = 0; b < nb; b++) {
        load_colmajor(A, b, n, buf);
        int info = 0;
        if (A->dtype == JG_F32)
            spotrf_("L", &ni, buf, &ni, &info, 1);
        else
            dpotrf_("L", &ni, buf, &ni, &info, 1);
        if (info > 0) {
            if (A->ndim > 2)
                rc = jg_errorf("linalg.cholesky: (Batch element %lld): The factorization could "
                               "not be completed because the input is not positive-definite "
                               "(the leading minor of order %d is not positive-definite).",
                               (long long)b, info);
            else
                rc = jg_errorf("linalg.cholesky: The factorization could not be completed "
                               "because the input is not positive-definite (the leading minor "
                               "of order %d is not positive-definite).",
                               info);
            break;
        }
        char *dst = jg_tensor_ptr(out[0]) + (size_t)(b * n * n) * es;
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < n; j++) {
                if (A->dtype == JG_F32)
                    ((float *)dst)[i * n + j] = j <= i ? ((const float *)buf)[j * n + i] : 0.0f;
                else
                    ((double *)dst)[i * n + j] = j <= i ? ((const double *)buf)[j * n + i] : 0.0;
            }
    }
    free(buf);
    return rc;
}

/* PyTorch's cholesky_backward: phi = tril(L^T G) with its diagonal
 * halved, then L^-T phi L^-1, symmetrised. */
int jg_vjp_linalg_cholesky(VJP_ARGS) {
    UNUSED_ARGS;
    if (!needs[0])
        return 0;
    jg_tensor *L = out[0];
    int64_t n = L->shape[L->ndim - 1];
    jg_tensor *Lt = jg_transpose(L, -2, -1);
    jg_tensor *P = Lt ? jg_matmul(Lt, gout[0]) : NULL;
    jg_tensor *I = jg_eye(L->dtype, n, n);
    jg_tensor *half = P && I ? jg_mul_scalar(jg_mul(P, I), 0.5) : NULL;
    jg_tensor *phi = half ? jg_sub(jg_tril(P, 0), half) : NULL;
    jg_tensor *Li = phi ? jg_linalg_inv(L) : NULL;
    jg_tensor *Lit = Li ? jg_transpose(Li, -2, -1) : NULL;
    jg_tensor *G = Lit ? jg_matmul(jg_matmul(Lit, phi), Li) : NULL;
    jg_tensor *Gt = G ? jg_transpose(G, -2, -1) : NULL;
    gin[0] = Gt ? jg_mul_scalar(jg_add(G, Gt), 0.5) : NULL;
    return gin[0] ? 0 : -1;
}

/* eigh: attrs.i[0] 1 reads the upper triangle (UPLO='U'), else the lower */
int jg_infer_linalg_eigh(const jg_attrs *a, const jg_meta *in, jg_meta *out) {
    (void)a;
    const jg_meta *A = &in[0];
    if (A->ndim < 2)
        return jg_errorf("linalg.eigh: The input tensor A must have at least 2 dimensions.");
    int64_t r = A->shape[A->ndim - 2], c = A->shape[A->ndim - 1];
    if (r != c)
        return jg_errorf("linalg.eigh: A must be batches of square matrices, but they are %lld by "
                         "%lld matrices",
                         (long long)r, (long long)c);
    if (A->dtype != JG_F32 && A->dtype != JG_F64)
        return jg_errorf("\"linalg_eigh_cpu\" not implemented for '%s'",
                         jg_dtype_torch_name(A->dtype));
    memset(&out[0], 0, sizeof out[0]);
    out[0].dtype = A->dtype;
    out[0].ndim = A->ndim - 1;
    memcpy(out[0].shape, A->shape, sizeof(int64_t) * (size_t)out[0].ndim);
    out[1] = *A;
    return 0;
}

/* eigenvalues ascending and the eigenvectors as columns (syevd on the
 * column-major copy: the triangle read is A's own) */
int jg_k_linalg_eigh(const jg_attrs *a, jg_tensor *const *in, jg_tensor **out) {
    const jg_tensor *A = in[0];
    int64_t n = A->shape[A->ndim - 1];
    int64_t nb = jg_shape_numel(A->ndim - 2, A->shape);
    if (n == 0 || nb == 0)
        return 0;
    if (n > 46340)
        return jg_errorf("linalg.eigh: matrices of %lld rows are too large", (long long)n);
    const char *uplo = a->i[0] == 1 ? "U" : "L";
    int ni = (int)n, info = 0, lwork = -1, liwork = -1, iw = 0;
    size_t es = jg_dtype_size(A->dtype);
    double wq = 0, dd[2] = {0, 0};
    float wqf = 0, df[2] = {0, 0};
    /* workspace query */
    if (A->dtype == JG_F32)
        ssyevd_("V", uplo, &ni, df, &ni, df + 1, &wqf, &lwork, &iw, &liwork, &info, 1, 1);
    else
        dsyevd_("V", uplo, &ni, dd, &ni, dd + 1, &wq, &lwork, &iw, &liwork, &info, 1, 1);
    lwork = A->dtype == JG_F32 ? (int)wqf : (int)wq;
    liwork = iw;
    if (lwork < 1)
        lwork = 1 + 6 * ni + 2 * ni * ni;
    if (liwork < 1)
        liwork = 3 + 5 * ni;
    void *buf = malloc((size_t)(n * n) * es);
    void *w = malloc((size_t)n * es);
    void *work = malloc((size_t)lwork * es);
    int *iwork = malloc(sizeof(int) * (size_t)liwork);
    int rc = 0;
    if (!buf || !w || !work || !iwork) {
        rc = jg_errorf("linalg.eigh: out of memory");
        nb = 0;
    }
    for (int64_t b = 0; b < nb; b++) {
        load_colmajor(A, b, n, buf);
        if (A->dtype == JG_F32)
            ssyevd_("V", uplo, &ni, buf, &ni, w, work, &lwork, iwork, &liwork, &info, 1, 1);
        else
            dsyevd_("V", uplo, &ni, buf, &ni, w, work, &lwork, iwork, &liwork, &info, 1, 1);
        if (info != 0) {
            rc = jg_errorf("linalg.eigh: The algorithm failed to converge because the input "
                           "matrix is ill-conditioned or has too many repeated eigenvalues "
                           "(error code: %d).",
                           info);
            break;
        }
        memcpy(jg_tensor_ptr(out[0]) + (size_t)(b * n) * es, w, (size_t)n * es);
        char *dst = jg_tensor_ptr(out[1]) + (size_t)(b * n * n) * es;
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < n; j++) {
                if (A->dtype == JG_F32)
                    ((float *)dst)[i * n + j] = ((const float *)buf)[j * n + i];
                else
                    ((double *)dst)[i * n + j] = ((const double *)buf)[j * n + i];
            }
    }
    free(buf);
    free(w);
    free(work);
    free(iwork);
    return rc;
}

/* PyTorch's linalg_eig_backward for a symmetric A: with X = V^T gV,
 * gA = V (diag(gL) + skew(X) / E) V^T, E_ij = L_j - L_i (1 on the
 * diagonal, where skew(X) is 0); repeated eigenvalues give inf / NaN, as
 * PyTorch's. */
int jg_vjp_linalg_eigh(VJP_ARGS) {
    UNUSED_ARGS;
    if (!needs[0])
        return 0;
    jg_tensor *L = out[0], *V = out[1], *gL = gout[0], *gV = gout[1];
    int nd = L->ndim;
    int64_t n = L->shape[nd - 1];
    int64_t row[JG_MAX_DIMS], col[JG_MAX_DIMS];
    memcpy(row, L->shape, sizeof(int64_t) * (size_t)nd);
    memcpy(col, L->shape, sizeof(int64_t) * (size_t)nd);
    row[nd - 1] = 1;
    row[nd] = n;
    col[nd] = 1;
    jg_tensor *I = jg_eye(L->dtype, n, n);
    jg_tensor *Vt = jg_transpose(V, -2, -1);
    jg_tensor *M = NULL;
    if (!I || !Vt)
        return -1;
    if (gV) {
        jg_tensor *X = jg_matmul(Vt, gV);
        jg_tensor *K = X ? jg_mul_scalar(jg_sub(X, jg_transpose(X, -2, -1)), 0.5) : NULL;
        jg_tensor *E = jg_sub(jg_reshape(L, nd + 1, row), jg_reshape(L, nd + 1, col));
        M = K && E ? jg_div(K, jg_add(E, I)) : NULL;
        if (!M)
            return -1;
    }
    if (gL) {
        jg_tensor *D = jg_mul(jg_reshape(gL, nd + 1, col), I);
        M = D && M ? jg_add(M, D) : D;
        if (!M)
            return -1;
    }
    gin[0] = jg_matmul(jg_matmul(V, M), Vt);
    return gin[0] ? 0 : -1;
}

int jg_linalg_eigh(jg_tensor *a, bool upper, jg_tensor **eigenvalues, jg_tensor **eigenvectors) {
    if (!a || !eigenvalues || !eigenvectors)
        return jg_errorf("jg_linalg_eigh: NULL argument");
    jg_attrs at = {.n = 1};
    at.i[0] = upper ? 1 : 0;
    jg_tensor *out[2];
    if (jg_op_call(JG_OP_LINALG_EIGH, &at, &a, out) < 0)
        return -1;
    *eigenvalues = out[0];
    *eigenvectors = out[1];
    return 0;
}

jg_tensor *jg_linalg_cholesky(jg_tensor *a) {
    if (!a)
        return jg_errorf_null("jg_linalg_cholesky: NULL argument");
    return jg_op1(JG_OP_LINALG_CHOLESKY, &(jg_attrs){0}, a, NULL);
}

jg_tensor *jg_linalg_inv(jg_tensor *a) {
    if (!a)
        return jg_errorf_null("jg_linalg_inv: NULL argument");
    return jg_op1(JG_OP_LINALG_INV, &(jg_attrs){0}, a, NULL);
}

int jg_linalg_slogdet(jg_tensor *a, jg_tensor **sign, jg_tensor **logabsdet) {
    if (!a || !sign || !logabsdet)
        return jg_errorf("jg_linalg_slogdet: NULL argument");
    jg_tensor *out[2];
    if (jg_op_call(JG_OP_LINALG_SLOGDET, &(jg_attrs){0}, &a, out) < 0)
        return -1;
    *sign = out[0];
    *logabsdet = out[1];
    return 0;
}
