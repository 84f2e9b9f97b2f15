/* test_gen3d.c — checked 3D generation (chem/gen3d.cc) through the C API:
 * the stereo a SMILES specifies survives (tetrahedral, ring, cis/trans), as
 * the canonical isomeric SMILES of the written SD record read back says;
 * generated molecules pass mol_check's minimum distance, including ones the
 * builder alone leaves with atoms on top of each other; one seed, one
 * conformer; a stereo no geometry can have is a reject naming the atom;
 * stereo the builder cannot give is embedded by the ETKDG fallback. */
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

TestSuite(gen3d, .init = setup);

/* Every record whole (no fragment dropped), hydrogens added, 3D built. */
static struct ob_parse_opts opts(const char *format, enum ob_quality q) {
  struct ob_parse_opts o = {.format = format,
                            .add_hydrogens = 1,
                            .gen3d = OB_GEN3D_ALWAYS,
                            .quality = q,
                            .seed = 1,
                            .max_atoms = 999,
                            .fragments = OB_FRAG_KEEP};
  return o;
}

static void parse_ok(const char *smiles, const struct ob_parse_opts *o, struct mol *m) {
  char text[512];
  snprintf(text, sizeof text, "%s\n", smiles);
  struct mol_why why;
  int rc = ob_parse_why(text, strlen(text), o, m, &why);
  char buf[600];
  mol_why_text(&why, buf, sizeof buf);
  cr_assert_eq(rc, 0, "'%s' rejected: %s", smiles, buf);
}

/* The canonical SMILES of m's SD record read back without 3D generation:
 * stereo perceived from the coordinates. Caller frees. */
static char *smiles_from_3d(const struct mol *m) {
  char *sdf = ob_write_sdf(m);
  cr_assert_not_null(sdf);
  struct ob_parse_opts o = opts("sdf", OB_Q_FAST);
  o.gen3d = OB_GEN3D_NEVER;
  o.add_hydrogens = 0;
  struct mol back;
  struct mol_why why;
  int rc = ob_parse_why(sdf, strlen(sdf), &o, &back, &why);
  char buf[600];
  mol_why_text(&why, buf, sizeof buf);
  cr_assert_eq(rc, 0, "SD record read back rejected: %s\n%s", buf, sdf);
  free(sdf);
  char *s = strdup(back.smiles);
  mol_free(&back);
  return s;
}

static void expect_close_pairs_none(const struct mol *m, const char *smiles) {
  struct mol_check_opts co = {.max_atoms = 999, .min_distance = 0.5};
  char reason[256] = "";
  cr_assert_eq(mol_check(m, &co, reason, sizeof reason), 0, "%s: %s", smiles, reason);
}

/* Fully specified stereo: every stereocentre and stereo double bond has its
 * configuration in the SMILES, so the 3D structure must give back the same
 * canonical SMILES. */
static const char *CHIRAL[] = {
    "C[C@H](N)C(=O)O",                                                   /* L-alanine */
    "C[C@@H](N)C(=O)O",                                                  /* D-alanine */
    "O[C@@H]1[C@@H](O)[C@H](O)[C@@H](CO)O[C@H]1O",                       /* a hexopyranose: five ring centres */
    "C[C@H]1CC[C@@H](C)CC1",                                             /* trans-1,4-dimethylcyclohexane */
    "C[C@H]1CC[C@H](C)CC1",                                              /* cis */
    "C[C@@H]1CCCC[C@H]1N",                                               /* cis-2-methylcyclohexylamine */
    "C[C@@H]1CCCC[C@@H]1N",                                              /* trans */
    "C/C=C/C(=O)O",                                                      /* E */
    "C/C=C\\C(=O)O",                                                     /* Z */
    "F/C=C/[C@H](Cl)CC",                                                 /* E and a centre */
    "Cl/C(F)=C(\\Br)I",                                                  /* tetrasubstituted */
    "CC[C@@]1(O)C[C@@H]2CC[C@H]1C2",                                     /* bridged (norbornane) */
    "C[C@]12CC[C@H]3[C@@H](CC=C4C[C@@H](O)CC[C@@]34C)[C@@H]1CC[C@@H]2O", /* a steroid */
    "N[C@@H](Cc1ccccc1)C(=O)N[C@@H](CC(=O)O)C(=O)OC",                    /* aspartame */
    "COc1c(Cl)cc(Cl)cc1CN1C[C@H](OC)C[C@@H]1c1ncc[nH]1",                 /* Enamine: builder leaves a clash */
    "Cc1noc(C)c1C(=O)N[C@@H]1CCC(=O)N(C2CC2)[C@H]1c1nccn1C",             /* Enamine: clash in a ring system */
    "C/C=C/C=C/C=C/C(=O)N[C@@H](C)C(=O)O",                               /* conjugated E,E,E */
    /* PDB ligands the builder alone gets wrong at an open-chain centre */
    "CCC(=O)NCCSC(=O)[C@H]([C@H]1CC[C@@H]2[C@]1(C)CC[C@H]1[C@H]2CCC2=CC(=O)C=C[C@]12C)C",
    "OC[C@H]([C@H]([C@@H]1O[C@H](C[C@@H]([C@H]1NC(=O)C)NC(=N)N)C(=O)O)O)O",
    "Oc1ccc(cc1)[C@H]([C@@H](N1CC[C@H](CC1)Cc1ccccc1)C)O",
};

static void stereo_kept(enum ob_quality q) {
  for (size_t i = 0; i < sizeof CHIRAL / sizeof *CHIRAL; i++) {
    struct ob_parse_opts o = opts("smi", q);
    struct mol m;
    parse_ok(CHIRAL[i], &o, &m);
    cr_assert_eq(m.dim, 3);
    cr_assert_eq(m.coords_gen3d, 1);
    /* m.smiles is the input's canonical SMILES (taken before 3D) */
    char *back = smiles_from_3d(&m);
    cr_expect_str_eq(back, m.smiles, "%s (quality %d): stereo changed, 3D gives %s", CHIRAL[i], (int)q, back);
    expect_close_pairs_none(&m, CHIRAL[i]);
    free(back);
    mol_free(&m);
  }
}

Test(gen3d, fast_keeps_specified_stereo) { stereo_kept(OB_Q_FAST); }
Test(gen3d, medium_keeps_specified_stereo) { stereo_kept(OB_Q_MEDIUM); }

/* Enamine SMILES whose builder geometry has atoms closer than 0.5 Å (found
 * with the builder alone: 9 % of the library), and a salt. */
static const char *CLASHING[] = {
    "COc1c(Cl)cc(Cl)cc1CN1C[C@H](OC)CC1c1ncc[nH]1",          /* a chain over a ring: bonds turned */
    "Cc1noc(CC2(O)CCCN(C(=O)c3c(C)ccn3C)C2)n1",              /* the same */
    "CNS(=O)(=O)CCNC(=O)N1CC(c2ccccc2)C2COCCC21",            /* a hydrogen in a ring fusion: cleanup */
    "O=C(c1ccc2c(c1)[nH]c(=O)n2C1CC1)N1CCS(=O)(=O)C2CCCC21", /* the same */
    "Cc1n[nH]c(C)c1CNC1CCCN(c2ncc[nH]c2=O)C1",               /* turns alone leave another clash */
    "CCC(C(=O)O)N1CCCC(C(=O)Nc2ccccc2)C1.Cl",                /* a salt: fragments laid apart */
};

Test(gen3d, fast_molecules_pass_the_distance_check) {
  for (size_t i = 0; i < sizeof CLASHING / sizeof *CLASHING; i++)
    for (unsigned seed = 1; seed <= 5; seed++) {
      struct ob_parse_opts o = opts("smi", OB_Q_FAST);
      o.seed = seed;
      struct mol m;
      parse_ok(CLASHING[i], &o, &m);
      expect_close_pairs_none(&m, CLASHING[i]);
      mol_free(&m);
    }
}

static void expect_same_coordinates(const struct mol *a, const struct mol *b, const char *what) {
  cr_assert_eq(a->n_atoms, b->n_atoms);
  for (int i = 0; i < a->n_atoms; i++)
    cr_assert(a->atoms[i].x == b->atoms[i].x && a->atoms[i].y == b->atoms[i].y && a->atoms[i].z_ == b->atoms[i].z_,
              "%s: atom %d differs between two parses with one seed", what, i + 1);
}

/* One seed, one conformer, whatever the worker parsed in between; also for
 * molecules that took a fix (a clash undone). */
Test(gen3d, same_seed_same_coordinates) {
  const char *cases[] = {CHIRAL[2], CHIRAL[12], CLASHING[0], CLASHING[2], CLASHING[3]};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    struct ob_parse_opts o = opts("smi", OB_Q_FAST);
    o.seed = 4242;
    struct mol a, b, c;
    parse_ok(cases[i], &o, &a);
    parse_ok(CLASHING[1], &o, &c); /* something in between */
    mol_free(&c);
    parse_ok(cases[i], &o, &b);
    expect_same_coordinates(&a, &b, cases[i]);
    mol_free(&a);
    mol_free(&b);
  }
}

/* A nitrile that the canonical SMILES writes first (N#CC...), in a molecule
 * whose first build clashes: Open Babel's UFF took the barrier of its first
 * torsions, about the sp carbon, from whatever its stack held, and the
 * cleanup gave these ESOL pyrethroids (rows 87, 128) one shape or another by
 * what the process had parsed before (issue 67). */
Test(gen3d, a_leading_nitrile_cleaned_up_the_same_after_others) {
  const char *cases[] = {"CC(C)C(C(=O)OC(C#N)c1cccc(Oc2ccccc2)c1)c3ccc(OC(F)F)cc3",
                         "CC1(C)C(C=C(Cl)Cl)C1C(=O)OC(C#N)c2ccc(F)c(Oc3ccccc3)c2"};
  const char *between[] = {"CC1(C)C(C=C(Br)Br)C1C(=O)OC(C#N)c2cccc(Oc3ccccc3)c2", /* ESOL 273 */
                           "CC12CCC3C(CCC4=CC(=O)CCC34C)C2CCC1C(=O)CO"};           /* ESOL 101 */
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    struct ob_parse_opts o = opts("smi", OB_Q_FAST);
    o.seed = 42;
    struct mol a, b, c;
    parse_ok(cases[i], &o, &a);
    for (size_t k = 0; k < sizeof between / sizeof *between; k++) {
      parse_ok(between[k], &o, &c);
      mol_free(&c);
      parse_ok(cases[i], &o, &b);
      expect_same_coordinates(&a, &b, cases[i]);
      mol_free(&b);
    }
    mol_free(&a);
  }
}

/* Unspecified centres are free: the input's canonical SMILES has no stereo,
 * and the molecule is built and passes. */
Test(gen3d, unspecified_stereo_is_free) {
  struct ob_parse_opts o = opts("smi", OB_Q_FAST);
  struct mol m;
  parse_ok("CC(N)C(=O)NC1CCCC(C)C1", &o, &m);
  cr_assert_null(strchr(m.smiles, '@'));
  expect_close_pairs_none(&m, "CC(N)C(=O)NC1CCCC(C)C1");
  mol_free(&m);
}

/* Stereo the builder's ring templates cannot give (a Z double bond in a
 * 14-membered ring, steroid and bridged ring fusions: PDB ligands): with
 * RDKit in the build (chem/etkdg.h) ETKDG embeds each and its 3D structure
 * reads back to the input's canonical SMILES; without it each is refused
 * with the check and atom named. Never passed on wrong. */
Test(gen3d, stereo_out_of_the_builders_reach) {
  const char *hard[] = {
      "O=C1CCC/C=C\\CCOC(=O)c2c(C1)c(Cl)c(cc2O)O",
      "OCC(=O)[C@H]1CC[C@@H]2[C@]1(C=O)C[C@H](O)[C@H]1[C@H]2CCC2=CC(=O)CC[C@]12C",
      "O[C@@H]1C=C[C@@]2(C[C@H]1O[C@@H](C2)C(=O)O)C(=O)O",
  };
  const int fallback = ob_gen3d_fallback() != NULL;
  for (size_t i = 0; i < sizeof hard / sizeof *hard; i++) {
    struct ob_parse_opts o = opts("smi", OB_Q_FAST);
    char text[512];
    snprintf(text, sizeof text, "%s\n", hard[i]);
    struct mol m;
    struct mol_why why;
    int rc = ob_parse_why(text, strlen(text), &o, &m, &why);
    char buf[600];
    mol_why_text(&why, buf, sizeof buf);
    if (fallback) {
      cr_assert_eq(rc, 0, "%s refused with %s in the build: %s", hard[i], ob_gen3d_fallback(), buf);
      char *back = smiles_from_3d(&m);
      cr_expect_str_eq(back, m.smiles, "%s accepted, but its 3D structure reads %s", hard[i], back);
      expect_close_pairs_none(&m, hard[i]);
      free(back);
      mol_free(&m);
      continue;
    }
    cr_assert_neq(rc, 0, "%s accepted without a fallback: move it to CHIRAL", hard[i]);
    cr_expect_str_eq(why.reason, "3D generation: stereo not kept", "%s: %s", hard[i], buf);
    cr_expect_gt(why.atom, 0, "%s: the atom column", hard[i]);
    cr_expect(strstr(why.detail, "stereo not kept at atom ") || strstr(why.detail, "cis/trans not kept at bond "),
              "%s: the detail names no stereo check: %s", hard[i], buf);
  }
}

/* The smallest |triple product| of unit bond vectors over the four choices
 * of three neighbours of atom i when it has four, else 1: about 0.77 for a
 * tetrahedron, 0 when the atom lies in the plane of three of them. */
static double tetrahedral_volume(const struct mol *m, int i) {
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

/* Enamine SMILES whose stereocentre at a ring fusion or next to a ring
 * oxygen the builder laid flat (square planar: neighbours at 69-177
 * degrees), which Open Babel still read as the input's configuration and
 * RDKit as none (bench/gen3d.sh): a centre too flat to read is never
 * passed, whatever the canonical SMILES says; rebuilt, every centre the
 * SMILES specifies is a tetrahedron. */
Test(gen3d, flat_centres_are_rebuilt) {
  const char *flat[] = {
      "Cc1cc(=O)c(C(=O)NC[C@H]2CCO[C@@H]2C(C)C)c[nH]1",
      "CCc1cc(C(=O)N2C[C@H]3CCC[C@@]3(c3nc(CC4CC4)no3)C2)[nH]n1",
      "Cc1ccc(C(=O)N2C[C@H]3CCC[C@@]3(c3nc(CC4CC4)no3)C2)c(O)c1C",
      "Cc1[nH]c(C#N)cc1C(=O)N1C[C@@H]2CCC[C@]2(c2nc(C(C)C)no2)C1",
  };
  for (size_t i = 0; i < sizeof flat / sizeof *flat; i++) {
    struct ob_parse_opts o = opts("smi", OB_Q_FAST);
    o.seed = 42; /* the bench's seed, which gave these flat centres */
    struct mol m;
    parse_ok(flat[i], &o, &m);
    char *back = smiles_from_3d(&m);
    cr_expect_str_eq(back, m.smiles, "%s: 3D reads %s", flat[i], back);
    free(back);
    for (int a = 0; a < m.n_atoms; a++)
      if (m.atoms[a].z == 6)
        cr_expect_gt(tetrahedral_volume(&m, a), 0.17, "%s: carbon %d is no tetrahedron (%.2f)", flat[i], a + 1,
                     tetrahedral_volume(&m, a));
    mol_free(&m);
  }
}

/* Phosphorus with a P=O or P=S bond is tetrahedral: OBBuilder alone placed
 * its neighbours at 90 and 180 degrees (a trigonal bipyramid), which
 * bench/gen3d.sh read as a changed centre in 15 of 200 PDB ligands. */
Test(gen3d, phosphorus_is_tetrahedral) {
  static const char *const smi[] = {"COP(=O)(O)OC", "CCP(=O)(CC)CC", "COP(=S)(OC)OC", "O[C@@H]1CCC[C@H]1COP(=O)(O)O",
                                    "Nc1ncnc2n(cnc12)[C@@H]1O[C@H](COP(=O)(O)O)[C@@H](O)[C@H]1O"};
  for (int q = OB_Q_FAST; q <= OB_Q_MEDIUM; q++)
    for (size_t k = 0; k < sizeof smi / sizeof smi[0]; k++) {
      struct ob_parse_opts o = opts("smi", (enum ob_quality)q);
      struct mol m;
      parse_ok(smi[k], &o, &m);
      for (int i = 0; i < m.n_atoms; i++) {
        if (m.atoms[i].z != 15) continue;
        int nb[4], n = 0;
        for (int b = 0; b < m.n_bonds && n < 4; b++)
          if (m.bonds[b].a == (uint32_t)i || m.bonds[b].b == (uint32_t)i)
            nb[n++] = (int)(m.bonds[b].a == (uint32_t)i ? m.bonds[b].b : m.bonds[b].a);
        cr_assert_eq(n, 4, "%s: P with %d neighbours", smi[k], n);
        for (int a = 0; a < 4; a++)
          for (int c = a + 1; c < 4; c++) {
            const struct mol_atom *p = &m.atoms[i], *x = &m.atoms[nb[a]], *y = &m.atoms[nb[c]];
            double u[3] = {x->x - p->x, x->y - p->y, x->z_ - p->z_}, v[3] = {y->x - p->x, y->y - p->y, y->z_ - p->z_};
            double cosang = (u[0] * v[0] + u[1] * v[1] + u[2] * v[2]) /
                            sqrt((u[0] * u[0] + u[1] * u[1] + u[2] * u[2]) * (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]));
            double ang = acos(cosang) * 180 / M_PI;
            cr_assert(ang > 95 && ang < 130, "%s (quality %d): angle %.0f at P", smi[k], q, ang);
          }
      }
      mol_free(&m);
    }
}
