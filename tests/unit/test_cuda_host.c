/* The CUDA backend's decisions that need no GPU, on the CPU:
 * - which GPU a process takes (models/cuda/table.h's nn_cuda_pick, and
 *   models/device.h's parse of `device:` into by rank or by index): the
 *   node-local rank modulo the GPUs a process sees, so under Slurm's
 *   --gpus-per-task=1 every rank takes its one GPU, cuda:0; an explicit
 *   cuda:N stays N;
 * - the wait that does not hang on a dead NCCL peer (models/cuda/poll.h),
 *   driven by fakes: done at once, done after many polls, an asynchronous
 *   error, a failed query, never done (the deadline, on a fake clock and on
 *   the real one), and the deadline's environment variable.
 * dev/cuda_emu (`devices`, dev/cuda_emu/devices.c) opens the emulated GPUs themselves. */
#include <criterion/criterion.h>
#include <string.h>

#include "models/cuda/poll.h"
#include "models/cuda/table.h"
#include "models/device.h"

/* ---- the GPU a process takes ---- */

Test(cuda_pick, by_rank_is_the_local_rank_modulo_the_gpus_seen) {
  /* one GPU seen (--gpus-per-task=1, CUDA_VISIBLE_DEVICES per rank): always cuda:0 */
  for (int rank = 0; rank < 8; rank++)
    cr_expect_eq(nn_cuda_pick(rank, 1, 1), 0, "local rank %d, 1 GPU seen: cuda:%d", rank, nn_cuda_pick(rank, 1, 1));
  /* the node's GPUs all seen: rank r takes GPU r */
  for (int rank = 0; rank < 4; rank++)
    cr_expect_eq(nn_cuda_pick(rank, 1, 4), rank);
  /* two GPUs seen by each of four ranks: around again */
  cr_expect_eq(nn_cuda_pick(2, 1, 2), 0);
  cr_expect_eq(nn_cuda_pick(3, 1, 2), 1);
}

Test(cuda_pick, an_explicit_index_stays_itself) {
  /* cuda:1 with one GPU stays 1 (the backend refuses it, naming what it found) */
  cr_expect_eq(nn_cuda_pick(1, 0, 1), 1);
  cr_expect_eq(nn_cuda_pick(5, 0, 8), 5);
  cr_expect_eq(nn_cuda_pick(0, 0, 2), 0);
  /* no GPU seen: left for the backend's "no GPU" message */
  cr_expect_eq(nn_cuda_pick(3, 1, 0), 3);
}

Test(cuda_pick, device_words_say_by_rank_or_by_index) {
  struct nn_device d;
  struct se3_error err;
  cr_assert_eq(nn_device_parse("cuda", &d, &err), 0);
  cr_expect(d.cuda && d.by_rank && d.index == 0 && !d.any, "cuda: by rank, local rank 0 until the caller sets it");
  cr_assert_eq(nn_device_parse("auto", &d, &err), 0);
  cr_expect(d.cuda && d.by_rank && d.any, "auto: by rank, the CPU when no GPU can be used");
  cr_assert_eq(nn_device_parse("cuda:1", &d, &err), 0);
  cr_expect(d.cuda && !d.by_rank && d.index == 1, "cuda:1: GPU 1 exactly");
  cr_assert_eq(nn_device_parse("cuda:0", &d, &err), 0);
  cr_expect(d.cuda && !d.by_rank && d.index == 0);
  cr_assert_eq(nn_device_parse("cpu", &d, &err), 0);
  cr_expect(!d.cuda && !d.by_rank);
}

/* ---- the polled wait ---- */

struct fake {
  long done_after;  /* polls answered "not yet" before "done"; -1: never done */
  long error_at;    /* the poll from which NCCL reports an asynchronous error; -1: none */
  long fail_at;     /* the poll at which the query fails; -1: never */
  double step;      /* the fake clock's seconds between two polls */
  long polls, asked, described, aborts, paused;
  double t;
};

static int f_done(void *ctx, char *msg, size_t len) {
  struct fake *f = ctx;
  long k = f->polls++;
  if (f->fail_at >= 0 && k >= f->fail_at) {
    snprintf(msg, len, "CUDA error: an illegal memory access was encountered (cudaErrorIllegalAddress)");
    return -1;
  }
  return f->done_after >= 0 && k >= f->done_after ? 0 : 1;
}

static int f_async(void *ctx, char *msg, size_t len) {
  struct fake *f = ctx;
  long k = f->asked++;
  if (f->error_at >= 0 && k >= f->error_at) {
    snprintf(msg, len, "remote process exited or there was a network error: peer 0 closed the connection");
    return -1;
  }
  return 0;
}

static void f_describe(void *ctx, char *buf, size_t len) {
  struct fake *f = ctx;
  f->described++;
  snprintf(buf, len, "the all-reduce of gradient bucket 3 (4096 values)");
}

static void f_abort(void *ctx) { ((struct fake *)ctx)->aborts++; }
static double f_now(void *ctx) { return ((struct fake *)ctx)->t; }
static void f_pause(void *ctx, long polls) {
  struct fake *f = ctx;
  (void)polls;
  f->paused++;
  f->t += f->step;
}

static struct cu_poll fake_poll(struct fake *f, double timeout_s) {
  struct cu_poll p;
  memset(&p, 0, sizeof p);
  p.done = f_done;
  p.async_error = f_async;
  p.describe = f_describe;
  p.abort = f_abort;
  p.now = f_now;
  p.pause = f_pause;
  p.ctx = f;
  p.timeout_s = timeout_s;
  p.rank = 1;
  p.size = 2;
  return p;
}

Test(cuda_poll, done_at_once) {
  struct fake f = {.done_after = 0, .error_at = -1, .fail_at = -1, .step = 0.001};
  struct cu_poll p = fake_poll(&f, 600);
  struct se3_error err;
  se3_error_clear(&err);
  cr_assert_eq(cu_poll_wait(&p, &err), 0);
  cr_expect_eq(f.polls, 1);
  cr_expect_eq(f.paused, 0, "no pause when the work is done at the first poll");
  cr_expect_eq(f.aborts + f.described, 0);
  cr_expect_eq(err.kind, SE3_ERR_NONE, "no message on success");
}

Test(cuda_poll, done_after_many_polls) {
  /* 5,000 polls, 5 s on the fake clock: within the deadline */
  struct fake f = {.done_after = 5000, .error_at = -1, .fail_at = -1, .step = 0.001};
  struct cu_poll p = fake_poll(&f, 600);
  struct se3_error err;
  cr_assert_eq(cu_poll_wait(&p, &err), 0);
  cr_expect_eq(f.polls, 5001);
  cr_expect_eq(f.asked, 5000, "NCCL's asynchronous error asked after each unfinished poll");
  cr_expect_eq(f.aborts, 0);
}

Test(cuda_poll, an_asynchronous_error_aborts_and_names_the_collective) {
  struct fake f = {.done_after = -1, .error_at = 7, .fail_at = -1, .step = 0.001};
  struct cu_poll p = fake_poll(&f, 600);
  struct se3_error err;
  cr_assert_eq(cu_poll_wait(&p, &err), -1);
  cr_expect_eq(f.asked, 8, "stopped at the first error (asked %ld times)", f.asked);
  cr_expect_eq(f.aborts, 1, "the communicator aborted once (%ld)", f.aborts);
  cr_expect_str_eq(se3_error_str(&err).s,
                   "NCCL failed in the all-reduce of gradient bucket 3 (4096 values) on rank 1 of 2: remote process "
                   "exited or there was a network error: peer 0 closed the connection (the communicator was aborted)");
}

Test(cuda_poll, never_done_times_out_and_aborts) {
  /* a fake clock at 10 ms a poll, a 2 s deadline: about 200 polls */
  struct fake f = {.done_after = -1, .error_at = -1, .fail_at = -1, .step = 0.01};
  struct cu_poll p = fake_poll(&f, 2);
  struct se3_error err;
  cr_assert_eq(cu_poll_wait(&p, &err), -1);
  cr_expect(f.t >= 2 && f.t < 2.02, "gave up at %g s on the fake clock, the deadline being 2 s", f.t);
  cr_expect(f.polls >= 200 && f.polls <= 202, "%ld polls", f.polls);
  cr_expect_eq(f.aborts, 1);
  cr_expect_str_eq(se3_error_str(&err).s,
                   "the all-reduce of gradient bucket 3 (4096 values) on rank 1 of 2 did not finish within 2 s "
                   "(SE3_NCCL_TIMEOUT): another process may have died or stopped; the communicator was aborted");
}

Test(cuda_poll, a_failed_query_is_reported_without_abort) {
  struct fake f = {.done_after = -1, .error_at = -1, .fail_at = 3, .step = 0.001};
  struct cu_poll p = fake_poll(&f, 600);
  struct se3_error err;
  cr_assert_eq(cu_poll_wait(&p, &err), -1);
  cr_expect_eq(f.aborts, 0, "a CUDA error is the GPU's, not the communicator's");
  cr_expect_str_eq(se3_error_str(&err).s,
                   "waiting for the all-reduce of gradient bucket 3 (4096 values) on rank 1 of 2: CUDA error: "
                   "an illegal memory access was encountered (cudaErrorIllegalAddress)");
}

Test(cuda_poll, without_an_error_query_only_the_deadline_ends_it) {
  struct fake f = {.done_after = -1, .error_at = 0, .fail_at = -1, .step = 0.25};
  struct cu_poll p = fake_poll(&f, 1);
  p.async_error = NULL;
  struct se3_error err;
  cr_assert_eq(cu_poll_wait(&p, &err), -1);
  cr_expect_eq(f.asked, 0);
  cr_expect(strstr(se3_error_str(&err).s, "did not finish within 1 s") != NULL, "%s", se3_error_str(&err).s);
}

Test(cuda_poll, the_real_clock_and_pause_keep_the_deadline) {
  struct fake f = {.done_after = -1, .error_at = -1, .fail_at = -1};
  struct cu_poll p = fake_poll(&f, 0.05);
  p.now = NULL;
  p.pause = NULL; /* CLOCK_MONOTONIC, and cu_poll_pause's yields then sleeps */
  struct se3_error err;
  double t0 = cu_poll_clock();
  cr_assert_eq(cu_poll_wait(&p, &err), -1);
  double took = cu_poll_clock() - t0;
  cr_expect(took >= 0.05 && took < 2, "a 0.05 s deadline took %g s", took);
  cr_expect_eq(f.aborts, 1);
  cr_expect(strstr(se3_error_str(&err).s, "did not finish within 0.05 s") != NULL, "%s", se3_error_str(&err).s);
}

Test(cuda_poll, the_deadline_from_the_environment) {
  cr_expect_eq(cu_poll_timeout(NULL), 600);
  cr_expect_eq(cu_poll_timeout(""), 600);
  cr_expect_eq(cu_poll_timeout("30"), 30);
  cr_expect_eq(cu_poll_timeout("0.5"), 0.5);
  cr_expect_eq(cu_poll_timeout("0"), -1);
  cr_expect_eq(cu_poll_timeout("-3"), -1);
  cr_expect_eq(cu_poll_timeout("ten"), -1);
  cr_expect_eq(cu_poll_timeout("10s"), -1);
  cr_expect_eq(cu_poll_timeout("nan"), -1);
}
