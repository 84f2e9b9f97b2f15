/* query.h — `se3screen query`: SQL on a result database, read-only. */
#ifndef SE3_QUERY_H
#define SE3_QUERY_H

#include <stddef.h>
#include <stdio.h>

#include <sqlite3.h>

enum query_format { QUERY_TABLE, QUERY_CSV, QUERY_JSON };

/* What one query may cost. 0 in a field means no limit. */
struct query_limits {
  double timeout_s;    /* wall-clock seconds for all the statements together */
  long long max_rows;  /* rows printed, all statements together */
  long long max_bytes; /* bytes of values printed (text and blobs as stored; 8 per number) */
};

#define QUERY_DEFAULT_TIMEOUT_S 60.0
#define QUERY_DEFAULT_MAX_ROWS 1000000LL
#define QUERY_DEFAULT_MAX_BYTES (1LL << 30)

/* Checks every statement in sql first: only reading is allowed (no writes,
 * ATTACH, VACUUM, transactions, state-changing pragmas, or functions that
 * reach outside the query). Then runs them and prints the rows of those that
 * return rows (CSV as export writes it: RFC 4180, and a text cell that a
 * spreadsheet would run as a formula with a ' in front, common/csvcell.h).
 * lim->timeout_s bounds waiting for another process's lock as well. Returns
 * an exit code: 0; 1 on an SQL error, a locked database, or when a limit
 * stopped it (what was printed before stays, the message says so); 2 when
 * the database cannot be opened or a statement is not allowed. */
int query_run(const char *db_path, const char *sql, enum query_format fmt, const struct query_limits *lim, FILE *out);

/* ---- the same guard for other verbs that run a user's SQL (export) ------ */

/* A database opened read-only behind query's guard: query_only, the
 * authorizer that allows reading only, the length and ATTACH limits. */
struct query_conn;

/* Opens db_path so. Messages go to stderr as "WHO: ...". timeout_s > 0 ends
 * whatever runs on the connection, waiting for another process's lock
 * included (the opening's too), that many seconds after the call. Returns
 * 0, or an exit code (2: cannot be opened as a se3screen database; 1:
 * locked by another process, or other) with the message printed and *qc
 * NULL. */
int query_open(struct query_conn **qc, const char *db_path, const char *who, double timeout_s);
sqlite3 *query_db(const struct query_conn *qc);
/* Prepares sql, which must be exactly one statement, and one that only reads
 * (the same checks as `query`). Returns 0 with *st set, or an exit code with
 * the message printed: 2 for a statement that is not allowed, for more than
 * one statement or for none; 1 for an SQL error (no such table ...). */
int query_prepare_one(struct query_conn *qc, const char *sql, sqlite3_stmt **st);
/* After sqlite3_step on the connection returned neither SQLITE_ROW nor
 * SQLITE_DONE: prints why (a refusal that only showed when the statement
 * ran, the timeout, or SQLite's message) and returns the exit code. */
int query_step_failed(struct query_conn *qc);
void query_close(struct query_conn *qc);

/* Values as CSV and `export` write them. A REAL is the shortest of %.15g,
 * %.16g and %.17g that reads back as the same double, with ".0" added where
 * it would otherwise look like an integer (so readers keep it a float), and
 * "inf"/"-inf" for infinities. */
void query_real_text(double v, char *buf, size_t n);
/* Column i of the current row as text (malloc'd; NULL only when out of
 * memory): NULL as "", REAL by query_real_text, blobs as "<N bytes>". */
char *query_value_text(sqlite3_stmt *st, int i);

#endif
