/* platform.c — what the model runs on (stage.h, "platform"). */
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <stdio.h>

#include "models/device.h"
#include "models/cpu/isa.h"
#include "models/cpu/real.h"
#include "stage.h"

void stage_platform_info(struct stage_platform *p) {
  memset(p, 0, sizeof *p);
  p->isa = nn_isa_name(nn_isa_current());
  int best = NN_ISA_BASE;
  for (int i = NN_ISA_COUNT - 1; i > 0; i--)
    if (nn_isa_supported((enum nn_isa)i)) {
      best = i;
      break;
    }
  p->isa_best = nn_isa_name((enum nn_isa)best);
  p->blas_core = nn_blas_core();
  const char *d = getenv(NN_BLAS_DETECTED_ENV);
  p->blas_detected = d && *d && strcmp(d, p->blas_core) ? d : NULL;
  const char *forced = getenv("OPENBLAS_CORETYPE");
  p->blas_forced = forced && *forced && !p->blas_detected ? forced : NULL;
  p->blas_better = nn_blas_core_better();
  const char *cfg = openblas_get_config();
  p->blas_config = cfg ? cfg : "?";
#ifdef _OPENMP
  p->threads = omp_get_max_threads();
#else
  p->threads = 1;
#endif
}

void stage_blas_reexec(char **argv) { nn_blas_reexec(argv); }

const struct nn_backend *stage_backend(const struct cfg_node *root, char *err, size_t errlen) {
  static const struct nn_backend *opened;
  static char key[64];
  const char *dev = cfg_str(root, "device", "cpu"), *prec = cfg_str(root, "precision", "fp32");
  char want[64];
  snprintf(want, sizeof want, "%s/%s", dev, prec);
  if (opened && !strcmp(key, want)) return opened;
  struct nn_device d;
  if (nn_device_parse(dev, &d, err, errlen)) return NULL;
  enum nn_precision p = !strcmp(prec, "tf32") ? NN_PREC_TF32 : NN_PREC_FP32;
  const struct nn_backend *be = nn_backend_open(&d, p, err, errlen);
  if (be) {
    opened = be;
    snprintf(key, sizeof key, "%s", want);
  }
  return be;
}

int stage_device_check(const struct cfg_node *root, char *err, size_t errlen) {
  return stage_backend(root, err, errlen) ? 0 : -1;
}
