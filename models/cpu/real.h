/* real.h — the CPU backend's BLAS calls for the type `real` (models/real.h:
 * float in the product, double in the gradient tests). */
#ifndef SE3_REAL_H
#define SE3_REAL_H

#include <cblas.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "models/real.h"

#ifdef SE3_REAL_F64
#define nn_gemm cblas_dgemm
#else
#define nn_gemm cblas_sgemm
#endif

/* C (m x n) = alpha op(A) op(B) + beta C, all row-major; op = transpose when
 * ta / tb. lda, ldb, ldc are the row strides of A, B, C as stored. */
static inline void nn_mm(int ta, int tb, int m, int n, int k, real alpha, const real *A, int lda, const real *B,
                         int ldb, real beta, real *C, int ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) { /* BLAS leaves C alone for k = 0 only when beta = 1 */
    for (int i = 0; i < m; i++)
      for (int j = 0; j < n; j++)
        C[(long)i * ldc + j] = beta == 0 ? 0 : beta * C[(long)i * ldc + j];
    return;
  }
#ifdef _OPENMP
  /* One pool of threads: OpenBLAS runs single-threaded (nn_blas_init) and a
   * large product is cut into row blocks, one per OpenMP thread. The cuts
   * fall on multiples of 96 rows: OpenBLAS computes a row with the kernel
   * of its place in its tile of rows (2 to 32 of them, counted from the
   * start of the call; the last, partial tile another way), so a cut
   * elsewhere would move rows between kernels and change their rounding
   * with the number of threads. On multiples of every tile size a row's
   * result is the same bits on any number of threads. */
  if (m >= 256 && (double)m * n * k >= 4e6 && !omp_in_parallel()) {
#pragma omp parallel
    {
      long t = omp_get_thread_num(), T = omp_get_num_threads(), tiles = (m + 95) / 96;
      int r0 = (int)(tiles * t / T * 96 < m ? tiles * t / T * 96 : m);
      int r1 = (int)(tiles * (t + 1) / T * 96 < m ? tiles * (t + 1) / T * 96 : m);
      if (r1 > r0)
        nn_gemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, r1 - r0, n, k, alpha,
                ta ? A + r0 : A + (long)r0 * lda, lda, B, ldb, beta, C + (long)r0 * ldc, ldc);
    }
    return;
  }
#endif
  nn_gemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, A, lda, B, ldb,
          beta, C, ldc);
}

/* OpenBLAS's own threads would compete with OpenMP's for the cores (each
 * spins while the other works): the model runs BLAS single-threaded inside
 * OpenMP's threads (nn_mm). Called by se3_model_init. */
static inline void nn_blas_init(void) { openblas_set_num_threads(1); }

#endif
