/* shape.c — bounds for bonds, 1-3 distances and aromatic rings (shape.h). */
#include "chem/shape.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- bond lengths ------------------------------------------------------ */

/* Ranges (Å) a bond between two elements takes in crystal structures of
 * organic molecules, by order: single, double, triple, aromatic (0: the
 * table has none; the radii decide). Wide on purpose: a single C-N is an
 * amide's 1.33 as well as an amine's 1.47; a single C-O a carboxylate's
 * 1.25 as well as an ether's 1.43; a single N-O a nitro group's 1.22 as
 * well as a hydroxylamine's 1.45. Sources: the usual averages of
 * crystallographic tables of bond lengths (Allen et al. 1987), widened to
 * the spread of the groups they list. */
struct bond_row {
  unsigned char z1, z2; /* z1 <= z2 */
  float r[4][2];        /* [order - 1 or 3 for aromatic][lo, hi] */
};
static const struct bond_row BONDS[] = {
    {6, 6, {{1.42f, 1.59f}, {1.30f, 1.38f}, {1.17f, 1.22f}, {1.35f, 1.44f}}},
    {6, 7, {{1.32f, 1.50f}, {1.25f, 1.34f}, {1.13f, 1.17f}, {1.31f, 1.40f}}},
    {6, 8, {{1.23f, 1.47f}, {1.19f, 1.27f}, {0, 0}, {1.33f, 1.40f}}},
    {6, 9, {{1.31f, 1.40f}, {0, 0}, {0, 0}, {0, 0}}},
    {6, 14, {{1.83f, 1.91f}, {0, 0}, {0, 0}, {0, 0}}},
    {6, 15, {{1.74f, 1.87f}, {1.64f, 1.72f}, {0, 0}, {1.70f, 1.78f}}},
    {6, 16, {{1.71f, 1.86f}, {1.59f, 1.72f}, {0, 0}, {1.66f, 1.76f}}},
    {6, 17, {{1.70f, 1.80f}, {0, 0}, {0, 0}, {0, 0}}},
    {6, 34, {{1.88f, 1.98f}, {1.75f, 1.85f}, {0, 0}, {1.83f, 1.90f}}},
    {6, 35, {{1.85f, 1.97f}, {0, 0}, {0, 0}, {0, 0}}},
    {6, 53, {{2.04f, 2.18f}, {0, 0}, {0, 0}, {0, 0}}},
    {5, 6, {{1.52f, 1.62f}, {0, 0}, {0, 0}, {1.48f, 1.56f}}},
    {7, 7, {{1.30f, 1.47f}, {1.10f, 1.30f}, {1.08f, 1.13f}, {1.28f, 1.40f}}},
    {7, 8, {{1.20f, 1.47f}, {1.18f, 1.27f}, {0, 0}, {1.33f, 1.44f}}},
    {7, 9, {{1.35f, 1.45f}, {0, 0}, {0, 0}, {0, 0}}},
    {7, 15, {{1.57f, 1.72f}, {1.52f, 1.62f}, {0, 0}, {0, 0}}},
    {7, 16, {{1.56f, 1.73f}, {1.49f, 1.62f}, {0, 0}, {1.56f, 1.70f}}},
    {7, 17, {{1.68f, 1.80f}, {0, 0}, {0, 0}, {0, 0}}},
    {7, 34, {{1.78f, 1.90f}, {0, 0}, {0, 0}, {1.77f, 1.90f}}},
    {5, 7, {{1.38f, 1.62f}, {0, 0}, {0, 0}, {1.38f, 1.46f}}},
    {7, 14, {{1.68f, 1.78f}, {0, 0}, {0, 0}, {0, 0}}},
    {8, 8, {{1.40f, 1.50f}, {0, 0}, {0, 0}, {0, 0}}},
    {8, 15, {{1.45f, 1.66f}, {1.44f, 1.52f}, {0, 0}, {0, 0}}},
    {8, 16, {{1.40f, 1.68f}, {1.40f, 1.51f}, {0, 0}, {1.60f, 1.72f}}},
    {5, 8, {{1.32f, 1.52f}, {0, 0}, {0, 0}, {1.33f, 1.40f}}},
    {8, 14, {{1.59f, 1.68f}, {0, 0}, {0, 0}, {0, 0}}},
    {8, 34, {{1.58f, 1.82f}, {1.58f, 1.68f}, {0, 0}, {0, 0}}},
    {16, 16, {{1.99f, 2.10f}, {0, 0}, {0, 0}, {0, 0}}},
    {15, 16, {{1.95f, 2.12f}, {1.86f, 1.98f}, {0, 0}, {0, 0}}},
    {34, 34, {{2.28f, 2.38f}, {0, 0}, {0, 0}, {0, 0}}},
};

/* Covalent radii (Cordero et al. 2008, Å) of the elements judged: the
 * range of a pair the table lacks. 0: not judged. */
static double radius(int z) {
  switch (z) {
  case 1: return 0.31;
  case 5: return 0.84;
  case 6: return 0.76;
  case 7: return 0.71;
  case 8: return 0.66;
  case 9: return 0.57;
  case 14: return 1.11;
  case 15: return 1.07;
  case 16: return 1.05;
  case 17: return 1.02;
  case 32: return 1.20;
  case 33: return 1.19;
  case 34: return 1.20;
  case 35: return 1.20;
  case 52: return 1.38;
  case 53: return 1.39;
  default: return 0;
  }
}

/* The range of a bond; 0 when it is not judged (an element outside the set). */
static int bond_range(int za, int zb, int order, double *lo, double *hi) {
  double ra = radius(za), rb = radius(zb);
  if (!ra || !rb) return 0;
  int z1 = za < zb ? za : zb, z2 = za < zb ? zb : za;
  int k = order == MOL_BOND_AROMATIC ? 3 : order >= 1 && order <= 3 ? order - 1 : 0;
  for (size_t i = 0; i < sizeof BONDS / sizeof BONDS[0]; i++)
    if (BONDS[i].z1 == z1 && BONDS[i].z2 == z2 && BONDS[i].r[k][1] > 0) {
      *lo = BONDS[i].r[k][0];
      *hi = BONDS[i].r[k][1];
      return 1;
    }
  /* the radii's sum, shortened for the order (bonds to hydrogen: the
   * generator places them at this sum; X-ray ones are shorter, which the
   * input's tolerance allows) */
  static const double shorten[4] = {1.0, 0.90, 0.86, 0.95};
  double len = (ra + rb) * shorten[k];
  double band = z1 == 1 ? 0.08 : 0.12;
  *lo = len - band;
  *hi = len + band;
  return 1;
}

/* ---- angles ------------------------------------------------------------ */

enum geom { G_SKIP = 0, G_SP, G_SP2, G_SP3, G_EITHER, G_BENT /* S, Se, P */ };

struct atom_info {
  int degree;   /* explicit neighbours */
  int total;    /* with implicit hydrogens */
  int n_double, n_triple, n_arom;
  enum geom g;
};

static int organic(int z) { return radius(z) > 0; }

/* Ideal angle and its half width (degrees) for a pair at centre j in a
 * ring of `ring` atoms (0: in none of up to 8). */
static void ring_angle(const struct mol *m, const struct atom_info *ai, int j, int ring, double *t, double *w) {
  int z = m->atoms[j].z;
  enum geom g = ai[j].g;
  if (ring == 3) {
    *t = 60, *w = 4;
    return;
  }
  if (ring == 4) {
    *t = 89, *w = 6;
    return;
  }
  if ((z == 16 || z == 34) && ring == 5) { /* thiophene 92°, thiolane 93° */
    *t = 93, *w = 8;
    return;
  }
  if (g == G_SP2) {
    if (ring == 5) *t = 108, *w = 7;
    else if (ring == 6) *t = 120, *w = 6;
    else *t = 180.0 * (ring - 2) / ring, *w = 12;
    return;
  }
  if (g == G_SP) {
    *t = 160, *w = 25;
    return;
  }
  if (g == G_EITHER) {
    if (ring == 5) *t = 107, *w = 8;
    else if (ring == 6) *t = 116, *w = 9;
    else *t = 116, *w = 12;
    return;
  }
  if (g == G_BENT && ring >= 6) {
    *t = 101, *w = 10;
    return;
  }
  /* sp3 */
  if (ring == 5) *t = 104.5, *w = 7;
  else if (ring == 6) *t = 111, *w = 7;
  else *t = 114, *w = 9;
}

/* Ideal angle and half width of a pair at j outside small rings, given
 * the ring angles at j (sum, count of ring pairs) and its smallest ring. */
static void open_angle(const struct mol *m, const struct atom_info *ai, int j, double ring_sum, int ring_pairs,
                       int smallest, double *t, double *w) {
  (void)m;
  switch (ai[j].g) {
  case G_SP:
    *t = 180, *w = 10;
    return;
  case G_SP2:
    if (ai[j].total == 3 && ring_pairs > 0 && ring_pairs < 3) {
      *t = (360 - ring_sum) / (3 - ring_pairs);
      if (*t < 90) *t = 90;
    } else {
      *t = 120;
    }
    *w = 6;
    return;
  case G_EITHER:
    *t = 115, *w = 11;
    return;
  case G_BENT:
    if (ai[j].total >= 4) *t = 109.5, *w = 12;  /* sulfonyl, phosphate */
    else if (ai[j].total == 3) *t = 104, *w = 10; /* sulfoxide, phosphine */
    else *t = 101, *w = 9;                        /* thioether, phosphinite */
    return;
  default:
    if (smallest == 3) *t = 117, *w = 9;
    else if (smallest == 4) *t = 114, *w = 9;
    else *t = 110.5, *w = 6.5; /* crystal structures: C-C-C 111 ± 3, H-C-H 108 */
    return;
  }
}

/* ---- the bounds --------------------------------------------------------- */

struct pair {
  int a, b, c; /* ends; c: the centre of an angle, -1 for a bond */
  int in_ring;
  float lo, hi; /* a bond's range (Å); an angle's (degrees), whose distances
                   follow from the two bonds as they are, held within their
                   own ranges (shape_check) */
  float ua, ub, va, vb; /* an angle's: the ranges of its bonds a-c and b-c */
};
struct ring {
  int n;
  int at[8];
};
struct shape_bounds {
  int n_atoms;
  int n_pairs, n_bonds; /* the first n_bonds pairs are bonds */
  struct pair *pairs;
  int n_rings;
  struct ring *rings;
};

/* Adjacency of m as offsets into one array. */
struct adj {
  int *start, *nb, *order;
};
static int adj_make(const struct mol *m, struct adj *g) {
  int n = m->n_atoms;
  g->start = calloc((size_t)n + 1, sizeof *g->start);
  g->nb = malloc(2 * (size_t)(m->n_bonds ? m->n_bonds : 1) * sizeof *g->nb);
  g->order = malloc(2 * (size_t)(m->n_bonds ? m->n_bonds : 1) * sizeof *g->order);
  int *fill = calloc((size_t)n + 1, sizeof *fill);
  if (!g->start || !g->nb || !g->order || !fill) {
    free(fill);
    return -1;
  }
  for (int k = 0; k < m->n_bonds; k++)
    g->start[m->bonds[k].a + 1]++, g->start[m->bonds[k].b + 1]++;
  for (int i = 0; i < n; i++)
    g->start[i + 1] += g->start[i];
  for (int k = 0; k < m->n_bonds; k++) {
    int a = (int)m->bonds[k].a, b = (int)m->bonds[k].b, o = m->bonds[k].order;
    g->nb[g->start[a] + fill[a]] = b, g->order[g->start[a] + fill[a]++] = o;
    g->nb[g->start[b] + fill[b]] = a, g->order[g->start[b] + fill[b]++] = o;
  }
  free(fill);
  return 0;
}
static void adj_free(struct adj *g) {
  free(g->start);
  free(g->nb);
  free(g->order);
}

/* Shortest path from `from` to `to` avoiding atom `skip` (and the direct
 * bond from-to when skip < 0), of at most max_bonds bonds, only through
 * aromatic bonds when arom_only and only through atoms flagged in `through`
 * when it is given; the path's atoms into path (from first) when path is
 * given. Returns its length in bonds, 0 when none.
 * dist and prev are scratch of n entries, dist all -1 on entry and left so. */
static int short_path(const struct adj *g, const char *through, int from, int to, int skip, int max_bonds,
                      int arom_only, int *dist, int *prev, int *queue, int *path) {
  int head = 0, tail = 0, found = 0;
  dist[from] = 0;
  prev[from] = -1;
  queue[tail++] = from;
  while (head < tail && !found) {
    int u = queue[head++];
    if (dist[u] >= max_bonds) continue;
    for (int e = g->start[u]; e < g->start[u + 1]; e++) {
      int v = g->nb[e];
      if (v == skip || dist[v] >= 0 || (through && !through[v] && v != to)) continue;
      if (arom_only && g->order[e] != MOL_BOND_AROMATIC) continue;
      if (skip < 0 && u == from && v == to) continue; /* not the bond itself */
      dist[v] = dist[u] + 1;
      prev[v] = u;
      queue[tail++] = v;
      if (v == to) {
        found = 1;
        break;
      }
    }
  }
  int len = found ? dist[to] : 0;
  if (found && path)
    for (int v = to, k = len; v >= 0; v = prev[v], k--)
      path[k] = v;
  for (int k = 0; k < tail; k++)
    dist[queue[k]] = -1;
  return len;
}

static double law_of_cosines(double a, double b, double deg) {
  double t = deg * M_PI / 180.0;
  double d2 = a * a + b * b - 2 * a * b * cos(t);
  return d2 > 0 ? sqrt(d2) : 0;
}

/* shape_bounds_make's work: the bonds as adjacency, each atom's type, the
 * searches' scratch (short_path: dist all -1 between searches), and each
 * bond's length range, whether it was judged and whether it is in a ring. */
struct bounds_work {
  const struct mol *m;
  int n;
  struct adj g;
  struct atom_info *ai;
  int *dist, *prev, *queue;
  double *blo, *bhi;
  char *bring, *judged;
};

/* Each atom's bonds and geometry (enum geom). */
static void atom_types(const struct mol *m, const struct adj *gp, struct atom_info *ai) {
  const int n = m->n_atoms;
  const struct adj g = *gp;
  for (int i = 0; i < n; i++) {
    struct atom_info *a = &ai[i];
    for (int e = g.start[i]; e < g.start[i + 1]; e++) {
      a->degree++;
      a->n_double += g.order[e] == 2;
      a->n_triple += g.order[e] == 3;
      a->n_arom += g.order[e] == MOL_BOND_AROMATIC;
    }
    a->total = a->degree + m->atoms[i].implicit_h;
  }
  for (int i = 0; i < n; i++) {
    struct atom_info *a = &ai[i];
    int z = m->atoms[i].z;
    if (!organic(z) || a->total > 4 || a->degree < 2) {
      a->g = G_SKIP;
    } else if (z == 15 || z == 16 || z == 34 || z == 33 || z == 52) {
      a->g = m->atoms[i].aromatic || a->n_arom ? G_SP2 : G_BENT;
    } else if (a->n_triple || (a->n_double >= 2 && a->total == 2)) {
      a->g = G_SP;
    } else if (m->atoms[i].aromatic || a->n_arom || a->n_double) {
      a->g = a->total <= 3 ? G_SP2 : G_EITHER;
    } else if (z == 5 && a->total == 3) {
      a->g = G_SP2;
    } else if ((z == 7 || z == 8) && a->total <= 3) {
      int conj = 0;
      for (int e = g.start[i]; e < g.start[i + 1]; e++) {
        int v = g.nb[e];
        conj |= v != i && (m->atoms[v].aromatic || ai[v].n_double || ai[v].n_triple || ai[v].n_arom);
      }
      a->g = conj || m->atoms[i].charge != 0 ? G_EITHER : G_SP3;
    } else if (z == 6 && m->atoms[i].charge != 0) {
      a->g = G_EITHER; /* a carbocation or carbanion: planar or not */
    } else {
      a->g = G_SP3;
    }
  }
}

/* The pairs' room (bonds and angles), then the bonds' pairs: 0, or -1 out
 * of memory. */
static int bond_pairs(struct bounds_work *bw, struct shape_bounds *s) {
  const struct mol *m = bw->m;
  const int n = bw->n;
  const struct atom_info *ai = bw->ai;
  size_t cap = (size_t)m->n_bonds + 1;
  for (int j = 0; j < n; j++)
    cap += (size_t)ai[j].degree * (size_t)(ai[j].degree - 1) / 2;
  s->pairs = malloc(cap * sizeof *s->pairs);
  if (!s->pairs) return -1;
  double *blo = bw->blo = malloc(((size_t)m->n_bonds + 1) * sizeof *blo),
         *bhi = bw->bhi = malloc(((size_t)m->n_bonds + 1) * sizeof *bhi);
  char *bring = bw->bring = calloc((size_t)m->n_bonds + 1, 1), *judged = bw->judged = calloc((size_t)m->n_bonds + 1, 1);
  if (!blo || !bhi || !bring || !judged) return -1;
  for (int k = 0; k < m->n_bonds; k++) {
    const struct mol_bond *b = &m->bonds[k];
    if ((int)b->a >= n || (int)b->b >= n || b->a == b->b) continue;
    judged[k] = (char)bond_range(m->atoms[b->a].z, m->atoms[b->b].z, b->order, &blo[k], &bhi[k]);
    bring[k] = short_path(&bw->g, NULL, (int)b->a, (int)b->b, -1, 63, 0, bw->dist, bw->prev, bw->queue, NULL) > 0;
    if (!judged[k]) continue;
    struct pair *p = &s->pairs[s->n_pairs++];
    p->a = (int)b->a, p->b = (int)b->b, p->c = -1, p->in_ring = bring[k];
    p->lo = (float)blo[k], p->hi = (float)bhi[k];
  }
  s->n_bonds = s->n_pairs;
  return 0;
}

/* The angles' pairs at centre j (bond_of: each adjacency entry's bond;
 * ring_deg: ring bonds at each atom; ring_atom: what a ring may pass
 * through). */
static void angles_at(struct bounds_work *bw, struct shape_bounds *s, int j, const int *bond_of, const int *ring_deg,
                      const char *ring_atom) {
  const struct mol *m = bw->m;
  const struct adj g = bw->g;
  const struct atom_info *ai = bw->ai;
  const double *blo = bw->blo, *bhi = bw->bhi;
  const char *judged = bw->judged;
  int d = ai[j].degree, base = g.start[j];
  int rs[4][4] = {{0}}; /* ring size of each neighbour pair (0: none of up to 8 atoms) */
  if (d > 4) return;
  /* the smallest ring of each pair; an "envelope" (x and y each in a
   * smaller ring with a third neighbour z: the outline of two fused
   * rings) is no ring angle of its own */
  for (int x = 0; x < d; x++)
    for (int y = x + 1; y < d; y++) {
      int len = short_path(&g, ring_atom, g.nb[base + x], g.nb[base + y], j, 6, 0, bw->dist, bw->prev, bw->queue, NULL);
      rs[x][y] = rs[y][x] = len ? len + 2 : 0;
    }
  int envelope[4][4] = {{0}};
  for (int x = 0; x < d; x++)
    for (int y = x + 1; y < d; y++)
      for (int z = 0; z < d && rs[x][y]; z++)
        if (z != x && z != y && rs[x][z] && rs[z][y] && rs[x][z] < rs[x][y] && rs[z][y] < rs[x][y]) envelope[x][y] = 1;
  double ring_sum = 0;
  int ring_pairs = 0, smallest = 0;
  for (int x = 0; x < d; x++)
    for (int y = x + 1; y < d; y++)
      if (rs[x][y] && !envelope[x][y]) {
        double t, w;
        ring_angle(m, ai, j, rs[x][y], &t, &w);
        ring_sum += t, ring_pairs++;
        if (!smallest || rs[x][y] < smallest) smallest = rs[x][y];
      }
  for (int x = 0; x < d; x++)
    for (int y = x + 1; y < d; y++) {
      int kx = bond_of[base + x], ky = bond_of[base + y];
      if (!judged[kx] || !judged[ky]) continue;
      double t, w;
      int ring_pair = rs[x][y] && !envelope[x][y];
      if (ring_pair)
        ring_angle(m, ai, j, rs[x][y], &t, &w);
      else if (envelope[x][y] && ai[j].g != G_SP2)
        /* an envelope at a tetrahedral centre: whatever the two rings
         * leave, within what crystal structures show (1,000 PDB ligands:
         * 101-131°, 111-140° beside a three-ring) */
        t = smallest == 3 ? 122 : 115, w = smallest == 3 ? 18 : 15;
      else
        open_angle(m, ai, j, ring_sum, ring_pairs, smallest, &t, &w);
      /* a fusion or bridgehead atom of saturated rings, or the bridge
       * between two, is strained past the ideal of either ring
       * (2-oxabicyclo[2.1.1]: 75° in its four-ring, QM7's DFT geometry);
       * an angle out of its rings there is strained less (crystal
       * ligands: 102-121° beside a five-ring; a shape at 137-148° is a
       * substituent laid across a ring) */
      int xa = g.nb[base + x], ya = g.nb[base + y];
      if (!m->atoms[j].aromatic && (ring_deg[j] >= 3 || (ring_deg[xa] >= 3 && ring_deg[ya] >= 3)))
        w += ring_pair ? 10 : 4;
      struct pair *p = &s->pairs[s->n_pairs++];
      p->a = g.nb[base + x], p->b = g.nb[base + y], p->c = j, p->in_ring = rs[x][y] != 0;
      p->lo = (float)(t - w);
      p->hi = (float)(t + w > 180 ? 180 : t + w);
      p->ua = (float)blo[kx], p->ub = (float)bhi[kx], p->va = (float)blo[ky], p->vb = (float)bhi[ky];
    }
}

/* The angles' pairs at every centre: 0, or -1 out of memory. */
static int angle_pairs(struct bounds_work *bw, struct shape_bounds *s) {
  const struct mol *m = bw->m;
  const int n = bw->n;
  const struct adj g = bw->g;
  /* the bond index of each adjacency entry, to find a pair's bond ranges */
  int *bond_of = malloc(2 * ((size_t)m->n_bonds + 1) * sizeof *bond_of);
  if (!bond_of) return -1;
  {
    int *fill = calloc((size_t)n + 1, sizeof *fill);
    if (!fill) {
      free(bond_of);
      return -1;
    }
    for (int k = 0; k < m->n_bonds; k++) {
      int a = (int)m->bonds[k].a, b = (int)m->bonds[k].b;
      if (a >= n || b >= n) continue;
      bond_of[g.start[a] + fill[a]++] = k;
      bond_of[g.start[b] + fill[b]++] = k;
    }
    free(fill);
  }
  /* ring bonds at each atom: 3 or more make a fusion or bridgehead atom */
  int *ring_deg = calloc((size_t)n + 1, sizeof *ring_deg);
  /* the atoms an angle's ring may pass through: a chelate's ring closed
   * through a metal (Zn-S-C-S: S-C-S 110-120°) is no four-ring of carbon */
  char *ring_atom = malloc((size_t)n + 1);
  if (ring_atom)
    for (int i = 0; i < n; i++)
      ring_atom[i] = (char)organic(m->atoms[i].z);
  if (!ring_deg || !ring_atom) {
    free(ring_deg), free(ring_atom);
    free(bond_of);
    return -1;
  }
  for (int k = 0; k < m->n_bonds; k++)
    if (bw->bring[k]) ring_deg[m->bonds[k].a]++, ring_deg[m->bonds[k].b]++;
  for (int j = 0; j < n; j++) {
    if (bw->ai[j].g == G_SKIP) continue;
    angles_at(bw, s, j, bond_of, ring_deg, ring_atom);
  }
  free(bond_of);
  free(ring_deg);
  free(ring_atom);
  return 0;
}

/* Aromatic rings: the shortest aromatic cycle through each aromatic bond,
 * each ring once. 0, or -1 out of memory. */
static int aromatic_rings(struct bounds_work *bw, struct shape_bounds *s) {
  const struct mol *m = bw->m;
  const int n = bw->n;
  int n_arom = 0;
  for (int k = 0; k < m->n_bonds; k++)
    n_arom += m->bonds[k].order == MOL_BOND_AROMATIC;
  if (n_arom) {
    s->rings = malloc((size_t)n_arom * sizeof *s->rings);
    if (!s->rings) return -1;
    for (int k = 0; k < m->n_bonds; k++) {
      const struct mol_bond *b = &m->bonds[k];
      if (b->order != MOL_BOND_AROMATIC || (int)b->a >= n || (int)b->b >= n) continue;
      int path[8];
      int len = short_path(&bw->g, NULL, (int)b->a, (int)b->b, -1, 7, 1, bw->dist, bw->prev, bw->queue, path);
      if (!len) continue;
      struct ring r = {len + 1, {0}};
      for (int i = 0; i <= len; i++)
        r.at[i] = path[i];
      int dup = 0; /* the same atoms as a ring found before? */
      for (int q = 0; q < s->n_rings && !dup; q++) {
        if (s->rings[q].n != r.n) continue;
        int all = 1;
        for (int i = 0; i < r.n && all; i++) {
          int in = 0;
          for (int t = 0; t < r.n; t++)
            in |= s->rings[q].at[t] == r.at[i];
          all = in;
        }
        dup = all;
      }
      if (!dup) s->rings[s->n_rings++] = r;
    }
  }
  return 0;
}

struct shape_bounds *shape_bounds_make(const struct mol *m) {
  const int n = m->n_atoms;
  struct shape_bounds *s = calloc(1, sizeof *s);
  struct bounds_work bw = {.m = m, .n = n};
  bw.ai = calloc((size_t)(n ? n : 1), sizeof *bw.ai);
  bw.dist = malloc((size_t)(n ? n : 1) * sizeof *bw.dist), bw.prev = malloc((size_t)(n ? n : 1) * sizeof *bw.prev);
  bw.queue = malloc((size_t)(n ? n : 1) * sizeof *bw.queue);
  int ok = s && bw.ai && bw.dist && bw.prev && bw.queue && adj_make(m, &bw.g) == 0;
  if (ok) {
    s->n_atoms = n;
    for (int i = 0; i < n; i++)
      bw.dist[i] = -1;
    /* atom types; pairs: bonds, then angles; aromatic rings */
    atom_types(m, &bw.g, bw.ai);
    ok = bond_pairs(&bw, s) == 0 && angle_pairs(&bw, s) == 0 && aromatic_rings(&bw, s) == 0;
  }
  free(bw.blo), free(bw.bhi), free(bw.bring), free(bw.judged);
  adj_free(&bw.g);
  free(bw.ai), free(bw.dist), free(bw.prev), free(bw.queue);
  if (ok) return s;
  shape_bounds_free(s);
  return NULL;
}

void shape_bounds_free(struct shape_bounds *s) {
  if (!s) return;
  free(s->pairs);
  free(s->rings);
  free(s);
}

int shape_bounds_atoms(const struct shape_bounds *s) { return s ? s->n_atoms : 0; }

static double distance(const double *xyz, int a, int b) {
  const double *x = xyz + 3 * a, *y = xyz + 3 * b;
  double dx = x[0] - y[0], dy = x[1] - y[1], dz = x[2] - y[2];
  return sqrt(dx * dx + dy * dy + dz * dz);
}

int shape_check(const struct shape_bounds *s, const double *xyz, double tol, double planar_tol, struct shape_fault *f) {
  struct shape_fault worst = {0};
  int fails = 0;
  /* bonds first: a broken bond is what to name, whatever its angles say */
  for (int pass = 0; pass < 2; pass++) {
    int from = pass ? s->n_bonds : 0, to = pass ? s->n_pairs : s->n_bonds;
    for (int k = from; k < to; k++) {
      const struct pair *p = &s->pairs[k];
      double d = distance(xyz, p->a, p->b), lo = p->lo, hi = p->hi, deg = 0;
      if (pass) { /* the angle's range as a distance, with the bonds as they are */
        /* a bond stretched within its tolerance does not stretch the
         * angle's allowance with it: each bond as it is, within its range */
        double u0 = distance(xyz, p->a, p->c), v0 = distance(xyz, p->b, p->c);
        double u = fmin(fmax(u0, p->ua), p->ub), v = fmin(fmax(v0, p->va), p->vb);
        lo = law_of_cosines(u, v, p->lo);
        hi = law_of_cosines(u, v, p->hi);
        deg = u0 > 0 && v0 > 0 ? acos(fmax(-1, fmin(1, (u0 * u0 + v0 * v0 - d * d) / (2 * u0 * v0)))) * 180 / M_PI : 0;
      }
      double ex = d > hi ? d - hi : d < lo ? lo - d : 0;
      if (!(ex <= tol)) { /* NaN fails too */
        fails++;
        if (worst.kind == SHAPE_OK || (worst.kind == (pass ? SHAPE_ANGLE : SHAPE_BOND) && ex > worst.excess)) {
          worst.kind = pass ? SHAPE_ANGLE : SHAPE_BOND;
          worst.a = p->a, worst.b = p->b, worst.c = p->c, worst.in_ring = p->in_ring;
          worst.d = d, worst.lo = lo, worst.hi = hi, worst.excess = ex;
          worst.deg = deg, worst.deg_lo = pass ? p->lo : 0, worst.deg_hi = pass ? p->hi : 0;
        }
      }
    }
  }
  for (int q = 0; q < s->n_rings; q++) {
    const struct ring *r = &s->rings[q];
    double c[3] = {0, 0, 0}, nrm[3] = {0, 0, 0};
    for (int i = 0; i < r->n; i++)
      for (int d = 0; d < 3; d++)
        c[d] += xyz[3 * r->at[i] + d] / r->n;
    for (int i = 0; i < r->n; i++) { /* Newell's normal of the polygon */
      const double *u = xyz + 3 * r->at[i], *v = xyz + 3 * r->at[(i + 1) % r->n];
      nrm[0] += (u[1] - v[1]) * (u[2] + v[2]);
      nrm[1] += (u[2] - v[2]) * (u[0] + v[0]);
      nrm[2] += (u[0] - v[0]) * (u[1] + v[1]);
    }
    double len = sqrt(nrm[0] * nrm[0] + nrm[1] * nrm[1] + nrm[2] * nrm[2]);
    double far = 0;
    int at = r->at[0];
    if (len > 0) {
      for (int i = 0; i < r->n; i++) {
        const double *u = xyz + 3 * r->at[i];
        double h = fabs(((u[0] - c[0]) * nrm[0] + (u[1] - c[1]) * nrm[1] + (u[2] - c[2]) * nrm[2]) / len);
        if (!(h <= far)) far = h, at = r->at[i];
      }
    } else {
      far = INFINITY; /* a ring folded onto a line or a point */
    }
    if (!(far <= planar_tol)) {
      fails++;
      if (worst.kind == SHAPE_OK || (worst.kind == SHAPE_PLANAR && far - planar_tol > worst.excess)) {
        worst.kind = SHAPE_PLANAR;
        worst.a = at, worst.b = -1, worst.c = r->n, worst.in_ring = 1;
        worst.d = far, worst.lo = worst.hi = 0, worst.excess = far - planar_tol;
      }
    }
  }
  if (f) *f = worst;
  return fails;
}

void shape_fault_text(const struct mol *m, const struct shape_fault *f, char *buf, size_t len) {
  const char *sa = f->a >= 0 && f->a < m->n_atoms ? mol_element_symbol(m->atoms[f->a].z) : "?";
  const char *sb = f->b >= 0 && f->b < m->n_atoms ? mol_element_symbol(m->atoms[f->b].z) : "?";
  const char *sc = f->c >= 0 && f->c < m->n_atoms ? mol_element_symbol(m->atoms[f->c].z) : "?";
  switch (f->kind) {
  case SHAPE_BOND:
    snprintf(buf, len, "%sbond %s%d-%s%d is %.2f Å (%.2f-%.2f Å)", f->in_ring ? "ring " : "", sa, f->a + 1, sb,
             f->b + 1, f->d, f->lo, f->hi);
    break;
  case SHAPE_ANGLE:
    snprintf(buf, len, "%sangle %s%d-%s%d-%s%d is %.0f° (%.0f-%.0f°): its ends %.2f Å apart (%.2f-%.2f Å)",
             f->in_ring ? "ring " : "", sa, f->a + 1, sc, f->c + 1, sb, f->b + 1, f->deg, f->deg_lo, f->deg_hi, f->d,
             f->lo, f->hi);
    break;
  case SHAPE_PLANAR:
    snprintf(buf, len, "aromatic ring of %d atoms not planar: %s%d is %.2f Å from its plane", f->c, sa, f->a + 1,
             f->d);
    break;
  default:
    snprintf(buf, len, "shape within bounds");
  }
}

int mol_shape_check(const struct mol *m, double tol, double planar_tol, struct mol_why *why, int *conf) {
  if (m->dim != 3 || m->n_atoms < 2) return 0;
  struct shape_bounds *s = shape_bounds_make(m);
  double *xyz = malloc(3 * (size_t)m->n_atoms * sizeof *xyz);
  if (!s || !xyz) {
    shape_bounds_free(s);
    free(xyz);
    if (why) mol_why_set(why, 0, "out of memory", "checking the shape of %d atoms", m->n_atoms);
    return -1;
  }
  for (int i = 0; i < m->n_atoms; i++)
    xyz[3 * i] = m->atoms[i].x, xyz[3 * i + 1] = m->atoms[i].y, xyz[3 * i + 2] = m->atoms[i].z_;
  int bad = 0, first = -1;
  struct shape_fault f0 = {0};
  for (int c = 0; c < 1 + (m->confs ? m->n_confs : 0); c++) {
    const double *x = c ? m->confs + 3 * (size_t)m->n_atoms * (size_t)(c - 1) : xyz;
    struct shape_fault f;
    if (shape_check(s, x, tol, planar_tol, &f)) {
      if (!bad) first = c, f0 = f;
      bad++;
    }
  }
  if (bad && why) {
    char text[300];
    shape_fault_text(m, &f0, text, sizeof text);
    const char *reason = f0.kind == SHAPE_BOND    ? "bond out of bounds"
                         : f0.kind == SHAPE_ANGLE ? "angle out of bounds"
                                                  : "aromatic ring not planar";
    if (m->n_confs > 0)
      mol_why_set(why, f0.a + 1, reason, "conformer %d of %d: %s", first + 1, 1 + m->n_confs, text);
    else
      mol_why_set(why, f0.a + 1, reason, "%s", text);
  }
  if (conf) *conf = first;
  shape_bounds_free(s);
  free(xyz);
  return bad;
}
