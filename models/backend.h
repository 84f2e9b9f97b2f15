/* backend.h — a compute backend is a table of operations. The model
 * (models/se3.c) is written once against this table; the CPU backend
 * (models/cpu/table.c) and the CUDA backend (models/cuda/) fill it. Adding
 * a backend means filling a table, not editing the model or the stages.
 *
 * Memory. Every pointer an operation takes is the backend's memory (device
 * memory on a GPU), except where a member says "host". Shapes, fibers and
 * counts are plain host values; the structs of layers.h that carry arrays
 * (nn_conv_shape's src and in_start, nn_attn_shape's in_start and w) point
 * into the backend's memory too. The one exception is nn_conv_shape's plan
 * (models/basis.h), a host struct of small tables: a backend that needs it in
 * its own memory keeps its own copy (it does not change during a run).
 *
 * Semantics. A layer operation does exactly what the CPU function of the
 * same name in models/cpu/nn.h documents (shapes, what is saved, which
 * gradients are added to and which overwritten, NULL meaning "not needed"),
 * and it keeps the same save layouts (layers.h), so the model can find s2
 * in a radial network's save area on any backend. Results may differ from
 * the CPU's by round-off (another summation order, TF32 or half precision
 * where `precision` allows); tests/gpu/test_backend_ops.c bounds the
 * difference of every operation on every backend against the CPU. Every
 * reduction runs in a fixed order (no floating-point atomics), so on one
 * device a result is the same from run to run, bit for bit.
 *
 * Order. Operations may run asynchronously, in the order they are called
 * (one stream); `download` and `sumsq` return host values and so wait for
 * what came before them. `sync` waits and reports a failure of anything
 * queued since the last sync.
 *
 * One device per process: a table drives the device it was opened on
 * (models/device.h chooses and opens one). One precision at a time: opening
 * the same device again with another precision returns the same table,
 * switched to it, for everything that uses it. Data-parallel training runs one process per device and
 * joins their gradients through `allreduce`.
 */
#ifndef SE3_BACKEND_H
#define SE3_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "models/layers.h"

/* Arithmetic precisions a backend may offer (the workflow's `precision:`).
 * FP32 everywhere is the default; the CPU backend also has BF16 (the
 * convolution's radial product, for scoring) where the processor has
 * AVX512-BF16, as a second table (models/cpu/table.h). */
enum nn_precision { NN_PREC_FP32 = 0, NN_PREC_TF32 = 1, NN_PREC_BF16 = 2, NN_PREC_FP16 = 3 };
/* The convolution's path on a GPU (set_conv_path below; the workflow's `gpu_conv:`). */
enum nn_conv_path { NN_CONV_DIRECT = 0, NN_CONV_GEMM = 1, NN_CONV_FUSED = 2 };

/* A group of processes whose gradients are summed (common/comm.h); NULL
 * for a run of one process. */
struct se3_comm;

struct nn_backend {
  const char *name; /* "cpu", "cuda:0", ... */
  char device[128]; /* the hardware, for logs and benchmark JSON (processor or GPU name) */
  int host_memory;  /* 1: the backend's memory is the host's (pointers can be shared, copies skipped) */
  enum nn_precision precision;

  /* ---- memory ---- */
  void *(*alloc)(size_t bytes); /* 256-byte aligned; NULL when out of memory */
  void (*release)(void *p);     /* NULL is allowed */
  void (*upload)(void *dst, const void *host_src, size_t bytes);
  void (*download)(void *host_dst, const void *src, size_t bytes); /* waits for queued work */
  void (*copy)(void *dst, const void *src, size_t bytes);          /* the two must not overlap */
  void (*zero)(void *p, size_t bytes);
  /* Waits for queued work: 0, or -1 with what failed in err. */
  int (*sync)(struct se3_error *err);
  /* ---- copies back that do not wait, for pipelines (scoring) ----
   * host_alloc: host memory the device copies into directly (page-locked on
   * a GPU; plain on the host), NULL when out of memory; host_release frees
   * it (NULL allowed). download_queued queues a copy of src into host_dst
   * (from host_alloc) behind the work queued before it, and returns at once:
   * the bytes are there once a fence marked after it has passed. A fence
   * (fence_new: NULL when out of resources) marks the work queued so far
   * each time fence_mark is called; fence_wait waits until the last mark
   * has passed and reports, as sync does, a failure of anything queued
   * since the last sync or wait (0, or -1 with err). */
  void *(*host_alloc)(size_t bytes);
  void (*host_release)(void *p);
  void (*download_queued)(void *host_dst, const void *src, size_t bytes);
  void *(*fence_new)(void);
  void (*fence_mark)(void *fence);
  int (*fence_wait)(void *fence, struct se3_error *err);
  void (*fence_free)(void *fence); /* NULL allowed */

  /* ---- layers (models/cpu/nn.h documents each) ---- */
  void (*linear_forward)(real *y, const real *x, const real *W, int rows, int cin, int cout);
  void (*linear_backward)(real *dx, real *dW, const real *dy, const real *x, const real *W, int rows, int cin,
                          int cout);
  void (*norm_forward)(real *y, real *save, const real *x, const real *gamma, const real *beta, int N, int dim, int C);
  void (*norm_backward)(real *dx, real *dgamma, real *dbeta, const real *dy, const real *x, const real *save,
                        const real *gamma, const real *beta, int N, int dim, int C);
  void (*dense_forward)(real *y, const real *x, const real *W, const real *b, int rows, int in, int out);
  void (*dense_backward)(real *dx, real *dW, real *db, const real *dy, const real *x, const real *W, int rows, int in,
                         int out);
  void (*radial_hidden_forward)(real *save, const real *x, const real *params, int E, int in, int H);
  void (*radial_hidden_backward)(real *dx, real *dparams, const real *ds2, const real *x, const real *save,
                                 const real *params, int E, int in, int H);
  /* 0, or -1 when out of memory or the device failed (sync says which) */
  int (*conv_forward)(real *const y[], const struct nn_conv_shape *s, const real *const x[], const real *basis,
                      const real *s2, const real *W3, int H, int pool);
  int (*conv_backward)(real *const dx[], real *ds2, real *dW3, const struct nn_conv_shape *s, const real *const dy[],
                       const real *const x[], const real *basis, const real *s2, const real *W3, int H, int pool);
  void (*attn_forward)(real *const z[], real *alpha, const struct nn_attn_shape *s, const real *const kv[],
                       const real *const q[]);
  void (*attn_backward)(real *const dkv[], real *const dq[], const struct nn_attn_shape *s, const real *const dz[],
                        const real *alpha, const real *const kv[], const real *const q[]);
  void (*scale_rows)(real *x, const real *w, int rows, int n);
  void (*pool_max_forward)(real *y, int32_t *arg, const real *x, const int32_t *graph_start, int G, int C);
  void (*pool_max_backward)(real *dx, const real *dy, const int32_t *arg, int N, int G, int C);
  void (*pool_mean_forward)(real *y, const real *x, const int32_t *graph_start, int G, int C);
  void (*pool_mean_backward)(real *dx, const real *dy, const int32_t *graph_start, int G, int C);

  /* ---- the model's glue (element-wise; models/cpu/table.c is the reference) ---- */
  /* out (rows x (a + b)) = [x (rows x a), y (rows x b)] side by side; b may be 0 (y unused). */
  void (*concat_rows)(real *out, const real *x, int a, const real *y, int b, size_t rows);
  /* The inverse: in (rows x (a + b)) into x (rows x a) and y (rows x b); a NULL x or y is skipped. */
  void (*split_rows)(real *x, int a, real *y, int b, const real *in, size_t rows);
  void (*add)(real *y, const real *x, size_t n);            /* y += x */
  void (*relu)(real *y, const real *x, size_t n);           /* y = max(x, 0) */
  void (*relu_backward)(real *dy, const real *x, size_t n); /* dy = x > 0 ? dy : 0, in place */
  /* Every edge's basis (models/basis.h's basis_edge, models/kernels/basis.h):
   * out (E x plan->per_edge) from rel (E x 3 floats, target minus source),
   * both the backend's memory; plan is the host's (a device backend keeps
   * its own copy of its tables, by max_degree). 0, or -1 when out of memory
   * or the device failed (sync says which). */
  int (*bases)(real *out, const float *rel, int E, const struct basis_plan *plan);
  /* Loads the tables `bases` needs for plan onto the device, once per
   * max_degree, before any step (se3_net_create calls it): nothing is
   * allocated or copied on first use, inside a step that may be recorded.
   * A device backend's bases fails for a plan not prepared. 0, or -1 with
   * err. NULL where the backend keeps nothing (the CPU). */
  int (*prepare_bases)(const struct basis_plan *plan, struct se3_error *err);
  /* w[e] = nn_edge_weight(edge_feat + e in, in, kind, cutoff, bonds_kept) (models/kernels/envelope.h) */
  void (*edge_weights)(real *w, const real *edge_feat, int E, int in, int kind, real cutoff, int bonds_kept);

  /* ---- training ---- */
  /* nn_adam_step of models/cpu/optim.h */
  void (*adam_step)(real *params, real *m, real *v, const real *grad, size_t n, const struct nn_adam *o, long step,
                    double lr);
  /* adam_step with the step's bias corrections and learning rate read from
   * the backend's memory when the update runs: sched = {c1, c2, lr, norm,
   * skip} (models/kernels/adam.h's nn_k_adam_sched), so a recorded step
   * (below) takes each replay's values; with skip != 0 and a norm that is
   * not finite (written there by `clip` in the same step) it does nothing,
   * so a recorded loss-scaled step skips itself on an overflow. The same
   * arithmetic as adam_step. */
  void (*adam_step_at)(real *params, real *m, real *v, const real *grad, size_t n, const struct nn_adam *o,
                       const double *sched);
  double (*sumsq)(const real *x, size_t n);   /* sum of x[i]^2 in double, on the host; waits */
  void (*scale)(real *x, size_t n, double s); /* x *= s */
  /* A training step's loss without a trip to the host (models/kernels/loss.h's
   * nn_k_step_loss): dpred (n) = d loss / d pred, the mean over the n
   * entries, times num / den when they differ and times gscale when it is
   * not 1; acc (two doubles, the backend's memory): acc[0] = loss * num,
   * acc[1] += acc[0]. kind is objective.h's enum nn_loss, delta the Huber
   * delta (> 0). Nothing waits. */
  void (*loss)(real *dpred, double *acc, const real *pred, const real *target, int n, int kind, double delta, int num,
               int den, double gscale);
  /* *ss (one double, the backend's memory) = sumsq(x, n), in sumsq's order;
   * nothing waits. */
  void (*sumsq_to)(double *ss, const real *x, size_t n);
  /* Clips x (n reals, `unscale` times the true gradient) by *ss, its sum of
   * squares, in the backend's memory: x times nn_k_clip_factor(*ss, unscale,
   * max_norm) (models/kernels/loss.h), the same arithmetic as the host's
   * se3_net_unscale_clip; norm (one double, the backend's memory) gets the
   * true gradient's norm. Nothing waits. */
  void (*clip)(real *x, size_t n, const double *ss, double unscale, double max_norm, double *norm);
  /* y += x, n doubles in the backend's memory; nothing waits (a recorded
   * data-parallel step adds the loss summed over the processes to the
   * running sum with it: acc[1] of `loss`). */
  void (*add_f64)(double *y, const double *x, size_t n);
  /* Sums x (n reals) over the processes of comm, in place, the same result
   * on each, in comm.h's fixed order: the gradient all-reduce of
   * data-parallel training. With comm NULL (one process) nothing to do: 0.
   * -1 with a message in err. */
  int (*allreduce)(real *x, size_t n, const struct se3_comm *comm, struct se3_error *err);

  /* ---- collectives between devices (NULL on a host backend, and on a
   * device backend built without them: the model then moves the arrays
   * through the host and comm.h) ---- */
  /* Joins the device collectives of the processes of comm (NCCL on the
   * CUDA backend: rank 0's unique id sent to all with `bcast`, comm.h's
   * comm_bcast), once; later calls with the same comm do nothing. After it
   * `allreduce` sums on the device (the same result on every process, in
   * the library's order, not comm.h's), and the two below work. When a
   * wait of the backend later fails while several processes are joined
   * (a peer that died or stopped, NCCL's asynchronous error, the device's
   * fault), the backend prints its message with the rank and ends the job
   * with `end_job` (comm.h's comm_abort): the peers wait on their devices
   * for this process's part of a collective, which will not come, and an
   * MPI call after the failure could wait for a peer that has stopped. 0,
   * or -1 with a message in err. */
  int (*join)(const struct se3_comm *comm, int rank, int size,
              int (*bcast)(const struct se3_comm *c, void *buf, size_t bytes),
              void (*end_job)(const struct se3_comm *c, int code), struct se3_error *err);
  /* comm.h's comm_reduce_scatter and comm_allgather on the device's x (n
   * reals), with comm.h's slices (comm_slice). 0, or -1 with err. */
  int (*reduce_scatter)(real *x, size_t n, struct se3_error *err);
  int (*allgather)(real *x, size_t n, struct se3_error *err);
  /* x (n doubles, the backend's memory) summed over the joined processes,
   * in place, behind the work queued before it; nothing waits: a recorded
   * data-parallel step's loss and a sharded gradient's sum of squares, so
   * the step needs no trip to the host. After join; 0, or -1 with err. */
  int (*allreduce_f64)(double *x, size_t n, struct se3_error *err);
  /* The gradient summed bucket by bucket while the backward goes on (NULL
   * where the backend cannot: the model then sums after the backward).
   * sum_start queues the sum of x[0..n) over the joined processes on a
   * stream of its own, behind the work queued before it; the work queued
   * after it does not wait for it. sum_wait makes the work queued after it
   * wait for every sum started. After join; 0, or -1 with err. */
  int (*sum_start)(real *x, size_t n, struct se3_error *err);
  int (*sum_wait)(struct se3_error *err);

  /* ---- recorded work (CUDA graphs; NULL where the backend cannot: every
   * step then runs as it is called) ----
   * record_begin: the operations called from now until record_end are
   * recorded, not run (nothing may wait in between: no download, sync,
   * sumsq, fence_wait, upload or alloc). record_end returns the recording,
   * ready to replay, or NULL when it could not be made (an operation needed
   * memory the backend did not yet hold, or the device refused): nothing of
   * it ran, so the caller runs the same work eagerly instead; a NULL is not
   * a failure of the device. replay queues a recording's work, behind what
   * was queued before: 0, or 1 when it is stale (memory it used has been
   * given back since, or the precision switched: record it anew). The
   * arguments it was recorded with are replayed as they were; only the
   * contents of the memory they point to may differ from one replay to the
   * next. */
  int (*record_begin)(void);
  void *(*record_end)(void);
  int (*replay)(void *rec);
  void (*record_free)(void *rec); /* NULL allowed */

  /* ---- the convolution's path (the workflow's `gpu_conv:`; NULL where the
   * backend has one path, as the CPU) ----
   * NN_CONV_DIRECT: direct kernels (R recomputed in registers, never
   * stored); NN_CONV_GEMM: the radial product and the per-edge contraction
   * as GEMMs on tensor cores, R stored a chunk of edges at a time;
   * NN_CONV_FUSED: R a tile at a time on tensor cores, contracted at once,
   * never stored (models/cuda/conv.cu). The same sums up to round-off;
   * recordings made before a switch are stale. */
  void (*set_conv_path)(int path);
};

/* An arena whose blocks are the backend's memory. */
static inline void nn_backend_arena(const struct nn_backend *be, struct nn_arena *a) {
  if (be->host_memory) return; /* the arena's own aligned host blocks */
  a->block_alloc = be->alloc;
  a->block_free = be->release;
}

#endif
