/* test_config.c — the configuration tree, workflow loading and validation,
 * error locations, overrides, printing and the stage hash. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "chem/records.h"
#include "pipeline/config.h"
#include "tests/testutil.h"

/* ---- helpers ---------------------------------------------------------------- */

/* Every message, one a line, for assertion output (malloc'd). */
static char *joined(const struct cfg_errors *e) {
  size_t len = 1;
  for (int i = 0; i < e->n; i++)
    len += strlen(e->msgs[i]) + 1;
  char *s = calloc(1, len), *end = s;
  for (int i = 0; i < e->n; i++) {
    end = stpcpy(end, e->msgs[i]);
    end = stpcpy(end, "\n");
  }
  return s;
}

/* Asserts that one message equals the formatted text exactly. */
__attribute__((format(printf, 2, 3))) static void expect_msg(const struct cfg_errors *e, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *want = NULL;
  cr_assert_geq(vasprintf(&want, fmt, ap), 0);
  va_end(ap);
  int found = 0;
  for (int i = 0; i < e->n; i++)
    found |= strcmp(e->msgs[i], want) == 0;
  char *all = joined(e);
  cr_assert(found, "missing error\n  %s\namong\n%s", want, all);
  free(all);
  free(want);
}

/* Writes `text` as dir/name and loads it; the path is returned in *path. */
static struct cfg_node *load_text(const char *dir, const char *name, const char *text, const char *const *sets,
                                  int n_sets, struct cfg_errors *e, char **path) {
  char *p = tu_write(dir, name, text);
  cr_assert_not_null(p);
  struct cfg_node *r = cfg_load(p, sets, n_sets, e);
  if (path)
    *path = p;
  else
    free(p);
  return r;
}

/* Loads a workflow that must be valid. */
static struct cfg_node *load_ok(const char *dir, const char *name, const char *text, const char *const *sets,
                                int n_sets) {
  struct cfg_errors e = {0};
  struct cfg_node *r = load_text(dir, name, text, sets, n_sets, &e, NULL);
  char *all = joined(&e);
  cr_assert_not_null(r, "unexpected errors:\n%s", all);
  cr_assert_eq(e.n, 0, "unexpected errors:\n%s", all);
  free(all);
  cfg_errors_free(&e);
  return r;
}

/* Loads a workflow that must fail; the errors are left in *e. */
static void load_bad(const char *dir, const char *name, const char *text, const char *const *sets, int n_sets,
                     struct cfg_errors *e, char **path) {
  struct cfg_node *r = load_text(dir, name, text, sets, n_sets, e, path);
  cr_assert_null(r, "expected errors, the workflow loaded");
  cr_assert_gt(e->n, 0);
}

static void stage_hash(const char *dir, const char *text, const char *const *sets, int n_sets, int with_sets,
                       char out[17]) {
  struct cfg_node *r = load_ok(dir, "h.yaml", text, sets, n_sets);
  cfg_stage_hash(r, "ingest", with_sets, out);
  cfg_node_free(r);
}

static struct cfg_node *scalar(const char *key, const char *value) {
  struct cfg_node *n = cfg_node_new(CFG_SCALAR, key, "t", 1, 1);
  n->value = strdup(value);
  return n;
}

/* ---- the tree ------------------------------------------------------------------ */

Test(config, fnv1a_vectors) {
  cr_assert_eq(se3_hash_str(SE3_HASH_INIT, ""), SE3_HASH_INIT);
  cr_assert_eq(se3_hash_str(SE3_HASH_INIT, "a"), 0xaf63dc4c8601ec8cULL);
  cr_assert_eq(se3_hash_str(SE3_HASH_INIT, "foobar"), 0x85944171f73967e8ULL);
  cr_assert_eq(se3_hash_bytes(SE3_HASH_INIT, "foobar", 6), 0x85944171f73967e8ULL);
}

Test(config, get_and_typed_getters) {
  struct cfg_node *root = cfg_node_new(CFG_MAP, NULL, "t", 1, 1);
  struct cfg_node *a = cfg_node_new(CFG_MAP, "a", "t", 2, 1);
  struct cfg_node *l = cfg_node_new(CFG_LIST, "l", "t", 3, 1);
  cfg_node_add(l, scalar(NULL, "x"));
  cfg_node_add(l, scalar(NULL, "17"));
  cfg_node_add(a, l);
  cfg_node_add(a, scalar("f", "2.5"));
  cfg_node_add(a, scalar("b", "yes"));
  cfg_node_add(root, a);

  cr_assert_eq(cfg_get(root, "a.l.1"), l->kids[1]);
  cr_assert_null(cfg_get(root, "a.l.2"));
  cr_assert_null(cfg_get(root, "a.nope"));
  cr_assert_null(cfg_get(root, "a.f.x"));
  cr_assert_str_eq(cfg_str(root, "a.l.0"), "x");
  cr_assert_null(cfg_str_opt(root, "a.zz")); /* no schema check registered: absent is NULL */
  cr_assert_eq(cfg_int(root, "a.l.1"), 17);
  cr_assert_float_eq(cfg_float(root, "a.f"), 2.5, 1e-12);
  cr_assert_eq(cfg_bool(root, "a.b"), 1);

  char path[64];
  cfg_node_path(l->kids[1], path, sizeof path);
  cr_assert_str_eq(path, "a.l.1");
  struct cfg_node *c = cfg_node_copy(root);
  cr_assert_neq(c, root);
  cr_assert_str_eq(cfg_str(c, "a.l.0"), "x");
  cfg_node_path(cfg_get(c, "a.f"), path, sizeof path);
  cr_assert_str_eq(path, "a.f", "a copy's nodes know their parents");
  cr_assert_eq(cfg_hash(SE3_HASH_INIT, c), cfg_hash(SE3_HASH_INIT, root));
  cfg_node_free(c);
  cfg_node_free(root);
}

Test(config, hash_is_canonical_and_marks_kinds) {
  /* {a: [1, 2]} and {a: "1,2"} */
  struct cfg_node *m1 = cfg_node_new(CFG_MAP, NULL, "t", 1, 1);
  struct cfg_node *l = cfg_node_new(CFG_LIST, "a", "t", 1, 1);
  cfg_node_add(l, scalar(NULL, "1"));
  cfg_node_add(l, scalar(NULL, "2"));
  cfg_node_add(m1, l);
  struct cfg_node *m2 = cfg_node_new(CFG_MAP, NULL, "t", 1, 1);
  cfg_node_add(m2, scalar("a", "1,2"));
  cr_assert_neq(cfg_hash(SE3_HASH_INIT, m1), cfg_hash(SE3_HASH_INIT, m2));

  /* key order does not matter, list order does */
  struct cfg_node *x = cfg_node_new(CFG_MAP, NULL, "t", 1, 1), *y = cfg_node_new(CFG_MAP, NULL, "t", 1, 1);
  cfg_node_add(x, scalar("p", "1"));
  cfg_node_add(x, scalar("q", "2"));
  cfg_node_add(y, scalar("q", "2"));
  cfg_node_add(y, scalar("p", "1"));
  cr_assert_eq(cfg_hash(SE3_HASH_INIT, x), cfg_hash(SE3_HASH_INIT, y));
  struct cfg_node *l2 = cfg_node_new(CFG_LIST, "a", "t", 1, 1);
  cfg_node_add(l2, scalar(NULL, "2"));
  cfg_node_add(l2, scalar(NULL, "1"));
  cr_assert_neq(cfg_hash(SE3_HASH_INIT, l), cfg_hash(SE3_HASH_INIT, l2));

  /* a no_hash leaf is left out */
  uint64_t before = cfg_hash(SE3_HASH_INIT, x);
  struct cfg_node *w = scalar("workers", "8");
  w->no_hash = 1;
  cfg_node_add(x, w);
  cr_assert_eq(cfg_hash(SE3_HASH_INIT, x), before);
  w->no_hash = 0;
  cr_assert_neq(cfg_hash(SE3_HASH_INIT, x), before);

  /* absent, null and empty string differ */
  struct cfg_node *nul = cfg_node_new(CFG_NULL, NULL, "t", 1, 1), *empty = scalar(NULL, "");
  cr_assert_neq(cfg_hash(SE3_HASH_INIT, NULL), cfg_hash(SE3_HASH_INIT, nul));
  cr_assert_neq(cfg_hash(SE3_HASH_INIT, nul), cfg_hash(SE3_HASH_INIT, empty));
  cfg_node_free(nul);
  cfg_node_free(empty);
  cfg_node_free(l2);
  cfg_node_free(x);
  cfg_node_free(y);
  cfg_node_free(m1);
  cfg_node_free(m2);
}

/* ---- loading: defaults, types, paths ------------------------------------------------- */

/* Runs get(r) in a child process and asserts that it aborts, having written
 * exactly `want` (one line) to stderr. */
static void aborts_saying(const struct cfg_node *r, void (*get)(const struct cfg_node *), const char *want) {
  int fds[2];
  cr_assert_eq(pipe(fds), 0);
  fflush(NULL);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    dup2(fds[1], 2);
    close(fds[0]);
    signal(SIGABRT, SIG_DFL);
    get(r);
    _exit(0); /* it returned: the parent sees no signal */
  }
  close(fds[1]);
  char got[1024];
  size_t n = 0;
  for (ssize_t k; n < sizeof got - 1 && (k = read(fds[0], got + n, sizeof got - 1 - n)) > 0;)
    n += (size_t)k;
  got[n] = 0;
  close(fds[0]);
  int st;
  cr_assert_eq(waitpid(pid, &st, 0), pid);
  cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "the getter did not abort (status %d); stderr: %s", st, got);
  cr_assert_str_eq(got, want);
}

static void get_misspelt(const struct cfg_node *r) { cfg_int(cfg_get(r, "stages.dock"), "sett"); }
static void get_without_default(const struct cfg_node *r) { cfg_str(r, "stages.score.checkpoint"); }
static void get_opt_unknown(const struct cfg_node *r) { cfg_str_opt(cfg_get(r, "sets.a.0"), "smiles_col"); }
static void get_list_item(const struct cfg_node *r) { cfg_int(r, "sets.a.0.format"); }

/* Defaults are written once, in the schema: a getter's key that the tree
 * lacks is a bug, named in full (from a stage's subtree too), and stops the
 * program; a key optional on purpose is read with cfg_str_opt. */
Test(config, getters_fail_loudly_on_keys_without_default) {
  char *dir = tu_tmpdir("config_getters");
  struct cfg_node *r = load_ok(dir, "wf.yaml", "workflow: demo\nsets:\n  a:\n    - {path: a.smi}\n", NULL, 0);
  aborts_saying(r, get_misspelt,
                "se3screen: internal error: configuration key stages.dock.sett is not in the schema "
                "(configs/defaults.yaml) or has no default\n");
  aborts_saying(r, get_without_default,
                "se3screen: internal error: configuration key stages.score.checkpoint is not in the schema "
                "(configs/defaults.yaml) or has no default\n");
  aborts_saying(r, get_opt_unknown,
                "se3screen: internal error: configuration key sets.a.0.smiles_col is not in the schema "
                "(configs/defaults.yaml)\n");
  aborts_saying(r, get_list_item, "se3screen: internal error: configuration key sets.a.0.format is not an integer\n");
  /* optional on purpose: absent is NULL, through lists and maps of the schema too */
  cr_assert_null(cfg_str_opt(r, "stages.score.checkpoint"));
  cr_assert_null(cfg_str_opt(cfg_get(r, "stages.train"), "target"));
  cr_assert_null(cfg_str_opt(cfg_get(r, "sets.a.0"), "smiles_column"));
  cr_assert_str_eq(cfg_str_opt(r, "stages.dock.set"), "library");
  cr_assert_str_eq(cfg_schema_default("store.journal"), "wal");
  cr_assert_str_eq(cfg_schema_default("sets.x.3.format"), "auto");
  cr_assert_null(cfg_schema_default("stages.score.checkpoint"));
  cr_assert_null(cfg_schema_default("stages.nope"));
  /* a record's cap where a reader names none is the schema's (issue 71: the
   * schema said 16 MiB and the readers 64) */
  cr_assert_eq(strtoull(cfg_schema_default("stages.ingest.max_record_bytes"), NULL, 10),
               (unsigned long long)REC_MAX_RECORD_DEFAULT);
  cfg_node_free(r);
  free(dir);
}

Test(config, defaults_filled) {
  char *dir = tu_tmpdir("config_defaults");
  struct cfg_node *r = load_ok(dir, "wf.yaml", "workflow: demo\n", NULL, 0);
  cr_assert_str_eq(cfg_str(r, "stages.ingest.gen3d"), "auto");
  cr_assert_eq(cfg_int(r, "stages.ingest.workers"), 0);
  cr_assert_eq(cfg_int(r, "run.chunk_size"), 1024);
  cr_assert_eq(cfg_int(r, "stages.ingest.seed"), 42);
  cr_assert_eq(cfg_bool(r, "stages.ingest.add_hydrogens"), 1);
  cr_assert_float_eq(cfg_float(r, "run.progress_interval_s"), 5.0, 1e-12);
  cr_assert_str_eq(cfg_str(r, "device"), "cpu");
  cr_assert_str_eq(cfg_str(r, "store.journal"), "wal");

  const struct cfg_node *w = cfg_get(r, "stages.ingest.workers");
  cr_assert_not_null(w);
  cr_assert_eq(w->type, CFG_T_INT);
  cr_assert_eq(w->no_hash, 1);
  cr_assert_str_eq(w->file, "<default>");
  cr_assert_eq(cfg_get(r, "stages.ingest.seed")->no_hash, 0);
  cr_assert_eq(cfg_get(r, "stages.ingest.gen3d")->type, CFG_T_ENUM);
  cr_assert_eq(cfg_get(r, "run.progress_interval_s")->type, CFG_T_FLOAT);

  const struct cfg_node *el = cfg_get(r, "stages.ingest.elements");
  cr_assert_not_null(el);
  cr_assert_eq(el->kind, CFG_LIST);
  cr_assert_eq(el->n_kids, 13);
  cr_assert_str_eq(cfg_str(r, "stages.ingest.elements.0"), "H");
  cr_assert_str_eq(cfg_str(r, "stages.ingest.elements.12"), "I");

  char *wd = NULL;
  cr_assert_geq(asprintf(&wd, "%s/runs/demo", dir), 0);
  cr_assert_str_eq(cfg_str(r, "workdir"), wd);
  cr_assert_eq(cfg_get(r, "workdir")->type, CFG_T_PATH);
  /* the user's own value keeps its location (1-based) */
  const struct cfg_node *wf = cfg_get(r, "workflow");
  cr_assert_eq(wf->line, 1);
  cr_assert_eq(wf->col, 1);
  free(wd);
  cfg_node_free(r);
  free(dir);
}

Test(config, typed_values_accepted) {
  char *dir = tu_tmpdir("config_typed");
  struct cfg_node *r = load_ok(dir, "wf.yaml",
                               "workflow: t\n"
                               "run:\n  progress_interval_s: 2\n  chunk_size: +7\n"
                               "stages:\n  ingest:\n    add_hydrogens: off\n    min_distance: 1e-1\n"
                               "    max_atoms:\n    gen3d: ~\n",
                               NULL, 0);
  cr_assert_float_eq(cfg_float(r, "run.progress_interval_s"), 2.0, 1e-12); /* a float accepts an int */
  cr_assert_eq(cfg_int(r, "run.chunk_size"), 7);
  cr_assert_str_eq(cfg_str(r, "run.chunk_size"), "7");
  cr_assert_eq(cfg_bool(r, "stages.ingest.add_hydrogens"), 0);
  cr_assert_float_eq(cfg_float(r, "stages.ingest.min_distance"), 0.1, 1e-12);
  /* an empty value means "use the default" */
  cr_assert_eq(cfg_int(r, "stages.ingest.max_atoms"), 999);
  cr_assert_str_eq(cfg_str(r, "stages.ingest.gen3d"), "auto");
  cfg_node_free(r);

  const char *bools[] = {"true", "false", "yes", "no", "on", "off", "True", "NO"};
  for (int i = 0; i < 8; i++) {
    char *text = NULL;
    cr_assert_geq(asprintf(&text, "workflow: t\nstages: {ingest: {add_hydrogens: %s}}\n", bools[i]), 0);
    r = load_ok(dir, "b.yaml", text, NULL, 0);
    cr_assert_eq(cfg_bool(r, "stages.ingest.add_hydrogens"), i % 2 == 0, "%s", bools[i]);
    cfg_node_free(r);
    free(text);
  }
  free(dir);
}

Test(config, labels_forms) {
  char *dir = tu_tmpdir("config_labels");
  struct cfg_node *r = load_ok(dir, "wf.yaml",
                               "workflow: t\nsets:\n  a:\n    - {path: a.sdf, labels: [pIC50, active]}\n"
                               "    - {path: b.sdf, labels: {active: 1, weight: 0.5}}\n",
                               NULL, 0);
  cr_assert_str_eq(cfg_str(r, "sets.a.0.labels.1"), "active");
  cr_assert_eq(cfg_get(r, "sets.a.1.labels.active")->type, CFG_T_INT);
  cr_assert_eq(cfg_int(r, "sets.a.1.labels.active"), 1);
  cr_assert_eq(cfg_get(r, "sets.a.1.labels.weight")->type, CFG_T_FLOAT);
  cr_assert_float_eq(cfg_float(r, "sets.a.1.labels.weight"), 0.5, 1e-12);
  cfg_node_free(r);

  struct cfg_errors e = {0};
  char *p = NULL;
  load_bad(dir, "bad.yaml",
           "workflow: t\nsets:\n  a:\n    - path: a.sdf\n      labels: active\n"
           "    - path: b.sdf\n      labels: {active: high}\n    - path: c.sdf\n      labels: [[x]]\n",
           NULL, 0, &e, &p);
  expect_msg(&e, "%s:5:7: sets.a.0.labels: expected a list of label names or a mapping name: number, got 'active'", p);
  expect_msg(&e, "%s:7:16: sets.a.1.labels.active: expected a number, got 'high'", p);
  expect_msg(&e, "%s:9:16: sets.a.2.labels.0: expected a label name, got a list", p);
  cr_assert_eq(e.n, 3);
  cfg_errors_free(&e);
  free(p);
  free(dir);
}

Test(config, paths_resolved_against_their_file) {
  char *dir = tu_tmpdir("config_paths");
  char *sub = NULL, *frag = NULL;
  cr_assert_geq(asprintf(&sub, "%s/sub", dir), 0);
  cr_assert_eq(tu_sh(NULL, "mkdir -p '%s'", sub), 0);
  frag = tu_write(sub, "frag.yaml", "sets:\n  b:\n    - path: ../data/b.sdf\n    - path: here.smi\n");
  cr_assert_not_null(frag);
  cr_assert_eq(chdir(sub), 0); /* the workflow is given relative to the cwd */
  const char *sets[] = {"sets.c=[{path: ./rel/c.sdf}]"};
  struct cfg_node *r = load_ok(dir, "wf.yaml",
                               "workflow: p\nworkdir: out/../work\ninclude: [sub/frag.yaml]\n"
                               "sets:\n  a:\n    - path: data/a.sdf.gz\n    - path: /abs/x.sdf\n",
                               sets, 1);
  char *want = NULL;
  cr_assert_geq(asprintf(&want, "%s/work", dir), 0);
  cr_assert_str_eq(cfg_str(r, "workdir"), want);
  free(want);
  cr_assert_geq(asprintf(&want, "%s/data/a.sdf.gz", dir), 0);
  cr_assert_str_eq(cfg_str(r, "sets.a.0.path"), want);
  free(want);
  cr_assert_str_eq(cfg_str(r, "sets.a.1.path"), "/abs/x.sdf");
  cr_assert_geq(asprintf(&want, "%s/data/b.sdf", dir), 0);
  cr_assert_str_eq(cfg_str(r, "sets.b.0.path"), want);
  free(want);
  cr_assert_geq(asprintf(&want, "%s/sub/here.smi", dir), 0);
  cr_assert_str_eq(cfg_str(r, "sets.b.1.path"), want);
  free(want);
  /* --set paths are relative to the cwd */
  cr_assert_geq(asprintf(&want, "%s/sub/rel/c.sdf", dir), 0);
  cr_assert_str_eq(cfg_str(r, "sets.c.0.path"), want);
  free(want);
  cfg_node_free(r);
  free(frag);
  free(sub);
  free(dir);
}

/* ---- errors ------------------------------------------------------------------------------ */

Test(config, yaml_syntax_error_location) {
  char *dir = tu_tmpdir("config_syntax");
  struct cfg_errors e = {0};
  char *p = NULL;
  load_bad(dir, "wf.yaml", "workflow: demo\nstages:\n  ingest:\n    seed: [1, 2\n    workers: 2\n", NULL, 0, &e, &p);
  expect_msg(&e, "%s:5:12: yaml: did not find expected ',' or ']'", p);
  cr_assert_eq(e.n, 1);
  cfg_errors_free(&e);
  cr_assert_eq(e.n, 0);
  cr_assert_null(e.msgs);
  free(p);

  load_bad(dir, "wf2.yaml", "workflow: demo\n  bad: indent\n", NULL, 0, &e, &p);
  expect_msg(&e, "%s:2:6: yaml: mapping values are not allowed in this context", p);
  cfg_errors_free(&e);
  free(p);
  free(dir);
}

Test(config, unknown_keys_with_suggestions) {
  char *dir = tu_tmpdir("config_unknown");
  struct cfg_errors e = {0};
  char *p = NULL;
  load_bad(dir, "wf.yaml",
           "workflow: u\n"
           "ingest:\n  workers: 2\n"
           "store:\n  jurnal: wal\n"
           "stages:\n  ingset: {}\n  ingest:\n    gen3dd: auto\n    gen3d_q: fast\n"
           "zzzzzz: 1\n",
           NULL, 0, &e, &p);
  expect_msg(&e, "%s:2:1: ingest: unknown key 'ingest'; did you mean 'stages.ingest'?", p);
  expect_msg(&e, "%s:5:3: store.jurnal: unknown key 'jurnal'; did you mean 'journal'?", p);
  expect_msg(&e, "%s:7:3: stages.ingset: unknown key 'ingset'; did you mean 'ingest'?", p);
  expect_msg(&e, "%s:9:5: stages.ingest.gen3dd: unknown key 'gen3dd'; did you mean 'gen3d'?", p);
  expect_msg(&e, "%s:10:5: stages.ingest.gen3d_q: unknown key 'gen3d_q'; did you mean 'gen3d_quality'?", p);
  expect_msg(&e, "%s:11:1: zzzzzz: unknown key 'zzzzzz'", p);
  cr_assert_eq(e.n, 6);
  cfg_errors_free(&e);
  free(p);
  free(dir);
}

Test(config, type_range_and_enum_errors) {
  char *dir = tu_tmpdir("config_types");
  struct cfg_errors e = {0};
  char *p = NULL;
  load_bad(dir, "wf.yaml",
           "workflow: [a]\n"
           "run:\n  chunk_size: 1.5\n  progress_interval_s: 0\n"
           "stages:\n  ingest:\n"
           "    workers: abc\n"
           "    seed: 5000000000\n"
           "    max_atoms: 0\n"
           "    add_hydrogens: maybe\n"
           "    min_distance: lots\n"
           "    gen3d: sometimes\n"
           "    dedupe: inchi\n"
           "    elements: H\n"
           "  ",
           NULL, 0, &e, &p);
  expect_msg(&e, "%s:1:1: workflow: expected a string, got a list", p);
  expect_msg(&e, "%s:3:3: run.chunk_size: expected an integer, got '1.5'", p);
  expect_msg(&e, "%s:4:3: run.progress_interval_s: must be between 0.1 and 3600, got 0", p);
  expect_msg(&e, "%s:7:5: stages.ingest.workers: expected an integer, got 'abc'", p);
  expect_msg(&e, "%s:8:5: stages.ingest.seed: must be between 0 and 4294967295, got 5000000000", p);
  expect_msg(&e, "%s:9:5: stages.ingest.max_atoms: must be between 1 and 100000, got 0", p);
  expect_msg(&e, "%s:10:5: stages.ingest.add_hydrogens: expected true or false, got 'maybe'", p);
  expect_msg(&e, "%s:11:5: stages.ingest.min_distance: expected a number, got 'lots'", p);
  expect_msg(&e, "%s:12:5: stages.ingest.gen3d: must be one of auto, always, never; got 'sometimes'", p);
  expect_msg(&e,
             "%s:13:5: stages.ingest.dedupe: must be one of none, inchikey, smiles; got 'inchi'; "
             "did you mean 'inchikey'?",
             p);
  expect_msg(&e, "%s:14:5: stages.ingest.elements: expected a list, got 'H'", p);
  cr_assert_eq(e.n, 11); /* all at once */
  cfg_errors_free(&e);
  free(p);

  load_bad(dir, "wf2.yaml", "workflow: t\nstages:\n  ingest:\n    workers: 5000\n", NULL, 0, &e, &p);
  expect_msg(&e, "%s:4:5: stages.ingest.workers: must be between 0 and 1024, got 5000", p);
  cfg_errors_free(&e);
  free(p);
  free(dir);
}

Test(config, required_and_structure_errors) {
  char *dir = tu_tmpdir("config_required");
  struct cfg_errors e = {0};
  char *p = NULL;
  load_bad(dir, "wf.yaml",
           "device: cpu\n"
           "sets:\n"
           "  train: a.sdf\n"
           "  test:\n"
           "    - format: sdf\n"
           "    - path: b.csv\n"
           "      labels_csv: {join: name}\n"
           "      format: csvv\n"
           "  val:\n"
           "stages:\n  ingest:\n    seed: 1\n    seed: 2\n",
           NULL, 0, &e, &p);
  expect_msg(&e, "%s:1:1: workflow: required key is missing", p);
  expect_msg(&e, "%s:3:3: sets.train: expected a list, got 'a.sdf'", p);
  expect_msg(&e, "%s:5:7: sets.test.0.path: required key is missing", p);
  expect_msg(&e, "%s:7:7: sets.test.1.labels_csv.path: required key is missing", p);
  expect_msg(&e,
             "%s:8:7: sets.test.1.format: must be one of auto, sdf, mol, mol2, smi, csv, tsv, xyz, pdb, cml; "
             "got 'csvv'; did you mean 'csv'?",
             p);
  expect_msg(&e, "%s:9:3: sets.val: expected a list, got an empty value", p);
  expect_msg(&e, "%s:13:5: stages.ingest.seed: duplicate key (first at line 12)", p);
  cr_assert_eq(e.n, 7);
  cfg_errors_free(&e);
  free(p);

  load_bad(dir, "list.yaml", "- a\n- b\n", NULL, 0, &e, &p);
  expect_msg(&e, "%s:1:1: (root): a workflow must be a mapping of keys", p);
  cfg_errors_free(&e);
  free(p);

  char *missing = NULL;
  cr_assert_geq(asprintf(&missing, "%s/nope.yaml", dir), 0);
  cr_assert_null(cfg_load(missing, NULL, 0, &e));
  expect_msg(&e, "%s:0:0: (root): cannot read: No such file or directory", missing);
  cfg_errors_free(&e);
  free(missing);
  free(dir);
}

Test(config, include_errors) {
  char *dir = tu_tmpdir("config_include_err");
  char *a = tu_write(dir, "a.yaml", "include:\n  - b.yaml\nrun: {chunk_size: 3}\n");
  char *b = tu_write(dir, "b.yaml", "run:\n  progress: bar\ninclude: [a.yaml]\n");
  char *frag = tu_write(dir, "frag.yaml", "# a fragment\nstages:\n  ingest:\n    workers: lots\n    gen3d: nevr\n");
  char *broken = tu_write(dir, "broken.yaml", "stages: {ingest: [}\n");
  struct cfg_errors e = {0};
  char *p = NULL;
  load_bad(dir, "wf.yaml",
           "workflow: i\ninclude:\n  - frag.yaml\n  - missing.yaml\n  - a.yaml\n  - broken.yaml\n  - {x: 1}\n", NULL, 0,
           &e, &p);
  /* errors inside a fragment name the fragment's file and line */
  expect_msg(&e, "%s:4:5: stages.ingest.workers: expected an integer, got 'lots'", frag);
  expect_msg(&e, "%s:5:5: stages.ingest.gen3d: must be one of auto, always, never; got 'nevr'; did you mean 'never'?",
             frag);
  expect_msg(&e, "%s:4:5: include.1: cannot read '%s/missing.yaml': No such file or directory", p, dir);
  expect_msg(&e, "%s:3:11: include.0: include cycle: %s/a.yaml -> %s/b.yaml -> %s/a.yaml", b, dir, dir, dir);
  expect_msg(&e, "%s:1:19: yaml: did not find expected node content", broken);
  expect_msg(&e, "%s:7:5: include.4: expected a file name, got a mapping", p);
  cr_assert_eq(e.n, 6);
  cfg_errors_free(&e);
  free(p);
  free(a);
  free(b);
  free(frag);
  free(broken);
  free(dir);
}

Test(config, include_merge_precedence) {
  char *dir = tu_tmpdir("config_include");
  char *inner = tu_write(dir, "inner.yaml", "stages:\n  ingest:\n    seed: 1\n    dedupe: smiles\n    max_atoms: 10\n");
  char *outer = tu_write(dir, "outer.yaml",
                         "include: [inner.yaml]\nstages:\n  ingest:\n    seed: 2\n    gen3d: never\n"
                         "    elements: [C]\nrun: {chunk_size: 5}\n");
  char *other = tu_write(dir, "other.yaml", "stages:\n  ingest:\n    max_atoms: 20\n    gen3d: always\n");
  struct cfg_node *r = load_ok(dir, "wf.yaml",
                               "workflow: m\ninclude: [outer.yaml, other.yaml]\n"
                               "stages:\n  ingest:\n    seed: 3\n    elements: [N, O]\n",
                               NULL, 0);
  cr_assert_eq(cfg_int(r, "stages.ingest.seed"), 3);             /* the workflow wins */
  cr_assert_str_eq(cfg_str(r, "stages.ingest.gen3d"), "always"); /* a later include wins */
  cr_assert_eq(cfg_int(r, "stages.ingest.max_atoms"), 20);
  cr_assert_str_eq(cfg_str(r, "stages.ingest.dedupe"), "smiles"); /* nested include, deep merge */
  cr_assert_eq(cfg_int(r, "run.chunk_size"), 5);
  /* lists are replaced, not merged */
  cr_assert_eq(cfg_get(r, "stages.ingest.elements")->n_kids, 2);
  cr_assert_str_eq(cfg_str(r, "stages.ingest.elements.0"), "N");
  /* the merged value remembers where it was written */
  cr_assert_str_eq(cfg_get(r, "stages.ingest.dedupe")->file, inner);
  cr_assert_eq(cfg_get(r, "stages.ingest.dedupe")->line, 4);
  /* include is consumed */
  cr_assert_null(cfg_get(r, "include"));
  cfg_node_free(r);
  free(inner);
  free(outer);
  free(other);
  free(dir);
}

/* ---- --set --------------------------------------------------------------------------------- */

Test(config, set_overrides) {
  char *dir = tu_tmpdir("config_set");
  const char *sets[] = {"stages.ingest.seed=9", "ingest.workers=2",    "ingest.elements=[H, C]",
                        "run.progress=none",    "sets.a.0.format=sdf", "device=auto"};
  struct cfg_node *r =
      load_ok(dir, "wf.yaml", "workflow: s\nsets:\n  a:\n    - path: a.x\nstages:\n  ingest:\n    seed: 1\n", sets, 6);
  cr_assert_eq(cfg_int(r, "stages.ingest.seed"), 9);
  cr_assert_eq(cfg_int(r, "stages.ingest.workers"), 2);
  cr_assert_eq(cfg_get(r, "stages.ingest.elements")->n_kids, 2);
  cr_assert_str_eq(cfg_str(r, "stages.ingest.elements.1"), "C");
  cr_assert_str_eq(cfg_str(r, "run.progress"), "none");
  cr_assert_str_eq(cfg_str(r, "sets.a.0.format"), "sdf");
  cr_assert_str_eq(cfg_str(r, "device"), "auto");
  const struct cfg_node *w = cfg_get(r, "stages.ingest.workers");
  cr_assert_str_eq(w->file, "<--set>");
  cr_assert_eq(w->line, 0);
  cr_assert_eq(w->col, 0);
  cfg_node_free(r);
  free(dir);
}

Test(config, set_errors) {
  char *dir = tu_tmpdir("config_set_err");
  const char *sets[] = {"ingest.workers=abc", "stages.ingest.gen3d=sometimes",
                        "noequals",           "ingest.elements=[H, C",
                        "ingest.bogus=1",     "workflow.x=1",
                        "ingest..seed=1"};
  struct cfg_errors e = {0};
  load_bad(dir, "wf.yaml", "workflow: s\n", sets, 7, &e, NULL);
  expect_msg(&e, "--set ingest.workers=abc: stages.ingest.workers: expected an integer, got 'abc'");
  expect_msg(&e, "--set stages.ingest.gen3d=sometimes: stages.ingest.gen3d: must be one of auto, always, never; "
                 "got 'sometimes'");
  expect_msg(&e, "--set noequals: noequals: expected key=value");
  expect_msg(&e, "--set ingest.elements=[H, C: yaml: did not find expected ',' or ']'");
  expect_msg(&e, "--set ingest.bogus=1: stages.ingest.bogus: unknown key 'bogus'");
  expect_msg(&e, "--set workflow.x=1: workflow: cannot set a key inside a single value");
  expect_msg(&e, "--set ingest..seed=1: (root): empty element in key 'ingest..seed'");
  cr_assert_eq(e.n, 7);
  cfg_errors_free(&e);
  free(dir);
}

/* ---- print and hash ------------------------------------------------------------------------ */

Test(config, print_reloads_to_the_same_tree) {
  char *dir = tu_tmpdir("config_print");
  char *frag = tu_write(dir, "frag.yaml", "run: {chunk_size: 77}\n");
  const char *sets[] = {"ingest.seed=0012"};
  struct cfg_node *r = load_ok(dir, "wf.yaml",
                               "workflow: 'yes'\ninclude: [frag.yaml]\n"
                               "sets:\n"
                               "  'odd: key':\n"
                               "    - path: \"with space/a #1.sdf\"\n"
                               "      labels: [\"a: b\", '-x', 'null', '', \"tab\\there\", \"it's\", '[y]', '12']\n"
                               "      smiles_column: \"~\"\n"
                               "      name_column: \"quote\\\"d\"\n"
                               "    - path: b.csv\n"
                               "      labels: {p: 1, q: -2.5e-3}\n"
                               "      labels_csv: {path: side.csv, columns: [x, y]}\n"
                               "stages:\n  ingest:\n    elements: [N, O, Cl]\n    min_distance: .25\n",
                               sets, 1);
  char *out = NULL;
  cr_assert_geq(asprintf(&out, "%s/printed.yaml", dir), 0);
  FILE *f = fopen(out, "w");
  cr_assert_not_null(f);
  cfg_print(f, r);
  fclose(f);
  char *text = tu_read(out, NULL);
  cr_assert_not_null(text);
  cr_assert(strstr(text, "\nstages:\n  ingest:\n    gen3d: auto\n"), "%s", text);
  cr_assert(strstr(text, "chunk_size: 77\n"), "%s", text);
  cr_assert(strstr(text, "seed: 12\n"), "%s", text);
  cr_assert(strstr(text, "workflow: 'yes'\n") == text, "%s", text);
  cr_assert_null(strstr(text, "include"), "%s", text);

  struct cfg_errors e = {0};
  struct cfg_node *r2 = cfg_load(out, NULL, 0, &e);
  char *all = joined(&e);
  cr_assert_not_null(r2, "printed config does not reload:\n%s\n%s", all, text);
  free(all);
  cr_assert_eq(cfg_hash(SE3_HASH_INIT, r2), cfg_hash(SE3_HASH_INIT, r));
  char h1[17], h2[17];
  cfg_stage_hash(r, "ingest", 1, h1);
  cfg_stage_hash(r2, "ingest", 1, h2);
  cr_assert_str_eq(h1, h2);
  cr_assert_str_eq(cfg_str(r2, "sets.odd: key.0.labels.4"), "tab\there");
  cr_assert_str_eq(cfg_str(r2, "sets.odd: key.0.name_column"), "quote\"d");
  cr_assert_str_eq(cfg_str(r2, "sets.odd: key.0.smiles_column"), "~");
  cr_assert_str_eq(cfg_str(r2, "workflow"), "yes");
  cfg_node_free(r2);
  cfg_node_free(r);
  free(text);
  free(out);
  free(frag);
  free(dir);
}

static const char *base_yaml = "workflow: h\n"
                               "sets:\n"
                               "  train:\n"
                               "    - path: a.sdf\n"
                               "      format: sdf\n"
                               "      labels: {active: 1}\n"
                               "    - path: b.smi\n"
                               "stages:\n"
                               "  ingest:\n"
                               "    gen3d: never\n"
                               "    seed: 7\n"
                               "    elements: [H, C, N]\n"
                               "    workers: 2\n";

Test(config, stage_hash_stable_under_reordering) {
  char *dir = tu_tmpdir("config_hash_order");
  char h1[17], h2[17];
  stage_hash(dir, base_yaml, NULL, 0, 1, h1);
  cr_assert_eq(strlen(h1), 16);
  cr_assert_eq(strspn(h1, "0123456789abcdef"), 16);
  stage_hash(dir,
             "stages:\n"
             "  ingest:\n"
             "    workers: 2\n"
             "    elements: [H, C, N]\n"
             "    seed: 7\n"
             "    gen3d: never\n"
             "sets:\n"
             "  train:\n"
             "    - labels: {active: 1.0}\n"
             "      format: sdf\n"
             "      path: ./a.sdf\n"
             "    - {path: b.smi}\n"
             "workflow: h\n",
             NULL, 0, 1, h2);
  cr_assert_str_eq(h1, h2);
  /* a default written out equals the default left out */
  char *text = NULL;
  cr_assert_geq(asprintf(&text, "%s    max_atoms: 999\n    add_hydrogens: yes\n", base_yaml), 0);
  stage_hash(dir, text, NULL, 0, 1, h2);
  cr_assert_str_eq(h1, h2);
  free(text);
  free(dir);
}

Test(config, stage_hash_changes_with_values) {
  char *dir = tu_tmpdir("config_hash_change");
  char h0[17], h[17];
  stage_hash(dir, base_yaml, NULL, 0, 1, h0);
  const char *changes[] = {
      "ingest.gen3d=auto",         "ingest.seed=8",
      "ingest.elements=[H, C, O]", "ingest.elements=[C, H, N]",
      "sets.train.0.format=auto",  "sets.train.0.labels.active=2",
      "sets.train.1.path=c.smi",   "ingest.add_hydrogens=no",
      "ingest.min_distance=0.6",
  };
  for (size_t i = 0; i < sizeof changes / sizeof *changes; i++) {
    stage_hash(dir, base_yaml, &changes[i], 1, 1, h);
    cr_assert_str_neq(h, h0, "%s did not change the hash", changes[i]);
  }
  /* keys with hash: false keep finished work */
  const char *same[] = {"ingest.workers=16", "ingest.timeout_s=5", "run.progress=none", "store.journal=delete"};
  for (size_t i = 0; i < sizeof same / sizeof *same; i++) {
    stage_hash(dir, base_yaml, &same[i], 1, 1, h);
    cr_assert_str_eq(h, h0, "%s changed the hash", same[i]);
  }
  /* without sets, the inputs do not count */
  char n0[17], n1[17];
  stage_hash(dir, base_yaml, NULL, 0, 0, n0);
  const char *set_change[] = {"sets.train.0.format=auto"};
  stage_hash(dir, base_yaml, set_change, 1, 0, n1);
  cr_assert_str_eq(n0, n1);
  cr_assert_str_neq(n0, h0);
  free(dir);
}

/* hash: unless_default (a key added later): at its default, written out
 * or not, it leaves the stage's hash as it was before the key existed;
 * another value changes it */
Test(config, a_key_added_later_keeps_the_hash_at_its_default) {
  char *dir = tu_tmpdir("config_hash_later");
  const char *yaml = "workflow: h\nstages:\n  train:\n    target: y\n";
  struct cfg_node *r = load_ok(dir, "t.yaml", yaml, NULL, 0);
  char h0[17], h[17];
  cfg_stage_hash(r, "train", 0, h0);
  /* the defaults filled in are out of the hash: the tree an earlier se3screen hashed, without them */
  const struct cfg_node *cw = cfg_get(r, "stages.train.class_weight"),
                        *cd = cfg_get(r, "stages.train.split.cluster_distance"),
                        *seed = cfg_get(r, "stages.train.seed");
  cr_assert(cw && cd && seed);
  cr_assert(cw->no_hash && cd->no_hash, "a key added later is hashed at its default");
  cr_assert(!seed->no_hash, "an ordinary key at its default is hashed");
  cfg_node_free(r);
  const char *same[] = {"train.class_weight=none", "train.split.cluster_distance=0.60"};
  const char *other[] = {"train.class_weight=balanced", "train.split.cluster_distance=0.5"};
  for (int i = 0; i < 2; i++) {
    r = load_ok(dir, "t.yaml", yaml, &same[i], 1);
    cfg_stage_hash(r, "train", 0, h);
    cfg_node_free(r);
    cr_assert_str_eq(h, h0, "%s changed the hash", same[i]);
    r = load_ok(dir, "t.yaml", yaml, &other[i], 1);
    cfg_stage_hash(r, "train", 0, h);
    cfg_node_free(r);
    cr_assert_str_neq(h, h0, "%s did not change the hash", other[i]);
  }
  /* a list added later (stages.graph.atom_features, default []): out of the
   * graph stage's hash when empty, written out or not; in it when not */
  const char *gy = "workflow: h\nstages:\n  graph: {cutoff: 4.0}\n";
  r = load_ok(dir, "g.yaml", gy, NULL, 0);
  cfg_stage_hash(r, "graph", 0, h0);
  cr_assert(cfg_get(r, "stages.graph.atom_features")->no_hash);
  cfg_node_free(r);
  const char *empty = "graph.atom_features=[]", *one = "graph.atom_features=[ring]";
  r = load_ok(dir, "g.yaml", gy, &empty, 1);
  cfg_stage_hash(r, "graph", 0, h);
  cfg_node_free(r);
  cr_assert_str_eq(h, h0, "an empty list written out changed the hash");
  r = load_ok(dir, "g.yaml", gy, &one, 1);
  cfg_stage_hash(r, "graph", 0, h);
  cfg_node_free(r);
  cr_assert_str_neq(h, h0, "a feature listed did not change the hash");
  free(dir);
}

Test(config, stage_hash_without_section_is_deterministic) {
  char *dir = tu_tmpdir("config_hash_none");
  struct cfg_node *r = load_ok(dir, "wf.yaml", "workflow: n\n", NULL, 0);
  char a[17], b[17], c[17];
  cfg_stage_hash(r, "nosection", 0, a);
  cfg_stage_hash(r, "nosection", 0, b);
  cfg_stage_hash(r, "ingest", 0, c);
  cr_assert_str_eq(a, b);
  cr_assert_eq(strlen(a), 16);
  cr_assert_str_neq(a, c);
  /* with sets absent from the workflow, no tree at all hashes the same */
  cfg_stage_hash(r, "nosection", 1, a);
  cfg_stage_hash(NULL, "nosection", 1, b);
  cr_assert_str_eq(a, b);
  cfg_stage_hash(NULL, "nosection", 0, c);
  cr_assert_str_neq(b, c);
  cfg_node_free(r);
  free(dir);
}

/* stages.train.model: a compiled-in preset or a YAML file fills
 * stages.train.arch, the workflow's own arch keys win, and errors point at the
 * preset's lines. The schema's arch defaults are the `small` preset. */
Test(config, model_presets_fill_the_architecture) {
  char *dir = tu_tmpdir("config_presets");
  const char *head = "workflow: t\nsets: {train: [{path: a.sdf}]}\n";
  char text[512];
  snprintf(text, sizeof text, "%sstages:\n  train: {target: u0, model: se3_qm9, arch: {channels: 16}}\n", head);
  struct cfg_node *r = load_ok(dir, "wf.yaml", text, NULL, 0);
  cr_assert_eq(cfg_int(r, "stages.train.arch.layers"), 7);
  cr_assert_eq(cfg_int(r, "stages.train.arch.heads"), 8);
  cr_assert_eq(cfg_int(r, "stages.train.arch.channels"), 16, "the workflow's key wins");
  cfg_node_free(r);

  /* no model key: the small preset, which equals the schema's defaults */
  snprintf(text, sizeof text, "%sstages:\n  train: {target: u0}\n", head);
  r = load_ok(dir, "wf.yaml", text, NULL, 0);
  struct cfg_node *d = load_ok(dir, "wf2.yaml", "workflow: t\n", NULL, 0);
  const char *keys[] = {"layers", "degrees", "channels", "heads", "channels_div", "radial_hidden", "mlp_hidden"};
  for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
    char k[64];
    snprintf(k, sizeof k, "stages.train.arch.%s", keys[i]);
    cr_assert_eq(cfg_int(r, k), cfg_int(d, k), "%s: preset small and the schema differ", keys[i]);
  }
  cr_assert_str_eq(cfg_str(r, "stages.train.arch.pooling"), cfg_str(d, "stages.train.arch.pooling"));
  cfg_node_free(r);
  cfg_node_free(d);

  /* a preset file beside the workflow; its mistakes are reported at its own lines */
  free(tu_write(dir, "mine.yaml", "layers: 3\nchanels: 4\n"));
  snprintf(text, sizeof text, "%sstages:\n  train: {target: u0, model: mine.yaml}\n", head);
  struct cfg_errors e = {0};
  char *path = NULL;
  r = load_text(dir, "wf.yaml", text, NULL, 0, &e, &path);
  cr_assert_null(r);
  char *all = joined(&e);
  cr_assert(strstr(all, "mine.yaml:2:1: stages.train.arch.chanels: unknown key 'chanels'; did you mean 'channels'?"),
            "%s", all);
  free(all);
  cfg_errors_free(&e);
  free(path);
  free(tu_write(dir, "mine.yaml", "layers: 3\n"));
  r = load_ok(dir, "wf.yaml", text, NULL, 0);
  cr_assert_eq(cfg_int(r, "stages.train.arch.layers"), 3);
  cfg_node_free(r);

  snprintf(text, sizeof text, "%sstages:\n  train: {target: u0, model: huge}\n", head);
  memset(&e, 0, sizeof e);
  r = load_text(dir, "wf.yaml", text, NULL, 0, &e, &path);
  cr_assert_null(r);
  expect_msg(
      &e,
      "%s:4:23: stages.train.model: unknown model preset 'huge' (presets: se3_qm9, small; or a path to a YAML file)",
      path);
  cfg_errors_free(&e);
  free(path);
  free(dir);
}

/* ---- bounds on configuration files ---------------------------------------------------- */

/* An include (or a model file) that is a device or a FIFO is refused at once,
 * without reading it: /dev/zero never ends and opening a FIFO blocks until a
 * writer comes. "Without reading" is counted, not timed (a wall-clock bound
 * of 1 s could fail on a loaded machine): the bytes this process read while
 * loading are those of wf.yaml, give or take /proc's own, not megabytes of
 * zeros; a blocked open never returns, and .timeout ends it. */
Test(config, special_files_are_refused, .timeout = 10) {
  char *dir = tu_tmpdir("config_special");
  char fifo[1100];
  snprintf(fifo, sizeof fifo, "%s/pipe.yaml", dir);
  cr_assert_eq(mkfifo(fifo, 0600), 0);
  struct cfg_errors e = {0};
  char *p = NULL;
  long long r0 = tu_bytes_read();
  load_bad(dir, "wf.yaml", "workflow: t\ninclude: [/dev/zero, pipe.yaml]\n", NULL, 0, &e, &p);
  long long got = tu_bytes_read() - r0;
  cr_log_info("loading read %lld bytes", got);
  if (r0 >= 0) cr_assert_lt(got, 16384, "loading read %lld bytes: /dev/zero was read", got);
  expect_msg(&e, "%s:2:11: include.0: cannot read '/dev/zero': not a regular file (a character device)", p);
  expect_msg(&e, "%s:2:22: include.1: cannot read '%s': not a regular file (a FIFO)", p, fifo);
  cr_assert_eq(e.n, 2);
  cfg_errors_free(&e);
  free(p);

  /* a model file, and the workflow itself */
  load_bad(dir, "wf.yaml", "workflow: t\nstages: {train: {model: /dev/zero}}\n", NULL, 0, &e, &p);
  expect_msg(&e, "%s:2:18: stages.train.model: cannot read '/dev/zero': not a regular file (a character device)", p);
  cfg_errors_free(&e);
  free(p);
  cr_assert_null(cfg_load(fifo, NULL, 0, &e));
  expect_msg(&e, "%s:0:0: (root): cannot read: not a regular file (a FIFO)", fifo);
  cfg_errors_free(&e);
  free(dir);
}

/* Every configuration file is capped at 1 MiB, and the message says so. */
Test(config, oversized_files_are_refused, .timeout = 10) {
  char *dir = tu_tmpdir("config_big");
  size_t n = 2 << 20;
  char *text = malloc(n + 64);
  strcpy(text, "workflow: t\n");
  size_t len = strlen(text);
  while (len + 64 < n) {
    memcpy(text + len, "# a comment line that only takes room ...........................\n", 65);
    len += 64;
  }
  text[len] = 0;
  struct cfg_errors e = {0};
  char *p = NULL;
  load_bad(dir, "wf.yaml", text, NULL, 0, &e, &p);
  expect_msg(&e, "%s:0:0: (root): cannot read: larger than 1 MiB, the limit for configuration files", p);
  cfg_errors_free(&e);
  char *big = tu_write(dir, "big.yaml", text);
  load_bad(dir, "wf.yaml", "workflow: t\ninclude: [big.yaml]\n", NULL, 0, &e, NULL);
  char *all = joined(&e);
  cr_assert(strstr(all, "include.0: cannot read '") && strstr(all, "big.yaml': larger than 1 MiB"), "%s", all);
  free(all);
  cfg_errors_free(&e);
  /* just under the cap is fine */
  text[(1 << 20) - 1] = 0;
  cfg_node_free(load_ok(dir, "wf.yaml", text, NULL, 0));
  free(big);
  free(p);
  free(text);
  free(dir);
}

/* Levels 1..n of includes where a<k> and b<k> both include a<k-1> and b<k-1>:
 * 2^n paths to a0, each file read once. a<k> sets the seed to k and b<k> the
 * chunk size to k; a0 sets max_atoms and dedupe instead. */
static void write_diamond(const char *dir, int levels, const char *bottom_extra) {
  char name[32], text[512];
  snprintf(text, sizeof text, "stages: {ingest: {max_atoms: 7, dedupe: smiles}}\n%s", bottom_extra);
  free(tu_write(dir, "a0.yaml", text));
  free(tu_write(dir, "b0.yaml", "run: {chunk_size: 1}\n"));
  for (int k = 1; k <= levels; k++) {
    snprintf(name, sizeof name, "a%d.yaml", k);
    snprintf(text, sizeof text, "include: [a%d.yaml, b%d.yaml]\nstages: {ingest: {seed: %d}}\n", k - 1, k - 1, k);
    free(tu_write(dir, name, text));
    snprintf(name, sizeof name, "b%d.yaml", k);
    snprintf(text, sizeof text, "include: [a%d.yaml, b%d.yaml]\nrun: {chunk_size: %d}\n", k - 1, k - 1, k);
    free(tu_write(dir, name, text));
  }
}

/* A file included along many paths is read once; the result is the same as
 * expanding every path in order (later wins), which for the diamond means: the
 * last include b<n> brings its own chunk size, and the seed of a1 (the last
 * file to set it in b<n>'s expansion, which ends with b2's: a1 b1 b2). Reading
 * each file only at its first inclusion would give a<n>'s seed instead.
 * "Read once" is counted: the bytes read stay near the 52 files' 3 KB (2^25
 * paths would read gigabytes); "linear" is bounded in CPU time, which other
 * processes on a loaded machine do not add to (5 ms here; following
 * the 2^25 paths in memory takes many seconds). */
Test(config, diamond_includes_cost_linear_time, .timeout = 20) {
  char *dir = tu_tmpdir("config_diamond");
  write_diamond(dir, 2, "");
  struct cfg_node *r = load_ok(dir, "wf.yaml", "workflow: t\ninclude: [a2.yaml, b2.yaml]\n", NULL, 0);
  /* expanded by hand: a0 b0 a1 a0 b0 b1 a2 | a0 b0 a1 a0 b0 b1 b2 */
  cr_assert_eq(cfg_int(r, "stages.ingest.seed"), 1);
  cr_assert_eq(cfg_int(r, "run.chunk_size"), 2);
  cfg_node_free(r);

  write_diamond(dir, 25, "");
  double t0 = tu_cpu_now();
  long long r0 = tu_bytes_read();
  r = load_ok(dir, "wf.yaml", "workflow: t\ninclude: [a25.yaml, b25.yaml]\n", NULL, 0);
  double cpu = tu_cpu_now() - t0;
  long long got = tu_bytes_read() - r0;
  cr_log_info("diamond of 25: %.3f s of CPU, %lld bytes read", cpu, got);
  if (r0 >= 0) cr_assert_lt(got, 65536, "%lld bytes read: files were read once a path", got);
  cr_assert_lt(cpu, 2.0, "%.1f s of CPU", cpu);
  cr_assert_eq(cfg_int(r, "stages.ingest.seed"), 1);
  cr_assert_eq(cfg_int(r, "run.chunk_size"), 25);
  cr_assert_eq(cfg_int(r, "stages.ingest.max_atoms"), 7);
  cr_assert_str_eq(cfg_str(r, "stages.ingest.dedupe"), "smiles");
  cfg_node_free(r);
  free(dir);
}

/* A cycle is reported once, with the chain, even when the file that closes it
 * is reached along 2^25 paths (counted and bounded as the diamond above). */
Test(config, include_cycles_are_reported_once, .timeout = 20) {
  char *dir = tu_tmpdir("config_cycle");
  struct cfg_errors e = {0};
  char *p = NULL;
  load_bad(dir, "wf.yaml", "workflow: t\ninclude: [wf.yaml]\n", NULL, 0, &e, &p);
  expect_msg(&e, "%s:2:11: include.0: include cycle: %s -> %s/wf.yaml", p, p, dir);
  cr_assert_eq(e.n, 1);
  cfg_errors_free(&e);
  free(p);

  write_diamond(dir, 25, "include: [../config_cycle/wf.yaml]\n");
  double t0 = tu_cpu_now();
  long long r0 = tu_bytes_read();
  load_bad(dir, "wf.yaml", "workflow: t\ninclude: [a25.yaml, b25.yaml]\n", NULL, 0, &e, &p);
  double cpu = tu_cpu_now() - t0;
  long long got = tu_bytes_read() - r0;
  cr_log_info("diamond of 25 with a cycle: %.3f s of CPU, %lld bytes read", cpu, got);
  if (r0 >= 0) cr_assert_lt(got, 65536, "%lld bytes read: files were read once a path", got);
  cr_assert_lt(cpu, 2.0, "%.1f s of CPU", cpu);
  char *all = joined(&e);
  cr_assert_eq(e.n, 1, "%s", all);
  char want[2048];
  snprintf(want, sizeof want, "%s/a0.yaml:2:11: include.0: include cycle: %s -> %s/a25.yaml -> %s/a24.yaml -> ", dir, p,
           dir, dir);
  cr_assert(strncmp(all, want, strlen(want)) == 0, "%s", all);
  snprintf(want, sizeof want, " -> %s/a0.yaml -> %s/../config_cycle/wf.yaml\n", dir, dir);
  cr_assert(strstr(all, want), "%s", all);
  free(all);
  cfg_errors_free(&e);
  free(p);
  free(dir);
}

/* A chain of distinct includes is bounded too (64 files deep). */
Test(config, include_chains_are_bounded, .timeout = 20) {
  char *dir = tu_tmpdir("config_chain");
  char name[32], text[64];
  for (int i = 0; i < 70; i++) {
    snprintf(name, sizeof name, "c%d.yaml", i);
    snprintf(text, sizeof text, "include: [c%d.yaml]\n", i + 1);
    free(tu_write(dir, name, text));
  }
  free(tu_write(dir, "c70.yaml", "run: {chunk_size: 3}\n"));
  struct cfg_errors e = {0};
  load_bad(dir, "wf.yaml", "workflow: t\ninclude: [c0.yaml]\n", NULL, 0, &e, NULL);
  expect_msg(&e, "%s/c62.yaml:1:11: include.0: cannot read '%s/c63.yaml': includes nested deeper than 64 files", dir,
             dir);
  cr_assert_eq(e.n, 1);
  cfg_errors_free(&e);
  /* 60 deep is fine */
  free(tu_write(dir, "c60.yaml", "run: {chunk_size: 3}\n"));
  struct cfg_node *r = load_ok(dir, "wf.yaml", "workflow: t\ninclude: [c0.yaml]\n", NULL, 0);
  cr_assert_eq(cfg_int(r, "run.chunk_size"), 3);
  cfg_node_free(r);
  free(dir);
}

/* Keys are looked up through an index: 200,000 keys in one mapping (each an
 * unknown key, plus one duplicate), and two included mappings of 100,000 keys
 * each merged key by key, take about a second, not minutes. Bounded in CPU
 * time, which other processes on a loaded machine do not add to (the wall
 * clock did); the bound leaves room for the sanitizer build. */
Test(config, large_mappings_cost_linear_time, .timeout = 60) {
  char *dir = tu_tmpdir("config_bigmap");
  /* 3-character keys (61^3 of them; no 'r', so none is "run") */
  static const char digits[] = "0123456789abcdefghijklmnopqstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  char key[4] = {0};
  size_t cap = 1100000;
  char *text = malloc(cap), *a = malloc(cap), *b = malloc(cap);
  size_t n = 0, na = 0, nb = 0;
  n += (size_t)sprintf(text, "workflow: t\n");
  for (int i = 0; i < 200000; i++) {
    key[0] = digits[i / 3721];
    key[1] = digits[i / 61 % 61];
    key[2] = digits[i % 61];
    n += (size_t)sprintf(text + n, "%s:\n", key);
    if (i < 100000) na += (size_t)sprintf(a + na, "%s:\n", key);
    if (i >= 50000 && i < 150000) nb += (size_t)sprintf(b + nb, "%s:\n", key);
  }
  n += (size_t)sprintf(text + n, "000: 1\n"); /* the first key again */
  cr_assert_lt(n, (size_t)1 << 20);
  struct cfg_errors e = {0};
  char *p = NULL;
  double t0 = tu_cpu_now();
  load_bad(dir, "wf.yaml", text, NULL, 0, &e, &p);
  double t = tu_cpu_now() - t0;
  cr_log_info("200,000 keys: %.2f s of CPU", t);
  cr_assert_lt(t, 10.0, "200,000 keys took %.1f s of CPU", t); /* ~1 s; minutes when quadratic */
  cr_assert_eq(e.n, 200001);
  expect_msg(&e, "%s:200002:1: 000: duplicate key (first at line 2)", p);
  expect_msg(&e, "%s:200001:1: %s: unknown key '%s'", p, key, key); /* the last one */
  cfg_errors_free(&e);
  free(p);

  free(tu_write(dir, "a.yaml", a));
  free(tu_write(dir, "b.yaml", b));
  t0 = tu_cpu_now();
  load_bad(dir, "wf.yaml", "workflow: t\ninclude: [a.yaml, b.yaml]\n", NULL, 0, &e, NULL);
  t = tu_cpu_now() - t0;
  cr_log_info("merging 2 x 100,000 keys: %.2f s of CPU", t);
  cr_assert_lt(t, 10.0, "merging 2 x 100,000 keys took %.1f s of CPU", t);
  cr_assert_eq(e.n, 150000);
  cfg_errors_free(&e);
  free(text);
  free(a);
  free(b);
  free(dir);
}

/* ---- input files ------------------------------------------------------------------------- */

/* With input checking, every input path that does not exist (or a pattern
 * that matches nothing, or a folder) is reported with the other problems; the
 * plain load does not look at input files. */
Test(config, missing_inputs_are_reported_with_the_other_errors) {
  char *dir = tu_tmpdir("config_inputs");
  free(tu_write(dir, "present.sdf", ""));
  free(tu_write(dir, "here-1.sdf", ""));
  char sub[1100];
  snprintf(sub, sizeof sub, "%s/sub", dir);
  cr_assert_eq(mkdir(sub, 0755), 0);
  const char *text = "workflow: t\n"
                     "sets:\n"
                     "  a:\n"
                     "    - {path: missing.sdf}\n"
                     "    - {path: \"nomatch*.sdf\"}\n"
                     "    - {path: present.sdf, labels_csv: {path: nolabels.csv}}\n"
                     "    - {path: sub}\n"
                     "    - {path: \"here-*.sdf\"}\n"
                     "stages:\n"
                     "  ingest: {gen3d: sometimes}\n"
                     "  score: {checkpoint: none.ckpt}\n";
  char *p = tu_write(dir, "wf.yaml", text);
  struct cfg_errors e = {0};
  cr_assert_null(cfg_load_checked(p, NULL, 0, "*", &e));
  expect_msg(&e, "%s:4:8: sets.a.0.path: no such file: %s/missing.sdf", p, dir);
  expect_msg(&e, "%s:5:8: sets.a.1.path: no file matches: %s/nomatch*.sdf", p, dir);
  expect_msg(&e, "%s:6:40: sets.a.2.labels_csv.path: no such file: %s/nolabels.csv", p, dir);
  expect_msg(&e, "%s:7:8: sets.a.3.path: a folder, not a file: %s/sub", p, dir);
  expect_msg(&e, "%s:11:11: stages.score.checkpoint: no such file: %s/none.ckpt", p, dir);
  expect_msg(&e, "%s:10:12: stages.ingest.gen3d: must be one of auto, always, never; got 'sometimes'", p);
  cr_assert_eq(e.n, 6);
  cfg_errors_free(&e);

  /* only the inputs of the stages named */
  cr_assert_null(cfg_load_checked(p, NULL, 0, "graph score", &e));
  expect_msg(&e, "%s:11:11: stages.score.checkpoint: no such file: %s/none.ckpt", p, dir);
  cr_assert_eq(e.n, 2);
  cfg_errors_free(&e);
  const char *fix[] = {"ingest.gen3d=auto"};
  struct cfg_node *r = cfg_load_checked(p, fix, 1, "graph", &e);
  cr_assert_not_null(r);
  cr_assert_eq(e.n, 0);
  cfg_node_free(r);
  /* --set paths are relative to the current folder, and checked too */
  const char *set[] = {"ingest.gen3d=auto", "score.checkpoint=/nonexistent/x.ckpt"};
  cr_assert_null(cfg_load_checked(p, set, 2, "score", &e));
  expect_msg(&e,
             "--set score.checkpoint=/nonexistent/x.ckpt: stages.score.checkpoint: no such file: /nonexistent/x.ckpt");
  cr_assert_eq(e.n, 1);
  cfg_errors_free(&e);
  /* the plain load does not look */
  r = cfg_load(p, fix, 1, &e);
  cr_assert_not_null(r);
  cfg_node_free(r);
  free(p);
  free(dir);
}

/* Before (hardening IV): a set's name (a YAML key the user chooses) could
 * hold a newline, which then split log lines and the report's tables. Now
 * refused like a control character in any name, at its line and column. */
Test(config, set_names_without_control_characters) {
  char *dir = tu_tmpdir("config_set_names");
  struct cfg_errors e = {0};
  char *p = NULL;
  load_bad(dir, "wf.yaml", "workflow: t\nsets:\n  \"lib\\nrary\":\n    - {path: a.smi}\n", NULL, 0, &e, &p);
  char *all = joined(&e);
  char want[1200];
  snprintf(want, sizeof want, "%s:3:3: sets.lib\nrary: holds a control character (a newline at character 4)", p);
  cr_assert(strstr(all, want) || strstr(all, "holds a control character (a newline at character 4)"), "%s", all);
  cr_assert(strstr(all, "control character"), "%s", all);
  free(all);
  cfg_errors_free(&e);
  free(p);
  /* a tab too; an ordinary name passes */
  memset(&e, 0, sizeof e);
  load_bad(dir, "wf2.yaml", "workflow: t\nsets:\n  \"a\\tb\":\n    - {path: a.smi}\n", NULL, 0, &e, NULL);
  all = joined(&e);
  cr_assert(strstr(all, "a tab at character 2"), "%s", all);
  free(all);
  cfg_errors_free(&e);
  cfg_node_free(load_ok(dir, "wf3.yaml", "workflow: t\nsets:\n  my-library_2:\n    - {path: a.smi}\n", NULL, 0));
  free(dir);
}

/* Before (hardening IV): a workdir of ~500 bytes passed `check`, and `run`
 * failed at its first open with "unable to open database file", leaving a
 * lock file; ~3,800 bytes gave a message of the cut-off path alone. Now
 * refused at load with its length and the limit; 460 bytes pass. */
Test(config, a_workdir_too_long_for_sqlite_is_refused) {
  char *dir = tu_tmpdir("config_long_workdir");
  for (int len = 459; len <= 3800; len += 3800 - 459) {
    char wd[4000], yaml[4200];
    int n = snprintf(wd, sizeof wd, "/tmp/se3screen-test-");
    for (; n < len; n++)
      wd[n] = n % 100 == 0 ? '/' : 'w';
    wd[n] = 0;
    snprintf(yaml, sizeof yaml, "workflow: t\nworkdir: %s\n", wd);
    if (len < 460) {
      cfg_node_free(load_ok(dir, "ok.yaml", yaml, NULL, 0));
      continue;
    }
    struct cfg_errors e = {0};
    char *p = NULL;
    load_bad(dir, "long.yaml", yaml, NULL, 0, &e, &p);
    char *all = joined(&e), want[1300];
    snprintf(want, sizeof want, "%s:2:1: workdir: the workdir's path is %d bytes long (", p, len);
    cr_assert(strstr(all, want) && strstr(all, "a workdir of at most 460 bytes"), "%s", all);
    free(all);
    free(p);
    cfg_errors_free(&e);
  }
  free(dir);
}
