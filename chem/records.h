/* records.h — split molecule files into records without Open Babel.
 *
 * Open Babel's Read() cannot tell a bad record from the end of a file, and a
 * broken record can swallow the rest of the file. se3screen therefore splits
 * every input into records itself (plain or gzip'd, by zlib) and hands Open
 * Babel one record's text at a time.
 *
 *   sdf/mol  records end at a "$$$$" line; a trailing record without one counts
 *   mol2     records start at "@<TRIPOS>MOLECULE"
 *   smi      one non-blank line per record ("SMILES [name]"); lines starting with # are comments
 *   csv/tsv  a header row, then one record per row; the SMILES column is found
 *            by name (default: the first column named smiles, case-insensitive)
 *   xyz      an atom-count line, a comment line, then that many atom lines
 *   pdb      records end at END or ENDMDL; records without ATOM/HETATM lines are dropped
 *   cml      each top-level <molecule> ... </molecule> element
 */
#ifndef SE3_RECORDS_H
#define SE3_RECORDS_H

#include <stddef.h>
#include <stdint.h>

enum mol_format {
  MOL_FMT_UNKNOWN = 0, MOL_FMT_SDF, MOL_FMT_MOL2, MOL_FMT_SMI, MOL_FMT_CSV,
  MOL_FMT_TSV, MOL_FMT_XYZ, MOL_FMT_PDB, MOL_FMT_CML
};

/* From the file name: "x.sdf", "x.sdf.gz", "x.mol", "x.smi", "x.smiles",
 * "x.csv", "x.tsv", "x.xyz", "x.pdb", "x.ent", "x.cml", "x.mol2" (and .gz). */
enum mol_format rec_format_from_path(const char *path);
/* From a `format:` value ("sdf", "mol2", ...); MOL_FMT_UNKNOWN if unknown. */
enum mol_format rec_format_from_name(const char *name);
const char *rec_format_name(enum mol_format f);
/* The Open Babel input format id for a record's text ("sdf", "mol2", "smi",
 * "xyz", "pdb", "cml"); csv and tsv records are SMILES. */
const char *rec_format_ob(enum mol_format f);

struct rec_options {
  const char *smiles_column;  /* csv/tsv; NULL = first column named "smiles" */
  const char *name_column;    /* csv/tsv; NULL = first column named name/id/title if any */
  size_t max_record_bytes;    /* a longer record becomes an error record; 0 = 64 MiB */
};

struct rec {
  int64_t record_no;    /* 1-based */
  int64_t line;         /* 1-based line where the record starts */
  char *text;           /* NUL-terminated record text, what Open Babel reads */
  size_t len;
  char *name;           /* csv/tsv name column, or NULL */
  char **fields;        /* csv/tsv: every column of the row (n_fields), else NULL */
  int n_fields;
  char *error;          /* non-NULL: the record is malformed (e.g. csv row
                           with the wrong number of fields); text may be empty */
};

struct rec_reader;

/* NULL on failure with a message naming the file in err. */
struct rec_reader *rec_open(const char *path, enum mol_format fmt, const struct rec_options *opt,
                            char *err, size_t errlen);
/* 1: a record in *out (owned by the reader, valid until the next call);
 * 0: end of file; -1: I/O error with a message in err. */
int rec_next(struct rec_reader *r, struct rec *out, char *err, size_t errlen);
/* csv/tsv header names; NULL for other formats. */
const char *const *rec_columns(const struct rec_reader *r, int *n);
void rec_close(struct rec_reader *r);

/* Number of records in a file (a full scan); -1 with err on failure. */
int64_t rec_count(const char *path, enum mol_format fmt, const struct rec_options *opt,
                  char *err, size_t errlen);

#endif
