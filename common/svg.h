/* svg.h — a small SVG plot writer for the report (report.html): axes with
 * ticks at round numbers (linear or log10), points, lines, histogram bars,
 * a legend, all into one growing string with nothing fetched from anywhere
 * (no scripts, no fonts, no links). A leaf module: it includes nothing of
 * the project.
 *
 * Accessibility: every picture is role="img" with a <title> (its name) and
 * a <desc> the caller may fill; series differ by marker shape and dash
 * pattern as well as by colour, and the legend names them in text.
 *
 * Coordinates: a plot is `width` x `height` pixels; the data area is inset
 * by the margins; data value v maps linearly (or by log10) from the axis'
 * [lo, hi] onto it, y growing upwards. Points and bars outside the axes'
 * range are not drawn (a log axis also drops v <= 0); lines are cut at the
 * data area by a clip path. Every drawn datum is one element carrying the
 * series' class, so a test (or a browser's DOM) can count them. */
#ifndef SE3_SVG_H
#define SE3_SVG_H

#include <stddef.h>

struct svg {
  char *buf; /* NUL-terminated; NULL until something is written */
  size_t len, cap;
  int oom;    /* 1 once an allocation failed: the text is then cut short */
  int n_clip; /* clip paths made so far (their ids) */
};

void svg_init(struct svg *s);
void svg_free(struct svg *s);
void svg_printf(struct svg *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* text with &, <, >, " and ' escaped, and made valid UTF-8 for any bytes:
 * a byte that starts no well-formed UTF-8 character (a Latin-1 name, a
 * truncated, overlong or surrogate sequence) and a control character other
 * than tab, LF and CR are each written as U+FFFD */
void svg_escaped(struct svg *s, const char *text);

struct svg_axis {
  double lo, hi;     /* the range shown; lo < hi (and lo > 0 on a log axis) */
  int log10;         /* 1: logarithmic */
  const char *label; /* the axis title, with its unit */
  int whole;         /* 1: ticks at whole numbers only (counts of molecules) */
};

struct svg_plot {
  const char *title; /* shown above the plot, and the picture's <title> */
  int width, height;
  double left, right, top, bottom; /* margins around the data area, px */
  struct svg_axis x, y;
};

/* The data area's pixel position of a value: svg_x is the column, svg_y the
 * row (0 at the top). A value outside the axis gives a position outside the
 * data area; on a log axis v <= 0 gives NAN. */
double svg_x(const struct svg_plot *p, double v);
double svg_y(const struct svg_plot *p, double v);

/* Ticks at round values (1, 2 or 5 times a power of ten; a log axis: the
 * powers of ten, with 2 and 5 between when there are few) within [lo, hi]:
 * at most max of them into out; on a `whole` linear axis, steps of 1 at
 * least. Returns how many. */
int svg_ticks(const struct svg_axis *a, int max, double *out);

/* Opens the picture: <svg>, title, description, frame, ticks, tick labels
 * and axis titles. desc may be NULL. Close it with svg_plot_end. */
void svg_plot_begin(struct svg *s, const struct svg_plot *p, const char *desc);
void svg_plot_end(struct svg *s);

/* Marker shapes: circle, square, triangle (told apart without colour). */
enum svg_marker { SVG_CIRCLE, SVG_SQUARE, SVG_TRIANGLE };

/* n points (x[i], y[i]) as markers of class cls: one element each. Returns
 * how many were drawn (those inside both axes). */
int svg_points(struct svg *s, const struct svg_plot *p, const double *x, const double *y, int n, const char *cls,
               enum svg_marker shape);
/* A polyline through n points of class cls, dashed with `dash` (an SVG
 * stroke-dasharray such as "6 3", or NULL for solid); non-finite points
 * (and v <= 0 on a log axis) break it. Returns the vertices drawn. */
int svg_line(struct svg *s, const struct svg_plot *p, const double *x, const double *y, int n, const char *cls,
             const char *dash);
/* A histogram: bar i spans [edges[i], edges[i + 1]) with height count[i]
 * (n bars, n + 1 edges), each a <rect> of class cls with a <title> giving
 * its range and count. Returns the bars drawn (those with count > 0). */
int svg_bars(struct svg *s, const struct svg_plot *p, const double *edges, const double *count, int n, const char *cls);
/* A legend in the data area's top-left (corner 0), bottom-right (1) or
 * top-right (2) corner:
 * each entry a sample of its series (marker or line, as drawn) and its name. */
struct svg_legend_entry {
  const char *name, *cls;
  int line; /* 1: a line sample (with dash), 0: a marker */
  enum svg_marker shape;
  const char *dash;
};
void svg_legend(struct svg *s, const struct svg_plot *p, const struct svg_legend_entry *e, int n, int corner);

#endif
