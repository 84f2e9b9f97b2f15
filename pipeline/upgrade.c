/* upgrade.c — `se3screen upgrade WORKDIR|DB`: a database an earlier
 * se3screen wrote, converted in place to this one's schema, keeping its
 * work where it can and saying plainly what the next run redoes.
 *
 * `run` and `merge` refuse such a database (store.c); `status`, `query`,
 * `top` and `report` read it as it is. Upgrade takes the lock, then migrates the
 * schema (store.c's migrations, in one transaction), and then, in a second
 * one, lets each stage convert what it stored (struct stage's `upgrade`):
 * ingest, keyed by input file since schema 9, keeps the ids an earlier
 * se3screen gave (the input's place + 1) for the files it read and lists
 * their parts as read, provided the files and the workflow are those the
 * stored molecules came from: its hash as that se3screen computed it
 * (settings, sets and the files' contents) must equal the stored one, and
 * its last run must have finished. Otherwise nothing of ingest is
 * converted and the next run reads every file again. The workflow comes
 * from the database (meta: the last run's workflow file and --set
 * overrides) unless given. Then the next run's plan (plan.c) is printed.
 */
#define _GNU_SOURCE
#include "pipeline/runner_internal.h"
#include "pipeline/ledger.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The stage's hash as an earlier se3screen gave it, from a legacy inputs
 * fingerprint: its settings (with the sets), the inputs, and no upstream. */
static void legacy_hash(const struct cfg_node *root, const struct stage *s, uint64_t legacy, char out[17]) {
  char settings[17], with_inputs[17];
  run_settings_hash(root, s, settings);
  run_fold_hash(settings, legacy, with_inputs);
  run_fold_hash(with_inputs, 0, out);
}

/* One stage's conversion, inside the migration's transaction: kept when
 * its last run finished and its hash as the earlier se3screen computed it
 * is the stored one, and then stored with this se3screen's hashes. 0, or
 * -1 when it failed (said, and the transaction rolled back). */
static int upgrade_stage(struct run *r, const struct stage *s) {
  struct ledger_stage was;
  if (ledger_read_stage(r->st.db, NULL, s->name, &was) < 0) {
    ledger_read_failed(r, NULL, s->name);
    fprintf(stderr, "se3screen upgrade: %s\n", se3_error_str(&r->err).s);
    sqlite3_exec(r->st.db, "ROLLBACK", NULL, NULL, NULL);
    return -1;
  }
  const char *old = was.config_hash;
  long long fin = was.finalized;
  if (!old[0]) { /* never run: nothing to convert */
    return 0;
  }
  struct run_ctx rc;
  run_ctx_init(&rc, r, s, &ledger_stage_reads);
  int64_t n_chunks = 0, n_items = 0;
  uint64_t legacy = 0;
  char note[512] = "", then[17];
  int st = run_begin(&rc.ctx, s, &n_chunks, &n_items);
  if (st == STAGE_OK) st = s->upgrade(&rc.ctx, 0, &legacy, note, sizeof note);
  legacy_hash(r->root, s, legacy, then);
  int current = st == STAGE_OK && fin == 1 && !strcmp(then, old);
  if (st == STAGE_OK && current) st = s->upgrade(&rc.ctx, 1, &legacy, note, sizeof note);
  if (st == STAGE_OK && current) {
    /* its hashes as this se3screen gives them (the plan's inputs: ingest's keys) */
    struct run_upstream up = {0, 0};
    char hash[17], chain[17], settings[17];
    if (run_upstream_of(r->root, s) && run_check_upstream(r, s, &up)) {
      st = STAGE_ERROR;
      se3_error_set(&rc.ctx.err, SE3_ERR_DB, "%.1000s", se3_error_str(&r->err).s);
    } else {
      run_settings_hash(r->root, s, settings);
      run_stage_hashes(r->root, s, rc.ctx.inputs_hash, &up, hash, chain);
      if (ledger_restate(r, s->name, hash, settings, chain, n_chunks, n_items)) {
        st = STAGE_ERROR;
        se3_error_set(&rc.ctx.err, SE3_ERR_DB, "%.1000s", se3_error_str(&r->err).s);
      }
    }
  }
  run_end(&rc.ctx, s);
  if (st != STAGE_OK) {
    fprintf(stderr, "se3screen upgrade: %s: %s\n", s->name, se3_error_str(&rc.ctx.err).s);
    sqlite3_exec(r->st.db, "ROLLBACK", NULL, NULL, NULL);
    return -1;
  }
  if (current)
    printf("  %s: %s\n", s->name, note);
  else
    printf("  %s: %s: nothing kept; the next run does it again and redoes what was made of it\n", s->name,
           fin != 1 ? "its last run did not finish" : "its input files or the workflow changed since its last run");
  return 0;
}

/* The stages' conversions and the commit of the migration's transaction;
 * without a workflow (wf: the one named), nothing is converted. 0, or -1
 * when it failed (said). */
static int upgrade_convert(struct run *r, const char *wf) {
  if (!r->root) {
    printf("  ingest: the workflow it was made with (%s) cannot be read: nothing kept; the next run reads every "
           "input file again and redoes what was made of them\n",
           wf ? wf : "not recorded");
    if (run_exec(r, "COMMIT")) {
      fprintf(stderr, "se3screen upgrade: %s\n", se3_error_str(&r->err).s);
      return -1;
    }
    return 0;
  }
  for (int i = 0; i < N_STAGES; i++) {
    const struct stage *s = run_all_stages[i];
    if (!s->upgrade) continue;
    if (upgrade_stage(r, s)) return -1;
  }
  if (run_exec(r, "COMMIT")) {
    fprintf(stderr, "se3screen upgrade: %s\n", se3_error_str(&r->err).s);
    sqlite3_exec(r->st.db, "ROLLBACK", NULL, NULL, NULL);
    return -1;
  }
  return 0;
}

int runner_upgrade(const char *target, const char *workflow_arg, const char *const *sets_arg, int n_sets_arg) {
  char dbpath[PATH_MAX + 32];
  struct stat sb;
  if (stat(target, &sb) == 0 && S_ISDIR(sb.st_mode))
    snprintf(dbpath, sizeof dbpath, "%s/screen.db", target);
  else
    snprintf(dbpath, sizeof dbpath, "%s", target);
  if (access(dbpath, F_OK) != 0) {
    fprintf(stderr, "se3screen upgrade: %s: %s\n", dbpath, strerror(errno));
    return SE3_EXIT_FAILED;
  }
  /* What it is, read-only first: a database of this version is left alone. */
  struct store ro;
  struct se3_error err;
  if (ledger_open_ro(&ro, dbpath, NULL, &err)) {
    fprintf(stderr, "se3screen upgrade: %s\n", se3_error_str(&err).s);
    return SE3_EXIT_FAILED;
  }
  long long ver = run_query_int(ro.db, 0, "PRAGMA user_version");
  char *workflow = workflow_arg ? NULL : run_query_text(ro.db, "SELECT value FROM meta WHERE key='workflow'");
  char *sets = workflow_arg ? NULL : run_query_text(ro.db, "SELECT value FROM meta WHERE key='sets'");
  store_close(&ro);
  if (ver >= STORE_SCHEMA_VERSION) {
    /* a run (or another upgrade) at work on it is named, not taken for a
     * database with nothing to do: the lock, taken and let go */
    struct store lk;
    memset(&lk, 0, sizeof lk);
    lk.lock_fd = -1;
    lk.path = strdup(dbpath);
    int held = !lk.path ? (se3_error_set(&err, SE3_ERR_MEMORY, "out of memory"), 1) : store_lock(&lk, &err) != 0;
    store_close(&lk);
    if (held) {
      fprintf(stderr, "se3screen upgrade: %s\n", se3_error_str(&err).s);
      free(workflow);
      free(sets);
      return SE3_EXIT_FAILED;
    }
    printf("se3screen upgrade: %s is of this se3screen's schema (version %d): nothing to do\n", dbpath,
           STORE_SCHEMA_VERSION);
    free(workflow);
    free(sets);
    return SE3_EXIT_OK;
  }
  struct run r;
  memset(&r, 0, sizeof r);
  r.src = "main";
  r.n_shards = 1;
  r.st.lock_fd = -1;
  {
    char dir[PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s", dbpath);
    snprintf(r.workdir, sizeof r.workdir, "%s", dirname(dir));
  }
  const char *wf = workflow_arg ? workflow_arg : workflow;
  const char *setv[64];
  int n_set = 0;
  if (workflow_arg) {
    for (int i = 0; i < n_sets_arg && i < 64; i++)
      setv[n_set++] = sets_arg[i];
  } else {
    for (char *save = NULL, *t = sets ? strtok_r(sets, "\n", &save) : NULL; t && n_set < 64;
         t = strtok_r(NULL, "\n", &save))
      setv[n_set++] = t;
  }
  int ret = SE3_EXIT_FAILED;
  if (wf && access(wf, R_OK) == 0) {
    r.root = run_load_config(wf, setv, n_set, r.workdir, "");
    char tmp[PATH_MAX];
    snprintf(r.workflow_dir, sizeof r.workflow_dir, "%s", realpath(wf, tmp) ? dirname(tmp) : ".");
  }
  /* The lock before the migration: another upgrade (or run) at work on it
   * is refused by its holder's name, never waited for and then taken for
   * a database of this schema with nothing of its work to keep. */
  if (store_open_locked(&r.st, dbpath, STORE_UPGRADE,
                        r.root ? cfg_str(r.root, "store.journal") : cfg_schema_default("store.journal"),
                        cfg_busy_timeout_ms(r.root), &r.err)) {
    fprintf(stderr, "se3screen upgrade: %s\n", se3_error_str(&r.err).s);
    goto out;
  }
  /* The migration's transaction is open (store.h): each stage converts
   * what it stored in it, and the schema and the conversion land together
   * (a kill leaves the database as it was). None is open when there was
   * nothing to migrate: another upgrade finished between the look above
   * and the lock. */
  if (sqlite3_get_autocommit(r.st.db)) {
    printf("se3screen upgrade: %s is of this se3screen's schema (version %d) now, upgraded meanwhile: nothing to "
           "do\n",
           dbpath, STORE_SCHEMA_VERSION);
    ret = SE3_EXIT_OK;
    goto out;
  }
  printf("se3screen upgrade: %s: schema version %lld -> %d\n", dbpath, ver, STORE_SCHEMA_VERSION);
  if (upgrade_convert(&r, wf)) goto out;
  if (r.root) {
    printf("the next run (as `se3screen run %s --dry-run` says it):\n", wf);
    run_plan_print(&r, 0, run_last_configured(r.root, 0, N_STAGES - 1), 0, stdout);
  }
  ret = SE3_EXIT_OK;
out:
  store_close(&r.st);
  cfg_node_free(r.root);
  free(workflow);
  free(sets);
  return ret;
}
