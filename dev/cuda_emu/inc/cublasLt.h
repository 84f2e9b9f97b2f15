/* The emulator's cuBLASLt (dev/cuda_emu/run.sh): the matmul with the BIAS
 * epilogue that models/cuda/gemm.cu calls, by its definition on the host,
 * and checks of what the real library would refuse or misread: layouts
 * that do not fit the operation's sizes, a bias that is not 16-byte
 * aligned, a workspace larger than the one given.
 * EMU_LT=0 makes the heuristic offer no algorithm (gemm.cu then adds the
 * bias in its own kernel), so that path runs under the emulator too.
 * emu_lt_count() says how many matmuls ran (check.c prints it). */
#ifndef SE3_CUDA_EMU_CUBLASLT_H
#define SE3_CUDA_EMU_CUBLASLT_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cublas_v2.h"
enum { CUBLAS_STATUS_NOT_SUPPORTED = 15, CUBLAS_STATUS_INVALID_VALUE = 7 };
typedef cudaDataType cudaDataType_t;
typedef void *cublasLtHandle_t;
struct emu_lt_desc {
  cublasComputeType_t compute;
  int32_t ta, tb;
  int epilogue;
  const float *bias;
};
struct emu_lt_layout {
  uint64_t rows, cols;
  int64_t ld;
};
struct emu_lt_pref {
  uint64_t ws;
};
typedef emu_lt_desc *cublasLtMatmulDesc_t;
typedef emu_lt_layout *cublasLtMatrixLayout_t;
typedef emu_lt_pref *cublasLtMatmulPreference_t;
typedef struct {
  uint64_t data[8];
} cublasLtMatmulAlgo_t;
typedef struct {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
} cublasLtMatmulHeuristicResult_t;
typedef enum {
  CUBLASLT_MATMUL_DESC_TRANSA = 3,
  CUBLASLT_MATMUL_DESC_TRANSB = 4,
  CUBLASLT_MATMUL_DESC_EPILOGUE = 7,
  CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8
} cublasLtMatmulDescAttributes_t;
typedef enum { CUBLASLT_EPILOGUE_DEFAULT = 1, CUBLASLT_EPILOGUE_BIAS = 4 } cublasLtEpilogue_t;
typedef enum {
  CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8
} cublasLtMatmulPreferenceAttributes_t;

inline long &emu_lt_runs() {
  static long n = 0;
  return n;
}
inline cublasStatus_t cublasLtCreate(cublasLtHandle_t *h) {
  *h = (void *)2;
  return 0;
}
inline cublasStatus_t cublasLtDestroy(cublasLtHandle_t) { return 0; }
inline cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t c, cudaDataType_t s) {
  if (s != CUDA_R_32F) abort();
  *d = new emu_lt_desc{c, CUBLAS_OP_N, CUBLAS_OP_N, CUBLASLT_EPILOGUE_DEFAULT, NULL};
  return 0;
}
inline cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
  delete d;
  return 0;
}
/* the sizes are checked as the real library does (INVALID_VALUE) */
inline cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a,
                                                     const void *buf, size_t n) {
  switch (a) {
  case CUBLASLT_MATMUL_DESC_TRANSA:
  case CUBLASLT_MATMUL_DESC_TRANSB:
    if (n != sizeof(int32_t)) return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(a == CUBLASLT_MATMUL_DESC_TRANSA ? &d->ta : &d->tb, buf, n);
    return 0;
  case CUBLASLT_MATMUL_DESC_EPILOGUE:
    if (n != sizeof(uint32_t)) return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(&d->epilogue, buf, n);
    return 0;
  case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
    if (n != sizeof(void *)) return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(&d->bias, buf, n);
    return 0;
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}
inline cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType t, uint64_t rows,
                                                 uint64_t cols, int64_t ld) {
  if (t != CUDA_R_32F) abort();
  if (ld < (int64_t)rows || ld < 1) return CUBLAS_STATUS_INVALID_VALUE;
  *l = new emu_lt_layout{rows, cols, ld};
  return 0;
}
inline cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
  delete l;
  return 0;
}
inline cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) {
  *p = new emu_lt_pref{0};
  return 0;
}
inline cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
  delete p;
  return 0;
}
inline cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                           cublasLtMatmulPreferenceAttributes_t a, const void *buf,
                                                           size_t n) {
  if (a == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES) {
    if (n != sizeof(uint64_t)) return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(&p->ws, buf, n);
    return 0;
  }
  if (n != sizeof(uint32_t)) return CUBLAS_STATUS_INVALID_VALUE;
  uint32_t v;
  memcpy(&v, buf, n);
  return v && !(v & (v - 1)) ? 0 : CUBLAS_STATUS_INVALID_VALUE; /* an alignment: a power of two */
}
/* One algorithm, asking for 1 MiB of workspace when the preference allows
 * it (so a workspace smaller than asked for would show at the matmul). */
inline cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t,
                                                     cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                                     cublasLtMatrixLayout_t, cublasLtMatmulPreference_t p, int n,
                                                     cublasLtMatmulHeuristicResult_t *res, int *found) {
  if (n < 1) return CUBLAS_STATUS_INVALID_VALUE;
  const char *e = getenv("EMU_LT");
  if (e && !strcmp(e, "0")) {
    *found = 0;
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  memset(res, 0, sizeof *res);
  res->workspaceSize = p->ws < ((size_t)1 << 20) ? p->ws : ((size_t)1 << 20);
  res->state = 0;
  *found = 1;
  return 0;
}
/* D = alpha op(A) op(B) + beta C (+ bias per row of D), column-major. */
inline cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t d, const void *alpha, const void *A,
                                     cublasLtMatrixLayout_t al, const void *B, cublasLtMatrixLayout_t bl,
                                     const void *beta, const void *C, cublasLtMatrixLayout_t cl, void *D,
                                     cublasLtMatrixLayout_t dl, const cublasLtMatmulAlgo_t *algo, void *ws, size_t wsb,
                                     cudaStream_t s) {
  emu_stream_check(s, "cublasLtMatmul");
  uint64_t m = dl->rows, n = dl->cols, k = d->ta == CUBLAS_OP_N ? al->cols : al->rows;
  int fit = (d->ta == CUBLAS_OP_N ? al->rows : al->cols) == m && (d->tb == CUBLAS_OP_N ? bl->rows : bl->cols) == k &&
            (d->tb == CUBLAS_OP_N ? bl->cols : bl->rows) == n && cl->rows == m && cl->cols == n;
  if (!fit || C != D || cl->ld != dl->ld || !algo || (wsb && !ws)) {
    fprintf(stderr, "cublasLtMatmul: layouts that do not fit the operation, or C not D, or no algorithm\n");
    abort();
  }
  if (d->epilogue == CUBLASLT_EPILOGUE_BIAS && (!d->bias || (uintptr_t)d->bias % 16)) {
    fprintf(stderr, "cublasLtMatmul: BIAS epilogue without a 16-byte aligned bias\n");
    abort();
  }
  if (wsb < ((size_t)1 << 20) && wsb) abort(); /* less than the heuristic asked for */
  int bits = d->compute == CUBLAS_COMPUTE_32F_FAST_16BF   ? 7
             : d->compute == CUBLAS_COMPUTE_32F_FAST_16F  ? -1
             : d->compute == CUBLAS_COMPUTE_32F_FAST_TF32 ? 10
                                                          : 23;
  float al_ = *(const float *)alpha, be = *(const float *)beta;
  const float *bias = d->epilogue == CUBLASLT_EPILOGUE_BIAS ? d->bias : NULL;
  cublasOperation_t ta = (cublasOperation_t)d->ta, tb = (cublasOperation_t)d->tb;
  int lda = (int)al->ld, ldb = (int)bl->ld, ldd = (int)dl->ld;
  emu_do(s, [=]() {
    emu_gemm(ta, tb, (int)m, (int)n, (int)k, &al_, (const float *)A, lda, (const float *)B, ldb, &be, (float *)D, ldd,
             bits);
    if (bias)
      for (uint64_t j = 0; j < n; j++)
        for (uint64_t i = 0; i < m; i++)
          ((float *)D)[i + j * (uint64_t)ldd] += bias[i];
    emu_lt_runs()++;
  });
  return 0;
}
#endif
