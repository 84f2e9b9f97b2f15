/* progress.h — progress of long work: a bar with rate and ETA on a terminal,
 * one timestamped line every few seconds otherwise (Slurm logs).
 *
 * The rate and the ETA come from the items this run finished alone: items
 * an earlier run finished (done0, progress_skip) count as done but not in
 * the rate, so a resumed run neither shows an earlier run's work as its own
 * speed nor an ETA of seconds. Before this run has finished an item there
 * is no rate and the ETA says so. A slow rate reads as time per item
 * ("32 s/mol", "1.9 min/mol"), never "0.0 mol/s".
 *
 * Minutes-long items (a docking) are announced one by one
 * (progress_item_start / progress_item_end): a line when each starts and
 * one when it ends, always in lines mode, above the bar on a terminal. */
#ifndef SE3_PROGRESS_H
#define SE3_PROGRESS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum progress_mode { PROGRESS_AUTO, PROGRESS_BAR, PROGRESS_LINES, PROGRESS_NONE };

struct progress {
  FILE *out;
  enum progress_mode mode;
  char label[64];
  const char *unit;
  int64_t total, done, done0;       /* done0: finished by earlier runs (found done), not in the rate */
  int64_t in_flight;                /* items started and not yet ended (progress_item_*) */
  int64_t items_ok, items_rejected; /* items ended through progress_item_end */
  double prior_s;                   /* seconds an item took in earlier runs (progress_prior); 0: unknown */
  double hint_s, hint_t;            /* the work's own ETA (progress_working): seconds left at time hint_t; < 0: none */
  char hint_how[128];               /* ... and what it rests on */
  double t0, last, interval;
  double (*clock)(void); /* progress_now; the tests set their own (progress_set_clock) */
  int drawn;
};

enum progress_mode progress_mode_parse(const char *s);
/* done0: items already finished by an earlier run (not counted in the rate). */
void progress_start(struct progress *p, enum progress_mode mode, double interval_s, const char *label, const char *unit,
                    int64_t total, int64_t done0);
/* The clock p reads from now on (the start taken again from it): for the tests. */
void progress_set_clock(struct progress *p, double (*clock)(void));
/* n more items finished by this run. */
void progress_add(struct progress *p, int64_t n);
/* n more items found finished by an earlier run: done, not in the rate. */
void progress_skip(struct progress *p, int64_t n);
/* An item's wall time in earlier runs (at this run's parallelism), for an
 * ETA before this run has finished one; the first time, a line says it
 * and the ETA it gives (the work's own, where progress_working gave one).
 * s <= 0: nothing known, nothing said. */
void progress_prior(struct progress *p, double s);
/* Item `name` started: "label: started NAME (K of N)", K counting the items
 * done and in flight. */
void progress_item_start(struct progress *p, const char *name);
/* Item `name` ended, finished by this run (as progress_add(p, 1)): ok 1
 * stored, 0 rejected; "label: NAME VERB in DURATION[, DETAIL] (K of N done,
 * RATE, ETA E)". detail may be NULL or "". */
void progress_item_end(struct progress *p, const char *name, int ok, const char *verb, double seconds,
                       const char *detail);
/* While items run (called often): the work's own estimate of the seconds
 * left (< 0: none; its items differ in size, which a rate cannot see),
 * what it rests on, and what runs ("A for 1 min 10 s, B for 35 s"). In
 * lines mode a line at most every interval since the last one (the
 * heartbeat: "label: D/N unit (P%), RATE, ETA E (HOW); running RUNNING");
 * on a terminal the bar, at most every second. Until said again, the ETA
 * of every line is this one, less the time since. */
void progress_working(struct progress *p, double seconds_left, const char *how, const char *running);
/* Final line: "label: N unit in S s (RATE)" plus the caller's summary; N
 * the items this run finished. */
void progress_end(struct progress *p, const char *summary);
/* A timestamped log line that does not garble the bar. */
void progress_log(struct progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
double progress_now(void);

/* ---- the arithmetic and the words, for the tests --------------------------- */

/* n items in `seconds` as a rate: "12.5 mol/s" when at least one a second,
 * else the time per item: "2.5 s/mol", "32 s/mol", "1.9 min/mol", "1.2 h/mol";
 * "" when n <= 0 or seconds <= 0. */
void progress_rate_text(int64_t n, double seconds, const char *unit, char *buf, size_t len);
/* seconds as "4.2 s", "8 min 12 s", "2 h 05 min"; "?" when negative or not finite. */
void progress_duration_text(double s, char *buf, size_t len);
/* Seconds left at time t, from this run's finished items alone
 * (done - done0 in t - t0); -1 when this run has finished none. */
double progress_eta_s(const struct progress *p, double t);
/* The status at time t as lines mode prints it, without the timestamp:
 * "label: D/N unit (P%), RATE, ETA E", or with "none finished yet in this
 * run, ETA unknown" before this run has finished an item ("..., ETA about E
 * at earlier runs' RATE" where progress_prior said). */
void progress_status_text(const struct progress *p, double t, char *buf, size_t len);

#endif
