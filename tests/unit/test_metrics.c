/* The metrics of models/metrics.h on cases computed by hand (ties included),
 * perfect and reversed rankings, the enrichment factor on constructed
 * screens, brute-force pair counts, and the undefined cases (NaN). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "models/metrics.h"
#include "tests/testutil.h"

#define EPS 1e-12

Test(metrics, regression_by_hand) {
  double y[4] = {1, 2, 3, 4}, p[4] = {1.5, 2, 2.5, 5};
  struct se3_reg_metrics r;
  se3_regression_metrics(p, y, 4, &r);
  cr_assert_float_eq(r.mae, 0.5, EPS);
  cr_assert_float_eq(r.rmse, sqrt(1.5 / 4), EPS);
  cr_assert_float_eq(r.r2, 1 - 1.5 / 5, EPS); /* SS_res 1.5, SS_tot 5 */
  cr_assert_float_eq(r.spearman, 1, EPS);     /* same order */
}

Test(metrics, r2_of_perfect_and_mean_predictions) {
  double y[5] = {0.3, -1, 2, 7, 4}, mean[5], rev[5];
  struct se3_reg_metrics r;
  se3_regression_metrics(y, y, 5, &r);
  cr_assert_eq(r.mae, 0.0);
  cr_assert_eq(r.rmse, 0.0);
  cr_assert_float_eq(r.r2, 1, EPS);
  cr_assert_float_eq(r.spearman, 1, EPS);
  double mu = (0.3 - 1 + 2 + 7 + 4) / 5;
  for (int i = 0; i < 5; i++) {
    mean[i] = mu;
    rev[i] = -3 * y[i] + 1;
  }
  se3_regression_metrics(mean, y, 5, &r);
  cr_assert_float_eq(r.r2, 0, EPS);
  cr_assert(isnan(r.spearman), "a constant prediction has no rank correlation");
  se3_regression_metrics(rev, y, 5, &r);
  cr_assert_float_eq(r.spearman, -1, EPS);
  cr_assert_lt(r.r2, 0);
}

Test(metrics, spearman_with_ties) {
  /* ranks of x: 1, 2.5, 2.5, 4; of y: 1, 3, 2, 4; deviations from 2.5:
   * (-1.5, 0, 0, 1.5) and (-1.5, 0.5, -0.5, 1.5): 4.5 / sqrt(4.5 * 5) */
  double x[4] = {1, 2, 2, 3}, y[4] = {10, 30, 20, 40};
  struct se3_reg_metrics r;
  se3_regression_metrics(x, y, 4, &r);
  cr_assert_float_eq(r.spearman, sqrt(0.9), EPS, "%.17g", r.spearman);
  /* order and monotone transforms do not matter */
  double x2[4] = {2, 3, 1, 2}, y2[4] = {log(20), log(40), log(10), log(30)};
  se3_regression_metrics(x2, y2, 4, &r);
  cr_assert_float_eq(r.spearman, sqrt(0.9), EPS, "%.17g", r.spearman);
}

Test(metrics, regression_undefined_cases) {
  struct se3_reg_metrics r;
  double a[3] = {1, 2, 3}, c[3] = {2, 2, 2};
  se3_regression_metrics(a, a, 0, &r);
  cr_assert(isnan(r.mae) && isnan(r.rmse) && isnan(r.r2) && isnan(r.spearman));
  se3_regression_metrics(a, c, 1, &r);
  cr_assert_float_eq(r.mae, 1, EPS);
  cr_assert(isnan(r.r2) && isnan(r.spearman), "n = 1");
  se3_regression_metrics(a, c, 3, &r); /* constant target */
  cr_assert_float_eq(r.mae, 2.0 / 3, EPS);
  cr_assert(isnan(r.r2) && isnan(r.spearman));
}

Test(metrics, roc_auc_with_ties_by_hand) {
  /* actives 0.9, 0.8, 0.1; inactives 0.8, 0.3: pairs won 1 + 1 + 1/2 + 1 +
   * 0 + 0 = 3.5 of 6 */
  double s[5] = {0.9, 0.8, 0.8, 0.3, 0.1}, l[5] = {1, 1, 0, 0, 1};
  struct se3_cls_metrics m;
  se3_classification_metrics(s, l, 5, &m);
  cr_assert_float_eq(m.roc_auc, 3.5 / 6, EPS, "%.17g", m.roc_auc);
}

Test(metrics, perfect_and_reversed_rankings) {
  enum { M = 50 };
  double s[M], l[M], r[M];
  for (int i = 0; i < M; i++) {
    s[i] = i;
    r[i] = -i;
    l[i] = i >= 40; /* the 10 highest scores are the actives */
  }
  struct se3_cls_metrics m;
  se3_classification_metrics(s, l, M, &m);
  cr_assert_float_eq(m.roc_auc, 1, EPS);
  cr_assert_float_eq(m.pr_auc, 1, EPS);
  cr_assert_float_eq(m.ef1, 1.0 / (10.0 / M), EPS); /* top 1 of 50 is active: 5 */
  se3_classification_metrics(r, l, M, &m);
  cr_assert_float_eq(m.roc_auc, 0, EPS);
  cr_assert_float_eq(m.ef1, 0, EPS);
  /* reversed AP: actives at ranks 41..50, precision k / (40 + k) */
  double ap = 0;
  for (int k = 1; k <= 10; k++)
    ap += (double)k / (40 + k) / 10;
  cr_assert_float_eq(m.pr_auc, ap, EPS);
  /* all scores equal: AUC 1/2, AP = the fraction of actives */
  for (int i = 0; i < M; i++)
    s[i] = 0.25;
  se3_classification_metrics(s, l, M, &m);
  cr_assert_float_eq(m.roc_auc, 0.5, EPS);
  cr_assert_float_eq(m.pr_auc, 10.0 / M, EPS);
}

Test(metrics, average_precision_by_hand) {
  /* actives at ranks 1, 3, 5: (1/1 + 2/3 + 3/5) / 3 = 34/45 */
  double s[5] = {0.5, 0.9, 0.7, 0.8, 0.6}, l[5] = {1, 1, 1, 0, 0};
  struct se3_cls_metrics m;
  se3_classification_metrics(s, l, 5, &m);
  cr_assert_float_eq(m.pr_auc, 34.0 / 45, EPS, "%.17g", m.pr_auc);
  /* a tie of an active and an inactive at rank 2-3 is one threshold: both
   * 0.8s together give precision 2/3 to the active, whichever comes first:
   * (1 + 2/3) / 2 = 5/6 */
  double t[4] = {0.9, 0.8, 0.8, 0.1}, a[4] = {1, 0, 1, 0}, b[4] = {1, 1, 0, 0};
  se3_classification_metrics(t, a, 4, &m);
  cr_assert_float_eq(m.pr_auc, 5.0 / 6, EPS, "%.17g", m.pr_auc);
  se3_classification_metrics(t, b, 4, &m);
  cr_assert_float_eq(m.pr_auc, 5.0 / 6, EPS, "%.17g", m.pr_auc);
}

Test(metrics, enrichment_factor_on_constructed_screens) {
  /* 1000 molecules, 10 actives, 5 of them in the top 10 (= ceil(1%)):
   * (5 / 10) / (10 / 1000) = 50 */
  enum { M = 1000 };
  static double s[M], l[M];
  for (int i = 0; i < M; i++) {
    s[i] = M - i; /* index order = score order */
    l[i] = (i < 10 && i % 2 == 0) || (i >= 500 && i < 505);
  }
  struct se3_cls_metrics m;
  se3_classification_metrics(s, l, M, &m);
  cr_assert_float_eq(m.ef1, 50, EPS, "%.17g", m.ef1);
  /* n = 150: the top ceil(1.5) = 2; one active of 3 there: (1/2) / (3/150) = 25 */
  for (int i = 0; i < 150; i++)
    l[i] = i == 1 || i == 70 || i == 140;
  se3_classification_metrics(s, l, 150, &m);
  cr_assert_float_eq(m.ef1, 25, EPS, "%.17g", m.ef1);
  /* equal scores: the top 2 are the lowest indices 0 and 1 */
  for (int i = 0; i < 200; i++) {
    s[i] = 1;
    l[i] = i == 0 || i == 150;
  }
  se3_classification_metrics(s, l, 200, &m);
  cr_assert_float_eq(m.ef1, 50, EPS, "%.17g", m.ef1);
}

Test(metrics, roc_auc_and_ap_match_brute_force) {
  enum { M = 301 };
  double s[M], l[M];
  tu_seed(17);
  for (int i = 0; i < M; i++) {
    s[i] = floor(20 * tu_rnd()) / 20; /* plenty of ties */
    l[i] = tu_rnd() < 0.3 + 0.5 * s[i];
  }
  double won = 0, pairs = 0;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < M; j++)
      if (l[i] == 1 && l[j] == 0) {
        pairs++;
        won += s[i] > s[j] ? 1 : s[i] == s[j] ? 0.5 : 0;
      }
  /* AP: each active's precision over everything scored at least as high */
  double ap = 0, P = 0;
  for (int i = 0; i < M; i++) {
    if (l[i] != 1) continue;
    double above = 0, tp = 0;
    for (int j = 0; j < M; j++)
      if (s[j] >= s[i]) {
        above++;
        tp += l[j] == 1;
      }
    ap += tp / above;
    P++;
  }
  struct se3_cls_metrics m;
  se3_classification_metrics(s, l, M, &m);
  cr_assert_float_eq(m.roc_auc, won / pairs, EPS, "%.17g vs %.17g", m.roc_auc, won / pairs);
  cr_assert_float_eq(m.pr_auc, ap / P, EPS, "%.17g vs %.17g", m.pr_auc, ap / P);
  cr_assert(m.roc_auc > 0.6, "the scores are informative (%.3f)", m.roc_auc);
}

Test(metrics, classification_undefined_cases) {
  double s[4] = {0.1, 0.5, 0.2, 0.9}, none[4] = {0, 0, 0, 0}, all[4] = {1, 1, 1, 1};
  struct se3_cls_metrics m;
  se3_classification_metrics(s, none, 4, &m);
  cr_assert(isnan(m.roc_auc) && isnan(m.pr_auc) && isnan(m.ef1), "no actives");
  se3_classification_metrics(s, all, 4, &m);
  cr_assert(isnan(m.roc_auc) && isnan(m.pr_auc) && isnan(m.ef1), "no inactives");
  se3_classification_metrics(s, all, 0, &m);
  cr_assert(isnan(m.roc_auc) && isnan(m.pr_auc) && isnan(m.ef1), "empty");
}

/* EF at a fraction: equal to ef1 at 1 %, counted by hand at 5 %, and the
 * enrichment curve: its points are (taken / n, actives found / P) at each
 * threshold, it ends at (1, 1), and its height at 5 % matches EF5 * 5 % */
Test(metrics, enrichment_factor_at_a_fraction_and_its_curve) {
  enum { N = 200 };
  double s[N], l[N];
  srand(11);
  for (int i = 0; i < N; i++) {
    l[i] = rand() % 10 == 0;
    s[i] = (double)(rand() % 1000) + 300 * l[i] + 1e-6 * i; /* distinct: one point a molecule */
  }
  long P = 0;
  for (int i = 0; i < N; i++)
    P += l[i] > 0.5;
  struct se3_cls_metrics m;
  se3_classification_metrics(s, l, N, &m);
  cr_assert_float_eq(se3_enrichment_factor(s, l, N, 0.01), m.ef1, EPS);
  /* by hand: the 10 best scores (5 % of 200), ties by index */
  int order[N];
  for (int i = 0; i < N; i++)
    order[i] = i;
  for (int i = 0; i < N; i++) /* insertion sort, best first, lower index first on ties */
    for (int j = i; j > 0 && (s[order[j]] > s[order[j - 1]] ||
                              (s[order[j]] == s[order[j - 1]] && order[j] < order[j - 1]));
         j--) {
      int t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  int hits = 0;
  for (int j = 0; j < 10; j++)
    hits += l[order[j]] > 0.5;
  cr_assert_float_eq(se3_enrichment_factor(s, l, N, 0.05), (hits / 10.0) / ((double)P / N), EPS);
  double x[N + 1], y[N + 1];
  int np = se3_enrichment_curve(s, l, N, x, y);
  cr_assert(np > 2 && np <= N + 1);
  cr_assert(x[0] == 0 && y[0] == 0 && x[np - 1] == 1 && y[np - 1] == 1);
  for (int i = 1; i < np; i++)
    cr_assert(x[i] > x[i - 1] && y[i] >= y[i - 1], "not monotone at %d", i);
  /* where 10 molecules have been taken, hits of the P actives were found */
  int at = -1;
  for (int i = 0; i < np; i++)
    if (fabs(x[i] - 10.0 / N) < 1e-12) at = i;
  cr_assert_eq(np, N + 1);
  cr_assert_geq(at, 0);
  cr_assert_float_eq(y[at], (double)hits / P, EPS);
  double none[3] = {0, 0, 0}, sc[3] = {1, 2, 3};
  cr_assert(isnan(se3_enrichment_factor(sc, none, 3, 0.05)));
  cr_assert_eq(se3_enrichment_curve(sc, none, 3, x, y), 0);
  cr_assert(isnan(se3_enrichment_factor(sc, none, 3, 0)), "fraction 0 is undefined");
}

/* ---- bootstrap intervals ---------------------------------------------------- */

/* n molecules, every 10th active; the score is the label plus unit normal
 * noise times `noise` (Box-Muller over tu_rnd, seeded) */
static void noisy_screen(int n, double noise, uint64_t seed, double *s, double *l) {
  tu_seed(seed);
  for (int i = 0; i < n; i++) {
    double u1 = 1 - tu_rnd(), u2 = tu_rnd();
    l[i] = i % 10 == 3;
    s[i] = l[i] + noise * sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
  }
}

Test(metrics, bootstrap_of_a_perfect_ranking_is_one_to_one) {
  enum { N = 300 };
  double s[N], l[N];
  for (int i = 0; i < N; i++) {
    l[i] = i % 7 == 0;
    s[i] = l[i] + 0.001 * i; /* every active above every inactive */
  }
  struct se3_cls_metrics pt, lo, hi;
  se3_classification_metrics(s, l, N, &pt);
  cr_assert_eq(se3_classification_bootstrap(s, l, N, 200, 1, 0.95, &lo, &hi), 0);
  cr_assert_float_eq(lo.roc_auc, 1, EPS);
  cr_assert_float_eq(hi.roc_auc, 1, EPS);
  cr_assert_float_eq(lo.pr_auc, 1, EPS);
  cr_assert_float_eq(hi.pr_auc, 1, EPS);
  /* the top 1 % (3 molecules) are actives in every resample: EF1 = n / P */
  cr_assert_float_eq(lo.ef1, pt.ef1, EPS);
  cr_assert_float_eq(hi.ef1, pt.ef1, EPS);
}

Test(metrics, bootstrap_interval_holds_the_estimate_and_narrows_with_data) {
  enum { SMALL = 200, LARGE = 3200 };
  static double s[LARGE], l[LARGE];
  struct se3_cls_metrics pt, lo, hi, lo2, hi2;
  noisy_screen(SMALL, 1.0, 7, s, l);
  se3_classification_metrics(s, l, SMALL, &pt);
  cr_assert_eq(se3_classification_bootstrap(s, l, SMALL, 1000, 5, 0.95, &lo, &hi), 0);
  cr_log_info("n=%d: ROC-AUC %.3f (%.3f-%.3f), PR-AUC %.3f (%.3f-%.3f), EF1 %.2f (%.2f-%.2f)", SMALL, pt.roc_auc,
              lo.roc_auc, hi.roc_auc, pt.pr_auc, lo.pr_auc, hi.pr_auc, pt.ef1, lo.ef1, hi.ef1);
  cr_assert(lo.roc_auc < pt.roc_auc && pt.roc_auc < hi.roc_auc, "%g (%g-%g)", pt.roc_auc, lo.roc_auc, hi.roc_auc);
  cr_assert(lo.pr_auc < pt.pr_auc && pt.pr_auc < hi.pr_auc, "%g (%g-%g)", pt.pr_auc, lo.pr_auc, hi.pr_auc);
  cr_assert(lo.ef1 <= pt.ef1 && pt.ef1 <= hi.ef1 && lo.ef1 < hi.ef1, "%g (%g-%g)", pt.ef1, lo.ef1, hi.ef1);
  /* the same seed, the same interval; another seed, another */
  cr_assert_eq(se3_classification_bootstrap(s, l, SMALL, 1000, 5, 0.95, &lo2, &hi2), 0);
  cr_assert(lo2.roc_auc == lo.roc_auc && hi2.pr_auc == hi.pr_auc && hi2.ef1 == hi.ef1);
  cr_assert_eq(se3_classification_bootstrap(s, l, SMALL, 1000, 6, 0.95, &lo2, &hi2), 0);
  cr_assert(lo2.roc_auc != lo.roc_auc || hi2.roc_auc != hi.roc_auc);
  /* a narrower level, a narrower interval */
  cr_assert_eq(se3_classification_bootstrap(s, l, SMALL, 1000, 5, 0.5, &lo2, &hi2), 0);
  cr_assert(lo2.roc_auc > lo.roc_auc && hi2.roc_auc < hi.roc_auc);
  /* 16 times the data: the width shrinks by about 4 */
  double w_small = hi.roc_auc - lo.roc_auc;
  noisy_screen(LARGE, 1.0, 7, s, l);
  se3_classification_metrics(s, l, LARGE, &pt);
  cr_assert_eq(se3_classification_bootstrap(s, l, LARGE, 500, 5, 0.95, &lo, &hi), 0);
  double w_large = hi.roc_auc - lo.roc_auc;
  cr_log_info("ROC-AUC width %.4f at n=%d, %.4f at n=%d", w_small, SMALL, w_large, LARGE);
  cr_assert(w_large < 0.4 * w_small, "width %g at n=%d, %g at n=%d", w_small, SMALL, w_large, LARGE);
  /* and it agrees with Hanley and McNeil's standard error of the AUC (1982)
   * to 25 %: the width of a 95 % interval is about 3.92 standard errors */
  double A = pt.roc_auc, P = LARGE / 10, Nn = LARGE - P, q1 = A / (2 - A), q2 = 2 * A * A / (1 + A);
  double se = sqrt((A * (1 - A) + (P - 1) * (q1 - A * A) + (Nn - 1) * (q2 - A * A)) / (P * Nn));
  cr_log_info("AUC %.4f: bootstrap width / 3.92 = %.5f, Hanley-McNeil SE %.5f", A, w_large / 3.92, se);
  cr_assert(fabs(w_large / 3.92 - se) < 0.25 * se, "bootstrap %g, Hanley-McNeil %g", w_large / 3.92, se);
}

Test(metrics, bootstrap_undefined_cases) {
  double s[4] = {1, 2, 3, 4}, none[4] = {0, 0, 0, 0}, all[4] = {1, 1, 1, 1};
  struct se3_cls_metrics lo, hi;
  cr_assert_eq(se3_classification_bootstrap(s, none, 4, 100, 1, 0.95, &lo, &hi), 0);
  cr_assert(isnan(lo.roc_auc) && isnan(hi.pr_auc) && isnan(hi.ef1));
  cr_assert_eq(se3_classification_bootstrap(s, all, 4, 100, 1, 0.95, &lo, &hi), 0);
  cr_assert(isnan(lo.roc_auc) && isnan(hi.roc_auc));
}
