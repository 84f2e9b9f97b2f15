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

/* ---- reading: what the reads below share */

/* sqlite3_mprintf's table name in schema ("" where schema is NULL) */
#define LEDGER_IN(schema) (schema) ? "\"" : "", (schema) ? (schema) : "", (schema) ? "\"." : ""

/* one of a row's text columns into out ("" for NULL) */
static void copy_text(sqlite3_stmt *q, int i, char *out, size_t n) {
  const unsigned char *t = sqlite3_column_text(q, i);
  snprintf(out, n, "%s", t ? (const char *)t : "");
}

/* the first column of the one row of sql (sqlite3_mprintf'd, freed here)
 * into *v, left as it is for NULL: 0, or -1 when it cannot be read */
static int read_int(sqlite3 *db, char *sql, long long *v) {
  sqlite3_stmt *q = NULL;
  int rc = sql ? sqlite3_prepare_v2(db, sql, -1, &q, NULL) : SQLITE_NOMEM;
  sqlite3_free(sql);
  if (rc == SQLITE_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) {
    if (sqlite3_column_type(q, 0) != SQLITE_NULL) *v = sqlite3_column_int64(q, 0);
    rc = SQLITE_DONE;
  }
  sqlite3_finalize(q);
  return rc == SQLITE_DONE ? 0 : -1;
}

/* ---- opening, and a failed read said */

int ledger_open_ro(struct store *st, const char *path, const struct cfg_node *root, struct se3_error *err) {
  return store_open(st, path, STORE_READONLY, NULL, cfg_busy_timeout_ms(root), err);
}

int ledger_read_failed(struct run *r, const char *schema, const char *stage) {
  const char *file = sqlite3_db_filename(r->st.db, schema ? schema : "main");
  se3_error_set(&r->err, SE3_ERR_DB, "%s: reading the ledger of %s: %s", stage, file && *file ? file : r->st.path,
                sqlite3_errmsg(r->st.db));
  return -1;
}

/* ---- the run */

int ledger_record_meta(struct run *r, const char *stage, int replace) {
  const struct run_opts *o = r->o;
  char abs[PATH_MAX];
  if (!realpath(o->workflow, abs)) snprintf(abs, sizeof abs, "%s", o->workflow);
  size_t len = 1;
  for (int i = 0; i < o->n_sets; i++)
    len += strlen(o->sets[i]) + 1;
  char *sets = calloc(len, 1);
  if (!sets) {
    se3_error_set(&r->err, SE3_ERR_MEMORY, "out of memory");
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
  char when[32];
  struct se3_error err;
  run_now_iso(when, sizeof when);
  const char *status = ret == SE3_EXIT_OK ? "done" : ret == SE3_EXIT_STOPPED ? "stopped" : "failed";
  char *sql = sqlite3_mprintf("UPDATE runs SET finished=%Q, status=%Q, exit_code=%d, message=%Q WHERE id=%lld", when,
                              status, ret, r->err.message[0] ? se3_error_str(&r->err).s : NULL, r->run_id);
  if (!sql || store_exec(r->st.db, sql, &err))
    progress_log(NULL, "the end of this run was not recorded (runs): %s",
                 sql ? se3_error_str(&err).s : "out of memory");
  sqlite3_free(sql);
}

/* ---- a stage's state (stage_state) */

int ledger_read_stage(sqlite3 *db, const char *schema, const char *stage, struct ledger_stage *out) {
  memset(out, 0, sizeof *out);
  out->n_chunks = -1;
  /* every column there is, by name: a database of an older schema read as it
   * is (status, report) lacks the later ones */
  char *sql = sqlite3_mprintf("SELECT * FROM %s%w%sstage_state WHERE stage=%Q", LEDGER_IN(schema), stage);
  sqlite3_stmt *q = NULL;
  int rc = sql ? sqlite3_prepare_v2(db, sql, -1, &q, NULL) : SQLITE_NOMEM;
  sqlite3_free(sql);
  if (rc == SQLITE_OK) rc = sqlite3_step(q);
  if (rc == SQLITE_ROW) {
    out->found = 1;
    for (int i = 0; i < sqlite3_column_count(q); i++) {
      const char *col = sqlite3_column_name(q, i);
      int null = sqlite3_column_type(q, i) == SQLITE_NULL;
      if (!strcmp(col, "config_hash"))
        copy_text(q, i, out->config_hash, sizeof out->config_hash);
      else if (!strcmp(col, "settings_hash"))
        copy_text(q, i, out->settings_hash, sizeof out->settings_hash);
      else if (!strcmp(col, "chain_hash"))
        copy_text(q, i, out->chain_hash, sizeof out->chain_hash);
      else if (!strcmp(col, "updated"))
        copy_text(q, i, out->updated, sizeof out->updated);
      else if (!strcmp(col, "n_chunks") && !null)
        out->n_chunks = sqlite3_column_int64(q, i);
      else if (!strcmp(col, "n_items") && !null)
        out->n_items = sqlite3_column_int64(q, i);
      else if (!strcmp(col, "finalized") && !null)
        out->finalized = (int)sqlite3_column_int64(q, i);
    }
    rc = SQLITE_DONE;
  }
  if (rc != SQLITE_DONE) {
    /* (the error stays the connection's: finalize returns it again) */
    sqlite3_finalize(q);
    return -1;
  }
  sqlite3_finalize(q);
  return out->found;
}

int ledger_finished_since(sqlite3 *db, const char *stage, const char *since) {
  sqlite3_stmt *q = NULL;
  int done = 0;
  if (sqlite3_prepare_v2(db, "SELECT finalized AND (?2 IS NULL OR updated >= ?2) FROM stage_state WHERE stage = ?1", -1,
                         &q, NULL) == SQLITE_OK) {
    sqlite3_bind_text(q, 1, stage, -1, SQLITE_STATIC);
    if (since) sqlite3_bind_text(q, 2, since, -1, SQLITE_STATIC);
    if (sqlite3_step(q) == SQLITE_ROW) done = sqlite3_column_int(q, 0) != 0;
  }
  sqlite3_finalize(q);
  return done;
}

const char *ledger_stage_with(int flag) {
  for (int i = 0; i < N_STAGES; i++)
    if (run_all_stages[i]->flags & flag) return run_all_stages[i]->name;
  return NULL;
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

int ledger_restate(struct run *r, const char *stage, const char *hash, const char *settings, const char *chain,
                   int64_t n_chunks, int64_t n_items) {
  return run_exec(r,
                  "UPDATE stage_state SET config_hash=%Q, settings_hash=%Q, chain_hash=%Q, n_chunks=%lld, "
                  "n_items=%lld WHERE stage=%Q",
                  hash, settings, chain, (long long)n_chunks, (long long)n_items, stage)
             ? -1
             : 0;
}

int ledger_set_finalized(struct run *r, const char *stage, int finalized) {
  return run_exec(r, "UPDATE stage_state SET finalized=%d WHERE stage=%Q", finalized ? 1 : 0, stage) ? -1 : 0;
}

/* ---- a stage's chunks (stage_chunks) */

long long ledger_chunk_count(sqlite3 *db, const char *schema, const char *stage, const char *hash, int other) {
  long long n = 0;
  char *sql = hash
                  ? sqlite3_mprintf("SELECT count(*) FROM %s%w%sstage_chunks WHERE stage=%Q AND config_hash%s%Q",
                                    LEDGER_IN(schema), stage, other ? "<>" : "=", hash)
                  : sqlite3_mprintf("SELECT count(*) FROM %s%w%sstage_chunks WHERE stage=%Q", LEDGER_IN(schema), stage);
  return read_int(db, sql, &n) ? -1 : n;
}

int ledger_chunk_sums(sqlite3 *db, const char *stage, long long *n_ok, long long *n_bytes) {
  *n_ok = *n_bytes = 0;
  if (read_int(db, sqlite3_mprintf("SELECT sum(n_ok) FROM stage_chunks WHERE stage=%Q", stage), n_ok)) return -1;
  /* (n_bytes: schema version 2 on; a database before it reads as 0) */
  long long has = 0;
  if (read_int(db, sqlite3_mprintf("SELECT count(*) FROM pragma_table_info('stage_chunks') WHERE name='n_bytes'"),
               &has))
    return -1;
  return has && read_int(db, sqlite3_mprintf("SELECT sum(n_bytes) FROM stage_chunks WHERE stage=%Q", stage), n_bytes)
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
      se3_error_set(&r->err, SE3_ERR_DB, "%s: reading the ledger (stage_chunks) of %s: %s", s->name, r->st.path,
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

int ledger_forget_chunks_from(struct run *r, const char *stage, int64_t first) {
  return run_exec(r, "DELETE FROM stage_chunks WHERE stage=%Q AND chunk>=%lld", stage, (long long)first) ? -1 : 0;
}

int ledger_forget_stage(struct run *r, const char *stage) {
  return run_exec(r, "DELETE FROM stage_chunks WHERE stage=%Q; DELETE FROM stage_state WHERE stage=%Q", stage, stage)
             ? -1
             : 0;
}

/* ---- a stage's time (stage_runs) */

/* The time stage s took in this run, from `started` (and t0, progress_now's
 * clock) to now, with what it finished and how it ended, as a row of
 * stage_runs: the report sums a stage's time over every run. A failure to
 * write it is said, not the run's. */
void ledger_stage_time(struct run *r, const struct stage *s, const char *started, double t0, int ret) {
  char finished[40], shard[32];
  struct se3_error err;
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
  if (!sql || store_exec(r->st.db, sql, &err))
    progress_log(NULL, "%s: its time in this run was not recorded (stage_runs): %s", s->name,
                 sql ? se3_error_str(&err).s : "out of memory");
  sqlite3_free(sql);
}

/* ---- a shard's ledger folded in */

int ledger_shard_has_news(struct run *r, const char *stage) {
  long long n =
      run_query_int(r->st.db, -1,
                    "SELECT CASE WHEN (SELECT config_hash FROM main.stage_state WHERE stage=%Q) IS NOT "
                    "(SELECT config_hash FROM shard.stage_state WHERE stage=%Q) THEN 1 ELSE "
                    "(SELECT count(*) FROM shard.stage_chunks c WHERE c.stage=%Q AND NOT EXISTS "
                    "(SELECT 1 FROM main.stage_chunks m WHERE m.stage=c.stage AND m.chunk=c.chunk AND "
                    "m.config_hash=c.config_hash AND m.host=c.host AND m.pid=c.pid AND m.started=c.started AND "
                    "m.finished=c.finished)) END",
                    stage, stage, stage);
  if (n < 0) {
    se3_error_set(&r->err, SE3_ERR_DB, "comparing a shard's ledger with %s: %s", r->st.path, sqlite3_errmsg(r->st.db));
    return -1;
  }
  return n > 0;
}

int ledger_take_shard_plan(struct run *r, const char *stage, const char *hash) {
  return run_exec(r,
                  "DELETE FROM main.stage_chunks WHERE stage=%Q AND config_hash<>%Q;"
                  "UPDATE main.stage_state SET config_hash=%Q, n_chunks=(SELECT n_chunks FROM shard.stage_state "
                  "WHERE stage=%Q), n_items=(SELECT n_items FROM shard.stage_state WHERE stage=%Q) WHERE stage=%Q",
                  stage, hash, hash, stage, stage, stage)
             ? -1
             : 0;
}

int ledger_fold_shard(struct run *r, const char *stage) {
  if (run_exec(r,
               "INSERT OR REPLACE INTO main.stage_chunks SELECT * FROM shard.stage_chunks WHERE stage=%Q;"
               "INSERT INTO main.stage_state SELECT * FROM shard.stage_state WHERE stage=%Q "
               "ON CONFLICT(stage) DO UPDATE SET finalized=0, updated=excluded.updated",
               stage, stage))
    return -1;
  /* the shard's time in the stage (none before schema version 12) */
  if (run_query_int(r->st.db, 0, "SELECT count(*) FROM shard.sqlite_schema WHERE name = 'stage_runs'") > 0 &&
      run_exec(r, "INSERT OR IGNORE INTO main.stage_runs SELECT * FROM shard.stage_runs WHERE stage=%Q", stage))
    return -1;
  return 0;
}

/* The stage-level steps over the ledger that merge.c, plan.c and upgrade.c
 * call too (declared in runner_internal.h): here, above runner_util.c, so
 * that the runner's leaf calls nothing of the ledger. */

int run_clear_stage(struct run *r, int i) {
  const struct stage *s = run_all_stages[i];
  char *tables = strdup(s->tables);
  if (!tables) {
    se3_error_set(&r->err, SE3_ERR_RUN, "out of memory clearing stage %s", s->name);
    return -1;
  }
  for (char *save = NULL, *t = strtok_r(tables, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
    if (run_exec(r, "DELETE FROM \"%w\"", t)) {
      free(tables);
      return -1;
    }
  }
  free(tables);
  if (run_exec(r, "DELETE FROM rejects WHERE stage=%Q", s->name) || ledger_forget_stage(r, s->name)) return -1;
  if (s->merge.meta_key && run_exec(r, "DELETE FROM meta WHERE key=%Q", s->merge.meta_key)) return -1;
  return 0;
}

/* Delete everything stage i and the stages after it wrote. */
int run_clear_from(struct run *r, int first) {
  for (int i = first; i < N_STAGES; i++)
    if (run_clear_stage(r, i)) return -1;
  return 0;
}

int run_unfinish_after(struct run *r, int i) {
  for (int k = i + 1; k < N_STAGES; k++)
    if (ledger_set_finalized(r, run_all_stages[k]->name, 0)) return -1;
  return 0;
}

/* A stage that reads another's tables needs that stage finished (finalized)
 * in the database it reads; what that stage's hashes say then joins this
 * stage's (struct run_upstream). 0, or -1 with r->err set. */
int run_check_upstream(struct run *r, const struct stage *s, struct run_upstream *up) {
  up->content = up->chain = 0;
  const char *after = run_upstream_of(r->root, s);
  if (!after) return 0;
  const char *where = strcmp(r->src, "main") ? "screen.db" : "this database";
  struct ledger_stage st;
  int found = ledger_read_stage(r->st.db, r->src, after, &st);
  if (found < 0) return ledger_read_failed(r, r->src, after);
  if (!found) {
    se3_error_set(&r->err, SE3_ERR_RUN, "%s reads the %s stage's results, and %s has none: run `--stage %s` first",
                  s->name, after, where, after);
    return -1;
  }
  if (st.finalized != 1) {
    long long n_done = ledger_chunk_count(r->st.db, r->src, after, NULL, 0);
    if (n_done < 0) return ledger_read_failed(r, r->src, after);
    se3_error_set(&r->err, SE3_ERR_RUN,
                  "%s reads the %s stage's results, which are not finished in %s (%lld of %lld chunks%s): "
                  "finish %s first",
                  s->name, after, where, n_done, st.n_chunks, n_done < st.n_chunks ? "" : ", not yet merged", after);
    return -1;
  }
  int ui = run_stage_index(after);
  /* After a keyed stage, or one whose rows' content the stages after it
   * record row by row, its settings chain (a database of an earlier
   * se3screen has none: the config hash stands in); after another, its
   * config hash: what it made, whole. */
  int by_row =
      ui >= 0 && (stage_is_keyed(run_all_stages[ui], r->root) || (run_all_stages[ui]->flags & STAGE_CONTENT_PER_ROW));
  up->chain = up->content = se3_hash_str(SE3_HASH_INIT, by_row && st.chain_hash[0] ? st.chain_hash : st.config_hash);
  return 0;
}

int run_finalize(struct run *r, const struct stage *s, struct stage_ctx *ctx) {
  if (!s->finalize) return ledger_set_finalized(r, s->name, 1);
  if (run_exec(r, "BEGIN IMMEDIATE")) return -1;
  if (s->finalize(ctx) != STAGE_OK) {
    run_stage_failed(r, &ctx->err, "%s", s->name);
    sqlite3_exec(r->st.db, "ROLLBACK", NULL, NULL, NULL);
    return -1;
  }
  if (ledger_set_finalized(r, s->name, 1) || run_exec(r, "COMMIT")) {
    sqlite3_exec(r->st.db, "ROLLBACK", NULL, NULL, NULL);
    return -1;
  }
  return 0;
}

/* ---- the stages' reads (struct stage_ledger) */

static sqlite3_stmt *chunk_spans(sqlite3 *db) {
  sqlite3_stmt *q = NULL;
  if (sqlite3_prepare_v2(db,
                         "SELECT stage, min(started), max(finished), count(*), sum(n_ok), sum(n_rejected), "
                         "count(DISTINCT shard) FROM stage_chunks GROUP BY stage ORDER BY min(started), "
                         "instr(' ingest graph basis train score rank report', ' ' || stage || ' ')",
                         -1, &q, NULL) != SQLITE_OK)
    return NULL;
  return q;
}

static sqlite3_stmt *stage_times(sqlite3 *db, int *none) {
  long long has = 0;
  *none = 0;
  if (read_int(db, sqlite3_mprintf("SELECT count(*) FROM sqlite_schema WHERE name = 'stage_runs'"), &has)) return NULL;
  if (!has) {
    *none = 1;
    return NULL;
  }
  sqlite3_stmt *q = NULL;
  if (sqlite3_prepare_v2(db,
                         "SELECT stage, sum(seconds), count(*), sum(status <> 'done') FROM stage_runs "
                         "GROUP BY stage ORDER BY min(started)",
                         -1, &q, NULL) != SQLITE_OK)
    return NULL;
  return q;
}

static int copy_round(sqlite3 *db, const char *into, int64_t round, int64_t of_round, const char *except, char **msg) {
  char *sql = sqlite3_mprintf("INSERT INTO \"%w\"(round, stage, chunk, host, pid, started, finished, n_ok, n_rejected) "
                              "SELECT %lld, stage, chunk, host, pid, started, finished, n_ok, n_rejected FROM "
                              "stage_chunks WHERE round = %lld AND stage <> %Q",
                              into, (long long)round, (long long)of_round, except);
  int rc = sql ? sqlite3_exec(db, sql, NULL, NULL, msg) : SQLITE_NOMEM;
  sqlite3_free(sql);
  return rc;
}

static int has_chunks(sqlite3 *db, const char *schema, const char *stage) {
  long long n = 0;
  if (read_int(db,
               sqlite3_mprintf("SELECT EXISTS (SELECT 1 FROM %s%w%sstage_chunks WHERE stage = %Q)", LEDGER_IN(schema),
                               stage),
               &n))
    return -1;
  return n != 0;
}

const struct stage_ledger ledger_stage_reads = {
    .chunk_spans = chunk_spans,
    .stage_times = stage_times,
    .copy_round = copy_round,
    .has_chunks = has_chunks,
};
