/* model.h — the one way stages reach the model, whatever backend runs it.
 *
 * A net is a model (se3.h) on a backend (backend.h, chosen from the
 * workflow's `device:`), with its parameters, gradient and Adam moments in
 * the backend's memory, a workspace kept across steps, and buffers for the
 * batch. Stages hand it batches built on the host (se3.h's se3_batch_buf)
 * and get predictions back on the host; they never see device memory or a
 * backend's header, and never know which backend runs.
 *
 * A training step:
 *   se3_net_forward(net, batch, pred, 1)    predictions, the tape kept
 *   (loss and d loss / d pred on the host: objective.h)
 *   se3_net_backward(net, dpred)            the gradient
 *   se3_net_allreduce(net, comm)            summed over processes (data parallel)
 *   se3_net_clip(net, max_norm)             its norm, clipped
 *   se3_net_adam(net, &adam, step, lr)      the update
 * or, with nothing waiting for the device from one step to the next (the
 * loss on the backend; the host reads it when it needs it):
 *   se3_net_forward_loss(net, batch, targets, &spec)
 *   se3_net_backward_loss(net)
 *   se3_net_clip_queued(net, max_norm)
 *   se3_net_adam(net, &adam, step, lr)
 *   ... se3_net_loss_sum(net, &sum)         (waits; reports a failure of the device)
 * Both compute the same values: on the CPU, the same bits. The second, in
 * one call, is se3_net_train_step, which a GPU pads to a few shapes and
 * records once per shape (CUDA graphs; se3_net_set_steps).
 * Checkpoints read and write the arrays through se3_net_get / se3_net_set.
 */
#ifndef SE3_MODEL_H
#define SE3_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "models/backend.h"
#include "models/objective.h"
#include "models/se3.h"

struct se3_net;

/* A net for cfg on be; low_memory as in se3.h. Its arrays are allocated but
 * not initialised (se3_net_init_params or se3_net_set). NULL with a message
 * in err when the configuration is invalid or memory runs out. */
struct se3_net *se3_net_create(const struct nn_backend *be, const struct se3_config *cfg, int low_memory,
                               struct se3_error *err);
void se3_net_free(struct se3_net *n);
const struct se3_model *se3_net_model(const struct se3_net *n);
const struct nn_backend *se3_net_backend(const struct se3_net *n);
size_t se3_net_n_params(const struct se3_net *n);

/* Random initial parameters for a seed (se3_model_init_params, computed on
 * the host so every backend starts from the same values) and zero Adam
 * moments. 0, or -1 when out of host memory. */
int se3_net_init_params(struct se3_net *n, uint64_t seed);

/* Gives back the memory of the gradient and Adam's moments (3 reals a
 * parameter: on a GPU, cudaMalloc'd memory) for a net that only predicts
 * (scoring). se3_net_backward then fails with a message, and the get/set,
 * allreduce, clip and adam calls on those arrays must not be made. */
void se3_net_inference_only(struct se3_net *n);
/* The arrays of n_params reals the net holds. */
enum se3_net_array { SE3_NET_PARAMS, SE3_NET_ADAM_M, SE3_NET_ADAM_V, SE3_NET_GRAD };
/* Copies one to the host (host: n_params reals). */
void se3_net_get(struct se3_net *n, enum se3_net_array which, real *host);
/* Copies one from the host. */
void se3_net_set(struct se3_net *n, enum se3_net_array which, const real *host);

/* The predictions for a batch whose arrays are on the host: out (host,
 * G x outputs). With keep, the activations are kept for se3_net_backward
 * (until the next forward). 0, or -1 with a message in err (out of memory
 * for the batch, or the device failed). */
int se3_net_forward(struct se3_net *n, const struct se3_batch *b, real *out, int keep, struct se3_error *err);
/* Predictions in a pipeline (scoring a library): se3_net_predict_start
 * queues the predictions of b (its upload, the forward, the copy of the
 * results back) and returns without waiting for the device; the host may
 * reuse b's memory at once and build the next batch while the device
 * computes. se3_net_predict_finish waits for the oldest prediction started
 * and writes it into out (host, G x outputs of that batch). At most two
 * under way per net; the values are se3_net_forward's (keep 0), bit for
 * bit. Each returns 0, or -1 with a message in err (out of memory for the
 * batch, the device failed, or the calls out of turn); a failed start
 * leaves nothing under way for it. */
int se3_net_predict_start(struct se3_net *n, const struct se3_batch *b, struct se3_error *err);
int se3_net_predict_finish(struct se3_net *n, real *out, struct se3_error *err);
/* Waits for every prediction under way and drops them (after a failure). */
void se3_net_predict_drop(struct se3_net *n);
/* How a training step takes its loss (objective.h's nn_loss without a mask):
 * kind and Huber delta (binary cross-entropy: the weight of a positive);
 * the gradient times num / den (num molecules of a
 * batch of den: a process's share in data-parallel training; equal
 * otherwise) and times grad_scale (loss scaling for fp16; else 1). */
struct se3_loss_spec {
  enum nn_loss kind;
  double huber_delta;
  int num, den;
  double grad_scale;
};
/* se3_net_forward with the tape kept, and the loss of the predictions
 * against target (host, G x outputs) on the backend: its gradient stays
 * there for se3_net_backward_loss (or se3_net_backward_sum with
 * se3_net_loss_grad), and the loss times num is this step's part of the
 * net's running sum. Nothing waits for the device: a failure shows at the
 * next call that waits (se3_net_loss_part, se3_net_loss_sum,
 * se3_net_sync). 0, or -1 with a message in err (out of memory). The
 * arithmetic is the host's (models/kernels/loss.h). */
int se3_net_forward_loss(struct se3_net *n, const struct se3_batch *b, const real *target,
                         const struct se3_loss_spec *ls, struct se3_error *err);
/* The loss's gradient on the backend, as dout for se3_net_backward_sum (to
 * pass on, never to read). */
const real *se3_net_loss_grad(const struct se3_net *n);
/* The last se3_net_forward_loss's loss times num, and the running sum of
 * those since se3_net_set_loss_sum: both wait for the device and report its
 * failure (0, or -1 with err). */
int se3_net_loss_part(struct se3_net *n, double *part, struct se3_error *err);
int se3_net_loss_sum(struct se3_net *n, double *sum, struct se3_error *err);
void se3_net_set_loss_sum(struct se3_net *n, double sum);
/* Waits for the device: 0, or -1 with what failed since the last wait. */
int se3_net_sync(struct se3_net *n, struct se3_error *err);
/* se3_net_backward from the loss's gradient, without waiting: 0, or -1
 * with a message in err (out of memory: discard the step). */
int se3_net_backward_loss(struct se3_net *n, struct se3_error *err);
/* The gradient (overwritten) of the loss with respect to the parameters,
 * from dout (host, G x outputs, d loss / d out) for the last forward kept.
 * 0, or -1 with a message in err; the gradient is then incomplete and the
 * step must be discarded. */
int se3_net_backward(struct se3_net *n, const real *dout, struct se3_error *err);
/* A zero gradient: a process whose share of a batch is empty still sums
 * its (nothing) with the others'. */
void se3_net_zero_grad(struct se3_net *n);
/* Sums the gradient over the processes of comm (NULL: one process, nothing
 * to do), in common/comm.h's fixed order. 0, or -1 with a message. */
int se3_net_allreduce(struct se3_net *n, const struct se3_comm *comm, struct se3_error *err);
/* What se3_net_backward_sum measured: wait_s, seconds it waited after the
 * backward for the sums to finish (the part of the sums the backward did
 * not hide); sum_s, seconds the sums took in all (on the host: the
 * background thread's time; on a device, or with one sum after the
 * backward, the same as wait_s); buckets, how many sums. */
struct se3_sum_stats {
  double wait_s, sum_s;
  int buckets;
};
/* se3_net_backward and se3_net_allreduce in one, the sums overlapping the
 * backward: each stretch of the gradient a layer's backward has finished
 * (gathered into buckets of at least bucket_bytes, cut where the layers
 * end) is summed over comm's processes while the layers below compute
 * theirs (on the host, by comm.h's background thread; on a device with its
 * own collectives, on a second stream). The same bits as the two calls one
 * after the other: every element is summed in the same order. bucket_bytes
 * 0: one sum after the backward. dout NULL: this process adds nothing (an
 * empty share of the batch, or a step that failed before its backward)
 * but joins the sums. Every process of comm must make this call with the
 * same bucket_bytes, and a backward that fails still joins every sum (the
 * others would wait for it) before it returns -1 with its message: discard
 * the step. comm NULL: se3_net_backward (or a zero gradient). */
int se3_net_backward_sum(struct se3_net *n, const real *dout, const struct se3_comm *comm, size_t bucket_bytes,
                         struct se3_sum_stats *st, struct se3_error *err);
/* ZeRO stage 1: this process keeps Adam's moments of its slice [*lo, *hi)
 * of the parameters only (common/comm.h's comm_slice), zeroed. From then
 * on se3_net_allreduce sums only the gradient's slice, se3_net_clip takes
 * the norm over every process's slice, se3_net_adam updates the slice and
 * gathers the others' (every process then holds all the parameters, the
 * same bits as without sharding), and se3_net_get / se3_net_set of
 * SE3_NET_ADAM_M / _V copy the slice's *hi - *lo reals. One process (comm
 * NULL): nothing changes, the slice is everything (a job of one process
 * takes the sharded paths with one slice). 0, or -1 (out of
 * memory). An MPI failure inside these calls ends the job (comm_abort). */
int se3_net_shard_optimizer(struct se3_net *n, const struct se3_comm *comm, size_t *lo, size_t *hi,
                            struct se3_error *err);
/* How se3_net_allreduce sums over processes on this net's backend, for the
 * logs: "NCCL" (a GPU's own collectives), "MPI" (through the host). */
const char *se3_net_collectives(const struct se3_net *n);
/* The gradient's norm; when max_norm > 0 and the norm exceeds it, the
 * gradient is scaled to norm max_norm (models/cpu/optim.h's nn_grad_clip). A
 * non-finite norm leaves the gradient alone. */
double se3_net_clip(struct se3_net *n, double max_norm);
/* se3_net_clip without the norm coming back to the host: nothing waits
 * (with sharded moments, se3_net_clip itself). The same gradient, bit for
 * bit, as se3_net_clip on the same backend. */
void se3_net_clip_queued(struct se3_net *n, double max_norm);
/* The same for a gradient that is `scale` times the true one (loss
 * scaling): returns the true gradient's norm, and when it is finite divides
 * the gradient by scale (and clips it) in one pass. scale 1 is
 * se3_net_clip to the bit. */
double se3_net_unscale_clip(struct se3_net *n, double scale, double max_norm);
/* One Adam / AdamW update of the parameters from the gradient (step
 * 1-based, lr this step's learning rate). */
void se3_net_adam(struct se3_net *n, const struct nn_adam *o, long step, double lr);
/* A whole training step of one process, with nothing waiting for the
 * device: se3_net_forward_loss, se3_net_backward_loss, se3_net_clip_queued
 * (when max_norm > 0) and se3_net_adam (step 1-based, lr this step's), in
 * one call, so that a backend that records work (CUDA graphs) can record a
 * step once and replay it (se3_net_set_steps). The loss's part and sum are
 * kept as se3_net_forward_loss keeps them. In fp16 the loss is scaled by
 * ls->grad_scale and the step is se3_net_unscale_clip's, with Adam's update
 * skipped when the norm is not finite, decided on the device (a recording
 * is made per shape and scale); se3_net_step_norm then gives the norm. 0,
 * or -1 with a message in err (out of memory, or the device failed). */
int se3_net_train_step(struct se3_net *n, const struct se3_batch *b, const real *target, const struct se3_loss_spec *ls,
                       double max_norm, const struct nn_adam *o, long step, double lr, struct se3_error *err);
/* The true gradient's norm of the last se3_net_train_step or
 * se3_net_train_step_dp in fp16 (a loss-scaled step, ls->grad_scale its
 * scale: the step unscaled the gradient, clipped it, and skipped Adam's
 * update on the device when the norm was not finite), for the host's loss
 * scaler (objective.h's nn_loss_scaler_update, which decides the same).
 * Waits for the step: 0, or -1 with err when the device failed. */
int se3_net_step_norm(struct se3_net *n, double *norm, struct se3_error *err);
/* Whether se3_net_train_step_dp can take comm's data-parallel steps on
 * this net: 1 where the backend records its steps and has collectives of
 * its own (a GPU with NCCL; this call joins them, so every process of comm
 * makes it), 0 where not (the CPU, a GPU built without NCCL, one process,
 * a net for inference, SE3_STEPS_PLAIN), -1 with err when joining failed. */
int se3_net_dp_steps(struct se3_net *n, const struct se3_comm *comm, struct se3_error *err);
/* How many sums se3_net_backward_sum and se3_net_train_step_dp cut the
 * gradient into with bucket_bytes (0: one). */
int se3_net_buckets(struct se3_net *n, size_t bucket_bytes);
/* A whole data-parallel step with nothing waiting for the device, as
 * se3_net_train_step's for one process (padded, recorded once per shape,
 * replayed): se3_net_forward_loss with ls (its share num of den), the
 * gradient summed over comm's processes bucket by bucket during the
 * backward (se3_net_backward_sum's buckets of bucket_bytes; with sharded
 * moments its slice, by one sum after the backward), this step's loss
 * summed over the processes and added to the running sum on the device
 * (se3_net_loss_sum reads it, the same on every process), the clipping
 * (the norm of the summed gradient; sharded, the slices' squares summed on
 * the device) and Adam. b NULL: this process's share of the batch is
 * empty; its zero gradient and loss join the sums. Every process of comm
 * makes this call, step for step, with the same max_norm, Adam settings,
 * step, lr and bucket_bytes; each replays its own recording or runs
 * eagerly, and their collectives match. Only where se3_net_dp_steps says
 * 1. 0, or -1 with err (out of memory, the device failed, or a collective
 * could not be queued): the peers' collectives then wait for this
 * process's part, so the caller ends the job (comm.h's comm_abort). */
int se3_net_train_step_dp(struct se3_net *n, const struct se3_batch *b, const real *target,
                          const struct se3_loss_spec *ls, double max_norm, const struct nn_adam *o, long step,
                          double lr, const struct se3_comm *comm, size_t bucket_bytes, struct se3_error *err);
/* How se3_net_train_step runs:
 *   SE3_STEPS_PLAIN     the batch as it is, each operation called in turn
 *                       (the CPU's default);
 *   SE3_STEPS_PADDED    the batch padded to a shape (at most an eighth
 *                       more atoms and edges, in one more molecule of its
 *                       own whose prediction the loss leaves out), so that
 *                       a run's batches fall into a few shapes; the
 *                       padding adds exact zeros to the gradient, so the
 *                       step is the plain one's up to round-off (the sums
 *                       run over more terms);
 *   SE3_STEPS_RECORDED  padded, and the second step of a shape recorded
 *                       (the backend's record_begin), then replayed for
 *                       every later step of that shape: one launch a step
 *                       (the default where the backend records; elsewhere
 *                       the same as PADDED). A replay computes the same bits
 *                       as the padded step run eagerly.
 * Batches with bases from the host, sharded moments (se3_net_shard_optimizer;
 * se3_net_train_step_dp takes them) and nets for inference run plainly. */
enum se3_steps { SE3_STEPS_PLAIN, SE3_STEPS_PADDED, SE3_STEPS_RECORDED };
void se3_net_set_steps(struct se3_net *n, enum se3_steps steps);
/* How se3_net_train_step's steps ran: eagerly (the first of a shape, or
 * every one when not recorded), replayed (recorded counts the recordings
 * made, each also replayed once at once), refused (recordings the backend
 * could not make: those steps ran eagerly; a shape refused twice is not
 * tried again). */
struct se3_step_stats {
  long eager, recorded, replayed, refused;
};
void se3_net_step_stats(const struct se3_net *n, struct se3_step_stats *st);
/* The most workspace bytes in use at once so far. */
size_t se3_net_peak_bytes(const struct se3_net *n);
/* The memory the net holds for batches (its workspace and its batch,
 * output and pipeline buffers), in bytes; the parameters, gradient and
 * moments and a backend's own scratch are not counted. */
size_t se3_net_memory_bytes(const struct se3_net *n);
/* Allocates, before the first real step, the memory of the largest batch a
 * run will see (N atoms, E edges and G molecules at most at once): one
 * training step (with train) and one prediction of a batch of that shape
 * run (zero features: a shape, not molecules; the gradient is left zero),
 * so the workspace and buffers are sized by it and later batches, each no
 * larger in N, E and G, normally allocate nothing (with padded training
 * steps, se3_net_set_steps, the step is that of the largest padded shape).
 * A batch that does not
 * fit in the device's memory fails here, at the start, not hours into a
 * run. 0, or -1 with a message in err. */
int se3_net_reserve(struct se3_net *n, int N, int E, int G, int train, struct se3_error *err);
/* n uses the workspace of `with` (same backend) from now on, and gives up
 * its own: nets that run one after another (an ensemble's members) then
 * need the memory of one step, not one each. A forward kept by either is
 * lost when the other runs; `with` must outlive n's use of it. */
void se3_net_share_workspace(struct se3_net *n, struct se3_net *with);

#endif
