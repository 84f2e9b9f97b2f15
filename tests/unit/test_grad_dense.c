/* test_grad_dense.c — the dense layers of models/cpu (dense.c, norm.c,
 * pool.c) in double precision: every backward against central differences
 * of L = <G, layer(...)> over every entry of every input and parameter
 * (gradcheck.h, worst relative error < 1e-6), every forward against a naive
 * computation written here, parameter gradients that accumulate and input
 * gradients that are overwritten, the norm nonlinearity's equivariance and
 * clamp, max-pooling ties and molecules without atoms.
 *
 * Data for the piecewise layers (ReLU, max) is checked to keep a margin
 * from every kink, far above the step h = 1e-6 of the differences, and to
 * have units on both sides of the ReLU. */
#include <criterion/criterion.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/cpu/nn.h"
#include "models/so3.h"
#include "tests/gradcheck.h"

_Static_assert(sizeof(real) == sizeof(double), "the gradient tests link the double build (se3nn_f64)");

#define TOL 1e-6
#define EVERY ((size_t)1 << 30) /* gc_worst max_checks: every entry */
#define GARBAGE 1e30            /* prefilled into gradients that must be overwritten */

/* ---- helpers ---------------------------------------------------------------- */

static double *rnd(size_t n, uint64_t *s, double scale) {
  double *p = malloc((n ? n : 1) * sizeof *p);
  cr_assert_not_null(p);
  gc_fill(p, n, s, scale);
  return p;
}
static double *zeros(size_t n) {
  double *p = calloc(n ? n : 1, sizeof *p);
  cr_assert_not_null(p);
  return p;
}
static double *copy(const double *a, size_t n) {
  double *p = malloc((n ? n : 1) * sizeof *p);
  cr_assert_not_null(p);
  memcpy(p, a, n * sizeof *p);
  return p;
}
static void fill(double *p, size_t n, double v) {
  for (size_t i = 0; i < n; i++)
    p[i] = v;
}
static double dot(const double *a, const double *b, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; i++)
    s += a[i] * b[i];
  return s;
}
/* max |a - b| / max(1, |b|) */
static double max_err(const double *a, const double *b, size_t n) {
  double w = 0;
  for (size_t i = 0; i < n; i++) {
    double e = fabs(a[i] - b[i]) / fmax(1.0, fabs(b[i]));
    if (!(e <= w)) w = e; /* NaN counts as worst */
  }
  return w;
}

/* ---- linear and dense ------------------------------------------------------- */

struct dense_ctx {
  double *x, *W, *b, *y, *G;
  int rows, in, out, linear;
};

static double dense_loss(void *p) {
  struct dense_ctx *c = p;
  if (c->linear)
    nn_linear_forward(c->y, c->x, c->W, c->rows, c->in, c->out);
  else
    nn_dense_forward(c->y, c->x, c->W, c->b, c->rows, c->in, c->out);
  return dot(c->G, c->y, (size_t)c->rows * c->out);
}

static void dense_setup(struct dense_ctx *c, uint64_t *s, int linear, int bias, int rows, int in, int out) {
  *c = (struct dense_ctx){.rows = rows, .in = in, .out = out, .linear = linear};
  c->x = rnd((size_t)rows * in, s, 1.0);
  c->W = rnd((size_t)out * in, s, 1.0);
  c->b = bias ? rnd(out, s, 1.0) : NULL;
  c->y = zeros((size_t)rows * out);
  c->G = rnd((size_t)rows * out, s, 1.0);
}
static void dense_free(struct dense_ctx *c) {
  free(c->x);
  free(c->W);
  free(c->b);
  free(c->y);
  free(c->G);
}
static void dense_backward(struct dense_ctx *c, double *dx, double *dW, double *db) {
  if (c->linear)
    nn_linear_backward(dx, dW, c->G, c->x, c->W, c->rows, c->in, c->out);
  else
    nn_dense_backward(dx, dW, db, c->G, c->x, c->W, c->rows, c->in, c->out);
}

/* Checks dx, dW (and db) by differences; returns the worst error. */
static double dense_gradcheck(const char *name, int linear, int bias, int rows, int in, int out, uint64_t seed) {
  struct dense_ctx c;
  dense_setup(&c, &seed, linear, bias, rows, in, out);
  double *dx = rnd((size_t)rows * in, &seed, GARBAGE), *dW = zeros((size_t)out * in), *db = zeros(out);
  dense_backward(&c, dx, dW, bias ? db : NULL);
  double wx = gc_worst(dense_loss, &c, c.x, dx, (size_t)rows * in, EVERY);
  double wW = gc_worst(dense_loss, &c, c.W, dW, (size_t)out * in, EVERY);
  double wb = bias ? gc_worst(dense_loss, &c, c.b, db, out, EVERY) : 0;
  cr_log_info("%s (%d x %d -> %d): worst dx %.2e dW %.2e db %.2e", name, rows, in, out, wx, wW, wb);
  cr_expect_lt(wx, TOL, "%s dx %g", name, wx);
  cr_expect_lt(wW, TOL, "%s dW %g", name, wW);
  cr_expect_lt(wb, TOL, "%s db %g", name, wb);
  if (!bias) /* without a bias, db must stay untouched (NULL is passed) */
    for (int o = 0; o < out; o++)
      cr_expect_eq(db[o], 0.0);
  free(dx);
  free(dW);
  free(db);
  dense_free(&c);
  return fmax(wx, fmax(wW, wb));
}

Test(grad_dense, linear_gradients) {
  dense_gradcheck("linear", 1, 0, 3 * 5, 4, 3, 101); /* N 3, degree 2: rows N (2d+1) */
  dense_gradcheck("linear", 1, 0, 7, 1, 6, 102);
}

Test(grad_dense, dense_gradients) {
  dense_gradcheck("dense+bias", 0, 1, 9, 6, 5, 201);
  dense_gradcheck("dense-nobias", 0, 0, 9, 6, 5, 202);
  dense_gradcheck("dense+bias", 0, 1, 1, 5, 1, 203);
}

Test(grad_dense, dense_forward_is_naive) {
  uint64_t s = 301;
  for (int bias = 0; bias <= 1; bias++)
    for (int linear = 0; linear <= 1 - bias; linear++) {
      int rows = 7, in = 5, out = 4;
      struct dense_ctx c;
      dense_setup(&c, &s, linear, bias, rows, in, out);
      dense_loss(&c);
      for (int r = 0; r < rows; r++)
        for (int o = 0; o < out; o++) {
          double want = bias ? c.b[o] : 0;
          for (int i = 0; i < in; i++)
            want += c.x[r * in + i] * c.W[o * in + i];
          cr_expect_float_eq(c.y[r * out + o], want, 1e-13, "linear %d bias %d (%d,%d)", linear, bias, r, o);
        }
      dense_free(&c);
    }
}

/* Backward twice: dW, db double; dx is the same (overwritten, not added);
 * dx = NULL still gives the parameter gradients. */
Test(grad_dense, dense_accumulates_parameters_overwrites_inputs) {
  uint64_t s = 401;
  for (int linear = 0; linear <= 1; linear++) {
    int rows = 8, in = 5, out = 3;
    struct dense_ctx c;
    dense_setup(&c, &s, linear, !linear, rows, in, out);
    size_t nx = (size_t)rows * in, nW = (size_t)out * in;
    double *dx = rnd(nx, &s, GARBAGE), *dW = zeros(nW), *db = zeros(out);
    dense_backward(&c, dx, dW, db);
    double *dx1 = copy(dx, nx), *dW1 = copy(dW, nW), *db1 = copy(db, out);
    fill(dx, nx, GARBAGE);
    dense_backward(&c, dx, dW, db);
    cr_expect_lt(max_err(dx, dx1, nx), 1e-14, "linear %d: dx overwritten", linear);
    for (size_t i = 0; i < nW; i++)
      dW1[i] *= 2;
    for (int o = 0; o < out; o++)
      db1[o] *= 2;
    cr_expect_lt(max_err(dW, dW1, nW), 1e-13, "linear %d: dW accumulates", linear);
    if (!linear) cr_expect_lt(max_err(db, db1, out), 1e-13, "db accumulates");
    dense_backward(&c, NULL, dW, db); /* a third time, without dx */
    for (size_t i = 0; i < nW; i++)
      dW1[i] *= 1.5;
    for (int o = 0; o < out; o++)
      db1[o] *= 1.5;
    cr_expect_lt(max_err(dW, dW1, nW), 1e-13, "linear %d: dW with dx NULL", linear);
    if (!linear) cr_expect_lt(max_err(db, db1, out), 1e-13, "db with dx NULL");
    free(dx);
    free(dW);
    free(db);
    free(dx1);
    free(dW1);
    free(db1);
    dense_free(&c);
  }
}

/* ---- layer norm + ReLU -------------------------------------------------------- */

struct lnrelu_ctx {
  double *x, *gamma, *beta, *y, *save, *G;
  int rows, n;
};

static double lnrelu_loss(void *p) {
  struct lnrelu_ctx *c = p;
  nn_lnrelu_forward(c->y, c->save, c->x, c->gamma, c->beta, c->rows, c->n);
  return dot(c->G, c->y, (size_t)c->rows * c->n);
}

/* Rows of x with their own offsets and scales (the normalisation matters),
 * gamma around 1, beta small: about half the units active. */
static void lnrelu_setup(struct lnrelu_ctx *c, uint64_t *s, int rows, int n) {
  *c = (struct lnrelu_ctx){.rows = rows, .n = n};
  c->x = rnd((size_t)rows * n, s, 1.0);
  for (int r = 0; r < rows; r++) {
    double off = 2 * gc_rand(s), sc = 1.5 + gc_rand(s);
    for (int i = 0; i < n; i++)
      c->x[r * n + i] = off + sc * c->x[r * n + i];
  }
  c->gamma = rnd(n, s, 0.5);
  for (int i = 0; i < n; i++)
    c->gamma[i] += 1.0;
  c->beta = rnd(n, s, 0.3);
  c->y = zeros((size_t)rows * n);
  c->save = zeros(2 * (size_t)rows);
  c->G = rnd((size_t)rows * n, s, 1.0);
}
static void lnrelu_free(struct lnrelu_ctx *c) {
  free(c->x);
  free(c->gamma);
  free(c->beta);
  free(c->y);
  free(c->save);
  free(c->G);
}

/* Naive forward: y and the pre-ReLU u; returns min |u|, counts active units. */
static double lnrelu_ref(const struct lnrelu_ctx *c, double *y, double *mean, double *rstd, int *active) {
  double margin = INFINITY;
  *active = 0;
  for (int r = 0; r < c->rows; r++) {
    const double *x = c->x + (size_t)r * c->n;
    double m = 0, v = 0;
    for (int i = 0; i < c->n; i++)
      m += x[i] / c->n;
    for (int i = 0; i < c->n; i++)
      v += (x[i] - m) * (x[i] - m) / c->n;
    mean[r] = m;
    rstd[r] = 1 / sqrt(v + 1e-5);
    for (int i = 0; i < c->n; i++) {
      double u = c->gamma[i] * (x[i] - m) * rstd[r] + c->beta[i];
      y[(size_t)r * c->n + i] = u > 0 ? u : 0;
      margin = fmin(margin, fabs(u));
      *active += u > 0;
    }
  }
  return margin;
}

Test(grad_dense, lnrelu_forward_is_naive) {
  uint64_t s = 501;
  struct lnrelu_ctx c;
  lnrelu_setup(&c, &s, 5, 7);
  lnrelu_loss(&c);
  double *y = zeros(35), mean[5], rstd[5];
  int active;
  lnrelu_ref(&c, y, mean, rstd, &active);
  cr_expect_lt(max_err(c.y, y, 35), 1e-13);
  cr_expect_lt(max_err(c.save, mean, 5), 1e-13, "save: mean at save[r]");
  cr_expect_lt(max_err(c.save + 5, rstd, 5), 1e-13, "save: rstd at save[rows + r]");
  /* in place (y = x) gives the same */
  double *xy = copy(c.x, 35), *save2 = zeros(10);
  nn_lnrelu_forward(xy, save2, xy, c.gamma, c.beta, 5, 7);
  cr_expect_lt(max_err(xy, y, 35), 1e-13, "in place");
  free(xy);
  free(save2);
  free(y);
  lnrelu_free(&c);
}

Test(grad_dense, lnrelu_gradients) {
  const int shapes[][2] = {{6, 10}, {4, 32}, {3, 2}};
  for (int k = 0; k < 3; k++) {
    int rows = shapes[k][0], n = shapes[k][1];
    size_t nn = (size_t)rows * n;
    uint64_t s = 600 + k;
    struct lnrelu_ctx c;
    lnrelu_setup(&c, &s, rows, n);
    double *y = zeros(nn), *mean = zeros(rows), *rstd = zeros(rows);
    int active;
    double margin = lnrelu_ref(&c, y, mean, rstd, &active);
    cr_assert_gt(margin, 1e-3, "data too close to a ReLU kink: %g", margin);
    cr_assert(active > 0 && active < (int)nn, "both sides of the ReLU: %d of %zu active", active, nn);
    lnrelu_loss(&c);
    double *dx = rnd(nn, &s, GARBAGE), *dg = zeros(n), *db = zeros(n);
    nn_lnrelu_backward(dx, dg, db, c.G, c.x, c.save, c.gamma, c.beta, rows, n);
    double wx = gc_worst(lnrelu_loss, &c, c.x, dx, nn, EVERY);
    double wg = gc_worst(lnrelu_loss, &c, c.gamma, dg, n, EVERY);
    double wb = gc_worst(lnrelu_loss, &c, c.beta, db, n, EVERY);
    cr_log_info("lnrelu (%d x %d, %d of %zu active, margin %.1e): worst dx %.2e dgamma %.2e dbeta %.2e", rows, n,
                active, nn, margin, wx, wg, wb);
    cr_expect_lt(wx, TOL, "dx %g", wx);
    cr_expect_lt(wg, TOL, "dgamma %g", wg);
    cr_expect_lt(wb, TOL, "dbeta %g", wb);
    free(y);
    free(mean);
    free(rstd);
    free(dx);
    free(dg);
    free(db);
    lnrelu_free(&c);
  }
}

Test(grad_dense, lnrelu_accumulates_parameters_overwrites_inputs) {
  uint64_t s = 701;
  int rows = 5, n = 8;
  size_t nn = (size_t)rows * n;
  struct lnrelu_ctx c;
  lnrelu_setup(&c, &s, rows, n);
  lnrelu_loss(&c);
  double *dx = rnd(nn, &s, GARBAGE), *dg = zeros(n), *db = zeros(n);
  nn_lnrelu_backward(dx, dg, db, c.G, c.x, c.save, c.gamma, c.beta, rows, n);
  double *dx1 = copy(dx, nn), *dg1 = copy(dg, n), *db1 = copy(db, n);
  fill(dx, nn, GARBAGE);
  nn_lnrelu_backward(dx, dg, db, c.G, c.x, c.save, c.gamma, c.beta, rows, n);
  cr_expect_lt(max_err(dx, dx1, nn), 1e-15, "dx overwritten");
  for (int i = 0; i < n; i++) { /* the same terms added twice, in a different grouping */
    cr_expect_float_eq(dg[i], 2 * dg1[i], 1e-14, "dgamma accumulates");
    cr_expect_float_eq(db[i], 2 * db1[i], 1e-14, "dbeta accumulates");
  }
  nn_lnrelu_backward(NULL, dg, db, c.G, c.x, c.save, c.gamma, c.beta, rows, n);
  for (int i = 0; i < n; i++)
    cr_expect_float_eq(dg[i], 3 * dg1[i], 1e-14, "dgamma with dx NULL");
  /* dx may be dy */
  double *g = copy(c.G, nn);
  nn_lnrelu_backward(g, dg, db, g, c.x, c.save, c.gamma, c.beta, rows, n);
  cr_expect_lt(max_err(g, dx1, nn), 1e-15, "dx in place of dy");
  free(g);
  free(dx);
  free(dg);
  free(db);
  free(dx1);
  free(dg1);
  free(db1);
  lnrelu_free(&c);
}

/* ---- norm nonlinearity ---------------------------------------------------------- */

struct norm_ctx {
  double *x, *gamma, *beta, *y, *save, *G;
  int N, dim, C;
};

static double norm_loss(void *p) {
  struct norm_ctx *c = p;
  nn_norm_forward(c->y, c->save, c->x, c->gamma, c->beta, c->N, c->dim, c->C);
  return dot(c->G, c->y, (size_t)c->N * c->dim * c->C);
}

static void norm_setup(struct norm_ctx *c, uint64_t *s, int N, int dim, int C) {
  *c = (struct norm_ctx){.N = N, .dim = dim, .C = C};
  size_t n = (size_t)N * dim * C;
  c->x = rnd(n, s, 1.0);
  c->gamma = rnd(C, s, 0.5);
  for (int i = 0; i < C; i++)
    c->gamma[i] += 1.0;
  c->beta = rnd(C, s, 0.3);
  c->y = zeros(n);
  c->save = zeros(nn_norm_save_size(N, C));
  c->G = rnd(n, s, 1.0);
}
static void norm_free(struct norm_ctx *c) {
  free(c->x);
  free(c->gamma);
  free(c->beta);
  free(c->y);
  free(c->save);
  free(c->G);
}

/* Naive forward: y, the clamped norms s and t (N x C); returns the smallest
 * margin from a kink (|u| and, unless allow_clamp, s), counts active units. */
static double norm_ref(const struct norm_ctx *c, double *y, double *S, double *T, int *active) {
  int N = c->N, dim = c->dim, C = c->C;
  double margin = INFINITY;
  *active = 0;
  for (int n = 0; n < N; n++) {
    double mean = 0, var = 0;
    for (int ch = 0; ch < C; ch++) {
      double q = 0;
      for (int m = 0; m < dim; m++)
        q += pow(c->x[((size_t)n * dim + m) * C + ch], 2);
      S[n * C + ch] = fmax(sqrt(q), ldexp(1.0, -24));
      mean += S[n * C + ch] / C;
    }
    for (int ch = 0; ch < C; ch++)
      var += pow(S[n * C + ch] - mean, 2) / C;
    for (int ch = 0; ch < C; ch++) {
      double u = c->gamma[ch] * (S[n * C + ch] - mean) / sqrt(var + 1e-5) + c->beta[ch];
      T[n * C + ch] = u > 0 ? u : 0;
      *active += u > 0;
      margin = fmin(margin, fmin(fabs(u), S[n * C + ch]));
      for (int m = 0; m < dim; m++) {
        size_t i = ((size_t)n * dim + m) * C + ch;
        y[i] = c->x[i] * T[n * C + ch] / S[n * C + ch];
      }
    }
  }
  return margin;
}

Test(grad_dense, norm_forward_is_naive_and_keeps_directions) {
  for (int d = 0; d <= NN_MAX_DEG; d++) {
    uint64_t s = 800 + d;
    int N = 4, dim = NN_DIM(d), C = 6;
    size_t n = (size_t)N * dim * C;
    struct norm_ctx c;
    norm_setup(&c, &s, N, dim, C);
    norm_loss(&c);
    double *y = zeros(n), *S = zeros(N * C), *T = zeros(N * C);
    int active;
    norm_ref(&c, y, S, T, &active);
    cr_expect_lt(max_err(c.y, y, n), 1e-13, "degree %d", d);
    cr_expect_lt(max_err(c.save, S, N * C), 1e-13, "save starts with s");
    /* y[n,:,c] is x[n,:,c] scaled to the norm t[n,c] */
    for (int i = 0; i < N; i++)
      for (int ch = 0; ch < C; ch++) {
        double yy = 0, xy = 0, xx = 0;
        for (int m = 0; m < dim; m++) {
          size_t k = ((size_t)i * dim + m) * C + ch;
          yy += c.y[k] * c.y[k];
          xy += c.x[k] * c.y[k];
          xx += c.x[k] * c.x[k];
        }
        cr_expect_float_eq(sqrt(yy), T[i * C + ch], 1e-13, "|y| = t");
        cr_expect_float_eq(xy, sqrt(xx * yy), 1e-13, "y parallel to x");
      }
    /* in place (y = x) gives the same */
    double *xy = copy(c.x, n), *save2 = zeros(nn_norm_save_size(N, C));
    nn_norm_forward(xy, save2, xy, c.gamma, c.beta, N, dim, C);
    cr_expect_lt(max_err(xy, y, n), 1e-13, "in place");
    free(xy);
    free(save2);
    free(y);
    free(S);
    free(T);
    norm_free(&c);
  }
}

Test(grad_dense, norm_gradients) {
  for (int d = 0; d <= NN_MAX_DEG; d++) {
    uint64_t s = 900 + d;
    int N = 4, dim = NN_DIM(d), C = 8;
    size_t n = (size_t)N * dim * C;
    struct norm_ctx c;
    norm_setup(&c, &s, N, dim, C);
    double *y = zeros(n), *S = zeros(N * C), *T = zeros(N * C);
    int active;
    double margin = norm_ref(&c, y, S, T, &active);
    cr_assert_gt(margin, 1e-3, "degree %d: data too close to a kink or the clamp: %g", d, margin);
    cr_assert(active > 0 && active < N * C, "both sides of the ReLU: %d of %d active", active, N * C);
    norm_loss(&c);
    double *dx = rnd(n, &s, GARBAGE), *dg = zeros(C), *db = zeros(C);
    nn_norm_backward(dx, dg, db, c.G, c.x, c.save, c.gamma, c.beta, N, dim, C);
    double wx = gc_worst(norm_loss, &c, c.x, dx, n, EVERY);
    double wg = gc_worst(norm_loss, &c, c.gamma, dg, C, EVERY);
    double wb = gc_worst(norm_loss, &c, c.beta, db, C, EVERY);
    cr_log_info("norm degree %d (N %d, C %d, %d of %d active, margin %.1e): worst dx %.2e dgamma %.2e dbeta %.2e", d, N,
                C, active, N * C, margin, wx, wg, wb);
    cr_expect_lt(wx, TOL, "degree %d dx %g", d, wx);
    cr_expect_lt(wg, TOL, "degree %d dgamma %g", d, wg);
    cr_expect_lt(wb, TOL, "degree %d dbeta %g", d, wb);
    free(y);
    free(S);
    free(T);
    free(dx);
    free(dg);
    free(db);
    norm_free(&c);
  }
}

/* Channels whose norm is below 2^-24: s is the constant 2^-24, so there
 * y = x t / 2^-24 is linear in x and dx = dy t / 2^-24 exactly (no term
 * through s). Checked by differences with a step that stays in the clamp. */
Test(grad_dense, norm_clamp) {
  uint64_t s = 1001;
  int N = 3, dim = 3, C = 4, cc = 2; /* channel cc: tiny at node 1, zero at node 2 */
  size_t n = (size_t)N * dim * C;
  struct norm_ctx c;
  norm_setup(&c, &s, N, dim, C);
  c.beta[cc] = 3; /* keep the clamped channels active: t > 0 */
  for (int m = 0; m < dim; m++) {
    c.x[((size_t)1 * dim + m) * C + cc] = 1e-9 * (m + 1);
    c.x[((size_t)2 * dim + m) * C + cc] = 0;
  }
  double *y = zeros(n), *S = zeros(N * C), *T = zeros(N * C);
  int active;
  norm_ref(&c, y, S, T, &active);
  cr_assert_eq(S[1 * C + cc], ldexp(1.0, -24));
  cr_assert_eq(S[2 * C + cc], ldexp(1.0, -24));
  cr_assert_gt(T[1 * C + cc], 0.5);
  cr_assert_gt(T[2 * C + cc], 0.5);
  norm_loss(&c);
  cr_expect_lt(max_err(c.y, y, n), 1e-13, "forward with clamped channels");
  double *dx = rnd(n, &s, GARBAGE), *dg = zeros(C), *db = zeros(C);
  nn_norm_backward(dx, dg, db, c.G, c.x, c.save, c.gamma, c.beta, N, dim, C);
  double worst = 0;
  for (int node = 1; node <= 2; node++)
    for (int m = 0; m < dim; m++) {
      size_t i = ((size_t)node * dim + m) * C + cc;
      double h = 1e-10, keep = c.x[i];
      c.x[i] = keep + h;
      double lp = norm_loss(&c);
      c.x[i] = keep - h;
      double lm = norm_loss(&c);
      c.x[i] = keep;
      double num = (lp - lm) / (2 * h), want = c.G[i] * T[node * C + cc] / ldexp(1.0, -24);
      cr_expect_float_eq(dx[i], want, 1e-9 * fabs(want), "dx = dy t / 2^-24 at (%d,%d)", node, m);
      worst = fmax(worst, fabs(num - dx[i]) / fmax(1.0, fmax(fabs(num), fabs(dx[i]))));
    }
  /* the other channels of those nodes still see the clamped norm as a constant */
  double wo = 0;
  for (size_t i = 0; i < n; i++) {
    if ((int)(i % C) == cc && i / ((size_t)dim * C) >= 1) continue;
    double h = 1e-6, keep = c.x[i];
    c.x[i] = keep + h;
    double lp = norm_loss(&c);
    c.x[i] = keep - h;
    double lm = norm_loss(&c);
    c.x[i] = keep;
    double num = (lp - lm) / (2 * h);
    wo = fmax(wo, fabs(num - dx[i]) / fmax(1.0, fmax(fabs(num), fabs(dx[i]))));
  }
  double wg = gc_worst(norm_loss, &c, c.gamma, dg, C, EVERY), wb = gc_worst(norm_loss, &c, c.beta, db, C, EVERY);
  cr_log_info("norm clamp: worst dx clamped %.2e, dx others %.2e, dgamma %.2e, dbeta %.2e", worst, wo, wg, wb);
  cr_expect_lt(worst, TOL, "clamped dx %g", worst);
  cr_expect_lt(wo, TOL, "other dx %g", wo);
  cr_expect_lt(wg, TOL, "dgamma %g", wg);
  cr_expect_lt(wb, TOL, "dbeta %g", wb);
  free(y);
  free(S);
  free(T);
  free(dx);
  free(dg);
  free(db);
  norm_free(&c);
}

/* Rotating every fiber of a node rotates the output the same way: degree 1
 * by R itself on the (y, z, x) triples, degrees 2 and 3 by D_l(R) (so3.h). */
Test(grad_dense, norm_is_equivariant) {
  uint64_t s = 1101, rs = 77;
  for (int d = 1; d <= NN_MAX_DEG; d++) {
    int N = 3, dim = NN_DIM(d), C = 5;
    size_t n = (size_t)N * dim * C;
    double R[9], D[49];
    so3_random_rotation(&rs, R);
    if (d == 1) {
      const int axis[3] = {1, 2, 0}; /* component m -> axis: (y, z, x) */
      for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++)
          D[a * 3 + b] = R[axis[a] * 3 + axis[b]];
    } else {
      so3_wigner_d(d, R, D);
    }
    struct norm_ctx c;
    norm_setup(&c, &s, N, dim, C);
    norm_loss(&c);
    double *y = copy(c.y, n), *Dy = zeros(n);
    for (int i = 0; i < N; i++) /* x <- D x, Dy <- D y */
      for (int ch = 0; ch < C; ch++) {
        double xv[7], yv[7];
        for (int m = 0; m < dim; m++) {
          xv[m] = c.x[((size_t)i * dim + m) * C + ch];
          yv[m] = y[((size_t)i * dim + m) * C + ch];
        }
        for (int m = 0; m < dim; m++) {
          double a = 0, b = 0;
          for (int k = 0; k < dim; k++) {
            a += D[m * dim + k] * xv[k];
            b += D[m * dim + k] * yv[k];
          }
          c.x[((size_t)i * dim + m) * C + ch] = a;
          Dy[((size_t)i * dim + m) * C + ch] = b;
        }
      }
    norm_loss(&c);
    double e = max_err(c.y, Dy, n), moved = max_err(y, Dy, n);
    cr_log_info("norm equivariance degree %d: |f(Dx) - D f(x)| %.2e (|D f(x) - f(x)| %.2e)", d, e, moved);
    cr_expect_lt(e, 1e-12, "degree %d: %g", d, e);
    cr_expect_gt(moved, 1e-2, "the rotation moves the output");
    free(y);
    free(Dy);
    norm_free(&c);
  }
}

Test(grad_dense, norm_accumulates_parameters_overwrites_inputs) {
  uint64_t s = 1201;
  int N = 4, dim = 5, C = 6;
  size_t n = (size_t)N * dim * C;
  struct norm_ctx c;
  norm_setup(&c, &s, N, dim, C);
  norm_loss(&c);
  double *dx = rnd(n, &s, GARBAGE), *dg = zeros(C), *db = zeros(C);
  nn_norm_backward(dx, dg, db, c.G, c.x, c.save, c.gamma, c.beta, N, dim, C);
  double *dx1 = copy(dx, n), *dg1 = copy(dg, C), *db1 = copy(db, C);
  fill(dx, n, GARBAGE);
  nn_norm_backward(dx, dg, db, c.G, c.x, c.save, c.gamma, c.beta, N, dim, C);
  cr_expect_lt(max_err(dx, dx1, n), 1e-15, "dx overwritten");
  for (int i = 0; i < C; i++) { /* the same terms added twice, in a different grouping */
    cr_expect_float_eq(dg[i], 2 * dg1[i], 1e-14, "dgamma accumulates");
    cr_expect_float_eq(db[i], 2 * db1[i], 1e-14, "dbeta accumulates");
  }
  nn_norm_backward(NULL, dg, db, c.G, c.x, c.save, c.gamma, c.beta, N, dim, C);
  for (int i = 0; i < C; i++)
    cr_expect_float_eq(db[i], 3 * db1[i], 1e-14, "dbeta with dx NULL");
  double *g = copy(c.G, n); /* dx may be dy */
  nn_norm_backward(g, dg, db, g, c.x, c.save, c.gamma, c.beta, N, dim, C);
  cr_expect_lt(max_err(g, dx1, n), 1e-15, "dx in place of dy");
  cr_expect_geq(nn_norm_save_size(N, C), (size_t)(2 * N * C + N));
  free(g);
  free(dx);
  free(dg);
  free(db);
  free(dx1);
  free(dg1);
  free(db1);
  norm_free(&c);
}

/* ---- pooling ---------------------------------------------------------------- */

/* 5 molecules of 3, 1, 0, 4 and 2 atoms */
#define PN 10
#define PG 5
static const int32_t pool_start[PG + 1] = {0, 3, 4, 4, 8, 10};

struct pool_ctx {
  double *x, *y, *G;
  int32_t *arg;
  int C, mean;
};

static double pool_loss(void *p) {
  struct pool_ctx *c = p;
  if (c->mean)
    nn_pool_mean_forward(c->y, c->x, pool_start, PG, c->C);
  else
    nn_pool_max_forward(c->y, c->arg, c->x, pool_start, PG, c->C);
  return dot(c->G, c->y, (size_t)PG * c->C);
}

static void pool_setup(struct pool_ctx *c, uint64_t *s, int C, int mean) {
  *c = (struct pool_ctx){.C = C, .mean = mean};
  c->x = rnd((size_t)PN * C, s, 1.0);
  c->y = rnd((size_t)PG * C, s, GARBAGE); /* must be overwritten */
  c->G = rnd((size_t)PG * C, s, 1.0);
  c->arg = malloc((size_t)PG * C * sizeof *c->arg);
  cr_assert_not_null(c->arg);
  for (int i = 0; i < PG * C; i++)
    c->arg[i] = 12345;
}
static void pool_free(struct pool_ctx *c) {
  free(c->x);
  free(c->y);
  free(c->G);
  free(c->arg);
}

Test(grad_dense, pool_max_forward_and_gradients) {
  uint64_t s = 1301;
  int C = 4;
  struct pool_ctx c;
  pool_setup(&c, &s, C, 0);
  pool_loss(&c);
  double gap = INFINITY; /* between the maximum and the runner-up */
  for (int g = 0; g < PG; g++)
    for (int ch = 0; ch < C; ch++) {
      double best = 0, second = -INFINITY;
      int32_t at = -1;
      for (int32_t i = pool_start[g]; i < pool_start[g + 1]; i++) {
        double v = c.x[i * C + ch];
        if (at < 0 || v > best) {
          second = at < 0 ? second : best;
          best = v;
          at = i;
        } else if (v > second) {
          second = v;
        }
      }
      cr_expect_eq(c.y[g * C + ch], best, "y (%d,%d)", g, ch);
      cr_expect_eq(c.arg[g * C + ch], at, "arg (%d,%d)", g, ch);
      if (second > -INFINITY) gap = fmin(gap, best - second);
    }
  cr_assert_gt(gap, 1e-4, "data too close to a tie: %g", gap);
  double *dx = rnd((size_t)PN * C, &s, GARBAGE);
  nn_pool_max_backward(dx, c.G, c.arg, PN, PG, C);
  double w = gc_worst(pool_loss, &c, c.x, dx, (size_t)PN * C, EVERY);
  cr_log_info("pool max (N %d, G %d, C %d): worst dx %.2e", PN, PG, C, w);
  cr_expect_lt(w, TOL, "dx %g", w);
  free(dx);
  pool_free(&c);
}

/* Ties go to the first node; an empty molecule gives y = 0 and arg = -1 and
 * sends no gradient; dx is zero away from the argmax nodes. */
Test(grad_dense, pool_max_ties_and_empty_molecules) {
  uint64_t s = 1401;
  int C = 3;
  struct pool_ctx c;
  pool_setup(&c, &s, C, 0);
  for (int i = 0; i < PN * C; i++)
    c.x[i] = -1 - c.x[i] * c.x[i]; /* all negative: max 0 would be wrong */
  for (int i = 0; i < 3; i++)
    c.x[i * C + 0] = -0.5; /* molecule 0, channel 0: all tie */
  c.x[0 * C + 1] = -0.9;   /* channel 1: nodes 1, 2 tie */
  c.x[1 * C + 1] = -0.25;
  c.x[2 * C + 1] = -0.25;
  c.x[5 * C + 2] = 2.0; /* molecule 3, channel 2: nodes 5 and 7 tie */
  c.x[7 * C + 2] = 2.0;
  pool_loss(&c);
  cr_expect_eq(c.arg[0 * C + 0], 0);
  cr_expect_eq(c.y[0 * C + 0], -0.5);
  cr_expect_eq(c.arg[0 * C + 1], 1);
  cr_expect_eq(c.y[0 * C + 1], -0.25);
  cr_expect_eq(c.arg[3 * C + 2], 5);
  for (int ch = 0; ch < C; ch++) {
    cr_expect_eq(c.arg[1 * C + ch], 3, "a one-atom molecule");
    cr_expect_eq(c.y[1 * C + ch], c.x[3 * C + ch]);
    cr_expect_eq(c.y[2 * C + ch], 0.0, "empty molecule: y = 0");
    cr_expect_eq(c.arg[2 * C + ch], -1, "empty molecule: arg = -1");
  }
  double *dx = rnd((size_t)PN * C, &s, GARBAGE);
  nn_pool_max_backward(dx, c.G, c.arg, PN, PG, C);
  for (int i = 0; i < PN; i++)
    for (int ch = 0; ch < C; ch++) {
      double want = 0;
      for (int g = 0; g < PG; g++)
        if (c.arg[g * C + ch] == i) want += c.G[g * C + ch];
      cr_expect_eq(dx[i * C + ch], want, "dx (%d,%d)", i, ch);
    }
  cr_expect_eq(dx[1 * C + 0], 0.0, "a tie's second node gets nothing");
  cr_expect_eq(dx[7 * C + 2], 0.0, "a tie's second node gets nothing");
  cr_expect_eq(dx[0 * C + 0], c.G[0]);
  free(dx);
  pool_free(&c);
}

Test(grad_dense, pool_mean_forward_gradients_and_empty_molecules) {
  uint64_t s = 1501;
  int C = 4;
  struct pool_ctx c;
  pool_setup(&c, &s, C, 1);
  pool_loss(&c);
  for (int g = 0; g < PG; g++)
    for (int ch = 0; ch < C; ch++) {
      double want = 0;
      int cnt = pool_start[g + 1] - pool_start[g];
      for (int32_t i = pool_start[g]; i < pool_start[g + 1]; i++)
        want += c.x[i * C + ch];
      want = cnt ? want / cnt : 0;
      cr_expect_float_eq(c.y[g * C + ch], want, 1e-15, "y (%d,%d)", g, ch);
    }
  for (int ch = 0; ch < C; ch++)
    cr_expect_eq(c.y[2 * C + ch], 0.0, "empty molecule: y = 0");
  double *dx = rnd((size_t)PN * C, &s, GARBAGE);
  nn_pool_mean_backward(dx, c.G, pool_start, PG, C);
  for (int g = 0; g < PG; g++)
    for (int32_t i = pool_start[g]; i < pool_start[g + 1]; i++)
      for (int ch = 0; ch < C; ch++)
        cr_expect_float_eq(dx[i * C + ch], c.G[g * C + ch] / (pool_start[g + 1] - pool_start[g]), 1e-15);
  double w = gc_worst(pool_loss, &c, c.x, dx, (size_t)PN * C, EVERY);
  cr_log_info("pool mean (N %d, G %d, C %d): worst dx %.2e", PN, PG, C, w);
  cr_expect_lt(w, TOL, "dx %g", w);
  free(dx);
  pool_free(&c);
}
