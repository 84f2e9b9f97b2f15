/* test_records_header.c — headers and names (issue 31): a SMILES file's
 * header line is no record and record 1 is the first molecule; CSV/TSV
 * name and SMILES columns found under the names chemists give them
 * (nci_id, Compound, Structure, canonical_smiles), name_column and
 * smiles_column still overriding; files without a header read as before. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chem/records.h"
#include "common/error.h"
#include "tests/testutil.h"

struct row {
  int64_t no, line;
  char text[256], name[64];
  int error, named;
};

/* Every record of path (at most max) into rows; returns how many. */
static int read_rows(const char *path, const struct rec_options *opt, struct row *rows, int max) {
  struct se3_error e = {0};
  struct rec_reader *r = rec_open(path, MOL_FMT_UNKNOWN, opt, &e);
  cr_assert_not_null(r, "rec_open(%s): %s", path, se3_error_str(&e).s);
  struct rec rec;
  int n = 0, k;
  while ((k = rec_next(r, &rec, &e)) == 1) {
    cr_assert_lt(n, max, "more records than expected in %s", path);
    rows[n].no = rec.record_no;
    rows[n].line = rec.line;
    snprintf(rows[n].text, sizeof rows[n].text, "%s", rec.text);
    rows[n].named = rec.name != NULL;
    snprintf(rows[n].name, sizeof rows[n].name, "%s", rec.name ? rec.name : "");
    rows[n].error = rec.error != NULL;
    n++;
  }
  cr_assert_eq(k, 0, "%s: %s", path, se3_error_str(&e).s);
  rec_close(r);
  return n;
}

static char *write_in(const char *test, const char *name, const char *text) {
  char *dir = tu_tmpdir(test);
  cr_assert_not_null(dir);
  char *p = tu_write(dir, name, text);
  cr_assert_not_null(p);
  free(dir);
  return p;
}

Test(records_header, smi_structure_compound_header_is_no_record) {
  struct row rows[8];
  int n = read_rows(tu_src("tests/data/check/structure_compound.smi"), NULL, rows, 8);
  cr_assert_eq(n, 3, "3 molecules, the header no record (got %d; the first: '%s')", n, rows[0].text);
  cr_assert_eq(rows[0].no, 1, "record 1 is the first molecule");
  cr_assert_eq(rows[0].line, 2);
  cr_assert_str_eq(rows[0].text, "CCO\tethanol\n");
  cr_assert_eq(rows[0].error, 0);
  cr_assert_eq(rows[2].no, 3);
  cr_assert_str_eq(rows[2].text, "CC(=O)O\n");
}

Test(records_header, smi_header_after_comments_and_by_its_shape) {
  /* not a known column name, but a word that is no SMILES over SMILES rows */
  char *p = write_in("rech_shape", "a.smi",
                     "# exported by a vendor\n" /* 1 */
                     "\n"                       /* 2 */
                     "Smile\tLabel\n"           /* 3: the header */
                     "CCO\tethanol\n"           /* 4 */
                     "[NH4+]\tammonium\n"       /* 5 */
                     "C1CC1 cyclopropane\n");   /* 6 */
  struct row rows[8];
  int n = read_rows(p, NULL, rows, 8);
  cr_assert_eq(n, 3, "got %d records, the first '%s'", n, rows[0].text);
  cr_assert_eq(rows[0].no, 1);
  cr_assert_eq(rows[0].line, 4);
  cr_assert_str_eq(rows[1].text, "[NH4+]\tammonium\n");
  free(p);
  /* "smiles name" in lower case, gzip'd or not: the same */
  p = write_in("rech_lower", "b.smi", "smiles name\nCCO ethanol\n");
  n = read_rows(p, NULL, rows, 8);
  cr_assert_eq(n, 1);
  cr_assert_str_eq(rows[0].text, "CCO ethanol\n");
  cr_assert_eq(rows[0].no, 1);
  free(p);
}

Test(records_header, smi_without_header_reads_as_before) {
  /* a first line that is no SMILES but no header either (the rows after it
   * are no SMILES, or it has digits like a damaged SMILES): a record, which
   * Open Babel then rejects, never dropped without a word */
  const char *files[] = {"CCO ethanol\nc1ccccc1 benzene\n", "Hello world\nthis is text\n", "c1ccXc1 bad\nCCO ok\n",
                         "garbage\n"};
  const int want[] = {2, 2, 2, 1};
  for (int f = 0; f < 4; f++) {
    char *p = write_in("rech_none", "c.smi", files[f]);
    struct row rows[8];
    int n = read_rows(p, NULL, rows, 8);
    cr_assert_eq(n, want[f], "file %d: %d records", f, n);
    cr_assert_eq(rows[0].line, 1, "file %d: its first line is record 1", f);
    free(p);
  }
}

Test(records_header, csv_name_columns_chemists_use) {
  struct row rows[8];
  int n = read_rows(tu_src("tests/data/check/nci_lib.csv"), NULL, rows, 8);
  cr_assert_eq(n, 3);
  cr_assert_str_eq(rows[0].name, "NSC 85228", "nci_id is a name column");
  cr_assert_str_eq(rows[0].text, "CCO NSC 85228\n");
  cr_assert_str_eq(rows[2].name, "", "an empty cell: no name");
  n = read_rows(tu_src("tests/data/check/compound_lib.csv"), NULL, rows, 8);
  cr_assert_eq(n, 2);
  cr_assert_str_eq(rows[0].name, "aspirin", "Compound is a name column");
  cr_assert_str_eq(rows[1].text, "Oc1ccccc1 phenol\n");
}

Test(records_header, csv_name_priority_and_overrides) {
  /* id before Compound before any *_id; the SMILES column is never the name */
  char *p = write_in("rech_prio", "a.csv", "zinc_id,Compound,ID,SMILES\nZ1,c1,i1,CCO\n");
  struct row rows[4];
  read_rows(p, NULL, rows, 4);
  cr_assert_str_eq(rows[0].name, "i1");
  struct rec_options o = {.name_column = "zinc_id"};
  read_rows(p, &o, rows, 4);
  cr_assert_str_eq(rows[0].name, "Z1", "name_column overrides");
  free(p);
  p = write_in("rech_prio2", "a.csv", "smiles,batch_id,vendor_name\nCCO,b1,v1\n");
  read_rows(p, NULL, rows, 4);
  cr_assert_str_eq(rows[0].name, "b1", "*_id before *_name");
  free(p);
}

Test(records_header, csv_smiles_column_default_names) {
  const char *heads[] = {"Structure,name\n", "canonical_smiles,name\n", "Isomeric_SMILES,name\n"};
  for (int k = 0; k < 3; k++) {
    char text[128];
    snprintf(text, sizeof text, "%sCCO,eth\n", heads[k]);
    char *p = write_in("rech_smicol", "a.csv", text);
    struct row rows[4];
    int n = read_rows(p, NULL, rows, 4);
    cr_assert_eq(n, 1);
    cr_assert_str_eq(rows[0].text, "CCO eth\n", "header %s", heads[k]);
    free(p);
  }
  /* smiles beats structure wherever it stands; smiles_column overrides both */
  char *p = write_in("rech_smicol2", "a.csv", "structure,smiles\nCC,CCO\n");
  struct row rows[4];
  read_rows(p, NULL, rows, 4);
  cr_assert_str_eq(rows[0].text, "CCO\n");
  struct rec_options o = {.smiles_column = "Structure"};
  read_rows(p, &o, rows, 4);
  cr_assert_str_eq(rows[0].text, "CC\n");
  free(p);
}
