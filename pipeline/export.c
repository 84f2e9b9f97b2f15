/* export.c — `se3screen export`: ranked_hits or one read-only statement's
 * rows as CSV, SDF or SMILES (export.h).
 *
 * The SQL goes through query.c's guard (query_open, query_prepare_one), so
 * export reads what `query` may read and nothing more, and its CSV is the
 * text `query --csv` prints. Molecules for SDF and SMILES are looked up by id
 * on the same guarded connection. Everything that can refuse the command
 * (the SQL, the columns a format needs, the output path) is checked before
 * the output file is created. */
#define _GNU_SOURCE
#include "pipeline/export.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "chem/mol.h"
#include "chem/obbridge.h"
#include "models/atomic_file.h"
#include "pipeline/query.h"
#include "pipeline/runner.h"

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

/* What one export holds while it runs. */
struct exp {
  const struct export_opts *o;
  sqlite3_stmt *st;   /* the rows */
  sqlite3_stmt *look; /* name, smiles, mol FROM molecules WHERE id = ?1; NULL when not needed */
  int nc;
  int c_id, c_name, c_smiles; /* columns of st, -1 when absent */
  long long row;              /* 1-based row being written, for messages */
  FILE *f;
};

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

static void csv_header(struct exp *e) {
  for (int i = 0; i < e->nc; i++) {
    if (i) fputc(',', e->f);
    query_csv_field(e->f, sqlite3_column_name(e->st, i));
  }
  fputc('\n', e->f);
}

static int csv_row(struct exp *e) {
  for (int i = 0; i < e->nc; i++) {
    char *c = query_value_text(e->st, i);
    if (!c) {
      fprintf(stderr, WHO ": out of memory at row %lld\n", e->row);
      return SE3_EXIT_FAILED;
    }
    if (i) fputc(',', e->f);
    query_csv_field(e->f, c);
    free(c);
  }
  fputc('\n', e->f);
  return SE3_EXIT_OK;
}

/* ---- sdf ---------------------------------------------------------------- */

/* An SD tag's name goes between < and >: those and control characters
 * would end it early, so they become '_'. */
static char *tag_name(const char *s) {
  char *t = strdup(s ? s : "");
  for (char *p = t; p && *p; p++)
    if (*p == '<' || *p == '>' || (unsigned char)*p < 0x20) *p = '_';
  return t;
}

/* An SD tag's value ends at the first blank line, and a title is one line:
 * in a value every line break becomes '\n' and blank lines go; in a title
 * (one_line) line breaks and tabs become spaces. Edits s in place. */
static void sd_text(char *s, int one_line) {
  char *w = s;
  for (const char *r = s; *r; r++) {
    char c = *r == '\r' ? '\n' : *r;
    if (one_line && (c == '\n' || c == '\t')) c = ' ';
    if (!one_line && c == '\n' && (w == s || w[-1] == '\n')) continue;
    *w++ = c;
  }
  while (!one_line && w > s && w[-1] == '\n')
    w--;
  *w = 0;
}

static int sdf_row(struct exp *e) {
  int ret = find_molecule(e);
  if (ret) return ret;
  struct mol m;
  char err[256];
  mol_init(&m);
  /* The id's text only where a message needs it: SQLite leaves a column's
   * type undefined once its value has been converted, and the tags below
   * read every column's type. */
  if (mol_from_blob(sqlite3_column_blob(e->look, 2), (size_t)sqlite3_column_bytes(e->look, 2), &m, err, sizeof err)) {
    fprintf(stderr, WHO ": row %lld: molecule %s: %s (run `se3screen verify` on the database)\n", e->row,
            (const char *)sqlite3_column_text(e->st, e->c_id), err);
    return SE3_EXIT_FAILED;
  }
  const char *title = e->c_name >= 0 && sqlite3_column_type(e->st, e->c_name) != SQLITE_NULL
                          ? (const char *)sqlite3_column_text(e->st, e->c_name)
                          : (const char *)sqlite3_column_text(e->look, 0);
  m.name = strdup(title ? title : "");
  if (!m.name)
    ret = SE3_EXIT_FAILED;
  else
    sd_text(m.name, 1);
  for (int i = 0; i < e->nc && !ret; i++) {
    if (i == e->c_name || sqlite3_column_type(e->st, i) == SQLITE_NULL) continue;
    char *name = tag_name(sqlite3_column_name(e->st, i)), *value = query_value_text(e->st, i);
    if (value) sd_text(value, 0);
    if (!name || !value || mol_add_tag(&m, name, value)) ret = SE3_EXIT_FAILED;
    free(name);
    free(value);
  }
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
  return SE3_EXIT_OK;
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
  struct stat so, sd;
  if (!strcmp(out, "-") || stat(out, &so) != 0) return SE3_EXIT_OK;
  if (S_ISDIR(so.st_mode)) {
    fprintf(stderr, WHO ": -o %s is a folder; name a file\n", out);
    return SE3_EXIT_USAGE;
  }
  if (stat(db, &sd) == 0 && so.st_dev == sd.st_dev && so.st_ino == sd.st_ino) {
    fprintf(stderr, WHO ": -o %s is the database itself; name another file\n", out);
    return SE3_EXIT_USAGE;
  }
  return SE3_EXIT_OK;
}

int export_run(const struct export_opts *o) {
  char path[4096];
  struct stat sb;
  if (stat(o->db, &sb) == 0 && S_ISDIR(sb.st_mode))
    snprintf(path, sizeof path, "%s/screen.db", o->db);
  else
    snprintf(path, sizeof path, "%s", o->db);
  int ret = check_output(o->out, path);
  if (ret) return ret;
  /* No --timeout or row limits: an export is asked to write everything. */
  struct query_conn *qc = NULL;
  if ((ret = query_open(&qc, path, WHO, 0))) return ret;
  struct exp e = {.o = o, .c_id = -1, .c_name = -1, .c_smiles = -1};
  char *sql = o->query     ? sqlite3_mprintf("%s", o->query)
              : o->top > 0 ? sqlite3_mprintf("SELECT * FROM ranked_hits ORDER BY rank LIMIT %lld", o->top)
                           : sqlite3_mprintf("SELECT * FROM ranked_hits ORDER BY rank");
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
  if (o->format == EXPORT_SDF && ob_init() != 0) {
    fprintf(stderr, WHO ": Open Babel could not be set up\n");
    ret = SE3_EXIT_FAILED;
    goto done;
  }
  if (strcmp(o->out, "-")) {
    char err[8448];
    if (atomic_file_open(&af, o->out, err, sizeof err)) {
      fprintf(stderr, WHO ": %s\n", err);
      ret = SE3_EXIT_FAILED;
      goto done;
    }
    e.f = af.f;
  } else {
    e.f = stdout;
  }
  if (o->format == EXPORT_CSV) csv_header(&e);
  int rc = SQLITE_DONE;
  while (!ret && (rc = sqlite3_step(e.st)) == SQLITE_ROW) {
    e.row++;
    ret = o->format == EXPORT_CSV ? csv_row(&e) : o->format == EXPORT_SDF ? sdf_row(&e) : smi_row(&e);
  }
  if (!ret && rc != SQLITE_DONE) ret = query_step_failed(qc);
  if (e.f == stdout) {
    if (fflush(stdout) != 0 || ferror(stdout)) {
      fprintf(stderr, WHO ": writing to stdout: %s\n", strerror(errno));
      if (!ret) ret = SE3_EXIT_FAILED;
    }
  } else if (ret) {
    atomic_file_abort(&af);
  } else {
    char err[8448];
    if (atomic_file_commit(&af, err, sizeof err)) {
      fprintf(stderr, WHO ": %s\n", err);
      ret = SE3_EXIT_FAILED;
    }
  }
  if (!ret) {
    long long n = e.row;
    fprintf(stderr, WHO ": %lld row%s written to %s (%s)\n", n, n == 1 ? "" : "s",
            strcmp(o->out, "-") ? o->out : "stdout", fmt_name);
    if (!n && !o->query) fprintf(stderr, WHO ": ranked_hits is empty: has the rank stage run on this database?\n");
  }
done:
  sqlite3_finalize(e.look);
  sqlite3_finalize(e.st);
  sqlite3_free(sql);
  query_close(qc);
  return ret;
}
