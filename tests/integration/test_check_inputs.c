/* test_check_inputs.c — the inputs' headers and tags against the workflow
 * (stages/check_inputs.h, issue 31): a label column the CSV does not have,
 * a name column that is not there, a target that names no label, an SD tag
 * no record carries, a labels_csv join column that is not there — each
 * refused at the key's file:line:col with "did you mean" over the names the
 * file really has, in well under a second; the bundled workflows pass, in
 * well under a second. check_inputs is called directly on a workflow
 * loaded by cfg_load; test_check_inputs_cli.c runs the same mistakes
 * through `se3screen check` and `run`. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "pipeline/config.h"
#include "stages/check_inputs.h"
#include "tests/testutil.h"

struct msgs {
  int n;
  char m[8][4096];
};

static void collect(void *arg, const char *msg) {
  struct msgs *s = arg;
  if (s->n < 8) snprintf(s->m[s->n], sizeof s->m[0], "%s", msg);
  s->n++;
}

/* The 1-based line and column where needle first occurs in text. */
static void pos_of(const char *text, const char *needle, int *line, int *col) {
  const char *at = strstr(text, needle);
  cr_assert_not_null(at, "'%s' not in the workflow", needle);
  *line = 1;
  const char *bol = text;
  for (const char *p = text; p < at; p++)
    if (*p == '\n') {
      (*line)++;
      bol = p + 1;
    }
  *col = (int)(at - bol) + 1;
}

/* Writes yaml as dir/wf.yaml, loads it and checks its inputs for `stages`;
 * the problems into got, the seconds check_inputs took into *took. */
static char *check_yaml(const char *dir, const char *yaml, const char *stages, struct msgs *got, double *took) {
  char *wf = tu_write(dir, "wf.yaml", yaml);
  cr_assert_not_null(wf);
  struct cfg_errors errs = {0};
  struct cfg_node *root = cfg_load(wf, NULL, 0, &errs);
  cr_assert_not_null(root, "the workflow loads: %s", errs.n ? errs.msgs[0] : "?");
  cfg_errors_free(&errs);
  memset(got, 0, sizeof *got);
  double t0 = tu_now();
  int n = check_inputs(root, stages, collect, got);
  if (took) *took = tu_now() - t0;
  cr_assert_eq(n, got->n, "the count returned is the number of messages");
  cfg_node_free(root);
  return wf;
}

static void expect_one(const struct msgs *got, const char *want) {
  cr_assert_eq(got->n, 1, "one problem, got %d: %s", got->n, got->n ? got->m[0] : "(none)");
  cr_assert_str_eq(got->m[0], want);
}

Test(check_inputs, missing_label_column) {
  char *dir = tu_tmpdir("chk_label_col");
  const char *csv = tu_src("tests/data/check/nci_lib.csv");
  char yaml[2048];
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: work\nsets:\n  library:\n    - {path: %s, labels: [logs]}\nstages:\n  ingest: {}\n",
           csv);
  struct msgs got;
  double took;
  char *wf = check_yaml(dir, yaml, "*", &got, &took);
  int line, col;
  pos_of(yaml, "logs]", &line, &col);
  char want[4096];
  snprintf(want, sizeof want,
           "%s:%d:%d: sets.library.0.labels.0: no column 'logs' in %s (columns: 'smiles', 'nci_id', 'logS'); did you "
           "mean 'logS'?",
           wf, line, col, csv);
  expect_one(&got, want);
  cr_assert_lt(took, 1.0, "%.3f s", took);
  fprintf(stderr, "check_inputs, missing label column: %.2f ms\n", took * 1e3);
  /* only what the stages that run read: train reads no CSV column */
  free(check_yaml(dir, yaml, "train score rank", &got, NULL));
  cr_assert_eq(got.n, 0, "%s", got.m[0]);
  free(wf);
  free(dir);
}

Test(check_inputs, missing_name_and_smiles_columns) {
  char *dir = tu_tmpdir("chk_name_col");
  const char *csv = tu_src("tests/data/check/nci_lib.csv");
  char yaml[2048];
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: work\nsets:\n  library:\n    - path: %s\n      name_column: nci\n"
           "      smiles_column: SMILE\n",
           csv);
  struct msgs got;
  double took;
  char *wf = check_yaml(dir, yaml, "*", &got, &took);
  cr_assert_eq(got.n, 2, "%d problems: %s", got.n, got.m[0]);
  int line, col;
  char want[4096];
  pos_of(yaml, "smiles_column: SMILE", &line, &col);
  snprintf(want, sizeof want,
           "%s:%d:%d: sets.library.0.smiles_column: no column 'SMILE' in %s (columns: 'smiles', 'nci_id', 'logS'); "
           "did you mean 'smiles'?",
           wf, line, col, csv);
  cr_assert_str_eq(got.m[0], want);
  pos_of(yaml, "name_column: nci", &line, &col);
  snprintf(want, sizeof want,
           "%s:%d:%d: sets.library.0.name_column: no column 'nci' in %s (columns: 'smiles', 'nci_id', 'logS'); did "
           "you mean 'nci_id'?",
           wf, line, col, csv);
  cr_assert_str_eq(got.m[1], want);
  cr_assert_lt(took, 1.0, "%.3f s", took);
  fprintf(stderr, "check_inputs, missing name and SMILES columns: %.2f ms\n", took * 1e3);
  /* a CSV with none of the SMILES column names is bad input, not a
   * mistake in the workflow: ingest makes it a reject and goes on */
  free(wf);
  const char *side = tu_src("tests/data/check/side.csv");
  snprintf(yaml, sizeof yaml, "workflow: t\nworkdir: work\nsets:\n  library:\n    - path: %s\n", side);
  free(check_yaml(dir, yaml, "ingest", &got, NULL));
  cr_assert_eq(got.n, 0, "%s", got.m[0]);
  free(dir);
}

Test(check_inputs, target_that_is_no_label) {
  char *dir = tu_tmpdir("chk_target");
  const char *sdf = tu_src("tests/data/check/tagged.sdf"), *side = tu_src("tests/data/check/side.csv");
  /* (a copy: one file twice in a set is a problem of its own, issue 51) */
  char copy[1200];
  snprintf(copy, sizeof copy, "%s/tagged_copy.sdf", dir);
  cr_assert_eq(tu_sh(NULL, "cp %s %s", sdf, copy), 0);
  char yaml[2048];
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: work\nsets:\n  train:\n"
           "    - {path: %s, labels_csv: {path: %s, join: mol_id}}\n"
           "    - {path: %s, labels: {active: 1}}\n"
           "  library:\n    - {path: %s}\n"
           "stages:\n  train:\n    target: gpa\n    split: {method: column, column: fold}\n"
           "  rank: {target: homo}\n",
           sdf, side, copy, sdf);
  struct msgs got;
  double took;
  char *wf = check_yaml(dir, yaml, "*", &got, &took);
  cr_assert_eq(got.n, 2, "%d problems: %s", got.n, got.m[0]);
  int line, col;
  char want[4096];
  pos_of(yaml, "target: gpa", &line, &col);
  /* labels: the side CSV's columns but the join column, the constant label */
  snprintf(want, sizeof want,
           "%s:%d:%d: stages.train.target: 'gpa' is no label of set 'train' (its labels: 'gap', 'homo', 'active'); "
           "did you mean 'gap'?",
           wf, line, col);
  cr_assert_str_eq(got.m[0], want);
  pos_of(yaml, "column: fold", &line, &col);
  snprintf(want, sizeof want,
           "%s:%d:%d: stages.train.split.column: 'fold' is no label of set 'train' (its labels: 'gap', 'homo', "
           "'active')",
           wf, line, col);
  cr_assert_str_eq(got.m[1], want);
  cr_assert_lt(took, 1.0, "%.3f s", took);
  fprintf(stderr, "check_inputs, target that is no label: %.2f ms\n", took * 1e3);
  free(wf);

  /* rank's target: the model's target or a label; a score-only workflow
   * ranks by its model's target, which check cannot know: not checked */
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: work\nsets:\n  train:\n    - {path: %s, labels: [pIC50]}\n"
           "  library:\n    - {path: %s}\n"
           "stages:\n  train: {target: pIC50}\n  rank: {target: pic50}\n",
           sdf, sdf);
  wf = check_yaml(dir, yaml, "score rank", &got, NULL);
  pos_of(yaml, "target: pic50", &line, &col);
  snprintf(want, sizeof want,
           "%s:%d:%d: stages.rank.target: 'pic50' is neither what the model learns ('pIC50', stages.train.target) "
           "nor a label of set 'train' (its labels: 'pIC50'); did you mean 'pIC50'?",
           wf, line, col);
  expect_one(&got, want);
  free(wf);
  /* rank alone ranks what the database holds, which may be scores of
   * another target: not for this check to say */
  free(check_yaml(dir, yaml, "rank", &got, NULL));
  cr_assert_eq(got.n, 0, "%s", got.m[0]);
  /* without a train stage, rank's target is the model's (a score-only
   * workflow's checkpoint, which the loader opens): not refused here */
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: work\nsets:\n  library:\n    - {path: %s}\n"
           "stages:\n  score: {set: library}\n  rank: {target: whatever}\n",
           sdf);
  free(check_yaml(dir, yaml, "*", &got, NULL));
  cr_assert_eq(got.n, 0, "%s", got.m[0]);
  free(dir);
}

/* The set score reads is one of `sets`: a workflow that trains and names
 * rank (for its order, say) without a library failed after training (found
 * by following the README as a newcomer). A workflow that only trains names
 * no set to score and passes; `check` ("*") counts score as running only
 * where the workflow names it or a stage after it. */
Test(check_inputs, score_set_must_exist) {
  char *dir = tu_tmpdir("chk_score_set");
  const char *csv = tu_src("workflows/data/esol.csv");
  char yaml[2048];
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: work\nsets:\n  train:\n    - {path: %s, labels: [logS]}\n"
           "stages:\n  train: {target: logS}\n  rank: {order: ascending}\n",
           csv);
  struct msgs got;
  char *wf = check_yaml(dir, yaml, "*", &got, NULL);
  cr_assert_eq(got.n, 1, "%d problems: %s", got.n, got.n ? got.m[0] : "(none)");
  cr_assert(strstr(got.m[0], "stages.score.set: no set 'library' in `sets` to score (sets: 'train')"), "%s",
            got.m[0]);
  cr_assert(strstr(got.m[0], "se3screen predict"), "the message names the way out: %s", got.m[0]);
  free(wf);
  /* the same, with score's set written: the message is at its line */
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: work\nsets:\n  train:\n    - {path: %s, labels: [logS]}\n"
           "stages:\n  train: {target: logS}\n  score: {set: libary}\n",
           csv);
  wf = check_yaml(dir, yaml, "*", &got, NULL);
  int line, col;
  pos_of(yaml, "set: libary", &line, &col);
  char want[1400];
  snprintf(want, sizeof want, "%s:%d:%d: stages.score.set: no set 'libary'", wf, line, col);
  cr_assert_eq(got.n, 1, "%d problems: %s", got.n, got.n ? got.m[0] : "(none)");
  cr_assert(!strncmp(got.m[0], want, strlen(want)), "%s\nwanted it to start with %s", got.m[0], want);
  free(wf);
  /* training alone: nothing is scored, nothing to refuse */
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: work\nsets:\n  train:\n    - {path: %s, labels: [logS]}\n"
           "stages:\n  train: {target: logS}\n",
           csv);
  free(check_yaml(dir, yaml, "*", &got, NULL));
  cr_assert_eq(got.n, 0, "%s", got.m[0]);
  free(check_yaml(dir, yaml, "ingest graph train", &got, NULL));
  cr_assert_eq(got.n, 0, "%s", got.m[0]);
  free(dir);
}

static void write_gz(const char *path, const char *text) {
  gzFile gz = gzopen(path, "wb");
  cr_assert_not_null(gz);
  cr_assert_eq(gzwrite(gz, text, (unsigned)strlen(text)), (int)strlen(text));
  cr_assert_eq(gzclose(gz), Z_OK);
}

Test(check_inputs, wrong_sd_tag) {
  char *dir = tu_tmpdir("chk_sd_tag");
  char *text = tu_read(tu_src("tests/data/check/tagged.sdf"), NULL);
  cr_assert_not_null(text);
  char gz[1200];
  snprintf(gz, sizeof gz, "%s/tagged.sdf.gz", dir);
  write_gz(gz, text);
  const char *files[] = {tu_src("tests/data/check/tagged.sdf"), gz};
  for (int f = 0; f < 2; f++) {
    char yaml[2048];
    snprintf(yaml, sizeof yaml,
             "workflow: t\nworkdir: work\nsets:\n  train:\n    - {path: %s, labels: [pIC50, pic50, vendor]}\n"
             "stages:\n  train: {target: pIC50}\n",
             files[f]);
    struct msgs got;
    double took;
    char *wf = check_yaml(dir, yaml, "*", &got, &took);
    cr_assert_eq(got.n, 2, "%s: %d problems: %s", files[f], got.n, got.m[0]);
    int line, col;
    char want[4096];
    pos_of(yaml, "pic50", &line, &col);
    snprintf(want, sizeof want,
             "%s:%d:%d: sets.train.0.labels.1: no SD tag 'pic50' in the first 2 records of %s (tags there: 'pIC50', "
             "'vendor_id'); did you mean 'pIC50'?",
             wf, line, col, files[f]);
    cr_assert_str_eq(got.m[0], want);
    pos_of(yaml, "vendor]", &line, &col);
    snprintf(want, sizeof want,
             "%s:%d:%d: sets.train.0.labels.2: no SD tag 'vendor' in the first 2 records of %s (tags there: "
             "'pIC50', 'vendor_id'); did you mean 'vendor_id'?",
             wf, line, col, files[f]);
    cr_assert_str_eq(got.m[1], want);
    cr_assert_lt(took, 1.0, "%.3f s", took);
    fprintf(stderr, "check_inputs, wrong SD tag (%s): %.2f ms\n", f ? "gzip" : "plain", took * 1e3);
    free(wf);
  }
  free(text);
  free(dir);
}

/* An SD tag only past the first 50 records is not seen: the scan stops
 * there (a text scan of the file's head, never the whole file). */
Test(check_inputs, sd_tags_scan_only_the_first_records) {
  char *dir = tu_tmpdir("chk_sd_head");
  char *one = tu_read(tu_src("tests/data/check/tagged.sdf"), NULL);
  cr_assert_not_null(one);
  size_t n1 = strlen(one);
  char *many = malloc(n1 * 30 + 200);
  cr_assert_not_null(many);
  many[0] = 0;
  for (int i = 0; i < 26; i++) /* 52 records */
    strcat(many, one);
  strcat(many, "late\n\n  1  0  0  0  0  0  0  0  0  0999 V2000\n"
               "    0.0000    0.0000    0.0000 N   0  0  0  0  0  0  0  0  0  0  0  0\nM  END\n> <late>\n1\n\n$$$$\n");
  char *sdf = tu_write(dir, "many.sdf", many);
  char yaml[2048];
  snprintf(yaml, sizeof yaml, "workflow: t\nworkdir: work\nsets:\n  a:\n    - {path: %s, labels: [late]}\n", sdf);
  struct msgs got;
  free(check_yaml(dir, yaml, "ingest", &got, NULL));
  cr_assert_eq(got.n, 1, "%d problems", got.n);
  cr_assert(strstr(got.m[0], "no SD tag 'late' in the first 50 records of"), "%s", got.m[0]);
  free(sdf);
  free(many);
  free(one);
  free(dir);
}

Test(check_inputs, labels_csv_join_and_columns) {
  char *dir = tu_tmpdir("chk_side");
  const char *sdf = tu_src("tests/data/check/tagged.sdf"), *side = tu_src("tests/data/check/side.csv");
  char yaml[2048];
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: work\nsets:\n  train:\n"
           "    - path: %s\n      labels_csv: {path: %s, join: molid, columns: [gap, lumo]}\n",
           sdf, side);
  struct msgs got;
  char *wf = check_yaml(dir, yaml, "ingest", &got, NULL);
  cr_assert_eq(got.n, 2, "%d problems: %s", got.n, got.m[0]);
  int line, col;
  char want[4096];
  pos_of(yaml, "join: molid", &line, &col);
  snprintf(want, sizeof want,
           "%s:%d:%d: sets.train.0.labels_csv.join: no column 'molid' in %s (columns: 'mol_id', 'gap', 'homo'); did "
           "you mean 'mol_id'?",
           wf, line, col, side);
  cr_assert_str_eq(got.m[0], want);
  pos_of(yaml, "lumo", &line, &col);
  snprintf(want, sizeof want,
           "%s:%d:%d: sets.train.0.labels_csv.columns.1: no column 'lumo' in %s (columns: 'mol_id', 'gap', 'homo'); "
           "did you mean 'homo'?",
           wf, line, col, side);
  cr_assert_str_eq(got.m[1], want);
  free(wf);
  free(dir);
}

/* Before (hardening IV): a header naming a label column twice
 * (`smiles,logS,logS`) trained on the last one and `check` passed; the same
 * in a labels_csv and in stages.dock.table's key and score columns. Now a
 * used column named twice is refused at its key, naming both positions; a
 * column the workflow does not use may repeat. */
Test(check_inputs, a_used_column_named_twice) {
  char *dir = tu_tmpdir("chk_twice");
  char *csv = tu_write(dir, "twice.csv", "smiles,logS,logS,x,x\nCCO,1.5,2.5,0,0\n");
  char *smi2 = tu_write(dir, "smiles2.csv", "smiles,name,smiles\nCCO,a,CCN\n");
  char *side = tu_write(dir, "side.csv", "mol_id,gap,gap,mol_id\n1,0.1,0.2,1\n");
  char *table = tu_write(dir, "table.csv", "smiles,score,name,score\nCCO,-5,a,-6\n");
  char *plain = tu_write(dir, "plain.csv", "smiles,name\nCCO,a\n");
  char yaml[4096];
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: work\nsets:\n  library:\n    - {path: %s, labels: [logS]}\n"
           "    - {path: %s}\n"
           "    - path: %s\n      labels_csv: {path: %s, join: mol_id, columns: [gap]}\n"
           "stages:\n  ingest: {}\n  dock: {oracle: table, table: %s, set: library}\n",
           csv, smi2, plain, side, table);
  struct msgs got;
  char *wf = check_yaml(dir, yaml, "*", &got, NULL);
  cr_assert_eq(got.n, 5, "%d problems", got.n);
  int line, col;
  char want[4096];
  pos_of(yaml, "logS]", &line, &col);
  snprintf(want, sizeof want,
           "%s:%d:%d: sets.library.0.labels.0: column 'logS' is named twice in the header of %s (columns 2 and 3): "
           "which one is meant cannot be told; rename one",
           wf, line, col, csv);
  cr_assert_str_eq(got.m[0], want);
  /* the SMILES column found by its name, twice: at the input's path */
  cr_assert(strstr(got.m[1], "sets.library.1.path: column 'smiles' is named twice") &&
                strstr(got.m[1], "(columns 1 and 3)"),
            "%s", got.m[1]);
  pos_of(yaml, "join: mol_id", &line, &col);
  snprintf(want, sizeof want,
           "%s:%d:%d: sets.library.2.labels_csv.join: column 'mol_id' is named twice in the header of %s (columns 1 "
           "and 4)",
           wf, line, col, side);
  cr_assert(strstr(got.m[2], want), "'%s' not in '%s'", want, got.m[2]);
  cr_assert(strstr(got.m[3], "labels_csv.columns.0: column 'gap' is named twice") &&
                strstr(got.m[3], "(columns 2 and 3)"),
            "%s", got.m[3]);
  cr_assert(strstr(got.m[4], "stages.dock.table: column 'score' is named twice in the header of") &&
                strstr(got.m[4], "(columns 2 and 4)"),
            "%s", got.m[4]);
  /* the unused column x repeats unremarked: the messages above are all;
   * a labels_csv without `columns:` uses every column, each named once */
  char *side2 = tu_write(dir, "side2.csv", "mol_id,gap,homo,gap\n1,0.1,0.2,0.3\n");
  char yaml2[2048];
  snprintf(
      yaml2, sizeof yaml2,
      "workflow: t\nworkdir: work\nsets:\n  library:\n    - path: %s\n      labels_csv: {path: %s, join: mol_id}\n",
      plain, side2);
  char *wf2 = check_yaml(dir, yaml2, "ingest", &got, NULL);
  cr_assert_eq(got.n, 1, "%d problems: %s", got.n, got.m[0]);
  cr_assert(strstr(got.m[0], "sets.library.0.labels_csv.path: column 'gap' is named twice") &&
                strstr(got.m[0], "(columns 2 and 4)"),
            "%s", got.m[0]);
  free(wf2);
  free(side2);
  free(wf);
  free(plain);
  free(table);
  free(side);
  free(smi2);
  free(csv);
  free(dir);
}

/* A SMILES file has no columns and no SD tags: labels: [x] on one reads
 * nothing, and name_column does not apply to it. */
Test(check_inputs, smiles_file_has_no_label_columns) {
  char *dir = tu_tmpdir("chk_smi");
  const char *smi = tu_src("tests/data/check/structure_compound.smi");
  char yaml[2048];
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: work\nsets:\n  a:\n    - {path: %s, labels: [logS], name_column: Compound}\n", smi);
  struct msgs got;
  free(check_yaml(dir, yaml, "*", &got, NULL));
  cr_assert_eq(got.n, 2, "%d problems: %s", got.n, got.m[0]);
  cr_assert(strstr(got.m[0], "sets.a.0.name_column: ") && strstr(got.m[0], "is read as smi, which has no columns"),
            "%s", got.m[0]);
  cr_assert(strstr(got.m[1], "sets.a.0.labels: ") && strstr(got.m[1], "is a SMILES file: it has no columns or SD tags"),
            "%s", got.m[1]);
  free(dir);
}

/* The bundled workflows have no such mistake, and are checked well under
 * a second each. */
Test(check_inputs, bundled_workflows_pass_fast) {
  const char *wfs[] = {"workflows/quickstart.yaml", "workflows/classify.yaml", "workflows/active_learning.yaml"};
  for (int i = 0; i < 3; i++) {
    struct cfg_errors errs = {0};
    struct cfg_node *root = cfg_load(tu_src(wfs[i]), NULL, 0, &errs);
    cr_assert_not_null(root, "%s: %s", wfs[i], errs.n ? errs.msgs[0] : "?");
    cfg_errors_free(&errs);
    struct msgs got = {0};
    double t0 = tu_now();
    int n = check_inputs(root, "*", collect, &got);
    double took = tu_now() - t0;
    cr_assert_eq(n, 0, "%s: %s", wfs[i], got.m[0]);
    cr_assert_lt(took, 1.0, "%s: %.3f s", wfs[i], took);
    fprintf(stderr, "check_inputs, %s: %.2f ms\n", wfs[i], took * 1e3);
    cfg_node_free(root);
  }
}
