/* The losses of optim.h in double precision: each derivative against finite
 * differences (masked and not), the values against their formulas, Huber
 * against MSE/2 and the linear tail, BCE at extreme logits, and BCE with its
 * positives weighted (class_weight: balanced). */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "models/objective.h"
#include "tests/gradcheck.h"

enum { N = 24 };

struct lcase {
  enum nn_loss kind;
  double pred[N], target[N], delta;
  unsigned char mask[N];
  const unsigned char *m; /* mask or NULL */
};

static double loss(void *ctx) {
  struct lcase *c = ctx;
  return nn_loss(c->kind, c->pred, c->target, c->m, N, c->delta, NULL);
}

/* Predictions and targets with every residual at least 0.1 away from the
 * kinks: 0 (L1, Huber's sign) and +-delta (Huber's switch). */
static void lcase_init(struct lcase *c, enum nn_loss kind, uint64_t seed, int masked) {
  uint64_t rng = seed;
  c->kind = kind;
  c->delta = 0.7;
  for (int i = 0; i < N; i++) {
    if (kind == NN_LOSS_BCE) {
      c->pred[i] = 4 * gc_rand(&rng);
      /* hard labels and soft ones in [0, 1] */
      c->target[i] = i % 3 == 0 ? 0 : i % 3 == 1 ? 1 : 0.5 + 0.5 * gc_rand(&rng);
    } else {
      c->target[i] = 2 * gc_rand(&rng);
      double mag = (i % 2 ? 0.1 + 0.5 * (1 + gc_rand(&rng)) / 2 : 0.8 + (1 + gc_rand(&rng)));
      c->pred[i] = c->target[i] + (i % 4 < 2 ? mag : -mag); /* |r| in [0.1, 0.6] or [0.8, 2.8] */
    }
    c->mask[i] = !masked || i % 5 != 2;
  }
  c->m = masked ? c->mask : NULL;
}

static const char *name[] = {"L1", "MSE", "Huber", "BCE"};

Test(grad_loss, derivatives_match_finite_differences) {
  for (int kind = NN_LOSS_L1; kind <= NN_LOSS_BCE; kind++)
    for (int masked = 0; masked <= 1; masked++) {
      struct lcase c;
      lcase_init(&c, kind, 11 + kind, masked);
      double d[N];
      for (int i = 0; i < N; i++)
        d[i] = 123; /* must be overwritten */
      nn_loss(kind, c.pred, c.target, c.m, N, c.delta, d);
      double w = gc_worst(loss, &c, c.pred, d, N, N);
      cr_log_info("%s%s: worst derivative error %.2e", name[kind], masked ? " (masked)" : "", w);
      cr_assert_lt(w, 1e-6, "%s masked %d: %.3e", name[kind], masked, w);
      for (int i = 0; i < N; i++)
        if (!c.mask[i]) cr_assert_eq(d[i], 0.0, "%s: masked-out entry %d has derivative %g", name[kind], i, d[i]);
    }
}

static double ref_one(enum nn_loss kind, double p, double t, double delta) {
  double r = p - t;
  switch (kind) {
  case NN_LOSS_L1:
    return fabs(r);
  case NN_LOSS_MSE:
    return r * r;
  case NN_LOSS_HUBER:
    return fabs(r) <= delta ? r * r / 2 : delta * (fabs(r) - delta / 2);
  case NN_LOSS_BCE: { /* delta: a positive's weight */
    double s = 1 / (1 + exp(-p));
    return -(delta * t * log(s) + (1 - t) * log(1 - s));
  }
  }
  return NAN;
}

Test(grad_loss, values_are_the_masked_mean_of_the_formulas) {
  for (int kind = NN_LOSS_L1; kind <= NN_LOSS_BCE; kind++)
    for (int masked = 0; masked <= 1; masked++) {
      struct lcase c;
      lcase_init(&c, kind, 21 + kind, masked);
      double sum = 0;
      int count = 0;
      for (int i = 0; i < N; i++)
        if (c.mask[i]) {
          sum += ref_one(kind, c.pred[i], c.target[i], c.delta);
          count++;
        }
      cr_assert(masked ? count < N : count == N);
      double L = nn_loss(kind, c.pred, c.target, c.m, N, c.delta, NULL);
      cr_assert_float_eq(L, sum / count, 1e-12, "%s masked %d: %.15g vs %.15g", name[kind], masked, L, sum / count);
      /* masked-out entries do not matter at all */
      if (masked) {
        for (int i = 0; i < N; i++)
          if (!c.mask[i]) c.pred[i] = 1e30;
        cr_assert_eq(nn_loss(kind, c.pred, c.target, c.m, N, c.delta, NULL), L);
      }
    }
}

Test(grad_loss, everything_masked_gives_zero) {
  struct lcase c;
  lcase_init(&c, NN_LOSS_MSE, 5, 1);
  memset(c.mask, 0, sizeof c.mask);
  double d[N];
  for (int i = 0; i < N; i++)
    d[i] = 1;
  cr_assert_eq(nn_loss(NN_LOSS_MSE, c.pred, c.target, c.mask, N, 1, d), 0.0);
  for (int i = 0; i < N; i++)
    cr_assert_eq(d[i], 0.0);
}

Test(grad_loss, huber_is_half_mse_inside_delta_and_linear_outside) {
  const double delta = 1.5;
  double p[4] = {0.3, -1.0, 2.0, 0.0}, t[4] = {0.1, 0.2, 1.0, 1.4}; /* |r| = 0.2, 1.2, 1.0, 1.4 < delta */
  double h = nn_loss(NN_LOSS_HUBER, p, t, NULL, 4, delta, NULL);
  double m = nn_loss(NN_LOSS_MSE, p, t, NULL, 4, delta, NULL);
  cr_assert_float_eq(h, m / 2, 1e-15, "inside: Huber %.17g, MSE/2 %.17g", h, m / 2);
  double dh[4], dm[4];
  nn_loss(NN_LOSS_HUBER, p, t, NULL, 4, delta, dh);
  nn_loss(NN_LOSS_MSE, p, t, NULL, 4, delta, dm);
  for (int i = 0; i < 4; i++)
    cr_assert_float_eq(dh[i], dm[i] / 2, 1e-15);

  double q[3] = {5.0, -3.0, 1.6}, u[3] = {0.0, 0.5, 0.0}; /* |r| = 5, 3.5, 1.6 > delta */
  double want = 0;
  for (int i = 0; i < 3; i++)
    want += delta * (fabs(q[i] - u[i]) - delta / 2) / 3;
  double got = nn_loss(NN_LOSS_HUBER, q, u, NULL, 3, delta, dh);
  cr_assert_float_eq(got, want, 1e-14, "outside: %.17g vs %.17g", got, want);
  cr_assert_float_eq(dh[0], delta / 3, 1e-15);
  cr_assert_float_eq(dh[1], -delta / 3, 1e-15);
  cr_assert_float_eq(dh[2], delta / 3, 1e-15);
}

Test(grad_loss, l1_derivative_is_zero_at_zero_residual) {
  double p[3] = {1.0, 2.0, -1.0}, t[3] = {1.0, 1.0, 0.0}, d[3];
  double L = nn_loss(NN_LOSS_L1, p, t, NULL, 3, 0, d);
  cr_assert_float_eq(L, 2.0 / 3, 1e-15);
  cr_assert_eq(d[0], 0.0);
  cr_assert_float_eq(d[1], 1.0 / 3, 1e-15);
  cr_assert_float_eq(d[2], -1.0 / 3, 1e-15);
}

Test(grad_loss, bce_is_stable_at_extreme_logits) {
  /* logits +-800: exp(800) overflows, so a naive log(sigmoid) gives inf/NaN */
  double z[6] = {800, 800, -800, -800, 800, -800}, y[6] = {1, 0, 1, 0, 0.25, 0.25};
  double want[6] = {0, 800, 800, 0, 600, 200}, wantd[6] = {0, 1, -1, 0, 0.75, -0.25};
  for (int i = 0; i < 6; i++) {
    double d;
    double L = nn_loss(NN_LOSS_BCE, &z[i], &y[i], NULL, 1, 0, &d);
    cr_assert(isfinite(L) && isfinite(d), "z %g y %g: loss %g derivative %g", z[i], y[i], L, d);
    cr_assert_float_eq(L, want[i], 1e-12, "z %g y %g: loss %.17g", z[i], y[i], L);
    cr_assert_float_eq(d, wantd[i], 1e-15, "z %g y %g: derivative %.17g", z[i], y[i], d);
  }
  double d6[6];
  double L = nn_loss(NN_LOSS_BCE, z, y, NULL, 6, 0, d6);
  cr_assert_float_eq(L, 2400.0 / 6, 1e-12);
  /* and at a modest logit it is the textbook formula */
  double z1 = 0.3, y1 = 1, d1;
  cr_assert_float_eq(nn_loss(NN_LOSS_BCE, &z1, &y1, NULL, 1, 0, &d1), log1p(exp(-0.3)), 1e-15);
  cr_assert_float_eq(d1, 1 / (1 + exp(-0.3)) - 1, 1e-15);
}

/* class_weight balanced: positives weigh N / P. Weight 1 is the unweighted
 * loss to the bit; with the balanced weight the two classes pull a logit of
 * 0 equally hard (the gradients cancel), and each class's share of the loss
 * at logit 0 is the same. */
Test(grad_loss, weighted_bce_balances_the_classes) {
  enum { M = 40, P = 4 };
  double z[M], y[M], d1[M], d0[M];
  uint64_t rng = 5;
  for (int i = 0; i < M; i++) {
    z[i] = 3 * gc_rand(&rng);
    y[i] = i < P;
  }
  double a = nn_loss(NN_LOSS_BCE, z, y, NULL, M, 1.0, d1), b = nn_loss(NN_LOSS_BCE, z, y, NULL, M, 0, d0);
  cr_assert_eq(a, b, "weight 1 is not the unweighted loss");
  cr_assert_eq(memcmp(d1, d0, sizeof d1), 0);
  double w = (double)(M - P) / P, zero[M] = {0}, d[M];
  double L = nn_loss(NN_LOSS_BCE, zero, y, NULL, M, w, d);
  double pull = 0;
  for (int i = 0; i < M; i++)
    pull += d[i];
  cr_assert_float_eq(pull, 0, 1e-15, "the classes' gradients at logit 0 sum to %g", pull);
  /* each class contributes (N) log 2 / M: the loss is 2 N log 2 / M */
  cr_assert_float_eq(L, 2.0 * (M - P) * log(2.0) / M, 1e-14, "%.17g", L);
  /* unweighted, the inactives pull harder */
  nn_loss(NN_LOSS_BCE, zero, y, NULL, M, 1.0, d);
  pull = 0;
  for (int i = 0; i < M; i++)
    pull += d[i];
  cr_assert_gt(pull, 0.3);
}

Test(grad_loss, standardize) {
  double y[4] = {1, 2, 3, 6}, mean, sd;
  nn_standardize(&mean, &sd, y, 4);
  cr_assert_float_eq(mean, 3.0, 1e-15);
  cr_assert_float_eq(sd, sqrt((4 + 1 + 0 + 9) / 4.0), 1e-15); /* population std */
  double c[3] = {2, 2, 2};
  nn_standardize(&mean, &sd, c, 3);
  cr_assert_eq(mean, 2.0);
  cr_assert_eq(sd, 1.0);
  nn_standardize(&mean, &sd, c, 0);
  cr_assert_eq(mean, 0.0);
  cr_assert_eq(sd, 1.0);
}
