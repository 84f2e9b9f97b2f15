/* basis.h — one edge's equivariant basis (models/basis.h defines it) from
 * its relative position: a header-only SE3_HD body, valid C and CUDA C++.
 * models/basis.c's basis_edge calls it on the host (the batch builder and
 * the CPU backend's `bases`), the CUDA backend in a kernel, so bases
 * computed on a GPU are the host's arithmetic: the harmonics of degrees
 * 0..2 max_degree and the sparse Clebsch–Gordan sums in double, each
 * result rounded to float. */
#ifndef SE3_KERNELS_BASIS_H
#define SE3_KERNELS_BASIS_H

#include <stddef.h>
#include <stdint.h>

#include "models/real.h"
#include "models/so3.h" /* SE3_HD, so3_sh_body */

/* The harmonics y (SO3_SH_DIM(2 max_degree) doubles) of rel, with sh_norm
 * the normalisation table (so3_sh_norm, or a device copy of it). */
SE3_HD static inline void nn_k_basis_harmonics(int max_degree, const double *sh_norm, const float rel[3], double *y) {
  so3_sh_body(2 * max_degree, sh_norm, (double)rel[0], (double)rel[1], (double)rel[2], y);
}

/* Output o of the edge's basis from its harmonics y and the plan's sparse
 * tables: sum over i in [nz_start[o], nz_start[o + 1]) of nz_c[i]
 * y[nz_y[i]], in double, rounded to float (then to real). */
SE3_HD static inline real nn_k_basis_value(size_t o, const uint32_t *nz_start, const uint16_t *nz_y, const double *nz_c,
                                           const double *y) {
  double s = 0;
  for (uint32_t i = nz_start[o]; i < nz_start[o + 1]; i++)
    s += nz_c[i] * y[nz_y[i]];
  return (real)(float)s;
}

#endif
