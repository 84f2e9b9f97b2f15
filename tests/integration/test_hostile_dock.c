/* test_hostile_dock.c — the dock stage's inputs and its Vina processes
 * against hostile files (issue 51, holes 3 and 6):
 *   - a FIFO or a device as stages.dock.receptor, box_ligand or the oracle's
 *     table is refused by `check` and by `run` (exit 2, the key and the file
 *     named, the kind said), at once: it used to pass `check` and hang `run`
 *     for ever on the FIFO's open or on /dev/zero's endless bytes. Every
 *     se3screen here runs under `timeout -s KILL`, so a hang fails the test
 *     instead of holding the suite;
 *   - the shared mechanism below it: stage_file_hash refuses a FIFO and a
 *     device without blocking; stage_file_open, stage_fd_hash and
 *     stage_fd_copy check, hash and copy through one descriptor, and the
 *     hash is the one stage_file_hash always gave (ingest's keys and dock's
 *     set-ups of earlier runs stay valid);
 *   - Vina under stages.dock.memory_limit_mb: a Vina that runs out of it is
 *     a reject naming the limit, and the run goes on (exit 0); skipped where
 *     there is no `vina` program;
 *   - Vina's log read from its end: a 1 GiB log costs a few KiB of reading.
 * About 3 s on 2 cores. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chem/dock.h"
#include "stages/stage.h"
#include "tests/testutil.h"

/* se3screen VERB WF, killed at `limit` s: a hang is exit 137, never the suite's. */
static int se3_bounded(char **out, int limit, const char *verb, const char *wf, const char *extra) {
  return tu_sh(out, "timeout -s KILL %d %s %s %s %s", limit, SE3_BINARY, verb, wf, extra ? extra : "");
}

static int have_vina(void) { return tu_sh(NULL, "command -v vina >/dev/null 2>&1") == 0; }

/* ---- FIFOs and devices as the dock stage's files ---------------------------- */

Test(hostile_dock, fifo_and_device_inputs_refused_by_check_and_run, .timeout = 300) {
  char *dir = tu_tmpdir("hostile_dock_fifo");
  const char *data = tu_src("tests/data/dock");
  char fifo[1100];
  snprintf(fifo, sizeof fifo, "%s/pipe.pdb", dir);
  cr_assert_eq(mkfifo(fifo, 0600), 0);
  cr_assert_eq(tu_sh(NULL, "cp '%s/crystal_ligand.mol2' '%s/lig.mol2' && printf 'smiles,score\\nCCO,-1\\n' > "
                           "'%s/scores.csv'",
                     data, dir, dir),
               0);
  static const struct {
    const char *key, *file, *kind;
    int table;
  } cases[] = {{"receptor", "pipe.pdb", "(a FIFO)", 0},
               {"receptor", "/dev/zero", "(a character device)", 0},
               {"box_ligand", "pipe.pdb", "(a FIFO)", 0},
               {"table", "pipe.pdb", "(a FIFO)", 1},
               {"table", "/dev/zero", "(a character device)", 1}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char dock[1024], yaml[2048];
    const char *f = cases[i].file;
    if (cases[i].table)
      snprintf(dock, sizeof dock, "{oracle: table, table: %s}", f);
    else if (!strcmp(cases[i].key, "receptor"))
      snprintf(dock, sizeof dock, "{receptor: %s, box_ligand: lig.mol2, exhaustiveness: 1}", f);
    else
      snprintf(dock, sizeof dock, "{receptor: %s/receptor.pdb, box_ligand: %s, exhaustiveness: 1}", data, f);
    snprintf(yaml, sizeof yaml,
             "workflow: t\nworkdir: work\nrun: {progress: none}\nsets:\n  library:\n    - {path: lig.mol2}\n"
             "stages:\n  ingest: {workers: 1}\n  dock: %s\n", /* the dock line is line 9 */
             dock);
    char *wf = tu_write(dir, "wf.yaml", yaml);
    char path[1200], want[1600];
    snprintf(path, sizeof path, "%s%s%s", f[0] == '/' ? "" : dir, f[0] == '/' ? "" : "/", f);
    snprintf(want, sizeof want, "stages.dock.%s: %s: not a regular file %s", cases[i].key, path, cases[i].kind);
    static const char *const verbs[] = {"check", "run"};
    for (int v = 0; v < 2; v++) {
      char *out = NULL;
      double t0 = tu_now();
      int rc = se3_bounded(&out, 60, verbs[v], wf, NULL);
      double took = tu_now() - t0;
      cr_assert_neq(rc, 137, "%s with %s as stages.dock.%s hung (killed after %.0f s)", verbs[v], f, cases[i].key,
                    took);
      cr_assert_eq(rc, 2, "%s with %s as stages.dock.%s: exit %d after %.1f s:\n%s", verbs[v], f, cases[i].key, rc,
                   took, out);
      cr_assert(strstr(out, want) && strstr(out, "wf.yaml:9:"), "%s: no '%s' at the key's line in:\n%s", verbs[v],
                want, out);
      cr_log_info("%s, %s as stages.dock.%s: exit %d in %.2f s", verbs[v], f, cases[i].key, rc, took);
      free(out);
    }
    /* refused before anything was done */
    cr_assert_neq(tu_sh(NULL, "test -e '%s/work'", dir), 0, "run made its workdir");
    free(wf);
  }
  free(dir);
}

/* ---- the shared mechanism: opened once, never blocking ---------------------- */

/* A FIFO without a writer held stage_file_hash's fopen for ever, and
 * /dev/zero kept it reading: both refused now, at once (.timeout ends the
 * test that would hang). */
Test(hostile_dock, file_hash_refuses_fifo_and_device_without_blocking, .timeout = 20) {
  char *dir = tu_tmpdir("hostile_dock_hash");
  char fifo[1100];
  snprintf(fifo, sizeof fifo, "%s/pipe.csv", dir);
  cr_assert_eq(mkfifo(fifo, 0600), 0);
  uint64_t h;
  errno = 0;
  cr_assert_eq(stage_file_hash(fifo, &h), -1, "a FIFO was hashed");
  cr_assert_eq(errno, EINVAL, "errno %d", errno);
  long long r0 = tu_bytes_read();
  cr_assert_eq(stage_file_hash("/dev/zero", &h), -1, "/dev/zero was hashed");
  if (r0 >= 0) cr_assert_lt(tu_bytes_read() - r0, 4096, "/dev/zero was read");
  cr_assert_eq(stage_file_hash(dir, &h), -1, "a folder was hashed");
  free(dir);
}

/* The file content the hashes below are of: n bytes, (i * 131 + i / 7) mod 256. */
static char *pattern_file(const char *dir, const char *name, size_t n) {
  char *path = NULL;
  cr_assert(asprintf(&path, "%s/%s", dir, name) > 0);
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f);
  for (size_t i = 0; i < n; i++)
    fputc((int)((i * 131 + i / 7) & 0xff), f);
  cr_assert_eq(fclose(f), 0);
  return path;
}

Test(hostile_dock, inputs_opened_once_checked_hashed_and_copied, .timeout = 60) {
  char *dir = tu_tmpdir("hostile_dock_open");
  char fifo[1100];
  struct se3_error err = {0};
  snprintf(fifo, sizeof fifo, "%s/pipe.pdb", dir);
  cr_assert_eq(mkfifo(fifo, 0600), 0);
  int fd = 12345;
  cr_assert_eq(stage_file_open(fifo, &fd, &err), -1);
  cr_assert_eq(fd, -1);
  char want[1400];
  snprintf(want, sizeof want, "%s: not a regular file (a FIFO)", fifo);
  cr_assert(strstr(se3_error_str(&err).s, want), "%s", se3_error_str(&err).s);
  cr_assert_eq(err.kind, SE3_ERR_INPUT, "a FIFO as an input: kind %d", (int)err.kind);
  cr_assert_str_eq(err.file, fifo);
  cr_assert_eq(stage_file_open("/dev/zero", &fd, &err), -1);
  cr_assert(strstr(se3_error_str(&err).s, "/dev/zero: not a regular file (a character device)"), "%s",
            se3_error_str(&err).s);
  cr_assert_eq(stage_file_open(dir, &fd, &err), -1);
  cr_assert(strstr(se3_error_str(&err).s, "not a regular file (a directory)"), "%s", se3_error_str(&err).s);
  char missing[1200];
  snprintf(missing, sizeof missing, "%s/absent.pdb", dir);
  cr_assert_eq(stage_file_open(missing, &fd, &err), -1);
  cr_assert(strstr(se3_error_str(&err).s, missing) && strstr(se3_error_str(&err).s, "No such file"), "%s",
            se3_error_str(&err).s);

  /* The hashes stage_file_hash gave at 7f50eaf (fread in 1 MiB blocks),
   * through the path, the descriptor and the copy alike: whole blocks, a
   * last block cut, stripes cut, an empty file. */
  static const struct {
    size_t n;
    uint64_t h;
  } known[] = {{0, 0xf4fe00d2904fb174ULL},       {1, 0x0f2958e452e05361ULL},
               {31, 0xc3593a85299301d0ULL},      {33, 0xe35e9567088699f1ULL},
               {1 << 20, 0x59890fd1ccca9e19ULL}, {(3 << 20) + 45, 0xa3140b5d815cfe27ULL}};
  for (size_t k = 0; k < sizeof known / sizeof known[0]; k++) {
    char *path = pattern_file(dir, "x.bin", known[k].n);
    uint64_t by_path = 0, by_fd = 0, by_copy = 0;
    cr_assert_eq(stage_file_hash(path, &by_path), 0);
    cr_assert_eq(by_path, known[k].h, "%zu bytes: %016llx, not %016llx", known[k].n, (unsigned long long)by_path,
                 (unsigned long long)known[k].h);
    cr_assert_eq(stage_file_open(path, &fd, &err), 0, "%s", se3_error_str(&err).s);
    /* the descriptor reads blocking again (O_NONBLOCK was only for the open) and closes on exec */
    cr_assert_eq(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
    cr_assert_neq(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
    cr_assert_eq(lseek(fd, 7, SEEK_SET), 7); /* an offset moved does not change what is hashed */
    cr_assert_eq(stage_fd_hash(fd, &by_fd), 0);
    cr_assert_eq(by_fd, known[k].h);
    char copy[1200];
    snprintf(copy, sizeof copy, "%s/copy.bin", dir);
    unlink(copy);
    cr_assert_eq(stage_fd_copy(fd, copy, &by_copy, &err), 0, "%s", se3_error_str(&err).s);
    cr_assert_eq(by_copy, known[k].h);
    cr_assert_eq(tu_sh(NULL, "cmp -s '%s' '%s'", path, copy), 0, "the copy differs from the file");
    struct stat sb;
    cr_assert_eq(stat(copy, &sb), 0);
    cr_assert_eq(sb.st_mode & 0777, 0600);
    /* a copy is created, never written over or through a link */
    cr_assert_eq(stage_fd_copy(fd, copy, &by_copy, &err), -1);
    cr_assert(strstr(se3_error_str(&err).s, copy) && strstr(se3_error_str(&err).s, "File exists"), "%s",
              se3_error_str(&err).s);
    close(fd);
    free(path);
  }
  free(dir);
}

/* ---- Vina: its memory bounded, its log read from the end --------------------- */

/* stages.dock.memory_limit_mb: 64 is far below what Vina needs for FABP4
 * (about 0.55 GB): each molecule is a reject, "out of memory", naming the
 * key and the limit; the run itself succeeds. Then a box ligand Open Babel
 * cannot read: the message names the workflow's file, not the private copy
 * Open Babel was handed. */
Test(hostile_dock, vina_out_of_its_memory_limit_is_a_reject, .timeout = 300) {
  if (!have_vina()) cr_skip_test("no vina program (scripts/setup.sh installs Debian's autodock-vina)");
  char *dir = tu_tmpdir("hostile_dock_memory");
  const char *data = tu_src("tests/data/dock");
  char yaml[2048];
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: work\nrun: {progress: none}\nsets:\n  library:\n"
           "    - {path: %s/crystal_ligand.mol2}\n    - {path: %s/actives4.mol2}\n"
           "stages:\n  ingest: {workers: 1}\n"
           "  dock: {receptor: %s/receptor.pdb, box_ligand: %s/crystal_ligand.mol2, exhaustiveness: 1, workers: 2, "
           "memory_limit_mb: 64}\n",
           data, data, data, data);
  char *wf = tu_write(dir, "wf.yaml", yaml);
  char *out = NULL;
  double t0 = tu_now();
  int rc = tu_sh(&out, "cd '%s' && TMPDIR='%s' timeout -s KILL 240 %s run wf.yaml", dir, dir, SE3_BINARY);
  double took = tu_now() - t0;
  cr_assert_eq(rc, 0, "exit %d after %.1f s:\n%s", rc, took, out);
  cr_log_info("5 molecules, Vina under 64 MiB: %.1f s", took);
  free(out);
  char db[1200];
  snprintf(db, sizeof db, "%s/work/screen.db", dir);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM docking"), 0);
  char *rejects = tu_query(db, "SELECT reason, detail FROM rejects");
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM rejects WHERE stage = 'dock' AND reason = 'out of memory' AND "
                                "detail LIKE 'Vina ran out of its memory limit (stages.dock.memory_limit_mb: 64 MiB)%'"),
               5, "%s", rejects);
  cr_log_info("%s", rejects);
  free(rejects);
  /* the run's folders under TMPDIR are gone with it */
  cr_assert_eq(tu_sh(NULL, "test -z \"$(ls -A '%s' | grep se3screen-)\"", dir), 0, "temporary folders were left");

  /* an empty box ligand: named as the workflow names it */
  char *empty = tu_write(dir, "empty.mol2", "");
  rc = tu_sh(&out, "cd '%s' && TMPDIR='%s' timeout -s KILL 120 %s run wf.yaml --set stages.dock.box_ligand=%s", dir,
             dir, SE3_BINARY, empty);
  cr_assert_eq(rc, 1, "exit %d:\n%s", rc, out);
  cr_assert(strstr(out, empty) && !strstr(out, "se3screen-box"), "the message does not name %s:\n%s", empty, out);
  free(out);
  free(empty);
  free(wf);
  free(dir);
}

/* A log of 1 GiB (sparse: no disk) whose last lines are Vina's last words:
 * they are found by reading its end, a few KiB, not the whole file (it
 * used to be read whole: 1.04 GB of memory). */
Test(hostile_dock, log_tail_reads_only_the_end, .timeout = 60) {
  char *dir = tu_tmpdir("hostile_dock_log");
  char path[1200], out[400];
  snprintf(path, sizeof path, "%s/log", dir);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  cr_assert_geq(fd, 0);
  const char *end = "first words\nsecond words\r\n\n  Error: insufficient memory!  \n\n";
  off_t size = (off_t)1 << 30;
  cr_assert_eq(ftruncate(fd, size), 0);
  cr_assert_eq(pwrite(fd, end, strlen(end), size), (ssize_t)strlen(end));
  cr_assert_eq(close(fd), 0);
  struct rusage ru0, ru1;
  getrusage(RUSAGE_SELF, &ru0);
  long long r0 = tu_bytes_read();
  double t0 = tu_now();
  dock_log_tail(path, 2, out, sizeof out);
  double took = tu_now() - t0;
  long long got = r0 >= 0 ? tu_bytes_read() - r0 : -1;
  getrusage(RUSAGE_SELF, &ru1);
  cr_log_info("the tail of a 1 GiB log: %lld bytes read, %.3f s, peak RSS %ld -> %ld KiB", got, took, ru0.ru_maxrss,
              ru1.ru_maxrss);
  if (r0 >= 0) cr_assert_leq(got, 65536, "%lld bytes read of a 1 GiB log", got);
  cr_assert_lt(ru1.ru_maxrss - ru0.ru_maxrss, 32 * 1024, "peak RSS grew from %ld to %ld KiB", ru0.ru_maxrss,
               ru1.ru_maxrss);
  cr_assert_str_eq(out, "second words | Error: insufficient memory!");

  /* the end is 4 KiB into a long line: what is left of it is not a line's start */
  char *text = malloc(20000);
  memset(text, 'x', 19000);
  strcpy(text + 19000, "\nlast\n");
  free(tu_write(dir, "long", text));
  snprintf(path, sizeof path, "%s/long", dir);
  dock_log_tail(path, 3, out, sizeof out);
  cr_assert_str_eq(out, "last");
  /* a short log whole; a missing one empty */
  free(tu_write(dir, "short", "a\nb\nc\n"));
  snprintf(path, sizeof path, "%s/short", dir);
  dock_log_tail(path, 2, out, sizeof out);
  cr_assert_str_eq(out, "b | c");
  snprintf(path, sizeof path, "%s/absent", dir);
  dock_log_tail(path, 2, out, sizeof out);
  cr_assert_str_eq(out, "");
  free(text);
  free(dir);
}

/* Before (hardening IV): a `vina` that wrote a 1.5 GB out.pdbqt drove the
 * run to 1.6 GB of memory and the molecule was docked; one that printed
 * "REMARK VINA RESULT: -1e308" had that score stored and ranked first.
 * Two fake Vinas (stages.dock.vina), no real one needed: a file past what
 * the poses take is refused unread, a score out of range is refused naming
 * its line; each a reject, the run goes on (exit 0). */
Test(hostile_dock, vina_output_bounded_and_in_range, .timeout = 120) {
  char *dir = tu_tmpdir("hostile_dock_output");
  const char *data = tu_src("tests/data/dock");
  static const struct {
    const char *name, *body, *want;
  } fakes[] = {
      {"huge", "printf 'MODEL 1\\nREMARK VINA RESULT: -5.0 0.000 0.000\\n' > out.pdbqt\ntruncate -s 1G out.pdbqt\n",
       "Vina's out.pdbqt is larger than "},
      {"score", "printf 'MODEL 1\\nREMARK VINA RESULT: -1e308 0.000 0.000\\nENDMDL\\n' > out.pdbqt\n",
       "line 2 of Vina's output: a score or RMSD out of range"},
  };
  for (size_t i = 0; i < sizeof fakes / sizeof *fakes; i++) {
    char name[64], script[1024], yaml[2048];
    snprintf(name, sizeof name, "vina_%s", fakes[i].name);
    snprintf(script, sizeof script,
             "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'AutoDock Vina 1.2.5 (a fake)'; exit 0; fi\n%s"
             "echo 'Refining results ... done.'\nexit 0\n",
             fakes[i].body);
    char *vina = tu_write(dir, name, script);
    cr_assert_eq(chmod(vina, 0755), 0);
    snprintf(yaml, sizeof yaml,
             "workflow: t\nworkdir: work_%s\nrun: {progress: none}\nsets:\n  library:\n    - {path: "
             "%s/crystal_ligand.mol2}\n"
             "stages:\n  ingest: {workers: 1}\n"
             "  dock: {receptor: %s/receptor.pdb, box_ligand: %s/crystal_ligand.mol2, exhaustiveness: 1, vina: %s}\n",
             fakes[i].name, data, data, data, vina);
    snprintf(name, sizeof name, "wf_%s.yaml", fakes[i].name);
    char *wf = tu_write(dir, name, yaml), *out = NULL;
    int rc = tu_sh(&out, "cd '%s' && TMPDIR='%s' timeout -s KILL 100 %s run %s", dir, dir, SE3_BINARY, wf);
    cr_assert_eq(rc, 0, "%s: exit %d:\n%s", fakes[i].name, rc, out);
    free(out);
    char db[1200];
    snprintf(db, sizeof db, "%s/work_%s/screen.db", dir, fakes[i].name);
    cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM docking"), 0, "%s: a molecule was docked", fakes[i].name);
    char *why = tu_query(db, "SELECT reason || ': ' || detail FROM rejects WHERE stage = 'dock'");
    cr_assert(strstr(why, "no pose: ") && strstr(why, fakes[i].want), "%s: %s", fakes[i].name, why);
    cr_log_info("%s: %s", fakes[i].name, why);
    free(why);
    free(wf);
    free(vina);
  }
  free(dir);
}

/* Before (hardening IV): a helper that a `vina` started with setsid (out of
 * Vina's process group, so the group's kill missed it) outlived the run.
 * Now each docking's own process is a subreaper that ends whatever Vina
 * leaves: here a fake Vina leaves a setsid'ed `sleep 600` and exits, or
 * leaves one and runs past stages.dock.timeout_s; after the run, neither
 * helper is alive. */
Test(hostile_dock, helpers_vina_detaches_end_with_its_docking, .timeout = 120) {
  char *dir = tu_tmpdir("hostile_dock_helper");
  const char *data = tu_src("tests/data/dock");
  static const char *const tails[] = {"exit 0\n", "sleep 600\n"};
  for (int i = 0; i < 2; i++) {
    char script[2048], yaml[2048], name[64], pidfile[1200];
    snprintf(pidfile, sizeof pidfile, "%s/helper%d.pid", dir, i);
    snprintf(script, sizeof script,
             "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'AutoDock Vina 1.2.5 (a fake)'; exit 0; fi\n"
             "setsid sleep 600 </dev/null >/dev/null 2>&1 &\necho $! > '%s'\n%s",
             pidfile, tails[i]);
    snprintf(name, sizeof name, "vina%d", i);
    char *vina = tu_write(dir, name, script);
    cr_assert_eq(chmod(vina, 0755), 0);
    snprintf(
        yaml, sizeof yaml,
        "workflow: t\nworkdir: work%d\nrun: {progress: none}\nsets:\n  library:\n    - {path: %s/crystal_ligand.mol2}\n"
        "stages:\n  ingest: {workers: 1}\n"
        "  dock: {receptor: %s/receptor.pdb, box_ligand: %s/crystal_ligand.mol2, exhaustiveness: 1, vina: %s, "
        "timeout_s: 2}\n",
        i, data, data, data, vina);
    snprintf(name, sizeof name, "wf%d.yaml", i);
    char *wf = tu_write(dir, name, yaml), *out = NULL;
    int rc = tu_sh(&out, "cd '%s' && TMPDIR='%s' timeout -s KILL 100 %s run %s", dir, dir, SE3_BINARY, wf);
    cr_assert_eq(rc, 0, "exit %d:\n%s", rc, out);
    free(out);
    char *pid = tu_read(pidfile, NULL);
    cr_assert(pid && atoi(pid) > 1, "the fake Vina %d started no helper", i);
    /* gone: not a process any more (a zombie would still answer kill -0) */
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/%d", atoi(pid));
    cr_assert_neq(access(proc, F_OK), 0, "case %d: the helper %d Vina started with setsid outlived the run", i,
                  atoi(pid));
    char db[1200];
    snprintf(db, sizeof db, "%s/work%d/screen.db", dir, i);
    char *why = tu_query(db, "SELECT reason FROM rejects WHERE stage = 'dock'");
    cr_assert_str_eq(why, i ? "timed out\n" : "no pose\n");
    free(why);
    free(pid);
    free(wf);
    free(vina);
  }
  free(dir);
}

/* Before (hardening IV): the dock stage's table of scores read `0x10` as 16
 * (labels refuse it), and a row whose score was nan or inf was reported as
 * "no row of TABLE has smiles 'X'". Now the table's scores are read as
 * labels are (one parser), and a molecule whose row holds no number is a
 * reject naming the row and what it holds. */
Test(hostile_dock, table_scores_read_as_labels_are, .timeout = 60) {
  char *dir = tu_tmpdir("hostile_dock_table");
  free(tu_write(dir, "lib.smi", "CCO ethanol\nCCN ethylamine\nCCC propane\nCCCC butane\n"));
  free(tu_write(dir, "scores.csv", "smiles,score\nCCO,0x10\nCCN,nan\nCCC,-5.5\nCCCC,\n"));
  char *wf = tu_write(dir, "wf.yaml",
                      "workflow: t\nworkdir: work\nrun: {progress: none}\nsets:\n  library:\n    - {path: lib.smi}\n"
                      "stages:\n  ingest: {workers: 1, gen3d: never}\n  dock: {oracle: table, table: scores.csv}\n");
  char *out = NULL;
  int rc = tu_sh(&out, "cd '%s' && timeout -s KILL 50 %s run wf.yaml", dir, SE3_BINARY);
  cr_assert_eq(rc, 0, "exit %d:\n%s", rc, out);
  free(out);
  char db[1200];
  snprintf(db, sizeof db, "%s/work/screen.db", dir);
  char *got = tu_query(db, "SELECT m.name, k.score FROM docking k JOIN molecules m ON m.id = k.mol_id");
  cr_assert_str_eq(got, "propane|-5.5\n", "only propane's score is a number");
  free(got);
  char *rej = tu_query(db, "SELECT m.name || ': ' || r.detail FROM rejects r JOIN molecules m ON m.id = r.mol_id "
                           "WHERE r.stage = 'dock' ORDER BY m.id");
  char want[2048];
  snprintf(want, sizeof want,
           "ethanol: row 1 of %s/scores.csv: the score in 'score' is hexadecimal, not a decimal number ('0x10')\n"
           "ethylamine: row 2 of %s/scores.csv: the score in 'score' is not a finite number ('nan')\n"
           "butane: row 4 of %s/scores.csv: no score in 'score'\n",
           dir, dir, dir);
  cr_assert_str_eq(rej, want);
  free(rej);
  free(wf);
  free(dir);
}

/* ---- the workers kept busy, and a word while they work (issue 70) --------- */

/* A fake Vina that sleeps 3 s on a ligand of 10 atoms or more and 0.6 s on
 * a smaller one (each start and end written, with the time, into TIMES),
 * then gives the ligand back as its pose. */
static char *timed_vina(const char *dir, const char *times) {
  char script[4096];
  snprintf(script, sizeof script,
           "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'AutoDock Vina 1.2.5 (a fake)'; exit 0; fi\n"
           "n=$(grep -c '^ATOM\\|^HETATM' ligand.pdbqt)\n"
           "echo \"$(date +%%s.%%N) start $n\" >> '%s'\n"
           "if [ \"$n\" -ge 10 ]; then sleep 3; else sleep 0.6; fi\n"
           "{ echo 'MODEL 1'; echo 'REMARK VINA RESULT:    -5.000      0.000      0.000'; "
           "grep '^ATOM\\|^HETATM' ligand.pdbqt; echo ENDMDL; } > out.pdbqt\n"
           "echo \"$(date +%%s.%%N) end $n\" >> '%s'\nexit 0\n",
           times, times);
  char *vina = tu_write(dir, "vina_timed", script);
  cr_assert_eq(chmod(vina, 0755), 0);
  return vina;
}

/* Before: each chunk's dockings ran to their end before the next chunk's
 * began, so the chunk's last long docking held one of two workers idle
 * (27 s at a boundary in the screen), and nothing was printed
 * while Vina worked. Now, in chunks of 3 with 2 workers, where each
 * chunk ends with dockings of 3 s after ones of 0.6 s: while molecules
 * are left to start, both workers are busy but for gaps under 1 s; the
 * log has the heartbeat (what runs, for how long) and an ETA by the
 * ligands' size before any docking has ended; each docking is stored in
 * its own chunk, and each chunk's ledger row counts its own. */
Test(hostile_dock, workers_busy_across_chunks_with_a_heartbeat, .timeout = 120) {
  char *dir = tu_tmpdir("hostile_dock_busy");
  const char *data = tu_src("tests/data/dock");
  char times[1200];
  snprintf(times, sizeof times, "%s/times", dir);
  char *vina = timed_vina(dir, times);
  /* chunk 0: small, big, small; chunk 1: small, small, big; chunk 2: small */
  free(tu_write(dir, "lib.smi",
                "CCO s1\nc1ccc2ccccc2c1CCC b1\nCCN s2\nCCCO s3\nCCCN s4\nc1ccc2ccccc2c1CCN b2\nCCOC s5\n"));
  char yaml[2048];
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: work\nrun: {progress: lines, progress_interval_s: 0.2}\nsets:\n  library:\n"
           "    - {path: lib.smi}\nstages:\n  ingest: {workers: 1}\n"
           "  dock: {receptor: %s/receptor.pdb, box_ligand: %s/crystal_ligand.mol2, exhaustiveness: 1, vina: %s, "
           "workers: 2, chunk_size: 3}\n",
           data, data, vina);
  free(tu_write(dir, "wf.yaml", yaml));
  char *out = NULL;
  int rc = tu_sh(&out, "cd '%s' && TMPDIR='%s' timeout -s KILL 100 %s run wf.yaml 2>&1", dir, dir, SE3_BINARY);
  cr_assert_eq(rc, 0, "exit %d:\n%s", rc, out);
  char db[1200];
  snprintf(db, sizeof db, "%s/work/screen.db", dir);
  char *per_chunk = tu_query(db, "SELECT chunk || ':' || count(*) FROM docking GROUP BY chunk ORDER BY chunk");
  cr_assert_str_eq(per_chunk, "0:3\n1:3\n2:1\n", "the dockings' chunks:\n%s", per_chunk);
  char *ledger = tu_query(db, "SELECT chunk || ':' || n_ok || ':' || n_rejected FROM stage_chunks WHERE stage = "
                              "'dock' ORDER BY chunk");
  cr_assert_str_eq(ledger, "0:3:0\n1:3:0\n2:1:0\n", "the ledger:\n%s", ledger);
  /* the workers: between the first start and the last, never fewer than
   * two at work for a second or more */
  char *t = tu_read(times, NULL);
  cr_assert_not_null(t);
  double at[32];
  int up[32], n = 0;
  for (char *line = t; line && *line && n < 32; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
    at[n] = atof(line);
    up[n++] = strstr(line, " start ") && strstr(line, " start ") < strchr(line, '\n') ? 1 : -1;
  }
  cr_assert_eq(n, 14, "7 starts and 7 ends:\n%s", t);
  for (int i = 1; i < n; i++) /* (in time order: appends from two processes) */
    for (int j = i; j > 0 && at[j] < at[j - 1]; j--) {
      double a = at[j];
      int u = up[j];
      at[j] = at[j - 1], up[j] = up[j - 1];
      at[j - 1] = a, up[j - 1] = u;
    }
  int last_start = 0;
  for (int i = 0; i < n; i++)
    if (up[i] > 0) last_start = i;
  int running = 0;
  double worst = 0;
  for (int i = 0; i < last_start; i++) {
    running += up[i];
    if (running < 2 && at[i + 1] - at[i] > worst) worst = at[i + 1] - at[i];
  }
  cr_log_info("the longest a worker sat idle with molecules left: %.2f s", worst);
  cr_assert_lt(worst, 1.0, "a worker sat idle %.2f s with molecules left to dock:\n%s\n%s", worst, t, out);
  /* an ETA at once, the heartbeat, and an ETA before the first docking ended */
  cr_assert(strstr(out, "] dock: 7 molecules to dock: about ") &&
                strstr(out, " by their size at exhaustiveness 1, 2 at once (a prior measured on another machine"),
            "no ETA when docking began:\n%s", out);
  cr_assert(strstr(out, "] dock: 0/7 mol (0.0%), ETA ") &&
                strstr(out, " (by ligand size and exhaustiveness 1, before any docking ended: a guess); running "),
            "no word before the first docking ended:\n%s", out);
  cr_assert(strstr(out, "at this run's pace); running b"), "no heartbeat while a long docking ran:\n%s", out);
  free(t);
  free(ledger);
  free(per_chunk);
  free(out);
  free(vina);
  free(dir);
}
