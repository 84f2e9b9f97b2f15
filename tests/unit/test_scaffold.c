/* test_scaffold.c — Bemis–Murcko frameworks (chem/scaffold.h): side chains
 * and hydrogens stripped, rings and linkers kept, one key per framework
 * whatever the substituents, the empty key for acyclic molecules. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "chem/mol.h"
#include "chem/obbridge.h"
#include "chem/scaffold.h"

static void setup(void) { cr_assert_eq(ob_init(), 0, "ob_init"); }

static void parse(const char *smi, struct mol *m) {
  struct ob_parse_opts o = {.format = "smi", .add_hydrogens = 1, .gen3d = OB_GEN3D_NEVER, .seed = 1,
                            .max_atoms = 999};
  char why[512] = "";
  cr_assert_eq(ob_parse(smi, strlen(smi), &o, m, why, sizeof why), 0, "'%s': %s", smi, why);
}

static char *key_of(const char *smi) {
  struct mol m;
  parse(smi, &m);
  char *k = scaffold_key(&m);
  cr_assert_not_null(k, "no key for %s", smi);
  mol_free(&m);
  return k;
}

static int framework_atoms(const char *smi) {
  struct mol m;
  parse(smi, &m);
  uint8_t *keep = malloc((size_t)m.n_atoms);
  int n = scaffold_atoms(&m, keep);
  free(keep);
  mol_free(&m);
  return n;
}

Test(scaffold, keeps_rings_and_linkers, .init = setup) {
  cr_assert_eq(framework_atoms("Cc1ccccc1"), 6);          /* toluene: the ring */
  cr_assert_eq(framework_atoms("CCO"), 0);                /* acyclic: nothing */
  cr_assert_eq(framework_atoms("c1ccccc1CCc1ccccc1"), 14); /* two rings and the C-C linker */
  cr_assert_eq(framework_atoms("CC(C)(C)c1ccc(cc1)OC1CC1"), 10); /* ring, O linker, cyclopropyl */
  cr_assert_eq(framework_atoms("O=C1CCCCC1"), 7);         /* an exocyclic =O stays, as in RDKit's scaffolds */
  cr_assert_eq(framework_atoms("CC(=O)c1ccccc1"), 6);     /* a side chain's C=O goes with its chain */
  cr_assert_eq(framework_atoms("C=C1CCCC1C"), 6);         /* =CH2 stays, the methyl goes */
  cr_assert_eq(framework_atoms("c1ccccc1C(=O)Nc1ccccc1"), 15); /* an amide linker keeps its O */
}

Test(scaffold, one_key_per_framework, .init = setup) {
  char *benzene = key_of("c1ccccc1"), *toluene = key_of("Cc1ccccc1"), *phenol = key_of("Oc1ccccc1"),
       *xylene = key_of("Cc1ccc(C)cc1");
  cr_assert_str_eq(toluene, benzene);
  cr_assert_str_eq(phenol, benzene);
  cr_assert_str_eq(xylene, benzene);
  cr_assert_str_eq(benzene, "c1ccccc1");
  char *pyridine = key_of("Cc1ccncc1");
  cr_assert_str_neq(pyridine, benzene);
  /* linkers are part of the framework; substituents on either ring are not */
  char *dpm = key_of("c1ccccc1Cc1ccccc1"), *dpm2 = key_of("Cc1ccc(cc1)Cc1ccccc1O"), *dpe = key_of("c1ccccc1CCc1ccccc1");
  cr_assert_str_eq(dpm, dpm2);
  cr_assert_str_neq(dpm, dpe);
  cr_assert_str_neq(dpm, benzene);
  /* atom order does not matter */
  char *a = key_of("c1ccc2ccccc2c1CC(=O)O"), *b = key_of("OC(=O)Cc1cccc2ccccc12");
  cr_assert_str_eq(a, b);
  char *none1 = key_of("CCO"), *none2 = key_of("CC(=O)NC");
  cr_assert_str_eq(none1, "");
  cr_assert_str_eq(none2, "");
  char *hexanone = key_of("O=C1CCCCC1"), *hexane = key_of("C1CCCCC1");
  cr_assert_str_neq(hexanone, hexane);
  free(benzene), free(toluene), free(phenol), free(xylene), free(pyridine), free(dpm), free(dpm2), free(dpe);
  free(a), free(b), free(none1), free(none2), free(hexanone), free(hexane);
}

/* A 2-pyridone (an ESOL molecule): its ring C=O stays, so the framework is a
 * molecule Open Babel can write. Stripped, the ring was aromatic with a
 * [cH2] no Kekulé structure fits, and its key came out as
 * [nH]1[cH]c([cH2]c(c1)...) in one process and [nH]1cc([cH2]c([cH]1)...)
 * in another: a scaffold split that moved two molecules between validation
 * and test from one run to the next. The key is now a valid SMILES whose
 * own key is itself, whatever was keyed before it. */
Test(scaffold, a_ring_carbonyl_gives_a_valid_key_whatever_came_before, .init = setup) {
  static const char pyridone[] = "Cn1cc(c2cccc(c2)C(F)(F)F)c(=O)c(c1)c1ccccc1";
  char *first = key_of(pyridone);
  cr_assert(strstr(first, "=O") || strstr(first, "O="), "the ring C=O is in the key: %s", first);
  cr_assert_null(strstr(first, "H2]"), "no aromatic CH2: %s", first);
  static const char *const others[] = {"O=c1cc[nH]cc1", "O=C1C=CC(=O)C=C1", "c1ccc2c(c1)ccc(=O)o2",
                                       "Cc1ccc(=O)[nH]c1", "O=c1[nH]c(=O)c2[nH]cnc2[nH]1"};
  for (size_t i = 0; i < sizeof others / sizeof *others; i++)
    free(key_of(others[i]));
  char *again = key_of(pyridone), *of_key = key_of(first);
  cr_assert_str_eq(again, first);
  cr_assert_str_eq(of_key, first, "the key of the key");
  free(first), free(again), free(of_key);
}
