/* The emulator's cuBLAS (dev/cuda_emu/run.sh): what models/cuda/ calls. */
#ifndef SE3_CUDA_EMU_CUBLAS_H
#define SE3_CUDA_EMU_CUBLAS_H
#include "cuda_bf16.h"
#include "cuda_fp16.h"
#include "cuda_runtime.h"
typedef void *cublasHandle_t;
typedef int cublasStatus_t;
enum { CUBLAS_STATUS_SUCCESS = 0 };
typedef enum { CUBLAS_OP_N, CUBLAS_OP_T } cublasOperation_t;
typedef enum { CUBLAS_DEFAULT_MATH, CUBLAS_TF32_TENSOR_OP_MATH } cublasMath_t;
typedef enum { CUDA_R_32F, CUDA_R_16BF, CUDA_R_16F } cudaDataType;
typedef enum {
  CUBLAS_COMPUTE_32F,
  CUBLAS_COMPUTE_32F_FAST_TF32,
  CUBLAS_COMPUTE_32F_FAST_16BF,
  CUBLAS_COMPUTE_32F_FAST_16F
} cublasComputeType_t;
typedef enum { CUBLAS_GEMM_DEFAULT } cublasGemmAlgo_t;
/* the handle's math mode (one handle in the emulation) */
inline cublasMath_t &emu_math() {
  static cublasMath_t m = CUBLAS_DEFAULT_MATH;
  return m;
}
inline cublasStatus_t cublasCreate(cublasHandle_t *h) {
  *h = (void *)1;
  return 0;
}
inline cublasStatus_t cublasDestroy(cublasHandle_t) { return 0; }
inline cublasStatus_t cublasSetStream(cublasHandle_t, cudaStream_t s) {
  emu_stream_check(s, "cublasSetStream");
  emu_blas_stream() = s;
  return 0;
}
inline cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t m) {
  emu_math() = m;
  return 0;
}
/* a workspace of the caller's: 256-byte aligned, as cuBLAS asks */
inline cublasStatus_t cublasSetWorkspace(cublasHandle_t, void *ws, size_t bytes) {
  if ((!ws && bytes) || (uintptr_t)ws % 256) abort();
  return 0;
}
inline const char *cublasGetStatusString(cublasStatus_t) { return "emulated"; }
inline const char *cublasGetStatusName(cublasStatus_t) { return "EMU"; }
/* x with its significand cut to `bits` stored bits (round to nearest, ties
 * to even), as tensor cores take their inputs: 10 for TF32, 7 for bf16. */
inline float emu_round(float x, int bits) {
  if (bits >= 23 || !std::isfinite(x)) return x;
  uint32_t u;
  memcpy(&u, &x, 4);
  const int drop = 23 - bits;
  const uint32_t half = 1u << (drop - 1), lsb = (u >> drop) & 1u;
  u = (u + half - 1 + lsb) & ~((1u << drop) - 1);
  memcpy(&x, &u, 4);
  return x;
}
/* x as fp16 holds it: 10 significand bits, infinite beyond 65504 (after
 * rounding), subnormal below 2^-14 in steps of 2^-24 (bits = -1 below) */
inline float emu_half(float x) {
  if (!std::isfinite(x)) return x;
  float a = std::fabs(x);
  if (a < 6.103515625e-05f) /* subnormal: a multiple of 2^-24, ties to even */
    return std::copysign(std::nearbyint(a * 16777216.0f) / 16777216.0f, x);
  float r = emu_round(x, 10);
  return std::fabs(r) > 65504.0f ? std::copysign(INFINITY, x) : r;
}
inline float emu_in(float x, int bits) { return bits < 0 ? emu_half(x) : emu_round(x, bits); }
/* column-major C (m x n) = alpha op(A) op(B) + beta C; C not read when beta
 * = 0; A's and B's elements cut to `bits` significand bits (-1: fp16, with
 * its range), sums in double */
inline cublasStatus_t emu_gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float *alpha,
                               const float *A, int lda, const float *B, int ldb, const float *beta, float *C, int ldc,
                               int bits) {
  if (lda < (ta == CUBLAS_OP_N ? m : k) || ldb < (tb == CUBLAS_OP_N ? k : n) || ldc < m || lda < 1 || ldb < 1) {
    fprintf(stderr, "cublas gemm: bad leading dimension\n");
    abort();
  }
  for (int j = 0; j < n; j++)
    for (int i = 0; i < m; i++) {
      double s = 0;
      for (int p = 0; p < k; p++) {
        float a = ta == CUBLAS_OP_N ? A[i + (size_t)p * lda] : A[p + (size_t)i * lda];
        float b = tb == CUBLAS_OP_N ? B[p + (size_t)j * ldb] : B[j + (size_t)p * ldb];
        s += (double)emu_in(a, bits) * emu_in(b, bits);
      }
      float *c = &C[i + (size_t)j * ldc];
      *c = (float)(*alpha * s + (*beta == 0 ? 0.0 : (double)*beta * *c));
    }
  return 0;
}
/* Runs the product now, or records it while capturing: alpha and beta are
 * host values, read at the call (as cuBLAS does in host pointer mode), and
 * the math mode is the one of the call. */
inline cublasStatus_t emu_gemm_do(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float *alpha,
                                  const float *A, int lda, const float *B, int ldb, const float *beta, float *C,
                                  int ldc, int bits) {
  float al = *alpha, be = *beta;
  emu_do([=]() { emu_gemm(ta, tb, m, n, k, &al, A, lda, B, ldb, &be, C, ldc, bits); });
  return 0;
}
/* ---- arrays of bf16 or fp16 (what models/cuda/conv.cu's GEMM path stores) ---- */
inline float emu_ld(const void *p, cudaDataType t, size_t i) {
  return t == CUDA_R_16BF  ? __bfloat162float(((const __nv_bfloat16 *)p)[i])
         : t == CUDA_R_16F ? __half2float(((const __half *)p)[i])
                           : ((const float *)p)[i];
}
inline void emu_st(void *p, cudaDataType t, size_t i, float v) {
  if (t == CUDA_R_16BF)
    ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v);
  else if (t == CUDA_R_16F)
    ((__half *)p)[i] = __float2half_rn(v);
  else
    ((float *)p)[i] = v;
}
/* column-major C = alpha op(A) op(B) + beta C for every type combination
 * cuBLAS takes with CUBLAS_COMPUTE_32F: A and B of one type (their values
 * as stored: nothing rounded further), sums in double here, C rounded to
 * its type when written; `batch` products at strides sA, sB, sC */
inline void emu_gemm_typed(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float al, const void *A,
                           cudaDataType at, int lda, long long sA, const void *B, cudaDataType bt, int ldb,
                           long long sB, float be, void *C, cudaDataType ct, int ldc, long long sC, int batch) {
  if (at != bt || (at == CUDA_R_32F && ct != CUDA_R_32F)) {
    fprintf(stderr, "cublas gemm: A and B of different types, or fp32 inputs with a half output\n");
    abort();
  }
  if (lda < (ta == CUBLAS_OP_N ? m : k) || ldb < (tb == CUBLAS_OP_N ? k : n) || ldc < m || lda < 1 || ldb < 1) {
    fprintf(stderr, "cublas gemm: bad leading dimension\n");
    abort();
  }
  for (int q = 0; q < batch; q++)
    for (int j = 0; j < n; j++)
      for (int i = 0; i < m; i++) {
        double s = 0;
        for (int p = 0; p < k; p++) {
          size_t ia = ta == CUBLAS_OP_N ? i + (size_t)p * lda : p + (size_t)i * lda;
          size_t ib = tb == CUBLAS_OP_N ? p + (size_t)j * ldb : j + (size_t)p * ldb;
          s += (double)emu_ld(A, at, q * sA + ia) * emu_ld(B, bt, q * sB + ib);
        }
        size_t ic = q * sC + i + (size_t)j * ldc;
        emu_st(C, ct, ic, (float)(al * s + (be == 0 ? 0.0 : (double)be * emu_ld(C, ct, ic))));
      }
}
inline int emu_typed(cudaDataType at, cudaDataType bt, cudaDataType ct) {
  return at != CUDA_R_32F || bt != CUDA_R_32F || ct != CUDA_R_32F;
}

inline cublasStatus_t cublasSgemm(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                  const float *alpha, const float *A, int lda, const float *B, int ldb,
                                  const float *beta, float *C, int ldc) {
  return emu_gemm_do(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc,
                     emu_math() == CUBLAS_TF32_TENSOR_OP_MATH ? 10 : 23);
}
/* fp32 arrays only, as models/cuda/ calls it */
inline cublasStatus_t cublasGemmEx(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                   const void *alpha, const void *A, cudaDataType at, int lda, const void *B,
                                   cudaDataType bt, int ldb, const void *beta, void *C, cudaDataType ct, int ldc,
                                   cublasComputeType_t compute, cublasGemmAlgo_t) {
  if (emu_typed(at, bt, ct)) { /* half arrays: CUBLAS_COMPUTE_32F only, as cuBLAS */
    if (compute != CUBLAS_COMPUTE_32F) abort();
    float al = *(const float *)alpha, be = *(const float *)beta;
    emu_do([=]() { emu_gemm_typed(ta, tb, m, n, k, al, A, at, lda, 0, B, bt, ldb, 0, be, C, ct, ldc, 0, 1); });
    return 0;
  }
  int bits = compute == CUBLAS_COMPUTE_32F_FAST_16BF   ? 7
             : compute == CUBLAS_COMPUTE_32F_FAST_16F  ? -1
             : compute == CUBLAS_COMPUTE_32F_FAST_TF32 ? 10
                                                       : 23;
  return emu_gemm_do(ta, tb, m, n, k, (const float *)alpha, (const float *)A, lda, (const float *)B, ldb,
                     (const float *)beta, (float *)C, ldc, bits);
}
/* strided-batched: `batch` products, each matrix `stride` elements after
 * the one before (fp32 arrays only) */
inline cublasStatus_t emu_gemm_batched(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                       const float *alpha, const float *A, int lda, long long sA, const float *B,
                                       int ldb, long long sB, const float *beta, float *C, int ldc, long long sC,
                                       int batch, int bits) {
  if (batch < 0) abort();
  float al = *alpha, be = *beta;
  emu_do([=]() {
    for (int q = 0; q < batch; q++)
      emu_gemm(ta, tb, m, n, k, &al, A + q * sA, lda, B + q * sB, ldb, &be, C + q * sC, ldc, bits);
  });
  return 0;
}
inline cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m,
                                                int n, int k, const float *alpha, const float *A, int lda,
                                                long long sA, const float *B, int ldb, long long sB,
                                                const float *beta, float *C, int ldc, long long sC, int batch) {
  return emu_gemm_batched(ta, tb, m, n, k, alpha, A, lda, sA, B, ldb, sB, beta, C, ldc, sC, batch,
                          emu_math() == CUBLAS_TF32_TENSOR_OP_MATH ? 10 : 23);
}
inline cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m,
                                                 int n, int k, const void *alpha, const void *A, cudaDataType at,
                                                 int lda, long long sA, const void *B, cudaDataType bt, int ldb,
                                                 long long sB, const void *beta, void *C, cudaDataType ct, int ldc,
                                                 long long sC, int batch, cublasComputeType_t compute,
                                                 cublasGemmAlgo_t) {
  if (emu_typed(at, bt, ct)) {
    if (compute != CUBLAS_COMPUTE_32F || batch < 0) abort();
    float al = *(const float *)alpha, be = *(const float *)beta;
    emu_do([=]() { emu_gemm_typed(ta, tb, m, n, k, al, A, at, lda, sA, B, bt, ldb, sB, be, C, ct, ldc, sC, batch); });
    return 0;
  }
  int bits = compute == CUBLAS_COMPUTE_32F_FAST_16BF   ? 7
             : compute == CUBLAS_COMPUTE_32F_FAST_16F  ? -1
             : compute == CUBLAS_COMPUTE_32F_FAST_TF32 ? 10
                                                       : 23;
  return emu_gemm_batched(ta, tb, m, n, k, (const float *)alpha, (const float *)A, lda, sA, (const float *)B, ldb, sB,
                          (const float *)beta, (float *)C, ldc, sC, batch, bits);
}

#endif
