/* status.c — `se3screen status`: per stage chunks done and planned,
 * molecules stored and rejected, whether the configuration changed since
 * (given the workflow), the last run and its error, and the shard databases.
 * Read-only: status never writes a database.
 */
#define _GNU_SOURCE
#include "pipeline/runner_internal.h"
#include "pipeline/ledger.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- status ---------------------------------------------------------------- */

/* Status reads with every query checked: a database that opens but cannot be
 * read through (truncated, damaged) must not pass for an empty one. A table
 * an older schema lacks (SQLITE_ERROR at prepare) only reads as nothing. */
struct status_reader {
  sqlite3 *db;
  char err[512]; /* the first read failure */
};

static sqlite3_stmt *status_step(struct status_reader *sr, const char *fmt, va_list ap) {
  char *sql = sqlite3_vmprintf(fmt, ap);
  sqlite3_stmt *st = NULL;
  int rc = sql ? sqlite3_prepare_v2(sr->db, sql, -1, &st, NULL) : SQLITE_NOMEM;
  if (rc == SQLITE_OK) {
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) rc = SQLITE_OK;
  }
  if (rc != SQLITE_OK && rc != SQLITE_DONE && (rc & 0xff) != SQLITE_ERROR && !sr->err[0])
    snprintf(sr->err, sizeof sr->err, "%s", sql ? sqlite3_errmsg(sr->db) : "out of memory");
  sqlite3_free(sql);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(st);
    return NULL;
  }
  return st;
}

static sqlite3_stmt *status_step_v(struct status_reader *sr, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  sqlite3_stmt *st = status_step(sr, fmt, ap);
  va_end(ap);
  return st;
}

static long long status_int(struct status_reader *sr, long long dflt, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  sqlite3_stmt *st = status_step(sr, fmt, ap);
  va_end(ap);
  long long v = st && sqlite3_column_type(st, 0) != SQLITE_NULL ? sqlite3_column_int64(st, 0) : dflt;
  sqlite3_finalize(st);
  return v;
}

static char *status_text(struct status_reader *sr, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  sqlite3_stmt *st = status_step(sr, fmt, ap);
  va_end(ap);
  char *v = st && sqlite3_column_text(st, 0) ? strdup((const char *)sqlite3_column_text(st, 0)) : NULL;
  sqlite3_finalize(st);
  return v;
}

/* A ledger read (pipeline/ledger.h) that failed, as status_step notes its
 * own: the first failure kept, a table an older schema lacks read as
 * nothing. 0, what the read counts as. */
static long long status_failed(struct status_reader *sr) {
  if ((sqlite3_errcode(sr->db) & 0xff) != SQLITE_ERROR && !sr->err[0])
    snprintf(sr->err, sizeof sr->err, "%s", sqlite3_errmsg(sr->db));
  return 0;
}

/* Prints one database's status; returns 0, or -1 when it cannot be read
 * (the message names the file and why). */
static int status_of_db(const char *path, const struct cfg_node *root, int with_header) {
  struct store st;
  struct se3_error err;
  if (ledger_open_ro(&st, path, NULL, &err)) {
    fprintf(stderr, "se3screen status: %s\n", se3_error_str(&err).s);
    return -1;
  }
  if (st.note) fprintf(stderr, "se3screen status: note: %s\n", st.note);
  struct status_reader sr = {.db = st.db};
  if (with_header) printf("%s\n", path);
  printf("  %-8s %13s %10s %10s %10s %11s  %s\n", "stage", "chunks", "planned", "stored", "rejected", "bytes/mol",
         "config");
  for (int i = 0; i < N_STAGES; i++) {
    const struct stage *s = run_all_stages[i];
    struct ledger_stage state;
    if (ledger_read_stage(sr.db, NULL, s->name, &state) < 0) status_failed(&sr);
    long long n_chunks = state.n_chunks;
    if (n_chunks < 0) {
      printf("  %-8s %13s %10s %10s %10s %11s  %s\n", s->name, "-", "-", "-", "-", "-", "not run");
      continue;
    }
    long long n_done = ledger_chunk_count(sr.db, NULL, s->name, NULL, 0);
    if (n_done < 0) n_done = status_failed(&sr);
    /* (a keyed stage's ledger logs the chunks its runs did; finished, it
     * has every chunk of its last plan) */
    if (root && stage_is_keyed(s, root) && state.finalized == 1) n_done = n_chunks;
    long long n_items = state.n_items;
    /* The last table of `tables` is the stage's main one (children come first). */
    const char *main_table = strrchr(s->tables, ' ') ? strrchr(s->tables, ' ') + 1 : s->tables;
    long long n_rows = status_int(&sr, 0, "SELECT count(*) FROM \"%w\"", main_table);
    long long n_rej = status_int(&sr, 0, "SELECT count(*) FROM rejects WHERE stage=%Q", s->name);
    const char *verdict = "unknown (give the workflow file)";
    const char *settings = state.settings_hash[0] ? state.settings_hash : NULL;
    if (root && stage_is_keyed(s, root)) {
      /* a keyed stage is redone whole only when its settings chain changes
       * (the next run's lines below say what else it does) */
      char now[17];
      const char *after = run_upstream_of(root, s);
      int ui = after ? run_stage_index(after) : -1;
      int by_row =
          ui >= 0 && (stage_is_keyed(run_all_stages[ui], root) || (run_all_stages[ui]->flags & STAGE_CONTENT_PER_ROW));
      struct ledger_stage up_state = {.found = 0};
      if (after && ledger_read_stage(sr.db, NULL, after, &up_state) < 0) status_failed(&sr);
      const char *up = by_row && up_state.chain_hash[0] ? up_state.chain_hash : up_state.config_hash;
      run_chain_hash(root, s, up[0] ? se3_hash_str(SE3_HASH_INIT, up) : 0, now);
      verdict = state.chain_hash[0] && !strcmp(state.chain_hash, now) ? "unchanged"
                                                                      : "CHANGED: the next run redoes this stage";
    } else if (root) {
      char now[17];
      run_settings_hash(root, s, now);
      verdict = settings && !strcmp(settings, now) ? "unchanged" : "CHANGED: the next run redoes this stage";
    }
    char chunks[32], bytes[32] = "-";
    snprintf(chunks, sizeof chunks, "%lld/%lld", n_done, n_chunks);
    /* from the ledger: reading the blobs' sizes would read the tables */
    long long n_stored, n_bytes;
    if (ledger_chunk_sums(sr.db, s->name, &n_stored, &n_bytes)) status_failed(&sr);
    if (s->show.blob_column && n_stored > 0) snprintf(bytes, sizeof bytes, "%.0f", (double)n_bytes / (double)n_stored);
    printf("  %-8s %13s %10lld %10lld %10lld %11s  %s\n", s->name, chunks, n_items, n_rows, n_rej, bytes, verdict);
  }
  /* (runs.job: schema version 4; an older database read as it is lacks it) */
  int has_job = status_int(&sr, 0, "SELECT count(*) FROM pragma_table_info('runs') WHERE name = 'job'") > 0;
  sqlite3_stmt *q = status_step_v(&sr,
                                  "SELECT id, started, coalesce(finished,''), status, coalesce(message,''), %s "
                                  "FROM runs ORDER BY id DESC LIMIT 1",
                                  has_job ? "coalesce(job,'')" : "''");
  if (q)
    printf("  last run: #%lld started %s, %s%s%s%s%s\n", (long long)sqlite3_column_int64(q, 0),
           sqlite3_column_text(q, 1), sqlite3_column_text(q, 3), *sqlite3_column_text(q, 2) ? ", finished " : "",
           sqlite3_column_text(q, 2), *sqlite3_column_text(q, 5) ? ", Slurm job " : "", sqlite3_column_text(q, 5));
  sqlite3_finalize(q);
  /* the latest run's error, and only when it failed: an error that a later
   * run got past is history (the runs table keeps it), not the state */
  char *last_err = status_text(&sr, "SELECT started || ': ' || message FROM (SELECT * FROM runs ORDER BY id DESC "
                                    "LIMIT 1) WHERE status<>'done' AND message IS NOT NULL AND message<>''");
  printf("  last error: %s\n", last_err ? last_err : "none");
  free(last_err);
  store_close(&st);
  if (sr.err[0]) {
    fprintf(stderr, "se3screen status: %s: cannot be read: %s\n", path, sr.err);
    return -1;
  }
  return 0;
}

/* Given the workflow: what its next run would do (plan.c, as `run
 * --dry-run` says it), read-only. 0, or -1 when it cannot be told. */
static int next_run(const char *workflow, const struct cfg_node *root, const char *dbpath) {
  struct run r;
  memset(&r, 0, sizeof r);
  r.root = (struct cfg_node *)root;
  r.src = "main";
  r.n_shards = 1;
  snprintf(r.workdir, sizeof r.workdir, "%s", cfg_str(root, "workdir"));
  char tmp[PATH_MAX];
  snprintf(r.workflow_dir, sizeof r.workflow_dir, "%s", realpath(workflow, tmp) ? dirname(tmp) : ".");
  if (ledger_open_ro(&r.st, dbpath, NULL, &r.err)) {
    fprintf(stderr, "se3screen status: %s\n", se3_error_str(&r.err).s);
    return -1;
  }
  long long ver = run_query_int(r.st.db, 0, "PRAGMA user_version");
  printf("  next run:\n");
  if (ver < STORE_SCHEMA_VERSION)
    printf("  %s was made by an earlier se3screen (schema %lld, this one writes %d): see `se3screen upgrade`\n",
           dbpath, ver, STORE_SCHEMA_VERSION);
  else
    run_plan_print(&r, 0, run_last_configured(root, 0, N_STAGES - 1), 0, stdout);
  store_close(&r.st);
  return 0;
}

int runner_status(const char *target, const char *const *sets, int n_sets) {
  struct cfg_node *root = NULL;
  char dbpath[PATH_MAX + 32];
  size_t tl = strlen(target);
  if ((tl >= 5 && !strcmp(target + tl - 5, ".yaml")) || (tl >= 4 && !strcmp(target + tl - 4, ".yml"))) {
    root = run_load_config(target, sets, n_sets, NULL, NULL);
    if (!root) return SE3_EXIT_USAGE;
    snprintf(dbpath, sizeof dbpath, "%s/screen.db", cfg_str(root, "workdir"));
  } else {
    struct stat sb;
    if (stat(target, &sb) == 0 && S_ISDIR(sb.st_mode))
      snprintf(dbpath, sizeof dbpath, "%s/screen.db", target);
    else
      snprintf(dbpath, sizeof dbpath, "%s", target);
  }
  int shown = 0, failed = 0, missing_errno = 0;
  struct stat sb;
  if (lstat(dbpath, &sb) == 0) {
    failed |= status_of_db(dbpath, root, 1) != 0;
    shown = 1;
    if (root && !failed) failed |= next_run(target, root, dbpath) != 0;
  } else {
    missing_errno = errno;
  }
  int n = 0;
  char **shards = run_list_shards(dbpath, &n);
  for (int k = 0; k < n; k++) {
    failed |= status_of_db(shards[k], root, 1) != 0;
    free(shards[k]);
    shown = 1;
  }
  free(shards);
  cfg_node_free(root);
  if (!shown) {
    if (missing_errno == ENOENT)
      fprintf(stderr, "se3screen status: %s does not exist yet (nothing has run)\n", dbpath);
    else
      fprintf(stderr, "se3screen status: %s: %s\n", dbpath, strerror(missing_errno));
    return SE3_EXIT_FAILED;
  }
  return failed ? SE3_EXIT_FAILED : SE3_EXIT_OK;
}
