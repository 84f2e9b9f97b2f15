/* test_so3.c — the SO(3) conventions of models/so3.h, proved: spherical
 * harmonics orthonormal (quadrature), equal to the trigonometric definition
 * and to closed forms, degree 1 = sqrt(3/(4 pi)) (y, z, x); Wigner-D matrices
 * equivariant on fresh directions, orthogonal, a homomorphism; Q matrices
 * intertwining, orthonormal across J, complete, normalised and signed as
 * documented, with invalid arguments refused; the equivariant kernel built
 * from them; the float harmonics against the double ones; the zero vector;
 * random rotations. Tolerances are 1e-10 unless stated. */
#include <criterion/criterion.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/so3.h"

/* ---- helpers ---------------------------------------------------------------- */

#define NSH SO3_SH_DIM(SO3_LMAX)
#define DMAX (2 * SO3_LMAX + 1)
static const double PI = 3.14159265358979323846;

/* A direction uniform on the unit sphere. */
static void rand_dir(uint64_t *s, double x[3]) {
  double z = 2.0 * so3_rng_uniform(s) - 1.0, p = 2.0 * PI * so3_rng_uniform(s), r = sqrt(1.0 - z * z);
  x[0] = r * cos(p);
  x[1] = r * sin(p);
  x[2] = z;
}

/* Gauss–Legendre nodes and weights on [-1, 1] (Newton on P_n), for the
 * orthonormality quadrature; written here so as not to lean on the library. */
static void gl_nodes(int n, double *z, double *w) {
  for (int i = 0; i < n; i++) {
    double x = cos(PI * (4.0 * i + 3.0) / (4.0 * n + 2.0)), d = 0.0;
    for (int it = 0; it < 50; it++) {
      double a = 1.0, b = x;
      for (int k = 2; k <= n; k++) {
        double c = ((2.0 * k - 1.0) * x * b - (k - 1.0) * a) / k;
        a = b;
        b = c;
      }
      d = n * (a - x * b) / (1.0 - x * x);
      x -= b / d;
    }
    z[i] = x;
    w[i] = 2.0 / ((1.0 - x * x) * d * d);
  }
}

/* Reference associated Legendre function WITHOUT Condon–Shortley phase,
 * (1-t^2)^(m/2) d^m/dt^m P_l(t), from the explicit coefficients of P_l. */
static double legendre_ref(int l, int m, double t) {
  double c[SO3_LMAX + 1] = {0};
  for (int k = 0; 2 * k <= l; k++) { /* P_l = 2^-l sum (-1)^k C(l,k) C(2l-2k,l) t^(l-2k) */
    double v = ldexp(1.0, -l) * (k % 2 ? -1.0 : 1.0);
    v *= exp(lgamma(l + 1.0) - lgamma(k + 1.0) - lgamma(l - k + 1.0));
    v *= exp(lgamma(2.0 * l - 2 * k + 1.0) - lgamma(l + 1.0) - lgamma(l - 2.0 * k + 1.0));
    c[l - 2 * k] = round(v * ldexp(1.0, l)) * ldexp(1.0, -l); /* exact dyadic rational */
  }
  for (int d = 0; d < m; d++) { /* differentiate m times */
    for (int j = 0; j < l; j++)
      c[j] = (j + 1) * c[j + 1];
    c[l] = 0.0;
  }
  double p = 0.0;
  for (int j = l; j >= 0; j--)
    p = p * t + c[j];
  return pow(1.0 - t * t, 0.5 * m) * p;
}

/* Reference real harmonic Y_lm from angles and libm trigonometry. */
static double sh_ref(int l, int m, const double x[3]) {
  double r = sqrt(x[0] * x[0] + x[1] * x[1] + x[2] * x[2]), t = x[2] / r, ph = atan2(x[1], x[0]);
  int a = abs(m);
  double n = sqrt((2 * l + 1) / (4.0 * PI) * exp(lgamma(l - a + 1.0) - lgamma(l + a + 1.0)));
  double p = n * legendre_ref(l, a, t);
  if (m > 0) return sqrt(2.0) * p * cos(a * ph);
  if (m < 0) return sqrt(2.0) * p * sin(a * ph);
  return p;
}

/* Kronecker (D_l (x) D_k) Q - Q D_J, max abs entry. Q column c reshaped to the
 * (2l+1)x(2k+1) matrix M_c (l index major); (D_l (x) D_k) q = vec(D_l M D_k^T). */
static double intertwine_err(int k, int l, int J, const double *q, const double *dl, const double *dk,
                             const double *dj) {
  int nl = 2 * l + 1, nk = 2 * k + 1, nj = 2 * J + 1;
  double err = 0.0, t[DMAX * DMAX];
  for (int c = 0; c < nj; c++) {
    for (int a = 0; a < nl; a++) /* t = M_c D_k^T */
      for (int b = 0; b < nk; b++) {
        double s = 0.0;
        for (int e = 0; e < nk; e++)
          s += q[(a * nk + e) * nj + c] * dk[b * nk + e];
        t[a * nk + b] = s;
      }
    for (int a = 0; a < nl; a++)
      for (int b = 0; b < nk; b++) {
        double lhs = 0.0, rhs = 0.0;
        for (int e = 0; e < nl; e++)
          lhs += dl[a * nl + e] * t[e * nk + b];
        for (int e = 0; e < nj; e++)
          rhs += q[(a * nk + b) * nj + e] * dj[e * nj + c];
        err = fmax(err, fabs(lhs - rhs));
      }
  }
  return err;
}

/* D_l for l = 0..SO3_LMAX; d[l] points into buf. */
static void wigner_all(const double R[9], double *buf, double **d) {
  for (int l = 0; l <= SO3_LMAX; l++) {
    d[l] = buf;
    so3_wigner_d(l, R, buf);
    buf += (2 * l + 1) * (2 * l + 1);
  }
}
#define WBUF 1771 /* sum of (2l+1)^2 for l <= 10 */

/* ---- spherical harmonics ---------------------------------------------------- */

Test(so3, sh_orthonormal_by_quadrature) {
  /* 16 Gauss–Legendre nodes x 32 azimuths: exact for degree <= 31 > 20. */
  enum { NZ = 16, NP = 32 };
  double z[NZ], w[NZ], y[NSH];
  static double g[NSH * NSH];
  memset(g, 0, sizeof g);
  gl_nodes(NZ, z, w);
  for (int i = 0; i < NZ; i++)
    for (int j = 0; j < NP; j++) {
      double p = 2.0 * PI * (j + 0.3) / NP, s = sqrt(1.0 - z[i] * z[i]);
      double x[3] = {s * cos(p), s * sin(p), z[i]}, wt = w[i] * 2.0 * PI / NP;
      so3_sh(SO3_LMAX, x, y);
      for (int a = 0; a < NSH; a++)
        for (int b = 0; b < NSH; b++)
          g[a * NSH + b] += wt * y[a] * y[b];
    }
  double err = 0.0;
  int worst = 0;
  for (int a = 0; a < NSH; a++)
    for (int b = 0; b < NSH; b++) {
      double e = fabs(g[a * NSH + b] - (a == b));
      if (e > err) err = e, worst = a * NSH + b;
    }
  cr_assert(err < 1e-10, "Gram matrix off identity by %g at (%d, %d)", err, worst / NSH, worst % NSH);
}

Test(so3, sh_norm_table_matches_formula) {
  for (int l = 0; l <= SO3_LMAX; l++)
    for (int m = 0; m <= l; m++) {
      double k = sqrt((2 * l + 1) / (4.0 * PI) * exp(lgamma(l - m + 1.0) - lgamma(l + m + 1.0)));
      if (m > 0) k *= sqrt(2.0);
      double t = so3_sh_norm[l * (l + 1) / 2 + m];
      cr_assert(fabs(t - k) <= 1e-13 * k, "K(%d,%d) = %.17g, formula %.17g", l, m, t, k);
      cr_assert(so3_sh_norm_f[l * (l + 1) / 2 + m] == (float)t);
    }
}

Test(so3, sh_matches_trigonometric_definition) {
  uint64_t s = 11;
  double y[NSH], err = 0.0;
  for (int n = 0; n < 300; n++) {
    double x[3];
    rand_dir(&s, x);
    if (n == 0) x[0] = 0, x[1] = 0, x[2] = 1;  /* north pole */
    if (n == 1) x[0] = 0, x[1] = 0, x[2] = -1; /* south pole */
    so3_sh(SO3_LMAX, x, y);
    for (int l = 0; l <= SO3_LMAX; l++)
      for (int m = -l; m <= l; m++) {
        double e = fabs(y[l * l + l + m] - sh_ref(l, m, x));
        cr_assert(e < 1e-11, "Y(%d,%d) at (%g,%g,%g): %.15g vs %.15g", l, m, x[0], x[1], x[2], y[l * l + l + m],
                  sh_ref(l, m, x));
        err = fmax(err, e);
      }
  }
  /* Closed forms of degree 2 (no Condon–Shortley phase: all positive). */
  double x[3] = {0.36, -0.48, 0.8}, c = 0.5 * sqrt(15.0 / PI);
  double want[5] = {c * x[0] * x[1], c * x[1] * x[2], 0.25 * sqrt(5.0 / PI) * (3 * x[2] * x[2] - 1), c * x[0] * x[2],
                    0.5 * c * (x[0] * x[0] - x[1] * x[1])};
  so3_sh(2, x, y);
  for (int i = 0; i < 5; i++)
    cr_assert(fabs(y[4 + i] - want[i]) < 1e-14, "Y_2[%d] = %.17g, want %.17g", i, y[4 + i], want[i]);
}

Test(so3, degree1_is_yzx) {
  uint64_t s = 5;
  const double c = sqrt(3.0 / (4.0 * PI));
  double y[4];
  for (int n = 0; n < 100; n++) {
    double x[3];
    rand_dir(&s, x);
    so3_sh(1, x, y);
    cr_assert(fabs(y[0] - 1.0 / sqrt(4.0 * PI)) < 1e-15);
    cr_assert(fabs(y[1] - c * x[1]) < 1e-15 && fabs(y[2] - c * x[2]) < 1e-15 && fabs(y[3] - c * x[0]) < 1e-15,
              "Y_1 = (%g, %g, %g), x = (%g, %g, %g)", y[1], y[2], y[3], x[0], x[1], x[2]);
  }
  /* D_1(R) = P R P^T with P: (x, y, z) -> (y, z, x), i.e. D_1[a][b] = R[p(a)][p(b)], p = (1, 2, 0). */
  const int p[3] = {1, 2, 0};
  for (int n = 0; n < 20; n++) {
    double R[9], d[9];
    so3_random_rotation(&s, R);
    so3_wigner_d(1, R, d);
    for (int a = 0; a < 3; a++)
      for (int b = 0; b < 3; b++)
        cr_assert(fabs(d[a * 3 + b] - R[p[a] * 3 + p[b]]) < 1e-12, "D_1[%d][%d] = %g, R = %g", a, b, d[a * 3 + b],
                  R[p[a] * 3 + p[b]]);
  }
}

Test(so3, sh_float_matches_double) {
  uint64_t s = 17;
  float yf[NSH];
  double yd[NSH], err[SO3_LMAX + 1] = {0};
  for (int n = 0; n < 20000; n++) {
    double x[3];
    rand_dir(&s, x);
    if (n % 2) /* and vectors of other lengths */
      for (int i = 0; i < 3; i++)
        x[i] *= 1e-3 + 20.0 * so3_rng_uniform(&s);
    float xf[3] = {(float)x[0], (float)x[1], (float)x[2]};
    double xd[3] = {xf[0], xf[1], xf[2]};
    so3_sh_f(SO3_LMAX, xf, yf);
    so3_sh(SO3_LMAX, xd, yd);
    for (int l = 0; l <= SO3_LMAX; l++)
      for (int i = l * l; i < (l + 1) * (l + 1); i++)
        err[l] = fmax(err[l], fabs((double)yf[i] - yd[i]));
  }
  for (int l = 0; l <= SO3_LMAX; l++) {
    cr_log_info("so3_sh_f: degree %d, max abs error %.3g (bound %.3g)", l, err[l], 2e-7 * (l * l + 1));
    cr_assert(err[l] <= 2e-7 * (l * l + 1), "so3_sh_f degree %d differs from so3_sh by %g", l, err[l]);
  }
}

Test(so3, sh_zero_vector_and_scaling) {
  double y[NSH], yu[NSH];
  float yf[NSH];
  const double zero[3] = {0, 0, -0.0};
  const float zf[3] = {0, -0.0f, 0};
  memset(y, 0x7f, sizeof y);
  memset(yf, 0x7f, sizeof yf);
  so3_sh(SO3_LMAX, zero, y);
  so3_sh_f(SO3_LMAX, zf, yf);
  cr_assert(fabs(y[0] - 1.0 / sqrt(4.0 * PI)) < 1e-16);
  cr_assert(fabsf(yf[0] - (float)(1.0 / sqrt(4.0 * PI))) < 1e-7f);
  for (int i = 1; i < NSH; i++)
    cr_assert(y[i] == 0.0 && yf[i] == 0.0f, "component %d not zero", i);
  /* Y_0 is the same constant for every direction. */
  uint64_t s = 3;
  double x[3];
  rand_dir(&s, x);
  so3_sh(0, x, y);
  cr_assert(fabs(y[0] - 1.0 / sqrt(4.0 * PI)) < 1e-16);
  /* Tiny (even subnormal) and huge vectors are normalised without loss. */
  so3_sh(SO3_LMAX, x, yu);
  const double scale[] = {1e-310, 1e-200, 1e-20, 3.7, 1e20, 1e300};
  for (size_t k = 0; k < sizeof scale / sizeof *scale; k++) {
    double xs[3] = {x[0] * scale[k], x[1] * scale[k], x[2] * scale[k]};
    so3_sh(SO3_LMAX, xs, y);
    for (int i = 0; i < NSH; i++)
      cr_assert(fabs(y[i] - yu[i]) < 1e-12, "scale %g, component %d", scale[k], i);
  }
  const float tiny[3] = {1e-40f, -2e-40f, 3e-41f}; /* subnormal floats */
  so3_sh_f(SO3_LMAX, tiny, yf);
  so3_sh(SO3_LMAX, (double[3]){1e-40f, -2e-40f, 3e-41f}, y);
  for (int l = 0; l <= SO3_LMAX; l++)
    for (int i = l * l; i < (l + 1) * (l + 1); i++)
      cr_assert(fabs(yf[i] - y[i]) <= 2e-7 * (l * l + 1), "subnormal float, component %d", i);
  /* Non-finite input: NaN for l >= 1. lmax < 0 writes nothing; lmax > SO3_LMAX is clamped. */
  so3_sh(2, (double[3]){NAN, 0, 1}, y);
  for (int i = 1; i < 9; i++)
    cr_assert(isnan(y[i]));
  y[0] = 42.0;
  so3_sh(-1, x, y);
  cr_assert(y[0] == 42.0);
  double big[NSH + 1];
  big[NSH] = 42.0;
  so3_sh(SO3_LMAX + 3, x, big);
  cr_assert(big[NSH] == 42.0 && fabs(big[NSH - 1] - yu[NSH - 1]) < 1e-15);
}

/* ---- Wigner-D --------------------------------------------------------------- */

Test(so3, sh_equivariant_under_wigner_d) {
  uint64_t s = 101;
  double buf[WBUF], *d[SO3_LMAX + 1], err[SO3_LMAX + 1] = {0};
  for (int n = 0; n < 100; n++) {
    double R[9];
    so3_random_rotation(&s, R);
    wigner_all(R, buf, d);
    for (int p = 0; p < 3; p++) { /* fresh random directions, not the quadrature points */
      double x[3], rx[3], y[NSH], ry[NSH];
      rand_dir(&s, x);
      so3_matvec(R, x, rx);
      so3_sh(SO3_LMAX, x, y);
      so3_sh(SO3_LMAX, rx, ry);
      for (int l = 0; l <= SO3_LMAX; l++) {
        int nl = 2 * l + 1;
        for (int a = 0; a < nl; a++) {
          double v = 0.0;
          for (int b = 0; b < nl; b++)
            v += d[l][a * nl + b] * y[l * l + b];
          err[l] = fmax(err[l], fabs(ry[l * l + a] - v));
        }
      }
    }
  }
  for (int l = 0; l <= SO3_LMAX; l++)
    cr_assert(err[l] < 1e-10, "Y_%d(Rx) - D_%d Y_%d(x): %g", l, l, l, err[l]);
}

Test(so3, wigner_d_orthogonal_and_homomorphism) {
  uint64_t s = 202;
  double b1[WBUF], b2[WBUF], b12[WBUF], bt[WBUF], *d1[SO3_LMAX + 1], *d2[SO3_LMAX + 1], *d12[SO3_LMAX + 1],
      *dt[SO3_LMAX + 1];
  double eo = 0, eh = 0, et = 0, ei = 0;
  const double id[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  wigner_all(id, b1, d1);
  for (int l = 0; l <= SO3_LMAX; l++)
    for (int i = 0; i < (2 * l + 1) * (2 * l + 1); i++)
      ei = fmax(ei, fabs(d1[l][i] - (i % (2 * l + 2) == 0)));
  cr_assert(ei < 1e-12, "D(I) differs from I by %g", ei);
  for (int n = 0; n < 30; n++) {
    double R1[9], R2[9], R12[9], Rt[9];
    so3_random_rotation(&s, R1);
    so3_random_rotation(&s, R2);
    so3_matmul(R1, R2, R12);
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 3; j++)
        Rt[3 * i + j] = R1[3 * j + i];
    wigner_all(R1, b1, d1);
    wigner_all(R2, b2, d2);
    wigner_all(R12, b12, d12);
    wigner_all(Rt, bt, dt);
    for (int l = 0; l <= SO3_LMAX; l++) {
      int m = 2 * l + 1;
      for (int a = 0; a < m; a++)
        for (int b = 0; b < m; b++) {
          double dd = 0.0, pr = 0.0;
          for (int c = 0; c < m; c++) {
            dd += d1[l][a * m + c] * d1[l][b * m + c];
            pr += d1[l][a * m + c] * d2[l][c * m + b];
          }
          eo = fmax(eo, fabs(dd - (a == b)));
          eh = fmax(eh, fabs(pr - d12[l][a * m + b]));
          et = fmax(et, fabs(dt[l][a * m + b] - d1[l][b * m + a]));
        }
    }
  }
  cr_assert(eo < 1e-10, "D D^T - I: %g", eo);
  cr_assert(eh < 1e-10, "D(R1 R2) - D(R1) D(R2): %g", eh);
  cr_assert(et < 1e-10, "D(R^T) - D(R)^T: %g", et);
}

Test(so3, wigner_d_bad_degree_writes_nothing) {
  double R[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1}, d[4] = {7, 7, 7, 7};
  so3_wigner_d(-1, R, d);
  so3_wigner_d(SO3_LMAX + 1, R, d);
  for (int i = 0; i < 4; i++)
    cr_assert(d[i] == 7.0);
}

/* ---- Clebsch–Gordan (Q) ----------------------------------------------------- */

static double *q_alloc(int k, int l, int J) {
  return malloc(sizeof(double) * (size_t)((2 * k + 1) * (2 * l + 1) * (2 * J + 1)));
}

Test(so3, q_intertwines_k_l_up_to_3) {
  uint64_t s = 303;
  double buf[WBUF], *d[SO3_LMAX + 1], worst = 0.0;
  for (int n = 0; n < 10; n++) {
    double R[9];
    so3_random_rotation(&s, R);
    wigner_all(R, buf, d);
    for (int k = 0; k <= 3; k++)
      for (int l = 0; l <= 3; l++)
        for (int J = abs(k - l); J <= k + l; J++) {
          double *q = q_alloc(k, l, J);
          cr_assert(so3_q(k, l, J, q) == 0);
          double e = intertwine_err(k, l, J, q, d[l], d[k], d[J]);
          cr_assert(e < 1e-10, "k=%d l=%d J=%d: (D_l x D_k) Q - Q D_J = %g", k, l, J, e);
          worst = fmax(worst, e);
          free(q);
        }
  }
  cr_log_info("Q intertwining, k, l <= 3: worst %.3g", worst);
}

Test(so3, q_intertwines_every_supported_triple) {
  uint64_t s = 404;
  double buf[WBUF], *d[SO3_LMAX + 1], worst = 0.0;
  int count = 0;
  for (int n = 0; n < 2; n++) {
    double R[9];
    so3_random_rotation(&s, R);
    wigner_all(R, buf, d);
    for (int k = 0; k <= SO3_LMAX; k++)
      for (int l = 0; l <= SO3_LMAX; l++)
        for (int J = abs(k - l); J <= k + l && J <= SO3_LMAX; J++) {
          double *q = q_alloc(k, l, J);
          cr_assert(so3_q(k, l, J, q) == 0);
          double e = intertwine_err(k, l, J, q, d[l], d[k], d[J]);
          cr_assert(e < 1e-10, "k=%d l=%d J=%d: (D_l x D_k) Q - Q D_J = %g", k, l, J, e);
          worst = fmax(worst, e);
          free(q);
          count += n == 0;
        }
  }
  cr_log_info("Q intertwining, all %d triples: worst %.3g", count, worst);
}

Test(so3, q_orthonormal_and_complete) {
  /* k, l <= 5 (k + l <= 10, so every J is supported): sqrt(2J+1) Q_J have
   * orthonormal columns, blocks of different J are orthogonal, and
   * sum_J (2J+1) Q_J Q_J^T = I. */
  for (int k = 0; k <= 5; k++)
    for (int l = 0; l <= 5; l++) {
      int rows = (2 * k + 1) * (2 * l + 1), cols = 0;
      double *all = malloc(sizeof(double) * (size_t)(rows * rows)); /* [row][column over all J] */
      for (int J = abs(k - l); J <= k + l; J++) {
        int nj = 2 * J + 1;
        double *q = q_alloc(k, l, J), f = 0.0;
        cr_assert(so3_q(k, l, J, q) == 0);
        for (int i = 0; i < rows * nj; i++)
          f += q[i] * q[i];
        cr_assert(fabs(f - 1.0) < 1e-13, "k=%d l=%d J=%d: Frobenius norm^2 %.17g", k, l, J, f);
        for (int r = 0; r < rows; r++)
          for (int c = 0; c < nj; c++)
            all[r * rows + cols + c] = sqrt(nj) * q[r * nj + c];
        cols += nj;
        free(q);
      }
      cr_assert(cols == rows);
      double e1 = 0.0, e2 = 0.0;
      for (int a = 0; a < rows; a++)
        for (int b = 0; b < rows; b++) {
          double cc = 0.0, rr = 0.0;
          for (int i = 0; i < rows; i++) {
            cc += all[i * rows + a] * all[i * rows + b]; /* columns: Q_J^T Q_J' */
            rr += all[a * rows + i] * all[b * rows + i]; /* rows: sum_J (2J+1) Q_J Q_J^T */
          }
          e1 = fmax(e1, fabs(cc - (a == b)));
          e2 = fmax(e2, fabs(rr - (a == b)));
        }
      cr_assert(e1 < 1e-10, "k=%d l=%d: sqrt(2J+1) Q_J^T Q_J' - delta = %g", k, l, e1);
      cr_assert(e2 < 1e-10, "k=%d l=%d: sum_J (2J+1) Q_J Q_J^T - I = %g", k, l, e2);
      free(all);
    }
}

Test(so3, q_sign_layout_and_known_cases) {
  /* Sign rule, and repeatability. */
  for (int k = 0; k <= SO3_LMAX; k++)
    for (int l = 0; l <= SO3_LMAX; l++)
      for (int J = abs(k - l); J <= k + l && J <= SO3_LMAX; J++) {
        int n = (2 * k + 1) * (2 * l + 1) * (2 * J + 1);
        double *q = q_alloc(k, l, J), *q2 = q_alloc(k, l, J);
        cr_assert(so3_q(k, l, J, q) == 0 && so3_q(k, l, J, q2) == 0);
        int i = 0;
        while (i < n && fabs(q[i]) <= SO3_Q_SIGN_EPS)
          i++;
        cr_assert(i < n && q[i] > 0, "k=%d l=%d J=%d: first significant entry %d is %g", k, l, J, i, q[i]);
        cr_assert(memcmp(q, q2, sizeof(double) * (size_t)n) == 0);
        free(q);
        free(q2);
      }
  /* J = 0 with k = l: the identity, Q[(i,j)] = delta_ij / sqrt(2l+1); k = 0:
   * Q_l[(i, 0), c] = delta_ic / sqrt(2l+1); l = 0: Q_k[(0, i), c] likewise. */
  for (int l = 0; l <= 4; l++) {
    int n = 2 * l + 1;
    double *q = q_alloc(l, l, 0), *p = q_alloc(0, l, l), *r = q_alloc(l, 0, l);
    cr_assert(so3_q(l, l, 0, q) == 0 && so3_q(0, l, l, p) == 0 && so3_q(l, 0, l, r) == 0);
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++) {
        double want = (i == j) / sqrt(n);
        cr_assert(fabs(q[i * n + j] - want) < 1e-14, "Q_0(%d,%d)[%d,%d] = %g", l, l, i, j, q[i * n + j]);
        cr_assert(fabs(p[i * n + j] - want) < 1e-14 && fabs(r[i * n + j] - want) < 1e-14);
      }
    free(q);
    free(p);
    free(r);
  }
  /* k = l = 1, J = 1: the cross product. With (f2, f0, f1) = (x, y, z),
   * (a x b) for out-index i is sum Q[(i, j), c] ... check via (u x v) when
   * u, v are degree-1 features: w_i = sum_{j,c} Q[(i,j),c] u_j v_c is
   * proportional to the cross product in the same permuted basis. */
  double q[27];
  cr_assert(so3_q(1, 1, 1, q) == 0);
  double u[3] = {0.3, -1.1, 0.7}, v[3] = {1.9, 0.4, -0.5}; /* vectors (x, y, z) */
  double uf[3] = {u[1], u[2], u[0]}, vf[3] = {v[1], v[2], v[0]}, w[3] = {0};
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++)
      for (int c = 0; c < 3; c++)
        w[i] += q[(i * 3 + j) * 3 + c] * uf[j] * vf[c];
  double cx[3] = {u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2], u[0] * v[1] - u[1] * v[0]};
  double cf[3] = {cx[1], cx[2], cx[0]}, ratio = w[0] / cf[0];
  cr_assert(fabs(fabs(ratio) - 1.0 / sqrt(6.0)) < 1e-14, "ratio %g", ratio);
  for (int i = 0; i < 3; i++)
    cr_assert(fabs(w[i] - ratio * cf[i]) < 1e-14);
}

Test(so3, q_invalid_arguments) {
  double q[4] = {9, 9, 9, 9};
  cr_assert(so3_q(-1, 0, 1, q) == -1);
  cr_assert(so3_q(0, -1, 1, q) == -1);
  cr_assert(so3_q(1, 1, -1, q) == -1);
  cr_assert(so3_q(1, 3, 1, q) == -1);  /* J < |k - l| */
  cr_assert(so3_q(1, 1, 3, q) == -1);  /* J > k + l */
  cr_assert(so3_q(6, 6, 11, q) == -1); /* J > SO3_LMAX */
  cr_assert(so3_q(SO3_LMAX + 1, SO3_LMAX + 1, 0, q) == -1);
  cr_assert(so3_q(0, 0, 0, NULL) == -1);
  for (int i = 0; i < 4; i++)
    cr_assert(q[i] == 9.0, "out touched on error");
  cr_assert(so3_q(0, 0, 0, q) == 0 && fabs(q[0] - 1.0) < 1e-15);
}

Test(so3, kernel_equivariant) {
  /* W(x) = sum_J phi_J reshape(Q_J Y_J(x)) satisfies W(Rx) = D_l W(x) D_k^T. */
  uint64_t s = 505;
  double buf[WBUF], *d[SO3_LMAX + 1], worst = 0.0;
  for (int n = 0; n < 5; n++) {
    double R[9], x[3], rx[3], y[NSH], ry[NSH];
    so3_random_rotation(&s, R);
    wigner_all(R, buf, d);
    rand_dir(&s, x);
    for (int i = 0; i < 3; i++)
      x[i] *= 2.5;
    so3_matvec(R, x, rx);
    so3_sh(SO3_LMAX, x, y);
    so3_sh(SO3_LMAX, rx, ry);
    for (int k = 0; k <= 3; k++)
      for (int l = 0; l <= 3; l++) {
        int nk = 2 * k + 1, nl = 2 * l + 1;
        double w[49] = {0}, wr[49] = {0};
        for (int J = abs(k - l); J <= k + l; J++) {
          int nj = 2 * J + 1;
          double *q = q_alloc(k, l, J), phi = 0.3 + 0.7 * J;
          cr_assert(so3_q(k, l, J, q) == 0);
          for (int r = 0; r < nl * nk; r++)
            for (int c = 0; c < nj; c++) {
              w[r] += phi * q[r * nj + c] * y[J * J + c];
              wr[r] += phi * q[r * nj + c] * ry[J * J + c];
            }
          free(q);
        }
        for (int a = 0; a < nl; a++)
          for (int b = 0; b < nk; b++) {
            double v = 0.0;
            for (int i = 0; i < nl; i++)
              for (int j = 0; j < nk; j++)
                v += d[l][a * nl + i] * w[i * nk + j] * d[k][b * nk + j];
            worst = fmax(worst, fabs(v - wr[a * nk + b]));
          }
      }
  }
  cr_assert(worst < 1e-10, "W(Rx) - D_l W(x) D_k^T: %g", worst);
}

/* ---- rotations -------------------------------------------------------------- */

Test(so3, random_rotations) {
  uint64_t s = 606, s2 = 606;
  double m1 = 0.0, m2 = 0.0, m4 = 0.0, t1 = 0.0, t2 = 0.0;
  const int n = 20000;
  for (int t = 0; t < n; t++) {
    double R[9], R2[9], P[9], Rt[9];
    so3_random_rotation(&s, R);
    so3_random_rotation(&s2, R2);
    cr_assert(memcmp(R, R2, sizeof R) == 0, "not deterministic");
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 3; j++)
        Rt[3 * i + j] = R[3 * j + i];
    so3_matmul(R, Rt, P);
    for (int i = 0; i < 9; i++)
      cr_assert(fabs(P[i] - (i % 4 == 0)) < 1e-14);
    double det =
        R[0] * (R[4] * R[8] - R[5] * R[7]) - R[1] * (R[3] * R[8] - R[5] * R[6]) + R[2] * (R[3] * R[7] - R[4] * R[6]);
    cr_assert(fabs(det - 1.0) < 1e-14, "det %g", det);
    for (int i = 0; i < 9; i++)
      m1 += R[i], m2 += R[i] * R[i], m4 += R[i] * R[i] * R[i] * R[i];
    double tr = R[0] + R[4] + R[8];
    t1 += tr;
    t2 += tr * tr;
  }
  /* Haar measure: E[R_ij] = 0, E[R_ij^2] = 1/3, E[R_ij^4] = 1/5 (columns
   * uniform on the sphere); the trace is the character of the vector
   * representation, so E[tr R] = 0 and E[(tr R)^2] = 1 (variance 2). */
  m1 /= 9.0 * n;
  m2 /= 9.0 * n;
  m4 /= 9.0 * n;
  t1 /= n;
  t2 /= n;
  cr_log_info("rotations: E[R] %.4f, E[R^2] %.4f, E[R^4] %.4f, E[tr] %.4f, E[tr^2] %.4f", m1, m2, m4, t1, t2);
  cr_assert(fabs(m1) < 0.01 && fabs(m2 - 1.0 / 3.0) < 0.01 && fabs(m4 - 0.2) < 0.01, "moments %g %g %g", m1, m2, m4);
  cr_assert(fabs(t1) < 0.05 && fabs(t2 - 1.0) < 0.05, "E[tr R] = %g, E[(tr R)^2] = %g", t1, t2);
  double v[3] = {1, 2, 3}, R[9];
  so3_random_rotation(&s, R);
  so3_matvec(R, v, v); /* in place */
  cr_assert(fabs(v[0] * v[0] + v[1] * v[1] + v[2] * v[2] - 14.0) < 1e-12);
  const double q0[4] = {0, 0, 0, 0}, qz[4] = {cos(PI / 4), 0, 0, sin(PI / 4)}; /* 90 degrees about z */
  so3_quat_to_matrix(q0, R);
  for (int i = 0; i < 9; i++)
    cr_assert(R[i] == (i % 4 == 0));
  so3_quat_to_matrix(qz, R);
  double ex[3] = {1, 0, 0};
  so3_matvec(R, ex, ex);
  cr_assert(fabs(ex[0]) < 1e-15 && fabs(ex[1] - 1.0) < 1e-15 && fabs(ex[2]) < 1e-15);
}
