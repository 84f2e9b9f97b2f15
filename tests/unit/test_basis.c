/* The per-edge basis: equivariance of every degree pair's kernel in fp32,
 * layout, and the fp16/bf16 encodings within their rounding. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/crc32c.h"
#include "models/basis.h"
#include "models/so3.h"

#define MAXD 3

/* Relative error of W(Rx) against D_l W(x) D_k^T for every J block of pair (k, l). */
static double pair_error(const struct basis_plan *p, int k, int l, const float *bx, const float *brx,
                         const double R[9]) {
  int nk = 2 * k + 1, nl = 2 * l + 1, nj = 2 * (k < l ? k : l) + 1;
  double Dk[121], Dl[121];
  so3_wigner_d(k, R, Dk);
  so3_wigner_d(l, R, Dl);
  const float *a = bx + p->offset[k][l], *b = brx + p->offset[k][l];
  double worst = 0;
  for (int jj = 0; jj < nj; jj++) {
    double num = 0, den = 0;
    for (int i = 0; i < nl; i++)
      for (int j = 0; j < nk; j++) {
        double want = 0; /* (D_l W D_k^T)_ij */
        for (int s = 0; s < nl; s++)
          for (int t = 0; t < nk; t++)
            want += Dl[i * nl + s] * a[(s * nj + jj) * nk + t] * Dk[j * nk + t];
        double got = b[(i * nj + jj) * nk + j];
        num += (got - want) * (got - want);
        den += want * want;
      }
    double rel = sqrt(num / (den > 1e-30 ? den : 1e-30));
    if (rel > worst) worst = rel;
  }
  return worst;
}

Test(basis, layout_and_sizes) {
  struct basis_plan p;
  cr_assert_eq(basis_plan_init(&p, MAXD), 0);
  size_t total = 0;
  for (int k = 0; k <= MAXD; k++)
    for (int l = 0; l <= MAXD; l++) {
      cr_assert_eq(p.offset[k][l], total, "pair (%d,%d) offset", k, l);
      total += basis_pair_size(k, l);
    }
  cr_assert_eq(p.per_edge, total);
  cr_assert_eq(basis_pair_size(1, 2), 5 * 3 * 3);
  cr_assert_eq(basis_pair_size(3, 0), 1 * 1 * 7);
  cr_assert_eq(basis_plan_init(&p, BASIS_MAX_DEGREE + 1), -1);
  cr_assert_eq(basis_plan_init(&p, -1), -1);
  basis_plan_free(&p);
}

/* The (0,0) basis is Q_0 Y_0 = Y_0 = 1/sqrt(4 pi); (0,1) and (1,0) are Y_1 up to scale. */
Test(basis, low_degrees_are_harmonics) {
  struct basis_plan p;
  cr_assert_eq(basis_plan_init(&p, 1), 0);
  float *b = malloc(p.per_edge * sizeof *b);
  float x[3] = {0.3f, -1.2f, 2.0f}, y[4];
  basis_edge(&p, x, b);
  so3_sh_f(1, x, y);
  cr_assert_float_eq(b[p.offset[0][0]], 1.0 / sqrt(4 * M_PI), 1e-6);
  /* (k=0, l=1): shape 3 x 1 x 1, proportional to Y_1 with unit-norm Q: factor 1/sqrt(3) */
  for (int i = 0; i < 3; i++)
    cr_assert_float_eq(b[p.offset[0][1] + i], y[1 + i] / sqrt(3.0), 1e-6);
  free(b);
  basis_plan_free(&p);
}

/* The bar: 1e-6 relative in fp32. The basis is rounded to float once
 * (harmonics and contraction in double), so what is left is the float
 * rounding of the two input directions and of the output; a slip is O(1). */
Test(basis, every_pair_is_equivariant_in_fp32) {
  struct basis_plan p;
  cr_assert_eq(basis_plan_init(&p, MAXD), 0);
  float *bx = malloc(p.per_edge * sizeof *bx), *brx = malloc(p.per_edge * sizeof *brx);
  uint64_t rng = 12345;
  double worst = 0;
  for (int trial = 0; trial < 50; trial++) {
    double R[9], v[3], rv[3];
    so3_random_rotation(&rng, R);
    for (int i = 0; i < 3; i++)
      v[i] = 4 * so3_rng_uniform(&rng) - 2;
    so3_matvec(R, v, rv);
    float x[3] = {(float)v[0], (float)v[1], (float)v[2]}, rx[3] = {(float)rv[0], (float)rv[1], (float)rv[2]};
    basis_edge(&p, x, bx);
    basis_edge(&p, rx, brx);
    for (int k = 0; k <= MAXD; k++)
      for (int l = 0; l <= MAXD; l++) {
        double e = pair_error(&p, k, l, bx, brx, R);
        if (e > worst) worst = e;
        cr_assert_lt(e, 1e-6, "pair (%d,%d), trial %d: relative error %.2e", k, l, trial, e);
      }
  }
  cr_log_info("worst relative equivariance error over 50 rotations, degrees <= %d: %.2e", MAXD, worst);
  free(bx);
  free(brx);
  basis_plan_free(&p);
}

/* A wrong layout (k and l swapped) must not pass the equivariance check. */
Test(basis, the_check_sees_a_transposed_pair) {
  struct basis_plan p;
  cr_assert_eq(basis_plan_init(&p, 2), 0);
  float *bx = malloc(p.per_edge * sizeof *bx), *brx = malloc(p.per_edge * sizeof *brx);
  uint64_t rng = 7;
  double R[9], v[3] = {0.4, 1.1, -0.7}, rv[3];
  so3_random_rotation(&rng, R);
  so3_matvec(R, v, rv);
  float x[3] = {0.4f, 1.1f, -0.7f}, rx[3] = {(float)rv[0], (float)rv[1], (float)rv[2]};
  basis_edge(&p, x, bx);
  basis_edge(&p, rx, brx);
  cr_assert_lt(pair_error(&p, 1, 2, bx, brx, R), 1e-5);
  /* Read pair (1,2)'s numbers as if they were laid out l-minor: no longer equivariant. */
  float *t = bx + p.offset[1][2], *u = brx + p.offset[1][2];
  float tmp[45], tmq[45];
  for (int i = 0; i < 45; i++)
    tmp[i] = t[44 - i], tmq[i] = u[44 - i];
  memcpy(t, tmp, sizeof tmp);
  memcpy(u, tmq, sizeof tmq);
  cr_assert_gt(pair_error(&p, 1, 2, bx, brx, R), 1e-3);
  free(bx);
  free(brx);
  basis_plan_free(&p);
}

/* Stored fp16/bf16 values decode to within their format's rounding of fp32. */
Test(basis, fp16_and_bf16_round_trip_within_rounding) {
  struct basis_plan p;
  cr_assert_eq(basis_plan_init(&p, MAXD), 0);
  size_t n = p.per_edge;
  float *b = malloc(n * sizeof *b), *back = malloc(n * sizeof *back);
  uint8_t *enc = malloc(n * 4);
  float x[3] = {1.3f, -0.2f, 0.77f};
  basis_edge(&p, x, b);
  const enum basis_dtype types[3] = {BASIS_FP32, BASIS_FP16, BASIS_BF16};
  const double eps[3] = {0, ldexp(1, -11), ldexp(1, -8)}; /* half an ulp, relative */
  for (int t = 0; t < 3; t++) {
    basis_encode(types[t], b, n, enc);
    basis_decode(types[t], enc, n, back);
    for (size_t i = 0; i < n; i++) {
      double tol = eps[t] * fabs(b[i]) + (types[t] == BASIS_FP16 ? ldexp(1, -25) : 0);
      cr_assert_leq(fabs((double)back[i] - b[i]), tol, "dtype %d value %zu: %.9g -> %.9g", t, i, b[i], back[i]);
    }
  }
  free(b);
  free(back);
  free(enc);
  basis_plan_free(&p);
}

/* The conversions themselves, exhaustively for fp16 and at the edges. */
Test(basis, half_precision_conversions) {
  /* Every finite fp16 value survives f16 -> f32 -> f16. */
  for (uint32_t h = 0; h < 0x10000; h++) {
    if ((h & 0x7c00u) == 0x7c00u) continue;
    float f = basis_f16_to_f32((uint16_t)h);
    cr_assert_eq(basis_f32_to_f16(f), h, "fp16 0x%04x -> %g", h, f);
  }
  cr_assert_eq(basis_f32_to_f16(1.0f), 0x3c00);
  cr_assert_eq(basis_f32_to_f16(-2.0f), 0xc000);
  cr_assert_eq(basis_f32_to_f16(65504.0f), 0x7bff);
  cr_assert_eq(basis_f32_to_f16(65520.0f), 0x7c00);              /* rounds to inf */
  cr_assert_eq(basis_f32_to_f16(1.0f + ldexpf(1, -11)), 0x3c00); /* tie: to even */
  cr_assert_eq(basis_f32_to_f16(1.0f + 3 * ldexpf(1, -11)), 0x3c02);
  cr_assert_eq(basis_f32_to_f16(ldexpf(1, -24)), 0x0001); /* smallest subnormal */
  cr_assert_eq(basis_f32_to_f16(ldexpf(1, -26)), 0x0000);
  cr_assert(isnan(basis_f16_to_f32(basis_f32_to_f16(NAN))));
  cr_assert_eq(basis_f32_to_bf16(1.0f), 0x3f80);
  cr_assert_eq(basis_bf16_to_f32(0x3f80), 1.0f);
  cr_assert_eq(basis_f32_to_bf16(1.0f + ldexpf(1, -8)), 0x3f80); /* tie: to even */
  cr_assert_eq(basis_f32_to_bf16(1.0f + 3 * ldexpf(1, -8)), 0x3f82);
  cr_assert(isnan(basis_bf16_to_f32(basis_f32_to_bf16(NAN))));
}

/* The sparse contraction basis_edge runs equals the dense Q_J Y_J product,
 * and real-basis Q really is sparse (the speed of the basis stage rests on it). */
Test(basis, sparse_form_equals_the_dense_product) {
  struct basis_plan p;
  cr_assert_eq(basis_plan_init(&p, MAXD), 0);
  cr_assert_leq(p.n_nonzero, 4 * p.per_edge, "%u non-zeros for %zu values", p.n_nonzero, p.per_edge);
  for (size_t o = 0; o < p.per_edge; o++) /* products of two real harmonics meet at most 4 orders */
    cr_assert_leq(p.nz_start[o + 1] - p.nz_start[o], 4, "value %zu has %u non-zeros", o,
                  p.nz_start[o + 1] - p.nz_start[o]);
  float *b = malloc(p.per_edge * sizeof *b);
  uint64_t rng = 99;
  for (int trial = 0; trial < 20; trial++) {
    float x[3];
    double xd[3], y[SO3_SH_DIM(2 * MAXD)];
    for (int i = 0; i < 3; i++)
      xd[i] = x[i] = (float)(4 * so3_rng_uniform(&rng) - 2);
    so3_sh(2 * MAXD, xd, y);
    basis_edge(&p, x, b);
    for (int k = 0; k <= MAXD; k++)
      for (int l = 0; l <= MAXD; l++) {
        int nk = 2 * k + 1, nl = 2 * l + 1, nj = 2 * (k < l ? k : l) + 1;
        const double *q = p.q + p.q_offset[k][l];
        for (int jj = 0; jj < nj; jj++) {
          int J = abs(k - l) + jj, dJ = 2 * J + 1;
          for (int il = 0; il < nl; il++)
            for (int ik = 0; ik < nk; ik++) {
              double want = 0;
              for (int m = 0; m < dJ; m++)
                want += q[(il * nk + ik) * dJ + m] * y[J * J + m];
              double got = b[p.offset[k][l] + (size_t)((il * nj + jj) * nk + ik)];
              cr_assert_float_eq(got, want, 1e-6, "pair (%d,%d) J %d (%d,%d)", k, l, J, il, ik);
            }
          q += nl * nk * dJ;
        }
      }
  }
  free(b);
  basis_plan_free(&p);
}

/* A molecule's blob holds every edge's basis in order, and the parser
 * refuses anything whose header or size does not add up. */
Test(basis, blob_round_trip_and_checks) {
  struct basis_plan p;
  cr_assert_eq(basis_plan_init(&p, 2), 0);
  const float rel[4 * 3] = {1, 0, 0, 0.3f, -1.2f, 2, -0.5f, 0.5f, 0.1f, 0, 0, -1};
  float *want = malloc(4 * p.per_edge * sizeof *want), *got = malloc(4 * p.per_edge * sizeof *got);
  for (int e = 0; e < 4; e++)
    basis_edge(&p, rel + 3 * e, want + (size_t)e * p.per_edge);
  const enum basis_dtype types[3] = {BASIS_FP32, BASIS_FP16, BASIS_BF16};
  struct se3_error err;
  for (int t = 0; t < 3; t++) {
    uint8_t *blob;
    size_t len;
    cr_assert_eq(basis_to_blob(&p, types[t], rel, 4, &blob, &len), 0);
    cr_assert_eq(len, BASIS_BLOB_HEADER + 4 * p.per_edge * basis_dtype_size(types[t]) + 4);
    cr_assert_eq(blob[4] | blob[5] << 8, 2, "version");
    cr_assert_eq(crc32c(0, blob, len - 4),
                 (uint32_t)(blob[len - 4] | blob[len - 3] << 8 | blob[len - 2] << 16 | (uint32_t)blob[len - 1] << 24),
                 "trailer: CRC-32C of every byte before it");
    cr_assert_eq(memcmp(blob, "SE3B", 4), 0);
    struct basis_blob bb;
    cr_assert_eq(basis_blob_parse(blob, len, &bb, &err), 0, "%s", se3_error_str(&err).s);
    cr_assert_eq(bb.n_edges, 4);
    cr_assert_eq(bb.per_edge, p.per_edge);
    cr_assert_eq(bb.max_degree, 2);
    cr_assert_eq(bb.dtype, types[t]);
    basis_decode(bb.dtype, bb.data, 4 * p.per_edge, got);
    uint8_t *enc = malloc(4 * p.per_edge * 4);
    float *rounded = malloc(4 * p.per_edge * sizeof *rounded);
    basis_encode(types[t], want, 4 * p.per_edge, enc);
    basis_decode(types[t], enc, 4 * p.per_edge, rounded);
    cr_assert_eq(memcmp(got, rounded, 4 * p.per_edge * sizeof *got), 0, "dtype %d", t);
    free(enc);
    free(rounded);
    cr_assert_neq(basis_blob_parse(blob, len - 1, &bb, &err), 0);
    cr_assert(strstr(se3_error_str(&err).s, "header says"), "%s", se3_error_str(&err).s);
    blob[4] = 9;
    cr_assert_neq(basis_blob_parse(blob, len, &bb, &err), 0);
    cr_assert(strstr(se3_error_str(&err).s, "version 9"), "%s", se3_error_str(&err).s);
    blob[4] = 2;
    blob[16]++;
    cr_assert_neq(basis_blob_parse(blob, len, &bb, &err), 0);
    cr_assert(strstr(se3_error_str(&err).s, "values per edge"), "%s", se3_error_str(&err).s);
    blob[16]--;
    blob[0] = 'X';
    cr_assert_neq(basis_blob_parse(blob, len, &bb, &err), 0);
    free(blob);
  }
  free(want);
  free(got);
  basis_plan_free(&p);
}

/* A flipped bit anywhere in a stored basis (header fields the parser cannot
 * judge, or any value) is a checksum mismatch naming both values; before the
 * checksum a flipped value bit was read as a different basis. Version 1
 * blobs (no trailer) are still read. */
Test(basis, blob_checksum_catches_every_flipped_bit) {
  struct basis_plan p;
  cr_assert_eq(basis_plan_init(&p, 1), 0);
  const float rel[2 * 3] = {1, 0.5f, 0, 0.3f, -1.2f, 2};
  uint8_t *blob;
  size_t len;
  cr_assert_eq(basis_to_blob(&p, BASIS_FP16, rel, 2, &blob, &len), 0);
  uint8_t *c = malloc(len);
  struct basis_blob bb;
  struct se3_error err;
  for (size_t i = BASIS_BLOB_HEADER; i < len; i++)
    for (int bit = 0; bit < 8; bit++) {
      memcpy(c, blob, len);
      c[i] ^= (uint8_t)(1u << bit);
      cr_assert_neq(basis_blob_parse(c, len, &bb, &err), 0, "byte %zu bit %d accepted", i, bit);
      cr_assert(strstr(se3_error_str(&err).s, "basis blob checksum mismatch (stored 0x"), "byte %zu: %s", i,
                se3_error_str(&err).s);
    }
  memcpy(c, blob, len);
  c[4] = 1;
  cr_assert_eq(basis_blob_parse(c, len - 4, &bb, &err), 0, "%s", se3_error_str(&err).s);
  cr_assert_eq(bb.n_edges, 2);
  cr_assert_eq(memcmp(bb.data, blob + BASIS_BLOB_HEADER, len - 4 - BASIS_BLOB_HEADER), 0);
  free(c);
  free(blob);
  basis_plan_free(&p);
}

/* basis_encode/decode may use the processor's conversion instructions; they
 * must give the same bytes and values as the scalar conversions, including
 * ties, subnormals, overflow and signed zeros. */
Test(basis, vector_conversions_equal_scalar_ones) {
  enum { N = 4099 }; /* not a multiple of 8: the tail goes the scalar way */
  float *x = malloc(N * sizeof *x), *back = malloc(N * sizeof *back);
  uint8_t *enc = malloc(2 * N);
  uint64_t rng = 5;
  for (int i = 0; i < N; i++) {
    double u = so3_rng_uniform(&rng);
    int e = (int)(so3_rng_uniform(&rng) * 60) - 34; /* 2^-34 .. 2^25: subnormal to overflow */
    x[i] = (float)((u < 0.5 ? -1 : 1) * ldexp(1 + u, e));
  }
  x[0] = 0.0f, x[1] = -0.0f, x[2] = 1.0f + ldexpf(1, -11), x[3] = 65520.0f, x[4] = ldexpf(1, -25);
  for (int t = BASIS_FP16; t <= BASIS_BF16; t++) {
    basis_encode((enum basis_dtype)t, x, N, enc);
    for (int i = 0; i < N; i++) {
      uint16_t want = t == BASIS_FP16 ? basis_f32_to_f16(x[i]) : basis_f32_to_bf16(x[i]);
      uint16_t got = (uint16_t)(enc[2 * i] | enc[2 * i + 1] << 8);
      cr_assert_eq(got, want, "dtype %d, %.9g: 0x%04x, scalar 0x%04x", t, x[i], got, want);
    }
    basis_decode((enum basis_dtype)t, enc, N, back);
    for (int i = 0; i < N; i++) {
      uint16_t h = (uint16_t)(enc[2 * i] | enc[2 * i + 1] << 8);
      float want = t == BASIS_FP16 ? basis_f16_to_f32(h) : basis_bf16_to_f32(h);
      cr_assert(memcmp(&back[i], &want, 4) == 0, "dtype %d, 0x%04x: %.9g, scalar %.9g", t, h, back[i], want);
    }
  }
  free(x);
  free(back);
  free(enc);
}

/* The fused layout: the pairs of one input degree k form one dense matrix
 * F_k of fused_rows[k] x (2k+1), and F_k x applied to a degree-k input gives
 * every output degree's contraction at once (checked against the pair blocks). */
Test(basis, fused_blocks_are_the_pairs_of_one_input_degree) {
  struct basis_plan p;
  cr_assert_eq(basis_plan_init(&p, MAXD), 0);
  for (int k = 0; k <= MAXD; k++) {
    size_t end = k < MAXD ? p.offset[k + 1][0] : p.per_edge;
    cr_assert_eq(p.offset[k][0] + p.fused_rows[k] * (size_t)(2 * k + 1), end, "F_%d is not contiguous", k);
  }
  float *b = malloc(p.per_edge * sizeof *b), rel[3] = {0.7f, -0.4f, 1.9f}, x[7] = {0.3f, -1, 2, 0.5f, 0.1f, -0.7f, 1};
  basis_edge(&p, rel, b);
  for (int k = 0; k <= MAXD; k++) {
    int nk = 2 * k + 1;
    size_t row = 0;
    for (int l = 0; l <= MAXD; l++) {
      int nl = 2 * l + 1, nj = 2 * (k < l ? k : l) + 1;
      for (int il = 0; il < nl; il++)
        for (int jj = 0; jj < nj; jj++, row++) {
          double fused = 0, pair = 0;
          for (int ik = 0; ik < nk; ik++) {
            fused += b[p.offset[k][0] + row * (size_t)nk + (size_t)ik] * x[ik];
            pair += b[p.offset[k][l] + (size_t)((il * nj + jj) * nk + ik)] * x[ik];
          }
          cr_assert_eq(fused, pair, "k %d l %d row %zu", k, l, row);
        }
    }
    cr_assert_eq(row, p.fused_rows[k]);
  }
  free(b);
  basis_plan_free(&p);
}
