/* What ingest makes of the values inside records, through the se3screen
 * binary: a NUL byte inside a record rejects that record (it used to cut the
 * text short: `CC\0O` was stored as ethane); isotopes ([13CH4], [2H]O[2H],
 * an SDF's M  ISO line) are kept in the stored molecule and written back by
 * `export --format sdf`, read back by Open Babel; labels are read as decimal
 * numbers only (0x10 was read as 16), the rest rejected with the file, line
 * and column named. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chem/mol.h"
#include "chem/obbridge.h"
#include "common/error.h"
#include "tests/testutil.h"

static int run_wf(const char *dir, const char *yaml, char **out) {
  char *wf = tu_write(dir, "wf.yaml", yaml);
  cr_assert(wf);
  int rc = tu_se3(out, "run %s --set run.progress=none", wf);
  free(wf);
  return rc;
}

static char *db_of(const char *dir) {
  char *p = NULL;
  cr_assert(asprintf(&p, "%s/work/screen.db", dir) > 0);
  return p;
}

/* ---- NUL bytes ------------------------------------------------------------------ */

Test(ingest_values, nul_byte_rejects_its_record) {
  char *dir = tu_tmpdir("values_nul");
  char *path = NULL;
  cr_assert(asprintf(&path, "%s/nul.smi", dir) > 0);
  static const char smi[] = "CC\0O cut\nCCO good\n";
  FILE *f = fopen(path, "wb");
  cr_assert(f && fwrite(smi, 1, sizeof smi - 1, f) == sizeof smi - 1 && fclose(f) == 0);
  char yaml[1024];
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: work\nsets:\n  train:\n    - {path: %s}\n"
           "stages:\n  ingest: {workers: 1, gen3d_quality: fast}\n",
           path);
  char *out = NULL;
  int rc = run_wf(dir, yaml, &out);
  cr_assert_eq(rc, 0, "run failed (%d): %s", rc, out);
  char *db = db_of(dir);
  char *got = tu_query(db, "SELECT smiles FROM molecules ORDER BY " TU_IN_ORDER(""));
  cr_assert_str_eq(got, "CCO\n", "the molecules stored (a NUL byte cut 'CC\\0O' to ethane):\n%s", got);
  free(got);
  got = tu_query(db, "SELECT record_no, line, reason FROM rejects");
  cr_assert_not_null(got);
  cr_assert(strncmp(got, "1|1|NUL byte at line 1 column 3", 31) == 0, "rejects: %s", got);
  free(got);
  free(db);
  free(out);
  free(path);
  free(dir);
}

/* ---- isotopes ------------------------------------------------------------------- */

/* Atomic numbers and mass numbers of the stored molecule named name, as
 * "z:isotope" for each atom with a mass number, in atom order. */
static char *stored_isotopes(const char *db, const char *name) {
  sqlite3 *h = NULL;
  sqlite3_stmt *st = NULL;
  cr_assert_eq(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  cr_assert_eq(sqlite3_prepare_v2(h, "SELECT mol FROM molecules WHERE name = ?1", -1, &st, NULL), SQLITE_OK);
  sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
  cr_assert_eq(sqlite3_step(st), SQLITE_ROW, "no molecule %s", name);
  struct mol m;
  struct se3_error e;
  cr_assert_eq(mol_from_blob(sqlite3_column_blob(st, 0), (size_t)sqlite3_column_bytes(st, 0), &m, &e), 0, "%s",
               se3_error_str(&e).s);
  char *s = calloc(1, 16 * (size_t)m.n_atoms + 1);
  for (int i = 0; i < m.n_atoms; i++)
    if (m.atoms[i].isotope) sprintf(s + strlen(s), "%s%d:%d", *s ? " " : "", m.atoms[i].z, m.atoms[i].isotope);
  mol_free(&m);
  sqlite3_finalize(st);
  sqlite3_close(h);
  return s;
}

/* Methanol with a 13C, as an SD record with an M  ISO line. */
static const char ISO_SDF[] = "methanol13\n  test\n\n"
                              "  2  1  0  0  0  0  0  0  0  0999 V2000\n"
                              "    0.0000    0.0000    0.0000 C   0  0  0  0  0  0  0  0  0  0  0  0\n"
                              "    1.4300    0.0000    0.0000 O   0  0  0  0  0  0  0  0  0  0  0  0\n"
                              "  1  2  1  0  0  0  0\n"
                              "M  ISO  1   1  13\n"
                              "M  END\n$$$$\n";

Test(ingest_values, isotopes_stored_and_exported) {
  char *dir = tu_tmpdir("values_iso");
  char *smi = tu_write(dir, "iso.smi", "[13CH4] methane13\n[2H]O[2H] heavywater\nCCO ethanol\nC methane\n");
  char *sdf = tu_write(dir, "iso.sdf", ISO_SDF);
  char yaml[2048];
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: work\nsets:\n  train:\n    - {path: %s}\n    - {path: %s}\n"
           "stages:\n  ingest: {workers: 1, gen3d_quality: fast, dedupe: inchikey}\n",
           smi, sdf);
  char *out = NULL;
  int rc = run_wf(dir, yaml, &out);
  cr_assert_eq(rc, 0, "run failed (%d): %s", rc, out);
  free(out);
  char *db = db_of(dir);
  /* [13CH4] and CH4 are two molecules: dedupe by InChIKey keeps both */
  char *got = tu_query(db, "SELECT name, smiles FROM molecules ORDER BY " TU_IN_ORDER(""));
  cr_assert_str_eq(got, "methane13|[13CH4]\nheavywater|[2H]O[2H]\nethanol|CCO\nmethane|C\nmethanol13|[13CH3]O\n", "%s",
                   got);
  free(got);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM rejects"), 0);
  /* the stored molecule keeps the mass numbers (the hydrogens added are plain) */
  static const struct {
    const char *name, *want;
  } iso[] = {{"methane13", "6:13"}, {"heavywater", "1:2 1:2"}, {"ethanol", ""}, {"methanol13", "6:13"}};
  for (size_t i = 0; i < sizeof iso / sizeof iso[0]; i++) {
    char *s = stored_isotopes(db, iso[i].name);
    cr_assert_str_eq(s, iso[i].want, "%s: stored isotopes '%s', expected '%s'", iso[i].name, s, iso[i].want);
    free(s);
  }
  /* exported as SD with M  ISO lines, and read back by Open Babel */
  char *path = NULL;
  cr_assert(asprintf(&path, "%s/out.sdf", dir) > 0);
  cr_assert_eq(tu_se3(&out, "export %s/work --format sdf -o %s --query \"SELECT id, name FROM molecules ORDER BY " TU_IN_ORDER("") "\"",
                      dir, path),
               0, "%s", out);
  free(out);
  char *text = tu_read(path, NULL);
  cr_assert_not_null(text);
  cr_assert(strstr(text, "M  ISO"), "no M  ISO line in the exported SDF:\n%s", text);
  free(text);
  if (tu_sh(NULL, "command -v obabel >/dev/null") == 0) {
    cr_assert_eq(tu_sh(&out, "obabel -isdf %s -ocan 2>/dev/null | cut -f1", path), 0);
    cr_assert_str_eq(out, "[13CH4]\n[2H]O[2H]\nCCO\nC\n[13CH3]O\n", "obabel read back:\n%s", out);
    free(out);
  }
  /* and by the library se3screen links, without obabel */
  cr_assert_eq(ob_init(), 0);
  text = tu_read(path, NULL);
  char *rec = text;
  const char *want[] = {"[13CH4]", "[2H]O[2H]", "CCO", "C", "[13CH3]O"};
  for (int i = 0; i < 5; i++) {
    char *end = strstr(rec, "$$$$\n");
    cr_assert_not_null(end, "record %d missing", i + 1);
    end += 5;
    struct ob_parse_opts po = {.format = "sdf", .gen3d = OB_GEN3D_NEVER};
    struct mol m;
    char why[256];
    cr_assert_eq(ob_parse(rec, (size_t)(end - rec), &po, &m, why, sizeof why), 0, "%s", why);
    cr_assert_str_eq(m.smiles, want[i], "record %d read back as %s", i + 1, m.smiles);
    mol_free(&m);
    rec = end;
  }
  free(text);
  free(path);
  free(db);
  free(smi);
  free(sdf);
  free(dir);
}

/* ---- labels --------------------------------------------------------------------- */

Test(ingest_values, labels_are_decimal_numbers) {
  char *dir = tu_tmpdir("values_labels");
  /* line:  2        3           4          5           6         7           8         9          10 */
  static const char rows[] = "smiles,name,y\n"
                             "C,hex,0x10\n"
                             "CC,padded, 1.5 \n"
                             "CCC,huge,1e400\n"
                             "CCCC,nan,nan\n"
                             "CCO,inf,-inf\n"
                             "CCN,comma,\"1,5\"\n"
                             "CN,plain,-2.5e-1\n"
                             "CO,hexfloat,0X1P4\n"
                             "CCCO,dot,.5\n";
  char *csv = tu_write(dir, "l.csv", rows);
  /* the same rows again as the second input, with its labels_csv (a copy:
   * one file listed twice in a set is refused) */
  char *csv2 = tu_write(dir, "l2.csv", rows);
  /* a labels_csv joined by name: the same rules, its own file and line named */
  /* (and a NUL byte in a row rejects the molecule it labels: the cell "4\0 2" was read as 4) */
  static const char side_csv[] = "name,z\nhex,1\npadded,0x1F\nplain,3\ndot,4\0 2\n";
  char *side = NULL;
  cr_assert(asprintf(&side, "%s/side.csv", dir) > 0);
  FILE *f = fopen(side, "wb");
  cr_assert(f && fwrite(side_csv, 1, sizeof side_csv - 1, f) == sizeof side_csv - 1 && fclose(f) == 0);
  /* an SD tag: the same rules */
  char *sdf = tu_write(dir, "t.sdf",
                       "tagged\n  test\n\n  1  0  0  0  0  0  0  0  0  0999 V2000\n"
                       "    0.0000    0.0000    0.0000 C   0  0  0  0  0  0  0  0  0  0  0  0\n"
                       "M  END\n>  <y>\n0x10\n\n$$$$\n"
                       "fine\n  test\n\n  1  0  0  0  0  0  0  0  0  0999 V2000\n"
                       "    0.0000    0.0000    0.0000 O   0  0  0  0  0  0  0  0  0  0  0  0\n"
                       "M  END\n>  <y>\n2\n\n$$$$\n");
  char yaml[2048];
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: work\nsets:\n  train:\n    - {path: %s, labels: [y]}\n"
           "    - path: %s\n      labels_csv: {path: %s, join: name, columns: [z]}\n"
           "    - {path: %s, labels: [y]}\n"
           "stages:\n  ingest: {workers: 1, gen3d_quality: fast}\n",
           csv, csv2, side, sdf);
  char *out = NULL;
  int rc = run_wf(dir, yaml, &out);
  cr_assert_eq(rc, 0, "run failed (%d): %s", rc, out);
  free(out);
  char *db = db_of(dir);
  char *got = tu_query(db, "SELECT m.name, l.name, l.value FROM labels l JOIN molecules m ON m.id = l.mol_id "
                           "WHERE " TU_FROM_INPUT("m.", 0) " ORDER BY m.id");
  cr_assert_str_eq(got, "padded|y|1.5\nplain|y|-0.25\ndot|y|0.5\n", "labels from the y column:\n%s", got);
  free(got);
  /* every other row of the first input is a reject ("label not a number"),
   * its detail naming file:line and column (l2.csv, the second input, has
   * a labels_csv with a row that cannot be read) */
  got = tu_query(db, "SELECT reason, count(*), count(atom), count(detail) FROM rejects GROUP BY 1 ORDER BY 1");
  cr_assert_str_eq(got, "bad labels_csv row|1|0|1\nlabel not a number|8|0|8\n", "%s", got);
  free(got);
  static const struct {
    int line;
    const char *value, *why;
  } bad[] = {{2, "0x10", "hexadecimal"},         {4, "1e400", "out of range"}, {5, "nan", "not a finite number"},
             {6, "-inf", "not a finite number"}, {7, "1,5", "comma"},          {9, "0X1P4", "hexadecimal"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT detail FROM rejects WHERE source_file LIKE '%%l.csv' AND line = %d", bad[i].line);
    got = tu_query(db, sql);
    cr_assert_not_null(got);
    char where[64];
    snprintf(where, sizeof where, "l.csv:%d", bad[i].line);
    cr_assert(strstr(got, where), "line %d ('%s'): reason '%s' lacks '%s'", bad[i].line, bad[i].value, got, where);
    cr_assert(strstr(got, "column 'y'"), "line %d: reason '%s' names no column", bad[i].line, got);
    cr_assert(strstr(got, bad[i].value), "line %d: reason '%s' lacks the value", bad[i].line, got);
    cr_assert(strstr(got, bad[i].why), "line %d: reason '%s' lacks '%s'", bad[i].line, got, bad[i].why);
    free(got);
  }
  /* the labels_csv: 0x1F refused, naming side.csv:3 and column 'z'; the other rows read */
  got = tu_query(db, "SELECT m.name, l.value FROM labels l JOIN molecules m ON m.id = l.mol_id "
                     "WHERE " TU_FROM_INPUT("m.", 1) " ORDER BY m.id");
  cr_assert_str_eq(got, "hex|1\nplain|3\n", "labels from side.csv:\n%s", got);
  free(got);
  got = tu_query(db, "SELECT reason || ': ' || detail FROM rejects WHERE name = 'padded' AND detail LIKE '%side.csv%'");
  cr_assert_not_null(got);
  cr_assert(strstr(got, "label not a number: ") == got && strstr(got, "side.csv:3") && strstr(got, "column 'z'") &&
                strstr(got, "0x1F") && strstr(got, "hexadecimal"),
            "the labels_csv reject: '%s'", got);
  free(got);
  got = tu_query(db, "SELECT reason || ': ' || detail FROM rejects WHERE name = 'dot' AND detail LIKE '%side.csv%'");
  cr_assert_not_null(got);
  cr_assert(strstr(got, "bad labels_csv row: labels_csv ") == got &&
                strstr(got, "side.csv:5: NUL byte at line 5 column 6"),
            "the labels_csv row with a NUL byte: '%s'", got);
  free(got);
  got = tu_query(db, "SELECT detail FROM rejects WHERE name = 'tagged' AND reason = 'label not a number'");
  cr_assert_not_null(got);
  cr_assert(strstr(got, "t.sdf, record 1 at line 1, SD tag 'y'") && strstr(got, "'0x10'") && strstr(got, "hexadecimal"),
            "the SD tag reject: '%s'", got);
  free(got);
  free(sdf);
  free(db);
  free(csv);
  free(csv2);
  free(side);
  free(dir);
}
