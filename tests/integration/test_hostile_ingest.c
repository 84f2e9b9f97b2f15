/* Inputs that change or repeat under ingest (issue 51, holes 4 and 7).
 *
 * A file written to while a run reads it is an error naming it, never a
 * mix: a molecule file rewritten in place (same inode, same size) after the
 * run planned it used to have its other content stored under the keys the
 * plan took from the first, and a rerun of the file restored took them for
 * done; a labels_csv rewritten while planning had its old labels stored
 * under the key of its new bytes, and a rerun kept them. Each run is frozen
 * (SIGSTOP) in a state it shows (a chunk in the ledger, a planning line in
 * its log), never assumed after a sleep.
 *
 * A molecule file listed twice in one set (again, or through a symbolic or
 * a hard link) is refused by `check` and `run`, naming both entries; in two
 * sets it is a warning naming both. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/testutil.h"

/* Small molecules, quick to embed: every line of a file as long as the
 * line of the same number in the other (a rewrite in place of the same
 * size). */
static const char *const first_smi[] = {"CCO", "CCN", "CCC", "CCS", "COC", "CNC", "CSC", "OCO",
                                        "NCN", "OCN", "CCF", "FCF", "ClC", "BrC", "CC#N", "C=CC",
                                        "CC=O", "OC=O", "NC=O", "C#CC", "CCCC", "CCCO", "CCCN", "CCOC"};
#define N_SMI ((int)(sizeof first_smi / sizeof first_smi[0]))
/* first.smi's records, one a chunk: the window in which the run is seen
 * inside them lasts N_FIRST chunks (a few milliseconds each) */
#define N_FIRST 200
static const char target_a[] = "c1ccccc1 ta1\nc1ccncc1 ta2\nc1ccoc1 ta3\nc1ccsc1 ta4\n"
                               "C1CCCC1 ta5\nC1CCOC1 ta6\nC1CCNC1 ta7\nC1CCSC1 ta8\n";
/* the same bytes count, other molecules under other names, each at
 * another record than in target_a */
static const char target_b[] = "C1CCSC1 tb8\nC1CCNC1 tb7\nC1CCOC1 tb6\nC1CCCC1 tb5\n"
                               "c1ccsc1 tb4\nc1ccoc1 tb3\nc1ccncc1 tb2\nc1ccccc1 tb1\n";

/* Writes text over the file at path in place: the same inode, never
 * truncated (dd conv=notrunc), as an editor that rewrites a file might. */
static void overwrite_in_place(const char *dir, const char *path, const char *text) {
  char *from = tu_write(dir, "overwrite.tmp", text);
  struct stat before, after;
  cr_assert_eq(stat(path, &before), 0);
  cr_assert_eq(tu_sh(NULL, "dd if='%s' of='%s' conv=notrunc status=none", from, path), 0);
  cr_assert_eq(stat(path, &after), 0);
  cr_assert(before.st_ino == after.st_ino && before.st_size == after.st_size, "%s was not rewritten in place", path);
  free(from);
}

/* What ingest stored, in the workflow's order. */
static char *dump(const char *db) {
  char *t = tu_query(db, "SELECT set_name, source_file, record_no, name, smiles FROM molecules ORDER BY " TU_IN_ORDER(""));
  cr_assert_not_null(t, "cannot read %s", db);
  return t;
}

/* The ledger shows a chunk of first.smi committed, and the chunk in flight
 * is one of first.smi's too (chunks go in order, one at a time): the run
 * has not opened target.smi since it planned it. -1 once past that. */
/* `se3screen run wf` started (its stderr into log) and frozen once state
 * says it is `where`: its pid; else the run is killed and the test fails,
 * saying why. */
static int run_frozen(char *wf, const char *log, int (*state)(void *), void *arg, const char *where) {
  char *argv[] = {"se3screen", "run", wf, NULL};
  int pid = tu_spawn_se3(log, argv);
  int frozen = tu_freeze_in_state(&pid, 1, 120, state, arg);
  if (frozen != 1) {
    kill(pid, SIGKILL);
    int st = tu_wait(pid);
    cr_assert_fail("the run was not seen %s (%s; exit %d; see %s)", where,
                   frozen == 0    ? "it ended first"
                   : frozen == -1 ? "past it when first seen: too little work for this machine"
                                  : "not in 120 s",
                   st, log);
  }
  return pid;
}

struct ledger_at {
  const char *db;
  int n_first;    /* the chunks of first.smi */
  long long done; /* the chunks seen done */
};
static int inside_first_file(void *p) {
  struct ledger_at *at = p;
  char *t = tu_query_wait(at->db, "SELECT count(*) FROM stage_chunks WHERE stage='ingest'", 0);
  long long done = t ? atoll(t) : 0;
  free(t);
  at->done = done;
  if (done < 1) return 0;
  return done <= at->n_first - 1 ? 1 : -1;
}

/* The trial, small: a SMILES file rewritten in place (same inode,
 * same size) while ingest runs, after the run planned it, then restored.
 * Before: the run went on with exit 0, storing target_b's names and
 * structures under target_a's part keys, and the rerun after the restore
 * kept them ("nothing to do"). Now the changed run fails, naming the file,
 * with nothing of it stored, and the rerun gives exactly what a fresh run
 * of the restored file gives. */
Test(hostile_ingest, file_rewritten_under_a_run_is_an_error_never_a_mix) {
  char *dir = tu_tmpdir("hostile_rewrite");
  char first[N_FIRST * 16] = "";
  for (int i = 0; i < N_FIRST; i++)
    snprintf(first + strlen(first), sizeof first - strlen(first), "%s f%03d\n", first_smi[i % N_SMI], i + 1);
  free(tu_write(dir, "first.smi", first));
  char *target = tu_write(dir, "target.smi", target_a);
  char yaml[1024];
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: work\nrun: {chunk_size: 1, progress: none}\nsets:\n  library:\n"
           "    - {path: first.smi}\n    - {path: target.smi}\n"
           "stages:\n  ingest: {workers: 1, gen3d_quality: fast}\n");
  char *wf = tu_write(dir, "wf.yaml", yaml);
  char db[1200], log[1200];
  snprintf(db, sizeof db, "%s/work/screen.db", dir);
  snprintf(log, sizeof log, "%s/run1.log", dir);

  struct ledger_at at = {db, N_FIRST, 0};
  int pid = run_frozen(wf, log, inside_first_file, &at, "inside first.smi's chunks");
  cr_log_info("frozen with %lld of first.smi's %d chunks done", at.done, N_FIRST);
  overwrite_in_place(dir, target, target_b);
  tu_thaw(pid);
  int rc = tu_wait(pid);
  char *out = tu_read(log, NULL);
  cr_assert_eq(rc, 1, "the run went on after target.smi was rewritten under it (exit %d):\n%s", rc, out);
  cr_assert(strstr(out, target) && strstr(out, "changed since this run planned it"),
            "the error does not name the file changed:\n%s", out);
  free(out);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM molecules WHERE name LIKE 'tb%'"), 0,
               "molecules of the other content were stored");

  /* restored: the rerun resumes to what a fresh run of the file gives */
  overwrite_in_place(dir, target, target_a);
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  free(out);
  cr_assert_eq(tu_se3(&out, "run %s --workdir %s/fresh", wf, dir), 0, "%s", out);
  free(out);
  char fresh_db[1200];
  snprintf(fresh_db, sizeof fresh_db, "%s/fresh/screen.db", dir);
  char *got = dump(db), *want = dump(fresh_db);
  cr_assert_str_eq(got, want, "the resumed run differs from a fresh one:\n--- resumed\n%s--- fresh\n%s", got, want);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM molecules"), N_FIRST + 8);
  free(got);
  free(want);
  free(wf);
  free(target);
  free(dir);
}

/* The run is planning its molecule file, its labels_csv read already and
 * not yet hashed: a planning line of the molecule file in the log, and not
 * its last ("N records in ..."). -1 once past. */
struct log_at {
  const char *log, *mols;
};
static int planning_molecules(void *p) {
  struct log_at *at = p;
  char *t = tu_read(at->log, NULL);
  char line[1200];
  snprintf(line, sizeof line, "planning: %s: ", at->mols);
  int r = 0;
  if (t && strstr(t, line) && strstr(t, "lines read")) r = strstr(t, "records in") ? -1 : 1;
  else if (t && strstr(t, "records in")) r = -1;
  free(t);
  return r;
}

/* A labels_csv rewritten in place (the same size, other values) while the
 * run plans. Before: the labels read before the rewrite were stored under
 * the key of the bytes after it, exit 0, and a rerun found them current:
 * "nothing to do", the old labels kept for good. Now the labels and their
 * key come from one reading of the file, and a change while planning is an
 * error naming it: the rerun stores the labels the file holds. */
Test(hostile_ingest, labels_csv_rewritten_while_planning_is_an_error_never_a_mix) {
  char *dir = tu_tmpdir("hostile_labels");
  /* four molecules, then 2^24 comment lines: planning's scan of them takes
   * long enough to be seen (a line every run.progress_interval_s) */
  char *mols = NULL;
  cr_assert(asprintf(&mols, "%s/mols.smi", dir) > 0);
  FILE *f = fopen(mols, "w");
  cr_assert_not_null(f);
  fputs("CCO m1\nCCN m2\nCCC m3\nCC=O m4\n", f);
  enum { LINES = 1 << 24 };
  char *filler = malloc(2 * (size_t)LINES);
  cr_assert_not_null(filler);
  for (size_t i = 0; i < LINES; i++)
    memcpy(filler + 2 * i, "#\n", 2);
  cr_assert_eq(fwrite(filler, 2, LINES, f), (size_t)LINES);
  free(filler);
  cr_assert_eq(fclose(f), 0);
  char *labels = tu_write(dir, "labels.csv", "y\n1.5\n2.5\n3.5\n4.5\n");
  static const char labels_b[] = "y\n7.5\n8.5\n9.5\n6.5\n";
  char yaml[1024];
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: work\nrun: {chunk_size: 2, progress: lines, progress_interval_s: 0.1}\n"
           "sets:\n  train:\n    - {path: mols.smi, labels_csv: {path: labels.csv, columns: [y]}}\n"
           "stages:\n  ingest: {workers: 1, gen3d_quality: fast}\n");
  char *wf = tu_write(dir, "wf.yaml", yaml);
  char db[1200], log[1200];
  snprintf(db, sizeof db, "%s/work/screen.db", dir);
  snprintf(log, sizeof log, "%s/run1.log", dir);

  struct log_at at = {log, mols};
  int pid = run_frozen(wf, log, planning_molecules, &at, "planning mols.smi");
  overwrite_in_place(dir, labels, labels_b);
  tu_thaw(pid);
  int rc = tu_wait(pid);
  char *out = tu_read(log, NULL);
  cr_assert_eq(rc, 1, "the run went on after labels.csv was rewritten under it (exit %d):\n%s", rc, out);
  cr_assert(strstr(out, labels) && strstr(out, "changed while this run planned it"),
            "the error does not name the labels_csv changed:\n%s", out);
  free(out);

  /* the file as it is now, read again: its labels, as a fresh run reads them */
  cr_assert_eq(tu_se3(&out, "run %s --set run.progress=none", wf), 0, "%s", out);
  free(out);
  char *got = tu_query(db, "SELECT m.name, l.value FROM labels l JOIN molecules m ON m.id = l.mol_id ORDER BY m.name");
  cr_assert_str_eq(got, "m1|7.5\nm2|8.5\nm3|9.5\nm4|6.5\n", "the labels stored are not the file's");
  free(got);

  /* a labels_csv that is a FIFO is refused, named, without blocking */
  cr_assert_eq(tu_sh(NULL, "rm -f '%s' && mkfifo '%s'", labels, labels), 0);
  cr_assert_eq(tu_sh(&out, "timeout 60 %s run %s --set run.progress=none", SE3_BINARY, wf), 1, "%s", out);
  cr_assert(strstr(out, labels) && strstr(out, "not a regular file"), "%s", out);
  free(out);
  free(wf);
  free(labels);
  free(mols);
  free(dir);
}

/* check's and run's output for a workflow whose sets are `sets` (YAML
 * lines), with a.smi, a symbolic link and a hard link to it in dir. */
static int check_sets(const char *dir, const char *sets, char **out) {
  char yaml[1024];
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: work\nrun: {progress: none}\nsets:\n%s"
           "stages:\n  ingest: {workers: 1, gen3d_quality: fast}\n",
           sets);
  char *wf = tu_write(dir, "wf.yaml", yaml);
  int rc = tu_se3(out, "check %s", wf);
  free(wf);
  return rc;
}

/* The same file twice in a training set (test molecules then had copies in
 * train, stored without a word): refused with both entries at their
 * file:line:col, whatever the name it is given again by. */
Test(hostile_ingest, same_file_twice_in_a_set_is_refused) {
  char *dir = tu_tmpdir("hostile_twice");
  free(tu_write(dir, "a.smi", "CCO a1\nCCN a2\nCCC a3\n"));
  cr_assert_eq(tu_sh(NULL, "cd '%s' && ln -s a.smi sym.smi && ln a.smi hard.smi && mkdir sub", dir), 0);
  static const char *const again[] = {"a.smi", "sym.smi", "hard.smi", "sub/../a.smi"};
  for (size_t i = 0; i < sizeof again / sizeof again[0]; i++) {
    char sets[512], *out = NULL;
    snprintf(sets, sizeof sets, "  train:\n    - {path: a.smi, labels: {y: 1}}\n    - {path: %s, labels: {y: 1}}\n",
             again[i]);
    int rc = check_sets(dir, sets, &out);
    cr_assert_eq(rc, 2, "%s twice in one set: check exit %d:\n%s", again[i], rc, out);
    char second[1200], first[1200];
    snprintf(second, sizeof second, "%s/wf.yaml:7:8: sets.train.1.path: ", dir);
    snprintf(first, sizeof first, "sets.train.0.path (%s/wf.yaml:6:8)", dir);
    cr_assert(strstr(out, second) && strstr(out, first) && strstr(out, "twice"),
              "%s twice in one set: the message does not name both entries:\n%s", again[i], out);
    free(out);
  }
  /* run refuses it too, before it makes its workdir */
  char wf[1200], *out = NULL;
  snprintf(wf, sizeof wf, "%s/wf.yaml", dir);
  cr_assert_eq(tu_se3(&out, "run %s", wf), 2, "%s", out);
  cr_assert(strstr(out, "sets.train.1.path"), "%s", out);
  free(out);
  char db[1200];
  snprintf(db, sizeof db, "%s/work/screen.db", dir);
  cr_assert(access(db, F_OK) != 0, "the refused run made %s", db);
  free(dir);
}

/* In two sets (a library that holds the training molecules), a warning on
 * `check` and `run` naming both sets and the file; the run goes on. */
Test(hostile_ingest, same_file_in_two_sets_is_a_warning) {
  char *dir = tu_tmpdir("hostile_two_sets");
  free(tu_write(dir, "a.smi", "CCO a1\nCCN a2\nCCC a3\n"));
  cr_assert_eq(tu_sh(NULL, "cd '%s' && ln -s a.smi sym.smi", dir), 0);
  char *out = NULL;
  int rc = check_sets(dir, "  train:\n    - {path: a.smi, labels: {y: 1}}\n  library:\n    - {path: sym.smi}\n", &out);
  cr_assert_eq(rc, 0, "%s", out);
  char line[1200];
  snprintf(line, sizeof line, "%s/wf.yaml:8:8: sets.library.0.path: warning: %s/sym.smi is also in set 'train' "
                              "(sets.train.0.path, %s/wf.yaml:6:8, as %s/a.smi)",
           dir, dir, dir, dir);
  cr_assert(strstr(out, line), "no warning naming both sets and the file:\n%s", out);
  free(out);
  char wf[1200];
  snprintf(wf, sizeof wf, "%s/wf.yaml", dir);
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  cr_assert(strstr(out, line), "run does not warn:\n%s", out);
  free(out);
  free(dir);
}
