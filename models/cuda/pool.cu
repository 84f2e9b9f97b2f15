/* pool.cu — molecule pooling of degree-0 features x (N x C) to y (G x C)
 * (models/cpu/nn.h, models/cpu/pool.c). One thread per (molecule, channel)
 * walks the molecule's nodes in order: the maximum keeps the first node on
 * ties, the mean sums in node order, as on the CPU; no atomics. */
#include "models/cuda/cuda.h"

#define GRID_STRIDE(i, n)                                                                                              \
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < (n); i += (long)gridDim.x * blockDim.x)

static __global__ void pool_max_fwd(real *y, int32_t *arg, const real *x, const int32_t *graph_start, int G, int C) {
  GRID_STRIDE(i, (long)G * C) {
    const int g = (int)(i / C), c = (int)(i % C);
    const int32_t n0 = graph_start[g], n1 = graph_start[g + 1];
    real best = 0;
    int32_t at = -1;
    for (int32_t n = n0; n < n1; n++) {
      const real v = x[(size_t)n * C + c];
      if (at < 0 || v > best) { /* strict: ties stay with the first node */
        best = v;
        at = n;
      }
    }
    y[i] = best;
    arg[i] = at;
  }
}

/* dx (N x C) is zeroed first; each (molecule, channel) then writes its one
 * node: molecules own disjoint nodes, so no two threads write one element. */
static __global__ void pool_max_bwd(real *dx, const real *dy, const int32_t *arg, int G, int C) {
  GRID_STRIDE(i, (long)G * C) {
    const int32_t n = arg[i];
    if (n >= 0) dx[(size_t)n * C + (size_t)(i % C)] += dy[i];
  }
}

static __global__ void pool_mean_fwd(real *y, const real *x, const int32_t *graph_start, int G, int C) {
  GRID_STRIDE(i, (long)G * C) {
    const int g = (int)(i / C), c = (int)(i % C);
    const int32_t n0 = graph_start[g], n1 = graph_start[g + 1];
    real s = 0;
    for (int32_t n = n0; n < n1; n++)
      s += x[(size_t)n * C + c];
    y[i] = n1 > n0 ? s / (real)(n1 - n0) : 0;
  }
}

static __global__ void pool_mean_bwd(real *dx, const real *dy, const int32_t *graph_start, int G, int C) {
  GRID_STRIDE(i, (long)G * C) {
    const int g = (int)(i / C), c = (int)(i % C);
    const int32_t n0 = graph_start[g], n1 = graph_start[g + 1];
    for (int32_t n = n0; n < n1; n++)
      dx[(size_t)n * C + c] = dy[i] / (real)(n1 - n0);
  }
}

void cu_pool_max_forward(real *y, int32_t *arg, const real *x, const int32_t *graph_start, int G, int C) {
  if (G <= 0 || C <= 0) return;
  pool_max_fwd<<<cu_grid((size_t)G * C), CU_THREADS, 0, cu_stream()>>>(y, arg, x, graph_start, G, C);
  CU_LAUNCHED("pool_max_fwd");
}

void cu_pool_max_backward(real *dx, const real *dy, const int32_t *arg, int N, int G, int C) {
  if (N <= 0 || C <= 0) return;
  CU_CHECK(cudaMemsetAsync(dx, 0, (size_t)N * C * sizeof *dx, cu_stream()));
  if (G <= 0) return;
  pool_max_bwd<<<cu_grid((size_t)G * C), CU_THREADS, 0, cu_stream()>>>(dx, dy, arg, G, C);
  CU_LAUNCHED("pool_max_bwd");
}

void cu_pool_mean_forward(real *y, const real *x, const int32_t *graph_start, int G, int C) {
  if (G <= 0 || C <= 0) return;
  pool_mean_fwd<<<cu_grid((size_t)G * C), CU_THREADS, 0, cu_stream()>>>(y, x, graph_start, G, C);
  CU_LAUNCHED("pool_mean_fwd");
}

void cu_pool_mean_backward(real *dx, const real *dy, const int32_t *graph_start, int G, int C) {
  if (G <= 0 || C <= 0) return;
  pool_mean_bwd<<<cu_grid((size_t)G * C), CU_THREADS, 0, cu_stream()>>>(dx, dy, graph_start, G, C);
  CU_LAUNCHED("pool_mean_bwd");
}
