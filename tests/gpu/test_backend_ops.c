/* test_backend_ops.c — every operation of a backend table (models/backend.h)
 * against the CPU, shape by shape, in the spirit of ggml's test-backend-ops.
 *
 *   test_backend_ops cpu|cuda|cuda:N [--precision fp32|tf32|bf16|fp16] [--conv direct|gemm|fused] [--grad] [--quick]
 *
 * --conv: the convolution's path on a GPU (backend.h's set_conv_path; the
 * workflow's `gpu_conv:`): every case runs on the table switched to it.
 *
 * Without a GPU, dev/cuda_emu/run.sh builds this file with SE3_OPS_LINKED
 * against the CUDA backend's objects compiled for its emulator (cuda then
 * opens them, not the module) and runs the table on the emulated GPU
 * (test_cuda_emu: fp32 on the direct convolution, bf16 on the GEMM path,
 * the convolutions on the fused path in each precision).
 * There --quick runs the entries flagged BIG, the convolutions of qm9's
 * widths and the 40-wide one (three quarters of the table's time under the
 * emulator, which runs a block's threads one after another), on the small
 * graph (6 nodes) instead of the big one (24): every operation and every
 * shape's channels, degrees and flags still run, on fewer edges.
 *
 * The cases are one table (CASES, at the end): an entry per operation and
 * shape gives the tolerance class of its outputs and the builder that draws
 * its inputs (random host arrays from fixed seeds), computes the expected
 * result on the host (the CPU functions of models/cpu/nn.h for the layers
 * with real arithmetic in them: norm, radial network, convolution,
 * attention; plain loops in double for the linear and dense layers,
 * pooling, the glue, Adam, sumsq, scale, the loss and the clipping) and
 * declares the backend's buffers; the engine (op_engine.h) uploads the
 * inputs, makes the call through the table and downloads the outputs. A
 * forward and its backward share a builder; an entry marked SAME draws the
 * inputs of the entry before it again (a backward those of its forward).
 * A new shape is one entry; a new operation, its entries and at most one
 * builder.
 *
 * Each operation runs twice on the backend:
 *   run 1  outputs a backward ADDS to (parameter gradients) start from
 *          random non-zero values P (the expected result starts from them
 *          too); outputs it OVERWRITES start as NaN;
 *   run 2  added-to outputs start from 0, overwritten ones from 777.
 * Run 1 must match the expected values; run 2 must give run 1's values
 * (overwritten outputs) or run 1's minus P (added-to ones). So a backend
 * that overwrites a gradient it should add to, adds to one it should
 * overwrite, or leaves part of an output unwritten fails, even where the
 * reference is the CPU table itself. Every device buffer has 16 guard
 * elements after it that must come back unchanged (no write past the end),
 * and every input must come back unchanged.
 *
 * Tolerance classes (op_engine.h's tol_of):
 *   EXACT   data movement: copies, concat, split, relu and its backward,
 *           max pooling, allreduce;
 *   T_SUM   a sum of products: each element's error divided by the sum of
 *           the absolute values of its terms (the same formula on absolute
 *           values); 1e-5 for fp32, 2e-3 for tf32 and fp16, 1.6e-2 for
 *           bf16. Adam is compared relative to |p| + lr (|m| + |g|, v + g^2),
 *           the envelope weights absolutely;
 *   T_MAG   the layers with normalisations and softmax in them (norm, radial
 *           network, attention weights and gradients): divided by |expected|
 *           + the root mean square of the output; 5e-5 (fp32), 2e-2 (tf32,
 *           fp16) or 8e-2 (bf16);
 *   T_REAL  the loss's gradient and the clipped gradient, computed in double
 *           on both sides: 1e-6 (their doubles: the loss 1e-12, the sum of
 *           squares and norm 1e-9);
 *   T_BASIS the bases: 2.5e-7 over |value| + 1e-6;
 *   T_DBL   sumsq, which backend.h says is summed in double: 1e-9 relative.
 * One line per operation and shape, then a summary.
 *
 * The gradient mode (--grad; the double build, test_backend_ops_f64, where
 * real is double): each entry flagged FD, the backwards (linear, dense,
 * norm, radial network, convolution, attention, both poolings, relu),
 * scale_rows (its own backward) and the loss, is checked at its shape
 * against central differences of its forward instead (op_engine.h): for
 * each input x a backward differentiates, <dL/dx, v> along a random v
 * against (L(x + hv) - L(x - hv)) / 2h, L = <forward's outputs, random w>,
 * to 1e-6 of sum |dL/dx_k v_k|. The other operations have no derivative in
 * the table (edge_weights, bases) or are exact copies (concat, split).
 *
 * Exit status: 0 all passed, 1 some failed, 77 the backend cannot be opened
 * (this build has no CUDA backend or no GPU: reported as skipped, never as
 * passed), 2 bad arguments (or --grad without the double build).
 */
#include "tests/gpu/op_engine.h"

#include "models/cpu/table.h"
#include "models/device.h"
#include "models/basis.h"
#include "models/cpu/nn.h"
#include "models/cpu/optim.h"
#include "models/kernels/adam.h"
#ifdef SE3_OPS_LINKED /* dev/cuda_emu/run.sh's build: the CUDA backend's objects linked in, no module */
#include "models/cuda/table.h"
#endif

#define SKIP_CODE 77

/* the builders' flags (op_engine.h has FD and SHIFT) */
enum {
  BIAS = 1 << 2,   /* dense: a bias */
  NO_DX = 1 << 3,  /* dx NULL */
  NO_DB = 1 << 4,  /* dense: db NULL */
  POOL = 1 << 5,   /* conv: pooled onto the nodes */
  NO_DX1 = 1 << 6, /* conv: dx of degree 1 NULL */
  NO_DS2 = 1 << 7,
  NO_DW3 = 1 << 8,
  W = 1 << 9,       /* attention: edge weights */
  NO_DZ1 = 1 << 10, /* attention: dz of degree 1 NULL */
  NO_DQ = 1 << 11,
  NO_X = 1 << 12,     /* split: x NULL */
  NO_Y = 1 << 13,     /* split: y NULL */
  DX_IS_DY = 1 << 14, /* norm: the backward in place, dx the same array as dy */
  BIG = 1 << 15,      /* conv: on the small graph with --quick */
};
static int QUICK; /* --quick */

static int backward(const struct op_case *c) { return strstr(c->op, "_backward") != NULL; }

#define CHECK_RC(name, call)                                                                                           \
  do {                                                                                                                 \
    int rc_ = (call);                                                                                                  \
    if (rc_) why(name " returned %d", rc_);                                                                            \
  } while (0)

/* ---- graphs ------------------------------------------------------------------ */

struct tgraph {
  int N, E;
  int32_t *src, *in_start;
  float *rel;  /* E x 3 */
  real *basis; /* E x plan.per_edge */
  const char *what;
};

/* The bases' plans of max degree 1..NN_MAX_DEG (the convolution's n[2];
 * the model's is NN_MAX_DEG), made in main. */
static struct basis_plan PLANS[NN_MAX_DEG + 1];

/* The graphs of the cases: N nodes, each with 1..maxdeg incoming edges from
 * distinct other nodes (sorted by source), except node `none` (-1: every
 * node has some), which has none; maxdeg 0: no edges at all. */
enum { G_BIG, G_SMALL, G_NONE, G_ONE };
static const struct {
  const char *what;
  int N, maxdeg, none;
} GRAPHS[] = {{"big", 24, 6, 5}, {"small", 6, 3, 1}, {"no-edges", 3, 0, -1}, {"one-atom", 1, 0, -1}};

/* Built in the case's host memory (freed with it), with each edge's basis
 * of plan p. */
static void graph_make(struct tgraph *g, int kind, const struct basis_plan *p) {
  int N = GRAPHS[kind].N, maxdeg = GRAPHS[kind].maxdeg, none = GRAPHS[kind].none;
  g->N = N;
  g->what = GRAPHS[kind].what;
  int cap = N * (maxdeg < N - 1 ? maxdeg : N - 1) + 1;
  g->src = ivec((size_t)cap);
  g->in_start = ivec((size_t)N + 1);
  g->rel = hmem((size_t)cap * 3 * sizeof(float));
  g->E = 0;
  for (int n = 0; n < N; n++) {
    g->in_start[n] = g->E;
    int deg = n == none || maxdeg == 0 || N < 2 ? 0 : 1 + irand(maxdeg);
    if (deg > N - 1) deg = N - 1;
    int first = irand(N), k = 0;
    int32_t pick[64];
    for (int j = 0; k < deg; j++) {
      int src = (first + j) % N;
      if (src != n) pick[k++] = src;
    }
    for (int a = 1; a < k; a++) /* ascending sources */
      for (int b = a; b > 0 && pick[b - 1] > pick[b]; b--) {
        int32_t t = pick[b];
        pick[b] = pick[b - 1];
        pick[b - 1] = t;
      }
    for (int j = 0; j < k; j++) {
      g->src[g->E] = pick[j];
      double r = uni(0.8, 3.0), v[3], nv = 0;
      for (int a = 0; a < 3; a++) {
        v[a] = uni(-1, 1);
        nv += v[a] * v[a];
      }
      nv = sqrt(nv) + 1e-9;
      for (int a = 0; a < 3; a++)
        g->rel[3 * g->E + a] = (float)(r * v[a] / nv);
      g->E++;
    }
  }
  g->in_start[N] = g->E;
  g->basis = hvec((size_t)g->E * p->per_edge + 1);
  float *b = hmem(p->per_edge * sizeof(float));
  for (int e = 0; e < g->E; e++) {
    basis_edge(p, g->rel + 3 * e, b);
    for (size_t i = 0; i < p->per_edge; i++)
      g->basis[(size_t)e * p->per_edge + i] = b[i];
  }
}

static void fiber_str(char *out, size_t n, const struct nn_fiber *f) {
  snprintf(out, n, "%d,%d,%d,%d", f->ch[0], f->ch[1], f->ch[2], f->ch[3]);
}

static const char *const X_NAME[] = {"x0", "x1", "x2", "x3"}, *const Y_NAME[] = {"y0", "y1", "y2", "y3"};
static const char *const DX_NAME[] = {"dx0", "dx1", "dx2", "dx3"}, *const DY_NAME[] = {"dy0", "dy1", "dy2", "dy3"};

/* ---- the table itself and memory ------------------------------------------------------ */

/* Every operation of struct nn_backend. */
/* clang-format off */
#define NN_OPS(X)                                                                                                      \
  X(alloc) X(release) X(upload) X(download) X(copy) X(zero) X(sync) X(host_alloc) X(host_release)                    \
  X(download_queued) X(fence_new) X(fence_mark) X(fence_wait) X(fence_free)                                            \
  X(linear_forward) X(linear_backward) X(norm_forward) X(norm_backward) X(dense_forward) X(dense_backward)             \
  X(radial_hidden_forward) X(radial_hidden_backward) X(conv_forward) X(conv_backward) X(attn_forward)                  \
  X(attn_backward) X(scale_rows) X(pool_max_forward) X(pool_max_backward) X(pool_mean_forward) X(pool_mean_backward)   \
  X(concat_rows) X(split_rows) X(add) X(relu) X(relu_backward) X(bases) X(edge_weights)                                         \
  X(adam_step) X(adam_step_at) X(sumsq) X(scale) X(loss) X(sumsq_to) X(clip) X(add_f64) X(allreduce)
/* clang-format on */

static void b_table(const struct op_case *c) {
  char missing[512] = "";
  int n_missing = 0;
#define X(op)                                                                                                          \
  if (!BE->op) {                                                                                                       \
    n_missing++;                                                                                                       \
    strncat(missing, " " #op, sizeof missing - strlen(missing) - 1);                                                   \
  }
  NN_OPS(X)
#undef X
  char msg[600];
  snprintf(msg, sizeof msg, "missing:%s", missing);
  report(c->op, "every operation filled in", n_missing == 0, n_missing, 0, msg);
  if (n_missing) {
    printf("%d passed, %d failed (%s): cannot go on with a table that has holes\n", n_pass, n_fail, BE->name);
    exit(1);
  }
  int named = BE->name && BE->name[0] && BE->device[0];
  report(c->op, "name and device set", named, !named, 0, "empty name or device");
  snprintf(msg, sizeof msg, "precision %d, %d asked for", (int)BE->precision, (int)PREC);
  report(c->op, "precision as asked", BE->precision == PREC, BE->precision != PREC, 0, msg);
}

static void b_memory(const struct op_case *c) {
  (void)c;
  const size_t n = 1000;
  real *a = hrand(n, -1, 1), *b = hrand(n, -1, 1), *back = hvec(n);
  real *da = BE->alloc(n * sizeof(real)), *db = BE->alloc(n * sizeof(real));
  void *one = BE->alloc(1), *big = BE->alloc((size_t)3 << 20);
  int aligned = da && db && one && big && !((uintptr_t)da % 256) && !((uintptr_t)db % 256) && !((uintptr_t)one % 256) &&
                !((uintptr_t)big % 256);
  report("alloc", "1, 4000 and 3 MiB bytes: 256-byte aligned", aligned, !aligned, 0, "NULL or misaligned");
  if (!da || !db || !one || !big) exit(1);

  BE->upload(da, a, n * sizeof(real));
  BE->download(back, da, n * sizeof(real));
  int same = !memcmp(a, back, n * sizeof(real));
  report("upload/download", "1000 reals round trip", same, !same, 0, "the values came back changed");

  /* a part of a buffer, at an offset, both ways */
  BE->upload(db, b, n * sizeof(real));
  BE->upload(db + 10, a + 500, 20 * sizeof(real));
  BE->download(back, db, n * sizeof(real));
  int ok = !memcmp(back, b, 10 * sizeof(real)) && !memcmp(back + 10, a + 500, 20 * sizeof(real)) &&
           !memcmp(back + 30, b + 30, (n - 30) * sizeof(real));
  real part[7];
  BE->download(part, da + 123, sizeof part);
  ok = ok && !memcmp(part, a + 123, sizeof part);
  report("upload/download", "at offsets: 20 reals at +10, 7 reals from +123", ok, !ok, 0, "wrong values");

  /* copy: 7 reals from a + 5 to b + 3, the rest of b untouched */
  BE->upload(db, b, n * sizeof(real));
  BE->copy(db + 3, da + 5, 7 * sizeof(real));
  BE->download(back, db, n * sizeof(real));
  ok = !memcmp(back, b, 3 * sizeof(real)) && !memcmp(back + 3, a + 5, 7 * sizeof(real)) &&
       !memcmp(back + 10, b + 10, (n - 10) * sizeof(real));
  BE->copy(db, da, n * sizeof(real));
  BE->download(back, db, n * sizeof(real));
  ok = ok && !memcmp(back, a, n * sizeof(real));
  BE->copy(db, da, 0);
  BE->download(back, db, n * sizeof(real));
  ok = ok && !memcmp(back, a, n * sizeof(real));
  report("copy", "7 reals +5 -> +3, whole buffer, 0 bytes", ok, !ok, 0, "wrong values");

  /* zero: reals 2..6 only; then 0 bytes */
  BE->upload(db, b, n * sizeof(real));
  BE->zero(db + 2, 5 * sizeof(real));
  BE->zero(db, 0);
  BE->download(back, db, n * sizeof(real));
  ok = !memcmp(back, b, 2 * sizeof(real)) && !memcmp(back + 7, b + 7, (n - 7) * sizeof(real));
  for (int i = 2; i < 7; i++)
    ok = ok && back[i] == 0;
  report("zero", "5 reals at +2, then 0 bytes", ok, !ok, 0, "wrong values");

  struct se3_error err;
  se3_error_clear(&err);
  int rc = BE->sync(&err);
  report("sync", "after the copies", rc == 0, rc != 0, 0, rc ? se3_error_str(&err).s : "");
  BE->release(NULL);
  BE->release(da);
  BE->release(db);
  BE->release(one);
  BE->release(big);
}

/* ---- linear and dense: n = {rows, in, out}; BIAS, NO_DX, NO_DB --------------------------- */

/* Linear (bias 0) and dense against loops in double; scales are the sums of
 * |terms|. The backward on fresh inputs, drawn after the forward's. */
static void b_mm(const struct op_case *c) {
  int dense = !strncmp(c->op, "dense", 5), rows = c->n[0], in = c->n[1], out = c->n[2];
  int with_b = !!(c->fl & BIAS), with_dx = !(c->fl & NO_DX), with_db = with_b && !(c->fl & NO_DB);
  char shape[128];
  int k = snprintf(shape, sizeof shape, "rows=%d in=%d out=%d%s%s", rows, in, out,
                   dense ? (with_b ? " bias" : " no-bias") : "", H.shift ? " arrays 4 B off" : "");
  size_t nr = (size_t)rows, ni = (size_t)in, no = (size_t)out;
  real *x = hrand(nr * ni, -1, 1), *W = hrand(no * ni, -1, 1), *b = with_b ? hrand(no, -1, 1) : NULL;
  if (!backward(c)) {
    real *y = hvec(nr * no), *ys = hvec(nr * no);
    for (size_t r = 0; r < nr; r++)
      for (size_t o = 0; o < no; o++) {
        double s = b ? b[o] : 0, a = b ? fabs(b[o]) : 0;
        for (size_t i = 0; i < ni; i++) {
          s += (double)x[r * ni + i] * W[o * ni + i];
          a += fabs((double)x[r * ni + i] * W[o * ni + i]);
        }
        y[r * no + o] = (real)s;
        ys[r * no + o] = (real)a;
      }
    real *d_x = in_r("x", x, nr * ni), *d_W = in_r("W", W, no * ni), *d_b = b ? in_r("b", b, no) : NULL;
    real *d_y = out_over("y", nr * no, y, ys);
    H_RUN(c->op, shape,
          dense ? BE->dense_forward(d_y, d_x, d_W, d_b, rows, in, out)
                : BE->linear_forward(d_y, d_x, d_W, rows, in, out));
    return;
  }
  snprintf(shape + k, sizeof shape - (size_t)k, "%s%s", with_dx ? "" : " dx=NULL",
           dense && with_b && !with_db ? " db=NULL" : "");
  real *fb = b; /* the forward's bias, for the gradient mode */
  x = hrand(nr * ni, -1, 1);
  W = hrand(no * ni, -1, 1);
  real *dy = hrand(nr * no, -1, 1);
  real *dx = hvec(nr * ni), *dxs = hvec(nr * ni);
  real *dW0 = hrand(no * ni, -2, 2), *dW = hvec(no * ni), *dWs = hvec(no * ni);
  real *db0 = hrand(no, -2, 2), *dbv = hvec(no), *dbs = hvec(no);
  for (size_t r = 0; r < nr; r++)
    for (size_t i = 0; i < ni; i++) {
      double s = 0, a = 0;
      for (size_t o = 0; o < no; o++) {
        s += (double)dy[r * no + o] * W[o * ni + i];
        a += fabs((double)dy[r * no + o] * W[o * ni + i]);
      }
      dx[r * ni + i] = (real)s;
      dxs[r * ni + i] = (real)a;
    }
  for (size_t o = 0; o < no; o++) {
    for (size_t i = 0; i < ni; i++) {
      double s = dW0[o * ni + i], a = 0;
      for (size_t r = 0; r < nr; r++) {
        s += (double)dy[r * no + o] * x[r * ni + i];
        a += fabs((double)dy[r * no + o] * x[r * ni + i]);
      }
      dW[o * ni + i] = (real)s;
      dWs[o * ni + i] = (real)a;
    }
    double s = db0[o], a = 0;
    for (size_t r = 0; r < nr; r++) {
      s += dy[r * no + o];
      a += fabs((double)dy[r * no + o]);
    }
    dbv[o] = (real)s;
    dbs[o] = (real)a;
  }
  real *d_x = in_r("x", x, nr * ni), *d_W = in_r("W", W, no * ni), *d_dy = in_r("dy", dy, nr * no);
  real *d_dx = with_dx ? out_over("dx", nr * ni, dx, dxs) : NULL;
  real *d_dW = out_add("dW", no * ni, dW0, dW, dWs);
  real *d_db = dense && with_db ? out_add("db", no, db0, dbv, dbs) : NULL;
  real *d_b = GRAD && fb ? in_r("b", fb, no) : NULL, *d_y = GRAD ? out_over("y", nr * no, NULL, NULL) : NULL;
  g_out(d_y, nr * no, d_dy);
  g_var(d_x, d_dx);
  g_var(d_W, d_dW);
  g_var(d_b, d_db);
  BWD_RUN(c->op, shape,
          dense ? BE->dense_forward(d_y, d_x, d_W, d_b, rows, in, out)
                : BE->linear_forward(d_y, d_x, d_W, rows, in, out),
          dense ? BE->dense_backward(d_dx, d_dW, d_db, d_dy, d_x, d_W, rows, in, out)
                : BE->linear_backward(d_dx, d_dW, d_dy, d_x, d_W, rows, in, out));
}

/* ---- norm nonlinearity: n = {N, dim, C}; DX_IS_DY ------------------------------------------- */

static void b_norm(const struct op_case *c) {
  int N = c->n[0], dim = c->n[1], C = c->n[2];
  char shape[96];
  snprintf(shape, sizeof shape, "N=%d dim=%d C=%d%s%s", N, dim, C, GRAD ? "" : " (one norm at the clamp)",
           c->fl & DX_IS_DY && backward(c) ? " dx=dy" : "");
  size_t n = (size_t)N * dim * C, ns = nn_norm_save_size(N, C), nc = (size_t)C;
  real *x = hrand(n, -1, 1), *gamma = hrand(nc, 0.5, 1.5), *beta = hrand(nc, -0.5, 0.5), *save = hvec(ns);
  for (int m = 0; m < dim && !GRAD; m++) /* node 0, channel C-1: a zero vector, its norm clamped */
    x[(size_t)m * C + (size_t)(C - 1)] = 0;
  if (!backward(c)) {
    real *y = hvec(n);
    nn_norm_forward(y, save, x, gamma, beta, N, dim, C);
    real *d_x = in_r("x", x, n), *d_gamma = in_r("gamma", gamma, nc), *d_beta = in_r("beta", beta, nc);
    real *d_y = out_over("y", n, y, NULL), *d_save = out_over("save", ns, save, NULL);
    H_RUN(c->op, shape, BE->norm_forward(d_y, d_save, d_x, d_gamma, d_beta, N, dim, C));
    return;
  }
  x = hrand(n, -1, 1);
  gamma = hrand(nc, 0.5, 1.5);
  beta = hrand(nc, -0.5, 0.5);
  for (int m = 0; m < dim && !GRAD; m++)
    x[(size_t)m * C + (size_t)(C - 1)] = 0;
  nn_norm_forward(hvec(n), save, x, gamma, beta, N, dim, C);
  real *dy = hrand(n, -1, 1), *dx = hvec(n);
  real *dg0 = hrand(nc, -1, 1), *db0 = hrand(nc, -1, 1), *dg = hcopy(dg0, nc), *dbt = hcopy(db0, nc);
  nn_norm_backward(dx, dg, dbt, dy, x, save, gamma, beta, N, dim, C);
  real *d_x = in_r("x", x, n), *d_gamma = in_r("gamma", gamma, nc), *d_beta = in_r("beta", beta, nc);
  real *d_save = in_r("save", save, ns), *d_dy, *d_dx;
  if (c->fl & DX_IS_DY) /* dy comes in, dx goes out, in one array */
    d_dy = d_dx = out_inplace("dy", n, dy, dx, NULL);
  else {
    d_dy = in_r("dy", dy, n);
    d_dx = out_over("dx", n, dx, NULL);
  }
  real *d_dg = out_add("dgamma", nc, dg0, dg, NULL);
  real *d_db = out_add("dbeta", nc, db0, dbt, NULL), *d_y = GRAD ? out_over("y", n, NULL, NULL) : NULL;
  g_out(d_y, n, d_dy);
  g_var(d_x, d_dx);
  g_var(d_gamma, d_dg);
  g_var(d_beta, d_db);
  BWD_RUN(c->op, shape, BE->norm_forward(d_y, d_save, d_x, d_gamma, d_beta, N, dim, C),
          BE->norm_backward(d_dx, d_dg, d_db, d_dy, d_x, d_save, d_gamma, d_beta, N, dim, C));
}

/* ---- the radial network's hidden layers: n = {E, in, H}; NO_DX ------------------------------- */

/* A parameter block as the model's: W1, W2, W3 of variance 1/fan-in, gains
 * near 1, shifts near 0 (the last layer, W3, `out` rows). */
static real *radial_params(int in, int H, int out) {
  struct nn_radial_offsets o = nn_radial_offsets(in, H, out);
  real *p = hvec(o.n);
  for (size_t i = 0; i < o.n; i++)
    p[i] = (real)uni(-1, 1);
  for (size_t i = 0; i < (size_t)H * in; i++)
    p[o.W1 + i] *= (real)sqrt(3.0 / in);
  for (size_t i = 0; i < (size_t)H * H; i++)
    p[o.W2 + i] *= (real)sqrt(3.0 / H);
  for (int i = 0; i < H; i++) {
    p[o.g1 + i] = (real)uni(0.7, 1.3);
    p[o.g2 + i] = (real)uni(0.7, 1.3);
    p[o.be1 + i] *= (real)0.3;
    p[o.be2 + i] *= (real)0.3;
  }
  return p;
}

/* Each part of the save area (a1, s1, a2, s2, the two statistics) scaled by
 * its own size. */
static real *radial_save_scale(const real *save, int E, int H) {
  size_t eh = (size_t)E * H,
         parts[7] = {0, eh, 2 * eh, 3 * eh, 4 * eh, 4 * eh + 2 * (size_t)E, nn_radial_save_size(E, H)};
  real *s = hvec(parts[6]);
  for (int k = 0; k < 6; k++) {
    double rms = 0;
    size_t n = parts[k + 1] - parts[k];
    for (size_t i = parts[k]; i < parts[k + 1]; i++)
      rms += (double)save[i] * save[i];
    rms = n ? sqrt(rms / (double)n) : 0;
    for (size_t i = parts[k]; i < parts[k + 1]; i++)
      s[i] = (real)(fabs((double)save[i]) + rms);
  }
  return s;
}

static void b_radial(const struct op_case *c) {
  int E = c->n[0], in = c->n[1], H = c->n[2], with_dx = !(c->fl & NO_DX);
  char shape[96];
  snprintf(shape, sizeof shape, "E=%d in=%d H=%d%s", E, in, H, with_dx || !backward(c) ? "" : " dx=NULL");
  const int out = 5; /* W3's rows: the backward must leave them alone */
  size_t np = nn_radial_params(in, H, out), ns = nn_radial_save_size(E, H), ne = (size_t)E * in, eh = (size_t)E * H;
  real *x = hrand(ne, 0, 1), *p = radial_params(in, H, out), *save = hvec(ns);
  nn_radial_hidden_forward(save, x, p, E, in, H);
  if (!backward(c)) {
    real *d_x = in_r("x", x, ne), *d_p = in_r("params", p, np);
    real *d_save = out_over("save", ns, save, radial_save_scale(save, E, H));
    H_RUN(c->op, shape, BE->radial_hidden_forward(d_save, d_x, d_p, E, in, H));
    return;
  }
  x = hrand(ne, 0, 1);
  p = radial_params(in, H, out);
  nn_radial_hidden_forward(save, x, p, E, in, H);
  real *ds2 = hrand(eh, -1, 1), *dx = hvec(ne), *dp0 = hrand(np, -1, 1), *dp = hcopy(dp0, np);
  nn_radial_hidden_backward(with_dx ? dx : NULL, dp, ds2, x, save, p, E, in, H);
  real *d_x = in_r("x", x, ne), *d_p = in_r("params", p, np), *d_save = in_r("save", save, ns);
  real *d_ds2 = in_r("ds2", ds2, eh), *d_dx = with_dx ? out_over("dx", ne, dx, NULL) : NULL;
  real *d_dp = out_add("dparams", np, dp0, dp, NULL);
  g_out(nn_radial_s2(d_save, E, H), eh, d_ds2);
  g_var(d_x, d_dx);
  g_var(d_p, d_dp);
  BWD_RUN(c->op, shape, BE->radial_hidden_forward(d_save, d_x, d_p, E, in, H),
          BE->radial_hidden_backward(d_dx, d_dp, d_ds2, d_x, d_save, d_p, E, in, H));
}

/* ---- the convolution: f = {in, out}, n = {H, graph, the plan's max degree (0: NN_MAX_DEG)};
 * POOL, NO_DX (every dx NULL), NO_DX1, NO_DS2, NO_DW3 ------------------------------------------------ */

static void b_conv(const struct op_case *c) {
  struct nn_fiber fin = c->f[0], fout = c->f[1];
  int H = c->n[0], pool = !!(c->fl & POOL), skip_dx = c->fl & NO_DX1 ? 1 : -1, no_dx = !!(c->fl & NO_DX);
  int no_ds2 = !!(c->fl & NO_DS2), no_dw3 = !!(c->fl & NO_DW3), pdeg = c->n[2] ? c->n[2] : NN_MAX_DEG;
  const struct basis_plan *plan = &PLANS[pdeg];
  struct tgraph gr, *g = &gr;
  graph_make(g, QUICK && (c->fl & BIG) ? G_SMALL : c->n[1], plan);
  char shape[192], fi[32], fo[32];
  fiber_str(fi, sizeof fi, &fin);
  fiber_str(fo, sizeof fo, &fout);
  char pl[16] = "";
  if (pdeg != NN_MAX_DEG) snprintf(pl, sizeof pl, " plan<=%d", pdeg);
  int k = snprintf(shape, sizeof shape, "%s %s->%s H=%d pool=%d %s N=%d E=%d%s", c->what, fi, fo, H, pool, g->what,
                   g->N, g->E, pl);
  struct nn_conv_shape hs = {fin, fout, plan, g->N, g->E, g->src, g->in_start};
  size_t E = (size_t)g->E, N = (size_t)g->N, rows = pool ? N : E, rs = nn_conv_radial_size(&fin, &fout);
  size_t nb = E * plan->per_edge, eh = E * (size_t)H, rh = rs * (size_t)H;
  real *x[NN_MAX_DEG + 1] = {0}, *ax[NN_MAX_DEG + 1] = {0}, *y[NN_MAX_DEG + 1] = {0}, *ay[NN_MAX_DEG + 1] = {0};
  size_t nx[NN_MAX_DEG + 1] = {0}, ny[NN_MAX_DEG + 1] = {0};
  for (int d = 0; d <= NN_MAX_DEG; d++) {
    nx[d] = N * (size_t)(NN_DIM(d) * fin.ch[d]);
    ny[d] = rows * (size_t)(NN_DIM(d) * fout.ch[d]);
    if (fin.ch[d]) x[d] = hrand(nx[d], -1, 1);
  }
  real *s2 = hrand(eh, 0, 1.5), *W3 = hrand(rh, -1, 1);
  real *abasis = habs(g->basis, nb);
  struct nn_conv_shape ds = hs;
  ds.src = in_i("src", g->src, E);
  ds.in_start = in_i("in_start", g->in_start, N + 1);
  real *d_basis = in_r("basis", g->basis, nb);
  real *d_x[NN_MAX_DEG + 1] = {0}, *d_y[NN_MAX_DEG + 1] = {0}, *d_dx[NN_MAX_DEG + 1] = {0}, *d_dy[NN_MAX_DEG + 1] = {0};
  if (backward(c)) { /* fresh inputs, after the forward's */
    for (int d = 0; d <= NN_MAX_DEG; d++) {
      if (fin.ch[d]) x[d] = hrand(nx[d], -1, 1);
      if (fout.ch[d]) y[d] = hrand(ny[d], -1, 1); /* dy */
    }
    s2 = hrand(eh, 0, 1.5);
    W3 = hrand(rh, -1, 1);
  }
  for (size_t i = 0; i < rh; i++)
    W3[i] *= (real)(1 / sqrt((double)H));
  for (int d = 0; d <= NN_MAX_DEG; d++) {
    if (x[d]) ax[d] = habs(x[d], nx[d]);
    if (y[d]) ay[d] = habs(y[d], ny[d]);
  }
  real *as2 = habs(s2, eh), *aW3 = habs(W3, rh);
  real *d_s2 = in_r("s2", s2, eh), *d_W3 = in_r("W3", W3, rh);
  if (!backward(c)) { /* y, and with |everything| its sums of |terms| */
    for (int d = 0; d <= NN_MAX_DEG; d++)
      if (fout.ch[d]) {
        y[d] = hvec(ny[d]);
        ay[d] = hvec(ny[d]);
      }
    if (nn_conv_forward(y, &hs, (const real *const *)x, g->basis, s2, W3, H, pool) ||
        nn_conv_forward(ay, &hs, (const real *const *)ax, abasis, as2, aW3, H, pool)) {
      fprintf(stderr, "test_backend_ops: the CPU convolution ran out of memory\n");
      exit(1);
    }
    for (int d = 0; d <= NN_MAX_DEG; d++) {
      if (fin.ch[d]) d_x[d] = in_r(X_NAME[d], x[d], nx[d]);
      if (fout.ch[d]) d_y[d] = out_over(Y_NAME[d], ny[d], y[d], ay[d]);
    }
    H_RUN(c->op, shape,
          CHECK_RC("conv_forward", BE->conv_forward(d_y, &ds, (const real *const *)d_x, d_basis, d_s2, d_W3, H, pool)));
    return;
  }
  snprintf(shape + k, sizeof shape - (size_t)k, "%s%s%s",
           no_dx          ? " dx=NULL"
           : skip_dx >= 0 ? " dx[d]=NULL"
                          : "",
           no_ds2 ? " ds2=NULL" : "", no_dw3 ? " dW3=NULL" : "");
  real *dx[NN_MAX_DEG + 1] = {0}, *adx[NN_MAX_DEG + 1] = {0};
  for (int d = 0; d <= NN_MAX_DEG && !no_dx; d++)
    if (fin.ch[d] && d != skip_dx) {
      dx[d] = hvec(nx[d]);
      adx[d] = hvec(nx[d]);
    }
  real *ds2 = hvec(eh), *ads2 = hvec(eh), *dW30 = hrand(rh, -1, 1), *dW3 = hcopy(dW30, rh), *adW3 = hvec(rh);
  if (nn_conv_backward(dx, no_ds2 ? NULL : ds2, no_dw3 ? NULL : dW3, &hs, (const real *const *)y,
                       (const real *const *)x, g->basis, s2, W3, H, pool) ||
      nn_conv_backward(adx, ads2, adW3, &hs, (const real *const *)ay, (const real *const *)ax, abasis, as2, aW3, H,
                       pool)) {
    fprintf(stderr, "test_backend_ops: the CPU convolution ran out of memory\n");
    exit(1);
  }
  for (int d = 0; d <= NN_MAX_DEG; d++) {
    if (fin.ch[d]) d_x[d] = in_r(X_NAME[d], x[d], nx[d]);
    if (fout.ch[d]) d_dy[d] = in_r(DY_NAME[d], y[d], ny[d]);
    if (dx[d]) d_dx[d] = out_over(DX_NAME[d], nx[d], dx[d], adx[d]);
    if (GRAD && fout.ch[d]) d_y[d] = out_over(Y_NAME[d], ny[d], NULL, NULL);
    g_out(d_y[d], ny[d], d_dy[d]);
    g_var(d_x[d], d_dx[d]);
  }
  real *d_ds2 = no_ds2 ? NULL : out_over("ds2", eh, ds2, ads2);
  real *d_dW3 = no_dw3 ? NULL : out_add("dW3", rh, dW30, dW3, adW3);
  g_var(d_s2, d_ds2);
  g_var(d_W3, d_dW3);
  BWD_RUN(c->op, shape,
          CHECK_RC("conv_forward", BE->conv_forward(d_y, &ds, (const real *const *)d_x, d_basis, d_s2, d_W3, H, pool)),
          CHECK_RC("conv_backward", BE->conv_backward(d_dx, d_ds2, d_dW3, &ds, (const real *const *)d_dy,
                                                      (const real *const *)d_x, d_basis, d_s2, d_W3, H, pool)));
}

/* ---- the attention: f = {keys, values}, n = {heads, graph}; W, NO_DZ1, NO_DQ --------------------- */

/* Edge weights as the envelope gives them: most in (0, 1], some 0, some
 * tiny, and every edge into node `all_zero` 0. */
static real *attn_weights(const struct tgraph *g, int all_zero) {
  real *w = hvec((size_t)g->E + 1);
  for (int e = 0; e < g->E; e++) {
    double u = urand();
    w[e] = (real)(u < 0.15 ? 0 : u < 0.25 ? 1e-4 * u : uni(0.05, 1));
  }
  if (all_zero >= 0 && all_zero < g->N)
    for (int e = g->in_start[all_zero]; e < g->in_start[all_zero + 1]; e++)
      w[e] = 0;
  return w;
}

static const char *const KV_NAME[] = {"kv0", "kv1", "kv2", "kv3"}, *const Q_NAME[] = {"q0", "q1", "q2", "q3"};
static const char *const Z_NAME[] = {"z0", "z1", "z2", "z3"}, *const DZ_NAME[] = {"dz0", "dz1", "dz2", "dz3"};
static const char *const DKV_NAME[] = {"dkv0", "dkv1", "dkv2", "dkv3"}, *const DQ_NAME[] = {"dq0", "dq1", "dq2", "dq3"};

/* The backward from the forward's alpha, on the forward's inputs. */
static void b_attn(const struct op_case *c) {
  struct nn_fiber fk = c->f[0], fv = c->f[1];
  int heads = c->n[0], null_dz = c->fl & NO_DZ1 ? 1 : -1, dq_null = !!(c->fl & NO_DQ);
  struct tgraph gr, *g = &gr;
  graph_make(g, c->n[1], &PLANS[NN_MAX_DEG]);
  char shape[192], a[32], b[32];
  fiber_str(a, sizeof a, &fk);
  fiber_str(b, sizeof b, &fv);
  int k = snprintf(shape, sizeof shape, "%s k=%s v=%s heads=%d %s N=%d E=%d%s", c->what, a, b, heads, g->what, g->N,
                   g->E, c->fl & W ? " w" : " w=NULL");
  size_t N = (size_t)g->N, E = (size_t)g->E, nkv[NN_MAX_DEG + 1], nq[NN_MAX_DEG + 1], nz[NN_MAX_DEG + 1];
  real *w = c->fl & W ? attn_weights(g, 2) : NULL;
  struct nn_attn_shape hs = {fk, fv, heads, g->N, g->E, g->in_start, w};
  real *kv[NN_MAX_DEG + 1] = {0}, *q[NN_MAX_DEG + 1] = {0}, *z[NN_MAX_DEG + 1] = {0}, *az[NN_MAX_DEG + 1] = {0};
  real *akv[NN_MAX_DEG + 1] = {0};
  for (int d = 0; d <= NN_MAX_DEG; d++) {
    int dim = NN_DIM(d), wkv = fv.ch[d] + fk.ch[d];
    nkv[d] = E * (size_t)(dim * wkv);
    nq[d] = N * (size_t)(dim * fk.ch[d]);
    nz[d] = N * (size_t)(dim * fv.ch[d]);
    if (wkv) {
      kv[d] = hrand(nkv[d], -1.5, 1.5);
      akv[d] = hcopy(kv[d], nkv[d]); /* |values|, the keys as they are: the same weights */
      for (size_t r = 0; r < E * (size_t)dim; r++)
        for (int ch = 0; ch < fv.ch[d]; ch++)
          akv[d][r * (size_t)wkv + (size_t)ch] = (real)fabs((double)akv[d][r * (size_t)wkv + (size_t)ch]);
    }
    if (fk.ch[d]) q[d] = hrand(nq[d], -1.5, 1.5);
    if (fv.ch[d]) {
      z[d] = hvec(nz[d]);
      az[d] = hvec(nz[d]);
    }
  }
  real *alpha = hvec(E * (size_t)heads), *alpha2 = hvec(E * (size_t)heads);
  nn_attn_forward(z, alpha, &hs, (const real *const *)kv, (const real *const *)q);
  struct nn_attn_shape ds = hs;
  ds.in_start = in_i("in_start", g->in_start, N + 1);
  if (w) ds.w = in_r("w", w, E);
  real *d_kv[NN_MAX_DEG + 1] = {0}, *d_q[NN_MAX_DEG + 1] = {0}, *d_z[NN_MAX_DEG + 1] = {0};
  for (int d = 0; d <= NN_MAX_DEG; d++) {
    if (kv[d]) d_kv[d] = in_r(KV_NAME[d], kv[d], nkv[d]);
    if (q[d]) d_q[d] = in_r(Q_NAME[d], q[d], nq[d]);
  }
  if (!backward(c)) {
    nn_attn_forward(az, alpha2, &hs, (const real *const *)akv, (const real *const *)q); /* z's sums of |terms| */
    for (int d = 0; d <= NN_MAX_DEG; d++)
      if (z[d]) d_z[d] = out_over(Z_NAME[d], nz[d], z[d], az[d]);
    /* the weights are a softmax's: T_MAG, whatever the entry's class */
    real *d_alpha = h_add(K_OVER, "alpha", E * (size_t)heads, 0, NULL, alpha, NULL, tol_of(T_MAG));
    H_RUN(c->op, shape, BE->attn_forward(d_z, d_alpha, &ds, (const real *const *)d_kv, (const real *const *)d_q));
    return;
  }
  snprintf(shape + k, sizeof shape - (size_t)k, "%s%s", null_dz >= 0 ? " dz[d]=NULL" : "", dq_null ? " dq=NULL" : "");
  real *dz[NN_MAX_DEG + 1] = {0}, *dkv[NN_MAX_DEG + 1] = {0}, *dq[NN_MAX_DEG + 1] = {0};
  for (int d = 0; d <= NN_MAX_DEG; d++) {
    if (fv.ch[d] && d != null_dz) dz[d] = hrand(nz[d], -1, 1);
    if (kv[d]) dkv[d] = hvec(nkv[d]);
    if (q[d] && !dq_null) dq[d] = hvec(nq[d]);
  }
  nn_attn_backward(dkv, dq_null ? NULL : dq, &hs, (const real *const *)dz, alpha, (const real *const *)kv,
                   (const real *const *)q);
  real *d_alpha = in_r("alpha", alpha, E * (size_t)heads);
  real *d_dz[NN_MAX_DEG + 1] = {0}, *d_dkv[NN_MAX_DEG + 1] = {0}, *d_dq[NN_MAX_DEG + 1] = {0};
  for (int d = 0; d <= NN_MAX_DEG; d++) {
    if (dz[d]) d_dz[d] = in_r(DZ_NAME[d], dz[d], nz[d]);
    if (dkv[d]) d_dkv[d] = out_over(DKV_NAME[d], nkv[d], dkv[d], NULL);
    if (dq[d]) d_dq[d] = out_over(DQ_NAME[d], nq[d], dq[d], NULL);
    if (GRAD && z[d]) d_z[d] = out_over(Z_NAME[d], nz[d], NULL, NULL);
    if (dz[d]) g_out(d_z[d], nz[d], d_dz[d]);
    g_var(d_kv[d], d_dkv[d]);
    g_var(d_q[d], d_dq[d]);
  }
  BWD_RUN(c->op, shape, BE->attn_forward(d_z, d_alpha, &ds, (const real *const *)d_kv, (const real *const *)d_q),
          BE->attn_backward(d_dkv, dq_null ? NULL : d_dq, &ds, (const real *const *)d_dz, d_alpha,
                            (const real *const *)d_kv, (const real *const *)d_q));
}

/* ---- scale_rows: n = {rows, n}; in the gradient mode its own backward ---------------------------- */

static void b_scale_rows(const struct op_case *c) {
  int rows = c->n[0], n = c->n[1];
  char shape[64];
  snprintf(shape, sizeof shape, "rows=%d n=%d (some weights 0)", rows, n);
  size_t m = (size_t)rows * n;
  real *x = hrand(m, -2, 2), *w = hrand((size_t)rows + 1, 0, 1), *y = hvec(m), *s = hvec(m);
  for (int r = 0; r < rows; r += 3)
    w[r] = 0;
  for (size_t r = 0; r < (size_t)rows; r++)
    for (size_t i = 0; i < (size_t)n; i++) {
      y[r * n + i] = (real)((double)x[r * n + i] * w[r]);
      s[r * n + i] = (real)fabs((double)x[r * n + i] * w[r]);
    }
  real *d_w = in_r("w", w, (size_t)rows), *d_x = out_inplace("x", m, x, y, s);
  real *d_u = GRAD ? out_over("u", m, NULL, NULL) : NULL; /* dy, then dx in place */
  g_out(d_x, m, d_u);
  g_var(d_x, d_u);
  if (GRAD)
    G_RUN(c->op, shape, BE->scale_rows(d_x, d_w, rows, n), BE->scale_rows(d_u, d_w, rows, n));
  else
    H_RUN(c->op, shape, BE->scale_rows(d_x, d_w, rows, n));
}

/* ---- pooling: n = {C, G}, sizes: the molecules' ----------------------------------------------- */

/* Molecules of the given sizes (0 allowed); in max pooling some channels
 * hold one value on several atoms (ties go to the first; not in the
 * gradient mode, where a tie is a kink). */
static void b_pool(const struct op_case *c) {
  int C = c->n[0], G = c->n[1];
  int32_t *gs = ivec((size_t)G + 1);
  char shape[128];
  int k = snprintf(shape, sizeof shape, "C=%d molecules of", C);
  for (int g = 0; g < G; g++) {
    gs[g + 1] = gs[g] + c->sizes[g];
    if (k < (int)sizeof shape) k += snprintf(shape + k, sizeof shape - (size_t)k, " %d", c->sizes[g]);
  }
  int N = gs[G], max = strstr(c->op, "max") != NULL;
  size_t nx = (size_t)N * C, ny = (size_t)G * C;
  real *x = hrand(nx, -2, 2);
  for (int g = 0; g < G && !GRAD; g++) /* ties: channel c % 3 == 0 holds the same value on every atom */
    for (int n = gs[g] + 1; n < gs[g + 1]; n++)
      for (int ch = 0; ch < C; ch += 3)
        x[(size_t)n * C + ch] = x[(size_t)gs[g] * C + ch];
  real *ymax = hvec(ny), *ymean = hvec(ny), *smean = hvec(ny);
  int32_t *arg = ivec(ny);
  for (int g = 0; g < G; g++)
    for (int ch = 0; ch < C; ch++) {
      size_t o = (size_t)g * C + ch;
      arg[o] = -1;
      double s = 0, a = 0;
      for (int n = gs[g]; n < gs[g + 1]; n++) {
        real v = x[(size_t)n * C + ch];
        if (arg[o] < 0 || v > ymax[o]) {
          ymax[o] = v;
          arg[o] = n;
        }
        s += v;
        a += fabs((double)v);
      }
      int cnt = gs[g + 1] - gs[g];
      ymean[o] = cnt ? (real)(s / cnt) : 0;
      smean[o] = cnt ? (real)(a / cnt) : 0;
    }
  real *dy = hrand(ny, -1, 1), *dxmax = hvec(nx), *dxmean = hvec(nx), *sdx = hvec(nx);
  for (int g = 0; g < G; g++)
    for (int ch = 0; ch < C; ch++) {
      size_t o = (size_t)g * C + ch;
      if (arg[o] >= 0) dxmax[(size_t)arg[o] * C + ch] += dy[o];
      int cnt = gs[g + 1] - gs[g];
      for (int n = gs[g]; n < gs[g + 1]; n++) {
        dxmean[(size_t)n * C + ch] = (real)((double)dy[o] / cnt);
        sdx[(size_t)n * C + ch] = (real)fabs((double)dy[o] / cnt);
      }
    }
  if (!backward(c)) {
    real *d_x = in_r("x", x, nx), *d_y = out_over("y", ny, max ? ymax : ymean, max ? NULL : smean);
    int32_t *d_gs = in_i("graph_start", gs, (size_t)G + 1), *d_arg = max ? out_over_i("arg", ny, arg) : NULL;
    if (max)
      H_RUN(c->op, shape, BE->pool_max_forward(d_y, d_arg, d_x, d_gs, G, C));
    else
      H_RUN(c->op, shape, BE->pool_mean_forward(d_y, d_x, d_gs, G, C));
    return;
  }
  real *d_dy = in_r("dy", dy, ny);
  int32_t *d_arg = max ? in_i("arg", arg, ny) : NULL,
          *d_gs = max && !GRAD ? NULL : in_i("graph_start", gs, (size_t)G + 1);
  real *d_dx = out_over("dx", nx, max ? dxmax : dxmean, max ? NULL : sdx);
  real *d_x = GRAD ? in_r("x", x, nx) : NULL, *d_y = GRAD ? out_over("y", ny, NULL, NULL) : NULL;
  g_out(d_y, ny, d_dy);
  g_var(d_x, d_dx);
  if (max)
    BWD_RUN(c->op, shape, BE->pool_max_forward(d_y, d_arg, d_x, d_gs, G, C),
            BE->pool_max_backward(d_dx, d_dy, d_arg, N, G, C));
  else
    BWD_RUN(c->op, shape, BE->pool_mean_forward(d_y, d_x, d_gs, G, C), BE->pool_mean_backward(d_dx, d_dy, d_gs, G, C));
}

/* ---- the glue ----------------------------------------------------------------------------------- */

/* concat_rows: n = {a, b, rows} */
static void b_concat(const struct op_case *c) {
  int a = c->n[0], b = c->n[1];
  size_t rows = (size_t)c->n[2], w = (size_t)(a + b);
  char shape[96];
  snprintf(shape, sizeof shape, "a=%d b=%d rows=%zu%s", a, b, rows, b ? "" : " (y NULL)");
  real *x = hrand(rows * a, -1, 1), *y = b ? hrand(rows * b, -1, 1) : NULL, *out = hvec(rows * w);
  for (size_t r = 0; r < rows; r++) {
    memcpy(out + r * w, x + r * a, (size_t)a * sizeof(real));
    if (b) memcpy(out + r * w + a, y + r * b, (size_t)b * sizeof(real));
  }
  real *d_x = in_r("x", x, rows * a), *d_y = b ? in_r("y", y, rows * b) : NULL;
  real *d_out = out_over("out", rows * w, out, NULL);
  H_RUN(c->op, shape, BE->concat_rows(d_out, d_x, a, d_y, b, rows));
}

/* split_rows: n = {a, b, rows}; NO_X, NO_Y */
static void b_split(const struct op_case *c) {
  int a = c->n[0], b = c->n[1];
  size_t rows = (size_t)c->n[2], w = (size_t)(a + b);
  char shape[96];
  snprintf(shape, sizeof shape, "a=%d b=%d rows=%zu%s", a, b, rows,
           c->fl & NO_Y   ? " (y NULL)"
           : c->fl & NO_X ? " (x NULL)"
                          : "");
  real *in = hrand(rows * w, -1, 1), *xs = hvec(rows * a + 1), *ys = hvec(rows * b + 1);
  for (size_t r = 0; r < rows; r++) {
    memcpy(xs + r * a, in + r * w, (size_t)a * sizeof(real));
    if (b) memcpy(ys + r * b, in + r * w + a, (size_t)b * sizeof(real));
  }
  real *d_in = in_r("in", in, rows * w);
  real *d_x = c->fl & NO_X ? NULL : out_over("x", rows * a, xs, NULL);
  real *d_y = c->fl & NO_Y || !b ? NULL : out_over("y", rows * b, ys, NULL);
  H_RUN(c->op, shape, BE->split_rows(d_x, a, d_y, b, d_in, rows));
}

/* add: n = {n} */
static void b_add(const struct op_case *c) {
  size_t n = (size_t)c->n[0];
  char shape[64];
  snprintf(shape, sizeof shape, "n=%zu", n);
  real *x = hrand(n, -1, 1), *y0 = hrand(n, -1, 1), *sum = hvec(n), *ssum = hvec(n);
  for (size_t i = 0; i < n; i++) {
    sum[i] = (real)((double)y0[i] + x[i]);
    ssum[i] = (real)(fabs((double)y0[i]) + fabs((double)x[i]));
  }
  real *d_x = in_r("x", x, n), *d_y = out_add("y", n, y0, sum, ssum);
  H_RUN(c->op, shape, BE->add(d_y, d_x, n));
}

/* relu and its backward: n = {n}; every fifth x 0 (relu(0) = 0, relu'(0)
 * = 0), not in the gradient mode */
static void b_relu(const struct op_case *c) {
  size_t n = (size_t)c->n[0];
  char shape[64];
  snprintf(shape, sizeof shape, "n=%zu", n);
  real *x = hrand(n, -1, 1), *r = hvec(n);
  for (size_t i = 0; i < n && !GRAD; i += 5)
    x[i] = 0;
  for (size_t i = 0; i < n; i++)
    r[i] = x[i] > 0 ? x[i] : 0;
  real *d_x = in_r("x", x, n);
  if (!backward(c)) {
    real *d_y = out_over("y", n, r, NULL);
    H_RUN(c->op, shape, BE->relu(d_y, d_x, n));
    return;
  }
  real *dy = hrand(n, -1, 1), *d = hvec(n);
  for (size_t i = 0; i < n; i++)
    d[i] = x[i] > 0 ? dy[i] : 0;
  real *d_dy = out_inplace("dy", n, dy, d, NULL), *d_y = GRAD ? out_over("y", n, NULL, NULL) : NULL;
  g_out(d_y, n, d_dy);
  g_var(d_x, d_dy);
  BWD_RUN(c->op, shape, BE->relu(d_y, d_x, n), BE->relu_backward(d_dy, d_x, n));
}

/* The envelope's weight in double, from models/se3.h's formulas. */
static double naive_weight(const real *f, int in, int kind, double rc, int bonds_kept) {
  if (kind == SE3_ENVELOPE_NONE || (bonds_kept && f[0] < 0.5)) return 1;
  double r = f[in - 1];
  if (!(r < rc)) return 0;
  if (kind == SE3_ENVELOPE_COSINE) return 0.5 * (cos(M_PI * r / rc) + 1);
  double dd = r / rc;
  return 1 - 28 * pow(dd, 6) + 48 * pow(dd, 7) - 21 * pow(dd, 8);
}

/* edge_weights: n = {E, kind, bonds_kept}; errors absolute (the scale 1) */
static void b_edge_weights(const struct op_case *c) {
  static const char *const kinds[] = {"none", "cosine", "poly"};
  int E = c->n[0], kind = c->n[1], bonds_kept = c->n[2];
  char shape[96];
  snprintf(shape, sizeof shape, "E=%d %s bonds_kept=%d cutoff=5 (r over 0..6)", E, kinds[kind], bonds_kept);
  const int in = 6;
  real *f = hvec((size_t)E * in + 1), *w = hvec((size_t)E + 1), *one = hvec((size_t)E + 1);
  for (int e = 0; e < E; e++) {
    int bond = irand(5); /* 0: no bond */
    f[(size_t)e * in + (size_t)bond] = 1;
    f[(size_t)e * in + 5] = (real)(e == 0 ? 5.0 : uni(0, 6)); /* edge 0 exactly at the cutoff */
    w[e] = (real)naive_weight(f + (size_t)e * in, in, kind, 5.0, bonds_kept);
    one[e] = 1;
  }
  real *d_f = in_r("edge_feat", f, (size_t)E * in), *d_w = out_over("w", (size_t)E, w, one);
  H_RUN(c->op, shape, BE->edge_weights(d_w, d_f, E, in, kind, 5, bonds_kept));
}

/* ---- training: Adam, recording, sumsq, scale, allreduce --------------------------------------------- */

/* adam_step, and the same update with the step's values read from the
 * backend's memory (adam_step_at): n = {n, decoupled, step}, x = {weight
 * decay}; errors relative to |p| + lr, |m| + |g|, v + g^2. */
static void b_adam(const struct op_case *c) {
  size_t n = (size_t)c->n[0];
  int decoupled = c->n[1];
  long step = c->n[2];
  int skip = c->n[3];
  double wd = c->x[0];
  char shape[96];
  snprintf(shape, sizeof shape, "n=%zu %s weight_decay=%g step=%ld%s", n, decoupled ? "AdamW" : "Adam", wd, step,
           skip == 1   ? " skip? finite"
           : skip == 2 ? " skip: overflow"
           : skip == 3 ? " no skip: overflow"
                       : "");
  struct nn_adam o = {0.9, 0.999, 1e-8, wd, decoupled};
  const double lr = 1e-3;
  real *p = hrand(n, -1, 1), *g = hrand(n, -0.1, 0.1), *m = hrand(n, -0.05, 0.05), *v = hrand(n, 0, 0.01);
  if (step <= 1)
    for (size_t i = 0; i < n; i++)
      m[i] = v[i] = 0; /* as before a first step */
  real *pr = hvec(n), *mr = hvec(n), *vr = hvec(n), *ps = hvec(n), *ms = hvec(n), *vs = hvec(n);
  long t = step < 1 ? 1 : step;
  double c1 = 1 - pow(o.beta1, (double)t), c2 = 1 - pow(o.beta2, (double)t);
  for (size_t i = 0; i < n; i++) {
    double gi = g[i] + (decoupled ? 0 : wd * p[i]);
    double mi = o.beta1 * m[i] + (1 - o.beta1) * gi, vi = o.beta2 * v[i] + (1 - o.beta2) * gi * gi;
    double np = p[i] - lr * (mi / c1) / (sqrt(vi / c2) + o.eps) - (decoupled ? lr * wd * p[i] : 0);
    pr[i] = (real)np;
    mr[i] = (real)mi;
    vr[i] = (real)vi;
    ps[i] = (real)(fabs(np) + lr);
    ms[i] = (real)(fabs(mi) + fabs(gi));
    vs[i] = (real)(vi + gi * gi);
    if (skip == 2) /* skipped: every array as it was, to the bit */
      pr[i] = p[i], mr[i] = m[i], vr[i] = v[i];
  }
  real *d_g = in_r("grad", g, n), *d_p = out_inplace("params", n, p, pr, ps);
  real *d_m = out_inplace("m", n, m, mr, ms), *d_v = out_inplace("v", n, v, vr, vs);
  if (strcmp(c->op, "adam_step_at")) {
    H_RUN(c->op, shape, BE->adam_step(d_p, d_m, d_v, d_g, n, &o, step, lr));
    return;
  }
  double sc[NN_K_ADAM_SCHED];
  nn_k_adam_sched(sc, o.beta1, o.beta2, step, lr);
  /* n[3]: the skip of a loss-scaled step: 1, its flag with a finite norm (the
   * update runs); 2, the flag with an overflowed norm (nothing changes); 3,
   * an overflowed norm without the flag (the update runs) */
  if (skip) {
    sc[3] = skip == 1 ? 3.5 : skip == 2 ? INFINITY : NAN;
    sc[4] = skip != 3;
  }
  double *dsc = BE->alloc(sizeof sc);
  BE->upload(dsc, sc, sizeof sc);
  H_RUN(c->op, shape, BE->adam_step_at(d_p, d_m, d_v, d_g, n, &o, dsc));
  BE->release(dsc);
}

/* Recorded work (CUDA graphs; skipped where the backend records nothing):
 * the operations called between record_begin and record_end do not run;
 * each replay runs them once, with the memory's contents of that moment;
 * a free of the backend's memory makes the recording stale. n = {n} */
static void b_record(const struct op_case *c) {
  size_t n = (size_t)c->n[0];
  char shape[64];
  snprintf(shape, sizeof shape, "n=%zu: x = 2 x + y, replayed", n);
  if (!BE->record_begin) {
    printf("skip %-22s %-64s (%s records nothing)\n", c->op, shape, BE->name);
    return;
  }
  H.why[0] = 0;
  real *x = hrand(n, -1, 1), *y = hrand(n, -1, 1), *got = hvec(n);
  real *dx = BE->alloc(n * sizeof(real)), *dy = BE->alloc(n * sizeof(real));
  BE->upload(dx, x, n * sizeof(real));
  BE->upload(dy, y, n * sizeof(real));
  struct se3_error err;
  void *rec = NULL;
  if (BE->record_begin()) {
    why("record_begin refused");
  } else {
    BE->scale(dx, n, 2);
    BE->add(dx, dy, n);
    rec = BE->record_end();
    if (!rec) why("record_end made no recording");
  }
  BE->download(got, dx, n * sizeof(real));
  if (memcmp(got, x, n * sizeof(real))) why("the recorded operations ran while recording");
  for (int r = 1; r <= 2 && rec; r++) {
    for (size_t i = 0; i < n; i++) /* a new y before each replay: read as it is then */
      y[i] = (real)(0.25 * (double)r + (double)(i % 5));
    BE->upload(dy, y, n * sizeof(real));
    if (BE->replay(rec)) why("replay %d: stale at once", r);
    BE->download(got, dx, n * sizeof(real));
    for (size_t i = 0; i < n; i++) {
      x[i] = (real)(x[i] * 2);
      x[i] = (real)(x[i] + y[i]);
    }
    if (memcmp(got, x, n * sizeof(real))) why("replay %d: x differs from 2 x + y", r);
  }
  if (BE->sync(&err)) why("sync: %s", se3_error_str(&err).s);
  void *other = BE->alloc(64);
  BE->release(other);
  if (rec && BE->replay(rec) != 1) why("a replay after a free of the backend's memory was not refused as stale");
  BE->record_free(rec);
  BE->release(dx);
  BE->release(dy);
  report(c->op, shape, !H.why[0], 0, 0, H.why[0] ? H.why : NULL);
  H.why[0] = 0;
}

/* scale: n = {n}, x = {s} */
static void b_scale(const struct op_case *c) {
  size_t n = (size_t)c->n[0];
  double s = c->x[0];
  char shape[64];
  snprintf(shape, sizeof shape, "n=%zu s=%g", n, s);
  real *x = hrand(n, -3, 3), *y = hvec(n), *ys = hvec(n);
  for (size_t i = 0; i < n; i++) {
    y[i] = (real)(x[i] * s);
    ys[i] = (real)fabs(x[i] * s);
  }
  real *d_x = out_inplace("x", n, x, y, ys);
  H_RUN(c->op, shape, BE->scale(d_x, n, s));
}

/* allreduce with comm NULL: n = {n} */
static void b_allreduce(const struct op_case *c) {
  size_t n = (size_t)c->n[0];
  char shape[64];
  snprintf(shape, sizeof shape, "n=%zu comm=NULL (one process: unchanged)", n);
  real *x = hrand(n, -1, 1), *d_x = out_inplace("x", n, x, x, NULL);
  struct se3_error err;
  H_RUN(c->op, shape, {
    int rc = BE->allreduce(d_x, n, NULL, &err);
    if (rc) why("allreduce with comm NULL returned %d: %s", rc, se3_error_str(&err).s);
  });
}

/* y += x in doubles (a recorded data-parallel step's running loss): one
 * IEEE addition an element, exact to the bit on every backend; values of
 * every magnitude and sign, a cancellation and a zero. n = {n} */
static void b_add_f64(const struct op_case *c) {
  size_t n = (size_t)c->n[0];
  char shape[64];
  snprintf(shape, sizeof shape, "n=%zu", n);
  size_t m = n ? n : 1;
  double *x = malloc(m * sizeof *x), *y = malloc(m * sizeof *y), *want = malloc(m * sizeof *want),
         *got = malloc(m * sizeof *got);
  for (size_t i = 0; i < n; i++) {
    x[i] = (urand() - 0.5) * ldexp(1, irand(80) - 40);
    y[i] = i % 5 == 1 ? -x[i] : (urand() - 0.5) * ldexp(1, irand(80) - 40);
    if (i % 7 == 3) x[i] = 0;
    want[i] = y[i] + x[i];
  }
  double *dx = BE->alloc(m * sizeof *dx), *dy = BE->alloc(m * sizeof *dy);
  BE->upload(dx, x, n * sizeof *x);
  BE->upload(dy, y, n * sizeof *y);
  BE->add_f64(dy, dx, n);
  BE->download(got, dy, n * sizeof *got);
  size_t bad = 0;
  for (size_t i = 0; i < n; i++)
    bad += memcmp(&got[i], &want[i], sizeof got[i]) != 0;
  report(c->op, shape, bad == 0, (double)bad, 0, "elements differ from y + x in double");
  BE->release(dx), BE->release(dy);
  free(x), free(y), free(want), free(got);
}

/* sum of x^2, in double (backend.h): relative error against a double sum. n = {n} */
static void b_sumsq(const struct op_case *c) {
  size_t n = (size_t)c->n[0];
  char shape[64];
  snprintf(shape, sizeof shape, "n=%zu (summed in double)", n);
  real *x = hrand(n, -2, 2);
  double want = 0;
  for (size_t i = 0; i < n; i++)
    want += (double)x[i] * x[i];
  real *d = BE->alloc((n + 1) * sizeof(real));
  BE->upload(d, x, n * sizeof(real));
  double got = BE->sumsq(d, n);
  BE->release(d);
  double err = want > 0 ? fabs(got - want) / want : fabs(got);
  report(c->op, shape, err <= H.tol, err, H.tol, "differs from the sum in double");
}

/* ---- a step's loss and clipping on the backend: loss, sumsq_to, clip --------------------------------- */

/* The loss of one entry and its derivative, written here from the
 * definitions (objective.h), not from models/kernels/loss.h. */
static double ref_loss(int kind, double p, double t, double *d) {
  double r = p - t, delta = 0.7;
  switch (kind) {
  case 0: /* L1 */
    *d = r > 0 ? 1 : r < 0 ? -1 : 0;
    return fabs(r);
  case 1: /* MSE */
    *d = 2 * r;
    return r * r;
  case 2: /* Huber, delta 0.7 */
    *d = fabs(r) <= delta ? r : delta * (r > 0 ? 1 : -1);
    return fabs(r) <= delta ? r * r / 2 : delta * (fabs(r) - delta / 2);
  default: { /* BCE on logits p, |p| < 6 here, a positive weighing delta 0.7 (class_weight) */
    double s = 1 / (1 + exp(-p));
    *d = (1 - t) * s - delta * t * (1 - s);
    return delta * t * log(1 + exp(-p)) + (1 - t) * log(1 + exp(p));
  }
  }
}

static void check_doubles(const char *what, const double *got, const double *want, int k, double tol) {
  for (int i = 0; i < k; i++) {
    double err = fabs(got[i] - want[i]) / (fabs(want[i]) > 1e-300 ? fabs(want[i]) : 1);
    if (!(err <= tol))
      why("%s[%d] = %.17g, expected %.17g (relative error %.3g > %.3g)", what, i, got[i], want[i], err, tol);
  }
}

/* loss: n = {n, kind (l1, mse, huber, bce), num, den}, x = {gscale}. acc[0]
 * and acc[1] (from 12.5) to 1e-12: L1, MSE and Huber have the host's
 * arithmetic to the bit in the reference's order too, up to the last place;
 * BCE's exp and log1p may differ by an ulp between libraries. In the
 * gradient mode dpred against d acc[0] * gscale / den. */
static void b_loss(const struct op_case *c) {
  static const char *const names[] = {"l1", "mse", "huber", "bce"};
  int n = c->n[0], kind = c->n[1], num = c->n[2], den = c->n[3];
  double gscale = c->x[0];
  char shape[96];
  snprintf(shape, sizeof shape, "n=%d %s share %d/%d scale %g", n, names[kind], num, den, gscale);
  real *pred = hrand((size_t)n, -3, 3), *target = kind == 3 ? hvec((size_t)n) : hrand((size_t)n, -3, 3);
  if (kind == 3)
    for (int i = 0; i < n; i++)
      target[i] = (real)irand(2);
  if (n > 2 && !GRAD) target[1] = pred[1]; /* r = 0: the sign's 0 */
  real *dref = hvec((size_t)n), *ds = hvec((size_t)n);
  double sum = 0;
  for (int i = 0; i < n; i++) {
    double d;
    sum += ref_loss(kind, pred[i], target[i], &d);
    double g = d / n * num / den * gscale;
    dref[i] = (real)g;
    ds[i] = (real)(fabs(g) + 1e-30);
  }
  double want[2] = {sum / n * num, 12.5 + sum / n * num};
  real *d_pred = in_r("pred", pred, (size_t)n), *d_target = in_r("target", target, (size_t)n);
  real *d_dpred = out_over("dpred", (size_t)n, dref, ds);
  double *acc = BE->alloc(4 * sizeof(double));
  g_var(d_pred, d_dpred);
  g_out_d(acc, gscale / den);
#define LOSS_CALL BE->loss(d_dpred, acc, d_pred, d_target, n, kind, 0.7, num, den, gscale)
  BWD_RUN(c->op, shape, LOSS_CALL, {
    double start[2] = {777, 12.5}, got[2];
    BE->upload(acc, start, sizeof start);
    LOSS_CALL;
    BE->download(got, acc, sizeof got);
    check_doubles("acc", got, want, 2, 1e-12);
  });
#undef LOSS_CALL
  BE->release(acc);
}

/* sumsq_to then clip, as se3_net_clip_queued calls them: n = {n}, x =
 * {unscale, max_norm}; the sum of squares and the norm to 1e-9. */
static void b_clip(const struct op_case *c) {
  size_t n = (size_t)c->n[0];
  double unscale = c->x[0], max_norm = c->x[1];
  char shape[96];
  snprintf(shape, sizeof shape, "n=%zu unscale=%g max_norm=%g", n, unscale, max_norm);
  real *x = hrand(n, -2, 2), *y = hvec(n), *ys = hvec(n);
  double ss = 0;
  for (size_t i = 0; i < n; i++)
    ss += (double)x[i] * x[i];
  double norm = sqrt(ss) / unscale, f = 1;
  if (max_norm > 0 && norm > max_norm)
    f = max_norm / norm / unscale;
  else
    f = 1 / unscale;
  for (size_t i = 0; i < n; i++) {
    y[i] = (real)(x[i] * f);
    ys[i] = (real)(fabs(x[i] * f) + 1e-30);
  }
  double want[2] = {ss, norm};
  real *d_x = out_inplace("x", n, x, y, ys);
  double *dev = BE->alloc(4 * sizeof(double));
  H_RUN(c->op, shape, {
    double got[2];
    BE->sumsq_to(dev + 2, d_x, n);
    BE->clip(d_x, n, dev + 2, unscale, max_norm, dev + 3);
    BE->download(got, dev + 2, sizeof got);
    check_doubles("sum of squares, norm", got, want, 2, tol_of(T_DBL));
  });
  BE->release(dev);
}

/* ---- bases from relative positions ---------------------------------------------------------------- */

/* Each edge's basis against models/basis.c's basis_edge on the host (the
 * same double arithmetic; a GPU may fuse multiply-adds, so a value may
 * differ in its last float place): relative to |value| + 1e-6.
 * Directions of every kind, a zero vector (the degree-0 harmonic only), very
 * short and very long vectors. n = {E, max_degree} */
static void b_bases(const struct op_case *c) {
  int E = c->n[0];
  struct basis_plan plan;
  if (basis_plan_init(&plan, c->n[1])) {
    fprintf(stderr, "test_backend_ops: out of memory\n");
    exit(1);
  }
  char shape[64];
  snprintf(shape, sizeof shape, "E=%d max_degree=%d (%zu values an edge)", E, c->n[1], plan.per_edge);
  size_t per = plan.per_edge;
  float *rel = hmem((size_t)(E > 0 ? E : 1) * 3 * sizeof(float));
  for (int e = 0; e < E; e++)
    for (int k = 0; k < 3; k++)
      rel[3 * e + k] = (float)uni(-4, 4);
  if (E > 3) {
    rel[0] = rel[1] = rel[2] = 0;                  /* zero */
    rel[3] = 1e-30f, rel[4] = -2e-30f, rel[5] = 0; /* tiny */
    rel[6] = 0, rel[7] = 0, rel[8] = -3e30f;       /* huge, on an axis */
  }
  real *ref = hvec((size_t)E * per + 1), *sc = hvec((size_t)E * per + 1);
  float *one = hmem(per * sizeof(float));
  for (int e = 0; e < E; e++) {
    basis_edge(&plan, rel + 3 * e, one);
    for (size_t k = 0; k < per; k++) {
      ref[(size_t)e * per + k] = one[k];
      sc[(size_t)e * per + k] = (real)(fabs((double)one[k]) + 1e-6);
    }
  }
  float *drel = BE->alloc((size_t)(E > 0 ? E : 1) * 3 * sizeof(float));
  BE->upload(drel, rel, (size_t)E * 3 * sizeof(float));
  struct se3_error perr;
  if (BE->prepare_bases && BE->prepare_bases(&plan, &perr)) {
    fprintf(stderr, "test_backend_ops: %s\n", se3_error_str(&perr).s);
    exit(1);
  }
  real *d_out = out_over("basis", (size_t)E * per, ref, sc);
  H_RUN(c->op, shape, CHECK_RC("bases", BE->bases(d_out, drel, E, &plan)));
  BE->release(drel);
  basis_plan_free(&plan);
}

/* The bases in recorded work (CUDA graphs; skipped where the backend
 * records nothing): for a plan not prepared (prepare_bases) bases fails,
 * spoiling a recording (record_end gives NULL) without a call the device
 * would refuse inside one, and eagerly with sync's message naming
 * prepare_bases; prepared, the bases are recorded and each replay computes
 * them (T_BASIS). n = {E, max_degree}: a degree no case before prepared. */
static void b_bases_recorded(const struct op_case *c) {
  int E = c->n[0];
  char shape[96];
  snprintf(shape, sizeof shape, "E=%d max_degree=%d: not prepared, then prepared, replayed", E, c->n[1]);
  if (!BE->record_begin || !BE->prepare_bases) {
    printf("skip %-22s %-64s (%s records nothing)\n", c->op, shape, BE->name);
    return;
  }
  struct basis_plan plan;
  if (basis_plan_init(&plan, c->n[1])) {
    fprintf(stderr, "test_backend_ops: out of memory\n");
    exit(1);
  }
  size_t per = plan.per_edge, n = (size_t)E * per;
  float *rel = hmem((size_t)E * 3 * sizeof(float)), *one = hmem(per * sizeof(float));
  real *ref = hvec(n), *got = hvec(n);
  for (int e = 0; e < E; e++) {
    for (int k = 0; k < 3; k++)
      rel[3 * e + k] = (float)uni(-4, 4);
    basis_edge(&plan, rel + 3 * e, one);
    for (size_t k = 0; k < per; k++)
      ref[(size_t)e * per + k] = one[k];
  }
  float *drel = BE->alloc((size_t)E * 3 * sizeof(float));
  real *out = BE->alloc(n * sizeof(real));
  BE->upload(drel, rel, (size_t)E * 3 * sizeof(float));
  struct se3_error err;
  double worst = 0, tol = tol_of(T_BASIS);
  H.why[0] = 0;
  if (BE->record_begin()) {
    why("record_begin refused");
  } else {
    int rc = BE->bases(out, drel, E, &plan);
    void *rec = BE->record_end();
    if (!rc || rec) why("not prepared, recorded: bases returned %d, record_end %s", rc, rec ? "a recording" : "NULL");
    if (rec) BE->record_free(rec);
  }
  int rc = BE->bases(out, drel, E, &plan), failed = BE->sync(&err);
  if (!rc || !failed || !strstr(se3_error_str(&err).s, "prepare_bases"))
    why("not prepared, eager: bases returned %d, sync %s", rc, failed ? se3_error_str(&err).s : "no failure");
  void *rec = NULL;
  if (BE->prepare_bases(&plan, &err))
    why("prepare_bases: %s", se3_error_str(&err).s);
  else if (BE->record_begin())
    why("record_begin refused after prepare_bases");
  else {
    rc = BE->bases(out, drel, E, &plan);
    rec = BE->record_end(); /* (both, whatever bases returned: the recording is closed) */
    if (rc || !rec) why("prepared, recorded: bases returned %d, record_end %s", rc, rec ? "a recording" : "NULL");
  }
  for (int r = 1; r <= 2 && rec; r++) { /* each replay writes the bases anew */
    BE->zero(out, n * sizeof(real));
    if (BE->replay(rec)) why("replay %d: stale at once", r);
    BE->download(got, out, n * sizeof(real));
    for (size_t i = 0; i < n; i++) {
      double e = fabs((double)got[i] - ref[i]) / (fabs((double)ref[i]) + 1e-6);
      if (!(e <= worst)) worst = e;
    }
    if (!(worst <= tol)) why("replay %d: the bases differ from basis_edge's", r);
  }
  if (rec) BE->record_free(rec);
  if (BE->sync(&err)) why("sync: %s", se3_error_str(&err).s);
  report(c->op, shape, !H.why[0], worst, tol, H.why);
  H.why[0] = 0;
  BE->release(drel);
  BE->release(out);
  basis_plan_free(&plan);
}

/* ---- copies back that do not wait: host_alloc, download_queued, fences ------------------------------- */

/* x uploaded; its copy queued into pinned host memory and fenced; then x
 * scaled by 2 on the device and copied again behind a second fence. After
 * the waits the first copy holds x (it ran before the scaling: the queue's
 * order) and the second 2 x, exactly; the fences can be marked again. n = {n} */
static void b_pipeline(const struct op_case *c) {
  size_t n = (size_t)c->n[0];
  char shape[64];
  snprintf(shape, sizeof shape, "n=%zu, two copies in flight", n);
  real *x = hrand(n, -3, 3);
  real *d = BE->alloc((n + 1) * sizeof(real));
  real *h[2] = {BE->host_alloc((n + 1) * sizeof(real)), BE->host_alloc((n + 1) * sizeof(real))};
  void *f[2] = {BE->fence_new(), BE->fence_new()};
  struct se3_error err;
  se3_error_clear(&err);
  int ok = d && h[0] && h[1] && f[0] && f[1];
  size_t bad = 0;
  for (int round = 0; ok && round < 2; round++) {
    BE->upload(d, x, n * sizeof(real));
    BE->download_queued(h[0], d, n * sizeof(real));
    BE->fence_mark(f[0]);
    BE->scale(d, n, 2.0);
    BE->download_queued(h[1], d, n * sizeof(real));
    BE->fence_mark(f[1]);
    if (BE->fence_wait(f[1], &err) || BE->fence_wait(f[0], &err)) {
      ok = 0;
      break;
    }
    for (size_t i = 0; i < n; i++)
      bad += h[0][i] != x[i] || h[1][i] != (real)(x[i] * 2.0);
    for (size_t i = 0; i < n; i++) /* the next round must write them again */
      h[0][i] = h[1][i] = (real)NAN;
  }
  if (!ok)
    report(c->op, shape, 0, 1, 0, err.kind != SE3_ERR_NONE ? se3_error_str(&err).s : "out of memory or fences");
  else
    report(c->op, shape, bad == 0, (double)bad, 0, "copies differ (the queue's order, or lost)");
  for (int i = 0; i < 2; i++) {
    BE->host_release(h[i]);
    BE->fence_free(f[i]);
  }
  BE->release(d);
}

/* Uploads larger than the CUDA backend's pinned staging halves (32 MiB), one
 * after another from ONE host buffer rewritten as soon as each upload
 * returns (backend.h: the caller may reuse it at once), then small ones
 * between them: every device copy must hold what its host buffer held
 * when its upload was called. n = {n, count} */
static void b_upload_stream(const struct op_case *c) {
  size_t n = (size_t)c->n[0];
  int count = c->n[1];
  char shape[64];
  snprintf(shape, sizeof shape, "%d uploads of n=%zu from one host buffer", count, n);
  real *host = hvec(n), *got = hvec(n), *d[8] = {0}, *small[8] = {0};
  size_t bad = 0;
  int ok = count <= 8;
  for (int k = 0; ok && k < count; k++) {
    if (!(d[k] = BE->alloc(n * sizeof(real))) || !(small[k] = BE->alloc(sizeof(real)))) ok = 0;
  }
  for (int k = 0; ok && k < count; k++) {
    for (size_t i = 0; i < n; i++)
      host[i] = (real)(k * 1000003.0 + (double)(i % 1000));
    BE->upload(d[k], host, n * sizeof(real));
    real v = (real)(-k - 1);
    BE->upload(small[k], &v, sizeof v);
  }
  for (int k = 0; ok && k < count; k++) {
    BE->download(got, d[k], n * sizeof(real));
    for (size_t i = 0; i < n; i++)
      bad += got[i] != (real)(k * 1000003.0 + (double)(i % 1000));
    real v;
    BE->download(&v, small[k], sizeof v);
    bad += v != (real)(-k - 1);
  }
  struct se3_error err;
  se3_error_clear(&err);
  if (ok && BE->sync(&err)) ok = 0;
  report(c->op, shape, ok && bad == 0, ok ? (double)bad : 1, 0,
         ok ? "a copy holds other bytes than its host buffer did"
            : (err.kind != SE3_ERR_NONE ? se3_error_str(&err).s : "out of memory"));
  for (int k = 0; k < count && k < 8; k++) {
    BE->release(d[k]);
    BE->release(small[k]);
  }
}

/* ---- the cases ------------------------------------------------------------------------------------------ */

/* clang-format off */
#define FIB(a, b, c, d) {{a, b, c, d}}
#define Q32 FIB(32, 32, 32, 32)
#define ODD_IN FIB(3, 5, 3, 5)
#define ODD_OUT FIB(5, 3, 5, 3)
#define K16 FIB(16, 16, 16, 16)
#define ODD_K FIB(2, 4, 0, 2)
#define ODD_V FIB(4, 2, 6, 0)
/* clang-format on */
static const int MOLS[] = {3, 0, 1, 5, 2}, ONE_MOL[] = {1};

/* op, builder, tolerance class, rng (a seed, 0: go on, SAME), n, flags, then
 * the builder's named fields; an entry names only what its builder reads
 * (the rest is 0, hence the pragma) */
/* clang-format off */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
static const struct op_case CASES[] = {
  {"table", b_table, EXACT},
  {"memory", b_memory, EXACT, 1},

  {"linear_forward", b_mm, T_SUM, 2, {1, 1, 1}},
  {"linear_backward", b_mm, T_SUM, SAME, {1, 1, 1}, FD},
  {"linear_forward", b_mm, T_SUM, 0, {7, 3, 5}},
  {"linear_backward", b_mm, T_SUM, SAME, {7, 3, 5}, FD},
  {"linear_forward", b_mm, T_SUM, 0, {96, 32, 32}},
  {"linear_backward", b_mm, T_SUM, SAME, {96, 32, 32}, FD},
  {"linear_forward", b_mm, T_SUM, 0, {45, 48, 32}},
  {"linear_backward", b_mm, T_SUM, SAME, {45, 48, 32}, FD | NO_DX},
  {"linear_forward", b_mm, T_SUM, 0, {0, 4, 3}},
  {"linear_backward", b_mm, T_SUM, SAME, {0, 4, 3}, FD},
  {"linear_forward", b_mm, T_SUM, 0, {300, 13, 7}},
  {"linear_backward", b_mm, T_SUM, SAME, {300, 13, 7}, FD},
  {"dense_forward", b_mm, T_SUM, 0, {13, 6, 32}, BIAS},
  {"dense_backward", b_mm, T_SUM, SAME, {13, 6, 32}, FD | BIAS},
  {"dense_forward", b_mm, T_SUM, 0, {40, 32, 32}, BIAS},
  {"dense_backward", b_mm, T_SUM, SAME, {40, 32, 32}, FD | BIAS | NO_DX},
  {"dense_forward", b_mm, T_SUM, 0, {3, 128, 128}, BIAS},
  {"dense_backward", b_mm, T_SUM, SAME, {3, 128, 128}, FD | BIAS},
  {"dense_forward", b_mm, T_SUM, 0, {4, 128, 1}, BIAS},
  {"dense_backward", b_mm, T_SUM, SAME, {4, 128, 1}, FD | BIAS},
  {"dense_forward", b_mm, T_SUM, 0, {5, 7, 3}},
  {"dense_backward", b_mm, T_SUM, SAME, {5, 7, 3}, FD},
  {"dense_forward", b_mm, T_SUM, 0, {6, 5, 4}, BIAS},
  {"dense_backward", b_mm, T_SUM, SAME, {6, 5, 4}, FD | BIAS | NO_DB},
  {"dense_forward", b_mm, T_SUM, 0, {0, 6, 32}, BIAS},
  {"dense_backward", b_mm, T_SUM, SAME, {0, 6, 32}, FD | BIAS},
  /* rows over a block's 256 threads; the weights' gradient alone */
  {"dense_forward", b_mm, T_SUM, 0, {300, 13, 7}, BIAS},
  {"dense_backward", b_mm, T_SUM, SAME, {300, 13, 7}, FD | BIAS},
  {"dense_backward", b_mm, T_SUM, SAME, {300, 13, 7}, FD | BIAS | NO_DX | NO_DB},
  /* every array one real past 256-byte alignment: a backend whose fast way
   * needs aligned operands (CUDA: cuBLASLt's bias epilogue wants a 16-byte
   * aligned bias) must take its other way, and give the same results */
  {"dense_forward", b_mm, T_SUM, 0, {40, 32, 32}, BIAS | SHIFT},
  {"dense_backward", b_mm, T_SUM, SAME, {40, 32, 32}, FD | BIAS | SHIFT},
  {"dense_forward", b_mm, T_SUM, 0, {13, 6, 32}, BIAS | SHIFT},
  {"dense_backward", b_mm, T_SUM, SAME, {13, 6, 32}, FD | BIAS | SHIFT},

  {"norm_forward", b_norm, T_MAG, 3, {6, 1, 32}},
  {"norm_backward", b_norm, T_MAG, SAME, {6, 1, 32}, FD},
  {"norm_forward", b_norm, T_MAG, 0, {6, 3, 32}},
  {"norm_backward", b_norm, T_MAG, SAME, {6, 3, 32}, FD},
  {"norm_forward", b_norm, T_MAG, 0, {4, 7, 32}},
  {"norm_backward", b_norm, T_MAG, SAME, {4, 7, 32}, FD},
  {"norm_forward", b_norm, T_MAG, 0, {5, 5, 3}},
  {"norm_backward", b_norm, T_MAG, SAME, {5, 5, 3}, FD},
  {"norm_forward", b_norm, T_MAG, 0, {1, 3, 5}},
  {"norm_backward", b_norm, T_MAG, SAME, {1, 3, 5}, FD},
  {"norm_forward", b_norm, T_MAG, 0, {50, 5, 12}},
  {"norm_backward", b_norm, T_MAG, SAME, {50, 5, 12}, FD},
  {"norm_backward", b_norm, T_MAG, SAME, {50, 5, 12}, FD | DX_IS_DY},

  {"radial_hidden_forward", b_radial, T_MAG, 4, {37, 6, 32}},
  {"radial_hidden_backward", b_radial, T_MAG, SAME, {37, 6, 32}, FD | NO_DX},
  {"radial_hidden_forward", b_radial, T_MAG, 0, {11, 6, 7}},
  {"radial_hidden_backward", b_radial, T_MAG, SAME, {11, 6, 7}, FD},
  {"radial_hidden_forward", b_radial, T_MAG, 0, {1, 3, 5}},
  {"radial_hidden_backward", b_radial, T_MAG, SAME, {1, 3, 5}, FD},
  {"radial_hidden_forward", b_radial, T_MAG, 0, {0, 6, 32}},
  {"radial_hidden_backward", b_radial, T_MAG, SAME, {0, 6, 32}, FD},
  {"radial_hidden_forward", b_radial, T_MAG, 0, {300, 6, 10}},
  {"radial_hidden_backward", b_radial, T_MAG, SAME, {300, 6, 10}, FD},
  {"radial_hidden_forward", b_radial, T_MAG, 0, {70, 4, 32}},
  {"radial_hidden_backward", b_radial, T_MAG, SAME, {70, 4, 32}, FD},

  {"conv_forward", b_conv, T_SUM, 5, {32, G_BIG}, BIG, .what = "qm9", .f = {Q32, Q32}},
  {"conv_backward", b_conv, T_SUM, SAME, {32, G_BIG}, FD | BIG, .what = "qm9", .f = {Q32, Q32}},
  {"conv_forward", b_conv, T_SUM, 0, {32, G_BIG}, POOL | BIG, .what = "qm9-final", .f = {Q32, FIB(128, 0, 0, 0)}},
  {"conv_backward", b_conv, T_SUM, SAME, {32, G_BIG}, FD | POOL | BIG, .what = "qm9-final",
   .f = {Q32, FIB(128, 0, 0, 0)}},
  {"conv_forward", b_conv, T_SUM, 0, {32, G_SMALL}, .what = "first-block", .f = {FIB(6, 0, 0, 0), FIB(32, 16, 16, 16)}},
  {"conv_backward", b_conv, T_SUM, SAME, {32, G_SMALL}, FD, .what = "first-block",
   .f = {FIB(6, 0, 0, 0), FIB(32, 16, 16, 16)}},
  {"conv_forward", b_conv, T_SUM, 0, {7, G_SMALL}, .what = "odd", .f = {ODD_IN, ODD_OUT}},
  {"conv_backward", b_conv, T_SUM, SAME, {7, G_SMALL}, FD, .what = "odd", .f = {ODD_IN, ODD_OUT}},
  {"conv_forward", b_conv, T_SUM, 0, {7, G_SMALL}, POOL, .what = "odd", .f = {ODD_IN, ODD_OUT}},
  {"conv_backward", b_conv, T_SUM, SAME, {7, G_SMALL}, FD | POOL, .what = "odd", .f = {ODD_IN, ODD_OUT}},
  {"conv_forward", b_conv, T_SUM, 0, {7, G_BIG}, POOL, .what = "odd", .f = {ODD_IN, ODD_OUT}},
  {"conv_backward", b_conv, T_SUM, SAME, {7, G_BIG}, FD | POOL | NO_DX1 | NO_DS2, .what = "odd", .f = {ODD_IN, ODD_OUT}},
  {"conv_forward", b_conv, T_SUM, 0, {7, G_SMALL}, .what = "odd", .f = {FIB(3, 5, 0, 0), FIB(5, 0, 3, 0)}},
  {"conv_backward", b_conv, T_SUM, SAME, {7, G_SMALL}, FD | NO_DW3, .what = "odd", .f = {FIB(3, 5, 0, 0), FIB(5, 0, 3, 0)}},
  {"conv_forward", b_conv, T_SUM, 0, {7, G_NONE}, .what = "odd", .f = {ODD_IN, ODD_OUT}},
  {"conv_backward", b_conv, T_SUM, SAME, {7, G_NONE}, FD, .what = "odd", .f = {ODD_IN, ODD_OUT}},
  {"conv_forward", b_conv, T_SUM, 0, {7, G_NONE}, POOL, .what = "odd", .f = {ODD_IN, ODD_OUT}},
  {"conv_backward", b_conv, T_SUM, SAME, {7, G_NONE}, FD | POOL, .what = "odd", .f = {ODD_IN, ODD_OUT}},
  {"conv_forward", b_conv, T_SUM, 0, {7, G_ONE}, POOL, .what = "odd", .f = {ODD_IN, ODD_OUT}},
  {"conv_backward", b_conv, T_SUM, SAME, {7, G_ONE}, FD | POOL, .what = "odd", .f = {ODD_IN, ODD_OUT}},
  /* the weights' gradient alone */
  {"conv_forward", b_conv, T_SUM, 0, {7, G_SMALL}, .what = "odd", .f = {ODD_IN, ODD_OUT}},
  {"conv_backward", b_conv, T_SUM, SAME, {7, G_SMALL}, FD | NO_DX | NO_DS2, .what = "odd", .f = {ODD_IN, ODD_OUT}},
  /* a radial network wider than 32, 40 channels of one degree */
  {"conv_forward", b_conv, T_SUM, 0, {40, G_BIG}, BIG, .what = "wide", .f = {FIB(5, 0, 3, 0), FIB(7, 40, 0, 2)}},
  {"conv_backward", b_conv, T_SUM, SAME, {40, G_BIG}, FD | BIG, .what = "wide", .f = {FIB(5, 0, 3, 0), FIB(7, 40, 0, 2)}},
  {"conv_forward", b_conv, T_SUM, 0, {40, G_BIG}, POOL | BIG, .what = "wide", .f = {FIB(5, 0, 3, 0), FIB(7, 40, 0, 2)}},
  {"conv_backward", b_conv, T_SUM, SAME, {40, G_BIG}, FD | POOL | BIG, .what = "wide",
   .f = {FIB(5, 0, 3, 0), FIB(7, 40, 0, 2)}},
  /* plans of max degree 2 and 1 (fewer basis values an edge), degrees missing */
  {"conv_forward", b_conv, T_SUM, 0, {8, G_BIG, 2}, .what = "gaps", .f = {FIB(6, 0, 4, 0), FIB(0, 5, 3, 0)}},
  {"conv_backward", b_conv, T_SUM, SAME, {8, G_BIG, 2}, FD, .what = "gaps", .f = {FIB(6, 0, 4, 0), FIB(0, 5, 3, 0)}},
  {"conv_forward", b_conv, T_SUM, 0, {8, G_BIG, 2}, POOL, .what = "gaps", .f = {FIB(6, 0, 4, 0), FIB(0, 5, 3, 0)}},
  {"conv_backward", b_conv, T_SUM, SAME, {8, G_BIG, 2}, FD | POOL, .what = "gaps",
   .f = {FIB(6, 0, 4, 0), FIB(0, 5, 3, 0)}},
  {"conv_forward", b_conv, T_SUM, 0, {8, G_NONE, 2}, POOL, .what = "gaps", .f = {FIB(6, 0, 4, 0), FIB(0, 5, 3, 0)}},
  {"conv_backward", b_conv, T_SUM, SAME, {8, G_NONE, 2}, FD | POOL, .what = "gaps",
   .f = {FIB(6, 0, 4, 0), FIB(0, 5, 3, 0)}},
  {"conv_forward", b_conv, T_SUM, 0, {8, G_BIG, 1}, POOL, .what = "final", .f = {FIB(8, 8, 0, 0), FIB(16, 0, 0, 0)}},
  {"conv_backward", b_conv, T_SUM, SAME, {8, G_BIG, 1}, FD | POOL, .what = "final",
   .f = {FIB(8, 8, 0, 0), FIB(16, 0, 0, 0)}},
  {"conv_backward", b_conv, T_SUM, SAME, {8, G_BIG, 1}, FD | POOL | NO_DX | NO_DS2, .what = "final",
   .f = {FIB(8, 8, 0, 0), FIB(16, 0, 0, 0)}},
  /* the fused path's fallbacks (gpu_conv: fused): a radial network wider
   * than 64 takes the direct kernels; at degree 3 so many channels that
   * ds2's tiles do not fit shared memory keep dR stored for the GEMMs */
  {"conv_forward", b_conv, T_SUM, 0, {72, G_SMALL}, .what = "wide-radial", .f = {FIB(2, 2, 0, 0), FIB(3, 2, 0, 0)}},
  {"conv_backward", b_conv, T_SUM, SAME, {72, G_SMALL}, .what = "wide-radial",
   .f = {FIB(2, 2, 0, 0), FIB(3, 2, 0, 0)}},
  {"conv_forward", b_conv, T_SUM, 0, {8, G_SMALL}, .what = "many-deg3", .f = {FIB(1, 1, 1, 1), FIB(0, 0, 0, 200)}},
  {"conv_backward", b_conv, T_SUM, SAME, {8, G_SMALL}, .what = "many-deg3", .f = {FIB(1, 1, 1, 1), FIB(0, 0, 0, 200)}},

  /* the forward's z: T_SUM; its weights alpha: T_MAG (b_attn) */
  {"attn_forward", b_attn, T_SUM, 6, {8, G_BIG}, .what = "qm9", .f = {K16, K16}},
  {"attn_backward", b_attn, T_MAG, SAME, {8, G_BIG}, FD, .what = "qm9", .f = {K16, K16}},
  {"attn_forward", b_attn, T_SUM, 0, {8, G_BIG}, W, .what = "qm9", .f = {K16, K16}},
  {"attn_backward", b_attn, T_MAG, SAME, {8, G_BIG}, FD | W, .what = "qm9", .f = {K16, K16}},
  {"attn_forward", b_attn, T_SUM, 0, {8, G_SMALL}, W, .what = "first-block", .f = {FIB(16, 0, 0, 0), K16}},
  {"attn_backward", b_attn, T_MAG, SAME, {8, G_SMALL}, FD | W, .what = "first-block", .f = {FIB(16, 0, 0, 0), K16}},
  {"attn_forward", b_attn, T_SUM, 0, {2, G_SMALL}, .what = "odd", .f = {ODD_K, ODD_V}},
  {"attn_backward", b_attn, T_MAG, SAME, {2, G_SMALL}, FD, .what = "odd", .f = {ODD_K, ODD_V}},
  {"attn_forward", b_attn, T_SUM, 0, {2, G_SMALL}, W, .what = "odd", .f = {ODD_K, ODD_V}},
  {"attn_backward", b_attn, T_MAG, SAME, {2, G_SMALL}, FD | W | NO_DZ1, .what = "odd", .f = {ODD_K, ODD_V}},
  {"attn_forward", b_attn, T_SUM, 0, {1, G_BIG}, W, .what = "odd", .f = {ODD_K, ODD_V}},
  {"attn_backward", b_attn, T_MAG, SAME, {1, G_BIG}, FD | W | NO_DQ, .what = "odd", .f = {ODD_K, ODD_V}},
  {"attn_forward", b_attn, T_SUM, 0, {2, G_SMALL}, .what = "no-keys", .f = {FIB(0, 0, 0, 0), FIB(2, 2, 0, 0)}},
  {"attn_backward", b_attn, T_MAG, SAME, {2, G_SMALL}, FD, .what = "no-keys", .f = {FIB(0, 0, 0, 0), FIB(2, 2, 0, 0)}},
  {"attn_forward", b_attn, T_SUM, 0, {2, G_NONE}, W, .what = "odd", .f = {ODD_K, ODD_V}},
  {"attn_backward", b_attn, T_MAG, SAME, {2, G_NONE}, FD | W, .what = "odd", .f = {ODD_K, ODD_V}},
  {"attn_forward", b_attn, T_SUM, 0, {2, G_ONE}, .what = "odd", .f = {ODD_K, ODD_V}},
  {"attn_backward", b_attn, T_MAG, SAME, {2, G_ONE}, FD, .what = "odd", .f = {ODD_K, ODD_V}},

  {"scale_rows", b_scale_rows, T_SUM, 7, {17, 32}, FD},
  {"scale_rows", b_scale_rows, T_SUM, 0, {5, 7}, FD},
  {"scale_rows", b_scale_rows, T_SUM, 0, {0, 32}, FD},

  {"pool_max_forward", b_pool, EXACT, 8, {128, 5}, .sizes = MOLS},
  {"pool_max_backward", b_pool, EXACT, SAME, {128, 5}, FD, .sizes = MOLS},
  {"pool_mean_forward", b_pool, T_SUM, SAME, {128, 5}, .sizes = MOLS},
  {"pool_mean_backward", b_pool, T_SUM, SAME, {128, 5}, FD, .sizes = MOLS},
  {"pool_max_forward", b_pool, EXACT, 0, {7, 5}, .sizes = MOLS},
  {"pool_max_backward", b_pool, EXACT, SAME, {7, 5}, FD, .sizes = MOLS},
  {"pool_mean_forward", b_pool, T_SUM, SAME, {7, 5}, .sizes = MOLS},
  {"pool_mean_backward", b_pool, T_SUM, SAME, {7, 5}, FD, .sizes = MOLS},
  {"pool_max_forward", b_pool, EXACT, 0, {3, 1}, .sizes = ONE_MOL},
  {"pool_max_backward", b_pool, EXACT, SAME, {3, 1}, FD, .sizes = ONE_MOL},
  {"pool_mean_forward", b_pool, T_SUM, SAME, {3, 1}, .sizes = ONE_MOL},
  {"pool_mean_backward", b_pool, T_SUM, SAME, {3, 1}, FD, .sizes = ONE_MOL},

  {"concat_rows", b_concat, EXACT, 9, {16, 32, 27}},
  {"split_rows", b_split, EXACT, 0, {16, 32, 27}},
  {"split_rows", b_split, EXACT, 0, {16, 32, 27}, NO_Y},
  {"split_rows", b_split, EXACT, 0, {16, 32, 27}, NO_X},
  {"concat_rows", b_concat, EXACT, 0, {3, 5, 7}},
  {"split_rows", b_split, EXACT, 0, {3, 5, 7}},
  {"split_rows", b_split, EXACT, 0, {3, 5, 7}, NO_Y},
  {"split_rows", b_split, EXACT, 0, {3, 5, 7}, NO_X},
  {"concat_rows", b_concat, EXACT, 0, {6, 0, 9}},
  {"split_rows", b_split, EXACT, 0, {6, 0, 9}},
  {"split_rows", b_split, EXACT, 0, {6, 0, 9}, NO_Y},
  {"concat_rows", b_concat, EXACT, 0, {4, 4, 0}},
  {"split_rows", b_split, EXACT, 0, {4, 4, 0}},
  {"split_rows", b_split, EXACT, 0, {4, 4, 0}, NO_Y},
  {"split_rows", b_split, EXACT, 0, {4, 4, 0}, NO_X},
  {"add", b_add, T_SUM, 0, {1}},
  {"relu", b_relu, EXACT, 0, {1}},
  {"relu_backward", b_relu, EXACT, SAME, {1}, FD},
  {"add", b_add, T_SUM, 0, {1001}},
  {"relu", b_relu, EXACT, 0, {1001}},
  {"relu_backward", b_relu, EXACT, SAME, {1001}, FD},
  {"add", b_add, T_SUM, 0, {0}},
  {"relu", b_relu, EXACT, 0, {0}},
  {"relu_backward", b_relu, EXACT, SAME, {0}, FD},
  {"edge_weights", b_edge_weights, T_SUM, 0, {41, SE3_ENVELOPE_NONE, 0}},
  {"edge_weights", b_edge_weights, T_SUM, 0, {41, SE3_ENVELOPE_NONE, 1}},
  {"edge_weights", b_edge_weights, T_SUM, 0, {41, SE3_ENVELOPE_COSINE, 0}},
  {"edge_weights", b_edge_weights, T_SUM, 0, {41, SE3_ENVELOPE_COSINE, 1}},
  {"edge_weights", b_edge_weights, T_SUM, 0, {41, SE3_ENVELOPE_POLY, 0}},
  {"edge_weights", b_edge_weights, T_SUM, 0, {41, SE3_ENVELOPE_POLY, 1}},
  {"edge_weights", b_edge_weights, T_SUM, 0, {0, SE3_ENVELOPE_POLY, 0}},

  {"adam_step", b_adam, T_SUM, 10, {1, 1, 1}, .x = {0.01}},
  {"adam_step_at", b_adam, T_SUM, SAME, {1, 1, 1}, .x = {0.01}},
  {"adam_step", b_adam, T_SUM, 0, {1001, 1, 1}, .x = {0.01}},
  {"adam_step_at", b_adam, T_SUM, SAME, {1001, 1, 1}, .x = {0.01}},
  {"adam_step", b_adam, T_SUM, 0, {1001, 0, 7}, .x = {0.05}},
  {"adam_step_at", b_adam, T_SUM, SAME, {1001, 0, 7}, .x = {0.05}},
  {"adam_step", b_adam, T_SUM, 0, {33, 1, 0}, .x = {0.0}},
  {"adam_step_at", b_adam, T_SUM, SAME, {33, 1, 0}, .x = {0.0}},
  {"adam_step_at", b_adam, T_SUM, 0, {1001, 1, 7, 1}, .x = {0.01}},
  {"adam_step_at", b_adam, EXACT, 0, {1001, 1, 7, 2}, .x = {0.01}},
  {"adam_step_at", b_adam, T_SUM, 0, {1001, 1, 7, 3}, .x = {0.01}},
  {"record/replay", b_record, EXACT, 0, {1001}},
  {"record/replay", b_record, EXACT, 0, {1}},
  {"sumsq", b_sumsq, T_DBL, 0, {0}},
  {"sumsq", b_sumsq, T_DBL, 0, {1}},
  {"sumsq", b_sumsq, T_DBL, 0, {12345}},
  {"add_f64", b_add_f64, EXACT, 0, {1001}},
  {"add_f64", b_add_f64, EXACT, 0, {1}},
  {"add_f64", b_add_f64, EXACT, 0, {0}},
  {"scale", b_scale, T_SUM, 0, {1001}, .x = {0.37}},
  {"scale", b_scale, T_SUM, 0, {5}, .x = {0}},
  {"scale", b_scale, T_SUM, 0, {0}, .x = {2}},
  {"allreduce", b_allreduce, EXACT, 0, {1001}},
  {"allreduce", b_allreduce, EXACT, 0, {0}},

  {"loss", b_loss, T_REAL, 11, {240, 0, 240, 240}, FD, .x = {1}},
  {"loss", b_loss, T_REAL, 0, {37, 0, 37, 75}, FD, .x = {65536}},
  {"loss", b_loss, T_REAL, 0, {240, 1, 240, 240}, FD, .x = {1}},
  {"loss", b_loss, T_REAL, 0, {37, 1, 37, 75}, FD, .x = {65536}},
  {"loss", b_loss, T_REAL, 0, {240, 2, 240, 240}, FD, .x = {1}},
  {"loss", b_loss, T_REAL, 0, {37, 2, 37, 75}, FD, .x = {65536}},
  {"loss", b_loss, T_REAL, 0, {240, 3, 240, 240}, FD, .x = {1}},
  {"loss", b_loss, T_REAL, 0, {37, 3, 37, 75}, FD, .x = {65536}},
  {"loss", b_loss, T_REAL, 0, {1, 1, 1, 1}, FD, .x = {1}},
  {"sumsq_to+clip", b_clip, T_REAL, 0, {12345}, .x = {1, 5.0}},    /* clipped: the norm is about 128 */
  {"sumsq_to+clip", b_clip, T_REAL, 0, {12345}, .x = {1, 1000}},   /* not clipped: untouched */
  {"sumsq_to+clip", b_clip, T_REAL, 0, {1001}, .x = {1024, 0.01}}, /* loss-scaled and clipped */
  {"sumsq_to+clip", b_clip, T_REAL, 0, {1001}, .x = {1024, 0}},    /* loss-scaled, no clipping */
  {"sumsq_to+clip", b_clip, T_REAL, 0, {0}, .x = {1, 1}},

  {"bases", b_bases, T_BASIS, 13, {37, 3}},
  {"bases", b_bases, T_BASIS, 0, {1001, 2}},
  {"bases", b_bases, T_BASIS, 0, {5, 5}},
  {"bases", b_bases, T_BASIS, 0, {0, 3}},
  {"bases (recorded)", b_bases_recorded, T_BASIS, 0, {5, 4}}, /* max_degree 4: no case above prepares it */

  {"download_queued+fence", b_pipeline, EXACT, 12, {100003}},
  {"download_queued+fence", b_pipeline, EXACT, 0, {1}},
  {"upload (staged)", b_upload_stream, EXACT, 0, {9000001, 5}}, /* 36 MB each: every one crosses a staging half */
  {"upload (staged)", b_upload_stream, EXACT, 0, {1000, 3}},
};
#pragma GCC diagnostic pop
/* clang-format on */

int main(int argc, char **argv) {
  const char *dev = NULL, *prec = "fp32", *conv = "direct";
  int bad = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--precision") && i + 1 < argc)
      prec = argv[++i];
    else if (!strcmp(argv[i], "--conv") && i + 1 < argc)
      conv = argv[++i];
    else if (!strcmp(argv[i], "--grad"))
      GRAD = 1;
    else if (!strcmp(argv[i], "--quick"))
      QUICK = 1;
    else if (!dev && argv[i][0] != '-')
      dev = argv[i];
    else
      bad = 1;
  }
  enum nn_conv_path cpath = NN_CONV_DIRECT;
  if (nn_conv_path_parse(conv, &cpath)) bad = 1;
  if (bad || !dev || nn_precision_parse(prec, &PREC)) {
    fprintf(stderr, "usage: test_backend_ops cpu|cuda|cuda:N [--precision fp32|tf32|bf16|fp16] [--conv direct|gemm|fused] "
                    "[--grad] [--quick]\n");
    return 2;
  }
  if (GRAD && sizeof(real) != sizeof(double)) {
    fprintf(stderr, "test_backend_ops: --grad needs the double build (test_backend_ops_f64): in float round-off "
                    "hides a wrong derivative\n");
    return 2;
  }
  if (!strcmp(dev, "cpu")) {
    if (PREC != NN_PREC_FP32) {
      fprintf(stderr, "test_backend_ops: the CPU backend computes in fp32 only\n");
      return 2;
    }
    BE = nn_backend_cpu();
  } else {
    struct nn_device d;
    struct se3_error err;
    se3_error_clear(&err);
    if (nn_device_parse(dev, &d, &err) || !d.cuda || d.any) {
      fprintf(stderr, "usage: test_backend_ops cpu|cuda|cuda:N [--precision fp32|tf32|bf16|fp16] [--grad]%s%s\n",
              err.kind != SE3_ERR_NONE ? ": " : "", err.message);
      return 2;
    }
#ifdef SE3_OPS_LINKED
    BE = nn_backend_cuda_open(d.index, d.by_rank, PREC, &err);
#else
    BE = nn_backend_open(&d, PREC, &err);
#endif
    if (!BE) {
      printf("test_backend_ops %s (%s): %s\nSKIPPED: no CUDA backend or no GPU here\n", dev, prec,
             se3_error_str(&err).s);
      return SKIP_CODE;
    }
  }
  if (cpath != NN_CONV_DIRECT) {
    if (!BE->set_conv_path) {
      fprintf(stderr, "test_backend_ops: backend %s has one convolution path (--conv %s is for a GPU)\n", BE->name,
              conv);
      return 2;
    }
    BE->set_conv_path(cpath);
  }
  if (GRAD)
    printf("test_backend_ops: backend %s (%s) in double; every backward against central differences of its "
           "forward\n",
           BE->name, BE->device);
  else
    printf("test_backend_ops: backend %s (%s), precision %s; the reference is the CPU in fp32 (layers) and loops in "
           "double (the rest); convolution: %s\n",
           BE->name, BE->device, prec, conv);
  for (int d = 1; d <= NN_MAX_DEG; d++)
    if (basis_plan_init(&PLANS[d], d)) {
      fprintf(stderr, "test_backend_ops: out of memory\n");
      return 1;
    }
  run_cases(CASES, sizeof CASES / sizeof CASES[0]);
  for (int d = 1; d <= NN_MAX_DEG; d++)
    basis_plan_free(&PLANS[d]);
  printf("%d passed, %d failed (%s, %s, conv %s)\n", n_pass, n_fail, BE->name, GRAD ? "finite differences" : prec,
         conv);
  return n_fail ? 1 : 0;
}
