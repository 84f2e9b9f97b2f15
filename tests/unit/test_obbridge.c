/* test_obbridge.c — the Open Babel bridge: parsing each input format,
 * canonical SMILES and InChIKeys, rejections with reasons, hydrogens,
 * dimensionality, input tags, 3D generation (sane and deterministic), the
 * SD writer round trip, and silence on stderr.
 *
 * Never feed known crashers here (robustness/crashers): isolation is the
 * worker pool's job, not this process's. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <omp.h>
#include <criterion/redirect.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chem/mol.h"
#include "chem/obbridge.h"
#include "chem/records.h"
#include "chem/scaffold.h"
#include "common/error.h"
#include "tests/testutil.h"

/* ---- helpers ---------------------------------------------------------------- */

static void setup(void) { cr_assert_eq(ob_init(), 0, "ob_init"); }

static struct ob_parse_opts opts(const char *format) {
  struct ob_parse_opts o = {
      .format = format, .gen3d = OB_GEN3D_NEVER, .quality = OB_Q_MEDIUM, .seed = 1, .max_atoms = 999};
  return o;
}

static void parse_ok(const char *text, const struct ob_parse_opts *o, struct mol *m) {
  char why[512] = "";
  int rc = ob_parse(text, strlen(text), o, m, why, sizeof why);
  cr_assert_eq(rc, 0, "'%s' rejected: %s", text, why);
}

static void expect_reject(const char *text, const struct ob_parse_opts *o, const char *want) {
  struct mol m;
  char why[512] = "";
  int rc = ob_parse(text, strlen(text), o, &m, why, sizeof why);
  cr_assert_eq(rc, 1, "'%s' accepted, expected '%s'", text, want);
  cr_assert(strstr(why, want), "'%s': reason '%s' lacks '%s'", text, why, want);
  cr_assert_eq(m.n_atoms, 0, "nothing left in out");
  cr_assert_null(m.atoms);
}

static int n_implicit_h(const struct mol *m) {
  int n = 0;
  for (int i = 0; i < m->n_atoms; i++)
    n += m->atoms[i].implicit_h;
  return n;
}

static int n_element(const struct mol *m, int z) {
  int n = 0;
  for (int i = 0; i < m->n_atoms; i++)
    n += m->atoms[i].z == z;
  return n;
}

static double bond_length(const struct mol *m, int k) {
  const struct mol_atom *a = &m->atoms[m->bonds[k].a], *b = &m->atoms[m->bonds[k].b];
  return sqrt(pow(a->x - b->x, 2) + pow(a->y - b->y, 2) + pow(a->z_ - b->z_, 2));
}

static int all_zero(const struct mol *m) {
  for (int i = 0; i < m->n_atoms; i++)
    if (m->atoms[i].x != 0 || m->atoms[i].y != 0 || m->atoms[i].z_ != 0) return 0;
  return 1;
}

/* The SD records of the shipped test file, by index. */
static char *sd_record(int index) {
  struct se3_error e;
  struct rec_reader *r = rec_open(tu_src("tests/data/chem/ethanol_benzene.sdf"), MOL_FMT_UNKNOWN, NULL, &e);
  cr_assert_not_null(r, "%s", se3_error_str(&e).s);
  struct rec rec;
  char *text = NULL;
  for (int i = 0; i <= index; i++)
    cr_assert_eq(rec_next(r, &rec, &e), 1);
  text = strdup(rec.text);
  rec_close(r);
  return text;
}

TestSuite(ob, .init = setup);

/* ---- basics ------------------------------------------------------------------ */

Test(ob, init_and_version) {
  cr_assert_eq(ob_init(), 0, "a second call is harmless");
  cr_assert_str_eq(ob_version(), "3.1.1");
}

Test(ob, smiles_ethanol) {
  struct ob_parse_opts o = opts("smi");
  struct mol m;
  parse_ok("OCC ethanol\n", &o, &m);
  cr_assert_str_eq(m.smiles, "CCO");
  cr_assert_str_eq(m.inchikey, "LFQSCWFLJHTTHZ-UHFFFAOYSA-N");
  cr_assert_str_eq(m.formula, "C2H6O");
  cr_assert_str_eq(m.name, "ethanol");
  cr_assert_eq(m.dim, 0);
  cr_assert_eq(m.coords_gen3d, 0);
  cr_assert_eq(m.charge, 0);
  cr_assert_eq(m.n_atoms, 3);
  cr_assert_eq(m.n_bonds, 2);
  cr_assert_eq(n_implicit_h(&m), 6);
  cr_assert_eq(m.n_tags, 0);
  for (int k = 0; k < m.n_bonds; k++) {
    cr_assert_lt(m.bonds[k].a, m.bonds[k].b);
    cr_assert_eq(m.bonds[k].order, 1);
  }
  mol_free(&m);
}

Test(ob, smiles_benzene_aromatic) {
  struct ob_parse_opts o = opts("smi");
  struct mol m;
  parse_ok("C1=CC=CC=C1\n", &o, &m);
  cr_assert_str_eq(m.smiles, "c1ccccc1");
  cr_assert_str_eq(m.inchikey, "UHOVQNZJYSORNB-UHFFFAOYSA-N");
  cr_assert_str_eq(m.name, "");
  cr_assert_eq(m.n_atoms, 6);
  for (int i = 0; i < 6; i++) {
    cr_assert_eq(m.atoms[i].aromatic, 1);
    cr_assert_eq(m.atoms[i].implicit_h, 1);
  }
  for (int k = 0; k < 6; k++)
    cr_assert_eq(m.bonds[k].order, MOL_BOND_AROMATIC);
  mol_free(&m);
}

Test(ob, charges_and_triple_bonds) {
  struct ob_parse_opts o = opts("smi");
  o.fragments = OB_FRAG_KEEP; /* the salt whole (by default its chloride would go) */
  struct mol m;
  parse_ok("C[N+](C)(C)CC#N.[Cl-] salt\n", &o, &m);
  cr_assert_eq(m.charge, 0);
  int plus = 0, minus = 0, triple = 0;
  for (int i = 0; i < m.n_atoms; i++) {
    plus += m.atoms[i].charge == 1 && m.atoms[i].z == 7;
    minus += m.atoms[i].charge == -1 && m.atoms[i].z == 17;
  }
  for (int k = 0; k < m.n_bonds; k++)
    triple += m.bonds[k].order == 3;
  cr_assert_eq(plus, 1);
  cr_assert_eq(minus, 1);
  cr_assert_eq(triple, 1);
  mol_free(&m);
  parse_ok("CC(=O)[O-]\n", &o, &m);
  cr_assert_eq(m.charge, -1);
  mol_free(&m);
}

Test(ob, hydrogens_added) {
  struct ob_parse_opts o = opts("smi");
  o.add_hydrogens = 1;
  struct mol m;
  parse_ok("c1ccccc1\n", &o, &m);
  cr_assert_eq(m.n_atoms, 12);
  cr_assert_eq(n_element(&m, 1), 6);
  cr_assert_eq(n_implicit_h(&m), 0);
  cr_assert_str_eq(m.smiles, "c1ccccc1", "SMILES is computed before adding H");
  cr_assert_str_eq(m.formula, "C6H6");
  cr_assert_eq(m.n_bonds, 12);
  mol_free(&m);
}

/* ---- rejections ----------------------------------------------------------------- */

Test(ob, rejects_with_reasons) {
  struct ob_parse_opts o = opts("smi");
  expect_reject("C1CC\n", &o, "parse failed: Invalid SMILES string: 1 unmatched ring bonds.");
  expect_reject("[X]\n", &o, "parse failed: no message");
  expect_reject("c1cccc1\n", &o, "kekulize");
  expect_reject("*C\n", &o, "dummy atom: atom 1");
  expect_reject("[C+999]\n", &o, "formal charge out of range: 999 on atom 1");
  expect_reject("\n", &o, "parse failed");
  /* the reason carries no Open Babel banner lines */
  struct mol m;
  char why[512];
  cr_assert_eq(ob_parse("C1CC\n", 5, &o, &m, why, sizeof why), 1);
  cr_assert_null(strstr(why, "====="));
  cr_assert_null(strstr(why, "*** Open Babel"));
  cr_assert_null(strchr(why, '\n'));
  /* a short reason buffer is truncated, not overrun */
  char tiny[8];
  cr_assert_eq(ob_parse("C1CC\n", 5, &o, &m, tiny, sizeof tiny), 1);
  cr_assert_eq(strlen(tiny), 7);
}

/* A NUL byte inside the text ended it where Open Babel reads a C string:
 * `CC\0O` came out as ethane. */
Test(ob, nul_byte_in_the_text_is_refused) {
  struct ob_parse_opts o = opts("smi");
  struct mol m;
  char why[512] = "";
  static const char cut[] = "CC\0O name\n";
  int rc = ob_parse(cut, sizeof cut - 1, &o, &m, why, sizeof why);
  cr_assert_eq(rc, 1, "'CC\\0O' accepted as %s", rc == 0 ? m.smiles : "?");
  cr_assert(strstr(why, "NUL byte in the record: line 1 column 3"), "%s", why);
  cr_assert_null(m.atoms);
  o = opts("sdf");
  char *text = sd_record(0);
  size_t n = strlen(text);
  char *at = strstr(text, "M  END");
  cr_assert_not_null(at);
  at[1] = 0; /* "M\0 END" */
  cr_assert_eq(ob_parse(text, n, &o, &m, why, sizeof why), 1, "an SD record with a NUL byte accepted");
  cr_assert(strstr(why, "NUL byte in the record: line "), "%s", why);
  free(text);
}

Test(ob, rejects_bad_format_and_empty_sdf) {
  struct ob_parse_opts o = opts("nope");
  expect_reject("CCO\n", &o, "unknown Open Babel format: 'nope'");
  o = opts("sdf");
  expect_reject("empty\n  x\n\n  0  0  0  0  0  0  0  0  0  0999 V2000\nM  END\n$$$$\n", &o, "no atoms");
}

Test(ob, atom_and_size_caps) {
  struct ob_parse_opts o = opts("smi");
  size_t n = 1200;
  char *big = malloc(n + 2);
  memset(big, 'C', n);
  strcpy(big + n, "\n");
  expect_reject(big, &o, "too many atoms: 1200 > 999");
  free(big);
  o.max_atoms = 20;
  struct mol m;
  parse_ok("CCCCCCCCCC decane\n", &o, &m); /* 10 atoms without H */
  mol_free(&m);
  o.add_hydrogens = 1; /* 32 with them: refused before anything is added */
  expect_reject("CCCCCCCCCC decane\n", &o, "too many atoms: 32 > 20");
  o = opts("smi");
  o.max_record_bytes = 5;
  expect_reject("CCO ethanol\n", &o, "record too large: 12 > 5 bytes");
}

/* ---- formats and dimensions ----------------------------------------------------- */

Test(ob, sdf_tags_name_and_dim) {
  struct ob_parse_opts o = opts("sdf");
  struct mol m;
  char *text = sd_record(0);
  parse_ok(text, &o, &m);
  cr_assert_str_eq(m.name, "ethanol");
  cr_assert_str_eq(m.inchikey, "LFQSCWFLJHTTHZ-UHFFFAOYSA-N");
  cr_assert_eq(m.dim, 3);
  cr_assert_eq(m.n_atoms, 9);
  cr_assert_eq(n_implicit_h(&m), 0);
  cr_assert_eq(m.n_tags, 2, "only the input's tags, not Open Babel's own");
  cr_assert_str_eq(mol_tag(&m, "CAS"), "64-17-5");
  cr_assert_str_eq(mol_tag(&m, "note"), "a drink\nand a fuel");
  cr_assert_float_eq(m.atoms[2].x, 0.7614, 1e-9, "coordinates as read");
  cr_assert_float_eq(m.atoms[4].z_, 0.8924, 1e-9);
  mol_free(&m);
  free(text);

  text = sd_record(1);
  parse_ok(text, &o, &m);
  cr_assert_str_eq(m.name, "benzene");
  cr_assert_str_eq(m.smiles, "c1ccccc1");
  cr_assert_eq(m.dim, 2);
  cr_assert_str_eq(mol_tag(&m, "CAS"), "71-43-2");
  mol_free(&m);
  free(text);
}

Test(ob, all_zero_3d_is_0d) {
  struct ob_parse_opts o = opts("sdf");
  struct mol m;
  parse_ok("zero\n  se3test 01012500003D\n\n  2  1  0  0  0  0  0  0  0  0999 V2000\n"
           "    0.0000    0.0000    0.0000 C   0  0  0  0  0  0  0  0  0  0  0  0\n"
           "    0.0000    0.0000    0.0000 O   0  0  0  0  0  0  0  0  0  0  0  0\n"
           "  1  2  1  0  0  0  0\nM  END\n$$$$\n",
           &o, &m);
  cr_assert_eq(m.dim, 0);
  cr_assert_str_eq(m.smiles, "CO");
  mol_free(&m);
}

Test(ob, mol2_xyz_pdb_cml) {
  struct mol m;
  struct ob_parse_opts o = opts("mol2");
  parse_ok("@<TRIPOS>MOLECULE\nmethanol\n 6 5 1 0 0\nSMALL\nNO_CHARGES\n\n"
           "@<TRIPOS>ATOM\n"
           "      1 C1   -0.3700  0.0000  0.0000 C.3   1 MOH 0.0\n"
           "      2 O1    1.0500  0.0000  0.0000 O.3   1 MOH 0.0\n"
           "      3 H1   -0.7300  1.0300  0.0000 H     1 MOH 0.0\n"
           "      4 H2   -0.7300 -0.5100  0.8900 H     1 MOH 0.0\n"
           "      5 H3   -0.7300 -0.5100 -0.8900 H     1 MOH 0.0\n"
           "      6 H4    1.3700 -0.9100  0.0000 H     1 MOH 0.0\n"
           "@<TRIPOS>BOND\n     1 1 2 1\n     2 1 3 1\n     3 1 4 1\n     4 1 5 1\n     5 2 6 1\n",
           &o, &m);
  cr_assert_str_eq(m.name, "methanol");
  cr_assert_str_eq(m.smiles, "CO");
  cr_assert_str_eq(m.inchikey, "OKKJLVBELUTLKV-UHFFFAOYSA-N");
  cr_assert_eq(m.dim, 3);
  cr_assert_eq(m.n_atoms, 6);
  mol_free(&m);

  o = opts("xyz");
  parse_ok("3\nwater\nO 0.0 0.0 0.0\nH 0.9572 0.0 0.0\nH -0.2400 0.9266 0.0\n", &o, &m);
  cr_assert_str_eq(m.name, "water");
  cr_assert_str_eq(m.formula, "H2O");
  cr_assert_str_eq(m.inchikey, "XLYOFNOQVPJJNP-UHFFFAOYSA-N");
  cr_assert_eq(m.dim, 3);
  cr_assert_eq(m.n_bonds, 2, "bonds perceived from distances");
  mol_free(&m);

  o = opts("pdb");
  parse_ok("HETATM    1  C   MOH A   1      -0.370   0.000   0.000  1.00  0.00           C\n"
           "HETATM    2  O   MOH A   1       1.050   0.000   0.000  1.00  0.00           O\n"
           "END\n",
           &o, &m);
  cr_assert_str_eq(m.smiles, "CO");
  cr_assert_eq(m.dim, 3);
  mol_free(&m);

  o = opts("cml");
  parse_ok("<molecule id=\"ethanol\">\n <atomArray>\n"
           "  <atom id=\"a1\" elementType=\"C\" hydrogenCount=\"3\"/>\n"
           "  <atom id=\"a2\" elementType=\"C\" hydrogenCount=\"2\"/>\n"
           "  <atom id=\"a3\" elementType=\"O\" hydrogenCount=\"1\"/>\n"
           " </atomArray>\n <bondArray>\n"
           "  <bond atomRefs2=\"a1 a2\" order=\"1\"/>\n  <bond atomRefs2=\"a2 a3\" order=\"1\"/>\n"
           " </bondArray>\n</molecule>\n",
           &o, &m);
  cr_assert_str_eq(m.name, "ethanol");
  cr_assert_str_eq(m.inchikey, "LFQSCWFLJHTTHZ-UHFFFAOYSA-N");
  cr_assert_eq(m.dim, 0);
  mol_free(&m);
}

Test(ob, cml_records_from_a_file_parse) {
  char *dir = tu_tmpdir("ob_cml");
  char *p = tu_write(dir, "a.cml",
                     "<?xml version=\"1.0\"?>\n<cml xmlns=\"http://www.xml-cml.org/schema\">\n"
                     " <molecule id=\"one\"><atomArray><atom id=\"a1\" elementType=\"N\"/></atomArray></molecule>\n"
                     "</cml>\n"
                     "<c:cml xmlns:c=\"http://www.xml-cml.org/schema\">\n"
                     " <c:molecule id=\"two\"><c:atomArray><c:atom id=\"a1\" elementType=\"O\"/></c:atomArray>"
                     "</c:molecule>\n</c:cml>\n");
  struct se3_error e;
  struct rec_reader *r = rec_open(p, MOL_FMT_UNKNOWN, NULL, &e);
  cr_assert_not_null(r, "%s", se3_error_str(&e).s);
  struct ob_parse_opts o = opts(rec_format_ob(MOL_FMT_CML));
  struct rec rec;
  static const char *want[] = {"N", "O"}, *names[] = {"one", "two"};
  for (int i = 0; i < 2; i++) {
    cr_assert_eq(rec_next(r, &rec, &e), 1);
    struct mol m;
    parse_ok(rec.text, &o, &m);
    cr_assert_str_eq(m.smiles, want[i]);
    cr_assert_str_eq(m.name, names[i]);
    mol_free(&m);
  }
  cr_assert_eq(rec_next(r, &rec, &e), 0);
  rec_close(r);
  free(p);
  free(dir);
}

/* ---- 3D generation ----------------------------------------------------------- */

static void check_3d(const struct mol *m) {
  cr_assert_eq(m->dim, 3);
  cr_assert_eq(m->coords_gen3d, 1);
  cr_assert_not(all_zero(m));
  for (int i = 0; i < m->n_atoms; i++)
    cr_assert(isfinite(m->atoms[i].x) && isfinite(m->atoms[i].y) && isfinite(m->atoms[i].z_));
  for (int k = 0; k < m->n_bonds; k++) {
    double d = bond_length(m, k);
    cr_assert(d > 0.85 && d < 1.75, "bond %d is %.3f Å", k, d);
  }
}

Test(ob, gen3d_auto_builds_coordinates_with_h) {
  struct ob_parse_opts o = opts("smi");
  o.gen3d = OB_GEN3D_AUTO;
  o.add_hydrogens = 1;
  struct mol m;
  parse_ok("CC(=O)Oc1ccccc1C(=O)O aspirin\n", &o, &m);
  check_3d(&m);
  cr_assert_eq(m.n_atoms, 21);
  cr_assert_eq(n_element(&m, 1), 8);
  /* the methyl carbon is tetrahedral: its H are not in the plane of the ring */
  double zmin = 1e9, zmax = -1e9, xmin = 1e9, xmax = -1e9;
  for (int i = 0; i < m.n_atoms; i++) {
    zmin = fmin(zmin, m.atoms[i].z_), zmax = fmax(zmax, m.atoms[i].z_);
    xmin = fmin(xmin, m.atoms[i].x), xmax = fmax(xmax, m.atoms[i].x);
  }
  cr_assert_gt(zmax - zmin, 0.5);
  cr_assert_gt(xmax - xmin, 0.5);
  cr_assert_str_eq(m.smiles, "CC(=O)Oc1ccccc1C(=O)O");
  struct mol_check_opts co = {.max_atoms = 999, .min_distance = 0.5, .max_fragment_gap = 10};
  char why[256];
  cr_assert_eq(mol_check(&m, &co, why, sizeof why), 0, "generated geometry passes: %s", why);
  mol_free(&m);
}

Test(ob, gen3d_fast_and_without_h) {
  struct ob_parse_opts o = opts("smi");
  o.gen3d = OB_GEN3D_AUTO;
  o.quality = OB_Q_FAST;
  struct mol m;
  parse_ok("C1CCC(CC1)N cyclohexylamine\n", &o, &m);
  check_3d(&m);
  cr_assert_eq(m.n_atoms, 7, "no hydrogens unless asked");
  mol_free(&m);
}

Test(ob, gen3d_fragments_apart_and_single_atoms) {
  struct ob_parse_opts o = opts("smi");
  o.gen3d = OB_GEN3D_AUTO;
  o.add_hydrogens = 1;
  struct mol_check_opts co = {.max_atoms = 999, .min_distance = 0.5, .max_fragment_gap = 10};
  char why[256];
  struct mol m;
  static const char *multi[] = {"c1ccccc1.c1ccccc1", "CC(=O)[O-].[Na+]", "C1CCCCC1.C1CCCCC1.O"};
  for (int q = OB_Q_FAST; q <= OB_Q_MEDIUM; q++)
    for (size_t i = 0; i < sizeof multi / sizeof multi[0]; i++) {
      o.quality = (enum ob_quality)q;
      char text[128];
      snprintf(text, sizeof text, "%s\n", multi[i]);
      parse_ok(text, &o, &m);
      check_3d(&m);
      cr_assert_eq(mol_check(&m, &co, why, sizeof why), 0, "%s (quality %d): %s", multi[i], q, why);
      mol_free(&m);
    }
  parse_ok("[Na+]\n", &o, &m); /* one atom: wherever it is, it is 3D */
  cr_assert_eq(m.n_atoms, 1);
  cr_assert_eq(m.dim, 3);
  cr_assert_eq(m.coords_gen3d, 1);
  mol_free(&m);
}

Test(ob, gen3d_is_deterministic) {
  struct ob_parse_opts o = opts("smi");
  o.gen3d = OB_GEN3D_ALWAYS;
  o.add_hydrogens = 1;
  o.seed = 12345;
  const char *text = "CC(C)Cc1ccc(cc1)C(C)C(=O)O ibuprofen\n";
  struct mol a, b, c;
  parse_ok(text, &o, &a);
  parse_ok("CCO\n", &o, &c); /* something in between */
  mol_free(&c);
  parse_ok(text, &o, &b);
  cr_assert_eq(a.n_atoms, b.n_atoms);
  for (int i = 0; i < a.n_atoms; i++) {
    cr_assert(a.atoms[i].x == b.atoms[i].x && a.atoms[i].y == b.atoms[i].y && a.atoms[i].z_ == b.atoms[i].z_,
              "atom %d differs between two parses with one seed", i);
  }
  o.seed = 999;
  parse_ok(text, &o, &c);
  int differ = 0;
  for (int i = 0; i < a.n_atoms; i++)
    differ |= a.atoms[i].x != c.atoms[i].x;
  cr_assert(differ, "another seed gives another conformer");
  mol_free(&a);
  mol_free(&b);
  mol_free(&c);
}

/* The force field must not carry terms over from the previous molecule: a
 * positional isomer parsed just before (same atoms, same bond count) once made
 * the meta isomer come out with the para isomer's minimised geometry. */
Test(ob, gen3d_independent_of_the_molecule_before, .init = setup) {
  struct ob_parse_opts o = opts("smi");
  o.gen3d = OB_GEN3D_ALWAYS;
  o.add_hydrogens = 1;
  o.seed = 42;
  const char *meta = "C[N+](C)(C)CC1=CC=CC(=C1)[N+]([O-])=O meta\n";
  const char *para = "C[N+](C)(C)CC1=CC=C(C=C1)[N+]([O-])=O para\n";
  struct mol a, p, b;
  parse_ok(meta, &o, &a);
  parse_ok(para, &o, &p);
  parse_ok(meta, &o, &b);
  cr_assert_eq(a.n_atoms, b.n_atoms);
  for (int i = 0; i < a.n_atoms; i++)
    cr_assert(a.atoms[i].x == b.atoms[i].x && a.atoms[i].y == b.atoms[i].y && a.atoms[i].z_ == b.atoms[i].z_,
              "atom %d of the meta isomer depends on the para isomer parsed before it", i);
  mol_free(&a);
  mol_free(&p);
  mol_free(&b);
}

/* Hydrogens added to a 3D molecule get directions from rand(): they must come
 * out the same whatever the process parsed before (a resumed run parses in
 * another order than an uninterrupted one). */
Test(ob, added_hydrogens_independent_of_history, .init = setup) {
  struct ob_parse_opts o = opts("sdf");
  o.add_hydrogens = 1;
  o.allow_radicals = 1; /* the record marks N 6 a radical (M  RAD): rejected by default */
  /* QM7 record 375 (MIT, see tests/data/SOURCES.md): hydrogens are added to its N atoms. */
  const char *sdf =
      "gdb7k_0374.xyz\n"
      " OpenBabel11221611003D\n"
      "\n"
      " 14 13  0  0  0  0  0  0  0  0999 V2000\n"
      "    0.8692    0.0890   -0.0464 C   0  0  0  0  0  0  0  0  0  0  0  0\n"
      "    2.3504    0.0459   -0.2371 C   0  0  0  0  0  0  0  0  0  0  0  0\n"
      "    3.1862    0.9812    0.2389 C   0  0  0  0  0  0  0  0  0  0  0  0\n"
      "    4.6568    0.9141    0.0235 C   0  0  0  0  0  0  0  0  0  0  0  0\n"
      "    5.2899   -0.1700   -0.4988 N   0  0  0  0  0  0  0  0  0  0  0  0\n"
      "    5.4225    1.9068    0.3537 N   0  0  0  0  0  0  0  0  0  0  0  0\n"
      "    0.5358   -0.8088    0.4828 H   0  0  0  0  0  0  0  0  0  0  0  0\n"
      "    0.3691    0.1210   -1.0192 H   0  0  0  0  0  0  0  0  0  0  0  0\n"
      "    0.5504    0.9632    0.5302 H   0  0  0  0  0  0  0  0  0  0  0  0\n"
      "    2.7282   -0.7920   -0.8167 H   0  0  0  0  0  0  0  0  0  0  0  0\n"
      "    2.8133    1.8370    0.7901 H   0  0  0  0  0  0  0  0  0  0  0  0\n"
      "    4.9243   -1.0693   -0.2146 H   0  0  0  0  0  0  0  0  0  0  0  0\n"
      "    6.2930   -0.0956   -0.3638 H   0  0  0  0  0  0  0  0  0  0  0  0\n"
      "    4.8717    2.6834    0.7290 H   0  0  0  0  0  0  0  0  0  0  0  0\n"
      "  1  7  1  0  0  0  0\n"
      "  1  9  1  0  0  0  0\n"
      "  2  1  1  0  0  0  0\n"
      "  2  3  2  0  0  0  0\n"
      "  3 11  1  0  0  0  0\n"
      "  4  3  1  0  0  0  0\n"
      "  4  6  1  0  0  0  0\n"
      "  5 13  1  0  0  0  0\n"
      "  5 12  1  0  0  0  0\n"
      "  5  4  2  0  0  0  0\n"
      "  6 14  1  0  0  0  0\n"
      "  8  1  1  0  0  0  0\n"
      " 10  2  1  0  0  0  0\n"
      "M  RAD  1   6   2\n"
      "M  END\n"
      "$$$$\n";
  struct mol a, x, b;
  parse_ok(sdf, &o, &a);
  cr_assert_gt(a.n_atoms, 14);
  struct ob_parse_opts g = opts("smi");
  g.gen3d = OB_GEN3D_ALWAYS;
  g.add_hydrogens = 1;
  parse_ok("CC(C)Cc1ccc(cc1)C(C)C(=O)O\n", &g, &x); /* draws from rand() */
  parse_ok(sdf, &o, &b);
  for (int i = 0; i < a.n_atoms; i++)
    cr_assert(a.atoms[i].x == b.atoms[i].x && a.atoms[i].y == b.atoms[i].y && a.atoms[i].z_ == b.atoms[i].z_,
              "added hydrogen %d moved after another parse", i);
  mol_free(&a);
  mol_free(&x);
  mol_free(&b);
}

/* MDL V3000 connection tables read like V2000 ones. */
Test(ob, sdf_v3000, .init = setup) {
  struct ob_parse_opts o = opts("sdf");
  o.add_hydrogens = 1;
  const char *v3 = "ethanol\n  se3screen\n\n  0  0  0     0  0            999 V3000\n"
                   "M  V30 BEGIN CTAB\nM  V30 COUNTS 3 2 0 0 0\nM  V30 BEGIN ATOM\n"
                   "M  V30 1 C 0.0 0.0 0.0 0\nM  V30 2 C 1.52 0.0 0.0 0\nM  V30 3 O 2.02 1.34 0.1 0\n"
                   "M  V30 END ATOM\nM  V30 BEGIN BOND\nM  V30 1 1 1 2\nM  V30 2 1 2 3\nM  V30 END BOND\n"
                   "M  V30 END CTAB\nM  END\n$$$$\n";
  struct mol m;
  parse_ok(v3, &o, &m);
  cr_assert_str_eq(m.smiles, "CCO");
  cr_assert_str_eq(m.inchikey, "LFQSCWFLJHTTHZ-UHFFFAOYSA-N");
  cr_assert_eq(m.dim, 3);
  cr_assert_eq(m.n_atoms, 9);
  cr_assert_float_eq(m.atoms[1].x, 1.52, 1e-9);
  mol_free(&m);
}

Test(ob, gen3d_modes) {
  char *text = sd_record(0);
  struct ob_parse_opts o = opts("sdf");
  o.gen3d = OB_GEN3D_AUTO; /* 3D input: kept */
  struct mol m;
  parse_ok(text, &o, &m);
  cr_assert_eq(m.coords_gen3d, 0);
  cr_assert_float_eq(m.atoms[2].x, 0.7614, 1e-9);
  mol_free(&m);
  o.gen3d = OB_GEN3D_ALWAYS;
  parse_ok(text, &o, &m);
  check_3d(&m);
  cr_assert_eq(m.n_atoms, 9);
  mol_free(&m);
  free(text);

  text = sd_record(1); /* 2D benzene: AUTO builds 3D */
  o.gen3d = OB_GEN3D_AUTO;
  o.add_hydrogens = 1;
  parse_ok(text, &o, &m);
  check_3d(&m);
  cr_assert_eq(m.n_atoms, 12);
  mol_free(&m);
  free(text);

  o = opts("smi"); /* NEVER: SMILES stay 0D */
  o.add_hydrogens = 1;
  parse_ok("CCO\n", &o, &m);
  cr_assert_eq(m.dim, 0);
  cr_assert_eq(m.coords_gen3d, 0);
  cr_assert(all_zero(&m));
  cr_assert_eq(m.n_atoms, 9);
  mol_free(&m);
}

/* ---- SD writer -------------------------------------------------------------- */

static void round_trip(const char *smiles, int add_h, int gen3d) {
  struct ob_parse_opts o = opts("smi");
  o.add_hydrogens = add_h;
  o.gen3d = gen3d ? OB_GEN3D_AUTO : OB_GEN3D_NEVER;
  o.quality = OB_Q_FAST;
  struct mol m, back;
  char text[256];
  snprintf(text, sizeof text, "%s\n", smiles);
  parse_ok(text, &o, &m);
  char *sdf = ob_write_sdf(&m);
  cr_assert_not_null(sdf, "%s", smiles);
  struct ob_parse_opts so = opts("sdf");
  parse_ok(sdf, &so, &back);
  cr_assert_str_eq(back.smiles, m.smiles, "%s (H %d, 3D %d):\n%s", smiles, add_h, gen3d, sdf);
  cr_assert_str_eq(back.inchikey, m.inchikey);
  cr_assert_eq(back.n_atoms, m.n_atoms);
  cr_assert_eq(back.dim, m.dim);
  if (m.dim == 3)
    for (int i = 0; i < m.n_atoms; i++)
      cr_assert_float_eq(back.atoms[i].x, m.atoms[i].x, 1e-4);
  free(sdf);
  mol_free(&m);
  mol_free(&back);
}

Test(ob, write_sdf_round_trip) {
  static const char *smiles[] = {"CCO",           "c1ccccc1",           "c1cc[nH]c1",
                                 "O=c1cccc[nH]1", "c1ccc2c(c1)cc[nH]2", "Cn1cnc2c1c(=O)n(C)c(=O)n2C",
                                 "C[N+](=O)[O-]", "CC(=O)[O-].[Na+]",   "c1ccsc1",
                                 "C#N",           "c1ccc2ccccc2c1",     "[nH]1cccc1-c1ccncc1"};
  for (size_t i = 0; i < sizeof smiles / sizeof smiles[0]; i++) {
    round_trip(smiles[i], 0, 0);
    round_trip(smiles[i], 1, 0);
    round_trip(smiles[i], 1, 1);
  }
  /* struct mol holds no stereo flags, so stereo survives only in 3D coordinates */
  static const char *stereo[] = {"OC(=O)[C@@H](N)Cc1ccccc1", "OC(=O)[C@H](N)Cc1ccccc1", "C/C=C/C", "C/C=C\\C"};
  for (size_t i = 0; i < sizeof stereo / sizeof stereo[0]; i++)
    round_trip(stereo[i], 1, 1);
}

/* Isotopes: kept from SMILES and from an SD file's M  ISO line, part of the
 * canonical SMILES and the InChIKey ([13CH4] is not methane), and written
 * back as M  ISO lines; added hydrogens are plain. The scaffold key ignores
 * them: [13C]benzene has benzene's scaffold. */
Test(ob, isotopes_kept_and_written) {
  static const struct {
    const char *smiles;
    int add_h, gen3d;
  } cases[] = {{"[13CH4]", 0, 0},  {"[13CH4]", 1, 1},       {"[2H]O[2H]", 0, 0}, {"[2H]O[2H]", 1, 1},
               {"[15NH4+]", 1, 0}, {"[13cH]1ccccc1", 1, 1}, {"[235U]", 0, 0}};
  struct ob_parse_opts so = opts("sdf");
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    struct ob_parse_opts o = opts("smi");
    o.add_hydrogens = cases[i].add_h;
    o.gen3d = cases[i].gen3d ? OB_GEN3D_AUTO : OB_GEN3D_NEVER;
    o.quality = OB_Q_FAST;
    char text[64];
    snprintf(text, sizeof text, "%s\n", cases[i].smiles);
    struct mol m, back;
    parse_ok(text, &o, &m);
    char *sdf = ob_write_sdf(&m);
    cr_assert_not_null(sdf);
    cr_assert(strstr(sdf, "M  ISO"), "%s: no M  ISO line:\n%s", cases[i].smiles, sdf);
    parse_ok(sdf, &so, &back);
    cr_assert_str_eq(back.smiles, m.smiles, "%s (H %d, 3D %d) written and read back as %s:\n%s", cases[i].smiles,
                     cases[i].add_h, cases[i].gen3d, back.smiles, sdf);
    cr_assert_str_eq(back.inchikey, m.inchikey, "%s", cases[i].smiles);
    free(sdf);
    mol_free(&back);
    mol_free(&m);
  }
  struct ob_parse_opts o = opts("smi");
  struct mol a, b;
  parse_ok("[13CH4]\n", &o, &a);
  parse_ok("C\n", &o, &b);
  cr_assert_str_eq(a.smiles, "[13CH4]");
  cr_assert_str_neq(a.inchikey, b.inchikey, "[13CH4] and CH4 share an InChIKey: dedupe would merge them");
  mol_free(&a);
  mol_free(&b);
  /* an SD file's M  ISO line */
  static const char *iso_sd = "m\n  t\n\n  2  1  0  0  0  0  0  0  0  0999 V2000\n"
                              "    0.0000    0.0000    0.0000 C   0  0  0  0  0  0  0  0  0  0  0  0\n"
                              "    1.4300    0.0000    0.0000 O   0  0  0  0  0  0  0  0  0  0  0  0\n"
                              "  1  2  1  0  0  0  0\nM  ISO  2   1  13   2  18\nM  END\n$$$$\n";
  parse_ok(iso_sd, &so, &a);
  cr_assert_str_eq(a.smiles, "[13CH3][18OH]");
  char *sdf = ob_write_sdf(&a);
  cr_assert(strstr(sdf, "M  ISO  2   1  13   2  18"), "%s", sdf);
  free(sdf);
  /* the scaffold key: [13C]benzene is benzene's scaffold */
  parse_ok("[13cH]1ccccc1C\n", &o, &a);
  char *key = scaffold_key(&a);
  cr_assert_str_eq(key, "c1ccccc1");
  free(key);
  mol_free(&a);
}

Test(ob, write_sdf_keeps_name_and_tags) {
  char *text = sd_record(0);
  struct ob_parse_opts o = opts("sdf");
  struct mol m, back;
  parse_ok(text, &o, &m);
  mol_add_tag(&m, "score", "0.93");
  char *sdf = ob_write_sdf(&m);
  cr_assert_not_null(sdf);
  cr_assert(strncmp(sdf, "ethanol\n", 8) == 0, "%s", sdf);
  cr_assert(strstr(sdf, "$$$$"));
  parse_ok(sdf, &o, &back);
  cr_assert_str_eq(back.name, "ethanol");
  cr_assert_str_eq(mol_tag(&back, "CAS"), "64-17-5");
  cr_assert_str_eq(mol_tag(&back, "note"), "a drink\nand a fuel");
  cr_assert_str_eq(mol_tag(&back, "score"), "0.93");
  free(sdf);
  mol_free(&back);
  /* from the stored blob (no strings): atoms and bonds are enough */
  uint8_t *blob;
  size_t n;
  struct se3_error e;
  cr_assert_eq(mol_to_blob(&m, &blob, &n), 0);
  struct mol fb;
  cr_assert_eq(mol_from_blob(blob, n, &fb, &e), 0);
  sdf = ob_write_sdf(&fb);
  cr_assert_not_null(sdf);
  parse_ok(sdf, &o, &back);
  cr_assert_str_eq(back.smiles, "CCO");
  free(sdf);
  free(blob);
  mol_free(&back);
  mol_free(&fb);
  mol_free(&m);
  free(text);
}

Test(ob, write_sdf_refuses_bad_molecules) {
  struct mol m;
  mol_init(&m);
  m.n_atoms = 2;
  m.atoms = calloc(2, sizeof *m.atoms);
  m.atoms[0].z = m.atoms[1].z = 6;
  m.n_bonds = 1;
  m.bonds = calloc(1, sizeof *m.bonds);
  m.bonds[0].a = 0;
  m.bonds[0].b = 5;
  m.bonds[0].order = 1;
  cr_assert_null(ob_write_sdf(&m));
  cr_assert_null(ob_write_sdf(NULL));
  mol_free(&m);
}

/* ---- quiet ------------------------------------------------------------------ */

static void redirect(void) {
  cr_redirect_stderr();
  cr_redirect_stdout();
  setup();
}

Test(ob_quiet, nothing_printed, .init = redirect) {
  struct ob_parse_opts o = opts("smi");
  struct mol m;
  char why[256];
  static const char *bad[] = {"C1CC\n", "c1cccc1\n", "[X]\n", "C(C\n", "CC(C)(C)(C)(C)C\n"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    if (ob_parse(bad[i], strlen(bad[i]), &o, &m, why, sizeof why) == 0) mol_free(&m);
  o.gen3d = OB_GEN3D_ALWAYS;
  o.add_hydrogens = 1;
  parse_ok("C[C@H](N)C(=O)O\n", &o, &m);
  mol_free(&m);
  fflush(stdout);
  fflush(stderr);
  cr_assert_stderr_eq_str("");
  cr_assert_stdout_eq_str("");
}

/* ---- shared data ------------------------------------------------------------- */

Test(ob, qm9_mini_records) {
  if (!tu_have_shared()) cr_skip_test("no shared data");
  struct se3_error e;
  struct rec_reader *r = rec_open(tu_shared("data/qm9/qm9_mini.sdf"), MOL_FMT_UNKNOWN, NULL, &e);
  cr_assert_not_null(r, "%s", se3_error_str(&e).s);
  struct ob_parse_opts o = opts("sdf");
  struct rec rec;
  int ok = 0, rejected = 0;
  while (rec_next(r, &rec, &e) == 1) {
    struct mol m;
    char why[256];
    if (ob_parse(rec.text, rec.len, &o, &m, why, sizeof why) == 0) {
      cr_assert_eq(m.dim, 3);
      cr_assert_eq(strlen(m.inchikey), 27);
      ok++;
      mol_free(&m);
    } else {
      cr_assert_str_eq(why, "dummy atom: atom 9", "record %lld", (long long)rec.record_no);
      rejected++;
    }
  }
  rec_close(r);
  cr_assert_eq(ok, 20);
  cr_assert_eq(rejected, 1, "gdb_20_invalid has a shifted atom line");
}

/* ---- OpenMP thread count ---------------------------------------------------- */

/* ob_init used to call omp_set_num_threads(1) in whatever process reached it
 * first: in the main process (scaffold split, hits.sdf) that left training
 * after a scaffold split on one thread. Open Babel still runs on one thread,
 * but the caller's count is what it was. (No suite init: ob_init is called
 * here, in this test's own process, after the count is set.) */
Test(ob_threads, open_babel_leaves_the_callers_thread_count) {
  omp_set_num_threads(3);
  cr_assert_eq(ob_init(), 0);
  cr_assert_eq(omp_get_max_threads(), 3, "after ob_init: %d", omp_get_max_threads());
  struct ob_parse_opts o = opts("smi");
  o.gen3d = OB_GEN3D_ALWAYS; /* MMFF94, whose loops are OpenMP ones */
  o.add_hydrogens = 1;
  struct mol m;
  char why[256] = "";
  const char *smi = "c1ccccc1CC(=O)O phenylacetic\n";
  cr_assert_eq(ob_parse(smi, strlen(smi), &o, &m, why, sizeof why), 0, "%s", why);
  cr_assert_eq(omp_get_max_threads(), 3, "after ob_parse: %d", omp_get_max_threads());
  char *key = scaffold_key(&m); /* the scaffold split's way into Open Babel */
  cr_assert_str_eq(key, "c1ccccc1");
  cr_assert_eq(omp_get_max_threads(), 3, "after scaffold_key: %d", omp_get_max_threads());
  char *sdf = ob_write_sdf(&m); /* the rank stage's */
  cr_assert_not_null(sdf);
  cr_assert_eq(omp_get_max_threads(), 3, "after ob_write_sdf: %d", omp_get_max_threads());
  int inside = 0;
#pragma omp parallel
  {
#pragma omp single
    inside = omp_get_num_threads();
  }
  cr_assert_eq(inside, 3, "a parallel region after Open Babel ran on %d threads", inside);
  free(sdf);
  free(key);
  mol_free(&m);
}

/* ---- one molecule, one form, whatever the format -------------------------- */

/* The bundled FABP4 actives and decoys (DUD-E MOL2, 477 records): each
 * parsed from its MOL2 record and again from the SD record se3screen
 * writes of it (Kekulé bond orders, no aromatic flags on the way) gives the
 * same canonical SMILES. Before aromaticity was perceived afresh after
 * every read, thiophenes, pyrroles and pyrazoles read from MOL2 stayed
 * Kekulé (one FABP4 active: COC(=O)C1=C(...)C=C(S1)C1=CC=CS1), and 235 of
 * the 477 records came out as another molecule. */
Test(ob, mol2_and_sd_same_molecule) {
  const char *files[] = {"workflows/data/fabp4_actives_train.mol2.gz", "workflows/data/fabp4_actives_library.mol2.gz",
                         "workflows/data/fabp4_decoys_train.mol2.gz", "workflows/data/fabp4_decoys_library.mol2.gz"};
  struct ob_parse_opts mol2 = opts("mol2"), sdf = opts("sdf");
  int n = 0, same = 0;
  for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
    struct se3_error e;
    struct rec_reader *r = rec_open(tu_src(files[f]), MOL_FMT_UNKNOWN, NULL, &e);
    cr_assert_not_null(r, "%s", se3_error_str(&e).s);
    struct rec rec;
    while (rec_next(r, &rec, &e) == 1) {
      struct mol a, b;
      char why[512] = "";
      cr_assert_eq(ob_parse(rec.text, rec.len, &mol2, &a, why, sizeof why), 0, "%s record %lld: %s", files[f],
                   (long long)rec.record_no, why);
      char *sd = ob_write_sdf(&a);
      cr_assert_not_null(sd);
      cr_assert_eq(ob_parse(sd, strlen(sd), &sdf, &b, why, sizeof why), 0, "%s record %lld as SD: %s", files[f],
                   (long long)rec.record_no, why);
      n++;
      if (!strcmp(a.smiles, b.smiles))
        same++;
      else
        cr_log_warn("%s record %lld: %s from MOL2, %s from SD", files[f], (long long)rec.record_no, a.smiles, b.smiles);
      free(sd);
      mol_free(&a);
      mol_free(&b);
    }
    rec_close(r);
  }
  cr_log_info("FABP4: %d of %d records give the same canonical SMILES from MOL2 and from SD", same, n);
  cr_assert_eq(n, 477, "the bundled FABP4 files hold 57 actives and 420 decoys");
  cr_assert_eq(same, n, "%d of %d records are another molecule read from MOL2 than from SD", n - same, n);
}

/* The on-screen length in px of the longest line of a depiction (a bond
 * not shortened by an atom label): its length in the drawing's units, times
 * the scale the outer <svg> (width px, viewBox 0 0 100 100) and the inner
 * one (viewBox fitted into 100 x 100, aspect kept) give it. */
static double depict_bond_px(const char *svg, int *side) {
  const char *inner = strstr(svg + 1, "<svg");
  cr_assert(inner, "no inner <svg> in %.200s", svg);
  double ow = 0, w = 0, h = 0, x0, y0;
  cr_assert_eq(sscanf(strstr(svg, "width=\"") + 7, "%lf", &ow), 1);
  cr_assert_eq(sscanf(strstr(inner, "viewBox=\"") + 9, "%lf %lf %lf %lf", &x0, &y0, &w, &h), 4);
  double longest = 0;
  for (const char *l = strstr(inner, "<line "); l; l = strstr(l + 1, "<line ")) {
    double a, b, c, d;
    if (sscanf(l, "<line x1=\"%lf\" y1=\"%lf\" x2=\"%lf\" y2=\"%lf\"", &a, &b, &c, &d) == 4)
      longest = fmax(longest, hypot(c - a, d - b));
  }
  *side = (int)ow;
  return longest * fmin(100 / w, 100 / h) * ow / 100;
}

/* Issue 55: a large structure was drawn into the same 150 px as a small
 * one, its bonds a few pixels long. The square now grows with the
 * molecule: a bond is at least 25 px, while a small molecule keeps 150. */
Test(ob, depictions_keep_bonds_readable_at_any_size) {
  int side = 0;
  char *small = ob_depict_svg("c1ccccc1O", 150);
  cr_assert(small);
  double px = depict_bond_px(small, &side);
  cr_assert_eq(side, 150, "a small molecule's square grew to %d px", side);
  cr_assert_geq(px, 24.5, "phenol's bonds are %.1f px", px);
  free(small);
  const char *large = "CC(C)(C)c1ccc(cc1)C(=O)NCCc1ccc(cc1)S(=O)(=O)N1CCN(CC1)c1ccc(cc1)C(=O)Nc1ccc2ccccc2c1OCCCCCCCCCC";
  char *big = ob_depict_svg(large, 150);
  cr_assert(big);
  px = depict_bond_px(big, &side);
  cr_assert_gt(side, 150, "a 60-atom molecule drawn in %d px", side);
  cr_assert_geq(px, 24.5, "a 60-atom molecule's bonds are %.1f px in %d px", px, side);
  free(big);
}
