/* store.h — the SQLite database of a workdir: open, schema, migrations, lock.
 *
 * Every database se3screen writes carries application_id 0x53453353 ("SE3S")
 * and a user_version equal to the schema version; opening checks both and
 * migrates older schemas forward in one transaction. Tables are STRICT.
 */
#ifndef SE3_STORE_H
#define SE3_STORE_H

#include <stddef.h>
#include <sqlite3.h>
#include <stdio.h>

#include "common/error.h"

/* the schema (store_schema.h), and under it store_sql.h: the schema
 * version, struct store, store_exec, store_int, store_text */
#include "pipeline/store_schema.h"

/* STORE_WRITE refuses a database of an older schema version (it names
 * `se3screen upgrade`); STORE_UPGRADE migrates it (pipeline/upgrade.c),
 * leaving the migration's transaction open when there was one to run
 * (sqlite3_get_autocommit says), for the caller to go on in and commit. */
enum store_mode { STORE_READONLY, STORE_WRITE, STORE_UPGRADE };

/* Open (and for STORE_WRITE create, for STORE_UPGRADE migrate) a database.
 * journal is "wal" or "delete". Returns 0, or -1 with a message naming the
 * file and the reason in err (-2: the database is locked by another process
 * beyond busy_timeout_ms, the message says so). STORE_WRITE refuses a file
 * that is neither a se3screen database of this schema version nor empty,
 * and STORE_UPGRADE one that is not a se3screen database of this version or
 * older, before anything is written to it: a refused file keeps its bytes
 * and its journal mode. Both write only at path itself: a path that is a
 * symbolic link (dangling or not), a file with other names (hard links:
 * SQLite keeps a journal, a WAL and locks per name), anything but a regular
 * file, or one in a folder this process cannot write is refused, naming it;
 * SQLite opens the file by its folder's real path without following a link
 * (SQLITE_OPEN_NOFOLLOW), so its -wal, -shm and -journal lie beside it.
 * STORE_READONLY reads a regular file only, with the FTS3 tokenizer
 * function, extensions and untrusted schema functions off; where the WAL
 * index (-shm) cannot be created (a read-only directory or mount) it opens
 * the file as immutable and, when a -wal file is thereby not read, says so
 * in s->note. A read-only opening leaves the folder as it found it: where
 * neither -wal nor -shm existed, store_close removes those SQLite made for
 * it, as SQLite's last connection does, once no other connection has the
 * database open (one that does keeps them: they are its). A wait for a lock
 * (busy_timeout_ms) is one budget for the whole opening. */
int store_open(struct store *s, const char *path, enum store_mode mode, const char *journal, int busy_timeout_ms,
               struct se3_error *err);
/* store_open for STORE_WRITE or STORE_UPGRADE with the lock (store_lock)
 * taken first: the path is checked as store_open checks it, the lock taken,
 * and only then is the database opened, read or migrated. So a database
 * another se3screen is writing (or migrating) is refused at once by its
 * holder's name, never waited for or read half-made; run and upgrade open
 * their databases so. Returns as store_open does. */
int store_open_locked(struct store *s, const char *path, enum store_mode mode, const char *journal, int busy_timeout_ms,
                      struct se3_error *err);
void store_close(struct store *s);

/* Attaches the database at path read-only as `schema`: a transaction of
 * s's that writes (BEGIN IMMEDIATE) then takes no write lock on it, so
 * processes writing their own databases while reading one in common do not
 * queue for its lock. 0, or -1 with err set. */
int store_attach_readonly(struct store *s, const char *path, const char *schema, struct se3_error *err);

/* Take the single-writer lock for this database (a lock file beside it).
 * Fails at once, naming the holder (host, pid, since when), if another
 * process holds it. The lock file is never followed through a symbolic link
 * and must be a regular file with one name (anything else is refused,
 * naming it); it is written (the holder's line) only once the lock is held. */
int store_lock(struct store *s, struct se3_error *err);

#endif
