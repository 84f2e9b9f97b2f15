/* train.c — `graphs` and `labels` of one set in, trained SE(3)-Transformers
 * out: checkpoints under WORKDIR/models/train-<i>/ (one folder per ensemble
 * member), and the `splits`, `metrics` and `models` tables.
 *
 * The training itself (the epoch loop, evaluation, checkpoints, resume and
 * replay, data parallel) is models/trainer.c's, which knows no database;
 * this file reads the molecules and labels, splits them, fits atomref, serves
 * the trainer its graphs and writes the tables.
 *
 * Plan: one chunk per (member, epoch), member major, so the runner's ledger
 * records finished epochs. An epoch starts from the checkpoint of the epoch
 * before (kept on disk until the next one is committed), or from a mid-epoch
 * checkpoint (checkpoint_every) of the same epoch under the same settings and
 * data, and everything random is derived from the member's seed, the epoch
 * and the step (data order, rotations), so an epoch redone after a kill
 * computes exactly what the lost run computed: a resumed run ends with
 * bit-identical parameters. The chunk writes epoch-<N>.ckpt (and best.ckpt
 * when validation improves) atomically before its transaction commits, and
 * its metrics rows in that transaction. Epochs are counted from 1 wherever
 * they are shown or stored (the log, metrics.epoch, models.best_epoch, the
 * epoch-<N>.ckpt names); inside, e and the checkpoints' step_epoch_best
 * record count from 0, as the ledger's chunks do. finalize evaluates every
 * member's best checkpoint on the test split and writes the `models` rows and
 * each test molecule's prediction (`predictions`, for the report's plots).
 *
 * Regression targets: with atomref, a per-element reference (least squares
 * of the target on the element counts of the training split, with a tiny
 * ridge term) is taken off first; the residual is standardised with the
 * training split's mean and deviation. Metrics and scores add both back.
 * Every checkpoint carries what scoring needs: the architecture, task,
 * target, standardisation, the atomref coefficients and the model's card
 * (stages/modelcard.h: the featurisation it was trained with).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "chem/fingerprint.h"
#include "chem/graph.h"
#include "chem/mol.h"
#include "chem/scaffold.h"
#include "models/metrics.h"
#include "models/split.h"
#include "models/trainer.h"
#include "modelcard.h"
#include "set_profile.h"
#include "stage.h"
#include "train_confs.h"
#include "train_rows.h"
#include "train_set.h"
#include "train_stage.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The trainer's failure in ctx->err: its message, with its kind, at node n's
 * place when it has one. */
static int trainer_fail_at(struct stage_ctx *ctx, const struct cfg_node *n, const struct tstage *t) {
  int rc = stage_fail_at(ctx, n, "%s", t->tr.err);
  if (t->tr.err_kind != SE3_ERR_NONE) ctx->err.kind = t->tr.err_kind;
  return rc;
}

/* The trainer's return as the stage's, its message in ctx->err. */
static int from_trainer(struct stage_ctx *ctx, struct tstage *t, int rc) {
  if (rc == SE3_TRAIN_OK) return STAGE_OK;
  if (rc == SE3_TRAIN_STOPPED) return STAGE_STOPPED;
  return trainer_fail_at(ctx, NULL, t);
}

/* Element counts (hydrogens included, implicit ones too) of one molecule into
 * t->counts row i, adding new elements to t->tr.zs. */
static int count_elements(struct stage_ctx *ctx, struct tstage *t, int i, const struct mol *m) {
  uint16_t *row = t->counts + (size_t)i * SE3_ATOMREF_MAX;
  memset(row, 0, SE3_ATOMREF_MAX * sizeof *row);
  for (int a = 0; a < m->n_atoms; a++) {
    int z[2] = {m->atoms[a].z, 1}, times[2] = {1, m->atoms[a].implicit_h};
    for (int k = 0; k < 2; k++) {
      if (!times[k]) continue;
      int c = 0;
      while (c < t->tr.nz && t->tr.zs[c] != z[k])
        c++;
      if (c == t->tr.nz) {
        if (t->tr.nz == SE3_ATOMREF_MAX)
          return stage_fail_at(ctx, NULL, "stages.train.atomref: more than %d distinct elements", SE3_ATOMREF_MAX);
        t->tr.zs[t->tr.nz++] = z[k];
      }
      row[c] = (uint16_t)(row[c] + times[k]);
    }
  }
  return STAGE_OK;
}

/* need_mol: 0 no molecule, 1 its elements (atomref), 2 and its scaffold, 3
 * and its fingerprint (cluster) */
static int load_data(struct stage_ctx *ctx, struct tstage *t, const char *split_column, int need_mol) {
  /* the target: a label of the inputs, or the docking score (stages.dock.label) */
  const char *dock_label = stage_dock_label(ctx->root);
  int docked = dock_label && !strcmp(dock_label, t->tr.target);
  char *sql =
      sqlite3_mprintf("SELECT g.mol_id, " STAGE_GRAPH_COLUMN ", l.%s, s.value, %s, m.inchikey FROM \"%w\".graphs g "
                      "JOIN \"%w\".molecules m ON m.id = g.mol_id "
                      "JOIN \"%w\".%s l ON l.mol_id = g.mol_id AND %s "
                      "LEFT JOIN \"%w\".labels s ON s.mol_id = g.mol_id AND s.name = ?3 "
                      "WHERE m.set_name = ?2 ORDER BY g.mol_id",
                      docked ? "score" : "value", need_mol ? "m.mol" : "NULL", ctx->src, ctx->src, ctx->src,
                      docked ? "docking" : "labels", docked ? "?1 IS NOT NULL" : "l.name = ?1", ctx->src);
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_prepare_v2(ctx->db, sql, -1, &st, NULL);
  sqlite3_free(sql);
  if (rc != SQLITE_OK) return stage_sql_fail(ctx, "reading the training molecules");
  sqlite3_bind_text(st, 1, t->tr.target, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, t->set, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, split_column ? split_column : "", -1, SQLITE_STATIC);
  int cap = 0;
  uint64_t h = SE3_HASH_INIT;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    long long id = sqlite3_column_int64(st, 0);
    if (t->tr.n == cap) {
      cap = cap ? 2 * cap : 256;
      t->ids = realloc(t->ids, (size_t)cap * sizeof *t->ids);
      if (!t->lazy) t->g = realloc(t->g, (size_t)cap * sizeof *t->g);
      t->tr.y = realloc(t->tr.y, (size_t)cap * sizeof *t->tr.y);
      t->tr.atoms = realloc(t->tr.atoms, (size_t)cap * sizeof *t->tr.atoms);
      t->tr.edges = realloc(t->tr.edges, (size_t)cap * sizeof *t->tr.edges);
      t->split_label = realloc(t->split_label, (size_t)cap * sizeof *t->split_label);
      t->scaffold = realloc(t->scaffold, (size_t)cap * sizeof *t->scaffold);
      t->compound = realloc(t->compound, (size_t)cap * sizeof *t->compound);
      if (need_mol == 3) t->fps = realloc(t->fps, (size_t)cap * sizeof *t->fps);
      t->counts = realloc(t->counts, (size_t)cap * SE3_ATOMREF_MAX * sizeof *t->counts);
      if (!t->ids || (!t->g && !t->lazy) || !t->tr.y || !t->tr.atoms || !t->tr.edges || !t->split_label ||
          !t->scaffold || !t->counts || !t->compound || (need_mol == 3 && !t->fps)) {
        sqlite3_finalize(st);
        return stage_fail_at(ctx, NULL, "out of memory loading the training molecules");
      }
    }
    const void *blob = sqlite3_column_blob(st, 1);
    size_t len = (size_t)sqlite3_column_bytes(st, 1);
    struct graph one, *g = t->lazy ? &one : &t->g[t->tr.n]; /* lazy: only checked here */
    graph_init(g);
    t->scaffold[t->tr.n] = NULL;
    int most = 0; /* the most edges of its other conformers' graphs */
    struct se3_error e;
    int bad = graph_load(&t->gs, blob, len, g, &e) != 0;
    if (!bad && !t->lazy) bad = train_confs_load(&t->confs, t->tr.n, &t->gs, blob, len, &most, &e) != 0;
    if (bad) {
      graph_free(g);
      sqlite3_finalize(st);
      return stage_fail_at(ctx, NULL, "graphs row mol_id=%lld: %s (run `se3screen verify` on the workdir)", id,
                           se3_error_str(&e).s);
    }
    if (t->tr.n == 0) t->node_width = g->node_width;
    if (g->node_width != t->node_width || g->edge_width != graph_edge_width(&t->gs.go)) {
      int nw = g->node_width, ew = g->edge_width;
      graph_free(g);
      sqlite3_finalize(st);
      return stage_fail_at(ctx, NULL,
                           "graphs row mol_id=%lld: %d node and %d edge features, not the %d and %d of the others "
                           "and stages.graph's settings (rerun the graph stage)",
                           id, nw, ew, t->node_width, graph_edge_width(&t->gs.go));
    }
    t->tr.atoms[t->tr.n] = g->n_nodes;
    t->tr.edges[t->tr.n] = g->n_edges > most ? g->n_edges : most;
    if (t->lazy) graph_free(&one);
    h = se3_hash_bytes(h, &id, sizeof id);
    h = se3_hash_bytes(h, blob, len);
    t->ids[t->tr.n] = id;
    t->tr.y[t->tr.n] = sqlite3_column_double(st, 2);
    h = se3_hash_bytes(h, &t->tr.y[t->tr.n], sizeof(double));
    t->split_label[t->tr.n] = sqlite3_column_type(st, 3) == SQLITE_NULL ? NAN : sqlite3_column_double(st, 3);
    if (!(t->compound[t->tr.n] = mol_compound_key(id, (const char *)sqlite3_column_text(st, 5)))) {
      sqlite3_finalize(st);
      return stage_fail_at(ctx, NULL, "out of memory loading the training molecules");
    }
    t->tr.n++;
    if (need_mol) {
      struct mol m;
      mol_init(&m);
      if (mol_from_blob(sqlite3_column_blob(st, 4), (size_t)sqlite3_column_bytes(st, 4), &m, &e)) {
        sqlite3_finalize(st);
        return stage_fail_at(ctx, NULL, "molecules row id=%lld: %s (run `se3screen verify` on the workdir)", id,
                             se3_error_str(&e).s);
      }
      int bad = t->tr.atomref ? count_elements(ctx, t, t->tr.n - 1, &m) : STAGE_OK;
      if (!bad && need_mol == 2) {
        t->scaffold[t->tr.n - 1] = scaffold_key(&m);
        if (!t->scaffold[t->tr.n - 1])
          bad = stage_fail_at(ctx, NULL, "stages.train.split: no scaffold for molecule %lld (Open Babel failed)", id);
      }
      if (!bad && need_mol == 3 && fp_morgan(&m, 2, &t->fps[t->tr.n - 1]))
        bad = stage_fail_at(ctx, NULL, "stages.train.split: no fingerprint for molecule %lld (out of memory)", id);
      mol_free(&m);
      if (bad) {
        sqlite3_finalize(st);
        return STAGE_ERROR;
      }
    }
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return stage_sql_fail(ctx, "reading the training molecules");
  t->tr.fingerprint = h;
  return STAGE_OK;
}

/* se3_trainer_adopt_zero_based's hook: before member k's epoch-<from>.ckpt
 * is renamed `name`, a models row naming it names the new file. */
static int rename_in_models(void *user, int k, int from, const char *name) {
  struct stage_ctx *ctx = user;
  char *sql = sqlite3_mprintf("UPDATE models SET checkpoint = 'models/train-%d/%q' WHERE id = 'train/%d' AND "
                              "checkpoint = 'models/train-%d/epoch-%d.ckpt'",
                              k, name, k, k, from);
  int rc = sql ? sqlite3_exec(ctx->db, sql, NULL, NULL, NULL) : SQLITE_NOMEM;
  sqlite3_free(sql);
  return rc == SQLITE_OK ? 0 : stage_sql_fail(ctx, "renaming a checkpoint in the models table");
}

/* Before any chunk: checkpoints named from 0 by an earlier se3screen are
 * renamed (se3_trainer_adopt_zero_based), and an earlier training's members past this
 * ensemble removed (se3_trainer_drop_stale_members). A finished training's model rows name the
 * checkpoints scoring reads; one damaged since (or deleted) is recomputed
 * here, as the runner does not finalize a finished stage again. Only when the
 * member's last epoch checkpoint is there: a training of other settings is
 * not recomputed, its chunks are redone anyway. */
static int repair_finished(struct stage_ctx *ctx) {
  struct tstage *t = ctx->state;
  if (se3_trainer_drop_stale_members(&t->tr)) return trainer_fail_at(ctx, NULL, t);
  for (int k = 0; k < t->tr.ensemble; k++) {
    int rc = se3_trainer_adopt_zero_based(&t->tr, k, rename_in_models, ctx);
    if (rc) return rc < 0 ? STAGE_ERROR : trainer_fail_at(ctx, NULL, t);
    char id[32], last[PATH_MAX + 64], name[64], *ck = NULL;
    snprintf(id, sizeof id, "train/%d", k);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(ctx->db, "SELECT checkpoint FROM models WHERE id = ?1", -1, &st, NULL) == SQLITE_OK) {
      sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
      if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
        ck = strdup((const char *)sqlite3_column_text(st, 0));
    }
    sqlite3_finalize(st);
    if (!ck) continue;
    char path[2 * PATH_MAX];
    struct se3_error why;
    snprintf(path, sizeof path, "%s/%s", ctx->workdir, ck);
    free(ck);
    se3_trainer_member_dir(&t->tr, k, t->tr.dir, sizeof t->tr.dir);
    se3_trainer_epoch_file(name, sizeof name, t->tr.epochs - 1);
    snprintf(last, sizeof last, "%s/%s", t->tr.dir, name);
    struct se3_ckpt c;
    if (se3_ckpt_load(&c, path, &why) == 0) {
      se3_ckpt_free(&c);
      continue;
    }
    if (access(last, F_OK) != 0) continue;
    ctx->report->log(ctx, "%s (the model of %s)", se3_error_str(&why).s, id);
    int ret = from_trainer(ctx, t, se3_trainer_ensure_final(&t->tr, k));
    if (ret == STAGE_STOPPED) return stage_fail_at(ctx, NULL, "stopped while recomputing %s; run again", path);
    if (ret != STAGE_OK) return ret;
  }
  t->tr.member = -1;
  t->tr.epoch_done = -2;
  return STAGE_OK;
}

/* ---- the trainer's io ------------------------------------------------------------------ */

/* Molecule i's graph: in memory, or (lazy) read into t->one. */
static int io_sample(void *user, int i, struct se3_sample *s, char *why, size_t whylen) {
  struct tstage *t = user;
  const struct graph *g = &t->one;
  if (!t->lazy) {
    g = train_confs_graph(&t->confs, i, t->ids[i], t->tr.conf_draw, &t->g[i]);
  } else {
    char err[256];
    struct se3_error e;
    graph_free(&t->one);
    sqlite3_stmt *q = t->get_graph;
    sqlite3_reset(q);
    sqlite3_bind_int64(q, 1, t->ids[i]);
    int rc = sqlite3_step(q);
    if (rc != SQLITE_ROW)
      snprintf(why, whylen, "reading graphs row mol_id=%lld: %s", (long long)t->ids[i],
               rc == SQLITE_DONE ? "it is gone" : sqlite3_errmsg(sqlite3_db_handle(q)));
    else if (graph_load_conf(&t->gs, sqlite3_column_blob(q, 0), (size_t)sqlite3_column_bytes(q, 0),
                             train_confs_lazy(t->tr.conf_draw, t->ids[i], q), &t->one, &e)) {
      snprintf(why, whylen, "graphs row mol_id=%lld: %s", (long long)t->ids[i], se3_error_format(&e, err, sizeof err));
      graph_free(&t->one);
    } else
      rc = SQLITE_DONE;
    sqlite3_reset(q); /* no read transaction held between steps */
    if (rc != SQLITE_DONE) return -1;
  }
  *s = (struct se3_sample){g->n_nodes, g->n_edges, g->node_feat, g->edge_feat, g->rel_pos, g->src, g->dst, NULL};
  return 0;
}

static void io_release(void *user, struct se3_sample *s) {
  struct tstage *t = user;
  (void)s;
  if (t->lazy) graph_free(&t->one);
}

static void io_log(void *user, const char *line) {
  struct tstage *t = user;
  t->ctx->report->log(t->ctx, "%s", line);
}

static void io_advance(void *user, int64_t n) {
  struct tstage *t = user;
  t->ctx->report->advance(t->ctx, n);
}

static int io_order(void *user, struct se3_train_order *o) {
  struct tstage *t = user;
  struct stage_order so = {o->op, {o->i[0], o->i[1], o->i[2], o->i[3], o->i[4], o->i[5]}, {o->f[0], o->f[1]}};
  return stage_order(t->ctx, &so);
}

static void io_put_card(void *user, struct se3_ckpt_writer *w) {
  struct tstage *t = user;
  model_card_put(w, t->ctx->root, t->profile); /* the featurisation trained with: the model scores the same anywhere */
  train_set_put(w, &t->domain);                /* what a hit is near (rank, wherever the model scores) */
}

/* begin's first step: the settings of stages.train into t (the split's
 * method and column to *method and *column) and the trainer's io hooks. */
static int train_settings(struct stage_ctx *ctx, struct tstage *t, const char **method, const char **column) {
  const struct cfg_node *c = ctx->cfg;
  t->set = cfg_str(c, "set");
  t->tr.target = cfg_str_opt(c, "target");
  if (!t->tr.target)
    return stage_fail_at(ctx, c, "stages.train.target: name the label to learn (an SD tag or CSV column of set '%s')",
                         t->set);
  if (strlen(t->tr.target) > 255) /* (its checkpoint records it; a model's reader takes 255 bytes) */
    return stage_fail_at(ctx, cfg_get(c, "target"), "stages.train.target: a name of %zu bytes: at most 255 are allowed",
                         strlen(t->tr.target));
  t->tr.classify = !strcmp(cfg_str(c, "task"), "classification");
  t->tr.epochs = (int)cfg_int(c, "epochs");
  t->tr.batch = (int)cfg_int(c, "batch_size");
  t->tr.patience = (int)cfg_int(c, "patience");
  t->tr.augment = cfg_bool(c, "augment");
  t->low_memory = cfg_bool(c, "low_memory");
  t->tr.seed = (uint64_t)cfg_int(c, "seed");
  t->tr.ensemble = (int)cfg_int(c, "ensemble");
  t->tr.atomref = cfg_bool(c, "atomref");
  t->tr.ckpt_every = (long)cfg_int(c, "checkpoint_every");
  if (t->tr.atomref && t->tr.classify)
    return stage_fail_at(ctx, cfg_get(c, "atomref"), "stages.train.atomref: only for regression, not classification");
  t->balanced = !strcmp(cfg_str(c, "class_weight"), "balanced");
  if (t->balanced && !t->tr.classify)
    return stage_fail_at(ctx, cfg_get(c, "class_weight"),
                         "stages.train.class_weight: balanced is for classification (task: classification), not "
                         "regression");
  *method = cfg_str(c, "split.method");
  *column = cfg_str_opt(c, "split.column");
  if (!strcmp(*method, "column") && !*column)
    return stage_fail_at(ctx, cfg_get(c, "split.method"),
                         "stages.train.split.column: name the label holding 0 (train), 1 (valid) or 2 (test)");
  const char *loss = cfg_str(c, "loss");
  t->tr.loss = t->tr.classify           ? NN_LOSS_BCE
               : !strcmp(loss, "mse")   ? NN_LOSS_MSE
               : !strcmp(loss, "huber") ? NN_LOSS_HUBER
                                        : NN_LOSS_L1;
  t->tr.adam =
      (struct nn_adam){0.9, 0.999, 1e-8, cfg_float(c, "weight_decay"), strcmp(cfg_str(c, "optimizer"), "adam") != 0};
  t->tr.clip = cfg_float(c, "clip_norm");
  t->tr.zero = cfg_bool(c, "shard_optimizer") && ctx->comm; /* (a job of one too: SE3_COMM=mpi) */
  t->tr.bucket_bytes = (size_t)(cfg_float(c, "bucket_mb") * 1048576.0);
  t->restart_epochs = (int)cfg_int(c, "restart_epochs");
  t->ctx = ctx;
  t->tr.io = (struct se3_trainer_io){.user = t,
                                     .comm = ctx->comm,
                                     .writer = stage_writer(ctx),
                                     .stop = ctx->stop,
                                     .sample = io_sample,
                                     .release = io_release,
                                     .log = io_log,
                                     .advance = io_advance,
                                     .order = io_order,
                                     .put_card = io_put_card};
  snprintf(t->tr.models_dir, sizeof t->tr.models_dir, "%s/models", ctx->workdir);
  return STAGE_OK;
}

/* begin's second step: the molecules, their labels and split, the
 * fingerprint that keys the model, atomref and the standardisation. */
static int train_data(struct stage_ctx *ctx, struct tstage *t, const char *method, const char *column) {
  const struct cfg_node *c = ctx->cfg;
  int need_mol = !strcmp(method, "cluster") ? 3 : !strcmp(method, "scaffold") ? 2 : t->tr.atomref ? 1 : 0;
  t->lazy = comm_size(ctx->comm) > 1;
  if (stage_graph_settings(ctx, &t->gs)) return STAGE_ERROR;
  if (load_data(ctx, t, !strcmp(method, "column") ? column : NULL, need_mol)) return STAGE_ERROR;
  if (t->lazy) {
    char *sql = sqlite3_mprintf("SELECT " STAGE_GRAPH_COLUMN " FROM \"%w\".graphs g JOIN \"%w\".molecules m "
                                "ON m.id = g.mol_id WHERE g.mol_id = ?1",
                                ctx->src, ctx->src);
    int rc = sql ? sqlite3_prepare_v2(ctx->db, sql, -1, &t->get_graph, NULL) : SQLITE_NOMEM;
    sqlite3_free(sql);
    if (rc != SQLITE_OK) return stage_sql_fail(ctx, "reading the training graphs");
  }
  if (t->tr.n < 2)
    return stage_fail_at(ctx, c,
                         "stages.train: set '%s' has %d molecule%s with a graph and the label '%s'; need 2 or more",
                         t->set, t->tr.n, t->tr.n == 1 ? "" : "s", t->tr.target);
  if (train_make_split(ctx, t)) return STAGE_ERROR;
  if (t->balanced) { /* each class weighs alike: an active N / P times an inactive (the train split's) */
    const struct se3_split_count *tr = &t->split_n[SE3_SPLIT_TRAIN];
    if (tr->actives == 0 || tr->actives == tr->molecules)
      return stage_fail_at(ctx, cfg_get(c, "class_weight"),
                           "stages.train.class_weight: balanced needs actives and inactives in the train split; it "
                           "holds %d actives of %d molecules",
                           tr->actives, tr->molecules);
    t->tr.pos_weight = (double)(tr->molecules - tr->actives) / tr->actives;
  }
  t->tr.fingerprint = cfg_hash(se3_hash_bytes(t->tr.fingerprint, t->split, (size_t)t->tr.n), c);
  /* The model is keyed by what it learns from (the molecules' ids and
   * graphs, their labels, the split) and its settings: a change elsewhere
   * (a library added, a label it does not learn) keeps it. */
  ctx->inputs_hash = t->tr.fingerprint;
  t->tr.base = calloc((size_t)t->tr.n, sizeof *t->tr.base);
  if (!t->tr.base) return stage_fail_at(ctx, NULL, "out of memory");
  if (t->tr.atomref && se3_trainer_fit_atomref(&t->tr, t->counts))
    return trainer_fail_at(ctx, cfg_get(c, "atomref"), t);
  /* standardise regression targets (less the references) with the training split's statistics */
  if (se3_trainer_standardize(&t->tr)) return trainer_fail_at(ctx, NULL, t);
  if (t->tr.classify) {
    for (int i = 0; i < t->tr.n; i++)
      if (t->tr.y[i] != 0 && t->tr.y[i] != 1) {
        char where[600];
        train_mol_where(ctx, t->ids[i], where, sizeof where);
        return stage_fail_at(ctx, cfg_get(c, "task"),
                             "stages.train.task: classification needs labels 0 or 1; %s has %g", where, t->tr.y[i]);
      }
  }
  return STAGE_OK;
}

/* begin's third step: the model on its backend, and the trainer opened
 * with its schedule. */
static int train_model(struct stage_ctx *ctx, struct tstage *t) {
  const struct cfg_node *c = ctx->cfg;
  /* the model; its envelope fades radius edges out at the graph stage's
   * cutoff (the graph settings, read once in begin) */
  const char *envelope = cfg_str(c, "arch.envelope");
  int radius = t->gs.go.edges != GRAPH_EDGES_BONDS;
  struct se3_config mc = {.layers = (int)cfg_int(c, "arch.layers"),
                          .degrees = (int)cfg_int(c, "arch.degrees"),
                          .channels = (int)cfg_int(c, "arch.channels"),
                          .heads = (int)cfg_int(c, "arch.heads"),
                          .channels_div = (int)cfg_int(c, "arch.channels_div"),
                          .node_in = t->node_width,
                          .edge_in = graph_edge_width(&t->gs.go),
                          .radial_hidden = (int)cfg_int(c, "arch.radial_hidden"),
                          .mlp_hidden = (int)cfg_int(c, "arch.mlp_hidden"),
                          .pool_max = !strcmp(cfg_str(c, "arch.pooling"), "max"),
                          .embed = (int)cfg_int(c, "arch.embed"),
                          .outputs = 1,
                          .envelope = !strcmp(envelope, "cosine") ? SE3_ENVELOPE_COSINE
                                      : !strcmp(envelope, "poly") || (!strcmp(envelope, "auto") && radius)
                                          ? SE3_ENVELOPE_POLY
                                          : SE3_ENVELOPE_NONE,
                          .bonds_kept = t->gs.go.edges != GRAPH_EDGES_RADIUS,
                          .cutoff = (float)t->gs.go.cutoff};
  const char *bad = "device";
  const struct nn_backend *be = stage_backend(ctx->root, 1, &bad, &ctx->err);
  if (!be) return stage_error_at(ctx, cfg_get(ctx->root, bad), NULL);
  if (!(t->tr.net = se3_net_create(be, &mc, t->low_memory, &ctx->err))) /* (its kind: usage, memory, device) */
    return stage_error_at(ctx, cfg_get(c, "arch"), "stages.train.arch");
  const char *asked = cfg_str(ctx->root, "precision");
  ctx->report->log(ctx, "the model runs on %s (%s) in %s%s%s", be->name, be->device, stage_precision_name(be),
                   strcmp(asked, stage_precision_name(be)) ? "; precision bf16 on the CPU is for scoring" : "",
                   stage_conv_note(ctx->root, be));
  se3_config_format(&mc, t->tr.arch, sizeof t->tr.arch);
  snprintf(t->device, sizeof t->device, "%s (%s), %s%s", be->name, be->device, stage_precision_name(be),
           comm_size(ctx->comm) > 1 ? ", data parallel" : "");
  int rc = se3_trainer_open(&t->tr, cfg_float(c, "lr"), cfg_float(c, "min_lr"), (long)cfg_int(c, "warmup_steps"),
                            t->restart_epochs);
  if (rc) return trainer_fail_at(ctx, rc < 0 ? cfg_get(c, "batch_size") : NULL, t);
  return STAGE_OK;
}

/* begin's last words: the data, the split, the processes and threads, and
 * atomref's references. */
static void train_log_start(struct stage_ctx *ctx, const struct tstage *t, const char *method) {
  ctx->report->log(ctx, "%d molecules with '%s' in set '%s': %d train, %d valid, %d test (%s split); %zu parameters%s",
                   t->tr.n, t->tr.target, t->set, t->tr.cnt[0], t->tr.cnt[1], t->tr.cnt[2], method, t->tr.np,
                   t->tr.ensemble > 1 ? "; an ensemble" : "");
  /* After a scaffold split Open Babel has run in this process: the count is
   * still the caller's (chem/obbridge.cc), and the log says what it is. */
  train_log_split_counts(ctx, t, method);
  if (t->balanced)
    ctx->report->log(ctx,
                     "class_weight balanced: an active weighs %.4g in the loss (the train split's %d inactives over "
                     "its %d actives), an inactive 1",
                     t->tr.pos_weight, t->split_n[0].molecules - t->split_n[0].actives, t->split_n[0].actives);
  if (ctx->comm)
    ctx->report->log(ctx,
                     "training on %d process%s (each step's batch of %d shared among them, the gradients summed "
                     "by %s), %d OpenMP threads on rank 0",
                     comm_size(ctx->comm), comm_size(ctx->comm) > 1 ? "es" : "", t->tr.batch,
                     se3_net_collectives(t->tr.net), omp_get_max_threads());
  else
    ctx->report->log(ctx, "training on %d OpenMP threads", omp_get_max_threads());
  if (t->tr.atomref) {
    char line[1024];
    int o = 0;
    for (int p = 0; p < t->tr.nz && o < (int)sizeof line - 40; p++)
      o += snprintf(line + o, sizeof line - (size_t)o, "%s%s %.6g", p ? ", " : "", mol_element_symbol((int)t->tr.zs[p]),
                    t->tr.ref[p]);
    ctx->report->log(ctx, "atomref (per-element references of '%s'): %s", t->tr.target, line);
  }
}

static int train_begin(struct stage_ctx *ctx, int64_t *n_chunks, int64_t *n_items) {
  struct tstage *t = calloc(1, sizeof *t);
  if (!t) return stage_fail_at(ctx, NULL, "out of memory");
  ctx->state = t;
  if (ctx->n_shards > 1)
    return stage_fail_at(ctx, NULL, "train runs in one process; --shard is for the ingest, graph and basis stages");
  const char *method = NULL, *column = NULL;
  int ret;
  if ((ret = train_settings(ctx, t, &method, &column)) != STAGE_OK) return ret;
  if ((ret = train_data(ctx, t, method, column)) != STAGE_OK) return ret;
  if (set_profile_card(ctx->db, ctx->src, t->set, t->profile, sizeof t->profile, &ctx->err)) return STAGE_ERROR;
  if (train_set_build(ctx->db, ctx->src, t->ids, t->split, t->tr.n, SE3_TRAIN_SET_MAX, &t->domain, &ctx->err))
    return STAGE_ERROR;
  if ((ret = train_model(ctx, t)) != STAGE_OK) return ret;
  char tmp[PATH_MAX];
  if (stage_writer(ctx)) mkdir(t->tr.models_dir, 0755);
  for (int k = 0; k < t->tr.ensemble && stage_writer(ctx); k++) {
    se3_trainer_member_dir(&t->tr, k, tmp, sizeof tmp);
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return stage_fail_at(ctx, NULL, "%s: %s", tmp, strerror(errno));
  }
  *n_chunks = (int64_t)t->tr.ensemble * t->tr.epochs;
  *n_items = (int64_t)t->tr.ensemble * t->tr.epochs * t->tr.cnt[SE3_SPLIT_TRAIN];
  train_log_start(ctx, t, method);
  return STAGE_OK;
}

static int train_chunk(struct stage_ctx *ctx, int64_t chunk, int64_t *n_ok, int64_t *n_rej) {
  struct tstage *t = ctx->state;
  int k = (int)(chunk / t->tr.epochs), e = (int)(chunk % t->tr.epochs);
  char model[32];
  snprintf(model, sizeof model, "train/%d", k);
  *n_ok = *n_rej = 0;
  int ret = from_trainer(ctx, t, se3_trainer_state_before(&t->tr, k, e));
  if (ret != STAGE_OK) return ret;
  if (chunk == 0 && train_write_split(ctx, t)) return STAGE_ERROR; /* the split, once */
  double t0 = now_s(), lr;
  int stopped_early;
  struct se3_eval tr, va;
  ret = from_trainer(ctx, t, se3_trainer_epoch(&t->tr, e, 0, 1, &tr, &va, &lr, &stopped_early));
  if (ret != STAGE_OK) return ret;
  double secs = now_s() - t0;
  if (!stopped_early &&
      (train_write_metrics(ctx, model, e + 1, SE3_SPLIT_TRAIN, &tr, lr, secs, t->tr.classify, NULL, NULL) ||
       (t->tr.cnt[SE3_SPLIT_VALID] &&
        train_write_metrics(ctx, model, e + 1, SE3_SPLIT_VALID, &va, lr, secs, t->tr.classify, NULL, NULL))))
    return STAGE_ERROR;
  char who[48] = "";
  if (t->tr.ensemble > 1) snprintf(who, sizeof who, "model %d ", k);
  if (stopped_early)
    ctx->report->log(ctx, "%sepoch %d: stopped early (no better validation loss since epoch %d)", who, e + 1,
                     t->tr.best_epoch + 1);
  else if (t->tr.classify)
    ctx->report->log(ctx, "%sepoch %d: loss %.4f, valid loss %.4f ROC-AUC %.3f", who, e + 1, tr.loss, va.loss,
                     va.cls.roc_auc);
  else
    ctx->report->log(ctx, "%sepoch %d: loss %.4f, valid loss %.4f MAE %.4g", who, e + 1, tr.loss, va.loss, va.reg.mae);
  *n_ok = stopped_early ? 0 : t->tr.cnt[SE3_SPLIT_TRAIN];
  return STAGE_OK;
}
/* The predictions rows of a split (the report draws them): what was
 * there for this model is replaced. */
static int write_predictions(struct stage_ctx *ctx, struct tstage *t, const char *model, int which,
                             const double *pred) {
  sqlite3_stmt *del = NULL, *st = NULL;
  int rc = sqlite3_prepare_v2(ctx->db, "DELETE FROM predictions WHERE model = ?1 AND split = ?2", -1, &del, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_prepare_v2(ctx->db,
                            "INSERT OR REPLACE INTO predictions(model, mol_id, split, label, value) "
                            "VALUES(?1, ?2, ?3, ?4, ?5)",
                            -1, &st, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_bind_text(del, 1, model, -1, SQLITE_STATIC);
    sqlite3_bind_text(del, 2, se3_split_name[which], -1, SQLITE_STATIC);
    rc = sqlite3_step(del) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
  }
  for (int i = 0; rc == SQLITE_OK && i < t->tr.cnt[which]; i++) {
    int k = t->tr.idx[which][i];
    sqlite3_reset(st);
    sqlite3_bind_text(st, 1, model, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, t->ids[k]);
    sqlite3_bind_text(st, 3, se3_split_name[which], -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 4, t->tr.y[k]);
    sqlite3_bind_double(st, 5, pred[i]);
    rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
  }
  sqlite3_finalize(del);
  sqlite3_finalize(st);
  return rc == SQLITE_OK ? STAGE_OK : stage_sql_fail(ctx, "writing the test predictions");
}

/* The bootstrap intervals (metrics.h) of the test split's classification
 * metrics from its predictions pred (in the split's order). 0, or -1 out of
 * memory. */
static int test_intervals(const struct tstage *t, const double *pred, struct se3_cls_metrics *lo,
                          struct se3_cls_metrics *hi) {
  int nt = t->tr.cnt[SE3_SPLIT_TEST];
  double *y = malloc(((size_t)nt + 1) * sizeof *y);
  if (!y) return -1;
  for (int i = 0; i < nt; i++)
    y[i] = t->tr.y[t->tr.idx[SE3_SPLIT_TEST][i]];
  int rc = se3_classification_bootstrap(pred, y, nt, SE3_BOOTSTRAP_RESAMPLES, SE3_BOOTSTRAP_SEED, SE3_BOOTSTRAP_LEVEL,
                                        lo, hi);
  free(y);
  return rc;
}

/* Member k's best checkpoint on the test split, its predictions there, and
 * its models row. */
static int finalize_member(struct stage_ctx *ctx, struct tstage *t, int k) {
  char path[PATH_MAX + 64], id[32];
  snprintf(id, sizeof id, "train/%d", k);
  int ret = from_trainer(ctx, t, se3_trainer_ensure_final(&t->tr, k));
  if (ret != STAGE_OK) return ret;
  snprintf(path, sizeof path, "%s/best.ckpt", t->tr.dir);
  const char *name = access(path, R_OK) == 0 ? "best.ckpt" : NULL;
  char last[64];
  if (!name) {
    se3_trainer_epoch_file(last, sizeof last, t->tr.epochs - 1);
    name = last;
  }
  int epoch;
  t->tr.epoch_done = -2; /* memory now holds the best, not the last, epoch */
  if (se3_trainer_restore(&t->tr, name, &epoch)) return trainer_fail_at(ctx, NULL, t);
  struct se3_eval te;
  int nt = t->tr.cnt[SE3_SPLIT_TEST];
  double *pred = malloc((size_t)(nt + 1) * sizeof *pred);
  if (!pred) return stage_fail_at(ctx, NULL, "out of memory for %d test predictions", nt);
  if (se3_trainer_evaluate(&t->tr, SE3_SPLIT_TEST, &te, pred)) {
    free(pred);
    return stage_fail_at(ctx, NULL, "evaluating: %s", t->tr.why);
  }
  ret = write_predictions(ctx, t, id, SE3_SPLIT_TEST, pred);
  for (int i = 0; t->ens_sum && i < nt; i++)
    t->ens_sum[i] += pred[i];
  struct se3_cls_metrics lo, hi;
  if (ret == STAGE_OK && t->tr.classify && test_intervals(t, pred, &lo, &hi))
    ret = stage_fail_at(ctx, NULL, "out of memory for the bootstrap of %d test predictions", nt);
  free(pred);
  if (ret != STAGE_OK) return ret;
  if (nt && train_write_metrics(ctx, id, epoch + 1, SE3_SPLIT_TEST, &te, NAN, -1, t->tr.classify,
                                t->tr.classify ? &lo : NULL, t->tr.classify ? &hi : NULL))
    return STAGE_ERROR;
  char rel[PATH_MAX + 64];
  snprintf(rel, sizeof rel, "models/train-%d/%s", k, name);
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(ctx->db,
                         "INSERT OR REPLACE INTO models(id, target, task, checkpoint, arch, mean, std, best_epoch, "
                         "best_valid_loss, n_train, n_valid, n_test, device) "
                         "VALUES(?12,?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?13)",
                         -1, &st, NULL) != SQLITE_OK)
    return stage_sql_fail(ctx, "writing the model");
  sqlite3_bind_text(st, 1, t->tr.target, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, t->tr.classify ? "classification" : "regression", -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, rel, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 4, t->tr.arch, -1, SQLITE_STATIC);
  sqlite3_bind_double(st, 5, t->tr.mean);
  sqlite3_bind_double(st, 6, t->tr.std);
  sqlite3_bind_int(st, 7, (t->tr.best_epoch >= 0 ? t->tr.best_epoch : epoch) + 1); /* counted from 1 */
  if (isfinite(t->tr.best))
    sqlite3_bind_double(st, 8, t->tr.best);
  else
    sqlite3_bind_null(st, 8);
  for (int i = 0; i < 3; i++)
    sqlite3_bind_int(st, 9 + i, t->tr.cnt[i]);
  sqlite3_bind_text(st, 12, id, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 13, t->device, -1, SQLITE_STATIC);
  int rc = sqlite3_step(st);
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return stage_sql_fail(ctx, "writing the model");
  if (t->tr.cnt[SE3_SPLIT_TEST]) {
    char who[48] = "";
    if (t->tr.ensemble > 1) snprintf(who, sizeof who, "model %d ", k);
    if (t->tr.classify)
      ctx->report->log(ctx,
                       "%stest (%d molecules, best epoch %d): ROC-AUC %.3f (%.3f-%.3f), PR-AUC %.3f (%.3f-%.3f), "
                       "EF1%% %.2f (%.2f-%.2f); in brackets the 95%% bootstrap interval (%d resamples)",
                       who, t->tr.cnt[2], epoch + 1, te.cls.roc_auc, lo.roc_auc, hi.roc_auc, te.cls.pr_auc, lo.pr_auc,
                       hi.pr_auc, te.cls.ef1, lo.ef1, hi.ef1, SE3_BOOTSTRAP_RESAMPLES);
    else
      ctx->report->log(ctx, "%stest (%d molecules, best epoch %d): MAE %.4g, RMSE %.4g, R2 %.3f", who, t->tr.cnt[2],
                       epoch + 1, te.reg.mae, te.reg.rmse, te.reg.r2);
  }
  return STAGE_OK;
}

/* An ensemble's own test metrics (train_rows.h), from its members' summed
 * test predictions. */
static int finalize_ensemble(struct stage_ctx *ctx, struct tstage *t) {
  int nt = t->tr.cnt[SE3_SPLIT_TEST];
  double *y = malloc(((size_t)nt + 1) * sizeof *y);
  if (!y) return stage_fail_at(ctx, NULL, "out of memory for %d test predictions", nt);
  for (int i = 0; i < nt; i++)
    y[i] = t->tr.y[t->tr.idx[SE3_SPLIT_TEST][i]];
  int ret = train_write_ensemble(ctx, t->ens_sum, y, nt, t->tr.ensemble, t->tr.classify);
  free(y);
  return ret;
}

static int train_finalize(struct stage_ctx *ctx) {
  struct tstage *t = ctx->state;
  int nt = t->tr.cnt[SE3_SPLIT_TEST];
  free(t->ens_sum);
  t->ens_sum = NULL;
  if (t->tr.ensemble > 1 && nt > 0 && !(t->ens_sum = calloc((size_t)nt, sizeof *t->ens_sum)))
    return stage_fail_at(ctx, NULL, "out of memory for %d test predictions", nt);
  for (int k = 0; k < t->tr.ensemble; k++)
    if (finalize_member(ctx, t, k)) return STAGE_ERROR;
  if (t->ens_sum && finalize_ensemble(ctx, t)) return STAGE_ERROR;
  se3_trainer_report(&t->tr);
  return STAGE_OK;
}

static void train_end(struct stage_ctx *ctx) {
  struct tstage *t = ctx->state;
  if (!t) return;
  for (int i = 0; t->g && i < t->tr.n; i++)
    graph_free(&t->g[i]);
  free(t->g);
  train_confs_free(&t->confs);
  sqlite3_finalize(t->get_graph);
  graph_free(&t->one);
  free(t->ids);
  free(t->split);
  free(t->split_label);
  for (int i = 0; t->scaffold && i < t->tr.n; i++)
    free(t->scaffold[i]);
  free(t->scaffold);
  for (int i = 0; t->compound && i < t->tr.n; i++)
    free(t->compound[i]);
  free(t->compound);
  free(t->fps);
  train_set_free(&t->domain);
  free(t->counts);
  free(t->ens_sum);
  se3_trainer_free(&t->tr);
  free(t);
  ctx->state = NULL;
}

/* Ranks > 0 of a data-parallel run: rank 0's epochs and predictions, with
 * its state, until it ends the stage. A failure is this process's to
 * report; rank 0 hears of it through the step's or the prediction's
 * agreement and decides. */
static int train_serve(struct stage_ctx *ctx) {
  struct tstage *t = ctx->state;
  int rank = comm_rank(ctx->comm);
  for (;;) {
    struct stage_order o;
    if (stage_order(ctx, &o)) return stage_fail_at(ctx, NULL, "MPI failed waiting for rank 0");
    if (o.op == 0) return STAGE_OK;
    struct se3_train_order to = {o.op, {o.i[0], o.i[1], o.i[2], o.i[3], o.i[4], o.i[5]}, {o.f[0], o.f[1]}};
    int ret = se3_trainer_follow(&t->tr, &to);
    if (ret < 0) return trainer_fail_at(ctx, NULL, t);
    ret = from_trainer(ctx, t, ret);
    char msg[SE3_ERROR_MESSAGE + SE3_ERROR_FILE];
    if (ret == STAGE_ERROR)
      fprintf(stderr, "se3screen (rank %d): train: %s\n", rank, se3_error_format(&ctx->err, msg, sizeof msg));
  }
}

/* Train does not run in a score-only workflow (it scores with a saved
 * model) nor in one that ranks by the docking score alone. */
static int train_skipped(const struct cfg_node *root) { return stage_score_only(root) || stage_dock_only(root); }

const struct stage stage_train = {
    .name = "train",
    .tables = "predictions metrics models splits split_counts",
    .after = "graph",
    .flags = STAGE_USES_MODEL,
    .begin = train_begin,
    .run_chunk = train_chunk,
    .finalize = train_finalize,
    .end = train_end,
    .serve = train_serve,
    .ready = repair_finished,
    .reads = {.skipped = train_skipped, .set = "stages.train.set", .label = "stages.train.target"},
    .show = {.done = "trained on"},
};
