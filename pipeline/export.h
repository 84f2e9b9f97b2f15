/* export.h — `se3screen export`: a result set out as CSV, SDF or SMILES.
 *
 * The rows are ranked_hits (all, or the first N) or those of one read-only
 * SQL statement, checked as `se3screen query` checks its SQL (query.h). The
 * database is opened read-only; the output is written through a temporary
 * file renamed on success (models/atomic_file.h), so a failure leaves no
 * half file.
 *
 *   csv  a header row and the rows: the columns and text `query --csv` gives
 *        (RFC 4180 quoting, NULL empty, REALs that read back exactly)
 *   sdf  one record a row: the molecule from molecules.mol (found by the
 *        row's mol_id column, else its id column), titled by the row's name
 *        column (else molecules.name), every other column an SD tag; a NULL
 *        leaves its tag out
 *   smi  one line a row: SMILES, a tab, the name (just the SMILES when there
 *        is no name); SMILES and name from the row's smiles and name
 *        columns, else from molecules by the row's molecule id
 */
#ifndef SE3_EXPORT_H
#define SE3_EXPORT_H

enum export_format { EXPORT_CSV, EXPORT_SDF, EXPORT_SMI };

struct export_opts {
  const char *db; /* a database, or a workdir (its screen.db) */
  enum export_format format;
  const char *query; /* one read-only statement; NULL: ranked_hits */
  long long top;     /* > 0 (without query): the first N of ranked_hits */
  const char *out;   /* the file to write, "-" for stdout */
};

/* "csv", "sdf" or "smi" into *f: 0, or -1 for anything else. */
int export_parse_format(const char *s, enum export_format *f);

/* Writes the rows and says on stderr how many. Returns an exit code: 0; 1
 * when the database cannot be read as asked, a molecule is missing or
 * damaged, or the file cannot be written; 2 for a database that cannot be
 * opened, SQL that is not one reading statement, rows without what the
 * format needs (a molecule id, SMILES), or an output that is the database
 * or a folder. */
int export_run(const struct export_opts *o);

#endif
