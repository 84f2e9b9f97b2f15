/* collectives.cu — the CUDA backend's collectives between the GPUs of a
 * data-parallel run (backend.h's join, allreduce, reduce_scatter,
 * allgather): NCCL, one communicator per process, bootstrapped over MPI
 * (rank 0's unique id sent to every process with comm.h's comm_bcast, the
 * way NCCL's documentation shows), every call queued on the backend's one
 * stream, so a collective runs after the backward that filled its array
 * and before the update that reads it, and nothing waits for it on the
 * host; the gradient's buckets (sum_start) run on a second stream, ordered
 * by events, so they overlap the rest of the backward. NCCL's own settings (NCCL_DEBUG, NCCL_ALGO, NCCL_IB_HCA, ...) come
 * from the environment, untouched.
 *
 * Sums are NCCL's: the same result on every process, in an order NCCL
 * chooses from the message size, algorithm and topology (fixed for a fixed
 * topology and NCCL version), not comm.h's. Built without NCCL (no nccl.h
 * where CMake looked) the table has no join, and the model sums a GPU's
 * gradient through the host and comm.h instead.
 *
 * Waiting (cu_wait, every wait of the backend): a peer that died leaves its
 * collective's kernel running for ever here, and cudaStreamSynchronize with
 * it. So while a communicator is joined a wait polls the stream (or event)
 * and ncclCommGetAsyncError (poll.h) until a deadline, SE3_NCCL_TIMEOUT
 * seconds (default 600; docs/cluster.md); on an asynchronous error or at the
 * deadline it aborts the communicator (ncclCommAbort) and fails, naming the
 * collective that did not finish (each is tracked by an event after it) and
 * the rank. The job then ends as after any failure of the GPU. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/cuda/cuda.h"
#include "models/cuda/poll.h"

static int plain_wait(cudaStream_t s, const cudaEvent_t *ev, const char *file, int line) {
  return ev ? cu_check(cudaEventSynchronize(*ev), file, line, "cudaEventSynchronize")
            : cu_check(cudaStreamSynchronize(s), file, line, "cudaStreamSynchronize");
}

#ifdef SE3_HAVE_NCCL
#include <nccl.h>

static struct {
  ncclComm_t comm;
  const struct se3_comm *of; /* the processes it joins */
  int rank, size;
  double timeout_s; /* SE3_NCCL_TIMEOUT */
  int aborted;      /* after a failure: no collective runs any more */
  void (*end_job)(const struct se3_comm *c, int code); /* comm.h's comm_abort (backend.h's join) */
} nc;

/* The collectives queued and not yet seen finished, oldest first: what each
 * is, and an event recorded after it on its stream (the events are made at
 * join and move with their entries). A collective queued while a step is
 * being recorded (a CUDA graph: data-parallel steps are recorded as a
 * single process's are) is not tracked, only counted: an event recorded
 * inside a capture cannot be queried. A replay of the recording is then
 * tracked as one entry, on the backend's stream, after the graph. */
#define CU_PENDING 64
static struct {
  char what[CU_PENDING][96];
  cudaEvent_t ev[CU_PENDING];
  int n, made;
  int buckets;  /* gradient buckets started since the last sum_wait */
  int recorded; /* collectives queued while recording, since cu_collectives_recorded last asked */
} pend;

/* Drops the entries whose collective has finished. */
static void pend_prune(void) {
  int k = 0;
  for (int i = 0; i < pend.n; i++) {
    if (cudaEventQuery(pend.ev[i]) == cudaSuccess) continue;
    if (k != i) { /* (slot k's event is a dropped one: the two swap) */
      cudaEvent_t e = pend.ev[k];
      pend.ev[k] = pend.ev[i];
      pend.ev[i] = e;
      memcpy(pend.what[k], pend.what[i], sizeof pend.what[k]);
    }
    k++;
  }
  pend.n = k;
  (void)cudaGetLastError(); /* (a query's error shows at the wait) */
}

/* After a collective queued on stream q: what it is, for a failed wait. */
static void pend_add(cudaStream_t q, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void pend_add(cudaStream_t q, const char *fmt, ...) {
  if (cu_recording()) {
    pend.recorded++;
    return;
  }
  if (!pend.made) return;
  pend_prune();
  if (pend.n == CU_PENDING) { /* all unfinished: the oldest is forgotten (a failed wait names a later one) */
    cudaEvent_t e = pend.ev[0];
    memmove(pend.ev, pend.ev + 1, (CU_PENDING - 1) * sizeof pend.ev[0]);
    memmove(pend.what, pend.what + 1, (CU_PENDING - 1) * sizeof pend.what[0]);
    pend.ev[CU_PENDING - 1] = e;
    pend.n--;
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(pend.what[pend.n], sizeof pend.what[pend.n], fmt, ap);
  va_end(ap);
  if (cudaEventRecord(pend.ev[pend.n], q) != cudaSuccess) {
    (void)cudaGetLastError(); /* untracked: a failed wait names it less well */
    return;
  }
  pend.n++;
}

/* ---- the wait: poll.h's loop on CUDA and NCCL ---- */
struct waiting {
  cudaStream_t s;
  const cudaEvent_t *ev;
};

static int w_done(void *ctx, char *msg, size_t len) {
  const struct waiting *w = (const struct waiting *)ctx;
  cudaError_t e = w->ev ? cudaEventQuery(*w->ev) : cudaStreamQuery(w->s);
  if (e == cudaSuccess) return 0;
  if (e == cudaErrorNotReady) return 1;
  snprintf(msg, len, "CUDA error: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
  return -1;
}

static int w_async_error(void *ctx, char *msg, size_t len) {
  (void)ctx;
  ncclResult_t r = ncclSuccess, q = ncclCommGetAsyncError(nc.comm, &r);
  if (q != ncclSuccess) {
    snprintf(msg, len, "ncclCommGetAsyncError failed: %s", ncclGetErrorString(q));
    return -1;
  }
  if (r == ncclSuccess || r == ncclInProgress) return 0;
  const char *last = ncclGetLastError(nc.comm);
  snprintf(msg, len, "%s%s%s", ncclGetErrorString(r), last && *last ? ": " : "", last ? last : "");
  return -1;
}

static void w_describe(void *ctx, char *buf, size_t len) {
  (void)ctx;
  for (int i = 0; i < pend.n; i++)
    if (cudaEventQuery(pend.ev[i]) != cudaSuccess) {
      snprintf(buf, len, "%s", pend.what[i]);
      (void)cudaGetLastError();
      return;
    }
  snprintf(buf, len, "the GPU's work (no collective left unfinished)");
}

static void w_abort(void *ctx) {
  (void)ctx;
  (void)ncclCommAbort(nc.comm); /* ends this GPU's NCCL kernels: the streams drain */
  nc.comm = NULL;
  nc.aborted = 1;
  pend.n = 0;
}

/* 0, or -1 with a message: the wait, polled while a communicator is joined. */
static int polled_wait(cudaStream_t s, const cudaEvent_t *ev, struct se3_error *err) {
  struct waiting w = {s, ev};
  struct cu_poll p;
  memset(&p, 0, sizeof p);
  p.done = w_done;
  p.async_error = w_async_error;
  p.describe = w_describe;
  p.abort = w_abort;
  p.ctx = &w;
  p.timeout_s = nc.timeout_s;
  p.rank = nc.rank;
  p.size = nc.size;
  if (cu_poll_wait(&p, err)) return -1;
  pend_prune();
  return 0;
}

int cu_wait(cudaStream_t s, const cudaEvent_t *ev, const char *file, int line) {
  if (!nc.comm) return plain_wait(s, ev, file, line);
  struct se3_error err;
  if (polled_wait(s, ev, &err) == 0) return 0;
  if (nc.size > 1 && nc.end_job) { /* the peers cannot go on without this process: end the job (backend.h's join) */
    fprintf(stderr, "se3screen (rank %d): the GPU failed: %s (%s:%d); ending the job\n", nc.rank, err.message, file,
            line);
    nc.end_job(nc.of, 1);
  }
  cu_fail(file, line, err.message);
  return -1;
}

/* No collective after an abort: its peers are gone or have given up. */
static int aborted(struct se3_error *err) {
  if (!nc.aborted) return 0;
  se3_error_set(err, SE3_ERR_MODEL,
                "the NCCL communicator was aborted after an earlier failure (the GPU's message says which)");
  return -1;
}

/* (with NCCL's own account of it, where it left one) */
static int nccl_fail(ncclResult_t r, const char *what, struct se3_error *err) {
  const char *last = ncclGetLastError(nc.comm);
  se3_error_set(err, SE3_ERR_MODEL, "NCCL failed in %s: %s%s%s (NCCL_DEBUG=WARN in the environment says more)", what,
                ncclGetErrorString(r), last && *last ? ": " : "", last ? last : "");
  return -1;
}

int cu_join(const struct se3_comm *comm, int rank, int size,
            int (*bcast)(const struct se3_comm *c, void *buf, size_t bytes),
            void (*end_job)(const struct se3_comm *c, int code), struct se3_error *err) {
  if (nc.comm && nc.of == comm) return 0;
  if (aborted(err)) return -1;
  if (nc.comm) {
    se3_error_set(err, SE3_ERR_RUN, "this GPU's NCCL communicator already joins another group of processes");
    return -1;
  }
  /* (every process reads the same environment: all refuse, none waits) */
  const char *tv = getenv(CU_POLL_TIMEOUT_ENV);
  if ((nc.timeout_s = cu_poll_timeout(tv)) < 0) {
    se3_error_set(
        err, SE3_ERR_USAGE,
        "%s='%.40s' is not a number of seconds > 0 (the longest wait for a collective, before the job gives up "
        "on its peers; default %g)",
        CU_POLL_TIMEOUT_ENV, tv, CU_POLL_TIMEOUT_DEFAULT);
    return -1;
  }
  for (; pend.made < CU_PENDING; pend.made++)
    if (cudaEventCreateWithFlags(&pend.ev[pend.made], cudaEventDisableTiming) != cudaSuccess) {
      se3_error_set(err, SE3_ERR_MODEL, "CUDA could not make the events that follow the collectives");
      return -1;
    }
  /* rank 0 sends its id, or that it has none: no process waits for ever */
  struct {
    int ok;
    ncclUniqueId id;
  } msg;
  memset(&msg, 0, sizeof msg);
  ncclResult_t r = ncclSuccess;
  if (rank == 0) {
    r = ncclGetUniqueId(&msg.id);
    msg.ok = r == ncclSuccess;
  }
  if (bcast(comm, &msg, sizeof msg)) {
    se3_error_set(err, SE3_ERR_RUN, "MPI failed sending NCCL's unique id from rank 0");
    return -1;
  }
  if (!msg.ok) {
    if (rank == 0) return nccl_fail(r, "ncclGetUniqueId", err);
    se3_error_set(err, SE3_ERR_MODEL, "rank 0 could not start NCCL (its message is above)");
    return -1;
  }
  /* the device the backend opened (GPU = node-local rank) is current */
  if ((r = ncclCommInitRank(&nc.comm, size, msg.id, rank)) != ncclSuccess) {
    nc.comm = NULL;
    return nccl_fail(r, "ncclCommInitRank", err);
  }
  nc.of = comm;
  nc.rank = rank;
  nc.size = size;
  nc.end_job = end_job;
  return 0;
}

int cu_allreduce(real *x, size_t n, const struct se3_comm *comm, struct se3_error *err) {
  if (!comm || n == 0) return 0;
  if (aborted(err)) return -1;
  if (!nc.comm || nc.of != comm) {
    se3_error_set(err, SE3_ERR_RUN, "the GPU has not joined these processes' NCCL communicator (join)");
    return -1;
  }
  ncclResult_t r = ncclAllReduce(x, x, n, ncclFloat, ncclSum, nc.comm, cu_stream());
  if (r != ncclSuccess) return nccl_fail(r, "ncclAllReduce", err);
  pend_add(cu_stream(), "the all-reduce of the gradient (%zu values)", n);
  return 0;
}

int cu_allreduce_f64(double *x, size_t n, struct se3_error *err) {
  if (n == 0) return 0;
  if (aborted(err)) return -1;
  if (!nc.comm) {
    se3_error_set(err, SE3_ERR_RUN, "the GPU has not joined the processes' NCCL communicator (join)");
    return -1;
  }
  ncclResult_t r = ncclAllReduce(x, x, n, ncclDouble, ncclSum, nc.comm, cu_stream());
  if (r != ncclSuccess) return nccl_fail(r, "ncclAllReduce (doubles)", err);
  pend_add(cu_stream(), "the all-reduce of %zu double%s (a step's loss, or a sharded gradient's sum of squares)", n,
           n == 1 ? "" : "s");
  return 0;
}

int cu_collectives_recorded(void) {
  int n = pend.recorded;
  pend.recorded = 0;
  return n;
}

void cu_collectives_replayed(int n) {
  pend_add(cu_stream(), "a recorded training step's %d collective%s", n, n == 1 ? "" : "s");
}

/* comm.h's slices: ceil(n / size) reals a process, the last shorter or
 * empty. NCCL's reduce-scatter and all-gather take equal pieces, so they
 * run on a copy padded to size pieces (scratch). */
struct slices {
  size_t per, lo, hi;
  real *pad, *mine; /* size * per, per */
};

static int carve_slices(struct slices *s, size_t n, struct se3_error *err) {
  if (aborted(err)) return -1;
  if (!nc.comm) {
    se3_error_set(err, SE3_ERR_RUN, "the GPU has not joined the processes' NCCL communicator (join)");
    return -1;
  }
  s->per = (n + (size_t)nc.size - 1) / (size_t)nc.size;
  s->lo = (size_t)nc.rank * s->per < n ? (size_t)nc.rank * s->per : n;
  s->hi = s->lo + s->per < n ? s->lo + s->per : n;
  size_t a = cu_round((size_t)nc.size * s->per * sizeof(real)), b = cu_round(s->per * sizeof(real));
  char *p = (char *)cu_scratch(CU_SCRATCH_OP, a + b);
  if (!p) {
    se3_error_set(err, SE3_ERR_MEMORY, "out of GPU memory for the collectives' %zu bytes", a + b);
    return -1;
  }
  s->pad = (real *)cu_carve(&p, a);
  s->mine = (real *)cu_carve(&p, b);
  return 0;
}

int cu_reduce_scatter(real *x, size_t n, struct se3_error *err) {
  struct slices s;
  if (n == 0) return 0;
  if (carve_slices(&s, n, err)) return -1;
  cudaStream_t q = cu_stream();
  size_t all = (size_t)nc.size * s.per;
  CU_CHECK(cudaMemcpyAsync(s.pad, x, n * sizeof(real), cudaMemcpyDeviceToDevice, q));
  if (all > n) CU_CHECK(cudaMemsetAsync(s.pad + n, 0, (all - n) * sizeof(real), q));
  ncclResult_t r = ncclReduceScatter(s.pad, s.mine, s.per, ncclFloat, ncclSum, nc.comm, q);
  if (r != ncclSuccess) return nccl_fail(r, "ncclReduceScatter", err);
  pend_add(q, "the reduce-scatter (%zu values)", n);
  if (s.hi > s.lo)
    CU_CHECK(cudaMemcpyAsync(x + s.lo, s.mine, (s.hi - s.lo) * sizeof(real), cudaMemcpyDeviceToDevice, q));
  return 0;
}

int cu_allgather(real *x, size_t n, struct se3_error *err) {
  struct slices s;
  if (n == 0) return 0;
  if (carve_slices(&s, n, err)) return -1;
  cudaStream_t q = cu_stream();
  if (s.hi > s.lo)
    CU_CHECK(cudaMemcpyAsync(s.mine, x + s.lo, (s.hi - s.lo) * sizeof(real), cudaMemcpyDeviceToDevice, q));
  if (s.per > s.hi - s.lo)
    CU_CHECK(cudaMemsetAsync(s.mine + (s.hi - s.lo), 0, (s.per - (s.hi - s.lo)) * sizeof(real), q));
  ncclResult_t r = ncclAllGather(s.mine, s.pad, s.per, ncclFloat, nc.comm, q);
  if (r != ncclSuccess) return nccl_fail(r, "ncclAllGather", err);
  pend_add(q, "the all-gather (%zu values)", n);
  CU_CHECK(cudaMemcpyAsync(x, s.pad, n * sizeof(real), cudaMemcpyDeviceToDevice, q));
  return 0;
}

/* The gradient's buckets: each sum on a stream of its own (created with
 * the first), started when an event recorded on the backend's stream says
 * the backward has finished the bucket; the backward of the layers below
 * goes on meanwhile (it writes none of a finished bucket). sum_wait makes
 * the backend's stream wait for the last sum queued. The communicator's
 * calls are on one stream, so the buckets run in the order started, the
 * same on every process. */
static struct {
  cudaStream_t stream;
  cudaEvent_t ready, done;
} bk;

int cu_sum_start(real *x, size_t n, struct se3_error *err) {
  if (n == 0) return 0;
  if (aborted(err)) return -1;
  if (!nc.comm) {
    se3_error_set(err, SE3_ERR_RUN, "the GPU has not joined the processes' NCCL communicator (join)");
    return -1;
  }
  if (!bk.stream && (CU_CHECK(cudaStreamCreateWithFlags(&bk.stream, cudaStreamNonBlocking)) ||
                     CU_CHECK(cudaEventCreateWithFlags(&bk.ready, cudaEventDisableTiming)) ||
                     CU_CHECK(cudaEventCreateWithFlags(&bk.done, cudaEventDisableTiming)))) {
    se3_error_set(err, SE3_ERR_MODEL, "CUDA could not make a stream and events for the gradient's sums");
    return -1;
  }
  if (CU_CHECK(cudaEventRecord(bk.ready, cu_stream())) || CU_CHECK(cudaStreamWaitEvent(bk.stream, bk.ready, 0))) {
    se3_error_set(err, SE3_ERR_MODEL, "CUDA failed ordering a gradient bucket's sum after its backward");
    return -1;
  }
  ncclResult_t r = ncclAllReduce(x, x, n, ncclFloat, ncclSum, nc.comm, bk.stream);
  if (r != ncclSuccess) return nccl_fail(r, "ncclAllReduce (a gradient bucket)", err);
  pend_add(bk.stream, "the all-reduce of gradient bucket %d (%zu values)", pend.buckets++, n);
  return 0;
}

int cu_sum_wait(struct se3_error *err) {
  pend.buckets = 0; /* (the next step's buckets count from 0) */
  if (!bk.stream) return 0;
  if (CU_CHECK(cudaEventRecord(bk.done, bk.stream)) || CU_CHECK(cudaStreamWaitEvent(cu_stream(), bk.done, 0))) {
    se3_error_set(err, SE3_ERR_MODEL, "CUDA failed ordering the update after the gradient's sums");
    return -1;
  }
  return 0;
}

void cu_collectives_shutdown(void) {
  /* what is queued finishes, or the communicator is aborted: no hang at exit */
  struct se3_error err;
  if (nc.comm &&
      ((bk.stream && polled_wait(bk.stream, NULL, &err)) || (nc.comm && polled_wait(cu_stream(), NULL, &err))))
    fprintf(stderr, "se3screen: at exit, %s\n", err.message);
  if (bk.stream) {
    (void)cudaEventDestroy(bk.ready);
    (void)cudaEventDestroy(bk.done);
    (void)cudaStreamDestroy(bk.stream);
    bk.stream = NULL;
  }
  if (nc.comm) (void)ncclCommDestroy(nc.comm);
  nc.comm = NULL;
  for (; pend.made > 0; pend.made--)
    (void)cudaEventDestroy(pend.ev[pend.made - 1]);
  pend.n = 0;
}

#else /* no NCCL in this build */

int cu_wait(cudaStream_t s, const cudaEvent_t *ev, const char *file, int line) { return plain_wait(s, ev, file, line); }

int cu_allreduce(real *x, size_t n, const struct se3_comm *comm, struct se3_error *err) {
  (void)x;
  (void)n;
  if (!comm) return 0;
  se3_error_set(err, SE3_ERR_MODEL, "this CUDA backend was built without NCCL");
  return -1;
}

void cu_collectives_shutdown(void) {}
int cu_collectives_recorded(void) { return 0; }
void cu_collectives_replayed(int n) { (void)n; }

#endif
