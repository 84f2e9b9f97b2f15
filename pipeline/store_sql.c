/* store_sql.c — the small SQL helpers under the store (pipeline/store_sql.h). */
#define _GNU_SOURCE
#include "pipeline/store_sql.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int store_exec(sqlite3 *db, const char *sql, struct se3_error *err) {
  char *msg = NULL;
  if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
    se3_error_set(err, SE3_ERR_DB, "%s", msg ? msg : sqlite3_errmsg(db));
    se3_error_at(err, sqlite3_db_filename(db, "main"), 0, 0);
    sqlite3_free(msg);
    return -1;
  }
  return 0;
}

long long store_int(sqlite3 *db, const char *sql, long long dflt) {
  sqlite3_stmt *st = NULL;
  long long v = dflt;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW &&
      sqlite3_column_type(st, 0) != SQLITE_NULL)
    v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return v;
}

char *store_text(sqlite3 *db, const char *sql) {
  sqlite3_stmt *st = NULL;
  char *out = NULL;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW &&
      sqlite3_column_text(st, 0))
    out = strdup((const char *)sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  return out;
}
