/* attention.h — the graph attention's per-node and per-edge arithmetic
 * (models/cpu/nn.h has the layer, models/cpu/attention.c the formulas):
 * header-only SE3_HD bodies, valid C and CUDA C++, that the CPU backend
 * loops over and the CUDA backend maps to threads. The shape and the kv, q,
 * dz arrays are read through pointers, so on the GPU they hold device
 * pointers (the shape passed by value into the kernel). exp and sqrt are
 * taken in double, as the CPU always did. */
#ifndef SE3_KERNELS_ATTENTION_H
#define SE3_KERNELS_ATTENTION_H

#include <math.h>
#include <stddef.h>

#include "models/layers.h"
#include "models/so3.h" /* SE3_HD */

/* 1/sqrt(total key width W = sum_d fk.ch[d] (2d+1)); 0 when there are no
 * keys (uniform weights). */
SE3_HD static inline real nn_k_attn_scale(const struct nn_attn_shape *s) {
  int W = 0;
  for (int d = 0; d <= NN_MAX_DEG; d++)
    W += s->fk.ch[d] * NN_DIM(d);
  return W > 0 ? (real)(1.0 / sqrt((double)W)) : (real)0;
}

/* The logits of the edges e0..e1-1 of node n into alpha (E x H), then the
 * softmax over those edges per head, in place (weighted by s->w when it is
 * not NULL; the maximum is over the edges with weight > 0). */
SE3_HD static inline void nn_k_attn_node_alpha(real *alpha, const struct nn_attn_shape *s, const real *const kv[],
                                               const real *const q[], real scale, int n, int e0, int e1) {
  const int H = s->heads;
  for (int e = e0; e < e1; e++) {
    real *a = alpha + (size_t)e * H;
    for (int h = 0; h < H; h++)
      a[h] = 0;
    for (int d = 0; d <= NN_MAX_DEG; d++) {
      const int ck = s->fk.ch[d], cv = s->fv.ch[d], dim = NN_DIM(d), g = ck / H;
      if (ck == 0) continue;
      for (int m = 0; m < dim; m++) {
        const real *key = kv[d] + ((size_t)e * dim + m) * (cv + ck) + cv;
        const real *qr = q[d] + ((size_t)n * dim + m) * ck;
        for (int h = 0; h < H; h++) {
          real acc = 0;
          for (int c = h * g; c < (h + 1) * g; c++)
            acc += key[c] * qr[c];
          a[h] += acc;
        }
      }
    }
    for (int h = 0; h < H; h++)
      a[h] *= scale;
  }
  const real *w = s->w;
  for (int h = 0; h < H; h++) {
    /* the maximum over the edges that take part (weight > 0) */
    int any = 0;
    real mx = 0;
    for (int e = e0; e < e1; e++)
      if ((!w || w[e] > 0) && (!any || alpha[(size_t)e * H + h] > mx)) {
        mx = alpha[(size_t)e * H + h];
        any = 1;
      }
    real sum = 0;
    for (int e = e0; e < e1; e++) {
      real *a = alpha + (size_t)e * H + h;
      *a = w ? (w[e] > 0 ? w[e] * (real)exp((double)(*a - mx)) : 0) : (real)exp((double)(*a - mx));
      sum += *a;
    }
    if (!w) {
      const real inv = 1 / sum; /* sum >= 1: the maximum contributes exp(0) */
      for (int e = e0; e < e1; e++)
        alpha[(size_t)e * H + h] *= inv;
    } else if (sum > 0) { /* the maximum's term is its weight, maybe tiny: divide (1/sum could overflow) */
      for (int e = e0; e < e1; e++)
        alpha[(size_t)e * H + h] /= sum;
    } /* else no edge takes part: every a stays 0 */
  }
}

/* da[e,h] for one edge e into node n and head h: dz of the node against the
 * edge's values (a NULL dz[d] counts as zero). */
SE3_HD static inline real nn_k_attn_dalpha(const struct nn_attn_shape *s, const real *const dz[],
                                           const real *const kv[], int n, int e, int h) {
  real acc = 0;
  for (int d = 0; d <= NN_MAX_DEG; d++) {
    const int ck = s->fk.ch[d], cv = s->fv.ch[d], dim = NN_DIM(d), g = cv / s->heads;
    if (cv == 0 || dz[d] == NULL) continue;
    for (int m = 0; m < dim; m++) {
      const real *val = kv[d] + ((size_t)e * dim + m) * (cv + ck);
      const real *dzr = dz[d] + ((size_t)n * dim + m) * cv;
      for (int c = h * g; c < (h + 1) * g; c++)
        acc += dzr[c] * val[c];
    }
  }
  return acc;
}

#endif
