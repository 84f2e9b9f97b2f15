/* cfgtree.h — the resolved configuration tree: built by pipeline/ (YAML,
 * includes, --set, schema; pipeline/config.h), read by stages/ through the
 * lookups and typed getters below, and hashed canonically to key the ledger.
 * A leaf module: it includes nothing of the project, so pipeline and stages
 * can both use it without an include running against pipeline -> stages. */
#ifndef SE3_CFGTREE_H
#define SE3_CFGTREE_H

#include <stddef.h>
#include <stdint.h>

enum cfg_kind { CFG_NULL, CFG_SCALAR, CFG_LIST, CFG_MAP };

/* Type of a scalar after validation against the schema. */
enum cfg_type { CFG_T_ANY, CFG_T_STRING, CFG_T_PATH, CFG_T_INT, CFG_T_FLOAT, CFG_T_BOOL, CFG_T_ENUM };

struct cfg_node {
  enum cfg_kind kind;
  enum cfg_type type;     /* for scalars, once validated */
  char *key;              /* key in the parent mapping, NULL for list items */
  char *value;            /* scalar text; for CFG_T_PATH an absolute path */
  int64_t i;              /* CFG_T_INT, CFG_T_BOOL (0/1) */
  double f;               /* CFG_T_FLOAT, and CFG_T_INT as a double */
  int no_hash;            /* leaf does not change results (workers, progress) */
  struct cfg_node **kids; /* list items or mapping entries, in order */
  int n_kids;
  int cap_kids;           /* room in kids (cfg_node_add grows it geometrically) */
  char *file;             /* where the node was written (1-based line:col), */
  int line, col;          /* "<default>" / "<--set>" for filled-in values    */
};

/* Look up a dotted path ("stages.ingest.workers"); NULL when absent. */
const struct cfg_node *cfg_get(const struct cfg_node *n, const char *path);
/* The file of the nodes the loader fills in from the schema's defaults. */
#define CFG_DEFAULT_FILE "<default>"
/* 1 when the workflow wrote n (a file's node, or a --set's), 0 for a default
 * the loader filled in (CFG_DEFAULT_FILE) or no node. */
int cfg_written(const struct cfg_node *n);
/* Typed getters over a dotted path; `dflt` is returned when absent. */
int64_t cfg_int(const struct cfg_node *n, const char *path, int64_t dflt);
double cfg_float(const struct cfg_node *n, const char *path, double dflt);
int cfg_bool(const struct cfg_node *n, const char *path, int dflt);
const char *cfg_str(const struct cfg_node *n, const char *path, const char *dflt);

struct cfg_node *cfg_node_new(enum cfg_kind kind, const char *key, const char *file, int line, int col);
void cfg_node_add(struct cfg_node *parent, struct cfg_node *kid);
struct cfg_node *cfg_node_copy(const struct cfg_node *n);
void cfg_node_free(struct cfg_node *n);

/* 64-bit FNV-1a, used for canonical configuration hashes. */
#define SE3_HASH_INIT 0xcbf29ce484222325ULL
uint64_t se3_hash_bytes(uint64_t h, const void *p, size_t n);
uint64_t se3_hash_str(uint64_t h, const char *s);
/* Hash of a subtree in canonical form: mapping keys in sorted order, scalars by
 * their resolved text, no_hash leaves skipped. Key order in the YAML does not
 * matter; any value change does. */
uint64_t cfg_hash(uint64_t h, const struct cfg_node *n);

#endif
