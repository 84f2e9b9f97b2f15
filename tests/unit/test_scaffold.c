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
  cr_assert_eq(framework_atoms("O=C1CCCCC1"), 6);         /* the exocyclic O is a side chain */
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
  cr_assert_str_eq(hexanone, hexane);
  free(benzene), free(toluene), free(phenol), free(xylene), free(pyridine), free(dpm), free(dpm2), free(dpe);
  free(a), free(b), free(none1), free(none2), free(hexanone), free(hexane);
}
