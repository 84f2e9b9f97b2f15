/* rank.c — `scores` in, ranked hits out: the `ranks` table (read through the
 * `ranked_hits` view), WORKDIR/hits.csv and WORKDIR/hits.sdf (3D coordinates).
 * Both files speak the view's language (docs/outputs.md): hits.csv's columns
 * are ranked_hits' columns, and hits.sdf's title is the name and its SD tags
 * the other columns, by the same names and in the same order, a NULL std
 * left out: what `se3screen export WORKDIR --format csv|sdf` writes of the
 * view, so a script reads either file the same way.
 *
 * One chunk: filter (min/max), keep each InChIKey's best score (dedupe),
 * order, cut to `top`: with top > 0 in one pass over the scores keeping the
 * best `top` (rank_select, rank_select.c: memory bounded by top, not by the
 * library), with top: 0 (every score a hit) by SQLite's sort. The files are written to temporary names and renamed
 * before the chunk's transaction commits, so a kill leaves either the old or
 * the new files, and a rerun rewrites them identically.
 *
 * Names and paths come from the input files and may hold anything: hits.csv
 * writes a text cell that a spreadsheet would run as a formula with a ' in
 * front (common/csvcell.h), and hits.sdf writes titles and tags so that
 * none can end its record or value early (chem/sdtext.h).
 */
#define _GNU_SOURCE
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chem/dock.h"
#include "chem/mol.h"
#include "chem/obbridge.h"
#include "chem/sdtext.h"
#include "common/csvcell.h"
#include "common/atomic_file.h"
#include "rank_select.h"
#include "stage.h"
#include "train_set.h"

struct rstage {
  char target[256];
  char from[128];   /* the scores ranked, as SQL names them: "<src>".scores, or temp.rank_docking */
  const char *receptor; /* dock-only: stages.dock.receptor, named on each pose */
  int dock;         /* a dock-only workflow: the docking scores ranked, every pose written */
  int descending, top, dedupe, csv, sdf;
  int64_t n_scores; /* scores considered: the progress of the one chunk */
  const struct cfg_node *min, *max;
};

/* screen.db holds only the score shards' candidates for the hits of the
 * settings in meta 'scores_kept' (`merge` under stages.score.merge: hits):
 * these settings may rank them when they differ at most by a smaller top. */
static int check_kept(struct stage_ctx *ctx, const char *target) {
  char *sql = sqlite3_mprintf("SELECT value FROM \"%w\".meta WHERE key='scores_kept'", ctx->src);
  sqlite3_stmt *st = NULL;
  char kept[512] = "", mine[512];
  if (sqlite3_prepare_v2(ctx->db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
    snprintf(kept, sizeof kept, "%s", (const char *)sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  sqlite3_free(sql);
  if (!kept[0]) return STAGE_OK;
  rank_spec(ctx->cfg, target, mine, sizeof mine);
  long long top_kept = 0, top_mine = 0;
  const char *rest_kept = strchr(kept, ' '), *rest_mine = strchr(mine, ' ');
  sscanf(kept, "top=%lld", &top_kept);
  sscanf(mine, "top=%lld", &top_mine);
  if (rest_kept && rest_mine && !strcmp(rest_kept, rest_mine) && top_mine > 0 && top_mine <= top_kept) return STAGE_OK;
  return stage_fail_at(ctx, NULL,
                       "the scores were merged keeping only each shard's candidates for the hits of %s "
                       "(stages.score.merge: hits), and this rank asks for %s: set stages.score.merge: all and run "
                       "`se3screen merge` again (the shard databases keep every score), or rank as before",
                       kept, mine);
}

/* A dock-only workflow's scores: the dockings of the dock set's molecules
 * (as they are now; not the duplicates), as a view with the columns of
 * scores that rank reads (the model: the docking's set-up; no std). */
static int dock_scores(struct stage_ctx *ctx, struct rstage *r) {
  const struct cfg_node *c = ctx->cfg, *t = cfg_get(c, "target");
  const char *label = stage_dock_label(ctx->root);
  if (t && strcmp(cfg_str(c, "target"), label))
    return stage_fail_at(ctx, t,
                         "stages.rank.target: this workflow docks and trains no model, so rank ranks the docking "
                         "score, '%s' (stages.dock.label), not '%s'",
                         label, cfg_str(c, "target"));
  snprintf(r->target, sizeof r->target, "%s", label);
  r->dock = 1;
  r->receptor = cfg_str_opt(ctx->root, "stages.dock.receptor");
  snprintf(r->from, sizeof r->from, "temp.rank_docking");
  char *sql = sqlite3_mprintf(
      "DROP VIEW IF EXISTS temp.rank_docking; CREATE TEMP VIEW rank_docking AS SELECT k.mol_id AS rowid, k.mol_id AS "
      "mol_id, k.setup AS model, %Q AS target, k.score AS score, NULL AS std, NULL AS conformer_sd, k.mol_hash AS mol_hash, k.setup AS "
      "model_hash FROM \"%w\".docking k JOIN \"%w\".molecules m ON m.id = k.mol_id AND m.mol_hash IS k.mol_hash WHERE "
      "m.set_name = %Q AND NOT EXISTS (SELECT 1 FROM \"%w\".duplicates d WHERE d.mol_id = k.mol_id)",
      label, ctx->src, ctx->src, cfg_str(ctx->root, "stages.dock.set"), ctx->src);
  char *msg = NULL;
  int rc = sql ? sqlite3_exec(ctx->db, sql, NULL, NULL, &msg) : SQLITE_NOMEM;
  sqlite3_free(sql);
  if (rc != SQLITE_OK) {
    se3_error_set(&ctx->err, SE3_ERR_DB, "reading the dockings: %s", msg ? msg : sqlite3_errstr(rc));
    sqlite3_free(msg);
    return STAGE_ERROR;
  }
  /* lower is better, unless the workflow says otherwise */
  r->descending = cfg_written(cfg_get(c, "order")) && strcmp(cfg_str(c, "order"), "ascending") != 0;
  return STAGE_OK;
}

/* The target ranked by: the workflow's, the trained model's, or the
 * scores' one target (rank_target); or the docking score. */
static int rank_what(struct stage_ctx *ctx, struct rstage *r) {
  const struct cfg_node *c = ctx->cfg;
  r->descending = strcmp(cfg_str(c, "order"), "ascending") != 0;
  if (stage_dock_only(ctx->root)) return dock_scores(ctx, r);
  char *from = sqlite3_mprintf("\"%w\".scores", ctx->src);
  snprintf(r->from, sizeof r->from, "%s", from ? from : "scores");
  sqlite3_free(from);
  if (rank_target(ctx->db, ctx->src, c, r->target, sizeof r->target)) {
    enum { SHOWN = 6 };
    char found[SHOWN + 1][256], list[SHOWN * 64 + 32] = "";
    int k = rank_score_targets(ctx->db, ctx->src, found, SHOWN + 1);
    if (k == 0)
      return stage_fail_at(ctx, c,
                           "stages.rank.target: nothing to rank: no trained model names a target and there are no "
                           "scores (run the score stage first)");
    for (int i = 0; i < k && i < SHOWN; i++) {
      size_t used = strlen(list);
      snprintf(list + used, sizeof list - used, "%s'%.60s'", i ? ", " : "", found[i]);
    }
    if (k > SHOWN) strcat(list, ", ...");
    return stage_fail_at(ctx, c,
                         "stages.rank.target: the scores hold several targets (%s) and no trained model names one: "
                         "set stages.rank.target to the one to rank by",
                         list);
  }
  return check_kept(ctx, r->target);
}

static int rank_begin(struct stage_ctx *ctx, int64_t *n_chunks, int64_t *n_items) {
  struct rstage *r = calloc(1, sizeof *r);
  if (!r) return stage_fail_at(ctx, NULL, "out of memory");
  ctx->state = r;
  const struct cfg_node *c = ctx->cfg;
  if (rank_what(ctx, r)) return STAGE_ERROR;
  r->top = (int)cfg_int(c, "top");
  r->dedupe = cfg_bool(c, "dedupe");
  r->min = cfg_get(c, "min");
  r->max = cfg_get(c, "max");
  const struct cfg_node *outs = cfg_get(c, "outputs");
  for (int i = 0; outs && i < outs->n_kids; i++) {
    r->csv |= !strcmp(outs->kids[i]->value, "hits.csv");
    r->sdf |= !strcmp(outs->kids[i]->value, "hits.sdf");
  }
  ctx->outputs_gone = r->csv && stage_workdir_file_gone(ctx, "hits.csv")   ? "hits.csv"
                      : r->sdf && stage_workdir_file_gone(ctx, "hits.sdf") ? "hits.sdf"
                                                                           : NULL;
  *n_chunks = 1;
  char *sql = sqlite3_mprintf("SELECT count(*) FROM %s WHERE target = %Q", r->from, r->target);
  sqlite3_stmt *st = NULL;
  *n_items = 0;
  if (sqlite3_prepare_v2(ctx->db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
    *n_items = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_free(sql);
  r->n_scores = *n_items;
  if (*n_items == 0 && r->dock)
    return stage_fail_at(ctx, NULL, "no docking scores: every molecule of '%s' was rejected by dock (see `se3screen "
                                    "status` and the rejects table)",
                         cfg_str(ctx->root, "stages.dock.set"));
  if (*n_items == 0)
    return stage_fail_at(ctx, NULL, "no scores for '%s': run the score stage first (or set stages.rank.target)",
                         r->target);
  /* The ranks are keyed by the scores they rank (each with its molecule's
   * and model's hashes) and what the hits show of each molecule: the score
   * stage is keyed, so its hash (its settings chain) says nothing of
   * whether they changed. */
  sql = sqlite3_mprintf("SELECT s.mol_id, s.model, s.score, s.std, s.mol_hash, s.model_hash, m.name, m.smiles, "
                        "m.inchikey, m.set_name, m.source_file, m.record_no FROM %s s LEFT JOIN "
                        "\"%w\".molecules m ON m.id = s.mol_id WHERE s.target = %Q ORDER BY s.mol_id, s.model",
                        r->from, ctx->src, r->target);
  uint64_t h = SE3_HASH_INIT;
  int rc = sql ? sqlite3_prepare_v2(ctx->db, sql, -1, &st, NULL) : SQLITE_NOMEM;
  sqlite3_free(sql);
  while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
    int64_t v[2] = {sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 4)};
    double d[2] = {sqlite3_column_double(st, 2), sqlite3_column_type(st, 3) == SQLITE_NULL ? NAN : sqlite3_column_double(st, 3)};
    h = se3_hash_bytes(h, v, sizeof v);
    h = se3_hash_bytes(h, d, sizeof d);
    h = se3_hash_str(h, (const char *)sqlite3_column_text(st, 1));
    for (int c = 5; c < 12; c++) /* and what the hits show of the molecule */
      h = se3_hash_str(se3_hash_bytes(h, "|", 1), (const char *)sqlite3_column_text(st, c));
    rc = SQLITE_OK;
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return stage_sql_fail(ctx, "reading the scores");
  ctx->inputs_hash = h;
  return STAGE_OK;
}

/* Writes WORKDIR/name through a temporary file renamed over it
 * (common/atomic_file.h). */
static int out_open(struct stage_ctx *ctx, struct atomic_file *o, const char *name) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/%s", ctx->workdir, name);
  return atomic_file_open(o, path, &ctx->err) ? STAGE_ERROR : STAGE_OK;
}

/* Commits the file when ok, otherwise drops it (the old file stays). */
static int out_close(struct stage_ctx *ctx, struct atomic_file *o, int ok) {
  if (!o->f) return STAGE_OK;
  if (!ok) {
    atomic_file_abort(o);
    return STAGE_ERROR;
  }
  return atomic_file_commit(o, &ctx->err) ? STAGE_ERROR : STAGE_OK;
}

/* The ranks with top > 0: rank_select's best rows of the scores, in order. */
static int rank_top(struct stage_ctx *ctx, struct rstage *r) {
  sqlite3_stmt *st = NULL;
  int rc;
  int64_t *rows = NULL, n = 0;
  if (rank_select(ctx->db, r->from, ctx->src, ctx->cfg, r->target, r->descending, &rows, &n, &ctx->err))
    return STAGE_ERROR;
  char *sql = sqlite3_mprintf("INSERT INTO ranks(rank, mol_id, model, target, score, std, conformer_sd) "
                              "SELECT ?1, mol_id, model, target, score, std, conformer_sd FROM %s WHERE rowid = ?2",
                              r->from);
  rc = sqlite3_exec(ctx->db, "DELETE FROM ranks", NULL, NULL, NULL);
  if (rc == SQLITE_OK) rc = sqlite3_prepare_v2(ctx->db, sql, -1, &st, NULL);
  for (int64_t i = 0; i < n && rc == SQLITE_OK; i++) {
    sqlite3_bind_int64(st, 1, i + 1);
    sqlite3_bind_int64(st, 2, rows[i]);
    rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
    sqlite3_reset(st);
  }
  sqlite3_finalize(st);
  sqlite3_free(sql);
  free(rows);
  if (rc != SQLITE_OK) return stage_sql_fail(ctx, "ranking");
  return STAGE_OK;
}

/* The ranks with top: 0: every score that passes the filter a hit,
 * ordered by SQLite. */
static int rank_all(struct stage_ctx *ctx, struct rstage *r) {
  const char *tail = NULL;
  sqlite3_stmt *st = NULL;
  int rc;
  char *filter = sqlite3_mprintf("%s%s", r->min ? " AND s.score >= ?2" : "", r->max ? " AND s.score <= ?3" : "");
  const char *dir = r->descending ? "DESC" : "ASC";
  char *sql = sqlite3_mprintf(
      "DELETE FROM ranks;"
      "INSERT INTO ranks(rank, mol_id, model, target, score, std, conformer_sd) "
      "SELECT row_number() OVER (ORDER BY score %s, mol_id, model), mol_id, model, target, score, std, conformer_sd "
      "FROM ("
      "  SELECT s.mol_id, s.model, s.target, s.score, s.std, s.conformer_sd, "
      "         row_number() OVER (PARTITION BY CASE WHEN ?4 THEN m.inchikey ELSE s.mol_id END "
      "                            ORDER BY s.score %s, s.mol_id, s.model) AS k "
      "  FROM %s s JOIN \"%w\".molecules m ON m.id = s.mol_id WHERE s.target = ?1 %s"
      ") WHERE k = 1 ORDER BY score %s, mol_id, model",
      dir, dir, r->from, ctx->src, filter, dir);
  sqlite3_free(filter);
  /* two statements: the DELETE, then the INSERT with its parameters */
  rc = sqlite3_prepare_v2(ctx->db, sql, -1, &st, &tail);
  if (rc == SQLITE_OK) rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
  sqlite3_finalize(st);
  st = NULL;
  if (rc == SQLITE_OK) rc = sqlite3_prepare_v2(ctx->db, tail, -1, &st, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_bind_text(st, 1, r->target, -1, SQLITE_STATIC);
    if (r->min) sqlite3_bind_double(st, 2, r->min->f);
    if (r->max) sqlite3_bind_double(st, 3, r->max->f);
    sqlite3_bind_int(st, 4, r->dedupe);
    rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
  }
  sqlite3_finalize(st);
  sqlite3_free(sql);
  if (rc != SQLITE_OK) return stage_sql_fail(ctx, "ranking");
  return STAGE_OK;
}

/* The hits given their nearest training molecule: the first this many. */
enum { NEAREST_MAX_HITS = 10000 };
/* A library whose hits' median similarity is under this is far from the
 * training set: a warning. */
#define NEAREST_FAR 0.3

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The training set the hits are held against: that of the model that
 * scored them when it comes from elsewhere (stages.score.checkpoint, as
 * predict writes: the model carries it, train_set.h), else this
 * database's train split. ts->n 0: none (a dock-only workflow, a score-only
 * one before training, a model trained before models carried it: said in
 * the log). *what words it for the log. */
static int nearest_set(struct stage_ctx *ctx, struct train_set *ts, char *what, size_t len) {
  char file[PATH_MAX];
  const char *ck = stage_dock_only(ctx->root) ? NULL : cfg_str_opt(ctx->root, "stages.score.checkpoint");
  if (!ck) {
    snprintf(what, len, "the train split");
    return train_set_of_split(ctx->db, ctx->src, ts, &ctx->err) ? STAGE_ERROR : STAGE_OK;
  }
  int rc = train_set_of_model(ck, ts, file, sizeof file, &ctx->err);
  if (rc < 0) return STAGE_ERROR;
  if (rc == 0)
    ctx->report->log(ctx,
                     "note: the model (%s) carries no training set (trained before 2026-11-29): the hits' "
                     "nearest_train and similarity stay empty; retrain it to have them",
                     file);
  else if (ts->n < ts->total)
    snprintf(what, len, "the model's training set (a sample of %lld of its %lld molecules)", (long long)ts->n,
             (long long)ts->total);
  else
    snprintf(what, len, "the model's training set");
  return STAGE_OK;
}

/* The hits' median similarity in the log, a warning when it is under
 * NEAREST_FAR: the scores of such a library are extrapolations. */
static void nearest_log(struct stage_ctx *ctx, double *sims, int64_t n, const struct train_set *ts, const char *what) {
  if (n == 0) return;
  qsort(sims, (size_t)n, sizeof *sims, cmp_double);
  double median = n % 2 ? sims[n / 2] : 0.5 * (sims[n / 2 - 1] + sims[n / 2]);
  int64_t far = 0;
  while (far < n && sims[far] < NEAREST_FAR)
    far++;
  double pct = 100.0 * (double)far / (double)n;
  if (median < NEAREST_FAR)
    ctx->report->log(ctx,
                     "warning: the library is far from the model's training set: the median similarity of %lld "
                     "hit%s to their nearest training molecule is %.2f (%.0f %% under %.1f; %lld molecules of "
                     "%s): their scores are extrapolations, to be trusted less",
                     (long long)n, n == 1 ? "" : "s", median, pct, NEAREST_FAR, (long long)ts->n, what);
  else
    ctx->report->log(ctx,
                     "nearest training molecules: the median similarity of %lld hit%s is %.2f (%.0f %% under %.1f; "
                     "%lld molecules of %s)",
                     (long long)n, n == 1 ? "" : "s", median, pct, NEAREST_FAR, (long long)ts->n, what);
}

/* Each hit's nearest training molecule (nearest_set) and their Tanimoto
 * similarity into ranks (the first NEAREST_MAX_HITS hits): nearest_id
 * where it is a molecule of this database, nearest_name where it is the
 * model's. Ties go to the lower molecule id (the model's: its order). */
static int nearest_training(struct stage_ctx *ctx) {
  struct train_set ts;
  char what[128] = "";
  int ret = nearest_set(ctx, &ts, what, sizeof what);
  sqlite3_stmt *st = NULL, *up = NULL;
  char *sql = sqlite3_mprintf("SELECT r.rank, m.mol, r.mol_id FROM ranks r JOIN \"%w\".molecules m ON m.id = r.mol_id "
                              "WHERE "
                              "r.rank <= %d ORDER BY r.rank",
                              ctx->src, NEAREST_MAX_HITS);
  if (ret == STAGE_OK && ts.n > 0 &&
      (!sql || sqlite3_prepare_v2(ctx->db, sql, -1, &st, NULL) != SQLITE_OK ||
       sqlite3_prepare_v2(ctx->db,
                          "UPDATE ranks SET nearest_id = ?1, nearest_name = ?2, similarity = ?3 WHERE rank = ?4", -1,
                          &up, NULL) != SQLITE_OK))
    ret = stage_sql_fail(ctx, "finding the hits' nearest training molecules");
  sqlite3_free(sql);
  double *sims = st ? malloc(NEAREST_MAX_HITS * sizeof *sims) : NULL;
  if (st && !sims) ret = stage_fail_at(ctx, NULL, "out of memory");
  int64_t n_sims = 0;
  int rc = SQLITE_DONE;
  while (ret == STAGE_OK && st && (rc = sqlite3_step(st)) == SQLITE_ROW) {
    struct fp h;
    if (train_set_fp(sqlite3_column_blob(st, 1), (size_t)sqlite3_column_bytes(st, 1), &h, &ctx->err)) {
      struct se3_error_text why = se3_error_str(&ctx->err);
      se3_error_set(&ctx->err, ctx->err.kind,
                    "molecules row id=%lld: %s (hit %lld; run `se3screen verify` on the workdir)",
                    (long long)sqlite3_column_int64(st, 2), why.s, (long long)sqlite3_column_int64(st, 0));
      ret = STAGE_ERROR;
      break;
    }
    double sim;
    int64_t best = train_set_nearest(&ts, &h, &sim);
    if (ts.ids)
      sqlite3_bind_int64(up, 1, ts.ids[best]);
    else
      sqlite3_bind_null(up, 1);
    if (ts.ids)
      sqlite3_bind_null(up, 2);
    else
      sqlite3_bind_text(up, 2, ts.names[best], -1, SQLITE_STATIC);
    sqlite3_bind_double(up, 3, sim);
    sqlite3_bind_int64(up, 4, sqlite3_column_int64(st, 0));
    if (sqlite3_step(up) != SQLITE_DONE) ret = stage_sql_fail(ctx, "storing a hit's nearest training molecule");
    sqlite3_reset(up);
    if (n_sims < NEAREST_MAX_HITS) sims[n_sims++] = sim;
  }
  if (ret == STAGE_OK && rc != SQLITE_DONE) ret = stage_sql_fail(ctx, "finding the hits' nearest training molecules");
  if (ret == STAGE_OK) nearest_log(ctx, sims, n_sims, &ts, what);
  sqlite3_finalize(st);
  sqlite3_finalize(up);
  free(sims);
  train_set_free(&ts);
  return ret;
}

/* A hit's numbers as the files write them, and its name, from a row of
 * rank_chunk's query. */
struct hit_text {
  const char *name;
  char score[64], stdv[64], rank[32], rec[32], id[32], sim[32], csd[64];
  const char *isomer; /* the isomer scored and docked, where its input left stereo free; else NULL */
};

static void hit_read(sqlite3_stmt *st, struct hit_text *h) {
  h->name = (const char *)sqlite3_column_text(st, 1);
  h->stdv[0] = 0;
  snprintf(h->rank, sizeof h->rank, "%lld", (long long)sqlite3_column_int64(st, 0));
  snprintf(h->score, sizeof h->score, "%.9g", sqlite3_column_double(st, 5));
  if (sqlite3_column_type(st, 6) != SQLITE_NULL)
    snprintf(h->stdv, sizeof h->stdv, "%.9g", sqlite3_column_double(st, 6));
  snprintf(h->rec, sizeof h->rec, "%lld", (long long)sqlite3_column_int64(st, 9));
  snprintf(h->id, sizeof h->id, "%lld", (long long)sqlite3_column_int64(st, 10));
  h->sim[0] = 0;
  if (sqlite3_column_type(st, 19) != SQLITE_NULL) snprintf(h->sim, sizeof h->sim, "%.9g", sqlite3_column_double(st, 19));
  h->csd[0] = 0;
  if (sqlite3_column_type(st, 20) != SQLITE_NULL) snprintf(h->csd, sizeof h->csd, "%.9g", sqlite3_column_double(st, 20));
  h->isomer = (const char *)sqlite3_column_text(st, 21);
}

/* One line of hits.csv; then conformer_sd and isomer_smiles, each when some
 * hit has one. */
static void csv_hit(FILE *f, sqlite3_stmt *st, const struct hit_text *h, int with_csd, int with_iso) {
  const char *cols[15] = {h->rank,
                          h->name,
                          (const char *)sqlite3_column_text(st, 2),
                          (const char *)sqlite3_column_text(st, 3),
                          (const char *)sqlite3_column_text(st, 4),
                          h->score,
                          h->stdv,
                          (const char *)sqlite3_column_text(st, 7),
                          (const char *)sqlite3_column_text(st, 8),
                          h->rec,
                          h->id,
                          (const char *)sqlite3_column_text(st, 18),
                          h->sim,
                          h->csd,
                          h->isomer};
  /* rank, score, std, record_no, mol_id, similarity and conformer_sd are numbers; the rest is text */
  static const int text[15] = {0, 1, 1, 1, 1, 0, 0, 1, 1, 0, 0, 1, 0, 0, 1};
  for (int i = 0; i < 15; i++) {
    if ((i == 13 && !with_csd) || (i == 14 && !with_iso)) continue;
    if (i) fputc(',', f);
    csv_cell_write(f, cols[i], text[i]);
  }
  fputc('\n', f);
}

/* A number of column c of a hit's row as text ("" for NULL). */
static void num_text(sqlite3_stmt *st, int c, char *out, size_t n) {
  out[0] = 0;
  if (sqlite3_column_type(st, c) != SQLITE_NULL) snprintf(out, n, "%.9g", sqlite3_column_double(st, c));
}

/* One record of hits.sdf: the hit at its docked pose, where it has one.
 * In a dock-only workflow a record a pose, with the pose's tags. */
static int sdf_hit(struct stage_ctx *ctx, FILE *f, sqlite3_stmt *st, const struct hit_text *h) {
  struct mol m;
  char docked[64];
  num_text(st, 12, docked, sizeof docked);
  struct rstage *r = ctx->state;
  /* a pose of a dock-only workflow: which, its score and Vina's terms */
  int pose = r->dock && sqlite3_column_type(st, 13) != SQLITE_NULL;
  mol_init(&m);
  struct se3_error e;
  if (mol_from_blob(sqlite3_column_blob(st, 11), (size_t)sqlite3_column_bytes(st, 11), &m, &e))
    return stage_fail_at(ctx, NULL, "hits.sdf: molecules row id=%s: %s (run `se3screen verify` on the workdir)", h->id,
                         se3_error_str(&e).s);
  m.name = strdup(h->name ? h->name : "");
  /* the view's columns after the name, as export writes them: the
   * target is a value (a tag named after it, as before issue 31, made
   * each target's hits.sdf read differently), and std is left out when
   * NULL (one model, no spread) */
  const char *tags[][2] = {{"rank", h->rank},
                           {"smiles", (const char *)sqlite3_column_text(st, 2)},
                           {"inchikey", (const char *)sqlite3_column_text(st, 3)},
                           {"target", (const char *)sqlite3_column_text(st, 4)},
                           {"score", h->score},
                           {"std", h->stdv[0] ? h->stdv : NULL},
                           {"set_name", (const char *)sqlite3_column_text(st, 7)},
                           {"source_file", (const char *)sqlite3_column_text(st, 8)},
                           {"record_no", h->rec},
                           {"mol_id", h->id},
                           {"nearest_train", (const char *)sqlite3_column_text(st, 18)},
                           {"similarity", h->sim[0] ? h->sim : NULL},
                           {"conformer_sd", h->csd[0] ? h->csd : NULL},
                           {"isomer_smiles", h->isomer},
                           {"docking_score", docked[0] && !pose ? docked : NULL}};
  int bad = !m.name;
  for (size_t t = 0; t < sizeof tags / sizeof tags[0] && !bad; t++)
    if (tags[t][1]) bad = mol_add_tag(&m, tags[t][0], tags[t][1]) != 0;
  if (!bad && pose) {
    struct dock_pose p;
    double *v[] = {&p.score, &p.inter, &p.intra, &p.rmsd_lb, &p.rmsd_ub};
    static const int col[] = {12, 14, 15, 16, 17}; /* the hits query's pose columns (13: the mode) */
    for (int i = 0; i < 5; i++)
      *v[i] = sqlite3_column_type(st, col[i]) == SQLITE_NULL ? NAN : sqlite3_column_double(st, col[i]);
    bad = dock_pose_tags(&m, (int)sqlite3_column_int64(st, 13), &p) ||
          (r->receptor && mol_add_tag(&m, "receptor", r->receptor));
  }
  /* a title `$$$$`, a line break in a path or the target's name: sdtext.h */
  char *text = !bad && sd_make_safe(&m) == 0 ? ob_write_sdf(&m) : NULL;
  mol_free(&m);
  if (!text) return stage_fail_at(ctx, NULL, "molecule %s: Open Babel could not write it as SDF", h->id);
  fputs(text, f);
  free(text);
  return STAGE_OK;
}

static int rank_chunk(struct stage_ctx *ctx, int64_t chunk, int64_t *n_ok, int64_t *n_rej) {
  (void)chunk; /* one chunk */
  struct rstage *r = ctx->state;
  *n_ok = *n_rej = 0;
  sqlite3_stmt *st = NULL;
  int rc;
  int ret = r->top > 0 ? rank_top(ctx, r) : rank_all(ctx, r);
  if (ret == STAGE_OK) ret = nearest_training(ctx);
  if (ret != STAGE_OK) return ret;

  /* the files, from the view the database keeps */
  /* (a docked molecule at its docked pose, with its docking score; in a
   * dock-only workflow a row each pose, best first) */
  char *q = sqlite3_mprintf(
      "SELECT h.rank, h.name, h.smiles, h.inchikey, h.target, h.score, h.std, h.set_name, "
      "h.source_file, h.record_no, h.mol_id, coalesce(p.pose, nullif(k.pose, x''), m.mol), coalesce(p.score, "
      "k.score), p.mode, p.inter, p.intra, p.rmsd_lb, p.rmsd_ub, h.nearest_train, h.similarity, h.conformer_sd, "
      "h.isomer_smiles FROM ranked_hits h "
      "JOIN \"%w\".molecules m ON m.id = h.mol_id LEFT JOIN \"%w\".docking k ON k.mol_id = "
      "h.mol_id AND k.mol_hash IS m.mol_hash LEFT JOIN \"%w\".poses p ON p.mol_id = k.mol_id AND (%d OR p.mode = 1) "
      "ORDER BY h.rank, p.mode",
      ctx->src, ctx->src, ctx->src, r->dock);
  rc = sqlite3_prepare_v2(ctx->db, q, -1, &st, NULL);
  sqlite3_free(q);
  if (rc != SQLITE_OK) return stage_sql_fail(ctx, "reading the hits");
  struct atomic_file csv = {0}, sdf = {0};
  /* conformer_sd a column of hits.csv when a hit has one (several
   * conformers): with one conformer a molecule the file is as before; and
   * isomer_smiles, last, when a hit's input left stereo free */
  int with_csd = 0, with_iso = 0;
  sqlite3_stmt *ask = NULL;
  if (sqlite3_prepare_v2(ctx->db,
                         "SELECT EXISTS(SELECT 1 FROM ranks WHERE conformer_sd IS NOT NULL), EXISTS(SELECT 1 FROM "
                         "ranked_hits WHERE isomer_smiles IS NOT NULL)",
                         -1, &ask, NULL) == SQLITE_OK &&
      sqlite3_step(ask) == SQLITE_ROW) {
    with_csd = sqlite3_column_int(ask, 0);
    with_iso = sqlite3_column_int(ask, 1);
  }
  sqlite3_finalize(ask);
  if (r->csv && (ret = out_open(ctx, &csv, "hits.csv")) == STAGE_OK)
    fprintf(csv.f,
            "rank,name,smiles,inchikey,target,score,std,set_name,source_file,record_no,mol_id,nearest_train,"
            "similarity%s%s\n",
            with_csd ? ",conformer_sd" : "", with_iso ? ",isomer_smiles" : "");
  if (ret == STAGE_OK && r->sdf) ret = out_open(ctx, &sdf, "hits.sdf");
  int64_t n_poses = 0;
  while (ret == STAGE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
    struct hit_text h;
    hit_read(st, &h);
    int first = sqlite3_column_type(st, 13) == SQLITE_NULL || sqlite3_column_int64(st, 13) == 1;
    if (csv.f && first) csv_hit(csv.f, st, &h, with_csd, with_iso);
    if (sdf.f && (ret = sdf_hit(ctx, sdf.f, st, &h)) != STAGE_OK) break;
    *n_ok += first;
    n_poses += !first || sqlite3_column_type(st, 13) != SQLITE_NULL;
  }
  if (ret == STAGE_OK && rc != SQLITE_DONE) ret = stage_sql_fail(ctx, "reading the hits");
  sqlite3_finalize(st);
  int c1 = out_close(ctx, &csv, ret == STAGE_OK), c2 = out_close(ctx, &sdf, ret == STAGE_OK);
  if (ret == STAGE_OK) ret = c1 ? c1 : c2;
  if (ret == STAGE_OK) ctx->report->advance(ctx, r->n_scores);
  char poses_note[64];
  snprintf(poses_note, sizeof poses_note, " (%lld docked poses)", (long long)n_poses);
  if (ret == STAGE_OK)
    ctx->report->log(ctx, "%lld hits by %s (%s)%s%s%s", (long long)*n_ok, r->target,
                     r->descending ? "highest first" : "lowest first", r->csv ? "; hits.csv" : "",
                     r->sdf ? "; hits.sdf" : "", r->sdf && r->dock ? poses_note : "");
  return ret;
}

static void rank_end(struct stage_ctx *ctx) {
  free(ctx->state);
  ctx->state = NULL;
}

/* In a dock-only workflow rank reads dock's results (no score stage runs). */
static const char *rank_reads(const struct cfg_node *root) { return stage_dock_only(root) ? "dock" : NULL; }

const struct stage stage_rank = {
    .name = "rank",
    .tables = "ranks",
    .after = "score",
    .begin = rank_begin,
    .run_chunk = rank_chunk,
    .end = rank_end,
    .reads = {.stage = rank_reads, .set = "stages.score.set"},
    .show = {.done = "hits"},
};
