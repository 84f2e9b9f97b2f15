/* gradcheck.h — finite-difference checks of analytic gradients, for the
 * double-precision layer tests (tests/unit/test_grad_*.c).
 *
 * A layer f is checked through the scalar loss L = <G, f(inputs, params)>
 * with a fixed random G: the layer's backward applied to G must equal the
 * central difference (L(p + h) - L(p - h)) / 2h of every entry p of every
 * input and parameter. In double with h = 1e-6 the difference is accurate to
 * about 1e-9 relative for smooth layers, so 1e-6 catches any wrong term. */
#ifndef SE3_GRADCHECK_H
#define SE3_GRADCHECK_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

/* Returns L for the current values of everything the caller perturbs. */
typedef double (*gc_loss_fn)(void *ctx);

/* Deterministic numbers in [-1, 1). */
static inline double gc_rand(uint64_t *s) {
  *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
  return (double)(*s >> 11) / 4503599627370496.0 - 1.0;
}
static inline void gc_fill(double *p, size_t n, uint64_t *s, double scale) {
  for (size_t i = 0; i < n; i++)
    p[i] = scale * gc_rand(s);
}

/* Central differences of loss over p[0..n-1] against grad; checks every entry
 * when n <= max_checks, else max_checks entries spread over p. Returns the
 * worst |num - grad| / max(1, |num|, |grad|).
 * In the sanitizer build (the job runs these tests again to find memory and
 * undefined-behaviour errors, which every forward pass exercises alike) an
 * eighth of max_checks entries, at least 8, are sampled: a sampled check is
 * two forward passes, and test_grad_conv took 123 s of the job that way. The
 * main build checks them all. */
static inline double gc_worst(gc_loss_fn loss, void *ctx, double *p, const double *grad, size_t n, size_t max_checks) {
  const double h = 1e-6;
#ifdef SE3_SANITIZED_BUILD
  max_checks = max_checks / 8 > 8 ? max_checks / 8 : 8;
#endif
  double worst = 0;
  size_t step = n <= max_checks ? 1 : n / max_checks;
  for (size_t i = 0; i < n; i += step) {
    double keep = p[i];
    p[i] = keep + h;
    double lp = loss(ctx);
    p[i] = keep - h;
    double lm = loss(ctx);
    p[i] = keep;
    double num = (lp - lm) / (2 * h);
    double scale = fmax(1.0, fmax(fabs(num), fabs(grad[i])));
    double e = fabs(num - grad[i]) / scale;
    if (e > worst) worst = e;
  }
  return worst;
}

#endif
