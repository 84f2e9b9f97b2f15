/* The bundled quickstart, exactly as shipped (workflows/quickstart.yaml),
 * end to end: ingest -> graph -> basis -> train -> score -> rank. Its model
 * must beat predicting the training mean on the test split, by a clear margin:
 * the mean predictor's MAE is computed here from the database's labels and
 * splits, independently of the train stage's own metrics.
 *
 * It takes about as long as the quickstart itself (1-2 minutes on 2 cores).
 * Under AddressSanitizer the model runs several times slower, so there the
 * same workflow trains for 3 epochs instead of 10 and must still beat the mean. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/testutil.h"

#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

static double query_double(const char *db, const char *sql) {
  char *s = tu_query(db, sql);
  cr_assert(s, "query failed: %s", sql);
  char *end = NULL;
  double v = strtod(s, &end);
  cr_assert(end != s, "not a number from %s: '%s'", sql, s);
  free(s);
  return v;
}

Test(quickstart, model_beats_the_training_mean) {
  char *dir = tu_tmpdir("quickstart");
  char *out = NULL;
  int rc = tu_se3(&out, "run %s --workdir %s/work --set run.progress=none%s", tu_src("workflows/quickstart.yaml"), dir,
                  SANITIZED ? " --set train.epochs=3" : "");
  cr_assert_eq(rc, 0, "%s", out);
  free(out);
  char db[1100];
  snprintf(db, sizeof db, "%s/work/screen.db", dir);

  /* what the quickstart promises: a trained model of u0_atom on ~1,000 molecules */
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM models WHERE target = 'u0_atom'"), 1);
  long long n_test = tu_query_int(db, "SELECT n_test FROM models");
  cr_assert_gt(tu_query_int(db, "SELECT n_train FROM models"), 800);
  cr_assert_gt(n_test, 80);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM splits s JOIN labels l ON l.mol_id = s.mol_id AND "
                                "l.name = 'u0_atom' WHERE s.split = 'test'"),
               n_test, "the test split in `splits` is not the models row's");

  /* the mean predictor: the training split's mean label, scored on the test split */
  const char *mean_sql = "WITH y AS (SELECT l.value, s.split FROM labels l JOIN splits s ON s.mol_id = l.mol_id WHERE "
                         "l.name = 'u0_atom'), "
                         "mu AS (SELECT avg(value) AS m FROM y WHERE split = 'train') "
                         "SELECT printf('%.17g', avg(abs(value - m))) FROM y, mu WHERE split = 'test'";
  double mean_mae = query_double(db, mean_sql);
  double model_mae = query_double(db, "SELECT printf('%.17g', mae) FROM metrics WHERE split = 'test'");
  cr_assert_gt(mean_mae, 50.0, "u0_atom spreads over hundreds of kcal/mol; the mean predictor's MAE is %g", mean_mae);
  cr_log_info("quickstart test MAE %.2f kcal/mol, training-mean predictor %.2f kcal/mol", model_mae, mean_mae);
  if (SANITIZED)
    cr_assert_lt(model_mae, mean_mae, "test MAE %g is not below the mean predictor's %g", model_mae, mean_mae);
  else
    cr_assert_lt(model_mae, 0.5 * mean_mae, "test MAE %g is not clearly below the mean predictor's %g", model_mae,
                 mean_mae);

  /* the library is scored and ranked into hits.csv and hits.sdf */
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM scores s JOIN molecules m ON m.id = s.mol_id "
                                "WHERE m.set_name = 'library'"),
               tu_query_int(db, "SELECT count(*) FROM graphs g JOIN molecules m ON m.id = g.mol_id "
                                "WHERE m.set_name = 'library'"));
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM ranked_hits"), 20);
  char *n = NULL;
  cr_assert_eq(tu_sh(&n, "tail -n +2 %s/work/hits.csv | wc -l", dir), 0);
  cr_assert_eq(atoi(n), 20, "hits.csv: %s", n);
  free(n);
  cr_assert_eq(tu_sh(&n, "grep -c '^\\$\\$\\$\\$' %s/work/hits.sdf", dir), 0);
  cr_assert_eq(atoi(n), 20, "hits.sdf: %s", n);
  free(n);
  free(dir);
}
