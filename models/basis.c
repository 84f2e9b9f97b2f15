/* basis.c — per-edge equivariant bases and their fp16/bf16 encodings. */
#include "models/basis.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/so3.h"

static int imin(int a, int b) { return a < b ? a : b; }

size_t basis_pair_size(int k, int l) {
  return (size_t)(2 * l + 1) * (size_t)(2 * imin(k, l) + 1) * (size_t)(2 * k + 1);
}

void basis_plan_free(struct basis_plan *p) {
  free(p->q);
  memset(p, 0, sizeof *p);
}

int basis_plan_init(struct basis_plan *p, int max_degree) {
  memset(p, 0, sizeof *p);
  if (max_degree < 0 || max_degree > BASIS_MAX_DEGREE) return -1;
  p->max_degree = max_degree;
  size_t n_q = 0;
  for (int k = 0; k <= max_degree; k++)
    for (int l = 0; l <= max_degree; l++) {
      p->offset[k][l] = p->per_edge;
      p->per_edge += basis_pair_size(k, l);
      p->q_offset[k][l] = n_q;
      for (int J = abs(k - l); J <= k + l; J++)
        n_q += (size_t)(2 * l + 1) * (size_t)(2 * k + 1) * (size_t)(2 * J + 1);
    }
  p->q = malloc(n_q * sizeof *p->q);
  double *tmp = malloc((size_t)(2 * max_degree + 1) * (2 * max_degree + 1) * (4 * max_degree + 1) * sizeof *tmp);
  if (!p->q || !tmp) {
    free(tmp);
    basis_plan_free(p);
    return -1;
  }
  for (int k = 0; k <= max_degree; k++)
    for (int l = 0; l <= max_degree; l++) {
      float *q = p->q + p->q_offset[k][l];
      for (int J = abs(k - l); J <= k + l; J++) {
        size_t n = (size_t)(2 * l + 1) * (size_t)(2 * k + 1) * (size_t)(2 * J + 1);
        if (so3_q(k, l, J, tmp) != 0) {
          free(tmp);
          basis_plan_free(p);
          return -1;
        }
        for (size_t i = 0; i < n; i++)
          q[i] = (float)tmp[i];
        q += n;
      }
    }
  free(tmp);
  return 0;
}

void basis_edge(const struct basis_plan *p, const float rel[3], float *out) {
  float y[SO3_SH_DIM(2 * BASIS_MAX_DEGREE)];
  so3_sh_f(2 * p->max_degree, rel, y);
  for (int k = 0; k <= p->max_degree; k++)
    for (int l = 0; l <= p->max_degree; l++) {
      const float *q = p->q + p->q_offset[k][l];
      float *b = out + p->offset[k][l];
      int nk = 2 * k + 1, nl = 2 * l + 1, nj = 2 * imin(k, l) + 1;
      for (int jj = 0; jj < nj; jj++) {
        int J = abs(k - l) + jj, dJ = 2 * J + 1;
        const float *yJ = y + J * J;
        /* Q_J rows are (i_l, i_k), l major, each of 2J+1 entries. */
        for (int il = 0; il < nl; il++)
          for (int ik = 0; ik < nk; ik++) {
            const float *row = q + ((size_t)il * (size_t)nk + (size_t)ik) * (size_t)dJ;
            float s = 0;
            for (int m = 0; m < dJ; m++)
              s += row[m] * yJ[m];
            b[((size_t)il * (size_t)nj + (size_t)jj) * (size_t)nk + (size_t)ik] = s;
          }
        q += (size_t)nl * (size_t)nk * (size_t)dJ;
      }
    }
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

void basis_encode(enum basis_dtype t, const float *in, size_t n, void *out) {
  uint8_t *o = out;
  if (t == BASIS_FP32) {
    for (size_t i = 0; i < n; i++) {
      uint32_t u;
      memcpy(&u, &in[i], 4);
      for (int b = 0; b < 4; b++)
        o[4 * i + (size_t)b] = (uint8_t)(u >> (8 * b));
    }
    return;
  }
  for (size_t i = 0; i < n; i++) {
    uint16_t h = t == BASIS_FP16 ? basis_f32_to_f16(in[i]) : basis_f32_to_bf16(in[i]);
    o[2 * i] = (uint8_t)h; /* little-endian, like every blob */
    o[2 * i + 1] = (uint8_t)(h >> 8);
  }
}

void basis_decode(enum basis_dtype t, const void *in, size_t n, float *out) {
  const uint8_t *p = in;
  if (t == BASIS_FP32) {
    for (size_t i = 0; i < n; i++) {
      uint32_t u = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
                   (uint32_t)p[4 * i + 3] << 24;
      memcpy(&out[i], &u, 4);
    }
    return;
  }
  for (size_t i = 0; i < n; i++) {
    uint16_t h = (uint16_t)(p[2 * i] | (p[2 * i + 1] << 8));
    out[i] = t == BASIS_FP16 ? basis_f16_to_f32(h) : basis_bf16_to_f32(h);
  }
}
