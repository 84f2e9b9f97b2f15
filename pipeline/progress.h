/* progress.h — progress of long work: a bar with rate and ETA on a terminal,
 * one timestamped line every few seconds otherwise (Slurm logs). */
#ifndef SE3_PROGRESS_H
#define SE3_PROGRESS_H

#include <stdint.h>
#include <stdio.h>

enum progress_mode { PROGRESS_AUTO, PROGRESS_BAR, PROGRESS_LINES, PROGRESS_NONE };

struct progress {
  FILE *out;
  enum progress_mode mode;
  char label[64];
  const char *unit;
  int64_t total, done, done0;
  double t0, last, interval;
  int drawn;
};

enum progress_mode progress_mode_parse(const char *s);
/* done0: items already finished by an earlier run (not counted in the rate). */
void progress_start(struct progress *p, enum progress_mode mode, double interval_s, const char *label,
                    const char *unit, int64_t total, int64_t done0);
void progress_add(struct progress *p, int64_t n);
/* Final line: "label: N unit in T s (R unit/s)" plus the caller's summary. */
void progress_end(struct progress *p, const char *summary);
/* A timestamped log line that does not garble the bar. */
void progress_log(struct progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
double progress_now(void);

#endif
