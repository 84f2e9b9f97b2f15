/* rank_select (stages/rank_select.c), the bounded top-k behind the rank stage and
 * `merge` under stages.score.merge: hits, against a brute-force choice of
 * the same hits: every score filtered, each key's best kept (the InChIKey
 * with dedupe, else the molecule), sorted by value, then mol_id, then model,
 * cut to top. The data has many ties, keys with several molecules,
 * molecules with several models and another target's rows. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stages/rank_select.h"
#include "stages/stage.h"

struct row {
  int64_t rowid, mol_id;
  double value;
  char model[8], key[32];
};

static sqlite3 *db;
static struct row *rows;
static int n_rows;

static void make_db(unsigned seed) {
  cr_assert_eq(sqlite3_open(":memory:", &db), SQLITE_OK);
  cr_assert_eq(sqlite3_exec(db,
                            "CREATE TABLE molecules(id INTEGER PRIMARY KEY, inchikey TEXT NOT NULL);"
                            "CREATE TABLE scores(mol_id INTEGER NOT NULL, model TEXT NOT NULL, target TEXT NOT NULL,"
                            " score REAL NOT NULL, std REAL, PRIMARY KEY(mol_id, model));",
                            NULL, NULL, NULL),
               SQLITE_OK);
  srand(seed);
  sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
  sqlite3_stmt *m, *s;
  sqlite3_prepare_v2(db, "INSERT INTO molecules VALUES(?1, ?2)", -1, &m, NULL);
  sqlite3_prepare_v2(db, "INSERT INTO scores(mol_id, model, target, score) VALUES(?1, ?2, ?3, ?4)", -1, &s, NULL);
  const int n_mols = 2000;
  rows = calloc(2 * n_mols, sizeof *rows);
  n_rows = 0;
  for (int id = 1; id <= n_mols; id++) {
    char key[32];
    snprintf(key, sizeof key, "KEY%04d-XYZ", rand() % 400); /* about 5 molecules a key */
    sqlite3_bind_int(m, 1, id);
    sqlite3_bind_text(m, 2, key, -1, SQLITE_TRANSIENT);
    cr_assert_eq(sqlite3_step(m), SQLITE_DONE);
    sqlite3_reset(m);
    int models = 1 + (rand() % 3 == 0); /* a third of them scored by two models */
    for (int k = 0; k < models; k++) {
      const char *model = k ? "b" : "a", *target = rand() % 10 ? "t" : "u";
      double value = (rand() % 60) / 4.0 - 5; /* 60 values: many ties */
      sqlite3_bind_int(s, 1, id);
      sqlite3_bind_text(s, 2, model, -1, SQLITE_STATIC);
      sqlite3_bind_text(s, 3, target, -1, SQLITE_STATIC);
      sqlite3_bind_double(s, 4, value);
      cr_assert_eq(sqlite3_step(s), SQLITE_DONE);
      sqlite3_reset(s);
      if (strcmp(target, "t")) continue;
      struct row *r = &rows[n_rows++];
      r->rowid = sqlite3_last_insert_rowid(db);
      r->mol_id = id;
      r->value = value;
      snprintf(r->model, sizeof r->model, "%s", model);
      snprintf(r->key, sizeof r->key, "%s", key);
    }
  }
  sqlite3_finalize(m);
  sqlite3_finalize(s);
  sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
}

static int desc;
static int before(const struct row *a, const struct row *b) { /* a ranks before b */
  if (a->value != b->value) return desc ? a->value > b->value : a->value < b->value;
  if (a->mol_id != b->mol_id) return a->mol_id < b->mol_id;
  return strcmp(a->model, b->model) < 0;
}
static int cmp_rows(const void *a, const void *b) { return before(a, b) ? -1 : before(b, a) ? 1 : 0; }

/* The expected rowids, by sorting everything. */
static int expected(int top, int dedupe, int has_min, double min, int has_max, double max, int64_t *out) {
  struct row *all = malloc(sizeof *all * (size_t)n_rows);
  int n = 0;
  for (int i = 0; i < n_rows; i++) {
    if ((has_min && rows[i].value < min) || (has_max && rows[i].value > max)) continue;
    all[n++] = rows[i];
  }
  qsort(all, (size_t)n, sizeof *all, cmp_rows);
  int k = 0;
  for (int i = 0; i < n && k < top; i++) {
    int seen = 0; /* an earlier (better) row of the same key */
    for (int j = 0; j < i && !seen; j++)
      seen = dedupe ? !strcmp(all[j].key, all[i].key) : all[j].mol_id == all[i].mol_id;
    if (!seen) out[k++] = all[i].rowid;
  }
  free(all);
  return k;
}

static struct cfg_node *scalar(struct cfg_node *parent, const char *key, const char *text, enum cfg_type type,
                               double v) {
  struct cfg_node *n = cfg_node_new(CFG_SCALAR, key, "<test>", 1, 1);
  n->value = strdup(text);
  n->type = type;
  n->i = (int64_t)v;
  n->f = v;
  cfg_node_add(parent, n);
  return n;
}

static void check(int top, int descending, int dedupe, int has_min, double min, int has_max, double max) {
  struct cfg_node *cfg = cfg_node_new(CFG_MAP, "rank", "<test>", 1, 1);
  char text[32];
  snprintf(text, sizeof text, "%d", top);
  scalar(cfg, "top", text, CFG_T_INT, top);
  scalar(cfg, "order", descending ? "descending" : "ascending", CFG_T_ENUM, 0);
  scalar(cfg, "dedupe", dedupe ? "true" : "false", CFG_T_BOOL, dedupe);
  if (has_min) scalar(cfg, "min", "min", CFG_T_FLOAT, min);
  if (has_max) scalar(cfg, "max", "max", CFG_T_FLOAT, max);
  int64_t *got = NULL, n = 0, *want = malloc(sizeof *want * (size_t)(n_rows + 1));
  struct se3_error err = {0};
  cr_assert_eq(rank_select(db, "main.scores", "main", cfg, "t", descending, &got, &n, &err), 0, "%s",
               se3_error_str(&err).s);
  desc = descending;
  int k = expected(top, dedupe, has_min, min, has_max, max, want);
  cr_assert_eq(n, k, "top %d %s dedupe %d: %lld hits, expected %d", top, descending ? "desc" : "asc", dedupe,
               (long long)n, k);
  for (int i = 0; i < k; i++)
    cr_assert_eq(got[i], want[i], "top %d %s dedupe %d min %d max %d: hit %d is row %lld, expected %lld", top,
                 descending ? "desc" : "asc", dedupe, has_min, has_max, i + 1, (long long)got[i], (long long)want[i]);
  free(got);
  free(want);
  cfg_node_free(cfg);
}

Test(rank_select, equals_sorting_everything) {
  for (unsigned seed = 1; seed <= 3; seed++) {
    make_db(seed);
    int tops[] = {1, 2, 7, 100, 399, 400, 5000};
    for (size_t t = 0; t < sizeof tops / sizeof *tops; t++)
      for (int d = 0; d < 2; d++)
        for (int dd = 0; dd < 2; dd++)
          check(tops[t], d, dd, 0, 0, 0, 0);
    check(50, 1, 1, 1, 2.5, 0, 0);
    check(50, 0, 1, 0, 0, 1, -1.25);
    check(3000, 0, 0, 1, -2, 1, 4);
    check(10, 1, 1, 1, 100, 0, 0); /* nothing passes the filter: no hits */
    sqlite3_close(db);
    free(rows);
  }
}

Test(rank_select, refuses_top_zero) {
  make_db(7);
  struct cfg_node *cfg = cfg_node_new(CFG_MAP, "rank", "<test>", 1, 1);
  scalar(cfg, "top", "0", CFG_T_INT, 0);
  /* (built by hand, not by the loader: every key read must be here) */
  scalar(cfg, "order", "descending", CFG_T_ENUM, 0);
  scalar(cfg, "dedupe", "true", CFG_T_BOOL, 1);
  int64_t *got = NULL, n = 0;
  struct se3_error err = {0};
  cr_assert_neq(rank_select(db, "main.scores", "main", cfg, "t", 1, &got, &n, &err), 0);
  cr_assert(strstr(se3_error_str(&err).s, "top"), "%s", se3_error_str(&err).s);
  cfg_node_free(cfg);
  sqlite3_close(db);
  free(rows);
}
