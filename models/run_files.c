/* run_files.c — the files of a result database's run (run_files.h). */
#define _GNU_SOURCE
#include "models/run_files.h"

#include <dirent.h>
#include <libgen.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* a database's companion files, by suffix */
static const char *const companions[] = {"-wal", "-shm", "-journal", ".lock"};

static int add_fmt(struct atomic_file_keep *k, const char *a, const char *b, const char *c) {
  char p[PATH_MAX + 64];
  snprintf(p, sizeof p, "%s%s%s", a, b, c);
  return atomic_file_keep_add(k, p);
}

static int add_db(struct atomic_file_keep *k, const char *db) {
  int bad = atomic_file_keep_add(k, db);
  for (size_t i = 0; i < sizeof companions / sizeof *companions && !bad; i++)
    bad = add_fmt(k, db, companions[i], "");
  return bad;
}

static int ends_with(const char *s, const char *tail) {
  size_t n = strlen(s), m = strlen(tail);
  return n >= m && !strcmp(s + n - m, tail);
}

/* Every regular file under folder, depth folders deep; shard databases
 * (name.db) with their companions. A folder that cannot be read adds
 * nothing. */
static int add_tree(struct atomic_file_keep *k, const char *folder, int depth, int dbs) {
  DIR *d = opendir(folder);
  if (!d) return 0;
  int bad = 0;
  struct dirent *e;
  while (!bad && (e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s/%s", folder, e->d_name) >= (int)sizeof p) continue;
    struct stat st;
    if (stat(p, &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      if (depth > 1) bad = add_tree(k, p, depth - 1, dbs);
    } else if (dbs && ends_with(p, ".db")) {
      bad = add_db(k, p);
    } else {
      bad = atomic_file_keep_add(k, p);
    }
  }
  closedir(d);
  return bad;
}

/* A source file as the database names it: absolute, or relative to the
 * workflow's folder (wf_dir; unknown: left out). */
static int add_source(struct atomic_file_keep *k, const char *wf_dir, const char *src) {
  if (!src || !*src) return 0;
  if (src[0] == '/') return atomic_file_keep_add(k, src);
  if (!wf_dir) return 0;
  return add_fmt(k, wf_dir, "/", src);
}

/* What the database says the run read. Never fails on the database (a
 * file that is no result database, a locked one: nothing added); -1 only
 * out of memory. */
static int add_inputs(struct atomic_file_keep *k, const char *db_path) {
  sqlite3 *db = NULL;
  if (sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
    sqlite3_close(db);
    return 0;
  }
  sqlite3_busy_timeout(db, 10000);
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
  sqlite3_close(db);
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
  int bad = add_db(k, db_path) || add_tree(k, shards, 1, 1) || add_tree(k, models, 4, 0) || add_inputs(k, db_path);
  free(copy);
  return bad ? -1 : 0;
}

int run_files_check_output(const char *db_path, const char *out, char *err, size_t errlen) {
  if (!strcmp(out, "-")) return 0;
  struct atomic_file_keep k = {0};
  int rc = run_files_list(db_path, &k);
  if (rc)
    snprintf(err, errlen, "%s: out of memory listing the run's files", db_path);
  else
    rc = atomic_file_check_keep(&k, out, err, errlen);
  atomic_file_keep_free(&k);
  return rc;
}

int run_files_check_input(const char *workdir, const char *in, char *err, size_t errlen) {
  static const char *const written[] = {"hits.csv", "hits.sdf", "report.html"};
  struct atomic_file_keep k = {0};
  char db[PATH_MAX], shards[PATH_MAX], models[PATH_MAX];
  snprintf(db, sizeof db, "%s/screen.db", workdir);
  snprintf(shards, sizeof shards, "%s/shards", workdir);
  snprintf(models, sizeof models, "%s/models", workdir);
  int bad = add_db(&k, db) || add_tree(&k, shards, 1, 1) || add_tree(&k, models, 4, 0);
  for (size_t i = 0; i < sizeof written / sizeof *written && !bad; i++)
    bad = add_fmt(&k, workdir, "/", written[i]);
  int rc = -1;
  if (bad) {
    snprintf(err, errlen, "%s: out of memory listing the files the run writes", workdir);
  } else {
    for (size_t i = 0; i < k.n; i++)
      if (atomic_file_same(in, k.path[i])) {
        snprintf(err, errlen,
                 "%s is %s, which this run writes (it would be replaced while it is an input): copy it out of the "
                 "workdir and name the copy",
                 in, k.path[i]);
        goto out;
      }
    rc = 0;
  }
out:
  atomic_file_keep_free(&k);
  return rc;
}
