/* radial.cu — the radial network's hidden layers (models/cpu/nn.h,
 * models/cpu/radial.c): dense + layer norm + ReLU twice, from this backend's
 * dense (gemm.cu) and lnrelu (norm.cu) pieces, with the CPU's save layout
 * (models/layers.h): a1, s1, a2, s2 (E x H each), then the two layers'
 * statistics (2 E each). The backward's two E x H work arrays are in the
 * CU_SCRATCH_LAYER slot, since the pieces use CU_SCRATCH_OP themselves. */
#include "models/cuda/cuda.h"

void cu_radial_hidden_forward(real *save, const real *x, const real *params, int E, int in, int H) {
  struct nn_radial_offsets o = nn_radial_offsets(in, H, 0);
  size_t eh = (size_t)E * (size_t)H;
  real *a1 = save, *s1 = a1 + eh, *a2 = s1 + eh, *s2 = a2 + eh, *st1 = s2 + eh, *st2 = st1 + 2 * (size_t)E;
  const real *p = params;
  cu_dense_forward(a1, x, p + o.W1, p + o.b1, E, in, H);
  cu_lnrelu_forward(s1, st1, a1, p + o.g1, p + o.be1, E, H);
  cu_dense_forward(a2, s1, p + o.W2, p + o.b2, E, H, H);
  cu_lnrelu_forward(s2, st2, a2, p + o.g2, p + o.be2, E, H);
}

void cu_radial_hidden_backward(real *dx, real *dparams, const real *ds2, const real *x, const real *save,
                               const real *params, int E, int in, int H) {
  struct nn_radial_offsets o = nn_radial_offsets(in, H, 0);
  size_t eh = (size_t)E * (size_t)H;
  const real *a1 = save, *s1 = a1 + eh, *a2 = s1 + eh, *st1 = a2 + 2 * eh, *st2 = st1 + 2 * (size_t)E; /* s2 unused */
  const real *p = params;
  real *dp = dparams;
  char *w = (char *)cu_scratch(CU_SCRATCH_LAYER, 2 * cu_round(eh * sizeof(real) + 1));
  if (!w) return;
  real *g1 = (real *)cu_carve(&w, eh * sizeof(real) + 1), *g2 = (real *)cu_carve(&w, eh * sizeof(real) + 1);
  cu_lnrelu_backward(g2, dp + o.g2, dp + o.be2, ds2, a2, st2, p + o.g2, p + o.be2, E, H); /* g2 = d a2 */
  cu_dense_backward(g1, dp + o.W2, dp + o.b2, g2, s1, p + o.W2, E, H, H);                 /* g1 = d s1 */
  cu_lnrelu_backward(g2, dp + o.g1, dp + o.be1, g1, a1, st1, p + o.g1, p + o.be1, E, H);  /* g2 = d a1 */
  cu_dense_backward(dx, dp + o.W1, dp + o.b1, g2, x, p + o.W1, E, in, H);
}
