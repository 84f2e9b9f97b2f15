/* conv_fused.cu — the convolution fused on tensor cores (`gpu_conv:
 * fused`): R's tiles with the warp's mma.sync (models/cuda/mma.h),
 * contracted at once, never stored, in the forward and the backward's dU
 * (conv_fused_r); dW3 and ds2 from the output gradient, U, s2 and W3 a
 * tile at a time (conv_fused_dw, conv_fused_ds2), so dR is not stored
 * either. conv.cu calls them (models/cuda/conv.h) and has the sums. */
#include <stdlib.h>
#include <string.h>

#include "models/cuda/conv.h"
#include "models/cuda/mma.h"

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

int cu_fused_fits(const struct geom *g) { return g->H >= 1 && g->H <= FU_HMAX; }

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

/* conv.h's */
void cu_fused_r(const struct geom *g, const struct deg_in *x, const real *basis, const int32_t *src,
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

/* conv.h's: every degree's ds2 tiles fit conv_fused_ds2's shared memory (the
 * dW3 kernel's always do) */
int cu_fused_dr_fits(const struct geom *g) {
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

/* conv.h's */
void cu_fused_dr(const struct geom *g, const struct deg_in *x, const real *basis, const int32_t *src,
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

