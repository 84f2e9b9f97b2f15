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
 * The fused path (`gpu_conv: fused`, below conv_pool): R's tiles on tensor
 * cores with the warp's mma.sync (models/cuda/mma.h), contracted at once,
 * never stored, in the forward and the backward's dU (conv_fused_r); dW3
 * and ds2 from the output gradient, U, s2 and W3 a
 * tile at a time (conv_fused_dw, conv_fused_ds2), so dR is not stored
 * either. Its notes are beside its kernels.
 *
 * The plan (a host struct) is read once per call into `struct geom`, which
 * travels by value as a kernel parameter: that is the device's copy of what
 * the kernels need from it (offsets and sizes, a few hundred bytes). */
#include <stdlib.h>
#include <string.h>

#include "models/cuda/cuda.h"
#include "models/cuda/mma.h"

#define D (NN_MAX_DEG + 1)
#define LANES 32

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

static inline int imin(int a, int b) { return a < b ? a : b; }

/* What the kernels need of the shapes and the plan (see the top). */
struct geom {
  int max_l, H, N, E;
  int cin[D], cout[D], K[D];
  int col0[D][D];      /* [l][k]: first column of input degree k in R_l */
  int r_off[D], Rt;    /* first W3 row of output degree l; W3's rows */
  int u_off[D], usize; /* U_l in one edge's dU (degrees with outputs) */
  int x_off[D], xw;    /* degree k in one node's input row of every degree */
  long long per_edge;
  long long boff[D][D]; /* [k][l]: basis pair (k, l) in one edge's basis */
};

struct deg_in {
  const real *p[D];
};
struct deg_out {
  real *p[D];
};

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

/* U_l[e][i][j] for the edge whose basis is bas and source src. */
__device__ __forceinline__ real conv_u(const struct geom &g, const struct deg_in &x, const real *bas, int src, int l,
                                       int i, int j) {
  for (int k = 0; k <= g.max_l; k++) {
    const int cin = g.cin[k], nJ = 2 * (k < l ? k : l) + 1, j0 = g.col0[l][k];
    if (!cin || j < j0 || j >= j0 + nJ * cin) continue;
    const int J = (j - j0) / cin, c = (j - j0) % cin, nk = NN_DIM(k);
    const real *f = bas + g.boff[k][l] + (size_t)(i * nJ + J) * nk;
    const real *xs = x.p[k] + (size_t)src * (size_t)(nk * cin) + c;
    real acc = 0;
    for (int a = 0; a < nk; a++)
      acc += f[a] * xs[(size_t)a * cin];
    return acc;
  }
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

/* ---- the fused path (gpu_conv: fused) ---- */

/* The fused forward (conv_fused_r, one launch per output degree l): a
 * block of FU_WARPS warps takes FU_TE = 16 FU_WARPS edges (16 a warp: the
 * rows of an m16n8 product) and FU_CB = 32 output channels (4 tiles of 8
 * columns); more channels are more blocks along y. Per step of JB columns
 * j of R_l:
 *   - U's columns for the block's edges into shared memory (as conv_fwd);
 *   - W3's rows for the block's channels and the step's columns into shared
 *     memory in the tensor cores' input type ([j][o][h], h contiguous: the
 *     B operand of R = s2 W3^T, k = h, n = o);
 *   - per column j and tile of 8 channels, each warp computes R's tile
 *     (16 edges x 8 channels) with a chain of MMAs over h (s2's tile, the
 *     A operand, k = h, m = edge, staged once and held in registers), and
 *     contracts it at once on the CUDA cores: each lane holds R for 2
 *     edges x 2 channels (the D fragment) and adds R U[e, i, j] into its
 *     NI x 2 x 2 messages. R never leaves the registers; each message is
 *     owned by one lane and summed over j in order: deterministic.
 * The backward's dU is the same kernel turned round (conv_fused_r's DU):
 * the block's columns are j, the steps walk the channels o, and R is
 * contracted with the output gradient instead of U.
 * The contraction stays on the CUDA cores: per edge it is a different
 * (NI x K) by (K x cout) product, with NI = 2l+1 <= 7 rows, too thin for
 * the tensor cores' 16 (FLOP for FLOP it is 2l+1 to H = 32 of R's).
 * Precision: bf16 and fp16 take m16n8k16 on s2 and W3 rounded to that
 * type; tf32 m16n8k8 on them rounded to tf32; fp32 the same on tf32 in
 * three products (x = hi + lo, both tf32: hi hi + hi lo + lo hi), about
 * fp32's accuracy at a third of tf32's rate. Sums are fp32. H up to
 * FU_HMAX (the models' 16 and 32 fit); wider radial networks take the
 * direct kernels. */
#define FU_WARPS 4
#define FU_TE (16 * FU_WARPS)
#define FU_CB 32
#define FU_NT (FU_CB / 8)
#define FU_HMAX 64
enum { FU_3XTF32 = 0, FU_TF32 = 1, FU_BF16 = 2, FU_F16 = 3 }; /* nn_precision's order */

/* a shared-memory row: FU_HMAX inputs as 32-bit words (two 16-bit inputs a
 * word, or one float), plus 4 words, so the 8 rows x 4 words a fragment
 * load touches fall in 32 different banks */
template <int P> struct fu_cfg {
  static constexpr int HALF = P >= FU_BF16;                     /* 16-bit inputs */
  static constexpr int SW = (HALF ? FU_HMAX / 2 : FU_HMAX) + 4; /* words a row */
  static constexpr int KS = HALF ? 16 : 8;                      /* h per MMA */
  static constexpr int KA = FU_HMAX / KS;                       /* MMAs over h, at most */
  static constexpr int JB = HALF ? 4 : 2;                       /* columns a step (48 KiB of shared memory) */
};

/* the word of inputs v0 (and v1, the next h) in precision P: two bf16 or
 * fp16, a float rounded to tf32, or (fp32) the float, split at its use */
template <int P> __device__ __forceinline__ uint32_t fu_word(real v0, real v1) {
  if (P == FU_BF16) return mma_bf16_bits(v0) | mma_bf16_bits(v1) << 16;
  if (P == FU_F16) return mma_f16_bits(v0) | mma_f16_bits(v1) << 16;
  if (P == FU_TF32) return tf32_rna(v0);
  return mma_f2u(v0);
}

/* a word of fp32 as tf32 halves, hi + lo */
__device__ __forceinline__ void fu_split(uint32_t w, uint32_t *hi, uint32_t *lo) {
  const float v = mma_u2f(w);
  *hi = tf32_rna(v);
  *lo = tf32_rna(v - mma_u2f(*hi));
}

/* A's fragments, s2's tile (rows r0.. of S: 16 edges, k = h), for every MMA
 * over h: loaded once into registers, the same for every column and
 * channel (lo: fp32's lower halves; unused in the other precisions). The
 * same word offsets serve both shapes (m16n8k16: k = 2 words t, m16n8k8:
 * k = t, each +4 for the upper half). */
template <int P> struct fu_a {
  uint32_t hi[fu_cfg<P>::KA][4], lo[P == FU_3XTF32 ? fu_cfg<P>::KA : 1][4];
};
template <int P>
__device__ __forceinline__ void fu_load_a(fu_a<P> &A, const uint32_t *S, int r0, int nks, int gq, int tq) {
  constexpr int SW = fu_cfg<P>::SW;
#pragma unroll
  for (int ks = 0; ks < fu_cfg<P>::KA; ks++) {
    const int kw = ks * 8 + tq;
    const uint32_t w[4] = {ks < nks ? S[(r0 + gq) * SW + kw] : 0u, ks < nks ? S[(r0 + gq + 8) * SW + kw] : 0u,
                           ks < nks ? S[(r0 + gq) * SW + kw + 4] : 0u, ks < nks ? S[(r0 + gq + 8) * SW + kw + 4] : 0u};
#pragma unroll
    for (int q = 0; q < 4; q++) {
      if (P == FU_3XTF32)
        fu_split(w[q], &A.hi[ks][q], &A.lo[P == FU_3XTF32 ? ks : 0][q]);
      else
        A.hi[ks][q] = w[q];
    }
  }
}

/* c += R's tile: A's 16 edges by the 8 channels (or columns) of the W3 tile
 * Wt (rows of h words), over the nks MMAs of h, one chain */
template <int P>
__device__ __forceinline__ void fu_mma(float c[4], const fu_a<P> &A, const uint32_t *Wt, int nks, int gq, int tq) {
  constexpr int SW = fu_cfg<P>::SW, KA = fu_cfg<P>::KA;
  static_assert(KA <= MMA_CHAIN, "the MMAs over h in one chain");
  uint32_t b[KA][2];
#pragma unroll
  for (int ks = 0; ks < KA; ks++) {
    const int kw = ks * 8 + tq;
    b[ks][0] = ks < nks ? Wt[gq * SW + kw] : 0u;
    b[ks][1] = ks < nks ? Wt[gq * SW + kw + 4] : 0u;
  }
  if (P == FU_BF16) {
    mma_bf16_n<KA>(c, A.hi, b, nks);
  } else if (P == FU_F16) {
    mma_f16_n<KA>(c, A.hi, b, nks);
  } else if (P == FU_TF32) {
    mma_tf32_n<KA>(c, A.hi, b, nks);
  } else { /* fp32: three tf32 products, the small ones first */
    uint32_t bh[KA][2], bl[KA][2];
#pragma unroll
    for (int ks = 0; ks < KA; ks++) {
      fu_split(b[ks][0], &bh[ks][0], &bl[ks][0]);
      fu_split(b[ks][1], &bh[ks][1], &bl[ks][1]);
    }
    mma_tf32x3_n<KA>(c, A.hi, A.lo, bh, bl, nks);
  }
}

/* g[e, i, o] of the chunk's edge ee (0 past the chunk or the channels) */
__device__ __forceinline__ real fu_grad(const real *gy, const int32_t *dst, int ee, int c1, int i, int o, int NI,
                                        int cout) {
  return ee < c1 && o < cout ? gy[((size_t)(dst ? dst[ee] : ee) * NI + i) * cout + o] : (real)0;
}

/* The forward (DU 0) and the backward's dU (DU 1): R's tiles, each
 * contracted at once with U (forward: out[e, i, o] = sum_j R[e, o, j]
 * U[e, i, j]) or with the output gradient G (dU[e, i, j] = sum_o
 * R[e, o, j] g[e, i, o]). The block's FU_CB columns t (4 MMA tiles of 8)
 * are output channels o in the forward and columns j in dU; it walks the
 * other index s (j, or o) in steps of JB, staging the step's multipliers
 * (U from the basis and the source's features, or G) and W3's rows for its
 * columns and the step. Edges c0..c1-1 (the forward: all of them). */
template <int NI, int P, int DU>
__global__ void __launch_bounds__(LANES *FU_WARPS)
    conv_fused_r(const struct geom g, const struct deg_in x, const real *basis, const int32_t *src, const real *s2,
                 const real *W3, const real *gy, const int32_t *dst, int l, int c0, int c1, real *out) {
  constexpr int SW = fu_cfg<P>::SW, KS = fu_cfg<P>::KS, JB = fu_cfg<P>::JB, PER = fu_cfg<P>::HALF ? 2 : 1;
  __shared__ uint32_t Ss[FU_TE * fu_cfg<P>::SW];                 /* [edge][h words] */
  __shared__ uint32_t Ws[fu_cfg<P>::JB * FU_CB * fu_cfg<P>::SW]; /* [step][column][h words] */
  __shared__ real Ms[FU_TE * NI * fu_cfg<P>::JB];                /* [edge][i][step]: U or G */
  const int tid = threadIdx.x, nth = LANES * FU_WARPS, lane = tid % LANES, r0 = tid / LANES * 16;
  const int gq = lane / 4, tq = lane % 4;
  const int e0 = c0 + blockIdx.x * FU_TE, tc = blockIdx.y * FU_CB;
  const int cout = g.cout[l], K = g.K[l], H = g.H, Hp = (H + KS - 1) / KS * KS, HW = Hp / PER;
  const int ncol = DU ? K : cout, nstep = DU ? cout : K;
  const size_t rbase = (size_t)g.r_off[l];
  for (int q = tid; q < FU_TE * HW; q += nth) {
    const int e = e0 + q / HW, h = q % HW * PER;
    const real v0 = e < c1 && h < H ? s2[(size_t)e * H + h] : (real)0;
    const real v1 = PER == 2 && e < c1 && h + 1 < H ? s2[(size_t)e * H + h + 1] : (real)0;
    Ss[q / HW * SW + q % HW] = fu_word<P>(v0, v1);
  }
  __syncthreads();
  fu_a<P> A;
  fu_load_a<P>(A, Ss, r0, Hp / KS, gq, tq);
  float acc[FU_NT][2][NI][2];
#pragma unroll
  for (int n = 0; n < FU_NT; n++)
#pragma unroll
    for (int r = 0; r < 2; r++)
#pragma unroll
      for (int i = 0; i < NI; i++)
        acc[n][r][i][0] = acc[n][r][i][1] = 0;
  for (int s0 = 0; s0 < nstep; s0 += JB) {
    __syncthreads(); /* the last step's readers are done */
    for (int q = tid; q < FU_TE * NI * JB; q += nth) {
      const int jj = q % JB, i = q / JB % NI, e = e0 + q / (JB * NI), s = s0 + jj;
      if (DU)
        Ms[q] = fu_grad(gy, dst, e, c1, i, s, NI, cout);
      else
        Ms[q] = e < c1 && s < K ? conv_u(g, x, basis + (size_t)e * (size_t)g.per_edge, src[e], l, i, s) : (real)0;
    }
    for (int q = tid; q < JB * FU_CB * HW; q += nth) {
      const int hw = q % HW, tl = q / HW % FU_CB, jj = q / (HW * FU_CB), h = hw * PER, t = tc + tl, s = s0 + jj;
      const int in = t < ncol && s < nstep, o = in ? (DU ? s : t) : 0, j = in ? (DU ? t : s) : 0;
      const real *w = W3 + (rbase + (size_t)o * K + j) * H;
      const real v0 = in && h < H ? w[h] : (real)0, v1 = PER == 2 && in && h + 1 < H ? w[h + 1] : (real)0;
      Ws[(jj * FU_CB + tl) * SW + hw] = fu_word<P>(v0, v1);
    }
    __syncthreads();
    for (int jj = 0; jj < JB && s0 + jj < nstep; jj++) { /* (block-uniform bounds: every lane of a warp takes the MMAs) */
      real m[2][NI];
#pragma unroll
      for (int i = 0; i < NI; i++) {
        m[0][i] = Ms[((r0 + gq) * NI + i) * JB + jj];
        m[1][i] = Ms[((r0 + gq + 8) * NI + i) * JB + jj];
      }
#pragma unroll
      for (int n = 0; n < FU_NT; n++) {
        if (tc + n * 8 >= ncol) break;
        float c[4] = {0, 0, 0, 0};
        fu_mma<P>(c, A, Ws + (jj * FU_CB + n * 8) * SW, Hp / KS, gq, tq);
#pragma unroll
        for (int i = 0; i < NI; i++) {
          acc[n][0][i][0] += c[0] * m[0][i];
          acc[n][0][i][1] += c[1] * m[0][i];
          acc[n][1][i][0] += c[2] * m[1][i];
          acc[n][1][i][1] += c[3] * m[1][i];
        }
      }
    }
  }
#pragma unroll
  for (int n = 0; n < FU_NT; n++)
#pragma unroll
    for (int r = 0; r < 2; r++) {
      const int e = e0 + r0 + gq + 8 * r;
      if (e >= c1) continue;
#pragma unroll
      for (int v = 0; v < 2; v++) {
        const int t = tc + n * 8 + 2 * tq + v;
        if (t >= ncol) continue;
#pragma unroll
        for (int i = 0; i < NI; i++) {
          if (DU)
            out[(size_t)(e - c0) * g.usize + g.u_off[l] + (size_t)i * K + t] = acc[n][r][i][v];
          else
            out[((size_t)e * NI + i) * cout + t] = acc[n][r][i][v];
        }
      }
    }
}

/* 1 when the fused kernels take this convolution (else the direct ones) */
static int fused_fits(const struct geom *g) { return g->H >= 1 && g->H <= FU_HMAX; }

template <int P, int DU>
static void launch_fused_r_p(const struct geom *g, const struct deg_in *x, const real *basis, const int32_t *src,
                             const real *s2, const real *W3, const real *gy, const int32_t *dst, int l, int c0, int c1,
                             real *out) {
  dim3 grid((unsigned)((c1 - c0 + FU_TE - 1) / FU_TE), (unsigned)(((DU ? g->K[l] : g->cout[l]) + FU_CB - 1) / FU_CB)),
      block(LANES * FU_WARPS);
  cudaStream_t st = cu_stream();
  switch (l) {
  case 0:
    conv_fused_r<1, P, DU><<<grid, block, 0, st>>>(*g, *x, basis, src, s2, W3, gy, dst, l, c0, c1, out);
    break;
  case 1:
    conv_fused_r<3, P, DU><<<grid, block, 0, st>>>(*g, *x, basis, src, s2, W3, gy, dst, l, c0, c1, out);
    break;
  case 2:
    conv_fused_r<5, P, DU><<<grid, block, 0, st>>>(*g, *x, basis, src, s2, W3, gy, dst, l, c0, c1, out);
    break;
  default:
    conv_fused_r<7, P, DU><<<grid, block, 0, st>>>(*g, *x, basis, src, s2, W3, gy, dst, l, c0, c1, out);
    break;
  }
  CU_LAUNCHED("conv_fused_r");
}

/* The forward's messages of degree l (du NULL: out, E x NI x cout), or the
 * backward's dU of degree l for the chunk's edges c0..c1-1 (into du) */
static void launch_fused_r(const struct geom *g, const struct deg_in *x, const real *basis, const int32_t *src,
                           const real *s2, const real *W3, const real *gy, const int32_t *dst, int l, int c0, int c1,
                           real *out, real *du) {
  const int p = (int)cu_precision();
#define FU_R(P)                                                                                                        \
  (du ? launch_fused_r_p<P, 1>(g, x, basis, src, s2, W3, gy, dst, l, c0, c1, du)                                       \
      : launch_fused_r_p<P, 0>(g, x, basis, src, s2, W3, NULL, NULL, l, 0, g->E, out))
  if (p == NN_PREC_BF16)
    FU_R(FU_BF16);
  else if (p == NN_PREC_FP16)
    FU_R(FU_F16);
  else if (p == NN_PREC_TF32)
    FU_R(FU_TF32);
  else
    FU_R(FU_3XTF32);
#undef FU_R
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
  const int fused = conv_path == NN_CONV_FUSED && fused_fits(&g);
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
      launch_fused_r(&g, &X, basis, s->src, s2, W3, NULL, NULL, l, 0, E, out, NULL);
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

/* ---- the fused path's weight gradients: dR never stored ----
 * With G the output gradient (g[e, i, o]: dy, or dy of the edge's target
 * when pooled) and dR[e, o, j] = sum_i g[e, i, o] U[e, i, j]:
 *   dW3[o, j, h] += sum_e dR[e, o, j] s2[e, h] = sum_(e,i) g[e, i, o] (U[e, i, j] s2[e, h]),
 *   ds2[e, h]     = sum_(o,j) dR[e, o, j] W3[o, j, h] = sum_(i,j) U[e, i, j] (sum_o g[e, i, o] W3[o, j, h]),
 * each a product on tensor cores whose operands are built a tile at a time
 * in shared memory or registers (2l+1 times dR's FLOPs, none of it stored):
 *   conv_fused_dw  (per degree l) a block owns FW_OT = 32 channels and
 *        FW_JT = 4 columns j (a warp each) and walks the chunk's edges
 *        FW_TE = 16 at a time: A = G^T (m = o, k = (e, i), from shared
 *        memory), B = U s2 (k = (e, i), n = h, each lane's elements
 *        multiplied as it loads them), dW3's tile summed in registers over
 *        every edge of the chunk in order, added to dW3 once: no partial
 *        sums, no atomics;
 *   conv_fused_ds2 (per degree l) a block owns FD_TE = 16 edges and walks
 *        every column j: Y = G W3 (m = (e, i), k = o, n = h) with MMAs,
 *        then Y U[e, i, j] summed on the CUDA cores into the lane's rows;
 *        at the end each edge's rows (its 2l+1 values of i) summed in
 *        order through shared memory; ds2 written by the first degree and
 *        added to by the next ones (in degree order).
 * Shared memory bounds them (fused_dr_fits): degrees whose G and W3 tiles
 * do not fit keep the stored dR. */
#define FW_TE 16
#define FW_JT 4
#define FW_OT 32
#define FD_TE 16
#define FD_POOL 12000 /* words of conv_fused_ds2's shared memory */
#define FD_CHAIN 4     /* MMAs a chain (mma.h) in conv_fused_ds2 and conv_fused_dw */

/* c += sum over s < n of A_s B_s: a chain of the staged words (fu_word's
 * format) of s's A and B fragments; in fp32 split here into tf32 halves */
template <int P, int N>
__device__ __forceinline__ void fu_mma_wn(float c[4], const uint32_t (*a)[4], const uint32_t (*b)[2], int n) {
  if (P == FU_BF16) {
    mma_bf16_n<N>(c, a, b, n);
  } else if (P == FU_F16) {
    mma_f16_n<N>(c, a, b, n);
  } else if (P == FU_TF32) {
    mma_tf32_n<N>(c, a, b, n);
  } else {
    uint32_t ah[N][4], al[N][4], bh[N][2], bl[N][2];
#pragma unroll
    for (int s = 0; s < N; s++) {
#pragma unroll
      for (int q = 0; q < 4; q++)
        fu_split(a[s][q], &ah[s][q], &al[s][q]);
      fu_split(b[s][0], &bh[s][0], &bl[s][0]);
      fu_split(b[s][1], &bh[s][1], &bl[s][1]);
    }
    mma_tf32x3_n<N>(c, ah, al, bh, bl, n);
  }
}

/* an A fragment (rows r0 + g, r0 + g + 8; k-step ks) from staged words S, rows of sw words */
__device__ __forceinline__ void fu_frag_a(uint32_t a[4], const uint32_t *S, int sw, int r0, int ks, int gq, int tq) {
  const int kw = ks * 8 + tq;
  a[0] = S[(r0 + gq) * sw + kw];
  a[1] = S[(r0 + gq + 8) * sw + kw];
  a[2] = S[(r0 + gq) * sw + kw + 4];
  a[3] = S[(r0 + gq + 8) * sw + kw + 4];
}

template <int NI, int P> struct fw_cfg {
  static constexpr int KR = (FW_TE * NI + fu_cfg<P>::KS - 1) / fu_cfg<P>::KS * fu_cfg<P>::KS; /* (e, i) rows */
  static constexpr int GW = (fu_cfg<P>::HALF ? KR / 2 : KR) + 4; /* words a row of G^T */
};


template <int NI, int P>
__global__ void __launch_bounds__(LANES *FU_WARPS)
    conv_fused_dw(const struct geom g, const struct deg_in x, const real *basis, const int32_t *src, const real *s2,
                  const real *gy, const int32_t *dst, int l, int c0, int c1, real *dW3) {
  constexpr int KS = fu_cfg<P>::KS, KR = fw_cfg<NI, P>::KR, GW = fw_cfg<NI, P>::GW, PER = fu_cfg<P>::HALF ? 2 : 1;
  constexpr int NT = FU_HMAX / 8, ROWS = FW_TE * NI;
  __shared__ uint32_t Gt[FW_OT * fw_cfg<NI, P>::GW]; /* [o][(e, i) words] */
  __shared__ real Us[FW_TE * NI * FW_JT];            /* [(e, i)][jj] */
  __shared__ real Ss[FW_TE * FU_HMAX];               /* [e][h] */
  const int tid = threadIdx.x, nth = LANES * FU_WARPS, lane = tid % LANES, w = tid / LANES;
  const int gq = lane / 4, tq = lane % 4;
  const int jc = blockIdx.x * FW_JT, oc = blockIdx.y * FW_OT, j = jc + w;
  const int cout = g.cout[l], K = g.K[l], H = g.H, nnt = (H + 7) / 8;
  float acc[2][NT][4];
#pragma unroll
  for (int m = 0; m < 2; m++)
#pragma unroll
    for (int n = 0; n < NT; n++)
      acc[m][n][0] = acc[m][n][1] = acc[m][n][2] = acc[m][n][3] = 0;
  for (int e0 = c0; e0 < c1; e0 += FW_TE) {
    __syncthreads(); /* the last step's readers are done */
    for (int q = tid; q < FW_OT * (KR / PER); q += nth) {
      const int o = q / (KR / PER), kw = q % (KR / PER), k = kw * PER;
      const real v0 = k < ROWS ? fu_grad(gy, dst, e0 + k / NI, c1, k % NI, oc + o, NI, cout) : (real)0;
      const real v1 =
          PER == 2 && k + 1 < ROWS ? fu_grad(gy, dst, e0 + (k + 1) / NI, c1, (k + 1) % NI, oc + o, NI, cout) : (real)0;
      Gt[o * GW + kw] = fu_word<P>(v0, v1);
    }
    for (int q = tid; q < ROWS * FW_JT; q += nth) {
      const int jj = q % FW_JT, i = q / FW_JT % NI, ee = e0 + q / (FW_JT * NI), jq = jc + jj;
      Us[q] = ee < c1 && jq < K ? conv_u(g, x, basis + (size_t)ee * (size_t)g.per_edge, src[ee], l, i, jq) : (real)0;
    }
    for (int q = tid; q < FW_TE * FU_HMAX; q += nth) {
      const int ee = e0 + q / FU_HMAX, h = q % FU_HMAX;
      Ss[q] = ee < c1 && h < H ? s2[(size_t)ee * H + h] : (real)0;
    }
    __syncthreads();
    if (j >= K) continue; /* (the whole warp: its column is past the degree's) */
    for (int c0k = 0; c0k < KR / KS; c0k += FD_CHAIN) { /* chains of MMAs over (e, i) */
      const int nk = KR / KS - c0k < FD_CHAIN ? KR / KS - c0k : FD_CHAIN;
      uint32_t a[2][FD_CHAIN][4];
#pragma unroll
      for (int s = 0; s < FD_CHAIN; s++) {
        const int ks = c0k + (s < nk ? s : 0);
        fu_frag_a(a[0][s], Gt, GW, 0, ks, gq, tq);
        fu_frag_a(a[1][s], Gt, GW, 16, ks, gq, tq);
      }
#pragma unroll
      for (int n = 0; n < NT; n++) {
        if (n >= nnt) break;
        const int h = n * 8 + gq;
        uint32_t b[FD_CHAIN][2];
#pragma unroll
        for (int s = 0; s < FD_CHAIN; s++) {
          /* B[k][h] = U[(e, i) = k][j] s2[e][h]: k = 2t, 2t+1 (+8) in 16-bit, t (+4) in tf32 */
          const int k0 = (c0k + s) * KS + (PER == 2 ? 2 * tq : tq), kstep = PER == 2 ? 8 : 4;
#pragma unroll
          for (int r = 0; r < 2; r++) {
            const int k = k0 + r * kstep;
            const real v0 = s < nk && k < ROWS ? Us[k * FW_JT + w] * Ss[k / NI * FU_HMAX + h] : (real)0;
            const real v1 = PER == 2 && s < nk && k + 1 < ROWS
                                ? Us[(k + 1) * FW_JT + w] * Ss[(k + 1) / NI * FU_HMAX + h]
                                : (real)0;
            b[s][r] = fu_word<P>(v0, v1);
          }
        }
        fu_mma_wn<P, FD_CHAIN>(acc[0][n], a[0], b, nk);
        if (oc + 16 < cout) fu_mma_wn<P, FD_CHAIN>(acc[1][n], a[1], b, nk); /* (block-uniform) */
      }
    }
  }
  if (j >= K) return;
  const size_t rbase = (size_t)g.r_off[l];
#pragma unroll
  for (int m = 0; m < 2; m++)
#pragma unroll
    for (int n = 0; n < NT; n++)
#pragma unroll
      for (int q = 0; q < 4; q++) {
        const int o = oc + m * 16 + gq + (q >= 2 ? 8 : 0), h = n * 8 + 2 * tq + (q & 1);
        if (n < nnt && o < cout && h < H) dW3[(rbase + (size_t)o * K + j) * H + h] += acc[m][n][q];
      }
}

/* conv_fused_ds2's layout in its FD_POOL words for degree l: G's rows of
 * ow words, then jb columns of W3's tile (hp rows of ow words each), then
 * U; 0 when one column does not fit */
struct fd_layout {
  int ow, hp, jb;
};
static __host__ __device__ inline struct fd_layout fd_layout_of(int NI, int cout, int H, int half) {
  const int ks = half ? 16 : 8, cp = (cout + ks - 1) / ks * ks;
  struct fd_layout L;
  L.ow = (half ? cp / 2 : cp) + 4;
  L.hp = (H + 7) / 8 * 8;
  const int left = FD_POOL - FD_TE * NI * L.ow, per = L.hp * L.ow + FD_TE * NI;
  L.jb = left > 0 ? left / per : 0;
  if (FD_TE * NI * L.hp > FD_POOL) L.jb = 0; /* the rows' sums at the end */
  return L;
}

template <int NI, int P>
__global__ void __launch_bounds__(LANES *FU_WARPS)
    conv_fused_ds2(const struct geom g, const struct deg_in x, const real *basis, const int32_t *src, const real *W3,
                   const real *gy, const int32_t *dst, int l, int c0, int c1, int add, real *ds2) {
  constexpr int KS = fu_cfg<P>::KS, PER = fu_cfg<P>::HALF ? 2 : 1, ROWS = FD_TE * NI;
  constexpr int IT = (NI * (FU_HMAX / 8) + FU_WARPS - 1) / FU_WARPS; /* (m-tile, h-tile) items a warp */
  __shared__ uint32_t pool[FD_POOL];
  const int tid = threadIdx.x, nth = LANES * FU_WARPS, lane = tid % LANES, w = tid / LANES;
  const int gq = lane / 4, tq = lane % 4;
  const int cout = g.cout[l], K = g.K[l], H = g.H, e0 = c0 + blockIdx.x * FD_TE;
  const struct fd_layout L = fd_layout_of(NI, cout, H, fu_cfg<P>::HALF);
  const int ow = L.ow, hp = L.hp, jb = L.jb, nnt = hp / 8, items = NI * nnt, nks = (ow - 4) * PER / KS;
  uint32_t *Gs = pool, *Wt = pool + ROWS * ow;
  real *Us = (real *)(Wt + (size_t)jb * hp * ow);
  const size_t rbase = (size_t)g.r_off[l];
  for (int q = tid; q < ROWS * (ow - 4); q += nth) {
    const int r = q / (ow - 4), kw = q % (ow - 4), o = kw * PER, ee = e0 + r / NI, i = r % NI;
    Gs[r * ow + kw] = fu_word<P>(fu_grad(gy, dst, ee, c1, i, o, NI, cout),
                                 PER == 2 ? fu_grad(gy, dst, ee, c1, i, o + 1, NI, cout) : (real)0);
  }
  float acc[IT][4];
#pragma unroll
  for (int it = 0; it < IT; it++)
    acc[it][0] = acc[it][1] = acc[it][2] = acc[it][3] = 0;
  for (int j0 = 0; j0 < K; j0 += jb) {
    __syncthreads(); /* the last step's readers are done (and G staged, the first time) */
    for (int q = tid; q < jb * hp * (ow - 4); q += nth) {
      const int kw = q % (ow - 4), h = q / (ow - 4) % hp, jj = q / ((ow - 4) * hp), o = kw * PER, j = j0 + jj;
      const int in = j < K && h < H;
      const real v0 = in && o < cout ? W3[(rbase + (size_t)o * K + j) * H + h] : (real)0;
      const real v1 = PER == 2 && in && o + 1 < cout ? W3[(rbase + (size_t)(o + 1) * K + j) * H + h] : (real)0;
      Wt[(jj * hp + h) * ow + kw] = fu_word<P>(v0, v1);
    }
    for (int q = tid; q < ROWS * jb; q += nth) {
      const int jj = q % jb, r = q / jb, ee = e0 + r / NI, j = j0 + jj;
      Us[q] = ee < c1 && j < K ? conv_u(g, x, basis + (size_t)ee * (size_t)g.per_edge, src[ee], l, r % NI, j)
                               : (real)0;
    }
    __syncthreads();
    for (int jj = 0; jj < jb && j0 + jj < K; jj++) { /* (block-uniform) */
#pragma unroll
      for (int it = 0; it < IT; it++) {
        const int item = w + FU_WARPS * it;
        if (item >= items) break; /* (warp-uniform) */
        const int m = item / nnt, n = item % nnt;
        float y[4] = {0, 0, 0, 0};
        for (int k0 = 0; k0 < nks; k0 += FD_CHAIN) { /* chains of MMAs over o */
          const int nk = nks - k0 < FD_CHAIN ? nks - k0 : FD_CHAIN;
          uint32_t a[FD_CHAIN][4], b[FD_CHAIN][2];
#pragma unroll
          for (int s = 0; s < FD_CHAIN; s++) {
            const int ks = k0 + (s < nk ? s : 0), kw = ks * 8 + tq;
            fu_frag_a(a[s], Gs, ow, m * 16, ks, gq, tq);
            b[s][0] = Wt[(jj * hp + n * 8 + gq) * ow + kw];
            b[s][1] = Wt[(jj * hp + n * 8 + gq) * ow + kw + 4];
          }
          fu_mma_wn<P, FD_CHAIN>(y, a, b, nk);
        }
        const real u0 = Us[(m * 16 + gq) * jb + jj], u1 = Us[(m * 16 + gq + 8) * jb + jj];
        acc[it][0] += y[0] * u0;
        acc[it][1] += y[1] * u0;
        acc[it][2] += y[2] * u1;
        acc[it][3] += y[3] * u1;
      }
    }
  }
  __syncthreads();
  real *Red = (real *)pool; /* [(e, i)][hp]: each row's sums over j */
#pragma unroll
  for (int it = 0; it < IT; it++) {
    const int item = w + FU_WARPS * it;
    if (item >= items) break;
    const int m = item / nnt, n = item % nnt;
#pragma unroll
    for (int q = 0; q < 4; q++)
      Red[(m * 16 + gq + (q >= 2 ? 8 : 0)) * hp + n * 8 + 2 * tq + (q & 1)] = acc[it][q];
  }
  __syncthreads();
  for (int q = tid; q < FD_TE * H; q += nth) {
    const int e = q / H, h = q % H, ee = e0 + e;
    if (ee >= c1) continue;
    real s = 0;
    for (int i = 0; i < NI; i++)
      s += Red[(e * NI + i) * hp + h];
    ds2[(size_t)ee * H + h] = add ? ds2[(size_t)ee * H + h] + s : s;
  }
}

/* 1 when every degree's ds2 tiles fit conv_fused_ds2's shared memory (the
 * fused path then stores no dR) */
static int fused_dr_fits(const struct geom *g) {
  const enum nn_precision p = cu_precision();
  const int half = p == NN_PREC_BF16 || p == NN_PREC_FP16;
  for (int l = 0; l <= g->max_l; l++)
    if (g->cout[l] && g->K[l] && fd_layout_of(NN_DIM(l), g->cout[l], g->H, half).jb < 1) return 0;
  return 1;
}

template <int P>
static void launch_fused_dr_p(const struct geom *g, const struct deg_in *x, const real *basis, const int32_t *src,
                              const real *s2, const real *W3, const real *gy, const int32_t *dst, int l, int c0,
                              int c1, real *dW3, int add, real *ds2) {
  cudaStream_t st = cu_stream();
  if (dW3) {
    dim3 grid((unsigned)((g->K[l] + FW_JT - 1) / FW_JT), (unsigned)((g->cout[l] + FW_OT - 1) / FW_OT)),
        block(LANES * FU_WARPS);
    switch (l) {
    case 0:
      conv_fused_dw<1, P><<<grid, block, 0, st>>>(*g, *x, basis, src, s2, gy, dst, l, c0, c1, dW3);
      break;
    case 1:
      conv_fused_dw<3, P><<<grid, block, 0, st>>>(*g, *x, basis, src, s2, gy, dst, l, c0, c1, dW3);
      break;
    case 2:
      conv_fused_dw<5, P><<<grid, block, 0, st>>>(*g, *x, basis, src, s2, gy, dst, l, c0, c1, dW3);
      break;
    default:
      conv_fused_dw<7, P><<<grid, block, 0, st>>>(*g, *x, basis, src, s2, gy, dst, l, c0, c1, dW3);
      break;
    }
    CU_LAUNCHED("conv_fused_dw");
  }
  if (ds2) {
    const unsigned grid = (unsigned)((c1 - c0 + FD_TE - 1) / FD_TE);
    switch (l) {
    case 0:
      conv_fused_ds2<1, P><<<grid, LANES * FU_WARPS, 0, st>>>(*g, *x, basis, src, W3, gy, dst, l, c0, c1, add, ds2);
      break;
    case 1:
      conv_fused_ds2<3, P><<<grid, LANES * FU_WARPS, 0, st>>>(*g, *x, basis, src, W3, gy, dst, l, c0, c1, add, ds2);
      break;
    case 2:
      conv_fused_ds2<5, P><<<grid, LANES * FU_WARPS, 0, st>>>(*g, *x, basis, src, W3, gy, dst, l, c0, c1, add, ds2);
      break;
    default:
      conv_fused_ds2<7, P><<<grid, LANES * FU_WARPS, 0, st>>>(*g, *x, basis, src, W3, gy, dst, l, c0, c1, add, ds2);
      break;
    }
    CU_LAUNCHED("conv_fused_ds2");
  }
}

/* dW3 += and ds2 (= when !add, else +=) of degree l from the chunk's edges c0..c1-1 */
static void launch_fused_dr(const struct geom *g, const struct deg_in *x, const real *basis, const int32_t *src,
                            const real *s2, const real *W3, const real *gy, const int32_t *dst, int l, int c0, int c1,
                            real *dW3, int add, real *ds2) {
  switch (cu_precision()) {
  case NN_PREC_BF16:
    launch_fused_dr_p<FU_BF16>(g, x, basis, src, s2, W3, gy, dst, l, c0, c1, dW3, add, ds2);
    break;
  case NN_PREC_FP16:
    launch_fused_dr_p<FU_F16>(g, x, basis, src, s2, W3, gy, dst, l, c0, c1, dW3, add, ds2);
    break;
  case NN_PREC_TF32:
    launch_fused_dr_p<FU_TF32>(g, x, basis, src, s2, W3, gy, dst, l, c0, c1, dW3, add, ds2);
    break;
  default:
    launch_fused_dr_p<FU_3XTF32>(g, x, basis, src, s2, W3, gy, dst, l, c0, c1, dW3, add, ds2);
    break;
  }
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
  const int fused = conv_path == NN_CONV_FUSED && fused_fits(&g) && g.Rt > 0;
  const char *fdr_env = getenv("SE3_FUSED_DR");
  const int fdr = fused && want_r && fused_dr_fits(&g) && !(fdr_env && !strcmp(fdr_env, "store"));
  const int half = gpath || (fused && !fdr);
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
            launch_fused_r(&g, &X, basis, s->src, s2, W3, dy[l], dst, l, c0, c1, NULL, dU);
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
          launch_fused_dr(&g, &X, basis, s->src, s2, W3, dy[l], dst, l, c0, c1, dW3, started, ds2);
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
