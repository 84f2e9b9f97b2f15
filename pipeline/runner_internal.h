/* runner_internal.h — what the runner's files share; not for use outside
 * pipeline/runner.c, merge.c and status.c (the public API is
 * pipeline/runner.h).
 *
 *   runner.c   the run: configuration, a stage's steps, signals, the
 *              processes of a data-parallel run; runner_chunks.c its chunks
 *   merge.c    shard databases folded in (a data-parallel run's, an array's,
 *              `merge`)
 *   status.c   `status`
 *   plan.c     `run --dry-run`, and status's "next run" lines
 *   ledger.c   the runner's tables (pipeline/ledger.h), and the steps
 *              over them that the others call (clear, check, finalize)
 *   runner_util.c  the leaf all of them call: the stage list, the workflow
 *              loaded, SQL helpers, hashes, a stage's context
 *
 * Calls run one way: runner.c -> merge.c -> ledger.c -> runner_util.c;
 * status.c -> {merge.c, runner_util.c}; check.c -> runner_util.c.
 */
#ifndef SE3_RUNNER_INTERNAL_H
#define SE3_RUNNER_INTERNAL_H

#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sqlite3.h>

#include "pipeline/config.h"
#include "pipeline/progress.h"
#include "pipeline/runner.h"
#include "pipeline/store.h"
#include "stages/stage.h"

/* The stages in pipeline order. */
#define N_STAGES 9
extern const struct stage *const run_all_stages[N_STAGES];

struct run {
  struct store st;
  struct cfg_node *root;
  const struct run_opts *o;
  char workdir[PATH_MAX];
  char workflow_dir[PATH_MAX];
  char host[256];
  long long run_id;
  struct progress prog;
  int shard, n_shards;
  const char *src;             /* schema of the upstream tables: "main", or "src" (screen.db) in a shard */
  const struct se3_comm *comm; /* data-parallel processes; NULL: one */
  int folded_as_now[N_STAGES]; /* merge: screen.db's rows of the stage were folded as its `fold` folds them now */
  int cycle;                   /* the stage about to run runs again at the end of its cycle (stage.h's struct stage_cycle) */
  long long round;             /* run --round N: the round the cycling stage is asked to decide; -1 none */
  int meta_recorded;           /* the run's meta rows written (runner.c: record_meta) */
  struct se3_error err;        /* why the run failed (common/error.h): set when
                                  err.message[0]; what fails below is passed &r->err */
};

/* A stage's error e taken as the run's: its kind and its text, after
 * fmt's words and ": " ("score: chunk 3: file:line:col: message"). */
void run_stage_failed(struct run *r, const struct se3_error *e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The runner's stage_report: ctx is embedded in a struct holding the run. */
struct run_ctx {
  struct stage_ctx ctx;
  struct run *run;
};

/* ---- runner_util.c -------------------------------------------------------- */

/* Set by SIGINT, SIGTERM and SIGUSR1 during a run: stop at the next chunk. */
extern volatile sig_atomic_t run_stop_flag;

void run_hostname(char *buf, size_t n);
/* A load's problems, one a line, on stderr. */
void run_print_errors(const struct cfg_errors *e);
/* The index of the stage of that name in run_all_stages, or -1. */
int run_stage_index(const char *name);
/* The stages --stage and --until ask for (all without them), first..last;
 * 0, or -1 with the unknown name and the stages' names on stderr. */
int run_stage_range(const struct run_opts *o, int *first, int *last);
/* Whether `run` skips stage s of this configuration unless --stage names
 * it; the last stage it runs without --stage/--until. */
int run_stage_skipped(const struct cfg_node *root, const struct stage *s);
int run_last_configured(const struct cfg_node *root, int first, int last);
/* check.c: the inputs' headers checked for the stages named
 * (SE3_EXIT_USAGE on a problem). */
int run_check_input_files(const struct cfg_node *root, const char *stages, const char *workflow);
/* inputs: check that the input files of these stages exist (see
 * cfg_load_checked), so a run refuses before it makes its workdir. NULL with
 * the problems printed. */
struct cfg_node *run_load_config(const char *workflow, const char *const *sets, int n_sets, const char *workdir,
                                 const char *inputs);
/* The same load with every problem in errs, and the tree even where it has
 * some (cfg_load_partial; no_inputs: as cfg_load_no_inputs). */
struct cfg_node *run_load_partial(const char *workflow, const char *const *sets, int n_sets, const char *workdir,
                                  const char *inputs, int no_inputs, struct cfg_errors *errs);
/* check.c: `check`'s and `run`'s one pass. The workflow loaded as
 * run_load_partial loads it; where the loader finds problems, the inputs'
 * columns, tags and sets are checked all the same on what of the workflow
 * is valid (check_inputs_warn; check_inputs_unread with no_inputs), for the
 * stages `stages` names or, where NULL, those of first..last that `run`
 * runs (run_stage_names; last: the last configured unless named), and every
 * problem is printed, the loader's first, with one count line; NULL then.
 * A workflow the loader finds nothing wrong with comes back: the caller
 * checks its inputs (run_check_input_files) after its own checks. */
struct cfg_node *run_load_one_pass(const char *workflow, const char *const *sets, int n_sets, const char *workdir,
                                   const char *inputs, const char *stages, int first, int last, int named,
                                   int no_inputs);
/* The stages of first..last that `run` runs on root, space-separated into
 * names: those it does not skip (run_stage_skipped), and first when named
 * (--stage). */
void run_stage_names(const struct cfg_node *root, int first, int last, int named, char *names, size_t size);
/* The stage whose results stage s reads in this configuration (NULL for
 * none): its `after`, except score in a score-only workflow, which reads
 * what train would have read, and report (STAGE_READS_ANY), which reads
 * what the last stage before it that runs left. root NULL: `after`. */
const char *run_upstream_of(const struct cfg_node *root, const struct stage *s);
/* A stage_report that shows and logs nothing (ranks > 0, --dry-run's plan). */
extern const struct stage_report run_quiet_report;
/* SQL from a format (sqlite3_mprintf's) on r's database: 0, or -1 with r->err set. */
int run_exec(struct run *r, const char *fmt, ...);
/* The first column of the first row (malloc'd; NULL for none or an error),
 * and as an integer (dflt for none or an error). */
char *run_query_text(sqlite3 *db, const char *fmt, ...);
long long run_query_int(sqlite3 *db, long long dflt, const char *fmt, ...);
/* A 16-hex-digit hash folded with 8 bytes more. */
void run_fold_hash(const char hex[17], uint64_t extra, char out[17]);
/* The hash of what a stage was asked to do: its configuration and the chunk size. */
void run_settings_hash(const struct cfg_node *root, const struct stage *s, char out[17]);
/* A stage's settings chain: its configuration without the sets, the chunk
 * size, and the chain of the stage it reads (up_chain; 0 for none). A
 * keyed stage (struct stage's keyed) discards its rows only when it changes. */
void run_chain_hash(const struct cfg_node *root, const struct stage *s, uint64_t up_chain, char out[17]);
/* What a stage's hashes take from the stage it reads (the same in both
 * fields): that stage's config hash, what it made whole; or where it is
 * keyed (its config hash names only its last plan) or its rows' content is
 * recorded row by row after it (STAGE_CONTENT_PER_ROW), its
 * settings chain, the stage reading it keying or fingerprinting what it
 * reads itself. */
struct run_upstream {
  uint64_t content, chain;
};
/* Stage s's config hash (the ledger's: a keyed stage's chain; another's
 * settings, inputs and upstream content) and chain. */
void run_stage_hashes(const struct cfg_node *root, const struct stage *s, uint64_t inputs,
                      const struct run_upstream *up, char hash[17], char chain[17]);

/* Whether r's screen.db (open in r->st) belongs to the workflow r->root read
 * from the file `workflow`: the database's meta rows 'name' (the
 * `workflow:` name) and 'workflow' (its file) say whose it is; the same
 * file, renamed or not, or the same name is the same workflow, and a
 * database with neither has had no run. 0, or -1 with r->err saying whose
 * it is and how to start afresh on purpose (before anything is changed:
 * another workflow's stages would delete the molecules of its inputs). */
int run_check_owner(struct run *r, const char *workflow);
/* now as "YYYY-MM-DDTHH:MM:SSZ" (UTC): the ledger's and the runs' times */
void run_now_iso(char *buf, size_t n);
/* now as "YYYY-MM-DDTHH:MM:SS.mmmZ" (UTC) */
void run_now_iso_ms(char *buf, size_t n);
/* Stage s's context in run r (its database, whatever r has open), with
 * the ledger's reads the stages ask through (&ledger_stage_reads: passed in
 * by the callers above ledger.c, since this leaf calls nothing of it). */
void run_ctx_init(struct run_ctx *rc, struct run *r, const struct stage *s, const struct stage_ledger *ledger);
/* A stage's begin and, for a stage that declares its rows (struct
 * stage_rows), the runner's plan of them (keyed.c); and its end, with the
 * plan freed. Every call of a stage's begin and end goes through these. */
int run_begin(struct stage_ctx *ctx, const struct stage *s, int64_t *n_chunks, int64_t *n_items);
/* How `merge` knows the config hash a shard of stage s was made with
 * (STAGE_HASH_*): what the stage declares (struct stage_merge's hash), else
 * STAGE_HASH_SETTINGS for a stage that declares its rows, else
 * STAGE_HASH_UNKNOWN. */
int run_merge_hash(const struct stage *s, const struct cfg_node *root);
void run_end(struct stage_ctx *ctx, const struct stage *s);

/* ---- ledger.c ------------------------------------------------------------- */

/* The stage-level steps over the ledger (stage_state, stage_chunks), above
 * runner_util.c; pipeline/ledger.h has the ledger's rows themselves. */

/* Delete everything stage i wrote (its tables, rejects, ledger and state). */
int run_clear_stage(struct run *r, int i);
/* Delete everything stage `first` and the stages after it wrote. */
int run_clear_from(struct run *r, int first);
/* The stages after stage i are not finished (their rows kept): they run
 * again, and judge what to redo, before a stage after them reads them. */
int run_unfinish_after(struct run *r, int i);
/* The upstream stage finished where s reads it, what its hashes say into
 * *up; 0, or -1 with r->err set. */
int run_check_upstream(struct run *r, const struct stage *s, struct run_upstream *up);
/* Stage s finalized (its finalize in its own transaction); 0, or -1 with r->err set. */
int run_finalize(struct run *r, const struct stage *s, struct stage_ctx *ctx);

/* ---- keyed.c -------------------------------------------------------------- */

/* The molecules and chunks of a stage that declares its rows, after its
 * begin, into ctx->plan (stage.h: struct stage_rows). STAGE_OK or
 * STAGE_ERROR (ctx->err). */
int run_rows_plan(struct stage_ctx *ctx, const struct stage *s, int64_t *n_chunks, int64_t *n_items);
/* Its prune: the rows (and rejects) of molecules gone, changed, out of its
 * set or duplicates, and those of another key; the count in *n. */
int run_rows_prune(struct stage_ctx *ctx, const struct stage *s, int64_t *n);

/* ---- plan.c --------------------------------------------------------------- */

/* What a run of stages first..last would do now, a line a stage, into out
 * (r's database open, read-only will do; r->root the workflow). */
int run_plan_print(struct run *r, int first, int last, int explicit_stage, FILE *out);

/* ---- merge.c -------------------------------------------------------------- */

/* Process `rank`'s database for stage `stage` (struct stage's `spread`). */
void run_rank_db_path(char *out, size_t n, const char *workdir, const char *stage, int rank);
/* Folds into r's database the processes' databases of stage s found in
 * WORKDIR/shards (those run under `hash`; others are stale and go) and
 * deletes them. `why`: a line for each, "" for silence. The number folded,
 * or -1 with r->err set. */
int run_fold_rank_shards(struct run *r, const struct stage *s, const char *hash, const char *why);
/* Shard databases beside db_path, sorted (malloc'd, *n of them). */
char **run_list_shards(const char *db_path, int *n);

#endif
