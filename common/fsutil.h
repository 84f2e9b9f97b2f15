/* fsutil.h — folders made whole or removed whole, and files kept under a
 * second name.
 *
 * Leaf code any layer may use (it includes nothing of the project): the
 * runner, slurm and predict make their folders with it, acquire keeps
 * each round's checkpoints with it, dock removes its temporary folders
 * with it, and every reader of an untrusted input opens it with
 * se3_open_regular. */
#ifndef SE3_FSUTIL_H
#define SE3_FSUTIL_H

#include <sys/stat.h>

/* mkdir -p with mode 0755 (less the umask): path and every folder above it.
 * 0, or -1 with errno (ENAMETOOLONG for a path of PATH_MAX bytes or more). */
int se3_mkdirs(const char *path);

/* dst becomes another name of src's contents as they are now: a hard link
 * (a writer that replaces src by a rename leaves dst as it was), or a copy,
 * synced, where the file system has no links. An existing dst is replaced.
 * 0, or -1 with errno and no dst left behind. */
int se3_keep_file(const char *src, const char *dst);

/* rm -rf dir, not following symbolic links; what cannot be removed is left.
 * NULL or "" does nothing. */
void se3_rm_tree(const char *dir);

/* An input opened for reading without ever blocking: O_RDONLY | O_NONBLOCK
 * | O_CLOEXEC | O_NOCTTY (opening a FIFO without a writer returns at once),
 * fstat'ed into *sb, anything but a regular file (a FIFO, a device, a
 * folder) closed unread, then O_NONBLOCK cleared for the reads. The
 * descriptor, or -1 with errno: EINVAL and sb->st_mode its kind for a file
 * that is not regular, sb->st_mode 0 when the open or fstat failed. */
int se3_open_regular(const char *path, struct stat *sb);

#endif
