/* Every YAML example in the README and docs/ is a workflow se3screen accepts
 * (issue 33): each ```yaml block of README.md and every Markdown file of docs/ is checked.
 *
 *   - A whole workflow (a top-level `workflow:` key) is read as if saved in
 *     workflows/ (a folder holding a link data -> workflows/data), so its
 *     data/... paths name the bundled files. It must pass
 *     `se3screen check --no-inputs`; and when every file it names exists
 *     there (inputs, labels_csv files, a checkpoint, a model file; a
 *     workflow with includes never counts as such), the full `se3screen
 *     check` too, which reads the inputs' heads.
 *   - A fragment (no `workflow:` key) must say so on its first line,
 *     `# fragment`, and is checked as `workflow: doc` followed by it, with
 *     --no-inputs. An unmarked fragment is a failure naming its file and line:
 *     the convention must not rot into blocks nobody checks.
 * docs/workflows.md states the convention for the writers of the pages.
 * SE3_DOC_ROOT, when set, is read instead of the source tree (to try the
 * test on a scratch copy of the pages).
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/testutil.h"

static char *g_tmp; /* the test's folder; block i is checked in g_tmp/b<i> */
static int g_blocks;

static const char *doc_root(void) {
  const char *r = getenv("SE3_DOC_ROOT");
  return r && *r ? r : tu_src(".");
}

/* A line that is a key at the top level: "workflow:" at column 0. */
static int has_top_key(const char *text, const char *key) {
  size_t n = strlen(key);
  for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
    if (!strncmp(l, key, n) && l[n] == ':') return 1;
  return 0;
}

static int is_fragment(const char *text) {
  const char *l = text + strspn(text, " \t\n");
  return !strncmp(l, "# fragment", 10);
}

/* The value of a resolved `key: value` line as `check` prints it (plain or
 * single-quoted), into buf; 0 when the line is not one. */
static int printed_value(const char *line, const char *key, char *buf, size_t size) {
  const char *p = line + strspn(line, " ");
  if (!strncmp(p, "- ", 2)) p += 2;
  size_t n = strlen(key);
  if (strncmp(p, key, n) || strncmp(p + n, ": ", 2)) return 0;
  p += n + 2;
  size_t w = 0;
  if (*p == '\'') {
    for (p++; *p && w + 1 < size; p++) {
      if (*p == '\'' && p[1] == '\'')
        p++;
      else if (*p == '\'')
        break;
      buf[w++] = *p;
    }
  } else {
    while (*p && *p != '\n' && w + 1 < size)
      buf[w++] = *p++;
  }
  buf[w] = 0;
  return 1;
}

/* Whether every file the resolved workflow `printed` names exists: input
 * paths and patterns, labels_csv files, a checkpoint; and a model file,
 * relative to dir. A workflow with includes is left to --no-inputs. */
static int names_only_existing_files(const char *printed, const char *block, const char *dir) {
  if (has_top_key(block, "include")) return 0;
  int ok = 1;
  char *copy = strdup(printed);
  for (char *save = NULL, *l = strtok_r(copy, "\n", &save); l && ok; l = strtok_r(NULL, "\n", &save)) {
    char v[4096], path[8192];
    glob_t gl;
    if (printed_value(l, "path", v, sizeof v) || printed_value(l, "checkpoint", v, sizeof v)) {
      ok = glob(v, 0, NULL, &gl) == 0;
      if (ok) globfree(&gl);
    } else if (printed_value(l, "model", v, sizeof v) && (strchr(v, '/') || strstr(v, ".yaml") || strstr(v, ".yml"))) {
      snprintf(path, sizeof path, "%s%s%s", v[0] == '/' ? "" : dir, v[0] == '/' ? "" : "/", v);
      ok = access(path, F_OK) == 0;
    }
  }
  free(copy);
  return ok;
}

/* Checks one block; 0 when it passes (*full: it passed the full check
 * too), else 1 with what failed in *why (malloc'd). */
static int check_block(const char *text, int *full, char **why) {
  *full = 0;
  *why = NULL;
  int whole = has_top_key(text, "workflow");
  if (!whole && !is_fragment(text)) {
    *why = strdup("a YAML block that is neither a whole workflow (a top-level `workflow:` key) nor marked "
                  "`# fragment` on its first line (docs/workflows.md, \"YAML examples in these pages\")");
    return 1;
  }
  char name[32], *dir = NULL;
  snprintf(name, sizeof name, "b%d", g_blocks++);
  cr_assert(asprintf(&dir, "%s/%s", g_tmp, name) > 0);
  cr_assert_eq(tu_sh(NULL, "mkdir -p '%s' && ln -sT '%s' '%s/data'", dir, tu_src("workflows/data"), dir), 0);
  char *wf_text = NULL;
  cr_assert(asprintf(&wf_text, "%s%s", whole ? "" : "workflow: doc\n", text) > 0);
  char *wf = tu_write(dir, "wf.yaml", wf_text);
  char *out = NULL;
  int rc = tu_se3(&out, "check --no-inputs '%s'", wf);
  if (rc != 0) {
    if (asprintf(why, "`se3screen check --no-inputs` exits %d:\n%s", rc, out) < 0) *why = NULL;
  } else if (whole && names_only_existing_files(out, text, dir)) {
    free(out);
    rc = tu_se3(&out, "check '%s'", wf);
    if (rc != 0 && asprintf(why, "it names only existing files, and `se3screen check` exits %d:\n%s", rc, out) < 0)
      *why = NULL;
    *full = rc == 0;
  }
  free(out);
  free(wf);
  free(wf_text);
  free(dir);
  return rc != 0;
}

/* a folder a test: Criterion may run them at once */
static void setup_pages(void) {
  g_tmp = tu_tmpdir("doc_yaml_pages");
  cr_assert(g_tmp);
}

static void setup_checker(void) {
  g_tmp = tu_tmpdir("doc_yaml_checker");
  cr_assert(g_tmp);
}

static void teardown(void) { free(g_tmp); }

/* The ```yaml blocks of one Markdown file, each checked; returns how many,
 * and adds those fully checked to *n_full. */
static int check_file(const char *path, const char *shown, int *n_full) {
  size_t len = 0;
  char *md = tu_read(path, &len);
  cr_assert(md, "cannot read %s", path);
  int n = 0, line_no = 0, in_block = 0, start = 0;
  size_t indent = 0;
  char *block = NULL;
  size_t blen = 0;
  FILE *bf = NULL;
  for (char *l = md, *next; l && *l; l = next) {
    next = strchr(l, '\n');
    if (next) *next++ = 0;
    line_no++;
    size_t ind = strspn(l, " ");
    if (!in_block) {
      if (!strncmp(l + ind, "```yaml", 7) && !l[ind + 7 + strspn(l + ind + 7, " ")]) {
        in_block = 1;
        indent = ind;
        start = line_no + 1;
        bf = open_memstream(&block, &blen);
        cr_assert(bf);
      }
      continue;
    }
    if (!strncmp(l + ind, "```", 3)) {
      fclose(bf);
      int full = 0;
      char *why = NULL;
      int bad = check_block(block, &full, &why);
      cr_expect(!bad, "%s:%d: %s\n--- the block:\n%s", shown, start, why ? why : "?", block);
      *n_full += full;
      n++;
      free(why);
      free(block);
      block = NULL;
      in_block = 0;
      continue;
    }
    /* a block inside a list item is indented with its fence */
    fprintf(bf, "%s\n", l + (ind < indent ? ind : indent));
  }
  cr_assert(!in_block, "%s:%d: a ```yaml block that never ends", shown, start);
  free(md);
  return n;
}

Test(doc_yaml, every_yaml_block_is_a_valid_workflow, .init = setup_pages, .fini = teardown) {
  const char *root = doc_root();
  char pattern[4096], readme[4096];
  snprintf(pattern, sizeof pattern, "%s/docs/*.md", root);
  snprintf(readme, sizeof readme, "%s/README.md", root);
  int n = 0, n_full = 0;
  n += check_file(readme, "README.md", &n_full);
  glob_t gl;
  cr_assert_eq(glob(pattern, 0, NULL, &gl), 0, "no docs/*.md under %s", root);
  for (size_t i = 0; i < gl.gl_pathc; i++) {
    const char *shown = strstr(gl.gl_pathv[i], "/docs/");
    n += check_file(gl.gl_pathv[i], shown ? shown + 1 : gl.gl_pathv[i], &n_full);
  }
  globfree(&gl);
  /* floors: the extraction still finds the blocks, and at least one names
   * bundled files and passes the full check (the path that reads inputs) */
  cr_assert_geq(n, 4, "only %d ```yaml blocks found in README.md and docs/*.md: does the extraction still match?", n);
  cr_assert_geq(n_full, 1, "no YAML block was checked with the full `se3screen check` (%d blocks)", n);
}

/* The checker itself: each way a block can be wrong is caught. */
Test(doc_yaml, the_checker_finds_wrong_blocks, .init = setup_checker, .fini = teardown) {
  static const char *const bad[] = {
      /* an unknown key */
      "workflow: x\nsets: {}\nstages:\n  ingest: {workerz: 2}\n",
      /* a wrong type, in a fragment */
      "# fragment\nstages:\n  train: {epochs: many}\n",
      /* a value out of bounds */
      "# fragment\nrun: {chunk_size: 0}\n",
      /* a fragment not marked as one */
      "stages:\n  train: {epochs: 2}\n",
      /* the training target is no label of the set, known without reading a file */
      "workflow: x\nsets:\n  train:\n    - {path: mine.sdf, labels: {active: 1}}\nstages:\n  train: {target: activ}\n",
      /* bundled files, so the full check runs: logq is no column of the CSV */
      "workflow: x\nsets:\n  train:\n    - {path: data/delaney_first60.csv, labels: [logq]}\nstages:\n"
      "  train: {target: logq}\n",
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    int full = 0;
    char *why = NULL;
    cr_expect_eq(check_block(bad[i], &full, &why), 1, "not caught:\n%s", bad[i]);
    free(why);
  }
  /* and right ones pass, the one of bundled files through the full check */
  int full = 0;
  char *why = NULL;
  cr_expect_eq(check_block("# fragment\nstages:\n  train: {epochs: 2, arch: {layers: 1}}\n", &full, &why), 0, "%s",
               why ? why : "");
  free(why);
  cr_expect_eq(check_block("workflow: x\nsets:\n  train:\n    - {path: data/delaney_first60.csv, labels: [logp]}\n"
                           "stages:\n  train: {target: logp}\n",
                           &full, &why),
               0, "%s", why ? why : "");
  cr_expect_eq(full, 1, "a workflow of bundled files was not checked in full");
  free(why);
}
