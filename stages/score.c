/* score.c — trained models over a molecule set: `graphs` of the set in,
 * `scores` out (one row per molecule).
 *
 * A molecule of several conformers (stages.ingest.conformers; its graphs
 * row a set, common/confset.h) is predicted on each, its conformers taking
 * a batch's places one each as molecules do, and its score aggregated over
 * them (write_score: stages.score.aggregate) with their spread in
 * scores.conformer_sd; one conformer gives the bits it gave before.
 *
 * The models are this workflow's `train` result (every `models` row: one, or
 * an ensemble's members, in member order) or, with stages.score.checkpoint,
 * a model from anywhere: one checkpoint file, or a folder holding an
 * ensemble's members (a workdir or its models/ folder: model_card_members).
 * Each checkpoint carries what scoring needs: the architecture, task, target,
 * standardisation and atomref references (its card, the featurisation, is
 * checked when the workflow is loaded, not here). A molecule's score is the
 * members' mean prediction in the target's units (classification:
 * probability) and std their sample standard deviation (NULL for one model),
 * the same bits whichever way the members were found. Every row carries
 * model_hash: the content hash of the members' checkpoint files, folded in
 * member order, so equal hashes mean the same model; scores.model is "train/0"
 * or "train" for this workflow's model, else the model path as the workflow
 * writes it (relative to its folder). Plan: the set's molecule ids with a
 * graph, ascending, in chunks of run.chunk_size within one input file; a
 * chunk's predictions and its ledger row commit together, so a killed run
 * resumes at the chunk in flight and gives the same scores (the forward
 * pass gives the same bits on any number of threads). Keyed (struct
 * stage's keyed; not under merge: hits): a score records the hash of the
 * molecule of its graph (scores.mol_hash) beside the model's, and a rerun
 * scores again, whole, only the chunks holding a molecule without a score
 * of this model from its present graph: a new file's, a changed record's.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chem/graph.h"
#include "chem/mol.h"
#include "models/checkpoint.h"
#include "models/model.h"
#include "models/model_file.h"
#include "modelcard.h"
#include "rank_select.h"
#include "score_sql.h"
#include "set_profile.h"
#include "stage.h"

#define ATOMREF_MAX SE3_ATOMREF_MAX

struct member {
  int classify;
  char target[256];
  double mean, std;
  int nz;
  int64_t zs[ATOMREF_MAX];
  double ref[ATOMREF_MAX];
  struct se3_net *net;
  const struct se3_model *model; /* the net's */
  struct set_profile prof;       /* its training set's, from its card */
};

struct sstage {
  const char *set;
  int batch, classify, n_members, atomref;
  char model_id[PATH_MAX], target[256];
  char model_hash[17]; /* 16 hex digits: the members' checkpoint bytes */
  struct member *mem;
  char *select;
  const struct nn_backend *be;
  struct graph_settings gs; /* to rebuild graphs not stored */
  struct se3_batch_buf bb;
  double *pred;    /* batch x n_members */
  double *base[2]; /* batch x n_members: atomref sums, of the batch being gathered and of the one under way */
  int64_t *ids[2]; /* batch: the molecules of each (an entry a conformer) */
  int *conf[2];    /* batch: which conformer of its molecule each entry is, */
  int *nconf[2];   /* and of how many */
  real *out;       /* batch: one member's predictions */
  char *warn;      /* how the set differs from the training set's profile (score_profile); NULL: not compared */
  int warn_put;    /* meta 'score_warnings' written by this run */
  int aggregate;   /* stages.score.aggregate: AGG_MEAN, AGG_MAX, AGG_MIN */
  double *acc;     /* MOL_MAX_CONFORMERS x n_members: the predictions of the molecule being finished */
  double *q;       /* n_members: each member's aggregate over a molecule's conformers */
  double *mbase;   /* n_members: a molecule's atomref sums */
};

enum { AGG_MEAN = 0, AGG_MAX, AGG_MIN };

/* One member from checkpoint `path`, read and checked as untrusted input
 * (models/model_file.h: its shapes those the scorer feeds, node_in the
 * featurisation's, every value finite); `arch` (the models row's, or NULL)
 * is used when the checkpoint predates the "arch" record. */
static int load_member(struct stage_ctx *ctx, const struct sstage *s, struct member *m, const char *path,
                       const char *arch, uint64_t *hash) {
  struct se3_model_file mf;
  struct se3_model_expect ex = {.node_in = graph_node_width(&s->gs.go),
                                .edge_in = graph_edge_width(&s->gs.go),
                                .outputs = 1,
                                .arch = arch,
                                .need_stats = 1};
  if (se3_model_file_read(path, &ex, 1, &mf, hash, &ctx->err)) return STAGE_ERROR;
  snprintf(m->target, sizeof m->target, "%s", mf.target);
  m->classify = mf.classify;
  m->mean = mf.mean;
  m->std = mf.std;
  m->nz = mf.n_atomref;
  memcpy(m->zs, mf.atomref_z, sizeof m->zs);
  memcpy(m->ref, mf.atomref, sizeof m->ref);
  set_profile_parse(mf.card, mf.card_len, &m->prof);
  if (!(m->net = se3_net_create(s->be, &mf.cfg, 0, &ctx->err))) {
    se3_model_file_free(&mf);
    se3_error_at(&ctx->err, path, 0, 0);
    return STAGE_ERROR;
  }
  se3_net_inference_only(m->net); /* no gradient, no moments */
  m->model = se3_net_model(m->net);
  int bad = se3_net_n_params(m->net) != mf.n_params;
  if (!bad) se3_net_set(m->net, SE3_NET_PARAMS, mf.params);
  se3_model_file_free(&mf);
  if (bad) return stage_fail_at(ctx, NULL, "%s: its parameters do not fit its model configuration", path);
  return STAGE_OK;
}

/* path (absolute, normalised) relative to the folder base (absolute), as a
 * workflow in base names it: "../a/work" for a sibling folder's, so that
 * scores.model is the same on every machine where the two lie the same way.
 * The path itself when the two share no folder below the root. */
static void path_from(const char *base, const char *path, char *out, size_t n) {
  size_t common = 0; /* the length of the folders both start with */
  for (size_t i = 0;; i++) {
    int ends_b = base[i] == '/' || !base[i], ends_p = path[i] == '/' || !path[i];
    if (ends_b && ends_p && i > 0) common = i;
    if (!base[i] || !path[i] || base[i] != path[i]) break;
  }
  if (base[0] != '/' || path[0] != '/' || common == 0) {
    snprintf(out, n, "%s", path);
    return;
  }
  size_t at = 0;
  out[0] = 0;
  /* one ".." for each of base's folders below the common ones */
  for (const char *b = base + common; *b; b++)
    if (*b == '/' && b[1] && b[1] != '/') at += (size_t)snprintf(out + at, at < n ? n - at : 0, "../");
  const char *rest = path[common] == '/' ? path + common + 1 : path + common;
  if (at >= n) at = n - 1;
  snprintf(out + at, n - at, "%s", *rest ? rest : at ? "" : ".");
  if (at && !*rest) out[at - 1] = 0; /* "../.." rather than "../../" */
}

/* The members of the configured model path (a checkpoint file, or an
 * ensemble's folder), each loaded as the ensemble's member k. */
static int load_path(struct stage_ctx *ctx, struct sstage *s, const char *ck, uint64_t *h) {
  char **files = NULL;
  int n = 0;
  if (model_card_members(ck, &files, &n, &ctx->err))
    return stage_error_at(ctx, cfg_get(ctx->cfg, "checkpoint"), "stages.score.checkpoint");
  int ret = STAGE_OK;
  if (!(s->mem = calloc((size_t)n, sizeof *s->mem))) ret = stage_fail_at(ctx, NULL, "out of memory");
  for (int k = 0; k < n && ret == STAGE_OK; k++) {
    s->n_members = k + 1; /* score_end frees the nets loaded */
    if (load_member(ctx, s, &s->mem[k], files[k], NULL, h)) /* name the key that pointed there */
      ret = stage_error_at(ctx, cfg_get(ctx->cfg, "checkpoint"), "stages.score.checkpoint");
  }
  model_card_members_free(files, n);
  if (ret != STAGE_OK) return ret;
  path_from(ctx->workflow_dir, ck, s->model_id, sizeof s->model_id);
  ctx->inputs_hash = *h; /* a different model (or a retrained one) redoes the scores */
  return STAGE_OK;
}

/* The models rows (every member), or the configured model path. */
static int load_models(struct stage_ctx *ctx, struct sstage *s) {
  const char *ck = cfg_str_opt(ctx->cfg, "checkpoint");
  uint64_t h = SE3_HASH_INIT; /* the members' checkpoint bytes, folded in member order */
  if (ck) {
    if (load_path(ctx, s, ck, &h)) return STAGE_ERROR;
  } else {
    /* member order: train/2 before train/10, as a folder's members are read */
    char *sql = sqlite3_mprintf("SELECT id, checkpoint, arch, mean, std, task, target FROM \"%w\".models "
                                "ORDER BY length(id), id",
                                ctx->src);
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(ctx->db, sql, -1, &st, NULL);
    sqlite3_free(sql);
    if (rc != SQLITE_OK) return stage_sql_fail(ctx, "reading the models");
    int cap = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
      if (s->n_members == cap) {
        cap = cap ? 2 * cap : 4;
        struct member *grown = realloc(s->mem, (size_t)cap * sizeof *grown);
        if (!grown) {
          sqlite3_finalize(st);
          return stage_fail_at(ctx, NULL, "out of memory");
        }
        s->mem = grown;
      }
      struct member *m = &s->mem[s->n_members++];
      memset(m, 0, sizeof *m);
      if (s->n_members == 1) snprintf(s->model_id, sizeof s->model_id, "%s", sqlite3_column_text(st, 0));
      char path[PATH_MAX + 256];
      snprintf(path, sizeof path, "%s/%s", ctx->workdir, sqlite3_column_text(st, 1));
      int bad = load_member(ctx, s, m, path, (const char *)sqlite3_column_text(st, 2), &h);
      if (!bad) { /* checkpoints written before they carried these: the row's */
        m->mean = sqlite3_column_double(st, 3);
        m->std = sqlite3_column_double(st, 4);
        m->classify = !strcmp((const char *)sqlite3_column_text(st, 5), "classification");
        snprintf(m->target, sizeof m->target, "%s", sqlite3_column_text(st, 6));
      }
      if (bad) {
        sqlite3_finalize(st);
        return STAGE_ERROR;
      }
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) return stage_sql_fail(ctx, "reading the models");
    if (s->n_members == 0) return stage_fail_at(ctx, NULL, "no trained model: run the train stage first");
    if (s->n_members > 1) snprintf(s->model_id, sizeof s->model_id, "train");
  }
  snprintf(s->model_hash, sizeof s->model_hash, "%016llx", (unsigned long long)h);
  s->classify = s->mem[0].classify;
  snprintf(s->target, sizeof s->target, "%s", s->mem[0].target);
  for (int i = 0; i < s->n_members; i++) {
    const struct member *m = &s->mem[i];
    if (m->classify != s->classify || strcmp(m->target, s->target) ||
        m->model->cfg.node_in != s->mem[0].model->cfg.node_in)
      return stage_fail_at(ctx, NULL, "the ensemble's models disagree on the target, task or node features");
    if (m->nz) s->atomref = 1;
    if (i > 0) se3_net_share_workspace(m->net, s->mem[0].net); /* members run one after another */
  }
  return STAGE_OK;
}

static int score_keyed(const struct cfg_node *root);

/* The set's charge states and 3D shapes against the training set's (the
 * model's card; set_profile.h): each clear difference a warning in the
 * log, and in meta 'score_warnings' when the chunks run (score_warnings),
 * so that such a library is reported, never scored silently. */
static int score_profile(struct stage_ctx *ctx, struct sstage *s) {
  const struct set_profile *train = &s->mem[0].prof;
  struct set_profile lib;
  if (!train->has) {
    ctx->report->log(ctx, "note: the model's card has no profile of its training set (trained before "
                          "2026-11-27): set '%s''s charge states and 3D shapes are not compared with it",
                     s->set);
    s->warn = calloc(1, 1); /* (an earlier model's warnings go) */
    return s->warn ? STAGE_OK : stage_fail_at(ctx, NULL, "out of memory");
  }
  if (set_profile_of(ctx->db, ctx->src, s->set, &lib, &ctx->err)) return STAGE_ERROR;
  if (!(s->warn = malloc(4096))) return stage_fail_at(ctx, NULL, "out of memory");
  set_profile_compare(train, &lib, s->warn, 4096);
  for (const char *l = s->warn; *l;) {
    const char *nl = strchr(l, '\n');
    int n = nl ? (int)(nl - l) : (int)strlen(l);
    ctx->report->log(ctx, "warning: set '%s': %.*s", s->set, n, l);
    l += n + (nl != NULL);
  }
  return STAGE_OK;
}

/* meta 'score_warnings': score_profile's warnings (deleted when there are
 * none), in the transaction of the first chunk this run scores. */
static int score_warnings(struct stage_ctx *ctx, struct sstage *s) {
  if (!s->warn || s->warn_put) return STAGE_OK;
  s->warn_put = 1;
  char *sql = s->warn[0] ? sqlite3_mprintf("INSERT OR REPLACE INTO meta(key, value) VALUES('score_warnings', %Q)",
                                           s->warn)
                         : sqlite3_mprintf("DELETE FROM meta WHERE key = 'score_warnings'");
  int rc = sql ? sqlite3_exec(ctx->db, sql, NULL, NULL, NULL) : SQLITE_NOMEM;
  sqlite3_free(sql);
  return rc == SQLITE_OK ? STAGE_OK : stage_sql_fail(ctx, "writing meta 'score_warnings'");
}

static int score_begin(struct stage_ctx *ctx, int64_t *n_chunks, int64_t *n_items) {
  struct sstage *s = calloc(1, sizeof *s);
  if (!s) return stage_fail_at(ctx, NULL, "out of memory");
  ctx->state = s;
  s->set = cfg_str(ctx->cfg, "set");
  s->batch = (int)cfg_int(ctx->cfg, "batch_size");
  const char *key = "device";
  if (!(s->be = stage_backend(ctx->root, 0, &key, &ctx->err)))
    return stage_error_at(ctx, cfg_get(ctx->root, key), NULL);
  ctx->report->log(ctx, "the model runs on %s (%s) in %s%s", s->be->name, s->be->device, stage_precision_name(s->be),
                   stage_conv_note(ctx->root, s->be));
  if (stage_graph_settings(ctx, &s->gs)) return STAGE_ERROR; /* (the models are checked against it) */
  if (load_models(ctx, s) || score_profile(ctx, s)) return STAGE_ERROR;
  const struct se3_config *mc = &s->mem[0].model->cfg;
  double cutoff = s->gs.go.cutoff;
  if (mc->envelope != SE3_ENVELOPE_NONE && s->gs.go.edges != GRAPH_EDGES_BONDS &&
      fabs(cutoff - mc->cutoff) > 1e-6 * cutoff)
    ctx->report->log(ctx,
                     "note: the model fades edges out at %g Å, its training cutoff; these graphs were built with "
                     "stages.graph.cutoff %g Å",
                     (double)mc->cutoff, cutoff);
  se3_batch_buf_init(&s->bb, s->mem[0].model->cfg.node_in, s->mem[0].model->cfg.edge_in);
  s->pred = malloc((size_t)s->batch * (size_t)s->n_members * sizeof *s->pred);
  s->out = malloc((size_t)s->batch * sizeof *s->out);
  int bad = 0;
  for (int i = 0; i < 2; i++) {
    s->base[i] = calloc((size_t)s->batch * (size_t)s->n_members, sizeof *s->base[i]);
    s->ids[i] = malloc((size_t)s->batch * sizeof *s->ids[i]);
    s->conf[i] = malloc((size_t)s->batch * sizeof *s->conf[i]);
    s->nconf[i] = malloc((size_t)s->batch * sizeof *s->nconf[i]);
    bad |= !s->base[i] || !s->ids[i] || !s->conf[i] || !s->nconf[i];
  }
  s->acc = malloc((size_t)MOL_MAX_CONFORMERS * (size_t)s->n_members * sizeof *s->acc);
  s->q = malloc((size_t)s->n_members * sizeof *s->q);
  s->mbase = calloc((size_t)s->n_members, sizeof *s->mbase);
  if (!s->pred || !s->out || !s->acc || !s->q || !s->mbase || bad) return stage_fail_at(ctx, NULL, "out of memory");
  const char *agg = cfg_str(ctx->cfg, "aggregate");
  s->aggregate = !strcmp(agg, "max") ? AGG_MAX : !strcmp(agg, "min") ? AGG_MIN : AGG_MEAN;
  /* the set's molecules with a graph, in chunks within one input file,
   * are the runner's to plan (struct stage_rows; then score_planned); a
   * score's key is the model it was made with */
  ctx->key[0] = s->model_id;
  ctx->key[1] = s->model_hash;
  (void)n_chunks;
  (void)n_items;
  s->select = score_chunk_sql(ctx->src);
  return s->select ? STAGE_OK : stage_fail_at(ctx, NULL, "out of memory");
}

/* After the runner's plan: a set without molecules is refused. Keyed: the
 * chunks with a molecule not scored by this model from its present graph
 * (nor rejected from it) are each scored again whole, in the batches a
 * fresh run makes (a score's last bits depend on them), and so are those
 * after a score of this model whose molecule left the set's plan (its
 * file's record gone, its graph gone: a duplicate now; not one changed,
 * which stays in its chunk): the chunks of its file from there on are cut
 * otherwise now. Whole (stages.score.merge: hits): the scores are redone
 * when the set's molecules (ids and hashes) change. */
static int score_planned(struct stage_ctx *ctx) {
  struct sstage *s = ctx->state;
  if (ctx->plan.n == 0)
    return stage_fail_at(ctx, cfg_get(ctx->cfg, "set"), "stages.score.set: set '%s' has no molecules with a graph",
                         s->set);
  const char *params[3] = {s->set, s->model_id, s->model_hash};
  char *sql = NULL;
  int bad;
  if (score_keyed(ctx->root)) {
    sql = sqlite3_mprintf("SELECT s.mol_id FROM \"%w\".scores s WHERE s.model = ?2 AND s.model_hash = ?3 AND NOT "
                          "EXISTS "
                          "(SELECT 1 FROM \"%w\".graphs g INDEXED BY graphs_hash JOIN \"%w\".molecules m ON m.id = "
                          "g.mol_id WHERE g.mol_id = s.mol_id AND m.set_name = ?1) "
                          "ORDER BY 1",
                          ctx->src, ctx->src, ctx->src);
    bad = stage_ids_moved(ctx, sql, params, 3, &ctx->plan);
  } else {
    sql = sqlite3_mprintf("SELECT g.mol_hash FROM \"%w\".graphs g JOIN \"%w\".molecules m ON m.id = g.mol_id "
                          "WHERE m.set_name = ?1 ORDER BY g.mol_id",
                          ctx->src, ctx->src);
    sqlite3_stmt *st = NULL;
    uint64_t h = ctx->plan.hash;
    int rc = sql ? sqlite3_prepare_v2(ctx->db, sql, -1, &st, NULL) : SQLITE_NOMEM;
    if (rc == SQLITE_OK) sqlite3_bind_text(st, 1, s->set, -1, SQLITE_STATIC);
    while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
      int64_t mh = sqlite3_column_int64(st, 0);
      h = se3_hash_bytes(h, &mh, sizeof mh);
      rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    bad = rc != SQLITE_DONE ? stage_sql_fail(ctx, "fingerprinting the molecules to score") : STAGE_OK;
    ctx->inputs_hash = se3_hash_bytes(ctx->inputs_hash, &h, sizeof h);
  }
  sqlite3_free(sql);
  return bad;
}

/* Scoring is a pipeline of two batches: the molecules gathered in bb are
 * started on every member (batch_start: each member's prediction, its
 * bases included, queued on its backend), and only then are the previous
 * batch's predictions collected and written (batch_finish). On a GPU the
 * host reads the next molecules while the device computes; on the CPU the
 * prediction runs inside batch_start. */
static int batch_start(struct stage_ctx *ctx, struct sstage *s) {
  se3_batch_geometry(&s->bb); /* the bases: computed where the model runs */
  for (int j = 0; j < s->n_members; j++) {
    if (se3_net_predict_start(s->mem[j].net, &s->bb.b, &ctx->err)) {
      se3_error_context(&ctx->err, "scoring");
      return STAGE_ERROR;
    }
  }
  se3_batch_clear(&s->bb);
  return STAGE_OK;
}

/* A molecule's score from its nc conformers' predictions (s->acc: conformer
 * by conformer, member by member), written. Each member's prediction is its
 * aggregate over the conformers (stages.score.aggregate); the score is the
 * members' mean, std their sample standard deviation (NULL for one model),
 * members their own; conformer_sd the sample standard deviation over the
 * conformers of the members' mean (NULL for one conformer). One conformer
 * gives the bits it gave before conformers existed. */
static int write_score(struct stage_ctx *ctx, struct sstage *s, sqlite3_stmt *ins, int64_t id, int nc, int64_t chunk) {
  int nm = s->n_members;
  double *q = s->q, mean = 0, ss = 0, cmean = 0, css = 0, cm[MOL_MAX_CONFORMERS];
  for (int j = 0; j < nm; j++) {
    double v = s->acc[j];
    for (int c = 1; c < nc; c++) {
      double x = s->acc[(size_t)c * nm + j];
      v = s->aggregate == AGG_MAX ? (x > v ? x : v) : s->aggregate == AGG_MIN ? (x < v ? x : v) : v + x;
    }
    if (s->aggregate == AGG_MEAN && nc > 1) v /= nc;
    q[j] = v;
    mean += v;
  }
  mean /= nm;
  for (int j = 0; j < nm; j++)
    ss += (q[j] - mean) * (q[j] - mean);
  for (int c = 0; c < nc && nc > 1; c++) {
    cm[c] = 0;
    for (int j = 0; j < nm; j++)
      cm[c] += s->acc[(size_t)c * nm + j];
    cm[c] /= nm;
    cmean += cm[c];
  }
  if (nc > 1) {
    cmean /= nc;
    for (int c = 0; c < nc; c++)
      css += (cm[c] - cmean) * (cm[c] - cmean);
  }
  sqlite3_reset(ins);
  sqlite3_bind_int64(ins, 1, id);
  sqlite3_bind_text(ins, 2, s->model_id, -1, SQLITE_STATIC);
  sqlite3_bind_text(ins, 3, s->target, -1, SQLITE_STATIC);
  sqlite3_bind_double(ins, 4, mean);
  if (nm > 1)
    sqlite3_bind_double(ins, 5, sqrt(ss / (nm - 1)));
  else
    sqlite3_bind_null(ins, 5);
  sqlite3_bind_int64(ins, 6, chunk);
  sqlite3_bind_text(ins, 7, s->model_hash, -1, SQLITE_STATIC);
  /* an ensemble's members' own predictions (float64, little-endian, in member order) */
  if (nm > 1) {
    uint8_t le[8 * 64];
    int n = nm < 64 ? nm : 64;
    for (int j = 0; j < n; j++) {
      uint64_t u;
      memcpy(&u, &q[j], 8);
      for (int b = 0; b < 8; b++)
        le[8 * j + b] = (uint8_t)(u >> (8 * b));
    }
    sqlite3_bind_blob(ins, 8, le, 8 * n, SQLITE_TRANSIENT);
  } else {
    sqlite3_bind_null(ins, 8);
  }
  if (nc > 1)
    sqlite3_bind_double(ins, 9, sqrt(css / (nc - 1)));
  else
    sqlite3_bind_null(ins, 9);
  return sqlite3_step(ins) == SQLITE_DONE ? STAGE_OK : stage_sql_fail(ctx, "writing scores");
}

/* The predictions of the batch under way (k entries, a conformer each: ids,
 * conformers, atomref sums base) from every member, and the scores of the
 * molecules whose last conformer it holds written (*done of them): a
 * molecule's conformers may span batches, whose predictions gather in
 * s->acc, batch after batch in order. */
static int batch_finish(struct stage_ctx *ctx, struct sstage *s, sqlite3_stmt *ins, int slot, const double *base,
                        int k, int64_t chunk, int64_t *done) {
  int ret = STAGE_OK, nm = s->n_members;
  const int64_t *ids = s->ids[slot];
  *done = 0;
  for (int j = 0; j < nm; j++) {
    struct member *m = &s->mem[j];
    if (se3_net_predict_finish(m->net, s->out, &ctx->err)) {
      se3_error_context(&ctx->err, "scoring");
      return STAGE_ERROR;
    }
    for (int i = 0; i < k; i++)
      s->pred[(size_t)i * nm + j] = m->classify ? 1 / (1 + exp(-(double)s->out[i]))
                                                : (double)s->out[i] * m->std + m->mean + base[(size_t)i * nm + j];
  }
  for (int i = 0; i < k && ret == STAGE_OK; i++) {
    int c = s->conf[slot][i], nc = s->nconf[slot][i];
    memcpy(s->acc + (size_t)c * nm, s->pred + (size_t)i * nm, (size_t)nm * sizeof *s->acc);
    if (c + 1 < nc) continue;
    ret = write_score(ctx, s, ins, ids[i], nc, chunk);
    ++*done;
  }
  if (ret == STAGE_OK) ctx->report->advance(ctx, *done);
  return ret;
}

/* Every member's predictions under way, waited for and dropped (the
 * chunk failed or was stopped: its transaction is rolled back). */
static void drop_started(struct sstage *s) {
  for (int j = 0; j < s->n_members; j++)
    se3_net_predict_drop(s->mem[j].net);
}

/* Starts the k molecules gathered (slot *cur: their ids and atomref sums),
 * then finishes the batch under way, if any (*pending molecules, the other
 * slot); the gathered batch is then the one under way. k 0: only finishes.
 * On a failure nothing is left under way. */
static int batch_turn(struct stage_ctx *ctx, struct sstage *s, sqlite3_stmt *ins, int k, int *cur, int *pending,
                      int64_t chunk, int64_t *n_ok) {
  int ret = k ? batch_start(ctx, s) : STAGE_OK;
  if (ret == STAGE_OK && *pending) {
    int64_t done = 0;
    ret = batch_finish(ctx, s, ins, !*cur, s->base[!*cur], *pending, chunk, &done);
    if (ret == STAGE_OK) *n_ok += done;
  }
  if (ret != STAGE_OK) {
    drop_started(s);
    *pending = 0;
    return ret;
  }
  *pending = k;
  if (k) *cur = !*cur;
  return STAGE_OK;
}

/* Member j's atomref sum for a molecule, from its stored atoms. */
static double atomref_sum(const struct member *m, const struct mol *mol) {
  double s = 0;
  for (int a = 0; a < mol->n_atoms; a++)
    for (int p = 0; p < m->nz; p++) {
      if (m->zs[p] == mol->atoms[a].z) s += m->ref[p];
      if (m->zs[p] == 1) s += mol->atoms[a].implicit_h * m->ref[p];
    }
  return s;
}

static int score_chunk(struct stage_ctx *ctx, int64_t chunk, int64_t *n_ok, int64_t *n_rej) {
  struct sstage *s = ctx->state;
  *n_ok = *n_rej = 0;
  if (chunk < 0 || chunk >= ctx->plan.n_chunks) return STAGE_OK;
  if (score_warnings(ctx, s)) return STAGE_ERROR;
  int64_t lo = ctx->plan.start[chunk], hi = ctx->plan.start[chunk + 1];
  sqlite3_stmt *sel = NULL, *ins = NULL;
  /* each score beside the hash of the molecule its graph was built from
   * (graphs.mol_hash): a rerun scores again only what changed */
  char *ins_sql = sqlite3_mprintf("INSERT OR REPLACE INTO scores(mol_id, model, target, score, std, chunk, model_hash, "
                                  "mol_hash, members, conformer_sd) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, (SELECT mol_hash "
                                  "FROM \"%w\".graphs WHERE mol_id = ?1), ?8, ?9)",
                                  ctx->src);
  int prep = ins_sql ? sqlite3_prepare_v2(ctx->db, ins_sql, -1, &ins, NULL) : SQLITE_NOMEM;
  sqlite3_free(ins_sql);
  if (sqlite3_prepare_v2(ctx->db, s->select, -1, &sel, NULL) != SQLITE_OK || prep != SQLITE_OK) {
    sqlite3_finalize(sel);
    sqlite3_finalize(ins);
    return stage_sql_fail(ctx, "scoring");
  }
  sqlite3_bind_text(sel, 1, s->set, -1, SQLITE_STATIC);
  sqlite3_bind_int64(sel, 2, ctx->plan.ids[lo]);
  sqlite3_bind_int64(sel, 3, ctx->plan.ids[hi - 1]);
  /* molecules gathered into slot cur (k of them), while the batch of the
   * other slot (pending molecules) is under way */
  int k = 0, cur = 0, pending = 0, ret = STAGE_OK;
  int rc = SQLITE_DONE;
  while (ret == STAGE_OK && (rc = sqlite3_step(sel)) == SQLITE_ROW) {
    if (*ctx->stop) {
      ret = STAGE_STOPPED;
      break;
    }
    int64_t id = sqlite3_column_int64(sel, 0);
    /* every conformer's graph first: a molecule is scored whole or rejected */
    const void *gb = sqlite3_column_blob(sel, 1);
    size_t gl = (size_t)sqlite3_column_bytes(sel, 1);
    int nc = graph_row_conformers(gb, gl), ok = 0;
    struct graph g[MOL_MAX_CONFORMERS];
    char why[400];
    why[0] = 0;
    for (; ok < nc && !why[0]; ok++) {
      char err[256];
      struct se3_error e;
      graph_init(&g[ok]);
      if (graph_load_conf(&s->gs, gb, gl, ok, &g[ok], &e))
        snprintf(why, sizeof why, "graphs row mol_id=%lld: %s", (long long)id, se3_error_format(&e, err, sizeof err));
      else if (g[ok].node_width != s->mem[0].model->cfg.node_in || g[ok].edge_width != s->mem[0].model->cfg.edge_in)
        snprintf(why, sizeof why,
                 "its graph has %d node and %d edge features, the model %d and %d (graph settings changed after "
                 "training?)",
                 g[ok].node_width, g[ok].edge_width, s->mem[0].model->cfg.node_in, s->mem[0].model->cfg.edge_in);
    }
    if (!why[0] && s->atomref) {
      struct mol m;
      char err[256];
      struct se3_error e;
      mol_init(&m);
      if (mol_from_blob(sqlite3_column_blob(sel, 2), (size_t)sqlite3_column_bytes(sel, 2), &m, &e))
        snprintf(why, sizeof why, "molecules row id=%lld: %s", (long long)id, se3_error_format(&e, err, sizeof err));
      for (int j = 0; !why[0] && j < s->n_members; j++)
        s->mbase[j] = atomref_sum(&s->mem[j], &m);
      mol_free(&m);
    }
    if (why[0]) {
      for (int c = 0; c < ok; c++)
        graph_free(&g[c]);
      ret = stage_reject_mol(ctx, "score", id, chunk, why);
      ++*n_rej;
      continue;
    }
    for (int c = 0; c < nc; c++) {
      if (ret == STAGE_OK && se3_batch_add(&s->bb, g[c].n_nodes, g[c].node_feat, g[c].n_edges, g[c].src, g[c].dst,
                                           g[c].edge_feat, g[c].rel_pos))
        ret = stage_fail_at(ctx, NULL, "out of memory scoring");
      graph_free(&g[c]);
      if (ret != STAGE_OK) continue;
      for (int j = 0; s->atomref && j < s->n_members; j++)
        s->base[cur][(size_t)k * s->n_members + j] = s->mbase[j];
      s->ids[cur][k] = id;
      s->conf[cur][k] = c;
      s->nconf[cur][k++] = nc;
      if (k == s->batch) {
        ret = batch_turn(ctx, s, ins, k, &cur, &pending, chunk, n_ok);
        k = 0;
      }
    }
  }
  if (ret == STAGE_OK && rc != SQLITE_DONE) ret = stage_sql_fail(ctx, "reading the graphs to score");
  if (ret == STAGE_OK && k) ret = batch_turn(ctx, s, ins, k, &cur, &pending, chunk, n_ok); /* the last, started */
  if (ret == STAGE_OK) {
    ret = batch_turn(ctx, s, ins, 0, &cur, &pending, chunk, n_ok); /* the batch under way, finished */
  } else { /* a failure, a signal: what is under way is dropped, as the chunk's transaction is */
    drop_started(s);
  }
  se3_batch_clear(&s->bb);
  sqlite3_finalize(sel);
  sqlite3_finalize(ins);
  return ret;
}

static void score_end(struct stage_ctx *ctx) {
  struct sstage *s = ctx->state;
  if (!s) return;
  for (int j = 0; s->mem && j < s->n_members; j++)
    se3_net_free(s->mem[j].net);
  free(s->mem);
  free(s->pred);
  free(s->out);
  for (int i = 0; i < 2; i++) {
    free(s->base[i]);
    free(s->ids[i]);
    free(s->conf[i]);
    free(s->nconf[i]);
  }
  free(s->acc);
  free(s->q);
  free(s->mbase);
  sqlite3_free(s->select);
  free(s->warn);
  se3_batch_buf_free(&s->bb);
  free(s);
  ctx->state = NULL;
}

/* ---- what the runner asks of the score stage ------------------------------ */

/* Keyed (struct stage's keyed) unless stages.score.merge: hits keeps only
 * the hits' scores in screen.db: the others' would look missing. */
static int score_keyed(const struct cfg_node *root) {
  /* (no workflow: a merge without one, which folds shards whole) */
  return !root || strcmp(cfg_str(root, "stages.score.merge"), "hits") != 0;
}

/* In a score-only workflow score reads what train would have read: the
 * graphs (train's `after`). */
static const char *score_reads(const struct cfg_node *root) { return stage_score_only(root) ? "graph" : NULL; }

/* merge: the hash is the settings', the upstream stage's and the set's
 * molecules' (begin plans them; a keyed score's shard is held to its
 * settings chain), except with stages.score.checkpoint,
 * whose model's fingerprint needs its device to read (not known to
 * merge). */
static int score_merge_hash(const struct cfg_node *root) {
  return cfg_str_opt(cfg_get(cfg_get(root, "stages"), "score"), "checkpoint") ? STAGE_HASH_UNKNOWN : STAGE_HASH_PLANNED;
}

static int fold_exec(struct stage_fold *f, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *sql = sqlite3_vmprintf(fmt, ap);
  va_end(ap);
  char *msg = NULL;
  int rc = sql ? sqlite3_exec(f->db, sql, NULL, NULL, &msg) : SQLITE_NOMEM;
  if (rc != SQLITE_OK) se3_error_set(&f->err, SE3_ERR_DB, "%s", msg ? msg : sqlite3_errstr(rc));
  sqlite3_free(msg);
  sqlite3_free(sql);
  return rc == SQLITE_OK ? 0 : -1;
}

/* The fold of a score shard: its meta 'score_warnings' carried into main;
 * under stages.score.merge: hits, while shard.scores is attached in the fold's
 * transaction: copies into main.scores only the shard's own hits under
 * rank's settings (rank_select: one pass, memory bounded by rank's `top`),
 * which hold every hit of the whole library (a molecule among the best
 * `top` of all is among the best `top` of its shard), and records those
 * settings in meta 'scores_kept' for rank to check. Under merge: all (or
 * rank's top: 0) the shard is folded whole. */
static int score_fold(struct stage_fold *f) {
  const struct cfg_node *root = f->root;
  /* the shard's word on the set's charge states and shapes (score_profile:
   * each shard compares the whole set, so any shard that scored a chunk
   * says it, and says none by having no key) */
  int scored = f->ledger->has_chunks(f->db, "shard", "score");
  if (scored < 0) {
    se3_error_set(&f->err, SE3_ERR_DB, "%s", sqlite3_errmsg(f->db));
    return -1;
  }
  if (fold_exec(f, "%sINSERT OR REPLACE INTO main.meta SELECT key, value FROM shard.meta WHERE key = 'score_warnings'",
                scored ? "DELETE FROM main.meta WHERE key = 'score_warnings';" : ""))
    return -1;
  int hits = root && !strcmp(cfg_str(root, "stages.score.merge"), "hits");
  const struct cfg_node *rank = root ? cfg_get(cfg_get(root, "stages"), "rank") : NULL;
  if (!hits || cfg_int(rank, "top") <= 0) return fold_exec(f, "DELETE FROM main.meta WHERE key='scores_kept'") ? -1 : 0;
  char target[256];
  /* before the first fold screen.db of a score-only workflow holds neither
   * models nor scores: the shard's scores name the target */
  if (rank_target(f->db, "main", rank, target, sizeof target) &&
      rank_target(f->db, "shard", rank, target, sizeof target)) {
    se3_error_set(&f->err, SE3_ERR_USAGE,
                  "stages.score.merge: hits keeps the scores rank needs, but no trained model in %s names the "
                  "target and the scores hold none or several: set stages.rank.target",
                  f->db_path);
    return -1;
  }
  int64_t *rows = NULL, n = 0;
  if (rank_select(f->db, "\"shard\".scores", "main", rank, target, strcmp(cfg_str(rank, "order"), "ascending") != 0,
                  &rows, &n, &f->err))
    return -1;
  long long n_scores = 0;
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(f->db, "SELECT count(*) FROM shard.scores", -1, &st, NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW)
    n_scores = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  st = NULL;
  int rc = sqlite3_prepare_v2(f->db, "INSERT OR REPLACE INTO main.scores SELECT * FROM shard.scores WHERE rowid = ?1",
                              -1, &st, NULL);
  for (int64_t i = 0; i < n && rc == SQLITE_OK; i++) {
    sqlite3_bind_int64(st, 1, rows[i]);
    rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
    sqlite3_reset(st);
  }
  sqlite3_finalize(st);
  free(rows);
  if (rc != SQLITE_OK) {
    se3_error_set(&f->err, SE3_ERR_DB, "keeping the shard's hits: %s", sqlite3_errmsg(f->db));
    return -1;
  }
  char spec[512];
  rank_spec(rank, target, spec, sizeof spec);
  if (fold_exec(f, "INSERT OR REPLACE INTO main.meta VALUES('scores_kept', %Q)", spec)) return -1;
  snprintf(f->note, sizeof f->note,
           "kept %lld of its %lld scores, the candidates for rank's hits (stages.score.merge: hits)", (long long)n,
           n_scores);
  return 1;
}

/* Whether screen.db's scores were kept as stages.score.merge would keep them
 * now (meta 'scores_kept' names rank's settings under `hits`, and is absent
 * under `all`). */
static int score_folded_as_now(sqlite3 *db, const struct cfg_node *root) {
  char kept[512] = "";
  int has_kept = 0;
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db, "SELECT value FROM main.meta WHERE key='scores_kept'", -1, &st, NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0)) {
    snprintf(kept, sizeof kept, "%s", (const char *)sqlite3_column_text(st, 0));
    has_kept = 1;
  }
  sqlite3_finalize(st);
  const struct cfg_node *rank = root ? cfg_get(cfg_get(root, "stages"), "rank") : NULL;
  int hits = root && !strcmp(cfg_str(root, "stages.score.merge"), "hits") && cfg_int(rank, "top") > 0;
  int same = !hits && !has_kept;
  if (hits && has_kept) {
    char target[256], spec[512];
    same = !rank_target(db, "main", rank, target, sizeof target) &&
           (rank_spec(rank, target, spec, sizeof spec), !strcmp(spec, kept));
  }
  return same;
}

/* One score a molecule of the set with a graph, by this model (model,
 * model_hash); pruned when its graph is gone or changed, its molecule left
 * the set, or another model scores. */
static const struct stage_rows score_rows = {
    .table = "scores",
    .upstream = "graphs",
    .up_index = "graphs_hash",
    .set = "stages.score.set",
    .key = {"model", "model_hash"},
    .planned = score_planned,
};
static const struct stage_keyed score_keyed_decl = {.when = score_keyed, .rows = &score_rows};

const struct stage stage_score = {
    .name = "score",
    .tables = "scores",
    .after = "train",
    .flags = STAGE_USES_MODEL | STAGE_SPREAD | STAGE_ARRAY,
    .begin = score_begin,
    .run_chunk = score_chunk,
    .end = score_end,
    .keyed = &score_keyed_decl,
    .merge = {.hash = score_merge_hash,
              .fold = score_fold,
              .folded_as_now = score_folded_as_now,
              .meta_key = "scores_kept"},
    .reads = {.stage = score_reads, .skipped = stage_dock_only, .set = "stages.score.set"},
};
