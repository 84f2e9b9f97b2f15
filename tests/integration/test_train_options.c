/* The train stage's options through the se3screen binary: atomref, scaffold
 * and column splits, ensembles (and their scores' std), mid-epoch
 * checkpoints under kill -9, scoring with a checkpoint file, and
 * classification of actives vs decoys. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <ctype.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chem/mol.h"
#include "chem/obbridge.h"
#include "chem/scaffold.h"
#include "tests/testutil.h"

/* per-element references of the synthetic target */
static double ref_of(const char *el) {
  return !strcmp(el, "C") ? -38.0 : !strcmp(el, "H") ? -0.6 : !strcmp(el, "N") ? -54.5 : !strcmp(el, "O") ? -75.0
         : !strcmp(el, "F")                                                                                 ? -99.75
                                                                                                            : NAN;
}

/* sum over a formula's elements ("C3H8O") of count x reference */
static double linear_of_formula(const char *f) {
  double s = 0;
  while (*f) {
    char el[4] = {0};
    int n = 0;
    el[n++] = *f++;
    if (islower((unsigned char)*f)) el[n++] = *f++;
    int count = 0;
    while (isdigit((unsigned char)*f))
      count = 10 * count + (*f++ - '0');
    double r = ref_of(el);
    cr_assert(!isnan(r), "unexpected element %s", el);
    s += (count ? count : 1) * r;
  }
  return s;
}

/* A CSV of labels by record for qm9_mini.sdf: lin (exactly linear in the
 * element counts), wavy (lin plus a non-linear part), fold (0/1/2),
 * badfold (fold, with 7 for record 5). The formulas come from an ingest. */
static char *labels_csv(const char *dir) {
  char yaml[1024];
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: probe\nrun: {progress: none}\nsets:\n  train:\n    - path: %s\n"
           "stages:\n  ingest: {workers: 1}\n",
           tu_src("workflows/data/qm9_mini.sdf"));
  char *wf = tu_write(dir, "probe.yaml", yaml), *out = NULL;
  cr_assert_eq(tu_se3(&out, "run %s --until ingest", wf), 0, "%s", out);
  free(out);
  char db[1100];
  snprintf(db, sizeof db, "%s/probe/screen.db", dir);
  size_t cap = 8192, len = 0;
  char *csv = malloc(cap);
  len += (size_t)snprintf(csv, cap, "lin,wavy,fold,badfold\n");
  int i = 0;
  for (int rec = 1; rec <= 21; rec++) { /* record 9 of the 21 is rejected at ingest */
    char q[128];
    snprintf(q, sizeof q, "SELECT formula FROM molecules WHERE record_no = %d", rec);
    char *f = tu_query(db, q);
    cr_assert_not_null(f);
    f[strcspn(f, "\n")] = 0;
    if (!f[0]) {
      len += (size_t)snprintf(csv + len, cap - len, "0,0,0,0\n");
      free(f);
      continue;
    }
    double lin = linear_of_formula(f);
    free(f);
    int fold = i % 5 == 0 ? 2 : i % 5 == 1 ? 1 : 0;
    len += (size_t)snprintf(csv + len, cap - len, "%.10f,%.10f,%d,%d\n", lin, lin + 3 * sin(1.7 * i), fold,
                            rec == 5 ? 7 : fold);
    i++;
  }
  cr_assert_eq(i, 20);
  char *path = tu_write(dir, "labels.csv", csv);
  free(csv);
  free(wf);
  return path;
}

static char *qm9_wf(const char *dir, const char *labels, const char *train, const char *score) {
  char yaml[2048];
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: work\nrun: {progress: lines, progress_interval_s: 60}\n"
           "sets:\n  train:\n    - path: %s\n      labels_csv: {path: %s, join: record}\n"
           "stages:\n  ingest: {workers: 1}\n  graph: {edges: radius+bonds, cutoff: 4.0}\n  train: {%s}\n%s%s%s",
           tu_src("workflows/data/qm9_mini.sdf"), labels, train, score ? "  score: {" : "", score ? score : "",
           score ? "}\n" : "");
  return tu_write(dir, "wf.yaml", yaml);
}

static double query_double(const char *db, const char *sql) {
  char *s = tu_query(db, sql);
  cr_assert(s && s[0], "no value: %s", sql);
  double v = atof(s);
  free(s);
  return v;
}

/* On a target that is exactly linear in the element counts, atomref
 * recovers the references and the test error vanishes after one epoch;
 * without it the error is large. The score stage adds the references back. */
Test(train_options, atomref_recovers_a_linear_target) {
  char *dir = tu_tmpdir("train_atomref");
  char *labels = labels_csv(dir);
  char *wf = qm9_wf(dir, labels, "target: lin, epochs: 1, batch_size: 4, atomref: true", "set: train");
  char *out = NULL;
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  /* (no fluorine in these molecules) */
  cr_assert(strstr(out, "atomref (per-element references of 'lin'): C -38, H -0.6, N -54.5, O -75\n"), "%s", out);
  free(out);
  char db[1100];
  snprintf(db, sizeof db, "%s/work/screen.db", dir);
  double mae_on = query_double(db, "SELECT mae FROM metrics WHERE split='test'");
  cr_assert_lt(mae_on, 1e-6, "test MAE %g with atomref", mae_on);
  /* every score is the label (in the target's units) */
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM scores s JOIN labels l ON l.mol_id = s.mol_id AND l.name = 'lin' "
                                "WHERE abs(s.value - l.value) < 1e-6"),
               20);
  cr_assert_eq(tu_se3(&out, "run %s --set train.atomref=false", wf), 0, "%s", out);
  free(out);
  double mae_off = query_double(db, "SELECT mae FROM metrics WHERE split='test'");
  cr_assert_gt(mae_off, 1.0, "test MAE %g without atomref", mae_off);
  /* a non-linear remainder: the scores reproduce the recorded test MAE */
  cr_assert_eq(tu_se3(&out, "run %s --set train.target=wavy --set train.atomref=true --set train.epochs=2", wf), 0,
               "%s", out);
  free(out);
  double mae_wavy = query_double(db, "SELECT mae FROM metrics WHERE split='test'");
  cr_assert_lt(mae_wavy, 10, "test MAE %g on the wavy target", mae_wavy);
  double from_scores = query_double(db, "SELECT avg(abs(s.value - l.value)) FROM scores s JOIN labels l ON "
                                        "l.mol_id = s.mol_id AND l.name = 'wavy' JOIN splits p ON p.mol_id = s.mol_id "
                                        "WHERE p.split = 'test'");
  cr_assert_lt(fabs(from_scores / mae_wavy - 1), 1e-6, "scores give MAE %.9g, the metric %.9g", from_scores, mae_wavy);
  free(labels);
  free(wf);
  free(dir);
}

/* split.method column honours the column, and names a molecule whose value
 * is not 0, 1 or 2. */
Test(train_options, column_split_follows_the_column) {
  char *dir = tu_tmpdir("train_column");
  char *labels = labels_csv(dir);
  char *wf = qm9_wf(dir, labels, "target: lin, epochs: 1, batch_size: 4, split: {method: column, column: fold}", NULL);
  char *out = NULL;
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  cr_assert(strstr(out, "12 train, 4 valid, 4 test (column split)"), "%s", out);
  free(out);
  char db[1100];
  snprintf(db, sizeof db, "%s/work/screen.db", dir);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM splits s JOIN labels l ON l.mol_id = s.mol_id AND l.name='fold' "
                                "WHERE s.split = CASE CAST(l.value AS INTEGER) WHEN 0 THEN 'train' WHEN 1 THEN 'valid' "
                                "ELSE 'test' END"),
               20);
  cr_assert_eq(tu_se3(&out, "run %s --set train.split.column=badfold", wf), 1, "%s", out);
  cr_assert(strstr(out, "stages.train.split.column: molecule ") && strstr(out, "record 5) has badfold = 7; use 0"),
            "%s", out);
  free(out);
  cr_assert_eq(tu_se3(&out, "run %s --set train.split.column=nosuch", wf), 1, "%s", out);
  cr_assert(strstr(out, "has no label 'nosuch'"), "%s", out);
  free(out);
  free(labels);
  free(wf);
  free(dir);
}

/* Scaffold split of 60 drug-like molecules: every framework in exactly one
 * split, the same split for the same seed, another for another seed. */
Test(train_options, scaffold_split_keeps_frameworks_together) {
  char *dir = tu_tmpdir("train_scaffold");
  char yaml[2048];
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: a\nrun: {progress: lines, progress_interval_s: 60}\n"
           "sets:\n  train:\n    - {path: %s, labels: [logp]}\n"
           "stages:\n  ingest: {workers: 2, gen3d_quality: fast}\n  graph: {edges: bonds}\n"
           "  train: {target: logp, epochs: 1, batch_size: 8, arch: {layers: 1, channels: 4}, "
           "split: {method: scaffold, seed: 1, valid: 0.15, test: 0.15}}\n",
           tu_src("workflows/data/delaney_first60.csv"));
  char *wf = tu_write(dir, "wf.yaml", yaml), *out = NULL;
  cr_assert_eq(tu_se3(&out, "run %s --until graph", wf), 0, "%s", out);
  free(out);
  cr_assert_eq(tu_sh(NULL, "cd %s && mkdir -p b c && cp a/screen.db b/ && cp a/screen.db c/", dir), 0);
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  cr_assert(strstr(out, "(scaffold split)"), "%s", out);
  free(out);
  char dbs[3][1100];
  for (int i = 0; i < 3; i++)
    snprintf(dbs[i], sizeof dbs[i], "%s/%c/screen.db", dir, 'a' + i);
  cr_assert_eq(tu_se3(&out, "run %s --workdir %s/b", wf, dir), 0, "%s", out);
  free(out);
  cr_assert_eq(tu_se3(&out, "run %s --workdir %s/c --set train.split.seed=7", wf, dir), 0, "%s", out);
  free(out);
  const char *q = "SELECT mol_id, split FROM splits ORDER BY mol_id";
  char *sa = tu_query(dbs[0], q), *sb = tu_query(dbs[1], q), *sc = tu_query(dbs[2], q);
  cr_assert(sa && sb && sc);
  cr_assert_str_eq(sa, sb, "the same seed gave another split");
  cr_assert_str_neq(sa, sc, "another seed gave the same split");
  free(sa), free(sb), free(sc);
  /* frameworks: each in one split (keys computed here from the stored molecules) */
  cr_assert_eq(ob_init(), 0);
  for (int d = 0; d < 3; d += 2) {
    sqlite3 *h = NULL;
    cr_assert_eq(sqlite3_open_v2(dbs[d], &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *st = NULL;
    cr_assert_eq(sqlite3_prepare_v2(h, "SELECT m.mol, s.split FROM splits s JOIN molecules m ON m.id = s.mol_id", -1,
                                    &st, NULL),
                 SQLITE_OK);
    char *keys[100], splits[100];
    int n = 0, per[3] = {0};
    while (sqlite3_step(st) == SQLITE_ROW && n < 100) {
      struct mol m;
      char err[256];
      mol_init(&m);
      cr_assert_eq(mol_from_blob(sqlite3_column_blob(st, 0), (size_t)sqlite3_column_bytes(st, 0), &m, err, sizeof err),
                   0);
      keys[n] = scaffold_key(&m);
      cr_assert_not_null(keys[n]);
      const char *sp = (const char *)sqlite3_column_text(st, 1);
      splits[n] = sp[0];
      per[sp[0] == 't' && sp[1] == 'r' ? 0 : sp[0] == 'v' ? 1 : 2]++;
      mol_free(&m);
      n++;
    }
    sqlite3_finalize(st);
    sqlite3_close(h);
    cr_assert_eq(n, tu_query_int(dbs[d], "SELECT count(*) FROM splits"));
    cr_assert_geq(n, 50);
    int groups = 0;
    for (int i = 0; i < n; i++) {
      int first = 1;
      for (int j = 0; j < n; j++) {
        if (strcmp(keys[i], keys[j])) continue;
        cr_assert_eq(splits[i], splits[j], "framework '%s' is in two splits", keys[i]);
        if (j < i) first = 0;
      }
      groups += first;
    }
    cr_log_info("%d frameworks; %d train, %d valid, %d test", groups, per[0], per[1], per[2]);
    cr_assert_gt(groups, 10);
    cr_assert(per[1] >= 5 && per[1] <= 9 && per[2] >= 5 && per[2] <= 12, "%d valid, %d test", per[1], per[2]);
    for (int i = 0; i < n; i++)
      free(keys[i]);
  }
  free(wf);
  free(dir);
}
