/* conv.h — what the convolution's two files share (models/cuda/conv.cu:
 * the direct kernels, the GEMM path and the entry points; conv_fused.cu:
 * the fused tensor-core kernels, gpu_conv: fused): the shapes as the
 * kernels read them (struct geom, filled by conv.cu's make_geom), the
 * inputs of every degree, one entry of U, and the fused path's launches.
 * conv.cu's top comment has the convolution's sums. */
#ifndef SE3_CUDA_CONV_H
#define SE3_CUDA_CONV_H

#include "models/cuda/cuda.h"

#define D (NN_MAX_DEG + 1)
#define LANES 32

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

/* ---- the fused path (conv_fused.cu) ---- */

/* 1 when the fused kernels take this convolution (a radial network of at
 * most 64 features; else the direct kernels) */
int cu_fused_fits(const struct geom *g);
/* 1 when every degree's dW3 and ds2 tiles fit the fused kernels' shared
 * memory (else dR is stored for the GEMMs) */
int cu_fused_dr_fits(const struct geom *g);
/* The forward's messages of degree l (du NULL: into out, E x NI x cout), or
 * the backward's dU of degree l for the chunk's edges c0..c1-1 (into du,
 * as conv_du's), in the table's precision. */
void cu_fused_r(const struct geom *g, const struct deg_in *x, const real *basis, const int32_t *src, const real *s2,
                const real *W3, const real *gy, const int32_t *dst, int l, int c0, int c1, real *out, real *du);
/* dW3 += and ds2 (= when !add, else +=) of degree l from the chunk's edges
 * c0..c1-1, without dR; either may be NULL. */
void cu_fused_dr(const struct geom *g, const struct deg_in *x, const real *basis, const int32_t *src, const real *s2,
                 const real *W3, const real *gy, const int32_t *dst, int l, int c0, int c1, real *dW3, int add,
                 real *ds2);

#endif
