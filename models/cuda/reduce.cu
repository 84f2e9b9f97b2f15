/* reduce.cu — the backend's reductions, each in a fixed order so that the
 * result does not depend on thread timing (no floating-point atomics):
 *
 * column sums   out[c] += sum_r in[r, c]: the rows are cut into blocks of
 *               COLSUM_ROWS; one thread per (block, column) sums its rows in
 *               order into a partial, then one thread per column sums the
 *               partials in block order and adds to out. Used for the bias
 *               gradients and for the per-row shares of the norms'
 *               dgamma and dbeta.
 * sum of squares in double: each block of SUMSQ_BLOCK elements is summed
 *               by CU_THREADS threads (strided, in order) and a tree in
 *               shared memory, then one block sums the partials the same
 *               way; the result is copied to the host (this waits), or
 *               left in the device's memory (sumsq_to). */
#include "models/cuda/cuda.h"

#define COLSUM_ROWS 256
#define SUMSQ_BLOCK 8192

size_t cu_colsum_scratch(long rows, int cols) {
  size_t chunks = (size_t)(rows + COLSUM_ROWS - 1) / COLSUM_ROWS;
  return (chunks ? chunks : 1) * (size_t)(cols > 0 ? cols : 1) * sizeof(real);
}

/* grid (column blocks, row chunks): part[chunk, c] = sum of in[r, c] over the chunk's rows. */
static __global__ void colsum_partial(real *part, const real *in, long rows, int cols, long ld) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  long r0 = (long)blockIdx.y * COLSUM_ROWS, r1 = r0 + COLSUM_ROWS < rows ? r0 + COLSUM_ROWS : rows;
  if (c >= cols) return;
  real s = 0;
  for (long r = r0; r < r1; r++)
    s += in[r * ld + c];
  part[(size_t)blockIdx.y * (size_t)cols + (size_t)c] = s;
}

static __global__ void colsum_final(real *out, const real *part, int chunks, int cols) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  real s = 0;
  for (int q = 0; q < chunks; q++)
    s += part[(size_t)q * (size_t)cols + (size_t)c];
  out[c] += s;
}

void cu_colsum_add(real *out, const real *in, long rows, int cols, long ld, real *part) {
  if (rows <= 0 || cols <= 0) return;
  long chunks = (rows + COLSUM_ROWS - 1) / COLSUM_ROWS;
  dim3 grid((unsigned)((cols + CU_THREADS - 1) / CU_THREADS), (unsigned)chunks);
  if (chunks > 65535) { /* gridDim.y's limit: 16.7 M rows; more would need a second level */
    cu_fail(__FILE__, __LINE__, "column sum over more than 16.7 million rows");
    return;
  }
  colsum_partial<<<grid, CU_THREADS, 0, cu_stream()>>>(part, in, rows, cols, ld);
  CU_LAUNCHED("colsum_partial");
  colsum_final<<<grid.x, CU_THREADS, 0, cu_stream()>>>(out, part, (int)chunks, cols);
  CU_LAUNCHED("colsum_final");
}

/* The sum of v[i] over this block's threads, in a fixed tree (blockDim.x =
 * CU_THREADS, a power of two); thread 0 gets the total. */
static __device__ double block_sum(double v) {
  __shared__ double s[CU_THREADS];
  s[threadIdx.x] = v;
  __syncthreads();
  for (int w = CU_THREADS / 2; w > 0; w /= 2) {
    if ((int)threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
    __syncthreads();
  }
  return s[0];
}

static __global__ void sumsq_partial(double *part, const real *x, size_t n) {
  size_t i0 = (size_t)blockIdx.x * SUMSQ_BLOCK, i1 = i0 + SUMSQ_BLOCK < n ? i0 + SUMSQ_BLOCK : n;
  double v = 0;
  for (size_t i = i0 + threadIdx.x; i < i1; i += CU_THREADS)
    v += (double)x[i] * (double)x[i];
  double t = block_sum(v);
  if (threadIdx.x == 0) part[blockIdx.x] = t;
}

static __global__ void sumsq_final(double *out, const double *part, size_t nb) {
  double v = 0;
  for (size_t i = threadIdx.x; i < nb; i += CU_THREADS)
    v += part[i];
  double t = block_sum(v);
  if (threadIdx.x == 0) *out = t;
}

void cu_sumsq_to(double *ss, const real *x, size_t n) {
  if (!n) {
    CU_CHECK(cudaMemsetAsync(ss, 0, sizeof *ss, cu_stream())); /* all-zero bytes: 0.0 */
    return;
  }
  size_t nb = (n + SUMSQ_BLOCK - 1) / SUMSQ_BLOCK;
  double *part = (double *)cu_scratch(CU_SCRATCH_OP, nb * sizeof(double));
  if (!part) return; /* the failure is recorded */
  if (nb > 0x7fffffff) {
    cu_fail(__FILE__, __LINE__, "sum of squares of more than 17 trillion reals");
    return;
  }
  sumsq_partial<<<(unsigned)nb, CU_THREADS, 0, cu_stream()>>>(part, x, n);
  CU_LAUNCHED("sumsq_partial");
  sumsq_final<<<1, CU_THREADS, 0, cu_stream()>>>(ss, part, nb);
  CU_LAUNCHED("sumsq_final");
}

double cu_sumsq(const real *x, size_t n) {
  if (!n) return 0;
  size_t nb = (n + SUMSQ_BLOCK - 1) / SUMSQ_BLOCK;
  double *part = (double *)cu_scratch(CU_SCRATCH_OP, (nb + 1) * sizeof(double));
  if (!part || nb > 0x7fffffff) return NAN; /* the failure is recorded; NaN stops the step */
  sumsq_partial<<<(unsigned)nb, CU_THREADS, 0, cu_stream()>>>(part, x, n);
  CU_LAUNCHED("sumsq_partial");
  sumsq_final<<<1, CU_THREADS, 0, cu_stream()>>>(part + nb, part, nb);
  CU_LAUNCHED("sumsq_final");
  double r = NAN;
  if (CU_CHECK(cudaMemcpyAsync(&r, part + nb, sizeof r, cudaMemcpyDeviceToHost, cu_stream())) ||
      cu_wait(cu_stream(), NULL, __FILE__, __LINE__))
    return NAN;
  return r;
}
