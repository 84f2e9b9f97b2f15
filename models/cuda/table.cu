/* table.cu — the CUDA backend's table (models/backend.h): opening the
 * device, memory and copies, sync (reporting the failures recorded), the
 * recorded work, and the table itself (cuda.h lists where each operation
 * lives). What the operations ask of the device (its stream, the record of
 * failures, the scratch buffers) is state.cu's, so that they never call
 * back into this file, which calls them.
 *
 * One device per process: one state (state.h).
 * nn_backend_cuda_open opens GPU `index` (or, by rank, table.h's
 * nn_cuda_pick) once (its stream, its cuBLAS handle) and returns the same
 * table on later calls for that GPU; asking for another GPU in the same
 * process is refused.
 *
 * Memory is cudaMalloc'd (256-byte aligned, as the contract asks); copies
 * and zeroing are queued on the stream. `download` waits; `download_queued`
 * copies into pinned memory (host_alloc) without waiting, and a fence is a
 * CUDA event recorded on the stream.
 *
 * `upload` goes through pinned (page-locked) host memory of our own: two
 * halves of CU_STAGE_BYTES, filled in turn. The caller's bytes are copied
 * into the current half (a host memcpy) and a cudaMemcpyAsync from there is
 * queued; when a half is full, an event marks its last copy and the other
 * half is taken, once the event that marked its own last copy has passed.
 * So an upload returns without waiting for the GPU (unless it has not yet
 * reached copies queued two halves ago), and the caller may reuse its
 * buffer at once. A cudaMemcpyAsync from pageable memory instead waits for
 * everything queued before it: the host could not build the next batch
 * while the GPU computes the last. Without pinned memory (cudaHostAlloc
 * refused) uploads are the plain pageable copies. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/cuda/cuda.h"
#include "models/cuda/state.h"
#include "models/cuda/table.h"

/* The device's state (state.h; state.cu defines it and what the operations
 * ask of it), as st here. */
static struct cu_state &st = cu_st;

#ifndef CU_STAGE_BYTES /* (dev/cuda_emu makes it small, to cross halves often) */
#define CU_STAGE_BYTES ((size_t)32 << 20)
#endif

static struct nn_backend table;

/* After a wait: 0, or -1 with the first failure recorded since the last
 * wait (then forgotten). */
static int waited(struct se3_error *err) {
  CU_CHECK(cudaGetLastError());
  if (!st.failed) return 0;
  se3_error_set(err, SE3_ERR_MODEL, "the GPU (%s, %s) failed: %s", table.name, table.device, st.err);
  st.failed = 0;
  st.err[0] = 0;
  return -1;
}

static int cu_sync(struct se3_error *err) {
  cu_wait(st.stream, NULL, __FILE__, __LINE__);
  return waited(err);
}

/* ---- memory ---- */

/* The size asked for, not rounded up: cudaMalloc's pointers are 256-byte
 * aligned anyway, and the emulator under ASan (dev/cuda_emu, EMU_ASAN=1)
 * sees an access past the last byte asked for. */
static void *cu_alloc(size_t bytes) {
  void *p = NULL;
  if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
    (void)cudaGetLastError(); /* out of memory is the caller's to report, not a failure of the device */
    return NULL;
  }
  return p;
}

static void cu_release(void *p) {
  if (!p) return;
  CU_CHECK(cudaFree(p));
  st.gen++; /* a recording may have used it */
}

/* The pinned halves, once: 0, or -1 (st.stage_off: uploads go direct). */
static int stage_open(void) {
  if (st.stage[0]) return 0;
  if (st.stage_off) return -1;
  for (int h = 0; h < 2; h++)
    if (cudaHostAlloc((void **)&st.stage[h], CU_STAGE_BYTES, cudaHostAllocDefault) != cudaSuccess ||
        cudaEventCreateWithFlags(&st.stage_done[h], cudaEventDisableTiming) != cudaSuccess) {
      (void)cudaGetLastError(); /* not a failure: pageable copies work, only slower */
      st.stage[h] = NULL;
      for (int k = 0; k < h; k++) {
        (void)cudaFreeHost(st.stage[k]);
        (void)cudaEventDestroy(st.stage_done[k]);
        st.stage[k] = NULL;
      }
      st.stage_off = 1;
      return -1;
    }
  st.stage_cur = 0;
  st.stage_used = 0;
  return 0;
}

static void cu_upload(void *dst, const void *host_src, size_t bytes) {
  if (!bytes) return;
  if (stage_open()) {
    CU_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, st.stream));
    return;
  }
  const char *src = (const char *)host_src;
  char *d = (char *)dst;
  while (bytes) {
    if (st.stage_used == CU_STAGE_BYTES) { /* this half is full: mark its last copy, take the other */
      int h = st.stage_cur;
      if (CU_CHECK(cudaEventRecord(st.stage_done[h], st.stream))) return;
      st.stage_armed[h] = 1;
      h ^= 1;
      if (st.stage_armed[h] && cu_wait(st.stream, &st.stage_done[h], __FILE__, __LINE__)) return;
      st.stage_cur = h;
      st.stage_used = 0;
    }
    size_t take = CU_STAGE_BYTES - st.stage_used;
    if (take > bytes) take = bytes;
    char *p = st.stage[st.stage_cur] + st.stage_used;
    memcpy(p, src, take);
    if (CU_CHECK(cudaMemcpyAsync(d, p, take, cudaMemcpyHostToDevice, st.stream))) return;
    st.stage_used += cu_round(take); /* the next copy starts 256-byte aligned */
    if (st.stage_used > CU_STAGE_BYTES) st.stage_used = CU_STAGE_BYTES;
    src += take;
    d += take;
    bytes -= take;
  }
}

static void cu_download(void *host_dst, const void *src, size_t bytes) {
  if (!bytes) return;
  CU_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, st.stream));
  cu_wait(st.stream, NULL, __FILE__, __LINE__);
}

/* ---- copies back that do not wait: pinned memory, events ---- */

static void *cu_host_alloc(size_t bytes) {
  void *p = NULL; /* (the size asked for, as cu_alloc) */
  if (cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocDefault) != cudaSuccess) {
    (void)cudaGetLastError(); /* out of memory is the caller's to report */
    return NULL;
  }
  return p;
}

static void cu_host_release(void *p) {
  if (p) CU_CHECK(cudaFreeHost(p));
}

static void cu_download_queued(void *host_dst, const void *src, size_t bytes) {
  if (bytes) CU_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, st.stream));
}

/* A fence is a CUDA event (timing off), behind a pointer. */
struct cu_fence {
  cudaEvent_t ev;
};

static void *cu_fence_new(void) {
  struct cu_fence *f = (struct cu_fence *)malloc(sizeof *f);
  if (!f) return NULL;
  if (cudaEventCreateWithFlags(&f->ev, cudaEventDisableTiming) != cudaSuccess) {
    (void)cudaGetLastError();
    free(f);
    return NULL;
  }
  return f;
}

static void cu_fence_mark(void *fence) { CU_CHECK(cudaEventRecord(((struct cu_fence *)fence)->ev, st.stream)); }

static int cu_fence_wait(void *fence, struct se3_error *err) {
  cu_wait(st.stream, &((struct cu_fence *)fence)->ev, __FILE__, __LINE__);
  return waited(err);
}

static void cu_fence_free(void *fence) {
  if (!fence) return;
  (void)cudaEventDestroy(((struct cu_fence *)fence)->ev);
  free(fence);
}

static void cu_copy(void *dst, const void *src, size_t bytes) {
  if (bytes && dst != src) CU_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, st.stream));
}

static void cu_zero(void *p, size_t bytes) {
  if (bytes) CU_CHECK(cudaMemsetAsync(p, 0, bytes, st.stream));
}

/* ---- recorded work: CUDA graphs ----
 * The stream is captured (thread-local mode: a cudaMalloc or a wait in this
 * thread while capturing spoils the capture instead of running), and the
 * graph instantiated once; a replay is one cudaGraphLaunch. A recording
 * keeps the generation it was made in: a free of device memory since (its
 * buffers may be gone) or a switch of precision (cuBLAS's math mode is
 * baked in) makes it stale. */
struct cu_rec {
  cudaGraphExec_t exec;
  unsigned long gen;
  int collectives; /* NCCL's calls in it (collectives.cu tracks each replay as one) */
};

static int cu_record_begin(void) {
  if (st.failed || st.recording) return -1;
  if (cudaStreamBeginCapture(st.stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  st.recording = 1;
  st.rec_spoiled = 0;
  st.rec_gen = st.gen;
  (void)cu_collectives_recorded(); /* (counted from here) */
  return 0;
}

static void *cu_record_end(void) {
  if (!st.recording) return NULL;
  cudaGraph_t g = NULL;
  cudaError_t e = cudaStreamEndCapture(st.stream, &g);
  st.recording = 0;
  struct cu_rec *r = NULL;
  if (e == cudaSuccess && g && !st.rec_spoiled && st.gen == st.rec_gen &&
      (r = (struct cu_rec *)malloc(sizeof *r)) != NULL) {
    if (cudaGraphInstantiate(&r->exec, g, 0) == cudaSuccess) {
      r->gen = st.gen;
      r->collectives = cu_collectives_recorded();
    } else {
      free(r);
      r = NULL;
    }
  }
  if (g) (void)cudaGraphDestroy(g);
  (void)cudaGetLastError(); /* a refused capture is not a failure of the device */
  return r;
}

static int cu_replay(void *rec) {
  struct cu_rec *r = (struct cu_rec *)rec;
  if (r->gen != st.gen) return 1;
  CU_CHECK(cudaGraphLaunch(r->exec, st.stream));
  if (r->collectives) cu_collectives_replayed(r->collectives);
  return 0;
}

static void cu_record_free(void *rec) {
  if (!rec) return;
  (void)cudaGraphExecDestroy(((struct cu_rec *)rec)->exec);
  free(rec);
}

/* At exit, while the CUDA runtime is still there (it registered its own
 * exit handler before this one, so it runs after). Errors no longer matter. */
static void cu_shutdown(void) {
  if (!st.open) return;
  cu_collectives_shutdown();
  cu_bases_shutdown();
  cu_gemm_shutdown();
  for (int i = 0; i < CU_SCRATCH_SLOTS; i++)
    if (st.scratch[i]) (void)cudaFreeAsync(st.scratch[i], st.stream);
  (void)cudaStreamSynchronize(st.stream);
  for (int h = 0; h < 2; h++)
    if (st.stage[h]) {
      (void)cudaFreeHost(st.stage[h]);
      (void)cudaEventDestroy(st.stage_done[h]);
    }
  if (st.lt) (void)cublasLtDestroy(st.lt);
  (void)cublasDestroy(st.blas);
  if (st.ws) (void)cudaFree(st.ws);
  (void)cudaStreamDestroy(st.stream);
  st.open = 0;
}

/* ---- the table ---- */

/* backend.h's set_conv_path: recordings hold the kernels of the path they were made on */
static int conv_path_on; /* enum nn_conv_path */
static void set_conv_path(int path) {
  if (path != NN_CONV_GEMM && path != NN_CONV_FUSED) path = NN_CONV_DIRECT;
  if (path != conv_path_on) st.gen++;
  conv_path_on = path;
  cu_conv_set_path(path);
}

static void fill_table(void) {
  table.host_memory = 0;
  table.alloc = cu_alloc;
  table.release = cu_release;
  table.upload = cu_upload;
  table.download = cu_download;
  table.copy = cu_copy;
  table.zero = cu_zero;
  table.sync = cu_sync;
  table.host_alloc = cu_host_alloc;
  table.host_release = cu_host_release;
  table.download_queued = cu_download_queued;
  table.fence_new = cu_fence_new;
  table.fence_mark = cu_fence_mark;
  table.fence_wait = cu_fence_wait;
  table.fence_free = cu_fence_free;
  table.linear_forward = cu_linear_forward;
  table.linear_backward = cu_linear_backward;
  table.norm_forward = cu_norm_forward;
  table.norm_backward = cu_norm_backward;
  table.dense_forward = cu_dense_forward;
  table.dense_backward = cu_dense_backward;
  table.radial_hidden_forward = cu_radial_hidden_forward;
  table.radial_hidden_backward = cu_radial_hidden_backward;
  table.conv_forward = cu_conv_forward;
  table.conv_backward = cu_conv_backward;
  table.attn_forward = cu_attn_forward;
  table.attn_backward = cu_attn_backward;
  table.scale_rows = cu_scale_rows;
  table.pool_max_forward = cu_pool_max_forward;
  table.pool_max_backward = cu_pool_max_backward;
  table.pool_mean_forward = cu_pool_mean_forward;
  table.pool_mean_backward = cu_pool_mean_backward;
  table.concat_rows = cu_concat_rows;
  table.split_rows = cu_split_rows;
  table.add = cu_add;
  table.relu = cu_relu;
  table.relu_backward = cu_relu_backward;
  table.bases = cu_bases;
  table.prepare_bases = cu_prepare_bases;
  table.edge_weights = cu_edge_weights;
  table.adam_step = cu_adam_step;
  table.adam_step_at = cu_adam_step_at;
  table.sumsq = cu_sumsq;
  table.scale = cu_scale;
  table.loss = cu_loss;
  table.sumsq_to = cu_sumsq_to;
  table.clip = cu_clip;
  table.add_f64 = cu_add_f64;
  table.allreduce = cu_allreduce;
  table.set_conv_path = set_conv_path;
  table.record_begin = cu_record_begin;
  table.record_end = cu_record_end;
  table.replay = cu_replay;
  table.record_free = cu_record_free;
#ifdef SE3_HAVE_NCCL
  table.join = cu_join;
  table.reduce_scatter = cu_reduce_scatter;
  table.allgather = cu_allgather;
  table.sum_start = cu_sum_start;
  table.sum_wait = cu_sum_wait;
  table.allreduce_f64 = cu_allreduce_f64;
#endif
}

static const char *const run_on_cpu = "set device: cpu to run on the CPU";

/* cuBLAS's math mode for a precision: 0, or -1 with a message. bf16 and
 * fp16 keep the default mode: cu_mm asks for their tensor cores per product
 * (cublasGemmEx's compute type), since no math mode allows them. */
static int set_precision(enum nn_precision precision, struct se3_error *err) {
  cublasMath_t mode;
  switch (precision) {
  case NN_PREC_FP32:
  case NN_PREC_BF16:
  case NN_PREC_FP16:
    mode = CUBLAS_DEFAULT_MATH;
    break;
  case NN_PREC_TF32:
    mode = CUBLAS_TF32_TENSOR_OP_MATH;
    break;
  default:
    se3_error_set(err, SE3_ERR_USAGE,
                  "precision %d is not offered: the CUDA backend computes in fp32, tf32, bf16 or fp16", (int)precision);
    return -1;
  }
  cublasStatus_t s = cublasSetMathMode(st.blas, mode);
  if (s != CUBLAS_STATUS_SUCCESS) {
    se3_error_set(err, SE3_ERR_MODEL, "cublasSetMathMode failed on GPU %d: %s", st.index, cublasGetStatusString(s));
    return -1;
  }
  if (table.precision != precision) st.gen++; /* recordings hold the old math mode */
  table.precision = st.precision = precision;
  return 0;
}

extern "C" const struct nn_backend *nn_backend_cuda_open(int index, int by_rank, enum nn_precision precision,
                                                         struct se3_error *err) {
  if (st.open) {
    index = nn_cuda_pick(index, by_rank, st.count);
    if (index != st.index) {
      se3_error_set(err, SE3_ERR_USAGE,
                    "this process already drives GPU %d, and a process drives one GPU only (cuda:%d asked for)",
                    st.index, index);
      return NULL;
    }
    return set_precision(precision, err) ? NULL : &table;
  }
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    int rt = 0;
    (void)cudaRuntimeGetVersion(&rt);
    char hint[160];
    if (e == cudaErrorInsufficientDriver)
      snprintf(hint, sizeof hint, ": no NVIDIA driver is loaded, or it is older than this build's CUDA %d.%d runtime",
               rt / 1000, rt % 1000 / 10);
    else
      snprintf(hint, sizeof hint, " (this build's CUDA runtime is %d.%d)", rt / 1000, rt % 1000 / 10);
    se3_error_set(err, SE3_ERR_MODEL, "no CUDA driver or GPU: cudaGetDeviceCount says '%s' (%s)%s; %s",
                  cudaGetErrorString(e), cudaGetErrorName(e), hint, run_on_cpu);
    (void)cudaGetLastError();
    return NULL;
  }
  if (count <= 0) {
    se3_error_set(err, SE3_ERR_MODEL, "no GPU: the CUDA driver found none; %s", run_on_cpu);
    return NULL;
  }
  index = nn_cuda_pick(index, by_rank, count);
  if (index < 0 || index >= count) {
    if (count == 1)
      se3_error_set(err, SE3_ERR_USAGE, "GPU %d asked for, 1 found (cuda:0); set device: cuda:0, or %s", index,
                    run_on_cpu);
    else
      se3_error_set(err, SE3_ERR_USAGE,
                    "GPU %d asked for, %d found (cuda:0 .. cuda:%d); set device: cuda:N with one of them, or %s", index,
                    count, count - 1, run_on_cpu);
    return NULL;
  }
  cudaDeviceProp prop;
  if ((e = cudaSetDevice(index)) != cudaSuccess || (e = cudaGetDeviceProperties(&prop, index)) != cudaSuccess) {
    se3_error_set(err, SE3_ERR_MODEL, "GPU %d cannot be used: %s (%s); %s", index, cudaGetErrorString(e),
                  cudaGetErrorName(e), run_on_cpu);
    (void)cudaGetLastError();
    return NULL;
  }
  if (prop.major < 8) {
    se3_error_set(
        err, SE3_ERR_MODEL,
        "GPU %d (%s) has compute capability %d.%d; this build has code for 8.0 and newer (A100, H100, ...); %s", index,
        prop.name, prop.major, prop.minor, run_on_cpu);
    return NULL;
  }
  /* Non-blocking: nothing on the legacy default stream (a library's, a
   * debugger's) orders itself with the backend's work or breaks a capture. */
  if ((e = cudaStreamCreateWithFlags(&st.stream, cudaStreamNonBlocking)) != cudaSuccess) {
    se3_error_set(err, SE3_ERR_MODEL, "GPU %d (%s): cudaStreamCreateWithFlags failed: %s; %s", index, prop.name,
                  cudaGetErrorString(e), run_on_cpu);
    return NULL;
  }
  cublasStatus_t s = cublasCreate(&st.blas);
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasSetStream(st.blas, st.stream);
  if (s != CUBLAS_STATUS_SUCCESS) {
    se3_error_set(err, SE3_ERR_MODEL, "GPU %d (%s): cuBLAS could not start: %s; %s", index, prop.name,
                  cublasGetStatusString(s), run_on_cpu);
    (void)cudaStreamDestroy(st.stream);
    return NULL;
  }
  /* The workspace, after cublasSetStream (which would reset it). Without
   * it cuBLAS keeps its own pool and cuBLASLt runs without workspace;
   * without cuBLASLt the dense layers add their bias in a kernel of their
   * own: slower, not wrong, so neither refuses the device. */
  void *ws = NULL;
  if (cudaMalloc(&ws, CU_WORKSPACE_BYTES) != cudaSuccess) {
    (void)cudaGetLastError();
    ws = NULL;
  } else if (cublasSetWorkspace(st.blas, ws, CU_WORKSPACE_BYTES) != CUBLAS_STATUS_SUCCESS) {
    (void)cudaFree(ws);
    ws = NULL;
  }
  st.ws = ws;
  if (cublasLtCreate(&st.lt) != CUBLAS_STATUS_SUCCESS) st.lt = NULL;
  st.index = index;
  st.count = count;
  if (set_precision(precision, err)) {
    if (st.lt) (void)cublasLtDestroy(st.lt);
    st.lt = NULL;
    (void)cublasDestroy(st.blas);
    if (st.ws) (void)cudaFree(st.ws);
    st.ws = NULL;
    (void)cudaStreamDestroy(st.stream);
    return NULL;
  }
  st.open = 1;
  atexit(cu_shutdown);
  snprintf(st.name, sizeof st.name, "cuda:%d", index);
  table.name = st.name;
  snprintf(table.device, sizeof table.device, "%.127s", prop.name);
  fill_table();
  return &table;
}
