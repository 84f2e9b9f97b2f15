/* rank_select.c — rank's choice of hits (rank_select.h): a bounded top-k
 * over the scores (a heap of the best `top` with a hash of their keys, so
 * that dedupe keeps each InChIKey's best), the target, and the settings line.
 */
#define _GNU_SOURCE
#include "rank_select.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- bounded top-k ------------------------------------------------------
 *
 * The hits are chosen by one pass over the scores keeping the best `top` in
 * a heap (the worst kept at its root) with an index of the keys it holds,
 * so memory is O(top) whatever the library's size: nothing sorts every
 * score. With dedupe a key is the InChIKey, otherwise the molecule: a key
 * already held is replaced only by a better score of its own. This keeps
 * exactly what "each key's best score, ordered, cut to top" keeps: a key
 * pushed out was worse than `top` others, and the root only gets better, so
 * a later score of that key qualifies only when it beats them too.
 * The order: value (descending or ascending), then mol_id, then model. */

struct hit {
  double value;
  int64_t mol_id, rowid;
  char key[32]; /* InChIKey (27 characters) or the molecule id */
  char model[128];
};

struct topk {
  int cap, n, descending;
  struct hit *h;
  int *slot; /* h[i]'s slot in tab */
  int *tab;  /* open addressing over keys: heap index, or -1 */
  unsigned mask;
};

static int better(const struct topk *t, const struct hit *a, const struct hit *b) {
  if (a->value != b->value) return t->descending ? a->value > b->value : a->value < b->value;
  if (a->mol_id != b->mol_id) return a->mol_id < b->mol_id;
  return strcmp(a->model, b->model) < 0;
}

static unsigned key_hash(const char *k) {
  unsigned x = 2166136261u; /* FNV-1a */
  for (; *k; k++)
    x = (x ^ (unsigned char)*k) * 16777619u;
  return x;
}

static int topk_init(struct topk *t, int cap, int descending) {
  memset(t, 0, sizeof *t);
  t->cap = cap;
  t->descending = descending;
  unsigned size = 16;
  while (size < 2u * (unsigned)cap && size < (1u << 30))
    size <<= 1;
  t->mask = size - 1;
  t->h = malloc(sizeof *t->h * (size_t)cap);
  t->slot = malloc(sizeof *t->slot * (size_t)cap);
  t->tab = malloc(sizeof *t->tab * size);
  if (!t->h || !t->slot || !t->tab) return -1;
  for (unsigned i = 0; i < size; i++)
    t->tab[i] = -1;
  return 0;
}

static void topk_free(struct topk *t) {
  free(t->h);
  free(t->slot);
  free(t->tab);
  memset(t, 0, sizeof *t);
}

static int tab_find(const struct topk *t, const char *key) {
  for (unsigned s = key_hash(key) & t->mask;; s = (s + 1) & t->mask) {
    if (t->tab[s] < 0) return -1;
    if (!strcmp(t->h[t->tab[s]].key, key)) return (int)s;
  }
}

static void tab_put(struct topk *t, int i) {
  unsigned s = key_hash(t->h[i].key) & t->mask;
  while (t->tab[s] >= 0)
    s = (s + 1) & t->mask;
  t->tab[s] = i;
  t->slot[i] = (int)s;
}

/* Removes slot s, shifting back the entries of its probe run. */
static void tab_del(struct topk *t, unsigned s) {
  t->tab[s] = -1;
  for (unsigned j = (s + 1) & t->mask; t->tab[j] >= 0; j = (j + 1) & t->mask) {
    unsigned home = key_hash(t->h[t->tab[j]].key) & t->mask;
    /* entry j may move to s when s lies cyclically in [home, j) */
    if (((j - home) & t->mask) >= ((j - s) & t->mask)) {
      t->tab[s] = t->tab[j];
      t->slot[t->tab[s]] = (int)s;
      t->tab[j] = -1;
      s = j;
    }
  }
}

static void heap_swap(struct topk *t, int i, int j) {
  struct hit x = t->h[i];
  t->h[i] = t->h[j];
  t->h[j] = x;
  int s = t->slot[i];
  t->slot[i] = t->slot[j];
  t->slot[j] = s;
  t->tab[t->slot[i]] = i;
  t->tab[t->slot[j]] = j;
}

/* The root is the worst kept: a parent is never better than its children. */
static void sift_up(struct topk *t, int i) {
  while (i > 0 && better(t, &t->h[(i - 1) / 2], &t->h[i])) {
    heap_swap(t, i, (i - 1) / 2);
    i = (i - 1) / 2;
  }
}

static void sift_down(struct topk *t, int i) {
  for (;;) {
    int w = i, l = 2 * i + 1, r = l + 1;
    if (l < t->n && better(t, &t->h[w], &t->h[l])) w = l;
    if (r < t->n && better(t, &t->h[w], &t->h[r])) w = r;
    if (w == i) return;
    heap_swap(t, i, w);
    i = w;
  }
}

static void topk_offer(struct topk *t, const struct hit *x) {
  int s = tab_find(t, x->key);
  if (s >= 0) { /* the key is held: keep its better score */
    int i = t->tab[s];
    if (better(t, x, &t->h[i])) {
      t->h[i] = *x;
      sift_down(t, i);
    }
    return;
  }
  if (t->n < t->cap) {
    int i = t->n++;
    t->h[i] = *x;
    tab_put(t, i);
    sift_up(t, i);
  } else if (better(t, x, &t->h[0])) {
    tab_del(t, (unsigned)t->slot[0]);
    t->h[0] = *x;
    tab_put(t, 0);
    sift_down(t, 0);
  }
}

static const struct topk order_desc = {.descending = 1}, order_asc = {.descending = 0};
static int cmp_desc(const void *a, const void *b) {
  return better(&order_desc, a, b) ? -1 : better(&order_desc, b, a) ? 1 : 0;
}
static int cmp_asc(const void *a, const void *b) {
  return better(&order_asc, a, b) ? -1 : better(&order_asc, b, a) ? 1 : 0;
}

/* Up to `max` distinct targets of "<schema>".scores into out[] (256 bytes
 * each); returns how many. SQLite stops the scan once `max` are found, so
 * asking "one or several?" (max 2) reads every score only when there is
 * one target, as ranking them does anyway. */
int rank_score_targets(sqlite3 *db, const char *schema, char out[][256], int max) {
  int k = 0;
  char *sql = sqlite3_mprintf("SELECT DISTINCT target FROM \"%w\".scores LIMIT %d", schema, max);
  sqlite3_stmt *st = NULL;
  if (sql && sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK)
    while (k < max && sqlite3_step(st) == SQLITE_ROW)
      snprintf(out[k++], 256, "%s", (const char *)sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  sqlite3_free(sql);
  return k;
}

int rank_target(sqlite3 *db, const char *schema, const struct cfg_node *cfg, char *target, size_t n) {
  const char *t = cfg_str_opt(cfg, "target");
  if (t) {
    snprintf(target, n, "%s", t);
    return 0;
  }
  target[0] = 0;
  char *sql = sqlite3_mprintf("SELECT target FROM \"%w\".models ORDER BY id LIMIT 1", schema);
  sqlite3_stmt *st = NULL;
  if (sql && sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
    snprintf(target, n, "%s", (const char *)sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  sqlite3_free(sql);
  if (target[0]) return 0;
  /* No trained model (a score-only workflow scores with another workflow's
   * checkpoint and trains nothing): the scores' target, the label the model
   * learned, when they hold one only. Several are for the workflow to
   * choose between (rank_begin names them). */
  char found[2][256];
  if (rank_score_targets(db, schema, found, 2) != 1) return -1;
  snprintf(target, n, "%s", found[0]);
  return 0;
}

void rank_spec(const struct cfg_node *cfg, const char *target, char *out, size_t n) {
  const struct cfg_node *min = cfg_get(cfg, "min"), *max = cfg_get(cfg, "max");
  char lo[40] = "-", hi[40] = "-";
  if (min) snprintf(lo, sizeof lo, "%.17g", cfg_float(cfg, "min"));
  if (max) snprintf(hi, sizeof hi, "%.17g", cfg_float(cfg, "max"));
  snprintf(out, n, "top=%lld target=%s order=%s dedupe=%d min=%s max=%s", (long long)cfg_int(cfg, "top"), target,
           cfg_str(cfg, "order"), cfg_bool(cfg, "dedupe"), lo, hi);
}

int rank_select(sqlite3 *db, const char *scores, const char *mols, const struct cfg_node *cfg, const char *target,
                int descending, int64_t **rowids, int64_t *n, struct se3_error *err) {
  *rowids = NULL;
  *n = 0;
  int top = (int)cfg_int(cfg, "top"), dedupe = cfg_bool(cfg, "dedupe");
  const struct cfg_node *min = cfg_get(cfg, "min"), *max = cfg_get(cfg, "max");
  if (top <= 0) {
    se3_error_set(err, SE3_ERR_USAGE, "rank_select needs top > 0");
    return -1;
  }
  struct topk t;
  if (topk_init(&t, top, descending)) {
    topk_free(&t);
    se3_error_set(err, SE3_ERR_MEMORY, "out of memory for the top %d", top);
    return -1;
  }
  /* scores first (a scan), each molecule's InChIKey by its id */
  char *sql = sqlite3_mprintf("SELECT s.rowid, s.score, s.mol_id, s.model, m.inchikey FROM %s s "
                              "CROSS JOIN \"%w\".molecules m ON m.id = s.mol_id WHERE s.target = ?1%s%s",
                              scores, mols, min ? " AND s.score >= ?2" : "", max ? " AND s.score <= ?3" : "");
  sqlite3_stmt *st = NULL;
  int rc = sql ? sqlite3_prepare_v2(db, sql, -1, &st, NULL) : SQLITE_NOMEM;
  sqlite3_free(sql);
  if (rc == SQLITE_OK) {
    sqlite3_bind_text(st, 1, target, -1, SQLITE_TRANSIENT);
    if (min) sqlite3_bind_double(st, 2, cfg_float(cfg, "min"));
    if (max) sqlite3_bind_double(st, 3, cfg_float(cfg, "max"));
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
      struct hit x;
      x.rowid = sqlite3_column_int64(st, 0);
      x.value = sqlite3_column_double(st, 1);
      x.mol_id = sqlite3_column_int64(st, 2);
      snprintf(x.model, sizeof x.model, "%s", (const char *)sqlite3_column_text(st, 3));
      if (dedupe)
        snprintf(x.key, sizeof x.key, "%s", (const char *)sqlite3_column_text(st, 4));
      else
        snprintf(x.key, sizeof x.key, "%lld", (long long)x.mol_id);
      topk_offer(&t, &x);
    }
    rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
  }
  if (rc != SQLITE_OK) {
    se3_error_set(err, SE3_ERR_DB, "choosing the top %d of %s: %s", top, scores, sqlite3_errmsg(db));
    sqlite3_finalize(st);
    topk_free(&t);
    return -1;
  }
  sqlite3_finalize(st);
  qsort(t.h, (size_t)t.n, sizeof *t.h, descending ? cmp_desc : cmp_asc);
  *rowids = malloc(sizeof **rowids * (size_t)(t.n ? t.n : 1));
  if (!*rowids) {
    topk_free(&t);
    se3_error_set(err, SE3_ERR_MEMORY, "out of memory");
    return -1;
  }
  for (int i = 0; i < t.n; i++)
    (*rowids)[i] = t.h[i].rowid;
  *n = t.n;
  topk_free(&t);
  return 0;
}
