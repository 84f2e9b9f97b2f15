/* ledger.h — the runner's own rows: a run's row in `runs` and the meta
 * rows that rebuild its configuration, each stage's state (`stage_state`:
 * the hashes it was done under, its plan's size, finalized), its chunks
 * done (`stage_chunks`, the ledger proper), and its time in each run
 * (`stage_runs`). The first room of issue 71's ledger: runner.c asks here
 * rather than writing these tables' SQL itself (merge.c, status.c, plan.c
 * and slurm.c still read them on their own). */
#ifndef SE3_LEDGER_H
#define SE3_LEDGER_H

#include <stdint.h>

#include "pipeline/runner_internal.h"

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
/* Stage `stage`'s state: done under hash (settings, chain), its plan of
 * n_chunks chunks and n_items items, now. A whole run's (share 0) also
 * records the settings' hash and makes the stage unfinalized where
 * `changed` or the hash differs; a share of a data-parallel stage (share
 * 1) leaves both as they are. 0, or -1 with r->err set. */
int ledger_set_state(struct run *r, const char *stage, const char *hash, const char *settings, const char *chain,
                     int64_t n_chunks, int64_t n_items, int changed, int share);
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

/* The time stage s took in run r, from `started` (run_now_iso_ms) and t0
 * (progress_now) to now, what it finished (r->prog) and how it ended
 * (ret: SE3_EXIT_*), as a row of stage_runs; a failure to write it is
 * said, not returned. */
void ledger_stage_time(struct run *r, const struct stage *s, const char *started, double t0, int ret);

/* -- reads for the runner */

/* A stage's row of stage_state: the hashes it was done under (malloc'd,
 * NULL for none: no row, or a database of an earlier se3screen without
 * that column), whether it is finalized (-1: no row), its plan's chunks. */
struct ledger_state {
  char *config_hash, *settings_hash, *chain_hash;
  long long finalized, n_chunks;
};
/* Stage `stage`'s state in schema ("main", or r->src: screen.db in a
 * shard) into *st, to be freed with ledger_state_free; a failed read
 * reads as none. Whether it has a row. */
int ledger_state_read(struct run *r, const char *schema, const char *stage, struct ledger_state *st);
void ledger_state_free(struct ledger_state *st);
/* Stage `stage` finalized (1) or not (0): its finalize has run over every
 * chunk, and the stages after it may read it. 0, or -1 with r->err set. */
int ledger_set_finalized(struct run *r, const char *stage, int finalized);
/* How many chunks the ledger of schema lists done for stage `stage`, under
 * any hash (0 on a failed read). */
long long ledger_n_chunks(struct run *r, const char *schema, const char *stage);
/* How many chunks of stage `stage` this database's ledger lists done under
 * hash (under 1), or under another hash (under 0: stale). */
long long ledger_n_chunks_under(struct run *r, const char *stage, const char *hash, int under);
/* Stage `stage`'s ledger forgotten: its chunks and its state (its tables
 * are the caller's, run_clear_stage). 0, or -1 with r->err set. */
int ledger_forget_stage(struct run *r, const char *stage);
/* The ledger's rows of stage `stage` for chunks `first` and after (a keyed
 * stage's plan has fewer chunks now) deleted. 0, or -1 with r->err set. */
int ledger_forget_chunks_from(struct run *r, const char *stage, int64_t first);

#endif
