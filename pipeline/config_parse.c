/* config_parse.c — YAML to a configuration tree: libyaml events to nodes
 * (anchors, aliases with a cap), one file with its includes, model presets
 * and --set overrides.
 *
 * Bounds: a configuration file is a regular file of at most 1 MiB, opened
 * without blocking (a FIFO or a device is refused at once); each file is
 * parsed once per load, so includes that form a diamond cost linear time; an
 * include cycle is an error naming the chain; mappings are de-duplicated and
 * merged through a hash index of their keys.
 */
#define _GNU_SOURCE
#include "pipeline/config_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

/* the model presets of configs/models/, compiled in (cmake/embed_presets.cmake) */
extern const struct cfg_preset { const char *name, *text; } cfg_model_presets[];

#define MAX_DEPTH 256            /* deeper YAML is surely a mistake; keeps recursion bounded */
#define MAX_ALIAS_NODES 1000000  /* caps alias expansion ("billion laughs") */
#define MAX_FILE_BYTES (1 << 20) /* a workflow, fragment or model file: 1 MiB */
#define MAX_FILE_TEXT "1 MiB"
#define MAX_INCLUDE_DEPTH 64 /* files open at once along one include chain */

/* ---- small helpers ----------------------------------------------------------- */

static struct cfg_node *detach_kid(struct cfg_node *n, const char *key) {
  int i = cfg_kid_index(n, key);
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
  cfg_err_at(y->ld, y->file, (int)m.line + 1, (int)m.column + 1, y->origin, "yaml", "%s",
             y->parser.problem ? y->parser.problem : "cannot parse");
  y->failed = 1;
  return 0;
}

__attribute__((format(printf, 3, 4))) static void yp_err(struct yp *y, yaml_mark_t m, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  cfg_verr(y->ld, y->file, (int)m.line + 1, (int)m.column + 1, y->origin, "yaml", fmt, ap);
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
struct cfg_node *cfg_parse_yaml(struct ld *ld, const char *file, const char *text, size_t len, const char *origin) {
  struct yp y = {.ld = ld, .file = file, .origin = origin};
  if (!yaml_parser_initialize(&y.parser)) {
    cfg_err_at(ld, file, 0, 0, origin, "yaml", "out of memory");
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

/* The schema: configs/defaults.yaml, compiled in (defaults_yaml.c). */
extern const char cfg_defaults_yaml[];

struct cfg_node *cfg_schema_load(struct ld *ld) {
  return cfg_parse_yaml(ld, SCHEMA_FILE, cfg_defaults_yaml, strlen(cfg_defaults_yaml), NULL);
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
      size_t old = cfg_path_push_index(p, i);
      tidy(ld, n->kids[i], p);
      cfg_path_pop(p, old);
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
      size_t old = cfg_path_push(p, k->key);
      cfg_err_node(ld, k, cfg_path_str(p), "duplicate key (first at line %d)", n->kids[j]->line);
      cfg_path_pop(p, old);
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
      size_t old = cfg_path_push(p, "<<");
      cfg_err_node(ld, mk, cfg_path_str(p), "a merge key needs a mapping or a list of mappings");
      cfg_path_pop(p, old);
    } else if (mk->kind == CFG_MAP) {
      add_missing(n, mk);
    } else {
      for (int i = 0; i < mk->n_kids; i++)
        add_missing(n, mk->kids[i]);
    }
    cfg_node_free(mk);
  }
  for (int i = 0; i < n->n_kids; i++) {
    size_t old = cfg_path_push(p, n->kids[i]->key);
    tidy(ld, n->kids[i], p);
    cfg_path_pop(p, old);
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
    cfg_err_node(ld, from, from_path, "cannot read '%s': %s", file, why);
  else
    cfg_err_at(ld, file, 0, 0, NULL, "", "cannot read: %s", why);
}

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
  struct cfg_node *t = cfg_parse_yaml(ld, file, text, len, NULL);
  free(text);
  if (t && t->kind == CFG_NULL) t->kind = CFG_MAP;
  if (t && t->kind != CFG_MAP) {
    cfg_err_node(ld, t, "", "%s must be a mapping of keys", from ? "an included file" : "a workflow");
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
          cfg_describe(item, d, sizeof d);
          cfg_err_node(ld, item, ip, "expected a file name, got %s", d);
          continue;
        }
        char *name = join_rel(file, item->value);
        struct cfg_node *frag = name ? cfg_load_file(ld, name, item, ip) : NULL;
        free(name);
        if (frag) base = base ? merge(base, frag) : frag;
      }
      ld->n_stack--;
    }
  } else if (inc && inc->kind != CFG_NULL) {
    char d[96];
    cfg_describe(inc, d, sizeof d);
    cfg_err_node(ld, inc, "include", "expected a list of files, got %s", d);
  }
  cfg_node_free(inc);
  return base ? merge(base, t) : t;
}

/* Load a file and its includes; `from` is the include item naming it (NULL
 * for the workflow itself). Returns the merged tree (the caller's to free) or
 * NULL. Every file is parsed once per load: a later inclusion of the same file
 * gets a copy of the first one's tree, which is what parsing it again would
 * give, so includes that form a diamond cost linear, not exponential, time. */
struct cfg_node *cfg_load_file(struct ld *ld, const char *file, const struct cfg_node *from, const char *from_path) {
  char *real = realpath(file, NULL);
  if (!real) {
    /* a workflow in documentation may name a fragment or model file the
     * reader will write: passed over, the rest still checked */
    if (ld->skip_missing && from && (errno == ENOENT || errno == ENOTDIR)) return NULL;
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
    cfg_err_node(ld, from, from_path, "include cycle: %s%s", chain ? chain : "", file);
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
void cfg_resolve_model(struct ld *ld, struct cfg_node *root) {
  struct cfg_node *stages = cfg_find_kid(root, "stages"), *train = stages ? cfg_find_kid(stages, "train") : NULL;
  if (!train || train->kind != CFG_MAP) return;
  const struct cfg_node *model = cfg_find_kid(train, "model");
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
    if (path) preset = cfg_load_file(ld, path, model, "stages.train.model");
    free(path);
  } else {
    const struct cfg_preset *p = cfg_model_presets;
    while (p->name && strcmp(p->name, name))
      p++;
    if (!p->name) {
      char list[256] = "";
      for (const struct cfg_preset *q = cfg_model_presets; q->name; q++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", q == cfg_model_presets ? "" : ", ", q->name);
      cfg_err_node(ld, model, "stages.train.model", "unknown model preset '%s' (presets: %s; or a path to a YAML file)",
                   name, list);
      return;
    }
    char file[96];
    snprintf(file, sizeof file, "configs/models/%s.yaml", p->name);
    preset = cfg_parse_yaml(ld, file, p->text, strlen(p->text), NULL);
    if (preset) {
      struct path pp = {0};
      tidy(ld, preset, &pp);
      free(pp.s);
    }
  }
  if (!preset) return;
  if (preset->kind != CFG_MAP) {
    cfg_err_node(ld, preset, "stages.train.model", "a model preset must be a mapping of keys");
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

void cfg_apply_set(struct ld *ld, struct cfg_node *root, const struct cfg_node *schema, const char *set) {
  const char *eq = strchr(set, '=');
  if (!eq || eq == set) {
    cfg_err_at(ld, SET_FILE, 0, 0, set, eq ? "" : set, "expected key=value");
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
    int shorthand = !cfg_find_kid(schema, key) && cfg_find_kid(cfg_find_kid(schema, "stages"), key);
    if (first_dot) *first_dot = '.';
    if (shorthand) seg[n_seg++] = "stages";
  }
  for (char *c = key;;) {
    char *dot = strchr(c, '.');
    if (dot) *dot = 0;
    seg[n_seg++] = c;
    if (!*c) {
      cfg_err_at(ld, SET_FILE, 0, 0, set, "", "empty element in key '%.*s'", (int)(eq - set), set);
      goto out;
    }
    if (!dot) break;
    c = dot + 1;
  }
  value = cfg_parse_yaml(ld, SET_FILE, eq + 1, strlen(eq + 1), set);
  if (!value) goto out;
  cfg_set_loc(value, SET_FILE, 0, 0);

  struct cfg_node *cur = root;
  for (int i = 0; i < n_seg; i++) {
    size_t old = cfg_path_push(&p, seg[i]);
    int last = i == n_seg - 1, idx;
    if (cur->kind == CFG_NULL) cur->kind = CFG_MAP;
    if (cur->kind == CFG_MAP) {
      int j = cfg_kid_index(cur, seg[i]);
      if (last) {
        free(value->key);
        value->key = strdup(seg[i]);
        if (j >= 0) {
          cfg_unregister_tree(ld, cur->kids[j]);
          cfg_node_free(cur->kids[j]);
          cur->kids[j] = value;
        } else {
          cfg_node_add(cur, value);
        }
        cfg_register_tree(ld, value, set);
        value = NULL;
        break;
      }
      if (j < 0) {
        struct cfg_node *m = cfg_node_new(CFG_MAP, seg[i], SET_FILE, 0, 0);
        if (!m) goto out;
        cfg_node_add(cur, m);
        cfg_register_tree(ld, m, set);
        j = cur->n_kids - 1;
      }
      cur = cur->kids[j];
    } else if (cur->kind == CFG_LIST && parse_index(seg[i], &idx) && idx <= cur->n_kids &&
               (last || idx < cur->n_kids)) {
      if (last) {
        free(value->key);
        value->key = NULL;
        if (idx < cur->n_kids) {
          cfg_unregister_tree(ld, cur->kids[idx]);
          cfg_node_free(cur->kids[idx]);
          cur->kids[idx] = value;
        } else {
          cfg_node_add(cur, value);
        }
        cfg_register_tree(ld, value, set);
        value = NULL;
        break;
      }
      cur = cur->kids[idx];
    } else {
      if (cur->kind != CFG_LIST) cfg_path_pop(&p, old); /* name the value that is in the way */
      cfg_err_at(ld, SET_FILE, 0, 0, set, cfg_path_str(&p), "%s",
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
