/* loss.h — the training loss of a batch (models/objective.h documents the
 * kinds) and the gradient clipping factor: header-only SE3_HD bodies, valid
 * C and CUDA C++. objective.c's nn_loss and model.c's clipping call them on
 * the host; the CUDA backend calls them in a kernel, so a step whose loss
 * and clipping stay on the GPU does the same arithmetic as the host's. A
 * batch's predictions are a few hundred reals: the sum is one serial loop in
 * double, in index order, on both. */
#ifndef SE3_KERNELS_LOSS_H
#define SE3_KERNELS_LOSS_H

#include <math.h>

#include "models/real.h"
#include "models/so3.h" /* SE3_HD */

/* objective.h's enum nn_loss, as plain ints (that header is C only). */
enum { NN_K_LOSS_L1 = 0, NN_K_LOSS_MSE = 1, NN_K_LOSS_HUBER = 2, NN_K_LOSS_BCE = 3 };

SE3_HD static inline double nn_k_sign(double r) { return r > 0 ? 1 : r < 0 ? -1 : 0; }

/* One entry's loss and, in *d, its derivative with respect to the
 * prediction p (before the mean's 1/count). */
SE3_HD static inline double nn_k_loss_one(int kind, double p, double t, double delta, double *d) {
  double r = p - t;
  switch (kind) {
  case NN_K_LOSS_L1:
    *d = nn_k_sign(r);
    return fabs(r);
  case NN_K_LOSS_MSE:
    *d = 2 * r;
    return r * r;
  case NN_K_LOSS_HUBER:
    if (fabs(r) <= delta) {
      *d = r;
      return 0.5 * r * r;
    }
    *d = delta * nn_k_sign(r);
    return delta * (fabs(r) - 0.5 * delta);
  case NN_K_LOSS_BCE: {
    /* z = p logits, t targets: softplus(z) - z t in the stable form, and
     * sigmoid(z) from exp(-|z|) <= 1 so nothing overflows. delta != 1
     * weighs the positive term (PyTorch's pos_weight): (1 - t) softplus(z)
     * + delta t softplus(-z), softplus(-z) = softplus(z) - z; delta 1 keeps
     * the unweighted form's every bit */
    double e = exp(-fabs(p));
    double sig = p >= 0 ? 1 / (1 + e) : e / (1 + e);
    if (delta != 1) {
      double sp = fmax(p, 0.0) + log1p(e);
      *d = (1 - t) * sig - delta * t * (1 - sig);
      return (1 - t) * sp + delta * t * (sp - p);
    }
    *d = sig - t;
    return fmax(p, 0.0) - p * t + log1p(e);
  }
  }
  *d = 0;
  return 0;
}

/* objective.h's nn_loss: the mean over the counted entries (mask NULL: all
 * n), delta already checked, dpred (may be NULL) overwritten. */
SE3_HD static inline double nn_k_loss(int kind, const real *pred, const real *target, const unsigned char *mask, int n,
                                      double delta, real *dpred) {
  int count = 0;
  for (int i = 0; i < n; i++)
    count += !mask || mask[i];
  if (count == 0) {
    if (dpred)
      for (int i = 0; i < n; i++)
        dpred[i] = 0;
    return 0;
  }
  double sum = 0, inv = 1.0 / count;
  for (int i = 0; i < n; i++) {
    if (mask && !mask[i]) {
      if (dpred) dpred[i] = 0;
      continue;
    }
    double d;
    sum += nn_k_loss_one(kind, pred[i], target[i], delta, &d);
    if (dpred) dpred[i] = (real)(d * inv);
  }
  return sum * inv;
}

/* A training step's loss as the train stage takes it (backend.h's `loss`):
 * nn_k_loss over n entries, then the gradient times num / den when they
 * differ (a process's share of num molecules of a batch of den) and times
 * gscale when it is not 1 (loss scaling), each product rounded to real;
 * acc[0] = the loss times num, acc[1] += acc[0]. */
SE3_HD static inline void nn_k_step_loss(real *dpred, double *acc, const real *pred, const real *target, int n,
                                         int kind, double delta, int num, int den, double gscale) {
  double part = nn_k_loss(kind, pred, target, (const unsigned char *)0, n, delta, dpred) * num;
  if (num != den)
    for (int i = 0; i < n; i++)
      dpred[i] = (real)((double)dpred[i] * num / den);
  if (gscale != 1)
    for (int i = 0; i < n; i++)
      dpred[i] = (real)((double)dpred[i] * gscale);
  acc[0] = part;
  acc[1] += part;
}

/* Clipping a gradient that is `unscale` times the true one (model.h's
 * se3_net_unscale_clip) from its sum of squares ss: *norm = the true
 * gradient's norm; returns the factor to multiply the gradient by (1:
 * leave it; also when the norm is not finite). */
SE3_HD static inline double nn_k_clip_factor(double ss, double unscale, double max_norm, double *norm) {
  double nm = sqrt(ss);
  if (unscale != 1) nm /= unscale;
  *norm = nm;
  if (!isfinite(nm)) return 1;
  if (max_norm > 0 && nm > max_norm) return unscale != 1 ? max_norm / nm / unscale : max_norm / nm;
  if (unscale != 1) return 1 / unscale;
  return 1;
}

#endif
