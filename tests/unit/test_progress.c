/* progress (pipeline/progress.c): the rate and the ETA from the items this
 * run finished alone, whatever an earlier run left done (done0,
 * progress_skip); slow rates as time per item; the lines of items that
 * start and end one by one; the last line's count. Driven by a clock the
 * test sets, the lines written into memory. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/progress.h"

static double clock_now;
static double fake_clock(void) { return clock_now; }

static char *buf;
static size_t buf_len;

/* p in lines mode on the fake clock at t = 1000, writing into buf */
static void start(struct progress *p, int64_t total, int64_t done0) {
  clock_now = 1000;
  progress_start(p, PROGRESS_LINES, 5, "dock", "mol", total, done0);
  progress_set_clock(p, fake_clock);
  free(buf);
  buf = NULL;
  p->out = open_memstream(&buf, &buf_len);
  cr_assert_not_null(p->out);
}

static const char *text(struct progress *p) {
  fflush(p->out);
  return buf;
}

static void done_with(struct progress *p) {
  fclose(p->out);
  free(buf);
  buf = NULL;
}

static void rate(int64_t n, double s, const char *want) {
  char got[64];
  progress_rate_text(n, s, "mol", got, sizeof got);
  cr_assert_str_eq(got, want, "%lld items in %g s: '%s', not '%s'", (long long)n, s, got, want);
}

Test(progress, slow_rates_read_as_time_per_item) {
  rate(100, 8, "12.5 mol/s");
  rate(1000, 2, "500 mol/s");
  rate(1, 1, "1.0 mol/s");
  rate(2, 5, "2.5 s/mol");
  rate(3, 96, "32 s/mol");
  rate(15, 1710, "1.9 min/mol"); /* 114 s each: where "0.0 mol/s" was shown */
  rate(1, 540, "9.0 min/mol");
  rate(2, 8640, "1.2 h/mol");
  rate(0, 60, "");
  rate(5, 0, "");
}

Test(progress, durations) {
  char got[64];
  progress_duration_text(4.24, got, sizeof got);
  cr_assert_str_eq(got, "4.2 s");
  progress_duration_text(492, got, sizeof got);
  cr_assert_str_eq(got, "8 min 12 s");
  progress_duration_text(2 * 3600 + 5 * 60 + 10, got, sizeof got);
  cr_assert_str_eq(got, "2 h 05 min");
  progress_duration_text(-1, got, sizeof got);
  cr_assert_str_eq(got, "?");
}

/* A resumed run: 12 of 15 done by an earlier run. Until this run finishes
 * one there is neither a rate nor an ETA; then they come from this run's
 * own items (3 left at 2 min each: 6 min), not 12 items in a few seconds. */
Test(progress, eta_after_a_resume_comes_from_this_run) {
  struct progress p;
  start(&p, 15, 10);
  progress_skip(&p, 2); /* found done in the chunk in flight */
  cr_assert_eq(p.done, 12);
  cr_assert_eq(p.done0, 12);
  clock_now = 1005;
  char line[256];
  progress_status_text(&p, clock_now, line, sizeof line);
  cr_assert_str_eq(line, "dock: 12/15 mol (80.0%), none finished yet in this run, ETA unknown");
  cr_assert_lt(progress_eta_s(&p, clock_now), 0);
  clock_now = 1120;
  progress_add(&p, 1);
  cr_assert_float_eq(progress_eta_s(&p, clock_now), 2 * 120.0, 1e-9);
  progress_status_text(&p, clock_now, line, sizeof line);
  cr_assert_str_eq(line, "dock: 13/15 mol (86.7%), 2.0 min/mol, ETA 4:00");
  /* the periodic line printed what the status says */
  cr_assert(strstr(text(&p), "] dock: 13/15 mol (86.7%), 2.0 min/mol, ETA 4:00\n"), "%s", text(&p));
  cr_assert_null(strstr(text(&p), "0.0 mol/s"));
  done_with(&p);
}

/* Without a resume the ETA is the items left at this run's pace. */
Test(progress, eta_from_a_fresh_run) {
  struct progress p;
  start(&p, 1000, 0);
  clock_now = 1010;
  progress_add(&p, 250);
  cr_assert_float_eq(progress_eta_s(&p, clock_now), 30.0, 1e-9);
  char line[256];
  progress_status_text(&p, clock_now, line, sizeof line);
  cr_assert_str_eq(line, "dock: 250/1000 mol (25.0%), 25.0 mol/s, ETA 0:30");
  done_with(&p);
}

/* Items one by one (two workers): a line as each starts, numbered among
 * the items done and in flight, and as each ends, with its time, its
 * details, the count done, the rate and the ETA. */
Test(progress, item_lines) {
  struct progress p;
  start(&p, 5, 1);
  progress_item_start(&p, "CHEMBL1");
  progress_item_start(&p, "CHEMBL2");
  clock_now = 1000 + 492;
  progress_item_end(&p, "CHEMBL1", 1, "docked", 492, "-9.30 kcal/mol");
  progress_item_start(&p, "CHEMBL3");
  clock_now = 1000 + 600;
  progress_item_end(&p, "CHEMBL2", 0, "rejected", 600, "timed out");
  const char *t = text(&p);
  cr_assert(strstr(t, "] dock: started CHEMBL1 (2 of 5)\n"), "%s", t);
  cr_assert(strstr(t, "] dock: started CHEMBL2 (3 of 5)\n"), "%s", t);
  cr_assert(strstr(t, "] dock: CHEMBL1 docked in 8 min 12 s, -9.30 kcal/mol (2 of 5 done, 8.2 min/mol, ETA 24:36)\n"),
            "%s", t);
  cr_assert(strstr(t, "] dock: started CHEMBL3 (4 of 5)\n"), "%s", t);
  cr_assert(strstr(t, "] dock: CHEMBL2 rejected in 10 min 0 s, timed out (3 of 5 done, 5.0 min/mol, ETA 10:00)\n"),
            "%s", t);
  cr_assert_eq(p.items_ok, 1);
  cr_assert_eq(p.items_rejected, 1);
  cr_assert_eq(p.in_flight, 1);
  /* the last line counts this run's two, not the one done before */
  progress_end(&p, "1 docked, 1 rejected; stopped by a signal (run again to resume)");
  cr_assert(strstr(text(&p), "] dock: 2 mol in 600.0 s (5.0 min/mol); 1 docked, 1 rejected; stopped"), "%s", text(&p));
  done_with(&p);
}

/* Lines mode prints no periodic line more often than its interval. */
Test(progress, lines_at_most_every_interval) {
  struct progress p;
  start(&p, 100, 0);
  for (int i = 1; i <= 20; i++) {
    clock_now = 1000 + i; /* a second an item; a line every 5 s */
    progress_add(&p, 1);
  }
  int lines = 0;
  for (const char *s = text(&p); (s = strstr(s, "] dock: ")); s++)
    lines++;
  cr_assert_eq(lines, 4, "%s", text(&p));
  cr_assert(strstr(text(&p), "] dock: 20/100 mol (20.0%), 1.0 mol/s, ETA 1:20\n"), "%s", text(&p));
  done_with(&p);
}

/* Before this run finishes an item, the time an item took in earlier runs
 * (docking.seconds over the workers) gives an ETA, said once; from this
 * run's first item on, this run's own pace does. */
Test(progress, earlier_runs_give_the_eta_until_this_run_has_its_own) {
  struct progress p;
  start(&p, 15, 12);
  progress_prior(&p, 120);
  progress_prior(&p, 120); /* every chunk says it; one line */
  char line[512];
  progress_status_text(&p, clock_now, line, sizeof line);
  cr_assert_str_eq(line, "dock: 12/15 mol (80.0%), none finished yet in this run, ETA about 6:00 at earlier runs' "
                         "2.0 min/mol");
  const char *t = text(&p);
  cr_assert(strstr(t, "] dock: earlier runs took 2.0 min/mol: about 6:00 for the 3 left\n"), "%s", t);
  cr_assert_null(strstr(strstr(t, "earlier runs took") + 1, "earlier runs took"), "said twice:\n%s", t);
  clock_now = 1100;
  progress_item_end(&p, "CHEMBL9", 1, "docked", 100, "");
  progress_status_text(&p, clock_now, line, sizeof line);
  cr_assert_str_eq(line, "dock: 13/15 mol (86.7%), 1.7 min/mol, ETA 3:20");
  cr_assert(strstr(text(&p), "] dock: CHEMBL9 docked in 1 min 40 s (13 of 15 done, 1.7 min/mol, ETA 3:20)\n"), "%s",
            text(&p));
  done_with(&p);
  /* nothing known: nothing said */
  start(&p, 15, 12);
  progress_prior(&p, 0);
  cr_assert_eq(text(&p) ? strlen(text(&p)) : 0, 0);
  progress_status_text(&p, clock_now, line, sizeof line);
  cr_assert_str_eq(line, "dock: 12/15 mol (80.0%), none finished yet in this run, ETA unknown");
  done_with(&p);
}

/* The heartbeat (issue 70: nothing was printed while Vina worked, minutes a
 * molecule): while items run, a line every interval saying what runs and
 * for how long, with the work's own ETA (by the ligands' size, which a
 * rate cannot see) and what it rests on; no line more often than the
 * interval however often the work calls; the item lines after it take
 * that ETA, less the time since; and the earlier runs' line gives it too. */
Test(progress, heartbeat_while_items_run) {
  struct progress p;
  start(&p, 4, 0);
  progress_item_start(&p, "A");
  progress_item_start(&p, "B");
  for (int i = 1; i <= 120; i++) { /* ten calls a second for 12 s */
    clock_now = 1000 + 0.1 * i;
    progress_working(&p, 300 - 0.1 * i, "by ligand size and exhaustiveness 8, a guess",
                     clock_now >= 1010 ? "A for 10 s, B for 10 s" : "A for 5 s, B for 5 s");
  }
  const char *t = text(&p);
  int beats = 0;
  for (const char *s = t; (s = strstr(s, "; running ")); s++)
    beats++;
  cr_assert_eq(beats, 2, "a line every 5 s for 12 s: %d\n%s", beats, t);
  cr_assert(strstr(t, "] dock: 0/4 mol (0.0%), ETA 4:55 (by ligand size and exhaustiveness 8, a guess); running A for "
                      "5 s, B for 5 s\n"),
            "%s", t);
  cr_assert(strstr(t, "] dock: 0/4 mol (0.0%), ETA 4:50 (by ligand size and exhaustiveness 8, a guess); running A for "
                      "10 s, B for 10 s\n"),
            "%s", t);
  /* an item ends 30 s after the last word: its line's ETA is that one, 30 s on */
  clock_now = 1042;
  progress_item_end(&p, "A", 1, "docked", 42, "-7.00 kcal/mol");
  cr_assert(strstr(text(&p), "] dock: A docked in 42.0 s, -7.00 kcal/mol (1 of 4 done, 42 s/mol, ETA 4:18)\n"), "%s",
            text(&p));
  done_with(&p);
  /* the earlier runs' line takes the work's ETA where it gave one */
  start(&p, 15, 12);
  progress_working(&p, 90, "by ligand size, at earlier runs' pace", "");
  progress_prior(&p, 120);
  cr_assert(strstr(text(&p), "] dock: earlier runs took 2.0 min/mol: about 1:30 for the 3 left\n"), "%s", text(&p));
  done_with(&p);
  /* on a terminal, the bar at most every second */
  start(&p, 4, 0);
  p.mode = PROGRESS_BAR;
  for (int i = 1; i <= 25; i++) {
    clock_now = 1000 + 0.1 * i;
    progress_working(&p, 60, "by size", "A for 2 s");
  }
  int bars = 0;
  for (const char *s = text(&p); (s = strchr(s, '\r')); s++)
    bars++;
  cr_assert_eq(bars, 2, "%d bars in 2.5 s:\n%s", bars, text(&p));
  cr_assert(strstr(text(&p), "ETA 1:00"), "%s", text(&p));
  done_with(&p);
}
