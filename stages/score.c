/* score.c — a trained model over a molecule set: `graphs` of the set in,
 * `scores` out (one row per molecule and model).
 *
 * The model is this workflow's `train` result (the `models` row and its best
 * checkpoint). Plan: the set's molecule ids with a graph, ascending, in
 * chunks of run.chunk_size; a chunk's predictions and its ledger row commit
 * together, so a killed run resumes at the chunk in flight and gives the same
 * scores (the forward pass is deterministic for a fixed thread count).
 */
#define _GNU_SOURCE
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chem/graph.h"
#include "models/checkpoint.h"
#include "models/cpu/model.h"
#include "stage.h"

struct sstage {
  const char *set;
  int batch, classify;
  char model_id[64], target[256];
  double mean, std;
  struct se3_model model;
  int have_model;
  real *params;
  struct stage_ids plan;
  char *select;
  struct nn_arena ws;
  struct se3_batch_buf bb;
};

/* The models row: checkpoint, architecture words, standardisation. */
static int load_model(struct stage_ctx *ctx, struct sstage *s) {
  char *sql = sqlite3_mprintf("SELECT id, target, task, checkpoint, arch, mean, std FROM \"%w\".models "
                              "ORDER BY id LIMIT 1",
                              ctx->src);
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_prepare_v2(ctx->db, sql, -1, &st, NULL);
  sqlite3_free(sql);
  if (rc != SQLITE_OK) return stage_sql_fail(ctx, "reading the model");
  if (sqlite3_step(st) != SQLITE_ROW) {
    sqlite3_finalize(st);
    return stage_fail_at(ctx, NULL, "no trained model: run the train stage first");
  }
  snprintf(s->model_id, sizeof s->model_id, "%s", sqlite3_column_text(st, 0));
  snprintf(s->target, sizeof s->target, "%s", sqlite3_column_text(st, 1));
  s->classify = !strcmp((const char *)sqlite3_column_text(st, 2), "classification");
  char ck[PATH_MAX + 256];
  snprintf(ck, sizeof ck, "%s/%s", ctx->workdir, sqlite3_column_text(st, 3));
  struct se3_config c;
  int bad_arch = se3_config_parse((const char *)sqlite3_column_text(st, 4), &c);
  s->mean = sqlite3_column_double(st, 5);
  s->std = sqlite3_column_double(st, 6);
  sqlite3_finalize(st);
  char err[512];
  if (bad_arch) return stage_fail_at(ctx, NULL, "model %s: its architecture record is unreadable", s->model_id);
  if (se3_model_init(&s->model, &c, err, sizeof err)) return stage_fail_at(ctx, NULL, "model %s: %s", s->model_id, err);
  s->have_model = 1;
  s->params = malloc(s->model.n_params * sizeof *s->params);
  if (!s->params) return stage_fail_at(ctx, NULL, "out of memory");
  struct se3_ckpt k;
  if (se3_ckpt_load(&k, ck, err, sizeof err)) return stage_fail_at(ctx, NULL, "%s", err);
  int bad = se3_ckpt_get(&k, "params", sizeof(real) == 4 ? SE3_CK_F32 : SE3_CK_F64, s->params, s->model.n_params);
  se3_ckpt_free(&k);
  if (bad) return stage_fail_at(ctx, NULL, "%s: not a checkpoint of model %s", ck, s->model_id);
  return STAGE_OK;
}

static int score_begin(struct stage_ctx *ctx, int64_t *n_chunks, int64_t *n_items) {
  struct sstage *s = calloc(1, sizeof *s);
  if (!s) return stage_fail_at(ctx, NULL, "out of memory");
  ctx->state = s;
  s->set = cfg_str(ctx->cfg, "set", "library");
  s->batch = (int)cfg_int(ctx->cfg, "batch_size", 64);
  if (load_model(ctx, s)) return STAGE_ERROR;
  se3_batch_buf_init(&s->bb, s->model.cfg.node_in, GRAPH_EDGE_WIDTH);
  char *plan = sqlite3_mprintf("SELECT g.mol_id FROM \"%w\".graphs g JOIN \"%w\".molecules m ON m.id = g.mol_id "
                               "WHERE m.set_name = ?1 ORDER BY 1",
                               ctx->src, ctx->src);
  int bad = stage_ids_load(ctx, plan, s->set, &s->plan, n_chunks);
  sqlite3_free(plan);
  if (bad) return STAGE_ERROR;
  if (s->plan.n == 0)
    return stage_fail_at(ctx, cfg_get(ctx->cfg, "set"), "stages.score.set: set '%s' has no molecules with a graph",
                         s->set);
  *n_items = s->plan.n;
  s->select =
      sqlite3_mprintf("SELECT g.mol_id, g.graph FROM \"%w\".graphs g JOIN \"%w\".molecules m ON m.id = g.mol_id "
                      "WHERE m.set_name = ?1 AND g.mol_id BETWEEN ?2 AND ?3 ORDER BY g.mol_id",
                      ctx->src, ctx->src);
  return s->select ? STAGE_OK : stage_fail_at(ctx, NULL, "out of memory");
}

/* Predicts the molecules gathered in bb and writes their scores. */
static int flush(struct stage_ctx *ctx, struct sstage *s, sqlite3_stmt *ins, const int64_t *ids, int k, int64_t chunk) {
  if (k == 0) return STAGE_OK;
  real *out = malloc((size_t)k * sizeof *out);
  if (!out || se3_batch_bases(&s->bb, &s->model.plan)) {
    free(out);
    return stage_fail_at(ctx, NULL, "out of memory scoring");
  }
  struct se3_tape *t = se3_model_forward_ws(&s->model, s->params, &s->bb.b, out, &s->ws);
  if (!t) {
    free(out);
    return stage_fail_at(ctx, NULL, "out of memory scoring");
  }
  se3_tape_free(t);
  int ret = STAGE_OK;
  for (int i = 0; i < k && ret == STAGE_OK; i++) {
    double v = s->classify ? 1 / (1 + exp(-(double)out[i])) : (double)out[i] * s->std + s->mean;
    sqlite3_reset(ins);
    sqlite3_bind_int64(ins, 1, ids[i]);
    sqlite3_bind_text(ins, 2, s->model_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(ins, 3, s->target, -1, SQLITE_STATIC);
    sqlite3_bind_double(ins, 4, v);
    sqlite3_bind_int64(ins, 5, chunk);
    if (sqlite3_step(ins) != SQLITE_DONE) ret = stage_sql_fail(ctx, "writing scores");
  }
  free(out);
  se3_batch_clear(&s->bb);
  ctx->report->advance(ctx, k);
  return ret;
}

static int score_chunk(struct stage_ctx *ctx, int64_t chunk, int64_t *n_ok, int64_t *n_rej) {
  struct sstage *s = ctx->state;
  int64_t lo = chunk * s->plan.chunk_size, hi = lo + s->plan.chunk_size;
  if (hi > s->plan.n) hi = s->plan.n;
  *n_ok = *n_rej = 0;
  sqlite3_stmt *sel = NULL, *ins = NULL;
  if (sqlite3_prepare_v2(ctx->db, s->select, -1, &sel, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(ctx->db,
                         "INSERT OR REPLACE INTO scores(mol_id, model, target, value, std, chunk) "
                         "VALUES(?1, ?2, ?3, ?4, NULL, ?5)",
                         -1, &ins, NULL) != SQLITE_OK) {
    sqlite3_finalize(sel);
    return stage_sql_fail(ctx, "scoring");
  }
  sqlite3_bind_text(sel, 1, s->set, -1, SQLITE_STATIC);
  sqlite3_bind_int64(sel, 2, s->plan.ids[lo]);
  sqlite3_bind_int64(sel, 3, s->plan.ids[hi - 1]);
  int64_t *ids = malloc((size_t)s->batch * sizeof *ids);
  int k = 0, ret = ids ? STAGE_OK : stage_fail_at(ctx, NULL, "out of memory");
  int rc;
  while (ret == STAGE_OK && (rc = sqlite3_step(sel)) == SQLITE_ROW) {
    if (*ctx->stop) {
      ret = STAGE_STOPPED;
      break;
    }
    int64_t id = sqlite3_column_int64(sel, 0);
    struct graph g;
    char err[256];
    graph_init(&g);
    if (graph_from_blob(sqlite3_column_blob(sel, 1), (size_t)sqlite3_column_bytes(sel, 1), &g, err, sizeof err)) {
      ret = stage_reject_mol(ctx, "score", id, chunk, err);
      ++*n_rej;
      continue;
    }
    if (g.node_width != s->model.cfg.node_in) {
      char why[160];
      snprintf(why, sizeof why, "its graph has %d node features, the model %d (graph settings changed after training?)",
               g.node_width, s->model.cfg.node_in);
      graph_free(&g);
      ret = stage_reject_mol(ctx, "score", id, chunk, why);
      ++*n_rej;
      continue;
    }
    if (se3_batch_add(&s->bb, g.n_nodes, g.node_feat, g.n_edges, g.src, g.dst, g.edge_feat, g.rel_pos))
      ret = stage_fail_at(ctx, NULL, "out of memory scoring");
    graph_free(&g);
    ids[k++] = id;
    if (ret == STAGE_OK && k == s->batch) {
      ret = flush(ctx, s, ins, ids, k, chunk);
      *n_ok += k;
      k = 0;
    }
  }
  if (ret == STAGE_OK) {
    ret = flush(ctx, s, ins, ids, k, chunk);
    *n_ok += k;
  }
  se3_batch_clear(&s->bb);
  free(ids);
  sqlite3_finalize(sel);
  sqlite3_finalize(ins);
  return ret;
}

static void score_end(struct stage_ctx *ctx) {
  struct sstage *s = ctx->state;
  if (!s) return;
  free(s->params);
  if (s->have_model) se3_model_free(&s->model);
  stage_ids_free(&s->plan);
  sqlite3_free(s->select);
  nn_arena_free(&s->ws);
  se3_batch_buf_free(&s->bb);
  free(s);
  ctx->state = NULL;
}

const struct stage stage_score = {
    .name = "score",
    .tables = "scores",
    .uses_sets = 0,
    .after = "train",
    .begin = score_begin,
    .run_chunk = score_chunk,
    .finalize = NULL,
    .end = score_end,
};
