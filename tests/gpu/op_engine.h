/* op_engine.h — the engine of test_backend_ops.c (whose header describes the
 * protocol): random numbers, the case's host memory, the backend buffers of
 * one case and its two runs (H_RUN), the finite-difference check of the
 * gradient mode (G_RUN), tolerance classes, and the loop over the table of
 * cases. Included once, by test_backend_ops.c; everything is static.
 */
#ifndef SE3_OP_ENGINE_H
#define SE3_OP_ENGINE_H

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/backend.h"

static const struct nn_backend *BE;
static enum nn_precision PREC;
static int GRAD; /* the gradient mode (--grad) */
static int n_pass, n_fail;

/* ---- tolerance classes ---------------------------------------------------------- */

enum tol_class {
  EXACT,   /* data movement: bit for bit */
  T_SUM,   /* a sum of products: error over the sum of |terms| (the builder's scale) */
  T_MAG,   /* normalisations, softmax: error over |expected| + rms(expected) */
  T_REAL,  /* computed in double on both sides, stored as real: 1e-6 relative */
  T_BASIS, /* the bases: the host's double arithmetic, but a GPU may fuse multiply-adds */
  T_DBL,   /* summed in double (backend.h's sumsq): 1e-9 relative */
  T_FD,    /* the gradient mode: backward against central differences */
};

/* T_SUM: 1e-5 for fp32, 2e-3 for tf32 and fp16, 1.6e-2 for bf16 (products of
 * inputs rounded to 10 or 7 stored significand bits: 4 times the unit
 * round-off, 2^-11 or 2^-8; under dev/cuda_emu's rounding the worst case
 * reached 0.39 and 0.32 of them). T_MAG: 5e-5, 2e-2, 8e-2. */
static double tol_of(enum tol_class k) {
  int half = PREC == NN_PREC_TF32 || PREC == NN_PREC_FP16, bf16 = PREC == NN_PREC_BF16;
  switch (k) {
  case T_SUM:
    return half ? 2e-3 : bf16 ? 1.6e-2 : 1e-5;
  case T_MAG:
    return half ? 2e-2 : bf16 ? 8e-2 : 5e-5;
  case T_REAL:
    return 1e-6;
  case T_BASIS:
    return 2.5e-7;
  case T_DBL:
    return 1e-9;
  case T_FD:
    return 1e-6;
  default:
    return 0;
  }
}

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

static void *xmalloc(size_t bytes) {
  void *p = calloc(1, bytes + 64);
  if (!p) {
    fprintf(stderr, "test_backend_ops: out of host memory\n");
    exit(1);
  }
  return p;
}
static void *hmem(size_t bytes) {
  if (n_host == MAX_HOST) {
    fprintf(stderr, "test_backend_ops: too many host blocks in one case\n");
    exit(1);
  }
  return host_blocks[n_host++] = xmalloc(bytes);
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

/* ---- the buffers of one case on the backend ---------------------------------------- */

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
  double tol;    /* the case's tolerance (its class), for the outputs declared */
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
  *b = (struct buf){
      .name = name, .kind = kind, .i32 = i32, .n = n, .host = host, .ref = ref, .scale = scale, .tol = tol};
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
/* Outputs, at the case's tolerance: one the operation overwrites; one it
 * adds to, from pre (ref includes pre); one it updates in place, from pre. */
static real *out_over(const char *name, size_t n, const real *ref, const real *scale) {
  return h_add(K_OVER, name, n, 0, NULL, ref, scale, H.tol);
}
static int32_t *out_over_i(const char *name, size_t n, const int32_t *ref) {
  return h_add(K_OVER, name, n, 1, NULL, ref, NULL, 0);
}
static real *out_add(const char *name, size_t n, const real *pre, const real *ref, const real *scale) {
  return h_add(K_ADD, name, n, 0, pre, ref, scale, H.tol);
}
static real *out_inplace(const char *name, size_t n, const real *pre, const real *ref, const real *scale) {
  return h_add(K_INPLACE, name, n, 0, pre, ref, scale, H.tol);
}

static void h_free_bufs(void) {
  for (int i = 0; i < H.n; i++) {
    BE->release(H.b[i].base);
    free(H.b[i].got[0]);
    free(H.b[i].got[1]);
  }
  H.n = 0;
}

/* ---- comparisons and the report ----------------------------------------------------- */

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

/* ---- the two runs of a case ------------------------------------------------------------ */

/* Before run r: outputs get their start (run 1: added-to ones P, others NaN;
 * run 2: 0 and 777), inputs stay as uploaded. */
static void h_stage(int r) {
  for (int i = 0; i < H.n; i++) {
    struct buf *b = &H.b[i];
    if (b->kind == K_IN) continue;
    const void *vals = b->kind == K_INPLACE ? b->host : b->kind == K_ADD && r == 0 ? b->host : NULL;
    void *zeros = b->kind == K_ADD && r == 1 ? xmalloc(b->n * esize(b)) : NULL;
    void *s = stage(b, zeros ? zeros : vals, r);
    BE->upload(b->dev, s, (b->n + GUARD) * esize(b));
    free(s);
    free(zeros);
  }
}

/* After run r: every buffer back with its guard, inputs unchanged. */
static void h_collect(int r) {
  struct se3_error err;
  if (BE->sync(&err)) why("run %d: sync failed: %s", r + 1, se3_error_str(&err).s);
  for (int i = 0; i < H.n; i++) {
    struct buf *b = &H.b[i];
    size_t es = esize(b);
    char *got = xmalloc((b->n + GUARD) * es);
    BE->download(got, b->dev, (b->n + GUARD) * es);
    for (size_t k = b->n; k < b->n + GUARD; k++) {
      int bad = memcmp(got + k * es, b->i32 ? (const void *)&GUARD_I : (const void *)&GUARD_R, es) != 0;
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

/* Run 1 against the expected values, run 2 against run 1; the case's line. */
static void h_check(const char *op, const char *shape) {
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
      double tol = b->tol > 0 ? b->tol : tol_of(T_SUM);
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
  h_free_bufs();
}

/* Runs the call (the operation on the buffers declared so far) twice as the
 * protocol says, compares and prints the case's line. */
#define H_RUN(op, shape, ...)                                                                                          \
  do {                                                                                                                 \
    for (int run_ = 0; run_ < 2; run_++) {                                                                             \
      h_stage(run_);                                                                                                   \
      __VA_ARGS__;                                                                                                     \
      h_collect(run_);                                                                                                 \
    }                                                                                                                  \
    h_check(op, shape);                                                                                                \
  } while (0)

/* ---- the gradient mode: a backward against central differences of its forward ------------
 * L = sum over the forward's outputs y_j of <y_j, w_j> (w_j random), plus c
 * times a double the forward leaves in the backend's memory (the loss). The
 * backward, given dy_j = w_j and its gradients starting from 0, gives
 * dL/dx_i for each input x_i checked; along a random direction v_i,
 * <dL/dx_i, v_i> must equal (L(x_i + h v_i) - L(x_i - h v_i)) / 2h, relative
 * to the sum of |dL/dx_ik v_ik| (one direction: two forwards an input, so
 * every shape of the table is cheap). In double with h = 1e-6 the CPU
 * layers agree to 1e-8 or better (the builders keep their data off the
 * kinks: ReLU at 0, ties of a maximum, the norm's clamp), so 1e-6 leaves
 * room, while a wrong term fails by orders of magnitude (the norm's
 * backward without its xh m2 term: 9e-4 to 0.2); an error confined to one
 * element of n shows at about 1/n of its size. Every entry flagged FD is
 * checked at its shape; its builder declares its buffers as for its own
 * case, the forward's extra ones, then what L and the check are made of
 * (g_out, g_var: no-ops outside this mode), and runs BWD_RUN. */

#define MAX_G 12
enum { G_FWD, G_BWD, G_DONE };
static const double FD_H = 1e-6;

static struct {
  struct gvar {
    void *x;  /* an input of the forward (a buffer of the case: its host values are the point) */
    real *dx; /* where the backward leaves dL/dx */
    size_t n;
    const real *at;
    real *v;
    double dot, abs; /* <dx, v>, sum |dx v| */
  } var[MAX_G];
  struct gout {
    const real *y; /* an output of the forward */
    real *dy;      /* the backward's dy for it (NULL: none) */
    size_t n;
    real *w;
  } out[MAX_G];
  const double *yd; /* a double output (the loss's acc[0]), times yd_coef */
  double yd_coef;
  int nv, no, state, k, sign;
  double lp, worst;
} G;

/* y (n reals, the forward's output) is in L with random weights, which the
 * backward gets in dy. No-op outside the gradient mode. */
static void g_out(const real *y, size_t n, real *dy) {
  if (!GRAD || !y || G.no == MAX_G) return;
  G.out[G.no++] = (struct gout){y, dy, n, NULL};
}
static void g_out_d(const double *y, double coef) {
  if (!GRAD) return;
  G.yd = y;
  G.yd_coef = coef;
}
/* x (a buffer of the case, real) is checked against dx (NULL: not computed,
 * nothing checked). No-op outside the gradient mode. */
static void g_var(const void *x, real *dx) {
  if (!GRAD || !x || !dx || G.nv == MAX_G) return;
  for (int i = 0; i < H.n; i++)
    if (H.b[i].dev == x && H.b[i].host && !H.b[i].i32) {
      G.var[G.nv++] = (struct gvar){.x = H.b[i].dev, .dx = dx, .n = H.b[i].n, .at = H.b[i].host};
      return;
    }
  why("g_var: %p is no real input of the case", x);
}

static double g_loss(void) {
  double L = 0;
  for (int j = 0; j < G.no; j++) {
    real *y = xmalloc(G.out[j].n * sizeof(real));
    BE->download(y, G.out[j].y, G.out[j].n * sizeof(real));
    for (size_t k = 0; k < G.out[j].n; k++)
      L += (double)y[k] * G.out[j].w[k];
    free(y);
  }
  if (G.yd) {
    double d;
    BE->download(&d, G.yd, sizeof d);
    L += G.yd_coef * d;
  }
  return L;
}

/* Every input at its point, input k moved by s h v_k. */
static void g_upload(int k, double s) {
  for (int i = 0; i < G.nv; i++) {
    struct gvar *g = &G.var[i];
    real *x = xmalloc(g->n * sizeof(real));
    for (size_t j = 0; j < g->n; j++)
      x[j] = i == k ? (real)((double)g->at[j] + s * FD_H * (double)g->v[j]) : g->at[j];
    BE->upload(g->x, x, g->n * sizeof(real));
    free(x);
  }
}

/* The next thing to run: the forward at the point; the backward; then the
 * forward at each input moved either way. */
static int g_step(void) {
  switch (G.state) {
  case 0:
    for (int j = 0; j < G.no; j++)
      G.out[j].w = hrand(G.out[j].n, -1, 1);
    for (int i = 0; i < G.nv; i++)
      G.var[i].v = hrand(G.var[i].n, -1, 1);
    g_upload(-1, 0);
    G.state = 1;
    return G_FWD;
  case 1: /* gradients from 0 first: a dy may be the gradient's own buffer (in place) */
    for (int i = 0; i < G.nv; i++)
      BE->zero(G.var[i].dx, G.var[i].n * sizeof(real));
    for (int j = 0; j < G.no; j++)
      if (G.out[j].dy) BE->upload(G.out[j].dy, G.out[j].w, G.out[j].n * sizeof(real));
    G.state = 2;
    return G_BWD;
  case 2:
    for (int i = 0; i < G.nv; i++) {
      struct gvar *g = &G.var[i];
      real *dx = xmalloc(g->n * sizeof(real));
      BE->download(dx, g->dx, g->n * sizeof(real));
      g->dot = g->abs = 0;
      for (size_t j = 0; j < g->n; j++) {
        g->dot += (double)dx[j] * g->v[j];
        g->abs += fabs((double)dx[j] * g->v[j]);
      }
      free(dx);
    }
    G.k = 0;
    G.sign = 1;
    break;
  default: {
    double L = g_loss();
    if (G.sign > 0) {
      G.lp = L;
      G.sign = -1;
    } else {
      struct gvar *g = &G.var[G.k];
      double num = (G.lp - L) / (2 * FD_H), d = fabs(num - g->dot);
      double e = d == 0 ? 0 : g->abs > 0 ? d / g->abs : INFINITY;
      if (!(e <= G.worst)) G.worst = e;
      if (!(e <= tol_of(T_FD)))
        why("input %d of %d (%zu values): <dL/dx, v> = %.12g, the central difference %.12g", G.k + 1, G.nv, g->n,
            g->dot, num);
      G.k++;
      G.sign = 1;
    }
  }
  }
  while (G.k < G.nv && G.var[G.k].n == 0)
    G.k++;
  if (G.k >= G.nv) return G_DONE;
  g_upload(G.k, G.sign);
  G.state = 3;
  return G_FWD;
}

static void g_end(const char *op, const char *shape) {
  struct se3_error err;
  if (BE->sync(&err)) why("sync failed: %s", se3_error_str(&err).s);
  if (!G.nv) why("no gradient to check");
  report(op, shape, !H.why[0], G.worst, tol_of(T_FD), H.why);
  H.why[0] = 0;
  h_free_bufs();
  memset(&G, 0, sizeof G);
}

/* The forward and backward statements, in the gradient mode's order. */
#define G_RUN(op, shape, fwd, ...)                                                                                     \
  do {                                                                                                                 \
    for (int g_; (g_ = g_step()) != G_DONE;) {                                                                         \
      if (g_ == G_FWD) {                                                                                               \
        fwd;                                                                                                           \
      } else {                                                                                                         \
        __VA_ARGS__;                                                                                                   \
      }                                                                                                                \
    }                                                                                                                  \
    g_end(op, shape);                                                                                                  \
  } while (0)

/* A backward's case: in the gradient mode its check against the forward
 * (fwd), else its two runs. */
#define BWD_RUN(op, shape, fwd, ...)                                                                                   \
  do {                                                                                                                 \
    if (GRAD)                                                                                                          \
      G_RUN(op, shape, fwd, __VA_ARGS__);                                                                              \
    else                                                                                                               \
      H_RUN(op, shape, __VA_ARGS__);                                                                                   \
  } while (0)

/* ---- the table of cases ---------------------------------------------------------------------- */

/* flags: the engine's, then the builders' */
enum {
  FD = 1 << 0,    /* a backward: checked against differences in the gradient mode */
  SHIFT = 1 << 1, /* every array one real past 256-byte alignment */
};
#define SAME (-1) /* rng: the inputs of the entry before, drawn again */

struct op_case {
  const char *op; /* the operation, as printed */
  void (*build)(const struct op_case *c);
  enum tol_class tol;
  int rng;  /* > 0: the random numbers start from this seed; 0: go on; SAME */
  int n[4]; /* sizes, as the builder reads them */
  int fl;   /* flags */
  double x[2];
  const char *what;
  struct nn_fiber f[2];
  const int *sizes;
};

/* Every case (in the gradient mode, those flagged FD), in order. */
static void run_cases(const struct op_case *cases, size_t n) {
  uint64_t start = rng_state;
  for (size_t i = 0; i < n; i++) {
    const struct op_case *c = &cases[i];
    if (c->rng == SAME)
      rng_state = start;
    else if (c->rng > 0)
      seed((uint64_t)c->rng);
    start = rng_state;
    if (GRAD && !(c->fl & FD)) continue;
    H.shift = c->fl & SHIFT ? 1 : 0;
    H.tol = tol_of(GRAD ? T_FD : c->tol);
    c->build(c);
    host_free_all();
  }
  H.shift = 0;
}

#endif
