/* ledger.c — the runner's own rows (pipeline/ledger.h). */
#define _GNU_SOURCE
#include "pipeline/ledger.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pipeline/config.h"
#include "pipeline/progress.h"
#include "pipeline/store.h"
#include "stages/stage.h"

int ledger_record_meta(struct run *r, const char *stage, int replace) {
  const struct run_opts *o = r->o;
  char abs[PATH_MAX];
  if (!realpath(o->workflow, abs)) snprintf(abs, sizeof abs, "%s", o->workflow);
  size_t len = 1;
  for (int i = 0; i < o->n_sets; i++)
    len += strlen(o->sets[i]) + 1;
  char *sets = calloc(len, 1);
  if (!sets) {
    snprintf(r->err, sizeof r->err, "out of memory");
    return -1;
  }
  for (int i = 0; i < o->n_sets; i++) {
    strcat(sets, o->sets[i]);
    strcat(sets, "\n");
  }
  char shard[32];
  snprintf(shard, sizeof shard, "%d/%d", r->shard, r->n_shards);
  int bad = run_exec(r,
                     "INSERT OR %s INTO meta VALUES('workflow',%Q),('name',%Q),('sets',%Q),('workdir',%Q),('shard',%Q),"
                     "('stage',%Q)",
                     replace ? "REPLACE" : "IGNORE", abs, cfg_str(r->root, "workflow"), sets, r->workdir, shard, stage);
  free(sets);
  return bad ? -1 : 0;
}

/* The run's row in `runs`, and its meta rows (ledger_record_meta): a run of
 * screen.db replaces those only once a stage has passed its checks
 * (run_stage), so that a run refused (`run --stage rank` of another
 * workflow) leaves what the report calls the workflow as it was; a
 * shard's database has them at once. 0, or -1 with r->err set. */
int ledger_record_run(struct run *r, const char *stage) {
  const struct run_opts *o = r->o;
  char abs[PATH_MAX];
  if (!realpath(o->workflow, abs)) snprintf(abs, sizeof abs, "%s", o->workflow);
  char shard[32];
  snprintf(shard, sizeof shard, "%d/%d", r->shard, r->n_shards);
  char when[32];
  run_now_iso(when, sizeof when);
  /* the Slurm job running this, for `status`: an array task as JOB_TASK */
  char job[64] = "";
  const char *aj = getenv("SLURM_ARRAY_JOB_ID"), *at = getenv("SLURM_ARRAY_TASK_ID"), *j = getenv("SLURM_JOB_ID");
  if (aj && *aj && at && *at)
    snprintf(job, sizeof job, "%s_%s", aj, at);
  else if (j && *j)
    snprintf(job, sizeof job, "%s", j);
  int bad = ledger_record_meta(r, stage, strcmp(r->src, "main") || r->n_shards > 1) ||
            run_exec(r,
                     "INSERT INTO runs(started,host,pid,command,workflow,shard,status,version,job) "
                     "VALUES(%Q,%Q,%d,%Q,%Q,%Q,'running',%Q,%Q)",
                     when, r->host, (int)getpid(), o->command_line ? o->command_line : "", abs,
                     r->n_shards > 1 ? shard : NULL, SE3_VERSION, job[0] ? job : NULL);
  if (bad) return -1;
  r->run_id = sqlite3_last_insert_rowid(r->st.db);
  return 0;
}

/* The run's row in `runs`: finished, with its exit status and message. A
 * failure to write it is said, not the run's, and leaves r->err (the
 * run's own failure, printed after this) as it was. */
void ledger_finish_run(struct run *r, int ret) {
  char when[32], err[512];
  run_now_iso(when, sizeof when);
  const char *status = ret == SE3_EXIT_OK ? "done" : ret == SE3_EXIT_STOPPED ? "stopped" : "failed";
  char *sql = sqlite3_mprintf("UPDATE runs SET finished=%Q, status=%Q, exit_code=%d, message=%Q WHERE id=%lld", when,
                              status, ret, r->err[0] ? r->err : NULL, r->run_id);
  if (!sql || store_exec(r->st.db, sql, err, sizeof err))
    progress_log(NULL, "the end of this run was not recorded (runs): %s", sql ? err : "out of memory");
  sqlite3_free(sql);
}

int ledger_set_state(struct run *r, const char *stage, const char *hash, const char *settings, const char *chain,
                     int64_t n_chunks, int64_t n_items, int changed, int share) {
  char when[32];
  run_now_iso(when, sizeof when);
  if (share)
    return run_exec(r,
                    "INSERT INTO stage_state(stage, config_hash, settings_hash, chain_hash, n_chunks, n_items, "
                    "finalized, updated) VALUES(%Q,%Q,%Q,%Q,%lld,%lld,0,%Q) ON CONFLICT(stage) DO UPDATE SET "
                    "config_hash=excluded.config_hash, chain_hash=excluded.chain_hash, n_chunks=excluded.n_chunks, "
                    "n_items=excluded.n_items, updated=excluded.updated",
                    stage, hash, settings, chain, (long long)n_chunks, (long long)n_items, when)
               ? -1
               : 0;
  return run_exec(
             r,
             "INSERT INTO stage_state(stage, config_hash, settings_hash, chain_hash, n_chunks, n_items, finalized, "
             "updated) VALUES(%Q,%Q,%Q,%Q,%lld,%lld,0,%Q) ON CONFLICT(stage) DO UPDATE SET "
             "config_hash=excluded.config_hash, settings_hash=excluded.settings_hash, "
             "chain_hash=excluded.chain_hash, n_chunks=excluded.n_chunks, n_items=excluded.n_items, "
             "finalized=CASE WHEN %d OR config_hash<>excluded.config_hash THEN 0 ELSE finalized END, "
             "updated=excluded.updated",
             stage, hash, settings, chain, (long long)n_chunks, (long long)n_items, when, changed)
             ? -1
             : 0;
}

int ledger_chunks_done(struct run *r, const struct stage *s, const struct stage_ctx *ctx, const char *hash,
                       int64_t n_chunks, const struct se3_comm *together, char *done, int64_t *done_items) {
  if (ctx->chunk_needed) {
    /* a keyed stage: the chunks with work are what its plan marks (its
     * ledger only tells what was done, chunk by chunk, last) */
    for (int64_t c = 0; c < n_chunks; c++)
      done[c] = !ctx->chunk_needed[c];
    *done_items = ctx->items_done;
  } else {
    int also_src = together && strcmp(r->src, "main");
    char *sql = sqlite3_mprintf("SELECT chunk, max(n) FROM (SELECT chunk, n_ok + n_rejected AS n FROM stage_chunks "
                                "WHERE stage=?1%s) GROUP BY chunk",
                                also_src ? " UNION ALL SELECT chunk, n_ok + n_rejected FROM src.stage_chunks "
                                           "WHERE stage=?1 AND config_hash=?2"
                                         : "");
    sqlite3_stmt *q = NULL;
    int rc = sql ? sqlite3_prepare_v2(r->st.db, sql, -1, &q, NULL) : SQLITE_NOMEM;
    sqlite3_free(sql);
    if (rc == SQLITE_OK) rc = sqlite3_bind_text(q, 1, s->name, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK && also_src) rc = sqlite3_bind_text(q, 2, hash, -1, SQLITE_STATIC);
    while (rc == SQLITE_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) {
      int64_t c = sqlite3_column_int64(q, 0);
      if (c >= 0 && c < n_chunks) done[c] = 1;
      *done_items += sqlite3_column_int64(q, 1);
      rc = SQLITE_OK;
    }
    sqlite3_finalize(q);
    if (rc != SQLITE_DONE) {
      snprintf(r->err, sizeof r->err, "%s: reading the ledger (stage_chunks) of %s: %s", s->name, r->st.path,
               sqlite3_errmsg(r->st.db));
      return -1;
    }
  }
  return 0;
}

int ledger_write_chunk(struct run *r, const char *stage, int64_t c, int shard, const char *hash, const char *started,
                       int64_t n_ok, int64_t n_rej, int64_t n_bytes, const char *round_src) {
  char finished[32];
  run_now_iso(finished, sizeof finished);
  return run_exec(r,
                  "INSERT OR REPLACE INTO stage_chunks(stage, chunk, shard, config_hash, status, host, pid, started, "
                  "finished, n_ok, n_rejected, n_bytes, round) VALUES(%Q,%lld,%d,%Q,'done',%Q,%d,%Q,%Q,%lld,%lld,%lld,"
                  "coalesce((SELECT max(round) FROM main.rounds), %s))",
                  stage, (long long)c, shard, hash, r->host, (int)getpid(), started, finished, (long long)n_ok,
                  (long long)n_rej, (long long)n_bytes, round_src)
             ? -1
             : 0;
}

/* The time stage s took in this run, from `started` (and t0, progress_now's
 * clock) to now, with what it finished and how it ended, as a row of
 * stage_runs: the report sums a stage's time over every run. A failure to
 * write it is said, not the run's. */
void ledger_stage_time(struct run *r, const struct stage *s, const char *started, double t0, int ret) {
  char finished[40], shard[32], err[512];
  run_now_iso_ms(finished, sizeof finished);
  snprintf(shard, sizeof shard, "%d/%d", r->shard, r->n_shards);
  char *sql = sqlite3_mprintf(
      "INSERT OR REPLACE INTO stage_runs(stage, host, pid, started, finished, seconds, n_done, status, shard) "
      "VALUES(%Q,%Q,%d,%Q,%Q,%.3f,%lld,%Q,%Q)",
      s->name, r->host, (int)getpid(), started, finished, progress_now() - t0,
      (long long)(r->prog.done - r->prog.done0),
      ret == SE3_EXIT_OK        ? "done"
      : ret == SE3_EXIT_STOPPED ? "stopped"
                                : "failed",
      r->n_shards > 1 ? shard : NULL);
  if (!sql || store_exec(r->st.db, sql, err, sizeof err))
    progress_log(NULL, "%s: its time in this run was not recorded (stage_runs): %s", s->name,
                 sql ? err : "out of memory");
  sqlite3_free(sql);
}
