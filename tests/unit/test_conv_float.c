/* The convolution's float-only kernels, each against the fp32 path it
 * stands in for.
 *
 * The masked tiles (conv.c, MASKED: the AVX-512 and AVX2 builds' generic
 * tiles, for channel counts and H that the fast tiles do not take, such as
 * the default model's 8 channels and 16 radial features) must give the
 * baseline build's forward and backward to fp32 round-off (the baseline has
 * no FMA, so the last bits differ). Skipped where the processor lacks them.
 *
 * precision bf16 on the CPU: the convolution's forward with its radial
 * product in bf16 (nn_conv_forward_bf16, conv_bf16.c).
 *
 * On a processor with AVX512-BF16 it must be the fp32 forward of the same
 * inputs with s2 and W3 rounded to bf16 (to fp32 round-off: only the order of
 * the sums differs), on the fast shapes (32 channels, 32 radial features) and
 * on awkward ones (8 or 40 channels, odd H); it must differ from the fp32
 * forward of the unrounded inputs (else bf16 did not run) by no more than
 * bf16's rounding can explain; and a whole model's predictions through the
 * bf16 table stay within 1 % of fp32's. Where the processor lacks
 * AVX512-BF16, those tests say so and are skipped (ctest: "Skipped"), and
 * asking for the bf16 table is refused with a message naming the
 * instruction set. The rounding itself is checked everywhere. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/basis.h"
#include "models/cpu/isa.h"
#include "models/cpu/nn.h"
#include "models/cpu/table.h"
#include "models/se3.h"
#include "tests/testutil.h"

static unsigned bits_of(float x) {
  unsigned u;
  memcpy(&u, &x, sizeof u);
  return u;
}
static float float_of(unsigned u) {
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}

Test(bf16, rounds_to_nearest_even) {
  cr_assert_eq(nn_bf16_bits(1.0f), 0x3f80);
  cr_assert_eq(nn_bf16_bits(-2.0f), 0xc000);
  cr_assert_eq(nn_bf16_bits(-0.0f), 0x8000);
  cr_assert_eq(nn_bf16_bits(float_of(0x3f808000u)), 0x3f80, "a tie rounds to the even neighbour (down)");
  cr_assert_eq(nn_bf16_bits(float_of(0x3f818000u)), 0x3f82, "a tie rounds to the even neighbour (up)");
  cr_assert_eq(nn_bf16_bits(float_of(0x3f808001u)), 0x3f81, "above the tie rounds up");
  cr_assert_eq(nn_bf16_bits(float_of(0x3f807fffu)), 0x3f80, "below the tie rounds down");
  cr_assert_eq(nn_bf16_bits(float_of(0x7f7fffffu)), 0x7f80, "the largest float rounds to infinity");
  cr_assert_eq(nn_bf16_bits(INFINITY), 0x7f80);
  cr_assert(isnan(nn_bf16_round(NAN)), "NaN stays NaN");
  cr_assert(isnan(nn_bf16_round(float_of(0x7f800001u))), "a NaN whose payload is in the low bits stays NaN");
  /* every rounded value is within half a unit of bf16's last place */
  tu_seed(9);
  for (int i = 0; i < 100000; i++) {
    float x = (float)((tu_rnd() - 0.5) * pow(2.0, (int)(tu_rnd() * 40) - 20));
    float r = nn_bf16_round(x);
    cr_assert_eq(bits_of(r) & 0xffffu, 0u);
    cr_assert_leq(fabsf(r - x), fabsf(x) * 0x1p-8f, "%a -> %a", (double)x, (double)r);
  }
}

/* Where the processor has it, the table offers bf16 beside an untouched fp32
 * table; where not, asking for it is an error that names what is missing. */
Test(bf16, the_cpu_table) {
  struct se3_error err;
  const struct nn_backend *fp = nn_backend_cpu(), *bf = nn_backend_cpu_precision(NN_PREC_BF16, &err);
  if (nn_bf16_supported()) {
    cr_assert_not_null(bf, "%s", se3_error_str(&err).s);
    cr_assert_neq(bf, fp);
    cr_assert_eq(bf->precision, NN_PREC_BF16);
    cr_assert_eq(bf->conv_forward, nn_conv_forward_bf16);
    cr_assert_eq(bf->conv_backward, fp->conv_backward, "the backward stays fp32");
  } else {
    cr_assert_null(bf);
    cr_assert_not_null(strstr(se3_error_str(&err).s, "AVX512-BF16"), "%s", se3_error_str(&err).s);
  }
  cr_assert_eq(fp->precision, NN_PREC_FP32, "the fp32 table changed");
  cr_assert_eq(nn_backend_cpu_precision(NN_PREC_FP32, &err), fp);
  cr_assert_null(nn_backend_cpu_precision(NN_PREC_TF32, &err));
}

/* ---- the convolution ------------------------------------------------------- */

struct ccase {
  struct nn_conv_shape s;
  struct basis_plan plan;
  int N, E, H, pool;
  int32_t src[96], in_start[17];
  float *x[NN_MAX_DEG + 1], *basis, *s2, *W3, *s2r, *W3r;
};

/* 12 nodes, 0..5 incoming edges each, random features and weights. */
static void ccase_init(struct ccase *c, int cin, int cout, int H, int pool, unsigned seed) {
  memset(c, 0, sizeof *c);
  tu_seed(seed);
  c->N = 12;
  c->H = H;
  c->pool = pool;
  for (int n = 0; n < c->N; n++) {
    c->in_start[n] = c->E;
    int deg = n == 3 ? 0 : 1 + (int)(tu_rnd() * 5);
    for (int j = 0; j < deg; j++)
      c->src[c->E++] = (n + 1 + j) % c->N;
  }
  c->in_start[c->N] = c->E;
  cr_assert_eq(basis_plan_init(&c->plan, NN_MAX_DEG), 0);
  for (int d = 0; d <= NN_MAX_DEG; d++) {
    c->s.fin.ch[d] = d == 2 ? cin / 2 + 1 : cin; /* one degree's count unlike the others' */
    c->s.fout.ch[d] = cout;
  }
  c->s.plan = &c->plan;
  c->s.N = c->N;
  c->s.E = c->E;
  c->s.src = c->src;
  c->s.in_start = c->in_start;
  for (int d = 0; d <= NN_MAX_DEG; d++) {
    size_t n = (size_t)c->N * (size_t)(NN_DIM(d) * c->s.fin.ch[d]);
    c->x[d] = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
      c->x[d][i] = (float)(2 * tu_rnd() - 1);
  }
  c->basis = malloc((size_t)c->E * c->plan.per_edge * sizeof(float));
  for (int e = 0; e < c->E; e++) {
    float rel[3];
    for (int a = 0; a < 3; a++)
      rel[a] = (float)(3 * tu_rnd() - 1.5);
    basis_edge(&c->plan, rel, c->basis + (size_t)e * c->plan.per_edge);
  }
  size_t ns = (size_t)c->E * (size_t)H, nw = nn_conv_radial_size(&c->s.fin, &c->s.fout) * (size_t)H;
  c->s2 = malloc(ns * sizeof(float));
  c->s2r = malloc(ns * sizeof(float));
  c->W3 = malloc(nw * sizeof(float));
  c->W3r = malloc(nw * sizeof(float));
  for (size_t i = 0; i < ns; i++) {
    c->s2[i] = (float)tu_rnd(); /* after a ReLU: >= 0 */
    c->s2r[i] = nn_bf16_round(c->s2[i]);
  }
  for (size_t i = 0; i < nw; i++) {
    c->W3[i] = (float)((2 * tu_rnd() - 1) / sqrt((double)H));
    c->W3r[i] = nn_bf16_round(c->W3[i]);
  }
}

static void ccase_free(struct ccase *c) {
  for (int d = 0; d <= NN_MAX_DEG; d++)
    free(c->x[d]);
  free(c->basis);
  free(c->s2);
  free(c->s2r);
  free(c->W3);
  free(c->W3r);
}

static size_t out_len(const struct ccase *c, int d) {
  return (size_t)(c->pool ? c->N : c->E) * (size_t)(NN_DIM(d) * c->s.fout.ch[d]);
}

static void forward(const struct ccase *c, int bf16, const float *s2, const float *W3, float *y[]) {
  for (int d = 0; d <= NN_MAX_DEG; d++)
    y[d] = calloc(out_len(c, d) + 1, sizeof(float));
  const float *const *x = (const float *const *)c->x;
  int rc = bf16 ? nn_conv_forward_bf16(y, &c->s, x, c->basis, s2, W3, c->H, c->pool)
                : nn_conv_forward(y, &c->s, x, c->basis, s2, W3, c->H, c->pool);
  cr_assert_eq(rc, 0);
}

static void check_conv(int cin, int cout, int H, int pool) {
  if (!nn_bf16_supported()) cr_skip_test("no AVX512-BF16 on this processor (or SE3_BF16=off)");
  struct ccase c;
  ccase_init(&c, cin, cout, H, pool, (unsigned)(cin * 1000 + cout * 10 + H + pool));
  float *yb[NN_MAX_DEG + 1], *yr[NN_MAX_DEG + 1], *yf[NN_MAX_DEG + 1];
  forward(&c, 1, c.s2, c.W3, yb);   /* bf16 */
  forward(&c, 0, c.s2r, c.W3r, yr); /* fp32 on the rounded operands */
  forward(&c, 0, c.s2, c.W3, yf);   /* fp32 */
  double scale = 0, d_rounded = 0, d_fp32 = 0;
  for (int d = 0; d <= NN_MAX_DEG; d++)
    for (size_t i = 0; i < out_len(&c, d); i++) {
      scale = fmax(scale, fabs(yr[d][i]));
      d_rounded = fmax(d_rounded, fabs((double)yb[d][i] - yr[d][i]));
      d_fp32 = fmax(d_fp32, fabs((double)yb[d][i] - yf[d][i]));
    }
  cr_log_info("cin %d cout %d H %d pool %d: |y| <= %.3g; bf16 vs fp32 on rounded operands %.2e, vs fp32 %.2e "
              "(relative)",
              cin, cout, H, pool, scale, d_rounded / scale, d_fp32 / scale);
  cr_assert_gt(scale, 1e-2);
  cr_assert_lt(d_rounded, 2e-5 * scale, "not the fp32 sums of the rounded operands");
  cr_assert_gt(d_fp32, 1e-5 * scale, "no bf16 rounding to be seen: did the bf16 kernel run?");
  cr_assert_lt(d_fp32, 2e-2 * scale);
  for (int d = 0; d <= NN_MAX_DEG; d++) {
    free(yb[d]);
    free(yr[d]);
    free(yf[d]);
  }
  ccase_free(&c);
}

/* The backward of one build: dx, ds2 and dW3 (from zero) for the output
 * gradient dy, into one array (dx by degree, then ds2, then dW3). */
static float *backward(const struct ccase *c, float *const dy[], size_t part[4]) {
  size_t ndx = 0, ns = (size_t)c->E * (size_t)c->H, nw = nn_conv_radial_size(&c->s.fin, &c->s.fout) * (size_t)c->H;
  for (int d = 0; d <= NN_MAX_DEG; d++)
    ndx += (size_t)c->N * (size_t)(NN_DIM(d) * c->s.fin.ch[d]);
  part[0] = 0;
  part[1] = ndx;
  part[2] = ndx + ns;
  part[3] = ndx + ns + nw;
  float *all = calloc(part[3], sizeof *all), *dx[NN_MAX_DEG + 1], *p = all;
  for (int d = 0; d <= NN_MAX_DEG; d++) {
    dx[d] = p;
    p += (size_t)c->N * (size_t)(NN_DIM(d) * c->s.fin.ch[d]);
  }
  const float *const *x = (const float *const *)c->x;
  cr_assert_eq(
      nn_conv_backward(dx, p, p + ns, &c->s, (const float *const *)dy, x, c->basis, c->s2, c->W3, c->H, c->pool), 0);
  return all;
}

/* The AVX-512 or AVX2 build (masked tiles where the shape is not the fast
 * one) against the baseline build: the forward, and the backward's dx, ds2
 * and dW3 (relative to the largest of each). */
static void check_masked_isa(enum nn_isa isa, int cin, int cout, int H, int pool) {
  struct ccase c;
  ccase_init(&c, cin, cout, H, pool, (unsigned)(cin * 1000 + cout * 10 + H + pool + 7));
  float *ya[NN_MAX_DEG + 1], *yb[NN_MAX_DEG + 1];
  enum nn_isa was = nn_isa_current();
  cr_assert_eq(nn_isa_set(isa), 0);
  forward(&c, 0, c.s2, c.W3, ya);
  cr_assert_eq(nn_isa_set(NN_ISA_BASE), 0);
  forward(&c, 0, c.s2, c.W3, yb);
  nn_isa_set(was);
  double scale = 0, d = 0;
  for (int k = 0; k <= NN_MAX_DEG; k++)
    for (size_t i = 0; i < out_len(&c, k); i++) {
      scale = fmax(scale, fabs(yb[k][i]));
      d = fmax(d, fabs((double)ya[k][i] - yb[k][i]));
    }
  cr_log_info("masked, cin %d cout %d H %d pool %d: |y| <= %.3g, %s vs base %.2e relative", cin, cout, H, pool, scale,
              nn_isa_name(isa), d / scale);
  cr_assert_gt(scale, 1e-2);
  cr_assert_lt(d, 2e-6 * scale);
  /* the backward, for an output gradient shaped like y */
  float *dy[NN_MAX_DEG + 1];
  for (int k = 0; k <= NN_MAX_DEG; k++) {
    dy[k] = malloc((out_len(&c, k) + 1) * sizeof(float));
    for (size_t i = 0; i < out_len(&c, k); i++)
      dy[k][i] = (float)(2 * tu_rnd() - 1);
  }
  size_t part[4];
  cr_assert_eq(nn_isa_set(isa), 0);
  float *ga = backward(&c, dy, part);
  cr_assert_eq(nn_isa_set(NN_ISA_BASE), 0);
  float *gb = backward(&c, dy, part);
  nn_isa_set(was);
  static const char *const names[3] = {"dx", "ds2", "dW3"};
  for (int q = 0; q < 3; q++) {
    double gs = 0, gd = 0;
    for (size_t i = part[q]; i < part[q + 1]; i++) {
      gs = fmax(gs, fabs(gb[i]));
      gd = fmax(gd, fabs((double)ga[i] - gb[i]));
    }
    cr_log_info("masked backward %s: |.| <= %.3g, %s vs base %.2e relative", names[q], gs, nn_isa_name(isa), gd / gs);
    cr_assert_gt(gs, 1e-2, "%s", names[q]);
    cr_assert_lt(gd, 1e-5 * gs, "%s", names[q]);
  }
  free(ga);
  free(gb);
  for (int k = 0; k <= NN_MAX_DEG; k++) {
    free(ya[k]);
    free(yb[k]);
    free(dy[k]);
  }
  ccase_free(&c);
}

static void check_masked(int cin, int cout, int H, int pool) {
  if (!nn_isa_supported(NN_ISA_AVX2)) cr_skip_test("no AVX2 on this processor");
  check_masked_isa(NN_ISA_AVX2, cin, cout, H, pool);
  if (!nn_isa_supported(NN_ISA_AVX512)) cr_skip_test("no AVX-512 on this processor (the AVX2 build passed)");
  check_masked_isa(NN_ISA_AVX512, cin, cout, H, pool);
}

Test(masked, conv_small_model_shape) { check_masked(8, 8, 16, 1); }
Test(masked, conv_partial_vectors_per_edge) { check_masked(5, 40, 15, 0); }
Test(masked, conv_two_partial_vectors) { check_masked(16, 24, 33, 1); }
Test(masked, conv_one_channel) { check_masked(1, 1, 3, 1); }

Test(bf16, conv_fast_shape_per_edge) { check_conv(32, 32, 32, 0); }
Test(bf16, conv_fast_shape_pooled) { check_conv(32, 32, 32, 1); }
Test(bf16, conv_small_model_shape) { check_conv(8, 8, 16, 1); }
Test(bf16, conv_odd_radial_width_and_partial_vectors) { check_conv(5, 40, 15, 1); }
Test(bf16, conv_two_partial_vectors) { check_conv(16, 24, 33, 0); }

/* ---- a whole model ----------------------------------------------------------- */

/* Predictions of a model with the fast tiles' sizes on random molecules of
 * 5..14 atoms, every pair closer than 3 Å an edge, through a table. */
static void predict(const struct nn_backend *be, float *y, int n_mol) {
  const struct se3_config cfg = {.layers = 3,
                                 .degrees = 4,
                                 .channels = 32,
                                 .heads = 8,
                                 .channels_div = 2,
                                 .node_in = 4,
                                 .edge_in = 2,
                                 .radial_hidden = 32,
                                 .mlp_hidden = 32,
                                 .pool_max = 0,
                                 .outputs = 1};
  struct se3_model m;
  struct se3_error err;
  cr_assert_eq(se3_model_init(&m, &cfg, &err), 0, "%s", se3_error_str(&err).s);
  m.be = be;
  float *p = malloc(m.n_params * sizeof *p);
  se3_model_init_params(&m, p, 11);
  struct se3_batch_buf bb;
  se3_batch_buf_init(&bb, cfg.node_in, cfg.edge_in);
  tu_seed(4);
  for (int g = 0; g < n_mol; g++) {
    int n = 5 + g % 10, e = 0;
    float pos[14][3], node[14 * 4], edge[14 * 13 * 2], rel[14 * 13 * 3];
    int32_t src[14 * 13], dst[14 * 13];
    for (int a = 0; a < n; a++) {
      for (int k = 0; k < 3; k++)
        pos[a][k] = (float)(3 * tu_rnd());
      for (int k = 0; k < 4; k++)
        node[a * 4 + k] = (float)(k == a % 4);
    }
    for (int t = 0; t < n; t++)
      for (int s = 0; s < n; s++) {
        float r[3] = {pos[t][0] - pos[s][0], pos[t][1] - pos[s][1], pos[t][2] - pos[s][2]};
        float d = sqrtf(r[0] * r[0] + r[1] * r[1] + r[2] * r[2]);
        if (s == t || d > 3) continue;
        src[e] = s;
        dst[e] = t;
        memcpy(rel + 3 * e, r, sizeof r);
        edge[2 * e] = d;
        edge[2 * e + 1] = (float)((s + t) % 2);
        e++;
      }
    cr_assert_eq(se3_batch_add(&bb, n, node, e, src, dst, edge, rel), 0);
  }
  cr_assert_eq(se3_batch_bases(&bb, &m.plan), 0);
  struct nn_arena w = {0};
  cr_assert_eq(se3_model_infer_ws(&m, p, &bb.b, y, &w), 0);
  nn_arena_free(&w);
  se3_batch_buf_free(&bb);
  free(p);
  se3_model_free(&m);
}

Test(bf16, model_predictions_within_a_percent_of_fp32) {
  if (!nn_bf16_supported()) cr_skip_test("no AVX512-BF16 on this processor (or SE3_BF16=off)");
  enum { G = 24 };
  struct se3_error err;
  const struct nn_backend *bf = nn_backend_cpu_precision(NN_PREC_BF16, &err);
  cr_assert_not_null(bf, "%s", se3_error_str(&err).s);
  float yf[G], yb[G];
  predict(nn_backend_cpu(), yf, G);
  predict(bf, yb, G);
  double lo = yf[0], hi = yf[0], dmax = 0;
  for (int g = 0; g < G; g++) {
    lo = fmin(lo, yf[g]);
    hi = fmax(hi, yf[g]);
    dmax = fmax(dmax, fabs((double)yb[g] - yf[g]));
  }
  cr_log_info("%d molecules: fp32 predictions span %.4g; bf16 differs by at most %.3g (%.2e of the span)", G, hi - lo,
              dmax, dmax / (hi - lo));
  cr_assert_gt(hi - lo, 1e-4, "the predictions do not spread: nothing to compare");
  cr_assert_gt(dmax, 0, "bf16 gave fp32's predictions to the bit: did it run?");
  cr_assert_lt(dmax, 1e-2 * (hi - lo));
}
