/* test_graph.c — molecule graphs: the cell-list edge set against an O(N^2)
 * brute force (random clouds up to 10,000 atoms, lattices with pairs exactly
 * at the cutoff, QM7 and PDB ligands), the max_neighbors cap, invariance under
 * rotation and translation, bond modes, edge and node features, the blob, and
 * linear scaling. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chem/graph.h"
#include "common/crc32c.h"
#include "chem/mol.h"
#include "chem/obbridge.h"
#include "chem/records.h"
#include "common/error.h"
#include "tests/testutil.h"

/* ---- helpers ---------------------------------------------------------------- */

/* n random carbons in a box of the given density (atoms/Å^3), shifted so
 * that coordinates are negative and positive. */
static void cloud(struct mol *m, int n, double density, uint64_t seed) {
  mol_init(m);
  m->dim = 3;
  tu_seed(seed);
  double side = cbrt(n / density);
  m->atoms = calloc((size_t)n, sizeof *m->atoms);
  m->n_atoms = n;
  for (int i = 0; i < n; i++) {
    m->atoms[i].z = 6;
    m->atoms[i].x = tu_rnd() * side - side / 3;
    m->atoms[i].y = tu_rnd() * side + 17.25;
    m->atoms[i].z_ = tu_rnd() * side - side;
  }
}

/* A k x k x k lattice of spacing h: many pairs sit exactly at h, sqrt(2) h,
 * and on cell boundaries. */
static void lattice(struct mol *m, int k, double h) {
  mol_init(m);
  m->dim = 3;
  for (int a = 0; a < k; a++)
    for (int b = 0; b < k; b++)
      for (int c = 0; c < k; c++)
        tu_add_atom(m, 6, a * h, b * h, c * h);
}

static double d2_of(const struct mol *m, int i, int j) {
  double dx = m->atoms[j].x - m->atoms[i].x, dy = m->atoms[j].y - m->atoms[i].y, dz = m->atoms[j].z_ - m->atoms[i].z_;
  return dx * dx + dy * dy + dz * dz;
}

/* The first listed bond between i and j, 0 when none. */
static int bf_order(const struct mol *m, int i, int j) {
  int a = i < j ? i : j, b = i < j ? j : i;
  for (int k = 0; k < m->n_bonds; k++)
    if ((int)m->bonds[k].a == a && (int)m->bonds[k].b == b) return m->bonds[k].order;
  return 0;
}

struct bf_cand {
  double d2;
  int src;
};
static int bf_by_dist(const void *pa, const void *pb) {
  const struct bf_cand *a = pa, *b = pb;
  if (a->d2 != b->d2) return a->d2 < b->d2 ? -1 : 1;
  return a->src - b->src;
}
static int bf_by_src(const void *pa, const void *pb) {
  const struct bf_cand *a = pa, *b = pb;
  return a->src - b->src;
}

/* The edge list straight from the definition in graph.h: O(N^2) pairs, the
 * cap by sorting (distance, source), bonds found by scanning the bond list.
 * Returns the number of edges; *src and *dst are malloc'd. */
static int brute_edges(const struct mol *m, const struct graph_opts *o, int **src, int **dst) {
  int n = m->n_atoms, ne = 0, cap = 1024;
  *src = malloc((size_t)cap * sizeof **src);
  *dst = malloc((size_t)cap * sizeof **dst);
  struct bf_cand *c = malloc((size_t)(n + 1) * sizeof *c);
  char *bonded = calloc((size_t)n + 1, 1);
  double c2 = o->cutoff * o->cutoff;
  for (int j = 0; j < n; j++) {
    int nc = 0;
    if (o->edges != GRAPH_EDGES_BONDS) {
      for (int i = 0; i < n; i++) {
        double d2 = d2_of(m, i, j);
        if (d2 > 0 && d2 <= c2) c[nc++] = (struct bf_cand){d2, i};
      }
      if (o->max_neighbors > 0 && nc > o->max_neighbors) {
        qsort(c, (size_t)nc, sizeof *c, bf_by_dist);
        nc = o->max_neighbors;
      }
    }
    if (o->edges != GRAPH_EDGES_RADIUS) {
      memset(bonded, 0, (size_t)n);
      for (int k = 0; k < m->n_bonds; k++) {
        if ((int)m->bonds[k].a == j) bonded[m->bonds[k].b] = 1;
        if ((int)m->bonds[k].b == j) bonded[m->bonds[k].a] = 1;
      }
      for (int t = 0; t < nc; t++)
        bonded[c[t].src] = 0;
      for (int i = 0; i < n; i++)
        if (bonded[i] && d2_of(m, i, j) > 0) c[nc++] = (struct bf_cand){d2_of(m, i, j), i};
    }
    qsort(c, (size_t)nc, sizeof *c, bf_by_src);
    for (int t = 0; t < nc; t++) {
      if (ne == cap) {
        cap *= 2;
        *src = realloc(*src, (size_t)cap * sizeof **src);
        *dst = realloc(*dst, (size_t)cap * sizeof **dst);
      }
      (*src)[ne] = c[t].src;
      (*dst)[ne] = j;
      ne++;
    }
  }
  free(c);
  free(bonded);
  return ne;
}

static void build_ok(const struct mol *m, const struct graph_opts *o, struct graph *g) {
  struct se3_error e;
  int rc = graph_build(m, o, g, &e);
  cr_assert_eq(rc, 0, "graph_build failed: %s", se3_error_str(&e).s);
}

/* Builds the graph, checks its edge list equals the brute force exactly, and
 * every edge's features and rel_pos against the definition. Returns n_edges. */
static int check_against_brute(const struct mol *m, const struct graph_opts *o, const char *what) {
  struct graph g;
  build_ok(m, o, &g);
  int *src, *dst;
  int ne = brute_edges(m, o, &src, &dst);
  cr_assert_eq(g.n_nodes, m->n_atoms, "%s: nodes", what);
  cr_assert_eq(g.n_edges, ne, "%s: %d edges, brute force %d", what, g.n_edges, ne);
  cr_assert_eq(g.edge_width, GRAPH_EDGE_WIDTH);
  for (int e = 0; e < ne; e++) {
    cr_assert(g.src[e] == src[e] && g.dst[e] == dst[e], "%s: edge %d is %d->%d, brute force %d->%d", what, e, g.src[e],
              g.dst[e], src[e], dst[e]);
    int i = src[e], j = dst[e];
    const float *f = &g.edge_feat[(size_t)e * GRAPH_EDGE_WIDTH];
    int ord = bf_order(m, i, j);
    int col = ord == 0 ? 0 : ord == MOL_BOND_AROMATIC ? 4 : ord;
    for (int k = 0; k < 5; k++)
      cr_assert_eq(f[k], k == col ? 1.0f : 0.0f, "%s: edge %d->%d bond column %d (order %d)", what, i, j, k, ord);
    double d = sqrt(d2_of(m, i, j));
    cr_assert(fabs(f[GRAPH_EF_DISTANCE] - d) <= 1e-6 * (1 + d), "%s: edge %d->%d distance %g, want %g", what, i, j,
              f[GRAPH_EF_DISTANCE], d);
    const float *r = &g.rel_pos[(size_t)e * 3];
    double want[3] = {m->atoms[j].x - m->atoms[i].x, m->atoms[j].y - m->atoms[i].y, m->atoms[j].z_ - m->atoms[i].z_};
    for (int k = 0; k < 3; k++)
      cr_assert(fabs(r[k] - want[k]) <= 1e-6 * (1 + fabs(want[k])), "%s: edge %d->%d rel_pos[%d] %g, want %g", what, i,
                j, k, r[k], want[k]);
  }
  free(src);
  free(dst);
  graph_free(&g);
  return ne;
}

/* ---- edge sets against brute force ------------------------------------------ */

Test(graph, random_clouds_match_brute_force, .timeout = 120) {
  static const int sizes[] = {0, 1, 2, 3, 10, 100, 1000, 3000, 10000};
  struct graph_opts o = {.cutoff = 5.0, .edges = GRAPH_EDGES_RADIUS};
  long total = 0;
  for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
    struct mol m;
    cloud(&m, sizes[s], 0.1, 1000 + s);
    char what[64];
    snprintf(what, sizeof what, "cloud of %d", sizes[s]);
    int ne = check_against_brute(&m, &o, what);
    if (sizes[s] == 10000) cr_assert(ne > 10000 * 30, "protein-like density gives ~50 neighbours (%d edges)", ne);
    total += ne;
    mol_free(&m);
  }
  /* sparse, dense, and a different cutoff */
  struct mol m;
  cloud(&m, 2000, 0.001, 7);
  cr_assert_gt(check_against_brute(&m, &o, "sparse"), 0);
  mol_free(&m);
  cloud(&m, 2000, 1.0, 8);
  o.cutoff = 1.7;
  check_against_brute(&m, &o, "dense");
  mol_free(&m);
  cr_log_info("%ld edges checked", total);
}

Test(graph, pairs_exactly_at_the_cutoff_and_on_cell_boundaries) {
  /* spacing 1, cutoff 1: each pair at exactly 1 Å is an edge, sqrt(2) is not */
  struct mol m;
  lattice(&m, 8, 1.0);
  struct graph_opts o = {.cutoff = 1.0, .edges = GRAPH_EDGES_RADIUS};
  int ne = check_against_brute(&m, &o, "lattice h=1 c=1");
  cr_assert_eq(ne, 6 * 8 * 8 * 7, "each axis has 8*8 lines of 7 pairs, two directions");
  o.cutoff = sqrt(2.0);
  check_against_brute(&m, &o, "lattice c=sqrt2");
  o.cutoff = 2.0;
  check_against_brute(&m, &o, "lattice c=2");
  mol_free(&m);
  /* spacing 0.5 with cutoff 1: atoms sit on every cell boundary */
  lattice(&m, 10, 0.5);
  o.cutoff = 1.0;
  check_against_brute(&m, &o, "lattice h=0.5 c=1");
  mol_free(&m);
}

Test(graph, coincident_atoms_and_outliers) {
  struct mol m;
  cloud(&m, 500, 0.1, 99);
  /* duplicates of some atoms (distance 0: never edges), and far outliers */
  for (int k = 0; k < 20; k++) {
    struct mol_atom a = m.atoms[k * 7];
    tu_add_atom(&m, 8, a.x, a.y, a.z_);
  }
  tu_add_atom(&m, 1, 1e9, -1e9, 1e9);
  tu_add_atom(&m, 1, 1e9, -1e9, 1e9 + 1.0);
  tu_add_atom(&m, 1, -3e12, 5, 5);
  struct graph_opts o = {.cutoff = 4.0, .edges = GRAPH_EDGES_RADIUS};
  check_against_brute(&m, &o, "duplicates and outliers");
  struct graph g;
  build_ok(&m, &o, &g);
  for (int e = 0; e < g.n_edges; e++)
    cr_assert_gt(g.edge_feat[(size_t)e * GRAPH_EDGE_WIDTH + GRAPH_EF_DISTANCE], 0.0f, "no zero-length edge");
  /* the two outliers 1 Å apart see each other and nothing else */
  int n = m.n_atoms, far = 0;
  for (int e = 0; e < g.n_edges; e++)
    if (g.dst[e] >= n - 3) {
      far++;
      cr_assert(g.src[e] >= n - 3 && g.src[e] < n - 1 && g.dst[e] < n - 1);
    }
  cr_assert_eq(far, 2);
  graph_free(&g);
  mol_free(&m);
}

static void setup_ob(void) { cr_assert_eq(ob_init(), 0, "ob_init"); }

static struct ob_parse_opts sdf_opts(void) {
  struct ob_parse_opts o = {
      .format = "sdf", .add_hydrogens = 1, .gen3d = OB_GEN3D_NEVER, .quality = OB_Q_FAST, .seed = 1, .max_atoms = 999};
  return o;
}

/* Every option set the real-data tests compare. */
static const struct graph_opts REAL_OPTS[] = {
    {.cutoff = 5.0, .edges = GRAPH_EDGES_RADIUS},
    {.cutoff = 2.5, .max_neighbors = 3, .edges = GRAPH_EDGES_RADIUS},
    {.edges = GRAPH_EDGES_BONDS},
    {.cutoff = 1.2, .max_neighbors = 2, .edges = GRAPH_EDGES_RADIUS_BONDS},
};
enum { N_REAL_OPTS = sizeof REAL_OPTS / sizeof *REAL_OPTS };

Test(graph, qm7_matches_brute_force, .init = setup_ob, .timeout = 120) {
  if (!tu_have_shared()) cr_skip_test("no shared data");
  char *dir = tu_tmpdir("graph_qm7");
  cr_assert_eq(tu_sh(NULL, "tar xzf %s -C %s gdb7.sdf", tu_shared("data/qm7/gdb7.tar.gz"), dir), 0);
  char path[4096];
  struct se3_error e;
  snprintf(path, sizeof path, "%s/gdb7.sdf", dir);
  struct rec_reader *r = rec_open(path, MOL_FMT_SDF, NULL, &e);
  cr_assert_not_null(r, "%s", se3_error_str(&e).s);
  struct ob_parse_opts po = sdf_opts();
  po.allow_radicals = 1; /* 864 records carry M  RAD marks; their geometry is what counts here */
  struct rec rec;
  int parsed = 0, rejected = 0;
  long edges[N_REAL_OPTS] = {0};
  struct mol *mols = NULL;
  int n_mols = 0;
  while (rec_next(r, &rec, &e) == 1) {
    struct mol m;
    char why[256];
    if (ob_parse(rec.text, rec.len, &po, &m, why, sizeof why) != 0) {
      rejected++;
      continue;
    }
    parsed++;
    /* every third record against brute force in every mode; all are timed below */
    if (rec.record_no % 3 == 1)
      for (int k = 0; k < N_REAL_OPTS; k++)
        edges[k] += check_against_brute(&m, &REAL_OPTS[k], m.name);
    mols = realloc(mols, (size_t)(n_mols + 1) * sizeof *mols);
    mols[n_mols++] = m;
  }
  rec_close(r);
  cr_assert_gt(parsed, 7000, "QM7 parses (%d parsed, %d rejected)", parsed, rejected);
  for (int k = 0; k < N_REAL_OPTS; k++)
    cr_assert_gt(edges[k], 0);

  /* throughput at cutoff 5 Å, radius edges, the usual features */
  static const uint8_t elements[] = {1, 6, 7, 8, 16};
  struct graph_opts o = {.cutoff = 5.0,
                         .edges = GRAPH_EDGES_RADIUS,
                         .elements = elements,
                         .n_elements = 5,
                         .with_other = 1,
                         .with_charge = 1};
  double best = INFINITY;
  for (int rep = 0; rep < 3; rep++) {
    double t0 = tu_now();
    for (int i = 0; i < n_mols; i++) {
      struct graph g;
      build_ok(&mols[i], &o, &g);
      graph_free(&g);
    }
    double t = tu_now() - t0;
    if (t < best) best = t;
  }
  cr_log_info("QM7: %d molecules, %.0f mol/s at cutoff 5 Å (graph_build + graph_free)", n_mols, n_mols / best);
  for (int i = 0; i < n_mols; i++)
    mol_free(&mols[i]);
  free(mols);
  free(dir);
}

Test(graph, pdb_ligands_match_brute_force, .init = setup_ob, .timeout = 120) {
  if (!tu_have_shared()) cr_skip_test("no shared data");
  char *dir = tu_tmpdir("graph_ligands");
  cr_assert_eq(tu_sh(NULL, "tar xJf %s -C %s --wildcards 'pdb_ligands_sdf/1*'",
                     tu_shared("data/ligands3d/openbabel_pdb_ligands_sdf.tar.xz"), dir),
               0);
  char *list = NULL;
  /* every 6th file of the ~2000 extracted: ~330 ligands */
  cr_assert_eq(tu_sh(&list, "cd %s/pdb_ligands_sdf && ls | LC_ALL=C sort | awk 'NR %% 6 == 1'", dir), 0);
  struct ob_parse_opts po = sdf_opts();
  int files = 0, parsed = 0, biggest = 0;
  long edges = 0;
  for (char *save = NULL, *name = strtok_r(list, "\n", &save); name; name = strtok_r(NULL, "\n", &save)) {
    char path[4096];
    snprintf(path, sizeof path, "%s/pdb_ligands_sdf/%s", dir, name);
    size_t len;
    char *text = tu_read(path, &len);
    cr_assert_not_null(text, "%s", path);
    files++;
    struct mol m;
    char why[256];
    if (ob_parse(text, len, &po, &m, why, sizeof why) == 0) {
      parsed++;
      if (m.n_atoms > biggest) biggest = m.n_atoms;
      for (int k = 0; k < N_REAL_OPTS; k++)
        edges += check_against_brute(&m, &REAL_OPTS[k], name);
      mol_free(&m);
    }
    free(text);
  }
  free(list);
  cr_assert_gt(files, 250, "a few hundred ligand files (%d)", files);
  cr_assert_gt(parsed, files * 9 / 10, "most ligands parse (%d of %d)", parsed, files);
  cr_log_info("%d ligands (largest %d atoms), %ld edges checked", parsed, biggest, edges);
  free(dir);
}

/* ---- max_neighbors ------------------------------------------------------------ */

Test(graph, max_neighbors_keeps_the_nearest, .timeout = 60) {
  static const int caps[] = {1, 2, 5, 16, 60};
  for (size_t k = 0; k < sizeof caps / sizeof *caps; k++) {
    struct mol m;
    cloud(&m, 3000, 0.1, 500 + k);
    struct graph_opts o = {.cutoff = 5.0, .max_neighbors = caps[k], .edges = GRAPH_EDGES_RADIUS};
    char what[64];
    snprintf(what, sizeof what, "cap %d", caps[k]);
    int ne = check_against_brute(&m, &o, what);
    /* the cap binds: every target has min(cap, its neighbour count) sources */
    if (caps[k] <= 5) cr_assert_gt(ne, 3000 * caps[k] * 9 / 10, "%s: %d edges", what, ne);
    struct graph g;
    build_ok(&m, &o, &g);
    int *in = calloc((size_t)m.n_atoms, sizeof *in);
    for (int e = 0; e < g.n_edges; e++)
      in[g.dst[e]]++;
    for (int j = 0; j < m.n_atoms; j++)
      cr_assert_leq(in[j], caps[k], "%s: target %d has %d incoming edges", what, j, in[j]);
    free(in);
    graph_free(&g);
    mol_free(&m);
  }
}

Test(graph, max_neighbors_ties_go_to_the_smaller_source) {
  /* lattice spacing 1, cutoff 1.5: the 6 face neighbours at 1 Å all tie */
  struct mol m;
  lattice(&m, 5, 1.0);
  struct graph_opts o = {.cutoff = 1.5, .max_neighbors = 3, .edges = GRAPH_EDGES_RADIUS};
  check_against_brute(&m, &o, "ties");
  struct graph g;
  build_ok(&m, &o, &g);
  /* centre atom (2,2,2) = index 62; its face neighbours are 37, 57, 61, 63, 67, 87 */
  int got[8], n = 0;
  for (int e = 0; e < g.n_edges; e++)
    if (g.dst[e] == 62) got[n++] = g.src[e];
  cr_assert_eq(n, 3);
  cr_assert(got[0] == 37 && got[1] == 57 && got[2] == 61, "kept %d %d %d", got[0], got[1], got[2]);
  graph_free(&g);
  /* cap 8: the 6 at 1 Å, then the two smallest sources among the 12 at sqrt(2) */
  o.max_neighbors = 8;
  build_ok(&m, &o, &g);
  n = 0;
  for (int e = 0; e < g.n_edges; e++)
    if (g.dst[e] == 62) got[n++] = g.src[e];
  cr_assert_eq(n, 8);
  static const int want[8] = {32, 36, 37, 57, 61, 63, 67, 87};
  for (int k = 0; k < 8; k++)
    cr_assert_eq(got[k], want[k], "kept[%d] = %d, want %d", k, got[k], want[k]);
  graph_free(&g);
  mol_free(&m);
}

/* ---- invariance ---------------------------------------------------------------- */

/* A uniformly random rotation (Shoemake's unit quaternion). */
static void random_rotation(double r[3][3]) {
  double u1 = tu_rnd(), u2 = tu_rnd() * 2 * M_PI, u3 = tu_rnd() * 2 * M_PI;
  double a = sqrt(1 - u1) * sin(u2), b = sqrt(1 - u1) * cos(u2), c = sqrt(u1) * sin(u3), w = sqrt(u1) * cos(u3);
  double q[4] = {w, a, b, c};
  double qw = q[0], qx = q[1], qy = q[2], qz = q[3];
  r[0][0] = 1 - 2 * (qy * qy + qz * qz);
  r[0][1] = 2 * (qx * qy - qz * qw);
  r[0][2] = 2 * (qx * qz + qy * qw);
  r[1][0] = 2 * (qx * qy + qz * qw);
  r[1][1] = 1 - 2 * (qx * qx + qz * qz);
  r[1][2] = 2 * (qy * qz - qx * qw);
  r[2][0] = 2 * (qx * qz - qy * qw);
  r[2][1] = 2 * (qy * qz + qx * qw);
  r[2][2] = 1 - 2 * (qx * qx + qy * qy);
}

static void transform(const struct mol *in, struct mol *out, double r[3][3], const double t[3]) {
  mol_init(out);
  out->dim = 3;
  out->n_atoms = in->n_atoms;
  out->atoms = calloc((size_t)in->n_atoms, sizeof *out->atoms);
  for (int i = 0; i < in->n_atoms; i++) {
    const struct mol_atom *a = &in->atoms[i];
    double p[3] = {a->x, a->y, a->z_}, q[3];
    for (int k = 0; k < 3; k++)
      q[k] = r[k][0] * p[0] + r[k][1] * p[1] + r[k][2] * p[2] + t[k];
    out->atoms[i] = *a;
    out->atoms[i].x = q[0];
    out->atoms[i].y = q[1];
    out->atoms[i].z_ = q[2];
  }
}

/* True when no pair distance lies within eps of c. */
static int cutoff_is_clear(const struct mol *m, double c, double eps) {
  for (int i = 0; i < m->n_atoms; i++)
    for (int j = i + 1; j < m->n_atoms; j++)
      if (fabs(sqrt(d2_of(m, i, j)) - c) < eps) return 0;
  return 1;
}

/* True when each target's cap-th and (cap+1)-th nearest differ by more than
 * eps, so the kept set cannot change with rounding. */
static int cap_is_clear(const struct mol *m, double c, int cap, double eps) {
  int n = m->n_atoms;
  double *d = malloc((size_t)n * sizeof *d);
  int ok = 1;
  for (int j = 0; j < n && ok; j++) {
    int nd = 0;
    for (int i = 0; i < n; i++) {
      double x = sqrt(d2_of(m, i, j));
      if (x > 0 && x <= c) d[nd++] = x;
    }
    if (nd <= cap) continue;
    /* the cap-th smallest vs the rest: count how many lie within eps of it */
    for (int a = 0; a < nd && ok; a++) {
      int below = 0;
      for (int b = 0; b < nd; b++)
        below += d[b] < d[a];
      if (below == cap - 1) /* d[a] is the cap-th nearest */
        for (int b = 0; b < nd; b++)
          if (b != a && fabs(d[b] - d[a]) < eps) ok = 0;
    }
  }
  free(d);
  return ok;
}

static void assert_same_edges(const struct graph *a, const struct graph *b, const char *what) {
  cr_assert_eq(a->n_edges, b->n_edges, "%s: %d vs %d edges", what, a->n_edges, b->n_edges);
  for (int e = 0; e < a->n_edges; e++)
    cr_assert(a->src[e] == b->src[e] && a->dst[e] == b->dst[e], "%s: edge %d differs (%d->%d vs %d->%d)", what, e,
              a->src[e], a->dst[e], b->src[e], b->dst[e]);
}

Test(graph, rotation_and_translation_leave_edges_unchanged, .timeout = 60) {
  struct mol m;
  cloud(&m, 1500, 0.1, 4242);
  double c = 5.0;
  while (!cutoff_is_clear(&m, c, 1e-6))
    c += 1e-4;
  struct graph_opts o = {.cutoff = c, .edges = GRAPH_EDGES_RADIUS};
  struct graph g0;
  build_ok(&m, &o, &g0);
  cr_assert_gt(g0.n_edges, 1500 * 20);
  tu_seed(77);
  for (int trial = 0; trial < 5; trial++) {
    double r[3][3], t[3] = {(tu_rnd() - 0.5) * 2000, (tu_rnd() - 0.5) * 2000, (tu_rnd() - 0.5) * 2000};
    random_rotation(r);
    struct mol m2;
    transform(&m, &m2, r, t);
    struct graph g1;
    build_ok(&m2, &o, &g1);
    assert_same_edges(&g0, &g1, "rotated");
    for (int e = 0; e < g0.n_edges; e++) {
      const float *f0 = &g0.edge_feat[(size_t)e * 6], *f1 = &g1.edge_feat[(size_t)e * 6];
      cr_assert(fabs(f0[GRAPH_EF_DISTANCE] - f1[GRAPH_EF_DISTANCE]) < 1e-4, "distance is invariant");
      /* rel_pos rotates with the molecule and ignores the translation */
      const float *p0 = &g0.rel_pos[(size_t)e * 3], *p1 = &g1.rel_pos[(size_t)e * 3];
      for (int k = 0; k < 3; k++) {
        double want = r[k][0] * p0[0] + r[k][1] * p0[1] + r[k][2] * p0[2];
        cr_assert(fabs(p1[k] - want) < 1e-3, "rel_pos rotates: edge %d axis %d %g vs %g", e, k, p1[k], want);
      }
    }
    graph_free(&g1);
    mol_free(&m2);
  }
  graph_free(&g0);

  /* with a cap: the kept nearest set is invariant too, when no tie is near */
  o.max_neighbors = 8;
  cr_assert(cap_is_clear(&m, c, 8, 1e-6), "this cloud has no near-tie at the cap");
  build_ok(&m, &o, &g0);
  double r[3][3], t[3] = {-123.5, 999.25, 3.0};
  random_rotation(r);
  struct mol m2;
  transform(&m, &m2, r, t);
  struct graph g1;
  build_ok(&m2, &o, &g1);
  assert_same_edges(&g0, &g1, "rotated with cap");
  graph_free(&g0);
  graph_free(&g1);
  mol_free(&m2);
  mol_free(&m);
}

/* edges_dropped: what the cap left out, i.e. the edges of the uncapped graph
 * that the capped one lacks; bonded pairs radius+bonds adds back are not
 * dropped. Without a cap nothing is. */
Test(graph, max_neighbors_counts_the_dropped_edges) {
  struct mol m;
  cloud(&m, 600, 0.1, 77);
  for (int i = 0; i + 1 < m.n_atoms; i += 2)
    tu_add_bond(&m, i, i + 1, 1);
  const enum graph_edges modes[2] = {GRAPH_EDGES_RADIUS, GRAPH_EDGES_RADIUS_BONDS};
  for (int k = 0; k < 2; k++) {
    struct graph_opts o = {.cutoff = 5.0, .edges = modes[k]};
    struct graph all, capped;
    build_ok(&m, &o, &all);
    cr_assert_eq(all.edges_dropped, 0, "no cap, nothing dropped");
    o.max_neighbors = 6;
    build_ok(&m, &o, &capped);
    cr_assert_gt(capped.edges_dropped, 0, "the cap binds");
    cr_assert_eq(capped.edges_dropped, (int64_t)all.n_edges - capped.n_edges, "mode %d: %lld dropped, %d - %d edges", k,
                 (long long)capped.edges_dropped, all.n_edges, capped.n_edges);
    graph_free(&all);
    graph_free(&capped);
  }
  mol_free(&m);
}

Test(graph, deterministic) {
#ifdef __GLIBC__
  mallopt(M_MMAP_MAX, 0); /* reuse heap blocks, so that the dirt below is seen */
#endif
  struct mol m;
  cloud(&m, 2000, 0.1, 3);
  struct graph_opts o = {.cutoff = 5.0, .max_neighbors = 10, .edges = GRAPH_EDGES_RADIUS_BONDS};
  for (int i = 0; i + 1 < m.n_atoms; i += 3)
    tu_add_bond(&m, i, i + 1, 1 + i % 3);
  uint8_t *b1, *b2;
  size_t n1, n2;
  struct graph g;
  build_ok(&m, &o, &g);
  cr_assert_eq(graph_to_blob(&g, &b1, &n1), 0);
  graph_free(&g);
  /* dirty freed memory: a read of anything uninitialised would now differ */
  for (size_t sz = 1 << 10; sz <= (size_t)16 << 20; sz *= 2) {
    void *junk = malloc(sz);
    memset(junk, 0xA5, sz);
    free(junk);
  }
  build_ok(&m, &o, &g);
  cr_assert_eq(graph_to_blob(&g, &b2, &n2), 0);
  cr_assert(n1 == n2 && memcmp(b1, b2, n1) == 0, "same input, same bytes");
  free(b1);
  free(b2);
  graph_free(&g);
  mol_free(&m);
}

/* ---- bond modes and features --------------------------------------------------- */

/* A chain 0-1-2-3-4 along x at 1.5 Å with single, double, triple, aromatic
 * bonds; atom 5 bonded to 0 but 10 Å away; atom 6 on top of atom 4 and bonded
 * to it; atom 7 unbonded, 1 Å from atom 2. */
static void test_chain(struct mol *m) {
  mol_init(m);
  m->dim = 3;
  for (int i = 0; i < 5; i++)
    tu_add_atom(m, 6, 1.5 * i, 0, 0);
  tu_add_atom(m, 8, -10, 0, 0);
  tu_add_atom(m, 1, 6.0, 0, 0);
  tu_add_atom(m, 7, 3.0, 1.0, 0);
  tu_add_bond(m, 0, 1, 1);
  tu_add_bond(m, 1, 2, 2);
  tu_add_bond(m, 2, 3, 3);
  tu_add_bond(m, 3, 4, MOL_BOND_AROMATIC);
  tu_add_bond(m, 0, 5, 1);
  tu_add_bond(m, 4, 6, 1);
  tu_add_bond(m, 2, 1, 1); /* listed twice: the first listing (double) counts */
}

struct want_edge {
  int src, dst, col;
};

static void expect_edges(const struct graph *g, const struct mol *m, const struct want_edge *w, int n,
                         const char *what) {
  cr_assert_eq(g->n_edges, n, "%s: %d edges, want %d", what, g->n_edges, n);
  for (int e = 0; e < n; e++) {
    cr_assert(g->src[e] == w[e].src && g->dst[e] == w[e].dst, "%s: edge %d is %d->%d, want %d->%d", what, e, g->src[e],
              g->dst[e], w[e].src, w[e].dst);
    const float *f = &g->edge_feat[(size_t)e * GRAPH_EDGE_WIDTH];
    for (int k = 0; k < 5; k++)
      cr_assert_eq(f[k], k == w[e].col ? 1.0f : 0.0f, "%s: edge %d->%d column %d", what, w[e].src, w[e].dst, k);
    const struct mol_atom *a = &m->atoms[w[e].src], *b = &m->atoms[w[e].dst];
    double dx = b->x - a->x, dy = b->y - a->y, dz = b->z_ - a->z_;
    cr_assert_float_eq(f[GRAPH_EF_DISTANCE], sqrt(dx * dx + dy * dy + dz * dz), 1e-6, "%s: distance", what);
    const float *r = &g->rel_pos[(size_t)e * 3];
    cr_assert(r[0] == (float)dx && r[1] == (float)dy && r[2] == (float)dz,
              "%s: rel_pos of %d->%d is (%g,%g,%g), want target minus source (%g,%g,%g)", what, w[e].src, w[e].dst,
              r[0], r[1], r[2], dx, dy, dz);
  }
}

enum {
  NONE = GRAPH_EF_NONE,
  SGL = GRAPH_EF_SINGLE,
  DBL = GRAPH_EF_DOUBLE,
  TPL = GRAPH_EF_TRIPLE,
  ARO = GRAPH_EF_AROMATIC
};

Test(graph, bonds_mode) {
  struct mol m;
  test_chain(&m);
  struct graph_opts o = {.cutoff = 0, .edges = GRAPH_EDGES_BONDS, .max_neighbors = 1};
  struct graph g;
  build_ok(&m, &o, &g);
  /* sorted by target then source; 4<->6 are coincident: no edge; the cap is ignored */
  static const struct want_edge w[] = {{1, 0, SGL}, {5, 0, SGL}, {0, 1, SGL}, {2, 1, DBL}, {1, 2, DBL},
                                       {3, 2, TPL}, {2, 3, TPL}, {4, 3, ARO}, {3, 4, ARO}, {0, 5, SGL}};
  expect_edges(&g, &m, w, 10, "bonds");
  graph_free(&g);
  check_against_brute(&m, &o, "bonds brute");
  mol_free(&m);
}

Test(graph, radius_and_radius_bonds_modes) {
  struct mol m;
  test_chain(&m);
  struct graph g;
  /* radius 1.6: the chain at 1.5 (with bond types), 7 near 2 (1 Å, none) and
   * 7 near 1 and 3 (sqrt(1.5²+1) = 1.80: out); 4 and 6 coincide: no edge */
  struct graph_opts o = {.cutoff = 1.6, .edges = GRAPH_EDGES_RADIUS};
  build_ok(&m, &o, &g);
  /* 6 sits on 4, so it is 1.5 Å from 3 as well */
  static const struct want_edge r_sorted[] = {{1, 0, SGL},  {0, 1, SGL},  {2, 1, DBL},  {1, 2, DBL},
                                              {3, 2, TPL},  {7, 2, NONE}, {2, 3, TPL},  {4, 3, ARO},
                                              {6, 3, NONE}, {3, 4, ARO},  {3, 6, NONE}, {2, 7, NONE}};
  expect_edges(&g, &m, r_sorted, 12, "radius");
  graph_free(&g);

  /* radius+bonds: 0<->5 at 10 Å joins */
  o.edges = GRAPH_EDGES_RADIUS_BONDS;
  build_ok(&m, &o, &g);
  static const struct want_edge rb[] = {{1, 0, SGL}, {5, 0, SGL},  {0, 1, SGL},  {2, 1, DBL}, {1, 2, DBL},
                                        {3, 2, TPL}, {7, 2, NONE}, {2, 3, TPL},  {4, 3, ARO}, {6, 3, NONE},
                                        {3, 4, ARO}, {0, 5, SGL},  {3, 6, NONE}, {2, 7, NONE}};
  expect_edges(&g, &m, rb, 14, "radius+bonds");
  graph_free(&g);
  check_against_brute(&m, &o, "radius+bonds brute");

  /* cap 1: radius keeps only the nearest source (7 for target 2); with bonds,
   * the bonded sources 1 and 3 stay as well */
  o.max_neighbors = 1;
  o.edges = GRAPH_EDGES_RADIUS;
  build_ok(&m, &o, &g);
  int n2 = 0;
  for (int e = 0; e < g.n_edges; e++)
    if (g.dst[e] == 2) {
      n2++;
      cr_assert_eq(g.src[e], 7);
    }
  cr_assert_eq(n2, 1);
  graph_free(&g);
  o.edges = GRAPH_EDGES_RADIUS_BONDS;
  build_ok(&m, &o, &g);
  static const struct want_edge rbc[] = {{1, 0, SGL}, {5, 0, SGL},  {0, 1, SGL}, {2, 1, DBL}, {1, 2, DBL},
                                         {3, 2, TPL}, {7, 2, NONE}, {2, 3, TPL}, {4, 3, ARO}, {3, 4, ARO},
                                         {0, 5, SGL}, {3, 6, NONE}, {2, 7, NONE}};
  /* target 3: nearest radius source is 2 (tie 2, 4, 6 at 1.5: smallest index);
   * 4 is bonded, so 6 is the one dropped */
  expect_edges(&g, &m, rbc, 13, "radius+bonds cap 1");
  graph_free(&g);
  check_against_brute(&m, &o, "radius+bonds cap brute");
  mol_free(&m);
}

Test(graph, node_features) {
  struct mol m;
  mol_init(&m);
  m.dim = 3;
  tu_add_atom(&m, 6, 0, 0, 0);
  tu_add_atom(&m, 7, 1.4, 0, 0);
  m.atoms[1].charge = 1;
  tu_add_atom(&m, 8, 2.8, 0, 0);
  m.atoms[2].charge = -1;
  tu_add_atom(&m, 1, 0, 1.0, 0);
  tu_add_atom(&m, 17, 0, -1.7, 0);
  static const uint8_t el[] = {6, 7, 8};
  struct graph_opts o = {
      .cutoff = 2.0, .elements = el, .n_elements = 3, .with_other = 1, .with_charge = 1, .with_atomic_number = 1};
  cr_assert_eq(graph_node_width(&o), 6);
  struct graph g;
  build_ok(&m, &o, &g);
  cr_assert_eq(g.node_width, 6);
  static const float want[5][6] = {
      {1, 0, 0, 0, 0, 6}, {0, 1, 0, 0, 1, 7}, {0, 0, 1, 0, -1, 8}, {0, 0, 0, 1, 0, 1}, {0, 0, 0, 1, 0, 17}};
  for (int i = 0; i < 5; i++)
    for (int k = 0; k < 6; k++)
      cr_assert_eq(g.node_feat[i * 6 + k], want[i][k], "atom %d column %d: %g, want %g", i, k, g.node_feat[i * 6 + k],
                   want[i][k]);
  graph_free(&g);

  /* without the other slot or charge: H and Cl are all zeros */
  o.with_other = 0;
  o.with_charge = 0;
  cr_assert_eq(graph_node_width(&o), 4);
  build_ok(&m, &o, &g);
  static const float want2[5][4] = {{1, 0, 0, 6}, {0, 1, 0, 7}, {0, 0, 1, 8}, {0, 0, 0, 1}, {0, 0, 0, 17}};
  for (int i = 0; i < 5; i++)
    for (int k = 0; k < 4; k++)
      cr_assert_eq(g.node_feat[i * 4 + k], want2[i][k], "atom %d column %d", i, k);
  graph_free(&g);

  /* an element listed twice: the first slot only */
  static const uint8_t el2[] = {8, 6, 8};
  struct graph_opts o2 = {.cutoff = 2.0, .elements = el2, .n_elements = 3};
  build_ok(&m, &o2, &g);
  cr_assert_eq(g.node_width, 3);
  cr_assert(g.node_feat[2 * 3] == 1 && g.node_feat[2 * 3 + 2] == 0, "O: first slot");
  graph_free(&g);

  /* no features at all: width 0 */
  struct graph_opts o3 = {.cutoff = 2.0};
  cr_assert_eq(graph_node_width(&o3), 0);
  build_ok(&m, &o3, &g);
  cr_assert_eq(g.node_width, 0);
  cr_assert_eq(g.n_nodes, 5);
  graph_free(&g);
  mol_free(&m);
}

static void expect_build_error(const struct mol *m, const struct graph_opts *o, const char *want) {
  struct graph g;
  struct se3_error e;
  cr_assert_eq(graph_build(m, o, &g, &e), -1, "expected '%s'", want);
  cr_assert_str_eq(se3_error_str(&e).s, want);
  cr_assert_eq(g.n_edges, 0);
  cr_assert_null(g.src);
  cr_assert_null(g.node_feat);
}

Test(graph, build_errors) {
  struct mol m;
  test_chain(&m);
  struct graph_opts o = {.cutoff = 0, .edges = GRAPH_EDGES_RADIUS};
  expect_build_error(&m, &o, "cutoff must be a positive number of Å (got 0)");
  o.cutoff = NAN;
  expect_build_error(&m, &o, "cutoff must be a positive number of Å (got nan)");
  o.cutoff = 5;
  o.max_neighbors = -1;
  expect_build_error(&m, &o, "max_neighbors must be >= 0 (got -1)");
  o.max_neighbors = 0;
  o.edges = (enum graph_edges)7;
  expect_build_error(&m, &o, "unknown edge mode 7");
  o.edges = GRAPH_EDGES_RADIUS;
  o.n_elements = 2;
  cr_assert_eq(graph_node_width(&o), -1);
  expect_build_error(&m, &o, "bad element list (2 elements, no array)");
  static const uint8_t el[] = {6};
  o.elements = el;
  o.n_elements = 65535;
  cr_assert_eq(graph_node_width(&o), 65535);
  o.with_other = 1;
  cr_assert_eq(graph_node_width(&o), -1, "the blob stores the width as a u16");
  o.with_other = 0;
  o.n_elements = 0;
  m.atoms[3].y = INFINITY;
  expect_build_error(&m, &o, "non-finite coordinate (atom 4)");
  m.atoms[3].y = 0;
  m.bonds[2].b = 99;
  expect_build_error(&m, &o, "bad bond 3 (atoms 3 and 100 of 8)");
  m.bonds[2].b = 2;
  expect_build_error(&m, &o, "bad bond 3 (atoms 3 and 3 of 8)");
  m.bonds[2].b = 3;
  m.bonds[2].order = 4;
  expect_build_error(&m, &o, "bond 3 has order 4");
  m.bonds[2].order = 3;
  expect_build_error(&m, NULL, "no molecule or no options");
  /* fixed again, it builds */
  struct graph g;
  build_ok(&m, &o, &g);
  graph_free(&g);
  mol_free(&m);
  /* an empty molecule is an empty graph */
  build_ok(&m, &o, &g);
  cr_assert(g.n_nodes == 0 && g.n_edges == 0);
  graph_free(&g);
}

/* ---- blob ------------------------------------------------------------------------ */

static uint32_t rd_u32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint16_t rd_u16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static void wr_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}
static float rd_f32(const uint8_t *p) {
  uint32_t u = rd_u32(p);
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static void assert_graphs_equal(const struct graph *a, const struct graph *b) {
  cr_assert(a->n_nodes == b->n_nodes && a->n_edges == b->n_edges && a->node_width == b->node_width &&
            a->edge_width == b->edge_width);
  size_t ne = (size_t)a->n_edges;
  if (ne) {
    cr_assert(memcmp(a->src, b->src, ne * 4) == 0);
    cr_assert(memcmp(a->dst, b->dst, ne * 4) == 0);
    cr_assert(memcmp(a->edge_feat, b->edge_feat, ne * GRAPH_EDGE_WIDTH * 4) == 0);
    cr_assert(memcmp(a->rel_pos, b->rel_pos, ne * 3 * 4) == 0);
  }
  size_t nf = (size_t)a->n_nodes * (size_t)a->node_width;
  if (nf) cr_assert(memcmp(a->node_feat, b->node_feat, nf * 4) == 0);
}

Test(graph, blob_layout_and_round_trip) {
  struct mol m;
  test_chain(&m);
  m.atoms[1].charge = -2;
  static const uint8_t el[] = {6, 8};
  struct graph_opts o = {.cutoff = 1.6,
                         .edges = GRAPH_EDGES_RADIUS_BONDS,
                         .elements = el,
                         .n_elements = 2,
                         .with_other = 1,
                         .with_charge = 1};
  struct graph g, h;
  build_ok(&m, &o, &g);
  uint8_t *b;
  size_t n;
  cr_assert_eq(graph_to_blob(&g, &b, &n), 0);
  size_t ne = (size_t)g.n_edges, nn = (size_t)g.n_nodes, nw = (size_t)g.node_width;
  cr_assert_eq(n, 20 + 4 * (2 * ne + nn * nw + ne * 6 + ne * 3) + 4);
  cr_assert(memcmp(b, "SE3G", 4) == 0);
  cr_assert_eq(rd_u16(b + 4), 2);
  cr_assert_eq(rd_u32(b + n - 4), crc32c(0, b, n - 4), "trailer: CRC-32C of every byte before it");
  cr_assert_eq(rd_u16(b + 6), 0);
  cr_assert_eq(rd_u32(b + 8), nn);
  cr_assert_eq(rd_u32(b + 12), ne);
  cr_assert_eq(rd_u16(b + 16), 4);
  cr_assert_eq(rd_u16(b + 18), 6);
  /* arrays in order: src, dst, node features, edge features, rel_pos */
  const uint8_t *p = b + 20;
  cr_assert_eq(rd_u32(p + 4 * 1), (uint32_t)g.src[1]);
  cr_assert_eq(rd_u32(p + 4 * ne + 4 * 1), (uint32_t)g.dst[1]);
  p += 8 * ne;
  cr_assert_eq(rd_f32(p + 4 * (1 * nw + 3)), -2.0f, "node 1 charge");
  p += 4 * nn * nw;
  cr_assert_eq(rd_f32(p + 4 * (0 * 6 + GRAPH_EF_SINGLE)), 1.0f, "edge 0 (1->0) is single");
  cr_assert_float_eq(rd_f32(p + 4 * (0 * 6 + GRAPH_EF_DISTANCE)), 1.5f, 1e-6);
  p += 4 * ne * 6;
  cr_assert_eq(rd_f32(p), -1.5f, "rel_pos of 1->0: x_0 - x_1");
  cr_assert_eq(graph_from_blob(b, n, &h, NULL), 0);
  assert_graphs_equal(&g, &h);
  graph_free(&h);
  free(b);
  graph_free(&g);

  /* a protein-sized cloud, and the empty graph */
  mol_free(&m);
  cloud(&m, 3000, 0.1, 12);
  o.edges = GRAPH_EDGES_RADIUS;
  o.cutoff = 5;
  build_ok(&m, &o, &g);
  cr_assert_eq(graph_to_blob(&g, &b, &n), 0);
  struct se3_error e;
  cr_assert_eq(graph_from_blob(b, n, &h, &e), 0, "%s", se3_error_str(&e).s);
  assert_graphs_equal(&g, &h);
  graph_free(&h);
  free(b);
  graph_free(&g);
  mol_free(&m);
  build_ok(&m, &o, &g);
  cr_assert_eq(graph_to_blob(&g, &b, &n), 0);
  cr_assert_eq(n, 20 + 4);
  cr_assert_eq(graph_from_blob(b, n, &h, &e), 0, "%s", se3_error_str(&e).s);
  cr_assert(h.n_nodes == 0 && h.n_edges == 0 && h.node_width == 4);
  graph_free(&h);
  free(b);
  graph_free(&g);
}

static void expect_blob_error(const uint8_t *b, size_t n, const char *want) {
  struct graph g;
  struct se3_error e;
  cr_assert_eq(graph_from_blob(b, n, &g, &e), -1, "expected '%s'", want);
  cr_assert_str_eq(se3_error_str(&e).s, want);
  cr_assert_null(g.src);
  cr_assert_eq(g.n_edges, 0);
}

Test(graph, blob_bad_inputs) {
  struct mol m;
  test_chain(&m);
  static const uint8_t el[] = {6};
  struct graph_opts o = {.cutoff = 1.6, .edges = GRAPH_EDGES_RADIUS, .elements = el, .n_elements = 1};
  struct graph g;
  build_ok(&m, &o, &g);
  uint8_t *b;
  size_t n;
  cr_assert_eq(graph_to_blob(&g, &b, &n), 0);
  cr_assert_eq(g.n_edges, 12);
  uint8_t *c = malloc(n + 4);
  size_t ne = 12, nn = 8;
  uint8_t *src = c + 20, *dst = c + 20 + 4 * ne, *nf = dst + 4 * ne, *ef = nf + 4 * nn, *rp = ef + 4 * 6 * ne;

  expect_blob_error(NULL, 0, "graph blob too short (0 bytes, header is 20)");
  expect_blob_error(b, 19, "graph blob too short (19 bytes, header is 20)");
#define FRESH() memcpy(c, b, n)
  FRESH();
  c[0] = 'X';
  expect_blob_error(c, n, "not a graph blob (bad magic, expected \"SE3G\")");
  FRESH();
  c[4] = 3;
  expect_blob_error(c, n, "unsupported graph blob version 3 (this se3screen reads 1 and 2)");
  FRESH();
  c[6] = 4;
  expect_blob_error(c, n, "graph blob has unknown flags 0x4 (version 2 defines none)");
  FRESH();
  c[18] = 5;
  expect_blob_error(c, n, "graph blob edge width 5 (expected 6 to 64)");
  FRESH();
  c[18] = 65;
  expect_blob_error(c, n, "graph blob edge width 65 (expected 6 to 64)");
  FRESH();
  c[18] = 7; /* a width the bond features give, but not this blob's size */
  expect_blob_error(c, n, "graph blob size mismatch: 584 bytes, expected 632 for 8 nodes of width 1 and 12 edges");
  FRESH();
  expect_blob_error(c, n - 1, "graph blob size mismatch: 583 bytes, expected 584 for 8 nodes of width 1 and 12 edges");
  c[n] = 0;
  expect_blob_error(c, n + 1, "graph blob size mismatch: 585 bytes, expected 584 for 8 nodes of width 1 and 12 edges");
  wr_u32(c + 12, 0xffffffffu);
  expect_blob_error(c, n,
                    "graph blob size mismatch: 584 bytes, expected 188978561036 for 8 nodes of width 1 and 4294967295 "
                    "edges");
  FRESH();
  c[16] = 2;
  expect_blob_error(c, n, "graph blob size mismatch: 584 bytes, expected 616 for 8 nodes of width 2 and 12 edges");
  /* structural damage behind a valid checksum (resealed): still refused */
#define RESEAL() crc32c_seal(c, n)
  FRESH();
  wr_u32(src + 4 * 3, 8);
  RESEAL();
  expect_blob_error(c, n, "graph blob: edge 3 joins 8 -> 2 (of 8 nodes)");
  FRESH();
  wr_u32(dst + 4 * 0, 0xffffffffu);
  RESEAL();
  expect_blob_error(c, n, "graph blob: edge 0 joins 1 -> -1 (of 8 nodes)");
  FRESH();
  wr_u32(src + 4 * 0, 0);
  RESEAL();
  expect_blob_error(c, n, "graph blob: edge 0 is a self loop on node 0");
  FRESH();
  wr_u32(src + 4 * 2, 1);
  wr_u32(dst + 4 * 2, 2);
  wr_u32(src + 4 * 3, 1);
  RESEAL();
  expect_blob_error(c, n, "graph blob: edge 3 (1 -> 2) is out of (target, source) order or repeated");
  FRESH();
  wr_u32(dst + 4 * 5, 0);
  RESEAL();
  expect_blob_error(c, n, "graph blob: edge 5 (7 -> 0) is out of (target, source) order or repeated");
  float nanv = NAN;
  uint32_t nanbits;
  memcpy(&nanbits, &nanv, 4);
  FRESH();
  wr_u32(nf + 4 * 5, nanbits);
  RESEAL();
  expect_blob_error(c, n, "graph blob: non-finite node feature (node 5, column 0)");
  FRESH();
  wr_u32(ef + 4 * (2 * 6 + 5), nanbits);
  RESEAL();
  expect_blob_error(c, n, "graph blob: non-finite edge feature (edge 2, column 5)");
  FRESH();
  wr_u32(rp + 4 * (11 * 3 + 2), 0x7f800000u);
  RESEAL();
  expect_blob_error(c, n, "graph blob: non-finite relative position (edge 11, axis 2)");
  FRESH();
  struct graph h;
  cr_assert_eq(graph_from_blob(c, n, &h, NULL), 0, "the untouched copy decodes");
  graph_free(&h);
  /* every truncation and random byte changes: a clean refusal or a graph,
   * never a crash (run under the sanitizers) */
  for (size_t k = 0; k < n; k++) {
    struct se3_error e;
    cr_assert_eq(graph_from_blob(b, k, &h, &e), -1, "truncated to %zu", k);
    cr_assert(e.message[0], "a message for truncation to %zu", k);
  }
  tu_seed(5);
  int refused = 0;
  for (int trial = 0; trial < 3000; trial++) {
    FRESH();
    for (int f = 0; f < 1 + trial % 4; f++)
      c[(size_t)(tu_rnd() * (double)n)] = (uint8_t)(tu_rnd() * 256);
    struct se3_error e;
    if (graph_from_blob(c, n, &h, &e) == 0) {
      cr_assert(h.n_edges == 12 && h.n_nodes == 8);
      graph_free(&h);
    } else {
      cr_assert(e.message[0]);
      refused++;
    }
  }
  cr_assert_gt(refused, 100);
#undef FRESH
#undef RESEAL
  /* graph_to_blob refuses malformed graphs */
  struct graph bad = g;
  bad.edge_width = 5;
  uint8_t *x;
  size_t xn;
  cr_assert_eq(graph_to_blob(&bad, &x, &xn), -1);
  cr_assert_null(x);
  bad = g;
  bad.n_edges = -1;
  cr_assert_eq(graph_to_blob(&bad, &x, &xn), -1);
  free(c);
  free(b);
  graph_free(&g);
  mol_free(&m);
}

/* Every single-bit flip past the header (indices, features, relative
 * positions: what a torn page or a bad disk changes) is caught by the
 * checksum, which the message names with both values; before the checksum
 * most of them decoded into a different graph without a word. */
Test(graph, blob_checksum_catches_every_flipped_bit) {
  struct mol m;
  test_chain(&m);
  static const uint8_t el[] = {6};
  struct graph_opts o = {.cutoff = 1.6, .edges = GRAPH_EDGES_RADIUS, .elements = el, .n_elements = 1};
  struct graph g, h;
  build_ok(&m, &o, &g);
  uint8_t *b;
  size_t n;
  cr_assert_eq(graph_to_blob(&g, &b, &n), 0);
  uint8_t *c = malloc(n);
  for (size_t i = GRAPH_BLOB_HEADER; i < n; i++)
    for (int bit = 0; bit < 8; bit++) {
      memcpy(c, b, n);
      c[i] ^= (uint8_t)(1u << bit);
      char want[96];
      struct se3_error e;
      cr_assert_eq(graph_from_blob(c, n, &h, &e), -1, "byte %zu bit %d accepted", i, bit);
      snprintf(want, sizeof want, "graph blob checksum mismatch (stored 0x%08x, computed 0x%08x)",
               (unsigned)rd_u32(c + n - 4), (unsigned)crc32c(0, c, n - 4));
      cr_assert_str_eq(se3_error_str(&e).s, want, "byte %zu bit %d", i, bit);
    }
  /* version 1 (no trailer) is still read */
  memcpy(c, b, n);
  c[4] = 1;
  struct se3_error e;
  cr_assert_eq(graph_from_blob(c, n - 4, &h, &e), 0, "%s", se3_error_str(&e).s);
  assert_graphs_equal(&g, &h);
  graph_free(&h);
  free(c);
  free(b);
  graph_free(&g);
  mol_free(&m);
}

/* ---- scaling --------------------------------------------------------------------- */

/* The cell list does O(N) work: the distances computed per atom do not grow
 * with the number of atoms at a fixed density (an all-pairs scan would grow
 * 4x from 10k to 40k atoms). Counted, not timed, so a loaded machine cannot
 * fail it; the times are logged for information (bench/ has the benchmark). */
Test(graph, linear_work, .timeout = 120) {
  struct mol m10, m40;
  cloud(&m10, 10000, 0.1, 10);
  cloud(&m40, 40000, 0.1, 40);
  struct graph_opts o = {.cutoff = 5.0, .edges = GRAPH_EDGES_RADIUS};
  struct graph g10, g40;
  graph_init(&g10);
  graph_init(&g40);
  struct se3_error e;
  double t0 = tu_now();
  cr_assert_eq(graph_build(&m10, &o, &g10, &e), 0, "%s", se3_error_str(&e).s);
  double t1 = tu_now();
  cr_assert_eq(graph_build(&m40, &o, &g40, &e), 0, "%s", se3_error_str(&e).s);
  double t2 = tu_now();
  double per10 = (double)g10.pairs_examined / 10000, per40 = (double)g40.pairs_examined / 40000;
  cr_log_info("10k atoms: %.1f ms, %d edges, %.0f distances/atom; 40k atoms: %.1f ms, %d edges, %.0f distances/atom",
              (t1 - t0) * 1e3, g10.n_edges, per10, (t2 - t1) * 1e3, g40.n_edges, per40);
  cr_assert_gt(per10, 0);
  cr_assert_lt(per40 / per10, 1.3, "distances per atom grew %.2fx for 4x the atoms", per40 / per10);
  /* A 27-cell neighbourhood of side 5 Å at 0.1 atoms/Å^3 holds ~337 atoms;
   * an all-pairs scan would compute 10,000 per atom. */
  cr_assert_lt(per10, 400, "%.0f distances per atom", per10);
  graph_free(&g10);
  graph_free(&g40);
  mol_free(&m10);
  mol_free(&m40);
}

/* Two bonded atoms at x = ±3e38 Å: finite coordinates whose distance (6e38)
 * overflows a float. graph_build stored an infinite distance that its own
 * blob reader refuses, so `verify` called the database damaged. It must
 * refuse such an edge with a message and build nothing. */
Test(graph, overflowing_edge_is_an_error) {
  struct mol m;
  mol_init(&m);
  m.dim = 3;
  tu_add_atom(&m, 6, -3e38, 0, 0);
  tu_add_atom(&m, 6, 3e38, 0, 0);
  tu_add_bond(&m, 0, 1, 1);
  struct graph_opts o = {.cutoff = 5, .edges = GRAPH_EDGES_BONDS};
  expect_build_error(&m, &o, "edge 1 (atom 2 to atom 1): distance or relative position overflows a float");
  o.edges = GRAPH_EDGES_RADIUS_BONDS;
  expect_build_error(&m, &o, "edge 1 (atom 2 to atom 1): distance or relative position overflows a float");
  /* without the bond the atoms are no edge, and the graph is fine */
  o.edges = GRAPH_EDGES_RADIUS;
  struct graph g;
  build_ok(&m, &o, &g);
  cr_assert_eq(g.n_edges, 0);
  graph_free(&g);
  /* one axis alone can overflow the relative position */
  m.atoms[0].x = 0;
  m.atoms[1].x = 0;
  m.atoms[0].z_ = 2e38;
  m.atoms[1].z_ = -2e38;
  o.edges = GRAPH_EDGES_BONDS;
  expect_build_error(&m, &o, "edge 1 (atom 2 to atom 1): distance or relative position overflows a float");
  mol_free(&m);
}
