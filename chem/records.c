/* records.c — split molecule files into records (see records.h): what every
 * format shares. Each format's splitter lives in its own file
 * (records_sdf.c, records_mol2.c, records_smiles.c, records_xyz.c,
 * records_pdb.c, records_cml.c; the format sniffer in records_sniff.c), and
 * records_internal.h is what they share.
 *
 * Input goes through zlib (gzread reads plain files unchanged) into a 1 MiB
 * buffer; lines are found with memchr and handed out as pieces pointing into
 * that buffer. A line longer than the buffer comes in several pieces (only
 * the first has cont == 0); such a piece is never a record delimiter. Record
 * text accumulates in a buffer capped at max_record_bytes: a longer record is
 * read on to its end without keeping more of it, and reported as an error
 * record naming its number. Empty records go through rec_empty_record(),
 * which lists the first max_empty_listed and counts the rest.
 *
 * NUL bytes: record text is handed on as a C string (to Open Babel, through
 * the worker pipes, into SQLite), where a NUL byte ends it: `CC\0O` would be
 * stored as ethane. The first NUL byte of a record is noted (line and column)
 * as its pieces are taken in, and the record becomes an error record naming
 * it; the records after it are read as usual.
 */
#include "chem/records_internal.h"

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
#define DEFAULT_MAX_EMPTY_LISTED 10

void rec_fmt_err(char *err, size_t len, const char *fmt, ...) {
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
int rec_next_piece(struct rec_reader *r, struct piece *out) {
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
        rec_fmt_err(r->err, sizeof r->err, "%s: read error: %s", r->path, zerr == Z_ERRNO ? strerror(errno) : msg);
        return -1;
      }
      if (got == 0) {
        int zerr;
        const char *msg = gzerror(r->gz, &zerr);
        if (zerr != Z_OK && zerr != Z_STREAM_END) {
          rec_fmt_err(r->err, sizeof r->err, "%s: read error: %s", r->path, zerr == Z_ERRNO ? strerror(errno) : msg);
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
        rec_fmt_err(r->err, sizeof r->err, "%s", msg[0] ? msg : "reading stopped");
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

/* ------------------------------------------------------------ record text */

int rec_text_reserve(struct rec_reader *r, size_t extra) {
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
int rec_text_add(struct rec_reader *r, const char *p, size_t n) {
  if (r->overflow) return 0;
  if (r->tlen + n > r->max_rec) {
    r->overflow = 1;
    return 0;
  }
  if (rec_text_reserve(r, n) != 0) return -1;
  memcpy(r->text + r->tlen, p, n);
  r->tlen += n;
  return 0;
}

/* Appends a piece of the record, noting a NUL byte in it. */
int rec_piece_add(struct rec_reader *r, const struct piece *l) {
  const char *z = r->nul_line ? NULL : memchr(l->p, 0, l->n);
  if (z) rec_note_nul(&r->nul_line, &r->nul_col, l, (size_t)(z - l->p));
  return rec_text_add(r, l->p, l->n);
}

/* The error text for a record with a NUL byte, into buf. */
const char *rec_nul_error(char *buf, size_t len, int64_t line, int64_t col) {
  snprintf(buf, len,
           "NUL byte at line %lld column %lld (a text record cannot hold one: its text would end there, cut short)",
           (long long)line, (long long)col);
  return buf;
}

int rec_oom(struct rec_reader *r) {
  rec_fmt_err(r->err, sizeof r->err, "%s: out of memory", r->path);
  return -1;
}

/* Fills out; an overflowed record becomes an error record. */
int rec_emit(struct rec_reader *r, struct rec *out, int64_t line, const char *error) {
  if (rec_text_reserve(r, 1) != 0) return rec_oom(r);
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
  if (!error && r->nul_line) error = rec_nul_error(r->err, sizeof r->err, r->nul_line, r->nul_col);
  if (error) {
    if (error != r->err) snprintf(r->err, sizeof r->err, "%s", error);
    out->error = r->err;
    r->tlen = 0;
  } else if (r->tlen && r->text[r->tlen - 1] != '\n') {
    if (rec_text_reserve(r, 2) != 0) return rec_oom(r);
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
int rec_empty_record(struct rec_reader *r, struct rec *out, int64_t line, const char *why) {
  r->n_empty++;
  rec_text_reset(r);
  if (r->max_empty < 0 || r->n_empty <= r->max_empty) return rec_emit(r, out, line, why);
  r->n_rec++;
  if (r->n_unlisted++ == 0) {
    r->first_unlisted = r->n_rec;
    r->first_unlisted_line = line;
  }
  return 0;
}
/* ------------------------------------------------------------ whole lines */

/* Appends one whole line (all its pieces) to the text; *no = its number. */
int rec_read_line(struct rec_reader *r, int64_t *no) {
  struct piece l;
  int k = rec_next_piece(r, &l);
  if (k <= 0) return k;
  *no = l.no;
  for (;;) {
    if (rec_piece_add(r, &l) != 0) return rec_oom(r);
    if (l.complete) return 1;
    k = rec_next_piece(r, &l);
    if (k < 0) return -1;
    if (k == 0) return 1;
  }
}

/* ------------------------------------------------------------- head lines */

/* The next line of a head held in memory (rec_sniff, rec_smi_header). */
int rec_line_next(struct rec_lines *it, const char **p, size_t *n) {
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
  rec_fmt_err(err, errlen,
              "%s: not a regular file (%s); molecule inputs must be regular files (each is read twice: to plan, then "
              "to parse)",
              path, rec_file_kind(mode));
  return -1;
}

int rec_check_regular(const char *path, char *err, size_t errlen) {
  struct stat sb;
  if (stat(path, &sb) != 0) {
    rec_fmt_err(err, errlen, "%s: %s", path, strerror(errno));
    return -1;
  }
  return S_ISREG(sb.st_mode) ? 0 : not_regular(path, sb.st_mode, err, errlen);
}

/* gzread on descriptor fd, which it takes (closed on failure too), read
 * from its start: a regular file, else refused naming `path`. */
gzFile rec_adopt_regular(int fd, const char *path, char *err, size_t errlen) {
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    rec_fmt_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
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
    rec_fmt_err(err, errlen, "%s: cannot read from its start: %s", path, strerror(errno));
    close(fd);
    return NULL;
  }
  gzFile gz = gzdopen(fd, "rb");
  if (!gz) {
    rec_fmt_err(err, errlen, "%s: cannot open: out of memory", path);
    close(fd);
    return NULL;
  }
  return gz;
}

/* Opens a regular file for gzread without ever blocking: a FIFO is opened
 * non-blocking and refused, like every other kind of non-regular file. */
gzFile rec_open_regular(const char *path, char *err, size_t errlen) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    rec_fmt_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    return NULL;
  }
  return rec_adopt_regular(fd, path, err, errlen);
}

/* rec_open, and rec_read_header (pick 0: a CSV/TSV header is read, no
 * column is looked for). */
static struct rec_reader *open_reader(const char *path, int fd, enum mol_format fmt, const struct rec_options *opt,
                                      int pick, char *err, size_t errlen) {
  if (fmt == MOL_FMT_UNKNOWN) fmt = rec_format_from_path(path);
  if (fmt == MOL_FMT_UNKNOWN) {
    rec_fmt_err(err, errlen, "%s: unknown molecule format (name it with format:)", path);
    if (fd >= 0) close(fd);
    return NULL;
  }
  struct rec_reader *r = calloc(1, sizeof *r);
  if (!r || !(r->path = strdup(path)) || !(r->buf = malloc(BUF_SIZE))) {
    rec_fmt_err(err, errlen, "%s: out of memory", path);
    rec_close(r);
    if (fd >= 0) close(fd);
    return NULL;
  }
  r->fmt = fmt;
  r->max_rec = opt && opt->max_record_bytes ? opt->max_record_bytes : REC_MAX_RECORD_DEFAULT;
  r->max_empty = opt && opt->max_empty_listed ? opt->max_empty_listed : DEFAULT_MAX_EMPTY_LISTED;
  if (opt) {
    r->progress = opt->progress;
    r->progress_arg = opt->progress_arg;
  }
  r->sep = fmt == MOL_FMT_TSV ? '\t' : ',';
  if (fmt == MOL_FMT_SMI) r->smi_header = rec_smi_header_of(path, fd);
  r->gz = fd >= 0 ? rec_adopt_regular(fd, path, err, errlen) : rec_open_regular(path, err, errlen);
  if (!r->gz) {
    rec_close(r);
    return NULL;
  }
  gzbuffer(r->gz, 256 * 1024);
  if (fmt == MOL_FMT_CSV || fmt == MOL_FMT_TSV) {
    if (rec_csv_header(r, opt, pick, err, errlen) != 0) {
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
    rec_fmt_err(err, errlen, "%s: cannot open: %s", name, strerror(EBADF));
    return NULL;
  }
  return open_reader(name, fd, fmt, opt, 1, err, errlen);
}

int rec_read_header(const char *path, enum mol_format fmt, char ***cols, int *n, char *err, size_t errlen) {
  *cols = NULL;
  *n = 0;
  if (fmt != MOL_FMT_CSV && fmt != MOL_FMT_TSV) {
    rec_fmt_err(err, errlen, "%s: not a CSV or TSV file", path);
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
    k = rec_next_sdf(r, out);
    break;
  case MOL_FMT_MOL2:
    k = rec_next_mol2(r, out);
    break;
  case MOL_FMT_SMI:
    k = rec_next_smi(r, out);
    break;
  case MOL_FMT_CSV:
  case MOL_FMT_TSV:
    k = rec_next_csv(r, out);
    break;
  case MOL_FMT_XYZ:
    k = rec_next_xyz(r, out);
    break;
  case MOL_FMT_PDB:
    k = rec_next_pdb(r, out);
    break;
  case MOL_FMT_CML:
    k = rec_next_cml(r, out);
    break;
  default:
    rec_fmt_err(r->err, sizeof r->err, "%s: unknown molecule format", r->path);
    k = -1;
  }
  if (k < 0) {
    rec_fmt_err(err, errlen, "%s", r->err);
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
    rec_fmt_err(why, whylen, "%s", what);
    return -1;
  }
  char buf[128], *end;
  if (n >= sizeof buf) { /* only digits: a longer one is not a label anyone wrote */
    rec_fmt_err(why, whylen, "too long for a number (%zu characters)", n);
    return -1;
  }
  memcpy(buf, b, n);
  buf[n] = 0;
  errno = 0;
  double x = strtod(buf, &end);
  if (*end) { /* a locale whose decimal point is not '.' */
    rec_fmt_err(why, whylen, "not a decimal number");
    return -1;
  }
  if (errno == ERANGE || !isfinite(x)) {
    rec_fmt_err(why, whylen, "out of range for a double");
    return -1;
  }
  if (!(fabs(x) <= REC_LABEL_MAX)) {
    rec_fmt_err(why, whylen, "out of range for a label (within +-%g)", REC_LABEL_MAX);
    return -1;
  }
  *v = x;
  return 0;
}
