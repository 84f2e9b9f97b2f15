/* attention.c — SE(3)-equivariant graph attention (nn.h, "attention").
 *
 * Per target node n with incoming edges e = in_start[n] .. in_start[n+1]-1
 * and per head h:
 *   logit[e,h] = s sum_d sum_{m, c in h} key[d][e,m,c] q[d][n,m,c],
 *                s = 1/sqrt(W), W = sum_d fk.ch[d] (2d+1)
 *   a[e,h]     = exp(logit[e,h] - max) / sum_{e'} exp(logit[e',h] - max)
 *                (with edge weights w: w_e exp(...) / sum_{e'} w_e' exp(...),
 *                the maximum over edges with w > 0)
 *   z[d][n,m,c] = sum_e a[e, head(c)] value[d][e,m,c]
 * Backward (dz given), with da[e,h] = sum_d sum_{m, c in h} dz[d][n,m,c]
 * value[d][e,m,c] and S[h] = sum_e a[e,h] da[e,h]:
 *   dvalue[d][e,m,c] = a[e,head(c)] dz[d][n,m,c]
 *   dlogit[e,h]      = a[e,h] (da[e,h] - S[h])
 *   dkey[d][e,m,c]   = s dlogit[e,head(c)] q[d][n,m,c]
 *   dq[d][n,m,c]     = s sum_e dlogit[e,head(c)] key[d][e,m,c]
 * Everything a node touches (its edges' kv rows, its q and z rows) belongs to
 * that node alone, so both passes run OpenMP over nodes without races, and
 * every sum is in edge order: the result does not depend on scheduling.
 * No scratch memory: the logits are built in alpha, and the backward takes
 * one head at a time, computing da twice (once for S, once for dlogit). */
#include <math.h>
#include <stddef.h>

#include "models/cpu/nn.h"
#include "models/kernels/attention.h"

void nn_attn_forward(real *const z[], real *alpha, const struct nn_attn_shape *s, const real *const kv[],
                     const real *const q[]) {
  const int H = s->heads, N = s->N;
  const real scale = nn_k_attn_scale(s);
#pragma omp parallel for schedule(dynamic, 16)
  for (int n = 0; n < N; n++) {
    const int e0 = s->in_start[n], e1 = s->in_start[n + 1];
    if (e1 > e0) nn_k_attn_node_alpha(alpha, s, kv, q, scale, n, e0, e1);
    for (int d = 0; d <= NN_MAX_DEG; d++) {
      const int ck = s->fk.ch[d], cv = s->fv.ch[d], dim = NN_DIM(d), g = cv / H;
      if (cv == 0 || z[d] == NULL) continue;
      for (int m = 0; m < dim; m++) {
        real *zr = z[d] + ((size_t)n * dim + m) * cv;
        for (int c = 0; c < cv; c++)
          zr[c] = 0;
        for (int e = e0; e < e1; e++) {
          const real *val = kv[d] + ((size_t)e * dim + m) * (cv + ck);
          const real *a = alpha + (size_t)e * H;
          for (int h = 0; h < H; h++)
            for (int c = h * g; c < (h + 1) * g; c++)
              zr[c] += a[h] * val[c];
        }
      }
    }
  }
}

void nn_attn_backward(real *const dkv[], real *const dq[], const struct nn_attn_shape *s, const real *const dz[],
                      const real *alpha, const real *const kv[], const real *const q[]) {
  const int H = s->heads, N = s->N;
  const real scale = nn_k_attn_scale(s);
#pragma omp parallel for schedule(dynamic, 16)
  for (int n = 0; n < N; n++) {
    const int e0 = s->in_start[n], e1 = s->in_start[n + 1];
    if (dq)
      for (int d = 0; d <= NN_MAX_DEG; d++) {
        const int ck = s->fk.ch[d];
        if (ck == 0 || dq[d] == NULL) continue;
        real *dqr = dq[d] + (size_t)n * NN_DIM(d) * ck;
        for (int i = 0; i < NN_DIM(d) * ck; i++)
          dqr[i] = 0;
      }
    for (int h = 0; h < H; h++) {
      real S = 0;
      for (int e = e0; e < e1; e++)
        S += alpha[(size_t)e * H + h] * nn_k_attn_dalpha(s, dz, kv, n, e, h);
      for (int e = e0; e < e1; e++) {
        const real a = alpha[(size_t)e * H + h];
        const real dl = scale * a * (nn_k_attn_dalpha(s, dz, kv, n, e, h) - S);
        for (int d = 0; d <= NN_MAX_DEG; d++) {
          const int ck = s->fk.ch[d], cv = s->fv.ch[d], dim = NN_DIM(d);
          const int gv = cv / H, gk = ck / H, w = cv + ck;
          real *dkvd = dkv ? dkv[d] : NULL;
          real *dqd = dq ? dq[d] : NULL;
          for (int m = 0; m < dim; m++) {
            const size_t row = ((size_t)e * dim + m) * w, qrow = ((size_t)n * dim + m) * ck;
            if (dkvd) {
              const real *dzr = cv && dz[d] ? dz[d] + ((size_t)n * dim + m) * cv : NULL;
              for (int c = h * gv; c < (h + 1) * gv; c++)
                dkvd[row + c] = dzr ? a * dzr[c] : 0;
              for (int c = h * gk; c < (h + 1) * gk; c++)
                dkvd[row + cv + c] = dl * q[d][qrow + c];
            }
            if (dqd)
              for (int c = h * gk; c < (h + 1) * gk; c++)
                dqd[qrow + c] += dl * kv[d][row + cv + c];
          }
        }
      }
    }
  }
}
