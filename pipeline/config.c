/* config.c — workflows in YAML: parse (libyaml events), include, --set,
 * validate against configs/defaults.yaml, fill defaults, print, hash.
 *
 * Every problem is collected rather than returned at the first one, so a user
 * fixes a workflow in one round. Errors are appended to the caller's
 * struct cfg_errors (which must start zeroed, e.g. `= {0}`).
 */
#define _GNU_SOURCE
#include "pipeline/config.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

extern const char cfg_defaults_yaml[];
/* the model presets of configs/models/, compiled in (cmake/embed_presets.cmake) */
extern const struct cfg_preset { const char *name, *text; } cfg_model_presets[];

#define SET_FILE "<--set>"
#define DEFAULT_FILE "<default>"
#define SCHEMA_FILE "<defaults>"
#define MAX_DEPTH 256            /* deeper YAML is surely a mistake; keeps recursion bounded */
#define MAX_ALIAS_NODES 1000000  /* caps alias expansion ("billion laughs") */
#define MAX_FILE_BYTES (1 << 20) /* a workflow, fragment or model file: 1 MiB */
#define MAX_FILE_TEXT "1 MiB"
#define MAX_INCLUDE_DEPTH 64 /* files open at once along one include chain */

/* ---- loader state and errors ------------------------------------------------ */

/* The --set text that created a node, so its errors can name the override. */
struct origin {
  const struct cfg_node *node;
  const char *text;
};

struct open_file {
  const char *name; /* as given / as resolved */
  char *real;       /* realpath, for cycle detection */
};

/* A file already loaded (with its includes merged), by realpath: a file
 * included along many paths is read once, and each inclusion gets a copy of
 * the same tree, so an include graph costs time linear in its files. */
struct loaded_file {
  char *real;
  struct cfg_node *tree; /* NULL when the file had errors (reported once) */
};

struct ld {
  struct cfg_errors *errs;
  int n_errs; /* errors found by this load */
  char *cwd;
  char *wf_dir; /* absolute folder of the workflow file */
  struct open_file *stack;
  int n_stack;
  struct loaded_file *loaded;
  int n_loaded;
  struct origin *origins;
  int n_origins;
  const char *inputs; /* check input paths of these stages ("*": all), or NULL */
};

void cfg_errors_free(struct cfg_errors *e) {
  if (!e) return;
  for (int i = 0; i < e->n; i++)
    free(e->msgs[i]);
  free(e->msgs);
  e->msgs = NULL;
  e->n = 0;
}

/* Messages are appended with room doubled at powers of two, so that a file
 * with many mistakes is reported in linear time. */
static void add_msg(struct ld *ld, char *msg) {
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

static void verr(struct ld *ld, const char *file, int line, int col, const char *origin, const char *path,
                 const char *fmt, va_list ap) {
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
  add_msg(ld, msg);
}

__attribute__((format(printf, 7, 8))) static void err_at(struct ld *ld, const char *file, int line, int col,
                                                         const char *origin, const char *path, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  verr(ld, file, line, col, origin, path, fmt, ap);
  va_end(ap);
}

static int is_set_node(const struct cfg_node *n) { return n->file && strcmp(n->file, SET_FILE) == 0; }

static const char *origin_of(const struct ld *ld, const struct cfg_node *n) {
  for (int i = ld->n_origins - 1; i >= 0; i--)
    if (ld->origins[i].node == n) return ld->origins[i].text;
  return NULL;
}

__attribute__((format(printf, 4, 5))) static void err_node(struct ld *ld, const struct cfg_node *n, const char *path,
                                                           const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  const char *origin = is_set_node(n) ? origin_of(ld, n) : NULL;
  verr(ld, n->file, n->line, n->col, origin, path, fmt, ap);
  va_end(ap);
}

static void register_tree(struct ld *ld, const struct cfg_node *n, const char *text) {
  struct origin *o = realloc(ld->origins, (size_t)(ld->n_origins + 1) * sizeof *o);
  if (!o) return;
  ld->origins = o;
  o[ld->n_origins++] = (struct origin){n, text};
  for (int i = 0; i < n->n_kids; i++)
    register_tree(ld, n->kids[i], text);
}

/* Before a node is freed, so a later node at the same address is not mistaken for it. */
static void unregister_tree(struct ld *ld, const struct cfg_node *n) {
  for (int i = 0; i < ld->n_origins; i++)
    if (ld->origins[i].node == n) ld->origins[i].node = NULL;
  for (int i = 0; i < n->n_kids; i++)
    unregister_tree(ld, n->kids[i]);
}

/* ---- small helpers ------------------------------------------------------------ */

/* A dotted key path grown and shrunk while walking the tree. */
struct path {
  char *s;
  size_t len, cap;
};

static size_t path_push(struct path *p, const char *seg) {
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

static size_t path_push_index(struct path *p, int i) {
  char b[16];
  snprintf(b, sizeof b, "%d", i);
  return path_push(p, b);
}

static void path_pop(struct path *p, size_t old) {
  p->len = old;
  if (p->s) p->s[old] = 0;
}

static const char *path_str(const struct path *p) { return p->s ? p->s : ""; }

static struct cfg_node *find_kid(const struct cfg_node *n, const char *key) {
  if (!n || n->kind != CFG_MAP || !key) return NULL;
  for (int i = 0; i < n->n_kids; i++)
    if (n->kids[i]->key && strcmp(n->kids[i]->key, key) == 0) return n->kids[i];
  return NULL;
}

static int kid_index(const struct cfg_node *n, const char *key) {
  for (int i = 0; i < n->n_kids; i++)
    if (n->kids[i]->key && strcmp(n->kids[i]->key, key) == 0) return i;
  return -1;
}

static struct cfg_node *detach_kid(struct cfg_node *n, const char *key) {
  int i = kid_index(n, key);
  if (i < 0) return NULL;
  struct cfg_node *k = n->kids[i];
  memmove(n->kids + i, n->kids + i + 1, (size_t)(n->n_kids - i - 1) * sizeof *n->kids);
  n->n_kids--;
  return k;
}

/* An index of the keys of kids[0..n) of a mapping, so that building,
 * de-duplicating and merging a mapping of many keys takes linear time
 * (open addressing; slots hold position + 1, 0 is empty). Without memory for
 * the table it falls back to a linear scan. Positions are added in order:
 * keyidx_push indexes kids[n]. */
struct keyidx {
  int *slot;
  size_t mask;
  int n;
};

static size_t key_hash(const char *key) { return (size_t)se3_hash_str(SE3_HASH_INIT, key ? key : ""); }

static int key_eq(const struct cfg_node *n, const char *key) {
  return strcmp(n->key ? n->key : "", key ? key : "") == 0;
}

static void keyidx_place(int *slot, size_t mask, struct cfg_node *const *kids, int pos) {
  size_t i = key_hash(kids[pos]->key) & mask;
  while (slot[i])
    i = (i + 1) & mask;
  slot[i] = pos + 1;
}

static void keyidx_push(struct keyidx *ix, struct cfg_node *const *kids) {
  if (ix->slot && 2 * ((size_t)ix->n + 1) > ix->mask + 1) {
    size_t cap = 2 * (ix->mask + 1);
    int *s = calloc(cap, sizeof *s);
    free(ix->slot);
    ix->slot = s;
    ix->mask = cap - 1;
    for (int p = 0; s && p < ix->n; p++)
      keyidx_place(s, ix->mask, kids, p);
  }
  if (ix->slot) keyidx_place(ix->slot, ix->mask, kids, ix->n);
  ix->n++;
}

static void keyidx_init(struct keyidx *ix, struct cfg_node *const *kids, int n) {
  size_t cap = 16;
  while (cap < 2 * (size_t)n + 2)
    cap *= 2;
  ix->slot = calloc(cap, sizeof *ix->slot);
  ix->mask = cap - 1;
  ix->n = 0;
  for (int p = 0; p < n; p++)
    keyidx_push(ix, kids);
}

/* The position of key among the indexed kids, or -1. */
static int keyidx_find(const struct keyidx *ix, struct cfg_node *const *kids, const char *key) {
  if (!ix->slot) {
    for (int p = 0; p < ix->n; p++)
      if (key_eq(kids[p], key)) return p;
    return -1;
  }
  for (size_t i = key_hash(key) & ix->mask; ix->slot[i]; i = (i + 1) & ix->mask)
    if (key_eq(kids[ix->slot[i] - 1], key)) return ix->slot[i] - 1;
  return -1;
}

static void keyidx_free(struct keyidx *ix) {
  free(ix->slot);
  ix->slot = NULL;
}

static void set_loc(struct cfg_node *n, const char *file, int line, int col) {
  free(n->file);
  n->file = strdup(file);
  n->line = line;
  n->col = col;
  for (int i = 0; i < n->n_kids; i++)
    set_loc(n->kids[i], file, line, col);
}

static void mark_no_hash(struct cfg_node *n) {
  n->no_hash = 1;
  for (int i = 0; i < n->n_kids; i++)
    mark_no_hash(n->kids[i]);
}

/* How a value looks, for "expected X, got Y". */
static void describe(const struct cfg_node *n, char *buf, size_t size) {
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

static void err_expected(struct ld *ld, const struct cfg_node *n, const struct path *p, const char *what) {
  char d[96];
  describe(n, d, sizeof d);
  err_node(ld, n, path_str(p), "expected %s, got %s", what, d);
}

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

/* What a file that is not a regular file is, for the message. */
static const char *file_kind(mode_t m) {
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "a special file";
}

/* Reads a configuration file whole: a regular file of at most MAX_FILE_BYTES.
 * Opened without blocking and checked before reading, so a FIFO or a device
 * (include: /dev/zero) is refused at once. NULL with *why filled on failure. */
static char *read_config_file(const char *file, size_t *len, char *why, size_t why_len) {
  int fd = open(file, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    snprintf(why, why_len, "%s", strerror(errno));
    return NULL;
  }
  struct stat sb;
  char *buf = NULL;
  if (fstat(fd, &sb) != 0) {
    snprintf(why, why_len, "%s", strerror(errno));
  } else if (S_ISDIR(sb.st_mode)) {
    snprintf(why, why_len, "%s", strerror(EISDIR));
  } else if (!S_ISREG(sb.st_mode)) {
    snprintf(why, why_len, "not a regular file (%s)", file_kind(sb.st_mode));
  } else if (sb.st_size > MAX_FILE_BYTES) {
    snprintf(why, why_len, "larger than %s, the limit for configuration files", MAX_FILE_TEXT);
  } else if (!(buf = malloc(MAX_FILE_BYTES + 2))) {
    snprintf(why, why_len, "%s", strerror(ENOMEM));
  } else {
    /* read one byte past the limit: the file may have grown since fstat */
    size_t n = 0;
    while (n <= MAX_FILE_BYTES) {
      ssize_t r = read(fd, buf + n, MAX_FILE_BYTES + 1 - n);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) {
        snprintf(why, why_len, "%s", strerror(errno));
        free(buf);
        buf = NULL;
        break;
      }
      if (r == 0) break;
      n += (size_t)r;
    }
    if (buf && n > MAX_FILE_BYTES) {
      snprintf(why, why_len, "larger than %s, the limit for configuration files", MAX_FILE_TEXT);
      free(buf);
      buf = NULL;
    } else if (buf) {
      buf[n] = 0;
      *len = n;
    }
  }
  close(fd);
  return buf;
}

/* Remove "." and "x/.." components of an absolute path, in place. */
static void normalize_path(char *s) {
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
static char *abs_dir(const struct ld *ld, const char *file) {
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
  normalize_path(dir);
  return dir;
}

/* An include's name: relative to the folder of the including file as given. */
static char *join_rel(const char *including, const char *name) {
  char *out = NULL;
  const char *slash = strrchr(including, '/');
  int rc;
  if (name[0] == '/' || !slash)
    rc = asprintf(&out, "%s", name);
  else
    rc = asprintf(&out, "%.*s/%s", (int)(slash - including), including, name);
  return rc < 0 ? NULL : out;
}

/* ---- YAML to tree ----------------------------------------------------------------- */

struct anchor {
  char *name;
  const struct cfg_node *node;
};

struct yp {
  struct ld *ld;
  yaml_parser_t parser;
  const char *file;
  const char *origin; /* the --set text when parsing an override value */
  int failed;
  struct anchor *anchors;
  int n_anchors;
  long alias_nodes; /* nodes created by copying anchors */
};

static long count_nodes(const struct cfg_node *n) {
  long c = 1;
  for (int i = 0; i < n->n_kids; i++)
    c += count_nodes(n->kids[i]);
  return c;
}

static int yp_next(struct yp *y, yaml_event_t *ev) {
  if (yaml_parser_parse(&y->parser, ev)) return 1;
  yaml_mark_t m = y->parser.problem_mark;
  err_at(y->ld, y->file, (int)m.line + 1, (int)m.column + 1, y->origin, "yaml", "%s",
         y->parser.problem ? y->parser.problem : "cannot parse");
  y->failed = 1;
  return 0;
}

__attribute__((format(printf, 3, 4))) static void yp_err(struct yp *y, yaml_mark_t m, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  verr(y->ld, y->file, (int)m.line + 1, (int)m.column + 1, y->origin, "yaml", fmt, ap);
  va_end(ap);
  y->failed = 1;
}

static void yp_anchor(struct yp *y, const yaml_char_t *name, const struct cfg_node *n) {
  if (!name) return;
  struct anchor *a = realloc(y->anchors, (size_t)(y->n_anchors + 1) * sizeof *a);
  if (!a) return;
  y->anchors = a;
  a[y->n_anchors].name = strdup((const char *)name);
  a[y->n_anchors++].node = n;
}

/* Plain (unquoted) words YAML reads as null. */
static int is_null_word(const char *v, size_t len) {
  static const char *words[] = {"", "~", "null", "Null", "NULL"};
  for (size_t i = 0; i < sizeof words / sizeof *words; i++)
    if (strlen(words[i]) == len && memcmp(words[i], v, len) == 0) return 1;
  return 0;
}

/* Build the node that starts with *ev (which this deletes); NULL on error. */
static struct cfg_node *yp_build(struct yp *y, yaml_event_t *ev, int depth) {
  yaml_mark_t m = ev->start_mark;
  int line = (int)m.line + 1, col = (int)m.column + 1;
  struct cfg_node *n = NULL;
  if (depth > MAX_DEPTH) {
    yp_err(y, m, "nesting deeper than %d levels", MAX_DEPTH);
    yaml_event_delete(ev);
    return NULL;
  }
  switch (ev->type) {
  case YAML_SCALAR_EVENT: {
    const char *v = (const char *)ev->data.scalar.value;
    size_t len = ev->data.scalar.length;
    if (ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && is_null_word(v, len)) {
      n = cfg_node_new(CFG_NULL, NULL, y->file, line, col);
    } else if (memchr(v, 0, len)) {
      yp_err(y, m, "a value contains a NUL character");
      yaml_event_delete(ev);
      return NULL;
    } else {
      n = cfg_node_new(CFG_SCALAR, NULL, y->file, line, col);
      if (n) n->value = strndup(v, len);
    }
    if (n) yp_anchor(y, ev->data.scalar.anchor, n);
    yaml_event_delete(ev);
    return n;
  }
  case YAML_ALIAS_EVENT: {
    const char *name = (const char *)ev->data.alias.anchor;
    for (int i = y->n_anchors - 1; i >= 0; i--)
      if (strcmp(y->anchors[i].name, name) == 0) {
        n = cfg_node_copy(y->anchors[i].node);
        break;
      }
    if (!n) {
      yp_err(y, m, "unknown alias '%s'", name);
    } else if ((y->alias_nodes += count_nodes(n)) > MAX_ALIAS_NODES) {
      yp_err(y, m, "aliases expand to more than %d nodes", MAX_ALIAS_NODES);
      cfg_node_free(n);
      n = NULL;
    } else {
      n->line = line;
      n->col = col;
    }
    yaml_event_delete(ev);
    return n;
  }
  case YAML_SEQUENCE_START_EVENT:
  case YAML_MAPPING_START_EVENT: {
    int is_map = ev->type == YAML_MAPPING_START_EVENT;
    yaml_event_type_t end = is_map ? YAML_MAPPING_END_EVENT : YAML_SEQUENCE_END_EVENT;
    const yaml_char_t *a = is_map ? ev->data.mapping_start.anchor : ev->data.sequence_start.anchor;
    char *anchor = a ? strdup((const char *)a) : NULL;
    yaml_event_delete(ev);
    n = cfg_node_new(is_map ? CFG_MAP : CFG_LIST, NULL, y->file, line, col);
    for (;;) {
      yaml_event_t e;
      if (!n || !yp_next(y, &e)) break;
      if (e.type == end) {
        yaml_event_delete(&e);
        yp_anchor(y, (const yaml_char_t *)anchor, n);
        free(anchor);
        return n;
      }
      if (!is_map) {
        struct cfg_node *k = yp_build(y, &e, depth + 1);
        if (!k) break;
        free(k->key); /* an alias of a mapping entry brings its key along */
        k->key = NULL;
        cfg_node_add(n, k);
        continue;
      }
      if (e.type != YAML_SCALAR_EVENT) {
        yp_err(y, e.start_mark, "mapping keys must be plain scalars");
        yaml_event_delete(&e);
        break;
      }
      char *key = strndup((const char *)e.data.scalar.value, e.data.scalar.length);
      int kline = (int)e.start_mark.line + 1, kcol = (int)e.start_mark.column + 1;
      yaml_event_delete(&e);
      yaml_event_t v;
      struct cfg_node *val = yp_next(y, &v) ? yp_build(y, &v, depth + 1) : NULL;
      if (!val) {
        free(key);
        break;
      }
      /* a mapping entry is located at its key, where the user looks for it */
      free(val->key);
      val->key = key;
      val->line = kline;
      val->col = kcol;
      cfg_node_add(n, val);
    }
    free(anchor);
    cfg_node_free(n);
    return NULL;
  }
  default:
    yp_err(y, m, "unexpected YAML event");
    yaml_event_delete(ev);
    return NULL;
  }
}

/* Parse one YAML text into a tree; an empty text is a CFG_NULL node. */
static struct cfg_node *yp_load(struct ld *ld, const char *file, const char *text, size_t len, const char *origin) {
  struct yp y = {.ld = ld, .file = file, .origin = origin};
  if (!yaml_parser_initialize(&y.parser)) {
    err_at(ld, file, 0, 0, origin, "yaml", "out of memory");
    return NULL;
  }
  yaml_parser_set_input_string(&y.parser, (const unsigned char *)text, len);
  struct cfg_node *root = NULL;
  int docs = 0;
  yaml_event_t ev;
  while (!y.failed && yp_next(&y, &ev)) {
    yaml_event_type_t t = ev.type;
    if (t == YAML_STREAM_END_EVENT) {
      yaml_event_delete(&ev);
      break;
    }
    if (t == YAML_STREAM_START_EVENT || t == YAML_DOCUMENT_END_EVENT) {
      yaml_event_delete(&ev);
      continue;
    }
    if (t == YAML_DOCUMENT_START_EVENT) {
      if (docs++) yp_err(&y, ev.start_mark, "only one YAML document is allowed");
      yaml_event_delete(&ev);
      continue;
    }
    struct cfg_node *n = yp_build(&y, &ev, 0);
    if (n) {
      free(n->key);
      n->key = NULL;
      cfg_node_free(root);
      root = n;
    }
  }
  for (int i = 0; i < y.n_anchors; i++)
    free(y.anchors[i].name);
  free(y.anchors);
  yaml_parser_delete(&y.parser);
  if (y.failed) {
    cfg_node_free(root);
    return NULL;
  }
  if (!root) root = cfg_node_new(CFG_NULL, NULL, file, 1, 1);
  return root;
}

/* ---- one file: duplicates, merge keys, includes ------------------------------------ */

/* Copy the entries of src that m lacks (YAML "<<" merge keys). */
static void add_missing(struct cfg_node *m, const struct cfg_node *src) {
  struct keyidx ix;
  keyidx_init(&ix, m->kids, m->n_kids);
  for (int i = 0; i < src->n_kids; i++) {
    if (keyidx_find(&ix, m->kids, src->kids[i]->key) >= 0) continue;
    cfg_node_add(m, cfg_node_copy(src->kids[i]));
    if (m->n_kids > ix.n) keyidx_push(&ix, m->kids);
  }
  keyidx_free(&ix);
}

/* Report duplicate keys (keeping the first) and expand "<<" merge keys. */
static void tidy(struct ld *ld, struct cfg_node *n, struct path *p) {
  if (n->kind == CFG_LIST) {
    for (int i = 0; i < n->n_kids; i++) {
      size_t old = path_push_index(p, i);
      tidy(ld, n->kids[i], p);
      path_pop(p, old);
    }
    return;
  }
  if (n->kind != CFG_MAP) return;
  int w = 0;
  struct keyidx ix;
  keyidx_init(&ix, n->kids, 0);
  for (int i = 0; i < n->n_kids; i++) {
    struct cfg_node *k = n->kids[i];
    int j = keyidx_find(&ix, n->kids, k->key);
    if (j >= 0) {
      size_t old = path_push(p, k->key);
      err_node(ld, k, path_str(p), "duplicate key (first at line %d)", n->kids[j]->line);
      path_pop(p, old);
      cfg_node_free(k);
      continue;
    }
    n->kids[w] = k;
    keyidx_push(&ix, n->kids); /* indexes kids[w] */
    w++;
  }
  keyidx_free(&ix);
  n->n_kids = w;
  struct cfg_node *mk = detach_kid(n, "<<");
  if (mk) {
    int ok = mk->kind == CFG_MAP;
    if (mk->kind == CFG_LIST) {
      ok = 1;
      for (int i = 0; i < mk->n_kids; i++)
        ok &= mk->kids[i]->kind == CFG_MAP;
    }
    if (!ok) {
      size_t old = path_push(p, "<<");
      err_node(ld, mk, path_str(p), "a merge key needs a mapping or a list of mappings");
      path_pop(p, old);
    } else if (mk->kind == CFG_MAP) {
      add_missing(n, mk);
    } else {
      for (int i = 0; i < mk->n_kids; i++)
        add_missing(n, mk->kids[i]);
    }
    cfg_node_free(mk);
  }
  for (int i = 0; i < n->n_kids; i++) {
    size_t old = path_push(p, n->kids[i]->key);
    tidy(ld, n->kids[i], p);
    path_pop(p, old);
  }
}

/* Deep merge, consuming both: mappings key by key, otherwise `over` wins. */
static struct cfg_node *merge(struct cfg_node *base, struct cfg_node *over) {
  if (over->kind == CFG_NULL && base->kind == CFG_MAP) {
    cfg_node_free(over);
    return base;
  }
  if (base->kind != CFG_MAP || over->kind != CFG_MAP) {
    cfg_node_free(base);
    return over;
  }
  struct keyidx ix;
  keyidx_init(&ix, base->kids, base->n_kids);
  for (int i = 0; i < over->n_kids; i++) {
    struct cfg_node *k = over->kids[i];
    int j = keyidx_find(&ix, base->kids, k->key);
    if (j >= 0) {
      base->kids[j] = merge(base->kids[j], k);
    } else {
      cfg_node_add(base, k);
      if (base->n_kids > ix.n) keyidx_push(&ix, base->kids);
    }
  }
  keyidx_free(&ix);
  /* the mapping is now located where the winning file wrote it */
  free(base->file);
  base->file = over->file;
  base->line = over->line;
  base->col = over->col;
  over->file = NULL;
  free(over->kids);
  over->kids = NULL;
  over->n_kids = 0;
  cfg_node_free(over);
  return base;
}

/* Reports a file that cannot be loaded: at the include item (or model key)
 * naming it, or at the workflow file itself. */
static void err_file(struct ld *ld, const char *file, const struct cfg_node *from, const char *from_path,
                     const char *why) {
  if (from)
    err_node(ld, from, from_path, "cannot read '%s': %s", file, why);
  else
    err_at(ld, file, 0, 0, NULL, "", "cannot read: %s", why);
}

static struct cfg_node *load_file(struct ld *ld, const char *file, const struct cfg_node *from, const char *from_path);

/* Parse one file (no cache) and merge its includes under it. */
static struct cfg_node *parse_file(struct ld *ld, const char *file, char *real, const struct cfg_node *from,
                                   const char *from_path) {
  size_t len = 0;
  char why[256];
  char *text = read_config_file(file, &len, why, sizeof why);
  if (!text) {
    err_file(ld, file, from, from_path, why);
    return NULL;
  }
  struct cfg_node *t = yp_load(ld, file, text, len, NULL);
  free(text);
  if (t && t->kind == CFG_NULL) t->kind = CFG_MAP;
  if (t && t->kind != CFG_MAP) {
    err_node(ld, t, "", "%s must be a mapping of keys", from ? "an included file" : "a workflow");
    cfg_node_free(t);
    t = NULL;
  }
  if (!t) return NULL;
  struct path p = {0};
  tidy(ld, t, &p);
  free(p.s);

  struct cfg_node *inc = detach_kid(t, "include"), *base = NULL;
  if (inc && inc->kind == CFG_LIST) {
    struct open_file *s = realloc(ld->stack, (size_t)(ld->n_stack + 1) * sizeof *s);
    if (s) {
      ld->stack = s;
      s[ld->n_stack++] = (struct open_file){file, real};
      for (int i = 0; i < inc->n_kids; i++) {
        const struct cfg_node *item = inc->kids[i];
        char ip[32];
        snprintf(ip, sizeof ip, "include.%d", i);
        if (item->kind != CFG_SCALAR || !item->value[0]) {
          char d[96];
          describe(item, d, sizeof d);
          err_node(ld, item, ip, "expected a file name, got %s", d);
          continue;
        }
        char *name = join_rel(file, item->value);
        struct cfg_node *frag = name ? load_file(ld, name, item, ip) : NULL;
        free(name);
        if (frag) base = base ? merge(base, frag) : frag;
      }
      ld->n_stack--;
    }
  } else if (inc && inc->kind != CFG_NULL) {
    char d[96];
    describe(inc, d, sizeof d);
    err_node(ld, inc, "include", "expected a list of files, got %s", d);
  }
  cfg_node_free(inc);
  return base ? merge(base, t) : t;
}

/* Load a file and its includes; `from` is the include item naming it (NULL
 * for the workflow itself). Returns the merged tree (the caller's to free) or
 * NULL. Every file is parsed once per load: a later inclusion of the same file
 * gets a copy of the first one's tree, which is what parsing it again would
 * give, so includes that form a diamond cost linear, not exponential, time. */
static struct cfg_node *load_file(struct ld *ld, const char *file, const struct cfg_node *from, const char *from_path) {
  char *real = realpath(file, NULL);
  if (!real) {
    err_file(ld, file, from, from_path, strerror(errno));
    return NULL;
  }
  for (int i = 0; i < ld->n_stack; i++) {
    if (strcmp(ld->stack[i].real, real) != 0) continue;
    char *chain = NULL, *next = NULL;
    for (int j = i; j < ld->n_stack; j++) {
      if (asprintf(&next, "%s%s -> ", chain ? chain : "", ld->stack[j].name) < 0) next = NULL;
      free(chain);
      chain = next;
    }
    err_node(ld, from, from_path, "include cycle: %s%s", chain ? chain : "", file);
    free(chain);
    free(real);
    return NULL;
  }
  for (int i = 0; i < ld->n_loaded; i++)
    if (strcmp(ld->loaded[i].real, real) == 0) {
      free(real);
      return cfg_node_copy(ld->loaded[i].tree); /* NULL for a file with errors: reported once */
    }
  if (ld->n_stack >= MAX_INCLUDE_DEPTH) {
    char why[96];
    snprintf(why, sizeof why, "includes nested deeper than %d files", MAX_INCLUDE_DEPTH);
    err_file(ld, file, from, from_path, why);
    free(real);
    return NULL;
  }
  struct cfg_node *t = parse_file(ld, file, real, from, from_path);
  struct loaded_file *l = realloc(ld->loaded, (size_t)(ld->n_loaded + 1) * sizeof *l);
  if (!l) {
    free(real);
    return t;
  }
  ld->loaded = l;
  l[ld->n_loaded++] = (struct loaded_file){real, t};
  return cfg_node_copy(t);
}

/* ---- model presets -------------------------------------------------------------- */

/* stages.train.model names a preset (configs/models/NAME.yaml, compiled in)
 * or a YAML file (a name with '/' or ending in .yaml, relative to the file
 * that wrote it). Its keys are the base of stages.train.arch: keys the
 * workflow writes under arch win. Runs before validation, so the preset's
 * keys are checked (and hashed) like the workflow's own. */
static void resolve_model(struct ld *ld, struct cfg_node *root) {
  struct cfg_node *stages = find_kid(root, "stages"), *train = stages ? find_kid(stages, "train") : NULL;
  if (!train || train->kind != CFG_MAP) return;
  const struct cfg_node *model = find_kid(train, "model");
  if (model && model->kind != CFG_SCALAR) return; /* validation reports it */
  const char *name = model ? model->value : "small";
  size_t len = strlen(name);
  struct cfg_node *preset = NULL;
  if (strchr(name, '/') || (len > 5 && !strcmp(name + len - 5, ".yaml")) ||
      (len > 4 && !strcmp(name + len - 4, ".yml"))) {
    const char *from = model->file && model->file[0] != '<' ? model->file : NULL;
    char *path = NULL;
    if (from)
      path = join_rel(from, name);
    else if (asprintf(&path, "%s/%s", name[0] == '/' ? "" : ld->cwd, name) < 0)
      path = NULL;
    if (path) preset = load_file(ld, path, model, "stages.train.model");
    free(path);
  } else {
    const struct cfg_preset *p = cfg_model_presets;
    while (p->name && strcmp(p->name, name))
      p++;
    if (!p->name) {
      char list[256] = "";
      for (const struct cfg_preset *q = cfg_model_presets; q->name; q++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", q == cfg_model_presets ? "" : ", ", q->name);
      err_node(ld, model, "stages.train.model", "unknown model preset '%s' (presets: %s; or a path to a YAML file)",
               name, list);
      return;
    }
    char file[96];
    snprintf(file, sizeof file, "configs/models/%s.yaml", p->name);
    preset = yp_load(ld, file, p->text, strlen(p->text), NULL);
    if (preset) {
      struct path pp = {0};
      tidy(ld, preset, &pp);
      free(pp.s);
    }
  }
  if (!preset) return;
  if (preset->kind != CFG_MAP) {
    err_node(ld, preset, "stages.train.model", "a model preset must be a mapping of keys");
    cfg_node_free(preset);
    return;
  }
  free(preset->key);
  preset->key = strdup("arch");
  struct cfg_node *arch = detach_kid(train, "arch");
  cfg_node_add(train, arch ? merge(preset, arch) : preset);
}

/* ---- --set overrides -------------------------------------------------------------- */

static int parse_index(const char *s, int *out) {
  if (!*s || strlen(s) > 9) return 0;
  int v = 0;
  for (; *s; s++) {
    if (*s < '0' || *s > '9') return 0;
    v = v * 10 + (*s - '0');
  }
  *out = v;
  return 1;
}

static void apply_set(struct ld *ld, struct cfg_node *root, const struct cfg_node *schema, const char *set) {
  const char *eq = strchr(set, '=');
  if (!eq || eq == set) {
    err_at(ld, SET_FILE, 0, 0, set, eq ? "" : set, "expected key=value");
    return;
  }
  char *key = strndup(set, (size_t)(eq - set));
  if (!key) return;
  /* split the key; room for a "stages" prefix */
  int n_seg = 2;
  for (const char *c = key; *c; c++)
    n_seg += *c == '.';
  char **seg = calloc((size_t)n_seg, sizeof *seg);
  struct cfg_node *value = NULL;
  struct path p = {0};
  if (!seg) goto out;
  n_seg = 0;
  {
    char *first_dot = strchr(key, '.');
    if (first_dot) *first_dot = 0;
    int shorthand = !find_kid(schema, key) && find_kid(find_kid(schema, "stages"), key);
    if (first_dot) *first_dot = '.';
    if (shorthand) seg[n_seg++] = "stages";
  }
  for (char *c = key;;) {
    char *dot = strchr(c, '.');
    if (dot) *dot = 0;
    seg[n_seg++] = c;
    if (!*c) {
      err_at(ld, SET_FILE, 0, 0, set, "", "empty element in key '%.*s'", (int)(eq - set), set);
      goto out;
    }
    if (!dot) break;
    c = dot + 1;
  }
  value = yp_load(ld, SET_FILE, eq + 1, strlen(eq + 1), set);
  if (!value) goto out;
  set_loc(value, SET_FILE, 0, 0);

  struct cfg_node *cur = root;
  for (int i = 0; i < n_seg; i++) {
    size_t old = path_push(&p, seg[i]);
    int last = i == n_seg - 1, idx;
    if (cur->kind == CFG_NULL) cur->kind = CFG_MAP;
    if (cur->kind == CFG_MAP) {
      int j = kid_index(cur, seg[i]);
      if (last) {
        free(value->key);
        value->key = strdup(seg[i]);
        if (j >= 0) {
          unregister_tree(ld, cur->kids[j]);
          cfg_node_free(cur->kids[j]);
          cur->kids[j] = value;
        } else {
          cfg_node_add(cur, value);
        }
        register_tree(ld, value, set);
        value = NULL;
        break;
      }
      if (j < 0) {
        struct cfg_node *m = cfg_node_new(CFG_MAP, seg[i], SET_FILE, 0, 0);
        if (!m) goto out;
        cfg_node_add(cur, m);
        register_tree(ld, m, set);
        j = cur->n_kids - 1;
      }
      cur = cur->kids[j];
    } else if (cur->kind == CFG_LIST && parse_index(seg[i], &idx) && idx <= cur->n_kids &&
               (last || idx < cur->n_kids)) {
      if (last) {
        free(value->key);
        value->key = NULL;
        if (idx < cur->n_kids) {
          unregister_tree(ld, cur->kids[idx]);
          cfg_node_free(cur->kids[idx]);
          cur->kids[idx] = value;
        } else {
          cfg_node_add(cur, value);
        }
        register_tree(ld, value, set);
        value = NULL;
        break;
      }
      cur = cur->kids[idx];
    } else {
      if (cur->kind != CFG_LIST) path_pop(&p, old); /* name the value that is in the way */
      err_at(ld, SET_FILE, 0, 0, set, path_str(&p), "%s",
             cur->kind == CFG_LIST ? "no such list item" : "cannot set a key inside a single value");
      goto out;
    }
  }
out:
  cfg_node_free(value);
  free(seg);
  free(key);
  free(p.s);
}

/* ---- validation against the schema ------------------------------------------------ */

static const char *sch_type(const struct cfg_node *s) {
  const struct cfg_node *t = find_kid(s, "type");
  return t && t->kind == CFG_SCALAR ? t->value : NULL;
}

static int sch_flag(const struct cfg_node *s, const char *key, int dflt) {
  const struct cfg_node *t = find_kid(s, key);
  if (!t || t->kind != CFG_SCALAR) return dflt;
  return strcmp(t->value, "true") == 0 || strcmp(t->value, "yes") == 0;
}

static const char *sch_text(const struct cfg_node *s, const char *key) {
  const struct cfg_node *t = find_kid(s, key);
  return t && t->kind == CFG_SCALAR ? t->value : NULL;
}

/* 1 = ok, 0 = not an integer, -1 = overflow */
static int parse_int(const char *s, int64_t *out) {
  const char *q = s;
  if (*q == '+' || *q == '-') q++;
  if (!*q) return 0;
  for (; *q; q++)
    if (*q < '0' || *q > '9') return 0;
  errno = 0;
  long long v = strtoll(s, NULL, 10);
  if (errno) return -1;
  *out = v;
  return 1;
}

static int parse_float(const char *s, double *out) {
  /* decimal only: no hex floats, inf or nan */
  if (!*s || strspn(s, "0123456789+-.eE") != strlen(s)) return 0;
  char *end;
  double v = strtod(s, &end);
  if (end == s || *end || !isfinite(v)) return 0;
  *out = v;
  return 1;
}

static int parse_bool(const char *s, int *out) {
  static const char *yes[] = {"true", "yes", "on"}, *no[] = {"false", "no", "off"};
  for (int i = 0; i < 3; i++) {
    if (strcasecmp(s, yes[i]) == 0) {
      *out = 1;
      return 1;
    }
    if (strcasecmp(s, no[i]) == 0) {
      *out = 0;
      return 1;
    }
  }
  return 0;
}

static void err_range(struct ld *ld, const struct cfg_node *n, const struct path *p, const char *lo, const char *hi) {
  if (lo && hi)
    err_node(ld, n, path_str(p), "must be between %s and %s, got %s", lo, hi, n->value);
  else if (lo)
    err_node(ld, n, path_str(p), "must be at least %s, got %s", lo, n->value);
  else
    err_node(ld, n, path_str(p), "must be at most %s, got %s", hi, n->value);
}

static void set_value(struct cfg_node *n, const char *text) {
  char *v = strdup(text);
  if (!v) return;
  free(n->value);
  n->value = v;
}

static void check_int(struct ld *ld, struct cfg_node *n, const struct cfg_node *s, const struct path *p) {
  int64_t v = 0, lo = 0, hi = 0;
  int r = parse_int(n->value, &v);
  if (r == 0) {
    err_expected(ld, n, p, "an integer");
    return;
  }
  const char *slo = sch_text(s, "min"), *shi = sch_text(s, "max");
  int has_lo = slo && parse_int(slo, &lo) == 1, has_hi = shi && parse_int(shi, &hi) == 1;
  if (r < 0 || (has_lo && v < lo) || (has_hi && v > hi)) {
    if (has_lo || has_hi)
      err_range(ld, n, p, has_lo ? slo : NULL, has_hi ? shi : NULL);
    else
      err_node(ld, n, path_str(p), "integer out of range, got %s", n->value);
    return;
  }
  n->type = CFG_T_INT;
  n->i = v;
  n->f = (double)v;
  char buf[32];
  snprintf(buf, sizeof buf, "%lld", (long long)v);
  set_value(n, buf); /* canonical text: "+7" and "007" print as 7 */
}

static void check_float(struct ld *ld, struct cfg_node *n, const struct cfg_node *s, const struct path *p) {
  double v = 0, lo = 0, hi = 0;
  if (!parse_float(n->value, &v)) {
    err_expected(ld, n, p, "a number");
    return;
  }
  const char *slo = sch_text(s, "min"), *shi = sch_text(s, "max");
  int has_lo = slo && parse_float(slo, &lo), has_hi = shi && parse_float(shi, &hi);
  if ((has_lo && v < lo) || (has_hi && v > hi)) {
    err_range(ld, n, p, has_lo ? slo : NULL, has_hi ? shi : NULL);
    return;
  }
  n->type = CFG_T_FLOAT;
  n->f = v;
}

static void check_enum(struct ld *ld, struct cfg_node *n, const struct cfg_node *s, const struct path *p) {
  const struct cfg_node *vals = find_kid(s, "values");
  int nv = vals && vals->kind == CFG_LIST ? vals->n_kids : 0;
  if (n->kind == CFG_SCALAR)
    for (int i = 0; i < nv; i++)
      if (vals->kids[i]->value && strcmp(vals->kids[i]->value, n->value) == 0) {
        n->type = CFG_T_ENUM;
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
  describe(n, d, sizeof d);
  const char *sug = n->kind == CFG_SCALAR && cands ? suggest(n->value, cands, nc) : NULL;
  if (sug)
    err_node(ld, n, path_str(p), "must be one of %s; got %s; did you mean '%s'?", list ? list : "", d, sug);
  else
    err_node(ld, n, path_str(p), "must be one of %s; got %s", list ? list : "", d);
  free(list);
  free(cands);
}

static void resolve_path(struct ld *ld, struct cfg_node *n) {
  const char *v = n->value, *home = getenv("HOME");
  char *joined = NULL, *base = NULL;
  int rc;
  if (v[0] == '/') {
    rc = asprintf(&joined, "%s", v);
  } else if (v[0] == '~' && (v[1] == '/' || !v[1]) && home) {
    rc = asprintf(&joined, "%s/%s", home, v + 1);
  } else {
    if (is_set_node(n))
      base = strdup(ld->cwd); /* overrides come from the command line */
    else if (n->file[0] == '<')
      base = strdup(ld->wf_dir);
    else
      base = abs_dir(ld, n->file);
    rc = base ? asprintf(&joined, "%s/%s", base, v) : -1;
    free(base);
  }
  if (rc < 0) return;
  normalize_path(joined);
  free(n->value);
  n->value = joined;
}

/* Whether the load checks the input files of `stage`: ld->inputs is "*" or
 * names it among space-separated stage names. */
static int wants_inputs_of(const struct ld *ld, const char *stage) {
  if (!ld->inputs) return 0;
  if (strcmp(ld->inputs, "*") == 0) return 1;
  size_t len = strlen(stage);
  for (const char *c = ld->inputs; (c = strstr(c, stage)); c += len)
    if ((c == ld->inputs || c[-1] == ' ') && (c[len] == ' ' || !c[len])) return 1;
  return 0;
}

/* An input file (a resolved path) must exist and not be a folder; a pattern
 * (as the ingest stage expands it) must match something. */
static void check_input(struct ld *ld, const struct cfg_node *n, const struct path *p) {
  const char *v = n->value;
  if (strpbrk(v, "*?[")) {
    glob_t gl;
    int rc = glob(v, 0, NULL, &gl);
    if (rc == GLOB_NOMATCH)
      err_node(ld, n, path_str(p), "no file matches: %s", v);
    else if (rc != 0)
      err_node(ld, n, path_str(p), "cannot expand the pattern: %s", v);
    if (rc == 0) globfree(&gl);
    return;
  }
  struct stat sb;
  if (stat(v, &sb) != 0) {
    if (errno == ENOENT || errno == ENOTDIR)
      err_node(ld, n, path_str(p), "no such file: %s", v);
    else
      err_node(ld, n, path_str(p), "cannot access %s: %s", v, strerror(errno));
  } else if (S_ISDIR(sb.st_mode)) {
    err_node(ld, n, path_str(p), "a folder, not a file: %s", v);
  }
}

static void check_labels(struct ld *ld, struct cfg_node *n, struct path *p) {
  if (n->kind == CFG_LIST) {
    for (int i = 0; i < n->n_kids; i++) {
      struct cfg_node *k = n->kids[i];
      size_t old = path_push_index(p, i);
      if (k->kind != CFG_SCALAR)
        err_expected(ld, k, p, "a label name");
      else
        k->type = CFG_T_STRING;
      path_pop(p, old);
    }
  } else if (n->kind == CFG_MAP) {
    for (int i = 0; i < n->n_kids; i++) {
      struct cfg_node *k = n->kids[i];
      size_t old = path_push(p, k->key);
      int64_t iv;
      double fv;
      if (k->kind == CFG_SCALAR && parse_int(k->value, &iv) == 1) {
        k->type = CFG_T_INT;
        k->i = iv;
        k->f = (double)iv;
      } else if (k->kind == CFG_SCALAR && parse_float(k->value, &fv)) {
        k->type = CFG_T_FLOAT;
        k->f = fv;
      } else {
        err_expected(ld, k, p, "a number");
      }
      path_pop(p, old);
    }
  } else {
    err_expected(ld, n, p, "a list of label names or a mapping name: number");
  }
}

static void validate(struct ld *ld, struct cfg_node *n, const struct cfg_node *s, struct path *p);

/* A default value from the schema, as a node of its own. */
static struct cfg_node *make_default(const struct cfg_node *d, const char *key) {
  struct cfg_node *n = cfg_node_copy(d);
  if (!n) return NULL;
  set_loc(n, DEFAULT_FILE, 0, 0);
  free(n->key);
  n->key = strdup(key);
  return n;
}

static void err_unknown(struct ld *ld, const struct cfg_node *k, const struct cfg_node *fields, const struct path *p) {
  /* a stage's section written at the top level */
  if (find_kid(fields, "stages") && find_kid(find_kid(fields, "stages"), k->key)) {
    err_node(ld, k, path_str(p), "unknown key '%s'; did you mean 'stages.%s'?", k->key, k->key);
    return;
  }
  int nc;
  const char **cands = keys_of(fields, &nc);
  const char *sug = cands ? suggest(k->key, cands, nc) : NULL;
  if (sug)
    err_node(ld, k, path_str(p), "unknown key '%s'; did you mean '%s'?", k->key, sug);
  else
    err_node(ld, k, path_str(p), "unknown key '%s'", k->key);
  free(cands);
}

/* The fields of a section or object: check the keys given, fill the absent
 * ones, and put them in schema order (unknown keys last). */
static void validate_fields(struct ld *ld, struct cfg_node *m, const struct cfg_node *fields, struct path *p) {
  int w = 0;
  for (int i = 0; i < m->n_kids; i++) {
    struct cfg_node *k = m->kids[i];
    const struct cfg_node *f = find_kid(fields, k->key);
    size_t old = path_push(p, k->key);
    if (!f) {
      err_unknown(ld, k, fields, p);
    } else if (k->kind == CFG_NULL && sch_type(f)) {
      /* `key:` with nothing after it: as if absent */
      if (!sch_flag(f, "required", 0)) {
        cfg_node_free(k);
        path_pop(p, old);
        continue;
      }
      err_node(ld, k, path_str(p), "a value is required");
    } else {
      validate(ld, k, f, p);
    }
    path_pop(p, old);
    m->kids[w++] = k;
  }
  m->n_kids = w;

  for (int i = 0; fields && i < fields->n_kids; i++) {
    const struct cfg_node *f = fields->kids[i];
    if (!f->key || find_kid(m, f->key)) continue;
    size_t old = path_push(p, f->key);
    const struct cfg_node *d = find_kid(f, "default");
    struct cfg_node *n = NULL;
    if (sch_flag(f, "required", 0))
      err_node(ld, m, path_str(p), "required key is missing");
    else if (d)
      n = make_default(d, f->key);
    else if (f->kind == CFG_MAP && !sch_type(f))
      n = cfg_node_new(CFG_MAP, f->key, DEFAULT_FILE, 0, 0); /* a section: fill its defaults */
    if (n) {
      validate(ld, n, f, p);
      cfg_node_add(m, n);
    }
    path_pop(p, old);
  }

  if (!fields || m->n_kids < 2) return;
  struct cfg_node **sorted = malloc((size_t)m->n_kids * sizeof *sorted);
  if (!sorted) return;
  int ns = 0;
  for (int i = 0; i < fields->n_kids; i++) {
    int j = fields->kids[i]->key ? kid_index(m, fields->kids[i]->key) : -1;
    if (j >= 0) sorted[ns++] = m->kids[j];
  }
  for (int i = 0; i < m->n_kids; i++)
    if (!find_kid(fields, m->kids[i]->key)) sorted[ns++] = m->kids[i];
  memcpy(m->kids, sorted, (size_t)ns * sizeof *sorted);
  free(sorted);
}

static void validate(struct ld *ld, struct cfg_node *n, const struct cfg_node *s, struct path *p) {
  if (!s || s->kind != CFG_MAP) {
    err_node(ld, n, path_str(p), "schema: no usable entry for this key");
    return;
  }
  const char *t = sch_type(s);
  if (!t) { /* a plain section */
    if (n->kind == CFG_NULL) n->kind = CFG_MAP;
    if (n->kind != CFG_MAP)
      err_expected(ld, n, p, "a mapping");
    else
      validate_fields(ld, n, s, p);
    return;
  }
  int is_scalar = n->kind == CFG_SCALAR;
  if (strcmp(t, "string") == 0) {
    if (!is_scalar)
      err_expected(ld, n, p, "a string");
    else
      n->type = CFG_T_STRING;
  } else if (strcmp(t, "path") == 0) {
    if (!is_scalar || !n->value[0]) {
      err_expected(ld, n, p, "a path");
    } else {
      resolve_path(ld, n);
      n->type = CFG_T_PATH;
      const char *input = sch_text(s, "input");
      if (input && wants_inputs_of(ld, input)) check_input(ld, n, p);
    }
  } else if (strcmp(t, "int") == 0) {
    if (!is_scalar)
      err_expected(ld, n, p, "an integer");
    else
      check_int(ld, n, s, p);
  } else if (strcmp(t, "float") == 0) {
    if (!is_scalar)
      err_expected(ld, n, p, "a number");
    else
      check_float(ld, n, s, p);
  } else if (strcmp(t, "bool") == 0) {
    int b;
    if (!is_scalar || !parse_bool(n->value, &b)) {
      err_expected(ld, n, p, "true or false");
    } else {
      n->type = CFG_T_BOOL;
      n->i = b;
      n->f = b;
      set_value(n, b ? "true" : "false");
    }
  } else if (strcmp(t, "enum") == 0) {
    check_enum(ld, n, s, p);
  } else if (strcmp(t, "list") == 0) {
    const struct cfg_node *items = find_kid(s, "items");
    if (n->kind != CFG_LIST) {
      err_expected(ld, n, p, "a list");
    } else {
      for (int i = 0; items && i < n->n_kids; i++) {
        size_t old = path_push_index(p, i);
        validate(ld, n->kids[i], items, p);
        path_pop(p, old);
      }
    }
  } else if (strcmp(t, "map") == 0) {
    const struct cfg_node *values = find_kid(s, "values");
    if (n->kind != CFG_MAP) {
      err_expected(ld, n, p, "a mapping");
    } else {
      for (int i = 0; values && i < n->n_kids; i++) {
        size_t old = path_push(p, n->kids[i]->key);
        validate(ld, n->kids[i], values, p);
        path_pop(p, old);
      }
    }
  } else if (strcmp(t, "object") == 0) {
    if (n->kind != CFG_MAP)
      err_expected(ld, n, p, "a mapping");
    else
      validate_fields(ld, n, find_kid(s, "fields"), p);
  } else if (strcmp(t, "labels") == 0) {
    check_labels(ld, n, p);
  } else {
    err_node(ld, n, path_str(p), "schema: unknown type '%s'", t);
  }
  if (!sch_flag(s, "hash", 1)) mark_no_hash(n);
}

/* ---- load ------------------------------------------------------------------------ */

struct cfg_node *cfg_load(const char *path, const char *const *sets, int n_sets, struct cfg_errors *errs) {
  return cfg_load_checked(path, sets, n_sets, NULL, errs);
}

struct cfg_node *cfg_load_checked(const char *path, const char *const *sets, int n_sets, const char *input_stages,
                                  struct cfg_errors *errs) {
  struct ld ld = {.errs = errs, .inputs = input_stages};
  if (!path) {
    add_msg(&ld, strdup("?:0:0: (root): no workflow file given"));
    return NULL;
  }
  ld.cwd = getcwd(NULL, 0);
  if (!ld.cwd) ld.cwd = strdup("/");
  ld.wf_dir = ld.cwd ? abs_dir(&ld, path) : NULL;
  struct cfg_node *root = NULL, *schema = NULL;
  if (!ld.wf_dir) {
    add_msg(&ld, strdup("?:0:0: (root): out of memory"));
    goto out;
  }
  schema = yp_load(&ld, SCHEMA_FILE, cfg_defaults_yaml, strlen(cfg_defaults_yaml), NULL);
  if (!schema) goto out;
  root = load_file(&ld, path, NULL, NULL);
  /* without a workflow, still check the overrides' syntax */
  struct cfg_node *target = root ? root : cfg_node_new(CFG_MAP, NULL, DEFAULT_FILE, 0, 0);
  for (int i = 0; target && i < n_sets; i++)
    if (sets[i]) apply_set(&ld, target, schema, sets[i]);
  if (!root) {
    cfg_node_free(target);
    goto out;
  }
  /* workdir defaults to runs/<workflow> beside the workflow file ("<default>"
   * paths resolve against that folder) */
  const struct cfg_node *wf = find_kid(root, "workflow");
  if (!find_kid(root, "workdir") && wf && wf->kind == CFG_SCALAR) {
    struct cfg_node *wd = cfg_node_new(CFG_SCALAR, "workdir", DEFAULT_FILE, 0, 0);
    if (wd && asprintf(&wd->value, "runs/%s", wf->value) < 0) wd->value = NULL;
    if (wd && wd->value)
      cfg_node_add(root, wd);
    else
      cfg_node_free(wd);
  }
  resolve_model(&ld, root);
  struct path p = {0};
  validate(&ld, root, schema, &p);
  free(p.s);
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
  if (ld.n_errs) {
    cfg_node_free(root);
    return NULL;
  }
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
  h = cfg_hash(h, stage ? find_kid(find_kid(root, "stages"), stage) : NULL);
  if (with_sets) {
    h = hash_marker(h, "sets");
    h = cfg_hash(h, find_kid(root, "sets"));
  }
  snprintf(out, 17, "%016llx", (unsigned long long)h);
}
