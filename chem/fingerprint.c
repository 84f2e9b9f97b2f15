/* fingerprint.c — Morgan fingerprints, Tanimoto and Butina (fingerprint.h). */
#include <stdlib.h>
#include <string.h>

#include "chem/fingerprint.h"

/* a word folded into a 64-bit hash (splitmix64's finaliser over h ^ v) */
static uint64_t fold(uint64_t h, uint64_t v) {
  uint64_t z = h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static void set_bit(struct fp *f, uint64_t id) {
  unsigned b = (unsigned)(id % FP_BITS);
  uint64_t bit = 1ull << (b % 64);
  if (!(f->w[b / 64] & bit)) {
    f->w[b / 64] |= bit;
    f->n_set++;
  }
}

/* the heavy atoms' graph: for heavy atom a, its neighbours nb[off[a] .. off[a+1]) and the bonds' orders */
struct hgraph {
  int n, *off, *nb, *order, *bond, *hcount;
};

/* ring bonds: those that are no bridge (Tarjan's low-link, by an explicit
 * stack so that no molecule is too long for the C stack) */
static void mark_rings(const struct hgraph *g, int n_bonds, unsigned char *ring_bond) {
  int *disc = calloc((size_t)g->n + 1, sizeof *disc), *low = malloc(((size_t)g->n + 1) * sizeof *low);
  int *stack = malloc(((size_t)g->n + 1) * sizeof *stack), *edge = malloc(((size_t)g->n + 1) * sizeof *edge);
  int *via = malloc(((size_t)g->n + 1) * sizeof *via);
  if (disc && low && stack && edge && via) {
    memset(ring_bond, 1, (size_t)n_bonds + 1);
    int t = 0;
    for (int s = 0; s < g->n; s++) {
      if (disc[s]) continue;
      int sp = 0;
      stack[sp] = s, edge[sp] = g->off[s], via[sp] = -1, sp++;
      disc[s] = low[s] = ++t;
      while (sp) {
        int a = stack[sp - 1];
        if (edge[sp - 1] < g->off[a + 1]) {
          int k = edge[sp - 1]++, b = g->nb[k];
          if (g->bond[k] == via[sp - 1]) continue; /* the bond we came in by */
          if (disc[b]) {
            if (disc[b] < low[a]) low[a] = disc[b];
          } else {
            disc[b] = low[b] = ++t;
            stack[sp] = b, edge[sp] = g->off[b], via[sp] = g->bond[k], sp++;
          }
        } else {
          sp--;
          if (sp) {
            int p = stack[sp - 1];
            if (low[a] < low[p]) low[p] = low[a];
            if (low[a] > disc[p]) ring_bond[via[sp]] = 0; /* a bridge */
          }
        }
      }
    }
  } else {
    memset(ring_bond, 0, (size_t)n_bonds + 1); /* no memory: no rings (the caller fails anyway) */
  }
  free(disc), free(low), free(stack), free(edge), free(via);
}

/* the heavy-atom graph of m; index maps m's atoms to heavy ones (-1: a hydrogen atom) */
static int build(const struct mol *m, int *index, struct hgraph *g) {
  g->n = 0;
  for (int a = 0; a < m->n_atoms; a++)
    index[a] = m->atoms[a].z == 1 ? -1 : g->n++;
  g->off = calloc((size_t)g->n + 2, sizeof *g->off);
  g->hcount = calloc((size_t)g->n + 1, sizeof *g->hcount);
  size_t nb = 2 * (size_t)m->n_bonds + 1;
  g->nb = malloc(nb * sizeof *g->nb), g->order = malloc(nb * sizeof *g->order), g->bond = malloc(nb * sizeof *g->bond);
  if (!g->off || !g->hcount || !g->nb || !g->order || !g->bond) return -1;
  for (int a = 0; a < m->n_atoms; a++)
    if (index[a] >= 0) g->hcount[index[a]] = m->atoms[a].implicit_h;
  for (int b = 0; b < m->n_bonds; b++) {
    const struct mol_bond *bd = &m->bonds[b];
    if (bd->a >= (uint32_t)m->n_atoms || bd->b >= (uint32_t)m->n_atoms) return -1;
    int x = index[bd->a], y = index[bd->b];
    if (x >= 0 && y >= 0) {
      g->off[x + 1]++, g->off[y + 1]++;
    } else if (x >= 0 || y >= 0) {
      g->hcount[x >= 0 ? x : y]++;
    }
  }
  for (int a = 0; a < g->n; a++)
    g->off[a + 1] += g->off[a];
  int *fill = calloc((size_t)g->n + 1, sizeof *fill);
  if (!fill) return -1;
  for (int b = 0; b < m->n_bonds; b++) {
    int x = index[m->bonds[b].a], y = index[m->bonds[b].b];
    if (x < 0 || y < 0) continue;
    int o = m->bonds[b].order == MOL_BOND_AROMATIC ? 4 : m->bonds[b].order;
    int kx = g->off[x] + fill[x]++, ky = g->off[y] + fill[y]++;
    g->nb[kx] = y, g->order[kx] = o, g->bond[kx] = b;
    g->nb[ky] = x, g->order[ky] = o, g->bond[ky] = b;
  }
  free(fill);
  return 0;
}

static int cmp_u64(const void *pa, const void *pb) {
  uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
  return (a > b) - (a < b);
}

int fp_morgan(const struct mol *m, int radius, struct fp *out) {
  memset(out, 0, sizeof *out);
  if (radius < 0 || radius > 6) return -1;
  struct hgraph g = {0};
  int *index = malloc(((size_t)m->n_atoms + 1) * sizeof *index);
  unsigned char *ring_bond = malloc((size_t)m->n_bonds + 1);
  uint64_t *id = NULL, *next = NULL, *pairs = NULL;
  int ret = -1;
  if (!index || !ring_bond || build(m, index, &g)) goto done;
  id = malloc(((size_t)g.n + 1) * sizeof *id);
  next = malloc(((size_t)g.n + 1) * sizeof *next);
  pairs = malloc(((size_t)g.off[g.n] + 1) * sizeof *pairs);
  if (!id || !next || !pairs) goto done;
  mark_rings(&g, m->n_bonds, ring_bond);
  for (int a = 0; a < m->n_atoms; a++) {
    int h = index[a];
    if (h < 0) continue;
    const struct mol_atom *at = &m->atoms[a];
    int in_ring = 0;
    for (int k = g.off[h]; k < g.off[h + 1]; k++)
      in_ring |= ring_bond[g.bond[k]];
    uint64_t v = fold(0x4d6f7267616eull, at->z);
    v = fold(v, (uint64_t)(g.off[h + 1] - g.off[h]));
    v = fold(v, (uint64_t)g.hcount[h]);
    v = fold(v, (uint64_t)(int64_t)at->charge);
    v = fold(v, (uint64_t)(at->aromatic != 0) | (uint64_t)in_ring << 1);
    id[h] = v;
    set_bit(out, v);
  }
  for (int r = 1; r <= radius; r++) {
    for (int a = 0; a < g.n; a++) {
      int deg = g.off[a + 1] - g.off[a];
      for (int k = 0; k < deg; k++)
        pairs[k] = fold((uint64_t)g.order[g.off[a] + k], id[g.nb[g.off[a] + k]]);
      qsort(pairs, (size_t)deg, sizeof *pairs, cmp_u64);
      uint64_t v = fold(fold(0x7261646975ull, (uint64_t)r), id[a]);
      for (int k = 0; k < deg; k++)
        v = fold(v, pairs[k]);
      next[a] = v;
      set_bit(out, v);
    }
    memcpy(id, next, (size_t)g.n * sizeof *id);
  }
  ret = 0;
done:
  free(index), free(ring_bond), free(id), free(next), free(pairs);
  free(g.off), free(g.nb), free(g.order), free(g.bond), free(g.hcount);
  if (ret) memset(out, 0, sizeof *out);
  return ret;
}

/* the bits a and b share: with the processor's POPCNT where it has one
 * (chosen at run time: the binary runs on any x86-64), else the compiler's
 * portable count */
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("popcnt"))) static int common_popcnt(const struct fp *a, const struct fp *b) {
  int both = 0;
  for (int k = 0; k < FP_BITS / 64; k++)
    both += __builtin_popcountll(a->w[k] & b->w[k]);
  return both;
}
#endif

static int common_plain(const struct fp *a, const struct fp *b) {
  int both = 0;
  for (int k = 0; k < FP_BITS / 64; k++)
    both += __builtin_popcountll(a->w[k] & b->w[k]);
  return both;
}

static int common_bits(const struct fp *a, const struct fp *b) {
#if defined(__x86_64__) && defined(__GNUC__)
  static int has = -1;
  if (has < 0) has = __builtin_cpu_supports("popcnt") ? 1 : 0;
  if (has) return common_popcnt(a, b);
#endif
  return common_plain(a, b);
}

double fp_tanimoto(const struct fp *a, const struct fp *b) {
  int both = common_bits(a, b), either = a->n_set + b->n_set - both;
  return either ? (double)both / either : 1.0;
}

struct by_count {
  int count, i;
};

static int most_first(const void *pa, const void *pb) {
  const struct by_count *a = pa, *b = pb;
  if (a->count != b->count) return a->count > b->count ? -1 : 1;
  return (a->i > b->i) - (a->i < b->i);
}

int fp_butina(const struct fp *fps, int n, double cutoff, int *cluster) {
  struct by_count *order = malloc(((size_t)n + 1) * sizeof *order);
  if (!order) return -1;
  double min_sim = 1 - cutoff;
  for (int i = 0; i < n; i++)
    order[i] = (struct by_count){0, i};
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      if (fp_tanimoto(&fps[i], &fps[j]) >= min_sim) order[i].count++, order[j].count++;
  qsort(order, (size_t)n, sizeof *order, most_first);
  for (int i = 0; i < n; i++)
    cluster[i] = -1;
  int nc = 0;
  for (int k = 0; k < n; k++) {
    int c = order[k].i;
    if (cluster[c] >= 0) continue;
    cluster[c] = nc;
    for (int j = 0; j < n && order[k].count; j++)
      if (cluster[j] < 0 && fp_tanimoto(&fps[c], &fps[j]) >= min_sim) cluster[j] = nc;
    nc++;
  }
  free(order);
  return nc;
}
