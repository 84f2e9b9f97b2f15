/* runner_chunks.c — a stage's chunks (pipeline/runner_chunks.h): which are
 * this process's and not yet done, each one done in its own transaction
 * with its ledger row, the lockstep of the processes of a data-parallel
 * run, and the summary line. runner.c calls it; it calls ledger.c and
 * runner_util.c, nothing above them. */
#define _GNU_SOURCE
#include "pipeline/runner_chunks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/config.h"
#include "pipeline/ledger.h"
#include "pipeline/progress.h"
#include "stages/stage.h"

/* A run_chunks in progress: its job, the chunks done (done[c]) and what
 * is left of them, its progress line's label, and its totals. */
struct chunk_run {
  struct run *r;
  struct chunk_job j;
  int speaks; /* shows the progress (rank 0) */
  char *done;
  int64_t done_items, todo, all_todo; /* all_todo: of every process sharing the stage */
  char label[96];
  char round_src[32];
  int64_t ok_total, rej_total;
};

int run_any_needed(const struct stage_ctx *ctx, int64_t n_chunks) {
  for (int64_t c = 0; ctx->chunk_needed && c < n_chunks; c++)
    if (ctx->chunk_needed[c]) return 1;
  return 0;
}

/* Chunk c of stage s in its own transaction with its ledger row (under
 * hash, for this shard, in the ledger's round round_src): the stage's
 * run_chunk, the row, COMMIT. Anything but STAGE_OK rolls it back, with
 * *n_ok and *n_rej 0. STAGE_OK, STAGE_STOPPED or STAGE_ERROR (r->err says
 * why where the stage or the database did). */
static int one_chunk(struct run *r, const struct chunk_job *j, int64_t c, const char *round_src, int64_t *n_ok,
                     int64_t *n_rej) {
  const struct stage *s = j->s;
  struct stage_ctx *ctx = j->ctx;
  char started[32];
  run_now_iso(started, sizeof started);
  int st = run_exec(r, "BEGIN IMMEDIATE") ? STAGE_ERROR : STAGE_OK;
  ctx->chunk_bytes = 0;
  if (st == STAGE_OK) {
    st = s->run_chunk(ctx, c, n_ok, n_rej);
    if (st == STAGE_ERROR) run_stage_failed(r, &ctx->err, "%s: chunk %lld", s->name, (long long)c);
  }
  if (st == STAGE_OK &&
      (ledger_write_chunk(r, s->name, c, j->shard, j->hash, started, *n_ok, *n_rej, ctx->chunk_bytes, round_src) ||
       run_exec(r, "COMMIT")))
    st = STAGE_ERROR;
  if (st != STAGE_OK) {
    sqlite3_exec(r->st.db, "ROLLBACK", NULL, NULL, NULL);
    *n_ok = *n_rej = 0;
  }
  return st;
}

/* The first chunk from c on that is this process's and not done (n_chunks
 * for none). */
static int64_t next_chunk(const struct chunk_run *cr, int64_t c) {
  while (c < cr->j.n_chunks && (c % cr->j.n_shards != cr->j.shard || cr->done[c]))
    c++;
  return c;
}

/* Which chunks are done (the ledger, or a keyed stage's plan), how many are
 * this process's to do, and of every process's (the processes of a
 * data-parallel run agree on the sum). 0, or -1 with r->err set (a failed
 * read of the ledger must stop the stage: taken as "nothing done", it
 * would redo, and store twice, every finished chunk). */
static int count_todo(struct chunk_run *cr) {
  const struct chunk_job *j = &cr->j;
  cr->done = calloc((size_t)j->n_chunks + 1, 1);
  if (!cr->done) {
    se3_error_set(&cr->r->err, SE3_ERR_RUN, "%s: out of memory for the ledger of %lld chunks", j->s->name,
                  (long long)j->n_chunks);
    return -1;
  }
  if (ledger_chunks_done(cr->r, j->s, j->ctx, j->hash, j->n_chunks, j->together, cr->done, &cr->done_items)) return -1;
  for (int64_t c = next_chunk(cr, 0); c < j->n_chunks; c = next_chunk(cr, c + 1))
    cr->todo++;
  cr->all_todo = cr->todo;
  if (j->together) {
    double t = (double)cr->todo;
    if (comm_sum_f64(j->together, &t, 1)) {
      fprintf(stderr, "se3screen (rank %d): %s: MPI failed counting the chunks; ending the run\n",
              comm_rank(j->together), j->s->name);
      comm_abort(j->together, SE3_EXIT_FAILED);
    }
    cr->all_todo = (int64_t)t;
  }
  return 0;
}

/* The progress line begun (rank 0), with a line where there is nothing to
 * do; and the ledger's round (active learning): the newest round decided,
 * read again as each chunk commits (acquire decides one in its chunk); a
 * shard's own database has none, so it takes screen.db's. */
static void announce(struct chunk_run *cr) {
  const struct chunk_job *j = &cr->j;
  struct run *r = cr->r;
  int sharded = j->n_shards > 1 && !j->together; /* an array's task, or --shard */
  int64_t shard_items = j->n_items;
  if (sharded) shard_items = cr->done_items + (j->n_chunks ? (j->n_items / j->n_chunks) * cr->todo : 0);
  if (sharded)
    snprintf(cr->label, sizeof cr->label, "%s (shard %d/%d)", j->s->name, j->shard, j->n_shards);
  else if (j->together)
    snprintf(cr->label, sizeof cr->label, "%s (%d processes)", j->s->name, j->n_shards);
  else
    snprintf(cr->label, sizeof cr->label, "%s", j->s->name);
  if (cr->speaks) {
    progress_start(&r->prog, progress_mode_parse(cfg_str(r->root, "run.progress")),
                   cfg_float(r->root, "run.progress_interval_s"), cr->label, j->s->show.unit ? j->s->show.unit : "mol",
                   shard_items, cr->done_items);
    if (sharded && j->shard >= j->n_chunks)
      /* an array task beyond the stage's last chunk (slurm.array_size above the chunks) */
      progress_log(&r->prog,
                   "%s: no chunk for this task: the stage has %lld chunk%s and %d tasks share it (task %d takes "
                   "chunks %d, %d, ...); nothing to do",
                   cr->label, (long long)j->n_chunks, j->n_chunks == 1 ? "" : "s", j->n_shards, j->shard, j->shard,
                   j->shard + j->n_shards);
    else if (cr->all_todo == 0 && j->n_chunks > 0 && j->ctx->chunk_needed && !run_any_needed(j->ctx, j->n_chunks))
      progress_log(&r->prog, "%s: nothing to do, no molecule new or changed since its last run (%lld molecules)",
                   cr->label, (long long)cr->done_items);
    else if (cr->all_todo == 0 && j->n_chunks > 0)
      progress_log(&r->prog, "%s: nothing to do, all %lld chunks%s are done (%lld records)", cr->label,
                   (long long)j->n_chunks, sharded ? " of this shard" : "", (long long)cr->done_items);
  }
  snprintf(cr->round_src, sizeof cr->round_src, "NULL");
  if (strcmp(r->src, "main")) {
    long long rs = run_query_int(r->st.db, -1, "SELECT max(round) FROM \"%w\".rounds", r->src);
    if (rs >= 0) snprintf(cr->round_src, sizeof cr->round_src, "%lld", rs);
  }
}

/* This process's turn: its next chunk from c on done, unless a signal came
 * (in a data-parallel run, one with nothing left still stops the others).
 * Its molecules into *n, whether it stopped into *stopped; the chunk to
 * look on from next. */
static int64_t take_turn(struct chunk_run *cr, int64_t c, int64_t *n, int *stopped) {
  c = next_chunk(cr, c);
  int64_t n_ok = 0, n_rej = 0;
  *stopped = cr->j.together && run_stop_flag;
  if (c < cr->j.n_chunks && run_stop_flag) {
    *stopped = 1;
  } else if (c < cr->j.n_chunks) {
    int st = one_chunk(cr->r, &cr->j, c, cr->round_src, &n_ok, &n_rej);
    if (st != STAGE_OK) {
      *stopped = st == STAGE_STOPPED;
    } else {
      cr->done[c] = 1;
      cr->ok_total += n_ok;
      cr->rej_total += n_rej;
      c++;
    }
  }
  *n = n_ok + n_rej;
  return c;
}

/* The word the processes of a data-parallel run have after each turn: the
 * molecules each did (rank 0's progress counts them all), a signal seen,
 * a failure, work left; so a signal or a failure on any one stops all.
 * Whether to stop, with *ret set where the run stops short. */
static int agree(struct chunk_run *cr, int64_t c, int64_t n, int stopped, int failed, int *ret) {
  const struct chunk_job *j = &cr->j;
  double word[4] = {(double)n, stopped, failed, next_chunk(cr, c) < j->n_chunks && !stopped && !failed};
  if (comm_sum_f64(j->together, word, 4)) {
    /* the others may wait in this sum for ever */
    fprintf(stderr, "se3screen (rank %d): %s: MPI failed between two chunks; ending the run\n", comm_rank(j->together),
            j->s->name);
    comm_abort(j->together, SE3_EXIT_FAILED);
  }
  if (cr->speaks) progress_add(&cr->r->prog, (int64_t)word[0] - n);
  if (word[2] > 0) {
    if (!failed)
      se3_error_set(&cr->r->err, SE3_ERR_RUN,
                    "%s: another process of the run failed (its message is above); this one "
                    "stopped after its chunk in flight",
                    j->s->name);
    *ret = SE3_EXIT_FAILED;
    return 1;
  }
  if (word[1] > 0) {
    *ret = SE3_EXIT_STOPPED;
    return 1;
  }
  return word[3] == 0;
}

/* The chunks, a turn at a time, until none is left, a signal or a failure
 * (in a data-parallel run, on any process: agree). An SE3_EXIT_* status. */
static int take_turns(struct chunk_run *cr) {
  struct run *r = cr->r;
  int ret = SE3_EXIT_OK;
  int64_t c = 0;
  while (cr->all_todo > 0) {
    int64_t n;
    int stopped;
    c = take_turn(cr, c, &n, &stopped);
    int failed = r->err.message[0] != 0;
    if (failed && !cr->speaks)
      fprintf(stderr, "se3screen (rank %d): %s\n", comm_rank(cr->j.together), se3_error_str(&r->err).s);
    if (cr->j.together) {
      if (agree(cr, c, n, stopped, failed, &ret)) break;
      continue;
    }
    if (stopped) ret = SE3_EXIT_STOPPED;
    if (failed) ret = SE3_EXIT_FAILED;
    if (stopped || failed || c >= cr->j.n_chunks) break;
  }
  return ret;
}

/* The progress line ended (rank 0, where there was work) with what this
 * run stored and how it ended. */
static void summarize(struct chunk_run *cr, int ret) {
  struct run *r = cr->r;
  if (!cr->speaks) return;
  /* a stage that ends its items one by one (item_finished) keeps each as
   * it ends, a chunk cut short or not: those are what this run stored
   * (the ledger's counts of a chunk resumed hold earlier runs' too) */
  if (r->prog.items_ok + r->prog.items_rejected > 0) {
    cr->ok_total = r->prog.items_ok;
    cr->rej_total = r->prog.items_rejected;
  }
  char summary[256];
  snprintf(summary, sizeof summary, "%lld %s, %lld rejected%s%s", (long long)cr->ok_total,
           cr->j.s->show.done ? cr->j.s->show.done : "stored", (long long)cr->rej_total,
           cr->j.together ? " by this process" : "",
           ret == SE3_EXIT_STOPPED ? "; stopped by a signal (run again to resume)" : "");
  if (cr->all_todo > 0) progress_end(&r->prog, summary);
}

int run_chunks(struct run *r, const struct chunk_job *job) {
  struct chunk_run cr = {.r = r, .j = *job, .speaks = comm_rank(job->together) == 0};
  if (count_todo(&cr)) {
    free(cr.done);
    return SE3_EXIT_FAILED;
  }
  announce(&cr);
  int ret = take_turns(&cr);
  free(cr.done);
  summarize(&cr, ret);
  return ret;
}
