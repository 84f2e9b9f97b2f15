/* test_error.c — the error value (common/error.h) and its one table of
 * result codes, held against docs/commands.md's table row by row. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "pipeline/runner.h"
#include "pipeline/runner_internal.h"
#include "models/trainer.h"
#include "stages/stage.h"

Test(error, formats_each_place) {
  struct se3_error e;
  char buf[2048];
  cr_assert_eq(se3_error_set(&e, SE3_ERR_USAGE, "unknown key '%s'", "wokers"), SE3_RC_USAGE);
  cr_assert_str_eq(se3_error_format(&e, buf, sizeof buf), "unknown key 'wokers'");
  se3_error_at(&e, "screen.yaml", 12, 5);
  cr_assert_str_eq(se3_error_format(&e, buf, sizeof buf), "screen.yaml:12:5: unknown key 'wokers'");
  se3_error_context(&e, "stages.ingest");
  cr_assert_str_eq(se3_error_format(&e, buf, sizeof buf), "screen.yaml:12:5: stages.ingest: unknown key 'wokers'");
  cr_assert_eq(se3_error_rc(&e), SE3_RC_USAGE);

  cr_assert_eq(se3_error_set(&e, SE3_ERR_INPUT, "no atoms"), SE3_RC_FAILED);
  se3_error_record(&e, "lib.sdf", 7);
  cr_assert_str_eq(se3_error_format(&e, buf, sizeof buf), "lib.sdf: record 7: no atoms");
  cr_assert_eq(se3_error_set(&e, SE3_ERR_STOPPED, "stopped"), 75);
  cr_assert_eq(se3_error_set(NULL, SE3_ERR_DB, "x"), SE3_RC_FAILED);
  char small[8];
  se3_error_format(&e, small, sizeof small);
  cr_assert_eq(strlen(small), 7, "truncated, terminated");
}

Test(error, one_family_of_codes) {
  /* the three families the issue found are one table now */
  cr_assert_eq(STAGE_STOPPED, SE3_RC_STOPPED);
  cr_assert_eq(SE3_TRAIN_STOPPED, SE3_RC_STOPPED);
  cr_assert_eq(SE3_EXIT_STOPPED, SE3_RC_STOPPED);
  cr_assert_eq(STAGE_ERROR, SE3_RC_FAILED);
  cr_assert_eq(SE3_TRAIN_ERROR, SE3_RC_FAILED);
  cr_assert_eq(SE3_EXIT_FAILED, SE3_RC_FAILED);
  cr_assert_eq(SE3_EXIT_USAGE, SE3_RC_USAGE);
  for (int k = 0; k < SE3_ERR_N_KINDS; k++) {
    cr_assert_eq((int)se3_rc_table[k].kind, k);
    cr_assert_not_null(se3_rc_name(se3_rc_table[k].rc));
  }
}

Test(error, the_docs_table_is_the_code_table) {
  FILE *f = fopen(SE3_SOURCE_DIR "/docs/commands.md", "r");
  cr_assert_not_null(f);
  char line[1024];
  int seen[SE3_ERR_N_KINDS] = {0}, rows = 0, in_table = 0;
  while (fgets(line, sizeof line, f)) {
    if (!strncmp(line, "| kind | exit | name | meaning |", 31)) {
      in_table = 1;
      continue;
    }
    if (!in_table || !strncmp(line, "| ---", 5)) continue;
    if (line[0] != '|') break;
    char kind[64], name[64], meaning[512];
    int code;
    cr_assert_eq(sscanf(line, "| %63[^ |] | %d | %63[^ |] | %511[^|]|", kind, &code, name, meaning), 4, "%s", line);
    size_t m = strlen(meaning);
    while (m && meaning[m - 1] == ' ')
      meaning[--m] = 0;
    int k = 0;
    while (k < SE3_ERR_N_KINDS && strcmp(se3_rc_table[k].name, kind))
      k++;
    cr_assert_lt(k, SE3_ERR_N_KINDS, "docs/commands.md names a kind the code has not: %s", kind);
    cr_assert_eq(code, (int)se3_rc_table[k].rc, "%s", kind);
    cr_assert_str_eq(name, se3_rc_name(code));
    cr_assert_str_eq(meaning, se3_rc_table[k].meaning, "%s", kind);
    seen[k]++;
    rows++;
  }
  fclose(f);
  cr_assert_eq(rows, SE3_ERR_N_KINDS, "one row per kind");
  for (int k = 0; k < SE3_ERR_N_KINDS; k++)
    cr_assert_eq(seen[k], 1, "%s", se3_rc_table[k].name);
}

Test(error, a_stage_error_is_a_value_with_its_place) {
  /* stage_fail_at keeps the node's place apart from the message; the runner
   * formats it once, as the message the stage used to write */
  struct stage_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  struct cfg_node n = {0};
  n.file = (char *)"screen.yaml";
  n.line = 7;
  n.col = 12;
  cr_assert_eq(stage_fail_at(&ctx, &n, "no such file: %s", "lib.sdf"), STAGE_ERROR);
  cr_assert_eq(ctx.err.kind, SE3_ERR_RUN);
  cr_assert_str_eq(ctx.err.message, "no such file: lib.sdf");
  cr_assert_str_eq(ctx.err.file, "screen.yaml");
  cr_assert_eq(ctx.err.line, 7);
  cr_assert_str_eq(se3_error_str(&ctx.err).s, "screen.yaml:7:12: no such file: lib.sdf");
  cr_assert_eq(se3_error_rc(&ctx.err), SE3_RC_FAILED);

  sqlite3 *db = NULL;
  cr_assert_eq(sqlite3_open(":memory:", &db), SQLITE_OK);
  ctx.db = db;
  cr_assert_neq(sqlite3_exec(db, "SELECT * FROM no_such_table", NULL, NULL, NULL), SQLITE_OK);
  cr_assert_eq(stage_sql_fail(&ctx, "reading"), STAGE_ERROR);
  cr_assert_eq(ctx.err.kind, SE3_ERR_DB);
  cr_assert_str_eq(se3_error_str(&ctx.err).s, "reading: no such table: no_such_table");
  sqlite3_close(db);

  /* the runner takes it as the run's error: the same kind, its text after
   * the stage's name and chunk, as the run's message always read */
  static struct run r;
  run_stage_failed(&r, &ctx.err, "%s: chunk %d", "score", 3);
  cr_assert_eq(r.err.kind, SE3_ERR_DB);
  cr_assert_str_eq(se3_error_str(&r.err).s, "score: chunk 3: reading: no such table: no_such_table");
  cr_assert_eq(se3_error_rc(&r.err), SE3_RC_FAILED);
}
