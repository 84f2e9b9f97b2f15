/* The command line: verbs, --help, exit codes, check, status and query. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/cpu/isa.h"
#include "tests/testutil.h"

Test(cli, help_and_exit_codes) {
  char *out = NULL;
  cr_assert_eq(tu_se3(&out, "%s", ""), 2, "no verb is a usage error");
  free(out);
  cr_assert_eq(tu_se3(&out, "--help"), 0);
  cr_assert(strstr(out, "run WORKFLOW.yaml"), "%s", out);
  free(out);
  const char *verbs[] = {"run", "check", "status", "query", "merge"};
  for (int i = 0; i < 5; i++) {
    cr_assert_eq(tu_se3(&out, "%s --help", verbs[i]), 0, "%s --help", verbs[i]);
    cr_assert(strstr(out, "usage: se3screen"), "%s", out);
    free(out);
  }
  cr_assert_eq(tu_se3(&out, "frobnicate"), 2);
  cr_assert(strstr(out, "unknown verb 'frobnicate'"), "%s", out);
  free(out);
  cr_assert_eq(tu_se3(&out, "run"), 2);
  free(out);
  cr_assert_eq(tu_se3(&out, "run x.yaml --shard 3/3"), 2);
  cr_assert(strstr(out, "--shard wants I/N"), "%s", out);
  free(out);
  cr_assert_eq(tu_se3(&out, "run %s --stage nope", tu_src("workflows/quickstart.yaml")), 2);
  cr_assert(strstr(out, "unknown stage 'nope'"), "%s", out);
  free(out);
}

Test(cli, check_prints_resolved_config_or_every_error) {
  char *dir = tu_tmpdir("cli_check");
  char *wf = tu_write(dir, "wf.yaml",
                      "workflow: t\n"
                      "sets:\n  a:\n    - {path: x.sdf, fromat: sdf}\n"
                      "stages:\n  ingest: {gen3d: sometimes, workers: -1}\n");
  char *out = NULL;
  cr_assert_eq(tu_se3(&out, "check %s", wf), 2);
  cr_assert(strstr(out, "wf.yaml:4:21: sets.a.0.fromat: unknown key"), "%s", out);
  cr_assert(strstr(out, "did you mean 'format'"), "%s", out);
  cr_assert(strstr(out, "wf.yaml:6:12: stages.ingest.gen3d: must be one of auto, always, never; got 'sometimes'"), "%s",
            out);
  cr_assert(strstr(out, "wf.yaml:6:30: stages.ingest.workers: must be between 0 and 1024, got -1"), "%s", out);
  free(out);
  free(wf);
  free(tu_write(dir, "x.sdf", "")); /* check looks for input files */
  wf = tu_write(dir, "ok.yaml", "workflow: t\nsets:\n  a:\n    - {path: x.sdf}\n");
  cr_assert_eq(tu_se3(&out, "check %s --set ingest.seed=7", wf), 0, "%s", out);
  cr_assert(strstr(out, "seed: 7"), "%s", out);
  cr_assert(strstr(out, "gen3d: auto"), "%s", out);
  char want[1200];
  snprintf(want, sizeof want, "workdir: %s/runs/t", dir);
  cr_assert(strstr(out, want), "workdir default: %s", out);
  free(out);
  free(wf);
  free(dir);
}

Test(cli, status_and_read_only_query) {
  char *dir = tu_tmpdir("cli_query");
  char yaml[1024];
  snprintf(yaml, sizeof yaml, "workflow: t\nworkdir: work\nrun: {progress: none}\nsets:\n  a:\n    - {path: %s}\n",
           tu_src("workflows/data/qm9_mini.sdf"));
  char *wf = tu_write(dir, "wf.yaml", yaml);
  char *out = NULL;
  cr_assert_eq(tu_se3(&out, "status %s", wf), 1, "nothing has run yet: %s", out);
  free(out);
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  free(out);
  cr_assert_eq(tu_se3(&out, "status %s", wf), 0, "%s", out);
  cr_assert(strstr(out, "ingest"), "%s", out);
  cr_assert(strstr(out, "1/1"), "%s", out);
  cr_assert(strstr(out, "unchanged"), "%s", out);
  cr_assert(strstr(out, "last error: none"), "%s", out);
  free(out);
  char db[1100];
  snprintf(db, sizeof db, "%s/work/screen.db", dir);
  cr_assert_eq(
      tu_se3(&out, "query %s \"SELECT name, n_atoms FROM molecules WHERE record_no <= 2 ORDER BY id\" --csv", db), 0,
      "%s", out);
  cr_assert_str_eq(out, "name,n_atoms\ngdb_1,5\ngdb_2,4\n");
  free(out);
  cr_assert_eq(tu_se3(&out, "query %s/work \"SELECT value FROM labels LIMIT 0\" --json", dir), 0, "%s", out);
  cr_assert_str_eq(out, "[]\n");
  free(out);
  cr_assert_eq(tu_se3(&out, "query %s \"SELECT record_no, 0.1 AS x FROM molecules WHERE record_no=1\" --json", db), 0);
  cr_assert_str_eq(out, "[\n  {\"record_no\": 1, \"x\": 0.1}\n]\n");
  free(out);
  /* Read-only: writing is refused (exit 2) and changes nothing (more in test_query.c). */
  cr_assert_eq(tu_se3(&out, "query %s \"DELETE FROM molecules\"", db), 2);
  cr_assert(strstr(out, "readonly") || strstr(out, "read-only") || strstr(out, "query_only"), "%s", out);
  free(out);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM molecules"), 20);
  cr_assert_eq(tu_se3(&out, "query %s/nothing.db \"SELECT 1\"", dir), 2);
  free(out);
  free(wf);
  free(dir);
}

/* What the report calls the workflow (meta 'workflow') is the workflow of
 * the last run that ran a stage: a run refused before any stage ran
 * (`--stage rank` of another workflow file on the same workdir, with
 * nothing scored) leaves it as it was; one that runs a stage takes it
 * (issue 55). */
Test(cli, refused_run_keeps_the_workflow_name) {
  char *dir = tu_tmpdir("cli_refused");
  char yaml[1024];
  snprintf(yaml, sizeof yaml, "workflow: t\nworkdir: work\nrun: {progress: none}\nsets:\n  a:\n    - {path: %s}\n",
           tu_src("workflows/data/qm9_mini.sdf"));
  char *wf = tu_write(dir, "wf.yaml", yaml), *other = tu_write(dir, "other.yaml", yaml);
  char db[1100], *out = NULL;
  snprintf(db, sizeof db, "%s/work/screen.db", dir);
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  free(out);
  cr_assert_eq(tu_se3(&out, "run %s --stage rank", other), 1, "rank ran with nothing scored:\n%s", out);
  cr_assert(strstr(out, "run `--stage score` first"), "%s", out);
  free(out);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM runs WHERE status = 'failed' AND workflow LIKE '%/other.yaml'"),
               1, "the refused run has its row in runs");
  char *got = tu_query(db, "SELECT value FROM meta WHERE key = 'workflow'");
  cr_assert_not_null(strstr(got, "/wf.yaml\n"), "a refused run renamed the workflow: %s", got);
  free(got);
  /* a run of other.yaml that runs its stage (ingest: nothing new) takes the name */
  cr_assert_eq(tu_se3(&out, "run %s", other), 0, "%s", out);
  free(out);
  got = tu_query(db, "SELECT value FROM meta WHERE key = 'workflow'");
  cr_assert_not_null(strstr(got, "/other.yaml\n"), "the run of other.yaml left the name: %s", got);
  free(got);
  free(wf);
  free(other);
  free(dir);
}

/* The report's time per stage is summed over every run of the workdir
 * (stage_runs), not read off the ledger, which keeps each chunk's last run
 * alone (issue 55): two runs that each ingest a file give ingest two rows,
 * and the report's row for ingest the sum of their times and 2 runs. */
Test(cli, report_sums_a_stage_over_its_runs) {
  char *dir = tu_tmpdir("cli_stage_runs");
  char one[1024], two[2048];
  snprintf(one, sizeof one, "workflow: t\nworkdir: work\nrun: {progress: none}\nsets:\n  a:\n    - {path: %s}\n",
           tu_src("workflows/data/qm9_mini.sdf"));
  snprintf(two, sizeof two, "%s    - {path: %s}\n", one, tu_src("workflows/data/delaney_first60.csv"));
  char *wf1 = tu_write(dir, "one.yaml", one), *wf2 = tu_write(dir, "two.yaml", two);
  char db[1100], page[1100], *out = NULL;
  snprintf(db, sizeof db, "%s/work/screen.db", dir);
  snprintf(page, sizeof page, "%s/report.html", dir);
  cr_assert_eq(tu_se3(&out, "run %s", wf1), 0, "%s", out);
  free(out);
  cr_assert_eq(tu_se3(&out, "run %s", wf2), 0, "%s", out);
  free(out);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM stage_runs WHERE stage = 'ingest' AND status = 'done' AND "
                                "seconds > 0 AND finished >= started"),
               2, "a row a run of ingest");
  cr_assert_eq(tu_query_int(db, "SELECT sum(n_done) FROM stage_runs WHERE stage = 'ingest'"),
               tu_query_int(db, "SELECT count(*) FROM molecules") +
                   tu_query_int(db, "SELECT count(*) FROM rejects WHERE stage = 'ingest'"),
               "the runs' counts add up to the records read");
  char *sum = tu_query(db, "SELECT printf('%.1f s', sum(seconds)) FROM stage_runs WHERE stage = 'ingest'");
  sum[strcspn(sum, "\n")] = 0;
  cr_assert_eq(tu_se3(&out, "report %s/work -o %s --no-depict", dir, page), 0, "%s", out);
  free(out);
  size_t len = 0;
  char *html = tu_read(page, &len), want[256];
  cr_assert_not_null(html);
  snprintf(want, sizeof want, "<tr><td>ingest</td><td class=\"n\">%s</td><td class=\"n\">2</td>", sum);
  cr_assert_not_null(strstr(html, want), "no '%s' in the report's time table", want);
  free(html);
  free(sum);
  free(wf1);
  free(wf2);
  free(dir);
}

/* Input files that do not exist are configuration errors: `check` reports
 * them with the other problems, and `run` refuses before making the workdir. */
Test(cli, missing_inputs_fail_check_and_run_before_the_workdir) {
  char *dir = tu_tmpdir("cli_missing_input");
  char *wf = tu_write(dir, "wf.yaml",
                      "workflow: t\nworkdir: work\nrun: {progress: none}\n"
                      "sets:\n  a:\n    - {path: data/gone.sdf}\n    - {path: \"data/*.smi\"}\n"
                      "stages:\n  ingest: {gen3d: sometimes}\n");
  char want[3][1400];
  snprintf(want[0], sizeof want[0], "wf.yaml:6:8: sets.a.0.path: no such file: %s/data/gone.sdf", dir);
  snprintf(want[1], sizeof want[1], "wf.yaml:7:8: sets.a.1.path: no file matches: %s/data/*.smi", dir);
  snprintf(want[2], sizeof want[2], "wf.yaml:9:12: stages.ingest.gen3d: must be one of");
  char *out = NULL;
  cr_assert_eq(tu_se3(&out, "check %s", wf), 2, "%s", out);
  for (int i = 0; i < 3; i++)
    cr_assert(strstr(out, want[i]), "missing '%s' in\n%s", want[i], out);
  free(out);
  cr_assert_eq(tu_se3(&out, "run %s --set ingest.gen3d=auto", wf), 2, "%s", out);
  for (int i = 0; i < 2; i++)
    cr_assert(strstr(out, want[i]), "missing '%s' in\n%s", want[i], out);
  free(out);
  cr_assert_neq(tu_sh(NULL, "test -e %s/work", dir), 0, "run made the workdir");

  /* with the files in place, both pass (relative to the workflow file) */
  cr_assert_eq(tu_sh(NULL, "mkdir -p %s/data && head -n 20 %s > %s/data/gone.sdf && printf 'CCO\\n' > %s/data/x.smi",
                     dir, tu_src("workflows/data/qm9_mini.sdf"), dir, dir),
               0);
  cr_assert_eq(tu_se3(&out, "check %s --set ingest.gen3d=auto", wf), 0, "%s", out);
  free(out);
  free(wf);
  free(dir);
}

/* device: and precision: are checked before any work when the run will use
 * the model: an unknown device, a GPU that is not there (cuda:999 is on no
 * machine) or a GPU precision on the CPU stop with one message at the key's
 * position that says how to run on the CPU, and the workdir is not made. */
Test(cli, device_is_checked_before_any_work) {
  char *dir = tu_tmpdir("cli_device");
  const char *cases[][3] = {
      {"device: cuda:999", "wf.yaml:2:1: device: cuda:999 was asked for, but ", "device: cpu"},
      {"device: tpu", "wf.yaml:2:1: device 'tpu' is not one of cpu, cuda, cuda:N", "auto"},
      {"precision: tf32", "wf.yaml:2:1: precision tf32 needs a GPU (device: cuda)", "the CPU computes in fp32"},
      {"precision: fp16", "wf.yaml:2:1: precision fp16 needs a GPU (device: cuda)", "the CPU computes in fp32"},
      {"precision: fp8", "wf.yaml:2:1: precision: must be one of fp32, tf32, bf16, fp16", "fp8"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char text[1024];
    snprintf(text, sizeof text,
             "workflow: t\n%s\nworkdir: work\nrun: {progress: none}\n"
             "sets:\n  train:\n    - {path: %s, labels: [gap]}\n"
             "stages:\n  train: {target: gap, epochs: 1}\n",
             cases[i][0], tu_src("workflows/data/qm9_mini.sdf"));
    char *wf = tu_write(dir, "wf.yaml", text);
    char *out = NULL;
    cr_assert_eq(tu_se3(&out, "run %s", wf), 2, "%s: %s", cases[i][0], out);
    for (int k = 1; k < 3; k++)
      cr_assert(strstr(out, cases[i][k]), "%s: missing '%s' in\n%s", cases[i][0], cases[i][k], out);
    cr_assert_neq(tu_sh(NULL, "test -e %s/work", dir), 0, "%s: run made the workdir", cases[i][0]);
    free(out);
    free(wf);
  }
  free(dir);
}

/* precision: bf16 on the CPU: where the processor has AVX512-BF16, training
 * runs in fp32 and says so, and scoring runs in bf16; where it has not (or
 * SE3_BF16=off says so), the run stops before any work with a message at
 * the key naming what is missing. */
Test(cli, bf16_scores_on_the_cpu_or_says_why_not) {
  char *dir = tu_tmpdir("cli_bf16");
  char text[1024];
  snprintf(text, sizeof text,
           "workflow: t\nprecision: bf16\nworkdir: work\nrun: {progress: none}\n"
           "sets:\n  train:\n    - path: %s\n      labels_csv: {path: %s, join: mol_id, columns: [gap]}\n"
           "stages:\n  ingest: {workers: 1}\n  train: {ensemble: 1, target: gap, epochs: 1, batch_size: 4}\n  score: {set: train}\n",
           tu_src("workflows/data/qm9_mini.sdf"), tu_src("workflows/data/qm9_mini.sdf.csv"));
  char *wf = tu_write(dir, "wf.yaml", text);
  char *out = NULL;
  /* as on a processor without it (SE3_BF16=off) */
  cr_assert_eq(tu_sh(&out, "SE3_BF16=off %s run %s", SE3_BINARY, wf), 2, "%s", out);
  cr_assert(strstr(out, "wf.yaml:2:1: precision bf16 on the CPU needs AVX512-BF16"), "%s", out);
  cr_assert_neq(tu_sh(NULL, "test -e %s/work", dir), 0, "run made the workdir");
  free(out);
  out = NULL;
  if (nn_bf16_supported()) {
    cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
    cr_assert(strstr(out, "in fp32; precision bf16 on the CPU is for scoring"), "training: %s", out);
    cr_assert(strstr(out, "the model runs on cpu") && strstr(out, ") in bf16"), "scoring: %s", out);
  } else {
    cr_assert_eq(tu_se3(&out, "run %s", wf), 2, "%s", out);
    cr_assert(strstr(out, "needs AVX512-BF16"), "%s", out);
  }
  free(out);
  free(wf);
  free(dir);
}

/* docs/schema.md is `se3screen schema`, generated from the schema's SQL: a
 * column added or changed without regenerating it fails here. Every table a
 * fresh database has is documented, with every column. */
Test(cli, schema_doc_is_generated_from_the_sql) {
  char *out = NULL;
  cr_assert_eq(tu_se3(&out, "schema"), 0, "%s", out);
  size_t len = 0;
  char *doc = tu_read(tu_src("docs/schema.md"), &len);
  cr_assert(doc, "docs/schema.md is missing");
  cr_assert_str_eq(out, doc,
                   "docs/schema.md differs from `se3screen schema`: regenerate it with build/se3screen schema > "
                   "docs/schema.md");
  /* every table and column of a real database is in it */
  char *dir = tu_tmpdir("cli_schema");
  char *wf =
      tu_write(dir, "wf.yaml", "workflow: s\nworkdir: w\nrun: {progress: none}\nsets:\n  a:\n    - {path: x.smi}\n");
  cr_assert_eq(tu_sh(NULL, "echo 'CCO ethanol' > %s/x.smi", dir), 0);
  char *o2 = NULL;
  cr_assert_eq(tu_se3(&o2, "run %s", wf), 0, "%s", o2);
  free(o2);
  char db[1100];
  snprintf(db, sizeof db, "%s/w/screen.db", dir);
  char *cols = tu_query(db, "SELECT t.name || '|' || c.name FROM sqlite_schema t, pragma_table_info(t.name) c "
                            "WHERE t.type IN ('table', 'view') ORDER BY 1");
  int n = 0;
  for (char *save = NULL, *l = strtok_r(cols, "\n", &save); l; l = strtok_r(NULL, "\n", &save), n++) {
    char table[128], heading[160], row[160];
    const char *bar = strchr(l, '|');
    cr_assert(bar);
    snprintf(table, sizeof table, "%.*s", (int)(bar - l), l);
    snprintf(heading, sizeof heading, "## `%s` (", table);
    snprintf(row, sizeof row, "| `%s` |", bar + 1);
    const char *sec = strstr(doc, heading);
    cr_assert(sec, "table %s is not in docs/schema.md", table);
    const char *next = strstr(sec + 1, "\n## ");
    const char *hit = strstr(sec, row);
    int in_view = strstr(sec, "(view,") == sec + strlen(heading) - 1;
    cr_assert(in_view || (hit && (!next || hit < next)), "column %s.%s is not in docs/schema.md", table, bar + 1);
  }
  cr_assert_gt(n, 60, "only %d columns", n);
  free(cols);
  free(wf);
  free(dir);
  free(doc);
  free(out);
}

/* docs/configuration.md is `se3screen keys`, generated from the schema's doc:
 * fields (configs/defaults.yaml): a key added or a doc: changed without
 * regenerating it fails here. Every key has a row with a meaning: each key
 * `check` prints for a workflow (defaults filled in, so nearly all of
 * them) is a row of the page, and no row's meaning is empty. */
Test(cli, configuration_doc_is_generated_from_the_schema) {
  char *out = NULL;
  cr_assert_eq(tu_se3(&out, "keys"), 0, "%s", out);
  size_t len = 0;
  char *doc = tu_read(tu_src("docs/configuration.md"), &len);
  cr_assert(doc, "docs/configuration.md is missing");
  cr_assert_str_eq(out, doc,
                   "docs/configuration.md differs from `se3screen keys`: regenerate it with build/se3screen keys > "
                   "docs/configuration.md");
  /* every row: | `key` | type | default | bounds | changes results | meaning | */
  int rows = 0;
  for (char *l = doc, *next; l && *l; l = next) {
    next = strchr(l, '\n');
    if (next) *next++ = 0;
    if (strncmp(l, "| `", 3)) continue;
    int cells = 0;
    const char *last = NULL;
    for (char *c = l; *c; c++)
      if (*c == '|' && c[-1] != '\\') {
        cells++;
        if (c[1]) last = c + 1;
      }
    cr_expect_eq(cells, 7, "docs/configuration.md: a row of %d cells, not 6: %s", cells - 1, l);
    cr_expect(last && strspn(last, " ") < strlen(last) - 1, "docs/configuration.md: no meaning: %s", l);
    rows++;
  }
  cr_assert_gt(rows, 100, "only %d rows in docs/configuration.md", rows);
  free(doc);
  doc = tu_read(tu_src("docs/configuration.md"), &len);
  /* each key the resolved quickstart has, as a row (lists of sets become
   * sets.<name>[].KEY) */
  char *resolved = NULL;
  cr_assert_eq(tu_se3(&resolved, "check %s", tu_src("workflows/quickstart.yaml")), 0, "%s", resolved);
  char path[16][64];
  int n_keys = 0;
  for (char *l = resolved, *next; l && *l; l = next) {
    next = strchr(l, '\n');
    if (next) *next++ = 0;
    /* a list item's "- " is one more level: "    - path: x" is at level 3 */
    size_t sp = strspn(l, " ");
    int item = !strncmp(l + sp, "- ", 2);
    int lvl = (int)(sp + (item ? 2 : 0)) / 2;
    const char *k = l + sp + (item ? 2 : 0), *colon = strchr(k, ':');
    if (!colon || lvl >= 16) continue;
    snprintf(path[lvl], sizeof path[0], "%.*s", (int)(colon - k), k);
    if (colon[1] == 0) continue; /* a section: its keys follow */
    char key[512] = "";
    int first = 0;
    if (!strcmp(path[0], "sets")) { /* sets.train.0.path is documented as sets.<name>[].path */
      if (lvl < 3) continue;
      strcpy(key, "sets.<name>[]");
      first = 3;
    }
    for (int i = first; i <= lvl; i++) {
      if (*key) strcat(key, ".");
      strcat(key, path[i]);
    }
    char row[600];
    snprintf(row, sizeof row, "| `%s` |", key);
    cr_expect(strstr(doc, row), "docs/configuration.md has no row for %s", key);
    n_keys++;
  }
  cr_assert_gt(n_keys, 90, "only %d keys in the quickstart resolved: the parsing no longer matches `check`", n_keys);
  free(resolved);
  free(doc);
  free(out);
}

/* `check --no-inputs`, for workflows in documentation: the schema and the
 * rules between keys, no input file looked for or read; plain `check` is
 * unchanged (the same workflow fails it, for the missing file and for the
 * column the CSV lacks). */
Test(cli, check_no_inputs_reads_no_file) {
  char *dir = tu_tmpdir("cli_no_inputs");
  cr_assert_eq(tu_sh(NULL, "printf 'smiles,logp\\nCCO,1\\n' > %s/have.csv", dir), 0);
  char *wf = tu_write(dir, "wf.yaml",
                      "workflow: d\ninclude: [not_here.yaml]\n"
                      "sets:\n  train:\n    - {path: missing.sdf, labels: [homo]}\n"
                      "    - {path: have.csv, labels: [homo]}\n"
                      "  library:\n    - {path: library_not_here.smi}\n"
                      "stages:\n  train: {target: homo, model: models/mine.yaml}\n"
                      "  score: {checkpoint: elsewhere/models}\n");
  char *out = NULL;
  cr_assert_eq(tu_se3(&out, "check --no-inputs %s", wf), 0, "%s", out);
  cr_expect(strstr(out, "target: homo"), "%s", out);
  free(out);
  cr_assert_eq(tu_se3(&out, "check %s", wf), 2, "%s", out);
  cr_expect(strstr(out, "not_here.yaml"), "%s", out);
  cr_expect(strstr(out, "no such file") && strstr(out, "missing.sdf"), "%s", out);
  free(out);
  /* the inputs' heads: read by check, not by check --no-inputs */
  char *csv = tu_write(dir, "csv.yaml", "workflow: d\nsets:\n  train:\n    - {path: have.csv, labels: [homo]}\n");
  cr_assert_eq(tu_se3(&out, "check %s", csv), 2, "%s", out);
  cr_expect(strstr(out, "no column 'homo'"), "%s", out);
  free(out);
  cr_assert_eq(tu_se3(&out, "check --no-inputs %s", csv), 0, "%s", out);
  free(out);
  free(csv);
  /* what needs no file is still checked: keys, types, the target among the set's labels */
  char *bad = tu_write(dir, "bad.yaml",
                       "workflow: d\nsets:\n  train:\n    - {path: missing.sdf, labels: [homo]}\n"
                       "stages:\n  ingest: {workerz: 2}\n  graph: {cutoff: far}\n  train: {target: hom}\n");
  cr_assert_eq(tu_se3(&out, "check --no-inputs %s", bad), 2, "%s", out);
  cr_expect(strstr(out, "did you mean 'workers'"), "%s", out);
  cr_expect(strstr(out, "stages.graph.cutoff"), "%s", out);
  free(out);
  free(bad);
  bad = tu_write(dir, "bad2.yaml",
                 "workflow: d\nsets:\n  train:\n    - {path: missing.sdf, labels: [homo]}\n"
                 "stages:\n  train: {target: hom}\n");
  cr_assert_eq(tu_se3(&out, "check --no-inputs %s", bad), 2, "%s", out);
  cr_expect(strstr(out, "'hom' is no label of set 'train'") && strstr(out, "did you mean 'homo'"), "%s", out);
  free(out);
  cr_assert_eq(tu_se3(&out, "check --help"), 0);
  cr_expect(strstr(out, "--no-inputs"), "%s", out);
  free(out);
  free(bad);
  free(wf);
  free(dir);
}
