/* cells.c — a cell list over a molecule's atoms (see cells.h). */
#include "chem/cells.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void cells_free(struct cells *c) {
  free(c->start);
  free(c->atom);
  free(c->pos);
  free(c->cell);
  memset(c, 0, sizeof *c);
}

static int64_t cell_coord(double v, double min, double inv) {
  double c = floor((v - min) * inv);
  if (!(c >= 0)) c = 0;       /* only for absurd scales (inv = inf, v = min) */
  if (c > 4.0e15) c = 4.0e15; /* far outliers share the last cell: extra tests, nothing missed */
  return (int64_t)c;
}

static uint32_t cell_bucket(int64_t x, int64_t y, int64_t z, uint32_t mask) {
  uint64_t h = (uint64_t)x * 0x9E3779B97F4A7C15ull;
  h ^= (uint64_t)y * 0xBF58476D1CE4E5B9ull;
  h ^= (uint64_t)z * 0x94D049BB133111EBull;
  h ^= h >> 31;
  h *= 0xD6E8FEB86659FD93ull;
  h ^= h >> 32;
  return (uint32_t)h & mask;
}

int cells_build(struct cells *c, const struct mol *m, double cutoff) {
  int n = m->n_atoms;
  memset(c, 0, sizeof *c);
  c->minx = c->miny = c->minz = INFINITY;
  for (int i = 0; i < n; i++) {
    const struct mol_atom *a = &m->atoms[i];
    if (a->x < c->minx) c->minx = a->x;
    if (a->y < c->miny) c->miny = a->y;
    if (a->z_ < c->minz) c->minz = a->z_;
  }
  c->inv = 1.0 / cutoff;
  uint32_t size = 1;
  while (size < 2u * (uint32_t)n && size < (1u << 30))
    size <<= 1;
  c->mask = size - 1;
  c->start = calloc((size_t)size + 1, sizeof *c->start);
  c->atom = malloc((size_t)(n ? n : 1) * sizeof *c->atom);
  c->pos = malloc((size_t)(n ? n : 1) * 3 * sizeof *c->pos);
  c->cell = malloc((size_t)(n ? n : 1) * 3 * sizeof *c->cell);
  uint32_t *bucket = malloc((size_t)(n ? n : 1) * sizeof *bucket);
  uint32_t *fill = malloc((size_t)size * sizeof *fill);
  if (!c->start || !c->atom || !c->pos || !c->cell || !bucket || !fill) {
    free(bucket);
    free(fill);
    cells_free(c);
    return -1;
  }
  for (int i = 0; i < n; i++) {
    const struct mol_atom *a = &m->atoms[i];
    int64_t *cc = &c->cell[3 * i];
    cc[0] = cell_coord(a->x, c->minx, c->inv);
    cc[1] = cell_coord(a->y, c->miny, c->inv);
    cc[2] = cell_coord(a->z_, c->minz, c->inv);
    bucket[i] = cell_bucket(cc[0], cc[1], cc[2], c->mask);
    c->start[bucket[i] + 1]++;
  }
  for (uint32_t k = 0; k < size; k++)
    c->start[k + 1] += c->start[k];
  memcpy(fill, c->start, (size_t)size * sizeof *fill);
  for (int i = 0; i < n; i++) {
    uint32_t t = fill[bucket[i]]++;
    c->atom[t] = i;
    c->pos[3 * t] = m->atoms[i].x;
    c->pos[3 * t + 1] = m->atoms[i].y;
    c->pos[3 * t + 2] = m->atoms[i].z_;
  }
  free(bucket);
  free(fill);
  return 0;
}

int cells_around(const struct cells *c, int i, uint32_t out[27]) {
  const int64_t *cc = &c->cell[3 * i];
  int n = 0;
  for (int dx = -1; dx <= 1; dx++)
    for (int dy = -1; dy <= 1; dy++)
      for (int dz = -1; dz <= 1; dz++) {
        uint32_t k = cell_bucket(cc[0] + dx, cc[1] + dy, cc[2] + dz, c->mask);
        int dup = 0;
        for (int s = 0; s < n && !dup; s++)
          dup = out[s] == k;
        if (!dup) out[n++] = k;
      }
  return n;
}
