/* What the commands do with a workdir whose files are not theirs: a
 * foreign SQLite file as screen.db is refused by `run`, `merge`, `verify`
 * and `query` and left exactly as it was (bytes, journal mode, no -wal);
 * a symbolic link planted as screen.db.lock is refused by `run`, naming it,
 * and its target is left alone. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/testutil.h"

static char *small_wf(const char *dir) {
  char yaml[1024];
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: work\nrun: {progress: none}\nsets:\n  a:\n    - {path: %s}\n"
           "stages:\n  ingest: {workers: 1, gen3d_quality: fast}\n",
           tu_src("workflows/data/qm9_mini.sdf"));
  return tu_write(dir, "wf.yaml", yaml);
}

static char *sha(const char *path) {
  char *out = NULL;
  cr_assert_eq(tu_sh(&out, "sha256sum < '%s'", path), 0);
  return out;
}

/* Before: `run` switched the file to WAL (its header rewritten, a -wal made)
 * and then refused it. */
Test(store_guard, foreign_screen_db_is_refused_and_left_unchanged) {
  char *dir = tu_tmpdir("guard_foreign");
  char *wf = small_wf(dir);
  char wd[1024], db[1100], wal[1200], shard[1200];
  snprintf(wd, sizeof wd, "%s/work", dir);
  snprintf(db, sizeof db, "%s/screen.db", wd);
  snprintf(wal, sizeof wal, "%s-wal", db);
  snprintf(shard, sizeof shard, "%s/shards/ingest-0.db", wd);
  cr_assert_eq(tu_sh(NULL, "mkdir -p %s/shards && sqlite3 %s 'PRAGMA journal_mode=DELETE; CREATE TABLE notes(x); "
                           "INSERT INTO notes VALUES(42);' && cp %s %s",
                     wd, db, db, shard),
               0);
  char *sum0 = sha(db);
  const char *cmds[4] = {"run %s", "merge %s", "verify %s", "query %s \"SELECT 1\""};
  const char *verb[4] = {"run", "merge", "verify", "query"};
  for (int i = 0; i < 4; i++) {
    char *out = NULL;
    int rc = i == 0 ? tu_se3(&out, cmds[i], wf) : tu_se3(&out, cmds[i], db);
    cr_assert_neq(rc, 0, "`%s` accepted a foreign screen.db:\n%s", verb[i], out);
    cr_assert(strstr(out, "not a se3screen database"), "`%s`:\n%s", verb[i], out);
    cr_assert(strstr(out, db), "`%s` does not name the file:\n%s", verb[i], out);
    char *sum = sha(db);
    cr_assert_str_eq(sum, sum0, "`%s` changed the foreign file (and said:\n%s)", verb[i], out);
    free(sum);
    char *mode = tu_query(db, "PRAGMA journal_mode");
    cr_assert_str_eq(mode, "delete\n", "`%s` changed the journal mode", verb[i]);
    free(mode);
    cr_assert_neq(access(wal, F_OK), 0, "`%s` made %s", verb[i], wal);
    free(out);
  }
  free(sum0);
  free(wf);
  free(dir);
}

/* Before: `run` opened the link with O_CREAT, truncated its target and wrote
 * its holder line there. */
Test(store_guard, run_refuses_a_symlinked_lock_file) {
  char *dir = tu_tmpdir("guard_lock");
  char *wf = small_wf(dir);
  char wd[1024], lock[1100];
  snprintf(wd, sizeof wd, "%s/work", dir);
  snprintf(lock, sizeof lock, "%s/screen.db.lock", wd);
  cr_assert_eq(mkdir(wd, 0755), 0);
  char *target = tu_write(dir, "precious.txt", "someone's file\n");
  cr_assert_eq(symlink(target, lock), 0);
  char *out = NULL;
  int rc = tu_se3(&out, "run %s --stage ingest", wf);
  cr_assert_eq(rc, 1, "run took a lock through a symbolic link (exit %d):\n%s", rc, out);
  cr_assert(strstr(out, lock) && strstr(out, "symbolic link"), "the message does not name the lock file:\n%s", out);
  char *t = tu_read(target, NULL);
  cr_assert_str_eq(t, "someone's file\n", "the link's target was changed");
  free(t);
  free(out);
  free(target);
  free(wf);
  free(dir);
}
