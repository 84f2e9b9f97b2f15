/* records_smiles.c — the formats whose records are SMILES: .smi files, one
 * line a record (and the header line some of them start with), and CSV/TSV
 * tables, one row a record, read by the columns named SMILES and name.
 */
#include "chem/records_internal.h"

#include <ctype.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

/* ------------------------------------------------------------------- smi */

int rec_next_smi(struct rec_reader *r, struct rec *out) {
  for (;;) {
    int64_t no;
    rec_text_reset(r);
    int k = rec_read_line(r, &no);
    if (k <= 0) return k;
    if (no == r->smi_header) continue; /* a header names columns: no record, no number */
    if (r->overflow) return rec_emit(r, out, no, NULL);
    size_t n = rec_trimmed_len(r->text, r->tlen), b = 0;
    while (b < n && isspace((unsigned char)r->text[b]))
      b++;
    if (b == n || r->text[b] == '#') continue;
    memmove(r->text, r->text + b, n - b);
    r->text[n - b] = '\n';
    r->tlen = n - b + 1;
    return rec_emit(r, out, no, NULL);
  }
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
  struct rec_lines it = {head, head + n};
  const char *p, *tok;
  size_t len, tn;
  int64_t no = 0, first = 0;
  int following = 0;
  while (rec_line_next(&it, &p, &len)) {
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
int64_t rec_smi_header_of(const char *path, int fd) {
  int own = fd >= 0 ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
  gzFile gz = fd < 0 ? rec_open_regular(path, NULL) : own >= 0 ? rec_adopt_regular(own, path, NULL) : NULL;
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
    if (!(r->foff = malloc((size_t)r->foff_cap * sizeof *r->foff))) return rec_oom(r);
  }
  r->foff[0] = 0;
  *unterminated = 0;
  for (;;) {
    int k = rec_next_piece(r, &l);
    if (k < 0) return -1;
    if (k == 0) {
      if (!started) return 0;
      *unterminated = in_q;
      if (field_end(r) != 0) return rec_oom(r);
      return 1;
    }
    size_t n = l.n;
    if (!started) {
      if (!l.cont && rec_is_blank(l.p, n)) continue; /* blank lines between rows */
      started = 1;
      *no = l.no;
    }
    if (l.complete) { /* the line end (CRLF too) is added back inside quotes, below */
      if (n && l.p[n - 1] == '\n') n--;
      if (n && l.p[n - 1] == '\r') n--;
    }
    for (size_t i = 0; i < n; i++) {
      char c = l.p[i];
      if (!c) rec_note_nul(&r->fnul_line, &r->fnul_col, &l, i);
      if (in_q) {
        if (c == '"') {
          in_q = 0;
          after_q = 1;
        } else if (field_add(r, c) != 0) {
          return rec_oom(r);
        }
        continue;
      }
      if (after_q && c == '"') { /* "" inside a quoted field */
        after_q = 0;
        in_q = 1;
        if (field_add(r, '"') != 0) return rec_oom(r);
        continue;
      }
      after_q = 0;
      if (c == r->sep) {
        if (field_end(r) != 0) return rec_oom(r);
        at_start = 1;
      } else if (c == '"' && at_start) {
        in_q = 1;
        at_start = 0;
      } else {
        at_start = 0;
        if (field_add(r, c) != 0) return rec_oom(r);
      }
    }
    if (!l.complete) continue;
    if (in_q) { /* a quoted line break is part of the field */
      if (l.n && l.p[l.n - 1] == '\n' && field_add(r, '\n') != 0) return rec_oom(r);
      continue;
    }
    if (field_end(r) != 0) return rec_oom(r);
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
/* A header refused: err (SE3_ERR_INPUT), its file path; returns -1. */
__attribute__((format(printf, 3, 4))) static int header_error(struct se3_error *err, const char *path, const char *fmt,
                                                              ...) {
  va_list ap;
  va_start(ap, fmt);
  se3_error_vset(err, SE3_ERR_INPUT, fmt, ap);
  va_end(ap);
  se3_error_at(err, path, 0, 0);
  return -1;
}

/* Out of memory reading the header: in err as in r->fail; returns -1. */
static int csv_oom(struct rec_reader *r, struct se3_error *err) {
  rec_oom(r);
  if (err) *err = r->fail;
  return -1;
}

int rec_csv_header(struct rec_reader *r, const struct rec_options *opt, int pick, struct se3_error *err) {
  int64_t no;
  int unterminated;
  int k = csv_row(r, &no, &unterminated);
  if (k < 0) {
    if (err) *err = r->fail;
    return -1;
  }
  if (k == 0) return header_error(err, r->path, "empty file, expected a header row");
  if (r->fovf || unterminated) return header_error(err, r->path, "unreadable header row");
  if (r->fnul_line) {
    char why[160];
    return header_error(err, r->path, "unreadable header row: %s",
                        rec_nul_error(why, sizeof why, r->fnul_line, r->fnul_col));
  }
  r->n_cols = r->nf;
  r->cols = calloc((size_t)r->n_cols, sizeof *r->cols);
  if (!r->cols) return csv_oom(r, err);
  for (int i = 0; i < r->n_cols; i++) {
    char *s = r->fst + r->foff[i];
    if (i == 0 && (unsigned char)s[0] == 0xEF && (unsigned char)s[1] == 0xBB && (unsigned char)s[2] == 0xBF)
      s += 3; /* UTF-8 byte order mark */
    s = trim_in_place(s);
    r->cols[i] = strdup(s);
    if (!r->cols[i]) return csv_oom(r, err);
  }
  r->smiles_col = r->name_col = -1;
  if (!pick) return 0;
  const char *sc = opt ? opt->smiles_column : NULL, *nc = opt ? opt->name_column : NULL;
  rec_pick_columns((const char *const *)r->cols, r->n_cols, sc, nc, &r->smiles_col, &r->name_col);
  if (r->smiles_col < 0 || (nc && r->name_col < 0)) {
    char msg[SE3_ERROR_MESSAGE];
    size_t len = sizeof msg;
    int w;
    if (r->smiles_col < 0 && !sc)
      w = snprintf(msg, len,
                   "no SMILES column (none is named smiles, canonical_smiles, isomeric_smiles or structure; "
                   "name it with smiles_column); columns are:");
    else
      w = snprintf(msg, len, "no %s column '%s'; columns are:", r->smiles_col < 0 ? "SMILES" : "name",
                   r->smiles_col < 0 ? sc : nc);
    for (int i = 0; i < r->n_cols && w >= 0 && (size_t)w < len; i++)
      w += snprintf(msg + w, len - (size_t)w, "%s '%s'", i ? "," : "", r->cols[i]);
    return header_error(err, r->path, "%s", msg);
  }
  return 0;
}

int rec_next_csv(struct rec_reader *r, struct rec *out) {
  int64_t no;
  int unterminated;
again:;
  int k = csv_row(r, &no, &unterminated);
  if (k <= 0) return k;
  rec_text_reset(r);
  char msg[512];
  const char *error = NULL;
  if (r->fovf) r->nf = 0;
  if (set_fields(r) != 0) return rec_oom(r);
  if (r->fovf) {
    snprintf(msg, sizeof msg,
             "record %lld (line %lld) is longer than max_record_bytes (%zu bytes); skipped to the next record",
             (long long)r->n_rec + 1, (long long)no, r->max_rec);
    error = msg;
  } else if (r->fnul_line) {
    error = rec_nul_error(msg, sizeof msg, r->fnul_line, r->fnul_col);
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
      int e = rec_empty_record(r, out, no, "empty SMILES");
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
    if (rec_text_add(r, smiles, strlen(smiles)) != 0) return rec_oom(r);
    if (name && *name) {
      size_t at = r->tlen + 1;
      if (rec_text_add(r, " ", 1) != 0 || rec_text_add(r, name, strlen(name)) != 0) return rec_oom(r);
      for (size_t i = at; i < r->tlen && !r->overflow; i++)
        if (r->text[i] == '\n' || r->text[i] == '\r' || r->text[i] == '\t') r->text[i] = ' ';
    }
    if (rec_text_add(r, "\n", 1) != 0) return rec_oom(r);
  }
  int rc = rec_emit(r, out, no, error);
  if (rc != 1) return rc;
  out->fields = r->fptr;
  out->n_fields = r->nf;
  out->name = error ? NULL : (char *)name;
  return 1;
}
