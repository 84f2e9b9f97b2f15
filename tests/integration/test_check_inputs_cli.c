/* test_check_inputs_cli.c — `se3screen check` and `run` refuse what only
 * the input files can show (issue 31: a label column the CSV does not have,
 * a target that names no label, an SD tag no record carries), with exit
 * status 2, the message at the key's file:line:col with "did you mean", in
 * well under a second, and `run` before it makes its workdir: nothing is
 * ingested for a workflow that would fail after the ingest. The rules
 * themselves are tested through check_inputs() in test_check_inputs.c. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/testutil.h"

Test(check_inputs_cli, check_and_run_refuse_before_any_work) {
  char *dir = tu_tmpdir("chk_cli");
  cr_assert_eq(
      tu_sh(NULL, "cp %s %s %s/", tu_src("tests/data/check/nci_lib.csv"), tu_src("tests/data/check/tagged.sdf"), dir),
      0);
  char *wf = tu_write(dir, "wf.yaml",
                      "workflow: t\nworkdir: work\nrun: {progress: none}\n"
                      "sets:\n"
                      "  train:\n"
                      "    - {path: tagged.sdf, labels: [pic50]}\n" /* line 6 */
                      "  library:\n"
                      "    - {path: nci_lib.csv, labels: [logs]}\n" /* line 8 */
                      "stages:\n"
                      "  ingest: {workers: 1}\n"
                      "  train: {target: pIC50, epochs: 1}\n"); /* line 11 */
  char want[3][2048];
  snprintf(want[0], sizeof want[0],
           "wf.yaml:6:35: sets.train.0.labels.0: no SD tag 'pic50' in the first 2 records of %s/tagged.sdf (tags "
           "there: 'pIC50', 'vendor_id'); did you mean 'pIC50'?",
           dir);
  snprintf(want[1], sizeof want[1],
           "wf.yaml:8:36: sets.library.0.labels.0: no column 'logs' in %s/nci_lib.csv (columns: 'smiles', 'nci_id', "
           "'logS'); did you mean 'logS'?",
           dir);
  snprintf(want[2], sizeof want[2],
           "wf.yaml:11:11: stages.train.target: 'pIC50' is no label of set 'train' (its labels: 'pic50'); did you "
           "mean 'pic50'?");
  char *out = NULL;
  double t0 = tu_now();
  int rc = tu_se3(&out, "check %s", wf);
  double took = tu_now() - t0;
  cr_assert_eq(rc, 2, "check: exit %d:\n%s", rc, out);
  for (int i = 0; i < 3; i++)
    cr_assert(strstr(out, want[i]), "missing '%s' in\n%s", want[i], out);
  cr_assert_lt(took, 5.0, "check took %.2f s", took); /* the whole process; check_inputs itself: milliseconds */
  fprintf(stderr, "se3screen check with three input mistakes: %.3f s\n", took);
  free(out);
  rc = tu_se3(&out, "run %s", wf);
  cr_assert_eq(rc, 2, "run: exit %d:\n%s", rc, out);
  for (int i = 0; i < 3; i++)
    cr_assert(strstr(out, want[i]), "missing '%s' in\n%s", want[i], out);
  free(out);
  cr_assert_neq(tu_sh(NULL, "test -e %s/work", dir), 0, "run made the workdir");
  /* put right, both pass */
  free(wf);
  wf = tu_write(dir, "wf.yaml",
                "workflow: t\nworkdir: work\nrun: {progress: none}\n"
                "sets:\n  train:\n    - {path: tagged.sdf, labels: [pIC50]}\n"
                "  library:\n    - {path: nci_lib.csv, labels: [logS]}\n"
                "stages:\n  ingest: {workers: 1}\n  train: {target: pIC50, epochs: 1}\n");
  rc = tu_se3(&out, "check %s", wf);
  cr_assert_eq(rc, 0, "check: exit %d:\n%s", rc, out);
  free(out);
  free(wf);
  free(dir);
}

/* One pass (issue 70): a schema error no longer hides the inputs' problems.
 * A workflow with two schema errors (an unknown key, a wrong type), a label
 * column its CSV lacks and a stage naming a set that is not there gets all
 * four from one `check`, each at its file:line:col, and one count line;
 * `run` and `run --dry-run` the same list, before any workdir is made. */
Test(check_inputs_cli, one_pass_reports_schema_and_input_problems_together) {
  char *dir = tu_tmpdir("chk_one_pass");
  cr_assert_eq(
      tu_sh(NULL, "cp %s %s %s/", tu_src("tests/data/check/nci_lib.csv"), tu_src("tests/data/check/tagged.sdf"), dir),
      0);
  char *wf = tu_write(dir, "wf.yaml",
                      "workflow: t\nworkdir: work\nrun: {progress: none}\n"
                      "sets:\n"
                      "  train:\n"
                      "    - {path: tagged.sdf, labels: [pIC50]}\n"
                      "  library:\n"
                      "    - {path: nci_lib.csv, labels: [logs]}\n" /* line 8 */
                      "stages:\n"
                      "  ingest: {workers: 1, colour: blue}\n"   /* line 10 */
                      "  train: {target: pIC50, epochs: many}\n" /* line 11 */
                      "  score: {set: libary}\n");               /* line 12 */
  char want[5][2048];
  snprintf(want[0], sizeof want[0], "wf.yaml:10:24: stages.ingest.colour: unknown key 'colour'");
  snprintf(want[1], sizeof want[1], "wf.yaml:11:26: stages.train.epochs: expected an integer, got 'many'");
  snprintf(want[2], sizeof want[2],
           "wf.yaml:8:36: sets.library.0.labels.0: no column 'logs' in %s/nci_lib.csv (columns: 'smiles', 'nci_id', "
           "'logS'); did you mean 'logS'?",
           dir);
  snprintf(want[3], sizeof want[3],
           "wf.yaml:12:11: stages.score.set: no set 'libary' in `sets` to score (sets: 'train', 'library'); did you "
           "mean 'library'?");
  snprintf(want[4], sizeof want[4], "4 problems in %s; nothing was run\n", wf);
  const char *cmds[] = {"check %s", "run %s", "run --dry-run %s"};
  for (int c = 0; c < 3; c++) {
    char *out = NULL;
    int rc = tu_se3(&out, cmds[c], wf);
    cr_assert_eq(rc, 2, "%s: exit %d:\n%s", cmds[c], rc, out);
    for (int i = 0; i < 5; i++)
      cr_assert(strstr(out, want[i]), "%s: missing '%s' in\n%s", cmds[c], want[i], out);
    /* each said once: the loader's problems are not printed twice */
    cr_assert_null(strstr(strstr(out, want[0]) + 1, want[0]), "%s: said twice:\n%s", cmds[c], out);
    /* the loader's problems first, then the inputs', then the count */
    cr_assert_lt(strstr(out, want[1]), strstr(out, want[2]), "%s: order:\n%s", cmds[c], out);
    cr_assert_lt(strstr(out, want[3]), strstr(out, want[4]), "%s: order:\n%s", cmds[c], out);
    free(out);
  }
  cr_assert_neq(tu_sh(NULL, "test -e %s/work", dir), 0, "run made the workdir");
  /* --no-inputs keeps its meaning: the files are not read (no column
   * problem), but the set score reads is still looked for, in the same pass */
  char *out = NULL;
  int rc = tu_se3(&out, "check --no-inputs %s", wf);
  cr_assert_eq(rc, 2, "check --no-inputs: exit %d:\n%s", rc, out);
  cr_assert(strstr(out, want[0]) && strstr(out, want[1]) && strstr(out, want[3]), "check --no-inputs:\n%s", out);
  cr_assert_null(strstr(out, "no column"), "check --no-inputs read a file:\n%s", out);
  char count[1024];
  snprintf(count, sizeof count, "3 problems in %s\n", wf);
  cr_assert(strstr(out, count), "missing '%s' in\n%s", count, out);
  free(out);
  free(wf);
  free(dir);
}

/* A tree the loader refused parts of: each value refused is said once, the
 * inputs are checked on the rest, and a check that needs a refused value is
 * left out (no "no label" for a target held against a set whose labels were
 * refused), never a crash. Each case: the workflow's `sets` and `stages`,
 * what must be said, what must not, and the problems counted. */
Test(check_inputs_cli, a_half_valid_tree_is_checked_where_valid) {
  char *dir = tu_tmpdir("chk_half_valid");
  cr_assert_eq(
      tu_sh(NULL, "cp %s %s %s/", tu_src("tests/data/check/nci_lib.csv"), tu_src("tests/data/check/tagged.sdf"), dir),
      0);
  static const struct {
    const char *yaml, *said[2], *not_said;
    int n;
  } cases[] = {
      /* a set that is no list: the other set's files are still read; the
       * target is not held against the refused set */
      {"sets: {train: 5, library: [{path: nci_lib.csv, labels: [logs]}]}\nstages: {train: {target: pIC50}}",
       {"wf.yaml:4:8: sets.train: expected a list, got '5'", "sets.library.0.labels.0: no column 'logs'"},
       "is no label",
       2},
      /* the target refused: the SD tag is still checked, and neither the
       * target nor rank's target is held against the labels */
      {"sets: {train: [{path: tagged.sdf, labels: [pic50]}]}\n"
       "stages: {train: {target: [a, b]}, rank: {target: zzz}, score: {set: train}}",
       {"stages.train.target: expected a string, got a list", "no SD tag 'pic50'"},
       "stages.rank.target",
       2},
      /* labels_csv's columns refused: what the file gives is not known */
      {"sets: {train: [{path: nci_lib.csv, labels_csv: {path: nci_lib.csv, columns: 7}}]}\n"
       "stages: {train: {target: pIC50}}",
       {"sets.train.0.labels_csv.columns: expected a list, got '7'", NULL},
       "is no label",
       1},
      /* the training set's name refused: no set is looked for under it;
       * score's set still is */
      {"sets: {train: [{path: tagged.sdf, labels: [pIC50]}]}\nstages: {train: {target: x, set: [a]}, score: {set: "
       "lib}}",
       {"stages.train.set: expected a string, got a list", "no set 'lib' in `sets` to score"},
       "is no label",
       2},
      /* whole sections of the wrong kind */
      {"sets: 5\nstages: {train: {target: pIC50}, score: {set: library}}",
       {"wf.yaml:4:1: sets: expected a mapping, got '5'", NULL},
       "no set",
       1},
      {"sets: {train: [{path: tagged.sdf, labels: [pIC50]}, 7, {format: csvv, path: nci_lib.csv, labels: [x]}]}\n"
       "stages: [train]",
       {"stages: expected a mapping, got a list", "sets.train.1: expected a mapping, got '7'"},
       "no column",
       3},
  };
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    char yaml[2048];
    snprintf(yaml, sizeof yaml, "workflow: t\nworkdir: work\nrun: {progress: none}\n%s\n", cases[c].yaml);
    char *wf = tu_write(dir, "wf.yaml", yaml);
    const char *cmds[] = {"check %s", "run %s"};
    for (int k = 0; k < 2; k++) {
      char *out = NULL;
      int rc = tu_se3(&out, cmds[k], wf);
      cr_assert_eq(rc, 2, "case %zu, %s: exit %d:\n%s", c, cmds[k], rc, out);
      for (int i = 0; i < 2; i++)
        cr_assert(!cases[c].said[i] || strstr(out, cases[c].said[i]), "case %zu, %s: missing '%s' in\n%s", c, cmds[k],
                  cases[c].said[i], out);
      cr_assert_null(strstr(out, cases[c].not_said), "case %zu, %s: '%s' said in\n%s", c, cmds[k], cases[c].not_said,
                     out);
      char count[1024];
      snprintf(count, sizeof count, "problems in %s", wf);
      if (cases[c].n == 1) {
        cr_assert_null(strstr(out, count), "case %zu, %s: one problem counted:\n%s", c, cmds[k], out);
      } else {
        snprintf(count, sizeof count, "%d problems in %s; nothing was run\n", cases[c].n, wf);
        cr_assert(strstr(out, count), "case %zu, %s: missing '%s' in\n%s", c, cmds[k], count, out);
      }
      free(out);
    }
    cr_assert_neq(tu_sh(NULL, "test -e %s/work", dir), 0, "case %zu: run made the workdir", c);
    free(wf);
  }
  free(dir);
}
