/* atomic_file.h — replace a file atomically: write a temporary file in the
 * same folder, flush and fsync it, rename it over PATH, then fsync the
 * folder so the rename itself survives a power cut. A kill or a failure at
 * any moment leaves either the old PATH or the new one, never a torn file;
 * on failure the temporary file is removed and PATH untouched.
 *
 * Used for every file se3screen writes outside the database: checkpoints
 * (models/checkpoint.c), the rank stage's hits.csv and hits.sdf, report.html
 * and `export`'s output.
 *
 * What it will not do, whoever runs it (root included):
 *   - follow a symbolic link. The temporary is PATH.tmp-PID-RANDOM (64 bits
 *     from getrandom), created with O_CREAT | O_EXCL | O_NOFOLLOW, a new name
 *     tried when one is taken: a link planted where the temporary will be
 *     cannot be guessed, and would not be opened if it were. A PATH that is
 *     itself a symbolic link is refused (neither written through nor
 *     replaced: "name the file it points to, or another one"), so nobody who
 *     can put a link in an output folder chooses what se3screen overwrites.
 *   - replace anything but a regular file: a device (-o /dev/null), a FIFO,
 *     a socket or a folder as PATH is refused with a message saying what it
 *     is, and left as it was.
 *   - change a file's permissions: the new PATH gets the old one's
 *     permission bits (a 0600 file stays 0600; as root, its owner too); a new
 *     file gets 0666 less the umask, as fopen gives. The temporary is 0600
 *     while it is written over an existing file.
 *   - leave a temporary behind when a signal stops the process: open
 *     temporaries are listed in a small fixed registry that
 *     atomic_file_cleanup_on_signal() empties from a signal handler (a
 *     SIGKILL still can).
 *
 * And for commands whose output must not be one of their inputs,
 * atomic_file_same() and struct atomic_file_keep compare files by device
 * and inode (after following links), so another spelling of the path, a
 * hard link and a symbolic link are all the same file.
 */
#ifndef SE3_ATOMIC_FILE_H
#define SE3_ATOMIC_FILE_H

#include <stddef.h>
#include <stdio.h>

struct se3_error;

struct atomic_file {
  FILE *f;      /* write here between open and commit */
  char *path;   /* the file to replace */
  char *tmp;    /* PATH.tmp-<pid>-<random> */
  int mode;     /* the old file's permission bits, -1 for a new file */
  int uid, gid; /* the old file's owner, -1 for a new file */
  int slot;     /* 1 + the signal registry's slot naming tmp; 0 none */
};

/* Creates the temporary file. 0, or -1 with a message naming it in err
 * (a is then cleared; nothing to abort): PATH is a symbolic link or not a
 * regular file, or the temporary cannot be created. */
int atomic_file_open(struct atomic_file *a, const char *path, struct se3_error *err);
/* Checks every write, gives the temporary the old file's mode, fsyncs,
 * renames over PATH and fsyncs the folder. 0, or -1 with a message naming
 * the file and the error (the temporary file is removed, PATH untouched).
 * a is cleared either way. */
int atomic_file_commit(struct atomic_file *a, struct se3_error *err);
/* Gives up: closes and removes the temporary file, PATH untouched. Safe on a
 * cleared struct. */
void atomic_file_abort(struct atomic_file *a);
/* The three in one: PATH's new contents are the n bytes at data. */
int atomic_file_write(const char *path, const void *data, size_t n, struct se3_error *err);

/* Removes every temporary file this process has open (atomic_file_open'd,
 * neither committed nor aborted). Async-signal-safe (unlink(2) and atomic
 * loads only): for signal handlers that end the process, e.g.
 *   static void stop(int sig) { atomic_file_cleanup_on_signal(); _exit(75); }
 * The registry holds ATOMIC_FILE_SLOTS temporaries at once; one opened
 * beyond that (or with a name longer than PATH_MAX) is written as usual but
 * not removed by a signal. */
enum { ATOMIC_FILE_SLOTS = 8 };
void atomic_file_cleanup_on_signal(void);

/* 1 when a and b name the same file: when both exist, the same device and
 * inode (symbolic links followed); when either does not, the same folder (by
 * device and inode) and the same last name (a database's -wal file that is
 * not there yet). 0 otherwise. */
int atomic_file_same(const char *a, const char *b);

/* Files an output must not replace: a command's inputs. */
struct atomic_file_keep {
  char **path;
  size_t n, cap;
};
/* Adds a copy of path: 0, or -1 out of memory. */
int atomic_file_keep_add(struct atomic_file_keep *k, const char *path);
void atomic_file_keep_free(struct atomic_file_keep *k);
/* 0 when out is none of k's files (atomic_file_same), else -1 with
 * a message naming out and the file it is ("OUT is KEPT (the same file),
 * which this command reads: ... name another file") in err. */
int atomic_file_check_keep(const struct atomic_file_keep *k, const char *out, struct se3_error *err);

#endif
