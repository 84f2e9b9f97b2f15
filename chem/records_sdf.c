/* records_sdf.c — SD files (.sdf, .mol): records, each ended by a "$$$$"
 * line, refused whole when they hold more than one molecule; and the SD tag
 * names of a file's first records (rec_sdf_tags), read by a text scan of
 * their own, with no reader.
 */
#include "chem/records_internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

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
  if (n_end < 2 || r->overflow || r->nul_line) return NULL; /* rec_emit() names those */
  snprintf(r->err, sizeof r->err,
           "SD record %lld (line %lld) holds %d molecules (%d \"M  END\" lines, the first at line %lld, the last at "
           "line %lld): the second starts at line %lld, after a $$$$ line damaged or missing; Open Babel would read "
           "only the first",
           (long long)r->n_rec + 1, (long long)start, n_end, n_end, (long long)first_end, (long long)last_end,
           (long long)first_end + 1);
  return r->err;
}

int rec_next_sdf(struct rec_reader *r, struct rec *out) {
  struct piece l;
  for (;;) {
    int64_t start = 0, first_end = 0, last_end = 0;
    int blank = 1, n_end = 0;
    rec_text_reset(r);
    for (;;) {
      int k = rec_next_piece(r, &l);
      if (k < 0) return -1;
      /* the end: a tail of blank lines is no record, however long (blank
       * is kept for every piece, those past the cap too) */
      if (k == 0) return start && !blank ? rec_emit(r, out, start, sdf_check(r, start, n_end, first_end, last_end)) : 0;
      if (!start) start = l.no;
      if (l.p[0] == '$' && rec_line_is(&l, "$$$$")) {
        if (!blank || r->overflow) {
          if (rec_piece_add(r, &l) != 0) return rec_oom(r);
          return rec_emit(r, out, start, sdf_check(r, start, n_end, first_end, last_end));
        }
        int e = rec_empty_record(r, out, start, "empty record (nothing before its $$$$ line)");
        if (e) return e;
        break; /* counted only: on to the next record */
      }
      if (blank && !rec_is_blank(l.p, l.n)) blank = 0;
      if (l.p[0] == 'M' && is_m_end(&l)) {
        if (!n_end++) first_end = l.no;
        last_end = l.no;
      }
      if (rec_piece_add(r, &l) != 0) return rec_oom(r);
    }
  }
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
                 struct se3_error *err) {
  *tags = NULL;
  *n_tags = 0;
  *n_records = 0;
  gzFile gz = rec_open_regular(path, err);
  if (!gz) return -1;
  enum { LINE = 4096 };
  char *buf = malloc(LINE);
  if (!buf) {
    gzclose(gz);
    se3_error_set(err, SE3_ERR_MEMORY, "out of memory");
    se3_error_at(err, path, 0, 0);
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
    size_t t = rec_trimmed_len(buf, len);
    if (t == 4 && memcmp(buf, "$$$$", 4) == 0) {
      (*n_records)++;
      in_data = in_value = content = 0;
      continue;
    }
    if (!rec_is_blank(buf, len)) content = 1;
    if (!in_data) {
      in_data = len >= 6 && memcmp(buf, "M  END", 6) == 0 && (t == 6 || isspace((unsigned char)buf[6]));
    } else if (in_value) {
      if (t == 0) in_value = 0; /* a blank line ends the value */
    } else if (memchr(buf, '<', t)) {
      if (add_tag(tags, n_tags, &cap, buf, t) != 0) {
        se3_error_set(err, SE3_ERR_MEMORY, "out of memory");
        se3_error_at(err, path, 0, 0);
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
  if (rc == 0 && zerr != Z_OK && zerr != Z_STREAM_END) rc = rec_read_error(err, path, 0, *n_records + 1, zerr, msg);
  free(buf);
  gzclose(gz);
  if (rc != 0) {
    rec_free_names(*tags, *n_tags);
    *tags = NULL;
    *n_tags = 0;
  }
  return rc;
}
