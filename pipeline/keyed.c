/* keyed.c — the plan and the prune of a stage that maps molecules to rows
 * (stages/stage.h: struct stage_rows): graph, basis, score and dock declare
 * their rows, and the runner plans their molecules, marks the chunks with
 * work and deletes the rows nothing wants any more, here, for all of them.
 *
 * The SQL is made from the declaration. Names in it are the declaration's
 * (constants of the stages, never the user's); values (the set, the key)
 * are bound as parameters: ?1 the set, ?2 and ?3 the key's values
 * (ctx->key).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/runner_internal.h"
#include "stages/stage.h"

/* The upstream table's key column. */
static const char *up_id(const struct stage_rows *w) { return strcmp(w->upstream, "molecules") ? "mol_id" : "id"; }

/* Whether the set is read from a join with molecules (upstream is another
 * table) or from upstream itself. */
static int joins_molecules(const struct stage_rows *w) { return w->set && strcmp(w->upstream, "molecules") != 0; }

/* " INDEXED BY name", or "" */
static char *indexed(const char *name) { return sqlite3_mprintf(name ? " INDEXED BY %s" : "%s", name ? name : ""); }

/* The molecules a stage maps, as a FROM clause and its WHERE conditions,
 * over schema `schema` ("%w" to leave it to the caller's mprintf): upstream
 * as u (and molecules as m, for the set), then " AND ..." conditions. With
 * hint, upstream's index is named. */
static char *mapped_from(const struct stage_rows *w, const struct cfg_node *root, const char *schema, int hint) {
  const char *id = up_id(w), *within = w->within ? w->within(root) : NULL;
  const char *set_col = joins_molecules(w) ? "m.set_name" : "u.set_name";
  return sqlite3_mprintf("\"%s\".%s u%z%z WHERE 1%z%z%z", schema, w->upstream, indexed(hint ? w->up_index : NULL),
                         joins_molecules(w) ? sqlite3_mprintf(" JOIN \"%s\".molecules m ON m.id = u.mol_id", schema)
                                            : sqlite3_mprintf(""),
                         w->set ? sqlite3_mprintf(" AND %s = ?1", set_col) : sqlite3_mprintf(""),
                         within ? sqlite3_mprintf(" AND EXISTS (SELECT 1 FROM \"%s\".%s q WHERE q.mol_id = u.%s)",
                                                  schema, within, id)
                                : sqlite3_mprintf(""),
                         w->no_duplicates
                             ? sqlite3_mprintf(" AND NOT EXISTS (SELECT 1 FROM \"%s\".duplicates d WHERE d.mol_id = u.%s)",
                                               schema, id)
                             : sqlite3_mprintf(""));
}

/* " AND t.k = ?2 [AND t.k2 = ?3]" for the declared key columns (alias a) */
static char *key_match(const struct stage_rows *w, const char *a) {
  char *q = sqlite3_mprintf("");
  for (int k = 0; q && k < 2 && w->key[k]; k++)
    q = sqlite3_mprintf("%z AND %s.%s = ?%d", q, a, w->key[k], k + 2);
  return q;
}

/* The two tests of a molecule's work as stage_absent formats (one %w: the
 * schema): its row of its present contents under this key, its reject. */
static char *row_test(const struct stage *s) {
  const struct stage_rows *w = s->keyed->rows;
  return sqlite3_mprintf("SELECT 1 FROM \"%%w\".%s t%z WHERE t.mol_id = u.%s AND t.mol_hash IS u.mol_hash%z", w->table,
                         indexed(w->index), up_id(w), key_match(w, "t"));
}
static char *reject_test(const struct stage *s) {
  const struct stage_rows *w = s->keyed->rows;
  return sqlite3_mprintf("SELECT 1 FROM \"%%w\".rejects r WHERE r.stage = '%s' AND r.mol_id = u.%s AND r.mol_hash IS "
                         "u.mol_hash%z",
                         s->name, up_id(w),
                         w->rejects_meta ? sqlite3_mprintf(" AND (SELECT value FROM meta WHERE key = '%s') IS ?2",
                                                           w->rejects_meta)
                                         : sqlite3_mprintf(""));
}

int run_rows_plan(struct stage_ctx *ctx, const struct stage *s, int64_t *n_chunks, int64_t *n_items) {
  const struct stage_rows *w = s->keyed->rows;
  const char *set = w->set ? cfg_str(ctx->root, w->set) : NULL;
  const char *params[3] = {set, ctx->key[0], ctx->key[1]};
  char *from = mapped_from(w, ctx->root, ctx->src, 0);
  char *sql = from ? sqlite3_mprintf("SELECT u.%s FROM %s ORDER BY 1", up_id(w), from) : NULL;
  sqlite3_free(from);
  int bad = stage_ids_load(ctx, sql, set, &ctx->plan, n_chunks);
  sqlite3_free(sql);
  if (bad) return STAGE_ERROR;
  if (stage_is_keyed(s, ctx->root)) {
    char *rt = row_test(s), *jt = reject_test(s);
    from = mapped_from(w, ctx->root, ctx->src, 1);
    sql = rt && jt && from ? sqlite3_mprintf("SELECT u.%s FROM %s%z%z ORDER BY 1", up_id(w), from, stage_absent(ctx, rt),
                                             stage_absent(ctx, jt))
                           : NULL;
    sqlite3_free(rt);
    sqlite3_free(jt);
    sqlite3_free(from);
    bad = stage_ids_pending(ctx, sql, params, 3, &ctx->plan);
    sqlite3_free(sql);
    if (bad) return STAGE_ERROR;
  }
  if (w->planned && w->planned(ctx) != STAGE_OK) return STAGE_ERROR;
  *n_items = ctx->plan.n;
  return STAGE_OK;
}

/* Runs one statement of the prune with the plan's parameters. */
static int prune_exec(struct stage_ctx *ctx, const char *sql, const char *const *params) {
  sqlite3_stmt *st = NULL;
  int rc = sql ? sqlite3_prepare_v2(ctx->db, sql, -1, &st, NULL) : SQLITE_NOMEM;
  for (int i = 0; rc == SQLITE_OK && i < sqlite3_bind_parameter_count(st); i++)
    sqlite3_bind_text(st, i + 1, params[i], -1, SQLITE_TRANSIENT);
  if (rc == SQLITE_OK) rc = sqlite3_step(st);
  sqlite3_finalize(st);
  return rc == SQLITE_DONE ? STAGE_OK : STAGE_ERROR;
}

int run_rows_prune(struct stage_ctx *ctx, const struct stage *s, int64_t *n) {
  const struct stage_rows *w = s->keyed->rows;
  *n = 0;
  if (ctx->src && strcmp(ctx->src, "main")) return STAGE_OK; /* a shard's database: screen.db is pruned by the next run */
  const char *set = w->set && !w->keep_out_of_set ? cfg_str(ctx->root, w->set) : NULL;
  const char *params[3] = {set, ctx->key[0], ctx->key[1]};
  /* the molecules that still want a row: those the stage maps (but
   * within, which decides what is done next, not what is kept) */
  struct stage_rows kept = *w;
  kept.within = NULL;
  if (w->keep_out_of_set) kept.set = NULL;
  char *from = mapped_from(&kept, ctx->root, "main", 1);
  char *stale = sqlite3_mprintf("");
  for (int k = 0; stale && k < 2 && w->key[k]; k++)
    stale = sqlite3_mprintf("%z%s IS NOT ?%d OR ", stale, w->key[k], k + 2);
  const char *id = up_id(w);
  char *rows = from && stale
                   ? sqlite3_mprintf("DELETE FROM %s WHERE %smol_id IN (SELECT t.mol_id FROM %s t%z WHERE NOT EXISTS "
                                     "(SELECT 1 FROM %s AND u.%s = t.mol_id AND u.mol_hash IS t.mol_hash))",
                                     w->table, stale, w->table, indexed(w->index), from, id)
                   : NULL;
  char *rejects =
      from ? sqlite3_mprintf("DELETE FROM rejects WHERE stage = '%s' AND (%zNOT EXISTS (SELECT 1 FROM %s AND u.%s = "
                             "rejects.mol_id AND u.mol_hash IS rejects.mol_hash))",
                             s->name,
                             w->rejects_meta ? sqlite3_mprintf("(SELECT value FROM meta WHERE key = '%s') IS NOT ?2 OR ",
                                                               w->rejects_meta)
                                             : sqlite3_mprintf(""),
                             from, id)
           : NULL;
  char *meta = w->rejects_meta
                   ? sqlite3_mprintf("INSERT OR REPLACE INTO meta(key, value) VALUES('%s', ?2)", w->rejects_meta)
                   : NULL;
  int64_t before = sqlite3_total_changes64(ctx->db);
  int rc = rows && rejects ? STAGE_OK : stage_fail_at(ctx, NULL, "out of memory");
  if (rc == STAGE_OK && (prune_exec(ctx, rows, params) || prune_exec(ctx, rejects, params)))
    rc = stage_sql_fail(ctx, "deleting the rows of molecules changed or gone");
  *n = sqlite3_total_changes64(ctx->db) - before;
  /* (this database's rejects are of this key from here on) */
  if (rc == STAGE_OK && meta && prune_exec(ctx, meta, params)) rc = stage_sql_fail(ctx, "recording the rejects' key");
  sqlite3_free(from);
  sqlite3_free(stale);
  sqlite3_free(rows);
  sqlite3_free(rejects);
  sqlite3_free(meta);
  return rc;
}
