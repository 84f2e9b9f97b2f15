/* layout.c — the sizes and layouts the layers agree on (layers.h), the same
 * for every backend. */
#include "models/layers.h"

int nn_fiber_width(const struct nn_fiber *f) {
  int w = 0;
  for (int d = 0; d <= NN_MAX_DEG; d++)
    w += f->ch[d] * NN_DIM(d);
  return w;
}

size_t nn_norm_save_size(int N, int C) { return 2 * (size_t)N * C + (size_t)N; }

size_t nn_radial_params(int in, int H, int out) { return nn_radial_offsets(in, H, out).n; }

/* save: a1, s1, a2, s2 (E x H each), then two lnrelu statistics (2E each). */
size_t nn_radial_save_size(int E, int H) { return 4 * (size_t)E * (size_t)H + 4 * (size_t)E; }

size_t nn_radial_w3(int in, int H) { return nn_radial_offsets(in, H, 0).W3; }

const real *nn_radial_s2(const real *save, int E, int H) { return save + 3 * (size_t)E * (size_t)H; }

size_t nn_conv_radial_size(const struct nn_fiber *fin, const struct nn_fiber *fout) {
  size_t n = 0;
  for (int l = 0; l <= NN_MAX_DEG; l++)
    n += (size_t)fout->ch[l] * (size_t)nn_conv_radial_cols(fin, l);
  return n;
}

double nn_conv_flops(const struct nn_fiber *fin, const struct nn_fiber *fout, const struct basis_plan *plan, int H) {
  double f = 0;
  for (int l = 0; l <= NN_MAX_DEG; l++) /* R_l (2H per entry) and its contraction (2 (2l+1) per entry) */
    f += (double)fout->ch[l] * nn_conv_radial_cols(fin, l) * (2.0 * H + 2.0 * NN_DIM(l));
  for (int k = 0; k <= NN_MAX_DEG && k <= plan->max_degree; k++) /* T_k = F_k x_k */
    f += 2.0 * (double)plan->fused_rows[k] * NN_DIM(k) * fin->ch[k];
  return f;
}
