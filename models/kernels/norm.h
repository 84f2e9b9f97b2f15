/* norm.h — the norm nonlinearity's per-node arithmetic (models/cpu/nn.h has
 * the layer, models/cpu/norm.c the formulas and the save layout): header-only
 * SE3_HD bodies, valid C and CUDA C++, that the CPU backend loops over and
 * the CUDA backend maps to threads, one node each. `real` is float in the
 * product and double in the gradient tests (models/real.h); square roots are
 * taken in double, as the CPU always did, so both backends round alike. */
#ifndef SE3_KERNELS_NORM_H
#define SE3_KERNELS_NORM_H

#include <math.h>

#include "models/real.h"
#include "models/so3.h" /* SE3_HD */

#define NN_NORM_MIN 0x1p-24 /* the clamp of the norms */
#define NN_NORM_EPS 1e-5    /* the layer norm's epsilon */

/* One node's forward: xn, yn: dim x C (yn may be xn); s, xh: C (saved);
 * returns 1/sqrt(var + eps). */
SE3_HD static inline real nn_k_norm_node_forward(real *yn, real *s, real *xh, const real *xn, const real *gamma,
                                                 const real *beta, int dim, int C) {
  real mean = 0;
  for (int c = 0; c < C; c++) {
    real q = 0;
    for (int m = 0; m < dim; m++)
      q += xn[m * C + c] * xn[m * C + c];
    real nrm = (real)sqrt((double)q);
    s[c] = nrm > (real)NN_NORM_MIN ? nrm : (real)NN_NORM_MIN;
    mean += s[c];
  }
  mean /= C;
  real var = 0;
  for (int c = 0; c < C; c++)
    var += (s[c] - mean) * (s[c] - mean);
  var /= C;
  real rstd = (real)(1 / sqrt((double)var + NN_NORM_EPS));
  for (int c = 0; c < C; c++) {
    xh[c] = (s[c] - mean) * rstd;
    real u = gamma[c] * xh[c] + beta[c], t = u > 0 ? u : 0, r = t / s[c];
    for (int m = 0; m < dim; m++)
      yn[m * C + c] = xn[m * C + c] * r;
  }
  return rstd;
}

/* One node's share of dgamma and dbeta (C each, added to). */
SE3_HD static inline void nn_k_norm_node_dparams(real *dgamma, real *dbeta, const real *dyn, const real *xn,
                                                 const real *s, const real *xh, const real *gamma, const real *beta,
                                                 int dim, int C) {
  for (int c = 0; c < C; c++) {
    real u = gamma[c] * xh[c] + beta[c];
    if (!(u > 0)) continue;
    real g = 0;
    for (int m = 0; m < dim; m++)
      g += dyn[m * C + c] * xn[m * C + c];
    real du = g / s[c];
    dgamma[c] += du * xh[c];
    dbeta[c] += du;
  }
}

/* One node's input gradient dxn (dim x C, overwritten; may be dyn). */
SE3_HD static inline void nn_k_norm_node_dx(real *dxn, const real *dyn, const real *xn, const real *s, const real *xh,
                                            real rstd, const real *gamma, const real *beta, int dim, int C) {
  real m1 = 0, m2 = 0; /* mean(dxh), mean(dxh xh) */
  for (int c = 0; c < C; c++) {
    real u = gamma[c] * xh[c] + beta[c];
    if (!(u > 0)) continue;
    real g = 0;
    for (int m = 0; m < dim; m++)
      g += dyn[m * C + c] * xn[m * C + c];
    real dxh = gamma[c] * g / s[c];
    m1 += dxh;
    m2 += dxh * xh[c];
  }
  m1 /= C;
  m2 /= C;
  for (int c = 0; c < C; c++) {
    real g = 0;
    for (int m = 0; m < dim; m++)
      g += dyn[m * C + c] * xn[m * C + c];
    real u = gamma[c] * xh[c] + beta[c], t = u > 0 ? u : 0;
    real dxh = u > 0 ? gamma[c] * g / s[c] : 0;
    real ds = -g * t / (s[c] * s[c]) + rstd * (dxh - m1 - xh[c] * m2);
    real r = t / s[c], k = s[c] > (real)NN_NORM_MIN ? ds / s[c] : 0;
    for (int m = 0; m < dim; m++)
      dxn[m * C + c] = dyn[m * C + c] * r + k * xn[m * C + c];
  }
}

#endif
