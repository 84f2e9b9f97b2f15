/* runner_chunks.h — a stage's chunks, one after another, each in its own
 * transaction with its ledger row (runner_chunks.c); for runner.c alone. */
#ifndef SE3_RUNNER_CHUNKS_H
#define SE3_RUNNER_CHUNKS_H

#include <stdint.h>

#include "pipeline/runner_internal.h"

/* What run_chunks is to do: stage s's chunks of its plan (n_chunks chunks,
 * n_items molecules) under the config hash `hash`; this process takes
 * those with chunk % n_shards == shard. together: the processes of a
 * data-parallel run sharing the stage (shard = rank, n_shards = size), or
 * NULL. */
struct chunk_job {
  const struct stage *s;
  struct stage_ctx *ctx;
  const char *hash;
  int64_t n_chunks, n_items;
  int shard, n_shards;
  const struct se3_comm *together;
};

/* This process's chunks of the job: those that the ledger does not list
 * as done, in increasing order, each in its own transaction with its
 * ledger row. The processes of a data-parallel run (together) go in step,
 * a chunk each and then a word with the others (molecules done, a signal
 * seen, a failure, work left), so a signal or a failure on any one stops
 * all after the chunk in flight, and rank 0's progress counts everyone's
 * molecules. A process of such a run that is not rank 0 also counts the
 * chunks screen.db ("src") lists under this hash as done. Returns
 * SE3_EXIT_OK, _STOPPED, or _FAILED with r->err set. */
int run_chunks(struct run *r, const struct chunk_job *job);

/* Whether a keyed stage's plan has a chunk with work (ctx->chunk_needed). */
int run_any_needed(const struct stage_ctx *ctx, int64_t n_chunks);

#endif
