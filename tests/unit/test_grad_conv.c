/* The TFN convolution (fused with the radial network's last layer) in
 * double precision: its backward against finite differences (inputs, radial
 * features s2 and weights W3, pooled and per edge), for the generic tiles
 * and the fast ones (32 channels, 32 radial features), the two against each
 * other, its degree-0 value against the formula, and equivariance: rotating
 * the edge vectors and the input features rotates the output with D_l. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/basis.h"
#include "models/cpu/isa.h"
#include "models/cpu/nn.h"
#include "models/so3.h"
#include "tests/gradcheck.h"

/* A small random graph: every node gets 0..3 incoming edges from other nodes. */
struct tgraph {
  int N, E;
  int32_t src[64], in_start[17];
  float rel[64 * 3];
};

static void make_graph(struct tgraph *g, int N, uint64_t *rng) {
  g->N = N;
  g->E = 0;
  g->in_start[0] = 0;
  for (int n = 0; n < N; n++) {
    int deg = n == 1 ? 0 : 1 + (int)((gc_rand(rng) + 1) * 1.5); /* node 1 has none */
    for (int j = 0; j < deg && g->E < 64; j++) {
      int s = (n + 1 + j) % N;
      g->src[g->E] = s;
      for (int a = 0; a < 3; a++)
        g->rel[3 * g->E + a] = (float)(2 * gc_rand(rng));
      g->E++;
    }
    g->in_start[n + 1] = g->E;
  }
}

struct conv_case {
  struct nn_conv_shape s;
  struct basis_plan plan;
  struct tgraph g;
  double *x[NN_MAX_DEG + 1], *y[NN_MAX_DEG + 1], *G[NN_MAX_DEG + 1], *dx[NN_MAX_DEG + 1];
  double *basis, *s2, *W3, *ds2, *dW3;
  int pool, H;
};

static int rows_out(const struct conv_case *c) { return c->pool ? c->s.N : c->s.E; }

static void case_init(struct conv_case *c, struct nn_fiber fin, struct nn_fiber fout, int pool, uint64_t seed, int H) {
  memset(c, 0, sizeof *c);
  c->H = H;
  uint64_t rng = seed;
  make_graph(&c->g, 6, &rng);
  cr_assert_eq(basis_plan_init(&c->plan, NN_MAX_DEG), 0);
  c->pool = pool;
  c->s.fin = fin;
  c->s.fout = fout;
  c->s.plan = &c->plan;
  c->s.N = c->g.N;
  c->s.E = c->g.E;
  c->s.src = c->g.src;
  c->s.in_start = c->g.in_start;
  size_t pe = c->plan.per_edge, rs = nn_conv_radial_size(&fin, &fout);
  float *b = malloc(pe * sizeof *b);
  c->basis = malloc((size_t)c->g.E * pe * sizeof *c->basis);
  for (int e = 0; e < c->g.E; e++) {
    basis_edge(&c->plan, c->g.rel + 3 * e, b);
    for (size_t i = 0; i < pe; i++)
      c->basis[(size_t)e * pe + i] = b[i];
  }
  free(b);
  size_t eh = (size_t)c->g.E * (size_t)H;
  c->s2 = malloc(eh * sizeof *c->s2);
  c->ds2 = malloc(eh * sizeof *c->ds2);
  c->W3 = malloc(rs * (size_t)H * sizeof *c->W3);
  c->dW3 = calloc(rs * (size_t)H, sizeof *c->dW3);
  gc_fill(c->s2, eh, &rng, 1.0);
  gc_fill(c->W3, rs * (size_t)H, &rng, 1.0 / sqrt(H));
  for (int d = 0; d <= NN_MAX_DEG; d++) {
    if (fin.ch[d]) {
      size_t n = (size_t)c->g.N * (size_t)(NN_DIM(d) * fin.ch[d]);
      c->x[d] = malloc(n * sizeof(double));
      c->dx[d] = malloc(n * sizeof(double));
      gc_fill(c->x[d], n, &rng, 1.0);
    }
    if (fout.ch[d]) {
      size_t n = (size_t)rows_out(c) * (size_t)(NN_DIM(d) * fout.ch[d]);
      c->y[d] = malloc(n * sizeof(double));
      c->G[d] = malloc(n * sizeof(double));
      gc_fill(c->G[d], n, &rng, 1.0);
    }
  }
}

static void case_free(struct conv_case *c) {
  for (int d = 0; d <= NN_MAX_DEG; d++) {
    free(c->x[d]);
    free(c->dx[d]);
    free(c->y[d]);
    free(c->G[d]);
  }
  free(c->basis);
  free(c->s2);
  free(c->ds2);
  free(c->W3);
  free(c->dW3);
  basis_plan_free(&c->plan);
}

static double loss(void *ctx) {
  struct conv_case *c = ctx;
  cr_assert_eq(nn_conv_forward(c->y, &c->s, (const double *const *)c->x, c->basis, c->s2, c->W3, c->H, c->pool), 0);
  double L = 0;
  for (int d = 0; d <= NN_MAX_DEG; d++) {
    size_t n = c->s.fout.ch[d] ? (size_t)rows_out(c) * (size_t)(NN_DIM(d) * c->s.fout.ch[d]) : 0;
    for (size_t i = 0; i < n; i++)
      L += c->G[d][i] * c->y[d][i];
  }
  return L;
}

static void backward(struct conv_case *c) {
  memset(c->dW3, 0, nn_conv_radial_size(&c->s.fin, &c->s.fout) * (size_t)c->H * sizeof *c->dW3);
  cr_assert_eq(nn_conv_backward(c->dx, c->ds2, c->dW3, &c->s, (const double *const *)c->G, (const double *const *)c->x,
                                c->basis, c->s2, c->W3, c->H, c->pool),
               0);
}

static void check_grads(struct nn_fiber fin, struct nn_fiber fout, int pool, int H, size_t checks) {
  struct conv_case c;
  case_init(&c, fin, fout, pool, 17 + (uint64_t)pool, H);
  backward(&c);
  double worst = 0;
  for (int d = 0; d <= NN_MAX_DEG; d++) {
    if (!fin.ch[d]) continue;
    double w = gc_worst(loss, &c, c.x[d], c.dx[d], (size_t)c.g.N * (size_t)(NN_DIM(d) * fin.ch[d]), checks);
    cr_assert_lt(w, 1e-6, "pool %d: d loss / d x[%d]: worst %.2e", pool, d, w);
    worst = fmax(worst, w);
  }
  size_t rs = nn_conv_radial_size(&fin, &fout);
  double ws = gc_worst(loss, &c, c.s2, c.ds2, (size_t)c.g.E * (size_t)H, checks);
  double ww = gc_worst(loss, &c, c.W3, c.dW3, rs * (size_t)H, 4 * checks);
  cr_assert_lt(ws, 1e-6, "pool %d: d loss / d s2: worst %.2e", pool, ws);
  cr_assert_lt(ww, 1e-6, "pool %d: d loss / d W3: worst %.2e", pool, ww);
  cr_log_info("conv pool=%d H=%d: worst gradient error %.2e (x), %.2e (s2), %.2e (W3); %d edges", pool, H, worst, ws,
              ww, c.g.E);
  case_free(&c);
}

Test(grad_conv, pooled_gradients_match_finite_differences) {
  check_grads((struct nn_fiber){{2, 2, 1, 2}}, (struct nn_fiber){{3, 1, 2, 1}}, 1, 3, 400);
}

Test(grad_conv, per_edge_gradients_match_finite_differences) {
  check_grads((struct nn_fiber){{1, 2, 0, 1}}, (struct nn_fiber){{2, 0, 1, 2}}, 0, 3, 400);
}

/* The fast tiles (output channels in 32s, 32 radial features), checked by
 * finite differences on a sample of entries. */
Test(grad_conv, fast_tile_gradients_match_finite_differences, .timeout = 600) {
  check_grads((struct nn_fiber){{32, 32, 0, 32}}, (struct nn_fiber){{32, 0, 32, 32}}, 0, 32, 60);
  check_grads((struct nn_fiber){{32, 32, 32, 32}}, (struct nn_fiber){{64, 0, 0, 0}}, 1, 32, 60);
}

/* The largest relative difference between two runs of the same case:
 * values and every gradient. *moved says whether a's weight gradient is
 * non-zero. */
static double case_diff(const struct conv_case *a, const struct conv_case *b, struct nn_fiber fin,
                        struct nn_fiber fout, int *moved) {
  double worst = 0;
  for (int d = 0; d <= NN_MAX_DEG; d++) {
    size_t ny = fout.ch[d] ? (size_t)rows_out(a) * (size_t)(NN_DIM(d) * fout.ch[d]) : 0;
    size_t nx = fin.ch[d] ? (size_t)a->g.N * (size_t)(NN_DIM(d) * fin.ch[d]) : 0;
    for (size_t i = 0; i < ny; i++)
      worst = fmax(worst, fabs(a->y[d][i] - b->y[d][i]) / (1 + fabs(b->y[d][i])));
    for (size_t i = 0; i < nx; i++)
      worst = fmax(worst, fabs(a->dx[d][i] - b->dx[d][i]) / (1 + fabs(b->dx[d][i])));
  }
  for (size_t i = 0; i < (size_t)a->g.E * (size_t)a->H; i++)
    worst = fmax(worst, fabs(a->ds2[i] - b->ds2[i]) / (1 + fabs(b->ds2[i])));
  size_t nw = nn_conv_radial_size(&fin, &fout) * (size_t)a->H;
  *moved = 0;
  for (size_t i = 0; i < nw; i++) {
    worst = fmax(worst, fabs(a->dW3[i] - b->dW3[i]) / (1 + fabs(b->dW3[i])));
    *moved |= a->dW3[i] != 0;
  }
  return worst;
}

/* The fast and generic tiles compute the same sums (to round-off): values
 * and every gradient. */
static void fast_vs_generic(struct nn_fiber fin, struct nn_fiber fout, int pool) {
  struct conv_case a, b;
  case_init(&a, fin, fout, pool, 31, 32);
  case_init(&b, fin, fout, pool, 31, 32);
  loss(&a);
  backward(&a);
  nn_conv_generic_only = 1;
  loss(&b);
  backward(&b);
  nn_conv_generic_only = 0;
  int moved;
  double worst = case_diff(&a, &b, fin, fout, &moved);
  cr_assert(moved, "the weight gradient is all zero");
  cr_assert_lt(worst, 1e-12, "fast and generic tiles differ by %.2e (pool %d)", worst, pool);
  case_free(&a);
  case_free(&b);
}

/* The convolution compiled for another instruction set (isa.h) computes the
 * same values and gradients as the baseline build, fast and generic tiles,
 * pooled and per edge. */
static void isa_vs_base(enum nn_isa isa) {
  if (!nn_isa_supported(isa)) cr_skip_test("this processor has no %s", nn_isa_name(isa));
  static const struct {
    struct nn_fiber fin, fout;
    int pool, H;
  } cases[] = {{{{32, 32, 32, 32}}, {{32, 32, 32, 32}}, 0, 32},
               {{{32, 32, 32, 32}}, {{128, 0, 0, 0}}, 1, 32},
               {{{2, 2, 1, 2}}, {{3, 1, 2, 1}}, 1, 3}};
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    struct conv_case a, b;
    case_init(&a, cases[k].fin, cases[k].fout, cases[k].pool, 41, cases[k].H);
    case_init(&b, cases[k].fin, cases[k].fout, cases[k].pool, 41, cases[k].H);
    cr_assert_eq(nn_isa_set(isa), 0);
    loss(&a);
    backward(&a);
    cr_assert_eq(nn_isa_set(NN_ISA_BASE), 0);
    loss(&b);
    backward(&b);
    int moved;
    double worst = case_diff(&a, &b, cases[k].fin, cases[k].fout, &moved);
    cr_assert(moved, "the weight gradient is all zero");
    cr_assert_lt(worst, 1e-12, "%s and base differ by %.2e (case %zu)", nn_isa_name(isa), worst, k);
    case_free(&a);
    case_free(&b);
  }
}

Test(grad_conv, avx2_build_equals_base) { isa_vs_base(NN_ISA_AVX2); }
Test(grad_conv, avx512_build_equals_base) { isa_vs_base(NN_ISA_AVX512); }

Test(grad_conv, fast_tiles_equal_generic_tiles) {
  fast_vs_generic((struct nn_fiber){{32, 32, 32, 32}}, (struct nn_fiber){{32, 32, 32, 32}}, 0);
  fast_vs_generic((struct nn_fiber){{32, 32, 32, 32}}, (struct nn_fiber){{128, 0, 0, 0}}, 1);
  fast_vs_generic((struct nn_fiber){{5, 0, 32, 0}}, (struct nn_fiber){{64, 32, 0, 0}}, 0);
}

/* Degree 0 to degree 0 is a scalar filter: y = sum_e R_e B00 x_src with
 * B00 = Y_00 = 1/sqrt(4 pi). */
Test(grad_conv, degree_zero_is_a_scalar_filter) {
  struct conv_case c;
  case_init(&c, (struct nn_fiber){{2, 0, 0, 0}}, (struct nn_fiber){{3, 0, 0, 0}}, 1, 5, 4);
  loss(&c);
  for (int n = 0; n < c.g.N; n++)
    for (int o = 0; o < 3; o++) {
      double want = 0;
      for (int e = c.g.in_start[n]; e < c.g.in_start[n + 1]; e++)
        for (int i = 0; i < 2; i++) {
          double R = 0; /* R_e = W3 s2_e, row (o, i) */
          for (int h = 0; h < 4; h++)
            R += c.W3[(o * 2 + i) * 4 + h] * c.s2[e * 4 + h];
          want += R / sqrt(4 * M_PI) * c.x[0][c.g.src[e] * 2 + i];
        }
      cr_assert_float_eq(c.y[0][n * 3 + o], want, 1e-6, "node %d out %d", n, o);
    }
  cr_assert_eq(c.y[0][1 * 3], 0.0, "a node without incoming edges gets nothing");
  case_free(&c);
}

/* Rotate every edge vector by Q and every input feature of degree k by
 * D_k(Q): the output of degree l is D_l(Q) times the original output. */
Test(grad_conv, output_rotates_with_the_input) {
  struct nn_fiber fin = {{2, 2, 2, 2}}, fout = {{2, 2, 2, 2}};
  struct conv_case a, b;
  case_init(&a, fin, fout, 1, 23, 3);
  case_init(&b, fin, fout, 1, 23, 3); /* same graph, features and radial weights */
  uint64_t rng = 99;
  double Q[9], D[NN_MAX_DEG + 1][49];
  so3_random_rotation(&rng, Q);
  for (int d = 0; d <= NN_MAX_DEG; d++)
    so3_wigner_d(d, Q, D[d]);
  float *bb = malloc(b.plan.per_edge * sizeof *bb);
  for (int e = 0; e < b.g.E; e++) {
    double v[3] = {b.g.rel[3 * e], b.g.rel[3 * e + 1], b.g.rel[3 * e + 2]}, rv[3];
    so3_matvec(Q, v, rv);
    float rf[3] = {(float)rv[0], (float)rv[1], (float)rv[2]};
    basis_edge(&b.plan, rf, bb);
    for (size_t i = 0; i < b.plan.per_edge; i++)
      b.basis[(size_t)e * b.plan.per_edge + i] = bb[i];
  }
  free(bb);
  for (int k = 0; k <= NN_MAX_DEG; k++) {
    int nk = NN_DIM(k), C = fin.ch[k];
    for (int n = 0; n < b.g.N; n++)
      for (int m = 0; m < nk; m++)
        for (int c = 0; c < C; c++) {
          double s = 0;
          for (int j = 0; j < nk; j++)
            s += D[k][m * nk + j] * a.x[k][(n * nk + j) * C + c];
          b.x[k][(n * nk + m) * C + c] = s;
        }
  }
  loss(&a);
  loss(&b);
  double worst = 0;
  for (int l = 0; l <= NN_MAX_DEG; l++) {
    int nl = NN_DIM(l), C = fout.ch[l];
    double num = 0, den = 0;
    for (int n = 0; n < a.g.N; n++)
      for (int m = 0; m < nl; m++)
        for (int c = 0; c < C; c++) {
          double want = 0;
          for (int j = 0; j < nl; j++)
            want += D[l][m * nl + j] * a.y[l][(n * nl + j) * C + c];
          double got = b.y[l][(n * nl + m) * C + c];
          num += (got - want) * (got - want);
          den += want * want;
        }
    double rel = sqrt(num / den);
    cr_assert_lt(rel, 1e-5, "degree %d output: relative error %.2e", l, rel);
    worst = fmax(worst, rel);
  }
  cr_log_info("conv equivariance: worst relative error %.2e (bases in fp32)", worst);
  case_free(&a);
  case_free(&b);
}
