/* records.h — split molecule files into records without Open Babel.
 *
 * Open Babel's Read() cannot tell a bad record from the end of a file, and a
 * broken record can swallow the rest of the file. se3screen therefore splits
 * every input into records itself (plain or gzip'd, by zlib) and hands Open
 * Babel one record's text at a time.
 *
 *   sdf/mol  records end at a "$$$$" line; a trailing record without one counts
 *   mol2     records start at "@<TRIPOS>MOLECULE"
 *   smi      one non-blank line per record ("SMILES [name]"); lines starting with # are comments;
 *            a first line of column names is a header, no record (rec_smi_header)
 *   csv/tsv  a header row, then one record per row; the SMILES and name columns
 *            are found by name (rec_pick_columns)
 *   xyz      an atom-count line, a comment line, then that many atom lines
 *   pdb      records end at END or ENDMDL; records without ATOM/HETATM lines are dropped
 *   cml      each top-level <molecule> ... </molecule> element
 *
 * Empty records (an SDF record with nothing but blank lines before its $$$$,
 * a MOL2 record with nothing after its @<TRIPOS>MOLECULE line, an XYZ frame
 * of 0 atoms, a CSV/TSV row with an empty SMILES, a CML <molecule/>) are
 * handed out as error records up to max_empty_listed of them; later ones are
 * only counted (rec_get_stats), so that a file of a billion "$$$$" lines
 * costs a scan and not a billion reject rows. Record numbers count every
 * record, listed or not.
 *
 * A record holding a NUL byte (in any text format) is handed out as an error
 * record, "NUL byte at line L column C": its text goes on as a C string, and
 * would end there (`CC\0O` read as ethane).
 *
 * Likewise error records, for what Open Babel would misread without a word:
 *   - an SD record with more than one "M  END" line (two molecules joined by
 *     a damaged or missing $$$$ line: Open Babel reads only the first);
 *   - MOL2 text before the first @<TRIPOS>MOLECULE line that is neither
 *     blank nor a comment (a first record whose MOLECULE line is damaged):
 *     one error record naming its first line, once a MOLECULE line follows;
 *   - a CSV/TSV SMILES cell with white space inside it, once trimmed ("CC O"
 *     would reach Open Babel as SMILES "CC" and a title). In a .smi file the
 *     first white space ends the SMILES by the format's definition.
 *
 * Inputs must be regular files: a FIFO or a device is refused before any read
 * (it could block forever or never end), and every file is read twice (once
 * to plan, once to parse).
 */
#ifndef SE3_RECORDS_H
#define SE3_RECORDS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct se3_error;

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

/* The content of a file: which format its first bytes look like.
 * rec_sniff returns `prefer` when the head shows signs of it, else the first
 * format (in the order SDF, MOL2, CML, PDB, XYZ, CSV, TSV) whose signs it
 * shows, else MOL_FMT_UNKNOWN. Signs: SDF a V2000/V3000 counts line, an
 * "M  END" or a "$$$$" line; MOL2 a line starting with @<TRIPOS>; CML a
 * <cml or <molecule tag (any namespace prefix); PDB an ATOM/HETATM line with
 * coordinates, or a first line HEADER/COMPND/CRYST1/REMARK; XYZ a first line
 * holding only an atom count and a third line "symbol x y z"; CSV/TSV a first
 * line with a column named smiles. SMILES has no sign of its own. */
enum mol_format rec_sniff(const char *head, size_t n, enum mol_format prefer);
/* Reads the first 64 KiB of path (gunzipped when gzip'd) and sniffs them;
 * *nonblank says whether they hold anything but white space. 0 or -1 with
 * err set (its file: path). */
int rec_sniff_file(const char *path, enum mol_format prefer, enum mol_format *out, int *nonblank,
                   struct se3_error *err);
/* "a FIFO (named pipe)", "a character device", ... for a st_mode. */
const char *rec_file_kind(mode_t mode);
/* 0 when path is a regular file (stat only: never opens, never blocks), else
 * -1 with err "not a regular file (a FIFO ...)" (SE3_ERR_INPUT) or the stat
 * error (SE3_ERR_IO), its file path. err may be NULL. */
int rec_check_regular(const char *path, struct se3_error *err);

/* Counters of a reader so far. */
struct rec_stats {
  int64_t lines;          /* lines read */
  int64_t n_out;          /* records handed out by rec_next */
  int64_t last_no;        /* highest record number, handed out or not */
  int64_t n_empty;        /* empty records, listed or not */
  int64_t n_unlisted;     /* empty records past max_empty_listed: counted only */
  int64_t first_unlisted; /* record number and line of the first of them */
  int64_t first_unlisted_line;
};

/* A record's bytes when the caller names no cap (rec_options and
 * ob_parse_opts' max_record_bytes 0): the schema's default of
 * stages.ingest.max_record_bytes, so every reader of a file (ingest, the
 * dock stage's table) holds the same line; test_config checks they agree. */
#define REC_MAX_RECORD_DEFAULT ((size_t)16 << 20)

struct rec_options {
  const char *smiles_column;  /* csv/tsv; NULL = smiles, canonical_smiles, ... (rec_pick_columns) */
  const char *name_column;    /* csv/tsv; NULL = name, id, title, ... if any (rec_pick_columns) */
  size_t max_record_bytes;    /* a longer record becomes an error record (its text is
                                 not kept past the cap); 0 = REC_MAX_RECORD_DEFAULT */
  long max_empty_listed;      /* empty records handed out as error records; 0 = 10, < 0 = all */
  /* Called every 2^20 lines read (NULL: never); non-zero stops the reading
   * (rec_next returns -1 with the error the callback set in err, else
   * SE3_ERR_RUN "reading stopped"). */
  int (*progress)(void *arg, const struct rec_stats *st, struct se3_error *err);
  void *progress_arg;
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

/* NULL on failure with err set, its file the path (SE3_ERR_IO: cannot
 * open; SE3_ERR_INPUT: not a regular file, an unknown format, a CSV/TSV
 * header refused; SE3_ERR_MEMORY). err may be NULL. */
struct rec_reader *rec_open(const char *path, enum mol_format fmt, const struct rec_options *opt,
                            struct se3_error *err);
/* rec_open on descriptor fd, which the reader takes (and closes, on failure
 * too) and reads from its start; `name` names the file in messages. For a
 * file read once: a copy of its bytes hashed and parsed alike. */
struct rec_reader *rec_open_fd(int fd, const char *name, enum mol_format fmt, const struct rec_options *opt,
                               struct se3_error *err);
/* 1: a record in *out (owned by the reader, valid until the next call);
 * 0: end of file; -1: an error in err (SE3_ERR_IO or SE3_ERR_INPUT: a read
 * error, its file the path; SE3_ERR_MEMORY; or what the progress callback
 * set). err may be NULL. */
int rec_next(struct rec_reader *r, struct rec *out, struct se3_error *err);
/* The reader's counters so far. */
void rec_get_stats(const struct rec_reader *r, struct rec_stats *st);
/* csv/tsv header names; NULL for other formats. */
const char *const *rec_columns(const struct rec_reader *r, int *n);
void rec_close(struct rec_reader *r);

/* The SMILES and name columns of a CSV/TSV header cols[0..n) as the reader
 * picks them (-1: none). smiles_column, when not NULL, names the SMILES
 * column, else the first of smiles, canonical_smiles, isomeric_smiles,
 * structure is taken. name_column, when not NULL, names the name column,
 * else the first by priority: name, id, title; compound, compound_id,
 * compound_name, molecule, molecule_name, mol_id, mol_name; any *_id; any
 * *_name (never the SMILES column). Letter case is ignored throughout. */
void rec_pick_columns(const char *const *cols, int n, const char *smiles_column, const char *name_column,
                      int *smiles_col, int *name_col);

/* The header row of a CSV or TSV file (fmt), whatever its columns: *cols
 * (malloc'd, free with rec_free_names) and *n. Reads the first row only.
 * 0, or -1 with err set (its file: path). */
int rec_read_header(const char *path, enum mol_format fmt, char ***cols, int *n, struct se3_error *err);
void rec_free_names(char **names, int n);

/* Whether a token has the shape of a SMILES string: atoms of the organic
 * subset (B C N O P S F Cl Br I, aromatic b c n o p s, *), bracket atoms,
 * ring bonds (digits, %nn), bonds (- = # $ : / \), parentheses (balanced),
 * dots, @ and +; at least one atom. A text-level check, not chemistry. */
int rec_smiles_like(const char *tok, size_t n);

/* Whether the head of a SMILES file (n bytes; whole: the whole file, else
 * its last line may be cut) starts with a header line. The first line
 * that is neither blank nor a comment is a header when its first token is
 * a column name (smiles, canonical_smiles, isomeric_smiles, structure,
 * name, id, title, compound, molecule, mol_id or any *_id; any letter
 * case), or when that token is a word (a letter, then letters, '_', '-',
 * '.') that does not look like SMILES while the first tokens of the next
 * content lines (up to 3, at least 1) all do. 1 with its 1-based line in
 * *line, else 0. The reader skips that line: record 1 is the first
 * molecule. */
int rec_smi_header(const char *head, size_t n, int whole, int64_t *line);

/* The SD tag names (data item headers after "M  END", as Open Babel reads
 * them: from the first '<' to the last '>' of the line) in the first
 * max_records records of an SD file, or its first max_bytes bytes
 * (uncompressed) if that comes first: a text scan, plain or gzip'd.
 * *tags (distinct, in order of first sight; free with rec_free_names),
 * *n_tags, and *n_records the records scanned. 0, or -1 with err (its
 * file: path). */
int rec_sdf_tags(const char *path, int max_records, size_t max_bytes, char ***tags, int *n_tags, int64_t *n_records,
                 struct se3_error *err);

/* The largest magnitude of a label (or of a score read from a table):
 * 1e30, past any measured quantity in its units, so that a model's
 * standardisation stays within models/model_file.h's SE3_STAT_MAX and its
 * predictions finite. */
#define REC_LABEL_MAX 1e30

/* A label value as written in a CSV cell or an SD tag: a decimal number
 * (optional sign, digits with an optional '.', optional exponent), blanks
 * around it allowed. 0: *v set; 1: blank (no value); -1: refused, with why
 * naming the reason: hexadecimal (strtod reads 0x10 as 16 and 0x1p4 too),
 * inf and nan (not finite), 1e400 (out of range), 1e31 (past
 * REC_LABEL_MAX), 1,5 (a comma), or anything else that is not a decimal
 * number. Independent of the C locale. One parser for every number read
 * from a table: labels, label tables, the dock stage's table of scores. */
int rec_parse_label(const char *s, double *v, char *why, size_t whylen);

/* Number of records in a file (a full scan); -1 with err on failure. */
int64_t rec_count(const char *path, enum mol_format fmt, const struct rec_options *opt, struct se3_error *err);
/* A full scan filling *st (st->n_out: the records rec_next hands out); 0 or
 * -1 with err. */
int rec_scan(const char *path, enum mol_format fmt, const struct rec_options *opt, struct rec_stats *st,
             struct se3_error *err);

#endif
