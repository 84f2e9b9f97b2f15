/* train_rows.c — the train stage's metrics rows (train_rows.h). */
#include "train_rows.h"

#include <math.h>
#include <sqlite3.h>

#include "models/split.h"

/* A metrics row; epoch counted from 1; lo and hi the metrics' bootstrap
 * interval (NULL: none). */
int train_write_metrics(struct stage_ctx *ctx, const char *model, int epoch, int which, const struct se3_eval *ev,
                        double lr, double seconds, int classify, const struct se3_cls_metrics *lo,
                        const struct se3_cls_metrics *hi) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(ctx->db,
                         "INSERT OR REPLACE INTO metrics(model, epoch, split, loss, mae, rmse, r2, spearman, roc_auc, "
                         "pr_auc, ef1, lr, seconds, roc_auc_lo, roc_auc_hi, pr_auc_lo, pr_auc_hi, ef1_lo, ef1_hi) "
                         "VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19)",
                         -1, &st, NULL) != SQLITE_OK)
    return stage_sql_fail(ctx, "writing metrics");
  const double v[8] = {ev->loss,         ev->reg.mae,     ev->reg.rmse,   ev->reg.r2,
                       ev->reg.spearman, ev->cls.roc_auc, ev->cls.pr_auc, ev->cls.ef1};
  sqlite3_bind_text(st, 1, model, -1, SQLITE_STATIC);
  sqlite3_bind_int(st, 2, epoch);
  sqlite3_bind_text(st, 3, se3_split_name[which], -1, SQLITE_STATIC);
  for (int i = 0; i < 8; i++) {
    /* the loss always; metrics of the split's kind, not for the training split
     * (its loss is the running mean over the epoch's steps) */
    int applies = i == 0 || (which != SE3_SPLIT_TRAIN && (classify ? i >= 5 : i < 5));
    if (applies && isfinite(v[i]))
      sqlite3_bind_double(st, 4 + i, v[i]);
    else
      sqlite3_bind_null(st, 4 + i);
  }
  if (isfinite(lr)) sqlite3_bind_double(st, 12, lr);
  if (seconds >= 0) sqlite3_bind_double(st, 13, seconds);
  if (lo && hi) {
    const double ci[6] = {lo->roc_auc, hi->roc_auc, lo->pr_auc, hi->pr_auc, lo->ef1, hi->ef1};
    for (int i = 0; i < 6; i++)
      if (isfinite(ci[i])) sqlite3_bind_double(st, 14 + i, ci[i]);
  }
  int rc = sqlite3_step(st);
  sqlite3_finalize(st);
  return rc == SQLITE_DONE ? STAGE_OK : stage_sql_fail(ctx, "writing metrics");
}

int train_write_ensemble(struct stage_ctx *ctx, double *sum, const double *y, int nt, int n, int classify) {
  for (int i = 0; i < nt; i++)
    sum[i] /= n;
  struct se3_eval ev = {.loss = NAN};
  struct se3_cls_metrics lo, hi;
  if (classify) {
    se3_classification_metrics(sum, y, nt, &ev.cls);
    if (se3_classification_bootstrap(sum, y, nt, SE3_BOOTSTRAP_RESAMPLES, SE3_BOOTSTRAP_SEED, SE3_BOOTSTRAP_LEVEL, &lo,
                                     &hi))
      return stage_fail_at(ctx, NULL, "out of memory for the bootstrap of %d test predictions", nt);
  } else {
    se3_regression_metrics(sum, y, nt, &ev.reg);
  }
  if (train_write_metrics(ctx, "ensemble", 0, SE3_SPLIT_TEST, &ev, NAN, -1, classify, classify ? &lo : NULL,
                          classify ? &hi : NULL))
    return STAGE_ERROR;
  if (classify)
    ctx->report->log(ctx, "the ensemble of %d, test (%d molecules): ROC-AUC %.3f (%.3f-%.3f), PR-AUC %.3f (%.3f-%.3f)",
                     n, nt, ev.cls.roc_auc, lo.roc_auc, hi.roc_auc, ev.cls.pr_auc, lo.pr_auc, hi.pr_auc);
  else
    ctx->report->log(ctx, "the ensemble of %d, test (%d molecules): MAE %.4g, RMSE %.4g, R2 %.3f", n, nt, ev.reg.mae,
                     ev.reg.rmse, ev.reg.r2);
  return STAGE_OK;
}
