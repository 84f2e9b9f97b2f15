/* fsutil.c — folders made or removed whole, files kept under a second name (fsutil.h). */
#define _GNU_SOURCE
#include "common/fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

int se3_mkdirs(const char *path) {
  char tmp[PATH_MAX];
  if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp) return errno = ENAMETOOLONG, -1;
  for (char *p = tmp + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return -1;
    *p = '/';
  }
  return mkdir(tmp, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

int se3_keep_file(const char *src, const char *dst) {
  if (unlink(dst) != 0 && errno != ENOENT) return -1;
  if (link(src, dst) == 0) return 0;
  if (errno != EPERM && errno != EXDEV && errno != EMLINK && errno != ENOTSUP) return -1;
  int in = open(src, O_RDONLY | O_CLOEXEC), out = -1, ok = 0;
  if (in >= 0) out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (out >= 0) {
    char buf[1 << 16];
    ssize_t n;
    ok = 1;
    while (ok && (n = read(in, buf, sizeof buf)) != 0) {
      if (n < 0 && errno == EINTR) continue;
      ok = n > 0 && write(out, buf, (size_t)n) == n;
    }
    ok = ok && fsync(out) == 0;
  }
  int e = errno;
  if (out >= 0 && close(out) != 0 && ok) {
    ok = 0;
    e = errno;
  }
  if (in >= 0) close(in);
  if (ok) return 0;
  if (out >= 0) unlink(dst);
  errno = e;
  return -1;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  remove(path); /* (what cannot be removed is left) */
  return 0;
}

void se3_rm_tree(const char *dir) {
  if (dir && dir[0]) nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

int se3_open_regular(const char *path, struct stat *sb) {
  sb->st_mode = 0;
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return -1;
  int e = 0;
  if (fstat(fd, sb) != 0) {
    e = errno;
    sb->st_mode = 0;
  } else if (!S_ISREG(sb->st_mode)) {
    e = EINVAL;
  } else {
    int fl = fcntl(fd, F_GETFL);
    if (fl == -1 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) == -1) {
      e = errno;
      sb->st_mode = 0;
    }
  }
  if (!e) return fd;
  close(fd);
  errno = e;
  return -1;
}
