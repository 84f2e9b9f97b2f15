/* conv.cu — the TFN convolution fused with the last layer of its radial
 * network, on the GPU (models/cpu/nn.h has the contract; models/cpu/conv.c
 * is the CPU's version and the reference).
 *
 * Per edge e and output degree l,
 *   out_l[e, i, o] = sum_j R_l[e, o, j] U_l[e, i, j],
 *   R_l[e, o, j]   = sum_h s2[e, h] W3[r_off[l] + o K_l + j, h],
 *   U_l[e, i, j]   = sum_a B_(k,l)[e, i, J, a] x_k[src(e), a, c],  j = (k, J, c),
 * with B_(k,l) the edge's basis pair (k, l) (models/basis.h: [i][J][a] at
 * plan.offset[k][l]) and the columns j ordered (k ascending, J, c), the
 * column order of R_l. R is never stored.
 *
 * Forward (conv_fwd, one launch per output degree l, NI = 2l+1 rows fixed
 * at compile time). A block of 4 x 32 threads takes F_TE = 32 edges and 32
 * output channels o (one per lane; more channels are more blocks along y).
 * It walks the columns j of R_l in steps of F_JB = 8:
 *   - the step's U columns for its 32 edges into shared memory, each entry
 *     computed from the basis and the source's features (global memory,
 *     cached: U itself, 27 KB per edge at the QM9 sizes, is never stored);
 *   - R for the step in registers: W3's rows for the block's channels and
 *     the step's columns go through shared memory F_HB = 32 radial features
 *     at a time, with the edges' s2; each thread holds 8 edges x 8 columns;
 *   - out += U R^T in registers (8 edges x NI rows per thread).
 * W3 is the same for every edge: the blocks read it from L2, each block once
 * per 32 edges. Messages go straight to y[l]; with pool they go to a scratch
 * array, then one thread per output element of a node sums its incoming
 * edges (a CSR range) in edge order: no atomics, a fixed order.
 *
 * Backward, in chunks of consecutive edges sized so the chunk's dR and dU
 * fit in BWD_BUDGET bytes of scratch:
 *   dU   (conv_du, per l) the forward's structure turned round: lanes over
 *        32 columns j, R recomputed in registers from s2 and W3 (never
 *        stored) 8 output channels at a time, dU += g R with g the edges'
 *        output gradients (dy[e], or dy[dst(e)] when pooled);
 *   dR   (conv_dr, per l) one block per edge: U for up to R_JC columns in
 *        shared memory, dR[o, j] = sum_i g[i, o] U[i, j] for every W3 row,
 *        into a chunk x W3-rows array (rows of degrees the plan does not
 *        cover are zero);
 *   dW3 += dR^T s2 and ds2 = dR W3 for the chunk: two cuBLAS GEMMs over
 *        all degrees at once (W3's rows are the dR columns); dW3 sums the
 *        chunks in order, ds2 is written chunk by chunk;
 *   dx   each edge's contribution to its source's input gradient,
 *        B^T dU (conv_dx_edge), into an E x (a node's input width) array;
 *        then a per-node gather over its outgoing edges in ascending edge
 *        order (conv_dx_gather). The outgoing edges come from a CSR by
 *        source built on the device: counts (integer atomics), a one-block
 *        scan, a fill (integer atomics for the slots) and a sort of each
 *        node's list by edge index, so the order of the float sums is fixed.
 * Everything is deterministic: no floating-point atomics, every sum in a
 * fixed order (cuBLAS's GEMMs are deterministic on one stream).
 *
 * The GEMM path (`gpu_conv: gemm`, cu_conv_set_path) computes the same
 * sums with R stored, a chunk of edges at a time, so that its products run
 * as cuBLAS GEMMs on tensor cores (in the table's precision, as cu_mm):
 *   R   (chunk x Rt) = s2 (chunk x H) W3^T: one GEMM over every degree,
 *       85 % of the convolution's multiply-adds;
 *   U   (chunk x usize) from the bases and the sources' features
 *       (conv_u_fill, one thread an entry);
 *   out_l[e] (NI x cout) = U_l[e] (NI x K_l) R_l[e]^T, a strided-batched
 *       GEMM per degree, one product an edge;
 * and in the backward, dU_l[e] (NI x K_l) = g_l[e] (NI x cout) R_l[e], a
 * strided-batched GEMM per degree on R recomputed by the same GEMM (g
 * gathered by target when pooled), in place of conv_du; dR, dW3, ds2 and
 * dx as above. In bf16 and fp16, R, U, dR, g and the copies of W3 and s2
 * the GEMMs read are stored in that type (gemm_type: the values cuBLAS
 * would round them to on the way in, in half the bytes), with fp32 sums
 * and fp32 outputs. A chunk holds CONV_GEMM_BUDGET bytes of them (1 GiB;
 * SE3_CONV_CHUNK_MB overrides it, for measuring): on an H200, chunks the
 * size of the L2 (40 MB) ran no faster than the direct kernels, the launches
 * and small GEMMs of a few hundred edges costing more than the traffic L2
 * saved; 640 MB ran 1.9x faster (bench/RESULTS.md). The sums run in another
 * order than the direct kernels', so results differ by round-off, and in
 * bf16 and fp16 by the rounding of R and U as well (the direct kernels keep
 * the contraction in fp32): tests/gpu/test_backend_ops.c --conv gemm bounds
 * both against the CPU.
 *
 * The fused path (`gpu_conv: fused`, conv_fused.cu): R's tiles on tensor
 * cores with the warp's mma.sync (models/cuda/mma.h), contracted at once,
 * never stored, in the forward and the backward's dU (conv_fused_r); dW3
 * and ds2 from the output gradient, U, s2 and W3 a
 * tile at a time (conv_fused_dw, conv_fused_ds2), so dR is not stored
 * either. Its notes are beside its kernels; models/cuda/conv.h is what the
 * two files share.
 *
 * The plan (a host struct) is read once per call into `struct geom`, which
 * travels by value as a kernel parameter: that is the device's copy of what
 * the kernels need from it (offsets and sizes, a few hundred bytes). */
#include <stdlib.h>
#include <string.h>

#include "models/cuda/conv.h"

/* forward tiles */
#define F_TY 4              /* thread rows of a block */
#define F_EPT 8             /* edges per thread */
#define F_TE (F_TY * F_EPT) /* edges per block */
#define F_JB 8              /* columns of R_l per step */
#define F_HB 32             /* radial features per step */
/* backward dU tiles */
#define B_TY 4
#define B_EPT 8
#define B_TE (B_TY * B_EPT)
#define B_OB 8 /* output channels per step */
#define B_HB 32
/* backward dR: columns of U in shared memory at once */
#define R_JC 512
#define R_THREADS 256
/* scratch for one chunk's dR and dU */
#define BWD_BUDGET ((size_t)256 << 20)
/* the GEMM path's chunk (see the top) */
#define CONV_GEMM_BUDGET ((size_t)1024 << 20)

/* 0, or -1 when a size does not fit the kernels' ints. */
static int make_geom(struct geom *g, const struct nn_conv_shape *s, int H) {
  memset(g, 0, sizeof *g);
  g->H = H;
  g->N = s->N;
  g->E = s->E;
  g->max_l = s->plan->max_degree < NN_MAX_DEG ? s->plan->max_degree : NN_MAX_DEG;
  g->per_edge = (long long)s->plan->per_edge;
  long long rt = 0, us = 0, xw = 0;
  for (int d = 0; d < D; d++) {
    g->cin[d] = d <= g->max_l ? s->fin.ch[d] : 0;
    g->cout[d] = d <= g->max_l ? s->fout.ch[d] : 0;
  }
  for (int l = 0; l < D; l++) {
    g->K[l] = nn_conv_radial_cols(&s->fin, l);
    int c = 0;
    for (int k = 0; k < D; k++) {
      g->col0[l][k] = c;
      c += (2 * imin(k, l) + 1) * s->fin.ch[k];
    }
    g->r_off[l] = (int)rt;
    rt += (long long)s->fout.ch[l] * g->K[l];
    g->u_off[l] = (int)us;
    if (g->cout[l]) us += (long long)NN_DIM(l) * g->K[l];
    g->x_off[l] = (int)xw;
    xw += (long long)NN_DIM(l) * g->cin[l];
    for (int k = 0; k < D; k++)
      g->boff[k][l] = k <= g->max_l && l <= g->max_l ? (long long)s->plan->offset[k][l] : 0;
  }
  if (rt > 0x7fffffff || us > 0x7fffffff || xw > 0x7fffffff) return -1;
  g->Rt = (int)rt;
  g->usize = (int)us;
  g->xw = (int)xw;
  return 0;
}

/* ---- forward ---- */

/* out (E x NI x cout_l): the messages of degree l (see the top). */
template <int NI>
__global__ void __launch_bounds__(LANES *F_TY)
    conv_fwd(const struct geom g, const struct deg_in x, const real *basis, const int32_t *src, const real *s2,
             const real *W3, int l, real *out) {
  __shared__ real Ws[F_JB * F_HB * (LANES + 1)]; /* [jj][hh][o], padded: no bank conflicts */
  __shared__ real Ss[F_TE * F_HB];               /* [edge][hh] */
  __shared__ real Us[F_TE * NI * F_JB];          /* [edge][i][jj] */
  const int lane = threadIdx.x, ty = threadIdx.y, tid = ty * LANES + lane, nth = LANES * F_TY;
  const int e0 = blockIdx.x * F_TE, oc = blockIdx.y * LANES, o = oc + lane;
  const int cout = g.cout[l], K = g.K[l], H = g.H;
  const size_t rbase = (size_t)g.r_off[l];
  real acc[F_EPT][NI];
#pragma unroll
  for (int t = 0; t < F_EPT; t++)
#pragma unroll
    for (int i = 0; i < NI; i++)
      acc[t][i] = 0;
  for (int j0 = 0; j0 < K; j0 += F_JB) {
    __syncthreads(); /* the last step's readers are done */
    for (int q = tid; q < F_TE * NI * F_JB; q += nth) {
      const int jj = q % F_JB, i = q / F_JB % NI, t = q / (F_JB * NI), e = e0 + t, j = j0 + jj;
      Us[q] = e < g.E && j < K ? conv_u(g, x, basis + (size_t)e * (size_t)g.per_edge, src[e], l, i, j) : (real)0;
    }
    real r[F_EPT][F_JB];
#pragma unroll
    for (int t = 0; t < F_EPT; t++)
#pragma unroll
      for (int jj = 0; jj < F_JB; jj++)
        r[t][jj] = 0;
    for (int h0 = 0; h0 < H; h0 += F_HB) {
      if (h0 > 0) __syncthreads();
      for (int q = tid; q < F_TE * F_HB; q += nth) {
        const int hh = q % F_HB, e = e0 + q / F_HB, h = h0 + hh;
        Ss[q] = e < g.E && h < H ? s2[(size_t)e * H + h] : (real)0;
      }
      for (int q = tid; q < LANES * F_JB * F_HB; q += nth) {
        const int hh = q % F_HB, jj = q / F_HB % F_JB, oo = q / (F_HB * F_JB);
        const int h = h0 + hh, j = j0 + jj, oq = oc + oo;
        Ws[(jj * F_HB + hh) * (LANES + 1) + oo] =
            h < H && j < K && oq < cout ? W3[(rbase + (size_t)oq * K + j) * H + h] : (real)0;
      }
      __syncthreads();
      for (int hh = 0; hh < F_HB; hh++) {
        real w[F_JB];
#pragma unroll
        for (int jj = 0; jj < F_JB; jj++)
          w[jj] = Ws[(jj * F_HB + hh) * (LANES + 1) + lane];
#pragma unroll
        for (int t = 0; t < F_EPT; t++) {
          const real sv = Ss[(ty + t * F_TY) * F_HB + hh];
#pragma unroll
          for (int jj = 0; jj < F_JB; jj++)
            r[t][jj] += sv * w[jj];
        }
      }
    }
#pragma unroll
    for (int t = 0; t < F_EPT; t++)
#pragma unroll
      for (int jj = 0; jj < F_JB; jj++)
#pragma unroll
        for (int i = 0; i < NI; i++)
          acc[t][i] += Us[((ty + t * F_TY) * NI + i) * F_JB + jj] * r[t][jj];
  }
  if (o >= cout) return;
#pragma unroll
  for (int t = 0; t < F_EPT; t++) {
    const int e = e0 + ty + t * F_TY;
    if (e < g.E)
#pragma unroll
      for (int i = 0; i < NI; i++)
        out[((size_t)e * NI + i) * cout + o] = acc[t][i];
  }
}

/* y (N x w) = the sum of msg (E x w) over each node's incoming edges, in order. */
static __global__ void conv_pool(real *y, const real *msg, const int32_t *in_start, int N, int w) {
  const size_t total = (size_t)N * (size_t)w;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
    const size_t n = i / (size_t)w, q = i % (size_t)w;
    real s = 0;
    for (int e = in_start[n]; e < in_start[n + 1]; e++)
      s += msg[(size_t)e * w + q];
    y[i] = s;
  }
}

/* The launch switches (launch_fwd, launch_du, launch_dr) send every degree >= 3 to the 7-wide kernels. */
static_assert(NN_MAX_DEG == 3, "NN_MAX_DEG changed: give each launch switch in conv.cu a case per degree (width 2l+1)");
static void launch_fwd(const struct geom *g, const struct deg_in *x, const real *basis, const int32_t *src,
                       const real *s2, const real *W3, int l, real *out) {
  dim3 grid((unsigned)((g->E + F_TE - 1) / F_TE), (unsigned)((g->cout[l] + LANES - 1) / LANES)), block(LANES, F_TY);
  cudaStream_t st = cu_stream();
  switch (l) {
  case 0:
    conv_fwd<1><<<grid, block, 0, st>>>(*g, *x, basis, src, s2, W3, l, out);
    break;
  case 1:
    conv_fwd<3><<<grid, block, 0, st>>>(*g, *x, basis, src, s2, W3, l, out);
    break;
  case 2:
    conv_fwd<5><<<grid, block, 0, st>>>(*g, *x, basis, src, s2, W3, l, out);
    break;
  default:
    conv_fwd<7><<<grid, block, 0, st>>>(*g, *x, basis, src, s2, W3, l, out);
    break;
  }
  CU_LAUNCHED("conv_fwd");
}

/* ---- the GEMM path ---- */

static int conv_path; /* cu_conv_set_path: enum nn_conv_path */

void cu_conv_set_path(int path) { conv_path = path; }

/* Edges a chunk of the GEMM path holds, at `per_edge` bytes each. */
static int gemm_chunk(size_t per_edge, int E) {
  size_t budget = CONV_GEMM_BUDGET;
  const char *env = getenv("SE3_CONV_CHUNK_MB");
  if (env && atoi(env) > 0) budget = (size_t)atoi(env) << 20;
  size_t ce = per_edge ? budget / per_edge : (size_t)E;
  if (ce > (size_t)E) ce = (size_t)E;
  /* at most 65535 products a batched GEMM: some of cuBLAS's batched kernels
   * put the batch on the grid's third dimension (ncu showed gemmSN_TN's) */
  if (ce > 65535) ce = 65535;
  return ce < 1 ? 1 : (int)ce;
}

/* The type the GEMM path stores R, U, dR and the output gradients in: the
 * tensor cores' input type in bf16 and fp16 (what cuBLAS would round them
 * to on the way in: the same values, half the bytes), fp32 otherwise. */
static enum cu_type gemm_type(void) {
  const enum nn_precision p = cu_precision();
  return p == NN_PREC_BF16 ? CU_BF16 : p == NN_PREC_FP16 ? CU_F16 : CU_F32;
}

/* a[i] = v, rounded to a's type t */
__device__ __forceinline__ void put(void *a, int t, size_t i, real v) {
  if (t == CU_BF16)
    ((__nv_bfloat16 *)a)[i] = __float2bfloat16_rn(v);
  else if (t == CU_F16)
    ((__half *)a)[i] = __float2half_rn(v);
  else
    ((real *)a)[i] = v;
}

/* U (n x usize, type t) for the edges c0..c0+n-1: row e - c0 holds
 * U_l[e][i][j] at u_off[l] + i K_l + j for every degree l with outputs. */
static __global__ void conv_u_fill(const struct geom g, const struct deg_in x, const real *basis, const int32_t *src,
                                   int c0, int n, void *U, int t) {
  const size_t total = (size_t)n * (size_t)g.usize;
  for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < total; idx += (size_t)gridDim.x * blockDim.x) {
    const int le = (int)(idx / (size_t)g.usize), q = (int)(idx % (size_t)g.usize), e = c0 + le;
    int l = g.max_l;
    while (l > 0 && !(g.cout[l] && g.K[l] && q >= g.u_off[l]))
      l--;
    const int K = g.K[l], i = (q - g.u_off[l]) / K, j = (q - g.u_off[l]) % K;
    put(U, t, idx, conv_u(g, x, basis + (size_t)e * (size_t)g.per_edge, src[e], l, i, j));
  }
}

/* G (n x w, type t) = rows dst[c0 + r] of gy (pooled messages' gradient by
 * edge), or rows c0 + r (dst NULL). */
static __global__ void gather_rows(void *G, int t, const real *gy, const int32_t *dst, int c0, int n, int w) {
  const size_t total = (size_t)n * (size_t)w;
  for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < total; idx += (size_t)gridDim.x * blockDim.x) {
    const size_t r = idx / (size_t)w, q = idx % (size_t)w;
    put(G, t, idx, gy[(size_t)(dst ? dst[c0 + r] : c0 + (int)r) * (size_t)w + q]);
  }
}

static void launch_u_fill(const struct geom *g, const struct deg_in *x, const real *basis, const int32_t *src, int c0,
                          int n, void *U, enum cu_type t) {
  conv_u_fill<<<cu_grid((size_t)n * (size_t)g->usize), CU_THREADS, 0, cu_stream()>>>(*g, *x, basis, src, c0, n, U,
                                                                                      (int)t);
  CU_LAUNCHED("conv_u_fill");
}

/* What a call of the GEMM path keeps for its chunks: the type t, W3 and s2
 * in it (when t is not fp32: converted once a call). */
struct gemm_in {
  enum cu_type t;
  size_t tb;             /* bytes of an element of type t */
  const void *W3, *s2;   /* (Rt x H), (E x H), of type t */
};

static size_t gemm_in_bytes(const struct geom *g, enum cu_type t) {
  if (t == CU_F32) return 0;
  return cu_round((size_t)g->Rt * (size_t)g->H * 2 + 1) + cu_round((size_t)g->E * (size_t)g->H * 2 + 1);
}

/* Carves and fills gemm_in from p (gemm_in_bytes of it). */
static void gemm_in_make(struct gemm_in *gi, char **p, const struct geom *g, enum cu_type t, const real *W3,
                         const real *s2) {
  gi->t = t;
  gi->tb = cu_type_bytes(t);
  gi->W3 = W3, gi->s2 = s2;
  if (t == CU_F32) return;
  void *w = cu_carve(p, (size_t)g->Rt * (size_t)g->H * 2 + 1), *s = cu_carve(p, (size_t)g->E * (size_t)g->H * 2 + 1);
  cu_convert(w, t, W3, (size_t)g->Rt * (size_t)g->H);
  cu_convert(s, t, s2, (size_t)g->E * (size_t)g->H);
  gi->W3 = w, gi->s2 = s;
}

/* R (n x Rt, type t) = s2 rows c0.. (n x H) W3^T: every degree's radial
 * weights of n edges. */
static void gemm_r(const struct geom *g, const struct gemm_in *gi, int c0, int n, void *R) {
  cu_mm_t(0, 1, n, g->Rt, g->H, (const char *)gi->s2 + (size_t)c0 * g->H * gi->tb, gi->t, g->H, 0, gi->W3, gi->t,
          g->H, 0, 0, R, gi->t, g->Rt, 0, 1);
}

/* The forward on the GEMM path; y[l] rows (pool: N, else E) as cu_conv_forward. */
static int conv_forward_gemm(real *const y[], const struct geom *g, const struct nn_conv_shape *s,
                             const struct deg_in *X, const real *basis, const real *s2, const real *W3, int pool) {
  const int E = s->E, N = s->N;
  const enum cu_type t = gemm_type();
  const size_t tb = cu_type_bytes(t);
  int ce = gemm_chunk(((size_t)g->Rt + (size_t)g->usize) * tb, E);
  size_t b_r = cu_round((size_t)ce * (size_t)g->Rt * tb + 1);
  size_t b_u = cu_round((size_t)ce * (size_t)g->usize * tb + 1), b_msg = 0;
  if (pool)
    for (int l = 0; l <= g->max_l; l++)
      b_msg += cu_round((size_t)E * (size_t)(NN_DIM(l) * g->cout[l]) * sizeof(real));
  char *p = (char *)cu_scratch(CU_SCRATCH_OP, b_r + b_u + b_msg + gemm_in_bytes(g, t) + 1);
  if (!p) return -1;
  char *R = (char *)cu_carve(&p, b_r), *U = (char *)cu_carve(&p, b_u);
  real *out[D] = {0};
  for (int l = 0; l <= g->max_l; l++) {
    const int w = NN_DIM(l) * g->cout[l];
    if (!w || !y[l]) continue;
    if (g->K[l] == 0) { /* no input to this degree: every message is 0 */
      const int rows = pool ? N : E;
      if (rows > 0) CU_CHECK(cudaMemsetAsync(y[l], 0, (size_t)rows * (size_t)w * sizeof(real), cu_stream()));
      continue;
    }
    out[l] = pool ? (real *)cu_carve(&p, (size_t)E * (size_t)w * sizeof(real)) : y[l];
  }
  struct gemm_in gi;
  gemm_in_make(&gi, &p, g, t, W3, s2);
  for (int c0 = 0; c0 < E; c0 += ce) {
    const int n = c0 + ce < E ? ce : E - c0;
    gemm_r(g, &gi, c0, n, R);
    launch_u_fill(g, X, basis, s->src, c0, n, U, t);
    for (int l = 0; l <= g->max_l; l++) {
      if (!out[l]) continue;
      const int NI = NN_DIM(l), K = g->K[l], cout = g->cout[l];
      /* out_l[e] (NI x cout) = U_l[e] (NI x K) R_l[e]^T, R_l[e] (cout x K) */
      cu_mm_t(0, 1, NI, cout, K, U + (size_t)g->u_off[l] * tb, t, K, g->usize, R + (size_t)g->r_off[l] * tb, t, K,
              g->Rt, 0, out[l] + (size_t)c0 * NI * cout, CU_F32, cout, (long long)NI * cout, n);
    }
  }
  for (int l = 0; l <= g->max_l && pool && N > 0; l++)
    if (out[l]) {
      const int w = NN_DIM(l) * g->cout[l];
      conv_pool<<<cu_grid((size_t)N * (size_t)w), CU_THREADS, 0, cu_stream()>>>(y[l], out[l], s->in_start, N, w);
      CU_LAUNCHED("conv_pool");
    }
  return 0;
}

int cu_conv_forward(real *const y[], const struct nn_conv_shape *s, const real *const x[], const real *basis,
                    const real *s2, const real *W3, int H, int pool) {
  struct geom g;
  if (make_geom(&g, s, H)) {
    cu_fail(__FILE__, __LINE__, "convolution too large for the CUDA kernels (more than 2^31 radial weights)");
    return -1;
  }
  struct deg_in X;
  for (int d = 0; d < D; d++)
    X.p[d] = x[d];
  const int E = s->E, N = s->N;
  if (conv_path == NN_CONV_GEMM && E > 0 && g.Rt > 0) return conv_forward_gemm(y, &g, s, &X, basis, s2, W3, pool);
  const int fused = conv_path == NN_CONV_FUSED && cu_fused_fits(&g);
  real *msg = NULL;
  if (pool && E > 0) {
    size_t bytes = 0;
    for (int l = 0; l <= g.max_l; l++)
      bytes += cu_round((size_t)E * (size_t)(NN_DIM(l) * g.cout[l]) * sizeof(real));
    if (!(msg = (real *)cu_scratch(CU_SCRATCH_OP, bytes + 1))) return -1;
  }
  char *mp = (char *)msg;
  for (int l = 0; l <= g.max_l; l++) {
    const int w = NN_DIM(l) * g.cout[l];
    if (!w || !y[l]) continue;
    const int rows = pool ? N : E;
    if (E == 0 || g.K[l] == 0) { /* no edges, or no input to this degree: every message is 0 */
      if (rows > 0) CU_CHECK(cudaMemsetAsync(y[l], 0, (size_t)rows * (size_t)w * sizeof(real), cu_stream()));
      continue;
    }
    real *out = pool ? (real *)cu_carve(&mp, (size_t)E * (size_t)w * sizeof(real)) : y[l];
    if (fused)
      cu_fused_r(&g, &X, basis, s->src, s2, W3, NULL, NULL, l, 0, E, out, NULL);
    else
      launch_fwd(&g, &X, basis, s->src, s2, W3, l, out);
    if (pool && N > 0) {
      conv_pool<<<cu_grid((size_t)N * (size_t)w), CU_THREADS, 0, cu_stream()>>>(y[l], out, s->in_start, N, w);
      CU_LAUNCHED("conv_pool");
    }
  }
  return 0;
}

/* ---- backward ---- */

/* dU (chunk x usize; edge e at row e - c0) for degree l over the edges
 * c0..c1-1: dU[i, j] = sum_o g[i, o] R[o, j], g = gy row dst[e] (pooled) or e. */
template <int NI>
__global__ void __launch_bounds__(LANES *B_TY)
    conv_du(const struct geom g, const real *s2, const real *W3, const real *gy, const int32_t *dst, int l, int c0,
            int c1, real *dU) {
  __shared__ real Ws[B_OB * B_HB * (LANES + 1)]; /* [ob][hh][j] */
  __shared__ real Ss[B_TE * B_HB];               /* [edge][hh] */
  __shared__ real Gs[B_TE * NI * B_OB];          /* [edge][i][ob] */
  const int lane = threadIdx.x, ty = threadIdx.y, tid = ty * LANES + lane, nth = LANES * B_TY;
  const int e0 = c0 + blockIdx.x * B_TE, jb = blockIdx.y * LANES, j = jb + lane;
  const int cout = g.cout[l], K = g.K[l], H = g.H;
  const size_t rbase = (size_t)g.r_off[l];
  real acc[B_EPT][NI];
#pragma unroll
  for (int t = 0; t < B_EPT; t++)
#pragma unroll
    for (int i = 0; i < NI; i++)
      acc[t][i] = 0;
  for (int o0 = 0; o0 < cout; o0 += B_OB) {
    __syncthreads();
    for (int q = tid; q < B_TE * NI * B_OB; q += nth) {
      const int ob = q % B_OB, i = q / B_OB % NI, e = e0 + q / (B_OB * NI), o = o0 + ob;
      Gs[q] = e < c1 && o < cout ? gy[((size_t)(dst ? dst[e] : e) * NI + i) * cout + o] : (real)0;
    }
    real r[B_EPT][B_OB];
#pragma unroll
    for (int t = 0; t < B_EPT; t++)
#pragma unroll
      for (int ob = 0; ob < B_OB; ob++)
        r[t][ob] = 0;
    for (int h0 = 0; h0 < H; h0 += B_HB) {
      if (h0 > 0) __syncthreads();
      for (int q = tid; q < B_TE * B_HB; q += nth) {
        const int hh = q % B_HB, e = e0 + q / B_HB, h = h0 + hh;
        Ss[q] = e < c1 && h < H ? s2[(size_t)e * H + h] : (real)0;
      }
      for (int q = tid; q < B_OB * LANES * B_HB; q += nth) {
        const int hh = q % B_HB, jl = q / B_HB % LANES, ob = q / (B_HB * LANES);
        const int h = h0 + hh, jq = jb + jl, o = o0 + ob;
        Ws[(ob * B_HB + hh) * (LANES + 1) + jl] =
            h < H && jq < K && o < cout ? W3[(rbase + (size_t)o * K + jq) * H + h] : (real)0;
      }
      __syncthreads();
      for (int hh = 0; hh < B_HB; hh++) {
        real w[B_OB];
#pragma unroll
        for (int ob = 0; ob < B_OB; ob++)
          w[ob] = Ws[(ob * B_HB + hh) * (LANES + 1) + lane];
#pragma unroll
        for (int t = 0; t < B_EPT; t++) {
          const real sv = Ss[(ty + t * B_TY) * B_HB + hh];
#pragma unroll
          for (int ob = 0; ob < B_OB; ob++)
            r[t][ob] += sv * w[ob];
        }
      }
    }
#pragma unroll
    for (int t = 0; t < B_EPT; t++)
#pragma unroll
      for (int ob = 0; ob < B_OB; ob++)
#pragma unroll
        for (int i = 0; i < NI; i++)
          acc[t][i] += Gs[((ty + t * B_TY) * NI + i) * B_OB + ob] * r[t][ob];
  }
  if (j >= K) return;
#pragma unroll
  for (int t = 0; t < B_EPT; t++) {
    const int e = e0 + ty + t * B_TY;
    if (e < c1)
#pragma unroll
      for (int i = 0; i < NI; i++)
        dU[(size_t)(e - c0) * g.usize + g.u_off[l] + (size_t)i * K + j] = acc[t][i];
  }
}

/* dR (chunk x Rt; edge c0 + blockIdx.x at row blockIdx.x), degree l's rows:
 * dR[r_off + o K + j] = sum_i g[i, o] U[i, j]. One block per edge. */
template <int NI>
__global__ void __launch_bounds__(R_THREADS)
    conv_dr(const struct geom g, const struct deg_in x, const real *basis, const int32_t *src, const real *gy,
            const int32_t *dst, int l, int c0, void *dR, int t) {
  __shared__ real Us[NI * R_JC]; /* [i][jj] */
  const int e = c0 + blockIdx.x, cout = g.cout[l], K = g.K[l], se = src[e];
  const real *bas = basis + (size_t)e * (size_t)g.per_edge;
  const real *grow = gy + (size_t)(dst ? dst[e] : e) * NI * cout;
  const size_t out = (size_t)blockIdx.x * g.Rt + g.r_off[l]; /* (dR of type t: fp32, or the GEMM path's half) */
  for (int jc = 0; jc < K; jc += R_JC) {
    const int jn = K - jc < R_JC ? K - jc : R_JC;
    __syncthreads();
    for (int q = threadIdx.x; q < NI * jn; q += blockDim.x) {
      const int i = q / jn, jj = q % jn;
      Us[i * R_JC + jj] = conv_u(g, x, bas, se, l, i, jc + jj);
    }
    __syncthreads();
    for (int q = threadIdx.x; q < cout * jn; q += blockDim.x) {
      const int o = q / jn, jj = q % jn;
      real d = 0;
#pragma unroll
      for (int i = 0; i < NI; i++)
        d += grow[(size_t)i * cout + o] * Us[i * R_JC + jj];
      put(dR, t, out + (size_t)o * K + jc + jj, d);
    }
  }
}

/* contrib (E x xw): edge e's share of its source's input gradient,
 * contrib[e, (k, a, c)] = sum_{l, i, J} B_(k,l)[e, i, J, a] dU_l[e, i, (k, J, c)],
 * for the edges c0..c1-1 (dU rows from 0). */
static __global__ void conv_dx_edge(const struct geom g, const real *basis, const real *dU, int c0, int c1,
                                    real *contrib) {
  const size_t total = (size_t)(c1 - c0) * (size_t)g.xw;
  for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < total; idx += (size_t)gridDim.x * blockDim.x) {
    const int le = (int)(idx / (size_t)g.xw), q = (int)(idx % (size_t)g.xw), e = c0 + le;
    int k = 0;
    while (k < g.max_l && q >= g.x_off[k + 1])
      k++;
    const int cin = g.cin[k], nk = NN_DIM(k), a = (q - g.x_off[k]) / cin, c = (q - g.x_off[k]) % cin;
    const real *bas = basis + (size_t)e * (size_t)g.per_edge;
    const real *du = dU + (size_t)le * g.usize;
    real s = 0;
    for (int l = 0; l <= g.max_l; l++) {
      if (!g.cout[l]) continue;
      const int nJ = 2 * (k < l ? k : l) + 1, K = g.K[l];
      const real *f = bas + g.boff[k][l] + a;
      const real *d = du + g.u_off[l] + g.col0[l][k] + c;
      for (int i = 0; i < NN_DIM(l); i++)
        for (int J = 0; J < nJ; J++)
          s += f[(size_t)(i * nJ + J) * nk] * d[(size_t)i * K + (size_t)J * cin];
    }
    contrib[(size_t)e * g.xw + q] = s;
  }
}

/* dx[k][n, a, c] = the sum of contrib[e, (k, a, c)] over the outgoing edges
 * e of n, in ascending order (out_start: N + 1 offsets into out_edge). */
static __global__ void conv_dx_gather(const struct geom g, const real *contrib, const int32_t *out_start,
                                      const int32_t *out_edge, const struct deg_out dx) {
  const size_t total = (size_t)g.N * (size_t)g.xw;
  for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < total; idx += (size_t)gridDim.x * blockDim.x) {
    const int n = (int)(idx / (size_t)g.xw), q = (int)(idx % (size_t)g.xw);
    int k = 0;
    while (k < g.max_l && q >= g.x_off[k + 1])
      k++;
    if (!dx.p[k]) continue;
    real s = 0;
    for (int p = out_start[n]; p < out_start[n + 1]; p++)
      s += contrib[(size_t)out_edge[p] * g.xw + q];
    dx.p[k][(size_t)n * (size_t)(NN_DIM(k) * g.cin[k]) + (size_t)(q - g.x_off[k])] = s;
  }
}

/* ---- the outgoing edges of every node, sorted (a CSR by source) ---- */

static __global__ void src_count(int32_t *count, const int32_t *src, int E) {
  for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < E; e += gridDim.x * blockDim.x)
    atomicAdd(&count[src[e]], 1);
}

/* start[0..N] = exclusive prefix sums of count (one block of SCAN_THREADS:
 * each thread a contiguous range, then the ranges' totals in order). */
#define SCAN_THREADS 1024
static __global__ void __launch_bounds__(SCAN_THREADS) src_scan(int32_t *start, const int32_t *count, int N) {
  __shared__ int32_t tot[SCAN_THREADS];
  const int per = (N + SCAN_THREADS - 1) / SCAN_THREADS, t = threadIdx.x;
  const int n0 = t * per < N ? t * per : N, n1 = n0 + per < N ? n0 + per : N;
  int32_t s = 0;
  for (int n = n0; n < n1; n++)
    s += count[n];
  tot[t] = s;
  __syncthreads();
  if (t == 0) {
    int32_t run = 0;
    for (int i = 0; i < SCAN_THREADS; i++) {
      const int32_t v = tot[i];
      tot[i] = run;
      run += v;
    }
    start[N] = run;
  }
  __syncthreads();
  int32_t run = tot[t];
  for (int n = n0; n < n1; n++) {
    start[n] = run;
    run += count[n];
  }
}

static __global__ void src_fill(int32_t *cursor, int32_t *out_edge, const int32_t *src, int E) {
  for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < E; e += gridDim.x * blockDim.x)
    out_edge[atomicAdd(&cursor[src[e]], 1)] = e;
}

/* Each node's list in ascending edge order (insertion sort: lists are short). */
static __global__ void src_sort(int32_t *out_edge, const int32_t *start, int N) {
  for (int n = blockIdx.x * blockDim.x + threadIdx.x; n < N; n += gridDim.x * blockDim.x)
    for (int p = start[n] + 1; p < start[n + 1]; p++) {
      const int32_t v = out_edge[p];
      int q = p - 1;
      while (q >= start[n] && out_edge[q] > v) {
        out_edge[q + 1] = out_edge[q];
        q--;
      }
      out_edge[q + 1] = v;
    }
}

static void build_out_csr(int32_t *out_start, int32_t *out_edge, int32_t *cursor, const int32_t *src, int N, int E) {
  cudaStream_t st = cu_stream();
  CU_CHECK(cudaMemsetAsync(cursor, 0, (size_t)N * sizeof(int32_t), st));
  src_count<<<cu_grid((size_t)E), CU_THREADS, 0, st>>>(cursor, src, E);
  CU_LAUNCHED("src_count");
  src_scan<<<1, SCAN_THREADS, 0, st>>>(out_start, cursor, N);
  CU_LAUNCHED("src_scan");
  CU_CHECK(cudaMemcpyAsync(cursor, out_start, (size_t)N * sizeof(int32_t), cudaMemcpyDeviceToDevice, st));
  src_fill<<<cu_grid((size_t)E), CU_THREADS, 0, st>>>(cursor, out_edge, src, E);
  CU_LAUNCHED("src_fill");
  src_sort<<<cu_grid((size_t)N), CU_THREADS, 0, st>>>(out_edge, out_start, N);
  CU_LAUNCHED("src_sort");
}

static void launch_du(const struct geom *g, const real *s2, const real *W3, const real *gy, const int32_t *dst, int l,
                      int c0, int c1, real *dU) {
  dim3 grid((unsigned)((c1 - c0 + B_TE - 1) / B_TE), (unsigned)((g->K[l] + LANES - 1) / LANES)), block(LANES, B_TY);
  cudaStream_t st = cu_stream();
  switch (l) {
  case 0:
    conv_du<1><<<grid, block, 0, st>>>(*g, s2, W3, gy, dst, l, c0, c1, dU);
    break;
  case 1:
    conv_du<3><<<grid, block, 0, st>>>(*g, s2, W3, gy, dst, l, c0, c1, dU);
    break;
  case 2:
    conv_du<5><<<grid, block, 0, st>>>(*g, s2, W3, gy, dst, l, c0, c1, dU);
    break;
  default:
    conv_du<7><<<grid, block, 0, st>>>(*g, s2, W3, gy, dst, l, c0, c1, dU);
    break;
  }
  CU_LAUNCHED("conv_du");
}

static void launch_dr(const struct geom *g, const struct deg_in *x, const real *basis, const int32_t *src,
                      const real *gy, const int32_t *dst, int l, int c0, int c1, void *dR, enum cu_type t) {
  cudaStream_t st = cu_stream();
  const unsigned grid = (unsigned)(c1 - c0);
  switch (l) {
  case 0:
    conv_dr<1><<<grid, R_THREADS, 0, st>>>(*g, *x, basis, src, gy, dst, l, c0, dR, (int)t);
    break;
  case 1:
    conv_dr<3><<<grid, R_THREADS, 0, st>>>(*g, *x, basis, src, gy, dst, l, c0, dR, (int)t);
    break;
  case 2:
    conv_dr<5><<<grid, R_THREADS, 0, st>>>(*g, *x, basis, src, gy, dst, l, c0, dR, (int)t);
    break;
  default:
    conv_dr<7><<<grid, R_THREADS, 0, st>>>(*g, *x, basis, src, gy, dst, l, c0, dR, (int)t);
    break;
  }
  CU_LAUNCHED("conv_dr");
}

int cu_conv_backward(real *const dx[], real *ds2, real *dW3, const struct nn_conv_shape *s, const real *const dy[],
                     const real *const x[], const real *basis, const real *s2, const real *W3, int H, int pool) {
  struct geom g;
  if (make_geom(&g, s, H)) {
    cu_fail(__FILE__, __LINE__, "convolution too large for the CUDA kernels (more than 2^31 radial weights)");
    return -1;
  }
  const int E = s->E, N = s->N;
  struct deg_in X;
  struct deg_out DX;
  int want_dx = 0;
  for (int d = 0; d < D; d++) {
    X.p[d] = x[d];
    DX.p[d] = g.cin[d] && dx[d] ? dx[d] : NULL;
    want_dx |= DX.p[d] != NULL;
  }
  const int want_r = ds2 || dW3;
  if (N <= 0) want_dx = 0;
  if (E <= 0) { /* no messages: dx = 0, ds2 is empty, dW3 unchanged */
    for (int k = 0; k < D; k++)
      if (DX.p[k])
        CU_CHECK(cudaMemsetAsync(DX.p[k], 0, (size_t)N * (size_t)(NN_DIM(k) * g.cin[k]) * sizeof(real), cu_stream()));
    return 0;
  }
  /* the chunk: dR (Rt per edge) and dU (usize) within the budget; on the
   * GEMM path also R (Rt) and the edges' output gradients (gw), R, dR and
   * the gradients in the path's type (gemm_type), and W3 and s2 in it */
  const int gpath = conv_path == NN_CONV_GEMM && g.Rt > 0, gemm = gpath && want_dx;
  /* the fused path: dU by conv_fused_r; dW3 and ds2 by conv_fused_dw and
   * conv_fused_ds2, no dR (fdr), or where their tiles do not fit (or
   * SE3_FUSED_DR=store, for measuring) dR stored in the GEMM path's type
   * for dW3 and ds2's GEMMs on tensor cores (as the GEMM path's) */
  const int fused = conv_path == NN_CONV_FUSED && cu_fused_fits(&g) && g.Rt > 0;
  const char *fdr_env = getenv("SE3_FUSED_DR");
  const int fdr = fused && want_r && cu_fused_dr_fits(&g) && !(fdr_env && !strcmp(fdr_env, "store"));
  const int half = gpath || (fused && want_r && !fdr); /* (dR stored: W3 and s2 in its type for the GEMMs) */
  const enum cu_type t = half ? gemm_type() : CU_F32;
  const size_t tb = cu_type_bytes(t);
  int gw = 0;
  for (int l = 0; l <= g.max_l; l++)
    gw += g.cout[l] && g.K[l] ? NN_DIM(l) * g.cout[l] : 0;
  const int gather = gemm && (pool || t != CU_F32); /* the gradients copied by edge, in type t */
  size_t per_edge = (want_r && !fdr ? (size_t)g.Rt * tb : 0) + (want_dx ? (size_t)g.usize * sizeof(real) : 0);
  int ce;
  if (half || fused) { /* (SE3_CONV_CHUNK_MB sets the fused path's chunk too) */
    per_edge += gemm ? (size_t)g.Rt * tb + (gather ? (size_t)gw * tb : 0) : 0;
    ce = gemm_chunk(per_edge, E);
  } else {
    ce = per_edge ? (int)(BWD_BUDGET / per_edge < (size_t)E ? BWD_BUDGET / per_edge : (size_t)E) : E;
    if (ce < 1) ce = 1;
  }
  size_t b_dst = pool ? cu_round((size_t)E * sizeof(int32_t)) : 0;
  size_t b_dr = want_r && !fdr ? cu_round((size_t)ce * (size_t)g.Rt * tb + 1) : 0;
  size_t b_du = want_dx ? cu_round((size_t)ce * (size_t)g.usize * sizeof(real) + 1) : 0;
  size_t b_r = gemm ? cu_round((size_t)ce * (size_t)g.Rt * tb + 1) : 0;
  size_t b_g = gather ? cu_round((size_t)ce * (size_t)gw * tb + 1) : 0;
  size_t b_in = half ? gemm_in_bytes(&g, t) : 0;
  size_t b_con = want_dx ? cu_round((size_t)E * (size_t)g.xw * sizeof(real) + 1) : 0;
  size_t b_csr = want_dx ? cu_round((size_t)(N + 1) * sizeof(int32_t)) * 2 + cu_round((size_t)E * sizeof(int32_t)) : 0;
  char *p = (char *)cu_scratch(CU_SCRATCH_OP, b_dst + b_dr + b_du + b_r + b_g + b_in + b_con + b_csr + 1);
  if (!p) return -1;
  int32_t *dst = pool ? (int32_t *)cu_carve(&p, b_dst) : NULL;
  char *dR = want_r && !fdr ? (char *)cu_carve(&p, b_dr) : NULL;
  real *dU = want_dx ? (real *)cu_carve(&p, b_du) : NULL;
  char *R = gemm ? (char *)cu_carve(&p, b_r) : NULL, *G = gather ? (char *)cu_carve(&p, b_g) : NULL;
  real *contrib = want_dx ? (real *)cu_carve(&p, b_con) : NULL;
  struct gemm_in gi = {CU_F32, sizeof(real), W3, s2};
  if (half) gemm_in_make(&gi, &p, &g, t, W3, s2);
  int32_t *out_start = NULL, *cursor = NULL, *out_edge = NULL;
  if (want_dx) {
    out_start = (int32_t *)cu_carve(&p, (size_t)(N + 1) * sizeof(int32_t));
    cursor = (int32_t *)cu_carve(&p, (size_t)(N + 1) * sizeof(int32_t));
    out_edge = (int32_t *)cu_carve(&p, (size_t)E * sizeof(int32_t));
    build_out_csr(out_start, out_edge, cursor, s->src, N, E);
  }
  if (pool) cu_edge_targets(dst, s->in_start, N);
  /* W3 rows of degrees the plan does not cover have no messages: their dR is 0 */
  int uncovered = 0;
  for (int l = g.max_l + 1; l < D; l++)
    uncovered |= s->fout.ch[l] > 0;
  for (int c0 = 0; c0 < E; c0 += ce) {
    const int c1 = c0 + ce < E ? c0 + ce : E, n = c1 - c0;
    if (want_dx && gemm) {
      /* dU_l[e] (NI x K) = g_l[e] (NI x cout) R_l[e] (cout x K), R by the GEMM */
      gemm_r(&g, &gi, c0, n, R);
      char *gp = G;
      for (int l = 0; l <= g.max_l; l++) {
        if (!(g.cout[l] && g.K[l])) continue;
        const int NI = NN_DIM(l), w = NI * g.cout[l];
        const void *gl = dy[l] + (size_t)c0 * w;
        if (gather) {
          gather_rows<<<cu_grid((size_t)n * (size_t)w), CU_THREADS, 0, cu_stream()>>>(gp, (int)t, dy[l], dst, c0, n,
                                                                                      w);
          CU_LAUNCHED("gather_rows");
          gl = gp;
          gp += (size_t)n * w * tb;
        }
        cu_mm_t(0, 0, NI, g.K[l], g.cout[l], gl, t, g.cout[l], w, R + (size_t)g.r_off[l] * tb, t, g.K[l], g.Rt, 0,
                dU + g.u_off[l], CU_F32, g.K[l], g.usize, n);
      }
    } else if (want_dx) {
      for (int l = 0; l <= g.max_l; l++)
        if (g.cout[l] && g.K[l]) {
          if (fused)
            cu_fused_r(&g, &X, basis, s->src, s2, W3, dy[l], dst, l, c0, c1, NULL, dU);
          else
            launch_du(&g, s2, W3, dy[l], dst, l, c0, c1, dU);
        }
    }
    if (want_dx) {
      if (g.xw > 0) {
        conv_dx_edge<<<cu_grid((size_t)n * (size_t)g.xw), CU_THREADS, 0, cu_stream()>>>(g, basis, dU, c0, c1, contrib);
        CU_LAUNCHED("conv_dx_edge");
      }
    }
    if (want_r && fdr) {
      /* degrees the plan does not cover have no messages: nothing to add */
      int started = 0;
      for (int l = 0; l <= g.max_l; l++)
        if (g.cout[l] && g.K[l]) {
          cu_fused_dr(&g, &X, basis, s->src, s2, W3, dy[l], dst, l, c0, c1, dW3, started, ds2);
          started = 1;
        }
      if (ds2 && !started) CU_CHECK(cudaMemsetAsync(ds2 + (size_t)c0 * H, 0, (size_t)n * H * sizeof(real), cu_stream()));
    } else if (want_r) {
      if (uncovered) CU_CHECK(cudaMemsetAsync(dR, 0, (size_t)n * (size_t)g.Rt * tb, cu_stream()));
      for (int l = 0; l <= g.max_l; l++)
        if (g.cout[l] && g.K[l]) launch_dr(&g, &X, basis, s->src, dy[l], dst, l, c0, c1, dR, t);
      /* row-major: dW3 (Rt x H) += dR^T (Rt x n) s2 (n x H); ds2 (n x H) = dR (n x Rt) W3 (Rt x H);
       * on the GEMM path in bf16 or fp16, from dR, s2 and W3 in that type */
      const void *s2c = (const char *)gi.s2 + (size_t)c0 * H * tb;
      if (dW3) cu_mm_t(1, 0, g.Rt, H, n, dR, t, g.Rt, 0, s2c, t, H, 0, 1, dW3, CU_F32, H, 0, 1);
      if (ds2) cu_mm_t(0, 0, n, H, g.Rt, dR, t, g.Rt, 0, gi.W3, t, H, 0, 0, ds2 + (size_t)c0 * H, CU_F32, H, 0, 1);
    }
  }
  if (want_dx && g.xw > 0) {
    conv_dx_gather<<<cu_grid((size_t)N * (size_t)g.xw), CU_THREADS, 0, cu_stream()>>>(g, contrib, out_start, out_edge,
                                                                                      DX);
    CU_LAUNCHED("conv_dx_gather");
  }
  return 0;
}
