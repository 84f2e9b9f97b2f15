/* merge.c — shard databases folded into the workdir's: the processes' of a
 * data-parallel run at the end of a stage they shared, a Slurm array's or
 * --shard's by `se3screen merge` (only the shards of this workflow as it is
 * now; the others are named and kept), idempotently: rows are keyed alike in
 * every shard and copied with INSERT OR REPLACE in one transaction a shard.
 */
#define _GNU_SOURCE
#include "pipeline/runner_internal.h"
#include "pipeline/ledger.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- stages shared by the processes of a data-parallel run --------------- */

/* Process `rank`'s database for stage `stage` (struct stage's `spread`). */
void run_rank_db_path(char *out, size_t n, const char *workdir, const char *stage, int rank) {
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
int run_fold_rank_shards(struct run *r, const struct stage *s, const char *hash, const char *why) {
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

/* 1 when the attached shard was folded into main already and holds nothing
 * new: every ledger row of its stage is in main as it is in the shard, under
 * the same configuration, and (score) under the same stages.score.merge
 * choice as now. Then merging it again would rewrite the same rows: a
 * workdir's merge job after each array folds every shard in shards/, and
 * refolding the earlier stages' cost as much as folding them the first time.
 * -1 with r->err set on an error. */
static int already_folded(struct run *r, const struct stage *s) {
  int news = ledger_shard_has_news(r, s->name);
  if (news < 0) return -1;
  if (news) return 0;
  long long n = ledger_chunk_count(r->st.db, "shard", s->name, NULL, 0);
  if (n < 0) return ledger_read_failed(r, "shard", s->name);
  if (n == 0) return 0;
  /* a stage with a fold of its own (score): only when its rows were kept as they would be now */
  return !s->merge.folded_as_now || r->folded_as_now[run_stage_index(s->name)];
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
  if (ledger_open_ro(&sh, path, r->root, &r->err)) return -2;
  char *stage = run_query_text(sh.db, "SELECT value FROM meta WHERE key='stage'");
  struct ledger_stage its;
  if (!stage || ledger_read_stage(sh.db, NULL, stage, &its) < 0) its.config_hash[0] = 0;
  const char *hash = its.config_hash;
  if (workflow && !*workflow) *workflow = run_query_text(sh.db, "SELECT value FROM meta WHERE key='workflow'");
  if (sets && !*sets) *sets = run_query_text(sh.db, "SELECT value FROM meta WHERE key='sets'");
  store_close(&sh);
  int si = stage ? run_stage_index(stage) : -1;
  if (si < 0 || !hash[0] || (want_hash && (strcmp(stage, want_stage) || strcmp(hash, want_hash)))) {
    /* A shard that never got as far as planning holds nothing to merge. */
    free(stage);
    return -1;
  }
  free(stage);
  const struct stage *s = run_all_stages[si];
  if (run_exec(r, "ATTACH %Q AS shard", path)) return -2;
  if (run_exec(r, "BEGIN IMMEDIATE")) goto detach;
  if (!want_hash) {
    int done = already_folded(r, s);
    if (done < 0) goto rollback;
    if (done) { /* nothing new: a merge run again, or the next stage's merge */
      struct ledger_stage main_state;
      int found = ledger_read_stage(r->st.db, "main", s->name, &main_state);
      if (found < 0) {
        ledger_read_failed(r, "main", s->name);
        goto rollback;
      }
      int finalized = found && main_state.finalized == 1;
      if (run_exec(r, "COMMIT")) goto rollback;
      run_exec(r, "DETACH shard");
      return finalized ? -3 : si;
    }
  }
  struct ledger_stage m, t;
  if (ledger_read_stage(r->st.db, "main", s->name, &m) < 0) {
    ledger_read_failed(r, "main", s->name);
    goto rollback;
  }
  if (ledger_read_stage(r->st.db, "shard", s->name, &t) < 0) {
    ledger_read_failed(r, "shard", s->name);
    goto rollback;
  }
  const char *mine = m.config_hash[0] ? m.config_hash : NULL, *theirs = t.config_hash[0] ? t.config_hash : NULL;
  int same_chain = m.chain_hash[0] && t.chain_hash[0] && !strcmp(m.chain_hash, t.chain_hash);
  if (mine && theirs && strcmp(mine, theirs) && same_chain && stage_is_keyed(s, r->root)) {
    /* A keyed stage whose hash screen.db has from when it was not keyed
     * (score under merge: hits) or from an earlier se3screen, with the
     * same settings: its rows stay (each says what it was made from), the
     * old ledger goes, and the stages after it run again before anything
     * reads them. */
    if (ledger_take_shard_plan(r, s->name, theirs) || run_unfinish_after(r, si)) goto rollback;
  } else if (mine && theirs && strcmp(mine, theirs)) {
    /* (merge_verdict let only a shard of the workflow as it is now come here:
     * screen.db's stage is the one from before the change, as `run` would
     * find it) */
    char down[256] = "";
    for (int i = si + 1; i < N_STAGES; i++)
      snprintf(down + strlen(down), sizeof down - strlen(down), "%s%s", i > si + 1 ? ", " : "",
               run_all_stages[i]->name);
    progress_log(NULL,
                 "%s: %s holds this stage as made before the workflow changed; replacing it with the shards made "
                 "with the workflow as it is now, starting with %s%s%s",
                 s->name, r->st.path, path, down[0] ? ", and discarding the stages after it: " : "", down);
    if (run_clear_from(r, si)) goto rollback;
  } else if (!mine) {
    if (run_clear_from(r, si + 1)) goto rollback;
  }
  /* `merge` of a shard of a stage with a fold of its own (score under
   * stages.score.merge: hits folds only the shard's candidates for rank's
   * hits) */
  int kept = 0;
  struct stage_fold f = {.db = r->st.db, .db_path = r->st.path, .root = r->root, .ledger = &ledger_stage_reads};
  if (!want_hash && s->merge.fold && (kept = s->merge.fold(&f)) < 0) {
    r->err = f.err; /* (its kind and text as the fold said them) */
    goto rollback;
  }
  /* Rows are keyed identically in every shard, so OR REPLACE makes this idempotent. */
  /* `tables` lists children first (for deleting); insert parents first. */
  char *tables = strdup(s->tables), *tok[16];
  int n_tok = 0, bad = !tables;
  for (char *save = NULL, *t = tables ? strtok_r(tables, " ", &save) : NULL; t && n_tok < 16;
       t = strtok_r(NULL, " ", &save))
    tok[n_tok++] = t;
  for (int t = n_tok - 1; t >= 0 && !bad && !kept; t--)
    bad = run_exec(r, "INSERT OR REPLACE INTO main.\"%w\" SELECT * FROM shard.\"%w\"", tok[t], tok[t]);
  free(tables);
  if (!bad && kept) progress_log(NULL, "%s: %s", path, f.note);
  /* (a shard made before schema version 4 has no runs.job, one made before
   * version 7 no rejects.atom and rejects.detail) */
  int has_job =
      run_query_int(r->st.db, 0, "SELECT count(*) FROM pragma_table_info('runs', 'shard') WHERE name = 'job'") > 0;
  int has_detail =
      run_query_int(r->st.db, 0, "SELECT count(*) FROM pragma_table_info('rejects', 'shard') WHERE name = 'detail'") >
      0;
  int has_mol_hash =
      run_query_int(r->st.db, 0, "SELECT count(*) FROM pragma_table_info('rejects', 'shard') WHERE name = 'mol_hash'") >
      0;
  if (bad ||
      run_exec(r,
               "INSERT OR REPLACE INTO main.rejects(stage,set_name,source_file,record_no,line,name,chunk,reason,atom,"
               "detail,mol_id,mol_hash) SELECT stage,set_name,source_file,record_no,line,name,chunk,reason,%s,%s "
               "FROM shard.rejects WHERE stage=%Q;"
               "INSERT INTO main.runs(started,finished,host,pid,command,workflow,shard,status,exit_code,message,"
               "version,job) SELECT started,finished,host,pid,command,workflow,shard,status,exit_code,message,version,"
               "%s FROM shard.runs WHERE (started,host,pid) NOT IN (SELECT started,host,pid FROM main.runs)",
               has_detail ? "atom,detail" : "NULL,NULL", has_mol_hash ? "mol_id,mol_hash" : "NULL,NULL", s->name,
               has_job ? "job" : "NULL") ||
      /* its chunks, its state and its time in the stage */
      ledger_fold_shard(r, s->name) || run_exec(r, "COMMIT"))
    goto rollback;
  run_exec(r, "DETACH shard");
  return si;
rollback:
  sqlite3_exec(r->st.db, "ROLLBACK", NULL, NULL, NULL);
detach:
  sqlite3_exec(r->st.db, "DETACH shard", NULL, NULL, NULL);
  return -2;
}

/* ---- merge ----------------------------------------------------------------- */

static int has_suffix(const char *s, const char *suf) {
  size_t a = strlen(s), b = strlen(suf);
  return a >= b && !strcmp(s + a - b, suf);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Shard databases beside db_path, sorted. */
char **run_list_shards(const char *db_path, int *n) {
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
static int expected_hash(struct run *r, const struct stage *s, char out[17], char chain[17], char *note,
                         size_t notelen) {
  int how = run_merge_hash(s, r->root);
  if (how == STAGE_HASH_UNKNOWN) {
    snprintf(note, notelen, "the %s stage's inputs are not fingerprinted by merge", s->name);
    return 0;
  }
  struct run_upstream up;
  if (run_check_upstream(r, s, &up)) {
    snprintf(note, notelen, "%.500s", se3_error_str(&r->err).s);
    r->err.message[0] = 0;
    return 0;
  }
  uint64_t inputs = 0;
  /* (a keyed stage's hash is its chain, and with STAGE_HASH_FILES its files') */
  if ((how == STAGE_HASH_PLANNED && !stage_is_keyed(s, r->root)) || how == STAGE_HASH_FILES) {
    struct run_ctx rc;
    run_ctx_init(&rc, r, s, &ledger_stage_reads);
    int64_t n_chunks = 0, n_items = 0;
    int st = run_begin(&rc.ctx, s, &n_chunks, &n_items);
    inputs = rc.ctx.inputs_hash;
    if (st != STAGE_OK) snprintf(note, notelen, "planning %s: %.400s", s->name, se3_error_str(&rc.ctx.err).s);
    run_end(&rc.ctx, s);
    if (st != STAGE_OK) return 0;
  }
  run_stage_hashes(r->root, s, inputs, &up, out, chain);
  return 1;
}

/* What `merge` holds a shard to: the workflow of this workdir, and the
 * configuration it has now. */
struct merge_ref {
  const char *workflow; /* screen.db's meta, or the first shard's; NULL: unknown */
  char expected[N_STAGES][17];
  char chain[N_STAGES][17]; /* the settings chain: what a keyed stage's shard is held to */
  int known[N_STAGES];      /* 0 not asked yet, 1 expected[] holds it, -1 unknown (note[]) */
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
  struct se3_error err;
  if (ledger_open_ro(&sh, path, r->root, &err)) {
    snprintf(why, whylen, "it cannot be read: %.1000s", se3_error_str(&err).s);
    return 0;
  }
  char *stage = run_query_text(sh.db, "SELECT value FROM meta WHERE key='stage'");
  struct ledger_stage its, mine;
  if (!stage || ledger_read_stage(sh.db, NULL, stage, &its) < 0) memset(&its, 0, sizeof its);
  const char *hash = its.config_hash[0] ? its.config_hash : NULL;
  const char *settings = its.settings_hash[0] ? its.settings_hash : NULL;
  const char *chain = its.chain_hash[0] ? its.chain_hash : NULL;
  char *workflow = run_query_text(sh.db, "SELECT value FROM meta WHERE key='workflow'");
  char *shard = run_query_text(sh.db, "SELECT value FROM meta WHERE key='shard'");
  store_close(&sh);
  int si = stage ? run_stage_index(stage) : -1, ret = 1;
  if (si < 0 || !hash || !settings) goto out; /* never planned a stage: nothing to fold */
  const struct stage *s = run_all_stages[si];
  if (ledger_read_stage(r->st.db, "main", s->name, &mine) < 0) mine.config_hash[0] = 0;
  int differs = mine.config_hash[0] && strcmp(mine.config_hash, hash);
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
  run_settings_hash(r->root, s, now);
  if (strcmp(settings, now)) {
    snprintf(why, whylen,
             "it was made with another configuration of stage %s than %s has now (a stale shard, from before "
             "the workflow changed)",
             s->name, ref->workflow ? ref->workflow : "the workflow");
    ret = 0;
    goto out;
  }
  if (!ref->known[si])
    ref->known[si] =
        expected_hash(r, s, ref->expected[si], ref->chain[si], ref->note[si], sizeof ref->note[si]) == 1 ? 1 : -1;
  const char *after = run_upstream_of(r->root, s);
  /* a keyed stage's rows each name what they were made from, and its hash
   * names the plan of the moment: its shard is held to its settings chain */
  int keyed = stage_is_keyed(s, r->root) && run_merge_hash(s, r->root) != STAGE_HASH_UNKNOWN &&
              run_merge_hash(s, r->root) != STAGE_HASH_FILES;
  if (ref->known[si] == 1 && (keyed ? !chain || strcmp(chain, ref->chain[si]) : strcmp(hash, ref->expected[si]))) {
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
             run_all_stages[si]->name, shard);
  }
  free(stage);
  free(workflow);
  free(shard);
  return ret;
}

/* The meta value `key` of the se3screen database at path, NULL when it has
 * none (or is no such database: opening it read-only changes nothing). */
static char *db_meta(const char *path, const char *key) {
  struct store st;
  if (access(path, F_OK) != 0 || ledger_open_ro(&st, path, NULL, NULL)) return NULL;
  char *v = run_query_text(st.db, "SELECT value FROM meta WHERE key=%Q", key);
  store_close(&st);
  return v;
}

int runner_merge(const char *db_path) {
  char *workflow = NULL, *sets = NULL;
  struct run r;
  memset(&r, 0, sizeof r);
  r.n_shards = 1;
  r.src = "main";
  run_hostname(r.host, sizeof r.host);
  int n = 0;
  char **shards = run_list_shards(db_path, &n);
  if (n == 0) {
    fprintf(stderr, "se3screen merge: no shard databases (shards/*.db) beside %s\n", db_path);
    return SE3_EXIT_USAGE;
  }
  int ret = SE3_EXIT_FAILED, refused = 0, from_shard = 0;
  char *sets_text = NULL;
  struct merge_ref *ref = calloc(1, sizeof *ref);
  if (!ref) {
    se3_error_set(&r.err, SE3_ERR_MEMORY, "out of memory");
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
    r.root = run_load_config(workflow, setv, n_set, r.workdir, NULL);
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", workflow);
    snprintf(r.workflow_dir, sizeof r.workflow_dir, "%s", dirname(tmp));
  }
  /* the workflow's journal mode (delete on NFS/Lustre); the lock first, so
   * that a database another run writes is refused naming its holder */
  if (store_open_locked(
          &r.st, db_path, STORE_WRITE, r.root ? cfg_str(r.root, "store.journal") : cfg_schema_default("store.journal"),
          r.root ? (int)cfg_int(r.root, "store.busy_timeout_ms") : atoi(cfg_schema_default("store.busy_timeout_ms")),
          &r.err))
    goto done;
  for (int i = 0; i < N_STAGES; i++)
    r.folded_as_now[i] =
        run_all_stages[i]->merge.folded_as_now && run_all_stages[i]->merge.folded_as_now(r.st.db, r.root);
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
      run_exec(&r, "INSERT OR IGNORE INTO meta VALUES('workflow',%Q),('name',%Q),('sets',%Q)", workflow,
               r.root ? cfg_str(r.root, "workflow") : NULL, sets_text ? sets_text : ""))
    goto done;
  /* Finalize the stages whose chunks are now all here. */
  for (int si = 0; si < N_STAGES; si++) {
    if (!touched[si]) continue;
    const struct stage *s = run_all_stages[si];
    struct ledger_stage state;
    if (ledger_read_stage(r.st.db, NULL, s->name, &state) < 0) {
      ledger_read_failed(&r, NULL, s->name);
      goto done;
    }
    long long n_chunks = state.n_chunks, n_done = ledger_chunk_count(r.st.db, NULL, s->name, NULL, 0);
    if (n_done < 0) {
      ledger_read_failed(&r, NULL, s->name);
      goto done;
    }
    if (n_done < n_chunks) {
      progress_log(NULL, "%s: %lld of %lld chunks merged; run the missing shards and merge again", s->name, n_done,
                   n_chunks);
      continue;
    }
    if (!s->finalize) {
      if (ledger_set_finalized(&r, s->name, 1)) goto done;
      continue;
    }
    if (!r.root) {
      se3_error_set(&r.err, SE3_ERR_RUN, "cannot load the workflow %s the shards were made from",
                    workflow ? workflow : "?");
      goto done;
    }
    struct run_ctx rc;
    run_ctx_init(&rc, &r, s, &ledger_stage_reads);
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
  if (ret != SE3_EXIT_OK && r.err.message[0]) fprintf(stderr, "se3screen merge: %s\n", se3_error_str(&r.err).s);
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
