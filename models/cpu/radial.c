/* radial.c — the radial network of a convolution (nn.h): two dense layers
 * with layer norm and ReLU, then a dense layer without bias to the
 * convolution's radial weights. */
#include <stdlib.h>

#include "models/cpu/nn.h"

void nn_radial_hidden_forward(real *save, const real *x, const real *params, int E, int in, int H) {
  struct nn_radial_offsets o = nn_radial_offsets(in, H, 0);
  size_t eh = (size_t)E * (size_t)H;
  real *a1 = save, *s1 = a1 + eh, *a2 = s1 + eh, *s2 = a2 + eh, *st1 = s2 + eh, *st2 = st1 + 2 * (size_t)E;
  const real *p = params;
  nn_dense_forward(a1, x, p + o.W1, p + o.b1, E, in, H);
  nn_lnrelu_forward(s1, st1, a1, p + o.g1, p + o.be1, E, H);
  nn_dense_forward(a2, s1, p + o.W2, p + o.b2, E, H, H);
  nn_lnrelu_forward(s2, st2, a2, p + o.g2, p + o.be2, E, H);
}

void nn_radial_hidden_backward(real *dx, real *dparams, const real *ds2, const real *x, const real *save,
                               const real *params, int E, int in, int H) {
  struct nn_radial_offsets o = nn_radial_offsets(in, H, 0);
  size_t eh = (size_t)E * (size_t)H;
  const real *a1 = save, *s1 = a1 + eh, *a2 = s1 + eh, *s2 = a2 + eh, *st1 = s2 + eh, *st2 = st1 + 2 * (size_t)E;
  const real *p = params;
  real *dp = dparams;
  real *g1 = malloc(2 * eh * sizeof *g1 + sizeof *g1), *g2 = g1 + eh;                     /* two E x H work arrays */
  nn_lnrelu_backward(g2, dp + o.g2, dp + o.be2, ds2, a2, st2, p + o.g2, p + o.be2, E, H); /* g2 = d a2 */
  nn_dense_backward(g1, dp + o.W2, dp + o.b2, g2, s1, p + o.W2, E, H, H);                 /* g1 = d s1 */
  nn_lnrelu_backward(g2, dp + o.g1, dp + o.be1, g1, a1, st1, p + o.g1, p + o.be1, E, H);  /* g2 = d a1 */
  nn_dense_backward(dx, dp + o.W1, dp + o.b1, g2, x, p + o.W1, E, in, H);
  free(g1);
}

void nn_radial_forward(real *R, real *save, const real *x, const real *params, int E, int in, int H, int out) {
  nn_radial_hidden_forward(save, x, params, E, in, H);
  nn_dense_forward(R, nn_radial_s2(save, E, H), params + nn_radial_w3(in, H), NULL, E, H, out);
}

void nn_radial_backward(real *dx, real *dparams, const real *dR, const real *x, const real *save, const real *params,
                        int E, int in, int H, int out) {
  size_t w3 = nn_radial_w3(in, H);
  real *ds2 = malloc(((size_t)E * (size_t)H + 1) * sizeof *ds2);
  nn_dense_backward(ds2, dparams + w3, NULL, dR, nn_radial_s2(save, E, H), params + w3, E, H, out); /* d s2 */
  nn_radial_hidden_backward(dx, dparams, ds2, x, save, params, E, in, H);
  free(ds2);
}

void nn_scale_rows(real *x, const real *w, int rows, int n) {
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; r++) {
    real *xr = x + (size_t)r * (size_t)n;
    const real s = w[r];
    for (int i = 0; i < n; i++)
      xr[i] *= s;
  }
}
