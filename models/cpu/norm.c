/* norm.c — the norm nonlinearity of one degree (NVIDIA's NormSE3 with layer
 * norm): only the norms of the channels change, so the layer is equivariant.
 *
 * Per node n and channel c of x (N x dim x C):
 *   s[n,c]  = max(|x[n,:,c]|, 2^-24)
 *   xh[n,c] = (s[n,c] - mean_c s[n,.]) rstd[n],  rstd = 1/sqrt(var_c s[n,.] + 1e-5)
 *   t[n,c]  = relu(gamma[c] xh[n,c] + beta[c])
 *   y[n,m,c] = x[n,m,c] t[n,c] / s[n,c]
 * save layout (nn_norm_save_size = 2 N C + N reals):
 *   s at save[n C + c], xh at save[N C + n C + c], rstd at save[2 N C + n].
 *
 * Backward, per node (g, du, ... per channel; means over the C channels):
 *   g   = sum_m dy[m] x[m]               (dL/d(t/s))
 *   du  = [u > 0] g / s,  u = gamma xh + beta
 *   dgamma += du xh, dbeta += du
 *   dxh = gamma du
 *   ds  = -g t / s^2 + rstd (dxh - mean(dxh) - xh mean(dxh xh))
 *   dx[m] = dy[m] t / s + ds x[m] / s    (the second term only where the
 *           clamp is not active, s > 2^-24: else s does not depend on x) */
#include <math.h>
#include <stddef.h>

#include "models/cpu/nn.h"
#include "models/so3.h" /* SE3_HD */

#define NORM_MIN 0x1p-24 /* the clamp of the norms */
#define NORM_EPS 1e-5    /* the layer norm's epsilon */

/* One node's forward (SE3_HD: the CUDA launcher maps nodes to threads):
 * xn, yn: dim x C; s, xh: C (saved); returns 1/sqrt(var + eps). */
SE3_HD static inline real norm_node_forward(real *yn, real *s, real *xh, const real *xn, const real *gamma,
                                            const real *beta, int dim, int C) {
  real mean = 0;
  for (int c = 0; c < C; c++) {
    real q = 0;
    for (int m = 0; m < dim; m++)
      q += xn[m * C + c] * xn[m * C + c];
    real nrm = sqrt(q);
    s[c] = nrm > (real)NORM_MIN ? nrm : (real)NORM_MIN;
    mean += s[c];
  }
  mean /= C;
  real var = 0;
  for (int c = 0; c < C; c++)
    var += (s[c] - mean) * (s[c] - mean);
  var /= C;
  real rstd = (real)(1 / sqrt((double)var + NORM_EPS));
  for (int c = 0; c < C; c++) {
    xh[c] = (s[c] - mean) * rstd;
    real u = gamma[c] * xh[c] + beta[c], t = u > 0 ? u : 0, r = t / s[c];
    for (int m = 0; m < dim; m++)
      yn[m * C + c] = xn[m * C + c] * r;
  }
  return rstd;
}

/* One node's share of dgamma and dbeta (added to). */
SE3_HD static inline void norm_node_dparams(real *dgamma, real *dbeta, const real *dyn, const real *xn, const real *s,
                                            const real *xh, const real *gamma, const real *beta, int dim, int C) {
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
SE3_HD static inline void norm_node_dx(real *dxn, const real *dyn, const real *xn, const real *s, const real *xh,
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
    real r = t / s[c], k = s[c] > (real)NORM_MIN ? ds / s[c] : 0;
    for (int m = 0; m < dim; m++)
      dxn[m * C + c] = dyn[m * C + c] * r + k * xn[m * C + c];
  }
}

/* x, y: N x dim x C (y may be x); gamma, beta: C; save as above. */
void nn_norm_forward(real *y, real *save, const real *x, const real *gamma, const real *beta, int N, int dim, int C) {
  real *S = save, *XH = save + (size_t)N * C, *RSTD = save + 2 * (size_t)N * C;
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++)
    RSTD[n] = norm_node_forward(y + (size_t)n * dim * C, S + (size_t)n * C, XH + (size_t)n * C, x + (size_t)n * dim * C,
                                gamma, beta, dim, C);
}

/* dx (N x dim x C, overwritten, may be NULL or dy), dgamma, dbeta (C, added
 * to) from dy (N x dim x C), with the forward's x and save. */
void nn_norm_backward(real *dx, real *dgamma, real *dbeta, const real *dy, const real *x, const real *save,
                      const real *gamma, const real *beta, int N, int dim, int C) {
  const real *S = save, *XH = save + (size_t)N * C, *RSTD = save + 2 * (size_t)N * C;
  for (int n = 0; n < N; n++) /* serial: a fixed order of summation */
    norm_node_dparams(dgamma, dbeta, dy + (size_t)n * dim * C, x + (size_t)n * dim * C, S + (size_t)n * C,
                      XH + (size_t)n * C, gamma, beta, dim, C);
  if (!dx) return;
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++)
    norm_node_dx(dx + (size_t)n * dim * C, dy + (size_t)n * dim * C, x + (size_t)n * dim * C, S + (size_t)n * C,
                 XH + (size_t)n * C, RSTD[n], gamma, beta, dim, C);
}
