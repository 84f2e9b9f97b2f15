/* dedupe.c — finalize's work, once every chunk is in one database (this
 * run's, or screen.db after `merge`): every non-empty input must have given
 * a molecule, and set-wide dedupe lists each set's repeats in
 * `duplicates`. Both are decided from what is stored alone, so that a
 * sharded run ends as an unsharded one does. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* A non-empty input that yields no molecule is an error. Every such input
 * has reject rows (a file with no record at all got one at planning) and no
 * molecule (a duplicate reject counts as a molecule: dedupe may have run in
 * an earlier finalize). Found from the database alone, so that it works the
 * same after `merge`: files with molecules by a skip-scan over the id ranges
 * of the inputs, files with rejects by a skip-scan over the rejects' key. */
int ingest_check_yield(struct stage_ctx *ctx) {
  char **have = NULL, *last = NULL;
  int n_have = 0, cap = 0, n_bad = 0, ret = STAGE_ERROR;
  size_t o = 0;
  char msg[sizeof ctx->err] = "";
  sqlite3_stmt *q = NULL, *f = NULL, *c = NULL;
  if (sqlite3_prepare_v2(ctx->db, "SELECT id, source_file FROM molecules WHERE id >= ?1 ORDER BY id LIMIT 1", -1, &q,
                         NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(ctx->db,
                         "SELECT source_file FROM rejects WHERE stage='ingest' AND source_file > ?1 "
                         "ORDER BY source_file LIMIT 1",
                         -1, &f, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(ctx->db,
                         "SELECT count(*), coalesce(sum(reason LIKE 'duplicate by %' OR reason LIKE 'duplicate of molecule %'), 0), "
                         "(SELECT record_no || ': ' || reason || coalesce(': ' || detail, '') FROM rejects "
                         "WHERE stage='ingest' AND source_file=?1 "
                         "ORDER BY record_no LIMIT 1) FROM rejects WHERE stage='ingest' AND source_file=?1",
                         -1, &c, NULL) != SQLITE_OK) {
    ret = stage_sql_fail(ctx, "checking that every input gave molecules");
    goto out;
  }
  for (int64_t from = 0;;) {
    sqlite3_bind_int64(q, 1, from);
    int rc = sqlite3_step(q);
    if (rc != SQLITE_ROW) {
      if (rc != SQLITE_DONE) {
        ret = stage_sql_fail(ctx, "listing the inputs with molecules");
        goto out;
      }
      break;
    }
    int64_t id = sqlite3_column_int64(q, 0);
    if (n_have == cap) {
      cap = cap ? cap * 2 : 64;
      char **h = realloc(have, (size_t)cap * sizeof *have);
      if (!h) goto oom;
      have = h;
    }
    if (!(have[n_have] = strdup((const char *)sqlite3_column_text(q, 1)))) goto oom;
    n_have++;
    sqlite3_reset(q);
    from = (id / ID_STRIDE + 1) * ID_STRIDE;
  }
  if (n_have) qsort(have, (size_t)n_have, sizeof *have, cmp_str);
  if (!(last = strdup(""))) goto oom;
  for (;;) {
    sqlite3_bind_text(f, 1, last, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(f);
    if (rc != SQLITE_ROW) {
      if (rc != SQLITE_DONE) {
        ret = stage_sql_fail(ctx, "listing the inputs with rejects");
        goto out;
      }
      break;
    }
    free(last);
    if (!(last = strdup((const char *)sqlite3_column_text(f, 0)))) goto oom;
    sqlite3_reset(f);
    if (n_have && bsearch(&last, have, (size_t)n_have, sizeof *have, cmp_str)) continue;
    sqlite3_bind_text(c, 1, last, -1, SQLITE_TRANSIENT);
    if (sqlite3_step(c) != SQLITE_ROW) {
      ret = stage_sql_fail(ctx, "counting an input's rejects");
      goto out;
    }
    long long n_rej = sqlite3_column_int64(c, 0), n_dup = sqlite3_column_int64(c, 1);
    const char *first = (const char *)sqlite3_column_text(c, 2);
    if (n_dup == 0 && o < sizeof msg - 80) {
      o += (size_t)snprintf(msg + o, sizeof msg - o, "%s%s (%lld record%s rejected; record %.200s)", n_bad ? "; " : "",
                            last, n_rej, n_rej == 1 ? "" : "s", first ? first : "?");
      if (o >= sizeof msg) o = sizeof msg - 1;
    }
    if (n_dup == 0) n_bad++;
    sqlite3_reset(c);
  }
  if (n_bad == 0) {
    ret = STAGE_OK;
  } else {
    se3_error_set(&ctx->err, SE3_ERR_INPUT,
                  "%d non-empty input%s yielded no molecule, an error (the rejects table lists every reason; fix or "
                  "remove %s): %.880s",
                  n_bad, n_bad == 1 ? "" : "s", n_bad == 1 ? "it" : "them", msg);
  }
  goto out;
oom:
  se3_error_set(&ctx->err, SE3_ERR_MEMORY, "out of memory checking the inputs");
out:
  sqlite3_finalize(q);
  sqlite3_finalize(f);
  sqlite3_finalize(c);
  for (int i = 0; i < n_have; i++)
    free(have[i]);
  free(have);
  free(last);
  return ret;
}

/* Set-wide dedupe, decided afresh from what is stored: of each set's
 * molecules with the same key, the first in the workflow's order (its
 * file's place, then its record) stays, and the others are listed in
 * `duplicates` (the stages after ingest leave them out) and get a reject
 * row saying which one they repeat. Their rows stay: a file added ahead of
 * them, or removed, changes the choice without reading any molecule
 * again. */
int ingest_dedupe(struct stage_ctx *ctx) {
  const char *mode = cfg_str(ctx->cfg, "dedupe");
  const char *col = !strcmp(mode, "smiles") ? "smiles" : "inchikey";
  char *sql = sqlite3_mprintf(
      "DELETE FROM rejects WHERE stage='ingest' AND mol_id IN (SELECT mol_id FROM duplicates);"
      "DELETE FROM duplicates;"
      "INSERT INTO duplicates(mol_id, of_id, by) SELECT id, keep, %Q FROM ("
      "  SELECT m.id, first_value(m.id) OVER w AS keep, row_number() OVER w AS n "
      "  FROM molecules m JOIN ingest_files f ON f.input = m.id / %lld "
      "  WHERE %d AND (SELECT count(*) FROM molecules d WHERE d.set_name = m.set_name AND d.\"%w\" = m.\"%w\") > 1 "
      "  WINDOW w AS (PARTITION BY m.set_name, m.\"%w\" ORDER BY f.position, m.record_no, m.id)) WHERE n > 1;"
      "INSERT OR REPLACE INTO rejects(stage, set_name, source_file, record_no, line, name, chunk, reason, detail, "
      "  mol_id) SELECT 'ingest', m.set_name, m.source_file, m.record_no, NULL, m.name, m.chunk, 'duplicate by %s', "
      "  'of molecule ' || k.id || ' (' || k.source_file || ' record ' || k.record_no || ')', m.id "
      "  FROM duplicates d JOIN molecules m ON m.id = d.mol_id JOIN molecules k ON k.id = d.of_id;",
      col, ID_STRIDE, strcmp(mode, "none") != 0, col, col, col, mode);
  char *msg = NULL;
  int rc = sqlite3_exec(ctx->db, sql, NULL, NULL, &msg);
  sqlite3_free(sql);
  if (rc != SQLITE_OK) {
    se3_error_set(&ctx->err, SE3_ERR_DB, "dedupe: %s", msg ? msg : sqlite3_errmsg(ctx->db));
    sqlite3_free(msg);
    return STAGE_ERROR;
  }
  return STAGE_OK;
}
