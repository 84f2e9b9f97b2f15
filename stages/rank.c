/* rank.c — `scores` in, ranked hits out: the `ranks` table (read through the
 * `ranked_hits` view), WORKDIR/hits.csv and WORKDIR/hits.sdf (3D coordinates,
 * SD tags for the score, its spread, the rank, the InChIKey and where the
 * molecule came from).
 *
 * One chunk: filter (min/max), keep each InChIKey's best score (dedupe),
 * order, cut to `top`. The files are written to temporary names and renamed
 * before the chunk's transaction commits, so a kill leaves either the old or
 * the new files, and a rerun rewrites them identically.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chem/mol.h"
#include "chem/obbridge.h"
#include "models/atomic_file.h"
#include "stage.h"

struct rstage {
  char target[256];
  int descending, top, dedupe, csv, sdf;
  int64_t n_scores; /* scores considered: the progress of the one chunk */
  const struct cfg_node *min, *max;
};

static int rank_begin(struct stage_ctx *ctx, int64_t *n_chunks, int64_t *n_items) {
  struct rstage *r = calloc(1, sizeof *r);
  if (!r) return stage_fail_at(ctx, NULL, "out of memory");
  ctx->state = r;
  const struct cfg_node *c = ctx->cfg;
  const char *target = cfg_str(c, "target", NULL);
  if (!target) { /* the trained model's */
    char *sql = sqlite3_mprintf("SELECT target FROM \"%w\".models ORDER BY id LIMIT 1", ctx->src);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(ctx->db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
      snprintf(r->target, sizeof r->target, "%s", sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    sqlite3_free(sql);
    if (!r->target[0]) return stage_fail_at(ctx, c, "stages.rank.target: no trained model names one; set it");
  } else {
    snprintf(r->target, sizeof r->target, "%s", target);
  }
  r->descending = strcmp(cfg_str(c, "order", "descending"), "ascending") != 0;
  r->top = (int)cfg_int(c, "top", 100);
  r->dedupe = cfg_bool(c, "dedupe", 1);
  r->min = cfg_get(c, "min");
  r->max = cfg_get(c, "max");
  const struct cfg_node *outs = cfg_get(c, "outputs");
  for (int i = 0; outs && i < outs->n_kids; i++) {
    r->csv |= !strcmp(outs->kids[i]->value, "hits.csv");
    r->sdf |= !strcmp(outs->kids[i]->value, "hits.sdf");
  }
  *n_chunks = 1;
  char *sql = sqlite3_mprintf("SELECT count(*) FROM \"%w\".scores WHERE target = %Q", ctx->src, r->target);
  sqlite3_stmt *st = NULL;
  *n_items = 0;
  if (sqlite3_prepare_v2(ctx->db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
    *n_items = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_free(sql);
  r->n_scores = *n_items;
  if (*n_items == 0)
    return stage_fail_at(ctx, NULL, "no scores for '%s': run the score stage first (or set stages.rank.target)",
                         r->target);
  return STAGE_OK;
}

/* A CSV field: quoted when it holds a comma, quote or line break. */
static void csv_field(FILE *f, const char *s) {
  if (!s) return;
  if (!strpbrk(s, ",\"\n\r")) {
    fputs(s, f);
    return;
  }
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"') fputc('"', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

/* Writes WORKDIR/name through a temporary file renamed over it
 * (models/atomic_file.h). */
static int out_open(struct stage_ctx *ctx, struct atomic_file *o, const char *name) {
  char path[PATH_MAX], err[PATH_MAX + 256];
  snprintf(path, sizeof path, "%s/%s", ctx->workdir, name);
  return atomic_file_open(o, path, err, sizeof err) ? stage_fail_at(ctx, NULL, "%s", err) : STAGE_OK;
}

/* Commits the file when ok, otherwise drops it (the old file stays). */
static int out_close(struct stage_ctx *ctx, struct atomic_file *o, int ok) {
  if (!o->f) return STAGE_OK;
  if (!ok) {
    atomic_file_abort(o);
    return STAGE_ERROR;
  }
  char err[2 * PATH_MAX + 256];
  return atomic_file_commit(o, err, sizeof err) ? stage_fail_at(ctx, NULL, "%s", err) : STAGE_OK;
}

static int rank_chunk(struct stage_ctx *ctx, int64_t chunk, int64_t *n_ok, int64_t *n_rej) {
  (void)chunk; /* one chunk */
  struct rstage *r = ctx->state;
  *n_ok = *n_rej = 0;
  char *filter = sqlite3_mprintf("%s%s", r->min ? " AND s.value >= ?2" : "", r->max ? " AND s.value <= ?3" : "");
  const char *dir = r->descending ? "DESC" : "ASC";
  char *sql =
      sqlite3_mprintf("DELETE FROM ranks;"
                      "INSERT INTO ranks(rank, mol_id, model, target, value, std) "
                      "SELECT row_number() OVER (ORDER BY value %s, mol_id), mol_id, model, target, value, std FROM ("
                      "  SELECT s.mol_id, s.model, s.target, s.value, s.std, "
                      "         row_number() OVER (PARTITION BY CASE WHEN ?4 THEN m.inchikey ELSE s.mol_id END "
                      "                            ORDER BY s.value %s, s.mol_id) AS k "
                      "  FROM \"%w\".scores s JOIN \"%w\".molecules m ON m.id = s.mol_id WHERE s.target = ?1 %s"
                      ") WHERE k = 1 ORDER BY value %s, mol_id LIMIT ?5",
                      dir, dir, ctx->src, ctx->src, filter, dir);
  sqlite3_free(filter);
  /* two statements: the DELETE, then the INSERT with its parameters */
  const char *tail = NULL;
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_prepare_v2(ctx->db, sql, -1, &st, &tail);
  if (rc == SQLITE_OK) rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
  sqlite3_finalize(st);
  st = NULL;
  if (rc == SQLITE_OK) rc = sqlite3_prepare_v2(ctx->db, tail, -1, &st, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_bind_text(st, 1, r->target, -1, SQLITE_STATIC);
    if (r->min) sqlite3_bind_double(st, 2, r->min->f);
    if (r->max) sqlite3_bind_double(st, 3, r->max->f);
    sqlite3_bind_int(st, 4, r->dedupe);
    sqlite3_bind_int64(st, 5, r->top > 0 ? r->top : -1);
    rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
  }
  sqlite3_finalize(st);
  sqlite3_free(sql);
  if (rc != SQLITE_OK) return stage_sql_fail(ctx, "ranking");

  /* the files, from the view the database keeps */
  char *q = sqlite3_mprintf("SELECT h.rank, h.name, h.smiles, h.inchikey, h.target, h.score, h.std, h.set_name, "
                            "h.source_file, h.record_no, h.mol_id, m.mol FROM ranked_hits h "
                            "JOIN \"%w\".molecules m ON m.id = h.mol_id ORDER BY h.rank",
                            ctx->src);
  rc = sqlite3_prepare_v2(ctx->db, q, -1, &st, NULL);
  sqlite3_free(q);
  if (rc != SQLITE_OK) return stage_sql_fail(ctx, "reading the hits");
  struct atomic_file csv = {0}, sdf = {0};
  int ret = STAGE_OK;
  if (r->csv && (ret = out_open(ctx, &csv, "hits.csv")) == STAGE_OK)
    fputs("rank,name,smiles,inchikey,target,score,std,set,source_file,record_no,mol_id\n", csv.f);
  if (ret == STAGE_OK && r->sdf) ret = out_open(ctx, &sdf, "hits.sdf");
  while (ret == STAGE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
    const char *name = (const char *)sqlite3_column_text(st, 1);
    char score[64], stdv[64] = "", rank[32], rec[32], id[32];
    snprintf(rank, sizeof rank, "%lld", (long long)sqlite3_column_int64(st, 0));
    snprintf(score, sizeof score, "%.9g", sqlite3_column_double(st, 5));
    if (sqlite3_column_type(st, 6) != SQLITE_NULL) snprintf(stdv, sizeof stdv, "%.9g", sqlite3_column_double(st, 6));
    snprintf(rec, sizeof rec, "%lld", (long long)sqlite3_column_int64(st, 9));
    snprintf(id, sizeof id, "%lld", (long long)sqlite3_column_int64(st, 10));
    if (csv.f) {
      const char *cols[11] = {rank,
                              name,
                              (const char *)sqlite3_column_text(st, 2),
                              (const char *)sqlite3_column_text(st, 3),
                              (const char *)sqlite3_column_text(st, 4),
                              score,
                              stdv,
                              (const char *)sqlite3_column_text(st, 7),
                              (const char *)sqlite3_column_text(st, 8),
                              rec,
                              id};
      for (int i = 0; i < 11; i++) {
        if (i) fputc(',', csv.f);
        csv_field(csv.f, cols[i]);
      }
      fputc('\n', csv.f);
    }
    if (sdf.f) {
      struct mol m;
      char err[256];
      mol_init(&m);
      if (mol_from_blob(sqlite3_column_blob(st, 11), (size_t)sqlite3_column_bytes(st, 11), &m, err, sizeof err)) {
        ret = stage_fail_at(ctx, NULL, "hits.sdf: molecules row id=%s: %s (run `se3screen verify` on the workdir)", id,
                            err);
        break;
      }
      m.name = strdup(name ? name : "");
      char tag[300];
      snprintf(tag, sizeof tag, "%s", (const char *)sqlite3_column_text(st, 4));
      mol_add_tag(&m, tag, score);
      if (stdv[0]) {
        snprintf(tag, sizeof tag, "%s_std", (const char *)sqlite3_column_text(st, 4));
        mol_add_tag(&m, tag, stdv);
      }
      mol_add_tag(&m, "rank", rank);
      mol_add_tag(&m, "inchikey", (const char *)sqlite3_column_text(st, 3));
      mol_add_tag(&m, "source_file", (const char *)sqlite3_column_text(st, 8));
      mol_add_tag(&m, "record_no", rec);
      char *text = ob_write_sdf(&m);
      mol_free(&m);
      if (!text) {
        ret = stage_fail_at(ctx, NULL, "molecule %s: Open Babel could not write it as SDF", id);
        break;
      }
      fputs(text, sdf.f);
      free(text);
    }
    ++*n_ok;
  }
  if (ret == STAGE_OK && rc != SQLITE_DONE) ret = stage_sql_fail(ctx, "reading the hits");
  sqlite3_finalize(st);
  int c1 = out_close(ctx, &csv, ret == STAGE_OK), c2 = out_close(ctx, &sdf, ret == STAGE_OK);
  if (ret == STAGE_OK) ret = c1 ? c1 : c2;
  if (ret == STAGE_OK) ctx->report->advance(ctx, r->n_scores);
  if (ret == STAGE_OK)
    ctx->report->log(ctx, "%lld hits by %s (%s)%s%s", (long long)*n_ok, r->target,
                     r->descending ? "highest first" : "lowest first", r->csv ? "; hits.csv" : "",
                     r->sdf ? "; hits.sdf" : "");
  return ret;
}

static void rank_end(struct stage_ctx *ctx) {
  free(ctx->state);
  ctx->state = NULL;
}

const struct stage stage_rank = {
    .name = "rank",
    .tables = "ranks",
    .uses_sets = 0,
    .after = "score",
    .begin = rank_begin,
    .run_chunk = rank_chunk,
    .finalize = NULL,
    .end = rank_end,
};
