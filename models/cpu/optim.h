/* optim.h — the CPU backend's optimizer: the Adam / AdamW update and
 * gradient-norm clipping (the schedule and the losses, computed on the host
 * for every backend, are in models/objective.h).
 *
 * Everything is element-wise or summed serially in double in index order, so
 * results never depend on the thread count. Arrays are `real` (real.h):
 * float in the product, double in the gradient tests. */
#ifndef SE3_OPTIM_H
#define SE3_OPTIM_H

#include <stddef.h>

#include "models/cpu/real.h"
#include "models/layers.h"

/* ---- Adam / AdamW ------------------------------------------------------------
 * One update of n parameters with their first and second moments m, v
 * (zero-initialised before step 1, updated in place) and gradient grad. For
 * each element, in double (stored back as real), with t = step (1-based;
 * step < 1 is taken as 1), lr the learning rate of this step:
 *   g  = grad + (decoupled ? 0 : weight_decay * p)       (Adam: L2 in the gradient)
 *   m  = beta1 m + (1 - beta1) g
 *   v  = beta2 v + (1 - beta2) g^2
 *   p' = p - lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
 *          - (decoupled ? lr * weight_decay * p : 0)     (AdamW: decay of the old p)
 * So with the same moments, AdamW's p' is Adam-without-decay's p' minus
 * exactly lr * weight_decay * p (PyTorch's AdamW). Typical: beta1 0.9,
 * beta2 0.999, eps 1e-8. OpenMP over elements. */
/* struct nn_adam: models/layers.h */
void nn_adam_step(real *params, real *m, real *v, const real *grad, size_t n, const struct nn_adam *o, long step,
                  double lr);
/* The same with {c1, c2, lr} = {1 - beta1^t, 1 - beta2^t, lr} given, then
 * {norm, skip}: nothing is updated when skip != 0 and norm is not finite
 * (models/kernels/adam.h's nn_k_adam_sched, nn_k_adam_skip). */
void nn_adam_step_at(real *params, real *m, real *v, const real *grad, size_t n, const struct nn_adam *o,
                     const double *sched);

/* ---- gradient norm and clipping -----------------------------------------------
 * nn_grad_norm: sqrt(sum g_i^2), summed in double in index order.
 * nn_grad_clip: when max_norm > 0 and the norm exceeds it, multiplies g by
 * max_norm / norm (the norm becomes max_norm, to real round-off). Returns the
 * norm before clipping. A non-finite norm leaves g alone (the caller should
 * skip the step). */
double nn_grad_norm(const real *g, size_t n);
double nn_grad_clip(real *g, size_t n, double max_norm);

#endif
