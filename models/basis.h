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
 * plan.offset[k][l] and holds basis_pair_size(k, l) floats.
 *
 * Fused layout. Because pairs are k-major and each pair's array is
 * [i_l][J'][i_k], the pairs of one input degree k together form one dense
 * row-major matrix
 *   F_k, shape plan.fused_rows[k] x (2k+1), starting at plan.offset[k][0],
 *   rows (l, i_l, J') for l = 0..max_degree, fused_rows[k] =
 *   sum_l (2l+1)(2 min(k,l)+1),
 * so a convolution contracts a degree-k input (C channels x (2k+1)) with all
 * its output degrees in one product, F_k x_k^T: one small GEMM per input
 * degree and edge instead of one per pair (NVIDIA's "fused" TFN does the same
 * per output degree). The stored blob keeps exactly this order.
 */
#ifndef SE3_BASIS_H
#define SE3_BASIS_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define BASIS_MAX_DEGREE 5 /* J <= 10 = SO3_LMAX */

struct basis_plan {
  int max_degree;
  size_t per_edge;                                           /* floats per edge, all pairs */
  size_t offset[BASIS_MAX_DEGREE + 1][BASIS_MAX_DEGREE + 1]; /* [k][l] */
  size_t fused_rows[BASIS_MAX_DEGREE + 1];                   /* rows of F_k (see above) */
  double *q;                                                 /* Q_J of every pair, J ascending */
  size_t q_offset[BASIS_MAX_DEGREE + 1][BASIS_MAX_DEGREE + 1];
  /* Q in sparse form, one list per output value (in the stored order):
   * out[o] = sum_{i in [nz_start[o], nz_start[o+1])} nz_c[i] * Y[nz_y[i]]
   * with Y the harmonics of degrees 0..2 max_degree concatenated (so3_sh).
   * Real-basis Q is sparse: at most 4 non-zeros per output. */
  uint32_t *nz_start; /* per_edge + 1 */
  uint16_t *nz_y;
  double *nz_c;
  uint32_t n_nonzero;
};

/* Floats in one pair's basis: (2l+1)(2 min(k,l)+1)(2k+1). */
size_t basis_pair_size(int k, int l);
/* Prepare the Q matrices for degrees 0..max_degree. 0, or -1 (bad degree or no memory). */
int basis_plan_init(struct basis_plan *p, int max_degree);
void basis_plan_free(struct basis_plan *p);
/* The basis of one edge (p->per_edge floats); a zero vector gives the basis
 * of the degree-0 harmonic only (see so3_sh). Harmonics and the contraction
 * run in double; only the result is rounded to float, so the stored kernel is
 * equivariant to float round-off of the input direction. */
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

/* ---- the stored blob ------------------------------------------------------
 * One molecule's bases: every edge's basis (basis_edge, in the graph's edge
 * order) one after the other, encoded in the table's dtype. Layout (version 2,
 * little-endian):
 *   offset 0  char[4]  magic "SE3B"
 *          4  u16      version (2)
 *          6  u16      dtype: 0 fp32, 1 fp16, 2 bf16
 *          8  u32      n_edges
 *         12  u16      max_degree
 *         14  u16      reserved (0)
 *         16  u32      per_edge: values per edge, basis_plan.per_edge
 *         20  n_edges x per_edge values of basis_dtype_size(dtype) bytes
 *             u32      CRC-32C (common/crc32c.h) of every byte before it
 * The size is exactly 20 + n_edges * per_edge * basis_dtype_size(dtype) + 4.
 * Version 1 is the same without the checksum: still read (unchecked;
 * `se3screen verify` counts it as "unchecked, old format"), never written. */
#define BASIS_BLOB_MAGIC "SE3B"
#define BASIS_BLOB_VERSION 2
#define BASIS_BLOB_CRC 4 /* trailing checksum bytes, version 2 on */
#define BASIS_BLOB_HEADER 20

struct basis_blob {
  int max_degree;
  enum basis_dtype dtype;
  uint32_t n_edges, per_edge;
  const uint8_t *data; /* n_edges * per_edge encoded values, inside the blob */
};

/* The bases of n_edges edges (rel_pos: n_edges x 3, x_target - x_source)
 * computed and encoded into a new blob (caller frees). 0, or -1 when out of
 * memory. */
int basis_to_blob(const struct basis_plan *p, enum basis_dtype t, const float *rel_pos, uint32_t n_edges,
                  uint8_t **blob, size_t *len);
/* Checks a blob's header, size and checksum and points b into it. 0, or -1 with a
 * message in err. Decode the values with basis_decode(b->dtype, b->data,
 * (size_t)b->n_edges * b->per_edge, out). */
int basis_blob_parse(const uint8_t *blob, size_t len, struct basis_blob *b, struct se3_error *err);

#endif
