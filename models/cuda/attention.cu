/* attention.cu — SE(3)-equivariant graph attention (models/cpu/nn.h,
 * models/cpu/attention.c has the formulas). Edges are sorted by target with
 * CSR offsets in_start, so everything a node needs is a contiguous range of
 * edges: no atomics, and every sum runs in edge order as on the CPU.
 *
 * Forward    one thread per node: its logits and the (weighted) softmax over
 *            its incoming edges, per head, into alpha (the SE3_HD body
 *            nn_k_attn_node_alpha of models/kernels/attention.h); then one
 *            thread per output element z[d][n, m, c], summing over the
 *            node's edges.
 * Backward   one thread per (node, head) computes da and the logits'
 *            gradient dl (E x H, scratch) with the body nn_k_attn_dalpha;
 *            then one thread per element of dkv (values: alpha dz, keys:
 *            dl q, reading the edge's target from a scratch array) and of
 *            dq (a sum over the node's edges of dl key). */
#include "models/cuda/cuda.h"
#include "models/kernels/attention.h"

/* Per-degree arrays, by value into the kernels (the caller's arrays are on
 * the host; their pointers are device memory). */
struct deg_ptrs {
  const real *p[NN_MAX_DEG + 1];
};
struct deg_ptrs_mut {
  real *p[NN_MAX_DEG + 1];
};

static __global__ void attn_alpha(real *alpha, const struct nn_attn_shape s, const struct deg_ptrs kv,
                                  const struct deg_ptrs q, real scale) {
  for (int n = blockIdx.x * blockDim.x + threadIdx.x; n < s.N; n += gridDim.x * blockDim.x) {
    const int e0 = s.in_start[n], e1 = s.in_start[n + 1];
    if (e1 > e0) nn_k_attn_node_alpha(alpha, &s, kv.p, q.p, scale, n, e0, e1);
  }
}

/* z (N x dim x cv) of one degree: z[n, m, c] = sum_e alpha[e, c / g] value[e, m, c]. */
static __global__ void attn_z(real *z, const real *alpha, const real *kv, const int32_t *in_start, int N, int H,
                              int dim, int cv, int ck) {
  const int g = cv / H;
  const size_t total = (size_t)N * (size_t)(dim * cv);
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
    const int c = (int)(i % (size_t)cv), m = (int)(i / (size_t)cv % (size_t)dim), n = (int)(i / (size_t)(dim * cv));
    const int h = c / g;
    real acc = 0;
    for (int e = in_start[n]; e < in_start[n + 1]; e++)
      acc += alpha[(size_t)e * H + h] * kv[((size_t)e * dim + m) * (size_t)(cv + ck) + c];
    z[i] = acc;
  }
}

void cu_attn_forward(real *const z[], real *alpha, const struct nn_attn_shape *s, const real *const kv[],
                     const real *const q[]) {
  if (s->N <= 0) return;
  struct deg_ptrs K, Q;
  for (int d = 0; d <= NN_MAX_DEG; d++) {
    K.p[d] = kv[d];
    Q.p[d] = q ? q[d] : NULL;
  }
  const real scale = nn_k_attn_scale(s);
  if (s->E > 0) {
    attn_alpha<<<cu_grid((size_t)s->N), CU_THREADS, 0, cu_stream()>>>(alpha, *s, K, Q, scale);
    CU_LAUNCHED("attn_alpha");
  }
  for (int d = 0; d <= NN_MAX_DEG; d++) {
    const int ck = s->fk.ch[d], cv = s->fv.ch[d], dim = NN_DIM(d);
    if (cv == 0 || z[d] == NULL) continue;
    attn_z<<<cu_grid((size_t)s->N * (size_t)(dim * cv)), CU_THREADS, 0, cu_stream()>>>(z[d], alpha, kv[d], s->in_start,
                                                                                       s->N, s->heads, dim, cv, ck);
    CU_LAUNCHED("attn_z");
  }
}

/* dst[e] = the target of edge e. */
static __global__ void edge_targets(int32_t *dst, const int32_t *in_start, int N) {
  for (int n = blockIdx.x * blockDim.x + threadIdx.x; n < N; n += gridDim.x * blockDim.x)
    for (int e = in_start[n]; e < in_start[n + 1]; e++)
      dst[e] = n;
}

void cu_edge_targets(int32_t *dst, const int32_t *in_start, int N) {
  if (N <= 0) return;
  edge_targets<<<cu_grid((size_t)N), CU_THREADS, 0, cu_stream()>>>(dst, in_start, N);
  CU_LAUNCHED("edge_targets");
}

/* dl[e, h] = scale a[e, h] (da[e, h] - S[h]), S[h] = sum over the node's edges of a da. */
static __global__ void attn_dlogit(real *dl, const real *alpha, const struct nn_attn_shape s, const struct deg_ptrs dz,
                                   const struct deg_ptrs kv, real scale) {
  const int H = s.heads;
  for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < s.N * H; t += gridDim.x * blockDim.x) {
    const int n = t / H, h = t % H, e0 = s.in_start[n], e1 = s.in_start[n + 1];
    real S = 0;
    for (int e = e0; e < e1; e++)
      S += alpha[(size_t)e * H + h] * nn_k_attn_dalpha(&s, dz.p, kv.p, n, e, h);
    for (int e = e0; e < e1; e++) {
      const real a = alpha[(size_t)e * H + h];
      dl[(size_t)e * H + h] = scale * a * (nn_k_attn_dalpha(&s, dz.p, kv.p, n, e, h) - S);
    }
  }
}

/* dkv (E x dim x (cv + ck)) of one degree: values a dz[dst], keys dl q[dst]. */
static __global__ void attn_dkv(real *dkv, const real *alpha, const real *dl, const real *dz, const real *q,
                                const int32_t *dst, int E, int H, int dim, int cv, int ck) {
  const int w = cv + ck;
  const size_t total = (size_t)E * (size_t)(dim * w);
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
    const int col = (int)(i % (size_t)w), m = (int)(i / (size_t)w % (size_t)dim), e = (int)(i / (size_t)(dim * w));
    const size_t n = (size_t)dst[e];
    if (col < cv) {
      const int h = col / (cv / H);
      dkv[i] = dz ? alpha[(size_t)e * H + h] * dz[(n * dim + m) * cv + col] : 0;
    } else {
      const int c = col - cv, h = c / (ck / H);
      dkv[i] = dl[(size_t)e * H + h] * q[(n * dim + m) * ck + c];
    }
  }
}

/* dq (N x dim x ck) of one degree: sum over the node's edges of dl key. */
static __global__ void attn_dq(real *dq, const real *dl, const real *kv, const int32_t *in_start, int N, int H, int dim,
                               int cv, int ck) {
  const int g = ck / H;
  const size_t total = (size_t)N * (size_t)(dim * ck);
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
    const int c = (int)(i % (size_t)ck), m = (int)(i / (size_t)ck % (size_t)dim), n = (int)(i / (size_t)(dim * ck));
    const int h = c / g;
    real acc = 0;
    for (int e = in_start[n]; e < in_start[n + 1]; e++)
      acc += dl[(size_t)e * H + h] * kv[((size_t)e * dim + m) * (size_t)(cv + ck) + cv + c];
    dq[i] = acc;
  }
}

void cu_attn_backward(real *const dkv[], real *const dq[], const struct nn_attn_shape *s, const real *const dz[],
                      const real *alpha, const real *const kv[], const real *const q[]) {
  const int N = s->N, E = s->E, H = s->heads;
  if (N <= 0) return;
  struct deg_ptrs DZ, K;
  for (int d = 0; d <= NN_MAX_DEG; d++) {
    DZ.p[d] = dz[d];
    K.p[d] = kv[d];
  }
  /* with no edges every dq is 0 and there is no dkv */
  size_t lb = cu_round((size_t)E * (size_t)H * sizeof(real) + 1), tb = cu_round((size_t)E * sizeof(int32_t) + 1);
  char *p = (char *)cu_scratch(CU_SCRATCH_OP, lb + tb);
  if (!p) return;
  real *dl = (real *)cu_carve(&p, lb);
  int32_t *dst = (int32_t *)cu_carve(&p, tb);
  if (E > 0) {
    cu_edge_targets(dst, s->in_start, N);
    attn_dlogit<<<cu_grid((size_t)N * (size_t)H), CU_THREADS, 0, cu_stream()>>>(dl, alpha, *s, DZ, K,
                                                                                nn_k_attn_scale(s));
    CU_LAUNCHED("attn_dlogit");
  }
  for (int d = 0; d <= NN_MAX_DEG; d++) {
    const int ck = s->fk.ch[d], cv = s->fv.ch[d], dim = NN_DIM(d);
    if (dkv && dkv[d] && cv + ck > 0 && E > 0) {
      attn_dkv<<<cu_grid((size_t)E * (size_t)(dim * (cv + ck))), CU_THREADS, 0, cu_stream()>>>(
          dkv[d], alpha, dl, cv ? dz[d] : NULL, ck ? q[d] : NULL, dst, E, H, dim, cv, ck);
      CU_LAUNCHED("attn_dkv");
    }
    if (dq && dq[d] && ck > 0) {
      attn_dq<<<cu_grid((size_t)N * (size_t)(dim * ck)), CU_THREADS, 0, cu_stream()>>>(dq[d], dl, kv[d], s->in_start, N,
                                                                                       H, dim, cv, ck);
      CU_LAUNCHED("attn_dq");
    }
  }
}
