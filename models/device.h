/* device.h — choosing and opening a backend (backend.h) from the
 * workflow's `device:` and `precision:`. */
#ifndef SE3_DEVICE_H
#define SE3_DEVICE_H

#include <stddef.h>

#include "models/backend.h"

/* ---- choosing a backend ---------------------------------------------------------
 * The workflow's `device:` names one: "cpu", "cuda" (the first GPU), "cuda:N"
 * or "auto" (a GPU when this build has the CUDA backend and a usable GPU is
 * present, else the CPU). "cuda" and "auto" take a GPU by rank: with several
 * processes on a node, the caller sets index to the node-local rank, and the
 * GPU is that modulo the number of GPUs the process sees (one each under
 * Slurm's --gpus-per-task=1: cuda:0). */
struct nn_device {
  int cuda;    /* 0: the CPU; 1: a GPU */
  int index;   /* the GPU's index (cuda:N), or with by_rank the node-local rank (0 for one process) */
  int by_rank; /* "cuda", "auto": the GPU is index modulo the GPUs this process sees */
  int any;     /* "auto": fall back to the CPU when no GPU can be used */
};
/* 0, or -1 with a message naming the value and the choices. */
int nn_device_parse(const char *s, struct nn_device *d, struct se3_error *err);
/* The backend for d, ready to use; NULL with a message in err saying what
 * was asked, what was found and how to run on the CPU instead. */
const struct nn_backend *nn_backend_open(const struct nn_device *d, enum nn_precision precision, struct se3_error *err);
/* The CPU backend, which is always there (fp32; double in the gradient
 * tests' build): nn_backend_open of device "cpu". */
const struct nn_backend *nn_backend_host(void);

/* ---- precisions -------------------------------------------------------------------
 * The workflow's `precision:` (and the benchmarks' --precision): "fp32",
 * "tf32", "bf16" or "fp16". The one parser of the word: 0, or -1 when s is
 * none of them. nn_precision_name gives the word back ("?" out of range). */
int nn_precision_parse(const char *s, enum nn_precision *p);
const char *nn_precision_name(enum nn_precision p);

/* The workflow's `gpu_conv:` (and the benchmarks' --conv): "direct", "gemm"
 * or "fused" (enum nn_conv_path, backend.h's set_conv_path). 0, or -1 when
 * s is none of them; nn_conv_path_name gives the word back. */
int nn_conv_path_parse(const char *s, enum nn_conv_path *p);
const char *nn_conv_path_name(enum nn_conv_path p);

/* ---- the host ----------------------------------------------------------------------
 * What the CPU backend computes with, for `se3screen --version`, the logs and
 * the benchmarks, so that nothing above models/ includes a backend's header. */
struct nn_host {
  const char *isa;           /* the convolution's variant: base, avx2, avx512 */
  const char *isa_best;      /* the widest the processor supports */
  int bf16;                  /* 1: the CPU can score in bf16 (AVX512-BF16) */
  const char *blas_core;     /* OpenBLAS's kernels as they run (e.g. SkylakeX) */
  const char *blas_detected; /* what OpenBLAS chose itself, when se3screen overrode it; else NULL */
  const char *blas_forced;   /* OPENBLAS_CORETYPE as the user set it, or NULL */
  const char *blas_better;   /* kernels this processor could run that are better than blas_core, or NULL */
  const char *blas_config;   /* openblas_get_config() */
};
void nn_host_info(struct nn_host *h);
/* Re-execute argv[0] with the environment OpenBLAS and OpenMP read only
 * when they load, when this processor needs it (models/cpu/isa.h,
 * nn_cpu_reexec); returns when nothing needs doing or it failed. */
void nn_host_reexec(char **argv);

#endif
