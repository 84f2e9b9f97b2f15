/* The emulator's fp16 (dev/cuda_emu/run.sh): the storage type and the
 * conversions models/cuda/ uses, through the compiler's _Float16 (IEEE
 * binary16, rounded to nearest, ties to even, as the GPU's __float2half_rn). */
#ifndef SE3_CUDA_EMU_FP16_H
#define SE3_CUDA_EMU_FP16_H
struct __half {
  _Float16 x;
};
inline __half __float2half_rn(float f) {
  __half h;
  h.x = (_Float16)f;
  return h;
}
inline float __half2float(__half h) { return (float)h.x; }
#endif
