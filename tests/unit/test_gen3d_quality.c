/* test_gen3d_quality.c — how good `fast` 3D generation (the default) is, in
 * seconds: tricky stereo (a cage with seven centres, a macrocycle with a
 * centre and an E double bond, E/Z bonds on a tetrasubstituted alkene and
 * a conjugated chain) kept over several seeds, every specified centre a
 * tetrahedron; open-chain torsions where the torsion pass sets them; and
 * a quality floor: 20 PDB ligands (tests/data/chem/
 * pdb_ligands20.sdf, neither bench/gen3d.sh's held-out set nor its tuning
 * set) regenerated from their graphs and compared with their PDB pose by
 * heavy-atom RMSD after the best superposition, the least over the
 * molecule's graph matchings (a shape is built from the canonical SMILES,
 * in its atom order, not the file's: chem/obbridge.cc's graph_only). */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chem/mol.h"
#include "chem/obbridge.h"
#include "tests/testutil.h"

static void setup(void) { cr_assert_eq(ob_init(), 0, "ob_init"); }

TestSuite(gen3d_quality, .init = setup);

static struct ob_parse_opts opts(const char *format, unsigned seed) {
  struct ob_parse_opts o = {.format = format,
                            .add_hydrogens = 1,
                            .gen3d = OB_GEN3D_ALWAYS,
                            .quality = OB_Q_FAST,
                            .seed = seed,
                            .max_atoms = 999,
                            .fragments = OB_FRAG_KEEP};
  return o;
}

static int parse(const char *text, size_t len, const struct ob_parse_opts *o, struct mol *m, char *buf, size_t n) {
  struct mol_why why;
  int rc = ob_parse_why(text, len, o, m, &why);
  mol_why_text(&why, buf, n);
  return rc;
}

/* The canonical SMILES of m's SD record read back without 3D generation:
 * stereo perceived from the coordinates. Caller frees. */
static char *smiles_from_3d(const struct mol *m) {
  char *sdf = ob_write_sdf(m);
  cr_assert_not_null(sdf);
  struct ob_parse_opts o = opts("sdf", 1);
  o.gen3d = OB_GEN3D_NEVER;
  o.add_hydrogens = 0;
  struct mol back;
  char buf[600];
  cr_assert_eq(parse(sdf, strlen(sdf), &o, &back, buf, sizeof buf), 0, "SD record read back rejected: %s", buf);
  free(sdf);
  char *s = strdup(back.smiles);
  mol_free(&back);
  return s;
}

/* The smallest |triple product| of unit bond vectors over the four choices
 * of three of atom i's neighbours when it has four, else 1: about 0.77 for a
 * tetrahedron, near 0 when it is flat or one neighbour has swung over. */
static double least_volume(const struct mol *m, int i) {
  double v[4][3];
  int n = 0;
  for (int b = 0; b < m->n_bonds; b++) {
    int j = m->bonds[b].a == (uint32_t)i ? (int)m->bonds[b].b : m->bonds[b].b == (uint32_t)i ? (int)m->bonds[b].a : -1;
    if (j < 0) continue;
    if (n == 4) return 1;
    double d[3] = {m->atoms[j].x - m->atoms[i].x, m->atoms[j].y - m->atoms[i].y, m->atoms[j].z_ - m->atoms[i].z_};
    double l = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
    for (int k = 0; k < 3; k++)
      v[n][k] = d[k] / l;
    n++;
  }
  if (n != 4) return 1;
  double least = 1;
  for (int skip = 0; skip < 4; skip++) {
    const double *a = v[skip == 0 ? 1 : 0], *b = v[skip <= 1 ? 2 : 1], *c = v[skip <= 2 ? 3 : 2];
    double vol = a[0] * (b[1] * c[2] - b[2] * c[1]) - a[1] * (b[0] * c[2] - b[2] * c[0]) + a[2] * (b[0] * c[1] - b[1] * c[0]);
    least = fmin(least, fabs(vol));
  }
  return least;
}

/* Stereo that the builder's ring templates and chain rules get wrong often
 * (bench/gen3d.sh's PDB ligands: one cage came out with all but one centre
 * inverted before the checks). */
static const char *TRICKY[] = {
    /* artemisinin: a cage of three rings and a peroxide bridge, 7 centres */
    "C[C@@H]1CC[C@H]2[C@@H](C)C(=O)O[C@@H]3O[C@@]4(C)CC[C@@H]1[C@]32OO4",
    /* morphine: a pentacyclic cage, 5 centres, a ring double bond */
    "CN1CC[C@]23c4c5ccc(O)c4O[C@H]2[C@@H](O)C=C[C@H]3[C@H]1C5",
    /* a 16-membered lactone with a centre and an E double bond in the ring */
    "C[C@@H]1CCCCC/C=C/CCCCCC(=O)O1",
    /* tamoxifen: a tetrasubstituted Z alkene */
    "CC/C(=C(\\c1ccccc1)c1ccc(OCCN(C)C)cc1)c1ccccc1",
    /* a dienamide E,Z with a centre (a PDB ligand's motif) */
    "C/C=C\\C=C\\C(=O)N[C@@H](Cc1ccccc1)C(=O)O",
};

Test(gen3d_quality, tricky_stereo_kept) {
  for (size_t i = 0; i < sizeof TRICKY / sizeof *TRICKY; i++)
    for (unsigned seed = 1; seed <= 3; seed++) {
      struct ob_parse_opts o = opts("smi", seed);
      char text[512], buf[600];
      snprintf(text, sizeof text, "%s\n", TRICKY[i]);
      struct mol m;
      struct mol_why why;
      int rc = ob_parse_why(text, strlen(text), &o, &m, &why);
      mol_why_text(&why, buf, sizeof buf);
      if (rc != 0 && !ob_gen3d_fallback()) {
        /* the cages need ETKDG (9 of these 15 builds took it): without
         * RDKit in the build a refusal naming the check is right, a pass
         * with the wrong stereo never */
        cr_expect_str_eq(why.reason, "3D generation: stereo not kept", "%s (seed %u): %s", TRICKY[i], seed, buf);
        continue;
      }
      cr_assert_eq(rc, 0, "%s (seed %u) rejected: %s", TRICKY[i], seed, buf);
      char *back = smiles_from_3d(&m);
      cr_expect_str_eq(back, m.smiles, "%s (seed %u): stereo changed, 3D gives %s", TRICKY[i], seed, back);
      free(back);
      for (int a = 0; a < m.n_atoms; a++)
        if (m.atoms[a].z == 6)
          cr_expect_gt(least_volume(&m, a), 0.17, "%s (seed %u): carbon %d is no tetrahedron (%.2f)", TRICKY[i],
                       seed, a + 1, least_volume(&m, a));
      mol_free(&m);
    }
}

/* The torsion a-b-c-d of m in degrees, folded into 0-90 (a ring end's two
 * neighbours lie 180° apart). */
static double folded_torsion(const struct mol *m, int a, int b, int c, int d) {
  const struct mol_atom *p[4] = {&m->atoms[a], &m->atoms[b], &m->atoms[c], &m->atoms[d]};
  double v[3][3];
  for (int i = 0; i < 3; i++) {
    v[i][0] = p[i + 1]->x - p[i]->x, v[i][1] = p[i + 1]->y - p[i]->y, v[i][2] = p[i + 1]->z_ - p[i]->z_;
  }
  double n1[3], n2[3], mm[3];
#define CROSS(o, x, y) (o[0] = x[1] * y[2] - x[2] * y[1], o[1] = x[2] * y[0] - x[0] * y[2], o[2] = x[0] * y[1] - x[1] * y[0])
  CROSS(n1, v[0], v[1]);
  CROSS(n2, v[1], v[2]);
  CROSS(mm, n1, v[1]);
#undef CROSS
  double x = n1[0] * n2[0] + n1[1] * n2[1] + n1[2] * n2[2];
  double y = (mm[0] * n2[0] + mm[1] * n2[1] + mm[2] * n2[2]) /
             sqrt(v[1][0] * v[1][0] + v[1][1] * v[1][1] + v[1][2] * v[1][2]);
  double t = fabs(atan2(y, x)) * 180 / M_PI;
  return t > 90 ? 180 - t : t;
}

/* A heavy neighbour of atom i other than not_this, -1 if none. */
static int heavy_neighbour(const struct mol *m, int i, int not_this) {
  for (int b = 0; b < m->n_bonds; b++) {
    int j = m->bonds[b].a == (uint32_t)i ? (int)m->bonds[b].b : m->bonds[b].b == (uint32_t)i ? (int)m->bonds[b].a : -1;
    if (j >= 0 && j != not_this && m->atoms[j].z != 1) return j;
  }
  return -1;
}

/* The open-chain torsions the pass sets (chem/gen3d_torsions.cc), read back
 * from the built molecule: a biaryl twisted by its ortho substituents and
 * ring sizes, an anilide's N-aryl bond planar. The pass once turned every
 * bond the wrong way (its torsion's sign against its turn's), so that a
 * biphenyl came out at 80° and an anilide anywhere. */
Test(gen3d_quality, open_chain_torsions_as_set) {
  static const struct {
    const char *smiles;
    int ar_ends; /* 2: the single bond joins two aromatic atoms; 1: one */
    double want; /* folded into 0-90 */
  } cases[] = {
      {"c1ccc(cc1)-c1ccccc1", 2, 40},       /* no ortho substituent */
      {"Cc1ccccc1-c1ccccc1", 2, 60},        /* one */
      {"Cc1ccccc1-c1ccccc1C", 2, 75},       /* two */
      {"c1ccc(cc1)-n1cccn1", 2, 15},        /* a five-membered ring */
      {"CC(=O)Nc1ccc(cc1)C(F)(F)F", 1, 0},  /* an anilide: conjugated, planar */
  };
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++)
    for (unsigned seed = 1; seed <= 3; seed++) {
      struct ob_parse_opts o = opts("smi", seed);
      char text[256], buf[600];
      snprintf(text, sizeof text, "%s\n", cases[k].smiles);
      struct mol m;
      cr_assert_eq(parse(text, strlen(text), &o, &m, buf, sizeof buf), 0, "%s rejected: %s", cases[k].smiles, buf);
      int found = 0;
      for (int b = 0; b < m.n_bonds; b++) {
        int u = (int)m.bonds[b].a, v = (int)m.bonds[b].b;
        if (m.bonds[b].order != 1 || m.atoms[u].z == 1 || m.atoms[v].z == 1) continue;
        if (m.atoms[u].aromatic + m.atoms[v].aromatic != cases[k].ar_ends) continue;
        if (cases[k].ar_ends == 1 && (m.atoms[u].z != 7 && m.atoms[v].z != 7)) continue; /* the N-aryl bond */
        int a = heavy_neighbour(&m, u, v), d = heavy_neighbour(&m, v, u);
        if (a < 0 || d < 0) continue;
        double t = folded_torsion(&m, a, u, v, d);
        cr_expect(fabs(t - cases[k].want) < 5, "%s (seed %u): torsion %.1f°, want %.0f°", cases[k].smiles, seed, t,
                  cases[k].want);
        found++;
      }
      cr_assert_eq(found, 1, "%s: %d bonds of the kind", cases[k].smiles, found);
      mol_free(&m);
    }
}

/* The largest eigenvalue of the symmetric 4x4 matrix a (Jacobi rotations). */
static double largest_eigenvalue(double a[4][4]) {
  for (int sweep = 0; sweep < 50; sweep++) {
    double off = 0;
    for (int p = 0; p < 4; p++)
      for (int q = p + 1; q < 4; q++)
        off += a[p][q] * a[p][q];
    if (off < 1e-20) break;
    for (int p = 0; p < 4; p++)
      for (int q = p + 1; q < 4; q++) {
        if (fabs(a[p][q]) < 1e-300) continue;
        double theta = (a[q][q] - a[p][p]) / (2 * a[p][q]);
        double t = (theta >= 0 ? 1 : -1) / (fabs(theta) + sqrt(theta * theta + 1));
        double c = 1 / sqrt(t * t + 1), s = t * c;
        for (int k = 0; k < 4; k++) { /* columns p, q */
          double akp = a[k][p], akq = a[k][q];
          a[k][p] = c * akp - s * akq, a[k][q] = s * akp + c * akq;
        }
        for (int k = 0; k < 4; k++) { /* rows p, q */
          double apk = a[p][k], aqk = a[q][k];
          a[p][k] = c * apk - s * aqk, a[q][k] = s * apk + c * aqk;
        }
      }
  }
  double best = a[0][0];
  for (int k = 1; k < 4; k++)
    best = fmax(best, a[k][k]);
  return best;
}

/* RMSD of the first n atoms of x and y after the best rotation and
 * translation (Horn's quaternion method). */
static double superposed_rmsd(const double (*x)[3], const double (*y)[3], int n) {
  double cx[3] = {0}, cy[3] = {0};
  for (int i = 0; i < n; i++)
    for (int k = 0; k < 3; k++)
      cx[k] += x[i][k] / n, cy[k] += y[i][k] / n;
  double s[3][3] = {{0}}, g = 0;
  for (int i = 0; i < n; i++) {
    double a[3], b[3];
    for (int k = 0; k < 3; k++)
      a[k] = x[i][k] - cx[k], b[k] = y[i][k] - cy[k], g += a[k] * a[k] + b[k] * b[k];
    for (int r = 0; r < 3; r++)
      for (int c = 0; c < 3; c++)
        s[r][c] += a[r] * b[c];
  }
  double m[4][4] = {
      {s[0][0] + s[1][1] + s[2][2], s[1][2] - s[2][1], s[2][0] - s[0][2], s[0][1] - s[1][0]},
      {s[1][2] - s[2][1], s[0][0] - s[1][1] - s[2][2], s[0][1] + s[1][0], s[2][0] + s[0][2]},
      {s[2][0] - s[0][2], s[0][1] + s[1][0], -s[0][0] + s[1][1] - s[2][2], s[1][2] + s[2][1]},
      {s[0][1] - s[1][0], s[2][0] + s[0][2], s[1][2] + s[2][1], -s[0][0] - s[1][1] + s[2][2]},
  };
  double e = g - 2 * largest_eigenvalue(m);
  return sqrt(fmax(0, e) / n);
}

/* The superposition itself: a molecule against itself turned and moved is
 * 0 Å, against itself with one atom moved by 3 Å is sqrt(9 * (n-1) / n²)
 * or less. */
Test(gen3d_quality, superposition_measures_right) {
  double x[5][3] = {{0, 0, 0}, {1.5, 0, 0}, {2, 1.4, 0}, {3.5, 1.5, 0.3}, {4, 2.9, -0.4}}, y[5][3];
  double c = cos(0.7), s = sin(0.7);
  for (int i = 0; i < 5; i++)
    y[i][0] = c * x[i][0] - s * x[i][2] + 4, y[i][1] = x[i][1] - 2, y[i][2] = s * x[i][0] + c * x[i][2] + 1;
  cr_expect_lt(superposed_rmsd((const double(*)[3])x, (const double(*)[3])y, 5), 1e-6);
  y[4][1] += 3;
  double r = superposed_rmsd((const double(*)[3])x, (const double(*)[3])y, 5);
  cr_expect(r > 0.5 && r <= 3.0 / sqrt(5.0) + 1e-9, "one atom moved 3 Å: %.3f", r);
}

/* The least superposed RMSD over the matchings of gen's heavy atoms onto
 * ref's (the same graph: element, heavy degree and bonds kept), up to
 * MATCH_CAP complete matchings: the symmetric RMSD, where a phenyl ring's
 * two faces or a carboxylate's two oxygens are one shape. */
enum { MATCH_CAP = 4096, MATCH_MAX = 160 };
struct matcher {
  int n;                           /* heavy atoms */
  int ref_idx[MATCH_MAX], gen_idx[MATCH_MAX]; /* heavy atom k -> index in atoms[] */
  unsigned char ra[MATCH_MAX][MATCH_MAX], ga[MATCH_MAX][MATCH_MAX]; /* adjacency */
  int rdeg[MATCH_MAX], gdeg[MATCH_MAX];
  int order[MATCH_MAX];            /* ref heavy atoms, each after a neighbour where it has one */
  int map[MATCH_MAX], used[MATCH_MAX];
  const struct mol *ref, *gen;
  double best;
  int found;
};


static void match_done(struct matcher *mt) {
  double(*x)[3] = calloc((size_t)mt->n, sizeof *x), (*y)[3] = calloc((size_t)mt->n, sizeof *y);
  for (int k = 0; k < mt->n; k++) {
    const struct mol_atom *a = &mt->ref->atoms[mt->ref_idx[k]], *b = &mt->gen->atoms[mt->gen_idx[mt->map[k]]];
    x[k][0] = a->x, x[k][1] = a->y, x[k][2] = a->z_;
    y[k][0] = b->x, y[k][1] = b->y, y[k][2] = b->z_;
  }
  double r = superposed_rmsd((const double(*)[3])x, (const double(*)[3])y, mt->n);
  if (r < mt->best) mt->best = r;
  mt->found++;
  free(x);
  free(y);
}

static void match_from(struct matcher *mt, int step) {
  if (mt->found >= MATCH_CAP) return;
  if (step == mt->n) {
    match_done(mt);
    return;
  }
  int k = mt->order[step];
  for (int c = 0; c < mt->n; c++) {
    if (mt->used[c] || mt->rdeg[k] != mt->gdeg[c] ||
        mt->ref->atoms[mt->ref_idx[k]].z != mt->gen->atoms[mt->gen_idx[c]].z)
      continue;
    int ok = 1;
    for (int s = 0; s < step && ok; s++) {
      int j = mt->order[s];
      ok = mt->ra[k][j] == mt->ga[c][mt->map[j]];
    }
    if (!ok) continue;
    mt->map[k] = c, mt->used[c] = 1;
    match_from(mt, step + 1);
    mt->used[c] = 0;
  }
}

static void heavy_graph(const struct mol *m, int *idx, unsigned char (*adj)[MATCH_MAX], int *deg, int *n) {
  int pos[1024];
  *n = 0;
  for (int i = 0; i < m->n_atoms && i < 1024; i++) {
    pos[i] = -1;
    if (m->atoms[i].z != 1 && *n < MATCH_MAX) pos[i] = *n, idx[(*n)++] = i;
  }
  for (int b = 0; b < m->n_bonds; b++) {
    int p = pos[m->bonds[b].a], q = pos[m->bonds[b].b];
    if (p < 0 || q < 0) continue;
    adj[p][q] = adj[q][p] = 1;
    deg[p]++, deg[q]++;
  }
}

/* -1 when the two heavy-atom graphs do not match at all. */
static double symmetric_rmsd(const struct mol *ref, const struct mol *gen) {
  struct matcher *mt = calloc(1, sizeof *mt);
  int ng = 0;
  mt->ref = ref, mt->gen = gen, mt->best = 1e30;
  heavy_graph(ref, mt->ref_idx, mt->ra, mt->rdeg, &mt->n);
  heavy_graph(gen, mt->gen_idx, mt->ga, mt->gdeg, &ng);
  double r = -1;
  if (ng == mt->n && mt->n > 0) {
    /* breadth-first from atom 0 (and from each unreached atom) */
    int seen[MATCH_MAX] = {0}, head = 0, tail = 0;
    for (int s = 0; s < mt->n; s++) {
      if (seen[s]) continue;
      seen[s] = 1, mt->order[tail++] = s;
      while (head < tail) {
        int a = mt->order[head++];
        for (int b = 0; b < mt->n; b++)
          if (mt->ra[a][b] && !seen[b]) seen[b] = 1, mt->order[tail++] = b;
      }
    }
    match_from(mt, 0);
    if (mt->found) r = mt->best;
  }
  free(mt);
  return r;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Measured (deterministic: seed 42), shapes built from the canonical
 * SMILES and matched with symmetry: median 2.37 Å over the 20 (0.86-3.46).
 * Twenty ligands' median swings with any change to the torsion choices: it
 * was 1.66 Å (0.65-3.28) before the torsion pass turned its bonds the right
 * way, a fix that moved bench/gen3d.sh's 2,200 ligands (held-out, tuning
 * and a third set) from a median of 1.647 to 1.617 Å; here 7 ligands got
 * worse by more than 0.5 Å and 1 better, against 226 and 226 there.
 * For scale, bench/gen3d.sh's measure on the same 20: ETKDGv3 1.87 Å. The
 * floor catches a gross loss of quality (a broken builder, torsions or
 * check), not the tenths of an Ångström bench/gen3d.sh measures on 1,000
 * ligands. */
#define MEDIAN_RMSD_FLOOR 2.60

Test(gen3d_quality, pdb_ligands_rmsd_floor) {
  char *path = NULL, *text = NULL;
  cr_assert(asprintf(&path, "%s/tests/data/chem/pdb_ligands20.sdf", SE3_SOURCE_DIR) > 0);
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f, "%s", path);
  size_t cap = 0;
  ssize_t got = getdelim(&text, &cap, '\0', f);
  fclose(f);
  cr_assert_gt(got, 0);
  double rmsd[32];
  int n = 0;
  for (char *rec = text; *rec && n < 32;) {
    char *end = strstr(rec, "$$$$\n");
    cr_assert_not_null(end, "record %d has no $$$$ line", n + 1);
    size_t len = (size_t)(end + 5 - rec);
    struct ob_parse_opts o = opts("sdf", 42);
    struct ob_parse_opts ro = o;
    ro.gen3d = OB_GEN3D_NEVER;
    ro.add_hydrogens = 0;
    struct mol ref, gen;
    char buf[600];
    cr_assert_eq(parse(rec, len, &ro, &ref, buf, sizeof buf), 0, "record %d as read: %s", n + 1, buf);
    cr_assert_eq(parse(rec, len, &o, &gen, buf, sizeof buf), 0, "record %d regenerated: %s", n + 1, buf);
    cr_assert_eq(gen.coords_gen3d, 1);
    cr_expect_str_eq(gen.smiles, ref.smiles, "record %d (%s): another molecule", n + 1, ref.name);
    char *back = smiles_from_3d(&gen);
    cr_expect_str_eq(back, ref.smiles, "record %d (%s): stereo changed, 3D gives %s", n + 1, ref.name, back);
    free(back);
    double r = symmetric_rmsd(&ref, &gen);
    cr_assert_geq(r, 0, "record %d (%s): no matching of the generated heavy atoms onto the file's", n + 1, ref.name);
    rmsd[n++] = r;
    mol_free(&ref);
    mol_free(&gen);
    rec = end + 5;
  }
  free(text);
  free(path);
  cr_assert_eq(n, 20, "20 ligands in the file");
  qsort(rmsd, (size_t)n, sizeof *rmsd, cmp_double);
  double median = 0.5 * (rmsd[n / 2 - 1] + rmsd[n / 2]);
  fprintf(stderr, "gen3d_quality: median heavy-atom RMSD to the PDB pose over %d ligands: %.3f A (%.2f-%.2f)\n", n,
          median, rmsd[0], rmsd[n - 1]);
  cr_expect_lt(median, MEDIAN_RMSD_FLOOR, "median RMSD %.3f Å over %d PDB ligands (floor %.2f)", median, n,
               MEDIAN_RMSD_FLOOR);
}
