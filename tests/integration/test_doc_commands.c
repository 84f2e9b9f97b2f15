/* The help texts the user reads say only what se3screen does (issue 31):
 * every `se3screen VERB --option` that configs/defaults.yaml, docs/ (every .md) or
 * the README writes in backquotes names a verb that exists and an option
 * that `se3screen VERB --help` lists. configs/defaults.yaml's header once
 * sent the reader to `se3screen check --explain`, which never existed. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/testutil.h"

/* `se3screen VERB --help`'s text, asked once a verb; NULL when it fails */
static const char *help_of(const char *verb) {
  static char verbs[32][64], *helps[32];
  static int n;
  for (int i = 0; i < n; i++)
    if (!strcmp(verbs[i], verb)) return helps[i];
  cr_assert_lt(n, 32);
  snprintf(verbs[n], sizeof verbs[n], "%s", verb);
  if (tu_se3(&helps[n], "%s --help", verb) != 0) {
    free(helps[n]);
    helps[n] = NULL;
  }
  return helps[n++];
}

Test(doc_commands, every_command_named_exists) {
  char *out = NULL;
  /* each backquoted command as "FILE<TAB>VERB<TAB>COMMAND", one a line */
  int rc = tu_sh(&out,
                 "cd %s && for f in configs/defaults.yaml docs/*.md README.md; do "
                 "grep -ohE '`se3screen [a-z]+( [^`]*)?`' \"$f\" | sed \"s|^|$f\\t|\"; done",
                 tu_src("."));
  cr_assert_eq(rc, 0, "%s", out);
  int n = 0;
  for (char *line = out, *next; line && *line; line = next) {
    next = strchr(line, '\n');
    if (next) *next++ = 0;
    char *file = line, *cmd = strchr(line, '\t');
    cr_assert_not_null(cmd);
    *cmd++ = 0;
    char verb[64];
    cr_assert_eq(sscanf(cmd, "`se3screen %63[a-z]", verb), 1, "%s: %s", file, cmd);
    const char *help = help_of(verb);
    cr_expect(help, "%s: %s: there is no verb '%s'", file, cmd, verb);
    /* every --option of the command, in its verb's help */
    for (char *o = strstr(cmd, "--"); o; o = strstr(o + 2, "--")) {
      size_t k = 2 + strspn(o + 2, "abcdefghijklmnopqrstuvwxyz-");
      if (k == 2) continue;
      char opt[64];
      snprintf(opt, sizeof opt, "%.*s", (int)k, o);
      cr_expect(help && strstr(help, opt), "%s: %s: `se3screen %s --help` has no %s", file, cmd, verb, opt);
    }
    n++;
  }
  cr_assert_gt(n, 10, "only %d commands found: the pattern no longer matches the files", n);
  free(out);
}

/* GitHub's anchor of a heading: lower case, spaces to '-', '-' and '_' and
 * non-ASCII bytes kept, any other punctuation dropped */
static void slug(const char *h, size_t n, char *out, size_t size) {
  size_t k = 0;
  for (size_t i = 0; i < n && k + 1 < size; i++) {
    unsigned char c = (unsigned char)h[i];
    if (c >= 'A' && c <= 'Z') out[k++] = (char)(c - 'A' + 'a');
    else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c >= 0x80) out[k++] = (char)c;
    else if (c == ' ') out[k++] = '-';
  }
  out[k] = 0;
}

/* does the Markdown text have a heading (outside code fences) whose anchor is `anchor`? */
static int has_anchor(const char *md, const char *anchor) {
  int fence = 0;
  for (const char *l = md; l && *l;) {
    const char *end = strchr(l, '\n');
    size_t n = end ? (size_t)(end - l) : strlen(l);
    if (!strncmp(l, "```", 3)) fence = !fence;
    else if (!fence && *l == '#') {
      size_t h = strspn(l, "#");
      if (h < n && l[h] == ' ') {
        char s[512];
        slug(l + h + 1, n - h - 1, s, sizeof s);
        if (!strcmp(s, anchor)) return 1;
      }
    }
    l = end ? end + 1 : NULL;
  }
  return 0;
}

/* Every relative link of the README and docs/ leads somewhere: the file
 * exists and, with a #fragment, has that heading. The README's sections
 * moved to docs/ (issue 33); a link to where a section used to be fails. */
Test(doc_commands, every_link_resolves) {
  char *out = NULL;
  int rc = tu_sh(&out, "cd %s && ls README.md docs/*.md", tu_src("."));
  cr_assert_eq(rc, 0, "%s", out);
  int n_links = 0, n_anchors = 0;
  for (char *f = out, *next; f && *f; f = next) {
    next = strchr(f, '\n');
    if (next) *next++ = 0;
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", tu_src("."), f);
    char *md = tu_read(path, NULL);
    cr_assert(md, "cannot read %s", path);
    char dir[1200];
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = 0;
    int fence = 0;
    for (char *l = md; l && *l;) {
      char *end = strchr(l, '\n');
      if (!strncmp(l, "```", 3)) fence = !fence;
      for (char *p = fence ? NULL : strstr(l, "]("); p && (!end || p < end); p = strstr(p + 2, "](")) {
        int ticks = 0; /* inside an inline code span (a SMILES's "[N+](=O)") is no link */
        for (const char *c = l; c < p; c++) ticks += *c == '`';
        if (ticks % 2) continue;
        char target[600];
        if (sscanf(p + 2, "%599[^) \n]", target) != 1) continue;
        if (!strncmp(target, "http://", 7) || !strncmp(target, "https://", 8) || !strncmp(target, "mailto:", 7))
          continue;
        char *hash = strchr(target, '#');
        if (hash) *hash++ = 0;
        char *doc = md;
        char full[2000];
        if (*target) {
          snprintf(full, sizeof full, "%s/%s", dir, target);
          cr_expect(access(full, F_OK) == 0, "%s: the link (%s) leads to no file", f, target);
          doc = hash && access(full, F_OK) == 0 ? tu_read(full, NULL) : NULL;
        }
        if (hash && (doc || !*target)) {
          cr_expect(has_anchor(doc, hash), "%s: the link (%s#%s) names no heading there", f, target, hash);
          n_anchors++;
        }
        if (doc && doc != md) free(doc);
        n_links++;
      }
      l = end ? end + 1 : NULL;
    }
    free(md);
  }
  cr_log_info("%d links, %d of them to a heading", n_links, n_anchors);
  /* the README and docs link each other dozens of times: far fewer means the
   * pattern stopped matching */
  cr_assert_gt(n_links, 40, "only %d links found", n_links);
  cr_assert_gt(n_anchors, 3, "only %d links to headings found", n_anchors);
  free(out);
}
