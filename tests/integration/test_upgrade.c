/* `se3screen upgrade` (issue 35): a workdir the previous release made
 * (schema version 8: tests/data/upgrade/, README.md there says how) is
 * refused by `run` with a message naming upgrade, read as it is by status
 * and query, converted in place by upgrade, and then run again with no
 * work at all: the same molecule ids, the same model, every stage "nothing
 * to do". With an input file edited before the upgrade, nothing of ingest
 * is kept, and the upgrade and the next run say so and read every file.
 *
 * The previous release fingerprinted its inputs by their absolute paths
 * too, so the workdir is unpacked where it was made,
 * /tmp/se3screen-upgrade-v8 (by one Test, so one case at a time). */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/store.h"
#include "tests/testutil.h"

#define AT "/tmp/se3screen-upgrade-v8"

/* The workdir, its workflow saying coordinates: input: the previous
 * release kept the files' coordinates, and since issue 54 made generated
 * the default, a workflow that leaves the key out redoes ingest (the
 * molecules change; test_coordinates checks that a change says so). */
static void unpack(void) {
  cr_assert_eq(tu_sh(NULL, "rm -rf " AT " && mkdir -p " AT " && tar xzf %s -C " AT,
                     tu_src("tests/data/upgrade/v8_workdir.tar.gz")),
               0);
  /* the workflow as the previous release ran it: without the standardiser
   * (stages.ingest.standardize, issue 54, whose default changes molecules
   * and is hashed; `none` is left out of the hash) and with the files'
   * coordinates (stages.ingest.coordinates: input, likewise) and one
   * conformer a molecule (stages.ingest.conformers: 1, the default until
   * 2026-11-27, likewise) and one model (stages.train.ensemble: 1, the
   * default until 2026-11-29, likewise) */
  cr_assert_eq(tu_sh(NULL, "sed -i 's/^  ingest: {workers: 1}$/  ingest: {workers: 1, standardize: none, coordinates: input, "
                           "conformers: 1}/; s/^    target: gap$/&\\n    ensemble: 1/' " AT
                           "/wf.yaml && grep -q 'standardize: none, coordinates: input, conformers: 1' " AT
                           "/wf.yaml && grep -q '^    ensemble: 1$' " AT "/wf.yaml"),
               0);
}

/* Each stage's "nothing to do" in the log of a run, and no end-of-stage line. */
static void assert_no_work(const char *out) {
  static const char *const stages[] = {"ingest", "graph", "basis", "train", "score", "rank"};
  for (size_t i = 0; i < sizeof stages / sizeof stages[0]; i++) {
    char key[64];
    snprintf(key, sizeof key, "] %s: nothing to do", stages[i]);
    cr_assert(strstr(out, key), "%s did work after the upgrade:\n%s", stages[i], out);
  }
  cr_assert(!strstr(out, " mol in "), "a stage did work after the upgrade:\n%s", out);
}

static void work_kept(void) {
  unpack();
  char *out = NULL, *sum0 = NULL, *sum1 = NULL;
  cr_assert_eq(tu_sh(&sum0, "sha256sum " AT "/work/screen.db"), 0);
  char *ids0 = tu_query(AT "/work/screen.db", "SELECT id, mol_hash FROM molecules ORDER BY id");
  char *model0 = NULL;
  cr_assert_eq(tu_sh(&model0, "sha256sum " AT "/work/models/train-0/best.ckpt | cut -c1-64"), 0);
  /* run: refused, naming upgrade; the file untouched */
  int rc = tu_se3(&out, "run " AT "/wf.yaml");
  cr_assert_neq(rc, 0, "run took a workdir of schema 8:\n%s", out);
  cr_assert(strstr(out, "made by an earlier se3screen (schema version 8") &&
                strstr(out, "se3screen upgrade " AT "/work"),
            "%s", out);
  free(out);
  cr_assert_eq(tu_sh(&sum1, "sha256sum " AT "/work/screen.db"), 0);
  cr_assert_str_eq(sum1, sum0, "the refused run changed the database");
  free(sum1);
  /* read as it is */
  cr_assert_eq(tu_se3(&out, "status " AT "/wf.yaml"), 0, "%s", out);
  cr_assert(strstr(out, "see `se3screen upgrade`"), "%s", out);
  free(out);
  cr_assert_eq(tu_se3(&out, "query " AT "/work \"SELECT count(*) AS n FROM molecules\" --csv"), 0, "%s", out);
  cr_assert_str_eq(out, "n\n19\n");
  free(out);
  cr_assert_eq(tu_sh(&sum1, "sha256sum " AT "/work/screen.db"), 0);
  cr_assert_str_eq(sum1, sum0, "status or query changed the database");
  free(sum1);
  /* upgrade: every input kept, and the next run would change nothing */
  cr_assert_eq(tu_se3(&out, "upgrade " AT "/work"), 0, "%s", out);
  char step[64];
  snprintf(step, sizeof step, "schema version 8 -> %d", STORE_SCHEMA_VERSION);
  cr_assert(strstr(out, step), "%s", out);
  cr_assert(strstr(out, "ingest: 3 input files kept as read"), "%s", out);
  cr_assert(strstr(out, "(a run now would change nothing)"), "%s", out);
  free(out);
  cr_assert_eq(tu_query_int(AT "/work/screen.db", "PRAGMA user_version"), STORE_SCHEMA_VERSION);
  /* and it does not */
  cr_assert_eq(tu_se3(&out, "run " AT "/wf.yaml"), 0, "%s", out);
  assert_no_work(out);
  free(out);
  /* the scores kept, without a conformer spread (schema 13: NULL, none measured) */
  cr_assert_gt(tu_query_int(AT "/work/screen.db", "SELECT count(*) FROM scores"), 0);
  cr_assert_eq(tu_query_int(AT "/work/screen.db", "SELECT count(conformer_sd) FROM scores"), 0);
  /* the molecules kept, their shapes never held to the bounds (schema 14:
   * NULL, not counted), which the report says */
  cr_assert_eq(tu_query_int(AT "/work/screen.db", "SELECT count(shape) FROM molecules"), 0);
  cr_assert_eq(tu_se3(&out, "report " AT "/work -o - --no-depict"), 0, "%s", out);
  cr_assert(strstr(out, "0 refused; 0 input shapes regenerated (<code>stages.ingest.input_shape</code>); 19 molecules "
                        "stored before shapes were counted."),
            "%s", out);
  free(out);
  /* and their stereo never looked at (schema 16: NULL, not 0); the hits'
   * view has the column, the hits files stay as they were (none has one) */
  cr_assert_eq(tu_query_int(AT "/work/screen.db", "SELECT count(stereo_free) + count(isomer_smiles) FROM molecules"),
               0);
  cr_assert_eq(tu_query_int(AT "/work/screen.db",
                            "SELECT count(*) FROM pragma_table_info('ranked_hits') WHERE name = 'isomer_smiles'"),
               1);
  cr_assert_eq(tu_sh(&out, "head -n 1 " AT "/work/hits.csv"), 0);
  cr_assert(!strstr(out, "isomer_smiles"), "%s", out);
  free(out);
  char *ids1 = tu_query(AT "/work/screen.db", "SELECT id, mol_hash FROM molecules ORDER BY id");
  cr_assert(ids0 && ids1 && !strcmp(ids0, ids1), "the molecules' ids or contents changed");
  char *model1 = NULL;
  cr_assert_eq(tu_sh(&model1, "sha256sum " AT "/work/models/train-0/best.ckpt | cut -c1-64"), 0);
  cr_assert_str_eq(model1, model0, "the model changed");
  /* once converted, upgrade has nothing to do */
  cr_assert_eq(tu_se3(&out, "upgrade " AT "/work"), 0, "%s", out);
  cr_assert(strstr(out, "nothing to do"), "%s", out);
  free(out);
  /* a file added now is read alone, with an id of its own */
  cr_assert_eq(tu_sh(NULL, "cp " AT "/lib2.sdf " AT "/lib3.sdf && sed -i 's#    - {path: lib2.sdf}#&\\n    - {path: "
                           "lib3.sdf}#' " AT "/wf.yaml"),
               0);
  cr_assert_eq(tu_se3(&out, "run " AT "/wf.yaml"), 0, "%s", out);
  cr_assert(strstr(out, "ingest: new: lib3.sdf; 3 files unchanged"), "%s", out);
  cr_assert(strstr(out, "] train: nothing to do"), "%s", out);
  free(out);
  free(ids0);
  free(ids1);
  free(model0);
  free(model1);
  free(sum0);
}

static void inputs_changed(void) {
  unpack();
  char *out = NULL;
  /* one label edited after the previous release's run */
  cr_assert_eq(tu_sh(NULL, "sed -i 's/^gdb_1,0\\.5048$/gdb_1,0.5049/' " AT "/labels.csv && grep -q 0.5049 " AT
                           "/labels.csv"),
               0);
  cr_assert_eq(tu_se3(&out, "upgrade " AT "/work"), 0, "%s", out);
  cr_assert(strstr(out, "ingest: its input files or the workflow changed since its last run: nothing kept; the next "
                        "run does it again"),
            "%s", out);
  cr_assert(strstr(out, "ingest: new: train.sdf, lib1.sdf, lib2.sdf"), "%s", out);
  free(out);
  cr_assert_eq(tu_se3(&out, "run " AT "/wf.yaml"), 0, "%s", out);
  cr_assert(strstr(out, "] ingest: 20 mol in "), "ingest did not read every record:\n%s", out);
  free(out);
  cr_assert_eq(tu_query_int(AT "/work/screen.db",
                            "SELECT count(*) FROM labels l JOIN molecules m ON m.id = l.mol_id WHERE m.name = 'gdb_1' "
                            "AND l.value = 0.5049"),
               1);
  cr_assert_eq(tu_se3(&out, "run " AT "/wf.yaml"), 0, "%s", out);
  assert_no_work(out);
  free(out);
  /* the ids, the molecules and the scores a fresh run gives: nothing is
   * left of what the previous release stored */
  cr_assert_eq(tu_se3(&out, "run " AT "/wf.yaml --workdir " AT "/fresh"), 0, "%s", out);
  free(out);
  static const char *const q[] = {
      "SELECT id, set_name, source_file, record_no, mol_hash FROM molecules ORDER BY id",
      "SELECT * FROM labels ORDER BY 1, 2",
      "SELECT mol_id, mol_hash FROM graphs ORDER BY 1",
      "SELECT mol_id, score FROM scores ORDER BY 1",
      "SELECT stage, source_file, record_no, mol_id, reason FROM rejects ORDER BY 1, 2, 3",
  };
  for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) {
    char *a = tu_query(AT "/work/screen.db", q[i]), *b = tu_query(AT "/fresh/screen.db", q[i]);
    cr_assert(a && b && !strcmp(a, b), "the upgraded workdir and a fresh run differ in: %s\n%s\n%s", q[i], a, b);
    free(a);
    free(b);
  }
}

/* One test: both use the one folder (Criterion runs Tests in parallel). */
Test(upgrade, a_previous_release_workdir_refused_then_converted_keeping_its_work_or_saying_why_not, .timeout = 600) {
  work_kept();
  inputs_changed();
}
