/* The parser processes' supervisor (chem/workers.c): timeout_s bounds a
 * record whatever the state of its request, and a worker that is stuck or
 * dead costs one record at most (issue 30, defect 2).
 *
 * A worker is made stuck deterministically: after a first batch it waits,
 * idle, for the next request; the test stops it with SIGSTOP and waits to
 * see it stopped (/proc) before handing out the next batch. A request bigger
 * than a pipe's buffer (64 KiB) can then never be written whole: the state in
 * which the supervisor once blocked for ever, its timeout unchecked. Each
 * test has a Criterion time limit, so a hang fails it. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chem/workers.h"
#include "common/error.h"
#include "tests/testutil.h"

#define TIMEOUT_S 2.0

static const char ETHANOL[] =
    "ethanol\n  se3test  3D\n\n"
    "  3  2  0  0  0  0  0  0  0  0999 V2000\n"
    "   -0.9290    0.2960    0.0000 C   0  0  0  0  0  0  0  0  0  0  0  0\n"
    "    0.4950   -0.2360    0.0000 C   0  0  0  0  0  0  0  0  0  0  0  0\n"
    "    1.3690    0.8800    0.0000 O   0  0  0  0  0  0  0  0  0  0  0  0\n"
    "  1  2  1  0\n  2  3  1  0\n"
    "M  END\n";

/* An SD record: ethanol, then a tag of `bytes` letters when bytes > 0. */
static char *record(size_t bytes) {
  size_t n = strlen(ETHANOL);
  char *t = malloc(n + bytes + 64);
  cr_assert(t);
  memcpy(t, ETHANOL, n);
  if (bytes > 0) {
    n += (size_t)sprintf(t + n, ">  <blob>\n");
    for (size_t i = 0; i < bytes; i++) t[n++] = (char)('A' + i % 26);
    n += (size_t)sprintf(t + n, "\n\n");
  }
  t[n] = 0;
  return t;
}

static struct wpool *start_pool(int n) {
  static const struct ob_parse_opts po = {.format = "sdf", .add_hydrogens = 1, .gen3d = OB_GEN3D_NEVER};
  static const struct mol_check_opts co = {.max_atoms = 999, .min_distance = 0.5};
  struct se3_error e;
  struct wpool *p = wpool_start(n, &po, &co, WPOOL_INPUT_SHAPE_REJECT, &e);
  cr_assert(p, "wpool_start: %s", se3_error_str(&e).s);
  return p;
}

static void job_of(struct wjob *j, const char *text) {
  memset(j, 0, sizeof *j);
  j->text = text;
  j->len = strlen(text);
  j->format = "sdf";
  mol_init(&j->mol);
}

static void run_ok(struct wpool *p, struct wjob *jobs, int n) {
  struct se3_error e;
  int rc = wpool_run(p, jobs, n, TIMEOUT_S, NULL, NULL, NULL, &e);
  cr_assert_eq(rc, 0, "wpool_run: %d %s", rc, se3_error_str(&e).s);
}

/* The state letter of process pid (/proc/PID/stat: "pid (comm) S ..."). */
static char proc_state(pid_t pid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char *e = strrchr(buf, ')');
  return e && e[1] == ' ' ? e[2] : 0;
}

/* Waits until pid is in one of the states `want` (e.g. "tT" stopped, "Z" dead). */
static void wait_state(pid_t pid, const char *want) {
  for (;;) {
    char s = proc_state(pid);
    if (s && strchr(want, s)) return;
    tu_sleep(0.005);
  }
}

/* Starts a pool of one worker, has it parse a record (so that it is ready and
 * waiting for the next request), then stops it. Returns the pool. */
static struct wpool *pool_with_stopped_worker(pid_t *pid_out) {
  struct wpool *p = start_pool(1);
  char *t = record(0);
  struct wjob j;
  job_of(&j, t);
  run_ok(p, &j, 1);
  cr_assert_eq(j.status, 0, "warm-up record: %s", j.why.reason);
  mol_free(&j.mol);
  free(t);
  pid_t pid = wpool_worker_pid(p, 0);
  cr_assert_gt(pid, 0);
  cr_assert_eq(kill(pid, SIGSTOP), 0);
  wait_state(pid, "tT");
  *pid_out = pid;
  return p;
}

/* A small record A, then a record B of 256 KiB, to a stuck worker: A is
 * written whole, B (4 pipe buffers) fills the pipe and can go no further. A is rejected when
 * its time is up (the supervisor still writing B); the worker is replaced and
 * B parsed by the new one. */
Test(workers, stuck_worker_while_the_next_request_is_blocked, .timeout = 60) {
  pid_t pid;
  struct wpool *p = pool_with_stopped_worker(&pid);
  char *a = record(0), *b = record(256 << 10);
  struct wjob jobs[2];
  job_of(&jobs[0], a);
  job_of(&jobs[1], b);
  double t0 = tu_now();
  run_ok(p, jobs, 2);
  double took = tu_now() - t0;
  cr_assert_eq(jobs[0].status, 1);
  cr_assert_str_eq(jobs[0].why.reason, "timed out");
  cr_assert_str_eq(jobs[0].why.detail, "after 2 s (Open Babel hung on this record)");
  cr_assert_eq(jobs[0].why.atom, 0);
  cr_assert_eq(jobs[1].status, 0, "B: %s", jobs[1].why.reason);
  cr_assert_str_eq(jobs[1].mol.name, "ethanol");
  cr_assert_eq(jobs[1].mol.n_atoms, 9);
  cr_assert_eq(wpool_restarts(p), 1);
  cr_assert_neq(wpool_worker_pid(p, 0), pid);
  cr_assert_geq(took, TIMEOUT_S);
  cr_assert_lt(took, 30, "took %.1f s", took);
  for (int i = 0; i < 2; i++) mol_free(&jobs[i].mol);
  wpool_stop(p);
  free(a);
  free(b);
}

/* A record of 256 KiB alone, to a stuck worker: it is never taken whole; its
 * time runs all the same, and it is rejected saying how far it got. */
Test(workers, stuck_worker_never_takes_the_request, .timeout = 60) {
  pid_t pid;
  struct wpool *p = pool_with_stopped_worker(&pid);
  char *b = record(256 << 10);
  struct wjob j;
  job_of(&j, b);
  double t0 = tu_now();
  run_ok(p, &j, 1);
  double took = tu_now() - t0;
  cr_assert_eq(j.status, 1);
  cr_assert_str_eq(j.why.reason, "timed out");
  cr_assert(strstr(j.why.detail, "after 2 s: the parser process had taken ") == j.why.detail &&
                strstr(j.why.detail, "bytes (it stopped reading)"),
            "%s", j.why.detail);
  cr_assert_eq(wpool_restarts(p), 1);
  cr_assert_lt(took, 30, "took %.1f s", took);
  /* The new worker works. */
  char *a = record(0);
  struct wjob k;
  job_of(&k, a);
  run_ok(p, &k, 1);
  cr_assert_eq(k.status, 0, "%s", k.why.reason);
  mol_free(&k.mol);
  mol_free(&j.mol);
  wpool_stop(p);
  free(a);
  free(b);
}

/* A worker that died while idle is not blamed for the records handed to it
 * next (it never had them): they go to its replacement and are parsed. */
Test(workers, worker_dead_while_idle_costs_no_record, .timeout = 60) {
  pid_t pid;
  struct wpool *p = pool_with_stopped_worker(&pid);
  cr_assert_eq(kill(pid, SIGKILL), 0);
  wait_state(pid, "Z");
  char *a = record(0), *b = record(200 << 10);
  struct wjob jobs[3];
  job_of(&jobs[0], a);
  job_of(&jobs[1], b);
  job_of(&jobs[2], a);
  run_ok(p, jobs, 3);
  for (int i = 0; i < 3; i++) {
    cr_assert_eq(jobs[i].status, 0, "record %d: %s", i, jobs[i].why.reason);
    mol_free(&jobs[i].mol);
  }
  cr_assert_eq(wpool_restarts(p), 1);
  wpool_stop(p);
  free(a);
  free(b);
}

/* Many records larger than a pipe's buffer through two workers, answers and
 * requests crossing: all parsed, in their places. */
Test(workers, records_larger_than_a_pipe, .timeout = 60) {
  struct wpool *p = start_pool(2);
  enum { N = 12 };
  char *texts[N];
  struct wjob jobs[N];
  for (int i = 0; i < N; i++) {
    texts[i] = record((size_t)(i % 4) * (150 << 10));
    job_of(&jobs[i], texts[i]);
  }
  run_ok(p, jobs, N);
  for (int i = 0; i < N; i++) {
    cr_assert_eq(jobs[i].status, 0, "record %d: %s", i, jobs[i].why.reason);
    const char *blob = mol_tag(&jobs[i].mol, "blob");
    size_t want = (size_t)(i % 4) * (150 << 10);
    cr_assert_eq(blob ? strlen(blob) : 0, want, "record %d: tag of %zu bytes, want %zu", i,
                 blob ? strlen(blob) : 0, want);
    mol_free(&jobs[i].mol);
    free(texts[i]);
  }
  cr_assert_eq(wpool_restarts(p), 0);
  wpool_stop(p);
}

/* A rejection comes back from the worker as the checks made it: the reason
 * (one text per kind), the atom it concerns and the specifics, each in its
 * own field, for the rejects table's own columns. Two records with atoms too
 * close, at different atoms: the same reason, their own atom and detail. */
Test(workers, a_rejection_comes_back_with_its_atom_and_detail, .timeout = 60) {
  struct wpool *p = start_pool(1);
  /* ethanol with its O 0.2 Å from the second C; then with the first C 0.3 Å
   * from the second (and a z coordinate other than 0: a flat record is 2D,
   * where distances are not checked) */
  char *close23 = record(0), *close12 = record(0);
  memcpy(strstr(close23, "   -0.9290    0.2960    0.0000"), "   -0.9290    0.2960    0.5000", 30);
  memcpy(strstr(close23, "    1.3690    0.8800    0.0000"), "    0.6950   -0.2360    0.0000", 30);
  memcpy(strstr(close12, "   -0.9290    0.2960    0.0000"), "    0.1950   -0.2360    0.0000", 30);
  memcpy(strstr(close12, "    1.3690    0.8800    0.0000"), "    1.3690    0.8800    0.5000", 30);
  struct wjob jobs[2];
  job_of(&jobs[0], close23);
  job_of(&jobs[1], close12);
  run_ok(p, jobs, 2);
  for (int i = 0; i < 2; i++) {
    cr_assert_eq(jobs[i].status, 1, "record %d passed", i);
    cr_assert_str_eq(jobs[i].why.reason, "atoms too close", "record %d: %s: %s", i, jobs[i].why.reason,
                     jobs[i].why.detail);
  }
  cr_assert_eq(jobs[0].why.atom, 2, "%s", jobs[0].why.detail);
  cr_assert_str_eq(jobs[0].why.detail, "atoms 2 and 3 are 0.20 Å apart (< 0.5)");
  cr_assert_eq(jobs[1].why.atom, 1, "%s", jobs[1].why.detail);
  cr_assert_str_eq(jobs[1].why.detail, "atoms 1 and 2 are 0.30 Å apart (< 0.5)");
  cr_assert_eq(wpool_restarts(p), 0);
  for (int i = 0; i < 2; i++) mol_free(&jobs[i].mol);
  wpool_stop(p);
  free(close23);
  free(close12);
}


/* A rejected record keeps its name (issue 55: rejects.name was empty for
 * aromaticity failures): the name Open Babel read comes back beside the
 * reason, whether the parse refused it (a ring that cannot be kekulized) or
 * a check after it did (atoms too close); a record without one has none. */
Test(workers, a_rejection_comes_back_with_the_record_name, .timeout = 60) {
  struct wpool *p = start_pool(1);
  char *close = record(0);
  memcpy(strstr(close, "   -0.9290    0.2960    0.0000"), "   -0.9290    0.2960    0.5000", 30);
  memcpy(strstr(close, "    1.3690    0.8800    0.0000"), "    0.6950   -0.2360    0.0000", 30);
  struct wjob jobs[3];
  job_of(&jobs[0], "c1cccc1 ring5");
  jobs[0].format = "smi";
  job_of(&jobs[1], close);
  job_of(&jobs[2], "c1cccc1");
  jobs[2].format = "smi";
  run_ok(p, jobs, 3);
  for (int i = 0; i < 3; i++)
    cr_assert_eq(jobs[i].status, 1, "record %d passed", i);
  cr_assert_str_eq(jobs[0].why.reason, "kekulization failed", "%s: %s", jobs[0].why.reason, jobs[0].why.detail);
  cr_assert(jobs[0].mol.name, "the unkekulizable ring came back without its name");
  cr_assert_str_eq(jobs[0].mol.name, "ring5");
  cr_assert_str_eq(jobs[1].why.reason, "atoms too close", "%s", jobs[1].why.reason);
  cr_assert(jobs[1].mol.name, "the record with atoms too close came back without its name");
  cr_assert_str_eq(jobs[1].mol.name, "ethanol");
  cr_assert_str_eq(jobs[2].why.reason, "kekulization failed", "%s", jobs[2].why.reason);
  cr_assert_null(jobs[2].mol.name, "a record without a name came back named '%s'", jobs[2].mol.name);
  for (int i = 0; i < 3; i++) mol_free(&jobs[i].mol);
  wpool_stop(p);
  free(close);
}
