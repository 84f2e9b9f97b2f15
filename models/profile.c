/* profile.c — the profiled backend table (profile.h). */
#include "models/profile.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static const char *const cat_names[NN_PROF_COUNT] = {"basis", "radial", "conv_forward", "conv_backward", "attention",
                                                     "norm",  "linear", "pooling",      "glue",          "optimizer"};

/* The one profiled table's state (profile.h says why there is one). */
static const struct nn_backend *in;
static struct nn_profile *prof;
/* The first failure a sync of ours caught, kept for the caller's own sync:
 * the inner sync reports a failure once, and ours would otherwise swallow it. */
static struct se3_error failed; /* the first failure one of our syncs caught, with its kind */
static int has_failed;

double nn_profile_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void nn_profile_clear(struct nn_profile *p) {
  memset(p->seconds, 0, sizeof p->seconds);
  memset(p->calls, 0, sizeof p->calls);
}

void nn_profile_add(struct nn_profile *p, enum nn_prof_cat cat, double seconds) {
  if ((unsigned)cat >= NN_PROF_COUNT) return;
  p->seconds[cat] += seconds;
  p->calls[cat]++;
}

double nn_profile_total(const struct nn_profile *p) {
  double s = 0;
  for (int c = 0; c < NN_PROF_COUNT; c++)
    s += p->seconds[c];
  return s;
}

const char *nn_profile_name(enum nn_prof_cat cat) { return (unsigned)cat < NN_PROF_COUNT ? cat_names[cat] : "?"; }

/* Waits for the inner table's queued work, keeping its first failure. */
static void settle(void) {
  if (in->sync(has_failed ? NULL : &failed) && !has_failed) has_failed = 1;
}

/* Around a timed operation: the clock after what came before it, and after
 * it. Both do nothing while the profile is off. */
static double begin(void) {
  if (!prof->on) return 0;
  settle();
  return nn_profile_now();
}

static void end(enum nn_prof_cat cat, double t0) {
  if (!prof->on) return;
  settle();
  nn_profile_add(prof, cat, nn_profile_now() - t0);
}

/* ---- memory: forwarded ---- */
static void *p_alloc(size_t bytes) { return in->alloc(bytes); }
static void p_release(void *p) { in->release(p); }
static void p_upload(void *dst, const void *src, size_t bytes) { in->upload(dst, src, bytes); }
static void p_download(void *dst, const void *src, size_t bytes) { in->download(dst, src, bytes); }
static void p_copy(void *dst, const void *src, size_t bytes) { in->copy(dst, src, bytes); }
static void p_zero(void *p, size_t bytes) { in->zero(p, bytes); }

static int p_sync(struct se3_error *err) {
  int rc = in->sync(err);
  if (has_failed) { /* an earlier failure, caught by one of our syncs */
    if (err) *err = failed;
    has_failed = 0;
    return -1;
  }
  return rc;
}

/* ---- layers ---- */
static void p_linear_forward(real *y, const real *x, const real *W, int rows, int cin, int cout) {
  double t0 = begin();
  in->linear_forward(y, x, W, rows, cin, cout);
  end(NN_PROF_LINEAR, t0);
}

static void p_linear_backward(real *dx, real *dW, const real *dy, const real *x, const real *W, int rows, int cin,
                              int cout) {
  double t0 = begin();
  in->linear_backward(dx, dW, dy, x, W, rows, cin, cout);
  end(NN_PROF_LINEAR, t0);
}

static void p_norm_forward(real *y, real *save, const real *x, const real *gamma, const real *beta, int N, int dim,
                           int C) {
  double t0 = begin();
  in->norm_forward(y, save, x, gamma, beta, N, dim, C);
  end(NN_PROF_NORM, t0);
}

static void p_norm_backward(real *dx, real *dgamma, real *dbeta, const real *dy, const real *x, const real *save,
                            const real *gamma, const real *beta, int N, int dim, int C) {
  double t0 = begin();
  in->norm_backward(dx, dgamma, dbeta, dy, x, save, gamma, beta, N, dim, C);
  end(NN_PROF_NORM, t0);
}

static void p_dense_forward(real *y, const real *x, const real *W, const real *b, int rows, int nin, int nout) {
  double t0 = begin();
  in->dense_forward(y, x, W, b, rows, nin, nout);
  end(NN_PROF_LINEAR, t0);
}

static void p_dense_backward(real *dx, real *dW, real *db, const real *dy, const real *x, const real *W, int rows,
                             int nin, int nout) {
  double t0 = begin();
  in->dense_backward(dx, dW, db, dy, x, W, rows, nin, nout);
  end(NN_PROF_LINEAR, t0);
}

static void p_radial_hidden_forward(real *save, const real *x, const real *params, int E, int nin, int H) {
  double t0 = begin();
  in->radial_hidden_forward(save, x, params, E, nin, H);
  end(NN_PROF_RADIAL, t0);
}

static void p_radial_hidden_backward(real *dx, real *dparams, const real *ds2, const real *x, const real *save,
                                     const real *params, int E, int nin, int H) {
  double t0 = begin();
  in->radial_hidden_backward(dx, dparams, ds2, x, save, params, E, nin, H);
  end(NN_PROF_RADIAL, t0);
}

static int p_conv_forward(real *const y[], const struct nn_conv_shape *s, const real *const x[], const real *basis,
                          const real *s2, const real *W3, int H, int pool) {
  double t0 = begin();
  int rc = in->conv_forward(y, s, x, basis, s2, W3, H, pool);
  end(NN_PROF_CONV_FORWARD, t0);
  return rc;
}

static int p_conv_backward(real *const dx[], real *ds2, real *dW3, const struct nn_conv_shape *s,
                           const real *const dy[], const real *const x[], const real *basis, const real *s2,
                           const real *W3, int H, int pool) {
  double t0 = begin();
  int rc = in->conv_backward(dx, ds2, dW3, s, dy, x, basis, s2, W3, H, pool);
  end(NN_PROF_CONV_BACKWARD, t0);
  return rc;
}

static void p_attn_forward(real *const z[], real *alpha, const struct nn_attn_shape *s, const real *const kv[],
                           const real *const q[]) {
  double t0 = begin();
  in->attn_forward(z, alpha, s, kv, q);
  end(NN_PROF_ATTENTION, t0);
}

static void p_attn_backward(real *const dkv[], real *const dq[], const struct nn_attn_shape *s, const real *const dz[],
                            const real *alpha, const real *const kv[], const real *const q[]) {
  double t0 = begin();
  in->attn_backward(dkv, dq, s, dz, alpha, kv, q);
  end(NN_PROF_ATTENTION, t0);
}

static void p_scale_rows(real *x, const real *w, int rows, int n) {
  double t0 = begin();
  in->scale_rows(x, w, rows, n);
  end(NN_PROF_GLUE, t0);
}

static void p_pool_max_forward(real *y, int32_t *arg, const real *x, const int32_t *graph_start, int G, int C) {
  double t0 = begin();
  in->pool_max_forward(y, arg, x, graph_start, G, C);
  end(NN_PROF_POOLING, t0);
}

static void p_pool_max_backward(real *dx, const real *dy, const int32_t *arg, int N, int G, int C) {
  double t0 = begin();
  in->pool_max_backward(dx, dy, arg, N, G, C);
  end(NN_PROF_POOLING, t0);
}

static void p_pool_mean_forward(real *y, const real *x, const int32_t *graph_start, int G, int C) {
  double t0 = begin();
  in->pool_mean_forward(y, x, graph_start, G, C);
  end(NN_PROF_POOLING, t0);
}

static void p_pool_mean_backward(real *dx, const real *dy, const int32_t *graph_start, int G, int C) {
  double t0 = begin();
  in->pool_mean_backward(dx, dy, graph_start, G, C);
  end(NN_PROF_POOLING, t0);
}

/* ---- glue ---- */
static void p_concat_rows(real *out, const real *x, int a, const real *y, int b, size_t rows) {
  double t0 = begin();
  in->concat_rows(out, x, a, y, b, rows);
  end(NN_PROF_GLUE, t0);
}

static void p_split_rows(real *x, int a, real *y, int b, const real *src, size_t rows) {
  double t0 = begin();
  in->split_rows(x, a, y, b, src, rows);
  end(NN_PROF_GLUE, t0);
}

static void p_add(real *y, const real *x, size_t n) {
  double t0 = begin();
  in->add(y, x, n);
  end(NN_PROF_GLUE, t0);
}

static void p_relu(real *y, const real *x, size_t n) {
  double t0 = begin();
  in->relu(y, x, n);
  end(NN_PROF_GLUE, t0);
}

static void p_relu_backward(real *dy, const real *x, size_t n) {
  double t0 = begin();
  in->relu_backward(dy, x, n);
  end(NN_PROF_GLUE, t0);
}

static int p_bases(real *out, const float *rel, int E, const struct basis_plan *plan) {
  double t0 = begin();
  int rc = in->bases(out, rel, E, plan);
  end(NN_PROF_BASIS, t0);
  return rc;
}

static void p_edge_weights(real *w, const real *edge_feat, int E, int nin, int kind, real cutoff, int bonds_kept) {
  double t0 = begin();
  in->edge_weights(w, edge_feat, E, nin, kind, cutoff, bonds_kept);
  end(NN_PROF_GLUE, t0);
}

/* ---- training ---- */
static void p_adam_step(real *params, real *m, real *v, const real *grad, size_t n, const struct nn_adam *o, long step,
                        double lr) {
  double t0 = begin();
  in->adam_step(params, m, v, grad, n, o, step, lr);
  end(NN_PROF_OPTIMIZER, t0);
}

static void p_adam_step_at(real *params, real *m, real *v, const real *grad, size_t n, const struct nn_adam *o,
                           const double *sched) {
  double t0 = begin();
  in->adam_step_at(params, m, v, grad, n, o, sched);
  end(NN_PROF_OPTIMIZER, t0);
}

static double p_sumsq(const real *x, size_t n) {
  double t0 = begin();
  double s = in->sumsq(x, n);
  end(NN_PROF_OPTIMIZER, t0);
  return s;
}

static void p_scale(real *x, size_t n, double s) {
  double t0 = begin();
  in->scale(x, n, s);
  end(NN_PROF_OPTIMIZER, t0);
}

static void p_loss(real *dpred, double *acc, const real *pred, const real *target, int n, int kind, double delta,
                   int num, int den, double gscale) {
  double t0 = begin();
  in->loss(dpred, acc, pred, target, n, kind, delta, num, den, gscale);
  end(NN_PROF_OPTIMIZER, t0);
}

static void p_sumsq_to(double *ss, const real *x, size_t n) {
  double t0 = begin();
  in->sumsq_to(ss, x, n);
  end(NN_PROF_OPTIMIZER, t0);
}

static void p_clip(real *x, size_t n, const double *ss, double unscale, double max_norm, double *norm) {
  double t0 = begin();
  in->clip(x, n, ss, unscale, max_norm, norm);
  end(NN_PROF_OPTIMIZER, t0);
}

static void *p_host_alloc(size_t bytes) { return in->host_alloc(bytes); }
static void p_host_release(void *p) { in->host_release(p); }
static void p_download_queued(void *host_dst, const void *src, size_t bytes) {
  in->download_queued(host_dst, src, bytes);
}
static void *p_fence_new(void) { return in->fence_new(); }
static void p_fence_mark(void *fence) { in->fence_mark(fence); }
static int p_fence_wait(void *fence, struct se3_error *err) { return in->fence_wait(fence, err); }
static void p_fence_free(void *fence) { in->fence_free(fence); }

static int p_allreduce(real *x, size_t n, const struct se3_comm *comm, struct se3_error *err) {
  return in->allreduce(x, n, comm, err);
}

static struct nn_backend profiled = {
    .alloc = p_alloc,
    .release = p_release,
    .upload = p_upload,
    .download = p_download,
    .copy = p_copy,
    .zero = p_zero,
    .sync = p_sync,
    .host_alloc = p_host_alloc,
    .host_release = p_host_release,
    .download_queued = p_download_queued,
    .fence_new = p_fence_new,
    .fence_mark = p_fence_mark,
    .fence_wait = p_fence_wait,
    .fence_free = p_fence_free,
    .linear_forward = p_linear_forward,
    .linear_backward = p_linear_backward,
    .norm_forward = p_norm_forward,
    .norm_backward = p_norm_backward,
    .dense_forward = p_dense_forward,
    .dense_backward = p_dense_backward,
    .radial_hidden_forward = p_radial_hidden_forward,
    .radial_hidden_backward = p_radial_hidden_backward,
    .conv_forward = p_conv_forward,
    .conv_backward = p_conv_backward,
    .attn_forward = p_attn_forward,
    .attn_backward = p_attn_backward,
    .scale_rows = p_scale_rows,
    .pool_max_forward = p_pool_max_forward,
    .pool_max_backward = p_pool_max_backward,
    .pool_mean_forward = p_pool_mean_forward,
    .pool_mean_backward = p_pool_mean_backward,
    .concat_rows = p_concat_rows,
    .split_rows = p_split_rows,
    .add = p_add,
    .relu = p_relu,
    .relu_backward = p_relu_backward,
    .bases = p_bases,
    .edge_weights = p_edge_weights,
    .adam_step = p_adam_step,
    .adam_step_at = p_adam_step_at,
    .sumsq = p_sumsq,
    .scale = p_scale,
    .loss = p_loss,
    .sumsq_to = p_sumsq_to,
    .clip = p_clip,
    .allreduce = p_allreduce,
};

const struct nn_backend *nn_backend_profiled(const struct nn_backend *inner, struct nn_profile *p) {
  in = inner;
  prof = p;
  has_failed = 0;
  profiled.name = inner->name;
  memcpy(profiled.device, inner->device, sizeof profiled.device);
  profiled.host_memory = inner->host_memory;
  profiled.precision = inner->precision;
  /* collectives between devices: not timed, passed through */
  profiled.join = inner->join;
  profiled.reduce_scatter = inner->reduce_scatter;
  profiled.allgather = inner->allgather;
  profiled.sum_start = inner->sum_start;
  profiled.sum_wait = inner->sum_wait;
  /* set-up, outside any step: untimed, passed through */
  profiled.prepare_bases = inner->prepare_bases;
  profiled.set_conv_path = inner->set_conv_path; /* (switches the inner table's convolution) */
  /* recorded work (CUDA graphs) passed through, untimed: a replay calls no
   * operation, so a profiled step must run eagerly (model_bench's profiled
   * step is padded, not recorded); recording while profiling would wait
   * inside the capture and spoil it */
  profiled.record_begin = inner->record_begin;
  profiled.record_end = inner->record_end;
  profiled.replay = inner->replay;
  profiled.record_free = inner->record_free;
  return &profiled;
}
