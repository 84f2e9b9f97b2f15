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
