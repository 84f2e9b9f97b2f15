/* A workdir's database in hostile or busy hands (issue 51, holes 5 and 7):
 *
 * - screen.db as a symbolic link (dangling, or to another workdir's
 *   database) or with a second name (a hard link) is refused by `run`,
 *   naming it, and nothing is written through it;
 * - a database another se3screen holds (its lock, its write transaction) is
 *   refused at once by its holder's pid, by `run` and by `upgrade` alike
 *   (the lock is taken before anything of the database is read);
 * - the reading verbs leave the workdir as they found it (no -wal, no -shm),
 *   and what they leave for a writer that came meanwhile stays its own;
 * - a lock held by another process is waited for within --timeout (query,
 *   export), and said to be one (report, query, export), never taken for a
 *   file that is not a database;
 * - check refuses a box of no or absurd size and an element list with an
 *   unknown or repeated symbol, at file:line:col with what is allowed;
 * - query --csv neutralises text a spreadsheet would run as a formula, as
 *   export does, and leaves numbers as they are;
 * - run in a folder it cannot write says so, naming the folder.
 *
 * A state another process must be in is held by this process (a lock, a
 * transaction), never hoped for after a sleep. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "pipeline/store.h"
#include "tests/testutil.h"

/* A workflow of one small set (20 molecules) in dir/wf.yaml, writing
 * dir/work; extra is more YAML at its end. */
static char *small_wf(const char *dir, const char *extra) {
  char yaml[2048];
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: work\nrun: {progress: none}\nsets:\n  a:\n    - {path: %s}\n"
           "stages:\n  ingest: {workers: 1}\n%s",
           tu_src("workflows/data/qm9_mini.sdf"), extra ? extra : "");
  return tu_write(dir, "wf.yaml", yaml);
}

/* dir/wf.yaml run once: dir/work/screen.db holds its molecules. */
static char *ran(const char *name, const char *extra) {
  char *dir = tu_tmpdir(name);
  char *wf = small_wf(dir, extra), *out = NULL;
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  free(out);
  free(wf);
  return dir;
}

static char *sha(const char *path) {
  char *out = NULL;
  cr_assert_eq(tu_sh(&out, "sha256sum < '%s'", path), 0);
  return out;
}

static int exists(const char *path) {
  struct stat sb;
  return lstat(path, &sb) == 0;
}

/* ---- hole 5: screen.db under another name -------------------------------- */

/* Before: a dangling link made the database at its target, outside the
 * workdir; a link to another workdir's database had that workdir's
 * molecules deleted and replaced (each workdir took its own lock); a hard
 * link was written as well. */
Test(hostile_store, screen_db_as_a_link_or_second_name_is_refused) {
  char *dir = ran("hostile_link", NULL);
  char other[1024], wd[1024], db[1100], far[1100];
  snprintf(other, sizeof other, "%s/work/screen.db", dir); /* the first workflow's database */
  snprintf(wd, sizeof wd, "%s/b", dir);
  snprintf(db, sizeof db, "%s/work/screen.db", wd);
  snprintf(far, sizeof far, "%s/elsewhere.db", dir);
  cr_assert_eq(tu_sh(NULL, "mkdir -p '%s/work' && printf 'CCO ethanol\\nCCN ethylamine\\n' > '%s/b.smi'", wd, wd), 0);
  char yaml[512];
  snprintf(yaml, sizeof yaml,
           "workflow: b\nworkdir: work\nrun: {progress: none}\nsets:\n  a:\n    - {path: b.smi}\n"
           "stages:\n  ingest: {workers: 1}\n");
  char *wf = tu_write(wd, "wf.yaml", yaml);
  char *sum0 = sha(other);
  long long n0 = tu_query_int(other, "SELECT count(*) FROM molecules");
  cr_assert_gt(n0, 0);
  /* dangling */
  cr_assert_eq(symlink(far, db), 0);
  char *out = NULL;
  int rc = tu_se3(&out, "run %s", wf);
  cr_assert_eq(rc, 1, "run wrote through a dangling screen.db link (exit %d):\n%s", rc, out);
  cr_assert(strstr(out, db) && strstr(out, "symbolic link"), "the message does not name the link:\n%s", out);
  cr_assert(!exists(far), "run made a database outside its workdir, at the link's target");
  free(out);
  /* to another workdir's database */
  cr_assert_eq(unlink(db), 0);
  cr_assert_eq(symlink(other, db), 0);
  rc = tu_se3(&out, "run %s", wf);
  cr_assert_eq(rc, 1, "run wrote through a link to another workdir's database (exit %d):\n%s", rc, out);
  cr_assert(strstr(out, db) && strstr(out, "symbolic link"), "%s", out);
  free(out);
  char *sum1 = sha(other);
  cr_assert_str_eq(sum1, sum0, "the other workdir's database was changed through the link");
  free(sum1);
  cr_assert_eq(tu_query_int(other, "SELECT count(*) FROM molecules"), n0);
  struct stat sb;
  cr_assert(lstat(db, &sb) == 0 && S_ISLNK(sb.st_mode), "the link was replaced");
  /* a second name of the same file */
  cr_assert_eq(unlink(db), 0);
  cr_assert_eq(link(other, db), 0);
  rc = tu_se3(&out, "run %s", wf);
  cr_assert_eq(rc, 1, "run wrote a database with two names (exit %d):\n%s", rc, out);
  cr_assert(strstr(out, db) && strstr(out, "hard links"), "%s", out);
  free(out);
  sum1 = sha(other);
  cr_assert_str_eq(sum1, sum0, "the database was changed through its second name");
  free(sum1);
  /* its write-ahead log a link (SQLite refused it as "unable to open
   * database file", naming nothing) */
  cr_assert_eq(unlink(db), 0);
  char wal[1200];
  snprintf(wal, sizeof wal, "%s-wal", db);
  char *target = tu_write(dir, "precious.txt", "someone's file\n");
  cr_assert_eq(symlink(target, wal), 0);
  rc = tu_se3(&out, "run %s", wf);
  cr_assert_eq(rc, 1, "%s", out);
  cr_assert(strstr(out, wal) && strstr(out, "symbolic link"), "the message does not name the -wal:\n%s", out);
  free(out);
  char *t = tu_read(target, NULL);
  cr_assert_str_eq(t, "someone's file\n", "the link's target was changed");
  free(t);
  free(target);
  cr_assert_eq(unlink(wal), 0);
  /* and a file of its own is written */
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  free(out);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM molecules"), 2);
  free(sum0);
  free(wf);
  free(dir);
}

/* Before: run opened the database and read it before it took the lock, so
 * a database another run held (here in rollback-journal mode, where its
 * writer's lock stops readers) was waited for and then refused as "cannot
 * read: database is locked", without the holder. */
Test(hostile_store, a_database_in_use_is_refused_by_its_holder_at_once) {
  char *dir = ran("hostile_in_use", "store: {journal: delete, busy_timeout_ms: 1000}\n");
  char db[1100];
  snprintf(db, sizeof db, "%s/work/screen.db", dir);
  struct store h;
  struct se3_error err = {0};
  cr_assert_eq(store_open(&h, db, STORE_WRITE, "delete", 1000, &err), 0, "%s", se3_error_str(&err).s);
  cr_assert_eq(store_lock(&h, &err), 0, "%s", se3_error_str(&err).s);
  cr_assert_eq(store_exec(h.db, "BEGIN EXCLUSIVE", &err), 0, "%s", se3_error_str(&err).s);
  char *out = NULL, want[64];
  snprintf(want, sizeof want, "pid %d", (int)getpid());
  int rc = tu_se3(&out, "run %s/wf.yaml", dir);
  cr_assert_eq(rc, 1, "%s", out);
  cr_assert(strstr(out, db) && strstr(out, "being written by another se3screen") && strstr(out, want),
            "the refusal does not name the holder (%s):\n%s", want, out);
  free(out);
  cr_assert_eq(store_exec(h.db, "ROLLBACK", &err), 0, "%s", se3_error_str(&err).s);
  store_close(&h);
  cr_assert_eq(tu_se3(&out, "run %s/wf.yaml", dir), 0, "%s", out);
  free(out);
  free(dir);
}

/* ---- hole 7 (b): upgrade takes the lock first ------------------------------ */

/* A database of schema version 1, as the first release wrote it. */
static void make_v1(const char *path) {
  sqlite3 *db = NULL;
  struct se3_error err = {0};
  char sql[128];
  cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
  cr_assert_eq(store_exec(db, store_schema_sql, &err), 0, "%s", se3_error_str(&err).s);
  snprintf(sql, sizeof sql, "PRAGMA application_id=%d; PRAGMA user_version=1", STORE_APPLICATION_ID);
  cr_assert_eq(store_exec(db, sql, &err), 0, "%s", se3_error_str(&err).s);
  sqlite3_close(db);
}

/* One upgrade in the middle of its migration (its lock and its write
 * transaction, held here): a second is refused at once, naming it. Before:
 * the second waited for the first's transaction (10 s), and, had the first
 * committed meanwhile, went on to print "schema 1 -> 11" and "nothing kept"
 * of a database the first had converted. */
Test(hostile_store, a_second_upgrade_is_refused_by_the_first_at_once) {
  char *dir = tu_tmpdir("hostile_upgrade");
  char db[1100];
  snprintf(db, sizeof db, "%s/screen.db", dir);
  make_v1(db);
  struct store h;
  struct se3_error err = {0};
  cr_assert_eq(store_open(&h, db, STORE_READONLY, NULL, 1000, &err), 0, "%s", se3_error_str(&err).s);
  cr_assert_eq(store_lock(&h, &err), 0, "%s", se3_error_str(&err).s);
  sqlite3 *mig = NULL;
  cr_assert_eq(sqlite3_open(db, &mig), SQLITE_OK);
  cr_assert_eq(store_exec(mig, "BEGIN IMMEDIATE", &err), 0, "%s", se3_error_str(&err).s);
  char *out = NULL, want[64];
  snprintf(want, sizeof want, "pid %d", (int)getpid());
  int rc = tu_se3(&out, "upgrade %s", dir);
  cr_assert_eq(rc, 1, "%s", out);
  cr_assert(strstr(out, "being written by another se3screen") && strstr(out, want),
            "the second upgrade does not name the first (%s):\n%s", want, out);
  cr_assert(!strstr(out, "schema version 1 ->"), "%s", out);
  free(out);
  store_exec(mig, "ROLLBACK", &err);
  sqlite3_close(mig);
  store_close(&h);
  cr_assert_eq(tu_query_int(db, "PRAGMA user_version"), 1, "the refused upgrade changed the database");
  /* alone, it converts; after it, there is nothing to do */
  char step[64];
  snprintf(step, sizeof step, "schema version 1 -> %d", STORE_SCHEMA_VERSION);
  cr_assert_eq(tu_se3(&out, "upgrade %s", dir), 0, "%s", out);
  cr_assert(strstr(out, step), "%s", out);
  free(out);
  cr_assert_eq(tu_se3(&out, "upgrade %s", dir), 0, "%s", out);
  cr_assert(strstr(out, "nothing to do") && !strstr(out, "->"), "%s", out);
  free(out);
  free(dir);
}

/* ---- hole 7 (a): reading leaves the workdir as it was -------------------- */

static char *names_in(const char *dir) {
  char *out = NULL;
  cr_assert_eq(tu_sh(&out, "ls -A '%s'", dir), 0);
  return out;
}

/* Before: every one of these left screen.db-wal and screen.db-shm. */
Test(hostile_store, reading_verbs_leave_no_wal_or_shm) {
  char *dir = ran("hostile_tidy", NULL);
  char wd[1024];
  snprintf(wd, sizeof wd, "%s/work", dir);
  char *before = names_in(wd);
  cr_assert(!strstr(before, "-wal") && !strstr(before, "-shm"), "the run left them: %s", before);
  const char *cmds[] = {"run --dry-run %s/wf.yaml",
                        "status %s/wf.yaml",
                        "status %s/work",
                        "top %s/work",
                        "query %s/work 'SELECT count(*) FROM molecules'",
                        "export %s/work --format csv -o %s/x.csv",
                        "report %s/work -o %s/r.html --no-depict",
                        "verify %s/work"};
  for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
    char *out = NULL;
    int rc = tu_se3(&out, cmds[i], dir, dir);
    if (!strncmp(cmds[i], "top", 3)) /* nothing scored in this workdir: top says so */
      cr_assert(rc == 1 && strstr(out, "nothing to rank"), "`%s`: exit %d: %s", cmds[i], rc, out);
    else
      cr_assert_eq(rc, 0, "`%s`: %s", cmds[i], out);
    char *after = names_in(wd);
    cr_assert_str_eq(after, before, "`%s` left the workdir changed", cmds[i]);
    free(after);
    free(out);
  }
  free(before);
  free(dir);
}

/* What a reader leaves for a connection that came while it read stays
 * that connection's: the reader's close takes nothing from under it, its
 * commit is read, and its own close removes them (SQLite's). */
Test(hostile_store, a_reader_leaves_a_later_connection_its_wal) {
  char *dir = ran("hostile_tidy_busy", NULL);
  char db[1100], wal[1200], shm[1200];
  struct se3_error err = {0};
  snprintf(db, sizeof db, "%s/work/screen.db", dir);
  snprintf(wal, sizeof wal, "%s-wal", db);
  snprintf(shm, sizeof shm, "%s-shm", db);
  struct store r;
  cr_assert_eq(store_open(&r, db, STORE_READONLY, NULL, 1000, &err), 0, "%s", se3_error_str(&err).s);
  cr_assert(exists(wal) && exists(shm), "the premise: a reader of a WAL database makes both");
  sqlite3 *w = NULL;
  cr_assert_eq(sqlite3_open(db, &w), SQLITE_OK);
  cr_assert_eq(sqlite3_exec(w, "SELECT count(*) FROM meta", NULL, NULL, NULL), SQLITE_OK, "%s", sqlite3_errmsg(w));
  store_close(&r);
  cr_assert(exists(wal) && exists(shm), "the reader took the WAL from a connection still open");
  cr_assert_eq(sqlite3_exec(w, "INSERT INTO meta VALUES('hostile', 'x')", NULL, NULL, NULL), SQLITE_OK, "%s",
               sqlite3_errmsg(w));
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM meta WHERE key = 'hostile'"), 1);
  sqlite3_close(w);
  cr_assert(!exists(wal) && !exists(shm), "SQLite's last connection left them");
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM meta WHERE key = 'hostile'"), 1);
  free(dir);
}

/* ---- hole 7 (c), (d): a lock held by another process -------------------- */

/* Before: query --timeout 1 waited 10 s and said "cannot open read-only:
 * database is locked" (exit 2), export --timeout 2 waited 40 s, and report
 * called the file "not an se3screen result database". */
Test(hostile_store, a_locked_database_is_waited_for_within_timeout_and_called_locked) {
  char *dir = tu_tmpdir("hostile_locked");
  char db[1100];
  struct se3_error err = {0};
  snprintf(db, sizeof db, "%s/screen.db", dir);
  struct store h;
  cr_assert_eq(store_open(&h, db, STORE_WRITE, "delete", 1000, &err), 0, "%s", se3_error_str(&err).s);
  /* a writer's lock in rollback-journal mode stops every reader */
  cr_assert_eq(store_exec(h.db, "BEGIN EXCLUSIVE", &err), 0, "%s", se3_error_str(&err).s);
  char *out = NULL;
  double t0 = tu_now();
  int rc = tu_se3(&out, "query %s 'SELECT count(*) FROM molecules' --timeout 1", db);
  double took = tu_now() - t0;
  cr_assert_eq(rc, 1, "%s", out);
  cr_assert(strstr(out, db) && strstr(out, "in use") && strstr(out, "--timeout"), "%s", out);
  cr_assert_lt(took, 8.0, "query --timeout 1 took %.1f s on a locked database", took);
  free(out);
  t0 = tu_now();
  rc = tu_se3(&out, "export %s --format csv -o %s/x.csv --timeout 2", db, dir);
  took = tu_now() - t0;
  cr_assert_eq(rc, 1, "%s", out);
  cr_assert(strstr(out, db) && strstr(out, "in use") && strstr(out, "--timeout"), "%s", out);
  cr_assert_lt(took, 8.0, "export --timeout 2 took %.1f s on a locked database", took);
  char csv[1200];
  snprintf(csv, sizeof csv, "%s/x.csv", dir);
  cr_assert(!exists(csv), "export wrote a file");
  free(out);
  /* report has no --timeout: SQLite's 10 s */
  rc = tu_se3(&out, "report %s -o %s/r.html --no-depict", db, dir);
  cr_assert_eq(rc, 1, "%s", out);
  cr_assert(strstr(out, db) && strstr(out, "in use") && !strstr(out, "not an se3screen"), "%s", out);
  free(out);
  cr_assert_eq(store_exec(h.db, "ROLLBACK", &err), 0, "%s", se3_error_str(&err).s);
  store_close(&h);
  cr_assert_eq(tu_se3(&out, "query %s 'SELECT count(*) AS n FROM molecules' --csv --timeout 1", db), 0, "%s", out);
  cr_assert_str_eq(out, "n\n0\n");
  free(out);
  free(dir);
}

/* ---- hole 7 (e): check refuses a box and elements that cannot work ---------- */

/* Before: all of these passed check (the box's size was refused only when
 * the dock stage began, the elements when a stage read them). */
Test(hostile_store, check_refuses_bad_box_sizes_and_element_lists) {
  char *dir = tu_tmpdir("hostile_check");
  char *wf = tu_write(dir, "wf.yaml",
                      "workflow: t\n"
                      "sets:\n"
                      "  library:\n"
                      "    - {path: lib.smi}\n"
                      "stages:\n"
                      "  ingest: {elements: [C, N, Cl, CL]}\n"
                      "  dock:\n"
                      "    receptor: r.pdbqt\n"
                      "    center: [1, 2, 3]\n"
                      "    size: [0, -10, 1e9]\n"
                      "  graph:\n"
                      "    elements: [H, H, N, O, Xx]\n");
  char *out = NULL;
  int rc = tu_se3(&out, "check --no-inputs %s", wf);
  cr_assert_eq(rc, 2, "%s", out);
  static const char *const want[] = {
      "wf.yaml:10:12: stages.dock.size.0: must be more than 0 and at most 200, got 0",
      "wf.yaml:10:15: stages.dock.size.1: must be more than 0 and at most 200, got -10",
      "wf.yaml:10:20: stages.dock.size.2: must be more than 0 and at most 200, got 1e9",
      "wf.yaml:12:19: stages.graph.elements.1: 'H' is listed twice (first as item 0",
      "wf.yaml:12:28: stages.graph.elements.4: 'Xx' is not a chemical element",
      "H to Og",
      "wf.yaml:6:33: stages.ingest.elements.3: 'CL' is listed twice (first as item 2, 'Cl')",
  };
  for (size_t i = 0; i < sizeof want / sizeof *want; i++)
    cr_expect(strstr(out, want[i]), "no '%s' in:\n%s", want[i], out);
  free(out);
  free(wf);
  /* and what is right passes */
  wf = tu_write(dir, "ok.yaml",
                "workflow: t\nsets:\n  library:\n    - {path: lib.smi}\nstages:\n  ingest: {elements: [C, N, cl]}\n"
                "  dock: {receptor: r.pdbqt, center: [1, 2, 3], size: [0.5, 20, 200]}\n"
                "  graph: {elements: [H, C, N, O]}\n");
  cr_assert_eq(tu_se3(&out, "check --no-inputs %s", wf), 0, "%s", out);
  free(out);
  free(wf);
  free(dir);
}

/* ---- hole 7 (f): formulas in query --csv ------------------------------------ */

/* Before: query --csv printed '=1+1' and the rest as they were, a formula
 * to a spreadsheet; export wrote them neutralised. Now both alike, numbers
 * (a REAL -1.5, text '-1.5', an INTEGER -7) untouched. */
Test(hostile_store, query_csv_neutralises_formulas_as_export_does) {
  char *dir = tu_tmpdir("hostile_csv");
  char db[1100];
  struct se3_error err = {0};
  snprintf(db, sizeof db, "%s/screen.db", dir);
  struct store h;
  cr_assert_eq(store_open(&h, db, STORE_WRITE, "wal", 1000, &err), 0, "%s", se3_error_str(&err).s);
  store_close(&h);
  const char *sql = "SELECT '=1+1' AS a, '+cmd' AS b, '-2+3' AS c, '@SUM(A1)' AS d, char(9) || 'x' AS e, "
                    "char(13) || 'y' AS f, -1.5 AS g, '-1.5' AS h, -7 AS i, 'plain, text' AS j, "
                    "'=A1' AS [=head]";
  const char *want = "a,b,c,d,e,f,g,h,i,j,'=head\n"
                     "'=1+1,'+cmd,'-2+3,'@SUM(A1),'\tx,\"'\ry\",-1.5,-1.5,-7,\"plain, text\",'=A1\n";
  char *out = NULL;
  cr_assert_eq(tu_sh(&out, "%s query '%s' \"%s\" --csv 2>/dev/null", SE3_BINARY, db, sql), 0, "%s", out);
  cr_assert_str_eq(out, want);
  free(out);
  cr_assert_eq(tu_se3(&out, "export %s --format csv -o %s/e.csv --query \"%s\"", db, dir, sql), 0, "%s", out);
  free(out);
  char path[1200];
  snprintf(path, sizeof path, "%s/e.csv", dir);
  char *file = tu_read(path, NULL);
  cr_assert_str_eq(file, want, "export and query --csv differ");
  free(file);
  free(dir);
}

/* ---- hole 7 (g): a folder that cannot be written ------------------------- */

/* Before: "screen.db: cannot read: attempt to write a readonly database". */
Test(hostile_store, run_in_a_read_only_workdir_says_it_cannot_write_there) {
  char *dir = ran("hostile_rodir", NULL);
  char wd[1024];
  snprintf(wd, sizeof wd, "%s/work", dir);
  const char *prefix = "";
  if (geteuid() == 0) {
    if (tu_sh(NULL, "command -v setpriv") != 0) cr_skip_test("root without setpriv: no user who cannot write");
    prefix = "setpriv --reuid=65534 --regid=65534 --clear-groups ";
  }
  cr_assert_eq(tu_sh(NULL, "chmod -R a+rX '%s' && chmod 0555 '%s'", dir, wd), 0);
  if (tu_sh(NULL, "%stest -r '%s/wf.yaml' -a -x '%s'", prefix, dir, SE3_BINARY) != 0 ||
      tu_sh(NULL, "%stouch '%s/probe' 2>/dev/null", prefix, wd) == 0) {
    chmod(wd, 0755);
    cr_skip_test("no user here who can read the workdir and not write it");
  }
  char *out = NULL;
  int rc = tu_sh(&out, "%s%s run '%s/wf.yaml'", prefix, SE3_BINARY, dir);
  chmod(wd, 0755);
  cr_assert_eq(rc, 1, "%s", out);
  cr_assert(strstr(out, "cannot write") && strstr(out, wd) && !strstr(out, "cannot read"), "%s", out);
  free(out);
  free(dir);
}
