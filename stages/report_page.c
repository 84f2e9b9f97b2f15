/* report_page.c — report.html: what a screen did and found, as one page a chemist
 * opens in a browser or attaches to an e-mail.
 *
 * Everything comes from the result database: the run (workflow, inputs with
 * their molecules and rejects, the model, wall time per stage as a
 * timeline), the learning curves (metrics; a score-only run, which trains
 * nothing, gets a note naming the model its scores came from instead), the
 * held-out molecules (predictions: parity plot and residuals for
 * regression, ROC and enrichment curves for classification), the score
 * distribution of each scored set
 * (and the ensemble's spread against the score), the docking scores and
 * active learning's rounds (what each picked, how well, by which models),
 * the top hits with a 2D
 * depiction each (Open Babel's drawing of their SMILES), and the rejects
 * grouped by reason. The page is self-contained: inline SVG drawn by
 * common/svg.h and inline CSS; no script, font, image or style is fetched
 * from anywhere. Its size does not grow with the library: histograms are
 * binned in SQL, scatter plots are capped (a stated, evenly spaced sample
 * beyond REPORT_MAX_POINTS), and the hits table holds `top` rows.
 *
 * The report stage (stages/report.c, after the last stage that runs: any
 * workflow may end with it) writes WORKDIR/report.html
 * with report_write, through a temporary file renamed over it
 * (common/atomic_file.h); `se3screen report DB|WORKDIR` writes the same page
 * from the database `report` opened read-only (pipeline/ledger.h's
 * ledger_open_ro, the one read-only opener) with report_write too.
 *
 * The Training section is in report_training.c (report_training.h); the
 * SQL and page helpers both files call are in report_html.h, below both.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "chem/obbridge.h"
#include "common/svg.h"
#include "common/atomic_file.h"
#include "report_page.h"
#include "stage.h"
#include "report_html.h"
#include "report_training.h"

/* ---- times ---------------------------------------------------------------- */

/* parses "YYYY-MM-DDTHH:MM:SS[.fff]Z" (how the store writes times) as seconds */
static double iso_seconds(const char *t) {
  struct tm tm;
  memset(&tm, 0, sizeof tm);
  double frac = 0;
  int y, mo, d, h, mi, n = 0;
  double s;
  if (!t || sscanf(t, "%d-%d-%d%*c%d:%d:%lf%n", &y, &mo, &d, &h, &mi, &s, &n) < 6) return NAN;
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = (int)s;
  frac = s - (int)s;
  return (double)timegm(&tm) + frac;
}

static void duration(char *out, size_t n, double s) {
  if (!isfinite(s) || s < 0)
    snprintf(out, n, "?");
  else if (s < 1)
    snprintf(out, n, "under 1 s"); /* the ledger's times are to the second */
  else if (s < 60)
    snprintf(out, n, "%.0f s", s);
  else if (s < 3600)
    snprintf(out, n, "%d min %02d s", (int)(s / 60), (int)fmod(s, 60));
  else
    snprintf(out, n, "%d h %02d min", (int)(s / 3600), (int)fmod(s / 60, 60));
}

/* ---- the run -------------------------------------------------------------- */

/* What the bounds of chem/shape.h made of the molecules' 3D shapes:
 * generated ones fixed, those refused (generated ones no fix saved, files'
 * own), files' own generated instead (molecules.shape, schema version 14;
 * an older database, read as it is, has nothing to count). */
static void section_shapes(struct rep *r) {
  if (!has_column(r, "molecules", "shape")) return;
  sqlite3_stmt *st = prep(r, "SELECT sum(shape = 'fixed'), sum(shape = 'regenerated'), sum(shape IS NULL), "
                             "(SELECT count(*) FROM rejects WHERE stage = 'ingest' AND (reason = '3D generation: "
                             "shape out of bounds' OR reason GLOB 'input shape: *')) FROM molecules");
  if (row(r, st)) {
    long long fixed = sqlite3_column_int64(st, 0), again = sqlite3_column_int64(st, 1),
              before = sqlite3_column_int64(st, 2), refused = sqlite3_column_int64(st, 3);
    P("<p>3D shapes: %lld fixed after the bounds check (every bond, angle and aromatic ring: chem/shape.h), %lld "
      "refused; %lld input shape%s regenerated (<code>stages.ingest.input_shape</code>)",
      fixed, refused, again, again == 1 ? "" : "s");
    if (before) P("; %lld molecule%s stored before shapes were counted", before, before == 1 ? "" : "s");
    P(".</p>\n");
  }
  sqlite3_finalize(st);
}

/* Stereo the inputs left unspecified, which the generated shapes fixed
 * (molecules.stereo_free and isomer_smiles, schema version 16): said where
 * there is any, as ingest's log says it. */
static void section_stereo(struct rep *r) {
  if (!has_column(r, "molecules", "stereo_free")) return;
  sqlite3_stmt *st = prep(r, "SELECT count(*), sum(stereo_free) FROM molecules WHERE stereo_free > 0");
  if (row(r, st) && sqlite3_column_int64(st, 0) > 0) {
    long long n = sqlite3_column_int64(st, 0), units = sqlite3_column_int64(st, 1);
    P("<p>Stereo: %lld molecule%s had unspecified stereo (%lld centre%s/bond%s); each is scored and docked as the "
      "isomer its 3D shape has (<code>isomer_smiles</code> in the hits).</p>\n",
      n, n == 1 ? "" : "s", units, units == 1 ? "" : "s", units == 1 ? "" : "s");
  }
  sqlite3_finalize(st);
}

static void section_summary(struct rep *r, const char *db_label) {
  sqlite3_stmt *st = prep(r, "SELECT (SELECT value FROM meta WHERE key = 'workflow'), "
                             "(SELECT value FROM meta WHERE key = 'sets'), count(*), min(started), max(finished), "
                             "(SELECT version FROM runs ORDER BY id DESC LIMIT 1), "
                             "(SELECT group_concat(DISTINCT host) FROM runs) FROM runs");
  P("<section id=\"summary\"><h2>Run summary</h2>\n<table class=\"kv\">\n");
  P("<tr><th scope=\"row\">database</th><td>");
  esc(r, db_label);
  P("</td></tr>\n");
  if (row(r, st)) {
    P("<tr><th scope=\"row\">workflow</th><td>");
    esc(r, col_text(st, 0));
    P("</td></tr>\n");
    if (col_text(st, 1)[0]) {
      P("<tr><th scope=\"row\">overrides (--set)</th><td><pre>");
      esc(r, col_text(st, 1));
      P("</pre></td></tr>\n");
    }
    P("<tr><th scope=\"row\">runs</th><td>%lld: the first started ", (long long)sqlite3_column_int64(st, 2));
    esc(r, col_text(st, 3));
    if (col_text(st, 4)[0]) {
      P(", the last to finish ended ");
      esc(r, col_text(st, 4));
    }
    /* runs not finished, but this process's own (the report stage writes
     * the page as its run's last step: that run is not over yet, and a
     * finished workflow's page said "1 still running or killed") */
    char host[256] = "?";
    gethostname(host, sizeof host);
    host[sizeof host - 1] = 0;
    long long running =
        (long long)q_double(r, 0, "SELECT count(*) FROM runs WHERE status = 'running' AND NOT (pid = %d AND host = %Q)",
                            (int)getpid(), host);
    if (running) P(" (%lld other run%s still running, or killed)", running, running == 1 ? "" : "s");
    P("</td></tr>\n");
    P("<tr><th scope=\"row\">se3screen</th><td>");
    esc(r, col_text(st, 5));
    P("</td></tr>\n<tr><th scope=\"row\">hosts</th><td>");
    esc(r, col_text(st, 6));
    P("</td></tr>\n");
  }
  sqlite3_finalize(st);
  P("</table>\n");

  /* inputs: molecules stored and rejected, per set and file */
  P("<h3>Inputs</h3>\n<table class=\"grid\"><thead><tr><th scope=\"col\">set</th><th scope=\"col\">file</th>"
    "<th scope=\"col\">molecules stored</th><th scope=\"col\">rejected at ingest</th></tr></thead><tbody>\n");
  st = prep(r, "SELECT set_name, source_file, sum(n), sum(rej) FROM ("
               "SELECT set_name, source_file, count(*) AS n, 0 AS rej FROM molecules GROUP BY 1, 2 "
               "UNION ALL SELECT set_name, source_file, 0, count(*) FROM rejects WHERE stage = 'ingest' GROUP BY 1, 2"
               ") GROUP BY 1, 2 ORDER BY 1, 2");
  while (row(r, st)) {
    P("<tr>");
    td(r, NULL, col_text(st, 0));
    td(r, NULL, col_text(st, 1));
    P("<td class=\"n\">%lld</td><td class=\"n\">%lld</td></tr>\n", (long long)sqlite3_column_int64(st, 2),
      (long long)sqlite3_column_int64(st, 3));
  }
  sqlite3_finalize(st);
  P("</tbody></table>\n");
  section_shapes(r);
  section_stereo(r);

  /* the models (none before schema version 3) */
  st = !has_table(r, "models")
           ? NULL
           : prep(r,
                  "SELECT id, target, task, arch, n_train, n_valid, n_test, best_epoch + %d, checkpoint, %s FROM "
                  "models ORDER BY id",
                  r->epoch_from0, has_column(r, "models", "device") ? "device" : "NULL");
  int header = 0;
  while (row(r, st)) {
    if (!header++)
      P("<h3>Models</h3>\n<table class=\"grid\"><thead><tr><th scope=\"col\">model</th><th scope=\"col\">target</th>"
        "<th scope=\"col\">task</th><th scope=\"col\">train / valid / test molecules</th>"
        "<th scope=\"col\">best epoch</th><th scope=\"col\">trained on</th><th scope=\"col\">architecture</th>"
        "</tr></thead><tbody>\n");
    P("<tr>");
    for (int c = 0; c < 3; c++)
      td(r, NULL, col_text(st, c));
    P("<td class=\"n\">%lld / %lld / %lld</td><td class=\"n\">%lld</td>", (long long)sqlite3_column_int64(st, 4),
      (long long)sqlite3_column_int64(st, 5), (long long)sqlite3_column_int64(st, 6),
      (long long)sqlite3_column_int64(st, 7));
    td(r, NULL, sqlite3_column_type(st, 9) == SQLITE_NULL ? "(not recorded)" : col_text(st, 9));
    td(r, "arch", col_text(st, 3));
    P("</tr>\n");
  }
  sqlite3_finalize(st);
  if (header) P("</tbody></table>\n");
  P("</section>\n");
}

/* a stage's time summed over its runs: to the tenth of a second under a
 * minute (the ledger's times of its runs are not rounded to the second) */
static void run_time(char *out, size_t n, double s) {
  if (isfinite(s) && s >= 0 && s < 60)
    snprintf(out, n, "%.1f s", s);
  else
    duration(out, n, s);
}

/* Each stage's time summed over every run of the workdir (the ledger's
 * stage_times: stopped and failed runs too, whose chunk cut short left no
 * ledger row), beside what the ledger says of its chunks: the stages of
 * its chunks (name, span, nch, ...: n of them) and those only its times
 * have. */
struct tl_stage {
  char name[32];
  double span, run_s;
  long long nch, nok, nrej, nsh, runs, cut;
};

static void timeline_table(struct rep *r, struct tl_stage *t, int n, int max) {
  const struct stage_ledger *l = r->o->ledger;
  int none = !l;
  sqlite3_stmt *st = ledger_rows(r, l && !r->failed ? l->stage_times(r->db, &none) : NULL, none);
  while (row(r, st)) {
    int i = 0;
    while (i < n && strcmp(t[i].name, col_text(st, 0)))
      i++;
    if (i == n && n == max) continue;
    if (i == n) {
      memset(&t[n], 0, sizeof t[n]);
      snprintf(t[n].name, sizeof t[n].name, "%s", col_text(st, 0));
      t[n++].span = NAN;
    }
    t[i].run_s = sqlite3_column_double(st, 1);
    t[i].runs = sqlite3_column_int64(st, 2);
    t[i].cut = sqlite3_column_int64(st, 3);
  }
  sqlite3_finalize(st);
  P("<table class=\"grid\"><thead><tr><th scope=\"col\">stage</th><th scope=\"col\">time, every run</th>"
    "<th scope=\"col\">runs</th><th scope=\"col\">first chunk to last commit</th>"
    "<th scope=\"col\">chunks</th><th scope=\"col\">shards</th><th scope=\"col\">stored</th>"
    "<th scope=\"col\">rejected</th></tr></thead><tbody>\n");
  for (int i = 0; i < n; i++) {
    char d[64], run_s[64], runs[64];
    duration(d, sizeof d, t[i].span);
    run_time(run_s, sizeof run_s, t[i].runs ? t[i].run_s : NAN);
    if (!t[i].runs)
      snprintf(runs, sizeof runs, "not recorded");
    else if (t[i].cut)
      snprintf(runs, sizeof runs, "%lld (%lld stopped or failed)", t[i].runs, t[i].cut);
    else
      snprintf(runs, sizeof runs, "%lld", t[i].runs);
    P("<tr><td>");
    esc(r, t[i].name);
    P("</td><td class=\"n\">%s</td><td class=\"n\">%s</td><td class=\"n\">%s</td><td class=\"n\">%lld</td>"
      "<td class=\"n\">%lld</td><td class=\"n\">%lld</td><td class=\"n\">%lld</td></tr>\n",
      run_s, runs, d, t[i].nch, t[i].nsh, t[i].nok, t[i].nrej);
  }
  P("</tbody></table>\n<p class=\"note\">Time, every run: the stage's wall time summed over every run of this "
    "workdir that ran it (<code>stage_runs</code>), runs stopped by a signal or failed included; a run killed "
    "outright (kill -9, a node lost) records none. First chunk to last commit: from the ledger "
    "(<code>stage_chunks</code>), which keeps each chunk's last run only.</p>\n");
}

/* wall time per stage: each stage's chunks from the first start to the last
 * commit, as bars on one time axis */
static void section_timeline(struct rep *r) {
  const struct stage_ledger *l = r->o->ledger;
  sqlite3_stmt *st = ledger_rows(r, l && !r->failed ? l->chunk_spans(r->db) : NULL, !l);
  enum { MAXS = 16 };
  char name[MAXS][32];
  double t0[MAXS], t1[MAXS];
  struct tl_stage tl[MAXS];
  int n = 0;
  while (row(r, st) && n < MAXS) {
    snprintf(name[n], sizeof name[n], "%s", col_text(st, 0));
    t0[n] = iso_seconds(col_text(st, 1));
    t1[n] = iso_seconds(col_text(st, 2));
    memset(&tl[n], 0, sizeof tl[n]);
    snprintf(tl[n].name, sizeof tl[n].name, "%s", name[n]);
    tl[n].span = t1[n] - t0[n];
    tl[n].nch = sqlite3_column_int64(st, 3);
    tl[n].nok = sqlite3_column_int64(st, 4);
    tl[n].nrej = sqlite3_column_int64(st, 5);
    tl[n].nsh = sqlite3_column_int64(st, 6);
    n++;
  }
  sqlite3_finalize(st);
  P("<section id=\"timeline\"><h2>Where the time went</h2>\n");
  if (n == 0) {
    P("<p>No stage has finished a chunk yet.</p>\n");
    timeline_table(r, tl, 0, MAXS);
    P("</section>\n");
    return;
  }
  double first = t0[0], last = t1[0];
  for (int i = 0; i < n; i++) {
    if (t0[i] < first) first = t0[i];
    if (t1[i] > last) last = t1[i];
  }
  /* one row a stage: its name on the left, a bar from its first start to
   * its last commit (time from the first stage's start) */
  struct svg_plot p = plot0;
  p.width = 720;
  p.left = 90;
  p.height = 60 + 26 * n;
  p.x = axis(0, last - first, "seconds since the first stage started");
  p.x.lo = 0;
  p.y = (struct svg_axis){.lo = 0, .hi = n, .label = ""};
  P("<figure><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
    "role=\"img\" aria-labelledby=\"tl-t\" font-family=\"sans-serif\" font-size=\"12\">"
    "<title id=\"tl-t\">Wall time per stage</title>\n",
    p.width, p.height, p.width, p.height);
  double ticks[16];
  int nt = svg_ticks(&p.x, 10, ticks);
  double ybot = p.height - p.bottom;
  P("<g class=\"xticks\" stroke=\"#444\">");
  for (int i = 0; i < nt; i++) {
    double x = svg_x(&p, ticks[i]);
    P("<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/><text x=\"%.2f\" y=\"%.2f\" stroke=\"none\" "
      "text-anchor=\"middle\">%.6g</text>",
      x, ybot, x, ybot + 5, x, ybot + 18, ticks[i]);
  }
  P("</g>\n<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#444\"/>\n", p.left, ybot,
    (double)p.width - p.right, ybot);
  P("<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\">", (p.left + p.width - p.right) / 2, (double)p.height - 6);
  esc(r, p.x.label);
  P("</text>\n<g class=\"tl\">\n");
  for (int i = 0; i < n; i++) {
    double y = p.top + 26.0 * i, x0 = svg_x(&p, t0[i] - first), x1 = svg_x(&p, t1[i] - first);
    if (!isfinite(x0) || !isfinite(x1)) continue;
    if (x1 - x0 < 2) x1 = x0 + 2; /* a stage of a few milliseconds is still seen */
    char d[64];
    duration(d, sizeof d, t1[i] - t0[i]);
    P("<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"end\" stroke=\"none\">", p.left - 8, y + 14);
    esc(r, name[i]);
    P("</text><rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"18\"><title>", x0, y, x1 - x0);
    esc(r, name[i]);
    P(": %s</title></rect>\n", d);
  }
  P("</g></svg>\n");
  figure_close(r, "Each stage from its first chunk's start to its last chunk's commit. Stages run one after another "
                  "on one machine; under Slurm the array tasks of a stage overlap.");
  timeline_table(r, tl, n, MAXS);
  P("</section>\n");
}

/* ---- histograms of many values -------------------------------------------- */

/* Bars of the values `val` of the rows `from` (SQL: an expression, and what
 * follows FROM) over [lo, hi) into count[0..bins): counted by SQL, so the
 * page costs the same for 10^3 or 10^8 values; a value outside falls into
 * the first or last bar. */
static void sql_bins(struct rep *r, const char *val, const char *from, double lo, double hi, int bins, double *count) {
  memset(count, 0, (size_t)bins * sizeof *count);
  sqlite3_stmt *b =
      prep(r, "SELECT min(max(CAST((%s - %.17g) / %.17g AS INTEGER), 0), %d), count(*) FROM %s GROUP BY 1", val, lo,
           (hi - lo) / bins, bins - 1, from);
  while (row(r, b)) {
    int k = sqlite3_column_int(b, 0);
    if (k >= 0 && k < bins) count[k] += (double)sqlite3_column_int64(b, 1);
  }
  sqlite3_finalize(b);
}

/* The range a histogram of n values from lo to hi is drawn over. Scores are
 * often skewed: a classifier's probabilities crowd near 0 with a few hits
 * near 1, and bars over [lo, hi] would be one bar of thousands and a few of
 * one. So the values are first counted in HIST_FINE bins over [lo, hi];
 * when the middle 98 % of them (1 % cut from each end, n >= 100) lie within
 * a quarter of that range, the bars span those fine bins only, and the
 * values beyond fall into the first and last bar (*below and *above say how
 * many: the caption says so). Otherwise [lo, hi], *below = *above = 0.
 * check_report.py repeats this to count the bars. */
enum { HIST_FINE = 1000 };
static void hist_range(struct rep *r, const char *val, const char *from, long long n, double *lo, double *hi,
                       long long *below, long long *above) {
  *below = *above = 0;
  if (!(*hi > *lo)) {
    *lo -= 0.5;
    *hi += 0.5;
  }
  long long cut = n / 100;
  double *f = cut > 0 ? malloc(HIST_FINE * sizeof *f) : NULL;
  if (!f) return;
  sql_bins(r, val, from, *lo, *hi, HIST_FINE, f);
  int a = 0, b = HIST_FINE - 1;
  double low = 0, high = 0;
  while (a < b && low + f[a] <= (double)cut)
    low += f[a++];
  while (b > a && high + f[b] <= (double)cut)
    high += f[b--];
  free(f);
  if ((b - a + 1) * 4 > HIST_FINE) return;
  double w = (*hi - *lo) / HIST_FINE, l = *lo + a * w, h = *lo + (b + 1) * w;
  *below = (long long)q_double(r, 0, "SELECT count(*) FROM %s AND %s < %.17g", from, val, l);
  *above = (long long)q_double(r, 0, "SELECT count(*) FROM %s AND %s >= %.17g", from, val, h);
  *lo = l;
  *hi = h;
}

/* The caption's note on a trimmed range (hist_range): empty when none. */
static void hist_note(char *out, size_t len, double lo, double hi, long long below, long long above) {
  out[0] = 0;
  if (below + above == 0) return;
  char b[96] = "", a[96] = "";
  if (below) snprintf(b, sizeof b, "the first bar also holds the %lld below %.4g", below, lo);
  if (above) snprintf(a, sizeof a, "the last bar also holds the %lld above %.4g", above, hi);
  snprintf(out, len, " The scores are skewed: the bars span the middle 98 %% of them (%.4g to %.4g); %s%s%s.", lo, hi,
           b, below && above ? " and " : "", a);
}

/* ---- scores --------------------------------------------------------------- */

static void section_scores(struct rep *r) {
  P("<section id=\"scores\"><h2>Scores</h2>\n");
  if (!has_table(r, "scores") || q_double(r, 0, "SELECT count(*) FROM (SELECT 1 FROM scores LIMIT 1)") == 0) {
    /* a training-only or dock-only workflow ends here: said, not left out */
    P("<p>No molecules were scored in this workdir (the score stage has not run: a workflow scores a set with "
      "<code>stages.score</code>, or later with <code>se3screen predict</code>).</p></section>\n");
    return;
  }
  sqlite3_stmt *kept = prep(r, "SELECT value FROM meta WHERE key = 'scores_kept'");
  if (row(r, kept)) {
    P("<p class=\"note\">This database keeps only the scores that can be hits (<code>stages.score.merge: hits</code>, "
      "for ");
    esc(r, col_text(kept, 0));
    P("); the shard databases hold every score. The histograms show the kept scores only.</p>\n");
  }
  sqlite3_finalize(kept);
  /* the score stage's comparison of the scored set with the training set (stages/set_profile.h) */
  sqlite3_stmt *warned = prep(r, "SELECT value FROM meta WHERE key = 'score_warnings'");
  if (row(r, warned)) {
    P("<p class=\"note warn\">Warning, from the score stage: ");
    esc(r, col_text(warned, 0));
    P("</p>\n");
  }
  sqlite3_finalize(warned);
  int bins = r->o->bins;
  double *count = malloc((size_t)bins * sizeof *count);
  if (!count) {
    r->failed = 1;
    se3_error_set(&r->err, SE3_ERR_MEMORY, "out of memory");
    return;
  }
  /* one histogram per scored set and target; bins counted by SQL, so the
   * page costs the same for 10^3 or 10^8 scores */
  const char *sc = r->score_col;
  sqlite3_stmt *st = prep(r,
                          "SELECT m.set_name, s.target, min(s.\"%w\"), max(s.\"%w\"), count(*), count(s.std) "
                          "FROM scores s JOIN molecules m ON m.id = s.mol_id GROUP BY 1, 2 ORDER BY 1, 2",
                          sc, sc);
  P("<div class=\"row\">");
  while (row(r, st)) {
    char set[128], target[128], title[400], desc[800];
    snprintf(set, sizeof set, "%s", col_text(st, 0));
    snprintf(target, sizeof target, "%s", col_text(st, 1));
    double lo = sqlite3_column_double(st, 2), hi = sqlite3_column_double(st, 3);
    long long n = sqlite3_column_int64(st, 4), n_std = sqlite3_column_int64(st, 5), below, above;
    char *val = sqlite3_mprintf("s.\"%w\"", sc);
    char *from = sqlite3_mprintf("scores s JOIN molecules m ON m.id = s.mol_id WHERE m.set_name = %Q AND s.target = %Q",
                                 set, target);
    if (!val || !from) {
      r->failed = 1;
      se3_error_set(&r->err, SE3_ERR_MEMORY, "out of memory");
    } else {
      hist_range(r, val, from, n, &lo, &hi, &below, &above);
      sql_bins(r, val, from, lo, hi, bins, count);
    }
    sqlite3_free(val);
    sqlite3_free(from);
    char note[256], xlabel[200];
    hist_note(note, sizeof note, lo, hi, below, above);
    snprintf(title, sizeof title, "Scores of set '%s'", set);
    snprintf(desc, sizeof desc, "Predicted %s of the %lld scored molecules of set '%s', in %d bins.%s", target, n, set,
             bins, note);
    if (has_table(r, "models") &&
        q_double(r, 0, "SELECT count(*) FROM models WHERE target = %Q AND task = 'classification'", target) > 0)
      snprintf(xlabel, sizeof xlabel, "predicted probability of %s", target);
    else
      snprintf(xlabel, sizeof xlabel, "predicted %s (the target's units)", target);
    histogram(r, count, bins, lo, hi, title, xlabel, "s0 bars-score", desc);
    if (n_std > 0) {
      /* the ensemble's spread against the score: an evenly spaced sample */
      long long stride = n_std > REPORT_MAX_POINTS ? (n_std + REPORT_MAX_POINTS - 1) / REPORT_MAX_POINTS : 1;
      struct series sp = {0};
      sqlite3_stmt *q = prep(r,
                             "SELECT v, std FROM (SELECT s.\"%w\" AS v, s.std, row_number() OVER (ORDER BY s.rowid) "
                             "AS k FROM scores s JOIN molecules m ON m.id = s.mol_id WHERE m.set_name = %Q AND "
                             "s.target = %Q AND s.std IS NOT NULL) WHERE (k - 1) %% %lld = 0",
                             sc, set, target, stride);
      while (row(r, q))
        if (series_add(&sp, sqlite3_column_double(q, 0), sqlite3_column_double(q, 1))) r->failed = 1;
      sqlite3_finalize(q);
      double xlo = INFINITY, xhi = -INFINITY, ylo = 0, yhi = -INFINITY;
      minmax(sp.x, sp.n, &xlo, &xhi);
      minmax(sp.y, sp.n, &ylo, &yhi);
      struct svg_plot p = plot0;
      snprintf(title, sizeof title, "Ensemble spread, set '%s'", set);
      p.title = title;
      p.x = axis(xlo, xhi, target);
      p.y = axis(0, yhi, "standard deviation of the ensemble");
      p.y.lo = 0;
      snprintf(desc, sizeof desc, "The ensemble members' standard deviation against the score, %d molecules%s.", sp.n,
               stride > 1 ? " (an evenly spaced sample)" : "");
      figure_open(r);
      svg_plot_begin(&r->h, &p, desc);
      svg_points(&r->h, &p, sp.x, sp.y, sp.n, "s1 pts-std", SVG_TRIANGLE);
      svg_plot_end(&r->h);
      figure_close(r, desc);
      series_free(&sp);
    }
  }
  sqlite3_finalize(st);
  P("</div></section>\n");
  free(count);
}

/* ---- docking and active learning ------------------------------------------ */

/* The dock stage's scores (a histogram) and, for active learning, a row a
 * round: what it picked and by which rule, the mean docking score of its
 * picks (the rule working shows as later rounds' picks scoring better than
 * round 0's random ones), the best score found so far, and how well the
 * models that decided it predicted their held-out molecules. */
static int has_docking(struct rep *r) {
  return has_table(r, "docking") &&
         q_double(r, 0, "SELECT (SELECT count(*) FROM docking) + (SELECT count(*) FROM rounds)") > 0;
}

static void section_docking(struct rep *r) {
  if (!has_docking(r)) return;
  long long n = (long long)q_double(r, 0, "SELECT count(*) FROM docking");
  long long n_rounds = (long long)q_double(r, 0, "SELECT count(*) FROM rounds");
  P("<section id=\"docking\"><h2>Docking%s</h2>\n", n_rounds ? " and active learning" : "");
  long long n_rej = (long long)q_double(r, 0, "SELECT count(*) FROM rejects WHERE stage = 'dock'");
  double lo = q_double(r, NAN, "SELECT min(score) FROM docking"), hi = q_double(r, NAN, "SELECT max(score) FROM docking");
  P("<p>%lld molecule%s docked (the <code>docking</code> table), %lld rejected by the dock stage", n,
    n == 1 ? "" : "s", n_rej);
  if (n > 0) {
    P("; scores from ");
    num(r, lo, "%.2f");
    P(" to ");
    num(r, hi, "%.2f");
    double secs = q_double(r, NAN, "SELECT avg(seconds) FROM docking");
    if (secs >= 0.05) { /* (a table's scores take no time) */
      P(", a docking taking ");
      num(r, secs, "%.1f");
      P(" s on average");
    }
  }
  P(".</p>\n");
  if (n > 1) {
    int bins = r->o->bins;
    double *count = calloc((size_t)bins, sizeof *count);
    if (!count) {
      r->failed = 1;
      se3_error_set(&r->err, SE3_ERR_MEMORY, "out of memory");
      return;
    }
    long long below, above;
    hist_range(r, "score", "docking WHERE 1", n, &lo, &hi, &below, &above);
    sql_bins(r, "score", "docking WHERE 1", lo, hi, bins, count);
    char desc[512], note[256];
    hist_note(note, sizeof note, lo, hi, below, above);
    snprintf(desc, sizeof desc, "Docking scores of the %lld molecules docked (lower is better), in %d bins.%s", n, bins,
             note);
    histogram(r, count, bins, lo, hi, "Docking scores", "docking score (kcal/mol)", "s0 bars-dock", desc);
    free(count);
  }
  if (n_rounds == 0) {
    P("</section>\n");
    return;
  }
  int history = has_table(r, "round_models");
  P("<p>Active learning: %lld round%s decided. Each later round was picked by the models trained on the scores "
    "of the rounds before it (their test-split error and rank correlation below, averaged over an ensemble's "
    "members); the mean score of a round's picks shows whether the rule finds better molecules than round 0's "
    "random ones. <code>acquisitions</code> says why each molecule was picked.</p>\n",
    n_rounds, n_rounds == 1 ? "" : "s");
  P("<table class=\"grid\"><thead><tr><th scope=\"col\">round</th><th scope=\"col\">rule</th>"
    "<th scope=\"col\">picked</th><th scope=\"col\">of</th><th scope=\"col\">labelled before</th>"
    "<th scope=\"col\">docked</th><th scope=\"col\">mean score of its picks</th>"
    "<th scope=\"col\">best so far</th><th scope=\"col\">models' test RMSE</th>"
    "<th scope=\"col\">test Spearman</th><th scope=\"col\">ucb calibration</th></tr></thead><tbody>\n");
  sqlite3_stmt *st = prep(
      r,
      "SELECT d.round, d.rule, d.n_acquired, d.n_candidates, d.n_labelled, (SELECT count(*) FROM acquisitions q JOIN "
      "docking k ON k.mol_id = q.mol_id WHERE q.round = d.round), (SELECT avg(k.score) FROM acquisitions q JOIN "
      "docking k ON k.mol_id = q.mol_id WHERE q.round = d.round), (SELECT min(k.score) FROM acquisitions q JOIN "
      "docking k ON k.mol_id = q.mol_id WHERE q.round <= d.round), %s, %s, d.calibration FROM rounds d ORDER BY "
      "d.round",
      history ? "(SELECT avg(test_rmse) FROM round_models m WHERE m.round = d.round)" : "NULL",
      history ? "(SELECT avg(test_spearman) FROM round_models m WHERE m.round = d.round)" : "NULL");
  struct series mean = {0};
  while (row(r, st)) {
    P("<tr><td class=\"n\">%lld</td>", (long long)sqlite3_column_int64(st, 0));
    td(r, NULL, col_text(st, 1));
    for (int i = 2; i <= 5; i++) P("<td class=\"n\">%lld</td>", (long long)sqlite3_column_int64(st, i));
    for (int i = 6; i <= 10; i++) {
      P("<td class=\"n\">");
      col_num(r, st, i, i == 10 ? "%.3f" : "%.2f");
      P("</td>");
    }
    P("</tr>\n");
    if (sqlite3_column_type(st, 6) != SQLITE_NULL &&
        series_add(&mean, (double)sqlite3_column_int64(st, 0), sqlite3_column_double(st, 6)))
      r->failed = 1;
  }
  sqlite3_finalize(st);
  P("</tbody></table>\n");
  if (mean.n > 1 && !r->failed) {
    double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
    minmax(mean.x, mean.n, &xlo, &xhi);
    minmax(mean.y, mean.n, &ylo, &yhi);
    struct svg_plot p = plot0;
    p.title = "Mean docking score of each round's picks";
    p.x = axis(xlo, xhi, "round");
    p.x.whole = 1;
    p.y = axis(ylo, yhi, "mean docking score (kcal/mol)");
    const char *desc = "The mean docking score of the molecules each round picked (those docked), round 0 at random.";
    figure_open(r);
    svg_plot_begin(&r->h, &p, desc);
    svg_line(&r->h, &p, mean.x, mean.y, mean.n, "s0 line", NULL);
    svg_points(&r->h, &p, mean.x, mean.y, mean.n, "s0 pts-round", SVG_CIRCLE);
    svg_plot_end(&r->h);
    figure_close(r, desc);
  }
  series_free(&mean);
  P("</section>\n");
}

/* ---- hits ----------------------------------------------------------------- */

static void section_hits(struct rep *r) {
  long long n = has_table(r, "ranked_hits") ? (long long)q_double(r, 0, "SELECT count(*) FROM ranks") : 0;
  P("<section id=\"hits\"><h2>Top hits</h2>\n");
  if (n == 0) {
    P("<p>No ranked hits (the rank stage has not run in this workdir, or kept none).</p></section>\n");
    return;
  }
  int top = r->o->top;
  P("<p>The best %lld of %lld ranked hits (the rank stage's order; <code>se3screen top</code> and "
    "<code>hits.csv</code> list them all).</p>\n",
    n < top ? n : (long long)top, n);
  /* each hit's nearest training molecule (since schema version 12; none
   * without a training set): how far the prediction reaches */
  int near = has_column(r, "ranked_hits", "nearest_train") &&
             q_double(r, 0, "SELECT count(*) FROM ranks WHERE similarity IS NOT NULL") > 0;
  if (near)
    P("<p>Each hit's nearest training molecule is the one of the model's training set (the train split, or the set "
      "a model from elsewhere carries) with the highest Tanimoto similarity (Morgan fingerprints, radius 2): a hit "
      "far from all of them (under about 0.3) is a prediction the model has little to go on for.</p>\n");
  /* the spread over each hit's conformers (since schema version 13; none
   * with one conformer a molecule) */
  int csd = has_column(r, "ranked_hits", "conformer_sd") &&
            q_double(r, 0, "SELECT count(*) FROM ranks WHERE conformer_sd IS NOT NULL") > 0;
  if (csd)
    P("<p>A score is aggregated over the molecule's conformers; <em>conformer sd</em> is their spread: a hit whose "
      "score moves much with its shape is less sure than its score says.</p>\n");
  P("<table class=\"grid hits\"><thead><tr><th scope=\"col\">rank</th>%s<th scope=\"col\">name</th>"
    "<th scope=\"col\">SMILES</th><th scope=\"col\">target</th><th scope=\"col\">score</th>"
    "<th scope=\"col\">std</th>%s<th scope=\"col\">set</th><th scope=\"col\">source (record)</th>%s</tr></thead>"
    "<tbody>\n",
    r->o->depict ? "<th scope=\"col\">structure</th>" : "", csd ? "<th scope=\"col\">conformer sd</th>" : "",
    near ? "<th scope=\"col\">nearest training molecule (similarity)</th>" : "");
  sqlite3_stmt *st = prep(r,
                          "SELECT rank, name, smiles, target, score, std, set_name, source_file, record_no, %s, %s "
                          "FROM ranked_hits ORDER BY rank LIMIT %d",
                          near ? "nearest_train, similarity" : "NULL, NULL", csd ? "conformer_sd" : "NULL", top);
  while (row(r, st)) {
    P("<tr><td class=\"n\">%lld</td>", (long long)sqlite3_column_int64(st, 0));
    if (r->o->depict) {
      char *svg = ob_depict_svg(col_text(st, 2), 150);
      P("<td class=\"depict\">");
      if (svg) {
        P("<div class=\"depict\">%s</div>", svg); /* a large structure scrolls in its cell */
      } else {
        P("(no depiction)");
      }
      P("</td>");
      free(svg);
    }
    td(r, NULL, col_text(st, 1));
    td(r, "smiles", col_text(st, 2));
    td(r, NULL, col_text(st, 3));
    P("<td class=\"n\">");
    col_num(r, st, 4, "%.6g");
    P("</td><td class=\"n\">");
    col_num(r, st, 5, "%.3g");
    P("</td>");
    if (csd) {
      P("<td class=\"n\">");
      col_num(r, st, 11, "%.3g");
      P("</td>");
    }
    td(r, NULL, col_text(st, 6));
    P("<td>");
    esc(r, col_text(st, 7));
    P(" (%lld)</td>", (long long)sqlite3_column_int64(st, 8));
    if (near) {
      P("<td>");
      esc(r, col_text(st, 9));
      if (sqlite3_column_type(st, 10) != SQLITE_NULL) P(" (%.2f)", sqlite3_column_double(st, 10));
      P("</td>");
    }
    P("</tr>\n");
  }
  sqlite3_finalize(st);
  P("</tbody></table></section>\n");
}

/* ---- rejects -------------------------------------------------------------- */

static void section_rejects(struct rep *r) {
  long long total = (long long)q_double(r, 0, "SELECT count(*) FROM rejects");
  P("<section id=\"rejects\"><h2>Rejects</h2>\n");
  if (total == 0) {
    P("<p>Nothing was rejected.</p></section>\n");
    return;
  }
  enum { GROUPS = 30, EXAMPLES = 3 };
  long long groups = (long long)q_double(r, 0, "SELECT count(*) FROM (SELECT 1 FROM rejects GROUP BY stage, reason)");
  P("<p>%lld records or molecules were rejected, for %lld distinct reasons%s. Every one is in the "
    "<code>rejects</code> table with its file and record.</p>\n",
    total, groups, groups > GROUPS ? " (the most frequent shown)" : "");
  /* Since schema version 7 the reason is one text per kind and the specifics
   * (which atom, how far apart) are in atom and detail: the examples show
   * them. An older database, read as it is, has them in the reason. */
  int specifics = has_column(r, "rejects", "detail");
  P("<table class=\"grid\"><thead><tr><th scope=\"col\">stage</th><th scope=\"col\">reason</th>"
    "<th scope=\"col\">count</th><th scope=\"col\">examples (file, record, name%s)</th></tr></thead><tbody>\n",
    specifics ? " &mdash; specifics" : "");
  sqlite3_stmt *st = prep(r,
                          "SELECT stage, reason, count(*) FROM rejects GROUP BY stage, reason "
                          "ORDER BY count(*) DESC, stage, reason LIMIT %d",
                          GROUPS);
  while (row(r, st)) {
    P("<tr>");
    td(r, NULL, col_text(st, 0));
    td(r, NULL, col_text(st, 1));
    P("<td class=\"n\">%lld</td><td>", (long long)sqlite3_column_int64(st, 2));
    sqlite3_stmt *ex = prep(r,
                            "SELECT source_file, record_no, coalesce(name, ''), %s FROM rejects WHERE stage = %Q AND "
                            "reason = %Q ORDER BY source_file, record_no LIMIT %d",
                            specifics ? "atom, detail" : "NULL, NULL", col_text(st, 0), col_text(st, 1), EXAMPLES);
    for (int k = 0; row(r, ex); k++) {
      P("%s", k ? "<br>" : "");
      esc(r, col_text(ex, 0));
      P(" #%lld", (long long)sqlite3_column_int64(ex, 1));
      if (col_text(ex, 2)[0]) P(" ");
      esc(r, col_text(ex, 2));
      /* the specifics name the atom where there is one ("atoms 3 and 7 are
       * 0.42 Å apart"): the atom alone only when there are none */
      if (col_text(ex, 4)[0]) {
        P(" &mdash; ");
        esc(r, col_text(ex, 4));
      } else if (sqlite3_column_type(ex, 3) != SQLITE_NULL) {
        P(" &mdash; atom %lld", (long long)sqlite3_column_int64(ex, 3));
      }
    }
    sqlite3_finalize(ex);
    P("</td></tr>\n");
  }
  sqlite3_finalize(st);
  P("</tbody></table></section>\n");
}

/* ---- the page ------------------------------------------------------------- */

static const char css[] =
    "body{font-family:sans-serif;margin:1.5em auto;max-width:1100px;color:#111;line-height:1.4}"
    "h1{font-size:1.6em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.6em}"
    "table{border-collapse:collapse;margin:.6em 0}th,td{padding:.25em .6em;text-align:left;vertical-align:middle}"
    "table.grid th,table.grid td{border:1px solid #ccc}table.kv th{color:#444;font-weight:normal}"
    "td.n{text-align:right;font-variant-numeric:tabular-nums}td.smiles,td.arch{font-family:monospace;"
    "font-size:.85em;word-break:break-all;max-width:22em}td.depict svg{display:block}"
    "div.depict{max-width:460px;max-height:460px;overflow:auto}"
    "figure{display:inline-block;margin:.5em 1em .5em 0;vertical-align:top}"
    "figcaption{font-size:.85em;color:#333;max-width:460px}"
    "nav a{margin-right:1em}.note{background:#fff8e0;padding:.4em .6em}.metrics b{font-size:1.1em}"
    "pre{margin:0}"
    ".frame{stroke:#444}.line{fill:none;stroke-width:2}.diag{stroke:#888;stroke-width:1}"
    ".s0{fill:#1f5fa8;stroke:#1f5fa8}.s1{fill:#c0392b;stroke:#c0392b}"
    ".s0 rect{fill-opacity:.85}g.tl rect{fill:#1f5fa8}.legend text{fill:#111;stroke:none}"
    "circle,.pts-valid rect,path{fill-opacity:.75;stroke:none}"
    "g.line polyline,g.diag polyline,.legend line{fill:none;stroke-width:2}g.diag polyline{stroke-width:1}";

int report_write(sqlite3 *db, const char *db_label, const struct report_opts *o, const char *out_path,
                 struct se3_error *err) {
  struct rep r = {.db = db, .o = o};
  svg_init(&r.h);
  if (o->depict && ob_init() != 0) {
    se3_error_set(err, SE3_ERR_RUN,
                  "report: Open Babel could not be started for the depictions (stages.report.depict: false "
                  "leaves them out)");
    return -1;
  }
  r.score_col = has_column(&r, "scores", "value") && !has_column(&r, "scores", "score") ? "value" : "score";
  r.epoch_from0 = q_double(&r, 0, "PRAGMA user_version") < 6;
  char title[512], when[64];
  char *wf = NULL;
  {
    sqlite3_stmt *st = prep(&r, "SELECT value FROM meta WHERE key = 'workflow'");
    if (row(&r, st)) wf = strdup(col_text(st, 0));
    sqlite3_finalize(st);
  }
  const char *base = wf && strrchr(wf, '/') ? strrchr(wf, '/') + 1 : wf ? wf : db_label;
  snprintf(title, sizeof title, "se3screen report: %s", base);
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", &tm);
  svg_printf(&r.h, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
                   "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>");
  svg_escaped(&r.h, title);
  svg_printf(&r.h, "</title>\n<style>%s</style></head>\n<body>\n<h1>", css);
  svg_escaped(&r.h, title);
  svg_printf(&r.h,
             "</h1>\n<p>Written %s by se3screen from the result database. Every figure here is a query away: "
             "<code>se3screen query</code> and <code>docs/schema.md</code>.</p>\n"
             "<nav aria-label=\"sections\"><a href=\"#summary\">Run</a><a href=\"#timeline\">Time</a>%s"
             "<a href=\"#training\">Training</a><a href=\"#scores\">Scores</a><a href=\"#hits\">Hits</a>"
             "<a href=\"#rejects\">Rejects</a></nav>\n",
             when, has_docking(&r) ? "<a href=\"#docking\">Docking</a>" : "");
  free(wf);
  section_summary(&r, db_label);
  section_timeline(&r);
  section_docking(&r);
  report_section_training(&r);
  section_scores(&r);
  section_hits(&r);
  section_rejects(&r);
  svg_printf(&r.h, "</body></html>\n");
  int rc = 0;
  if (r.failed) {
    if (r.err.kind == SE3_ERR_NONE) /* (a series that could not grow) */
      se3_error_set(&r.err, SE3_ERR_MEMORY, "out of memory");
    if (err) *err = r.err;
    se3_error_context(err, "report");
    rc = -1;
  } else if (r.h.oom) {
    se3_error_set(err, SE3_ERR_MEMORY, "report: out of memory for the page");
    rc = -1;
  } else if (!strcmp(out_path, "-")) {
    if (fwrite(r.h.buf, 1, r.h.len, stdout) != r.h.len || fflush(stdout)) {
      se3_error_set(err, SE3_ERR_IO, "report: writing to standard output failed");
      rc = -1;
    }
  } else if (atomic_file_write(out_path, r.h.buf, r.h.len, err)) {
    rc = -1;
  }
  svg_free(&r.h);
  return rc;
}
