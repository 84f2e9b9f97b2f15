/* test_backend_ops.c — every operation of a backend table (models/backend.h)
 * against the CPU, shape by shape, in the spirit of ggml's test-backend-ops.
 *
 *   test_backend_ops cpu|cuda|cuda:N [--precision fp32|tf32|bf16|fp16]
 *
 * For each operation and shape the inputs are random host arrays (a fixed
 * seed), the expected result is computed on the host (the CPU functions of
 * models/cpu/nn.h for the layers with real arithmetic in them: norm, radial
 * network, convolution, attention; plain loops in double for the linear and
 * dense layers, pooling, the glue, Adam, sumsq, scale, the loss and the
 * clipping), and the operation
 * runs on the backend under test: inputs uploaded with be->alloc/upload, the
 * call made through the table, outputs downloaded.
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
 * Errors. Where the result is a sum of products, each element's error is
 * divided by the sum of the absolute values of its terms (computed by the
 * same formula on absolute values); the tolerance is then 1e-5 for fp32,
 * 2e-3 for tf32 and fp16, 1.6e-2 for bf16 (products of inputs rounded to 10
 * or 7 stored significand bits: 4 times the unit round-off, 2^-11 or 2^-8; under
 * dev/cuda_emu's rounding the worst case reached 0.39 and 0.32 of them). For the layers
 * with normalisations and softmax in them (norm, radial network, attention
 * weights and gradients) the error is divided by |expected| + the root mean
 * square of the output, tolerance 5e-5 (fp32), 2e-2 (tf32, fp16) or 8e-2 (bf16). Data movement (copies, concat, split,
 * relu and its backward, max pooling) must be exact; Adam is compared relative to |p| + lr (|m| + |g|, v + g^2), the
 * envelope weights absolutely, and sumsq, which backend.h says is summed in double, to 1e-9 relative. One line per
 * operation and shape, then a summary.
 *
 * Exit status: 0 all passed, 1 some failed, 77 the backend cannot be opened
 * (this build has no CUDA backend or no GPU: reported as skipped, never as
 * passed), 2 bad arguments.
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/backend.h"
#include "models/cpu/table.h"
#include "models/device.h"
#include "models/basis.h"
#include "models/cpu/nn.h"
#include "models/cpu/optim.h"
#include "models/kernels/adam.h"

#define SKIP_CODE 77

static const struct nn_backend *BE;
static double TOL;     /* relative to the sum of |terms| */
static double TOL_MAG; /* relative to |expected| + rms(expected) */
static int n_pass, n_fail;

/* ---- random numbers (splitmix64) ------------------------------------------- */

static uint64_t rng_state;
static void seed(uint64_t s) { rng_state = s * 0x9e3779b97f4a7c15ULL + 1; }
static double urand(void) { /* [0, 1) */
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return (double)(z >> 11) * 0x1p-53;
}
static double uni(double lo, double hi) { return lo + (hi - lo) * urand(); }
static int irand(int n) { return (int)(urand() * n); }

/* ---- host memory of one case, freed when the case ends ---------------------- */

#define MAX_HOST 1024
static void *host_blocks[MAX_HOST];
static int n_host;

static void *hmem(size_t bytes) {
  void *p = calloc(1, bytes + 64);
  if (!p || n_host == MAX_HOST) {
    fprintf(stderr, "test_backend_ops: out of host memory\n");
    exit(1);
  }
  host_blocks[n_host++] = p;
  return p;
}
static real *hvec(size_t n) { return hmem(n * sizeof(real)); }
static int32_t *ivec(size_t n) { return hmem(n * sizeof(int32_t)); }
static real *hrand(size_t n, double lo, double hi) {
  real *p = hvec(n);
  for (size_t i = 0; i < n; i++)
    p[i] = (real)uni(lo, hi);
  return p;
}
static real *hcopy(const real *x, size_t n) {
  real *p = hvec(n);
  if (n) memcpy(p, x, n * sizeof *p);
  return p;
}
static real *habs(const real *x, size_t n) {
  real *p = hvec(n);
  for (size_t i = 0; i < n; i++)
    p[i] = (real)fabs((double)x[i]);
  return p;
}
static void host_free_all(void) {
  for (int i = 0; i < n_host; i++)
    free(host_blocks[i]);
  n_host = 0;
}

/* ---- the harness: buffers on the backend, two runs, comparisons ------------- */

#define GUARD 16 /* elements after every device buffer that must not change */
#define MAX_BUF 32
enum { K_IN, K_OVER, K_ADD, K_INPLACE };

struct buf {
  const char *name;
  int kind, i32;
  size_t n;
  void *base, *dev;  /* the allocation; the array (H.shift elements into it) */
  const void *host;  /* K_IN: its values; K_ADD, K_INPLACE: the values it starts from */
  const void *ref;   /* outputs: the expected values */
  const real *scale; /* per element; NULL: |ref| + rms(ref) */
  double tol;        /* 0: exact */
  void *got[2];
};

static struct {
  struct buf b[MAX_BUF];
  int n;
  int shift;     /* elements each new buffer starts past its 256-byte aligned allocation */
  char why[512]; /* the first failure of the case, if any */
} H;

static const real GUARD_R = (real)-31.4159;
static const int32_t GUARD_I = 0x5a5a5a5a;

static size_t esize(const struct buf *b) { return b->i32 ? sizeof(int32_t) : sizeof(real); }

static void why(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void why(const char *fmt, ...) {
  if (H.why[0]) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(H.why, sizeof H.why, fmt, ap);
  va_end(ap);
}

static void *xmalloc(size_t bytes) {
  void *p = calloc(1, bytes + 64);
  if (!p) {
    fprintf(stderr, "test_backend_ops: out of host memory\n");
    exit(1);
  }
  return p;
}

/* A staging copy (free it): n values (or, with vals NULL, the garbage of
 * run which_fill) then the guard. */
static void *stage(const struct buf *b, const void *vals, int which_fill) {
  size_t es = esize(b);
  char *s = xmalloc((b->n + GUARD) * es);
  for (size_t i = 0; i < b->n + GUARD; i++) {
    int guard = i >= b->n;
    if (b->i32) {
      int32_t v = guard ? GUARD_I : vals ? ((const int32_t *)vals)[i] : which_fill == 0 ? INT32_MIN + 7 : 777;
      memcpy(s + i * es, &v, es);
    } else {
      real v = guard ? GUARD_R : vals ? ((const real *)vals)[i] : which_fill == 0 ? (real)NAN : (real)777;
      memcpy(s + i * es, &v, es);
    }
  }
  return s;
}

static void *h_add(int kind, const char *name, size_t n, int i32, const void *host, const void *ref, const real *scale,
                   double tol) {
  if (H.n == MAX_BUF) {
    fprintf(stderr, "test_backend_ops: too many buffers in one case\n");
    exit(1);
  }
  struct buf *b = &H.b[H.n++];
  memset(b, 0, sizeof *b);
  b->name = name;
  b->kind = kind;
  b->i32 = i32;
  b->n = n;
  b->host = host;
  b->ref = ref;
  b->scale = scale;
  b->tol = tol;
  size_t bytes = (n + GUARD) * esize(b);
  b->base = BE->alloc(bytes + (size_t)H.shift * esize(b));
  if (!b->base) {
    fprintf(stderr, "test_backend_ops: %s: alloc(%zu) failed\n", BE->name, bytes);
    exit(1);
  }
  if (((uintptr_t)b->base) % 256) why("alloc(%zu) is not 256-byte aligned", bytes);
  b->dev = (char *)b->base + (size_t)H.shift * esize(b);
  if (kind == K_IN) {
    void *s = stage(b, host, 0);
    BE->upload(b->dev, s, bytes);
    free(s);
  }
  return b->dev;
}
/* An input (real or int32): uploaded now, checked unchanged after each run. */
static void *in_r(const char *name, const real *host, size_t n) { return h_add(K_IN, name, n, 0, host, NULL, NULL, 0); }
static void *in_i(const char *name, const int32_t *host, size_t n) {
  return h_add(K_IN, name, n, 1, host, NULL, NULL, 0);
}
/* An output the operation overwrites. */
static real *out_over(const char *name, size_t n, const real *ref, const real *scale, double tol) {
  return h_add(K_OVER, name, n, 0, NULL, ref, scale, tol);
}
static int32_t *out_over_i(const char *name, size_t n, const int32_t *ref) {
  return h_add(K_OVER, name, n, 1, NULL, ref, NULL, 0);
}
/* An output the operation adds to, from pre (ref includes pre). */
static real *out_add(const char *name, size_t n, const real *pre, const real *ref, const real *scale, double tol) {
  return h_add(K_ADD, name, n, 0, pre, ref, scale, tol);
}
/* An array the operation updates in place, from pre. */
static real *out_inplace(const char *name, size_t n, const real *pre, const real *ref, const real *scale, double tol) {
  return h_add(K_INPLACE, name, n, 0, pre, ref, scale, tol);
}

/* The worst error of the case: err / tol largest (exact outputs: any error
 * is infinitely bad). */
struct worst {
  double ratio, err, tol;
};
static void note(struct worst *w, double err, double tol, const char *name, size_t at, const char *what) {
  double r = tol > 0 ? err / tol : (err > 0 ? INFINITY : 0);
  if (!(err == err)) r = INFINITY;
  if (r > w->ratio || (w->ratio == 0 && err > w->err)) {
    w->ratio = r;
    w->err = err;
    w->tol = tol;
  }
  if (r > 1) why("%s[%zu]: %s", name, at, what);
}

/* Largest |got - want| / s_i over an array (exact: largest |got - want|);
 * NaN counts as infinite. */
static double errs(const real *got, const real *want, const real *scale, const real *pre, size_t n, double tol,
                   size_t *at) {
  double rms = 0;
  if (!scale) {
    for (size_t i = 0; i < n; i++)
      rms += (double)want[i] * want[i];
    rms = n ? sqrt(rms / (double)n) : 0;
  }
  double worst = 0;
  *at = 0;
  for (size_t i = 0; i < n; i++) {
    double g = got[i], w = want[i], d = fabs(g - w), e;
    if (!(g == g) || !(w == w))
      e = INFINITY;
    else if (tol == 0)
      e = d;
    else {
      double s = scale ? (double)scale[i] : fabs(w) + rms;
      if (pre) s += fabs((double)pre[i]);
      e = d == 0 ? 0 : s > 0 ? d / s : INFINITY;
    }
    if (e > worst || (e != e)) {
      worst = e;
      *at = i;
    }
  }
  return worst;
}

static void h_free_bufs(void) {
  for (int i = 0; i < H.n; i++)
    BE->release(H.b[i].base);
  H.n = 0;
}

/* One line of the report: op, shape, the worst error and its tolerance. */
static void report(const char *op, const char *shape, int ok, double err, double tol, const char *msg) {
  if (ok)
    n_pass++;
  else
    n_fail++;
  if (tol > 0)
    printf("%-4s %-22s %-64s max err %.2e  tol %.1e", ok ? "ok" : "FAIL", op, shape, err, tol);
  else
    printf("%-4s %-22s %-64s max err %.2e  exact  ", ok ? "ok" : "FAIL", op, shape, err);
  if (!ok && msg) printf("  <- %s", msg);
  printf("\n");
  fflush(stdout);
}

/* Runs `call` twice as the file's comment says, compares, prints the line. */
static void h_run(const char *op, const char *shape, void (*call)(void *), void *arg) {
  for (int r = 0; r < 2; r++) {
    for (int i = 0; i < H.n; i++) {
      struct buf *b = &H.b[i];
      if (b->kind == K_IN) continue;
      const void *vals = b->kind == K_INPLACE ? b->host : b->kind == K_ADD ? (r == 0 ? b->host : NULL) : NULL;
      void *zeros = b->kind == K_ADD && r == 1 ? xmalloc(b->n * esize(b)) : NULL;
      void *s = stage(b, zeros ? zeros : vals, r);
      BE->upload(b->dev, s, (b->n + GUARD) * esize(b));
      free(s);
      free(zeros);
    }
    call(arg);
    char err[256] = "";
    if (BE->sync(err, sizeof err)) why("run %d: sync failed: %s", r + 1, err);
    for (int i = 0; i < H.n; i++) {
      struct buf *b = &H.b[i];
      size_t es = esize(b);
      char *got = xmalloc((b->n + GUARD) * es);
      BE->download(got, b->dev, (b->n + GUARD) * es);
      for (size_t k = b->n; k < b->n + GUARD; k++) {
        int bad = b->i32 ? memcmp(got + k * es, &GUARD_I, es) != 0 : memcmp(got + k * es, &GUARD_R, es) != 0;
        if (bad) {
          why("%s: written past its end (element %zu of %zu)", b->name, k, b->n);
          break;
        }
      }
      if (b->kind == K_IN) {
        if (b->n && memcmp(got, b->host, b->n * es)) why("input %s was changed", b->name);
        free(got);
      } else {
        b->got[r] = got;
      }
    }
  }
  struct worst w = {0, 0, 0};
  for (int i = 0; i < H.n; i++) {
    struct buf *b = &H.b[i];
    if (b->kind == K_IN) continue;
    size_t at;
    if (b->i32) {
      const int32_t *g0 = b->got[0], *g1 = b->got[1], *want = b->ref;
      for (size_t k = 0; k < b->n; k++) {
        if (g0[k] != want[k]) note(&w, INFINITY, 0, b->name, k, "differs from the expected value");
        if (g1[k] != g0[k]) note(&w, INFINITY, 0, b->name, k, "run 2 differs (not overwritten everywhere?)");
      }
      continue;
    }
    const real *g0 = b->got[0], *g1 = b->got[1];
    double e = errs(g0, b->ref, b->scale, b->kind == K_ADD ? b->host : NULL, b->n, b->tol, &at);
    note(&w, e, b->tol, b->name, at,
         b->kind == K_OVER && g0[at] != g0[at] ? "NaN: not written, or added to instead of overwritten"
                                               : "differs from the expected value");
    if (b->kind == K_ADD) { /* run 1 minus P against run 2 (from 0): added, not overwritten */
      real *d = xmalloc(b->n * sizeof *d);
      const real *pre = b->host;
      for (size_t k = 0; k < b->n; k++)
        d[k] = (real)((double)g0[k] - pre[k]);
      double tol = b->tol > 0 ? b->tol : TOL;
      e = errs(d, g1, b->scale, pre, b->n, tol, &at);
      free(d);
      note(&w, e, tol, b->name, at, "run 1 minus its start differs from run 2 from zero: overwritten, not added to");
    } else {
      e = errs(g1, g0, b->scale, NULL, b->n, b->tol, &at);
      note(&w, e, b->tol, b->name, at, "run 2 differs from run 1: not overwritten everywhere, or not repeatable");
    }
  }
  if (w.ratio == 0) /* no error anywhere: show the loosest tolerance of the case */
    for (int i = 0; i < H.n; i++)
      if (H.b[i].kind != K_IN && H.b[i].tol > w.tol) w.tol = H.b[i].tol;
  report(op, shape, !H.why[0], w.err, w.tol, H.why);
  H.why[0] = 0;
  for (int i = 0; i < H.n; i++) {
    free(H.b[i].got[0]);
    free(H.b[i].got[1]);
  }
  h_free_bufs();
}

/* ---- graphs ------------------------------------------------------------------ */

struct tgraph {
  int N, E;
  int32_t *src, *in_start;
  float *rel;  /* E x 3 */
  real *basis; /* E x plan.per_edge */
  const char *what;
};

static struct basis_plan PLAN; /* degrees 0..3 */

/* The graphs of the cases: N nodes, each with 1..maxdeg incoming edges from
 * distinct other nodes (sorted by source), except node `none` (-1: every
 * node has some), which has none; maxdeg 0: no edges at all. */
enum { G_BIG, G_SMALL, G_NONE, G_ONE };
static const struct {
  const char *what;
  int N, maxdeg, none;
} GRAPHS[] = {{"big", 24, 6, 5}, {"small", 6, 3, 1}, {"no-edges", 3, 0, -1}, {"one-atom", 1, 0, -1}};

/* Built in the case's host memory (freed with it). */
static void graph_make(struct tgraph *g, int kind) {
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
  g->basis = hvec((size_t)g->E * PLAN.per_edge + 1);
  float *b = hmem(PLAN.per_edge * sizeof(float));
  for (int e = 0; e < g->E; e++) {
    basis_edge(&PLAN, g->rel + 3 * e, b);
    for (size_t i = 0; i < PLAN.per_edge; i++)
      g->basis[(size_t)e * PLAN.per_edge + i] = b[i];
  }
}

static void fiber_str(char *out, size_t n, const struct nn_fiber *f) {
  snprintf(out, n, "%d,%d,%d,%d", f->ch[0], f->ch[1], f->ch[2], f->ch[3]);
}

/* ---- the table itself ----------------------------------------------------------- */

/* Every operation of struct nn_backend. */
/* clang-format off */
#define NN_OPS(X)                                                                                                      \
  X(alloc) X(release) X(upload) X(download) X(copy) X(zero) X(sync) X(host_alloc) X(host_release)                    \
  X(download_queued) X(fence_new) X(fence_mark) X(fence_wait) X(fence_free)                                            \
  X(linear_forward) X(linear_backward) X(norm_forward) X(norm_backward) X(dense_forward) X(dense_backward)             \
  X(radial_hidden_forward) X(radial_hidden_backward) X(conv_forward) X(conv_backward) X(attn_forward)                  \
  X(attn_backward) X(scale_rows) X(pool_max_forward) X(pool_max_backward) X(pool_mean_forward) X(pool_mean_backward)   \
  X(concat_rows) X(split_rows) X(add) X(relu) X(relu_backward) X(bases) X(edge_weights)                                         \
  X(adam_step) X(adam_step_at) X(sumsq) X(scale) X(loss) X(sumsq_to) X(clip) X(allreduce)
/* clang-format on */

static void check_table(enum nn_precision want) {
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
  report("table", "every operation filled in", n_missing == 0, n_missing, 0, msg);
  if (n_missing) {
    printf("%d passed, %d failed (%s): cannot go on with a table that has holes\n", n_pass, n_fail, BE->name);
    exit(1);
  }
  int named = BE->name && BE->name[0] && BE->device[0];
  report("table", "name and device set", named, !named, 0, "empty name or device");
  snprintf(msg, sizeof msg, "precision %d, %d asked for", (int)BE->precision, (int)want);
  report("table", "precision as asked", BE->precision == want, BE->precision != want, 0, msg);
}

/* ---- memory and copies --------------------------------------------------------- */

static void check_memory(void) {
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

  char err[256] = "";
  int rc = BE->sync(err, sizeof err);
  report("sync", "after the copies", rc == 0, rc != 0, 0, err);
  BE->release(NULL);
  BE->release(da);
  BE->release(db);
  BE->release(one);
  BE->release(big);
  host_free_all();
}

/* ---- linear and dense ------------------------------------------------------------ */

struct mm_args {
  real *y, *dx, *dW, *db;
  const real *x, *W, *b, *dy;
  int rows, in, out;
};
static void call_linear_fwd(void *p) {
  struct mm_args *a = p;
  BE->linear_forward(a->y, a->x, a->W, a->rows, a->in, a->out);
}
static void call_linear_bwd(void *p) {
  struct mm_args *a = p;
  BE->linear_backward(a->dx, a->dW, a->dy, a->x, a->W, a->rows, a->in, a->out);
}
static void call_dense_fwd(void *p) {
  struct mm_args *a = p;
  BE->dense_forward(a->y, a->x, a->W, a->b, a->rows, a->in, a->out);
}
static void call_dense_bwd(void *p) {
  struct mm_args *a = p;
  BE->dense_backward(a->dx, a->dW, a->db, a->dy, a->x, a->W, a->rows, a->in, a->out);
}

/* linear (bias 0) and dense, forward and backward, against loops in double;
 * scales are the sums of |terms|. */
static void check_mm(int dense, int rows, int in, int out, int with_b, int with_dx, int with_db) {
  char fshape[96], shape[128];
  snprintf(fshape, sizeof fshape, "rows=%d in=%d out=%d%s%s", rows, in, out,
           dense ? (with_b ? " bias" : " no-bias") : "", H.shift ? " arrays 4 B off" : "");
  snprintf(shape, sizeof shape, "%s%s%s", fshape, with_dx ? "" : " dx=NULL",
           dense && with_b && !with_db ? " db=NULL" : "");
  size_t nr = (size_t)rows, ni = (size_t)in, no = (size_t)out;
  real *x = hrand(nr * ni, -1, 1), *W = hrand(no * ni, -1, 1), *b = with_b ? hrand(no, -1, 1) : NULL;
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
  struct mm_args A = {.rows = rows, .in = in, .out = out};
  A.x = in_r("x", x, nr * ni);
  A.W = in_r("W", W, no * ni);
  if (b) A.b = in_r("b", b, no);
  A.y = out_over("y", nr * no, y, ys, TOL);
  h_run(dense ? "dense_forward" : "linear_forward", fshape, dense ? call_dense_fwd : call_linear_fwd, &A);

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
  struct mm_args B = {.rows = rows, .in = in, .out = out};
  B.x = in_r("x", x, nr * ni);
  B.W = in_r("W", W, no * ni);
  B.dy = in_r("dy", dy, nr * no);
  if (with_dx) B.dx = out_over("dx", nr * ni, dx, dxs, TOL);
  B.dW = out_add("dW", no * ni, dW0, dW, dWs, TOL);
  if (dense && with_db) B.db = out_add("db", no, db0, dbv, dbs, TOL);
  h_run(dense ? "dense_backward" : "linear_backward", shape, dense ? call_dense_bwd : call_linear_bwd, &B);
  host_free_all();
}

/* ---- norm nonlinearity ------------------------------------------------------------ */

struct norm_args {
  real *y, *save, *dx, *dgamma, *dbeta;
  const real *x, *gamma, *beta, *dy, *saved;
  int N, dim, C;
};
static void call_norm_fwd(void *p) {
  struct norm_args *a = p;
  BE->norm_forward(a->y, a->save, a->x, a->gamma, a->beta, a->N, a->dim, a->C);
}
static void call_norm_bwd(void *p) {
  struct norm_args *a = p;
  BE->norm_backward(a->dx, a->dgamma, a->dbeta, a->dy, a->x, a->saved, a->gamma, a->beta, a->N, a->dim, a->C);
}

static void check_norm(int N, int dim, int C) {
  char shape[96];
  snprintf(shape, sizeof shape, "N=%d dim=%d C=%d (one norm at the clamp)", N, dim, C);
  size_t n = (size_t)N * dim * C, ns = nn_norm_save_size(N, C);
  real *x = hrand(n, -1, 1), *gamma = hrand((size_t)C, 0.5, 1.5), *beta = hrand((size_t)C, -0.5, 0.5);
  for (int m = 0; m < dim; m++) /* node 0, channel C-1: a zero vector, its norm clamped */
    x[(size_t)m * C + (size_t)(C - 1)] = 0;
  real *y = hvec(n), *save = hvec(ns);
  nn_norm_forward(y, save, x, gamma, beta, N, dim, C);
  struct norm_args A = {.N = N, .dim = dim, .C = C};
  A.x = in_r("x", x, n);
  A.gamma = in_r("gamma", gamma, (size_t)C);
  A.beta = in_r("beta", beta, (size_t)C);
  A.y = out_over("y", n, y, NULL, TOL_MAG);
  A.save = out_over("save", ns, save, NULL, TOL_MAG);
  h_run("norm_forward", shape, call_norm_fwd, &A);

  x = hrand(n, -1, 1);
  gamma = hrand((size_t)C, 0.5, 1.5);
  beta = hrand((size_t)C, -0.5, 0.5);
  for (int m = 0; m < dim; m++)
    x[(size_t)m * C + (size_t)(C - 1)] = 0;
  save = hvec(ns);
  nn_norm_forward(hvec(n), save, x, gamma, beta, N, dim, C);
  real *dy = hrand(n, -1, 1), *dx = hvec(n);
  real *dg0 = hrand((size_t)C, -1, 1), *db0 = hrand((size_t)C, -1, 1);
  real *dg = hcopy(dg0, (size_t)C), *dbt = hcopy(db0, (size_t)C);
  nn_norm_backward(dx, dg, dbt, dy, x, save, gamma, beta, N, dim, C);
  struct norm_args B = {.N = N, .dim = dim, .C = C};
  B.x = in_r("x", x, n);
  B.gamma = in_r("gamma", gamma, (size_t)C);
  B.beta = in_r("beta", beta, (size_t)C);
  B.saved = in_r("save", save, ns);
  B.dy = in_r("dy", dy, n);
  B.dx = out_over("dx", n, dx, NULL, TOL_MAG);
  B.dgamma = out_add("dgamma", (size_t)C, dg0, dg, NULL, TOL_MAG);
  B.dbeta = out_add("dbeta", (size_t)C, db0, dbt, NULL, TOL_MAG);
  h_run("norm_backward", shape, call_norm_bwd, &B);
  host_free_all();
}

/* ---- the radial network's hidden layers -------------------------------------------- */

struct radial_args {
  real *save, *dx, *dparams;
  const real *x, *params, *ds2, *saved;
  int E, in, H;
};
static void call_radial_fwd(void *p) {
  struct radial_args *a = p;
  BE->radial_hidden_forward(a->save, a->x, a->params, a->E, a->in, a->H);
}
static void call_radial_bwd(void *p) {
  struct radial_args *a = p;
  BE->radial_hidden_backward(a->dx, a->dparams, a->ds2, a->x, a->saved, a->params, a->E, a->in, a->H);
}

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

static void check_radial(int E, int in, int H, int with_dx) {
  char fshape[64], shape[96];
  snprintf(fshape, sizeof fshape, "E=%d in=%d H=%d", E, in, H);
  snprintf(shape, sizeof shape, "%s%s", fshape, with_dx ? "" : " dx=NULL");
  const int out = 5; /* W3's rows: the backward must leave them alone */
  size_t np = nn_radial_params(in, H, out), ns = nn_radial_save_size(E, H), ne = (size_t)E * in;
  real *x = hrand(ne, 0, 1), *p = radial_params(in, H, out), *save = hvec(ns);
  nn_radial_hidden_forward(save, x, p, E, in, H);
  struct radial_args A = {.E = E, .in = in, .H = H};
  A.x = in_r("x", x, ne);
  A.params = in_r("params", p, np);
  A.save = out_over("save", ns, save, radial_save_scale(save, E, H), TOL_MAG);
  h_run("radial_hidden_forward", fshape, call_radial_fwd, &A);

  x = hrand(ne, 0, 1);
  p = radial_params(in, H, out);
  save = hvec(ns);
  nn_radial_hidden_forward(save, x, p, E, in, H);
  real *ds2 = hrand((size_t)E * H, -1, 1), *dx = hvec(ne);
  real *dp0 = hrand(np, -1, 1), *dp = hcopy(dp0, np);
  nn_radial_hidden_backward(with_dx ? dx : NULL, dp, ds2, x, save, p, E, in, H);
  struct radial_args B = {.E = E, .in = in, .H = H};
  B.x = in_r("x", x, ne);
  B.params = in_r("params", p, np);
  B.saved = in_r("save", save, ns);
  B.ds2 = in_r("ds2", ds2, (size_t)E * H);
  if (with_dx) B.dx = out_over("dx", ne, dx, NULL, TOL_MAG);
  B.dparams = out_add("dparams", np, dp0, dp, NULL, TOL_MAG);
  h_run("radial_hidden_backward", shape, call_radial_bwd, &B);
  host_free_all();
}

/* ---- the convolution ------------------------------------------------------------------ */

struct conv_args {
  struct nn_conv_shape s;
  real *y[NN_MAX_DEG + 1], *dx[NN_MAX_DEG + 1], *ds2, *dW3;
  const real *x[NN_MAX_DEG + 1], *dy[NN_MAX_DEG + 1], *basis, *s2, *W3;
  int H, pool;
};
static void call_conv_fwd(void *p) {
  struct conv_args *a = p;
  int rc = BE->conv_forward(a->y, &a->s, a->x, a->basis, a->s2, a->W3, a->H, a->pool);
  if (rc) why("conv_forward returned %d", rc);
}
static void call_conv_bwd(void *p) {
  struct conv_args *a = p;
  int rc = BE->conv_backward(a->dx, a->ds2, a->dW3, &a->s, a->dy, a->x, a->basis, a->s2, a->W3, a->H, a->pool);
  if (rc) why("conv_backward returned %d", rc);
}

static const char *const DX_NAME[] = {"dx0", "dx1", "dx2", "dx3"}, *const Y_NAME[] = {"y0", "y1", "y2", "y3"};
static const char *const X_NAME[] = {"x0", "x1", "x2", "x3"}, *const DY_NAME[] = {"dy0", "dy1", "dy2", "dy3"};

/* skip_dx: a degree whose dx is NULL (-1: none); no_ds2, no_dw3: those NULL. */
static void check_conv(const char *what, struct nn_fiber fin, struct nn_fiber fout, int H, int pool, int graph,
                       int skip_dx, int no_ds2, int no_dw3) {
  struct tgraph gr, *g = &gr;
  graph_make(g, graph);
  char fshape[128], shape[192], fi[32], fo[32];
  fiber_str(fi, sizeof fi, &fin);
  fiber_str(fo, sizeof fo, &fout);
  snprintf(fshape, sizeof fshape, "%s %s->%s H=%d pool=%d %s N=%d E=%d", what, fi, fo, H, pool, g->what, g->N, g->E);
  snprintf(shape, sizeof shape, "%s%s%s%s", fshape, skip_dx >= 0 ? " dx[d]=NULL" : "", no_ds2 ? " ds2=NULL" : "",
           no_dw3 ? " dW3=NULL" : "");
  struct nn_conv_shape hs = {fin, fout, &PLAN, g->N, g->E, g->src, g->in_start};
  size_t E = (size_t)g->E, N = (size_t)g->N, rows = pool ? N : E, rs = nn_conv_radial_size(&fin, &fout);
  size_t nb = E * PLAN.per_edge;
  real *x[NN_MAX_DEG + 1] = {0}, *ax[NN_MAX_DEG + 1] = {0}, *y[NN_MAX_DEG + 1] = {0}, *ay[NN_MAX_DEG + 1] = {0};
  size_t nx[NN_MAX_DEG + 1] = {0}, ny[NN_MAX_DEG + 1] = {0};
  for (int d = 0; d <= NN_MAX_DEG; d++) {
    nx[d] = N * (size_t)(NN_DIM(d) * fin.ch[d]);
    ny[d] = rows * (size_t)(NN_DIM(d) * fout.ch[d]);
    if (fin.ch[d]) {
      x[d] = hrand(nx[d], -1, 1);
      ax[d] = habs(x[d], nx[d]);
    }
    if (fout.ch[d]) {
      y[d] = hvec(ny[d]);
      ay[d] = hvec(ny[d]);
    }
  }
  real *s2 = hrand(E * (size_t)H, 0, 1.5), *W3 = hrand(rs * (size_t)H, -1, 1);
  for (size_t i = 0; i < rs * (size_t)H; i++)
    W3[i] *= (real)(1 / sqrt((double)H));
  real *as2 = habs(s2, E * (size_t)H), *aW3 = habs(W3, rs * (size_t)H), *abasis = habs(g->basis, nb);
  if (nn_conv_forward(y, &hs, (const real *const *)x, g->basis, s2, W3, H, pool) ||
      nn_conv_forward(ay, &hs, (const real *const *)ax, abasis, as2, aW3, H, pool)) {
    fprintf(stderr, "test_backend_ops: the CPU convolution ran out of memory\n");
    exit(1);
  }
  struct conv_args A = {.H = H, .pool = pool};
  A.s = hs;
  A.s.src = in_i("src", g->src, E);
  A.s.in_start = in_i("in_start", g->in_start, N + 1);
  A.basis = in_r("basis", g->basis, nb);
  A.s2 = in_r("s2", s2, E * (size_t)H);
  A.W3 = in_r("W3", W3, rs * (size_t)H);
  for (int d = 0; d <= NN_MAX_DEG; d++) {
    if (fin.ch[d]) A.x[d] = in_r(X_NAME[d], x[d], nx[d]);
    if (fout.ch[d]) A.y[d] = out_over(Y_NAME[d], ny[d], y[d], ay[d], TOL);
  }
  h_run("conv_forward", fshape, call_conv_fwd, &A);

  /* the backward, on fresh data */
  real *dy[NN_MAX_DEG + 1] = {0}, *ady[NN_MAX_DEG + 1] = {0}, *dx[NN_MAX_DEG + 1] = {0}, *adx[NN_MAX_DEG + 1] = {0};
  for (int d = 0; d <= NN_MAX_DEG; d++) {
    if (fin.ch[d]) {
      x[d] = hrand(nx[d], -1, 1);
      ax[d] = habs(x[d], nx[d]);
      if (d != skip_dx) {
        dx[d] = hvec(nx[d]);
        adx[d] = hvec(nx[d]);
      }
    }
    if (fout.ch[d]) {
      dy[d] = hrand(ny[d], -1, 1);
      ady[d] = habs(dy[d], ny[d]);
    }
  }
  s2 = hrand(E * (size_t)H, 0, 1.5);
  W3 = hrand(rs * (size_t)H, -1, 1);
  for (size_t i = 0; i < rs * (size_t)H; i++)
    W3[i] *= (real)(1 / sqrt((double)H));
  as2 = habs(s2, E * (size_t)H);
  aW3 = habs(W3, rs * (size_t)H);
  real *ds2 = hvec(E * (size_t)H), *ads2 = hvec(E * (size_t)H);
  real *dW30 = hrand(rs * (size_t)H, -1, 1), *dW3 = hcopy(dW30, rs * (size_t)H), *adW3 = hvec(rs * (size_t)H);
  if (nn_conv_backward(dx, no_ds2 ? NULL : ds2, no_dw3 ? NULL : dW3, &hs, (const real *const *)dy,
                       (const real *const *)x, g->basis, s2, W3, H, pool) ||
      nn_conv_backward(adx, ads2, adW3, &hs, (const real *const *)ady, (const real *const *)ax, abasis, as2, aW3, H,
                       pool)) {
    fprintf(stderr, "test_backend_ops: the CPU convolution ran out of memory\n");
    exit(1);
  }
  struct conv_args B = {.H = H, .pool = pool};
  B.s = hs;
  B.s.src = in_i("src", g->src, E);
  B.s.in_start = in_i("in_start", g->in_start, N + 1);
  B.basis = in_r("basis", g->basis, nb);
  B.s2 = in_r("s2", s2, E * (size_t)H);
  B.W3 = in_r("W3", W3, rs * (size_t)H);
  for (int d = 0; d <= NN_MAX_DEG; d++) {
    if (fin.ch[d]) B.x[d] = in_r(X_NAME[d], x[d], nx[d]);
    if (fout.ch[d]) B.dy[d] = in_r(DY_NAME[d], dy[d], ny[d]);
    if (dx[d]) B.dx[d] = out_over(DX_NAME[d], nx[d], dx[d], adx[d], TOL);
  }
  if (!no_ds2) B.ds2 = out_over("ds2", E * (size_t)H, ds2, ads2, TOL);
  if (!no_dw3) B.dW3 = out_add("dW3", rs * (size_t)H, dW30, dW3, adW3, TOL);
  h_run("conv_backward", shape, call_conv_bwd, &B);
  host_free_all();
}

/* ---- the attention --------------------------------------------------------------------- */

struct attn_args {
  struct nn_attn_shape s;
  real *z[NN_MAX_DEG + 1], *alpha, *dkv[NN_MAX_DEG + 1], *dq[NN_MAX_DEG + 1];
  const real *kv[NN_MAX_DEG + 1], *q[NN_MAX_DEG + 1], *dz[NN_MAX_DEG + 1], *alpha_in;
  int dq_null;
};
static void call_attn_fwd(void *p) {
  struct attn_args *a = p;
  BE->attn_forward(a->z, a->alpha, &a->s, a->kv, a->q);
}
static void call_attn_bwd(void *p) {
  struct attn_args *a = p;
  BE->attn_backward(a->dkv, a->dq_null ? NULL : a->dq, &a->s, a->dz, a->alpha_in, a->kv, a->q);
}

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

/* with_w: edge weights; null_dz: a degree whose dz is NULL (-1: none);
 * dq_null: the whole dq NULL. */
static void check_attn(const char *what, struct nn_fiber fk, struct nn_fiber fv, int heads, int graph, int with_w,
                       int null_dz, int dq_null) {
  struct tgraph gr, *g = &gr;
  graph_make(g, graph);
  char fshape[160], shape[192], a[32], b[32];
  fiber_str(a, sizeof a, &fk);
  fiber_str(b, sizeof b, &fv);
  snprintf(fshape, sizeof fshape, "%s k=%s v=%s heads=%d %s N=%d E=%d%s", what, a, b, heads, g->what, g->N, g->E,
           with_w ? " w" : " w=NULL");
  snprintf(shape, sizeof shape, "%s%s%s", fshape, null_dz >= 0 ? " dz[d]=NULL" : "", dq_null ? " dq=NULL" : "");
  size_t N = (size_t)g->N, E = (size_t)g->E, nkv[NN_MAX_DEG + 1], nq[NN_MAX_DEG + 1], nz[NN_MAX_DEG + 1];
  real *w = with_w ? attn_weights(g, 2) : NULL;
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
        for (int c = 0; c < fv.ch[d]; c++)
          akv[d][r * (size_t)wkv + (size_t)c] = (real)fabs((double)akv[d][r * (size_t)wkv + (size_t)c]);
    }
    if (fk.ch[d]) q[d] = hrand(nq[d], -1.5, 1.5);
    if (fv.ch[d]) {
      z[d] = hvec(nz[d]);
      az[d] = hvec(nz[d]);
    }
  }
  real *alpha = hvec(E * (size_t)heads), *alpha2 = hvec(E * (size_t)heads);
  nn_attn_forward(z, alpha, &hs, (const real *const *)kv, (const real *const *)q);
  nn_attn_forward(az, alpha2, &hs, (const real *const *)akv, (const real *const *)q); /* z's sums of |terms| */
  struct attn_args A;
  memset(&A, 0, sizeof A);
  A.s = hs;
  A.s.in_start = in_i("in_start", g->in_start, N + 1);
  if (w) A.s.w = in_r("w", w, E);
  for (int d = 0; d <= NN_MAX_DEG; d++) {
    if (kv[d]) A.kv[d] = in_r(KV_NAME[d], kv[d], nkv[d]);
    if (q[d]) A.q[d] = in_r(Q_NAME[d], q[d], nq[d]);
    if (z[d]) A.z[d] = out_over(Z_NAME[d], nz[d], z[d], az[d], TOL);
  }
  A.alpha = out_over("alpha", E * (size_t)heads, alpha, NULL, TOL_MAG);
  h_run("attn_forward", fshape, call_attn_fwd, &A);

  /* the backward from the forward's alpha */
  real *dz[NN_MAX_DEG + 1] = {0}, *dkv[NN_MAX_DEG + 1] = {0}, *dq[NN_MAX_DEG + 1] = {0};
  for (int d = 0; d <= NN_MAX_DEG; d++) {
    if (fv.ch[d] && d != null_dz) dz[d] = hrand(nz[d], -1, 1);
    if (kv[d]) dkv[d] = hvec(nkv[d]);
    if (q[d] && !dq_null) dq[d] = hvec(nq[d]);
  }
  nn_attn_backward(dkv, dq_null ? NULL : dq, &hs, (const real *const *)dz, alpha, (const real *const *)kv,
                   (const real *const *)q);
  struct attn_args B;
  memset(&B, 0, sizeof B);
  B.dq_null = dq_null;
  B.s = hs;
  B.s.in_start = in_i("in_start", g->in_start, N + 1);
  if (w) B.s.w = in_r("w", w, E);
  B.alpha_in = in_r("alpha", alpha, E * (size_t)heads);
  for (int d = 0; d <= NN_MAX_DEG; d++) {
    if (kv[d]) B.kv[d] = in_r(KV_NAME[d], kv[d], nkv[d]);
    if (q[d]) B.q[d] = in_r(Q_NAME[d], q[d], nq[d]);
    if (dz[d]) B.dz[d] = in_r(DZ_NAME[d], dz[d], nz[d]);
    if (dkv[d]) B.dkv[d] = out_over(DKV_NAME[d], nkv[d], dkv[d], NULL, TOL_MAG);
    if (dq[d]) B.dq[d] = out_over(DQ_NAME[d], nq[d], dq[d], NULL, TOL_MAG);
  }
  h_run("attn_backward", shape, call_attn_bwd, &B);
  host_free_all();
}

/* ---- scale_rows ---------------------------------------------------------------------------- */

struct rows_args {
  real *x;
  const real *w;
  int rows, n;
};
static void call_scale_rows(void *p) {
  struct rows_args *a = p;
  BE->scale_rows(a->x, a->w, a->rows, a->n);
}

static void check_scale_rows(int rows, int n) {
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
  struct rows_args A = {.rows = rows, .n = n};
  A.w = in_r("w", w, (size_t)rows);
  A.x = out_inplace("x", m, x, y, s, TOL);
  h_run("scale_rows", shape, call_scale_rows, &A);
  host_free_all();
}

/* ---- pooling --------------------------------------------------------------------------------- */

struct pool_args {
  real *y, *dx;
  int32_t *arg;
  const real *x, *dy;
  const int32_t *gs, *arg_in;
  int N, G, C;
};
static void call_pool_max_fwd(void *p) {
  struct pool_args *a = p;
  BE->pool_max_forward(a->y, a->arg, a->x, a->gs, a->G, a->C);
}
static void call_pool_max_bwd(void *p) {
  struct pool_args *a = p;
  BE->pool_max_backward(a->dx, a->dy, a->arg_in, a->N, a->G, a->C);
}
static void call_pool_mean_fwd(void *p) {
  struct pool_args *a = p;
  BE->pool_mean_forward(a->y, a->x, a->gs, a->G, a->C);
}
static void call_pool_mean_bwd(void *p) {
  struct pool_args *a = p;
  BE->pool_mean_backward(a->dx, a->dy, a->gs, a->G, a->C);
}

/* Molecules of the given sizes (0 allowed); in max pooling some channels
 * hold one value on several atoms (ties go to the first). */
static void check_pool(const int *sizes, int G, int C) {
  int32_t *gs = ivec((size_t)G + 1);
  gs[0] = 0;
  char shape[128];
  int k = snprintf(shape, sizeof shape, "C=%d molecules of", C);
  for (int g = 0; g < G; g++) {
    gs[g + 1] = gs[g] + sizes[g];
    if (k < (int)sizeof shape) k += snprintf(shape + k, sizeof shape - (size_t)k, " %d", sizes[g]);
  }
  int N = gs[G];
  size_t nx = (size_t)N * C, ny = (size_t)G * C;
  real *x = hrand(nx, -2, 2);
  for (int g = 0; g < G; g++) /* ties: channel c % 3 == 0 holds the same value on every atom */
    for (int n = gs[g] + 1; n < gs[g + 1]; n++)
      for (int c = 0; c < C; c += 3)
        x[(size_t)n * C + c] = x[(size_t)gs[g] * C + c];
  real *ymax = hvec(ny), *ymean = hvec(ny), *smean = hvec(ny);
  int32_t *arg = ivec(ny);
  for (int g = 0; g < G; g++)
    for (int c = 0; c < C; c++) {
      size_t o = (size_t)g * C + c;
      arg[o] = -1;
      double s = 0, a = 0;
      for (int n = gs[g]; n < gs[g + 1]; n++) {
        real v = x[(size_t)n * C + c];
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
  struct pool_args A = {.N = N, .G = G, .C = C};
  A.x = in_r("x", x, nx);
  A.gs = in_i("graph_start", gs, (size_t)G + 1);
  A.y = out_over("y", ny, ymax, NULL, 0);
  A.arg = out_over_i("arg", ny, arg);
  h_run("pool_max_forward", shape, call_pool_max_fwd, &A);

  real *dy = hrand(ny, -1, 1), *dxmax = hvec(nx), *dxmean = hvec(nx), *sdx = hvec(nx);
  for (int g = 0; g < G; g++)
    for (int c = 0; c < C; c++) {
      size_t o = (size_t)g * C + c;
      if (arg[o] >= 0) dxmax[(size_t)arg[o] * C + c] += dy[o];
      int cnt = gs[g + 1] - gs[g];
      for (int n = gs[g]; n < gs[g + 1]; n++) {
        dxmean[(size_t)n * C + c] = (real)((double)dy[o] / cnt);
        sdx[(size_t)n * C + c] = (real)fabs((double)dy[o] / cnt);
      }
    }
  struct pool_args B = {.N = N, .G = G, .C = C};
  B.dy = in_r("dy", dy, ny);
  B.arg_in = in_i("arg", arg, ny);
  B.dx = out_over("dx", nx, dxmax, NULL, 0);
  h_run("pool_max_backward", shape, call_pool_max_bwd, &B);

  struct pool_args M = {.N = N, .G = G, .C = C};
  M.x = in_r("x", x, nx);
  M.gs = in_i("graph_start", gs, (size_t)G + 1);
  M.y = out_over("y", ny, ymean, smean, TOL);
  h_run("pool_mean_forward", shape, call_pool_mean_fwd, &M);

  struct pool_args D = {.N = N, .G = G, .C = C};
  D.dy = in_r("dy", dy, ny);
  D.gs = in_i("graph_start", gs, (size_t)G + 1);
  D.dx = out_over("dx", nx, dxmean, sdx, TOL);
  h_run("pool_mean_backward", shape, call_pool_mean_bwd, &D);
  host_free_all();
}

/* ---- the glue ----------------------------------------------------------------------------------- */

struct glue_args {
  real *out, *x, *y;
  const real *in, *cx, *cy;
  int a, b;
  size_t rows, n;
  int kind, bonds_kept, E, width;
  real cutoff;
};
static void call_concat(void *p) {
  struct glue_args *g = p;
  BE->concat_rows(g->out, g->cx, g->a, g->cy, g->b, g->rows);
}
static void call_split(void *p) {
  struct glue_args *g = p;
  BE->split_rows(g->x, g->a, g->y, g->b, g->in, g->rows);
}
static void call_add(void *p) {
  struct glue_args *g = p;
  BE->add(g->y, g->cx, g->n);
}
static void call_relu(void *p) {
  struct glue_args *g = p;
  BE->relu(g->y, g->cx, g->n);
}
static void call_relu_bwd(void *p) {
  struct glue_args *g = p;
  BE->relu_backward(g->y, g->cx, g->n);
}
static void call_edge_weights(void *p) {
  struct glue_args *g = p;
  BE->edge_weights(g->out, g->cx, g->E, g->width, g->kind, g->cutoff, g->bonds_kept);
}

static void check_concat_split(int a, int b, size_t rows) {
  char shape[96];
  snprintf(shape, sizeof shape, "a=%d b=%d rows=%zu%s", a, b, rows, b ? "" : " (y NULL)");
  size_t w = (size_t)(a + b);
  real *x = hrand(rows * a, -1, 1), *y = b ? hrand(rows * b, -1, 1) : NULL, *out = hvec(rows * w);
  for (size_t r = 0; r < rows; r++) {
    memcpy(out + r * w, x + r * a, (size_t)a * sizeof(real));
    if (b) memcpy(out + r * w + a, y + r * b, (size_t)b * sizeof(real));
  }
  struct glue_args C = {.a = a, .b = b, .rows = rows};
  C.cx = in_r("x", x, rows * a);
  if (b) C.cy = in_r("y", y, rows * b);
  C.out = out_over("out", rows * w, out, NULL, 0);
  h_run("concat_rows", shape, call_concat, &C);

  for (int which = 0; which < 3; which++) { /* both, x only, y only */
    if (which == 2 && !b) continue;
    snprintf(shape, sizeof shape, "a=%d b=%d rows=%zu%s", a, b, rows,
             which == 1   ? " (y NULL)"
             : which == 2 ? " (x NULL)"
                          : "");
    real *in = hrand(rows * w, -1, 1), *xs = hvec(rows * a + 1), *ys = hvec(rows * b + 1);
    for (size_t r = 0; r < rows; r++) {
      memcpy(xs + r * a, in + r * w, (size_t)a * sizeof(real));
      if (b) memcpy(ys + r * b, in + r * w + a, (size_t)b * sizeof(real));
    }
    struct glue_args S = {.a = a, .b = b, .rows = rows};
    S.in = in_r("in", in, rows * w);
    if (which != 2) S.x = out_over("x", rows * a, xs, NULL, 0);
    if (which != 1 && b) S.y = out_over("y", rows * b, ys, NULL, 0);
    h_run("split_rows", shape, call_split, &S);
  }
  host_free_all();
}

static void check_elementwise(size_t n) {
  char shape[64];
  snprintf(shape, sizeof shape, "n=%zu", n);
  real *x = hrand(n, -1, 1), *y0 = hrand(n, -1, 1), *sum = hvec(n), *ssum = hvec(n);
  for (size_t i = 0; i < n; i++) {
    sum[i] = (real)((double)y0[i] + x[i]);
    ssum[i] = (real)(fabs((double)y0[i]) + fabs((double)x[i]));
  }
  struct glue_args A = {.n = n};
  A.cx = in_r("x", x, n);
  A.y = out_add("y", n, y0, sum, ssum, TOL);
  h_run("add", shape, call_add, &A);

  x = hrand(n, -1, 1);
  for (size_t i = 0; i < n; i += 5)
    x[i] = 0; /* relu(0) = 0, relu'(0) = 0 */
  real *r = hvec(n);
  for (size_t i = 0; i < n; i++)
    r[i] = x[i] > 0 ? x[i] : 0;
  struct glue_args R = {.n = n};
  R.cx = in_r("x", x, n);
  R.y = out_over("y", n, r, NULL, 0);
  h_run("relu", shape, call_relu, &R);

  real *dy = hrand(n, -1, 1), *d = hvec(n);
  for (size_t i = 0; i < n; i++)
    d[i] = x[i] > 0 ? dy[i] : 0;
  struct glue_args B = {.n = n};
  B.cx = in_r("x", x, n);
  B.y = out_inplace("dy", n, dy, d, NULL, 0);
  h_run("relu_backward", shape, call_relu_bwd, &B);
  host_free_all();
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

static void check_edge_weights(int E, int kind, int bonds_kept) {
  static const char *const kinds[] = {"none", "cosine", "poly"};
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
  struct glue_args A = {.E = E, .width = in, .kind = kind, .bonds_kept = bonds_kept, .cutoff = 5};
  A.cx = in_r("edge_feat", f, (size_t)E * in);
  A.out = out_over("w", (size_t)E, w, one, TOL);
  h_run("edge_weights", shape, call_edge_weights, &A);
  host_free_all();
}

/* ---- training: Adam, sumsq, scale, allreduce --------------------------------------------------------- */

struct train_args {
  real *p, *m, *v, *x;
  const real *g;
  size_t n;
  struct nn_adam o;
  long step;
  double lr, s;
  int rc;
  const double *sched; /* adam_step_at's {c1, c2, lr}, the backend's memory */
};
static void call_adam(void *p) {
  struct train_args *a = p;
  BE->adam_step(a->p, a->m, a->v, a->g, a->n, &a->o, a->step, a->lr);
}
static void call_adam_at(void *p) {
  struct train_args *a = p;
  BE->adam_step_at(a->p, a->m, a->v, a->g, a->n, &a->o, a->sched);
}
static void call_scale(void *p) {
  struct train_args *a = p;
  BE->scale(a->x, a->n, a->s);
}
static void call_allreduce(void *p) {
  struct train_args *a = p;
  char err[128] = "";
  a->rc = BE->allreduce(a->x, a->n, NULL, err, sizeof err);
  if (a->rc) why("allreduce with comm NULL returned %d: %s", a->rc, err);
}

static void check_adam(size_t n, int decoupled, double wd, long step) {
  char shape[96];
  snprintf(shape, sizeof shape, "n=%zu %s weight_decay=%g step=%ld", n, decoupled ? "AdamW" : "Adam", wd, step);
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
  }
  /* adam_step, then the same update with the step's values read from the
   * backend's memory (adam_step_at); h_run gives its buffers back at the end */
  double sc[3];
  nn_k_adam_sched(sc, o.beta1, o.beta2, step, lr);
  double *dsc = BE->alloc(sizeof sc);
  BE->upload(dsc, sc, sizeof sc);
  for (int at = 0; at < 2; at++) {
    struct train_args A = {.n = n, .o = o, .step = step, .lr = lr, .sched = dsc};
    A.g = in_r("grad", g, n);
    A.p = out_inplace("params", n, p, pr, ps, TOL);
    A.m = out_inplace("m", n, m, mr, ms, TOL);
    A.v = out_inplace("v", n, v, vr, vs, TOL);
    h_run(at ? "adam_step_at" : "adam_step", shape, at ? call_adam_at : call_adam, &A);
  }
  BE->release(dsc);
  host_free_all();
}

/* Recorded work (CUDA graphs; skipped where the backend records nothing):
 * the operations called between record_begin and record_end do not run;
 * each replay runs them once, with the memory's contents of that moment;
 * a free of the backend's memory makes the recording stale. */
static void check_record(size_t n) {
  char shape[64];
  snprintf(shape, sizeof shape, "n=%zu: x = 2 x + y, replayed", n);
  if (!BE->record_begin) {
    printf("skip %-22s %-64s (%s records nothing)\n", "record/replay", shape, BE->name);
    return;
  }
  H.why[0] = 0;
  real *x = hrand(n, -1, 1), *y = hrand(n, -1, 1), *got = hvec(n);
  real *dx = BE->alloc(n * sizeof(real)), *dy = BE->alloc(n * sizeof(real));
  BE->upload(dx, x, n * sizeof(real));
  BE->upload(dy, y, n * sizeof(real));
  char err[256] = "";
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
  if (BE->sync(err, sizeof err)) why("sync: %s", err);
  void *other = BE->alloc(64);
  BE->release(other);
  if (rec && BE->replay(rec) != 1) why("a replay after a free of the backend's memory was not refused as stale");
  BE->record_free(rec);
  BE->release(dx);
  BE->release(dy);
  report("record/replay", shape, !H.why[0], 0, 0, H.why[0] ? H.why : NULL);
  H.why[0] = 0;
  host_free_all();
}

static void check_scale(size_t n, double s) {
  char shape[64];
  snprintf(shape, sizeof shape, "n=%zu s=%g", n, s);
  real *x = hrand(n, -3, 3), *y = hvec(n), *ys = hvec(n);
  for (size_t i = 0; i < n; i++) {
    y[i] = (real)(x[i] * s);
    ys[i] = (real)fabs(x[i] * s);
  }
  struct train_args A = {.n = n, .s = s};
  A.x = out_inplace("x", n, x, y, ys, TOL);
  h_run("scale", shape, call_scale, &A);
  host_free_all();
}

static void check_allreduce(size_t n) {
  char shape[64];
  snprintf(shape, sizeof shape, "n=%zu comm=NULL (one process: unchanged)", n);
  real *x = hrand(n, -1, 1);
  struct train_args A = {.n = n};
  A.x = out_inplace("x", n, x, x, NULL, 0);
  h_run("allreduce", shape, call_allreduce, &A);
  host_free_all();
}

/* sum of x^2, in double (backend.h): relative error against a double sum. */
static void check_sumsq(size_t n) {
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
  const double tol = 1e-9;
  double err = want > 0 ? fabs(got - want) / want : fabs(got);
  report("sumsq", shape, err <= tol, err, tol, "differs from the sum in double");
  host_free_all();
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
  default: /* BCE on logits p, |p| < 6 here */
    *d = 1 / (1 + exp(-p)) - t;
    return log(1 + exp(p)) - p * t;
  }
}

struct loss_args {
  real *dpred, *x;
  const real *pred, *target;
  double *dev;      /* the backend's doubles: acc[2], then ss, norm */
  double want[4];   /* expected acc[0], acc[1] (from the start value below), norm */
  double start_sum; /* acc[1] before the call */
  int n, kind, num, den;
  double gscale, unscale, max_norm;
};

static void check_doubles(const char *what, const double *got, const double *want, int k, double tol) {
  for (int i = 0; i < k; i++) {
    double err = fabs(got[i] - want[i]) / (fabs(want[i]) > 1e-300 ? fabs(want[i]) : 1);
    if (!(err <= tol))
      why("%s[%d] = %.17g, expected %.17g (relative error %.3g > %.3g)", what, i, got[i], want[i], err, tol);
  }
}

static void call_loss(void *p) {
  struct loss_args *a = p;
  double acc[2] = {777, a->start_sum}, got[2];
  BE->upload(a->dev, acc, sizeof acc);
  BE->loss(a->dpred, a->dev, a->pred, a->target, a->n, a->kind, 0.7, a->num, a->den, a->gscale);
  BE->download(got, a->dev, sizeof got);
  /* L1, MSE and Huber have the host's arithmetic to the bit in the
   * reference's order too, up to the last place; BCE's exp and log1p may
   * differ by an ulp between libraries */
  check_doubles("acc", got, a->want, 2, 1e-12);
}

static void check_loss(int n, int kind, int num, int den, double gscale) {
  static const char *const names[] = {"l1", "mse", "huber", "bce"};
  char shape[96];
  snprintf(shape, sizeof shape, "n=%d %s share %d/%d scale %g", n, names[kind], num, den, gscale);
  real *pred = hrand((size_t)n, -3, 3), *target = kind == 3 ? hvec((size_t)n) : hrand((size_t)n, -3, 3);
  if (kind == 3)
    for (int i = 0; i < n; i++)
      target[i] = (real)irand(2);
  if (n > 2) target[1] = pred[1]; /* r = 0: the sign's 0 */
  real *dref = hvec((size_t)n), *ds = hvec((size_t)n);
  double sum = 0;
  for (int i = 0; i < n; i++) {
    double d;
    sum += ref_loss(kind, pred[i], target[i], &d);
    double g = d / n * num / den * gscale;
    dref[i] = (real)g;
    ds[i] = (real)(fabs(g) + 1e-30);
  }
  struct loss_args A = {.n = n, .kind = kind, .num = num, .den = den, .gscale = gscale, .start_sum = 12.5};
  A.want[0] = sum / n * num;
  A.want[1] = A.start_sum + A.want[0];
  A.pred = in_r("pred", pred, (size_t)n);
  A.target = in_r("target", target, (size_t)n);
  A.dpred = out_over("dpred", (size_t)n, dref, ds, 1e-6);
  A.dev = BE->alloc(4 * sizeof(double));
  h_run("loss", shape, call_loss, &A);
  BE->release(A.dev);
  host_free_all();
}

static void call_clip(void *p) {
  struct loss_args *a = p;
  double got[2];
  BE->sumsq_to(a->dev + 2, a->x, (size_t)a->n);
  BE->clip(a->x, (size_t)a->n, a->dev + 2, a->unscale, a->max_norm, a->dev + 3);
  BE->download(got, a->dev + 2, sizeof got);
  check_doubles("sum of squares, norm", got, a->want + 2, 2, 1e-9);
}

/* sumsq_to then clip, as se3_net_clip_queued calls them. */
static void check_clip(int n, double unscale, double max_norm) {
  char shape[96];
  snprintf(shape, sizeof shape, "n=%d unscale=%g max_norm=%g", n, unscale, max_norm);
  real *x = hrand((size_t)n, -2, 2), *y = hvec((size_t)n), *ys = hvec((size_t)n);
  double ss = 0;
  for (int i = 0; i < n; i++)
    ss += (double)x[i] * x[i];
  double norm = sqrt(ss) / unscale, f = 1;
  if (max_norm > 0 && norm > max_norm)
    f = max_norm / norm / unscale;
  else
    f = 1 / unscale;
  for (int i = 0; i < n; i++) {
    y[i] = (real)(x[i] * f);
    ys[i] = (real)(fabs(x[i] * f) + 1e-30);
  }
  struct loss_args A = {.n = n, .unscale = unscale, .max_norm = max_norm};
  A.want[2] = ss;
  A.want[3] = norm;
  A.x = out_inplace("x", (size_t)n, x, y, ys, 1e-6);
  A.dev = BE->alloc(4 * sizeof(double));
  h_run("sumsq_to+clip", shape, call_clip, &A);
  BE->release(A.dev);
  host_free_all();
}

/* ---- bases from relative positions ---------------------------------------------------------------- */

struct bases_args {
  real *out;
  const float *rel;
  int E, rc;
  const struct basis_plan *plan;
};
static void call_bases(void *p) {
  struct bases_args *a = p;
  a->rc = BE->bases(a->out, a->rel, a->E, a->plan);
  if (a->rc) why("bases returned %d", a->rc);
}

/* Each edge's basis against models/basis.c's basis_edge on the host (the
 * same double arithmetic; a GPU may fuse multiply-adds, so a value may
 * differ in its last float place): relative 2.5e-7 over |value| + 1e-6.
 * Directions of every kind, a zero vector (the degree-0 harmonic only), very
 * short and very long vectors. */
static void check_bases(int E, int max_degree) {
  struct basis_plan plan;
  if (basis_plan_init(&plan, max_degree)) {
    fprintf(stderr, "test_backend_ops: out of memory\n");
    exit(1);
  }
  char shape[64];
  snprintf(shape, sizeof shape, "E=%d max_degree=%d (%zu values an edge)", E, max_degree, plan.per_edge);
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
  struct bases_args A = {.rel = drel, .E = E, .plan = &plan};
  A.out = out_over("basis", (size_t)E * per, ref, sc, 2.5e-7);
  h_run("bases", shape, call_bases, &A);
  BE->release(drel);
  basis_plan_free(&plan);
  host_free_all();
}

/* ---- copies back that do not wait: host_alloc, download_queued, fences ------------------------------- */

/* x uploaded; its copy queued into pinned host memory and fenced; then x
 * scaled by 2 on the device and copied again behind a second fence. After
 * the waits the first copy holds x (it ran before the scaling: the queue's
 * order) and the second 2 x, exactly; the fences can be marked again. */
static void check_pipeline(size_t n) {
  char shape[64];
  snprintf(shape, sizeof shape, "n=%zu, two copies in flight", n);
  real *x = hrand(n, -3, 3);
  real *d = BE->alloc((n + 1) * sizeof(real));
  real *h[2] = {BE->host_alloc((n + 1) * sizeof(real)), BE->host_alloc((n + 1) * sizeof(real))};
  void *f[2] = {BE->fence_new(), BE->fence_new()};
  char err[256] = "";
  int ok = d && h[0] && h[1] && f[0] && f[1];
  size_t bad = 0;
  for (int round = 0; ok && round < 2; round++) {
    BE->upload(d, x, n * sizeof(real));
    BE->download_queued(h[0], d, n * sizeof(real));
    BE->fence_mark(f[0]);
    BE->scale(d, n, 2.0);
    BE->download_queued(h[1], d, n * sizeof(real));
    BE->fence_mark(f[1]);
    if (BE->fence_wait(f[1], err, sizeof err) || BE->fence_wait(f[0], err, sizeof err)) {
      ok = 0;
      break;
    }
    for (size_t i = 0; i < n; i++)
      bad += h[0][i] != x[i] || h[1][i] != (real)(x[i] * 2.0);
    for (size_t i = 0; i < n; i++) /* the next round must write them again */
      h[0][i] = h[1][i] = (real)NAN;
  }
  if (!ok)
    report("download_queued+fence", shape, 0, 1, 0, err[0] ? err : "out of memory or fences");
  else
    report("download_queued+fence", shape, bad == 0, (double)bad, 0, "copies differ (the queue's order, or lost)");
  for (int i = 0; i < 2; i++) {
    BE->host_release(h[i]);
    BE->fence_free(f[i]);
  }
  BE->release(d);
  host_free_all();
}

/* Uploads larger than the CUDA backend's pinned staging halves (32 MiB), one
 * after another from ONE host buffer rewritten as soon as each upload
 * returns (backend.h: the caller may reuse it at once), then small ones
 * between them: every device copy must hold what its host buffer held
 * when its upload was called. */
static void check_upload_stream(size_t n, int count) {
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
  char err[256] = "";
  if (ok && BE->sync(err, sizeof err)) ok = 0;
  report("upload (staged)", shape, ok && bad == 0, ok ? (double)bad : 1, 0,
         ok ? "a copy holds other bytes than its host buffer did" : (err[0] ? err : "out of memory"));
  for (int k = 0; k < count && k < 8; k++) {
    BE->release(d[k]);
    BE->release(small[k]);
  }
  host_free_all();
}

/* ---- the cases ------------------------------------------------------------------------------------------ */

static void run_all(void) {
  seed(1);
  check_memory();

  seed(2);
  check_mm(0, 1, 1, 1, 0, 1, 0);
  check_mm(0, 7, 3, 5, 0, 1, 0);
  check_mm(0, 96, 32, 32, 0, 1, 0);
  check_mm(0, 45, 48, 32, 0, 0, 0);
  check_mm(0, 0, 4, 3, 0, 1, 0);
  check_mm(1, 13, 6, 32, 1, 1, 1);
  check_mm(1, 40, 32, 32, 1, 0, 1);
  check_mm(1, 3, 128, 128, 1, 1, 1);
  check_mm(1, 4, 128, 1, 1, 1, 1);
  check_mm(1, 5, 7, 3, 0, 1, 0);
  check_mm(1, 6, 5, 4, 1, 1, 0);
  check_mm(1, 0, 6, 32, 1, 1, 1);
  /* every array one float past 256-byte alignment: a backend whose fast way
   * needs aligned operands (CUDA: cuBLASLt's bias epilogue wants a 16-byte
   * aligned bias) must take its other way, and give the same results */
  H.shift = 1;
  check_mm(1, 40, 32, 32, 1, 1, 1);
  check_mm(1, 13, 6, 32, 1, 1, 1);
  H.shift = 0;

  seed(3);
  check_norm(6, 1, 32);
  check_norm(6, 3, 32);
  check_norm(4, 7, 32);
  check_norm(5, 5, 3);
  check_norm(1, 3, 5);

  seed(4);
  check_radial(37, 6, 32, 0);
  check_radial(11, 6, 7, 1);
  check_radial(1, 3, 5, 1);
  check_radial(0, 6, 32, 1);

  seed(5);
  if (basis_plan_init(&PLAN, NN_MAX_DEG)) {
    fprintf(stderr, "test_backend_ops: out of memory\n");
    exit(1);
  }
  const struct nn_fiber q32 = {{32, 32, 32, 32}}, qkv = {{32, 32, 32, 32}}, qfinal = {{128, 0, 0, 0}};
  const struct nn_fiber first_in = {{6, 0, 0, 0}}, first_kv = {{32, 16, 16, 16}};
  const struct nn_fiber odd_in = {{3, 5, 3, 5}}, odd_out = {{5, 3, 5, 3}}, odd2_in = {{3, 5, 0, 0}},
                        odd2_out = {{5, 0, 3, 0}};
  check_conv("qm9", q32, qkv, 32, 0, G_BIG, -1, 0, 0);
  check_conv("qm9-final", q32, qfinal, 32, 1, G_BIG, -1, 0, 0);
  check_conv("first-block", first_in, first_kv, 32, 0, G_SMALL, -1, 0, 0);
  check_conv("odd", odd_in, odd_out, 7, 0, G_SMALL, -1, 0, 0);
  check_conv("odd", odd_in, odd_out, 7, 1, G_SMALL, -1, 0, 0);
  check_conv("odd", odd_in, odd_out, 7, 1, G_BIG, 1, 1, 0);
  check_conv("odd", odd2_in, odd2_out, 7, 0, G_SMALL, -1, 0, 1);
  check_conv("odd", odd_in, odd_out, 7, 0, G_NONE, -1, 0, 0);
  check_conv("odd", odd_in, odd_out, 7, 1, G_NONE, -1, 0, 0);
  check_conv("odd", odd_in, odd_out, 7, 1, G_ONE, -1, 0, 0);

  seed(6);
  const struct nn_fiber k16 = {{16, 16, 16, 16}}, k16_0 = {{16, 0, 0, 0}}, none = {{0, 0, 0, 0}};
  const struct nn_fiber ok = {{2, 4, 0, 2}}, ov = {{4, 2, 6, 0}}, ov2 = {{2, 2, 0, 0}};
  check_attn("qm9", k16, k16, 8, G_BIG, 0, -1, 0);
  check_attn("qm9", k16, k16, 8, G_BIG, 1, -1, 0);
  check_attn("first-block", k16_0, k16, 8, G_SMALL, 1, -1, 0);
  check_attn("odd", ok, ov, 2, G_SMALL, 0, -1, 0);
  check_attn("odd", ok, ov, 2, G_SMALL, 1, 1, 0);
  check_attn("odd", ok, ov, 1, G_BIG, 1, -1, 1);
  check_attn("no-keys", none, ov2, 2, G_SMALL, 0, -1, 0);
  check_attn("odd", ok, ov, 2, G_NONE, 1, -1, 0);
  check_attn("odd", ok, ov, 2, G_ONE, 0, -1, 0);
  basis_plan_free(&PLAN);

  seed(7);
  check_scale_rows(17, 32);
  check_scale_rows(5, 7);
  check_scale_rows(0, 32);

  seed(8);
  static const int mols[] = {3, 0, 1, 5, 2}, one[] = {1};
  check_pool(mols, 5, 128);
  check_pool(mols, 5, 7);
  check_pool(one, 1, 3);

  seed(9);
  check_concat_split(16, 32, 27);
  check_concat_split(3, 5, 7);
  check_concat_split(6, 0, 9);
  check_concat_split(4, 4, 0);
  check_elementwise(1);
  check_elementwise(1001);
  check_elementwise(0);
  for (int kind = 0; kind < 3; kind++)
    for (int bk = 0; bk < 2; bk++)
      check_edge_weights(41, kind, bk);
  check_edge_weights(0, SE3_ENVELOPE_POLY, 0);

  seed(10);
  check_adam(1, 1, 0.01, 1);
  check_adam(1001, 1, 0.01, 1);
  check_adam(1001, 0, 0.05, 7);
  check_adam(33, 1, 0.0, 0);
  check_record(1001);
  check_record(1);
  check_sumsq(0);
  check_sumsq(1);
  check_sumsq(12345);
  check_scale(1001, 0.37);
  check_scale(5, 0);
  check_scale(0, 2);
  check_allreduce(1001);
  check_allreduce(0);

  seed(11);
  for (int kind = 0; kind < 4; kind++) {
    check_loss(240, kind, 240, 240, 1);
    check_loss(37, kind, 37, 75, 65536);
  }
  check_loss(1, 1, 1, 1, 1);
  check_clip(12345, 1, 5.0);    /* clipped: the norm is about 128 */
  check_clip(12345, 1, 1000);   /* not clipped: untouched */
  check_clip(1001, 1024, 0.01); /* loss-scaled and clipped */
  check_clip(1001, 1024, 0);    /* loss-scaled, no clipping */
  check_clip(0, 1, 1);

  seed(13);
  check_bases(37, 3);
  check_bases(1001, 2);
  check_bases(5, 5);
  check_bases(0, 3);

  seed(12);
  check_pipeline(100003);
  check_pipeline(1);
  check_upload_stream(9000001, 5); /* 36 MB each: every one crosses a staging half */
  check_upload_stream(1000, 3);
}

int main(int argc, char **argv) {
  const char *dev = NULL, *prec = "fp32";
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--precision") && i + 1 < argc)
      prec = argv[++i];
    else if (!dev && argv[i][0] != '-')
      dev = argv[i];
    else
      dev = NULL, i = argc;
  }
  enum nn_precision p = NN_PREC_FP32;
  if (!dev || nn_precision_parse(prec, &p)) {
    fprintf(stderr, "usage: test_backend_ops cpu|cuda|cuda:N [--precision fp32|tf32|bf16|fp16]\n");
    return 2;
  }
  if (!strcmp(dev, "cpu")) {
    if (p != NN_PREC_FP32) {
      fprintf(stderr, "test_backend_ops: the CPU backend computes in fp32 only\n");
      return 2;
    }
    BE = nn_backend_cpu();
  } else {
    struct nn_device d;
    char err[512] = "";
    if (nn_device_parse(dev, &d, err, sizeof err) || !d.cuda || d.any) {
      fprintf(stderr, "usage: test_backend_ops cpu|cuda|cuda:N [--precision fp32|tf32|bf16|fp16]%s%s\n",
              err[0] ? ": " : "", err);
      return 2;
    }
    BE = nn_backend_open(&d, p, err, sizeof err);
    if (!BE) {
      printf("test_backend_ops %s (%s): %s\nSKIPPED: no CUDA backend or no GPU here\n", dev, prec, err);
      return SKIP_CODE;
    }
  }
  TOL = p == NN_PREC_TF32 || p == NN_PREC_FP16 ? 2e-3 : p == NN_PREC_BF16 ? 1.6e-2 : 1e-5;
  TOL_MAG = p == NN_PREC_TF32 || p == NN_PREC_FP16 ? 2e-2 : p == NN_PREC_BF16 ? 8e-2 : 5e-5;
  printf("test_backend_ops: backend %s (%s), precision %s; the reference is the CPU in fp32 (layers) and loops in "
         "double (the rest)\n",
         BE->name, BE->device, prec);
  check_table(p);
  run_all();
  printf("%d passed, %d failed (%s, %s)\n", n_pass, n_fail, BE->name, prec);
  return n_fail ? 1 : 0;
}
