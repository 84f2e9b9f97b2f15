/* poll.h — waiting for the GPU without hanging on a dead peer
 * (models/cuda/collectives.cu). A process whose NCCL peer died waits for
 * ever in cudaStreamSynchronize: the collective's kernel never ends. So
 * while a communicator is joined, a wait is this loop instead: it asks
 * whether the work is done (cudaStreamQuery, cudaEventQuery) and whether
 * NCCL has an asynchronous error (ncclCommGetAsyncError), until a deadline;
 * on an error or at the deadline it aborts the communicator (ncclCommAbort,
 * which ends NCCL's kernels on this GPU) and says which collective on which
 * rank failed or did not finish.
 *
 * Plain C without CUDA: the calls are function pointers, so a CPU test
 * (tests/unit/test_cuda_poll.c) drives the loop with fakes: done at once,
 * done after some polls, an asynchronous error, never done. Header-only
 * because the CUDA module links nothing of se3screen's libraries
 * (tests/gpu/module_symbols.sh). */
#ifndef SE3_CUDA_POLL_H
#define SE3_CUDA_POLL_H

#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "common/error.h"

/* The environment variable with the deadline in seconds, and its default:
 * a collective of a training step takes milliseconds; ten minutes covers a
 * peer that is slow to reach it (a checkpoint being written, a long
 * evaluation on rank 0) without leaving a dead job holding its GPUs long. */
#define CU_POLL_TIMEOUT_ENV "SE3_NCCL_TIMEOUT"
#define CU_POLL_TIMEOUT_DEFAULT 600.0

struct cu_poll {
  /* 0: done; 1: not yet; -1: failed (CUDA's message in msg) */
  int (*done)(void *ctx, char *msg, size_t len);
  /* 0: no asynchronous error; -1: one (NCCL's message in msg). NULL: none asked. */
  int (*async_error)(void *ctx, char *msg, size_t len);
  /* What is being waited for, when it fails: e.g. "the all-reduce of
   * gradient bucket 3 (of 5 started)". */
  void (*describe)(void *ctx, char *buf, size_t len);
  /* Called once on an asynchronous error or at the deadline (ncclCommAbort). */
  void (*abort)(void *ctx);
  /* Seconds on a monotonic clock; NULL: CLOCK_MONOTONIC. */
  double (*now)(void *ctx);
  /* Between two polls (the count so far); NULL: cu_poll_pause. */
  void (*pause)(void *ctx, long polls);
  void *ctx;
  double timeout_s; /* > 0 */
  int rank, size;   /* this process in the communicator, for the message */
};

static inline double cu_poll_clock(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The first polls only yield the core (a step's wait is usually short, and
 * a sleep would add its latency to every step); then 100 µs sleeps, so a
 * long wait costs a core nothing. */
static inline void cu_poll_pause(long polls) {
  if (polls < 256) {
    sched_yield();
    return;
  }
  struct timespec ts = {0, 100 * 1000};
  nanosleep(&ts, NULL);
}

/* The deadline from the environment's value v: CU_POLL_TIMEOUT_DEFAULT when
 * v is NULL or empty, the seconds it says when it is a number > 0, else -1
 * (the caller says so, naming the variable). */
static inline double cu_poll_timeout(const char *v) {
  if (!v || !*v) return CU_POLL_TIMEOUT_DEFAULT;
  char *end;
  double s = strtod(v, &end);
  return *end || !(s > 0) || s > 1e9 ? -1 : s;
}

/* Polls until done: 0. Otherwise -1 with a message in err: the work failed
 * (CUDA's words), NCCL reported an asynchronous error, or the deadline
 * passed; in the last two cases the communicator is aborted first. */
static inline int cu_poll_wait(const struct cu_poll *p, struct se3_error *err) {
  char msg[384] = "", what[192] = "";
  double t0 = p->now ? p->now(p->ctx) : cu_poll_clock();
  for (long polls = 0;; polls++) {
    int d = p->done(p->ctx, msg, sizeof msg);
    if (d == 0) return 0;
    if (d < 0) {
      p->describe(p->ctx, what, sizeof what);
      se3_error_set(err, SE3_ERR_MODEL, "waiting for %s on rank %d of %d: %s", what, p->rank, p->size, msg);
      return -1;
    }
    if (p->async_error && p->async_error(p->ctx, msg, sizeof msg)) {
      p->describe(p->ctx, what, sizeof what);
      p->abort(p->ctx);
      se3_error_set(err, SE3_ERR_MODEL, "NCCL failed in %s on rank %d of %d: %s (the communicator was aborted)", what,
                    p->rank, p->size, msg);
      return -1;
    }
    double t = p->now ? p->now(p->ctx) : cu_poll_clock();
    if (t - t0 >= p->timeout_s) {
      p->describe(p->ctx, what, sizeof what);
      p->abort(p->ctx);
      se3_error_set(err, SE3_ERR_MODEL,
                    "%s on rank %d of %d did not finish within %g s (" CU_POLL_TIMEOUT_ENV
                    "): another process may have died or stopped; the communicator was aborted",
                    what, p->rank, p->size, p->timeout_s);
      return -1;
    }
    if (p->pause)
      p->pause(p->ctx, polls);
    else
      cu_poll_pause(polls);
  }
}

#endif
