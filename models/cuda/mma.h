/* mma.h — the warp's tensor-core products that the fused convolution
 * (conv_fused.cu, `gpu_conv: fused`) calls: PTX's mma.sync.aligned
 *   m16n8k16 with bf16 or fp16 inputs and fp32 sums,
 *   m16n8k8 with tf32 inputs and fp32 sums (mma_tf32x3: three of them,
 *   fp32 operands split into tf32 halves),
 * D += A B, each lane holding the elements of A, B and D that PTX's fragment
 * layouts give it (g = lane / 4, t = lane % 4):
 *   m16n8k16  A a[0] = (g, 2t..2t+1)  a[1] = (g+8, 2t..2t+1)
 *               a[2] = (g, 2t+8..2t+9) a[3] = (g+8, 2t+8..2t+9)
 *             B b[0] = (2t..2t+1, g)  b[1] = (2t+8..2t+9, g)
 *             (two 16-bit elements a register, the lower k first)
 *   m16n8k8   A a[0] = (g, t) a[1] = (g+8, t) a[2] = (g, t+4) a[3] = (g+8, t+4)
 *             B b[0] = (t, g) b[1] = (t+4, g)
 *   D         d[0..1] = (g, 2t..2t+1)  d[2..3] = (g+8, 2t..2t+1)
 * On a GPU they are inline PTX; on the emulator (dev/cuda_emu, no
 * __CUDACC__) inc/emu_mma.h computes the same products from the same
 * registers of all 32 lanes, so the kernels' fragment indexing is checked
 * without a GPU. Every lane of a warp must call them together. */
#ifndef SE3_CUDA_MMA_H
#define SE3_CUDA_MMA_H
#include <stdint.h>

#ifdef __CUDACC__
__device__ __forceinline__ void mma_bf16(float d[4], const uint32_t a[4], const uint32_t b[2]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void mma_f16(float d[4], const uint32_t a[4], const uint32_t b[2]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void mma_tf32(float d[4], const uint32_t a[4], const uint32_t b[2]) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
/* fp32 from tf32 halves (x = hi + lo): d += al bh, then ah bl, then ah bh */
__device__ __forceinline__ void mma_tf32x3(float d[4], const uint32_t ah[4], const uint32_t al[4],
                                           const uint32_t bh[2], const uint32_t bl[2]) {
  mma_tf32(d, al, bh);
  mma_tf32(d, ah, bl);
  mma_tf32(d, ah, bh);
}
/* Chains: n products of one shape in a row (n <= N <= MMA_CHAIN, N the
 * arrays' length, fixed at compile time so that they stay in registers),
 * product s's registers a[s], b[s] (and al, bl): n single products on a
 * GPU, one warp-wide step on the emulator. */
#define MMA_CHAIN 8
template <int N>
__device__ __forceinline__ void mma_bf16_n(float d[4], const uint32_t (*a)[4], const uint32_t (*b)[2], int n) {
#pragma unroll
  for (int s = 0; s < N; s++)
    if (s < n) mma_bf16(d, a[s], b[s]);
}
template <int N>
__device__ __forceinline__ void mma_f16_n(float d[4], const uint32_t (*a)[4], const uint32_t (*b)[2], int n) {
#pragma unroll
  for (int s = 0; s < N; s++)
    if (s < n) mma_f16(d, a[s], b[s]);
}
template <int N>
__device__ __forceinline__ void mma_tf32_n(float d[4], const uint32_t (*a)[4], const uint32_t (*b)[2], int n) {
#pragma unroll
  for (int s = 0; s < N; s++)
    if (s < n) mma_tf32(d, a[s], b[s]);
}
template <int N>
__device__ __forceinline__ void mma_tf32x3_n(float d[4], const uint32_t (*ah)[4], const uint32_t (*al)[4],
                                             const uint32_t (*bh)[2], const uint32_t (*bl)[2], int n) {
#pragma unroll
  for (int s = 0; s < N; s++)
    if (s < n) mma_tf32x3(d, ah[s], al[s], bh[s], bl[s]);
}
/* x rounded to tf32 (to nearest, ties away), as a register */
__device__ __forceinline__ uint32_t tf32_rna(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ uint32_t mma_f2u(float x) { return __float_as_uint(x); }
__device__ __forceinline__ float mma_u2f(uint32_t u) { return __uint_as_float(u); }
__device__ __forceinline__ uint32_t mma_bf16_bits(float x) { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }
__device__ __forceinline__ uint32_t mma_f16_bits(float x) { return __half_as_ushort(__float2half_rn(x)); }
#else
/* the CUDA emulator's products (dev/cuda_emu/run.sh compiles models/cuda/
 * with the project root on its include path; nvcc never reads this branch) */
#include "dev/cuda_emu/inc/emu_mma.h"
inline void mma_bf16(float d[4], const uint32_t a[4], const uint32_t b[2]) { emu_mma(EMU_MMA_BF16_16816, d, a, b, d); }
inline void mma_f16(float d[4], const uint32_t a[4], const uint32_t b[2]) { emu_mma(EMU_MMA_F16_16816, d, a, b, d); }
inline void mma_tf32(float d[4], const uint32_t a[4], const uint32_t b[2]) { emu_mma(EMU_MMA_TF32_1688, d, a, b, d); }
/* one warp-wide step here (three on a GPU): the same products in the same order */
inline void mma_tf32x3(float d[4], const uint32_t ah[4], const uint32_t al[4], const uint32_t bh[2],
                       const uint32_t bl[2]) {
  const uint32_t a[8] = {ah[0], ah[1], ah[2], ah[3], al[0], al[1], al[2], al[3]}, b[4] = {bh[0], bh[1], bl[0], bl[1]};
  emu_mma(EMU_MMA_TF32X3, d, a, b, d);
}
#define MMA_CHAIN EMU_MMA_CHAIN
inline void emu_mma_n(int shape, float d[4], const uint32_t (*a)[4], const uint32_t (*b)[2], int n) {
  uint32_t ra[4 * MMA_CHAIN], rb[2 * MMA_CHAIN];
  for (int s = 0; s < n && s < MMA_CHAIN; s++) {
    memcpy(ra + 4 * s, a[s], 16);
    memcpy(rb + 2 * s, b[s], 8);
  }
  emu_mma(shape, d, ra, rb, d, n);
}
template <int N> inline void mma_bf16_n(float d[4], const uint32_t (*a)[4], const uint32_t (*b)[2], int n) {
  static_assert(N <= MMA_CHAIN, "a chain longer than MMA_CHAIN");
  emu_mma_n(EMU_MMA_BF16_16816, d, a, b, n);
}
template <int N> inline void mma_f16_n(float d[4], const uint32_t (*a)[4], const uint32_t (*b)[2], int n) {
  static_assert(N <= MMA_CHAIN, "a chain longer than MMA_CHAIN");
  emu_mma_n(EMU_MMA_F16_16816, d, a, b, n);
}
template <int N> inline void mma_tf32_n(float d[4], const uint32_t (*a)[4], const uint32_t (*b)[2], int n) {
  static_assert(N <= MMA_CHAIN, "a chain longer than MMA_CHAIN");
  emu_mma_n(EMU_MMA_TF32_1688, d, a, b, n);
}
template <int N>
inline void mma_tf32x3_n(float d[4], const uint32_t (*ah)[4], const uint32_t (*al)[4], const uint32_t (*bh)[2],
                         const uint32_t (*bl)[2], int n) {
  static_assert(N <= MMA_CHAIN, "a chain longer than MMA_CHAIN");
  uint32_t ra[8 * MMA_CHAIN], rb[4 * MMA_CHAIN];
  for (int s = 0; s < n && s < MMA_CHAIN; s++) {
    memcpy(ra + 8 * s, ah[s], 16);
    memcpy(ra + 8 * s + 4, al[s], 16);
    memcpy(rb + 4 * s, bh[s], 8);
    memcpy(rb + 4 * s + 2, bl[s], 8);
  }
  emu_mma(EMU_MMA_TF32X3, d, ra, rb, d, n);
}
inline uint32_t tf32_rna(float x) { return emu_tf32_rna(x); }
inline uint32_t mma_f2u(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  return u;
}
inline float mma_u2f(uint32_t u) {
  float x;
  memcpy(&x, &u, 4);
  return x;
}
inline uint32_t mma_bf16_bits(float x) { return __float2bfloat16_rn(x).x; }
inline uint32_t mma_f16_bits(float x) {
  const __half h = __float2half_rn(x);
  uint16_t u;
  memcpy(&u, &h, 2);
  return u;
}
#endif
#endif
