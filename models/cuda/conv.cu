/* conv.cu — the TFN convolution on the GPU: not written yet; until it is,
 * both directions fail with a message (reported by sync). */
#include "models/cuda/cuda.h"

int cu_conv_forward(real *const y[], const struct nn_conv_shape *s, const real *const x[], const real *basis,
                    const real *s2, const real *W3, int H, int pool) {
  (void)y, (void)s, (void)x, (void)basis, (void)s2, (void)W3, (void)H, (void)pool;
  cu_fail(__FILE__, __LINE__, "the convolution is not built into the CUDA backend yet");
  return -1;
}

int cu_conv_backward(real *const dx[], real *ds2, real *dW3, const struct nn_conv_shape *s, const real *const dy[],
                     const real *const x[], const real *basis, const real *s2, const real *W3, int H, int pool) {
  (void)dx, (void)ds2, (void)dW3, (void)s, (void)dy, (void)x, (void)basis, (void)s2, (void)W3, (void)H, (void)pool;
  cu_fail(__FILE__, __LINE__, "the convolution is not built into the CUDA backend yet");
  return -1;
}
