/* The SQLite store: application id and schema version set and checked,
 * STRICT tables, journal modes, the single-writer lock. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/error.h"
#include "pipeline/store.h"
#include "tests/testutil.h"

static char *db_path(const char *name) {
  char *dir = tu_tmpdir(name);
  char *p = NULL;
  cr_assert(asprintf(&p, "%s/screen.db", dir) > 0);
  free(dir);
  return p;
}

Test(store, new_database_has_id_version_and_strict_tables) {
  char *p = db_path("store_new");
  struct store s;
  struct se3_error err = {0};
  cr_assert_eq(store_open(&s, p, STORE_WRITE, "wal", 1000, &err), 0, "%s", se3_error_str(&err).s);
  cr_assert_eq(store_int(s.db, "PRAGMA application_id", 0), STORE_APPLICATION_ID);
  cr_assert_eq(store_int(s.db, "PRAGMA user_version", 0), STORE_SCHEMA_VERSION);
  char *mode = NULL;
  sqlite3_stmt *st;
  sqlite3_prepare_v2(s.db, "PRAGMA journal_mode", -1, &st, NULL);
  cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
  mode = strdup((const char *)sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  cr_assert_str_eq(mode, "wal");
  free(mode);
  /* STRICT: a text where an integer belongs is refused. */
  cr_assert_neq(store_exec(s.db,
                           "INSERT INTO molecules(id,set_name,source_file,record_no,name,smiles,inchikey,formula,"
                           "n_atoms,n_heavy,charge,coords_from,chunk,mol) VALUES(1,'a','f','x','n','C','k','CH4',"
                           "5,1,0,'input',0,x'00')",
                           &err),
                0);
  cr_assert(strstr(se3_error_str(&err).s, "cannot store TEXT value in INTEGER column"), "%s", se3_error_str(&err).s);
  store_close(&s);
  /* Reopening is a no-op migration; read-only opening works. */
  cr_assert_eq(store_open(&s, p, STORE_WRITE, "wal", 1000, &err), 0, "%s", se3_error_str(&err).s);
  store_close(&s);
  cr_assert_eq(store_open(&s, p, STORE_READONLY, NULL, 1000, &err), 0, "%s", se3_error_str(&err).s);
  store_close(&s);
  free(p);
}

Test(store, delete_journal_for_network_filesystems) {
  char *p = db_path("store_delete");
  struct store s;
  struct se3_error err = {0};
  cr_assert_eq(store_open(&s, p, STORE_WRITE, "delete", 1000, &err), 0, "%s", se3_error_str(&err).s);
  char *v = tu_query(p, "PRAGMA journal_mode");
  cr_assert_str_eq(v, "delete\n");
  free(v);
  store_close(&s);
  free(p);
}

Test(store, refuses_foreign_and_newer_databases) {
  char *p = db_path("store_foreign");
  cr_assert_eq(tu_sh(NULL, "sqlite3 %s 'CREATE TABLE t(x); PRAGMA application_id=42;'", p), 0);
  struct store s;
  struct se3_error err = {0};
  cr_assert_neq(store_open(&s, p, STORE_WRITE, "wal", 1000, &err), 0);
  cr_assert(strstr(se3_error_str(&err).s, "not a se3screen database"), "%s", se3_error_str(&err).s);
  cr_assert(strstr(se3_error_str(&err).s, p), "the message names the file: %s", se3_error_str(&err).s);
  /* an error value: the database's kind, the file in its place */
  cr_assert_eq(err.kind, SE3_ERR_DB, "kind %d: %s", (int)err.kind, se3_error_str(&err).s);
  cr_assert_str_eq(err.file, p);
  free(p);

  p = db_path("store_newer");
  cr_assert_eq(store_open(&s, p, STORE_WRITE, "wal", 1000, &err), 0, "%s", se3_error_str(&err).s);
  store_exec(s.db, "PRAGMA user_version=99", &err);
  store_close(&s);
  cr_assert_neq(store_open(&s, p, STORE_WRITE, "wal", 1000, &err), 0);
  cr_assert(strstr(se3_error_str(&err).s, "schema version 99 is newer"), "%s", se3_error_str(&err).s);
  cr_assert_neq(store_open(&s, p, STORE_READONLY, NULL, 1000, &err), 0);
  free(p);
}

Test(store, lock_is_exclusive_and_names_the_holder) {
  char *p = db_path("store_lock");
  struct store a;
  struct se3_error err = {0};
  cr_assert_eq(store_open(&a, p, STORE_WRITE, "wal", 1000, &err), 0, "%s", se3_error_str(&err).s);
  cr_assert_eq(store_lock(&a, &err), 0, "%s", se3_error_str(&err).s);
  /* Another process (flock locks are per open file) cannot take it. */
  pid_t pid = fork();
  if (pid == 0) {
    struct store b;
    struct se3_error e2 = {0};
    if (store_open(&b, p, STORE_WRITE, "wal", 1000, &e2)) _exit(3);
    char want[64];
    snprintf(want, sizeof want, "pid %d", (int)getppid());
    int rc = store_lock(&b, &e2);
    _exit(rc != 0 && strstr(se3_error_str(&e2).s, want) ? 0 : 1);
  }
  int st;
  waitpid(pid, &st, 0);
  cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "second locker was not refused with the holder's pid");
  store_close(&a);
  /* Released with the holder. */
  pid = fork();
  if (pid == 0) {
    struct store b;
    struct se3_error e2 = {0};
    if (store_open(&b, p, STORE_WRITE, "wal", 1000, &e2)) _exit(3);
    _exit(store_lock(&b, &e2) == 0 ? 0 : 1);
  }
  waitpid(pid, &st, 0);
  cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "lock not released on close");
  free(p);
}

/* A version-1 database (made by the first release: no geometry tables) is
 * brought to the current version on open, keeping its rows; new databases get
 * 64 KiB pages. */
Test(store, version_1_database_is_migrated_forward) {
  char *p = db_path("store_v1");
  sqlite3 *db;
  struct se3_error err = {0};
  cr_assert_eq(sqlite3_open(p, &db), SQLITE_OK);
  cr_assert_eq(store_exec(db, store_schema_sql, &err), 0, "%s", se3_error_str(&err).s);
  char sql[256];
  snprintf(sql, sizeof sql, "PRAGMA application_id=%d; PRAGMA user_version=1", STORE_APPLICATION_ID);
  cr_assert_eq(store_exec(db, sql, &err), 0, "%s", se3_error_str(&err).s);
  cr_assert_eq(store_exec(db,
                          "INSERT INTO molecules VALUES(1000000001,'s','f.sdf',1,'m','C','KEY','CH4',5,1,0,'input',0,"
                          "x'00');"
                          "INSERT INTO stage_chunks VALUES('ingest',0,0,'h','done','host',1,'a','b',1,0)",
                          &err),
               0, "%s", se3_error_str(&err).s);
  cr_assert_eq(store_int(db, "PRAGMA page_size", 0), 4096);
  sqlite3_close(db);

  struct store s;
  /* `run` (STORE_WRITE) refuses it, naming `se3screen upgrade`, and leaves it as it was */
  cr_assert_neq(store_open(&s, p, STORE_WRITE, "wal", 1000, &err), 0);
  cr_assert(strstr(se3_error_str(&err).s, "made by an earlier se3screen (schema version 1; this one writes") &&
                strstr(se3_error_str(&err).s, "se3screen upgrade "),
            "%s", se3_error_str(&err).s);
  cr_assert_eq(sqlite3_open(p, &db), SQLITE_OK);
  cr_assert_eq(store_int(db, "PRAGMA user_version", 0), 1);
  sqlite3_close(db);
  /* `upgrade` (STORE_UPGRADE) migrates it forward */
  cr_assert_eq(store_open(&s, p, STORE_UPGRADE, "wal", 1000, &err), 0, "%s", se3_error_str(&err).s);
  /* (upgrade's migration is left open for its conversion: committed here) */
  cr_assert(sqlite3_get_autocommit(s.db) || store_exec(s.db, "COMMIT", &err) == 0, "%s", se3_error_str(&err).s);
  cr_assert_eq(store_int(s.db, "PRAGMA user_version", 0), STORE_SCHEMA_VERSION);
  cr_assert_eq(store_int(s.db,
                         "SELECT count(*) FROM sqlite_schema WHERE name IN ('graphs','bases','splits','metrics','models')",
                         0),
               5);
  cr_assert_eq(store_int(s.db, "SELECT n_bytes FROM stage_chunks", -1), 0);
  cr_assert_eq(store_int(s.db, "SELECT count(*) FROM molecules WHERE inchikey='KEY'", 0), 1);
  cr_assert_eq(store_exec(s.db,
                          "INSERT INTO graphs(mol_id, n_nodes, n_edges, chunk, graph) VALUES(1000000001, 5, 8, 0, "
                          "x'00')",
                          &err),
               0, "%s", se3_error_str(&err).s);
  store_close(&s);
  free(p);

  p = db_path("store_pages");
  cr_assert_eq(store_open(&s, p, STORE_WRITE, "wal", 1000, &err), 0, "%s", se3_error_str(&err).s);
  cr_assert_eq(store_int(s.db, "PRAGMA page_size", 0), 65536);
  store_close(&s);
  free(p);
}

/* A foreign SQLite file (a rollback-journal database of someone else's) is
 * refused for writing before anything is written to it: its bytes and its
 * journal mode stay as they were, and no -wal appears. (Before: the journal
 * mode was switched to WAL, rewriting the header, and only then was the file
 * refused.) Random bytes are refused unchanged too. */
Test(store, foreign_database_is_refused_unchanged) {
  char *p = db_path("store_foreign_unchanged");
  cr_assert_eq(tu_sh(NULL, "sqlite3 %s 'PRAGMA journal_mode=DELETE; CREATE TABLE t(x); INSERT INTO t VALUES(1),(2);'",
                     p),
               0);
  size_t n0 = 0, n1 = 0;
  char *before = tu_read(p, &n0);
  cr_assert(before && n0 > 0);
  struct store s;
  struct se3_error err = {0};
  cr_assert_neq(store_open(&s, p, STORE_WRITE, "wal", 1000, &err), 0);
  cr_assert(strstr(se3_error_str(&err).s, "not a se3screen database"), "%s", se3_error_str(&err).s);
  cr_assert(strstr(se3_error_str(&err).s, p), "the message names the file: %s", se3_error_str(&err).s);
  char *after = tu_read(p, &n1);
  cr_assert(after && n1 == n0 && !memcmp(before, after, n0), "refusing the file changed it (%zu bytes, then %zu)", n0,
            n1);
  char *mode = tu_query(p, "PRAGMA journal_mode");
  cr_assert_str_eq(mode, "delete\n", "the refusal changed the journal mode");
  char wal[1100];
  snprintf(wal, sizeof wal, "%s-wal", p);
  cr_assert_neq(access(wal, F_OK), 0, "a -wal file was made beside the refused file");
  free(mode);
  free(before);
  free(after);
  /* bytes that are not SQLite at all */
  cr_assert_eq(tu_sh(NULL, "head -c 8192 /dev/urandom > %s", p), 0);
  before = tu_read(p, &n0);
  cr_assert_neq(store_open(&s, p, STORE_WRITE, "delete", 1000, &err), 0);
  cr_assert(strstr(se3_error_str(&err).s, "not a se3screen database"), "%s", se3_error_str(&err).s);
  after = tu_read(p, &n1);
  cr_assert(after && n1 == n0 && !memcmp(before, after, n0), "refusing random bytes changed them");
  free(before);
  free(after);
  free(p);
}

/* The lock file is never followed through a symbolic link (a link planted
 * in a shared workdir would have the holder line written over its target)
 * nor taken when it is a FIFO: refused with a message naming it, the target
 * untouched. (Before: opened with O_CREAT through the link and the target
 * truncated and overwritten.) */
Test(store, lock_file_symlink_or_fifo_is_refused) {
  char *dir = tu_tmpdir("store_lock_link");
  char *target = tu_write(dir, "precious.txt", "precious contents\n");
  char *p = NULL, *lock = NULL;
  cr_assert(asprintf(&p, "%s/screen.db", dir) > 0 && asprintf(&lock, "%s/screen.db.lock", dir) > 0);
  cr_assert_eq(symlink(target, lock), 0);
  struct store s;
  struct se3_error err = {0};
  cr_assert_eq(store_open(&s, p, STORE_WRITE, "wal", 1000, &err), 0, "%s", se3_error_str(&err).s);
  cr_assert_neq(store_lock(&s, &err), 0, "the lock was taken through a symbolic link");
  cr_assert(strstr(se3_error_str(&err).s, lock), "the message names the lock file: %s", se3_error_str(&err).s);
  cr_assert(strstr(se3_error_str(&err).s, "symbolic link"), "%s", se3_error_str(&err).s);
  cr_assert_eq(err.kind, SE3_ERR_IO, "kind %d: %s", (int)err.kind, se3_error_str(&err).s);
  cr_assert_str_eq(err.file, lock);
  char *t = tu_read(target, NULL);
  cr_assert_str_eq(t, "precious contents\n", "the link's target was changed");
  free(t);
  store_close(&s);
  /* a FIFO: no blocking open, a refusal naming it */
  cr_assert_eq(unlink(lock), 0);
  cr_assert_eq(mkfifo(lock, 0644), 0);
  cr_assert_eq(store_open(&s, p, STORE_WRITE, "wal", 1000, &err), 0, "%s", se3_error_str(&err).s);
  cr_assert_neq(store_lock(&s, &err), 0);
  cr_assert(strstr(se3_error_str(&err).s, lock) && strstr(se3_error_str(&err).s, "a FIFO"), "%s",
            se3_error_str(&err).s);
  store_close(&s);
  /* and a lock file of its own is written only once held: the holder line, nothing else */
  cr_assert_eq(unlink(lock), 0);
  tu_write(dir, "screen.db.lock", "host old, pid 1, since long ago, and a much longer line than the new one\n");
  cr_assert_eq(store_open(&s, p, STORE_WRITE, "wal", 1000, &err), 0, "%s", se3_error_str(&err).s);
  cr_assert_eq(store_lock(&s, &err), 0, "%s", se3_error_str(&err).s);
  t = tu_read(lock, NULL);
  char want[64];
  snprintf(want, sizeof want, "pid %d, since ", (int)getpid());
  cr_assert(t && strstr(t, want) && !strstr(t, "longer line") && strchr(t, '\n') == t + strlen(t) - 1, "%s", t);
  free(t);
  store_close(&s);
  free(p);
  free(lock);
  free(target);
  free(dir);
}
