/* test_chemistry.c — sound chemistry on the way in (issue 32): MOL2 records
 * get the formal charges their Tripos types imply, never radicals; charged
 * molecules keep their charges; and each new check has a molecule that
 * triggers it: radicals, several fragments (the largest kept, or the record
 * rejected, or all kept), protonation (kept, neutralised, at a pH).
 * Canonical SMILES are Open Babel's (ob_parse's), compared as text. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chem/mol.h"
#include "chem/obbridge.h"
#include "chem/records.h"
#include "common/error.h"
#include "tests/testutil.h"

static void setup(void) { cr_assert_eq(ob_init(), 0, "ob_init"); }

static struct ob_parse_opts opts(const char *format) {
  struct ob_parse_opts o = {.format = format, .gen3d = OB_GEN3D_NEVER, .quality = OB_Q_MEDIUM, .seed = 1,
                            .max_atoms = 999};
  return o;
}

/* The canonical SMILES of text read with o (malloc'd); fails the test on a reject. */
static char *smiles_of(const char *text, const struct ob_parse_opts *o) {
  struct mol m;
  struct mol_why why;
  int rc = ob_parse_why(text, strlen(text), o, &m, &why);
  cr_assert_eq(rc, 0, "'%s' rejected: %s: %s", text, why.reason, why.detail);
  char *s = strdup(m.smiles);
  mol_free(&m);
  return s;
}

/* text read with o gives the molecule want (a SMILES, canonicalised by Open
 * Babel with every check off, so that the test does not depend on Open
 * Babel's choice of atom order). */
static void expect_smiles(const char *text, const struct ob_parse_opts *o, const char *want) {
  char *got = smiles_of(text, o);
  struct ob_parse_opts raw = opts("smi");
  raw.allow_radicals = 1;
  raw.fragments = OB_FRAG_KEEP;
  char wtext[256];
  snprintf(wtext, sizeof wtext, "%s\n", want);
  char *canon = smiles_of(wtext, &raw);
  cr_assert_str_eq(got, canon, "'%s': got '%s', want '%s' (%s)", text, got, canon, want);
  free(got);
  free(canon);
}

static void expect_reject(const char *text, const struct ob_parse_opts *o, const char *reason, int atom) {
  struct mol m;
  struct mol_why why;
  cr_assert_eq(ob_parse_why(text, strlen(text), o, &m, &why), 1, "'%s' accepted", text);
  cr_assert_str_eq(why.reason, reason, "'%s' (detail '%s')", text, why.detail);
  cr_assert_eq(why.atom, atom, "'%s': atom", text);
  cr_assert_null(m.atoms);
}

/* Every record of a MOL2 file (gzip'd or not) parses; returns how many, and
 * counts the records with a negative or positive formal charge on an atom. */
static int parse_all_mol2(const char *path, int *n_anion, int *n_cation) {
  struct se3_error e;
  struct rec_reader *r = rec_open(path, MOL_FMT_UNKNOWN, NULL, &e);
  cr_assert_not_null(r, "%s", se3_error_str(&e).s);
  struct ob_parse_opts o = opts("mol2");
  o.add_hydrogens = 1;
  struct rec rec;
  int n = 0;
  *n_anion = *n_cation = 0;
  while (rec_next(r, &rec, &e) == 1) {
    struct mol m;
    struct mol_why why;
    int rc = ob_parse_why(rec.text, rec.len, &o, &m, &why);
    cr_assert_eq(rc, 0, "%s record %lld: %s (atom %d): %s", path, (long long)rec.record_no, why.reason, why.atom,
                 why.detail);
    cr_assert_null(strstr(m.smiles, "[O]"), "%s record %lld: %s", path, (long long)rec.record_no, m.smiles);
    int neg = 0, pos = 0;
    for (int i = 0; i < m.n_atoms; i++)
      neg |= m.atoms[i].charge < 0, pos |= m.atoms[i].charge > 0;
    *n_anion += neg;
    *n_cation += pos;
    mol_free(&m);
    n++;
  }
  rec_close(r);
  return n;
}

TestSuite(chem, .init = setup);

/* DUD-E types carboxylate oxygens O.co2 and writes no formal charges: the
 * bundled FABP4 records (56 of 57 actives are carboxylic acids) all come in
 * without a radical, with their anions. */
Test(chem, bundled_fabp4_mol2_has_no_radicals) {
  static const char *const files[] = {"workflows/data/fabp4_actives_train.mol2.gz",
                                      "workflows/data/fabp4_actives_library.mol2.gz",
                                      "workflows/data/fabp4_decoys_train.mol2.gz",
                                      "workflows/data/fabp4_decoys_library.mol2.gz"};
  int want[] = {40, 17, 300, 120}, anions = 0;
  for (int f = 0; f < 4; f++) {
    int neg, pos;
    cr_assert_eq(parse_all_mol2(tu_src(files[f]), &neg, &pos), want[f], "%s", files[f]);
    anions += f < 2 ? neg : 0;
  }
  cr_assert_eq(anions, 57, "every active but one is a carboxylate or sulfonate anion: %d", anions);
}

/* The full DUD-E FABP4 set: 57 actives and 2,855 decoys, 0 radicals (before
 * the charges came from the types, 724 decoys and most actives had one). */
Test(chem, full_dude_fabp4_has_no_radicals, .timeout = 600) {
  if (!tu_have_shared()) cr_skip_test("no shared data");
  int neg, pos;
  cr_assert_eq(parse_all_mol2(tu_shared("data/screening/dude_fabp4/actives_final.mol2.gz"), &neg, &pos), 57);
  cr_assert_eq(parse_all_mol2(tu_shared("data/screening/dude_fabp4/decoys_final.mol2.gz"), &neg, &pos), 2855);
  cr_assert_gt(neg, 700, "deprotonated decoys (carboxylates, sulfonamides, thiolates): %d", neg);
}

/* A MOL2 acetate and methylammonium as DUD-E writes them: types, partial
 * charges, no formal charges, the carboxylate's bonds typed "ar". */
static const char ACETATE_MOL2[] = "@<TRIPOS>MOLECULE\n"
                                   "acetate\n"
                                   " 4 3 0 0 0\n"
                                   "SMALL\n"
                                   "USER_CHARGES\n"
                                   "\n"
                                   "@<TRIPOS>ATOM\n"
                                   "      1 C1    0.0000    0.0000    0.0000 C.3     1 LIG  -0.20\n"
                                   "      2 C2    1.5200    0.0000    0.0000 C.2     1 LIG   0.30\n"
                                   "      3 O1    2.1500    1.0800    0.0000 O.co2   1 LIG  -0.55\n"
                                   "      4 O2    2.1500   -1.0800    0.0000 O.co2   1 LIG  -0.55\n"
                                   "@<TRIPOS>BOND\n"
                                   "     1 1 2 1\n"
                                   "     2 2 3 ar\n"
                                   "     3 2 4 ar\n";

static const char AMMONIUM_MOL2[] = "@<TRIPOS>MOLECULE\n"
                                    "methylammonium\n"
                                    " 2 1 0 0 0\n"
                                    "SMALL\n"
                                    "USER_CHARGES\n"
                                    "\n"
                                    "@<TRIPOS>ATOM\n"
                                    "      1 C1    0.0000    0.0000    0.0000 C.3     1 LIG   0.10\n"
                                    "      2 N1    1.4700    0.0000    0.0000 N.4     1 LIG   0.90\n"
                                    "@<TRIPOS>BOND\n"
                                    "     1 1 2 1\n";

Test(chem, mol2_types_give_formal_charges) {
  struct ob_parse_opts o = opts("mol2");
  expect_smiles(ACETATE_MOL2, &o, "CC(=O)[O-]");
  expect_smiles(AMMONIUM_MOL2, &o, "C[NH3+]");
  o.allow_radicals = 1; /* the charges come from the types, not from allowing radicals */
  expect_smiles(ACETATE_MOL2, &o, "CC(=O)[O-]");
  /* without partial charges the types alone still decide */
  char *plain = strdup(ACETATE_MOL2);
  for (char *q; (q = strstr(plain, " LIG  -0.")) || (q = strstr(plain, " LIG   0."));)
    memset(q, ' ', 10);
  o.allow_radicals = 0;
  expect_smiles(plain, &o, "CC(=O)[O-]");
  free(plain);
}

/* Charged molecules keep their formal charges (protonate: keep). */
Test(chem, charges_are_kept) {
  struct ob_parse_opts o = opts("smi");
  static const char *const same[] = {"C[N+](C)(C)C", "CC(=O)[O-]", "[O-][N+](=O)c1ccccc1", "c1cc[nH+]cc1",
                                     "[NH3+]CC(=O)[O-]", "[O-]S(=O)(=O)c1ccccc1", "C[S+](C)C"};
  for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
    char text[128];
    snprintf(text, sizeof text, "%s\n", same[i]);
    char *a = smiles_of(text, &o);
    struct ob_parse_opts raw = o;
    raw.allow_radicals = 1;
    raw.fragments = OB_FRAG_KEEP;
    char *b = smiles_of(text, &raw);
    cr_assert_str_eq(a, b, "'%s': the checks changed the molecule", same[i]);
    int charged = strchr(a, '+') || strchr(a, '-');
    cr_assert(charged, "'%s' lost its charges: %s", same[i], a);
    free(a);
    free(b);
  }
}

Test(chem, radicals_are_rejected_unless_allowed) {
  struct ob_parse_opts o = opts("smi");
  expect_reject("C[CH2]\n", &o, "radical", 2);
  expect_reject("CC(=O)[O] acyloxyl\n", &o, "radical", 4);
  expect_reject("C[N]C aminyl\n", &o, "radical", 2);
  expect_reject("[CH2] carbene\n", &o, "radical", 1);
  expect_reject("C[S] thiyl\n", &o, "radical", 2);
  o.allow_radicals = 1;
  expect_smiles("C[CH2]\n", &o, "C[CH2]");
  /* closed shells pass: hypervalent S and P, ions, a nitro group, CO */
  o.allow_radicals = 0;
  static const char *const fine[] = {"CS(=O)(=O)C", "OP(=O)(O)O", "[C-]#[O+]", "C[N+](=O)[O-]", "[Cl-]",
                                     "CS(C)=O", "FS(F)(F)(F)(F)F", "c1ccoc1", "c1cc[nH]c1", "B(O)(O)c1ccccc1"};
  for (size_t i = 0; i < sizeof fine / sizeof fine[0]; i++) {
    char text[128];
    snprintf(text, sizeof text, "%s\n", fine[i]);
    free(smiles_of(text, &o));
  }
}

Test(chem, fragments_largest_reject_keep) {
  struct ob_parse_opts o = opts("smi");
  cr_assert_eq(o.fragments, OB_FRAG_LARGEST, "the default keeps the largest organic fragment");
  expect_smiles("CC(=O)[O-].[Na+] sodium acetate\n", &o, "CC(=O)[O-]");
  expect_smiles("Cl.CCN(CC)CC triethylamine HCl\n", &o, "CCN(CC)CC");
  expect_smiles("O.O.c1ccccc1C(=O)O hydrate\n", &o, "OC(=O)c1ccccc1");
  /* organic beats larger inorganic: the carbon-bearing fragment is kept */
  expect_smiles("OS(=O)(=O)O.CN sulfate\n", &o, "CN");
  /* a lone hydrogen atom is no fragment to drop: the record is broken, and
   * mol_check says so (hydrogen without a bond) */
  struct mol m;
  cr_assert_eq(ob_parse("[H].CO\n", 6, &o, &m, NULL, 0), 0);
  cr_assert_eq(m.n_atoms, 3, "the lone H kept for mol_check");
  struct mol_check_opts co = {.reject_lone_hydrogen = 1};
  struct mol_why why;
  cr_assert_eq(mol_check_why(&m, &co, &why), 1);
  cr_assert_str_eq(why.reason, "hydrogen without a bond");
  mol_free(&m);
  o.fragments = OB_FRAG_REJECT;
  expect_reject("CC(=O)[O-].[Na+]\n", &o, "several fragments", 0);
  expect_smiles("CC(=O)[O-]\n", &o, "CC(=O)[O-]");
  o.fragments = OB_FRAG_KEEP;
  expect_smiles("CC(=O)[O-].[Na+]\n", &o, "CC(=O)[O-].[Na+]");
}

Test(chem, protonate_keep_neutral_ph) {
  struct ob_parse_opts o = opts("smi");
  expect_smiles("CC(=O)[O-]\n", &o, "CC(=O)[O-]");
  expect_smiles("CC(=O)O\n", &o, "CC(=O)O");
  o.protonate = OB_PROT_NEUTRAL;
  expect_smiles("CC(=O)[O-]\n", &o, "CC(=O)O");
  expect_smiles("C[NH3+]\n", &o, "CN");
  expect_smiles("C[N+](C)(C)C\n", &o, "C[N+](C)(C)C"); /* no hydrogen undoes a quaternary ammonium */
  o.protonate = OB_PROT_PH;
  o.ph = 7.4;
  expect_smiles("CC(=O)O\n", &o, "CC(=O)[O-]");
  expect_smiles("CCN\n", &o, "CC[NH3+]");
  o.ph = 1.0;
  expect_smiles("CC(=O)O\n", &o, "CC(=O)O");
}
