/* adam.h — one parameter's Adam / AdamW update (models/cpu/optim.h has the
 * formulas): a header-only SE3_HD body, valid C and CUDA C++, that the CPU
 * backend loops over and the CUDA backend maps to threads. The arithmetic is
 * in double whatever `real` is, on both. */
#ifndef SE3_KERNELS_ADAM_H
#define SE3_KERNELS_ADAM_H

#include <math.h>

#include "models/real.h"
#include "models/so3.h" /* SE3_HD */

/* c1, c2 are the bias corrections of the step: 1 - beta1^t, 1 - beta2^t. */
SE3_HD static inline void nn_k_adam_one(real *p, real *m, real *v, real grad, double b1, double b2, double eps,
                                        double wd, int decoupled, double c1, double c2, double lr) {
  double pv = *p, g = grad;
  if (!decoupled) g += wd * pv;
  double mi = b1 * *m + (1 - b1) * g;
  double vi = b2 * *v + (1 - b2) * g * g;
  double upd = lr * (mi / c1) / (sqrt(vi / c2) + eps);
  if (decoupled) upd += lr * wd * pv;
  *m = (real)mi;
  *v = (real)vi;
  *p = (real)(pv - upd);
}

/* A step's schedule, NN_K_ADAM_SCHED doubles: {c1, c2, lr} (step 1-based;
 * below 1 counts as 1), what adam_step computes on the host and
 * adam_step_at reads from memory, then {norm, skip}: 0 and 0 here. A
 * loss-scaled step recorded whole sets skip to 1 and has the clipping write
 * the gradient's norm into `norm`; the update then does nothing when the
 * norm is not finite (nn_k_adam_skip), as the host's loss scaler skips such
 * a step. */
#define NN_K_ADAM_SCHED 5
SE3_HD static inline void nn_k_adam_sched(double sched[NN_K_ADAM_SCHED], double b1, double b2, long step, double lr) {
  if (step < 1) step = 1;
  sched[0] = 1 - pow(b1, (double)step);
  sched[1] = 1 - pow(b2, (double)step);
  sched[2] = lr;
  sched[3] = 0;
  sched[4] = 0;
}

/* 1 when a schedule says the update is skipped: a loss-scaled step whose
 * gradient overflowed (its norm not finite). */
SE3_HD static inline int nn_k_adam_skip(const double *sched) { return sched[4] != 0 && !isfinite(sched[3]); }

#endif
