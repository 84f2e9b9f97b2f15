/* The emulator's NCCL (dev/cuda_emu/run.sh): what models/cuda/collectives.cu
 * calls, over MPI. Each emulated GPU is a process (mpirun -np N, or one
 * process joined alone with SE3_COMM=mpi); a communicator is the MPI
 * processes that pass the same unique id to ncclCommInitRank (an
 * MPI_Comm_split by the id), so an id that did not reach every rank shows
 * as a communicator of the wrong size. A collective is queued on its
 * stream like a kernel (inc/cuda_runtime.h's queues) and runs as MPI's
 * non-blocking collective once the stream reaches it: the stream's later
 * work, and anything waiting on an event after it, waits until every peer
 * has taken part, as on a GPU, while the host goes on. Inside a stream
 * capture (NCCL >= 2.9 allows it) the collective is recorded; each replay
 * of the graph queues it afresh, where the graph's launch queues it.
 *
 * Refused as NCCL refuses them: two ranks of one communicator on one GPU
 * (EMU_DEVICES=1 under mpirun -np 2), a size or rank that does not fit the
 * processes that share the id.
 *
 * Faults, for the failure paths (EMU_NCCL_FAULT=KIND:RANK[:N], on rank RANK,
 * at the N-th collective it queues, counting from 0, default 0; a graph's
 * replay queues its recorded collectives, and they count, at its launch):
 *   hang   the process stops for good where it would queue that
 *          collective (a peer that hung, or was stopped): its peers wait
 *          for it until their deadline
 *   error  the collective never runs, and ncclCommGetAsyncError reports
 *          ncclRemoteError once the stream reaches it: a failure NCCL
 *          noticed
 * ncclCommAbort ends the communicator's unfinished collectives (their
 * results are garbage, as on a GPU) so the streams drain. */
#ifndef SE3_CUDA_EMU_NCCL_H
#define SE3_CUDA_EMU_NCCL_H
#define OMPI_SKIP_MPICXX 1 /* (MPI's C API alone) */
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <unistd.h>

#include "cuda_runtime.h"

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7
} ncclResult_t;
typedef enum { ncclSum = 0 } ncclRedOp_t;
typedef enum { ncclFloat32 = 7, ncclFloat = 7, ncclFloat64 = 8, ncclDouble = 8 } ncclDataType_t;
typedef struct {
  char internal[128];
} ncclUniqueId;

struct emu_nccl_comm {
  MPI_Comm mpi;
  int rank, size;
  int aborted;
  ncclResult_t async; /* what ncclCommGetAsyncError says */
  long queued;        /* collectives queued so far (EMU_NCCL_FAULT counts them) */
  char last[256];     /* ncclGetLastError */
};
typedef emu_nccl_comm *ncclComm_t;

/* the message of the last failure outside a communicator */
inline char *emu_nccl_last() {
  static char m[256];
  return m;
}

inline const char *ncclGetErrorString(ncclResult_t r) {
  switch (r) {
  case ncclSuccess: return "no error";
  case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
  case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
  case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
  case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
  case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
  case ncclRemoteError: return "remote process exited or there was a network error";
  case ncclInProgress: return "NCCL operation in progress";
  }
  return "unknown result code";
}
inline const char *ncclGetLastError(ncclComm_t c) { return c ? c->last : emu_nccl_last(); }

inline ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  memset(id, 0, sizeof *id);
  memcpy(id->internal, "emu-nccl", 8);
  FILE *f = fopen("/dev/urandom", "rb");
  int got = f && fread(id->internal + 8, 1, 32, f) == 32;
  if (f) fclose(f);
  if (!got) {
    snprintf(emu_nccl_last(), 256, "emulated NCCL: could not read /dev/urandom for a unique id");
    return ncclSystemError;
  }
  return ncclSuccess;
}

/* EMU_NCCL_FAULT for this rank: 'h' (hang), 'e' (error) or 0, and at which collective. */
inline int emu_nccl_fault(int rank, long *at) {
  const char *v = getenv("EMU_NCCL_FAULT");
  if (!v || !*v) return 0;
  char kind[16];
  int r = -1;
  long n = 0;
  int k = sscanf(v, "%15[a-z]:%d:%ld", kind, &r, &n);
  if (k < 2 || (strcmp(kind, "hang") && strcmp(kind, "error")) || r < 0 || n < 0) {
    fprintf(stderr, "cuda_emu: EMU_NCCL_FAULT='%s' is not hang|error:RANK[:N]\n", v);
    abort();
  }
  *at = n;
  return r == rank ? kind[0] : 0;
}

inline ncclResult_t ncclCommInitRank(ncclComm_t *out, int nranks, ncclUniqueId id, int rank) {
  *out = NULL;
  int on = 0;
  MPI_Initialized(&on);
  if (!on) {
    snprintf(emu_nccl_last(), 256, "emulated NCCL: MPI is not running (mpirun, or SE3_COMM=mpi)");
    return ncclSystemError;
  }
  if (memcmp(id.internal, "emu-nccl", 8)) {
    snprintf(emu_nccl_last(), 256, "emulated NCCL: the unique id was not made by ncclGetUniqueId");
    return ncclInvalidArgument;
  }
  if (nranks < 1 || rank < 0 || rank >= nranks) {
    snprintf(emu_nccl_last(), 256, "emulated NCCL: rank %d of %d", rank, nranks);
    return ncclInvalidArgument;
  }
  unsigned h = 2166136261u; /* the id's FNV-1a hash: the processes given the same id group together */
  for (size_t i = 0; i < sizeof id.internal; i++)
    h = (h ^ (unsigned char)id.internal[i]) * 16777619u;
  MPI_Comm c;
  if (MPI_Comm_split(MPI_COMM_WORLD, (int)(h & 0x7fffffff), rank, &c) != MPI_SUCCESS) {
    snprintf(emu_nccl_last(), 256, "emulated NCCL: MPI_Comm_split failed");
    return ncclSystemError;
  }
  int size = 0, me = -1;
  MPI_Comm_size(c, &size);
  MPI_Comm_rank(c, &me);
  if (size != nranks || me != rank) {
    snprintf(emu_nccl_last(), 256,
             "emulated NCCL: %d processes share this id, %d were announced; this one is rank %d there, %d announced",
             size, nranks, me, rank);
    MPI_Comm_free(&c);
    return ncclInvalidUsage;
  }
  /* one GPU a rank: the host and device of each */
  struct {
    long host;
    int dev;
  } mine = {gethostid(), emu_current_device()}, all[64];
  if (size > 64) abort();
  MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, c);
  for (int i = 0; i < size; i++)
    for (int j = 0; j < i; j++)
      if (all[i].host == all[j].host && all[i].dev == all[j].dev) {
        snprintf(emu_nccl_last(), 256, "emulated NCCL: ranks %d and %d are both on GPU %d of one host (one GPU a rank)",
                 j, i, all[i].dev);
        MPI_Comm_free(&c);
        return ncclInvalidUsage;
      }
  *out = new emu_nccl_comm{c, rank, size, 0, ncclSuccess, 0, ""};
  return ncclSuccess;
}

/* The queue item of a collective (`start` begins MPI's non-blocking call
 * once the stream reaches it), counted for EMU_NCCL_FAULT: made when the
 * collective is queued, eagerly or by a graph's replay (a `hang` stops the
 * process here, on the host). */
inline std::function<int(int)> emu_nccl_item(ncclComm_t c, const char *what,
                                             std::function<int(MPI_Comm, MPI_Request *)> start, int replayed) {
  long at = 0;
  int fault = emu_nccl_fault(c->rank, &at);
  if (fault && c->queued != at) fault = 0;
  c->queued++;
  if (fault == 'h') {
    fprintf(stderr, "cuda_emu: EMU_NCCL_FAULT: rank %d stops for good at its collective %ld (%s%s)\n", c->rank, at,
            what, replayed ? ", queued by a graph's replay" : "");
    for (;;)
      pause();
  }
  auto req = std::make_shared<MPI_Request>(MPI_REQUEST_NULL);
  auto started = std::make_shared<int>(0);
  return [=](int block) {
    if (c->aborted) return 1; /* ncclCommAbort ended it */
    if (fault) {
      if (c->async == ncclSuccess) {
        c->async = ncclRemoteError;
        snprintf(c->last, sizeof c->last, "emulated NCCL (EMU_NCCL_FAULT): %s lost its peers", what);
      }
      if (block) /* a GPU's stream waits for ever: so does this, politely */
        for (;;) {
          sleep(1);
          if (c->aborted) return 1;
        }
      return 0;
    }
    if (!*started) {
      if (start(c->mpi, req.get()) != MPI_SUCCESS) {
        c->async = ncclSystemError;
        snprintf(c->last, sizeof c->last, "emulated NCCL: MPI refused %s", what);
        return 0;
      }
      *started = 1;
    }
    int done = 0;
    if (block) return (int)(MPI_Wait(req.get(), MPI_STATUS_IGNORE) == MPI_SUCCESS);
    MPI_Test(req.get(), &done, MPI_STATUS_IGNORE);
    return done;
  };
}
/* Queues a collective on stream s, or records it while s is capturing: a
 * replay makes a fresh item (its own request) from it. */
inline ncclResult_t emu_nccl_queue(ncclComm_t c, cudaStream_t s, const char *what,
                                   std::function<int(MPI_Comm, MPI_Request *)> start) {
  if (!c) return ncclInvalidArgument;
  emu_stream_check(s, what);
  if (emu_captured(s, what)) {
    emu_capture_op(s, [c, what, start]() { return emu_nccl_item(c, what, start, 1); });
    return ncclSuccess;
  }
  emu_enqueue(s, emu_nccl_item(c, what, start, 0));
  return ncclSuccess;
}

inline ncclResult_t ncclAllReduce(const void *send, void *recv, size_t n, ncclDataType_t t, ncclRedOp_t op,
                                  ncclComm_t c, cudaStream_t s) {
  if ((t != ncclFloat && t != ncclDouble) || op != ncclSum || n > (size_t)INT32_MAX) return ncclInvalidArgument;
  const MPI_Datatype type = t == ncclDouble ? MPI_DOUBLE : MPI_FLOAT;
  return emu_nccl_queue(c, s, "ncclAllReduce", [=](MPI_Comm m, MPI_Request *r) {
    return MPI_Iallreduce(send == recv ? MPI_IN_PLACE : send, recv, (int)n, type, MPI_SUM, m, r);
  });
}
/* rank r receives the sum of piece r (recvcount values) of every rank's send */
inline ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t recvcount, ncclDataType_t t,
                                      ncclRedOp_t op, ncclComm_t c, cudaStream_t s) {
  if (t != ncclFloat || op != ncclSum || recvcount > (size_t)INT32_MAX) return ncclInvalidArgument;
  if (c && (const char *)recv == (const char *)send + (size_t)c->rank * recvcount * sizeof(float)) {
    snprintf(c->last, sizeof c->last, "emulated NCCL: an in-place reduce-scatter (not emulated)");
    return ncclInvalidUsage;
  }
  return emu_nccl_queue(c, s, "ncclReduceScatter", [=](MPI_Comm m, MPI_Request *r) {
    return MPI_Ireduce_scatter_block(send, recv, (int)recvcount, MPI_FLOAT, MPI_SUM, m, r);
  });
}
/* every rank's sendcount values, in rank order, to every rank */
inline ncclResult_t ncclAllGather(const void *send, void *recv, size_t sendcount, ncclDataType_t t, ncclComm_t c,
                                  cudaStream_t s) {
  if (t != ncclFloat || sendcount > (size_t)INT32_MAX) return ncclInvalidArgument;
  if (c && (const char *)send == (const char *)recv + (size_t)c->rank * sendcount * sizeof(float)) {
    snprintf(c->last, sizeof c->last, "emulated NCCL: an in-place all-gather (not emulated)");
    return ncclInvalidUsage;
  }
  return emu_nccl_queue(c, s, "ncclAllGather", [=](MPI_Comm m, MPI_Request *r) {
    return MPI_Iallgather(send, (int)sendcount, MPI_FLOAT, recv, (int)sendcount, MPI_FLOAT, m, r);
  });
}

inline ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *r) {
  if (!c) return ncclInvalidArgument;
  *r = c->async;
  return ncclSuccess;
}
/* Ends the unfinished collectives (MPI's requests are left: nothing can
 * cancel a collective); the communicator stays allocated for the items
 * still queued, which now finish at once. */
inline ncclResult_t ncclCommAbort(ncclComm_t c) {
  if (!c) return ncclSuccess;
  c->aborted = 1;
  return ncclSuccess;
}
/* Waits for the communicator's queued collectives, then frees it. */
inline ncclResult_t ncclCommDestroy(ncclComm_t c) {
  if (!c) return ncclSuccess;
  emu_drain_all();
  int over = 0; /* (NCCL needs no MPI: a communicator may outlive MPI_Finalize) */
  MPI_Finalized(&over);
  if (!c->aborted && !over) MPI_Comm_free(&c->mpi);
  delete c;
  return ncclSuccess;
}
#endif
