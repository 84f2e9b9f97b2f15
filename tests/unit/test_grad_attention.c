/* test_grad_attention.c — nn_attn_forward / nn_attn_backward (models/cpu/
 * attention.c) in double precision: every kv and q entry's derivative
 * against central differences; the forward against a naive per-head
 * implementation written here; the softmax weights (sums, empty nodes, large
 * logits); rotation invariance of the weights and equivariance of the output
 * and gradients; and the order of a node's incoming edges not mattering. */
#include <criterion/criterion.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/cpu/nn.h"
#include "models/so3.h"
#include "tests/gradcheck.h"

#define ND (NN_MAX_DEG + 1)
#define NMAX 16
#define EMAX 64

/* ---- a random attention problem ------------------------------------------ */

struct prob {
  struct nn_attn_shape s;
  int32_t in_start[NMAX + 1], dst[EMAX];
  double w[EMAX]; /* edge weights, used when s.w points here */
  double *kv[ND], *q[ND], *z[ND], *G[ND], *alpha;
  double *dkv[ND], *dq[ND];
  size_t nkv[ND], nq[ND], nz[ND];
};

static double *alloc_or_null(size_t n) {
  if (n == 0) return NULL;
  double *p = calloc(n, sizeof *p);
  cr_assert_not_null(p);
  return p;
}

/* N nodes with indeg[n] incoming edges; kv and q uniform in [-scale, scale),
 * G in [-1, 1). */
static void prob_init(struct prob *p, int N, const int *indeg, const int fk[ND], const int fv[ND], int heads,
                      uint64_t seed, double scale) {
  memset(p, 0, sizeof *p);
  cr_assert(N <= NMAX);
  p->in_start[0] = 0;
  for (int n = 0; n < N; n++) {
    p->in_start[n + 1] = p->in_start[n] + indeg[n];
    for (int e = p->in_start[n]; e < p->in_start[n + 1]; e++)
      p->dst[e] = n;
  }
  int E = p->in_start[N];
  cr_assert(E <= EMAX);
  for (int d = 0; d < ND; d++) {
    p->s.fk.ch[d] = fk[d];
    p->s.fv.ch[d] = fv[d];
    cr_assert(fk[d] % heads == 0 && fv[d] % heads == 0);
  }
  p->s.heads = heads;
  p->s.N = N;
  p->s.E = E;
  p->s.in_start = p->in_start;
  uint64_t st = seed;
  for (int d = 0; d < ND; d++) {
    p->nkv[d] = (size_t)E * NN_DIM(d) * (fv[d] + fk[d]);
    p->nq[d] = (size_t)N * NN_DIM(d) * fk[d];
    p->nz[d] = (size_t)N * NN_DIM(d) * fv[d];
    p->kv[d] = alloc_or_null(p->nkv[d]);
    p->dkv[d] = alloc_or_null(p->nkv[d]);
    p->q[d] = alloc_or_null(p->nq[d]);
    p->dq[d] = alloc_or_null(p->nq[d]);
    p->z[d] = alloc_or_null(p->nz[d]);
    p->G[d] = alloc_or_null(p->nz[d]);
    if (p->kv[d]) gc_fill(p->kv[d], p->nkv[d], &st, scale);
    if (p->q[d]) gc_fill(p->q[d], p->nq[d], &st, scale);
    if (p->G[d]) gc_fill(p->G[d], p->nz[d], &st, 1.0);
  }
  p->alpha = alloc_or_null((size_t)E * heads);
}

static void prob_free(struct prob *p) {
  for (int d = 0; d < ND; d++) {
    free(p->kv[d]);
    free(p->dkv[d]);
    free(p->q[d]);
    free(p->dq[d]);
    free(p->z[d]);
    free(p->G[d]);
  }
  free(p->alpha);
}

static void prob_forward(struct prob *p) {
  nn_attn_forward(p->z, p->alpha, &p->s, (const double *const *)p->kv, (const double *const *)p->q);
}

static void prob_backward(struct prob *p) {
  nn_attn_backward(p->dkv, p->dq, &p->s, (const double *const *)p->G, p->alpha, (const double *const *)p->kv,
                   (const double *const *)p->q);
}

static double max_diff(const double *a, const double *b, size_t n) {
  double w = 0;
  for (size_t i = 0; i < n; i++)
    w = fmax(w, fabs(a[i] - b[i]));
  return w;
}

/* In-degrees of the standard graph: node 1 has no incoming edge. E = 11. */
static const int INDEG6[6] = {2, 0, 4, 1, 3, 1};

/* ---- (a) finite differences ------------------------------------------------ */

/* L = sum_d <G[d], z[d]> */
static double loss_attn(void *ctx) {
  struct prob *p = ctx;
  prob_forward(p);
  double L = 0;
  for (int d = 0; d < ND; d++)
    for (size_t i = 0; i < p->nz[d]; i++)
      L += p->G[d][i] * p->z[d][i];
  return L;
}

/* Worst finite-difference error over every kv and q entry. */
static double grad_worst(const int fk[ND], const int fv[ND], int heads, uint64_t seed) {
  struct prob p;
  prob_init(&p, 6, INDEG6, fk, fv, heads, seed, 1.5);
  prob_forward(&p);
  prob_backward(&p);
  double worst = 0;
  for (int d = 0; d < ND; d++) {
    if (p.kv[d]) {
      double w = gc_worst(loss_attn, &p, p.kv[d], p.dkv[d], p.nkv[d], p.nkv[d]);
      printf("  kv[%d] (%zu entries): %.3g\n", d, p.nkv[d], w);
      worst = fmax(worst, w);
    }
    if (p.q[d]) {
      double w = gc_worst(loss_attn, &p, p.q[d], p.dq[d], p.nq[d], p.nq[d]);
      printf("  q[%d]  (%zu entries): %.3g\n", d, p.nq[d], w);
      worst = fmax(worst, w);
    }
  }
  prob_free(&p);
  return worst;
}

Test(attention, gradcheck) {
  const int fk[ND] = {4, 4, 4, 0}, fv[ND] = {4, 4, 4, 4};
  double w = grad_worst(fk, fv, 2, 11);
  printf("attention gradcheck fk {4,4,4,0} fv {4,4,4,4} H 2: worst %.3g\n", w);
  cr_assert_lt(w, 1e-6, "worst finite-difference error %g", w);
}

/* Absent key and value degrees (fk[1] = 0, fv[2] = 0, so z[2] is NULL) and
 * four heads. */
Test(attention, gradcheck_absent_degrees) {
  const int fk[ND] = {4, 0, 8, 4}, fv[ND] = {8, 4, 0, 4};
  double w = grad_worst(fk, fv, 4, 12);
  printf("attention gradcheck fk {4,0,8,4} fv {8,4,0,4} H 4: worst %.3g\n", w);
  cr_assert_lt(w, 1e-6, "worst finite-difference error %g", w);
}

/* ---- (b) against a naive implementation ------------------------------------ */

/* Per node and head: the logits over every edge whose dst is the node (found
 * by scanning dst, not in_start), exp without the max shift, normalised,
 * then the weighted values. */
static void naive_attn(double *const z[], double *alpha, const struct prob *p) {
  const struct nn_attn_shape *s = &p->s;
  const int H = s->heads;
  double W = 0;
  for (int d = 0; d < ND; d++)
    W += s->fk.ch[d] * (2 * d + 1);
  for (int n = 0; n < s->N; n++)
    for (int h = 0; h < H; h++) {
      double sum = 0;
      for (int e = 0; e < s->E; e++) {
        if (p->dst[e] != n) continue;
        double logit = 0;
        for (int d = 0; d < ND; d++) {
          int ck = s->fk.ch[d], cv = s->fv.ch[d], per = ck / H;
          for (int m = 0; m < 2 * d + 1; m++)
            for (int j = 0; j < per; j++) {
              int c = h * per + j;
              double key = p->kv[d][(e * (2 * d + 1) + m) * (cv + ck) + cv + c];
              double qq = p->q[d][(n * (2 * d + 1) + m) * ck + c];
              logit += key * qq;
            }
        }
        alpha[e * H + h] = (s->w ? s->w[e] : 1.0) * exp(logit / sqrt(W));
        sum += alpha[e * H + h];
      }
      for (int e = 0; e < s->E; e++)
        if (p->dst[e] == n) alpha[e * H + h] = sum > 0 ? alpha[e * H + h] / sum : 0;
      for (int d = 0; d < ND; d++) {
        int ck = s->fk.ch[d], cv = s->fv.ch[d], per = cv / H;
        for (int m = 0; m < 2 * d + 1; m++)
          for (int j = 0; j < per; j++) {
            int c = h * per + j;
            double acc = 0;
            for (int e = 0; e < s->E; e++)
              if (p->dst[e] == n) acc += alpha[e * H + h] * p->kv[d][(e * (2 * d + 1) + m) * (cv + ck) + c];
            z[d][(n * (2 * d + 1) + m) * cv + c] = acc;
          }
      }
    }
}

Test(attention, forward_matches_naive) {
  const int fk[ND] = {4, 0, 8, 4}, fv[ND] = {8, 4, 4, 4};
  struct prob p;
  prob_init(&p, 6, INDEG6, fk, fv, 4, 21, 1.0);
  prob_forward(&p);
  double *zn[ND], *an = calloc((size_t)p.s.E * p.s.heads, sizeof *an);
  for (int d = 0; d < ND; d++)
    zn[d] = alloc_or_null(p.nz[d]);
  naive_attn(zn, an, &p);
  double wa = max_diff(p.alpha, an, (size_t)p.s.E * p.s.heads), wz = 0;
  for (int d = 0; d < ND; d++)
    wz = fmax(wz, max_diff(p.z[d], zn[d], p.nz[d]));
  printf("attention vs naive: alpha %.3g, z %.3g\n", wa, wz);
  cr_assert_lt(wa, 1e-13, "alpha differs from the naive one by %g", wa);
  cr_assert_lt(wz, 1e-13, "z differs from the naive one by %g", wz);
  for (int d = 0; d < ND; d++)
    free(zn[d]);
  free(an);
  prob_free(&p);
}

/* ---- (c) the softmax weights ----------------------------------------------- */

static void check_weights(double scale, uint64_t seed) {
  const int fk[ND] = {4, 4, 4, 0}, fv[ND] = {4, 4, 4, 4};
  struct prob p;
  prob_init(&p, 6, INDEG6, fk, fv, 2, seed, scale);
  for (int d = 0; d < ND; d++)
    for (size_t i = 0; i < p.nz[d]; i++)
      p.z[d][i] = NAN; /* z must be overwritten */
  prob_forward(&p);
  const int H = p.s.heads;
  double worst = 0, amin = 1;
  for (int n = 0; n < p.s.N; n++)
    for (int h = 0; h < H; h++) {
      if (p.in_start[n] == p.in_start[n + 1]) continue;
      double sum = 0;
      for (int e = p.in_start[n]; e < p.in_start[n + 1]; e++) {
        double a = p.alpha[e * H + h];
        cr_assert(isfinite(a) && a >= 0 && a <= 1, "alpha[%d,%d] = %g", e, h, a);
        amin = fmin(amin, a);
        sum += a;
      }
      worst = fmax(worst, fabs(sum - 1));
    }
  printf("attention weights (inputs x %g): worst |sum - 1| %.3g, smallest weight %.3g\n", scale, worst, amin);
  cr_assert_lt(worst, 1e-14, "softmax weights sum to 1 +- %g", worst);
  for (int d = 0; d < ND; d++)
    for (int n = 0; n < p.s.N; n++)
      for (int i = 0; i < NN_DIM(d) * p.s.fv.ch[d]; i++) {
        double v = p.z[d][(size_t)n * NN_DIM(d) * p.s.fv.ch[d] + i];
        cr_assert(isfinite(v), "z[%d] node %d entry %d = %g", d, n, i, v);
        if (n == 1) cr_assert_eq(v, 0.0, "node without incoming edges: z[%d] entry %d = %g", d, i, v);
      }
  prob_free(&p);
}

Test(attention, weights_sum_to_one) { check_weights(1.0, 31); }

/* Logits of order 1e4: exp would overflow without the max shift. */
Test(attention, weights_large_logits) { check_weights(300.0, 32); }

/* ---- (d) rotations ----------------------------------------------------------- */

/* x (rows x (2d+1) x C, channels innermost), components rotated by D (row-major
 * (2d+1)^2) in channels [c0, c0 + nc) of every row; C is the row width. */
static void rotate(double *x, size_t rows, int d, int C, int c0, int nc, const double *D) {
  const int dim = NN_DIM(d);
  double v[NN_DIM(NN_MAX_DEG)];
  for (size_t r = 0; r < rows; r++)
    for (int c = c0; c < c0 + nc; c++) {
      double *base = x + r * dim * C + c;
      for (int i = 0; i < dim; i++) {
        v[i] = 0;
        for (int j = 0; j < dim; j++)
          v[i] += D[i * dim + j] * base[(size_t)j * C];
      }
      for (int i = 0; i < dim; i++)
        base[(size_t)i * C] = v[i];
    }
}

/* Rotates every array of p (kv, q, the output gradient G, and optionally the
 * results z, dkv, dq) for the degrees with Dm[d] != NULL. */
static void rotate_prob(struct prob *p, double *const Dm[ND], int results) {
  for (int d = 0; d < ND; d++) {
    if (!Dm[d]) continue;
    int ck = p->s.fk.ch[d], cv = p->s.fv.ch[d];
    rotate(p->kv[d], p->s.E, d, cv + ck, 0, cv + ck, Dm[d]);
    rotate(p->q[d], p->s.N, d, ck, 0, ck, Dm[d]);
    rotate(p->G[d], p->s.N, d, cv, 0, cv, Dm[d]);
    if (results) {
      rotate(p->z[d], p->s.N, d, cv, 0, cv, Dm[d]);
      rotate(p->dkv[d], p->s.E, d, cv + ck, 0, cv + ck, Dm[d]);
      rotate(p->dq[d], p->s.N, d, ck, 0, ck, Dm[d]);
    }
  }
}

/* Runs forward and backward on p and on a copy with the degrees of Dm rotated;
 * the weights must agree and the rotated results must match. */
static void check_rotation(double *const Dm[ND], const char *what) {
  const int fk[ND] = {4, 4, 4, 2}, fv[ND] = {4, 4, 4, 4};
  struct prob a, b;
  prob_init(&a, 6, INDEG6, fk, fv, 2, 41, 1.5);
  prob_init(&b, 6, INDEG6, fk, fv, 2, 41, 1.5);
  rotate_prob(&b, Dm, 0);
  prob_forward(&a);
  prob_backward(&a);
  prob_forward(&b);
  prob_backward(&b);
  rotate_prob(&a, Dm, 1); /* the expected results of b */
  double wa = max_diff(a.alpha, b.alpha, (size_t)a.s.E * a.s.heads), wz = 0, wg = 0;
  for (int d = 0; d < ND; d++) {
    wz = fmax(wz, max_diff(a.z[d], b.z[d], a.nz[d]));
    wg = fmax(wg, max_diff(a.dkv[d], b.dkv[d], a.nkv[d]));
    wg = fmax(wg, max_diff(a.dq[d], b.dq[d], a.nq[d]));
  }
  printf("attention rotation (%s): alpha %.3g, z %.3g, gradients %.3g\n", what, wa, wz, wg);
  cr_assert_lt(wa, 1e-12, "%s: alpha changed by %g", what, wa);
  cr_assert_lt(wz, 1e-12, "%s: z not equivariant, %g", what, wz);
  cr_assert_lt(wg, 1e-12, "%s: gradients not equivariant, %g", what, wg);
  prob_free(&a);
  prob_free(&b);
}

/* Degree 1 alone, its matrix built here: component (0, 1, 2) = (y, z, x), so
 * D1[i][j] = R[p(i)][p(j)] with p = (1, 2, 0) the xyz index of component i. */
Test(attention, rotation_degree1) {
  uint64_t st = 51;
  double R[9], D1[9];
  so3_random_rotation(&st, R);
  const int pi[3] = {1, 2, 0};
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++)
      D1[i * 3 + j] = R[pi[i] * 3 + pi[j]];
  double *Dm[ND] = {NULL, D1, NULL, NULL};
  check_rotation(Dm, "degree 1");
}

/* Every degree at once, with the Wigner-D matrices of models/so3.h. */
Test(attention, rotation_all_degrees) {
  uint64_t st = 52;
  double R[9], D[ND][NN_DIM(NN_MAX_DEG) * NN_DIM(NN_MAX_DEG)];
  so3_random_rotation(&st, R);
  double *Dm[ND];
  for (int d = 0; d < ND; d++) {
    so3_wigner_d(d, R, D[d]);
    Dm[d] = D[d];
  }
  check_rotation(Dm, "degrees 0..3");
}

/* ---- (e) the order of incoming edges --------------------------------------- */

Test(attention, edge_order) {
  const int fk[ND] = {4, 4, 4, 0}, fv[ND] = {4, 4, 4, 4};
  struct prob a, b;
  prob_init(&a, 6, INDEG6, fk, fv, 2, 61, 1.5);
  prob_init(&b, 6, INDEG6, fk, fv, 2, 61, 1.5);
  const int E = a.s.E, H = a.s.heads;
  /* perm[e]: the edge of a at position e of b, shuffled within each node's
   * segment (Fisher–Yates, deterministic). */
  int perm[EMAX];
  uint64_t st = 62;
  for (int e = 0; e < E; e++)
    perm[e] = e;
  for (int n = 0; n < a.s.N; n++)
    for (int i = a.in_start[n + 1] - 1; i > a.in_start[n]; i--) {
      int j = a.in_start[n] + (int)((gc_rand(&st) + 1) / 2 * (i - a.in_start[n] + 1));
      if (j > i) j = i;
      int t = perm[i];
      perm[i] = perm[j];
      perm[j] = t;
    }
  int moved = 0;
  for (int e = 0; e < E; e++)
    moved += perm[e] != e;
  cr_assert_gt(moved, 2, "the shuffle must move some edges");
  for (int d = 0; d < ND; d++) {
    size_t w = a.nkv[d] / E;
    for (int e = 0; e < E; e++)
      memcpy(b.kv[d] + e * w, a.kv[d] + perm[e] * w, w * sizeof(double));
  }
  prob_forward(&a);
  prob_backward(&a);
  prob_forward(&b);
  prob_backward(&b);
  double wa = 0, wz = 0, wk = 0, wq = 0;
  for (int e = 0; e < E; e++)
    for (int h = 0; h < H; h++)
      wa = fmax(wa, fabs(b.alpha[e * H + h] - a.alpha[perm[e] * H + h]));
  for (int d = 0; d < ND; d++) {
    size_t w = a.nkv[d] / E;
    wz = fmax(wz, max_diff(a.z[d], b.z[d], a.nz[d]));
    wq = fmax(wq, max_diff(a.dq[d], b.dq[d], a.nq[d]));
    for (int e = 0; e < E; e++)
      wk = fmax(wk, max_diff(b.dkv[d] + e * w, a.dkv[d] + perm[e] * w, w));
  }
  printf("attention edge order: alpha %.3g, z %.3g, dkv %.3g, dq %.3g\n", wa, wz, wk, wq);
  cr_assert_lt(wa, 1e-14, "alpha not permuted with the edges: %g", wa);
  cr_assert_lt(wz, 1e-13, "z depends on the edge order: %g", wz);
  cr_assert_lt(wk, 1e-13, "dkv not permuted with the edges: %g", wk);
  cr_assert_lt(wq, 1e-13, "dq depends on the edge order: %g", wq);
  prob_free(&a);
  prob_free(&b);
}

/* ---- (f) edge weights (the smooth cutoff envelope) --------------------------- */

/* Weights in (0, 1], one edge of node 2 at 0, and node 5's only edge at 0 (a
 * node whose every edge weighs 0). */
static void prob_weights(struct prob *p, uint64_t seed) {
  uint64_t st = seed;
  for (int e = 0; e < p->s.E; e++)
    p->w[e] = 0.5 * (gc_rand(&st) + 1) + 1e-3;
  p->w[p->in_start[2] + 1] = 0;
  p->w[p->in_start[5]] = 0;
  p->s.w = p->w;
}

Test(attention, weighted_gradcheck) {
  const int fk[ND] = {4, 4, 4, 0}, fv[ND] = {4, 4, 4, 4};
  struct prob p;
  prob_init(&p, 6, INDEG6, fk, fv, 2, 71, 1.5);
  prob_weights(&p, 72);
  prob_forward(&p);
  prob_backward(&p);
  double worst = 0;
  for (int d = 0; d < ND; d++) {
    if (p.kv[d]) worst = fmax(worst, gc_worst(loss_attn, &p, p.kv[d], p.dkv[d], p.nkv[d], p.nkv[d]));
    if (p.q[d]) worst = fmax(worst, gc_worst(loss_attn, &p, p.q[d], p.dq[d], p.nq[d], p.nq[d]));
  }
  printf("weighted attention gradcheck: worst %.3g\n", worst);
  cr_assert_lt(worst, 1e-6, "worst finite-difference error %g", worst);
  prob_free(&p);
}

Test(attention, weighted_forward_matches_naive) {
  const int fk[ND] = {4, 0, 8, 4}, fv[ND] = {8, 4, 4, 4};
  struct prob p;
  prob_init(&p, 6, INDEG6, fk, fv, 4, 73, 1.0);
  prob_weights(&p, 74);
  prob_forward(&p);
  double *zn[ND], *an = calloc((size_t)p.s.E * p.s.heads, sizeof *an);
  for (int d = 0; d < ND; d++)
    zn[d] = alloc_or_null(p.nz[d]);
  naive_attn(zn, an, &p);
  double wa = max_diff(p.alpha, an, (size_t)p.s.E * p.s.heads), wz = 0;
  for (int d = 0; d < ND; d++)
    wz = fmax(wz, max_diff(p.z[d], zn[d], p.nz[d]));
  printf("weighted attention vs naive: alpha %.3g, z %.3g\n", wa, wz);
  cr_assert_lt(wa, 1e-13, "alpha differs from the naive one by %g", wa);
  cr_assert_lt(wz, 1e-13, "z differs from the naive one by %g", wz);
  for (int e = p.in_start[5]; e < p.in_start[6]; e++)
    for (int h = 0; h < p.s.heads; h++)
      cr_assert_eq(p.alpha[e * p.s.heads + h], 0.0, "a node whose edges all weigh 0 attends to nothing");
  for (int d = 0; d < ND; d++)
    free(zn[d]);
  free(an);
  prob_free(&p);
}

/* An edge of weight 0 is an absent edge, and an edge of weight eps differs
 * from an absent one by O(eps): the attention is continuous as an edge
 * fades out (the softmax of an edge at full weight would jump). The edge
 * taken out is node 2's second; without weights it holds a share of O(1). */
Test(attention, weight_zero_is_an_absent_edge) {
  const int fk[ND] = {4, 4, 4, 0}, fv[ND] = {4, 4, 4, 4};
  const int indeg_less[6] = {2, 0, 3, 1, 3, 1};
  struct prob a, b;
  prob_init(&a, 6, INDEG6, fk, fv, 2, 75, 1.5);
  prob_init(&b, 6, indeg_less, fk, fv, 2, 75, 1.5);
  const int gone = a.in_start[2] + 1;
  for (int d = 0; d < ND; d++) { /* b: a's kv without edge `gone`; the same q and G */
    size_t w = a.nkv[d] / a.s.E;
    for (int e = 0, k = 0; e < a.s.E; e++)
      if (e != gone) memcpy(b.kv[d] + (size_t)k++ * w, a.kv[d] + (size_t)e * w, w * sizeof(double));
    if (a.q[d]) memcpy(b.q[d], a.q[d], a.nq[d] * sizeof(double));
  }
  for (int e = 0; e < a.s.E; e++)
    a.w[e] = 1;
  a.s.w = a.w;
  prob_forward(&a);
  prob_forward(&b);
  double full = 0;
  for (int d = 0; d < ND; d++)
    full = fmax(full, max_diff(a.z[d], b.z[d], a.nz[d]));
  double diff[3];
  const double wt[3] = {0, 1e-9, 1e-6};
  for (int k = 0; k < 3; k++) {
    a.w[gone] = wt[k];
    prob_forward(&a);
    diff[k] = 0;
    for (int d = 0; d < ND; d++)
      diff[k] = fmax(diff[k], max_diff(a.z[d], b.z[d], a.nz[d]));
  }
  printf("edge of weight 1: z differs from the absent edge's by %.3g; weight 0: %.3g, 1e-9: %.3g, 1e-6: %.3g\n", full,
         diff[0], diff[1], diff[2]);
  cr_assert_gt(full, 1e-2, "the edge must matter at full weight (%g)", full);
  cr_assert_lt(diff[0], 1e-15, "weight 0: z differs from the graph without the edge by %g", diff[0]);
  cr_assert_lt(diff[1], 1e-8, "weight 1e-9: %g", diff[1]);
  cr_assert_lt(diff[2], 1e-5, "weight 1e-6: %g", diff[2]);
  prob_free(&a);
  prob_free(&b);
}
