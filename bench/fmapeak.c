/* fmapeak.c — the processor's fp32 multiply-add peak (fmapeak.h).
 *
 * Each variant is compiled for its instruction set by a target attribute,
 * not by the build's flags, so model_bench stays a baseline x86-64 binary;
 * a variant is only called when nn_isa_supported says the processor (and
 * the operating system) can run it.
 *
 * A chain is a = a * m + c, m = 0.999 and c = 0.001: it settles at 1, so
 * no value ever becomes denormal (which would be slow) or overflows. m and
 * c are read through volatile, and each run stores the sum of its chains to
 * a volatile, so the compiler can neither fold the chains nor drop them.
 * Enough chains run side by side to cover the latency of two FMA pipes (4
 * cycles each on current x86: 8 chains) with room to spare; every chain is
 * its own variable (no array the compiler might keep in memory), so that
 * all stay in registers: 16 zmm of 32; 14 ymm or xmm of 16, which with m and c fill all 16
 * (14 chains of the base variant's multiply-add pairs, whose latency is
 * longer, ran up to 7 % faster than 12 on a Zen 5).
 */
#include "bench/fmapeak.h"

#include <omp.h>
#include <time.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define FMA_X86 1
#endif

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static volatile float m_in = 0.999f, c_in = 0.001f;

/* Rounds per call of a variant: about 0.1 ms at 3-4 GHz, so the clock is
 * read rarely. */
enum { ROUNDS = 1 << 15 };

#ifdef FMA_X86
#define CHAINS12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define CHAINS14(X) CHAINS12(X) X(12) X(13)
#define CHAINS16(X) CHAINS14(X) X(14) X(15)

/* Each variant runs ROUNDS rounds of its chains and returns the number of
 * FLOPs done (a multiply-add is 2). */

__attribute__((target("avx512f"))) static double chains_avx512(void) {
  const __m512 m = _mm512_set1_ps(m_in), c = _mm512_set1_ps(c_in);
#define DECL(i) __m512 a##i = _mm512_set1_ps((float)(i) * (1.0f / 16));
#define STEP(i) a##i = _mm512_fmadd_ps(a##i, m, c);
#define SUM(i) s = _mm512_add_ps(s, a##i);
  CHAINS16(DECL)
  for (long r = 0; r < ROUNDS; r++) {
    CHAINS16(STEP)
  }
  __m512 s = _mm512_setzero_ps();
  CHAINS16(SUM)
#undef DECL
#undef STEP
#undef SUM
  volatile float sink = _mm512_reduce_add_ps(s);
  (void)sink;
  return 2.0 * 16 * 16 * (double)ROUNDS; /* 16 chains of 16 lanes */
}

__attribute__((target("avx2,fma"))) static double chains_avx2(void) {
  const __m256 m = _mm256_set1_ps(m_in), c = _mm256_set1_ps(c_in);
#define DECL(i) __m256 a##i = _mm256_set1_ps((float)(i) * (1.0f / 14));
#define STEP(i) a##i = _mm256_fmadd_ps(a##i, m, c);
#define SUM(i) s = _mm256_add_ps(s, a##i);
  CHAINS14(DECL)
  for (long r = 0; r < ROUNDS; r++) {
    CHAINS14(STEP)
  }
  __m256 s = _mm256_setzero_ps();
  CHAINS14(SUM)
#undef DECL
#undef STEP
#undef SUM
  float lanes[8];
  _mm256_storeu_ps(lanes, s);
  volatile float sink = lanes[0] + lanes[1] + lanes[2] + lanes[3] + lanes[4] + lanes[5] + lanes[6] + lanes[7];
  (void)sink;
  return 2.0 * 8 * 14 * (double)ROUNDS; /* 14 chains of 8 lanes */
}

/* Baseline x86-64 has SSE2 but no FMA: a multiply and a dependent add,
 * counted as 2 FLOPs per pair (per lane), as an FMA would be. That is what
 * the base variant of the convolution issues too (in a -march=native build
 * the compiler may fuse both into FMAs, here as there). */
static double chains_base(void) {
  const __m128 m = _mm_set1_ps(m_in), c = _mm_set1_ps(c_in);
#define DECL(i) __m128 a##i = _mm_set1_ps((float)(i) * (1.0f / 14));
#define STEP(i) a##i = _mm_add_ps(_mm_mul_ps(a##i, m), c);
#define SUM(i) s = _mm_add_ps(s, a##i);
  CHAINS14(DECL)
  for (long r = 0; r < ROUNDS; r++) {
    CHAINS14(STEP)
  }
  __m128 s = _mm_setzero_ps();
  CHAINS14(SUM)
#undef DECL
#undef STEP
#undef SUM
  float lanes[4];
  _mm_storeu_ps(lanes, s);
  volatile float sink = lanes[0] + lanes[1] + lanes[2] + lanes[3];
  (void)sink;
  return 2.0 * 4 * 14 * (double)ROUNDS; /* 14 chains of 4 lanes */
}

/* vdpbf16ps: each of 16 lanes adds two bf16 products (4 FLOPs). The
 * operands are bf16 pairs of about 1e-3, so a chain grows by about 2e-6 a
 * step and stays far from overflow. */
__attribute__((target("avx512f,avx512bf16"))) static double chains_bf16(void) {
  unsigned short xb = nn_bf16_bits(c_in);
  const __m512bh x = (__m512bh)_mm512_set1_epi32((int)((unsigned)xb | (unsigned)xb << 16));
#define DECL(i) __m512 a##i = _mm512_set1_ps((float)(i) * (1.0f / 16));
#define STEP(i) a##i = _mm512_dpbf16_ps(a##i, x, x);
#define SUM(i) s = _mm512_add_ps(s, a##i);
  CHAINS16(DECL)
  for (long r = 0; r < ROUNDS; r++) {
    CHAINS16(STEP)
  }
  __m512 s = _mm512_setzero_ps();
  CHAINS16(SUM)
#undef DECL
#undef STEP
#undef SUM
  volatile float sink = _mm512_reduce_add_ps(s);
  (void)sink;
  return 4.0 * 16 * 16 * (double)ROUNDS; /* 16 chains of 16 lanes, 2 products each */
}
#endif

/* GFLOP/s of `threads` threads running chains at once for `seconds`. */
static double run_chains(double (*chains)(void), int threads, double seconds) {
  double warm = seconds / 4 < 0.05 ? seconds / 4 : 0.05, total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
  {
    /* warm-up: clocks up, wider units powered on (some processors start
     * 512-bit work at a lower rate), all threads busy before any counts */
    double t0 = now();
    while (now() - t0 < warm)
      chains();
#pragma omp barrier
    double flops = 0;
    t0 = now();
    double dt;
    do {
      flops += chains();
    } while ((dt = now() - t0) < seconds);
    total += flops / dt * 1e-9;
  }
  return total;
}

double fma_peak_gflops(enum nn_isa isa, int threads, double seconds) {
#ifdef FMA_X86
  if (!nn_isa_supported(isa) || threads < 1) return -1;
  return run_chains(isa == NN_ISA_AVX512 ? chains_avx512
                    : isa == NN_ISA_AVX2 ? chains_avx2
                                         : chains_base,
                    threads, seconds);
#else
  (void)isa;
  (void)threads;
  (void)seconds;
  return -1;
#endif
}

double bf16_peak_gflops(int threads, double seconds) {
#ifdef FMA_X86
  if (!nn_bf16_supported() || threads < 1) return -1;
  return run_chains(chains_bf16, threads, seconds);
#else
  (void)threads;
  (void)seconds;
  return -1;
#endif
}
