/* device.h — choosing and opening a backend (backend.h) from the
 * workflow's `device:` and `precision:`. */
#ifndef SE3_DEVICE_H
#define SE3_DEVICE_H

#include <stddef.h>

#include "models/backend.h"

/* ---- choosing a backend ---------------------------------------------------------
 * The workflow's `device:` names one: "cpu", "cuda" (the first GPU), "cuda:N"
 * or "auto" (a GPU when this build has the CUDA backend and a usable GPU is
 * present, else the CPU). */
struct nn_device {
  int cuda;  /* 0: the CPU; 1: a GPU */
  int index; /* the GPU's index (cuda:N) */
  int any;   /* "auto": fall back to the CPU when no GPU can be used */
};
/* 0, or -1 with a message naming the value and the choices. */
int nn_device_parse(const char *s, struct nn_device *d, char *err, size_t errlen);
/* The backend for d, ready to use; NULL with a message in err saying what
 * was asked, what was found and how to run on the CPU instead. */
const struct nn_backend *nn_backend_open(const struct nn_device *d, enum nn_precision precision, char *err,
                                         size_t errlen);
/* The CPU backend, which is always there (fp32; double in the gradient
 * tests' build): nn_backend_open of device "cpu". */
const struct nn_backend *nn_backend_host(void);

#endif
