/* export.h — `se3screen export`: a result set out as CSV, SDF or SMILES.
 *
 * The rows are ranked_hits (all, or the first N) or those of one read-only
 * SQL statement, checked as `se3screen query` checks its SQL (query.h). The
 * database is opened read-only; the output is written through a temporary
 * file renamed on success (common/atomic_file.h), so a failure leaves no
 * half file.
 *
 *   csv  a header row and the rows: the columns and text `query --csv` gives
 *        (RFC 4180 quoting, NULL empty, REALs that read back exactly), except
 *        that a text cell a spreadsheet would run as a formula (it begins
 *        with = + - @, a tab or a CR, and is not a number) gets a ' in front
 *        (common/csvcell.h)
 *   sdf  one record a row: the molecule from molecules.mol (found by the
 *        row's mol_id column, else its id column), titled by the row's name
 *        column (else molecules.name), every other column an SD tag; a NULL
 *        leaves its tag out. Titles, tag names and values are written so
 *        that they cannot end the record or the value early (chem/sdtext.h:
 *        line breaks in a value flattened to one space, a leading `$$$$`
 *        prefixed with '_', < > in tag names made '_')
 *   smi  one line a row: SMILES, a tab, the name (just the SMILES when there
 *        is no name); SMILES and name from the row's smiles and name
 *        columns, else from molecules by the row's molecule id
 *
 * Bounds, as `query` has them (query.h, struct query_limits): --timeout ends
 * the export after that many seconds of wall-clock time (SQLite stopped
 * inside a step, or the next row not begun); --max-rows and --max-bytes end
 * it at the row that would go past them (bytes of values: text and blobs as
 * stored, 8 a number). A bound reached is a failure, unlike in `query`: the
 * file would be a silently cut result, so none is written.
 *
 * Signals: SIGINT, SIGTERM and SIGUSR1 stop the export at the next row
 * (SQLite is interrupted inside a step); the temporary file is removed, the
 * old file (if any) kept, and export_run returns SE3_EXIT_STOPPED (75), as a
 * stopped `run` does.
 */
#ifndef SE3_EXPORT_H
#define SE3_EXPORT_H

#include <stddef.h>

enum export_format { EXPORT_CSV, EXPORT_SDF, EXPORT_SMI };

/* The default bounds. The whole of ranked_hits (or its first N) is what an
 * export is for and is finite by construction: no bound, so a screen of
 * millions of hits exports whole. A --query statement can run for ever (a
 * recursive CTE wrote 2.3 GB in a minute) and an export usually runs
 * unattended: it is stopped after 10 minutes unless --timeout says
 * otherwise. Rows and bytes are not bounded by default: a row or byte count
 * large enough for real results would not save a disk. */
#define EXPORT_DEFAULT_QUERY_TIMEOUT_S 600.0

struct export_opts {
  const char *db; /* a database, or a workdir (its screen.db) */
  enum export_format format;
  const char *query; /* one read-only statement; NULL: ranked_hits */
  long long top;     /* > 0 (without query): the first N of ranked_hits */
  int poses;         /* sdf: a record each docked pose of a row's molecule (the poses table), not its input */
  const char *out;   /* the file to write, "-" for stdout */
  /* Bounds (query.h's meanings); 0: none; < 0: the default (above). */
  double timeout_s;
  long long max_rows, max_bytes;
};

/* "csv", "sdf" or "smi" into *f: 0, or -1 for anything else. */
int export_parse_format(const char *s, enum export_format *f);

/* Bounds not given: o's three bound fields set to "the default" (-1). */
void export_default_bounds(struct export_opts *o);
/* The value v of option opt (--timeout, --max-rows or --max-bytes) into o,
 * read as `query` reads it (seconds >= 0; whole numbers >= 0, K/M/G
 * allowed for bytes; 0: no limit). 0, or -1 with the usage message in why. */
int export_parse_bound(struct export_opts *o, const char *opt, const char *v, char *why, size_t why_len);

/* With poses, each row's molecule is written at each of its docked poses
 * (poses, best first, those of its docking as the molecule is now), with
 * the tags mode, vina_score, vina_inter, vina_intra, rmsd_lb and rmsd_ub
 * after the row's; a row without a pose is left out, and stderr counts
 * them; a selection none of whose molecules has a pose is a failure.
 *
 * Writes the rows and says on stderr how many. Returns an exit code: 0; 1
 * when the database cannot be read as asked, a molecule is missing or
 * damaged, a bound was reached, or the file cannot be written; 2 for a
 * database that cannot be opened, SQL that is not one reading statement,
 * rows without what the format needs (a molecule id, SMILES), or an output
 * that is the database or a folder; 75 when a signal stopped it. In every
 * case but 0 no file is written (an old one stays as it was). */
int export_run(const struct export_opts *o);

#endif
