/* config_util.c — the leaf of the configuration loader: dotted key paths,
 * child lookup, file paths, and errors located at file:line:col (or at the
 * --set that made a node). Every other config_*.c file calls these; this
 * file calls none of them, so the loader's calls run one way:
 * config.c -> {parse, validate, schema, doc} -> util, validate -> schema,
 * doc -> {parse, schema}.
 */
#define _GNU_SOURCE
#include "pipeline/config_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- key paths, lookup and file paths ---------------------------------------- */
size_t cfg_path_push(struct path *p, const char *seg) {
  size_t old = p->len, need = old + strlen(seg) + 2;
  if (need > p->cap) {
    size_t cap = need * 2;
    char *s = realloc(p->s, cap);
    if (!s) return old;
    p->s = s;
    p->cap = cap;
  }
  if (old) p->s[p->len++] = '.';
  strcpy(p->s + p->len, seg);
  p->len += strlen(seg);
  return old;
}

size_t cfg_path_push_index(struct path *p, int i) {
  char b[16];
  snprintf(b, sizeof b, "%d", i);
  return cfg_path_push(p, b);
}

void cfg_path_pop(struct path *p, size_t old) {
  p->len = old;
  if (p->s) p->s[old] = 0;
}

const char *cfg_path_str(const struct path *p) { return p->s ? p->s : ""; }

struct cfg_node *cfg_find_kid(const struct cfg_node *n, const char *key) {
  if (!n || n->kind != CFG_MAP || !key) return NULL;
  for (int i = 0; i < n->n_kids; i++)
    if (n->kids[i]->key && strcmp(n->kids[i]->key, key) == 0) return n->kids[i];
  return NULL;
}

int cfg_kid_index(const struct cfg_node *n, const char *key) {
  for (int i = 0; i < n->n_kids; i++)
    if (n->kids[i]->key && strcmp(n->kids[i]->key, key) == 0) return i;
  return -1;
}

void cfg_set_loc(struct cfg_node *n, const char *file, int line, int col) {
  free(n->file);
  n->file = strdup(file);
  n->line = line;
  n->col = col;
  for (int i = 0; i < n->n_kids; i++)
    cfg_set_loc(n->kids[i], file, line, col);
}

/* Remove "." and "x/.." components of an absolute path, in place. */
void cfg_normalize_path(char *s) {
  size_t n = strlen(s), w = 0;
  char *out = malloc(n + 2);
  if (!out) return;
  const char *p = s;
  while (*p) {
    while (*p == '/')
      p++;
    if (!*p) break;
    const char *e = strchr(p, '/');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len == 1 && p[0] == '.') {
    } else if (len == 2 && p[0] == '.' && p[1] == '.') {
      while (w > 0 && out[w - 1] != '/')
        w--;
      if (w > 0) w--;
    } else {
      out[w++] = '/';
      memcpy(out + w, p, len);
      w += len;
    }
    p += len;
  }
  if (w == 0) out[w++] = '/';
  out[w] = 0;
  memcpy(s, out, w + 1);
  free(out);
}

/* Absolute folder of a file name (relative names are from the cwd). */
char *cfg_abs_dir(const struct ld *ld, const char *file) {
  const char *slash = strrchr(file, '/');
  char *dir = NULL;
  int rc;
  if (!slash)
    rc = asprintf(&dir, "%s", ld->cwd);
  else if (file[0] == '/')
    rc = asprintf(&dir, "/%.*s", (int)(slash - file), file);
  else
    rc = asprintf(&dir, "%s/%.*s", ld->cwd, (int)(slash - file), file);
  if (rc < 0) return NULL;
  cfg_normalize_path(dir);
  return dir;
}

/* ---- errors ------------------------------------------------------------------ */

/* Messages are appended with room doubled at powers of two, so that a file
 * with many mistakes is reported in linear time. */
void cfg_add_msg(struct ld *ld, char *msg) {
  ld->n_errs++;
  if (!msg) return;
  if (!ld->errs) {
    free(msg);
    return;
  }
  int n = ld->errs->n;
  if (n == 0 || (n >= 8 && (n & (n - 1)) == 0)) {
    char **m = realloc(ld->errs->msgs, (n ? 2 * (size_t)n : 8) * sizeof *m);
    if (!m) {
      free(msg);
      return;
    }
    ld->errs->msgs = m;
  }
  ld->errs->msgs[ld->errs->n++] = msg;
}

void cfg_verr(struct ld *ld, const char *file, int line, int col, const char *origin, const char *path, const char *fmt,
              va_list ap) {
  char *text = NULL, *msg = NULL;
  if (vasprintf(&text, fmt, ap) < 0) text = NULL;
  const char *p = path && *path ? path : "(root)";
  int rc;
  if (origin)
    rc = asprintf(&msg, "--set %s: %s: %s", origin, p, text ? text : "?");
  else
    rc = asprintf(&msg, "%s:%d:%d: %s: %s", file ? file : "?", line, col, p, text ? text : "?");
  if (rc < 0) msg = NULL;
  free(text);
  cfg_add_msg(ld, msg);
}

void cfg_err_at(struct ld *ld, const char *file, int line, int col, const char *origin, const char *path,
                const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  cfg_verr(ld, file, line, col, origin, path, fmt, ap);
  va_end(ap);
}

int cfg_is_set_node(const struct cfg_node *n) { return n->file && strcmp(n->file, SET_FILE) == 0; }

static const char *origin_of(const struct ld *ld, const struct cfg_node *n) {
  for (int i = ld->n_origins - 1; i >= 0; i--)
    if (ld->origins[i].node == n) return ld->origins[i].text;
  return NULL;
}

void cfg_err_node(struct ld *ld, const struct cfg_node *n, const char *path, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  const char *origin = cfg_is_set_node(n) ? origin_of(ld, n) : NULL;
  cfg_verr(ld, n->file, n->line, n->col, origin, path, fmt, ap);
  va_end(ap);
}

void cfg_register_tree(struct ld *ld, const struct cfg_node *n, const char *text) {
  struct origin *o = realloc(ld->origins, (size_t)(ld->n_origins + 1) * sizeof *o);
  if (!o) return;
  ld->origins = o;
  o[ld->n_origins++] = (struct origin){n, text};
  for (int i = 0; i < n->n_kids; i++)
    cfg_register_tree(ld, n->kids[i], text);
}

/* Before a node is freed, so a later node at the same address is not mistaken for it. */
void cfg_unregister_tree(struct ld *ld, const struct cfg_node *n) {
  for (int i = 0; i < ld->n_origins; i++)
    if (ld->origins[i].node == n) ld->origins[i].node = NULL;
  for (int i = 0; i < n->n_kids; i++)
    cfg_unregister_tree(ld, n->kids[i]);
}

/* How a value looks, for "expected X, got Y". */
void cfg_describe(const struct cfg_node *n, char *buf, size_t size) {
  switch (n->kind) {
  case CFG_NULL:
    snprintf(buf, size, "an empty value");
    break;
  case CFG_LIST:
    snprintf(buf, size, "a list");
    break;
  case CFG_MAP:
    snprintf(buf, size, "a mapping");
    break;
  case CFG_SCALAR:
    if (strlen(n->value) > 60)
      snprintf(buf, size, "'%.57s...'", n->value);
    else
      snprintf(buf, size, "'%s'", n->value);
    break;
  }
}

void cfg_err_expected(struct ld *ld, const struct cfg_node *n, const struct path *p, const char *what) {
  char d[96];
  cfg_describe(n, d, sizeof d);
  cfg_err_node(ld, n, cfg_path_str(p), "expected %s, got %s", what, d);
}
