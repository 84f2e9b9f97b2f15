/* device.c — choosing a backend from the workflow's `device:` (device.h). */
#include "models/device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/cpu/isa.h"
#include "models/cpu/real.h"
#include "models/cpu/table.h"
#if defined(SE3_CUDA_BACKEND) && !defined(SE3_REAL_F64)
#include <dlfcn.h>
#include <limits.h>
#include <unistd.h>

#include "models/cuda/table.h"
#endif

int nn_device_parse(const char *s, struct nn_device *d, struct se3_error *err) {
  memset(d, 0, sizeof *d);
  if (!s || !strcmp(s, "cpu")) return 0;
  if (!strcmp(s, "auto")) {
    d->cuda = d->any = d->by_rank = 1;
    return 0;
  }
  if (!strcmp(s, "cuda")) {
    d->cuda = d->by_rank = 1;
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
  se3_error_set(err, SE3_ERR_USAGE, "device '%s' is not one of cpu, cuda, cuda:N (N = 0, 1, ...) or auto", s);
  return -1;
}

/* The CUDA backend on GPU `index` (by_rank: of node-local rank `index`,
 * models/cuda/table.h), or NULL with a message. The backend is a module
 * (libse3cuda.so, models/cuda/table.h's nn_backend_cuda_open) loaded on
 * first use, so that only runs on a GPU load the CUDA runtime and cuBLAS:
 * from beside the executable, else from where it was built. */
static const struct nn_backend *cuda_open(int index, int by_rank, enum nn_precision precision, struct se3_error *err) {
#if defined(SE3_CUDA_BACKEND) && !defined(SE3_REAL_F64)
  static const struct nn_backend *(*open_fn)(int, int, enum nn_precision, struct se3_error *);
  if (!open_fn) {
    char exe[PATH_MAX], path[PATH_MAX + 32];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    void *h = NULL;
    if (n > 0) {
      exe[n] = 0;
      char *slash = strrchr(exe, '/');
      if (slash) *slash = 0;
      snprintf(path, sizeof path, "%s/libse3cuda.so", exe);
      h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    }
    if (!h) h = dlopen(SE3_CUDA_MODULE, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      se3_error_set(err, SE3_ERR_MODEL, "the CUDA backend (%s) could not be loaded: %s; set device: cpu",
                    SE3_CUDA_MODULE, dlerror());
      return NULL;
    }
    *(void **)&open_fn = dlsym(h, "nn_backend_cuda_open");
    if (!open_fn) {
      se3_error_set(
          err, SE3_ERR_MODEL,
          "the CUDA backend (%s) lacks nn_backend_cuda_open (a module of another se3screen?): %s; set device: cpu",
          SE3_CUDA_MODULE, dlerror());
      return NULL;
    }
  }
  return open_fn(index, by_rank, precision, err);
#else
  (void)index;
  (void)by_rank;
  (void)precision;
  se3_error_set(err, SE3_ERR_MODEL,
                "this se3screen was built without the CUDA backend (it is built when CMake finds nvcc); install the "
                "CUDA toolkit and rebuild, or set device: cpu");
  return NULL;
#endif
}

const struct nn_backend *nn_backend_host(void) { return nn_backend_cpu(); }

const struct nn_backend *nn_backend_open(const struct nn_device *d, enum nn_precision precision,
                                         struct se3_error *err) {
  if (d->cuda) {
    struct se3_error e;
    const struct nn_backend *be = cuda_open(d->index, d->by_rank, precision, &e);
    if (be) return be;
    if (!d->any) { /* (the module's or the device's kind) */
      const char *why = e.message;
      if (d->by_rank && d->index)
        se3_error_set(err, e.kind, "device: cuda (node-local rank %d) was asked for, but %s", d->index, why);
      else if (d->by_rank)
        se3_error_set(err, e.kind, "device: cuda was asked for, but %s", why);
      else
        se3_error_set(err, e.kind, "device: cuda%s%.0d was asked for, but %s", d->index ? ":" : "", d->index, why);
      return NULL;
    }
    /* auto: the CPU, in fp32 or (scoring) bf16 */
  }
  return nn_backend_cpu_precision(precision, err);
}

static const char *const precision_names[] = {"fp32", "tf32", "bf16", "fp16"}; /* enum nn_precision's order */

int nn_precision_parse(const char *s, enum nn_precision *p) {
  for (int k = 0; s && k < 4; k++)
    if (!strcmp(s, precision_names[k])) {
      *p = (enum nn_precision)k;
      return 0;
    }
  return -1;
}

const char *nn_precision_name(enum nn_precision p) { return (unsigned)p < 4 ? precision_names[p] : "?"; }

static const char *const conv_path_names[] = {"direct", "gemm", "fused"}; /* enum nn_conv_path's order */

int nn_conv_path_parse(const char *s, enum nn_conv_path *p) {
  for (int k = 0; s && k < 3; k++)
    if (!strcmp(s, conv_path_names[k])) {
      *p = (enum nn_conv_path)k;
      return 0;
    }
  return -1;
}

const char *nn_conv_path_name(enum nn_conv_path p) { return (unsigned)p < 3 ? conv_path_names[p] : "?"; }

void nn_host_info(struct nn_host *h) {
  memset(h, 0, sizeof *h);
  h->isa = nn_isa_name(nn_isa_current());
  int best = NN_ISA_BASE;
  for (int i = NN_ISA_COUNT - 1; i > 0; i--)
    if (nn_isa_supported((enum nn_isa)i)) {
      best = i;
      break;
    }
  h->isa_best = nn_isa_name((enum nn_isa)best);
  h->bf16 = nn_bf16_supported();
  h->blas_core = nn_blas_core();
  const char *d = getenv(NN_BLAS_DETECTED_ENV);
  h->blas_detected = d && *d && strcmp(d, h->blas_core) ? d : NULL;
  const char *forced = getenv("OPENBLAS_CORETYPE");
  h->blas_forced = forced && *forced && !h->blas_detected ? forced : NULL;
  h->blas_better = nn_blas_core_better();
  const char *cfg = openblas_get_config();
  h->blas_config = cfg ? cfg : "?";
}

void nn_host_reexec(char **argv) { nn_cpu_reexec(argv); }
