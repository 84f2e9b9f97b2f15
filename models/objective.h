/* objective.h — what training computes besides the model, the same
 * whatever backend runs it: the learning-rate schedule, the losses on a
 * batch of predictions (a few reals per molecule) and the standardisation
 * of targets. Sums are serial, in double, in index order. The losses'
 * arithmetic is models/kernels/loss.h's, which a backend also runs on its
 * device (backend.h's `loss`), so a step's loss need not come back to the
 * host. */
#ifndef SE3_OBJECTIVE_H
#define SE3_OBJECTIVE_H

#include <stddef.h>

#include "models/real.h"

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
 *                  finite for any finite z); with huber_delta = w != 1 the
 *                  positive term is weighted (PyTorch's pos_weight, the
 *                  train stage's class_weight): -w y log s(z) - (1-y)
 *                  log(1-s(z)), derivative (1-y) s(z) - w y (1 - s(z))
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

/* ---- dynamic loss scaling (precision: fp16) --------------------------------------
 * fp16 products lose gradients below about 6e-8 and overflow above 65504.
 * The gradient of the loss is multiplied by `scale` before the backward and
 * divided by it after. A step whose (unscaled) gradient norm is not finite
 * is skipped and the scale halved (not below 1); after `grow_every`
 * finite steps in a row the scale doubles (not above 2^24). */
#define NN_LOSS_SCALE_INIT 65536.0
#define NN_LOSS_SCALE_GROW_EVERY 2000
struct nn_loss_scaler {
  double scale;
  long good; /* finite steps since the last change */
};
void nn_loss_scaler_init(struct nn_loss_scaler *s);
/* After a step's gradient norm: 1 when the step is to be taken, 0 when it
 * is to be skipped. */
int nn_loss_scaler_update(struct nn_loss_scaler *s, double norm, long grow_every);

#endif
