/* dense.c — the per-degree equivariant linear map, dense layers with bias and
 * the layer norm + ReLU of the radial network and the MLP head (nn.h).
 *
 * Matrix products go through nn_mm (BLAS); the per-row work (bias, layer
 * norm) is OpenMP over rows, each row by one thread. Parameter gradients
 * that sum over rows are either a GEMM or a serial loop over rows, so their
 * order of summation never depends on how the rows were scheduled. */
#include <math.h>
#include <stddef.h>

#include "models/cpu/nn.h"
#include "models/so3.h" /* SE3_HD */

#define LN_EPS 1e-5

/* ---- equivariant linear ------------------------------------------------------ */

/* y (rows x cout) = x (rows x cin) W^T, W (cout x cin). */
void nn_linear_forward(real *y, const real *x, const real *W, int rows, int cin, int cout) {
  nn_mm(0, 1, rows, cout, cin, 1, x, cin, W, cin, 0, y, cout);
}

/* dx (rows x cin) = dy W; dW (cout x cin) += dy^T x. */
void nn_linear_backward(real *dx, real *dW, const real *dy, const real *x, const real *W, int rows, int cin, int cout) {
  if (dx) nn_mm(0, 0, rows, cin, cout, 1, dy, cout, W, cin, 0, dx, cin);
  nn_mm(1, 0, cout, cin, rows, 1, dy, cout, x, cin, 1, dW, cin);
}

/* ---- dense ------------------------------------------------------------------- */

/* y (rows x out) = x (rows x in) W^T + b; W (out x in), b (out) or NULL. */
void nn_dense_forward(real *y, const real *x, const real *W, const real *b, int rows, int in, int out) {
  nn_mm(0, 1, rows, out, in, 1, x, in, W, in, 0, y, out);
  if (!b) return;
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; r++) {
    real *yr = y + (size_t)r * out;
    for (int o = 0; o < out; o++)
      yr[o] += b[o];
  }
}

/* dx (rows x in) = dy W; dW += dy^T x; db (out) += sum over rows of dy. */
void nn_dense_backward(real *dx, real *dW, real *db, const real *dy, const real *x, const real *W, int rows, int in,
                       int out) {
  if (dx) nn_mm(0, 0, rows, in, out, 1, dy, out, W, in, 0, dx, in);
  nn_mm(1, 0, out, in, rows, 1, dy, out, x, in, 1, dW, in);
  if (!db) return;
  for (int r = 0; r < rows; r++) { /* serial: a fixed order of summation */
    const real *dyr = dy + (size_t)r * out;
    for (int o = 0; o < out; o++)
      db[o] += dyr[o];
  }
}

/* ---- layer norm + ReLU ------------------------------------------------------- */

/* Per row r of x (rows x n): mean, rstd = 1/sqrt(var + eps) (biased variance),
 * y = relu(gamma (x - mean) rstd + beta). save: mean at save[r], rstd at
 * save[rows + r]. y may be x (the statistics are taken before writing). */
/* One row's forward (SE3_HD: the CUDA launcher maps rows to threads); its
 * mean and 1/sqrt(var + eps) go to *mean and *rstd. */
SE3_HD static inline void lnrelu_row_forward(real *yr, real *mean, real *rstd, const real *xr, const real *gamma,
                                             const real *beta, int n) {
  real m = 0;
  for (int i = 0; i < n; i++)
    m += xr[i];
  m /= n;
  real v = 0;
  for (int i = 0; i < n; i++) {
    real d = xr[i] - m;
    v += d * d;
  }
  v /= n;
  real s = (real)(1 / sqrt((double)v + LN_EPS));
  for (int i = 0; i < n; i++) {
    real xh = (xr[i] - m) * s, u = gamma[i] * xh + beta[i]; /* as in the backward */
    yr[i] = u > 0 ? u : 0;
  }
  *mean = m;
  *rstd = s;
}

void nn_lnrelu_forward(real *y, real *save, const real *x, const real *gamma, const real *beta, int rows, int n) {
  real *mean = save, *rstd = save + rows;
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; r++)
    lnrelu_row_forward(y + (size_t)r * n, &mean[r], &rstd[r], x + (size_t)r * n, gamma, beta, n);
}

/* With xhat = (x - mean) rstd, u = gamma xhat + beta and du = dy [u > 0]:
 *   dgamma += sum_r du xhat, dbeta += sum_r du,
 *   dx = rstd (g - mean(g) - xhat mean(g xhat)), g = gamma du (per row).
 * dx may be dy (parameter gradients first, then each row's sums before the
 * row is written). */
SE3_HD static inline void lnrelu_row_dparams(real *dgamma, real *dbeta, const real *dyr, const real *xr, real m, real s,
                                             const real *gamma, const real *beta, int n) {
  for (int i = 0; i < n; i++) {
    real xh = (xr[i] - m) * s, u = gamma[i] * xh + beta[i];
    if (u > 0) {
      dgamma[i] += dyr[i] * xh;
      dbeta[i] += dyr[i];
    }
  }
}

SE3_HD static inline void lnrelu_row_dx(real *dxr, const real *dyr, const real *xr, real m, real s, const real *gamma,
                                        const real *beta, int n) {
  real sg = 0, sgx = 0; /* sum g, sum g xhat */
  for (int i = 0; i < n; i++) {
    real xh = (xr[i] - m) * s, u = gamma[i] * xh + beta[i];
    real g = u > 0 ? gamma[i] * dyr[i] : 0;
    sg += g;
    sgx += g * xh;
  }
  sg /= n;
  sgx /= n;
  for (int i = 0; i < n; i++) {
    real xh = (xr[i] - m) * s, u = gamma[i] * xh + beta[i];
    real g = u > 0 ? gamma[i] * dyr[i] : 0;
    dxr[i] = s * (g - sg - xh * sgx);
  }
}

void nn_lnrelu_backward(real *dx, real *dgamma, real *dbeta, const real *dy, const real *x, const real *save,
                        const real *gamma, const real *beta, int rows, int n) {
  const real *mean = save, *rstd = save + rows;
  for (int r = 0; r < rows; r++) /* serial: a fixed order of summation */
    lnrelu_row_dparams(dgamma, dbeta, dy + (size_t)r * n, x + (size_t)r * n, mean[r], rstd[r], gamma, beta, n);
  if (dx) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++)
      lnrelu_row_dx(dx + (size_t)r * n, dy + (size_t)r * n, x + (size_t)r * n, mean[r], rstd[r], gamma, beta, n);
  }
}
