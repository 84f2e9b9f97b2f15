/* Adam / AdamW, the learning-rate schedule and gradient clipping of optim.h
 * in the product (float) build: the update against a double reference
 * written out here, AdamW's decay against Adam's, schedule values at chosen
 * steps, clipping, and Adam minimising a small convex function. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "models/cpu/optim.h"
#include "models/objective.h"
#include "tests/testutil.h"

enum { N = 37, STEPS = 6 };

/* The textbook update in double, one element. */
static void adam_ref(double *p, double *m, double *v, double g, const struct nn_adam *o, long t, double lr) {
  if (!o->decoupled) g += o->weight_decay * *p;
  *m = o->beta1 * *m + (1 - o->beta1) * g;
  *v = o->beta2 * *v + (1 - o->beta2) * g * g;
  double mh = *m / (1 - pow(o->beta1, t)), vh = *v / (1 - pow(o->beta2, t));
  double np = *p - lr * mh / (sqrt(vh) + o->eps);
  if (o->decoupled) np -= lr * o->weight_decay * *p;
  *p = np;
}

static void check_against_reference(int decoupled, double wd) {
  struct nn_adam o = {.beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = wd, .decoupled = decoupled};
  float p[N], m[N] = {0}, v[N] = {0}, g[N];
  double rp[N], rm[N] = {0}, rv[N] = {0};
  tu_seed(7 + decoupled);
  for (int i = 0; i < N; i++)
    rp[i] = p[i] = (float)(4 * tu_rnd() - 2);
  double worst = 0;
  for (long t = 1; t <= STEPS; t++) {
    double lr = 0.01 * t; /* a different rate every step */
    for (int i = 0; i < N; i++)
      g[i] = (float)(2 * tu_rnd() - 1) * (i % 3 ? 1.0f : 1e-3f); /* some small gradients */
    nn_adam_step(p, m, v, g, N, &o, t, lr);
    for (int i = 0; i < N; i++) {
      adam_ref(&rp[i], &rm[i], &rv[i], g[i], &o, t, lr);
      double e = fabs(p[i] - rp[i]);
      if (e > worst) worst = e;
      cr_assert_float_eq(m[i], rm[i], 1e-6 * fmax(1, fabs(rm[i])), "step %ld element %d: m", t, i);
      cr_assert_float_eq(v[i], rv[i], 1e-6 * fmax(1e-6, fabs(rv[i])), "step %ld element %d: v", t, i);
    }
  }
  cr_log_info("adam (decoupled %d, wd %g): worst parameter error after %d steps %.2e", decoupled, wd, STEPS, worst);
  cr_assert_lt(worst, 2e-6, "decoupled %d: %.3e", decoupled, worst);
}

Test(optim, adam_matches_the_double_reference) { check_against_reference(0, 0.05); }
Test(optim, adamw_matches_the_double_reference) { check_against_reference(1, 0.05); }

Test(optim, first_step_moves_every_parameter_by_lr) {
  /* bias correction: at step 1, mhat = g and vhat = g^2, so the step is
   * lr g / (|g| + eps) ~ lr sign(g) */
  struct nn_adam o = {.beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
  float p[3] = {1, 1, 1}, m[3] = {0}, v[3] = {0}, g[3] = {0.5f, -2e-3f, 30};
  nn_adam_step(p, m, v, g, 3, &o, 1, 0.1);
  cr_assert_float_eq(p[0], 0.9f, 1e-6);
  cr_assert_float_eq(p[1], 1.1f, 1e-5);
  cr_assert_float_eq(p[2], 0.9f, 1e-6);
}

Test(optim, adamw_and_adam_differ_as_documented) {
  const double lr = 0.03, wd = 0.1;
  struct nn_adam plain = {.beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0};
  struct nn_adam w = plain, l2 = plain;
  w.weight_decay = l2.weight_decay = wd;
  w.decoupled = 1;
  float p0[N], g[N], m0[N], v0[N];
  tu_seed(3);
  for (int i = 0; i < N; i++) {
    p0[i] = (float)(4 * tu_rnd() - 2);
    g[i] = (float)(2 * tu_rnd() - 1);
    m0[i] = (float)(0.1 * tu_rnd() - 0.05); /* some history: step 4 */
    v0[i] = (float)(0.01 * tu_rnd());
  }
  float pa[N], ma[N], va[N], pw[N], mw[N], vw[N], pl[N], ml[N], vl[N], pg[N], mg[N], vg[N], gl[N];
  memcpy(pa, p0, sizeof p0), memcpy(ma, m0, sizeof m0), memcpy(va, v0, sizeof v0);
  memcpy(pw, p0, sizeof p0), memcpy(mw, m0, sizeof m0), memcpy(vw, v0, sizeof v0);
  memcpy(pl, p0, sizeof p0), memcpy(ml, m0, sizeof m0), memcpy(vl, v0, sizeof v0);
  memcpy(pg, p0, sizeof p0), memcpy(mg, m0, sizeof m0), memcpy(vg, v0, sizeof v0);
  nn_adam_step(pa, ma, va, g, N, &plain, 4, lr); /* no decay */
  nn_adam_step(pw, mw, vw, g, N, &w, 4, lr);     /* AdamW */
  nn_adam_step(pl, ml, vl, g, N, &l2, 4, lr);    /* Adam + L2 */
  for (int i = 0; i < N; i++)
    gl[i] = (float)(g[i] + wd * p0[i]);
  nn_adam_step(pg, mg, vg, gl, N, &plain, 4, lr); /* no decay, decayed gradient */
  for (int i = 0; i < N; i++) {
    /* AdamW: the moments are untouched by the decay, the parameter moves by
     * an extra -lr wd p */
    cr_assert_eq(mw[i], ma[i]);
    cr_assert_eq(vw[i], va[i]);
    cr_assert_float_eq(pw[i], pa[i] - lr * wd * p0[i], 1e-6, "element %d: %.9g vs %.9g", i, pw[i],
                       pa[i] - lr * wd * p0[i]);
    /* Adam + L2 is Adam on the gradient g + wd p */
    cr_assert_float_eq(pl[i], pg[i], 1e-6);
    cr_assert_float_eq(ml[i], mg[i], 1e-7);
    cr_assert_float_eq(vl[i], vg[i], 1e-7);
  }
  /* and with no decay the two flavours are the same update */
  memcpy(pw, p0, sizeof p0), memcpy(mw, m0, sizeof m0), memcpy(vw, v0, sizeof v0);
  w.weight_decay = 0;
  nn_adam_step(pw, mw, vw, g, N, &w, 4, lr);
  cr_assert_eq(memcmp(pw, pa, sizeof pa), 0);
}

Test(optim, schedule_values) {
  const double lr = 1e-3, mn = 1e-5;
  struct nn_schedule s = {.lr = lr, .min_lr = mn, .warmup = 10, .period = 100, .period_mult = 2};
  /* warm-up: lr (step + 1) / warmup */
  cr_assert_float_eq(nn_schedule_lr(&s, 0), lr / 10, 1e-15);
  cr_assert_float_eq(nn_schedule_lr(&s, 4), lr * 5 / 10, 1e-15);
  cr_assert_float_eq(nn_schedule_lr(&s, 9), lr, 1e-15);
  cr_assert_float_eq(nn_schedule_lr(&s, -3), lr / 10, 1e-15);
  /* first cycle, 100 steps: lr at its start, the midpoint halfway, near
   * min_lr at its end, decreasing throughout */
  cr_assert_float_eq(nn_schedule_lr(&s, 10), lr, 1e-15);
  cr_assert_float_eq(nn_schedule_lr(&s, 60), (lr + mn) / 2, 1e-15);
  cr_assert_float_eq(nn_schedule_lr(&s, 35), mn + (lr - mn) * (1 + cos(M_PI / 4)) / 2, 1e-15);
  double prev = INFINITY;
  for (long t = 10; t < 110; t++) {
    double x = nn_schedule_lr(&s, t);
    cr_assert_lt(x, prev, "step %ld", t);
    cr_assert_geq(x, mn);
    prev = x;
  }
  cr_assert_lt(nn_schedule_lr(&s, 109) - mn, (lr - mn) * 3e-4);
  /* restart, and the second cycle is twice as long (200), the third 400 */
  cr_assert_float_eq(nn_schedule_lr(&s, 110), lr, 1e-15);
  cr_assert_float_eq(nn_schedule_lr(&s, 210), (lr + mn) / 2, 1e-15);
  cr_assert_float_eq(nn_schedule_lr(&s, 310), lr, 1e-15);
  cr_assert_float_eq(nn_schedule_lr(&s, 510), (lr + mn) / 2, 1e-15);
  cr_assert_float_eq(nn_schedule_lr(&s, 710), lr, 1e-15);
  /* a fixed period restarts every 100 steps */
  s.period_mult = 1;
  cr_assert_float_eq(nn_schedule_lr(&s, 110), lr, 1e-15);
  cr_assert_float_eq(nn_schedule_lr(&s, 160), (lr + mn) / 2, 1e-15);
  cr_assert_float_eq(nn_schedule_lr(&s, 10 + 100 * 1000000L + 50), (lr + mn) / 2, 1e-15);
  /* a non-integer multiplier: cycles 10, 15, 22.5 */
  struct nn_schedule f = {.lr = 1, .min_lr = 0, .warmup = 0, .period = 10, .period_mult = 1.5};
  cr_assert_float_eq(nn_schedule_lr(&f, 0), 1, 1e-15);
  cr_assert_float_eq(nn_schedule_lr(&f, 5), 0.5, 1e-15);
  cr_assert_float_eq(nn_schedule_lr(&f, 10), 1, 1e-15);
  cr_assert_float_eq(nn_schedule_lr(&f, 25), 1, 1e-15);
  cr_assert_float_eq(nn_schedule_lr(&f, 36), (1 + cos(M_PI * 11 / 22.5)) / 2, 1e-15);
  /* no period: constant after the warm-up; no warm-up: lr at step 0 */
  s.period = 0;
  cr_assert_float_eq(nn_schedule_lr(&s, 5), lr * 6 / 10, 1e-15);
  cr_assert_float_eq(nn_schedule_lr(&s, 10), lr, 1e-15);
  cr_assert_float_eq(nn_schedule_lr(&s, 123456), lr, 1e-15);
  s.warmup = 0;
  cr_assert_float_eq(nn_schedule_lr(&s, 0), lr, 1e-15);
}

Test(optim, clipping) {
  float g[2] = {3, 4};
  cr_assert_float_eq(nn_grad_norm(g, 2), 5.0, 1e-12);
  cr_assert_float_eq(nn_grad_clip(g, 2, 10), 5.0, 1e-12); /* under the limit: untouched */
  cr_assert(g[0] == 3 && g[1] == 4);
  cr_assert_float_eq(nn_grad_clip(g, 2, 0), 5.0, 1e-12); /* max_norm 0: no clipping */
  cr_assert(g[0] == 3 && g[1] == 4);
  cr_assert_float_eq(nn_grad_clip(g, 2, 1), 5.0, 1e-12);
  cr_assert_float_eq(g[0], 0.6f, 1e-7);
  cr_assert_float_eq(g[1], 0.8f, 1e-7);

  enum { M = 10000 };
  static float big[M], keep[M];
  tu_seed(9);
  double ss = 0;
  for (int i = 0; i < M; i++) {
    keep[i] = big[i] = (float)(2 * tu_rnd() - 1);
    ss += (double)big[i] * big[i];
  }
  double before = nn_grad_clip(big, M, 2.5);
  cr_assert_float_eq(before, sqrt(ss), 1e-9 * sqrt(ss));
  double after = nn_grad_norm(big, M);
  cr_log_info("clip: norm %.6f -> %.9f (max 2.5)", before, after);
  cr_assert_float_eq(after, 2.5, 2.5e-6, "norm after clipping %.9f", after);
  for (int i = 0; i < M; i++) /* the direction is kept */
    cr_assert_float_eq(big[i], keep[i] * (2.5 / before), 1e-7);
}

Test(optim, adam_minimises_a_convex_function) {
  /* f(p) = sum (p - c)^2 from p = 0, with warm-up and one cosine decay */
  enum { K = 16, ITERS = 3000 };
  float p[K] = {0}, m[K] = {0}, v[K] = {0}, g[K], c[K];
  tu_seed(5);
  for (int i = 0; i < K; i++)
    c[i] = (float)(6 * tu_rnd() - 3);
  struct nn_adam o = {.beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0, .decoupled = 1};
  struct nn_schedule s = {.lr = 0.05, .min_lr = 1e-5, .warmup = 50, .period = ITERS - 50, .period_mult = 1};
  for (long t = 0; t < ITERS; t++) {
    for (int i = 0; i < K; i++)
      g[i] = 2 * (p[i] - c[i]);
    nn_adam_step(p, m, v, g, K, &o, t + 1, nn_schedule_lr(&s, t));
  }
  double worst = 0;
  for (int i = 0; i < K; i++)
    worst = fmax(worst, fabs(p[i] - c[i]));
  cr_log_info("adam on sum (p - c)^2: worst |p - c| %.2e after %d steps", worst, ITERS);
  cr_assert_lt(worst, 1e-3);
}

/* Dynamic loss scaling (precision: fp16): a non-finite gradient norm skips
 * the step and halves the scale, never below 1; grow_every finite steps in a
 * row double it, never above 2^24; a skip restarts the count. */
Test(optim, loss_scaler_halves_on_overflow_and_grows_after_good_steps) {
  struct nn_loss_scaler s;
  nn_loss_scaler_init(&s);
  cr_assert_eq(s.scale, NN_LOSS_SCALE_INIT);
  cr_assert_eq(nn_loss_scaler_update(&s, INFINITY, 3), 0);
  cr_assert_eq(s.scale, NN_LOSS_SCALE_INIT / 2);
  cr_assert_eq(nn_loss_scaler_update(&s, NAN, 3), 0);
  cr_assert_eq(s.scale, NN_LOSS_SCALE_INIT / 4);
  cr_assert_eq(nn_loss_scaler_update(&s, 1.5, 3), 1);
  cr_assert_eq(nn_loss_scaler_update(&s, 0.0, 3), 1);
  cr_assert_eq(s.scale, NN_LOSS_SCALE_INIT / 4, "grew before 3 good steps");
  cr_assert_eq(nn_loss_scaler_update(&s, 2.0, 3), 1);
  cr_assert_eq(s.scale, NN_LOSS_SCALE_INIT / 2, "did not grow after 3 good steps");
  cr_assert_eq(s.good, 0);
  /* a skip between good steps restarts the count */
  nn_loss_scaler_update(&s, 1, 3);
  nn_loss_scaler_update(&s, 1, 3);
  nn_loss_scaler_update(&s, -INFINITY, 3);
  nn_loss_scaler_update(&s, 1, 3);
  nn_loss_scaler_update(&s, 1, 3);
  cr_assert_eq(s.scale, NN_LOSS_SCALE_INIT / 4);
  /* bounds */
  for (int i = 0; i < 40; i++)
    nn_loss_scaler_update(&s, INFINITY, 3);
  cr_assert_eq(s.scale, 1);
  for (int i = 0; i < 200; i++)
    nn_loss_scaler_update(&s, 1, 3);
  cr_assert_eq(s.scale, 16777216.0);
}
