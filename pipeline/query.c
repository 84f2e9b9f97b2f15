/* query.c — `se3screen query`: SQL on a result database, read-only. */
#define _GNU_SOURCE
#include "pipeline/query.h"

#include <stdlib.h>
#include <string.h>

#include "pipeline/runner.h"
#include "pipeline/store.h"

static void csv_field(FILE *out, const char *s) {
  if (!s) return;
  if (!strpbrk(s, ",\"\n\r")) {
    fputs(s, out);
    return;
  }
  fputc('"', out);
  for (; *s; s++) {
    if (*s == '"') fputc('"', out);
    fputc(*s, out);
  }
  fputc('"', out);
}

static void json_string(FILE *out, const char *s) {
  fputc('"', out);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(out, "\\%c", c);
    else if (c == '\n') fputs("\\n", out);
    else if (c == '\t') fputs("\\t", out);
    else if (c < 0x20) fprintf(out, "\\u%04x", c);
    else fputc(c, out);
  }
  fputc('"', out);
}

/* Text of a value for table and CSV output; blobs as <N bytes>. */
static char *cell_text(sqlite3_stmt *st, int i) {
  char *s = NULL;
  switch (sqlite3_column_type(st, i)) {
  case SQLITE_NULL: return strdup("");
  case SQLITE_BLOB:
    if (asprintf(&s, "<%d bytes>", sqlite3_column_bytes(st, i)) < 0) s = NULL;
    return s;
  default: return strdup((const char *)sqlite3_column_text(st, i));
  }
}

static int print_stmt(sqlite3_stmt *st, enum query_format fmt, FILE *out, int *first_json) {
  int nc = sqlite3_column_count(st);
  int rc;
  if (fmt == QUERY_CSV) {
    for (int i = 0; i < nc; i++) {
      if (i) fputc(',', out);
      csv_field(out, sqlite3_column_name(st, i));
    }
    fputc('\n', out);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
      for (int i = 0; i < nc; i++) {
        if (i) fputc(',', out);
        char *c = cell_text(st, i);
        csv_field(out, c);
        free(c);
      }
      fputc('\n', out);
    }
    return rc;
  }
  if (fmt == QUERY_JSON) {
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
      fputs(*first_json ? "\n  {" : ",\n  {", out);
      *first_json = 0;
      for (int i = 0; i < nc; i++) {
        if (i) fputs(", ", out);
        json_string(out, sqlite3_column_name(st, i));
        fputs(": ", out);
        switch (sqlite3_column_type(st, i)) {
        case SQLITE_NULL: fputs("null", out); break;
        case SQLITE_INTEGER: fprintf(out, "%lld", (long long)sqlite3_column_int64(st, i)); break;
        case SQLITE_FLOAT: {
          /* Shortest form that reads back as the same double. */
          double v = sqlite3_column_double(st, i);
          char b[32];
          for (int p = 15; p <= 17; p++) {
            snprintf(b, sizeof b, "%.*g", p, v);
            if (strtod(b, NULL) == v) break;
          }
          fputs(b, out);
          break;
        }
        case SQLITE_BLOB: fprintf(out, "{\"blob_bytes\": %d}", sqlite3_column_bytes(st, i)); break;
        default: json_string(out, (const char *)sqlite3_column_text(st, i));
        }
      }
      fputc('}', out);
    }
    return rc;
  }
  /* Table: buffer the rows to size the columns. */
  size_t n_rows = 0, cap = 0;
  char **cells = NULL;
  int *w = calloc((size_t)nc, sizeof *w);
  for (int i = 0; i < nc; i++) w[i] = (int)strlen(sqlite3_column_name(st, i));
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if ((n_rows + 1) * (size_t)nc > cap) {
      cap = cap ? cap * 2 : (size_t)nc * 64;
      cells = realloc(cells, cap * sizeof *cells);
    }
    for (int i = 0; i < nc; i++) {
      char *c = cell_text(st, i);
      if ((int)strlen(c) > w[i]) w[i] = (int)strlen(c);
      cells[n_rows * (size_t)nc + (size_t)i] = c;
    }
    n_rows++;
  }
  for (int i = 0; i < nc; i++) fprintf(out, "%s%-*s", i ? "  " : "", w[i], sqlite3_column_name(st, i));
  fputc('\n', out);
  for (int i = 0; i < nc; i++) {
    fprintf(out, "%s", i ? "  " : "");
    for (int k = 0; k < w[i]; k++) fputc('-', out);
  }
  fputc('\n', out);
  for (size_t r = 0; r < n_rows; r++) {
    for (int i = 0; i < nc; i++) {
      char *c = cells[r * (size_t)nc + (size_t)i];
      int numeric = sqlite3_column_type(st, i) != SQLITE_TEXT && c[0] && strspn(c, "-+.0123456789eE") == strlen(c);
      fprintf(out, "%s%*s", i ? "  " : "", numeric ? w[i] : -w[i], c);
      free(c);
    }
    fputc('\n', out);
  }
  free(cells);
  free(w);
  return rc;
}

int query_run(const char *db_path, const char *sql, enum query_format fmt, FILE *out) {
  struct store s;
  char err[1024];
  if (store_open(&s, db_path, STORE_READONLY, NULL, 10000, err, sizeof err)) {
    fprintf(stderr, "se3screen query: %s\n", err);
    return SE3_EXIT_USAGE;
  }
  sqlite3_exec(s.db, "PRAGMA query_only=1", NULL, NULL, NULL);
  const char *tail = sql;
  int ret = SE3_EXIT_OK, first_json = 1;
  if (fmt == QUERY_JSON) fputc('[', out);
  while (tail && *tail) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s.db, tail, -1, &st, &tail) != SQLITE_OK) {
      fprintf(stderr, "se3screen query: %s\n", sqlite3_errmsg(s.db));
      ret = SE3_EXIT_FAILED;
      break;
    }
    if (!st) continue; /* whitespace or a comment */
    int rc = print_stmt(st, fmt, out, &first_json);
    if (rc != SQLITE_DONE) {
      fprintf(stderr, "se3screen query: %s\n", sqlite3_errmsg(s.db));
      ret = SE3_EXIT_FAILED;
    }
    sqlite3_finalize(st);
    if (ret) break;
  }
  if (fmt == QUERY_JSON) fputs(first_json ? "]\n" : "\n]\n", out);
  store_close(&s);
  return ret;
}
