/* test_ingest_names.c — every molecule has a name (issue 31): the CSV name
 * column under the names chemists give it (nci_id, Compound), the SD title,
 * else a stable generated one, STEM:RECORD (the file name without folder
 * and extensions, the record number); a SMILES file's header line
 * (Structure<TAB>Compound) is no reject and record 1 is its first molecule;
 * a generated name never joins a labels_csv row. Through the se3screen
 * binary, ingest only, a few molecules. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/testutil.h"

Test(ingest_names, headers_name_columns_titles_and_generated_names) {
  char *dir = tu_tmpdir("ingest_names");
  cr_assert_eq(tu_sh(NULL, "cp %s %s %s %s/ && gzip -c %s > %s/tagged.sdf.gz",
                     tu_src("tests/data/check/structure_compound.smi"), tu_src("tests/data/check/nci_lib.csv"),
                     tu_src("tests/data/check/compound_lib.csv"), dir, tu_src("tests/data/check/tagged.sdf"), dir),
               0);
  /* a label row keyed by the name record 2 of tagged.sdf.gz would be given:
   * it has no title, so it has no name to join by, and gets no label */
  free(tu_write(dir, "side.csv", "mol_id,gap\nmethane,0.5\ntagged:2,0.7\n"));
  char *wf = tu_write(dir, "wf.yaml",
                      "workflow: t\nworkdir: work\nrun: {progress: none}\n"
                      "sets:\n"
                      "  a:\n    - {path: structure_compound.smi}\n"
                      "  b:\n    - {path: nci_lib.csv}\n"
                      "  c:\n    - {path: compound_lib.csv}\n"
                      "  d:\n    - {path: tagged.sdf.gz, labels_csv: {path: side.csv, join: mol_id}}\n"
                      "stages:\n  ingest: {gen3d_quality: fast, workers: 1}\n");
  char *out = NULL;
  int rc = tu_se3(&out, "run %s", wf);
  cr_assert_eq(rc, 0, "%s", out);
  char db[1100];
  snprintf(db, sizeof db, "%s/work/screen.db", dir);
  char *mols = tu_query(db, "SELECT set_name, record_no, name FROM molecules ORDER BY " TU_IN_ORDER(""));
  cr_assert_str_eq(mols, "a|1|ethanol\n"
                         "a|2|benzene\n"
                         "a|3|structure_compound:3\n"
                         "b|1|NSC 85228\n"
                         "b|2|NSC 67315\n"
                         "b|3|nci_lib:3\n"
                         "c|1|aspirin\n"
                         "c|2|phenol\n"
                         "d|1|methane\n"
                         "d|2|tagged:2\n");
  char *rej = tu_query(db, "SELECT set_name, record_no, reason FROM rejects");
  cr_assert_str_eq(rej, "", "no rejects; the header line is none");
  char *labels = tu_query(db, "SELECT m.name, l.name, l.value FROM labels l JOIN molecules m ON m.id = l.mol_id");
  cr_assert_str_eq(labels, "methane|gap|0.5\n");
  free(labels);
  free(rej);
  free(mols);
  free(out);
  free(wf);
  free(dir);
}
