/* A file's own 3D coordinates held to the shape bounds (issue 67), through
 * the se3screen binary. Under `coordinates: input` an SD record whose O-H
 * bond is 9,000 Å long was stored as read; now it is a reject naming the
 * bond and its length, or, with `stages.ingest.input_shape: regenerate`,
 * stored with a generated shape (coords_from gen3d, shape regenerated),
 * and the run's log and the report count it either way. Switching the key
 * reads the file again, and the molecule whose shape was within bounds
 * keeps its row's contents (the stages after ingest keep its work).
 * `check` validates the key, and refuses `regenerate` beside `gen3d:
 * never`. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chem/mol.h"
#include "chem/shape.h"
#include "common/error.h"
#include "tests/testutil.h"

/* ethanol, all atoms, as tests/data/chem/ethanol_benzene.sdf has it; HO_LINE
 * is its hydroxyl hydrogen's coordinates */
#define ETHANOL_ATOMS                                                                                                  \
  "  9  8  0  0  0  0  0  0  0  0999 V2000\n"                                                                          \
  "   -1.2131   -0.2285    0.0000 C   0  0  0  0  0  0  0  0  0  0  0  0\n"                                            \
  "    0.2996   -0.1212    0.0000 C   0  0  0  0  0  0  0  0  0  0  0  0\n"                                            \
  "    0.7614    1.2269    0.0000 O   0  0  0  0  0  0  0  0  0  0  0  0\n"                                            \
  "   -1.5847    0.7996    0.0000 H   0  0  0  0  0  0  0  0  0  0  0  0\n"                                            \
  "   -1.5589   -0.7527    0.8924 H   0  0  0  0  0  0  0  0  0  0  0  0\n"                                            \
  "   -1.5589   -0.7527   -0.8924 H   0  0  0  0  0  0  0  0  0  0  0  0\n"                                            \
  "    0.6598   -0.6426    0.8899 H   0  0  0  0  0  0  0  0  0  0  0  0\n"                                            \
  "    0.6598   -0.6426   -0.8899 H   0  0  0  0  0  0  0  0  0  0  0  0\n"
#define ETHANOL_BONDS                                                                                                  \
  "  1  2  1  0\n  2  3  1  0\n  1  4  1  0\n  1  5  1  0\n  1  6  1  0\n  2  7  1  0\n  2  8  1  0\n  3  9  1  0\n"   \
  "M  END\n$$$$\n"

/* Ethanol as its file gives it, then the same with its hydroxyl hydrogen
 * 9,000 Å from the O, on the far side from C2 (the bond, not the angle
 * C2-O3-H9, is then what is furthest out of bounds). */
static const char SDF[] = "ethanol\n  se3test  3D\n\n" ETHANOL_ATOMS
                          "    1.7308    1.2127    0.0000 H   0  0  0  0  0  0  0  0  0  0  0  0\n" ETHANOL_BONDS
                          "stretched\n  se3test  3D\n\n" ETHANOL_ATOMS
                          "-2915.8645-8513.0724    0.0000 H   0  0  0  0  0  0  0  0  0  0  0  0\n" ETHANOL_BONDS;

static char *workflow(const char *dir, const char *sdf, const char *ingest) {
  char yaml[1024];
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: work\nrun: {progress: none}\nsets:\n  train:\n    - {path: %s}\n"
           "stages:\n  ingest: {workers: 1, coordinates: input%s}\n",
           sdf, ingest);
  return tu_write(dir, "wf.yaml", yaml);
}

/* The molecule named `name`, decoded from its blob. */
static void stored_mol(const char *db, const char *name, struct mol *m) {
  sqlite3 *h = NULL;
  sqlite3_stmt *st = NULL;
  cr_assert_eq(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  cr_assert_eq(sqlite3_prepare_v2(h, "SELECT mol FROM molecules WHERE name=?1", -1, &st, NULL), SQLITE_OK);
  sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
  cr_assert_eq(sqlite3_step(st), SQLITE_ROW, "no molecule %s in %s", name, db);
  struct se3_error e;
  cr_assert_eq(mol_from_blob(sqlite3_column_blob(st, 0), (size_t)sqlite3_column_bytes(st, 0), m, &e), 0, "%s",
               se3_error_str(&e).s);
  sqlite3_finalize(st);
  sqlite3_close(h);
}

Test(ingest_shape, a_bond_of_9000_A_is_refused_or_regenerated_and_counted) {
  char *dir = tu_tmpdir("ingest_shape");
  char *sdf = tu_write(dir, "in.sdf", SDF);
  char *wf = workflow(dir, sdf, "");
  char db[1200], *out = NULL;
  snprintf(db, sizeof db, "%s/work/screen.db", dir);

  /* the default, reject: the record refused with the bond and its length */
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  cr_assert(strstr(out, "3D shapes: 0 fixed after the bounds check, 1 refused, 0 input shapes regenerated"), "%s", out);
  free(out);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM rejects"), 1, "%s", tu_query(db, "SELECT * FROM rejects"));
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM rejects WHERE record_no = 2 AND reason = 'input shape: bond out "
                                "of bounds' AND atom = 3 AND detail LIKE 'bond O3-H9 is 9000.00 Å (%'"),
               1, "%s", tu_query(db, "SELECT reason, atom, detail FROM rejects"));
  cr_assert_str_eq(tu_query(db, "SELECT name, coords_from, shape FROM molecules"), "ethanol|input|ok\n");
  char *ethanol0 = tu_query(db, "SELECT id, mol_hash FROM molecules WHERE name = 'ethanol'");
  /* and the report counts it */
  cr_assert_eq(tu_se3(&out, "report %s/work -o - --no-depict", dir), 0, "%s", out);
  cr_assert(strstr(out, "3D shapes: 0 fixed after the bounds check (every bond, angle and aromatic ring: "
                        "chem/shape.h), 1 refused; 0 input shapes regenerated"),
            "%s", out);
  free(out);

  /* regenerate: the file read again, the record stored with a generated
   * shape; ethanol as it was */
  free(workflow(dir, sdf, ", input_shape: regenerate"));
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  cr_assert(strstr(out, "ingest: changed, read again: in.sdf"), "%s", out);
  cr_assert(strstr(out, "3D shapes: 0 fixed after the bounds check, 0 refused, 1 input shape regenerated"), "%s", out);
  free(out);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM rejects"), 0);
  cr_assert_str_eq(tu_query(db, "SELECT name, coords_from, shape FROM molecules ORDER BY record_no"),
                   "ethanol|input|ok\nstretched|gen3d|regenerated\n");
  cr_assert_str_eq(tu_query(db, "SELECT id, mol_hash FROM molecules WHERE name = 'ethanol'"), ethanol0,
                   "the molecule within bounds changed");
  struct mol m;
  stored_mol(db, "stretched", &m);
  cr_assert_eq(m.n_atoms, 9);
  cr_assert_eq(mol_shape_check(&m, SHAPE_TOL_GENERATED, SHAPE_PLANAR_TOL, NULL, NULL), 0,
               "the generated shape is out of bounds");
  double longest = 0;
  for (int b = 0; b < m.n_bonds; b++) {
    const struct mol_atom *x = &m.atoms[m.bonds[b].a], *y = &m.atoms[m.bonds[b].b];
    longest = fmax(longest, sqrt(pow(x->x - y->x, 2) + pow(x->y - y->y, 2) + pow(x->z_ - y->z_, 2)));
  }
  cr_assert_lt(longest, 1.6, "a bond of %.2f Å", longest);
  mol_free(&m);
  cr_assert_eq(tu_se3(&out, "report %s/work -o - --no-depict", dir), 0, "%s", out);
  cr_assert(strstr(out, "0 refused; 1 input shape regenerated"), "%s", out);
  free(out);
  /* and a run with the same setting has nothing to do */
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  cr_assert(strstr(out, "ingest: nothing to do"), "%s", out);
  free(out);
  free(ethanol0);
  free(wf);
  free(sdf);
  free(dir);
}

/* `check`: a value outside reject | regenerate refused naming the allowed
 * ones; regenerate beside gen3d: never refused naming both keys (exit 2);
 * regenerate under coordinates: input accepted and printed resolved. */
Test(ingest_shape, check_validates_the_key) {
  char *dir = tu_tmpdir("ingest_shape_check");
  char *sdf = tu_write(dir, "in.sdf", SDF);
  char *wf = workflow(dir, sdf, ", input_shape: regenerate");
  char *out = NULL;
  cr_assert_eq(tu_se3(&out, "check %s", wf), 0, "%s", out);
  cr_assert(strstr(out, "input_shape: regenerate"), "%s", out);
  free(out);
  cr_assert_eq(tu_se3(&out, "check %s --set stages.ingest.input_shape=keep", wf), 2, "%s", out);
  cr_assert(strstr(out, "stages.ingest.input_shape: must be one of reject, regenerate; got 'keep'"), "%s", out);
  free(out);
  cr_assert_eq(tu_se3(&out, "check %s --set stages.ingest.gen3d=never", wf), 2, "%s", out);
  cr_assert(strstr(out, "stages.ingest.input_shape: regenerate contradicts stages.ingest.gen3d: never"), "%s", out);
  free(out);
  free(wf);
  free(sdf);
  free(dir);
}
