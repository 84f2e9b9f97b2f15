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
