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
#include "models/kernels/norm.h"

/* x, y: N x dim x C (y may be x); gamma, beta: C; save as above. The
 * per-node bodies are in models/kernels/norm.h. */
void nn_norm_forward(real *y, real *save, const real *x, const real *gamma, const real *beta, int N, int dim, int C) {
  real *S = save, *XH = save + (size_t)N * C, *RSTD = save + 2 * (size_t)N * C;
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++)
    RSTD[n] = nn_k_norm_node_forward(y + (size_t)n * dim * C, S + (size_t)n * C, XH + (size_t)n * C,
                                     x + (size_t)n * dim * C, gamma, beta, dim, C);
}

/* dx (N x dim x C, overwritten, may be NULL or dy), dgamma, dbeta (C, added
 * to) from dy (N x dim x C), with the forward's x and save. */
void nn_norm_backward(real *dx, real *dgamma, real *dbeta, const real *dy, const real *x, const real *save,
                      const real *gamma, const real *beta, int N, int dim, int C) {
  const real *S = save, *XH = save + (size_t)N * C, *RSTD = save + 2 * (size_t)N * C;
  for (int n = 0; n < N; n++) /* serial: a fixed order of summation */
    nn_k_norm_node_dparams(dgamma, dbeta, dy + (size_t)n * dim * C, x + (size_t)n * dim * C, S + (size_t)n * C,
                           XH + (size_t)n * C, gamma, beta, dim, C);
  if (!dx) return;
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++)
    nn_k_norm_node_dx(dx + (size_t)n * dim * C, dy + (size_t)n * dim * C, x + (size_t)n * dim * C, S + (size_t)n * C,
                      XH + (size_t)n * C, RSTD[n], gamma, beta, dim, C);
}
