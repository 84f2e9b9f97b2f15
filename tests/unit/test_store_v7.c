/* Schema version 7 (issue 32) reached from a version-6 database as
 * se3screen wrote it: store_open migrates it, and rejects gains atom (the
 * 1-based atom the reason concerns) and detail (the specifics), both NULL
 * for the rows written before, which keep their reason, specifics and all,
 * as it was. A new database has the two columns, typed (the table is
 * STRICT). */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "pipeline/store.h"
#include "tests/testutil.h"

/* Versions 2 to 6 as store.c wrote them before version 7, comments left
 * out; version 1 is store_schema_sql, whose tables later versions only add
 * to (its comments may change, not its columns). */
static const char v2_to_v6_sql[] =
    /* 2 */
    "CREATE TABLE graphs(mol_id INTEGER PRIMARY KEY, n_nodes INTEGER NOT NULL, n_edges INTEGER NOT NULL,"
    " chunk INTEGER NOT NULL, graph BLOB NOT NULL) STRICT;"
    "CREATE INDEX graphs_chunk ON graphs(chunk);"
    "CREATE TABLE bases(mol_id INTEGER PRIMARY KEY, n_edges INTEGER NOT NULL, max_degree INTEGER NOT NULL,"
    " dtype TEXT NOT NULL, chunk INTEGER NOT NULL, basis BLOB NOT NULL) STRICT;"
    "CREATE INDEX bases_chunk ON bases(chunk);"
    "ALTER TABLE stage_chunks ADD COLUMN n_bytes INTEGER NOT NULL DEFAULT 0;"
    /* 3 */
    "CREATE TABLE splits(mol_id INTEGER PRIMARY KEY, split TEXT NOT NULL) STRICT;"
    "CREATE TABLE metrics(model TEXT NOT NULL, epoch INTEGER NOT NULL, split TEXT NOT NULL, loss REAL, mae REAL,"
    " rmse REAL, r2 REAL, spearman REAL, roc_auc REAL, pr_auc REAL, ef1 REAL, lr REAL, seconds REAL,"
    " PRIMARY KEY(model, epoch, split)) STRICT;"
    "CREATE TABLE models(id TEXT PRIMARY KEY, target TEXT NOT NULL, task TEXT NOT NULL, checkpoint TEXT NOT NULL,"
    " arch TEXT NOT NULL, mean REAL NOT NULL, std REAL NOT NULL, best_epoch INTEGER NOT NULL, best_valid_loss REAL,"
    " n_train INTEGER NOT NULL, n_valid INTEGER NOT NULL, n_test INTEGER NOT NULL) STRICT;"
    "CREATE TABLE scores(mol_id INTEGER NOT NULL, model TEXT NOT NULL, target TEXT NOT NULL, value REAL NOT NULL,"
    " std REAL, chunk INTEGER NOT NULL, PRIMARY KEY(mol_id, model)) STRICT;"
    "CREATE INDEX scores_chunk ON scores(chunk);"
    "CREATE TABLE ranks(rank INTEGER PRIMARY KEY, mol_id INTEGER NOT NULL, model TEXT NOT NULL,"
    " target TEXT NOT NULL, value REAL NOT NULL, std REAL) STRICT;"
    "CREATE VIEW ranked_hits AS"
    "  SELECT r.rank, m.name, m.smiles, m.inchikey, r.target, r.value AS score, r.std, m.set_name,"
    "         m.source_file, m.record_no, r.mol_id"
    "  FROM ranks r JOIN molecules m ON m.id = r.mol_id ORDER BY r.rank;"
    /* 4 */
    "ALTER TABLE runs ADD COLUMN job TEXT;"
    /* 5 */
    "CREATE TABLE predictions(model TEXT NOT NULL, mol_id INTEGER NOT NULL, split TEXT NOT NULL,"
    " label REAL NOT NULL, value REAL NOT NULL, PRIMARY KEY(model, mol_id)) STRICT;"
    "ALTER TABLE models ADD COLUMN device TEXT;"
    /* 6 */
    "ALTER TABLE scores RENAME COLUMN value TO score;"
    "ALTER TABLE ranks RENAME COLUMN value TO score;"
    "ALTER TABLE scores ADD COLUMN model_hash TEXT;"
    "DROP VIEW ranked_hits;"
    "CREATE VIEW ranked_hits AS"
    "  SELECT r.rank, m.name, m.smiles, m.inchikey, r.target, r.score, r.std, m.set_name,"
    "         m.source_file, m.record_no, r.mol_id"
    "  FROM ranks r JOIN molecules m ON m.id = r.mol_id ORDER BY r.rank;";

/* What an ingest left: molecule rejects with the specifics in the reason, a
 * whole file's, and a graph stage's. */
static const char v6_rows_sql[] =
    "INSERT INTO rejects VALUES('ingest','library','lib.sdf',3,41,'m3',0,'atoms 3 and 7 are 0.42 Å apart (< 0.5)'),"
    " ('ingest','library','lib.sdf',9,170,NULL,0,'dummy atom (atom 2)'),"
    " ('ingest','library','empty.smi',0,NULL,NULL,0,'no record found (read as SMILES)'),"
    " ('graph','library','lib.sdf',5,NULL,'m5',0,'graph: out of memory');";

static char *query(sqlite3 *db, const char *sql) {
  sqlite3_stmt *st = NULL;
  cr_assert_eq(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK, "%s: %s", sql, sqlite3_errmsg(db));
  char *out = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&out, &n);
  while (sqlite3_step(st) == SQLITE_ROW) {
    for (int i = 0; i < sqlite3_column_count(st); i++) {
      if (i) fputc('|', f);
      if (sqlite3_column_type(st, i) == SQLITE_NULL)
        fputs("NULL", f);
      else
        fputs((const char *)sqlite3_column_text(st, i), f);
    }
    fputc('\n', f);
  }
  sqlite3_finalize(st);
  fclose(f);
  return out;
}

static void same(sqlite3 *db, const char *sql, const char *want) {
  char *got = query(db, sql);
  cr_assert_str_eq(got, want, "%s", sql);
  free(got);
}

/* The version-7 columns' names, types and NOT NULL. */
static const char rejects_tail[] = "SELECT name, type, \"notnull\" FROM pragma_table_info('rejects') "
                                   "WHERE name IN ('reason', 'atom', 'detail') ORDER BY cid DESC";
static const char rejects_tail_want[] = "detail|TEXT|0\natom|INTEGER|0\nreason|TEXT|1\n";

Test(store_v7, a_version_6_database_is_migrated_keeping_its_rejects) {
  char *dir = tu_tmpdir("store_v7"), path[1100];
  snprintf(path, sizeof path, "%s/screen.db", dir);
  sqlite3 *db = NULL;
  cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
  char *errmsg = NULL;
  char *pragmas = sqlite3_mprintf("PRAGMA application_id = %d; PRAGMA user_version = 6", STORE_APPLICATION_ID);
  int rc = sqlite3_exec(db, store_schema_sql, NULL, NULL, &errmsg);
  if (rc == SQLITE_OK) rc = sqlite3_exec(db, v2_to_v6_sql, NULL, NULL, &errmsg);
  if (rc == SQLITE_OK) rc = sqlite3_exec(db, v6_rows_sql, NULL, NULL, &errmsg);
  if (rc == SQLITE_OK) rc = sqlite3_exec(db, pragmas, NULL, NULL, &errmsg);
  cr_assert_eq(rc, SQLITE_OK, "making the version-6 database: %s", errmsg ? errmsg : "");
  sqlite3_free(pragmas);
  sqlite3_close(db);

  struct store s;
  struct se3_error err = {0};
  cr_assert_eq(store_open(&s, path, STORE_UPGRADE, "wal", 1000, &err), 0, "%s", se3_error_str(&err).s);
  /* (upgrade's migration is left open for its conversion: committed here) */
  cr_assert(sqlite3_get_autocommit(s.db) || store_exec(s.db, "COMMIT", &err) == 0, "%s", se3_error_str(&err).s);
  cr_assert_geq(STORE_SCHEMA_VERSION, 7, "this test knows version 7");
  cr_assert_eq(store_int(s.db, "PRAGMA user_version", 0), STORE_SCHEMA_VERSION);
  same(s.db, rejects_tail, rejects_tail_want);
  /* every row as it was, with no atom and no detail: nothing was known of them */
  same(s.db, "SELECT stage, source_file, record_no, line, name, reason, atom, detail FROM rejects ORDER BY 1, 2, 3",
       "graph|lib.sdf|5|NULL|m5|graph: out of memory|NULL|NULL\n"
       "ingest|empty.smi|0|NULL|NULL|no record found (read as SMILES)|NULL|NULL\n"
       "ingest|lib.sdf|3|41|m3|atoms 3 and 7 are 0.42 Å apart (< 0.5)|NULL|NULL\n"
       "ingest|lib.sdf|9|170|NULL|dummy atom (atom 2)|NULL|NULL\n");
  /* a row of the new kind goes in beside them */
  cr_assert_eq(
      store_exec(
          s.db,
          "INSERT INTO rejects(stage, set_name, source_file, record_no, line, name, chunk, reason, atom, detail) "
          "VALUES('ingest','library','lib.sdf',4,60,'m4',0,'atoms too close',3,"
          "'atoms 3 and 8 are 0.31 Å apart (< 0.5)')",
          &err),
      0, "%s", se3_error_str(&err).s);
  same(s.db, "SELECT reason, atom, detail FROM rejects WHERE record_no = 4",
       "atoms too close|3|atoms 3 and 8 are 0.31 Å apart (< 0.5)\n");
  store_close(&s);
  /* opened again: nothing moves a second time */
  cr_assert_eq(store_open(&s, path, STORE_UPGRADE, "wal", 1000, &err), 0, "%s", se3_error_str(&err).s);
  /* (upgrade's migration is left open for its conversion: committed here) */
  cr_assert(sqlite3_get_autocommit(s.db) || store_exec(s.db, "COMMIT", &err) == 0, "%s", se3_error_str(&err).s);
  same(s.db, rejects_tail, rejects_tail_want);
  same(s.db, "SELECT count(*), count(atom), count(detail) FROM rejects", "5|1|1\n");
  store_close(&s);
  free(dir);
}

Test(store_v7, a_new_database_has_the_columns_typed) {
  char *dir = tu_tmpdir("store_v7_new"), path[1100];
  snprintf(path, sizeof path, "%s/screen.db", dir);
  struct store s;
  struct se3_error err = {0};
  cr_assert_eq(store_open(&s, path, STORE_UPGRADE, "wal", 1000, &err), 0, "%s", se3_error_str(&err).s);
  /* (upgrade's migration is left open for its conversion: committed here) */
  cr_assert(sqlite3_get_autocommit(s.db) || store_exec(s.db, "COMMIT", &err) == 0, "%s", se3_error_str(&err).s);
  cr_assert_eq(store_int(s.db, "PRAGMA user_version", 0), STORE_SCHEMA_VERSION);
  same(s.db, rejects_tail, rejects_tail_want);
  cr_assert_eq(store_exec(s.db,
                          "INSERT INTO rejects(stage, set_name, source_file, record_no, chunk, reason) "
                          "VALUES('ingest','s','f.smi',1,0,'dummy atom')",
                          &err),
               0, "%s", se3_error_str(&err).s);
  same(s.db, "SELECT reason, atom, detail FROM rejects", "dummy atom|NULL|NULL\n");
  /* STRICT: an atom is a number */
  cr_assert_neq(store_exec(s.db, "UPDATE rejects SET atom = 'third'", &err), 0);
  cr_assert(strstr(se3_error_str(&err).s, "cannot store TEXT value in INTEGER column rejects.atom"), "%s",
            se3_error_str(&err).s);
  store_close(&s);
  free(dir);
}
