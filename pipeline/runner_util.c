/* runner_util.c — the leaf of the runner's files (runner_internal.h): the
 * stage list and which of them a workflow runs, the workflow loaded, the
 * SQL helpers of the run's database, config hashes, a stage's context with
 * the run's progress callbacks and stop flag, every begin and end.
 * runner.c, runner_chunks.c, ledger.c, merge.c, status.c and check.c call
 * these; this file calls none of them (it names none of the runner's
 * tables: those are ledger.c's), so the calls run one way: runner.c ->
 * merge.c -> ledger.c -> runner_util.c, check.c -> runner_util.c.
 */
#define _GNU_SOURCE
#include "pipeline/runner_internal.h"

#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/atomic_file.h"

const struct stage *const run_all_stages[N_STAGES] = {&stage_ingest, &stage_acquire, &stage_dock,
                                                      &stage_graph,  &stage_basis,   &stage_train,
                                                      &stage_score,  &stage_rank,    &stage_report};

volatile sig_atomic_t run_stop_flag;

void run_hostname(char *buf, size_t n) {
  if (gethostname(buf, n) != 0) snprintf(buf, n, "?");
  buf[n - 1] = 0;
}

int run_stage_index(const char *name) {
  for (int i = 0; i < N_STAGES; i++)
    if (!strcmp(run_all_stages[i]->name, name)) return i;
  return -1;
}

void run_print_errors(const struct cfg_errors *e) {
  for (int i = 0; i < e->n; i++)
    fprintf(stderr, "%s\n", e->msgs[i]);
}

/* The workflow with --set overrides and --workdir as one list of
 * overrides, loaded by cfg_load_partial: the tree (NULL only where none
 * could be read) and every problem in errs. */
struct cfg_node *run_load_partial(const char *workflow, const char *const *sets, int n_sets, const char *workdir,
                                  const char *inputs, int no_inputs, struct cfg_errors *errs) {
  const char **all = calloc((size_t)n_sets + 1, sizeof *all);
  char *wd = NULL;
  int n = 0;
  if (!all) {
    fprintf(stderr, "se3screen: out of memory reading %s\n", workflow);
    return NULL;
  }
  for (int i = 0; i < n_sets; i++)
    all[n++] = sets[i];
  if (workdir) {
    char abs[PATH_MAX];
    if (!realpath(workdir, abs)) snprintf(abs, sizeof abs, "%s", workdir);
    if (asprintf(&wd, "workdir=%s", abs) < 0) wd = NULL;
    if (wd) all[n++] = wd;
  }
  struct cfg_node *root = cfg_load_partial(workflow, all, n, inputs, no_inputs, errs);
  free(wd);
  free(all);
  return root;
}

/* inputs: check that the input files of these stages exist (see
 * cfg_load_checked), so a run refuses before it makes its workdir. */
struct cfg_node *run_load_config(const char *workflow, const char *const *sets, int n_sets, const char *workdir,
                                 const char *inputs) {
  struct cfg_errors errs = {0};
  struct cfg_node *root = run_load_partial(workflow, sets, n_sets, workdir, inputs, 0, &errs);
  if (errs.n) {
    run_print_errors(&errs);
    if (errs.n > 1) fprintf(stderr, "%d problems in %s; nothing was run\n", errs.n, workflow);
    cfg_node_free(root);
    root = NULL;
  }
  cfg_errors_free(&errs);
  return root;
}

/* Whether the workflow writes a section for stage s (defaults alone do not
 * count). */
static int stage_configured(const struct cfg_node *root, const struct stage *s) {
  return cfg_written(cfg_get(cfg_get(root, "stages"), s->name));
}

/* Whether the only stages after stage i the workflow configures read
 * whatever there is (report): then they alone would take `run` past i. */
static int only_readers_after(const struct cfg_node *root, int i) {
  int readers = 0;
  for (int j = i + 1; j < N_STAGES; j++) {
    if (!stage_configured(root, run_all_stages[j])) continue;
    if (!(run_all_stages[j]->flags & STAGE_READS_ANY)) return 0;
    readers = 1;
  }
  return readers;
}

/* Whether `run` skips stage s of this configuration unless --stage names it:
 * an optional stage the workflow does not configure, one its `skipped`
 * leaves out (train in a score-only workflow), or one it does not configure
 * that only a stage reading whatever there is comes after (score and rank
 * in a training-only workflow that ends with report). */
int run_stage_skipped(const struct cfg_node *root, const struct stage *s) {
  if ((s->flags & STAGE_OPTIONAL) && !stage_configured(root, s)) return 1;
  int i = run_stage_index(s->name);
  if (root && i > 0 && !stage_configured(root, s) && only_readers_after(root, i)) return 1; /* ingest always runs */
  return root && s->reads.skipped && s->reads.skipped(root);
}

/* The last stage `run` runs without --stage/--until: the last one the
 * workflow configures (ingest at least). */
int run_last_configured(const struct cfg_node *root, int first, int last) {
  while (last > first && !stage_configured(root, run_all_stages[last]))
    last--;
  return last;
}

/* The stage whose results stage s reads in this configuration (NULL for
 * none): its `after`, or what its `reads` says (score in a score-only
 * workflow reads what train would have read). Everything that asks which
 * stage comes before another asks here. root NULL (a workflow that cannot
 * be loaded): `after`. */
const char *run_upstream_of(const struct cfg_node *root, const struct stage *s) {
  if (root && (s->flags & STAGE_READS_ANY)) {
    /* report: after the last stage before it that runs (none: ingest) */
    for (int i = run_stage_index(s->name) - 1; i > 0; i--)
      if (!run_stage_skipped(root, run_all_stages[i])) return run_all_stages[i]->name;
    return run_all_stages[0]->name;
  }
  const char *reads = root && s->reads.stage ? s->reads.stage(root) : NULL;
  return reads ? reads : s->after;
}

static void cb_advance(struct stage_ctx *ctx, int64_t n) {
  struct run_ctx *rc = (struct run_ctx *)ctx;
  progress_add(&rc->run->prog, n);
}

static void cb_log(struct stage_ctx *ctx, const char *fmt, ...) {
  struct run_ctx *rc = (struct run_ctx *)ctx;
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  progress_log(&rc->run->prog, "%s: %s", ctx->cfg ? ctx->cfg->key : "run", msg);
}

static void cb_done_before(struct stage_ctx *ctx, int64_t n) {
  struct run_ctx *rc = (struct run_ctx *)ctx;
  progress_skip(&rc->run->prog, n);
}

static void cb_item_started(struct stage_ctx *ctx, const char *name) {
  struct run_ctx *rc = (struct run_ctx *)ctx;
  progress_item_start(&rc->run->prog, name);
}

static void cb_item_finished(struct stage_ctx *ctx, const char *name, int ok, const char *verb, double seconds,
                             const char *fmt, ...) {
  struct run_ctx *rc = (struct run_ctx *)ctx;
  char detail[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  progress_item_end(&rc->run->prog, name, ok, verb, seconds, detail);
}

static void cb_estimate(struct stage_ctx *ctx, double seconds) {
  struct run_ctx *rc = (struct run_ctx *)ctx;
  progress_prior(&rc->run->prog, seconds);
}

static void cb_working(struct stage_ctx *ctx, double seconds_left, const char *how, const char *running) {
  struct run_ctx *rc = (struct run_ctx *)ctx;
  progress_working(&rc->run->prog, seconds_left, how, running);
}

static const struct stage_report report = {cb_advance,       cb_log,      cb_done_before, cb_item_started,
                                           cb_item_finished, cb_estimate, cb_working};

/* A report that shows and logs nothing: ranks > 0 of a data-parallel run
 * (rank 0 speaks for the run), and --dry-run's plan. */
static void quiet_advance(struct stage_ctx *ctx, int64_t n) { (void)ctx, (void)n; }
static void quiet_log(struct stage_ctx *ctx, const char *fmt, ...) { (void)ctx, (void)fmt; }
static void quiet_item_started(struct stage_ctx *ctx, const char *name) { (void)ctx, (void)name; }
static void quiet_item_finished(struct stage_ctx *ctx, const char *name, int ok, const char *verb, double seconds,
                                const char *fmt, ...) {
  (void)ctx, (void)name, (void)ok, (void)verb, (void)seconds, (void)fmt;
}
static void quiet_estimate(struct stage_ctx *ctx, double seconds) { (void)ctx, (void)seconds; }
static void quiet_working(struct stage_ctx *ctx, double seconds_left, const char *how, const char *running) {
  (void)ctx, (void)seconds_left, (void)how, (void)running;
}
const struct stage_report run_quiet_report = {quiet_advance,       quiet_log,      quiet_advance, quiet_item_started,
                                              quiet_item_finished, quiet_estimate, quiet_working};

int run_exec(struct run *r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *sql = sqlite3_vmprintf(fmt, ap);
  va_end(ap);
  int rc = store_exec(r->st.db, sql, &r->err);
  sqlite3_free(sql);
  return rc;
}

char *run_query_text(sqlite3 *db, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *sql = sqlite3_vmprintf(fmt, ap);
  va_end(ap);
  char *out = sql ? store_text(db, sql) : NULL;
  sqlite3_free(sql);
  return out;
}

long long run_query_int(sqlite3 *db, long long dflt, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *sql = sqlite3_vmprintf(fmt, ap);
  va_end(ap);
  long long v = store_int(db, sql, dflt);
  sqlite3_free(sql);
  return v;
}

void run_fold_hash(const char hex[17], uint64_t extra, char out[17]) {
  uint64_t h = se3_hash_str(SE3_HASH_INIT, hex);
  h = se3_hash_bytes(h, &extra, sizeof extra);
  snprintf(out, 17, "%016" PRIx64, h);
}

int run_stage_range(const struct run_opts *o, int *first, int *last) {
  *first = 0;
  *last = N_STAGES - 1;
  const char *asked[2] = {o->stage, o->until};
  for (int k = 0; k < 2; k++) {
    if (!asked[k]) continue;
    int i = run_stage_index(asked[k]);
    if (i < 0) {
      fprintf(stderr, "se3screen run: unknown stage '%s' (stages: ", asked[k]);
      for (int j = 0; j < N_STAGES; j++)
        fprintf(stderr, "%s%s", j ? ", " : "", run_all_stages[j]->name);
      fprintf(stderr, ")\n");
      return -1;
    }
    if (k == 0) *first = i;
    *last = i;
  }
  return 0;
}

/* The hash of what a stage was asked to do: its configuration, and the chunk
 * size, which decides which molecules a chunk number means. */
void run_settings_hash(const struct cfg_node *root, const struct stage *s, char out[17]) {
  char cfg[17];
  cfg_stage_hash(root, s->name, !!(s->flags & STAGE_USES_SETS), cfg);
  run_fold_hash(cfg, (uint64_t)cfg_int(root, "run.chunk_size"), out);
}

void run_chain_hash(const struct cfg_node *root, const struct stage *s, uint64_t up_chain, char out[17]) {
  char cfg[17], with_chunks[17];
  cfg_stage_hash(root, s->name, 0, cfg);
  run_fold_hash(cfg, (uint64_t)cfg_int(root, "run.chunk_size"), with_chunks);
  run_fold_hash(with_chunks, up_chain, out);
}

void run_stage_hashes(const struct cfg_node *root, const struct stage *s, uint64_t inputs,
                      const struct run_upstream *up, char hash[17], char chain[17]) {
  run_chain_hash(root, s, up->chain, chain);
  if (stage_is_keyed(s, root)) {
    memcpy(hash, chain, 17);                         /* its rows say what they were made from ... */
    if (run_merge_hash(s, root) == STAGE_HASH_FILES) /* ... and which files (stage.h) */
      run_fold_hash(chain, inputs, hash);
  } else {
    char settings[17], with_inputs[17];
    run_settings_hash(root, s, settings);
    run_fold_hash(settings, inputs, with_inputs);
    run_fold_hash(with_inputs, up->content, hash);
  }
}

/* Stage s's context in run r (its database, whatever r has open). */
void run_ctx_init(struct run_ctx *rc, struct run *r, const struct stage *s, const struct stage_ledger *ledger) {
  memset(rc, 0, sizeof *rc);
  struct stage_ctx *ctx = &rc->ctx;
  rc->run = r;
  ctx->name = s->name;
  ctx->db = r->st.db;
  ctx->src = r->src;
  ctx->root = r->root;
  ctx->cfg = cfg_get(r->root, "stages") ? cfg_get(cfg_get(r->root, "stages"), s->name) : NULL;
  ctx->workdir = r->workdir;
  ctx->workflow_dir = r->workflow_dir;
  ctx->shard = r->shard;
  ctx->n_shards = r->n_shards;
  ctx->stop = &run_stop_flag;
  ctx->report = &report;
  ctx->cycle = r->cycle;
  ctx->round = r->round;
  ctx->ledger = ledger;
}

int run_begin(struct stage_ctx *ctx, const struct stage *s, int64_t *n_chunks, int64_t *n_items) {
  int st = s->begin(ctx, n_chunks, n_items);
  if (st == STAGE_OK && s->keyed && s->keyed->rows) st = run_rows_plan(ctx, s, n_chunks, n_items);
  return st;
}

void run_end(struct stage_ctx *ctx, const struct stage *s) {
  if (s->end) s->end(ctx);
  if (ctx->chunk_needed == ctx->plan.needed) ctx->chunk_needed = NULL;
  stage_ids_free(&ctx->plan);
}

int run_merge_hash(const struct stage *s, const struct cfg_node *root) {
  if (s->merge.hash) return s->merge.hash(root);
  /* a stage that declares its rows: its shard's hash is the settings' and
   * the upstream stage's (its plan is made from the tables merge has) */
  return s->keyed && s->keyed->rows ? STAGE_HASH_SETTINGS : STAGE_HASH_UNKNOWN;
}

void run_now_iso(char *buf, size_t n) {
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* now as "YYYY-MM-DDTHH:MM:SS.mmmZ" (when a stage's run began: two runs of a
 * stage in one second of one process stay two rows) */
void run_now_iso_ms(char *buf, size_t n) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  char sec[24];
  strftime(sec, sizeof sec, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(buf, n, "%s.%03dZ", sec, (int)(ts.tv_nsec / 1000000L));
}

/* The `workflow:` name the workflow file at path gives, or NULL (gone,
 * unreadable, or no longer a workflow this se3screen reads). */
static char *workflow_name_of(const char *path) {
  struct cfg_errors errs;
  memset(&errs, 0, sizeof errs);
  struct cfg_node *root = cfg_load(path, NULL, 0, &errs);
  cfg_errors_free(&errs);
  const char *name = root ? cfg_str(root, "workflow") : NULL;
  char *out = name ? strdup(name) : NULL;
  cfg_node_free(root);
  return out;
}

int run_check_owner(struct run *r, const char *workflow) {
  char *theirs = run_query_text(r->st.db, "SELECT value FROM meta WHERE key = 'workflow'");
  char *their_name = run_query_text(r->st.db, "SELECT value FROM meta WHERE key = 'name'");
  const char *name = cfg_str(r->root, "workflow");
  int ret = 0;
  if (theirs && !atomic_file_same(theirs, workflow)) {
    /* a database from before the name was recorded: the name its file gives */
    if (!their_name && access(theirs, F_OK) == 0) their_name = workflow_name_of(theirs);
    /* (an earlier se3screen's database whose workflow file is gone cannot
     * be told: a workflow file moved is the likelier) */
    int same = their_name ? name && !strcmp(their_name, name) : access(theirs, F_OK) != 0;
    if (!same) {
      char abs[PATH_MAX];
      if (!realpath(workflow, abs)) snprintf(abs, sizeof abs, "%s", workflow);
      char who[600];
      if (their_name)
        snprintf(who, sizeof who, "the workflow '%.100s' (%.400s)", their_name, theirs);
      else
        snprintf(who, sizeof who, "the workflow file %.400s", theirs);
      se3_error_set(&r->err, SE3_ERR_RUN,
                    "%.250s/screen.db holds the results of %s, not of '%.100s' (%.300s): "
                    "refused, nothing changed (its molecules, models and scores are another workflow's). Name another "
                    "workdir (`workdir:` in the workflow or --workdir), or, to start afresh there on purpose, delete "
                    "%.250s first",
                    r->workdir, who, name ? name : "?", abs, r->workdir);
      ret = -1;
    }
  }
  free(theirs);
  free(their_name);
  return ret;
}

void run_stage_failed(struct run *r, const struct se3_error *e, const char *fmt, ...) {
  char head[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(head, sizeof head, fmt, ap);
  va_end(ap);
  se3_error_set(&r->err, e->kind != SE3_ERR_NONE ? e->kind : SE3_ERR_RUN, "%s: %s", head, se3_error_str(e).s);
}
