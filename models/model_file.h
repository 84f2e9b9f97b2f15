/* model_file.h — a trained model's checkpoint read as untrusted input: the
 * one reader behind every verb that takes a model from a file (score,
 * predict, check, run with stages.score.checkpoint).
 *
 * A checkpoint travels: it is downloaded from a colleague or a paper, and its
 * FNV-1a trailer is no defence, since anyone can recompute it. So before
 * anything is laid out, allocated or run, se3_model_file_read checks, in this
 * order, and refuses naming the file and the record or field with its value
 * and what is allowed:
 *   - the file (checkpoint.h: a regular file, magic, version, every record's
 *     name, type and count within the file, no record twice);
 *   - "arch": text, parsed word by word, every size within se3_config_check's
 *     range, and what this build's batches and scorer provide: edge_in equal to
 *     the graphs' edge features, outputs equal to the scorer's one value a
 *     molecule, node_in equal to the featurisation's width where the caller
 *     knows it;
 *   - the parameter count the architecture lays out against "params" (its type
 *     and count), and the file's size against what that architecture can
 *     need, all before the file is read whole;
 *   - then the values: every parameter finite, the standardisation finite
 *     with a positive spread, atomref's elements 1..118 once each with finite
 *     references, the target 1..255 printable bytes, the task 0 or 1, the card
 *     text without NUL bytes.
 * A file that passes can be scored: its model's shapes are those the scorer
 * allocates for. */
#ifndef SE3_MODEL_FILE_H
#define SE3_MODEL_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "models/se3.h"

#define SE3_ATOMREF_MAX 32
/* The largest magnitude of a model's standardisation (the target's mean
 * and standard deviation) and of an atomref: what training on labels
 * within chem/records.h's REC_LABEL_MAX (1e30) gives, with room; a
 * checkpoint past it is refused (a standard deviation of 1e308 scored every
 * molecule as +-inf), and training that would write one fails instead. */
#define SE3_STAT_MAX 1e33

/* What the caller will feed the model; 0 where it does not know yet. */
struct se3_model_expect {
  int node_in;         /* node features a molecule of the featurisation has */
  int edge_in;         /* edge features of this build's graphs */
  int outputs;         /* values a molecule the scorer keeps */
  const char *arch;    /* the configuration when the file predates its "arch" record (a models row's), or NULL */
  int need_stats;      /* 1: "best_mean_std" must be there (a model to score) */
  int want_train_set;  /* 1: keep the training set it carries (below), not only check it */
};

/* The training set a model carries for the applicability domain (issue 70):
 * the records "train_fps_morgan2" (i64: 32 words a molecule, its Morgan
 * fingerprint of radius 2 and 2048 bits, chem/fingerprint.h, bit b in word
 * b / 64), "train_names" (u8: a name a molecule, each ended by a NUL byte,
 * 0..SE3_TRAIN_NAME_MAX bytes of text) and "train_molecules" (i64: the
 * training split's molecules, at least the fingerprints carried: more when
 * they are an evenly spaced sample of it), all three or none (a model
 * trained before 2026-11-29). At most SE3_TRAIN_SET_MAX fingerprints: 25.6
 * MB of them and 25.6 MB of names at the most. A fingerprint of another
 * kind would come under another record's name. */
#define SE3_TRAIN_SET_MAX 100000
#define SE3_TRAIN_NAME_MAX 255
#define SE3_TRAIN_FP_WORDS 32

struct se3_model_file {
  struct se3_config cfg;
  size_t n_params;
  real *params;      /* n_params, finite; NULL when not asked for */
  int has_target;    /* "target" there */
  char target[256];  /* 1..255 printable bytes */
  int classify;      /* "classification": 0 or 1 (0 when absent) */
  int has_stats;     /* "best_mean_std" there */
  double best, mean, std;
  int n_atomref;     /* "atomref_z" / "atomref": 0..SE3_ATOMREF_MAX */
  int64_t atomref_z[SE3_ATOMREF_MAX];
  double atomref[SE3_ATOMREF_MAX];
  int has_card;      /* the card, "settings" */
  char *card;        /* its text, NUL-terminated (malloc'd), or NULL */
  size_t card_len;
  int64_t train_n;     /* fingerprints of the training set carried (0: none) */
  int64_t train_total; /* "train_molecules" */
  uint64_t *train_fps; /* with want_train_set: train_n x SE3_TRAIN_FP_WORDS words (malloc'd) */
  char *train_names;   /* and train_n NUL-ended names, one after the other (malloc'd) */
};

/* Reads and checks the model in checkpoint `path` (see above). want_params 0
 * checks the parameters but keeps none (a card's reader). *hash, when not
 * NULL, has the file's bytes folded in (se3_hash_bytes). 0, or -1 with err
 * naming the file, the record or field, its value and what is allowed. */
int se3_model_file_read(const char *path, const struct se3_model_expect *ex, int want_params, struct se3_model_file *mf,
                        uint64_t *hash, struct se3_error *err);
void se3_model_file_free(struct se3_model_file *mf);

#endif
