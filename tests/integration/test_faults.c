/* Fault injection in SQLite's manner (issue 71): every commit of a run is
 * failed once, and the run resumed, and the final database must equal an
 * uninterrupted run's.
 *
 * SE3_FAULT=count (pipeline/fault.h) counts the commits of each command of
 * an uninterrupted sequence: T. Then, for each N in 1..T, a full walk, not
 * a chain: from the state before the command (the uninterrupted
 * sequence's, copied as it was: an empty workdir for the quickstart), the
 * command with SE3_FAULT=commit:N (the Nth commit of the process turned
 * into a rollback) must fail, exit non-zero and say so; the same command
 * again without the fault resumes it, and the rest of the sequence
 * follows. The final workdir is then compared with the uninterrupted
 * one (dump_workdir): every table's rows, scores and checkpoint blobs
 * included, and every file byte for byte, but what is named there.
 *
 * Two sequences are walked:
 *   - the quickstart's stages, cut down to fit (40 of its training
 *     molecules, 3 epochs, one model, chunks of 32 so that every stage has
 *     several): ingest -> graph -> basis -> train -> score -> rank -> report
 *     in one `run`;
 *   - a sharded score and its merge: `run --stage score --shard 0/2`,
 *     `--shard 1/2`, then `merge`, from a workdir trained once; each of
 *     their commits is failed (commit:N) and, there too, killed before it
 *     is made (crash:N, SIGKILL as a scheduler's kill would); and three
 *     writes and three allocations of each step, spread over its counts,
 *     are failed (write:N, alloc:N): the VFS and the allocator of
 *     pipeline/fault.c exercised, not walked (thousands of each).
 *
 * A failed commit must make the run exit non-zero and say why, but for
 * the commits of logs only (a stage's time in stage_runs, the run's end in
 * runs), which are said and the run goes on. A failed write or allocation
 * may be absorbed (see run_sequence). Every resumed workdir must equal the
 * uninterrupted one.
 *
 * The counts tried are printed: "fault injection: K commits failed and
 * resumed, 0 differences". About 70 s of CPU: 100 s on 2 idle cores,
 * 200 s at a load of 10. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/testutil.h"

enum { TRAIN_RECORDS = 40 };

/* ---- the comparison ----------------------------------------------------- */

/* What legitimately differs between a run that failed and resumed and one
 * that did not, and is therefore left out:
 *   - the tables `runs` and `stage_runs`: one row per process (per stage)
 *     that ran, a log of attempts; the resumed run has more of them;
 *   - columns of when, where and how long: host, pid, started, finished,
 *     updated (stage_state), seconds (metrics' epoch times, docking's);
 *   - files: the lock file (host, pid), report.html (dated, and it shows
 *     the runs table), SQLite's own files (compared through their rows)
 *     and the databases of shards (compared through their rows too);
 *   - in every file, the date and time Open Babel writes into the second
 *     line of each MDL record of hits.sdf (" OpenBabel11292609173D":
 *     MMDDYYHHmm): two runs a minute apart differ there, faults or not.
 * Everything else must be equal: every other table's every row, blobs
 * (molecules, graphs, bases, scores' members) as hex, the ledger's keys
 * and counts, the metrics' losses, the checkpoints, hits.csv, hits.sdf. */
static const char *const MASKED[] = {"host", "pid", "started", "finished", "updated", "seconds"};

static int masked(const char *col) {
  for (size_t i = 0; i < sizeof MASKED / sizeof *MASKED; i++)
    if (!strcmp(col, MASKED[i])) return 1;
  return 0;
}

static void append(char **buf, size_t *len, const char *s) {
  size_t n = strlen(s);
  *buf = realloc(*buf, *len + n + 1);
  cr_assert(*buf);
  memcpy(*buf + *len, s, n + 1);
  *len += n;
}

/* db's schema and the rows of its tables, masked as above, in a stable
 * order (malloc'd). */
static char *dump_db(const char *db) {
  char *out = NULL;
  size_t len = 0;
  char *schema = tu_query(db, "SELECT type, name, sql FROM sqlite_schema ORDER BY type, name");
  cr_assert(schema, "cannot read %s", db);
  append(&out, &len, schema);
  free(schema);
  char *tables = tu_query(db, "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
                              "AND name NOT IN ('runs', 'stage_runs') ORDER BY name");
  cr_assert(tables);
  char *save_t = NULL;
  for (char *t = strtok_r(tables, "\n", &save_t); t; t = strtok_r(NULL, "\n", &save_t)) {
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT name FROM pragma_table_info('%s') ORDER BY cid", t);
    char *cols = tu_query(db, sql);
    cr_assert(cols, "%s: no columns of %s", db, t);
    char *select = NULL, *order = NULL;
    size_t sl = 0, ol = 0;
    int k = 0;
    char *save = NULL;
    for (char *c = strtok_r(cols, "\n", &save); c; c = strtok_r(NULL, "\n", &save), k++) {
      char item[256];
      snprintf(item, sizeof item, "%s%s", k ? ", " : "", masked(c) ? "'-'" : "");
      append(&select, &sl, item);
      if (!masked(c)) {
        snprintf(item, sizeof item, "\"%s\"", c);
        append(&select, &sl, item);
      }
      snprintf(item, sizeof item, "%s%d", k ? ", " : "", k + 1);
      append(&order, &ol, item);
    }
    char *q = NULL;
    cr_assert(asprintf(&q, "SELECT %s FROM \"%s\" ORDER BY %s", select, t, order) > 0);
    char *rows = tu_query(db, q);
    cr_assert(rows, "%s: %s", db, q);
    char head[300];
    snprintf(head, sizeof head, "\n== %s\n", t);
    append(&out, &len, head);
    append(&out, &len, rows);
    free(rows);
    free(q);
    free(select);
    free(order);
    free(cols);
  }
  free(tables);
  return out;
}

/* The workdir wd as compared: screen.db's rows, each shard database's, and
 * a checksum of every other file but those named above (malloc'd). */
static char *dump_workdir(const char *wd) {
  char db[1200];
  snprintf(db, sizeof db, "%s/screen.db", wd);
  char *out = dump_db(db);
  size_t len = strlen(out);
  char *shards = NULL;
  tu_sh(&shards, "cd %s && ls shards/*.db 2>/dev/null | sort", wd);
  char *save = NULL;
  for (char *s = shards ? strtok_r(shards, "\n", &save) : NULL; s; s = strtok_r(NULL, "\n", &save)) {
    char path[1400];
    snprintf(path, sizeof path, "%s/%s", wd, s);
    char *d = dump_db(path);
    append(&out, &len, "\n== shard ");
    append(&out, &len, s);
    append(&out, &len, "\n");
    append(&out, &len, d);
    free(d);
  }
  free(shards);
  /* the other files: one FNV-1a checksum each, Open Babel's date in an SD
   * record's second line (" OpenBabel11292609173D": MMDDYYHHmm) left out */
  char *files = NULL;
  cr_assert_eq(tu_sh(&files,
                     "cd %s && find . -type f ! -name '*.lock' ! -name report.html ! -name 'screen.db*' "
                     "! -path './shards/*.db*' | LC_ALL=C sort",
                     wd),
               0, "%s", files);
  append(&out, &len, "\n== files\n");
  char *save_f = NULL;
  for (char *f = strtok_r(files, "\n", &save_f); f; f = strtok_r(NULL, "\n", &save_f)) {
    char path[1400], line[1600];
    snprintf(path, sizeof path, "%s/%s", wd, f);
    size_t n = 0;
    char *text = tu_read(path, &n);
    cr_assert(text, "cannot read %s", path);
    unsigned long long h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) {
      if ((i == 0 || text[i - 1] == '\n') && n - i > 20 && !memcmp(text + i + (text[i] == ' '), "OpenBabel", 9)) {
        size_t d = i + (text[i] == ' ') + 9, e = d;
        while (e < n && e < d + 10 && text[e] >= '0' && text[e] <= '9')
          e++;
        if (e == d + 10) memset(text + d, '#', 10);
      }
      h = (h ^ (unsigned char)text[i]) * 1099511628211ULL;
    }
    free(text);
    snprintf(line, sizeof line, "%016llx %zu %s\n", h, n, f);
    append(&out, &len, line);
  }
  free(files);
  return out;
}

/* 0 when a and b are equal; else prints where they first differ, with what
 * was being tried, and returns 1. */
static int differs(const char *what, const char *a, const char *b) {
  if (!strcmp(a, b)) return 0;
  size_t i = 0;
  while (a[i] && a[i] == b[i])
    i++;
  size_t line = i;
  while (line > 0 && a[line - 1] != '\n')
    line--;
  const char *sec = a + line;
  while (sec > a && strncmp(sec, "\n== ", 4))
    sec--;
  fprintf(stderr,
          "fault injection: %s: the final workdir differs from the uninterrupted run's, in %.60s:\n"
          "  uninterrupted: %.300s\n  resumed:       %.300s\n",
          what, sec + (sec > a), a + line, b + line);
  return 1;
}

/* ---- running ------------------------------------------------------------- */

/* What the output of a run with SE3_FAULT set says it counted: commits,
 * writes and allocations into n[0..2]. */
static void counted(const char *out, long n[3]) {
  const char *at = strstr(out, "SE3_FAULT: counted ");
  cr_assert(at, "no counts in:\n%s", out);
  cr_assert_eq(sscanf(at, "SE3_FAULT: counted %ld commits, %ld writes, %ld allocations", &n[0], &n[1], &n[2]), 3, "%s",
               at);
}

/* A kind of fault walked: at every position of its counter (samples 0),
 * or at `samples` positions spread evenly over it. */
struct mode {
  const char *kind;  /* SE3_FAULT's word */
  int counter;       /* counted()'s: 0 commits, 1 writes, 2 allocations */
  int samples;       /* 0: every one */
  const char *fires; /* what the process says when it fires, before N */
};
static const struct mode COMMIT = {"commit", 0, 0, "SE3_FAULT: failing commit"};
static const struct mode CRASH = {"crash", 0, 0, "SE3_FAULT: killing the process at commit"};
static const struct mode WRITES = {"write", 1, 3, "SE3_FAULT: failing write"};
static const struct mode ALLOCS = {"alloc", 2, 3, "SE3_FAULT: failing allocation"};

/* `se3screen ARGS` with SE3_FAULT=fault ("" for none); output in *out. */
static int se3_with(char **out, const char *fault, const char *args) {
  free(*out);
  *out = NULL;
  if (!*fault) return tu_se3(out, "%s", args);
  return tu_sh(out, "SE3_FAULT=%s %s %s", fault, SE3_BINARY, args);
}

struct walk {
  const char *name;
  const char *dir;          /* the test's folder: `wd` is worked in, `ref` the uninterrupted run's */
  const char *base;         /* shell command that makes dir/wd the state before the sequence */
  const char *const *steps; /* the sequence's commands (se3screen arguments), NULL-terminated */
  long tried, tried_commits, differences, silent, went_on, absorbed;
};

/* Runs w's sequence in dir/wd from the state before its step `at` (the
 * uninterrupted run's, kept as dir/before-AT by walk), that step with
 * SE3_FAULT=fault, which must fail, then again without it, and the steps
 * after it. */
static void run_sequence(struct walk *w, int at, const struct mode *m, const char *fault) {
  char *out = NULL;
  cr_assert_eq(tu_sh(&out, "cd %s && rm -rf wd && if [ -e before-%d ]; then cp -r before-%d wd; fi", w->dir, at, at), 0,
               "%s", out);
  for (int s = at; w->steps[s]; s++) {
    if (s == at) {
      int rc = se3_with(&out, fault, w->steps[s]);
      char want[96];
      snprintf(want, sizeof want, "%s %s ", m->fires, strchr(fault, ':') + 1);
      cr_assert(strstr(out, want), "%s: SE3_FAULT=%s did not fire in `%s`:\n%s", w->name, fault, w->steps[s], out);
      if (m == &CRASH) {
        cr_assert_eq(rc, 128 + 9, "%s: SE3_FAULT=%s: `%s` was not killed:\n%s", w->name, fault, w->steps[s], out);
      } else if (rc == 0 && m != &COMMIT) {
        /* A failed write or allocation SQLite absorbs: the checkpoint of
         * the WAL into the database as the last connection closes (the
         * WAL stays, and the next opening replays it), or an allocation
         * SQLite itself marks benign; or one a read helper takes for "no
         * row" (store_int, rank_target) where that was the answer anyway.
         * Allowed, as long as the resumed workdir is the same. */
        w->absorbed++;
      } else if (rc == 0) {
        /* Only a commit of a log may fail and the run go on (ledger.c: a
         * stage's time in stage_runs, "a failure to write it is said, not
         * the run's"), and it must say so: SQLite's message for a commit
         * its hook refused is "constraint failed". A failure unsaid, with
         * status 0, is counted as silent and fails the test. */
        if (strstr(out, ": constraint failed")) {
          w->went_on++;
        } else {
          fprintf(stderr, "fault injection: %s: `%s` with SE3_FAULT=%s exited 0 and said nothing:\n%s\n", w->name,
                  w->steps[s], fault, out);
          w->silent++;
        }
      }
    }
    int rc = se3_with(&out, "", w->steps[s]);
    cr_assert_eq(rc, 0, "%s: `%s` (after SE3_FAULT=%s in step %d) failed:\n%s", w->name, w->steps[s], fault, at, out);
  }
  free(out);
}

/* Every commit of every step of w failed with each of the modes, each
 * resumed, each final workdir compared with the uninterrupted run's. */
static void walk(struct walk *w, const struct mode *const modes[], int n_modes) {
  char *out = NULL;
  int n_steps = 0;
  while (w->steps[n_steps])
    n_steps++;
  long(*counts)[3] = calloc((size_t)n_steps, sizeof *counts);
  /* the uninterrupted run, counting */
  cr_assert_eq(tu_sh(&out, "cd %s && rm -rf wd ref before-* && %s", w->dir, w->base), 0, "%s", out);
  for (int s = 0; s < n_steps; s++) {
    /* the state before step s: where a fault in it starts from */
    cr_assert_eq(tu_sh(&out, "cd %s && if [ -e wd ]; then cp -r wd before-%d; fi", w->dir, s), 0, "%s", out);
    cr_assert_eq(se3_with(&out, "count", w->steps[s]), 0, "%s: `%s` failed:\n%s", w->name, w->steps[s], out);
    counted(out, counts[s]);
  }
  cr_assert_eq(tu_sh(&out, "cd %s && mv wd ref", w->dir), 0, "%s", out);
  char ref_wd[1100], wd[1100];
  snprintf(ref_wd, sizeof ref_wd, "%s/ref", w->dir);
  snprintf(wd, sizeof wd, "%s/wd", w->dir);
  /* the reference is compared where it was made (paths in the database
   * name dir/wd): moved back for its dump */
  cr_assert_eq(tu_sh(&out, "cd %s && mv ref wd", w->dir), 0, "%s", out);
  char *want = dump_workdir(wd);
  cr_assert_eq(tu_sh(&out, "cd %s && mv wd ref", w->dir), 0, "%s", out);
  for (int m = 0; m < n_modes; m++) {
    const struct mode *md = modes[m];
    for (int s = 0; s < n_steps; s++) {
      long total = counts[s][md->counter];
      long k = md->samples ? md->samples : total;
      for (long i = 1; i <= k && i <= total; i++) {
        /* samples: positions i / (k + 1) of the way through the count
         * (write counts vary by a few between runs: WAL checkpoints) */
        long n = md->samples ? i * total / (k + 1) + 1 : i;
        char fault[64], what[256];
        snprintf(fault, sizeof fault, "%s:%ld", md->kind, n);
        snprintf(what, sizeof what, "%s, step %d (`%.120s`), SE3_FAULT=%s", w->name, s, w->steps[s], fault);
        run_sequence(w, s, md, fault);
        char *got = dump_workdir(wd);
        w->differences += differs(what, want, got);
        w->tried++;
        if (md->counter == 0) w->tried_commits++;
        free(got);
      }
    }
  }
  free(want);
  free(counts);
  free(out);
}

/* ---- the workflows ---------------------------------------------------------- */

/* The quickstart (workflows/quickstart.yaml) cut down: its first
 * TRAIN_RECORDS training records, 3 epochs, one model, chunks of 32. */
static char *cut_quickstart(const char *dir) {
  char *out = NULL;
  cr_assert_eq(tu_sh(&out, "zcat %s | awk '{ print } /^\\$\\$\\$\\$/ { if (++n >= %d) exit }' > %s/train.sdf",
                     tu_src("workflows/data/qm7_quick.sdf.gz"), TRAIN_RECORDS, dir),
               0, "%s", out);
  free(out);
  char yaml[4096];
  snprintf(yaml, sizeof yaml,
           "workflow: quickstart\nworkdir: wd\nrun: {progress: none, chunk_size: 32}\n"
           "sets:\n"
           "  train:\n"
           "    - path: train.sdf\n"
           "      labels_csv: {path: %s, join: name, columns: [u0_atom]}\n"
           "  library:\n"
           "    - path: %s\n"
           "      labels_csv: {path: %s, join: name, columns: [u0_atom]}\n"
           "stages:\n"
           "  ingest: {coordinates: input, gen3d: auto, add_hydrogens: true, dedupe: inchikey}\n"
           "  graph: {edges: radius+bonds, cutoff: 5.0}\n"
           "  basis: {max_degree: 1, dtype: fp32}\n"
           "  train: {target: u0_atom, model: small, arch: {degrees: 2}, atomref: true, epochs: 3, batch_size: 16,\n"
           "          ensemble: 1}\n"
           "  score: {set: library}\n"
           "  rank: {order: ascending, top: 20, outputs: [hits.csv, hits.sdf]}\n"
           "  report: {top: 20}\n",
           tu_src("workflows/data/qm7_quick.csv"), tu_src("workflows/data/qm7_c5h10o.sdf.gz"),
           tu_src("workflows/data/qm7_c5h10o.csv"));
  return tu_write(dir, "wf.yaml", yaml);
}

static int skip_without_faults(void) {
  char *out = NULL;
  int rc = tu_sh(&out, "SE3_FAULT=count %s status /nonexistent", SE3_BINARY);
  int without = strstr(out ? out : "", "built without fault injection") != NULL;
  (void)rc;
  free(out);
  return without;
}

static long total_commits, total_other, total_differences, total_silent;

static void account(const struct walk *w, double t0) {
  total_commits += w->tried_commits;
  total_other += w->tried - w->tried_commits;
  total_differences += w->differences;
  total_silent += w->silent;
  printf("fault injection: %s: %ld commits failed and resumed, %ld writes and allocations failed and resumed, "
         "%ld differences (%ld failed commits of logs said and the run went on, %ld failed writes or allocations "
         "absorbed, %ld failures unsaid), %.0f s\n",
         w->name, w->tried_commits, w->tried - w->tried_commits, w->differences, w->went_on, w->absorbed, w->silent,
         tu_now() - t0);
  fflush(stdout);
}

Test(faults, every_commit_of_the_quickstart_and_a_sharded_score, .timeout = 400) {
  if (skip_without_faults()) cr_skip_test("se3screen built without SE3_FAULTS");
  char *dir = tu_tmpdir("faults");
  char *wf = cut_quickstart(dir);
  double t0 = tu_now();

  /* (a) the quickstart, one `run` */
  char run_all[1200];
  snprintf(run_all, sizeof run_all, "run %s", wf);
  const char *const quick_steps[] = {run_all, NULL};
  struct walk quick = {.name = "quickstart", .dir = dir, .base = "true", .steps = quick_steps};
  const struct mode *const commit_only[] = {&COMMIT};
  walk(&quick, commit_only, 1);
  account(&quick, t0);

  /* (b) a sharded score and its merge, from a workdir trained once */
  char *out = NULL;
  char train[1400];
  snprintf(train, sizeof train, "cd %s && rm -rf wd && %s run %s --until train >/dev/null 2>&1 && mv wd trained", dir,
           SE3_BINARY, wf);
  cr_assert_eq(tu_sh(&out, "%s", train), 0, "%s", out);
  free(out);
  char s0[1200], s1[1200], merge[1200];
  snprintf(s0, sizeof s0, "run %s --stage score --shard 0/2", wf);
  snprintf(s1, sizeof s1, "run %s --stage score --shard 1/2", wf);
  snprintf(merge, sizeof merge, "merge %s/wd/screen.db", dir);
  const char *const shard_steps[] = {s0, s1, merge, NULL};
  struct walk shards = {.name = "sharded score + merge", .dir = dir, .base = "cp -r trained wd", .steps = shard_steps};
  const struct mode *const all[] = {&COMMIT, &CRASH, &WRITES, &ALLOCS};
  double t1 = tu_now();
  walk(&shards, all, 4);
  account(&shards, t1);

  printf("fault injection: %ld commits failed and resumed, %ld differences (and %ld writes and allocations; %.0f s)\n",
         total_commits, total_differences, total_other, tu_now() - t0);
  fflush(stdout);
  cr_assert_eq(total_silent, 0, "%ld runs exited 0 after a failed commit (above)", total_silent);
  cr_assert_eq(total_differences, 0, "%ld resumed runs ended elsewhere than the uninterrupted one (above)",
               total_differences);
  free(wf);
  free(dir);
}

/* SE3_FAULT itself: a malformed value is refused before anything runs
 * (exit 2, naming the forms), and each kind fires once, says so and
 * names what failed. */
Test(faults, malformed_values_are_refused, .timeout = 60) {
  if (skip_without_faults()) cr_skip_test("se3screen built without SE3_FAULTS");
  static const char *const bad[] = {"bogus",     "commit",    "commit:",
                                    "commit:0",  "commit:-1", "commit:+1",
                                    "commit:1x", "commit:01", "write:99999999999999999999",
                                    "crash:1:2"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    char *out = NULL;
    int rc = tu_sh(&out, "SE3_FAULT='%s' %s status /nonexistent", bad[i], SE3_BINARY);
    cr_assert_eq(rc, 2, "SE3_FAULT=%s: exit %d:\n%s", bad[i], rc, out);
    cr_assert(strstr(out, "expected commit:N, crash:N, write:N or alloc:N"), "SE3_FAULT=%s:\n%s", bad[i], out);
    free(out);
  }
}
