/* Every file ingest reads enters its hash by content: an edited label in a
 * labels_csv redoes ingest and what learned from the labels (train), saying
 * why, and stores the new value; a `touch` that changes no byte of an input
 * redoes nothing. (Before: only the molecule files' path, size and mtime
 * were hashed, so an edited label was "nothing to do" and the model kept the
 * old value, while a touched molecule file redid everything.) */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/testutil.h"

/* dir/mols.sdf and dir/labels.csv (copies, so that a test can edit and
 * touch them) and a workflow through train reading them; the first run
 * done. Returns the workflow; db gets the database's path. */
static char *setup(const char *dir, char *db, size_t dblen) {
  cr_assert_eq(tu_sh(NULL, "cp %s %s/mols.sdf && cp %s %s/labels.csv", tu_src("workflows/data/qm9_mini.sdf"), dir,
                     tu_src("workflows/data/qm9_mini.sdf.csv"), dir),
               0);
  char yaml[1024];
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: work\nrun: {progress: none}\nsets:\n  train:\n    - path: %s/mols.sdf\n"
           "      labels_csv: {path: %s/labels.csv, join: mol_id, columns: [gap]}\n"
           "stages:\n  ingest: {workers: 1}\n  graph: {edges: radius+bonds, cutoff: 4.0}\n"
           "  train: {ensemble: 1, target: gap, epochs: 1, batch_size: 4}\n",
           dir, dir);
  char *wf = tu_write(dir, "wf.yaml", yaml);
  snprintf(db, dblen, "%s/work/screen.db", dir);
  char *out = NULL;
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  free(out);
  return wf;
}

static const char gdb1_gap[] = "SELECT printf('%.4f', l.value) FROM labels l JOIN molecules m ON m.id = l.mol_id "
                               "WHERE m.name = 'gdb_1' AND l.name = 'gap'";
static const char train_hash[] = "SELECT config_hash FROM stage_state WHERE stage = 'train'";

/* One label edited (gdb_1's gap 0.5048 -> 9.5048): ingest and train redone,
 * saying why, and the new value stored. */
Test(labels_hash, edited_label_redoes_ingest_and_train) {
  char *dir = tu_tmpdir("labels_hash_edit"), db[1100];
  char *wf = setup(dir, db, sizeof db);
  char *v = tu_query(db, gdb1_gap), *h0 = tu_query(db, train_hash), *out = NULL;
  cr_assert_str_eq(v, "0.5048\n");
  free(v);
  cr_assert_eq(tu_sh(NULL, "sed -i 's/^gdb_1,\\(.*\\),0\\.5048,/gdb_1,\\1,9.5048,/' %s/labels.csv && "
                           "grep -q '^gdb_1,.*,9\\.5048,' %s/labels.csv",
                     dir, dir),
               0, "the edit did not take");
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  cr_assert(!strstr(out, "ingest: nothing to do"), "an edited label was ignored:\n%s", out);
  cr_assert(!strstr(out, "train: nothing to do"), "train kept the model of the old label:\n%s", out);
  cr_assert(strstr(out, "ingest: labels changed, molecules kept: mols.sdf"), "the rerun does not say why:\n%s", out);
  free(out);
  v = tu_query(db, gdb1_gap);
  cr_assert_str_eq(v, "9.5048\n", "the stored label is not the edited one");
  free(v);
  char *h1 = tu_query(db, train_hash);
  cr_assert(h0 && h1 && strcmp(h0, h1), "train's model was not redone from the new labels");
  free(h0);
  free(h1);
  free(wf);
  free(dir);
}

/* Touched, not changed (mtimes a day ahead, no sleeping): nothing to do. */
Test(labels_hash, touched_inputs_redo_nothing) {
  char *dir = tu_tmpdir("labels_hash_touch"), db[1100];
  char *wf = setup(dir, db, sizeof db), *out = NULL;
  cr_assert_eq(tu_sh(NULL, "touch -d '+1 day' %s/mols.sdf %s/labels.csv", dir, dir), 0);
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  cr_assert(strstr(out, "ingest: nothing to do"), "a touch with no change redid ingest:\n%s", out);
  cr_assert(strstr(out, "train: nothing to do"), "a touch with no change redid train:\n%s", out);
  cr_assert(!strstr(out, "changed since the last run"), "%s", out);
  free(out);
  free(wf);
  free(dir);
}
