/* records_core.c — what every format's splitter reads with (see
 * records_internal.h): line pieces from the input buffer, the record text,
 * emitting a record (an error record, an empty one), whole lines and a
 * file head's lines, and opening regular files only. The splitters
 * (records_sdf.c and the rest) and the dispatcher (records.c) call it; it
 * calls neither.
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

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

void rec_fmt_err(char *buf, size_t len, const char *fmt, ...) {
  if (!buf || !len) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, len, fmt, ap);
  va_end(ap);
}

int rec_read_error(struct se3_error *err, const char *path, int64_t line, int64_t record, int zerr, const char *msg) {
  se3_error_set(err, zerr == Z_ERRNO ? SE3_ERR_IO : SE3_ERR_INPUT, "read error: %s",
                zerr == Z_ERRNO ? strerror(errno) : msg);
  se3_error_at(err, path, line > 0 && line <= INT_MAX ? (int)line : 0, 0);
  if (line <= 0) se3_error_record(err, path, record);
  return -1;
}

/* ------------------------------------------------------------ line pieces */

/* 1: a piece; 0: end of input; -1: read error (in r->fail). */
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
    } else if (r->pos == 0 && r->end == REC_BUF_SIZE) {
      n = avail; /* a line longer than the buffer */
      complete = 0;
    } else {
      if (r->pos) {
        memmove(r->buf, s, avail);
        r->pos = 0;
        r->end = avail;
      }
      int got = gzread(r->gz, r->buf + r->end, (unsigned)(REC_BUF_SIZE - r->end));
      if (got < 0) {
        int zerr;
        const char *msg = gzerror(r->gz, &zerr);
        return rec_read_error(&r->fail, r->path, r->in_cont ? r->lineno : r->lineno + 1, 0, zerr, msg);
      }
      if (got == 0) {
        int zerr;
        const char *msg = gzerror(r->gz, &zerr);
        if (zerr != Z_OK && zerr != Z_STREAM_END)
          return rec_read_error(&r->fail, r->path, r->in_cont ? r->lineno : r->lineno + 1, 0, zerr, msg);
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
      se3_error_clear(&r->fail);
      if (r->progress(r->progress_arg, &st, &r->fail) != 0) {
        if (r->fail.kind == SE3_ERR_NONE) se3_error_set(&r->fail, SE3_ERR_RUN, "reading stopped");
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
  se3_error_set(&r->fail, SE3_ERR_MEMORY, "out of memory");
  se3_error_at(&r->fail, r->path, 0, 0);
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

static int not_regular(const char *path, mode_t mode, struct se3_error *err) {
  se3_error_set(err, SE3_ERR_INPUT,
                "not a regular file (%s); molecule inputs must be regular files (each is read twice: to plan, then "
                "to parse)",
                rec_file_kind(mode));
  se3_error_at(err, path, 0, 0);
  return -1;
}

/* err's kind and text for a failed system call on path; returns -1. */
static int sys_error(struct se3_error *err, const char *path, const char *what, int e) {
  se3_error_set(err, SE3_ERR_IO, "%s%s", what, strerror(e));
  se3_error_at(err, path, 0, 0);
  return -1;
}

int rec_check_regular(const char *path, struct se3_error *err) {
  struct stat sb;
  if (stat(path, &sb) != 0) return sys_error(err, path, "", errno);
  return S_ISREG(sb.st_mode) ? 0 : not_regular(path, sb.st_mode, err);
}

/* gzread on descriptor fd, which it takes (closed on failure too), read
 * from its start: a regular file, else refused naming `path`. */
gzFile rec_adopt_regular(int fd, const char *path, struct se3_error *err) {
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    sys_error(err, path, "cannot open: ", errno);
    close(fd);
    return NULL;
  }
  if (!S_ISREG(sb.st_mode)) {
    not_regular(path, sb.st_mode, err);
    close(fd);
    return NULL;
  }
  int fl = fcntl(fd, F_GETFL);
  if (fl != -1) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  if (lseek(fd, 0, SEEK_SET) != 0) {
    sys_error(err, path, "cannot read from its start: ", errno);
    close(fd);
    return NULL;
  }
  gzFile gz = gzdopen(fd, "rb");
  if (!gz) {
    se3_error_set(err, SE3_ERR_MEMORY, "cannot open: out of memory");
    se3_error_at(err, path, 0, 0);
    close(fd);
    return NULL;
  }
  return gz;
}

/* Opens a regular file for gzread without ever blocking: a FIFO is opened
 * non-blocking and refused, like every other kind of non-regular file. */
gzFile rec_open_regular(const char *path, struct se3_error *err) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    sys_error(err, path, "cannot open: ", errno);
    return NULL;
  }
  return rec_adopt_regular(fd, path, err);
}

void rec_free_names(char **names, int n) {
  for (int i = 0; names && i < n; i++)
    free(names[i]);
  free(names);
}

/* The counters (records.h); the progress callback gets them too. */
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
