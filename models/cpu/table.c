/* table.c — the CPU backend's table (models/backend.h): the layers of
 * nn.h as they are, host memory, and the model's element-wise glue, which
 * the other backends match. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/comm.h"
#include "models/cpu/table.h"
#include "models/cpu/isa.h"
#include "models/cpu/nn.h"
#include "models/cpu/optim.h"
#include "models/kernels/basis.h"
#include "models/kernels/loss.h"

static void *cpu_alloc(size_t bytes) { return aligned_alloc(256, (bytes + 255) / 256 * 256); }
static void cpu_release(void *p) { free(p); }
static void cpu_copy(void *dst, const void *src, size_t bytes) {
  if (bytes && dst != src) memmove(dst, src, bytes);
}
static void cpu_zero(void *p, size_t bytes) {
  if (bytes) memset(p, 0, bytes);
}
static int cpu_sync(struct se3_error *err) {
  (void)err;
  return 0;
}

static void cpu_concat_rows(real *out, const real *x, int a, const real *y, int b, size_t rows) {
#pragma omp parallel for schedule(static)
  for (long r = 0; r < (long)rows; r++) {
    memcpy(out + (size_t)r * (size_t)(a + b), x + (size_t)r * (size_t)a, (size_t)a * sizeof *out);
    if (b) memcpy(out + (size_t)r * (size_t)(a + b) + a, y + (size_t)r * (size_t)b, (size_t)b * sizeof *out);
  }
}

static void cpu_split_rows(real *x, int a, real *y, int b, const real *in, size_t rows) {
#pragma omp parallel for schedule(static)
  for (long r = 0; r < (long)rows; r++) {
    if (x) memcpy(x + (size_t)r * (size_t)a, in + (size_t)r * (size_t)(a + b), (size_t)a * sizeof *x);
    if (y) memcpy(y + (size_t)r * (size_t)b, in + (size_t)r * (size_t)(a + b) + a, (size_t)b * sizeof *y);
  }
}

static void cpu_add(real *y, const real *x, size_t n) {
#pragma omp parallel for schedule(static)
  for (long i = 0; i < (long)n; i++)
    y[i] += x[i];
}

static void cpu_relu(real *y, const real *x, size_t n) {
#pragma omp parallel for schedule(static)
  for (long i = 0; i < (long)n; i++)
    y[i] = x[i] > 0 ? x[i] : 0;
}

static void cpu_relu_backward(real *dy, const real *x, size_t n) {
#pragma omp parallel for schedule(static)
  for (long i = 0; i < (long)n; i++)
    if (!(x[i] > 0)) dy[i] = 0;
}

static int cpu_bases(real *out, const float *rel, int E, const struct basis_plan *plan) {
  size_t per = plan->per_edge;
#pragma omp parallel for schedule(static)
  for (int e = 0; e < E; e++) {
    double y[SO3_SH_DIM(2 * BASIS_MAX_DEGREE)];
    nn_k_basis_harmonics(plan->max_degree, so3_sh_norm, rel + (size_t)e * 3, y);
    real *o = out + (size_t)e * per;
    for (size_t k = 0; k < per; k++)
      o[k] = nn_k_basis_value(k, plan->nz_start, plan->nz_y, plan->nz_c, y);
  }
  return 0;
}

static void cpu_edge_weights(real *w, const real *edge_feat, int E, int in, int kind, real cutoff, int bonds_kept) {
#pragma omp parallel for schedule(static)
  for (int e = 0; e < E; e++)
    w[e] = nn_edge_weight(edge_feat + (size_t)e * (size_t)in, in, kind, cutoff, bonds_kept);
}

/* Serially in index order, so the sum does not depend on the thread count,
 * and its square root is nn_grad_norm's exactly (se3_net_clip clips as
 * nn_grad_clip did). */
static double cpu_sumsq(const real *x, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; i++)
    s += (double)x[i] * (double)x[i];
  return s;
}

static void cpu_scale(real *x, size_t n, double s) {
#pragma omp parallel for schedule(static)
  for (long i = 0; i < (long)n; i++)
    x[i] = (real)(x[i] * s);
}

/* The host backend's pipeline copies: everything has run when a call
 * returns, so a fence is only a token. */
static void *cpu_host_alloc(size_t bytes) { return cpu_alloc(bytes); }
static void cpu_download_queued(void *host_dst, const void *src, size_t bytes) { cpu_copy(host_dst, src, bytes); }
static void *cpu_fence_new(void) { return malloc(1); }
static void cpu_fence_mark(void *fence) { (void)fence; }
static int cpu_fence_wait(void *fence, struct se3_error *err) {
  (void)fence;
  return cpu_sync(err);
}

static void cpu_loss(real *dpred, double *acc, const real *pred, const real *target, int n, int kind, double delta,
                     int num, int den, double gscale) {
  nn_k_step_loss(dpred, acc, pred, target, n, kind, delta, num, den, gscale);
}

static void cpu_sumsq_to(double *ss, const real *x, size_t n) { *ss = cpu_sumsq(x, n); }

static void cpu_clip(real *x, size_t n, const double *ss, double unscale, double max_norm, double *norm) {
  double f = nn_k_clip_factor(*ss, unscale, max_norm, norm);
  if (f != 1) cpu_scale(x, n, f);
}

static void cpu_add_f64(double *y, const double *x, size_t n) {
  for (size_t i = 0; i < n; i++)
    y[i] += x[i];
}

static int cpu_allreduce(real *x, size_t n, const struct se3_comm *comm, struct se3_error *err) {
  if (!comm) return 0;
  int rc = sizeof(real) == sizeof(float) ? comm_sum_f32(comm, (float *)x, n) : comm_sum_f64(comm, (double *)x, n);
  if (rc) se3_error_set(err, SE3_ERR_RUN, "summing the gradient over %d processes: MPI failed", comm_size(comm));
  return rc;
}

static struct nn_backend cpu = {
    .name = "cpu",
    .host_memory = 1,
    .precision = NN_PREC_FP32,
    .alloc = cpu_alloc,
    .release = cpu_release,
    .upload = cpu_copy,
    .download = cpu_copy,
    .copy = cpu_copy,
    .zero = cpu_zero,
    .sync = cpu_sync,
    .host_alloc = cpu_host_alloc,
    .host_release = cpu_release,
    .download_queued = cpu_download_queued,
    .fence_new = cpu_fence_new,
    .fence_mark = cpu_fence_mark,
    .fence_wait = cpu_fence_wait,
    .fence_free = free,
    .linear_forward = nn_linear_forward,
    .linear_backward = nn_linear_backward,
    .norm_forward = nn_norm_forward,
    .norm_backward = nn_norm_backward,
    .dense_forward = nn_dense_forward,
    .dense_backward = nn_dense_backward,
    .radial_hidden_forward = nn_radial_hidden_forward,
    .radial_hidden_backward = nn_radial_hidden_backward,
    .conv_forward = nn_conv_forward,
    .conv_backward = nn_conv_backward,
    .attn_forward = nn_attn_forward,
    .attn_backward = nn_attn_backward,
    .scale_rows = nn_scale_rows,
    .pool_max_forward = nn_pool_max_forward,
    .pool_max_backward = nn_pool_max_backward,
    .pool_mean_forward = nn_pool_mean_forward,
    .pool_mean_backward = nn_pool_mean_backward,
    .concat_rows = cpu_concat_rows,
    .split_rows = cpu_split_rows,
    .add = cpu_add,
    .relu = cpu_relu,
    .relu_backward = cpu_relu_backward,
    .bases = cpu_bases,
    .edge_weights = cpu_edge_weights,
    .adam_step = nn_adam_step,
    .adam_step_at = nn_adam_step_at,
    .sumsq = cpu_sumsq,
    .scale = cpu_scale,
    .loss = cpu_loss,
    .sumsq_to = cpu_sumsq_to,
    .clip = cpu_clip,
    .add_f64 = cpu_add_f64,
    .allreduce = cpu_allreduce,
};

/* The processor's name, from /proc/cpuinfo (Linux), once. */
static void cpu_name(char *out, size_t n) {
  snprintf(out, n, "cpu");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[256];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "model name", 10)) continue;
    char *v = strchr(line, ':');
    if (!v) break;
    for (v++; *v == ' ' || *v == '\t'; v++)
      ;
    v[strcspn(v, "\n")] = 0;
    snprintf(out, n, "%s", v);
    break;
  }
  fclose(f);
}

const struct nn_backend *nn_backend_cpu(void) {
  if (!cpu.device[0]) {
    nn_blas_init();
    cpu_name(cpu.device, sizeof cpu.device);
  }
  return &cpu;
}

/* precision bf16: the fp32 table with the convolution's forward in bf16
 * (nn_conv_forward_bf16); its backward stays fp32 (training on the CPU runs
 * in fp32: stages/platform.c). A table of its own, so that the fp32 table
 * (nn_backend_cpu, the host's) never changes under another user. */
static struct nn_backend cpu_bf16;

const struct nn_backend *nn_backend_cpu_precision(enum nn_precision precision, struct se3_error *err) {
  const struct nn_backend *be = nn_backend_cpu();
  if (precision == NN_PREC_FP32) return be;
  if (precision == NN_PREC_BF16 && nn_bf16_supported()) {
    if (!cpu_bf16.name) {
      cpu_bf16 = cpu;
      cpu_bf16.precision = NN_PREC_BF16;
      cpu_bf16.conv_forward = nn_conv_forward_bf16;
    }
    return &cpu_bf16;
  }
  if (precision == NN_PREC_BF16)
    se3_error_set(
        err, SE3_ERR_USAGE,
        "precision bf16 on the CPU needs AVX512-BF16 (Intel Cooper Lake or Sapphire Rapids and later, AMD Zen 4 "
        "and later), which this processor (%s) lacks; use precision: fp32, or a GPU (device: cuda)",
        cpu.device);
  else
    se3_error_set(err, SE3_ERR_USAGE,
                  "precision %s needs a GPU (device: cuda); the CPU computes in fp32, or in bf16 for scoring",
                  precision == NN_PREC_TF32 ? "tf32" : "fp16");
  return NULL;
}
