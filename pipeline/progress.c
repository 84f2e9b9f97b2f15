/* progress.c — progress bar on a terminal, timestamped lines elsewhere. */
#define _GNU_SOURCE
#include "pipeline/progress.h"

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
  p->t0 = p->last = progress_now();
}

static void draw(struct progress *p, double t) {
  double el = t - p->t0;
  double rate = el > 0 ? (double)(p->done - p->done0) / el : 0;
  double frac = p->total > 0 ? (double)p->done / (double)p->total : 1;
  char eta[32];
  fmt_eta(rate > 0 ? (double)(p->total - p->done) / rate : -1, eta, sizeof eta);
  if (p->mode == PROGRESS_BAR) {
    char bar[31];
    int fill = (int)(frac * 30);
    for (int i = 0; i < 30; i++)
      bar[i] = i < fill ? '#' : '.';
    bar[30] = 0;
    fprintf(p->out, "\r%s [%s] %lld/%lld %s %3.0f%% %.0f/s ETA %s  ", p->label, bar, (long long)p->done,
            (long long)p->total, p->unit, frac * 100, rate, eta);
    p->drawn = 1;
  } else {
    char ts[32];
    stamp(ts, sizeof ts);
    fprintf(p->out, "[%s] %s: %lld/%lld %s (%.1f%%), %.1f %s/s, ETA %s\n", ts, p->label, (long long)p->done,
            (long long)p->total, p->unit, frac * 100, rate, p->unit, eta);
  }
  fflush(p->out);
}

void progress_add(struct progress *p, int64_t n) {
  p->done += n;
  if (p->mode == PROGRESS_NONE) return;
  double t = progress_now();
  double every = p->mode == PROGRESS_BAR ? 0.1 : p->interval;
  if (t - p->last < every) return;
  p->last = t;
  draw(p, t);
}

void progress_log(struct progress *p, const char *fmt, ...) {
  if (p && p->drawn) {
    fputc('\n', stderr);
    p->drawn = 0;
  }
  char ts[32];
  stamp(ts, sizeof ts);
  fprintf(stderr, "[%s] ", ts);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  fflush(stderr);
}

void progress_end(struct progress *p, const char *summary) {
  double el = progress_now() - p->t0;
  int64_t n = p->done - p->done0;
  if (p->mode == PROGRESS_BAR && p->drawn) fputc('\n', p->out);
  p->drawn = 0;
  if (p->mode == PROGRESS_NONE) return;
  char ts[32];
  stamp(ts, sizeof ts);
  char rate[64] = "";
  if (n > 1) snprintf(rate, sizeof rate, " (%.1f %s/s)", el > 0 ? (double)n / el : 0.0, p->unit);
  fprintf(p->out, "[%s] %s: %lld %s in %.1f s%s%s%s\n", ts, p->label, (long long)n, p->unit, el, rate,
          summary ? "; " : "", summary ? summary : "");
  fflush(p->out);
}
