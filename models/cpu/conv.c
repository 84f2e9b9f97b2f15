/* conv.c — the TFN convolution fused with the last layer of its radial
 * network (nn.h has the contract).
 *
 * Per edge e and output degree l,
 *   out_l[e, i, o] = sum_j R_l[e, o, j] U_l[e, i, j],
 *   R_l[e, o, j]   = sum_h s2[e, h] W3[(o, j), h],
 * where row i of U_l is the rows (l, i, .) of every T_k = F_k x_k(src) side
 * by side: columns (k, J', c), the column order of R_l. R (45,056 reals per
 * edge at the QM9 settings) is never stored. For one column j at a time, a
 * tile of TE edges computes R_l[., ., j] in registers, as vectors over the
 * output channels o (from W3 transposed to [j][h][o]), and at once adds
 * U_l[e, i, j] R_l[e, ., j] to the tile's outputs. The backward recomputes
 * the same tile and derives d U, d s2 and d W3 from it; F_k^T turns d U into
 * d x.
 *
 * Work is cut into chunks of CE consecutive edges whose U, outputs and
 * gradients stay in cache. The tile bodies are SE3_HD functions (models/
 * so3.h) over plain arrays; the fast variants are the same bodies with the
 * channel counts fixed (OC output channels, 32 radial features), which lets
 * the compiler keep a tile in vector registers.
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

#include "models/cpu/nn.h"
#include "models/so3.h"

#define TE 8  /* edges per register tile */
#define OC 32 /* output channels per register tile */
#define HF 32 /* radial features of the fast tiles */
#define CE 64 /* edges per chunk (a multiple of TE) */

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

int nn_conv_generic_only = 0;

static int imin(int a, int b) { return a < b ? a : b; }

int nn_fiber_width(const struct nn_fiber *f) {
  int w = 0;
  for (int d = 0; d <= NN_MAX_DEG; d++)
    w += f->ch[d] * NN_DIM(d);
  return w;
}

/* Columns of R_l: sum over input degrees k of (2 min(k,l)+1) fin.ch[k]. */
static int radial_cols(const struct nn_fiber *fin, int l) {
  int K = 0;
  for (int k = 0; k <= NN_MAX_DEG; k++)
    K += (2 * imin(k, l) + 1) * fin->ch[k];
  return K;
}

size_t nn_conv_radial_size(const struct nn_fiber *fin, const struct nn_fiber *fout) {
  size_t n = 0;
  for (int l = 0; l <= NN_MAX_DEG; l++)
    n += (size_t)fout->ch[l] * (size_t)radial_cols(fin, l);
  return n;
}

double nn_conv_flops(const struct nn_fiber *fin, const struct nn_fiber *fout, const struct basis_plan *plan, int H) {
  double f = 0;
  for (int l = 0; l <= NN_MAX_DEG; l++) /* R_l (2H per entry) and its contraction (2 (2l+1) per entry) */
    f += (double)fout->ch[l] * radial_cols(fin, l) * (2.0 * H + 2.0 * NN_DIM(l));
  for (int k = 0; k <= NN_MAX_DEG && k <= plan->max_degree; k++) /* T_k = F_k x_k */
    f += 2.0 * (double)plan->fused_rows[k] * NN_DIM(k) * fin->ch[k];
  return f;
}

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
  int max_l, fast;
};

static void make_plan(struct plan *p, const struct nn_conv_shape *s, int H) {
  memset(p, 0, sizeof *p);
  p->H = H;
  p->max_l = s->plan->max_degree < NN_MAX_DEG ? s->plan->max_degree : NN_MAX_DEG;
  p->fast = !nn_conv_generic_only && H == HF;
  for (int d = 0; d <= NN_MAX_DEG; d++) {
    p->cin[d] = d <= p->max_l ? s->fin.ch[d] : 0;
    p->cout[d] = d <= p->max_l ? s->fout.ch[d] : 0;
    if (p->cout[d] % OC) p->fast = 0;
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
    p->K[l] = radial_cols(&s->fin, l);
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
  }
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

/* Forward tile, one column j of R_l, TE edges: out[e][i][o] += U[e][i] R[e][o]
 * with R[e][o] = sum_h s2[e][h] wt[h][o]. s2: TE x H; wt: H x cout (the
 * column's block of W3T); U: element j of row 0 of the edge's U_l (rows K
 * apart, edges ustr apart); out: the edge's degree-l rows (edges ostr apart).
 * fast: cout a multiple of OC and H = HF, fixed at compile time. */
SE3_HD static inline __attribute__((always_inline)) void conv_tile_fwd(real *out, size_t ostr, const real *s2, int H,
                                                                       const real *wt, int cout, const real *U,
                                                                       size_t ustr, int K, int ni, int fast) {
  int hh = fast ? HF : H;
  for (int oc = 0; oc < cout; oc += OC) {
    int on = fast ? OC : imin(OC, cout - oc);
    real r[TE][OC];
    for (int e = 0; e < TE; e++)
      for (int o = 0; o < on; o++)
        r[e][o] = 0;
    for (int h = 0; h < hh; h++) {
      const real *w = wt + (size_t)h * (size_t)cout + oc;
      for (int e = 0; e < TE; e++) {
        real sv = s2[e * hh + h];
        for (int o = 0; o < on; o++)
          r[e][o] += sv * w[o];
      }
    }
    for (int e = 0; e < TE; e++)
      for (int i = 0; i < ni; i++) {
        real u = U[(size_t)e * ustr + (size_t)i * (size_t)K];
        real *op = out + (size_t)e * ostr + (size_t)i * (size_t)cout + oc;
        for (int o = 0; o < on; o++)
          op[o] += u * r[e][o];
      }
  }
}

/* Backward, first part: d U. For output channel o, JV columns j0.. of R_l
 * and TE edges, R[e][j] = sum_h s2[e][h] wo[h][j] (wo: W3O_l[o], W3 at
 * [o][h][j], from column j0; rows K apart), then
 * dU[e][i][j] += g[e][i][o] R[e][j] for the edge's rows i (K apart, edges
 * ustr apart; g's rows gstr apart by edge, cout by i). jn <= JV columns. */
#define JV 32
SE3_HD static inline __attribute__((always_inline)) void conv_tile_du(const real *s2, int H, const real *wo, int K,
                                                                      int jn, const real *g, size_t gstr, int cout,
                                                                      real *dU, size_t ustr, int ni, int fast) {
  int hh = fast ? HF : H, n = fast ? JV : jn;
  real r[TE][JV];
  for (int e = 0; e < TE; e++)
    for (int j = 0; j < n; j++)
      r[e][j] = 0;
  for (int h = 0; h < hh; h++) {
    const real *w = wo + (size_t)h * (size_t)K;
    for (int e = 0; e < TE; e++) {
      real sv = s2[e * hh + h];
      for (int j = 0; j < n; j++)
        r[e][j] += sv * w[j];
    }
  }
  for (int e = 0; e < TE; e++)
    for (int i = 0; i < ni; i++) {
      real gv = g[(size_t)e * gstr + (size_t)i * (size_t)cout];
      real *d = dU + (size_t)e * ustr + (size_t)i * (size_t)K;
      for (int j = 0; j < n; j++)
        d[j] += gv * r[e][j];
    }
}

/* Backward, second part, for one column j of R_l and TE edges, given the
 * output gradient g (laid out like out):
 * dr[e][o] = sum_i g[e][i][o] U[e][i]; dwt[h][o] += sum_e s2[e][h] dr[e][o];
 * ds2[e][h] += sum_o dr[e][o] wu[o][h], wu the column's block of W3J
 * (W3[(o, j), h] at [j][o][h]). */
SE3_HD static inline __attribute__((always_inline)) void
conv_tile_bwd(const real *s2, int H, const real *wu, int cout, const real *g, size_t gstr, const real *U, size_t ustr,
              int K, int ni, real *ds2, real *dwt, int fast) {
  for (int oc = 0; oc < cout; oc += OC) {
    int on = fast ? OC : imin(OC, cout - oc);
    real dr[TE][OC];
    for (int e = 0; e < TE; e++)
      for (int o = 0; o < on; o++)
        dr[e][o] = 0;
    for (int e = 0; e < TE; e++)
      for (int i = 0; i < ni; i++) {
        real u = U[(size_t)e * ustr + (size_t)i * (size_t)K];
        const real *gi = g + (size_t)e * gstr + (size_t)i * (size_t)cout + oc;
        for (int o = 0; o < on; o++)
          dr[e][o] += gi[o] * u;
      }
    if (fast) { /* four rows of dwt at a time: eight independent sums */
      for (int h = 0; h < HF; h += 4) {
        real acc[4][OC];
        for (int q = 0; q < 4; q++)
          for (int o = 0; o < OC; o++)
            acc[q][o] = dwt[(size_t)(h + q) * (size_t)cout + (size_t)(oc + o)];
        UNROLL(8)
        for (int e = 0; e < TE; e++)
          UNROLL(4)
          for (int q = 0; q < 4; q++) {
            real sv = s2[e * HF + h + q];
            for (int o = 0; o < OC; o++)
              acc[q][o] += sv * dr[e][o];
          }
        for (int q = 0; q < 4; q++)
          for (int o = 0; o < OC; o++)
            dwt[(size_t)(h + q) * (size_t)cout + (size_t)(oc + o)] = acc[q][o];
      }
      for (int e = 0; e < TE; e += 4) { /* four edges at a time */
        real acc[4][HF];
        for (int q = 0; q < 4; q++)
          for (int h = 0; h < HF; h++)
            acc[q][h] = ds2[(e + q) * HF + h];
        for (int o = 0; o < OC; o++) {
          const real *wr = wu + (size_t)(oc + o) * (size_t)HF;
          UNROLL(4)
          for (int q = 0; q < 4; q++) {
            real d = dr[e + q][o];
            for (int h = 0; h < HF; h++)
              acc[q][h] += d * wr[h];
          }
        }
        for (int q = 0; q < 4; q++)
          for (int h = 0; h < HF; h++)
            ds2[(e + q) * HF + h] = acc[q][h];
      }
    } else {
      for (int h = 0; h < H; h++) {
        real *d = dwt + (size_t)h * (size_t)cout + oc;
        for (int e = 0; e < TE; e++) {
          real sv = s2[e * H + h];
          for (int o = 0; o < on; o++)
            d[o] += sv * dr[e][o];
        }
      }
      for (int e = 0; e < TE; e++)
        for (int o = 0; o < on; o++) {
          const real *wr = wu + (size_t)(oc + o) * (size_t)H;
          real d = dr[e][o];
          for (int h = 0; h < H; h++)
            ds2[e * H + h] += d * wr[h];
        }
    }
  }
}

/* ---- chunks ------------------------------------------------------------------ */

/* Per-thread buffers for a chunk of up to CE edges. */
struct chunk_buf {
  real *U, *s2, *y, *g, *dU, *ds2;
};

static int chunk_alloc(struct chunk_buf *c, const struct plan *p, int backward) {
  memset(c, 0, sizeof *c);
  size_t u = (size_t)CE * p->usize + 1, s = (size_t)CE * (size_t)p->H + 1, y = (size_t)CE * p->ysize + 1;
  c->U = malloc(u * sizeof(real));
  c->s2 = malloc(s * sizeof(real));
  c->y = malloc(y * sizeof(real));
  if (backward) {
    c->g = c->y;
    c->dU = malloc(u * sizeof(real));
    c->ds2 = malloc(s * sizeof(real));
  }
  return c->U && c->s2 && c->y && (!backward || (c->dU && c->ds2)) ? 0 : -1;
}

static void chunk_free(struct chunk_buf *c) {
  free(c->U);
  free(c->s2);
  free(c->y);
  free(c->dU);
  free(c->ds2);
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
    conv_edge_u(c->U + (size_t)i * p->usize, p, f_off, x, basis + (size_t)(e0 + i) * s->plan->per_edge, s->src[e0 + i]);
  memcpy(c->s2, s2 + (size_t)e0 * (size_t)p->H, (size_t)n * (size_t)p->H * sizeof(real));
  memset(c->U + (size_t)n * p->usize, 0, (size_t)(np - n) * p->usize * sizeof(real));
  memset(c->s2 + (size_t)n * (size_t)p->H, 0, (size_t)(np - n) * (size_t)p->H * sizeof(real));
}

static void chunk_forward(struct chunk_buf *c, const struct plan *p, const real *wt, int n) {
  int np = (n + TE - 1) / TE * TE;
  memset(c->y, 0, (size_t)np * p->ysize * sizeof(real));
  for (int l = 0; l <= p->max_l; l++) {
    int cout = p->cout[l], K = p->K[l];
    if (!cout) continue;
    for (int j = 0; j < K; j++) {
      const real *w = wt + p->wt_off[l] + (size_t)j * (size_t)p->H * (size_t)cout;
      for (int e = 0; e < np; e += TE) {
        real *out = c->y + (size_t)e * p->ysize + p->y_off[l];
        const real *s2 = c->s2 + (size_t)e * (size_t)p->H, *U = c->U + (size_t)e * p->usize + p->u_off[l] + j;
        if (p->fast)
          conv_tile_fwd(out, p->ysize, s2, p->H, w, cout, U, p->usize, K, NN_DIM(l), 1);
        else
          conv_tile_fwd(out, p->ysize, s2, p->H, w, cout, U, p->usize, K, NN_DIM(l), 0);
      }
    }
  }
}

/* W3 (rows o K_l + j per degree, H columns) to W3T_l[j][h][o] (wt, for the
 * forward) or W3J_l[j][o][h] and W3O_l[o][h][j] (wj and wo, for the
 * backward); all at the offsets wt_off. */
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
        if (wj) memcpy(wj + p->wt_off[l] + ((size_t)j * (size_t)cout + (size_t)o) * (size_t)H, src, (size_t)H * sizeof *wj);
        if (wo)
          for (int h = 0; h < H; h++)
            wo[p->wt_off[l] + ((size_t)o * (size_t)H + (size_t)h) * (size_t)K + (size_t)j] = src[h];
      }
  }
}

static int n_threads(void) {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

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
  real *wt = malloc((p.wt_size + 1) * sizeof *wt);
  if (!wt) return -1;
  transpose_w3(wt, NULL, NULL, &p, W3);
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
        memset(c.dU, 0, (size_t)np * p.usize * sizeof(real));
        memset(c.ds2, 0, (size_t)np * (size_t)H * sizeof(real));
        for (int l = 0; l <= p.max_l; l++) {
          int cout = p.cout[l], K = p.K[l], ni = NN_DIM(l);
          if (!cout) continue;
          int fast = p.fast && K % JV == 0;
          for (int j0 = 0; j0 < K; j0 += JV) /* d U, JV columns at a time */
            for (int o = 0; o < cout; o++) {
              const real *wo = wo3 + p.wt_off[l] + (size_t)o * (size_t)H * (size_t)K + (size_t)j0;
              for (int e = 0; e < np; e += TE) {
                size_t uo = (size_t)e * p.usize + p.u_off[l] + (size_t)j0;
                const real *g = c.g + (size_t)e * p.ysize + p.y_off[l] + o, *sv = c.s2 + (size_t)e * (size_t)H;
                if (fast)
                  conv_tile_du(sv, H, wo, K, JV, g, p.ysize, cout, c.dU + uo, p.usize, ni, 1);
                else
                  conv_tile_du(sv, H, wo, K, imin(JV, K - j0), g, p.ysize, cout, c.dU + uo, p.usize, ni, 0);
              }
            }
          for (int j = 0; j < K; j++) { /* d s2 and d W3, a column at a time */
            size_t wo = p.wt_off[l] + (size_t)j * (size_t)H * (size_t)cout;
            for (int e = 0; e < np; e += TE) {
              size_t uo = (size_t)e * p.usize + p.u_off[l] + (size_t)j;
              const real *g = c.g + (size_t)e * p.ysize + p.y_off[l], *sv = c.s2 + (size_t)e * (size_t)H;
              real *d2 = c.ds2 + (size_t)e * (size_t)H;
              if (p.fast)
                conv_tile_bwd(sv, H, wj + wo, cout, g, p.ysize, c.U + uo, p.usize, K, ni, d2, my_dwt + wo, 1);
              else
                conv_tile_bwd(sv, H, wj + wo, cout, g, p.ysize, c.U + uo, p.usize, K, ni, d2, my_dwt + wo, 0);
            }
          }
        }
        for (int i = 0; i < n; i++) {
          int e = a + i;
          real *g[NN_MAX_DEG + 1] = {0};
          for (int k = 0; k <= NN_MAX_DEG; k++)
            if (p.cin[k] && dx[k]) g[k] = my_dx + (size_t)s->src[e] * xw + xo[k];
          conv_edge_du(g, &p, f_off, c.dU + (size_t)i * p.usize, basis + (size_t)e * s->plan->per_edge);
          if (ds2) memcpy(ds2 + (size_t)e * (size_t)H, c.ds2 + (size_t)i * (size_t)H, (size_t)H * sizeof(real));
        }
      }
    }
    chunk_free(&c);
  }
  /* the threads' sums, in thread order */
  for (int k = 0; k <= NN_MAX_DEG; k++) {
    if (!p.cin[k] || !dx[k]) continue;
    size_t w = (size_t)(NN_DIM(k) * p.cin[k]);
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
    for (int l = 0; l <= p.max_l; l++) {
      int cout = p.cout[l], K = p.K[l];
      if (!cout) continue;
#pragma omp parallel for schedule(static)
      for (int j = 0; j < K; j++)
        for (int o = 0; o < cout; o++) {
          real *d = dW3 + (p.r_off[l] + (size_t)o * (size_t)K + (size_t)j) * (size_t)H;
          for (int h = 0; h < H; h++) {
            size_t q = p.wt_off[l] + ((size_t)j * (size_t)H + (size_t)h) * (size_t)cout + (size_t)o;
            real sum = 0;
            for (int t = 0; t < team; t++)
              sum += dwt[(size_t)t * p.wt_size + q];
            d[h] += sum;
          }
        }
    }
  free(wj);
  free(dwt);
  free(dxt);
  free(dst);
  return fail ? -1 : 0;
}
