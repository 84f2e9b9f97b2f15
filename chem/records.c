/* records.c — split molecule files into records (see records.h): the
 * public entry points. The formats and their names, opening a file (its
 * reader, a CSV/TSV header, a SMILES file's header line), rec_next's
 * dispatch to the format's splitter, rec_scan and rec_count,
 * label values. Each format's splitter lives in its own file
 * (records_sdf.c, records_mol2.c, records_smiles.c, records_xyz.c,
 * records_pdb.c, records_cml.c; the format sniffer in records_sniff.c), and
 * what they read with in records_core.c; records_internal.h is what they
 * share. Calls run one way: this file calls the splitters and the core,
 * neither calls it.
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

#define DEFAULT_MAX_EMPTY_LISTED 10

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

/* rec_open, and rec_read_header (pick 0: a CSV/TSV header is read, no
 * column is looked for). */
static struct rec_reader *open_reader(const char *path, int fd, enum mol_format fmt, const struct rec_options *opt,
                                      int pick, struct se3_error *err) {
  if (fmt == MOL_FMT_UNKNOWN) fmt = rec_format_from_path(path);
  if (fmt == MOL_FMT_UNKNOWN) {
    se3_error_set(err, SE3_ERR_INPUT, "unknown molecule format (name it with format:)");
    se3_error_at(err, path, 0, 0);
    if (fd >= 0) close(fd);
    return NULL;
  }
  struct rec_reader *r = calloc(1, sizeof *r);
  if (!r || !(r->path = strdup(path)) || !(r->buf = malloc(REC_BUF_SIZE))) {
    se3_error_set(err, SE3_ERR_MEMORY, "out of memory");
    se3_error_at(err, path, 0, 0);
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
  r->gz = fd >= 0 ? rec_adopt_regular(fd, path, err) : rec_open_regular(path, err);
  if (!r->gz) {
    rec_close(r);
    return NULL;
  }
  gzbuffer(r->gz, 256 * 1024);
  if (fmt == MOL_FMT_CSV || fmt == MOL_FMT_TSV) {
    if (rec_csv_header(r, opt, pick, err) != 0) {
      rec_close(r);
      return NULL;
    }
  }
  return r;
}

struct rec_reader *rec_open(const char *path, enum mol_format fmt, const struct rec_options *opt,
                            struct se3_error *err) {
  return open_reader(path, -1, fmt, opt, 1, err);
}

struct rec_reader *rec_open_fd(int fd, const char *name, enum mol_format fmt, const struct rec_options *opt,
                               struct se3_error *err) {
  if (fd < 0) {
    se3_error_set(err, SE3_ERR_IO, "cannot open: %s", strerror(EBADF));
    se3_error_at(err, name, 0, 0);
    return NULL;
  }
  return open_reader(name, fd, fmt, opt, 1, err);
}

int rec_read_header(const char *path, enum mol_format fmt, char ***cols, int *n, struct se3_error *err) {
  *cols = NULL;
  *n = 0;
  if (fmt != MOL_FMT_CSV && fmt != MOL_FMT_TSV) {
    se3_error_set(err, SE3_ERR_INPUT, "not a CSV or TSV file");
    se3_error_at(err, path, 0, 0);
    return -1;
  }
  struct rec_reader *r = open_reader(path, -1, fmt, NULL, 0, err);
  if (!r) return -1;
  *cols = r->cols; /* the reader's, handed over */
  *n = r->n_cols;
  r->cols = NULL;
  r->n_cols = 0;
  rec_close(r);
  return 0;
}

int rec_next(struct rec_reader *r, struct rec *out, struct se3_error *err) {
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
    se3_error_set(&r->fail, SE3_ERR_INPUT, "unknown molecule format");
    se3_error_at(&r->fail, r->path, 0, 0);
    k = -1;
  }
  if (k < 0) {
    if (err) *err = r->fail;
    memset(out, 0, sizeof *out);
    r->done = 1;
  } else if (k == 0) {
    r->done = 1;
  }
  return k;
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

int rec_scan(const char *path, enum mol_format fmt, const struct rec_options *opt, struct rec_stats *st,
             struct se3_error *err) {
  memset(st, 0, sizeof *st);
  struct rec_reader *r = rec_open(path, fmt, opt, err);
  if (!r) return -1;
  struct rec rec;
  int k;
  while ((k = rec_next(r, &rec, err)) == 1) {}
  rec_get_stats(r, st);
  rec_close(r);
  return k < 0 ? -1 : 0;
}

int64_t rec_count(const char *path, enum mol_format fmt, const struct rec_options *opt, struct se3_error *err) {
  struct rec_stats st;
  return rec_scan(path, fmt, opt, &st, err) != 0 ? -1 : st.n_out;
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
