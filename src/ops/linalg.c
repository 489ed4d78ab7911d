/* matmul with NumPy/PyTorch semantics: 1-D . 1-D (dot, 0-d result), 2-D .
 * 2-D, 1-D . 2-D and 2-D . 1-D (the 1-D side gets a unit dim that is then
 * dropped), and N-D with broadcast batch dims.  The kernel calls OpenBLAS
 * gemm per batch matrix (or once, when the batch folds into the rows), and
 * copies an operand only when no BLAS layout describes its strides (a
 * transposed operand goes in as CblasTrans).
 *
 * dtypes: the row is JG_OPF_PROMOTE | JG_OPF_FLOAT, so mixed f32/f64 promote
 * to f64 (PyTorch refuses mixed dtypes) and int64 operands are computed in
 * float32 (PyTorch has an integer matmul on CPU; jitgrad has no integer
 * gemm and keeps the float result instead). */
#include "core/blas.h"
#include "core/iter.h"
#include "core/parallel.h"
#include "ops/decls.h"

#include <cblas.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* PyTorch's matmul (1.13) folds an N-D operand against a 1-D/2-D one into a
 * single mm/mv, so its error messages speak of the folded sizes; these
 * reproduce them. */
int jg_infer_matmul(const jg_attrs *at, const jg_meta *in, jg_meta *out) {
    (void)at;
    const jg_meta *A = &in[0], *B = &in[1];
    int na = A->ndim, nb = B->ndim;
    if (na == 0 || nb == 0)
        return jg_errorf("both arguments to matmul need to be at least 1D, but they are %dD and "
                         "%dD",
                         na, nb);
    if (A->dtype != B->dtype)
        return jg_errorf("expected scalar type %s but found %s", jg_dtype_torch_name(A->dtype),
                         jg_dtype_torch_name(B->dtype));
    int64_t ka = A->shape[na - 1], kb = nb == 1 ? B->shape[0] : B->shape[nb - 2];
    int64_t n = na >= 2 ? A->shape[na - 2] : 1, p = nb >= 2 ? B->shape[nb - 1] : 1;
    memset(&out[0], 0, sizeof out[0]);
    out[0].dtype = A->dtype;
    if (na == 1 && nb == 1) {
        if (ka != kb)
            return jg_errorf("inconsistent tensor size, expected tensor [%lld] and src [%lld] to "
                             "have the same number of elements, but got %lld and %lld elements "
                             "respectively",
                             (long long)ka, (long long)kb, (long long)ka, (long long)kb);
        return 0;
    }
    if (nb <= 2 && na <= 2) {
        if (ka != kb) {
            if (nb == 1)
                return jg_errorf("size mismatch, got %lld, %lldx%lld,%lld", (long long)n,
                                 (long long)n, (long long)ka, (long long)kb);
            return jg_errorf("mat1 and mat2 shapes cannot be multiplied (%lldx%lld and %lldx%lld)",
                             (long long)n, (long long)ka, (long long)kb, (long long)p);
        }
    } else if (nb <= 2) { /* N-D . 1-D/2-D: A folds to [rows, k] */
        int64_t rows = jg_shape_numel(na - 1, A->shape);
        if (ka != kb) {
            if (nb == 1)
                return jg_errorf("size mismatch, got %lld, %lldx%lld,%lld", (long long)rows,
                                 (long long)rows, (long long)ka, (long long)kb);
            return jg_errorf("mat1 and mat2 shapes cannot be multiplied (%lldx%lld and %lldx%lld)",
                             (long long)rows, (long long)ka, (long long)kb, (long long)p);
        }
    } else if (na <= 2) { /* 1-D/2-D . N-D: B^T folds to [rows, k] */
        int64_t rows = jg_shape_numel(nb - 2, B->shape) * p;
        if (ka != kb) {
            if (na == 1)
                return jg_errorf("size mismatch, got %lld, %lldx%lld,%lld", (long long)rows,
                                 (long long)rows, (long long)kb, (long long)ka);
            return jg_errorf("mat1 and mat2 shapes cannot be multiplied (%lldx%lld and %lldx%lld)",
                             (long long)rows, (long long)kb, (long long)ka, (long long)n);
        }
    }
    /* batch dims broadcast */
    jg_meta ba = {0}, bb = {0}, bo;
    ba.ndim = na > 2 ? na - 2 : 0;
    bb.ndim = nb > 2 ? nb - 2 : 0;
    memcpy(ba.shape, A->shape, sizeof(int64_t) * (size_t)ba.ndim);
    memcpy(bb.shape, B->shape, sizeof(int64_t) * (size_t)bb.ndim);
    if (jg_broadcast_shapes(&ba, &bb, &bo) < 0)
        return -1;
    if (ka != kb) { /* both batched */
        long long nbat = (long long)jg_shape_numel(bo.ndim, bo.shape);
        return jg_errorf("Expected size for first two dimensions of batch2 tensor to be: [%lld, "
                         "%lld] but got: [%lld, %lld].",
                         nbat, (long long)ka, nbat, (long long)kb);
    }
    out[0].ndim = bo.ndim;
    memcpy(out[0].shape, bo.shape, sizeof(int64_t) * (size_t)bo.ndim);
    if (na >= 2)
        out[0].shape[out[0].ndim++] = n;
    if (nb >= 2)
        out[0].shape[out[0].ndim++] = p;
    return 0;
}

/* ---- kernel ---- */

/* A batch of matrices inside a tensor: rows x cols with element strides. */
typedef struct {
    jg_tensor *t;    /* the tensor read (the operand, or a contiguous copy) */
    jg_tensor *copy; /* owned copy, or NULL */
    int nbatch;      /* leading batch dims of t */
    int64_t rows, cols, rs, cs;
    CBLAS_TRANSPOSE tr;
    int64_t ld;
} operand;

/* A row-major BLAS description of a rows x cols matrix with strides rs, cs,
 * or false when none exists (then the operand is copied). */
static bool blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, CBLAS_TRANSPOSE *tr,
                        int64_t *ld) {
    int64_t mc = cols > 1 ? cols : 1, mr = rows > 1 ? rows : 1;
    if ((cols <= 1 || cs == 1) && (rows <= 1 || rs >= mc)) {
        *tr = CblasNoTrans;
        *ld = rows <= 1 ? mc : rs;
        return true;
    }
    if ((rows <= 1 || rs == 1) && (cols <= 1 || cs >= mr)) {
        *tr = CblasTrans;
        *ld = cols <= 1 ? mr : cs;
        return true;
    }
    return false;
}

/* is_a: a 1-D operand is a row [1, k]; else a column [k, 1]. */
static int operand_init(operand *o, jg_tensor *t, bool is_a) {
    memset(o, 0, sizeof *o);
    for (int attempt = 0; attempt < 2; attempt++) {
        o->t = t;
        if (t->ndim == 1) {
            o->nbatch = 0;
            o->rows = is_a ? 1 : t->shape[0];
            o->cols = is_a ? t->shape[0] : 1;
            o->rs = is_a ? 0 : t->stride[0];
            o->cs = is_a ? t->stride[0] : 1;
        } else {
            o->nbatch = t->ndim - 2;
            o->rows = t->shape[t->ndim - 2];
            o->cols = t->shape[t->ndim - 1];
            o->rs = t->stride[t->ndim - 2];
            o->cs = t->stride[t->ndim - 1];
        }
        if (blas_layout(o->rows, o->cols, o->rs, o->cs, &o->tr, &o->ld))
            return 0;
        JG_ASSERT(attempt == 0);
        if (!(o->copy = jg_tensor_alloc(t->dtype, t->ndim, t->shape)))
            return -1;
        jg_copy_data(o->copy, t);
        t = o->copy;
    }
    return 0;
}

/* Whether a's batch dims and rows merge into one row dim of stride a->ld
 * (NoTrans layout), so the whole batch is a single gemm. */
static bool foldable(const operand *o) {
    if (o->tr != CblasNoTrans)
        return false;
    const jg_tensor *t = o->t;
    int64_t expect = -1;
    for (int d = t->ndim - 2; d >= 0; d--) {
        if (t->shape[d] == 1)
            continue;
        if (expect >= 0 && t->stride[d] != expect)
            return false;
        if (expect < 0 && t->stride[d] != o->ld)
            return false;
        expect = t->stride[d] * t->shape[d];
    }
    return true;
}

static void gemm(jg_dtype dt, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n,
                 int64_t k, const char *pa, int64_t lda, const char *pb, int64_t ldb, char *pc,
                 int64_t ldc) {
    if (dt == JG_F32)
        cblas_sgemm(CblasRowMajor, ta, tb, (blasint)m, (blasint)n, (blasint)k, 1.0f,
                    (const float *)pa, (blasint)lda, (const float *)pb, (blasint)ldb, 0.0f,
                    (float *)pc, (blasint)ldc);
    else
        cblas_dgemm(CblasRowMajor, ta, tb, (blasint)m, (blasint)n, (blasint)k, 1.0,
                    (const double *)pa, (blasint)lda, (const double *)pb, (blasint)ldb, 0.0,
                    (double *)pc, (blasint)ldc);
}

/* Large products are split into blocks of C's rows or columns, one
 * single-threaded gemm each, on jitgrad's pool.  OpenBLAS's own threads are
 * not used: its result at some shapes depends on its thread count, and its
 * workers, which spin after each call, would compete with the pool's for
 * the cores.  The blocks depend only on the shape (never on the thread
 * count), so the bits are the same for any number of threads.  (They
 * must be: OpenBLAS's AVX2 and AVX-512 kernels give a block of C's rows or
 * columns other bits than the whole product, at most shapes, even for
 * blocks of 256; only its SSE3 kernels do not.  The test_mlp_step_haswell
 * run checks the bits on the AVX2 kernels.)  The split dim is the one whose
 * blocks re-read the smaller operand (columns of C re-pack A, rows re-pack
 * B).  Blocks are equal and a multiple of 16 wide: 2 of at least
 * GEMM_SPLIT_MACS multiply-adds, 4 or 8 only when each has at least
 * GEMM_BLOCK_MACS and is GEMM_BLOCK_MIN wide (every block costs a call and
 * a re-pack, which a single thread pays too: 8 blocks of 128 columns cost
 * 256x1024x1024 about 5% over one call, 4 of 256 about 1%). */
#define GEMM_SPLIT_MACS ((int64_t)1 << 21)
#define GEMM_BLOCK_MACS ((int64_t)1 << 23)
#define GEMM_BLOCK_MIN 256
#define GEMM_MAX_BLOCKS 8

typedef struct {
    jg_dtype dt;
    CBLAS_TRANSPOSE ta, tb;
    int64_t m, n, k, lda, ldb, ldc, width, es;
    bool cols; /* split C's columns (else its rows) */
    const char *pa, *pb;
    char *pc;
} gemm_split;

static void gemm_block(void *ctx, int64_t lo, int64_t hi) {
    const gemm_split *g = ctx;
    for (int64_t b = lo; b < hi; b++) {
        int64_t at = b * g->width, dim = g->cols ? g->n : g->m;
        int64_t len = dim - at < g->width ? dim - at : g->width;
        if (g->cols) /* B's columns at..at+len: B's row offset when transposed */
            gemm(g->dt, g->ta, g->tb, g->m, len, g->k, g->pa, g->lda,
                 g->pb + (g->tb == CblasTrans ? at * g->ldb : at) * g->es, g->ldb,
                 g->pc + at * g->es, g->ldc);
        else /* A's rows at..at+len: A's column offset when transposed */
            gemm(g->dt, g->ta, g->tb, len, g->n, g->k,
                 g->pa + (g->ta == CblasTrans ? at : at * g->lda) * g->es, g->lda, g->pb, g->ldb,
                 g->pc + at * g->ldc * g->es, g->ldc);
    }
}

/* C = A B for one matrix (row-major), split as described above. */
static void gemm_par(jg_dtype dt, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n,
                     int64_t k, const char *pa, int64_t lda, const char *pb, int64_t ldb, char *pc,
                     int64_t ldc) {
    jg_blas_single_thread();
    gemm_split g = {dt,     ta, tb, m, n, k, lda, ldb, ldc, 0, (int64_t)jg_dtype_size(dt),
                    m <= n, pa, pb, pc};
    int64_t dim = g.cols ? n : m, macs = m * n * k, blocks = 1;
    while (blocks < GEMM_MAX_BLOCKS &&
           macs / (blocks * 2) >= (blocks == 1 ? GEMM_SPLIT_MACS : GEMM_BLOCK_MACS) &&
           dim / (blocks * 2) >= (blocks == 1 ? 16 : GEMM_BLOCK_MIN))
        blocks *= 2;
    if (blocks == 1) {
        gemm(dt, ta, tb, m, n, k, pa, lda, pb, ldb, pc, ldc);
        return;
    }
    g.width = ((dim + blocks - 1) / blocks + 15) / 16 * 16;
    jg_parallel_for((dim + g.width - 1) / g.width, 1, gemm_block, &g);
}

/* A small f32 A B^T computed as A times B^T copied row-major, where
 * OpenBLAS multiplies a small A B without packing and is slower at A B^T
 * (core/blas.c): each matrix product m n k <= SMALL_NT_MNK (OpenBLAS's
 * bound for its unpacked kernels) with both output dims at least 8 (a row
 * or column times a matrix gains nothing).  One buffer serves a batch's
 * products one after the other.  Eager and compiled code both run this
 * kernel, so they take the same path (and bits) for a shape. */
#define SMALL_NT_MNK 1000000
typedef struct {
    jg_blas_somatcopy_fn transpose;
    float *bt; /* k x n */
} small_nt;

static bool small_nt_init(small_nt *s, jg_dtype dt, const operand *A, const operand *B, int64_t m,
                          int64_t n, int64_t k) {
    s->bt = NULL;
    if (dt != JG_F32 || A->tr != CblasNoTrans || B->tr != CblasTrans || m < 8 || n < 8 ||
        m * n * k > SMALL_NT_MNK || !(s->transpose = jg_blas_small_nt_transpose()))
        return false;
    s->bt = malloc((size_t)(k * n) * sizeof(float));
    return s->bt != NULL; /* without memory: the A B^T product, as usual */
}

/* B is stored n x k (B^T) with row stride ldb */
static void small_nt_gemm(const small_nt *s, int64_t m, int64_t n, int64_t k, const char *pa,
                          int64_t lda, const char *pb, int64_t ldb, char *pc, int64_t ldc) {
    s->transpose(CblasRowMajor, CblasTrans, (int)n, (int)k, 1.0f, (const float *)pb, (int)ldb,
                 s->bt, (int)n);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)m, (blasint)n, (blasint)k, 1.0f,
                (const float *)pa, (blasint)lda, s->bt, (blasint)n, 0.0f, (float *)pc,
                (blasint)ldc);
}

int jg_k_matmul(const jg_attrs *at, jg_tensor *const *in, jg_tensor **out) {
    (void)at;
    jg_tensor *y = out[0];
    JG_ASSERT(y->dtype == JG_F32 || y->dtype == JG_F64);
    int64_t es = (int64_t)jg_dtype_size(y->dtype);
    if (y->numel == 0)
        return 0;
    int64_t k = in[0]->shape[in[0]->ndim - 1];
    if (k == 0) {
        memset(jg_tensor_ptr(y), 0, (size_t)(y->numel * es));
        return 0;
    }
    operand A, B;
    if (operand_init(&A, in[0], true) < 0)
        return -1;
    if (operand_init(&B, in[1], false) < 0) {
        jg_release(A.copy);
        return -1;
    }
    int64_t n = A.rows, p = B.cols;
    int rc = 0;
    if (n > INT_MAX || p > INT_MAX || k > INT_MAX || A.ld > INT_MAX || B.ld > INT_MAX ||
        y->numel / p > INT_MAX) {
        rc = jg_errorf("matmul(): a dimension exceeds what BLAS can index (%d)", INT_MAX);
        goto done;
    }
    /* out's batch dims: everything before its matrix dims */
    int ybatch = y->ndim - (in[0]->ndim >= 2) - (in[1]->ndim >= 2);
    const char *pa = jg_tensor_ptr(A.t), *pb = jg_tensor_ptr(B.t);
    char *pc = jg_tensor_ptr(y);
    small_nt snt;
    if (B.nbatch == 0 && foldable(&A)) {
        if (small_nt_init(&snt, y->dtype, &A, &B, y->numel / p, p, k)) {
            jg_blas_single_thread();
            small_nt_gemm(&snt, y->numel / p, p, k, pa, A.ld, pb, B.ld, pc, p);
            free(snt.bt);
        } else {
            gemm_par(y->dtype, A.tr, B.tr, y->numel / p, p, k, pa, A.ld, pb, B.ld, pc, p);
        }
        goto done;
    }
    /* element strides of A and B along out's batch dims (0 where broadcast) */
    int64_t sa[JG_MAX_DIMS], sb[JG_MAX_DIMS], idx[JG_MAX_DIMS] = {0};
    for (int d = 0; d < ybatch; d++) {
        int da = d - (ybatch - A.nbatch), db = d - (ybatch - B.nbatch);
        sa[d] = da >= 0 && A.t->shape[da] != 1 ? A.t->stride[da] : 0;
        sb[d] = db >= 0 && B.t->shape[db] != 1 ? B.t->stride[db] : 0;
    }
    int64_t nbat = jg_shape_numel(ybatch, y->shape);
    bool small = small_nt_init(&snt, y->dtype, &A, &B, n, p, k);
    if (small)
        jg_blas_single_thread();
    for (int64_t bi = 0; bi < nbat; bi++) {
        int64_t oa = 0, ob = 0;
        for (int d = 0; d < ybatch; d++) {
            oa += idx[d] * sa[d];
            ob += idx[d] * sb[d];
        }
        if (small)
            small_nt_gemm(&snt, n, p, k, pa + oa * es, A.ld, pb + ob * es, B.ld,
                          pc + bi * n * p * es, p);
        else
            gemm_par(y->dtype, A.tr, B.tr, n, p, k, pa + oa * es, A.ld, pb + ob * es, B.ld,
                     pc + bi * n * p * es, p);
        for (int d = ybatch - 1; d >= 0; d--) {
            if (++idx[d] < y->shape[d])
                break;
            idx[d] = 0;
        }
    }
    free(snt.bt);
done:
    jg_release(A.copy);
    jg_release(B.copy);
    return rc;
}

/* ---- VJP ----
 * dot: grad_a = g * b, grad_b = g * a.  Otherwise, with the 1-D operands
 * seen as [1, k] / [k, 1] and g given its unit dims back:
 *   grad_a = g @ b^T,   grad_b = a^T @ g,
 * each summed over the batch dims its operand was broadcast along.  When b
 * has no batch dims, grad_b folds a's batch into the rows, as PyTorch's
 * folded matmul does: a.reshape(-1, k)^T @ g.reshape(-1, p).  An operand
 * that was column-major where PyTorch calls mm (flags in a->i[0], set by
 * jg_matmul) gets its gradient as PyTorch's mm backward computes it,
 * column-major: grad_a = (b g^T)^T, grad_b = (g^T a)^T.  For b = w.t() that
 * makes w's gradient row-major, w's own layout. */
static jg_tensor *matmul_t(jg_tensor *m1, jg_tensor *m2) { /* (m1 @ m2)^T, a view */
    jg_tensor *p = m1 ? jg_matmul(m1, m2) : NULL;
    return p ? jg_transpose(p, 0, 1) : NULL;
}

int jg_vjp_matmul(VJP_ARGS) {
    (void)out;
    int flags = a && a->n ? (int)a->i[0] : 0;
    jg_tensor *x = in[0], *w = in[1], *g = gout[0];
    const jg_meta *ma = &meta[0], *mb = &meta[1];
    if (ma->ndim == 1 && mb->ndim == 1) {
        if (needs[0] && !(gin[0] = jg_mul(g, w)))
            return -1;
        if (needs[1] && !(gin[1] = jg_mul(g, x)))
            return -1;
        return 0;
    }
    /* x or w is NULL when the other operand needs no gradient (the node
     * saves only what it reads): shapes come from the metadata */
    int64_t k = ma->shape[ma->ndim - 1];
    int xnd = ma->ndim == 1 ? 2 : ma->ndim;
    int64_t xshape[JG_MAX_DIMS] = {1, k};
    if (ma->ndim > 1)
        memcpy(xshape, ma->shape, sizeof(int64_t) * (size_t)xnd);
    if (x && ma->ndim == 1 && !(x = jg_reshape(x, 2, (const int64_t[]){1, k})))
        return -1;
    if (w && mb->ndim == 1 && !(w = jg_reshape(w, 2, (const int64_t[]){k, 1})))
        return -1;
    int wnd = mb->ndim == 1 ? 2 : mb->ndim;
    int64_t wshape[JG_MAX_DIMS] = {k, 1};
    if (mb->ndim > 1)
        memcpy(wshape, mb->shape, sizeof(int64_t) * (size_t)wnd);
    if (ma->ndim == 1 || mb->ndim == 1) { /* g gets its unit dims back */
        int64_t gs[JG_MAX_DIMS];
        int gn = g->ndim;
        memcpy(gs, g->shape, sizeof(int64_t) * (size_t)gn);
        if (ma->ndim == 1) { /* insert n = 1 before p (or at the end) */
            int pos = mb->ndim == 1 ? gn : gn - 1;
            memmove(&gs[pos + 1], &gs[pos], sizeof(int64_t) * (size_t)(gn - pos));
            gs[pos] = 1;
            gn++;
        }
        if (mb->ndim == 1)
            gs[gn++] = 1;
        if (!(g = jg_reshape(g, gn, gs)))
            return -1;
    }
    if (needs[0]) {
        jg_tensor *ga = (flags & JG_MATMUL_A_COL_MAJOR) ? matmul_t(w, jg_transpose(g, 0, 1))
                                                        : jg_matmul(g, jg_transpose(w, -1, -2));
        ga = ga ? jg_sum_to(ga, xnd, xshape) : NULL;
        if (ga && ma->ndim == 1)
            ga = jg_reshape(ga, 1, ma->shape);
        if (!(gin[0] = ga))
            return -1;
    }
    if (needs[1]) {
        jg_tensor *gb;
        if (wnd == 2 && xnd > 2) {
            int64_t rows = jg_shape_numel(x->ndim - 1, x->shape), p = wshape[1];
            jg_tensor *x2 = jg_reshape(x, 2, (const int64_t[]){rows, k});
            jg_tensor *g2 = x2 ? jg_reshape(g, 2, (const int64_t[]){rows, p}) : NULL;
            if (!g2)
                gb = NULL;
            else if (flags & JG_MATMUL_B_COL_MAJOR)
                gb = matmul_t(jg_transpose(g2, 0, 1), x2);
            else
                gb = jg_matmul(jg_transpose(x2, 0, 1), g2);
        } else if ((flags & JG_MATMUL_B_COL_MAJOR) && xnd == 2) {
            gb = matmul_t(jg_transpose(g, 0, 1), x);
        } else {
            gb = jg_matmul(jg_transpose(x, -1, -2), g);
            gb = gb ? jg_sum_to(gb, wnd, wshape) : NULL;
        }
        if (gb && mb->ndim == 1)
            gb = jg_reshape(gb, 1, mb->shape);
        if (!(gin[1] = gb))
            return -1;
    }
    return 0;
}
