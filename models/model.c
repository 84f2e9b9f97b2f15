/* model.c — a model on a backend, as the stages see it (model.h). */
#define _POSIX_C_SOURCE 200809L
#include "models/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/comm.h"
#include "models/device.h"
#include "models/kernels/adam.h"
#include "models/kernels/loss.h"

/* Shapes recorded at once per net (se3_net_train_step). */
#define REC_SLOTS 16

/* A buffer in the backend's memory that grows as batches do. */
struct dbuf {
  void *p;
  size_t cap;
};

struct se3_net {
  const struct nn_backend *be;
  struct se3_model model;
  real *arr[4];                /* params, adam m, adam v, grad (se3_net_array order): the backend's memory */
  struct nn_arena own_ws, *ws; /* the workspace: its own, or another net's (se3_net_share_workspace) */
  struct se3_tape *tape;       /* of the last forward kept */
  struct se3_batch db;         /* the batch in the backend's memory (the host's own arrays on a host backend) */
  struct dbuf node, edge, src, in_start, graph_start, out, dout, target;
  /* the bases the backend computed last (for se3_batch id `id`, plan degree
   * max_degree) and the relative positions they came from: the net's own,
   * or shared with the nets sharing its workspace, so an ensemble computes
   * a batch's bases once */
  struct bases_cache {
    struct dbuf basis, rel;
    uint64_t id;
    int max_degree;
  } own_bc, *bc;
  /* predictions under way (se3_net_predict_start): slots used in turn, the
   * oldest first; each its output on the backend, its copy on the host and
   * the fence after the copy */
  struct pending {
    struct dbuf out;
    real *host;
    size_t host_cap;
    void *fence;
    size_t bytes;
  } pend[2];
  int pend_first, pend_count;
  /* the backend's memory: the step's loss times num and the running sum
   * (backend.h's `loss`), the gradient's sum of squares and norm (`clip`),
   * and a data-parallel step's loss pair (its part, summed over the
   * processes before it joins the running sum; the second unused) */
  double *acc;
  /* Adam's moments: of parameters [opt_lo, opt_hi) (all of them, unless
   * se3_net_shard_optimizer gave this process a slice of opt_comm's) */
  size_t opt_lo, opt_hi;
  const struct se3_comm *opt_comm;
  /* se3_net_train_step: how steps run, the recordings by shape (the least
   * recently used one gives way), Adam's {c1, c2, lr} in the backend's
   * memory, the padding's host arrays, and the counts */
  enum se3_steps steps;
  struct rec_slot {
    struct rec_key {
      int N, E, G, cnt, kind, num, den, max_degree, decoupled, low_memory, dp, scaled;
      double delta, gscale, max_norm, beta1, beta2, eps, weight_decay;
      size_t bucket_bytes; /* (data parallel: the sums' buckets) */
    } key;
    void *rec;          /* the recording, once made */
    int refused;        /* times the backend could not record it: after two, run eagerly from then on */
    unsigned long used; /* when last used (0: a free slot) */
  } rec[REC_SLOTS];
  unsigned long rec_clock;
  struct dbuf sched;
  /* data parallel: fences after the last two steps queued; a step waits
   * for the one two back, so the host runs at most two steps ahead of the
   * device and a wait, polled for the peers' failures, comes every step */
  void *inflight[2];
  long dp_steps;
  /* the last step's gradient norm, when it came back to the host (a plain
   * loss-scaled step); else it is in the schedule, sched[3] */
  double norm;
  int norm_on_host;
  struct pad_host {
    real *node, *edge;
    int32_t *src, *in_start;
    float *rel;
    size_t cap_n, cap_e;
  } pad;
  struct se3_step_stats stats;
};

/* p with at least `bytes`, keeping nothing: -1 when out of memory. */
static int dbuf_fit(const struct nn_backend *be, struct dbuf *b, size_t bytes) {
  if (bytes <= b->cap && b->p) return 0;
  size_t cap = b->cap ? b->cap : 4096;
  while (cap < bytes)
    cap *= 2;
  be->release(b->p);
  b->p = be->alloc(cap);
  b->cap = b->p ? cap : 0;
  return b->p ? 0 : -1;
}

static void dbuf_free(const struct nn_backend *be, struct dbuf *b) {
  be->release(b->p);
  b->p = NULL;
  b->cap = 0;
}

/* The padded size of x (>= 1): the smallest m 2^k >= x with 8 <= m < 16, at
 * least 16, so at most an eighth is padding and a run's batches fall into a
 * few shapes. */
/* 1 when err holds a failure set since it was cleared (0 for NULL). */
static int failed_with(const struct se3_error *err) { return err && err->kind != SE3_ERR_NONE; }

static int pad_size(long x) {
  long step = 1;
  while (step * 16 <= x)
    step *= 2;
  long v = (x + step - 1) / step * step;
  return v < 16 ? 16 : (int)v;
}

struct se3_net *se3_net_create(const struct nn_backend *be, const struct se3_config *cfg, int low_memory,
                               struct se3_error *err) {
  struct se3_net *n = calloc(1, sizeof *n);
  if (!n) {
    se3_error_set(err, SE3_ERR_MEMORY, "out of memory");
    return NULL;
  }
  n->be = be;
  n->steps = be->record_begin ? SE3_STEPS_RECORDED : SE3_STEPS_PLAIN;
  if (se3_model_init(&n->model, cfg, err)) {
    free(n);
    return NULL;
  }
  n->model.be = be;
  n->model.low_memory = low_memory;
  /* the device's basis tables now, not inside a step that may be recorded */
  if (be->prepare_bases && be->prepare_bases(&n->model.plan, err)) {
    se3_model_free(&n->model);
    free(n);
    return NULL;
  }
  nn_backend_arena(be, &n->own_ws);
  n->ws = &n->own_ws;
  n->bc = &n->own_bc;
  size_t bytes = (n->model.n_params ? n->model.n_params : 1) * sizeof(real);
  n->opt_hi = n->model.n_params;
  for (int i = 0; i < 4; i++)
    if (!(n->arr[i] = be->alloc(bytes))) {
      se3_error_set(err, SE3_ERR_MEMORY, "out of %s memory for %zu parameters", be->name, n->model.n_params);
      se3_net_free(n);
      return NULL;
    }
  if (!(n->acc = be->alloc(6 * sizeof(double)))) {
    se3_error_set(err, SE3_ERR_MEMORY, "out of %s memory", be->name);
    se3_net_free(n);
    return NULL;
  }
  be->zero(n->acc, 6 * sizeof(double));
  return n;
}

void se3_net_free(struct se3_net *n) {
  if (!n) return;
  const struct nn_backend *be = n->be;
  se3_tape_free(n->tape);
  for (int i = 0; i < REC_SLOTS; i++)
    if (n->rec[i].rec) be->record_free(n->rec[i].rec);
  dbuf_free(be, &n->sched);
  for (int i = 0; i < 2; i++)
    if (n->inflight[i]) be->fence_free(n->inflight[i]);
  free(n->pad.node), free(n->pad.edge), free(n->pad.src), free(n->pad.in_start), free(n->pad.rel);
  nn_arena_free(&n->own_ws);
  for (int i = 0; i < 4; i++)
    be->release(n->arr[i]);
  be->release(n->acc);
  for (int i = 0; i < 2; i++) {
    dbuf_free(be, &n->pend[i].out);
    be->host_release(n->pend[i].host);
    be->fence_free(n->pend[i].fence);
  }
  struct dbuf *bufs[] = {&n->node, &n->edge, &n->src,    &n->in_start,     &n->graph_start,
                         &n->out,  &n->dout, &n->target, &n->own_bc.basis, &n->own_bc.rel};
  for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
    dbuf_free(be, bufs[i]);
  se3_model_free(&n->model);
  free(n);
}

const struct se3_model *se3_net_model(const struct se3_net *n) { return &n->model; }
const struct nn_backend *se3_net_backend(const struct se3_net *n) { return n->be; }
size_t se3_net_n_params(const struct se3_net *n) { return n->model.n_params; }

int se3_net_init_params(struct se3_net *n, uint64_t seed) {
  size_t np = n->model.n_params;
  real *host = malloc((np ? np : 1) * sizeof *host);
  if (!host) return -1;
  se3_model_init_params(&n->model, host, seed);
  se3_net_set(n, SE3_NET_PARAMS, host);
  free(host);
  if (n->arr[SE3_NET_ADAM_M]) {
    n->be->zero(n->arr[SE3_NET_ADAM_M], (n->opt_hi - n->opt_lo) * sizeof(real));
    n->be->zero(n->arr[SE3_NET_ADAM_V], (n->opt_hi - n->opt_lo) * sizeof(real));
  }
  return 0;
}

void se3_net_inference_only(struct se3_net *n) {
  for (int i = SE3_NET_ADAM_M; i <= SE3_NET_GRAD; i++) {
    n->be->release(n->arr[i]);
    n->arr[i] = NULL;
  }
}

/* The reals array `which` holds. */
static size_t array_len(const struct se3_net *n, enum se3_net_array which) {
  return which == SE3_NET_ADAM_M || which == SE3_NET_ADAM_V ? n->opt_hi - n->opt_lo : n->model.n_params;
}

void se3_net_get(struct se3_net *n, enum se3_net_array which, real *host) {
  n->be->download(host, n->arr[which], array_len(n, which) * sizeof(real));
}

void se3_net_set(struct se3_net *n, enum se3_net_array which, const real *host) {
  n->be->upload(n->arr[which], host, array_len(n, which) * sizeof(real));
}

int se3_net_shard_optimizer(struct se3_net *n, const struct se3_comm *comm, size_t *lo, size_t *hi,
                            struct se3_error *err) {
  size_t np = n->model.n_params, a, b;
  comm_slice(comm, np, &a, &b);
  *lo = a;
  *hi = b;
  if (!comm) return 0;
  const struct nn_backend *be = n->be;
  for (int i = SE3_NET_ADAM_M; i <= SE3_NET_ADAM_V; i++) {
    be->release(n->arr[i]);
    if (!(n->arr[i] = be->alloc((b > a ? b - a : 1) * sizeof(real)))) {
      se3_error_set(err, SE3_ERR_MEMORY, "out of %s memory for Adam's moments of %zu parameters", be->name, b - a);
      return -1;
    }
    be->zero(n->arr[i], (b - a) * sizeof(real));
  }
  n->opt_lo = a;
  n->opt_hi = b;
  n->opt_comm = comm;
  return 0;
}

/* A device backend's own collectives (NCCL), joined once by the first net
 * that needs them: 1 when they are there, 0 when the arrays go through the
 * host, -1 with err when joining failed. */
static int device_collectives(const struct nn_backend *be, const struct se3_comm *comm, struct se3_error *err) {
  if (be->host_memory || !be->join || !comm) return 0;
  return be->join(comm, comm_rank(comm), comm_size(comm), comm_bcast, comm_abort, err) ? -1 : 1;
}

/* x (n reals in the backend's memory) through one of comm.h's slice
 * collectives: in place on a host backend, on the device with its own
 * collectives, else through the host. */
static int slice_collective(struct se3_net *n, real *x, int (*op)(const struct se3_comm *, void *, size_t, int)) {
  const struct nn_backend *be = n->be;
  size_t np = n->model.n_params;
  if (be->host_memory) return op(n->opt_comm, x, np, (int)sizeof(real));
  struct se3_error err;
  int dev = device_collectives(be, n->opt_comm, &err);
  if (dev < 0) {
    fprintf(stderr, "se3screen (rank %d): %s\n", comm_rank(n->opt_comm), se3_error_str(&err).s);
    return -1;
  }
  if (dev) {
    if ((op == comm_reduce_scatter ? be->reduce_scatter : be->allgather)(x, np, &err) == 0) return 0;
    fprintf(stderr, "se3screen (rank %d): %s\n", comm_rank(n->opt_comm), se3_error_str(&err).s);
    return -1;
  }
  real *h = malloc((np ? np : 1) * sizeof *h);
  if (!h) return -1;
  be->download(h, x, np * sizeof *h);
  int rc = op(n->opt_comm, h, np, (int)sizeof(real));
  if (rc == 0) be->upload(x, h, np * sizeof *h);
  free(h);
  return rc;
}

/* The batch's arrays in the backend's memory: the host's own on a host
 * backend, else uploaded into buffers kept across batches. A batch without
 * bases (se3_batch_geometry) gets them computed by the backend from its
 * relative positions, into the net's own buffer. -1 when out of memory (or
 * the device failed computing the bases: sync says so). */
static int stage_batch(struct se3_net *n, const struct se3_batch *b) {
  const struct nn_backend *be = n->be;
  const struct se3_config *c = &n->model.cfg;
  size_t N = (size_t)b->N, E = (size_t)b->E, G = (size_t)b->G;
  size_t bb = E * n->model.plan.per_edge * sizeof(real), rb = E * 3 * sizeof(float);
  struct bases_cache *bc = n->bc;
  /* the bases of this very batch are there already (another member of an
   * ensemble computed them): reused */
  int cached = !b->basis && b->id && b->id == bc->id && bc->max_degree == n->model.plan.max_degree;
  if (!b->basis && !cached) {
    bc->id = 0;
    if (dbuf_fit(be, &bc->basis, bb) || (!be->host_memory && dbuf_fit(be, &bc->rel, rb))) return -1;
    const float *rel = b->rel;
    if (!be->host_memory) {
      be->upload(bc->rel.p, b->rel, rb);
      rel = bc->rel.p;
    }
    if (be->bases(bc->basis.p, rel, b->E, &n->model.plan)) return -1;
    bc->id = b->id;
    bc->max_degree = n->model.plan.max_degree;
  }
  if (be->host_memory) {
    n->db = *b;
    if (!b->basis) n->db.basis = bc->basis.p;
    return 0;
  }
  size_t nb = N * (size_t)c->node_in * sizeof(real), eb = E * (size_t)c->edge_in * sizeof(real);
  size_t sb = E * sizeof(int32_t), ib = (N + 1) * sizeof(int32_t), gb = (G + 1) * sizeof(int32_t);
  if (dbuf_fit(be, &n->node, nb) || dbuf_fit(be, &n->edge, eb) || dbuf_fit(be, &n->src, sb) ||
      dbuf_fit(be, &n->in_start, ib) || dbuf_fit(be, &n->graph_start, gb) || (b->basis && dbuf_fit(be, &bc->basis, bb)))
    return -1;
  be->upload(n->node.p, b->node_feat, nb);
  be->upload(n->edge.p, b->edge_feat, eb);
  be->upload(n->src.p, b->src, sb);
  be->upload(n->in_start.p, b->in_start, ib);
  be->upload(n->graph_start.p, b->graph_start, gb);
  if (b->basis) {
    bc->id = 0; /* (the cache now holds bases from the host) */
    be->upload(bc->basis.p, b->basis, bb);
  }
  n->db = (struct se3_batch){b->N,        b->E, b->G, n->node.p, n->edge.p, n->src.p, n->in_start.p, n->graph_start.p,
                             bc->basis.p, NULL, 0};
  return 0;
}

/* The forward of b into *pred: dst (the backend's memory) when it is not
 * NULL, else the net's own buffer; the tape kept with keep. Nothing waits
 * unless it fails. 0, or -1 with err. */
static int forward(struct se3_net *n, const struct se3_batch *b, real *dst, int keep, real **pred,
                   struct se3_error *err) {
  const struct nn_backend *be = n->be;
  se3_tape_free(n->tape);
  n->tape = NULL;
  size_t ob = (size_t)b->G * (size_t)n->model.cfg.outputs * sizeof(real);
  if (stage_batch(n, b) || (!dst && dbuf_fit(be, &n->out, ob))) {
    if (be->sync(err)) return -1; /* the device failed: its message */
    se3_error_set(err, SE3_ERR_MEMORY, "out of %s memory for a batch of %d molecules (%d atoms, %d edges)", be->name,
                  b->G, b->N, b->E);
    return -1;
  }
  real *dout = dst ? dst : n->out.p;
  struct se3_tape *t = NULL;
  int failed;
  if (keep)
    failed = !(t = se3_model_forward_ws(&n->model, n->arr[SE3_NET_PARAMS], &n->db, dout, n->ws));
  else
    failed = se3_model_infer_ws(&n->model, n->arr[SE3_NET_PARAMS], &n->db, dout, n->ws) != 0;
  if (failed && be->sync(err)) return -1; /* the device failed: its message */
  if (failed) {
    se3_error_set(err, SE3_ERR_MEMORY,
                  "out of %s memory in the forward pass (a batch of %d molecules, %d atoms, %d edges): lower the batch "
                  "size or set low_memory: true",
                  be->name, b->G, b->N, b->E);
    return -1;
  }
  n->tape = t; /* NULL when not kept */
  *pred = dout;
  return 0;
}

int se3_net_forward(struct se3_net *n, const struct se3_batch *b, real *out, int keep, struct se3_error *err) {
  const struct nn_backend *be = n->be;
  real *pred;
  if (forward(n, b, be->host_memory ? out : NULL, keep, &pred, err)) return -1;
  if (!be->host_memory) be->download(out, pred, (size_t)b->G * (size_t)n->model.cfg.outputs * sizeof(real));
  if (be->sync(err)) {
    se3_tape_free(n->tape);
    n->tape = NULL;
    return -1;
  }
  return 0;
}

int se3_net_predict_start(struct se3_net *n, const struct se3_batch *b, struct se3_error *err) {
  const struct nn_backend *be = n->be;
  if (n->pend_count == 2) {
    se3_error_set(err, SE3_ERR_RUN, "two predictions are already under way (finish one first)");
    return -1;
  }
  struct pending *p = &n->pend[(n->pend_first + n->pend_count) % 2];
  size_t ob = (size_t)b->G * (size_t)n->model.cfg.outputs * sizeof(real);
  if (ob > p->host_cap) {
    be->host_release(p->host);
    p->host_cap = 0;
    if ((p->host = be->host_alloc(ob)) != NULL) p->host_cap = ob;
  }
  if (!p->fence) p->fence = be->fence_new();
  if (dbuf_fit(be, &p->out, ob) || !p->host || !p->fence) {
    se3_error_set(err, SE3_ERR_MEMORY, "out of %s memory for a batch's predictions", be->name);
    return -1;
  }
  real *pred;
  if (forward(n, b, p->out.p, 0, &pred, err)) return -1;
  be->download_queued(p->host, pred, ob);
  be->fence_mark(p->fence);
  p->bytes = ob;
  n->pend_count++;
  return 0;
}

int se3_net_predict_finish(struct se3_net *n, real *out, struct se3_error *err) {
  if (n->pend_count == 0) {
    se3_error_set(err, SE3_ERR_RUN, "no prediction is under way");
    return -1;
  }
  struct pending *p = &n->pend[n->pend_first];
  n->pend_first = (n->pend_first + 1) % 2;
  n->pend_count--;
  if (n->be->fence_wait(p->fence, err)) return -1;
  if (p->bytes) memcpy(out, p->host, p->bytes);
  return 0;
}

void se3_net_predict_drop(struct se3_net *n) {
  for (; n->pend_count; n->pend_count--, n->pend_first = (n->pend_first + 1) % 2)
    (void)n->be->fence_wait(n->pend[n->pend_first].fence, NULL);
}

static int forward_loss_padded(struct se3_net *n, const struct se3_batch *b, const real *target,
                               const struct se3_loss_spec *ls, struct se3_error *err);

int se3_net_forward_loss(struct se3_net *n, const struct se3_batch *b, const real *target,
                         const struct se3_loss_spec *ls, struct se3_error *err) {
  const struct nn_backend *be = n->be;
  /* padded as se3_net_train_step pads (its forward and loss, the same calls
   * in the same order), so a step split into these calls, as data-parallel
   * and fp16 training split it, computes what the whole step computes */
  if (n->steps != SE3_STEPS_PLAIN && n->arr[SE3_NET_GRAD] && !b->basis && b->rel)
    return forward_loss_padded(n, b, target, ls, err);
  int cnt = b->G * n->model.cfg.outputs;
  size_t tb = (size_t)cnt * sizeof(real);
  real *pred;
  if (dbuf_fit(be, &n->target, tb) || dbuf_fit(be, &n->dout, tb)) {
    se3_error_set(err, SE3_ERR_MEMORY, "out of %s memory for a batch's targets", be->name);
    return -1;
  }
  if (forward(n, b, NULL, 1, &pred, err)) return -1;
  be->upload(n->target.p, target, tb);
  double delta = ls->huber_delta > 0 && isfinite(ls->huber_delta) ? ls->huber_delta : 1;
  be->loss(n->dout.p, n->acc, pred, n->target.p, cnt, (int)ls->kind, delta, ls->num, ls->den, ls->grad_scale);
  return 0;
}

const real *se3_net_loss_grad(const struct se3_net *n) { return n->dout.p; }

int se3_net_loss_part(struct se3_net *n, double *part, struct se3_error *err) {
  n->be->download(part, n->acc, sizeof *part);
  return n->be->sync(err);
}

int se3_net_loss_sum(struct se3_net *n, double *sum, struct se3_error *err) {
  n->be->download(sum, n->acc + 1, sizeof *sum);
  return n->be->sync(err);
}

void se3_net_set_loss_sum(struct se3_net *n, double sum) { n->be->upload(n->acc + 1, &sum, sizeof sum); }

int se3_net_sync(struct se3_net *n, struct se3_error *err) { return n->be->sync(err); }

/* The gradient of the last forward kept, calling done(ctx, stage) as
 * se3_model_backward_staged does. */
static int backward(struct se3_net *n, const real *dout, void (*done)(void *, int), void *ctx, struct se3_error *err) {
  const struct nn_backend *be = n->be;
  if (!n->arr[SE3_NET_GRAD]) {
    se3_error_set(err, SE3_ERR_RUN, "this net was made for inference only (se3_net_inference_only)");
    return -1;
  }
  if (!n->tape) {
    se3_error_set(err, SE3_ERR_RUN, "no forward pass was kept for the backward");
    return -1;
  }
  size_t ob = (size_t)n->db.G * (size_t)n->model.cfg.outputs * sizeof(real);
  const real *dd = dout;
  if (!be->host_memory && dout != n->dout.p) { /* (n->dout.p: the loss's gradient, already there) */
    if (dbuf_fit(be, &n->dout, ob)) {
      se3_error_set(err, SE3_ERR_MEMORY, "out of %s memory for the output gradient", be->name);
      return -1;
    }
    be->upload(n->dout.p, dout, ob);
    dd = n->dout.p;
  }
  be->zero(n->arr[SE3_NET_GRAD], n->model.n_params * sizeof(real));
  int bad = se3_model_backward_staged(&n->model, n->arr[SE3_NET_PARAMS], &n->db, n->tape, dd, n->arr[SE3_NET_GRAD],
                                      NULL, done, ctx);
  se3_tape_free(n->tape);
  n->tape = NULL;
  if (bad && be->sync(err)) return -1; /* the device failed: its message */
  if (bad) {
    se3_error_set(err, SE3_ERR_MEMORY,
                  "out of %s memory in the backward pass (a batch of %d molecules): lower the batch size or set "
                  "low_memory: true",
                  be->name, n->db.G);
    return -1;
  }
  return 0;
}

int se3_net_backward(struct se3_net *n, const real *dout, struct se3_error *err) {
  if (backward(n, dout, NULL, NULL, err)) return -1;
  return n->be->sync(err);
}

int se3_net_backward_loss(struct se3_net *n, struct se3_error *err) { return backward(n, n->dout.p, NULL, NULL, err); }

void se3_net_zero_grad(struct se3_net *n) { n->be->zero(n->arr[SE3_NET_GRAD], n->model.n_params * sizeof(real)); }

const char *se3_net_collectives(const struct se3_net *n) { return !n->be->host_memory && n->be->join ? "NCCL" : "MPI"; }

int se3_net_allreduce(struct se3_net *n, const struct se3_comm *comm, struct se3_error *err) {
  const struct nn_backend *be = n->be;
  size_t np = n->model.n_params;
  if (n->opt_comm) { /* only this process's slice is needed: the others' Adam updates the rest */
    if (slice_collective(n, n->arr[SE3_NET_GRAD], comm_reduce_scatter) == 0) return 0;
    se3_error_set(err, SE3_ERR_RUN, "summing the gradient over the processes failed (MPI, or out of host memory)");
    return -1;
  }
  if (!comm || be->host_memory) return be->allreduce(n->arr[SE3_NET_GRAD], np, comm, err);
  int dev = device_collectives(be, comm, err);
  if (dev < 0) return -1;
  if (dev) return be->allreduce(n->arr[SE3_NET_GRAD], np, comm, err);
  /* A device without its own collectives: the gradient through the host,
   * summed as the CPU's is. */
  real *h = malloc(np * sizeof *h);
  if (!h) {
    se3_error_set(err, SE3_ERR_MEMORY, "out of host memory for the gradient (%zu parameters)", np);
    return -1;
  }
  be->download(h, n->arr[SE3_NET_GRAD], np * sizeof *h);
  int rc = nn_backend_host()->allreduce(h, np, comm, err);
  if (rc == 0) be->upload(n->arr[SE3_NET_GRAD], h, np * sizeof *h);
  free(h);
  return rc;
}

static double seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The gradient's buckets (se3_net_backward_sum): bucket k is
 * [cut[k + 1], cut[k]), cut[0] = n_params, the last 0; after backward
 * stage s the first ready[s] buckets are final. */
struct buckets {
  struct se3_net *n;
  const struct se3_comm *comm;
  int device;  /* summed by the backend's sum_start (else comm.h's background sums) */
  int scatter; /* sharded moments: only this process's slice is summed */
  size_t cut[SE3_MAX_LAYERS + 2];
  int count, ready[SE3_MAX_LAYERS + 1], started;
  int failed;            /* a sum could not be started: its message in *err */
  struct se3_error *err; /* (the caller's: NULL allowed) */
};

static void buckets_plan(struct buckets *bk, size_t bucket_bytes) {
  size_t from[SE3_MAX_LAYERS + 1];
  int stages = se3_model_grad_stages(&bk->n->model, from);
  bk->cut[0] = bk->n->model.n_params;
  bk->count = 0;
  for (int s = 0; s < stages; s++) {
    size_t top = bk->cut[bk->count];
    /* a bucket closes once it holds bucket_bytes, and at the start */
    if (top > from[s] && ((top - from[s]) * sizeof(real) >= bucket_bytes || s == stages - 1))
      bk->cut[++bk->count] = from[s];
    bk->ready[s] = bk->count;
  }
}

/* Starts the sums of buckets started .. upto - 1. */
static void buckets_start(struct buckets *bk, int upto) {
  struct se3_net *n = bk->n;
  real *g = n->arr[SE3_NET_GRAD];
  for (; bk->started < upto; bk->started++) {
    size_t lo = bk->cut[bk->started + 1], hi = bk->cut[bk->started];
    if (bk->failed) continue; /* (the job ends: see se3_net_backward_sum) */
    if (bk->device) {
      if (n->be->sum_start(g + lo, hi - lo, bk->err)) bk->failed = 1;
    } else {
      comm_sum_start(bk->comm, g, n->model.n_params, lo, hi, (int)sizeof(real), bk->scatter);
    }
  }
}

static void bucket_stage_done(void *ctx, int stage) {
  struct buckets *bk = ctx;
  buckets_start(bk, bk->ready[stage]);
}

int se3_net_backward_sum(struct se3_net *n, const real *dout, const struct se3_comm *comm, size_t bucket_bytes,
                         struct se3_sum_stats *st, struct se3_error *err) {
  const struct nn_backend *be = n->be;
  memset(st, 0, sizeof *st);
  if (!comm) {
    if (dout) return se3_net_backward(n, dout, err);
    se3_net_zero_grad(n);
    return 0;
  }
  int dev = 0;
  if (!be->host_memory && !n->opt_comm && be->sum_start && (dev = device_collectives(be, comm, err)) < 0) return -1;
  if (bucket_bytes == 0 || (!be->host_memory && !dev)) {
    /* one sum after the backward; a failed backward joins it all the same */
    struct se3_error why;
    int bad = 0;
    if (dout) bad = se3_net_backward(n, dout, &why) != 0;
    if (!dout || bad) se3_net_zero_grad(n); /* (a failed backward adds nothing) */
    double t0 = seconds();
    int rc = se3_net_allreduce(n, comm, err);
    st->wait_s = st->sum_s = seconds() - t0;
    st->buckets = 1;
    if (bad && err) *err = why;
    return bad || rc ? -1 : 0;
  }
  struct se3_error sum_err; /* (the sums': the backward's own failure is in err) */
  struct buckets bk = {.n = n, .comm = comm, .device = dev, .scatter = n->opt_comm != NULL, .err = &sum_err};
  buckets_plan(&bk, bucket_bytes);
  int bad = 0;
  if (dout) {
    bad = backward(n, dout, bucket_stage_done, &bk, err) != 0;
  } else {
    se3_net_zero_grad(n);
  }
  if (bad && bk.started < bk.count) /* the unfinished rest joins the sums all the same, as zeros */
    be->zero(n->arr[SE3_NET_GRAD], bk.cut[bk.started] * sizeof(real));
  buckets_start(&bk, bk.count);
  double t0 = seconds(), busy = 0;
  int rc;
  if (dev) {
    if (bk.failed) { /* the others' sums wait on the device for this one's: end the job */
      fprintf(stderr, "se3screen (rank %d): %s\n", comm_rank(comm), se3_error_str(&sum_err).s);
      comm_abort(comm, 1);
    }
    rc = be->sum_wait(&sum_err) || be->sync(&sum_err) ? -1 : 0;
  } else {
    rc = comm_sum_wait(comm, &busy);
    if (rc) se3_error_set(&sum_err, SE3_ERR_RUN, "summing the gradient over %d processes: MPI failed", comm_size(comm));
  }
  st->wait_s = seconds() - t0;
  st->sum_s = dev ? st->wait_s : busy;
  st->buckets = bk.count;
  if (bad) return -1; /* (the backward's message is in err) */
  if (rc) {
    if (err) *err = sum_err;
    return -1;
  }
  return dev ? 0 : be->sync(err);
}

double se3_net_clip(struct se3_net *n, double max_norm) { return se3_net_unscale_clip(n, 1, max_norm); }

void se3_net_clip_queued(struct se3_net *n, double max_norm) {
  if (n->opt_comm) { /* the norm sums the processes' slices through the host */
    se3_net_clip(n, max_norm);
    return;
  }
  real *g = n->arr[SE3_NET_GRAD];
  n->be->sumsq_to(n->acc + 2, g, n->model.n_params);
  n->be->clip(g, n->model.n_params, n->acc + 2, 1, max_norm, n->acc + 3);
}

double se3_net_unscale_clip(struct se3_net *n, double scale, double max_norm) {
  /* (sharded: the squares of each process's slice, summed in rank order) */
  real *g = n->arr[SE3_NET_GRAD] + n->opt_lo;
  size_t len = n->opt_comm ? n->opt_hi - n->opt_lo : n->model.n_params;
  double ss = n->be->sumsq(g, len);
  if (n->opt_comm && comm_sum_f64(n->opt_comm, &ss, 1)) comm_abort(n->opt_comm, 1);
  double norm, f = nn_k_clip_factor(ss, scale, max_norm, &norm);
  if (f != 1) n->be->scale(g, len, f);
  return norm;
}

void se3_net_adam(struct se3_net *n, const struct nn_adam *o, long step, double lr) {
  size_t lo = n->opt_lo;
  n->be->adam_step(n->arr[SE3_NET_PARAMS] + lo, n->arr[SE3_NET_ADAM_M], n->arr[SE3_NET_ADAM_V],
                   n->arr[SE3_NET_GRAD] + lo, n->opt_hi - lo, o, step, lr);
  if (n->opt_comm && slice_collective(n, n->arr[SE3_NET_PARAMS], comm_allgather)) {
    fprintf(stderr, "se3screen (rank %d): gathering the parameters' slices failed (MPI, or out of host memory)\n",
            comm_rank(n->opt_comm));
    comm_abort(n->opt_comm, 1);
  }
}

/* ---- a whole training step, padded to a shape, recorded once, replayed ---- */

void se3_net_set_steps(struct se3_net *n, enum se3_steps steps) {
  if (steps == SE3_STEPS_RECORDED && !n->be->record_begin) steps = SE3_STEPS_PADDED;
  n->steps = steps;
}

void se3_net_step_stats(const struct se3_net *n, struct se3_step_stats *st) { *st = n->stats; }

/* The padding molecule's host arrays for a batch of N atoms and E edges
 * padded to Np > N and Ep >= E: Np - N atoms of zero features, Ep - E edges
 * among them (each atom's incoming edges from the atoms after it,
 * cyclically, as se3_net_reserve's shape batch), features zero but the
 * distance (1), and every relative position (0.6, 0, 0.8): a molecule whose
 * prediction the loss leaves out. -1 when out of host memory. */
static int pad_fill(struct se3_net *n, int N, int E, int Np, int Ep) {
  const struct se3_config *c = &n->model.cfg;
  struct pad_host *p = &n->pad;
  size_t na = (size_t)(Np - N), ne = (size_t)(Ep - E);
  if (na > p->cap_n) {
    free(p->node), free(p->in_start);
    p->node = calloc(na * (size_t)c->node_in + 1, sizeof *p->node);
    p->in_start = malloc((na + 1) * sizeof *p->in_start);
    p->cap_n = p->node && p->in_start ? na : 0;
    if (!p->cap_n) return -1;
  }
  if (ne > p->cap_e || !p->src) {
    free(p->edge), free(p->src), free(p->rel);
    size_t cap = ne ? ne : 1;
    p->edge = malloc(cap * (size_t)c->edge_in * sizeof *p->edge);
    p->src = malloc(cap * sizeof *p->src);
    p->rel = malloc(cap * 3 * sizeof *p->rel);
    p->cap_e = p->edge && p->src && p->rel ? cap : 0;
    if (!p->cap_e) return -1;
  }
  /* (node features stay zero: written once by calloc) */
  size_t k = 0;
  for (size_t a = 0; a < na; a++) {
    p->in_start[a] = (int32_t)(E + (long)k);
    for (; k < ne && (size_t)((long)k * (long)na / (long)ne) == a; k++) {
      p->src[k] = (int32_t)(N + (long)((a + 1 + k) % na));
      for (int j = 0; j < c->edge_in; j++)
        p->edge[k * (size_t)c->edge_in + (size_t)j] = j == c->edge_in - 1 ? 1 : 0;
      p->rel[3 * k] = 0.6f, p->rel[3 * k + 1] = 0.0f, p->rel[3 * k + 2] = 0.8f;
    }
  }
  p->in_start[na] = (int32_t)Ep;
  return 0;
}

/* The buffers of a padded step of Np atoms, Ep edges and G + 1 molecules
 * (the host backend's too: its batch is copied, to be padded). -1 when out
 * of memory. */
static int pad_fit(struct se3_net *n, int Np, int Ep, int G) {
  const struct nn_backend *be = n->be;
  const struct se3_config *c = &n->model.cfg;
  size_t ni = (size_t)c->node_in, ei = (size_t)c->edge_in, outs = (size_t)c->outputs, g = (size_t)G;
  return dbuf_fit(be, &n->node, (size_t)Np * ni * sizeof(real)) ||
                 dbuf_fit(be, &n->edge, (size_t)Ep * ei * sizeof(real)) ||
                 dbuf_fit(be, &n->src, (size_t)Ep * sizeof(int32_t)) ||
                 dbuf_fit(be, &n->in_start, ((size_t)Np + 1) * sizeof(int32_t)) ||
                 dbuf_fit(be, &n->graph_start, (g + 2) * sizeof(int32_t)) ||
                 dbuf_fit(be, &n->bc->rel, (size_t)Ep * 3 * sizeof(float)) ||
                 dbuf_fit(be, &n->bc->basis, (size_t)Ep * n->model.plan.per_edge * sizeof(real)) ||
                 dbuf_fit(be, &n->out, (g + 1) * outs * sizeof(real)) ||
                 dbuf_fit(be, &n->dout, (g + 1) * outs * sizeof(real)) ||
                 dbuf_fit(be, &n->target, g * outs * sizeof(real)) ||
                 dbuf_fit(be, &n->sched, NN_K_ADAM_SCHED * sizeof(double))
             ? -1
             : 0;
}

/* The padded batch in the backend's memory (n->db, the bases' rel), the
 * targets and Adam's schedule (scaled: a loss-scaled step, skipped on the
 * device when its gradient overflows): uploads only, before the step's
 * work. -1 when out of memory. */
static int pad_stage(struct se3_net *n, const struct se3_batch *b, const real *target, int Np, int Ep,
                     const struct nn_adam *o, long step, double lr, int scaled) {
  const struct nn_backend *be = n->be;
  const struct se3_config *c = &n->model.cfg;
  struct bases_cache *bc = n->bc;
  size_t N = (size_t)b->N, E = (size_t)b->E, G = (size_t)b->G, na = (size_t)Np - N, ne = (size_t)Ep - E;
  size_t ni = (size_t)c->node_in, ei = (size_t)c->edge_in, outs = (size_t)c->outputs;
  if (pad_fill(n, b->N, b->E, Np, Ep) || pad_fit(n, Np, Ep, b->G)) return -1;
  const struct pad_host *p = &n->pad;
  char *node = n->node.p, *edge = n->edge.p, *src = n->src.p, *ins = n->in_start.p, *rel = bc->rel.p;
  be->upload(node, b->node_feat, N * ni * sizeof(real));
  be->upload(node + N * ni * sizeof(real), p->node, na * ni * sizeof(real));
  be->upload(edge, b->edge_feat, E * ei * sizeof(real));
  be->upload(edge + E * ei * sizeof(real), p->edge, ne * ei * sizeof(real));
  be->upload(src, b->src, E * sizeof(int32_t));
  be->upload(src + E * sizeof(int32_t), p->src, ne * sizeof(int32_t));
  be->upload(ins, b->in_start, N * sizeof(int32_t)); /* (in_start[N] = E: the padding's first) */
  be->upload(ins + N * sizeof(int32_t), p->in_start, (na + 1) * sizeof(int32_t));
  be->upload(rel, b->rel, E * 3 * sizeof(float));
  be->upload(rel + E * 3 * sizeof(float), p->rel, ne * 3 * sizeof(float));
  int32_t last = Np;
  be->upload(n->graph_start.p, b->graph_start, (G + 1) * sizeof(int32_t));
  be->upload((int32_t *)n->graph_start.p + G + 1, &last, sizeof last);
  be->upload(n->target.p, target, G * outs * sizeof(real));
  double sc[NN_K_ADAM_SCHED];
  nn_k_adam_sched(sc, o->beta1, o->beta2, step, lr);
  sc[4] = scaled;
  be->upload(n->sched.p, sc, sizeof sc);
  bc->id = 0; /* (the cache holds the padded batch's bases now) */
  n->db = (struct se3_batch){
      Np, Ep, b->G + 1, n->node.p, n->edge.p, n->src.p, n->in_start.p, n->graph_start.p, bc->basis.p, NULL, 0};
  return 0;
}

/* The step's work on the staged padded batch, queued (or recorded): bases,
 * forward, loss over the real molecules (the padding's gradient zero),
 * backward, clipping, Adam with the step's values from memory. 0, or -1
 * (out of memory, or the device failed: sync says which). */
static int pad_work(struct se3_net *n, const struct rec_key *k, const struct nn_adam *o) {
  const struct nn_backend *be = n->be;
  const struct se3_batch *db = &n->db;
  if (be->bases(n->bc->basis.p, n->bc->rel.p, db->E, &n->model.plan)) return -1;
  struct se3_tape *t = se3_model_forward_ws(&n->model, n->arr[SE3_NET_PARAMS], db, n->out.p, n->ws);
  if (!t) return -1;
  real *dout = n->dout.p, *g = n->arr[SE3_NET_GRAD];
  be->loss(dout, n->acc, n->out.p, n->target.p, k->cnt, k->kind, k->delta, k->num, k->den, k->gscale);
  be->zero(dout + k->cnt, (size_t)n->model.cfg.outputs * sizeof(real));
  be->zero(g, n->model.n_params * sizeof(real));
  int bad = se3_model_backward_staged(&n->model, n->arr[SE3_NET_PARAMS], db, t, dout, g, NULL, NULL, NULL);
  se3_tape_free(t);
  if (bad) return -1;
  /* (the norm into the schedule, where Adam reads it: a loss-scaled step
   * whose gradient overflowed updates nothing) */
  if (k->max_norm > 0 || k->scaled) {
    be->sumsq_to(n->acc + 2, g, n->model.n_params);
    be->clip(g, n->model.n_params, n->acc + 2, k->scaled ? k->gscale : 1, k->max_norm, (double *)n->sched.p + 3);
  }
  be->adam_step_at(n->arr[SE3_NET_PARAMS], n->arr[SE3_NET_ADAM_M], n->arr[SE3_NET_ADAM_V], g, n->model.n_params, o,
                   n->sched.p);
  return 0;
}

/* A data-parallel step's work, queued (or recorded), with the device's own
 * collectives: pad_work's, the gradient summed over comm's processes
 * bucket by bucket while the backward runs (se3_net_backward_sum's buckets;
 * with sharded moments, its slice by one reduce-scatter after it), the
 * processes' losses summed into the running sum (acc[1]), the norm of the
 * summed gradient (sharded: the slices' squares summed on the device), and
 * Adam (sharded: of the slice, the others' gathered). have 0: an empty
 * share, whose zero gradient and zero loss join the sums all the same.
 * The collectives are the same, in the same order, on every process and
 * whatever the batch: each process's step may be a recording or eager.
 * 0, or -1 (out of memory, the device failed, or a collective could not
 * be queued: its message in err). */
static int dp_work(struct se3_net *n, const struct rec_key *k, const struct nn_adam *o, const struct se3_comm *comm,
                   int have, struct se3_error *err) {
  const struct nn_backend *be = n->be;
  real *g = n->arr[SE3_NET_GRAD];
  size_t np = n->model.n_params, lo = n->opt_lo, len = n->opt_hi - n->opt_lo;
  double *part = n->acc + 4;
  int sharded = n->opt_comm != NULL;
  struct buckets bk = {.n = n, .comm = comm, .device = 1, .err = err};
  buckets_plan(&bk, k->bucket_bytes ? k->bucket_bytes : SIZE_MAX); /* (0: one sum, after the backward) */
  se3_error_clear(err);
  if (have) {
    const struct se3_batch *db = &n->db;
    if (be->bases(n->bc->basis.p, n->bc->rel.p, db->E, &n->model.plan)) return -1;
    struct se3_tape *t = se3_model_forward_ws(&n->model, n->arr[SE3_NET_PARAMS], db, n->out.p, n->ws);
    if (!t) return -1;
    real *dout = n->dout.p;
    be->loss(dout, part, n->out.p, n->target.p, k->cnt, k->kind, k->delta, k->num, k->den, k->gscale);
    be->zero(dout + k->cnt, (size_t)n->model.cfg.outputs * sizeof(real));
    be->zero(g, np * sizeof(real));
    int bad = se3_model_backward_staged(&n->model, n->arr[SE3_NET_PARAMS], db, t, dout, g, NULL,
                                        sharded ? NULL : bucket_stage_done, &bk);
    se3_tape_free(t);
    if (bad) return -1;
  } else {
    be->zero(g, np * sizeof(real));
    be->zero(part, 2 * sizeof(double));
  }
  if (sharded) {
    if (be->reduce_scatter(g, np, err)) return -1;
  } else {
    buckets_start(&bk, bk.count);
    if (bk.failed) return -1; /* (its message in err) */
    if (be->sum_wait(err)) return -1;
  }
  if (be->allreduce_f64(part, 1, err)) return -1;
  be->add_f64(n->acc + 1, part, 1);
  if (k->max_norm > 0 || k->scaled) {
    be->sumsq_to(n->acc + 2, g + lo, len);
    if (sharded && be->allreduce_f64(n->acc + 2, 1, err)) return -1;
    be->clip(g + lo, len, n->acc + 2, k->scaled ? k->gscale : 1, k->max_norm, (double *)n->sched.p + 3);
  }
  be->adam_step_at(n->arr[SE3_NET_PARAMS] + lo, n->arr[SE3_NET_ADAM_M], n->arr[SE3_NET_ADAM_V], g + lo, len, o,
                   n->sched.p);
  if (sharded && be->allgather(n->arr[SE3_NET_PARAMS], np, err)) return -1;
  return 0;
}

/* se3_net_forward_loss on the batch padded (pad_stage), its forward kept
 * for the backward: pad_work's first half. */
static int forward_loss_padded(struct se3_net *n, const struct se3_batch *b, const real *target,
                               const struct se3_loss_spec *ls, struct se3_error *err) {
  const struct nn_backend *be = n->be;
  se3_tape_free(n->tape);
  n->tape = NULL;
  const int Np = pad_size((long)b->N + 1), Ep = pad_size(b->E), cnt = b->G * n->model.cfg.outputs;
  const struct nn_adam none = {0}; /* (pad_stage stages Adam's values too; this step's Adam is se3_net_adam's) */
  int bad = pad_stage(n, b, target, Np, Ep, &none, 1, 0, 0);
  if (!bad) bad = be->bases(n->bc->basis.p, n->bc->rel.p, n->db.E, &n->model.plan) != 0;
  struct se3_tape *t = NULL;
  if (!bad) bad = !(t = se3_model_forward_ws(&n->model, n->arr[SE3_NET_PARAMS], &n->db, n->out.p, n->ws));
  if (bad) {
    if (be->sync(err)) return -1; /* the device failed: its message */
    se3_error_set(err, SE3_ERR_MEMORY,
                  "out of %s memory in the forward pass (a batch of %d molecules, %d atoms, %d edges; padded %d, %d): "
                  "lower the batch size or set low_memory: true",
                  be->name, b->G, b->N, b->E, Np, Ep);
    return -1;
  }
  double delta = ls->huber_delta > 0 && isfinite(ls->huber_delta) ? ls->huber_delta : 1;
  be->loss(n->dout.p, n->acc, n->out.p, n->target.p, cnt, (int)ls->kind, delta, ls->num, ls->den, ls->grad_scale);
  be->zero((real *)n->dout.p + cnt, (size_t)n->model.cfg.outputs * sizeof(real)); /* the padding's: no gradient */
  n->tape = t;
  return 0;
}

/* The work of a step on the staged batch: one process's (pad_work), or a
 * data-parallel one's (dp_work). */
static int step_work(struct se3_net *n, const struct rec_key *k, const struct nn_adam *o, const struct se3_comm *comm,
                     struct se3_error *err) {
  se3_error_clear(err);
  return comm ? dp_work(n, k, o, comm, 1, err) : pad_work(n, k, o);
}

/* se3_net_train_step, or with comm se3_net_train_step_dp. */
static int train_step(struct se3_net *n, const struct se3_batch *b, const real *target, const struct se3_loss_spec *ls,
                      double max_norm, const struct nn_adam *o, long step, double lr, const struct se3_comm *comm,
                      size_t bucket_bytes, struct se3_error *err) {
  const struct nn_backend *be = n->be;
  n->norm_on_host = 0;
  if (!comm && (n->steps == SE3_STEPS_PLAIN || n->opt_comm || !n->arr[SE3_NET_GRAD] || b->basis || !b->rel)) {
    if (se3_net_forward_loss(n, b, target, ls, err) || se3_net_backward_loss(n, err)) return -1;
    if (be->precision == NN_PREC_FP16) { /* loss-scaled: unscaled, and skipped on an overflow, as recorded */
      n->norm = se3_net_unscale_clip(n, ls->grad_scale, max_norm);
      n->norm_on_host = 1;
      if (isfinite(n->norm)) se3_net_adam(n, o, step, lr);
    } else {
      if (max_norm > 0) se3_net_clip_queued(n, max_norm);
      se3_net_adam(n, o, step, lr);
    }
    n->stats.eager++;
    return 0;
  }
  se3_tape_free(n->tape); /* (a forward kept before is not this step's) */
  n->tape = NULL;
  struct rec_key k;
  memset(&k, 0, sizeof k); /* (compared as bytes) */
  k.kind = (int)ls->kind, k.num = ls->num;
  k.den = ls->den, k.max_degree = n->model.plan.max_degree, k.decoupled = o->decoupled;
  k.low_memory = n->model.low_memory;
  k.delta = ls->huber_delta > 0 && isfinite(ls->huber_delta) ? ls->huber_delta : 1;
  k.gscale = ls->grad_scale, k.max_norm = max_norm > 0 ? max_norm : 0, k.beta1 = o->beta1, k.beta2 = o->beta2;
  k.eps = o->eps, k.weight_decay = o->weight_decay;
  k.dp = comm != NULL, k.bucket_bytes = comm ? bucket_bytes : 0;
  k.scaled = be->precision == NN_PREC_FP16; /* (loss scaling: the step skips itself on an overflow) */
  if (!b) { /* data parallel, an empty share: its zeros join the sums (eagerly; rare: a run's last batch) */
    double sc[NN_K_ADAM_SCHED];
    nn_k_adam_sched(sc, o->beta1, o->beta2, step, lr);
    sc[4] = k.scaled;
    if (dbuf_fit(be, &n->sched, sizeof sc)) {
      se3_error_set(err, SE3_ERR_MEMORY, "out of %s memory", be->name);
      return -1;
    }
    be->upload(n->sched.p, sc, sizeof sc);
    n->stats.eager++;
    if (dp_work(n, &k, o, comm, 0, err) == 0) return 0;
    if (!failed_with(err) && be->sync(err) == 0) se3_error_set(err, SE3_ERR_MEMORY, "out of %s memory", be->name);
    return -1;
  }
  int Np = pad_size((long)b->N + 1), Ep = pad_size(b->E);
  if (pad_stage(n, b, target, Np, Ep, o, step, lr, k.scaled)) {
    if (be->sync(err)) return -1;
    se3_error_set(err, SE3_ERR_MEMORY,
                  "out of %s memory for a batch of %d molecules (%d atoms, %d edges; padded %d, %d)", be->name, b->G,
                  b->N, b->E, Np, Ep);
    return -1;
  }
  k.N = Np, k.E = Ep, k.G = b->G, k.cnt = b->G * n->model.cfg.outputs;
  /* this shape's slot, or the least recently used one */
  struct rec_slot *slot = NULL, *old = &n->rec[0];
  for (int i = 0; i < REC_SLOTS && !slot; i++) {
    if (n->rec[i].used && memcmp(&n->rec[i].key, &k, sizeof k) == 0) slot = &n->rec[i];
    if (n->rec[i].used < old->used) old = &n->rec[i];
  }
  int seen = slot != NULL;
  if (!slot) {
    slot = old;
    if (slot->rec) be->record_free(slot->rec);
    slot->rec = NULL;
    slot->refused = 0;
    slot->key = k;
  }
  slot->used = ++n->rec_clock;
  if (slot->rec && n->steps == SE3_STEPS_RECORDED) {
    if (be->replay(slot->rec) == 0) {
      n->stats.replayed++;
      return 0;
    }
    be->record_free(slot->rec); /* stale: recorded anew */
    slot->rec = NULL;
  }
  /* a shape seen before (its first step, eager, made the memory it needs)
   * is recorded, then replayed; nothing of a recording runs until then
   * (its collectives neither: a process whose recording is refused queues
   * the same ones eagerly, in the same order) */
  if (seen && slot->refused < 2 && n->steps == SE3_STEPS_RECORDED && be->record_begin() == 0) {
    int bad = step_work(n, &k, o, comm, err);
    void *rec = be->record_end();
    if (!bad && rec && be->replay(rec) == 0) {
      slot->rec = rec;
      n->stats.recorded++;
      n->stats.replayed++;
      return 0;
    }
    if (rec) be->record_free(rec);
    n->stats.refused++;
    slot->refused++; /* (tried once more, after the eager step made what memory it needed; then not: each
                        try costs the host a step's calls) */
  }
  if (step_work(n, &k, o, comm, err)) {
    if (failed_with(err)) return -1; /* a collective's message */
    if (be->sync(err)) return -1;    /* the device failed: its message */
    se3_error_set(
        err, SE3_ERR_MEMORY,
        "out of %s memory in a training step (a batch of %d molecules, %d atoms, %d edges): lower the batch size "
        "or set low_memory: true",
        be->name, b->G, b->N, b->E);
    return -1;
  }
  n->stats.eager++;
  return 0;
}

int se3_net_train_step(struct se3_net *n, const struct se3_batch *b, const real *target, const struct se3_loss_spec *ls,
                       double max_norm, const struct nn_adam *o, long step, double lr, struct se3_error *err) {
  return train_step(n, b, target, ls, max_norm, o, step, lr, NULL, 0, err);
}

int se3_net_step_norm(struct se3_net *n, double *norm, struct se3_error *err) {
  *norm = n->norm_on_host ? n->norm : 0;
  if (!n->norm_on_host && n->sched.p) n->be->download(norm, (const double *)n->sched.p + 3, sizeof *norm);
  return n->be->sync(err);
}

int se3_net_buckets(struct se3_net *n, size_t bucket_bytes) {
  struct buckets bk = {.n = n};
  buckets_plan(&bk, bucket_bytes ? bucket_bytes : SIZE_MAX);
  return bk.count;
}

int se3_net_dp_steps(struct se3_net *n, const struct se3_comm *comm, struct se3_error *err) {
  const struct nn_backend *be = n->be;
  if (!comm || n->steps == SE3_STEPS_PLAIN || !n->arr[SE3_NET_GRAD] || be->host_memory || !be->sum_start ||
      !be->allreduce_f64 || !be->add_f64 || !be->reduce_scatter || !be->allgather)
    return 0;
  return device_collectives(be, comm, err) < 0 ? -1 : 1;
}

int se3_net_train_step_dp(struct se3_net *n, const struct se3_batch *b, const real *target,
                          const struct se3_loss_spec *ls, double max_norm, const struct nn_adam *o, long step,
                          double lr, const struct se3_comm *comm, size_t bucket_bytes, struct se3_error *err) {
  se3_error_clear(err);
  if (!comm || se3_net_dp_steps(n, comm, err) != 1 || (b && (b->basis || !b->rel))) {
    if (!failed_with(err))
      se3_error_set(err, SE3_ERR_RUN,
                    "se3_net_train_step_dp: not for these processes, net, backend or batch (se3_net_dp_steps)");
    return -1;
  }
  const struct nn_backend *be = n->be;
  void **f = &n->inflight[n->dp_steps % 2];
  if (!*f && !(*f = be->fence_new())) {
    se3_error_set(err, SE3_ERR_MEMORY, "out of %s resources for a fence", be->name);
    return -1;
  }
  if (be->fence_wait(*f, err)) return -1; /* (the step two back) */
  if (train_step(n, b, target, ls, max_norm, o, step, lr, comm, bucket_bytes, err)) return -1;
  be->fence_mark(*f);
  n->dp_steps++;
  return 0;
}

size_t se3_net_peak_bytes(const struct se3_net *n) { return nn_arena_peak(n->ws); }

size_t se3_net_memory_bytes(const struct se3_net *n) {
  size_t b = nn_arena_bytes(n->ws);
  const struct dbuf *bufs[] = {&n->node,    &n->edge, &n->src,  &n->in_start, &n->graph_start, &n->bc->basis,
                               &n->bc->rel, &n->out,  &n->dout, &n->target,   &n->pend[0].out, &n->pend[1].out};
  for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
    b += bufs[i]->cap;
  return b + n->pend[0].host_cap + n->pend[1].host_cap;
}

/* A batch of G molecules with N atoms and E edges in all, spread evenly
 * (every molecule at least one atom; each atom's incoming edges from the
 * atoms after it, cyclically), zero features but the distance column, the
 * same relative position everywhere: a shape, not a molecule. */
static int shape_batch(struct se3_batch_buf *bb, const struct se3_model *m, int N, int E, int G) {
  const struct se3_config *c = &m->cfg;
  int nmax = N / G + 1, emax = E / G + 1;
  float *nf = calloc((size_t)nmax * (size_t)c->node_in + 1, sizeof *nf);
  float *ef = calloc((size_t)emax * (size_t)c->edge_in + 1, sizeof *ef), *rel = malloc((size_t)emax * 3 * sizeof *rel);
  int32_t *src = malloc((size_t)emax * sizeof *src), *dst = malloc((size_t)emax * sizeof *dst);
  int rc = nf && ef && rel && src && dst ? 0 : -1;
  for (int g = 0; g < G && rc == 0; g++) {
    int na = N / G + (g < N % G), ne = E / G + (g < E % G);
    for (int k = 0; k < ne; k++) {
      dst[k] = (int32_t)((long)k * na / ne);
      src[k] = (int32_t)((dst[k] + 1 + k) % na);
      ef[(size_t)k * (size_t)c->edge_in + (size_t)(c->edge_in - 1)] = 1.0f;
      rel[3 * k] = 0.6f, rel[3 * k + 1] = 0.0f, rel[3 * k + 2] = 0.8f;
    }
    rc = se3_batch_add(bb, na, nf, ne, src, dst, ef, rel);
  }
  if (rc == 0) se3_batch_geometry(bb); /* (the bases are computed where the net runs, as a stage's batch's) */
  free(nf), free(ef), free(rel), free(src), free(dst);
  return rc;
}

int se3_net_reserve(struct se3_net *n, int N, int E, int G, int train, struct se3_error *err) {
  if (G <= 0) return 0;
  if (N < G) N = G;
  const struct nn_backend *be = n->be;
  const struct se3_config *c = &n->model.cfg;
  size_t no = (size_t)G * (size_t)c->outputs, ob = no * sizeof(real);
  struct se3_batch_buf bb;
  se3_batch_buf_init(&bb, c->node_in, c->edge_in);
  real *out = calloc(no, sizeof *out), *zero = calloc(no, sizeof *zero);
  int rc = 0;
  if (!out || !zero || shape_batch(&bb, &n->model, N, E, G)) {
    se3_error_set(err, SE3_ERR_MEMORY, "out of host memory for a batch of %d molecules (%d atoms, %d edges)", G, N, E);
    rc = -1;
  }
  /* the buffers a training step and the scoring pipeline use besides */
  for (int i = 0; i < 2 && rc == 0; i++) {
    struct pending *p = &n->pend[i];
    if (p->host_cap < ob) {
      be->host_release(p->host);
      p->host_cap = (p->host = be->host_alloc(ob)) ? ob : 0;
    }
    if (!p->host || dbuf_fit(be, &p->out, ob)) rc = -1;
  }
  if (rc == 0 && (dbuf_fit(be, &n->out, ob) || (train && (dbuf_fit(be, &n->target, ob) || dbuf_fit(be, &n->dout, ob)))))
    rc = -1;
  if (rc && out && zero && bb.b.node_feat) /* (the batch was built: the backend's memory ran out) */
    se3_error_set(err, SE3_ERR_MEMORY, "out of %s memory for a batch of %d molecules", be->name, G);
  if (rc == 0 && train && n->steps != SE3_STEPS_PLAIN) {
    /* se3_net_train_step pads its batches: the memory of the largest
     * padded shape (the same work on the same shape, without Adam's update) */
    struct se3_batch_buf pb;
    se3_batch_buf_init(&pb, c->node_in, c->edge_in);
    int Np = pad_size((long)N + 1), Ep = pad_size(E);
    real *pout = calloc(no + c->outputs, sizeof *pout), *pzero = calloc(no + c->outputs, sizeof *pzero);
    if (!pout || !pzero || shape_batch(&pb, &n->model, Np, Ep, G + 1)) {
      se3_error_set(err, SE3_ERR_MEMORY, "out of host memory for a batch of %d molecules (%d atoms, %d edges)", G + 1,
                    Np, Ep);
      rc = -1;
    } else if (pad_fit(n, Np, Ep, G)) {
      se3_error_set(err, SE3_ERR_MEMORY, "out of %s memory for a batch of %d molecules", be->name, G);
      rc = -1;
    } else {
      rc = se3_net_forward(n, &pb.b, pout, 1, err) || se3_net_backward(n, pzero, err) ? -1 : 0;
    }
    se3_batch_buf_free(&pb);
    free(pout), free(pzero);
  }
  if (rc == 0 && train && n->steps == SE3_STEPS_PLAIN)
    rc = se3_net_forward(n, &bb.b, out, 1, err) || se3_net_backward(n, zero, err) ? -1 : 0;
  if (rc == 0) rc = se3_net_forward(n, &bb.b, out, 0, err) ? -1 : 0;
  se3_batch_buf_free(&bb);
  free(out);
  free(zero);
  return rc;
}

void se3_net_share_workspace(struct se3_net *n, struct se3_net *with) {
  se3_tape_free(n->tape);
  n->tape = NULL;
  nn_arena_free(&n->own_ws);
  n->ws = with->ws;
  dbuf_free(n->be, &n->own_bc.basis);
  dbuf_free(n->be, &n->own_bc.rel);
  n->bc = with->bc;
}
