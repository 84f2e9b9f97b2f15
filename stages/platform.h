/* platform.h — what the model runs on, for `se3screen --version`, the logs
 * and the benchmarks: the convolution's instruction set, OpenBLAS's kernels,
 * the thread count. The pipeline asks here rather than reaching into
 * models/. */
#ifndef SE3_PLATFORM_H
#define SE3_PLATFORM_H

struct platform_info {
  const char *isa;          /* the convolution's variant: base, avx2, avx512 */
  const char *isa_best;     /* the widest the processor supports */
  const char *blas_core;    /* OpenBLAS's kernels as they run (e.g. SkylakeX) */
  const char *blas_detected; /* what OpenBLAS chose itself, when se3screen overrode it; else NULL */
  const char *blas_forced;  /* OPENBLAS_CORETYPE as the user set it, or NULL */
  const char *blas_better;  /* kernels this processor could run that are better than blas_core, or NULL */
  const char *blas_config;  /* openblas_get_config() */
  int threads;              /* OpenMP threads the model uses */
};

void platform_info(struct platform_info *p);

/* When OpenBLAS detected weaker kernels than this processor supports (and
 * the user did not set OPENBLAS_CORETYPE), executes this program again, once,
 * with OPENBLAS_CORETYPE set: OpenBLAS reads it only when it is loaded.
 * Returns when nothing needs doing or the re-execution failed. */
void platform_blas_reexec(char **argv);

#endif
