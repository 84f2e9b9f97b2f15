/* run_files.c — the files of a result database's run (run_files.h): what
 * its workdir holds (common/workdir.h) and what the database says it read. */
#define _GNU_SOURCE
#include "pipeline/run_files.h"
#include "pipeline/config.h"
#include "pipeline/ledger.h"

#include <libgen.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/workdir.h"

/* A source file as the database names it: absolute, or relative to the
 * workflow's folder (wf_dir; unknown: left out). */
static int add_source(struct atomic_file_keep *k, const char *wf_dir, const char *src) {
  if (!src || !*src) return 0;
  if (src[0] == '/') return atomic_file_keep_add(k, src);
  if (!wf_dir) return 0;
  return workdir_add_fmt(k, wf_dir, "/", src);
}

/* What the database says the run read. Never fails on the database (a
 * file that is no result database, a locked one: nothing added); -1 only
 * out of memory. */
static int add_inputs(struct atomic_file_keep *k, const char *db_path) {
  struct store h;
  if (ledger_open_ro(&h, db_path, NULL, NULL)) return 0;
  sqlite3 *db = h.db;
  int bad = 0;
  char *wf_dir = NULL;
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key = 'workflow'", -1, &st, NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0)) {
    const char *wf = (const char *)sqlite3_column_text(st, 0);
    bad = atomic_file_keep_add(k, wf);
    char *copy = strdup(wf);
    if (copy && wf[0] == '/') wf_dir = strdup(dirname(copy));
    free(copy);
  }
  sqlite3_finalize(st);
  st = NULL;
  /* molecules.id is (input index + 1) * 1e9 + record_no: one look-up by id
   * per input file finds them all without reading the table */
  if (!bad && sqlite3_prepare_v2(db, "SELECT id, source_file FROM molecules WHERE id >= ?1 ORDER BY id LIMIT 1", -1,
                                 &st, NULL) == SQLITE_OK) {
    sqlite3_int64 from = 0;
    for (int n = 0; !bad && n < 100000; n++) {
      sqlite3_reset(st);
      sqlite3_bind_int64(st, 1, from);
      if (sqlite3_step(st) != SQLITE_ROW) break;
      sqlite3_int64 id = sqlite3_column_int64(st, 0);
      bad = add_source(k, wf_dir, (const char *)sqlite3_column_text(st, 1));
      if (id < 0 || id / 1000000000 >= INT64_MAX / 1000000000 - 1) break;
      from = (id / 1000000000 + 1) * 1000000000;
    }
  }
  sqlite3_finalize(st);
  st = NULL;
  /* files every record of which was rejected (rejects is small: no blobs) */
  if (!bad &&
      sqlite3_prepare_v2(db, "SELECT DISTINCT source_file FROM rejects LIMIT 100000", -1, &st, NULL) == SQLITE_OK)
    while (!bad && sqlite3_step(st) == SQLITE_ROW)
      bad = add_source(k, wf_dir, (const char *)sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  store_close(&h);
  free(wf_dir);
  return bad;
}

int run_files_list(const char *db_path, struct atomic_file_keep *k) {
  char *copy = strdup(db_path);
  if (!copy) return -1;
  const char *folder = dirname(copy);
  char shards[PATH_MAX], models[PATH_MAX];
  snprintf(shards, sizeof shards, "%s/shards", folder);
  snprintf(models, sizeof models, "%s/models", folder);
  int bad = workdir_add_db(k, db_path) || workdir_add_tree(k, shards, 1, 1) || workdir_add_tree(k, models, 4, 0) || add_inputs(k, db_path);
  free(copy);
  return bad ? -1 : 0;
}

int run_files_check_output(const char *db_path, const char *out, struct se3_error *err) {
  if (!strcmp(out, "-")) return 0;
  struct atomic_file_keep k = {0};
  int rc = run_files_list(db_path, &k);
  if (rc) {
    se3_error_set(err, SE3_ERR_MEMORY, "out of memory listing the run's files");
    se3_error_at(err, db_path, 0, 0);
  } else {
    rc = atomic_file_check_keep(&k, out, err);
  }
  atomic_file_keep_free(&k);
  return rc;
}
