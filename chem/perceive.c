/* perceive.c — rings, degree, hydrogens, hybridisation, conjugation and
 * stereo of a molecule (perceive.h). */
#include "chem/perceive.h"

#include <stdlib.h>
#include <string.h>

/* Neighbours as a CSR list: atom a's are nbr[start[a] .. start[a + 1]), each
 * with the bond that joins them. */
struct adj {
  int *start, *nbr, *bond;
};

static void adj_free(struct adj *g) {
  free(g->start);
  free(g->nbr);
  free(g->bond);
}

static int adj_build(const struct mol *m, struct adj *g) {
  int n = m->n_atoms, nb = m->n_bonds;
  g->start = calloc((size_t)n + 1, sizeof *g->start);
  g->nbr = malloc(((size_t)nb * 2 + 1) * sizeof *g->nbr);
  g->bond = malloc(((size_t)nb * 2 + 1) * sizeof *g->bond);
  int *fill = calloc((size_t)n + 1, sizeof *fill);
  if (!g->start || !g->nbr || !g->bond || !fill) {
    free(fill);
    adj_free(g);
    return -1;
  }
  for (int b = 0; b < nb; b++) {
    g->start[m->bonds[b].a + 1]++;
    g->start[m->bonds[b].b + 1]++;
  }
  for (int a = 0; a < n; a++)
    g->start[a + 1] += g->start[a];
  for (int b = 0; b < nb; b++) {
    int x = (int)m->bonds[b].a, y = (int)m->bonds[b].b;
    int kx = g->start[x] + fill[x]++, ky = g->start[y] + fill[y]++;
    g->nbr[kx] = y, g->bond[kx] = b;
    g->nbr[ky] = x, g->bond[ky] = b;
  }
  free(fill);
  return 0;
}

/* ---- rings ------------------------------------------------------------------ */

/* Bonds that are bridges (in no ring): an iterative depth-first search
 * keeping each atom's discovery time and low-link. */
static int find_bridges(const struct mol *m, const struct adj *g, uint8_t *bridge) {
  int n = m->n_atoms;
  int *disc = calloc((size_t)n + 1, sizeof *disc), *low = malloc(((size_t)n + 1) * sizeof *low);
  int *stack = malloc(((size_t)n + 1) * sizeof *stack), *iter = malloc(((size_t)n + 1) * sizeof *iter);
  int *via = malloc(((size_t)n + 1) * sizeof *via);
  if (!disc || !low || !stack || !iter || !via) {
    free(disc), free(low), free(stack), free(iter), free(via);
    return -1;
  }
  int t = 0;
  for (int root = 0; root < n; root++) {
    if (disc[root]) continue;
    int top = 0;
    stack[top++] = root;
    disc[root] = low[root] = ++t;
    iter[root] = g->start[root];
    via[root] = -1;
    while (top) {
      int a = stack[top - 1];
      if (iter[a] < g->start[a + 1]) {
        int k = iter[a]++, b = g->nbr[k];
        if (g->bond[k] == via[a]) continue;
        if (disc[b]) {
          if (disc[b] < low[a]) low[a] = disc[b];
          continue;
        }
        disc[b] = low[b] = ++t;
        iter[b] = g->start[b];
        via[b] = g->bond[k];
        stack[top++] = b;
      } else {
        top--;
        if (top) {
          int p = stack[top - 1];
          if (low[a] < low[p]) low[p] = low[a];
          if (low[a] > disc[p]) bridge[via[a]] = 1;
        }
      }
    }
  }
  free(disc), free(low), free(stack), free(iter), free(via);
  return 0;
}

/* The smallest ring through ring bond b: the shortest path between its atoms
 * that avoids it, plus one; PERCEIVE_MAX_RING when longer. dist and queue
 * are scratch of n_atoms; dist must be all -1 and is left so. */
static int ring_of_bond(const struct mol *m, const struct adj *g, int b, int *dist, int *queue) {
  int from = (int)m->bonds[b].a, to = (int)m->bonds[b].b, head = 0, tail = 0, size = PERCEIVE_MAX_RING;
  dist[from] = 0;
  queue[tail++] = from;
  while (head < tail) {
    int a = queue[head++];
    if (dist[a] + 2 > PERCEIVE_MAX_RING) break; /* a path through a's neighbours is already too long */
    for (int k = g->start[a]; k < g->start[a + 1]; k++) {
      int c = g->nbr[k];
      if (g->bond[k] == b || dist[c] >= 0) continue;
      dist[c] = dist[a] + 1;
      queue[tail++] = c;
      if (c == to) {
        size = dist[c] + 1;
        head = tail; /* done */
        break;
      }
    }
  }
  for (int i = 0; i < tail; i++)
    dist[queue[i]] = -1;
  return size < PERCEIVE_MAX_RING ? size : PERCEIVE_MAX_RING;
}

/* ---- atom classes ------------------------------------------------------------- */

struct keyed {
  uint64_t k0, k1;
  int atom;
};

static int cmp_keyed(const void *x, const void *y) {
  const struct keyed *a = x, *b = y;
  if (a->k0 != b->k0) return a->k0 < b->k0 ? -1 : 1;
  if (a->k1 != b->k1) return a->k1 < b->k1 ? -1 : 1;
  return 0;
}

static int cmp_u64(const void *x, const void *y) {
  uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
  return a < b ? -1 : a > b;
}

static uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h *= 0xff51afd7ed558ccdULL;
  return h ^ (h >> 33);
}

/* Sorts ks and writes each atom's rank (0 .. classes - 1, equal keys equal
 * ranks) into rank; returns the number of classes. */
static int rank_keys(struct keyed *ks, int n, int *rank) {
  qsort(ks, (size_t)n, sizeof *ks, cmp_keyed);
  int r = -1;
  for (int i = 0; i < n; i++) {
    if (i == 0 || cmp_keyed(&ks[i], &ks[i - 1]) != 0) r++;
    rank[ks[i].atom] = r;
  }
  return r + 1;
}

/* Morgan-style refinement: classes from the atoms' own invariants, split by
 * their neighbours' classes (and bond orders) until no class splits. The
 * keys sort in the same order whatever the atoms' order, so ranks are
 * canonical up to symmetry. */
static int atom_classes(const struct mol *m, const struct adj *g, const struct perceive *p, int *rank) {
  int n = m->n_atoms, deg_max = 0;
  for (int a = 0; a < n; a++)
    if (g->start[a + 1] - g->start[a] > deg_max) deg_max = g->start[a + 1] - g->start[a];
  struct keyed *ks = malloc(((size_t)n + 1) * sizeof *ks);
  uint64_t *nb = malloc(((size_t)deg_max + 1) * sizeof *nb);
  int *old = malloc(((size_t)n + 1) * sizeof *old);
  if (!ks || !nb || !old) {
    free(ks), free(nb), free(old);
    return -1;
  }
  for (int a = 0; a < n; a++) {
    const struct mol_atom *x = &m->atoms[a];
    ks[a].k0 = ((uint64_t)x->z << 40) | ((uint64_t)p->atom[a].degree << 32) | ((uint64_t)p->atom[a].hydrogens << 24) |
               ((uint64_t)(uint8_t)(x->charge + 128) << 16) | ((uint64_t)(x->aromatic ? 1 : 0) << 8) | p->atom[a].ring;
    ks[a].k1 = 0;
    ks[a].atom = a;
  }
  int classes = rank_keys(ks, n, rank);
  for (int round = 0; round < n; round++) {
    memcpy(old, rank, (size_t)n * sizeof *old);
    for (int a = 0; a < n; a++) {
      int d = 0;
      for (int k = g->start[a]; k < g->start[a + 1]; k++)
        nb[d++] = ((uint64_t)old[g->nbr[k]] << 8) | m->bonds[g->bond[k]].order;
      qsort(nb, (size_t)d, sizeof *nb, cmp_u64);
      uint64_t h = 0x5bd1e995;
      for (int i = 0; i < d; i++)
        h = mix(h, nb[i]);
      ks[a].k0 = (uint64_t)old[a];
      ks[a].k1 = h;
      ks[a].atom = a;
    }
    int now = rank_keys(ks, n, rank);
    if (now == classes) break;
    classes = now;
  }
  free(ks), free(nb), free(old);
  return 0;
}

/* ---- stereo ----------------------------------------------------------------- */

static void sub3(const struct mol_atom *a, const struct mol_atom *o, double v[3]) {
  v[0] = a->x - o->x, v[1] = a->y - o->y, v[2] = a->z_ - o->z_;
}

/* An explicit hydrogen with no other neighbour is the same as an implicit
 * one: such an atom and an implicit H are one class for stereo. */
static int is_plain_h(const struct mol *m, const struct adj *g, int a) {
  return m->atoms[a].z == 1 && g->start[a + 1] - g->start[a] == 1 && m->atoms[a].charge == 0;
}

static int8_t centre_chirality(const struct mol *m, const struct adj *g, const int *rank, int a) {
  int d = g->start[a + 1] - g->start[a], ih = m->atoms[a].implicit_h;
  if (d + ih != 4 || ih > 1 || d < 3) return 0;
  int top[4], nt = 0, plain_h = 0;
  for (int k = g->start[a]; k < g->start[a + 1]; k++) {
    int b = g->nbr[k];
    plain_h += is_plain_h(m, g, b);
    for (int j = 0; j < nt; j++)
      if (rank[top[j]] == rank[b]) return 0; /* two alike */
    top[nt++] = b;
  }
  if (ih && plain_h) return 0; /* an H atom and an implicit H */
  /* the three highest-ranked, highest first */
  for (int i = 0; i < nt; i++)
    for (int j = i + 1; j < nt; j++)
      if (rank[top[j]] > rank[top[i]]) {
        int t = top[i];
        top[i] = top[j], top[j] = t;
      }
  double u[3], v[3], w[3];
  sub3(&m->atoms[top[0]], &m->atoms[a], u);
  sub3(&m->atoms[top[1]], &m->atoms[a], v);
  sub3(&m->atoms[top[2]], &m->atoms[a], w);
  double t =
      u[0] * (v[1] * w[2] - v[2] * w[1]) - u[1] * (v[0] * w[2] - v[2] * w[0]) + u[2] * (v[0] * w[1] - v[1] * w[0]);
  /* a flat centre (2D coordinates, none): no handedness to read (1e-3 A^3
   * against about 0.8 for a tetrahedral carbon) */
  if (t > 1e-3) return 1;
  if (t < -1e-3) return -1;
  return 0;
}

/* End a of double bond b (other end o): its highest-ranked other neighbour,
 * or -1 when it has none that stands apart (no other neighbour, or two of a
 * class). */
static int bond_end(const struct mol *m, const struct adj *g, const int *rank, int a, int o) {
  int best = -1, n = 0, plain_h = 0, ih = m->atoms[a].implicit_h;
  int r[2] = {-1, -1};
  for (int k = g->start[a]; k < g->start[a + 1]; k++) {
    int c = g->nbr[k];
    if (c == o) continue;
    if (n < 2) r[n] = rank[c];
    n++;
    plain_h += is_plain_h(m, g, c);
    if (best < 0 || rank[c] > rank[best]) best = c;
  }
  if (n + ih > 2 || best < 0) return -1;
  if (n == 2 && r[0] == r[1]) return -1;
  if (ih && plain_h) return -1;
  return best;
}

static int8_t bond_stereo(const struct mol *m, const struct adj *g, const int *rank, int b) {
  int a = (int)m->bonds[b].a, c = (int)m->bonds[b].b;
  int ea = bond_end(m, g, rank, a, c), ec = bond_end(m, g, rank, c, a);
  if (ea < 0 || ec < 0) return 0;
  double axis[3], u[3], v[3];
  sub3(&m->atoms[c], &m->atoms[a], axis);
  sub3(&m->atoms[ea], &m->atoms[a], u);
  sub3(&m->atoms[ec], &m->atoms[c], v);
  double aa = axis[0] * axis[0] + axis[1] * axis[1] + axis[2] * axis[2];
  if (!(aa > 1e-12)) return 0;
  double pu = (u[0] * axis[0] + u[1] * axis[1] + u[2] * axis[2]) / aa;
  double pv = (v[0] * axis[0] + v[1] * axis[1] + v[2] * axis[2]) / aa;
  double dot = 0, nu = 0, nv = 0;
  for (int i = 0; i < 3; i++) {
    double x = u[i] - pu * axis[i], y = v[i] - pv * axis[i];
    dot += x * y, nu += x * x, nv += y * y;
  }
  /* perpendicular to the bond, both substituents stand off it, and their
   * dihedral is read only away from 90 degrees (|cos| > 0.1) */
  if (!(nu > 1e-6 && nv > 1e-6) || dot * dot < 0.01 * nu * nv) return 0;
  return dot > 0 ? 1 : -1;
}

/* ---- perceive ------------------------------------------------------------------ */

int perceive(const struct mol *m, struct perceive *p) {
  memset(p, 0, sizeof *p);
  int n = m->n_atoms, nb = m->n_bonds;
  struct adj g;
  memset(&g, 0, sizeof g);
  p->atom = calloc((size_t)n + 1, sizeof *p->atom);
  p->bond = calloc((size_t)nb + 1, sizeof *p->bond);
  uint8_t *bridge = calloc((size_t)nb + 1, 1), *unsat = calloc((size_t)n + 1, 1), *lone = calloc((size_t)n + 1, 1);
  int *dist = malloc(((size_t)n + 1) * sizeof *dist), *queue = malloc(((size_t)n + 1) * sizeof *queue);
  int *rank = malloc(((size_t)n + 1) * sizeof *rank);
  int rc = -1;
  if (!p->atom || !p->bond || !bridge || !unsat || !lone || !dist || !queue || !rank || adj_build(m, &g) != 0 ||
      find_bridges(m, &g, bridge) != 0)
    goto out;
  p->n_atoms = n, p->n_bonds = nb;
  int *n_double = dist; /* (scratch, reset below) */
  memset(n_double, 0, (size_t)n * sizeof *n_double);
  uint8_t *triple = lone;
  for (int b = 0; b < nb; b++) {
    int x = (int)m->bonds[b].a, y = (int)m->bonds[b].b, o = m->bonds[b].order;
    if (o == 2 || o == 3 || o == MOL_BOND_AROMATIC) unsat[x] = unsat[y] = 1;
    if (o == 2) n_double[x]++, n_double[y]++;
    if (o == 3) triple[x] = triple[y] = 1;
  }
  for (int a = 0; a < n; a++) {
    const struct mol_atom *x = &m->atoms[a];
    int h = x->implicit_h, d = g.start[a + 1] - g.start[a];
    for (int k = g.start[a]; k < g.start[a + 1]; k++)
      h += m->atoms[g.nbr[k]].z == 1;
    if (x->aromatic) unsat[a] = 1;
    p->atom[a].degree = (uint8_t)(d + x->implicit_h > 255 ? 255 : d + x->implicit_h);
    p->atom[a].hydrogens = (uint8_t)(h > 255 ? 255 : h);
    p->atom[a].hybridisation = x->z == 1                       ? PERCEIVE_HYB_NONE
                               : triple[a] || n_double[a] >= 2 ? PERCEIVE_HYB_SP
                               : unsat[a]                      ? PERCEIVE_HYB_SP2
                                                               : PERCEIVE_HYB_SP3;
  }
  for (int a = 0; a < n; a++) {
    int z = m->atoms[a].z;
    lone[a] = (z == 7 || z == 8 || z == 16) && !unsat[a];
    dist[a] = -1;
  }
  /* rings */
  for (int b = 0; b < nb; b++) {
    if (bridge[b]) continue;
    int size = ring_of_bond(m, &g, b, dist, queue);
    p->bond[b].ring = (uint8_t)size;
    for (int e = 0; e < 2; e++) {
      int a = (int)(e ? m->bonds[b].b : m->bonds[b].a);
      if (!p->atom[a].ring || size < p->atom[a].ring) p->atom[a].ring = (uint8_t)size;
    }
  }
  /* conjugation: single bonds first, then the multiple bonds beside them */
  for (int b = 0; b < nb; b++) {
    int x = (int)m->bonds[b].a, y = (int)m->bonds[b].b, o = m->bonds[b].order;
    if (o == MOL_BOND_AROMATIC)
      p->bond[b].conjugated = 1;
    else if (o == 1)
      p->bond[b].conjugated = (unsat[x] && (unsat[y] || lone[y])) || (unsat[y] && lone[x]);
  }
  for (int b = 0; b < nb; b++) {
    int o = m->bonds[b].order;
    if (o != 2 && o != 3) continue;
    for (int e = 0; e < 2 && !p->bond[b].conjugated; e++) {
      int a = (int)(e ? m->bonds[b].b : m->bonds[b].a);
      for (int k = g.start[a]; k < g.start[a + 1]; k++)
        if (m->bonds[g.bond[k]].order == 1 && p->bond[g.bond[k]].conjugated) p->bond[b].conjugated = 1;
    }
  }
  for (int b = 0; b < nb; b++) {
    if (!p->bond[b].conjugated || m->bonds[b].order != 1) continue;
    for (int e = 0; e < 2; e++) {
      int a = (int)(e ? m->bonds[b].b : m->bonds[b].a);
      if (lone[a] && p->atom[a].hybridisation == PERCEIVE_HYB_SP3) p->atom[a].hybridisation = PERCEIVE_HYB_SP2;
    }
  }
  /* stereo */
  if (atom_classes(m, &g, p, rank) != 0) goto out;
  for (int a = 0; a < n; a++)
    p->atom[a].chirality = centre_chirality(m, &g, rank, a);
  for (int b = 0; b < nb; b++)
    if (m->bonds[b].order == 2 && (p->bond[b].ring == 0 || p->bond[b].ring >= PERCEIVE_MAX_RING))
      p->bond[b].stereo = bond_stereo(m, &g, rank, b);
  rc = 0;
out:
  free(bridge), free(unsat), free(lone), free(dist), free(queue), free(rank);
  adj_free(&g);
  if (rc) perceive_free(p);
  return rc;
}

void perceive_free(struct perceive *p) {
  free(p->atom);
  free(p->bond);
  memset(p, 0, sizeof *p);
}
