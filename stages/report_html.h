/* report_html.h — the room below the report page's files: the SQL, page
 * and plot helpers both call, and struct rep, the page being written. Not
 * for use outside the report (the interface is stages/report_page.h).
 *
 *   report_page.c      the page: the run, its timeline, scores, docking,
 *                      hits, rejects, and report_write
 *   report_training.c  the Training (or Model) section (report_training.h):
 *                      learning curves and the held-out molecules' metrics
 *                      and plots
 *
 * Includes flow one way: report_page.c -> report_training.h -> here, and
 * report_page.c -> here; nothing here calls into either file.
 *
 * The helpers below are called on nearly every line of both files, by
 * short names, so they are static inline here rather than exported: each
 * file keeps its own copy, and no name like row() or td() leaves it.
 */
#ifndef SE3_REPORT_HTML_H
#define SE3_REPORT_HTML_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>

#include "common/error.h"
#include "common/svg.h"
#include "report_page.h" /* (struct report_opts alone) */

/* scatter plots draw at most this many points (an evenly spaced sample) */
#define REPORT_MAX_POINTS 4000

/* the plots' size and margins, px */
enum { PW = 460, PH = 320 };
static const struct svg_plot plot0 = {.width = PW, .height = PH, .left = 66, .right = 16, .top = 30, .bottom = 44};

struct rep {
  sqlite3 *db;
  const struct report_opts *o;
  struct svg h; /* the page */
  struct se3_error err; /* the first failure (failed) */
  int failed;
  /* A database is read as it is, never migrated (`se3screen report` opens
   * it read-only), so an older schema's names and counts are translated
   * here. score_col: scores.score, or scores.value before version 6.
   * epoch_from0: 1 where metrics.epoch and models.best_epoch count from 0
   * (before version 6), added to show them from 1 as the log counts; 0 from
   * version 6 on, where they are shown as stored. */
  const char *score_col;
  int epoch_from0;
};

/* ---- SQL helpers ---------------------------------------------------------- */

/* fmt is sqlite3_mprintf's (%Q, %w): not checked as printf's */
static inline sqlite3_stmt *prep(struct rep *r, const char *fmt, ...) {
  if (r->failed) return NULL;
  va_list ap;
  va_start(ap, fmt);
  char *sql = sqlite3_vmprintf(fmt, ap);
  va_end(ap);
  sqlite3_stmt *st = NULL;
  if (!sql || sqlite3_prepare_v2(r->db, sql, -1, &st, NULL) != SQLITE_OK) {
    se3_error_set(&r->err, SE3_ERR_DB, "reading the database: %s", sql ? sqlite3_errmsg(r->db) : "out of memory");
    r->failed = 1;
    st = NULL;
  }
  sqlite3_free(sql);
  return st;
}

/* sqlite3_step, noting an error: 1 a row, 0 done or failed */
static inline int row(struct rep *r, sqlite3_stmt *st) {
  if (!st) return 0;
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) return 1;
  if (rc != SQLITE_DONE && !r->failed) {
    se3_error_set(&r->err, SE3_ERR_DB, "reading the database: %s", sqlite3_errmsg(r->db));
    r->failed = 1;
  }
  return 0;
}

static inline double q_double(struct rep *r, double dflt, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *sql = sqlite3_vmprintf(fmt, ap);
  va_end(ap);
  sqlite3_stmt *st = sql ? prep(r, "%s", sql) : NULL;
  sqlite3_free(sql);
  double v = dflt;
  if (row(r, st) && sqlite3_column_type(st, 0) != SQLITE_NULL) v = sqlite3_column_double(st, 0);
  sqlite3_finalize(st);
  return v;
}

/* A statement of the runner's ledger (struct stage_ledger's reads: st, or
 * NULL) as prep gives one: NULL where the read failed (r->err says why),
 * where an earlier read failed, or where there is nothing to read (none). */
static inline sqlite3_stmt *ledger_rows(struct rep *r, sqlite3_stmt *st, int none) {
  if (!st && !none && !r->failed) {
    se3_error_set(&r->err, SE3_ERR_DB, "reading the database: %s", sqlite3_errmsg(r->db));
    r->failed = 1;
  }
  if (r->failed) {
    sqlite3_finalize(st);
    return NULL;
  }
  return st;
}

static inline int has_table(struct rep *r, const char *name) {
  return q_double(r, 0, "SELECT count(*) FROM sqlite_schema WHERE name = %Q", name) > 0;
}

/* (a database of an older schema, opened read-only, lacks later columns) */
static inline int has_column(struct rep *r, const char *table, const char *column) {
  return q_double(r, 0, "SELECT count(*) FROM pragma_table_info(%Q) WHERE name = %Q", table, column) > 0;
}

static inline const char *col_text(sqlite3_stmt *st, int i) {
  const unsigned char *t = sqlite3_column_text(st, i);
  return t ? (const char *)t : "";
}

/* ---- page helpers --------------------------------------------------------- */

#define P(...) svg_printf(&r->h, __VA_ARGS__)
static inline void esc(struct rep *r, const char *t) { svg_escaped(&r->h, t); }

/* a table cell of text, escaped; cls NULL: no class */
static inline void td(struct rep *r, const char *cls, const char *text) {
  if (cls)
    P("<td class=\"%s\">", cls);
  else
    P("<td>");
  esc(r, text);
  P("</td>");
}

/* a number as a table shows it: empty for NULL/NaN */
static inline void num(struct rep *r, double v, const char *fmt) {
  if (isfinite(v)) P(fmt, v);
}

static inline void col_num(struct rep *r, sqlite3_stmt *st, int i, const char *fmt) {
  if (sqlite3_column_type(st, i) != SQLITE_NULL) num(r, sqlite3_column_double(st, i), fmt);
}

/* an axis over [lo, hi] with 5 % room either side */
static inline struct svg_axis axis(double lo, double hi, const char *label) {
  if (!isfinite(lo) || !isfinite(hi)) lo = 0, hi = 1;
  if (!(hi > lo)) {
    double d = fabs(lo) > 0 ? fabs(lo) * 0.1 : 1;
    lo -= d;
    hi += d;
  }
  double d = (hi - lo) * 0.05;
  return (struct svg_axis){.lo = lo - d, .hi = hi + d, .label = label};
}

static inline void figure_open(struct rep *r) { P("<figure>"); }

static inline void figure_close(struct rep *r, const char *caption) {
  P("<figcaption>");
  esc(r, caption);
  P("</figcaption></figure>\n");
}

/* ---- plot helpers --------------------------------------------------------- */

struct series {
  double *x, *y;
  int n, cap;
};

static inline int series_add(struct series *s, double x, double y) {
  if (s->n == s->cap) {
    int cap = s->cap ? 2 * s->cap : 64;
    double *nx = realloc(s->x, (size_t)cap * sizeof *nx);
    if (!nx) return -1;
    s->x = nx;
    double *ny = realloc(s->y, (size_t)cap * sizeof *ny);
    if (!ny) return -1;
    s->y = ny;
    s->cap = cap;
  }
  s->x[s->n] = x;
  s->y[s->n] = y;
  s->n++;
  return 0;
}

static inline void series_free(struct series *s) {
  free(s->x);
  free(s->y);
  memset(s, 0, sizeof *s);
}

static inline void minmax(const double *v, int n, double *lo, double *hi) {
  for (int i = 0; i < n; i++) {
    if (!isfinite(v[i])) continue;
    if (!(v[i] >= *lo)) *lo = v[i];
    if (!(v[i] <= *hi)) *hi = v[i];
  }
}

/* a histogram of values already binned: n bars over [lo, hi] */
static inline void histogram(struct rep *r, const double *count, int n, double lo, double hi, const char *title,
                             const char *xlabel, const char *cls, const char *desc) {
  double *edges = malloc((size_t)(n + 1) * sizeof *edges), top = 0;
  if (!edges) {
    r->failed = 1;
    se3_error_set(&r->err, SE3_ERR_MEMORY, "out of memory");
    return;
  }
  for (int i = 0; i <= n; i++)
    edges[i] = lo + (hi - lo) * i / n;
  for (int i = 0; i < n; i++)
    if (count[i] > top) top = count[i];
  struct svg_plot p = plot0;
  p.title = title;
  p.x = axis(lo, hi, xlabel);
  p.y = (struct svg_axis){.lo = 0, .hi = top > 0 ? top * 1.08 : 1, .label = "molecules", .whole = 1};
  figure_open(r);
  svg_plot_begin(&r->h, &p, desc);
  svg_bars(&r->h, &p, edges, count, n, cls);
  svg_plot_end(&r->h);
  figure_close(r, desc);
  free(edges);
}

#endif
