/* train_split.c — the train stage's split (train_stage.h): drawn by
 * stages.train.split.method (random with a compound's records kept
 * together, scaffold or Butina cluster groups whole, or a column's 0/1/2),
 * said in the log with its counts and a warning where actives are few,
 * written into `splits` and `split_counts` with the first epoch. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "train_stage.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void train_mol_where(struct stage_ctx *ctx, int64_t id, char *out, size_t n) {
  char *sql = sqlite3_mprintf("SELECT name, source_file, record_no FROM \"%w\".molecules WHERE id=?1", ctx->src);
  sqlite3_stmt *st = NULL;
  snprintf(out, n, "molecule %lld", (long long)id);
  if (sql && sqlite3_prepare_v2(ctx->db, sql, -1, &st, NULL) == SQLITE_OK) {
    sqlite3_bind_int64(st, 1, id);
    if (sqlite3_step(st) == SQLITE_ROW)
      snprintf(out, n, "molecule %lld ('%s', %s record %lld)", (long long)id, sqlite3_column_text(st, 0),
               sqlite3_column_text(st, 1), (long long)sqlite3_column_int64(st, 2));
  }
  sqlite3_finalize(st);
  sqlite3_free(sql);
}

/* split.method cluster: each molecule's Butina cluster (fingerprint.h) as
 * its group key, in t->scaffold */
static int cluster_keys(struct stage_ctx *ctx, struct tstage *t) {
  double cutoff = cfg_float(ctx->cfg, "split.cluster_distance"), t0 = now_s();
  int *cl = malloc((size_t)t->tr.n * sizeof *cl);
  int nc = cl ? fp_butina(t->fps, t->tr.n, cutoff, cl) : -1;
  for (int i = 0; nc >= 0 && i < t->tr.n; i++) {
    char key[32];
    snprintf(key, sizeof key, "cluster %d", cl[i]);
    if (!(t->scaffold[i] = strdup(key))) nc = -1;
  }
  free(cl);
  if (nc < 0) return stage_fail_at(ctx, NULL, "out of memory clustering %d molecules", t->tr.n);
  ctx->report->log(ctx, "%d Butina clusters of %d molecules at Tanimoto distance %g (Morgan radius 2, %d bits; %.1f s)",
                   nc, t->tr.n, cutoff, FP_BITS, now_s() - t0);
  return STAGE_OK;
}

int train_make_split(struct stage_ctx *ctx, struct tstage *t) {
  const struct cfg_node *c = ctx->cfg;
  const char *method = cfg_str(c, "split.method");
  int n_test = (int)floor(cfg_float(c, "split.test") * t->tr.n),
      n_valid = (int)floor(cfg_float(c, "split.valid") * t->tr.n);
  uint64_t seed = (uint64_t)cfg_int(c, "split.seed");
  t->split = malloc((size_t)t->tr.n);
  int *perm = malloc((size_t)t->tr.n * sizeof *perm);
  if (!perm || !t->split) {
    free(perm);
    return stage_fail_at(ctx, NULL, "out of memory");
  }
  int ret = STAGE_OK;
  if (!strcmp(method, "column")) {
    for (int i = 0; i < t->tr.n && ret == STAGE_OK; i++) {
      double v = t->split_label[i];
      if (v == 0 || v == 1 || v == 2) {
        t->split[i] = (unsigned char)v;
        continue;
      }
      char where[600];
      train_mol_where(ctx, t->ids[i], where, sizeof where);
      if (isnan(v))
        ret = stage_fail_at(ctx, cfg_get(c, "split.column"), "stages.train.split.column: %s has no label '%s'", where,
                            cfg_str(c, "split.column"));
      else
        ret = stage_fail_at(ctx, cfg_get(c, "split.column"),
                            "stages.train.split.column: %s has %s = %g; use 0 (train), 1 (valid) or 2 (test)", where,
                            cfg_str(c, "split.column"), v);
    }
  } else if (n_test + n_valid >= t->tr.n) {
    ret = stage_fail_at(ctx, cfg_get(c, "split"), "stages.train.split: no molecules left to train on (%d in all)",
                        t->tr.n);
  } else if (!strcmp(method, "scaffold") || !strcmp(method, "cluster")) {
    /* whole groups, a compound's records joining its groups into one */
    char **keys = malloc((size_t)t->tr.n * sizeof *keys);
    if (!strcmp(method, "cluster")) ret = cluster_keys(ctx, t);
    if (ret == STAGE_OK && (!keys || se3_merge_groups(t->tr.n, t->scaffold, t->compound, keys) ||
                            se3_split_groups(t->tr.n, keys, t->split, perm, seed, n_test, n_valid)))
      ret = stage_fail_at(ctx, NULL, "out of memory");
    free(keys);
  } else {
    se3_split_random(t->tr.n, t->split, perm, seed, n_test, n_valid);
    int moved = se3_split_keep_compounds(t->tr.n, t->compound, t->split);
    if (moved < 0) ret = stage_fail_at(ctx, NULL, "out of memory");
    if (moved > 0)
      ctx->report->log(ctx,
                       "%d record%s moved to the split of %s compound's first record (stereoisomers, charge "
                       "or protonation states of one compound stay in one split)",
                       moved, moved == 1 ? "" : "s", moved == 1 ? "its" : "their");
  }
  free(perm);
  if (ret != STAGE_OK) return ret;
  for (int i = 0; i < 3; i++) {
    t->tr.idx[i] = malloc((size_t)t->tr.n * sizeof(int));
    if (!t->tr.idx[i]) return stage_fail_at(ctx, NULL, "out of memory");
  }
  for (int i = 0; i < t->tr.n; i++)
    t->tr.idx[t->split[i]][t->tr.cnt[t->split[i]]++] = i; /* in id order within each split */
  if (t->tr.cnt[SE3_SPLIT_TRAIN] == 0)
    return stage_fail_at(ctx, cfg_get(c, "split"), "stages.train.split: no molecules left to train on (%d in all)",
                         t->tr.n);
  if (se3_split_counts(t->tr.n, t->split, t->tr.y, t->tr.classify, t->compound, t->split_n))
    return stage_fail_at(ctx, NULL, "out of memory");
  return STAGE_OK;
}

/* Each split's molecules and compounds (and actives), and a warning for a
 * split of fewer than SE3_FEW_ACTIVES actives: its metrics rest on them. */
enum { SE3_FEW_ACTIVES = 20 };
void train_log_split_counts(struct stage_ctx *ctx, const struct tstage *t, const char *method) {
  char line[512];
  int o = 0;
  for (int s = 0; s < 3; s++) {
    const struct se3_split_count *c = &t->split_n[s];
    o += snprintf(line + o, sizeof line - (size_t)o, "%s%s %d molecules (%d compounds", s ? "; " : "",
                  se3_split_name[s], c->molecules, c->compounds);
    if (t->tr.classify)
      o += snprintf(line + o, sizeof line - (size_t)o, "), %d actives (%d compounds)", c->actives, c->active_compounds);
    else
      o += snprintf(line + o, sizeof line - (size_t)o, ")");
  }
  ctx->report->log(ctx, "split: %s", line);
  for (int s = 0; t->tr.classify && s < 3; s++) {
    const struct se3_split_count *c = &t->split_n[s];
    if (c->molecules > 0 && c->actives < SE3_FEW_ACTIVES)
      ctx->report->log(ctx, "warning: the %s split holds %d active%s (%d compound%s), fewer than %d: %s%s",
                       se3_split_name[s], c->actives, c->actives == 1 ? "" : "s", c->active_compounds,
                       c->active_compounds == 1 ? "" : "s", SE3_FEW_ACTIVES,
                       s == SE3_SPLIT_TRAIN   ? "few for the model to learn actives from"
                       : s == SE3_SPLIT_VALID ? "its ROC-AUC, PR-AUC and EF1% rest on them alone"
                                              : "its ROC-AUC, PR-AUC and EF1% rest on them alone (their 95% "
                                                "bootstrap intervals follow the test metrics)",
                       /* a scaffold split puts a series' actives, one scaffold, in one split (issue 70) */
                       !strcmp(method, "scaffold") && s != SE3_SPLIT_TRAIN
                           ? "; a scaffold split keeps each scaffold's molecules together, so a series of actives "
                             "on few scaffolds falls mostly in one split: `split: {method: cluster}` groups by "
                             "similarity in smaller clusters, and `test`/`valid` fractions of 0.2 hold more"
                           : "");
  }
}

static int write_splits(struct stage_ctx *ctx, struct tstage *t) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(ctx->db, "INSERT OR REPLACE INTO splits(mol_id, split) VALUES(?1, ?2)", -1, &st, NULL))
    return stage_sql_fail(ctx, "writing the split");
  for (int i = 0; i < t->tr.n; i++) {
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, t->ids[i]);
    sqlite3_bind_text(st, 2, se3_split_name[t->split[i]], -1, SQLITE_STATIC);
    if (sqlite3_step(st) != SQLITE_DONE) {
      sqlite3_finalize(st);
      return stage_sql_fail(ctx, "writing the split");
    }
  }
  sqlite3_finalize(st);
  return STAGE_OK;
}

/* split_counts: each split's molecules, compounds and actives */
static int write_split_counts(struct stage_ctx *ctx, const struct tstage *t) {
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_exec(ctx->db, "DELETE FROM split_counts", NULL, NULL, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_prepare_v2(ctx->db,
                            "INSERT INTO split_counts(split, molecules, compounds, actives, active_compounds) "
                            "VALUES(?1, ?2, ?3, ?4, ?5)",
                            -1, &st, NULL);
  for (int s = 0; rc == SQLITE_OK && s < 3; s++) {
    const struct se3_split_count *c = &t->split_n[s];
    sqlite3_reset(st);
    sqlite3_bind_text(st, 1, se3_split_name[s], -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 2, c->molecules);
    sqlite3_bind_int(st, 3, c->compounds);
    if (t->tr.classify) {
      sqlite3_bind_int(st, 4, c->actives);
      sqlite3_bind_int(st, 5, c->active_compounds);
    } else {
      sqlite3_bind_null(st, 4);
      sqlite3_bind_null(st, 5);
    }
    rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
  }
  sqlite3_finalize(st);
  return rc == SQLITE_OK ? STAGE_OK : stage_sql_fail(ctx, "writing the split's counts");
}

int train_write_split(struct stage_ctx *ctx, struct tstage *t) {
  return write_splits(ctx, t) || write_split_counts(ctx, t) ? STAGE_ERROR : STAGE_OK;
}
