/* optim.c — Adam / AdamW and gradient clipping on the CPU (optim.h).
 *
 * The Adam update is element-wise (OpenMP over elements, each element's
 * arithmetic in double); the norm is summed serially in index order, so
 * every result is independent of the thread count. */
#include <math.h>
#include <stddef.h>

#include "models/cpu/optim.h"
#include "models/kernels/adam.h"

/* ---- Adam / AdamW ------------------------------------------------------------ */

void nn_adam_step(real *params, real *m, real *v, const real *grad, size_t n, const struct nn_adam *o, long step,
                  double lr) {
  double sched[NN_K_ADAM_SCHED];
  nn_k_adam_sched(sched, o->beta1, o->beta2, step, lr);
  nn_adam_step_at(params, m, v, grad, n, o, sched);
}

void nn_adam_step_at(real *params, real *m, real *v, const real *grad, size_t n, const struct nn_adam *o,
                     const double *sched) {
  const double b1 = o->beta1, b2 = o->beta2, eps = o->eps, wd = o->weight_decay;
  const double c1 = sched[0], c2 = sched[1], lr = sched[2];
  if (nn_k_adam_skip(sched)) return;
#pragma omp parallel for schedule(static)
  for (long i = 0; i < (long)n; i++)
    nn_k_adam_one(&params[i], &m[i], &v[i], grad[i], b1, b2, eps, wd, o->decoupled, c1, c2, lr);
}

/* ---- gradient norm and clipping ----------------------------------------------- */

double nn_grad_norm(const real *g, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; i++)
    s += (double)g[i] * (double)g[i];
  return sqrt(s);
}

double nn_grad_clip(real *g, size_t n, double max_norm) {
  double norm = nn_grad_norm(g, n);
  if (max_norm > 0 && isfinite(norm) && norm > max_norm) {
    double scale = max_norm / norm;
#pragma omp parallel for schedule(static)
    for (long i = 0; i < (long)n; i++)
      g[i] = (real)(g[i] * scale);
  }
  return norm;
}
