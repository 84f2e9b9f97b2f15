/* atomic_file.h — replace a file atomically: write a temporary file in the
 * same folder (PATH.tmp-<pid>), flush and fsync it, rename it over PATH, then
 * fsync the folder so the rename itself survives a power cut. A kill or a
 * failure at any moment leaves either the old PATH or the new one, never a
 * torn file; on failure the temporary file is removed and PATH untouched.
 *
 * Used for every file se3screen writes outside the database: checkpoints
 * (models/checkpoint.c) and the rank stage's hits.csv and hits.sdf.
 */
#ifndef SE3_ATOMIC_FILE_H
#define SE3_ATOMIC_FILE_H

#include <stddef.h>
#include <stdio.h>

struct atomic_file {
  FILE *f;    /* write here between open and commit */
  char *path; /* the file to replace */
  char *tmp;  /* PATH.tmp-<pid> */
};

/* Creates the temporary file. 0, or -1 with a message naming it in err
 * (a is then cleared; nothing to abort). */
int atomic_file_open(struct atomic_file *a, const char *path, char *err, size_t errlen);
/* Checks every write, fsyncs, renames over PATH and fsyncs the folder.
 * 0, or -1 with a message naming the file and the error (the temporary file
 * is removed, PATH untouched). a is cleared either way. */
int atomic_file_commit(struct atomic_file *a, char *err, size_t errlen);
/* Gives up: closes and removes the temporary file, PATH untouched. Safe on a
 * cleared struct. */
void atomic_file_abort(struct atomic_file *a);
/* The three in one: PATH's new contents are the n bytes at data. */
int atomic_file_write(const char *path, const void *data, size_t n, char *err, size_t errlen);

#endif
