/* table.h — the CUDA backend's table (models/backend.h), for models/device.c.
 * C linkage: the table is filled by CUDA C++ (models/cuda/table.cu). */
#ifndef SE3_CUDA_TABLE_H
#define SE3_CUDA_TABLE_H

#include <stddef.h>

#include "models/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The backend on GPU `index`, opened once per process (one device per
 * process); NULL with a message saying what was found and "set device: cpu"
 * when no usable driver or GPU is there, or the precision is not offered. */
const struct nn_backend *nn_backend_cuda(int index, enum nn_precision precision, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
