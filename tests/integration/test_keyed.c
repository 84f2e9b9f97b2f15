/* Work keyed by what it depends on (issue 35): after each kind of change a
 * rerun does exactly the dependent work, counted from its own log, and ends
 * with what a fresh run of the changed workflow gives: every table equal
 * apart from times and chunk numbers, every checkpoint byte-equal.
 *
 * The molecules come with 3D coordinates (qm9_mini.sdf cut into files):
 * nothing is generated, so a fresh run's molecules are the same bytes.
 * Ingest is keyed by input file (its contents and how they are read; its
 * labels apart: a label change reads the labels again, not the molecules);
 * graphs, bases and scores are keyed by molecule and redone by chunk (a
 * chunk holds molecules of one input file, and is redone whole, in the
 * batches a fresh run makes); the model is keyed by what it learns from. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/testutil.h"

/* The workflow's variable parts. */
struct wf {
  const char *library;   /* the library set's files, as YAML list items */
  const char *columns;   /* the train set's labels_csv columns */
  const char *cutoff;    /* stages.graph.cutoff */
  int epochs;            /* stages.train.epochs */
  const char *score_set; /* stages.score.set */
  const char *other;     /* the set `other`, YAML ("" for none) */
  const char *dedupe;    /* stages.ingest.dedupe */
  int chunk;             /* run.chunk_size */
};

static const struct wf base = {"    - {path: lib1.sdf}\n",           "[gap]", "4.0", 2, "library",
                               "  other:\n    - {path: lib2.sdf}\n", "none",  1024};

/* dir/wf.yaml for w, with workdir `work` (or another name). */
static char *write_wf(const char *dir, const struct wf *w, const char *workdir) {
  char yaml[2048];
  snprintf(
      yaml, sizeof yaml,
      "workflow: keyed\nworkdir: %s\nrun: {progress: lines, chunk_size: %d}\nsets:\n  train:\n    - path: train.sdf\n"
      "      labels_csv: {path: labels.csv, join: mol_id, columns: %s}\n%s  library:\n%s"
      "stages:\n  ingest: {workers: 1, dedupe: %s, coordinates: input}\n  graph: {edges: radius+bonds, cutoff: %s}\n"
      "  basis: {max_degree: 1}\n"
      "  train: {ensemble: 1, target: gap, epochs: %d, batch_size: 4, split: {test: 0.2, valid: 0.2}}\n"
      "  score: {set: %s}\n  rank: {top: 5, outputs: [hits.csv]}\n",
      workdir, w->chunk, w->columns, w->other, w->library, w->dedupe, w->cutoff, w->epochs, w->score_set);
  char name[64];
  snprintf(name, sizeof name, "%s.yaml", workdir);
  return tu_write(dir, name, yaml);
}

/* qm9_mini.sdf's records lo..hi (1-based) into dir/name. */
static void cut_sdf(const char *dir, const char *name, int lo, int hi) {
  cr_assert_eq(tu_sh(NULL,
                     "awk -v lo=%d -v hi=%d 'BEGIN{r=1} {if (r>=lo && r<=hi) print} /^\\$\\$\\$\\$/{r++}' %s > %s/%s",
                     lo, hi, tu_src("workflows/data/qm9_mini.sdf"), dir, name),
               0);
}

/* A test's folder: train.sdf (records 1-13), lib1.sdf (14-17), lib2.sdf
 * (18-21), lib3.sdf (18-20), lib1_edit.sdf (14, 21, 16, 17), labels.csv; the workflow `before` run once. */
static char *setup(const char *name, const struct wf *before) {
  char *dir = tu_tmpdir(name);
  cut_sdf(dir, "train.sdf", 1, 13);
  cut_sdf(dir, "lib1.sdf", 14, 17);
  cut_sdf(dir, "lib2.sdf", 18, 21);
  cut_sdf(dir, "lib3.sdf", 18, 20);
  /* lib1.sdf with its second record replaced by another molecule */
  cut_sdf(dir, "r14.sdf", 14, 14);
  cut_sdf(dir, "r21.sdf", 21, 21);
  cut_sdf(dir, "r16.sdf", 16, 17);
  cr_assert_eq(tu_sh(NULL, "cd %s && cat r14.sdf r21.sdf r16.sdf > lib1_edit.sdf", dir), 0);
  cr_assert_eq(tu_sh(NULL, "cp %s %s/labels.csv", tu_src("workflows/data/qm9_mini.sdf.csv"), dir), 0);
  char *wf = write_wf(dir, before, "work"), *out = NULL;
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  free(out);
  free(wf);
  return dir;
}

/* The work the run whose log is `out` did in `stage`: the count of its
 * end-of-stage line ("] graph: 4 mol in 0.0 s ..."), 0 for "nothing to
 * do". */
static long work(const char *out, const char *stage) {
  char key[64];
  snprintf(key, sizeof key, "] %s: nothing to do", stage);
  if (strstr(out, key)) return 0;
  snprintf(key, sizeof key, "] %s: ", stage);
  for (const char *p = out; (p = strstr(p, key)) != NULL; p++) {
    char *end = NULL;
    long v = strtol(p + strlen(key), &end, 10);
    if (end == p + strlen(key) || *end != ' ') continue;
    const char *in = strchr(end + 1, ' ');
    if (in && !strncmp(in, " in ", 4)) return v;
  }
  cr_assert_fail("no line says what %s did:\n%s", stage, out);
  return -1;
}

/* The molecules ingest parsed (with Open Babel: read and, for those without
 * coordinates, generated in 3D) in the run whose log is `out`: its line
 * "ingest: N molecules parsed ...", 0 when there is none. */
static long parsed(const char *out) {
  const char *p = strstr(out, "] ingest: ");
  for (; p; p = strstr(p + 1, "] ingest: ")) {
    char *end = NULL;
    long v = strtol(p + 10, &end, 10);
    if (end != p + 10 && !strncmp(end, " molecule", 9) && strstr(end, " parsed (") == end + 9 + (v != 1)) return v;
  }
  return 0;
}

/* Every table of the two workdirs equal apart from times, hosts and chunk
 * numbers; every checkpoint byte-equal. */
static void assert_same(const char *dir, const char *a, const char *b) {
  static const char *const q[] = {
      "SELECT id, set_name, source_file, record_no, name, smiles, mol, mol_hash FROM molecules ORDER BY id",
      "SELECT * FROM labels ORDER BY 1, 2",
      "SELECT mol_id, n_nodes, n_edges, graph, mol_hash FROM graphs ORDER BY 1",
      "SELECT mol_id, n_edges, max_degree, dtype, basis, mol_hash FROM bases ORDER BY 1",
      "SELECT * FROM splits ORDER BY 1",
      "SELECT id, target, task, checkpoint, arch, mean, std, best_epoch, best_valid_loss, n_train FROM models",
      "SELECT model, epoch, split, loss, mae, rmse, r2 FROM metrics ORDER BY 1, 2, 3",
      "SELECT * FROM predictions ORDER BY 1, 2",
      "SELECT mol_id, model, target, score, std, model_hash, mol_hash FROM scores ORDER BY 1, 2",
      "SELECT * FROM ranks ORDER BY 1",
      "SELECT rank, name, smiles, set_name, source_file, record_no FROM ranked_hits",
      "SELECT stage, set_name, source_file, record_no, reason FROM rejects ORDER BY 1, 2, 3, 4",
      "SELECT * FROM duplicates ORDER BY 1",
      "SELECT input, position, set_name, source_file, mol_key, label_key, n_records, n_parts FROM ingest_files "
      "ORDER BY 1",
      "SELECT input, part, mol_key, label_key, first_record, last_record, n_ok, n_rejected FROM ingest_parts "
      "ORDER BY 1, 2",
  };
  char da[1200], db[1200];
  snprintf(da, sizeof da, "%s/%s/screen.db", dir, a);
  snprintf(db, sizeof db, "%s/%s/screen.db", dir, b);
  for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) {
    char *x = tu_query(da, q[i]), *y = tu_query(db, q[i]);
    cr_assert(x && y && !strcmp(x, y), "the rerun and a fresh run differ in: %s", q[i]);
    free(x);
    free(y);
  }
  char *out = NULL;
  int rc =
      tu_sh(&out,
            "cd %s/%s && ls models/*/*.ckpt > /dev/null && for f in models/*/*.ckpt; do cmp $f ../%s/$f || exit 1; "
            "done && [ \"$(ls models/*/*.ckpt)\" = \"$(cd ../%s && ls models/*/*.ckpt)\" ]",
            dir, a, b, b);
  cr_assert_eq(rc, 0, "checkpoints differ: %s", out ? out : "");
  free(out);
}

/* After a run of `before`, change the workflow to w (after `edit`, a shell
 * command run in the test's folder, when not NULL), rerun, check each
 * stage's work, rerun once more (no work), and compare with a fresh run of
 * the changed workflow. want: ingest (records), graph, basis, score
 * (molecules), then train: 1 when it must train, 0 when not; then the
 * molecules ingest parsed. */
static void change_from(const char *name, const struct wf *before, const char *edit, const struct wf *w,
                        const long want[6], const char *const dry[]) {
  char *dir = setup(name, before), *out = NULL;
  if (edit) cr_assert_eq(tu_sh(NULL, "cd %s && %s", dir, edit), 0, "%s", edit);
  char *wf = write_wf(dir, w, "work");
  /* --dry-run first: it says each line of `dry`, and writes nothing (the
   * database and its log the same bytes, every other file of the workdir
   * and its time the same; SQLite's shared-memory index of the log, which
   * every reader uses, aside, and the log's own file, which a reader makes
   * empty where the last writer deleted it) */
  char *sum0 = NULL, *sum1 = NULL;
  static const char sums[] =
      "cd %s/work && cat screen.db screen.db-wal 2>/dev/null | sha256sum && ls -lR --time-style=+%%s.%%N "
      "--ignore='*-shm' --ignore='*-wal'";
  cr_assert_eq(tu_sh(&sum0, sums, dir), 0);
  cr_assert_eq(tu_se3(&out, "run %s --dry-run", wf), 0, "%s", out);
  cr_assert_eq(tu_sh(&sum1, sums, dir), 0);
  cr_assert_str_eq(sum1, sum0, "%s: --dry-run changed the workdir:\n%s\n%s", name, sum0, sum1);
  for (int i = 0; dry[i]; i++)
    cr_assert(strstr(out, dry[i]), "%s: --dry-run does not say '%s':\n%s", name, dry[i], out);
  free(out);
  free(sum0);
  free(sum1);
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  static const char *const stages[] = {"ingest", "graph", "basis", "score"};
  for (int i = 0; i < 4; i++)
    cr_assert_eq(work(out, stages[i]), want[i], "%s: %s did %ld, not %ld:\n%s", name, stages[i], work(out, stages[i]),
                 want[i], out);
  cr_assert_eq(work(out, "train") > 0, want[4] > 0, "%s: train %s:\n%s", name, want[4] ? "did not train" : "trained",
               out);
  cr_assert_eq(parsed(out), want[5], "%s: ingest parsed %ld molecules, not %ld:\n%s", name, parsed(out), want[5], out);
  free(out);
  /* a second rerun: nothing */
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  for (int i = 0; i < 4; i++)
    cr_assert_eq(work(out, stages[i]), 0, "%s: a second rerun did %s work:\n%s", name, stages[i], out);
  cr_assert_eq(parsed(out), 0, "%s: a second rerun parsed molecules:\n%s", name, out);
  free(out);
  char *fresh = write_wf(dir, w, "fresh");
  cr_assert_eq(tu_se3(&out, "run %s", fresh), 0, "%s", out);
  free(out);
  assert_same(dir, "work", "fresh");
  free(fresh);
  free(wf);
  free(dir);
}

static void change(const char *name, const char *edit, const struct wf *w, const long want[6],
                   const char *const dry[]) {
  change_from(name, &base, edit, w, want, dry);
}

/* sets: train 13 molecules, other 3 (of 4 records), library 4 (+ 2 of 3).
 * want: ingest's records, graph, basis, score, train (1: it trains), the
 * molecules ingest parsed. */

Test(keyed, a_library_file_added_is_ingested_graphed_and_scored_alone, .timeout = 300) {
  struct wf w = base;
  w.library = "    - {path: lib1.sdf}\n    - {path: lib3.sdf}\n";
  const long want[6] = {3, 2, 2, 2, 0, 2}; /* (one of lib3's 3 records is rejected at ingest) */
  static const char *const dry[] = {"ingest: new: lib3.sdf; 3 files unchanged; reads 3 records (molecules parsed)",
                                    "graph: the molecules new or changed upstream (set library)",
                                    "train: nothing to do",
                                    "score: the molecules new or changed upstream (set library)", NULL};
  change("keyed_add", NULL, &w, want, dry);
}

Test(keyed, a_file_added_ahead_of_the_others_moves_nothing, .timeout = 300) {
  struct wf w = base;
  w.library = "    - {path: lib3.sdf}\n    - {path: lib1.sdf}\n";
  w.other = "  first:\n    - {path: lib3.sdf}\n  other:\n    - {path: lib2.sdf}\n";
  const long want[6] = {6, 4, 4, 2, 0, 4}; /* lib3.sdf in two sets, each its own input */
  static const char *const dry[] = {"ingest: new: lib3.sdf, lib3.sdf; 3 files unchanged", "train: nothing to do",
                                    "score: the molecules new or changed upstream (set library)", NULL};
  change("keyed_ahead", NULL, &w, want, dry);
}

Test(keyed, a_file_of_duplicates_added_is_left_out_after_ingest, .timeout = 300) {
  struct wf before = base, w = base;
  before.dedupe = w.dedupe = "inchikey";
  w.library = "    - {path: lib1.sdf}\n    - {path: r16.sdf}\n"; /* lib1.sdf's records 3 and 4 again */
  const long want[6] = {2, 0, 0, 0, 0, 2};
  static const char *const dry[] = {"ingest: new: r16.sdf", "train: nothing to do", NULL};
  change_from("keyed_dup", &before, NULL, &w, want, dry);
}

Test(keyed, a_file_added_ahead_of_its_duplicates_takes_their_place, .timeout = 300) {
  struct wf before = base, w = base;
  before.dedupe = w.dedupe = "inchikey";
  w.library = "    - {path: r16.sdf}\n    - {path: lib1.sdf}\n";
  /* r16.sdf's 2 molecules graphed and scored; lib1.sdf's copies left out,
   * its other 2 scored again (their batch-mates are not those a fresh run
   * gives them) */
  const long want[6] = {2, 2, 2, 4, 0, 2};
  static const char *const dry[] = {"ingest: new: r16.sdf", "train: nothing to do", NULL};
  change_from("keyed_dup_ahead", &before, NULL, &w, want, dry);
}

Test(keyed, a_library_file_removed_takes_its_rows_and_nothing_more, .timeout = 300) {
  struct wf before = base;
  before.library = "    - {path: lib1.sdf}\n    - {path: lib3.sdf}\n";
  const long want[6] = {0, 0, 0, 0, 0, 0};
  static const char *const dry[] = {
      "ingest: gone: lib3.sdf (its molecules and all made from them deleted); 3 files unchanged",
      "train: nothing to do", NULL};
  change_from("keyed_remove", &before, NULL, &base, want, dry);
}

Test(keyed, a_label_edited_in_place_rereads_labels_retrains_and_rescores, .timeout = 300) {
  /* the same size: 0.5048 -> 0.5049 */
  const long want[6] = {13, 0, 0, 4, 1, 0};
  static const char *const dry[] = {"ingest: labels changed, molecules kept: train.sdf; 2 files unchanged; reads the "
                                    "labels of 13 records (molecules kept)",
                                    "graph: nothing to do",
                                    "basis: nothing to do",
                                    "labels now: train.sdf: gap changes (1 record)",
                                    "train: redone: the labels it learns change ('gap' in set train)",
                                    "score: redone whole: train is redone",
                                    NULL};
  change("keyed_label",
         "sed -i 's/^gdb_1,\\(.*\\),0\\.5048,/gdb_1,\\1,0.5049,/' labels.csv && grep -q 0.5049 labels.csv", &base, want,
         dry);
}

Test(keyed, a_label_column_added_rereads_labels_only, .timeout = 300) {
  struct wf w = base;
  w.columns = "[gap, homo]";
  const long want[6] = {13, 0, 0, 0, 0, 0}; /* (train learns gap: its data are the same) */
  static const char *const dry[] = {"ingest: labels changed, molecules kept: train.sdf",
                                    "labels now: train.sdf: homo changes (13 records)", "graph: nothing to do",
                                    "train: nothing to do", "score: nothing to do", NULL};
  change("keyed_column", NULL, &w, want, dry);
}

Test(keyed, a_label_file_added_to_the_library_rereads_its_labels, .timeout = 300) {
  struct wf w = base;
  w.library = "    - path: lib1.sdf\n      labels_csv: {path: labels.csv, join: mol_id, columns: [gap]}\n";
  const long want[6] = {4, 0, 0, 0, 0, 0};
  static const char *const dry[] = {"ingest: labels changed, molecules kept: lib1.sdf",
                                    "labels now: lib1.sdf: gap changes (4 records)", "graph: nothing to do",
                                    "train: nothing to do", "score: nothing to do", NULL};
  change("keyed_label_file", NULL, &w, want, dry);
}

Test(keyed, a_train_setting_retrains_and_rescores_only, .timeout = 300) {
  struct wf w = base;
  w.epochs = 3;
  const long want[6] = {0, 0, 0, 4, 1, 0};
  static const char *const dry[] = {"ingest: nothing to do", "graph: nothing to do",
                                    "train: redone: its settings changed since the last run",
                                    "score: redone whole: train is redone", NULL};
  change("keyed_train", NULL, &w, want, dry);
}

Test(keyed, another_set_scored_leaves_the_model, .timeout = 300) {
  struct wf w = base;
  w.score_set = "other";
  const long want[6] = {0, 0, 0, 3, 0, 0};
  static const char *const dry[] = {"ingest: nothing to do", "train: nothing to do",
                                    "score: its settings changed: redone whole (its 4 rows discarded)", NULL};
  change("keyed_set", NULL, &w, want, dry);
}

Test(keyed, a_graph_setting_redoes_graphs_and_all_after, .timeout = 300) {
  struct wf w = base;
  w.cutoff = "3.5";
  const long want[6] = {0, 20, 20, 4, 1, 0};
  static const char *const dry[] = {"ingest: nothing to do", "graph: its settings changed: redone whole",
                                    "basis: the settings of a stage before it changed: redone whole",
                                    "score: redone whole: train is redone", NULL};
  change("keyed_graph", NULL, &w, want, dry);
}

Test(keyed, one_record_edited_in_a_file_of_parts_redoes_its_part_alone, .timeout = 300) {
  /* parts and chunks of 2 records: lib1.sdf's second record replaced */
  struct wf w = base;
  w.chunk = 2;
  const long want[6] = {2, 2, 2, 2, 0, 2};
  static const char *const dry[] = {"ingest: changed, read again: lib1.sdf (1 of 2 parts); 2 files unchanged; reads 2 "
                                    "records (molecules parsed)",
                                    "train: nothing to do", NULL};
  change_from("keyed_record_part", &w, "cp lib1_edit.sdf lib1.sdf", &w, want, dry);
}

Test(keyed, one_record_edited_redoes_its_file_and_that_chunk, .timeout = 300) {
  /* lib1.sdf's second record replaced by another molecule */
  const long want[6] = {4, 4, 4, 4, 0, 4}; /* lib1.sdf read again; its graph chunk, whole */
  static const char *const dry[] = {
      "ingest: changed, read again: lib1.sdf; 2 files unchanged; reads 4 records (molecules parsed)",
      "graph: the molecules new or changed upstream (set library)", "train: nothing to do", NULL};
  change("keyed_record", "cp lib1_edit.sdf lib1.sdf", &base, want, dry);
}
