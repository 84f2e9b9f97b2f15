/* objective.c — the host arithmetic of training (objective.h). */
#include "models/objective.h"

#include <math.h>

#define OPT_PI 3.14159265358979323846

/* ---- learning-rate schedule ----------------------------------------------------- */

double nn_schedule_lr(const struct nn_schedule *s, long step) {
  if (step < 0) step = 0;
  long warm = s->warmup > 0 ? s->warmup : 0;
  if (step < warm) return s->lr * (double)(step + 1) / (double)warm;
  if (s->period <= 0) return s->lr;
  double mult = s->period_mult;
  if (!(mult >= 1) || !isfinite(mult)) mult = 1;
  double u = (double)(step - warm), P = (double)s->period;
  if (mult == 1) {
    u = fmod(u, P);
  } else {
    while (u >= P) { /* cycles grow geometrically: a logarithmic number of turns */
      u -= P;
      P *= mult;
    }
  }
  return s->min_lr + (s->lr - s->min_lr) * 0.5 * (1 + cos(OPT_PI * u / P));
}

/* ---- losses --------------------------------------------------------------------- */

static double sign(double r) { return r > 0 ? 1 : r < 0 ? -1 : 0; }

/* Loss of one entry and its derivative w.r.t. the prediction (before the
 * mean's 1/count). */
static double loss_one(enum nn_loss kind, double p, double t, double delta, double *d) {
  double r = p - t;
  switch (kind) {
  case NN_LOSS_L1:
    *d = sign(r);
    return fabs(r);
  case NN_LOSS_MSE:
    *d = 2 * r;
    return r * r;
  case NN_LOSS_HUBER:
    if (fabs(r) <= delta) {
      *d = r;
      return 0.5 * r * r;
    }
    *d = delta * sign(r);
    return delta * (fabs(r) - 0.5 * delta);
  case NN_LOSS_BCE: {
    /* z = p logits, t targets: softplus(z) - z t in the stable form, and
     * sigmoid(z) from exp(-|z|) <= 1 so nothing overflows */
    double e = exp(-fabs(p));
    double sig = p >= 0 ? 1 / (1 + e) : e / (1 + e);
    *d = sig - t;
    return fmax(p, 0) - p * t + log1p(e);
  }
  }
  *d = 0;
  return 0;
}

double nn_loss(enum nn_loss kind, const real *pred, const real *target, const unsigned char *mask, int n,
               double huber_delta, real *dpred) {
  double delta = huber_delta > 0 && isfinite(huber_delta) ? huber_delta : 1;
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
    sum += loss_one(kind, pred[i], target[i], delta, &d);
    if (dpred) dpred[i] = (real)(d * inv);
  }
  return sum * inv;
}

void nn_standardize(double *mean, double *std, const double *y, int n) {
  if (n <= 0) {
    *mean = 0;
    *std = 1;
    return;
  }
  double s = 0;
  for (int i = 0; i < n; i++)
    s += y[i];
  double mu = s / n, ss = 0;
  for (int i = 0; i < n; i++)
    ss += (y[i] - mu) * (y[i] - mu);
  double sd = sqrt(ss / n);
  *mean = mu;
  *std = sd > 0 && isfinite(sd) ? sd : 1;
}

/* ---- dynamic loss scaling ------------------------------------------------------ */

void nn_loss_scaler_init(struct nn_loss_scaler *s) {
  s->scale = NN_LOSS_SCALE_INIT;
  s->good = 0;
}

int nn_loss_scaler_update(struct nn_loss_scaler *s, double norm, long grow_every) {
  if (!isfinite(norm)) {
    s->scale = s->scale > 2 ? s->scale / 2 : 1;
    s->good = 0;
    return 0;
  }
  if (++s->good >= grow_every && grow_every > 0) {
    if (s->scale < 16777216.0) s->scale *= 2;
    s->good = 0;
  }
  return 1;
}
