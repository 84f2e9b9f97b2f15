/* lnrelu.h — the per-row arithmetic of the layer norm + ReLU of the radial
 * network and the MLP head (models/cpu/nn.h, models/cpu/dense.c): header-only
 * SE3_HD bodies, valid C and CUDA C++, that the CPU backend loops over and
 * the CUDA backend maps to threads, one row each.
 *
 * Per row of n values: mean, rstd = 1/sqrt(var + eps) (biased variance),
 * xhat = (x - mean) rstd, u = gamma xhat + beta, y = relu(u). Backward, with
 * du = dy [u > 0] and g = gamma du:
 *   dgamma += du xhat, dbeta += du,
 *   dx = rstd (g - mean(g) - xhat mean(g xhat)). */
#ifndef SE3_KERNELS_LNRELU_H
#define SE3_KERNELS_LNRELU_H

#include <math.h>

#include "models/real.h"
#include "models/so3.h" /* SE3_HD */

#define NN_LN_EPS 1e-5

/* One row's forward; its mean and 1/sqrt(var + eps) go to *mean and *rstd.
 * yr may be xr (the statistics are taken before writing). */
SE3_HD static inline void nn_k_lnrelu_row_forward(real *yr, real *mean, real *rstd, const real *xr, const real *gamma,
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
  real s = (real)(1 / sqrt((double)v + NN_LN_EPS));
  for (int i = 0; i < n; i++) {
    real xh = (xr[i] - m) * s, u = gamma[i] * xh + beta[i]; /* as in the backward */
    yr[i] = u > 0 ? u : 0;
  }
  *mean = m;
  *rstd = s;
}

/* One row's share of dgamma and dbeta (n each, added to). */
SE3_HD static inline void nn_k_lnrelu_row_dparams(real *dgamma, real *dbeta, const real *dyr, const real *xr, real m,
                                                  real s, const real *gamma, const real *beta, int n) {
  for (int i = 0; i < n; i++) {
    real xh = (xr[i] - m) * s, u = gamma[i] * xh + beta[i];
    if (u > 0) {
      dgamma[i] += dyr[i] * xh;
      dbeta[i] += dyr[i];
    }
  }
}

/* One row's input gradient dxr (overwritten; may be dyr: each row's sums are
 * taken before the row is written). */
SE3_HD static inline void nn_k_lnrelu_row_dx(real *dxr, const real *dyr, const real *xr, real m, real s,
                                             const real *gamma, const real *beta, int n) {
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

#endif
