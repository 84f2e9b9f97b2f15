/* store_internal.h — what pipeline/store.c asks of pipeline/store_schema.c;
 * not for use elsewhere (the public API is pipeline/store.h).
 *
 *   store.c         opening (read-only and to write), the lock
 *   store_schema.c  the schema's SQL, version by version, the migration
 *                   that runs it, and `se3screen schema`'s Markdown
 *   store_sql.c     under both: the version, struct store, the SQL
 *                   helpers store_exec, store_int and store_text
 *
 * The calls run one way: store.c -> store_schema.c -> store_sql.c.
 */
#ifndef SE3_STORE_INTERNAL_H
#define SE3_STORE_INTERNAL_H

#include <stddef.h>

#include "pipeline/store_schema.h"

/* Brings s's database forward to STORE_SCHEMA_VERSION, each migration in
 * turn inside one transaction (BEGIN IMMEDIATE, the version read again
 * under the lock). A database that is neither se3screen's nor empty, or
 * of a newer version, is refused with err set. keep_open: the transaction
 * is left open for the caller to go on in and commit (`upgrade`: the
 * schema and the stages' conversion land together or not at all); it is
 * open only when there was a migration to run. 0, or -1 with err set. */
int store_migrate(struct store *s, int keep_open, struct se3_error *err);

#endif
