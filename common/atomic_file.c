/* atomic_file.c — temporary file, fsync, rename, fsync the folder (atomic_file.h). */
#define _GNU_SOURCE
#include "common/atomic_file.h"

#include "common/error.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- the registry of open temporaries, for signal handlers -------------- */

/* A slot is FREE, BUSY (its name being written: a handler skips it) or LIVE
 * (it names a temporary that may exist). The handler reads only LIVE slots,
 * whose names do not change until the slot is freed; the states are
 * lock-free atomics, so reading them in a handler is safe. A name is
 * registered before its file is created and dropped after the file is
 * renamed or removed, so at every moment an existing temporary is LIVE (a
 * handler that unlinks a name not yet or no longer there does nothing). */
enum { REG_FREE, REG_BUSY, REG_LIVE };
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "the signal registry needs lock-free atomic ints");
static char reg_name[ATOMIC_FILE_SLOTS][PATH_MAX];
static atomic_int reg_state[ATOMIC_FILE_SLOTS];

/* 1 + the slot now naming name, or 0 when every slot is taken or the name
 * does not fit (the file is then written as usual, only not removed by a
 * signal). */
static int reg_add(const char *name) {
  size_t n = strlen(name);
  if (n >= PATH_MAX) return 0;
  for (int i = 0; i < ATOMIC_FILE_SLOTS; i++) {
    int expect = REG_FREE;
    if (atomic_compare_exchange_strong(&reg_state[i], &expect, REG_BUSY)) {
      memcpy(reg_name[i], name, n + 1);
      atomic_store(&reg_state[i], REG_LIVE);
      return i + 1;
    }
  }
  return 0;
}

static void reg_drop(int slot) {
  if (slot > 0 && slot <= ATOMIC_FILE_SLOTS) atomic_store(&reg_state[slot - 1], REG_FREE);
}

void atomic_file_cleanup_on_signal(void) {
  int saved = errno; /* a handler must leave errno as it found it */
  for (int i = 0; i < ATOMIC_FILE_SLOTS; i++)
    if (atomic_load(&reg_state[i]) == REG_LIVE) unlink(reg_name[i]);
  errno = saved;
}

/* ---- the writer ---------------------------------------------------------- */

static void clear(struct atomic_file *a) {
  reg_drop(a->slot);
  free(a->tmp);
  free(a->path);
  memset(a, 0, sizeof *a);
}

/* 64 bits nobody else can predict, for the temporary's name: the kernel's
 * (getrandom); where it has none to give, the clock, the pid and a counter
 * mixed (unpredictable enough against a name planted in advance; O_EXCL |
 * O_NOFOLLOW make a guessed name harmless anyway). */
static uint64_t random64(void) {
  uint64_t r;
  if (getrandom(&r, sizeof r, GRND_NONBLOCK) == (ssize_t)sizeof r) return r;
  static atomic_uint_fast64_t counter;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  r = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ ((uint64_t)getpid() << 48) ^
      atomic_fetch_add(&counter, 0x9e3779b97f4a7c15ULL);
  r ^= r >> 30; /* splitmix64's finaliser */
  r *= 0xbf58476d1ce4e5b9ULL;
  r ^= r >> 27;
  r *= 0x94d049bb133111ebULL;
  return r ^ (r >> 31);
}

static const char *kind_of(mode_t m) {
  return S_ISLNK(m)    ? "symbolic link"
         : S_ISDIR(m)  ? "folder"
         : S_ISCHR(m)  ? "character device"
         : S_ISBLK(m)  ? "block device"
         : S_ISFIFO(m) ? "FIFO"
         : S_ISSOCK(m) ? "socket"
                       : "special file";
}

/* What lstat says of path may be replaced: 0, or -1 with why not. */
static int refuse_kind(const char *path, mode_t m, struct se3_error *err) {
  if (S_ISREG(m)) return 0;
  if (S_ISLNK(m))
    se3_error_set(err, SE3_ERR_IO,
                  "%s is a symbolic link: se3screen neither writes through links nor replaces them; name the file "
                  "it points to, or another file",
                  path);
  else
    se3_error_set(err, SE3_ERR_IO,
                  "%s is a %s, not a regular file: se3screen replaces regular files only; name another file", path,
                  kind_of(m));
  return -1;
}

int atomic_file_open(struct atomic_file *a, const char *path, struct se3_error *err) {
  memset(a, 0, sizeof *a);
  a->mode = a->uid = a->gid = -1;
  struct stat st;
  if (lstat(path, &st) == 0) {
    if (refuse_kind(path, st.st_mode, err)) return -1;
    a->mode = (int)(st.st_mode & 0777);
    a->uid = (int)st.st_uid;
    a->gid = (int)st.st_gid;
  } else if (errno != ENOENT) {
    se3_error_set(err, SE3_ERR_IO, "cannot look at it: %s", strerror(errno));
    se3_error_at(err, path, 0, 0);
    return -1;
  }
  /* (a missing folder is reported below, by the create, as "No such file") */
  if (!(a->path = strdup(path))) {
    se3_error_set(err, SE3_ERR_MEMORY, "out of memory");
    se3_error_at(err, path, 0, 0);
    clear(a);
    return -1;
  }
  /* Over an existing file the temporary is 0600 until commit gives it the
   * old mode; a new file is created 0666 and the umask (and the folder's
   * default ACL) decide, exactly as for fopen. */
  int fd = -1;
  for (int tries = 0; fd < 0; tries++) {
    free(a->tmp);
    if (asprintf(&a->tmp, "%s.tmp-%d-%016llx", path, (int)getpid(), (unsigned long long)random64()) < 0) {
      a->tmp = NULL;
      se3_error_set(err, SE3_ERR_MEMORY, "out of memory");
      se3_error_at(err, path, 0, 0);
      clear(a);
      return -1;
    }
    a->slot = reg_add(a->tmp);
    fd = open(a->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, a->mode >= 0 ? 0600 : 0666);
    if (fd >= 0) break;
    int e = errno;
    reg_drop(a->slot); /* not ours: never unlink it */
    a->slot = 0;
    if (e == EEXIST && tries < 100) continue;
    se3_error_set(err, SE3_ERR_IO, "cannot create %s: %s", a->tmp, strerror(e));
    se3_error_at(err, path, 0, 0);
    clear(a);
    return -1;
  }
  a->f = fdopen(fd, "wb");
  if (!a->f) {
    se3_error_set(err, SE3_ERR_IO, "cannot write %s: %s", a->tmp, strerror(errno));
    se3_error_at(err, path, 0, 0);
    close(fd);
    unlink(a->tmp);
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

int atomic_file_commit(struct atomic_file *a, struct se3_error *err) {
  if (!a->f) {
    se3_error_set(err, SE3_ERR_IO, "not open for writing");
    se3_error_at(err, a->path ? a->path : "(no file)", 0, 0);
    atomic_file_abort(a);
    return -1;
  }
  int e = 0;
  if (ferror(a->f)) {
    se3_error_set(err, SE3_ERR_IO, "a write to %s failed", a->tmp);
    se3_error_at(err, a->path, 0, 0);
    atomic_file_abort(a);
    return -1;
  }
  int fd = fileno(a->f);
  if (fflush(a->f) != 0) e = errno ? errno : EIO;
  if (!e && a->mode >= 0) {
    /* the old file's owner where we may give it (root; a group we are in),
     * then its permission bits (after: a change of owner may clear some) */
    if ((uid_t)a->uid != geteuid() || (gid_t)a->gid != getegid()) {
      if (fchown(fd, (uid_t)a->uid, (gid_t)a->gid) != 0 && fchown(fd, (uid_t)-1, (gid_t)a->gid) != 0) {
        /* not allowed: the new file is ours, with the old mode */
      }
    }
    if (fchmod(fd, (mode_t)a->mode) != 0) e = errno;
  }
  if (!e && fsync(fd) != 0) e = errno ? errno : EIO;
  if (e) {
    se3_error_set(err, SE3_ERR_IO, "cannot write %s: %s", a->tmp, strerror(e));
    se3_error_at(err, a->path, 0, 0);
    atomic_file_abort(a);
    return -1;
  }
  int closed = fclose(a->f);
  a->f = NULL;
  if (closed != 0) {
    se3_error_set(err, SE3_ERR_IO, "cannot write %s: %s", a->tmp, strerror(errno));
    se3_error_at(err, a->path, 0, 0);
    atomic_file_abort(a);
    return -1;
  }
  /* PATH may have changed while we wrote: look again (rename would replace
   * a link, a device or a FIFO put there meanwhile without a word) */
  struct stat st;
  if (lstat(a->path, &st) == 0 && refuse_kind(a->path, st.st_mode, err)) {
    atomic_file_abort(a);
    return -1;
  }
  if (rename(a->tmp, a->path) != 0) {
    se3_error_set(err, SE3_ERR_IO, "cannot replace it with %s: %s", a->tmp, strerror(errno));
    se3_error_at(err, a->path, 0, 0);
    atomic_file_abort(a);
    return -1;
  }
  /* renamed: the new contents are in place; a failed folder sync only means
   * the rename might not survive a power cut, which the caller must hear */
  e = sync_dir(a->path);
  if (e) {
    se3_error_set(err, SE3_ERR_IO, "written, but its folder cannot be synced: %s", strerror(e));
    se3_error_at(err, a->path, 0, 0);
  }
  clear(a);
  return e ? -1 : 0;
}

int atomic_file_write(const char *path, const void *data, size_t n, struct se3_error *err) {
  struct atomic_file a;
  if (atomic_file_open(&a, path, err)) return -1;
  if (n && fwrite(data, 1, n, a.f) != n) {
    se3_error_set(err, SE3_ERR_IO, "cannot write %s: %s", a.tmp, strerror(errno ? errno : EIO));
    se3_error_at(err, path, 0, 0);
    atomic_file_abort(&a);
    return -1;
  }
  return atomic_file_commit(&a, err);
}

/* ---- outputs that must not be inputs ------------------------------------- */

/* The folder holding path and its last name (the name without trailing
 * slashes): 0, or -1 when the folder cannot be looked at. */
static int folder_and_name(const char *path, struct stat *folder, char **name) {
  char *copy = strdup(path), *copy2 = strdup(path);
  int rc = -1;
  if (copy && copy2 && stat(dirname(copy), folder) == 0) {
    *name = strdup(basename(copy2));
    rc = *name ? 0 : -1;
  }
  free(copy);
  free(copy2);
  return rc;
}

int atomic_file_same(const char *a, const char *b) {
  struct stat sa, sb;
  int ha = stat(a, &sa) == 0, hb = stat(b, &sb) == 0;
  if (ha && hb) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  if (ha || hb) return 0; /* one exists, the other does not */
  char *na = NULL, *nb = NULL;
  int same = folder_and_name(a, &sa, &na) == 0 && folder_and_name(b, &sb, &nb) == 0 && sa.st_dev == sb.st_dev &&
             sa.st_ino == sb.st_ino && !strcmp(na, nb);
  free(na);
  free(nb);
  return same;
}

int atomic_file_keep_add(struct atomic_file_keep *k, const char *path) {
  if (k->n == k->cap) {
    size_t cap = k->cap ? 2 * k->cap : 16;
    char **p = realloc(k->path, cap * sizeof *p);
    if (!p) return -1;
    k->path = p;
    k->cap = cap;
  }
  if (!(k->path[k->n] = strdup(path))) return -1;
  k->n++;
  return 0;
}

void atomic_file_keep_free(struct atomic_file_keep *k) {
  for (size_t i = 0; i < k->n; i++)
    free(k->path[i]);
  free(k->path);
  memset(k, 0, sizeof *k);
}

int atomic_file_check_keep(const struct atomic_file_keep *k, const char *out, struct se3_error *err) {
  for (size_t i = 0; i < k->n; i++)
    if (atomic_file_same(out, k->path[i])) {
      if (!strcmp(out, k->path[i]))
        se3_error_set(err, SE3_ERR_USAGE,
                      "%s is a file this command reads: writing it would destroy it; name another file", out);
      else
        se3_error_set(err, SE3_ERR_USAGE,
                      "%s is %s (the same file), which this command reads: writing it would destroy it; name "
                      "another file",
                      out, k->path[i]);
      return -1;
    }
  return 0;
}
