/* ledger.h — the runner's own rows, the one room whose SQL names their
 * tables (their schema is store_schema.c's): a run's row in `runs` and the
 * meta rows that rebuild its configuration; each stage's state
 * (`stage_state`: the hashes it was done under, its plan's size,
 * finalized); its chunks done (`stage_chunks`, the ledger proper); and its
 * time in each run (`stage_runs`). The runner, merge, status, plan, slurm
 * and upgrade read and write them here, the stages read them through
 * struct stage_ledger (ledger_stage_reads), and pipeline/ opens a result
 * database read-only here (ledger_open_ro, with the schema's busy timeout;
 * `query`, which waits its own --timeout, aside).
 *
 * A read takes the database (sqlite3 *db) and, where it may be attached,
 * the schema ("main", "src": screen.db in a shard, "shard": a shard merge
 * attached; NULL: the name unqualified); it returns -1 when it cannot read
 * (sqlite3_errmsg(db) says why), which a caller with a struct run says with
 * ledger_read_failed. A write takes the run, and sets r->err. */
#ifndef SE3_LEDGER_H
#define SE3_LEDGER_H

#include <stdint.h>

#include "pipeline/runner_internal.h"
#include "pipeline/store.h"

/* ---- opening, and a failed read said */

/* screen.db (or a shard's database) opened read-only (store_open's
 * STORE_READONLY) with the busy timeout of the workflow's schema
 * (cfg_busy_timeout_ms(root); root NULL: the schema's default). 0, or -1
 * (-2: locked beyond the timeout) with err set; store_close closes it. */
int ledger_open_ro(struct store *st, const char *path, const struct cfg_node *root, struct se3_error *err);
/* A read of stage `stage`'s ledger in schema of r's database that returned
 * -1, said in r->err (with sqlite3_errmsg; call it before anything else
 * runs on the connection). Returns -1. */
int ledger_read_failed(struct run *r, const char *schema, const char *stage);

/* ---- the run */

/* The meta rows that say how to rebuild this run's configuration (merge
 * needs them to finalize; `stage` names a shard's one stage, "" for a
 * whole run): replaced when `replace`, else written only where there are
 * none yet. 0, or -1 with r->err set. */
int ledger_record_meta(struct run *r, const char *stage, int replace);
/* The run's row in `runs` (r->run_id), and its meta rows: a run of
 * screen.db replaces those only once a stage has passed its checks, a
 * shard's database has them at once. 0, or -1 with r->err set. */
int ledger_record_run(struct run *r, const char *stage);
/* The run's row: finished, with its exit status (SE3_EXIT_*) and r->err. */
void ledger_finish_run(struct run *r, int ret);

/* ---- a stage's state (stage_state) */

/* A stage's row of stage_state as ledger_read_stage reads it. A column an
 * older schema lacks (chain_hash before schema version 3) reads as NULL. */
struct ledger_stage {
  int found;            /* 0: no row (the stage never planned here) */
  char config_hash[65]; /* what it was done under; "": none (no row, or NULL) */
  char settings_hash[65];
  char chain_hash[65];
  long long n_chunks; /* its plan's chunks; -1: no row (or NULL) */
  long long n_items;  /* its plan's molecules (records); 0: none */
  int finalized;      /* 1 once its closing step is done; 0: not, or no row */
  char updated[40];   /* when its state was last written (UTC); "": none */
};
/* Stage `stage`'s state in schema of db into *out. 1 found, 0 none (out
 * says none), -1 when it cannot be read (a missing table is SQLITE_ERROR
 * there, as status reads an older schema). */
int ledger_read_stage(sqlite3 *db, const char *schema, const char *stage, struct ledger_stage *out);
/* Whether stage `stage` is finished in db, and with since (UTC, as the
 * store writes times; NULL: any time) its state written no earlier than
 * then (a stage's begin stamps it, and unfinishes the stage when it has
 * work). 0 also where it cannot be read. */
int ledger_finished_since(sqlite3 *db, const char *stage, const char *since);
/* The name of the first stage (in the stages' order) that declares flag
 * (STAGE_*, struct stage's flags), or NULL: who asks for a stage's rows by
 * what it does, not by its name (slurm: the plan of the stage that reads
 * the sets' files, STAGE_USES_SETS). */
const char *ledger_stage_with(int flag);
/* Stage `stage`'s state: done under hash (settings, chain), its plan of
 * n_chunks chunks and n_items items, now. A whole run's (share 0) also
 * records the settings' hash and makes the stage unfinalized where
 * `changed` or the hash differs; a share of a data-parallel stage (share
 * 1) leaves both as they are. 0, or -1 with r->err set. */
int ledger_set_state(struct run *r, const char *stage, const char *hash, const char *settings, const char *chain,
                     int64_t n_chunks, int64_t n_items, int changed, int share);
/* Stage `stage`'s hashes and plan as this se3screen gives them, its other
 * columns kept (`upgrade` of a database an earlier se3screen wrote). 0, or
 * -1 with r->err set. */
int ledger_restate(struct run *r, const char *stage, const char *hash, const char *settings, const char *chain,
                   int64_t n_chunks, int64_t n_items);
/* Stage `stage` finalized (1: its closing step has run over every chunk,
 * and the stages after it may read it) or not (0). 0, or -1 with r->err
 * set. */
int ledger_set_finalized(struct run *r, const char *stage, int finalized);

/* ---- a stage's chunks (stage_chunks) */

/* How many chunks of stage `stage` the ledger in schema of db lists done:
 * every one (hash NULL), those done under hash (other 0), or those done
 * under another hash (other 1: stale). -1 when it cannot be read. */
long long ledger_chunk_count(sqlite3 *db, const char *schema, const char *stage, const char *hash, int other);
/* Sums over stage `stage`'s chunks in the ledger: the molecules stored
 * (n_ok) and the blob bytes (n_bytes, which a database before schema
 * version 2 lacks: 0 there). 0, or -1 when the ledger cannot be read (the
 * sums then 0). */
int ledger_chunk_sums(sqlite3 *db, const char *stage, long long *n_ok, long long *n_bytes);
/* Which of stage s's n_chunks chunks are done, into done[] (their
 * molecules added to *done_items): a keyed stage's plan marks those with
 * work, another's ledger lists them (with, for a process of a
 * data-parallel run that is not rank 0, what screen.db lists under hash).
 * 0, or -1 with r->err set: a failed read must stop the stage. */
int ledger_chunks_done(struct run *r, const struct stage *s, const struct stage_ctx *ctx, const char *hash,
                       int64_t n_chunks, const struct se3_comm *together, char *done, int64_t *done_items);
/* Chunk c of stage `stage` done (inside the chunk's transaction): its row,
 * under hash, this shard, its counts and bytes, the round the newest
 * decided (round_src: what to take where there is none). 0, or -1 with
 * r->err set. */
int ledger_write_chunk(struct run *r, const char *stage, int64_t c, int shard, const char *hash, const char *started,
                       int64_t n_ok, int64_t n_rej, int64_t n_bytes, const char *round_src);
/* The ledger's rows of stage `stage` for chunks `first` and after (a keyed
 * stage's plan has fewer chunks now) deleted. 0, or -1 with r->err set. */
int ledger_forget_chunks_from(struct run *r, const char *stage, int64_t first);
/* Stage `stage`'s ledger forgotten: its chunks and its state (its tables
 * are the caller's, run_clear_stage). 0, or -1 with r->err set. */
int ledger_forget_stage(struct run *r, const char *stage);

/* ---- a stage's time (stage_runs) */

/* The time stage s took in run r, from `started` (run_now_iso_ms) and t0
 * (progress_now) to now, what it finished (r->prog) and how it ended
 * (ret: SE3_EXIT_*), as a row of stage_runs; a failure to write it is
 * said, not returned. */
void ledger_stage_time(struct run *r, const struct stage *s, const char *started, double t0, int ret);

/* ---- a shard's ledger folded in (merge.c; the shard attached as "shard") */

/* 1 when the shard's ledger says something main's does not of stage
 * `stage`: its config hash differs, or it has a chunk main lacks as it is
 * there (hash, host, pid, times); 0 when not; -1 with r->err set. */
int ledger_shard_has_news(struct run *r, const char *stage);
/* A keyed stage whose hash main has from before it was keyed (or from an
 * earlier se3screen): main's chunks of it done under another hash than
 * `hash` dropped, and its state takes hash and the attached shard's plan
 * (n_chunks, n_items). 0, or -1 with r->err set. */
int ledger_take_shard_plan(struct run *r, const char *stage, const char *hash);
/* The attached shard's ledger of stage `stage` folded into main's (in the
 * caller's transaction): its chunks replace main's, its state becomes
 * main's (unfinished, to be finished by `merge` or the runner), and its
 * stage times are added (a shard before schema version 12 has none). 0, or
 * -1 with r->err set. */
int ledger_fold_shard(struct run *r, const char *stage);

/* ---- the stages' reads */

/* The ledger as the stages read it (struct stage_ledger, stages/stage.h):
 * what run_ctx_init gives a stage's context, merge.c a fold, and
 * `se3screen report` its page. */
extern const struct stage_ledger ledger_stage_reads;

#endif
