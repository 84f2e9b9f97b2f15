/* `se3screen report` cannot destroy what it reads, and stops cleanly
 * (issue 30, defects 3, 5 and 9):
 *   - `-o` naming the database (by its path, another spelling of it, a
 *     symbolic or hard link to it), its -wal file, a shard database, a
 *     checkpoint under models/, the workflow file or an input file is
 *     refused with a message naming both, exit status 2, and every one of
 *     them keeps its bytes (screen.db still opens as a result database);
 *   - `-o` a FIFO or a device node is refused and the node left as it was;
 *   - SIGTERM while the report is under way exits 75 and leaves no
 *     temporary file: once deterministically (the database held by another
 *     connection's exclusive lock, so the report is certainly waiting on
 *     it), and at random moments of real reports, where every outcome a
 *     random moment can give is accepted and checked (75 or 0, a complete
 *     report.html or the old one, never a temporary).
 * The workdir is a quick ingest-only run on a copy of the bundled QM9
 * records (the copy, so that a writer that overwrote inputs could only harm
 * the test's folder). */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "tests/testutil.h"

/* A fresh folder `name` holding wf.yaml, qm9_mini.sdf and work/ (an
 * ingest-only run). Returns the folder (malloc'd). */
static char *workdir(const char *name) {
  char *dir = tu_tmpdir(name);
  cr_assert_not_null(dir);
  cr_assert_eq(tu_sh(NULL, "cp '%s' '%s/qm9_mini.sdf'", tu_src("workflows/data/qm9_mini.sdf"), dir), 0);
  free(tu_write(dir, "wf.yaml",
                "workflow: t\nworkdir: work\nrun: {progress: none}\n"
                "sets:\n  library:\n    - {path: qm9_mini.sdf}\n"
                "stages:\n  ingest: {workers: 1}\n"));
  char *out = NULL;
  int rc = tu_se3(&out, "run %s/wf.yaml", dir);
  cr_assert_eq(rc, 0, "%s", out);
  free(out);
  return dir;
}

/* The bytes of a file, as a checksum line (sha256sum). */
static char *sum(const char *path) {
  char *s = NULL;
  cr_assert_eq(tu_sh(&s, "sha256sum < '%s'", path), 0, "%s", path);
  return s;
}

/* `report work -o OUT` must be refused: exit 2, a message naming OUT and
 * `names` (the input it would replace); screen.db keeps its bytes. */
static void assert_refused(const char *dir, const char *out, const char *names) {
  char db[PATH_MAX];
  snprintf(db, sizeof db, "%s/work/screen.db", dir);
  char *before = sum(db), *msg = NULL;
  int rc = tu_se3(&msg, "report %s/work -o '%s' --no-depict", dir, out);
  char *after = sum(db);
  cr_assert_str_eq(after, before, "report -o %s changed screen.db (exit %d: %s)", out, rc, msg);
  cr_assert_eq(rc, 2, "report -o %s: exit %d, want 2 (refused): %s", out, rc, msg);
  cr_assert(strstr(msg, out) && strstr(msg, names), "the message names neither %s nor %s: %s", out, names, msg);
  cr_assert(!strstr(msg, "wrote"), "%s", msg);
  free(msg);
  free(before);
  free(after);
}

static void assert_still_a_database(const char *dir) {
  char db[PATH_MAX];
  snprintf(db, sizeof db, "%s/work/screen.db", dir);
  long long n = tu_query_int(db, "SELECT count(*) FROM molecules");
  cr_assert_gt(n, 0, "%s no longer opens as the result database", db);
  char *out = NULL;
  cr_assert_eq(tu_se3(&out, "query %s 'SELECT count(*) FROM runs'", db), 0, "%s", out);
  free(out);
}

static int n_temps(const char *folder) {
  char *ls = NULL;
  tu_sh(&ls, "ls -a '%s' | grep -c '\\.tmp-'", folder);
  int n = atoi(ls);
  free(ls);
  return n;
}

Test(report_output, refuses_to_overwrite_the_database) {
  char *dir = workdir("outputs_db");
  char p[PATH_MAX];
  snprintf(p, sizeof p, "%s/work/screen.db", dir);
  assert_refused(dir, p, "screen.db");
  assert_still_a_database(dir);
  snprintf(p, sizeof p, "%s/work/./screen.db", dir);
  assert_refused(dir, p, "screen.db");
  /* a hard link is another name of the same file */
  snprintf(p, sizeof p, "%s/work/hard.html", dir);
  cr_assert_eq(tu_sh(NULL, "ln '%s/work/screen.db' '%s'", dir, p), 0);
  assert_refused(dir, p, "screen.db");
  /* its companions, whether they exist now or not */
  snprintf(p, sizeof p, "%s/work/screen.db-wal", dir);
  assert_refused(dir, p, "screen.db-wal");
  snprintf(p, sizeof p, "%s/work/screen.db-journal", dir);
  assert_refused(dir, p, "screen.db-journal");
  snprintf(p, sizeof p, "%s/work/screen.db.lock", dir);
  assert_refused(dir, p, "screen.db.lock");
  assert_still_a_database(dir);
  free(dir);
}

Test(report_output, refuses_a_symlink_to_the_database) {
  char *dir = workdir("outputs_link");
  char p[PATH_MAX];
  snprintf(p, sizeof p, "%s/report-link.html", dir);
  cr_assert_eq(tu_sh(NULL, "ln -s '%s/work/screen.db' '%s'", dir, p), 0);
  assert_refused(dir, p, "screen.db");
  struct stat st;
  cr_assert_eq(lstat(p, &st), 0);
  cr_assert(S_ISLNK(st.st_mode), "the link was replaced");
  assert_still_a_database(dir);
  free(dir);
}

/* The run's other files: a shard database, a checkpoint, the workflow file,
 * the input molecules. */
Test(report_output, refuses_shards_checkpoints_and_inputs) {
  char *dir = workdir("outputs_inputs");
  char p[PATH_MAX];
  cr_assert_eq(tu_sh(NULL,
                     "mkdir -p '%s/work/shards' '%s/work/models/train-0' && "
                     "cp '%s/work/screen.db' '%s/work/shards/score-0.db' && "
                     "echo ck > '%s/work/models/train-0/best.ckpt'",
                     dir, dir, dir, dir, dir),
               0);
  const char *files[] = {"work/shards/score-0.db", "work/models/train-0/best.ckpt", "wf.yaml", "qm9_mini.sdf"};
  for (int i = 0; i < 4; i++) {
    snprintf(p, sizeof p, "%s/%s", dir, files[i]);
    char *before = sum(p);
    assert_refused(dir, p, strrchr(files[i], '/') ? strrchr(files[i], '/') + 1 : files[i]);
    char *after = sum(p);
    cr_assert_str_eq(after, before, "%s changed", p);
    free(before);
    free(after);
  }
  /* a report beside them is fine */
  char *msg = NULL;
  cr_assert_eq(tu_se3(&msg, "report %s/work -o %s/work/models/report.html --no-depict", dir, dir), 0, "%s", msg);
  free(msg);
  free(dir);
}

/* A FIFO (and, as root, a device node) as -o: refused, left as it was. */
Test(report_output, refuses_fifos_and_devices) {
  char *dir = workdir("outputs_nodes");
  char p[PATH_MAX];
  snprintf(p, sizeof p, "%s/fifo", dir);
  cr_assert_eq(mkfifo(p, 0644), 0);
  char *msg = NULL;
  int rc = tu_se3(&msg, "report %s/work -o %s --no-depict", dir, p);
  struct stat st;
  cr_assert_eq(lstat(p, &st), 0);
  cr_assert(S_ISFIFO(st.st_mode), "the FIFO was replaced (exit %d: %s)", rc, msg);
  cr_assert_neq(rc, 0, "%s", msg);
  cr_assert(strstr(msg, p) && strstr(msg, "not a regular file"), "%s", msg);
  free(msg);
  snprintf(p, sizeof p, "%s/full", dir);
  if (mknod(p, S_IFCHR | 0666, makedev(1, 7)) == 0) { /* /dev/full's numbers */
    rc = tu_se3(&msg, "report %s/work -o %s --no-depict", dir, p);
    cr_assert_eq(lstat(p, &st), 0);
    cr_assert(S_ISCHR(st.st_mode), "the device node was replaced (exit %d: %s)", rc, msg);
    cr_assert_neq(rc, 0, "%s", msg);
    free(msg);
  }
  cr_assert_eq(n_temps(dir), 0);
  free(dir);
}

/* 1 when process pid has `path` open (its /proc/PID/fd links), 0 when not, -1
 * when the process is gone. */
static int has_open(int pid, const char *path) {
  char fds[64];
  snprintf(fds, sizeof fds, "/proc/%d/fd", pid);
  DIR *d = opendir(fds);
  if (!d) return -1;
  int found = 0;
  struct dirent *e;
  while (!found && (e = readdir(d))) {
    char link[400], target[PATH_MAX];
    snprintf(link, sizeof link, "%s/%s", fds, e->d_name);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n > 0) {
      target[n] = 0;
      found = !strcmp(target, path);
    }
  }
  closedir(d);
  return found;
}

/* Waits until pid has path open: 1; or the process ended (a zombie counts:
 * its fd folder is empty then): 0. */
static int wait_open(int pid, const char *path, double timeout) {
  double t0 = tu_now();
  while (tu_now() - t0 < timeout) {
    int h = has_open(pid, path);
    if (h) return h > 0;
    char stat_path[64], *s = NULL;
    snprintf(stat_path, sizeof stat_path, "/proc/%d/stat", pid);
    s = tu_read(stat_path, NULL);
    int zombie = s && strstr(s, ") Z ");
    free(s);
    if (zombie) return 0;
    tu_sleep(0.001);
  }
  cr_assert_fail("the report did not open %s within %.0f s", path, timeout);
  return 0;
}

/* Holds db in exclusive locking mode in a child process (so the report,
 * forked from this process, inherits no descriptor of the database) until
 * *release is written to. Returns the child's pid once the lock is held. */
static int hold_exclusive(const char *db, int *release) {
  int ready[2], go[2];
  cr_assert(pipe(ready) == 0 && pipe(go) == 0);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    close(ready[0]);
    close(go[1]);
    sqlite3 *h = NULL;
    if (sqlite3_open(db, &h) != SQLITE_OK ||
        sqlite3_exec(h, "PRAGMA locking_mode=EXCLUSIVE; BEGIN EXCLUSIVE; SELECT count(*) FROM meta;", NULL, NULL,
                     NULL) != SQLITE_OK)
      _exit(1);
    if (write(ready[1], "l", 1) != 1) _exit(1);
    char c;
    if (read(go[0], &c, 1) < 0) _exit(1);
    sqlite3_exec(h, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(h);
    _exit(0);
  }
  close(ready[1]);
  close(go[0]);
  char c;
  cr_assert_eq(read(ready[0], &c, 1), 1, "the lock holder failed");
  close(ready[0]);
  *release = go[1];
  return (int)pid;
}

/* Deterministic: another connection holds screen.db in exclusive locking
 * mode, so the report, once it has opened the database, waits for it
 * (busy timeout). SIGTERM then must give 75, not death by the signal. */
Test(report_output, sigterm_while_waiting_exits_75, .timeout = 120) {
  char *dir = workdir("outputs_sig");
  char db[PATH_MAX], real[PATH_MAX], log[PATH_MAX], out[PATH_MAX], work[PATH_MAX];
  snprintf(db, sizeof db, "%s/work/screen.db", dir);
  snprintf(work, sizeof work, "%s/work", dir);
  snprintf(out, sizeof out, "%s/work/report.html", dir);
  snprintf(log, sizeof log, "%s/report.log", dir);
  cr_assert_not_null(realpath(db, real));
  int release = -1;
  int holder = hold_exclusive(db, &release);
  char *argv[] = {"se3screen", "report", work, "--no-depict", NULL};
  int pid = tu_spawn_se3(log, argv);
  int opened = wait_open(pid, real, 60);
  kill(pid, SIGTERM);
  int st = tu_wait(pid);
  cr_assert_eq(write(release, "u", 1), 1);
  close(release);
  cr_assert_eq(tu_wait(holder), 0, "the lock holder failed");
  char *l = tu_read(log, NULL);
  cr_assert(opened, "the report ended before it opened the database: %s", l ? l : "");
  cr_assert_eq(st, 75, "SIGTERM while the report waited: exit %d, want 75 (%s)", st, l ? l : "");
  free(l);
  cr_assert_eq(n_temps(work), 0);
  cr_assert_eq(access(out, F_OK), -1, "report.html written after the signal");
  assert_still_a_database(dir);
  free(dir);
}

/* At random moments after the report has opened the database (its signal
 * handling is in place by then): every outcome is one of exit 75 or exit 0,
 * report.html is a whole page (the old one or the new one), and no
 * temporary file is left. */
Test(report_output, sigterm_at_random_moments_leaves_no_temporary, .timeout = 300) {
  char *dir = workdir("outputs_rand");
  char db[PATH_MAX], real[PATH_MAX], log[PATH_MAX], out[PATH_MAX], work[PATH_MAX];
  snprintf(db, sizeof db, "%s/work/screen.db", dir);
  snprintf(work, sizeof work, "%s/work", dir);
  snprintf(out, sizeof out, "%s/work/report.html", dir);
  snprintf(log, sizeof log, "%s/report.log", dir);
  cr_assert_not_null(realpath(db, real));
  /* one whole report first: its time sizes the window, its page is "the old one" */
  char *msg = NULL;
  double t0 = tu_now();
  cr_assert_eq(tu_se3(&msg, "report %s --top 1000", work), 0, "%s", msg);
  double whole = tu_now() - t0;
  free(msg);
  srand((unsigned)getpid());
  char *argv[] = {"se3screen", "report", work, "--top", "1000", NULL};
  int n75 = 0, n0 = 0;
  for (int i = 0; i < 8; i++) {
    int pid = tu_spawn_se3(log, argv);
    int opened = wait_open(pid, real, 60);
    if (opened) {
      tu_sleep((double)rand() / RAND_MAX * whole);
      kill(pid, SIGTERM);
    }
    int st = tu_wait(pid);
    cr_assert(st == 75 || st == 0, "try %d: exit %d (want 75, or 0 when the report ended first); see %s", i, st, log);
    if (st == 75)
      n75++;
    else
      n0++;
    cr_assert_eq(n_temps(work), 0, "try %d (exit %d): a temporary file was left", i, st);
    size_t n = 0;
    char *page = tu_read(out, &n);
    cr_assert(page && !strncmp(page, "<!DOCTYPE html>", 15) && n > 8 && !strcmp(page + n - 8, "</html>\n"),
              "try %d: report.html is not a whole page", i);
    free(page);
  }
  cr_log_info("8 tries: %d stopped (75), %d finished first (0)", n75, n0);
  assert_still_a_database(dir);
  free(dir);
}

/* The other way round: an input of a run may not be a file that run
 * writes. A previous screen's hits.sdf (or a labels_csv kept in the workdir
 * as hits.csv) named as this run's input would be replaced by its own rank
 * stage: `run` refuses it before reading anything, naming both files, and
 * the file keeps its bytes. */
Test(report_output, inputs_that_the_run_writes_are_refused) {
  char *dir = workdir("out_inputs");
  char hits[PATH_MAX], labels[PATH_MAX];
  snprintf(hits, sizeof hits, "%s/work/hits.sdf", dir);
  snprintf(labels, sizeof labels, "%s/work/hits.csv", dir);
  cr_assert_eq(tu_sh(NULL, "cp '%s/qm9_mini.sdf' '%s'", dir, hits), 0);
  cr_assert_eq(tu_sh(NULL, "printf 'name,y\\ngdb_1,1.5\\n' > '%s'", labels), 0);
  free(tu_write(dir, "wf2.yaml",
                "workflow: t\nworkdir: work\nrun: {progress: none}\n"
                "sets:\n  library:\n    - {path: work/hits.sdf}\n"
                "stages:\n  ingest: {workers: 1}\n"));
  free(tu_write(dir, "wf3.yaml",
                "workflow: t\nworkdir: work\nrun: {progress: none}\n"
                "sets:\n  library:\n    - {path: qm9_mini.sdf, labels_csv: {path: work/./hits.csv, join: name, "
                "columns: [y]}}\n"
                "stages:\n  ingest: {workers: 1}\n"));
  const char *wfs[] = {"wf2.yaml", "wf3.yaml"}, *names[] = {"hits.sdf", "hits.csv"};
  for (int i = 0; i < 2; i++) {
    const char *file = i ? labels : hits;
    char *before = sum(file), *msg = NULL;
    int rc = tu_se3(&msg, "run %s/%s", dir, wfs[i]);
    char *after = sum(file);
    cr_assert_str_eq(after, before, "%s: the input %s changed", wfs[i], file);
    cr_assert_neq(rc, 0, "%s: a run whose input is its own %s was accepted: %s", wfs[i], names[i], msg);
    cr_assert(strstr(msg, "which this run writes") && strstr(msg, names[i]), "%s: %s", wfs[i], msg);
    free(msg);
    free(before);
    free(after);
  }
  free(dir);
}
