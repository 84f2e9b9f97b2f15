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
#include "models/kernels/lnrelu.h"

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

/* Per row r of x (rows x n), the row bodies of models/kernels/lnrelu.h:
 * y = relu(gamma (x - mean) rstd + beta), rstd = 1/sqrt(var + eps). save:
 * mean at save[r], rstd at save[rows + r]. y may be x. */
void nn_lnrelu_forward(real *y, real *save, const real *x, const real *gamma, const real *beta, int rows, int n) {
  real *mean = save, *rstd = save + rows;
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; r++)
    nn_k_lnrelu_row_forward(y + (size_t)r * n, &mean[r], &rstd[r], x + (size_t)r * n, gamma, beta, n);
}

/* dgamma, dbeta += each row's share, serially in row order; then dx (may be
 * dy) row by row. */
void nn_lnrelu_backward(real *dx, real *dgamma, real *dbeta, const real *dy, const real *x, const real *save,
                        const real *gamma, const real *beta, int rows, int n) {
  const real *mean = save, *rstd = save + rows;
  for (int r = 0; r < rows; r++) /* serial: a fixed order of summation */
    nn_k_lnrelu_row_dparams(dgamma, dbeta, dy + (size_t)r * n, x + (size_t)r * n, mean[r], rstd[r], gamma, beta, n);
  if (dx) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++)
      nn_k_lnrelu_row_dx(dx + (size_t)r * n, dy + (size_t)r * n, x + (size_t)r * n, mean[r], rstd[r], gamma, beta, n);
  }
}
