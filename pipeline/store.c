/* store.c — the SQLite database of a workdir: open, schema, migrations, lock. */
#define _GNU_SOURCE
#include "pipeline/store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Version 1. Later versions append migrations to `migrations` below; a
 * database is brought forward one step at a time inside one transaction. */
const char store_schema_sql[] =
    "CREATE TABLE meta(\n"
    "  key TEXT PRIMARY KEY,\n"
    "  value TEXT\n"
    ") STRICT;\n"
    "CREATE TABLE runs(\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  started TEXT NOT NULL,          -- UTC, ISO 8601\n"
    "  finished TEXT,\n"
    "  host TEXT NOT NULL,\n"
    "  pid INTEGER NOT NULL,\n"
    "  command TEXT NOT NULL,          -- the command line\n"
    "  workflow TEXT,                  -- the workflow file\n"
    "  shard TEXT,                     -- 'i/n' or NULL\n"
    "  status TEXT NOT NULL,           -- running | done | stopped | failed\n"
    "  exit_code INTEGER,\n"
    "  message TEXT,                   -- last error\n"
    "  version TEXT NOT NULL\n"
    ") STRICT;\n"
    "CREATE TABLE stage_state(\n"
    "  stage TEXT PRIMARY KEY,\n"
    "  config_hash TEXT NOT NULL,      -- hash of the stage's resolved config and its input files\n"
    "  settings_hash TEXT NOT NULL,    -- hash of the stage's resolved config alone\n"
    "  n_chunks INTEGER NOT NULL,      -- chunks in the plan\n"
    "  n_items INTEGER NOT NULL,       -- molecules (or records) in the plan\n"
    "  finalized INTEGER NOT NULL DEFAULT 0,\n"
    "  updated TEXT NOT NULL\n"
    ") STRICT;\n"
    "CREATE TABLE stage_chunks(\n"
    "  stage TEXT NOT NULL,\n"
    "  chunk INTEGER NOT NULL,\n"
    "  shard INTEGER NOT NULL,\n"
    "  config_hash TEXT NOT NULL,\n"
    "  status TEXT NOT NULL,           -- done\n"
    "  host TEXT NOT NULL,\n"
    "  pid INTEGER NOT NULL,\n"
    "  started TEXT NOT NULL,\n"
    "  finished TEXT NOT NULL,\n"
    "  n_ok INTEGER NOT NULL,\n"
    "  n_rejected INTEGER NOT NULL,\n"
    "  PRIMARY KEY(stage, chunk)\n"
    ") STRICT;\n"
    "CREATE TABLE molecules(\n"
    "  id INTEGER PRIMARY KEY,         -- (input index + 1) * 1e9 + record_no: the same in every shard\n"
    "  set_name TEXT NOT NULL,\n"
    "  source_file TEXT NOT NULL,      -- relative to the workflow file when below it\n"
    "  record_no INTEGER NOT NULL,     -- 1-based record in the source file\n"
    "  name TEXT NOT NULL,\n"
    "  smiles TEXT NOT NULL,           -- canonical SMILES (Open Babel)\n"
    "  inchikey TEXT NOT NULL,\n"
    "  formula TEXT NOT NULL,\n"
    "  n_atoms INTEGER NOT NULL,       -- with hydrogens\n"
    "  n_heavy INTEGER NOT NULL,\n"
    "  charge INTEGER NOT NULL,        -- total formal charge\n"
    "  coords_from TEXT NOT NULL,      -- input | gen3d\n"
    "  chunk INTEGER NOT NULL,         -- ingest chunk that wrote it\n"
    "  mol BLOB NOT NULL               -- atoms, bonds, coordinates: see chem/mol.h\n"
    ") STRICT;\n"
    "CREATE INDEX molecules_set_inchikey ON molecules(set_name, inchikey);\n"
    "CREATE INDEX molecules_set_smiles ON molecules(set_name, smiles);\n"
    "CREATE INDEX molecules_chunk ON molecules(chunk);\n"
    "CREATE TABLE labels(\n"
    "  mol_id INTEGER NOT NULL REFERENCES molecules(id) ON DELETE CASCADE,\n"
    "  name TEXT NOT NULL,\n"
    "  value REAL NOT NULL,\n"
    "  PRIMARY KEY(mol_id, name)\n"
    ") STRICT, WITHOUT ROWID;\n"
    "CREATE TABLE rejects(\n"
    "  stage TEXT NOT NULL,\n"
    "  set_name TEXT NOT NULL,\n"
    "  source_file TEXT NOT NULL,\n"
    "  record_no INTEGER NOT NULL,\n"
    "  line INTEGER,                   -- 1-based line where the record starts, when known\n"
    "  name TEXT,\n"
    "  chunk INTEGER NOT NULL,\n"
    "  reason TEXT NOT NULL,\n"
    "  PRIMARY KEY(stage, source_file, record_no)\n"
    ") STRICT;\n"
    "CREATE INDEX rejects_chunk ON rejects(stage, chunk);\n";

/* Version 2: the geometry stages' tables. mol_id is molecules.id; there is
 * no foreign key because a shard database holds graphs without the
 * molecules they came from (the runner deletes downstream rows itself). */
static const char schema_v2_sql[] =
    "CREATE TABLE graphs(\n"
    "  mol_id INTEGER PRIMARY KEY,     -- molecules.id\n"
    "  n_nodes INTEGER NOT NULL,\n"
    "  n_edges INTEGER NOT NULL,\n"
    "  chunk INTEGER NOT NULL,         -- graph chunk that wrote it\n"
    "  graph BLOB NOT NULL             -- edges, features, relative positions: see chem/graph.h\n"
    ") STRICT;\n"
    "CREATE INDEX graphs_chunk ON graphs(chunk);\n"
    "CREATE TABLE bases(\n"
    "  mol_id INTEGER PRIMARY KEY,     -- molecules.id (= graphs.mol_id)\n"
    "  n_edges INTEGER NOT NULL,\n"
    "  max_degree INTEGER NOT NULL,\n"
    "  dtype TEXT NOT NULL,            -- fp32 | fp16 | bf16\n"
    "  chunk INTEGER NOT NULL,         -- basis chunk that wrote it\n"
    "  basis BLOB NOT NULL             -- every edge's basis, in the graph's edge order: see models/basis.h\n"
    ") STRICT;\n"
    "CREATE INDEX bases_chunk ON bases(chunk);\n"
    "ALTER TABLE stage_chunks ADD COLUMN n_bytes INTEGER NOT NULL DEFAULT 0; -- blob bytes the chunk stored\n";

/* Version 3: training, scoring and ranking. */
static const char schema_v3_sql[] =
    "CREATE TABLE splits(\n"
    "  mol_id INTEGER PRIMARY KEY,     -- molecules.id of a training-set molecule with the target label\n"
    "  split TEXT NOT NULL             -- train | valid | test\n"
    ") STRICT;\n"
    "CREATE TABLE metrics(\n"
    "  model TEXT NOT NULL,            -- models.id\n"
    "  epoch INTEGER NOT NULL,         -- 0-based; the test row has the best epoch\n"
    "  split TEXT NOT NULL,            -- train | valid | test\n"
    "  loss REAL,                      -- the training loss (on standardised targets for regression)\n"
    "  mae REAL, rmse REAL, r2 REAL, spearman REAL,   -- regression, in the target's units\n"
    "  roc_auc REAL, pr_auc REAL, ef1 REAL,           -- classification\n"
    "  lr REAL,                        -- learning rate at the end of the epoch\n"
    "  seconds REAL,                   -- wall time of the epoch\n"
    "  PRIMARY KEY(model, epoch, split)\n"
    ") STRICT;\n"
    "CREATE TABLE models(\n"
    "  id TEXT PRIMARY KEY,            -- train/<member>\n"
    "  target TEXT NOT NULL,\n"
    "  task TEXT NOT NULL,             -- regression | classification\n"
    "  checkpoint TEXT NOT NULL,       -- the best checkpoint, relative to the workdir\n"
    "  arch TEXT NOT NULL,             -- the architecture, as key=value words (se3_config_format)\n"
    "  mean REAL NOT NULL,             -- target standardisation (train split)\n"
    "  std REAL NOT NULL,\n"
    "  best_epoch INTEGER NOT NULL,\n"
    "  best_valid_loss REAL,\n"
    "  n_train INTEGER NOT NULL, n_valid INTEGER NOT NULL, n_test INTEGER NOT NULL\n"
    ") STRICT;\n"
    "CREATE TABLE scores(\n"
    "  mol_id INTEGER NOT NULL,        -- molecules.id\n"
    "  model TEXT NOT NULL,            -- models.id\n"
    "  target TEXT NOT NULL,\n"
    "  value REAL NOT NULL,            -- the prediction in the target's units (classification: probability)\n"
    "  std REAL,                       -- spread of an ensemble's predictions; NULL for one model\n"
    "  chunk INTEGER NOT NULL,         -- score chunk that wrote it\n"
    "  PRIMARY KEY(mol_id, model)\n"
    ") STRICT;\n"
    "CREATE INDEX scores_chunk ON scores(chunk);\n"
    "CREATE TABLE ranks(\n"
    "  rank INTEGER PRIMARY KEY,       -- 1 = the best hit\n"
    "  mol_id INTEGER NOT NULL,        -- molecules.id\n"
    "  model TEXT NOT NULL,\n"
    "  target TEXT NOT NULL,\n"
    "  value REAL NOT NULL,\n"
    "  std REAL\n"
    ") STRICT;\n"
    "CREATE VIEW ranked_hits AS\n"
    "  SELECT r.rank, m.name, m.smiles, m.inchikey, r.target, r.value AS score, r.std, m.set_name,\n"
    "         m.source_file, m.record_no, r.mol_id\n"
    "  FROM ranks r JOIN molecules m ON m.id = r.mol_id ORDER BY r.rank;\n";

/* Version 4: the batch scheduler's job of each run (Slurm's). */
static const char schema_v4_sql[] =
    "ALTER TABLE runs ADD COLUMN job TEXT; -- the Slurm job that ran it: JOBID, or ARRAYJOBID_TASKID for an array task\n";

static const char *const migrations[] = {
    /* to version 1 */ store_schema_sql,
    /* to version 2 */ schema_v2_sql,
    /* to version 3 */ schema_v3_sql,
    /* to version 4 */ schema_v4_sql,
};
_Static_assert(sizeof migrations / sizeof migrations[0] == STORE_SCHEMA_VERSION, "one migration per schema version");

static void now_iso(char *buf, size_t n) {
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

int store_exec(sqlite3 *db, const char *sql, char *err, size_t errlen) {
  char *msg = NULL;
  if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
    snprintf(err, errlen, "%s: %s", sqlite3_db_filename(db, "main"), msg ? msg : sqlite3_errmsg(db));
    sqlite3_free(msg);
    return -1;
  }
  return 0;
}

long long store_int(sqlite3 *db, const char *sql, long long dflt) {
  sqlite3_stmt *st = NULL;
  long long v = dflt;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW &&
      sqlite3_column_type(st, 0) != SQLITE_NULL)
    v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return v;
}

static int migrate(struct store *s, char *err, size_t errlen) {
  long long app = store_int(s->db, "PRAGMA application_id", 0);
  long long ver = store_int(s->db, "PRAGMA user_version", 0);
  long long n_tables = store_int(s->db, "SELECT count(*) FROM sqlite_schema", 0);
  if (app != STORE_APPLICATION_ID && !(app == 0 && ver == 0 && n_tables == 0)) {
    snprintf(err, errlen, "%s: not a se3screen database (application_id %lld)", s->path, app);
    return -1;
  }
  const int n_mig = (int)(sizeof migrations / sizeof migrations[0]);
  if (ver > n_mig) {
    snprintf(err, errlen, "%s: schema version %lld is newer than this se3screen (%d); upgrade se3screen", s->path, ver,
             n_mig);
    return -1;
  }
  if (ver == n_mig) return 0;
  if (store_exec(s->db, "BEGIN IMMEDIATE", err, errlen)) return -1;
  /* Re-read under the write lock: another process may have migrated. */
  ver = store_int(s->db, "PRAGMA user_version", 0);
  for (long long v = ver; v < n_mig; v++) {
    if (store_exec(s->db, migrations[v], err, errlen)) goto fail;
  }
  char sql[128];
  snprintf(sql, sizeof sql, "PRAGMA application_id=%d; PRAGMA user_version=%d", STORE_APPLICATION_ID, n_mig);
  if (store_exec(s->db, sql, err, errlen)) goto fail;
  if (store_exec(s->db, "COMMIT", err, errlen)) goto fail;
  return 0;
fail:
  sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
  return -1;
}

/* ---- read-only opening (status, top, query, merge's shards) ----------------
 *
 * A WAL database is read through its -shm index, which SQLite creates beside
 * the file when it is missing. Where it cannot (a read-only directory or
 * mount, a colleague's workdir) the open fails with SQLITE_CANTOPEN or
 * SQLITE_READONLY_*; the file is then opened again as immutable, which reads
 * the database file alone without locks or -shm. Nothing can be writing it
 * then: a writer would have made the -shm. What a -wal file still holds (a
 * writer that died before its checkpoint) is not seen; s->note says so. */

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

/* Opens name (a path, or a URI when uri) read-only and reads the schema, the
 * first thing that needs the -shm. Returns the extended SQLite result code;
 * msg gets SQLite's message. */
static int try_readonly(struct store *s, const char *name, int uri, int busy_timeout_ms, char *msg, size_t msglen) {
  int flags = SQLITE_OPEN_READONLY | (uri ? SQLITE_OPEN_URI : 0);
  int rc = sqlite3_open_v2(name, &s->db, flags, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_extended_result_codes(s->db, 1);
    sqlite3_busy_timeout(s->db, busy_timeout_ms);
    /* What reading needs and nothing more: no pointer-taking FTS3 tokenizer
     * function, no extensions, no functions with side effects run from the
     * file's own schema (views, triggers), no writes to the schema. */
    sqlite3_db_config(s->db, SQLITE_DBCONFIG_ENABLE_FTS3_TOKENIZER, 0, (int *)NULL);
    sqlite3_db_config(s->db, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, (int *)NULL);
    sqlite3_db_config(s->db, SQLITE_DBCONFIG_DEFENSIVE, 1, (int *)NULL);
    sqlite3_db_config(s->db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, (int *)NULL);
    sqlite3_db_config(s->db, SQLITE_DBCONFIG_ENABLE_TRIGGER, 0, (int *)NULL);
    sqlite3_stmt *st = NULL;
    rc = sqlite3_prepare_v2(s->db, "SELECT count(*) FROM sqlite_schema", -1, &st, NULL);
    if (rc == SQLITE_OK) {
      rc = sqlite3_step(st);
      if (rc == SQLITE_ROW) rc = SQLITE_OK;
    }
    if (rc != SQLITE_OK) rc = sqlite3_extended_errcode(s->db);
    sqlite3_finalize(st);
  }
  snprintf(msg, msglen, "%s", s->db ? sqlite3_errmsg(s->db) : "out of memory");
  if (rc != SQLITE_OK) {
    sqlite3_close_v2(s->db);
    s->db = NULL;
  }
  return rc;
}

static int open_readonly(struct store *s, const char *path, int busy_timeout_ms, char *err, size_t errlen) {
  struct stat sb;
  if (stat(path, &sb) != 0) {
    snprintf(err, errlen, "%s: %s", path, strerror(errno));
    return -1;
  }
  if (!S_ISREG(sb.st_mode)) {
    snprintf(err, errlen, "%s: not a regular file (%s)", path,
             S_ISDIR(sb.st_mode)    ? "a directory"
             : S_ISFIFO(sb.st_mode) ? "a FIFO"
                                    : "a device or socket");
    return -1;
  }
  if (access(path, R_OK) != 0) {
    snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
    return -1;
  }
  char msg[512];
  int rc = try_readonly(s, path, 0, busy_timeout_ms, msg, sizeof msg);
  int prim = rc & 0xff;
  if (prim == SQLITE_CANTOPEN || (prim == SQLITE_READONLY && rc != SQLITE_READONLY_ROLLBACK)) {
    char *uri = file_uri(path, "immutable=1");
    char msg2[512];
    int rc2 = uri ? try_readonly(s, uri, 1, busy_timeout_ms, msg2, sizeof msg2) : SQLITE_NOMEM;
    free(uri);
    if (rc2 != SQLITE_OK) {
      snprintf(err, errlen, "%s: cannot open read-only: %s; opened as immutable: %s", path, msg,
               rc2 == SQLITE_NOMEM ? "out of memory" : msg2);
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
    if (prim == SQLITE_NOTADB)
      snprintf(err, errlen, "%s: not a se3screen database (not an SQLite file)", path);
    else if (prim == SQLITE_CORRUPT)
      snprintf(err, errlen, "%s: damaged: %s", path, msg);
    else
      snprintf(err, errlen, "%s: cannot open read-only: %s", path, msg);
    return -1;
  }
  long long app = store_int(s->db, "PRAGMA application_id", -1);
  if (app != STORE_APPLICATION_ID) {
    snprintf(err, errlen, "%s: not a se3screen database (application_id %lld)", path, app);
    return -1;
  }
  long long ver = store_int(s->db, "PRAGMA user_version", 0);
  if (ver > STORE_SCHEMA_VERSION) {
    snprintf(err, errlen, "%s: schema version %lld is newer than this se3screen (%d)", path, ver, STORE_SCHEMA_VERSION);
    return -1;
  }
  return 0;
}

int store_open(struct store *s, const char *path, enum store_mode mode, const char *journal, int busy_timeout_ms,
               char *err, size_t errlen) {
  memset(s, 0, sizeof *s);
  s->lock_fd = -1;
  s->path = strdup(path);
  if (mode == STORE_READONLY) {
    if (open_readonly(s, path, busy_timeout_ms, err, errlen)) goto fail;
    return 0;
  }
  /* (URIs only for store_attach_readonly: the paths given here are paths) */
  char *uri = file_uri(path, "");
  int rc = uri ? sqlite3_open_v2(uri, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI, NULL)
               : SQLITE_NOMEM;
  free(uri);
  if (rc != SQLITE_OK) {
    snprintf(err, errlen, "%s: cannot open: %s", path, s->db ? sqlite3_errmsg(s->db) : "out of memory");
    goto fail;
  }
  sqlite3_busy_timeout(s->db, busy_timeout_ms);
  sqlite3_extended_result_codes(s->db, 1);
  /* A new database gets 64 KiB pages: basis blobs run to megabytes, and with
   * 4 KiB pages SQLite writes them 2x and reads them 4x slower (overflow page
   * chains). It must be set before the first table and before WAL. An 8 MiB
   * cache: larger ones only add first-touch page faults to big writes (64 MiB
   * made the basis stage 1.5x slower). */
  if (store_int(s->db, "SELECT count(*) FROM sqlite_schema", 0) == 0 &&
      store_exec(s->db, "PRAGMA page_size=65536", err, errlen))
    goto fail;
  if (store_exec(s->db, "PRAGMA cache_size=-8192", err, errlen)) goto fail;
  char sql[128];
  snprintf(sql, sizeof sql, "PRAGMA journal_mode=%s", journal && !strcmp(journal, "delete") ? "DELETE" : "WAL");
  if (store_exec(s->db, sql, err, errlen)) goto fail;
  /* NORMAL is durable across process crashes in WAL mode; FULL for rollback journals. */
  if (store_exec(s->db, journal && !strcmp(journal, "delete") ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL",
                 err, errlen))
    goto fail;
  if (store_exec(s->db, "PRAGMA foreign_keys=ON", err, errlen)) goto fail;
  if (migrate(s, err, errlen)) goto fail;
  return 0;
fail:
  store_close(s);
  return -1;
}

void store_close(struct store *s) {
  if (s->db) sqlite3_close_v2(s->db);
  s->db = NULL;
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

int store_lock(struct store *s, char *err, size_t errlen) {
  if (asprintf(&s->lock_path, "%s.lock", s->path) < 0) return -1;
  int fd = open(s->lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    snprintf(err, errlen, "%s: %s", s->lock_path, strerror(errno));
    return -1;
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char holder[512] = "";
    ssize_t n = pread(fd, holder, sizeof holder - 1, 0);
    holder[n > 0 ? n : 0] = 0;
    char *nl = strchr(holder, '\n');
    if (nl) *nl = 0;
    snprintf(err, errlen, "%s is being written by another se3screen (%s); wait for it or stop it", s->path,
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
  if (ftruncate(fd, 0) != 0 || pwrite(fd, line, (size_t)len, 0) != len) {
    snprintf(err, errlen, "%s: cannot write: %s", s->lock_path, strerror(errno));
    close(fd);
    return -1;
  }
  s->lock_fd = fd;
  return 0;
}

int store_attach_readonly(struct store *s, const char *path, const char *schema, char *err, size_t errlen) {
  char *uri = file_uri(path, "mode=ro");
  char *sql = uri ? sqlite3_mprintf("ATTACH %Q AS \"%w\"", uri, schema) : NULL;
  int rc = sql ? store_exec(s->db, sql, err, errlen) : -1;
  if (!sql) snprintf(err, errlen, "out of memory attaching %s", path);
  sqlite3_free(sql);
  free(uri);
  return rc;
}
