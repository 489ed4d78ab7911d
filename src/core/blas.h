/* OpenBLAS's kernels for this CPU (see blas.c). */
#ifndef JG_CORE_BLAS_H
#define JG_CORE_BLAS_H

/* Runs the kernel selection once (blas.c); later calls return at once.
 * The library's constructor calls it, and so does every path into BLAS
 * (jg_blas_single_thread), so it is done before the first gemm. */
void jg_blas_init(void);

/* The kernels OpenBLAS runs ("SkylakeX", "Haswell", "Prescott" ...), or
 * NULL for a BLAS that does not say (reference BLAS, an OpenBLAS built
 * for one CPU without gotoblas_corename). */
const char *jg_blas_corename(void);

/* cblas_somatcopy(order, trans, rows, cols, alpha, a, lda, b, ldb) */
typedef void (*jg_blas_somatcopy_fn)(int, int, int, int, float, const float *, int, float *, int);

/* OpenBLAS's transpose when its kernels multiply a small row-major A B
 * faster than A B^T, so that copying B^T first pays (see blas.c); else
 * NULL. */
jg_blas_somatcopy_fn jg_blas_small_nt_transpose(void);

#endif
