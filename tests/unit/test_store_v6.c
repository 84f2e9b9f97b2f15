/* Schema version 6 (issue 31) reached from a version-5 database as
 * se3screen wrote it: store_open migrates it, the scores and the ranks
 * keep their values under the new name (scores.score, ranks.score: they were
 * value), scores gains model_hash (NULL for the old rows: no hash was
 * recorded), metrics.epoch and models.best_epoch count from 1 (every epoch
 * one more, consecutive epochs of a model included, whose keys would meet
 * on the way), and the ranked_hits view reads the renamed column. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "pipeline/store.h"
#include "tests/testutil.h"

/* Versions 2 to 5 as store.c wrote them before version 6 (git show
 * 905624c^:pipeline/store.c), comments left out; version 1 is
 * store_schema_sql, which later versions never change. */
static const char v2_to_v5_sql[] =
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
    "ALTER TABLE models ADD COLUMN device TEXT;";

/* What a screen left: two molecules scored and ranked by an ensemble's mean
 * (-0.1 is no round number in binary: the value must come through exact),
 * and three epochs of metrics of two members, the test rows at the best. */
static const char v5_rows_sql[] =
    "INSERT INTO molecules VALUES(1000000001,'library','lib.smi',1,'a','CCO','LFQSCWFLJHTTHZ-UHFFFAOYSA-N','C2H6O',9,3,"
    " 0,'gen3d',0,x'00'), (1000000002,'library','lib.smi',2,'b','CCN','QUSNBJAOOMFDIB-UHFFFAOYSA-N','C2H7N',10,3,0,"
    " 'gen3d',0,x'00');"
    "INSERT INTO scores VALUES(1000000001,'train','gap',-0.1,0.25,0),(1000000002,'train','gap',1e-300,NULL,0);"
    "INSERT INTO ranks VALUES(1,1000000001,'train','gap',-0.1,0.25),(2,1000000002,'train','gap',1e-300,NULL);"
    "INSERT INTO metrics(model, epoch, split, loss) VALUES('train/0',0,'train',3),('train/0',1,'train',2),"
    " ('train/0',2,'train',1),('train/0',0,'valid',3.5),('train/0',1,'valid',2.5),('train/0',2,'valid',1.5),"
    " ('train/0',1,'test',2.4),('train/1',0,'train',4),('train/1',1,'train',3),('train/1',0,'test',3.9);"
    "INSERT INTO models VALUES('train/0','gap','regression','models/train-0/best.ckpt','layers=1',0,1,1,2.5,8,1,1,"
    " 'cpu'),('train/1','gap','regression','models/train-1/best.ckpt','layers=1',0,1,0,3.9,8,1,1,'cpu');";

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
      else if (sqlite3_column_type(st, i) == SQLITE_FLOAT)
        fprintf(f, "%.17g", sqlite3_column_double(st, i));
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

Test(store_v6, a_version_5_database_is_migrated_keeping_its_values) {
  char *dir = tu_tmpdir("store_v6"), path[1100];
  snprintf(path, sizeof path, "%s/screen.db", dir);
  sqlite3 *db = NULL;
  cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
  char *errmsg = NULL;
  char *pragmas = sqlite3_mprintf("PRAGMA application_id = %d; PRAGMA user_version = 5", STORE_APPLICATION_ID);
  int rc = sqlite3_exec(db, store_schema_sql, NULL, NULL, &errmsg);
  if (rc == SQLITE_OK) rc = sqlite3_exec(db, v2_to_v5_sql, NULL, NULL, &errmsg);
  if (rc == SQLITE_OK) rc = sqlite3_exec(db, v5_rows_sql, NULL, NULL, &errmsg);
  if (rc == SQLITE_OK) rc = sqlite3_exec(db, pragmas, NULL, NULL, &errmsg);
  cr_assert_eq(rc, SQLITE_OK, "making the version-5 database: %s", errmsg ? errmsg : "");
  sqlite3_free(pragmas);
  sqlite3_close(db);

  struct store s;
  struct se3_error err = {0};
  cr_assert_eq(store_open(&s, path, STORE_UPGRADE, "wal", 1000, &err), 0, "%s", se3_error_str(&err).s);
  /* (upgrade's migration is left open for its conversion: committed here) */
  cr_assert(sqlite3_get_autocommit(s.db) || store_exec(s.db, "COMMIT", &err) == 0, "%s", se3_error_str(&err).s);
  cr_assert_eq(store_int(s.db, "PRAGMA user_version", 0), STORE_SCHEMA_VERSION);
  /* (version 7 only adds the rejects' atom and detail: test_store_v7.c) */
  cr_assert_geq(STORE_SCHEMA_VERSION, 6, "this test knows version 6");
  /* the scores and ranks under their new name, to the bit */
  same(s.db, "SELECT mol_id, score, std FROM scores ORDER BY mol_id",
       "1000000001|-0.10000000000000001|0.25\n1000000002|1e-300|NULL\n");
  same(s.db, "SELECT rank, score, std FROM ranks ORDER BY rank", "1|-0.10000000000000001|0.25\n2|1e-300|NULL\n");
  same(s.db, "SELECT count(*) FROM pragma_table_info('scores') WHERE name = 'value'", "0\n");
  /* model_hash: there, and unknown for the scores made before it */
  same(s.db, "SELECT count(*), count(model_hash) FROM scores", "2|0\n");
  /* epochs from 1: every row one more, the test rows at the best epoch */
  same(s.db, "SELECT model, split, epoch, loss FROM metrics ORDER BY model, split, epoch",
       "train/0|test|2|2.3999999999999999\n"
       "train/0|train|1|3\ntrain/0|train|2|2\ntrain/0|train|3|1\n"
       "train/0|valid|1|3.5\ntrain/0|valid|2|2.5\ntrain/0|valid|3|1.5\n"
       "train/1|test|1|3.8999999999999999\ntrain/1|train|1|4\ntrain/1|train|2|3\n");
  same(s.db, "SELECT id, best_epoch FROM models ORDER BY id", "train/0|2\ntrain/1|1\n");
  same(s.db,
       "SELECT count(*) FROM models o JOIN metrics t ON t.model = o.id AND t.split = 'test' "
       "WHERE t.epoch = o.best_epoch",
       "2\n");
  /* the view the hits files and `export` read */
  same(s.db, "SELECT rank, name, target, score, std, set_name, mol_id FROM ranked_hits",
       "1|a|gap|-0.10000000000000001|0.25|library|1000000001\n2|b|gap|1e-300|NULL|library|1000000002\n");
  store_close(&s);
  /* opened again: nothing moves a second time */
  cr_assert_eq(store_open(&s, path, STORE_UPGRADE, "wal", 1000, &err), 0, "%s", se3_error_str(&err).s);
  /* (upgrade's migration is left open for its conversion: committed here) */
  cr_assert(sqlite3_get_autocommit(s.db) || store_exec(s.db, "COMMIT", &err) == 0, "%s", se3_error_str(&err).s);
  same(s.db, "SELECT id, best_epoch FROM models ORDER BY id", "train/0|2\ntrain/1|1\n");
  same(s.db, "SELECT min(epoch), max(epoch) FROM metrics", "1|3\n");
  store_close(&s);
  free(dir);
}
