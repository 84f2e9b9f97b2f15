/* dock_work.c — the dock stage's dockings in flight: started as workers
 * free up, across the stage's chunks, each stored as it ends, with a
 * heartbeat and an ETA while Vina runs (stages/dock_work.h). */
#define _GNU_SOURCE
#include "dock_work.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chem/mol.h"

struct dock_item {
  struct dock_job job; /* (what the pool hands back: the item is found from it) */
  int64_t id, chunk;
  sqlite3_int64 hash;
  int no_hash; /* the molecule's row has no mol_hash (an earlier se3screen's) */
  uint8_t *blob;
  double cost, start;
  char name[200];
  struct dock_item *next;
};

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- the work a docking takes -------------------------------------------- */

/* The work of docking the molecule blob under d's set-up (0 when it cannot
 * be read: the docking rejects it in seconds). */
static double blob_cost(const struct dstage *d, const void *blob, size_t len) {
  struct mol m;
  mol_init(&m);
  double c = 0;
  if (!mol_from_blob(blob, len, &m, NULL)) c = dock_cost(d->ds.exhaustiveness, mol_n_heavy(&m), dock_rotors(&m));
  mol_free(&m);
  return c;
}

/* ---- the molecules to dock ----------------------------------------------- */

/* The molecules dock docks: those acquired, when the workflow acquires. */
static char *acquired_sql(struct stage_ctx *ctx) {
  return stage_acquiring(ctx->root)
             ? sqlite3_mprintf(" AND EXISTS (SELECT 1 FROM \"%w\".acquisitions q WHERE q.mol_id = m.id)", ctx->src)
             : sqlite3_mprintf("");
}

char *dock_pending_sql(struct stage_ctx *ctx, const char *select, const char *range) {
  return sqlite3_mprintf(
      "SELECT %s FROM \"%w\".molecules m WHERE m.set_name = ?1%s%z AND NOT EXISTS (SELECT 1 FROM \"%w\".duplicates d "
      "WHERE d.mol_id = m.id)%z%z ORDER BY m.id",
      select, ctx->src, range, acquired_sql(ctx), ctx->src,
      stage_absent(ctx, "SELECT 1 FROM \"%w\".docking k WHERE k.mol_id = m.id AND k.mol_hash IS m.mol_hash AND "
                        "k.setup = ?2"),
      stage_absent(ctx, "SELECT 1 FROM \"%w\".rejects r WHERE r.stage = 'dock' AND r.mol_id = m.id AND r.mol_hash IS "
                        "m.mol_hash AND (SELECT value FROM meta WHERE key = 'dock_setup') IS ?2"));
}

int dock_chunk_pending(struct stage_ctx *ctx, struct dstage *d, const char *select, int64_t lo, int64_t hi,
                       sqlite3_stmt **st) {
  char *sql = dock_pending_sql(ctx, select, " AND m.id BETWEEN ?3 AND ?4");
  *st = NULL;
  int rc = sql ? sqlite3_prepare_v2(ctx->db, sql, -1, st, NULL) : SQLITE_NOMEM;
  sqlite3_free(sql);
  if (rc != SQLITE_OK) return stage_sql_fail(ctx, "reading the molecules to dock");
  sqlite3_bind_text(*st, 1, d->set, -1, SQLITE_STATIC);
  sqlite3_bind_text(*st, 2, d->setup, -1, SQLITE_STATIC);
  sqlite3_bind_int64(*st, 3, lo);
  sqlite3_bind_int64(*st, 4, hi);
  return STAGE_OK;
}

static void free_items(struct dock_item *it) {
  while (it) {
    struct dock_item *next = it->next;
    dock_job_free_poses(&it->job);
    free(it->blob);
    free(it);
    it = next;
  }
}

static int running_id(const struct dstage *d, int64_t id) {
  for (const struct dock_item *r = d->running; r; r = r->next)
    if (r->id == id) return 1;
  return 0;
}

/* The molecules of chunk c still to dock, less those in flight, into *out
 * in order, each with its cost. */
static int load_chunk(struct stage_ctx *ctx, struct dstage *d, int64_t c, struct dock_item **out) {
  const struct stage_ids *p = &ctx->plan;
  int64_t lo = p->ids[p->start[c]], hi = p->ids[p->start[c + 1] - 1];
  sqlite3_stmt *st = NULL;
  *out = NULL;
  if (dock_chunk_pending(ctx, d, "m.id, m.mol, m.mol_hash, m.name", lo, hi, &st)) return STAGE_ERROR;
  struct dock_item **tail = out;
  int rc, ret = STAGE_OK;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    int64_t id = sqlite3_column_int64(st, 0);
    if (running_id(d, id)) continue;
    size_t len = (size_t)sqlite3_column_bytes(st, 1);
    struct dock_item *it = calloc(1, sizeof *it);
    if (it) it->blob = malloc(len ? len : 1);
    if (!it || !it->blob) {
      free(it);
      ret = stage_fail_at(ctx, NULL, "out of memory");
      break;
    }
    memcpy(it->blob, sqlite3_column_blob(st, 1), len);
    it->job.mol = it->blob;
    it->job.mol_len = len;
    it->id = id;
    it->chunk = c;
    it->hash = sqlite3_column_int64(st, 2);
    it->no_hash = sqlite3_column_type(st, 2) == SQLITE_NULL;
    const unsigned char *name = sqlite3_column_text(st, 3);
    if (name && name[0])
      snprintf(it->name, sizeof it->name, "%s", (const char *)name);
    else
      snprintf(it->name, sizeof it->name, "molecule %lld", (long long)id);
    it->cost = blob_cost(d, it->blob, len);
    *tail = it;
    tail = &it->next;
  }
  if (ret == STAGE_OK && rc != SQLITE_DONE) ret = stage_sql_fail(ctx, "reading the molecules to dock");
  sqlite3_finalize(st);
  if (ret != STAGE_OK) {
    free_items(*out);
    *out = NULL;
  }
  return ret;
}

/* The next chunk after c this process runs (this shard's, with work):
 * -1 when none. */
static int64_t next_chunk(const struct stage_ctx *ctx, int64_t c) {
  const struct stage_ids *p = &ctx->plan;
  int n = ctx->n_shards > 0 ? ctx->n_shards : 1;
  for (int64_t k = c + 1; k < p->n_chunks; k++)
    if (k % n == ctx->shard && (!p->needed || p->needed[k])) return k;
  return -1;
}

/* What is left after chunk c (this process's chunks): its work into
 * d->cost_left (each molecule's cost for the first 20,000 of them, their
 * mean for the rest), and what earlier runs docked of it counted as done
 * at once (done_before), so that the counts and the ETA are the whole
 * stage's from the start, whatever chunk an earlier run's dockings were
 * in. Once a stage. */
static int count_left(struct stage_ctx *ctx, struct dstage *d, int64_t c) {
  double sum = 0;
  int64_t costed = 0, counted = 0;
  for (int64_t k = next_chunk(ctx, c); k >= 0; k = next_chunk(ctx, k)) {
    const struct stage_ids *p = &ctx->plan;
    int64_t lo = p->ids[p->start[k]], hi = p->ids[p->start[k + 1] - 1], pending = 0;
    sqlite3_stmt *st = NULL;
    if (dock_chunk_pending(ctx, d, costed < 20000 ? "m.mol" : "count(*)", lo, hi, &st)) return STAGE_ERROR;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
      if (costed < 20000 && sqlite3_column_type(st, 0) == SQLITE_BLOB) {
        sum += blob_cost(d, sqlite3_column_blob(st, 0), (size_t)sqlite3_column_bytes(st, 0));
        costed++;
        pending++;
      } else {
        counted += sqlite3_column_int64(st, 0);
        pending += sqlite3_column_int64(st, 0);
      }
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) return stage_sql_fail(ctx, "reading the molecules to dock");
    int64_t before = p->start[k + 1] - p->start[k] - pending;
    d->to_dock += pending;
    ctx->report->done_before(ctx, before);
    d->before += before;
  }
  d->cost_left += sum + (costed ? sum / (double)costed * (double)counted : 0);
  d->costed = 1;
  return STAGE_OK;
}

/* Seconds of a unit of work (dock_cost) in earlier runs under this set-up
 * (their last 200 dockings, of one core each), and their mean seconds a
 * docking in *mean; 0 when none. */
static double earlier_unit(struct stage_ctx *ctx, const struct dstage *d, double *mean) {
  char *sql =
      sqlite3_mprintf("SELECT k.seconds, m.mol FROM \"%w\".docking k JOIN \"%w\".molecules m ON m.id = k.mol_id "
                      "WHERE k.setup = ?1 AND k.seconds > 0 ORDER BY k.rowid DESC LIMIT 200",
                      ctx->src, ctx->src);
  sqlite3_stmt *q = NULL;
  double s = 0, c = 0;
  int n = 0;
  if (sql && sqlite3_prepare_v2(ctx->db, sql, -1, &q, NULL) == SQLITE_OK) {
    sqlite3_bind_text(q, 1, d->setup, -1, SQLITE_STATIC);
    while (sqlite3_step(q) == SQLITE_ROW) {
      double cost = blob_cost(d, sqlite3_column_blob(q, 1), (size_t)sqlite3_column_bytes(q, 1));
      if (cost > 0) s += sqlite3_column_double(q, 0), c += cost, n++;
    }
  }
  sqlite3_finalize(q);
  sqlite3_free(sql);
  *mean = n ? s / n : 0;
  return c > 0 ? s / c : 0;
}

/* ---- the heartbeat and the ETA ------------------------------------------- */

/* Seconds a unit of work takes now: this run's dockings', else earlier
 * runs', else the prior's (1). */
static double unit_now(struct dstage *d) {
  if (d->cost_done > 0 && d->seconds_done > 0) {
    d->unit_from = "at this run's pace";
    return d->seconds_done / d->cost_done;
  }
  if (d->unit_before > 0) {
    d->unit_from = "at earlier runs' pace";
    return d->unit_before;
  }
  d->unit_from = "before any docking ended: a guess";
  return 1;
}

/* The seconds left: the work not started over the workers, and what the
 * dockings in flight have left (at least a tenth of theirs), never less
 * than the longest of those. */
static double seconds_left(struct dstage *d, double t) {
  double unit = unit_now(d), flight = 0, longest = 0, queued = d->cost_left;
  for (const struct dock_item *it = d->queue; it; it = it->next)
    queued += it->cost;
  for (const struct dock_item *it = d->ahead; it; it = it->next)
    queued += it->cost;
  for (const struct dock_item *it = d->running; it; it = it->next) {
    double est = it->cost * unit, left = est - (t - it->start);
    if (left < 0.1 * est) left = 0.1 * est;
    flight += left;
    if (left > longest) longest = left;
  }
  double s = (queued * unit + flight) / (d->workers > 0 ? d->workers : 1);
  return s > longest ? s : longest;
}

/* What runs, for the heartbeat: "A for 1 min 10 s, B for 35 s". */
static void running_text(const struct dstage *d, double t, char *out, size_t size) {
  size_t n = 0;
  out[0] = 0;
  for (const struct dock_item *it = d->running; it && n + 1 < size; it = it->next) {
    double s = t - it->start;
    char took[32];
    if (s < 60)
      snprintf(took, sizeof took, "%.0f s", s);
    else
      snprintf(took, sizeof took, "%.0f min %02.0f s", floor(s / 60), fmod(s, 60));
    int w = snprintf(out + n, size - n, "%s%.80s for %s", n ? ", " : "", it->name, took);
    if (w < 0) break;
    n += (size_t)w < size - n ? (size_t)w : size - n - 1;
  }
}

static void beat(struct stage_ctx *ctx, struct dstage *d) {
  double t = now_s();
  char running[1024], how[128];
  running_text(d, t, running, sizeof running);
  double left = seconds_left(d, t);
  snprintf(how, sizeof how, "by ligand size and exhaustiveness %d, %s", d->ds.exhaustiveness, d->unit_from);
  ctx->report->working(ctx, left, how, running);
}

/* ---- storing a docking --------------------------------------------------- */

/* Commit what the chunk has stored so far, and go on in a new transaction. */
static int commit_so_far(struct stage_ctx *ctx) {
  char *msg = NULL;
  if (sqlite3_exec(ctx->db, "COMMIT; BEGIN IMMEDIATE", NULL, NULL, &msg) != SQLITE_OK) {
    se3_error_set(&ctx->err, SE3_ERR_DB, "committing the dockings done: %s", msg ? msg : sqlite3_errmsg(ctx->db));
    sqlite3_free(msg);
    return STAGE_ERROR;
  }
  return STAGE_OK;
}

/* A NAN term (Vina did not give it) as NULL. */
static void bind_term(sqlite3_stmt *st, int i, double v) {
  if (isfinite(v))
    sqlite3_bind_double(st, i, v);
  else
    sqlite3_bind_null(st, i);
}

/* Every pose of a docked molecule into `poses` (mode 1 the best, which the
 * docking row holds too), those of an earlier docking of it gone first. */
static int store_poses(struct stage_ctx *ctx, struct dstage *d, int64_t id, const struct dock_job *j) {
  if ((!d->del_poses &&
       sqlite3_prepare_v2(ctx->db, "DELETE FROM poses WHERE mol_id = ?1", -1, &d->del_poses, NULL) != SQLITE_OK) ||
      (!d->ins_pose &&
       sqlite3_prepare_v2(ctx->db,
                          "INSERT INTO poses(mol_id, mode, score, inter, intra, rmsd_lb, rmsd_ub, pose) "
                          "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                          -1, &d->ins_pose, NULL) != SQLITE_OK))
    return stage_sql_fail(ctx, "preparing the poses' insert");
  sqlite3_reset(d->del_poses);
  sqlite3_bind_int64(d->del_poses, 1, id);
  if (sqlite3_step(d->del_poses) != SQLITE_DONE) return stage_sql_fail(ctx, "replacing a molecule's poses");
  for (int p = 0; p < j->n_poses; p++) {
    const struct dock_pose *q = &j->poses[p];
    sqlite3_reset(d->ins_pose);
    sqlite3_bind_int64(d->ins_pose, 1, id);
    sqlite3_bind_int(d->ins_pose, 2, p + 1);
    sqlite3_bind_double(d->ins_pose, 3, q->score);
    bind_term(d->ins_pose, 4, q->inter);
    bind_term(d->ins_pose, 5, q->intra);
    sqlite3_bind_double(d->ins_pose, 6, q->rmsd_lb);
    sqlite3_bind_double(d->ins_pose, 7, q->rmsd_ub);
    sqlite3_bind_blob64(d->ins_pose, 8, q->mol, q->len, SQLITE_STATIC);
    int rc = sqlite3_step(d->ins_pose);
    sqlite3_clear_bindings(d->ins_pose);
    sqlite3_reset(d->ins_pose);
    if (rc != SQLITE_DONE) return stage_sql_fail(ctx, "writing a pose");
  }
  return STAGE_OK;
}

static int insert_docking(struct stage_ctx *ctx, struct dstage *d, const struct dock_item *it) {
  const struct dock_job *j = &it->job;
  if (!d->insert && sqlite3_prepare_v2(ctx->db,
                                       "INSERT OR REPLACE INTO docking(mol_id, score, pose, seconds, chunk, mol_hash, "
                                       "setup) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                                       -1, &d->insert, NULL) != SQLITE_OK)
    return stage_sql_fail(ctx, "preparing the docking insert");
  sqlite3_reset(d->insert);
  sqlite3_bind_int64(d->insert, 1, it->id);
  sqlite3_bind_double(d->insert, 2, j->score);
  sqlite3_bind_blob64(d->insert, 3, j->poses[0].mol, j->poses[0].len, SQLITE_STATIC);
  sqlite3_bind_double(d->insert, 4, j->seconds);
  sqlite3_bind_int64(d->insert, 5, it->chunk);
  if (it->no_hash)
    sqlite3_bind_null(d->insert, 6);
  else
    sqlite3_bind_int64(d->insert, 6, it->hash);
  sqlite3_bind_text(d->insert, 7, d->setup, -1, SQLITE_STATIC);
  int rc = sqlite3_step(d->insert);
  sqlite3_clear_bindings(d->insert);
  sqlite3_reset(d->insert);
  return rc == SQLITE_DONE ? store_poses(ctx, d, it->id, j) : stage_sql_fail(ctx, "writing a docking");
}

/* Item it's docking ended: stored (or its reject), counted in its chunk
 * (the one in flight, or the one ahead), said, committed. */
static int store_item(struct stage_ctx *ctx, struct dstage *d, struct dock_item *it) {
  const struct dock_job *j = &it->job;
  int mine = it->chunk == d->chunk, rc;
  if (j->status == 0) {
    rc = insert_docking(ctx, d, it);
    int64_t bytes = (int64_t)j->poses[0].len; /* (docking.pose's, as `status` shows it) */
    if (mine)
      ctx->chunk_bytes += bytes, d->n_ok++;
    else
      d->ahead_bytes += bytes, d->ahead_done++;
    d->docked++;
    d->seconds += j->seconds;
    if (it->cost > 0) d->seconds_done += j->seconds, d->cost_done += it->cost;
  } else {
    rc = stage_reject_mol_detail(ctx, "dock", it->id, it->chunk, j->reason, j->detail[0] ? j->detail : NULL);
    if (mine)
      d->n_rej++;
    else
      d->ahead_done++;
    d->rejected++;
  }
  if (j->status == 0)
    ctx->report->item_finished(ctx, it->name, 1, "docked", j->seconds, "%.2f kcal/mol", j->score);
  else
    ctx->report->item_finished(ctx, it->name, 0, "rejected", j->seconds, "%s%s%.200s", j->reason,
                               j->detail[0] ? ": " : "", j->detail);
  /* each docking kept as it finishes (at most a few commits a second) */
  if (rc == STAGE_OK && now_s() - d->last_commit >= 0.2) {
    rc = commit_so_far(ctx);
    d->last_commit = now_s();
  }
  return rc;
}

/* ---- the chunk ----------------------------------------------------------- */

static struct dock_item *pop(struct dock_item **list) {
  struct dock_item *it = *list;
  if (it) *list = it->next, it->next = NULL;
  return it;
}

/* The next molecule to start: the chunk's, else the next chunk's (loaded
 * the first time it is wanted); NULL when neither has one. */
static int next_item(struct stage_ctx *ctx, struct dstage *d, struct dock_item **it) {
  *it = pop(&d->queue);
  if (*it) return STAGE_OK;
  if (d->ahead_chunk < 0) {
    int64_t k = next_chunk(ctx, d->chunk);
    if (k < 0) return STAGE_OK;
    if (load_chunk(ctx, d, k, &d->ahead)) return STAGE_ERROR;
    d->ahead_chunk = k;
    for (const struct dock_item *a = d->ahead; a; a = a->next)
      d->cost_left -= a->cost; /* (counted in the queue from now on) */
  }
  *it = pop(&d->ahead);
  return STAGE_OK;
}

/* Workers free given molecules. */
static int fill(struct stage_ctx *ctx, struct dstage *d) {
  while (dock_pool_idle(d->pool) > 0 && !(ctx->stop && *ctx->stop)) {
    struct dock_item *it;
    if (next_item(ctx, d, &it)) return STAGE_ERROR;
    if (!it) break;
    if (dock_pool_start(d->pool, &it->job, &ctx->err)) {
      free_items(it);
      return STAGE_ERROR;
    }
    it->start = now_s();
    it->next = d->running;
    d->running = it;
    ctx->report->item_started(ctx, it->name);
  }
  return STAGE_OK;
}

static int chunk_in_flight(const struct dstage *d) {
  for (const struct dock_item *it = d->running; it; it = it->next)
    if (it->chunk == d->chunk) return 1;
  return 0;
}

/* Dock until the chunk's molecules have all ended: STAGE_OK, or
 * STAGE_STOPPED (*ctx->stop), or STAGE_ERROR. */
static int dock_until_done(struct stage_ctx *ctx, struct dstage *d) {
  while (d->queue || chunk_in_flight(d)) {
    if (ctx->stop && *ctx->stop) return STAGE_STOPPED;
    if (fill(ctx, d)) return STAGE_ERROR;
    struct dock_job *j = NULL;
    int r = dock_pool_wait(d->pool, 0.1, &j, &ctx->err);
    if (r < 0) return STAGE_ERROR;
    if (r > 0) {
      struct dock_item *it = (struct dock_item *)((char *)j - offsetof(struct dock_item, job)), **p = &d->running;
      while (*p && *p != it)
        p = &(*p)->next;
      if (*p) *p = it->next;
      it->next = NULL;
      int rc = store_item(ctx, d, it);
      free_items(it);
      if (rc != STAGE_OK) return STAGE_ERROR;
      if (fill(ctx, d)) return STAGE_ERROR;
    }
    beat(ctx, d);
  }
  return STAGE_OK;
}

/* The ledger's counts of chunk lo..hi: its dockings and rejects, this
 * run's and before. */
static void count_chunk(struct stage_ctx *ctx, struct dstage *d, int64_t lo, int64_t hi, int64_t *n_ok,
                        int64_t *n_rej) {
  sqlite3_stmt *q = NULL;
  if (sqlite3_prepare_v2(ctx->db,
                         "SELECT (SELECT count(*) FROM docking WHERE mol_id BETWEEN ?1 AND ?2 AND setup = ?3), "
                         "(SELECT count(*) FROM rejects WHERE stage = 'dock' AND mol_id BETWEEN ?1 AND ?2)",
                         -1, &q, NULL) == SQLITE_OK) {
    sqlite3_bind_int64(q, 1, lo);
    sqlite3_bind_int64(q, 2, hi);
    sqlite3_bind_text(q, 3, d->setup, -1, SQLITE_STATIC);
    if (sqlite3_step(q) == SQLITE_ROW) {
      *n_ok = sqlite3_column_int64(q, 0);
      *n_rej = sqlite3_column_int64(q, 1);
    }
  }
  sqlite3_finalize(q);
}

int dock_work_chunk(struct stage_ctx *ctx, struct dstage *d, int64_t chunk, int64_t *n_ok, int64_t *n_rej) {
  const struct stage_ids *p = &ctx->plan;
  int64_t lo = p->ids[p->start[chunk]], hi = p->ids[p->start[chunk + 1] - 1];
  int64_t in_chunk = p->start[chunk + 1] - p->start[chunk];
  /* what of this chunk began while it was the next one: its dockings in
   * flight go on, those ended are this run's (not "before"), the rest is
   * read again */
  int64_t ended_ahead = 0;
  if (d->ahead_chunk == chunk) {
    ended_ahead = d->ahead_done;
    ctx->chunk_bytes += d->ahead_bytes;
  }
  for (const struct dock_item *a = d->ahead; a; a = a->next)
    d->cost_left += a->cost; /* (read again below) */
  free_items(d->ahead);
  d->ahead = NULL;
  d->ahead_chunk = -1;
  d->ahead_done = d->ahead_bytes = 0;
  d->chunk = chunk;
  d->n_ok = d->n_rej = 0;
  free_items(d->queue);
  if (load_chunk(ctx, d, chunk, &d->queue)) return STAGE_ERROR;
  int64_t left = 0;
  for (const struct dock_item *it = d->queue; it; it = it->next) {
    left++;
    if (d->costed) d->cost_left -= it->cost; /* (the queue's own from now on) */
  }
  if (d->cost_left < 0) d->cost_left = 0;
  for (const struct dock_item *it = d->running; it; it = it->next)
    left += it->chunk == chunk;
  /* what earlier runs docked counts as done (not in this run's rate):
   * this chunk's, and at the first chunk every later one's */
  if (!d->costed) {
    ctx->report->done_before(ctx, in_chunk - left - ended_ahead);
    d->before += in_chunk - left - ended_ahead;
    if (count_left(ctx, d, chunk)) return STAGE_ERROR;
  }
  if (left > 0 && !d->pool) {
    if (d->prepare(ctx, d)) return STAGE_ERROR;
    double mean = 0;
    d->unit_before = earlier_unit(ctx, d, &mean);
    if (!(d->pool = dock_pool_open(&d->ds, d->workers, &ctx->err))) return STAGE_ERROR;
    beat(ctx, d);   /* (the ETA, before the line below says it) */
    if (mean > 0) { /* "earlier runs took 2.0 min/mol: about 6:00 for the 3 left" */
      ctx->report->estimate(ctx, mean / (d->workers > 0 ? d->workers : 1));
    } else { /* the first docking of this set-up: the prior's word, at once */
      long eta = lround(seconds_left(d, now_s()));
      ctx->report->log(ctx,
                       "%lld molecules to dock: about %ld:%02ld by their size at exhaustiveness %d, %d at once (a "
                       "prior measured on another machine: this run's pace takes over as its dockings end)",
                       (long long)(d->to_dock + left), eta / 60, eta % 60, d->ds.exhaustiveness, d->workers);
    }
  }
  d->last_commit = now_s();
  int ret = left > 0 ? dock_until_done(ctx, d) : STAGE_OK;
  /* stopped: the dockings said to be docked are kept (the chunk rolls back) */
  if (ret == STAGE_STOPPED && commit_so_far(ctx) != STAGE_OK) ret = STAGE_ERROR;
  if (ret != STAGE_OK) return ret;
  *n_ok = d->n_ok;
  *n_rej = d->n_rej;
  if (left < in_chunk) count_chunk(ctx, d, lo, hi, n_ok, n_rej);
  return STAGE_OK;
}

void dock_work_end(struct dstage *d) {
  dock_pool_close(d->pool); /* (what still runs: the next chunk's, or all on a stop) */
  d->pool = NULL;
  free_items(d->running);
  free_items(d->queue);
  free_items(d->ahead);
  d->running = d->queue = d->ahead = NULL;
  sqlite3_finalize(d->insert);
  sqlite3_finalize(d->del_poses);
  sqlite3_finalize(d->ins_pose);
  d->insert = d->del_poses = d->ins_pose = NULL;
}
