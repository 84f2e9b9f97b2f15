/* train_set.c — a model's training set as the applicability domain
 * (train_set.h): built from the database at training, carried in the
 * checkpoint, read back checked, searched for a hit's nearest molecule. */
#define _GNU_SOURCE
#include "train_set.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chem/mol.h"
#include "common/error.h"
#include "models/trainer.h"
#include "modelcard.h"

void train_set_free(struct train_set *ts) {
  if (!ts) return;
  for (int64_t i = 0; ts->names && i < ts->n; i++)
    free(ts->names[i]);
  free(ts->names);
  free(ts->fps);
  free(ts->ids);
  memset(ts, 0, sizeof *ts);
}

int train_set_fp(const void *blob, size_t len, struct fp *out, struct se3_error *err) {
  struct mol m;
  mol_init(&m);
  int rc = mol_from_blob(blob, len, &m, err);
  if (!rc && fp_morgan(&m, 2, out)) {
    se3_error_set(err, SE3_ERR_DB, "no fingerprint (a bond to an atom that does not exist)");
    rc = -1;
  }
  mol_free(&m);
  return rc;
}

/* The name shown of a molecule: its name, else its SMILES, as text (a
 * control byte a space) of at most SE3_TRAIN_NAME_MAX bytes (a longer one
 * cut at a character's start, "..." after it). malloc'd, or NULL. */
static char *shown_name(const char *name, const char *smiles) {
  const char *s = name && *name ? name : smiles ? smiles : "";
  size_t n = strlen(s);
  if (n > SE3_TRAIN_NAME_MAX) {
    n = SE3_TRAIN_NAME_MAX - 3;
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) /* not inside a UTF-8 character */
      n--;
  }
  char *out = malloc(n + 4);
  if (!out) return NULL;
  for (size_t i = 0; i < n; i++)
    out[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? ' ' : s[i];
  strcpy(out + n, n < strlen(s) ? "..." : "");
  return out;
}

int train_set_build(sqlite3 *db, const char *db_schema, const int64_t *ids, const unsigned char *split, int64_t n,
                    int64_t max, struct train_set *ts, struct se3_error *err) {
  memset(ts, 0, sizeof *ts);
  for (int64_t i = 0; i < n; i++)
    ts->total += !split || split[i] == SE3_SPLIT_TRAIN;
  int64_t keep = max > 0 && ts->total > max ? max : ts->total;
  if (keep == 0) return 0;
  ts->fps = malloc((size_t)keep * sizeof *ts->fps);
  ts->names = calloc((size_t)keep, sizeof *ts->names);
  ts->ids = malloc((size_t)keep * sizeof *ts->ids);
  char *sql = sqlite3_mprintf("SELECT name, smiles, mol FROM \"%w\".molecules WHERE id = ?1", db_schema);
  sqlite3_stmt *st = NULL;
  int rc = 0;
  if (!ts->fps || !ts->names || !ts->ids || !sql) {
    se3_error_set(err, SE3_ERR_MEMORY, "out of memory for the training set's fingerprints");
    rc = -1;
  } else if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
    se3_error_set(err, SE3_ERR_DB, "reading the training set: %s", sqlite3_errmsg(db));
    rc = -1;
  }
  sqlite3_free(sql);
  /* the c-th training molecule is kept when it is the k-th of the sample:
   * c = floor(k * total / keep) */
  int64_t c = 0, k = 0;
  for (int64_t i = 0; i < n && rc == 0 && k < keep; i++) {
    if (split && split[i] != SE3_SPLIT_TRAIN) continue;
    if (c++ != k * ts->total / keep) continue;
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, ids[i]);
    int got = sqlite3_step(st);
    if (got != SQLITE_ROW) { /* (a split row whose molecule has left: none to be near) */
      if (got != SQLITE_DONE) {
        se3_error_set(err, SE3_ERR_DB, "reading the training set: %s", sqlite3_errmsg(db));
        rc = -1;
      }
      k++;
      continue;
    }
    struct se3_error why;
    if (train_set_fp(sqlite3_column_blob(st, 2), (size_t)sqlite3_column_bytes(st, 2), &ts->fps[ts->n], &why)) {
      se3_error_set(err, why.kind,
                    "molecules row id=%lld: %s (a training molecule; run `se3screen verify` on the workdir)",
                    (long long)ids[i], se3_error_str(&why).s);
      rc = -1;
      break;
    }
    ts->ids[ts->n] = ids[i];
    ts->names[ts->n] = shown_name((const char *)sqlite3_column_text(st, 0), (const char *)sqlite3_column_text(st, 1));
    if (!ts->names[ts->n++]) {
      se3_error_set(err, SE3_ERR_MEMORY, "out of memory for the training set's names");
      rc = -1;
    }
    k++;
  }
  sqlite3_finalize(st);
  if (rc) train_set_free(ts);
  return rc;
}

int train_set_of_split(sqlite3 *db, const char *db_schema, struct train_set *ts, struct se3_error *err) {
  memset(ts, 0, sizeof *ts);
  char *sql = sqlite3_mprintf("SELECT mol_id FROM \"%w\".splits WHERE split = 'train' ORDER BY mol_id", db_schema);
  sqlite3_stmt *st = NULL;
  int64_t *ids = NULL, n = 0, cap = 0;
  int rc = sql ? sqlite3_prepare_v2(db, sql, -1, &st, NULL) : SQLITE_NOMEM;
  sqlite3_free(sql);
  while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
    rc = SQLITE_OK;
    if (n == cap) {
      cap = cap ? 2 * cap : 1024;
      int64_t *grown = realloc(ids, (size_t)cap * sizeof *ids);
      if (!grown) {
        rc = SQLITE_NOMEM;
        break;
      }
      ids = grown;
    }
    ids[n++] = sqlite3_column_int64(st, 0);
  }
  sqlite3_finalize(st);
  int ret = -1;
  if (rc == SQLITE_DONE)
    ret = train_set_build(db, db_schema, ids, NULL, n, 0, ts, err);
  else if (rc == SQLITE_NOMEM)
    se3_error_set(err, SE3_ERR_MEMORY, "reading the training set: out of memory");
  else
    se3_error_set(err, SE3_ERR_DB, "reading the training set: %s", sqlite3_errmsg(db));
  free(ids);
  return ret;
}

void train_set_put(struct se3_ckpt_writer *w, const struct train_set *ts) {
  if (!ts->n) return;
  size_t len = 0;
  for (int64_t i = 0; i < ts->n; i++)
    len += strlen(ts->names[i]) + 1;
  uint64_t *words = malloc((size_t)ts->n * SE3_TRAIN_FP_WORDS * sizeof *words);
  char *names = malloc(len);
  if (!words || !names) {
    free(words);
    free(names);
    w->failed = 1;
    return;
  }
  size_t at = 0;
  for (int64_t i = 0; i < ts->n; i++) {
    memcpy(words + i * SE3_TRAIN_FP_WORDS, ts->fps[i].w, sizeof ts->fps[i].w);
    size_t k = strlen(ts->names[i]) + 1;
    memcpy(names + at, ts->names[i], k);
    at += k;
  }
  se3_ckpt_put(w, "train_fps_morgan2", SE3_CK_I64, words, (uint64_t)ts->n * SE3_TRAIN_FP_WORDS);
  se3_ckpt_put(w, "train_names", SE3_CK_U8, names, len);
  se3_ckpt_put(w, "train_molecules", SE3_CK_I64, &ts->total, 1);
  free(words);
  free(names);
}

_Static_assert(FP_BITS == 64 * SE3_TRAIN_FP_WORDS, "a carried fingerprint is a struct fp's words");

int train_set_of_model(const char *path, struct train_set *ts, char *file, size_t len, struct se3_error *err) {
  memset(ts, 0, sizeof *ts);
  char **files = NULL;
  int n = 0;
  if (model_card_members(path, &files, &n, err)) return -1;
  if (file) snprintf(file, len, "%s", files[0]);
  struct se3_model_file mf;
  struct se3_model_expect ex = {.outputs = 1, .need_stats = 1, .want_train_set = 1};
  int rc = se3_model_file_read(files[0], &ex, 0, &mf, NULL, err);
  model_card_members_free(files, n);
  if (rc) return -1;
  if (!mf.train_n) {
    se3_model_file_free(&mf);
    return 0;
  }
  ts->fps = malloc((size_t)mf.train_n * sizeof *ts->fps);
  ts->names = calloc((size_t)mf.train_n, sizeof *ts->names);
  rc = ts->fps && ts->names ? 1 : -1;
  const char *name = mf.train_names;
  for (int64_t i = 0; rc == 1 && i < mf.train_n; i++) {
    struct fp *f = &ts->fps[i];
    f->n_set = 0;
    for (int k = 0; k < SE3_TRAIN_FP_WORDS; k++) {
      f->w[k] = mf.train_fps[i * SE3_TRAIN_FP_WORDS + k];
      f->n_set += __builtin_popcountll(f->w[k]);
    }
    if (!(ts->names[i] = strdup(name))) rc = -1;
    ts->n = i + 1;
    name += strlen(name) + 1; /* (model_file.c checked: train_n names, each NUL-ended) */
  }
  ts->total = mf.train_total;
  se3_model_file_free(&mf);
  if (rc < 0) {
    train_set_free(ts);
    se3_error_set(err, SE3_ERR_MEMORY, "out of memory for the training set");
    se3_error_at(err, path, 0, 0);
  }
  return rc;
}

int64_t train_set_nearest(const struct train_set *ts, const struct fp *h, double *sim) {
  int64_t best = -1;
  *sim = -1;
  for (int64_t i = 0; i < ts->n; i++) {
    double t = fp_tanimoto(h, &ts->fps[i]);
    if (t > *sim) {
      *sim = t;
      best = i;
    }
  }
  return best;
}
