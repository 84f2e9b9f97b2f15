/* store.c — the SQLite database of a workdir: opening it to read or to
 * write, the checks made before anything is written, the single-writer
 * lock. The schema and its migrations are in store_schema.c, the small SQL
 * helpers everything calls in store_sql.c: the calls run one way, store.c
 * -> store_schema.c -> store_sql.c. */
#define _GNU_SOURCE
#include "pipeline/store.h"
#include "pipeline/fault.h"
#include "pipeline/store_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void now_iso(char *buf, size_t n) {
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* ---- waiting for a lock: one budget for a whole opening --------------------
 *
 * sqlite3_busy_timeout bounds each wait, and an opening reads several
 * times (the schema, the application id, the version ...), each of which
 * may wait: a locked database took a multiple of the timeout to refuse.
 * While it opens, a connection waits against one deadline instead; once
 * open, it has the caller's timeout as usual. */

static double mono_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* SQLite's busy handler: 1 (try again, after up to 10 ms) until the
 * deadline (a double, CLOCK_MONOTONIC seconds), then 0 (give up). */
static int wait_until(void *deadline, int n_waits) {
  (void)n_waits;
  double left = *(const double *)deadline - mono_s();
  if (left <= 0) return 0;
  struct timespec d = {0, left < 0.01 ? (long)(left * 1e9) : 10000000L};
  nanosleep(&d, NULL);
  return 1;
}

/* 1 for a result code that says another connection holds a lock. */
static int is_busy(int rc) { return (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED; }

static int say_busy(struct se3_error *err, const char *path, int busy_timeout_ms) {
  se3_error_set(err, SE3_ERR_DB,
                "in use: another process holds a lock on it (waited %g s); try again once it has finished writing",
                busy_timeout_ms / 1000.0);
  se3_error_at(err, path, 0, 0);
  return -2;
}

/* The first column of sql's first row into *v. SQLite's extended result
 * code: SQLITE_OK, or why it could not be read (a lock, damage ...). */
static int read_int(sqlite3 *db, const char *sql, long long *v) {
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
  if (rc == SQLITE_OK) {
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
      *v = sqlite3_column_int64(st, 0);
      rc = SQLITE_OK;
    }
  }
  if (rc != SQLITE_OK) rc = sqlite3_extended_errcode(db);
  sqlite3_finalize(st);
  return rc;
}

/* ---- read-only opening (status, top, query, merge's shards) ----------------
 *
 * A WAL database is read through its -shm index, which SQLite creates beside
 * the file when it is missing. Where it cannot (a read-only directory or
 * mount, a colleague's workdir) the open fails with SQLITE_CANTOPEN or
 * SQLITE_READONLY_*; the file is then opened again as immutable, which reads
 * the database file alone without locks or -shm. Nothing can be writing it
 * then: a writer would have made the -shm. What a -wal file still holds (a
 * writer that died before its checkpoint) is not seen; s->note says so.
 *
 * Where SQLite can create them, a read-only connection to a WAL database
 * makes the -wal and -shm (it takes part in the WAL's locking, so that a
 * writer that starts meanwhile cannot change the pages it reads), and
 * leaves them: SQLite deletes them when the last connection closes, after a
 * checkpoint, which a read-only connection may not run. store_close does
 * what that last connection would (tidy_wal), when the reader found neither
 * file. */

/* `file:` URI of path with everything but unreserved characters and '/'
 * percent-encoded, so that '?', '#' and '%' in a name stay part of it. */
static char *file_uri(const char *path, const char *query) {
  size_t n = strlen(path);
  char *u = malloc(3 * n + strlen(query) + 8);
  if (!u) return NULL;
  char *o = u + sprintf(u, "file:");
  for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
    if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || strchr("/._-~", *p))
      *o++ = (char)*p;
    else
      o += sprintf(o, "%%%02X", *p);
  }
  sprintf(o, "?%s", query);
  return u;
}

/* 1 when path followed by suffix names something (a link included). */
static int companion_exists(const char *path, const char *suffix, struct stat *sb) {
  char name[PATH_MAX + 16];
  if (snprintf(name, sizeof name, "%s%s", path, suffix) >= (int)sizeof name) return 1; /* (cannot tell: keep) */
  return lstat(name, sb) == 0 || errno != ENOENT;
}

/* After a read-only connection to path has closed, which found neither its
 * -wal nor its -shm: removes those SQLite made for it, the way the last
 * connection's close removes them. A read-write connection reads the
 * header (which opens the WAL) and closes; closing, SQLite takes the
 * database file's exclusive lock, which it has only when no other
 * connection has the database open (each holds a shared lock while it
 * does), checkpoints (nothing: the WAL is empty) and deletes both files.
 * A connection that opened the database meanwhile keeps them: the lock is
 * not had, nothing is waited for, and the files stay for it. A -wal with
 * frames in it is a writer's, and is left alone. */
static void tidy_wal(const char *path) {
  struct stat wal, shm;
  int has_wal = companion_exists(path, "-wal", &wal), has_shm = companion_exists(path, "-shm", &shm);
  if (!has_wal && !has_shm) return;
  if (has_wal && (!S_ISREG(wal.st_mode) || wal.st_size > 0)) return;
  if (has_shm && !S_ISREG(shm.st_mode)) return;
  char *uri = file_uri(path, "");
  sqlite3 *db = NULL;
  if (uri && sqlite3_open_v2(uri, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_URI, NULL) == SQLITE_OK) {
    sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, (int *)NULL);
    sqlite3_db_config(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, (int *)NULL);
    sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_TRIGGER, 0, (int *)NULL);
    sqlite3_exec(db, "PRAGMA schema_version", NULL, NULL, NULL);
  }
  sqlite3_close(db);
  free(uri);
}

/* Opens name (a path, or a URI when uri) read-only and reads the schema, the
 * first thing that needs the -shm, waiting for a lock until *deadline.
 * Returns the extended SQLite result code; msg gets SQLite's message. */
static int try_readonly(struct store *s, const char *name, int uri, double *deadline, char *msg, size_t msglen) {
  int flags = SQLITE_OPEN_READONLY | (uri ? SQLITE_OPEN_URI : 0);
  int rc = sqlite3_open_v2(name, &s->db, flags, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_extended_result_codes(s->db, 1);
    sqlite3_busy_handler(s->db, wait_until, deadline);
    /* What reading needs and nothing more: no pointer-taking FTS3 tokenizer
     * function, no extensions, no functions with side effects run from the
     * file's own schema (views, triggers), no writes to the schema. */
    sqlite3_db_config(s->db, SQLITE_DBCONFIG_ENABLE_FTS3_TOKENIZER, 0, (int *)NULL);
    sqlite3_db_config(s->db, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, (int *)NULL);
    sqlite3_db_config(s->db, SQLITE_DBCONFIG_DEFENSIVE, 1, (int *)NULL);
    sqlite3_db_config(s->db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, (int *)NULL);
    sqlite3_db_config(s->db, SQLITE_DBCONFIG_ENABLE_TRIGGER, 0, (int *)NULL);
    long long n;
    rc = read_int(s->db, "SELECT count(*) FROM sqlite_schema", &n);
  }
  snprintf(msg, msglen, "%s", s->db ? sqlite3_errmsg(s->db) : "out of memory");
  if (rc != SQLITE_OK) {
    sqlite3_close_v2(s->db);
    s->db = NULL;
  }
  return rc;
}

static int open_readonly(struct store *s, const char *path, int busy_timeout_ms, struct se3_error *err) {
  struct stat sb;
  if (stat(path, &sb) != 0) {
    se3_error_set(err, SE3_ERR_IO, "%s", strerror(errno));
    se3_error_at(err, path, 0, 0);
    return -1;
  }
  if (!S_ISREG(sb.st_mode)) {
    se3_error_set(err, SE3_ERR_IO, "not a regular file (%s)",
                  S_ISDIR(sb.st_mode)    ? "a directory"
                  : S_ISFIFO(sb.st_mode) ? "a FIFO"
                                         : "a device or socket");
    se3_error_at(err, path, 0, 0);
    return -1;
  }
  if (access(path, R_OK) != 0) {
    se3_error_set(err, SE3_ERR_IO, "cannot read: %s", strerror(errno));
    se3_error_at(err, path, 0, 0);
    return -1;
  }
  double deadline = mono_s() + busy_timeout_ms / 1000.0;
  int found_none = !companion_exists(path, "-wal", &sb) && !companion_exists(path, "-shm", &sb);
  char msg[512];
  int rc = try_readonly(s, path, 0, &deadline, msg, sizeof msg);
  int prim = rc & 0xff;
  if (rc == SQLITE_OK) s->tidy = found_none;
  if (prim == SQLITE_CANTOPEN || (prim == SQLITE_READONLY && rc != SQLITE_READONLY_ROLLBACK)) {
    char *uri = file_uri(path, "immutable=1");
    char msg2[512];
    int rc2 = uri ? try_readonly(s, uri, 1, &deadline, msg2, sizeof msg2) : SQLITE_NOMEM;
    free(uri);
    if (rc2 != SQLITE_OK) {
      se3_error_set(err, SE3_ERR_DB, "cannot open read-only: %s; opened as immutable: %s", msg,
                    rc2 == SQLITE_NOMEM ? "out of memory" : msg2);
      se3_error_at(err, path, 0, 0);
      return -1;
    }
    char wal[4096 + 8];
    snprintf(wal, sizeof wal, "%s-wal", path);
    if (stat(wal, &sb) == 0 && sb.st_size > 0 &&
        asprintf(&s->note,
                 "%s: read as it was at its last checkpoint: its -shm cannot be made here (%s), and the %lld "
                 "bytes in %s are not read without it",
                 path, msg, (long long)sb.st_size, wal) < 0)
      s->note = NULL;
    rc = SQLITE_OK;
  }
  if (rc != SQLITE_OK) {
    if (prim == SQLITE_NOTADB) {
      se3_error_set(err, SE3_ERR_DB, "not a se3screen database (not an SQLite file)");
      se3_error_at(err, path, 0, 0);
    } else if (prim == SQLITE_CORRUPT) {
      se3_error_set(err, SE3_ERR_DB, "damaged: %s", msg);
      se3_error_at(err, path, 0, 0);
    } else if (is_busy(rc)) {
      return say_busy(err, path, busy_timeout_ms);
    } else {
      se3_error_set(err, SE3_ERR_DB, "cannot open read-only: %s", msg);
      se3_error_at(err, path, 0, 0);
    }
    return -1;
  }
  long long app = -1, ver = 0;
  if ((rc = read_int(s->db, "PRAGMA application_id", &app)) == SQLITE_OK)
    rc = read_int(s->db, "PRAGMA user_version", &ver);
  if (is_busy(rc)) return say_busy(err, path, busy_timeout_ms);
  if (rc != SQLITE_OK) {
    se3_error_set(err, SE3_ERR_DB, "cannot read: %s", sqlite3_errmsg(s->db));
    se3_error_at(err, path, 0, 0);
    return -1;
  }
  if (app != STORE_APPLICATION_ID) {
    se3_error_set(err, SE3_ERR_DB, "not a se3screen database (application_id %lld)", app);
    se3_error_at(err, path, 0, 0);
    return -1;
  }
  if (ver > STORE_SCHEMA_VERSION) {
    se3_error_set(err, SE3_ERR_DB, "schema version %lld is newer than this se3screen (%d)", ver, STORE_SCHEMA_VERSION);
    se3_error_at(err, path, 0, 0);
    return -1;
  }
  sqlite3_busy_timeout(s->db, busy_timeout_ms);
  return 0;
}

/* Reads (only) what says whose the file is: its application_id, its schema
 * version and whether it holds any table. 0 when it is a se3screen database
 * this version can open, or empty (a new file, or an SQLite file without a
 * table or an id); -1 with err naming the file and why (-2: locked by
 * another process). Nothing is written: a refused file is left exactly as
 * it was. */
static int check_ours(struct store *s, enum store_mode mode, int busy_timeout_ms, struct se3_error *err) {
  static const char *const sql[3] = {"PRAGMA application_id", "PRAGMA user_version",
                                     "SELECT count(*) FROM sqlite_schema"};
  long long v[3] = {0, 0, 0};
  for (int i = 0; i < 3; i++) {
    int rc = read_int(s->db, sql[i], &v[i]);
    if ((rc & 0xff) == SQLITE_NOTADB) {
      se3_error_set(err, SE3_ERR_DB, "not a se3screen database (not an SQLite file); it was left as it is");
      se3_error_at(err, s->path, 0, 0);
      return -1;
    }
    if (is_busy(rc)) return say_busy(err, s->path, busy_timeout_ms);
    if (rc != SQLITE_OK) {
      se3_error_set(err, SE3_ERR_DB, "cannot read: %s", sqlite3_errmsg(s->db));
      se3_error_at(err, s->path, 0, 0);
      return -1;
    }
  }
  if (v[0] != STORE_APPLICATION_ID && !(v[0] == 0 && v[1] == 0 && v[2] == 0)) {
    se3_error_set(err, SE3_ERR_DB, "not a se3screen database (application_id %lld); it was left as it is", v[0]);
    se3_error_at(err, s->path, 0, 0);
    return -1;
  }
  if (v[1] > STORE_SCHEMA_VERSION) {
    se3_error_set(err, SE3_ERR_DB, "schema version %lld is newer than this se3screen (%d); upgrade se3screen", v[1],
                  STORE_SCHEMA_VERSION);
    se3_error_at(err, s->path, 0, 0);
    return -1;
  }
  if (mode == STORE_WRITE && v[0] == STORE_APPLICATION_ID && v[1] < STORE_SCHEMA_VERSION && v[2] > 0) {
    /* the workdir, when this is its screen.db */
    const char *base = strrchr(s->path, '/');
    int is_main = !strcmp(base ? base + 1 : s->path, "screen.db");
    int dir_len = base ? (int)(base - s->path) : 1;
    se3_error_set(err, SE3_ERR_DB,
                  "%s was made by an earlier se3screen (schema version %lld; this one writes %d): convert it in place "
                  "with `se3screen upgrade %.*s`, which says what, if anything, the next run then redoes (status, "
                  "query, top and report read it as it is)",
                  s->path, v[1], STORE_SCHEMA_VERSION, is_main ? dir_len : (int)strlen(s->path),
                  is_main ? (base ? s->path : ".") : s->path);
    return -1;
  }
  return 0;
}

/* ---- opening to write (run, merge, upgrade) --------------------------------- */

/* Where a database se3screen writes lies, checked before anything is
 * opened (store.h): the file itself, never a link; one name; a regular
 * file or none yet; a folder this process can write. real gets the path
 * SQLite is given: the folder's real path and the file's name, so that
 * SQLITE_OPEN_NOFOLLOW (which refuses a link anywhere in the path) can be
 * used, and a link planted after this check is refused there. 0, or -1
 * with err naming the path. */
static int check_write_target(const char *path, char *real, size_t realn, struct se3_error *err) {
  const char *slash = strrchr(path, '/'), *name = slash ? slash + 1 : path;
  char dir[PATH_MAX], rdir[PATH_MAX];
  if (!*name || !strcmp(name, ".") || !strcmp(name, "..")) {
    se3_error_set(err, SE3_ERR_IO, "not a file name");
    se3_error_at(err, path, 0, 0);
    return -1;
  }
  if (snprintf(dir, sizeof dir, "%.*s", slash ? (slash == path ? 1 : (int)(slash - path)) : 1, slash ? path : ".") >=
      (int)sizeof dir) {
    se3_error_set(err, SE3_ERR_IO, "the path is too long");
    se3_error_at(err, path, 0, 0);
    return -1;
  }
  if (!realpath(dir, rdir)) {
    se3_error_set(err, SE3_ERR_IO, "its folder %s: %s", dir, strerror(errno));
    se3_error_at(err, path, 0, 0);
    return -1;
  }
  if (faccessat(AT_FDCWD, rdir, W_OK | X_OK, AT_EACCESS) != 0) {
    se3_error_set(err, SE3_ERR_IO,
                  "cannot write in its folder %s (%s): se3screen writes the database, its lock file and its journal "
                  "there (a folder it may only read is read by status, query, top, report and export)",
                  dir, strerror(errno));
    se3_error_at(err, path, 0, 0);
    return -1;
  }
  struct stat sb;
  if (lstat(path, &sb) == 0) {
    if (S_ISLNK(sb.st_mode)) {
      char to[PATH_MAX];
      ssize_t n = readlink(path, to, sizeof to - 1);
      to[n > 0 ? n : 0] = 0;
      se3_error_set(err, SE3_ERR_IO,
                    "%s is a symbolic link (to %s); se3screen writes a database under its own name only, never "
                    "through a link (a link to another workdir's database would replace that workdir's work, and a "
                    "dangling one would make a database outside this folder): remove the link, or name the folder the "
                    "database is in",
                    path, n > 0 ? to : "?");
      return -1;
    }
    if (!S_ISREG(sb.st_mode)) {
      se3_error_set(err, SE3_ERR_IO, "%s is %s, not a database file: remove it or name another", path,
                    S_ISDIR(sb.st_mode)    ? "a directory"
                    : S_ISFIFO(sb.st_mode) ? "a FIFO"
                                           : "a device or socket");
      return -1;
    }
    if (sb.st_nlink > 1) {
      se3_error_set(err, SE3_ERR_IO,
                    "%s has %ju names (hard links); SQLite keeps a journal, a WAL and locks for each name, so two "
                    "names could be written at once and the database damaged: give it a name of its own (cp it, then "
                    "remove the other names)",
                    path, (uintmax_t)sb.st_nlink);
      return -1;
    }
    if (faccessat(AT_FDCWD, path, R_OK | W_OK, AT_EACCESS) != 0) {
      se3_error_set(err, SE3_ERR_IO, "cannot write it: %s", strerror(errno));
      se3_error_at(err, path, 0, 0);
      return -1;
    }
  } else if (errno != ENOENT) {
    se3_error_set(err, SE3_ERR_IO, "%s", strerror(errno));
    se3_error_at(err, path, 0, 0);
    return -1;
  }
  /* SQLite opens its companions by name, without following a link (it
   * would fail as "unable to open database file"): said here, by name */
  static const char *const companions[] = {"-wal", "-shm", "-journal"};
  static const char *const kept[] = {"write-ahead log", "WAL index", "rollback journal"};
  for (int i = 0; i < 3; i++) {
    struct stat cb;
    char c[PATH_MAX + 16];
    snprintf(c, sizeof c, "%s%s", path, companions[i]);
    if (lstat(c, &cb) == 0 && !S_ISREG(cb.st_mode)) {
      se3_error_set(err, SE3_ERR_IO,
                    "%s is %s, where SQLite keeps the database's %s: se3screen writes a regular file of its own "
                    "there, never through a link: remove it",
                    c,
                    S_ISLNK(cb.st_mode)   ? "a symbolic link"
                    : S_ISDIR(cb.st_mode) ? "a directory"
                                          : "a special file",
                    kept[i]);
      return -1;
    }
  }
  if (snprintf(real, realn, "%s/%s", strcmp(rdir, "/") ? rdir : "", name) >= (int)realn) {
    se3_error_set(err, SE3_ERR_IO, "the path is too long");
    se3_error_at(err, path, 0, 0);
    return -1;
  }
  return 0;
}

/* Opens real (check_write_target's) to write, as store_open says. */
static int open_write(struct store *s, const char *real, enum store_mode mode, const char *journal, int busy_timeout_ms,
                      struct se3_error *err) {
  /* (URIs only for store_attach_readonly: the paths given here are paths) */
  char *uri = file_uri(real, "");
  int rc = uri ? sqlite3_open_v2(uri, &s->db,
                                 SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI | SQLITE_OPEN_NOFOLLOW,
                                 NULL)
               : SQLITE_NOMEM;
  free(uri);
  if (rc != SQLITE_OK) {
    if (s->db && sqlite3_extended_errcode(s->db) == SQLITE_CANTOPEN_SYMLINK) {
      se3_error_set(err, SE3_ERR_IO, "became a symbolic link as it was opened; se3screen writes through none");
      se3_error_at(err, s->path, 0, 0);
    } else {
      se3_error_set(err, SE3_ERR_DB, "cannot open: %s", s->db ? sqlite3_errmsg(s->db) : "out of memory");
      se3_error_at(err, s->path, 0, 0);
    }
    return -1;
  }
  sqlite3_extended_result_codes(s->db, 1);
  fault_watch(s->db); /* SE3_FAULT=commit:N counts every commit of every connection that writes */
  if (sqlite3_db_readonly(s->db, "main") == 1) {
    se3_error_set(err, SE3_ERR_DB, "cannot write it (SQLite opened it read-only)");
    se3_error_at(err, s->path, 0, 0);
    return -1;
  }
  double deadline = mono_s() + busy_timeout_ms / 1000.0;
  sqlite3_busy_handler(s->db, wait_until, &deadline);
  /* Ours, or new, before anything below writes to the file: the journal mode
   * (WAL rewrites the header), the page size and the schema would change a
   * foreign database that is then refused. */
  rc = check_ours(s, mode, busy_timeout_ms, err);
  if (rc) return rc;
  /* A new database gets 64 KiB pages: basis blobs run to megabytes, and with
   * 4 KiB pages SQLite writes them 2x and reads them 4x slower (overflow page
   * chains). It must be set before the first table and before WAL. An 8 MiB
   * cache: larger ones only add first-touch page faults to big writes (64 MiB
   * made the basis stage 1.5x slower). */
  if (store_int(s->db, "SELECT count(*) FROM sqlite_schema", 0) == 0 &&
      store_exec(s->db, "PRAGMA page_size=65536", err))
    return -1;
  if (store_exec(s->db, "PRAGMA cache_size=-8192", err)) return -1;
  char sql[128];
  snprintf(sql, sizeof sql, "PRAGMA journal_mode=%s", journal && !strcmp(journal, "delete") ? "DELETE" : "WAL");
  if (store_exec(s->db, sql, err)) return -1;
  /* NORMAL is durable across process crashes in WAL mode; FULL for rollback journals. */
  if (store_exec(s->db, journal && !strcmp(journal, "delete") ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL",
                 err))
    return -1;
  if (store_exec(s->db, "PRAGMA foreign_keys=ON", err)) return -1;
  if (store_migrate(s, mode == STORE_UPGRADE, err)) return -1;
  sqlite3_busy_timeout(s->db, busy_timeout_ms);
  return 0;
}

static int open_store(struct store *s, const char *path, enum store_mode mode, const char *journal, int busy_timeout_ms,
                      int lock_first, struct se3_error *err) {
  memset(s, 0, sizeof *s);
  s->lock_fd = -1;
  s->path = strdup(path);
  if (!s->path) {
    se3_error_set(err, SE3_ERR_MEMORY, "out of memory");
    se3_error_at(err, path, 0, 0);
    return -1;
  }
  int rc;
  if (mode == STORE_READONLY) {
    if (lock_first) {
      se3_error_set(err, SE3_ERR_RUN, "a read-only opening takes no lock");
      se3_error_at(err, path, 0, 0);
      rc = -1;
    } else {
      rc = open_readonly(s, path, busy_timeout_ms, err);
    }
  } else {
    char real[PATH_MAX + 256];
    rc = check_write_target(path, real, sizeof real, err);
    if (!rc && lock_first) rc = store_lock(s, err);
    if (!rc) rc = open_write(s, real, mode, journal, busy_timeout_ms, err);
  }
  if (rc) store_close(s);
  return rc;
}

int store_open(struct store *s, const char *path, enum store_mode mode, const char *journal, int busy_timeout_ms,
               struct se3_error *err) {
  return open_store(s, path, mode, journal, busy_timeout_ms, 0, err);
}

int store_open_locked(struct store *s, const char *path, enum store_mode mode, const char *journal, int busy_timeout_ms,
                      struct se3_error *err) {
  return open_store(s, path, mode, journal, busy_timeout_ms, 1, err);
}

void store_close(struct store *s) {
  if (s->db) {
    /* sqlite3_close refuses while a statement is unfinalized: then the
     * connection closes with its last statement, and the -wal and -shm stay */
    if (sqlite3_close(s->db) == SQLITE_OK) {
      if (s->tidy && s->path) tidy_wal(s->path);
    } else {
      sqlite3_close_v2(s->db);
    }
  }
  s->db = NULL;
  s->tidy = 0;
  if (s->lock_fd >= 0) {
    /* Leave the file (others may be waiting on it); the lock dies with the fd. */
    close(s->lock_fd);
    s->lock_fd = -1;
  }
  free(s->lock_path);
  free(s->path);
  free(s->note);
  s->lock_path = s->path = s->note = NULL;
}

int store_lock(struct store *s, struct se3_error *err) {
  if (s->lock_fd >= 0) return 0; /* held already (store_open_locked) */
  free(s->lock_path);
  s->lock_path = NULL;
  if (asprintf(&s->lock_path, "%s.lock", s->path) < 0) {
    s->lock_path = NULL;
    se3_error_set(err, SE3_ERR_MEMORY, "out of memory");
    se3_error_at(err, s->path, 0, 0);
    return -1;
  }
  /* Never through a symbolic link (a link planted in a shared workdir would
   * have the holder line written over its target), and never a FIFO or a
   * device (no blocking open, no controlling terminal): O_NOFOLLOW refuses
   * the link, fstat the rest. */
  int fd = open(s->lock_path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, 0644);
  if (fd < 0) {
    if (errno == ELOOP) {
      se3_error_set(err, SE3_ERR_IO,
                    "the lock file is a symbolic link; se3screen follows none there (it would write through it): "
                    "remove the link and run again");
      se3_error_at(err, s->lock_path, 0, 0);
    } else {
      se3_error_set(err, SE3_ERR_IO, "%s", strerror(errno));
      se3_error_at(err, s->lock_path, 0, 0);
    }
    return -1;
  }
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    se3_error_set(err, SE3_ERR_IO, "%s", strerror(errno));
    se3_error_at(err, s->lock_path, 0, 0);
    close(fd);
    return -1;
  }
  if (!S_ISREG(sb.st_mode) || sb.st_nlink != 1) {
    se3_error_set(err, SE3_ERR_IO,
                  "the lock file is %s; se3screen writes only a regular file of its own there: remove it and run again",
                  S_ISREG(sb.st_mode)                          ? "a regular file with other names (hard links)"
                  : S_ISDIR(sb.st_mode)                        ? "a directory"
                  : S_ISFIFO(sb.st_mode)                       ? "a FIFO"
                  : S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode) ? "a device"
                                                               : "a socket or another special file");
    se3_error_at(err, s->lock_path, 0, 0);
    close(fd);
    return -1;
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char holder[512] = "";
    ssize_t n = pread(fd, holder, sizeof holder - 1, 0);
    holder[n > 0 ? n : 0] = 0;
    char *nl = strchr(holder, '\n');
    if (nl) *nl = 0;
    se3_error_set(err, SE3_ERR_DB, "%s is being written by another se3screen (%s); wait for it or stop it", s->path,
                  holder[0] ? holder : "holder unknown");
    close(fd);
    return -1;
  }
  char host[256] = "?", when[32];
  gethostname(host, sizeof host);
  host[sizeof host - 1] = 0;
  now_iso(when, sizeof when);
  char line[512];
  int len = snprintf(line, sizeof line, "host %s, pid %d, since %s\n", host, (int)getpid(), when);
  /* Only now, holding the lock: the holder line over the old one, then the
   * rest of the old one cut off (a waiting process never reads an empty file). */
  if (pwrite(fd, line, (size_t)len, 0) != len || ftruncate(fd, len) != 0) {
    se3_error_set(err, SE3_ERR_IO, "cannot write: %s", strerror(errno));
    se3_error_at(err, s->lock_path, 0, 0);
    close(fd);
    return -1;
  }
  s->lock_fd = fd;
  return 0;
}

int store_attach_readonly(struct store *s, const char *path, const char *schema, struct se3_error *err) {
  char *uri = file_uri(path, "mode=ro");
  char *sql = uri ? sqlite3_mprintf("ATTACH %Q AS \"%w\"", uri, schema) : NULL;
  int rc = sql ? store_exec(s->db, sql, err) : -1;
  if (!sql) se3_error_set(err, SE3_ERR_MEMORY, "out of memory attaching %s", path);
  sqlite3_free(sql);
  free(uri);
  return rc;
}
