/* records_pdb.c — PDB files: records end at an END or ENDMDL line, and
 * those without an ATOM or HETATM line are dropped.
 */
#include "chem/records_internal.h"

#include <string.h>

/* The record name (columns 1-6) is word. */
static int pdb_record_is(const struct piece *l, const char *word) {
  size_t wn = strlen(word);
  if (l->cont || l->n < wn || memcmp(l->p, word, wn) != 0) return 0;
  if (l->n == wn) return 1;
  char c = l->p[wn];
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

int rec_next_pdb(struct rec_reader *r, struct rec *out) {
  struct piece l;
  int64_t start = 0;
  int has_atoms = 0;
  rec_text_reset(r);
  for (;;) {
    int k = rec_next_piece(r, &l);
    if (k < 0) return -1;
    if (k == 0) return start && has_atoms ? rec_emit(r, out, start, NULL) : 0;
    if (!start) start = l.no;
    if (rec_piece_add(r, &l) != 0) return rec_oom(r);
    if (l.cont) continue;
    if (l.n >= 4 && (memcmp(l.p, "ATOM", 4) == 0 || (l.n >= 6 && memcmp(l.p, "HETATM", 6) == 0))) has_atoms = 1;
    if (l.p[0] == 'E' && (pdb_record_is(&l, "END") || pdb_record_is(&l, "ENDMDL"))) {
      if (has_atoms) return rec_emit(r, out, start, NULL);
      rec_text_reset(r);
      start = 0;
    }
  }
}
