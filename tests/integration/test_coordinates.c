/* stages.ingest.coordinates (issue 54), through the se3screen binary:
 * `generated` (the default) gives every record a generated shape, its file's
 * 3D coordinates or not, and the same molecule from MOL2 and from SMILES the
 * same shape; `input` keeps a file's coordinates; gen3d's older spellings
 * settle into it. Then what the model's card carries of it and of the
 * training set (set_profile.h), and the warnings a library prepared unlike
 * the training set gets from the score stage and from predict. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "chem/mol.h"
#include "common/error.h"
#include "tests/testutil.h"

static int run_in(const char *dir, const char *yaml, const char *extra, char **out) {
  char *wf = tu_write(dir, "wf.yaml", yaml);
  cr_assert(wf);
  int rc = tu_se3(out, "run %s --set run.progress=none %s", wf, extra ? extra : "");
  free(wf);
  return rc;
}

/* The molecule of set `set` named `name`, decoded from its blob. */
static void stored_mol(const char *db, const char *set, const char *name, struct mol *m) {
  sqlite3 *h = NULL;
  sqlite3_stmt *st = NULL;
  cr_assert_eq(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  cr_assert_eq(sqlite3_prepare_v2(h, "SELECT mol FROM molecules WHERE set_name=?1 AND name=?2", -1, &st, NULL),
               SQLITE_OK);
  sqlite3_bind_text(st, 1, set, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
  cr_assert_eq(sqlite3_step(st), SQLITE_ROW, "no molecule %s in set %s of %s", name, set, db);
  struct se3_error e;
  mol_init(m);
  cr_assert_eq(mol_from_blob(sqlite3_column_blob(st, 0), (size_t)sqlite3_column_bytes(st, 0), m, &e), 0, "%s",
               se3_error_str(&e).s);
  sqlite3_finalize(st);
  sqlite3_close(h);
}

/* (a) A 3D SDF ingested with the default: every molecule's shape generated
 * (coords_from gen3d, coordinates not the file's); with coordinates: input,
 * the 3D record keeps its file's coordinates (to the blob's fp32) and the 2D one is
 * generated (gen3d: auto); with gen3d: never (and coordinates left out)
 * nothing is generated, as before the key existed. */
Test(coordinates, generated_by_default_input_keeps_the_file) {
  char *dir = tu_tmpdir("coords_sdf");
  char yaml[2048], *out = NULL;
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: work\nsets:\n  train:\n    - {path: %s}\n    - {path: %s}\n"
           "stages:\n  ingest: {workers: 1}\n",
           tu_src("tests/data/chem/ethanol_benzene.sdf"), tu_src("workflows/data/qm9_mini.sdf"));
  cr_assert_eq(run_in(dir, yaml, NULL, &out), 0, "%s", out);
  free(out);
  char *db = NULL;
  cr_assert(asprintf(&db, "%s/work/screen.db", dir) > 0);
  /* ethanol, benzene and the 20 good QM9 records, every one generated */
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM molecules"), 22);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM molecules WHERE coords_from = 'gen3d'"), 22);

  /* ethanol's coordinates as its file gives them (the first 9 atom lines) */
  double file_xyz[9][3];
  char *sdf = tu_read(tu_src("tests/data/chem/ethanol_benzene.sdf"), NULL);
  cr_assert(sdf);
  char *line = strchr(strchr(strchr(strchr(sdf, '\n') + 1, '\n') + 1, '\n') + 1, '\n') + 1;
  for (int i = 0; i < 9; i++, line = strchr(line, '\n') + 1)
    cr_assert_eq(sscanf(line, "%lf %lf %lf", &file_xyz[i][0], &file_xyz[i][1], &file_xyz[i][2]), 3);
  free(sdf);
  struct mol m;
  stored_mol(db, "train", "ethanol", &m);
  cr_assert_eq(m.n_atoms, 9);
  double moved = 0;
  for (int i = 0; i < 9; i++)
    moved = fmax(moved, fabs(m.atoms[i].x - file_xyz[i][0]) + fabs(m.atoms[i].y - file_xyz[i][1]) +
                            fabs(m.atoms[i].z_ - file_xyz[i][2]));
  cr_assert_gt(moved, 0.1, "ethanol kept its file's coordinates under coordinates: generated");
  mol_free(&m);

  /* coordinates: input: the file's coordinates, atom by atom */
  cr_assert_eq(run_in(dir, yaml, "--set ingest.coordinates=input", &out), 0, "%s", out);
  free(out);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM molecules WHERE coords_from = 'input'"), 21);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM molecules WHERE coords_from = 'gen3d' AND name = 'benzene'"), 1);
  stored_mol(db, "train", "ethanol", &m);
  cr_assert_eq(m.n_atoms, 9);
  cr_assert_eq(m.coords_gen3d, 0);
  for (int i = 0; i < 9; i++) { /* (the blob keeps fp32) */
    cr_assert_eq((float)m.atoms[i].x, (float)file_xyz[i][0], "atom %d", i + 1);
    cr_assert_eq((float)m.atoms[i].y, (float)file_xyz[i][1], "atom %d", i + 1);
    cr_assert_eq((float)m.atoms[i].z_, (float)file_xyz[i][2], "atom %d", i + 1);
  }
  mol_free(&m);

  /* gen3d: never as workflows wrote it before: input coordinates, none
   * generated (benzene keeps its 2D ones: the graph stage rejects it) */
  cr_assert_eq(tu_se3(&out, "check %s/wf.yaml --set ingest.gen3d=never", dir), 0, "%s", out);
  cr_assert(strstr(out, "coordinates: input"), "%s", out);
  free(out);
  cr_assert_eq(run_in(dir, yaml, "--set ingest.gen3d=never", &out), 0, "%s", out);
  free(out);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM molecules WHERE coords_from = 'input'"), 22);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM molecules WHERE coords_from = 'gen3d'"), 0);
  stored_mol(db, "train", "ethanol", &m);
  cr_assert_eq((float)m.atoms[8].x, (float)file_xyz[8][0]);
  mol_free(&m);
  /* gen3d: always, the older spelling of coordinates: generated: said so */
  cr_assert_eq(run_in(dir, yaml, "--set ingest.gen3d=always", &out), 0, "%s", out);
  cr_assert(strstr(out, "note: stages.ingest.gen3d: always is the older spelling of stages.ingest.coordinates: "
                        "generated"),
            "%s", out);
  free(out);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM molecules WHERE coords_from = 'gen3d'"), 22);
  /* and contradictions are refused, naming both keys */
  cr_assert_eq(tu_se3(&out, "check %s/wf.yaml --set ingest.gen3d=never --set ingest.coordinates=generated", dir), 2);
  cr_assert(strstr(out, "stages.ingest.gen3d: never contradicts stages.ingest.coordinates: generated"), "%s", out);
  free(out);
  cr_assert_eq(tu_se3(&out, "check %s/wf.yaml --set ingest.gen3d=always --set ingest.coordinates=input", dir), 2);
  cr_assert(strstr(out, "always contradicts stages.ingest.coordinates: input"), "%s", out);
  free(out);
  free(db);
  free(dir);
}

/* A change of coordinates redoes ingest, and --dry-run says so. */
Test(coordinates, a_change_redoes_ingest) {
  char *dir = tu_tmpdir("coords_key");
  char yaml[1024], *out = NULL;
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: work\nsets:\n  train:\n    - {path: %s}\nstages:\n  ingest: {workers: 1}\n",
           tu_src("tests/data/chem/ethanol_benzene.sdf"));
  cr_assert_eq(run_in(dir, yaml, NULL, &out), 0, "%s", out);
  free(out);
  cr_assert_eq(tu_se3(&out, "run %s/wf.yaml --dry-run", dir), 0, "%s", out);
  cr_assert(strstr(out, "ingest: nothing to do") || !strstr(out, "ingest: its settings changed"), "%s", out);
  free(out);
  cr_assert_eq(tu_se3(&out, "run %s/wf.yaml --dry-run --set ingest.coordinates=input", dir), 0, "%s", out);
  cr_assert(strstr(out, "ingest: its settings changed: redone whole"), "%s", out);
  free(out);
  free(dir);
}

/* (b) The same molecules from MOL2 (3D, hydrogens, DUD-E's atom order) and
 * from SMILES written by another toolkit, ingested with the default: every
 * shape from the same builder (coords_from gen3d), the same canonical
 * SMILES, and, the molecule being read again from that SMILES and seeded
 * from it, the same molecule blob byte for byte: the same atoms in the same
 * order at the same coordinates. */
Test(coordinates, mol2_and_smiles_give_the_same_shape) {
  char *dir = tu_tmpdir("coords_formats");
  char yaml[2048], *out = NULL;
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: work\nsets:\n  m:\n    - {path: %s}\n  s:\n    - {path: %s}\n"
           "stages:\n  ingest: {workers: 2}\n",
           tu_src("workflows/data/fabp4_actives_library.mol2.gz"), tu_src("tests/data/chem/fabp4_actives_library.smi"));
  cr_assert_eq(run_in(dir, yaml, NULL, &out), 0, "%s", out);
  free(out);
  char *db = NULL;
  cr_assert(asprintf(&db, "%s/work/screen.db", dir) > 0);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM molecules"), 34);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM molecules WHERE coords_from = 'gen3d'"), 34);
  const char *pair = "FROM molecules a JOIN molecules b ON a.record_no = b.record_no AND a.set_name = 'm' AND "
                     "b.set_name = 's' ";
  char sql[512];
  snprintf(sql, sizeof sql, "SELECT count(*) %s WHERE a.smiles = b.smiles", pair);
  cr_assert_eq(tu_query_int(db, sql), 17);
  snprintf(sql, sizeof sql, "SELECT count(*) %s WHERE a.mol = b.mol", pair);
  cr_assert_eq(tu_query_int(db, sql), 17, "MOL2 and SMILES records of one molecule got different shapes");
  /* and a shape is a shape of the molecule: bonded heavy atoms 1.1-1.9 Å apart */
  struct mol m;
  stored_mol(db, "m", "CHEMBL460749", &m);
  for (int b = 0; b < m.n_bonds; b++) {
    const struct mol_atom *x = &m.atoms[m.bonds[b].a], *y = &m.atoms[m.bonds[b].b];
    if (x->z == 1 || y->z == 1) continue;
    double d = sqrt(pow(x->x - y->x, 2) + pow(x->y - y->y, 2) + pow(x->z_ - y->z_, 2));
    cr_assert(d > 1.1 && d < 1.9, "bond %d: %.3f Å", b, d);
  }
  mol_free(&m);
  free(db);
  free(dir);
}

/* A training set of charged amines and carboxylates (SMILES, so generated
 * shapes on both sides), a model trained on it, and two libraries: charged
 * like it (no warning) and neutral (the charge states differ: a warning in
 * the score stage's log, in meta 'score_warnings' and in the report, and
 * from predict on the saved model; scored in two shards, screen.db has it
 * after the merge). Then a model trained on a 3D file's own
 * coordinates scoring SMILES: the shapes differ. The card carries
 * coordinates and the training set's profile. */
Test(coordinates, charge_states_and_shapes_reported) {
  char *dir = tu_tmpdir("coords_charge");
  FILE *f = NULL;
  char *path = NULL;
  cr_assert(asprintf(&path, "%s/train.csv", dir) > 0 && (f = fopen(path, "w")));
  fprintf(f, "smiles,y\n");
  static const char *const charged[] = {"C[NH3+]",           "CC[NH3+]",           "CCC[NH3+]",    "CCCC[NH3+]",
                                        "C[NH2+]C",          "CC[NH2+]CC",         "C[NH+](C)C",   "C1CC[NH2+]CC1",
                                        "CC(=O)[O-]",        "CCC(=O)[O-]",        "CCCC(=O)[O-]", "OC(=O)CC[NH3+]",
                                        "[O-]C(=O)c1ccccc1", "Cc1ccccc1C(=O)[O-]", "C[NH3+]",      "NCC(=O)[O-]"};
  static const char *const neutral[] = {"CCO",  "CCCO", "CC(C)O",  "c1ccccc1O", "CCOC",     "CCN",
                                        "CCCN", "CNC",  "CC(=O)O", "CCC(=O)O",  "c1ccccc1", "CC(C)CO"};
  for (size_t i = 0; i < sizeof charged / sizeof *charged; i++)
    fprintf(f, "%s,%.2f\n", charged[i], 0.3 * (double)(i % 5));
  for (size_t i = 0; i < 6; i++)
    fprintf(f, "%s,%.2f\n", neutral[i], 0.2 * (double)(i % 3));
  fclose(f);
  free(path);
  cr_assert(asprintf(&path, "%s/neutral.smi", dir) > 0 && (f = fopen(path, "w")));
  for (size_t i = 0; i < sizeof neutral / sizeof *neutral; i++)
    fprintf(f, "%s n%zu\n", neutral[i], i);
  fclose(f);
  free(path);
  cr_assert(asprintf(&path, "%s/charged.smi", dir) > 0 && (f = fopen(path, "w")));
  for (size_t i = 0; i < 12; i++)
    fprintf(f, "%s c%zu\n", charged[i], i);
  fclose(f);
  free(path);
  static const char *const head = "workflow: t\nworkdir: work\nsets:\n  train:\n    - {path: train.csv, labels: [y]}\n"
                                  "  library:\n    - {path: %s}\nstages:\n  ingest: {workers: 1}\n"
                                  "  graph: {edges: bonds}\n"
                                  "  train: {ensemble: 1, target: y, model: small, arch: {layers: 1, channels: 4, degrees: 2}, "
                                  "epochs: 1, batch_size: 8}\n  score: {set: library}\n  rank: {top: 5}\n";
  char yaml[1024], *out = NULL;
  snprintf(yaml, sizeof yaml, head, "charged.smi");
  cr_assert_eq(run_in(dir, yaml, NULL, &out), 0, "%s", out);
  cr_assert(!strstr(out, "warning: set 'library'"), "a library charged like the training set was warned of: %s", out);
  free(out);
  char *db = NULL;
  cr_assert(asprintf(&db, "%s/work/screen.db", dir) > 0);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM meta WHERE key = 'score_warnings'"), 0);

  /* the card: coordinates, and the training set's profile (22 molecules, 16
   * ionised, 10 with a protonated amine, none with its file's coordinates) */
  char *ck = NULL;
  cr_assert(asprintf(&ck, "%s/work/models/train-0/best.ckpt", dir) > 0);
  size_t n = 0;
  char *bytes = tu_read(ck, &n);
  cr_assert(bytes);
  static const char *const card[] = {"stages.ingest.coordinates=generated\n", "profile.molecules=22\n",
                                     "profile.ionised=16\n", "profile.protonated_amines=10\n",
                                     "profile.input_coordinates=0\n"};
  for (size_t i = 0; i < sizeof card / sizeof *card; i++)
    cr_assert(memmem(bytes, n, card[i], strlen(card[i])), "the card lacks %s", card[i]);
  free(bytes);

  /* the neutral library: the score stage warns, names both figures and what to do */
  snprintf(yaml, sizeof yaml, head, "neutral.smi");
  cr_assert_eq(run_in(dir, yaml, NULL, &out), 0, "%s", out);
  cr_assert(strstr(out, "warning: set 'library': charge states differ: 72.7 % of the training set's molecules are "
                        "ionised"),
            "%s", out);
  cr_assert(strstr(out, "0.0 % of this set's (0 of 12)"), "%s", out);
  cr_assert(strstr(out, "stages.ingest.protonate: 7.4"), "%s", out);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM meta WHERE key = 'score_warnings' AND value LIKE "
                                "'charge states differ: 72.7 %%'"),
               1);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM scores"), 12, "the library is scored all the same");

  /* the same scored in two shards and merged: screen.db has the warning */
  char *wd2 = NULL, *db2 = NULL;
  cr_assert(asprintf(&wd2, "%s/two", dir) > 0 && asprintf(&db2, "%s/two/work/screen.db", dir) > 0);
  cr_assert_eq(tu_sh(NULL, "mkdir -p %s && cp %s/train.csv %s/neutral.smi %s/", wd2, dir, dir, wd2), 0);
  cr_assert_eq(run_in(wd2, yaml, "--until train", &out), 0, "%s", out);
  free(out);
  for (int k = 0; k < 2; k++) {
    cr_assert_eq(run_in(wd2, yaml, k ? "--stage score --shard 1/2" : "--stage score --shard 0/2", &out), 0, "%s", out);
    free(out);
  }
  cr_assert_eq(tu_query_int(db2, "SELECT count(*) FROM meta WHERE key = 'score_warnings'"), 0, "before the merge");
  cr_assert_eq(tu_se3(&out, "merge %s", db2), 0, "%s", out);
  free(out);
  cr_assert_eq(tu_query_int(db2, "SELECT count(*) FROM scores"), 12);
  cr_assert_eq(tu_query_int(db2, "SELECT count(*) FROM meta WHERE key = 'score_warnings' AND value LIKE "
                                 "'charge states differ: 72.7 %%'"),
               1, "the shards' warning was not merged");
  free(wd2);
  free(db2);
  cr_assert_eq(tu_se3(&out, "report %s/work", dir), 0, "%s", out);
  free(out);
  char *page = NULL;
  cr_assert(asprintf(&page, "%s/work/report.html", dir) > 0);
  char *html = tu_read(page, NULL);
  cr_assert(html && strstr(html, "Warning, from the score stage: charge states differ"));
  free(html);
  free(page);

  /* predict with the saved model, on the neutral library: the same warning */
  cr_assert_eq(tu_se3(&out, "predict %s/work %s/neutral.smi --workdir %s/pred --top 3", dir, dir, dir), 0, "%s", out);
  cr_assert(strstr(out, "charge states differ: 72.7 %"), "%s", out);
  free(out);

  /* a model trained on a 3D file's own coordinates (coordinates: input)
   * scoring SMILES: the shapes differ, said by predict */
  snprintf(yaml, sizeof yaml,
           "workflow: q\nworkdir: q\nsets:\n  train:\n    - path: %s\n      labels_csv: {path: %s, join: mol_id, "
           "columns: [homo]}\nstages:\n  ingest: {workers: 1, coordinates: input}\n  graph: {edges: bonds}\n"
           "  train: {ensemble: 1, target: homo, model: small, arch: {layers: 1, channels: 4, degrees: 2}, epochs: 1}\n",
           tu_src("workflows/data/qm9_mini.sdf"), tu_src("workflows/data/qm9_mini.sdf.csv"));
  cr_assert_eq(run_in(dir, yaml, NULL, &out), 0, "%s", out);
  free(out);
  cr_assert_eq(tu_se3(&out, "predict %s/q %s/neutral.smi --workdir %s/pred_q --top 3", dir, dir, dir), 0, "%s", out);
  cr_assert(strstr(out, "3D shapes differ: 100.0 % of the training set's molecules kept their files' coordinates, "
                        "0.0 % of this set's"),
            "%s", out);
  free(out);
  free(ck);
  free(db);
  free(dir);
}
