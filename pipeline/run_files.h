/* run_files.h — the files a run on a result database reads and writes, so
 * that a command's output option can refuse to name one of them: `report
 * -o WORKDIR/screen.db` would otherwise replace the database with a page,
 * `-o WORKDIR/models/train-0/best.ckpt` a checkpoint, `-o data/lib.sdf` an
 * input (issue 30). Files are compared by device and inode
 * (common/atomic_file.h: atomic_file_same), so another spelling of a path,
 * a hard link and a symbolic link are caught as well as the path itself.
 * It reads the result database, so it lives in pipeline/, which owns it;
 * what a workdir holds, which ingest checks its inputs against too, is
 * common/workdir.h's.
 */
#ifndef SE3_PIPELINE_RUN_FILES_H
#define SE3_PIPELINE_RUN_FILES_H

#include <stddef.h>

#include "common/atomic_file.h"
#include "common/error.h"

/* Adds to k the files of the result database db_path and of its workdir
 * (the folder holding it):
 *   - the database and its companions: -wal, -shm, -journal, .lock (these
 *     whether they exist now or not);
 *   - every file in shards/, with the companions of each shard database;
 *   - every file under models/ (checkpoints), four folders deep;
 *   - what the database says the run read: the workflow file (meta) and the
 *     molecule files (molecules.source_file and rejects.source_file,
 *     relative to the workflow's folder), when the database can be read
 *     (it is opened read-only here; an unreadable one adds nothing more).
 * Label files (labels_csv) are not recorded in the database and not added.
 * 0, or -1 out of memory. */
int run_files_list(const char *db_path, struct atomic_file_keep *k);

/* Refuses out ("-", standard output, is always fine) when it is one of
 * run_files_list(db_path): 0, or -1 with a message naming both in err. */
int run_files_check_output(const char *db_path, const char *out, struct se3_error *err);

#endif
