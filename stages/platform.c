/* platform.c — what the model runs on (stage.h, "platform"). */
#define _GNU_SOURCE
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <stdio.h>
#include <unistd.h>

#include "chem/obbridge.h"
#include "models/device.h"
#include "stage.h"

void stage_platform_info(struct stage_platform *p) {
  memset(p, 0, sizeof *p);
  struct nn_host h;
  nn_host_info(&h);
  p->isa = h.isa;
  p->isa_best = h.isa_best;
  p->bf16 = h.bf16;
  p->blas_core = h.blas_core;
  p->blas_detected = h.blas_detected;
  p->blas_forced = h.blas_forced;
  p->blas_better = h.blas_better;
  p->blas_config = h.blas_config;
  p->openbabel = ob_version();
  p->gen3d_fallback = ob_gen3d_fallback();
#ifdef _OPENMP
  p->threads = omp_get_max_threads();
#else
  p->threads = 1;
#endif
  const char *policy = getenv("OMP_WAIT_POLICY"), *spin = getenv("GOMP_SPINCOUNT");
  if (policy && *policy)
    snprintf(p->omp_wait, sizeof p->omp_wait, "OMP_WAIT_POLICY=%.40s", policy);
  else if (spin && *spin)
    snprintf(p->omp_wait, sizeof p->omp_wait, "GOMP_SPINCOUNT=%.40s", spin);
  else
    snprintf(p->omp_wait, sizeof p->omp_wait, "the OpenMP runtime's default");
}

void stage_cpu_reexec(char **argv) { nn_host_reexec(argv); }

int stage_cores(void) {
  cpu_set_t set;
  long n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

/* the run's processes, for the GPU each takes (stage_share_cores) */
static const struct se3_comm *run_comm;

void stage_share_cores(const struct se3_comm *comm) {
  run_comm = comm;
#ifdef _OPENMP
  int local = comm_local_size(comm);
  const char *env = getenv("OMP_NUM_THREADS");
  if (local <= 1 || (env && *env)) return;
  cpu_set_t set;
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  int mine = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : (int)online;
  int n = mine >= online ? (int)(online / local) : mine; /* unbound: a share of the node */
  omp_set_num_threads(n > 0 ? n : 1);
#else
  (void)comm;
#endif
}

const struct nn_backend *stage_backend(const struct cfg_node *root, int training, const char **key,
                                       struct se3_error *err) {
  static const struct nn_backend *opened;
  static char opened_key[80];
  const char *dev = cfg_str(root, "device"), *prec = cfg_str(root, "precision");
  enum nn_conv_path conv = NN_CONV_GEMM; /* the schema lets only the three words through */
  (void)nn_conv_path_parse(cfg_str(root, "gpu_conv"), &conv);
  char want[80];
  snprintf(want, sizeof want, "%s/%s/%d/%d", dev, prec, training, (int)conv);
  if (key) *key = "device";
  if (opened && !strcmp(opened_key, want)) return opened;
  struct nn_device d;
  if (nn_device_parse(dev, &d, err)) { return NULL; }
  /* several processes on a node, `cuda` or `auto`: one GPU each, by local
   * rank modulo the GPUs a process sees (the backend knows how many) */
  if (d.by_rank) d.index = comm_local_rank(run_comm);
  enum nn_precision p = NN_PREC_FP32; /* the schema lets only the four words through */
  if (nn_precision_parse(prec, &p)) {
    se3_error_set(err, SE3_ERR_USAGE, "precision '%s' is not one of fp32, tf32, bf16, fp16", prec);
    if (key) *key = "precision";
    return NULL;
  }
  const struct nn_backend *be = nn_backend_open(&d, p, err);
  if (!be && p != NN_PREC_FP32 && key) { /* the device is there: its precision is what failed */
    if (nn_backend_open(&d, NN_PREC_FP32, NULL)) *key = "precision";
  }
  /* bf16 on the CPU is the convolution's forward only: training there runs in fp32 */
  if (be && training && be->host_memory && be->precision == NN_PREC_BF16) {
    struct nn_device cpu = {0};
    be = nn_backend_open(&cpu, NN_PREC_FP32, err);
  }
  if (be && be->set_conv_path) be->set_conv_path(conv);
  if (be) {
    opened = be;
    snprintf(opened_key, sizeof opened_key, "%s", want);
  }
  return be;
}

const char *stage_precision_name(const struct nn_backend *be) { return nn_precision_name(be->precision); }

const char *stage_conv_note(const struct cfg_node *root, const struct nn_backend *be) {
  if (!be->set_conv_path) return "";
  const char *c = cfg_str(root, "gpu_conv");
  return !strcmp(c, "gemm")    ? "; the convolution as GEMMs (gpu_conv: gemm)"
         : !strcmp(c, "fused") ? "; the convolution fused on tensor cores (gpu_conv: fused)"
                               : "; the convolution's direct kernels (gpu_conv: direct)";
}

int stage_device_check(const struct cfg_node *root, const char **key, struct se3_error *err) {
  return stage_backend(root, 0, key, err) ? 0 : -1;
}
