/* progress.c — progress bar on a terminal, timestamped lines elsewhere. */
#define _GNU_SOURCE
#include "pipeline/progress.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

double progress_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

enum progress_mode progress_mode_parse(const char *s) {
  if (!s || !strcmp(s, "auto")) return PROGRESS_AUTO;
  if (!strcmp(s, "bar")) return PROGRESS_BAR;
  if (!strcmp(s, "lines")) return PROGRESS_LINES;
  return PROGRESS_NONE;
}

static void stamp(char *buf, size_t n) {
  time_t t = time(NULL);
  struct tm tm;
  localtime_r(&t, &tm);
  strftime(buf, n, "%Y-%m-%d %H:%M:%S", &tm);
}

static void fmt_eta(double s, char *buf, size_t n) {
  if (s < 0 || s > 1e7) {
    snprintf(buf, n, "?");
    return;
  }
  long v = (long)(s + 0.5);
  if (v >= 3600)
    snprintf(buf, n, "%ld:%02ld:%02ld", v / 3600, v / 60 % 60, v % 60);
  else
    snprintf(buf, n, "%ld:%02ld", v / 60, v % 60);
}

void progress_duration_text(double s, char *buf, size_t len) {
  if (!isfinite(s) || s < 0) {
    snprintf(buf, len, "?");
  } else if (s < 60) {
    snprintf(buf, len, "%.1f s", s);
  } else if (s < 3600) {
    long v = (long)(s + 0.5);
    snprintf(buf, len, "%ld min %ld s", v / 60, v % 60);
  } else {
    long v = (long)(s / 60 + 0.5);
    snprintf(buf, len, "%ld h %02ld min", v / 60, v % 60);
  }
}

void progress_rate_text(int64_t n, double seconds, const char *unit, char *buf, size_t len) {
  if (n <= 0 || !isfinite(seconds) || seconds <= 0) {
    snprintf(buf, len, "%s", "");
    return;
  }
  double per = seconds / (double)n; /* seconds an item */
  if (per <= 1.0) {
    double rate = 1.0 / per;
    snprintf(buf, len, rate >= 100 ? "%.0f %s/s" : "%.1f %s/s", rate, unit);
  } else if (per < 10) {
    snprintf(buf, len, "%.1f s/%s", per, unit);
  } else if (per < 60) {
    snprintf(buf, len, "%.0f s/%s", per, unit);
  } else if (per < 3600) {
    snprintf(buf, len, "%.1f min/%s", per / 60, unit);
  } else {
    snprintf(buf, len, "%.1f h/%s", per / 3600, unit);
  }
}

double progress_eta_s(const struct progress *p, double t) {
  int64_t n = p->done - p->done0;
  double el = t - p->t0;
  if (n <= 0 || el <= 0) return -1;
  int64_t left = p->total - p->done;
  return left > 0 ? (double)left * el / (double)n : 0;
}

/* ", RATE, ETA E" or ", none finished yet in this run, ETA unknown"; the
 * work's own ETA where it gave one (progress_working) */
static double hint_left(const struct progress *p, double t) {
  double left = p->hint_s - (t - p->hint_t);
  return left > 0 ? left : 0;
}

static void rate_eta(const struct progress *p, double t, char *buf, size_t len) {
  char rate[64], eta[32];
  if (p->hint_s >= 0) {
    fmt_eta(hint_left(p, t), eta, sizeof eta);
    progress_rate_text(p->done - p->done0, t - p->t0, p->unit, rate, sizeof rate);
    snprintf(buf, len, "%s%sETA %s", rate, rate[0] ? ", " : "", eta);
    return;
  }
  if (p->done - p->done0 <= 0 && p->prior_s > 0) {
    progress_rate_text(1, p->prior_s, p->unit, rate, sizeof rate);
    fmt_eta((double)(p->total - p->done) * p->prior_s, eta, sizeof eta);
    snprintf(buf, len, "none finished yet in this run, ETA about %s at earlier runs' %s", eta, rate);
    return;
  }
  if (p->done - p->done0 <= 0) {
    snprintf(buf, len, "none finished yet in this run, ETA unknown");
    return;
  }
  progress_rate_text(p->done - p->done0, t - p->t0, p->unit, rate, sizeof rate);
  fmt_eta(progress_eta_s(p, t), eta, sizeof eta);
  snprintf(buf, len, "%s%sETA %s", rate, rate[0] ? ", " : "", eta);
}

void progress_status_text(const struct progress *p, double t, char *buf, size_t len) {
  double frac = p->total > 0 ? (double)p->done / (double)p->total : 1;
  char re[256];
  rate_eta(p, t, re, sizeof re);
  snprintf(buf, len, "%s: %lld/%lld %s (%.1f%%), %s", p->label, (long long)p->done, (long long)p->total, p->unit,
           frac * 100, re);
}

void progress_start(struct progress *p, enum progress_mode mode, double interval_s, const char *label, const char *unit,
                    int64_t total, int64_t done0) {
  memset(p, 0, sizeof *p);
  p->out = stderr;
  if (mode == PROGRESS_AUTO) mode = isatty(fileno(stderr)) ? PROGRESS_BAR : PROGRESS_LINES;
  p->mode = mode;
  snprintf(p->label, sizeof p->label, "%s", label);
  p->unit = unit;
  p->total = total;
  p->done = p->done0 = done0;
  p->interval = interval_s > 0 ? interval_s : 5;
  p->clock = progress_now;
  p->t0 = p->last = progress_now();
  p->hint_s = -1;
}

/* p's clock (progress_now before progress_start) */
static double now_of(const struct progress *p) { return p->clock ? p->clock() : progress_now(); }

void progress_set_clock(struct progress *p, double (*clock)(void)) {
  p->clock = clock ? clock : progress_now;
  p->t0 = p->last = p->clock();
}

static void draw(struct progress *p, double t) {
  if (p->mode == PROGRESS_BAR) {
    double frac = p->total > 0 ? (double)p->done / (double)p->total : 1;
    char bar[31], re[256];
    int fill = (int)(frac * 30);
    for (int i = 0; i < 30; i++)
      bar[i] = i < fill ? '#' : '.';
    bar[30] = 0;
    rate_eta(p, t, re, sizeof re);
    fprintf(p->out, "\r%s [%s] %lld/%lld %s %3.0f%% %s  ", p->label, bar, (long long)p->done, (long long)p->total,
            p->unit, frac * 100, re);
    p->drawn = 1;
  } else {
    char ts[32], line[512];
    stamp(ts, sizeof ts);
    progress_status_text(p, t, line, sizeof line);
    fprintf(p->out, "[%s] %s\n", ts, line);
  }
  fflush(p->out);
}

void progress_add(struct progress *p, int64_t n) {
  p->done += n;
  if (p->mode == PROGRESS_NONE) return;
  double t = now_of(p);
  double every = p->mode == PROGRESS_BAR ? 0.1 : p->interval;
  if (t - p->last < every) return;
  p->last = t;
  draw(p, t);
}

void progress_skip(struct progress *p, int64_t n) {
  p->done += n;
  p->done0 += n;
}

static void vlog(struct progress *p, const char *fmt, va_list ap) {
  FILE *out = p && p->out ? p->out : stderr; /* (a run logs before its first stage starts a progress) */
  if (p && p->drawn) {
    fputc('\n', out);
    p->drawn = 0;
  }
  char ts[32];
  stamp(ts, sizeof ts);
  fprintf(out, "[%s] ", ts);
  vfprintf(out, fmt, ap);
  fputc('\n', out);
  fflush(out);
}

void progress_log(struct progress *p, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vlog(p, fmt, ap);
  va_end(ap);
}

/* an item's line, then the bar drawn again below it */
static void item_line(struct progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void item_line(struct progress *p, const char *fmt, ...) {
  if (p->mode == PROGRESS_NONE) return;
  va_list ap;
  va_start(ap, fmt);
  vlog(p, fmt, ap);
  va_end(ap);
  if (p->mode == PROGRESS_BAR) draw(p, now_of(p));
}

void progress_prior(struct progress *p, double s) {
  if (!(s > 0) || !isfinite(s)) return;
  int first = p->prior_s <= 0;
  p->prior_s = s;
  if (!first || p->total - p->done <= 0 || p->done - p->done0 > 0) return;
  char rate[64], eta[32];
  progress_rate_text(1, s, p->unit, rate, sizeof rate);
  fmt_eta(p->hint_s >= 0 ? hint_left(p, now_of(p)) : (double)(p->total - p->done) * s, eta, sizeof eta);
  item_line(p, "%s: earlier runs took %s: about %s for the %lld left", p->label, rate, eta,
            (long long)(p->total - p->done));
}

void progress_item_start(struct progress *p, const char *name) {
  p->in_flight++;
  item_line(p, "%s: started %s (%lld of %lld)", p->label, name, (long long)(p->done + p->in_flight),
            (long long)p->total);
}

void progress_item_end(struct progress *p, const char *name, int ok, const char *verb, double seconds,
                       const char *detail) {
  if (p->in_flight > 0) p->in_flight--;
  if (ok)
    p->items_ok++;
  else
    p->items_rejected++;
  p->done++;
  double t = now_of(p);
  char took[64], re[256];
  progress_duration_text(seconds, took, sizeof took);
  rate_eta(p, t, re, sizeof re);
  item_line(p, "%s: %s %s in %s%s%s (%lld of %lld done, %s)", p->label, name, verb, took, detail && *detail ? ", " : "",
            detail ? detail : "", (long long)p->done, (long long)p->total, re);
  p->last = t;
}

void progress_working(struct progress *p, double seconds_left, const char *how, const char *running) {
  double t = now_of(p);
  p->hint_s = isfinite(seconds_left) && seconds_left >= 0 ? seconds_left : -1;
  p->hint_t = t;
  snprintf(p->hint_how, sizeof p->hint_how, "%s", how ? how : "");
  if (p->mode == PROGRESS_NONE) return;
  if (p->mode == PROGRESS_BAR) {
    if (t - p->last >= 1) {
      p->last = t;
      draw(p, t);
    }
    return;
  }
  if (t - p->last < p->interval) return;
  p->last = t;
  char ts[32], line[512];
  stamp(ts, sizeof ts);
  progress_status_text(p, t, line, sizeof line);
  int said = p->hint_s >= 0 && p->hint_how[0];
  fprintf(p->out, "[%s] %s%s%.127s%s%s%.1000s\n", ts, line, said ? " (" : "", said ? p->hint_how : "", said ? ")" : "",
          running && *running ? "; running " : "", running ? running : "");
  fflush(p->out);
}

void progress_end(struct progress *p, const char *summary) {
  double el = now_of(p) - p->t0;
  int64_t n = p->done - p->done0;
  if (p->mode == PROGRESS_BAR && p->drawn) fputc('\n', p->out);
  p->drawn = 0;
  if (p->mode == PROGRESS_NONE) return;
  char ts[32], rate[64], paren[80] = "";
  stamp(ts, sizeof ts);
  progress_rate_text(n, el, p->unit, rate, sizeof rate);
  if (n > 1 && rate[0]) snprintf(paren, sizeof paren, " (%s)", rate);
  /* (the time in seconds, as scripts read it: bench/gen3d.sh, bench/rerun.sh) */
  fprintf(p->out, "[%s] %s: %lld %s in %.1f s%s%s%s\n", ts, p->label, (long long)n, p->unit, el, paren,
          summary ? "; " : "", summary ? summary : "");
  fflush(p->out);
}
