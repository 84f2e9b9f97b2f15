/* records_internal.h — what the record splitter's files share; not for use
 * outside chem/records*.c (the public API is chem/records.h).
 *
 *   records.c         the public entry points: formats and their names,
 *                     opening a file's reader, rec_next's dispatch to the
 *                     format's splitter, rec_scan and rec_count, label
 *                     values
 *   records_core.c    what every splitter reads with: line pieces, the
 *                     record text, emitting a record (an error record
 *                     too), whole lines, opening regular files only
 *                     (gzip'd or not), the counters
 *   records_sdf.c     SD files (.sdf, .mol): records and rec_sdf_tags
 *   records_mol2.c    MOL2 (Tripos) records and their atom-section check
 *   records_smiles.c  SMILES lines (.smi) and their header line, CSV/TSV
 *                     tables (rows, quoting, the SMILES and name columns)
 *   records_xyz.c     XYZ frames
 *   records_pdb.c     PDB models (to END or ENDMDL)
 *   records_cml.c     CML: top-level <molecule> elements
 *   records_sniff.c   which format a file's first bytes look like
 *
 * Calls run one way: records.c calls a format's file only through the
 * splitters below (rec_next), and, when a file is opened, a CSV/TSV header
 * and a SMILES file's header line; the format files call records_core.c's
 * helpers and never records.c (tests/rooms.py: no file circles), and
 * records_sniff.c uses rec_bare_int (records_xyz.c).
 *
 * One reader serves every format: struct rec_reader holds the input buffer,
 * the record text and each format's state, so that a splitter is a
 * function of the reader alone.
 */
#ifndef SE3_RECORDS_INTERNAL_H
#define SE3_RECORDS_INTERNAL_H

#include <ctype.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <zlib.h>

#include "chem/records.h"
#include "common/error.h"

/* The head of a file read to sniff its format or find a SMILES header. */
#define SNIFF_BYTES (64 << 10)

/* A line, or a piece of one longer than the input buffer, pointing into the
 * buffer: valid until the next rec_next_piece. */
struct piece {
  const char *p;
  size_t n;     /* bytes, including the '\n' when complete */
  int complete; /* ends a line */
  int cont;     /* continues a line begun in an earlier piece */
  int64_t no;   /* 1-based line number */
  size_t col;   /* 0-based byte offset of p in its line (non-zero only when cont) */
};

struct rec_reader {
  gzFile gz;
  char *path;
  enum mol_format fmt;
  size_t max_rec;

  char *buf; /* input buffer */
  size_t pos, end;
  int eof;
  int64_t lineno;
  int in_cont;
  size_t line_off; /* bytes of the current line in earlier pieces (while in_cont) */
  int unread;      /* hand out `last` again */
  int bom_done;
  struct piece last;

  char *text; /* record text */
  size_t tlen, tcap;
  int overflow;
  int64_t nul_line, nul_col; /* first NUL byte of the record (1-based; 0: none) */
  int64_t n_rec;             /* records numbered so far (handed out or counted only) */
  int64_t n_out;             /* records handed out */
  char err[512];             /* the current error record's text (rec.error) */
  struct se3_error fail;     /* why reading failed (rec_next's -1) */
  int done;

  /* empty records */
  long max_empty; /* < 0: list all */
  int64_t n_empty, n_unlisted, first_unlisted, first_unlisted_line;
  int cml_empty;

  /* mol2: a record has started; the first line before it that is neither
   * blank nor a comment (0: none) */
  int mol2_started;
  int64_t mol2_stray;

  int (*progress)(void *arg, const struct rec_stats *st, struct se3_error *err);
  void *progress_arg;

  /* smi: the line of a header recognised at open (0: none); see rec_smi_header */
  int64_t smi_header;

  /* csv/tsv */
  char sep;
  int n_cols, smiles_col, name_col;
  char **cols;
  char *fst; /* fields of the current row, NUL-separated */
  size_t flen, fcap;
  size_t *foff;
  char **fptr;
  int nf, foff_cap, fovf;
  int64_t fnul_line, fnul_col; /* first NUL byte of the row (1-based; 0: none) */

  /* cml: the piece being scanned and the scanner state */
  struct piece cp;
  size_t cpos;
  int have_cp;
  int depth, in_tag, in_comment, tag_close, tag_quote, tag_name_done;
  char tag_name[32];
  int tag_nlen;
  char prev1, prev2;
  size_t tag_start;
  int64_t tag_line, rec_line;
  char *ns; /* xmlns:prefix="uri" declarations seen on enclosing top-level tags */
  size_t ns_len;
};

/* ---- records_core.c ------------------------------------------------------ */

/* The input buffer's bytes: a longer line comes in pieces. */
enum { REC_BUF_SIZE = 1 << 20 };

/* snprintf into buf (a record's error text, a label's why); buf may be NULL. */
void rec_fmt_err(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* 1: a piece; 0: end of input; -1: read error (in r->fail). */
int rec_next_piece(struct rec_reader *r, struct piece *out);

/* Small helpers called for every line, kept inline in each file as they
 * were when the splitter was one file. */

/* The next rec_next_piece hands out the last piece again. */
static inline void rec_unread_piece(struct rec_reader *r) { r->unread = 1; }

/* Content length without the line end and trailing blanks. */
static inline size_t rec_trimmed_len(const char *p, size_t n) {
  while (n && (p[n - 1] == '\n' || p[n - 1] == '\r' || p[n - 1] == ' ' || p[n - 1] == '\t'))
    n--;
  return n;
}

static inline int rec_is_blank(const char *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!isspace((unsigned char)p[i])) return 0;
  return 1;
}

/* A whole line (not a fragment of a long one) whose content is exactly w. */
static inline int rec_line_is(const struct piece *l, const char *w) {
  if (l->cont || !l->complete) return 0;
  size_t wn = strlen(w);
  return rec_trimmed_len(l->p, l->n) == wn && memcmp(l->p, w, wn) == 0;
}

static inline void rec_text_reset(struct rec_reader *r) {
  r->tlen = 0;
  r->overflow = 0;
  r->nul_line = r->nul_col = 0;
}

/* Notes the first NUL byte at byte i of piece l (1-based line and column). */
static inline void rec_note_nul(int64_t *line, int64_t *col, const struct piece *l, size_t i) {
  if (*line) return;
  *line = l->no;
  *col = (int64_t)(l->col + i) + 1;
}

/* Grows the record text for extra bytes and a NUL; -1 when out of memory. */
int rec_text_reserve(struct rec_reader *r, size_t extra);
/* Appends unless the record is over the cap; -1 only on allocation failure. */
int rec_text_add(struct rec_reader *r, const char *p, size_t n);
/* Appends a piece of the record, noting a NUL byte in it. */
int rec_piece_add(struct rec_reader *r, const struct piece *l);
/* The error text for a record with a NUL byte, into buf. */
const char *rec_nul_error(char *buf, size_t len, int64_t line, int64_t col);
/* "PATH: out of memory" in r->fail (SE3_ERR_MEMORY); returns -1. */
int rec_oom(struct rec_reader *r);
/* Fills out from the record text (1, or -1 out of memory); error, or an
 * overflowed record or one with a NUL byte, makes it an error record. */
int rec_emit(struct rec_reader *r, struct rec *out, int64_t line, const char *error);
/* An empty record starting at `line`: 1 (an error record in *out, while
 * fewer than max_empty_listed were listed), 0 (counted only: the caller goes
 * on to the next record) or -1 (out of memory). */
int rec_empty_record(struct rec_reader *r, struct rec *out, int64_t line, const char *why);
/* Appends one whole line (all its pieces) to the text; *no = its number. */
int rec_read_line(struct rec_reader *r, int64_t *no);

/* A regular file opened for gzread without ever blocking, else NULL with
 * err set, its file path. */
gzFile rec_open_regular(const char *path, struct se3_error *err);
/* gzread on descriptor fd, which it takes (closed on failure too), read
 * from its start: a regular file, else refused naming `path`. */
gzFile rec_adopt_regular(int fd, const char *path, struct se3_error *err);
/* gzerror's zerr and msg as "read error: ..." in err (SE3_ERR_IO when the
 * system failed, else SE3_ERR_INPUT: the compressed data is damaged), at
 * its place: path and the 1-based line being read, or (line 0) the record
 * (0: not known); returns -1. */
int rec_read_error(struct se3_error *err, const char *path, int64_t line, int64_t record, int zerr, const char *msg);

/* The head's lines, one at a time: p and n get a line without its end. */
struct rec_lines {
  const char *s, *end;
};

int rec_line_next(struct rec_lines *it, const char **p, size_t *n);

/* ---- the splitters ------------------------------------------------------ */

/* rec_next's, one a format: 1 a record in *out, 0 the end of the file, -1
 * an error (in r->fail). */
int rec_next_sdf(struct rec_reader *r, struct rec *out);  /* records_sdf.c */
int rec_next_mol2(struct rec_reader *r, struct rec *out); /* records_mol2.c */
int rec_next_smi(struct rec_reader *r, struct rec *out);  /* records_smiles.c */
int rec_next_csv(struct rec_reader *r, struct rec *out);  /* records_smiles.c, csv and tsv */
int rec_next_xyz(struct rec_reader *r, struct rec *out);  /* records_xyz.c */
int rec_next_pdb(struct rec_reader *r, struct rec *out);  /* records_pdb.c */
int rec_next_cml(struct rec_reader *r, struct rec *out);  /* records_cml.c */

/* ---- records_smiles.c ---------------------------------------------------- */

/* Reads the header row of a CSV/TSV file into r->cols; with pick, also
 * finds the SMILES and name columns (rec_pick_columns), refusing a file
 * without the SMILES column (or without a name column named by
 * name_column). 0, or -1 with err set (its file: the reader's path). */
int rec_csv_header(struct rec_reader *r, const struct rec_options *opt, int pick, struct se3_error *err);
/* The line of the header of a SMILES file (0: none), from its first 64 KiB,
 * read from descriptor fd when it is one (through a copy of it), else from
 * path (rec_smi_header). */
int64_t rec_smi_header_of(const char *path, int fd);

/* ---- records_xyz.c ------------------------------------------------------- */

/* A line holding only a non-negative integer (with blanks around it): an
 * XYZ atom count (rec_sniff looks for one too). */
int rec_bare_int(const char *p, size_t n, long *v);

#endif
