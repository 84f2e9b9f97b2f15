/* conv.c — the TFN convolution fused with the last layer of its radial
 * network (nn.h has the contract).
 *
 * Per edge e and output degree l,
 *   out_l[e, i, o] = sum_j R_l[e, o, j] U_l[e, i, j],
 *   R_l[e, o, j]   = sum_h s2[e, h] W3[(o, j), h],
 * where row i of U_l is the rows (l, i, .) of every T_k = F_k x_k(src) side
 * by side: columns (k, J', c), the column order of R_l. R (45,056 reals per
 * edge at the QM9 settings) is never stored:
 *   forward   for a block of JB columns and a tile of TE edges, R_l[., ., j]
 *             is computed in registers (vectors over the output channels o,
 *             from W3 transposed to [j][h][o]) into a small buffer, then each
 *             edge adds sum_j U_l[e, i, j] R_l[e, ., j] to its outputs with
 *             its (2l+1) x OC sums in registers;
 *   backward  d U the same way with columns as vectors (W3 at [o][h][j]);
 *             then, per block of JB columns over the whole chunk of edges,
 *             dR = sum_i g U, d W3 += s2^T dR and d s2 += dR W3 as register
 *             tiles over a buffered dR; F_k^T turns d U into d x.
 *
 * Work is cut into chunks of CE consecutive edges whose U, outputs and
 * gradients stay in cache. Each step has two bodies: a generic one over
 * plain arrays and any channel counts, and a fast one for whole tiles (OC
 * output channels, 32 radial features, JB or JV columns) written in vectors
 * of the instruction set's width, with the register tile sized for that
 * instruction set (TE, OC, ... below); the two compute the same sums in the
 * same order (test_grad_conv compares them, and each instruction set's build
 * with the baseline one).
 *
 * Threads: the edges are cut into one contiguous range per thread (for
 * pooled outputs, ranges of whole target nodes); d W3 and d x are summed per
 * thread and then in thread order, so results are fixed for a thread count.
 */
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* Compiled once per instruction set (isa.h): the entry points below get the
 * variant's name; what is shared is defined in the baseline build only. */
#define SE3_ISA_IMPL 1
#include "models/cpu/isa.h"
#include "models/cpu/nn.h"
#include "models/so3.h"
/* The generic tiles in masked vectors where the build has AVX-512 or AVX2
 * (float). */
#if (defined(__AVX512F__) || defined(__AVX2__)) && !defined(SE3_REAL_F64) && !defined(__CUDACC__)
#define MASKED 1
#endif
#if defined(SE3_CONV_BF16) || defined(MASKED)
#include <immintrin.h>
#endif

/* Register tiles, per instruction set (isa.h). A tile's sums must stay in
 * vector registers: AVX-512 has 32 registers of 16 floats, where a tile of
 * 8 edges x 32 channels takes 16; AVX2 has 16 registers of 8 floats, where
 * the same tile would need 32 and spill to memory at every step, so its tiles
 * are a quarter of the size (8 or 12 sums, the rest of the registers for the
 * operands); the baseline build (SSE2, 16 registers of 4 floats) halves
 * them again. A tile only cuts the work into pieces: each sum runs over the
 * same terms in the same order whatever the tile, so the tiles do not change
 * what is computed. */
#if defined(__AVX512F__)
#define TE 8  /* edges per register tile */
#define OC 32 /* output channels per register tile */
#define JV 32 /* columns per register tile of the backward's d U */
#define HQ 8  /* rows of d W3 per register tile */
#define EQ 8  /* edges per d s2 register tile */
#define HC 32 /* radial features per d s2 register tile */
#elif defined(__AVX2__)
#define TE 6
#define OC 16
#define JV 16
#define HQ 6 /* 5 tiles of 6 rows and one of 2 for HF = 32 */
#define EQ 6
#define HC 16
#else /* baseline x86-64: 16 registers of 4 floats */
#define TE 4
#define OC 8
#define JV 8
#define HQ 4
#define EQ 4
#define HC 8
#endif
#define HF 32 /* radial features of the fast tiles */
#if TE == 6
#define CE 60 /* edges per chunk (a multiple of TE) */
#else
#define CE 64
#endif
_Static_assert(CE % TE == 0 && TE % EQ == 0 && HF % HC == 0, "tiles must divide what they cut");

/* The fast tiles are written in vectors of the instruction set's width
 * (GCC's vector extensions: the compiler maps each vector to one register and
 * each a += b * c to one FMA), so the register tile is the one written here,
 * not one the vectoriser may or may not find. VB bytes a vector, NL reals. */
#if defined(__AVX512F__)
#define VB 64
#elif defined(__AVX__)
#define VB 32
#else
#define VB 16
#endif
typedef real vreal __attribute__((vector_size(VB)));
typedef real vreal_u __attribute__((vector_size(VB), aligned(sizeof(real)), may_alias)); /* unaligned access */
#define NL ((int)(VB / sizeof(real)))
#define NV(n) ((n) / NL) /* vectors in n reals */
static inline __attribute__((always_inline)) vreal vld(const real *p) { return *(const vreal_u *)p; }
static inline __attribute__((always_inline)) void vst(real *p, vreal v) { *(vreal_u *)p = v; }
/* Every lane x: one broadcast ({0} + x would also be an addition, which
 * the compiler must keep for x = -0). */
#if defined(__GNUC__) && !defined(__clang__)
#ifdef SE3_REAL_F64
typedef long long vlane __attribute__((vector_size(VB)));
#else
typedef int vlane __attribute__((vector_size(VB)));
#endif
static inline __attribute__((always_inline)) vreal vbc(real x) { return __builtin_shuffle((vreal){x}, (vlane){0}); }
#else
static inline __attribute__((always_inline)) vreal vbc(real x) { return (vreal){0} + x; }
#endif

/* Full unrolling of the small fixed loops of a tile, so that its sums stay
 * in registers (GCC does not do it by itself for the larger tiles). */
#if defined(__CUDACC__)
#define UNROLL(n) _Pragma("unroll")
#elif defined(__GNUC__) && !defined(__clang__)
#define UNROLL_S(x) _Pragma(#x)
#define UNROLL(n) UNROLL_S(GCC unroll n)
#else
#define UNROLL(n)
#endif

static int imin(int a, int b) { return a < b ? a : b; }

#ifndef SE3_ISA_VARIANT
int nn_conv_generic_only = 0;
#endif

/* Where things are, computed once per call. */
struct plan {
  int H, cin[NN_MAX_DEG + 1], cout[NN_MAX_DEG + 1], K[NN_MAX_DEG + 1];
  int rows[NN_MAX_DEG + 1];                 /* rows of F_k */
  int row0[NN_MAX_DEG + 1][NN_MAX_DEG + 1]; /* first row of output degree l in F_k */
  int col0[NN_MAX_DEG + 1][NN_MAX_DEG + 1]; /* first column of input degree k in R_l */
  size_t r_off[NN_MAX_DEG + 1];             /* first W3 row of degree l (rows o K_l + j) */
  size_t u_off[NN_MAX_DEG + 1], usize;      /* U_l ((2l+1) x K_l) in an edge's U */
  size_t y_off[NN_MAX_DEG + 1], ysize;      /* degree l ((2l+1) x cout_l) in an edge's output */
  size_t wt_off[NN_MAX_DEG + 1], wt_size;   /* W3T_l, [j][h][o]: K_l x H x cout_l */
  int max_l, fast, max_cout;
  int vec_u; /* every input degree's channels are whole vectors: vedge_u, vedge_du */
  /* bf16 forward (SE3_CONV_BF16): W3 as bf16 pairs of radial features,
   * W3P_l[j][h2][o] (h2 < H2 = ceil(H / 2), o < opad_l = cout_l rounded up
   * to 16), one 32-bit word a pair, at wb_off[l] */
  int H2, opad[NN_MAX_DEG + 1];
  size_t wb_off[NN_MAX_DEG + 1], wb_size;
};

static void make_plan(struct plan *p, const struct nn_conv_shape *s, int H) {
  memset(p, 0, sizeof *p);
  p->H = H;
  p->max_l = s->plan->max_degree < NN_MAX_DEG ? s->plan->max_degree : NN_MAX_DEG;
  p->fast = !nn_conv_generic_only && H == HF;
  p->vec_u = !nn_conv_generic_only;
  for (int d = 0; d <= NN_MAX_DEG; d++) {
    p->cin[d] = d <= p->max_l ? s->fin.ch[d] : 0;
    if (p->cin[d] % NL) p->vec_u = 0;
    p->cout[d] = d <= p->max_l ? s->fout.ch[d] : 0;
    if (p->cout[d] % OC) p->fast = 0;
    if (p->cout[d] > p->max_cout) p->max_cout = p->cout[d];
  }
  for (int k = 0; k <= p->max_l; k++) {
    p->rows[k] = (int)s->plan->fused_rows[k];
    int r = 0;
    for (int l = 0; l <= s->plan->max_degree; l++) {
      if (l <= NN_MAX_DEG) p->row0[k][l] = r;
      r += NN_DIM(l) * (2 * imin(k, l) + 1);
    }
  }
  size_t r_rows = 0;
  for (int l = 0; l <= NN_MAX_DEG; l++) {
    p->K[l] = nn_conv_radial_cols(&s->fin, l);
    int c = 0;
    for (int k = 0; k <= NN_MAX_DEG; k++) {
      p->col0[l][k] = c;
      c += (2 * imin(k, l) + 1) * s->fin.ch[k];
    }
    p->r_off[l] = r_rows;
    r_rows += (size_t)s->fout.ch[l] * (size_t)p->K[l];
    if (!p->cout[l]) continue;
    p->u_off[l] = p->usize;
    p->usize += (size_t)(NN_DIM(l) * p->K[l]);
    p->y_off[l] = p->ysize;
    p->ysize += (size_t)(NN_DIM(l) * p->cout[l]);
    p->wt_off[l] = p->wt_size;
    p->wt_size += (size_t)p->K[l] * (size_t)H * (size_t)p->cout[l];
    p->opad[l] = (p->cout[l] + 15) / 16 * 16;
    p->wb_off[l] = p->wb_size;
    p->wb_size += (size_t)p->K[l] * (size_t)((H + 1) / 2) * (size_t)p->opad[l];
  }
  p->H2 = (H + 1) / 2;
}

/* ---- per-edge bodies ----------------------------------------------------------- */

/* U of one edge from the source's features: U_l[i, col0[l][k] + J' cin + c] =
 * sum_a F_k[(row0[k][l] + i nJ + J'), a] x_k[src, a, c]. Every entry of U is
 * written. */
SE3_HD static inline void conv_edge_u(real *U, const struct plan *p, const size_t *f_off, const real *const x[],
                                      const real *bas, int src) {
  for (int k = 0; k <= p->max_l; k++) {
    int cin = p->cin[k], nk = NN_DIM(k);
    if (!cin) continue;
    const real *F = bas + f_off[k];
    const real *xs = x[k] + (size_t)src * (size_t)(nk * cin);
    for (int l = 0; l <= p->max_l; l++) {
      if (!p->cout[l]) continue;
      int nJ = 2 * imin(k, l) + 1;
      for (int i = 0; i < NN_DIM(l); i++)
        for (int J = 0; J < nJ; J++) {
          const real *f = F + (size_t)(p->row0[k][l] + i * nJ + J) * (size_t)nk;
          real *d = U + p->u_off[l] + (size_t)i * (size_t)p->K[l] + (size_t)(p->col0[l][k] + J * cin);
          for (int c = 0; c < cin; c++)
            d[c] = 0;
          for (int a = 0; a < nk; a++) {
            real fa = f[a];
            const real *xa = xs + a * cin;
            for (int c = 0; c < cin; c++)
              d[c] += fa * xa[c];
          }
        }
    }
  }
}

/* The transpose: g_k[a, c] += sum F_k[row, a] dU[row's place, c] for the
 * source's gradient g (one node's rows of every degree). */
SE3_HD static inline void conv_edge_du(real *const g[], const struct plan *p, const size_t *f_off, const real *dU,
                                       const real *bas) {
  for (int k = 0; k <= p->max_l; k++) {
    int cin = p->cin[k], nk = NN_DIM(k);
    if (!cin || !g[k]) continue;
    const real *F = bas + f_off[k];
    for (int l = 0; l <= p->max_l; l++) {
      if (!p->cout[l]) continue;
      int nJ = 2 * imin(k, l) + 1;
      for (int i = 0; i < NN_DIM(l); i++)
        for (int J = 0; J < nJ; J++) {
          const real *f = F + (size_t)(p->row0[k][l] + i * nJ + J) * (size_t)nk;
          const real *d = dU + p->u_off[l] + (size_t)i * (size_t)p->K[l] + (size_t)(p->col0[l][k] + J * cin);
          for (int a = 0; a < nk; a++) {
            real fa = f[a];
            real *ga = g[k] + a * cin;
            for (int c = 0; c < cin; c++)
              ga[c] += fa * d[c];
          }
        }
    }
  }
}

/* Forward, in two steps per block of JB columns j0.. of R_l and TE edges.
 * First R[e][jj][o] = sum_h s2[e][h] wt[jj][h][o] into the buffer Rb
 * (TE x JB x cout; s2: TE x H; wt: W3T_l from column j0), a register tile
 * of TE x OC sums per column. jn <= JB columns. */
#define JB 16
SE3_HD static inline __attribute__((always_inline)) void conv_tile_r(real *Rb, const real *s2, int H, const real *wt,
                                                                     int cout, int jn) {
  int hh = H;
  for (int jj = 0; jj < jn; jj++) {
    const real *wj = wt + (size_t)jj * (size_t)hh * (size_t)cout;
    for (int oc = 0; oc < cout; oc += OC) {
      int on = imin(OC, cout - oc);
      real r[TE][OC];
      for (int e = 0; e < TE; e++)
        for (int o = 0; o < on; o++)
          r[e][o] = 0;
      for (int h = 0; h < hh; h++) {
        const real *w = wj + (size_t)h * (size_t)cout + oc;
        for (int e = 0; e < TE; e++) {
          real sv = s2[e * hh + h];
          for (int o = 0; o < on; o++)
            r[e][o] += sv * w[o];
        }
      }
      for (int e = 0; e < TE; e++)
        for (int o = 0; o < on; o++)
          Rb[((size_t)e * JB + (size_t)jj) * (size_t)cout + (size_t)(oc + o)] = r[e][o];
    }
  }
}

/* Then, per edge, out[i][o] += sum_jj U[i][jj] R[jj][o] for its ni rows
 * (out: the edge's degree-l rows; Rb: its JB x cout block; U: its U_l at
 * column j0, rows K apart), the ni x OC sums in registers. */
SE3_HD static inline __attribute__((always_inline)) void conv_contract(real *out, const real *Rb, const real *U, int K,
                                                                       int jn, int cout, int ni) {
  for (int oc = 0; oc < cout; oc += OC) {
    int on = imin(OC, cout - oc);
    real acc[NN_DIM(NN_MAX_DEG)][OC];
    for (int i = 0; i < ni; i++)
      for (int o = 0; o < on; o++)
        acc[i][o] = out[(size_t)i * (size_t)cout + (size_t)(oc + o)];
    for (int jj = 0; jj < jn; jj++) {
      const real *r = Rb + (size_t)jj * (size_t)cout + oc;
      for (int i = 0; i < ni; i++) {
        real u = U[(size_t)i * (size_t)K + (size_t)jj];
        for (int o = 0; o < on; o++)
          acc[i][o] += u * r[o];
      }
    }
    for (int i = 0; i < ni; i++)
      for (int o = 0; o < on; o++)
        out[(size_t)i * (size_t)cout + (size_t)(oc + o)] = acc[i][o];
  }
}

/* Backward, first part: d U, per block of JV columns j0.. of R_l and TE
 * edges. First R[e][o][jj] = sum_h s2[e][h] wo[o][h][jj] into Rb
 * (TE x cout x JV; wo: the block of W3O_l for columns j0..j0+jn-1, its
 * rows jn wide), vectors over the columns; jn <= JV. */

SE3_HD static inline __attribute__((always_inline)) void conv_tile_ro(real *Rb, const real *s2, int H, const real *wo,
                                                                      int cout, int jn) {
  int hh = H, n = jn;
  for (int o = 0; o < cout; o++) {
    const real *wq = wo + (size_t)o * (size_t)hh * (size_t)n;
    real r[TE][JV];
    for (int e = 0; e < TE; e++)
      for (int j = 0; j < n; j++)
        r[e][j] = 0;
    for (int h = 0; h < hh; h++) {
      const real *w = wq + (size_t)h * (size_t)n;
      for (int e = 0; e < TE; e++) {
        real sv = s2[e * hh + h];
        for (int j = 0; j < n; j++)
          r[e][j] += sv * w[j];
      }
    }
    for (int e = 0; e < TE; e++)
      for (int j = 0; j < n; j++)
        Rb[((size_t)e * (size_t)cout + (size_t)o) * JV + (size_t)j] = r[e][j];
  }
}

/* Then, per edge, dU[i][jj] = sum_o g[i][o] R[o][jj] (dU: the edge's U_l
 * gradient at column j0, rows K apart, each entry written once; g: its
 * ni x cout output gradient; Rb: its cout x JV block), the ni x JV sums in
 * registers. */
SE3_HD static inline __attribute__((always_inline)) void conv_contract_du(real *dU, const real *Rb, const real *g,
                                                                          int K, int jn, int cout, int ni) {
  int n = jn;
  real acc[NN_DIM(NN_MAX_DEG)][JV];
  for (int i = 0; i < ni; i++)
    for (int j = 0; j < n; j++)
      acc[i][j] = 0;
  for (int o = 0; o < cout; o++) {
    const real *r = Rb + (size_t)o * JV;
    for (int i = 0; i < ni; i++) {
      real gv = g[(size_t)i * (size_t)cout + (size_t)o];
      for (int j = 0; j < n; j++)
        acc[i][j] += gv * r[j];
    }
  }
  for (int i = 0; i < ni; i++)
    for (int j = 0; j < n; j++)
      dU[(size_t)i * (size_t)K + (size_t)j] = acc[i][j];
}

/* Backward, second part, per block of JB columns j0.. of R_l over a whole
 * chunk of edges, given the output gradient g (laid out like out):
 *   dR[e][jj][o] = sum_i g[e][i][o] U[e][i][jj]           (conv_dr_rows)
 *   dW3T[jj][h][o] += sum_e s2[e][h] dR[e][jj][o]           (conv_dw_block)
 *   ds2[e][h] += sum_{jj,o} dR[e][jj][o] W3J[jj][o][h]     (conv_ds2_block)
 * dR (chunk x JB x cout) stays in cache between the three. */
SE3_HD static inline __attribute__((always_inline)) void conv_dr_rows(real *DR, const real *g, const real *U, int K,
                                                                      int jn, int cout, int ni) {
  for (int oc = 0; oc < cout; oc += OC) {
    int on = imin(OC, cout - oc);
    real gr[NN_DIM(NN_MAX_DEG)][OC];
    for (int i = 0; i < ni; i++)
      for (int o = 0; o < on; o++)
        gr[i][o] = g[(size_t)i * (size_t)cout + (size_t)(oc + o)];
    for (int jj = 0; jj < jn; jj++) {
      real d[OC];
      for (int o = 0; o < on; o++)
        d[o] = 0;
      for (int i = 0; i < ni; i++) {
        real u = U[(size_t)i * (size_t)K + (size_t)jj];
        for (int o = 0; o < on; o++)
          d[o] += u * gr[i][o];
      }
      for (int o = 0; o < on; o++)
        DR[(size_t)jj * (size_t)cout + (size_t)(oc + o)] = d[o];
    }
  }
}

SE3_HD static inline __attribute__((always_inline)) void conv_dw_block(real *dW, const real *DR, const real *s2, int ne,
                                                                       int H, int cout, int jn) {
  int hh = H;
  for (int jj = 0; jj < jn; jj++)
    for (int oc = 0; oc < cout; oc += OC) {
      int on = imin(OC, cout - oc);
      for (int h = 0; h < hh; h += HQ) { /* HQ rows at a time: a register tile of HQ x OC sums */
        int nq = imin(HQ, hh - h);
        real acc[HQ][OC];
        real *d = dW + ((size_t)jj * (size_t)hh + (size_t)h) * (size_t)cout + (size_t)oc;
        for (int q = 0; q < nq; q++)
          for (int o = 0; o < on; o++)
            acc[q][o] = d[(size_t)q * (size_t)cout + (size_t)o];
        for (int e = 0; e < ne; e++) {
          const real *dv = DR + ((size_t)e * JB + (size_t)jj) * (size_t)cout + (size_t)oc;
          UNROLL(8)
          for (int q = 0; q < nq; q++) {
            real sv = s2[(size_t)e * (size_t)hh + (size_t)(h + q)];
            for (int o = 0; o < on; o++)
              acc[q][o] += sv * dv[o];
          }
        }
        for (int q = 0; q < nq; q++)
          for (int o = 0; o < on; o++)
            d[(size_t)q * (size_t)cout + (size_t)o] = acc[q][o];
      }
    }
}

SE3_HD static inline __attribute__((always_inline)) void conv_ds2_block(real *ds2, const real *DR, const real *W,
                                                                        int ne, int H, int cout, int jn) {
  int hh = H;
  for (int e = 0; e < ne; e += EQ) { /* EQ edges at a time */
    int nq = imin(EQ, ne - e);
    for (int hc = 0; hc < hh; hc += HC) {
      int hn = imin(HC, hh - hc);
      real acc[EQ][HC];
      for (int q = 0; q < nq; q++)
        for (int h = 0; h < hn; h++)
          acc[q][h] = ds2[(size_t)(e + q) * (size_t)hh + (size_t)(hc + h)];
      for (int jj = 0; jj < jn; jj++)
        for (int o = 0; o < cout; o++) {
          const real *w = W + ((size_t)jj * (size_t)cout + (size_t)o) * (size_t)hh + (size_t)hc;
          UNROLL(8)
          for (int q = 0; q < nq; q++) {
            real d = DR[((size_t)(e + q) * JB + (size_t)jj) * (size_t)cout + (size_t)o];
            for (int h = 0; h < hn; h++)
              acc[q][h] += d * w[h];
          }
        }
      for (int q = 0; q < nq; q++)
        for (int h = 0; h < hn; h++)
          ds2[(size_t)(e + q) * (size_t)hh + (size_t)(hc + h)] = acc[q][h];
    }
  }
}

/* ---- the fast tiles, in vectors ------------------------------------------------- */

/* The same sums as the bodies above for the fast case (HF radial features,
 * JB or JV columns, output channels in whole tiles of OC), each in the same
 * order. All but conv_dr_rows are one register tile, vtile: rows of OC
 * columns (NV(OC) vectors a row, up to 8 rows), each row a sum of n
 * products of a broadcast real and a row of r, its loops over rows and
 * vectors unrolled in full so that the sums stay in registers. The forward
 * takes its columns over output channels, the backward's d U over the
 * columns of R (JV) and d s2 over radial features (HC): all are OC wide. */
_Static_assert(JV == OC && HC == OC, "vtile's columns are OC wide for every caller");
_Static_assert(TE <= 8 && HQ <= 8 && EQ <= 8 && NN_DIM(NN_MAX_DEG) <= 8, "vtile holds up to 8 rows");

/* out[i * os + c] (+)= sum_{j < n} u[i * us + j * uj] r[j * rs + c] for
 * i < ni and c < OC: with zero, out is overwritten, else added to. */
static inline __attribute__((always_inline)) void vtile(real *out, size_t os, const real *r, size_t rs, const real *u,
                                                        size_t us, size_t uj, int n, int ni, int zero) {
  vreal a[8][NV(OC)];
  UNROLL(8)
  for (int i = 0; i < ni; i++)
    UNROLL(4) for (int v = 0; v < NV(OC); v++) a[i][v] = zero ? vbc(0) : vld(out + (size_t)i * os + (size_t)(v * NL));
  for (int j = 0; j < n; j++) {
    vreal rv[NV(OC)];
    UNROLL(4) for (int v = 0; v < NV(OC); v++) rv[v] = vld(r + (size_t)j * rs + (size_t)(v * NL));
    UNROLL(8) for (int i = 0; i < ni; i++) {
      vreal x = vbc(u[(size_t)i * us + (size_t)j * uj]);
      UNROLL(4) for (int v = 0; v < NV(OC); v++) a[i][v] += x * rv[v];
    }
  }
  UNROLL(8)
  for (int i = 0; i < ni; i++)
    UNROLL(4) for (int v = 0; v < NV(OC); v++) vst(out + (size_t)i * os + (size_t)(v * NL), a[i][v]);
}

/* conv_tile_r: Rb[e][jj][o] = sum_h s2[e][h] wt[jj][h][o]. */
static inline __attribute__((always_inline)) void vtile_r(real *Rb, const real *s2, const real *wt, int cout) {
  for (int jj = 0; jj < JB; jj++)
    for (int oc = 0; oc < cout; oc += OC)
      vtile(Rb + (size_t)jj * (size_t)cout + (size_t)oc, JB * (size_t)cout,
            wt + (size_t)jj * HF * (size_t)cout + (size_t)oc, (size_t)cout, s2, HF, 1, HF, TE, 1);
}

/* conv_contract: out[i][o] += sum_jj U[i][jj] Rb[jj][o]. */
static inline __attribute__((always_inline)) void vcontract(real *out, const real *Rb, const real *U, int K, int cout,
                                                            int ni) {
  for (int oc = 0; oc < cout; oc += OC)
    vtile(out + oc, (size_t)cout, Rb + oc, (size_t)cout, U, (size_t)K, 1, JB, ni, 0);
}

/* conv_tile_ro: Rb[e][o][j] = sum_h s2[e][h] wo[o][h][j], wo's rows JV
 * wide. */
static inline __attribute__((always_inline)) void vtile_ro(real *Rb, const real *s2, const real *wo, int cout) {
  for (int o = 0; o < cout; o++)
    vtile(Rb + (size_t)o * JV, (size_t)cout * JV, wo + (size_t)o * HF * JV, JV, s2, HF, 1, HF, TE, 1);
}

/* conv_contract_du: dU[i][j] = sum_o g[i][o] Rb[o][j]. */
static inline __attribute__((always_inline)) void vcontract_du(real *dU, const real *Rb, const real *g, int K, int cout,
                                                               int ni) {
  vtile(dU, (size_t)K, Rb, JV, g, (size_t)cout, 1, cout, ni, 1);
}

/* conv_dr_rows: DR[jj][o] = sum_i U[i][jj] g[i][o], DJ columns jj at a
 * time so that DJ x NV(OC) independent sums are under way (one row of g,
 * then the next: each sum's terms in the same order). */
#define DJ 4
static inline __attribute__((always_inline)) void vdr_rows(real *DR, const real *g, const real *U, int K, int cout,
                                                           int ni) {
  for (int oc = 0; oc < cout; oc += OC)
    for (int jj = 0; jj < JB; jj += DJ) {
      vreal d[DJ][NV(OC)];
      UNROLL(7) for (int i = 0; i < ni; i++) {
        vreal gr[NV(OC)];
        UNROLL(4) for (int v = 0; v < NV(OC); v++) gr[v] = vld(g + (size_t)i * (size_t)cout + (size_t)(oc + v * NL));
        UNROLL(4) for (int q = 0; q < DJ; q++) {
          vreal u = vbc(U[(size_t)i * (size_t)K + (size_t)(jj + q)]);
          UNROLL(4) for (int v = 0; v < NV(OC); v++) d[q][v] = i ? d[q][v] + u * gr[v] : u * gr[v];
        }
      }
      UNROLL(4) for (int q = 0; q < DJ; q++)
        UNROLL(4) for (int v = 0; v < NV(OC); v++) vst(DR + (size_t)(jj + q) * (size_t)cout + (size_t)(oc + v * NL), d[q][v]);
    }
}

/* conv_dw_block: dW[jj][h][o] += sum_e s2[e][h] DR[e][jj][o], HQ rows h at
 * a time (then the HF % HQ left). dW, a thread's whole d W3 (megabytes),
 * is read and written once a chunk, so the next column's rows are fetched
 * while this one's are summed (past the end, a prefetch does nothing). */
static inline __attribute__((always_inline)) void vdw_block(real *dW, const real *DR, const real *s2, int ne,
                                                            int cout) {
  for (int jj = 0; jj < JB; jj++) {
    const char *next = (const char *)(dW + (size_t)(jj + 1) * HF * (size_t)cout);
    for (size_t b = 0; b < HF * (size_t)cout * sizeof(real); b += 64)
      __builtin_prefetch(next + b, 1);
    for (int oc = 0; oc < cout; oc += OC) {
      real *d = dW + (size_t)jj * HF * (size_t)cout + (size_t)oc;
      const real *r = DR + (size_t)jj * (size_t)cout + (size_t)oc;
      int h = 0;
      for (; h + HQ <= HF; h += HQ)
        vtile(d + (size_t)h * (size_t)cout, (size_t)cout, r, JB * (size_t)cout, s2 + h, 1, HF, ne, HQ, 0);
      if (HF % HQ) vtile(d + (size_t)h * (size_t)cout, (size_t)cout, r, JB * (size_t)cout, s2 + h, 1, HF, ne, HF % HQ, 0);
    }
  }
}

/* conv_ds2_block: ds2[e][h] += sum_{jj, o} DR[e][jj][o] W[jj][o][h], EQ
 * edges at a time, (jj, o) one index jj cout + o; ne a multiple of EQ. */
static inline __attribute__((always_inline)) void vds2_block(real *ds2, const real *DR, const real *W, int ne,
                                                             int cout) {
  for (int e = 0; e < ne; e += EQ)
    for (int hc = 0; hc < HF; hc += HC)
      vtile(ds2 + (size_t)e * HF + (size_t)hc, HF, W + hc, HF, DR + (size_t)e * JB * (size_t)cout, JB * (size_t)cout, 1,
            JB * cout, EQ, 0);
}

/* conv_edge_u and conv_edge_du when every input degree's channels are whole
 * vectors (p->vec_u): a row of U (or a vector of g_k) summed in registers
 * over the nk basis columns instead of through memory, in the same order. */
static inline __attribute__((always_inline)) void vedge_u_k(real *U, const struct plan *p, const real *F,
                                                            const real *xs, int k, int nk) {
  int cin = p->cin[k];
  for (int l = 0; l <= p->max_l; l++) {
    if (!p->cout[l]) continue;
    int nJ = 2 * imin(k, l) + 1;
    for (int i = 0; i < NN_DIM(l); i++)
      for (int J = 0; J < nJ; J++) {
        const real *f = F + (size_t)(p->row0[k][l] + i * nJ + J) * (size_t)nk;
        real *d = U + p->u_off[l] + (size_t)i * (size_t)p->K[l] + (size_t)(p->col0[l][k] + J * cin);
        for (int v = 0; v < cin; v += NL) {
          vreal a = vbc(0);
          UNROLL(7) for (int q = 0; q < nk; q++) a += vbc(f[q]) * vld(xs + q * cin + v);
          vst(d + v, a);
        }
      }
  }
}

static void vedge_u(real *U, const struct plan *p, const size_t *f_off, const real *const x[], const real *bas,
                    int src) {
  for (int k = 0; k <= p->max_l; k++) {
    int cin = p->cin[k], nk = NN_DIM(k);
    if (!cin) continue;
    const real *F = bas + f_off[k], *xs = x[k] + (size_t)src * (size_t)(nk * cin);
    switch (k) { /* nk fixed, so the sums over it unroll */
    case 0:
      vedge_u_k(U, p, F, xs, 0, 1);
      break;
    case 1:
      vedge_u_k(U, p, F, xs, 1, 3);
      break;
    case 2:
      vedge_u_k(U, p, F, xs, 2, 5);
      break;
    default:
      vedge_u_k(U, p, F, xs, 3, 7);
      break;
    }
  }
}

static inline __attribute__((always_inline)) void vedge_du_k(real *g, const struct plan *p, const real *F,
                                                             const real *dU, int k, int nk) {
  int cin = p->cin[k];
  for (int v = 0; v < cin; v += NL) {
    vreal a[NN_DIM(NN_MAX_DEG)];
    UNROLL(7) for (int q = 0; q < nk; q++) a[q] = vld(g + q * cin + v);
    for (int l = 0; l <= p->max_l; l++) {
      if (!p->cout[l]) continue;
      int nJ = 2 * imin(k, l) + 1;
      for (int i = 0; i < NN_DIM(l); i++)
        for (int J = 0; J < nJ; J++) {
          const real *f = F + (size_t)(p->row0[k][l] + i * nJ + J) * (size_t)nk;
          vreal d = vld(dU + p->u_off[l] + (size_t)i * (size_t)p->K[l] + (size_t)(p->col0[l][k] + J * cin) + (size_t)v);
          UNROLL(7) for (int q = 0; q < nk; q++) a[q] += vbc(f[q]) * d;
        }
    }
    UNROLL(7) for (int q = 0; q < nk; q++) vst(g + q * cin + v, a[q]);
  }
}

#ifndef SE3_CONV_BF16 /* the backward's */
static void vedge_du(real *const g[], const struct plan *p, const size_t *f_off, const real *dU, const real *bas) {
  for (int k = 0; k <= p->max_l; k++) {
    if (!p->cin[k] || !g[k]) continue;
    const real *F = bas + f_off[k];
    switch (k) {
    case 0:
      vedge_du_k(g[0], p, F, dU, 0, 1);
      break;
    case 1:
      vedge_du_k(g[1], p, F, dU, 1, 3);
      break;
    case 2:
      vedge_du_k(g[2], p, F, dU, 2, 5);
      break;
    default:
      vedge_du_k(g[3], p, F, dU, 3, 7);
      break;
    }
  }
}

#endif
#ifdef MASKED
/* ---- the generic tiles in masked vectors (AVX-512 or AVX2, float) -----------------
 * The generic bodies above for any channel count and H (the default model's
 * 8 channels and 16 radial features, which the fast tiles do not take):
 * vectors of MW columns (16 floats in AVX-512, 8 in AVX2), the last one
 * loaded and stored under a mask (a mask register, or vmaskmov), each
 * sum over the same terms in the same order as the body it replaces
 * (test_conv_float compares the forward and the gradients with the
 * baseline build's). One tile, mcontract_v, out[i][.] (+)= sum_j u[i][j]
 * r[j][.] for up to 8 rows i with any strides, serves six of the seven
 * bodies: as mrows (TE edges of radial weights: conv_tile_r, conv_tile_ro),
 * as mcontract (conv_contract, conv_contract_du) and as mouter (d W3 and
 * d s2: conv_dw_block, conv_ds2_block); mdr (conv_dr_rows) keeps the ni
 * rows of g in registers instead. */

#if defined(__AVX512F__)
typedef __m512 mvec;
typedef __mmask16 mmask;
#define MW 16 /* columns a vector */
#define MNV 2 /* vectors a row of a tile */
static inline mmask lanes_left(int left) { return left >= 16 ? (mmask)0xffff : (mmask)((1u << left) - 1); }
static inline mvec mload(mmask m, const real *p) { return _mm512_maskz_loadu_ps(m, p); }
static inline void mstore(real *p, mmask m, mvec v) { _mm512_mask_storeu_ps(p, m, v); }
static inline mvec mfma(mvec a, mvec b, mvec c) { return _mm512_fmadd_ps(a, b, c); }
static inline mvec mset1(real x) { return _mm512_set1_ps(x); }
static inline mvec mzero(void) { return _mm512_setzero_ps(); }
#else /* AVX2: 16 ymm registers, so a tile row is one vector (8 rows x 1 + operands) */
typedef __m256 mvec;
typedef __m256i mmask;
#define MW 8
#define MNV 1
static inline mmask lanes_left(int left) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(left), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
static inline mvec mload(mmask m, const real *p) { return _mm256_maskload_ps(p, m); }
static inline void mstore(real *p, mmask m, mvec v) { _mm256_maskstore_ps(p, m, v); }
static inline mvec mfma(mvec a, mvec b, mvec c) { return _mm256_fmadd_ps(a, b, c); }
static inline mvec mset1(real x) { return _mm256_set1_ps(x); }
static inline mvec mzero(void) { return _mm256_setzero_ps(); }
#endif

/* out[i * os + c] += sum_{j < n} u[i * us + j * uj] r[j * rs + c] for
 * i < ni (at most 8) and the nvo vectors of columns c from c0 (c < nc);
 * with zero, = instead of +=. */
static inline __attribute__((always_inline)) void mcontract_v(real *out, size_t os, const real *r, size_t rs,
                                                              const real *u, size_t us, size_t uj, int n, int nc,
                                                              int c0, int ni, int nvo, int zero) {
  mvec a[8][MNV];
  mmask m[MNV];
  UNROLL(MNV) for (int v = 0; v < nvo; v++) m[v] = lanes_left(nc - c0 - MW * v);
  UNROLL(8)
  for (int i = 0; i < ni; i++)
    UNROLL(MNV)
    for (int v = 0; v < nvo; v++) a[i][v] =
        zero ? mzero() : mload(m[v], out + (size_t)i * os + (size_t)(c0 + MW * v));
  for (int j = 0; j < n; j++) {
    mvec rv[MNV];
    UNROLL(MNV)
    for (int v = 0; v < nvo; v++)
      rv[v] = mload(m[v], r + (size_t)j * rs + (size_t)(c0 + MW * v));
    UNROLL(8) for (int i = 0; i < ni; i++) {
      mvec uv = mset1(u[(size_t)i * us + (size_t)j * uj]);
      UNROLL(MNV) for (int v = 0; v < nvo; v++) a[i][v] = mfma(uv, rv[v], a[i][v]);
    }
  }
  UNROLL(8)
  for (int i = 0; i < ni; i++)
    UNROLL(MNV)
    for (int v = 0; v < nvo; v++) mstore(out + (size_t)i * os + (size_t)(c0 + MW * v), m[v], a[i][v]);
}

/* out[e * os + c] = sum_h s[e * ss + h] w[h * ws + c] for e < TE. */
static inline void mrows(real *out, size_t os, const real *s, int ss, int H, const real *w, size_t ws, int nc) {
  for (int c0 = 0; c0 < nc; c0 += MW * MNV) {
    if (MNV == 2 && nc - c0 > MW)
      mcontract_v(out, os, w, ws, s, (size_t)ss, 1, H, nc, c0, TE, 2, 1);
    else
      mcontract_v(out, os, w, ws, s, (size_t)ss, 1, H, nc, c0, TE, 1, 1);
  }
}

static inline __attribute__((always_inline)) void mcontract_n(real *out, size_t os, const real *r, size_t rs,
                                                              const real *u, size_t us, int n, int nc, int ni,
                                                              int zero) {
  for (int c0 = 0; c0 < nc; c0 += MW * MNV) {
    if (MNV == 2 && nc - c0 > MW)
      mcontract_v(out, os, r, rs, u, us, 1, n, nc, c0, ni, 2, zero);
    else
      mcontract_v(out, os, r, rs, u, us, 1, n, nc, c0, ni, 1, zero);
  }
}

static inline __attribute__((always_inline)) void mcontract_any(real *out, size_t os, const real *r, size_t rs,
                                                                const real *u, size_t us, int n, int nc, int ni,
                                                                int zero) {
  switch (ni) { /* the rows fixed, so the sums stay in registers */
  case 1:
    mcontract_n(out, os, r, rs, u, us, n, nc, 1, zero);
    break;
  case 3:
    mcontract_n(out, os, r, rs, u, us, n, nc, 3, zero);
    break;
  case 5:
    mcontract_n(out, os, r, rs, u, us, n, nc, 5, zero);
    break;
  default:
    mcontract_n(out, os, r, rs, u, us, n, nc, 7, zero);
    break;
  }
}

/* acc[q * as + c] += sum_{e < ne} a[e * aes + q * aqs] b[e * bes + c] for
 * every q < nq, 8 rows at a time (then one by one): mcontract_v's sums with
 * a's strides. */
static inline void mouter(real *acc, size_t as, const real *a, size_t aes, size_t aqs, const real *b, size_t bes,
                          int ne, int nc, int nq) {
  for (int c0 = 0; c0 < nc; c0 += MW * MNV) {
    int two = MNV == 2 && nc - c0 > MW, q = 0;
    for (; q + 8 <= nq; q += 8) {
      real *d = acc + (size_t)q * as;
      const real *aq = a + (size_t)q * aqs;
      if (two)
        mcontract_v(d, as, b, bes, aq, aqs, aes, ne, nc, c0, 8, 2, 0);
      else
        mcontract_v(d, as, b, bes, aq, aqs, aes, ne, nc, c0, 8, 1, 0);
    }
    for (; q < nq; q++) {
      real *d = acc + (size_t)q * as;
      const real *aq = a + (size_t)q * aqs;
      if (two)
        mcontract_v(d, as, b, bes, aq, aqs, aes, ne, nc, c0, 1, 2, 0);
      else
        mcontract_v(d, as, b, bes, aq, aqs, aes, ne, nc, c0, 1, 1, 0);
    }
  }
}

/* The seven bodies, with the generic bodies' arguments. */
static inline void mtile_r(real *Rb, const real *s2, int H, const real *wt, int cout, int jn) {
  for (int jj = 0; jj < jn; jj++)
    mrows(Rb + (size_t)jj * (size_t)cout, JB * (size_t)cout, s2, H, H, wt + (size_t)jj * (size_t)H * (size_t)cout,
          (size_t)cout, cout);
}

static inline void mtile_ro(real *Rb, const real *s2, int H, const real *wo, int cout, int jn) {
  for (int o = 0; o < cout; o++)
    mrows(Rb + (size_t)o * JV, (size_t)cout * JV, s2, H, H, wo + (size_t)o * (size_t)H * (size_t)jn, (size_t)jn, jn);
}

static inline __attribute__((always_inline)) void mcontract(real *out, const real *Rb, const real *U, int K, int jn,
                                                            int cout, int ni) {
  mcontract_any(out, (size_t)cout, Rb, (size_t)cout, U, (size_t)K, jn, cout, ni, 0);
}

static inline __attribute__((always_inline)) void mcontract_du(real *dU, const real *Rb, const real *g, int K, int jn,
                                                               int cout, int ni) {
  mcontract_any(dU, (size_t)K, Rb, JV, g, (size_t)cout, cout, jn, ni, 1);
}

/* DR[jj][o] = sum_i U[i][jj] g[i][o] (conv_dr_rows): the ni rows of g in
 * registers, nvo vectors of channels from oc. */
static inline __attribute__((always_inline)) void mdr_v(real *DR, const real *g, const real *U, int K, int jn, int cout,
                                                        int oc, int ni, int nvo) {
  mvec gr[NN_DIM(NN_MAX_DEG)][MNV];
  mmask m[MNV];
  UNROLL(MNV) for (int v = 0; v < nvo; v++) m[v] = lanes_left(cout - oc - MW * v);
  UNROLL(7)
  for (int i = 0; i < ni; i++)
    UNROLL(MNV)
    for (int v = 0; v < nvo; v++) gr[i][v] =
        mload(m[v], g + (size_t)i * (size_t)cout + (size_t)(oc + MW * v));
  for (int jj = 0; jj < jn; jj++) {
    mvec d[MNV];
    UNROLL(MNV) for (int v = 0; v < nvo; v++) d[v] = mzero();
    UNROLL(7) for (int i = 0; i < ni; i++) {
      mvec u = mset1(U[(size_t)i * (size_t)K + (size_t)jj]);
      UNROLL(MNV) for (int v = 0; v < nvo; v++) d[v] = mfma(u, gr[i][v], d[v]);
    }
    UNROLL(MNV)
    for (int v = 0; v < nvo; v++)
      mstore(DR + (size_t)jj * (size_t)cout + (size_t)(oc + MW * v), m[v], d[v]);
  }
}

static inline __attribute__((always_inline)) void mdr_n(real *DR, const real *g, const real *U, int K, int jn, int cout,
                                                        int ni) {
  for (int oc = 0; oc < cout; oc += MW * MNV) {
    if (MNV == 2 && cout - oc > MW)
      mdr_v(DR, g, U, K, jn, cout, oc, ni, 2);
    else
      mdr_v(DR, g, U, K, jn, cout, oc, ni, 1);
  }
}

static inline __attribute__((always_inline)) void mdr_rows(real *DR, const real *g, const real *U, int K, int jn,
                                                           int cout, int ni) {
  switch (ni) {
  case 1:
    mdr_n(DR, g, U, K, jn, cout, 1);
    break;
  case 3:
    mdr_n(DR, g, U, K, jn, cout, 3);
    break;
  case 5:
    mdr_n(DR, g, U, K, jn, cout, 5);
    break;
  default:
    mdr_n(DR, g, U, K, jn, cout, 7);
    break;
  }
}

static inline void mdw_block(real *dW, const real *DR, const real *s2, int ne, int H, int cout, int jn) {
  for (int jj = 0; jj < jn; jj++) /* dW[jj][h][o] += sum_e s2[e][h] DR[e][jj][o] */
    mouter(dW + (size_t)jj * (size_t)H * (size_t)cout, (size_t)cout, s2, (size_t)H, 1, DR + (size_t)jj * (size_t)cout,
           JB * (size_t)cout, ne, cout, H);
}

/* ds2[e][h] += sum_{jj, o} DR[e][jj][o] W[jj][o][h]: (jj, o) one index r,
 * jj * cout + o, in DR's rows and W's. */
static inline void mds2_block(real *ds2, const real *DR, const real *W, int ne, int H, int cout, int jn) {
  mouter(ds2, (size_t)H, DR, 1, JB * (size_t)cout, W, (size_t)H, jn * cout, H, ne);
}
#endif
#ifdef SE3_CONV_BF16
/* ---- the bf16 forward ------------------------------------------------------------
 * The radial weights R = s2 W3 with s2 and W3 rounded to bf16 and the sums
 * in fp32: vdpbf16ps adds two products a lane (an adjacent pair of radial
 * features h, h+1) per instruction, twice the products of an fp32 FMA.
 * Everything else (U, the contraction with U, the outputs) stays fp32. Any
 * H (an odd one gets a zero feature) and any channel count (vectors of 16
 * channels, the last one stored under a mask). */

/* s2 of the chunk's np edges (H reals a row) as bf16 pairs (H2 words a row). */
static void pack_s2_bf16(uint32_t *sb, const real *s2, int np, int H, int H2) {
  for (int e = 0; e < np; e++)
    for (int q = 0; q < H2; q++) {
      const real *r = s2 + (size_t)e * (size_t)H;
      uint32_t lo = nn_bf16_bits(r[2 * q]), hi = 2 * q + 1 < H ? nn_bf16_bits(r[2 * q + 1]) : 0;
      sb[(size_t)e * (size_t)H2 + (size_t)q] = lo | hi << 16;
    }
}

/* W3 (rows o K_l + j, H columns) to W3P_l[j][h2][o] (plan.wb_off), the
 * padding channels zero. */
static void pack_w3_bf16(uint32_t *wb, const struct plan *p, const real *W3) {
  for (int l = 0; l <= p->max_l; l++) {
    int cout = p->cout[l], K = p->K[l], H = p->H, H2 = p->H2, op = p->opad[l];
    if (!cout) continue;
#pragma omp parallel for schedule(static)
    for (int j = 0; j < K; j++)
      for (int q = 0; q < H2; q++) {
        uint32_t *d = wb + p->wb_off[l] + ((size_t)j * (size_t)H2 + (size_t)q) * (size_t)op;
        for (int o = 0; o < op; o++) {
          uint32_t w = 0;
          if (o < cout) {
            const real *src = W3 + (p->r_off[l] + (size_t)o * (size_t)K + (size_t)j) * (size_t)H;
            w = nn_bf16_bits(src[2 * q]) | (2 * q + 1 < H ? (uint32_t)nn_bf16_bits(src[2 * q + 1]) << 16 : 0);
          }
          d[o] = w;
        }
      }
  }
}

/* TE edges x NVO vectors of 16 channels from oc: Rb[e][jj][oc + .] =
 * sum_q s2 pair (e, q) . W3 pair (q, oc + .), on channels < cout. */
static inline __attribute__((always_inline)) void btile(real *Rb, const uint32_t *sb, int H2, const uint32_t *w, int op,
                                                        int cout, int oc, int jj, int nvo) {
  __m512 a[TE][2];
  UNROLL(8) for (int e = 0; e < TE; e++) UNROLL(2) for (int v = 0; v < nvo; v++) a[e][v] = _mm512_setzero_ps();
  for (int q = 0; q < H2; q++) {
    __m512bh wv[2];
    UNROLL(2)
    for (int v = 0; v < nvo; v++)
      wv[v] = (__m512bh)_mm512_loadu_si512(w + (size_t)q * (size_t)op + (size_t)(oc + 16 * v));
    UNROLL(8) for (int e = 0; e < TE; e++) {
      __m512bh sv = (__m512bh)_mm512_set1_epi32((int)sb[e * H2 + q]);
      UNROLL(2) for (int v = 0; v < nvo; v++) a[e][v] = _mm512_dpbf16_ps(a[e][v], sv, wv[v]);
    }
  }
  UNROLL(2) for (int v = 0; v < nvo; v++) {
    int left = cout - oc - 16 * v;
    __mmask16 m = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
    UNROLL(8)
    for (int e = 0; e < TE; e++)
      _mm512_mask_storeu_ps(Rb + ((size_t)e * JB + (size_t)jj) * (size_t)cout + (size_t)(oc + 16 * v), m, a[e][v]);
  }
}

/* conv_tile_r's Rb from bf16 pairs: jn <= JB columns of W3P_l from j0 (w). */
static void btile_r(real *Rb, const uint32_t *sb, int H2, const uint32_t *w, int op, int cout, int jn) {
  for (int jj = 0; jj < jn; jj++) {
    const uint32_t *wj = w + (size_t)jj * (size_t)H2 * (size_t)op;
    for (int oc = 0; oc < cout; oc += 32) {
      if (cout - oc > 16)
        btile(Rb, sb, H2, wj, op, cout, oc, jj, 2);
      else
        btile(Rb, sb, H2, wj, op, cout, oc, jj, 1);
    }
  }
}
#endif

/* ---- chunks ------------------------------------------------------------------ */

/* Per-thread buffers for a chunk of up to CE edges. */
struct chunk_buf {
  real *U, *s2, *y, *g, *dU, *ds2, *Rb, *DR; /* Rb: one tile's radial weights; DR: the chunk's dR block */
  uint32_t *sb;                              /* the bf16 forward's s2 as pairs (H2 words an edge) */
};

static int chunk_alloc(struct chunk_buf *c, const struct plan *p, int backward) {
  memset(c, 0, sizeof *c);
  size_t u = (size_t)CE * p->usize + 1, s = (size_t)CE * (size_t)p->H + 1, y = (size_t)CE * p->ysize + 1;
  c->U = malloc(u * sizeof(real));
  c->s2 = malloc(s * sizeof(real));
  c->y = malloc(y * sizeof(real));
  size_t rb = (size_t)TE * (size_t)(JB > JV ? JB : JV) * (size_t)p->max_cout + 1;
  c->Rb = malloc(rb * sizeof(real));
  if (!c->Rb) return -1;
#ifdef SE3_CONV_BF16
  c->sb = malloc(((size_t)CE * (size_t)p->H2 + 1) * sizeof *c->sb);
  if (!c->sb) return -1;
#endif
  if (backward) {
    c->g = c->y;
    c->dU = malloc(u * sizeof(real));
    c->ds2 = malloc(s * sizeof(real));
    c->DR = malloc(((size_t)CE * JB * (size_t)p->max_cout + 1) * sizeof(real));
    if (!c->DR) return -1;
  }
  return c->U && c->s2 && c->y && (!backward || (c->dU && c->ds2)) ? 0 : -1;
}

static void chunk_free(struct chunk_buf *c) {
  free(c->U);
  free(c->s2);
  free(c->y);
  free(c->dU);
  free(c->ds2);
  free(c->Rb);
  free(c->DR);
  free(c->sb);
}

static void fused_offsets(size_t *f_off, const struct nn_conv_shape *s) {
  for (int k = 0; k <= NN_MAX_DEG; k++)
    f_off[k] = k <= s->plan->max_degree ? s->plan->offset[k][0] : 0;
}

/* U and s2 of edges e0..e0+n-1 into the chunk, zero-padded to a whole tile. */
static void chunk_load(struct chunk_buf *c, const struct plan *p, const size_t *f_off, const struct nn_conv_shape *s,
                       const real *const x[], const real *basis, const real *s2, int e0, int n) {
  int np = (n + TE - 1) / TE * TE;
  for (int i = 0; i < n; i++)
    (p->vec_u ? vedge_u : conv_edge_u)(c->U + (size_t)i * p->usize, p, f_off, x,
                                       basis + (size_t)(e0 + i) * s->plan->per_edge, s->src[e0 + i]);
  memcpy(c->s2, s2 + (size_t)e0 * (size_t)p->H, (size_t)n * (size_t)p->H * sizeof(real));
  memset(c->U + (size_t)n * p->usize, 0, (size_t)(np - n) * p->usize * sizeof(real));
  memset(c->s2 + (size_t)n * (size_t)p->H, 0, (size_t)(np - n) * (size_t)p->H * sizeof(real));
#ifdef SE3_CONV_BF16
  pack_s2_bf16(c->sb, c->s2, np, p->H, p->H2);
#endif
}

/* The per-edge steps with the number of rows ni (2l+1) and of columns fixed
 * at compile time in the fast case, so their sums stay in registers: one
 * dispatcher per body, all with the same arguments. */
#define ROWS_DISPATCH(name, body, vbody)                                                                               \
  __attribute__((noinline)) static void name(real *a, const real *b, const real *c, int K, int jn, int cout, int ni,   \
                                             int fast) {                                                               \
    if (!fast)                                                                                                         \
      body(a, b, c, K, jn, cout, ni);                                                                                  \
    else if (ni == 1)                                                                                                  \
      vbody(a, b, c, K, cout, 1);                                                                                      \
    else if (ni == 3)                                                                                                  \
      vbody(a, b, c, K, cout, 3);                                                                                      \
    else if (ni == 5)                                                                                                  \
      vbody(a, b, c, K, cout, 5);                                                                                      \
    else                                                                                                               \
      vbody(a, b, c, K, cout, 7);                                                                                      \
  }
#ifdef MASKED
ROWS_DISPATCH(contract_rows, mcontract, vcontract) /* out, Rb, U */
#else
ROWS_DISPATCH(contract_rows, conv_contract, vcontract) /* out, Rb, U */
#endif
#ifndef SE3_CONV_BF16
#ifdef MASKED
ROWS_DISPATCH(dr_rows, mdr_rows, vdr_rows)                  /* DR, g, U */
ROWS_DISPATCH(contract_du_rows, mcontract_du, vcontract_du) /* dU, Rb, g */
#else
ROWS_DISPATCH(dr_rows, conv_dr_rows, vdr_rows)                  /* DR, g, U */
ROWS_DISPATCH(contract_du_rows, conv_contract_du, vcontract_du) /* dU, Rb, g */
#endif
#endif

/* wt: W3T (fp32), or W3P (bf16 pairs) in the bf16 build. */
static void chunk_forward(struct chunk_buf *c, const struct plan *p, const void *wt, int n) {
  int np = (n + TE - 1) / TE * TE;
  memset(c->y, 0, (size_t)np * p->ysize * sizeof(real));
  for (int l = 0; l <= p->max_l; l++) {
    int cout = p->cout[l], K = p->K[l], ni = NN_DIM(l);
    if (!cout) continue;
    for (int j0 = 0; j0 < K; j0 += JB) {
      int jn = imin(JB, K - j0), fast = p->fast && jn == JB;
#ifdef SE3_CONV_BF16
      const uint32_t *w = (const uint32_t *)wt + p->wb_off[l] + (size_t)j0 * (size_t)p->H2 * (size_t)p->opad[l];
#else
      const real *w = (const real *)wt + p->wt_off[l] + (size_t)j0 * (size_t)p->H * (size_t)cout;
#endif
      for (int e = 0; e < np; e += TE) {
#ifdef SE3_CONV_BF16
        btile_r(c->Rb, c->sb + (size_t)e * (size_t)p->H2, p->H2, w, p->opad[l], cout, jn);
#else
        const real *s2 = c->s2 + (size_t)e * (size_t)p->H;
        if (fast)
          vtile_r(c->Rb, s2, w, cout);
        else
#ifdef MASKED
          mtile_r(c->Rb, s2, p->H, w, cout, jn);
#else
          conv_tile_r(c->Rb, s2, p->H, w, cout, jn);
#endif
#endif
        for (int q = 0; q < TE && e + q < n; q++)
          contract_rows(c->y + (size_t)(e + q) * p->ysize + p->y_off[l], c->Rb + (size_t)q * JB * (size_t)cout,
                        c->U + (size_t)(e + q) * p->usize + p->u_off[l] + j0, K, jn, cout, ni, fast);
      }
    }
  }
}

#ifndef SE3_CONV_BF16 /* which packs W3 its own way (pack_w3_bf16) */
/* W3 (rows o K_l + j per degree, H columns) to W3T_l[j][h][o] (wt, for the
 * forward) or W3J_l[j][o][h] and W3O_l (wj and wo, for the backward); all
 * at the offsets wt_off. W3O_l is in blocks of JV columns j0.., each
 * [o][h][j - j0] with rows jw = min(JV, K_l - j0) wide and starting at
 * j0 H cout, so that a block's tiles read contiguous memory. */
static void transpose_w3(real *wt, real *wj, real *wo, const struct plan *p, const real *W3) {
  for (int l = 0; l <= p->max_l; l++) {
    int cout = p->cout[l], K = p->K[l], H = p->H;
    if (!cout) continue;
#pragma omp parallel for schedule(static)
    for (int j = 0; j < K; j++)
      for (int o = 0; o < cout; o++) {
        const real *src = W3 + (p->r_off[l] + (size_t)o * (size_t)K + (size_t)j) * (size_t)H;
        if (wt) {
          real *dst = wt + p->wt_off[l] + (size_t)j * (size_t)H * (size_t)cout + o;
          for (int h = 0; h < H; h++)
            dst[(size_t)h * (size_t)cout] = src[h];
        }
        if (wj)
          memcpy(wj + p->wt_off[l] + ((size_t)j * (size_t)cout + (size_t)o) * (size_t)H, src, (size_t)H * sizeof *wj);
        if (wo) {
          int j0 = j / JV * JV, jw = imin(JV, K - j0);
          real *dst = wo + p->wt_off[l] + (size_t)j0 * (size_t)H * (size_t)cout + (size_t)(j - j0);
          for (int h = 0; h < H; h++)
            dst[((size_t)o * (size_t)H + (size_t)h) * (size_t)jw] = src[h];
        }
      }
  }
}
#endif

#ifndef SE3_CONV_BF16 /* the backward's */
static int n_threads(void) {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

#endif
static int team_size(void) {
#ifdef _OPENMP
  return omp_get_num_threads();
#else
  return 1;
#endif
}

static int thread_id(void) {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}

/* Edge range of thread t of nt: per edge, or whole target nodes when pooled. */
static void edge_range(const struct nn_conv_shape *s, int pool, int t, int nt, int *e0, int *e1, int *n0, int *n1) {
  if (!pool) {
    *e0 = (int)((long)s->E * t / nt);
    *e1 = (int)((long)s->E * (t + 1) / nt);
    *n0 = *n1 = 0;
    return;
  }
  /* the first node whose incoming edges start at or after the cut */
  int cut[2] = {(int)((long)s->E * t / nt), (int)((long)s->E * (t + 1) / nt)}, nb[2];
  for (int q = 0; q < 2; q++) {
    int lo = 0, hi = s->N;
    while (lo < hi) {
      int mid = (lo + hi) / 2;
      if (s->in_start[mid] < cut[q])
        lo = mid + 1;
      else
        hi = mid;
    }
    nb[q] = lo;
  }
  if (t == nt - 1) nb[1] = s->N;
  if (t == 0) nb[0] = 0;
  *n0 = nb[0];
  *n1 = nb[1];
  *e0 = s->in_start[nb[0]];
  *e1 = s->in_start[nb[1]];
}

int nn_conv_forward(real *const y[], const struct nn_conv_shape *s, const real *const x[], const real *basis,
                    const real *s2, const real *W3, int H, int pool) {
  struct plan p;
  make_plan(&p, s, H);
  size_t f_off[NN_MAX_DEG + 1];
  fused_offsets(f_off, s);
#ifdef SE3_CONV_BF16
  uint32_t *wt = malloc((p.wb_size + 1) * sizeof *wt);
  if (!wt) return -1;
  pack_w3_bf16(wt, &p, W3);
#else
  real *wt = malloc((p.wt_size + 1) * sizeof *wt);
  if (!wt) return -1;
  transpose_w3(wt, NULL, NULL, &p, W3);
#endif
  int fail = 0;
#pragma omp parallel reduction(| : fail)
  {
    int t = thread_id(), e0, e1, n0, n1;
    edge_range(s, pool, t, team_size(), &e0, &e1, &n0, &n1);
    struct chunk_buf c;
    if (chunk_alloc(&c, &p, 0)) {
      fail = 1;
    } else {
      if (pool)
        for (int l = 0; l <= p.max_l; l++)
          if (p.cout[l])
            memset(y[l] + (size_t)n0 * (size_t)(NN_DIM(l) * p.cout[l]), 0,
                   (size_t)(n1 - n0) * (size_t)(NN_DIM(l) * p.cout[l]) * sizeof(real));
      int dst = n0; /* the target of the edge at hand, when pooled */
      for (int a = e0; a < e1; a += CE) {
        int n = imin(CE, e1 - a);
        chunk_load(&c, &p, f_off, s, x, basis, s2, a, n);
        chunk_forward(&c, &p, wt, n);
        for (int i = 0; i < n; i++) {
          int e = a + i;
          if (pool)
            while (s->in_start[dst + 1] <= e)
              dst++;
          for (int l = 0; l <= p.max_l; l++) {
            if (!p.cout[l]) continue;
            size_t w = (size_t)(NN_DIM(l) * p.cout[l]);
            const real *src = c.y + (size_t)i * p.ysize + p.y_off[l];
            if (pool) {
              real *d = y[l] + (size_t)dst * w;
              for (size_t q = 0; q < w; q++)
                d[q] += src[q];
            } else {
              memcpy(y[l] + (size_t)e * w, src, w * sizeof(real));
            }
          }
        }
      }
    }
    chunk_free(&c);
  }
  free(wt);
  return fail ? -1 : 0;
}

#ifndef SE3_CONV_BF16 /* the bf16 build is the forward's only */
/* nn_conv_backward's last step: the threads' sums, in thread order, into
 * dx (dxt: a thread's N rows of xw, degree k's at xo[k] in each) and added
 * into dW3 (dwt: a thread's p->wt_size, as transpose_w3 lays W3 out). */
static void backward_sums(real *const dx[], real *dW3, const struct nn_conv_shape *s, const struct plan *p, int H,
                          int team, const real *dxt, size_t xw, const size_t *xo, const real *dwt) {
  for (int k = 0; k <= NN_MAX_DEG; k++) {
    if (!p->cin[k] || !dx[k]) continue;
    size_t w = (size_t)(NN_DIM(k) * p->cin[k]);
#pragma omp parallel for schedule(static)
    for (int v = 0; v < s->N; v++) {
      real *d = dx[k] + (size_t)v * w;
      for (size_t q = 0; q < w; q++)
        d[q] = 0;
      for (int t = 0; t < team; t++) {
        const real *src = dxt + ((size_t)t * (size_t)s->N + (size_t)v) * xw + xo[k];
        for (size_t q = 0; q < w; q++)
          d[q] += src[q];
      }
    }
  }
  if (dW3)
    for (int l = 0; l <= p->max_l; l++) {
      int cout = p->cout[l], K = p->K[l];
      if (!cout) continue;
#pragma omp parallel for schedule(static)
      for (int j = 0; j < K; j++)
        for (int o = 0; o < cout; o++) {
          real *d = dW3 + (p->r_off[l] + (size_t)o * (size_t)K + (size_t)j) * (size_t)H;
          for (int h = 0; h < H; h++) {
            size_t q = p->wt_off[l] + ((size_t)j * (size_t)H + (size_t)h) * (size_t)cout + (size_t)o;
            real sum = 0;
            for (int t = 0; t < team; t++)
              sum += dwt[(size_t)t * p->wt_size + q];
            d[h] += sum;
          }
        }
    }
}

int nn_conv_backward(real *const dx[], real *ds2, real *dW3, const struct nn_conv_shape *s, const real *const dy[],
                     const real *const x[], const real *basis, const real *s2, const real *W3, int H, int pool) {
  struct plan p;
  make_plan(&p, s, H);
  size_t f_off[NN_MAX_DEG + 1];
  fused_offsets(f_off, s);
  int nt = n_threads();
  size_t xw = 0, xo[NN_MAX_DEG + 1] = {0}; /* one node's input rows of every degree, in a thread's dx */
  for (int k = 0; k <= NN_MAX_DEG; k++) {
    xo[k] = xw;
    xw += (size_t)(NN_DIM(k) * p.cin[k]);
  }
  real *wj = malloc((2 * p.wt_size + 1) * sizeof *wj), *wo3 = wj + p.wt_size;
  real *dwt = calloc((size_t)nt * p.wt_size + 1, sizeof *dwt);
  real *dxt = calloc((size_t)nt * (size_t)s->N * xw + 1, sizeof *dxt);
  int32_t *dst = malloc(((size_t)s->E + 1) * sizeof *dst);
  if (!wj || !dwt || !dxt || !dst) {
    free(wj);
    free(dwt);
    free(dxt);
    free(dst);
    return -1;
  }
  transpose_w3(NULL, wj, wo3, &p, W3);
  for (int n = 0; n < s->N; n++)
    for (int e = s->in_start[n]; e < s->in_start[n + 1]; e++)
      dst[e] = n;
  int fail = 0, team = 1;
#pragma omp parallel num_threads(nt) reduction(| : fail)
  {
    int t = thread_id(), e0, e1, n0, n1;
#pragma omp single
    team = team_size();
    edge_range(s, 0, t, team, &e0, &e1, &n0, &n1);
    real *my_dwt = dwt + (size_t)t * p.wt_size, *my_dx = dxt + (size_t)t * (size_t)s->N * xw;
    struct chunk_buf c;
    if (chunk_alloc(&c, &p, 1)) {
      fail = 1;
    } else {
      for (int a = e0; a < e1; a += CE) {
        int n = imin(CE, e1 - a), np = (n + TE - 1) / TE * TE;
        chunk_load(&c, &p, f_off, s, x, basis, s2, a, n);
        /* the output gradient of each edge, zero-padded */
        for (int i = 0; i < np; i++)
          for (int l = 0; l <= p.max_l; l++) {
            if (!p.cout[l]) continue;
            size_t w = (size_t)(NN_DIM(l) * p.cout[l]);
            real *gd = c.g + (size_t)i * p.ysize + p.y_off[l];
            if (i < n)
              memcpy(gd, dy[l] + (size_t)(pool ? dst[a + i] : a + i) * w, w * sizeof(real));
            else
              memset(gd, 0, w * sizeof(real));
          }
        memset(c.ds2, 0, (size_t)np * (size_t)H * sizeof(real));
        for (int l = 0; l <= p.max_l; l++) {
          int cout = p.cout[l], K = p.K[l], ni = NN_DIM(l);
          if (!cout) continue;
          for (int j0 = 0; j0 < K; j0 += JV) { /* d U, JV columns at a time */
            int jn = imin(JV, K - j0), fast = p.fast && jn == JV;
            const real *wo = wo3 + p.wt_off[l] + (size_t)j0 * (size_t)H * (size_t)cout;
            for (int e = 0; e < np; e += TE) {
              const real *sv = c.s2 + (size_t)e * (size_t)H;
              if (fast)
                vtile_ro(c.Rb, sv, wo, cout);
              else
#ifdef MASKED
                mtile_ro(c.Rb, sv, H, wo, cout, jn);
#else
                conv_tile_ro(c.Rb, sv, H, wo, cout, jn);
#endif
              for (int q = 0; q < TE && e + q < n; q++)
                contract_du_rows(c.dU + (size_t)(e + q) * p.usize + p.u_off[l] + (size_t)j0,
                                 c.Rb + (size_t)q * (size_t)cout * JV, c.g + (size_t)(e + q) * p.ysize + p.y_off[l], K,
                                 jn, cout, ni, fast);
            }
          }
          for (int j0 = 0; j0 < K; j0 += JB) { /* d s2 and d W3, JB columns at a time */
            int jn = imin(JB, K - j0), fast = p.fast && jn == JB;
            size_t wo = p.wt_off[l] + (size_t)j0 * (size_t)H * (size_t)cout;
            for (int q = 0; q < np; q++)
              dr_rows(c.DR + (size_t)q * JB * (size_t)cout, c.g + (size_t)q * p.ysize + p.y_off[l],
                      c.U + (size_t)q * p.usize + p.u_off[l] + (size_t)j0, K, jn, cout, ni, fast);
            if (fast && cout == 32) { /* the strides as constants, so no register holds them */
              vdw_block(my_dwt + wo, c.DR, c.s2, np, 32);
              vds2_block(c.ds2, c.DR, wj + wo, np, 32);
            } else if (fast) {
              vdw_block(my_dwt + wo, c.DR, c.s2, np, cout);
              vds2_block(c.ds2, c.DR, wj + wo, np, cout);
            } else {
#ifdef MASKED
              mdw_block(my_dwt + wo, c.DR, c.s2, np, H, cout, jn);
              mds2_block(c.ds2, c.DR, wj + wo, np, H, cout, jn);
#else
              conv_dw_block(my_dwt + wo, c.DR, c.s2, np, H, cout, jn);
              conv_ds2_block(c.ds2, c.DR, wj + wo, np, H, cout, jn);
#endif
            }
          }
        }
        for (int i = 0; i < n; i++) {
          int e = a + i;
          real *g[NN_MAX_DEG + 1] = {0};
          for (int k = 0; k <= NN_MAX_DEG; k++)
            if (p.cin[k] && dx[k]) g[k] = my_dx + (size_t)s->src[e] * xw + xo[k];
          (p.vec_u ? vedge_du : conv_edge_du)(g, &p, f_off, c.dU + (size_t)i * p.usize,
                                              basis + (size_t)e * s->plan->per_edge);
          if (ds2) memcpy(ds2 + (size_t)e * (size_t)H, c.ds2 + (size_t)i * (size_t)H, (size_t)H * sizeof(real));
        }
      }
    }
    chunk_free(&c);
  }
  /* the threads' sums, in thread order */
  backward_sums(dx, dW3, s, &p, H, team, dxt, xw, xo, dwt);
  free(wj);
  free(dwt);
  free(dxt);
  free(dst);
  return fail ? -1 : 0;
}
#endif
