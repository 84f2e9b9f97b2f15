/* cells.h — a cell list over a molecule's atoms, for neighbour searches in
 * O(N): the radius graph (graph.c) and the distance checks (mol.c).
 *
 * A spatial hash: atom i lies in cell floor((x_i - min) / cutoff) per axis;
 * cell (cx,cy,cz) goes to bucket hash(cx,cy,cz) & mask, with a table of at
 * least 2N buckets. Atoms are laid out bucket by bucket (counting sort, index
 * order within a bucket) with a copy of their coordinates beside them. Two
 * cells sharing a bucket only cost extra distance tests, never a missed pair,
 * and an atom far from the rest costs no memory (unlike a dense grid).
 */
#ifndef SE3_CELLS_H
#define SE3_CELLS_H

#include <stdint.h>
#include "chem/mol.h"

struct cells {
  double minx, miny, minz, inv;
  uint32_t mask;
  uint32_t *start; /* mask + 2 entries: bucket k holds slots start[k] .. start[k+1) */
  int32_t *atom;   /* atom index of each slot */
  double *pos;     /* 3 per slot: the coordinates of that atom */
  int64_t *cell;   /* 3 per atom: its cell */
};

/* Build the list with cells of side `cell` (Å). 0, or -1 on allocation failure. */
int cells_build(struct cells *c, const struct mol *m, double cell);
void cells_free(struct cells *c);
/* The distinct buckets of the 27 cells around atom i (out: up to 27); returns
 * their count. Slots start[k] .. start[k+1) of each bucket k hold its atoms. */
int cells_around(const struct cells *c, int i, uint32_t out[27]);

#endif
