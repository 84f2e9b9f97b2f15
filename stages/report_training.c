/* report_training.c — the report page's Training section (report_page.c
 * writes the rest): each model's test metrics, the learning curves, and the
 * held-out molecules, drawn as a parity plot and residuals (regression) or
 * ROC and enrichment curves (classification); a score-only workdir gets a
 * Model section naming where its scores came from instead. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/metrics.h"
#include "report_training.h"

/* one learning-curve plot: column `col` of metrics for the train and valid
 * splits of every model, by epoch (from 1, as stored); lines break between
 * models */
static void learning_plot(struct rep *r, const char *col, const char *title, const char *ylabel) {
  struct series s[2] = {{0}};
  static const char *const split[2] = {"train", "valid"};
  for (int k = 0; k < 2; k++) {
    sqlite3_stmt *st = prep(r,
                            "SELECT model, epoch + %d, \"%w\" FROM metrics WHERE split = %Q AND \"%w\" IS NOT NULL "
                            "ORDER BY model, epoch",
                            r->epoch_from0, col, split[k], col);
    char prev[128] = "";
    while (row(r, st)) {
      if (prev[0] && strcmp(prev, col_text(st, 0)) && series_add(&s[k], NAN, NAN)) r->failed = 1;
      snprintf(prev, sizeof prev, "%s", col_text(st, 0));
      if (series_add(&s[k], (double)sqlite3_column_int64(st, 1), sqlite3_column_double(st, 2))) r->failed = 1;
    }
    sqlite3_finalize(st);
  }
  if (s[0].n + s[1].n > 0 && !r->failed) {
    double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
    for (int k = 0; k < 2; k++) {
      minmax(s[k].x, s[k].n, &xlo, &xhi);
      minmax(s[k].y, s[k].n, &ylo, &yhi);
    }
    struct svg_plot p = plot0;
    p.title = title;
    p.x = axis(xlo, xhi, "epoch");
    p.x.whole = 1;
    p.y = axis(ylo, yhi, ylabel);
    char desc[256];
    snprintf(desc, sizeof desc, "%s%s%s%s, one point an epoch%s", ylabel,
             s[0].n ? " for the training split (solid line, circles)" : "", s[0].n && s[1].n ? " and" : "",
             s[1].n ? " for the validation split (dashed line, squares)" : "",
             s[0].n ? "" : " (not measured on the training split)");
    figure_open(r);
    svg_plot_begin(&r->h, &p, desc);
    svg_line(&r->h, &p, s[0].x, s[0].y, s[0].n, "s0 line", NULL);
    svg_line(&r->h, &p, s[1].x, s[1].y, s[1].n, "s1 line", "6 4");
    char cls[2][96];
    snprintf(cls[0], sizeof cls[0], "s0 pts-train-%s", col);
    snprintf(cls[1], sizeof cls[1], "s1 pts-valid-%s", col);
    svg_points(&r->h, &p, s[0].x, s[0].y, s[0].n, cls[0], SVG_CIRCLE);
    svg_points(&r->h, &p, s[1].x, s[1].y, s[1].n, cls[1], SVG_SQUARE);
    /* the legend names the splits drawn (classification has no training ROC-AUC) */
    struct svg_legend_entry le[2];
    int nl = 0;
    if (s[0].n) le[nl++] = (struct svg_legend_entry){"train", "s0", 1, SVG_CIRCLE, NULL};
    if (s[1].n) le[nl++] = (struct svg_legend_entry){"valid", "s1", 1, SVG_SQUARE, "6 4"};
    svg_legend(&r->h, &p, le, nl, 2); /* the curves fall: their top right is empty */
    svg_plot_end(&r->h);
    figure_close(r, desc);
  }
  series_free(&s[0]);
  series_free(&s[1]);
}

/* bins of the values of v[0..n) */
static void bin(const double *v, int n, int bins, double *count, double *lo, double *hi) {
  *lo = INFINITY;
  *hi = -INFINITY;
  minmax(v, n, lo, hi);
  if (!(*hi > *lo)) {
    *lo -= 0.5;
    *hi += 0.5;
  }
  memset(count, 0, (size_t)bins * sizeof *count);
  for (int i = 0; i < n; i++) {
    if (!isfinite(v[i])) continue;
    int b = (int)((v[i] - *lo) / (*hi - *lo) * bins);
    count[b < 0 ? 0 : b >= bins ? bins - 1 : b]++;
  }
}

/* ---- the held-out molecules ----------------------------------------------- */

/* The test split's model: the first (by name) of the models with test
 * predictions, its task and target, how many predictions it has (returned;
 * 0: none) and how many models have some (*members: an ensemble's). */
static int test_model(struct rep *r, char *model, size_t model_n, char *task, size_t task_n, char *target,
                      size_t target_n, int *members) {
  sqlite3_stmt *st = prep(r, "SELECT p.model, m.task, m.target, count(*) FROM predictions p JOIN models m ON "
                             "m.id = p.model WHERE p.split = 'test' GROUP BY p.model ORDER BY p.model");
  int n = 0;
  while (row(r, st)) {
    if (!(*members)++) {
      snprintf(model, model_n, "%s", col_text(st, 0));
      snprintf(task, task_n, "%s", col_text(st, 1));
      snprintf(target, target_n, "%s", col_text(st, 2));
      n = sqlite3_column_int(st, 3);
    }
  }
  sqlite3_finalize(st);
  return n;
}

/* Up to n labels into y and predictions into p: model's own, or for an
 * ensemble the mean of the members' for each molecule every member
 * predicted, in the first member's order. Returns how many were read. */
static int test_read(struct rep *r, const char *model, int members, double *y, double *p, int n) {
  sqlite3_stmt *st;
  int k = 0;
  if (members > 1) /* the molecules every member predicted, in the first member's order */
    st = prep(r,
              "SELECT min(label), avg(value) FROM predictions WHERE split = 'test' GROUP BY mol_id "
              "HAVING count(*) = %d ORDER BY min(rowid)",
              members);
  else
    st = prep(r, "SELECT label, value FROM predictions WHERE model = %Q AND split = 'test' ORDER BY rowid", model);
  while (k < n && row(r, st)) {
    y[k] = sqlite3_column_double(st, 0);
    p[k] = sqlite3_column_double(st, 1);
    k++;
  }
  sqlite3_finalize(st);
  return k;
}

/* Regression: the metrics line, the parity plot (a sample beyond
 * REPORT_MAX_POINTS) and the residuals' histogram. p is overwritten with
 * the residuals. */
static void test_regression(struct rep *r, const char *target, const double *y, double *p, int n) {
  char title[512], desc[1024];
  struct se3_reg_metrics m;
  se3_regression_metrics(p, y, n, &m);
  P("<p class=\"metrics\">MAE <b>%.4g</b> &middot; RMSE <b>%.4g</b> &middot; R&sup2; <b>%.3f</b> &middot; "
    "Spearman <b>%.3f</b> (in ",
    m.mae, m.rmse, m.r2, m.spearman);
  esc(r, target);
  P("'s units)</p>\n<div class=\"row\">");
  double lo = INFINITY, hi = -INFINITY;
  minmax(y, n, &lo, &hi);
  minmax(p, n, &lo, &hi);
  struct svg_plot pl = plot0;
  pl.width = PH + 60; /* square data area */
  snprintf(title, sizeof title, "Parity: %s", target);
  pl.title = title;
  char xl[200], yl[200];
  snprintf(xl, sizeof xl, "measured %s (its units)", target);
  snprintf(yl, sizeof yl, "predicted %s", target);
  pl.x = axis(lo, hi, xl);
  pl.y = pl.x;
  pl.y.label = yl;
  int stride = n > REPORT_MAX_POINTS ? (n + REPORT_MAX_POINTS - 1) / REPORT_MAX_POINTS : 1, m_pts = 0;
  double *sx = malloc((size_t)n * sizeof *sx), *sy = malloc((size_t)n * sizeof *sy);
  for (int i = 0; sx && sy && i < n; i += stride) {
    sx[m_pts] = y[i];
    sy[m_pts++] = p[i];
  }
  snprintf(desc, sizeof desc,
           "Each held-out molecule's prediction against its label (%d points%s); the dashed diagonal is a perfect "
           "prediction.",
           m_pts, stride > 1 ? ", an evenly spaced sample" : "");
  figure_open(r);
  svg_plot_begin(&r->h, &pl, desc);
  double dx[2] = {pl.x.lo, pl.x.hi};
  svg_line(&r->h, &pl, dx, dx, 2, "diag", "4 4");
  if (sx && sy) svg_points(&r->h, &pl, sx, sy, m_pts, "s0 pts-parity", SVG_CIRCLE);
  svg_plot_end(&r->h);
  figure_close(r, desc);
  free(sx);
  free(sy);
  int bins = r->o->bins;
  double *count = malloc((size_t)bins * sizeof *count), rlo, rhi;
  for (int i = 0; i < n; i++)
    p[i] -= y[i];
  if (count) {
    bin(p, n, bins, count, &rlo, &rhi);
    snprintf(title, sizeof title, "Residuals: %s", target);
    snprintf(desc, sizeof desc, "Prediction minus label of the %d held-out molecules, in %d bins.", n, bins);
    histogram(r, count, bins, rlo, rhi, title, "prediction - label (the target's units)", "s0 bars-residual", desc);
  }
  free(count);
  P("</div>\n");
}

/* The enrichment curve (x, y fractions, np points from (0, 0)) of n
 * held-out molecules, in percent on a log x axis: what a screen keeps is
 * its first percent or so, which a linear axis squeezes into a few pixels.
 * The axis starts at the decade below one molecule's share (0.1 % at most);
 * the dashed curve is a random ranking (y = x, curved on a log axis). */
static void enrichment_plot(struct rep *r, const char *target, double *x, double *y, int np, int n, double ef1,
                            double ef5) {
  char title[512], desc[1024];
  double lo = pow(10, floor(log10(100.0 / (n > 0 ? n : 1))));
  if (lo > 0.1) lo = 0.1;
  for (int i = 0; i < np; i++) {
    x[i] *= 100;
    y[i] *= 100;
  }
  enum { NR = 64 };
  double rx[NR];
  for (int i = 0; i < NR; i++)
    rx[i] = lo * pow(100 / lo, (double)i / (NR - 1));
  struct svg_plot pl = plot0;
  pl.width = PH + 60;
  snprintf(title, sizeof title, "Enrichment: %s", target);
  pl.title = title;
  pl.x = (struct svg_axis){.lo = lo, .hi = 100, .log10 = 1, .label = "molecules screened, best scores first (%, log)"};
  pl.y = (struct svg_axis){.lo = 0, .hi = 100, .label = "actives found (%)"};
  snprintf(desc, sizeof desc,
           "The share of the held-out actives among the best-scored molecules, as more are taken (%d points; the x "
           "axis is logarithmic, so the first percent is as wide as the rest); EF1%% %.2f, EF5%% %.2f. The dashed "
           "curve is a random ranking.",
           np, ef1, ef5);
  figure_open(r);
  svg_plot_begin(&r->h, &pl, desc);
  svg_line(&r->h, &pl, rx, rx, NR, "diag", "4 4");
  svg_line(&r->h, &pl, x, y, np, "s1 line", NULL);
  svg_plot_end(&r->h);
  figure_close(r, desc);
}

/* "(lo–hi)" in out, each end by fmt; "" when either is not a number */
static const char *interval(char *out, size_t n, double lo, double hi, const char *fmt) {
  char a[64], b[64];
  out[0] = 0;
  if (!isfinite(lo) || !isfinite(hi)) return out;
  snprintf(a, sizeof a, fmt, lo);
  snprintf(b, sizeof b, fmt, hi);
  snprintf(out, n, "(%s&ndash;%s)", a, b);
  return out;
}

/* Classification: the metrics line, the ROC curve and the enrichment
 * curve (or a note when the split holds one class only). */
static void test_classification(struct rep *r, const char *target, const double *y, const double *p, int n) {
  char title[512], desc[1024];
  struct se3_cls_metrics m, lo, hi;
  se3_classification_metrics(p, y, n, &m);
  double ef5 = se3_enrichment_factor(p, y, n, 0.05);
  if (se3_classification_bootstrap(p, y, n, SE3_BOOTSTRAP_RESAMPLES, SE3_BOOTSTRAP_SEED, SE3_BOOTSTRAP_LEVEL, &lo,
                                   &hi)) {
    r->failed = 1;
    se3_error_set(&r->err, SE3_ERR_MEMORY, "out of memory for the bootstrap of %d predictions", n);
    return;
  }
  char ci[3][160];
  P("<p class=\"metrics\">ROC-AUC <b>%.3f</b> %s &middot; PR-AUC <b>%.3f</b> %s &middot; EF1%% <b>%.2f</b> %s "
    "&middot; EF5%% <b>%.2f</b></p>\n",
    m.roc_auc, interval(ci[0], sizeof ci[0], lo.roc_auc, hi.roc_auc, "%.3f"), m.pr_auc,
    interval(ci[1], sizeof ci[1], lo.pr_auc, hi.pr_auc, "%.3f"), m.ef1,
    interval(ci[2], sizeof ci[2], lo.ef1, hi.ef1, "%.2f"), ef5);
  P("<p>In brackets: 95&nbsp;%% bootstrap intervals (%d resamples of the held-out molecules, actives and inactives "
    "drawn apart so that each keeps its count; the 2.5th and 97.5th percentiles).</p>\n<div class=\"row\">",
    SE3_BOOTSTRAP_RESAMPLES);
  double *fx = malloc((size_t)(n + 2) * sizeof *fx), *fy = malloc((size_t)(n + 2) * sizeof *fy);
  int np = fx && fy ? se3_roc_curve(p, y, n, fx, fy) : -1;
  struct svg_plot pl = plot0;
  pl.width = PH + 60;
  pl.x = (struct svg_axis){.lo = 0, .hi = 1, .label = "false positive rate (fraction of inactives)"};
  pl.y = (struct svg_axis){.lo = 0, .hi = 1, .label = "true positive rate (fraction of actives)"};
  double dx[2] = {0, 1};
  if (np > 0) {
    snprintf(title, sizeof title, "ROC: %s", target);
    pl.title = title;
    snprintf(desc, sizeof desc,
             "True against false positive rate of the held-out molecules, one point a score threshold (%d points); "
             "area %.3f. The dashed diagonal is a random ranking.",
             np, m.roc_auc);
    figure_open(r);
    svg_plot_begin(&r->h, &pl, desc);
    svg_line(&r->h, &pl, dx, dx, 2, "diag", "4 4");
    svg_line(&r->h, &pl, fx, fy, np, "s0 line", NULL);
    svg_points(&r->h, &pl, fx, fy, np, "s0 pts-roc", SVG_CIRCLE);
    svg_plot_end(&r->h);
    figure_close(r, desc);
  }
  np = fx && fy ? se3_enrichment_curve(p, y, n, fx, fy) : -1;
  if (np > 0) enrichment_plot(r, target, fx, fy, np, n, m.ef1, ef5);
  if (np < 0) {
    r->failed = 1;
    se3_error_set(&r->err, SE3_ERR_MEMORY, "out of memory for the curves of %d predictions", n);
  }
  if (np == 0) P("<p>The test split holds one class only: no ROC or enrichment curve.</p>");
  free(fx);
  free(fy);
  P("</div>\n");
}

/* the held-out molecules: the one model's predictions, or an ensemble's
 * mean (every member holds out the same molecules; scores are the mean) */
static void test_split(struct rep *r) {
  if (!has_table(r, "predictions")) {
    P("<p>This database predates the <code>predictions</code> table (schema version 5): run the train stage again "
      "with this se3screen to see the held-out molecules' plots.</p>\n");
    return;
  }
  char model[128] = "", task[32] = "", target[128] = "";
  int members = 0;
  int n = test_model(r, model, sizeof model, task, sizeof task, target, sizeof target, &members);
  if (n == 0) {
    P("<p>No held-out (test split) predictions are recorded.</p>\n");
    return;
  }
  double *y = malloc((size_t)n * sizeof *y), *p = malloc((size_t)n * sizeof *p);
  if (!y || !p) {
    free(y);
    free(p);
    r->failed = 1;
    se3_error_set(&r->err, SE3_ERR_MEMORY, "out of memory for %d predictions", n);
    return;
  }
  n = test_read(r, model, members, y, p, n);
  int classify = !strcmp(task, "classification");
  if (members > 1) {
    P("<h3>Held-out molecules (test split) of the ensemble: %d</h3>\n", n);
    P("<p>Each molecule's prediction is the mean of the %d members' (as scores are); the table above has each "
      "member's own.</p>\n",
      members);
  } else {
    P("<h3>Held-out molecules (test split) of ");
    esc(r, model);
    P(": %d</h3>\n", n);
  }
  if (!classify)
    test_regression(r, target, y, p, n);
  else
    test_classification(r, target, y, p, n);
  free(y);
  free(p);
}

/* No model trained in this workdir: a score-only workflow scores with a
 * checkpoint trained elsewhere (or nothing has been trained yet). The
 * section says so and names the models the scores came from, with their
 * content hash where recorded; no learning curve or test table (they would
 * be empty plots). */
static void section_no_training(struct rep *r) {
  P("<section id=\"training\"><h2>Model</h2>\n");
  int scored = has_table(r, "scores") && q_double(r, 0, "SELECT count(*) FROM (SELECT 1 FROM scores LIMIT 1)") > 0;
  if (!scored) {
    P("<p>No model was trained in this workdir, and nothing has been scored yet.</p></section>\n");
    return;
  }
  P("<p>No model was trained in this workdir: the scores come from a model trained elsewhere "
    "(<code>stages.score.checkpoint</code>), so there are no learning curves or test metrics here; "
    "they are in the report of the workdir that trained it.</p>\n");
  P("<table class=\"grid\"><thead><tr><th scope=\"col\">model</th><th scope=\"col\">target</th>"
    "<th scope=\"col\">checkpoint hash</th><th scope=\"col\">scores</th></tr></thead><tbody>\n");
  sqlite3_stmt *st =
      prep(r, "SELECT model, target, %s, count(*) FROM scores GROUP BY 1, 2, 3 ORDER BY 1, 2, 3 LIMIT 20",
           has_column(r, "scores", "model_hash") ? "model_hash" : "NULL");
  while (row(r, st)) {
    P("<tr>");
    td(r, NULL, col_text(st, 0));
    td(r, NULL, col_text(st, 1));
    td(r, "arch", sqlite3_column_type(st, 2) == SQLITE_NULL ? "(not recorded)" : col_text(st, 2));
    P("<td class=\"n\">%lld</td></tr>\n", (long long)sqlite3_column_int64(st, 3));
  }
  sqlite3_finalize(st);
  P("</tbody></table></section>\n");
}

/* The splits as train drew them: molecules, compounds and actives of each,
 * and a warning for a split of fewer than 20 actives (train logs the same). */
static void evaluation(struct rep *r, int classify) {
  if (!has_table(r, "split_counts") || q_double(r, 0, "SELECT count(*) FROM split_counts") == 0) return;
  P("<h3>Evaluation: the splits</h3>\n<table class=\"grid\"><thead><tr><th scope=\"col\">split</th>"
    "<th scope=\"col\">molecules</th><th scope=\"col\">compounds</th>");
  if (classify) P("<th scope=\"col\">actives</th><th scope=\"col\">active compounds</th>");
  P("</tr></thead><tbody>\n");
  sqlite3_stmt *st = prep(r, "SELECT split, molecules, compounds, actives, active_compounds FROM split_counts "
                             "ORDER BY CASE split WHEN 'train' THEN 0 WHEN 'valid' THEN 1 ELSE 2 END");
  char few[3][160];
  int n_few = 0, few_train[3];
  while (row(r, st)) {
    P("<tr><th scope=\"row\">");
    esc(r, col_text(st, 0));
    P("</th>");
    for (int c = 1; c < (classify ? 5 : 3); c++) {
      P("<td class=\"n\">");
      col_num(r, st, c, "%.0f");
      P("</td>");
    }
    P("</tr>\n");
    int actives = sqlite3_column_int(st, 3);
    if (classify && sqlite3_column_int(st, 1) > 0 && actives < 20 && n_few < 3) {
      few_train[n_few] = !strcmp(col_text(st, 0), "train");
      snprintf(few[n_few++], sizeof few[0], "the %s split holds %d active%s (%d compound%s)", col_text(st, 0), actives,
               actives == 1 ? "" : "s", sqlite3_column_int(st, 4), sqlite3_column_int(st, 4) == 1 ? "" : "s");
    }
  }
  sqlite3_finalize(st);
  P("</tbody></table>\n<p>A compound is an InChIKey's first block (the skeleton: stereoisomers, charge and "
    "protonation states are one compound); random, scaffold and cluster splits keep each compound's records in one "
    "split.</p>\n");
  for (int k = 0; k < n_few; k++) {
    P("<p class=\"note warn\">Warning: ");
    esc(r, few[k]);
    P(", fewer than 20: %s.</p>\n", few_train[k] ? "few for the model to learn actives from"
                                                 : "its metrics rest on them alone; read them with their intervals");
  }
}

void report_section_training(struct rep *r) {
  /* (schema version < 3 has neither table) */
  if (!has_table(r, "models") || !has_table(r, "metrics") ||
      (q_double(r, 0, "SELECT count(*) FROM models") == 0 && q_double(r, 0, "SELECT count(*) FROM metrics") == 0)) {
    section_no_training(r);
    return;
  }
  int classify = q_double(r, 0, "SELECT count(*) FROM models WHERE task = 'classification'") > 0;
  P("<section id=\"training\"><h2>Training</h2>\n");
  /* test metrics of every model */
  int ci = has_column(r, "metrics", "roc_auc_lo"); /* schema version 12 on */
  sqlite3_stmt *st =
      prep(r,
           "SELECT model, epoch + %d, mae, rmse, r2, spearman, roc_auc, pr_auc, ef1, %s FROM metrics "
           "WHERE split = 'test' ORDER BY model",
           r->epoch_from0,
           ci ? "roc_auc_lo, roc_auc_hi, pr_auc_lo, pr_auc_hi, ef1_lo, ef1_hi" : "NULL, NULL, NULL, NULL, NULL, NULL");
  int header = 0;
  while (row(r, st)) {
    if (!header++) {
      P("<table class=\"grid\"><thead><tr><th scope=\"col\">model</th><th scope=\"col\">best epoch</th>");
      if (classify)
        P("<th scope=\"col\">test ROC-AUC</th><th scope=\"col\">test PR-AUC</th><th scope=\"col\">test EF1%%</th>");
      else
        P("<th scope=\"col\">test MAE</th><th scope=\"col\">test RMSE</th><th scope=\"col\">test R&sup2;</th>"
          "<th scope=\"col\">test Spearman</th>");
      P("</tr></thead><tbody>\n");
    }
    P("<tr><td>");
    esc(r, col_text(st, 0));
    if (!strcmp(col_text(st, 0), "ensemble")) /* its members' mean: no epoch of its own */
      P("</td><td class=\"n\">&mdash;</td>");
    else
      P("</td><td class=\"n\">%lld</td>", (long long)sqlite3_column_int64(st, 1));
    for (int c = classify ? 6 : 2; c < (classify ? 9 : 6); c++) {
      P("<td class=\"n\">");
      col_num(r, st, c, !classify ? "%.4g" : c == 8 ? "%.2f" : "%.3f");
      int lo = 2 * c - 3; /* roc_auc (6): its interval in 9 and 10, pr_auc's in 11 and 12, ef1's in 13 and 14 */
      if (classify && sqlite3_column_type(st, lo) != SQLITE_NULL) {
        char buf[160];
        P(" %s", interval(buf, sizeof buf, sqlite3_column_double(st, lo), sqlite3_column_double(st, lo + 1),
                          c == 8 ? "%.2f" : "%.3f"));
      }
      P("</td>");
    }
    P("</tr>\n");
  }
  sqlite3_finalize(st);
  if (header) P("</tbody></table>\n");
  if (header && classify && ci &&
      q_double(r, 0, "SELECT count(*) FROM metrics WHERE split = 'test' AND roc_auc_lo IS NOT NULL") > 0)
    P("<p>In brackets: each test metric's 95&nbsp;%% bootstrap interval (%d resamples, actives and inactives drawn "
      "apart; the 2.5th and 97.5th percentiles).</p>\n",
      SE3_BOOTSTRAP_RESAMPLES);
  evaluation(r, classify);
  P("<div class=\"row\">");
  learning_plot(r, "loss", "Loss per epoch", classify ? "binary cross-entropy" : "loss (standardised target)");
  if (classify)
    learning_plot(r, "roc_auc", "ROC-AUC per epoch", "ROC-AUC");
  else
    learning_plot(r, "mae", "MAE per epoch", "mean absolute error");
  P("</div>\n");
  test_split(r);
  P("</section>\n");
}
