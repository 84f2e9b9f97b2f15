/* query.c — `se3screen query`: SQL on a result database, read-only.
 *
 * Read-only in four layers: the file is opened read-only with the FTS3
 * tokenizer function, extensions and untrusted schema functions off
 * (store.c); PRAGMA query_only; an authorizer that allows reading and
 * nothing else; and sqlite3_stmt_readonly() on every statement (VACUUM,
 * VACUUM INTO and journal_mode changes reach no authorizer action). Every
 * statement is checked before the first one runs. A progress handler ends a
 * query at --timeout, and a busy handler a wait for another process's lock
 * at the same deadline; --max-rows and --max-bytes bound what it prints.
 * CSV cells are written as export writes them (common/csvcell.h): text a
 * spreadsheet would run as a formula gets a ' in front. */
#define _GNU_SOURCE
#include "pipeline/query.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/csvcell.h"
#include "pipeline/runner.h"
#include "pipeline/store.h"
#include "pipeline/config.h"

/* Length of the well-formed UTF-8 sequence at s (1-4), 0 when it is not one
 * (stray continuation bytes, overlong forms, surrogates, past U+10FFFF). */
static int utf8_len(const unsigned char *s) {
  unsigned c = s[0];
  int n = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
  if (n <= 1) return n;
  unsigned cp = c & (0x7fu >> n);
  for (int k = 1; k < n; k++) {
    if ((s[k] & 0xc0) != 0x80) return 0;
    cp = cp << 6 | (s[k] & 0x3fu);
  }
  static const unsigned least[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < least[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

/* A JSON string. SQLite hands text back as it was stored, and a molecule's
 * title read from an old SD file may be Latin-1: bytes that are not UTF-8
 * become U+FFFD, so that the output is always valid JSON a parser accepts. */
static void json_string(FILE *out, const char *str) {
  const unsigned char *s = (const unsigned char *)str;
  fputc('"', out);
  while (*s) {
    unsigned char c = *s;
    int n = utf8_len(s);
    if (!n) {
      fputs("\\ufffd", out);
      s++;
      continue;
    }
    if (c == '"' || c == '\\')
      fprintf(out, "\\%c", c);
    else if (c == '\n')
      fputs("\\n", out);
    else if (c == '\t')
      fputs("\\t", out);
    else if (c == '\r')
      fputs("\\r", out);
    else if (c < 0x20 || c == 0x7f)
      fprintf(out, "\\u%04x", c);
    else
      fwrite(s, 1, (size_t)n, out);
    s += n;
  }
  fputc('"', out);
}

void query_real_text(double v, char *buf, size_t n) {
  if (isinf(v)) {
    snprintf(buf, n, v > 0 ? "inf" : "-inf");
    return;
  }
  if (isnan(v)) { /* SQLite stores NaN as NULL; a function may still return one */
    snprintf(buf, n, "nan");
    return;
  }
  csv_double_text(v, buf, n);
  if (!strpbrk(buf, ".e")) {
    size_t k = strlen(buf);
    if (k + 2 < n) memcpy(buf + k, ".0", 3);
  }
}

/* Text of a value for table (exact = 0: SQLite's own text, 15 digits, for
 * people) and CSV (exact = 1: numbers that read back as stored, for
 * scripts); NULL as "", blobs as <N bytes>. */
static char *cell_text(sqlite3_stmt *st, int i, int exact) {
  char *s = NULL;
  switch (sqlite3_column_type(st, i)) {
  case SQLITE_NULL:
    return strdup("");
  case SQLITE_BLOB:
    if (asprintf(&s, "<%d bytes>", sqlite3_column_bytes(st, i)) < 0) s = NULL;
    return s;
  case SQLITE_FLOAT:
    if (exact) {
      char b[40];
      query_real_text(sqlite3_column_double(st, i), b, sizeof b);
      return strdup(b);
    }
    /* fall through */
  default: {
    const char *t = (const char *)sqlite3_column_text(st, i);
    return t ? strdup(t) : NULL;
  }
  }
}

char *query_value_text(sqlite3_stmt *st, int i) { return cell_text(st, i, 1); }

/* ---- the guard: reading only ---------------------------------------------- */

struct guard {
  char why[256]; /* what the authorizer refused, for the message */
};

static const char *const action_names[] = {
    [SQLITE_CREATE_INDEX] = "CREATE INDEX",
    [SQLITE_CREATE_TABLE] = "CREATE TABLE",
    [SQLITE_CREATE_TEMP_INDEX] = "CREATE TEMP INDEX",
    [SQLITE_CREATE_TEMP_TABLE] = "CREATE TEMP TABLE",
    [SQLITE_CREATE_TEMP_TRIGGER] = "CREATE TEMP TRIGGER",
    [SQLITE_CREATE_TEMP_VIEW] = "CREATE TEMP VIEW",
    [SQLITE_CREATE_TRIGGER] = "CREATE TRIGGER",
    [SQLITE_CREATE_VIEW] = "CREATE VIEW",
    [SQLITE_DELETE] = "DELETE",
    [SQLITE_DROP_INDEX] = "DROP INDEX",
    [SQLITE_DROP_TABLE] = "DROP TABLE",
    [SQLITE_DROP_TEMP_INDEX] = "DROP TEMP INDEX",
    [SQLITE_DROP_TEMP_TABLE] = "DROP TEMP TABLE",
    [SQLITE_DROP_TEMP_TRIGGER] = "DROP TEMP TRIGGER",
    [SQLITE_DROP_TEMP_VIEW] = "DROP TEMP VIEW",
    [SQLITE_DROP_TRIGGER] = "DROP TRIGGER",
    [SQLITE_DROP_VIEW] = "DROP VIEW",
    [SQLITE_INSERT] = "INSERT",
    [SQLITE_PRAGMA] = "PRAGMA",
    [SQLITE_TRANSACTION] = "BEGIN/COMMIT/ROLLBACK",
    [SQLITE_UPDATE] = "UPDATE",
    [SQLITE_ATTACH] = "ATTACH",
    [SQLITE_DETACH] = "DETACH",
    [SQLITE_ALTER_TABLE] = "ALTER TABLE",
    [SQLITE_REINDEX] = "REINDEX",
    [SQLITE_ANALYZE] = "ANALYZE",
    [SQLITE_CREATE_VTABLE] = "CREATE VIRTUAL TABLE",
    [SQLITE_DROP_VTABLE] = "DROP VIRTUAL TABLE",
    [SQLITE_SAVEPOINT] = "SAVEPOINT",
};

/* Functions that reach outside the query: set a pointer SQLite later calls,
 * load code, touch files (the last ones exist only where an application adds
 * them), or hand out FTS5's C interface. */
static const char *const denied_functions[] = {"fts3_tokenizer", "load_extension", "readfile", "writefile",
                                               "edit",           "fts5",           "zipfile",  NULL};

/* Pragmas that only read. The first group takes an argument naming what to
 * describe; the second only in its reading form, without a value. */
static const char *const pragmas_with_arg[] = {
    "table_info",       "table_xinfo",       "table_list",      "index_info",  "index_xinfo", "index_list",
    "foreign_key_list", "foreign_key_check", "integrity_check", "quick_check", NULL};
static const char *const pragmas_read_only[] = {"application_id", "user_version",  "schema_version",  "data_version",
                                                "page_size",      "page_count",    "freelist_count",  "encoding",
                                                "auto_vacuum",    "database_list", "collation_list",  "function_list",
                                                "module_list",    "pragma_list",   "compile_options", NULL};

static int in_list(const char *const *list, const char *name) {
  for (; name && *list; list++)
    if (!sqlite3_stricmp(*list, name)) return 1;
  return 0;
}

/* Records the first refusal of a statement (SQLite goes on asking after one). */
static int deny(struct guard *g, const char *fmt, const char *x, const char *y) {
  if (!g->why[0]) snprintf(g->why, sizeof g->why, fmt, x, y);
  return SQLITE_DENY;
}

static int query_authorize(void *ctx, int action, const char *a1, const char *a2, const char *dbname,
                           const char *trigger) {
  struct guard *g = ctx;
  (void)dbname;
  (void)trigger;
  if (!a1) a1 = "?";
  switch (action) {
  case SQLITE_SELECT:
  case SQLITE_READ:
  case SQLITE_RECURSIVE:
    return SQLITE_OK;
  case SQLITE_FUNCTION:
    if (!a2 || !in_list(denied_functions, a2)) return SQLITE_OK;
    return deny(g, "function %s()%s", a2, "");
  case SQLITE_PRAGMA:
    if (in_list(pragmas_with_arg, a1) || (!a2 && in_list(pragmas_read_only, a1))) return SQLITE_OK;
    if (a2) return deny(g, "PRAGMA %s=%s", a1, a2);
    return deny(g, "PRAGMA %s%s", a1, "");
  case SQLITE_UPDATE:
    /* Setting up an eponymous virtual table (pragma_table_info(),
     * json_each()) asks for these and writes nothing. A real write to the
     * schema table is still refused: it is not a read-only statement, and
     * the connection is read-only, query_only and defensive. */
    if ((!strcmp(a1, "sqlite_master") || !strcmp(a1, "sqlite_temp_master"))) return SQLITE_OK;
    return deny(g, "UPDATE %s%s", a1, "");
  case SQLITE_INSERT:
    return deny(g, "INSERT into %s%s", a1, "");
  case SQLITE_DELETE:
    return deny(g, "DELETE from %s%s", a1, "");
  case SQLITE_ATTACH:
    return deny(g, "ATTACH '%s'%s", a1, "");
  default:
    break;
  }
  const char *name = action >= 0 && action < (int)(sizeof action_names / sizeof action_names[0]) && action_names[action]
                         ? action_names[action]
                         : "this statement";
  int names_object = action >= SQLITE_CREATE_INDEX && action <= SQLITE_DROP_VIEW;
  return names_object && a1 ? deny(g, "%s %s", name, a1) : deny(g, "%s%s", name, "");
}

/* ---- the connection ---------------------------------------------------- */

struct query_conn {
  struct store s;
  struct guard g;
  const char *who;  /* "se3screen query", "se3screen export": the messages' prefix */
  double timeout_s; /* 0: none */
  double deadline;  /* CLOCK_MONOTONIC seconds; 0: none */
  int timed_out;
  int locked_out; /* a lock another process held outlasted --timeout */
};

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int query_progress(void *ctx) {
  struct query_conn *qc = ctx;
  if (qc->deadline > 0 && now_s() > qc->deadline) qc->timed_out = 1;
  return qc->timed_out;
}

/* Waiting for another process's lock counts against --timeout too: 1 (try
 * again, after up to 10 ms) until the deadline, then 0 (SQLITE_BUSY). */
static int query_busy(void *ctx, int n_waits) {
  struct query_conn *qc = ctx;
  (void)n_waits;
  double left = qc->deadline - now_s();
  if (left <= 0) {
    qc->timed_out = qc->locked_out = 1;
    return 0;
  }
  struct timespec d = {0, left < 0.01 ? (long)(left * 1e9) : 10000000L};
  nanosleep(&d, NULL);
  return 1;
}

int query_open(struct query_conn **out, const char *db_path, const char *who, double timeout_s) {
  *out = NULL;
  struct query_conn *qc = calloc(1, sizeof *qc);
  if (!qc) {
    fprintf(stderr, "%s: out of memory\n", who);
    return SE3_EXIT_FAILED;
  }
  qc->who = who;
  struct se3_error err;
  /* a lock is waited for until --timeout (without one, 10 s: SQLite's wait
   * as every verb has it) */
  double opened = now_s();
  int busy_ms =
      timeout_s > 0 ? (timeout_s < 3600 * 24 ? (int)(timeout_s * 1000) : 3600 * 24 * 1000) : cfg_busy_timeout_ms(NULL);
  int rc = store_open(&qc->s, db_path, STORE_READONLY, NULL, busy_ms, &err);
  if (rc) {
    if (rc == -2 && timeout_s > 0)
      fprintf(stderr, "%s: %s: in use: another process holds a lock on it; stopped after %g s (--timeout)\n", who,
              db_path, timeout_s);
    else
      fprintf(stderr, "%s: %s\n", who, se3_error_str(&err).s);
    free(qc);
    return rc == -2 ? SE3_EXIT_FAILED : SE3_EXIT_USAGE;
  }
  if (qc->s.note) fprintf(stderr, "%s: note: %s\n", who, qc->s.note);
  if (store_exec(qc->s.db, "PRAGMA query_only=1", &err)) {
    fprintf(stderr, "%s: %s\n", who, se3_error_str(&err).s);
    query_close(qc);
    return SE3_EXIT_FAILED;
  }
  sqlite3_limit(qc->s.db, SQLITE_LIMIT_ATTACHED, 0);
  sqlite3_limit(qc->s.db, SQLITE_LIMIT_LENGTH, 256 << 20);
  sqlite3_set_authorizer(qc->s.db, query_authorize, &qc->g);
  if (timeout_s > 0) {
    qc->timeout_s = timeout_s;
    qc->deadline = opened + timeout_s;
    sqlite3_progress_handler(qc->s.db, 1000, query_progress, qc);
    sqlite3_busy_handler(qc->s.db, query_busy, qc);
  }
  *out = qc;
  return SE3_EXIT_OK;
}

sqlite3 *query_db(const struct query_conn *qc) { return qc->s.db; }

void query_close(struct query_conn *qc) {
  if (!qc) return;
  store_close(&qc->s);
  free(qc);
}

/* First words of statements that change something. */
static const char *const writing_words[] = {"INSERT", "REPLACE",  "UPDATE",    "DELETE",  "CREATE",  "DROP",  "ALTER",
                                            "ATTACH", "DETACH",   "VACUUM",    "REINDEX", "ANALYZE", "BEGIN", "COMMIT",
                                            "END",    "ROLLBACK", "SAVEPOINT", "RELEASE", NULL};

/* The statement's first word, in capitals, for a message. */
static void first_word(const char *sql, char *buf, size_t n) {
  while (*sql == ' ' || *sql == '\t' || *sql == '\n' || *sql == '\r')
    sql++;
  size_t k = 0;
  while (k + 1 < n && sql[k] && ((sql[k] >= 'a' && sql[k] <= 'z') || (sql[k] >= 'A' && sql[k] <= 'Z'))) {
    buf[k] = sql[k] >= 'a' ? (char)(sql[k] - 'a' + 'A') : sql[k];
    k++;
  }
  buf[k] = 0;
  if (!k) snprintf(buf, n, "this statement");
}

/* Prepares the next statement at *tail and checks that it only reads.
 * Returns 0 with *out set (NULL where only whitespace or a comment was
 * left), or an exit code with the message printed; a timeout prints nothing
 * here (the caller says it once). */
static int check_next(struct query_conn *qc, const char **tail, sqlite3_stmt **out) {
  const char *start = *tail;
  sqlite3_stmt *st = NULL;
  *out = NULL;
  qc->g.why[0] = 0;
  if (sqlite3_prepare_v2(qc->s.db, start, -1, &st, tail) != SQLITE_OK) {
    char word[32];
    first_word(start, word, sizeof word);
    if (qc->g.why[0]) {
      fprintf(stderr, "%s: not allowed: %s (query is read-only)\n", qc->who, qc->g.why);
      return SE3_EXIT_USAGE;
    }
    if (in_list(writing_words, word)) {
      /* refused by SQLite before the authorizer saw it (the schema table,
       * a table that does not exist): still a write */
      fprintf(stderr, "%s: not allowed: %s (query is read-only; SQLite says: %s)\n", qc->who, word,
              sqlite3_errmsg(qc->s.db));
      return SE3_EXIT_USAGE;
    }
    if (!qc->timed_out) fprintf(stderr, "%s: %s\n", qc->who, sqlite3_errmsg(qc->s.db));
    return SE3_EXIT_FAILED;
  }
  if (!st) return SE3_EXIT_OK; /* whitespace or a comment */
  if (!sqlite3_stmt_readonly(st)) {
    char word[32];
    first_word(start, word, sizeof word);
    fprintf(stderr, "%s: not allowed: %s (query is read-only)\n", qc->who, word);
    sqlite3_finalize(st);
    return SE3_EXIT_USAGE;
  }
  *out = st;
  return SE3_EXIT_OK;
}

static void say_timeout(const struct query_conn *qc) {
  if (qc->locked_out)
    fprintf(stderr, "%s: %s: in use: another process holds a lock on it; stopped after %g s (--timeout)\n", qc->who,
            qc->s.path, qc->timeout_s);
  else
    fprintf(stderr, "%s: stopped after %g s (--timeout)\n", qc->who, qc->timeout_s);
}

int query_prepare_one(struct query_conn *qc, const char *sql, sqlite3_stmt **out) {
  *out = NULL;
  const char *tail = sql;
  sqlite3_stmt *st = NULL;
  int rc;
  while (!st && tail && *tail)
    if ((rc = check_next(qc, &tail, &st))) {
      if (qc->timed_out) say_timeout(qc);
      return rc;
    }
  if (!st) {
    fprintf(stderr, "%s: the SQL holds no statement\n", qc->who);
    return SE3_EXIT_USAGE;
  }
  /* Anything after it must be whitespace or comments. Prepared, not run:
   * a second statement is refused whatever it is, before anything runs. */
  while (tail && *tail) {
    sqlite3_stmt *more = NULL;
    const char *before = tail;
    if (sqlite3_prepare_v2(qc->s.db, before, -1, &more, &tail) != SQLITE_OK || more) {
      sqlite3_finalize(more);
      sqlite3_finalize(st);
      fprintf(stderr, "%s: one statement only, and the SQL holds more (from '%.40s')\n", qc->who,
              before + strspn(before, " \t\r\n;"));
      return SE3_EXIT_USAGE;
    }
  }
  qc->g.why[0] = 0;
  *out = st;
  return SE3_EXIT_OK;
}

int query_step_failed(struct query_conn *qc) {
  if (qc->g.why[0]) { /* pragma table-valued functions ask when they run */
    fprintf(stderr, "%s: not allowed: %s (query is read-only)\n", qc->who, qc->g.why);
    qc->g.why[0] = 0;
    return SE3_EXIT_USAGE;
  }
  if (qc->timed_out)
    say_timeout(qc);
  else if ((sqlite3_errcode(qc->s.db) & 0xff) == SQLITE_BUSY)
    fprintf(stderr, "%s: %s: in use: another process holds a lock on it (%s)\n", qc->who, qc->s.path,
            sqlite3_errmsg(qc->s.db));
  else
    fprintf(stderr, "%s: %s\n", qc->who, sqlite3_errmsg(qc->s.db));
  return SE3_EXIT_FAILED;
}

/* ---- limits on what is printed ----------------------------------------- */

struct qrun {
  enum query_format fmt;
  FILE *out;
  int first_json;
  struct query_limits lim;
  long long n_rows, n_bytes;
  const char *stopped_by; /* "--max-rows" or "--max-bytes" once a limit cut the output */
  int no_memory;
};

/* sqlite3_step, counting what is printed: a row past --max-rows or
 * --max-bytes ends the statement as if it were done, and q->stopped_by says
 * which limit. */
static int step_row(sqlite3_stmt *st, struct qrun *q) {
  if (q->stopped_by) return SQLITE_DONE;
  int rc = sqlite3_step(st);
  if (rc != SQLITE_ROW) return rc;
  long long bytes = 0;
  for (int i = 0, nc = sqlite3_column_count(st); i < nc; i++) {
    int t = sqlite3_column_type(st, i);
    bytes += t == SQLITE_TEXT || t == SQLITE_BLOB ? sqlite3_column_bytes(st, i) : 8;
  }
  if (q->lim.max_rows > 0 && q->n_rows + 1 > q->lim.max_rows)
    q->stopped_by = "--max-rows";
  else if (q->lim.max_bytes > 0 && q->n_bytes + bytes > q->lim.max_bytes)
    q->stopped_by = "--max-bytes";
  if (q->stopped_by) return SQLITE_DONE;
  q->n_rows++;
  q->n_bytes += bytes;
  return SQLITE_ROW;
}

/* ---- printing ---------------------------------------------------------- */

static int print_stmt(sqlite3_stmt *st, struct qrun *q) {
  FILE *out = q->out;
  int nc = sqlite3_column_count(st);
  int rc;
  if (q->fmt == QUERY_CSV) {
    for (int i = 0; i < nc; i++) {
      if (i) fputc(',', out);
      csv_cell_write(out, sqlite3_column_name(st, i), 1);
    }
    fputc('\n', out);
    while ((rc = step_row(st, q)) == SQLITE_ROW) {
      for (int i = 0; i < nc; i++) {
        if (i) fputc(',', out);
        int text = sqlite3_column_type(st, i) == SQLITE_TEXT; /* read before the value is converted */
        char *c = cell_text(st, i, 1);
        if (!c) return q->no_memory = 1, SQLITE_NOMEM;
        csv_cell_write(out, c, text);
        free(c);
      }
      fputc('\n', out);
    }
    return rc;
  }
  if (q->fmt == QUERY_JSON) {
    while ((rc = step_row(st, q)) == SQLITE_ROW) {
      fputs(q->first_json ? "\n  {" : ",\n  {", out);
      q->first_json = 0;
      for (int i = 0; i < nc; i++) {
        if (i) fputs(", ", out);
        json_string(out, sqlite3_column_name(st, i));
        fputs(": ", out);
        switch (sqlite3_column_type(st, i)) {
        case SQLITE_NULL:
          fputs("null", out);
          break;
        case SQLITE_INTEGER:
          fprintf(out, "%lld", (long long)sqlite3_column_int64(st, i));
          break;
        case SQLITE_FLOAT: {
          /* Shortest form that reads back as the same double, a float
           * to JSON readers too (5.0, not 5). JSON has no infinity: 1e999
           * is a number every parser reads as one (SQLite's json() writes
           * 9e999). NaN cannot be stored; null should a function return it. */
          double v = sqlite3_column_double(st, i);
          char b[40];
          query_real_text(v, b, sizeof b);
          fputs(isinf(v) ? (v > 0 ? "1e999" : "-1e999") : isnan(v) ? "null" : b, out);
          break;
        }
        case SQLITE_BLOB:
          fprintf(out, "{\"blob_bytes\": %d}", sqlite3_column_bytes(st, i));
          break;
        default:
          json_string(out, (const char *)sqlite3_column_text(st, i));
        }
      }
      fputc('}', out);
    }
    return rc;
  }
  /* Table: buffer the rows to size the columns (--max-rows and --max-bytes
   * bound the buffer). */
  size_t n_rows = 0, cap = 0;
  char **cells = NULL;
  int *w = calloc((size_t)nc + 1, sizeof *w);
  if (!w) return q->no_memory = 1, SQLITE_NOMEM;
  for (int i = 0; i < nc; i++)
    w[i] = (int)strlen(sqlite3_column_name(st, i));
  while ((rc = step_row(st, q)) == SQLITE_ROW) {
    if ((n_rows + 1) * (size_t)nc > cap) {
      size_t ncap = cap ? cap * 2 : (size_t)nc * 64;
      char **grown = realloc(cells, ncap * sizeof *cells);
      if (!grown) {
        rc = SQLITE_NOMEM;
        q->no_memory = 1;
        break;
      }
      cells = grown;
      cap = ncap;
    }
    int i = 0;
    for (; i < nc; i++) {
      char *c = cell_text(st, i, 0);
      if (!c) break;
      if ((int)strlen(c) > w[i]) w[i] = (int)strlen(c);
      cells[n_rows * (size_t)nc + (size_t)i] = c;
    }
    if (i < nc) {
      while (i-- > 0)
        free(cells[n_rows * (size_t)nc + (size_t)i]);
      rc = SQLITE_NOMEM;
      q->no_memory = 1;
      break;
    }
    n_rows++;
  }
  for (int i = 0; i < nc; i++)
    fprintf(out, "%s%-*s", i ? "  " : "", w[i], sqlite3_column_name(st, i));
  fputc('\n', out);
  for (int i = 0; i < nc; i++) {
    fprintf(out, "%s", i ? "  " : "");
    for (int k = 0; k < w[i]; k++)
      fputc('-', out);
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

/* ---- the verb ---------------------------------------------------------- */

int query_run(const char *db_path, const char *sql, enum query_format fmt, const struct query_limits *lim, FILE *out) {
  struct qrun q = {.fmt = fmt, .out = out, .first_json = 1};
  if (lim) q.lim = *lim;
  struct query_conn *qc = NULL;
  int ret = query_open(&qc, db_path, "se3screen query", q.lim.timeout_s);
  if (ret) return ret;
  sqlite3_stmt **stmts = NULL;
  size_t n_stmts = 0;
  /* Check every statement before running any. */
  const char *tail = sql;
  while (tail && *tail) {
    sqlite3_stmt *st = NULL;
    if ((ret = check_next(qc, &tail, &st))) goto done;
    if (!st) continue;
    sqlite3_stmt **grown = realloc(stmts, (n_stmts + 1) * sizeof *stmts);
    if (!grown) {
      sqlite3_finalize(st);
      fprintf(stderr, "se3screen query: out of memory\n");
      ret = SE3_EXIT_FAILED;
      goto done;
    }
    stmts = grown;
    stmts[n_stmts++] = st;
  }
  if (fmt == QUERY_JSON) fputc('[', out);
  qc->g.why[0] = 0;
  for (size_t k = 0; k < n_stmts && !ret && !q.stopped_by; k++) {
    int rc = print_stmt(stmts[k], &q);
    if (rc != SQLITE_DONE) {
      if (q.no_memory) {
        fprintf(stderr, "se3screen query: out of memory after %lld rows\n", q.n_rows);
        ret = SE3_EXIT_FAILED;
      } else if (qc->timed_out) {
        ret = SE3_EXIT_FAILED; /* said once, below */
      } else {
        ret = query_step_failed(qc);
      }
    }
  }
  if (fmt == QUERY_JSON) fputs(q.first_json ? "]\n" : "\n]\n", out);
  fflush(out);
  if (q.stopped_by) {
    fprintf(stderr, "se3screen query: output cut at %lld rows (%lld bytes) by %s %lld; the result has more\n", q.n_rows,
            q.n_bytes, q.stopped_by, !strcmp(q.stopped_by, "--max-rows") ? q.lim.max_rows : q.lim.max_bytes);
    ret = SE3_EXIT_FAILED;
  }
done:
  if (qc->timed_out) {
    say_timeout(qc);
    ret = SE3_EXIT_FAILED;
  }
  for (size_t k = 0; k < n_stmts; k++)
    sqlite3_finalize(stmts[k]);
  free(stmts);
  query_close(qc);
  return ret;
}
