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

/* A workflow of its own name and input into dir/work, reaching it by `how`
 * ("workdir: PATH" in the file, or none: --workdir on the command line). */
static char *named_wf(const char *dir, const char *file, const char *name, const char *input, const char *workdir) {
  char yaml[2048];
  snprintf(yaml, sizeof yaml,
           "workflow: %s\nworkdir: %s\nrun: {progress: none}\nsets:\n  lib:\n    - {path: %s}\n"
           "stages:\n  ingest: {workers: 1, gen3d_quality: fast}\n",
           name, workdir, input);
  return tu_write(dir, file, yaml);
}

/* Before (hardening IV): `run two.yaml --workdir DIR`, DIR made by the
 * workflow "one", exited 0 and deleted one's molecules ("gone: l1.smi ...
 * deleted"); the same through `workdir:` and a symbolic link to DIR. Now
 * refused with exit 2 before anything is written, naming both workflows
 * and how to start afresh; the same workflow renamed in its file, or a
 * copy of it under another file name, still runs there. */
Test(store_guard, run_refuses_another_workflows_workdir) {
  char *dir = tu_tmpdir("guard_owner");
  char wd[1024], db[1100], link[1100], other[1100];
  snprintf(wd, sizeof wd, "%s/work", dir);
  snprintf(db, sizeof db, "%s/screen.db", wd);
  snprintf(link, sizeof link, "%s/link", dir);
  snprintf(other, sizeof other, "%s/elsewhere", dir);
  char *l1 = tu_write(dir, "l1.smi", "CCO ethanol\nCCN ethylamine\nc1ccccc1 benzene\n");
  char *l2 = tu_write(dir, "l2.smi", "CCCC butane\nCCCO propanol\n");
  char *one = named_wf(dir, "one.yaml", "one", l1, wd);
  char *out = NULL;
  cr_assert_eq(tu_se3(&out, "run %s", one), 0, "%s", out);
  free(out);
  const char *snap_sql = "SELECT (SELECT group_concat(name) FROM (SELECT name FROM molecules ORDER BY id)) || ' / ' || "
                         "(SELECT count(*) FROM runs) || ' / ' || (SELECT group_concat(key || '=' || value) FROM meta)";
  char *before = tu_query(db, snap_sql);
  cr_assert(strstr(before, "ethanol,ethylamine,benzene"), "%s", before);
  cr_assert_eq(symlink(wd, link), 0);
  char *two = named_wf(dir, "two.yaml", "two", l2, other);
  char *two_in = named_wf(dir, "two_in.yaml", "two", l2, wd);
  char *two_link = named_wf(dir, "two_link.yaml", "two", l2, link);
  const char *how[3] = {"--workdir", "workdir:", "a symbolic link"};
  for (int i = 0; i < 3; i++) {
    int rc = i == 0 ? tu_se3(&out, "run %s --workdir %s", two, wd) : tu_se3(&out, "run %s", i == 1 ? two_in : two_link);
    cr_assert_eq(rc, 2, "%s: run took over workflow one's workdir (exit %d):\n%s", how[i], rc, out);
    cr_assert(strstr(out, "holds the results of the workflow 'one'") && strstr(out, "not of 'two'") &&
                  strstr(out, "one.yaml") && strstr(out, "delete"),
              "%s: the refusal does not name both workflows and the way out:\n%s", how[i], out);
    cr_assert_null(strstr(out, "deleted"), "%s:\n%s", how[i], out);
    char *now = tu_query(db, snap_sql);
    cr_assert_str_eq(now, before, "%s: the refused run changed the database", how[i]);
    free(now);
    free(out);
  }
  cr_assert_neq(access(other, F_OK), 0, "the refused run made the workflow's own workdir");
  /* --dry-run says so, writing nothing */
  cr_assert_eq(tu_se3(&out, "run %s --workdir %s --dry-run", two, wd), 2, "%s", out);
  cr_assert(strstr(out, "a run would be refused") && strstr(out, "'one'"), "%s", out);
  free(out);
  /* the same workflow: renamed in its own file, or copied under another name */
  char *renamed = named_wf(dir, "one.yaml", "one_renamed", l1, wd);
  cr_assert_eq(tu_se3(&out, "run %s", renamed), 0, "the workflow renamed in its file was refused:\n%s", out);
  free(out);
  char *copy = named_wf(dir, "copy.yaml", "one_renamed", l1, wd);
  cr_assert_eq(tu_se3(&out, "run %s", copy), 0, "a copy of the workflow was refused:\n%s", out);
  cr_assert(strstr(out, "nothing to do"), "%s", out);
  free(out);
  char *after = tu_query(db, "SELECT group_concat(name) FROM (SELECT name FROM molecules ORDER BY id)");
  cr_assert_str_eq(after, "ethanol,ethylamine,benzene\n");
  free(after);
  free(before);
  free(copy);
  free(renamed);
  free(two_link);
  free(two_in);
  free(two);
  free(one);
  free(l2);
  free(l1);
  free(dir);
}

/* Before (hardening IV): `upgrade` of a workdir of this schema said
 * "nothing to do" (exit 0) while a run held its lock. Now the lock is
 * tried first: held, upgrade names it and exits 1; free, nothing to do. */
Test(store_guard, upgrade_refuses_a_workdir_whose_lock_is_held) {
  char *dir = tu_tmpdir("guard_upgrade_lock");
  char *wf = small_wf(dir);
  char wd[1024];
  snprintf(wd, sizeof wd, "%s/work", dir);
  char *out = NULL;
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  free(out);
  /* flock(1) holds the lock file while upgrade runs, as a run would */
  int rc = tu_sh(&out, "flock %s/screen.db.lock %s upgrade %s 2>&1", wd, SE3_BINARY, wd);
  cr_assert_eq(rc, 1, "upgrade under a held lock exited %d:\n%s", rc, out);
  cr_assert(strstr(out, "is being written by another se3screen") && !strstr(out, "nothing to do"), "%s", out);
  free(out);
  cr_assert_eq(tu_se3(&out, "upgrade %s", wd), 0, "%s", out);
  cr_assert(strstr(out, "nothing to do"), "%s", out);
  free(out);
  free(wf);
  free(dir);
}
