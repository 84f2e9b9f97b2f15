/* records_xyz.c — XYZ files: frames of an atom-count line, a comment line
 * and that many atom lines; a frame cut short is an error record, and so is
 * each run of lines where a count was expected.
 */
#include "chem/records_internal.h"

#include <stdio.h>

/* A line holding only a non-negative integer (with blanks around it). */
int rec_bare_int(const char *p, size_t n, long *v) {
  size_t i = 0;
  n = rec_trimmed_len(p, n);
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

int rec_next_xyz(struct rec_reader *r, struct rec *out) {
  struct piece l;
  int k;
  long n_atoms = 0;
again:
  rec_text_reset(r);
  for (;;) { /* the count line; blank lines between frames are skipped */
    k = rec_next_piece(r, &l);
    if (k <= 0) return k;
    if (!l.cont && l.complete && rec_is_blank(l.p, l.n)) continue;
    if (!l.cont && l.complete && rec_bare_int(l.p, l.n, &n_atoms)) break;
    /* Garbage: one error record, then resync at the next bare integer line. */
    int64_t bad = l.no;
    size_t show = rec_trimmed_len(l.p, l.n);
    char msg[160];
    snprintf(msg, sizeof msg, "line %lld: expected an atom count, got '%.*s%s'", (long long)bad,
             (int)(show > 40 ? 40 : show), l.p, show > 40 ? "..." : "");
    for (;;) {
      k = rec_next_piece(r, &l);
      if (k < 0) return -1;
      if (k == 0) break;
      if (!l.cont && l.complete && rec_bare_int(l.p, l.n, &n_atoms)) {
        rec_unread_piece(r);
        break;
      }
    }
    return rec_emit(r, out, bad, msg);
  }
  int64_t start = l.no;
  if (rec_piece_add(r, &l) != 0) return rec_oom(r);
  if (n_atoms == 0) { /* the count line says 0 atoms: its comment line, then the next frame */
    int64_t no;
    if (rec_read_line(r, &no) < 0) return -1;
    int e = rec_empty_record(r, out, start, "empty record (an XYZ frame of 0 atoms)");
    if (e) return e;
    goto again;
  }
  long want = n_atoms + 1, got = 0; /* comment line + atom lines */
  while (got < want) {
    int64_t no;
    k = rec_read_line(r, &no);
    if (k < 0) return -1;
    if (k == 0) break;
    got++;
  }
  if (got < want) {
    char msg[160];
    snprintf(msg, sizeof msg, "truncated record: %ld atoms announced, %ld atom lines found", n_atoms,
             got > 0 ? got - 1 : 0);
    return rec_emit(r, out, start, msg);
  }
  return rec_emit(r, out, start, NULL);
}
