/* records_sniff.c — which format a file's first bytes look like
 * (rec_sniff, rec_sniff_file). The signs of every format are kept side by
 * side here, not in the formats' files: they are weighed against each
 * other (records.h gives the order), and are text checks on a head held in
 * memory, not a reader's splitting.
 */
#define _GNU_SOURCE /* memmem */
#include "chem/records_internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

static int has_prefix(const char *p, size_t n, const char *w) {
  size_t wn = strlen(w);
  return n >= wn && memcmp(p, w, wn) == 0;
}

/* A V2000/V3000 counts line: digits and blanks, then the version. */
static int sdf_counts_line(const char *p, size_t n) {
  size_t t = rec_trimmed_len(p, n);
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
  struct rec_lines it = {head, head + n};
  const char *p;
  size_t len;
  int nonblank = 0; /* non-blank lines so far */
  while (rec_line_next(&it, &p, &len)) {
    if (n >= SNIFF_BYTES && it.s > it.end) break; /* the line cut at the end of the head */
    int blank = rec_is_blank(p, len);
    if (!blank) nonblank++;
    if (has_prefix(p, len, "@<TRIPOS>")) m |= 1u << MOL_FMT_MOL2;
    if (rec_line_is(&(struct piece){p, len, 1, 0, 0, 0}, "M  END") ||
        rec_line_is(&(struct piece){p, len, 1, 0, 0, 0}, "$$$$") || sdf_counts_line(p, len))
      m |= 1u << MOL_FMT_SDF;
    if ((has_prefix(p, len, "ATOM  ") || has_prefix(p, len, "HETATM")) && pdb_coords(p, len)) m |= 1u << MOL_FMT_PDB;
    if (nonblank == 1 && !blank) {
      if (has_prefix(p, len, "HEADER") || has_prefix(p, len, "COMPND") || has_prefix(p, len, "CRYST1") ||
          has_prefix(p, len, "REMARK"))
        m |= 1u << MOL_FMT_PDB;
      if (header_has_smiles(p, len, ',')) m |= 1u << MOL_FMT_CSV;
      if (header_has_smiles(p, len, '\t')) m |= 1u << MOL_FMT_TSV;
      long v;
      if (rec_bare_int(p, len, &v) && v > 0) {
        const char *p2, *p3;
        size_t n2, n3;
        struct rec_lines peek = it;
        if (rec_line_next(&peek, &p2, &n2) && rec_line_next(&peek, &p3, &n3) && xyz_atom_line(p3, n3))
          m |= 1u << MOL_FMT_XYZ;
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

int rec_sniff_file(const char *path, enum mol_format prefer, enum mol_format *out, int *nonblank,
                   struct se3_error *err) {
  *out = MOL_FMT_UNKNOWN;
  *nonblank = 0;
  gzFile gz = rec_open_regular(path, err);
  if (!gz) return -1;
  char *head = malloc(SNIFF_BYTES);
  if (!head) {
    gzclose(gz);
    se3_error_set(err, SE3_ERR_MEMORY, "out of memory");
    se3_error_at(err, path, 0, 0);
    return -1;
  }
  size_t n = 0;
  while (n < SNIFF_BYTES) {
    int got = gzread(gz, head + n, (unsigned)(SNIFF_BYTES - n));
    if (got <= 0) {
      int zerr;
      const char *msg = gzerror(gz, &zerr);
      if (got < 0 || (zerr != Z_OK && zerr != Z_STREAM_END)) {
        rec_read_error(err, path, 0, 0, zerr, msg);
        free(head);
        gzclose(gz);
        return -1;
      }
      break;
    }
    n += (size_t)got;
  }
  gzclose(gz);
  *nonblank = !rec_is_blank(head, n);
  *out = rec_sniff(head, n, prefer);
  free(head);
  return 0;
}
