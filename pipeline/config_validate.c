/* config_validate.c — validation: a tree checked against the schema (types,
 * ranges, enums, required and unknown keys with a "did you mean"), defaults
 * filled in, keys put in schema order.
 */
#define _GNU_SOURCE
#include "pipeline/config_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chem/mol.h"

static void mark_no_hash(struct cfg_node *n) {
  n->no_hash = 1;
  for (int i = 0; i < n->n_kids; i++)
    mark_no_hash(n->kids[i]);
}

/* ---- values and suggestions -------------------------------------------------- */

static int levenshtein(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (la > 64 || lb > 64) return 1000;
  int prev[65], cur[65];
  for (size_t j = 0; j <= lb; j++)
    prev[j] = (int)j;
  for (size_t i = 1; i <= la; i++) {
    cur[0] = (int)i;
    for (size_t j = 1; j <= lb; j++) {
      int sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
      int del = prev[j] + 1, ins = cur[j - 1] + 1;
      cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
    }
    memcpy(prev, cur, sizeof cur);
  }
  return prev[lb];
}

/* The closest candidate: one that starts with the word (a truncated key,
 * shortest first), else one within edit distance 2 (less than the word
 * itself), else one that the word starts with. */
static const char *suggest(const char *word, const char *const *cands, int n) {
  const char *best = NULL;
  int wl = (int)strlen(word);
  if (wl >= 3)
    for (int i = 0; i < n; i++)
      if (strncmp(cands[i], word, (size_t)wl) == 0 && (!best || strlen(cands[i]) < strlen(best))) best = cands[i];
  if (best) return best;
  int best_d = 3;
  for (int i = 0; i < n; i++) {
    int d = levenshtein(word, cands[i]);
    if (d < best_d && d < wl && d < (int)strlen(cands[i])) {
      best = cands[i];
      best_d = d;
    }
  }
  if (best) return best;
  for (int i = 0; i < n; i++) {
    size_t cl = strlen(cands[i]);
    if (cl >= 3 && strncmp(word, cands[i], cl) == 0) return cands[i];
  }
  return NULL;
}

/* The keys of a mapping as an array of strings (malloc'd, not the strings). */
static const char **keys_of(const struct cfg_node *m, int *n) {
  *n = 0;
  if (!m || m->n_kids == 0) return NULL;
  const char **k = malloc((size_t)m->n_kids * sizeof *k);
  if (!k) return NULL;
  for (int i = 0; i < m->n_kids; i++)
    if (m->kids[i]->key) k[(*n)++] = m->kids[i]->key;
  return k;
}

/* ---- validation against the schema ------------------------------------------------ */

static void err_range(struct ld *ld, const struct cfg_node *n, const struct path *p, const char *lo, const char *hi) {
  if (lo && hi)
    cfg_err_node(ld, n, cfg_path_str(p), "must be between %s and %s, got %s", lo, hi, n->value);
  else if (lo)
    cfg_err_node(ld, n, cfg_path_str(p), "must be at least %s, got %s", lo, n->value);
  else
    cfg_err_node(ld, n, cfg_path_str(p), "must be at most %s, got %s", hi, n->value);
}

static void set_value(struct cfg_node *n, const char *text) {
  char *v = strdup(text);
  if (!v) return;
  free(n->value);
  n->value = v;
}

/* Strings and paths may hold no control character (a byte below 0x20,
 * newline, CR and tab included, or DEL): names, paths and slurm options
 * end up in the scripts `se3screen slurm` writes, in comment and #SBATCH
 * lines that a newline would end, starting a command (and in logs and
 * terminal lines, where control bytes can hide text). A workflow file is
 * trusted to run, but never a way to run commands through generated
 * scripts. Checked on the value as written (a path before it is resolved);
 * 1 where refused. Defaults are made from checked values, and not checked
 * again. */
static int refuse_control_in(struct ld *ld, const struct cfg_node *n, const struct path *p, const char *text) {
  if (n->file && strcmp(n->file, DEFAULT_FILE) == 0) return 0;
  for (const char *c = text; c && *c; c++) {
    unsigned char b = (unsigned char)*c;
    if (b >= 0x20 && b != 0x7f) continue;
    char what[16];
    if (b == '\n')
      snprintf(what, sizeof what, "a newline");
    else if (b == '\r')
      snprintf(what, sizeof what, "a CR");
    else if (b == '\t')
      snprintf(what, sizeof what, "a tab");
    else
      snprintf(what, sizeof what, "byte 0x%02x", b);
    cfg_err_node(ld, n, cfg_path_str(p),
                 "holds a control character (%s at character %d); names, paths and options "
                 "may not hold control characters (newlines, tabs, ...)",
                 what, (int)(c - text) + 1);
    return 1;
  }
  return 0;
}

static int refuse_control(struct ld *ld, const struct cfg_node *n, const struct path *p) {
  return refuse_control_in(ld, n, p, n->value);
}

static void check_int(struct ld *ld, struct cfg_node *n, const struct cfg_node *s, const struct path *p) {
  int64_t v = 0, lo = 0, hi = 0;
  int r = cfg_parse_int(n->value, &v);
  if (r == 0) {
    cfg_err_expected(ld, n, p, "an integer");
    return;
  }
  const char *slo = cfg_sch_text(s, "min"), *shi = cfg_sch_text(s, "max");
  int has_lo = slo && cfg_parse_int(slo, &lo) == 1, has_hi = shi && cfg_parse_int(shi, &hi) == 1;
  if (r < 0 || (has_lo && v < lo) || (has_hi && v > hi)) {
    if (has_lo || has_hi)
      err_range(ld, n, p, has_lo ? slo : NULL, has_hi ? shi : NULL);
    else
      cfg_err_node(ld, n, cfg_path_str(p), "integer out of range, got %s", n->value);
    return;
  }
  n->type = CFG_T_INT;
  n->i = v;
  n->f = (double)v;
  char buf[32];
  snprintf(buf, sizeof buf, "%lld", (long long)v);
  set_value(n, buf); /* canonical text: "+7" and "007" print as 7 */
}

/* A float's bounds: min and max inclusive, `above` an exclusive lower bound
 * (a length that must be more than 0). */
static void check_float(struct ld *ld, struct cfg_node *n, const struct cfg_node *s, const struct path *p) {
  double v = 0, lo = 0, hi = 0, above = 0;
  if (!cfg_parse_float(n->value, &v)) {
    cfg_err_expected(ld, n, p, "a number");
    return;
  }
  const char *slo = cfg_sch_text(s, "min"), *shi = cfg_sch_text(s, "max"), *sabove = cfg_sch_text(s, "above");
  int has_lo = slo && cfg_parse_float(slo, &lo), has_hi = shi && cfg_parse_float(shi, &hi);
  int has_above = sabove && cfg_parse_float(sabove, &above);
  if (has_above && !(v > above)) {
    if (has_hi)
      cfg_err_node(ld, n, cfg_path_str(p), "must be more than %s and at most %s, got %s", sabove, shi, n->value);
    else
      cfg_err_node(ld, n, cfg_path_str(p), "must be more than %s, got %s", sabove, n->value);
    return;
  }
  if ((has_lo && v < lo) || (has_hi && v > hi)) {
    if (has_above)
      cfg_err_node(ld, n, cfg_path_str(p), "must be more than %s and at most %s, got %s", sabove, shi, n->value);
    else
      err_range(ld, n, p, has_lo ? slo : NULL, has_hi ? shi : NULL);
    return;
  }
  n->type = CFG_T_FLOAT;
  n->f = v;
}

/* An enum with min or max also takes a number in that range (protonate:
 * keep, neutral or a pH). */
static void check_enum(struct ld *ld, struct cfg_node *n, const struct cfg_node *s, const struct path *p) {
  const struct cfg_node *vals = cfg_find_kid(s, "values");
  int nv = vals && vals->kind == CFG_LIST ? vals->n_kids : 0;
  if (n->kind == CFG_SCALAR)
    for (int i = 0; i < nv; i++)
      if (vals->kids[i]->value && strcmp(vals->kids[i]->value, n->value) == 0) {
        n->type = CFG_T_ENUM;
        return;
      }
  double v;
  if (n->kind == CFG_SCALAR && (cfg_sch_text(s, "min") || cfg_sch_text(s, "max")) && cfg_parse_float(n->value, &v)) {
    check_float(ld, n, s, p);
    return;
  }
  /* "must be one of a, b, c; got 'x'; did you mean 'y'?" */
  size_t cap = 64;
  for (int i = 0; i < nv; i++)
    cap += vals->kids[i]->value ? strlen(vals->kids[i]->value) + 2 : 0;
  char *list = calloc(1, cap);
  const char **cands = calloc((size_t)nv + 1, sizeof *cands);
  int nc = 0;
  if (list && cands)
    for (int i = 0; i < nv; i++) {
      if (!vals->kids[i]->value) continue;
      if (nc) strcat(list, ", ");
      strcat(list, vals->kids[i]->value);
      cands[nc++] = vals->kids[i]->value;
    }
  char d[96];
  cfg_describe(n, d, sizeof d);
  const char *lo = cfg_sch_text(s, "min"), *hi = cfg_sch_text(s, "max");
  if (list && (lo || hi)) {
    size_t at = strlen(list);
    char *more = realloc(list, at + 96);
    if (more) {
      list = more;
      snprintf(list + at, 96, " or a number%s%s%s%s", lo ? " from " : "", lo ? lo : "", hi ? " to " : "",
               hi ? hi : "");
    }
  }
  const char *sug = n->kind == CFG_SCALAR && cands ? suggest(n->value, cands, nc) : NULL;
  if (sug)
    cfg_err_node(ld, n, cfg_path_str(p), "must be one of %s; got %s; did you mean '%s'?", list ? list : "", d, sug);
  else
    cfg_err_node(ld, n, cfg_path_str(p), "must be one of %s; got %s", list ? list : "", d);
  free(list);
  free(cands);
}

static void check_labels(struct ld *ld, struct cfg_node *n, struct path *p) {
  if (n->kind == CFG_LIST) {
    for (int i = 0; i < n->n_kids; i++) {
      struct cfg_node *k = n->kids[i];
      size_t old = cfg_path_push_index(p, i);
      if (k->kind != CFG_SCALAR)
        cfg_err_expected(ld, k, p, "a label name");
      else
        k->type = CFG_T_STRING;
      cfg_path_pop(p, old);
    }
  } else if (n->kind == CFG_MAP) {
    for (int i = 0; i < n->n_kids; i++) {
      struct cfg_node *k = n->kids[i];
      size_t old = cfg_path_push(p, k->key);
      int64_t iv;
      double fv;
      if (k->kind == CFG_SCALAR && cfg_parse_int(k->value, &iv) == 1) {
        k->type = CFG_T_INT;
        k->i = iv;
        k->f = (double)iv;
      } else if (k->kind == CFG_SCALAR && cfg_parse_float(k->value, &fv)) {
        k->type = CFG_T_FLOAT;
        k->f = fv;
      } else {
        cfg_err_expected(ld, k, p, "a number");
      }
      cfg_path_pop(p, old);
    }
  } else {
    cfg_err_expected(ld, n, p, "a list of label names or a mapping name: number");
  }
}

/* An element's symbol (H, C, Cl; any case, as mol_element_z reads it). */
static void check_element(struct ld *ld, struct cfg_node *n, const struct path *p) {
  if (n->kind != CFG_SCALAR) {
    cfg_err_expected(ld, n, p, "an element's symbol");
    return;
  }
  if (mol_element_z(n->value) <= 0) {
    cfg_err_node(ld, n, cfg_path_str(p),
                 "'%s' is not a chemical element: give an element's symbol, H to Og (atomic numbers 1 to 118)",
                 n->value);
    return;
  }
  n->type = CFG_T_STRING; /* kept as written: the stage hashes take it so */
}

/* A list whose schema says `unique: true`: each item once (elements by
 * atomic number, so Cl and CL are one; other scalars by their text). The
 * second of two is the error, naming the first. */
static void check_unique(struct ld *ld, const struct cfg_node *n, const struct cfg_node *items, struct path *p) {
  const char *it = items ? cfg_sch_type(items) : NULL;
  int by_element = it && !strcmp(it, "element");
  for (int i = 1; i < n->n_kids; i++) {
    const struct cfg_node *a = n->kids[i];
    if (a->kind != CFG_SCALAR) continue;
    for (int j = 0; j < i; j++) {
      const struct cfg_node *b = n->kids[j];
      if (b->kind != CFG_SCALAR) continue;
      int za = by_element ? mol_element_z(a->value) : 0, zb = by_element ? mol_element_z(b->value) : 0;
      if (by_element ? (za <= 0 || za != zb) : strcmp(a->value, b->value) != 0) continue;
      size_t old = cfg_path_push_index(p, i);
      cfg_err_node(ld, a, cfg_path_str(p), "'%s' is listed twice (first as item %d, '%s'): list each %s once",
                   a->value, j, b->value, by_element ? "element" : "value");
      cfg_path_pop(p, old);
      break;
    }
  }
}

/* A default value from the schema, as a node of its own. */
static struct cfg_node *make_default(const struct cfg_node *d, const char *key) {
  struct cfg_node *n = cfg_node_copy(d);
  if (!n) return NULL;
  cfg_set_loc(n, DEFAULT_FILE, 0, 0);
  free(n->key);
  n->key = strdup(key);
  return n;
}

static void err_unknown(struct ld *ld, const struct cfg_node *k, const struct cfg_node *fields, const struct path *p) {
  /* a stage's section written at the top level */
  if (cfg_find_kid(fields, "stages") && cfg_find_kid(cfg_find_kid(fields, "stages"), k->key)) {
    cfg_err_node(ld, k, cfg_path_str(p), "unknown key '%s'; did you mean 'stages.%s'?", k->key, k->key);
    return;
  }
  int nc;
  const char **cands = keys_of(fields, &nc);
  const char *sug = cands ? suggest(k->key, cands, nc) : NULL;
  if (sug)
    cfg_err_node(ld, k, cfg_path_str(p), "unknown key '%s'; did you mean '%s'?", k->key, sug);
  else
    cfg_err_node(ld, k, cfg_path_str(p), "unknown key '%s'", k->key);
  free(cands);
}

/* The fields of a section or object: check the keys given, fill the absent
 * ones, and put them in schema order (unknown keys last). */
static void validate_fields(struct ld *ld, struct cfg_node *m, const struct cfg_node *fields, struct path *p) {
  int w = 0;
  for (int i = 0; i < m->n_kids; i++) {
    struct cfg_node *k = m->kids[i];
    const struct cfg_node *f = cfg_find_kid(fields, k->key);
    size_t old = cfg_path_push(p, k->key);
    if (!f) {
      err_unknown(ld, k, fields, p);
    } else if (k->kind == CFG_NULL && cfg_sch_type(f)) {
      /* `key:` with nothing after it: as if absent */
      if (!cfg_sch_flag(f, "required", 0)) {
        cfg_node_free(k);
        cfg_path_pop(p, old);
        continue;
      }
      cfg_err_node(ld, k, cfg_path_str(p), "a value is required");
    } else {
      cfg_validate(ld, k, f, p);
    }
    cfg_path_pop(p, old);
    m->kids[w++] = k;
  }
  m->n_kids = w;

  for (int i = 0; fields && i < fields->n_kids; i++) {
    const struct cfg_node *f = fields->kids[i];
    if (!f->key || cfg_find_kid(m, f->key)) continue;
    size_t old = cfg_path_push(p, f->key);
    const struct cfg_node *d = cfg_find_kid(f, "default");
    struct cfg_node *n = NULL;
    if (cfg_sch_flag(f, "required", 0))
      cfg_err_node(ld, m, cfg_path_str(p), "required key is missing");
    else if (d)
      n = make_default(d, f->key);
    else if (f->kind == CFG_MAP && !cfg_sch_type(f))
      n = cfg_node_new(CFG_MAP, f->key, DEFAULT_FILE, 0, 0); /* a section: fill its defaults */
    if (n) {
      cfg_validate(ld, n, f, p);
      cfg_node_add(m, n);
    }
    cfg_path_pop(p, old);
  }

  if (!fields || m->n_kids < 2) return;
  struct cfg_node **sorted = malloc((size_t)m->n_kids * sizeof *sorted);
  if (!sorted) return;
  int ns = 0;
  for (int i = 0; i < fields->n_kids; i++) {
    int j = fields->kids[i]->key ? cfg_kid_index(m, fields->kids[i]->key) : -1;
    if (j >= 0) sorted[ns++] = m->kids[j];
  }
  for (int i = 0; i < m->n_kids; i++)
    if (!cfg_find_kid(fields, m->kids[i]->key)) sorted[ns++] = m->kids[i];
  memcpy(m->kids, sorted, (size_t)ns * sizeof *sorted);
  free(sorted);
}

/* hash: unless_default — n a scalar equal to its schema's default (numbers
 * by value, other scalars by text), or a list of the default's items (by
 * text, in order): a key added after workdirs were made with what is now
 * its default keeps their work. */
static int at_default(const struct cfg_node *n, const struct cfg_node *s, const char *type) {
  const struct cfg_node *d = cfg_find_kid(s, "default");
  if (d && d->kind == CFG_LIST && n->kind == CFG_LIST) {
    if (d->n_kids != n->n_kids) return 0;
    for (int i = 0; i < n->n_kids; i++) {
      const struct cfg_node *a = n->kids[i], *b = d->kids[i];
      if (a->kind != CFG_SCALAR || b->kind != CFG_SCALAR || !a->value || !b->value || strcmp(a->value, b->value))
        return 0;
    }
    return 1;
  }
  if (!d || d->kind != CFG_SCALAR || n->kind != CFG_SCALAR || !n->value || !d->value) return 0;
  if (!strcmp(type, "float") || !strcmp(type, "int")) {
    double a, b;
    return cfg_parse_float(n->value, &a) && cfg_parse_float(d->value, &b) && a == b;
  }
  return !strcmp(n->value, d->value);
}

/* hash: unless_older — n left out of the hash when it holds the schema's
 * `older:` value (the behaviour before the key existed), hashed otherwise;
 * again after a value is settled (config.c). */
void cfg_mark_older(struct cfg_node *n, const struct cfg_node *s) {
  const char *older = cfg_sch_text(s, "older");
  n->no_hash = n->kind == CFG_SCALAR && n->value && older && !strcmp(n->value, older);
}

void cfg_validate(struct ld *ld, struct cfg_node *n, const struct cfg_node *s, struct path *p) {
  if (!s || s->kind != CFG_MAP) {
    cfg_err_node(ld, n, cfg_path_str(p), "schema: no usable entry for this key");
    return;
  }
  const char *t = cfg_sch_type(s);
  if (!t) { /* a plain section */
    if (n->kind == CFG_NULL) n->kind = CFG_MAP;
    if (n->kind != CFG_MAP)
      cfg_err_expected(ld, n, p, "a mapping");
    else
      validate_fields(ld, n, s, p);
    return;
  }
  int is_scalar = n->kind == CFG_SCALAR;
  if (strcmp(t, "string") == 0) {
    if (!is_scalar)
      cfg_err_expected(ld, n, p, "a string");
    else if (!refuse_control(ld, n, p))
      n->type = CFG_T_STRING;
  } else if (strcmp(t, "path") == 0) {
    if (!is_scalar || !n->value[0]) {
      cfg_err_expected(ld, n, p, "a path");
    } else if (!refuse_control(ld, n, p)) {
      cfg_resolve_path(ld, n);
      n->type = CFG_T_PATH;
      const char *input = cfg_sch_text(s, "input");
      /* (the model path may be a folder: config.c reads it as a model) */
      if (input && cfg_wants_inputs_of(ld, input) && strcmp(cfg_path_str(p), MODEL_KEY) != 0) cfg_check_input(ld, n, p);
    }
  } else if (strcmp(t, "int") == 0) {
    if (!is_scalar)
      cfg_err_expected(ld, n, p, "an integer");
    else
      check_int(ld, n, s, p);
  } else if (strcmp(t, "float") == 0) {
    if (!is_scalar)
      cfg_err_expected(ld, n, p, "a number");
    else
      check_float(ld, n, s, p);
  } else if (strcmp(t, "bool") == 0) {
    int b;
    if (!is_scalar || !cfg_parse_bool(n->value, &b)) {
      cfg_err_expected(ld, n, p, "true or false");
    } else {
      n->type = CFG_T_BOOL;
      n->i = b;
      n->f = b;
      set_value(n, b ? "true" : "false");
    }
  } else if (strcmp(t, "enum") == 0) {
    check_enum(ld, n, s, p);
  } else if (strcmp(t, "element") == 0) {
    check_element(ld, n, p);
  } else if (strcmp(t, "list") == 0) {
    const struct cfg_node *items = cfg_find_kid(s, "items");
    if (n->kind != CFG_LIST) {
      cfg_err_expected(ld, n, p, "a list");
    } else {
      for (int i = 0; items && i < n->n_kids; i++) {
        size_t old = cfg_path_push_index(p, i);
        cfg_validate(ld, n->kids[i], items, p);
        cfg_path_pop(p, old);
      }
      if (cfg_sch_flag(s, "unique", 0)) check_unique(ld, n, items, p);
    }
  } else if (strcmp(t, "map") == 0) {
    const struct cfg_node *values = cfg_find_kid(s, "values");
    if (n->kind != CFG_MAP) {
      cfg_err_expected(ld, n, p, "a mapping");
    } else {
      for (int i = 0; values && i < n->n_kids; i++) {
        size_t old = cfg_path_push(p, n->kids[i]->key);
        /* a name the user chooses (a set's) is a name like any other: no
         * newline in it to split a log line or a report's table */
        if (!refuse_control_in(ld, n->kids[i], p, n->kids[i]->key)) cfg_validate(ld, n->kids[i], values, p);
        cfg_path_pop(p, old);
      }
    }
  } else if (strcmp(t, "object") == 0) {
    if (n->kind != CFG_MAP)
      cfg_err_expected(ld, n, p, "a mapping");
    else
      validate_fields(ld, n, cfg_find_kid(s, "fields"), p);
  } else if (strcmp(t, "labels") == 0) {
    check_labels(ld, n, p);
  } else {
    cfg_err_node(ld, n, cfg_path_str(p), "schema: unknown type '%s'", t);
  }
  const char *hash = cfg_sch_text(s, "hash");
  if (hash && !strcmp(hash, "unless_default")) {
    if (at_default(n, s, t)) mark_no_hash(n);
  } else if (hash && !strcmp(hash, "unless_older")) {
    cfg_mark_older(n, s);
  } else if (!cfg_sch_flag(s, "hash", 1)) {
    mark_no_hash(n);
  }
}

/* ---- a refused tree made safe to read ------------------------------------------- */

/* A stand-in (CFG_INVALID_FILE) for node n, or for key `key` where n is
 * NULL (a required key left out), under schema entry s: of the kind s asks,
 * at n's place, holding s's default or an empty value of s's type, typed as
 * validation types it, so that the getters read it. n is freed. */
static struct cfg_node *stand_in(struct cfg_node *n, const char *key, const struct cfg_node *s) {
  const char *t = cfg_sch_type(s);
  enum cfg_kind kind = !t || !strcmp(t, "object") || !strcmp(t, "map") ? CFG_MAP
                       : !strcmp(t, "list") || !strcmp(t, "labels")    ? CFG_LIST
                                                                       : CFG_SCALAR;
  struct cfg_node *m = cfg_node_new(kind, n ? n->key : key, CFG_INVALID_FILE, n ? n->line : 0, n ? n->col : 0);
  if (!m) return n;
  cfg_node_free(n);
  if (kind != CFG_SCALAR) return m;
  const struct cfg_node *d = cfg_find_kid(s, "default");
  const char *text = d && d->kind == CFG_SCALAR && d->value ? d->value : NULL;
  char buf[32];
  if (!strcmp(t, "int")) {
    int64_t v = 0;
    if (!text || cfg_parse_int(text, &v) != 1) v = 0;
    snprintf(buf, sizeof buf, "%lld", (long long)v);
    m->type = CFG_T_INT;
    m->i = v;
    m->f = (double)v;
    text = buf;
  } else if (!strcmp(t, "float")) {
    double v = 0;
    if (!text || !cfg_parse_float(text, &v)) text = "0", v = 0;
    m->type = CFG_T_FLOAT;
    m->f = v;
  } else if (!strcmp(t, "bool")) {
    int b = 0;
    if (!text || !cfg_parse_bool(text, &b)) b = 0;
    m->type = CFG_T_BOOL;
    m->i = b;
    m->f = b;
    text = b ? "true" : "false";
  } else {
    m->type = !strcmp(t, "path") ? CFG_T_PATH : !strcmp(t, "enum") ? CFG_T_ENUM : CFG_T_STRING;
  }
  m->value = strdup(text ? text : "");
  if (!m->value) m->value = calloc(1, 1);
  return m;
}

static struct cfg_node *sound(struct cfg_node *n, const struct cfg_node *s);

/* A section's or an object's fields made sound; a required key left out
 * gets a stand-in, and so, under a stand-in, does every key with a default
 * and every section (a key that is optional on purpose stays absent). */
static void sound_fields(struct cfg_node *m, const struct cfg_node *fields) {
  int inv = cfg_invalid(m);
  for (int i = 0; i < m->n_kids; i++) {
    const struct cfg_node *f = m->kids[i]->key ? cfg_find_kid(fields, m->kids[i]->key) : NULL;
    if (f) m->kids[i] = sound(m->kids[i], f);
  }
  for (int i = 0; fields && i < fields->n_kids; i++) {
    const struct cfg_node *f = fields->kids[i];
    if (!f->key || f->kind != CFG_MAP || cfg_find_kid(m, f->key)) continue;
    if (cfg_sch_flag(f, "required", 0) || (inv && (cfg_find_kid(f, "default") || !cfg_sch_type(f))))
      cfg_node_add(m, sound(stand_in(NULL, f->key, f), f));
  }
}

/* Whether labels (a list of names, or name: number) hold only what
 * validation accepted. */
static int labels_sound(const struct cfg_node *n) {
  if (n->kind != CFG_LIST && n->kind != CFG_MAP) return 0;
  for (int i = 0; i < n->n_kids; i++)
    if (n->kids[i]->kind != CFG_SCALAR || n->kids[i]->type == CFG_T_ANY) return 0;
  return 1;
}

static struct cfg_node *sound(struct cfg_node *n, const struct cfg_node *s) {
  if (!n || !s || s->kind != CFG_MAP) return n;
  const char *t = cfg_sch_type(s);
  if (!t || !strcmp(t, "object")) {
    if (n->kind != CFG_MAP) n = stand_in(n, NULL, s);
    sound_fields(n, t ? cfg_find_kid(s, "fields") : s);
  } else if (!strcmp(t, "list") || !strcmp(t, "map")) {
    enum cfg_kind want = t[0] == 'l' ? CFG_LIST : CFG_MAP;
    if (n->kind != want) n = stand_in(n, NULL, s);
    const struct cfg_node *e = cfg_find_kid(s, want == CFG_LIST ? "items" : "values");
    for (int i = 0; e && i < n->n_kids; i++)
      n->kids[i] = sound(n->kids[i], e);
  } else if (!strcmp(t, "labels")) {
    if (!labels_sound(n)) n = stand_in(n, NULL, s);
  } else if (n->kind != CFG_SCALAR || !n->value || n->type == CFG_T_ANY) {
    n = stand_in(n, NULL, s);
  }
  return n;
}

struct cfg_node *cfg_make_sound(struct cfg_node *root, const struct cfg_node *schema) {
  root = sound(root, schema);
  cfg_link_parents(root);
  return root;
}
