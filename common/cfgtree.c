/* cfgtree.c — the configuration tree shared by the runner and the stages:
 * lookup, typed getters, construction, and the canonical hash that keys the
 * ledger (so it must never change for an unchanged configuration). */
#define _GNU_SOURCE
#include "common/cfgtree.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- lookup -------------------------------------------------------------- */

/* The child named by one path element of length len, or NULL. */
static const struct cfg_node *step(const struct cfg_node *n, const char *seg, size_t len) {
  if (n->kind == CFG_MAP) {
    for (int i = 0; i < n->n_kids; i++) {
      const char *k = n->kids[i]->key;
      if (k && strncmp(k, seg, len) == 0 && k[len] == 0) return n->kids[i];
    }
    return NULL;
  }
  if (n->kind == CFG_LIST) {
    if (len == 0 || len > 9) return NULL;
    int idx = 0;
    for (size_t j = 0; j < len; j++) {
      if (seg[j] < '0' || seg[j] > '9') return NULL;
      idx = idx * 10 + (seg[j] - '0');
    }
    return idx < n->n_kids ? n->kids[idx] : NULL;
  }
  return NULL;
}

const struct cfg_node *cfg_get(const struct cfg_node *n, const char *path) {
  if (!n || !path) return n;
  const char *p = path;
  while (*p && n) {
    const char *dot = strchr(p, '.');
    size_t len = dot ? (size_t)(dot - p) : strlen(p);
    n = step(n, p, len);
    if (!dot) break;
    p = dot + 1;
  }
  return n;
}

/* ---- typed getters --------------------------------------------------------- */

/* The schema's "is this a key?" (cfg_set_schema_check), or NULL. */
static int (*schema_known)(const char *dotted);

void cfg_set_schema_check(int (*known)(const char *dotted)) { schema_known = known; }

/* The topmost node above n (n itself at a root). */
static const struct cfg_node *top_of(const struct cfg_node *n) {
  while (n && n->parent)
    n = n->parent;
  return n;
}

void cfg_node_path(const struct cfg_node *n, char *buf, size_t len) {
  const struct cfg_node *chain[64];
  int depth = 0;
  for (const struct cfg_node *m = n; m && depth < 64; m = m->parent)
    if (m->parent || m->key) chain[depth++] = m; /* a keyed top: a subtree copied out */
  size_t used = 0;
  if (len) buf[0] = 0;
  for (int i = depth - 1; i >= 0 && used < len; i--) {
    const struct cfg_node *m = chain[i];
    char idx[16];
    const char *seg = m->key;
    if (!seg) { /* a list item: its index */
      int k = 0;
      while (m->parent && k < m->parent->n_kids && m->parent->kids[k] != m)
        k++;
      snprintf(idx, sizeof idx, "%d", k);
      seg = idx;
    }
    int w = snprintf(buf + used, len - used, "%s%s", used ? "." : "", seg);
    if (w < 0) break;
    used += (size_t)w;
  }
}

/* n's path and then path, dotted: the key as the workflow would write it. */
static void full_path(const struct cfg_node *n, const char *path, char *buf, size_t len) {
  cfg_node_path(n, buf, len);
  size_t used = strlen(buf);
  snprintf(buf + used, len - used, "%s%s", used && path && *path ? "." : "", path ? path : "");
}

/* A getter asked for what the tree cannot give: a bug in the caller or the
 * schema, never the user's, so say which key and stop. */
__attribute__((noreturn)) static void fail(const struct cfg_node *n, const char *path, const char *why) {
  char key[1024];
  full_path(n, path, key, sizeof key);
  fprintf(stderr, "se3screen: internal error: configuration key %s %s\n", key, why);
  fflush(stderr);
  abort();
}

#define NO_KEY "is not in the schema (configs/defaults.yaml) or has no default"

/* The scalar at path; absence (or a container there) fails. */
static const struct cfg_node *get_scalar(const struct cfg_node *n, const char *path) {
  const struct cfg_node *s = cfg_get(n, path);
  if (!n || !s) fail(n, path, NO_KEY);
  if (s->kind != CFG_SCALAR || !s->value) fail(n, path, "is not a single value");
  return s;
}

int64_t cfg_int(const struct cfg_node *n, const char *path) {
  const struct cfg_node *s = get_scalar(n, path);
  if (s->type == CFG_T_INT || s->type == CFG_T_BOOL) return s->i;
  if (s->type == CFG_T_FLOAT) return (int64_t)s->f;
  /* an unvalidated tree: read the text */
  char *end;
  errno = 0;
  long long v = strtoll(s->value, &end, 10);
  if (errno || end == s->value || *end) fail(n, path, "is not an integer");
  return v;
}

double cfg_float(const struct cfg_node *n, const char *path) {
  const struct cfg_node *s = get_scalar(n, path);
  if (s->type == CFG_T_FLOAT || s->type == CFG_T_INT) return s->f;
  if (s->type == CFG_T_BOOL) return (double)s->i;
  char *end;
  double v = strtod(s->value, &end);
  if (end == s->value || *end) fail(n, path, "is not a number");
  return v;
}

int cfg_written(const struct cfg_node *n) { return n && n->file && strcmp(n->file, CFG_DEFAULT_FILE) != 0; }

int cfg_invalid(const struct cfg_node *n) { return n && n->file && strcmp(n->file, CFG_INVALID_FILE) == 0; }

int cfg_bool(const struct cfg_node *n, const char *path) {
  const struct cfg_node *s = get_scalar(n, path);
  if (s->type == CFG_T_BOOL || s->type == CFG_T_INT) return s->i != 0;
  static const char *yes[] = {"true", "yes", "on", "1"}, *no[] = {"false", "no", "off", "0"};
  for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) {
    if (strcasecmp(s->value, yes[i]) == 0) return 1;
    if (strcasecmp(s->value, no[i]) == 0) return 0;
  }
  fail(n, path, "is not a bool");
}

const char *cfg_str(const struct cfg_node *n, const char *path) { return get_scalar(n, path)->value; }

const char *cfg_str_opt(const struct cfg_node *n, const char *path) {
  const struct cfg_node *s = cfg_get(n, path);
  if (n && s) return s->kind == CFG_SCALAR ? s->value : NULL;
  /* absent: fine for a key of the schema; the check needs the whole path,
   * so only a tree that reaches up to its root (no key) is checked */
  const struct cfg_node *top = top_of(n);
  if (schema_known && top && !top->key) {
    char key[1024];
    full_path(n, path, key, sizeof key);
    if (!schema_known(key)) fail(n, path, "is not in the schema (configs/defaults.yaml)");
  }
  return NULL;
}

/* ---- construction ------------------------------------------------------------ */

struct cfg_node *cfg_node_new(enum cfg_kind kind, const char *key, const char *file, int line, int col) {
  struct cfg_node *n = calloc(1, sizeof *n);
  if (!n) return NULL;
  n->kind = kind;
  n->key = key ? strdup(key) : NULL;
  n->file = file ? strdup(file) : NULL;
  n->line = line;
  n->col = col;
  return n;
}

/* Appends in amortised constant time: a mapping of many keys is built in
 * linear time. (cap_kids may be below n_kids in a node whose kids array was
 * made elsewhere; the array is then grown.) */
void cfg_node_add(struct cfg_node *parent, struct cfg_node *kid) {
  if (!parent || !kid) return;
  if (parent->n_kids >= parent->cap_kids) {
    int cap = parent->n_kids < 4 ? 8 : 2 * parent->n_kids;
    struct cfg_node **k = realloc(parent->kids, (size_t)cap * sizeof *k);
    if (!k) return;
    parent->kids = k;
    parent->cap_kids = cap;
  }
  parent->kids[parent->n_kids++] = kid;
  kid->parent = parent;
}

struct cfg_node *cfg_node_copy(const struct cfg_node *n) {
  if (!n) return NULL;
  struct cfg_node *c = cfg_node_new(n->kind, n->key, n->file, n->line, n->col);
  if (!c) return NULL;
  c->type = n->type;
  c->value = n->value ? strdup(n->value) : NULL;
  c->i = n->i;
  c->f = n->f;
  c->no_hash = n->no_hash;
  if (n->n_kids > 0) {
    c->kids = calloc((size_t)n->n_kids, sizeof *c->kids);
    if (!c->kids) {
      cfg_node_free(c);
      return NULL;
    }
    c->cap_kids = n->n_kids;
    for (int i = 0; i < n->n_kids; i++) {
      c->kids[i] = cfg_node_copy(n->kids[i]);
      if (c->kids[i]) c->kids[i]->parent = c;
      c->n_kids++;
    }
  }
  return c;
}

void cfg_link_parents(struct cfg_node *n) {
  if (!n) return;
  for (int i = 0; i < n->n_kids; i++) {
    n->kids[i]->parent = n;
    cfg_link_parents(n->kids[i]);
  }
}

void cfg_node_free(struct cfg_node *n) {
  if (!n) return;
  for (int i = 0; i < n->n_kids; i++)
    cfg_node_free(n->kids[i]);
  free(n->kids);
  free(n->key);
  free(n->value);
  free(n->file);
  free(n);
}

/* ---- hashing ------------------------------------------------------------------ */

uint64_t se3_hash_bytes(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) {
    h ^= b[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

/* The bytes of s, without its terminating NUL. */
uint64_t se3_hash_str(uint64_t h, const char *s) { return s ? se3_hash_bytes(h, s, strlen(s)) : h; }

static uint64_t hash_byte(uint64_t h, char c) { return se3_hash_bytes(h, &c, 1); }

/* Shortest "%g" text that reads back as the same double, so that 5, 5.0 and
 * 5e0 hash alike. */
static void canon_float(double f, char *buf, size_t n) {
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(buf, n, "%.*g", prec, f);
    if (strtod(buf, NULL) == f) return;
  }
}

/* The text a scalar hashes by: its value as typed by the schema. */
static uint64_t hash_scalar(uint64_t h, const struct cfg_node *n) {
  char buf[64];
  const char *text = n->value ? n->value : "";
  switch (n->type) {
  case CFG_T_INT:
    snprintf(buf, sizeof buf, "%lld", (long long)n->i);
    text = buf;
    break;
  case CFG_T_BOOL:
    text = n->i ? "true" : "false";
    break;
  case CFG_T_FLOAT:
    canon_float(n->f, buf, sizeof buf);
    text = buf;
    break;
  default:
    break;
  }
  h = hash_byte(h, 'S');
  h = se3_hash_str(h, text);
  return hash_byte(h, 0);
}

static int cmp_key(const void *a, const void *b) {
  const struct cfg_node *x = *(const struct cfg_node *const *)a, *y = *(const struct cfg_node *const *)b;
  int c = strcmp(x->key ? x->key : "", y->key ? y->key : "");
  if (c) return c;
  /* equal keys only in unvalidated trees: keep the input order */
  return x < y ? -1 : x > y;
}

/* Every encoding below is self-delimiting (scalars end in NUL, containers in a
 * closing marker), so no two different trees share a byte stream. */
uint64_t cfg_hash(uint64_t h, const struct cfg_node *n) {
  if (!n) return hash_byte(h, 'A');
  switch (n->kind) {
  case CFG_NULL:
    return hash_byte(h, 'N');
  case CFG_SCALAR:
    return hash_scalar(h, n);
  case CFG_LIST:
    h = hash_byte(h, '[');
    for (int i = 0; i < n->n_kids; i++)
      if (!n->kids[i]->no_hash) h = cfg_hash(h, n->kids[i]);
    return hash_byte(h, ']');
  case CFG_MAP: {
    h = hash_byte(h, '{');
    const struct cfg_node **sorted = NULL;
    if (n->n_kids > 0) {
      sorted = malloc((size_t)n->n_kids * sizeof *sorted);
      if (!sorted) return hash_byte(h, '!');
      memcpy(sorted, n->kids, (size_t)n->n_kids * sizeof *sorted);
      qsort(sorted, (size_t)n->n_kids, sizeof *sorted, cmp_key);
    }
    for (int i = 0; i < n->n_kids; i++) {
      if (sorted[i]->no_hash) continue;
      h = se3_hash_str(h, sorted[i]->key);
      h = hash_byte(h, 0);
      h = cfg_hash(h, sorted[i]);
    }
    free(sorted);
    return hash_byte(h, '}');
  }
  }
  return h;
}
