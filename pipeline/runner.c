/* runner.c — run a workflow's stages: ledger, chunks, signals, shards. The
 * folding of shards and `merge` are in merge.c, `status` in status.c, which
 * stages a workflow runs and `check` in check.c; what they share is in
 * runner_internal.h and runner_util.c.
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

static int mkdirs(const char *path, char *err, size_t errlen) {
  if (se3_mkdirs(path) == 0) return 0;
  snprintf(err, errlen, "cannot create %.1024s: %s", path, strerror(errno));
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

/* Whether a keyed stage's plan has a chunk with work (ctx->chunk_needed). */
static int any_needed(const struct stage_ctx *ctx, int64_t n_chunks) {
  for (int64_t c = 0; ctx->chunk_needed && c < n_chunks; c++)
    if (ctx->chunk_needed[c]) return 1;
  return 0;
}

/* Chunk c of stage s in its own transaction with its ledger row (under
 * hash, for this shard, in the ledger's round round_src): the stage's
 * run_chunk, the row, COMMIT. Anything but STAGE_OK rolls it back, with
 * *n_ok and *n_rej 0. STAGE_OK, STAGE_STOPPED or STAGE_ERROR (r->err says
 * why where the stage or the database did). */
static int one_chunk(struct run *r, const struct stage *s, struct stage_ctx *ctx, const char *hash, int64_t c,
                     int shard, const char *round_src, int64_t *n_ok, int64_t *n_rej) {
  char started[32];
  run_now_iso(started, sizeof started);
  int st = run_exec(r, "BEGIN IMMEDIATE") ? STAGE_ERROR : STAGE_OK;
  ctx->chunk_bytes = 0;
  if (st == STAGE_OK) {
    st = s->run_chunk(ctx, c, n_ok, n_rej);
    if (st == STAGE_ERROR) snprintf(r->err, sizeof r->err, "%s: chunk %lld: %s", s->name, (long long)c, ctx->err);
  }
  if (st == STAGE_OK &&
      (ledger_write_chunk(r, s->name, c, shard, hash, started, *n_ok, *n_rej, ctx->chunk_bytes, round_src) ||
       run_exec(r, "COMMIT")))
    st = STAGE_ERROR;
  if (st != STAGE_OK) {
    sqlite3_exec(r->st.db, "ROLLBACK", NULL, NULL, NULL);
    *n_ok = *n_rej = 0;
  }
  return st;
}

/* This process's chunks of stage s: those with chunk % n_shards == shard
 * that the ledger does not list as done, in increasing order, each in its
 * own transaction with its ledger row. together: the processes of a
 * data-parallel run sharing the stage (shard = rank, n_shards = size); they
 * go in step, a chunk each and then a word with the others (molecules done,
 * a signal seen, a failure, work left), so a signal or a failure on any one
 * stops all after the chunk in flight, and rank 0's progress counts
 * everyone's molecules. A process of such a run that is not rank 0 also
 * counts the chunks screen.db ("src") lists under this hash as done.
 * Returns SE3_EXIT_OK, _STOPPED, or _FAILED with r->err set. */
static int run_chunks(struct run *r, const struct stage *s, struct stage_ctx *ctx, const char *hash, int64_t n_chunks,
                      int64_t n_items, int shard, int n_shards, const struct se3_comm *together) {
  int speaks = comm_rank(together) == 0; /* shows the progress */
  /* (A failed read of the ledger must stop the stage: taken as "nothing
   * done", it would redo, and store twice, every finished chunk.) */
  char *done = calloc((size_t)n_chunks + 1, 1);
  int64_t done_items = 0, todo = 0;
  if (!done) {
    snprintf(r->err, sizeof r->err, "%s: out of memory for the ledger of %lld chunks", s->name, (long long)n_chunks);
    return SE3_EXIT_FAILED;
  }
  if (ledger_chunks_done(r, s, ctx, hash, n_chunks, together, done, &done_items)) {
    free(done);
    return SE3_EXIT_FAILED;
  }
  int64_t shard_items = n_items;
  for (int64_t c = 0; c < n_chunks; c++)
    if (c % n_shards == shard && !done[c]) todo++;
  int64_t all_todo = todo; /* of every process sharing the stage */
  if (together) {
    double t = (double)todo;
    if (comm_sum_f64(together, &t, 1)) {
      fprintf(stderr, "se3screen (rank %d): %s: MPI failed counting the chunks; ending the run\n", comm_rank(together),
              s->name);
      comm_abort(together, SE3_EXIT_FAILED);
    }
    all_todo = (int64_t)t;
  }
  if (n_shards > 1 && !together) shard_items = done_items + (n_chunks ? (n_items / n_chunks) * todo : 0);
  char label[96];
  if (n_shards > 1 && !together)
    snprintf(label, sizeof label, "%s (shard %d/%d)", s->name, shard, n_shards);
  else if (together)
    snprintf(label, sizeof label, "%s (%d processes)", s->name, n_shards);
  else
    snprintf(label, sizeof label, "%s", s->name);
  if (speaks) {
    progress_start(&r->prog, progress_mode_parse(cfg_str(r->root, "run.progress")),
                   cfg_float(r->root, "run.progress_interval_s"), label, s->show.unit ? s->show.unit : "mol",
                   shard_items, done_items);
    if (n_shards > 1 && !together && shard >= n_chunks)
      /* an array task beyond the stage's last chunk (slurm.array_size above the chunks) */
      progress_log(&r->prog,
                   "%s: no chunk for this task: the stage has %lld chunk%s and %d tasks share it (task %d takes "
                   "chunks %d, %d, ...); nothing to do",
                   label, (long long)n_chunks, n_chunks == 1 ? "" : "s", n_shards, shard, shard, shard + n_shards);
    else if (all_todo == 0 && n_chunks > 0 && ctx->chunk_needed && !any_needed(ctx, n_chunks))
      progress_log(&r->prog, "%s: nothing to do, no molecule new or changed since its last run (%lld molecules)", label,
                   (long long)done_items);
    else if (all_todo == 0 && n_chunks > 0)
      progress_log(&r->prog, "%s: nothing to do, all %lld chunks%s are done (%lld records)", label, (long long)n_chunks,
                   n_shards > 1 && !together ? " of this shard" : "", (long long)done_items);
  }

  /* the ledger's round (active learning): the newest round decided, read
   * again as each chunk commits (acquire decides one in its chunk); a
   * shard's own database has none, so it takes screen.db's */
  char round_src[32] = "NULL";
  if (strcmp(r->src, "main")) {
    long long rs = run_query_int(r->st.db, -1, "SELECT max(round) FROM \"%w\".rounds", r->src);
    if (rs >= 0) snprintf(round_src, sizeof round_src, "%lld", rs);
  }
  int ret = SE3_EXIT_OK;
  int64_t ok_total = 0, rej_total = 0, c = 0;
  while (all_todo > 0) {
    while (c < n_chunks && (c % n_shards != shard || done[c]))
      c++;
    int64_t n_ok = 0, n_rej = 0;
    int stopped = together && run_stop_flag; /* one with nothing left still stops the others */
    if (c < n_chunks && run_stop_flag) {
      stopped = 1;
    } else if (c < n_chunks) {
      int st = one_chunk(r, s, ctx, hash, c, shard, round_src, &n_ok, &n_rej);
      if (st != STAGE_OK) {
        stopped = st == STAGE_STOPPED;
      } else {
        done[c] = 1;
        ok_total += n_ok;
        rej_total += n_rej;
        c++;
      }
    }
    int failed = r->err[0] != 0;
    if (failed && !speaks) fprintf(stderr, "se3screen (rank %d): %s\n", comm_rank(together), r->err);
    if (!together) {
      if (stopped) ret = SE3_EXIT_STOPPED;
      if (failed) ret = SE3_EXIT_FAILED;
      if (stopped || failed || c >= n_chunks) break;
      continue;
    }
    int64_t next = c;
    while (next < n_chunks && (next % n_shards != shard || done[next]))
      next++;
    double word[4] = {(double)(n_ok + n_rej), stopped, failed, next < n_chunks && !stopped && !failed};
    if (comm_sum_f64(together, word, 4)) {
      /* the others may wait in this sum for ever */
      fprintf(stderr, "se3screen (rank %d): %s: MPI failed between two chunks; ending the run\n", comm_rank(together),
              s->name);
      comm_abort(together, SE3_EXIT_FAILED);
    }
    if (speaks) progress_add(&r->prog, (int64_t)word[0] - (n_ok + n_rej));
    if (word[2] > 0) {
      if (!failed)
        snprintf(r->err, sizeof r->err,
                 "%s: another process of the run failed (its message is above); this one "
                 "stopped after its chunk in flight",
                 s->name);
      ret = SE3_EXIT_FAILED;
      break;
    }
    if (word[1] > 0) {
      ret = SE3_EXIT_STOPPED;
      break;
    }
    if (word[3] == 0) break;
  }
  free(done);
  if (speaks) {
    /* a stage that ends its items one by one (item_finished) keeps each as
     * it ends, a chunk cut short or not: those are what this run stored
     * (the ledger's counts of a chunk resumed hold earlier runs' too) */
    if (r->prog.items_ok + r->prog.items_rejected > 0) {
      ok_total = r->prog.items_ok;
      rej_total = r->prog.items_rejected;
    }
    char summary[256];
    snprintf(summary, sizeof summary, "%lld %s, %lld rejected%s%s", (long long)ok_total,
             s->show.done ? s->show.done : "stored", (long long)rej_total, together ? " by this process" : "",
             ret == SE3_EXIT_STOPPED ? "; stopped by a signal (run again to resume)" : "");
    if (all_todo > 0) progress_end(&r->prog, summary);
  }
  return ret;
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
  w->err[0] = 0;
  run_ctx_init(&rc, w, s);
  struct stage_ctx *ctx = &rc.ctx;
  if (rank > 0) ctx->report = &run_quiet_report; /* rank 0 speaks for the run */
  int64_t n_chunks = 0, n_items = 0;
  int st = STAGE_ERROR;
  snprintf(up, sizeof up, "%s/shards", w->workdir);
  run_rank_db_path(path, sizeof path, w->workdir, s->name, rank);
  if (!mkdirs(up, w->err, sizeof w->err) &&
      !store_open_locked(&w->st, path, STORE_WRITE, cfg_str(w->root, "store.journal"),
                         (int)cfg_int(w->root, "store.busy_timeout_ms"), w->err, sizeof w->err) &&
      (snprintf(up, sizeof up, "%s/screen.db", w->workdir),
       !store_attach_readonly(&w->st, up, "src", w->err, sizeof w->err)) &&
      !ledger_record_run(w, s->name)) {
    /* (rank 0 folded and removed what an earlier run left here; whatever is
     * still here from another configuration goes) */
    struct ledger_state old;
    ledger_state_read(w, "main", s->name, &old);
    if (old.config_hash && strcmp(old.config_hash, hash)) run_clear_from(w, run_stage_index(s->name));
    ledger_state_free(&old);
    ctx->db = w->st.db;
    st = run_begin(ctx, s, &n_chunks, &n_items);
    if (st != STAGE_OK) {
      snprintf(w->err, sizeof w->err, "%s: %s", s->name, ctx->err);
    } else {
      if (ledger_set_state(w, s->name, hash, settings, chain, n_chunks, n_items, 0, 1)) st = STAGE_ERROR;
    }
  }
  if (st != STAGE_OK && rank > 0) fprintf(stderr, "se3screen (rank %d): %s\n", rank, w->err);
  int all = st, ret = SE3_EXIT_FAILED;
  if (comm_max_int(comm, &all, 1)) comm_abort(comm, SE3_EXIT_FAILED);
  if (all == STAGE_OK)
    ret = run_chunks(w, s, ctx, hash, n_chunks, n_items, rank, n, comm);
  else if (st == STAGE_OK)
    snprintf(w->err, sizeof w->err, "%s: another process of the run could not begin it (its message is above)",
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
      snprintf(r->err, sizeof r->err, "%s: MPI failed sending the stage to the other processes", s->name);
      return -1;
    }
  }
  int began = run_begin(ctx, s, n_chunks, n_items);
  int all_began = began;
  if (collective) comm_max_int(r->comm, &all_began, 1);
  if (all_began != STAGE_OK) {
    if (began != STAGE_OK)
      snprintf(r->err, sizeof r->err, "%s: %s", s->name, ctx->err);
    else
      snprintf(r->err, sizeof r->err, "%s: another process of the run could not begin it (its message is above)",
               s->name);
    run_end(ctx, s);
    return -1;
  }
  if (s->ready && s->ready(ctx) != STAGE_OK) {
    snprintf(r->err, sizeof r->err, "%s: %s", s->name, ctx->err);
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
    snprintf(r->err, sizeof r->err, "%s: MPI failed sending the stage to the other processes", s->name);
    return SE3_EXIT_FAILED;
  }
  struct run w;
  run_init(&w, r->o);
  w.root = r->root;
  memcpy(w.workdir, r->workdir, sizeof w.workdir);
  memcpy(w.workflow_dir, r->workflow_dir, sizeof w.workflow_dir);
  memcpy(w.host, r->host, sizeof w.host);
  int ret = share_stage(&w, s, hash, chain);
  if (ret != SE3_EXIT_OK) snprintf(r->err, sizeof r->err, "%s", w.err);
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
  struct ledger_state old;
  ledger_state_read(r, "main", s->name, &old);
  /* (a stage of an earlier se3screen has no chain: kept when its own
   * settings are, its rows judged one by one) */
  int discard = old.config_hash && (old.chain_hash ? strcmp(old.chain_hash, chain) != 0
                                                   : strcmp(old.settings_hash ? old.settings_hash : "", settings) != 0);
  int ret = 0;
  if (discard) {
    long long n_done = ledger_n_chunks(r, "main", s->name);
    progress_log(NULL, "%s: %s changed since the last run; discarding its %lld finished chunk%s and its rows", s->name,
                 old.settings_hash && strcmp(old.settings_hash, settings) ? "the configuration"
                                                                          : "what it is made from",
                 n_done, n_done == 1 ? "" : "s");
    if (run_exec(r, "BEGIN IMMEDIATE")) {
      ret = -1;
    } else if (run_clear_stage(r, si) || run_unfinish_after(r, si) || run_exec(r, "COMMIT")) {
      sqlite3_exec(r->st.db, "ROLLBACK", NULL, NULL, NULL);
      ret = -1;
    }
  }
  ledger_state_free(&old);
  return ret;
}

static int run_stage(struct run *r, int si) {
  const struct stage *s = run_all_stages[si];
  struct run_ctx rc;
  run_ctx_init(&rc, r, s);
  struct stage_ctx *ctx = &rc.ctx;
  char started[40];
  run_now_iso_ms(started, sizeof started);
  double t0 = progress_now();
  memset(&r->prog, 0, sizeof r->prog); /* (this stage's count, for ledger_stage_time) */

  int64_t n_chunks = 0, n_items = 0;
  struct run_upstream up;
  if (run_check_upstream(r, s, &up)) return SE3_EXIT_FAILED;
  if (stage_is_keyed(s, r->root)) {
    /* Work that processes of an earlier data-parallel run left in their own
     * databases, folded in before the plan asks what is missing (a keyed
     * stage's hash is its chain: known before it plans). */
    char chain[17];
    run_chain_hash(r->root, s, up.chain, chain);
    if (discard_keyed(r, si, chain)) return SE3_EXIT_FAILED;
    if ((s->flags & STAGE_SPREAD) && r->n_shards <= 1 && run_fold_rank_shards(r, s, chain, "leftovers") < 0)
      return SE3_EXIT_FAILED;
  }
  /* A collective stage: the other processes begin it with this one. */
  int collective = r->comm && s->serve;
  if (begin_stage(r, si, ctx, collective, &n_chunks, &n_items)) return SE3_EXIT_FAILED;
  char settings[17], hash[17], chain[17];
  run_settings_hash(r->root, s, settings);
  run_stage_hashes(r->root, s, ctx->inputs_hash, &up, hash, chain);
  int keyed = stage_is_keyed(s, r->root);

  /* A changed configuration discards this stage's rows (a keyed stage's,
   * whose rows each name what they were made from, only when its settings
   * chain changed: discard_keyed; its prune deletes the rows no longer
   * wanted). A stage with work to do is not finished, nor, until they have
   * run again and judged for themselves, are the stages after it. */
  struct ledger_state old_state;
  ledger_state_read(r, "main", s->name, &old_state);
  const char *old = old_state.config_hash, *old_settings = old_state.settings_hash;
  long long stale = ledger_n_chunks_under(r, s->name, hash, 0);
  int ret = SE3_EXIT_FAILED;
  if (run_exec(r, "BEGIN IMMEDIATE")) goto out;
  /* (a keyed stage's were discarded before it planned: discard_keyed) */
  int discard = !keyed && ((old && strcmp(old, hash)) || stale > 0);
  /* a stage done whole whose file in the workdir is gone does it again */
  long long n_had = ledger_n_chunks(r, "main", s->name);
  int regone = !keyed && !discard && ctx->outputs_gone && r->n_shards <= 1 && n_had > 0;
  if (regone) {
    progress_log(NULL, "%s: %s/%s is gone since the last run; doing the stage again to write it", s->name, r->workdir,
                 ctx->outputs_gone);
    if (run_clear_stage(r, si)) goto rollback;
  } else if (discard) {
    progress_log(NULL, "%s: %s changed since the last run; discarding its %lld finished chunk%s and its rows", s->name,
                 old_settings && strcmp(old_settings, settings) ? "the configuration"
                 : run_upstream_of(r->root, s)                  ? "what it is made from"
                                                                : "an input file",
                 n_had, n_had == 1 ? "" : "s");
    if (run_clear_stage(r, si)) goto rollback;
  } else if (keyed && ledger_forget_chunks_from(r, s->name, n_chunks)) {
    goto rollback; /* (the rows of the chunks the plan still has tell what was done last) */
  }
  int64_t n_pruned = 0;
  if (keyed && (s->keyed->rows || s->keyed->prune)) { /* (in a shard, a prune leaves screen.db alone) */
    if ((s->keyed->rows ? run_rows_prune(ctx, s, &n_pruned) : s->keyed->prune(ctx, &n_pruned)) != STAGE_OK) {
      snprintf(r->err, sizeof r->err, "%s: %s", s->name, ctx->err);
      goto rollback;
    }
    if (n_pruned > 0)
      progress_log(NULL, "%s: %lld row%s of molecules changed or gone deleted", s->name, (long long)n_pruned,
                   n_pruned == 1 ? "" : "s");
  }
  /* (a keyed stage with no chunk to do and no row deleted changed nothing) */
  int changed = keyed ? any_needed(ctx, n_chunks) || n_pruned > 0 : discard || regone || !old;
  if (changed && run_unfinish_after(r, si)) goto rollback;
  if (ledger_set_state(r, s->name, hash, settings, chain, n_chunks, n_items, changed, 0) || run_exec(r, "COMMIT"))
    goto rollback;
  /* the run's workflow, now that a stage of it runs (ledger_record_run) */
  if (r->n_shards <= 1 && !r->meta_recorded && ledger_record_meta(r, "", 1)) goto out;
  r->meta_recorded = 1;

  /* Work of this stage that processes of an earlier data-parallel run
   * left in their own databases (stopped before rank 0 folded it in). */
  if (!keyed && (s->flags & STAGE_SPREAD) && r->n_shards <= 1 && run_fold_rank_shards(r, s, hash, "leftovers") < 0)
    goto out;
  int spread =
      r->comm && (s->flags & STAGE_SPREAD) && !collective && !s->finalize; /* (stage.h: a spread stage has none) */
  if (spread) {
    ret = spread_stage(r, si, ctx, hash, chain);
  } else {
    ret = run_chunks(r, s, ctx, hash, n_chunks, n_items, r->shard, r->n_shards, NULL);
  }
  if (ret != SE3_EXIT_OK) goto out;
  ret = SE3_EXIT_FAILED;

  /* Finalize once every chunk of the stage is in this database (a keyed
   * stage's without work count). */
  long long n_done = ledger_n_chunks_under(r, s->name, hash, 1);
  if (keyed) n_done = n_chunks; /* (every chunk with work done here, or in the processes folded in) */
  struct ledger_state now;
  ledger_state_read(r, "main", s->name, &now);
  int finalized = now.finalized > 0; /* (no row: not finalized) */
  ledger_state_free(&now);
  if (r->n_shards <= 1 && n_done == n_chunks && !finalized) {
    if (run_finalize(r, s, ctx)) goto out;
  }
  ret = SE3_EXIT_OK;
  goto out;
rollback:
  sqlite3_exec(r->st.db, "ROLLBACK", NULL, NULL, NULL);
out:
  ledger_state_free(&old_state);
  if (collective && stage_serve_end(ctx) && ret == SE3_EXIT_OK) {
    snprintf(r->err, sizeof r->err, "%s: MPI failed ending the stage on the other processes", s->name);
    ret = SE3_EXIT_FAILED;
  }
  run_end(ctx, s);
  ledger_stage_time(r, s, started, t0, ret);
  return ret;
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
    run_ctx_init(&rc, &r, s);
    struct stage_ctx *ctx = &rc.ctx;
    ctx->report = &run_quiet_report;
    ctx->comm = o->comm;
    char dbpath[PATH_MAX + 64];
    snprintf(dbpath, sizeof dbpath, "%s/screen.db", r.workdir);
    int st = STAGE_ERROR;
    if (store_open(&r.st, dbpath, STORE_READONLY, NULL, (int)cfg_int(r.root, "store.busy_timeout_ms"), ctx->err,
                   sizeof ctx->err) == 0) {
      ctx->db = r.st.db;
      int64_t n_chunks, n_items;
      st = run_begin(ctx, s, &n_chunks, &n_items);
    }
    if (st != STAGE_OK) fprintf(stderr, "se3screen (rank %d): %s: %s\n", rank, s->name, ctx->err);
    int all = st;
    comm_max_int(o->comm, &all, 1);
    if (all == STAGE_OK && s->serve(ctx) != STAGE_OK)
      fprintf(stderr, "se3screen (rank %d): %s: %s\n", rank, s->name, ctx->err);
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
      char why[1024];
      const char *bad = "device";
      if (stage_device_check(r->root, &bad, why, sizeof why)) {
        const struct cfg_node *dn = cfg_get(r->root, bad);
        if (cfg_written(dn))
          fprintf(stderr, "se3screen: %s:%d:%d: %s\n", dn->file, dn->line, dn->col, why);
        else
          fprintf(stderr, "se3screen: %s\n", why);
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
    if (mkdirs(dir, r->err, sizeof r->err)) return -1;
    snprintf(dbpath, sizeof dbpath, "%s/%s-%d.db", dir, run_all_stages[first]->name, r->shard);
  } else {
    if (mkdirs(r->workdir, r->err, sizeof r->err)) return -1;
    snprintf(dbpath, sizeof dbpath, "%s/screen.db", r->workdir);
  }
  /* The lock first: a database another se3screen is writing is refused by
   * its holder's name before anything of it is read */
  if (store_open_locked(&r->st, dbpath, STORE_WRITE, cfg_str(r->root, "store.journal"),
                        (int)cfg_int(r->root, "store.busy_timeout_ms"), r->err, sizeof r->err))
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
      snprintf(r->err, sizeof r->err,
               "%s reads the %s stage's results from %.1500s, which does not exist: run %s first",
               run_all_stages[first]->name, first_after, up, first_after);
      return -1;
    }
    if (store_attach_readonly(&r->st, up, "src", r->err, sizeof r->err)) return -1;
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
    fprintf(stderr, "se3screen: %s\n", r.err);
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
    fprintf(stderr, "se3screen: %s\n", r.err[0] ? r.err : "run failed");
  store_close(&r.st);
  cfg_node_free(r.root);
  return ret;

fail_early:
  fprintf(stderr, "se3screen: %s\n", r.err);
  store_close(&r.st);
  cfg_node_free(r.root);
  return SE3_EXIT_FAILED;
}
