/* isa.h — instruction sets chosen at run time, not by the build machine.
 *
 * A binary built on a cluster's login node must run on every x86-64 node,
 * and run fast on each. The hot kernels (conv.c, the TFN convolution) are
 * therefore compiled three times: conv.c itself for the baseline x86-64, and
 * conv_avx2.c and conv_avx512.c, which include conv.c with SE3_ISA_VARIANT
 * set and are compiled with -march=x86-64-v3 and -march=x86-64-v4
 * (512-bit vectors preferred: the 8-edge x 32-channel tile then fits in 16
 * registers instead of spilling out of 32 ymm ones). isa.c picks the widest
 * variant the processor and the operating system support, once.
 *
 * The environment variable SE3_ISA (base, avx2, avx512 or auto) forces a
 * variant, for tests and benchmarks; one the processor lacks is refused and
 * the best supported one is used instead. Under avx512, a convolution
 * whose output degrees have at most 8 channels each (the default model)
 * runs the avx2 variant, whose 8-float tiles its shapes fill (isa.c).
 *
 * The same file also chooses OpenBLAS's kernels from the processor's
 * features: Debian's OpenBLAS 0.3.21 does not recognise some current
 * processors and falls back to old kernels (Prescott/SSE3 on some Intel
 * parts, Haswell/AVX2 on AVX-512 AMD parts), so sgemm runs 2-5x below what
 * the machine can do. OpenBLAS reads OPENBLAS_CORETYPE when it is loaded,
 * before main, so the program re-executes itself once with the variable set
 * (nn_blas_core_wanted, and main.c).
 */
#ifndef SE3_ISA_H
#define SE3_ISA_H

enum nn_isa { NN_ISA_BASE, NN_ISA_AVX2, NN_ISA_AVX512, NN_ISA_COUNT };

/* Whether this processor (and the OS, for the wider register state) can run
 * the variant. */
int nn_isa_supported(enum nn_isa isa);
/* The variant in use: chosen from SE3_ISA or the processor on first use. */
enum nn_isa nn_isa_current(void);
/* Use this variant from now on (tests). -1 when the processor lacks it. */
int nn_isa_set(enum nn_isa isa);
/* "base", "avx2", "avx512". */
const char *nn_isa_name(enum nn_isa isa);
/* Parses a name as above; -1 when unknown. */
int nn_isa_parse(const char *name);

/* The OpenBLAS core type this processor should use when the one OpenBLAS
 * detected is weaker than the processor ("SkylakeX" for AVX-512, "Haswell"
 * for AVX2 with FMA); NULL when OpenBLAS's own choice is as good, or the user
 * set OPENBLAS_CORETYPE. */
const char *nn_blas_core_wanted(void);
/* As nn_blas_core_wanted, but also when OPENBLAS_CORETYPE chose the weaker
 * kernels (to say so). */
const char *nn_blas_core_better(void);
/* GOMP_SPINCOUNT for this process when neither it nor OMP_WAIT_POLICY is set
 * (NULL when the user set one, or the build has no libgomp). libgomp's threads
 * spin 300,000 times at a barrier before they sleep: alone that is harmless,
 * but two processes on the same cores then spend their time slices spinning
 * while the thread they wait for cannot run (quickstart training: 5.8 s alone,
 * 67 s each with two at once; with 1,000 spins 6.0 s and 13.3 s). */
#define NN_OMP_SPINCOUNT "1000"
const char *nn_omp_spin_wanted(void);
/* When nn_blas_core_wanted names a core or nn_omp_spin_wanted a spin count,
 * executes this program again (/proc/self/exe, same arguments), once, with
 * OPENBLAS_CORETYPE set to the core and NN_BLAS_DETECTED_ENV to what OpenBLAS
 * had detected, and GOMP_SPINCOUNT set: both libraries read them when they
 * load, before main. Returns when nothing needs doing or execv failed. For
 * main() only: call it first. */
#define NN_BLAS_DETECTED_ENV "SE3_OPENBLAS_DETECTED"
void nn_cpu_reexec(char **argv);
/* OpenBLAS's core name (e.g. "Haswell", "SkylakeX"), as it runs. */
const char *nn_blas_core(void);

/* ---- bf16 ----------------------------------------------------------------------
 * nn_conv_forward_bf16 (nn.h) rounds the radial product's operands to bf16. */
/* Whether this processor runs it (and this build has it: x86-64, float;
 * AVX512-BF16: Intel Cooper Lake and Sapphire Rapids on, AMD Zen 4 on).
 * SE3_BF16=off in the environment says no (tests of the refusal). */
int nn_bf16_supported(void);

/* The bf16 nearest to x (ties to even, as vcvtne2ps2bf16 rounds), as its 16
 * bits; NaN stays NaN. */
static inline unsigned short nn_bf16_bits(float x) {
  union {
    float f;
    unsigned u;
  } v = {x};
  if ((v.u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)(v.u >> 16 | 0x40u);
  return (unsigned short)((v.u + 0x7fffu + (v.u >> 16 & 1u)) >> 16);
}
/* x rounded to bf16, as a float. */
static inline float nn_bf16_round(float x) {
  union {
    unsigned u;
    float f;
  } v = {(unsigned)nn_bf16_bits(x) << 16};
  return v.f;
}

/* Inside conv.c: its two entry points get the variant's name, and isa.c's
 * dispatchers carry the public names of nn.h. */
#ifdef SE3_ISA_IMPL
#define SE3_ISA_CAT2(a, b) a##b
#define SE3_ISA_CAT(a, b) SE3_ISA_CAT2(a, b)
#ifdef SE3_ISA_VARIANT
#define nn_conv_forward SE3_ISA_CAT(nn_conv_forward_, SE3_ISA_VARIANT)
#define nn_conv_backward SE3_ISA_CAT(nn_conv_backward_, SE3_ISA_VARIANT)
#else
#define nn_conv_forward nn_conv_forward_base
#define nn_conv_backward nn_conv_backward_base
#endif
#endif

#endif
