/* table.h — the CUDA backend's table (models/backend.h), for models/device.c.
 * C linkage: the table is filled by CUDA C++ (models/cuda/table.cu). */
#ifndef SE3_CUDA_TABLE_H
#define SE3_CUDA_TABLE_H

#include <stddef.h>

#include "models/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The backend on GPU `index` (by_rank 0: device cuda:N), or, with by_rank,
 * on the GPU of node-local rank `index` among those this process sees
 * (nn_cuda_pick); opened once per process (one device per process); NULL
 * with a message saying what was found and "set device: cpu" when no usable
 * driver or GPU is there, cuda:N is not one of them, or the precision is not
 * offered. The module's entry point: models/device.c finds it with dlsym by
 * this name (tests/gpu/module_symbols.sh checks the module has it). */
const struct nn_backend *nn_backend_cuda_open(int index, int by_rank, enum nn_precision precision,
                                              struct se3_error *err);

/* The GPU a process takes among the `count` it sees: with by_rank, its
 * node-local rank `index` modulo count (Slurm's --gpus-per-task=1, or a
 * CUDA_VISIBLE_DEVICES set per rank, shows each process one GPU, its own,
 * as cuda:0; all the node's GPUs shown to every process give rank r GPU r);
 * else `index` itself, which the caller refuses when out of range. */
static inline int nn_cuda_pick(int index, int by_rank, int count) {
  return by_rank && count > 0 && index >= 0 ? index % count : index;
}

#ifdef __cplusplus
}
#endif

#endif
