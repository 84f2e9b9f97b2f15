/* config_schema.c — configs/defaults.yaml as the schema: each key's entry
 * (type, default, min/max, values, hash, input, doc), the scalar types, paths
 * resolved against the file that wrote them, and input files that must exist.
 */
#define _GNU_SOURCE
#include "pipeline/config_internal.h"

#include <errno.h>
#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* ---- entries ------------------------------------------------------------------- */

const char *cfg_sch_type(const struct cfg_node *s) {
  const struct cfg_node *t = cfg_find_kid(s, "type");
  return t && t->kind == CFG_SCALAR ? t->value : NULL;
}

int cfg_sch_flag(const struct cfg_node *s, const char *key, int dflt) {
  const struct cfg_node *t = cfg_find_kid(s, key);
  if (!t || t->kind != CFG_SCALAR) return dflt;
  return strcmp(t->value, "true") == 0 || strcmp(t->value, "yes") == 0;
}

const char *cfg_sch_text(const struct cfg_node *s, const char *key) {
  const struct cfg_node *t = cfg_find_kid(s, key);
  return t && t->kind == CFG_SCALAR ? t->value : NULL;
}

/* ---- scalar types -------------------------------------------------------------- */

/* 1 = ok, 0 = not an integer, -1 = overflow */
int cfg_parse_int(const char *s, int64_t *out) {
  const char *q = s;
  if (*q == '+' || *q == '-') q++;
  if (!*q) return 0;
  for (; *q; q++)
    if (*q < '0' || *q > '9') return 0;
  errno = 0;
  long long v = strtoll(s, NULL, 10);
  if (errno) return -1;
  *out = v;
  return 1;
}

int cfg_parse_float(const char *s, double *out) {
  /* decimal only: no hex floats, inf or nan */
  if (!*s || strspn(s, "0123456789+-.eE") != strlen(s)) return 0;
  char *end;
  double v = strtod(s, &end);
  if (end == s || *end || !isfinite(v)) return 0;
  *out = v;
  return 1;
}

int cfg_parse_bool(const char *s, int *out) {
  static const char *yes[] = {"true", "yes", "on"}, *no[] = {"false", "no", "off"};
  for (int i = 0; i < 3; i++) {
    if (strcasecmp(s, yes[i]) == 0) {
      *out = 1;
      return 1;
    }
    if (strcasecmp(s, no[i]) == 0) {
      *out = 0;
      return 1;
    }
  }
  return 0;
}

/* ---- paths and input files ---------------------------------------------------- */

void cfg_resolve_path(struct ld *ld, struct cfg_node *n) {
  const char *v = n->value, *home = getenv("HOME");
  char *joined = NULL, *base = NULL;
  int rc;
  if (v[0] == '/') {
    rc = asprintf(&joined, "%s", v);
  } else if (v[0] == '~' && (v[1] == '/' || !v[1]) && home) {
    rc = asprintf(&joined, "%s/%s", home, v + 1);
  } else {
    if (cfg_is_set_node(n))
      base = strdup(ld->cwd); /* overrides come from the command line */
    else if (n->file[0] == '<')
      base = strdup(ld->wf_dir);
    else
      base = cfg_abs_dir(ld, n->file);
    rc = base ? asprintf(&joined, "%s/%s", base, v) : -1;
    free(base);
  }
  if (rc < 0) return;
  cfg_normalize_path(joined);
  free(n->value);
  n->value = joined;
}

/* Whether the load checks the input files of `stage`: ld->inputs is "*" or
 * names it among space-separated stage names. */
int cfg_wants_inputs_of(const struct ld *ld, const char *stage) {
  if (!ld->inputs) return 0;
  if (strcmp(ld->inputs, "*") == 0) return 1;
  size_t len = strlen(stage);
  for (const char *c = ld->inputs; (c = strstr(c, stage)); c += len)
    if ((c == ld->inputs || c[-1] == ' ') && (c[len] == ' ' || !c[len])) return 1;
  return 0;
}

/* An input file (a resolved path) must exist and not be a folder; a pattern
 * (as the ingest stage expands it) must match something. */
void cfg_check_input(struct ld *ld, const struct cfg_node *n, const struct path *p) {
  const char *v = n->value;
  if (strpbrk(v, "*?[")) {
    glob_t gl;
    int rc = glob(v, 0, NULL, &gl);
    if (rc == GLOB_NOMATCH)
      cfg_err_node(ld, n, cfg_path_str(p), "no file matches: %s", v);
    else if (rc != 0)
      cfg_err_node(ld, n, cfg_path_str(p), "cannot expand the pattern: %s", v);
    if (rc == 0) globfree(&gl);
    return;
  }
  struct stat sb;
  if (stat(v, &sb) != 0) {
    if (errno == ENOENT || errno == ENOTDIR)
      cfg_err_node(ld, n, cfg_path_str(p), "no such file: %s", v);
    else
      cfg_err_node(ld, n, cfg_path_str(p), "cannot access %s: %s", v, strerror(errno));
  } else if (S_ISDIR(sb.st_mode)) {
    cfg_err_node(ld, n, cfg_path_str(p), "a folder, not a file: %s", v);
  }
}
