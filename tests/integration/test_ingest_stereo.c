/* Stereo said, not chosen silently (issue 70), through the se3screen binary.
 * A SMILES without stereo marks at a stereocentre or stereo double bond
 * (CC(N)C(=O)O, CCC=CCO) gets a 3D shape that has one configuration, and
 * that shape was scored and docked under the input's SMILES, the isomer
 * unsaid. Now ingest counts what each input left free
 * (molecules.stereo_free), names the isomer the shape has
 * (molecules.isomer_smiles: exactly for those, with its @/@@ and / \ marks,
 * the same constitution, every unit named), every conformer is that isomer
 * (perceived again from the stored coordinates), the log counts them, and
 * hits.csv and hits.sdf carry it (a dock-only workflow whose scores come
 * from a table: rank without a model, in a second). */
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

/* Each molecule, and the stereo units its SMILES leaves free (tetrahedral,
 * cis/trans), by chemistry: an ammonium N-H is none (the standardiser drops
 * its marks), nor a double bond in a five-membered ring (only cis closes
 * it); 1,4-dimethylcyclohexane's cis/trans is its two ring centres. */
static const struct {
  const char *smiles, *name;
  int tetra, cistrans;
} MOLS[] = {
    {"CC(N)C(=O)O", "alanine", 1, 0},
    {"C[C@H](N)C(=O)O", "L-alanine", 0, 0},
    {"CCC=CCO", "pentenol", 0, 1},
    {"CC/C=C\\CO", "Z-pentenol", 0, 0},
    {"CC(O)CC=CC", "hexenol", 1, 1},
    {"C[C@@H](O)CC=CC", "R-hexenol", 0, 1},
    {"CC1CCC(C)CC1", "dimethylcyclohexane", 2, 0},
    {"CC[NH+](C)CCC", "ammonium", 0, 0},
    {"CCO", "ethanol", 0, 0},
    {"O=C1CCC(=C1)c1ccccc1", "cyclopentenone", 0, 0},
};
#define N_MOLS (sizeof MOLS / sizeof MOLS[0])

/* The molecules row of `name`: its blob decoded into m, its isomer_smiles
 * (malloc'd, NULL for NULL) and stereo_free (-1 for NULL). */
static void stored(const char *db, const char *name, struct mol *m, char **isomer, int *n_free, char **smiles,
                   char **inchikey) {
  sqlite3 *h = NULL;
  sqlite3_stmt *st = NULL;
  cr_assert_eq(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  cr_assert_eq(sqlite3_prepare_v2(h,
                                  "SELECT mol, isomer_smiles, stereo_free, smiles, inchikey FROM molecules WHERE "
                                  "name = ?1",
                                  -1, &st, NULL),
               SQLITE_OK, "%s", sqlite3_errmsg(h));
  sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
  cr_assert_eq(sqlite3_step(st), SQLITE_ROW, "no molecule %s", name);
  struct se3_error e;
  mol_init(m);
  cr_assert_eq(mol_from_blob(sqlite3_column_blob(st, 0), (size_t)sqlite3_column_bytes(st, 0), m, &e), 0, "%s",
               se3_error_str(&e).s);
  const char *iso = (const char *)sqlite3_column_text(st, 1);
  *isomer = iso ? strdup(iso) : NULL;
  *n_free = sqlite3_column_type(st, 2) == SQLITE_NULL ? -1 : sqlite3_column_int(st, 2);
  *smiles = strdup((const char *)sqlite3_column_text(st, 3));
  *inchikey = strdup((const char *)sqlite3_column_text(st, 4));
  sqlite3_finalize(st);
  sqlite3_close(h);
}

/* text (a SMILES) read by Open Babel as ingest reads it, with a shape made
 * (gen3d: always): 0 and m filled, or the test fails. */
static void parse_smiles(const char *smiles, struct mol *m) {
  struct ob_parse_opts o = {
      .format = "smi", .add_hydrogens = 1, .gen3d = OB_GEN3D_ALWAYS, .quality = OB_Q_FAST, .seed = 1, .max_atoms = 999};
  struct mol_why why;
  char text[256];
  snprintf(text, sizeof text, "%s\n", smiles);
  cr_assert_eq(ob_parse_why(text, strlen(text), &o, m, &why), 0, "'%s' does not read back: %s: %s", smiles, why.reason,
               why.detail);
}

Test(ingest_stereo, unspecified_stereo_is_named_counted_and_goes_with_the_hits) {
  char *dir = tu_tmpdir("ingest_stereo");
  char smi[2048] = "", table[2048] = "smiles,score\n";
  for (size_t i = 0; i < N_MOLS; i++) {
    snprintf(smi + strlen(smi), sizeof smi - strlen(smi), "%s %s\n", MOLS[i].smiles, MOLS[i].name);
    snprintf(table + strlen(table), sizeof table - strlen(table), "%s,%d\n", MOLS[i].smiles, -(int)i - 1);
  }
  free(tu_write(dir, "in.smi", smi));
  free(tu_write(dir, "scores.csv", table));
  /* several conformers a molecule: each must be the isomer named */
  char *wf = tu_write(dir, "wf.yaml",
                      "workflow: t\nworkdir: work\nrun: {progress: none}\nsets:\n  library:\n    - {path: in.smi}\n"
                      "stages:\n  ingest: {workers: 1, conformers: 4}\n  dock: {oracle: table, table: scores.csv}\n"
                      "  rank: {}\n");
  char db[1200], *out = NULL;
  snprintf(db, sizeof db, "%s/work/screen.db", dir);
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);

  /* the log counts them: molecules, and units in all */
  int n_with = 0, n_units = 0;
  for (size_t i = 0; i < N_MOLS; i++) {
    n_with += MOLS[i].tetra + MOLS[i].cistrans > 0;
    n_units += MOLS[i].tetra + MOLS[i].cistrans;
  }
  char line[256];
  snprintf(line, sizeof line,
           "ingest: %d molecules had unspecified stereo (%d centres/bonds); each is scored and docked as the isomer "
           "its 3D shape has",
           n_with, n_units);
  cr_assert(strstr(out, line), "no '%s' in:\n%s", line, out);
  free(out);

  int several = 0;
  for (size_t i = 0; i < N_MOLS; i++) {
    struct mol m;
    char *isomer = NULL, *smiles = NULL, *key = NULL;
    int n_free = -2;
    stored(db, MOLS[i].name, &m, &isomer, &n_free, &smiles, &key);
    int want = MOLS[i].tetra + MOLS[i].cistrans;
    cr_assert_eq(n_free, want, "%s: stereo_free %d, its SMILES leaves %d free", MOLS[i].name, n_free, want);
    cr_assert_eq(m.dim, 3);
    /* every conformer of the stored shape perceived again: the isomer
     * named, or (stereo given) the input's own */
    several += mol_n_conformers(&m) > 1;
    const char *expect = want ? isomer : smiles;
    cr_assert(want ? isomer != NULL : isomer == NULL, "%s: isomer_smiles '%s' with %d units free", MOLS[i].name,
              isomer ? isomer : "NULL", want);
    for (int c = 0; c < mol_n_conformers(&m); c++) {
      mol_swap_conformer(&m, c);
      char *seen = ob_isomer_smiles(&m, 1);
      mol_swap_conformer(&m, c);
      cr_assert_not_null(seen);
      cr_assert_str_eq(seen, expect, "%s conformer %d has %s, the row says %s", MOLS[i].name, c, seen, expect);
      free(seen);
    }
    if (want) {
      /* the marks its input lacked: @/@@ for a centre, / \ for a double bond */
      cr_assert(!MOLS[i].tetra || strchr(isomer, '@'), "%s: %s has no @", MOLS[i].name, isomer);
      cr_assert(!MOLS[i].cistrans || strpbrk(isomer, "/\\"), "%s: %s has no / or \\", MOLS[i].name, isomer);
      cr_assert_str_neq(isomer, smiles);
      /* it reads back as the same constitution (the InChIKey's skeleton
       * block), with every unit named: a shape made of it fixes nothing */
      struct mol back;
      parse_smiles(isomer, &back);
      cr_assert_eq(strncmp(back.inchikey, key, 14), 0, "%s: %s is %s, the molecule %s", MOLS[i].name, isomer,
                   back.inchikey, key);
      cr_assert_eq(back.stereo_free, 0, "%s: %s leaves %d units free", MOLS[i].name, isomer, back.stereo_free);
      cr_assert_null(back.isomer_smiles);
      mol_free(&back);
    }
    mol_free(&m);
    free(isomer);
    free(smiles);
    free(key);
  }
  cr_assert_gt(several, 3, "only %d molecules have several conformers", several);

  /* hits.csv: isomer_smiles its last column, each hit's the row's (empty
   * for a molecule whose input gave its stereo) */
  char path[1300];
  snprintf(path, sizeof path, "%s/work/hits.csv", dir);
  char *csv = tu_read(path, NULL);
  cr_assert_not_null(csv);
  const char *header = "rank,name,smiles,inchikey,target,score,std,set_name,source_file,record_no,mol_id,"
                       "nearest_train,similarity,isomer_smiles\n";
  cr_assert_eq(strncmp(csv, header, strlen(header)), 0, "%s", csv);
  int rows = 0;
  for (char *save = NULL, *l = strtok_r(strchr(csv, '\n') + 1, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
    char *last = strrchr(l, ','), *p = l;
    for (int k = 0; k < 10 && p; k++)
      p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL;
    cr_assert(p && last, "%s", l);
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT coalesce(isomer_smiles, '') FROM molecules WHERE id = %lld", atoll(p));
    char *want = tu_query(db, sql);
    cr_assert_not_null(want);
    want[strcspn(want, "\n")] = 0;
    cr_assert_str_eq(last + 1, want, "hits.csv line '%s'", l);
    free(want);
    rows++;
  }
  cr_assert_eq(rows, (int)N_MOLS);
  free(csv);
  /* hits.sdf: the tag on the records of exactly those molecules */
  cr_assert_eq(tu_sh(&out, "grep -c '^>  <isomer_smiles>' %s/work/hits.sdf", dir), 0);
  cr_assert_eq(atoi(out), n_with, "%s", out);
  free(out);
  /* and the report says what the log said */
  cr_assert_eq(tu_se3(&out, "report %s/work -o - --no-depict", dir), 0, "%s", out);
  snprintf(line, sizeof line, "Stereo: %d molecules had unspecified stereo (%d centres/bonds); each is scored and",
           n_with, n_units);
  cr_assert(strstr(out, line), "no '%s' in the report", line);
  free(out);
  free(wf);
  free(dir);
}

/* Docked as the isomer named: AutoDock Vina turns torsions and never
 * inverts a centre, and each pose it gives (perceived again from the pose's
 * coordinates) is the isomer_smiles ingest named; hits.sdf's docked records
 * carry it. Skipped where there is no vina. */
Test(ingest_stereo, every_docked_pose_is_the_isomer_named) {
  if (tu_sh(NULL, "command -v vina >/dev/null 2>&1") != 0)
    cr_skip_test("no vina program (scripts/setup.sh installs Debian's autodock-vina)");
  char *dir = tu_tmpdir("ingest_stereo_dock");
  free(tu_write(dir, "in.smi", "CC(O)c1ccccc1 phenylethanol\n"));
  char yaml[2048];
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: work\nrun: {progress: none}\nsets:\n  library:\n    - {path: in.smi}\n"
           "stages:\n  ingest: {workers: 1, conformers: 1}\n  dock: {receptor: %s, box_ligand: %s, exhaustiveness: "
           "1, modes: 3}\n  rank: {}\n",
           tu_src("tests/data/dock/receptor.pdb"), tu_src("tests/data/dock/crystal_ligand.mol2"));
  char *wf = tu_write(dir, "wf.yaml", yaml);
  char db[1200], *out = NULL;
  snprintf(db, sizeof db, "%s/work/screen.db", dir);
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  free(out);
  char *isomer = tu_query(db, "SELECT isomer_smiles FROM molecules");
  cr_assert(isomer && strchr(isomer, '@'), "%s", isomer ? isomer : "no row");
  isomer[strcspn(isomer, "\n")] = 0;
  sqlite3 *h = NULL;
  sqlite3_stmt *st = NULL;
  cr_assert_eq(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  cr_assert_eq(sqlite3_prepare_v2(h, "SELECT mode, pose FROM poses ORDER BY mode", -1, &st, NULL), SQLITE_OK);
  int n = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    struct mol m;
    struct se3_error e;
    mol_init(&m);
    cr_assert_eq(mol_from_blob(sqlite3_column_blob(st, 1), (size_t)sqlite3_column_bytes(st, 1), &m, &e), 0, "%s",
                 se3_error_str(&e).s);
    char *seen = ob_isomer_smiles(&m, 1);
    cr_assert_not_null(seen);
    cr_assert_str_eq(seen, isomer, "pose %d is %s, the molecule was named %s", sqlite3_column_int(st, 0), seen, isomer);
    free(seen);
    mol_free(&m);
    n++;
  }
  sqlite3_finalize(st);
  sqlite3_close(h);
  cr_assert_geq(n, 2, "%d poses", n);
  cr_assert_eq(tu_sh(&out, "grep -c '^>  <isomer_smiles>' %s/work/hits.sdf", dir), 0);
  cr_assert_eq(atoi(out), n, "%s records with isomer_smiles, %d poses", out, n);
  free(out);
  free(isomer);
  free(wf);
  free(dir);
}
