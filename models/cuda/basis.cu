/* basis.cu — every edge's equivariant basis computed on the GPU from its
 * relative position (backend.h's `bases`), so a batch goes up as 12 bytes an
 * edge instead of per_edge floats (1,092 at degree 3) and the host computes
 * none of them. The arithmetic is models/kernels/basis.h's, the host's: the
 * harmonics and the sparse Clebsch–Gordan sums in double, each value
 * rounded to float.
 *
 * A block takes BASIS_EPB edges: its first threads compute their harmonics
 * into shared memory, then all its threads write the edges' outputs, one
 * edge after another (consecutive threads, consecutive addresses). The plan's sparse tables and the harmonics' normalisation
 * go to the device once per max_degree (a few tens of KB) and stay: when a
 * model is set up on the backend (backend.h's prepare_bases, outside any
 * step), never on first use, which inside a step being recorded as a CUDA
 * graph would invalidate the capture (a cudaMalloc, a copy and a wait). */
#include "models/cuda/cuda.h"
#include "models/kernels/basis.h"

#define BASIS_EPB 16
#define BASIS_SH_MAX SO3_SH_DIM(2 * BASIS_MAX_DEGREE)

static __global__ void bases_kernel(real *out, const float *rel, int E, int max_degree, size_t per,
                                    const uint32_t *nz_start, const uint16_t *nz_y, const double *nz_c,
                                    const double *norm) {
  __shared__ double y[BASIS_EPB * BASIS_SH_MAX];
  const int shdim = SO3_SH_DIM(2 * max_degree);
  const int e0 = (int)blockIdx.x * BASIS_EPB, ne = E - e0 < BASIS_EPB ? E - e0 : BASIS_EPB;
  for (int t = (int)threadIdx.x; t < ne; t += (int)blockDim.x)
    nn_k_basis_harmonics(max_degree, norm, rel + (size_t)(e0 + t) * 3, y + (size_t)t * (size_t)shdim);
  __syncthreads();
  /* edge by edge, its outputs across the threads (no division per value) */
  for (int t = 0; t < ne; t++) {
    real *o = out + (size_t)(e0 + t) * per;
    const double *yt = y + (size_t)t * (size_t)shdim;
    for (size_t k = threadIdx.x; k < per; k += blockDim.x)
      o[k] = nn_k_basis_value(k, nz_start, nz_y, nz_c, yt);
  }
}

/* The harmonics' normalisation (so3_sh_norm's values: the module links
 * nothing of the host's libraries, so it keeps its own copy). */
static const double sh_norm_host[SO3_SH_NNORM] = SO3_SH_NORM_INIT;

/* The device's copy of a plan's tables, by max_degree. */
static struct basis_tables_dev {
  uint32_t *nz_start;
  uint16_t *nz_y;
  double *nz_c, *norm;
  size_t per_edge;
  uint32_t n_nonzero;
} tables[BASIS_MAX_DEGREE + 1];

/* The plan's tables on the device, or NULL (recorded, as a failure or, while
 * recording, as a spoiled recording) when prepare_bases did not load them. */
static const struct basis_tables_dev *tables_of(const struct basis_plan *p) {
  if (p->max_degree < 0 || p->max_degree > BASIS_MAX_DEGREE) {
    cu_fail(__FILE__, __LINE__, "bases: max_degree out of range");
    return NULL;
  }
  const auto *t = &tables[p->max_degree];
  if (!t->nz_start) {
    char msg[160];
    snprintf(msg, sizeof msg, "bases: the tables of max_degree %d were not loaded (prepare_bases) before the step",
             p->max_degree);
    cu_fail(__FILE__, __LINE__, msg);
    return NULL;
  }
  if (t->per_edge != p->per_edge || t->n_nonzero != p->n_nonzero) {
    cu_fail(__FILE__, __LINE__, "bases: two different plans of one max_degree");
    return NULL;
  }
  return t;
}

int cu_prepare_bases(const struct basis_plan *p, struct se3_error *err) {
  if (p->max_degree < 0 || p->max_degree > BASIS_MAX_DEGREE) {
    se3_error_set(err, SE3_ERR_MODEL, "the GPU's basis tables: max_degree %d is not 0 to %d", p->max_degree,
                  BASIS_MAX_DEGREE);
    return -1;
  }
  auto *t = &tables[p->max_degree];
  if (t->nz_start) {
    if (t->per_edge == p->per_edge && t->n_nonzero == p->n_nonzero) return 0;
    se3_error_set(err, SE3_ERR_MODEL, "the GPU's basis tables: two different plans of max_degree %d", p->max_degree);
    return -1;
  }
  size_t b_start = (p->per_edge + 1) * sizeof(uint32_t), b_y = (size_t)p->n_nonzero * sizeof(uint16_t),
         b_c = (size_t)p->n_nonzero * sizeof(double), b_norm = SO3_SH_NNORM * sizeof(double);
  void *a = NULL, *b = NULL, *c = NULL, *d = NULL;
  cudaStream_t q = cu_stream();
  /* on the backend's stream (the plan's host arrays are read before the
   * wait returns), then waited for: nothing of it is left in flight */
  cudaError_t e = cudaMalloc(&a, b_start);
  if (e == cudaSuccess) e = cudaMalloc(&b, b_y ? b_y : 1);
  if (e == cudaSuccess) e = cudaMalloc(&c, b_c ? b_c : 1);
  if (e == cudaSuccess) e = cudaMalloc(&d, b_norm);
  if (e == cudaSuccess) e = cudaMemcpyAsync(a, p->nz_start, b_start, cudaMemcpyHostToDevice, q);
  if (e == cudaSuccess && b_y) e = cudaMemcpyAsync(b, p->nz_y, b_y, cudaMemcpyHostToDevice, q);
  if (e == cudaSuccess && b_c) e = cudaMemcpyAsync(c, p->nz_c, b_c, cudaMemcpyHostToDevice, q);
  if (e == cudaSuccess) e = cudaMemcpyAsync(d, sh_norm_host, b_norm, cudaMemcpyHostToDevice, q);
  int bad = e != cudaSuccess;
  if (bad) {
    se3_error_set(err, SE3_ERR_MODEL, "the GPU's basis tables (max_degree %d, %zu bytes): %s (%s)", p->max_degree,
                  b_start + b_y + b_c + b_norm, cudaGetErrorString(e), cudaGetErrorName(e));
    (void)cudaGetLastError();
  } else if ((bad = cu_wait(q, NULL, __FILE__, __LINE__)) != 0) { /* (its cause is recorded for sync) */
    se3_error_set(err, SE3_ERR_MODEL, "the GPU failed copying its basis tables (max_degree %d); sync says why",
                  p->max_degree);
  }
  if (bad) {
    (void)cudaFree(a), (void)cudaFree(b), (void)cudaFree(c), (void)cudaFree(d);
    return -1;
  }
  t->nz_start = (uint32_t *)a;
  t->nz_y = (uint16_t *)b;
  t->nz_c = (double *)c;
  t->norm = (double *)d;
  t->per_edge = p->per_edge;
  t->n_nonzero = p->n_nonzero;
  return 0;
}

int cu_bases(real *out, const float *rel, int E, const struct basis_plan *plan) {
  if (E <= 0 || plan->per_edge == 0) return 0;
  const auto *t = tables_of(plan);
  if (!t) return -1;
  unsigned blocks = (unsigned)((E + BASIS_EPB - 1) / BASIS_EPB);
  bases_kernel<<<blocks, CU_THREADS, 0, cu_stream()>>>(out, rel, E, plan->max_degree, plan->per_edge, t->nz_start,
                                                       t->nz_y, t->nz_c, t->norm);
  return CU_LAUNCHED("bases_kernel");
}

void cu_bases_shutdown(void) {
  for (auto &t : tables) {
    if (!t.nz_start) continue;
    (void)cudaFree(t.nz_start);
    (void)cudaFree(t.nz_y);
    (void)cudaFree(t.nz_c);
    (void)cudaFree(t.norm);
    t.nz_start = NULL;
  }
}
