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

#endif
