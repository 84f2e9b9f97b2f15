/* gemm.cu — row-major matrix products on cuBLAS, and the equivariant linear
 * and dense layers built on them (models/cpu/nn.h has the layers; the CPU's
 * dense.c does the same products through nn_mm).
 *
 * Layouts. The model's arrays are row-major; cuBLAS is column-major. A
 * row-major m x n matrix with row stride ld is, read column-major, its
 * transpose (n x m, leading dimension ld). So the row-major product
 *   C = op(A) op(B)                     (m x n, k the inner dimension)
 * is, read column-major, C^T = op(B)^T op(A)^T, and each transpose there is
 * free: cuBLAS gets B first with B's op, then A with A's op, the sizes
 * n, m, k and the same leading dimensions (cu_mm below). For instance the
 * linear layer y (rows x cout) = x (rows x cin) W^T (W: cout x cin) is
 *   cublasSgemm(T, N, cout, rows, cin, W, lda = cin, x, ldb = cin, y, ldc = cout).
 *
 * Precision: cuBLAS's math mode (table.cu) is FP32, or TF32 tensor cores
 * when the workflow asks for tf32. With bf16 (fp16) every product runs on
 * bf16 (fp16) tensor cores (cublasGemmEx, CUBLAS_COMPUTE_32F_FAST_16BF or
 * _16F): the inputs are rounded on the way in (fp16: values beyond 65504
 * become infinite, below 6e-8 zero, which is what training's loss scaling is
 * for: stages/train.c), the sums are fp32 and so is every array,
 * the parameters and Adam's moments included; the kernels outside cuBLAS
 * (the convolution's contraction among them) stay fp32. The dense
 * forward's bias is added in cuBLASLt's epilogue (below; a small kernel
 * where that cannot be); db sums the rows of dy in a fixed order
 * (reduce.cu). */
#include <string.h>

#include "models/cuda/cuda.h"

/* C (m x n) = beta C, for the products with an empty inner dimension
 * (cuBLAS would not read the arrays at all then). */
static __global__ void scale_matrix(real *C, int m, int n, int ldc, real beta) {
  size_t total = (size_t)m * (size_t)n;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
    size_t r = i / (size_t)n, c = i % (size_t)n;
    real *p = C + r * (size_t)ldc + c;
    *p = beta == 0 ? 0 : beta * *p;
  }
}

void cu_mm(int ta, int tb, int m, int n, int k, real alpha, const real *A, int lda, const real *B, int ldb, real beta,
           real *C, int ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    if (beta == 1) return;
    scale_matrix<<<cu_grid((size_t)m * (size_t)n), CU_THREADS, 0, cu_stream()>>>(C, m, n, ldc, beta);
    CU_LAUNCHED("scale_matrix");
    return;
  }
  cublasOperation_t opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N, opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  enum nn_precision p = cu_precision();
  if (p == NN_PREC_BF16 || p == NN_PREC_FP16)
    CU_BLAS(cublasGemmEx(
        cu_blas(), opb, opa, n, m, k, &alpha, B, CUDA_R_32F, ldb, A, CUDA_R_32F, lda, &beta, C, CUDA_R_32F, ldc,
        p == NN_PREC_BF16 ? CUBLAS_COMPUTE_32F_FAST_16BF : CUBLAS_COMPUTE_32F_FAST_16F, CUBLAS_GEMM_DEFAULT));
  else
    CU_BLAS(cublasSgemm(cu_blas(), opb, opa, n, m, k, &alpha, B, ldb, A, lda, &beta, C, ldc));
}

/* cu_mm_t's fp32 products: cu_mm for `batch` products at strides sA, sB,
 * sC, in the table's precision; an empty product or batch does nothing. */
static void cu_mm_batched(int ta, int tb, int m, int n, int k, const real *A, int lda, long long sA, const real *B,
                          int ldb, long long sB, real beta, real *C, int ldc, long long sC, int batch) {
  if (m <= 0 || n <= 0 || k <= 0 || batch <= 0) return;
  cublasOperation_t opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N, opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  const real alpha = 1;
  enum nn_precision p = cu_precision();
  /* (column-major, as cu_mm: B's product with A gives C's transpose) */
  if (p == NN_PREC_BF16 || p == NN_PREC_FP16)
    CU_BLAS(cublasGemmStridedBatchedEx(cu_blas(), opb, opa, n, m, k, &alpha, B, CUDA_R_32F, ldb, sB, A, CUDA_R_32F,
                                       lda, sA, &beta, C, CUDA_R_32F, ldc, sC, batch,
                                       p == NN_PREC_BF16 ? CUBLAS_COMPUTE_32F_FAST_16BF : CUBLAS_COMPUTE_32F_FAST_16F,
                                       CUBLAS_GEMM_DEFAULT));
  else
    CU_BLAS(cublasSgemmStridedBatched(cu_blas(), opb, opa, n, m, k, &alpha, B, ldb, sB, A, lda, sA, &beta, C, ldc, sC,
                                      batch));
}

static cudaDataType cu_dtype(enum cu_type t) {
  return t == CU_BF16 ? CUDA_R_16BF : t == CU_F16 ? CUDA_R_16F : CUDA_R_32F;
}

void cu_mm_t(int ta, int tb, int m, int n, int k, const void *A, enum cu_type at, int lda, long long sA, const void *B,
             enum cu_type bt, int ldb, long long sB, real beta, void *C, enum cu_type ct, int ldc, long long sC,
             int batch) {
  if (at == CU_F32 && bt == CU_F32 && ct == CU_F32) {
    if (batch == 1)
      cu_mm(ta, tb, m, n, k, 1, (const real *)A, lda, (const real *)B, ldb, beta, (real *)C, ldc);
    else
      cu_mm_batched(ta, tb, m, n, k, (const real *)A, lda, sA, (const real *)B, ldb, sB, beta, (real *)C, ldc, sC,
                    batch);
    return;
  }
  if (at != bt || at == CU_F32 || (ct != CU_F32 && ct != at)) {
    cu_fail(__FILE__, __LINE__, "cu_mm_t: A and B of different types, or a half C from other inputs");
    return;
  }
  if (m <= 0 || n <= 0 || k <= 0 || batch <= 0) return;
  cublasOperation_t opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N, opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  const real alpha = 1;
  /* (alpha and beta are fp32 with CUBLAS_COMPUTE_32F, whatever the arrays) */
  if (batch == 1)
    CU_BLAS(cublasGemmEx(cu_blas(), opb, opa, n, m, k, &alpha, B, cu_dtype(bt), ldb, A, cu_dtype(at), lda, &beta, C,
                         cu_dtype(ct), ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  else
    CU_BLAS(cublasGemmStridedBatchedEx(cu_blas(), opb, opa, n, m, k, &alpha, B, cu_dtype(bt), ldb, sB, A,
                                       cu_dtype(at), lda, sA, &beta, C, cu_dtype(ct), ldc, sC, batch,
                                       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

static __global__ void convert_kernel(void *dst, int t, const real *src, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    if (t == CU_BF16)
      ((__nv_bfloat16 *)dst)[i] = __float2bfloat16_rn(src[i]);
    else if (t == CU_F16)
      ((__half *)dst)[i] = __float2half_rn(src[i]);
    else
      ((real *)dst)[i] = src[i];
}

void cu_convert(void *dst, enum cu_type t, const real *src, size_t n) {
  if (!n) return;
  convert_kernel<<<cu_grid(n), CU_THREADS, 0, cu_stream()>>>(dst, (int)t, src, n);
  CU_LAUNCHED("convert_kernel");
}

/* y[r, o] += b[o] (rows x out). */
static __global__ void add_bias(real *y, const real *b, int rows, int out) {
  size_t total = (size_t)rows * (size_t)out;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x)
    y[i] += b[i % (size_t)out];
}

/* y (rows x cout) = x (rows x cin) W^T, W (cout x cin). */
void cu_linear_forward(real *y, const real *x, const real *W, int rows, int cin, int cout) {
  cu_mm(0, 1, rows, cout, cin, 1, x, cin, W, cin, 0, y, cout);
}

/* dx (rows x cin) = dy W (overwritten, may be NULL); dW (cout x cin) += dy^T x. */
void cu_linear_backward(real *dx, real *dW, const real *dy, const real *x, const real *W, int rows, int cin, int cout) {
  if (dx) cu_mm(0, 0, rows, cin, cout, 1, dy, cout, W, cin, 0, dx, cin);
  cu_mm(1, 0, cout, cin, rows, 1, dy, cout, x, cin, 1, dW, cin);
}

/* ---- the dense forward on cuBLASLt, its bias in the epilogue ----
 * The same product as cu_mm's (column-major: D (out x rows, ld out) =
 * W^T-as-read x-as-read, A = W with op T, B = x with op N) with
 * CUBLASLT_EPILOGUE_BIAS: D[o, r] += b[o] as the tile is written, so y is
 * written once instead of written and then read and written again by
 * add_bias. The activation that follows a dense layer in this model is
 * either after a layer norm (the radial network) or needs its input kept
 * for the backward (the head's ReLU, on G rows only), so BIAS is the one
 * epilogue that fits. The backward keeps cu_mm and its fixed-order column
 * sums for db: cuBLASLt's BGRAD epilogues overwrite the bias gradient, and
 * db here accumulates.
 *
 * A plan (descriptors and the algorithm cuBLASLt's heuristic picks) is kept
 * per shape, precision and operand alignment: the recorded steps' padded
 * shapes are few, so the heuristic runs once per shape. Where cuBLASLt is
 * missing, offers no algorithm, or refuses the call, and where the bias is
 * not 16-byte aligned (what its epilogue needs), the layer is cu_mm and
 * add_bias as before: the same sums, the bias added after rounding instead
 * of before it. */
#define LT_PLANS 32

struct lt_plan {
  int used, ok;
  int rows, in, out;
  enum nn_precision prec;
  unsigned align[3]; /* of W, x, y: what the heuristic was told */
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t a, b, d;
  cublasLtMatmulAlgo_t algo;
};
static struct lt_plan lt_plans[LT_PLANS];
static int lt_next; /* the slot a new plan takes (round robin) */

/* The largest power of two up to 256 that divides the address. */
static unsigned lt_align(const void *p) {
  uintptr_t a = (uintptr_t)p;
  unsigned r = 1;
  while (r < 256 && !(a & r))
    r <<= 1;
  return r;
}

static void lt_drop(struct lt_plan *pl) {
  if (pl->op) (void)cublasLtMatmulDescDestroy(pl->op);
  if (pl->a) (void)cublasLtMatrixLayoutDestroy(pl->a);
  if (pl->b) (void)cublasLtMatrixLayoutDestroy(pl->b);
  if (pl->d) (void)cublasLtMatrixLayoutDestroy(pl->d);
  memset(pl, 0, sizeof *pl);
}

void cu_gemm_shutdown(void) {
  for (int i = 0; i < LT_PLANS; i++)
    lt_drop(&lt_plans[i]);
}

static cublasComputeType_t lt_compute(enum nn_precision p) {
  switch (p) {
  case NN_PREC_TF32:
    return CUBLAS_COMPUTE_32F_FAST_TF32;
  case NN_PREC_BF16:
    return CUBLAS_COMPUTE_32F_FAST_16BF;
  case NN_PREC_FP16:
    return CUBLAS_COMPUTE_32F_FAST_16F;
  default:
    return CUBLAS_COMPUTE_32F;
  }
}

/* Fills a plan: 0 when cuBLASLt offers an algorithm for it. */
static int lt_make(struct lt_plan *pl) {
  const int32_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
  size_t wsb = 0;
  (void)cu_workspace(&wsb);
  const uint64_t ws = wsb;
  cublasLtMatmulPreference_t pref = NULL;
  cublasLtMatmulHeuristicResult_t res;
  int found = 0;
  int bad = cublasLtMatmulDescCreate(&pl->op, lt_compute(pl->prec), CUDA_R_32F) != CUBLAS_STATUS_SUCCESS ||
            cublasLtMatmulDescSetAttribute(pl->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta) ||
            cublasLtMatmulDescSetAttribute(pl->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb) ||
            cublasLtMatmulDescSetAttribute(pl->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi) ||
            cublasLtMatrixLayoutCreate(&pl->a, CUDA_R_32F, (uint64_t)pl->in, (uint64_t)pl->out, pl->in) ||
            cublasLtMatrixLayoutCreate(&pl->b, CUDA_R_32F, (uint64_t)pl->in, (uint64_t)pl->rows, pl->in) ||
            cublasLtMatrixLayoutCreate(&pl->d, CUDA_R_32F, (uint64_t)pl->out, (uint64_t)pl->rows, pl->out) ||
            cublasLtMatmulPreferenceCreate(&pref) ||
            cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws) ||
            cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &pl->align[0],
                                                 sizeof pl->align[0]) ||
            cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &pl->align[1],
                                                 sizeof pl->align[1]) ||
            cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &pl->align[2],
                                                 sizeof pl->align[2]) ||
            cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &pl->align[2],
                                                 sizeof pl->align[2]) ||
            cublasLtMatmulAlgoGetHeuristic(cu_blaslt(), pl->op, pl->a, pl->b, pl->d, pl->d, pref, 1, &res, &found) ||
            found < 1 || res.state != CUBLAS_STATUS_SUCCESS || res.workspaceSize > wsb;
  if (pref) (void)cublasLtMatmulPreferenceDestroy(pref);
  if (!bad) pl->algo = res.algo;
  return bad ? -1 : 0;
}

/* The plan for this call (made on first use), or NULL: then cu_mm. */
static struct lt_plan *lt_plan_for(const real *x, const real *W, const real *y, int rows, int in, int out) {
  if (!cu_blaslt()) return NULL;
  enum nn_precision prec = cu_precision();
  unsigned al[3] = {lt_align(W), lt_align(x), lt_align(y)};
  for (int i = 0; i < LT_PLANS; i++) {
    struct lt_plan *pl = &lt_plans[i];
    if (pl->used && pl->rows == rows && pl->in == in && pl->out == out && pl->prec == prec && pl->align[0] == al[0] &&
        pl->align[1] == al[1] && pl->align[2] == al[2])
      return pl->ok ? pl : NULL;
  }
  struct lt_plan *pl = &lt_plans[lt_next];
  lt_next = (lt_next + 1) % LT_PLANS;
  lt_drop(pl);
  pl->used = 1;
  pl->rows = rows;
  pl->in = in;
  pl->out = out;
  pl->prec = prec;
  memcpy(pl->align, al, sizeof al);
  pl->ok = lt_make(pl) == 0;
  return pl->ok ? pl : NULL;
}

/* y = x W^T + b through cuBLASLt: 0, or -1 when it was not run (nothing
 * queued; the caller runs cu_mm and add_bias). */
static int lt_dense(real *y, const real *x, const real *W, const real *b, int rows, int in, int out) {
  if (lt_align(b) < 16) return -1;
  struct lt_plan *pl = lt_plan_for(x, W, y, rows, in, out);
  if (!pl) return -1;
  if (cublasLtMatmulDescSetAttribute(pl->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &b, sizeof b) != CUBLAS_STATUS_SUCCESS)
    return -1;
  const float one = 1, zero = 0;
  size_t wsb = 0;
  void *ws = cu_workspace(&wsb);
  if (cublasLtMatmul(cu_blaslt(), pl->op, &one, W, pl->a, x, pl->b, &zero, y, pl->d, y, pl->d, &pl->algo, ws, wsb,
                     cu_stream()) != CUBLAS_STATUS_SUCCESS) {
    pl->ok = 0; /* refused before anything was queued: the next calls of this plan go the other way at once */
    return -1;
  }
  return 0;
}

/* y (rows x out) = x (rows x in) W^T + b; W (out x in), b (out) or NULL. */
void cu_dense_forward(real *y, const real *x, const real *W, const real *b, int rows, int in, int out) {
  if (b && rows > 0 && out > 0 && in > 0 && lt_dense(y, x, W, b, rows, in, out) == 0) return;
  cu_mm(0, 1, rows, out, in, 1, x, in, W, in, 0, y, out);
  if (!b || rows <= 0 || out <= 0) return;
  add_bias<<<cu_grid((size_t)rows * (size_t)out), CU_THREADS, 0, cu_stream()>>>(y, b, rows, out);
  CU_LAUNCHED("add_bias");
}

/* dx (rows x in) = dy W (may be NULL); dW += dy^T x; db (out) += the column
 * sums of dy (when db). */
void cu_dense_backward(real *dx, real *dW, real *db, const real *dy, const real *x, const real *W, int rows, int in,
                       int out) {
  if (dx) cu_mm(0, 0, rows, in, out, 1, dy, out, W, in, 0, dx, in);
  cu_mm(1, 0, out, in, rows, 1, dy, out, x, in, 1, dW, in);
  if (!db || rows <= 0 || out <= 0) return;
  real *part = (real *)cu_scratch(CU_SCRATCH_OP, cu_colsum_scratch(rows, out));
  if (!part) return;
  cu_colsum_add(db, dy, rows, out, out, part);
}
