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
  struct cfg_node *parent; /* the list or mapping holding it (NULL at a root): set by cfg_node_add,
                            * cfg_node_copy and cfg_link_parents; names a key in full in errors */
};

/* Look up a dotted path ("stages.ingest.workers"); NULL when absent. */
const struct cfg_node *cfg_get(const struct cfg_node *n, const char *path);
/* The file of the nodes the loader fills in from the schema's defaults. */
#define CFG_DEFAULT_FILE "<default>"
/* 1 when the workflow wrote n (a file's node, or a --set's), 0 for a default
 * the loader filled in (CFG_DEFAULT_FILE) or no node. */
int cfg_written(const struct cfg_node *n);
/* The file of a stand-in: a value the workflow wrote that the loader
 * refused (a wrong type, out of range, a mapping where a list belongs...),
 * in a tree handed on despite its errors (cfg_load_partial) so that the
 * checks of the input files run on what is valid. A stand-in holds the
 * schema's default or an empty value of the key's type, so the getters read
 * it; a check that depends on it is skipped rather than made on a value the
 * workflow did not give. Everything under a refused section is one too. */
#define CFG_INVALID_FILE "<invalid>"
/* 1 for a stand-in (CFG_INVALID_FILE), 0 otherwise (no node too). */
int cfg_invalid(const struct cfg_node *n);
/* Typed getters over a dotted path. Defaults are written once, in the schema
 * (configs/defaults.yaml): the loader fills every key that has one into the
 * tree, so the getters take none. A key absent from the tree is a programming
 * error (not in the schema, no default there, or a misspelt path): the getter
 * prints one line naming the full dotted path to stderr and aborts. So does
 * a scalar whose text is not of the type asked (only in a tree the loader did
 * not validate). */
int64_t cfg_int(const struct cfg_node *n, const char *path);
double cfg_float(const struct cfg_node *n, const char *path);
int cfg_bool(const struct cfg_node *n, const char *path);
const char *cfg_str(const struct cfg_node *n, const char *path);
/* A key that is optional on purpose (no default in the schema: its absence
 * means something, e.g. stages.score.checkpoint): its text, or NULL when
 * absent. It still aborts, as above, when the schema does not know the key
 * at all, where a check is registered (below) and n's tree reaches up to a
 * root; else it just returns NULL. */
const char *cfg_str_opt(const struct cfg_node *n, const char *path);
/* The schema's check "is this dotted path (list items by index, a map's
 * values by any key) a key of the schema?", registered by pipeline/ where it
 * loads configuration (common/ knows nothing of the schema). */
void cfg_set_schema_check(int (*known)(const char *dotted));
/* n's dotted path from its root (list items by index), "" for a root. */
void cfg_node_path(const struct cfg_node *n, char *buf, size_t len);

struct cfg_node *cfg_node_new(enum cfg_kind kind, const char *key, const char *file, int line, int col);
void cfg_node_add(struct cfg_node *parent, struct cfg_node *kid);
struct cfg_node *cfg_node_copy(const struct cfg_node *n);
/* Set the parent pointer of every node under n (n's own is left alone): for a
 * tree whose kids were placed without cfg_node_add, as the loader's merges do. */
void cfg_link_parents(struct cfg_node *n);
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
