/* runner.c — run a workflow's stages: a stage a straight line of named
 * steps (run_stage), signals, shards, the processes of a data-parallel
 * run. A stage's chunks are in runner_chunks.c, the runner's tables (the
 * ledger) in ledger.c; the folding of shards and `merge` are in merge.c,
 * `status` in status.c, which stages a workflow runs and `check` in
 * check.c; what they share is in runner_internal.h and runner_util.c.
 *
 * The resumability contract: a chunk's outputs and its ledger row are
 * committed in one transaction; a rerun skips chunks done under the same
 * config hash; a changed config discards the stage and everything downstream
 * (saying so in one line); SIGINT/SIGTERM/SIGUSR1 stop at the next chunk
 * boundary with exit 75; one writer per database; shards write their own
 * databases and `merge` folds them in idempotently.
 */
#define _GNU_SOURCE
#include "pipeline/runner_internal.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "pipeline/config.h"
#include "pipeline/ledger.h"
#include "pipeline/progress.h"
#include "pipeline/runner_chunks.h"
#include "pipeline/store.h"
#include "stages/stage.h"

#ifndef SE3_VERSION
#define SE3_VERSION "0.1.0"
#endif

static void on_signal(int sig) {
  (void)sig;
  run_stop_flag = 1;
}

const int se3_stop_signals[SE3_N_STOP_SIGNALS] = {SIGINT, SIGTERM, SIGUSR1};

void se3_on_stop_signals(void (*fn)(int), int flags, struct sigaction *old) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = fn;
  sa.sa_flags = flags;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < SE3_N_STOP_SIGNALS; i++)
    sigaction(se3_stop_signals[i], &sa, old ? &old[i] : NULL);
}

static void install_signals(void) { se3_on_stop_signals(on_signal, 0, NULL); }

static int mkdirs(const char *path, struct se3_error *err) {
  if (se3_mkdirs(path) == 0) return 0;
  se3_error_set(err, SE3_ERR_IO, "cannot create %.1024s: %s", path, strerror(errno));
  return -1;
}

/* ---- the run ------------------------------------------------------------- */

/* Rank 0's runner to the other processes of a data-parallel run (sent
 * with stage_order's message): run the collective stage i[0], or the run is
 * over with exit status i[0], or take a share of the chunks of stage i[0]
 * (struct stage's `spread`) whose config hash is i[1]. The stages' own
 * orders follow RUN_ORDER_STAGE. */
enum { RUN_ORDER_STAGE = 1, RUN_ORDER_END = 2, RUN_ORDER_SPREAD = 3 };

/* Returns SE3_EXIT_*. */
/* A run of one command: nothing open yet, one shard, no lock. */
static void run_init(struct run *r, const struct run_opts *o) {
  memset(r, 0, sizeof *r);
  r->o = o;
  r->comm = o->comm;
  r->shard = 0;
  r->n_shards = 1;
  r->st.lock_fd = -1;
  r->round = o->round_given ? o->round : -1;
}

/* Every process's part in a stage whose chunks the processes of a
 * data-parallel run share (struct stage's `spread`), rank 0's included, in
 * a run `w` of its own: its own database WORKDIR/shards/<stage>-rank<r>.db
 * (screen.db attached read-only as "src": nobody writes screen.db while
 * the processes work, so it may sit on any shared filesystem), the stage
 * begun there, its chunks in step with the others (run_chunks), then the
 * database closed for rank 0 to fold in. Collective: every process calls
 * it once rank 0 has sent RUN_ORDER_SPREAD. A process > 0 prints its own
 * failure; rank 0's is left in w->err. Returns SE3_EXIT_*. */
static int share_stage(struct run *w, const struct stage *s, const char *hash, const char *chain) {
  const struct se3_comm *comm = w->comm;
  int rank = comm_rank(comm), n = comm_size(comm);
  char settings[17], path[PATH_MAX + 96], up[PATH_MAX + 32];
  run_settings_hash(w->root, s, settings);
  struct run_ctx rc;
  w->shard = rank;
  w->n_shards = n;
  w->src = "src";
  w->err.message[0] = 0;
  run_ctx_init(&rc, w, s, &ledger_stage_reads);
  struct stage_ctx *ctx = &rc.ctx;
  if (rank > 0) ctx->report = &run_quiet_report; /* rank 0 speaks for the run */
  int64_t n_chunks = 0, n_items = 0;
  int st = STAGE_ERROR;
  snprintf(up, sizeof up, "%s/shards", w->workdir);
  run_rank_db_path(path, sizeof path, w->workdir, s->name, rank);
  if (!mkdirs(up, &w->err) &&
      !store_open_locked(&w->st, path, STORE_WRITE, cfg_str(w->root, "store.journal"),
                         (int)cfg_int(w->root, "store.busy_timeout_ms"), &w->err) &&
      (snprintf(up, sizeof up, "%s/screen.db", w->workdir), !store_attach_readonly(&w->st, up, "src", &w->err)) &&
      !ledger_record_run(w, s->name)) {
    /* (rank 0 folded and removed what an earlier run left here; whatever is
     * still here from another configuration goes) */
    struct ledger_stage old;
    if (ledger_read_stage(w->st.db, "main", s->name, &old) < 0) {
      ledger_read_failed(w, "main", s->name);
    } else {
      if (old.config_hash[0] && strcmp(old.config_hash, hash)) run_clear_from(w, run_stage_index(s->name));
      ctx->db = w->st.db;
      st = run_begin(ctx, s, &n_chunks, &n_items);
      if (st != STAGE_OK) {
        run_stage_failed(w, &ctx->err, "%s", s->name);
      } else {
        if (ledger_set_state(w, s->name, hash, settings, chain, n_chunks, n_items, 0, 1)) st = STAGE_ERROR;
      }
    }
  }
  if (st != STAGE_OK && rank > 0) fprintf(stderr, "se3screen (rank %d): %s\n", rank, se3_error_str(&w->err).s);
  int all = st, ret = SE3_EXIT_FAILED;
  if (comm_max_int(comm, &all, 1)) comm_abort(comm, SE3_EXIT_FAILED);
  if (all == STAGE_OK)
    ret = run_chunks(w, &(struct chunk_job){s, ctx, hash, n_chunks, n_items, rank, n, comm});
  else if (st == STAGE_OK)
    se3_error_set(&w->err, SE3_ERR_RUN, "%s: another process of the run could not begin it (its message is above)",
                  s->name);
  if (w->st.db) ledger_finish_run(w, ret);
  run_end(ctx, s);
  store_close(&w->st);
  int closed = 0;
  if (comm_max_int(comm, &closed, 1)) comm_abort(comm, SE3_EXIT_FAILED);
  return ret;
}

/* A process of rank > 0 in a shared stage (share_stage), in its run r. */
static void follow_spread(struct run *r, const struct stage *s, uint64_t hash64, uint64_t chain64) {
  char hash[17], chain[17];
  snprintf(hash, sizeof hash, "%016" PRIx64, hash64);
  snprintf(chain, sizeof chain, "%016" PRIx64, chain64);
  share_stage(r, s, hash, chain);
  r->src = "main";
  r->shard = 0;
  r->n_shards = 1;
}

/* run_stage's start: a collective stage's order to the other processes,
 * begin (in every process of a collective stage), then ready. 0, or -1
 * with r->err set and the stage ended. */
static int begin_stage(struct run *r, int si, struct stage_ctx *ctx, int collective, int64_t *n_chunks,
                       int64_t *n_items) {
  const struct stage *s = run_all_stages[si];
  ctx->comm = collective ? r->comm : NULL;
  if (collective) {
    struct stage_order o = {.op = RUN_ORDER_STAGE, .i = {si}};
    if (stage_order(ctx, &o)) {
      se3_error_set(&r->err, SE3_ERR_RUN, "%s: MPI failed sending the stage to the other processes", s->name);
      return -1;
    }
  }
  int began = run_begin(ctx, s, n_chunks, n_items);
  int all_began = began;
  if (collective) comm_max_int(r->comm, &all_began, 1);
  if (all_began != STAGE_OK) {
    if (began != STAGE_OK)
      run_stage_failed(r, &ctx->err, "%s", s->name);
    else
      se3_error_set(&r->err, SE3_ERR_RUN, "%s: another process of the run could not begin it (its message is above)",
                    s->name);
    run_end(ctx, s);
    return -1;
  }
  if (s->ready && s->ready(ctx) != STAGE_OK) {
    run_stage_failed(r, &ctx->err, "%s", s->name);
    if (collective) stage_serve_end(ctx);
    run_end(ctx, s);
    return -1;
  }
  return 0;
}

/* A spread stage in a data-parallel run (STAGE_SPREAD): every process, this
 * one too, does its share in a database of its own (share_stage), and this
 * one then folds them all in. The planning begun here on screen.db has done
 * its part: it is ended first. An SE3_EXIT_* status. */
static int spread_stage(struct run *r, int si, struct stage_ctx *ctx, const char *hash, const char *chain) {
  const struct stage *s = run_all_stages[si];
  run_end(ctx, s);
  ctx->state = NULL;
  ctx->chunk_needed = NULL; /* (the plan's, freed with it) */
  struct stage_order o = {.op = RUN_ORDER_SPREAD,
                          .i = {si, (int64_t)strtoull(hash, NULL, 16), (int64_t)strtoull(chain, NULL, 16)}};
  struct stage_ctx bare = {.comm = r->comm};
  if (stage_order(&bare, &o)) {
    se3_error_set(&r->err, SE3_ERR_RUN, "%s: MPI failed sending the stage to the other processes", s->name);
    return SE3_EXIT_FAILED;
  }
  struct run w;
  run_init(&w, r->o);
  w.root = r->root;
  memcpy(w.workdir, r->workdir, sizeof w.workdir);
  memcpy(w.workflow_dir, r->workflow_dir, sizeof w.workflow_dir);
  memcpy(w.host, r->host, sizeof w.host);
  int ret = share_stage(&w, s, hash, chain);
  if (ret != SE3_EXIT_OK) r->err = w.err;
  if (ret == SE3_EXIT_OK && run_fold_rank_shards(r, s, hash, "") < 0) ret = SE3_EXIT_FAILED;
  return ret;
}

/* A keyed stage whose settings chain changed (its settings, or those of a
 * stage before it) loses all its rows before it plans: its begin then
 * plans every molecule. 0, or -1 with r->err set. */
static int discard_keyed(struct run *r, int si, const char chain[17]) {
  const struct stage *s = run_all_stages[si];
  char settings[17];
  run_settings_hash(r->root, s, settings);
  struct ledger_stage old;
  if (ledger_read_stage(r->st.db, "main", s->name, &old) < 0) return ledger_read_failed(r, "main", s->name);
  /* (a stage of an earlier se3screen has no chain: kept when its own
   * settings are, its rows judged one by one) */
  int discard = old.config_hash[0] &&
                (old.chain_hash[0] ? strcmp(old.chain_hash, chain) != 0 : strcmp(old.settings_hash, settings) != 0);
  if (!discard) return 0;
  long long n_done = ledger_chunk_count(r->st.db, "main", s->name, NULL, 0);
  if (n_done < 0) return ledger_read_failed(r, "main", s->name);
  progress_log(NULL, "%s: %s changed since the last run; discarding its %lld finished chunk%s and its rows", s->name,
               old.settings_hash[0] && strcmp(old.settings_hash, settings) ? "the configuration"
                                                                           : "what it is made from",
               n_done, n_done == 1 ? "" : "s");
  if (run_exec(r, "BEGIN IMMEDIATE")) return -1;
  if (run_clear_stage(r, si) || run_unfinish_after(r, si) || run_exec(r, "COMMIT")) {
    sqlite3_exec(r->st.db, "ROLLBACK", NULL, NULL, NULL);
    return -1;
  }
  return 0;
}

/* A keyed stage before it plans (its hash is its chain: known before it
 * plans): its rows discarded where its chain changed (discard_keyed), then
 * the work that processes of an earlier data-parallel run left in their
 * own databases folded in, so that the plan asks only what is missing.
 * Another stage: nothing. 0, or -1 with r->err set. */
static int keyed_before_plan(struct run *r, int si, const struct run_upstream *up) {
  const struct stage *s = run_all_stages[si];
  if (!stage_is_keyed(s, r->root)) return 0;
  char chain[17];
  run_chain_hash(r->root, s, up->chain, chain);
  if (discard_keyed(r, si, chain)) return -1;
  if ((s->flags & STAGE_SPREAD) && r->n_shards <= 1 && run_fold_rank_shards(r, s, chain, "leftovers") < 0) return -1;
  return 0;
}

/* A stage in run_stage, once begun: which, its context, whether the other
 * processes serve it with this one (collective), whether it is keyed, its
 * plan, and its hashes (the ledger's config hash, settings, chain). */
struct stage_run {
  int si;
  const struct stage *s;
  struct stage_ctx *ctx;
  int collective, keyed;
  int64_t n_chunks, n_items;
  char settings[17], hash[17], chain[17];
};

/* In renew_ledger's transaction: a stage done whole whose file in the
 * workdir is gone does it again (*regone); a changed configuration
 * discards the stage's rows (*discard; a keyed stage's were discarded
 * before it planned, discard_keyed); a keyed stage's ledger keeps only the
 * chunks its plan still has. 0, or -1 with r->err set. */
static int clear_what_changed(struct run *r, const struct stage_run *sr, const struct ledger_stage *old,
                              long long stale, int *discard, int *regone) {
  const struct stage *s = sr->s;
  *discard = !sr->keyed && ((old->config_hash[0] && strcmp(old->config_hash, sr->hash)) || stale > 0);
  long long n_had = ledger_chunk_count(r->st.db, "main", s->name, NULL, 0);
  if (n_had < 0) return ledger_read_failed(r, "main", s->name);
  *regone = !sr->keyed && !*discard && sr->ctx->outputs_gone && r->n_shards <= 1 && n_had > 0;
  if (*regone) {
    progress_log(NULL, "%s: %s/%s is gone since the last run; doing the stage again to write it", s->name, r->workdir,
                 sr->ctx->outputs_gone);
    return run_clear_stage(r, sr->si);
  }
  if (*discard) {
    progress_log(NULL, "%s: %s changed since the last run; discarding its %lld finished chunk%s and its rows", s->name,
                 old->settings_hash[0] && strcmp(old->settings_hash, sr->settings) ? "the configuration"
                 : run_upstream_of(r->root, s)                                     ? "what it is made from"
                                                                                   : "an input file",
                 n_had, n_had == 1 ? "" : "s");
    return run_clear_stage(r, sr->si);
  }
  /* (the rows of the chunks the plan still has tell what was done last) */
  return sr->keyed ? ledger_forget_chunks_from(r, s->name, sr->n_chunks) : 0;
}

/* In renew_ledger's transaction: a keyed stage's prune, the rows (and
 * rejects) of molecules changed or gone, their count in *n_pruned (in a
 * shard, a prune leaves screen.db alone). 0, or -1 with r->err set. */
static int prune_keyed(struct run *r, const struct stage_run *sr, int64_t *n_pruned) {
  const struct stage *s = sr->s;
  *n_pruned = 0;
  if (!sr->keyed || !(s->keyed->rows || s->keyed->prune)) return 0;
  if ((s->keyed->rows ? run_rows_prune(sr->ctx, s, n_pruned) : s->keyed->prune(sr->ctx, n_pruned)) != STAGE_OK) {
    run_stage_failed(r, &sr->ctx->err, "%s", s->name);
    return -1;
  }
  if (*n_pruned > 0)
    progress_log(NULL, "%s: %lld row%s of molecules changed or gone deleted", s->name, (long long)*n_pruned,
                 *n_pruned == 1 ? "" : "s");
  return 0;
}

/* The ledger made to fit this run of the stage, in one transaction. A
 * changed configuration discards the stage's rows (a keyed stage's, whose
 * rows each name what they were made from, only when its settings chain
 * changed: discard_keyed; its prune deletes the rows no longer wanted). A
 * stage with work to do is not finished, nor, until they have run again
 * and judged for themselves, are the stages after it. The stage's state
 * then records its hashes and its plan. 0, or -1 with r->err set. */
static int renew_ledger(struct run *r, const struct stage_run *sr) {
  struct ledger_stage old;
  if (ledger_read_stage(r->st.db, "main", sr->s->name, &old) < 0) return ledger_read_failed(r, "main", sr->s->name);
  long long stale = ledger_chunk_count(r->st.db, "main", sr->s->name, sr->hash, 1);
  if (stale < 0) return ledger_read_failed(r, "main", sr->s->name);
  if (run_exec(r, "BEGIN IMMEDIATE")) return -1;
  int discard = 0, regone = 0;
  int64_t n_pruned = 0;
  int bad = clear_what_changed(r, sr, &old, stale, &discard, &regone) || prune_keyed(r, sr, &n_pruned);
  /* (a keyed stage with no chunk to do and no row deleted changed nothing) */
  int changed = !bad && (sr->keyed ? run_any_needed(sr->ctx, sr->n_chunks) || n_pruned > 0
                                   : discard || regone || !old.config_hash[0]);
  bad = bad || (changed && run_unfinish_after(r, sr->si)) ||
        ledger_set_state(r, sr->s->name, sr->hash, sr->settings, sr->chain, sr->n_chunks, sr->n_items, changed, 0) ||
        run_exec(r, "COMMIT");
  if (bad) sqlite3_exec(r->st.db, "ROLLBACK", NULL, NULL, NULL);
  return bad ? -1 : 0;
}

/* The run's workflow in its meta rows, now that a stage of it runs
 * (ledger_record_run): once a run, and not in a shard's database (it has
 * them from the start). 0, or -1 with r->err set. */
static int record_workflow(struct run *r) {
  if (r->n_shards <= 1 && !r->meta_recorded && ledger_record_meta(r, "", 1)) return -1;
  r->meta_recorded = 1;
  return 0;
}

/* Work of this stage that processes of an earlier data-parallel run left
 * in their own databases (stopped before rank 0 folded it in); a keyed
 * stage's was folded in before it planned (keyed_before_plan). 0, or -1
 * with r->err set. */
static int fold_leftovers(struct run *r, const struct stage_run *sr) {
  if (sr->keyed || !(sr->s->flags & STAGE_SPREAD) || r->n_shards > 1) return 0;
  return run_fold_rank_shards(r, sr->s, sr->hash, "leftovers") < 0 ? -1 : 0;
}

/* The stage's chunks: shared among the processes of a data-parallel run
 * where it spreads (spread_stage; stage.h: a spread stage has no
 * finalize), else this process's (run_chunks). An SE3_EXIT_* status. */
static int do_chunks(struct run *r, const struct stage_run *sr) {
  if (r->comm && (sr->s->flags & STAGE_SPREAD) && !sr->collective && !sr->s->finalize)
    return spread_stage(r, sr->si, sr->ctx, sr->hash, sr->chain);
  return run_chunks(
      r, &(struct chunk_job){sr->s, sr->ctx, sr->hash, sr->n_chunks, sr->n_items, r->shard, r->n_shards, NULL});
}

/* The stage finalized once every chunk of it is in this database (a keyed
 * stage's: every chunk with work done here, or in the processes folded
 * in; a shard's database is finalized by merge). 0, or -1 with r->err
 * set. */
static int finalize_if_whole(struct run *r, const struct stage_run *sr) {
  long long n_done = sr->keyed ? sr->n_chunks : ledger_chunk_count(r->st.db, "main", sr->s->name, sr->hash, 0);
  struct ledger_stage now;
  if (n_done < 0 || ledger_read_stage(r->st.db, "main", sr->s->name, &now) < 0)
    return ledger_read_failed(r, "main", sr->s->name);
  /* (no row: not finalized) */
  if (r->n_shards <= 1 && n_done == sr->n_chunks && now.finalized <= 0) return run_finalize(r, sr->s, sr->ctx);
  return 0;
}

/* run_stage's end, however it went: a collective stage ended on the other
 * processes, the stage's end, and its time in this run (ledger_stage_time). ret,
 * or SE3_EXIT_FAILED where the other processes could not end it. */
static int end_stage(struct run *r, const struct stage_run *sr, const char *started, double t0, int ret) {
  if (sr->collective && stage_serve_end(sr->ctx) && ret == SE3_EXIT_OK) {
    se3_error_set(&r->err, SE3_ERR_RUN, "%s: MPI failed ending the stage on the other processes", sr->s->name);
    ret = SE3_EXIT_FAILED;
  }
  run_end(sr->ctx, sr->s);
  ledger_stage_time(r, sr->s, started, t0, ret);
  return ret;
}

/* Stage si of the run, a step after another: what it reads finished
 * (run_check_upstream; a keyed stage's rows judged before it plans), begun
 * (in every process of a collective stage), its hashes, the ledger made
 * to fit, the workflow recorded, leftovers folded in, its chunks, and,
 * once whole, finalized; then ended. Returns SE3_EXIT_*. */
static int run_stage(struct run *r, int si) {
  struct run_ctx rc;
  struct stage_run sr = {.si = si, .s = run_all_stages[si], .ctx = &rc.ctx};
  run_ctx_init(&rc, r, sr.s, &ledger_stage_reads);
  char started[40];
  run_now_iso_ms(started, sizeof started);
  double t0 = progress_now();
  memset(&r->prog, 0, sizeof r->prog); /* (this stage's count, for ledger_stage_time) */

  struct run_upstream up;
  if (run_check_upstream(r, sr.s, &up) || keyed_before_plan(r, si, &up)) return SE3_EXIT_FAILED;
  sr.collective = r->comm && sr.s->serve; /* the other processes begin it with this one */
  if (begin_stage(r, si, sr.ctx, sr.collective, &sr.n_chunks, &sr.n_items)) return SE3_EXIT_FAILED;
  run_settings_hash(r->root, sr.s, sr.settings);
  run_stage_hashes(r->root, sr.s, sr.ctx->inputs_hash, &up, sr.hash, sr.chain);
  sr.keyed = stage_is_keyed(sr.s, r->root);

  int ret = SE3_EXIT_FAILED;
  if (!renew_ledger(r, &sr) && !record_workflow(r) && !fold_leftovers(r, &sr)) {
    ret = do_chunks(r, &sr);
    if (ret == SE3_EXIT_OK && finalize_if_whole(r, &sr)) ret = SE3_EXIT_FAILED;
  }
  return end_stage(r, &sr, started, t0, ret);
}

/* A process of rank > 0: the workflow's configuration as rank 0 reads it,
 * screen.db read-only, and rank 0's orders: begin a collective stage, serve
 * it, end it; until the run is over. Returns rank 0's exit status. */
static int run_follow(const struct run_opts *o) {
  struct run r;
  run_init(&r, o);
  r.src = "main";
  int rank = comm_rank(o->comm);
  r.root = run_load_config(o->workflow, o->sets, o->n_sets, o->workdir, "");
  snprintf(r.workdir, sizeof r.workdir, "%s", r.root ? cfg_str(r.root, "workdir") : ".");
  char tmp[PATH_MAX];
  snprintf(r.workflow_dir, sizeof r.workflow_dir, "%s", realpath(o->workflow, tmp) ? dirname(tmp) : ".");
  install_signals();
  for (;;) {
    struct stage_order ord;
    struct stage_ctx bare = {.comm = o->comm};
    if (stage_order(&bare, &ord)) {
      fprintf(stderr, "se3screen (rank %d): MPI failed waiting for rank 0\n", rank);
      cfg_node_free(r.root);
      return SE3_EXIT_FAILED;
    }
    if (ord.op == RUN_ORDER_END) {
      cfg_node_free(r.root);
      return (int)ord.i[0];
    }
    if (ord.op == RUN_ORDER_SPREAD && ord.i[0] >= 0 && ord.i[0] < N_STAGES && r.root) {
      follow_spread(&r, run_all_stages[ord.i[0]], (uint64_t)ord.i[1], (uint64_t)ord.i[2]);
      continue;
    }
    if (ord.op != RUN_ORDER_STAGE || ord.i[0] < 0 || ord.i[0] >= N_STAGES || !r.root) {
      fprintf(stderr, "se3screen (rank %d): rank 0 sent order %lld, which this process cannot follow\n", rank,
              (long long)ord.op);
      comm_abort(o->comm, SE3_EXIT_FAILED);
    }
    const struct stage *s = run_all_stages[ord.i[0]];
    struct run_ctx rc;
    run_ctx_init(&rc, &r, s, &ledger_stage_reads);
    struct stage_ctx *ctx = &rc.ctx;
    ctx->report = &run_quiet_report;
    ctx->comm = o->comm;
    char dbpath[PATH_MAX + 64];
    snprintf(dbpath, sizeof dbpath, "%s/screen.db", r.workdir);
    int st = STAGE_ERROR;
    if (ledger_open_ro(&r.st, dbpath, r.root, &ctx->err) == 0) {
      ctx->db = r.st.db;
      int64_t n_chunks, n_items;
      st = run_begin(ctx, s, &n_chunks, &n_items);
    }
    if (st != STAGE_OK) fprintf(stderr, "se3screen (rank %d): %s: %s\n", rank, s->name, se3_error_str(&ctx->err).s);
    int all = st;
    comm_max_int(o->comm, &all, 1);
    if (all == STAGE_OK && s->serve(ctx) != STAGE_OK)
      fprintf(stderr, "se3screen (rank %d): %s: %s\n", rank, s->name, se3_error_str(&ctx->err).s);
    run_end(ctx, s);
    store_close(&r.st);
  }
}

static int parse_slurm_shard(int *shard, int *n) {
  const char *id = getenv("SLURM_ARRAY_TASK_ID"), *cnt = getenv("SLURM_ARRAY_TASK_COUNT");
  if (!id || !cnt) return 0;
  const char *min = getenv("SLURM_ARRAY_TASK_MIN");
  int c = atoi(cnt), i = atoi(id) - (min ? atoi(min) : 0);
  if (c < 1 || i < 0 || i >= c) return -1;
  *shard = i;
  *n = c;
  return 1;
}

static int run_main(const struct run_opts *o);

int runner_run(const struct run_opts *o) {
  if (comm_rank(o->comm) > 0) return run_follow(o);
  int ret = run_main(o);
  if (o->comm) {
    struct stage_order end = {.op = RUN_ORDER_END, .i = {ret}};
    struct stage_ctx bare = {.comm = o->comm};
    if (stage_order(&bare, &end)) comm_abort(o->comm, ret ? ret : SE3_EXIT_FAILED);
  }
  return ret;
}

/* run_main's checks before anything is opened: the ways of running that
 * do not go together, the model's device, the inputs' columns and tags.
 * SE3_EXIT_OK, or SE3_EXIT_USAGE with the message on stderr. */
static int check_run(struct run *r, const struct run_opts *o, int first, int last) {
  if (r->n_shards > 1 && o->comm) {
    fprintf(stderr,
            "se3screen run: started as %d processes and as shard %d/%d: shard a stage with --shard (or a "
            "Slurm array), or train on several processes, not both at once\n",
            comm_size(o->comm), r->shard, r->n_shards);
    return SE3_EXIT_USAGE;
  }
  if (r->n_shards > 1 && first != last) {
    fprintf(stderr, "se3screen run: a sharded run does one stage at a time: add --stage NAME, then `se3screen merge` "
                    "before the next stage\n");
    return SE3_EXIT_USAGE;
  }
  if (o->round_given && (!o->stage || !runner_cycling_stage(r->root) ||
                         strcmp(o->stage, runner_cycling_stage(r->root)) || r->n_shards > 1)) {
    fprintf(stderr,
            "se3screen run: --round goes with --stage %s, unsharded: it decides a round of the workflow's "
            "active learning\n",
            runner_cycling_stage(r->root) ? runner_cycling_stage(r->root) : "acquire");
    return SE3_EXIT_USAGE;
  }

  /* The model's device, before any work: `device: cuda` without a usable
   * GPU stops here, not after hours of graphs and bases. */
  for (int i = first; i <= last; i++)
    if ((run_all_stages[i]->flags & STAGE_USES_MODEL)) {
      struct se3_error why;
      const char *bad = "device";
      if (stage_device_check(r->root, &bad, &why)) {
        const struct cfg_node *dn = cfg_get(r->root, bad);
        if (cfg_written(dn)) se3_error_at(&why, dn->file, dn->line, dn->col);
        fprintf(stderr, "se3screen: %s\n", se3_error_str(&why).s);
        return SE3_EXIT_USAGE;
      }
      break;
    }
  { /* the inputs' columns and tags, for the stages that will run */
    char names[256];
    run_stage_names(r->root, first, last, o->stage != NULL, names, sizeof names);
    if (run_check_input_files(r->root, names, o->workflow)) { return SE3_EXIT_USAGE; }
  }

  return SE3_EXIT_OK;
}

/* run_main's database: the workdir, screen.db (or this shard's own, with
 * screen.db attached read-only as "src" for the tables it reads) opened
 * under its lock, and the run recorded. 0, or -1 with r->err set (-2: the
 * workdir is another workflow's, run_check_owner). */
static int open_run(struct run *r, const struct run_opts *o, int first) {
  snprintf(r->workdir, sizeof r->workdir, "%s", cfg_str(r->root, "workdir"));
  {
    char tmp[PATH_MAX];
    if (realpath(o->workflow, tmp)) {
      snprintf(r->workflow_dir, sizeof r->workflow_dir, "%s", dirname(tmp));
    } else {
      snprintf(r->workflow_dir, sizeof r->workflow_dir, ".");
    }
  }
  char dbpath[PATH_MAX + 64];
  if (r->n_shards > 1) {
    char dir[PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/shards", r->workdir);
    if (mkdirs(dir, &r->err)) return -1;
    snprintf(dbpath, sizeof dbpath, "%s/%s-%d.db", dir, run_all_stages[first]->name, r->shard);
  } else {
    if (mkdirs(r->workdir, &r->err)) return -1;
    snprintf(dbpath, sizeof dbpath, "%s/screen.db", r->workdir);
  }
  /* The lock first: a database another se3screen is writing is refused by
   * its holder's name before anything of it is read */
  if (store_open_locked(&r->st, dbpath, STORE_WRITE, cfg_str(r->root, "store.journal"),
                        (int)cfg_int(r->root, "store.busy_timeout_ms"), &r->err))
    return -1;

  /* Another workflow's screen.db is refused before anything of it changes */
  if (r->n_shards <= 1 && run_check_owner(r, o->workflow)) return -2;

  /* A shard of a stage that reads another's tables reads them from screen.db
   * (made by an unsharded run or by merge); it writes only its own database. */
  r->src = "main";
  const char *first_after = run_upstream_of(r->root, run_all_stages[first]);
  if (r->n_shards > 1 && first_after) {
    char up[PATH_MAX + 32];
    snprintf(up, sizeof up, "%s/screen.db", r->workdir);
    if (access(up, R_OK) != 0) {
      se3_error_set(&r->err, SE3_ERR_RUN,
                    "%s reads the %s stage's results from %.1500s, which does not exist: run %s first",
                    run_all_stages[first]->name, first_after, up, first_after);
      return -1;
    }
    if (store_attach_readonly(&r->st, up, "src", &r->err)) return -1;
    r->src = "src";
  }

  /* Remember how to rebuild this configuration (merge needs it to finalize). */
  if (ledger_record_run(r, r->n_shards > 1 ? run_all_stages[first]->name : "")) return -1;

  return 0;
}

static int run_main(const struct run_opts *o) {
  struct run r;
  run_init(&r, o);
  run_hostname(r.host, sizeof r.host);
  int ret = SE3_EXIT_FAILED;

  /* Which stages. */
  int first, last;
  if (run_stage_range(o, &first, &last)) return SE3_EXIT_USAGE;
  if (o->n_shards > 0) {
    r.shard = o->shard;
    r.n_shards = o->n_shards;
  } else if (parse_slurm_shard(&r.shard, &r.n_shards) < 0) {
    fprintf(stderr, "se3screen run: SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT do not describe a shard\n");
    return SE3_EXIT_USAGE;
  }
  {
    char inputs[128] = ""; /* the stages that may run read their inputs */
    for (int i = first; i <= last; i++)
      snprintf(inputs + strlen(inputs), sizeof inputs - strlen(inputs), "%s%s", i > first ? " " : "",
               run_all_stages[i]->name);
    /* a workflow with problems: all of them at once, its inputs' too */
    r.root =
        run_load_one_pass(o->workflow, o->sets, o->n_sets, o->workdir, inputs, NULL, first, last, o->stage != NULL, 0);
  }
  if (!r.root) return SE3_EXIT_USAGE;
  /* Stages the workflow does not configure are not run unless asked for. */
  if (!o->stage) last = run_last_configured(r.root, first, last);
  ret = check_run(&r, o, first, last);
  if (ret != SE3_EXIT_OK) {
    cfg_node_free(r.root);
    return ret;
  }
  int opened = open_run(&r, o, first);
  if (opened == -2) { /* (a refusal, as a configuration error: exit 2) */
    fprintf(stderr, "se3screen: %s\n", se3_error_str(&r.err).s);
    store_close(&r.st);
    cfg_node_free(r.root);
    return SE3_EXIT_USAGE;
  }
  if (opened) goto fail_early;

  install_signals();
  ret = SE3_EXIT_OK;
  /* a stage that runs again at the end of its cycle (acquire: active
   * learning's rounds), in a run of the whole workflow */
  int cyc = -1, cyc_end = -1;
  for (int i = first; i <= last && !o->stage && r.n_shards <= 1; i++)
    if (run_all_stages[i]->cycle.end && !run_stage_skipped(r.root, run_all_stages[i])) {
      cyc = i;
      cyc_end = run_stage_index(run_all_stages[i]->cycle.end);
    }
  for (int i = first; i <= last && ret == SE3_EXIT_OK; i++) {
    if (run_stage_skipped(r.root, run_all_stages[i]) && !(o->stage && i == first)) continue;
    ret = run_stage(&r, i);
    if (ret == SE3_EXIT_OK && cyc >= 0 && i == cyc_end && run_all_stages[cyc]->cycle.due(r.st.db, r.root) == 1) {
      r.cycle = 1;
      ret = run_stage(&r, cyc);
      r.cycle = 0;
      i = cyc; /* and on from the stage after it */
    }
  }

  ledger_finish_run(&r, ret);
  if (ret == SE3_EXIT_STOPPED)
    fprintf(stderr, "se3screen: stopped by a signal, its finished work kept; run the same command again to resume\n");
  else if (ret != SE3_EXIT_OK)
    fprintf(stderr, "se3screen: %s\n", r.err.message[0] ? se3_error_str(&r.err).s : "run failed");
  store_close(&r.st);
  cfg_node_free(r.root);
  return ret;

fail_early:
  fprintf(stderr, "se3screen: %s\n", se3_error_str(&r.err).s);
  store_close(&r.st);
  cfg_node_free(r.root);
  return SE3_EXIT_FAILED;
}
