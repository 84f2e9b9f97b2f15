/* elementwise.cu — the model's element-wise glue (models/cpu/backend.c is
 * the reference), the envelope's edge weights and scaling of rows
 * (models/kernels/envelope.h), gradient scaling and the Adam update
 * (models/kernels/adam.h), the step's loss and the clipping of the
 * gradient on the device (models/kernels/loss.h). One thread per element,
 * grid-stride; the arithmetic of the weights, of Adam, of the loss and of
 * the clipping factor is the CPU's SE3_HD bodies. */
#include "models/cuda/cuda.h"
#include "models/kernels/adam.h"
#include "models/kernels/envelope.h"
#include "models/kernels/loss.h"

#define GRID_STRIDE(i, n)                                                                                              \
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

/* out (rows x (a + b)) = [x (rows x a), y (rows x b)]. */
static __global__ void concat_rows(real *out, const real *x, int a, const real *y, int b, size_t rows) {
  const size_t w = (size_t)(a + b);
  GRID_STRIDE(i, rows * w) {
    size_t r = i / w, c = i % w;
    out[i] = c < (size_t)a ? x[r * (size_t)a + c] : y[r * (size_t)b + (c - (size_t)a)];
  }
}

/* in (rows x (a + b)) into x (rows x a) and y (rows x b); NULL ones skipped. */
static __global__ void split_rows(real *x, int a, real *y, int b, const real *in, size_t rows) {
  const size_t w = (size_t)(a + b);
  GRID_STRIDE(i, rows * w) {
    size_t r = i / w, c = i % w;
    if (c < (size_t)a) {
      if (x) x[r * (size_t)a + c] = in[i];
    } else if (y) {
      y[r * (size_t)b + (c - (size_t)a)] = in[i];
    }
  }
}

static __global__ void add(real *y, const real *x, size_t n) { GRID_STRIDE(i, n) y[i] += x[i]; }
static __global__ void add_f64(double *y, const double *x, size_t n) { GRID_STRIDE(i, n) y[i] += x[i]; }

static __global__ void relu(real *y, const real *x, size_t n) { GRID_STRIDE(i, n) y[i] = x[i] > 0 ? x[i] : 0; }

static __global__ void relu_backward(real *dy, const real *x, size_t n) {
  GRID_STRIDE(i, n) if (!(x[i] > 0)) dy[i] = 0;
}

static __global__ void edge_weights(real *w, const real *edge_feat, int E, int in, int kind, real cutoff,
                                    int bonds_kept) {
  GRID_STRIDE(e, (size_t)E) w[e] = nn_edge_weight(edge_feat + e * (size_t)in, in, kind, cutoff, bonds_kept);
}

/* x[r, :] *= w[r] (rows x n). */
static __global__ void scale_rows(real *x, const real *w, size_t rows, size_t n) {
  GRID_STRIDE(i, rows * n) x[i] *= w[i / n];
}

static __global__ void scale(real *x, size_t n, double s) { GRID_STRIDE(i, n) x[i] = (real)(x[i] * s); }

/* The step's loss: one thread, the host's serial loop (a batch's
 * predictions are a few hundred reals; the sum stays in index order). */
static __global__ void step_loss(real *dpred, double *acc, const real *pred, const real *target, int n, int kind,
                                 double delta, int num, int den, double gscale) {
  if (blockIdx.x == 0 && threadIdx.x == 0) nn_k_step_loss(dpred, acc, pred, target, n, kind, delta, num, den, gscale);
}

/* Every thread computes the factor from *ss (a few flops), so nothing goes
 * back to the host; thread 0 of block 0 writes the norm. */
static __global__ void clip(real *x, size_t n, const double *ss, double unscale, double max_norm, double *norm) {
  double nm, f = nn_k_clip_factor(*ss, unscale, max_norm, &nm);
  if (blockIdx.x == 0 && threadIdx.x == 0 && norm) *norm = nm;
  if (f != 1) GRID_STRIDE(i, n) x[i] = (real)(x[i] * f);
}

static __global__ void adam(real *p, real *m, real *v, const real *g, size_t n, double b1, double b2, double eps,
                            double wd, int decoupled, double c1, double c2, double lr) {
  GRID_STRIDE(i, n) nn_k_adam_one(&p[i], &m[i], &v[i], g[i], b1, b2, eps, wd, decoupled, c1, c2, lr);
}

void cu_concat_rows(real *out, const real *x, int a, const real *y, int b, size_t rows) {
  size_t n = rows * (size_t)(a + b);
  if (!n) return;
  concat_rows<<<cu_grid(n), CU_THREADS, 0, cu_stream()>>>(out, x, a, y, b, rows);
  CU_LAUNCHED("concat_rows");
}

void cu_split_rows(real *x, int a, real *y, int b, const real *in, size_t rows) {
  size_t n = rows * (size_t)(a + b);
  if (!n || (!x && !y)) return;
  split_rows<<<cu_grid(n), CU_THREADS, 0, cu_stream()>>>(x, a, y, b, in, rows);
  CU_LAUNCHED("split_rows");
}

void cu_add(real *y, const real *x, size_t n) {
  if (!n) return;
  add<<<cu_grid(n), CU_THREADS, 0, cu_stream()>>>(y, x, n);
  CU_LAUNCHED("add");
}

void cu_add_f64(double *y, const double *x, size_t n) {
  if (!n) return;
  add_f64<<<cu_grid(n), CU_THREADS, 0, cu_stream()>>>(y, x, n);
  CU_LAUNCHED("add_f64");
}

void cu_relu(real *y, const real *x, size_t n) {
  if (!n) return;
  relu<<<cu_grid(n), CU_THREADS, 0, cu_stream()>>>(y, x, n);
  CU_LAUNCHED("relu");
}

void cu_relu_backward(real *dy, const real *x, size_t n) {
  if (!n) return;
  relu_backward<<<cu_grid(n), CU_THREADS, 0, cu_stream()>>>(dy, x, n);
  CU_LAUNCHED("relu_backward");
}

void cu_edge_weights(real *w, const real *edge_feat, int E, int in, int kind, real cutoff, int bonds_kept) {
  if (E <= 0) return;
  edge_weights<<<cu_grid((size_t)E), CU_THREADS, 0, cu_stream()>>>(w, edge_feat, E, in, kind, cutoff, bonds_kept);
  CU_LAUNCHED("edge_weights");
}

void cu_scale_rows(real *x, const real *w, int rows, int n) {
  if (rows <= 0 || n <= 0) return;
  scale_rows<<<cu_grid((size_t)rows * (size_t)n), CU_THREADS, 0, cu_stream()>>>(x, w, (size_t)rows, (size_t)n);
  CU_LAUNCHED("scale_rows");
}

void cu_scale(real *x, size_t n, double s) {
  if (!n) return;
  scale<<<cu_grid(n), CU_THREADS, 0, cu_stream()>>>(x, n, s);
  CU_LAUNCHED("scale");
}

void cu_loss(real *dpred, double *acc, const real *pred, const real *target, int n, int kind, double delta, int num,
             int den, double gscale) {
  step_loss<<<1, 32, 0, cu_stream()>>>(dpred, acc, pred, target, n, kind, delta, num, den, gscale);
  CU_LAUNCHED("step_loss");
}

void cu_clip(real *x, size_t n, const double *ss, double unscale, double max_norm, double *norm) {
  clip<<<cu_grid(n ? n : 1), CU_THREADS, 0, cu_stream()>>>(x, n, ss, unscale, max_norm, norm);
  CU_LAUNCHED("clip");
}

/* The same with {c1, c2, lr} read from device memory as it runs (a
 * recorded step replays with each step's values). */
static __global__ void adam_at(real *p, real *m, real *v, const real *g, size_t n, double b1, double b2, double eps,
                               double wd, int decoupled, const double *sched) {
  const double c1 = sched[0], c2 = sched[1], lr = sched[2];
  if (nn_k_adam_skip(sched)) return;
  GRID_STRIDE(i, n) nn_k_adam_one(&p[i], &m[i], &v[i], g[i], b1, b2, eps, wd, decoupled, c1, c2, lr);
}

void cu_adam_step_at(real *params, real *m, real *v, const real *grad, size_t n, const struct nn_adam *o,
                     const double *sched) {
  if (!n) return;
  adam_at<<<cu_grid(n), CU_THREADS, 0, cu_stream()>>>(params, m, v, grad, n, o->beta1, o->beta2, o->eps,
                                                      o->weight_decay, o->decoupled, sched);
  CU_LAUNCHED("adam_at");
}

/* models/cpu/optim.h's nn_adam_step: the bias corrections on the host, as
 * the CPU computes them. */
void cu_adam_step(real *params, real *m, real *v, const real *grad, size_t n, const struct nn_adam *o, long step,
                  double lr) {
  if (!n) return;
  double sc[NN_K_ADAM_SCHED];
  nn_k_adam_sched(sc, o->beta1, o->beta2, step, lr);
  adam<<<cu_grid(n), CU_THREADS, 0, cu_stream()>>>(params, m, v, grad, n, o->beta1, o->beta2, o->eps, o->weight_decay,
                                                   o->decoupled, sc[0], sc[1], sc[2]);
  CU_LAUNCHED("adam");
}
