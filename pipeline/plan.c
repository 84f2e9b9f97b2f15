/* plan.c — what the next run would do, stage by stage, and why:
 * `se3screen run --dry-run`, and the "next run" lines of `status WORKFLOW`.
 *
 * Every stage is planned as `run` plans it (its begin, on the database
 * opened read-only, the input files read for their keys), and nothing is
 * written. Where a stage's work depends on what a stage before it will
 * make, the line says so rather than guess: train after ingest reads new
 * labels of its set retrains only if the labels it learns change, which
 * only that run can tell.
 *
 * A stage's verdict is one of: nothing to do; some of its rows (a keyed
 * stage's new or changed molecules; chunks left over); redone whole (its
 * settings, or what it reads whole, changed); or decided after the stage
 * before it. The stages after one with work carry what it changes on:
 * the sets whose molecules and whose labels change.
 */
#define _GNU_SOURCE
#include "pipeline/runner_internal.h"
#include "pipeline/ledger.h"

#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { P_NOTHING, P_SOME, P_MAYBE, P_WHOLE };

struct plan {
  struct run *r;
  FILE *out;
  int verdict[N_STAGES];
  int planned[N_STAGES];
  char chain[N_STAGES][17]; /* each stage's settings chain as the run will have it ("" unknown) */
  char hash[N_STAGES][17];  /* a non-keyed stage's config hash as it will be ("" unknown: it depends on the run) */
  /* what a stage changes, for those after it: sets whose molecules, and
   * whose labels only, change ("*": every set); space-separated */
  char mol_sets[N_STAGES][512], label_sets[N_STAGES][512];
  int n_work; /* stages with something to do */
};

static void say(struct plan *p, int i, int verdict, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void say(struct plan *p, int i, int verdict, const char *fmt, ...) {
  p->verdict[i] = verdict;
  p->planned[i] = 1;
  if (verdict != P_NOTHING) p->n_work++;
  char line[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  fprintf(p->out, "  %s: %s\n", run_all_stages[i]->name, line);
}

/* Whether the space-separated list has the set (or is "*"), and whether two lists meet. */
static int has_set(const char *list, const char *set) { return !strcmp(list, "*") || stage_word_listed(list, set); }
static void add_sets(char *to, size_t size, const char *from) {
  if (!strcmp(to, "*")) return;
  if (!strcmp(from, "*")) {
    snprintf(to, size, "*");
    return;
  }
  char *copy = strdup(from), *save = NULL;
  for (char *w = copy ? strtok_r(copy, " ", &save) : NULL; w; w = strtok_r(NULL, " ", &save))
    if (!has_set(to, w)) snprintf(to + strlen(to), size - strlen(to), "%s%s", to[0] ? " " : "", w);
  free(copy);
}
static const char *sets_words(const char *list, char *buf, size_t n) {
  if (!strcmp(list, "*"))
    snprintf(buf, n, "every set");
  else
    snprintf(buf, n, "%s %s", strchr(list, ' ') ? "sets" : "set", list);
  return buf;
}

/* Whether label changes (SET:LABEL words, or "*") touch a stage reading
 * `set` (NULL: every set) and `label` (NULL: any label of it). */
static int labels_touch(const char *list, const char *set, const char *label) {
  if (!list[0]) return 0;
  if (!strcmp(list, "*")) return 1;
  char *copy = strdup(list), *save = NULL;
  int hit = !copy;
  for (char *w = copy ? strtok_r(copy, " ", &save) : NULL; w && !hit; w = strtok_r(NULL, " ", &save)) {
    char *colon = strchr(w, ':');
    if (colon) *colon = 0;
    hit = (!set || !strcmp(w, set)) && (!label || (colon && !strcmp(colon + 1, label)));
  }
  free(copy);
  return hit;
}

/* The set a stage reads (struct stage_reads' set), NULL for every set. */
static const char *stage_set(const struct cfg_node *root, const struct stage *s) {
  return s->reads.set ? cfg_str(root, s->reads.set) : NULL;
}

/* Whether the stage's upstream records its rows' content row by row (its
 * chain, not its config hash, goes into this one's hashes). */
static int by_row(const struct cfg_node *root, int ui) {
  return ui >= 0 && (stage_is_keyed(run_all_stages[ui], root) || (run_all_stages[ui]->flags & STAGE_CONTENT_PER_ROW));
}

/* The hash the stage before this one (ui, named after) will have in the
 * run, as hex into out: its chain when it records its rows' content row
 * by row, else its config hash when it has nothing to do; "" when only the
 * run can tell. */
static void upstream_hex(struct plan *p, int ui, const char *after, char out[17]) {
  struct run *r = p->r;
  if (by_row(r->root, ui)) {
    snprintf(out, 17, "%s", p->planned[ui] ? p->chain[ui] : "");
    if (!p->planned[ui]) {
      struct ledger_stage up;
      ledger_read_stage(r->st.db, NULL, after, &up);
      snprintf(out, 17, "%.16s", up.chain_hash[0] ? up.chain_hash : up.config_hash);
    }
  } else if (!p->planned[ui] || p->hash[ui][0]) {
    struct ledger_stage up = {.found = 0};
    if (!p->planned[ui]) ledger_read_stage(r->st.db, NULL, after, &up);
    snprintf(out, 17, "%.16s", p->planned[ui] ? p->hash[ui] : up.config_hash);
  }
}

/* A keyed stage's verdict from its plan (ctx after begin): the stage's own
 * words (struct stage's explain) or the chunks it marked, then the
 * molecules new or changed upstream (up_mols: the sets they are in; NULL
 * for none). */
static void say_keyed(struct plan *p, int i, struct stage_ctx *ctx, int64_t planned_chunks, int64_t planned_items,
                      const char *set, const char *up_mols) {
  const struct stage *s = run_all_stages[i];
  char line[1536] = "", mols[512] = "", labels[512] = "", words[600];
  int64_t todo = 0, chunks = 0;
  for (int64_t c = 0; ctx->chunk_needed && c < planned_chunks; c++)
    chunks += ctx->chunk_needed[c] != 0;
  todo = planned_items - ctx->items_done;
  if (s->explain) {
    s->explain(ctx, line, sizeof line, mols, labels, sizeof mols);
  } else {
    if (todo > 0)
      snprintf(line, sizeof line, "%lld of %lld molecules to do (new or changed, or never done), in %lld chunk%s",
               (long long)todo, (long long)planned_items, (long long)chunks, chunks == 1 ? "" : "s");
    if (todo > 0) snprintf(mols, sizeof mols, "%s", set ? set : "*");
  }
  if (up_mols) {
    size_t o = strlen(line);
    snprintf(line + o, sizeof line - o, "%sthe molecules new or changed upstream (%s)", o ? "; then " : "",
             sets_words(set ? set : up_mols, words, sizeof words));
  }
  snprintf(p->mol_sets[i], sizeof p->mol_sets[i], "%s", mols);
  snprintf(p->label_sets[i], sizeof p->label_sets[i], "%s", labels);
  say(p, i, line[0] ? P_SOME : P_NOTHING, "%s", line[0] ? line : "nothing to do");
}

static void plan_stage(struct plan *p, int i) {
  struct run *r = p->r;
  const struct stage *s = run_all_stages[i];
  const char *after = run_upstream_of(r->root, s);
  int ui = after ? run_stage_index(after) : -1;
  int keyed = stage_is_keyed(s, r->root);
  const char *set = stage_set(r->root, s);
  char words[600];
  p->chain[i][0] = p->hash[i][0] = 0;
  p->mol_sets[i][0] = p->label_sets[i][0] = 0;
  struct ledger_stage old;
  ledger_read_stage(r->st.db, NULL, s->name, &old); /* (unread: as never run) */
  long long n_chunks = old.n_chunks, n_items = old.n_items;
  const char *old_chain = old.chain_hash[0] ? old.chain_hash : NULL,
             *old_hash = old.config_hash[0] ? old.config_hash : NULL,
             *old_settings = old.settings_hash[0] ? old.settings_hash : NULL;
  int up_v = ui >= 0 && p->planned[ui] ? p->verdict[ui] : P_NOTHING;
  /* what the stage before it changes that this one reads */
  char up_mols[512] = "", up_labels[512] = "";
  if (ui >= 0 && p->planned[ui]) {
    snprintf(up_mols, sizeof up_mols, "%s", p->mol_sets[ui]);
    snprintf(up_labels, sizeof up_labels, "%s", p->label_sets[ui]);
    /* labels a stage off the chain makes (dock's score) reach a stage that learns a label */
    for (int j = 0; s->reads.label && j < i; j++)
      add_sets(up_labels, sizeof up_labels, p->label_sets[j]);
  }
  int touches_mols = up_mols[0] && (!set || has_set(up_mols, set));
  const char *label = s->reads.label ? cfg_str_opt(r->root, s->reads.label) : NULL;
  int touches_labels = labels_touch(up_labels, set, label);
  /* the chain as the run will have it: known when the stage before it is
   * keyed (its chain known) or has nothing to do (its hash stands) */
  char up_hex[17] = "";
  if (ui >= 0) upstream_hex(p, ui, after, up_hex);
  int chain_known = ui < 0 || up_hex[0];
  if (chain_known) run_chain_hash(r->root, s, ui < 0 ? 0 : se3_hash_str(SE3_HASH_INIT, up_hex), p->chain[i]);
  char settings[17];
  run_settings_hash(r->root, s, settings);

  if (n_chunks < 0) {
    say(p, i, P_WHOLE, "not run yet: runs whole");
    snprintf(p->mol_sets[i], sizeof p->mol_sets[i], "*");
    snprintf(p->label_sets[i], sizeof p->label_sets[i], "*");
    goto out;
  }
  if (keyed && chain_known && old_chain && strcmp(old_chain, p->chain[i])) {
    say(p, i, P_WHOLE, "%s changed: redone whole (its %lld rows discarded)",
        old_settings && strcmp(old_settings, settings) ? "its settings" : "the settings of a stage before it", n_items);
    snprintf(p->mol_sets[i], sizeof p->mol_sets[i], "*");
    goto out;
  }
  if (keyed && !chain_known) {
    if (up_v == P_WHOLE)
      say(p, i, P_WHOLE, "redone whole: %s is redone, and %s depends on all of it", after, s->name);
    else
      say(p, i, P_MAYBE, "decided after %s: redone whole if %s is (%s depends on all of it)", after, after, s->name);
    snprintf(p->mol_sets[i], sizeof p->mol_sets[i], "%s", set ? set : "*");
    goto out;
  }
  int up_changes = touches_mols || touches_labels || (up_v != P_NOTHING && !up_mols[0] && !up_labels[0]);
  if (!keyed && up_changes) {
    /* what it reads will differ, or may: only the run can tell */
    if (up_v == P_WHOLE && (touches_mols || !up_mols[0]))
      say(p, i, P_WHOLE, "redone: %s is redone whole", after);
    else if (touches_mols || !up_labels[0])
      say(p, i, P_MAYBE, "decided when it runs: redone if what it reads of %s changes",
          set ? sets_words(set, words, sizeof words) : "every set");
    else if (label)
      say(p, i, P_WHOLE, "redone: the labels it learns change ('%s' in %s)", label,
          set ? sets_words(set, words, sizeof words) : "every set");
    else
      say(p, i, P_MAYBE, "decided when it runs: labels of %s change; redone if those it uses do",
          set ? sets_words(set, words, sizeof words) : "every set");
    snprintf(p->mol_sets[i], sizeof p->mol_sets[i], "%s", set ? set : "*");
    goto out;
  }
  /* Plan it as the run would, on the database as it is. */
  struct run_upstream up = {0, 0};
  if (ui >= 0 && run_check_upstream(r, s, &up)) {
    say(p, i, up_v == P_NOTHING ? P_WHOLE : up_v, "runs after %s (%s)", after, se3_error_str(&r->err).s);
    r->err.message[0] = 0;
    goto out;
  }
  struct run_ctx rc;
  run_ctx_init(&rc, r, s, &ledger_stage_reads);
  rc.ctx.report = &run_quiet_report;
  int64_t planned_chunks = 0, planned_items = 0;
  if (run_begin(&rc.ctx, s, &planned_chunks, &planned_items) != STAGE_OK) {
    say(p, i, P_MAYBE, "cannot be planned now: %s", se3_error_str(&rc.ctx.err).s);
    run_end(&rc.ctx, s);
    goto out;
  }
  char hash[17], chain[17];
  run_stage_hashes(r->root, s, rc.ctx.inputs_hash, &up, hash, chain);
  if (keyed) {
    say_keyed(p, i, &rc.ctx, planned_chunks, planned_items, set, touches_mols ? up_mols : NULL);
  } else if (!old_hash || strcmp(old_hash, hash)) {
    say(p, i, P_WHOLE, "redone: %s changed since the last run",
        old_settings && strcmp(old_settings, settings) ? "its settings" : "what it is made from");
    snprintf(p->mol_sets[i], sizeof p->mol_sets[i], "%s", set ? set : "*");
  } else {
    long long done = ledger_chunk_count(r->st.db, NULL, s->name, hash, 0), fin = old.finalized;
    if (done < 0) done = 0;
    memcpy(p->hash[i], hash, 17);
    if (done > 0 && rc.ctx.outputs_gone)
      say(p, i, P_WHOLE, "redone: %s is gone from the workdir, and the stage writes it", rc.ctx.outputs_gone);
    else if (done < planned_chunks)
      say(p, i, P_SOME, "%lld of %lld chunks left from a run that stopped", (long long)(planned_chunks - done),
          (long long)planned_chunks);
    else if (!fin)
      say(p, i, P_SOME, "its chunks are done; it finishes");
    else
      say(p, i, P_NOTHING, "nothing to do");
    if (p->verdict[i] != P_NOTHING) snprintf(p->mol_sets[i], sizeof p->mol_sets[i], "%s", set ? set : "*");
  }
  run_end(&rc.ctx, s);
out:
  /* what the stages before it change goes on to those after it */
  add_sets(p->mol_sets[i], sizeof p->mol_sets[i], up_mols);
  add_sets(p->label_sets[i], sizeof p->label_sets[i], up_labels);
}

int run_plan_print(struct run *r, int first, int last, int explicit_stage, FILE *out) {
  struct plan *p = calloc(1, sizeof *p);
  if (!p) return -1;
  p->r = r;
  p->out = out;
  for (int i = first; i <= last; i++) {
    if (run_stage_skipped(r->root, run_all_stages[i]) && !(explicit_stage && i == first)) continue;
    plan_stage(p, i);
  }
  if (!p->n_work) fprintf(out, "  (a run now would change nothing)\n");
  free(p);
  return 0;
}

int runner_dry_run(const struct run_opts *o) {
  struct run r;
  memset(&r, 0, sizeof r);
  r.o = o;
  r.src = "main";
  r.n_shards = 1;
  int first, last;
  if (run_stage_range(o, &first, &last)) return SE3_EXIT_USAGE;
  if (o->n_shards > 0) {
    fprintf(stderr, "se3screen run: --dry-run tells what an unsharded run would do: leave out --shard\n");
    return SE3_EXIT_USAGE;
  }
  /* refused as `run` refuses, every problem in one list: the configuration,
   * the input files of the stages that may run, their columns, tags and sets */
  char names[256] = "";
  for (int i = first; i <= last; i++)
    snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i > first ? " " : "",
             run_all_stages[i]->name);
  r.root =
      run_load_one_pass(o->workflow, o->sets, o->n_sets, o->workdir, names, NULL, first, last, o->stage != NULL, 0);
  if (!r.root) return SE3_EXIT_USAGE;
  if (!o->stage) last = run_last_configured(r.root, first, last);
  run_stage_names(r.root, first, last, o->stage != NULL, names, sizeof names);
  if (run_check_input_files(r.root, names, o->workflow)) {
    cfg_node_free(r.root);
    return SE3_EXIT_USAGE;
  }
  snprintf(r.workdir, sizeof r.workdir, "%s", cfg_str(r.root, "workdir"));
  char tmp[PATH_MAX];
  snprintf(r.workflow_dir, sizeof r.workflow_dir, "%s", realpath(o->workflow, tmp) ? dirname(tmp) : ".");
  char dbpath[PATH_MAX + 32];
  snprintf(dbpath, sizeof dbpath, "%s/screen.db", r.workdir);
  int ret = SE3_EXIT_OK;
  printf("se3screen run --dry-run %s: what a run would do now (nothing is written)\n", o->workflow);
  if (access(dbpath, F_OK) != 0) {
    printf("  %s does not exist yet: the run makes it and runs every stage whole\n", dbpath);
  } else if (ledger_open_ro(&r.st, dbpath, r.root, &r.err)) {
    fprintf(stderr, "se3screen: %s\n", se3_error_str(&r.err).s);
    ret = SE3_EXIT_FAILED;
  } else {
    long long ver = run_query_int(r.st.db, 0, "PRAGMA user_version");
    if (ver < STORE_SCHEMA_VERSION)
      printf("  %s was made by an earlier se3screen (schema %lld, this one writes %d): see `se3screen upgrade`\n",
             dbpath, ver, STORE_SCHEMA_VERSION);
    else if (run_check_owner(&r, o->workflow)) {
      printf("  a run would be refused: %s\n", se3_error_str(&r.err).s);
      ret = SE3_EXIT_USAGE;
    } else
      run_plan_print(&r, first, last, o->stage != NULL, stdout);
    store_close(&r.st);
  }
  cfg_node_free(r.root);
  return ret;
}
