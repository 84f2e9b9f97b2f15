/* store_sql.h — the floor under the store: what a se3screen database is
 * (its application_id and schema version), the open database (struct
 * store), and the small SQL helpers everything calls. store_sql.c calls
 * nothing of the store above it; store_schema.c (the schema, its
 * migrations) stands on it, and store.c (opening, the lock) on both:
 * store.c -> store_schema.c -> store_sql.c. Everything else includes
 * pipeline/store.h, which includes this.
 */
#ifndef SE3_STORE_SQL_H
#define SE3_STORE_SQL_H

#include <stddef.h>
#include <sqlite3.h>

#include "common/error.h"

#define STORE_APPLICATION_ID 0x53453353
#define STORE_SCHEMA_VERSION 16

struct store {
  sqlite3 *db;
  char *path;
  int lock_fd; /* -1 when not locked */
  char *lock_path;
  char *note; /* read-only opening: what the reader should know (NULL: nothing) */
  int tidy;   /* read-only opening: neither -wal nor -shm was there; store_close removes those SQLite made */
};

/* Run SQL that returns no rows; -1 on failure with err (kind SE3_ERR_DB)
 * SQLite's message at the database's file. */
int store_exec(sqlite3 *db, const char *sql, struct se3_error *err);
/* First column of the first row as an integer (dflt when no row). */
long long store_int(sqlite3 *db, const char *sql, long long dflt);
/* First column of the first row as text, malloc'd (NULL when no row, a NULL
 * value, or the statement fails). */
char *store_text(sqlite3 *db, const char *sql);

#endif
