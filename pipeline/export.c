/* export.c — `se3screen export`: ranked_hits or one read-only statement's
 * rows as CSV, SDF or SMILES (export.h).
 *
 * The SQL goes through query.c's guard (query_open, query_prepare_one), so
 * export reads what `query` may read and nothing more, and its CSV is the
 * text `query --csv` prints. Molecules for SDF and SMILES are looked up by id
 * on the same guarded connection. Everything that can refuse the command
 * (the SQL, the columns a format needs, the output path) is checked before
 * the output file is created. The row loop is where the bounds and a
 * stopping signal are checked, so a stopped export never commits its file. */
#define _GNU_SOURCE
#include "pipeline/export.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "chem/dock.h"
#include "chem/mol.h"
#include "chem/obbridge.h"
#include "chem/sdtext.h"
#include "common/csvcell.h"
#include "common/atomic_file.h"
#include "common/error.h"
#include "pipeline/config.h"
#include "pipeline/query.h"
#include "pipeline/runner.h"
#include "pipeline/run_files.h"
#include "pipeline/store.h"

#define WHO "se3screen export"

int export_parse_format(const char *s, enum export_format *f) {
  if (!strcmp(s, "csv"))
    *f = EXPORT_CSV;
  else if (!strcmp(s, "sdf"))
    *f = EXPORT_SDF;
  else if (!strcmp(s, "smi"))
    *f = EXPORT_SMI;
  else
    return -1;
  return 0;
}

void export_default_bounds(struct export_opts *o) {
  o->timeout_s = -1;
  o->max_rows = o->max_bytes = -1;
}

int export_parse_bound(struct export_opts *o, const char *opt, const char *v, char *why, size_t why_len) {
  char *end;
  if (!strcmp(opt, "--timeout")) {
    double t = strtod(v, &end);
    if (end == v || *end || !(t >= 0) || t > 1e9) {
      snprintf(why, why_len, "--timeout needs seconds >= 0, got '%s'", v);
      return -1;
    }
    o->timeout_s = t;
    return 0;
  }
  int bytes = !strcmp(opt, "--max-bytes");
  errno = 0;
  long long n = strtoll(v, &end, 10);
  int shift = !bytes ? 0 : *end == 'K' || *end == 'k' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : 0;
  if (shift) end++;
  if (end == v || *end || n < 0 || errno || n > (LLONG_MAX >> shift)) {
    snprintf(why, why_len,
             bytes ? "--max-bytes needs a whole number >= 0 (K/M/G allowed), got '%s'"
                   : "--max-rows needs a whole number >= 0, got '%s'",
             v);
    return -1;
  }
  if (bytes)
    o->max_bytes = n << shift;
  else
    o->max_rows = n;
  return 0;
}

/* What one export holds while it runs. */
struct exp {
  const struct export_opts *o;
  sqlite3_stmt *st;   /* the rows */
  sqlite3_stmt *look; /* name, smiles, mol FROM molecules WHERE id = ?1; NULL when not needed */
  sqlite3_stmt *poses; /* --poses: a molecule's poses (mode, score, terms, pose), best first */
  char *receptor;      /* --poses: the receptor, tagged on each pose as hits.sdf does (NULL: unknown) */
  long long records, no_pose; /* --poses: records written; rows left out without a pose */
  int nc;
  int c_id, c_name, c_smiles; /* columns of st, -1 when absent */
  long long row;              /* 1-based row being written, for messages */
  long long bytes;            /* of values in the rows written, as --max-bytes counts them */
  FILE *f;
};

/* ---- stopping on a signal ------------------------------------------------
 *
 * SIGINT, SIGTERM and SIGUSR1 set a flag the row loop reads before each row
 * and interrupt SQLite, which may be inside a long step (a sort, a CTE that
 * returns nothing). sqlite3_interrupt only sets a flag in the connection:
 * safe in a handler, as the sqlite3 shell uses it. */
static volatile sig_atomic_t stop_signal;
static sqlite3 *volatile stop_db;

static void on_stop(int sig) {
  stop_signal = sig;
  sqlite3 *db = stop_db;
  if (db) sqlite3_interrupt(db);
}

enum { N_STOP = SE3_N_STOP_SIGNALS };

static void catch_stop(struct sigaction old[N_STOP]) {
  stop_signal = 0;
  /* SA_RESTART: a write in progress finishes; the loop stops after it */
  se3_on_stop_signals(on_stop, SA_RESTART, old);
}

static void release_stop(const struct sigaction old[N_STOP]) {
  stop_db = NULL;
  for (int i = 0; i < N_STOP; i++)
    sigaction(se3_stop_signals[i], &old[i], NULL);
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Bytes of the current row's values as `query --max-bytes` counts them. */
static long long row_bytes(const struct exp *e) {
  long long n = 0;
  for (int i = 0; i < e->nc; i++) {
    int t = sqlite3_column_type(e->st, i);
    n += t == SQLITE_TEXT || t == SQLITE_BLOB ? sqlite3_column_bytes(e->st, i) : 8;
  }
  return n;
}

/* Column named name (SQLite compares names without case), or -1. */
static int column(sqlite3_stmt *st, const char *name) {
  for (int i = 0, n = sqlite3_column_count(st); i < n; i++)
    if (!sqlite3_stricmp(sqlite3_column_name(st, i), name)) return i;
  return -1;
}

/* Finds the row's molecule: e->look stepped to its row. Returns 0, or 1
 * with the message printed (a NULL id, an id molecules does not hold). */
static int find_molecule(struct exp *e) {
  const char *id_name = sqlite3_column_name(e->st, e->c_id);
  if (sqlite3_column_type(e->st, e->c_id) == SQLITE_NULL) {
    fprintf(stderr, WHO ": row %lld: %s is NULL; every row needs its molecule's id\n", e->row, id_name);
    return SE3_EXIT_FAILED;
  }
  sqlite3_reset(e->look);
  sqlite3_bind_value(e->look, 1, sqlite3_column_value(e->st, e->c_id));
  int rc = sqlite3_step(e->look);
  if (rc == SQLITE_ROW) return SE3_EXIT_OK;
  if (rc == SQLITE_DONE)
    fprintf(stderr, WHO ": row %lld: %s %s not found in molecules\n", e->row, id_name,
            (const char *)sqlite3_column_text(e->st, e->c_id));
  else
    fprintf(stderr, WHO ": row %lld: reading molecules: %s\n", e->row, sqlite3_errmsg(sqlite3_db_handle(e->look)));
  return SE3_EXIT_FAILED;
}

/* ---- csv ---------------------------------------------------------------- */

/* Cells as `query --csv` writes them, but text that a spreadsheet would
 * run as a formula gets a ' in front (common/csvcell.h); numbers (INTEGER
 * and REAL values, and text that is a plain number) never do. */
static void csv_header(struct exp *e) {
  for (int i = 0; i < e->nc; i++) {
    if (i) fputc(',', e->f);
    csv_cell_write(e->f, sqlite3_column_name(e->st, i), 1);
  }
  fputc('\n', e->f);
}

static int csv_row(struct exp *e) {
  for (int i = 0; i < e->nc; i++) {
    int text = sqlite3_column_type(e->st, i) == SQLITE_TEXT; /* read before the value is converted */
    char *c = query_value_text(e->st, i);
    if (!c) {
      fprintf(stderr, WHO ": out of memory at row %lld\n", e->row);
      return SE3_EXIT_FAILED;
    }
    if (i) fputc(',', e->f);
    csv_cell_write(e->f, c, text);
    free(c);
  }
  fputc('\n', e->f);
  return SE3_EXIT_OK;
}

/* ---- sdf ---------------------------------------------------------------- */

/* The pose of e->poses' row: its mode, score and Vina's terms (NAN where
 * NULL). */
static int pose_row(sqlite3_stmt *st, struct dock_pose *p) {
  double *v[] = {&p->score, &p->inter, &p->intra, &p->rmsd_lb, &p->rmsd_ub};
  for (int i = 0; i < 5; i++)
    *v[i] = sqlite3_column_type(st, i + 1) == SQLITE_NULL ? NAN : sqlite3_column_double(st, i + 1);
  return (int)sqlite3_column_int64(st, 0);
}

/* One record: the molecule `blob` titled and tagged by the row (and by
 * the pose, when e->poses is on one). */
static int sdf_record(struct exp *e, const void *blob, size_t len, int pose) {
  int ret = SE3_EXIT_OK;
  struct mol m;
  char err[256];
  mol_init(&m);
  /* The id's text only where a message needs it: SQLite leaves a column's
   * type undefined once its value has been converted, and the tags below
   * read every column's type. */
  struct se3_error e2;
  if (mol_from_blob(blob, len, &m, &e2)) {
    fprintf(stderr, WHO ": row %lld: molecule %s: %s (run `se3screen verify` on the database)\n", e->row,
            (const char *)sqlite3_column_text(e->st, e->c_id), se3_error_format(&e2, err, sizeof err));
    return SE3_EXIT_FAILED;
  }
  const char *title = e->c_name >= 0 && sqlite3_column_type(e->st, e->c_name) != SQLITE_NULL
                          ? (const char *)sqlite3_column_text(e->st, e->c_name)
                          : (const char *)sqlite3_column_text(e->look, 0);
  m.name = strdup(title ? title : "");
  if (!m.name) ret = SE3_EXIT_FAILED;
  for (int i = 0; i < e->nc && !ret; i++) {
    if (i == e->c_name || sqlite3_column_type(e->st, i) == SQLITE_NULL) continue;
    char *value = query_value_text(e->st, i);
    if (!value || mol_add_tag(&m, sqlite3_column_name(e->st, i), value)) ret = SE3_EXIT_FAILED;
    free(value);
  }
  struct dock_pose p;
  if (!ret && pose && dock_pose_tags(&m, pose_row(e->poses, &p), &p)) ret = SE3_EXIT_FAILED;
  if (!ret && pose && e->receptor && mol_add_tag(&m, "receptor", e->receptor)) ret = SE3_EXIT_FAILED;
  /* nothing a row holds may end its record or a value early (sdtext.h) */
  if (!ret && sd_make_safe(&m)) ret = SE3_EXIT_FAILED;
  if (ret) {
    fprintf(stderr, WHO ": out of memory at row %lld\n", e->row);
    mol_free(&m);
    return ret;
  }
  char *text = ob_write_sdf(&m);
  mol_free(&m);
  if (!text) {
    fprintf(stderr, WHO ": row %lld: molecule %s: Open Babel could not write it as SDF\n", e->row,
            (const char *)sqlite3_column_text(e->st, e->c_id));
    return SE3_EXIT_FAILED;
  }
  fputs(text, e->f);
  free(text);
  e->records++;
  return SE3_EXIT_OK;
}

static int sdf_row(struct exp *e) {
  int ret = find_molecule(e);
  if (ret) return ret;
  if (!e->poses)
    return sdf_record(e, sqlite3_column_blob(e->look, 2), (size_t)sqlite3_column_bytes(e->look, 2), 0);
  sqlite3_reset(e->poses);
  sqlite3_bind_value(e->poses, 1, sqlite3_column_value(e->st, e->c_id));
  int rc, n = 0;
  while (!ret && (rc = sqlite3_step(e->poses)) == SQLITE_ROW) {
    ret = sdf_record(e, sqlite3_column_blob(e->poses, 6), (size_t)sqlite3_column_bytes(e->poses, 6), 1);
    n++;
  }
  if (!ret && rc != SQLITE_DONE) {
    fprintf(stderr, WHO ": row %lld: reading its poses: %s\n", e->row, sqlite3_errmsg(sqlite3_db_handle(e->poses)));
    ret = SE3_EXIT_FAILED;
  }
  e->no_pose += !ret && n == 0;
  return ret;
}

/* --poses: the receptor the workflow docks into, as the rank stage's
 * hits.sdf names it (stages.dock.receptor of the workflow the database was
 * run with, as its file is now, with that run's --set overrides); NULL
 * where it cannot be told (the workflow gone or no longer read, an oracle
 * table). malloc'd. */
static char *workflow_receptor(sqlite3 *db) {
  char *wf = store_text(db, "SELECT value FROM meta WHERE key = 'workflow'");
  char *sets = store_text(db, "SELECT value FROM meta WHERE key = 'sets'");
  const char *setv[64];
  int n_set = 0;
  for (char *save = NULL, *t = sets ? strtok_r(sets, "\n", &save) : NULL; t && n_set < 64;
       t = strtok_r(NULL, "\n", &save))
    setv[n_set++] = t;
  struct cfg_errors errs = {0};
  struct cfg_node *root = wf && access(wf, R_OK) == 0 ? cfg_load(wf, setv, n_set, &errs) : NULL;
  cfg_errors_free(&errs);
  const char *r = root ? cfg_str_opt(root, "stages.dock.receptor") : NULL;
  char *out = r ? strdup(r) : NULL;
  cfg_node_free(root);
  free(sets);
  free(wf);
  return out;
}

/* --poses: the statement of a molecule's poses, those of its docking as
 * the molecule is now. 0, or an exit code with the message printed. */
static int prepare_poses(struct exp *e, sqlite3 *db) {
  if (sqlite3_prepare_v2(db,
                         "SELECT p.mode, p.score, p.inter, p.intra, p.rmsd_lb, p.rmsd_ub, p.pose FROM poses p JOIN "
                         "docking k ON k.mol_id = p.mol_id JOIN molecules m ON m.id = k.mol_id AND m.mol_hash IS "
                         "k.mol_hash WHERE p.mol_id = ?1 ORDER BY p.mode",
                         -1, &e->poses, NULL) == SQLITE_OK)
    return SE3_EXIT_OK;
  int old = sqlite3_strglob("*no such table*", sqlite3_errmsg(db)) == 0;
  fprintf(stderr, WHO ": --poses: %s\n",
          old ? "this database keeps no poses (made by an earlier se3screen, schema version before 12: run "
                "`se3screen upgrade` on its workdir)"
              : sqlite3_errmsg(db));
  return SE3_EXIT_FAILED;
}

/* ---- smi ---------------------------------------------------------------- */

static int smi_row(struct exp *e) {
  if (e->look) {
    int ret = find_molecule(e);
    if (ret) return ret;
  }
  const char *smiles = e->c_smiles >= 0 ? (const char *)sqlite3_column_text(e->st, e->c_smiles)
                                        : (const char *)sqlite3_column_text(e->look, 1);
  if (!smiles || !*smiles) {
    fprintf(stderr, WHO ": row %lld: no SMILES (NULL or empty)\n", e->row);
    return SE3_EXIT_FAILED;
  }
  if (smiles[strcspn(smiles, " \t\r\n")]) { /* it would run into the name, or onto another line */
    fprintf(stderr, WHO ": row %lld: '%s' is not a SMILES (it holds whitespace)\n", e->row, smiles);
    return SE3_EXIT_FAILED;
  }
  const char *name = e->c_name >= 0 ? (const char *)sqlite3_column_text(e->st, e->c_name)
                     : e->look      ? (const char *)sqlite3_column_text(e->look, 0)
                                    : NULL;
  fputs(smiles, e->f);
  if (name && *name) {
    /* the name is the rest of the line: no line breaks in it */
    fputc('\t', e->f);
    for (const char *p = name; *p; p++)
      fputc(*p == '\n' || *p == '\r' ? ' ' : *p, e->f);
  }
  fputc('\n', e->f);
  return SE3_EXIT_OK;
}

/* ---- the verb ----------------------------------------------------------- */

/* Refuses an output that would replace the database or is a folder. */
static int check_output(const char *out, const char *db) {
  if (!strcmp(out, "-")) return SE3_EXIT_OK;
  /* first, before out need exist: screen.db-wal is the database's too */
  struct se3_error err;
  if (run_files_check_output(db, out, &err)) {
    fprintf(stderr, WHO ": -o %s\n", se3_error_str(&err).s);
    return SE3_EXIT_USAGE;
  }
  struct stat so;
  if (stat(out, &so) == 0 && S_ISDIR(so.st_mode)) {
    fprintf(stderr, WHO ": -o %s is a folder; name a file\n", out);
    return SE3_EXIT_USAGE;
  }
  return SE3_EXIT_OK;
}

/* Reads the next row into e->st, checking first what may end the export
 * before it: a stopping signal, --timeout, and (for the row read)
 * --max-rows and --max-bytes. Returns SE3_EXIT_OK with *rc the step's
 * result, or the exit code with the message printed. */
static int next_row(struct exp *e, struct query_conn *qc, double timeout_s, double deadline, long long max_rows,
                    long long max_bytes, int *rc) {
  if (stop_signal) return SE3_EXIT_STOPPED;
  if (deadline > 0 && now_s() > deadline) {
    fprintf(stderr, WHO ": stopped after %g s (--timeout), at row %lld\n", timeout_s, e->row + 1);
    return SE3_EXIT_FAILED;
  }
  *rc = sqlite3_step(e->st);
  if (stop_signal) return SE3_EXIT_STOPPED; /* SQLite was interrupted, or the row came first */
  if (*rc != SQLITE_ROW) return *rc == SQLITE_DONE ? SE3_EXIT_OK : query_step_failed(qc);
  long long bytes = row_bytes(e);
  const char *by = max_rows > 0 && e->row + 1 > max_rows           ? "--max-rows"
                   : max_bytes > 0 && e->bytes + bytes > max_bytes ? "--max-bytes"
                                                                   : NULL;
  if (by) {
    fprintf(stderr,
            WHO ": stopped at %lld row%s (%lld bytes of values) by %s %lld: the result has more; "
                "raise it, or 0 for no limit\n",
            e->row, e->row == 1 ? "" : "s", e->bytes, by, by[6] == 'r' ? max_rows : max_bytes);
    return SE3_EXIT_FAILED;
  }
  e->bytes += bytes;
  return SE3_EXIT_OK;
}

/* ranked_hits' columns to export: all (`*`), but conformer_sd where no hit
 * has one (one conformer a molecule, or a database before schema 13 where
 * the question fails), and isomer_smiles where no hit has one (every
 * input's stereo given, or a database before schema 16): the file as
 * before. */
static const char *hits_columns(sqlite3 *db) {
  static char cols[256];
  int csd = 0, iso = 0;
  sqlite3_stmt *ask = NULL;
  if (sqlite3_prepare_v2(db, "SELECT EXISTS(SELECT 1 FROM ranked_hits WHERE conformer_sd IS NOT NULL)", -1, &ask,
                         NULL) == SQLITE_OK &&
      sqlite3_step(ask) == SQLITE_ROW)
    csd = sqlite3_column_int(ask, 0);
  sqlite3_finalize(ask);
  ask = NULL;
  if (sqlite3_prepare_v2(db, "SELECT EXISTS(SELECT 1 FROM ranked_hits WHERE isomer_smiles IS NOT NULL)", -1, &ask,
                         NULL) == SQLITE_OK &&
      sqlite3_step(ask) == SQLITE_ROW)
    iso = sqlite3_column_int(ask, 0);
  sqlite3_finalize(ask);
  snprintf(cols, sizeof cols,
           "rank, name, smiles, inchikey, target, score, std, set_name, source_file, record_no, mol_id, "
           "nearest_train, similarity%s%s",
           csd ? ", conformer_sd" : "", iso ? ", isomer_smiles" : "");
  return cols;
}

int export_run(const struct export_opts *o) {
  char path[4096];
  struct stat sb;
  if (stat(o->db, &sb) == 0 && S_ISDIR(sb.st_mode))
    snprintf(path, sizeof path, "%s/screen.db", o->db);
  else
    snprintf(path, sizeof path, "%s", o->db);
  /* the bounds: export.h says why ranked_hits has none by default */
  double timeout_s = o->timeout_s >= 0 ? o->timeout_s : o->query ? EXPORT_DEFAULT_QUERY_TIMEOUT_S : 0;
  long long max_rows = o->max_rows > 0 ? o->max_rows : 0, max_bytes = o->max_bytes > 0 ? o->max_bytes : 0;
  double deadline = timeout_s > 0 ? now_s() + timeout_s : 0;
  /* From here a signal stops the export rather than the process: nothing
   * may be left half written, and the caller hears 75. */
  struct sigaction old[N_STOP];
  catch_stop(old);
  /* The database first (a lock waited for within --timeout), then the
   * output checked against the files it names: open, the connection also
   * has the folder left as it was found (store.h), whoever else in this
   * process read the database meanwhile. */
  struct query_conn *qc = NULL;
  int ret = query_open(&qc, path, WHO, timeout_s);
  if (!ret && (ret = check_output(o->out, path))) query_close(qc);
  if (ret) {
    release_stop(old);
    return ret;
  }
  stop_db = query_db(qc);
  struct exp e = {.o = o, .c_id = -1, .c_name = -1, .c_smiles = -1};
  const char *cols = o->query ? "*" : hits_columns(query_db(qc));
  char *sql = o->query     ? sqlite3_mprintf("%s", o->query)
              : o->top > 0 ? sqlite3_mprintf("SELECT %s FROM ranked_hits ORDER BY rank LIMIT %lld", cols, o->top)
                           : sqlite3_mprintf("SELECT %s FROM ranked_hits ORDER BY rank", cols);
  struct atomic_file af = {0};
  const char *fmt_name = o->format == EXPORT_CSV ? "csv" : o->format == EXPORT_SDF ? "sdf" : "smi";
  if (!sql) {
    fprintf(stderr, WHO ": out of memory\n");
    ret = SE3_EXIT_FAILED;
    goto done;
  }
  if ((ret = query_prepare_one(qc, sql, &e.st))) goto done;
  e.nc = sqlite3_column_count(e.st);
  if (e.nc == 0) {
    fprintf(stderr, WHO ": the statement returns no rows to export\n");
    ret = SE3_EXIT_USAGE;
    goto done;
  }
  e.c_id = column(e.st, "mol_id");
  if (e.c_id < 0) e.c_id = column(e.st, "id");
  e.c_name = column(e.st, "name");
  e.c_smiles = column(e.st, "smiles");
  if (o->format == EXPORT_SDF && e.c_id < 0) {
    fprintf(stderr, WHO ": --format sdf needs each row's molecule: add a column mol_id (molecules.id) to the query, "
                        "e.g. SELECT ..., m.id AS mol_id FROM molecules m ...\n");
    ret = SE3_EXIT_USAGE;
    goto done;
  }
  if (o->format == EXPORT_SMI && e.c_smiles < 0 && e.c_id < 0) {
    fprintf(stderr, WHO ": --format smi needs a smiles column or each row's molecule id: add smiles or mol_id "
                        "(molecules.id) to the query\n");
    ret = SE3_EXIT_USAGE;
    goto done;
  }
  int need_look =
      o->format == EXPORT_SDF || (o->format == EXPORT_SMI && e.c_id >= 0 && (e.c_smiles < 0 || e.c_name < 0));
  if (need_look && sqlite3_prepare_v2(query_db(qc), "SELECT name, smiles, mol FROM molecules WHERE id = ?1", -1,
                                      &e.look, NULL) != SQLITE_OK) {
    fprintf(stderr, WHO ": reading molecules: %s\n", sqlite3_errmsg(query_db(qc)));
    ret = SE3_EXIT_FAILED;
    goto done;
  }
  if (o->poses && (ret = prepare_poses(&e, query_db(qc)))) goto done;
  if (o->poses) e.receptor = workflow_receptor(query_db(qc));
  if (o->format == EXPORT_SDF && ob_init() != 0) {
    fprintf(stderr, WHO ": Open Babel could not be set up\n");
    ret = SE3_EXIT_FAILED;
    goto done;
  }
  if (stop_signal) {
    ret = SE3_EXIT_STOPPED;
    goto done;
  }
  if (strcmp(o->out, "-")) {
    struct se3_error err;
    if (atomic_file_open(&af, o->out, &err)) {
      fprintf(stderr, WHO ": %s\n", se3_error_str(&err).s);
      ret = SE3_EXIT_FAILED;
      goto done;
    }
    e.f = af.f;
  } else {
    e.f = stdout;
  }
  if (o->format == EXPORT_CSV) csv_header(&e);
  int rc = SQLITE_DONE;
  while (!(ret = next_row(&e, qc, timeout_s, deadline, max_rows, max_bytes, &rc)) && rc == SQLITE_ROW) {
    e.row++;
    ret = o->format == EXPORT_CSV ? csv_row(&e) : o->format == EXPORT_SDF ? sdf_row(&e) : smi_row(&e);
    if (ret) break;
  }
  if (!ret && stop_signal) ret = SE3_EXIT_STOPPED; /* nothing is committed once asked to stop */
  if (!ret && o->poses && e.row > 0 && e.records == 0) {
    fprintf(stderr, WHO ": --poses: none of the %lld row%s has a docked pose (has the dock stage run with Vina on "
                        "these molecules?)\n",
            e.row, e.row == 1 ? "" : "s");
    ret = SE3_EXIT_FAILED;
  }
  if (ret == SE3_EXIT_STOPPED)
    fprintf(stderr, WHO ": stopped by signal %d (%s) after %lld row%s\n", (int)stop_signal, strsignal((int)stop_signal),
            e.row, e.row == 1 ? "" : "s");
  if (e.f == stdout) {
    if (fflush(stdout) != 0 || ferror(stdout)) {
      fprintf(stderr, WHO ": writing to stdout: %s\n", strerror(errno));
      if (!ret) ret = SE3_EXIT_FAILED;
    }
    if (ret) fprintf(stderr, WHO ": the rows on stdout end after row %lld; the result was not written whole\n", e.row);
  } else if (ret) {
    atomic_file_abort(&af);
    fprintf(stderr, WHO ": no file written (%s is as it was)\n", o->out);
  } else {
    struct se3_error err;
    if (atomic_file_commit(&af, &err)) {
      fprintf(stderr, WHO ": %s\n", se3_error_str(&err).s);
      ret = SE3_EXIT_FAILED;
    }
  }
  if (!ret) {
    long long n = e.row;
    fprintf(stderr, WHO ": %lld row%s written to %s (%s)\n", n, n == 1 ? "" : "s",
            strcmp(o->out, "-") ? o->out : "stdout", fmt_name);
    if (o->poses)
      fprintf(stderr, WHO ": %lld docked poses of %lld rows; %lld row%s without a pose left out\n", e.records,
              n - e.no_pose, e.no_pose, e.no_pose == 1 ? "" : "s");
    if (!n && !o->query) fprintf(stderr, WHO ": ranked_hits is empty: has the rank stage run on this database?\n");
  }
done:
  if (ret == SE3_EXIT_STOPPED && !e.f)
    fprintf(stderr, WHO ": stopped by signal %d (%s) before writing; no file written\n", (int)stop_signal,
            strsignal((int)stop_signal));
  stop_db = NULL;
  sqlite3_finalize(e.look);
  sqlite3_finalize(e.poses);
  free(e.receptor);
  sqlite3_finalize(e.st);
  sqlite3_free(sql);
  query_close(qc);
  release_stop(old);
  return ret;
}
