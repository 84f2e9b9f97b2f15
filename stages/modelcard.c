/* modelcard.c — a model's card (modelcard.h): the settings its scores depend
 * on, written by train into every checkpoint and read back by the runner when
 * a workflow scores with a saved model, and the member files of a model path.
 * A helper of the stages like chunks.c: it includes no stage's header. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "modelcard.h"

#include "chem/graph.h"
#include "common/csvcell.h"
#include "chem/graph_settings.h"
#include "models/model_file.h"

#define CARD_RECORD "settings"

/* The card keys in the card's order. The featurisation first: how molecules
 * are read (hydrogens, 3D coordinates: a model trained on MMFF-minimised
 * conformers scores builder-only ones differently; which fragment of a salt
 * is kept; the protonation) and made into graphs (the
 * node one-hot's elements and their order, the extra node features, the
 * edges); then rank's direction, a preference. */
static const char *const KEYS[] = {
    "stages.ingest.add_hydrogens",
    "stages.ingest.gen3d",
    "stages.ingest.coordinates",
    "stages.ingest.gen3d_quality",
    "stages.ingest.seed",
    "stages.ingest.conformers",
    "stages.ingest.fragments",
    "stages.ingest.protonate",
    "stages.ingest.standardize",
    "stages.graph.edges",
    "stages.graph.cutoff",
    "stages.graph.max_neighbors",
    "stages.graph.elements",
    "stages.graph.other_element",
    "stages.graph.charge",
    "stages.graph.atomic_number",
    "stages.graph.atom_features",
    "stages.graph.bond_features",
    "stages.rank.order",
    NULL,
};

const char *model_card_key(int i) {
  if (i < 0 || i >= (int)(sizeof KEYS / sizeof KEYS[0])) return NULL;
  return KEYS[i];
}

static int n_keys(void) { return (int)(sizeof KEYS / sizeof KEYS[0]) - 1; }

/* Preferences: rank's direction; the seed of 3D generation, which draws
 * other shapes of the same kind (predict --set stages.ingest.seed=N scores
 * other draws: a model should not depend on one); the conformers a molecule
 * gets (a library may be scored on more or fewer shapes than the training
 * set had: the score is their aggregate, stages.score.aggregate). */
int model_card_preference(const char *key) {
  return key && (strcmp(key, "stages.rank.order") == 0 || strcmp(key, "stages.ingest.seed") == 0 ||
                 strcmp(key, "stages.ingest.conformers") == 0);
}

/* Keys added after cards: a model trained before them read every fragment of
 * a record, kept the input's protonation and its files' 3D coordinates. */
const char *model_card_older_value(const char *key) {
  if (!key) return NULL;
  if (strcmp(key, "stages.ingest.fragments") == 0) return "keep";
  if (strcmp(key, "stages.ingest.protonate") == 0) return "keep";
  if (strcmp(key, "stages.ingest.standardize") == 0) return "none"; /* before issue 54 */
  if (strcmp(key, "stages.ingest.coordinates") == 0) return "input"; /* (gen3d: always settles it to generated) */
  if (strcmp(key, "stages.ingest.conformers") == 0) return "1";
  /* before issue 68: element, charge and bond order only */
  if (strcmp(key, "stages.graph.atom_features") == 0 || strcmp(key, "stages.graph.bond_features") == 0) return "[]";
  return NULL;
}

/* ---- values as text --------------------------------------------------------- */

/* Appends s to out[*at..len), truncating. */
static void put_text(char *out, size_t len, size_t *at, const char *s) {
  size_t n = strlen(s);
  if (*at + 1 >= len) return;
  if (n > len - 1 - *at) n = len - 1 - *at;
  memcpy(out + *at, s, n);
  *at += n;
  out[*at] = 0;
}

static void scalar_text(const struct cfg_node *n, char *buf, size_t len) {
  switch (n->type) {
  case CFG_T_INT:
    snprintf(buf, len, "%lld", (long long)n->i);
    break;
  case CFG_T_BOOL:
    snprintf(buf, len, "%s", n->i ? "true" : "false");
    break;
  case CFG_T_FLOAT:
    csv_double_text(n->f, buf, len); /* 7.4, not 7.4000000000000004 */
    break;
  default:
    snprintf(buf, len, "%s", n->value ? n->value : "");
    break;
  }
}

char *model_card_value(const struct cfg_node *n, char *out, size_t len) {
  size_t at = 0;
  if (!len) return out;
  out[0] = 0;
  if (!n) return out;
  if (n->kind == CFG_LIST) {
    put_text(out, len, &at, "[");
    for (int i = 0; i < n->n_kids; i++) {
      char item[256];
      if (i) put_text(out, len, &at, ", ");
      if (n->kids[i]->kind == CFG_SCALAR)
        scalar_text(n->kids[i], item, sizeof item);
      else
        item[0] = 0;
      put_text(out, len, &at, item);
    }
    put_text(out, len, &at, "]");
  } else if (n->kind == CFG_SCALAR) {
    scalar_text(n, out, len);
  }
  return out;
}

/* ---- writing ------------------------------------------------------------------ */

void model_card_put(struct se3_ckpt_writer *w, const struct cfg_node *root, const char *extra) {
  size_t cap = 1024, len = 0;
  char *text = malloc(cap);
  if (!text) {
    w->failed = 1;
    return;
  }
  text[0] = 0;
  for (int i = 0; KEYS[i]; i++) {
    const struct cfg_node *n = cfg_get(root, KEYS[i]);
    if (!n) continue; /* (every card key has a default in the schema) */
    char value[2048], line[2400];
    model_card_value(n, value, sizeof value);
    /* one conformer is what a card without the key means: left out, so that
     * a model trained on one is the same file as before the key existed */
    if (!strcmp(KEYS[i], "stages.ingest.conformers") && !strcmp(value, "1")) continue;
    int k = snprintf(line, sizeof line, "%s=%s\n", KEYS[i], value);
    if (k < 0 || (size_t)k >= sizeof line) continue;
    if (len + (size_t)k + 1 > cap) {
      while (len + (size_t)k + 1 > cap)
        cap *= 2;
      char *grown = realloc(text, cap);
      if (!grown) {
        free(text);
        w->failed = 1;
        return;
      }
      text = grown;
    }
    memcpy(text + len, line, (size_t)k + 1);
    len += (size_t)k;
  }
  size_t k = extra ? strlen(extra) : 0; /* (lines of other keys: the training set's profile) */
  char *grown = k ? realloc(text, len + k + 1) : text;
  if (!grown) {
    free(text);
    w->failed = 1;
    return;
  }
  text = grown;
  if (k) memcpy(text + len, extra, k + 1), len += k;
  se3_ckpt_put(w, CARD_RECORD, SE3_CK_U8, text, len);
  free(text);
}

/* ---- reading ------------------------------------------------------------------ */

void model_card_free(struct model_card *card) {
  if (!card) return;
  for (int i = 0; i < card->n; i++)
    free(card->values[i]);
  free(card->values);
  memset(card, 0, sizeof *card);
}

const char *model_card_get(const struct model_card *card, const char *key) {
  if (!card || !card->values) return NULL;
  for (int i = 0; i < card->n; i++)
    if (strcmp(KEYS[i], key) == 0) return card->values[i];
  return NULL;
}

int model_card_read(const char *file, struct model_card *card, struct se3_error *err) {
  memset(card, 0, sizeof *card);
  card->n = n_keys();
  card->values = calloc((size_t)card->n, sizeof *card->values);
  if (!card->values) {
    se3_error_set(err, SE3_ERR_MEMORY, "out of memory");
    se3_error_at(err, file, 0, 0);
    return -1;
  }
  /* the whole model checked as scoring will take it (models/model_file.h):
   * check, predict and run refuse a hostile checkpoint here, before anything
   * runs */
  struct se3_model_file mf;
  struct se3_model_expect ex = {.outputs = 1, .need_stats = 1};
  if (se3_model_file_read(file, &ex, 0, &mf, NULL, err)) {
    model_card_free(card);
    return -1;
  }
  /* the edge's width follows stages.graph.bond_features (model_card_fits
   * compares it); beyond the widths a graph can have, no workflow can score */
  if (mf.cfg.edge_in < GRAPH_EDGE_WIDTH || mf.cfg.edge_in > GRAPH_EDGE_WIDTH_MAX) {
    se3_error_set(err, SE3_ERR_MODEL, "arch: edge_in=%d, but this se3screen's graphs have %d to %d edge features",
                  mf.cfg.edge_in, GRAPH_EDGE_WIDTH, GRAPH_EDGE_WIDTH_MAX);
    se3_error_at(err, file, 0, 0);
    se3_model_file_free(&mf);
    model_card_free(card);
    return -1;
  }
  card->node_in = mf.cfg.node_in;
  card->edge_in = mf.cfg.edge_in;
  int rc = 0;
  if (mf.has_card) {
    card->has = 1;
    const char *p = mf.card, *end = p + mf.card_len;
    int line = 0;
    while (p < end && rc == 0) {
      const char *nl = memchr(p, '\n', (size_t)(end - p));
      const char *le = nl ? nl : end;
      line++;
      const char *eq = memchr(p, '=', (size_t)(le - p));
      if (!eq) {
        se3_error_set(err, SE3_ERR_MODEL, "record \"%s\": the model card's line %d has no '='", CARD_RECORD, line);
        se3_error_at(err, file, 0, 0);
        rc = -1;
        break;
      }
      /* keys this version does not know (a newer card) are left alone */
      for (int i = 0; KEYS[i]; i++)
        if (strlen(KEYS[i]) == (size_t)(eq - p) && memcmp(KEYS[i], p, (size_t)(eq - p)) == 0) {
          if (card->values[i]) {
            se3_error_set(err, SE3_ERR_MODEL, "record \"%s\": the model card's line %d sets %s again", CARD_RECORD,
                          line, KEYS[i]);
            se3_error_at(err, file, 0, 0);
            rc = -1;
            break;
          }
          card->values[i] = strndup(eq + 1, (size_t)(le - eq - 1));
          if (!card->values[i]) {
            se3_error_set(err, SE3_ERR_MEMORY, "out of memory");
            se3_error_at(err, file, 0, 0);
            rc = -1;
          }
          break;
        }
      p = nl ? nl + 1 : end;
    }
  }
  se3_model_file_free(&mf);
  if (rc) model_card_free(card);
  return rc;
}

int model_card_fits(const struct model_card *card, const struct cfg_node *root, const char *file,
                    struct se3_error *err) {
  struct graph_settings gs;
  const struct cfg_node *bad;
  if (!card->node_in || graph_settings_read(cfg_get(root, "stages.graph"), &gs, &bad, NULL))
    return 0; /* (a bad stages.graph is reported where it is validated) */
  int width = graph_node_width(&gs.go), ew = graph_edge_width(&gs.go);
  if (width != card->node_in) {
    se3_error_set(err, SE3_ERR_MODEL,
                  "arch: node_in=%d, but its featurisation (stages.graph.elements, other_element, charge, "
                  "atomic_number, atom_features) gives %d node features an atom: the model cannot score these graphs",
                  card->node_in, width);
    se3_error_at(err, file, 0, 0);
    return -1;
  }
  if (card->edge_in && ew != card->edge_in) {
    se3_error_set(err, SE3_ERR_MODEL,
                  "arch: edge_in=%d, but its featurisation (stages.graph.bond_features) gives %d edge features: the "
                  "model cannot score these graphs",
                  card->edge_in, ew);
    se3_error_at(err, file, 0, 0);
    return -1;
  }
  return 0;
}

int model_card_read_path(const char *path, struct model_card *card, char **first, struct se3_error *err) {
  char **files;
  int n;
  if (first) *first = NULL;
  memset(card, 0, sizeof *card);
  if (model_card_members(path, &files, &n, err)) return -1;
  if (model_card_read(files[0], card, err)) {
    model_card_members_free(files, n);
    return -1;
  }
  /* an ensemble is one model: its members were trained with one workflow,
   * and one that was not (a folder assembled by hand) scores inconsistently */
  for (int m = 1; m < n; m++) {
    struct model_card other;
    if (model_card_read(files[m], &other, err)) {
      model_card_free(card);
      model_card_members_free(files, n);
      return -1;
    }
    const char *bad = NULL;
    for (int i = 0; !bad && i < card->n; i++) {
      const char *a = card->values[i], *b = other.values[i];
      if ((a == NULL) != (b == NULL) || (a && strcmp(a, b) != 0)) bad = KEYS[i];
    }
    if (bad || other.has != card->has) {
      const char *b = bad ? model_card_get(&other, bad) : NULL, *a = bad ? model_card_get(card, bad) : NULL;
      const char *no_a = card->has ? "(not recorded)" : "(no card)", *no_b = other.has ? "(not recorded)" : "(no card)";
      se3_error_set(err, SE3_ERR_MODEL,
                    "the ensemble's members disagree on %s: %s has %s, %s has %s; score with one of them or retrain",
                    bad ? bad : "their settings", files[0], a ? a : no_a, files[m], b ? b : no_b);
      se3_error_at(err, path, 0, 0);
      model_card_free(&other);
      model_card_free(card);
      model_card_members_free(files, n);
      return -1;
    }
    model_card_free(&other);
  }
  if (first) *first = strdup(files[0]);
  model_card_members_free(files, n);
  return 0;
}

/* ---- the members of a model path ----------------------------------------------- */

static int is_file(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static int is_dir(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* DIR/train-0/best.ckpt, DIR/train-1/best.ckpt, ... while they exist. */
static int collect(const char *dir, char ***files, int *n) {
  for (int k = 0;; k++) {
    char p[PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/train-%d/best.ckpt", dir, k);
    if (!is_file(p)) return 0;
    char **grown = realloc(*files, (size_t)(*n + 1) * sizeof *grown);
    if (!grown) return -1;
    *files = grown;
    if (!((*files)[*n] = strdup(p))) return -1;
    (*n)++;
  }
}

int model_card_members(const char *path, char ***files, int *n, struct se3_error *err) {
  *files = NULL;
  *n = 0;
  struct stat st;
  if (stat(path, &st)) {
    se3_error_set(err, SE3_ERR_IO, "%s", strerror(errno));
    se3_error_at(err, path, 0, 0);
    return -1;
  }
  if (S_ISREG(st.st_mode)) {
    *files = malloc(sizeof **files);
    if (!*files || !((*files)[0] = strdup(path))) {
      free(*files);
      *files = NULL;
      se3_error_set(err, SE3_ERR_MEMORY, "out of memory");
      se3_error_at(err, path, 0, 0);
      return -1;
    }
    *n = 1;
    return 0;
  }
  if (!S_ISDIR(st.st_mode)) {
    se3_error_set(err, SE3_ERR_INPUT, "neither a checkpoint file nor a folder");
    se3_error_at(err, path, 0, 0);
    return -1;
  }
  char models[PATH_MAX + 16];
  snprintf(models, sizeof models, "%s/models", path);
  int rc = collect(path, files, n);
  if (rc == 0 && *n == 0 && is_dir(models)) rc = collect(models, files, n);
  if (rc) {
    model_card_members_free(*files, *n);
    *files = NULL;
    *n = 0;
    se3_error_set(err, SE3_ERR_MEMORY, "out of memory");
    se3_error_at(err, path, 0, 0);
    return -1;
  }
  if (*n == 0) {
    se3_error_set(err, SE3_ERR_INPUT,
                  "a folder without models: expected train-0/best.ckpt (a models/ folder) or models/train-0/best.ckpt "
                  "(a workdir)");
    se3_error_at(err, path, 0, 0);
    return -1;
  }
  return 0;
}

void model_card_members_free(char **files, int n) {
  for (int i = 0; i < n; i++)
    free(files[i]);
  free(files);
}
