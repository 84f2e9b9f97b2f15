/* config.c — workflows in YAML: the public API (load, print, stage hash) and
 * a saved model's settings. The loader is split by job (see
 * config_internal.h): config_parse.c (YAML, files, includes, --set),
 * config_schema.c (the schema's entries, types, paths), config_validate.c
 * (checking against the schema, defaults) and config_util.c (the helpers
 * and errors they all share).
 *
 * Every problem is collected rather than returned at the first one, so a user
 * fixes a workflow in one round. Errors are appended to the caller's
 * struct cfg_errors (which must start zeroed, e.g. `= {0}`).
 */
#define _GNU_SOURCE
#include "pipeline/config_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "stages/modelcard.h"

void cfg_errors_free(struct cfg_errors *e) {
  if (!e) return;
  for (int i = 0; i < e->n; i++)
    free(e->msgs[i]);
  free(e->msgs);
  e->msgs = NULL;
  e->n = 0;
}

/* ---- a saved model's settings ------------------------------------------------------ */

/* The node at a dotted key, and the mapping that holds it; NULL when absent. */
static struct cfg_node *find_at(struct cfg_node *root, const char *key, struct cfg_node **parent) {
  char *copy = strdup(key);
  struct cfg_node *n = root, *up = NULL;
  if (!copy) return NULL;
  for (char *save = NULL, *seg = strtok_r(copy, ".", &save); n && seg; seg = strtok_r(NULL, ".", &save)) {
    up = n;
    n = cfg_find_kid(n, seg);
  }
  free(copy);
  *parent = up;
  return n;
}

/* The schema entry of a dotted key (every card key lies in plain sections). */
static const struct cfg_node *schema_at(const struct cfg_node *schema, const char *key) {
  struct cfg_node *parent;
  return find_at((struct cfg_node *)schema, key, &parent);
}

/* A card value as the node a workflow writing it would have had: the card's
 * text parsed as YAML and validated against the key's schema entry, so it
 * types, prints and hashes exactly as the same value written in a workflow
 * (the stage hashes of a score-only workflow then equal the training
 * workflow's). NULL when the text is no valid value (reported, naming the
 * checkpoint file). */
static struct cfg_node *card_node(struct ld *ld, const char *file, const char *key, const char *text,
                                  const struct cfg_node *entry) {
  struct cfg_node *m = cfg_parse_yaml(ld, file, text, strlen(text), NULL);
  if (!m) return NULL;
  int before = ld->n_errs;
  struct path p = {0};
  cfg_path_push(&p, key);
  cfg_validate(ld, m, entry, &p);
  free(p.s);
  if (ld->n_errs != before) {
    cfg_node_free(m);
    return NULL;
  }
  const char *dot = strrchr(key, '.');
  free(m->key);
  m->key = strdup(dot ? dot + 1 : key);
  /* not written by the workflow: as a default is not */
  cfg_set_loc(m, DEFAULT_FILE, 0, 0);
  return m;
}

/* stages.score.checkpoint names a saved model (stages/modelcard.h): every
 * card key the workflow leaves out takes the model's value (ingest, graph
 * and rank then work as they did for the model's training); a featurisation
 * key the workflow sets to another value is refused, since the model would
 * score features it was not trained on; a key the card lacks (a checkpoint
 * from before cards) must be set by the workflow; a key added to cards later
 * takes the value older se3screens used (model_card_older_value). rank's order is a
 * preference: taken when left out, never refused. Values compare as their
 * canonical hashes do: lists element by element, numbers numerically (5 and
 * 5.0 agree), bools and enums by their value. */
static void apply_model_card(struct ld *ld, struct cfg_node *root, const struct cfg_node *schema) {
  struct cfg_node *parent;
  const struct cfg_node *ck = find_at(root, MODEL_KEY, &parent);
  if (!ck || ck->kind != CFG_SCALAR || ck->type != CFG_T_PATH || cfg_invalid(ck)) return;
  /* A model that is not there is a missing input like any other: reported
   * where the load checks score's inputs (check, a run that may score), as
   * cfg_check_input words it; elsewhere (status, merge, a run of earlier
   * stages) the workflow loads without the model's settings, and a run that
   * later finds the model redoes what they decide if it differs (the stage
   * hashes change). */
  if (access(ck->value, F_OK) != 0 && (errno == ENOENT || errno == ENOTDIR)) {
    const char *input = cfg_sch_text(schema_at(schema, MODEL_KEY), "input");
    if (input && cfg_wants_inputs_of(ld, input)) cfg_err_node(ld, ck, MODEL_KEY, "no such file: %s", ck->value);
    return;
  }
  struct model_card card;
  char *first = NULL;
  struct se3_error why;
  if (model_card_read_path(ck->value, &card, &first, &why)) {
    cfg_err_node(ld, ck, MODEL_KEY, "%s", se3_error_str(&why).s);
    return;
  }
  char missing[1024] = "";
  int n_missing = 0, errs_before = ld->n_errs;
  for (int i = 0; model_card_key(i); i++) {
    const char *key = model_card_key(i), *text = model_card_get(&card, key);
    if (!text) text = model_card_older_value(key);
    struct cfg_node *n = find_at(root, key, &parent);
    const struct cfg_node *entry = schema_at(schema, key);
    if (!n || !parent || !entry || cfg_invalid(n)) continue; /* (a refused value: said already) */
    int written = n->file && strcmp(n->file, DEFAULT_FILE) != 0;
    if (!text) {
      if (!written && !model_card_preference(key)) {
        snprintf(missing + strlen(missing), sizeof missing - strlen(missing), "%s%s", n_missing ? ", " : "", key);
        n_missing++;
      }
      continue;
    }
    struct cfg_node *m = card_node(ld, first, key, text, entry);
    if (!m) continue;
    if (!written) {
      int k = cfg_kid_index(parent, n->key);
      cfg_node_free(parent->kids[k]);
      parent->kids[k] = m;
      continue;
    }
    if (!model_card_preference(key) && cfg_hash(SE3_HASH_INIT, n) != cfg_hash(SE3_HASH_INIT, m)) {
      char theirs[1024], ours[1024];
      model_card_value(m, theirs, sizeof theirs);
      model_card_value(n, ours, sizeof ours);
      cfg_err_node(ld, n, key,
                   "the model (%s) was trained with %s; this workflow sets %s: leave the key out to use the "
                   "model's, or train a model with these settings",
                   ck->value, theirs, ours);
    }
    cfg_node_free(m);
  }
  if (n_missing)
    cfg_err_node(ld, ck, MODEL_KEY,
                 "the model (%s) does not record %s %s (%s was written before checkpoints carried the "
                 "settings they were trained with): set %s in this workflow as %s when the model was trained",
                 ck->value, n_missing == 1 ? "the setting" : "the settings", missing, first,
                 n_missing == 1 ? "it" : "them", n_missing == 1 ? "it was" : "they were");
  else if (ld->n_errs == errs_before && model_card_fits(&card, root, first, &why))
    cfg_err_node(ld, ck, MODEL_KEY, "%s", se3_error_str(&why).s);
  free(first);
  model_card_free(&card);
}

/* stages.ingest.coordinates beside gen3d (issue 54). `gen3d: never` (no
 * shape is ever generated) means the files' coordinates: coordinates is
 * `input` unless the workflow wrote `generated`, which is refused; `gen3d:
 * always` is the older spelling of `coordinates: generated`, refused beside
 * a written `input`. A value the workflow left out (a default, or a model
 * card's) is settled here, so check prints, the card records and the stage
 * hashes what the run does; its hash mark follows its value. */
static void settle_coordinates(struct ld *ld, struct cfg_node *root, const struct cfg_node *schema) {
  struct cfg_node *parent = NULL, *co = find_at(root, "stages.ingest.coordinates", &parent);
  const struct cfg_node *g3 = find_at(root, "stages.ingest.gen3d", &parent);
  if (!co || !g3 || co->kind != CFG_SCALAR || g3->kind != CFG_SCALAR || !co->value || !g3->value) return;
  if (cfg_invalid(co) || cfg_invalid(g3)) return;
  int written = co->file && strcmp(co->file, DEFAULT_FILE) != 0;
  const char *want = !strcmp(g3->value, "never") ? "input" : !strcmp(g3->value, "always") ? "generated" : NULL;
  if (!want || !strcmp(co->value, want)) return;
  if (written) {
    cfg_err_node(ld, g3, "stages.ingest.gen3d",
                 "%s contradicts stages.ingest.coordinates: %s (%s): leave one of them out", g3->value, co->value,
                 !strcmp(want, "input") ? "`never` generates no shape, `generated` gives every record one"
                                        : "`always` generates every record's shape, `input` keeps the files'");
    return;
  }
  free(co->value);
  co->value = strdup(want);
  cfg_mark_older(co, schema_at(schema, "stages.ingest.coordinates"));
}

/* stages.ingest.input_shape: regenerate gives a file's shape out of bounds
 * a generated one, which `gen3d: never` forbids: the two are refused
 * together, naming both, rather than one of them silently ignored. */
static void check_input_shape(struct ld *ld, struct cfg_node *root) {
  struct cfg_node *parent = NULL, *is = find_at(root, "stages.ingest.input_shape", &parent);
  const struct cfg_node *g3 = find_at(root, "stages.ingest.gen3d", &parent);
  if (!is || !g3 || is->kind != CFG_SCALAR || g3->kind != CFG_SCALAR || !is->value || !g3->value) return;
  if (cfg_invalid(is) || cfg_invalid(g3)) return;
  if (!strcmp(is->value, "regenerate") && !strcmp(g3->value, "never"))
    cfg_err_node(ld, is, "stages.ingest.input_shape",
                 "regenerate contradicts stages.ingest.gen3d: never (`regenerate` generates a shape for a record "
                 "whose file's is out of bounds, `never` generates none): leave one of them out, or write "
                 "`input_shape: reject`");
}

/* SQLite opens a database under a path of at most 511 bytes (its unix
 * VFS's MAX_PATHNAME, 512, with the NUL), and the run's databases lie
 * deepest in the workdir as shards/<stage>-rank<N>.db-journal: a workdir
 * past this many bytes passed `check` and failed at the run's first open
 * ("unable to open database file"), leaving a lock file behind. */
#define WORKDIR_MAX_BYTES 460

static void check_workdir_length(struct ld *ld, struct cfg_node *root) {
  struct cfg_node *parent = NULL, *wd = find_at(root, "workdir", &parent);
  if (!wd || wd->kind != CFG_SCALAR || !wd->value || cfg_invalid(wd)) return;
  char abs[PATH_MAX];
  const char *v = wd->value;
  if (v[0] != '/' && ld->cwd && snprintf(abs, sizeof abs, "%s/%s", ld->cwd, v) < (int)sizeof abs) v = abs;
  size_t n = strlen(v);
  if (n > WORKDIR_MAX_BYTES)
    cfg_err_node(ld, wd, "workdir",
                 "the workdir's path is %zu bytes long (%.60s...); SQLite opens databases under paths of at most "
                 "511 bytes, and the run's files lie up to 51 bytes deeper: a workdir of at most %d bytes",
                 n, v, WORKDIR_MAX_BYTES);
}

/* ---- the schema's keys, for the getters -------------------------------------------- */

/* The schema, parsed once and kept: the getters of common/cfgtree.h ask it
 * whether a key they did not find is one (cfg_set_schema_check). Parsed where
 * configuration is loaded, before any stage runs (and any thread starts). */
static struct cfg_node *kept;

static const struct cfg_node *kept_schema(void) {
  if (!kept) {
    struct cfg_errors errs = {0};
    struct ld ld = {.errs = &errs};
    kept = cfg_schema_load(&ld);
    cfg_errors_free(&errs);
  }
  return kept;
}

/* The schema's entry of a dotted key (list items by index, a map's values by
 * any key), or NULL; *open set where the key lies under a `labels` entry, whose
 * names and values are the workflow's own. */
static const struct cfg_node *schema_entry(const char *dotted, int *open) {
  const struct cfg_node *s = kept_schema();
  char *copy = strdup(dotted);
  *open = 0;
  if (!copy) return NULL;
  for (char *save = NULL, *seg = strtok_r(copy, ".", &save); s && seg; seg = strtok_r(NULL, ".", &save)) {
    const char *t = cfg_sch_type(s);
    if (!t)
      s = cfg_find_kid(s, seg);
    else if (!strcmp(t, "map"))
      s = cfg_find_kid(s, "values");
    else if (!strcmp(t, "list"))
      s = seg[strspn(seg, "0123456789")] == 0 ? cfg_find_kid(s, "items") : NULL;
    else if (!strcmp(t, "object"))
      s = cfg_find_kid(cfg_find_kid(s, "fields"), seg);
    else if (!strcmp(t, "labels")) {
      *open = 1;
      break;
    } else
      s = NULL;
  }
  free(copy);
  return s;
}

static int schema_knows(const char *dotted) {
  int open;
  return schema_entry(dotted, &open) != NULL;
}

const char *cfg_schema_default(const char *key) {
  int open;
  const struct cfg_node *d = cfg_find_kid(schema_entry(key, &open), "default");
  return d && d->kind == CFG_SCALAR ? d->value : NULL;
}

int cfg_busy_timeout_ms(const struct cfg_node *root) {
  if (root) return (int)cfg_int(root, "store.busy_timeout_ms");
  const char *d = cfg_schema_default("store.busy_timeout_ms");
  return d ? atoi(d) : 0;
}

/* ---- load ------------------------------------------------------------------------ */

struct cfg_node *cfg_load(const char *path, const char *const *sets, int n_sets, struct cfg_errors *errs) {
  return cfg_load_checked(path, sets, n_sets, NULL, errs);
}

static struct cfg_node *load(const char *path, const char *const *sets, int n_sets, const char *input_stages,
                             int skip_missing, int keep, struct cfg_errors *errs);

struct cfg_node *cfg_load_checked(const char *path, const char *const *sets, int n_sets, const char *input_stages,
                                  struct cfg_errors *errs) {
  return load(path, sets, n_sets, input_stages, 0, 0, errs);
}

struct cfg_node *cfg_load_no_inputs(const char *path, const char *const *sets, int n_sets, struct cfg_errors *errs) {
  return load(path, sets, n_sets, NULL, 1, 0, errs);
}

struct cfg_node *cfg_load_partial(const char *path, const char *const *sets, int n_sets, const char *input_stages,
                                  int no_inputs, struct cfg_errors *errs) {
  return load(path, sets, n_sets, no_inputs ? NULL : input_stages, no_inputs, 1, errs);
}

static struct cfg_node *load(const char *path, const char *const *sets, int n_sets, const char *input_stages,
                             int skip_missing, int keep, struct cfg_errors *errs) {
  struct ld ld = {.errs = errs, .inputs = input_stages, .skip_missing = skip_missing};
  if (!path) {
    cfg_add_msg(&ld, strdup("?:0:0: (root): no workflow file given"));
    return NULL;
  }
  ld.cwd = getcwd(NULL, 0);
  if (!ld.cwd) ld.cwd = strdup("/");
  ld.wf_dir = ld.cwd ? cfg_abs_dir(&ld, path) : NULL;
  struct cfg_node *root = NULL, *schema = NULL;
  if (!ld.wf_dir) {
    cfg_add_msg(&ld, strdup("?:0:0: (root): out of memory"));
    goto out;
  }
  schema = cfg_schema_load(&ld);
  if (!schema) goto out;
  if (kept_schema()) cfg_set_schema_check(schema_knows);
  root = cfg_load_file(&ld, path, NULL, NULL);
  /* without a workflow, still check the overrides' syntax */
  struct cfg_node *target = root ? root : cfg_node_new(CFG_MAP, NULL, DEFAULT_FILE, 0, 0);
  for (int i = 0; target && i < n_sets; i++)
    if (sets[i]) cfg_apply_set(&ld, target, schema, sets[i]);
  if (!root) {
    cfg_node_free(target);
    goto out;
  }
  /* workdir defaults to runs/<workflow> beside the workflow file ("<default>"
   * paths resolve against that folder). `workdir:` with nothing after it is
   * absent too: validation drops such an empty key, and it must not take the
   * default with it (the run would write into the current folder). */
  const struct cfg_node *wf = cfg_find_kid(root, "workflow");
  int wdi = cfg_kid_index(root, "workdir");
  if (wdi >= 0 && root->kids[wdi]->kind == CFG_NULL) {
    cfg_node_free(root->kids[wdi]);
    memmove(root->kids + wdi, root->kids + wdi + 1, (size_t)(root->n_kids - wdi - 1) * sizeof *root->kids);
    root->n_kids--;
  }
  if (!cfg_find_kid(root, "workdir") && wf && wf->kind == CFG_SCALAR) {
    struct cfg_node *wd = cfg_node_new(CFG_SCALAR, "workdir", DEFAULT_FILE, 0, 0);
    if (wd && asprintf(&wd->value, "runs/%s", wf->value) < 0) wd->value = NULL;
    if (wd && wd->value)
      cfg_node_add(root, wd);
    else
      cfg_node_free(wd);
  }
  cfg_resolve_model(&ld, root);
  struct path p = {0};
  cfg_validate(&ld, root, schema, &p);
  free(p.s);
  /* what validation refused, stand-ins: the card's check and the settling
   * below read the tree with the getters, and so does a caller given it
   * despite its errors (keep) */
  if (ld.n_errs) root = cfg_make_sound(root, schema);
  cfg_link_parents(root); /* (the card's check reads the tree with the getters) */
  apply_model_card(&ld, root, schema);
  settle_coordinates(&ld, root, schema);
  check_input_shape(&ld, root);
  check_workdir_length(&ld, root);
out:
  cfg_node_free(schema);
  free(ld.origins);
  free(ld.stack);
  for (int i = 0; i < ld.n_loaded; i++) {
    free(ld.loaded[i].real);
    cfg_node_free(ld.loaded[i].tree);
  }
  free(ld.loaded);
  free(ld.cwd);
  free(ld.wf_dir);
  if (ld.n_errs && !keep) {
    cfg_node_free(root);
    return NULL;
  }
  /* the merges and the model's card placed kids by hand: name each key's
   * parent, so the getters can name a key in full */
  cfg_link_parents(root);
  return root;
}

/* ---- print -------------------------------------------------------------------------- */

/* Whether text can be written unquoted and read back as the same string. */
static int plain_ok(const char *s, enum cfg_type t) {
  if (t == CFG_T_INT || t == CFG_T_FLOAT || t == CFG_T_BOOL) return 1; /* canonical, validated text */
  if (!*s || strchr("-?:,[]{}#&*!|>'\"%@`~ \t", s[0])) return 0;
  static const char *words[] = {"null", "true", "false", "yes", "no", "on", "off"};
  for (size_t i = 0; i < sizeof words / sizeof *words; i++)
    if (strcasecmp(s, words[i]) == 0) return 0;
  char *end;
  strtod(s, &end);
  if (!*end) return 0; /* looks like a number: keep it a string */
  for (const unsigned char *c = (const unsigned char *)s; *c; c++)
    if (*c < 0x20 || *c == 0x7f || strchr(",[]{}", *c)) return 0;
  size_t len = strlen(s);
  if (strchr(s, ':') || strstr(s, " #") || s[len - 1] == ' ') return 0;
  return 1;
}

static void print_scalar(FILE *f, const char *s, enum cfg_type t) {
  if (plain_ok(s, t)) {
    fputs(s, f);
    return;
  }
  int ctrl = 0;
  for (const unsigned char *c = (const unsigned char *)s; *c; c++)
    ctrl |= *c < 0x20 || *c == 0x7f;
  if (!ctrl) { /* single quotes: only ' needs escaping, as '' */
    fputc('\'', f);
    for (const char *c = s; *c; c++) {
      if (*c == '\'') fputc('\'', f);
      fputc(*c, f);
    }
    fputc('\'', f);
    return;
  }
  fputc('"', f);
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    if (*c == '"' || *c == '\\')
      fprintf(f, "\\%c", *c);
    else if (*c == '\n')
      fputs("\\n", f);
    else if (*c == '\t')
      fputs("\\t", f);
    else if (*c == '\r')
      fputs("\\r", f);
    else if (*c < 0x20 || *c == 0x7f)
      fprintf(f, "\\x%02x", *c);
    else
      fputc(*c, f);
  }
  fputc('"', f);
}

static int flow_list_ok(const struct cfg_node *l) {
  size_t len = 0;
  for (int i = 0; i < l->n_kids; i++) {
    if (l->kids[i]->kind != CFG_SCALAR) return 0;
    len += strlen(l->kids[i]->value) + 4;
  }
  return len <= 72;
}

static void print_map(FILE *f, const struct cfg_node *m, int indent, int inline_first);
static void print_list(FILE *f, const struct cfg_node *l, int indent);

/* What follows "key:" or "-". */
static void print_after(FILE *f, const struct cfg_node *n, int indent) {
  switch (n->kind) {
  case CFG_NULL:
    fputs(" null\n", f);
    break;
  case CFG_SCALAR:
    fputc(' ', f);
    print_scalar(f, n->value, n->type);
    fputc('\n', f);
    break;
  case CFG_LIST:
    if (n->n_kids == 0) {
      fputs(" []\n", f);
    } else if (flow_list_ok(n)) {
      fputs(" [", f);
      for (int i = 0; i < n->n_kids; i++) {
        if (i) fputs(", ", f);
        print_scalar(f, n->kids[i]->value, n->kids[i]->type);
      }
      fputs("]\n", f);
    } else {
      fputc('\n', f);
      print_list(f, n, indent + 2);
    }
    break;
  case CFG_MAP:
    if (n->n_kids == 0) {
      fputs(" {}\n", f);
    } else {
      fputc('\n', f);
      print_map(f, n, indent + 2, 0);
    }
    break;
  }
}

static void print_map(FILE *f, const struct cfg_node *m, int indent, int inline_first) {
  for (int i = 0; i < m->n_kids; i++) {
    if (i || !inline_first) fprintf(f, "%*s", indent, "");
    print_scalar(f, m->kids[i]->key ? m->kids[i]->key : "", CFG_T_STRING);
    fputc(':', f);
    print_after(f, m->kids[i], indent);
  }
}

static void print_list(FILE *f, const struct cfg_node *l, int indent) {
  for (int i = 0; i < l->n_kids; i++) {
    const struct cfg_node *k = l->kids[i];
    fprintf(f, "%*s-", indent, "");
    if (k->kind == CFG_MAP && k->n_kids > 0) {
      fputc(' ', f);
      print_map(f, k, indent + 2, 1);
    } else {
      print_after(f, k, indent);
    }
  }
}

void cfg_print(FILE *f, const struct cfg_node *root) {
  if (!f || !root) return;
  if (root->kind == CFG_MAP && root->n_kids > 0) {
    print_map(f, root, 0, 0);
  } else if (root->kind == CFG_LIST && root->n_kids > 0) {
    print_list(f, root, 0);
  } else if (root->kind == CFG_SCALAR) {
    print_scalar(f, root->value, root->type);
    fputc('\n', f);
  } else {
    fputs(root->kind == CFG_LIST ? "[]\n" : root->kind == CFG_MAP ? "{}\n" : "null\n", f);
  }
}

/* ---- hash ----------------------------------------------------------------------------- */

static uint64_t hash_marker(uint64_t h, const char *word) {
  h = se3_hash_str(h, word);
  return se3_hash_bytes(h, "", 1);
}

void cfg_stage_hash(const struct cfg_node *root, const char *stage, int with_sets, char out[17]) {
  uint64_t h = SE3_HASH_INIT;
  h = hash_marker(h, "stage");
  h = hash_marker(h, stage ? stage : "");
  h = cfg_hash(h, stage ? cfg_find_kid(cfg_find_kid(root, "stages"), stage) : NULL);
  if (with_sets) {
    h = hash_marker(h, "sets");
    h = cfg_hash(h, cfg_find_kid(root, "sets"));
  }
  snprintf(out, 17, "%016llx", (unsigned long long)h);
}
