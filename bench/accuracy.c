/* accuracy.c — accuracy_bench: what a trained workflow reached, beside the
 * baselines it has to beat, read from its screen.db and printed as one JSON
 * object. Used by accuracy_qm7.sh and accuracy_fabp4.sh.
 *
 *   accuracy_bench DB [--name NAME] [--field KEY=NUMBER]... [--json KEY=JSON]...
 *
 * --field and --json add keys the calling script measured (its wall time, its
 * settings) to the object, as a number and as JSON text given verbatim.
 * From the database: the `models` row (target, task, split sizes), the
 * learning curve (per-epoch training loss and validation metric from
 * `metrics`) and the final test-split metrics the train stage wrote.
 * Regression adds two baselines, fitted on the training split of `splits`
 * and evaluated on its test split, with the labels from `labels`:
 *   mean_mae    predicting the training split's mean label;
 *   linear_mae  least squares of the label on element counts (hydrogens
 *               included, one column per element seen in training, plus an
 *               intercept), counted from the stored molecules.
 * Classification adds the number of actives (label 1) in each split.
 */
#define _GNU_SOURCE
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chem/mol.h"
#include "common/error.h"

enum { MAX_Z = 119 };

static void die(const char *what, sqlite3 *db) {
  fprintf(stderr, "accuracy_bench: %s%s%s\n", what, db ? ": " : "", db ? sqlite3_errmsg(db) : "");
  exit(1);
}

static sqlite3_stmt *prepare(sqlite3 *db, const char *sql) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) die(sql, db);
  return st;
}

/* A JSON string (the values here are names from the database). */
static void put_str(const char *s) {
  putchar('"');
  for (; s && *s; s++) {
    if (*s == '"' || *s == '\\')
      printf("\\%c", *s);
    else if ((unsigned char)*s < 0x20)
      printf("\\u%04x", *s);
    else
      putchar(*s);
  }
  putchar('"');
}

/* A number, or null for NaN/inf (SQL NULL reads as NaN). */
static void put_num(double v) {
  if (isfinite(v))
    printf("%.6g", v);
  else
    printf("null");
}

static double col_num(sqlite3_stmt *st, int i) {
  return sqlite3_column_type(st, i) == SQLITE_NULL ? NAN : sqlite3_column_double(st, i);
}

/* Solves A x = b (n x n, row-major, overwritten) by Gaussian elimination with
 * partial pivoting; returns -1 when A is singular to working precision. */
static int solve(double *A, double *b, int n) {
  for (int c = 0; c < n; c++) {
    int p = c;
    for (int r = c + 1; r < n; r++)
      if (fabs(A[r * n + c]) > fabs(A[p * n + c])) p = r;
    if (fabs(A[p * n + c]) < 1e-12) return -1;
    if (p != c) {
      for (int k = 0; k < n; k++) {
        double t = A[c * n + k];
        A[c * n + k] = A[p * n + k];
        A[p * n + k] = t;
      }
      double t = b[c];
      b[c] = b[p];
      b[p] = t;
    }
    for (int r = c + 1; r < n; r++) {
      double f = A[r * n + c] / A[c * n + c];
      for (int k = c; k < n; k++)
        A[r * n + k] -= f * A[c * n + k];
      b[r] -= f * b[c];
    }
  }
  for (int c = n - 1; c >= 0; c--) {
    for (int k = c + 1; k < n; k++)
      b[c] -= A[c * n + k] * b[k];
    b[c] /= A[c * n + c];
  }
  return 0;
}

struct sample {
  int split; /* 0 train, 1 valid, 2 test */
  double y;
  int count[MAX_Z]; /* atoms of each element, hydrogens included */
};

/* The labelled molecules of the model's split: label, split, element counts. */
static int load_samples(sqlite3 *db, const char *target, struct sample **out) {
  sqlite3_stmt *st = prepare(db, "SELECT s.split, l.value, m.mol FROM splits s JOIN labels l ON l.mol_id = s.mol_id "
                                 "AND l.name = ?1 JOIN molecules m ON m.id = s.mol_id ORDER BY s.mol_id");
  sqlite3_bind_text(st, 1, target, -1, SQLITE_STATIC);
  int n = 0, cap = 1024;
  struct sample *s = calloc((size_t)cap, sizeof *s);
  while (sqlite3_step(st) == SQLITE_ROW) {
    if (n == cap) {
      cap *= 2;
      s = realloc(s, (size_t)cap * sizeof *s);
    }
    memset(&s[n], 0, sizeof s[n]);
    const char *split = (const char *)sqlite3_column_text(st, 0);
    s[n].split = !strcmp(split, "train") ? 0 : !strcmp(split, "valid") ? 1 : 2;
    s[n].y = sqlite3_column_double(st, 1);
    struct mol m;
    struct se3_error e;
    mol_init(&m);
    if (mol_from_blob(sqlite3_column_blob(st, 2), (size_t)sqlite3_column_bytes(st, 2), &m, &e)) {
      fprintf(stderr, "accuracy_bench: molecule blob: %s\n", se3_error_str(&e).s);
      exit(1);
    }
    for (int a = 0; a < m.n_atoms; a++) {
      s[n].count[m.atoms[a].z < MAX_Z ? m.atoms[a].z : 0]++;
      s[n].count[1] += m.atoms[a].implicit_h;
    }
    mol_free(&m);
    n++;
  }
  sqlite3_finalize(st);
  *out = s;
  return n;
}

/* Mean and linear-on-element-counts baselines: train split in, test MAE out. */
static void baselines(const struct sample *s, int n, double *mean_mae, double *linear_mae, int *n_features) {
  double sum = 0;
  int n_train = 0, n_test = 0;
  int cols[MAX_Z], nc = 0;
  for (int z = 0; z < MAX_Z; z++) {
    int seen = 0;
    for (int i = 0; i < n && !seen; i++)
      seen = s[i].split == 0 && s[i].count[z] > 0;
    if (seen) cols[nc++] = z;
  }
  for (int i = 0; i < n; i++)
    if (s[i].split == 0) sum += s[i].y, n_train++;
  double mu = n_train ? sum / n_train : NAN, err_mean = 0, err_lin = 0;
  /* normal equations over [counts..., 1] */
  int p = nc + 1;
  double *A = calloc((size_t)p * p, sizeof *A), *b = calloc((size_t)p, sizeof *b), *x = calloc((size_t)p, sizeof *x);
  for (int i = 0; i < n; i++) {
    if (s[i].split != 0) continue;
    for (int j = 0; j < p; j++) {
      x[j] = j < nc ? s[i].count[cols[j]] : 1.0;
    }
    for (int j = 0; j < p; j++) {
      b[j] += x[j] * s[i].y;
      for (int k = 0; k < p; k++)
        A[j * p + k] += x[j] * x[k];
    }
  }
  int ok = n_train > p && solve(A, b, p) == 0;
  for (int i = 0; i < n; i++) {
    if (s[i].split != 2) continue;
    n_test++;
    err_mean += fabs(s[i].y - mu);
    double pred = ok ? b[nc] : NAN;
    for (int j = 0; ok && j < nc; j++)
      pred += b[j] * s[i].count[cols[j]];
    err_lin += fabs(s[i].y - pred);
  }
  *mean_mae = n_test ? err_mean / n_test : NAN;
  *linear_mae = n_test && ok ? err_lin / n_test : NAN;
  *n_features = nc;
  free(A);
  free(b);
  free(x);
}

int main(int argc, char **argv) {
  const char *path = NULL, *name = "accuracy";
  const char *extra[64];
  int n_extra = 0, extra_json[64];
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--name") && i + 1 < argc)
      name = argv[++i];
    else if ((!strcmp(argv[i], "--field") || !strcmp(argv[i], "--json")) && i + 1 < argc && n_extra < 64 &&
             strchr(argv[i + 1], '=')) {
      extra_json[n_extra] = !strcmp(argv[i], "--json");
      extra[n_extra++] = argv[++i];
    } else if (argv[i][0] != '-' && !path)
      path = argv[i];
    else {
      fprintf(stderr, "usage: accuracy_bench DB [--name NAME] [--field KEY=NUMBER]... [--json KEY=JSON]...\n");
      return 2;
    }
  }
  if (!path) {
    fprintf(stderr, "usage: accuracy_bench DB [--name NAME] [--field KEY=NUMBER]... [--json KEY=JSON]...\n");
    return 2;
  }
  sqlite3 *db = NULL;
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) die(path, db);

  sqlite3_stmt *st = prepare(db, "SELECT id, target, task, arch, best_epoch, n_train, n_valid, n_test FROM models "
                                 "ORDER BY id LIMIT 1");
  if (sqlite3_step(st) != SQLITE_ROW) die("no trained model in this database (did the train stage finish?)", NULL);
  char *model = strdup((const char *)sqlite3_column_text(st, 0));
  char *target = strdup((const char *)sqlite3_column_text(st, 1));
  int classify = !strcmp((const char *)sqlite3_column_text(st, 2), "classification");
  char *arch = strdup(sqlite3_column_text(st, 3) ? (const char *)sqlite3_column_text(st, 3) : "");
  printf("{\"bench\": ");
  put_str(name);
  printf(", \"db\": ");
  put_str(path);
  printf(", \"target\": ");
  put_str(target);
  printf(", \"task\": \"%s\", \"arch\": ", classify ? "classification" : "regression");
  put_str(arch);
  printf(", \"best_epoch\": %d, \"n_train\": %d, \"n_valid\": %d, \"n_test\": %d", sqlite3_column_int(st, 4),
         sqlite3_column_int(st, 5), sqlite3_column_int(st, 6), sqlite3_column_int(st, 7));
  sqlite3_finalize(st);

  /* learning curve: per epoch, training loss, validation metric, seconds */
  const char *metric = classify ? "roc_auc" : "mae";
  char sql[512];
  snprintf(sql, sizeof sql,
           "SELECT v.epoch, t.loss, v.loss, v.%s, t.seconds, t.lr FROM metrics v LEFT JOIN metrics t ON "
           "t.model = v.model AND t.epoch = v.epoch AND t.split = 'train' WHERE v.model = ?1 AND v.split = 'valid' "
           "ORDER BY v.epoch",
           metric);
  st = prepare(db, sql);
  sqlite3_bind_text(st, 1, model, -1, SQLITE_STATIC);
  printf(", \"curve\": [");
  double train_seconds = 0;
  for (int k = 0; sqlite3_step(st) == SQLITE_ROW; k++) {
    printf("%s{\"epoch\": %d, \"train_loss\": ", k ? ", " : "", sqlite3_column_int(st, 0) + 1);
    put_num(col_num(st, 1));
    printf(", \"valid_loss\": ");
    put_num(col_num(st, 2));
    printf(", \"valid_%s\": ", metric);
    put_num(col_num(st, 3));
    printf(", \"seconds\": ");
    put_num(col_num(st, 4));
    printf("}");
    if (isfinite(col_num(st, 4))) train_seconds += col_num(st, 4);
  }
  printf("], \"train_seconds\": ");
  put_num(train_seconds);
  sqlite3_finalize(st);

  /* the train stage's evaluation of its best checkpoint on the test split */
  st = prepare(db, "SELECT mae, rmse, r2, spearman, roc_auc, pr_auc, ef1 FROM metrics WHERE model = ?1 AND "
                   "split = 'test' ORDER BY epoch DESC LIMIT 1");
  sqlite3_bind_text(st, 1, model, -1, SQLITE_STATIC);
  if (sqlite3_step(st) != SQLITE_ROW) die("no test-split metrics (the train stage did not finish)", NULL);
  static const char *const keys[] = {"mae", "rmse", "r2", "spearman", "roc_auc", "pr_auc", "ef1"};
  for (int k = classify ? 4 : 0; k < (classify ? 7 : 4); k++) {
    printf(", \"test_%s\": ", keys[k]);
    put_num(col_num(st, k));
  }
  sqlite3_finalize(st);

  if (classify) {
    st = prepare(db, "SELECT s.split, sum(l.value = 1), count(*) FROM splits s JOIN labels l ON l.mol_id = s.mol_id "
                     "AND l.name = ?1 GROUP BY s.split");
    sqlite3_bind_text(st, 1, target, -1, SQLITE_STATIC);
    while (sqlite3_step(st) == SQLITE_ROW)
      printf(", \"%s_actives\": %d, \"%s_total\": %d", sqlite3_column_text(st, 0), sqlite3_column_int(st, 1),
             sqlite3_column_text(st, 0), sqlite3_column_int(st, 2));
    sqlite3_finalize(st);
  } else {
    struct sample *s = NULL;
    int n = load_samples(db, target, &s), nf = 0;
    double mean_mae, linear_mae;
    baselines(s, n, &mean_mae, &linear_mae, &nf);
    printf(", \"mean_mae\": ");
    put_num(mean_mae);
    printf(", \"linear_mae\": ");
    put_num(linear_mae);
    printf(", \"linear_elements\": %d", nf);
    free(s);
  }
  for (int k = 0; k < n_extra; k++) {
    const char *eq = strchr(extra[k], '=');
    char *key = strndup(extra[k], (size_t)(eq - extra[k]));
    printf(", ");
    put_str(key);
    printf(": ");
    if (extra_json[k])
      printf("%s", eq + 1);
    else {
      char *end = NULL;
      double v = strtod(eq + 1, &end);
      if (end != eq + 1 && !*end)
        put_num(v);
      else
        put_str(eq + 1);
    }
    free(key);
  }
  printf("}\n");
  free(model);
  free(target);
  free(arch);
  sqlite3_close(db);
  return 0;
}
