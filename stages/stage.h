/* stage.h — the contract between the runner (pipeline/) and the stages.
 *
 * A stage turns the rows of upstream tables into rows of its own tables,
 * one chunk at a time. The runner owns the ledger, the transactions, signals,
 * shards and progress display; a stage only plans its chunks and fills one
 * chunk inside the transaction the runner opened for it.
 *
 * The stages read their configuration from the resolved tree (struct cfg_node,
 * common/cfgtree.h) that the runner builds from YAML (pipeline/config.c).
 */
#ifndef SE3_STAGE_H
#define SE3_STAGE_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sqlite3.h>

#include "common/cfgtree.h"
#include "common/comm.h"
#include "common/error.h"
#include "chem/graph.h"
#include "chem/graph_settings.h"

/* ---- stages ------------------------------------------------------------ */

struct stage_ctx;
struct stage_fold;

/* The plan of a per-molecule stage: the ids `sql` selects (one column,
 * ascending; `param`, when not NULL, bound to ?1), cut into chunks of
 * the stage's own chunk_size where it has one (dock's), else
 * run.chunk_size, that each hold molecules of one input file (a chunk ends
 * where the file does), so that a file added or removed leaves the other
 * files' chunks as they were. The same in every shard. */
struct stage_ids {
  int64_t *ids;
  int64_t n, chunk_size;
  int64_t *start; /* chunk c is ids[start[c]] .. ids[start[c + 1] - 1] */
  int64_t n_chunks;
  uint8_t *needed;  /* stage_ids_pending: 1 for a chunk with a molecule to (re)do */
  int64_t n_needed; /* ... the molecules of those chunks */
  uint64_t hash;    /* the ids' fingerprint */
};

/* Progress and log callbacks provided by the runner. The rate and ETA it
 * shows come from the items this run finished (advance, item_finished)
 * alone. */
struct stage_report {
  /* n more items (molecules) finished in the chunk in flight */
  void (*advance)(struct stage_ctx *ctx, int64_t n);
  void (*log)(struct stage_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
  /* n items of the chunk in flight found finished by an earlier run (a
   * chunk cut short kept them): done, but not this run's work, so not in
   * its rate */
  void (*done_before)(struct stage_ctx *ctx, int64_t n);
  /* Minutes-long items (a docking), each announced: item `name` (a
   * molecule's name) started; a line says so. */
  void (*item_started)(struct stage_ctx *ctx, const char *name);
  /* ... and ended, kept by the stage whatever becomes of the chunk (the
   * stage committed it): ok 1 stored, 0 rejected; verb says how ("docked",
   * "rejected"), seconds how long it took, fmt the details (a score, a
   * reason; "" for none). Counts as advance(ctx, 1); the stage's last line
   * counts the items so ended as what it stored and rejected. */
  void (*item_finished)(struct stage_ctx *ctx, const char *name, int ok, const char *verb, double seconds,
                        const char *fmt, ...) __attribute__((format(printf, 6, 7)));
  /* an item's wall time in earlier runs (at this run's parallelism: a
   * docking's seconds over the workers), for an ETA before this run has
   * finished one; <= 0: none known */
  void (*estimate)(struct stage_ctx *ctx, double seconds);
  /* While minutes-long items run (called often: several times a second):
   * the stage's own estimate of the seconds left (its items differ in
   * work: a docking's time grows with the ligand and the exhaustiveness;
   * < 0: none), what it rests on (`how`, for the log), and what runs now
   * ("A for 1 min 10 s, B for 35 s"). The runner shows it at most every
   * run.progress_interval_s, a line while nothing ends (the heartbeat),
   * and takes it for the ETA of the lines after it. */
  void (*working)(struct stage_ctx *ctx, double seconds_left, const char *how, const char *running);
};

/* The runner's ledger (its tables of each stage's chunks, state and
 * times), as the stages may read it: a stage names none of those tables
 * itself (pipeline/ledger.c holds their SQL and fills this in:
 * ledger_stage_reads). Reached through stage_ctx's, stage_fold's and
 * report_opts' `ledger`. */
struct stage_ledger {
  /* Each stage's chunks in the ledger, one row a stage: (stage, first
   * chunk's start, last chunk's commit, chunks, molecules stored, rejected,
   * shards), by first start and then the stages' order. A statement to
   * step and finalize; NULL where it cannot be read (sqlite3_errmsg(db)
   * says why). */
  sqlite3_stmt *(*chunk_spans)(sqlite3 *db);
  /* Each stage's wall time summed over every run of the workdir, stopped
   * and failed ones too: (stage, seconds, runs, runs not done), by first
   * start. NULL with *none set where the database keeps no times (a schema
   * before version 12); else NULL as chunk_spans. */
  sqlite3_stmt *(*stage_times)(sqlite3 *db, int *none);
  /* The ledger rows of the chunks committed while round of_round was the
   * newest decided, every stage's but except's, copied into the table
   * `into` (round, stage, chunk, host, pid, started, finished, n_ok,
   * n_rejected) as round `round`. SQLITE_OK, or the error with *msg as
   * sqlite3_exec sets it. */
  int (*copy_round)(sqlite3 *db, const char *into, int64_t round, int64_t of_round, const char *except, char **msg);
  /* 1 where the ledger of schema ("main", "shard"; NULL: unqualified)
   * holds a chunk of stage, 0 where not, -1 when it cannot be read. */
  int (*has_chunks)(sqlite3 *db, const char *schema, const char *stage);
};

struct stage_ctx {
  const char *name;            /* the stage's name */
  sqlite3 *db;                 /* open connection; the runner holds the lock */
  const struct cfg_node *root; /* the whole resolved workflow */
  const struct cfg_node *cfg;  /* stages.<name> */
  const char *workdir;         /* absolute */
  const char *workflow_dir;    /* folder of the workflow file; stored paths are relative to it */
  int shard, n_shards;         /* this task takes chunks with chunk % n == shard */
  volatile sig_atomic_t *stop; /* set by SIGINT/SIGTERM/SIGUSR1: finish at a chunk boundary */
  const struct stage_report *report;
  void *state;                 /* the stage's own data between begin and end */
  uint64_t inputs_hash;        /* set by begin: fingerprint of every file the stage
                                  reads (path and contents), folded into the
                                  stage's config hash (not a keyed stage's:
                                  its rows say what they were made from) */
  int64_t chunk_bytes;         /* bytes of blobs the chunk in flight stored (the
                                  stage adds to it; the ledger keeps it) */
  const char *src;             /* schema of the upstream tables: "main", or "src"
                                  in a sharded run (screen.db attached read-only) */
  const struct se3_comm *comm; /* the processes of a data-parallel run (common/comm.h);
                                  NULL: this one alone. Rank 0 holds the database
                                  and writes everything; see `serve` */
  const uint8_t *chunk_needed; /* set by a keyed stage's begin (stage_ids_pending):
                                  per chunk, 1 when it has work; the runner takes
                                  the others as done. NULL: every chunk */
  int64_t items_done;          /* ... and the molecules of those others */
  struct stage_ids plan;       /* a stage that declares its rows (struct
                                  stage_rows): its molecules and chunks, which
                                  the runner plans after begin and frees after
                                  end */
  const char *key[2];          /* ... set by its begin: the values of the
                                  rows' key columns this run (score's model
                                  and its hash, dock's set-up) */
  const char *outputs_gone;    /* set by begin: a file the stage writes into the
                                  workdir (its name) that is not there, so that
                                  a stage done whole is done again to write it;
                                  NULL: all there (or none written) */
  int cycle;                   /* 1: the stage runs again at the end of its cycle (struct stage's cycle) */
  int64_t round;               /* `run --stage acquire --round N`: the round asked for (a Slurm
                                  step, where no runner goes round); -1: none */
  const struct stage_ledger *ledger; /* the runner's ledger, to read (struct stage_ledger) */
  struct se3_error err;              /* what went wrong when a callback returns non-zero: its kind,
                                        message and place (common/error.h; stage_fail_at sets it) */
};

/* Return codes of the callbacks: the one table's (common/error.h). */
#define STAGE_OK SE3_RC_OK
#define STAGE_ERROR SE3_RC_FAILED    /* ctx->err says why; the run fails */
#define STAGE_STOPPED SE3_RC_STOPPED /* *ctx->stop was seen: the chunk is abandoned (rolled back) */

/* What a stage declares beyond its callbacks: flags (struct stage's `flags`). */
enum {
  /* the config hash includes `sets` */
  STAGE_USES_SETS = 1 << 0,
  /* runs only when the workflow configures it (or --stage names it), even
   * when a later stage runs */
  STAGE_OPTIONAL = 1 << 1,
  /* the stage runs the model (train, score): `run` opens the workflow's
   * device before any stage, so `device: cuda` without a GPU fails at once
   * rather than after hours of graphs; `slurm` gives its jobs the GPUs */
  STAGE_USES_MODEL = 1 << 2,
  /* the processes of a data-parallel run share the stage's chunks (graph,
   * basis, score): process r of N takes every chunk with chunk % N == r
   * into its own shard database (WORKDIR/shards/<stage>-rank<r>.db,
   * screen.db attached read-only as "src"; rank 0's planning begin on
   * screen.db is ended first), and rank 0 folds the shards into screen.db
   * when all are done, as `merge` folds a Slurm array's. Such a stage has no
   * finalize. Without it rank 0 runs the stage alone. */
  STAGE_SPREAD = 1 << 3,
  /* the tasks of a Slurm job array share the stage's chunks, each into its
   * own shard, and `merge` folds them (ingest, dock, graph, basis, score);
   * without it the stage is one job */
  STAGE_ARRAY = 1 << 4,
  /* the stages after this one record, in each of their rows, the content
   * of the row of this stage they were made from (ingest: a molecule's
   * hash), so they fold this stage's settings chain, not its config hash,
   * as they do after a keyed stage */
  STAGE_CONTENT_PER_ROW = 1 << 5,
  /* reads whatever the stages before it left (report): naming it in a
   * workflow makes no other stage run (a training-only or dock-only
   * workflow may end with it), and it comes after the last stage that
   * does run, whichever that is; `after` names that stage where no
   * workflow is known */
  STAGE_READS_ANY = 1 << 6,
};

/* Work keyed by what it depends on (graph, basis, score, dock; ingest by
 * input file, acquire by round). In a workflow where `when` says so (NULL:
 * always), each of the stage's rows records the molecule (and model, or
 * set-up) it was made from, so that rows outlive a change of the stage's
 * inputs: the stage's begin plans every molecule and marks the chunks with
 * a row missing or stale (stage_ids_pending), the runner runs only those,
 * and `prune`, called by the runner on the database it writes inside a
 * transaction before the chunks, deletes the rows nothing wants any more
 * (their molecule gone or changed); in a shard (ctx->src not "main") it
 * leaves screen.db alone, and the next unsharded run or `merge` (the
 * stage's fold) deletes them. A keyed stage's config hash is its settings
 * chain (its own settings and those of the stages before it), and its rows
 * are all discarded only when that changes. The stages after it read its
 * rows' content themselves where they depend on it (train's data
 * fingerprint, rank's scores). A stage without a declaration is redone
 * whole when its configuration, its inputs or the stage before it change. */
struct stage_keyed {
  int (*when)(const struct cfg_node *root);
  /* A stage that maps molecules to rows of its own declares them; the
   * runner then plans its molecules and chunks and prunes its rows
   * (pipeline/keyed.c). NULL: the stage plans in its begin and prunes in
   * `prune` (ingest, by input file; acquire, by round). */
  const struct stage_rows *rows;
  /* The rows deleted, counted in *n (for the log). STAGE_OK or STAGE_ERROR.
   * NULL: nothing to delete. */
  int (*prune)(struct stage_ctx *ctx, int64_t *n);
};

/* One row a molecule (graph, basis, score, dock). The stage's begin sets
 * up what its chunks need and the values of its key columns (ctx->key);
 * the runner then plans, as every such stage was planned before it was
 * declared:
 *   - the molecules: the ids of `upstream` (of the set named by the
 *     configuration key `set`, when there is one; of those `within`
 *     lists, when it names a table in this workflow; no duplicate, with
 *     no_duplicates), ascending, in chunks within one input file
 *     (stage_ids_load), into ctx->plan;
 *   - when keyed in this workflow, the chunks with a molecule whose row of
 *     its present contents (mol_hash) under this run's key, or whose
 *     reject, is missing (stage_ids_pending);
 *   - then `planned`, which may refuse the plan or mark more.
 * And the runner's prune deletes the rows (and this stage's rejects) of
 * molecules gone, changed, out of the set (unless kept_out_of_set) or
 * duplicates, and the rows made under another key. */
struct stage_rows {
  const char *table;    /* its rows: mol_id, mol_hash and the key columns */
  const char *index;    /* table's index on (mol_id, mol_hash); NULL: none */
  const char *upstream; /* "molecules" (key id) or "graphs" (key mol_id): what a row is made from */
  const char *up_index; /* upstream's index on (id, mol_hash); NULL: none */
  const char *set;      /* the configuration key of the one set it maps; NULL: every molecule */
  int no_duplicates;    /* a molecule of `duplicates` (stages.ingest.dedupe) has no row */
  int keep_out_of_set;  /* prune keeps the row of a molecule no longer in the set (a docking: dear) */
  const char *key[2];   /* columns a row's key is in (ctx->key holds this run's); NULL: none */
  /* a key of meta holding the key (ctx->key[0]) this stage's rejects were
   * made under: rejects made under another are stale; prune writes it.
   * NULL: a reject stands while its molecule is unchanged */
  const char *rejects_meta;
  /* the table whose molecules alone the stage maps in this workflow (dock:
   * "acquisitions" when the workflow acquires); NULL: none */
  const char *(*within)(const struct cfg_node *root);
  /* after the plan: STAGE_OK, or STAGE_ERROR (an empty plan refused) */
  int (*planned)(struct stage_ctx *ctx);
};

/* How `merge` folds a shard of the stage into screen.db (and a
 * data-parallel run its processes' shards). */
struct stage_merge {
  /* the config hash a shard must have been made with (STAGE_HASH_*); NULL:
   * STAGE_HASH_SETTINGS for a stage that declares its rows, else
   * STAGE_HASH_UNKNOWN (pipeline: run_merge_hash) */
  int (*hash)(const struct cfg_node *root);
  /* the fold of one shard, attached as "shard" inside the fold's
   * transaction on screen.db ("main"): copies what of the shard's `tables`
   * it keeps into main itself and returns 1 (f->note saying what was
   * kept), or returns 0 to have every row copied; -1 with f->err set.
   * NULL: every row copied */
  int (*fold)(struct stage_fold *f);
  /* whether main's rows of the stage were folded as `fold` would fold them
   * now, asked once before a merge: a shard folded before then is folded
   * again. NULL: always */
  int (*folded_as_now)(sqlite3 *db, const struct cfg_node *root);
  /* a key of `meta` the stage writes (its fold's, its set-up's): deleted
   * with its tables */
  const char *meta_key;
};

/* What the stage reads in a workflow, where the runner must know it. */
struct stage_reads {
  /* the stage whose results it reads when it is not `after` (score in a
   * score-only workflow reads graph's); NULL: `after` */
  const char *(*stage)(const struct cfg_node *root);
  /* 1 when this workflow leaves the stage out although a later stage runs
   * (train in a score-only workflow); `--stage` still runs it. NULL: never */
  int (*skipped)(const struct cfg_node *root);
  /* The configuration key naming the one set the stage reads (train's
   * stages.train.set, score's and rank's stages.score.set); NULL: every
   * set. For --dry-run: a change to another set leaves it alone. */
  const char *set;
  /* The configuration key naming the label the stage reads (train's
   * stages.train.target); NULL: none. For --dry-run: a file whose labels
   * alone change touches it only when that label does (explain's
   * label_sets hold SET:LABEL words). */
  const char *label;
};

/* How the runner shows the stage: the end-of-stage line "<n> <unit> in <s>
 * (<rate>); <n_ok> <done>, <n_rejected> rejected" (unit NULL: "mol"; done
 * NULL: "stored"), and the main table's blob column, whose bytes per
 * molecule `status` shows (chunk_bytes summed in the ledger; NULL: none). */
struct stage_show {
  const char *unit, *done, *blob_column;
};

/* A stage that runs again at the end of a cycle (acquire: the next round
 * of active learning): after the stage named `end`, while `due` says a
 * round is due (1), the runner runs this stage again with ctx->cycle = 1
 * and then the stages after it up to `end`, and so on. */
struct stage_cycle {
  const char *end;
  int (*due)(sqlite3 *db, const struct cfg_node *root);
};

/* One stage. The runner calls begin (which plans the work: chunks and items,
 * the same plan in every shard), then run_chunk for each chunk of this shard
 * that the ledger does not list as done under the current config hash, in
 * increasing order, each inside its own transaction together with its ledger
 * row; then, when every chunk of the stage is done in this database (an
 * unsharded run, or after `merge`), finalize in its own transaction (it must
 * be idempotent: e.g. ingest's set-wide dedupe); then end.
 * The runner deletes the rows of `tables` (and this stage's rejects) when the
 * stage's configuration changed. Everything but the name and the four core
 * callbacks is a declaration the runner reads; 0 or NULL: nothing
 * particular. */
struct stage {
  const char *name;
  const char *tables; /* space-separated tables this stage writes,
                         children before the tables they reference */
  const char *after;  /* the stage whose tables this one reads (NULL for
                         ingest): it must be finished (finalized) first,
                         and its config hash is part of this one's */
  int flags;          /* STAGE_* above */
  int (*begin)(struct stage_ctx *ctx, int64_t *n_chunks, int64_t *n_items);
  int (*run_chunk)(struct stage_ctx *ctx, int64_t chunk, int64_t *n_ok, int64_t *n_rejected);
  int (*finalize)(struct stage_ctx *ctx);
  void (*end)(struct stage_ctx *ctx);
  /* A stage whose work the processes of a data-parallel run share (train).
   * Every process runs begin (ranks > 0 on a read-only connection) and end;
   * rank 0 runs the chunks and finalize as in a run of one process, and the
   * others run serve, which does what rank 0's stage asks of them (through
   * stage_order) until rank 0's runner sends the order 0 (stage_serve_end).
   * serve reports its failures to rank 0 through the stage's own
   * collectives and keeps serving; its return is the process's last word
   * (STAGE_ERROR when it cannot go on). `slurm` runs such a stage as one
   * job over its nodes. NULL: rank 0 runs the stage alone while the others
   * wait. */
  int (*serve)(struct stage_ctx *ctx);
  /* Optional, rank 0 only: after every process has begun the stage and
   * before its chunks, work that may need the others (train: recomputing a
   * finished model's damaged checkpoint). NULL: nothing. */
  int (*ready)(struct stage_ctx *ctx);
  const struct stage_keyed *keyed; /* NULL: not keyed */
  struct stage_merge merge;
  struct stage_reads reads;
  struct stage_show show;
  struct stage_cycle cycle;
  /* `run --dry-run` (after begin, on the database opened read-only): what
   * the plan will do and why, in words (one line without the stage's name;
   * "" for nothing), and the sets whose molecules (mol_sets) and whose
   * labels alone (label_sets) it changes, space-separated (each sets_size
   * bytes). NULL: the runner words it from the plan (chunk_needed). */
  int (*explain)(struct stage_ctx *ctx, char *line, size_t size, char *mol_sets, char *label_sets, size_t sets_size);
  /* `se3screen upgrade` of a database an earlier se3screen wrote (schema
   * older than this one's), after begin, inside upgrade's transaction:
   * *legacy is the fingerprint that se3screen gave the stage's inputs (its
   * ctx->inputs_hash); with write = 1 (the caller found the stage current
   * under it) it converts what it stored so that the next run finds it
   * done, and says what it did in note. NULL: nothing to convert. */
  int (*upgrade)(struct stage_ctx *ctx, int write, uint64_t *legacy, char *note, size_t size);
};

/* Whether stage s keys its work in this workflow (struct stage's keyed). */
static inline int stage_is_keyed(const struct stage *s, const struct cfg_node *root) {
  return s->keyed && (!s->keyed->when || s->keyed->when(root));
}

/* struct stage_merge's hash's answers: the hash cannot be known by merge (the stage reads
 * files merge does not fingerprint); it is the settings' and the upstream
 * stage's; or begin must plan the stage for its inputs' fingerprint (a
 * keyed stage's hash is then its chain alone); or, for a keyed stage whose
 * rows say which input files they were made from (ingest), its chain and
 * the fingerprint of the files its begin plans (ctx->inputs_hash), so that
 * a shard made from other files than the workflow's now is refused. */
enum { STAGE_HASH_UNKNOWN = 0, STAGE_HASH_SETTINGS = 1, STAGE_HASH_PLANNED = 2, STAGE_HASH_FILES = 3 };

/* What a stage's fold gets (struct stage_merge's `fold`). */
struct stage_fold {
  sqlite3 *db;                 /* screen.db as "main", the shard as "shard" */
  const char *db_path;         /* screen.db's path, for messages */
  const struct cfg_node *root; /* the workflow; NULL when it cannot be loaded */
  const struct stage_ledger *ledger; /* the runner's ledger, to read */
  char note[256];              /* set when rows were kept: what and why */
  struct se3_error err;        /* why a fold failed */
};

/* A score-only workflow: it scores with a saved model
 * (stages.score.checkpoint) and does not configure train, so train does not
 * run and score reads the graph stage's results. root NULL: 0. */
int stage_score_only(const struct cfg_node *root);

/* Whether the workflow acquires what dock docks (stages.acquire): dock then
 * docks only the molecules acquired. */
int stage_acquiring(const struct cfg_node *root);
/* The name under which the train stage reads the docking score
 * (stages.dock.label) when the workflow docks; NULL when it does not. */
const char *stage_dock_label(const struct cfg_node *root);
/* A workflow that docks and ranks by the docking score: it configures
 * dock, and neither train nor score nor acquire. graph, train and score
 * then do not run, and rank reads dock's results. root NULL: 0. */
int stage_dock_only(const struct cfg_node *root);

/* What rank 0's collective stage asks of the others: an operation of the
 * stage's own (0: the stage is over) and its arguments. */
struct stage_order {
  int64_t op;
  int64_t i[6];
  double f[2];
};
/* Rank 0: sends o to the others. Ranks > 0: waits for rank 0's next order.
 * 0, or -1 when MPI failed. */
int stage_order(struct stage_ctx *ctx, struct stage_order *o);
/* Rank 0's runner, when a collective stage is over: the order 0. */
int stage_serve_end(struct stage_ctx *ctx);
/* 1 when this process writes (rank 0, or a run of one process). */
int stage_writer(const struct stage_ctx *ctx);

extern const struct stage stage_ingest;
extern const struct stage stage_acquire;
extern const struct stage stage_dock;
extern const struct stage stage_graph;
extern const struct stage stage_basis;
extern const struct stage stage_train;
extern const struct stage stage_score;
extern const struct stage stage_rank;
extern const struct stage stage_report;

/* ---- helpers shared by the stages --------------------------------------- */

/* Set ctx->err: the message, of kind SE3_ERR_RUN, at the node's file:line:col
 * when it has one; returns STAGE_ERROR. */
int stage_fail_at(struct stage_ctx *ctx, const struct cfg_node *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* ctx->err as a callee set it, said at the workflow's node n: its kind
 * kept, "what: " (fmt's words; fmt NULL: nothing) before its text, and the node's
 * file:line:col as its place. The callee's own place (a file named by the
 * workflow) then goes into the text, where it stood before the message:
 * "wf.yaml:3:5: what: PATH: message", as stage_fail_at(ctx, n, "what: %s",
 * text) said it. Returns STAGE_ERROR. */
int stage_error_at(struct stage_ctx *ctx, const struct cfg_node *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* ctx->err = "what: <SQLite's message>", of kind SE3_ERR_DB; returns STAGE_ERROR. */
int stage_sql_fail(struct stage_ctx *ctx, const char *what);
/* 1 when WORKDIR/name is not there (ctx->outputs_gone), else 0. */
int stage_workdir_file_gone(const struct stage_ctx *ctx, const char *name);

/* Molecule ids are key * STAGE_ID_STRIDE + record, the key the input file's
 * own (from its set and path: ingest_files.input): the input file a
 * molecule came from is id / STAGE_ID_STRIDE. */
#define STAGE_ID_STRIDE 1000000000LL

int stage_ids_load(struct stage_ctx *ctx, const char *sql, const char *param, struct stage_ids *p, int64_t *n_chunks);
/* A keyed stage's plan (struct stage's keyed): marks needed the chunks of p
 * holding an id that `sql` selects (the molecules whose row is missing or
 * stale, in the tables read and in those written, which differ in a
 * shard; ascending; params bound to ?1, ?2, ...) and hands the marks to the runner
 * (ctx->chunk_needed, ctx->items_done). A chunk is then done again whole,
 * as a fresh run does it: its molecules and their batches are the same,
 * and so are its rows, chunk numbers included. */
int stage_ids_pending(struct stage_ctx *ctx, const char *sql, const char *const *params, int n_params,
                      struct stage_ids *p);
/* After stage_ids_pending, for a keyed stage whose chunk members matter to
 * each other (score: a score's last bits depend on its batch-mates): for
 * each id `sql` selects (a row of the stage whose molecule has left the
 * plan: prune deletes it), marks needed the chunks of that id's input file
 * from where it sat to the file's end, which a fresh run cuts without it. */
int stage_ids_moved(struct stage_ctx *ctx, const char *sql, const char *const *params, int n_params,
                    struct stage_ids *p);
/* " AND NOT EXISTS (q)" with q = `fmt` (a literal with one %w, the schema,
 * and no other conversion: values go in as parameters)
 * for the tables the stage reads (ctx->src) and, where it writes others (a
 * shard's, a process's database), for those too: a keyed stage's test of a
 * molecule's row. sqlite3_malloc'd (for %z), NULL when out of memory. */
char *stage_absent(const struct stage_ctx *ctx, const char *fmt);
/* A 64-bit hash of a file's bytes (what work is keyed by: an edited file
 * redoes what depends on it, a `touch` or a copy nothing), read in 1 MiB
 * blocks at several GB/s. 0, or -1 with errno. A file that is not regular
 * (a FIFO, a device, a folder) is refused unread, without blocking: -1
 * with errno EINVAL (stage_file_open names what it is). */
int stage_file_hash(const char *path, uint64_t *out);
/* An input opened once, to be checked, hashed and read through the one
 * descriptor: opened O_RDONLY | O_NONBLOCK | O_CLOEXEC (opening a FIFO
 * cannot block), fstat'ed, refused unless a regular file, then O_NONBLOCK
 * cleared. 0 with *fd (the caller closes it), or -1 with err at PATH: "not
 * a regular file (a FIFO); ..." (kind input) or "cannot open: ..." (io). */
int stage_file_open(const char *path, int *fd, struct se3_error *err);
/* stage_file_hash of the bytes of an open regular file, read from offset 0
 * with pread (the descriptor's offset is left as it was). 0, or -1 with
 * errno. */
int stage_fd_hash(int fd, uint64_t *out);
/* fd's bytes (from offset 0) copied into a new file `to` (created
 * exclusively, mode 0600, not through a link), *hash what stage_fd_hash
 * gives for the bytes copied: a program that must read an input by path
 * reads this private copy, the very bytes that were hashed. 0, or -1 with
 * err ("copying it to TO: ..." or "cannot read: ...") and `to` removed. */
int stage_fd_copy(int fd, const char *to, uint64_t *hash, struct se3_error *err);
/* The same into a descriptor open for writing (a memfd, say), at its
 * offset. 0, or -1 with err ("cannot read: ..." or "cannot write its copy:
 * ..."). */
int stage_fd_copy_fd(int fd, int out, uint64_t *hash, struct se3_error *err);
/* The 64-bit finaliser stage_file_hash ends with (a bijection that spreads
 * every input bit over the output): ingest's input keys take it too. */
uint64_t stage_hash_mix(uint64_t x);
/* Whether the space-separated list has `word` as one of its words. */
int stage_word_listed(const char *list, const char *word);
void stage_ids_free(struct stage_ids *p);

/* One molecule of a per-molecule map (stage_map_chunk). */
struct stage_item {
  int64_t id;
  uint8_t *in; /* the input blob (column 1 of the select), a copy */
  size_t in_len;
  uint8_t *out; /* set by compute: the output blob (malloc'd) ... */
  size_t out_len;
  int64_t count[2];       /* ... and counts for its row (nodes, edges) */
  char reason[256];       /* set by compute instead: why the molecule is rejected */
  sqlite3_int64 mol_hash; /* the select's third column (the molecule's hash), when it has one */
  int has_hash;           /* 0: that column is NULL (a row of an earlier se3screen) or absent */
};

/* A per-molecule stage's chunk: reads (id, blob[, mol_hash]) rows for the chunk's ids with
 * `select_sql` (two parameters: the first and last id; rows in id order),
 * runs compute on each (in parallel over OpenMP threads: compute must only
 * touch its item and read-only state) and store on each, in id order, in the
 * transaction the runner opened. Works through the chunk a few molecules at a
 * time so memory stays bounded, advances the progress, and returns
 * STAGE_STOPPED when *ctx->stop is set. threads <= 0: all cores. */
int stage_map_chunk(struct stage_ctx *ctx, const struct stage_ids *p, int64_t chunk, const char *select_sql,
                    int threads, void (*compute)(const void *state, struct stage_item *it), const void *state,
                    int (*store)(struct stage_ctx *ctx, int64_t chunk, struct stage_item *it), int64_t *n_ok,
                    int64_t *n_rejected);

/* A reject row for molecule `id` (its set, file, record and hash from
 * molecules: a keyed stage's reject stands while the molecule is unchanged). */
int stage_reject_mol(struct stage_ctx *ctx, const char *stage, int64_t id, int64_t chunk, const char *reason);
/* ... with the specifics in rejects.detail (NULL: none). */
int stage_reject_mol_detail(struct stage_ctx *ctx, const char *stage, int64_t id, int64_t chunk, const char *reason,
                            const char *detail);

/* ---- graphs, stored or rebuilt (chem/graph_settings.h) ------------------ */

/* The workflow's stages.graph as gs (chem/graph_settings.h, graph_load
 * loads or rebuilds a graph under it); STAGE_ERROR at the node at fault. */
int stage_graph_settings(struct stage_ctx *ctx, struct graph_settings *gs);
/* The graphs row's blob for graph_load: the stored graph, or where the graph
 * stage ran with store: false the molecule's blob, for graphs alias g and
 * molecules alias m. */
#define STAGE_GRAPH_COLUMN "CASE WHEN length(g.graph) > 0 THEN g.graph ELSE m.mol END"

/* ---- platform ---------------------------------------------------------- */

/* What the model runs on, for `se3screen --version`, the logs and the
 * benchmarks: the convolution's instruction set, OpenBLAS's kernels, the
 * thread count (stages/platform.c). The pipeline asks here rather than
 * reaching into models/. */
struct stage_platform {
  const char *isa;            /* the convolution's variant: base, avx2, avx512 */
  const char *isa_best;       /* the widest the processor supports */
  const char *blas_core;      /* OpenBLAS's kernels as they run (e.g. SkylakeX) */
  const char *blas_detected;  /* what OpenBLAS chose itself, when se3screen overrode it; else NULL */
  const char *blas_forced;    /* OPENBLAS_CORETYPE as the user set it, or NULL */
  const char *blas_better;    /* kernels this processor could run that are better than blas_core, or NULL */
  const char *blas_config;    /* openblas_get_config() */
  int threads;                /* OpenMP threads the model uses */
  char omp_wait[64];          /* how they wait at a barrier: "GOMP_SPINCOUNT=1000", "OMP_WAIT_POLICY=passive", ... */
  int bf16;                   /* 1: precision: bf16 can score here (AVX512-BF16) */
  const char *openbabel;      /* Open Babel's version */
  const char *gen3d_fallback; /* 3D generation's fallback embedder ("RDKit ETKDGv3"), NULL: none in this build */
};

void stage_platform_info(struct stage_platform *p);

/* The cores this process may run on: its affinity mask (an array task's
 * allocation under Slurm, a taskset), else every core online; at least 1.
 * What `workers: 0` means for ingest's parsers and dock's Vina processes. */
int stage_cores(void);

/* When OpenBLAS detected weaker kernels than this processor supports (and
 * the user did not set OPENBLAS_CORETYPE), or neither GOMP_SPINCOUNT nor
 * OMP_WAIT_POLICY is set, executes this program again, once, with
 * OPENBLAS_CORETYPE and GOMP_SPINCOUNT set (nn_cpu_reexec): both libraries
 * read them only when they load. Returns when nothing needs doing or the
 * re-execution failed. */
void stage_cpu_reexec(char **argv);

/* The processes of the run (common/comm.h; NULL: one). When several share
 * this node and OMP_NUM_THREADS is not set, each takes its share of the
 * cores the launcher left it (all of them when it bound none), at least
 * one; and `device: cuda` (or auto) gives each the GPU of its local rank
 * (cuda:N names one for all). */
void stage_share_cores(const struct se3_comm *comm);

/* ---- the compute backend ------------------------------------------------
 * The backend the workflow's `device:` and `precision:` select
 * (models/backend.h), opened once per process; the stages that run the
 * model (train, score) take it from here. For training (training = 1),
 * `precision: bf16` on the CPU gives the fp32 table: the CPU's bf16 is the
 * convolution's forward only, for scoring. NULL with a message in err that
 * says what was asked, what was found and how to run on the CPU, and in
 * *key (when key is not NULL) the setting at fault, "device" or
 * "precision" (kind usage for a setting that is not understood, model for
 * a device or precision that cannot be opened). */
struct nn_backend;
const struct nn_backend *stage_backend(const struct cfg_node *root, int training, const char **key,
                                       struct se3_error *err);
/* "fp32", "tf32", "bf16" or "fp16": the precision a backend computes in. */
const char *stage_precision_name(const struct nn_backend *be);
/* For the log line naming the device: "; the convolution as GEMMs
 * (gpu_conv: gemm)" or "; the convolution's direct kernels (gpu_conv:
 * direct)" on a backend with both paths (a GPU), "" on one without. */
const char *stage_conv_note(const struct cfg_node *root, const struct nn_backend *be);
/* For the runner, before any work: 0 when `device:` and `precision:` can be
 * used for scoring, else -1 with stage_backend's message and key. */
int stage_device_check(const struct cfg_node *root, const char **key, struct se3_error *err);

#endif
