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
 * (the convolution's contraction among them) stay fp32. Bias and its
 * gradient are small kernels; db sums the rows of dy in a fixed order
 * (reduce.cu). */
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

/* y (rows x out) = x (rows x in) W^T + b; W (out x in), b (out) or NULL. */
void cu_dense_forward(real *y, const real *x, const real *W, const real *b, int rows, int in, int out) {
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
