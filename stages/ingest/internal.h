/* internal.h — what the files of stages/ingest/ share, and nothing else
 * includes: the runner knows ingest only as stage_ingest, through
 * stages/stage.h, and that header is the contract.
 *
 * Which file does what:
 *   ingest.c      stage_ingest; begin's settings; the steps of a chunk, in
 *                 order; finalize and end
 *   plan.c        every input of every set, its key, its parts, the chunks
 *                 with work; the plan in words (the log, run --dry-run)
 *   read.c        one input at planning: its format (named, or seen in its
 *                 first bytes), its records scanned, its keys and its parts'
 *   labels_csv.c  a labels_csv, read once from a sealed copy of its bytes
 *   records.c     a chunk's records read again and held to its part's key
 *   labels.c      a record's labels; made-up names; relabelling
 *   workers.c     a chunk's records parsed in the worker processes
 *   store.c       a chunk's rows: molecules, labels, rejects, its part
 *   dedupe.c      finalize: every input gave a molecule; set-wide dedupe
 *   fold.c        prune before the chunks; a shard's fold in `merge`
 *   upgrade.c     a database of an earlier se3screen taken over as read
 */
#ifndef SE3_STAGES_INGEST_INTERNAL_H
#define SE3_STAGES_INGEST_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sqlite3.h>

#include "chem/mol.h"
#include "chem/obbridge.h"
#include "chem/records.h"
#include "chem/workers.h"
#include "../stage.h"

/* A molecule's id is its input's key * ID_STRIDE + its record number. */
#define ID_STRIDE STAGE_ID_STRIDE

struct side_csv { /* labels_csv, loaded whole */
  int join_col;   /* -1: join by record order */
  int n_cols, n_rows;
  char **header;
  char ***rows;     /* rows[r][c] */
  int64_t *lines;   /* line of each row, for messages */
  char **row_error; /* the reader's reason a row is bad (a NUL byte...), or NULL */
  char **keys;      /* join values, sorted, for lookup ... */
  int *key_row;     /* ... and the row each belongs to */
  int *use;         /* columns to read */
  int n_use;
  char *path;
  uint64_t content;    /* the hash of the bytes read (label_key), and ... */
  struct stat file_st; /* ... the file as it was when they were read */
};

struct input {
  int64_t key;                    /* molecules.id / ID_STRIDE for its molecules: from its set and path */
  int position;                   /* its place among the inputs (0 = first) */
  char mol_key[17];               /* its contents and how they are read: a part is read again when it changes */
  char label_key[17];             /* what its labels come from: only the labels are read again when it changes */
  int labels_from_mol;            /* its labels are SD tags, read with the molecule (so in mol_key too) */
  int64_t n_parts;                /* its chunks */
  char (*part_key)[17];           /* each part's mol_key: its records' contents and how they are read (a
                                     part is read again when its own changes, not when another part's does) */
  uint64_t how;                   /* how its records are read (format, columns, a file error, SD-tag labels) */
  int n_changed;                  /* parts whose mol_key changed (the plan's count) */
  int status, seen;               /* what the plan found of it (IN_*); seen: a part of it is stored */
  uint64_t content, side_content; /* its file's and its labels_csv's content hashes ... */
  int content_ok;                 /* ... (0: the file could not be read) */
  char *set;
  char *path;   /* absolute */
  char *stored; /* as stored in source_file */
  enum mol_format fmt;
  struct rec_options ropt;
  int64_t n_records, first; /* first: global index of its record 1 */
  const struct cfg_node *labels;
  struct side_csv *side;
  char *file_error;    /* the file cannot be split into records, or gave none: one reject, record 0 */
  struct rec_stats st; /* what planning's scan found (empty records: the last item counts the unlisted) */
  char **cols;         /* csv/tsv column names (copied from the reader) */
  int n_cols;
  struct stat file_st; /* the file as planning began (inputs_unchanged) */
};

/* An input as the plan finds it, in the order that the worst part decides. */
enum { IN_SAME, IN_LABELS, IN_NEW, IN_CHANGED };

struct ingest {
  struct input *in;
  int n_in;
  int64_t total;
  int64_t chunk_size;
  struct ob_parse_opts po;
  struct mol_check_opts co;
  enum wpool_input_shape input_shape; /* stages.ingest.input_shape */
  uint8_t elements[128];
  int workers;
  double timeout_s;
  size_t max_record_bytes;
  struct wpool *pool;
  int64_t n_chunks; /* chunk c is part chunk_part[c] of input chunk_in[c] */
  int *chunk_in;
  int64_t *chunk_part;
  uint8_t *needed;                         /* per chunk: 1 when it has work (ctx->chunk_needed) ... */
  uint8_t *relabel;                        /* ... and 1 when that work is its labels alone */
  int64_t n_parsed, n_gen3d, n_relabelled; /* what this run did, for its last line */
  struct rec_reader *rd;                   /* reader positioned in input rd_in ... */
  int rd_in;
  int64_t rd_next; /* ... before record rd_next (1-based) */
  /* what the shape bounds (chem/shape.h) made of this run's work, for its
   * last line: of the molecules parsed, shapes fixed and files' own
   * generated instead; records refused for a shape out of bounds */
  int64_t n_shape_fixed, n_shape_regenerated, n_shape_refused;
  /* of the molecules parsed, those whose input left stereo free (a shape
   * fixed it: molecules.isomer_smiles), and the units left free in all */
  int64_t n_stereo_free, n_stereo_units;
};

struct item { /* one record of the chunk */
  int in;     /* input index */
  int64_t record_no, line;
  char *name;    /* csv name column */
  char **fields; /* csv fields */
  int n_fields;
  const char *const *cols;
  int n_cols;
  int direct; /* rejected before parsing (reason below) */
  int kept;   /* labels alone read again: 1 its molecule is stored (name: its
                 stored name), 2 it stands rejected for a reason not its labels' */
  char *stored_name;
  /* A rejection of ingest's own (the reader's, the labels'), kept whole
   * here (a record's error can name long paths): the reason and its
   * specifics (NULL: none). NULL reason: the worker's, in the job's why. */
  char *reason, *detail;
};

struct label {
  const char *name;
  double value;
};

/* The INSERT of an input's row in ingest_files (ingest_file_row). */
#define FILE_ROW_SQL                                                                                                   \
  "INSERT OR REPLACE INTO main.ingest_files(input, position, set_name, source_file, mol_key, label_key, n_records, "   \
  "n_parts) VALUES(?1,?2,?3,?4,?5,?6,?7,?8)"

/* ---- the hooks stage_ingest names (ingest.c holds it) -------------------- */

/* ingest.c */
int ingest_begin(struct stage_ctx *ctx, int64_t *n_chunks, int64_t *n_items);
int ingest_chunk(struct stage_ctx *ctx, int64_t chunk, int64_t *n_ok, int64_t *n_rej);
int ingest_finalize(struct stage_ctx *ctx);
void ingest_end(struct stage_ctx *ctx);
/* plan.c */
int ingest_explain(struct stage_ctx *ctx, char *line, size_t size, char *mol_sets, char *label_sets, size_t sets_size);
/* fold.c */
int ingest_prune(struct stage_ctx *ctx, int64_t *n);
int ingest_fold(struct stage_fold *f);
int ingest_merge_hash(const struct cfg_node *root);
/* upgrade.c */
int ingest_upgrade(struct stage_ctx *ctx, int write, uint64_t *legacy, char *note, size_t size);

/* ---- between the files (each is described where it is defined) ---------- */

/* plan.c: the whole plan, begin's work after the settings */
int ingest_plan_inputs(struct stage_ctx *ctx, struct ingest *g);
/* plan.c: the plan's line in the run's log */
void ingest_plan_say(struct stage_ctx *ctx, const struct ingest *g);

/* read.c: a string into a hash, terminated */
uint64_t ingest_hash_word(uint64_t h, const char *s);
/* read.c: one input added to the plan, sniffed, scanned and keyed */
int ingest_add_input(struct stage_ctx *ctx, struct ingest *g, const char *set, const char *path,
                     const struct cfg_node *item);
/* read.c: a record, or an input's one item without a record, into a part's key */
uint64_t ingest_hash_record(uint64_t h, const struct rec *r);
uint64_t ingest_hash_unlisted(uint64_t h, const struct input *in);
/* read.c: each part's mol_key */
int ingest_part_keys(struct stage_ctx *ctx, struct ingest *g, struct input *in);

/* labels_csv.c */
int ingest_side_load(struct stage_ctx *ctx, const struct cfg_node *n, struct side_csv **out);
void ingest_side_free(struct side_csv *s);
int ingest_side_row(const struct side_csv *s, int64_t record_no, const char *name);

/* records.c: reading records again, and what a record holds */
int ingest_read_record(struct stage_ctx *ctx, struct ingest *g, int64_t gi, struct item *it, struct wjob *job,
                       uint64_t *key);
void ingest_item_free(struct item *it, struct wjob *job);
int ingest_item_reject(struct item *it, struct wjob *job, const char *reason, const char *detail);
/* records.c: a chunk's first step */
int ingest_read_part(struct stage_ctx *ctx, struct ingest *g, const struct input *cin, int64_t part, int64_t g0,
                     struct item *items, struct wjob *jobs, int n);

/* labels.c */
int ingest_collect_labels(const struct input *in, const struct item *it, const struct mol *m, struct label *out,
                          int *n_out, int max_out, const char **kind, char *reason, size_t rlen);
const char *ingest_generated_name(const struct input *in, int64_t record_no, char *buf, size_t size);
/* labels.c: a chunk's second step, where its labels alone changed */
int ingest_relabel_look(struct stage_ctx *ctx, const struct input *in, struct item *items, int n);
int ingest_label_changes(struct stage_ctx *ctx, struct ingest *g, int ii, char *names, size_t size, int64_t *n_rec,
                         int *mols);

/* workers.c: a chunk's third step */
int ingest_parse(struct stage_ctx *ctx, struct ingest *g, struct item *items, struct wjob *jobs, int n);
const char *ingest_workers_said(const struct ingest *g);

/* store.c: a chunk's last step */
int ingest_store(struct stage_ctx *ctx, struct ingest *g, int64_t chunk, struct item *items, struct wjob *jobs, int n,
                 int64_t *n_ok, int64_t *n_rej);

/* dedupe.c: finalize's two steps */
int ingest_check_yield(struct stage_ctx *ctx);
int ingest_dedupe(struct stage_ctx *ctx);

/* fold.c */
int ingest_file_row(sqlite3_stmt *st, const struct input *in);

#endif
