/* `merge` adopts only shards of this workdir's workflow as it is now. A
 * shard database of another workflow, or stale shards left from before a
 * configuration change, are refused by name with the reason, merge exits
 * non-zero, and the finished screen keeps its scores, models and hits.
 * (Before: they were adopted as "made with another configuration ...
 * replacing it", and the scores, models and ranked hits dropped to 0 with
 * exit 0.) Shards made on purpose with a changed configuration are still
 * adopted, replacing the stage made before the change. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/testutil.h"

/* A small workflow through rank in dir (name: the workflow's name; ingest:
 * more of stages.ingest; labels: the labels_csv, NULL for the bundled one). */
static char *screen_wf_labels(const char *dir, const char *name, const char *ingest, const char *labels) {
  char yaml[2048];
  snprintf(yaml, sizeof yaml,
           "workflow: %s\nworkdir: work\nrun: {progress: none, chunk_size: 8}\n"
           "sets:\n  train:\n    - path: %s\n      labels_csv: {path: %s, join: mol_id, columns: [gap]}\n"
           "stages:\n  ingest: {workers: 1%s}\n  graph: {edges: radius+bonds, cutoff: 4.0}\n"
           "  train: {ensemble: 1, target: gap, epochs: 1, batch_size: 4}\n  score: {set: train}\n  rank: {top: 5}\n",
           name, tu_src("workflows/data/qm9_mini.sdf"), labels ? labels : tu_src("workflows/data/qm9_mini.sdf.csv"),
           ingest);
  return tu_write(dir, "wf.yaml", yaml);
}

static char *screen_wf(const char *dir, const char *name, const char *ingest) {
  return screen_wf_labels(dir, name, ingest, NULL);
}

static char *counts(const char *db) {
  char *c = tu_query(db, "SELECT (SELECT count(*) FROM molecules), (SELECT count(*) FROM graphs), "
                         "(SELECT count(*) FROM models), (SELECT count(*) FROM scores), (SELECT count(*) FROM ranks), "
                         "(SELECT group_concat(stage || ':' || config_hash || ':' || finalized, ' ') FROM "
                         "(SELECT * FROM stage_state ORDER BY stage))");
  cr_assert(c, "cannot read %s", db);
  return c;
}

static void shard_ingest(const char *wf, const char *wd, int n) {
  for (int i = 0; i < n; i++) {
    char *out = NULL;
    cr_assert_eq(tu_se3(&out, "run %s --workdir %s --stage ingest --shard %d/%d", wf, wd, i, n), 0, "%s", out);
    free(out);
  }
}

/* (a) a finished unsharded screen, and a shard database of another
 * workflow copied into its shards/. */
Test(merge_guard, shard_of_another_workflow_is_refused) {
  char *dir = tu_tmpdir("merge_guard_other");
  char a[1024], b[1024], wd[1100], db[1200];
  snprintf(a, sizeof a, "%s/a", dir);
  snprintf(b, sizeof b, "%s/b", dir);
  snprintf(wd, sizeof wd, "%s/work", a);
  snprintf(db, sizeof db, "%s/screen.db", wd);
  cr_assert_eq(tu_sh(NULL, "mkdir -p %s %s", a, b), 0);
  char *wf = screen_wf(a, "mine", ""), *other = screen_wf(b, "another", ", max_atoms: 500");
  char *out = NULL;
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  free(out);
  char *before = counts(db);
  cr_assert_gt(tu_query_int(db, "SELECT count(*) FROM ranks"), 0);
  char owd[1100];
  snprintf(owd, sizeof owd, "%s/work", b);
  shard_ingest(other, owd, 2);
  cr_assert_eq(tu_sh(NULL, "mkdir -p %s/shards && cp %s/shards/ingest-0.db %s/shards/", wd, owd, wd), 0);
  int rc = tu_se3(&out, "merge %s", db);
  cr_assert_neq(rc, 0, "merge adopted another workflow's shard and exited 0:\n%s", out);
  char want[1300];
  snprintf(want, sizeof want, "refused %s/shards/ingest-0.db: it was made by another workflow", wd);
  cr_assert(strstr(out, want), "'%s' not in:\n%s", want, out);
  free(out);
  char *after = counts(db);
  cr_assert_str_eq(after, before, "merge changed the finished screen");
  free(before);
  free(after);
  free(wf);
  free(other);
  free(dir);
}

/* (b) ingest in shards, merged; then the configuration changed and the
 * whole workflow run again unsharded: the shards left in shards/ are stale.
 * (c) after another change, the shards run again on purpose are adopted. */
Test(merge_guard, stale_shards_are_refused_and_resharded_ones_adopted) {
  char *dir = tu_tmpdir("merge_guard_stale");
  char wd[1100], db[1200];
  snprintf(wd, sizeof wd, "%s/work", dir);
  snprintf(db, sizeof db, "%s/screen.db", wd);
  char *wf = screen_wf(dir, "mine", "");
  shard_ingest(wf, wd, 2);
  char *out = NULL;
  cr_assert_eq(tu_se3(&out, "merge %s", db), 0, "%s", out);
  free(out);
  free(wf);
  wf = screen_wf(dir, "mine", ", max_atoms: 500"); /* a changed configuration of ingest */
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  cr_assert(strstr(out, "ingest: the configuration changed since the last run"), "%s", out);
  free(out);
  char *before = counts(db);
  cr_assert_gt(tu_query_int(db, "SELECT count(*) FROM ranks"), 0);
  int rc = tu_se3(&out, "merge %s", db);
  cr_assert_neq(rc, 0, "merge adopted stale shards and exited 0:\n%s", out);
  for (int i = 0; i < 2; i++) {
    char want[1300];
    snprintf(want, sizeof want,
             "refused %s/shards/ingest-%d.db: it was made with another configuration of stage ingest", wd, i);
    cr_assert(strstr(out, want), "'%s' not in:\n%s", want, out);
  }
  cr_assert(strstr(out, "--stage ingest --shard 1/2"), "the refusal does not say how to redo the shard:\n%s", out);
  free(out);
  char *after = counts(db);
  cr_assert_str_eq(after, before, "merge changed the finished screen");
  free(after);

  /* (c) changed again, on purpose, and the shards run again: adopted, the
   * stage made before the change replaced (and what came after it, as
   * `run` does) */
  free(wf);
  wf = screen_wf(dir, "mine", ", max_atoms: 400");
  shard_ingest(wf, wd, 2);
  cr_assert_eq(tu_se3(&out, "merge %s", db), 0, "%s", out);
  cr_assert(strstr(out, "replacing it with the shards made with the workflow as it is now"), "%s", out);
  free(out);
  cr_assert_eq(tu_query_int(db, "SELECT finalized FROM stage_state WHERE stage='ingest'"), 1);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM ranks"), 0);
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  cr_assert(strstr(out, "ingest (shard") == NULL && strstr(out, "ingest: nothing to do"), "%s", out);
  free(out);
  cr_assert_gt(tu_query_int(db, "SELECT count(*) FROM ranks"), 0);
  free(before);
  free(wf);
  free(dir);
}

/* (b) again, the change being an edited input file (a label) rather than
 * the configuration: the shards from before it are refused as made from
 * other input files. */
Test(merge_guard, shards_from_before_an_input_edit_are_refused) {
  char *dir = tu_tmpdir("merge_guard_input");
  char wd[1100], db[1200], labels[1100];
  snprintf(wd, sizeof wd, "%s/work", dir);
  snprintf(db, sizeof db, "%s/screen.db", wd);
  snprintf(labels, sizeof labels, "%s/labels.csv", dir);
  cr_assert_eq(tu_sh(NULL, "cp %s %s", tu_src("workflows/data/qm9_mini.sdf.csv"), labels), 0);
  char *wf = screen_wf_labels(dir, "mine", "", labels), *out = NULL;
  shard_ingest(wf, wd, 2);
  cr_assert_eq(tu_se3(&out, "merge %s", db), 0, "%s", out);
  free(out);
  cr_assert_eq(tu_sh(NULL, "sed -i 's/^gdb_1,\\(.*\\),0\\.5048,/gdb_1,\\1,9.5048,/' %s", labels), 0);
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  free(out);
  char *before = counts(db);
  cr_assert_gt(tu_query_int(db, "SELECT count(*) FROM ranks"), 0);
  int rc = tu_se3(&out, "merge %s", db);
  cr_assert_neq(rc, 0, "merge adopted stale shards and exited 0:\n%s", out);
  char want[1300];
  snprintf(want, sizeof want, "refused %s/shards/ingest-0.db: its ingest stage was made from other input files", wd);
  cr_assert(strstr(out, want), "'%s' not in:\n%s", want, out);
  free(out);
  char *after = counts(db);
  cr_assert_str_eq(after, before, "merge changed the finished screen");
  free(before);
  free(after);
  free(wf);
  free(dir);
}
