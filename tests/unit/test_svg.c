/* common/svg.c, the report's plot writer, and se3_roc_curve: points land at
 * the pixel the axes give them, ticks fall on round numbers, histogram bars
 * have the heights of their counts, text is escaped, values off the axes
 * are not drawn, and a ROC curve of a known ranking has the known area. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/svg.h"
#include "models/metrics.h"

static const struct svg_plot parity = {
    .title = "Parity <test> & co",
    .width = 500,
    .height = 400,
    .left = 60,
    .right = 20,
    .top = 30,
    .bottom = 50,
    .x = {.lo = 0, .hi = 10, .label = "label (kcal/mol)"},
    .y = {.lo = 0, .hi = 10, .label = "prediction (kcal/mol)"},
};

/* The text of the first <g class="cls"> group. */
static char *group(const char *svg, const char *cls) {
  char open[128];
  snprintf(open, sizeof open, "<g class=\"%s\"", cls);
  const char *a = strstr(svg, open);
  cr_assert(a, "no group %s", cls);
  const char *b = strstr(a, "</g>");
  cr_assert(b);
  return strndup(a, (size_t)(b - a));
}

static int count(const char *text, const char *what) {
  int n = 0;
  for (const char *p = strstr(text, what); p; p = strstr(p + 1, what))
    n++;
  return n;
}

Test(svg, points_land_on_their_pixels) {
  struct svg s;
  svg_init(&s);
  svg_plot_begin(&s, &parity, "predicted against measured");
  double x[] = {0, 5, 10, 2.5, 11, 4}, y[] = {0, 5, 10, 7.5, 5, NAN};
  cr_assert_eq(svg_points(&s, &parity, x, y, 6, "pts", SVG_CIRCLE), 4, "off-axis and NaN points are not drawn");
  svg_plot_end(&s);
  cr_assert_not(s.oom);
  char *g = group(s.buf, "pts");
  cr_assert_eq(count(g, "<circle"), 4);
  /* data area: x 60..480 (420 px), y 30..350 (320 px), y up */
  const double want[4][2] = {{60, 350}, {270, 190}, {480, 30}, {165, 110}};
  const char *p = g;
  for (int i = 0; i < 4; i++) {
    double cx, cy;
    p = strstr(p, "<circle");
    cr_assert(p && sscanf(p, "<circle cx=\"%lf\" cy=\"%lf\"", &cx, &cy) == 2, "%s", g);
    cr_assert_float_eq(cx, want[i][0], 0.01, "point %d: cx %g, expected %g", i, cx, want[i][0]);
    cr_assert_float_eq(cy, want[i][1], 0.01, "point %d: cy %g, expected %g", i, cy, want[i][1]);
    p++;
  }
  free(g);
  /* the picture names itself, escaped */
  cr_assert(strstr(s.buf, "role=\"img\""));
  cr_assert(strstr(s.buf, ">Parity &lt;test&gt; &amp; co</title>"), "%s", s.buf);
  cr_assert_null(strstr(s.buf, "<test>"));
  cr_assert(strstr(s.buf, "prediction (kcal/mol)"));
  svg_free(&s);
}

Test(svg, ticks_fall_on_round_numbers) {
  double t[32];
  struct svg_axis a = {.lo = 0, .hi = 10};
  cr_assert_eq(svg_ticks(&a, 11, t), 11);
  for (int i = 0; i < 11; i++)
    cr_assert_float_eq(t[i], i, 1e-12);
  cr_assert_eq(svg_ticks(&a, 6, t), 6);
  for (int i = 0; i < 6; i++)
    cr_assert_float_eq(t[i], 2 * i, 1e-12);
  struct svg_axis b = {.lo = -0.3, .hi = 0.7};
  int n = svg_ticks(&b, 6, t);
  cr_assert_eq(n, 5, "%d ticks", n);
  const double wb[] = {-0.2, 0, 0.2, 0.4, 0.6};
  for (int i = 0; i < 5; i++)
    cr_assert_float_eq(t[i], wb[i], 1e-12, "tick %d is %g", i, t[i]);
  cr_assert(!signbit(t[1]), "a -0 tick");
  struct svg_axis c = {.lo = 1, .hi = 1000, .log10 = 1};
  n = svg_ticks(&c, 10, t);
  cr_assert_eq(n, 4);
  for (int i = 0; i < 4; i++)
    cr_assert_float_eq(t[i], pow(10, i), 1e-9);
  struct svg_axis d = {.lo = 0.01, .hi = 1, .log10 = 1}; /* few decades: 1, 2, 5 each */
  n = svg_ticks(&d, 10, t);
  const double wd[] = {0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1};
  cr_assert_eq(n, 7);
  for (int i = 0; i < 7; i++)
    cr_assert_float_eq(t[i], wd[i], 1e-12);
  struct svg_axis e = {.lo = 1e-6, .hi = 1e6, .log10 = 1}; /* 13 decades in at most 5 ticks */
  n = svg_ticks(&e, 5, t);
  cr_assert(n >= 2 && n <= 5, "%d ticks", n);
  struct svg_axis bad = {.lo = 1, .hi = 1};
  cr_assert_eq(svg_ticks(&bad, 5, t), 0);
}

/* A count of molecules is whole: a histogram of 3 molecules has ticks at
 * 0, 1, 2, 3, never at 0.5 (issue 55: the docking histogram's half
 * molecules); a larger count keeps its round steps. */
Test(svg, whole_axes_tick_whole_numbers) {
  double t[32];
  struct svg_axis a = {.lo = 0, .hi = 3.24};
  int n = svg_ticks(&a, 9, t), halves = 0;
  for (int i = 0; i < n; i++)
    halves += t[i] != floor(t[i]);
  cr_assert_gt(halves, 0, "the plain axis has no fractional tick: the test below proves nothing");
  a.whole = 1;
  n = svg_ticks(&a, 9, t);
  cr_assert_eq(n, 4, "%d ticks", n);
  for (int i = 0; i < n; i++)
    cr_assert_float_eq(t[i], i, 1e-12, "tick %d is %g", i, t[i]);
  struct svg_axis b = {.lo = 0, .hi = 0.9, .whole = 1}; /* an empty histogram's axis */
  n = svg_ticks(&b, 9, t);
  cr_assert_eq(n, 1, "%d ticks", n);
  cr_assert_float_eq(t[0], 0, 1e-12);
  struct svg_axis c = {.lo = 0, .hi = 4968, .whole = 1};
  n = svg_ticks(&c, 9, t);
  cr_assert(n >= 3 && n <= 9, "%d ticks", n);
  for (int i = 0; i < n; i++)
    cr_assert_float_eq(fmod(t[i], 500), 0, 1e-9, "tick %d is %g", i, t[i]);
}

Test(svg, bars_have_the_heights_of_their_counts) {
  struct svg_plot p = parity;
  p.x = (struct svg_axis){.lo = 0, .hi = 5, .label = "score"};
  p.y = (struct svg_axis){.lo = 0, .hi = 4, .label = "molecules"};
  double edges[] = {0, 1, 2, 3, 4, 5}, counts[] = {0, 4, 1, 0, 2};
  struct svg s;
  svg_init(&s);
  svg_plot_begin(&s, &p, NULL);
  cr_assert_eq(svg_bars(&s, &p, edges, counts, 5, "hist"), 3, "empty bins are not drawn");
  svg_plot_end(&s);
  char *g = group(s.buf, "hist");
  cr_assert_eq(count(g, "<rect"), 3);
  const double want_x[] = {144, 228, 396}, want_h[] = {320, 80, 160};
  const char *q = g;
  for (int i = 0; i < 3; i++) {
    double x, y, w, h;
    q = strstr(q, "<rect");
    cr_assert(sscanf(q, "<rect x=\"%lf\" y=\"%lf\" width=\"%lf\" height=\"%lf\"", &x, &y, &w, &h) == 4);
    cr_assert_float_eq(x, want_x[i], 0.01, "bar %d at x %g", i, x);
    cr_assert_float_eq(w, 84, 0.01);
    cr_assert_float_eq(h, want_h[i], 0.01, "bar %d: height %g", i, h);
    cr_assert_float_eq(y + h, 350, 0.01, "bar %d does not stand on the axis", i);
    q++;
  }
  cr_assert(strstr(g, "<title>1 to 2: 4</title>"), "%s", g);
  free(g);
  svg_free(&s);
}

Test(svg, lines_break_at_gaps_and_log_axes_drop_nonpositive) {
  struct svg_plot p = parity;
  p.y = (struct svg_axis){.lo = 0.1, .hi = 100, .log10 = 1, .label = "loss"};
  double x[] = {1, 2, 3, 4, 5}, y[] = {10, 1, -1, 0.5, 0.2};
  struct svg s;
  svg_init(&s);
  svg_plot_begin(&s, &p, NULL);
  cr_assert_eq(svg_line(&s, &p, x, y, 5, "curve", "6 3"), 4);
  svg_plot_end(&s);
  char *g = group(s.buf, "curve");
  cr_assert_eq(count(g, "<polyline"), 2, "the negative value should split the line: %s", g);
  cr_assert(strstr(g, "stroke-dasharray=\"6 3\""));
  /* y = 1 on a 0.1..100 log axis: a third of the way up */
  double x0, y0, x1, y1;
  cr_assert(sscanf(strstr(g, "points=\""), "points=\"%lf,%lf %lf,%lf", &x0, &y0, &x1, &y1) == 4);
  cr_assert_float_eq(y1, 350 - 320.0 / 3, 0.01);
  cr_assert_float_eq(y0, 350 - 2 * 320.0 / 3, 0.01);
  free(g);
  svg_free(&s);
}

static double trapezoid(const double *x, const double *y, int n) {
  double a = 0;
  for (int i = 1; i < n; i++)
    a += (x[i] - x[i - 1]) * (y[i] + y[i - 1]) / 2;
  return a;
}

Test(svg, roc_curve_has_the_known_area) {
  /* actives ranked 1st and 3rd of 5: 5 of the 6 (active, inactive) pairs won */
  double score[] = {0.9, 0.8, 0.7, 0.6, 0.5}, label[] = {1, 0, 1, 0, 0}, fpr[6], tpr[6];
  int m = se3_roc_curve(score, label, 5, fpr, tpr);
  cr_assert_eq(m, 6);
  cr_assert_float_eq(trapezoid(fpr, tpr, m), 5.0 / 6, 1e-12);
  cr_assert(fpr[0] == 0 && tpr[0] == 0 && fpr[m - 1] == 1 && tpr[m - 1] == 1);
  /* with ties, random data: the area equals the Mann-Whitney ROC-AUC */
  srand(3);
  enum { N = 500 };
  double s2[N], l2[N], f2[N + 1], t2[N + 1];
  for (int i = 0; i < N; i++) {
    l2[i] = rand() % 3 == 0;
    s2[i] = (rand() % 40) + 5 * l2[i]; /* 40 levels: many ties */
  }
  struct se3_cls_metrics cm;
  se3_classification_metrics(s2, l2, N, &cm);
  m = se3_roc_curve(s2, l2, N, f2, t2);
  cr_assert(m > 2 && m <= N + 1);
  cr_assert_float_eq(trapezoid(f2, t2, m), cm.roc_auc, 1e-12, "area %.15g, ROC-AUC %.15g", trapezoid(f2, t2, m),
                     cm.roc_auc);
  double none[] = {0, 0};
  cr_assert_eq(se3_roc_curve(score, none, 2, fpr, tpr), 0, "no actives: no curve");
}

Test(svg, legend_names_each_series_in_text) {
  struct svg s;
  svg_init(&s);
  svg_plot_begin(&s, &parity, NULL);
  const struct svg_legend_entry e[] = {{.name = "train", .cls = "train", .line = 1},
                                       {.name = "valid <5%>", .cls = "valid", .line = 1, .dash = "6 3"},
                                       {.name = "test", .cls = "test", .shape = SVG_TRIANGLE}};
  svg_legend(&s, &parity, e, 3, 0);
  svg_plot_end(&s);
  char *g = strstr(s.buf, "<g class=\"legend\">");
  cr_assert(g);
  cr_assert(strstr(g, ">train</text>") && strstr(g, ">valid &lt;5%&gt;</text>") && strstr(g, ">test</text>"), "%s", g);
  cr_assert(strstr(g, "stroke-dasharray=\"6 3\""), "the dashed series' sample is not dashed");
  cr_assert(strstr(g, "<path d=\"M"), "the triangle marker is missing");
  svg_free(&s);
  /* each corner: the legend's box inside the data area, against that corner */
  for (int corner = 0; corner < 3; corner++) {
    svg_init(&s);
    svg_legend(&s, &parity, e, 3, corner);
    double x, y, w, h;
    g = strstr(s.buf, "<rect ");
    cr_assert(g && sscanf(g, "<rect x=\"%lf\" y=\"%lf\" width=\"%lf\" height=\"%lf\"", &x, &y, &w, &h) == 4);
    double x0 = parity.left, x1 = parity.width - parity.right, y0 = parity.top, y1 = parity.height - parity.bottom;
    cr_assert(x >= x0 && x + w <= x1 && y >= y0 && y + h <= y1, "corner %d: the box leaves the data area", corner);
    cr_assert_float_eq(corner ? x1 - (x + w) : x - x0, 8, 1e-9, "corner %d: not against its side", corner);
    cr_assert_float_eq(corner == 1 ? y1 - (y + h) : y - y0, 8, 1e-9, "corner %d: not against its edge", corner);
    svg_free(&s);
  }
}

/* The x tick labels of a narrow range (a histogram of probabilities within
 * 0.01, issue 55) do not run into each other: each pair of neighbours is
 * at least half their labels' widths apart (7 px a character at 12 px). */
Test(svg, x_tick_labels_do_not_overlap) {
  struct svg s;
  svg_init(&s);
  struct svg_plot p = {.title = "narrow", .width = 460, .height = 320, .left = 66, .right = 16, .top = 30,
                       .bottom = 44};
  p.x = (struct svg_axis){.lo = -0.00052, .hi = 0.01097, .label = "p"}; /* 0 to 0.01045 padded 5 % */
  p.y = (struct svg_axis){.lo = 0, .hi = 6, .label = "molecules", .whole = 1};
  svg_plot_begin(&s, &p, NULL);
  svg_plot_end(&s);
  const char *g = strstr(s.buf, "<g class=\"xticks\"");
  cr_assert(g);
  double prev_x = 0;
  size_t prev_len = 0;
  int n = 0;
  for (const char *t = strstr(g, "<text x=\""); t && t < strstr(g, "</g>"); t = strstr(t + 1, "<text x=\"")) {
    double x;
    cr_assert_eq(sscanf(t, "<text x=\"%lf\"", &x), 1);
    const char *lab = strchr(t, '>') + 1;
    size_t len = (size_t)(strchr(lab, '<') - lab);
    if (n++)
      cr_assert_geq(x - prev_x, 7.0 * (double)(len + prev_len) / 2, "labels of %zu and %zu characters %.1f px apart",
                    prev_len, len, x - prev_x);
    prev_x = x;
    prev_len = len;
  }
  cr_assert_geq(n, 3, "only %d x ticks", n);
  svg_free(&s);
}

/* Before (hardening IV): a name holding raw bytes (Latin-1, a cut UTF-8
 * sequence) went into report.html as it was, and the page was not valid
 * UTF-8. Every byte that starts no well-formed character, and every
 * control character but tab, LF and CR, is now U+FFFD; valid text is kept. */
Test(svg, escaped_text_is_valid_utf8) {
  static const struct {
    const char *in, *out;
  } cases[] = {
      {"caf\xc3\xa9 <b>", "caf\xc3\xa9 &lt;b&gt;"},                             /* UTF-8 kept, markup escaped */
      {"caf\xe9", "caf\xef\xbf\xbd"},                                           /* Latin-1 */
      {"x\xe2\x82", "x\xef\xbf\xbd\xef\xbf\xbd"},                               /* cut short */
      {"\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd"},                                 /* overlong '/' */
      {"\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},                 /* a surrogate */
      {"\xf4\x90\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* past U+10FFFF */
      {"\xf0\x9f\x98\x80!", "\xf0\x9f\x98\x80!"},                               /* U+1F600 kept */
      {"a\x01"
       "b\tc\n",
       "a\xef\xbf\xbd"
       "b\tc\n"}, /* a control byte */
      {"\xff\xfe", "\xef\xbf\xbd\xef\xbf\xbd"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    struct svg s;
    svg_init(&s);
    svg_escaped(&s, cases[i].in);
    svg_printf(&s, "%s", ""); /* (the buffer NUL-terminated) */
    cr_assert(s.len == strlen(cases[i].out) && !memcmp(s.buf, cases[i].out, s.len), "case %zu: got '%.*s'", i,
              (int)s.len, s.buf);
    svg_free(&s);
  }
}
