/* graph.c — molecule to graph: the cell-list radius search, bonded edges,
 * the max_neighbors cap, node and edge features, and the stored blob (see
 * graph.h for the definitions and the blob layout).
 *
 * graph_build works one target atom at a time: it gathers the target's
 * candidate sources (radius neighbours from the 27 cells around it, then
 * bonded atoms), applies the cap and sorts them by source index. Every
 * target's list is final on its own, so targets can be visited in whatever
 * order is kind to the cache (cell order) and the lists laid out by target
 * index afterwards: the edge list comes out sorted by (target, source) without
 * a global sort, and the work per target is bounded by the atoms in 27 cells.
 */
#include "chem/graph.h"
#include "chem/cells.h"
#include "chem/perceive.h"
#include "common/crc32c.h"
#include "common/error.h"
#include "common/le.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void graph_init(struct graph *g) { memset(g, 0, sizeof *g); }

void graph_free(struct graph *g) {
  if (!g) return;
  free(g->src);
  free(g->dst);
  free(g->node_feat);
  free(g->edge_feat);
  free(g->rel_pos);
  graph_init(g);
}

static const char *const ATOM_FEATURE[GRAPH_AF_COUNT] = {"hybridisation", "aromatic",  "ring",
                                                         "degree",        "hydrogens", "chirality"};
static const int ATOM_WIDTH[GRAPH_AF_COUNT] = {4, 1, 7, 6, 5, 2};
static const char *const BOND_FEATURE[GRAPH_BF_COUNT] = {"conjugated", "ring", "stereo"};
static const int BOND_WIDTH[GRAPH_BF_COUNT] = {1, 1, 2};

const char *graph_atom_feature_name(int f) { return f >= 0 && f < GRAPH_AF_COUNT ? ATOM_FEATURE[f] : NULL; }
int graph_atom_feature_width(int f) { return f >= 0 && f < GRAPH_AF_COUNT ? ATOM_WIDTH[f] : -1; }
const char *graph_bond_feature_name(int f) { return f >= 0 && f < GRAPH_BF_COUNT ? BOND_FEATURE[f] : NULL; }
int graph_bond_feature_width(int f) { return f >= 0 && f < GRAPH_BF_COUNT ? BOND_WIDTH[f] : -1; }

int graph_atom_feature_of(const char *name) {
  for (int f = 0; name && f < GRAPH_AF_COUNT; f++)
    if (!strcmp(name, ATOM_FEATURE[f])) return f;
  return -1;
}

int graph_bond_feature_of(const char *name) {
  for (int f = 0; name && f < GRAPH_BF_COUNT; f++)
    if (!strcmp(name, BOND_FEATURE[f])) return f;
  return -1;
}

/* The width of a list of features, each in [0, count) and listed once; -1
 * otherwise. */
static int features_width(const uint8_t *list, int n, int count, const int *width) {
  if (n < 0 || (n > 0 && !list) || n > count) return -1;
  int w = 0, seen = 0;
  for (int i = 0; i < n; i++) {
    if (list[i] >= count || (seen >> list[i]) & 1) return -1;
    seen |= 1 << list[i];
    w += width[list[i]];
  }
  return w;
}

int graph_node_width(const struct graph_opts *o) {
  if (!o || o->n_elements < 0 || (o->n_elements > 0 && !o->elements) || o->n_elements > 65535) return -1;
  int extra = features_width(o->atom_features, o->n_atom_features, GRAPH_AF_COUNT, ATOM_WIDTH);
  if (extra < 0) return -1;
  int w = o->n_elements + !!o->with_other + !!o->with_charge + !!o->with_atomic_number + extra;
  return w <= 65535 ? w : -1; /* the blob stores the width as a u16 */
}

int graph_edge_width(const struct graph_opts *o) {
  int extra = o ? features_width(o->bond_features, o->n_bond_features, GRAPH_BF_COUNT, BOND_WIDTH) : -1;
  return extra < 0 ? -1 : GRAPH_EDGE_WIDTH + extra;
}

/* ---------------------------------------------------------------- bonds */

/* Bonded neighbours of each atom, in bond-list order (CSR). */
struct adjacency {
  int *start; /* n_atoms + 1 */
  int32_t *nbr;
  uint8_t *order;
  int32_t *bond; /* the bond's index in m->bonds */
};

static void adjacency_free(struct adjacency *a) {
  free(a->start);
  free(a->nbr);
  free(a->order);
  free(a->bond);
  memset(a, 0, sizeof *a);
}

static int adjacency_build(struct adjacency *a, const struct mol *m) {
  int n = m->n_atoms, nb = m->n_bonds;
  memset(a, 0, sizeof *a);
  a->start = calloc((size_t)n + 1, sizeof *a->start);
  a->nbr = malloc((size_t)(nb ? 2 * nb : 1) * sizeof *a->nbr);
  a->order = malloc((size_t)(nb ? 2 * nb : 1));
  a->bond = malloc((size_t)(nb ? 2 * nb : 1) * sizeof *a->bond);
  int *fill = malloc((size_t)(n ? n : 1) * sizeof *fill);
  if (!a->start || !a->nbr || !a->order || !a->bond || !fill) {
    free(fill);
    adjacency_free(a);
    return -1;
  }
  for (int k = 0; k < nb; k++) {
    a->start[m->bonds[k].a + 1]++;
    a->start[m->bonds[k].b + 1]++;
  }
  for (int i = 0; i < n; i++)
    a->start[i + 1] += a->start[i];
  memcpy(fill, a->start, (size_t)n * sizeof *fill);
  for (int k = 0; k < nb; k++) {
    const struct mol_bond *b = &m->bonds[k];
    int p = fill[b->a]++, q = fill[b->b]++;
    a->nbr[p] = (int32_t)b->b;
    a->order[p] = b->order;
    a->bond[p] = k;
    a->nbr[q] = (int32_t)b->a;
    a->order[q] = b->order;
    a->bond[q] = k;
  }
  free(fill);
  return 0;
}

/* ------------------------------------------------------------- building */

/* A candidate source for the current target. */
struct cand {
  double d2;
  int32_t src;
  uint8_t order; /* bond order, 0 = not bonded */
};

static int cand_by_src(const void *pa, const void *pb) {
  const struct cand *a = pa, *b = pb;
  return (a->src > b->src) - (a->src < b->src);
}

/* By source index: insertion sort for the few dozen candidates a target
 * usually has (cheaper than qsort's callbacks), qsort beyond that. */
static void sort_by_src(struct cand *c, size_t n) {
  if (n > 64) {
    qsort(c, n, sizeof *c, cand_by_src);
    return;
  }
  for (size_t i = 1; i < n; i++) {
    struct cand x = c[i];
    size_t k = i;
    for (; k > 0 && c[k - 1].src > x.src; k--)
      c[k] = c[k - 1];
    c[k] = x;
  }
}

static int cand_by_dist(const void *pa, const void *pb) {
  const struct cand *a = pa, *b = pb;
  if (a->d2 != b->d2) return a->d2 < b->d2 ? -1 : 1;
  return (a->src > b->src) - (a->src < b->src);
}

/* All the building state, freed in one place. Each target's sources are
 * gathered into cand, then appended as one segment of tmp_src/tmp_order;
 * targets are visited in cell order, so segments lie in that order and
 * seg/count say where each target's is. */
struct builder {
  struct cand *cand;
  size_t n_cand, cap_cand;
  int32_t *tmp_src;
  uint8_t *tmp_order; /* bond order, 0 = not bonded */
  size_t n_tmp, cap_tmp;
  size_t *seg;                /* per atom: start of its segment in tmp_src */
  int *count;                 /* per atom: its incoming edges */
  int *bond_mark, *list_mark; /* per atom: target + 1 when marked for that target */
  uint8_t *bond_order;        /* per atom: order of its bond to the current target */
  struct cells cells;
  struct adjacency adj;
  int64_t pairs;   /* distances computed */
  int64_t dropped; /* radius edges the cap left out */
};

static void builder_free(struct builder *b) {
  free(b->cand);
  free(b->tmp_src);
  free(b->tmp_order);
  free(b->seg);
  free(b->count);
  free(b->bond_mark);
  free(b->list_mark);
  free(b->bond_order);
  cells_free(&b->cells);
  adjacency_free(&b->adj);
}

static int push_cand(struct builder *b, double d2, int32_t src, uint8_t order) {
  if (b->n_cand == b->cap_cand) {
    size_t cap = b->cap_cand ? 2 * b->cap_cand : 64;
    struct cand *c = realloc(b->cand, cap * sizeof *c);
    if (!c) return -1;
    b->cand = c;
    b->cap_cand = cap;
  }
  b->cand[b->n_cand++] = (struct cand){d2, src, order};
  return 0;
}

/* Appends the candidates as target j's segment. 0, -1 on allocation failure,
 * -2 beyond INT32_MAX edges. */
static int push_segment(struct builder *b, int j) {
  size_t need = b->n_tmp + b->n_cand;
  if (need > (size_t)INT32_MAX) return -2;
  if (need > b->cap_tmp) {
    size_t cap = b->cap_tmp ? b->cap_tmp : 1024;
    while (cap < need)
      cap *= 2;
    int32_t *s = realloc(b->tmp_src, cap * sizeof *s);
    if (s) b->tmp_src = s;
    uint8_t *o = realloc(b->tmp_order, cap);
    if (o) b->tmp_order = o;
    if (!s || !o) return -1;
    b->cap_tmp = cap;
  }
  b->seg[j] = b->n_tmp;
  b->count[j] = (int)b->n_cand;
  for (size_t k = 0; k < b->n_cand; k++) {
    b->tmp_src[b->n_tmp] = b->cand[k].src;
    b->tmp_order[b->n_tmp] = b->cand[k].order;
    b->n_tmp++;
  }
  return 0;
}

/* Squared distance with (dx, dy, dz) = x_j - x_i: the one formula for every
 * decision (gather() spells it out on the cell list's copy of the coordinates). */
static double dist2(const struct mol_atom *i, const struct mol_atom *j) {
  double dx = j->x - i->x, dy = j->y - i->y, dz = j->z_ - i->z_;
  return dx * dx + dy * dy + dz * dz;
}

static int valid_order(unsigned o) { return o == 1 || o == 2 || o == 3 || o == MOL_BOND_AROMATIC; }

static int check_input(const struct mol *m, const struct graph_opts *o, struct se3_error *err) {
  if (!m || !o) {
    se3_error_set(err, SE3_ERR_RUN, "no molecule or no options");
    return -1;
  }
  if (m->n_atoms < 0 || (m->n_atoms > 0 && !m->atoms) || m->n_bonds < 0 || (m->n_bonds > 0 && !m->bonds)) {
    se3_error_set(err, SE3_ERR_RUN, "malformed molecule (%d atoms, %d bonds)", m->n_atoms, m->n_bonds);
    return -1;
  }
  if (o->edges != GRAPH_EDGES_RADIUS && o->edges != GRAPH_EDGES_BONDS && o->edges != GRAPH_EDGES_RADIUS_BONDS) {
    se3_error_set(err, SE3_ERR_USAGE, "unknown edge mode %d", (int)o->edges);
    return -1;
  }
  if (o->edges != GRAPH_EDGES_BONDS && !(o->cutoff > 0 && isfinite(o->cutoff))) {
    se3_error_set(err, SE3_ERR_USAGE, "cutoff must be a positive number of Å (got %g)", o->cutoff);
    return -1;
  }
  if (o->max_neighbors < 0) {
    se3_error_set(err, SE3_ERR_USAGE, "max_neighbors must be >= 0 (got %d)", o->max_neighbors);
    return -1;
  }
  if (features_width(o->atom_features, o->n_atom_features, GRAPH_AF_COUNT, ATOM_WIDTH) < 0 || graph_edge_width(o) < 0) {
    se3_error_set(err, SE3_ERR_USAGE,
                  "bad feature list (%d atom features, %d bond features: each known and listed once)",
                  o->n_atom_features, o->n_bond_features);
    return -1;
  }
  if (graph_node_width(o) < 0) {
    se3_error_set(err, SE3_ERR_USAGE, "bad element list (%d elements%s)", o->n_elements,
                  o->n_elements > 0 && !o->elements ? ", no array" : "");
    return -1;
  }
  for (int i = 0; i < m->n_atoms; i++) {
    const struct mol_atom *a = &m->atoms[i];
    if (!isfinite(a->x) || !isfinite(a->y) || !isfinite(a->z_)) {
      se3_error_set(err, SE3_ERR_RUN, "non-finite coordinate (atom %d)", i + 1);
      return -1;
    }
  }
  for (int k = 0; k < m->n_bonds; k++) {
    const struct mol_bond *b = &m->bonds[k];
    if (b->a >= (uint32_t)m->n_atoms || b->b >= (uint32_t)m->n_atoms || b->a == b->b) {
      se3_error_set(err, SE3_ERR_RUN, "bad bond %d (atoms %u and %u of %d)", k + 1, (unsigned)b->a + 1,
                    (unsigned)b->b + 1, m->n_atoms);
      return -1;
    }
    if (!valid_order(b->order)) {
      se3_error_set(err, SE3_ERR_RUN, "bond %d has order %u", k + 1, (unsigned)b->order);
      return -1;
    }
  }
  return 0;
}

/* Gathers the sources of target j into b->cand (unsorted). */
static int gather(struct builder *b, const struct mol *m, const struct graph_opts *o, int j) {
  const struct mol_atom *aj = &m->atoms[j];
  const struct adjacency *adj = &b->adj;
  int stamp = j + 1;
  b->n_cand = 0;
  /* The first listed bond to each neighbour gives that pair's order. */
  for (int k = adj->start[j]; k < adj->start[j + 1]; k++) {
    int i = adj->nbr[k];
    if (b->bond_mark[i] != stamp) {
      b->bond_mark[i] = stamp;
      b->bond_order[i] = adj->order[k];
    }
  }
  if (o->edges != GRAPH_EDGES_BONDS) {
    double c2 = o->cutoff * o->cutoff;
    uint32_t around[27];
    int n_around = cells_around(&b->cells, j, around);
    for (int s = 0; s < n_around; s++)
      for (uint32_t t = b->cells.start[around[s]]; t < b->cells.start[around[s] + 1]; t++) {
        const double *p = &b->cells.pos[3 * t];
        double dx = aj->x - p[0], dy = aj->y - p[1], dz = aj->z_ - p[2];
        double d2 = dx * dx + dy * dy + dz * dz;
        b->pairs++;
        if (d2 > 0 && d2 <= c2) {
          int i = b->cells.atom[t];
          if (push_cand(b, d2, i, b->bond_mark[i] == stamp ? b->bond_order[i] : 0) != 0) return -1;
        }
      }
    if (o->max_neighbors > 0 && b->n_cand > (size_t)o->max_neighbors) {
      qsort(b->cand, b->n_cand, sizeof *b->cand, cand_by_dist);
      b->dropped += (int64_t)(b->n_cand - (size_t)o->max_neighbors);
      b->n_cand = (size_t)o->max_neighbors;
    }
  }
  if (o->edges != GRAPH_EDGES_RADIUS) {
    for (size_t t = 0; t < b->n_cand; t++)
      b->list_mark[b->cand[t].src] = stamp;
    for (int k = adj->start[j]; k < adj->start[j + 1]; k++) {
      int i = adj->nbr[k];
      if (b->list_mark[i] == stamp) continue;
      b->list_mark[i] = stamp;
      double d2 = dist2(&m->atoms[i], aj);
      /* a bonded pair within the cutoff and not kept was dropped by the cap: it is back */
      if (o->edges == GRAPH_EDGES_RADIUS_BONDS && o->max_neighbors > 0 && d2 > 0 && d2 <= o->cutoff * o->cutoff)
        b->dropped--;
      if (d2 > 0 && push_cand(b, d2, i, b->bond_order[i]) != 0) return -1;
    }
  }
  return 0;
}

static void node_features(const struct mol *m, const struct graph_opts *o, const struct perceive *p, float *out,
                          int width) {
  for (int i = 0; i < m->n_atoms; i++) {
    const struct mol_atom *a = &m->atoms[i];
    float *f = &out[(size_t)i * width];
    int col = 0, found = 0;
    for (int k = 0; k < o->n_elements; k++) {
      f[col + k] = 0;
      if (!found && o->elements[k] == a->z) {
        f[col + k] = 1;
        found = 1;
      }
    }
    col += o->n_elements;
    if (o->with_other) f[col++] = found ? 0 : 1;
    if (o->with_charge) f[col++] = (float)a->charge;
    if (o->with_atomic_number) f[col++] = (float)a->z;
    for (int k = 0; k < o->n_atom_features; k++) {
      int w = ATOM_WIDTH[o->atom_features[k]];
      const struct perceive_atom *q = &p->atom[i];
      for (int c = 0; c < w; c++)
        f[col + c] = 0;
      switch (o->atom_features[k]) {
      case GRAPH_AF_HYBRIDISATION:
        f[col + q->hybridisation] = 1;
        break;
      case GRAPH_AF_AROMATIC:
        f[col] = a->aromatic ? 1 : 0;
        break;
      case GRAPH_AF_RING:
        if (q->ring) f[col] = 1, f[col + 1 + (q->ring < 8 ? q->ring : 8) - 3] = 1;
        break;
      case GRAPH_AF_DEGREE:
        f[col + (q->degree < 5 ? q->degree : 5)] = 1;
        break;
      case GRAPH_AF_HYDROGENS:
        f[col + (q->hydrogens < 4 ? q->hydrogens : 4)] = 1;
        break;
      case GRAPH_AF_CHIRALITY:
        if (q->chirality) f[col + (q->chirality > 0 ? 0 : 1)] = 1;
        break;
      }
      col += w;
    }
  }
}

static int bond_column(uint8_t order) {
  switch (order) {
  case 1:
    return GRAPH_EF_SINGLE;
  case 2:
    return GRAPH_EF_DOUBLE;
  case 3:
    return GRAPH_EF_TRIPLE;
  case MOL_BOND_AROMATIC:
    return GRAPH_EF_AROMATIC;
  default:
    return GRAPH_EF_NONE;
  }
}

/* Target j's edges from its segment into the graph at offset off: source,
 * target, bond one-hot, the bond features, distance, rel_pos. */
static void write_edges(const struct builder *b, const struct mol *m, const struct graph_opts *o,
                        const struct perceive *p, int j, size_t off, struct graph *g) {
  const struct mol_atom *aj = &m->atoms[j];
  int ew = g->edge_width;
  for (int k = 0; k < b->count[j]; k++) {
    size_t e = off + (size_t)k, t = b->seg[j] + (size_t)k;
    int32_t src = b->tmp_src[t];
    const struct mol_atom *ai = &m->atoms[src];
    g->src[e] = src;
    g->dst[e] = j;
    float *f = &g->edge_feat[e * (size_t)ew];
    for (int c = 0; c < ew; c++)
      f[c] = 0;
    f[bond_column(b->tmp_order[t])] = 1;
    if (o->n_bond_features && b->tmp_order[t]) {
      /* the pair's first listed bond, as its order came from (gather) */
      int bond = -1;
      for (int q = b->adj.start[j]; q < b->adj.start[j + 1] && bond < 0; q++)
        if (b->adj.nbr[q] == src) bond = b->adj.bond[q];
      const struct perceive_bond *pb = &p->bond[bond];
      int col = GRAPH_EF_DISTANCE;
      for (int q = 0; q < o->n_bond_features; q++) {
        switch (o->bond_features[q]) {
        case GRAPH_BF_CONJUGATED:
          f[col] = pb->conjugated ? 1 : 0;
          break;
        case GRAPH_BF_RING:
          f[col] = pb->ring ? 1 : 0;
          break;
        case GRAPH_BF_STEREO:
          if (pb->stereo) f[col + (pb->stereo > 0 ? 0 : 1)] = 1;
          break;
        }
        col += BOND_WIDTH[o->bond_features[q]];
      }
    }
    f[ew - 1] = (float)sqrt(dist2(ai, aj));
    float *r = &g->rel_pos[e * 3];
    r[0] = (float)(aj->x - ai->x);
    r[1] = (float)(aj->y - ai->y);
    r[2] = (float)(aj->z_ - ai->z_);
  }
}

/* Three passes: (1) each target's sources into its segment, targets in cell
 * order so that neighbouring targets reuse the same cells in cache; (2) the
 * final offsets, in target order; (3) the edges and their features, again in
 * cell order. Bonds-only graphs visit targets in index order. */
int graph_build(const struct mol *m, const struct graph_opts *o, struct graph *g, struct se3_error *err) {
  graph_init(g);
  if (check_input(m, o, err) != 0) return -1;
  int n = m->n_atoms, width = graph_node_width(o), ew = graph_edge_width(o), radius = o->edges != GRAPH_EDGES_BONDS;
  size_t n1 = (size_t)(n ? n : 1);
  size_t *off = NULL;
  struct builder b;
  struct perceive p;
  memset(&b, 0, sizeof b);
  memset(&p, 0, sizeof p);
  if ((o->n_atom_features || o->n_bond_features) && perceive(m, &p) != 0) goto oom;
  b.seg = malloc(n1 * sizeof *b.seg);
  b.count = malloc(n1 * sizeof *b.count);
  b.bond_mark = calloc(n1, sizeof *b.bond_mark);
  b.list_mark = calloc(n1, sizeof *b.list_mark);
  b.bond_order = calloc(n1, 1);
  if (!b.seg || !b.count || !b.bond_mark || !b.list_mark || !b.bond_order || adjacency_build(&b.adj, m) != 0 ||
      (radius && cells_build(&b.cells, m, o->cutoff) != 0))
    goto oom;

  for (int t = 0; t < n; t++) {
    int j = radius ? b.cells.atom[t] : t;
    if (gather(&b, m, o, j) != 0) goto oom;
    sort_by_src(b.cand, b.n_cand);
    int r = push_segment(&b, j);
    if (r == -2) {
      se3_error_set(err, SE3_ERR_LIMIT, "too many edges (more than %d; lower the cutoff or set max_neighbors)",
                    INT32_MAX);
      builder_free(&b);
      perceive_free(&p);
      return -1;
    }
    if (r != 0) goto oom;
  }

  size_t ne = b.n_tmp;
  off = malloc(n1 * sizeof *off);
  g->n_nodes = n;
  g->n_edges = (int)ne;
  g->pairs_examined = b.pairs;
  g->edges_dropped = b.dropped;
  g->node_width = width;
  g->edge_width = ew;
  g->src = malloc((ne ? ne : 1) * sizeof *g->src);
  g->dst = malloc((ne ? ne : 1) * sizeof *g->dst);
  g->node_feat = malloc((n && width ? (size_t)n * (size_t)width : 1) * sizeof *g->node_feat);
  g->edge_feat = malloc((ne ? ne : 1) * (size_t)ew * sizeof *g->edge_feat);
  g->rel_pos = malloc((ne ? ne : 1) * 3 * sizeof *g->rel_pos);
  if (!off || !g->src || !g->dst || !g->node_feat || !g->edge_feat || !g->rel_pos) goto oom;
  size_t sum = 0;
  for (int j = 0; j < n; j++) {
    off[j] = sum;
    sum += (size_t)b.count[j];
  }
  for (int t = 0; t < n; t++) {
    int j = radius ? b.cells.atom[t] : t;
    write_edges(&b, m, o, &p, j, off[j], g);
  }
  /* Finite coordinates can still be too far apart for a float (±3e38 Å:
   * 6e38 overflows to infinity); such a graph would be stored and then
   * refused by graph_from_blob as damaged. mol_check refuses these
   * molecules at ingest; this is the builder's own guard, first edge in
   * (target, source) order. */
  for (size_t e = 0; e < ne; e++) {
    const float *r = &g->rel_pos[e * 3];
    if (!isfinite(g->edge_feat[e * (size_t)ew + (size_t)ew - 1]) || !isfinite(r[0]) || !isfinite(r[1]) ||
        !isfinite(r[2])) {
      se3_error_set(err, SE3_ERR_RUN, "edge %zu (atom %d to atom %d): distance or relative position overflows a float",
                    e + 1, (int)g->src[e] + 1, (int)g->dst[e] + 1);
      free(off);
      builder_free(&b);
      perceive_free(&p);
      graph_free(g);
      return -1;
    }
  }
  node_features(m, o, &p, g->node_feat, width);
  free(off);
  builder_free(&b);
  perceive_free(&p);
  return 0;
oom:
  free(off);
  builder_free(&b);
  perceive_free(&p);
  graph_free(g);
  se3_error_set(err, SE3_ERR_MEMORY, "out of memory building the graph of %d atoms", n);
  return -1;
}

/* ------------------------------------------------------------------ blob */

/* Bytes of a blob with these counts (64-bit: counts come from untrusted headers). */
static uint64_t blob_size(uint64_t nn, uint64_t ne, uint64_t nw, uint64_t ew) {
  return GRAPH_BLOB_HEADER + 4 * (2 * ne + nn * nw + ne * ew + 3 * ne);
}

int graph_to_blob(const struct graph *g, uint8_t **blob, size_t *len) {
  *blob = NULL;
  *len = 0;
  if (!g || g->n_nodes < 0 || g->n_edges < 0 || g->node_width < 0 || g->node_width > 65535 ||
      g->edge_width < GRAPH_EDGE_WIDTH || g->edge_width > GRAPH_EDGE_WIDTH_MAX)
    return -1;
  size_t nn = (size_t)g->n_nodes, ne = (size_t)g->n_edges, nw = (size_t)g->node_width, ew = (size_t)g->edge_width;
  if ((ne && (!g->src || !g->dst || !g->edge_feat || !g->rel_pos)) || (nn && nw && !g->node_feat)) return -1;
  uint64_t want = blob_size(nn, ne, nw, ew) + GRAPH_BLOB_CRC;
  if (want > SIZE_MAX) return -1;
  uint8_t *b = malloc((size_t)want), *p = b;
  if (!b) return -1;
  memcpy(p, GRAPH_BLOB_MAGIC, 4);
  le_put_u16(p + 4, GRAPH_BLOB_VERSION);
  le_put_u16(p + 6, 0);
  le_put_u32(p + 8, (uint32_t)nn);
  le_put_u32(p + 12, (uint32_t)ne);
  le_put_u16(p + 16, (uint16_t)nw);
  le_put_u16(p + 18, (uint16_t)ew);
  p += GRAPH_BLOB_HEADER;
  for (size_t e = 0; e < ne; e++, p += 4)
    le_put_u32(p, (uint32_t)g->src[e]);
  for (size_t e = 0; e < ne; e++, p += 4)
    le_put_u32(p, (uint32_t)g->dst[e]);
  for (size_t k = 0; k < nn * nw; k++, p += 4)
    le_put_f32(p, g->node_feat[k]);
  for (size_t k = 0; k < ne * ew; k++, p += 4)
    le_put_f32(p, g->edge_feat[k]);
  for (size_t k = 0; k < ne * 3; k++, p += 4)
    le_put_f32(p, g->rel_pos[k]);
  crc32c_seal(b, (size_t)want);
  *blob = b;
  *len = (size_t)want;
  return 0;
}

/* Reads count floats; -1 (index in *bad) at the first non-finite one. */
static int read_floats(const uint8_t *p, size_t count, float *out, size_t *bad) {
  for (size_t k = 0; k < count; k++, p += 4) {
    out[k] = le_get_f32(p);
    if (!isfinite(out[k])) {
      *bad = k;
      return -1;
    }
  }
  return 0;
}

int graph_from_blob(const uint8_t *blob, size_t len, struct graph *g, struct se3_error *err) {
  graph_init(g);
  if (!blob || len < GRAPH_BLOB_HEADER) {
    se3_error_set(err, SE3_ERR_RUN, "graph blob too short (%zu bytes, header is %d)", blob ? len : 0,
                  GRAPH_BLOB_HEADER);
    return -1;
  }
  if (memcmp(blob, GRAPH_BLOB_MAGIC, 4) != 0) {
    se3_error_set(err, SE3_ERR_RUN, "not a graph blob (bad magic, expected \"%s\")", GRAPH_BLOB_MAGIC);
    return -1;
  }
  unsigned version = le_get_u16(blob + 4), flags = le_get_u16(blob + 6);
  if (version != GRAPH_BLOB_VERSION && version != 1) {
    se3_error_set(err, SE3_ERR_RUN, "unsupported graph blob version %u (this se3screen reads 1 and %d)", version,
                  GRAPH_BLOB_VERSION);
    return -1;
  }
  unsigned crc = version >= 2 ? GRAPH_BLOB_CRC : 0; /* version 1 has no checksum */
  if (flags != 0) {
    se3_error_set(err, SE3_ERR_RUN, "graph blob has unknown flags 0x%x (version %u defines none)", flags, version);
    return -1;
  }
  uint32_t nn = le_get_u32(blob + 8), ne = le_get_u32(blob + 12);
  unsigned nw = le_get_u16(blob + 16), ew = le_get_u16(blob + 18);
  if (ew < GRAPH_EDGE_WIDTH || ew > GRAPH_EDGE_WIDTH_MAX) {
    se3_error_set(err, SE3_ERR_RUN, "graph blob edge width %u (expected %d to %d)", ew, GRAPH_EDGE_WIDTH,
                  GRAPH_EDGE_WIDTH_MAX);
    return -1;
  }
  uint64_t want = blob_size(nn, ne, nw, ew) + crc;
  if (want != len || nn > (uint32_t)INT32_MAX || ne > (uint32_t)INT32_MAX) {
    se3_error_set(err, SE3_ERR_RUN,
                  "graph blob size mismatch: %zu bytes, expected %llu for %u nodes of width %u and %u edges", len,
                  (unsigned long long)want, (unsigned)nn, nw, (unsigned)ne);
    return -1;
  }
  uint32_t stored, computed;
  if (crc && crc32c_verify(blob, len, &stored, &computed)) {
    se3_error_set(err, SE3_ERR_RUN, "graph blob checksum mismatch (stored 0x%08x, computed 0x%08x)", (unsigned)stored,
                  (unsigned)computed);
    return -1;
  }
  g->n_nodes = (int)nn;
  g->n_edges = (int)ne;
  g->node_width = (int)nw;
  g->edge_width = (int)ew;
  g->src = malloc((ne ? ne : 1) * sizeof *g->src);
  g->dst = malloc((ne ? ne : 1) * sizeof *g->dst);
  g->node_feat = malloc((nn && nw ? (size_t)nn * nw : 1) * sizeof *g->node_feat);
  g->edge_feat = malloc((ne ? ne : 1) * (size_t)ew * sizeof *g->edge_feat);
  g->rel_pos = malloc((ne ? ne : 1) * 3 * sizeof *g->rel_pos);
  if (!g->src || !g->dst || !g->node_feat || !g->edge_feat || !g->rel_pos) {
    se3_error_set(err, SE3_ERR_MEMORY, "out of memory decoding a graph blob of %u nodes and %u edges", (unsigned)nn,
                  (unsigned)ne);
    goto bad;
  }
  const uint8_t *p = blob + GRAPH_BLOB_HEADER;
  for (uint32_t e = 0; e < ne; e++, p += 4)
    g->src[e] = (int32_t)le_get_u32(p);
  for (uint32_t e = 0; e < ne; e++, p += 4)
    g->dst[e] = (int32_t)le_get_u32(p);
  for (uint32_t e = 0; e < ne; e++) {
    int32_t s = g->src[e], d = g->dst[e];
    if (s < 0 || d < 0 || (uint32_t)s >= nn || (uint32_t)d >= nn) {
      se3_error_set(err, SE3_ERR_RUN, "graph blob: edge %u joins %d -> %d (of %u nodes)", (unsigned)e, s, d,
                    (unsigned)nn);
      goto bad;
    }
    if (s == d) {
      se3_error_set(err, SE3_ERR_RUN, "graph blob: edge %u is a self loop on node %d", (unsigned)e, s);
      goto bad;
    }
    if (e > 0 && (d < g->dst[e - 1] || (d == g->dst[e - 1] && s <= g->src[e - 1]))) {
      se3_error_set(err, SE3_ERR_RUN, "graph blob: edge %u (%d -> %d) is out of (target, source) order or repeated",
                    (unsigned)e, s, d);
      goto bad;
    }
  }
  size_t k;
  if (read_floats(p, (size_t)nn * nw, g->node_feat, &k) != 0) {
    se3_error_set(err, SE3_ERR_RUN, "graph blob: non-finite node feature (node %zu, column %zu)", k / nw, k % nw);
    goto bad;
  }
  p += (size_t)nn * nw * 4;
  if (read_floats(p, (size_t)ne * ew, g->edge_feat, &k) != 0) {
    se3_error_set(err, SE3_ERR_RUN, "graph blob: non-finite edge feature (edge %zu, column %zu)", k / ew, k % ew);
    goto bad;
  }
  p += (size_t)ne * ew * 4;
  if (read_floats(p, (size_t)ne * 3, g->rel_pos, &k) != 0) {
    se3_error_set(err, SE3_ERR_RUN, "graph blob: non-finite relative position (edge %zu, axis %zu)", k / 3, k % 3);
    goto bad;
  }
  return 0;
bad:
  graph_free(g);
  return -1;
}
