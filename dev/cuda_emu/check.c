/* check.c — what the op table (tests/gpu/test_backend_ops.c, which run.sh
 * runs against the emulated GPU) cannot express: whole models and steps on
 * the CUDA backend, run on the host by the emulator (run.sh says how),
 * against the CPU backend. Prints one line per comparison; exits 1 on any
 * mismatch beyond round-off.
 *   check [fp32|tf32|bf16|fp16]   the groups of EMU_CHECK (default all):
 *     model  two small models' forward, backward, gradient norm and Adam
 *            step (low-memory and envelope switched between them);
 *     deg4   a third: degree 4, 16 channels;
 *     steps  fp16's loss-scaled steps recorded, padded and plain (in fp16
 *            whatever the precision asked for: the slowest group);
 *   then how many dense forwards took cuBLASLt's bias epilogue (none with
 *   EMU_LT=0, some otherwise). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "models/backend.h"
#include "models/cpu/table.h"
#include "models/cuda/table.h"
#include "models/device.h"
#include "models/model.h"
#include "models/objective.h"
#include "models/se3.h"

static const struct nn_backend *G;
static int fails;
long emu_lt_count(void); /* inc/cublasLt.h: the matmuls run (run.sh's emu.cpp) */
static unsigned long long rs = 12345;
static double rnd(void) {
  rs = rs * 6364136223846793005ULL + 1442695040888963407ULL;
  return (double)(rs >> 11) / 9007199254740992.0 * 2 - 1;
}
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* fp32: every element within tol of the CPU's (relative to max |cpu| where
 * over 1); reduced precision: the relative L2 error within tol x
 * tol_scale, since an input rounded across a ReLU's boundary moves single
 * elements by a whole gradient. gpu is host memory here. */
static double tol_scale = 1;
static void cmp(const char *what, const real *cpu, const real *gpu, size_t n, double tol) {
  double mx = 0, md = 0, d2 = 0, c2 = 0;
  int nan = 0;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)cpu[i] - gpu[i]);
    nan |= isnan(gpu[i]) != isnan(cpu[i]);
    mx = fabs(cpu[i]) > mx ? fabs(cpu[i]) : mx;
    md = d > md ? d : md;
    d2 += d * d;
    c2 += (double)cpu[i] * cpu[i];
  }
  double l2 = sqrt(d2) / (sqrt(c2) > 1 ? sqrt(c2) : 1);
  int bad = nan || (tol_scale == 1 ? md > tol * (mx > 1 ? mx : 1) : !(l2 <= tol * tol_scale));
  printf("%-48s n=%-8zu max|cpu|=%-10.3g maxdiff=%-10.3g L2 rel %-9.2e %s\n", what, n, mx, md, l2, bad ? "FAIL" : "ok");
  fails += bad;
}

/* The checks' small model: 2 blocks, 2 heads, 5 node and 4 edge features
 * (add_molecule's), 8 radial and 12 MLP features, cutoff 3 Å. */
static struct se3_config small_config(int degrees, int channels, int pool_max, int outputs, int envelope) {
  return (struct se3_config){.layers = 2,
                             .degrees = degrees,
                             .channels = channels,
                             .heads = 2,
                             .channels_div = 2,
                             .node_in = 5,
                             .edge_in = 4,
                             .radial_hidden = 8,
                             .mlp_hidden = 12,
                             .pool_max = pool_max,
                             .outputs = outputs,
                             .envelope = envelope,
                             .bonds_kept = 1,
                             .cutoff = 3.0f};
}

/* A random molecule of n atoms (at most 64) into bb (5 node and 4 edge
 * features): positions in a cube of half-width `spread`, an edge between
 * every two atoms closer than `cut`, with its length as the last feature. */
static void add_molecule(struct se3_batch_buf *bb, int n, double spread, float cut) {
  float pos[64][3], nf[64 * 5];
  for (int a = 0; a < n; a++)
    for (int k = 0; k < 3; k++)
      pos[a][k] = (float)(spread * rnd());
  for (int i = 0; i < n * 5; i++)
    nf[i] = (float)(rnd() > 0);
  int32_t src[4096], dst[4096];
  float ef[4096 * 4], rel[4096 * 3];
  int e = 0;
  for (int t = 0; t < n; t++)
    for (int s = 0; s < n; s++) {
      float d[3] = {pos[t][0] - pos[s][0], pos[t][1] - pos[s][1], pos[t][2] - pos[s][2]};
      float r = sqrtf(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
      if (s == t || r > cut) continue;
      src[e] = s;
      dst[e] = t;
      ef[e * 4 + 0] = (float)(rnd() > 0.5);
      ef[e * 4 + 1] = (float)(rnd() > 0);
      ef[e * 4 + 2] = 0;
      ef[e * 4 + 3] = r;
      memcpy(rel + 3 * e, d, sizeof d);
      e++;
    }
  se3_batch_add(bb, n, nf, e, src, dst, ef, rel);
}

/* The whole model on both backends: forward, backward (in fp16 with the
 * loss scaled as training scales it, from 2^16 and halved while the
 * gradient overflows fp16's range), the gradient's norm, an Adam step. */
static void test_model(int low_memory, int envelope, int degrees, int channels) {
  struct se3_config c = small_config(degrees, channels, envelope, 2, envelope ? SE3_ENVELOPE_POLY : 0);
  char name[120];
  struct se3_error err;
  struct se3_net *nc = se3_net_create(nn_backend_cpu(), &c, low_memory, &err);
  struct se3_net *ng = nc ? se3_net_create(G, &c, low_memory, &err) : NULL;
  struct se3_batch_buf bb;
  se3_batch_buf_init(&bb, c.node_in, c.edge_in);
  for (int mol = 0; mol < 3; mol++)
    add_molecule(&bb, 5 + 3 * mol, 2.0, 3.2f);
  real outc[16], outg[16], dout[16], doutg[16];
  if (!ng) goto failed;
  se3_net_init_params(nc, 7);
  se3_net_init_params(ng, 7);
  se3_batch_bases(&bb, &se3_net_model(nc)->plan);
  const struct se3_batch *b = &bb.b;
  int no = b->G * c.outputs;
  if (se3_net_forward(nc, b, outc, 1, &err) || se3_net_forward(ng, b, outg, 1, &err)) goto failed;
  snprintf(name, sizeof name, "model forward (N %d E %d) lowmem %d env %d deg %d", b->N, b->E, low_memory, envelope,
           degrees);
  cmp(name, outc, outg, no, 1e-4);
  for (int i = 0; i < no; i++)
    dout[i] = (real)rnd();
  if (se3_net_backward(nc, dout, &err)) goto failed;
  size_t np = se3_net_n_params(nc), bad = 0;
  real *gc = malloc(np * sizeof *gc), *gg = malloc(np * sizeof *gg);
  se3_net_get(nc, SE3_NET_GRAD, gc);
  double ls = G->precision == NN_PREC_FP16 ? NN_LOSS_SCALE_INIT : 1;
  for (;; ls /= 2) {
    for (int i = 0; i < no; i++)
      doutg[i] = (real)(dout[i] * ls);
    if (se3_net_backward(ng, doutg, &err)) goto failed;
    se3_net_get(ng, SE3_NET_GRAD, gg);
    bad = 0;
    for (size_t i = 0; i < np; i++)
      bad += !isfinite(gg[i]);
    if (!bad || ls <= 1) break;
    printf("%-48s loss scale %g: %zu of %zu gradient entries not finite: halved\n", "model backward", ls, bad, np);
    if (se3_net_forward(ng, b, outg, 1, &err)) goto failed; /* (the backward used the tape up) */
  }
  for (size_t i = 0; ls != 1 && i < np; i++)
    gg[i] = (real)(gg[i] / ls);
  snprintf(name, sizeof name, "model gradient (%zu params)", np);
  cmp(name, gc, gg, np, 2e-4);
  double n1 = se3_net_clip(nc, 0.5), n2 = se3_net_unscale_clip(ng, ls, 0.5);
  int norm_ok = fabs(n1 - n2) < 1e-4 * tol_scale * n1;
  printf("%-48s cpu %.9g gpu %.9g %s\n", "model grad norm", n1, n2, norm_ok ? "ok" : "FAIL");
  fails += !norm_ok;
  struct nn_adam o = {0.9, 0.999, 1e-8, 0.0, 1};
  se3_net_adam(nc, &o, 1, 1e-3);
  se3_net_adam(ng, &o, 1, 1e-3);
  se3_net_get(nc, SE3_NET_PARAMS, gc);
  se3_net_get(ng, SE3_NET_PARAMS, gg);
  cmp("model params after a step", gc, gg, np, 1e-4);
  if (G->sync(&err)) goto failed;
  free(gc), free(gg);
  se3_net_free(nc), se3_net_free(ng);
  se3_batch_buf_free(&bb);
  return;
failed:
  printf("model (degrees %d): %s FAIL\n", degrees, se3_error_str(&err).s);
  fails++;
}

/* ---- loss-scaled steps recorded (fp16) ----
 * Three nets on the device in fp16, the same start: steps recorded (per
 * shape and loss scale), the same padded steps run eagerly, and plain
 * steps (the host unscales and decides). Two batches in turn, 8 steps, the
 * scale 1e39 at steps 1 and 5 (the loss's gradient overflows: the step is
 * skipped; step 5's is recorded, so a replay-time decision is checked) and
 * 1024 otherwise. Each step's norm: recorded and padded bitwise equal, and
 * not finite exactly at the overflows on all three; a skipped step leaves
 * the parameters as they were, bitwise; at the end recorded and padded
 * hold the same parameters, bitwise. */
static void test_scaled_steps(enum nn_precision back) {
  struct se3_error err;
  const struct nn_backend *h = nn_backend_cuda_open(0, 0, NN_PREC_FP16, &err);
  struct se3_config c = small_config(3, 8, 1, 1, SE3_ENVELOPE_POLY);
  struct se3_net *net[3] = {0};
  const enum se3_steps how[3] = {SE3_STEPS_RECORDED, SE3_STEPS_PADDED, SE3_STEPS_PLAIN};
  for (int k = 0; k < 3 && h; k++) {
    if (!(net[k] = se3_net_create(h, &c, 0, &err))) break;
    se3_net_init_params(net[k], 11);
    se3_net_set_steps(net[k], how[k]);
    se3_net_set_loss_sum(net[k], 0);
  }
  if (!net[2]) {
    printf("fp16 nets: %s FAIL\n", se3_error_str(&err).s);
    fails++;
    return;
  }
  struct se3_batch_buf bb[2];
  for (int i = 0; i < 2; i++) {
    se3_batch_buf_init(&bb[i], c.node_in, c.edge_in);
    for (int mol = 0; mol < 2 + i; mol++)
      add_molecule(&bb[i], 4 + 2 * mol + i, 1.5, 2.9f);
    se3_batch_geometry(&bb[i]); /* (the bases computed on the device, as the stages send a batch) */
  }
  size_t np = se3_net_n_params(net[0]), differ = 0;
  real *before = malloc(np * sizeof *before), *after = malloc(np * sizeof *after), *other = malloc(np * sizeof *other);
  struct nn_adam o = {0.9, 0.999, 1e-8, 0.01, 1};
  long taken = 0;
  int bad_norm = 0, bad_skip = 0;
  for (int s = 1; s <= 8; s++) {
    int i = s % 2, overflow = s == 1 || s == 5;
    real y[4] = {0.5f, -0.25f, 1.0f, 0.0f};
    struct se3_loss_spec ls = {NN_LOSS_MSE, 1.0, bb[i].b.G, bb[i].b.G, overflow ? 1e39 : 1024};
    se3_net_get(net[0], SE3_NET_PARAMS, before);
    double norm[3];
    for (int k = 0; k < 3; k++)
      if (se3_net_train_step(net[k], &bb[i].b, y, &ls, 0.5, &o, taken + 1, 1e-3, &err) ||
          se3_net_step_norm(net[k], &norm[k], &err)) {
        printf("fp16 step %d: %s FAIL\n", s, se3_error_str(&err).s);
        fails++;
        return;
      }
    bad_norm += memcmp(&norm[0], &norm[1], sizeof norm[0]) != 0;
    for (int k = 0; k < 3; k++)
      bad_norm += (!isfinite(norm[k])) != overflow;
    se3_net_get(net[0], SE3_NET_PARAMS, after);
    if (overflow) bad_skip += memcmp(before, after, np * sizeof *after) != 0;
    taken += isfinite(norm[0]) != 0;
  }
  se3_net_get(net[1], SE3_NET_PARAMS, other);
  for (size_t j = 0; j < np; j++)
    differ += memcmp(&after[j], &other[j], sizeof after[j]) != 0;
  struct se3_step_stats st;
  se3_net_step_stats(net[0], &st);
  int ok = !bad_norm && !bad_skip && !differ && taken == 6 && st.recorded >= 3 && st.replayed >= 4 && !st.refused;
  printf("%-48s %ld eager, %ld recorded, %ld replayed; norms off %d, skips off %d, %zu of %zu params differ %s\n",
         "fp16 loss-scaled steps recorded", st.eager, st.recorded, st.replayed, bad_norm, bad_skip, differ, np,
         ok ? "ok" : "FAIL");
  fails += !ok;
  for (int k = 0; k < 3; k++)
    se3_net_free(net[k]);
  for (int i = 0; i < 2; i++)
    se3_batch_buf_free(&bb[i]);
  free(before), free(after), free(other);
  if (h->sync(&err)) printf("sync: %s FAIL\n", se3_error_str(&err).s), fails++;
  G = nn_backend_cuda_open(0, 0, back, &err); /* (the same table, switched back) */
}

int main(int argc, char **argv) {
  struct se3_error err;
  enum nn_precision p = NN_PREC_FP32;
  if (argc > 2 || nn_precision_parse(argc > 1 ? argv[1] : "fp32", &p)) {
    printf("usage: check [fp32|tf32|bf16|fp16]   (EMU_CHECK: groups of model deg4 steps)\n");
    return 2;
  }
  /* products with inputs rounded to 10 (tf32, fp16) or 7 (bf16) significand
   * bits: bf16's unit round-off is 8 times tf32's */
  tol_scale = p == NN_PREC_TF32 || p == NN_PREC_FP16 ? 200 : p == NN_PREC_BF16 ? 1600 : 1;
  if (!(G = nn_backend_cuda_open(0, 0, p, &err))) {
    printf("open: %s\n", se3_error_str(&err).s);
    return 1;
  }
  /* EMU_CONV=gemm or fused: the convolution's path (backend.h's set_conv_path) */
  const char *conv = getenv("EMU_CONV"), *only = getenv("EMU_CHECK"), *lt = getenv("EMU_LT");
  int ran = 0, no_lt = lt && !strcmp(lt, "0");
  enum nn_conv_path cpath = NN_CONV_DIRECT;
  if (conv && nn_conv_path_parse(conv, &cpath)) {
    printf("EMU_CONV=%s is not one of direct, gemm, fused\n", conv);
    return 1;
  }
  G->set_conv_path(cpath);
  printf("backend %s on %s, precision %s (tolerances x %g), convolution %s, groups %s\n", G->name, G->device,
         argc > 1 ? argv[1] : "fp32", tol_scale, nn_conv_path_name(cpath), only ? only : "all");
  double t = now();
#define RUN(group, call)                                                                                               \
  if (!only || strstr(only, group)) {                                                                                  \
    ran++;                                                                                                             \
    call;                                                                                                              \
    printf("  (%s: %.1f s)\n", #call, now() - t);                                                                      \
    fflush(stdout);                                                                                                    \
    t = now();                                                                                                         \
  }
  RUN("model", test_model(0, 1, 3, 8));
  RUN("model", test_model(1, 0, 3, 8));
  RUN("deg4", test_model(0, 1, 4, 16));
  RUN("steps", test_scaled_steps(p));
#undef RUN
  if (!ran) printf("EMU_CHECK=%s: no group of model, deg4, steps: FAIL\n", only), fails++;
  if (G->sync(&err)) printf("sync: %s\n", se3_error_str(&err).s), fails++;
  long nlt = emu_lt_count();
  printf("dense forwards with the bias in cuBLASLt's epilogue: %ld%s\n", nlt, no_lt ? " (EMU_LT=0)" : "");
  if ((nlt == 0) != no_lt) printf("   FAIL: expected %s\n", nlt ? "none" : "some"), fails++;
  printf("%s: %d failures\n", fails ? "FAILED" : "ALL OK", fails);
  return fails != 0;
}
