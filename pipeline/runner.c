/* runner.c — run a workflow's stages: ledger, chunks, signals, shards, merge.
 *
 * The resumability contract: a chunk's outputs and its ledger row are
 * committed in one transaction; a rerun skips chunks done under the same
 * config hash; a changed config discards the stage and everything downstream
 * (saying so in one line); SIGINT/SIGTERM/SIGUSR1 stop at the next chunk
 * boundary with exit 75; one writer per database; shards write their own
 * databases and `merge` folds them in idempotently.
 */
#define _GNU_SOURCE
#include "pipeline/runner.h"

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

#include "pipeline/config.h"
#include "pipeline/progress.h"
#include "pipeline/store.h"
#include "stages/check_inputs.h"
#include "stages/rank_select.h"
#include "stages/stage.h"

#ifndef SE3_VERSION
#define SE3_VERSION "0.1.0"
#endif

/* The stages in pipeline order. */
static const struct stage *const all_stages[] = {&stage_ingest, &stage_graph, &stage_basis, &stage_train,
                                                 &stage_score,  &stage_rank,  &stage_report};
enum { N_STAGES = sizeof all_stages / sizeof all_stages[0] };

static volatile sig_atomic_t stop_flag;
static void on_signal(int sig) {
  (void)sig;
  stop_flag = 1;
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

static void now_iso(char *buf, size_t n) {
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void hostname_of(char *buf, size_t n) {
  if (gethostname(buf, n) != 0) snprintf(buf, n, "?");
  buf[n - 1] = 0;
}

static int stage_index(const char *name) {
  for (int i = 0; i < N_STAGES; i++)
    if (!strcmp(all_stages[i]->name, name)) return i;
  return -1;
}

static void print_stage_names(FILE *f) {
  for (int i = 0; i < N_STAGES; i++)
    fprintf(f, "%s%s", i ? ", " : "", all_stages[i]->name);
}

static int mkdirs(const char *path, char *err, size_t errlen) {
  char tmp[PATH_MAX];
  snprintf(tmp, sizeof tmp, "%s", path);
  for (char *p = tmp + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST) goto fail;
    *p = '/';
  }
  if (mkdir(tmp, 0755) != 0 && errno != EEXIST) goto fail;
  return 0;
fail:
  snprintf(err, errlen, "cannot create %.1024s: %s", tmp, strerror(errno));
  return -1;
}

static void print_errors(const struct cfg_errors *e) {
  for (int i = 0; i < e->n; i++)
    fprintf(stderr, "%s\n", e->msgs[i]);
}

/* ---- configuration ------------------------------------------------------ */

/* inputs: check that the input files of these stages exist (see
 * cfg_load_checked), so a run refuses before it makes its workdir. */
static struct cfg_node *load_config(const char *workflow, const char *const *sets, int n_sets, const char *workdir,
                                    const char *inputs) {
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
  struct cfg_errors errs = {0};
  struct cfg_node *root = cfg_load_checked(workflow, all, n, inputs, &errs);
  if (!root) {
    print_errors(&errs);
    if (errs.n > 1) fprintf(stderr, "%d problems in %s; nothing was run\n", errs.n, workflow);
  }
  cfg_errors_free(&errs);
  free(wd);
  free(all);
  return root;
}

struct cfg_node *runner_config(const char *workflow, const char *const *sets, int n_sets) {
  return load_config(workflow, sets, n_sets, NULL, "*");
}

/* Whether the workflow writes a section for stage s (defaults alone do not
 * count). */
static int stage_configured(const struct cfg_node *root, const struct stage *s) {
  const struct cfg_node *sc = cfg_get(cfg_get(root, "stages"), s->name);
  return sc && sc->file && strcmp(sc->file, "<default>") != 0;
}

/* A score-only workflow: it scores with a saved model
 * (stages.score.checkpoint) and does not configure train, so train does not
 * run and score reads the graph stage's results. With both, train runs and
 * score keeps its place after it. */
static int score_only(const struct cfg_node *root) {
  return root && cfg_get(root, "stages.score.checkpoint") && !stage_configured(root, &stage_train);
}

/* The stage whose results stage s reads in this configuration (NULL for
 * none): its `after`, except score in a score-only workflow, which reads
 * what train would have read. Everything that asks which stage comes before
 * another asks here. root NULL (a workflow that cannot be loaded): `after`. */
static const char *upstream_of(const struct cfg_node *root, const struct stage *s) {
  if (s == &stage_score && score_only(root)) return stage_train.after;
  return s->after;
}

/* Whether `run` skips stage s of this configuration unless --stage names it:
 * an optional stage the workflow does not configure, or train in a
 * score-only workflow. */
static int stage_skipped(const struct cfg_node *root, const struct stage *s) {
  if (s->optional && !stage_configured(root, s)) return 1;
  return s == &stage_train && score_only(root);
}

/* The last stage `run` runs without --stage/--until: the last one the
 * workflow configures (ingest at least). */
static int last_configured(const struct cfg_node *root, int first, int last) {
  while (last > first && !stage_configured(root, all_stages[last]))
    last--;
  return last;
}

int runner_stages(const struct cfg_node *root, const char *names[], int max) {
  int last = last_configured(root, 0, N_STAGES - 1), n = 0;
  for (int i = 0; i <= last && n < max; i++)
    if (!stage_skipped(root, all_stages[i])) names[n++] = all_stages[i]->name;
  return n;
}

/* The inputs' headers against what the workflow reads from them (column
 * names, SD tags, the target among the labels: stages/check_inputs.h), for
 * the stages named in `stages`: each problem on stderr. SE3_EXIT_USAGE when
 * there was one: a mistake found in milliseconds, not after hours of ingest. */
static void print_problem(void *arg, const char *msg) {
  (void)arg;
  fprintf(stderr, "%s\n", msg);
}
static int check_input_files(const struct cfg_node *root, const char *stages, const char *workflow) {
  int bad = check_inputs(root, stages, print_problem, NULL);
  if (bad > 1) fprintf(stderr, "%d problems in %s; nothing was run\n", bad, workflow);
  return bad ? SE3_EXIT_USAGE : SE3_EXIT_OK;
}

int runner_check(const char *workflow, const char *const *sets, int n_sets, int no_inputs) {
  struct cfg_node *root = NULL;
  if (no_inputs) {
    struct cfg_errors errs = {0};
    root = cfg_load_no_inputs(workflow, sets, n_sets, &errs);
    if (!root) {
      print_errors(&errs);
      if (errs.n > 1) fprintf(stderr, "%d problems in %s\n", errs.n, workflow);
    }
    cfg_errors_free(&errs);
  } else {
    root = load_config(workflow, sets, n_sets, NULL, "*");
  }
  if (!root) return SE3_EXIT_USAGE;
  int bad = no_inputs ? check_inputs_unread(root, "*", print_problem, NULL) : check_input_files(root, "*", workflow);
  if (no_inputs && bad > 1) fprintf(stderr, "%d problems in %s\n", bad, workflow);
  if (bad) {
    cfg_node_free(root);
    return SE3_EXIT_USAGE;
  }
  cfg_print(stdout, root);
  cfg_node_free(root);
  return SE3_EXIT_OK;
}

/* ---- the run ------------------------------------------------------------- */

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
  int scores_kept_as_now;      /* merge: screen.db's scores were kept as stages.score.merge keeps them now */
  char err[2048];
};

/* Rank 0's runner to the other processes of a data-parallel run (sent
 * with stage_order's message): run the collective stage i[0], or the run is
 * over with exit status i[0], or take a share of the chunks of stage i[0]
 * (struct stage's `spread`) whose config hash is i[1]. The stages' own
 * orders follow RUN_ORDER_STAGE. */
enum { RUN_ORDER_STAGE = 1, RUN_ORDER_END = 2, RUN_ORDER_SPREAD = 3 };

/* The runner's stage_report: ctx is embedded in a struct holding the run. */
struct run_ctx {
  struct stage_ctx ctx;
  struct run *run;
};

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

static const struct stage_report report = {cb_advance, cb_log};

/* Ranks > 0 neither show progress nor log: rank 0 speaks for the run. */
static void quiet_advance(struct stage_ctx *ctx, int64_t n) { (void)ctx, (void)n; }
static void quiet_log(struct stage_ctx *ctx, const char *fmt, ...) { (void)ctx, (void)fmt; }
static const struct stage_report quiet_report = {quiet_advance, quiet_log};

static int exec_sql(struct run *r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *sql = sqlite3_vmprintf(fmt, ap);
  va_end(ap);
  int rc = store_exec(r->st.db, sql, r->err, sizeof r->err);
  sqlite3_free(sql);
  return rc;
}

/* Delete everything stage i and the stages after it wrote. */
static int clear_from(struct run *r, int first) {
  for (int i = first; i < N_STAGES; i++) {
    const struct stage *s = all_stages[i];
    char *tables = strdup(s->tables);
    if (!tables) {
      snprintf(r->err, sizeof r->err, "out of memory clearing stage %s", s->name);
      return -1;
    }
    for (char *save = NULL, *t = strtok_r(tables, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
      if (exec_sql(r, "DELETE FROM \"%w\"", t)) {
        free(tables);
        return -1;
      }
    }
    free(tables);
    if (exec_sql(r,
                 "DELETE FROM rejects WHERE stage=%Q; DELETE FROM stage_chunks WHERE stage=%Q;"
                 "DELETE FROM stage_state WHERE stage=%Q",
                 s->name, s->name, s->name))
      return -1;
    if (s == &stage_score && exec_sql(r, "DELETE FROM meta WHERE key='scores_kept'")) return -1;
  }
  return 0;
}

static char *query_text(sqlite3 *db, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *sql = sqlite3_vmprintf(fmt, ap);
  va_end(ap);
  sqlite3_stmt *st = NULL;
  char *out = NULL;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW &&
      sqlite3_column_text(st, 0))
    out = strdup((const char *)sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  sqlite3_free(sql);
  return out;
}

static long long query_int(sqlite3 *db, long long dflt, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *sql = sqlite3_vmprintf(fmt, ap);
  va_end(ap);
  long long v = store_int(db, sql, dflt);
  sqlite3_free(sql);
  return v;
}

static void fold_hash(const char hex[17], uint64_t extra, char out[17]) {
  uint64_t h = se3_hash_str(SE3_HASH_INIT, hex);
  h = se3_hash_bytes(h, &extra, sizeof extra);
  snprintf(out, 17, "%016" PRIx64, h);
}

/* The hash of what a stage was asked to do: its configuration, and the chunk
 * size, which decides which molecules a chunk number means. */
static void settings_hash(const struct cfg_node *root, const struct stage *s, char out[17]) {
  char cfg[17];
  cfg_stage_hash(root, s->name, s->uses_sets, cfg);
  fold_hash(cfg, (uint64_t)cfg_int(root, "run.chunk_size", 1024), out);
}

/* A stage that reads another's tables needs that stage finished (finalized)
 * in the database it reads; its config hash then joins this stage's, so
 * redoing the upstream stage redoes this one. 0, or -1 with r->err set. */
static int check_upstream(struct run *r, const struct stage *s, uint64_t *upstream) {
  *upstream = 0;
  const char *after = upstream_of(r->root, s);
  if (!after) return 0;
  const char *where = strcmp(r->src, "main") ? "screen.db" : "this database";
  long long fin = query_int(r->st.db, -1, "SELECT finalized FROM \"%w\".stage_state WHERE stage=%Q", r->src, after);
  long long n_chunks = query_int(r->st.db, 0, "SELECT n_chunks FROM \"%w\".stage_state WHERE stage=%Q", r->src, after);
  long long n_done = query_int(r->st.db, 0, "SELECT count(*) FROM \"%w\".stage_chunks WHERE stage=%Q", r->src, after);
  if (fin < 0) {
    snprintf(r->err, sizeof r->err, "%s reads the %s stage's results, and %s has none: run `--stage %s` first", s->name,
             after, where, after);
    return -1;
  }
  if (fin != 1) {
    snprintf(r->err, sizeof r->err,
             "%s reads the %s stage's results, which are not finished in %s (%lld of %lld chunks%s): "
             "finish %s first",
             s->name, after, where, n_done, n_chunks, n_done < n_chunks ? "" : ", not yet merged", after);
    return -1;
  }
  char *hash = query_text(r->st.db, "SELECT config_hash FROM \"%w\".stage_state WHERE stage=%Q", r->src, after);
  *upstream = se3_hash_str(SE3_HASH_INIT, hash ? hash : "");
  free(hash);
  return 0;
}

static int run_finalize(struct run *r, const struct stage *s, struct stage_ctx *ctx) {
  if (!s->finalize) return exec_sql(r, "UPDATE stage_state SET finalized=1 WHERE stage=%Q", s->name);
  if (exec_sql(r, "BEGIN IMMEDIATE")) return -1;
  if (s->finalize(ctx) != STAGE_OK) {
    snprintf(r->err, sizeof r->err, "%s: %s", s->name, ctx->err);
    sqlite3_exec(r->st.db, "ROLLBACK", NULL, NULL, NULL);
    return -1;
  }
  if (exec_sql(r, "UPDATE stage_state SET finalized=1 WHERE stage=%Q", s->name) || exec_sql(r, "COMMIT")) {
    sqlite3_exec(r->st.db, "ROLLBACK", NULL, NULL, NULL);
    return -1;
  }
  return 0;
}

/* Returns SE3_EXIT_*. */
/* A run of one command: nothing open yet, one shard, no lock. */
static void run_init(struct run *r, const struct run_opts *o) {
  memset(r, 0, sizeof *r);
  r->o = o;
  r->comm = o->comm;
  r->shard = 0;
  r->n_shards = 1;
  r->st.lock_fd = -1;
}

/* Stage s's context in run r (its database, whatever r has open). */
static void stage_ctx_init(struct run_ctx *rc, struct run *r, const struct stage *s) {
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
  ctx->stop = &stop_flag;
  ctx->report = &report;
}

/* The meta rows that say how to rebuild this run's configuration (merge
 * needs them to finalize; `stage` names a shard's one stage, "" for a whole
 * run) and the run's row in `runs`. 0, or -1 with r->err set. */
static int record_run(struct run *r, const char *stage) {
  const struct run_opts *o = r->o;
  char abs[PATH_MAX];
  if (!realpath(o->workflow, abs)) snprintf(abs, sizeof abs, "%s", o->workflow);
  size_t len = 1;
  for (int i = 0; i < o->n_sets; i++)
    len += strlen(o->sets[i]) + 1;
  char *sets = calloc(len, 1);
  if (!sets) {
    snprintf(r->err, sizeof r->err, "out of memory");
    return -1;
  }
  for (int i = 0; i < o->n_sets; i++) {
    strcat(sets, o->sets[i]);
    strcat(sets, "\n");
  }
  char shard[32];
  snprintf(shard, sizeof shard, "%d/%d", r->shard, r->n_shards);
  char when[32];
  now_iso(when, sizeof when);
  /* the Slurm job running this, for `status`: an array task as JOB_TASK */
  char job[64] = "";
  const char *aj = getenv("SLURM_ARRAY_JOB_ID"), *at = getenv("SLURM_ARRAY_TASK_ID"), *j = getenv("SLURM_JOB_ID");
  if (aj && *aj && at && *at)
    snprintf(job, sizeof job, "%s_%s", aj, at);
  else if (j && *j)
    snprintf(job, sizeof job, "%s", j);
  int bad = exec_sql(r,
                     "INSERT OR REPLACE INTO meta VALUES('workflow',%Q),('sets',%Q),('workdir',%Q),('shard',%Q),"
                     "('stage',%Q);"
                     "INSERT INTO runs(started,host,pid,command,workflow,shard,status,version,job) "
                     "VALUES(%Q,%Q,%d,%Q,%Q,%Q,'running',%Q,%Q)",
                     abs, sets, r->workdir, shard, stage, when, r->host, (int)getpid(),
                     o->command_line ? o->command_line : "", abs, r->n_shards > 1 ? shard : NULL, SE3_VERSION,
                     job[0] ? job : NULL);
  free(sets);
  if (bad) return -1;
  r->run_id = sqlite3_last_insert_rowid(r->st.db);
  return 0;
}

/* The run's row in `runs`: finished, with its exit status and message. */
static void finish_run(struct run *r, int ret) {
  char when[32];
  now_iso(when, sizeof when);
  const char *status = ret == SE3_EXIT_OK ? "done" : ret == SE3_EXIT_STOPPED ? "stopped" : "failed";
  exec_sql(r, "UPDATE runs SET finished=%Q, status=%Q, exit_code=%d, message=%Q WHERE id=%lld", when, status, ret,
           r->err[0] ? r->err : NULL, r->run_id);
}

/* ---- stages shared by the processes of a data-parallel run --------------- */

/* Process `rank`'s database for stage `stage` (struct stage's `spread`). */
static void rank_db_path(char *out, size_t n, const char *workdir, const char *stage, int rank) {
  snprintf(out, n, "%s/shards/%s-rank%d.db", workdir, stage, rank);
}

static void remove_db(const char *path) {
  char p[PATH_MAX + 400];
  unlink(path);
  const char *ext[] = {"-wal", "-shm", ".lock"};
  for (int i = 0; i < 3; i++) {
    snprintf(p, sizeof p, "%s%s", path, ext[i]);
    unlink(p);
  }
}

static int fold_shard(struct run *r, const char *path, const char *want_stage, const char *want_hash, char **workflow,
                      char **sets);

/* Folds into r's database the processes' databases of stage s found in
 * WORKDIR/shards (those run under `hash`; others are stale and go) and
 * deletes them. `why`: a line for each, "" for silence. The number folded,
 * or -1 with r->err set. */
static int fold_rank_shards(struct run *r, const struct stage *s, const char *hash, const char *why) {
  char dir[PATH_MAX + 16], prefix[64];
  snprintf(dir, sizeof dir, "%s/shards", r->workdir);
  snprintf(prefix, sizeof prefix, "%s-rank", s->name);
  DIR *dh = opendir(dir);
  if (!dh) return 0;
  int folded = 0;
  struct dirent *e;
  while ((e = readdir(dh))) {
    size_t len = strlen(e->d_name);
    if (strncmp(e->d_name, prefix, strlen(prefix)) || len < 4 || strcmp(e->d_name + len - 3, ".db")) continue;
    char path[PATH_MAX + 320];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    int si = fold_shard(r, path, s->name, hash, NULL, NULL);
    if (si == -2) {
      closedir(dh);
      return -1;
    }
    if (why[0])
      progress_log(NULL, "%s: %s %s", s->name, si >= 0 ? "folded in" : "discarded (another configuration)", path);
    remove_db(path);
    folded += si >= 0;
  }
  closedir(dh);
  return folded;
}

/* stages.score.merge: hits, while shard.scores is attached in fold_shard's
 * transaction: copies into main.scores only the shard's own hits under
 * rank's settings (rank_select: one pass, memory bounded by rank's `top`),
 * which hold every hit of the whole library (a molecule among the best
 * `top` of all is among the best `top` of its shard), and records those
 * settings in meta 'scores_kept' for rank to check. *n_kept: rows kept, or -1
 * when the shard is to be folded whole (merge: all, or rank's top: 0).
 * Returns 0, or -1 with r->err set. */
static int merge_hits(struct run *r, int64_t *n_kept, int64_t *n_scores) {
  *n_kept = -1;
  const char *mode = r->root ? cfg_str(r->root, "stages.score.merge", "all") : "all";
  const struct cfg_node *rank = r->root ? cfg_get(cfg_get(r->root, "stages"), "rank") : NULL;
  if (strcmp(mode, "hits") || cfg_int(rank, "top", 100) <= 0)
    return exec_sql(r, "DELETE FROM main.meta WHERE key='scores_kept'");
  char target[256], err[1024];
  /* before the first fold screen.db of a score-only workflow holds neither
   * models nor scores: the shard's scores name the target */
  if (rank_target(r->st.db, "main", rank, target, sizeof target) &&
      rank_target(r->st.db, "shard", rank, target, sizeof target)) {
    snprintf(r->err, sizeof r->err,
             "stages.score.merge: hits keeps the scores rank needs, but no trained model in %s names the target "
             "and the scores hold none or several: set stages.rank.target",
             r->st.path);
    return -1;
  }
  int64_t *rows = NULL, n = 0;
  if (rank_select(r->st.db, "shard", "main", rank, target, &rows, &n, err, sizeof err)) {
    snprintf(r->err, sizeof r->err, "%s", err);
    return -1;
  }
  *n_scores = query_int(r->st.db, 0, "SELECT count(*) FROM shard.scores");
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_prepare_v2(
      r->st.db, "INSERT OR REPLACE INTO main.scores SELECT * FROM shard.scores WHERE rowid = ?1", -1, &st, NULL);
  for (int64_t i = 0; i < n && rc == SQLITE_OK; i++) {
    sqlite3_bind_int64(st, 1, rows[i]);
    rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
    sqlite3_reset(st);
  }
  sqlite3_finalize(st);
  free(rows);
  if (rc != SQLITE_OK) {
    snprintf(r->err, sizeof r->err, "keeping the shard's hits: %s", sqlite3_errmsg(r->st.db));
    return -1;
  }
  char spec[512];
  rank_spec(rank, target, spec, sizeof spec);
  if (exec_sql(r, "INSERT OR REPLACE INTO main.meta VALUES('scores_kept', %Q)", spec)) return -1;
  *n_kept = n;
  return 0;
}

/* 1 when the attached shard was folded into main already and holds nothing
 * new: every ledger row of its stage is in main as it is in the shard, under
 * the same configuration, and (score) under the same stages.score.merge
 * choice as now. Then merging it again would rewrite the same rows: a
 * workdir's merge job after each array folds every shard in shards/, and
 * refolding the earlier stages' cost as much as folding them the first time.
 * -1 with r->err set on an error. */
static int already_folded(struct run *r, const struct stage *s) {
  long long n = query_int(r->st.db, -1,
                          "SELECT CASE WHEN (SELECT config_hash FROM main.stage_state WHERE stage=%Q) IS NOT "
                          "(SELECT config_hash FROM shard.stage_state WHERE stage=%Q) THEN 1 ELSE "
                          "(SELECT count(*) FROM shard.stage_chunks c WHERE c.stage=%Q AND NOT EXISTS "
                          "(SELECT 1 FROM main.stage_chunks m WHERE m.stage=c.stage AND m.chunk=c.chunk AND "
                          "m.config_hash=c.config_hash AND m.host=c.host AND m.pid=c.pid AND m.started=c.started AND "
                          "m.finished=c.finished)) END",
                          s->name, s->name, s->name);
  if (n < 0) {
    snprintf(r->err, sizeof r->err, "comparing a shard's ledger with %s: %s", r->st.path, sqlite3_errmsg(r->st.db));
    return -1;
  }
  if (n > 0 || query_int(r->st.db, 0, "SELECT count(*) FROM shard.stage_chunks WHERE stage=%Q", s->name) == 0) return 0;
  /* a score shard: only when the scores were kept as they would be now */
  return s != &stage_score || r->scores_kept_as_now;
}

/* Whether screen.db's scores were kept as stages.score.merge would keep them
 * now (meta 'scores_kept' names rank's settings under `hits`, and is absent
 * under `all`), asked once before a merge folds anything. */
static int scores_kept_as_now(struct run *r) {
  char *kept = query_text(r->st.db, "SELECT value FROM main.meta WHERE key='scores_kept'");
  const struct cfg_node *rank = r->root ? cfg_get(cfg_get(r->root, "stages"), "rank") : NULL;
  int hits = r->root && !strcmp(cfg_str(r->root, "stages.score.merge", "all"), "hits") && cfg_int(rank, "top", 100) > 0;
  int same = !hits && !kept;
  if (hits && kept) {
    char target[256], spec[512];
    same = !rank_target(r->st.db, "main", rank, target, sizeof target) &&
           (rank_spec(rank, target, spec, sizeof spec), !strcmp(spec, kept));
  }
  free(kept);
  return same;
}

/* Folds the shard database `path` (a Slurm array task's, --shard's, or a
 * process's of a data-parallel run) into r's database, in one transaction.
 * want_hash: fold only a shard of stage want_stage run under this config
 * hash; NULL: any shard, and one made with another configuration than r's
 * database holds replaces the stage there (`merge`). *workflow and *sets,
 * when NULL, are set from the shard's meta (where given). Returns the
 * stage's index, -1 for a shard with nothing to fold (it never planned a
 * stage, or another than want_stage/want_hash), -2 with r->err set, -3 (only
 * for `merge`, want_hash NULL) for a shard folded before that holds nothing
 * new, its stage finalized. */
static int fold_shard(struct run *r, const char *path, const char *want_stage, const char *want_hash, char **workflow,
                      char **sets) {
  struct store sh;
  if (store_open(&sh, path, STORE_READONLY, NULL, 10000, r->err, sizeof r->err)) return -2;
  char *stage = query_text(sh.db, "SELECT value FROM meta WHERE key='stage'");
  char *hash = stage ? query_text(sh.db, "SELECT config_hash FROM stage_state WHERE stage=%Q", stage) : NULL;
  if (workflow && !*workflow) *workflow = query_text(sh.db, "SELECT value FROM meta WHERE key='workflow'");
  if (sets && !*sets) *sets = query_text(sh.db, "SELECT value FROM meta WHERE key='sets'");
  store_close(&sh);
  int si = stage ? stage_index(stage) : -1;
  if (si < 0 || !hash || (want_hash && (strcmp(stage, want_stage) || strcmp(hash, want_hash)))) {
    /* A shard that never got as far as planning holds nothing to merge. */
    free(stage);
    free(hash);
    return -1;
  }
  free(stage);
  free(hash);
  const struct stage *s = all_stages[si];
  if (exec_sql(r, "ATTACH %Q AS shard", path)) return -2;
  if (exec_sql(r, "BEGIN IMMEDIATE")) goto detach;
  if (!want_hash) {
    int done = already_folded(r, s);
    if (done < 0) goto rollback;
    if (done) { /* nothing new: a merge run again, or the next stage's merge */
      int finalized = query_int(r->st.db, 0, "SELECT finalized FROM main.stage_state WHERE stage=%Q", s->name) == 1;
      if (exec_sql(r, "COMMIT")) goto rollback;
      exec_sql(r, "DETACH shard");
      return finalized ? -3 : si;
    }
  }
  char *mine = query_text(r->st.db, "SELECT config_hash FROM main.stage_state WHERE stage=%Q", s->name);
  char *theirs = query_text(r->st.db, "SELECT config_hash FROM shard.stage_state WHERE stage=%Q", s->name);
  if (mine && theirs && strcmp(mine, theirs)) {
    /* (merge_verdict let only a shard of the workflow as it is now come here:
     * screen.db's stage is the one from before the change, as `run` would
     * find it) */
    char down[256] = "";
    for (int i = si + 1; i < N_STAGES; i++)
      snprintf(down + strlen(down), sizeof down - strlen(down), "%s%s", i > si + 1 ? ", " : "", all_stages[i]->name);
    progress_log(NULL,
                 "%s: %s holds this stage as made before the workflow changed; replacing it with the shards made "
                 "with the workflow as it is now, starting with %s%s%s",
                 s->name, r->st.path, path, down[0] ? ", and discarding the stages after it: " : "", down);
    if (clear_from(r, si)) {
      free(mine);
      free(theirs);
      goto rollback;
    }
  } else if (!mine) {
    if (clear_from(r, si + 1)) {
      free(theirs);
      goto rollback;
    }
  }
  free(mine);
  free(theirs);
  /* `merge` of a score shard under stages.score.merge: hits folds only the
   * shard's candidates for rank's hits. */
  int64_t n_kept = -1, n_scores = 0;
  if (!want_hash && s == &stage_score && merge_hits(r, &n_kept, &n_scores)) goto rollback;
  /* Rows are keyed identically in every shard, so OR REPLACE makes this idempotent. */
  /* `tables` lists children first (for deleting); insert parents first. */
  char *tables = strdup(s->tables), *tok[16];
  int n_tok = 0, bad = !tables;
  for (char *save = NULL, *t = tables ? strtok_r(tables, " ", &save) : NULL; t && n_tok < 16;
       t = strtok_r(NULL, " ", &save))
    tok[n_tok++] = t;
  for (int t = n_tok - 1; t >= 0 && !bad && n_kept < 0; t--)
    bad = exec_sql(r, "INSERT OR REPLACE INTO main.\"%w\" SELECT * FROM shard.\"%w\"", tok[t], tok[t]);
  free(tables);
  if (!bad && n_kept >= 0)
    progress_log(NULL, "%s: kept %lld of its %lld scores, the candidates for rank's hits (stages.score.merge: hits)",
                 path, (long long)n_kept, (long long)n_scores);
  /* (a shard made before schema version 4 has no runs.job, one made before
   * version 7 no rejects.atom and rejects.detail) */
  int has_job =
      query_int(r->st.db, 0, "SELECT count(*) FROM pragma_table_info('runs', 'shard') WHERE name = 'job'") > 0;
  int has_detail =
      query_int(r->st.db, 0, "SELECT count(*) FROM pragma_table_info('rejects', 'shard') WHERE name = 'detail'") > 0;
  if (bad ||
      exec_sql(r,
               "INSERT OR REPLACE INTO main.rejects(stage,set_name,source_file,record_no,line,name,chunk,reason,atom,"
               "detail) SELECT stage,set_name,source_file,record_no,line,name,chunk,reason,%s FROM shard.rejects "
               "WHERE stage=%Q;"
               "INSERT OR REPLACE INTO main.stage_chunks SELECT * FROM shard.stage_chunks WHERE stage=%Q;"
               "INSERT INTO main.stage_state SELECT * FROM shard.stage_state WHERE stage=%Q "
               "ON CONFLICT(stage) DO UPDATE SET finalized=0, updated=excluded.updated;"
               "INSERT INTO main.runs(started,finished,host,pid,command,workflow,shard,status,exit_code,message,"
               "version,job) SELECT started,finished,host,pid,command,workflow,shard,status,exit_code,message,version,"
               "%s FROM shard.runs WHERE (started,host,pid) NOT IN (SELECT started,host,pid FROM main.runs)",
               has_detail ? "atom,detail" : "NULL,NULL", s->name, s->name, s->name, has_job ? "job" : "NULL") ||
      exec_sql(r, "COMMIT"))
    goto rollback;
  exec_sql(r, "DETACH shard");
  return si;
rollback:
  sqlite3_exec(r->st.db, "ROLLBACK", NULL, NULL, NULL);
detach:
  sqlite3_exec(r->st.db, "DETACH shard", NULL, NULL, NULL);
  return -2;
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
  {
    int also_src = together && strcmp(r->src, "main");
    char *sql = sqlite3_mprintf("SELECT chunk, max(n) FROM (SELECT chunk, n_ok + n_rejected AS n FROM stage_chunks "
                                "WHERE stage=?1%s) GROUP BY chunk",
                                also_src ? " UNION ALL SELECT chunk, n_ok + n_rejected FROM src.stage_chunks "
                                           "WHERE stage=?1 AND config_hash=?2"
                                         : "");
    sqlite3_stmt *q = NULL;
    int rc = sql ? sqlite3_prepare_v2(r->st.db, sql, -1, &q, NULL) : SQLITE_NOMEM;
    sqlite3_free(sql);
    if (rc == SQLITE_OK) rc = sqlite3_bind_text(q, 1, s->name, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK && also_src) rc = sqlite3_bind_text(q, 2, hash, -1, SQLITE_STATIC);
    while (rc == SQLITE_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) {
      int64_t c = sqlite3_column_int64(q, 0);
      if (c >= 0 && c < n_chunks) done[c] = 1;
      done_items += sqlite3_column_int64(q, 1);
      rc = SQLITE_OK;
    }
    sqlite3_finalize(q);
    if (rc != SQLITE_DONE) {
      snprintf(r->err, sizeof r->err, "%s: reading the ledger (stage_chunks) of %s: %s", s->name, r->st.path,
               sqlite3_errmsg(r->st.db));
      free(done);
      return SE3_EXIT_FAILED;
    }
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
    progress_start(&r->prog, progress_mode_parse(cfg_str(r->root, "run.progress", "auto")),
                   cfg_float(r->root, "run.progress_interval_s", 5), label, s->unit ? s->unit : "mol", shard_items,
                   done_items);
    if (n_shards > 1 && !together && shard >= n_chunks)
      /* an array task beyond the stage's last chunk (slurm.array_size above the chunks) */
      progress_log(&r->prog,
                   "%s: no chunk for this task: the stage has %lld chunk%s and %d tasks share it (task %d takes "
                   "chunks %d, %d, ...); nothing to do",
                   label, (long long)n_chunks, n_chunks == 1 ? "" : "s", n_shards, shard, shard, shard + n_shards);
    else if (all_todo == 0 && n_chunks > 0)
      progress_log(&r->prog, "%s: nothing to do, all %lld chunks%s are done (%lld records)", label, (long long)n_chunks,
                   n_shards > 1 && !together ? " of this shard" : "", (long long)done_items);
  }

  int ret = SE3_EXIT_OK;
  int64_t ok_total = 0, rej_total = 0, c = 0;
  while (all_todo > 0) {
    while (c < n_chunks && (c % n_shards != shard || done[c]))
      c++;
    int64_t n_ok = 0, n_rej = 0;
    int stopped = together && stop_flag; /* one with nothing left still stops the others */
    if (c < n_chunks && stop_flag) {
      stopped = 1;
    } else if (c < n_chunks) {
      char started[32], finished[32];
      now_iso(started, sizeof started);
      int st = exec_sql(r, "BEGIN IMMEDIATE") ? STAGE_ERROR : STAGE_OK;
      ctx->chunk_bytes = 0;
      if (st == STAGE_OK) {
        st = s->run_chunk(ctx, c, &n_ok, &n_rej);
        if (st == STAGE_ERROR) snprintf(r->err, sizeof r->err, "%s: chunk %lld: %s", s->name, (long long)c, ctx->err);
      }
      if (st == STAGE_OK) {
        now_iso(finished, sizeof finished);
        if (exec_sql(r,
                     "INSERT INTO stage_chunks(stage, chunk, shard, config_hash, status, host, pid, started, "
                     "finished, n_ok, n_rejected, n_bytes) VALUES(%Q,%lld,%d,%Q,'done',%Q,%d,%Q,%Q,%lld,%lld,%lld)",
                     s->name, (long long)c, shard, hash, r->host, (int)getpid(), started, finished, (long long)n_ok,
                     (long long)n_rej, (long long)ctx->chunk_bytes) ||
            exec_sql(r, "COMMIT"))
          st = STAGE_ERROR;
      }
      if (st != STAGE_OK) {
        sqlite3_exec(r->st.db, "ROLLBACK", NULL, NULL, NULL);
        n_ok = n_rej = 0;
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
    char summary[256];
    snprintf(summary, sizeof summary, "%lld %s, %lld rejected%s%s", (long long)ok_total, s->done ? s->done : "stored",
             (long long)rej_total, together ? " by this process" : "",
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
static int share_stage(struct run *w, const struct stage *s, const char *hash) {
  const struct se3_comm *comm = w->comm;
  int rank = comm_rank(comm), n = comm_size(comm);
  char settings[17], path[PATH_MAX + 96], up[PATH_MAX + 32];
  settings_hash(w->root, s, settings);
  struct run_ctx rc;
  w->shard = rank;
  w->n_shards = n;
  w->src = "src";
  w->err[0] = 0;
  stage_ctx_init(&rc, w, s);
  struct stage_ctx *ctx = &rc.ctx;
  if (rank > 0) ctx->report = &quiet_report;
  int64_t n_chunks = 0, n_items = 0;
  int st = STAGE_ERROR;
  snprintf(up, sizeof up, "%s/shards", w->workdir);
  rank_db_path(path, sizeof path, w->workdir, s->name, rank);
  if (!mkdirs(up, w->err, sizeof w->err) &&
      !store_open(&w->st, path, STORE_WRITE, cfg_str(w->root, "store.journal", "wal"),
                  (int)cfg_int(w->root, "store.busy_timeout_ms", 10000), w->err, sizeof w->err) &&
      !store_lock(&w->st, w->err, sizeof w->err) &&
      (snprintf(up, sizeof up, "%s/screen.db", w->workdir),
       !store_attach_readonly(&w->st, up, "src", w->err, sizeof w->err)) &&
      !record_run(w, s->name)) {
    /* (rank 0 folded and removed what an earlier run left here; whatever is
     * still here from another configuration goes) */
    char *old = query_text(w->st.db, "SELECT config_hash FROM stage_state WHERE stage=%Q", s->name);
    if (old && strcmp(old, hash)) clear_from(w, stage_index(s->name));
    free(old);
    ctx->db = w->st.db;
    st = s->begin(ctx, &n_chunks, &n_items);
    if (st != STAGE_OK) {
      snprintf(w->err, sizeof w->err, "%s: %s", s->name, ctx->err);
    } else {
      char when[32];
      now_iso(when, sizeof when);
      if (exec_sql(w,
                   "INSERT INTO stage_state(stage, config_hash, settings_hash, n_chunks, n_items, finalized, "
                   "updated) VALUES(%Q,%Q,%Q,%lld,%lld,0,%Q) ON CONFLICT(stage) DO UPDATE SET "
                   "config_hash=excluded.config_hash, n_chunks=excluded.n_chunks, n_items=excluded.n_items, "
                   "updated=excluded.updated",
                   s->name, hash, settings, (long long)n_chunks, (long long)n_items, when))
        st = STAGE_ERROR;
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
  if (w->st.db) finish_run(w, ret);
  if (s->end) s->end(ctx);
  store_close(&w->st);
  int closed = 0;
  if (comm_max_int(comm, &closed, 1)) comm_abort(comm, SE3_EXIT_FAILED);
  return ret;
}

/* A process of rank > 0 in a shared stage (share_stage), in its run r. */
static void follow_spread(struct run *r, const struct stage *s, uint64_t hash64) {
  char hash[17];
  snprintf(hash, sizeof hash, "%016" PRIx64, hash64);
  share_stage(r, s, hash);
  r->src = "main";
  r->shard = 0;
  r->n_shards = 1;
}

static int run_stage(struct run *r, int si) {
  const struct stage *s = all_stages[si];
  struct run_ctx rc;
  stage_ctx_init(&rc, r, s);
  struct stage_ctx *ctx = &rc.ctx;

  int64_t n_chunks = 0, n_items = 0;
  uint64_t upstream = 0;
  if (check_upstream(r, s, &upstream)) return SE3_EXIT_FAILED;
  /* A collective stage: the other processes begin it with this one. */
  int collective = r->comm && s->serve;
  ctx->comm = collective ? r->comm : NULL;
  if (collective) {
    struct stage_order o = {.op = RUN_ORDER_STAGE, .i = {si}};
    if (stage_order(ctx, &o)) {
      snprintf(r->err, sizeof r->err, "%s: MPI failed sending the stage to the other processes", s->name);
      return SE3_EXIT_FAILED;
    }
  }
  int began = s->begin(ctx, &n_chunks, &n_items);
  int all_began = began;
  if (collective) comm_max_int(r->comm, &all_began, 1);
  if (all_began != STAGE_OK) {
    if (began != STAGE_OK)
      snprintf(r->err, sizeof r->err, "%s: %s", s->name, ctx->err);
    else
      snprintf(r->err, sizeof r->err, "%s: another process of the run could not begin it (its message is above)",
               s->name);
    if (s->end) s->end(ctx);
    return SE3_EXIT_FAILED;
  }
  if (s->ready && s->ready(ctx) != STAGE_OK) {
    snprintf(r->err, sizeof r->err, "%s: %s", s->name, ctx->err);
    if (collective) stage_serve_end(ctx);
    if (s->end) s->end(ctx);
    return SE3_EXIT_FAILED;
  }
  char settings[17], hash[17], with_inputs[17];
  settings_hash(r->root, s, settings);
  fold_hash(settings, ctx->inputs_hash, with_inputs);
  fold_hash(with_inputs, upstream, hash);

  /* A changed configuration discards this stage and everything downstream. */
  char *old = query_text(r->st.db, "SELECT config_hash FROM stage_state WHERE stage=%Q", s->name);
  long long stale =
      query_int(r->st.db, 0, "SELECT count(*) FROM stage_chunks WHERE stage=%Q AND config_hash<>%Q", s->name, hash);
  int ret = SE3_EXIT_FAILED;
  if (exec_sql(r, "BEGIN IMMEDIATE")) goto out;
  if ((old && strcmp(old, hash)) || stale > 0) {
    long long n_done = query_int(r->st.db, 0, "SELECT count(*) FROM stage_chunks WHERE stage=%Q", s->name);
    char down[256] = "";
    for (int i = si + 1; i < N_STAGES; i++)
      snprintf(down + strlen(down), sizeof down - strlen(down), "%s%s", i > si + 1 ? ", " : "", all_stages[i]->name);
    char *old_settings = query_text(r->st.db, "SELECT settings_hash FROM stage_state WHERE stage=%Q", s->name);
    progress_log(NULL, "%s: %s changed since the last run; discarding its %lld finished chunk%s%s%s", s->name,
                 old_settings && strcmp(old_settings, settings) ? "the configuration"
                 : upstream_of(r->root, s)                      ? "the upstream stage's output"
                                                                : "an input file",
                 n_done, n_done == 1 ? "" : "s", down[0] ? " and the downstream stages: " : "", down);
    free(old_settings);
    if (clear_from(r, si)) goto rollback;
  }
  char when[32];
  now_iso(when, sizeof when);
  if (exec_sql(r,
               "INSERT INTO stage_state(stage, config_hash, settings_hash, n_chunks, n_items, finalized, updated) "
               "VALUES(%Q,%Q,%Q,%lld,%lld,0,%Q) ON CONFLICT(stage) DO UPDATE SET n_chunks=excluded.n_chunks, "
               "n_items=excluded.n_items, updated=excluded.updated",
               s->name, hash, settings, (long long)n_chunks, (long long)n_items, when) ||
      exec_sql(r, "COMMIT"))
    goto rollback;

  /* Work of this stage that processes of an earlier data-parallel run
   * left in their own databases (stopped before rank 0 folded it in). */
  if (s->spread && r->n_shards <= 1 && fold_rank_shards(r, s, hash, "leftovers") < 0) goto out;
  int spread = r->comm && s->spread && !collective && !s->finalize; /* (stage.h: a spread stage has none) */
  if (spread) {
    /* Every process, this one too, does its share in a database of its own
     * (share_stage), and this one then folds them all in. The planning
     * begun here on screen.db has done its part. */
    if (s->end) s->end(ctx);
    ctx->state = NULL;
    struct stage_order o = {.op = RUN_ORDER_SPREAD, .i = {si, (int64_t)strtoull(hash, NULL, 16)}};
    struct stage_ctx bare = {.comm = r->comm};
    if (stage_order(&bare, &o)) {
      snprintf(r->err, sizeof r->err, "%s: MPI failed sending the stage to the other processes", s->name);
      goto out;
    }
    struct run w;
    run_init(&w, r->o);
    w.root = r->root;
    memcpy(w.workdir, r->workdir, sizeof w.workdir);
    memcpy(w.workflow_dir, r->workflow_dir, sizeof w.workflow_dir);
    memcpy(w.host, r->host, sizeof w.host);
    ret = share_stage(&w, s, hash);
    if (ret != SE3_EXIT_OK) snprintf(r->err, sizeof r->err, "%s", w.err);
    if (ret == SE3_EXIT_OK && fold_rank_shards(r, s, hash, "") < 0) ret = SE3_EXIT_FAILED;
  } else {
    ret = run_chunks(r, s, ctx, hash, n_chunks, n_items, r->shard, r->n_shards, NULL);
  }
  if (ret != SE3_EXIT_OK) goto out;
  ret = SE3_EXIT_FAILED;

  /* Finalize once every chunk of the stage is in this database. */
  long long n_done =
      query_int(r->st.db, 0, "SELECT count(*) FROM stage_chunks WHERE stage=%Q AND config_hash=%Q", s->name, hash);
  long long finalized = query_int(r->st.db, 0, "SELECT finalized FROM stage_state WHERE stage=%Q", s->name);
  if (r->n_shards <= 1 && n_done == n_chunks && !finalized) {
    if (run_finalize(r, s, ctx)) goto out;
  }
  ret = SE3_EXIT_OK;
  goto out;
rollback:
  sqlite3_exec(r->st.db, "ROLLBACK", NULL, NULL, NULL);
out:
  free(old);
  if (collective && stage_serve_end(ctx) && ret == SE3_EXIT_OK) {
    snprintf(r->err, sizeof r->err, "%s: MPI failed ending the stage on the other processes", s->name);
    ret = SE3_EXIT_FAILED;
  }
  if (s->end) s->end(ctx);
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
  r.root = load_config(o->workflow, o->sets, o->n_sets, o->workdir, "");
  snprintf(r.workdir, sizeof r.workdir, "%s", r.root ? cfg_str(r.root, "workdir", ".") : ".");
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
      follow_spread(&r, all_stages[ord.i[0]], (uint64_t)ord.i[1]);
      continue;
    }
    if (ord.op != RUN_ORDER_STAGE || ord.i[0] < 0 || ord.i[0] >= N_STAGES || !r.root) {
      fprintf(stderr, "se3screen (rank %d): rank 0 sent order %lld, which this process cannot follow\n", rank,
              (long long)ord.op);
      comm_abort(o->comm, SE3_EXIT_FAILED);
    }
    const struct stage *s = all_stages[ord.i[0]];
    struct run_ctx rc;
    stage_ctx_init(&rc, &r, s);
    struct stage_ctx *ctx = &rc.ctx;
    ctx->report = &quiet_report;
    ctx->comm = o->comm;
    char dbpath[PATH_MAX + 64];
    snprintf(dbpath, sizeof dbpath, "%s/screen.db", r.workdir);
    int st = STAGE_ERROR;
    if (store_open(&r.st, dbpath, STORE_READONLY, NULL, (int)cfg_int(r.root, "store.busy_timeout_ms", 10000), ctx->err,
                   sizeof ctx->err) == 0) {
      ctx->db = r.st.db;
      int64_t n_chunks, n_items;
      st = s->begin(ctx, &n_chunks, &n_items);
    }
    if (st != STAGE_OK) fprintf(stderr, "se3screen (rank %d): %s: %s\n", rank, s->name, ctx->err);
    int all = st;
    comm_max_int(o->comm, &all, 1);
    if (all == STAGE_OK && s->serve(ctx) != STAGE_OK)
      fprintf(stderr, "se3screen (rank %d): %s: %s\n", rank, s->name, ctx->err);
    if (s->end) s->end(ctx);
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

static int run_main(const struct run_opts *o) {
  struct run r;
  run_init(&r, o);
  hostname_of(r.host, sizeof r.host);
  int ret = SE3_EXIT_FAILED;

  /* Which stages. */
  int first = 0, last = N_STAGES - 1;
  const char *asked[2] = {o->stage, o->until};
  for (int k = 0; k < 2; k++) {
    if (!asked[k]) continue;
    int i = stage_index(asked[k]);
    if (i < 0) {
      fprintf(stderr, "se3screen run: unknown stage '%s' (stages: ", asked[k]);
      print_stage_names(stderr);
      fprintf(stderr, ")\n");
      return SE3_EXIT_USAGE;
    }
    if (k == 0) first = i;
    last = i;
  }
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
               all_stages[i]->name);
    r.root = load_config(o->workflow, o->sets, o->n_sets, o->workdir, inputs);
  }
  if (!r.root) return SE3_EXIT_USAGE;
  /* Stages the workflow does not configure are not run unless asked for. */
  if (!o->stage) last = last_configured(r.root, first, last);
  if (r.n_shards > 1 && o->comm) {
    fprintf(stderr,
            "se3screen run: started as %d processes and as shard %d/%d: shard a stage with --shard (or a "
            "Slurm array), or train on several processes, not both at once\n",
            comm_size(o->comm), r.shard, r.n_shards);
    cfg_node_free(r.root);
    return SE3_EXIT_USAGE;
  }
  if (r.n_shards > 1 && first != last) {
    fprintf(stderr, "se3screen run: a sharded run does one stage at a time: add --stage NAME, then `se3screen merge` "
                    "before the next stage\n");
    cfg_node_free(r.root);
    return SE3_EXIT_USAGE;
  }

  /* The model's device, before any work: `device: cuda` without a usable
   * GPU stops here, not after hours of graphs and bases. */
  for (int i = first; i <= last; i++)
    if (all_stages[i] == &stage_train || all_stages[i] == &stage_score) {
      char why[1024];
      const char *bad = "device";
      if (stage_device_check(r.root, &bad, why, sizeof why)) {
        const struct cfg_node *dn = cfg_get(r.root, bad);
        if (dn && dn->file && strcmp(dn->file, "<default>"))
          fprintf(stderr, "se3screen: %s:%d:%d: %s\n", dn->file, dn->line, dn->col, why);
        else
          fprintf(stderr, "se3screen: %s\n", why);
        cfg_node_free(r.root);
        return SE3_EXIT_USAGE;
      }
      break;
    }
  { /* the inputs' columns and tags, for the stages that will run */
    char names[128] = "";
    for (int i = first; i <= last; i++) {
      if (stage_skipped(r.root, all_stages[i]) && !(o->stage && i == first)) continue;
      snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", names[0] ? " " : "", all_stages[i]->name);
    }
    if (check_input_files(r.root, names, o->workflow)) {
      cfg_node_free(r.root);
      return SE3_EXIT_USAGE;
    }
  }

  snprintf(r.workdir, sizeof r.workdir, "%s", cfg_str(r.root, "workdir", "."));
  {
    char tmp[PATH_MAX];
    if (realpath(o->workflow, tmp)) {
      snprintf(r.workflow_dir, sizeof r.workflow_dir, "%s", dirname(tmp));
    } else {
      snprintf(r.workflow_dir, sizeof r.workflow_dir, ".");
    }
  }
  char dbpath[PATH_MAX + 64];
  if (r.n_shards > 1) {
    char dir[PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/shards", r.workdir);
    if (mkdirs(dir, r.err, sizeof r.err)) goto fail_early;
    snprintf(dbpath, sizeof dbpath, "%s/%s-%d.db", dir, all_stages[first]->name, r.shard);
  } else {
    if (mkdirs(r.workdir, r.err, sizeof r.err)) goto fail_early;
    snprintf(dbpath, sizeof dbpath, "%s/screen.db", r.workdir);
  }
  if (store_open(&r.st, dbpath, STORE_WRITE, cfg_str(r.root, "store.journal", "wal"),
                 (int)cfg_int(r.root, "store.busy_timeout_ms", 10000), r.err, sizeof r.err))
    goto fail_early;
  if (store_lock(&r.st, r.err, sizeof r.err)) goto fail_early;

  /* A shard of a stage that reads another's tables reads them from screen.db
   * (made by an unsharded run or by merge); it writes only its own database. */
  r.src = "main";
  const char *first_after = upstream_of(r.root, all_stages[first]);
  if (r.n_shards > 1 && first_after) {
    char up[PATH_MAX + 32];
    snprintf(up, sizeof up, "%s/screen.db", r.workdir);
    if (access(up, R_OK) != 0) {
      snprintf(r.err, sizeof r.err, "%s reads the %s stage's results from %.1500s, which does not exist: run %s first",
               all_stages[first]->name, first_after, up, first_after);
      goto fail_early;
    }
    if (store_attach_readonly(&r.st, up, "src", r.err, sizeof r.err)) goto fail_early;
    r.src = "src";
  }

  /* Remember how to rebuild this configuration (merge needs it to finalize). */
  if (record_run(&r, r.n_shards > 1 ? all_stages[first]->name : "")) goto fail_early;

  install_signals();
  ret = SE3_EXIT_OK;
  for (int i = first; i <= last && ret == SE3_EXIT_OK; i++) {
    if (stage_skipped(r.root, all_stages[i]) && !(o->stage && i == first)) continue;
    ret = run_stage(&r, i);
  }

  finish_run(&r, ret);
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

/* ---- merge ----------------------------------------------------------------- */

static int has_suffix(const char *s, const char *suf) {
  size_t a = strlen(s), b = strlen(suf);
  return a >= b && !strcmp(s + a - b, suf);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Shard databases beside db_path, sorted. */
static char **list_shards(const char *db_path, int *n) {
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s", db_path);
  char *d = dirname(dir);
  char sdir[PATH_MAX + 16];
  snprintf(sdir, sizeof sdir, "%s/shards", d);
  *n = 0;
  DIR *dh = opendir(sdir);
  if (!dh) return NULL;
  char **out = NULL;
  struct dirent *e;
  while ((e = readdir(dh))) {
    if (!has_suffix(e->d_name, ".db")) continue;
    char **grown = realloc(out, sizeof *out * (size_t)(*n + 1));
    if (!grown) break;
    out = grown;
    if (asprintf(&out[*n], "%s/%s", sdir, e->d_name) < 0) break;
    (*n)++;
  }
  closedir(dh);
  if (*n > 1) qsort(out, (size_t)*n, sizeof *out, cmp_str);
  return out;
}

/* The config hash `run` would give stage s now, from r's workflow and
 * against the upstream results r's database holds: 1 with it in out, 0 when
 * it cannot be known here (why in note). Ingest plans its inputs
 * for their fingerprint (as every run does); graph, basis and score take
 * none (score only with stages.score.checkpoint, which needs the model's
 * device to read: not known here); other stages are not sharded. */
static int expected_hash(struct run *r, const struct stage *s, char out[17], char *note, size_t notelen) {
  int no_inputs = s == &stage_graph || s == &stage_basis ||
                  (s == &stage_score && !cfg_str(cfg_get(cfg_get(r->root, "stages"), "score"), "checkpoint", NULL));
  if (s != &stage_ingest && !no_inputs) {
    snprintf(note, notelen, "the %s stage's inputs are not fingerprinted by merge", s->name);
    return 0;
  }
  uint64_t upstream = 0;
  if (check_upstream(r, s, &upstream)) {
    snprintf(note, notelen, "%.500s", r->err);
    r->err[0] = 0;
    return 0;
  }
  uint64_t inputs = 0;
  if (s == &stage_ingest) {
    struct run_ctx rc;
    stage_ctx_init(&rc, r, s);
    int64_t n_chunks = 0, n_items = 0;
    int st = s->begin(&rc.ctx, &n_chunks, &n_items);
    inputs = rc.ctx.inputs_hash;
    if (st != STAGE_OK) snprintf(note, notelen, "planning %s: %.400s", s->name, rc.ctx.err);
    if (s->end) s->end(&rc.ctx);
    if (st != STAGE_OK) return 0;
  }
  char settings[17], with_inputs[17];
  settings_hash(r->root, s, settings);
  fold_hash(settings, inputs, with_inputs);
  fold_hash(with_inputs, upstream, out);
  return 1;
}

/* What `merge` holds a shard to: the workflow of this workdir, and the
 * configuration it has now. */
struct merge_ref {
  const char *workflow; /* screen.db's meta, or the first shard's; NULL: unknown */
  char expected[N_STAGES][17];
  int known[N_STAGES]; /* 0 not asked yet, 1 expected[] holds it, -1 unknown (note[]) */
  char note[N_STAGES][512];
};

/* Whether the shard database at path belongs to this workdir's workflow as
 * it is now: 1 yes (or it holds nothing to fold: fold_shard skips it), 0 no
 * (why says why, in words naming the stage). A
 * shard made from another workflow, with another configuration of its
 * stage than the workflow's now, or from other inputs or upstream results
 * than screen.db holds, is stale or foreign: folding it would replace work
 * of the current configuration with it. */
static int merge_verdict(struct run *r, struct merge_ref *ref, const char *path, char *why, size_t whylen) {
  struct store sh;
  char err[1024];
  if (store_open(&sh, path, STORE_READONLY, NULL, 10000, err, sizeof err)) {
    snprintf(why, whylen, "it cannot be read: %s", err);
    return 0;
  }
  char *stage = query_text(sh.db, "SELECT value FROM meta WHERE key='stage'");
  char *hash = stage ? query_text(sh.db, "SELECT config_hash FROM stage_state WHERE stage=%Q", stage) : NULL;
  char *settings = stage ? query_text(sh.db, "SELECT settings_hash FROM stage_state WHERE stage=%Q", stage) : NULL;
  char *workflow = query_text(sh.db, "SELECT value FROM meta WHERE key='workflow'");
  char *shard = query_text(sh.db, "SELECT value FROM meta WHERE key='shard'");
  store_close(&sh);
  int si = stage ? stage_index(stage) : -1, ret = 1;
  if (si < 0 || !hash || !settings) goto out; /* never planned a stage: nothing to fold */
  const struct stage *s = all_stages[si];
  char *mine = query_text(r->st.db, "SELECT config_hash FROM main.stage_state WHERE stage=%Q", s->name);
  int differs = mine && strcmp(mine, hash);
  free(mine);
  if (ref->workflow && (!workflow || strcmp(workflow, ref->workflow))) {
    snprintf(why, whylen, "it was made by another workflow (%s), not this workdir's (%s)",
             workflow ? workflow : "none recorded", ref->workflow);
    ret = 0;
    goto out;
  }
  if (!r->root) {
    if (differs) {
      snprintf(why, whylen,
               "its %s stage differs from the one %s holds, and the workflow to tell which is current cannot "
               "be loaded",
               s->name, r->st.path);
      ret = 0;
    }
    goto out;
  }
  char now[17];
  settings_hash(r->root, s, now);
  if (strcmp(settings, now)) {
    snprintf(why, whylen,
             "it was made with another configuration of stage %s than %s has now (a stale shard, from before "
             "the workflow changed)",
             s->name, ref->workflow ? ref->workflow : "the workflow");
    ret = 0;
    goto out;
  }
  if (!ref->known[si])
    ref->known[si] = expected_hash(r, s, ref->expected[si], ref->note[si], sizeof ref->note[si]) == 1 ? 1 : -1;
  const char *after = upstream_of(r->root, s);
  if (ref->known[si] == 1 && strcmp(hash, ref->expected[si])) {
    if (after)
      snprintf(why, whylen,
               "its %s stage was made from other results of stage %s than %s holds now (a stale shard, from "
               "before %s was redone)",
               s->name, after, r->st.path, after);
    else
      snprintf(why, whylen,
               "its %s stage was made from other input files than the workflow's now (a stale shard, from "
               "before an input file changed)",
               s->name);
    ret = 0;
  } else if (ref->known[si] != 1 && differs) {
    snprintf(why, whylen, "its %s stage differs from the one %s holds, and which is current cannot be told here (%s)",
             s->name, r->st.path, ref->note[si]);
    ret = 0;
  }
out:
  /* a stale shard of this workflow: how to redo it (a rank's database of a
   * data-parallel run is redone by the run itself) */
  if (!ret && si >= 0 && ref->workflow && workflow && !strcmp(workflow, ref->workflow) && shard &&
      strcmp(shard, "0/1") && !strstr(strrchr(path, '/') ? strrchr(path, '/') + 1 : path, "-rank")) {
    size_t len = strlen(why);
    snprintf(why + len, whylen - len, "; to redo it: se3screen run %s --stage %s --shard %s", ref->workflow,
             all_stages[si]->name, shard);
  }
  free(stage);
  free(hash);
  free(settings);
  free(workflow);
  free(shard);
  return ret;
}

/* The meta value `key` of the se3screen database at path, NULL when it has
 * none (or is no such database: opening it read-only changes nothing). */
static char *db_meta(const char *path, const char *key) {
  struct store st;
  char err[1024];
  if (access(path, F_OK) != 0 || store_open(&st, path, STORE_READONLY, NULL, 10000, err, sizeof err)) return NULL;
  char *v = query_text(st.db, "SELECT value FROM meta WHERE key=%Q", key);
  store_close(&st);
  return v;
}

int runner_merge(const char *db_path) {
  char *workflow = NULL, *sets = NULL;
  struct run r;
  memset(&r, 0, sizeof r);
  r.n_shards = 1;
  r.src = "main";
  hostname_of(r.host, sizeof r.host);
  int n = 0;
  char **shards = list_shards(db_path, &n);
  if (n == 0) {
    fprintf(stderr, "se3screen merge: no shard databases (shards/*.db) beside %s\n", db_path);
    return SE3_EXIT_USAGE;
  }
  int ret = SE3_EXIT_FAILED, refused = 0, from_shard = 0;
  char *sets_text = NULL;
  struct merge_ref *ref = calloc(1, sizeof *ref);
  if (!ref) {
    snprintf(r.err, sizeof r.err, "out of memory");
    goto done;
  }
  /* This workdir's workflow: the one screen.db was run with (its meta), or
   * for a screen.db that only merges have made, the first shard's. It is
   * loaded once, as it is now, with the --set overrides its first shard was
   * run with (the shards' own: screen.db's are those of its last run, which
   * may have been of another stage): shards are checked against it, a score
   * shard's merge may need rank's settings, finalize the stages'. */
  workflow = db_meta(db_path, "workflow");
  from_shard = !workflow;
  for (int k = 0; k < n && !sets; k++) {
    char *w = db_meta(shards[k], "workflow");
    if (w && (!workflow || !strcmp(w, workflow))) {
      sets = db_meta(shards[k], "sets");
      if (!sets) sets = strdup("");
    }
    if (w && !workflow) {
      workflow = w;
      w = NULL;
    }
    free(w);
  }
  if (workflow && !sets) sets = db_meta(db_path, "sets");
  ref->workflow = workflow;
  sets_text = sets ? strdup(sets) : NULL; /* (sets is cut into lines below) */
  {
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", db_path);
    snprintf(r.workdir, sizeof r.workdir, "%s", dirname(dir));
    char abs[PATH_MAX];
    if (realpath(r.workdir, abs)) snprintf(r.workdir, sizeof r.workdir, "%s", abs);
  }
  if (workflow) {
    const char *setv[64];
    int n_set = 0;
    for (char *save = NULL, *t = sets ? strtok_r(sets, "\n", &save) : NULL; t && n_set < 64;
         t = strtok_r(NULL, "\n", &save))
      setv[n_set++] = t;
    r.root = load_config(workflow, setv, n_set, r.workdir, NULL);
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", workflow);
    snprintf(r.workflow_dir, sizeof r.workflow_dir, "%s", dirname(tmp));
  }
  /* the workflow's journal mode (delete on NFS/Lustre) */
  if (store_open(&r.st, db_path, STORE_WRITE, r.root ? cfg_str(r.root, "store.journal", "wal") : "wal",
                 r.root ? (int)cfg_int(r.root, "store.busy_timeout_ms", 10000) : 10000, r.err, sizeof r.err))
    goto done;
  if (store_lock(&r.st, r.err, sizeof r.err)) goto done;
  r.scores_kept_as_now = scores_kept_as_now(&r);
  int touched[N_STAGES] = {0}, adopted = 0;
  for (int k = 0; k < n; k++) {
    char why[2048];
    if (!merge_verdict(&r, ref, shards[k], why, sizeof why)) {
      fprintf(stderr, "se3screen merge: refused %s: %s; it was not merged, and nothing was deleted\n", shards[k], why);
      refused++;
      continue;
    }
    int si = fold_shard(&r, shards[k], NULL, NULL, NULL, NULL);
    if (si == -2) goto done;
    if (si == -3) progress_log(NULL, "%s: merged already, nothing new", shards[k]);
    if (si < 0) continue;
    touched[si] = 1;
    adopted = 1;
    progress_log(NULL, "merged %s", shards[k]);
  }
  /* A screen.db that merges alone have made learns its workflow from the
   * shards it took, so that a later merge knows which shards are its own. */
  if (adopted && from_shard && workflow &&
      exec_sql(&r, "INSERT OR IGNORE INTO meta VALUES('workflow',%Q),('sets',%Q)", workflow,
               sets_text ? sets_text : ""))
    goto done;
  /* Finalize the stages whose chunks are now all here. */
  for (int si = 0; si < N_STAGES; si++) {
    if (!touched[si]) continue;
    const struct stage *s = all_stages[si];
    long long n_chunks = query_int(r.st.db, -1, "SELECT n_chunks FROM stage_state WHERE stage=%Q", s->name);
    long long n_done = query_int(r.st.db, 0, "SELECT count(*) FROM stage_chunks WHERE stage=%Q", s->name);
    if (n_done < n_chunks) {
      progress_log(NULL, "%s: %lld of %lld chunks merged; run the missing shards and merge again", s->name, n_done,
                   n_chunks);
      continue;
    }
    if (!s->finalize) {
      if (exec_sql(&r, "UPDATE stage_state SET finalized=1 WHERE stage=%Q", s->name)) goto done;
      continue;
    }
    if (!r.root) {
      snprintf(r.err, sizeof r.err, "cannot load the workflow %s the shards were made from", workflow ? workflow : "?");
      goto done;
    }
    struct run_ctx rc;
    stage_ctx_init(&rc, &r, s);
    if (run_finalize(&r, s, &rc.ctx)) goto done;
  }
  ret = SE3_EXIT_OK;
  if (refused) {
    /* Not a silent success: the refused shards are named above. */
    fprintf(stderr,
            "se3screen merge: refused %d shard database%s of %d (named above): %s keeps its own work. A stale or "
            "foreign shard can be deleted; a stale one is brought up to date by running its shard again with the "
            "workflow as it is now (se3screen run WORKFLOW --stage STAGE --shard I/N), then merge again\n",
            refused, refused == 1 ? "" : "s", n, db_path);
    ret = SE3_EXIT_FAILED;
  }
done:
  if (ret != SE3_EXIT_OK && r.err[0]) fprintf(stderr, "se3screen merge: %s\n", r.err);
  for (int k = 0; k < n; k++)
    free(shards[k]);
  free(shards);
  free(workflow);
  free(sets);
  free(sets_text);
  free(ref);
  cfg_node_free(r.root);
  store_close(&r.st);
  return ret;
}

/* ---- status ---------------------------------------------------------------- */

/* Status reads with every query checked: a database that opens but cannot be
 * read through (truncated, damaged) must not pass for an empty one. A table
 * an older schema lacks (SQLITE_ERROR at prepare) only reads as nothing. */
struct status_reader {
  sqlite3 *db;
  char err[512]; /* the first read failure */
};

static sqlite3_stmt *status_step(struct status_reader *sr, const char *fmt, va_list ap) {
  char *sql = sqlite3_vmprintf(fmt, ap);
  sqlite3_stmt *st = NULL;
  int rc = sql ? sqlite3_prepare_v2(sr->db, sql, -1, &st, NULL) : SQLITE_NOMEM;
  if (rc == SQLITE_OK) {
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) rc = SQLITE_OK;
  }
  if (rc != SQLITE_OK && rc != SQLITE_DONE && (rc & 0xff) != SQLITE_ERROR && !sr->err[0])
    snprintf(sr->err, sizeof sr->err, "%s", sql ? sqlite3_errmsg(sr->db) : "out of memory");
  sqlite3_free(sql);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(st);
    return NULL;
  }
  return st;
}

static sqlite3_stmt *status_step_v(struct status_reader *sr, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  sqlite3_stmt *st = status_step(sr, fmt, ap);
  va_end(ap);
  return st;
}

static long long status_int(struct status_reader *sr, long long dflt, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  sqlite3_stmt *st = status_step(sr, fmt, ap);
  va_end(ap);
  long long v = st && sqlite3_column_type(st, 0) != SQLITE_NULL ? sqlite3_column_int64(st, 0) : dflt;
  sqlite3_finalize(st);
  return v;
}

static char *status_text(struct status_reader *sr, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  sqlite3_stmt *st = status_step(sr, fmt, ap);
  va_end(ap);
  char *v = st && sqlite3_column_text(st, 0) ? strdup((const char *)sqlite3_column_text(st, 0)) : NULL;
  sqlite3_finalize(st);
  return v;
}

/* Prints one database's status; returns 0, or -1 when it cannot be read
 * (the message names the file and why). */
static int status_of_db(const char *path, const struct cfg_node *root, int with_header) {
  struct store st;
  char err[1024];
  if (store_open(&st, path, STORE_READONLY, NULL, 10000, err, sizeof err)) {
    fprintf(stderr, "se3screen status: %s\n", err);
    return -1;
  }
  if (st.note) fprintf(stderr, "se3screen status: note: %s\n", st.note);
  struct status_reader sr = {.db = st.db};
  if (with_header) printf("%s\n", path);
  printf("  %-8s %13s %10s %10s %10s %11s  %s\n", "stage", "chunks", "planned", "stored", "rejected", "bytes/mol",
         "config");
  for (int i = 0; i < N_STAGES; i++) {
    const struct stage *s = all_stages[i];
    long long n_chunks = status_int(&sr, -1, "SELECT n_chunks FROM stage_state WHERE stage=%Q", s->name);
    if (n_chunks < 0) {
      printf("  %-8s %13s %10s %10s %10s %11s  %s\n", s->name, "-", "-", "-", "-", "-", "not run");
      continue;
    }
    long long n_done = status_int(&sr, 0, "SELECT count(*) FROM stage_chunks WHERE stage=%Q", s->name);
    long long n_items = status_int(&sr, 0, "SELECT n_items FROM stage_state WHERE stage=%Q", s->name);
    /* The last table of `tables` is the stage's main one (children come first). */
    const char *main_table = strrchr(s->tables, ' ') ? strrchr(s->tables, ' ') + 1 : s->tables;
    long long n_rows = status_int(&sr, 0, "SELECT count(*) FROM \"%w\"", main_table);
    long long n_rej = status_int(&sr, 0, "SELECT count(*) FROM rejects WHERE stage=%Q", s->name);
    const char *state = "unknown (give the workflow file)";
    char *settings = status_text(&sr, "SELECT settings_hash FROM stage_state WHERE stage=%Q", s->name);
    if (root) {
      char now[17];
      settings_hash(root, s, now);
      state = settings && !strcmp(settings, now) ? "unchanged" : "CHANGED: the next run redoes this stage";
    }
    char chunks[32], bytes[32] = "-";
    snprintf(chunks, sizeof chunks, "%lld/%lld", n_done, n_chunks);
    /* from the ledger: reading the blobs' sizes would read the tables */
    long long n_stored = status_int(&sr, 0, "SELECT sum(n_ok) FROM stage_chunks WHERE stage=%Q", s->name);
    if (s->blob_column && n_stored > 0)
      snprintf(bytes, sizeof bytes, "%.0f",
               (double)status_int(&sr, 0, "SELECT sum(n_bytes) FROM stage_chunks WHERE stage=%Q", s->name) /
                   (double)n_stored);
    printf("  %-8s %13s %10lld %10lld %10lld %11s  %s\n", s->name, chunks, n_items, n_rows, n_rej, bytes, state);
    free(settings);
  }
  /* (runs.job: schema version 4; an older database read as it is lacks it) */
  int has_job = status_int(&sr, 0, "SELECT count(*) FROM pragma_table_info('runs') WHERE name = 'job'") > 0;
  sqlite3_stmt *q = status_step_v(&sr,
                                  "SELECT id, started, coalesce(finished,''), status, coalesce(message,''), %s "
                                  "FROM runs ORDER BY id DESC LIMIT 1",
                                  has_job ? "coalesce(job,'')" : "''");
  if (q)
    printf("  last run: #%lld started %s, %s%s%s%s%s\n", (long long)sqlite3_column_int64(q, 0),
           sqlite3_column_text(q, 1), sqlite3_column_text(q, 3), *sqlite3_column_text(q, 2) ? ", finished " : "",
           sqlite3_column_text(q, 2), *sqlite3_column_text(q, 5) ? ", Slurm job " : "", sqlite3_column_text(q, 5));
  sqlite3_finalize(q);
  /* the latest run's error, and only when it failed: an error that a later
   * run got past is history (the runs table keeps it), not the state */
  char *last_err = status_text(&sr, "SELECT started || ': ' || message FROM (SELECT * FROM runs ORDER BY id DESC "
                                    "LIMIT 1) WHERE status<>'done' AND message IS NOT NULL AND message<>''");
  printf("  last error: %s\n", last_err ? last_err : "none");
  free(last_err);
  store_close(&st);
  if (sr.err[0]) {
    fprintf(stderr, "se3screen status: %s: cannot be read: %s\n", path, sr.err);
    return -1;
  }
  return 0;
}

int runner_status(const char *target, const char *const *sets, int n_sets) {
  struct cfg_node *root = NULL;
  char dbpath[PATH_MAX + 32];
  if (has_suffix(target, ".yaml") || has_suffix(target, ".yml")) {
    root = load_config(target, sets, n_sets, NULL, NULL);
    if (!root) return SE3_EXIT_USAGE;
    snprintf(dbpath, sizeof dbpath, "%s/screen.db", cfg_str(root, "workdir", "."));
  } else {
    struct stat sb;
    if (stat(target, &sb) == 0 && S_ISDIR(sb.st_mode))
      snprintf(dbpath, sizeof dbpath, "%s/screen.db", target);
    else
      snprintf(dbpath, sizeof dbpath, "%s", target);
  }
  int shown = 0, failed = 0, missing_errno = 0;
  struct stat sb;
  if (lstat(dbpath, &sb) == 0) {
    failed |= status_of_db(dbpath, root, 1) != 0;
    shown = 1;
  } else {
    missing_errno = errno;
  }
  int n = 0;
  char **shards = list_shards(dbpath, &n);
  for (int k = 0; k < n; k++) {
    failed |= status_of_db(shards[k], root, 1) != 0;
    free(shards[k]);
    shown = 1;
  }
  free(shards);
  cfg_node_free(root);
  if (!shown) {
    if (missing_errno == ENOENT)
      fprintf(stderr, "se3screen status: %s does not exist yet (nothing has run)\n", dbpath);
    else
      fprintf(stderr, "se3screen status: %s: %s\n", dbpath, strerror(missing_errno));
    return SE3_EXIT_FAILED;
  }
  return failed ? SE3_EXIT_FAILED : SE3_EXIT_OK;
}
