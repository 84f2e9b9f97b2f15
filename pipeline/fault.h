/* fault.h — deterministic fault injection in SQLite's manner (issue 71).
 *
 * SE3_FAULT in the environment makes one chosen operation of this process
 * fail, so that a test can show every stage's error path and its resume:
 *
 *   SE3_FAULT=commit:N  the Nth commit of a write transaction (any database
 *                       opened to write, screen.db or a shard's) is turned
 *                       into a rollback: the caller sees an error
 *   SE3_FAULT=crash:N   the process is killed (SIGKILL, as `kill -9` would)
 *                       at the Nth commit, before it is made
 *   SE3_FAULT=write:N   the Nth write to any SQLite file (database, WAL,
 *                       journal) fails with SQLITE_IOERR_WRITE
 *   SE3_FAULT=alloc:N   SQLite's Nth allocation (malloc or realloc) fails
 *   SE3_FAULT=count     nothing fails
 *
 * Counts are per process, from 1, over all its connections and threads.
 * While SE3_FAULT is set, the process ends with a line on stderr saying
 * how many commits, writes and allocations it made ("SE3_FAULT: counted
 * 41 commits, 380 writes, 90211 allocations"): a test counts a run's
 * commits so, then walks N over them. A fault that fires says so on stderr
 * ("SE3_FAULT: failing commit 7 of .../screen.db").
 *
 * Compiled in with the CMake option SE3_FAULTS (ON by default: the one
 * build serves the tests). Without it a set SE3_FAULT is refused. */
#ifndef SE3_PIPELINE_FAULT_H
#define SE3_PIPELINE_FAULT_H

#include <sqlite3.h>
#include <stddef.h>

#include "common/error.h"

/* Reads SE3_FAULT once and installs what it asks for; to be called early in
 * main, before SQLite is first used (an allocation fault needs
 * SQLITE_CONFIG_MALLOC before sqlite3_initialize). 0 when SE3_FAULT is
 * unset, empty or valid; -1 with a message in err when it is malformed, or
 * set in a build without SE3_FAULTS. */
int fault_init(struct se3_error *err);

/* Counts (and fails, when asked) the commits of db, a connection opened to
 * write. Nothing when SE3_FAULT is unset. */
void fault_watch(sqlite3 *db);

#endif
