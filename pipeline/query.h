/* query.h — `se3screen query`: SQL on a result database, read-only. */
#ifndef SE3_QUERY_H
#define SE3_QUERY_H

#include <stdio.h>

enum query_format { QUERY_TABLE, QUERY_CSV, QUERY_JSON };

/* Runs every statement in sql; prints the rows of those that return rows.
 * Returns an exit code (0, 1 on SQL error, 2 when the database is missing). */
int query_run(const char *db_path, const char *sql, enum query_format fmt, FILE *out);

#endif
