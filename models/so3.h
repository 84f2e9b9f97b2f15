/* so3.h — the SO(3) mathematics under the SE(3)-Transformer: real spherical
 * harmonics, real Wigner-D matrices, Clebsch–Gordan (Q) matrices in the real
 * basis, and random rotations. Double precision throughout, except so3_sh_f.
 * Everything here is proved by tests/unit/test_so3.c.
 *
 * Conventions (one set, shared by Y, D and Q):
 *
 *   Rotations. R[9] is a 3x3 matrix stored row-major acting on column
 *   vectors: (R x)_i = sum_j R[3i+j] x_j.
 *
 *   Components. A degree-l feature has 2l+1 real components; component
 *   i = l + m holds order m, for m = -l..l in increasing order. When degrees
 *   0..L are stored together (so3_sh), degree l starts at offset l*l and the
 *   total is SO3_SH_DIM(L) = (L+1)^2.
 *
 *   Real spherical harmonics, orthonormal on the unit sphere
 *   (integral of Y_lm Y_l'm' dOmega = delta_ll' delta_mm'):
 *     m > 0:  Y_lm = sqrt2 N_lm  P_l^m(cos t) cos(m p)
 *     m = 0:  Y_l0 =       N_l0  P_l(cos t)
 *     m < 0:  Y_lm = sqrt2 N_l|m| P_l^|m|(cos t) sin(|m| p)
 *   with N_lm = sqrt((2l+1)/(4 pi) (l-m)!/(l+m)!), (t, p) the polar and
 *   azimuthal angles of the direction, and P_l^m the associated Legendre
 *   function WITHOUT the Condon–Shortley phase (-1)^m: P_1^1(cos t) = +sin t,
 *   so every Y_ll is a positive multiple of Re((x+iy)^l) and Y_l0 > 0 at
 *   the north pole. They are evaluated without trigonometry:
 *   P_l^m(cos t) = sin^m t . p_lm(z), p_lm a polynomial from the upward
 *   recurrence in l, and sin^m t cos(m p), sin^m t sin(m p) are the real and
 *   imaginary parts of (x + iy)^m.
 *
 *   Degree 1. Y_1(x) = sqrt(3/(4 pi)) (y, z, x) for a unit vector (x, y, z):
 *   a degree-1 feature f = (f0, f1, f2) is the vector (x, y, z) =
 *   (f2, f0, f1), and D_1(R) = P R P^T with P the permutation
 *   (x, y, z) -> (y, z, x).
 *
 *   Wigner-D. D_l(R) is the real (2l+1)x(2l+1) matrix, row-major, with
 *   Y_l(R x) = D_l(R) Y_l(x) for every direction x. It is orthogonal and a
 *   homomorphism: D_l(R1 R2) = D_l(R1) D_l(R2).
 *
 *   Q matrices. For input degree k, output degree l and |k-l| <= J <= k+l,
 *   Q_J is a (2l+1)(2k+1) x (2J+1) array, row-major: entry
 *   out[row * (2J+1) + i_J] with row = i_l * (2k+1) + i_k (the l index is
 *   the major one), satisfying (D_l(R) (x) D_k(R)) Q_J = Q_J D_J(R) where (x)
 *   is the Kronecker product in that same order. Hence reshaping Q_J Y_J(x)
 *   to a (2l+1) x (2k+1) row-major matrix W gives W(R x) = D_l W(x) D_k^T.
 *   Scale: unit Frobenius norm; the columns are then orthogonal with squared
 *   norm 1/(2J+1), the blocks for different J are mutually orthogonal, and
 *   sum_J (2J+1) Q_J Q_J^T = I over J = |k-l|..k+l. Sign: the first entry in
 *   storage order with |value| > SO3_Q_SIGN_EPS is positive. Computed from
 *   Racah's closed form for the complex Clebsch–Gordan coefficients
 *   <l m1 k m2 | J M> (Condon–Shortley complex harmonics) and the unitary
 *   change of basis complex -> real on all three indices.
 */
#ifndef SE3_SO3_H
#define SE3_SO3_H

#include <math.h>
#include <stdint.h>

/* Functions marked SE3_HD are usable from CUDA device code as well. */
#ifndef SE3_HD
#ifdef __CUDACC__
#define SE3_HD __host__ __device__
#else
#define SE3_HD
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define SO3_LMAX 10                           /* highest degree supported */
#define SO3_SH_DIM(L) (((L) + 1) * ((L) + 1)) /* values for degrees 0..L */
#define SO3_SH_NNORM ((SO3_LMAX + 1) * (SO3_LMAX + 2) / 2)
#define SO3_Q_SIGN_EPS 1e-10

/* ---- spherical harmonics ------------------------------------------------- */

/* Real spherical harmonics of degrees 0..lmax, concatenated ((lmax+1)^2
 * values, degree l at offset l*l, order m at l*l + l + m), for the direction
 * of xyz; xyz need not be unit length (it is scaled by its largest component
 * and then normalised, so tiny and huge vectors lose nothing to underflow).
 * The zero vector (all three components exactly 0) gives Y_0 = 1/sqrt(4 pi)
 * and zeros for every degree l >= 1 (the l >= 1 harmonics average to zero
 * over directions). Non-finite input gives NaN for l >= 1. lmax < 0 writes
 * nothing; lmax > SO3_LMAX is treated as SO3_LMAX. */
void so3_sh(int lmax, const double xyz[3], double *out);

/* The same in float arithmetic throughout (float input, float table, float
 * output). Accuracy against so3_sh on the same (float) input: absolute error
 * <= 2e-7 (l^2 + 1) for degree l (measured worst 8.8e-6 at l = 10, near the
 * poles; the values themselves reach sqrt(21/(4 pi)) ~ 1.29 there). That is
 * the conditioning of Y_l, not the recurrence: |grad Y_l| grows like l^2, and
 * normalising the direction in float already moves it by about one ulp. */
void so3_sh_f(int lmax, const float xyz[3], float *out);

/* K_lm for l = 0..SO3_LMAX, m = 0..l at index l(l+1)/2 + m: N_lm, times
 * sqrt 2 when m > 0. The tables the inline bodies below take (a device
 * backend copies SO3_SH_NORM_INIT into its constant memory). */
extern const double so3_sh_norm[SO3_SH_NNORM];
extern const float so3_sh_norm_f[SO3_SH_NNORM];

/* Initialiser of the K_lm table (generated at 40 digits; tested against the
 * formula). */
/* clang-format off */
#define SO3_SH_NORM_INIT \
  { \
    /* l= 0 */ 2.8209479177387814e-1, \
    /* l= 1 */ 4.8860251190291992e-1, 4.8860251190291992e-1, \
    /* l= 2 */ 6.3078313050504001e-1, 3.6418281019735969e-1, 1.8209140509867985e-1, \
    /* l= 3 */ 7.4635266518023078e-1, 3.0469719964297716e-1, 9.6353714754685135e-2, 3.9336239328442901e-2, \
    /* l= 4 */ 8.4628437532163443e-1, 2.6761861742291567e-1, 6.3078313050504001e-2, 1.6858388283618386e-2, \
               5.9603403376112013e-3, \
    /* l= 5 */ 9.3560257962738877e-1, 2.4157154730437169e-1, 4.5652731285460226e-2, 9.3188247511476264e-3, \
               2.196468058075176e-3, 6.9458418713245514e-4, \
    /* l= 6 */ 1.0171072362820548, 2.2195099524523101e-1, 3.5093533695806609e-2, 5.8489222826344349e-3, \
               1.0678622237644956e-3, 2.2766899107568562e-4, 6.57223766418388e-5, \
    /* l= 7 */ 1.0925484305920791, 2.0647224590289672e-1, 2.8097313806030643e-2, 3.9735602250741342e-3, \
               5.9903674311141162e-4, 9.9839457185235271e-5, 1.9580128477462539e-5, 5.2330094536914654e-6, \
    /* l= 8 */ 1.1631066229203195, 1.9385110382005325e-1, 2.3169638523677941e-2, 2.8519853513317035e-3, \
               3.6818972564450655e-4, 5.1058728265780264e-5, 7.8785328162140463e-6, 1.4384167144950454e-6, \
               3.5960417862376136e-7, \
    /* l= 9 */ 1.2296226898414837, 1.8330132807744651e-1, 1.9539987227523183e-2, 2.1319873940141735e-3, \
               2.414000363328034e-4, 2.8852822971932871e-5, 3.7248834287122266e-6, 5.3764061256674505e-7, \
               9.2204604370348532e-8, 2.1732833668965408e-8, \
    /* l=10 */ 1.2927207364566026, 1.743104285444845e-1, 1.6773028807119525e-2, 1.6447307921068533e-3, \
               1.661428994750111e-4, 1.7512999313514279e-5, 1.9580128477462539e-6, 2.3744393492865398e-7, \
               3.231202683854524e-8, 5.241702913364149e-9, 1.1720804032140928e-9 \
  }
/* clang-format on */

/* Body of so3_sh: harmonics for a unit vector (x, y, z); norm is a K_lm
 * table; 0 <= lmax <= SO3_LMAX. out[l*l + l + m]. The associated Legendre
 * polynomials are run without normalisation (p_mm = (2m-1)!!, small integer
 * recurrence coefficients) and scaled by K_lm at the end; for l <= 10 their
 * size stays below 1e10, harmless in double and in float. */
SE3_HD static inline void so3_sh_unit(int lmax, const double *norm, double x, double y, double z, double *out) {
  double pmm = 1.0, cr = 1.0, ci = 0.0; /* (2m-1)!!, Re and Im of (x+iy)^m */
  for (int m = 0; m <= lmax; m++) {
    if (m > 0) {
      double t = cr * x - ci * y;
      ci = cr * y + ci * x;
      cr = t;
      pmm *= (double)(2 * m - 1);
    }
    double p2 = 0.0, p1 = pmm; /* p_{l-2,m}, p_{l-1,m} */
    for (int l = m; l <= lmax; l++) {
      double p = pmm;
      if (l > m) {
        p = ((double)(2 * l - 1) * z * p1 - (double)(l + m - 1) * p2) * (1.0 / (double)(l - m));
        p2 = p1;
        p1 = p;
      }
      double kp = norm[l * (l + 1) / 2 + m] * p;
      if (m == 0) {
        out[l * l + l] = kp;
      } else {
        out[l * l + l + m] = kp * cr;
        out[l * l + l - m] = kp * ci;
      }
    }
  }
}

/* Body of so3_sh: any vector, with the scaling and zero-vector rule above. */
SE3_HD static inline void so3_sh_body(int lmax, const double *norm, double x, double y, double z, double *out) {
  if (lmax < 0) return;
  if (lmax > SO3_LMAX) lmax = SO3_LMAX;
  double ax = fabs(x), ay = fabs(y), az = fabs(z);
  if (ax == 0.0 && ay == 0.0 && az == 0.0) {
    out[0] = norm[0];
    for (int i = 1; i < (lmax + 1) * (lmax + 1); i++)
      out[i] = 0.0;
    return;
  }
  double s = ax;
  if (ay > s) s = ay;
  if (az > s) s = az;
  x /= s; /* divide, not multiply by 1/s: 1/s overflows for subnormal s */
  y /= s;
  z /= s;
  double r = 1.0 / sqrt(x * x + y * y + z * z);
  so3_sh_unit(lmax, norm, x * r, y * r, z * r, out);
}

/* Float versions of the two bodies, in float arithmetic. */
SE3_HD static inline void so3_sh_unit_f(int lmax, const float *norm, float x, float y, float z, float *out) {
  float pmm = 1.0f, cr = 1.0f, ci = 0.0f;
  for (int m = 0; m <= lmax; m++) {
    if (m > 0) {
      float t = cr * x - ci * y;
      ci = cr * y + ci * x;
      cr = t;
      pmm *= (float)(2 * m - 1);
    }
    float p2 = 0.0f, p1 = pmm;
    for (int l = m; l <= lmax; l++) {
      float p = pmm;
      if (l > m) {
        p = ((float)(2 * l - 1) * z * p1 - (float)(l + m - 1) * p2) * (1.0f / (float)(l - m));
        p2 = p1;
        p1 = p;
      }
      float kp = norm[l * (l + 1) / 2 + m] * p;
      if (m == 0) {
        out[l * l + l] = kp;
      } else {
        out[l * l + l + m] = kp * cr;
        out[l * l + l - m] = kp * ci;
      }
    }
  }
}

SE3_HD static inline void so3_sh_body_f(int lmax, const float *norm, float x, float y, float z, float *out) {
  if (lmax < 0) return;
  if (lmax > SO3_LMAX) lmax = SO3_LMAX;
  float ax = fabsf(x), ay = fabsf(y), az = fabsf(z);
  if (ax == 0.0f && ay == 0.0f && az == 0.0f) {
    out[0] = norm[0];
    for (int i = 1; i < (lmax + 1) * (lmax + 1); i++)
      out[i] = 0.0f;
    return;
  }
  float s = ax;
  if (ay > s) s = ay;
  if (az > s) s = az;
  x /= s; /* divide, not multiply by 1/s: 1/s overflows for subnormal s */
  y /= s;
  z /= s;
  float r = 1.0f / sqrtf(x * x + y * y + z * z);
  so3_sh_unit_f(lmax, norm, x * r, y * r, z * r, out);
}

/* ---- Wigner-D -------------------------------------------------------------- */

/* D_l(R), (2l+1)^2 values row-major, with Y_l(R x) = D_l(R) Y_l(x); R must be
 * a rotation. Computed by exact quadrature of D_mm' = integral of
 * Y_lm(R x) Y_lm'(x) dOmega (Gauss–Legendre in cos t with l+1 nodes times
 * 2l+1 equally spaced azimuths). l outside 0..SO3_LMAX writes nothing. */
void so3_wigner_d(int l, const double R[9], double *D);

/* ---- Clebsch–Gordan (Q) matrices -------------------------------------------- */

/* Q_J for input degree k and output degree l (layout, scale and sign in the
 * comment at the top): (2l+1)(2k+1)(2J+1) doubles. Valid arguments:
 * 0 <= k, l <= SO3_LMAX and |k-l| <= J <= min(k+l, SO3_LMAX), out non-NULL.
 * Returns 0, or -1 (out untouched) for anything else or when a scratch
 * allocation fails. Cost: O((2l+1)(2k+1)(2J+1)); all 44 Q_J for k, l <= 3
 * take well under a millisecond. */
int so3_q(int k, int l, int J, double *out);

/* ---- rotations and small helpers ------------------------------------------- */

/* Deterministic PRNG (splitmix64): next 64-bit value; a uniform double in
 * [0, 1) with 53 random bits. Any seed, including 0, is valid. */
uint64_t so3_rng_next(uint64_t *state);
double so3_rng_uniform(uint64_t *state);

/* A rotation uniform on SO(3) (Haar), from a uniform random unit quaternion
 * (Shoemake's method). */
void so3_random_rotation(uint64_t *state, double R[9]);
/* The rotation of the unit quaternion q = (w, x, y, z) (normalised inside;
 * the zero quaternion gives the identity). */
void so3_quat_to_matrix(const double q[4], double R[9]);
/* out = R v (out may alias v), C = A B (C may alias A or B), 3x3 row-major. */
void so3_matvec(const double R[9], const double v[3], double out[3]);
void so3_matmul(const double A[9], const double B[9], double C[9]);

#ifdef __cplusplus
}
#endif

#endif
