/* metrics.h — evaluation metrics of predictions, in double precision:
 * regression (MAE, RMSE, R², Spearman) and screening classification
 * (ROC-AUC, PR-AUC as average precision, enrichment factor at 1%).
 *
 * Every sort is by value with ties broken by index (lower index first), so
 * results are deterministic. A NaN value sorts below every number and ties
 * with other NaNs (inputs are expected to be finite; this only keeps the
 * sort well defined). A metric that is undefined is NaN. If memory for the
 * sort cannot be had, every metric is NaN. */
#ifndef SE3_METRICS_H
#define SE3_METRICS_H

/* Regression of n predictions pred against targets y:
 *   mae       mean |pred - y|                               (NaN when n < 1)
 *   rmse      sqrt(mean (pred - y)^2)                       (NaN when n < 1)
 *   r2        1 - SS_res / SS_tot, SS_res = sum (y - pred)^2,
 *             SS_tot = sum (y - mean y)^2 (NaN when n < 2 or y is constant);
 *             predicting the mean gives 0, can be negative
 *   spearman  Pearson correlation of the ranks of pred and of y, ties given
 *             their average rank (NaN when n < 2 or either is constant). */
struct se3_reg_metrics {
  double mae, rmse, r2, spearman;
};
void se3_regression_metrics(const double *pred, const double *y, int n, struct se3_reg_metrics *out);

/* Classification of n scores (higher = more likely active) against labels
 * (label > 0.5 is an active, anything else an inactive). With P actives and
 * N inactives, all three are NaN when P = 0 or N = 0:
 *   roc_auc   the Mann-Whitney statistic: the fraction of (active, inactive)
 *             pairs whose active scores higher, a tie counting 1/2; computed
 *             from average ranks. 1 = perfect, 0 = reversed, 0.5 = random.
 *   pr_auc    average precision: sum over the actives of the precision at
 *             their rank, divided by P. Tied scores are handled as one
 *             threshold (as scikit-learn's average_precision_score): every
 *             active in a group of equal scores gets the precision counted
 *             over the whole group and everything scored higher, so the
 *             result does not depend on the order of tied entries. Without
 *             ties, the precision at an active of rank k (1-based, best
 *             first) is (actives among the top k) / k.
 *   ef1       enrichment factor at 1%: with k = ceil(n / 100), (actives
 *             among the k best-scored) / k divided by P / n. The top k are
 *             taken after sorting by score descending, ties broken by index
 *             (lower index first). Its maximum is min(P, k) n / (k P). */
struct se3_cls_metrics {
  double roc_auc, pr_auc, ef1;
};
void se3_classification_metrics(const double *score, const double *label, int n, struct se3_cls_metrics *out);

/* Bootstrap confidence intervals of the three classification metrics:
 * `resamples` resamples of the n (score, label) pairs, stratified (each
 * draws P actives from the actives and N inactives from the inactives, with
 * replacement, so every resample holds both classes and the same prevalence
 * as the data: EF1 stays comparable), each resample kept in the original
 * index order so that ties fall as in the data. lo and hi are the
 * percentile interval of level `level` (0.95: the 2.5th and 97.5th
 * percentiles, interpolated linearly between order statistics) of each
 * metric over the resamples. The draws come from seed alone: the same data
 * and seed, the same interval. All NaN where the metrics are (P = 0 or
 * N = 0), when resamples < 2, or out of memory (then -1 is returned;
 * otherwise 0). */
enum { SE3_BOOTSTRAP_RESAMPLES = 1000 }; /* what train and the report use */
#define SE3_BOOTSTRAP_SEED 20261127u     /* fixed: a report computed again shows the same interval */
#define SE3_BOOTSTRAP_LEVEL 0.95
int se3_classification_bootstrap(const double *score, const double *label, int n, int resamples,
                                 unsigned long long seed, double level, struct se3_cls_metrics *lo,
                                 struct se3_cls_metrics *hi);

/* The ROC curve of the same scores and labels: (0, 0), then one point a
 * threshold, from the best score down, a group of equal scores being one
 * threshold (so the area under the straight segments is roc_auc above, ties
 * counting 1/2), ending at (1, 1). fpr and tpr have room for n + 1 points.
 * Returns the number of points, 0 when P = 0 or N = 0, -1 out of memory. */
int se3_roc_curve(const double *score, const double *label, int n, double *fpr, double *tpr);

/* The enrichment factor at `fraction` (0 < fraction <= 1) of the same
 * scores and labels: with k = ceil(n fraction), (actives among the k best,
 * ties by index) / k divided by P / n; fraction 0.01 is ef1 above. NaN when
 * P = 0 or N = 0. */
double se3_enrichment_factor(const double *score, const double *label, int n, double fraction);
/* The enrichment curve: (0, 0), then one point a threshold from the best
 * score down (a group of equal scores being one), x the fraction of the n
 * molecules scored at or above it and y the fraction of the actives among
 * them, ending at (1, 1). x and y have room for n + 1 points. Returns the
 * points, 0 when P = 0 or N = 0, -1 out of memory. */
int se3_enrichment_curve(const double *score, const double *label, int n, double *x, double *y);

#endif
