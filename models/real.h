/* real.h — the floating-point type of the model's arrays. The product is
 * built with real = float; the gradient tests build the same sources with
 * SE3_REAL_F64 (real = double), where finite differences are accurate
 * enough to catch a wrong derivative. Backend-neutral: the CPU backend's
 * BLAS calls are in models/cpu/real.h. */
#ifndef SE3_MODELS_REAL_H
#define SE3_MODELS_REAL_H

#ifdef SE3_REAL_F64
typedef double real;
#define NN_REAL_NAME "f64"
#else
typedef float real;
#define NN_REAL_NAME "f32"
#endif

#endif
