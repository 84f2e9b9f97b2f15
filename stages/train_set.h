/* train_set.h — a model's training set as the applicability domain (issue
 * 70): each training molecule's Morgan fingerprint (radius 2, 2048 bits,
 * chem/fingerprint.h) and the name a hit's nearest_train shows (its name,
 * else its SMILES). train writes it into every checkpoint (the records of
 * models/model_file.h, at most SE3_TRAIN_SET_MAX molecules: an evenly
 * spaced sample of a larger training split), and rank finds each hit's
 * nearest training molecule in it where the scores are a model's from
 * elsewhere (stages.score.checkpoint, predict), or in this database's train
 * split. A helper of the stages like modelcard.c: it includes no stage's
 * header. */
#ifndef SE3_TRAIN_SET_H
#define SE3_TRAIN_SET_H

#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

#include "chem/fingerprint.h"
#include "common/error.h"
#include "models/checkpoint.h"
#include "models/model_file.h"

struct train_set {
  int64_t n;      /* molecules held */
  int64_t total;  /* the training split's molecules (n < total: an evenly spaced sample of them) */
  struct fp *fps; /* n fingerprints */
  char **names;   /* n names shown (NUL-ended, at most SE3_TRAIN_NAME_MAX bytes) */
  int64_t *ids;   /* n molecules.id of this database's, or NULL (a model's) */
};

/* The fingerprint of a stored molecule (its molecules.mol blob). 0, or -1
 * with err (a damaged blob). */
int train_set_fp(const void *blob, size_t len, struct fp *out, struct se3_error *err);

/* The molecules ids[i] (i < n, ascending) with split[i] == SE3_SPLIT_TRAIN
 * (models/split.h; split NULL: every one) of schema db_schema of db, at most
 * max of them (0: no bound), an evenly spaced sample when there are more.
 * 0, or -1 with err naming the molecule. */
int train_set_build(sqlite3 *db, const char *db_schema, const int64_t *ids, const unsigned char *split, int64_t n,
                    int64_t max, struct train_set *ts, struct se3_error *err);
/* This database's train split (the splits table), every molecule. */
int train_set_of_split(sqlite3 *db, const char *db_schema, struct train_set *ts, struct se3_error *err);
/* Writes ts into checkpoint writer w (nothing when ts->n is 0). */
void train_set_put(struct se3_ckpt_writer *w, const struct train_set *ts);
/* The training set the model at path (a checkpoint, or an ensemble's
 * folder: its first member's, model_card_members) carries, read and
 * checked as untrusted input (models/model_file.h). 1 with ts filled, 0
 * when it carries none (trained before 2026-11-29), -1 with err naming the
 * file. *file (when not NULL, room for len bytes) gets the file read. */
int train_set_of_model(const char *path, struct train_set *ts, char *file, size_t len, struct se3_error *err);
/* The index of the molecule of ts most similar to h (Tanimoto; ties: the
 * lower index), its similarity in *sim; -1 when ts is empty. */
int64_t train_set_nearest(const struct train_set *ts, const struct fp *h, double *sim);
void train_set_free(struct train_set *ts);

#endif
