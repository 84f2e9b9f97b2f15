/* train_rows.h — rows the train stage writes into `metrics`: a member's
 * metrics of a split and epoch, and an ensemble's own test metrics. */
#ifndef SE3_TRAIN_ROWS_H
#define SE3_TRAIN_ROWS_H

#include "models/metrics.h"
#include "models/trainer.h"
#include "stage.h"

/* A metrics row of model (a models.id, or "ensemble"); epoch counted from 1
 * (0: none); which a split (models/split.h); lr NAN and seconds < 0 leave
 * theirs empty; lo and hi the metrics' bootstrap interval (NULL: none).
 * STAGE_OK, or the stage's error. */
int train_write_metrics(struct stage_ctx *ctx, const char *model, int epoch, int which, const struct se3_eval *ev,
                        double lr, double seconds, int classify, const struct se3_cls_metrics *lo,
                        const struct se3_cls_metrics *hi);

/* An ensemble of n members: each of the nt test molecules' prediction the
 * mean of theirs (sum, their sum, is divided by n in place), its metrics
 * against the labels y written as the test row of model "ensemble", epoch 0,
 * with a classifier's bootstrap intervals, and logged. */
int train_write_ensemble(struct stage_ctx *ctx, double *sum, const double *y, int nt, int n, int classify);

#endif
