/* test_shape.c — the shape check (chem/shape.h) and the shapes 3D
 * generation gives (issue 67).
 *
 * The check: a bond, an angle and an aromatic ring each at the edge of its
 * bounds pass and just past them fail, at both stated tolerances, with the
 * failure named (atoms, length, range); every conformer is checked, and the
 * one that fails is named. Real geometries pass: the DFT ones of QM9 at
 * the generated shapes' tolerance, of QM7 (strained bicyclics among them)
 * at the input's (all but one at the generated shapes'), twenty PDB
 * crystal ligands at the input's.
 *
 * The generator: molecules whose rings Open Babel 3.1.1's builder tore
 * (it laid one piece's ring template on another piece's ring: a furan's on
 * a benzofuran, a pyrazole's on an indazole) come out with every bond,
 * 1-3 distance and aromatic ring within bounds over ten conformers, and,
 * independently of the table, no heavy-atom bond longer than 2.0 Å and no
 * angle wider than 135° at a carbon of four neighbours. On
 * 970c817's generator the first three of them had a ring bond of 4-5 Å. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chem/mol.h"
#include "chem/obbridge.h"
#include "chem/records.h"
#include "chem/shape.h"
#include "common/error.h"
#include "tests/testutil.h"

static void setup(void) { cr_assert_eq(ob_init(), 0, "ob_init"); }

TestSuite(shape, .init = setup);

/* ---- molecules by hand ------------------------------------------------- */

static void atom(struct mol *m, int z, int implicit_h, int aromatic, double x, double y, double zz) {
  tu_add_atom(m, z, x, y, zz);
  m->atoms[m->n_atoms - 1].implicit_h = (uint8_t)implicit_h;
  m->atoms[m->n_atoms - 1].aromatic = (uint8_t)aromatic;
}

/* Chloromethane's heavy atoms (hydrogens implicit), C-Cl d Å apart: a bond
 * and no angle. The table's C-Cl single bond: 1.70-1.80 Å. */
static void ccl(struct mol *m, double d) {
  mol_init(m);
  m->dim = 3;
  atom(m, 6, 3, 0, 0, 0, 0);
  atom(m, 17, 0, 0, d, 0, 0);
  tu_add_bond(m, 0, 1, 1);
}

/* Propane's carbons, C-C 1.53 Å, the C-C-C angle `deg`. */
static void propane(struct mol *m, double deg) {
  mol_init(m);
  m->dim = 3;
  double t = deg * M_PI / 180;
  atom(m, 6, 3, 0, 1.53, 0, 0);
  atom(m, 6, 2, 0, 0, 0, 0);
  atom(m, 6, 3, 0, 1.53 * cos(t), 1.53 * sin(t), 0);
  tu_add_bond(m, 0, 1, 1);
  tu_add_bond(m, 1, 2, 1);
}

/* Benzene's carbons, a regular hexagon of 1.39 Å in the xy plane, atom 0
 * lifted by `lift` Å out of it. */
static void benzene(struct mol *m, double lift) {
  mol_init(m);
  m->dim = 3;
  for (int i = 0; i < 6; i++) {
    double t = i * M_PI / 3;
    atom(m, 6, 1, 1, 1.39 * cos(t), 1.39 * sin(t), i == 0 ? lift : 0);
  }
  for (int i = 0; i < 6; i++)
    tu_add_bond(m, i < (i + 1) % 6 ? i : (i + 1) % 6, i < (i + 1) % 6 ? (i + 1) % 6 : i, MOL_BOND_AROMATIC);
}

static int fails(const struct mol *m, double tol, double ptol, struct mol_why *why) {
  mol_why_clear(why);
  return mol_shape_check(m, tol, ptol, why, NULL);
}

/* ---- the check ---------------------------------------------------------- */

Test(shape, a_bond_at_the_edge_of_its_bounds) {
  struct mol m;
  struct mol_why why;
  const double gen[2] = {SHAPE_TOL_GENERATED, SHAPE_PLANAR_TOL}, in[2] = {SHAPE_TOL_INPUT, SHAPE_PLANAR_TOL_INPUT};
  const double *tols[2] = {gen, in};
  for (int k = 0; k < 2; k++) {
    double tol = tols[k][0], ptol = tols[k][1];
    ccl(&m, 1.80 + tol - 0.01);
    cr_assert_eq(fails(&m, tol, ptol, &why), 0, "C-Cl %.2f Å at tolerance %.2f: %s", 1.80 + tol - 0.01, tol,
                 why.detail);
    mol_free(&m);
    ccl(&m, 1.80 + tol + 0.01);
    cr_assert_eq(fails(&m, tol, ptol, &why), 1, "C-Cl %.2f Å passed at tolerance %.2f", 1.80 + tol + 0.01, tol);
    cr_assert_str_eq(why.reason, "bond out of bounds");
    cr_assert_eq(why.atom, 1);
    cr_assert(strstr(why.detail, "bond C1-Cl2 is ") && strstr(why.detail, "(1.70-1.80 Å)"), "%s", why.detail);
    mol_free(&m);
    ccl(&m, 1.70 - tol + 0.01); /* short as well as long */
    cr_assert_eq(fails(&m, tol, ptol, &why), 0, "%s", why.detail);
    mol_free(&m);
    ccl(&m, 1.70 - tol - 0.01);
    cr_assert_eq(fails(&m, tol, ptol, &why), 1);
    mol_free(&m);
  }
  ccl(&m, 9000); /* issue 67: an SDF's 9,000 Å bond */
  cr_assert_eq(fails(&m, SHAPE_TOL_INPUT, SHAPE_PLANAR_TOL_INPUT, &why), 1);
  cr_assert(strstr(why.detail, "9000.00 Å"), "%s", why.detail);
  mol_free(&m);
}

Test(shape, an_angle_at_the_edge_of_its_bounds) {
  /* an sp3 carbon outside rings: 110.5 ± 6.5°, as a distance with the bonds
   * as they are, then the tolerance */
  struct mol m;
  struct mol_why why;
  propane(&m, 109.5);
  cr_assert_eq(fails(&m, SHAPE_TOL_GENERATED, SHAPE_PLANAR_TOL, &why), 0, "%s", why.detail);
  mol_free(&m);
  double hi = 2 * 1.53 * sin(117.0 * M_PI / 360); /* the ends' distance at 117° */
  for (int k = -1; k <= 1; k += 2) {
    double d = hi + SHAPE_TOL_GENERATED + k * 0.005, deg = 2 * asin(d / 3.06) * 180 / M_PI;
    propane(&m, deg);
    cr_assert_eq(fails(&m, SHAPE_TOL_GENERATED, SHAPE_PLANAR_TOL, &why), k > 0, "C-C-C %.1f°: %s", deg, why.detail);
    if (k > 0) {
      cr_assert_str_eq(why.reason, "angle out of bounds");
      cr_assert(strstr(why.detail, "angle C1-C2-C3 is ") && strstr(why.detail, "(104-117°)"), "%s", why.detail);
    }
    mol_free(&m);
  }
  propane(&m, 60); /* folded: the ends 1.53 Å apart */
  cr_assert_eq(fails(&m, SHAPE_TOL_GENERATED, SHAPE_PLANAR_TOL, &why), 1);
  mol_free(&m);
}

Test(shape, an_aromatic_ring_out_of_its_plane) {
  struct mol m;
  struct mol_why why;
  benzene(&m, 0.0);
  cr_assert_eq(fails(&m, SHAPE_TOL_GENERATED, SHAPE_PLANAR_TOL, &why), 0, "%s", why.detail);
  mol_free(&m);
  /* lifting one atom by h tilts the mean plane too: it lies h/2 from it */
  benzene(&m, 0.25);
  cr_assert_eq(fails(&m, SHAPE_TOL_GENERATED, SHAPE_PLANAR_TOL, &why), 0, "%s", why.detail);
  mol_free(&m);
  benzene(&m, 0.40);
  cr_assert_eq(fails(&m, SHAPE_TOL_GENERATED, SHAPE_PLANAR_TOL, &why), 1, "a ring 0.20 Å out of plane passed");
  cr_assert_str_eq(why.reason, "aromatic ring not planar");
  cr_assert(strstr(why.detail, "aromatic ring of 6 atoms not planar: C1 is 0.20 Å from its plane"), "%s", why.detail);
  /* and at the input's tolerance it passes */
  cr_assert_eq(fails(&m, SHAPE_TOL_INPUT, SHAPE_PLANAR_TOL_INPUT, &why), 0, "%s", why.detail);
  mol_free(&m);
}

Test(shape, every_conformer_is_checked) {
  struct mol m;
  struct mol_why why;
  ccl(&m, 1.77);
  m.n_confs = 2;
  m.confs = calloc(2 * 2 * 3, sizeof *m.confs);
  m.confs[3] = 1.78;     /* conformer 2: C-Cl 1.78 Å */
  m.confs[6 + 3] = 2.60; /* conformer 3: 2.60 Å */
  int conf = -1;
  mol_why_clear(&why);
  cr_assert_eq(mol_shape_check(&m, SHAPE_TOL_GENERATED, SHAPE_PLANAR_TOL, &why, &conf), 1);
  cr_assert_eq(conf, 2);
  cr_assert(strstr(why.detail, "conformer 3 of 3: bond C1-Cl2 is 2.60 Å"), "%s", why.detail);
  mol_free(&m);
}

/* Every record of an SD file as the file has it (no hydrogens added, no 3D
 * generation), held against the bounds at (tol, ptol): the count failing,
 * the first failure's text in first. */
static int file_failures(const char *path, double tol, double ptol, int *n_records, char *first, size_t len) {
  struct se3_error e;
  struct rec_options ro = {0};
  struct rec_reader *rd = rec_open(path, MOL_FMT_SDF, &ro, &e);
  cr_assert_not_null(rd, "%s: %s", path, se3_error_str(&e).s);
  struct ob_parse_opts o = {.format = "sdf", .gen3d = OB_GEN3D_NEVER, .max_atoms = 999, .fragments = OB_FRAG_KEEP};
  struct rec r;
  int bad = 0, n = 0;
  first[0] = 0;
  while (rec_next(rd, &r, &e) > 0) {
    struct mol m;
    struct mol_why why;
    if (ob_parse_why(r.text, r.len, &o, &m, &why) != 0) {
      mol_free(&m);
      continue; /* (qm9_mini holds one invalid record on purpose: mol_check's business) */
    }
    n++;
    mol_why_clear(&why);
    if (mol_shape_check(&m, tol, ptol, &why, NULL)) {
      if (!bad) snprintf(first, len, "record %d (%s): %s: %s", n, m.name ? m.name : "", why.reason, why.detail);
      bad++;
    }
    mol_free(&m);
  }
  rec_close(rd);
  *n_records = n;
  return bad;
}

Test(shape, real_geometries_pass) {
  char first[700];
  int n;
  /* DFT minima: within the generated shapes' own bounds */
  cr_assert_eq(file_failures(tu_src("workflows/data/qm9_mini.sdf"), SHAPE_TOL_GENERATED, SHAPE_PLANAR_TOL, &n, first,
                             sizeof first),
               0, "%s", first);
  cr_assert_geq(n, 20);
  char *dir = tu_tmpdir("shape_qm7");
  cr_assert_eq(tu_sh(NULL, "zcat '%s' > '%s/qm7.sdf'", tu_src("workflows/data/qm7_quick.sdf.gz"), dir), 0);
  char path[600];
  snprintf(path, sizeof path, "%s/qm7.sdf", dir);
  /* (the quickstart reads them as input: one, gdb7k_3231, has a methyl's
   * H-C-H at 91°, which only the input's tolerance lets by) */
  cr_assert_eq(file_failures(path, SHAPE_TOL_INPUT, SHAPE_PLANAR_TOL_INPUT, &n, first, sizeof first), 0, "%s", first);
  cr_assert_leq(file_failures(path, SHAPE_TOL_GENERATED, SHAPE_PLANAR_TOL, &n, first, sizeof first), 1, "%s", first);
  cr_assert_geq(n, 1000);
  free(dir);
  /* crystal structures: within the input's */
  cr_assert_eq(file_failures(tu_src("tests/data/chem/pdb_ligands20.sdf"), SHAPE_TOL_INPUT, SHAPE_PLANAR_TOL_INPUT, &n,
                             first, sizeof first),
               0, "%s", first);
  cr_assert_eq(n, 20);
}

/* ---- the generator ------------------------------------------------------ */

Test(shape, generated_rings_stay_closed) {
  const char *smiles[] = {
      "c1ccoc1Cc1cc2ccccc2o1",                           /* a furan's template laid on a benzofuran */
      "CCn1ccnc1[C@@H]1OCC[C@H]1NC(=O)c1cc2c(C)cccc2o1", /* Enamine: the same, after an imidazole */
      "CN(Cc1nccs1)[C@H]1CC12CCN(C(=O)C1(NC(N)=O)CC1)CC2",
      "CC[C@@H](Cc1ccc(OC)c(CNC(=O)c2ccc3ccc4cccc5ccc2c3c45)c1)C(=O)O", /* PDB 3vi8: a pyrene */
      "O=C(CCN1CCc2nc(NC3Cc4ccccc4C3)ncc2C1)c1ccc2[nH]c(=O)oc2c1",      /* an indane, a benzoxazolone */
      "COc1cc(Nc2nccc(Nc3c(Cl)ccc4c3OCO4)n2)cc(OC)c1OC",                /* a benzodioxole */
      "C1=CC2CC1C=C2c1ccc2c(c1)Cc1ccccc1-2",                            /* a norbornadiene, a fluorene */
      "Cc1[nH]nc2cnc(-c3cccnc3)cc12",
      /* cd671d8: a substituent laid across the ring at a fusion or spiro
       * carbon, 137-148° (crystal: 109-111°), passed the check */
      "COc1cccnc1N1C[C@H]2C(=O)N(C)C(=N)N[C@@]2(c2cc(-c3cccc(C#N)c3)cs2)C1",  /* PDB 4h3i */
      "O=C1c2ccccc2N=C2N(c3ccccc3)CC[C@@]12O",                                /* PDB 3bz9 */
      "Cn1cc(Br)cc1C(=O)Nc1[nH]nc2c1CN(C(=O)N[C@H](CN1CCCC1)c1ccccc1)C21CC1", /* PDB 4bky */
  };
  struct ob_parse_opts o = {.format = "smi",
                            .add_hydrogens = 1,
                            .gen3d = OB_GEN3D_ALWAYS,
                            .quality = OB_Q_FAST,
                            .seed = 42,
                            .max_atoms = 999,
                            .fragments = OB_FRAG_KEEP,
                            .conformers = 10};
  for (size_t i = 0; i < sizeof smiles / sizeof *smiles; i++) {
    char text[256];
    snprintf(text, sizeof text, "%s\n", smiles[i]);
    struct mol m;
    struct mol_why why;
    int rc = ob_parse_why(text, strlen(text), &o, &m, &why);
    cr_assert_eq(rc, 0, "%s rejected: %s %s", smiles[i], why.reason, why.detail);
    mol_why_clear(&why);
    cr_assert_eq(mol_shape_check(&m, SHAPE_TOL_GENERATED, SHAPE_PLANAR_TOL, &why, NULL), 0, "%s: %s: %s", smiles[i],
                 why.reason, why.detail);
    /* and, whatever the table says, no heavy-atom bond of 2 Å or more in any conformer */
    for (int c = 0; c < mol_n_conformers(&m); c++) {
      mol_swap_conformer(&m, c);
      for (int k = 0; k < m.n_bonds; k++) {
        const struct mol_atom *a = &m.atoms[m.bonds[k].a], *b = &m.atoms[m.bonds[k].b];
        if (a->z == 1 || b->z == 1) continue;
        double d = sqrt(pow(a->x - b->x, 2) + pow(a->y - b->y, 2) + pow(a->z_ - b->z_, 2));
        cr_assert_lt(d, 2.0, "%s, conformer %d: bond %u-%u is %.2f Å", smiles[i], c + 1, m.bonds[k].a + 1,
                     m.bonds[k].b + 1, d);
      }
      /* nor an angle wider than 135° at a carbon of four neighbours */
      for (int j = 0; j < m.n_atoms; j++) {
        int nb[8], d = 0;
        for (int k = 0; k < m.n_bonds && d < 8; k++)
          if (m.bonds[k].a == (uint32_t)j || m.bonds[k].b == (uint32_t)j)
            nb[d++] = (int)(m.bonds[k].a == (uint32_t)j ? m.bonds[k].b : m.bonds[k].a);
        if (m.atoms[j].z != 6 || d != 4) continue;
        const struct mol_atom *c0 = &m.atoms[j];
        for (int x = 0; x < d; x++)
          for (int y = x + 1; y < d; y++) {
            const struct mol_atom *a = &m.atoms[nb[x]], *b = &m.atoms[nb[y]];
            double u[3] = {a->x - c0->x, a->y - c0->y, a->z_ - c0->z_},
                   v[3] = {b->x - c0->x, b->y - c0->y, b->z_ - c0->z_};
            double cs = (u[0] * v[0] + u[1] * v[1] + u[2] * v[2]) /
                        sqrt((u[0] * u[0] + u[1] * u[1] + u[2] * u[2]) * (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]));
            double deg = acos(cs) * 180 / M_PI;
            cr_assert_lt(deg, 135.0, "%s, conformer %d: angle %d-%d-%d is %.0f°", smiles[i], c + 1, nb[x] + 1, j + 1,
                         nb[y] + 1, deg);
          }
      }
      mol_swap_conformer(&m, c);
    }
    mol_free(&m);
  }
}
