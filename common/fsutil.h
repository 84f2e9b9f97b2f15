/* fsutil.h — folders made whole or removed whole, and files kept under a
 * second name.
 *
 * Leaf code any layer may use (it includes nothing of the project): the
 * runner, slurm and predict make their folders with it, acquire keeps
 * each round's checkpoints with it, and dock removes its temporary folders
 * with it. */
#ifndef SE3_FSUTIL_H
#define SE3_FSUTIL_H

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

#endif
