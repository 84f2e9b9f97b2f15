/* rmsd.c — the aligned RMSD of two conformers and the seeds of their draws
 * (conformers.h). */
#include <math.h>
#include <string.h>

#include "chem/conformers.h"

unsigned conf_seed(unsigned seed, int d) {
  /* splitmix32-like finaliser over (seed, d) */
  unsigned x = seed ^ (0x9e3779b9u * (unsigned)d);
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

/* The largest eigenvalue of the symmetric 4x4 matrix m (destroyed), by
 * Jacobi rotations. */
static double largest_eigenvalue(double m[4][4]) {
  for (int sweep = 0; sweep < 50; sweep++) {
    double off = 0;
    for (int p = 0; p < 4; p++)
      for (int q = p + 1; q < 4; q++)
        off += m[p][q] * m[p][q];
    if (off < 1e-22) break;
    for (int p = 0; p < 4; p++)
      for (int q = p + 1; q < 4; q++) {
        if (fabs(m[p][q]) < 1e-300) continue;
        double theta = (m[q][q] - m[p][p]) / (2 * m[p][q]);
        double t = (theta >= 0 ? 1 : -1) / (fabs(theta) + sqrt(theta * theta + 1));
        double c = 1 / sqrt(t * t + 1), s = t * c;
        for (int k = 0; k < 4; k++) { /* columns p, q */
          double kp = m[k][p], kq = m[k][q];
          m[k][p] = c * kp - s * kq;
          m[k][q] = s * kp + c * kq;
        }
        for (int k = 0; k < 4; k++) { /* rows p, q */
          double pk = m[p][k], qk = m[q][k];
          m[p][k] = c * pk - s * qk;
          m[q][k] = s * pk + c * qk;
        }
      }
  }
  double best = m[0][0];
  for (int i = 1; i < 4; i++)
    if (m[i][i] > best) best = m[i][i];
  return best;
}

double conf_rmsd(const double *a, const double *b, const int *idx, int n) {
  if (n <= 0) return 0;
  double ca[3] = {0, 0, 0}, cb[3] = {0, 0, 0};
  for (int i = 0; i < n; i++) {
    int k = idx ? idx[i] : i;
    for (int d = 0; d < 3; d++) {
      ca[d] += a[3 * k + d];
      cb[d] += b[3 * k + d];
    }
  }
  for (int d = 0; d < 3; d++) {
    ca[d] /= n;
    cb[d] /= n;
  }
  double s[3][3], ga = 0, gb = 0; /* s: the covariance of a against b */
  memset(s, 0, sizeof s);
  for (int i = 0; i < n; i++) {
    int k = idx ? idx[i] : i;
    double x[3], y[3];
    for (int d = 0; d < 3; d++) {
      x[d] = a[3 * k + d] - ca[d];
      y[d] = b[3 * k + d] - cb[d];
      ga += x[d] * x[d];
      gb += y[d] * y[d];
    }
    for (int r = 0; r < 3; r++)
      for (int c = 0; c < 3; c++)
        s[r][c] += x[r] * y[c];
  }
  double m[4][4] = {
      {s[0][0] + s[1][1] + s[2][2], s[1][2] - s[2][1], s[2][0] - s[0][2], s[0][1] - s[1][0]},
      {s[1][2] - s[2][1], s[0][0] - s[1][1] - s[2][2], s[0][1] + s[1][0], s[2][0] + s[0][2]},
      {s[2][0] - s[0][2], s[0][1] + s[1][0], -s[0][0] + s[1][1] - s[2][2], s[1][2] + s[2][1]},
      {s[0][1] - s[1][0], s[2][0] + s[0][2], s[1][2] + s[2][1], -s[0][0] - s[1][1] + s[2][2]},
  };
  double lambda = largest_eigenvalue(m);
  double msd = (ga + gb - 2 * lambda) / n;
  return msd > 0 ? sqrt(msd) : 0;
}
