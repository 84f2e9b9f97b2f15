/* fault.c — SE3_FAULT (fault.h): a commit hook on every connection opened to
 * write, a VFS shim registered as the default whose xWrite counts, and
 * SQLite's allocator wrapped (SQLITE_CONFIG_MALLOC), each failing the Nth
 * operation of its kind once. */
#define _GNU_SOURCE
#include "pipeline/fault.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef SE3_FAULTS

int fault_init(struct se3_error *err) {
  const char *v = getenv("SE3_FAULT");
  if (v && *v) {
    se3_error_set(err, SE3_ERR_USAGE,
                  "SE3_FAULT=%s: this se3screen was built without fault injection (cmake -DSE3_FAULTS=ON); unset "
                  "SE3_FAULT",
                  v);
    return -1;
  }
  return 0;
}

void fault_watch(sqlite3 *db) { (void)db; }

#else

enum fault_kind { FAULT_NONE, FAULT_COUNT, FAULT_COMMIT, FAULT_CRASH, FAULT_WRITE, FAULT_ALLOC };

static enum fault_kind kind = FAULT_NONE;
static long long at;                            /* N of kind:N */
static long long n_commits, n_writes, n_allocs; /* __atomic: any thread may commit, write or allocate */

/* Counts one more operation on counter: 1 when it is the one to fail. */
static int strikes(long long *counter, enum fault_kind k) {
  long long n = __atomic_add_fetch(counter, 1, __ATOMIC_RELAXED);
  return kind == k && n == at;
}

/* ---- commits ----------------------------------------------------------- */

static int on_commit(void *db) {
  long long n = __atomic_add_fetch(&n_commits, 1, __ATOMIC_RELAXED);
  const char *file = sqlite3_db_filename((sqlite3 *)db, "main");
  if (kind == FAULT_COMMIT && n == at) {
    fprintf(stderr, "SE3_FAULT: failing commit %lld of %s\n", n, file ? file : "?");
    return 1; /* SQLite rolls the transaction back; COMMIT returns SQLITE_CONSTRAINT_COMMITHOOK */
  }
  if (kind == FAULT_CRASH && n == at) {
    fprintf(stderr, "SE3_FAULT: killing the process at commit %lld of %s, before it is made\n", n, file ? file : "?");
    fflush(stderr);
    kill(getpid(), SIGKILL);
    _exit(137); /* (not reached) */
  }
  return 0;
}

void fault_watch(sqlite3 *db) {
  if (kind != FAULT_NONE) sqlite3_commit_hook(db, on_commit, db);
}

/* ---- writes: a VFS over the default one --------------------------------- */

static sqlite3_vfs *below; /* the default VFS before ours */
static sqlite3_vfs shim;

struct shim_file {
  sqlite3_file base;
  sqlite3_file *real; /* below's file, in the same allocation, after this */
  const char *name;   /* SQLite keeps it valid until xClose; NULL for a temporary file */
};

#define REAL(f) (((struct shim_file *)(f))->real)

static int f_close(sqlite3_file *f) { return REAL(f)->pMethods->xClose(REAL(f)); }
static int f_read(sqlite3_file *f, void *buf, int n, sqlite3_int64 off) {
  return REAL(f)->pMethods->xRead(REAL(f), buf, n, off);
}
static int f_write(sqlite3_file *f, const void *buf, int n, sqlite3_int64 off) {
  if (strikes(&n_writes, FAULT_WRITE)) {
    const char *name = ((struct shim_file *)f)->name;
    fprintf(stderr, "SE3_FAULT: failing write %lld (%d bytes at %lld of %s)\n", at, n, (long long)off,
            name ? name : "a temporary file");
    return SQLITE_IOERR_WRITE;
  }
  return REAL(f)->pMethods->xWrite(REAL(f), buf, n, off);
}
static int f_truncate(sqlite3_file *f, sqlite3_int64 size) { return REAL(f)->pMethods->xTruncate(REAL(f), size); }
static int f_sync(sqlite3_file *f, int flags) { return REAL(f)->pMethods->xSync(REAL(f), flags); }
static int f_size(sqlite3_file *f, sqlite3_int64 *size) { return REAL(f)->pMethods->xFileSize(REAL(f), size); }
static int f_lock(sqlite3_file *f, int l) { return REAL(f)->pMethods->xLock(REAL(f), l); }
static int f_unlock(sqlite3_file *f, int l) { return REAL(f)->pMethods->xUnlock(REAL(f), l); }
static int f_reserved(sqlite3_file *f, int *out) { return REAL(f)->pMethods->xCheckReservedLock(REAL(f), out); }
static int f_control(sqlite3_file *f, int op, void *arg) { return REAL(f)->pMethods->xFileControl(REAL(f), op, arg); }
static int f_sector(sqlite3_file *f) { return REAL(f)->pMethods->xSectorSize(REAL(f)); }
static int f_device(sqlite3_file *f) { return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f)); }
static int f_shm_map(sqlite3_file *f, int pg, int sz, int extend, void volatile **p) {
  return REAL(f)->pMethods->xShmMap(REAL(f), pg, sz, extend, p);
}
static int f_shm_lock(sqlite3_file *f, int off, int n, int flags) {
  return REAL(f)->pMethods->xShmLock(REAL(f), off, n, flags);
}
static void f_shm_barrier(sqlite3_file *f) { REAL(f)->pMethods->xShmBarrier(REAL(f)); }
static int f_shm_unmap(sqlite3_file *f, int del) { return REAL(f)->pMethods->xShmUnmap(REAL(f), del); }
static int f_fetch(sqlite3_file *f, sqlite3_int64 off, int n, void **p) {
  return REAL(f)->pMethods->xFetch(REAL(f), off, n, p);
}
static int f_unfetch(sqlite3_file *f, sqlite3_int64 off, void *p) {
  return REAL(f)->pMethods->xUnfetch(REAL(f), off, p);
}

/* One table per version of the file below: a method of a later version is
 * never offered over a file that lacks it. */
static sqlite3_io_methods io[3];

static int v_open(sqlite3_vfs *v, sqlite3_filename name, sqlite3_file *f, int flags, int *out) {
  (void)v;
  struct shim_file *s = (struct shim_file *)f;
  s->real = (sqlite3_file *)(s + 1);
  s->name = name;
  int rc = below->xOpen(below, name, s->real, flags, out);
  /* SQLite closes a file whose pMethods is set, even when the open failed */
  int ver = s->real->pMethods ? s->real->pMethods->iVersion : 0;
  s->base.pMethods = ver < 1 ? NULL : &io[(ver > 3 ? 3 : ver) - 1];
  return rc;
}
static int v_delete(sqlite3_vfs *v, const char *name, int sync) {
  (void)v;
  return below->xDelete(below, name, sync);
}
static int v_access(sqlite3_vfs *v, const char *name, int flags, int *out) {
  (void)v;
  return below->xAccess(below, name, flags, out);
}
static int v_full(sqlite3_vfs *v, const char *name, int n, char *out) {
  (void)v;
  return below->xFullPathname(below, name, n, out);
}
static void *v_dlopen(sqlite3_vfs *v, const char *name) {
  (void)v;
  return below->xDlOpen(below, name);
}
static void v_dlerror(sqlite3_vfs *v, int n, char *msg) {
  (void)v;
  below->xDlError(below, n, msg);
}
static void (*v_dlsym(sqlite3_vfs *v, void *h, const char *sym))(void) {
  (void)v;
  return below->xDlSym(below, h, sym);
}
static void v_dlclose(sqlite3_vfs *v, void *h) {
  (void)v;
  below->xDlClose(below, h);
}
static int v_random(sqlite3_vfs *v, int n, char *out) {
  (void)v;
  return below->xRandomness(below, n, out);
}
static int v_sleep(sqlite3_vfs *v, int us) {
  (void)v;
  return below->xSleep(below, us);
}
static int v_time(sqlite3_vfs *v, double *t) {
  (void)v;
  return below->xCurrentTime(below, t);
}
static int v_last_error(sqlite3_vfs *v, int n, char *msg) {
  (void)v;
  return below->xGetLastError(below, n, msg);
}
static int v_time64(sqlite3_vfs *v, sqlite3_int64 *t) {
  (void)v;
  return below->xCurrentTimeInt64(below, t);
}
static int v_set_call(sqlite3_vfs *v, const char *name, sqlite3_syscall_ptr p) {
  (void)v;
  return below->xSetSystemCall(below, name, p);
}
static sqlite3_syscall_ptr v_get_call(sqlite3_vfs *v, const char *name) {
  (void)v;
  return below->xGetSystemCall(below, name);
}
static const char *v_next_call(sqlite3_vfs *v, const char *name) {
  (void)v;
  return below->xNextSystemCall(below, name);
}

static int install_vfs(struct se3_error *err) {
  below = sqlite3_vfs_find(NULL);
  if (!below) {
    se3_error_set(err, SE3_ERR_DB, "SE3_FAULT: SQLite has no default VFS to wrap");
    return -1;
  }
  for (int i = 0; i < 3; i++) {
    io[i] = (sqlite3_io_methods){i + 1,      f_close,       f_read,      f_write,   f_truncate, f_sync,   f_size,
                                 f_lock,     f_unlock,      f_reserved,  f_control, f_sector,   f_device, f_shm_map,
                                 f_shm_lock, f_shm_barrier, f_shm_unmap, f_fetch,   f_unfetch};
  }
  shim = *below;
  shim.iVersion = below->iVersion > 3 ? 3 : below->iVersion;
  shim.szOsFile = (int)sizeof(struct shim_file) + below->szOsFile;
  shim.zName = "se3fault";
  shim.pAppData = NULL;
  shim.pNext = NULL;
  shim.xOpen = v_open;
  shim.xDelete = v_delete;
  shim.xAccess = v_access;
  shim.xFullPathname = v_full;
  shim.xDlOpen = below->xDlOpen ? v_dlopen : NULL;
  shim.xDlError = below->xDlError ? v_dlerror : NULL;
  shim.xDlSym = below->xDlSym ? v_dlsym : NULL;
  shim.xDlClose = below->xDlClose ? v_dlclose : NULL;
  shim.xRandomness = v_random;
  shim.xSleep = v_sleep;
  shim.xCurrentTime = v_time;
  shim.xGetLastError = below->xGetLastError ? v_last_error : NULL;
  if (shim.iVersion >= 2) shim.xCurrentTimeInt64 = below->xCurrentTimeInt64 ? v_time64 : NULL;
  if (shim.iVersion >= 3) {
    shim.xSetSystemCall = below->xSetSystemCall ? v_set_call : NULL;
    shim.xGetSystemCall = below->xGetSystemCall ? v_get_call : NULL;
    shim.xNextSystemCall = below->xNextSystemCall ? v_next_call : NULL;
  }
  int rc = sqlite3_vfs_register(&shim, 1);
  if (rc != SQLITE_OK) {
    se3_error_set(err, SE3_ERR_DB, "SE3_FAULT: cannot register the fault VFS: %s", sqlite3_errstr(rc));
    return -1;
  }
  return 0;
}

/* ---- allocations --------------------------------------------------------- */

static sqlite3_mem_methods mem_below;

static void *m_malloc(int n) {
  if (strikes(&n_allocs, FAULT_ALLOC)) {
    fprintf(stderr, "SE3_FAULT: failing allocation %lld (%d bytes)\n", at, n);
    return NULL;
  }
  return mem_below.xMalloc(n);
}
static void *m_realloc(void *p, int n) {
  if (strikes(&n_allocs, FAULT_ALLOC)) {
    fprintf(stderr, "SE3_FAULT: failing allocation %lld (a realloc to %d bytes)\n", at, n);
    return NULL;
  }
  return mem_below.xRealloc(p, n);
}
static void m_free(void *p) { mem_below.xFree(p); }
static int m_size(void *p) { return mem_below.xSize(p); }
static int m_roundup(int n) { return mem_below.xRoundup(n); }
static int m_init(void *app) { return mem_below.xInit(app); }
static void m_shutdown(void *app) { mem_below.xShutdown(app); }

static int install_malloc(struct se3_error *err) {
  int rc = sqlite3_config(SQLITE_CONFIG_GETMALLOC, &mem_below);
  if (rc == SQLITE_OK) {
    sqlite3_mem_methods m = {m_malloc, m_free, m_realloc, m_size, m_roundup, m_init, m_shutdown, mem_below.pAppData};
    rc = sqlite3_config(SQLITE_CONFIG_MALLOC, &m);
  }
  if (rc != SQLITE_OK) {
    se3_error_set(err, SE3_ERR_DB, "SE3_FAULT: cannot wrap SQLite's allocator (%s): SQLite was used before fault_init",
                  sqlite3_errstr(rc));
    return -1;
  }
  return 0;
}

/* ---- SE3_FAULT ------------------------------------------------------------ */

static void report_counts(void) {
  fprintf(stderr, "SE3_FAULT: counted %lld commits, %lld writes, %lld allocations\n",
          __atomic_load_n(&n_commits, __ATOMIC_RELAXED), __atomic_load_n(&n_writes, __ATOMIC_RELAXED),
          __atomic_load_n(&n_allocs, __ATOMIC_RELAXED));
}

/* kind and at from v; -1 when v is not one of fault.h's forms. */
static int parse(const char *v) {
  static const struct {
    const char *name;
    enum fault_kind kind;
  } kinds[] = {{"commit", FAULT_COMMIT}, {"crash", FAULT_CRASH}, {"write", FAULT_WRITE}, {"alloc", FAULT_ALLOC}};
  if (!strcmp(v, "count")) {
    kind = FAULT_COUNT;
    return 0;
  }
  const char *colon = strchr(v, ':');
  if (!colon) return -1;
  for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
    if (strlen(kinds[i].name) != (size_t)(colon - v) || strncmp(v, kinds[i].name, (size_t)(colon - v))) continue;
    const char *num = colon + 1;
    if (*num < '1' || *num > '9') return -1; /* digits only, no sign, no leading zero, at least 1 */
    char *end = NULL;
    errno = 0;
    long long n = strtoll(num, &end, 10);
    if (errno || *end) return -1;
    kind = kinds[i].kind;
    at = n;
    return 0;
  }
  return -1;
}

int fault_init(struct se3_error *err) {
  static int done;
  if (done) return 0;
  done = 1;
  const char *v = getenv("SE3_FAULT");
  if (!v || !*v) return 0;
  if (parse(v)) {
    se3_error_set(err, SE3_ERR_USAGE,
                  "SE3_FAULT=%s: expected commit:N, crash:N, write:N or alloc:N (N a whole number from 1), or count",
                  v);
    return -1;
  }
  if (install_malloc(err) || install_vfs(err)) return -1;
  atexit(report_counts);
  return 0;
}

#endif
