/* state.h — the CUDA backend's device state, for table.cu (which opens the
 * device, copies, records and fills the table) and state.cu (what every
 * operation asks of the device: its stream and handles, the record of
 * failures, the scratch buffers; cuda.h declares those). Not for the
 * operations' files: they go through cuda.h's functions.
 *
 * One device per process: one state. */
#ifndef SE3_CUDA_STATE_H
#define SE3_CUDA_STATE_H

#include "models/cuda/cuda.h"

/* The GEMMs' workspace: allocated once when the device opens and given to
 * cuBLAS (cublasSetWorkspace) and to cuBLASLt (gemm.cu), so neither
 * allocates while a step is being recorded; 32 MiB is what NVIDIA advises
 * for Hopper. */
#define CU_WORKSPACE_BYTES ((size_t)32 << 20)

struct cu_state {
  int open, index, count; /* the GPU opened, and how many this process sees */
  cudaStream_t stream;
  cublasHandle_t blas;
  cublasLtHandle_t lt; /* NULL: cuBLASLt did not start, dense layers add their bias apart */
  void *ws;            /* the GEMM workspace (cuBLAS's and cuBLASLt's), CU_WORKSPACE_BYTES or NULL */
  void *scratch[CU_SCRATCH_SLOTS];
  size_t scratch_cap[CU_SCRATCH_SLOTS];
  int failed;    /* a failure since the last sync */
  char err[768]; /* the first one */
  char name[32];
  /* upload staging: two pinned halves, the one being filled, its fill, the
   * events marking each half's last copy (armed: recorded at least once) */
  char *stage[2];
  cudaEvent_t stage_done[2];
  int stage_cur, stage_armed[2], stage_off;
  size_t stage_used;
  /* recorded work: a capture under way, spoiled by a failure or a need for
   * memory while it ran; gen counts the frees of device memory and the
   * switches of precision, which leave older recordings stale */
  int recording, rec_spoiled;
  unsigned long gen, rec_gen;
  enum nn_precision precision; /* the table's (cu_precision) */
};

extern struct cu_state cu_st;

#endif
