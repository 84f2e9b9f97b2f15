/* config.h — workflows in YAML: load, include, override, validate, print, hash.
 *
 * The schema is configs/defaults.yaml (compiled into the binary). Loading
 * reports every problem before any work starts, all at once, each as
 *   file:line:col: key.path: message
 * with 1-based line and column. Unknown keys get a "did you mean" suggestion.
 * Every configuration file (workflow, include, model file) must be a regular
 * file of at most 1 MiB.
 */
#ifndef SE3_CONFIG_H
#define SE3_CONFIG_H

#include <stdio.h>
#include "common/cfgtree.h"

struct cfg_errors {
  char **msgs;
  int n;
};
void cfg_errors_free(struct cfg_errors *e);

/* Load a workflow: parse YAML (with `include:` fragments, relative to the
 * including file), apply "--set" overrides ("stages.ingest.workers=2" or
 * "ingest.workers=2" as a shorthand for a stage), validate against the schema,
 * fill defaults, resolve paths relative to the workflow file (`workdir`
 * defaults to runs/<workflow name> beside the file).
 * Returns the resolved tree, or NULL with every problem in errs. */
struct cfg_node *cfg_load(const char *path, const char *const *sets, int n_sets, struct cfg_errors *errs);

/* As cfg_load, and also report input files that are missing, among the other
 * problems: every path whose schema entry says `input: STAGE`, for the stages
 * named in input_stages (space-separated; "*" = all; NULL = none), must name
 * an existing file (or a pattern matching one):
 *   file:line:col: sets.train.0.path: no such file: /abs/path */
struct cfg_node *cfg_load_checked(const char *path, const char *const *sets, int n_sets, const char *input_stages,
                                  struct cfg_errors *errs);

/* As cfg_load, for workflows in documentation (`se3screen check --no-inputs`):
 * every key is checked against the schema as cfg_load checks it, but no file
 * that the workflow names must exist: input files are not looked for, and an
 * include, a model file (stages.train.model) or a checkpoint that is not
 * there is passed over (its keys are then not checked). One that exists is
 * read as cfg_load reads it. */
struct cfg_node *cfg_load_no_inputs(const char *path, const char *const *sets, int n_sets, struct cfg_errors *errs);

/* As cfg_load_checked (no_inputs: as cfg_load_no_inputs), for `check` and
 * `run`, which report every problem of a workflow in one pass: where the
 * workflow has problems but its YAML was read, the tree comes back all the
 * same (errs->n > 0 tells), every value the loader refused replaced by a
 * stand-in (cfg_invalid, common/cfgtree.h) that the getters read, so the
 * checks of the input files (stages/check_inputs.h) run on what is valid.
 * NULL, with the problems in errs, only where no tree could be read (a YAML
 * error in the workflow). The caller frees the tree either way. */
struct cfg_node *cfg_load_partial(const char *path, const char *const *sets, int n_sets, const char *input_stages,
                                  int no_inputs, struct cfg_errors *errs);

/* The schema's default of a dotted key, as its text; NULL where it has none.
 * For a command that works without a workflow (merge, upgrade): a loaded
 * tree has every default filled in, to be read with the getters. */
const char *cfg_schema_default(const char *key);
/* How long an open of a result database waits for another process's lock
 * (sqlite3_busy_timeout, ms): root's store.busy_timeout_ms, or the
 * schema's default where there is no workflow (status, export, merge of
 * shards alone). The one source of that number. */
int cfg_busy_timeout_ms(const struct cfg_node *root);
/* Print the resolved tree as YAML (defaults filled, keys in schema order). */
void cfg_print(FILE *f, const struct cfg_node *root);

/* The configuration reference as Markdown (docs/configuration.md, `se3screen
 * keys`): a table a section of the schema, a row a key (type, default,
 * bounds, whether it changes results, its doc: text). 0, or -1 when the
 * schema cannot be read or a key has no doc: text (named on stderr). */
int cfg_doc_markdown(FILE *f);

/* The canonical hash of one stage's configuration, as 16 hex digits
 * (stages.<name>, plus `sets` for stages that read the inputs). */
void cfg_stage_hash(const struct cfg_node *root, const char *stage, int with_sets, char out[17]);

#endif
