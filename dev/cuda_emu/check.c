/* check.c — every operation of the CUDA backend's table, run on the host by
 * the emulator (run.sh says how), against the CPU backend, and a whole
 * model's forward, backward, gradient norm and Adam step on both. Prints one
 * line per comparison; exits 1 on any mismatch beyond round-off.
 *
 * `check devices`: which GPU a process opens, by rank or by index, when it
 * sees EMU_DEVICES GPUs (each case in a child process of its own, since a
 * process opens one device once). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "models/backend.h"
#include "models/basis.h"
#include "models/cpu/table.h"
#include "models/cuda/table.h"
#include "models/device.h"
#include "models/cpu/nn.h"
#include "models/cpu/optim.h"
#include "models/model.h"
#include "models/objective.h"
#include "models/se3.h"

static const struct nn_backend *G;
static int fails;
/* each group's seconds (the emulator is slow: where a run's time goes) */
static double t_last;
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + t.tv_nsec * 1e-9;
}
static void lap(const char *what) {
  double t = now();
  printf("  (%s: %.1f s)\n", what, t - t_last);
  fflush(stdout);
  t_last = t;
}
long emu_lt_count(void); /* inc/cublasLt.h: the matmuls run (run.sh's emu.cpp) */
static unsigned long long rs = 12345;
static double rnd(void) {
  rs = rs * 6364136223846793005ULL + 1442695040888963407ULL;
  return (double)(rs >> 11) / 9007199254740992.0 * 2 - 1;
}
static real *rarr(size_t n) {
  real *p = malloc((n + 1) * sizeof *p);
  for (size_t i = 0; i < n; i++)
    p[i] = (real)rnd();
  return p;
}
static real *copy_of(const real *a, size_t n) {
  real *p = malloc((n + 1) * sizeof *p);
  memcpy(p, a, n * sizeof *p);
  return p;
}
/* device (emulated: host) copy */
static real *dev(const real *a, size_t n) {
  real *p = G->alloc((n + 1) * sizeof *p);
  if (a) G->upload(p, a, n * sizeof *p);
  return p;
}
static double tol_scale = 1; /* the precision's: main */
static void cmp(const char *what, const real *cpu, const real *gpu_dev, size_t n, double tol) {
  real *g = malloc((n + 1) * sizeof *g);
  G->download(g, gpu_dev, n * sizeof *g);
  double mx = 0, md = 0, d2 = 0, c2 = 0;
  size_t at = 0;
  int nan = 0;
  for (size_t i = 0; i < n; i++) {
    if (fabs(cpu[i]) > mx) mx = fabs(cpu[i]);
    d2 += ((double)cpu[i] - g[i]) * ((double)cpu[i] - g[i]);
    c2 += (double)cpu[i] * cpu[i];
    if (!(fabs(cpu[i] - g[i]) <= md)) {
      if (isnan(g[i]) != isnan(cpu[i])) nan = 1;
      if (!isnan(g[i] - cpu[i])) md = fabs(cpu[i] - g[i]);
      at = i;
    }
  }
  /* fp32: every element; reduced precision: the relative L2 error, since an
   * input rounded across a ReLU's or a max's boundary moves single elements
   * by a whole gradient */
  double l2 = sqrt(d2) / (sqrt(c2) > 1 ? sqrt(c2) : 1);
  int bad = nan || (tol_scale == 1 ? md > tol * (mx > 1 ? mx : 1) : !(l2 <= tol * tol_scale));
  printf("%-40s n=%-8zu max|cpu|=%-10.3g maxdiff=%-10.3g", what, n, mx, md);
  if (tol_scale != 1) printf(" L2 rel %-9.2e", l2);
  printf(" %s\n", bad ? "FAIL" : "ok");
  if (bad) {
    printf("   first/last bad at %zu: cpu %g gpu %g%s\n", at, (double)cpu[at], (double)g[at], nan ? " (NaN)" : "");
    fails++;
  }
  free(g);
}
static void cmpi(const char *what, const int32_t *cpu, const int32_t *gpu_dev, size_t n) {
  int32_t *g = malloc((n + 1) * sizeof *g);
  G->download(g, gpu_dev, n * sizeof *g);
  int bad = 0;
  for (size_t i = 0; i < n; i++)
    bad |= g[i] != cpu[i];
  printf("%-40s n=%-8zu %s\n", what, n, bad ? "FAIL" : "ok");
  fails += bad;
  free(g);
}

static void test_gemm(void) {
  int rows = 300, cin = 13, cout = 7;
  real *x = rarr((size_t)rows * cin), *W = rarr((size_t)cout * cin), *y = rarr((size_t)rows * cout);
  real *dy = rarr((size_t)rows * cout), *dx = rarr((size_t)rows * cin), *dW = rarr((size_t)cout * cin);
  real *b = rarr(cout), *db = rarr(cout);
  real *X = dev(x, rows * cin), *Wd = dev(W, cout * cin), *Y = dev(NULL, rows * cout), *DY = dev(dy, rows * cout);
  real *DX = dev(NULL, rows * cin), *DW = dev(dW, cout * cin), *B = dev(b, cout), *DB = dev(db, cout);
  nn_linear_forward(y, x, W, rows, cin, cout);
  G->linear_forward(Y, X, Wd, rows, cin, cout);
  cmp("linear_forward", y, Y, rows * cout, 1e-5);
  nn_linear_backward(dx, dW, dy, x, W, rows, cin, cout);
  G->linear_backward(DX, DW, DY, X, Wd, rows, cin, cout);
  cmp("linear_backward dx", dx, DX, rows * cin, 1e-5);
  cmp("linear_backward dW (added)", dW, DW, cout * cin, 1e-5);
  nn_dense_forward(y, x, W, b, rows, cin, cout);
  G->dense_forward(Y, X, Wd, B, rows, cin, cout);
  cmp("dense_forward", y, Y, rows * cout, 1e-5);
  nn_dense_backward(dx, dW, db, dy, x, W, rows, cin, cout);
  G->dense_backward(DX, DW, DB, DY, X, Wd, rows, cin, cout);
  cmp("dense_backward dx", dx, DX, rows * cin, 1e-5);
  cmp("dense_backward dW", dW, DW, cout * cin, 1e-5);
  cmp("dense_backward db (added)", db, DB, cout, 1e-5);
  nn_dense_backward(NULL, dW, NULL, dy, x, W, rows, cin, cout);
  G->dense_backward(NULL, DW, NULL, DY, X, Wd, rows, cin, cout);
  cmp("dense_backward dW, no dx/db", dW, DW, cout * cin, 1e-5);
  /* operands one float past their 256-byte alignment: the bias then is not
   * 16-byte aligned, and the layer takes the way without cuBLASLt (gemm.cu) */
  long lt0 = emu_lt_count();
  real *X1 = dev(NULL, rows * cin + 1), *W1 = dev(NULL, cout * cin + 1), *B1 = dev(NULL, cout + 1);
  real *Y1 = dev(NULL, rows * cout + 1);
  G->upload(X1 + 1, x, (size_t)rows * cin * sizeof *x);
  G->upload(W1 + 1, W, (size_t)cout * cin * sizeof *W);
  G->upload(B1 + 1, b, (size_t)cout * sizeof *b);
  nn_dense_forward(y, x, W, b, rows, cin, cout);
  G->dense_forward(Y1 + 1, X1 + 1, W1 + 1, B1 + 1, rows, cin, cout);
  cmp("dense_forward, unaligned (no cuBLASLt)", y, Y1 + 1, rows * cout, 1e-5);
  if (emu_lt_count() != lt0) printf("   FAIL: an unaligned bias went to cuBLASLt\n"), fails++;
}

static void test_norm(void) {
  int N = 50, dim = 5, C = 12;
  size_t n = (size_t)N * dim * C;
  real *x = rarr(n), *g = rarr(C), *be = rarr(C), *y = rarr(n), *sv = rarr(nn_norm_save_size(N, C));
  for (int i = 0; i < dim * C; i++)
    x[3 * dim * C + i] = 0; /* a node at the clamp */
  real *X = dev(x, n), *Gm = dev(g, C), *Be = dev(be, C), *Y = dev(NULL, n), *S = dev(NULL, nn_norm_save_size(N, C));
  nn_norm_forward(y, sv, x, g, be, N, dim, C);
  G->norm_forward(Y, S, X, Gm, Be, N, dim, C);
  cmp("norm_forward y", y, Y, n, 1e-5);
  cmp("norm_forward save", sv, S, nn_norm_save_size(N, C), 1e-5);
  real *dy = rarr(n), *dx = rarr(n), *dg = rarr(C), *db = rarr(C);
  real *DY = dev(dy, n), *DX = dev(NULL, n), *DG = dev(dg, C), *DB = dev(db, C);
  nn_norm_backward(dx, dg, db, dy, x, sv, g, be, N, dim, C);
  G->norm_backward(DX, DG, DB, DY, X, S, Gm, Be, N, dim, C);
  cmp("norm_backward dx", dx, DX, n, 1e-4);
  cmp("norm_backward dgamma", dg, DG, C, 1e-4);
  cmp("norm_backward dbeta", db, DB, C, 1e-4);
  /* in place: dx = dy */
  real *dy2 = copy_of(dy, n);
  nn_norm_backward(dy2, dg, db, dy2, x, sv, g, be, N, dim, C);
  G->norm_backward(DY, DG, DB, DY, X, S, Gm, Be, N, dim, C);
  cmp("norm_backward in place", dy2, DY, n, 1e-4);
}

static void test_radial(int E, int in, int H) {
  size_t np = nn_radial_params(in, H, 0), ns = nn_radial_save_size(E, H);
  real *x = rarr((size_t)E * in), *p = rarr(np), *sv = rarr(ns);
  struct nn_radial_offsets o = nn_radial_offsets(in, H, 0);
  for (int i = 0; i < H; i++)
    p[o.g1 + i] += 1, p[o.g2 + i] += 1;
  real *X = dev(x, (size_t)E * in), *P = dev(p, np), *S = dev(NULL, ns);
  nn_radial_hidden_forward(sv, x, p, E, in, H);
  G->radial_hidden_forward(S, X, P, E, in, H);
  char name[80];
  snprintf(name, sizeof name, "radial_hidden_forward E%d in%d H%d", E, in, H);
  cmp(name, sv, S, ns, 1e-4);
  real *ds2 = rarr((size_t)E * H), *dp = rarr(np), *dx = rarr((size_t)E * in);
  real *DS2 = dev(ds2, (size_t)E * H), *DP = dev(dp, np), *DX = dev(NULL, (size_t)E * in);
  nn_radial_hidden_backward(dx, dp, ds2, x, sv, p, E, in, H);
  G->radial_hidden_backward(DX, DP, DS2, X, S, P, E, in, H);
  snprintf(name, sizeof name, "radial_hidden_backward dx E%d", E);
  cmp(name, dx, DX, (size_t)E * in, 1e-4);
  snprintf(name, sizeof name, "radial_hidden_backward dparams E%d", E);
  cmp(name, dp, DP, np, 1e-4);
}

/* A random graph: N nodes, in-degrees 0..5, edges sorted by dst then src. */
struct graph {
  int N, E;
  int32_t *src, *in_start;
};
static void make_graph(struct graph *g, int N) {
  g->N = N;
  g->in_start = malloc((N + 1) * sizeof(int32_t));
  g->src = malloc((size_t)N * 6 * sizeof(int32_t));
  g->E = 0;
  for (int n = 0; n < N; n++) {
    g->in_start[n] = g->E;
    int deg = n % 7 == 3 ? 0 : (int)((rnd() + 1) * 3);
    for (int d = 0; d < deg; d++)
      g->src[g->E++] = (n + 1 + d * 3) % N;
  }
  g->in_start[N] = g->E;
}

static void test_attention(int with_w) {
  struct graph gr;
  make_graph(&gr, 40);
  int N = gr.N, E = gr.E, H = 2;
  struct nn_fiber fk = {{4, 2, 0, 2}}, fv = {{4, 4, 2, 0}};
  real *kv[4], *q[4], *z[4], *KV[4] = {0}, *Q[4] = {0}, *Z[4] = {0};
  size_t nkv[4], nq[4], nz[4];
  for (int d = 0; d < 4; d++) {
    nkv[d] = (size_t)E * NN_DIM(d) * (fk.ch[d] + fv.ch[d]);
    nq[d] = (size_t)N * NN_DIM(d) * fk.ch[d];
    nz[d] = (size_t)N * NN_DIM(d) * fv.ch[d];
    kv[d] = rarr(nkv[d]);
    q[d] = fk.ch[d] ? rarr(nq[d]) : NULL;
    z[d] = fv.ch[d] ? rarr(nz[d]) : NULL;
    KV[d] = dev(kv[d], nkv[d]);
    if (q[d]) Q[d] = dev(q[d], nq[d]);
    if (z[d]) Z[d] = dev(NULL, nz[d]);
  }
  real *w = rarr(E);
  for (int e = 0; e < E; e++)
    w[e] = e % 5 == 0 ? 0 : fabsf(w[e]);
  int32_t *IS = (int32_t *)G->alloc((N + 1) * 4);
  G->upload(IS, gr.in_start, (N + 1) * 4);
  real *W = dev(w, E);
  struct nn_attn_shape sc = {fk, fv, H, N, E, gr.in_start, with_w ? w : NULL};
  struct nn_attn_shape sg = {fk, fv, H, N, E, IS, with_w ? W : NULL};
  real *alpha = rarr((size_t)E * H), *AL = dev(NULL, (size_t)E * H);
  nn_attn_forward(z, alpha, &sc, (const real *const *)kv, (const real *const *)q);
  G->attn_forward(Z, AL, &sg, (const real *const *)KV, (const real *const *)Q);
  char name[80];
  snprintf(name, sizeof name, "attn_forward alpha%s", with_w ? " (w)" : "");
  cmp(name, alpha, AL, (size_t)E * H, 1e-5);
  for (int d = 0; d < 4; d++)
    if (z[d]) {
      snprintf(name, sizeof name, "attn_forward z[%d]%s", d, with_w ? " (w)" : "");
      cmp(name, z[d], Z[d], nz[d], 1e-5);
    }
  real *dz[4] = {0}, *DZ[4] = {0}, *dkv[4], *DKV[4], *dq[4] = {0}, *DQ[4] = {0};
  for (int d = 0; d < 4; d++) {
    if (fv.ch[d] && d != 1) { /* dz[1] NULL: counts as zero */
      dz[d] = rarr(nz[d]);
      DZ[d] = dev(dz[d], nz[d]);
    }
    dkv[d] = rarr(nkv[d]);
    DKV[d] = dev(NULL, nkv[d]);
    if (fk.ch[d]) {
      dq[d] = rarr(nq[d]);
      DQ[d] = dev(NULL, nq[d]);
    }
  }
  nn_attn_backward(dkv, dq, &sc, (const real *const *)dz, alpha, (const real *const *)kv, (const real *const *)q);
  G->attn_backward(DKV, DQ, &sg, (const real *const *)DZ, AL, (const real *const *)KV, (const real *const *)Q);
  for (int d = 0; d < 4; d++) {
    snprintf(name, sizeof name, "attn_backward dkv[%d]%s", d, with_w ? " (w)" : "");
    cmp(name, dkv[d], DKV[d], nkv[d], 1e-5);
    if (dq[d]) {
      snprintf(name, sizeof name, "attn_backward dq[%d]%s", d, with_w ? " (w)" : "");
      cmp(name, dq[d], DQ[d], nq[d], 1e-5);
    }
  }
}

static void test_pool(void) {
  int Gn = 5, C = 6;
  int32_t gs[6] = {0, 4, 4, 9, 10, 17};
  int N = gs[Gn];
  real *x = rarr((size_t)N * C);
  x[1 * C + 2] = x[2 * C + 2] = 5; /* a tie: the first node */
  real *X = dev(x, (size_t)N * C);
  int32_t *GS = (int32_t *)G->alloc(6 * 4);
  G->upload(GS, gs, 6 * 4);
  real *y = rarr((size_t)Gn * C), *Y = dev(NULL, (size_t)Gn * C);
  int32_t arg[30], *ARG = (int32_t *)G->alloc(30 * 4);
  nn_pool_max_forward(y, arg, x, gs, Gn, C);
  G->pool_max_forward(Y, ARG, X, GS, Gn, C);
  cmp("pool_max_forward", y, Y, (size_t)Gn * C, 0);
  cmpi("pool_max_forward arg", arg, ARG, (size_t)Gn * C);
  real *dy = rarr((size_t)Gn * C), *DY = dev(dy, (size_t)Gn * C), *dx = rarr((size_t)N * C),
       *DX = dev(NULL, (size_t)N * C);
  nn_pool_max_backward(dx, dy, arg, N, Gn, C);
  G->pool_max_backward(DX, DY, ARG, N, Gn, C);
  cmp("pool_max_backward", dx, DX, (size_t)N * C, 0);
  nn_pool_mean_forward(y, x, gs, Gn, C);
  G->pool_mean_forward(Y, X, GS, Gn, C);
  cmp("pool_mean_forward", y, Y, (size_t)Gn * C, 1e-6);
  nn_pool_mean_backward(dx, dy, gs, Gn, C);
  G->pool_mean_backward(DX, DY, GS, Gn, C);
  cmp("pool_mean_backward", dx, DX, (size_t)N * C, 0);
}

static void test_glue(void) {
  const struct nn_backend *C = nn_backend_cpu();
  size_t rows = 77;
  int a = 5, b = 3;
  real *x = rarr(rows * a), *y = rarr(rows * b), *o = rarr(rows * (a + b));
  real *X = dev(x, rows * a), *Y = dev(y, rows * b), *O = dev(NULL, rows * (a + b));
  C->concat_rows(o, x, a, y, b, rows);
  G->concat_rows(O, X, a, Y, b, rows);
  cmp("concat_rows", o, O, rows * (a + b), 0);
  real *in = rarr(rows * (a + b)), *IN = dev(in, rows * (a + b));
  C->split_rows(x, a, NULL, b, in, rows);
  G->split_rows(X, a, NULL, b, IN, rows);
  cmp("split_rows x (y NULL)", x, X, rows * a, 0);
  C->split_rows(x, a, y, b, in, rows);
  G->split_rows(X, a, Y, b, IN, rows);
  cmp("split_rows x", x, X, rows * a, 0);
  cmp("split_rows y", y, Y, rows * b, 0);
  size_t n = 1000;
  real *p = rarr(n), *q = rarr(n), *P = dev(p, n), *Q = dev(q, n);
  C->add(p, q, n);
  G->add(P, Q, n);
  cmp("add", p, P, n, 0);
  C->relu(p, q, n);
  G->relu(P, Q, n);
  cmp("relu", p, P, n, 0);
  real *r = rarr(n), *R = dev(r, n);
  C->relu_backward(r, q, n);
  G->relu_backward(R, Q, n);
  cmp("relu_backward", r, R, n, 0);
  int E = 60, ein = 4;
  real *ef = rarr((size_t)E * ein), *EF;
  for (int e = 0; e < E; e++)
    ef[e * ein + ein - 1] = (real)(3 * fabs(rnd()) + 0.5), ef[e * ein] = (real)(e % 3 == 0);
  EF = dev(ef, (size_t)E * ein);
  real *w = rarr(E), *Wd = dev(NULL, E);
  for (int kind = 0; kind < 3; kind++) {
    C->edge_weights(w, ef, E, ein, kind, (real)3.0, kind == 2);
    G->edge_weights(Wd, EF, E, ein, kind, (real)3.0, kind == 2);
    cmp("edge_weights", w, Wd, E, 1e-6);
  }
  real *s = rarr((size_t)E * 7), *S = dev(s, (size_t)E * 7);
  C->scale_rows(s, w, E, 7);
  G->scale_rows(S, Wd, E, 7);
  cmp("scale_rows", s, S, (size_t)E * 7, 0);
  C->scale(p, n, 0.37);
  G->scale(P, n, 0.37);
  cmp("scale", p, P, n, 0);
  size_t big = 20000;
  real *g = rarr(big), *Gd = dev(g, big);
  double s1 = C->sumsq(g, big), s2 = G->sumsq(Gd, big);
  printf("%-40s cpu %.12g gpu %.12g %s\n", "sumsq", s1, s2, fabs(s1 - s2) < 1e-9 * s1 ? "ok" : "FAIL");
  fails += !(fabs(s1 - s2) < 1e-9 * s1);
  real *pm = rarr(big), *m = rarr(big), *v = rarr(big);
  for (size_t i = 0; i < big; i++)
    v[i] = fabsf(v[i]);
  real *PM = dev(pm, big), *M = dev(m, big), *V = dev(v, big);
  struct nn_adam ad = {0.9, 0.999, 1e-8, 0.01, 1};
  for (int dec = 0; dec < 2; dec++) {
    ad.decoupled = dec;
    C->adam_step(pm, m, v, g, big, &ad, 3, 1e-3);
    G->adam_step(PM, M, V, Gd, big, &ad, 3, 1e-3);
    cmp("adam params", pm, PM, big, 0);
    cmp("adam m", m, M, big, 0);
    cmp("adam v", v, V, big, 0);
  }
}

/* The convolution: one shape, pooled or not. */
static void test_conv(const char *label, struct nn_fiber fin, struct nn_fiber fout, int plan_deg, int H, int N,
                      int pool) {
  struct basis_plan plan;
  basis_plan_init(&plan, plan_deg);
  struct graph gr;
  int empty = N < 0;
  if (empty) N = 9;
  make_graph(&gr, N);
  if (empty) {
    gr.E = 0;
    for (int n = 0; n <= N; n++)
      gr.in_start[n] = 0;
  }
  int E = gr.E;
  int32_t *SRC = (int32_t *)G->alloc((E + 1) * 4), *IS = (int32_t *)G->alloc((N + 1) * 4);
  G->upload(SRC, gr.src, E * 4);
  G->upload(IS, gr.in_start, (N + 1) * 4);
  real *basis = rarr((size_t)E * plan.per_edge), *BAS = dev(basis, (size_t)E * plan.per_edge);
  size_t Rt = nn_conv_radial_size(&fin, &fout);
  real *s2 = rarr((size_t)E * H), *W3 = rarr(Rt * H), *S2 = dev(s2, (size_t)E * H), *W3d = dev(W3, Rt * H);
  real *x[4] = {0}, *X[4] = {0}, *y[4] = {0}, *Y[4] = {0}, *dy[4] = {0}, *DY[4] = {0}, *dx[4] = {0}, *DX[4] = {0};
  size_t nx[4], ny[4];
  int rows = pool ? N : E;
  for (int d = 0; d < 4; d++) {
    nx[d] = (size_t)N * NN_DIM(d) * fin.ch[d];
    ny[d] = (size_t)rows * NN_DIM(d) * fout.ch[d];
    if (fin.ch[d]) {
      x[d] = rarr(nx[d]);
      X[d] = dev(x[d], nx[d]);
      dx[d] = rarr(nx[d]);
      DX[d] = dev(dx[d], nx[d]); /* poison-free but wrong: must be overwritten */
      G->upload(DX[d], dx[d], nx[d] * sizeof(real));
      for (size_t i = 0; i < nx[d]; i++)
        dx[d][i] = (real)1e30;
    }
    if (fout.ch[d]) {
      y[d] = rarr(ny[d]);
      Y[d] = dev(y[d], ny[d]);
      dy[d] = rarr(ny[d]);
      DY[d] = dev(dy[d], ny[d]);
    }
  }
  /* y of degrees beyond the plan stay as they were on both */
  struct nn_conv_shape sc = {fin, fout, &plan, N, E, gr.src, gr.in_start};
  struct nn_conv_shape sg = {fin, fout, &plan, N, E, SRC, IS};
  char name[160];
  if (nn_conv_forward(y, &sc, (const real *const *)x, basis, s2, W3, H, pool) ||
      G->conv_forward(Y, &sg, (const real *const *)X, BAS, S2, W3d, H, pool))
    printf("conv_forward failed\n"), fails++;
  for (int d = 0; d < 4; d++)
    if (y[d]) {
      snprintf(name, sizeof name, "conv %s%s y[%d]", label, pool ? " pooled" : "", d);
      cmp(name, y[d], Y[d], ny[d], 2e-5);
    }
  real *ds2 = rarr((size_t)E * H), *dW3 = rarr(Rt * H), *DS2 = dev(NULL, (size_t)E * H), *DW3 = dev(dW3, Rt * H);
  if (nn_conv_backward(dx, ds2, dW3, &sc, (const real *const *)dy, (const real *const *)x, basis, s2, W3, H, pool) ||
      G->conv_backward(DX, DS2, DW3, &sg, (const real *const *)DY, (const real *const *)X, BAS, S2, W3d, H, pool))
    printf("conv_backward failed\n"), fails++;
  for (int d = 0; d < 4; d++)
    if (dx[d] && d <= plan_deg) {
      snprintf(name, sizeof name, "conv %s%s dx[%d]", label, pool ? " pooled" : "", d);
      cmp(name, dx[d], DX[d], nx[d], 2e-5);
    }
  snprintf(name, sizeof name, "conv %s%s ds2", label, pool ? " pooled" : "");
  cmp(name, ds2, DS2, (size_t)E * H, 2e-5);
  snprintf(name, sizeof name, "conv %s%s dW3 (added)", label, pool ? " pooled" : "");
  cmp(name, dW3, DW3, Rt * H, 2e-5);
  /* only dW3 */
  G->conv_backward((real *const[4]){0}, NULL, DW3, &sg, (const real *const *)DY, (const real *const *)X, BAS, S2, W3d,
                   H, pool);
  nn_conv_backward((real *const[4]){0}, NULL, dW3, &sc, (const real *const *)dy, (const real *const *)x, basis, s2, W3,
                   H, pool);
  snprintf(name, sizeof name, "conv %s%s dW3 only", label, pool ? " pooled" : "");
  cmp(name, dW3, DW3, Rt * H, 2e-5);
  basis_plan_free(&plan);
}

/* The whole model on both backends. */
/* The bases inside a recorded step (a CUDA graph): their tables are loaded
 * by prepare_bases before it, never on first use inside the capture (a
 * cudaMalloc, a copy and a wait there, which a GPU refuses and this
 * emulator stops on: shown in a child). A plan not prepared spoils the
 * recording without a call to CUDA, and fails eagerly with its message.
 * max_degree 4: no other check uses it, so nothing loaded it before. */
static void record_an_alloc(void) {
  if (G->record_begin()) _exit(3);
  (void)G->alloc(1024); /* what the tables' first use did inside a capture */
  _exit(0);
}

static void test_bases_recorded(void) {
  struct basis_plan plan;
  char err[512];
  if (basis_plan_init(&plan, 4)) {
    printf("bases recorded: out of memory\n");
    fails++;
    return;
  }
  const int E = 5;
  size_t per = plan.per_edge;
  float rel[3 * 5] = {1, 2, 3, -0.5f, 0.25f, 2, 0, 0, 1.5f, 3, -1, 0.5f, -2, -2, 1};
  real *want = malloc(E * per * sizeof *want);
  float *one = malloc(per * sizeof *one);
  for (int e = 0; e < E; e++) {
    basis_edge(&plan, rel + 3 * e, one);
    for (size_t k = 0; k < per; k++)
      want[(size_t)e * per + k] = one[k];
  }
  float *drel = G->alloc(sizeof rel);
  real *out = G->alloc(E * per * sizeof(real));
  G->upload(drel, rel, sizeof rel);
  /* not prepared: the recording is refused, and nothing stopped the emulator */
  int bad = G->record_begin() != 0;
  int rc = G->bases(out, drel, E, &plan);
  void *rec = G->record_end();
  printf("%-40s bases %d, recording %s %s\n", "bases of a plan not prepared, recorded", rc, rec ? "made" : "refused",
         !bad && rc && !rec ? "ok" : "FAIL");
  fails += bad || !rc || rec;
  if (rec) G->record_free(rec);
  rc = G->bases(out, drel, E, &plan);
  int srj = G->sync(err, sizeof err);
  int named = srj && strstr(err, "tables of max_degree 4 were not loaded (prepare_bases)") != NULL;
  printf("%-40s %s %s\n", "bases of a plan not prepared, eager", srj ? err : "(no failure)", rc && named ? "ok" : "FAIL");
  fails += !rc || !named;
  /* prepared: recorded, and the replay computes them */
  if (G->prepare_bases(&plan, err, sizeof err)) {
    printf("prepare_bases: %s FAIL\n", err);
    fails++;
  } else if (G->record_begin()) {
    printf("record_begin refused after prepare_bases FAIL\n");
    fails++;
  } else {
    rc = G->bases(out, drel, E, &plan);
    rec = G->record_end();
    printf("%-40s bases %d, recording %s %s\n", "bases of a prepared plan, recorded", rc, rec ? "made" : "refused",
           !rc && rec ? "ok" : "FAIL");
    fails += rc || !rec;
    if (rec && G->replay(rec) == 0) cmp("bases recorded, replayed", want, out, (size_t)E * per, 1e-6);
    if (rec) G->record_free(rec);
  }
  if (G->sync(err, sizeof err)) printf("sync: %s FAIL\n", err), fails++;
  G->release(drel);
  G->release(out);
  free(want);
  free(one);
  basis_plan_free(&plan);
  /* the emulator stops a cudaMalloc issued while a capture is open */
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) dup2(devnull, 2); /* (its message: cuda_emu: cudaMalloc while a stream capture is open ...) */
    record_an_alloc();
  }
  int status = 0;
  waitpid(pid, &status, 0);
  int stopped = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
  printf("%-40s %s %s\n", "an allocation while recording", stopped ? "stops the emulator" : "went through",
         stopped ? "ok" : "FAIL");
  fails += !stopped;
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
      if (s == t) continue;
      float d[3] = {pos[t][0] - pos[s][0], pos[t][1] - pos[s][1], pos[t][2] - pos[s][2]};
      float r = sqrtf(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
      if (r > cut) continue;
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

static void test_model(int low_memory, int envelope, int degrees, int channels) {
  struct se3_config c = small_config(degrees, channels, envelope, 2, envelope ? SE3_ENVELOPE_POLY : 0);
  char err[512];
  struct se3_net *nc = se3_net_create(nn_backend_cpu(), &c, low_memory, err, sizeof err);
  struct se3_net *ng = se3_net_create(G, &c, low_memory, err, sizeof err);
  if (!nc || !ng) {
    printf("net: %s\n", err);
    fails++;
    return;
  }
  se3_net_init_params(nc, 7);
  se3_net_init_params(ng, 7);
  const struct se3_model *m = se3_net_model(nc);
  struct se3_batch_buf bb;
  se3_batch_buf_init(&bb, c.node_in, c.edge_in);
  for (int mol = 0; mol < 3; mol++)
    add_molecule(&bb, 5 + 3 * mol, 2.0, 3.2f);
  se3_batch_bases(&bb, &m->plan);
  const struct se3_batch *b = &bb.b;
  real outc[16], outg[16];
  if (se3_net_forward(nc, b, outc, 1, err, sizeof err) || se3_net_forward(ng, b, outg, 1, err, sizeof err)) {
    printf("forward: %s\n", err);
    fails++;
    return;
  }
  char name[120];
  snprintf(name, sizeof name, "model forward (N %d E %d) lowmem %d env %d", b->N, b->E, low_memory, envelope);
  real *og = dev(outg, b->G * c.outputs);
  cmp(name, outc, og, b->G * c.outputs, 1e-4);
  real dout[16];
  for (int i = 0; i < b->G * c.outputs; i++)
    dout[i] = (real)rnd();
  if (se3_net_backward(nc, dout, err, sizeof err)) {
    printf("backward: %s\n", err);
    fails++;
    return;
  }
  size_t np = se3_net_n_params(nc);
  real *gc = malloc(np * sizeof *gc), *gg = malloc(np * sizeof *gg);
  se3_net_get(nc, SE3_NET_GRAD, gc);
  /* fp16: the device's gradient of the loss scaled as training scales it
   * (stages/train.c, models/objective.h), from 2^16 and halved while the
   * gradient overflows fp16's range, so small gradients survive */
  double ls = G->precision == NN_PREC_FP16 ? NN_LOSS_SCALE_INIT : 1;
  for (;;) {
    real doutg[16];
    for (int i = 0; i < b->G * c.outputs; i++)
      doutg[i] = (real)(dout[i] * ls);
    if (se3_net_backward(ng, doutg, err, sizeof err)) {
      printf("backward: %s\n", err);
      fails++;
      return;
    }
    se3_net_get(ng, SE3_NET_GRAD, gg);
    size_t bad = 0;
    for (size_t i = 0; i < np; i++)
      bad += !isfinite(gg[i]);
    if (!bad || ls <= 1) break;
    printf("%-40s loss scale %g: %zu of %zu gradient entries not finite: halved\n", "model backward", ls, bad, np);
    ls /= 2;
    if (se3_net_forward(ng, b, outg, 1, err, sizeof err)) { /* the backward used the tape up */
      printf("forward: %s\n", err);
      fails++;
      return;
    }
  }
  for (size_t i = 0; ls != 1 && i < np; i++)
    gg[i] = (real)(gg[i] / ls);
  real *GG = dev(gg, np);
  snprintf(name, sizeof name, "model gradient (%zu params)", np);
  cmp(name, gc, GG, np, 2e-4);
  double n1 = se3_net_clip(nc, 0.5), n2 = se3_net_unscale_clip(ng, ls, 0.5);
  int norm_ok = fabs(n1 - n2) < 1e-4 * tol_scale * n1;
  printf("%-40s cpu %.9g gpu %.9g %s\n", "model grad norm", n1, n2, norm_ok ? "ok" : "FAIL");
  fails += !norm_ok;
  struct nn_adam o = {0.9, 0.999, 1e-8, 0.0, 1};
  se3_net_adam(nc, &o, 1, 1e-3);
  se3_net_adam(ng, &o, 1, 1e-3);
  se3_net_get(nc, SE3_NET_PARAMS, gc);
  se3_net_get(ng, SE3_NET_PARAMS, gg);
  G->upload(GG, gg, np * sizeof *gg);
  cmp("model params after a step", gc, GG, np, 1e-4);
  if (G->sync(err, sizeof err)) printf("sync: %s\n", err), fails++;
  se3_net_free(nc);
  se3_net_free(ng);
  se3_batch_buf_free(&bb);
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
  char err[512];
  const struct nn_backend *h = nn_backend_cuda_open(0, 0, NN_PREC_FP16, err, sizeof err);
  if (!h) {
    printf("fp16: %s FAIL\n", err);
    fails++;
    return;
  }
  struct se3_config c = small_config(3, 8, 1, 1, SE3_ENVELOPE_POLY);
  struct se3_net *net[3];
  const enum se3_steps how[3] = {SE3_STEPS_RECORDED, SE3_STEPS_PADDED, SE3_STEPS_PLAIN};
  for (int k = 0; k < 3; k++) {
    if (!(net[k] = se3_net_create(h, &c, 0, err, sizeof err))) {
      printf("net: %s FAIL\n", err);
      fails++;
      return;
    }
    se3_net_init_params(net[k], 11);
    se3_net_set_steps(net[k], how[k]);
    se3_net_set_loss_sum(net[k], 0);
  }
  struct se3_batch_buf bb[2];
  for (int i = 0; i < 2; i++) {
    se3_batch_buf_init(&bb[i], c.node_in, c.edge_in);
    for (int mol = 0; mol < 2 + i; mol++)
      add_molecule(&bb[i], 4 + 2 * mol + i, 1.5, 2.9f);
    se3_batch_geometry(&bb[i]); /* (the bases computed on the device, as the stages send a batch) */
  }
  size_t np = se3_net_n_params(net[0]);
  real *before = malloc(np * sizeof *before), *after = malloc(np * sizeof *after), *other = malloc(np * sizeof *other);
  struct nn_adam o = {0.9, 0.999, 1e-8, 0.01, 1};
  long taken = 0;
  int bad_norm = 0, bad_skip = 0;
  for (int s = 1; s <= 8; s++) {
    int i = s % 2;
    real y[4] = {0.5f, -0.25f, 1.0f, 0.0f};
    struct se3_loss_spec ls = {NN_LOSS_MSE, 1.0, bb[i].b.G, bb[i].b.G, s == 1 || s == 5 ? 1e39 : 1024};
    se3_net_get(net[0], SE3_NET_PARAMS, before);
    double norm[3];
    for (int k = 0; k < 3; k++)
      if (se3_net_train_step(net[k], &bb[i].b, y, &ls, 0.5, &o, taken + 1, 1e-3, err, sizeof err) ||
          se3_net_step_norm(net[k], &norm[k], err, sizeof err)) {
        printf("fp16 step %d: %s FAIL\n", s, err);
        fails++;
        return;
      }
    int overflow = s == 1 || s == 5;
    bad_norm += memcmp(&norm[0], &norm[1], sizeof norm[0]) != 0;
    for (int k = 0; k < 3; k++)
      bad_norm += (!isfinite(norm[k])) != overflow;
    se3_net_get(net[0], SE3_NET_PARAMS, after);
    if (overflow) bad_skip += memcmp(before, after, np * sizeof *after) != 0;
    taken += isfinite(norm[0]) != 0;
  }
  se3_net_get(net[1], SE3_NET_PARAMS, other);
  size_t differ = 0;
  for (size_t j = 0; j < np; j++)
    differ += memcmp(&after[j], &other[j], sizeof after[j]) != 0;
  struct se3_step_stats st;
  se3_net_step_stats(net[0], &st);
  int ok = !bad_norm && !bad_skip && !differ && taken == 6 && st.recorded >= 3 && st.replayed >= 4 && !st.refused;
  printf("%-40s %ld eager, %ld recorded, %ld replayed; norms off %d, skips off %d, %zu of %zu params differ %s\n",
         "fp16 loss-scaled steps recorded", st.eager, st.recorded, st.replayed, bad_norm, bad_skip, differ, np,
         ok ? "ok" : "FAIL");
  fails += !ok;
  for (int k = 0; k < 3; k++)
    se3_net_free(net[k]);
  for (int i = 0; i < 2; i++)
    se3_batch_buf_free(&bb[i]);
  free(before), free(after), free(other);
  if (h->sync(err, sizeof err)) printf("sync: %s FAIL\n", err), fails++;
  G = nn_backend_cuda_open(0, 0, back, err, sizeof err); /* (the same table, switched back) */
}

/* ---- which GPU a process opens ---- */

/* In a child that sees `devices` GPUs: opens by_rank ? the GPU of local rank
 * `index` : cuda:`index` (twice, then the other way: `again_*`, -1 for
 * none), and writes what it got ("cuda:K" or "refused: ...", a line each)
 * into out. */
static void open_in_child(int devices, int index, int by_rank, int again_index, int again_by_rank, char *out,
                          size_t len) {
  int fd[2];
  out[0] = 0;
  if (pipe(fd)) {
    snprintf(out, len, "pipe failed");
    return;
  }
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    char v[16], err[512], line[640];
    snprintf(v, sizeof v, "%d", devices);
    setenv("EMU_DEVICES", v, 1);
    for (int k = 0; k < 2; k++) {
      int i = k ? again_index : index, r = k ? again_by_rank : by_rank;
      if (i < 0) break;
      const struct nn_backend *be = nn_backend_cuda_open(i, r, NN_PREC_FP32, err, sizeof err);
      if (be)
        snprintf(line, sizeof line, "%s\n", be->name);
      else
        snprintf(line, sizeof line, "refused: %s\n", err);
      size_t n = strlen(line);
      if (write(fd[1], line, n) != (ssize_t)n) _exit(2);
    }
    _exit(0);
  }
  close(fd[1]);
  size_t got = 0;
  ssize_t r;
  while (got + 1 < len && (r = read(fd[0], out + got, len - 1 - got)) > 0)
    got += (size_t)r;
  out[got] = 0;
  close(fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status)) snprintf(out + got, len - got, "(the child failed)");
}

static int device_case(const char *what, int devices, int index, int by_rank, int again_index, int again_by_rank,
                       const char *want1, const char *want2) {
  char out[2048];
  open_in_child(devices, index, by_rank, again_index, again_by_rank, out, sizeof out);
  char *nl = strchr(out, '\n'), *second = nl ? nl + 1 : out + strlen(out);
  int ok = nl && !strncmp(out, want1, strlen(want1)) && (!want2 || !strncmp(second, want2, strlen(want2)));
  for (char *p = out; (p = strchr(p, '\n')) != NULL;)
    *p = ' ';
  printf("%-58s %s %s\n", what, out, ok ? "ok" : "FAIL");
  if (!ok) printf("   FAIL: expected '%s...'%s%s\n", want1, want2 ? ", then '" : "", want2 ? want2 : "");
  return !ok;
}

static int check_devices(void) {
  int bad = 0;
  bad += device_case("1 GPU seen, local rank 1 (--gpus-per-task=1)", 1, 1, 1, -1, 0, "cuda:0", NULL);
  bad += device_case("1 GPU seen, local rank 3", 1, 3, 1, -1, 0, "cuda:0", NULL);
  bad += device_case("1 GPU seen, cuda:1 asked for", 1, 1, 0, -1, 0,
                     "refused: GPU 1 asked for, 1 found (cuda:0); set device: cuda:0, or set device: cpu", NULL);
  bad += device_case("2 GPUs seen, local rank 3", 2, 3, 1, -1, 0, "cuda:1", NULL);
  bad += device_case("4 GPUs seen, local rank 2 (the node's GPUs, all seen)", 4, 2, 1, -1, 0, "cuda:2", NULL);
  bad += device_case("2 GPUs seen, cuda:1 asked for", 2, 1, 0, -1, 0, "cuda:1", NULL);
  bad += device_case("2 GPUs seen, cuda:2 asked for", 2, 2, 0, -1, 0,
                     "refused: GPU 2 asked for, 2 found (cuda:0 .. cuda:1)", NULL);
  bad += device_case("no GPU seen, local rank 0", 0, 0, 1, -1, 0, "refused: no GPU: the CUDA driver found none", NULL);
  bad += device_case("1 GPU seen, rank 1 opens it, then rank 1 again", 1, 1, 1, 1, 1, "cuda:0", "cuda:0");
  bad += device_case("1 GPU seen, rank 1 opens it, then cuda:1", 1, 1, 1, 1, 0, "cuda:0",
                     "refused: this process already drives GPU 0");
  printf("%s: %d failures\n", bad ? "FAILED" : "ALL OK", bad);
  return bad != 0;
}

int main(int argc, char **argv) {
  char err[512];
  if (argc > 1 && !strcmp(argv[1], "devices")) return check_devices();
  const char *prec = argc > 1 ? argv[1] : "fp32";
  enum nn_precision p = NN_PREC_FP32;
  if (nn_precision_parse(prec, &p)) {
    printf("usage: check [fp32|tf32|bf16|fp16] | check devices\n");
    return 2;
  }
  /* products with inputs rounded to 10 (tf32, fp16) or 7 (bf16) significand
   * bits: bf16's unit round-off is 8 times tf32's */
  tol_scale = p == NN_PREC_TF32 || p == NN_PREC_FP16 ? 200 : p == NN_PREC_BF16 ? 1600 : 1;
  G = nn_backend_cuda_open(0, 0, NN_PREC_FP32, err, sizeof err);
  if (!G) {
    printf("open: %s\n", err);
    return 1;
  }
  printf("backend %s on %s\n", G->name, G->device);
  if (nn_backend_cuda_open(1, 0, NN_PREC_FP32, err, sizeof err) == NULL) printf("second GPU refused: %s\n", err);
  G = nn_backend_cuda_open(0, 0, p, err, sizeof err);
  printf("precision %s (tolerances x %g)\n", prec, tol_scale);
  /* EMU_CONV=gemm: the convolution's GEMM path (backend.h's set_conv_gemm) */
  const char *conv = getenv("EMU_CONV");
  if (conv && !strcmp(conv, "gemm")) G->set_conv_gemm(1);
  printf("convolution: %s\n", conv && !strcmp(conv, "gemm") ? "gemm" : "direct");
  /* EMU_CHECK: the groups to run (default all): ops (every operation of
   * the table, the convolution in its shapes), model (two small models'
   * forward, backward, norm and Adam step), deg4 (a third model: degree 4,
   * 16 channels), steps (fp16's loss-scaled steps recorded, padded and plain:
   * in fp16 whatever the table's precision, the slowest group) */
  const char *only = getenv("EMU_CHECK");
  int ran = 0;
#define RUN(group, call)                                                                                               \
  do {                                                                                                                 \
    if (!only || strstr(only, group)) {                                                                                \
      ran++;                                                                                                           \
      call;                                                                                                            \
      lap(#call);                                                                                                      \
    }                                                                                                                  \
  } while (0)
  if (only) printf("groups: %s (EMU_CHECK)\n", only);
  t_last = now();
  RUN("ops", test_gemm());
  RUN("ops", test_norm());
  RUN("ops", test_radial(300, 6, 10));
  RUN("ops", test_radial(70, 4, 32));
  RUN("ops", test_attention(0));
  RUN("ops", test_attention(1));
  RUN("ops", test_pool());
  RUN("ops", test_bases_recorded());
  RUN("ops", test_glue());
  struct nn_fiber q4 = {{32, 32, 32, 32}};
  RUN("ops", test_conv("qm9-like", q4, q4, 3, 32, 12, 0));
  struct nn_fiber f1 = {{5, 0, 3, 0}}, f2 = {{7, 40, 0, 2}};
  RUN("ops", test_conv("odd H40", f1, f2, 3, 40, 17, 0));
  RUN("ops", test_conv("odd H40", f1, f2, 3, 40, 17, 1));
  struct nn_fiber f3 = {{6, 0, 4}}, f4 = {{0, 5, 3}};
  RUN("ops", test_conv("gaps", f3, f4, 2, 8, 15, 0));
  RUN("ops", test_conv("gaps", f3, f4, 2, 8, 15, 1));
  RUN("ops", test_conv("no edges", f3, f4, 2, 8, -1, 0));
  RUN("ops", test_conv("no edges", f3, f4, 2, 8, -1, 1));
  struct nn_fiber f5 = {{8, 8}}, f6 = {{16}};
  RUN("ops", test_conv("final", f5, f6, 1, 8, 21, 1));
  RUN("model", test_model(0, 1, 3, 8));
  RUN("model", test_model(1, 0, 3, 8));
  RUN("deg4", test_model(0, 1, 4, 16));
  RUN("steps", test_scaled_steps(p));
#undef RUN
  if (!ran) printf("EMU_CHECK=%s: no group of ops, model, deg4, steps: FAIL\n", only), fails++;
  if (G->sync(err, sizeof err)) printf("sync: %s\n", err), fails++;
  const char *lt = getenv("EMU_LT");
  long nlt = emu_lt_count();
  printf("dense forwards with the bias in cuBLASLt's epilogue: %ld%s\n", nlt,
         lt && !strcmp(lt, "0") ? " (EMU_LT=0)" : "");
  if ((nlt == 0) != (lt && !strcmp(lt, "0"))) printf("   FAIL: expected %s\n", nlt ? "none" : "some"), fails++;
  printf("%s: %d failures\n", fails ? "FAILED" : "ALL OK", fails);
  return fails != 0;
}
