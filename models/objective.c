/* objective.c — the host arithmetic of training (objective.h). */
#include "models/objective.h"

#include <math.h>

#include "models/kernels/loss.h"

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

_Static_assert((int)NN_LOSS_L1 == (int)NN_K_LOSS_L1 && (int)NN_LOSS_MSE == (int)NN_K_LOSS_MSE &&
                   (int)NN_LOSS_HUBER == (int)NN_K_LOSS_HUBER && (int)NN_LOSS_BCE == (int)NN_K_LOSS_BCE,
               "models/kernels/loss.h numbers the losses as objective.h does");

double nn_loss(enum nn_loss kind, const real *pred, const real *target, const unsigned char *mask, int n,
               double huber_delta, real *dpred) {
  double delta = huber_delta > 0 && isfinite(huber_delta) ? huber_delta : 1;
  return nn_k_loss((int)kind, pred, target, mask, n, delta, dpred);
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
