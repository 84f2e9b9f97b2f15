/* basis.c — per-edge equivariant bases and their fp16/bf16 encodings. */
#include "models/basis.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/crc32c.h"
#include "common/le.h"
#include "models/kernels/basis.h"
#include "models/so3.h"

static int imin(int a, int b) { return a < b ? a : b; }

size_t basis_pair_size(int k, int l) {
  return (size_t)(2 * l + 1) * (size_t)(2 * imin(k, l) + 1) * (size_t)(2 * k + 1);
}

void basis_plan_free(struct basis_plan *p) {
  free(p->q);
  free(p->nz_start);
  free(p->nz_y);
  free(p->nz_c);
  memset(p, 0, sizeof *p);
}

/* Q entries below this are zeros of the exact matrix that Racah's sum left
 * at round-off (|Q| entries that are really non-zero are >= 1e-3 for J <= 10). */
#define BASIS_Q_ZERO 1e-12

int basis_plan_init(struct basis_plan *p, int max_degree) {
  memset(p, 0, sizeof *p);
  if (max_degree < 0 || max_degree > BASIS_MAX_DEGREE) return -1;
  p->max_degree = max_degree;
  size_t n_q = 0;
  for (int k = 0; k <= max_degree; k++)
    for (int l = 0; l <= max_degree; l++) {
      p->offset[k][l] = p->per_edge;
      p->per_edge += basis_pair_size(k, l);
      p->fused_rows[k] += (size_t)(2 * l + 1) * (size_t)(2 * imin(k, l) + 1);
      p->q_offset[k][l] = n_q;
      for (int J = abs(k - l); J <= k + l; J++)
        n_q += (size_t)(2 * l + 1) * (size_t)(2 * k + 1) * (size_t)(2 * J + 1);
    }
  p->q = malloc(n_q * sizeof *p->q);
  p->nz_start = malloc((p->per_edge + 1) * sizeof *p->nz_start);
  /* every output has at most 2J+1 non-zeros; n_q bounds the total */
  p->nz_y = malloc(n_q * sizeof *p->nz_y);
  p->nz_c = malloc(n_q * sizeof *p->nz_c);
  if (!p->q || !p->nz_start || !p->nz_y || !p->nz_c) {
    basis_plan_free(p);
    return -1;
  }
  for (int k = 0; k <= max_degree; k++)
    for (int l = 0; l <= max_degree; l++) {
      double *q = p->q + p->q_offset[k][l];
      int nk = 2 * k + 1, nl = 2 * l + 1, nj = 2 * imin(k, l) + 1;
      for (int jj = 0; jj < nj; jj++) {
        int J = abs(k - l) + jj, dJ = 2 * J + 1;
        if (so3_q(k, l, J, q) != 0) {
          basis_plan_free(p);
          return -1;
        }
        q += (size_t)nl * (size_t)nk * (size_t)dJ;
      }
    }
  /* The sparse form, one list per output value in the stored order
   * [k][l][i_l][J'][i_k]: Q_J row (i_l, i_k) against Y_J at J*J + m. */
  uint32_t nz = 0;
  size_t o = 0;
  for (int k = 0; k <= max_degree; k++)
    for (int l = 0; l <= max_degree; l++) {
      int nk = 2 * k + 1, nl = 2 * l + 1, nj = 2 * imin(k, l) + 1;
      for (int il = 0; il < nl; il++)
        for (int jj = 0; jj < nj; jj++)
          for (int ik = 0; ik < nk; ik++, o++) {
            const double *qJ = p->q + p->q_offset[k][l];
            for (int j2 = 0; j2 < jj; j2++)
              qJ += (size_t)nl * (size_t)nk * (size_t)(2 * (abs(k - l) + j2) + 1);
            int J = abs(k - l) + jj, dJ = 2 * J + 1;
            const double *row = qJ + ((size_t)il * (size_t)nk + (size_t)ik) * (size_t)dJ;
            p->nz_start[o] = nz;
            for (int m = 0; m < dJ; m++)
              if (fabs(row[m]) > BASIS_Q_ZERO) {
                p->nz_y[nz] = (uint16_t)(J * J + m);
                p->nz_c[nz] = row[m];
                nz++;
              }
          }
    }
  p->nz_start[o] = nz;
  p->n_nonzero = nz;
  return 0;
}

void basis_edge(const struct basis_plan *p, const float rel[3], float *out) {
  double y[SO3_SH_DIM(2 * BASIS_MAX_DEGREE)];
  nn_k_basis_harmonics(p->max_degree, so3_sh_norm, rel, y);
  for (size_t o = 0; o < p->per_edge; o++)
    out[o] = (float)nn_k_basis_value(o, p->nz_start, p->nz_y, p->nz_c, y);
}

/* ---- reduced precision -------------------------------------------------- */

size_t basis_dtype_size(enum basis_dtype t) { return t == BASIS_FP32 ? 4 : 2; }

uint16_t basis_f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* NaN stays NaN */
  u += 0x7fffu + ((u >> 16) & 1u);                                          /* round to nearest even */
  return (uint16_t)(u >> 16);
}

float basis_bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

uint16_t basis_f32_to_f16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000u, absu = u & 0x7fffffffu;
  if (absu > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);  /* NaN */
  if (absu >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds beyond 65504: inf */
  if (absu < 0x38800000u) {                                   /* below 2^-14: subnormal or zero */
    if (absu < 0x33000000u) return (uint16_t)sign;            /* below half the smallest subnormal */
    uint32_t mant = (absu & 0x7fffffu) | 0x800000u;
    int shift = 126 - (int)(absu >> 23); /* 14 .. 24 */
    uint32_t half = mant >> shift, rest = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rest > mid || (rest == mid && (half & 1u))) half++;
    return (uint16_t)(sign | half);
  }
  uint32_t v = absu - 0x38000000u; /* rebias the exponent from 127 to 15 */
  uint32_t half = v >> 13, rest = v & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) half++;
  return (uint16_t)(sign | half);
}

float basis_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, u;
  if (e == 0x1fu) {
    u = sign | 0x7f800000u | (m << 13);
  } else if (e != 0) {
    u = sign | ((e + 112u) << 23) | (m << 13);
  } else if (m == 0) {
    u = sign;
  } else { /* subnormal: normalise */
    int s = 0;
    while (!(m & 0x400u)) {
      m <<= 1;
      s++;
    }
    u = sign | ((uint32_t)(113 - s) << 23) | ((m & 0x3ffu) << 13);
  }
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* fp16 conversions with the F16C instructions (x86-64, chosen at run time):
 * vcvtps2ph rounds to nearest even like basis_f32_to_f16, so the bytes are
 * the same (NaN payloads aside; bases hold none). 8 values per instruction. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define BASIS_HAVE_F16C 1
__attribute__((target("avx,f16c"))) static size_t enc_f16_f16c(const float *in, size_t n, uint8_t *o) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128((__m128i *)(void *)(o + 2 * i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT));
  return i;
}
__attribute__((target("avx,f16c"))) static size_t dec_f16_f16c(const uint8_t *p, size_t n, float *out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p + 2 * i))));
  return i;
}
static int have_f16c(void) {
  static int known = -1;
  if (known < 0) {
    __builtin_cpu_init();
    known = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
  }
  return known;
}
#endif

void basis_encode(enum basis_dtype t, const float *in, size_t n, void *out) {
  uint8_t *o = out;
  if (t == BASIS_FP32) {
    for (size_t i = 0; i < n; i++)
      le_put_f32(o + 4 * i, in[i]);
    return;
  }
  size_t i = 0;
#ifdef BASIS_HAVE_F16C
  if (t == BASIS_FP16 && have_f16c()) i = enc_f16_f16c(in, n, o);
#endif
  for (; i < n; i++) {
    uint16_t h = t == BASIS_FP16 ? basis_f32_to_f16(in[i]) : basis_f32_to_bf16(in[i]);
    o[2 * i] = (uint8_t)h; /* little-endian, like every blob */
    o[2 * i + 1] = (uint8_t)(h >> 8);
  }
}

void basis_decode(enum basis_dtype t, const void *in, size_t n, float *out) {
  const uint8_t *p = in;
  if (t == BASIS_FP32) {
    for (size_t i = 0; i < n; i++)
      out[i] = le_get_f32(p + 4 * i);
    return;
  }
  size_t i = 0;
#ifdef BASIS_HAVE_F16C
  if (t == BASIS_FP16 && have_f16c()) i = dec_f16_f16c(p, n, out);
#endif
  for (; i < n; i++) {
    uint16_t h = (uint16_t)(p[2 * i] | (p[2 * i + 1] << 8));
    out[i] = t == BASIS_FP16 ? basis_f16_to_f32(h) : basis_bf16_to_f32(h);
  }
}

/* ---- the stored blob ------------------------------------------------------ */

int basis_to_blob(const struct basis_plan *p, enum basis_dtype t, const float *rel_pos, uint32_t n_edges,
                  uint8_t **blob, size_t *len) {
  size_t vsize = basis_dtype_size(t), per = p->per_edge;
  size_t n = BASIS_BLOB_HEADER + (size_t)n_edges * per * vsize + BASIS_BLOB_CRC;
  uint8_t *b = malloc(n);
  float *work = malloc(per * sizeof *work);
  if (!b || !work) {
    free(b);
    free(work);
    return -1;
  }
  memcpy(b, BASIS_BLOB_MAGIC, 4);
  le_put_u16(b + 4, BASIS_BLOB_VERSION);
  le_put_u16(b + 6, (uint16_t)t);
  le_put_u32(b + 8, n_edges);
  le_put_u16(b + 12, (uint16_t)p->max_degree);
  le_put_u16(b + 14, 0);
  le_put_u32(b + 16, (uint32_t)per);
  for (uint32_t e = 0; e < n_edges; e++) {
    basis_edge(p, rel_pos + 3 * (size_t)e, work);
    basis_encode(t, work, per, b + BASIS_BLOB_HEADER + (size_t)e * per * vsize);
  }
  free(work);
  crc32c_seal(b, n);
  *blob = b;
  *len = n;
  return 0;
}

int basis_blob_parse(const uint8_t *blob, size_t len, struct basis_blob *b, struct se3_error *err) {
  memset(b, 0, sizeof *b);
  if (len < BASIS_BLOB_HEADER || memcmp(blob, BASIS_BLOB_MAGIC, 4) != 0) {
    se3_error_set(err, SE3_ERR_DB, "not a basis blob (%zu bytes)", len);
    return -1;
  }
  unsigned ver = le_get_u16(blob + 4), dt = le_get_u16(blob + 6), md = le_get_u16(blob + 12);
  if (ver != BASIS_BLOB_VERSION && ver != 1) {
    se3_error_set(err, SE3_ERR_DB, "basis blob version %u (this se3screen reads 1 and %d)", ver, BASIS_BLOB_VERSION);
    return -1;
  }
  size_t crc = ver >= 2 ? BASIS_BLOB_CRC : 0; /* version 1 has no checksum */
  if (dt > BASIS_BF16 || md > BASIS_MAX_DEGREE || le_get_u16(blob + 14) != 0) {
    se3_error_set(err, SE3_ERR_DB, "basis blob header is corrupt (dtype %u, max_degree %u)", dt, md);
    return -1;
  }
  uint32_t n_edges = le_get_u32(blob + 8), per = le_get_u32(blob + 16);
  size_t want_per = 0;
  for (int k = 0; k <= (int)md; k++)
    for (int l = 0; l <= (int)md; l++)
      want_per += basis_pair_size(k, l);
  if (per != want_per) {
    se3_error_set(err, SE3_ERR_DB, "basis blob has %u values per edge, degree %u needs %zu", per, md, want_per);
    return -1;
  }
  size_t want = BASIS_BLOB_HEADER + (size_t)n_edges * per * basis_dtype_size((enum basis_dtype)dt) + crc;
  if (len != want) {
    se3_error_set(err, SE3_ERR_DB, "basis blob is %zu bytes, its header says %zu", len, want);
    return -1;
  }
  uint32_t stored, computed;
  if (crc && crc32c_verify(blob, len, &stored, &computed)) {
    se3_error_set(err, SE3_ERR_DB, "basis blob checksum mismatch (stored 0x%08x, computed 0x%08x)", (unsigned)stored,
                  (unsigned)computed);
    return -1;
  }
  b->max_degree = (int)md;
  b->dtype = (enum basis_dtype)dt;
  b->n_edges = n_edges;
  b->per_edge = per;
  b->data = blob + BASIS_BLOB_HEADER;
  return 0;
}
