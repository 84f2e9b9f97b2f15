/* check_inputs.c — the inputs' headers and tags against the workflow (see
 * check_inputs.h).
 *
 * The rules mirror what ingest does with the same keys, so that what passes
 * here is what ingest reads, and what is refused here would have failed (or
 * read nothing) there:
 *   - CSV/TSV columns: the SMILES and name columns are found as the reader
 *     finds them (rec_pick_columns: letter case ignored); a `labels:` name
 *     must be a column exactly (ingest compares with strcmp);
 *   - labels_csv: read as CSV whatever its extension, `join` and `columns`
 *     compared exactly; without `columns` every column but the join column
 *     is a label (all of them with join: record);
 *   - SD tags: as Open Babel names them (chem/records.h, rec_sdf_tags),
 *     compared exactly (mol_tag).
 * An input's format is found as ingest finds it: `format:`, else the file
 * name, overridden by what the first bytes clearly show.
 */
#define _GNU_SOURCE
#include "check_inputs.h"

#include <glob.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chem/records.h"
#include "common/suggest.h"
#include "stage.h"

/* How far into an SD file its tags are looked for. */
#define TAG_RECORDS 50
#define TAG_BYTES ((size_t)4 << 20)
/* Files of one glob pattern looked at (a pattern may match thousands). */
#define MAX_GLOB_FILES 64
/* Names listed in a message before "... (N in all)". */
#define MAX_SHOWN 12

struct ck {
  void (*problem)(void *arg, const char *msg);
  void (*warning)(void *arg, const char *msg); /* NULL: warnings are not wanted */
  void *arg;
  int n;
  int read_files; /* 0: check_inputs_unread, which opens no file */
};

/* A list of distinct names. */
struct names {
  char **v;
  int n, cap;
  int unknown; /* some label names could not be read (a labels_csv that cannot be opened) */
};

static void names_add(struct names *s, const char *x) {
  if (!x) return;
  for (int i = 0; i < s->n; i++)
    if (!strcmp(s->v[i], x)) return;
  if (s->n == s->cap) {
    int cap = s->cap ? 2 * s->cap : 16;
    char **v = realloc(s->v, (size_t)cap * sizeof *v);
    if (!v) return;
    s->v = v;
    s->cap = cap;
  }
  char *d = strdup(x);
  if (d) s->v[s->n++] = d;
}

static int names_has(const struct names *s, const char *x) {
  for (int i = 0; i < s->n; i++)
    if (!strcmp(s->v[i], x)) return 1;
  return 0;
}

static void names_free(struct names *s) {
  rec_free_names(s->v, s->n);
  memset(s, 0, sizeof *s);
}

static int has_name(char *const *v, int n, const char *x) {
  for (int i = 0; i < n; i++)
    if (!strcmp(v[i], x)) return 1;
  return 0;
}

/* Whether x names two columns of v: 1 with the first two (1-based) in *a
 * and *b. */
static int named_twice(char *const *v, int n, const char *x, int *a, int *b) {
  *a = *b = 0;
  for (int i = 0; x && i < n; i++)
    if (!strcmp(v[i], x)) {
      if (*a) {
        *b = i + 1;
        return 1;
      }
      *a = i + 1;
    }
  return 0;
}

/* Reports one problem at node `at` (its position when the workflow wrote
 * it), under the key path `key`. */
/* The line of a problem or a warning (what says "warning: " before the
 * text) at node `at`: "file:line:col: key: text". */
static void at_line(char *msg, size_t n, const struct cfg_node *at, const char *key, const char *what,
                    const char *fmt, va_list ap) {
  char text[3072];
  vsnprintf(text, sizeof text, fmt, ap);
  /* "<default>" (filled in) and "<--set>" nodes have no place in a file */
  if (at && at->file && at->file[0] != '<')
    snprintf(msg, n, "%s:%d:%d: %s: %s%s", at->file, at->line, at->col, key, what, text);
  else
    snprintf(msg, n, "%s: %s%s", key, what, text);
}

static void report(struct ck *ck, const struct cfg_node *at, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void report(struct ck *ck, const struct cfg_node *at, const char *key, const char *fmt, ...) {
  char msg[4096];
  va_list ap;
  va_start(ap, fmt);
  at_line(msg, sizeof msg, at, key, "", fmt, ap);
  va_end(ap);
  ck->problem(ck->arg, msg);
  ck->n++;
}

/* A column the workflow uses, named twice in the header of file: which one
 * is meant cannot be told (a reader would take one of them silently). */
static void check_once(struct ck *ck, const struct cfg_node *at, const char *key, const char *file, char *const *cols,
                       int n, const char *name) {
  int a, b;
  if (named_twice(cols, n, name, &a, &b))
    report(ck, at, key,
           "column '%s' is named twice in the header of %s (columns %d and %d): which one is meant "
           "cannot be told; rename one",
           name, file, a, b);
}

/* Says something worth knowing at node `at` that is no problem, to
 * ck->warning: report's line with "warning: " before the text. */
static void warn(struct ck *ck, const struct cfg_node *at, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void warn(struct ck *ck, const struct cfg_node *at, const char *key, const char *fmt, ...) {
  if (!ck->warning) return;
  char msg[4096];
  va_list ap;
  va_start(ap, fmt);
  at_line(msg, sizeof msg, at, key, "warning: ", fmt, ap);
  va_end(ap);
  ck->warning(ck->arg, msg);
}

/* "; did you mean 'x'?" or "", for word among names. */
static const char *did_you_mean(char *buf, size_t size, const char *word, char *const *names, int n) {
  const char *s = se3_suggest(word, (const char *const *)names, n);
  if (s)
    snprintf(buf, size, "; did you mean '%s'?", s);
  else
    buf[0] = 0;
  return buf;
}

static const char *listed(char *buf, size_t size, char *const *names, int n) {
  return se3_list_names(buf, size, (const char *const *)names, n, MAX_SHOWN);
}

static int stage_will_run(const char *list, const char *name) {
  if (!list) return 0;
  size_t nl = strlen(name);
  for (const char *p = list; *p;) {
    while (*p == ' ')
      p++;
    const char *e = p;
    while (*e && *e != ' ')
      e++;
    if ((e - p == 1 && *p == '*') || ((size_t)(e - p) == nl && !strncmp(p, name, nl))) return 1;
    p = e;
  }
  return 0;
}

/* The value at key of mapping m; NULL when absent, or a stand-in for one
 * the loader refused (cfg_invalid): what depends on it is not checked. */
static const struct cfg_node *kid(const struct cfg_node *m, const char *key) {
  for (int i = 0; m && m->kind == CFG_MAP && i < m->n_kids; i++)
    if (m->kids[i]->key && !strcmp(m->kids[i]->key, key)) return cfg_invalid(m->kids[i]) ? NULL : m->kids[i];
  return NULL;
}

/* Whether the loader refused a value at key of m (a stand-in there). */
static int refused(const struct cfg_node *m, const char *key) { return cfg_invalid(cfg_get(m, key)); }

static int readable(const char *path) { return path && access(path, R_OK) == 0 && rec_check_regular(path, NULL) == 0; }

/* The format ingest would read path in; MOL_FMT_UNKNOWN when it could not tell. */
static enum mol_format format_of(const char *path, const struct cfg_node *item) {
  const char *name = cfg_str(item, "format");
  int explicit_fmt = strcmp(name, "auto") != 0;
  enum mol_format f = explicit_fmt ? rec_format_from_name(name) : rec_format_from_path(path);
  if (explicit_fmt) return f;
  enum mol_format seen = MOL_FMT_UNKNOWN;
  int nonblank = 0;
  if (rec_sniff_file(path, f, &seen, &nonblank, NULL) == 0 && seen != MOL_FMT_UNKNOWN) f = seen;
  return f;
}

/* ---- one input file ---------------------------------------------------- */

static void check_csv_input(struct ck *ck, const char *file, enum mol_format fmt, const struct cfg_node *item,
                            const char *key) {
  char **cols = NULL, k[512], list[1024], dym[300];
  int n = 0;
  if (rec_read_header(file, fmt, &cols, &n, NULL) != 0) return; /* ingest names what is wrong */
  const struct cfg_node *sc = kid(item, "smiles_column"), *nc = kid(item, "name_column");
  const char *scv = sc && sc->kind == CFG_SCALAR ? sc->value : NULL,
             *ncv = nc && nc->kind == CFG_SCALAR ? nc->value : NULL;
  int s_col, n_col;
  rec_pick_columns((const char *const *)cols, n, scv, ncv, &s_col, &n_col);
  if (s_col < 0 && scv) {
    snprintf(k, sizeof k, "%s.smiles_column", key);
    report(ck, sc, k, "no column '%s' in %s (columns: %s)%s", scv, file, listed(list, sizeof list, cols, n),
           did_you_mean(dym, sizeof dym, scv, cols, n));
  }
  /* A file with none of the default SMILES column names is bad input, not a
   * mistake in the workflow: ingest makes it a reject row and goes on with
   * the other files (and fails the run if it gave no molecule at all). */
  if (n_col < 0 && ncv) {
    snprintf(k, sizeof k, "%s.name_column", key);
    report(ck, nc, k, "no column '%s' in %s (columns: %s)%s", ncv, file, listed(list, sizeof list, cols, n),
           did_you_mean(dym, sizeof dym, ncv, cols, n));
  }
  /* a column used is named once (`smiles,logS,logS` trained on the last) */
  snprintf(k, sizeof k, "%s.%s", key, sc ? "smiles_column" : "path");
  if (s_col >= 0) check_once(ck, sc ? sc : kid(item, "path"), k, file, cols, n, cols[s_col]);
  snprintf(k, sizeof k, "%s.%s", key, nc ? "name_column" : "path");
  if (n_col >= 0) check_once(ck, nc ? nc : kid(item, "path"), k, file, cols, n, cols[n_col]);
  const struct cfg_node *labels = kid(item, "labels");
  for (int i = 0; labels && labels->kind == CFG_LIST && i < labels->n_kids; i++) {
    const struct cfg_node *l = labels->kids[i];
    if (l->kind == CFG_SCALAR) {
      snprintf(k, sizeof k, "%s.labels.%d", key, i);
      check_once(ck, l, k, file, cols, n, l->value);
    }
    if (l->kind != CFG_SCALAR || has_name(cols, n, l->value)) continue;
    snprintf(k, sizeof k, "%s.labels.%d", key, i);
    report(ck, l, k, "no column '%s' in %s (columns: %s)%s", l->value, file, listed(list, sizeof list, cols, n),
           did_you_mean(dym, sizeof dym, l->value, cols, n));
  }
  rec_free_names(cols, n);
}

static void check_sdf_input(struct ck *ck, const char *file, const struct cfg_node *item, const char *key) {
  const struct cfg_node *labels = kid(item, "labels");
  if (!labels || labels->kind != CFG_LIST || labels->n_kids == 0) return;
  char **tags = NULL, k[512], list[1024], dym[300];
  int n = 0;
  int64_t n_rec = 0;
  if (rec_sdf_tags(file, TAG_RECORDS, TAG_BYTES, &tags, &n, &n_rec, NULL) != 0) return;
  for (int i = 0; n_rec > 0 && i < labels->n_kids; i++) {
    const struct cfg_node *l = labels->kids[i];
    if (l->kind != CFG_SCALAR || has_name(tags, n, l->value)) continue;
    snprintf(k, sizeof k, "%s.labels.%d", key, i);
    if (n)
      report(ck, l, k, "no SD tag '%s' in the first %lld record%s of %s (tags there: %s)%s", l->value, (long long)n_rec,
             n_rec == 1 ? "" : "s", file, listed(list, sizeof list, tags, n),
             did_you_mean(dym, sizeof dym, l->value, tags, n));
    else
      report(ck, l, k, "no SD tag '%s' in the first %lld record%s of %s: they have no SD tags at all", l->value,
             (long long)n_rec, n_rec == 1 ? "" : "s", file);
  }
  rec_free_names(tags, n);
}

static void check_other_input(struct ck *ck, const char *file, enum mol_format fmt, const struct cfg_node *item,
                              const char *key) {
  char k[512];
  static const char *const col_keys[] = {"smiles_column", "name_column"};
  for (int c = 0; c < 2; c++) {
    const struct cfg_node *n = kid(item, col_keys[c]);
    if (!n) continue;
    snprintf(k, sizeof k, "%s.%s", key, col_keys[c]);
    report(ck, n, k, "%s is read as %s, which has no columns: %s applies to CSV and TSV inputs", file,
           rec_format_name(fmt), col_keys[c]);
  }
  const struct cfg_node *labels = kid(item, "labels");
  if (fmt == MOL_FMT_SMI && labels && labels->kind == CFG_LIST && labels->n_kids > 0) {
    snprintf(k, sizeof k, "%s.labels", key);
    report(ck, labels, k,
           "%s is a SMILES file: it has no columns or SD tags to read labels from (a CSV with a SMILES column "
           "has; or give them in labels_csv)",
           file);
  }
}

static void check_input_file(struct ck *ck, const char *file, const struct cfg_node *item, const char *key) {
  if (!readable(file)) return;         /* the loader reports a missing input */
  if (refused(item, "format")) return; /* and a format it does not know */
  enum mol_format fmt = format_of(file, item);
  if (fmt == MOL_FMT_CSV || fmt == MOL_FMT_TSV)
    check_csv_input(ck, file, fmt, item, key);
  else if (fmt == MOL_FMT_SDF)
    check_sdf_input(ck, file, item, key);
  else if (fmt != MOL_FMT_UNKNOWN)
    check_other_input(ck, file, fmt, item, key);
}

/* labels_csv of an input: its join column and columns; the labels it gives
 * are added to set_labels (unknown when the file cannot be read). */
static void check_side_csv(struct ck *ck, const struct cfg_node *side, const char *key, int report_problems,
                           struct names *set_labels) {
  const char *file = cfg_str(side, "path");
  const struct cfg_node *cols_node = kid(side, "columns"), *join_node = kid(side, "join");
  const char *join = cfg_str(side, "join");
  char **cols = NULL, k[512], list[1024], dym[300];
  int n = 0;
  /* (a path, join or columns the loader refused: what the file gives is not known either) */
  if (!ck->read_files || refused(side, "path") || refused(side, "join") || refused(side, "columns") ||
      !readable(file) || rec_read_header(file, MOL_FMT_CSV, &cols, &n, NULL) != 0) {
    /* what it gives cannot be known: named columns are labels all the same */
    for (int i = 0; cols_node && cols_node->kind == CFG_LIST && i < cols_node->n_kids; i++)
      names_add(set_labels, cols_node->kids[i]->value);
    if (!cols_node || refused(side, "join") || refused(side, "columns")) set_labels->unknown = 1;
    return;
  }
  int join_ok = !strcmp(join, "record") || has_name(cols, n, join);
  if (join_ok && report_problems && strcmp(join, "record")) {
    snprintf(k, sizeof k, "%s.labels_csv.join", key);
    check_once(ck, join_node ? join_node : side, k, file, cols, n, join);
  }
  if (!join_ok && report_problems) {
    snprintf(k, sizeof k, "%s.labels_csv.join", key);
    report(ck, join_node, k, "no column '%s' in %s (columns: %s)%s", join, file, listed(list, sizeof list, cols, n),
           did_you_mean(dym, sizeof dym, join, cols, n));
  }
  if (cols_node && cols_node->kind == CFG_LIST) {
    for (int i = 0; i < cols_node->n_kids; i++) {
      const struct cfg_node *c = cols_node->kids[i];
      if (c->kind != CFG_SCALAR) continue;
      names_add(set_labels, c->value);
      snprintf(k, sizeof k, "%s.labels_csv.columns.%d", key, i);
      if (report_problems) check_once(ck, c, k, file, cols, n, c->value);
      if (has_name(cols, n, c->value) || !report_problems) continue;
      report(ck, c, k, "no column '%s' in %s (columns: %s)%s", c->value, file, listed(list, sizeof list, cols, n),
             did_you_mean(dym, sizeof dym, c->value, cols, n));
    }
  } else {
    for (int i = 0; i < n; i++)
      if (strcmp(join, "record") == 0 || strcmp(cols[i], join) != 0) {
        names_add(set_labels, cols[i]);
        /* every column a label: each named once (said at its first place) */
        int a, b;
        snprintf(k, sizeof k, "%s.labels_csv.path", key);
        if (report_problems && named_twice(cols, n, cols[i], &a, &b) && a == i + 1)
          check_once(ck, kid(side, "path") ? kid(side, "path") : side, k, file, cols, n, cols[i]);
      }
  }
  rec_free_names(cols, n);
}

/* Every input of a set: the files checked (when ingest runs) and the set's
 * label names gathered into labels (when not NULL). */
static void check_set(struct ck *ck, const struct cfg_node *set, int ingest, struct names *labels) {
  char key[400];
  for (int i = 0; set && set->kind == CFG_LIST && i < set->n_kids; i++) {
    const struct cfg_node *item = set->kids[i];
    snprintf(key, sizeof key, "sets.%s.%d", set->key ? set->key : "?", i);
    /* an item, its labels or its labels_csv that the loader refused: the
     * set's labels are not all known (a target is not held against them) */
    if (labels && (cfg_invalid(item) || refused(item, "labels") || refused(item, "labels_csv"))) labels->unknown = 1;
    if (cfg_invalid(item)) continue;
    const struct cfg_node *L = kid(item, "labels");
    if (labels && L && L->kind == CFG_MAP)
      for (int k = 0; k < L->n_kids; k++)
        names_add(labels, L->kids[k]->key);
    if (labels && L && L->kind == CFG_LIST)
      for (int k = 0; k < L->n_kids; k++)
        names_add(labels, L->kids[k]->value);
    const struct cfg_node *side = kid(item, "labels_csv");
    if (side && side->kind == CFG_MAP) {
      struct names ignored = {0};
      check_side_csv(ck, side, key, ingest, labels ? labels : &ignored);
      names_free(&ignored);
    }
    if (!ingest) continue;
    const char *path = kid(item, "path") ? cfg_str_opt(item, "path") : NULL;
    if (!path) continue;
    if (strpbrk(path, "*?[")) {
      glob_t gl;
      if (glob(path, 0, NULL, &gl) != 0) continue; /* no match: the loader says so */
      for (size_t g = 0; g < gl.gl_pathc && g < MAX_GLOB_FILES; g++)
        check_input_file(ck, gl.gl_pathv[g], item, key);
      globfree(&gl);
    } else {
      check_input_file(ck, path, item, key);
    }
  }
}

/* ---- one file, listed once ------------------------------------------- */

/* A molecule file of a set as ingest reads it (a pattern's matches each). */
struct listed {
  dev_t dev;
  ino_t ino;
  int set, item;             /* its set's place in `sets`, its item's in the set */
  const struct cfg_node *at; /* the item's path */
  char *name;
};

static int cmp_listed(const void *a, const void *b) {
  const struct listed *x = a, *y = b;
  if (x->dev != y->dev) return x->dev < y->dev ? -1 : 1;
  if (x->ino != y->ino) return x->ino < y->ino ? -1 : 1;
  if (x->set != y->set) return x->set < y->set ? -1 : 1;
  if (x->item != y->item) return x->item < y->item ? -1 : 1;
  return strcmp(x->name, y->name);
}

static void listed_add(struct listed **v, int *n, int *cap, const char *name, int set, int item,
                       const struct cfg_node *at) {
  struct stat sb;
  if (stat(name, &sb) != 0) return; /* (the loader says so) */
  if (*n == *cap) {
    int c = *cap ? 2 * *cap : 32;
    struct listed *w = realloc(*v, (size_t)c * sizeof *w);
    if (!w) return;
    *v = w;
    *cap = c;
  }
  char *d = strdup(name);
  if (d) (*v)[(*n)++] = (struct listed){sb.st_dev, sb.st_ino, set, item, at, d};
}

/* "FILE:LINE:COL" of a node, or where it came from. */
static const char *where(char *buf, size_t size, const struct cfg_node *at) {
  if (at && at->file && at->file[0] != '<')
    snprintf(buf, size, "%s:%d:%d", at->file, at->line, at->col);
  else
    snprintf(buf, size, "%s", at && at->file ? at->file : "?");
  return buf;
}

/* The molecule files of every set, by device and inode (whatever the path
 * that names them: another spelling, a symbolic or a hard link, a
 * pattern's match). A file twice in one set is a problem, named at both
 * entries: ingest would store its molecules twice, and a split could put
 * copies of test molecules in train. A file in two sets is a warning: a
 * library that holds the training set is a choice (scoring what was
 * learnt), but one worth saying. */
static void check_listed_once(struct ck *ck, const struct cfg_node *sets) {
  struct listed *v = NULL;
  int n = 0, cap = 0;
  for (int s = 0; sets && sets->kind == CFG_MAP && s < sets->n_kids; s++) {
    const struct cfg_node *set = sets->kids[s];
    for (int i = 0; set->kind == CFG_LIST && i < set->n_kids; i++) {
      const struct cfg_node *at = kid(set->kids[i], "path");
      const char *path = at && at->kind == CFG_SCALAR ? at->value : NULL;
      if (!path) continue;
      if (!strpbrk(path, "*?[")) {
        listed_add(&v, &n, &cap, path, s, i, at);
        continue;
      }
      glob_t gl;
      if (glob(path, 0, NULL, &gl) != 0) continue;
      for (size_t g = 0; g < gl.gl_pathc; g++)
        listed_add(&v, &n, &cap, gl.gl_pathv[g], s, i, at);
      globfree(&gl);
    }
  }
  if (n > 1) qsort(v, (size_t)n, sizeof *v, cmp_listed);
  char key[400], loc[1200];
  for (int a = 0, b; a < n; a = b) {
    for (b = a + 1; b < n && v[b].dev == v[a].dev && v[b].ino == v[a].ino; b++) {}
    for (int j = a + 1; j < b; j++) {
      const struct listed *x = &v[j], *first = &v[a];
      const char *set = sets->kids[x->set]->key;
      snprintf(key, sizeof key, "sets.%s.%d.path", set, x->item);
      int same = -1; /* an entry before it in its own set */
      for (int i = a; i < j && same < 0; i++)
        if (v[i].set == x->set) same = i;
      if (same >= 0 && v[same].item == x->item) {
        report(ck, x->at, key, "the pattern matches %s and %s, one file (a link to it, or another name): its "
                               "molecules would be stored twice, and a split could put copies of test molecules "
                               "in train; make the pattern match it once",
               v[same].name, x->name);
      } else if (same >= 0) {
        const struct listed *y = &v[same];
        if (!strcmp(x->name, y->name))
          report(ck, x->at, key,
                 "%s is listed twice in set '%s': here and at sets.%s.%d.path (%s); its molecules would be stored "
                 "twice, and a split could put copies of test molecules in train: list it once",
                 x->name, set, set, y->item, where(loc, sizeof loc, y->at));
        else
          report(ck, x->at, key,
                 "%s is the file %s of sets.%s.%d.path (%s) under another name (a symbolic or hard link, or another "
                 "spelling): listed twice in set '%s', its molecules would be stored twice, and a split could put "
                 "copies of test molecules in train: list it once",
                 x->name, y->name, set, y->item, where(loc, sizeof loc, y->at), set);
      } else if (first->set != x->set) {
        warn(ck, x->at, key,
             "%s is also in set '%s' (sets.%s.%d.path, %s%s%s): its molecules are stored in both sets, and a model "
             "trained on one that scores the other scores molecules it learnt",
             x->name, sets->kids[first->set]->key, sets->kids[first->set]->key, first->item,
             where(loc, sizeof loc, first->at), strcmp(x->name, first->name) ? ", as " : "",
             strcmp(x->name, first->name) ? first->name : "");
      }
    }
  }
  for (int i = 0; i < n; i++)
    free(v[i].name);
  free(v);
}

static const struct cfg_node *find_set(const struct cfg_node *sets, const char *name) {
  for (int i = 0; sets && sets->kind == CFG_MAP && i < sets->n_kids; i++)
    if (sets->kids[i]->key && !strcmp(sets->kids[i]->key, name)) return sets->kids[i];
  return NULL;
}

/* A value that must name a label of the training set. */
static void check_label_name(struct ck *ck, const struct cfg_node *at, const char *key, const char *set,
                             const struct names *labels) {
  if (!at || at->kind != CFG_SCALAR || labels->unknown || names_has(labels, at->value)) return;
  char list[1024], dym[300];
  report(ck, at, key, "'%s' is no label of set '%s' (its labels: %s)%s", at->value, set,
         listed(list, sizeof list, labels->v, labels->n),
         did_you_mean(dym, sizeof dym, at->value, labels->v, labels->n));
}

/* A key naming set `name` that `sets` lacks: the sets there are, and the
 * nearest (`what` words the message after the set's name). */
static void report_no_set(struct ck *ck, const struct cfg_node *sets, const struct cfg_node *at, const char *key,
                          const char *name, const char *what) {
  int n = 0;
  char **keys = calloc((size_t)(sets ? sets->n_kids : 0) + 1, sizeof *keys);
  for (int s = 0; keys && sets && s < sets->n_kids; s++)
    if (sets->kids[s]->key) keys[n++] = sets->kids[s]->key;
  char list[1024], dym[300];
  report(ck, at, key, "no set '%s' in `sets`%s (sets: %s)%s", name, what, listed(list, sizeof list, keys, n),
         did_you_mean(dym, sizeof dym, name, keys, n));
  free(keys);
}

/* The files the dock stage reads (stages.dock.receptor and box_ligand with
 * Vina, stages.dock.table with oracle: table) must be regular files: a
 * FIFO would hold the run's open, a device never end. stat only: nothing
 * is opened here, so nothing can block. A file missing or a folder the
 * loader reports. */
static void check_dock_files(struct ck *ck, const struct cfg_node *root) {
  static const char *const vina[] = {"stages.dock.receptor", "stages.dock.box_ligand", NULL};
  static const char *const table[] = {"stages.dock.table", NULL};
  const char *const *keys = !strcmp(cfg_str(root, "stages.dock.oracle"), "table") ? table : vina;
  for (int i = 0; keys[i]; i++) {
    const struct cfg_node *n = cfg_get(root, keys[i]);
    struct stat sb;
    if (!n || cfg_invalid(n) || n->kind != CFG_SCALAR || !n->value || stat(n->value, &sb) != 0 || S_ISREG(sb.st_mode) ||
        S_ISDIR(sb.st_mode))
      continue;
    report(ck, n, keys[i], "%s: not a regular file (%s); docking reads regular files", n->value,
           rec_file_kind(sb.st_mode));
  }
  /* the table's key and score columns, each named once */
  const struct cfg_node *t = cfg_get(root, "stages.dock.table");
  char **cols = NULL;
  int nc = 0;
  if (keys == table && ck->read_files && t && !cfg_invalid(t) && t->kind == CFG_SCALAR && t->value &&
      readable(t->value) && rec_read_header(t->value, MOL_FMT_CSV, &cols, &nc, NULL) == 0) {
    const char *key_col = cfg_str_opt(root, "stages.dock.key_column");
    if (!key_col) key_col = cfg_str(root, "stages.dock.table_key");
    const struct cfg_node *kn = cfg_get(root, "stages.dock.key_column"),
                          *sn = cfg_get(root, "stages.dock.score_column");
    if (!cfg_invalid(kn) && !refused(root, "stages.dock.table_key"))
      check_once(ck, cfg_written(kn) ? kn : t, cfg_written(kn) ? "stages.dock.key_column" : "stages.dock.table",
                 t->value, cols, nc, key_col);
    if (!cfg_invalid(sn))
      check_once(ck, cfg_written(sn) ? sn : t, cfg_written(sn) ? "stages.dock.score_column" : "stages.dock.table",
                 t->value, cols, nc, cfg_str(root, "stages.dock.score_column"));
    rec_free_names(cols, nc);
  }
}

static int check(const struct cfg_node *root, const char *stages_that_run, int read_files,
                 void (*problem)(void *arg, const char *msg), void (*warning)(void *arg, const char *msg), void *arg) {
  struct ck ck = {problem, warning, arg, 0, read_files};
  const struct cfg_node *sets = cfg_get(root, "sets");
  /* the inputs themselves are ingest's: without reading files, only the
   * rules between keys are left */
  int ingest = read_files && stage_will_run(stages_that_run, "ingest");
  int train = stage_will_run(stages_that_run, "train");
  /* rank.target is checked only when score runs too: then the scores ranked
   * are this workflow's model's. `run --stage rank` alone may rank scores
   * that the database holds of another target (a score-only run's, or an
   * earlier model's), which only the database knows. */
  int rank = stage_will_run(stages_that_run, "rank") && stage_will_run(stages_that_run, "score");

  /* A value the loader refused (a stand-in: cfg_invalid) is not checked,
   * nor is what depends on it: `sets` refused, no set is missing from it;
   * the training set's name refused, nothing is held against its labels;
   * the target refused, it is not looked for among them. */
  int sets_ok = !cfg_invalid(sets);
  const struct cfg_node *target = cfg_get(root, "stages.train.target");
  if (cfg_invalid(target)) target = NULL;
  const char *train_set = cfg_str(root, "stages.train.set");
  int train_set_ok = !refused(root, "stages.train.set") && sets_ok;
  const struct cfg_node *tset = train_set_ok ? find_set(sets, train_set) : NULL;
  /* The training set's labels are needed when train or rank is checked. */
  int need_labels = (train || rank) && target && target->kind == CFG_SCALAR && tset;
  struct names labels = {0};

  for (int s = 0; sets && sets->kind == CFG_MAP && s < sets->n_kids; s++) {
    const struct cfg_node *set = sets->kids[s];
    int is_train = need_labels && set == tset;
    if (is_train && cfg_invalid(set)) labels.unknown = 1;
    if (ingest || is_train) check_set(&ck, set, ingest, is_train ? &labels : NULL);
  }
  if (ingest) check_listed_once(&ck, sets);

  if (train && target && target->kind == CFG_SCALAR && train_set_ok && !refused(root, "stages.dock.label")) {
    if (strlen(target->value) > 255) {
      /* the checkpoint records it, and a model's reader takes 255 bytes */
      report(&ck, target, "stages.train.target", "a name of %zu bytes: at most 255 are allowed",
             strlen(target->value));
    } else if (!tset) {
      report_no_set(&ck, sets, cfg_get(root, "stages.train.set"), "stages.train.set", train_set, "");
    } else if (stage_dock_label(root) && !strcmp(stage_dock_label(root), target->value)) {
      /* the docking score: of the set docked */
      const char *dock_set = cfg_str(root, "stages.dock.set");
      if (strcmp(dock_set, train_set))
        report(&ck, target, "stages.train.target",
               "'%s' is the docking score (stages.dock.label) of set '%s' (stages.dock.set), and train learns set "
               "'%s' (stages.train.set): dock the set train learns",
               target->value, dock_set, train_set);
    } else {
      check_label_name(&ck, target, "stages.train.target", train_set, &labels);
      if (!strcmp(cfg_str(root, "stages.train.split.method"), "column") && !refused(root, "stages.train.split.column"))
        check_label_name(&ck, cfg_get(root, "stages.train.split.column"), "stages.train.split.column", train_set,
                         &labels);
    }
  }

  /* Active learning's rules between keys, before any work: a round 1 that
   * could not be decided would otherwise fail after round 0's docking. */
  if (stage_will_run(stages_that_run, "acquire") && stage_acquiring(root) && !refused(root, "stages.acquire") &&
      !refused(root, "stages.acquire.set") && !refused(root, "stages.dock") && !refused(root, "stages.dock.label")) {
    const char *acq_set = cfg_str(root, "stages.acquire.set");
    const struct cfg_node *at = cfg_get(root, "stages.acquire");
    if (!stage_dock_label(root)) {
      report(&ck, at, "stages.acquire",
             "active learning labels the molecules it acquires by docking them: the workflow needs stages.dock "
             "(Vina, or oracle: table)");
    } else {
      const char *dock_set = cfg_str(root, "stages.dock.set");
      if (strcmp(dock_set, acq_set) && !refused(root, "stages.dock.set"))
        report(&ck, cfg_get(root, "stages.acquire.set") ? cfg_get(root, "stages.acquire.set") : at, "stages.acquire.set",
               "'%s' is not the set dock docks ('%s', stages.dock.set)", acq_set, dock_set);
      const struct cfg_node *tt = cfg_get(root, "stages.train.target");
      if (!cfg_invalid(tt) && !refused(root, "stages.train") && !refused(root, "stages.train.set") &&
          (!cfg_written(cfg_get(root, "stages.train")) || !tt || tt->kind != CFG_SCALAR ||
           strcmp(tt->value, stage_dock_label(root)) || strcmp(cfg_str(root, "stages.train.set"), acq_set)))
        report(&ck, tt ? tt : at, "stages.train.target",
               "active learning trains on the docking scores of the set it acquires from: stages.train needs "
               "`set: %s` and `target: %s`",
               acq_set, stage_dock_label(root));
      if (strcmp(cfg_str(root, "stages.score.set"), acq_set) && !refused(root, "stages.score.set"))
        report(&ck, cfg_get(root, "stages.score.set") ? cfg_get(root, "stages.score.set") : at, "stages.score.set",
               "active learning acquires from the scores of set '%s' (stages.acquire.set): score it", acq_set);
    }
    const char *rule = cfg_str(root, "stages.acquire.rule");
    if ((!strcmp(rule, "ucb") || !strcmp(rule, "thompson")) && cfg_int(root, "stages.train.ensemble") < 2 &&
        !refused(root, "stages.acquire.rule") && !refused(root, "stages.train.ensemble"))
      report(&ck, cfg_get(root, "stages.acquire.rule"), "stages.acquire.rule",
             "%s needs an ensemble's predictions: stages.train.ensemble 2 or more", rule);
  }

  /* The set dock docks must be in `sets`; its files (the receptor and the
   * box's ligand, or the table of scores) regular files. */
  if (stage_will_run(stages_that_run, "dock") && stage_dock_label(root)) {
    const char *dock_set = cfg_str(root, "stages.dock.set");
    if (!find_set(sets, dock_set) && sets_ok && !refused(root, "stages.dock.set"))
      report_no_set(&ck, sets, cfg_get(root, "stages.dock.set"), "stages.dock.set", dock_set, " to dock");
    if (read_files && !refused(root, "stages.dock.oracle")) check_dock_files(&ck, root);
  }

  /* The set score reads must be in `sets`: a workflow that trains and names
   * rank (say for its order) but has no library failed only after training.
   * `check` is given "*" (every stage), so there score counts as running when
   * the workflow names it or rank, as `run` would go that far (naming report
   * makes no other stage run: a training-only workflow may end with it; a
   * dock-only workflow's rank reads dock's results). */
  int score = stage_will_run(stages_that_run, "score") && !stage_dock_only(root) &&
              (strcmp(stages_that_run, "*") != 0 || cfg_written(cfg_get(root, "stages.score")) ||
               cfg_written(cfg_get(root, "stages.rank")));
  const char *score_set = cfg_str(root, "stages.score.set");
  if (score && sets_ok && !refused(root, "stages.score.set") && !find_set(sets, score_set)) {
    int n = 0;
    char **keys = calloc((size_t)(sets ? sets->n_kids : 0) + 1, sizeof *keys);
    for (int s = 0; keys && sets && s < sets->n_kids; s++)
      if (sets->kids[s]->key) keys[n++] = sets->kids[s]->key;
    char list[1024], dym[300];
    report(&ck, cfg_get(root, "stages.score.set"), "stages.score.set",
           "no set '%s' in `sets` to score (sets: %s)%s; add it, or leave score and rank out of this "
           "workflow and score a library later with `se3screen predict WORKDIR FILE` (with --set rank.order=... "
           "for the order)",
           score_set, listed(list, sizeof list, keys, n), did_you_mean(dym, sizeof dym, score_set, keys, n));
    free(keys);
  }

  const struct cfg_node *rt = cfg_get(root, "stages.rank.target");
  /* A score-only workflow ranks by the target of the model it names. */
  int score_only = stage_score_only(root);
  if (rank && cfg_written(rt) && !cfg_invalid(rt) && rt->kind == CFG_SCALAR && !score_only && tset && target &&
      target->kind == CFG_SCALAR && strcmp(rt->value, target->value) != 0 && !labels.unknown &&
      !names_has(&labels, rt->value)) {
    /* the model's target first among the names suggested */
    struct names cands = {0};
    names_add(&cands, target->value);
    for (int i = 0; i < labels.n; i++)
      names_add(&cands, labels.v[i]);
    char list[1024], dym[300];
    report(&ck, rt, "stages.rank.target",
           "'%s' is neither what the model learns ('%s', stages.train.target) nor a label of set '%s' (its labels: "
           "%s)%s",
           rt->value, target->value, train_set, listed(list, sizeof list, labels.v, labels.n),
           did_you_mean(dym, sizeof dym, rt->value, cands.v, cands.n));
    names_free(&cands);
  }
  names_free(&labels);
  return ck.n;
}

int check_inputs(const struct cfg_node *root, const char *stages_that_run, void (*problem)(void *arg, const char *msg),
                 void *arg) {
  return check(root, stages_that_run, 1, problem, NULL, arg);
}

int check_inputs_warn(const struct cfg_node *root, const char *stages_that_run,
                      void (*problem)(void *arg, const char *msg), void (*warning)(void *arg, const char *msg),
                      void *arg) {
  return check(root, stages_that_run, 1, problem, warning, arg);
}

int check_inputs_unread(const struct cfg_node *root, const char *stages_that_run,
                        void (*problem)(void *arg, const char *msg), void *arg) {
  return check(root, stages_that_run, 0, problem, NULL, arg);
}
