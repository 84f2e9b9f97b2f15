/* svg.c — the SVG plot writer (svg.h). */
#define _GNU_SOURCE
#include "common/svg.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* clip path ids, unique within the process (several plots share a page) */
static unsigned next_clip;

void svg_init(struct svg *s) { memset(s, 0, sizeof *s); }

void svg_free(struct svg *s) {
  free(s->buf);
  memset(s, 0, sizeof *s);
}

static int grow(struct svg *s, size_t need) {
  if (s->oom) return -1;
  if (s->len + need + 1 <= s->cap) return 0;
  size_t cap = s->cap ? s->cap : 4096;
  while (cap < s->len + need + 1)
    cap *= 2;
  char *b = realloc(s->buf, cap);
  if (!b) {
    s->oom = 1;
    return -1;
  }
  s->buf = b;
  s->cap = cap;
  return 0;
}

void svg_printf(struct svg *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0 || grow(s, (size_t)n)) return;
  va_start(ap, fmt);
  vsnprintf(s->buf + s->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  s->len += (size_t)n;
}

void svg_escaped(struct svg *s, const char *text) {
  for (const char *c = text ? text : ""; *c; c++) {
    switch (*c) {
    case '&':
      svg_printf(s, "&amp;");
      break;
    case '<':
      svg_printf(s, "&lt;");
      break;
    case '>':
      svg_printf(s, "&gt;");
      break;
    case '"':
      svg_printf(s, "&quot;");
      break;
    case '\'':
      svg_printf(s, "&#39;");
      break;
    default: {
      unsigned char b = (unsigned char)*c;
      if (b < 0x80) {
        if (b < 0x20 && b != '\t' && b != '\n' && b != '\r')
          svg_printf(s, "\xEF\xBF\xBD");
        else
          svg_printf(s, "%c", *c);
        break;
      }
      /* the length of a well-formed sequence starting here (RFC 3629), or 0 */
      const unsigned char *u = (const unsigned char *)c;
      int n = b >= 0xC2 && b <= 0xDF ? 2 : b >= 0xE0 && b <= 0xEF ? 3 : b >= 0xF0 && b <= 0xF4 ? 4 : 0;
      for (int k = 1; k < n; k++)
        if ((u[k] & 0xC0) != 0x80) n = 0;
      if (n == 3 && ((b == 0xE0 && u[1] < 0xA0) || (b == 0xED && u[1] > 0x9F))) n = 0; /* overlong, surrogate */
      if (n == 4 && ((b == 0xF0 && u[1] < 0x90) || (b == 0xF4 && u[1] > 0x8F))) n = 0; /* overlong, past U+10FFFF */
      if (!n) {
        svg_printf(s, "\xEF\xBF\xBD");
        break;
      }
      svg_printf(s, "%.*s", n, c);
      c += n - 1;
    }
    }
  }
}

/* position of v along an axis as a fraction of its length (0 at lo) */
static double frac(const struct svg_axis *a, double v) {
  if (a->log10) {
    if (!(v > 0) || !(a->lo > 0)) return NAN;
    return (log10(v) - log10(a->lo)) / (log10(a->hi) - log10(a->lo));
  }
  return (v - a->lo) / (a->hi - a->lo);
}

double svg_x(const struct svg_plot *p, double v) { return p->left + frac(&p->x, v) * (p->width - p->left - p->right); }

double svg_y(const struct svg_plot *p, double v) {
  return p->height - p->bottom - frac(&p->y, v) * (p->height - p->top - p->bottom);
}

static int inside(const struct svg_axis *a, double v) {
  double f = frac(a, v);
  return isfinite(f) && f >= -1e-9 && f <= 1 + 1e-9;
}

int svg_ticks(const struct svg_axis *a, int max, double *out) {
  int n = 0;
  if (max <= 0 || !(a->hi > a->lo) || !isfinite(a->lo) || !isfinite(a->hi)) return 0;
  if (a->log10) {
    if (!(a->lo > 0)) return 0;
    int e0 = (int)floor(log10(a->lo)), e1 = (int)ceil(log10(a->hi));
    int steps = e1 - e0 + 1;
    static const double few[] = {1, 2, 5}, one[] = {1};
    const double *m = steps <= 3 ? few : one;
    int nm = steps <= 3 ? 3 : 1, stride = 1;
    while ((steps + stride - 1) / stride > max)
      stride++; /* every stride-th decade */
    for (int e = e0; e <= e1; e++) {
      if ((e - e0) % stride) continue;
      for (int k = 0; k < nm && n < max; k++) {
        double v = m[k] * pow(10, e);
        if (v >= a->lo * (1 - 1e-12) && v <= a->hi * (1 + 1e-12)) out[n++] = v;
      }
    }
    return n;
  }
  double span = a->hi - a->lo, step = pow(10, floor(log10(span)));
  static const double mult[] = {0.1, 0.2, 0.5, 1, 2, 5, 10};
  for (size_t k = 0; k < sizeof mult / sizeof *mult; k++) { /* the smallest round step giving <= max ticks */
    double st = step * mult[k];
    if (a->whole && st < 1 - 1e-9) continue; /* no half a molecule */
    if (floor(a->hi / st + 1e-9) - ceil(a->lo / st - 1e-9) + 1 <= max) {
      step = st;
      break;
    }
  }
  if (a->whole && step < 1) step = 1;
  for (double t = ceil(a->lo / step - 1e-9); n < max && t * step <= a->hi + 1e-9 * step; t++) {
    double v = t * step;
    if (fabs(v) < 1e-12 * step) v = 0; /* no -0 */
    out[n++] = v;
  }
  return n;
}

static void number(char *buf, size_t n, double v) {
  if (v != 0 && (fabs(v) >= 1e5 || fabs(v) < 1e-3))
    snprintf(buf, n, "%.0e", v);
  else
    snprintf(buf, n, "%.6g", v);
}

void svg_plot_begin(struct svg *s, const struct svg_plot *p, const char *desc) {
  unsigned id = next_clip++;
  s->n_clip = (int)id;
  double x0 = p->left, x1 = p->width - p->right, y0 = p->top, y1 = p->height - p->bottom;
  svg_printf(s,
             "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
             "role=\"img\" aria-labelledby=\"t%u d%u\" font-family=\"sans-serif\" font-size=\"12\">\n",
             p->width, p->height, p->width, p->height, id, id);
  svg_printf(s, "<title id=\"t%u\">", id);
  svg_escaped(s, p->title);
  svg_printf(s, "</title>\n<desc id=\"d%u\">", id);
  svg_escaped(s, desc ? desc : "");
  svg_printf(s,
             "</desc>\n<defs><clipPath id=\"c%u\"><rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\"/>"
             "</clipPath></defs>\n",
             id, x0, y0, x1 - x0, y1 - y0);
  svg_printf(s, "<text class=\"plot-title\" x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\" font-size=\"14\">",
             (x0 + x1) / 2, y0 - 8);
  svg_escaped(s, p->title);
  svg_printf(s,
             "</text>\n<rect class=\"frame\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"none\" "
             "stroke=\"#444\"/>\n",
             x0, y0, x1 - x0, y1 - y0);
  double t[32];
  char lab[32];
  /* as many x ticks as their labels fit side by side (about 7 px a
   * character at 12 px, 8 px apart): 0.001 0.002 ... would run together */
  int n = 0;
  for (int max = 11; max >= 2; max = n - 1) {
    n = svg_ticks(&p->x, max, t);
    size_t longest = 0;
    for (int i = 0; i < n; i++) {
      number(lab, sizeof lab, t[i]);
      if (strlen(lab) > longest) longest = strlen(lab);
    }
    if (n <= 2 || n * (7.0 * (double)longest + 8) <= x1 - x0) break;
  }
  svg_printf(s, "<g class=\"xticks\" stroke=\"#444\">\n");
  for (int i = 0; i < n; i++) {
    double x = svg_x(p, t[i]);
    number(lab, sizeof lab, t[i]);
    svg_printf(s,
               "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/><text x=\"%.2f\" y=\"%.2f\" stroke=\"none\" "
               "text-anchor=\"middle\">%s</text>\n",
               x, y1, x, y1 + 5, x, y1 + 18, lab);
  }
  n = svg_ticks(&p->y, 9, t);
  svg_printf(s, "</g>\n<g class=\"yticks\" stroke=\"#444\">\n");
  for (int i = 0; i < n; i++) {
    double y = svg_y(p, t[i]);
    number(lab, sizeof lab, t[i]);
    svg_printf(s,
               "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/><text x=\"%.2f\" y=\"%.2f\" stroke=\"none\" "
               "text-anchor=\"end\">%s</text>\n",
               x0 - 5, y, x0, y, x0 - 8, y + 4, lab);
  }
  svg_printf(s, "</g>\n<text class=\"xlabel\" x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\">", (x0 + x1) / 2,
             (double)p->height - 6);
  svg_escaped(s, p->x.label);
  svg_printf(s, "</text>\n<text class=\"ylabel\" transform=\"translate(14 %.2f) rotate(-90)\" text-anchor=\"middle\">",
             (y0 + y1) / 2);
  svg_escaped(s, p->y.label);
  svg_printf(s, "</text>\n");
}

void svg_plot_end(struct svg *s) { svg_printf(s, "</svg>\n"); }

static void marker(struct svg *s, double x, double y, enum svg_marker shape) {
  switch (shape) {
  case SVG_SQUARE:
    svg_printf(s, "<rect x=\"%.2f\" y=\"%.2f\" width=\"6\" height=\"6\"/>", x - 3, y - 3);
    break;
  case SVG_TRIANGLE:
    svg_printf(s, "<path d=\"M%.2f %.2fL%.2f %.2fL%.2f %.2fZ\"/>", x, y - 4, x + 3.5, y + 3, x - 3.5, y + 3);
    break;
  default:
    svg_printf(s, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"3\"/>", x, y);
  }
}

int svg_points(struct svg *s, const struct svg_plot *p, const double *x, const double *y, int n, const char *cls,
               enum svg_marker shape) {
  int drawn = 0;
  svg_printf(s, "<g class=\"%s\">\n", cls);
  for (int i = 0; i < n; i++) {
    if (!inside(&p->x, x[i]) || !inside(&p->y, y[i])) continue;
    marker(s, svg_x(p, x[i]), svg_y(p, y[i]), shape);
    svg_printf(s, "\n");
    drawn++;
  }
  svg_printf(s, "</g>\n");
  return drawn;
}

int svg_line(struct svg *s, const struct svg_plot *p, const double *x, const double *y, int n, const char *cls,
             const char *dash) {
  int drawn = 0, open = 0;
  svg_printf(s, "<g class=\"%s\" fill=\"none\" clip-path=\"url(#c%d)\"%s%s%s>\n", cls, s->n_clip,
             dash ? " stroke-dasharray=\"" : "", dash ? dash : "", dash ? "\"" : "");
  for (int i = 0; i < n; i++) {
    double px = svg_x(p, x[i]), py = svg_y(p, y[i]);
    if (!isfinite(px) || !isfinite(py)) {
      if (open) svg_printf(s, "\"/>\n");
      open = 0;
      continue;
    }
    svg_printf(s, "%s%.2f,%.2f", open ? " " : "<polyline points=\"", px, py);
    open = 1;
    drawn++;
  }
  if (open) svg_printf(s, "\"/>\n");
  svg_printf(s, "</g>\n");
  return drawn;
}

int svg_bars(struct svg *s, const struct svg_plot *p, const double *edges, const double *count, int n,
             const char *cls) {
  int drawn = 0;
  char a[32], b[32];
  double base = p->y.log10 ? p->y.lo : (p->y.lo > 0 ? p->y.lo : p->y.hi < 0 ? p->y.hi : 0);
  svg_printf(s, "<g class=\"%s\">\n", cls);
  for (int i = 0; i < n; i++) {
    if (!(count[i] > 0) || !inside(&p->x, edges[i]) || !inside(&p->x, edges[i + 1])) continue;
    double top = count[i] < p->y.hi ? count[i] : p->y.hi;
    double x0 = svg_x(p, edges[i]), x1 = svg_x(p, edges[i + 1]), y0 = svg_y(p, top), y1 = svg_y(p, base);
    if (!isfinite(y0) || !isfinite(y1)) continue;
    number(a, sizeof a, edges[i]);
    number(b, sizeof b, edges[i + 1]);
    svg_printf(s, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\"><title>%s to %s: %.10g</title></rect>\n",
               x0, y0, x1 - x0, y1 - y0, a, b, count[i]);
    drawn++;
  }
  svg_printf(s, "</g>\n");
  return drawn;
}

void svg_legend(struct svg *s, const struct svg_plot *p, const struct svg_legend_entry *e, int n, int corner) {
  double w = 0;
  for (int i = 0; i < n; i++) {
    double wi = 7.0 * (double)strlen(e[i].name ? e[i].name : "") + 34;
    if (wi > w) w = wi;
  }
  double h = 18.0 * n + 6;
  double x = corner ? p->width - p->right - w - 8 : p->left + 8;
  double y = corner == 1 ? p->height - p->bottom - h - 8 : p->top + 8;
  svg_printf(s,
             "<g class=\"legend\">\n<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"#fff\" "
             "fill-opacity=\"0.85\" stroke=\"#999\"/>\n",
             x, y, w, h);
  for (int i = 0; i < n; i++) {
    double cy = y + 14 + 18.0 * i;
    svg_printf(s, "<g class=\"%s\">", e[i].cls);
    if (e[i].line)
      svg_printf(s, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" fill=\"none\"%s%s%s/>", x + 6, cy - 4,
                 x + 26, cy - 4, e[i].dash ? " stroke-dasharray=\"" : "", e[i].dash ? e[i].dash : "",
                 e[i].dash ? "\"" : "");
    else
      marker(s, x + 16, cy - 4, e[i].shape);
    svg_printf(s, "</g><text x=\"%.2f\" y=\"%.2f\">", x + 32, cy);
    svg_escaped(s, e[i].name);
    svg_printf(s, "</text>\n");
  }
  svg_printf(s, "</g>\n");
}
