/* config_internal.h — what the files of the configuration loader share; not
 * for use outside pipeline/config*.c (the public API is pipeline/config.h).
 *
 *   config.c           the public API (load, print, stage hash), a saved
 *                      model's settings
 *   config_parse.c     YAML text to tree (the schema's too), files and
 *                      includes (bounded), model presets, --set overrides
 *   config_schema.c    the schema's entries, the scalar types, paths and
 *                      input files
 *   config_validate.c  checking a tree against the schema, defaults, "did
 *                      you mean"
 *   config_doc.c       the schema as the configuration reference (Markdown)
 *   config_util.c      the leaf: key paths, child lookup, file paths, errors
 *                      (file:line:col, --set origins)
 *
 * Calls run one way: config.c -> {parse, validate, schema, doc, util},
 * doc -> {parse, schema}, validate -> schema, and all of them -> util.
 *
 * A load runs: parse the schema; parse the workflow and its includes (each
 * file once); apply --set; resolve the model preset; validate and fill
 * defaults. Every problem is appended to the caller's struct cfg_errors.
 */
#ifndef SE3_CONFIG_INTERNAL_H
#define SE3_CONFIG_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "pipeline/config.h"

/* the file of nodes that --set made, defaults filled in, and the schema */
#define SET_FILE "<--set>"
#define DEFAULT_FILE CFG_DEFAULT_FILE
#define SCHEMA_FILE "<defaults>"

/* The key naming a saved model to score with: a checkpoint file, a workdir or
 * a workdir's models/ folder (stages/modelcard.h). The loader checks it as a
 * model (its members and their cards, config.c), not as an input file. */
#define MODEL_KEY "stages.score.checkpoint"

/* ---- loader state ---------------------------------------------------------- */

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
  int skip_missing;   /* an include or model file that does not exist is passed over (cfg_load_no_inputs) */
};

/* ---- config_util.c ----------------------------------------------------------- */

/* A dotted key path grown and shrunk while walking the tree. */
struct path {
  char *s;
  size_t len, cap;
};

/* Append ".seg" (or "seg" at the root), or ".i"; returns the old length for cfg_path_pop. */
size_t cfg_path_push(struct path *p, const char *seg);
size_t cfg_path_push_index(struct path *p, int i);
void cfg_path_pop(struct path *p, size_t old);
const char *cfg_path_str(const struct path *p);

/* The child of a mapping with this key (NULL / -1 when absent). */
struct cfg_node *cfg_find_kid(const struct cfg_node *n, const char *key);
int cfg_kid_index(const struct cfg_node *n, const char *key);
/* Set the location of n and of everything under it. */
void cfg_set_loc(struct cfg_node *n, const char *file, int line, int col);
/* Remove "." and "x/.." components of an absolute path, in place. */
void cfg_normalize_path(char *s);
/* Absolute folder of a file name (relative names are from the cwd); malloc'd. */
char *cfg_abs_dir(const struct ld *ld, const char *file);

/* Errors: "file:line:col: key.path: message", or "--set TEXT: key.path:
 * message" for a node an override made. cfg_add_msg takes the message. */
void cfg_add_msg(struct ld *ld, char *msg);
void cfg_verr(struct ld *ld, const char *file, int line, int col, const char *origin, const char *path, const char *fmt,
              va_list ap);
void cfg_err_at(struct ld *ld, const char *file, int line, int col, const char *origin, const char *path,
                const char *fmt, ...) __attribute__((format(printf, 7, 8)));
void cfg_err_node(struct ld *ld, const struct cfg_node *n, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int cfg_is_set_node(const struct cfg_node *n);
/* Remember (forget, before it is freed) that a tree came from --set TEXT. */
void cfg_register_tree(struct ld *ld, const struct cfg_node *n, const char *text);
void cfg_unregister_tree(struct ld *ld, const struct cfg_node *n);
/* How a value looks ("a list", "'x'"), and "expected WHAT, got that". */
void cfg_describe(const struct cfg_node *n, char *buf, size_t size);
void cfg_err_expected(struct ld *ld, const struct cfg_node *n, const struct path *p, const char *what);

/* ---- config_parse.c ------------------------------------------------------------ */

/* Parse one YAML text into a tree; an empty text is a CFG_NULL node. origin:
 * the --set text when parsing an override's value. NULL on errors. */
struct cfg_node *cfg_parse_yaml(struct ld *ld, const char *file, const char *text, size_t len, const char *origin);
/* A file and its includes, merged (the file wins); `from` is the include item
 * or model key naming it, NULL for the workflow. NULL on errors. */
struct cfg_node *cfg_load_file(struct ld *ld, const char *file, const struct cfg_node *from, const char *from_path);
/* stages.train.model: a preset's or a file's keys become the base of stages.train.arch. */
void cfg_resolve_model(struct ld *ld, struct cfg_node *root);
/* One --set KEY=VALUE on the tree (the schema tells the stage shorthand). */
void cfg_apply_set(struct ld *ld, struct cfg_node *root, const struct cfg_node *schema, const char *set);

/* The schema (configs/defaults.yaml, compiled in). */
struct cfg_node *cfg_schema_load(struct ld *ld);

/* ---- config_schema.c ------------------------------------------------------------- */

/* A schema entry's type, a flag (dflt when absent) and a scalar field. */
const char *cfg_sch_type(const struct cfg_node *s);
int cfg_sch_flag(const struct cfg_node *s, const char *key, int dflt);
const char *cfg_sch_text(const struct cfg_node *s, const char *key);
/* Scalars by type. cfg_parse_int: 1 = ok, 0 = not an integer, -1 = overflow;
 * the others 1 = ok, 0 = not one. */
int cfg_parse_int(const char *s, int64_t *out);
int cfg_parse_float(const char *s, double *out);
int cfg_parse_bool(const char *s, int *out);
/* Make a path value absolute (relative to the file that wrote it). */
void cfg_resolve_path(struct ld *ld, struct cfg_node *n);
/* Whether this load checks the input files of `stage`; check one. */
int cfg_wants_inputs_of(const struct ld *ld, const char *stage);
void cfg_check_input(struct ld *ld, const struct cfg_node *n, const struct path *p);

/* ---- config_validate.c ----------------------------------------------------------- */

/* Check n against schema entry s: types, ranges, keys; fill defaults. */
void cfg_validate(struct ld *ld, struct cfg_node *n, const struct cfg_node *s, struct path *p);
void cfg_mark_older(struct cfg_node *n, const struct cfg_node *s);
/* A tree that validation refused values of, made safe to read: every value
 * that failed (a wrong kind or type, out of range, a required key left out)
 * replaced by a stand-in (CFG_INVALID_FILE, common/cfgtree.h), every
 * section and key with a default under one filled in. Returns the root
 * (itself a stand-in where it was no mapping). */
struct cfg_node *cfg_make_sound(struct cfg_node *root, const struct cfg_node *schema);

#endif
