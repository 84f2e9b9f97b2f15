/* modelcard.h — a model's card: the workflow settings its scores depend on,
 * kept in its checkpoint (record "settings") so that a model scores the same
 * anywhere. train writes the card; a score-only workflow (stages.score.checkpoint
 * and no train stage) takes the card's values where it leaves a key out, and
 * is refused where it sets one differently (pipeline/config.c).
 *
 * Card format: the record "settings" (type u8) holds text lines "key=value\n",
 * one per card key, in the fixed order of model_card_key(): lists as YAML flow
 * text "[H, C, N]", floats as %.17g, ints in decimal, bools true/false, enums
 * and strings as written. */
#ifndef SE3_MODELCARD_H
#define SE3_MODELCARD_H

#include <stddef.h>

#include "common/cfgtree.h"
#include "common/error.h"
#include "models/checkpoint.h"

/* Writes into checkpoint writer w the record "settings": the workflow values a
 * model's scores depend on (its featurisation: how molecules were read, given
 * hydrogens and 3D coordinates, and made into graphs) and how its scores are
 * ranked (stages.rank.order), as text lines "key=value\n" in a fixed order;
 * then extra (NULL: nothing), lines of keys that are no settings (the
 * training set's profile, set_profile.h), which readers of settings pass over. */
void model_card_put(struct se3_ckpt_writer *w, const struct cfg_node *root, const char *extra);

/* The checkpoint files of a model path: a file is one model; a directory is an
 * ensemble: DIR/train-<k>/best.ckpt, or DIR/models/train-<k>/best.ckpt (DIR
 * is then a workdir), k = 0, 1, ... in order. 0 with *files (malloc'd, n >= 1),
 * or -1 with err naming the path and why. */
int model_card_members(const char *path, char ***files, int *n, struct se3_error *err);
void model_card_members_free(char **files, int n);

/* ---- reading cards --------------------------------------------------------- */

/* The card keys, in the card's order: model_card_key(i) for i = 0, 1, ...
 * until NULL. */
const char *model_card_key(int i);
/* 1 when the key is a preference (stages.rank.order, stages.ingest.seed,
 * stages.ingest.conformers): taken from the card
 * when the workflow leaves it out, never refused. */
int model_card_preference(const char *key);
/* The value a card written before key existed implies (a card that has
 * other keys but not this one): what se3screen did then. NULL when there is
 * none and the workflow must set the key. */
const char *model_card_older_value(const char *key);

/* A card read from a checkpoint: values[i] is model_card_key(i)'s value, or
 * NULL when the card lacks that key (has == 0: the checkpoint has no card at
 * all, written before cards existed). */
struct model_card {
  int has;
  int node_in; /* the model's node features an atom (its "arch"): the featurisation must give as many */
  int edge_in; /* and an edge's */
  char **values;
  int n;
};

/* The card of one checkpoint file, the whole model checked first as scoring
 * takes it (models/model_file.h). 0, or -1 with err naming the file and why
 * (unreadable or hostile checkpoint, malformed card). */
int model_card_read(const char *file, struct model_card *card, struct se3_error *err);
/* The card of a model path (model_card_members): the members' cards must
 * agree key by key; else -1 with err naming the two files and the key.
 * *first (when not NULL) is set to the first member's file name (malloc'd). */
int model_card_read_path(const char *path, struct model_card *card, char **first, struct se3_error *err);
void model_card_free(struct model_card *card);
/* 0 when the featurisation of the resolved workflow root (its card applied)
 * gives the model's node_in features an atom and edge_in an edge; else -1
 * with err naming file, the field and both widths. */
int model_card_fits(const struct model_card *card, const struct cfg_node *root, const char *file,
                    struct se3_error *err);
/* The card's value of key, or NULL. */
const char *model_card_get(const struct model_card *card, const char *key);

/* The card text of node n (a leaf of the resolved tree): the same text
 * model_card_put writes for it. Returns out. */
char *model_card_value(const struct cfg_node *n, char *out, size_t len);

#endif
