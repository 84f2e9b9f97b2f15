/* workdir.h — the files a run writes into its workdir, so that an input
 * cannot be one of them: WORKDIR/screen.db and its companions, shards,
 * checkpoints, hits.csv, hits.sdf and report.html (a previous screen's
 * hits.sdf named as this one's library would be replaced by its rank
 * stage). Files are compared by device and inode (common/atomic_file.h:
 * atomic_file_same), so another spelling of a path, a hard link and a
 * symbolic link are caught as well as the path itself. What a result
 * database says its run read is pipeline/run_files.h's: no SQL here.
 */
#ifndef SE3_WORKDIR_H
#define SE3_WORKDIR_H

#include <stddef.h>

#include "common/atomic_file.h"
#include "common/error.h"

/* Adds a/b/c (concatenated) to k. 0, or -1 out of memory. */
int workdir_add_fmt(struct atomic_file_keep *k, const char *a, const char *b, const char *c);
/* Adds the database db and its companions: -wal, -shm, -journal, .lock
 * (whether they exist now or not). 0, or -1 out of memory. */
int workdir_add_db(struct atomic_file_keep *k, const char *db);
/* Adds every regular file under folder, depth folders deep; with dbs, a
 * database (name.db) with its companions. A folder that cannot be read
 * adds nothing. 0, or -1 out of memory. */
int workdir_add_tree(struct atomic_file_keep *k, const char *folder, int depth, int dbs);

/* Refuses in, an input file of a run writing into workdir, when it is one
 * of the files that run writes. 0, or -1 with a message naming both in err. */
int workdir_check_input(const char *workdir, const char *in, struct se3_error *err);

#endif
