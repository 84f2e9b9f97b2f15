/* verify.h — `se3screen verify`: is a result database (and its workdir's
 * checkpoints) intact? */
#ifndef SE3_VERIFY_H
#define SE3_VERIFY_H

#include <stdio.h>

/* Checks the database at `path` (a file, or a workdir whose screen.db is
 * used), opened read-only: SQLite's integrity_check (quick_check when
 * `quick`), then every stored blob of molecules, graphs and bases decoded
 * and its checksum compared; for a workdir also every training checkpoint
 * under models/. Then every stored molecule's shapes held against the
 * bounds of chem/shape.h. Prints a summary to out (rows checked per table,
 * damaged rows with table and id, the first `max_listed`; shapes out of
 * bounds, the first few, as a warning: they are not damage). Returns an
 * exit code: 0 all intact (shapes out of bounds or not), 1 damage found (or
 * the database cannot be read), 2 when the path does not exist. */
int verify_run(const char *path, int quick, int max_listed, FILE *out);

#endif
