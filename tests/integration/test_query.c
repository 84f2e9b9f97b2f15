/* `se3screen query` is read-only and bounded, and the read-only verbs
 * (status, top, query) read databases they cannot write: hostile queries
 * are refused with exit status 2 and change nothing, --timeout and
 * --max-rows/--max-bytes stop what would run or print without end, a
 * database in a read-only directory is read (as immutable), and every file
 * that cannot be read gives a non-zero exit and a message naming it. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pipeline/store.h"
#include "tests/testutil.h"

/* A workdir with one ingested set (20 molecules, 1 reject); returns the
 * folder holding the workdir `work`. */
static char *ingested(const char *name) {
  /* a previous run may have left folders read-only (a failed assertion
   * stops a test before it gives the permission back) */
  tu_sh(NULL, "chmod -R u+rwx '%s/%s' 2>/dev/null", SE3_TEST_TMP, name);
  char *dir = tu_tmpdir(name);
  char yaml[1024];
  snprintf(yaml, sizeof yaml, "workflow: t\nworkdir: work\nrun: {progress: none}\nsets:\n  a:\n    - {path: %s}\n",
           tu_src("workflows/data/qm9_mini.sdf"));
  char *wf = tu_write(dir, "wf.yaml", yaml);
  char *out = NULL;
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  free(out);
  free(wf);
  return dir;
}

/* The bytes of a file as a hash, and the names in a folder, to show that
 * nothing was written. */
static unsigned long long file_hash(const char *path) {
  size_t n = 0;
  char *b = tu_read(path, &n);
  cr_assert(b, "cannot read %s", path);
  unsigned long long h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; i++)
    h = (h ^ (unsigned char)b[i]) * 1099511628211ULL;
  free(b);
  return h;
}

/* The names in a folder, less the WAL index and log a read-only connection
 * to a WAL database may leave (SQLite's own, and empty once checkpointed). */
static char *listing(const char *dir) {
  char *out = NULL;
  cr_assert_eq(tu_sh(&out, "ls -A '%s' | grep -v -e '-shm$' -e '-wal$'", dir), 0);
  return out;
}

static char *raw_listing(const char *dir) {
  char *out = NULL;
  cr_assert_eq(tu_sh(&out, "ls -A '%s'", dir), 0);
  return out;
}

Test(query, refuses_everything_but_reading) {
  char *dir = ingested("query_hostile");
  char wd[1100], db[1200], copy[1200];
  snprintf(wd, sizeof wd, "%s/work", dir);
  snprintf(db, sizeof db, "%s/screen.db", wd);
  snprintf(copy, sizeof copy, "%s/copy.db", dir);
  unsigned long long before = file_hash(db);
  char *files_before = listing(wd);
  char *files_dir = listing(dir);
  /* Each must be refused before it runs: exit 2, "not allowed". */
  char vacuum_into[1400], attach[1400];
  snprintf(vacuum_into, sizeof vacuum_into, "VACUUM INTO '%s'", copy);
  snprintf(attach, sizeof attach, "ATTACH '%s' AS other", copy);
  const char *hostile[] = {
      "INSERT INTO meta VALUES('k', 'v')",
      "UPDATE molecules SET name = 'x'",
      "DELETE FROM molecules",
      "INSERT INTO no_such_table VALUES(1)",
      "UPDATE sqlite_master SET sql = 'x'",
      "REPLACE INTO meta VALUES('k', 'v')",
      "WITH m AS (SELECT 1) DELETE FROM rejects",
      "CREATE TABLE t(a)",
      "CREATE TEMP TABLE t(a)",
      "CREATE VIEW v AS SELECT 1",
      "DROP VIEW ranked_hits",
      "DROP TABLE rejects",
      "ALTER TABLE meta ADD COLUMN c",
      "CREATE INDEX i ON meta(value)",
      "PRAGMA writable_schema=1",
      "PRAGMA journal_mode=delete",
      "PRAGMA user_version=7",
      "PRAGMA query_only=0",
      "VACUUM",
      vacuum_into,
      attach,
      "SELECT load_extension('libm.so.6')",
      "SELECT fts3_tokenizer('simple', x'4141414141414141')",
      "BEGIN IMMEDIATE",
      "SAVEPOINT s",
      "ANALYZE",
      "REINDEX",
      /* every statement is checked before the first one runs */
      "SELECT 'first-statement-ran'; DELETE FROM molecules",
      "SELECT * FROM pragma_journal_mode",
  };
  for (size_t i = 0; i < sizeof hostile / sizeof hostile[0]; i++) {
    char *out = NULL;
    int rc = tu_se3(&out, "query %s \"%s\" --csv", db, hostile[i]);
    cr_expect_eq(rc, 2, "%s: exit %d (want 2):\n%s", hostile[i], rc, out);
    cr_expect(strstr(out, "not allowed") && strstr(out, "read-only"), "%s:\n%s", hostile[i], out);
    cr_expect(!strstr(out, "first-statement-ran"), "%s ran a statement before refusing:\n%s", hostile[i], out);
    free(out);
  }
  /* Nothing changed and nothing was left behind. */
  cr_assert_eq(file_hash(db), before, "the database changed");
  char *files_after = listing(wd);
  cr_assert_str_eq(files_after, files_before);
  free(files_after);
  files_after = listing(dir);
  cr_assert_str_eq(files_after, files_dir, "VACUUM INTO or ATTACH left a file");
  cr_assert_eq(access(copy, F_OK), -1);
  free(files_after);
  free(files_before);
  free(files_dir);
  free(dir);
}

/* The system SQLite has the two-argument fts3_tokenizer() on: it stores a
 * pointer taken from the query, which SQLite later calls as a tokenizer the
 * moment an FTS3 table is read (before: a segfault, exit 139). */
Test(query, fts3_tokenizer_cannot_make_sqlite_call_an_address) {
  char *dir = ingested("query_fts3");
  char db[1200];
  snprintf(db, sizeof db, "%s/work/screen.db", dir);
  sqlite3 *h = NULL;
  cr_assert_eq(sqlite3_open(db, &h), SQLITE_OK);
  cr_assert_eq(sqlite3_exec(h, "CREATE VIRTUAL TABLE notes USING fts3(x); INSERT INTO notes VALUES('alpha beta')", NULL,
                            NULL, NULL),
               SQLITE_OK, "%s", sqlite3_errmsg(h));
  sqlite3_close(h);
  char *out = NULL;
  int rc = tu_se3(&out,
                  "query %s \"SELECT fts3_tokenizer('simple', x'4141414141414141'); "
                  "SELECT x FROM notes WHERE notes MATCH 'alpha'\"",
                  db);
  cr_assert_eq(rc, 2, "exit %d:\n%s", rc, out);
  cr_assert(strstr(out, "not allowed: function fts3_tokenizer()"), "%s", out);
  free(out);
  /* Reading the FTS table itself still works. */
  cr_assert_eq(tu_se3(&out, "query %s \"SELECT x FROM notes WHERE notes MATCH 'alpha'\" --csv", db), 0, "%s", out);
  cr_assert_str_eq(out, "x\nalpha beta\n");
  free(out);
  free(dir);
}

Test(query, timeout_and_size_limits) {
  char *dir = ingested("query_limits");
  char db[1200];
  snprintf(db, sizeof db, "%s/work/screen.db", dir);
  const char *forever = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) ";
  char *out = NULL;
  /* A query that never ends stops at --timeout (the outer timeout only keeps
   * a broken build from hanging the suite). Exit 1 and the message show that
   * --timeout stopped it (the outer one would give 124); the bound on the
   * wall clock only catches a timer that fires far too late (about 1.1 s
   * here: 5 s, as it was, can pass on a loaded machine's start-up alone). */
  double t0 = tu_now();
  int rc = tu_sh(&out, "timeout 60 %s query %s \"%sSELECT count(*) FROM c\" --timeout 1", SE3_BINARY, db, forever);
  double took = tu_now() - t0;
  cr_log_info("--timeout 1 stopped the query after %.2f s", took);
  cr_assert_eq(rc, 1, "exit %d:\n%s", rc, out);
  cr_assert(strstr(out, "stopped after 1 s (--timeout)"), "%s", out);
  cr_assert_lt(took, 30.0, "took %.1f s", took);
  free(out);
  /* Endless rows stop at --max-rows: the rows before the cut are printed,
   * the output stays well-formed, stderr says so, exit 1. */
  rc = tu_sh(&out, "timeout 60 %s query %s \"%sSELECT x FROM c\" --csv --max-rows 3 2>/dev/null", SE3_BINARY, db,
             forever);
  cr_assert_eq(rc, 1, "exit %d:\n%s", rc, out);
  cr_assert_str_eq(out, "x\n1\n2\n3\n");
  free(out);
  rc = tu_sh(&out, "timeout 60 %s query %s \"%sSELECT x FROM c\" --json --max-rows 2", SE3_BINARY, db, forever);
  cr_assert_eq(rc, 1, "exit %d:\n%s", rc, out);
  cr_assert(strstr(out, "[\n  {\"x\": 1},\n  {\"x\": 2}\n]\n"), "%s", out);
  cr_assert(strstr(out, "--max-rows 2"), "%s", out);
  free(out);
  /* The default limit stops an endless result too. */
  rc = tu_sh(&out, "timeout 60 %s query %s \"%sSELECT x FROM c\" --csv | tail -n 2", SE3_BINARY, db, forever);
  cr_assert(strstr(out, "1000000\n") && strstr(out, "--max-rows 1000000"), "%s", out);
  free(out);
  /* --max-bytes counts the values' bytes: 10 rows of 10 bytes fit in 100. */
  rc = tu_sh(&out, "timeout 60 %s query %s \"%sSELECT printf('%%010d', x) AS v FROM c\" --csv --max-bytes 100",
             SE3_BINARY, db, forever);
  cr_assert_eq(rc, 1, "exit %d:\n%s", rc, out);
  cr_assert(strstr(out, "0000000010\n") && !strstr(out, "0000000011"), "%s", out);
  cr_assert(strstr(out, "--max-bytes 100"), "%s", out);
  free(out);
  /* Values past SQLite's length limit are an error, not a gigabyte. */
  cr_assert_eq(tu_se3(&out, "query %s \"SELECT length(zeroblob(1000000000))\"", db), 1, "%s", out);
  free(out);
  /* Bad limits are usage errors. */
  cr_assert_eq(tu_se3(&out, "query %s \"SELECT 1\" --timeout -1", db), 2, "%s", out);
  free(out);
  cr_assert_eq(tu_se3(&out, "query %s \"SELECT 1\" --max-rows lots", db), 2, "%s", out);
  free(out);
  free(dir);
}

Test(query, reading_still_works) {
  char *dir = ingested("query_reading");
  char wd[1100];
  snprintf(wd, sizeof wd, "%s/work", dir);
  char *out = NULL;
  cr_assert_eq(
      tu_se3(&out, "query %s \"SELECT count(*) AS n FROM molecules; SELECT count(*) AS r FROM rejects\" --csv", wd), 0,
      "%s", out);
  cr_assert_str_eq(out, "n\n20\nr\n1\n");
  free(out);
  /* views (the schema's ranked_hits, with the schema untrusted), CTEs,
   * read-only pragmas and their table-valued forms, JSON functions */
  cr_assert_eq(tu_se3(&out, "query %s \"SELECT count(*) AS n FROM ranked_hits\" --json", wd), 0, "%s", out);
  cr_assert_str_eq(out, "[\n  {\"n\": 0}\n]\n");
  free(out);
  cr_assert_eq(tu_se3(&out,
                      "query %s \"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 4) "
                      "SELECT sum(x) AS s FROM c\" --csv",
                      wd),
               0, "%s", out);
  cr_assert_str_eq(out, "s\n10\n");
  free(out);
  cr_assert_eq(tu_se3(&out, "query %s \"PRAGMA user_version\" --csv", wd), 0, "%s", out);
  char version[64];
  snprintf(version, sizeof version, "user_version\n%d\n", STORE_SCHEMA_VERSION);
  cr_assert_str_eq(out, version);
  free(out);
  cr_assert_eq(tu_se3(&out, "query %s \"PRAGMA table_info(meta)\" --csv", wd), 0, "%s", out);
  cr_assert(strstr(out, "0,key,TEXT"), "%s", out);
  free(out);
  cr_assert_eq(tu_se3(&out, "query %s \"SELECT name FROM pragma_table_info('meta') ORDER BY cid\" --csv", wd), 0, "%s",
               out);
  cr_assert_str_eq(out, "name\nkey\nvalue\n");
  free(out);
  cr_assert_eq(tu_se3(&out, "query %s \"SELECT value FROM json_each('[5,6]')\" --csv", wd), 0, "%s", out);
  cr_assert_str_eq(out, "value\n5\n6\n");
  free(out);
  /* (nothing scored here: top says so and fails, reading ranked_hits and
   * scores through the same guard) */
  cr_assert_eq(tu_se3(&out, "top %s -n 3", wd), 1, "%s", out);
  cr_assert(strstr(out, "nothing to rank") && strstr(out, "no molecule has been scored"), "%s", out);
  free(out);
  free(dir);
}

/* Runs the next command as a user who cannot write dir: nobody when we are
 * root (root writes anywhere), else ourselves with dir made 0555. Returns the
 * prefix for the command, NULL when no such user can be had. */
static const char *as_reader(const char *dir) {
  static char prefix[128];
  if (geteuid() == 0) {
    if (tu_sh(NULL, "command -v setpriv") != 0) return NULL;
    snprintf(prefix, sizeof prefix, "setpriv --reuid=65534 --regid=65534 --clear-groups ");
  } else {
    prefix[0] = 0;
  }
  cr_assert_eq(chmod(dir, 0555), 0);
  /* the premise: the reader can reach the folder and run se3screen, but
   * cannot create a file there */
  if (tu_sh(NULL, "%stest -x '%s' -a -x '%s'", prefix, dir, SE3_BINARY) != 0) return NULL;
  if (tu_sh(NULL, "%stouch '%s/probe'", prefix, dir) == 0) return NULL;
  return prefix;
}

/* A WAL database in a folder the reader cannot write (a read-only mount, a
 * colleague's workdir) has no -shm and cannot get one. Before: "not a
 * se3screen database" from query and top, and status printed that and
 * exited 0. */
Test(query, read_only_directory) {
  char *dir = ingested("query_rodir");
  char ro[1100], db[1200], shelf[1100];
  snprintf(ro, sizeof ro, "%s/ro", dir);
  snprintf(shelf, sizeof shelf, "%s/ro_wal", dir);
  cr_assert_eq(tu_sh(NULL, "mkdir -p '%s' '%s' && cp '%s/work/screen.db' '%s/'", ro, shelf, dir, ro), 0);
  snprintf(db, sizeof db, "%s/screen.db", ro);
  /* A second copy whose last transaction is still in its -wal (a writer
   * that died before checkpointing), without the -shm. */
  char wdb[1200];
  snprintf(wdb, sizeof wdb, "%s/w.db", dir);
  cr_assert_eq(tu_sh(NULL, "cp '%s' '%s'", db, wdb), 0);
  pid_t pid = fork();
  if (pid == 0) {
    sqlite3 *h = NULL;
    if (sqlite3_open(wdb, &h) != SQLITE_OK ||
        sqlite3_exec(h, "PRAGMA wal_autocheckpoint=0; INSERT INTO meta VALUES('in-wal', 'x')", NULL, NULL, NULL))
      _exit(1);
    _exit(0); /* no close: no checkpoint */
  }
  int st = 0;
  cr_assert_eq(waitpid(pid, &st, 0), pid);
  cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  cr_assert_eq(tu_sh(NULL, "cp '%s' '%s/screen.db' && cp '%s-wal' '%s/screen.db-wal' && test -s '%s/screen.db-wal'",
                     wdb, shelf, wdb, shelf, shelf),
               0);
  const char *who = as_reader(ro);
  if (!who) cr_skip_test("cannot make a folder this test's user cannot write (root without setpriv?)");
  cr_assert_not_null(as_reader(shelf));
  char *out = NULL;
  int rc = tu_sh(&out, "%s%s status %s", who, SE3_BINARY, db);
  cr_expect_eq(rc, 0, "exit %d:\n%s", rc, out);
  cr_expect(strstr(out, "1/1") && strstr(out, "last error: none") && !strstr(out, "not a se3screen"), "%s", out);
  free(out);
  rc = tu_sh(&out, "%s%s query %s \"SELECT count(*) FROM molecules\" --csv", who, SE3_BINARY, ro);
  cr_expect_eq(rc, 0, "exit %d:\n%s", rc, out);
  cr_expect_str_eq(out, "count(*)\n20\n");
  free(out);
  rc = tu_sh(&out, "%s%s top %s -n 2", who, SE3_BINARY, ro);
  cr_expect(rc == 1 && strstr(out, "nothing to rank"), "exit %d (nothing scored: 1):\n%s", rc, out);
  free(out);
  /* What only the -wal holds cannot be read without a -shm: the answer is
   * the database as of its last checkpoint, and stderr says so. */
  rc = tu_sh(&out, "%s%s query %s \"SELECT count(*) AS n FROM meta WHERE key = 'in-wal'\" --csv", who, SE3_BINARY,
             shelf);
  cr_expect_eq(rc, 0, "exit %d:\n%s", rc, out);
  cr_expect(strstr(out, "n\n0\n") && strstr(out, "last checkpoint") && strstr(out, "screen.db-wal"), "%s", out);
  free(out);
  /* and nothing was created in either folder */
  char *files = raw_listing(ro);
  cr_expect_str_eq(files, "screen.db\n");
  free(files);
  files = raw_listing(shelf);
  cr_expect_str_eq(files, "screen.db\nscreen.db-wal\n");
  free(files);
  chmod(ro, 0755);
  chmod(shelf, 0755);
  free(dir);
}

/* status, query and top on what is not a readable se3screen database: a
 * non-zero exit and a message with the file and the real reason (before:
 * status exited 0 on all of these but the last two, and hung on the FIFO). */
Test(query, unreadable_files_fail_with_the_reason) {
  char *dir = ingested("query_bad");
  char db[1200], p[1300];
  snprintf(db, sizeof db, "%s/work/screen.db", dir);
  tu_write(dir, "text.db", "not a database at all\n");
  cr_assert_eq(tu_sh(NULL, "head -c 300000 '%s' > '%s/truncated.db' && mkfifo '%s/fifo.db'", db, dir, dir), 0);
  struct {
    const char *name, *reason;
  } cases[] = {
      {"text.db", "not a se3screen database (not an SQLite file)"},
      {"truncated.db", "damaged: database disk image is malformed"},
      {"fifo.db", "not a regular file (a FIFO)"},
      {"wf.yaml/screen.db", "Not a directory"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    snprintf(p, sizeof p, "%s/%s", dir, cases[i].name);
    char *out = NULL;
    int rc = tu_sh(&out, "timeout 20 %s status %s", SE3_BINARY, p);
    cr_expect_eq(rc, 1, "status %s: exit %d\n%s", cases[i].name, rc, out);
    cr_expect(strstr(out, p) && strstr(out, cases[i].reason), "status %s:\n%s", cases[i].name, out);
    free(out);
    rc = tu_sh(&out, "timeout 20 %s query %s \"SELECT 1\"", SE3_BINARY, p);
    cr_expect_eq(rc, 2, "query %s: exit %d\n%s", cases[i].name, rc, out);
    cr_expect(strstr(out, p) && strstr(out, cases[i].reason), "query %s:\n%s", cases[i].name, out);
    free(out);
  }
  /* A file the user may not read: status names it and the reason. */
  snprintf(p, sizeof p, "%s/locked", dir);
  cr_assert_eq(tu_sh(NULL, "mkdir '%s' && cp '%s' '%s/screen.db' && chmod 000 '%s/screen.db'", p, db, p, p), 0);
  const char *who = as_reader(p);
  if (!who) cr_skip_test("cannot be a user without read access here (root without setpriv?)");
  char *out = NULL;
  int rc = tu_sh(&out, "%s%s status %s/screen.db", who, SE3_BINARY, p);
  cr_expect_eq(rc, 1, "exit %d:\n%s", rc, out);
  cr_expect(strstr(out, "locked/screen.db") && strstr(out, "Permission denied"), "%s", out);
  free(out);
  chmod(p, 0755);
  free(dir);
}
