/* basis.h — the per-edge equivariant basis of the SE(3)-Transformer's
 * convolutions, and the reduced-precision encodings it is stored in.
 *
 * For an input degree k, an output degree l and an edge with relative
 * position x (target minus source), the basis is the array
 *   B[i_l][J'][i_k] = sum_m Q_J[(i_l, i_k), m] Y_J,m(x / |x|),
 *   J = |k-l| + J', J' = 0 .. 2 min(k,l),
 * of shape (2l+1) x (2 min(k,l)+1) x (2k+1), row-major, with Q_J and Y_J as
 * in models/so3.h. The kernel W(x) = sum_J phi_J(|x|) B[:, J, :] then
 * satisfies W(R x) = D_l(R) W(x) D_k(R)^T.
 *
 * One edge's basis for all pairs (k, l) with 0 <= k, l <= max_degree is the
 * concatenation of the pairs' arrays, k major then l: pair (k, l) starts at
 * basis_offset(plan, k, l) and holds basis_pair_size(k, l) floats.
 */
#ifndef SE3_BASIS_H
#define SE3_BASIS_H

#include <stddef.h>
#include <stdint.h>

#define BASIS_MAX_DEGREE 5 /* J <= 10 = SO3_LMAX */

struct basis_plan {
  int max_degree;
  size_t per_edge;                                           /* floats per edge, all pairs */
  size_t offset[BASIS_MAX_DEGREE + 1][BASIS_MAX_DEGREE + 1]; /* [k][l] */
  float *q;                                                  /* Q_J of every pair, float, pair order */
  size_t q_offset[BASIS_MAX_DEGREE + 1][BASIS_MAX_DEGREE + 1];
};

/* Floats in one pair's basis: (2l+1)(2 min(k,l)+1)(2k+1). */
size_t basis_pair_size(int k, int l);
/* Prepare the Q matrices for degrees 0..max_degree. 0, or -1 (bad degree or no memory). */
int basis_plan_init(struct basis_plan *p, int max_degree);
void basis_plan_free(struct basis_plan *p);
/* The basis of one edge (p->per_edge floats); a zero vector gives the basis
 * of the degree-0 harmonic only (see so3_sh). */
void basis_edge(const struct basis_plan *p, const float rel[3], float *out);

/* Storage precisions of the bases table. */
enum basis_dtype { BASIS_FP32 = 0, BASIS_FP16 = 1, BASIS_BF16 = 2 };
size_t basis_dtype_size(enum basis_dtype t);
/* Encode n floats as little-endian fp32, fp16 or bf16 (round to nearest
 * even; fp16 overflows to ±inf, keeps subnormals) / decode them. */
void basis_encode(enum basis_dtype t, const float *in, size_t n, void *out);
void basis_decode(enum basis_dtype t, const void *in, size_t n, float *out);
uint16_t basis_f32_to_f16(float f);
float basis_f16_to_f32(uint16_t h);
uint16_t basis_f32_to_bf16(float f);
float basis_bf16_to_f32(uint16_t h);

#endif
