/* dock_work.h — the dock stage's dockings in flight (dock_work.c), shared
 * with the stage itself (dock.c: the set-up, the table of scores, the
 * stage's callbacks).
 *
 * The workers are kept busy across the stage's chunks: when a chunk's
 * last dockings run and a worker is free, the next chunk this process
 * runs gives it its first molecule, so a chunk boundary costs no idle
 * worker. A docking of the next chunk that ends meanwhile is stored (and
 * committed) as any other, in its own chunk; the chunk's ledger row still
 * comes when the runner runs that chunk, which docks only what is left.
 *
 * While Vina runs the log gets a line every run.progress_interval_s (the
 * heartbeat: what runs and for how long) and an ETA from each molecule's
 * expected work (dock_cost: its size and the exhaustiveness), in seconds
 * per unit of work measured on the dockings this run finished, earlier
 * runs' before the first ends, and a prior measured here before any. */
#ifndef SE3_DOCK_WORK_H
#define SE3_DOCK_WORK_H

#include <stdint.h>

#include "chem/dock.h"
#include "stage.h"

struct dock_item;

struct dstage {
  struct dock_setup ds;
  char setup[17]; /* the set-up's key (docking.setup) */
  char vina_version[128];
  const char *set;
  const char *receptor_in; /* the workflow's receptor file */
  /* The receptor and the table, opened once (stage_file_open) when the
   * set-up is read: hashed for its key through these descriptors, and later
   * copied through them into this run's folder for what reads them by path
   * (Open Babel, Vina, the CSV reader), the copy's bytes checked against
   * the key. -1: not open. */
  int receptor_fd, table_fd;
  uint64_t receptor_hash, table_hash;
  char tmp[4096];      /* this run's folder (make_run_dir): the prepared receptor, the molecules' folders */
  char receptor[4200]; /* ... and its path */
  int workers;
  /* the receptor prepared, once a run, before the first docking (dock.c) */
  int (*prepare)(struct stage_ctx *ctx, struct dstage *d);
  /* oracle: table: scores computed elsewhere, looked up by key */
  int table, table_loaded;
  const char *table_path, *table_key, *key_column, *score_column;
  sqlite3_stmt *lookup;
  struct stage_ctx *ctx;
  sqlite3_stmt *insert, *del_poses, *ins_pose;
  int64_t chunk, n_ok, n_rej, docked, rejected, before;
  double seconds, last_commit;
  /* ---- dock_work.c's ---- */
  struct dock_pool *pool;    /* NULL until the first docking */
  struct dock_item *running; /* the items in flight (any chunk) */
  struct dock_item *queue;   /* the chunk's items not yet started, in order */
  struct dock_item *ahead;   /* the next chunk's, not yet started */
  int64_t ahead_chunk;       /* that chunk; -1: none looked at */
  int64_t ahead_done;        /* ... its dockings ended while it was ahead */
  int64_t ahead_bytes;       /* ... and their poses' bytes (its ledger's) */
  /* the ETA: work (dock_cost) of the molecules not started, seconds per
   * unit measured (this run's dockings, else earlier runs'), its prior */
  double cost_left, cost_done, seconds_done, unit_before;
  int costed;            /* cost_left counted */
  int64_t to_dock;       /* ... and the molecules it is of */
  const char *unit_from; /* where the seconds per unit come from (the log says) */
};

/* The molecules of the set without a docking (or reject) of their present
 * contents under this set-up, `select` of each, ?1 the set, ?2 the
 * set-up, with `range` (SQL) added to the conditions; sqlite3_free it. */
char *dock_pending_sql(struct stage_ctx *ctx, const char *select, const char *range);
/* ... those of ids lo..hi, prepared and bound in *st. STAGE_OK or the
 * stage's error. */
int dock_chunk_pending(struct stage_ctx *ctx, struct dstage *d, const char *select, int64_t lo, int64_t hi,
                       sqlite3_stmt **st);
/* Chunk `chunk` docked (the runner's run_chunk): its molecules left,
 * each stored as it ends, the next chunk's begun as workers free up.
 * STAGE_OK, STAGE_STOPPED or STAGE_ERROR; the chunk's dockings and
 * rejects, this run's and before, in *n_ok and *n_rej. */
int dock_work_chunk(struct stage_ctx *ctx, struct dstage *d, int64_t chunk, int64_t *n_ok, int64_t *n_rej);
/* The dockings still in flight killed, the items and statements freed. */
void dock_work_end(struct dstage *d);

#endif
