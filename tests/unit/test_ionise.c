/* test_ionise.c — one standard form (issue 54): protonation at a pH by
 * se3screen's table of ionisable groups (chem/ionise.cc) instead of Open
 * Babel's pH model, and the standardiser's rules (chem/standardize.cc).
 * Through ob_parse with real Open Babel; canonical SMILES compared as text,
 * the expected one canonicalised by Open Babel from a SMILES read with no
 * standardiser and the charges kept. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chem/ionise.h"
#include "chem/mol.h"
#include "chem/obbridge.h"
#include "chem/records.h"
#include "common/error.h"
#include "tests/testutil.h"

static void setup(void) { cr_assert_eq(ob_init(), 0, "ob_init"); }

static struct ob_parse_opts opts(const char *format) {
  struct ob_parse_opts o = {.format = format, .gen3d = OB_GEN3D_NEVER, .quality = OB_Q_FAST, .seed = 1,
                            .max_atoms = 999};
  return o;
}

static struct ob_parse_opts at_ph(double ph) {
  struct ob_parse_opts o = opts("smi");
  o.protonate = OB_PROT_PH;
  o.ph = ph;
  return o;
}

/* The canonical SMILES of a SMILES read with o (malloc'd); fails on a reject
 * (a radical among them). */
static char *smiles_of(const char *smi, const struct ob_parse_opts *o) {
  char text[512];
  snprintf(text, sizeof text, "%s\n", smi);
  struct mol m;
  struct mol_why why;
  int rc = ob_parse_why(text, strlen(text), o, &m, &why);
  cr_assert_eq(rc, 0, "'%s' rejected: %s: %s", smi, why.reason, why.detail);
  char *s = strdup(m.smiles);
  mol_free(&m);
  return s;
}

/* want as Open Babel writes it: read with nothing changed. */
static char *canon(const char *want) {
  struct ob_parse_opts raw = opts("smi");
  raw.standardize = OB_STD_NONE;
  raw.fragments = OB_FRAG_KEEP;
  return smiles_of(want, &raw);
}

static void expect(const char *smi, const struct ob_parse_opts *o, const char *want) {
  char *got = smiles_of(smi, o), *w = canon(want);
  cr_assert_str_eq(got, w, "'%s' at %s %g: got '%s', want '%s'", smi,
                   o->protonate == OB_PROT_PH ? "pH" : "mode", o->ph, got, w);
  free(got);
  free(w);
}

struct case_ {
  const char *what, *smi, *ph7, *ph2, *ph12;
};

/* Each group of the table at pH 7.4, 2 and 12. */
static const struct case_ CASES[] = {
    {"carboxylic acid", "CC(=O)O", "CC(=O)[O-]", "CC(=O)O", "CC(=O)[O-]"},
    {"primary amine", "CCN", "CC[NH3+]", "CC[NH3+]", "CCN"},
    {"N-methylpiperazine: +1 at 7.4 (one N of N-C-C-N), +2 at 2", "CN1CCNCC1", "CN1CC[NH2+]CC1",
     "C[NH+]1CC[NH2+]CC1", "CN1CCNCC1"},
    {"aryl N-methylpiperazine: the aryl N stays neutral", "CN1CCN(CC1)c1ccccc1", "C[NH+]1CCN(CC1)c1ccccc1",
     "C[NH+]1CCN(CC1)c1ccccc1", "CN1CCN(CC1)c1ccccc1"},
    {"ethylenediamine", "NCCN", "NCC[NH3+]", "[NH3+]CC[NH3+]", "NCCN"},
    {"1,3-diaminopropane: both, 4 bonds apart", "NCCCN", "[NH3+]CCC[NH3+]", "[NH3+]CCC[NH3+]", "NCCCN"},
    {"phenol", "Oc1ccccc1", "Oc1ccccc1", "Oc1ccccc1", "[O-]c1ccccc1"},
    {"pyridine", "c1ccncc1", "c1ccncc1", "c1cc[nH+]cc1", "c1ccncc1"},
    {"imidazole (pKa 7.0: neutral at 7.4)", "Cc1c[nH]cn1", "Cc1c[nH]cn1", "Cc1c[nH]c[nH+]1", "Cc1c[nH]cn1"},
    {"4-aminopyridine", "Nc1ccncc1", "Nc1cc[nH+]cc1", "Nc1cc[nH+]cc1", "Nc1ccncc1"},
    {"aniline", "Nc1ccccc1", "Nc1ccccc1", "[NH3+]c1ccccc1", "Nc1ccccc1"},
    {"guanidine (+1 even at 12)", "CCNC(=N)N", "CCNC(=[NH2+])N", "CCNC(=[NH2+])N", "CCNC(=[NH2+])N"},
    {"amidine", "CC(=N)N", "CC(=[NH2+])N", "CC(=[NH2+])N", "CC(=N)N"},
    {"tetrazole (2H)", "Cc1nn[nH]n1", "Cc1nn[n-]n1", "Cc1nn[nH]n1", "Cc1nn[n-]n1"},
    {"tetrazole (1H)", "Cc1nnn[nH]1", "Cc1nnn[n-]1", "Cc1nnn[nH]1", "Cc1nnn[n-]1"},
    {"phosphate monoester: -2 at 7.4", "COP(=O)(O)O", "COP(=O)([O-])[O-]", "COP(=O)(O)O", "COP(=O)([O-])[O-]"},
    {"sulfonic acid", "CS(=O)(=O)O", "CS(=O)(=O)[O-]", "CS(=O)(=O)[O-]", "CS(=O)(=O)[O-]"},
    {"acyl sulfonamide", "CC(=O)NS(=O)(=O)C", "CC(=O)[N-]S(=O)(=O)C", "CC(=O)NS(=O)(=O)C",
     "CC(=O)[N-]S(=O)(=O)C"},
    {"sulfonamide", "CS(N)(=O)=O", "CS(N)(=O)=O", "CS(N)(=O)=O", "CS([NH-])(=O)=O"},
    {"amide: never", "CC(=O)NC", "CC(=O)NC", "CC(=O)NC", "CC(=O)NC"},
    {"THF ring oxygen untouched", "C1CCOC1", "C1CCOC1", "C1CCOC1", "C1CCOC1"},
    {"morpholine: the N only", "C1COCCN1", "C1COCC[NH2+]1", "C1COCC[NH2+]1", "C1COCCN1"},
    {"anisole", "COc1ccccc1", "COc1ccccc1", "COc1ccccc1", "COc1ccccc1"},
    {"glycine: zwitterion at 7.4", "NCC(=O)O", "[NH3+]CC(=O)[O-]", "[NH3+]CC(=O)O", "NCC(=O)[O-]"},
    {"quaternary ammonium unchanged", "C[N+](C)(C)C", "C[N+](C)(C)C", "C[N+](C)(C)C", "C[N+](C)(C)C"},
    {"betaine", "C[N+](C)(C)CC(=O)[O-]", "C[N+](C)(C)CC(=O)[O-]", "C[N+](C)(C)CC(=O)O",
     "C[N+](C)(C)CC(=O)[O-]"},
    {"nitro stays charge-separated", "C[N+](=O)[O-]", "C[N+](=O)[O-]", "C[N+](=O)[O-]", "C[N+](=O)[O-]"},
    {"dimedone's enol (5.2)", "CC1(C)CC(=O)C=C(O)C1", "CC1(C)CC(=O)C=C([O-])C1", "CC1(C)CC(=O)C=C(O)C1",
     "CC1(C)CC(=O)C=C([O-])C1"},
    {"acetylacetone's open-chain enol (8.9)", "CC(O)=CC(C)=O", "CC(O)=CC(C)=O", "CC(O)=CC(C)=O",
     "CC([O-])=CC(C)=O"},
    {"trifluoroethylamine (5.7)", "NCC(F)(F)F", "NCC(F)(F)F", "[NH3+]CC(F)(F)F", "NCC(F)(F)F"},
};

Test(ionise, table_at_three_ph, .init = setup) {
  for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
    const struct case_ *c = &CASES[i];
    struct ob_parse_opts o7 = at_ph(7.4), o2 = at_ph(2.0), o12 = at_ph(12.0);
    expect(c->smi, &o7, c->ph7);
    expect(c->smi, &o2, c->ph2);
    expect(c->smi, &o12, c->ph12);
  }
}

/* The result depends on the molecule, not on the charges it came with: an
 * acid or its anion, an amine or its ammonium, a zwitterion or its neutral
 * form give one canonical SMILES at each pH. */
Test(ionise, input_charge_state_is_irrelevant, .init = setup) {
  static const char *const pairs[][2] = {
      {"CC(=O)[O-]", "CC(=O)O"},
      {"CC[NH3+]", "CCN"},
      {"[NH3+]CC(=O)[O-]", "NCC(=O)O"},
      {"C[NH+]1CC[NH2+]CC1", "CN1CCNCC1"},
      {"C[NH+]1CCNCC1", "CN1CC[NH2+]CC1"},
      {"c1cc[nH+]cc1", "c1ccncc1"},
      {"Cc1nn[n-]n1", "Cc1nn[nH]n1"},
      {"[O-]c1ccccc1", "Oc1ccccc1"},
      {"COP(=O)([O-])[O-]", "COP(=O)(O)O"},
      {"CCNC(=[NH2+])N", "CCNC(=N)N"},
      {"C[N+](C)(C)CC(=O)O", "C[N+](C)(C)CC(=O)[O-]"},
      {"Cc1c[nH]c[nH+]1", "Cc1c[nH]cn1"},
  };
  static const double phs[] = {2.0, 7.4, 12.0};
  for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
    for (size_t k = 0; k < 3; k++) {
      struct ob_parse_opts o = at_ph(phs[k]);
      char *a = smiles_of(pairs[i][0], &o), *b = smiles_of(pairs[i][1], &o);
      cr_assert_str_eq(a, b, "pH %g: '%s' gives '%s', '%s' gives '%s'", phs[k], pairs[i][0], a, pairs[i][1], b);
      free(a);
      free(b);
    }
}

/* neutral: +1/-1 charges a hydrogen undoes go; charge-separated groups and
 * quaternary ammonium stay, and a betaine stays a zwitterion. */
Test(ionise, neutral, .init = setup) {
  struct ob_parse_opts o = opts("smi");
  o.protonate = OB_PROT_NEUTRAL;
  expect("CC(=O)[O-]", &o, "CC(=O)O");
  expect("C[NH3+]", &o, "CN");
  expect("[NH3+]CC(=O)[O-]", &o, "NCC(=O)O");
  expect("c1cc[nH+]cc1", &o, "c1ccncc1");
  expect("C[N+](C)(C)C", &o, "C[N+](C)(C)C");
  expect("C[N+](=O)[O-]", &o, "C[N+](=O)[O-]");
  expect("C[N+](C)(C)CC(=O)[O-]", &o, "C[N+](C)(C)CC(=O)[O-]");
  expect("C[N+](C)(C)CC(=O)O", &o, "C[N+](C)(C)CC(=O)[O-]");
  expect("CCN=[N+]=[N-]", &o, "CCN=[N+]=[N-]");
}

/* No stereo stays on a nitrogen that carries a hydrogen: an ammonium's
 * proton trades in water. A quaternary stereocentre stays. */
Test(ionise, no_stereo_on_an_n_with_a_hydrogen, .init = setup) {
  struct ob_parse_opts o = at_ph(7.4);
  char *s = smiles_of("CC[N@@H+](C)CCC", &o);
  cr_assert_null(strchr(s, '@'), "%s", s);
  free(s);
  s = smiles_of("CC[N@@](C)CCC", &o);
  cr_assert_null(strchr(s, '@'), "%s", s);
  free(s);
  struct ob_parse_opts keep = opts("smi"); /* standardize: basic, protonate: keep */
  keep.standardize = OB_STD_NONE;           /* the input does carry it */
  s = smiles_of("CC[N@@H+](C)CCC", &keep);
  cr_assert_not_null(strchr(s, '@'), "%s", s);
  free(s);
  keep.standardize = OB_STD_BASIC;
  s = smiles_of("CC[N@@H+](C)CCC", &keep);
  cr_assert_null(strchr(s, '@'), "%s", s);
  free(s);
  s = smiles_of("C[C@H](N)CC", &o); /* a carbon centre is kept */
  cr_assert_not_null(strchr(s, '@'), "%s", s);
  free(s);
  s = smiles_of("CC[N@+](C)(CCC)CCCC", &keep);
  cr_assert_not_null(strchr(s, '@'), "a quaternary centre is no proton's: %s", s);
  free(s);
}

/* The standardiser: each group's variants read as one SMILES; with
 * standardize: none they stay apart. */
Test(ionise, standardiser_one_form, .init = setup) {
  static const char *const groups[][4] = {
      {"CN(=O)=O", "C[N+](=O)[O-]", "C[N+]([O-])=O", NULL},
      {"O=N(=O)c1ccccc1", "[O-][N+](=O)c1ccccc1", NULL, NULL},
      {"CN(C)(C)=O", "C[N+](C)(C)[O-]", NULL, NULL},
      {"CN=N#N", "C[N-][N+]#N", "CN=[N+]=[N-]", NULL},
      {"C=N#N", "[CH2-][N+]#N", "C=[N+]=[N-]", NULL},
      {"C[S+](C)[O-]", "CS(C)=O", NULL, NULL},
      {"C[S+2]([O-])([O-])C", "C[S+](=O)([O-])C", "CS(C)(=O)=O", NULL},
      {"C[P+](C)(C)[O-]", "CP(C)(C)=O", NULL, NULL},
      {"CC(=O)O[Na]", "CC(=O)[O-].[Na+]", "[Na+].CC(=O)[O-]", NULL},
  };
  struct ob_parse_opts o = opts("smi");
  for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++) {
    char *first = smiles_of(groups[i][0], &o);
    for (int k = 1; k < 4 && groups[i][k]; k++) {
      char *s = smiles_of(groups[i][k], &o);
      cr_assert_str_eq(s, first, "'%s' gives '%s', '%s' gives '%s'", groups[i][k], s, groups[i][0], first);
      free(s);
    }
    free(first);
  }
  /* each rule's own example */
  for (int i = 0; i < std_n_rules(); i++) expect(std_rule_at(i)->example_in, &o, std_rule_at(i)->example_out);
  /* none leaves the molecule as read */
  o.standardize = OB_STD_NONE;
  char *a = smiles_of("CN(=O)=O", &o), *b = smiles_of("C[N+](=O)[O-]", &o);
  cr_assert_str_neq(a, b, "standardize: none changed the nitro group");
  free(a);
  free(b);
  /* a metal salt at pH 7.4 is its organic ion, as the acid is */
  o = at_ph(7.4);
  a = smiles_of("CC(=O)O[Na]", &o);
  b = smiles_of("CC(=O)O", &o);
  cr_assert_str_eq(a, b);
  free(a);
  free(b);
}

/* Both tables are what Open Babel reads: a SMARTS it refused would never
 * match, silently. */
Test(ionise, tables_parse, .init = setup) {
  struct se3_error e;
  cr_assert_eq(ionise_check_tables(&e), 0, "%s", se3_error_str(&e).s);
  cr_assert_gt(ionise_n_groups(), 15);
  for (int i = 0; i < ionise_n_groups(); i++) {
    const struct ionise_group *g = ionise_group_at(i);
    cr_assert(g->lo <= g->pka && g->pka <= g->hi, "%s: pKa %g outside %g..%g", g->name, g->pka, g->lo, g->hi);
  }
  cr_assert_null(ionise_group_at(ionise_n_groups()));
}

/* docs/chemistry.md prints both tables: every row's name is there. */
Test(ionise, tables_are_documented) {
  size_t len = 0;
  char *doc = tu_read(tu_src("docs/chemistry.md"), &len);
  cr_assert_not_null(doc);
  for (int i = 0; i < ionise_n_groups(); i++)
    cr_assert_not_null(strstr(doc, ionise_group_at(i)->name), "docs/chemistry.md lacks the group '%s'",
                       ionise_group_at(i)->name);
  for (int i = 0; i < std_n_rules(); i++) {
    cr_assert_not_null(strstr(doc, std_rule_at(i)->name), "docs/chemistry.md lacks the rule '%s'",
                       std_rule_at(i)->name);
    cr_assert_not_null(strstr(doc, std_rule_at(i)->smarts), "docs/chemistry.md lacks %s", std_rule_at(i)->smarts);
  }
  free(doc);
}
