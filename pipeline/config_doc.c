/* config_doc.c — the configuration reference (docs/configuration.md,
 * `se3screen keys`) written from the compiled-in schema, configs/defaults.yaml:
 * one table a section, one row a key, with the key's type, default, bounds,
 * whether it changes results and its doc: text. Generated, like
 * docs/schema.md from the database's SQL, so the reference cannot drift from
 * what the loader accepts: tests/integration/test_docs.c compares the file
 * with this output.
 */
#define _GNU_SOURCE
#include "pipeline/config_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REGENERATE "se3screen keys > docs/configuration.md"

/* Text for a Markdown table cell: '|' escaped (GitHub's tables split on it,
 * even inside `code`), line breaks as spaces. */
static void cell(FILE *f, const char *s) {
  for (; s && *s; s++) {
    if (*s == '|')
      fputs("\\|", f);
    else if (*s == '\n' || *s == '\r')
      fputc(' ', f);
    else
      fputc(*s, f);
  }
}

/* A schema value (scalar or flow list) as YAML writes it: 5, [H, C]. */
static void value_text(FILE *f, const struct cfg_node *v) {
  if (v->kind == CFG_SCALAR) {
    cell(f, v->value);
  } else if (v->kind == CFG_LIST) {
    fputc('[', f);
    for (int i = 0; i < v->n_kids; i++) {
      if (i) fputs(", ", f);
      value_text(f, v->kids[i]);
    }
    fputc(']', f);
  } else {
    fputs(v->kind == CFG_MAP ? "{}" : "null", f);
  }
}

static void enum_values(FILE *f, const struct cfg_node *s) {
  const struct cfg_node *vals = cfg_find_kid(s, "values");
  for (int i = 0; vals && vals->kind == CFG_LIST && i < vals->n_kids; i++) {
    fputs(i ? ", `" : "`", f);
    value_text(f, vals->kids[i]);
    fputc('`', f);
  }
}

/* The type cell: what a value of the key looks like. */
static void type_text(FILE *f, const struct cfg_node *s) {
  const char *t = cfg_sch_type(s);
  if (!strcmp(t, "enum")) {
    fputs("one of ", f);
    enum_values(f, s);
    if (cfg_sch_text(s, "min") || cfg_sch_text(s, "max")) fputs(", or a number", f);
  } else if (!strcmp(t, "list")) {
    const struct cfg_node *items = cfg_find_kid(s, "items");
    const char *it = items ? cfg_sch_type(items) : NULL;
    fputs("list", f);
    if (it && !strcmp(it, "enum")) {
      fputs(" of ", f);
      enum_values(f, items);
    } else if (it && !strcmp(it, "object")) {
      fputs(" of mappings (the keys below)", f);
    } else if (it) {
      fprintf(f, " of %s", it);
    }
  } else if (!strcmp(t, "map")) {
    const struct cfg_node *v = cfg_find_kid(s, "values");
    const char *vt = v ? cfg_sch_type(v) : NULL;
    fputs("mapping of names you choose to ", f);
    if (vt && !strcmp(vt, "list"))
      fputs("lists", f);
    else
      fputs(vt ? vt : "values", f);
  } else if (!strcmp(t, "object")) {
    fputs("mapping (the keys below)", f);
  } else if (!strcmp(t, "labels")) {
    fputs("list of names, or mapping name: number", f);
  } else if (!strcmp(t, "path")) {
    const char *input = cfg_sch_text(s, "input");
    fputs("path", f);
    if (input) fputs(" (an input: `check` says when it does not exist)", f);
  } else {
    fputs(t, f);
  }
}

static void bounds_text(FILE *f, const struct cfg_node *s) {
  const char *lo = cfg_sch_text(s, "min"), *hi = cfg_sch_text(s, "max");
  if (lo && hi)
    fprintf(f, "%s to %s", lo, hi);
  else if (lo)
    fprintf(f, "at least %s", lo);
  else if (hi)
    fprintf(f, "at most %s", hi);
}

static int has_fields(const struct cfg_node *s);

/* One row; returns 1 when the key has no doc: text (a schema mistake).
 * Stage hashes cover stages.<stage> and sets (and run.chunk_size): a
 * top-level key is in none, so "yes" would promise a redo that never comes. */
static int row(FILE *f, const char *key, const struct cfg_node *s) {
  fputs("| `", f);
  cell(f, key);
  fputs("` | ", f);
  type_text(f, s);
  fputs(" | ", f);
  const struct cfg_node *d = cfg_find_kid(s, "default");
  if (cfg_sch_flag(s, "required", 0)) {
    fputs("(required)", f);
  } else if (d && d->kind != CFG_NULL) {
    fputc('`', f);
    value_text(f, d);
    fputc('`', f);
  } else {
    fputs("—", f);
  }
  fputs(" | ", f);
  bounds_text(f, s);
  fputs(" | ", f);
  const char *redo = cfg_sch_text(s, "redo"), *hash = cfg_sch_text(s, "hash");
  if (redo) {
    fputs("yes: ", f);
    cell(f, redo);
  } else if (hash && !strcmp(hash, "unless_default")) {
    fputs("yes; at its default it is left out, so work from before the key existed is kept", f);
  } else if (hash && !strcmp(hash, "unless_older") && cfg_sch_text(s, "older")) {
    fprintf(f, "yes; at `%s` it is left out, so work from before the key existed is kept", cfg_sch_text(s, "older"));
  } else if (!cfg_sch_flag(s, "hash", 1)) {
    fputs("no: changing it keeps finished work", f);
  } else {
    fputs(strchr(key, '.') || has_fields(s) ? "yes" : "—", f); /* sets: hashed by the stages reading inputs */
  }
  fputs(" | ", f);
  const char *doc = cfg_sch_text(s, "doc");
  cell(f, doc);
  fputs(" |\n", f);
  return !doc || !*doc;
}

/* The object whose fields a typed entry holds (through lists and maps),
 * with the path suffix that leads to it: sets -> "<name>[]". */
static const struct cfg_node *fields_of(const struct cfg_node *s, char *suffix, size_t size) {
  suffix[0] = 0;
  for (int depth = 0; s && depth < 8; depth++) {
    const char *t = cfg_sch_type(s);
    if (!t) return NULL;
    if (!strcmp(t, "object")) return cfg_find_kid(s, "fields");
    if (!strcmp(t, "list")) {
      snprintf(suffix + strlen(suffix), size - strlen(suffix), "[]");
      s = cfg_find_kid(s, "items");
    } else if (!strcmp(t, "map")) {
      snprintf(suffix + strlen(suffix), size - strlen(suffix), ".<name>");
      s = cfg_find_kid(s, "values");
    } else {
      return NULL;
    }
  }
  return NULL;
}

/* A typed entry's row and, for a container of mappings, a row for each of
 * their keys (recursively): sets, sets.<name>[].path, ... */
static int entry_rows(FILE *f, const char *key, const struct cfg_node *s) {
  int bad = row(f, key, s);
  char suffix[64];
  const struct cfg_node *fields = fields_of(s, suffix, sizeof suffix);
  for (int i = 0; fields && fields->kind == CFG_MAP && i < fields->n_kids; i++) {
    char *sub = NULL;
    if (asprintf(&sub, "%s%s.%s", key, suffix, fields->kids[i]->key) < 0) return bad + 1;
    bad += entry_rows(f, sub, fields->kids[i]);
    free(sub);
  }
  return bad;
}

static void table_head(FILE *f, const char *title) {
  fprintf(f, "\n## %s\n\n", title);
  fputs("| key | type | default | bounds | changes results | meaning |\n", f);
  fputs("|---|---|---|---|---|---|\n", f);
}

static int has_fields(const struct cfg_node *s) {
  char suffix[64];
  return fields_of(s, suffix, sizeof suffix) != NULL;
}

/* A plain section: a table of its typed keys (entries holding mappings of
 * keys, like `sets`, get a table of their own), then its sub-sections, in
 * the schema's order. prefix is "" at the top level. */
static int section(FILE *f, const char *prefix, const struct cfg_node *sec) {
  int bad = 0, head = 0;
  for (int i = 0; i < sec->n_kids; i++) {
    const struct cfg_node *k = sec->kids[i];
    if (!cfg_sch_type(k) || has_fields(k)) continue;
    if (!head++) table_head(f, *prefix ? prefix : "Top-level keys");
    char *key = NULL;
    if (asprintf(&key, "%s%s%s", prefix, *prefix ? "." : "", k->key) < 0) return bad + 1;
    bad += entry_rows(f, key, k);
    free(key);
  }
  for (int i = 0; i < sec->n_kids; i++) {
    const struct cfg_node *k = sec->kids[i];
    if (k->kind != CFG_MAP || (cfg_sch_type(k) && !has_fields(k))) continue;
    char *key = NULL;
    if (asprintf(&key, "%s%s%s", prefix, *prefix ? "." : "", k->key) < 0) return bad + 1;
    if (cfg_sch_type(k)) {
      table_head(f, key);
      bad += entry_rows(f, key, k);
    } else {
      bad += section(f, key, k);
    }
    free(key);
  }
  return bad;
}

int cfg_doc_markdown(FILE *f) {
  struct cfg_errors errs = {0};
  struct ld ld = {.errs = &errs};
  struct cfg_node *schema = cfg_schema_load(&ld);
  if (!schema) {
    for (int i = 0; i < errs.n; i++)
      fprintf(stderr, "%s\n", errs.msgs[i]);
    cfg_errors_free(&errs);
    return -1;
  }
  fputs("# Configuration reference\n\n", f);
  fputs("<!-- Generated from configs/defaults.yaml by `se3screen keys`; do not edit by hand:\n"
        "     change the doc: fields there and run `" REGENERATE "` -->\n\n",
        f);
  fputs("Every key a workflow may set, generated from the schema "
        "([`configs/defaults.yaml`](../configs/defaults.yaml), compiled into the binary) by\n"
        "`se3screen keys`. How a workflow is put together (sets, stages, includes, `--set`) is in\n"
        "[workflows.md](workflows.md); `se3screen check WORKFLOW` prints a workflow with every default\n"
        "filled in.\n\n",
        f);
  fputs(
      "- **key**: the full dotted path; `<name>` is a name you choose (a set's), `[]` an item of a list.\n"
      "- **default**: the value when the workflow leaves the key out; — means absent unless given.\n"
      "- **bounds**: inclusive.\n"
      "- **changes results**: *yes*: the key is part of its stage's configuration hash, and a run\n"
      "  after a change redoes that stage's work and what depends on it (`se3screen status WORKFLOW`\n"
      "  says which stages changed); *no*: changing it keeps finished work; —: a top-level key, in no stage's hash.\n",
      f);
  int bad = section(f, "", schema);
  cfg_node_free(schema);
  cfg_errors_free(&errs);
  if (bad) fprintf(stderr, "se3screen: %d key%s of the schema without a doc: text\n", bad, bad == 1 ? "" : "s");
  return bad ? -1 : 0;
}
