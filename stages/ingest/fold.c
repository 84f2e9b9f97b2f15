/* fold.c — what ingest stored of inputs changed or gone from the plan,
 * and where it goes: prune deletes it before the chunks of an unsharded run
 * and writes this plan's ingest_plan and ingest_files; in `merge`, the fold
 * does the same from a shard's plan and clears the parts the shard read,
 * which its rows then replace. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Deletes from main what ingest stored of an input `plan` does not have as
 * it is now (a table of input and mol_key: this run's plan, or a shard's
 * ingest_files): an input gone, or one now read from other contents or in
 * another way; and what a database of an earlier se3screen holds, whose
 * ids went by the input's place (molecules and rejects of an input with no
 * part listed). Counts the rows into *n. 0, or -1 with err set. */
static int delete_stale(sqlite3 *db, const char *plan, int64_t *n, struct se3_error *err) {
  int64_t *keys = NULL, before = sqlite3_total_changes64(db);
  int n_keys = 0, cap = 0, ret = -1;
  sqlite3_stmt *q = NULL;
  /* the parts read from other contents, or of files or parts gone: their
   * records' rows (a file gone loses every part, and then its key) */
  char *sql = sqlite3_mprintf(
      "SELECT p.input, p.part, p.first_record, p.last_record FROM main.ingest_parts p WHERE NOT EXISTS (SELECT 1 "
      "FROM %s q WHERE q.input = p.input AND q.part = p.part AND q.mol_key = p.mol_key)",
      plan);
  int rc = sql ? sqlite3_prepare_v2(db, sql, -1, &q, NULL) : SQLITE_NOMEM;
  sqlite3_free(sql);
  char *del = sqlite3_mprintf("%s", "");
  while (rc == SQLITE_OK && del && (rc = sqlite3_step(q)) == SQLITE_ROW) {
    long long key = sqlite3_column_int64(q, 0), part = sqlite3_column_int64(q, 1),
              lo = key * ID_STRIDE + sqlite3_column_int64(q, 2), hi = key * ID_STRIDE + sqlite3_column_int64(q, 3);
    del = sqlite3_mprintf("%z DELETE FROM main.labels WHERE mol_id BETWEEN %lld AND %lld;"
                          "DELETE FROM main.duplicates WHERE mol_id BETWEEN %lld AND %lld;"
                          "DELETE FROM main.molecules WHERE id BETWEEN %lld AND %lld;"
                          "DELETE FROM main.rejects WHERE stage = 'ingest' AND mol_id BETWEEN %lld AND %lld;"
                          "DELETE FROM main.ingest_parts WHERE input = %lld AND part = %lld;",
                          del, lo, hi, lo, hi, lo, hi, lo, hi, key, part);
    rc = SQLITE_OK;
  }
  sqlite3_finalize(q);
  q = NULL;
  char *msg0 = NULL;
  if (rc == SQLITE_DONE) rc = del ? sqlite3_exec(db, del, NULL, NULL, &msg0) : SQLITE_NOMEM;
  sqlite3_free(del);
  if (rc != SQLITE_OK) {
    se3_error_set(err, SE3_ERR_DB, "deleting the parts of inputs changed or gone: %s",
                  msg0 ? msg0 : sqlite3_errstr(rc));
    sqlite3_free(msg0);
    return -1;
  }
  /* the keys of rows no part covers: a database of an earlier se3screen
   * (ids by the input's place) */
  sql = sqlite3_mprintf("SELECT DISTINCT mol_id / %lld FROM main.rejects WHERE stage = 'ingest' AND mol_id IS NOT "
                        "NULL AND NOT EXISTS (SELECT 1 FROM main.ingest_parts p WHERE p.input = mol_id / %lld)",
                        ID_STRIDE, ID_STRIDE);
  rc = sql ? sqlite3_prepare_v2(db, sql, -1, &q, NULL) : SQLITE_NOMEM;
  sqlite3_free(sql);
  while (rc == SQLITE_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) {
    if (n_keys == cap) {
      cap = cap ? 2 * cap : 16;
      int64_t *k = realloc(keys, sizeof *keys * (size_t)cap);
      if (!k) {
        rc = SQLITE_NOMEM;
        break;
      }
      keys = k;
    }
    keys[n_keys++] = sqlite3_column_int64(q, 0);
    rc = SQLITE_OK;
  }
  sqlite3_finalize(q);
  q = NULL;
  if (rc != SQLITE_DONE) goto fail;
  /* the molecules' inputs with no part: a skip over the id ranges */
  rc = sqlite3_prepare_v2(db, "SELECT id FROM main.molecules WHERE id >= ?1 ORDER BY id LIMIT 1", -1, &q, NULL);
  for (int64_t from = 0; rc == SQLITE_OK;) {
    sqlite3_reset(q);
    sqlite3_bind_int64(q, 1, from);
    if ((rc = sqlite3_step(q)) != SQLITE_ROW) break;
    int64_t k = sqlite3_column_int64(q, 0) / ID_STRIDE;
    from = (k + 1) * ID_STRIDE;
    rc = SQLITE_OK;
    int listed = 0;
    for (int i = 0; i < n_keys && !listed; i++)
      listed = keys[i] == k;
    char *has = sqlite3_mprintf("SELECT count(*) FROM main.ingest_parts WHERE input = %lld", (long long)k);
    sqlite3_stmt *h = NULL;
    int parts = 0;
    if (has && sqlite3_prepare_v2(db, has, -1, &h, NULL) == SQLITE_OK && sqlite3_step(h) == SQLITE_ROW)
      parts = sqlite3_column_int(h, 0);
    else
      rc = SQLITE_ERROR;
    sqlite3_finalize(h);
    sqlite3_free(has);
    if (listed || parts || rc != SQLITE_OK) continue;
    if (n_keys == cap) {
      cap = cap ? 2 * cap : 16;
      int64_t *kk = realloc(keys, sizeof *keys * (size_t)cap);
      if (!kk) {
        rc = SQLITE_NOMEM;
        break;
      }
      keys = kk;
    }
    keys[n_keys++] = k;
  }
  sqlite3_finalize(q);
  if (rc != SQLITE_DONE) goto fail;
  sql = sqlite3_mprintf("DELETE FROM main.rejects WHERE stage = 'ingest' AND mol_id IS NULL;");
  for (int i = 0; i < n_keys && sql; i++) {
    long long lo = keys[i] * ID_STRIDE, hi = lo + ID_STRIDE - 1;
    sql = sqlite3_mprintf("%z DELETE FROM main.labels WHERE mol_id BETWEEN %lld AND %lld;"
                          "DELETE FROM main.duplicates WHERE mol_id BETWEEN %lld AND %lld;"
                          "DELETE FROM main.molecules WHERE id BETWEEN %lld AND %lld;"
                          "DELETE FROM main.rejects WHERE stage = 'ingest' AND mol_id BETWEEN %lld AND %lld;"
                          "DELETE FROM main.ingest_parts WHERE input = %lld;",
                          sql, lo, hi, lo, hi, lo, hi, lo, hi, (long long)keys[i]);
  }
  char *msg = NULL;
  rc = sql ? sqlite3_exec(db, sql, NULL, NULL, &msg) : SQLITE_NOMEM;
  sqlite3_free(sql);
  if (rc != SQLITE_OK) {
    se3_error_set(err, SE3_ERR_DB, "deleting the molecules of inputs gone or changed: %s",
                  msg ? msg : sqlite3_errstr(rc));
    sqlite3_free(msg);
    free(keys);
    return -1;
  }
  *n = sqlite3_total_changes64(db) - before;
  ret = 0;
  free(keys);
  return ret;
fail:
  se3_error_set(err, SE3_ERR_DB, "finding the inputs gone or changed: %s",
                rc == SQLITE_NOMEM ? "out of memory" : sqlite3_errmsg(db));
  free(keys);
  return -1;
}

/* ingest_files' row of input `in` (st: its INSERT, prepared with
 * FILE_ROW_SQL). SQLITE_DONE, or SQLite's error. */
int ingest_file_row(sqlite3_stmt *st, const struct input *in) {
  sqlite3_reset(st);
  sqlite3_bind_int64(st, 1, in->key);
  sqlite3_bind_int(st, 2, in->position);
  sqlite3_bind_text(st, 3, in->set, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 4, in->stored, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 5, in->mol_key, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 6, in->label_key, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 7, in->n_records);
  sqlite3_bind_int64(st, 8, in->n_parts);
  return sqlite3_step(st);
}

/* Before the chunks, inside the runner's transaction: what is stored of
 * inputs gone or changed goes (not in a shard: `merge` does it there, from
 * the shard's plan), and ingest_files becomes this plan. */
int ingest_prune(struct stage_ctx *ctx, int64_t *n) {
  struct ingest *g = ctx->state;
  *n = 0;
  ingest_plan_say(ctx, g); /* (before ingest_files becomes this plan: it tells the files gone) */
  char *msg = NULL;
  if (sqlite3_exec(ctx->db, "DELETE FROM main.ingest_plan; DELETE FROM main.ingest_files", NULL, NULL, &msg) !=
      SQLITE_OK) {
    se3_error_set(&ctx->err, SE3_ERR_DB, "planning: %s", msg ? msg : sqlite3_errmsg(ctx->db));
    sqlite3_free(msg);
    return STAGE_ERROR;
  }
  sqlite3_stmt *p = NULL, *f = NULL;
  if (sqlite3_prepare_v2(ctx->db, "INSERT OR REPLACE INTO main.ingest_plan(input, part, mol_key) VALUES(?1, ?2, ?3)",
                         -1, &p, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(ctx->db, FILE_ROW_SQL, -1, &f, NULL) != SQLITE_OK) {
    sqlite3_finalize(p);
    return stage_sql_fail(ctx, "planning");
  }
  int ret = STAGE_OK;
  for (int i = 0; i < g->n_in && ret == STAGE_OK; i++) {
    const struct input *in = &g->in[i];
    for (int64_t k = 0; k < in->n_parts && ret == STAGE_OK; k++) {
      sqlite3_reset(p);
      sqlite3_bind_int64(p, 1, in->key);
      sqlite3_bind_int64(p, 2, k);
      sqlite3_bind_text(p, 3, in->part_key[k], -1, SQLITE_STATIC);
      if (sqlite3_step(p) != SQLITE_DONE) ret = stage_sql_fail(ctx, "planning");
    }
    if (ret == STAGE_OK && ingest_file_row(f, in) != SQLITE_DONE) ret = stage_sql_fail(ctx, "planning");
  }
  sqlite3_finalize(p);
  sqlite3_finalize(f);
  if (ret == STAGE_OK && !strcmp(ctx->src, "main") && delete_stale(ctx->db, "main.ingest_plan", n, &ctx->err))
    ret = STAGE_ERROR;
  return ret;
}

/* merge of a shard: what screen.db holds of inputs the shard's plan has
 * gone or changed, and of the parts the shard read (their records), goes
 * before the shard's rows are copied in. */
int ingest_fold(struct stage_fold *f) {
  int64_t n = 0;
  if (delete_stale(f->db, "shard.ingest_plan", &n, &f->err)) return -1;
  sqlite3_stmt *q = NULL;
  char *sql = sqlite3_mprintf("DELETE FROM main.ingest_files; DELETE FROM main.ingest_plan;");
  int rc = sqlite3_prepare_v2(f->db, "SELECT input, first_record, last_record FROM shard.ingest_parts", -1, &q, NULL);
  while (rc == SQLITE_OK && sql && (rc = sqlite3_step(q)) == SQLITE_ROW) {
    long long base = sqlite3_column_int64(q, 0) * ID_STRIDE, lo = base + sqlite3_column_int64(q, 1),
              hi = base + sqlite3_column_int64(q, 2);
    sql = sqlite3_mprintf("%z DELETE FROM main.labels WHERE mol_id BETWEEN %lld AND %lld;"
                          "DELETE FROM main.molecules WHERE id BETWEEN %lld AND %lld;"
                          "DELETE FROM main.rejects WHERE stage = 'ingest' AND mol_id BETWEEN %lld AND %lld;",
                          sql, lo, hi, lo, hi, lo, hi);
    rc = SQLITE_OK;
  }
  sqlite3_finalize(q);
  char *msg = NULL;
  if (rc == SQLITE_DONE) rc = sql ? sqlite3_exec(f->db, sql, NULL, NULL, &msg) : SQLITE_NOMEM;
  sqlite3_free(sql);
  if (rc != SQLITE_OK) {
    se3_error_set(&f->err, SE3_ERR_DB, "ingest: replacing the parts a shard read: %s",
                  msg ? msg : sqlite3_errmsg(f->db));
    sqlite3_free(msg);
    return -1;
  }
  return 0; /* then every row of the shard is copied */
}

/* merge: a shard's hash folds in the inputs' fingerprint (their mol_key
 * and label_key), which begin plans */
int ingest_merge_hash(const struct cfg_node *root) {
  (void)root;
  return STAGE_HASH_FILES;
}
