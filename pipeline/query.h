/* query.h — `se3screen query`: SQL on a result database, read-only. */
#ifndef SE3_QUERY_H
#define SE3_QUERY_H

#include <stdio.h>

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
 * return rows. Returns an exit code: 0; 1 on an SQL error, or when a limit
 * stopped it (what was printed before stays, the message says so); 2 when
 * the database cannot be opened or a statement is not allowed. */
int query_run(const char *db_path, const char *sql, enum query_format fmt, const struct query_limits *lim, FILE *out);

#endif
