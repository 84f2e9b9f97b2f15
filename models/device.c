/* device.c — choosing a backend from the workflow's `device:` (device.h). */
#include "models/device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/cpu/table.h"
#if defined(SE3_CUDA_BACKEND) && !defined(SE3_REAL_F64)
#include "models/cuda/table.h"
#endif

int nn_device_parse(const char *s, struct nn_device *d, char *err, size_t errlen) {
  memset(d, 0, sizeof *d);
  if (!s || !strcmp(s, "cpu")) return 0;
  if (!strcmp(s, "auto")) {
    d->cuda = d->any = 1;
    return 0;
  }
  if (!strcmp(s, "cuda")) {
    d->cuda = 1;
    return 0;
  }
  if (!strncmp(s, "cuda:", 5) && s[5] >= '0' && s[5] <= '9') {
    char *end;
    long i = strtol(s + 5, &end, 10);
    if (!*end && i >= 0 && i < 1024) {
      d->cuda = 1;
      d->index = (int)i;
      return 0;
    }
  }
  snprintf(err, errlen, "device '%s' is not one of cpu, cuda, cuda:N (N = 0, 1, ...) or auto", s);
  return -1;
}

/* The CUDA backend on GPU `index`, or NULL with a message. */
static const struct nn_backend *cuda_open(int index, enum nn_precision precision, char *err, size_t errlen) {
#if defined(SE3_CUDA_BACKEND) && !defined(SE3_REAL_F64)
  return nn_backend_cuda(index, precision, err, errlen);
#else
  (void)index;
  (void)precision;
  snprintf(err, errlen,
           "this se3screen was built without the CUDA backend (it is built when CMake finds nvcc); install the "
           "CUDA toolkit and rebuild, or set device: cpu");
  return NULL;
#endif
}

const struct nn_backend *nn_backend_host(void) { return nn_backend_cpu(); }

static const char *precision_name(enum nn_precision p) {
  switch (p) {
  case NN_PREC_FP32: return "fp32";
  case NN_PREC_TF32: return "tf32";
  case NN_PREC_BF16: return "bf16";
  case NN_PREC_FP16: return "fp16";
  }
  return "?";
}

const struct nn_backend *nn_backend_open(const struct nn_device *d, enum nn_precision precision, char *err,
                                         size_t errlen) {
  if (d->cuda) {
    char why[512] = "";
    const struct nn_backend *be = cuda_open(d->index, precision, why, sizeof why);
    if (be) return be;
    if (!d->any) {
      snprintf(err, errlen, "device: cuda%s%.0d was asked for, but %s", d->index ? ":" : "", d->index, why);
      return NULL;
    }
    /* auto: the CPU, which has FP32 only */
  }
  if (precision != NN_PREC_FP32) {
    snprintf(err, errlen, "precision %s needs a GPU (device: cuda); the CPU backend computes in fp32",
             precision_name(precision));
    return NULL;
  }
  return nn_backend_cpu();
}
