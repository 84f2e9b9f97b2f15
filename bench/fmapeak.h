/* fmapeak.h — the processor's fp32 peak for one instruction set, measured:
 * the yardstick model_bench divides its GFLOP/s by (peak_fraction).
 *
 * Every thread runs chains of multiply-adds that stay in registers, with
 * enough independent chains to hide their latency, so the figure is what
 * the arithmetic units can issue, with no memory traffic: a ceiling no real
 * kernel reaches, not an estimate from clock and data sheet. */
#ifndef SE3_BENCH_FMAPEAK_H
#define SE3_BENCH_FMAPEAK_H

#include "models/cpu/isa.h"

/* GFLOP/s (one multiply-add = 2 FLOPs) of `threads` OpenMP threads at once,
 * each timing its own chains for about `seconds` after a short warm-up,
 * summed over the threads, for isa's vectors: 512-bit FMAs (avx512), 256-bit
 * FMAs (avx2), 128-bit SSE multiplies and adds (base). -1 when the processor
 * cannot run isa, or on a processor that is not x86-64. */
double fma_peak_gflops(enum nn_isa isa, int threads, double seconds);

/* The same for vdpbf16ps (AVX512-BF16: two bf16 products summed into each
 * fp32 lane, 4 FLOPs a lane): the ceiling of precision bf16's radial
 * product. -1 where the processor lacks it. */
double bf16_peak_gflops(int threads, double seconds);

#endif
