/* optim.h — what training needs besides the layers: the Adam / AdamW update,
 * the learning-rate schedule (linear warm-up, then cosine annealing with warm
 * restarts), gradient-norm clipping and the losses on a batch of predictions.
 *
 * Everything is element-wise or summed serially in double in index order, so
 * results never depend on the thread count. Arrays are `real` (real.h):
 * float in the product, double in the gradient tests. */
#ifndef SE3_OPTIM_H
#define SE3_OPTIM_H

#include <stddef.h>

#include "models/cpu/real.h"

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
struct nn_adam {
  double beta1, beta2, eps, weight_decay;
  int decoupled; /* 0: Adam with L2 decay in the gradient; 1: AdamW */
};
void nn_adam_step(real *params, real *m, real *v, const real *grad, size_t n, const struct nn_adam *o, long step,
                  double lr);

/* ---- learning-rate schedule ---------------------------------------------------
 * The learning rate of 0-based step `step`:
 *   warm-up   step < warmup: lr (step + 1) / warmup — linear, step 0 gets
 *             lr / warmup and step warmup - 1 the full lr (warmup <= 0: none);
 *   then      with t = step - max(warmup, 0): cosine annealing with warm
 *             restarts (SGDR). Cycle i lasts P_i = period * period_mult^i
 *             steps (real-valued when period_mult is not an integer); at
 *             position u in [0, P_i) of its cycle
 *               lr(u) = min_lr + (lr - min_lr) (1 + cos(pi u / P_i)) / 2,
 *             so a cycle starts at lr, is at (lr + min_lr) / 2 halfway and
 *             nears min_lr at its end; the next cycle restarts at lr.
 *             period <= 0: constant lr after the warm-up. period_mult < 1
 *             (or not finite) is taken as 1 (a fixed period).
 * step < 0 is taken as 0. */
struct nn_schedule {
  double lr, min_lr;
  long warmup;
  long period;
  double period_mult;
};
double nn_schedule_lr(const struct nn_schedule *s, long step);

/* ---- gradient norm and clipping -----------------------------------------------
 * nn_grad_norm: sqrt(sum g_i^2), summed in double in index order.
 * nn_grad_clip: when max_norm > 0 and the norm exceeds it, multiplies g by
 * max_norm / norm (the norm becomes max_norm, to real round-off). Returns the
 * norm before clipping. A non-finite norm leaves g alone (the caller should
 * skip the step). */
double nn_grad_norm(const real *g, size_t n);
double nn_grad_clip(real *g, size_t n, double max_norm);

/* ---- losses ---------------------------------------------------------------------
 * Mean over the counted entries (mask[i] != 0; mask NULL = all n) of, with
 * r = pred - target:
 *   NN_LOSS_L1     |r|                      derivative sign(r), 0 at r = 0
 *   NN_LOSS_MSE    r^2                      2 r
 *   NN_LOSS_HUBER  r^2 / 2 if |r| <= delta  r
 *                  delta (|r| - delta / 2)  delta sign(r)
 *                  (delta = huber_delta; <= 0 or not finite is taken as 1)
 *   NN_LOSS_BCE    pred are logits z, target y in [0, 1] (usually 0 or 1):
 *                  max(z, 0) - z y + log1p(exp(-|z|))   sigmoid(z) - y
 *                  (the log-sum-exp form of -y log s(z) - (1-y) log(1-s(z)),
 *                  finite for any finite z)
 * Returns the loss (summed in double in index order) and, when dpred is not
 * NULL, writes d loss / d pred into dpred[0..n-1] (overwritten; the mean's
 * 1/count included; 0 for masked-out entries). No counted entry: returns 0
 * with a zero gradient. Standardising targets is the caller's business
 * (nn_standardize). */
enum nn_loss { NN_LOSS_L1, NN_LOSS_MSE, NN_LOSS_HUBER, NN_LOSS_BCE };
double nn_loss(enum nn_loss kind, const real *pred, const real *target, const unsigned char *mask, int n,
               double huber_delta, real *dpred);

/* Mean and population standard deviation (divided by n) of y[0..n-1], two
 * passes in double. std = 1 when it would be 0 or not finite; n <= 0 gives
 * mean 0, std 1. Standardise with (y - mean) / std. */
void nn_standardize(double *mean, double *std, const double *y, int n);

#endif
