/* cuda.h — the CUDA backend's internal header (models/backend.h is the
 * contract; this is how models/cuda/ keeps its pieces together).
 *
 * One device per process: one state (state.h: its stream, its cuBLAS
 * handle, the scratch buffers, the first failure since the last sync),
 * which table.cu opens; table.cu fills the table from the entry points
 * declared here, one file per concern:
 *   table.cu        opening the device, memory, copies, sync, the table
 *   state.cu        what the operations ask of the device: stream,
 *                   handles, precision, failures, scratch
 *   gemm.cu         row-major GEMMs on cuBLAS; linear and dense layers
 *                   (the dense forward's bias in cuBLASLt's epilogue)
 *   reduce.cu       deterministic column sums and the sum of squares
 *   elementwise.cu  the model's glue, scale, edge weights, Adam, the
 *                   step's loss and the gradient's clipping
 *   norm.cu         the norm nonlinearity and layer norm + ReLU
 *   radial.cu       the radial network's hidden layers
 *   attention.cu    the graph attention (segment softmax by target)
 *   pool.cu         molecule pooling
 *   conv.cu         the TFN convolution fused with the radial network's
 *                   last layer (conv.h: what it shares with conv_fused.cu)
 *   conv_fused.cu   the same on tensor cores, nothing per edge stored
 *                   (gpu_conv: fused; mma.h: the warp's MMAs)
 *   basis.cu        every edge's basis from its relative position
 *   collectives.cu  NCCL between the GPUs of a data-parallel run
 *
 * Everything runs in order on the one stream; nothing waits for the device
 * inside an operation except `download` and `sumsq` (which return host
 * values), `fence_wait`, and an upload that finds both pinned staging halves
 * still being copied from (table.cu). Every CUDA, cuBLAS call and kernel launch is checked: the first
 * failure is recorded (where, what, CUDA's words) and `sync` reports it.
 * Every reduction is in a fixed order (no floating-point atomics), so a
 * result does not depend on thread timing.
 *
 * `real` is float here: the backend is built into the float model library
 * only (the double build has no CUDA backend: models/device.c says so).
 */
#ifndef SE3_CUDA_CUDA_H
#define SE3_CUDA_CUDA_H

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

/* The project's headers are C: their functions keep C linkage. */
extern "C" {
#include "models/backend.h"
}

static_assert(sizeof(real) == sizeof(float), "the CUDA backend is built for real = float only");

/* ---- the device (state.cu; table.cu opens it) ---- */
cudaStream_t cu_stream(void);
cublasHandle_t cu_blas(void);
/* cuBLASLt's handle (NULL when it did not start) and the GEMMs' workspace
 * (NULL, 0 without one), both set up with the device. */
cublasLtHandle_t cu_blaslt(void);
void *cu_workspace(size_t *bytes);
/* The table's precision: cu_mm's products are fp32, tf32 or bf16 by it. */
enum nn_precision cu_precision(void);

/* 0 when e is cudaSuccess; else records the first failure since the last
 * sync (file:line, what was called, CUDA's message) and returns -1. */
int cu_check(cudaError_t e, const char *file, int line, const char *what);
int cu_check_blas(cublasStatus_t s, const char *file, int line, const char *what);
/* Records a failure that is not a CUDA error code (e.g. out of scratch). */
void cu_fail(const char *file, int line, const char *what);
/* The host waits until everything queued on stream s has run (ev NULL) or
 * event *ev has passed: 0, or -1 with the failure recorded (file:line). The
 * one way the backend waits (collectives.cu): while an NCCL communicator is
 * joined, a poll of the stream and of NCCL's asynchronous errors with a
 * deadline (poll.h), so a dead peer ends in a failure naming the collective,
 * not a hang; otherwise cudaStreamSynchronize / cudaEventSynchronize. */
int cu_wait(cudaStream_t s, const cudaEvent_t *ev, const char *file, int line);
#define CU_CHECK(call) cu_check((call), __FILE__, __LINE__, #call)
#define CU_BLAS(call) cu_check_blas((call), __FILE__, __LINE__, #call)
/* After every kernel launch: a bad configuration shows at once, a fault in
 * the kernel at the next sync. */
#define CU_LAUNCHED(name) cu_check(cudaGetLastError(), __FILE__, __LINE__, "launch of " name)

/* ---- scratch (state.cu) ----
 * Grow-only device buffers, one per slot, for the temporaries of an
 * operation; stream-ordered (cudaMallocAsync / cudaFreeAsync on the one
 * stream), so growing one never waits for the device, and the next
 * operation may reuse a buffer because it runs after this one. An operation
 * asks for one slot once and carves its arrays from it (cu_carve). Slot
 * CU_SCRATCH_LAYER is for an operation that calls others which use
 * CU_SCRATCH_OP themselves (the radial network's backward). Freed at exit.
 * NULL when out of memory (recorded for sync too). */
enum cu_scratch_slot { CU_SCRATCH_OP = 0, CU_SCRATCH_LAYER = 1, CU_SCRATCH_SLOTS = 2 };
void *cu_scratch(enum cu_scratch_slot slot, size_t bytes);

/* Sizes rounded to 256 bytes, so every carved array stays aligned. */
static inline size_t cu_round(size_t bytes) { return (bytes + 255) / 256 * 256; }
/* The next array of `bytes` from a scratch block (sizes added up beforehand
 * with cu_round). */
static inline void *cu_carve(char **p, size_t bytes) {
  void *r = *p;
  *p += cu_round(bytes);
  return r;
}

/* ---- launches ---- */
#define CU_THREADS 256
/* Blocks for n items, CU_THREADS each, capped: kernels loop grid-stride.
 * n must be > 0 (a launch of no blocks is an error; callers skip n = 0). */
static inline unsigned cu_grid(size_t n) {
  size_t b = (n + CU_THREADS - 1) / CU_THREADS;
  return (unsigned)(b < ((size_t)1 << 20) ? b : ((size_t)1 << 20));
}

/* ---- GEMM (gemm.cu) ----
 * C (m x n) = alpha op(A) op(B) + beta C, every matrix ROW-major with row
 * strides lda, ldb, ldc (models/cpu/real.h's nn_mm, on cuBLAS); beta = 0
 * does not read C. k <= 0 gives C = beta C. */
void cu_mm(int ta, int tb, int m, int n, int k, real alpha, const real *A, int lda, const real *B, int ldb, real beta,
           real *C, int ldc);

/* Element types of arrays a GEMM reads or writes (cu_mm_t). */
enum cu_type { CU_F32 = 0, CU_BF16 = 1, CU_F16 = 2 };
static inline size_t cu_type_bytes(enum cu_type t) { return t == CU_F32 ? 4 : 2; }
/* C = op(A) op(B) + beta C (alpha 1), as cu_mm, for `batch` independent
 * products at fixed strides (elements) sA, sB, sC between one product's
 * matrices and the next's (cuBLAS's strided-batched GEMM), its arrays fp32,
 * bf16 or fp16: A and B of one type, C fp32 or (with half inputs) that half
 * type. With fp32 inputs the
 * products are cu_mm's, in the table's precision; with bf16 or fp16 inputs
 * they run on tensor cores with fp32 sums (CUBLAS_COMPUTE_32F) and C is
 * rounded to its type. batch 1 is a plain GEMM (strides unused). */
void cu_mm_t(int ta, int tb, int m, int n, int k, const void *A, enum cu_type at, int lda, long long sA, const void *B,
             enum cu_type bt, int ldb, long long sB, real beta, void *C, enum cu_type ct, int ldc, long long sC,
             int batch);
/* dst (n elements of type t) = src rounded to t (to nearest, ties to even). */
void cu_convert(void *dst, enum cu_type t, const real *src, size_t n);
/* Frees gemm.cu's cuBLASLt plans (at exit). */
void cu_gemm_shutdown(void);

/* ---- reductions (reduce.cu) ----
 * out[c] += sum over r of in[r ld + c] (rows x cols), in row order within
 * fixed blocks of rows and then in block order: deterministic. part: scratch
 * of cu_colsum_scratch(rows, cols) bytes. */
size_t cu_colsum_scratch(long rows, int cols);
void cu_colsum_add(real *out, const real *in, long rows, int cols, long ld, real *part);

/* ---- graphs (attention.cu) ----
 * dst[e] = the target of edge e, from the CSR offsets in_start (N + 1). */
void cu_edge_targets(int32_t *dst, const int32_t *in_start, int N);

/* ---- the table's operations ---- */
/* collectives.cu (NCCL; without it, only an allreduce that refuses) */
int cu_allreduce(real *x, size_t n, const struct se3_comm *comm, struct se3_error *err);
int cu_join(const struct se3_comm *comm, int rank, int size,
            int (*bcast)(const struct se3_comm *c, void *buf, size_t bytes),
            void (*end_job)(const struct se3_comm *c, int code), struct se3_error *err);
int cu_reduce_scatter(real *x, size_t n, struct se3_error *err);
int cu_allgather(real *x, size_t n, struct se3_error *err);
int cu_sum_start(real *x, size_t n, struct se3_error *err);
int cu_allreduce_f64(double *x, size_t n, struct se3_error *err);
int cu_sum_wait(struct se3_error *err);
void cu_collectives_shutdown(void);
/* Recorded collectives (NCCL's calls inside a capture): how many were
 * queued since the last call (table.cu's record_begin and record_end ask);
 * a replay of a recording holding n of them is tracked as one pending
 * entry, for a failed wait's message. cu_recording: 1 while a capture is
 * under way (state.cu). */
int cu_collectives_recorded(void);
void cu_collectives_replayed(int n);
int cu_recording(void);
/* gemm.cu */
void cu_linear_forward(real *y, const real *x, const real *W, int rows, int cin, int cout);
void cu_linear_backward(real *dx, real *dW, const real *dy, const real *x, const real *W, int rows, int cin, int cout);
void cu_dense_forward(real *y, const real *x, const real *W, const real *b, int rows, int in, int out);
void cu_dense_backward(real *dx, real *dW, real *db, const real *dy, const real *x, const real *W, int rows, int in,
                       int out);
/* reduce.cu */
double cu_sumsq(const real *x, size_t n);
void cu_sumsq_to(double *ss, const real *x, size_t n);
/* elementwise.cu */
void cu_concat_rows(real *out, const real *x, int a, const real *y, int b, size_t rows);
void cu_split_rows(real *x, int a, real *y, int b, const real *in, size_t rows);
void cu_add(real *y, const real *x, size_t n);
void cu_add_f64(double *y, const double *x, size_t n);
void cu_relu(real *y, const real *x, size_t n);
void cu_relu_backward(real *dy, const real *x, size_t n);
void cu_edge_weights(real *w, const real *edge_feat, int E, int in, int kind, real cutoff, int bonds_kept);
void cu_scale_rows(real *x, const real *w, int rows, int n);
void cu_scale(real *x, size_t n, double s);
void cu_loss(real *dpred, double *acc, const real *pred, const real *target, int n, int kind, double delta, int num,
             int den, double gscale);
void cu_clip(real *x, size_t n, const double *ss, double unscale, double max_norm, double *norm);
void cu_adam_step(real *params, real *m, real *v, const real *grad, size_t n, const struct nn_adam *o, long step,
                  double lr);
void cu_adam_step_at(real *params, real *m, real *v, const real *grad, size_t n, const struct nn_adam *o,
                     const double *sched);
/* norm.cu */
void cu_norm_forward(real *y, real *save, const real *x, const real *gamma, const real *beta, int N, int dim, int C);
void cu_norm_backward(real *dx, real *dgamma, real *dbeta, const real *dy, const real *x, const real *save,
                      const real *gamma, const real *beta, int N, int dim, int C);
void cu_lnrelu_forward(real *y, real *save, const real *x, const real *gamma, const real *beta, int rows, int n);
void cu_lnrelu_backward(real *dx, real *dgamma, real *dbeta, const real *dy, const real *x, const real *save,
                        const real *gamma, const real *beta, int rows, int n);
/* radial.cu */
void cu_radial_hidden_forward(real *save, const real *x, const real *params, int E, int in, int H);
void cu_radial_hidden_backward(real *dx, real *dparams, const real *ds2, const real *x, const real *save,
                               const real *params, int E, int in, int H);
/* attention.cu */
void cu_attn_forward(real *const z[], real *alpha, const struct nn_attn_shape *s, const real *const kv[],
                     const real *const q[]);
void cu_attn_backward(real *const dkv[], real *const dq[], const struct nn_attn_shape *s, const real *const dz[],
                      const real *alpha, const real *const kv[], const real *const q[]);
/* basis.cu */
int cu_bases(real *out, const float *rel, int E, const struct basis_plan *plan);
int cu_prepare_bases(const struct basis_plan *plan, struct se3_error *err);
void cu_bases_shutdown(void);
/* pool.cu */
void cu_pool_max_forward(real *y, int32_t *arg, const real *x, const int32_t *graph_start, int G, int C);
void cu_pool_max_backward(real *dx, const real *dy, const int32_t *arg, int N, int G, int C);
void cu_pool_mean_forward(real *y, const real *x, const int32_t *graph_start, int G, int C);
void cu_pool_mean_backward(real *dx, const real *dy, const int32_t *graph_start, int G, int C);
/* conv.cu */
/* conv.cu: the path of the convolution (backend.h's set_conv_path, enum nn_conv_path) */
void cu_conv_set_path(int path);
int cu_conv_forward(real *const y[], const struct nn_conv_shape *s, const real *const x[], const real *basis,
                    const real *s2, const real *W3, int H, int pool);
int cu_conv_backward(real *const dx[], real *ds2, real *dW3, const struct nn_conv_shape *s, const real *const dy[],
                     const real *const x[], const real *basis, const real *s2, const real *W3, int H, int pool);

#endif
