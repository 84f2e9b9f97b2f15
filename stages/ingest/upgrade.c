/* upgrade.c — `se3screen upgrade` for ingest: a database an earlier
 * se3screen wrote, whose molecule ids went by each input's place, gets the
 * ledger of inputs and parts that ingest keeps now, so that the next run
 * reads again only what it must. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* `se3screen upgrade` of a database of an earlier se3screen (schema < 9),
 * whose ids went by the input's place (key = place + 1) and whose ingest
 * hash folded its inputs' fingerprint: *legacy is that fingerprint for the
 * files as they are now (each molecule file's path and contents, then its
 * labels_csv's). write: the caller found the stage current under it, so the
 * files are those the stored molecules came from: each input keeps its
 * place's key (ingest_files), its parts are listed as read under their
 * present keys (ingest_parts), and its rejects name their would-be ids,
 * so that the next run reads nothing again. An input with a molecule that
 * the earlier dedupe deleted (now kept, and listed in `duplicates`) is
 * left to be read again: its rows go. note: what was done, in words. */
int ingest_upgrade(struct stage_ctx *ctx, int write, uint64_t *legacy, char *note, size_t size) {
  struct ingest *g = ctx->state;
  uint64_t h = SE3_HASH_INIT;
  for (int i = 0; i < g->n_in; i++) {
    const struct input *in = &g->in[i];
    if (in->content_ok) {
      h = se3_hash_str(h, in->path);
      h = se3_hash_bytes(h, &in->content, sizeof in->content);
    }
    if (in->side) {
      h = se3_hash_str(h, in->side->path);
      h = se3_hash_bytes(h, &in->side_content, sizeof in->side_content);
    }
  }
  *legacy = h;
  note[0] = 0;
  if (!write) return STAGE_OK;
  int64_t kept = 0, again = 0;
  sqlite3_stmt *dup = NULL, *file = NULL;
  char *sql = NULL;
  if (sqlite3_prepare_v2(ctx->db,
                         "SELECT count(*) FROM rejects WHERE stage='ingest' AND set_name=?1 AND source_file=?2 AND "
                         "(reason LIKE 'duplicate by %' OR reason LIKE 'duplicate of molecule %')",
                         -1, &dup, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(ctx->db, FILE_ROW_SQL, -1, &file, NULL) != SQLITE_OK) {
    sqlite3_finalize(dup);
    return stage_sql_fail(ctx, "upgrading ingest");
  }
  int ret = STAGE_OK;
  for (int i = 0; i < g->n_in && ret == STAGE_OK; i++) {
    struct input *in = &g->in[i];
    in->key = i + 1; /* (the id an earlier se3screen gave: its place + 1) */
    long long lo = in->key * ID_STRIDE, hi = lo + ID_STRIDE - 1;
    sqlite3_reset(dup);
    sqlite3_bind_text(dup, 1, in->set, -1, SQLITE_STATIC);
    sqlite3_bind_text(dup, 2, in->stored, -1, SQLITE_STATIC);
    if (ingest_file_row(file, in) != SQLITE_DONE || sqlite3_step(dup) != SQLITE_ROW) {
      ret = stage_sql_fail(ctx, "upgrading ingest");
      break;
    }
    /* its rejects name the ids their records would have had */
    sql = sqlite3_mprintf("UPDATE rejects SET mol_id = %lld + record_no WHERE stage='ingest' AND set_name=%Q AND "
                          "source_file=%Q AND mol_id IS NULL;",
                          lo, in->set, in->stored);
    if (sqlite3_column_int64(dup, 0) > 0) { /* read again by the next run */
      sql = sqlite3_mprintf("%z DELETE FROM labels WHERE mol_id BETWEEN %lld AND %lld; DELETE FROM molecules WHERE id "
                            "BETWEEN %lld AND %lld; DELETE FROM rejects WHERE stage='ingest' AND mol_id BETWEEN %lld "
                            "AND %lld;",
                            sql, lo, hi, lo, hi, lo, hi);
      again++;
    } else {
      for (int64_t k = 0; k < in->n_parts && sql; k++) {
        int64_t i0 = in->first + k * g->chunk_size, i1 = i0 + g->chunk_size - 1;
        if (i1 > in->first + in->n_records - 1) i1 = in->first + in->n_records - 1;
        int64_t rec[2] = {0, 0};
        for (int e = 0; e < 2; e++) { /* the part's first and last records, as the reader numbers them */
          struct item it;
          struct wjob job;
          memset(&it, 0, sizeof it);
          memset(&job, 0, sizeof job);
          mol_init(&job.mol);
          int bad = ingest_read_record(ctx, g, e ? i1 : i0, &it, &job, NULL);
          rec[e] = it.record_no;
          ingest_item_free(&it, &job);
          if (bad) {
            sqlite3_free(sql);
            sqlite3_finalize(dup);
            sqlite3_finalize(file);
            return STAGE_ERROR;
          }
        }
        sql = sqlite3_mprintf(
            "%z INSERT OR REPLACE INTO ingest_parts(input, part, mol_key, label_key, first_record, last_record, "
            "n_ok, n_rejected) VALUES(%lld, %lld, %Q, %Q, %lld, %lld, (SELECT count(*) FROM molecules WHERE id "
            "BETWEEN %lld AND %lld), (SELECT count(*) FROM rejects WHERE stage='ingest' AND mol_id BETWEEN %lld AND "
            "%lld));",
            sql, (long long)in->key, (long long)k, in->part_key[k], in->label_key, (long long)rec[0], (long long)rec[1],
            lo + rec[0], lo + rec[1], lo + rec[0], lo + rec[1]);
      }
      kept++;
    }
    char *msg = NULL;
    if (!sql || sqlite3_exec(ctx->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
      se3_error_set(&ctx->err, SE3_ERR_DB, "upgrading ingest: %s", msg ? msg : "out of memory");
      sqlite3_free(msg);
      ret = STAGE_ERROR;
    }
    sqlite3_free(sql);
    sql = NULL;
  }
  sqlite3_finalize(dup);
  sqlite3_finalize(file);
  if (ret == STAGE_OK)
    snprintf(note, size, "%lld input file%s kept as read%s", (long long)kept, kept == 1 ? "" : "s",
             again ? "; files whose duplicates the earlier dedupe deleted are read again by the next run" : "");
  return ret;
}
