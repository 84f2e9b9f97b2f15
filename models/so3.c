/* so3.c — real spherical harmonics, real Wigner-D matrices, real-basis
 * Clebsch–Gordan (Q) matrices and random rotations (conventions in so3.h).
 *
 * Q_J is built in three steps:
 *   1. the complex Clebsch–Gordan coefficients C[(m1, m2), M] =
 *      <l m1 k m2 | J M> from Racah's closed form, in long double;
 *   2. Q = (U_l (x) U_k) C U_J^H, where U_l is the unitary matrix taking the
 *      Condon–Shortley complex harmonics to our real ones (row: real order,
 *      column: complex order; at most two non-zeros per row, see u_row);
 *   3. Q is real up to one global phase (Schur: the intertwiner is unique up
 *      to a scalar and a real one exists); remove the phase of the largest
 *      entry, keep the real part, normalise, fix the sign.
 * Why step 2 intertwines: with Y_c the complex harmonics, Y_c(R x) =
 * conj(D^l(R)) Y_c(x) where D^l is the standard Wigner matrix; CG coefficients
 * are real, so (conj D^l (x) conj D^k) C = C conj D^J; and our real harmonics
 * are U Y_c, so their D_l = U conj(D^l) U^H. */
#include "models/so3.h"

#include <complex.h>
#include <stdlib.h>
#include <string.h>

const double so3_sh_norm[SO3_SH_NNORM] = SO3_SH_NORM_INIT;
const float so3_sh_norm_f[SO3_SH_NNORM] = SO3_SH_NORM_INIT;

static const double so3_pi = 3.14159265358979323846;

/* ---- spherical harmonics ------------------------------------------------- */

void so3_sh(int lmax, const double xyz[3], double *out) { so3_sh_body(lmax, so3_sh_norm, xyz[0], xyz[1], xyz[2], out); }

void so3_sh_f(int lmax, const float xyz[3], float *out) {
  so3_sh_body_f(lmax, so3_sh_norm_f, xyz[0], xyz[1], xyz[2], out);
}

/* ---- Wigner-D -------------------------------------------------------------- */

/* Gauss–Legendre nodes z[0..n-1] and weights w[] on [-1, 1] (exact for
 * polynomials of degree <= 2n-1), by Newton's method on P_n. */
static void gauss_legendre(int n, double *z, double *w) {
  for (int i = 0; i < n; i++) {
    double x = cos(so3_pi * (i + 0.75) / (n + 0.5)), dp = 1.0;
    for (int it = 0; it < 100; it++) {
      double p0 = 1.0, p1 = x; /* P_{k-1}, P_k */
      for (int k = 2; k <= n; k++) {
        double p = ((2 * k - 1) * x * p1 - (k - 1) * p0) / k;
        p0 = p1;
        p1 = p;
      }
      dp = n * (x * p1 - p0) / (x * x - 1.0);
      double dx = p1 / dp;
      x -= dx;
      if (fabs(dx) < 1e-16) break;
    }
    z[i] = x;
    w[i] = 2.0 / ((1.0 - x * x) * dp * dp);
  }
}

void so3_wigner_d(int l, const double R[9], double *D) {
  if (l < 0 || l > SO3_LMAX) return;
  int n = 2 * l + 1;
  double z[SO3_LMAX + 1], w[SO3_LMAX + 1];
  double y1[SO3_SH_DIM(SO3_LMAX)], y2[SO3_SH_DIM(SO3_LMAX)];
  gauss_legendre(l + 1, z, w);
  memset(D, 0, (size_t)(n * n) * sizeof *D);
  for (int i = 0; i <= l; i++) {
    double st = sqrt(1.0 - z[i] * z[i]);
    for (int j = 0; j < n; j++) {
      double phi = 2.0 * so3_pi * j / n, wt = w[i] * 2.0 * so3_pi / n;
      double x[3] = {st * cos(phi), st * sin(phi), z[i]}, rx[3];
      so3_matvec(R, x, rx);
      so3_sh(l, x, y1);
      so3_sh(l, rx, y2);
      const double *a = y1 + l * l, *b = y2 + l * l;
      for (int r = 0; r < n; r++) {
        double br = wt * b[r];
        for (int c = 0; c < n; c++)
          D[r * n + c] += br * a[c];
      }
    }
  }
}

/* ---- Clebsch–Gordan -------------------------------------------------------- */

#define FACT_MAX (3 * SO3_LMAX + 1) /* j1 + j2 + J + 1 with all three <= SO3_LMAX */

static void fact_table(long double *f) {
  f[0] = 1.0L;
  for (int i = 1; i <= FACT_MAX; i++)
    f[i] = f[i - 1] * i;
}

/* <j1 m1 j2 m2 | J M> by Racah's formula; caller guarantees the triangle
 * condition, |m| <= j and M = m1 + m2. */
static long double cg_racah(const long double *f, int j1, int m1, int j2, int m2, int J, int M) {
  long double pre = sqrtl((2 * J + 1) * f[J + j1 - j2] * f[J - j1 + j2] * f[j1 + j2 - J] / f[j1 + j2 + J + 1]) *
                    sqrtl(f[J + M] * f[J - M] * f[j1 - m1] * f[j1 + m1] * f[j2 - m2] * f[j2 + m2]);
  int tmin = 0, tmax = j1 + j2 - J;
  if (j2 - J - m1 > tmin) tmin = j2 - J - m1;
  if (j1 - J + m2 > tmin) tmin = j1 - J + m2;
  if (j1 - m1 < tmax) tmax = j1 - m1;
  if (j2 + m2 < tmax) tmax = j2 + m2;
  long double sum = 0.0L;
  for (int t = tmin; t <= tmax; t++) {
    long double d =
        f[t] * f[j1 + j2 - J - t] * f[j1 - m1 - t] * f[j2 + m2 - t] * f[J - j2 + m1 + t] * f[J - j1 - m2 + t];
    sum += (t % 2 ? -1.0L : 1.0L) / d;
  }
  return pre * sum;
}

/* Row m (real order) of U_l: real Y_lm = sum_q coef[q] complex Y_l^{col[q]}.
 *   m > 0: ((-1)^m Y^m + Y^-m) / sqrt2
 *   m < 0: i (Y^-|m| - (-1)^|m| Y^|m|) / sqrt2
 *   m = 0: Y^0
 * Returns the number of terms (1 or 2). */
static int u_row(int m, int col[2], double complex coef[2]) {
  const double h = 0.70710678118654752440; /* 1/sqrt2 */
  if (m == 0) {
    col[0] = 0;
    coef[0] = 1.0;
    return 1;
  }
  int a = m > 0 ? m : -m;
  double sgn = a % 2 ? -1.0 : 1.0;
  col[0] = a;
  col[1] = -a;
  if (m > 0) {
    coef[0] = sgn * h;
    coef[1] = h;
  } else {
    coef[0] = -sgn * h * I;
    coef[1] = h * I;
  }
  return 2;
}

int so3_q(int k, int l, int J, double *out) {
  if (k < 0 || l < 0 || J < 0 || k > SO3_LMAX || l > SO3_LMAX || J > SO3_LMAX) return -1;
  if (J < (k > l ? k - l : l - k) || J > k + l || !out) return -1;
  int nl = 2 * l + 1, nk = 2 * k + 1, nj = 2 * J + 1;
  long double f[FACT_MAX + 1];
  fact_table(f);
  int n = nl * nk * nj, big = 0;
  /* Complex CG, C[(i1 * nk + i2) * nj + iM], zero unless M = m1 + m2. */
  double *cg = calloc((size_t)n, sizeof *cg);
  double complex *q = malloc((size_t)n * sizeof *q);
  if (!cg || !q) {
    free(cg);
    free(q);
    return -1;
  }
  for (int m1 = -l; m1 <= l; m1++)
    for (int m2 = -k; m2 <= k; m2++) {
      int M = m1 + m2;
      if (M < -J || M > J) continue;
      cg[((m1 + l) * nk + (m2 + k)) * nj + (M + J)] = (double)cg_racah(f, l, m1, k, m2, J, M);
    }
  /* Q = (U_l (x) U_k) C U_J^H, entry by entry (at most 8 terms each). */
  for (int a = 0; a < nl; a++) {
    int ca[2], na;
    double complex ua[2];
    na = u_row(a - l, ca, ua);
    for (int b = 0; b < nk; b++) {
      int cb[2], nb;
      double complex ub[2];
      nb = u_row(b - k, cb, ub);
      for (int c = 0; c < nj; c++) {
        int cc[2], nc;
        double complex uc[2], s = 0.0;
        nc = u_row(c - J, cc, uc);
        for (int i = 0; i < na; i++)
          for (int j = 0; j < nb; j++)
            for (int t = 0; t < nc; t++)
              if (ca[i] + cb[j] == cc[t])
                s += ua[i] * ub[j] * conj(uc[t]) * cg[((ca[i] + l) * nk + (cb[j] + k)) * nj + (cc[t] + J)];
        int e = (a * nk + b) * nj + c;
        q[e] = s;
        if (cabs(s) > cabs(q[big])) big = e;
      }
    }
  }
  /* Remove the global phase, keep the real part, normalise, fix the sign. */
  double complex ph = conj(q[big]) / cabs(q[big]);
  double norm = 0.0;
  for (int e = 0; e < n; e++) {
    out[e] = creal(q[e] * ph);
    norm += out[e] * out[e];
  }
  norm = 1.0 / sqrt(norm);
  double sign = 0.0;
  for (int e = 0; e < n; e++) {
    out[e] *= norm;
    if (sign == 0.0 && fabs(out[e]) > SO3_Q_SIGN_EPS) sign = out[e] > 0 ? 1.0 : -1.0;
  }
  for (int e = 0; e < n; e++)
    out[e] *= sign;
  free(cg);
  free(q);
  return 0;
}

/* ---- rotations and small helpers ------------------------------------------- */

uint64_t so3_rng_next(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double so3_rng_uniform(uint64_t *state) { return (double)(so3_rng_next(state) >> 11) * 0x1.0p-53; }

void so3_quat_to_matrix(const double q[4], double R[9]) {
  double n = sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
  if (n == 0.0) {
    static const double id[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
    memcpy(R, id, sizeof id);
    return;
  }
  double w = q[0] / n, x = q[1] / n, y = q[2] / n, z = q[3] / n;
  R[0] = 1 - 2 * (y * y + z * z);
  R[1] = 2 * (x * y - w * z);
  R[2] = 2 * (x * z + w * y);
  R[3] = 2 * (x * y + w * z);
  R[4] = 1 - 2 * (x * x + z * z);
  R[5] = 2 * (y * z - w * x);
  R[6] = 2 * (x * z - w * y);
  R[7] = 2 * (y * z + w * x);
  R[8] = 1 - 2 * (x * x + y * y);
}

void so3_random_rotation(uint64_t *state, double R[9]) {
  double u1 = so3_rng_uniform(state), u2 = so3_rng_uniform(state), u3 = so3_rng_uniform(state);
  double a = sqrt(1.0 - u1), b = sqrt(u1);
  double q[4] = {b * cos(2 * so3_pi * u3), a * sin(2 * so3_pi * u2), a * cos(2 * so3_pi * u2),
                 b * sin(2 * so3_pi * u3)};
  so3_quat_to_matrix(q, R);
}

void so3_matvec(const double R[9], const double v[3], double out[3]) {
  double x = v[0], y = v[1], z = v[2];
  for (int i = 0; i < 3; i++)
    out[i] = R[3 * i] * x + R[3 * i + 1] * y + R[3 * i + 2] * z;
}

void so3_matmul(const double A[9], const double B[9], double C[9]) {
  double t[9];
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++)
      t[3 * i + j] = A[3 * i] * B[j] + A[3 * i + 1] * B[3 + j] + A[3 * i + 2] * B[6 + j];
  memcpy(C, t, sizeof t);
}
