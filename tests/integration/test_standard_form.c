/* test_standard_form.c — one standard form through the se3screen binary
 * (issue 54): `protonate: 7.4` by se3screen's table of ionisable groups
 * makes no radical where Open Babel's pH model made four of these DUD-E
 * FABP4 decoys (ring and enol oxygens deprotonated: tests/data/chem/
 * fabp4_ph74_radicals.mol2), gives each molecule the charge its groups
 * have at 7.4 whatever charges it was given, and the standardiser is a key
 * of ingest's: changing it redoes the molecules. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/testutil.h"

static const char SMI[] = "CC(=O)O acid\n"
                          "CC(=O)O[Na] sodium_salt\n"
                          "CC[NH3+] ammonium\n"
                          "CCN amine\n"
                          "CN1CCNCC1 methylpiperazine\n"
                          "C1CCOC1 thf\n"
                          "C1COCCN1 morpholine\n"
                          "NCC(=O)O glycine\n"
                          "C[N+](C)(C)C quaternary\n"
                          "Oc1ccccc1 phenol\n"
                          "CN(=O)=O nitromethane\n";

Test(standard_form, ph74_by_the_table_through_ingest) {
  char *dir = tu_tmpdir("standard_form");
  char *smi = tu_write(dir, "lib.smi", SMI);
  char *yaml = NULL;
  cr_assert(asprintf(&yaml,
                     "workflow: t\nworkdir: work\nsets:\n  lib:\n    - {path: %s}\n    - {path: %s}\n"
                     "stages:\n  ingest: {workers: 1, gen3d: never, protonate: 7.4}\n",
                     smi, tu_src("tests/data/chem/fabp4_ph74_radicals.mol2")) > 0);
  char *wf = tu_write(dir, "wf.yaml", yaml);
  char *out = NULL;
  int rc = tu_se3(&out, "run %s --set run.progress=none", wf);
  cr_assert_eq(rc, 0, "%s", out);
  free(out);
  char db[1300];
  snprintf(db, sizeof db, "%s/work/screen.db", dir);
  char *got = tu_query(db, "SELECT count(*) FROM rejects");
  cr_assert_str_eq(got, "0\n", "rejects: %s", tu_query(db, "SELECT name, reason FROM rejects"));
  free(got);
  /* each molecule's net charge at 7.4 */
  got = tu_query(db, "SELECT name, charge FROM molecules ORDER BY " TU_IN_ORDER(""));
  cr_assert_str_eq(got,
                   "acid|-1\nsodium_salt|-1\nammonium|1\namine|1\nmethylpiperazine|1\nthf|0\nmorpholine|1\n"
                   "glycine|0\nquaternary|1\nphenol|0\nnitromethane|0\n"
                   "ZINC26389628|-1\nZINC00529521|0\nZINC36133391|-1\nZINC12489477|0\n",
                   "%s", got);
  free(got);
  /* the input's charge state does not matter: acid and salt, amine and
   * ammonium are one molecule each */
  got = tu_query(db, "SELECT count(DISTINCT smiles) FROM molecules WHERE name IN ('acid', 'sodium_salt')");
  cr_assert_str_eq(got, "1\n");
  free(got);
  got = tu_query(db, "SELECT count(DISTINCT smiles) FROM molecules WHERE name IN ('amine', 'ammonium')");
  cr_assert_str_eq(got, "1\n");
  free(got);
  got = tu_query(db, "SELECT smiles FROM molecules WHERE name IN ('glycine', 'nitromethane', 'methylpiperazine')"
                     " ORDER BY name");
  cr_assert_str_eq(got, "[O-]C(=O)C[NH3+]\nCN1CC[NH2+]CC1\n[O-][N+](=O)C\n", "%s", got);
  free(got);
  /* no stereo on an ammonium nitrogen */
  got = tu_query(db, "SELECT count(*) FROM molecules WHERE smiles LIKE '%[N@%'");
  cr_assert_str_eq(got, "0\n");
  free(got);

  /* standardize is a key of ingest's: none redoes the molecules, and the
   * nitro group comes out as written */
  rc = tu_se3(&out, "run %s --set run.progress=none --set stages.ingest.standardize=none", wf);
  cr_assert_eq(rc, 0, "%s", out);
  free(out);
  got = tu_query(db, "SELECT smiles FROM molecules WHERE name = 'nitromethane'");
  cr_assert_str_eq(got, "CN(=O)=O\n", "%s", got);
  free(got);
  /* and check shows the default */
  rc = tu_se3(&out, "check %s", wf);
  cr_assert_eq(rc, 0, "%s", out);
  cr_assert(strstr(out, "standardize: basic"), "%s", out);
  free(out);
  free(wf);
  free(yaml);
  free(smi);
  free(dir);
}
