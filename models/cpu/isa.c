/* isa.c — the run-time choice of the convolution's instruction set and of
 * OpenBLAS's kernels (isa.h). */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "models/cpu/isa.h"
#include "models/cpu/nn.h"

typedef int conv_forward_fn(real *const y[], const struct nn_conv_shape *s, const real *const x[], const real *basis,
                            const real *s2, const real *W3, int H, int pool);
typedef int conv_backward_fn(real *const dx[], real *ds2, real *dW3, const struct nn_conv_shape *s,
                             const real *const dy[], const real *const x[], const real *basis, const real *s2,
                             const real *W3, int H, int pool);

conv_forward_fn nn_conv_forward_base, nn_conv_forward_avx2, nn_conv_forward_avx512;
conv_backward_fn nn_conv_backward_base, nn_conv_backward_avx2, nn_conv_backward_avx512;

static conv_forward_fn *const conv_forward[NN_ISA_COUNT] = {nn_conv_forward_base, nn_conv_forward_avx2,
                                                            nn_conv_forward_avx512};
static conv_backward_fn *const conv_backward[NN_ISA_COUNT] = {nn_conv_backward_base, nn_conv_backward_avx2,
                                                              nn_conv_backward_avx512};
static const char *const isa_names[NN_ISA_COUNT] = {"base", "avx2", "avx512"};

/* -1 until chosen. Chosen on the first call, which comes from one thread
 * (the model calls the convolution outside its parallel regions). */
static int isa_now = -1;

int nn_isa_supported(enum nn_isa isa) {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  switch (isa) {
  case NN_ISA_BASE:
    return 1;
  case NN_ISA_AVX2:
    return __builtin_cpu_supports("x86-64-v3") != 0;
  case NN_ISA_AVX512:
    return __builtin_cpu_supports("x86-64-v4") != 0;
  default:
    return 0;
  }
#else
  return isa == NN_ISA_BASE;
#endif
}

const char *nn_isa_name(enum nn_isa isa) { return (unsigned)isa < NN_ISA_COUNT ? isa_names[isa] : "?"; }

int nn_isa_parse(const char *name) {
  for (int i = 0; i < NN_ISA_COUNT; i++)
    if (name && !strcmp(name, isa_names[i])) return i;
  return -1;
}

static int isa_best(void) {
  for (int i = NN_ISA_COUNT - 1; i > 0; i--)
    if (nn_isa_supported((enum nn_isa)i)) return i;
  return NN_ISA_BASE;
}

enum nn_isa nn_isa_current(void) {
  if (isa_now < 0) {
    int want = nn_isa_parse(getenv("SE3_ISA"));
    isa_now = want >= 0 && nn_isa_supported((enum nn_isa)want) ? want : isa_best();
  }
  return (enum nn_isa)isa_now;
}

int nn_isa_set(enum nn_isa isa) {
  if ((unsigned)isa >= NN_ISA_COUNT || !nn_isa_supported(isa)) return -1;
  isa_now = (int)isa;
  return 0;
}

/* The build for a convolution: the current one, except that where no output
 * degree has more than 8 channels (the default model) the AVX2 build runs
 * in place of the AVX-512 one, whose masked 16-float tiles would be half
 * empty there while the AVX2 build's 8-float tiles are full. */
static enum nn_isa conv_isa(const struct nn_conv_shape *s) {
  enum nn_isa isa = nn_isa_current();
  if (isa != NN_ISA_AVX512) return isa;
  for (int d = 0; d <= NN_MAX_DEG; d++)
    if (s->fout.ch[d] > 8) return isa;
  return NN_ISA_AVX2;
}

int nn_conv_forward(real *const y[], const struct nn_conv_shape *s, const real *const x[], const real *basis,
                    const real *s2, const real *W3, int H, int pool) {
  return conv_forward[conv_isa(s)](y, s, x, basis, s2, W3, H, pool);
}

int nn_conv_backward(real *const dx[], real *ds2, real *dW3, const struct nn_conv_shape *s, const real *const dy[],
                     const real *const x[], const real *basis, const real *s2, const real *W3, int H, int pool) {
  return conv_backward[conv_isa(s)](dx, ds2, dW3, s, dy, x, basis, s2, W3, H, pool);
}

/* ---- bf16 --------------------------------------------------------------------- */

#if defined(__x86_64__) && defined(__GNUC__) && !defined(SE3_REAL_F64)
#define HAVE_BF16 1
conv_forward_fn nn_conv_forward_avx512bf16;
#endif

int nn_bf16_supported(void) {
#ifdef HAVE_BF16
  const char *off = getenv("SE3_BF16");
  if (off && !strcmp(off, "off")) return 0;
  __builtin_cpu_init();
  return nn_isa_supported(NN_ISA_AVX512) && __builtin_cpu_supports("avx512bf16");
#else
  return 0;
#endif
}

int nn_conv_forward_bf16(real *const y[], const struct nn_conv_shape *s, const real *const x[], const real *basis,
                         const real *s2, const real *W3, int H, int pool) {
#ifdef HAVE_BF16
  if (nn_bf16_supported()) return nn_conv_forward_avx512bf16(y, s, x, basis, s2, W3, H, pool);
#endif
  return nn_conv_forward(y, s, x, basis, s2, W3, H, pool);
}

/* ---- OpenBLAS ---------------------------------------------------------------- */

/* OpenBLAS cores with AVX-512 kernels, and with AVX2 ones (0.3.21's names). */
static const char *const blas_avx512[] = {"SkylakeX", "Cooperlake", "SapphireRapids", NULL};
static const char *const blas_avx2[] = {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids", NULL};

static int in_list(const char *s, const char *const *list) {
  for (; *list; list++)
    if (s && !strcasecmp(s, *list)) return 1;
  return 0;
}

const char *nn_blas_core(void) {
  const char *c = openblas_get_corename();
  return c ? c : "?";
}

const char *nn_blas_core_better(void) {
  const char *core = nn_blas_core();
  if (nn_isa_supported(NN_ISA_AVX512) && !in_list(core, blas_avx512)) return "SkylakeX";
  if (nn_isa_supported(NN_ISA_AVX2) && !in_list(core, blas_avx2)) return "Haswell";
  return NULL;
}

const char *nn_blas_core_wanted(void) {
  const char *forced = getenv("OPENBLAS_CORETYPE");
  if (forced && *forced) return NULL; /* the user's choice stands */
  return nn_blas_core_better();
}

/* ---- OpenMP's waiting threads ------------------------------------------------ */

static int set_in_env(const char *name) {
  const char *v = getenv(name);
  return v && *v;
}

const char *nn_omp_spin_wanted(void) {
#if defined(_OPENMP) && defined(__GNUC__) && !defined(__clang__)
  if (set_in_env("OMP_WAIT_POLICY") || set_in_env("GOMP_SPINCOUNT")) return NULL; /* the user's choice stands */
  return NN_OMP_SPINCOUNT;
#else
  return NULL;
#endif
}

void nn_cpu_reexec(char **argv) {
  const char *core = getenv(NN_BLAS_DETECTED_ENV) ? NULL : nn_blas_core_wanted();
  const char *spin = nn_omp_spin_wanted();
  if (core && (setenv(NN_BLAS_DETECTED_ENV, nn_blas_core(), 1) || setenv("OPENBLAS_CORETYPE", core, 1))) core = NULL;
  if (spin && setenv("GOMP_SPINCOUNT", spin, 1)) spin = NULL;
  if (!core && !spin) return;
  /* by the executable's own path: a process exec'd through /proc/self/exe is
   * named "exe" (its comm), which is what ps, top, pkill and tests looking
   * for "se3screen" would then see for the whole run */
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    self[n] = 0;
    execv(self, argv);
  }
  execv("/proc/self/exe", argv);
  /* could not: go on as loaded */
  if (core) {
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv(NN_BLAS_DETECTED_ENV);
  }
  if (spin) unsetenv("GOMP_SPINCOUNT");
}
