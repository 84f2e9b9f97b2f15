/* test_gpu_train.c — training on the CUDA backend against the CPU backend,
 * through the stages' API (models/model.h, se3_net), on small random
 * batches of molecules:
 *
 *   (a) one step (forward, an MSE loss on the host, backward, clip, AdamW)
 *       on both, for a small model and one of the se3_qm9 preset's sizes
 *       with a few molecules: predictions, the gradient, the clipped norm
 *       and the updated parameters;
 *   (b) 50 steps on both (small model): final parameters and loss;
 *   (c) determinism: two GPU runs of 20 steps give bitwise-equal parameters;
 *   (d) equivariance on the GPU: a rotated and translated copy of the batch
 *       (positions rotated before the bases are computed) gives the same
 *       predictions, to a bound per precision (fp32, tf32, bf16, fp16), each
 *       error printed;
 *   (e) the train stage's step with the loss and the clipping on the device
 *       (nothing waits from one step to the next) gives the parameters and
 *       losses of the step with the loss on the host, bit for bit;
 *   (f) bases computed on the device from the relative positions give the
 *       predictions and gradient of the host's bases, within 1e-5;
 *   (g) recorded steps (se3_net_train_step, SE3_STEPS_RECORDED: padded to a
 *       shape, recorded once per shape as a CUDA graph, replayed) give the
 *       parameters and loss sum of the same padded steps run eagerly, bit
 *       for bit, through a reallocation that makes the recordings stale;
 *       and the CPU's plain steps within (b)'s bounds (12 steps of the
 *       small model, 8 at se3_qm9 sizes);
 *   (h) fp16's loss-scaled steps recorded (per shape and scale) against
 *       the same padded steps run eagerly and the plain ones whose scaler
 *       decides on the host: scale 1e39 at two steps (the loss's gradient
 *       overflows; the second of them is recorded) skips them (the
 *       parameters bitwise as they were, the norm not finite on all
 *       three), and recorded and eager end bitwise equal (the device
 *       only; the CPU has no fp16).
 *
 *   test_gpu_train [cuda|cuda:N] [--parts LETTERS]
 *                                     exit 0 passed, 1 failed, 77 skipped
 *                                     (no CUDA backend in this build or no
 *                                     GPU: never reported as passed);
 *                                     --parts: only those of (a)-(h)
 *                                     (all by default; for a quick look
 *                                     under dev/cuda_emu, e.g. --parts h)
 *   test_gpu_train cpu [--noise X]    the CPU against itself, for checking
 *                                     this program and its bounds: with
 *                                     --noise the "device" run's gradient
 *                                     gets noise X (|g_i| + rms g) after
 *                                     every backward (1e-6 stands for GPU
 *                                     round-off; 1e-2 must fail). Not a GPU
 *                                     test; ctest does not run it.
 *
 * Bounds (fp32), and why:
 *   predictions   max |d| / max |y_cpu| <= 1e-4 (summation order only)
 *   gradient      ||d|| / ||g_cpu|| <= 1e-3 (L2; max pooling and ReLU
 *                 boundaries can move single entries more)
 *   clip norm     relative 1e-4
 *   parameters    after one step, every |d| <= 2 lr (AdamW's first step
 *                 moves a parameter by at most lr: gradients near zero may
 *                 take either sign), and |d| <= 1e-5 (|p| + lr) wherever
 *                 |g| > 1e-4 max |g| (there the step is lr sign(g))
 *   50 steps      ||p_gpu - p_cpu|| <= 0.2 ||p_cpu - p_0||, losses within
 *                 1e-2 relative, and the CPU's loss must have fallen. Adam
 *                 turns round-off in near-zero gradient entries into steps
 *                 of either sign, so parameters drift apart much faster
 *                 than the loss does. Calibrated with `cpu --noise X`:
 *                 X = 1e-7, 1e-6, 1e-5 (round-off sized) give 1.7e-3,
 *                 1.5e-2, 7.7e-2 for the parameters and 5e-7, 4e-7, 2e-4
 *                 for the loss; X = 1e-4 gives 0.19 and 1.1e-2 (fails),
 *                 X = 1e-2 (a gradient 1% wrong) 0.54 and 6.4e-2 (fails,
 *                 as do (a)'s gradient and parameter checks)
 *   equivariance  relative change <= 1e-4 in fp32, 2e-2 in tf32 (TF32 keeps
 *                 10 mantissa bits; NVIDIA's own equivariance test fails
 *                 under TF32 with fp32 bounds)
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/cpu/table.h"
#include "models/device.h"
#include "models/model.h"
#include "models/so3.h"

#define SKIP_CODE 77

static int n_pass, n_fail;
static double noise; /* cpu self-check: relative noise on the device run's gradient */

static void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(int ok, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("%-4s ", ok ? "ok" : "FAIL");
  vprintf(fmt, ap);
  printf("\n");
  fflush(stdout);
  va_end(ap);
  if (ok)
    n_pass++;
  else
    n_fail++;
}

static void die(const char *what, const char *err) {
  printf("FAIL %s: %s\n", what, err);
  exit(1);
}

/* ---- molecules and batches --------------------------------------------------- */

enum { MAX_ATOMS = 16, MAX_MOLS = 8 };

struct molset {
  int G, n[MAX_MOLS], elem[MAX_MOLS][MAX_ATOMS];
  double pos[MAX_MOLS][MAX_ATOMS][3];
  real y[MAX_MOLS * 2]; /* targets, G x outputs */
};

/* Molecules of the given sizes: atoms in a ball, at least 0.9 Å apart, one
 * of 5 elements each; random targets. */
static void make_mols(struct molset *ms, const int *sizes, int G, uint64_t seed) {
  uint64_t rng = seed;
  memset(ms, 0, sizeof *ms);
  ms->G = G;
  for (int g = 0; g < G; g++) {
    ms->n[g] = sizes[g];
    double R = 1.0 + 0.35 * sizes[g];
    for (int a = 0; a < sizes[g]; a++) {
      ms->elem[g][a] = (int)(so3_rng_uniform(&rng) * 5);
      for (int tries = 0; tries < 10000; tries++) {
        double *p = ms->pos[g][a];
        for (int k = 0; k < 3; k++)
          p[k] = R * (2 * so3_rng_uniform(&rng) - 1);
        int ok = 1;
        for (int b = 0; b < a && ok; b++) {
          double d2 = 0;
          for (int k = 0; k < 3; k++)
            d2 += (p[k] - ms->pos[g][b][k]) * (p[k] - ms->pos[g][b][k]);
          ok = d2 > 0.81;
        }
        if (ok) break;
      }
    }
  }
  for (int i = 0; i < G * 2; i++)
    ms->y[i] = (real)(2 * so3_rng_uniform(&rng) - 1);
}

/* The batch of a molecule set, positions transformed by x -> Q x + t first:
 * radius graphs at `cutoff` (edges sorted by target, then source), node
 * features a one-hot of the element and a constant, edge features the bond
 * one-hot (a "single bond" under 1.6 Å, else "none") and the distance. */
static void make_batch(struct se3_batch_buf *bb, const struct se3_model *m, const struct molset *ms, double cutoff,
                       const double Q[9], const double t[3]) {
  se3_batch_buf_init(bb, m->cfg.node_in, m->cfg.edge_in);
  for (int g = 0; g < ms->G; g++) {
    int n = ms->n[g];
    double p[MAX_ATOMS][3];
    for (int a = 0; a < n; a++) {
      so3_matvec(Q, ms->pos[g][a], p[a]);
      for (int k = 0; k < 3; k++)
        p[a][k] += t[k];
    }
    float node[MAX_ATOMS * 6] = {0}, edge[MAX_ATOMS * MAX_ATOMS * 6], rel[MAX_ATOMS * MAX_ATOMS * 3];
    int32_t src[MAX_ATOMS * MAX_ATOMS], dst[MAX_ATOMS * MAX_ATOMS];
    int e = 0;
    for (int a = 0; a < n; a++) {
      node[a * 6 + ms->elem[g][a]] = 1;
      node[a * 6 + 5] = 0.5f;
    }
    for (int d = 0; d < n; d++)
      for (int s = 0; s < n; s++) {
        if (s == d) continue;
        double v[3], r = 0;
        for (int k = 0; k < 3; k++) {
          v[k] = p[d][k] - p[s][k];
          r += v[k] * v[k];
        }
        r = sqrt(r);
        if (r >= cutoff) continue;
        src[e] = s;
        dst[e] = d;
        for (int k = 0; k < 6; k++)
          edge[e * 6 + k] = 0;
        edge[e * 6 + (r < 1.6 ? 1 : 0)] = 1;
        edge[e * 6 + 5] = (float)r;
        for (int k = 0; k < 3; k++)
          rel[e * 3 + k] = (float)v[k];
        e++;
      }
    if (se3_batch_add(bb, n, node, e, src, dst, edge, rel)) die("batch", "out of memory");
  }
  if (se3_batch_bases(bb, &m->plan)) die("batch", "out of memory");
}

static const double IDENTITY[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1}, ZERO3[3] = {0, 0, 0};

static double l2(const real *a, const real *b, size_t n) { /* ||a - b||, b may be NULL */
  double s = 0;
  for (size_t i = 0; i < n; i++) {
    double d = (double)a[i] - (b ? b[i] : 0);
    s += d * d;
  }
  return sqrt(s);
}
static double maxabs(const real *a, const real *b, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; i++)
    m = fmax(m, fabs((double)a[i] - (b ? b[i] : 0)));
  return m;
}

/* ---- training -------------------------------------------------------------------- */

static const struct nn_adam ADAM = {0.9, 0.999, 1e-8, 1e-4, 1}; /* AdamW */
static const double LR = 1e-3, MAX_NORM = 1.0;

struct run {
  struct se3_net *net;
  size_t np;
  int outputs, G, noisy;
  real *pred, *dpred;
  uint64_t rng;
};

static void run_open(struct run *r, const struct nn_backend *be, const struct se3_config *cfg, int G, int noisy) {
  struct se3_error err;
  memset(r, 0, sizeof *r);
  r->net = se3_net_create(be, cfg, 0, &err);
  if (!r->net) die("se3_net_create", se3_error_str(&err).s);
  if (se3_net_init_params(r->net, 42)) die("se3_net_init_params", "out of memory");
  r->np = se3_net_n_params(r->net);
  r->outputs = cfg->outputs;
  r->G = G;
  r->noisy = noisy;
  r->pred = calloc((size_t)G * cfg->outputs, sizeof(real));
  r->dpred = calloc((size_t)G * cfg->outputs, sizeof(real));
  r->rng = 99;
}

static void run_close(struct run *r) {
  se3_net_free(r->net);
  free(r->pred);
  free(r->dpred);
}

/* Forward and backward: the predictions in r->pred; the MSE loss. */
static double forward_backward(struct run *r, const struct se3_batch *b, const real *y) {
  struct se3_error err;
  if (se3_net_forward(r->net, b, r->pred, 1, &err)) die("se3_net_forward", se3_error_str(&err).s);
  size_t n = (size_t)r->G * r->outputs;
  double loss = 0;
  for (size_t i = 0; i < n; i++) {
    double d = (double)r->pred[i] - y[i];
    loss += d * d / (double)n;
    r->dpred[i] = (real)(2 * d / (double)n);
  }
  if (se3_net_backward(r->net, r->dpred, &err)) die("se3_net_backward", se3_error_str(&err).s);
  if (r->noisy && noise > 0) { /* the self-check's stand-in for another summation order */
    real *g = malloc(r->np * sizeof *g);
    se3_net_get(r->net, SE3_NET_GRAD, g);
    double rms = l2(g, NULL, r->np) / sqrt((double)r->np);
    for (size_t i = 0; i < r->np; i++) /* relative to the entry and to the gradient's size: signs of small entries
                                          flip; exact zeros (dead units, unused parameters) stay zero on any backend */
      if (g[i] != 0) g[i] = (real)(g[i] + noise * (fabs((double)g[i]) + rms) * (2 * so3_rng_uniform(&r->rng) - 1));
    se3_net_set(r->net, SE3_NET_GRAD, g);
    free(g);
  }
  return loss;
}

static double update(struct run *r, long step) {
  double norm = se3_net_clip(r->net, MAX_NORM);
  se3_net_adam(r->net, &ADAM, step, LR);
  return norm;
}

static double loss_now(struct run *r, const struct se3_batch *b, const real *y) {
  struct se3_error err;
  if (se3_net_forward(r->net, b, r->pred, 0, &err)) die("se3_net_forward", se3_error_str(&err).s);
  size_t n = (size_t)r->G * r->outputs;
  double loss = 0;
  for (size_t i = 0; i < n; i++)
    loss += ((double)r->pred[i] - y[i]) * ((double)r->pred[i] - y[i]) / (double)n;
  return loss;
}

static real *get(struct run *r, enum se3_net_array which) {
  real *p = malloc((r->np ? r->np : 1) * sizeof *p);
  se3_net_get(r->net, which, p);
  return p;
}

/* ---- the checks --------------------------------------------------------------------- */

struct model_case {
  const char *name;
  struct se3_config cfg;
  int sizes[MAX_MOLS], G;
  double cutoff;
};

/* (a) */
static void one_step(const struct model_case *mc, const struct nn_backend *cpu, const struct nn_backend *dev) {
  struct run c, d;
  run_open(&c, cpu, &mc->cfg, mc->G, 0);
  run_open(&d, dev, &mc->cfg, mc->G, 1);
  struct molset ms;
  make_mols(&ms, mc->sizes, mc->G, 7);
  struct se3_batch_buf bb;
  make_batch(&bb, se3_net_model(c.net), &ms, mc->cutoff, IDENTITY, ZERO3);
  size_t np = c.np, no = (size_t)mc->G * mc->cfg.outputs;
  real *p0 = get(&c, SE3_NET_PARAMS);
  double lc = forward_backward(&c, &bb.b, ms.y), ld = forward_backward(&d, &bb.b, ms.y);
  double pe = maxabs(d.pred, c.pred, no) / fmax(maxabs(c.pred, NULL, no), 1e-30);
  check(pe <= 1e-4, "(a) %s: one step: predictions max |d| / max |y| = %.2e (bound 1e-4); loss %.6f vs %.6f", mc->name,
        pe, ld, lc);
  real *gc = get(&c, SE3_NET_GRAD), *gd = get(&d, SE3_NET_GRAD);
  double gn = l2(gc, NULL, np), ge = l2(gd, gc, np) / fmax(gn, 1e-30);
  check(gn > 0 && ge <= 1e-3,
        "(a) %s: gradient ||d|| / ||g|| = %.2e (bound 1e-3); max |d| %.2e, ||g|| %.3e, %zu "
        "parameters",
        mc->name, ge, maxabs(gd, gc, np), gn, np);
  double nc = update(&c, 1), nd = update(&d, 1);
  check(fabs(nd - nc) <= 1e-4 * nc,
        "(a) %s: gradient norm before clipping %.6e vs %.6e (relative bound 1e-4; clipped "
        "to %g)",
        mc->name, nd, nc, MAX_NORM);
  real *pc = get(&c, SE3_NET_PARAMS), *pd = get(&d, SE3_NET_PARAMS);
  double gmax = maxabs(gc, NULL, np), worst_all = 0, worst_big = 0, moved = 0;
  size_t n_big = 0;
  for (size_t i = 0; i < np; i++) {
    double dp = fabs((double)pd[i] - pc[i]);
    worst_all = fmax(worst_all, dp);
    moved = fmax(moved, fabs((double)pc[i] - p0[i]));
    if (fabs((double)gc[i]) > 1e-4 * gmax) {
      n_big++;
      worst_big = fmax(worst_big, dp / (fabs((double)pc[i]) + LR));
    }
  }
  check(worst_all <= 2 * LR && worst_big <= 1e-5 && moved > 0.5 * LR,
        "(a) %s: updated parameters: max |d| %.2e (bound 2 lr = %.0e); where |g| > 1e-4 max|g| (%zu of %zu) max |d| / "
        "(|p| + lr) %.2e (bound 1e-5); the step moved them by up to %.2e",
        mc->name, worst_all, 2 * LR, n_big, np, worst_big, moved);
  free(p0);
  free(gc);
  free(gd);
  free(pc);
  free(pd);
  se3_batch_buf_free(&bb);
  run_close(&c);
  run_close(&d);
}

/* (b) */
static void fifty_steps(const struct model_case *mc, const struct nn_backend *cpu, const struct nn_backend *dev) {
  const int steps = 50;
  struct run c, d;
  run_open(&c, cpu, &mc->cfg, mc->G, 0);
  run_open(&d, dev, &mc->cfg, mc->G, 1);
  struct molset ms;
  make_mols(&ms, mc->sizes, mc->G, 11);
  struct se3_batch_buf bb;
  make_batch(&bb, se3_net_model(c.net), &ms, mc->cutoff, IDENTITY, ZERO3);
  real *p0 = get(&c, SE3_NET_PARAMS);
  double l0 = loss_now(&c, &bb.b, ms.y);
  for (long s = 1; s <= steps; s++) {
    forward_backward(&c, &bb.b, ms.y);
    forward_backward(&d, &bb.b, ms.y);
    update(&c, s);
    update(&d, s);
  }
  double lc = loss_now(&c, &bb.b, ms.y), ld = loss_now(&d, &bb.b, ms.y);
  real *pc = get(&c, SE3_NET_PARAMS), *pd = get(&d, SE3_NET_PARAMS);
  double path = l2(pc, p0, c.np), diff = l2(pd, pc, c.np) / fmax(path, 1e-30);
  check(lc < 0.9 * l0, "(b) %s: %d steps on the CPU: loss %.5f -> %.5f (must fall by 10%%)", mc->name, steps, l0, lc);
  check(diff <= 0.2 && fabs(ld - lc) <= 1e-2 * lc,
        "(b) %s: after %d steps: ||p_dev - p_cpu|| / ||p_cpu - p_0|| = %.2e (bound 0.2); loss %.6f vs %.6f (relative "
        "%.2e, bound 1e-2)",
        mc->name, steps, diff, ld, lc, fabs(ld - lc) / lc);
  free(p0);
  free(pc);
  free(pd);
  se3_batch_buf_free(&bb);
  run_close(&c);
  run_close(&d);
}

/* (e) The train stage's step, with the loss, its gradient and the clipping
 * left on the device (se3_net_forward_loss, se3_net_backward_loss,
 * se3_net_clip_queued; nothing waits until the loss sum is read), against
 * the step with the predictions on the host (se3_net_forward, nn_loss,
 * se3_net_backward, se3_net_clip) on the same backend: the same arithmetic
 * in the same order (models/kernels/loss.h), so the same parameters and
 * losses, bit for bit, after 20 steps of a half-batch share (num/den) with
 * clipping that bites. */
static void queued_step(const struct model_case *mc, const struct nn_backend *dev) {
  const int steps = 20;
  struct se3_error err;
  struct run h, q;
  run_open(&h, dev, &mc->cfg, mc->G, 0);
  run_open(&q, dev, &mc->cfg, mc->G, 0);
  struct molset ms;
  make_mols(&ms, mc->sizes, mc->G, 17);
  struct se3_batch_buf bb;
  make_batch(&bb, se3_net_model(h.net), &ms, mc->cutoff, IDENTITY, ZERO3);
  int n = mc->G * mc->cfg.outputs;
  real *y = malloc((size_t)n * sizeof *y);
  for (int i = 0; i < n; i++)
    y[i] = (real)ms.y[i];
  const struct se3_loss_spec ls = {NN_LOSS_HUBER, 1.0, n, 2 * n, 1};
  double sum_h = 0, sum_q = 0;
  se3_net_set_loss_sum(q.net, 0);
  for (long s = 1; s <= steps; s++) {
    if (se3_net_forward(h.net, &bb.b, h.pred, 1, &err)) die("se3_net_forward", se3_error_str(&err).s);
    sum_h += nn_loss(NN_LOSS_HUBER, h.pred, y, NULL, n, 1.0, h.dpred) * n;
    for (int i = 0; i < n; i++)
      h.dpred[i] = (real)((double)h.dpred[i] * n / (2 * n));
    if (se3_net_backward(h.net, h.dpred, &err)) die("se3_net_backward", se3_error_str(&err).s);
    se3_net_clip(h.net, 0.05);
    se3_net_adam(h.net, &ADAM, s, LR);
    if (se3_net_forward_loss(q.net, &bb.b, y, &ls, &err)) die("se3_net_forward_loss", se3_error_str(&err).s);
    if (se3_net_backward_loss(q.net, &err)) die("se3_net_backward_loss", se3_error_str(&err).s);
    se3_net_clip_queued(q.net, 0.05);
    se3_net_adam(q.net, &ADAM, s, LR);
  }
  if (se3_net_loss_sum(q.net, &sum_q, &err)) die("se3_net_loss_sum", se3_error_str(&err).s);
  real *ph = get(&h, SE3_NET_PARAMS), *pq = get(&q, SE3_NET_PARAMS);
  size_t differ = 0;
  for (size_t i = 0; i < h.np; i++)
    differ += memcmp(&ph[i], &pq[i], sizeof(real)) != 0;
  check(differ == 0 && sum_h == sum_q,
        "(e) %s: %d steps on %s with the loss and clipping on the device against the host's: %zu of %zu parameters "
        "differ bitwise (must be 0); loss sums %.17g, %.17g",
        mc->name, steps, dev->name, differ, h.np, sum_q, sum_h);
  free(ph);
  free(pq);
  free(y);
  se3_batch_buf_free(&bb);
  run_close(&h);
  run_close(&q);
}

/* (f) The bases computed on the device (a batch of relative positions only,
 * se3_batch_geometry: what the stages send) against the host's bases sent
 * up: the same arithmetic (models/kernels/basis.h), a GPU's fused
 * multiply-adds aside, so predictions and the gradient within 1e-5. */
static void device_bases(const struct model_case *mc, const struct nn_backend *dev) {
  struct se3_error err;
  struct run d;
  run_open(&d, dev, &mc->cfg, mc->G, 0);
  struct molset ms;
  make_mols(&ms, mc->sizes, mc->G, 19);
  struct se3_batch_buf bb;
  make_batch(&bb, se3_net_model(d.net), &ms, mc->cutoff, IDENTITY, ZERO3);
  size_t no = (size_t)mc->G * mc->cfg.outputs;
  real *ph = malloc(no * sizeof *ph), *pg = malloc(no * sizeof *pg), *dout = malloc(no * sizeof *dout);
  for (size_t i = 0; i < no; i++)
    dout[i] = (real)(0.1 * (double)(i % 7) - 0.3);
  if (se3_net_forward(d.net, &bb.b, ph, 1, &err) || se3_net_backward(d.net, dout, &err))
    die("host bases", se3_error_str(&err).s);
  real *gh = get(&d, SE3_NET_GRAD);
  se3_batch_geometry(&bb);
  if (se3_net_forward(d.net, &bb.b, pg, 1, &err) || se3_net_backward(d.net, dout, &err))
    die("device bases", se3_error_str(&err).s);
  real *gg = get(&d, SE3_NET_GRAD);
  double pe = maxabs(pg, ph, no) / fmax(maxabs(ph, NULL, no), 1e-30),
         ge = l2(gg, gh, d.np) / fmax(l2(gh, NULL, d.np), 1e-30);
  check(pe <= 1e-5 && ge <= 1e-5,
        "(f) %s: bases computed on %s against the host's: predictions max |d| / max |y| = %.2e, gradient ||d|| / ||g|| "
        "= %.2e (bounds 1e-5)",
        mc->name, dev->name, pe, ge);
  free(ph), free(pg), free(dout), free(gh), free(gg);
  se3_batch_buf_free(&bb);
  run_close(&d);
}

/* (c) */
static void determinism(const struct model_case *mc, const struct nn_backend *dev) {
  const int steps = 20;
  real *p[2];
  double loss[2];
  for (int k = 0; k < 2; k++) {
    struct run d;
    run_open(&d, dev, &mc->cfg, mc->G, 0);
    struct molset ms;
    make_mols(&ms, mc->sizes, mc->G, 13);
    struct se3_batch_buf bb;
    make_batch(&bb, se3_net_model(d.net), &ms, mc->cutoff, IDENTITY, ZERO3);
    for (long s = 1; s <= steps; s++) {
      forward_backward(&d, &bb.b, ms.y);
      update(&d, s);
    }
    loss[k] = loss_now(&d, &bb.b, ms.y);
    p[k] = get(&d, SE3_NET_PARAMS);
    size_t np = d.np;
    if (k == 1) {
      size_t differ = 0;
      for (size_t i = 0; i < np; i++)
        differ += memcmp(&p[0][i], &p[1][i], sizeof(real)) != 0;
      check(differ == 0 && loss[0] == loss[1],
            "(c) %s: two runs of %d steps on %s: %zu of %zu parameters differ bitwise (must be 0); losses %.9g, %.9g",
            mc->name, steps, dev->name, differ, np, loss[0], loss[1]);
    }
    se3_batch_buf_free(&bb);
    run_close(&d);
  }
  free(p[0]);
  free(p[1]);
}

/* (d): the relative change of the predictions under a rotation and a
 * translation of every molecule. */
static double invariance(const struct model_case *mc, const struct nn_backend *be) {
  struct run r;
  run_open(&r, be, &mc->cfg, mc->G, 0);
  struct molset ms;
  make_mols(&ms, mc->sizes, mc->G, 17);
  uint64_t rng = 2024;
  double Q[9], t[3] = {1.25, -3.5, 0.75};
  so3_random_rotation(&rng, Q);
  struct se3_batch_buf a, b;
  make_batch(&a, se3_net_model(r.net), &ms, mc->cutoff, IDENTITY, ZERO3);
  make_batch(&b, se3_net_model(r.net), &ms, mc->cutoff, Q, t);
  if (a.b.E != b.b.E) die("(d) rotation", "the rotated graphs have other edges (a distance at the cutoff)");
  size_t no = (size_t)mc->G * mc->cfg.outputs;
  real *ya = calloc(no, sizeof *ya), *yb = calloc(no, sizeof *yb);
  struct se3_error err;
  if (se3_net_forward(r.net, &a.b, ya, 0, &err) || se3_net_forward(r.net, &b.b, yb, 0, &err))
    die("se3_net_forward", se3_error_str(&err).s);
  double rel = maxabs(yb, ya, no) / fmax(maxabs(ya, NULL, no), 1e-30);
  free(ya);
  free(yb);
  se3_batch_buf_free(&a);
  se3_batch_buf_free(&b);
  run_close(&r);
  return rel;
}

/* d: the GPU, or NULL when dev is the CPU (which has no tf32). A process
 * runs one precision at a time (models/backend.h): the tf32 check switches
 * the GPU's table to tf32 and back to fp32 afterwards. */
static void equivariance(const struct model_case *mc, const struct nn_backend *cpu, const struct nn_backend *dev,
                         const struct nn_device *d) {
  double rc = invariance(mc, cpu), rd = invariance(mc, dev);
  check(rd <= 1e-4, "(d) %s: rotation + translation, %s fp32: relative change %.2e (bound 1e-4; the CPU: %.2e)",
        mc->name, dev->name, rd, rc);
  if (!d) {
    printf("skip (d) %s: tf32: the CPU has no tf32\n", mc->name);
    return;
  }
  /* bounds: not measured on a GPU yet. Under dev/cuda_emu, whose cuBLAS
   * rounds the products' inputs as tensor cores do, the se3_qm9 sizes gave
   * 9.6e-3 (tf32) and 2.8e-2 (bf16), the small model 8.4e-5 and 2.1e-3 */
  static const struct {
    enum nn_precision p;
    const char *name;
    double bound;
  } reduced[] = {{NN_PREC_TF32, "tf32", 2e-2}, {NN_PREC_BF16, "bf16", 8e-2}, {NN_PREC_FP16, "fp16", 2e-2}};
  for (size_t i = 0; i < sizeof reduced / sizeof *reduced; i++) {
    struct se3_error why;
    const struct nn_backend *t = nn_backend_open(d, reduced[i].p, &why);
    if (t) {
      double rt = invariance(mc, t);
      check(rt <= reduced[i].bound, "(d) %s: rotation + translation, %s %s: relative change %.2e (bound %.0e)",
            mc->name, t->name, reduced[i].name, rt, reduced[i].bound);
    } else {
      check(0, "(d) %s: the CUDA backend did not open in %s: %s", mc->name, reduced[i].name, se3_error_str(&why).s);
    }
  }
  struct se3_error why;
  se3_error_clear(&why);
  check(nn_backend_open(d, NN_PREC_FP32, &why) == dev, "(d) %s: back to fp32: %s", mc->name, se3_error_str(&why).s);
}

/* (g) Two batches of different shapes in turn, `steps` (even, >= 8): each
 * shape's first step runs eagerly, its second is recorded, the rest
 * replayed; halfway both nets reserve a larger batch (buffers reallocated:
 * the recordings are stale and made anew). Against the same padded steps run
 * eagerly on the device (bitwise), and the CPU's plain steps (the padding
 * and the device's round-off: (b)'s bounds). */
static void recorded_steps(const struct model_case *mc, const struct nn_backend *cpu, const struct nn_backend *dev,
                           int steps) {
  struct se3_error err;
  struct run r, p, c;
  run_open(&r, dev, &mc->cfg, mc->G, 0);
  run_open(&p, dev, &mc->cfg, mc->G, 0);
  run_open(&c, cpu, &mc->cfg, mc->G, 0);
  se3_net_set_steps(r.net, SE3_STEPS_RECORDED);
  se3_net_set_steps(p.net, SE3_STEPS_PADDED);
  se3_net_set_steps(c.net, SE3_STEPS_PLAIN);
  struct molset ms[2];
  struct se3_batch_buf bb[2];
  int sizes2[MAX_MOLS];
  for (int g = 0; g < mc->G; g++)
    sizes2[g] = mc->sizes[mc->G - 1 - g] + (g % 2 ? 1 : 4);
  make_mols(&ms[0], mc->sizes, mc->G, 23);
  make_mols(&ms[1], sizes2, mc->G, 29);
  for (int i = 0; i < 2; i++) {
    make_batch(&bb[i], se3_net_model(r.net), &ms[i], mc->cutoff, IDENTITY, ZERO3);
    se3_batch_geometry(&bb[i]); /* (as the stages send it: the bases computed on the device) */
  }
  int n = mc->G * mc->cfg.outputs;
  const struct se3_loss_spec ls = {NN_LOSS_HUBER, 1.0, mc->G, mc->G, 1};
  struct run *all[3] = {&r, &p, &c};
  real *p0 = get(&c, SE3_NET_PARAMS);
  for (int k = 0; k < 3; k++)
    se3_net_set_loss_sum(all[k]->net, 0);
  for (long s = 1; s <= steps; s++) {
    int i = (int)(s % 2);
    real y[MAX_MOLS * 2];
    for (int j = 0; j < n; j++)
      y[j] = ms[i].y[j];
    for (int k = 0; k < 3; k++)
      if (se3_net_train_step(all[k]->net, &bb[i].b, y, &ls, 0.05, &ADAM, s, LR, &err))
        die("se3_net_train_step", se3_error_str(&err).s);
    if (s == steps / 2)
      for (int k = 0; k < 2; k++)
        if (se3_net_reserve(all[k]->net, 4 * (bb[0].b.N + bb[1].b.N), 4 * (bb[0].b.E + bb[1].b.E), 2 * mc->G, 1, &err))
          die("se3_net_reserve", se3_error_str(&err).s);
  }
  double sum[3];
  for (int k = 0; k < 3; k++)
    if (se3_net_loss_sum(all[k]->net, &sum[k], &err)) die("se3_net_loss_sum", se3_error_str(&err).s);
  real *pr = get(&r, SE3_NET_PARAMS), *pp = get(&p, SE3_NET_PARAMS), *pc = get(&c, SE3_NET_PARAMS);
  size_t differ = 0;
  for (size_t j = 0; j < r.np; j++)
    differ += memcmp(&pr[j], &pp[j], sizeof(real)) != 0;
  struct se3_step_stats st;
  se3_net_step_stats(r.net, &st);
  check(differ == 0 && sum[0] == sum[1],
        "(g) %s: %d recorded steps on %s (%ld eager, %ld recordings, %ld replays, %ld refused) against the same padded "
        "steps run eagerly: %zu of %zu parameters differ bitwise (must be 0); loss sums %.17g, %.17g",
        mc->name, steps, dev->name, st.eager, st.recorded, st.replayed, st.refused, differ, r.np, sum[0], sum[1]);
  if (dev->record_begin)
    /* each shape: eager once, recorded at its second step; after the
     * reallocation, recorded anew at its next */
    check(st.eager == 2 && st.recorded == 4 && st.replayed == steps - 2 && st.refused == 0,
          "(g) %s: %ld eager steps (want 2), %ld recordings (want 4: two shapes, twice), %ld replays (want %d), %ld "
          "refused (want 0)",
          mc->name, st.eager, st.recorded, st.replayed, steps - 2, st.refused);
  else
    printf("skip (g) %s: %s records nothing (its recorded steps are the padded ones)\n", mc->name, dev->name);
  double path = l2(pc, p0, c.np), diff = l2(pr, pc, c.np) / fmax(path, 1e-30);
  check(diff <= 0.2 && fabs(sum[0] - sum[2]) <= 1e-2 * fabs(sum[2]),
        "(g) %s: recorded steps on %s against the CPU's plain steps: ||p_dev - p_cpu|| / ||p_cpu - p_0|| = %.2e (bound "
        "0.2); loss sums %.6f vs %.6f (bound 1e-2 relative)",
        mc->name, dev->name, diff, sum[0], sum[2]);
  free(p0), free(pr), free(pp), free(pc);
  for (int i = 0; i < 2; i++)
    se3_batch_buf_free(&bb[i]);
  for (int k = 0; k < 3; k++)
    run_close(all[k]);
}

/* (h) Two batches in turn, 8 steps, on the device in fp16: nets recorded,
 * padded and plain; the loss scale 1e39 at steps 1 and 5, 1024 otherwise. */
static void scaled_steps(const struct model_case *mc, const struct nn_device *d, const struct nn_backend *dev) {
  if (!d) {
    printf("skip (h) %s: fp16: the CPU has no fp16\n", mc->name);
    return;
  }
  struct se3_error err;
  const struct nn_backend *h = nn_backend_open(d, NN_PREC_FP16, &err);
  if (!h) {
    check(0, "(h) %s: the CUDA backend did not open in fp16: %s", mc->name, se3_error_str(&err).s);
    return;
  }
  struct run r[3];
  const enum se3_steps how[3] = {SE3_STEPS_RECORDED, SE3_STEPS_PADDED, SE3_STEPS_PLAIN};
  for (int k = 0; k < 3; k++) {
    run_open(&r[k], h, &mc->cfg, mc->G, 0);
    se3_net_set_steps(r[k].net, how[k]);
    se3_net_set_loss_sum(r[k].net, 0);
  }
  struct molset ms[2];
  struct se3_batch_buf bb[2];
  int sizes2[MAX_MOLS];
  for (int g = 0; g < mc->G; g++)
    sizes2[g] = mc->sizes[mc->G - 1 - g] + (g % 2 ? 1 : 4);
  make_mols(&ms[0], mc->sizes, mc->G, 31);
  make_mols(&ms[1], sizes2, mc->G, 37);
  for (int i = 0; i < 2; i++) {
    make_batch(&bb[i], se3_net_model(r[0].net), &ms[i], mc->cutoff, IDENTITY, ZERO3);
    se3_batch_geometry(&bb[i]);
  }
  int n = mc->G * mc->cfg.outputs, bad_norm = 0, bad_skip = 0;
  long taken = 0;
  for (int s = 1; s <= 8; s++) {
    int i = s % 2, overflow = s == 1 || s == 5;
    real y[MAX_MOLS * 2];
    for (int j = 0; j < n; j++)
      y[j] = ms[i].y[j];
    const struct se3_loss_spec ls = {NN_LOSS_HUBER, 1.0, mc->G, mc->G, overflow ? 1e39 : 1024};
    real *before = get(&r[0], SE3_NET_PARAMS);
    double norm[3];
    for (int k = 0; k < 3; k++)
      if (se3_net_train_step(r[k].net, &bb[i].b, y, &ls, 0.05, &ADAM, taken + 1, LR, &err) ||
          se3_net_step_norm(r[k].net, &norm[k], &err))
        die("se3_net_train_step (fp16)", se3_error_str(&err).s);
    bad_norm += memcmp(&norm[0], &norm[1], sizeof norm[0]) != 0;
    for (int k = 0; k < 3; k++)
      bad_norm += (!isfinite(norm[k])) != overflow;
    real *after = get(&r[0], SE3_NET_PARAMS);
    if (overflow) bad_skip += memcmp(before, after, r[0].np * sizeof *after) != 0;
    free(before), free(after);
    taken += isfinite(norm[0]) != 0;
  }
  real *pr = get(&r[0], SE3_NET_PARAMS), *pp = get(&r[1], SE3_NET_PARAMS);
  size_t differ = 0;
  for (size_t j = 0; j < r[0].np; j++)
    differ += memcmp(&pr[j], &pp[j], sizeof(real)) != 0;
  struct se3_step_stats st;
  se3_net_step_stats(r[0].net, &st);
  check(!bad_norm && !bad_skip && !differ && taken == 6 && st.recorded >= 3 && !st.refused,
        "(h) %s: fp16 loss-scaled steps on %s (%ld eager, %ld recordings, %ld replays, %ld refused): norms off %d "
        "(recorded vs eager bitwise, not finite exactly at the 2 overflows), skipped steps that moved the "
        "parameters %d, %zu of %zu parameters differ from the eager steps' bitwise (all must be 0; 3 recordings "
        "or more)",
        mc->name, h->name, st.eager, st.recorded, st.replayed, st.refused, bad_norm, bad_skip, differ, r[0].np);
  free(pr), free(pp);
  for (int i = 0; i < 2; i++)
    se3_batch_buf_free(&bb[i]);
  for (int k = 0; k < 3; k++)
    run_close(&r[k]);
  check(nn_backend_open(d, NN_PREC_FP32, &err) == dev, "(h) %s: back to fp32: %s", mc->name, se3_error_str(&err).s);
}

int main(int argc, char **argv) {
  const char *dev_name = "cuda", *parts = "abcdefgh";
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--noise") && i + 1 < argc)
      noise = atof(argv[++i]);
    else if (!strcmp(argv[i], "--parts") && i + 1 < argc)
      parts = argv[++i];
    else if (argv[i][0] != '-')
      dev_name = argv[i];
    else {
      fprintf(stderr, "usage: test_gpu_train [cuda|cuda:N] [--parts abcdefgh]   or   test_gpu_train cpu [--noise X]\n");
      return 2;
    }
  }
  const struct nn_backend *cpu = nn_backend_cpu(), *dev = NULL;
  struct se3_error err;
  se3_error_clear(&err);
  struct nn_device d;
  if (nn_device_parse(dev_name, &d, &err) || d.any) {
    fprintf(stderr, "test_gpu_train: %s\n",
            err.kind != SE3_ERR_NONE ? se3_error_str(&err).s : "name cuda, cuda:N or cpu");
    return 2;
  }
  if (!d.cuda) {
    dev = cpu;
    printf("test_gpu_train: the CPU against itself%s: a check of this program, not of a GPU\n",
           noise > 0 ? " with gradient noise" : "");
  } else {
    dev = nn_backend_open(&d, NN_PREC_FP32, &err);
    if (!dev) {
      printf("test_gpu_train %s: %s\nSKIPPED: no CUDA backend or no GPU here\n", dev_name, se3_error_str(&err).s);
      return SKIP_CODE;
    }
    printf("test_gpu_train: %s (%s) against the CPU (%s)\n", dev->name, dev->device, cpu->device);
  }
  struct model_case small = {"small",
                             {.layers = 2,
                              .degrees = 3,
                              .channels = 8,
                              .heads = 2,
                              .channels_div = 2,
                              .node_in = 6,
                              .edge_in = 6,
                              .radial_hidden = 16,
                              .mlp_hidden = 32,
                              .pool_max = 0,
                              .outputs = 2,
                              .envelope = SE3_ENVELOPE_COSINE,
                              .bonds_kept = 1,
                              .cutoff = 3.0f},
                             {5, 9, 1, 12, 7, 3},
                             6,
                             3.0};
  struct model_case qm9 = {"se3_qm9 sizes",
                           {.layers = 7,
                            .degrees = 4,
                            .channels = 32,
                            .heads = 8,
                            .channels_div = 2,
                            .node_in = 6,
                            .edge_in = 6,
                            .radial_hidden = 32,
                            .mlp_hidden = 128,
                            .pool_max = 1,
                            .outputs = 1,
                            .envelope = SE3_ENVELOPE_POLY,
                            .cutoff = 3.0f},
                           {9, 12, 1, 6},
                           4,
                           3.0};
#define PART(c) (strchr(parts, c) != NULL)
  if (PART('a')) one_step(&small, cpu, dev);
  if (PART('a')) one_step(&qm9, cpu, dev);
  if (PART('b')) fifty_steps(&small, cpu, dev);
  if (PART('c')) determinism(&small, dev);
  if (PART('e')) queued_step(&small, dev);
  if (PART('f')) device_bases(&qm9, dev);
  if (PART('g')) recorded_steps(&small, cpu, dev, 12);
  if (PART('g')) recorded_steps(&qm9, cpu, dev, 8);
  if (PART('h')) scaled_steps(&small, d.cuda ? &d : NULL, dev);
  if (PART('d')) equivariance(&small, cpu, dev, d.cuda ? &d : NULL);
  if (PART('d')) equivariance(&qm9, cpu, dev, d.cuda ? &d : NULL);
#undef PART
  printf("%d passed, %d failed (%s)\n", n_pass, n_fail, dev->name);
  return n_fail ? 1 : 0;
}
