/* envelope.h — the smooth cutoff envelope's arithmetic (models/se3.h says
 * where it is used): header-only SE3_HD bodies, valid C and CUDA C++, that
 * the CPU backend loops over and the CUDA backend maps to threads. */
#ifndef SE3_KERNELS_ENVELOPE_H
#define SE3_KERNELS_ENVELOPE_H

#include <math.h>

#include "models/real.h"
#include "models/so3.h" /* SE3_HD */

/* The kinds (models/se3.h documents them). */
enum { SE3_ENVELOPE_NONE = 0, SE3_ENVELOPE_COSINE = 1, SE3_ENVELOPE_POLY = 2 };

/* ---- smooth cutoff envelope --------------------------------------------------
 * 0.5 (cos(pi r / rc) + 1) for 0 <= r < rc, 0 for r >= rc: 1 at r = 0, 0
 * with zero slope at rc (models/se3.h says where it is used). */
SE3_HD static inline real nn_envelope_cosine(real r, real rc) {
  if (!(r < rc)) return 0;
  return (real)(0.5 * (cos(3.14159265358979323846 * (double)r / (double)rc) + 1.0));
}
/* The polynomial envelope of NequIP (p = 6): with d = r / rc,
 * 1 - 28 d^6 + 48 d^7 - 21 d^8 for d < 1, 0 beyond: 1 with zero slope at 0,
 * flat over bond lengths (0.99 at d = 0.3, 0.86 at 0.5), 0 with zero first
 * and second derivatives at rc. */
SE3_HD static inline real nn_envelope_poly(real r, real rc) {
  if (!(r < rc)) return 0;
  const double d = (double)r / (double)rc, d2 = d * d, d6 = d2 * d2 * d2;
  return (real)(1.0 - d6 * (28.0 - d * (48.0 - 21.0 * d)));
}
/* One edge's weight from its features f (`in` reals, the distance last,
 * "no bond" first): 1 without an envelope, or for a bonded pair when
 * bonds_kept; else u(r / cutoff). */
SE3_HD static inline real nn_edge_weight(const real *f, int in, int kind, real cutoff, int bonds_kept) {
  if (kind == SE3_ENVELOPE_NONE || (bonds_kept && f[0] < (real)0.5)) return 1;
  return kind == SE3_ENVELOPE_POLY ? nn_envelope_poly(f[in - 1], cutoff) : nn_envelope_cosine(f[in - 1], cutoff);
}

#endif
