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
#include "models/kernels/loss.h"

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
   * (backend.h's `loss`), the gradient's sum of squares and norm (`clip`) */
  double *acc;
  /* Adam's moments: of parameters [opt_lo, opt_hi) (all of them, unless
   * se3_net_shard_optimizer gave this process a slice of opt_comm's) */
  size_t opt_lo, opt_hi;
  const struct se3_comm *opt_comm;
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

struct se3_net *se3_net_create(const struct nn_backend *be, const struct se3_config *cfg, int low_memory, char *err,
                               size_t errlen) {
  struct se3_net *n = calloc(1, sizeof *n);
  if (!n) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  n->be = be;
  if (se3_model_init(&n->model, cfg, err, errlen)) {
    free(n);
    return NULL;
  }
  n->model.be = be;
  n->model.low_memory = low_memory;
  nn_backend_arena(be, &n->own_ws);
  n->ws = &n->own_ws;
  n->bc = &n->own_bc;
  size_t bytes = (n->model.n_params ? n->model.n_params : 1) * sizeof(real);
  n->opt_hi = n->model.n_params;
  for (int i = 0; i < 4; i++)
    if (!(n->arr[i] = be->alloc(bytes))) {
      snprintf(err, errlen, "out of %s memory for %zu parameters", be->name, n->model.n_params);
      se3_net_free(n);
      return NULL;
    }
  if (!(n->acc = be->alloc(4 * sizeof(double)))) {
    snprintf(err, errlen, "out of %s memory", be->name);
    se3_net_free(n);
    return NULL;
  }
  be->zero(n->acc, 4 * sizeof(double));
  return n;
}

void se3_net_free(struct se3_net *n) {
  if (!n) return;
  const struct nn_backend *be = n->be;
  se3_tape_free(n->tape);
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

int se3_net_shard_optimizer(struct se3_net *n, const struct se3_comm *comm, size_t *lo, size_t *hi, char *err,
                            size_t errlen) {
  size_t np = n->model.n_params, a, b;
  comm_slice(comm, np, &a, &b);
  *lo = a;
  *hi = b;
  if (!comm) return 0;
  const struct nn_backend *be = n->be;
  for (int i = SE3_NET_ADAM_M; i <= SE3_NET_ADAM_V; i++) {
    be->release(n->arr[i]);
    if (!(n->arr[i] = be->alloc((b > a ? b - a : 1) * sizeof(real)))) {
      snprintf(err, errlen, "out of %s memory for Adam's moments of %zu parameters", be->name, b - a);
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
static int device_collectives(const struct nn_backend *be, const struct se3_comm *comm, char *err, size_t errlen) {
  if (be->host_memory || !be->join || !comm) return 0;
  return be->join(comm, comm_rank(comm), comm_size(comm), comm_bcast, err, errlen) ? -1 : 1;
}

/* x (n reals in the backend's memory) through one of comm.h's slice
 * collectives: in place on a host backend, on the device with its own
 * collectives, else through the host. */
static int slice_collective(struct se3_net *n, real *x, int (*op)(const struct se3_comm *, void *, size_t, int)) {
  const struct nn_backend *be = n->be;
  size_t np = n->model.n_params;
  if (be->host_memory) return op(n->opt_comm, x, np, (int)sizeof(real));
  char err[256];
  int dev = device_collectives(be, n->opt_comm, err, sizeof err);
  if (dev < 0) {
    fprintf(stderr, "se3screen (rank %d): %s\n", comm_rank(n->opt_comm), err);
    return -1;
  }
  if (dev) {
    if ((op == comm_reduce_scatter ? be->reduce_scatter : be->allgather)(x, np, err, sizeof err) == 0) return 0;
    fprintf(stderr, "se3screen (rank %d): %s\n", comm_rank(n->opt_comm), err);
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
static int forward(struct se3_net *n, const struct se3_batch *b, real *dst, int keep, real **pred, char *err,
                   size_t errlen) {
  const struct nn_backend *be = n->be;
  se3_tape_free(n->tape);
  n->tape = NULL;
  size_t ob = (size_t)b->G * (size_t)n->model.cfg.outputs * sizeof(real);
  if (stage_batch(n, b) || (!dst && dbuf_fit(be, &n->out, ob))) {
    if (be->sync(err, errlen)) return -1; /* the device failed: its message */
    snprintf(err, errlen, "out of %s memory for a batch of %d molecules (%d atoms, %d edges)", be->name, b->G, b->N,
             b->E);
    return -1;
  }
  real *dout = dst ? dst : n->out.p;
  struct se3_tape *t = NULL;
  int failed;
  if (keep)
    failed = !(t = se3_model_forward_ws(&n->model, n->arr[SE3_NET_PARAMS], &n->db, dout, n->ws));
  else
    failed = se3_model_infer_ws(&n->model, n->arr[SE3_NET_PARAMS], &n->db, dout, n->ws) != 0;
  if (failed && be->sync(err, errlen)) return -1; /* the device failed: its message */
  if (failed) {
    snprintf(err, errlen,
             "out of %s memory in the forward pass (a batch of %d molecules, %d atoms, %d edges): lower the batch "
             "size or set low_memory: true",
             be->name, b->G, b->N, b->E);
    return -1;
  }
  n->tape = t; /* NULL when not kept */
  *pred = dout;
  return 0;
}

int se3_net_forward(struct se3_net *n, const struct se3_batch *b, real *out, int keep, char *err, size_t errlen) {
  const struct nn_backend *be = n->be;
  real *pred;
  if (forward(n, b, be->host_memory ? out : NULL, keep, &pred, err, errlen)) return -1;
  if (!be->host_memory) be->download(out, pred, (size_t)b->G * (size_t)n->model.cfg.outputs * sizeof(real));
  if (be->sync(err, errlen)) {
    se3_tape_free(n->tape);
    n->tape = NULL;
    return -1;
  }
  return 0;
}

int se3_net_predict_start(struct se3_net *n, const struct se3_batch *b, char *err, size_t errlen) {
  const struct nn_backend *be = n->be;
  if (n->pend_count == 2) {
    snprintf(err, errlen, "two predictions are already under way (finish one first)");
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
    snprintf(err, errlen, "out of %s memory for a batch's predictions", be->name);
    return -1;
  }
  real *pred;
  if (forward(n, b, p->out.p, 0, &pred, err, errlen)) return -1;
  be->download_queued(p->host, pred, ob);
  be->fence_mark(p->fence);
  p->bytes = ob;
  n->pend_count++;
  return 0;
}

int se3_net_predict_finish(struct se3_net *n, real *out, char *err, size_t errlen) {
  if (n->pend_count == 0) {
    snprintf(err, errlen, "no prediction is under way");
    return -1;
  }
  struct pending *p = &n->pend[n->pend_first];
  n->pend_first = (n->pend_first + 1) % 2;
  n->pend_count--;
  if (n->be->fence_wait(p->fence, err, errlen)) return -1;
  if (p->bytes) memcpy(out, p->host, p->bytes);
  return 0;
}

void se3_net_predict_drop(struct se3_net *n) {
  char err[256];
  for (; n->pend_count; n->pend_count--, n->pend_first = (n->pend_first + 1) % 2)
    (void)n->be->fence_wait(n->pend[n->pend_first].fence, err, sizeof err);
}

int se3_net_forward_loss(struct se3_net *n, const struct se3_batch *b, const real *target,
                         const struct se3_loss_spec *ls, char *err, size_t errlen) {
  const struct nn_backend *be = n->be;
  int cnt = b->G * n->model.cfg.outputs;
  size_t tb = (size_t)cnt * sizeof(real);
  real *pred;
  if (dbuf_fit(be, &n->target, tb) || dbuf_fit(be, &n->dout, tb)) {
    snprintf(err, errlen, "out of %s memory for a batch's targets", be->name);
    return -1;
  }
  if (forward(n, b, NULL, 1, &pred, err, errlen)) return -1;
  be->upload(n->target.p, target, tb);
  double delta = ls->huber_delta > 0 && isfinite(ls->huber_delta) ? ls->huber_delta : 1;
  be->loss(n->dout.p, n->acc, pred, n->target.p, cnt, (int)ls->kind, delta, ls->num, ls->den, ls->grad_scale);
  return 0;
}

const real *se3_net_loss_grad(const struct se3_net *n) { return n->dout.p; }

int se3_net_loss_part(struct se3_net *n, double *part, char *err, size_t errlen) {
  n->be->download(part, n->acc, sizeof *part);
  return n->be->sync(err, errlen);
}

int se3_net_loss_sum(struct se3_net *n, double *sum, char *err, size_t errlen) {
  n->be->download(sum, n->acc + 1, sizeof *sum);
  return n->be->sync(err, errlen);
}

void se3_net_set_loss_sum(struct se3_net *n, double sum) { n->be->upload(n->acc + 1, &sum, sizeof sum); }

int se3_net_sync(struct se3_net *n, char *err, size_t errlen) { return n->be->sync(err, errlen); }

/* The gradient of the last forward kept, calling done(ctx, stage) as
 * se3_model_backward_staged does. */
static int backward(struct se3_net *n, const real *dout, void (*done)(void *, int), void *ctx, char *err,
                    size_t errlen) {
  const struct nn_backend *be = n->be;
  if (!n->arr[SE3_NET_GRAD]) {
    snprintf(err, errlen, "this net was made for inference only (se3_net_inference_only)");
    return -1;
  }
  if (!n->tape) {
    snprintf(err, errlen, "no forward pass was kept for the backward");
    return -1;
  }
  size_t ob = (size_t)n->db.G * (size_t)n->model.cfg.outputs * sizeof(real);
  const real *dd = dout;
  if (!be->host_memory && dout != n->dout.p) { /* (n->dout.p: the loss's gradient, already there) */
    if (dbuf_fit(be, &n->dout, ob)) {
      snprintf(err, errlen, "out of %s memory for the output gradient", be->name);
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
  if (bad && be->sync(err, errlen)) return -1; /* the device failed: its message */
  if (bad) {
    snprintf(err, errlen,
             "out of %s memory in the backward pass (a batch of %d molecules): lower the batch size or set "
             "low_memory: true",
             be->name, n->db.G);
    return -1;
  }
  return 0;
}

int se3_net_backward(struct se3_net *n, const real *dout, char *err, size_t errlen) {
  if (backward(n, dout, NULL, NULL, err, errlen)) return -1;
  return n->be->sync(err, errlen);
}

int se3_net_backward_loss(struct se3_net *n, char *err, size_t errlen) {
  return backward(n, n->dout.p, NULL, NULL, err, errlen);
}

void se3_net_zero_grad(struct se3_net *n) { n->be->zero(n->arr[SE3_NET_GRAD], n->model.n_params * sizeof(real)); }

const char *se3_net_collectives(const struct se3_net *n) { return !n->be->host_memory && n->be->join ? "NCCL" : "MPI"; }

int se3_net_allreduce(struct se3_net *n, const struct se3_comm *comm, char *err, size_t errlen) {
  const struct nn_backend *be = n->be;
  size_t np = n->model.n_params;
  if (n->opt_comm) { /* only this process's slice is needed: the others' Adam updates the rest */
    if (slice_collective(n, n->arr[SE3_NET_GRAD], comm_reduce_scatter) == 0) return 0;
    snprintf(err, errlen, "summing the gradient over the processes failed (MPI, or out of host memory)");
    return -1;
  }
  if (!comm || be->host_memory) return be->allreduce(n->arr[SE3_NET_GRAD], np, comm, err, errlen);
  int dev = device_collectives(be, comm, err, errlen);
  if (dev < 0) return -1;
  if (dev) return be->allreduce(n->arr[SE3_NET_GRAD], np, comm, err, errlen);
  /* A device without its own collectives: the gradient through the host,
   * summed as the CPU's is. */
  real *h = malloc(np * sizeof *h);
  if (!h) {
    snprintf(err, errlen, "out of host memory for the gradient (%zu parameters)", np);
    return -1;
  }
  be->download(h, n->arr[SE3_NET_GRAD], np * sizeof *h);
  int rc = nn_backend_host()->allreduce(h, np, comm, err, errlen);
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
  int failed; /* a sum could not be started: its message in err */
  char err[256];
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
      if (n->be->sum_start(g + lo, hi - lo, bk->err, sizeof bk->err)) bk->failed = 1;
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
                         struct se3_sum_stats *st, char *err, size_t errlen) {
  const struct nn_backend *be = n->be;
  memset(st, 0, sizeof *st);
  if (!comm) {
    if (dout) return se3_net_backward(n, dout, err, errlen);
    se3_net_zero_grad(n);
    return 0;
  }
  int dev = 0;
  if (!be->host_memory && !n->opt_comm && be->sum_start && (dev = device_collectives(be, comm, err, errlen)) < 0)
    return -1;
  if (bucket_bytes == 0 || (!be->host_memory && !dev)) {
    /* one sum after the backward; a failed backward joins it all the same */
    char why[512] = "";
    int bad = 0;
    if (dout) bad = se3_net_backward(n, dout, why, sizeof why) != 0;
    if (!dout || bad) se3_net_zero_grad(n); /* (a failed backward adds nothing) */
    double t0 = seconds();
    int rc = se3_net_allreduce(n, comm, err, errlen);
    st->wait_s = st->sum_s = seconds() - t0;
    st->buckets = 1;
    if (bad) snprintf(err, errlen, "%s", why);
    return bad || rc ? -1 : 0;
  }
  struct buckets bk = {.n = n, .comm = comm, .device = dev, .scatter = n->opt_comm != NULL};
  buckets_plan(&bk, bucket_bytes);
  int bad = 0;
  if (dout) {
    bad = backward(n, dout, bucket_stage_done, &bk, err, errlen) != 0;
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
      fprintf(stderr, "se3screen (rank %d): %s\n", comm_rank(comm), bk.err);
      comm_abort(comm, 1);
    }
    rc = be->sum_wait(bk.err, sizeof bk.err) || be->sync(bk.err, sizeof bk.err) ? -1 : 0;
  } else {
    rc = comm_sum_wait(comm, &busy);
    if (rc) snprintf(bk.err, sizeof bk.err, "summing the gradient over %d processes: MPI failed", comm_size(comm));
  }
  st->wait_s = seconds() - t0;
  st->sum_s = dev ? st->wait_s : busy;
  st->buckets = bk.count;
  if (bad) return -1; /* (the backward's message is in err) */
  if (rc) {
    snprintf(err, errlen, "%s", bk.err);
    return -1;
  }
  return dev ? 0 : be->sync(err, errlen);
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

int se3_net_reserve(struct se3_net *n, int N, int E, int G, int train, char *err, size_t errlen) {
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
    snprintf(err, errlen, "out of host memory for a batch of %d molecules (%d atoms, %d edges)", G, N, E);
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
    snprintf(err, errlen, "out of %s memory for a batch of %d molecules", be->name, G);
  if (rc == 0 && train)
    rc = se3_net_forward(n, &bb.b, out, 1, err, errlen) || se3_net_backward(n, zero, err, errlen) ? -1 : 0;
  if (rc == 0) rc = se3_net_forward(n, &bb.b, out, 0, err, errlen) ? -1 : 0;
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
