/* The radial network in double precision: its backward against finite
 * differences for the edge features and every parameter, and its forward
 * against the formula written out here. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/cpu/nn.h"
#include "tests/gradcheck.h"

enum { E = 7, IN = 6, H = 5, OUT = 9 };

struct rcase {
  double x[E * IN], *p, R[E * OUT], G[E * OUT], *save;
};

static double loss(void *ctx) {
  struct rcase *c = ctx;
  nn_radial_forward(c->R, c->save, c->x, c->p, E, IN, H, OUT);
  double L = 0;
  for (int i = 0; i < E * OUT; i++)
    L += c->G[i] * c->R[i];
  return L;
}

static void rcase_init(struct rcase *c, uint64_t seed) {
  uint64_t rng = seed;
  size_t np = nn_radial_params(IN, H, OUT);
  cr_assert_eq(np, (size_t)(H * IN + 3 * H + H * H + 3 * H + OUT * H));
  c->p = malloc(np * sizeof *c->p);
  c->save = malloc(nn_radial_save_size(E, H) * sizeof *c->save);
  gc_fill(c->x, E * IN, &rng, 1.0);
  gc_fill(c->p, np, &rng, 0.8);
  gc_fill(c->G, E * OUT, &rng, 1.0);
  /* layer-norm gains near 1 and shifts near 0.3 keep most units on one
   * side of the ReLU or the other, away from the kink */
  for (int j = 0; j < H; j++) {
    c->p[H * IN + H + j] = 1 + 0.3 * gc_rand(&rng);
    c->p[H * IN + 2 * H + j] = 0.3 * gc_rand(&rng);
  }
}

Test(grad_radial, gradients_match_finite_differences) {
  struct rcase c;
  rcase_init(&c, 3);
  size_t np = nn_radial_params(IN, H, OUT);
  double *dp = calloc(np, sizeof *dp), dx[E * IN];
  loss(&c);
  nn_radial_backward(dx, dp, c.G, c.x, c.save, c.p, E, IN, H, OUT);
  double wx = gc_worst(loss, &c, c.x, dx, E * IN, 1000);
  double wp = gc_worst(loss, &c, c.p, dp, np, 1000);
  cr_log_info("radial: worst gradient error %.2e (features), %.2e (parameters)", wx, wp);
  cr_assert_lt(wx, 1e-6);
  cr_assert_lt(wp, 1e-6);
  free(dp);
  free(c.p);
  free(c.save);
}

static void lnrelu_ref(double *y, const double *a, const double *g, const double *b, int n) {
  double mean = 0, var = 0;
  for (int j = 0; j < n; j++)
    mean += a[j] / n;
  for (int j = 0; j < n; j++)
    var += (a[j] - mean) * (a[j] - mean) / n;
  for (int j = 0; j < n; j++) {
    double v = g[j] * (a[j] - mean) / sqrt(var + 1e-5) + b[j];
    y[j] = v > 0 ? v : 0;
  }
}

Test(grad_radial, forward_is_the_formula) {
  struct rcase c;
  rcase_init(&c, 4);
  loss(&c);
  const double *W1 = c.p, *b1 = W1 + H * IN, *g1 = b1 + H, *be1 = g1 + H, *W2 = be1 + H, *b2 = W2 + H * H, *g2 = b2 + H,
               *be2 = g2 + H, *W3 = be2 + H;
  int active = 0;
  for (int e = 0; e < E; e++) {
    double a1[H], s1[H], a2[H], s2[H];
    for (int j = 0; j < H; j++) {
      a1[j] = b1[j];
      for (int i = 0; i < IN; i++)
        a1[j] += W1[j * IN + i] * c.x[e * IN + i];
    }
    lnrelu_ref(s1, a1, g1, be1, H);
    for (int j = 0; j < H; j++) {
      a2[j] = b2[j];
      for (int i = 0; i < H; i++)
        a2[j] += W2[j * H + i] * s1[i];
    }
    lnrelu_ref(s2, a2, g2, be2, H);
    for (int o = 0; o < OUT; o++) {
      double r = 0;
      for (int j = 0; j < H; j++)
        r += W3[o * H + j] * s2[j];
      cr_assert_float_eq(c.R[e * OUT + o], r, 1e-12, "edge %d output %d", e, o);
    }
    for (int j = 0; j < H; j++)
      active += s1[j] > 0;
  }
  cr_assert(active > 0 && active < E * H, "the data should reach both sides of the ReLU (%d of %d on)", active, E * H);
  free(c.p);
  free(c.save);
}
