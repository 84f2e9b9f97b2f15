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
 * gradient through the host and comm.h instead. */
#include <stdio.h>
#include <string.h>

#include "models/cuda/cuda.h"

#ifdef SE3_HAVE_NCCL
#include <nccl.h>

static struct {
  ncclComm_t comm;
  const struct se3_comm *of; /* the processes it joins */
  int rank, size;
} nc;

static int nccl_fail(ncclResult_t r, const char *what, char *err, size_t errlen) {
  snprintf(err, errlen, "NCCL failed in %s: %s (NCCL_DEBUG=WARN in the environment says more)", what,
           ncclGetErrorString(r));
  return -1;
}

int cu_join(const struct se3_comm *comm, int rank, int size,
            int (*bcast)(const struct se3_comm *c, void *buf, size_t bytes), char *err, size_t errlen) {
  if (nc.comm && nc.of == comm) return 0;
  if (nc.comm) {
    snprintf(err, errlen, "this GPU's NCCL communicator already joins another group of processes");
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
    snprintf(err, errlen, "MPI failed sending NCCL's unique id from rank 0");
    return -1;
  }
  if (!msg.ok) {
    if (rank == 0) return nccl_fail(r, "ncclGetUniqueId", err, errlen);
    snprintf(err, errlen, "rank 0 could not start NCCL (its message is above)");
    return -1;
  }
  /* the device the backend opened (GPU = node-local rank) is current */
  if ((r = ncclCommInitRank(&nc.comm, size, msg.id, rank)) != ncclSuccess) {
    nc.comm = NULL;
    return nccl_fail(r, "ncclCommInitRank", err, errlen);
  }
  nc.of = comm;
  nc.rank = rank;
  nc.size = size;
  return 0;
}

int cu_allreduce(real *x, size_t n, const struct se3_comm *comm, char *err, size_t errlen) {
  if (!comm || n == 0) return 0;
  if (!nc.comm || nc.of != comm) {
    snprintf(err, errlen, "the GPU has not joined these processes' NCCL communicator (join)");
    return -1;
  }
  ncclResult_t r = ncclAllReduce(x, x, n, ncclFloat, ncclSum, nc.comm, cu_stream());
  return r == ncclSuccess ? 0 : nccl_fail(r, "ncclAllReduce", err, errlen);
}

/* comm.h's slices: ceil(n / size) reals a process, the last shorter or
 * empty. NCCL's reduce-scatter and all-gather take equal pieces, so they
 * run on a copy padded to size pieces (scratch). */
struct slices {
  size_t per, lo, hi;
  real *pad, *mine; /* size * per, per */
};

static int carve_slices(struct slices *s, size_t n, char *err, size_t errlen) {
  if (!nc.comm) {
    snprintf(err, errlen, "the GPU has not joined the processes' NCCL communicator (join)");
    return -1;
  }
  s->per = (n + (size_t)nc.size - 1) / (size_t)nc.size;
  s->lo = (size_t)nc.rank * s->per < n ? (size_t)nc.rank * s->per : n;
  s->hi = s->lo + s->per < n ? s->lo + s->per : n;
  size_t a = cu_round((size_t)nc.size * s->per * sizeof(real)), b = cu_round(s->per * sizeof(real));
  char *p = (char *)cu_scratch(CU_SCRATCH_OP, a + b);
  if (!p) {
    snprintf(err, errlen, "out of GPU memory for the collectives' %zu bytes", a + b);
    return -1;
  }
  s->pad = (real *)cu_carve(&p, a);
  s->mine = (real *)cu_carve(&p, b);
  return 0;
}

int cu_reduce_scatter(real *x, size_t n, char *err, size_t errlen) {
  struct slices s;
  if (n == 0) return 0;
  if (carve_slices(&s, n, err, errlen)) return -1;
  cudaStream_t q = cu_stream();
  size_t all = (size_t)nc.size * s.per;
  CU_CHECK(cudaMemcpyAsync(s.pad, x, n * sizeof(real), cudaMemcpyDeviceToDevice, q));
  if (all > n) CU_CHECK(cudaMemsetAsync(s.pad + n, 0, (all - n) * sizeof(real), q));
  ncclResult_t r = ncclReduceScatter(s.pad, s.mine, s.per, ncclFloat, ncclSum, nc.comm, q);
  if (r != ncclSuccess) return nccl_fail(r, "ncclReduceScatter", err, errlen);
  if (s.hi > s.lo)
    CU_CHECK(cudaMemcpyAsync(x + s.lo, s.mine, (s.hi - s.lo) * sizeof(real), cudaMemcpyDeviceToDevice, q));
  return 0;
}

int cu_allgather(real *x, size_t n, char *err, size_t errlen) {
  struct slices s;
  if (n == 0) return 0;
  if (carve_slices(&s, n, err, errlen)) return -1;
  cudaStream_t q = cu_stream();
  if (s.hi > s.lo)
    CU_CHECK(cudaMemcpyAsync(s.mine, x + s.lo, (s.hi - s.lo) * sizeof(real), cudaMemcpyDeviceToDevice, q));
  if (s.per > s.hi - s.lo)
    CU_CHECK(cudaMemsetAsync(s.mine + (s.hi - s.lo), 0, (s.per - (s.hi - s.lo)) * sizeof(real), q));
  ncclResult_t r = ncclAllGather(s.mine, s.pad, s.per, ncclFloat, nc.comm, q);
  if (r != ncclSuccess) return nccl_fail(r, "ncclAllGather", err, errlen);
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

int cu_sum_start(real *x, size_t n, char *err, size_t errlen) {
  if (n == 0) return 0;
  if (!nc.comm) {
    snprintf(err, errlen, "the GPU has not joined the processes' NCCL communicator (join)");
    return -1;
  }
  if (!bk.stream && (CU_CHECK(cudaStreamCreateWithFlags(&bk.stream, cudaStreamNonBlocking)) ||
                     CU_CHECK(cudaEventCreateWithFlags(&bk.ready, cudaEventDisableTiming)) ||
                     CU_CHECK(cudaEventCreateWithFlags(&bk.done, cudaEventDisableTiming)))) {
    snprintf(err, errlen, "CUDA could not make a stream and events for the gradient's sums");
    return -1;
  }
  if (CU_CHECK(cudaEventRecord(bk.ready, cu_stream())) || CU_CHECK(cudaStreamWaitEvent(bk.stream, bk.ready, 0))) {
    snprintf(err, errlen, "CUDA failed ordering a gradient bucket's sum after its backward");
    return -1;
  }
  ncclResult_t r = ncclAllReduce(x, x, n, ncclFloat, ncclSum, nc.comm, bk.stream);
  return r == ncclSuccess ? 0 : nccl_fail(r, "ncclAllReduce (a gradient bucket)", err, errlen);
}

int cu_sum_wait(char *err, size_t errlen) {
  if (!bk.stream) return 0;
  if (CU_CHECK(cudaEventRecord(bk.done, bk.stream)) || CU_CHECK(cudaStreamWaitEvent(cu_stream(), bk.done, 0))) {
    snprintf(err, errlen, "CUDA failed ordering the update after the gradient's sums");
    return -1;
  }
  return 0;
}

void cu_collectives_shutdown(void) {
  if (bk.stream) {
    (void)cudaStreamSynchronize(bk.stream);
    (void)cudaEventDestroy(bk.ready);
    (void)cudaEventDestroy(bk.done);
    (void)cudaStreamDestroy(bk.stream);
    bk.stream = NULL;
  }
  if (nc.comm) (void)ncclCommDestroy(nc.comm);
  nc.comm = NULL;
}

#else /* no NCCL in this build */

int cu_allreduce(real *x, size_t n, const struct se3_comm *comm, char *err, size_t errlen) {
  (void)x;
  (void)n;
  if (!comm) return 0;
  snprintf(err, errlen, "this CUDA backend was built without NCCL");
  return -1;
}

void cu_collectives_shutdown(void) {}

#endif
