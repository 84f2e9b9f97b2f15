/* emu_mma.h — the warp's tensor-core products on the emulator: PTX's
 * mma.sync.aligned shapes that models/cuda/mma.h uses, each lane's
 * registers holding the elements PTX's fragment layouts give it, so a
 * kernel that puts a value in the wrong register or lane computes a wrong
 * product here as on a GPU (PTX ISA, "Matrix fragments for mma.m16n8k16
 * with floating point type" and "for mma.m16n8k8"):
 *
 *   g = lane / 4, t = lane % 4; every register .b32;
 *   m16n8k16, bf16 or f16 (two a register, the lower half first):
 *     A (16 x 16, row-major) a[0] = (g, 2t..2t+1), a[1] = (g+8, 2t..2t+1),
 *                            a[2] = (g, 2t+8..2t+9), a[3] = (g+8, 2t+8..2t+9)
 *     B (16 x 8, by column)  b[0] = (2t..2t+1, g), b[1] = (2t+8..2t+9, g)
 *   m16n8k8, tf32 (one a register, the upper 19 bits of a float):
 *     A (16 x 8)             a[0] = (g, t), a[1] = (g+8, t),
 *                            a[2] = (g, t+4), a[3] = (g+8, t+4)
 *     B (8 x 8)              b[0] = (t, g), b[1] = (t+4, g)
 *   C and D (16 x 8, fp32)   c[0..1] = (g, 2t..2t+1), c[2..3] = (g+8, 2t..2t+1)
 *
 * D = A B + C, each product exact in fp32 (the inputs' mantissas are 8 or
 * 11 bits) and summed in fp32 in k's order: a GPU's order and rounding of
 * the sums differ, by round-off. tf32 inputs lose their lower 13 bits
 * (truncated, as the tensor cores ignore them; mma.h's tf32_rna rounds
 * them first, as cvt.rna.tf32.f32 does).
 *
 * Warp-wide, as on a GPU: every lane of the warp must reach the same
 * product (the same shape, and the same count of products since the block
 * began), in a warp of 32 threads. Each lane leaves its registers in its
 * slot and waits (emu_warp_wait: the next round resumes only such lanes);
 * the last to arrive computes every lane's D, and each takes its own on
 * waking. A lane whose warp did not all arrive (some at a __syncthreads, at
 * another product or finished: divergence, undefined on a GPU) stops the
 * process, naming the kernel's block, warp and lanes. */
#ifndef SE3_CUDA_EMU_MMA_H
#define SE3_CUDA_EMU_MMA_H
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cuda_bf16.h"
#include "cuda_fp16.h"
#include "cuda_runtime.h"

/* TF32X3: three m16n8k8 tf32 products in a row, D = ((C + Al Bh) + Ah Bl) +
 * Ah Bh (mma.h's mma_tf32x3: fp32 from tf32 halves), a warp-wide step here
 * where a GPU takes three: a[0..3] Ah, a[4..7] Al, b[0..1] Bh, b[2..3] Bl */
enum emu_mma_shape { EMU_MMA_BF16_16816 = 1, EMU_MMA_F16_16816 = 2, EMU_MMA_TF32_1688 = 3, EMU_MMA_TF32X3 = 4 };
/* A chain: n products of one shape in a row, D = C + A_0 B_0 + ... (mma.h's
 * mma_*_n, a loop of single products on a GPU), one warp-wide step here:
 * a[] holds product s's registers from s * 4 (8 for TF32X3), b[] from s * 2
 * (4). At most EMU_MMA_CHAIN in a chain. */
#define EMU_MMA_CHAIN 8

struct emu_mma_slot {
  unsigned long long block, seq, done; /* emu_block_no; the lane's products so far; the last computed */
  int shape, n;
  uint32_t a[8 * EMU_MMA_CHAIN], b[4 * EMU_MMA_CHAIN];
  float c[4], d[4];
};
/* one slot a thread of the running block (one block at a time an OS thread) */
inline thread_local emu_mma_slot emu_mma_slots[1024];

/* element `half` (0: the lower 16 bits) of register r, as a float */
inline float emu_mma_in(int shape, uint32_t r, int half) {
  float f;
  if (shape == EMU_MMA_TF32_1688) {
    uint32_t u = r & 0xffffe000u;
    memcpy(&f, &u, 4);
    return f;
  }
  const uint16_t h = (uint16_t)(half ? r >> 16 : r & 0xffffu);
  if (shape == EMU_MMA_BF16_16816) {
    uint32_t u = (uint32_t)h << 16;
    memcpy(&f, &u, 4);
    return f;
  }
  __half x;
  memcpy(&x, &h, 2);
  return __half2float(x);
}

/* A[r][k] and B[k][n] of the warp whose slots start at s, by the layouts
 * above (the tf32 shape's registers from a[ao], b[bo] on) */
inline float emu_mma_a(const emu_mma_slot *s, int shape, int r, int k, int ao = 0) {
  if (shape == EMU_MMA_TF32_1688)
    return emu_mma_in(shape, s[(r % 8) * 4 + k % 4].a[ao + (r >= 8) + 2 * (k >= 4)], 0);
  return emu_mma_in(shape, s[(r % 8) * 4 + (k % 8) / 2].a[ao + (r >= 8) + 2 * (k >= 8)], k % 2);
}
inline float emu_mma_b(const emu_mma_slot *s, int shape, int k, int n, int bo = 0) {
  if (shape == EMU_MMA_TF32_1688) return emu_mma_in(shape, s[n * 4 + k % 4].b[bo + (k >= 4)], 0);
  return emu_mma_in(shape, s[n * 4 + (k % 8) / 2].b[bo + (k >= 8)], k % 2);
}

/* D += A B for the whole warp (slots w), one tf32 product of TF32X3 (its a
 * registers from ao, b from bo) or the shape's one */
inline void emu_mma_warp(emu_mma_slot *w, int shape, int ao, int bo, int first) {
  const int K = shape == EMU_MMA_TF32_1688 ? 8 : 16;
  float A[16][16], B[16][8];
  for (int r = 0; r < 16; r++)
    for (int k = 0; k < K; k++)
      A[r][k] = emu_mma_a(w, shape, r, k, ao);
  for (int k = 0; k < K; k++)
    for (int n = 0; n < 8; n++)
      B[k][n] = emu_mma_b(w, shape, k, n, bo);
  for (int r = 0; r < 16; r++)
    for (int n = 0; n < 8; n++) {
      emu_mma_slot &o = w[(r % 8) * 4 + n / 2];
      const int q = 2 * (r >= 8) + n % 2;
      float acc = first ? o.c[q] : o.d[q];
      for (int k = 0; k < K; k++)
        acc += A[r][k] * B[k][n];
      o.d[q] = acc;
    }
}

inline void emu_mma(int shape, float d[4], const uint32_t *a, const uint32_t *b, const float c[4], int n = 1) {
  const unsigned me = emu_cur, lane = me % 32, w0 = me - lane;
  const unsigned nt = emu_block.x * emu_block.y * emu_block.z;
  if (w0 + 32 > nt || nt > 1024) {
    fprintf(stderr, "cuda emulator: mma.sync in block (%u,%u,%u), warp %u of a block of %u threads: not a whole warp\n",
            emu_bidx.x, emu_bidx.y, emu_bidx.z, w0 / 32, nt);
    abort();
  }
  emu_mma_slot *w = emu_mma_slots + w0, &s = emu_mma_slots[me];
  const unsigned long long seq = s.block == emu_block_no ? s.seq + 1 : 1;
  s.block = emu_block_no;
  s.seq = seq;
  s.done = 0;
  s.shape = shape;
  const int x3 = shape == EMU_MMA_TF32X3;
  if (n < 1 || n > EMU_MMA_CHAIN) {
    fprintf(stderr, "cuda emulator: a chain of %d products (1 to %d)\n", n, EMU_MMA_CHAIN);
    abort();
  }
  s.n = n;
  memcpy(s.a, a, (size_t)n * (x3 ? 8 : 4) * sizeof *a);
  memcpy(s.b, b, (size_t)n * (x3 ? 4 : 2) * sizeof *b);
  memcpy(s.c, c, sizeof s.c);
  int arrived = 0;
  for (int l = 0; l < 32; l++)
    arrived += w[l].block == emu_block_no && w[l].seq == seq;
  if (arrived == 32) { /* the last lane: every lane's D */
    for (int l = 0; l < 32; l++)
      if (w[l].shape != shape || w[l].n != n) {
        fprintf(stderr,
                "cuda emulator: mma.sync in block (%u,%u,%u), warp %u: lanes %u and %d at different shapes or "
                "chains\n",
                emu_bidx.x, emu_bidx.y, emu_bidx.z, w0 / 32, lane, l);
        abort();
      }
    for (int q = 0; q < n; q++) {
      if (x3) { /* Al Bh, Ah Bl, Ah Bh, in mma_tf32x3's order */
        emu_mma_warp(w, EMU_MMA_TF32_1688, 8 * q + 4, 4 * q, q == 0);
        emu_mma_warp(w, EMU_MMA_TF32_1688, 8 * q, 4 * q + 2, 0);
        emu_mma_warp(w, EMU_MMA_TF32_1688, 8 * q, 4 * q, 0);
      } else {
        emu_mma_warp(w, shape, 4 * q, 2 * q, q == 0);
      }
    }
    for (int l = 0; l < 32; l++)
      w[l].done = seq;
  } else {
    emu_warp_wait();
    if (s.done != seq) {
      int other = 0;
      while (other < 32 && w[other].block == emu_block_no && w[other].seq == seq)
        other++;
      fprintf(stderr,
              "cuda emulator: mma.sync in block (%u,%u,%u), warp %u: lane %u reached its product %llu, lane %d did "
              "not (a divergent warp)\n",
              emu_bidx.x, emu_bidx.y, emu_bidx.z, w0 / 32, lane, seq, other);
      abort();
    }
  }
  memcpy(d, s.d, sizeof s.d);
}

/* cvt.rna.tf32.f32: x to tf32's 10 mantissa bits, to nearest, ties away from zero */
inline uint32_t emu_tf32_rna(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) == 0x7f800000u) return u; /* Inf, NaN */
  return (u + 0x1000u) & 0xffffe000u;
}
#endif
