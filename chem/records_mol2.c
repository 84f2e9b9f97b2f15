/* records_mol2.c — MOL2 (Tripos) files: records start at an
 * @<TRIPOS>MOLECULE line; stray text before the first is one error record,
 * and a record whose ATOM section does not match its count line is another.
 */
#include "chem/records_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_mol2_start(const struct piece *l) {
  static const char tag[] = "@<TRIPOS>MOLECULE";
  return !l->cont && l->n >= sizeof tag - 1 && l->p[0] == '@' && rec_line_is(l, tag);
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
                : (size_t)(e - p) >= 13 && !strncmp(p, "@<TRIPOS>ATOM", 13)   ? 2
                                                                              : 3;
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

int rec_next_mol2(struct rec_reader *r, struct rec *out) {
  struct piece l;
  int k, comment = 0;
  for (;;) {
    rec_text_reset(r);
    do { /* skip to the next MOLECULE line */
      k = rec_next_piece(r, &l);
      if (k <= 0) return k;
      if (!l.cont) comment = l.p[0] == '#';
      if (!r->mol2_started && !r->mol2_stray && !comment && !is_mol2_start(&l) && !rec_is_blank(l.p, l.n))
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
        rec_unread_piece(r);
        snprintf(r->err, sizeof r->err,
                 "line %lld: text before the first @<TRIPOS>MOLECULE line (line %lld) that is neither blank nor "
                 "a comment: a record whose @<TRIPOS>MOLECULE line is damaged? it is not read",
                 (long long)r->mol2_stray, (long long)l.no);
        return rec_emit(r, out, r->mol2_stray, r->err);
      }
    }
    int64_t start = l.no;
    int blank = 1;
    if (rec_piece_add(r, &l) != 0) return rec_oom(r);
    for (;;) {
      k = rec_next_piece(r, &l);
      if (k < 0) return -1;
      if (k == 0 || is_mol2_start(&l)) {
        if (k) rec_unread_piece(r);
        if (!blank || r->overflow)
          return rec_emit(r, out, start, r->overflow || r->nul_line ? NULL : mol2_check(r, start));
        int e = rec_empty_record(r, out, start, "empty record (nothing after its @<TRIPOS>MOLECULE line)");
        if (e) return e;
        break;
      }
      if (blank && !rec_is_blank(l.p, l.n)) blank = 0;
      if (rec_piece_add(r, &l) != 0) return rec_oom(r);
    }
  }
}
