/* records.c — split molecule files into records (see records.h).
 *
 * Input goes through zlib (gzread reads plain files unchanged) into a 1 MiB
 * buffer; lines are found with memchr and handed out as pieces pointing into
 * that buffer. A line longer than the buffer comes in several pieces (only
 * the first has cont == 0); such a piece is never a record delimiter. Record
 * text accumulates in a buffer capped at max_record_bytes: a longer record is
 * read on to its end without keeping more of it, and reported as an error
 * record naming its number. Empty records go through empty_record(), which
 * lists the first max_empty_listed and counts the rest.
 *
 * NUL bytes: record text is handed on as a C string (to Open Babel, through
 * the worker pipes, into SQLite), where a NUL byte ends it: `CC\0O` would be
 * stored as ethane. The first NUL byte of a record is noted (line and column)
 * as its pieces are taken in, and the record becomes an error record naming
 * it; the records after it are read as usual.
 */
#define _GNU_SOURCE /* memmem */
#include "chem/records.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

enum { BUF_SIZE = 1 << 20 };
#define DEFAULT_MAX_RECORD ((size_t)64 << 20)
#define DEFAULT_MAX_EMPTY_LISTED 10
#define SNIFF_BYTES (64 << 10)

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
  int64_t n_rec; /* records numbered so far (handed out or counted only) */
  int64_t n_out; /* records handed out */
  char err[512];
  int done;

  /* empty records */
  long max_empty; /* < 0: list all */
  int64_t n_empty, n_unlisted, first_unlisted, first_unlisted_line;
  int cml_empty;

  /* mol2: a record has started; the first line before it that is neither
   * blank nor a comment (0: none) */
  int mol2_started;
  int64_t mol2_stray;

  int (*progress)(void *arg, const struct rec_stats *st, char *err, size_t errlen);
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

static void fmt_err(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int64_t smi_header_of(const char *path, int fd);
static void fmt_err(char *err, size_t len, const char *fmt, ...) {
  if (!err || !len) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, len, fmt, ap);
  va_end(ap);
}

/* ---------------------------------------------------------------- formats */

static const struct {
  const char *name;
  enum mol_format fmt;
} NAMES[] = {{"sdf", MOL_FMT_SDF},   {"sd", MOL_FMT_SDF},  {"mol", MOL_FMT_SDF},    {"mdl", MOL_FMT_SDF},
             {"mol2", MOL_FMT_MOL2}, {"smi", MOL_FMT_SMI}, {"smiles", MOL_FMT_SMI}, {"csv", MOL_FMT_CSV},
             {"tsv", MOL_FMT_TSV},   {"xyz", MOL_FMT_XYZ}, {"pdb", MOL_FMT_PDB},    {"ent", MOL_FMT_PDB},
             {"cml", MOL_FMT_CML}};

enum mol_format rec_format_from_name(const char *name) {
  if (!name) return MOL_FMT_UNKNOWN;
  for (size_t i = 0; i < sizeof NAMES / sizeof NAMES[0]; i++)
    if (strcasecmp(name, NAMES[i].name) == 0) return NAMES[i].fmt;
  return MOL_FMT_UNKNOWN;
}

enum mol_format rec_format_from_path(const char *path) {
  if (!path) return MOL_FMT_UNKNOWN;
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  size_t n = strlen(base);
  if (n > 3 && strcasecmp(base + n - 3, ".gz") == 0) n -= 3;
  size_t dot = n;
  while (dot > 0 && base[dot - 1] != '.')
    dot--;
  if (dot == 0 || n - dot > 15) return MOL_FMT_UNKNOWN;
  char ext[16];
  memcpy(ext, base + dot, n - dot);
  ext[n - dot] = 0;
  return rec_format_from_name(ext);
}

const char *rec_format_name(enum mol_format f) {
  switch (f) {
  case MOL_FMT_SDF:
    return "sdf";
  case MOL_FMT_MOL2:
    return "mol2";
  case MOL_FMT_SMI:
    return "smi";
  case MOL_FMT_CSV:
    return "csv";
  case MOL_FMT_TSV:
    return "tsv";
  case MOL_FMT_XYZ:
    return "xyz";
  case MOL_FMT_PDB:
    return "pdb";
  case MOL_FMT_CML:
    return "cml";
  default:
    return "unknown";
  }
}

const char *rec_format_ob(enum mol_format f) {
  switch (f) {
  case MOL_FMT_SDF:
    return "sdf";
  case MOL_FMT_MOL2:
    return "mol2";
  case MOL_FMT_SMI:
  case MOL_FMT_CSV:
  case MOL_FMT_TSV:
    return "smi";
  case MOL_FMT_XYZ:
    return "xyz";
  case MOL_FMT_PDB:
    return "pdb";
  case MOL_FMT_CML:
    return "cml";
  default:
    return NULL;
  }
}

/* ------------------------------------------------------------ line pieces */

/* 1: a piece; 0: end of input; -1: read error (message in r->err). */
static int next_piece(struct rec_reader *r, struct piece *out) {
  if (r->unread) {
    r->unread = 0;
    *out = r->last;
    return 1;
  }
  for (;;) {
    size_t avail = r->end - r->pos;
    char *s = r->buf + r->pos;
    char *nl = avail ? memchr(s, '\n', avail) : NULL;
    size_t n;
    int complete;
    if (nl) {
      n = (size_t)(nl - s) + 1;
      complete = 1;
    } else if (r->eof) {
      if (!avail) return 0;
      n = avail;
      complete = 1;
    } else if (r->pos == 0 && r->end == BUF_SIZE) {
      n = avail; /* a line longer than the buffer */
      complete = 0;
    } else {
      if (r->pos) {
        memmove(r->buf, s, avail);
        r->pos = 0;
        r->end = avail;
      }
      int got = gzread(r->gz, r->buf + r->end, (unsigned)(BUF_SIZE - r->end));
      if (got < 0) {
        int zerr;
        const char *msg = gzerror(r->gz, &zerr);
        fmt_err(r->err, sizeof r->err, "%s: read error: %s", r->path, zerr == Z_ERRNO ? strerror(errno) : msg);
        return -1;
      }
      if (got == 0) {
        int zerr;
        const char *msg = gzerror(r->gz, &zerr);
        if (zerr != Z_OK && zerr != Z_STREAM_END) {
          fmt_err(r->err, sizeof r->err, "%s: read error: %s", r->path, zerr == Z_ERRNO ? strerror(errno) : msg);
          return -1;
        }
        r->eof = 1;
      }
      r->end += (size_t)got;
      continue;
    }
    if (!r->bom_done) {
      r->bom_done = 1;
      if (n >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0) {
        r->pos += 3;
        continue;
      }
    }
    out->p = s;
    out->n = n;
    out->complete = complete;
    out->cont = r->in_cont;
    out->col = r->in_cont ? r->line_off : 0;
    r->line_off = complete ? 0 : out->col + n;
    if (!r->in_cont && (++r->lineno & 0xFFFFF) == 0 && r->progress) {
      struct rec_stats st;
      rec_get_stats(r, &st);
      char msg[sizeof r->err] = "";
      if (r->progress(r->progress_arg, &st, msg, sizeof msg) != 0) {
        fmt_err(r->err, sizeof r->err, "%s", msg[0] ? msg : "reading stopped");
        return -1;
      }
    }
    out->no = r->lineno;
    r->in_cont = !complete;
    r->pos += n;
    r->last = *out;
    return 1;
  }
}

static void unread_piece(struct rec_reader *r) { r->unread = 1; }

/* Content length without the line end and trailing blanks. */
static size_t trimmed_len(const char *p, size_t n) {
  while (n && (p[n - 1] == '\n' || p[n - 1] == '\r' || p[n - 1] == ' ' || p[n - 1] == '\t'))
    n--;
  return n;
}

static int is_blank(const char *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!isspace((unsigned char)p[i])) return 0;
  return 1;
}

/* A whole line (not a fragment of a long one) whose content is exactly w. */
static int line_is(const struct piece *l, const char *w) {
  if (l->cont || !l->complete) return 0;
  size_t wn = strlen(w);
  return trimmed_len(l->p, l->n) == wn && memcmp(l->p, w, wn) == 0;
}

/* ------------------------------------------------------------ record text */

static int text_reserve(struct rec_reader *r, size_t extra) {
  if (r->tlen + extra + 1 <= r->tcap) return 0;
  size_t cap = r->tcap ? r->tcap : 4096;
  while (cap < r->tlen + extra + 1)
    cap *= 2;
  char *t = realloc(r->text, cap);
  if (!t) return -1;
  r->text = t;
  r->tcap = cap;
  return 0;
}

/* Appends unless the record is over the cap; -1 only on allocation failure. */
static int text_add(struct rec_reader *r, const char *p, size_t n) {
  if (r->overflow) return 0;
  if (r->tlen + n > r->max_rec) {
    r->overflow = 1;
    return 0;
  }
  if (text_reserve(r, n) != 0) return -1;
  memcpy(r->text + r->tlen, p, n);
  r->tlen += n;
  return 0;
}

static void text_reset(struct rec_reader *r) {
  r->tlen = 0;
  r->overflow = 0;
  r->nul_line = r->nul_col = 0;
}

/* Notes the first NUL byte at byte i of piece l (1-based line and column). */
static void note_nul(int64_t *line, int64_t *col, const struct piece *l, size_t i) {
  if (*line) return;
  *line = l->no;
  *col = (int64_t)(l->col + i) + 1;
}

/* Appends a piece of the record, noting a NUL byte in it. */
static int piece_add(struct rec_reader *r, const struct piece *l) {
  const char *z = r->nul_line ? NULL : memchr(l->p, 0, l->n);
  if (z) note_nul(&r->nul_line, &r->nul_col, l, (size_t)(z - l->p));
  return text_add(r, l->p, l->n);
}

/* The error text for a record with a NUL byte, into buf. */
static const char *nul_error(char *buf, size_t len, int64_t line, int64_t col) {
  snprintf(buf, len,
           "NUL byte at line %lld column %lld (a text record cannot hold one: its text would end there, cut short)",
           (long long)line, (long long)col);
  return buf;
}

static int oom(struct rec_reader *r) {
  fmt_err(r->err, sizeof r->err, "%s: out of memory", r->path);
  return -1;
}

/* Fills out; an overflowed record becomes an error record. */
static int emit(struct rec_reader *r, struct rec *out, int64_t line, const char *error) {
  if (text_reserve(r, 1) != 0) return oom(r);
  memset(out, 0, sizeof *out);
  out->record_no = ++r->n_rec;
  out->line = line;
  r->n_out++;
  if (!error && r->overflow) {
    snprintf(r->err, sizeof r->err,
             "record %lld (line %lld) is longer than max_record_bytes (%zu bytes); skipped to the next record",
             (long long)out->record_no, (long long)line, r->max_rec);
    error = r->err;
  }
  if (!error && r->nul_line) error = nul_error(r->err, sizeof r->err, r->nul_line, r->nul_col);
  if (error) {
    if (error != r->err) snprintf(r->err, sizeof r->err, "%s", error);
    out->error = r->err;
    r->tlen = 0;
  } else if (r->tlen && r->text[r->tlen - 1] != '\n') {
    if (text_reserve(r, 2) != 0) return oom(r);
    r->text[r->tlen++] = '\n';
  }
  r->text[r->tlen] = 0;
  out->text = r->text;
  out->len = r->tlen;
  return 1;
}

/* An empty record starting at `line`: 1 (an error record in *out, while
 * fewer than max_empty_listed were listed), 0 (counted only: the caller goes
 * on to the next record) or -1 (out of memory). */
static int empty_record(struct rec_reader *r, struct rec *out, int64_t line, const char *why) {
  r->n_empty++;
  text_reset(r);
  if (r->max_empty < 0 || r->n_empty <= r->max_empty) return emit(r, out, line, why);
  r->n_rec++;
  if (r->n_unlisted++ == 0) {
    r->first_unlisted = r->n_rec;
    r->first_unlisted_line = line;
  }
  return 0;
}

/* ------------------------------------------------------------------- sdf */

/* An "M  END" line: the end of a molecule's connection table (V2000, and
 * V3000 after its "M  V30 END CTAB"; the SD data items follow it). */
static int is_m_end(const struct piece *l) {
  if (l->cont || l->n < 6 || memcmp(l->p, "M  END", 6) != 0) return 0;
  return l->n == 6 || l->p[6] == '\n' || l->p[6] == '\r' || l->p[6] == ' ' || l->p[6] == '\t';
}

/* A record with more than one "M  END" line holds several molecules: the
 * $$$$ line between them is damaged or missing. Open Babel would read the
 * first and drop the rest without a word, so the record is refused whole.
 * NULL when there is one molecule (or none: Open Babel reports that), or
 * when the record is already an error (over the cap, a NUL byte). */
static const char *sdf_check(struct rec_reader *r, int64_t start, int n_end, int64_t first_end, int64_t last_end) {
  if (n_end < 2 || r->overflow || r->nul_line) return NULL; /* emit() names those */
  snprintf(r->err, sizeof r->err,
           "SD record %lld (line %lld) holds %d molecules (%d \"M  END\" lines, the first at line %lld, the last at "
           "line %lld): the second starts at line %lld, after a $$$$ line damaged or missing; Open Babel would read "
           "only the first",
           (long long)r->n_rec + 1, (long long)start, n_end, n_end, (long long)first_end, (long long)last_end,
           (long long)first_end + 1);
  return r->err;
}

static int next_sdf(struct rec_reader *r, struct rec *out) {
  struct piece l;
  for (;;) {
    int64_t start = 0, first_end = 0, last_end = 0;
    int blank = 1, n_end = 0;
    text_reset(r);
    for (;;) {
      int k = next_piece(r, &l);
      if (k < 0) return -1;
      /* the end: a tail of blank lines is no record, however long (blank
       * is kept for every piece, those past the cap too) */
      if (k == 0) return start && !blank ? emit(r, out, start, sdf_check(r, start, n_end, first_end, last_end)) : 0;
      if (!start) start = l.no;
      if (l.p[0] == '$' && line_is(&l, "$$$$")) {
        if (!blank || r->overflow) {
          if (piece_add(r, &l) != 0) return oom(r);
          return emit(r, out, start, sdf_check(r, start, n_end, first_end, last_end));
        }
        int e = empty_record(r, out, start, "empty record (nothing before its $$$$ line)");
        if (e) return e;
        break; /* counted only: on to the next record */
      }
      if (blank && !is_blank(l.p, l.n)) blank = 0;
      if (l.p[0] == 'M' && is_m_end(&l)) {
        if (!n_end++) first_end = l.no;
        last_end = l.no;
      }
      if (piece_add(r, &l) != 0) return oom(r);
    }
  }
}

/* ------------------------------------------------------------------ mol2 */

static int is_mol2_start(const struct piece *l) {
  static const char tag[] = "@<TRIPOS>MOLECULE";
  return !l->cont && l->n >= sizeof tag - 1 && l->p[0] == '@' && line_is(l, tag);
}

/* Open Babel reads a MOL2 atom line with missing columns as a wrong atom and
 * says nothing, so a cut-short record must be caught here: every line of the
 * ATOM section needs id, name, x, y, z and type, and their number must match
 * the count line. Returns NULL or a message. */
static const char *mol2_check(struct rec_reader *r, int64_t start) {
  const char *t = r->text, *end = r->text + r->tlen;
  int64_t no = start;
  long declared = -1, seen = 0;
  int section = 0, line_in_mol = 0; /* section: 1 MOLECULE, 2 ATOM, 3 other */
  for (const char *p = t; p < end; no++) {
    const char *e = memchr(p, '\n', (size_t)(end - p));
    if (!e) e = end;
    if (*p == '#') {
      /* a comment line */
    } else if (*p == '@') {
      section = (size_t)(e - p) >= 17 && !strncmp(p, "@<TRIPOS>MOLECULE", 17) ? 1
                : (size_t)(e - p) >= 13 && !strncmp(p, "@<TRIPOS>ATOM", 13) ? 2 : 3;
      line_in_mol = 0;
    } else if (section == 1) {
      if (++line_in_mol == 2) {
        char *q;
        declared = strtol(p, &q, 10);
        if (q == p) declared = -1;
      }
    } else if (section == 2) {
      int fields = 0, in = 0;
      for (const char *c = p; c < e; c++) {
        int ws = *c == ' ' || *c == '\t' || *c == '\r';
        if (!ws && !in) fields++;
        in = !ws;
      }
      if (fields > 0 && fields < 6) {
        snprintf(r->err, sizeof r->err, "line %lld: MOL2 atom line has %d of its 6 columns (record cut short?)",
                 (long long)no, fields);
        return r->err;
      }
      if (fields) seen++;
    }
    p = e + 1;
  }
  if (declared >= 0 && seen != declared) {
    snprintf(r->err, sizeof r->err, "line %lld: MOL2 header declares %ld atoms, the ATOM section has %ld",
             (long long)start, declared, seen);
    return r->err;
  }
  return NULL;
}

static int next_mol2(struct rec_reader *r, struct rec *out) {
  struct piece l;
  int k, comment = 0;
  for (;;) {
    text_reset(r);
    do { /* skip to the next MOLECULE line */
      k = next_piece(r, &l);
      if (k <= 0) return k;
      if (!l.cont) comment = l.p[0] == '#';
      if (!r->mol2_started && !r->mol2_stray && !comment && !is_mol2_start(&l) && !is_blank(l.p, l.n))
        r->mol2_stray = l.no;
    } while (!is_mol2_start(&l));
    if (!r->mol2_started) {
      r->mol2_started = 1;
      if (r->mol2_stray) {
        /* Text before the first record is a record whose MOLECULE line is
         * damaged: skipped on the way to the first MOLECULE line, it would
         * vanish without a word. One error record says so; the MOLECULE line is
         * read again as the start of the next record. A file without any
         * MOLECULE line has no records at all, which ingest reports. */
        unread_piece(r);
        snprintf(r->err, sizeof r->err,
                 "line %lld: text before the first @<TRIPOS>MOLECULE line (line %lld) that is neither blank nor "
                 "a comment: a record whose @<TRIPOS>MOLECULE line is damaged? it is not read",
                 (long long)r->mol2_stray, (long long)l.no);
        return emit(r, out, r->mol2_stray, r->err);
      }
    }
    int64_t start = l.no;
    int blank = 1;
    if (piece_add(r, &l) != 0) return oom(r);
    for (;;) {
      k = next_piece(r, &l);
      if (k < 0) return -1;
      if (k == 0 || is_mol2_start(&l)) {
        if (k) unread_piece(r);
        if (!blank || r->overflow) return emit(r, out, start, r->overflow || r->nul_line ? NULL : mol2_check(r, start));
        int e = empty_record(r, out, start, "empty record (nothing after its @<TRIPOS>MOLECULE line)");
        if (e) return e;
        break;
      }
      if (blank && !is_blank(l.p, l.n)) blank = 0;
      if (piece_add(r, &l) != 0) return oom(r);
    }
  }
}

/* ------------------------------------------------------------ whole lines */

/* Appends one whole line (all its pieces) to the text; *no = its number. */
static int read_line(struct rec_reader *r, int64_t *no) {
  struct piece l;
  int k = next_piece(r, &l);
  if (k <= 0) return k;
  *no = l.no;
  for (;;) {
    if (piece_add(r, &l) != 0) return oom(r);
    if (l.complete) return 1;
    k = next_piece(r, &l);
    if (k < 0) return -1;
    if (k == 0) return 1;
  }
}

/* ------------------------------------------------------------------- smi */

static int next_smi(struct rec_reader *r, struct rec *out) {
  for (;;) {
    int64_t no;
    text_reset(r);
    int k = read_line(r, &no);
    if (k <= 0) return k;
    if (no == r->smi_header) continue; /* a header names columns: no record, no number */
    if (r->overflow) return emit(r, out, no, NULL);
    size_t n = trimmed_len(r->text, r->tlen), b = 0;
    while (b < n && isspace((unsigned char)r->text[b]))
      b++;
    if (b == n || r->text[b] == '#') continue;
    memmove(r->text, r->text + b, n - b);
    r->text[n - b] = '\n';
    r->tlen = n - b + 1;
    return emit(r, out, no, NULL);
  }
}

/* ------------------------------------------------------------------- xyz */

/* A line holding only a non-negative integer (with blanks around it). */
static int bare_int(const char *p, size_t n, long *v) {
  size_t i = 0;
  n = trimmed_len(p, n);
  while (i < n && (p[i] == ' ' || p[i] == '\t'))
    i++;
  if (i == n) return 0;
  long x = 0;
  for (; i < n; i++) {
    if (p[i] < '0' || p[i] > '9') return 0;
    if (x > 100000000) return 0; /* no such molecule; treat as garbage */
    x = x * 10 + (p[i] - '0');
  }
  *v = x;
  return 1;
}

static int next_xyz(struct rec_reader *r, struct rec *out) {
  struct piece l;
  int k;
  long n_atoms = 0;
again:
  text_reset(r);
  for (;;) { /* the count line; blank lines between frames are skipped */
    k = next_piece(r, &l);
    if (k <= 0) return k;
    if (!l.cont && l.complete && is_blank(l.p, l.n)) continue;
    if (!l.cont && l.complete && bare_int(l.p, l.n, &n_atoms)) break;
    /* Garbage: one error record, then resync at the next bare integer line. */
    int64_t bad = l.no;
    size_t show = trimmed_len(l.p, l.n);
    char msg[160];
    snprintf(msg, sizeof msg, "line %lld: expected an atom count, got '%.*s%s'", (long long)bad,
             (int)(show > 40 ? 40 : show), l.p, show > 40 ? "..." : "");
    for (;;) {
      k = next_piece(r, &l);
      if (k < 0) return -1;
      if (k == 0) break;
      if (!l.cont && l.complete && bare_int(l.p, l.n, &n_atoms)) {
        unread_piece(r);
        break;
      }
    }
    return emit(r, out, bad, msg);
  }
  int64_t start = l.no;
  if (piece_add(r, &l) != 0) return oom(r);
  if (n_atoms == 0) { /* the count line says 0 atoms: its comment line, then the next frame */
    int64_t no;
    if (read_line(r, &no) < 0) return -1;
    int e = empty_record(r, out, start, "empty record (an XYZ frame of 0 atoms)");
    if (e) return e;
    goto again;
  }
  long want = n_atoms + 1, got = 0; /* comment line + atom lines */
  while (got < want) {
    int64_t no;
    k = read_line(r, &no);
    if (k < 0) return -1;
    if (k == 0) break;
    got++;
  }
  if (got < want) {
    char msg[160];
    snprintf(msg, sizeof msg, "truncated record: %ld atoms announced, %ld atom lines found", n_atoms,
             got > 0 ? got - 1 : 0);
    return emit(r, out, start, msg);
  }
  return emit(r, out, start, NULL);
}

/* ------------------------------------------------------------------- pdb */

/* The record name (columns 1-6) is word. */
static int pdb_record_is(const struct piece *l, const char *word) {
  size_t wn = strlen(word);
  if (l->cont || l->n < wn || memcmp(l->p, word, wn) != 0) return 0;
  if (l->n == wn) return 1;
  char c = l->p[wn];
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static int next_pdb(struct rec_reader *r, struct rec *out) {
  struct piece l;
  int64_t start = 0;
  int has_atoms = 0;
  text_reset(r);
  for (;;) {
    int k = next_piece(r, &l);
    if (k < 0) return -1;
    if (k == 0) return start && has_atoms ? emit(r, out, start, NULL) : 0;
    if (!start) start = l.no;
    if (piece_add(r, &l) != 0) return oom(r);
    if (l.cont) continue;
    if (l.n >= 4 && (memcmp(l.p, "ATOM", 4) == 0 || (l.n >= 6 && memcmp(l.p, "HETATM", 6) == 0))) has_atoms = 1;
    if (l.p[0] == 'E' && (pdb_record_is(&l, "END") || pdb_record_is(&l, "ENDMDL"))) {
      if (has_atoms) return emit(r, out, start, NULL);
      text_reset(r);
      start = 0;
    }
  }
}

/* ------------------------------------------------------------------- cml */

/* Scans the input character by character for top-level <molecule> elements
 * (any namespace prefix), skipping comments and counting nested <molecule>
 * tags. A tag at top level is kept tentatively from its '<' and dropped at
 * its '>' unless it opens a molecule. Text outside top-level molecules is
 * dropped.
 *
 * Open Babel (libxml2) reads a lone <molecule> element without any root or
 * xmlns (checked with 3.1.1), so records are not wrapped. A namespace prefix
 * declared on an enclosing element (<cml xmlns:cml="..."><cml:molecule>) is
 * copied into the molecule's start tag, or libxml2 would reject the record
 * (and print to stderr). */
static int cml_put(struct rec_reader *r, char c) {
  if (r->overflow) return 0;
  if (r->tlen + 2 > r->tcap) {
    if (r->tlen + 1 > r->max_rec) {
      r->overflow = 1;
      return 0;
    }
    if (text_reserve(r, 1) != 0) return -1;
  }
  r->text[r->tlen++] = c;
  return 0;
}

static int cml_tag_is_molecule(const struct rec_reader *r) {
  const char *n = r->tag_name, *colon = strrchr(n, ':');
  return strcmp(colon ? colon + 1 : n, "molecule") == 0;
}

/* Remembers the xmlns:prefix declarations of a top-level tag (text[from..tlen)). */
static int cml_keep_ns(struct rec_reader *r, size_t from) {
  const char *t = r->text + from, *end = r->text + r->tlen;
  while ((t = memmem(t, (size_t)(end - t), "xmlns:", 6)) != NULL) {
    const char *eq = memchr(t, '=', (size_t)(end - t));
    if (!eq || eq + 1 >= end || (eq[1] != '"' && eq[1] != '\'')) break;
    const char *close = memchr(eq + 2, eq[1], (size_t)(end - eq - 2));
    if (!close) break;
    size_t n = (size_t)(close + 1 - t);
    if (isspace((unsigned char)t[-1]) && r->ns_len + n + 2 <= 4096) {
      char *ns = realloc(r->ns, r->ns_len + n + 2);
      if (!ns) return -1;
      r->ns = ns;
      r->ns[r->ns_len++] = ' ';
      memcpy(r->ns + r->ns_len, t, n);
      r->ns_len += n;
      r->ns[r->ns_len] = 0;
    }
    t = close + 1;
  }
  return 0;
}

/* Adds the remembered declarations for the prefix of the molecule's tag,
 * unless the tag declares it itself. */
static int cml_add_ns(struct rec_reader *r) {
  const char *colon = strchr(r->tag_name, ':');
  if (!r->ns || !colon || r->overflow || r->tag_nlen >= (int)sizeof r->tag_name - 1) return 0;
  char want[48];
  snprintf(want, sizeof want, "xmlns:%.*s=", (int)(colon - r->tag_name), r->tag_name);
  size_t wn = strlen(want);
  if (memmem(r->text + r->tag_start, r->tlen - r->tag_start, want, wn)) return 0;
  const char *d = strstr(r->ns, want); /* the first declaration of the prefix */
  if (!d) return 0;
  const char *q = d + wn, *close = strchr(q + 1, *q);
  size_t n = (size_t)(close + 1 - d);
  size_t at = r->tag_start + 1 + strlen(r->tag_name);
  if (text_reserve(r, n + 1) != 0) return -1;
  memmove(r->text + at + n + 1, r->text + at, r->tlen - at);
  r->text[at] = ' ';
  memcpy(r->text + at + 1, d, n);
  r->tlen += n + 1;
  return 0;
}

/* The '>' ending a tag: 1 when a record is complete, -1 out of memory. */
static int cml_tag_end(struct rec_reader *r) {
  int mol = cml_tag_is_molecule(r), self = r->prev1 == '/';
  r->in_tag = 0;
  if (mol && r->tag_close) {
    if (r->depth > 0 && --r->depth == 0) return 1;
  } else if (mol && !self) {
    if (r->depth++ == 0) {
      r->rec_line = r->tag_line;
      if (cml_add_ns(r) != 0) return -1;
    }
  } else if (mol && r->depth == 0) { /* <molecule/>: an empty record */
    r->rec_line = r->tag_line;
    r->cml_empty = 1;
    return 1;
  } else if (r->depth == 0) {
    if (!r->tag_close && !r->overflow && cml_keep_ns(r, r->tag_start) != 0) return -1;
    r->tlen = r->tag_start; /* not ours */
    r->overflow = 0;
  }
  return 0;
}

static int next_cml(struct rec_reader *r, struct rec *out) {
  text_reset(r);
  for (;;) {
    if (!r->have_cp) {
      int k = next_piece(r, &r->cp);
      if (k < 0) return -1;
      if (k == 0) {
        if (r->depth > 0) {
          r->depth = r->in_tag = 0;
          return emit(r, out, r->rec_line, "unterminated <molecule> element");
        }
        return 0;
      }
      r->have_cp = 1;
      r->cpos = 0;
    }
    while (r->cpos < r->cp.n) {
      char c = r->cp.p[r->cpos++];
      int store = r->depth > 0, done = 0;
      if (!c && r->depth > 0) note_nul(&r->nul_line, &r->nul_col, &r->cp, r->cpos - 1);
      if (r->in_comment) {
        if (c == '>' && r->prev1 == '-' && r->prev2 == '-') r->in_comment = 0;
      } else if (!r->in_tag) {
        if (c == '<') {
          r->in_tag = 1;
          r->tag_close = r->tag_quote = r->tag_name_done = r->tag_nlen = 0;
          r->tag_name[0] = 0;
          r->tag_line = r->cp.no;
          if (r->depth == 0) r->tag_start = r->tlen;
          store = 1;
        }
      } else {
        store = 1;
        if (r->tag_quote) {
          if (c == r->tag_quote) r->tag_quote = 0;
        } else if (c == '>') {
          if (cml_put(r, c) != 0) return oom(r);
          store = 0;
          done = cml_tag_end(r);
          if (done < 0) return oom(r);
        } else if (!r->tag_name_done) {
          if (c == '/' && r->tag_nlen == 0 && !r->tag_close) {
            r->tag_close = 1;
          } else if (isspace((unsigned char)c) || c == '/') {
            r->tag_name_done = r->tag_nlen > 0;
          } else if (r->tag_nlen < (int)sizeof r->tag_name - 1) {
            r->tag_name[r->tag_nlen++] = c;
            r->tag_name[r->tag_nlen] = 0;
            if (r->tag_nlen == 3 && memcmp(r->tag_name, "!--", 3) == 0) {
              r->in_tag = 0; /* a comment: kept inside molecules, dropped outside */
              r->in_comment = 1;
              if (r->depth == 0) {
                r->tlen = r->tag_start;
                r->overflow = 0;
                store = 0;
              }
              c = 0; /* so that "<!-->" does not end it */
            }
          }
        } else if (c == '"' || c == '\'') {
          r->tag_quote = c;
        }
      }
      if (store && cml_put(r, r->cp.p[r->cpos - 1]) != 0) return oom(r);
      r->prev2 = r->prev1;
      r->prev1 = c;
      if (done && r->cml_empty) {
        r->cml_empty = 0;
        int e = empty_record(r, out, r->rec_line, "empty record (a <molecule/> element)");
        if (e) return e;
        continue;
      }
      if (done) return emit(r, out, r->rec_line, NULL);
    }
    r->have_cp = 0;
  }
}

/* --------------------------------------------------------------- csv/tsv */

static int field_add(struct rec_reader *r, char c) {
  if (r->fovf) return 0;
  if (r->flen + 2 > r->fcap) {
    if (r->flen + 2 > r->max_rec) {
      r->fovf = 1;
      return 0;
    }
    size_t cap = r->fcap ? r->fcap * 2 : 4096;
    char *f = realloc(r->fst, cap);
    if (!f) return -1;
    r->fst = f;
    r->fcap = cap;
  }
  r->fst[r->flen++] = c;
  return 0;
}

static int field_end(struct rec_reader *r) {
  if (field_add(r, 0) != 0) return -1;
  if (r->nf + 2 > r->foff_cap) {
    int cap = r->foff_cap ? r->foff_cap * 2 : 64;
    size_t *o = realloc(r->foff, (size_t)cap * sizeof *o);
    if (!o) return -1;
    r->foff = o;
    r->foff_cap = cap;
  }
  r->nf++;
  r->foff[r->nf] = r->flen; /* start of the next field */
  return 0;
}

/* Reads one row into fst/foff (nf fields). 1: a row (*no = its first
 * line, *unterminated set when the input ended inside quotes); 0: end. */
static int csv_row(struct rec_reader *r, int64_t *no, int *unterminated) {
  struct piece l;
  int started = 0, in_q = 0, after_q = 0, at_start = 1;
  r->flen = 0;
  r->nf = 0;
  r->fovf = 0;
  r->fnul_line = r->fnul_col = 0;
  if (!r->foff) {
    r->foff_cap = 64;
    if (!(r->foff = malloc((size_t)r->foff_cap * sizeof *r->foff))) return oom(r);
  }
  r->foff[0] = 0;
  *unterminated = 0;
  for (;;) {
    int k = next_piece(r, &l);
    if (k < 0) return -1;
    if (k == 0) {
      if (!started) return 0;
      *unterminated = in_q;
      if (field_end(r) != 0) return oom(r);
      return 1;
    }
    size_t n = l.n;
    if (!started) {
      if (!l.cont && is_blank(l.p, n)) continue; /* blank lines between rows */
      started = 1;
      *no = l.no;
    }
    if (l.complete) { /* the line end (CRLF too) is added back inside quotes, below */
      if (n && l.p[n - 1] == '\n') n--;
      if (n && l.p[n - 1] == '\r') n--;
    }
    for (size_t i = 0; i < n; i++) {
      char c = l.p[i];
      if (!c) note_nul(&r->fnul_line, &r->fnul_col, &l, i);
      if (in_q) {
        if (c == '"') {
          in_q = 0;
          after_q = 1;
        } else if (field_add(r, c) != 0) {
          return oom(r);
        }
        continue;
      }
      if (after_q && c == '"') { /* "" inside a quoted field */
        after_q = 0;
        in_q = 1;
        if (field_add(r, '"') != 0) return oom(r);
        continue;
      }
      after_q = 0;
      if (c == r->sep) {
        if (field_end(r) != 0) return oom(r);
        at_start = 1;
      } else if (c == '"' && at_start) {
        in_q = 1;
        at_start = 0;
      } else {
        at_start = 0;
        if (field_add(r, c) != 0) return oom(r);
      }
    }
    if (!l.complete) continue;
    if (in_q) { /* a quoted line break is part of the field */
      if (l.n && l.p[l.n - 1] == '\n' && field_add(r, '\n') != 0) return oom(r);
      continue;
    }
    if (field_end(r) != 0) return oom(r);
    return 1;
  }
}

static char *trim_in_place(char *s) {
  while (isspace((unsigned char)*s))
    s++;
  size_t n = strlen(s);
  while (n && isspace((unsigned char)s[n - 1]))
    s[--n] = 0;
  return s;
}

static int set_fields(struct rec_reader *r) {
  char **fp = realloc(r->fptr, (size_t)(r->nf ? r->nf : 1) * sizeof *fp);
  if (!fp) return -1;
  r->fptr = fp;
  for (int i = 0; i < r->nf; i++)
    fp[i] = r->fst + r->foff[i];
  return 0;
}

/* The columns a CSV/TSV row is read by. The SMILES column is the one named
 * smiles_column, else the first of these names found (in this order, not
 * the file's): smiles, canonical_smiles, isomeric_smiles, structure. The
 * name column is the one named name_column, else the first found of, in
 * this order of priority:
 *   1. name, id, title   (the names read before any other was: a file that
 *                         has one of them keeps the names it had)
 *   2. compound, compound_id, compound_name, molecule, molecule_name,
 *      mol_id, mol_name  (what chemists' tables call them)
 *   3. any column ending in _id  (nci_id, chembl_id, zinc_id ...)
 *   4. any column ending in _name
 * never the SMILES column itself. Names compare without letter case; within
 * a rule the leftmost column wins. */
void rec_pick_columns(const char *const *cols, int n, const char *smiles_column, const char *name_column,
                      int *smiles_col, int *name_col) {
  static const char *const smiles_names[] = {"smiles", "canonical_smiles", "isomeric_smiles", "structure"};
  static const char *const name_names[] = {"name",          "id",       "title",         "compound", "compound_id",
                                           "compound_name", "molecule", "molecule_name", "mol_id",   "mol_name"};
  *smiles_col = *name_col = -1;
  if (smiles_column) {
    for (int i = 0; i < n && *smiles_col < 0; i++)
      if (strcasecmp(cols[i], smiles_column) == 0) *smiles_col = i;
  } else {
    for (size_t k = 0; k < sizeof smiles_names / sizeof *smiles_names && *smiles_col < 0; k++)
      for (int i = 0; i < n && *smiles_col < 0; i++)
        if (strcasecmp(cols[i], smiles_names[k]) == 0) *smiles_col = i;
  }
  if (name_column) {
    for (int i = 0; i < n && *name_col < 0; i++)
      if (strcasecmp(cols[i], name_column) == 0) *name_col = i;
    return;
  }
  for (size_t k = 0; k < sizeof name_names / sizeof *name_names && *name_col < 0; k++)
    for (int i = 0; i < n && *name_col < 0; i++)
      if (i != *smiles_col && strcasecmp(cols[i], name_names[k]) == 0) *name_col = i;
  static const char *const suffixes[] = {"_id", "_name"};
  for (int k = 0; k < 2 && *name_col < 0; k++)
    for (int i = 0; i < n && *name_col < 0; i++) {
      size_t cl = strlen(cols[i]), sl = strlen(suffixes[k]);
      if (i != *smiles_col && cl > sl && strcasecmp(cols[i] + cl - sl, suffixes[k]) == 0) *name_col = i;
    }
}

/* Reads the header row into r->cols; with pick, also finds the SMILES and
 * name columns (rec_pick_columns), refusing a file without the SMILES
 * column (or without a name column named by name_column). */
static int csv_header(struct rec_reader *r, const struct rec_options *opt, int pick, char *err, size_t errlen) {
  int64_t no;
  int unterminated;
  int k = csv_row(r, &no, &unterminated);
  if (k < 0) {
    fmt_err(err, errlen, "%s", r->err);
    return -1;
  }
  if (k == 0) {
    fmt_err(err, errlen, "%s: empty file, expected a header row", r->path);
    return -1;
  }
  if (r->fovf || unterminated) {
    fmt_err(err, errlen, "%s: unreadable header row", r->path);
    return -1;
  }
  if (r->fnul_line) {
    char why[160];
    fmt_err(err, errlen, "%s: unreadable header row: %s", r->path,
            nul_error(why, sizeof why, r->fnul_line, r->fnul_col));
    return -1;
  }
  r->n_cols = r->nf;
  r->cols = calloc((size_t)r->n_cols, sizeof *r->cols);
  if (!r->cols) return oom(r);
  for (int i = 0; i < r->n_cols; i++) {
    char *s = r->fst + r->foff[i];
    if (i == 0 && (unsigned char)s[0] == 0xEF && (unsigned char)s[1] == 0xBB && (unsigned char)s[2] == 0xBF)
      s += 3; /* UTF-8 byte order mark */
    s = trim_in_place(s);
    r->cols[i] = strdup(s);
    if (!r->cols[i]) return oom(r);
  }
  r->smiles_col = r->name_col = -1;
  if (!pick) return 0;
  const char *sc = opt ? opt->smiles_column : NULL, *nc = opt ? opt->name_column : NULL;
  rec_pick_columns((const char *const *)r->cols, r->n_cols, sc, nc, &r->smiles_col, &r->name_col);
  if (r->smiles_col < 0 || (nc && r->name_col < 0)) {
    int w;
    if (r->smiles_col < 0 && !sc)
      w = snprintf(err, errlen,
                   "%s: no SMILES column (none is named smiles, canonical_smiles, isomeric_smiles or structure; "
                   "name it with smiles_column); columns are:",
                   r->path);
    else
      w = snprintf(err, errlen, "%s: no %s column '%s'; columns are:", r->path, r->smiles_col < 0 ? "SMILES" : "name",
                   r->smiles_col < 0 ? sc : nc);
    for (int i = 0; i < r->n_cols && w >= 0 && (size_t)w < errlen; i++)
      w += snprintf(err + w, errlen - (size_t)w, "%s '%s'", i ? "," : "", r->cols[i]);
    return -1;
  }
  return 0;
}

static int next_csv(struct rec_reader *r, struct rec *out) {
  int64_t no;
  int unterminated;
again:;
  int k = csv_row(r, &no, &unterminated);
  if (k <= 0) return k;
  text_reset(r);
  char msg[512];
  const char *error = NULL;
  if (r->fovf) r->nf = 0;
  if (set_fields(r) != 0) return oom(r);
  if (r->fovf) {
    snprintf(msg, sizeof msg,
             "record %lld (line %lld) is longer than max_record_bytes (%zu bytes); skipped to the next record",
             (long long)r->n_rec + 1, (long long)no, r->max_rec);
    error = msg;
  } else if (r->fnul_line) {
    error = nul_error(msg, sizeof msg, r->fnul_line, r->fnul_col);
  } else if (unterminated) {
    error = "unterminated quoted field";
  } else if (r->nf != r->n_cols) {
    snprintf(msg, sizeof msg, "row has %d field%s, header has %d", r->nf, r->nf == 1 ? "" : "s", r->n_cols);
    error = msg;
  }
  const char *smiles = NULL, *name = NULL;
  if (!error) {
    smiles = trim_in_place(r->fptr[r->smiles_col]);
    if (r->name_col >= 0) name = trim_in_place(r->fptr[r->name_col]);
    if (!*smiles) {
      int e = empty_record(r, out, no, "empty SMILES");
      if (e < 0) return e;
      if (e == 0) goto again;
      out->fields = r->fptr;
      out->n_fields = r->nf;
      return 1;
    }
    /* The record text is "SMILES name": Open Babel's SMILES reader ends the
     * SMILES at the first white space and takes the rest as a title, so a
     * cell "CC O" (or CC<tab>O, or a quoted line break) would be stored as
     * ethane without a word. A SMILES never holds white space: refuse it. */
    size_t cut = 0;
    while (smiles[cut] && !isspace((unsigned char)smiles[cut]))
      cut++;
    if (smiles[cut]) {
      /* the cell, cut at 60 bytes, its white space but ' ' spelled out as
       * C escapes to keep the message on one line */
      static const char ws[] = "\t\n\r\v\f", esc[] = "tnrvf";
      char shown[128];
      size_t w = 0;
      for (size_t i = 0; smiles[i] && i < 60; i++) {
        const char *e = smiles[i] != ' ' ? strchr(ws, smiles[i]) : NULL;
        if (e) shown[w++] = '\\';
        shown[w++] = e ? esc[e - ws] : smiles[i];
      }
      shown[w] = 0;
      snprintf(msg, sizeof msg,
               "line %lld: SMILES cell '%s%s' has white space at character %zu; Open Babel would read only "
               "'%.*s' (the rest as a title)",
               (long long)no, shown, strlen(smiles) > 60 ? "..." : "", cut + 1, cut > 60 ? 60 : (int)cut, smiles);
      error = msg;
    }
  }
  if (!error) {
    if (text_add(r, smiles, strlen(smiles)) != 0) return oom(r);
    if (name && *name) {
      size_t at = r->tlen + 1;
      if (text_add(r, " ", 1) != 0 || text_add(r, name, strlen(name)) != 0) return oom(r);
      for (size_t i = at; i < r->tlen && !r->overflow; i++)
        if (r->text[i] == '\n' || r->text[i] == '\r' || r->text[i] == '\t') r->text[i] = ' ';
    }
    if (text_add(r, "\n", 1) != 0) return oom(r);
  }
  int rc = emit(r, out, no, error);
  if (rc != 1) return rc;
  out->fields = r->fptr;
  out->n_fields = r->nf;
  out->name = error ? NULL : (char *)name;
  return 1;
}

/* ---------------------------------------------------------------- reader */

const char *rec_file_kind(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

static int not_regular(const char *path, mode_t mode, char *err, size_t errlen) {
  fmt_err(err, errlen,
          "%s: not a regular file (%s); molecule inputs must be regular files (each is read twice: to plan, then "
          "to parse)",
          path, rec_file_kind(mode));
  return -1;
}

int rec_check_regular(const char *path, char *err, size_t errlen) {
  struct stat sb;
  if (stat(path, &sb) != 0) {
    fmt_err(err, errlen, "%s: %s", path, strerror(errno));
    return -1;
  }
  return S_ISREG(sb.st_mode) ? 0 : not_regular(path, sb.st_mode, err, errlen);
}

/* gzread on descriptor fd, which it takes (closed on failure too), read
 * from its start: a regular file, else refused naming `path`. */
static gzFile adopt_regular(int fd, const char *path, char *err, size_t errlen) {
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    fmt_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    close(fd);
    return NULL;
  }
  if (!S_ISREG(sb.st_mode)) {
    not_regular(path, sb.st_mode, err, errlen);
    close(fd);
    return NULL;
  }
  int fl = fcntl(fd, F_GETFL);
  if (fl != -1) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  if (lseek(fd, 0, SEEK_SET) != 0) {
    fmt_err(err, errlen, "%s: cannot read from its start: %s", path, strerror(errno));
    close(fd);
    return NULL;
  }
  gzFile gz = gzdopen(fd, "rb");
  if (!gz) {
    fmt_err(err, errlen, "%s: cannot open: out of memory", path);
    close(fd);
    return NULL;
  }
  return gz;
}

/* Opens a regular file for gzread without ever blocking: a FIFO is opened
 * non-blocking and refused, like every other kind of non-regular file. */
static gzFile open_regular(const char *path, char *err, size_t errlen) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    fmt_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    return NULL;
  }
  return adopt_regular(fd, path, err, errlen);
}

/* rec_open, and rec_read_header (pick 0: a CSV/TSV header is read, no
 * column is looked for). */
static struct rec_reader *open_reader(const char *path, int fd, enum mol_format fmt, const struct rec_options *opt,
                                      int pick, char *err, size_t errlen) {
  if (fmt == MOL_FMT_UNKNOWN) fmt = rec_format_from_path(path);
  if (fmt == MOL_FMT_UNKNOWN) {
    fmt_err(err, errlen, "%s: unknown molecule format (name it with format:)", path);
    if (fd >= 0) close(fd);
    return NULL;
  }
  struct rec_reader *r = calloc(1, sizeof *r);
  if (!r || !(r->path = strdup(path)) || !(r->buf = malloc(BUF_SIZE))) {
    fmt_err(err, errlen, "%s: out of memory", path);
    rec_close(r);
    if (fd >= 0) close(fd);
    return NULL;
  }
  r->fmt = fmt;
  r->max_rec = opt && opt->max_record_bytes ? opt->max_record_bytes : DEFAULT_MAX_RECORD;
  r->max_empty = opt && opt->max_empty_listed ? opt->max_empty_listed : DEFAULT_MAX_EMPTY_LISTED;
  if (opt) {
    r->progress = opt->progress;
    r->progress_arg = opt->progress_arg;
  }
  r->sep = fmt == MOL_FMT_TSV ? '\t' : ',';
  if (fmt == MOL_FMT_SMI) r->smi_header = smi_header_of(path, fd);
  r->gz = fd >= 0 ? adopt_regular(fd, path, err, errlen) : open_regular(path, err, errlen);
  if (!r->gz) {
    rec_close(r);
    return NULL;
  }
  gzbuffer(r->gz, 256 * 1024);
  if (fmt == MOL_FMT_CSV || fmt == MOL_FMT_TSV) {
    if (csv_header(r, opt, pick, err, errlen) != 0) {
      rec_close(r);
      return NULL;
    }
  }
  return r;
}

struct rec_reader *rec_open(const char *path, enum mol_format fmt, const struct rec_options *opt, char *err,
                            size_t errlen) {
  return open_reader(path, -1, fmt, opt, 1, err, errlen);
}

struct rec_reader *rec_open_fd(int fd, const char *name, enum mol_format fmt, const struct rec_options *opt, char *err,
                               size_t errlen) {
  if (fd < 0) {
    fmt_err(err, errlen, "%s: cannot open: %s", name, strerror(EBADF));
    return NULL;
  }
  return open_reader(name, fd, fmt, opt, 1, err, errlen);
}

int rec_read_header(const char *path, enum mol_format fmt, char ***cols, int *n, char *err, size_t errlen) {
  *cols = NULL;
  *n = 0;
  if (fmt != MOL_FMT_CSV && fmt != MOL_FMT_TSV) {
    fmt_err(err, errlen, "%s: not a CSV or TSV file", path);
    return -1;
  }
  struct rec_reader *r = open_reader(path, -1, fmt, NULL, 0, err, errlen);
  if (!r) return -1;
  *cols = r->cols; /* the reader's, handed over */
  *n = r->n_cols;
  r->cols = NULL;
  r->n_cols = 0;
  rec_close(r);
  return 0;
}

void rec_free_names(char **names, int n) {
  for (int i = 0; names && i < n; i++)
    free(names[i]);
  free(names);
}

int rec_next(struct rec_reader *r, struct rec *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  if (r->done) return 0;
  int k;
  switch (r->fmt) {
  case MOL_FMT_SDF:
    k = next_sdf(r, out);
    break;
  case MOL_FMT_MOL2:
    k = next_mol2(r, out);
    break;
  case MOL_FMT_SMI:
    k = next_smi(r, out);
    break;
  case MOL_FMT_CSV:
  case MOL_FMT_TSV:
    k = next_csv(r, out);
    break;
  case MOL_FMT_XYZ:
    k = next_xyz(r, out);
    break;
  case MOL_FMT_PDB:
    k = next_pdb(r, out);
    break;
  case MOL_FMT_CML:
    k = next_cml(r, out);
    break;
  default:
    fmt_err(r->err, sizeof r->err, "%s: unknown molecule format", r->path);
    k = -1;
  }
  if (k < 0) {
    fmt_err(err, errlen, "%s", r->err);
    memset(out, 0, sizeof *out);
    r->done = 1;
  } else if (k == 0) {
    r->done = 1;
  }
  return k;
}

void rec_get_stats(const struct rec_reader *r, struct rec_stats *st) {
  memset(st, 0, sizeof *st);
  st->lines = r->lineno;
  st->n_out = r->n_out;
  st->last_no = r->n_rec;
  st->n_empty = r->n_empty;
  st->n_unlisted = r->n_unlisted;
  st->first_unlisted = r->first_unlisted;
  st->first_unlisted_line = r->first_unlisted_line;
}

const char *const *rec_columns(const struct rec_reader *r, int *n) {
  if (n) *n = r->cols ? r->n_cols : 0;
  return (const char *const *)r->cols;
}

void rec_close(struct rec_reader *r) {
  if (!r) return;
  if (r->gz) gzclose(r->gz);
  free(r->path);
  free(r->buf);
  free(r->text);
  for (int i = 0; r->cols && i < r->n_cols; i++)
    free(r->cols[i]);
  free(r->cols);
  free(r->fst);
  free(r->foff);
  free(r->fptr);
  free(r->ns);
  free(r);
}

int rec_scan(const char *path, enum mol_format fmt, const struct rec_options *opt, struct rec_stats *st, char *err,
             size_t errlen) {
  memset(st, 0, sizeof *st);
  struct rec_reader *r = rec_open(path, fmt, opt, err, errlen);
  if (!r) return -1;
  struct rec rec;
  int k;
  while ((k = rec_next(r, &rec, err, errlen)) == 1) {}
  rec_get_stats(r, st);
  rec_close(r);
  return k < 0 ? -1 : 0;
}

int64_t rec_count(const char *path, enum mol_format fmt, const struct rec_options *opt, char *err, size_t errlen) {
  struct rec_stats st;
  return rec_scan(path, fmt, opt, &st, err, errlen) != 0 ? -1 : st.n_out;
}

/* ----------------------------------------------------------------- labels */

/* strtod alone will not do: it also reads hexadecimal (0x10 is 16, 0x1p4
 * too), "infinity" and "nan(...)", and follows the locale's decimal point.
 * The syntax is checked here first; strtod then only converts what the check
 * let through. */
int rec_parse_label(const char *s, double *v, char *why, size_t whylen) {
  *v = 0;
  if (!s) s = "";
  const char *b = s;
  while (*b == ' ' || *b == '\t' || *b == '\r' || *b == '\n')
    b++;
  size_t n = strlen(b);
  while (n && (b[n - 1] == ' ' || b[n - 1] == '\t' || b[n - 1] == '\r' || b[n - 1] == '\n'))
    n--;
  if (!n) return 1;
  size_t i = 0, digits = 0;
  if (b[i] == '+' || b[i] == '-') i++;
  const char *mant = b + i;
  while (i < n && isdigit((unsigned char)b[i]))
    i++, digits++;
  if (i < n && b[i] == '.') {
    i++;
    while (i < n && isdigit((unsigned char)b[i]))
      i++, digits++;
  }
  if (digits && i < n && (b[i] == 'e' || b[i] == 'E')) {
    size_t e = i + 1, ed = 0;
    if (e < n && (b[e] == '+' || b[e] == '-')) e++;
    while (e < n && isdigit((unsigned char)b[e]))
      e++, ed++;
    if (ed) i = e;
  }
  if (!digits || i != n) {
    const char *what = "not a decimal number";
    if (mant[0] == '0' && (mant[1] == 'x' || mant[1] == 'X'))
      what = "hexadecimal, not a decimal number";
    else if (!strncasecmp(mant, "inf", 3) || !strncasecmp(mant, "nan", 3))
      what = "not a finite number";
    else if (memchr(b, ',', n))
      what = "a comma is not a decimal point (write 1.5, no thousands separators)";
    fmt_err(why, whylen, "%s", what);
    return -1;
  }
  char buf[128], *end;
  if (n >= sizeof buf) { /* only digits: a longer one is not a label anyone wrote */
    fmt_err(why, whylen, "too long for a number (%zu characters)", n);
    return -1;
  }
  memcpy(buf, b, n);
  buf[n] = 0;
  errno = 0;
  double x = strtod(buf, &end);
  if (*end) { /* a locale whose decimal point is not '.' */
    fmt_err(why, whylen, "not a decimal number");
    return -1;
  }
  if (errno == ERANGE || !isfinite(x)) {
    fmt_err(why, whylen, "out of range for a double");
    return -1;
  }
  *v = x;
  return 0;
}

/* ------------------------------------------------------------------ sniff */

/* The head's lines, one at a time: p and n get a line without its end. */
struct lines {
  const char *s, *end;
};

static int line_next(struct lines *it, const char **p, size_t *n) {
  if (it->s >= it->end) return 0;
  const char *e = memchr(it->s, '\n', (size_t)(it->end - it->s));
  if (!e) e = it->end;
  *p = it->s;
  *n = (size_t)(e - it->s);
  while (*n && (*p)[*n - 1] == '\r')
    (*n)--;
  it->s = e + 1;
  return 1;
}

static int has_prefix(const char *p, size_t n, const char *w) {
  size_t wn = strlen(w);
  return n >= wn && memcmp(p, w, wn) == 0;
}

/* A V2000/V3000 counts line: digits and blanks, then the version. */
static int sdf_counts_line(const char *p, size_t n) {
  size_t t = trimmed_len(p, n);
  if (t < 11 || (memcmp(p + t - 5, "V2000", 5) && memcmp(p + t - 5, "V3000", 5))) return 0;
  for (size_t i = 0; i < 6; i++)
    if (p[i] != ' ' && !isdigit((unsigned char)p[i])) return 0;
  return 1;
}

/* Columns 31-54 of a PDB ATOM/HETATM line hold three numbers. */
static int pdb_coords(const char *p, size_t n) {
  if (n < 54) return 0;
  for (int k = 0; k < 3; k++) {
    char f[9];
    memcpy(f, p + 30 + 8 * k, 8);
    f[8] = 0;
    char *e;
    strtod(f, &e);
    if (e == f) return 0;
    while (*e == ' ')
      e++;
    if (*e) return 0;
  }
  return 1;
}

/* "symbol-or-number x y z": an XYZ atom line. */
static int xyz_atom_line(const char *p, size_t n) {
  char buf[256];
  if (n >= sizeof buf) return 0;
  memcpy(buf, p, n);
  buf[n] = 0;
  char sym[8];
  double x, y, z;
  if (sscanf(buf, "%7s %lf %lf %lf", sym, &x, &y, &z) != 4) return 0;
  int alpha = isalpha((unsigned char)sym[0]) != 0;
  for (const char *c = sym; *c; c++)
    if (alpha ? !isalpha((unsigned char)*c) : !isdigit((unsigned char)*c)) return 0;
  return strlen(sym) <= 3;
}

/* The first line names a column "smiles" when split at sep. */
static int header_has_smiles(const char *p, size_t n, char sep) {
  const char *e = p + n;
  while (p <= e) {
    const char *f = memchr(p, sep, (size_t)(e - p));
    if (!f) f = e;
    const char *a = p, *b = f;
    while (a < b && isspace((unsigned char)*a))
      a++;
    while (b > a && isspace((unsigned char)b[-1]))
      b--;
    if (b - a >= 2 && *a == '"' && b[-1] == '"') {
      a++;
      b--;
    }
    if (b - a == 6 && strncasecmp(a, "smiles", 6) == 0) return 1;
    p = f + 1;
  }
  return 0;
}

static unsigned sniff_mask(const char *head, size_t n) {
  unsigned m = 0;
  if (n >= 3 && memcmp(head, "\xEF\xBB\xBF", 3) == 0) {
    head += 3;
    n -= 3;
  }
  struct lines it = {head, head + n};
  const char *p;
  size_t len;
  int nonblank = 0; /* non-blank lines so far */
  while (line_next(&it, &p, &len)) {
    if (n >= SNIFF_BYTES && it.s > it.end) break; /* the line cut at the end of the head */
    int blank = is_blank(p, len);
    if (!blank) nonblank++;
    if (has_prefix(p, len, "@<TRIPOS>")) m |= 1u << MOL_FMT_MOL2;
    if (line_is(&(struct piece){p, len, 1, 0, 0, 0}, "M  END") ||
        line_is(&(struct piece){p, len, 1, 0, 0, 0}, "$$$$") || sdf_counts_line(p, len))
      m |= 1u << MOL_FMT_SDF;
    if ((has_prefix(p, len, "ATOM  ") || has_prefix(p, len, "HETATM")) && pdb_coords(p, len)) m |= 1u << MOL_FMT_PDB;
    if (nonblank == 1 && !blank) {
      if (has_prefix(p, len, "HEADER") || has_prefix(p, len, "COMPND") || has_prefix(p, len, "CRYST1") ||
          has_prefix(p, len, "REMARK"))
        m |= 1u << MOL_FMT_PDB;
      if (header_has_smiles(p, len, ',')) m |= 1u << MOL_FMT_CSV;
      if (header_has_smiles(p, len, '\t')) m |= 1u << MOL_FMT_TSV;
      long v;
      if (bare_int(p, len, &v) && v > 0) {
        const char *p2, *p3;
        size_t n2, n3;
        struct lines peek = it;
        if (line_next(&peek, &p2, &n2) && line_next(&peek, &p3, &n3) && xyz_atom_line(p3, n3)) m |= 1u << MOL_FMT_XYZ;
      }
    }
  }
  if (memmem(head, n, "<cml", 4) || memmem(head, n, "<molecule", 9)) {
    m |= 1u << MOL_FMT_CML;
  } else {
    for (const char *q = head; (q = memmem(q, (size_t)(head + n - q), ":molecule", 9)) != NULL; q += 9) {
      const char *b = q;
      while (b > head && (isalnum((unsigned char)b[-1]) || b[-1] == '_' || b[-1] == '-'))
        b--;
      if (b > head && b[-1] == '<') {
        m |= 1u << MOL_FMT_CML;
        break;
      }
    }
  }
  return m;
}

enum mol_format rec_sniff(const char *head, size_t n, enum mol_format prefer) {
  unsigned m = sniff_mask(head, n);
  if (prefer != MOL_FMT_UNKNOWN && (m & (1u << prefer))) return prefer;
  /* A one-column header "smiles" is as much TSV as CSV: keep either. */
  if ((prefer == MOL_FMT_CSV || prefer == MOL_FMT_TSV) && (m & (1u << MOL_FMT_CSV)) && (m & (1u << MOL_FMT_TSV)))
    return prefer;
  static const enum mol_format order[] = {MOL_FMT_SDF, MOL_FMT_MOL2, MOL_FMT_CML, MOL_FMT_PDB,
                                          MOL_FMT_XYZ, MOL_FMT_CSV,  MOL_FMT_TSV};
  for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
    if (m & (1u << order[i])) return order[i];
  return MOL_FMT_UNKNOWN;
}

int rec_sniff_file(const char *path, enum mol_format prefer, enum mol_format *out, int *nonblank, char *err,
                   size_t errlen) {
  *out = MOL_FMT_UNKNOWN;
  *nonblank = 0;
  gzFile gz = open_regular(path, err, errlen);
  if (!gz) return -1;
  char *head = malloc(SNIFF_BYTES);
  if (!head) {
    gzclose(gz);
    fmt_err(err, errlen, "%s: out of memory", path);
    return -1;
  }
  size_t n = 0;
  while (n < SNIFF_BYTES) {
    int got = gzread(gz, head + n, (unsigned)(SNIFF_BYTES - n));
    if (got <= 0) {
      int zerr;
      const char *msg = gzerror(gz, &zerr);
      if (got < 0 || (zerr != Z_OK && zerr != Z_STREAM_END)) {
        fmt_err(err, errlen, "%s: read error: %s", path, zerr == Z_ERRNO ? strerror(errno) : msg);
        free(head);
        gzclose(gz);
        return -1;
      }
      break;
    }
    n += (size_t)got;
  }
  gzclose(gz);
  *nonblank = !is_blank(head, n);
  *out = rec_sniff(head, n, prefer);
  free(head);
  return 0;
}

/* ---------------------------------------------------------- smiles header */

/* Only the shape is checked, not the chemistry: what Open Babel makes of
 * the SMILES is its own business (a bad one is a reject). The point is to
 * tell a line of column names from a line of molecules. */
int rec_smiles_like(const char *s, size_t n) {
  int atoms = 0, depth = 0;
  for (size_t i = 0; i < n;) {
    char c = s[i];
    if (c == '[') { /* a bracket atom: [13CH3+], [nH], [Fe+2], [C@@H], [*:1] */
      size_t j = i + 1;
      int element = 0;
      for (; j < n && s[j] != ']'; j++) {
        char d = s[j];
        if (isalpha((unsigned char)d) || d == '*')
          element = 1;
        else if (!isdigit((unsigned char)d) && d != '@' && d != '+' && d != '-' && d != ':' && d != '#')
          return 0;
      }
      if (j >= n || !element) return 0;
      atoms++;
      i = j + 1;
    } else if ((c == 'C' && i + 1 < n && s[i + 1] == 'l') || (c == 'B' && i + 1 < n && s[i + 1] == 'r')) {
      atoms++; /* Cl, Br */
      i += 2;
    } else if (c && (strchr("BCNOPSFI*", c) || strchr("bcnops", c))) {
      atoms++; /* the organic subset, aromatic or not, and the wildcard */
      i++;
    } else if (c == '%') { /* ring bond %nn */
      if (i + 2 >= n || !isdigit((unsigned char)s[i + 1]) || !isdigit((unsigned char)s[i + 2])) return 0;
      i += 3;
    } else if (c == '(') {
      depth++;
      i++;
    } else if (c == ')') {
      if (--depth < 0) return 0;
      i++;
    } else if (isdigit((unsigned char)c) || (c && strchr("-=#$:/\\.@+", c))) {
      i++; /* ring bonds, bonds, dots; @ and + are let through outside brackets too */
    } else {
      return 0;
    }
  }
  return atoms > 0 && depth == 0;
}

/* A column name that says what a SMILES file's first line is: a header
 * (compared without letter case). */
static int known_column(const char *p, size_t n) {
  static const char *const names[] = {"smiles", "canonical_smiles", "isomeric_smiles", "structure", "name", "id",
                                      "title",  "compound",         "molecule",        "mol_id"};
  for (size_t k = 0; k < sizeof names / sizeof *names; k++)
    if (strlen(names[k]) == n && strncasecmp(p, names[k], n) == 0) return 1;
  return n > 3 && strncasecmp(p + n - 3, "_id", 3) == 0;
}

/* A word as column names are written: a letter, then letters, '_', '-'
 * or '.'; no digits, which a damaged SMILES (ring bonds) would have. */
static int word_like(const char *p, size_t n) {
  if (!n || !isalpha((unsigned char)p[0])) return 0;
  for (size_t i = 1; i < n; i++)
    if (!isalpha((unsigned char)p[i]) && p[i] != '_' && p[i] != '-' && p[i] != '.') return 0;
  return 1;
}

/* The first token of a content line (neither blank nor a comment): 1 with
 * *tok and *tn set, 0 for a line that is no record. */
static int smi_first_token(const char *p, size_t n, const char **tok, size_t *tn) {
  size_t b = 0;
  while (b < n && isspace((unsigned char)p[b]))
    b++;
  if (b == n || p[b] == '#') return 0;
  size_t e = b;
  while (e < n && !isspace((unsigned char)p[e]))
    e++;
  *tok = p + b;
  *tn = e - b;
  return 1;
}

/* How many content lines after the first must look like SMILES for a first
 * line that does not (and is not a known column name) to be a header. */
#define SMI_HEADER_LOOKAHEAD 3

int rec_smi_header(const char *head, size_t n, int whole, int64_t *line) {
  *line = 0;
  if (n >= 3 && memcmp(head, "\xEF\xBB\xBF", 3) == 0) {
    head += 3;
    n -= 3;
  }
  struct lines it = {head, head + n};
  const char *p, *tok;
  size_t len, tn;
  int64_t no = 0, first = 0;
  int following = 0;
  while (line_next(&it, &p, &len)) {
    no++;
    if (!whole && it.s > it.end) break; /* the line cut at the end of the head */
    if (memchr(p, 0, len)) return 0;    /* a NUL byte: the reader makes it an error record */
    if (!smi_first_token(p, len, &tok, &tn)) continue;
    if (!first) {
      if (known_column(tok, tn)) {
        *line = no;
        return 1;
      }
      if (!word_like(tok, tn) || rec_smiles_like(tok, tn)) return 0;
      first = no;
      continue;
    }
    if (!rec_smiles_like(tok, tn)) return 0;
    if (++following == SMI_HEADER_LOOKAHEAD) break;
  }
  if (!first || following == 0) return 0;
  *line = first;
  return 1;
}

/* The line of the header of a SMILES file (0: none), from its first 64 KiB,
 * read from descriptor fd when it is one (through a copy of it: the reader
 * then reads it from its start), else from path. A file that cannot be read
 * has none: the reader says why. */
static int64_t smi_header_of(const char *path, int fd) {
  char err[256];
  int own = fd >= 0 ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
  gzFile gz = fd < 0 ? open_regular(path, err, sizeof err) : own >= 0 ? adopt_regular(own, path, err, sizeof err) : NULL;
  if (!gz) return 0;
  char *head = malloc(SNIFF_BYTES);
  size_t n = 0;
  int got = 0;
  while (head && n < SNIFF_BYTES && (got = gzread(gz, head + n, (unsigned)(SNIFF_BYTES - n))) > 0)
    n += (size_t)got;
  int whole = head && n < SNIFF_BYTES && got == 0;
  gzclose(gz);
  int64_t line = 0;
  if (head && got >= 0 && !rec_smi_header(head, n, whole, &line)) line = 0;
  free(head);
  return line;
}

/* ---------------------------------------------------------------- SD tags */

/* A data header line as Open Babel reads it (in the data items after
 * "M  END"): any line with a '<'; the name runs from the first '<' to the
 * last '>' ("> <pIC50> (7)" names pIC50). */
static int add_tag(char ***tags, int *n, int *cap, const char *p, size_t len) {
  const char *lt = memchr(p, '<', len);
  if (!lt) return 0;
  const char *rt = NULL;
  for (const char *q = p + len; q > lt + 1; q--)
    if (q[-1] == '>') {
      rt = q - 1;
      break;
    }
  if (!rt) return 0;
  size_t tl = (size_t)(rt - lt - 1);
  for (int i = 0; i < *n; i++)
    if (strlen((*tags)[i]) == tl && memcmp((*tags)[i], lt + 1, tl) == 0) return 0;
  if (*n == *cap) {
    int c = *cap ? 2 * *cap : 16;
    char **t = realloc(*tags, (size_t)c * sizeof *t);
    if (!t) return -1;
    *tags = t;
    *cap = c;
  }
  char *name = malloc(tl + 1);
  if (!name) return -1;
  memcpy(name, lt + 1, tl);
  name[tl] = 0;
  (*tags)[(*n)++] = name;
  return 0;
}

int rec_sdf_tags(const char *path, int max_records, size_t max_bytes, char ***tags, int *n_tags, int64_t *n_records,
                 char *err, size_t errlen) {
  *tags = NULL;
  *n_tags = 0;
  *n_records = 0;
  gzFile gz = open_regular(path, err, errlen);
  if (!gz) return -1;
  enum { LINE = 4096 };
  char *buf = malloc(LINE);
  if (!buf) {
    gzclose(gz);
    fmt_err(err, errlen, "%s: out of memory", path);
    return -1;
  }
  size_t bytes = 0;
  int cap = 0, in_data = 0, in_value = 0, cont = 0, content = 0, rc = 0;
  /* gzgets hands out a line longer than the buffer in pieces: only a
   * piece that starts a line (cont == 0) is looked at */
  while (*n_records < max_records && bytes < max_bytes && gzgets(gz, buf, LINE)) {
    size_t len = strlen(buf);
    bytes += len;
    int starts = !cont;
    cont = len && buf[len - 1] != '\n';
    if (!starts) continue;
    size_t t = trimmed_len(buf, len);
    if (t == 4 && memcmp(buf, "$$$$", 4) == 0) {
      (*n_records)++;
      in_data = in_value = content = 0;
      continue;
    }
    if (!is_blank(buf, len)) content = 1;
    if (!in_data) {
      in_data = len >= 6 && memcmp(buf, "M  END", 6) == 0 && (t == 6 || isspace((unsigned char)buf[6]));
    } else if (in_value) {
      if (t == 0) in_value = 0; /* a blank line ends the value */
    } else if (memchr(buf, '<', t)) {
      if (add_tag(tags, n_tags, &cap, buf, t) != 0) {
        fmt_err(err, errlen, "%s: out of memory", path);
        rc = -1;
        break;
      }
      in_value = 1;
    }
  }
  if (rc == 0 && content && *n_records < max_records && bytes < max_bytes)
    (*n_records)++; /* a last record without $$$$ */
  int zerr;
  const char *msg = gzerror(gz, &zerr);
  if (rc == 0 && zerr != Z_OK && zerr != Z_STREAM_END) {
    fmt_err(err, errlen, "%s: read error: %s", path, zerr == Z_ERRNO ? strerror(errno) : msg);
    rc = -1;
  }
  free(buf);
  gzclose(gz);
  if (rc != 0) {
    rec_free_names(*tags, *n_tags);
    *tags = NULL;
    *n_tags = 0;
  }
  return rc;
}
