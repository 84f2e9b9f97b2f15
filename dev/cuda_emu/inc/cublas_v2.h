/* The emulator's cuBLAS (dev/cuda_emu/run.sh): what models/cuda/ calls. */
#ifndef SE3_CUDA_EMU_CUBLAS_H
#define SE3_CUDA_EMU_CUBLAS_H
#include "cuda_runtime.h"
typedef void *cublasHandle_t;
typedef int cublasStatus_t;
enum { CUBLAS_STATUS_SUCCESS = 0 };
typedef enum { CUBLAS_OP_N, CUBLAS_OP_T } cublasOperation_t;
typedef enum { CUBLAS_DEFAULT_MATH, CUBLAS_TF32_TENSOR_OP_MATH } cublasMath_t;
inline cublasStatus_t cublasCreate(cublasHandle_t *h) {
  *h = (void *)1;
  return 0;
}
inline cublasStatus_t cublasDestroy(cublasHandle_t) { return 0; }
inline cublasStatus_t cublasSetStream(cublasHandle_t, cudaStream_t) { return 0; }
inline cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t) { return 0; }
inline const char *cublasGetStatusString(cublasStatus_t) { return "emulated"; }
inline const char *cublasGetStatusName(cublasStatus_t) { return "EMU"; }
/* column-major C (m x n) = alpha op(A) op(B) + beta C; C not read when beta = 0 */
inline cublasStatus_t cublasSgemm(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                  const float *alpha, const float *A, int lda, const float *B, int ldb,
                                  const float *beta, float *C, int ldc) {
  if (lda < (ta == CUBLAS_OP_N ? m : k) || ldb < (tb == CUBLAS_OP_N ? k : n) || ldc < m || lda < 1 || ldb < 1) {
    fprintf(stderr, "cublasSgemm: bad leading dimension\n");
    abort();
  }
  for (int j = 0; j < n; j++)
    for (int i = 0; i < m; i++) {
      double s = 0;
      for (int p = 0; p < k; p++) {
        float a = ta == CUBLAS_OP_N ? A[i + (size_t)p * lda] : A[p + (size_t)i * lda];
        float b = tb == CUBLAS_OP_N ? B[p + (size_t)j * ldb] : B[j + (size_t)p * ldb];
        s += (double)a * b;
      }
      float *c = &C[i + (size_t)j * ldc];
      *c = (float)(*alpha * s + (*beta == 0 ? 0.0 : (double)*beta * *c));
    }
  return 0;
}

#endif
