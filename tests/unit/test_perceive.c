/* test_perceive.c — the chemistry chem/perceive.h reads off a molecule
 * (rings and their sizes, degree, hydrogens, hybridisation, conjugation,
 * the handedness of centres and double bonds) on molecules built by Open
 * Babel from SMILES with 3D coordinates, and the graph's atom and bond
 * feature columns made of it (chem/graph.h): their widths, the distance
 * still last, the blob round trip, a mirror image flipping only the stereo
 * columns, and the atoms' order not mattering. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "chem/graph.h"
#include "chem/mol.h"
#include "chem/obbridge.h"
#include "chem/perceive.h"
#include "common/error.h"
#include "tests/testutil.h"

static void setup(void) { cr_assert_eq(ob_init(), 0, "ob_init"); }

TestSuite(perceive, .init = setup);

/* smi with hydrogens as atoms and a generated 3D shape. */
static void parse(const char *smi, struct mol *m) {
  struct ob_parse_opts o = {.format = "smi",
                            .add_hydrogens = 1,
                            .gen3d = OB_GEN3D_ALWAYS,
                            .quality = OB_Q_FAST,
                            .seed = 1,
                            .max_atoms = 999,
                            .fragments = OB_FRAG_KEEP};
  struct mol_why why;
  char buf[600];
  int rc = ob_parse_why(smi, strlen(smi), &o, m, &why);
  mol_why_text(&why, buf, sizeof buf);
  cr_assert_eq(rc, 0, "%s: %s", smi, buf);
}

static void perceived(const char *smi, struct mol *m, struct perceive *p) {
  parse(smi, m);
  cr_assert_eq(perceive(m, p), 0);
  cr_assert_eq(p->n_atoms, m->n_atoms);
  cr_assert_eq(p->n_bonds, m->n_bonds);
}

/* The first heavy atom of element z, -1 when none. */
static int first_of(const struct mol *m, int z) {
  for (int i = 0; i < m->n_atoms; i++)
    if (m->atoms[i].z == z) return i;
  return -1;
}

/* The bond between heavy atoms of orders `order`, the first one, -1 when none. */
static int bond_of_order(const struct mol *m, int order) {
  for (int b = 0; b < m->n_bonds; b++)
    if (m->bonds[b].order == order) return b;
  return -1;
}

Test(perceive, rings_degree_hydrogens) {
  struct mol m;
  struct perceive p;
  perceived("c1ccccc1", &m, &p);
  for (int i = 0; i < m.n_atoms; i++)
    if (m.atoms[i].z == 6) {
      cr_assert_eq(p.atom[i].ring, 6);
      cr_assert_eq(p.atom[i].degree, 3);
      cr_assert_eq(p.atom[i].hydrogens, 1);
      cr_assert_eq(p.atom[i].hybridisation, PERCEIVE_HYB_SP2);
    } else {
      cr_assert_eq(p.atom[i].ring, 0, "a hydrogen is in no ring");
      cr_assert_eq(p.atom[i].hybridisation, PERCEIVE_HYB_NONE);
      cr_assert_eq(p.atom[i].degree, 1);
    }
  for (int b = 0; b < m.n_bonds; b++) {
    int heavy = m.atoms[m.bonds[b].a].z == 6 && m.atoms[m.bonds[b].b].z == 6;
    cr_assert_eq(p.bond[b].ring, heavy ? 6 : 0);
    cr_assert_eq(p.bond[b].conjugated, heavy);
  }
  perceive_free(&p);
  mol_free(&m);

  /* norbornane: the bridgeheads' smallest ring is the five; spiro[2.5]octane:
   * the spiro atom's is the three; cyclododecane: 8 or more */
  perceived("C1CC2CCC1C2", &m, &p);
  int five = 0;
  for (int i = 0; i < m.n_atoms; i++)
    if (m.atoms[i].z == 6) {
      five += p.atom[i].ring == 5;
      cr_assert(p.atom[i].ring == 5 || p.atom[i].ring == 6);
    }
  cr_assert_eq(five, 7, "every norbornane carbon lies on a five-ring");
  perceive_free(&p);
  mol_free(&m);
  perceived("C1CC12CCCCC2", &m, &p);
  int three = 0, six = 0;
  for (int i = 0; i < m.n_atoms; i++)
    if (m.atoms[i].z == 6) three += p.atom[i].ring == 3, six += p.atom[i].ring == 6;
  cr_assert_eq(three, 3);
  cr_assert_eq(six, 5);
  perceive_free(&p);
  mol_free(&m);
  perceived("C1CCCCCCCCCCC1CC", &m, &p);
  for (int i = 0; i < m.n_atoms; i++)
    if (m.atoms[i].z == 6) {
      int in_ring = p.atom[i].degree == 4 && p.atom[i].ring;
      cr_assert(in_ring ? p.atom[i].ring == PERCEIVE_MAX_RING : p.atom[i].ring == 0 || p.atom[i].ring == 8);
    }
  int ethyl = 0;
  for (int b = 0; b < m.n_bonds; b++)
    ethyl += m.atoms[m.bonds[b].a].z == 6 && m.atoms[m.bonds[b].b].z == 6 && p.bond[b].ring == 0;
  cr_assert_eq(ethyl, 2, "the ethyl's two bonds are in no ring");
  perceive_free(&p);
  mol_free(&m);

  perceived("CC", &m, &p);
  cr_assert_eq(p.atom[0].degree, 4);
  cr_assert_eq(p.atom[0].hydrogens, 3);
  cr_assert_eq(p.atom[0].hybridisation, PERCEIVE_HYB_SP3);
  cr_assert_eq(p.bond[0].conjugated, 0);
  perceive_free(&p);
  mol_free(&m);
}

Test(perceive, conjugation_and_hybridisation) {
  struct mol m;
  struct perceive p;
  perceived("C=CC=C", &m, &p);
  for (int b = 0; b < m.n_bonds; b++)
    if (m.atoms[m.bonds[b].a].z == 6 && m.atoms[m.bonds[b].b].z == 6)
      cr_assert_eq(p.bond[b].conjugated, 1, "butadiene: all three C-C bonds");
  perceive_free(&p);
  mol_free(&m);

  perceived("CC(C)=O", &m, &p);
  cr_assert_eq(p.bond[bond_of_order(&m, 2)].conjugated, 0, "acetone's C=O stands alone");
  cr_assert_eq(p.atom[first_of(&m, 8)].hybridisation, PERCEIVE_HYB_SP2);
  perceive_free(&p);
  mol_free(&m);

  perceived("CC(N)=O", &m, &p);
  int n = first_of(&m, 7), cn = -1;
  for (int b = 0; b < m.n_bonds; b++)
    if ((int)m.bonds[b].a == n || (int)m.bonds[b].b == n)
      if (m.atoms[m.bonds[b].a].z == 6 || m.atoms[m.bonds[b].b].z == 6) cn = b;
  cr_assert_geq(cn, 0);
  cr_assert_eq(p.bond[cn].conjugated, 1, "the amide C-N");
  cr_assert_eq(p.bond[bond_of_order(&m, 2)].conjugated, 1, "the amide C=O");
  cr_assert_eq(p.atom[n].hybridisation, PERCEIVE_HYB_SP2, "the amide N");
  cr_assert_eq(p.atom[n].hydrogens, 2);
  perceive_free(&p);
  mol_free(&m);

  perceived("CC#N", &m, &p);
  cr_assert_eq(p.atom[first_of(&m, 7)].hybridisation, PERCEIVE_HYB_SP);
  cr_assert_eq(p.atom[0].hybridisation, PERCEIVE_HYB_SP3);
  perceive_free(&p);
  mol_free(&m);

  perceived("CCN", &m, &p);
  cr_assert_eq(p.atom[first_of(&m, 7)].hybridisation, PERCEIVE_HYB_SP3, "an amine N is no donor to anything");
  perceive_free(&p);
  mol_free(&m);
}

/* m's mirror image: x -> -x for every conformer. */
static void mirror(struct mol *m) {
  for (int i = 0; i < m->n_atoms; i++)
    m->atoms[i].x = -m->atoms[i].x;
}

/* The centre: the one atom with a chirality. */
static int centre(const struct mol *m, const struct perceive *p) {
  int c = -1, n = 0;
  for (int i = 0; i < m->n_atoms; i++)
    if (p->atom[i].chirality) c = i, n++;
  cr_assert_eq(n, 1, "%d stereocentres, 1 expected", n);
  return c;
}

Test(perceive, centres) {
  struct mol a, b;
  struct perceive pa, pb;
  perceived("C[C@H](N)O", &a, &pa);
  perceived("C[C@@H](N)O", &b, &pb);
  int ca = centre(&a, &pa), cb = centre(&b, &pb);
  cr_assert_eq(a.atoms[ca].z, 6);
  cr_assert_eq(pa.atom[ca].chirality, -pb.atom[cb].chirality, "the two enantiomers: opposite signs");
  int8_t before = pa.atom[ca].chirality;
  perceive_free(&pa);
  mirror(&a);
  cr_assert_eq(perceive(&a, &pa), 0);
  cr_assert_eq(pa.atom[ca].chirality, -before, "a mirror image flips the sign");
  perceive_free(&pa);
  perceive_free(&pb);
  mol_free(&a);
  mol_free(&b);

  /* no centre: two alike neighbours, or a flat (2D) molecule */
  perceived("CC(C)O", &a, &pa);
  for (int i = 0; i < a.n_atoms; i++)
    cr_assert_eq(pa.atom[i].chirality, 0);
  perceive_free(&pa);
  for (int i = 0; i < a.n_atoms; i++)
    a.atoms[i].z_ = 0;
  mol_free(&a);
  perceived("C[C@H](N)O", &a, &pa);
  perceive_free(&pa);
  for (int i = 0; i < a.n_atoms; i++)
    a.atoms[i].z_ = 0, a.atoms[i].y = 0;
  cr_assert_eq(perceive(&a, &pa), 0);
  for (int i = 0; i < a.n_atoms; i++)
    cr_assert_eq(pa.atom[i].chirality, 0, "atoms on a line have no handedness");
  perceive_free(&pa);
  mol_free(&a);
}

Test(perceive, double_bonds) {
  struct mol m;
  struct perceive p;
  perceived("F/C=C/F", &m, &p);
  int db = bond_of_order(&m, 2);
  cr_assert_eq(p.bond[db].stereo, -1, "trans");
  mirror(&m);
  perceive_free(&p);
  cr_assert_eq(perceive(&m, &p), 0);
  cr_assert_eq(p.bond[db].stereo, -1, "a mirror image of a double bond is the same bond");
  perceive_free(&p);
  mol_free(&m);
  perceived("F/C=C\\F", &m, &p);
  cr_assert_eq(p.bond[bond_of_order(&m, 2)].stereo, 1, "cis");
  perceive_free(&p);
  mol_free(&m);
  perceived("C=CF", &m, &p);
  cr_assert_eq(p.bond[bond_of_order(&m, 2)].stereo, 0, "CH2= has two alike hydrogens");
  perceive_free(&p);
  mol_free(&m);
  perceived("C1=CCCCC1", &m, &p);
  cr_assert_eq(p.bond[bond_of_order(&m, 2)].stereo, 0, "a double bond in a six-ring has no E/Z");
  perceive_free(&p);
  mol_free(&m);
}

/* Every atom and bond's values are the same with the atoms in reverse order. */
Test(perceive, atom_order) {
  const char *smis[] = {"C[C@H](N)C(=O)N[C@@H](Cc1ccccc1)C(=O)O", "F/C=C/C(=O)Nc1ccncc1", "C1CC12CC(O)CCC2"};
  for (size_t s = 0; s < sizeof smis / sizeof *smis; s++) {
    struct mol m, r;
    struct perceive p, q;
    perceived(smis[s], &m, &p);
    mol_init(&r);
    r.n_atoms = m.n_atoms, r.n_bonds = m.n_bonds;
    r.atoms = calloc((size_t)m.n_atoms, sizeof *r.atoms);
    r.bonds = calloc((size_t)m.n_bonds, sizeof *r.bonds);
    int n = m.n_atoms;
    for (int i = 0; i < n; i++)
      r.atoms[n - 1 - i] = m.atoms[i];
    for (int b = 0; b < m.n_bonds; b++) {
      uint32_t x = (uint32_t)(n - 1) - m.bonds[b].a, y = (uint32_t)(n - 1) - m.bonds[b].b;
      r.bonds[m.n_bonds - 1 - b] = (struct mol_bond){x < y ? x : y, x < y ? y : x, m.bonds[b].order};
    }
    cr_assert_eq(perceive(&r, &q), 0);
    int centres = 0;
    for (int i = 0; i < n; i++) {
      const struct perceive_atom *x = &p.atom[i], *y = &q.atom[n - 1 - i];
      cr_assert(x->degree == y->degree && x->hydrogens == y->hydrogens && x->hybridisation == y->hybridisation &&
                    x->ring == y->ring && x->chirality == y->chirality,
                "%s atom %d", smis[s], i + 1);
      centres += x->chirality != 0;
    }
    for (int b = 0; b < m.n_bonds; b++) {
      const struct perceive_bond *x = &p.bond[b], *y = &q.bond[m.n_bonds - 1 - b];
      cr_assert(x->ring == y->ring && x->conjugated == y->conjugated && x->stereo == y->stereo, "%s bond %d", smis[s],
                b + 1);
    }
    if (s == 0) cr_assert_eq(centres, 2, "the dipeptide's two centres");
    perceive_free(&p);
    perceive_free(&q);
    mol_free(&m);
    mol_free(&r);
  }
}

/* ---- the graph's columns ----------------------------------------------------- */

static const uint8_t EL[] = {1, 6, 7, 8, 9};

Test(perceive, graph_columns) {
  struct mol m;
  parse("F/C=C/C(=O)N[C@@H](C)c1ccccc1", &m);
  uint8_t af[GRAPH_AF_COUNT] = {GRAPH_AF_RING,   GRAPH_AF_HYBRIDISATION, GRAPH_AF_AROMATIC,
                                GRAPH_AF_DEGREE, GRAPH_AF_HYDROGENS,     GRAPH_AF_CHIRALITY};
  uint8_t bf[GRAPH_BF_COUNT] = {GRAPH_BF_STEREO, GRAPH_BF_CONJUGATED, GRAPH_BF_RING};
  struct graph_opts base = {.cutoff = 5.0,
                            .edges = GRAPH_EDGES_RADIUS_BONDS,
                            .elements = EL,
                            .n_elements = 5,
                            .with_other = 1,
                            .with_charge = 1};
  struct graph_opts o = base;
  o.atom_features = af, o.n_atom_features = GRAPH_AF_COUNT;
  o.bond_features = bf, o.n_bond_features = GRAPH_BF_COUNT;
  cr_assert_eq(graph_node_width(&base), 7);
  cr_assert_eq(graph_node_width(&o), 7 + 7 + 4 + 1 + 6 + 5 + 2);
  cr_assert_eq(graph_edge_width(&base), GRAPH_EDGE_WIDTH);
  cr_assert_eq(graph_edge_width(&o), GRAPH_EDGE_WIDTH + 4);
  struct graph g0, g;
  struct se3_error e;
  cr_assert_eq(graph_build(&m, &base, &g0, &e), 0, "%s", se3_error_str(&e).s);
  cr_assert_eq(graph_build(&m, &o, &g, &e), 0, "%s", se3_error_str(&e).s);
  cr_assert_eq(g.n_edges, g0.n_edges);
  cr_assert_eq(g.edge_width, 10);
  struct perceive p;
  cr_assert_eq(perceive(&m, &p), 0);
  int centre = -1, stereo_edges = 0;
  for (int i = 0; i < m.n_atoms; i++) {
    const float *f = &g.node_feat[(size_t)i * (size_t)g.node_width], *f0 = &g0.node_feat[(size_t)i * 7];
    cr_assert_eq(memcmp(f, f0, 7 * sizeof *f), 0, "the element and charge columns come first, as before");
    float sum = 0;
    for (int c = 7; c < g.node_width; c++)
      sum += f[c];
    /* ring: 0 or 2 ones; hybridisation, degree, hydrogens: one each; aromatic, chirality: 0 or 1 */
    float want = (p.atom[i].ring ? 2 : 0) + 3 + (m.atoms[i].aromatic ? 1 : 0) + (p.atom[i].chirality ? 1 : 0);
    cr_assert_float_eq(sum, want, 1e-6, "atom %d", i + 1);
    cr_assert_eq(f[7] == 1, p.atom[i].ring != 0, "the ring flag first, as listed");
    if (p.atom[i].chirality) centre = i;
  }
  cr_assert_geq(centre, 0);
  for (int e = 0; e < g.n_edges; e++) {
    const float *f = &g.edge_feat[(size_t)e * 10], *f0 = &g0.edge_feat[(size_t)e * GRAPH_EDGE_WIDTH];
    cr_assert_eq(memcmp(f, f0, 5 * sizeof *f), 0, "the bond one-hot first");
    cr_assert_eq(f[9], f0[GRAPH_EF_DISTANCE], "the distance last");
    if (f[0] == 1) cr_assert(f[5] == 0 && f[6] == 0 && f[7] == 0 && f[8] == 0, "no bond, no bond features");
    stereo_edges += f[5] == 0 && f[6] == 1; /* trans, listed first */
  }
  cr_assert_eq(stereo_edges, 2, "the F/C=C/ bond, both directions");

  /* the blob keeps the width; a width below the bond one-hot and distance is refused */
  uint8_t *blob;
  size_t len;
  cr_assert_eq(graph_to_blob(&g, &blob, &len), 0);
  struct graph back;
  cr_assert_eq(graph_from_blob(blob, len, &back, &e), 0, "%s", se3_error_str(&e).s);
  cr_assert_eq(back.edge_width, 10);
  cr_assert_eq(memcmp(back.edge_feat, g.edge_feat, (size_t)g.n_edges * 10 * sizeof(float)), 0);
  graph_free(&back);
  free(blob);
  g0.edge_width = 5;
  cr_assert_neq(graph_to_blob(&g0, &blob, &len), 0);

  /* a mirror image: the chirality columns swap, nothing else moves */
  struct graph gm;
  mirror(&m);
  cr_assert_eq(graph_build(&m, &o, &gm, &e), 0, "%s", se3_error_str(&e).s);
  for (int i = 0; i < m.n_atoms; i++)
    for (int c = 0; c < g.node_width; c++) {
      float a = g.node_feat[(size_t)i * (size_t)g.node_width + (size_t)c];
      float b = gm.node_feat[(size_t)i * (size_t)g.node_width + (size_t)c];
      int chir = c >= g.node_width - 2;
      if (chir && i == centre)
        cr_assert_eq(a,
                     gm.node_feat[(size_t)i * (size_t)g.node_width + (size_t)(c == g.node_width - 1 ? c - 1 : c + 1)]);
      else
        cr_assert_eq(a, b, "atom %d column %d", i + 1, c);
    }

  /* a feature listed twice, or out of range, is refused */
  uint8_t twice[2] = {GRAPH_AF_RING, GRAPH_AF_RING};
  struct graph_opts bad = base;
  bad.atom_features = twice, bad.n_atom_features = 2;
  cr_assert_eq(graph_node_width(&bad), -1);
  cr_assert_neq(graph_build(&m, &bad, &gm, &e), 0);
  uint8_t beyond[1] = {GRAPH_BF_COUNT};
  bad = base;
  bad.bond_features = beyond, bad.n_bond_features = 1;
  cr_assert_eq(graph_edge_width(&bad), -1);
  cr_assert_neq(graph_build(&m, &bad, &gm, &e), 0);
  cr_assert(strstr(se3_error_str(&e).s, "feature"), "%s", se3_error_str(&e).s);
  cr_assert_eq(graph_atom_feature_of("chirality"), GRAPH_AF_CHIRALITY);
  cr_assert_eq(graph_bond_feature_of("aromatic"), -1);

  perceive_free(&p);
  graph_free(&g0);
  graph_free(&g);
  graph_free(&gm);
  mol_free(&m);
}
