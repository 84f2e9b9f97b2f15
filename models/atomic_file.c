/* atomic_file.c — temporary file, fsync, rename, fsync the folder (atomic_file.h). */
#define _GNU_SOURCE
#include "models/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void clear(struct atomic_file *a) {
  free(a->tmp);
  free(a->path);
  memset(a, 0, sizeof *a);
}

int atomic_file_open(struct atomic_file *a, const char *path, char *err, size_t errlen) {
  memset(a, 0, sizeof *a);
  if (asprintf(&a->tmp, "%s.tmp-%d", path, (int)getpid()) < 0) {
    a->tmp = NULL;
    snprintf(err, errlen, "%s: out of memory", path);
    return -1;
  }
  if (!(a->path = strdup(path))) {
    snprintf(err, errlen, "%s: out of memory", path);
    clear(a);
    return -1;
  }
  a->f = fopen(a->tmp, "wb");
  if (!a->f) {
    snprintf(err, errlen, "%s: cannot create %s: %s", path, a->tmp, strerror(errno));
    clear(a);
    return -1;
  }
  return 0;
}

void atomic_file_abort(struct atomic_file *a) {
  if (a->f) fclose(a->f);
  if (a->tmp) unlink(a->tmp);
  clear(a);
}

/* fsync the folder holding path: makes a rename in it durable. */
static int sync_dir(const char *path) {
  char *copy = strdup(path);
  if (!copy) return ENOMEM;
  int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int e = fd < 0 ? errno : 0;
  /* some file systems refuse fsync on folders (EINVAL): nothing more to do there */
  if (fd >= 0 && fsync(fd) != 0 && errno != EINVAL) e = errno;
  if (fd >= 0) close(fd);
  free(copy);
  return e;
}

int atomic_file_commit(struct atomic_file *a, char *err, size_t errlen) {
  if (!a->f) {
    snprintf(err, errlen, "%s: not open for writing", a->path ? a->path : "(no file)");
    atomic_file_abort(a);
    return -1;
  }
  int e = 0;
  if (ferror(a->f)) {
    snprintf(err, errlen, "%s: a write to %s failed", a->path, a->tmp);
    atomic_file_abort(a);
    return -1;
  }
  if (fflush(a->f) != 0 || fsync(fileno(a->f)) != 0) e = errno ? errno : EIO;
  if (e) {
    snprintf(err, errlen, "%s: cannot write %s: %s", a->path, a->tmp, strerror(e));
    atomic_file_abort(a);
    return -1;
  }
  int closed = fclose(a->f);
  a->f = NULL;
  if (closed != 0) {
    snprintf(err, errlen, "%s: cannot write %s: %s", a->path, a->tmp, strerror(errno));
    atomic_file_abort(a);
    return -1;
  }
  if (rename(a->tmp, a->path) != 0) {
    snprintf(err, errlen, "%s: cannot replace it with %s: %s", a->path, a->tmp, strerror(errno));
    atomic_file_abort(a);
    return -1;
  }
  /* renamed: the new contents are in place; a failed folder sync only means
   * the rename might not survive a power cut, which the caller must hear */
  e = sync_dir(a->path);
  if (e) snprintf(err, errlen, "%s: written, but its folder cannot be synced: %s", a->path, strerror(e));
  clear(a);
  return e ? -1 : 0;
}

int atomic_file_write(const char *path, const void *data, size_t n, char *err, size_t errlen) {
  struct atomic_file a;
  if (atomic_file_open(&a, path, err, errlen)) return -1;
  if (n && fwrite(data, 1, n, a.f) != n) {
    snprintf(err, errlen, "%s: cannot write %s: %s", path, a.tmp, strerror(errno ? errno : EIO));
    atomic_file_abort(&a);
    return -1;
  }
  return atomic_file_commit(&a, err, errlen);
}
