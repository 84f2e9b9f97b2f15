/* store_schema.h — the database's schema (store_schema.c): its SQL and its
 * Markdown. Part of the store's public API (pipeline/store.h includes it);
 * store_schema.c stands on store_sql.h alone, below store.c. */
#ifndef SE3_STORE_SCHEMA_H
#define SE3_STORE_SCHEMA_H

#include <stdio.h>

#include "pipeline/store_sql.h"

/* The version-1 schema as SQL; later versions add to it (store_schema.c,
 * `migrations`). docs/formats.md shows them all. */
extern const char store_schema_sql[];

/* The schema as Markdown (docs/schema.md, `se3screen schema`): every table,
 * view and index of the current version, each column with its type and
 * constraints and the meaning its comment in the SQL gives, and the version
 * that added it. Generated from the migrations themselves, so it cannot
 * drift from them. 0, or -1 when the SQL holds something it cannot read. */
int store_schema_doc(FILE *out);

#endif
