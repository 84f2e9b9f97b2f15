/* conv.c — the TFN convolution of the SE(3)-Transformer (nn.h has the
 * contract). Per edge and input degree k, the fused basis F_k (rows (l, i_l,
 * J') x (2k+1)) turns the source's degree-k features into T_k = F_k x_k, and
 * each output degree l then takes out_l = U_l R_l^T, where row i_l of U_l is
 * the rows (l, i_l, 0..) of every T_k side by side (contiguous in T_k, so U_l
 * is never copied) and R_l is the edge's radial block for l.
 *
 * Threads: the forward runs over targets (pool) or edges, the backward over
 * sources (each node's gradient is a sum over its outgoing edges in edge
 * order), so every sum has one fixed order.
 */
#include <stdlib.h>
#include <string.h>

#include "models/cpu/nn.h"

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

/* Where things are, computed once per call. */
struct plan {
  int rows[NN_MAX_DEG + 1];                 /* rows of F_k = fused_rows[k] */
  int row0[NN_MAX_DEG + 1][NN_MAX_DEG + 1]; /* first row of output degree l in F_k */
  int t_off[NN_MAX_DEG + 1];                /* T_k in the scratch */
  int t_size;                               /* scratch reals for all T_k */
  size_t r_off[NN_MAX_DEG + 1];             /* R_l in an edge's radial row */
  int K[NN_MAX_DEG + 1];                    /* columns of R_l */
  int col0[NN_MAX_DEG + 1][NN_MAX_DEG + 1]; /* first column of input degree k in R_l */
  size_t r_size;
};

static void make_plan(struct plan *p, const struct nn_conv_shape *s) {
  memset(p, 0, sizeof *p);
  for (int k = 0; k <= NN_MAX_DEG; k++) {
    if (k > s->plan->max_degree) break;
    p->rows[k] = (int)s->plan->fused_rows[k];
    int r = 0;
    for (int l = 0; l <= s->plan->max_degree; l++) {
      if (l <= NN_MAX_DEG) p->row0[k][l] = r;
      r += NN_DIM(l) * (2 * imin(k, l) + 1);
    }
    if (s->fin.ch[k]) {
      p->t_off[k] = p->t_size;
      p->t_size += p->rows[k] * s->fin.ch[k];
    }
  }
  for (int l = 0; l <= NN_MAX_DEG; l++) {
    p->r_off[l] = p->r_size;
    p->K[l] = radial_cols(&s->fin, l);
    int c = 0;
    for (int k = 0; k <= NN_MAX_DEG; k++) {
      p->col0[l][k] = c;
      c += (2 * imin(k, l) + 1) * s->fin.ch[k];
    }
    p->r_size += (size_t)s->fout.ch[l] * (size_t)p->K[l];
  }
}

/* T_k = F_k x_k(src) for every input degree: T_k is rows_k x cin. */
static void edge_t(real *t, const struct plan *p, const struct nn_conv_shape *s, const real *const x[], const real *bas,
                   int src) {
  for (int k = 0; k <= NN_MAX_DEG; k++) {
    int cin = s->fin.ch[k], nk = NN_DIM(k);
    if (!cin) continue;
    const real *F = bas + s->plan->offset[k][0];
    const real *xs = x[k] + (size_t)src * (size_t)(nk * cin);
    real *T = t + p->t_off[k];
    for (int r = 0; r < p->rows[k]; r++) {
      real *tr = T + (size_t)r * (size_t)cin;
      for (int c = 0; c < cin; c++)
        tr[c] = 0;
      for (int i = 0; i < nk; i++) {
        real f = F[r * nk + i];
        const real *xi = xs + i * cin;
        for (int c = 0; c < cin; c++)
          tr[c] += f * xi[c];
      }
    }
  }
}

/* out_l[i_l, o] (+)= sum_k sum_j R_l[o, col0 + j] T_k[(row0 + i_l nJ) cin + j]. */
static void edge_out(real *const out[], const struct plan *p, const struct nn_conv_shape *s, const real *t,
                     const real *R) {
  for (int l = 0; l <= NN_MAX_DEG; l++) {
    int cout = s->fout.ch[l];
    if (!cout) continue;
    const real *Rl = R + p->r_off[l];
    for (int il = 0; il < NN_DIM(l); il++) {
      real *o = out[l] + il * cout;
      for (int k = 0; k <= NN_MAX_DEG; k++) {
        int cin = s->fin.ch[k];
        if (!cin) continue;
        int nJ = 2 * imin(k, l) + 1, n = nJ * cin;
        const real *u = t + p->t_off[k] + (size_t)(p->row0[k][l] + il * nJ) * (size_t)cin;
        for (int oc = 0; oc < cout; oc++) {
          const real *r = Rl + (size_t)oc * (size_t)p->K[l] + p->col0[l][k];
          real acc = 0;
          for (int j = 0; j < n; j++)
            acc += r[j] * u[j];
          o[oc] += acc;
        }
      }
    }
  }
}

void nn_conv_forward(real *const y[], const struct nn_conv_shape *s, const real *const x[], const real *basis,
                     const real *R, int pool) {
  struct plan p;
  make_plan(&p, s);
  const size_t per_edge = s->plan->per_edge;
  int n_items = pool ? s->N : s->E;
#pragma omp parallel
  {
    real *t = malloc(((size_t)p.t_size + 1) * sizeof *t);
#pragma omp for schedule(dynamic, 16)
    for (int it = 0; it < n_items; it++) {
      real *out[NN_MAX_DEG + 1] = {0};
      for (int l = 0; l <= NN_MAX_DEG; l++) {
        if (!s->fout.ch[l]) continue;
        out[l] = y[l] + (size_t)it * (size_t)(NN_DIM(l) * s->fout.ch[l]);
        memset(out[l], 0, (size_t)(NN_DIM(l) * s->fout.ch[l]) * sizeof(real));
      }
      int e0 = pool ? s->in_start[it] : it, e1 = pool ? s->in_start[it + 1] : it + 1;
      for (int e = e0; e < e1; e++) {
        edge_t(t, &p, s, x, basis + (size_t)e * per_edge, s->src[e]);
        edge_out(out, &p, s, t, R + (size_t)e * p.r_size);
      }
    }
    free(t);
  }
}

/* Edges grouped by source, in edge order within a source (counting sort). */
static void by_source(const struct nn_conv_shape *s, int32_t *start, int32_t *order) {
  memset(start, 0, (size_t)(s->N + 1) * sizeof *start);
  for (int e = 0; e < s->E; e++)
    start[s->src[e] + 1]++;
  for (int n = 0; n < s->N; n++)
    start[n + 1] += start[n];
  int32_t *fill = malloc((size_t)(s->N + 1) * sizeof *fill);
  memcpy(fill, start, (size_t)(s->N + 1) * sizeof *fill);
  for (int e = 0; e < s->E; e++)
    order[fill[s->src[e]]++] = e;
  free(fill);
}

void nn_conv_backward(real *const dx[], real *dR, const struct nn_conv_shape *s, const real *const dy[],
                      const real *const x[], const real *basis, const real *R, int pool) {
  struct plan p;
  make_plan(&p, s);
  const size_t per_edge = s->plan->per_edge;
  /* the target of each edge, for pooled gradients */
  int32_t *dst = malloc(((size_t)s->E + 1) * sizeof *dst);
  for (int n = 0; n < s->N; n++)
    for (int e = s->in_start[n]; e < s->in_start[n + 1]; e++)
      dst[e] = n;
  int32_t *start = malloc(((size_t)s->N + 1) * sizeof *start), *order = malloc(((size_t)s->E + 1) * sizeof *order);
  by_source(s, start, order);
#pragma omp parallel
  {
    real *t = malloc(((size_t)p.t_size + 1) * sizeof *t), *dt = malloc(((size_t)p.t_size + 1) * sizeof *dt);
#pragma omp for schedule(dynamic, 16)
    for (int n = 0; n < s->N; n++) {
      for (int k = 0; k <= NN_MAX_DEG; k++)
        if (s->fin.ch[k] && dx[k])
          memset(dx[k] + (size_t)n * (size_t)(NN_DIM(k) * s->fin.ch[k]), 0,
                 (size_t)(NN_DIM(k) * s->fin.ch[k]) * sizeof(real));
      for (int q = start[n]; q < start[n + 1]; q++) {
        int e = order[q];
        const real *bas = basis + (size_t)e * per_edge, *Re = R + (size_t)e * p.r_size;
        int row = pool ? dst[e] : e;
        edge_t(t, &p, s, x, bas, n);
        memset(dt, 0, (size_t)p.t_size * sizeof *dt);
        real *dRe = dR ? dR + (size_t)e * p.r_size : NULL;
        if (dRe) memset(dRe, 0, p.r_size * sizeof *dRe);
        for (int l = 0; l <= NN_MAX_DEG; l++) {
          int cout = s->fout.ch[l];
          if (!cout) continue;
          const real *g = dy[l] + (size_t)row * (size_t)(NN_DIM(l) * cout);
          const real *Rl = Re + p.r_off[l];
          real *dRl = dRe ? dRe + p.r_off[l] : NULL;
          for (int il = 0; il < NN_DIM(l); il++) {
            const real *gi = g + il * cout;
            for (int k = 0; k <= NN_MAX_DEG; k++) {
              int cin = s->fin.ch[k];
              if (!cin) continue;
              int nJ = 2 * imin(k, l) + 1, nn = nJ * cin;
              size_t uo = (size_t)p.t_off[k] + (size_t)(p.row0[k][l] + il * nJ) * (size_t)cin;
              const real *u = t + uo;
              real *du = dt + uo;
              for (int oc = 0; oc < cout; oc++) {
                real go = gi[oc];
                const real *r = Rl + (size_t)oc * (size_t)p.K[l] + p.col0[l][k];
                for (int j = 0; j < nn; j++)
                  du[j] += go * r[j];
                if (dRl) {
                  real *dr = dRl + (size_t)oc * (size_t)p.K[l] + p.col0[l][k];
                  for (int j = 0; j < nn; j++)
                    dr[j] += go * u[j];
                }
              }
            }
          }
        }
        /* dx_k(n) += F_k^T dT_k */
        for (int k = 0; k <= NN_MAX_DEG; k++) {
          int cin = s->fin.ch[k], nk = NN_DIM(k);
          if (!cin || !dx[k]) continue;
          const real *F = bas + s->plan->offset[k][0];
          const real *dT = dt + p.t_off[k];
          real *g = dx[k] + (size_t)n * (size_t)(nk * cin);
          for (int r = 0; r < p.rows[k]; r++) {
            const real *dtr = dT + (size_t)r * (size_t)cin;
            for (int i = 0; i < nk; i++) {
              real f = F[r * nk + i];
              real *gi = g + i * cin;
              for (int c = 0; c < cin; c++)
                gi[c] += f * dtr[c];
            }
          }
        }
      }
    }
    free(t);
    free(dt);
  }
  free(dst);
  free(start);
  free(order);
}
