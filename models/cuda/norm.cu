/* norm.cu — the norm nonlinearity (one degree) and the layer norm + ReLU of
 * the radial network (models/cpu/nn.h has both layers). The arithmetic is
 * the CPU's, from the SE3_HD bodies of models/kernels/norm.h and lnrelu.h:
 * one thread per node (norm) or per row (lnrelu), save layouts as on the
 * CPU.
 *
 * Parameter gradients sum over nodes (rows): each thread writes its own
 * node's share into a scratch row (the same body, adding into zeros), and
 * the rows are summed by column in a fixed order (reduce.cu), then added to
 * dgamma and dbeta. The input gradient (which may overwrite dy in place)
 * comes after, one thread per node again. */
#include "models/cuda/cuda.h"
#include "models/kernels/lnrelu.h"
#include "models/kernels/norm.h"

#define GRID_STRIDE(i, n) for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += gridDim.x * blockDim.x)

/* ---- norm nonlinearity: x, y N x dim x C; save: s (N x C), xhat (N x C), rstd (N) ---- */

static __global__ void norm_fwd(real *y, real *save, const real *x, const real *gamma, const real *beta, int N, int dim,
                                int C) {
  real *S = save, *XH = save + (size_t)N * C, *RSTD = save + 2 * (size_t)N * C;
  GRID_STRIDE(n, N) {
    size_t row = (size_t)n * (size_t)(dim * C);
    RSTD[n] = nn_k_norm_node_forward(y + row, S + (size_t)n * C, XH + (size_t)n * C, x + row, gamma, beta, dim, C);
  }
}

/* share: N x 2C, zeroed; node n's dgamma share at [n, 0..C), dbeta's at [n, C..2C). */
static __global__ void norm_dparams(real *share, const real *dy, const real *x, const real *save, const real *gamma,
                                    const real *beta, int N, int dim, int C) {
  const real *S = save, *XH = save + (size_t)N * C;
  GRID_STRIDE(n, N) {
    size_t row = (size_t)n * (size_t)(dim * C);
    real *sh = share + (size_t)n * 2 * C;
    nn_k_norm_node_dparams(sh, sh + C, dy + row, x + row, S + (size_t)n * C, XH + (size_t)n * C, gamma, beta, dim, C);
  }
}

static __global__ void norm_dx(real *dx, const real *dy, const real *x, const real *save, const real *gamma,
                               const real *beta, int N, int dim, int C) {
  const real *S = save, *XH = save + (size_t)N * C, *RSTD = save + 2 * (size_t)N * C;
  GRID_STRIDE(n, N) {
    size_t row = (size_t)n * (size_t)(dim * C);
    nn_k_norm_node_dx(dx + row, dy + row, x + row, S + (size_t)n * C, XH + (size_t)n * C, RSTD[n], gamma, beta, dim, C);
  }
}

void cu_norm_forward(real *y, real *save, const real *x, const real *gamma, const real *beta, int N, int dim, int C) {
  if (N <= 0 || C <= 0) return;
  norm_fwd<<<cu_grid((size_t)N), CU_THREADS, 0, cu_stream()>>>(y, save, x, gamma, beta, N, dim, C);
  CU_LAUNCHED("norm_fwd");
}

/* Per-row shares of two parameter vectors (rows x 2n, zeroed first), then
 * their column sums added to dgamma and dbeta. Returns the shares' array,
 * carved with the sums' partials from one scratch block; NULL when out of
 * scratch (recorded). */
static real *share_rows(int rows, int n, real **part) {
  size_t sb = cu_round((size_t)rows * 2 * (size_t)n * sizeof(real)), pb = cu_colsum_scratch(rows, n);
  char *p = (char *)cu_scratch(CU_SCRATCH_OP, sb + pb);
  if (!p) return NULL;
  real *share = (real *)cu_carve(&p, sb);
  *part = (real *)cu_carve(&p, pb);
  CU_CHECK(cudaMemsetAsync(share, 0, (size_t)rows * 2 * (size_t)n * sizeof(real), cu_stream()));
  return share;
}

static void add_shares(real *dgamma, real *dbeta, const real *share, real *part, int rows, int n) {
  cu_colsum_add(dgamma, share, rows, n, 2 * (long)n, part);
  cu_colsum_add(dbeta, share + n, rows, n, 2 * (long)n, part);
}

void cu_norm_backward(real *dx, real *dgamma, real *dbeta, const real *dy, const real *x, const real *save,
                      const real *gamma, const real *beta, int N, int dim, int C) {
  if (N <= 0 || C <= 0) return;
  real *part, *share = share_rows(N, C, &part);
  if (!share) return;
  norm_dparams<<<cu_grid((size_t)N), CU_THREADS, 0, cu_stream()>>>(share, dy, x, save, gamma, beta, N, dim, C);
  CU_LAUNCHED("norm_dparams");
  add_shares(dgamma, dbeta, share, part, N, C);
  if (!dx) return;
  norm_dx<<<cu_grid((size_t)N), CU_THREADS, 0, cu_stream()>>>(dx, dy, x, save, gamma, beta, N, dim, C);
  CU_LAUNCHED("norm_dx");
}

/* ---- layer norm + ReLU: x, y rows x n; save: the means (rows), then the rstd (rows) ---- */

static __global__ void lnrelu_fwd(real *y, real *save, const real *x, const real *gamma, const real *beta, int rows,
                                  int n) {
  GRID_STRIDE(r, rows) {
    size_t row = (size_t)r * (size_t)n;
    nn_k_lnrelu_row_forward(y + row, &save[r], &save[rows + r], x + row, gamma, beta, n);
  }
}

static __global__ void lnrelu_dparams(real *share, const real *dy, const real *x, const real *save, const real *gamma,
                                      const real *beta, int rows, int n) {
  GRID_STRIDE(r, rows) {
    size_t row = (size_t)r * (size_t)n;
    real *sh = share + (size_t)r * 2 * n;
    nn_k_lnrelu_row_dparams(sh, sh + n, dy + row, x + row, save[r], save[rows + r], gamma, beta, n);
  }
}

static __global__ void lnrelu_dx(real *dx, const real *dy, const real *x, const real *save, const real *gamma,
                                 const real *beta, int rows, int n) {
  GRID_STRIDE(r, rows) {
    size_t row = (size_t)r * (size_t)n;
    nn_k_lnrelu_row_dx(dx + row, dy + row, x + row, save[r], save[rows + r], gamma, beta, n);
  }
}

void cu_lnrelu_forward(real *y, real *save, const real *x, const real *gamma, const real *beta, int rows, int n) {
  if (rows <= 0 || n <= 0) return;
  lnrelu_fwd<<<cu_grid((size_t)rows), CU_THREADS, 0, cu_stream()>>>(y, save, x, gamma, beta, rows, n);
  CU_LAUNCHED("lnrelu_fwd");
}

void cu_lnrelu_backward(real *dx, real *dgamma, real *dbeta, const real *dy, const real *x, const real *save,
                        const real *gamma, const real *beta, int rows, int n) {
  if (rows <= 0 || n <= 0) return;
  real *part, *share = share_rows(rows, n, &part);
  if (!share) return;
  lnrelu_dparams<<<cu_grid((size_t)rows), CU_THREADS, 0, cu_stream()>>>(share, dy, x, save, gamma, beta, rows, n);
  CU_LAUNCHED("lnrelu_dparams");
  add_shares(dgamma, dbeta, share, part, rows, n);
  if (!dx) return;
  lnrelu_dx<<<cu_grid((size_t)rows), CU_THREADS, 0, cu_stream()>>>(dx, dy, x, save, gamma, beta, rows, n);
  CU_LAUNCHED("lnrelu_dx");
}
