/* Stored data is verified: a byte flipped inside a stored blob (coordinates,
 * graph, basis) is found by `se3screen verify`, which names table and row and
 * exits 1, and the stage that reads the blob next refuses it naming table and
 * row (a reject, or a failed stage) instead of carrying garbage on, as it
 * did before: an atom at -9.75e34 Å in hits.sdf. Blobs written before the
 * checksum existed (version 1) are still read and reported as unchecked. A
 * stored shape out of the bounds of chem/shape.h is a warning, not damage. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chem/mol.h"
#include "common/error.h"
#include "tests/testutil.h"

/* The bundled QM9 records as set `train` (and more sets when given), with the
 * given stages. */
static char *write_wf_sets(const char *dir, const char *more_sets, const char *stages) {
  char yaml[2048];
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: work\nrun: {progress: none}\n"
           "sets:\n  train:\n    - path: %s\n      labels_csv: {path: %s, join: mol_id, columns: [gap]}\n%s"
           "stages:\n  ingest: {workers: 1}\n  graph: {edges: radius+bonds, cutoff: 4.0}\n%s",
           tu_src("workflows/data/qm9_mini.sdf"), tu_src("workflows/data/qm9_mini.sdf.csv"), more_sets, stages);
  return tu_write(dir, "wf.yaml", yaml);
}

static char *write_wf(const char *dir, const char *stages) { return write_wf_sets(dir, "", stages); }

/* Changes one stored blob in place with SQLite (as a bad disk would): byte
 * `offset` (from the end when negative) XOR `mask`. */
static void flip_byte(const char *db, const char *table, const char *key, const char *column, long long id, long offset,
                      unsigned mask) {
  sqlite3 *h = NULL;
  cr_assert_eq(sqlite3_open_v2(db, &h, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
  char sql[256];
  snprintf(sql, sizeof sql, "SELECT %s FROM %s WHERE %s = %lld", column, table, key, id);
  sqlite3_stmt *st = NULL;
  cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK, "%s", sqlite3_errmsg(h));
  cr_assert_eq(sqlite3_step(st), SQLITE_ROW, "no %s row %s=%lld", table, key, id);
  int n = sqlite3_column_bytes(st, 0);
  uint8_t *b = malloc((size_t)n);
  memcpy(b, sqlite3_column_blob(st, 0), (size_t)n);
  sqlite3_finalize(st);
  long at = offset >= 0 ? offset : n + offset;
  cr_assert(at >= 0 && at < n);
  b[at] ^= (uint8_t)mask;
  snprintf(sql, sizeof sql, "UPDATE %s SET %s = ?1 WHERE %s = %lld", table, column, key, id);
  cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
  sqlite3_bind_blob(st, 1, b, n, SQLITE_TRANSIENT);
  cr_assert_eq(sqlite3_step(st), SQLITE_DONE);
  sqlite3_finalize(st);
  sqlite3_close(h);
  free(b);
}

/* Byte 16 + 16 k + 4 + 3 of a molecule blob: the high byte of atom k's x. */
#define MOL_X_HIGH(k) (16 + 16 * (k) + 7)

/* A flipped coordinate: verify exits 1 naming molecules row and the checksum;
 * the graph stage then rejects that molecule with the same words and builds
 * the others. (Before: verify did not exist and the graph was built from an
 * atom thrown 1e34 Å away.) */
Test(verify, flipped_coordinate_found_and_rejected_downstream) {
  char *dir = tu_tmpdir("verify_mol");
  char *wf = write_wf(dir, "");
  char *out = NULL, db[1200], wd[1100];
  snprintf(wd, sizeof wd, "%s/work", dir);
  snprintf(db, sizeof db, "%s/screen.db", wd);
  cr_assert_eq(tu_se3(&out, "run %s --stage ingest", wf), 0, "%s", out);
  free(out);
  long long n = tu_query_int(db, "SELECT count(*) FROM molecules");
  cr_assert_gt(n, 5);
  long long id = tu_query_int(db, "SELECT id FROM molecules ORDER BY id LIMIT 1 OFFSET 3");
  cr_assert_eq(tu_se3(&out, "verify %s", wd), 0, "%s", out);
  char want[256];
  snprintf(want, sizeof want, "molecules  %lld rows checked, 0 damaged", n);
  cr_assert(strstr(out, want), "%s", out);
  cr_assert(strstr(out, "integrity_check ok"), "%s", out);
  free(out);

  flip_byte(db, "molecules", "id", "mol", id, MOL_X_HIGH(0), 0x40);
  char *sum0 = NULL, *sum1 = NULL;
  tu_sh(&sum0, "sha256sum < %s", db);
  int rc = tu_se3(&out, "verify %s", db);
  cr_assert_eq(rc, 1, "%s", out);
  snprintf(want, sizeof want, "molecules row id=%lld: molecule blob checksum mismatch (stored 0x", id);
  cr_assert(strstr(out, want), "'%s' not in:\n%s", want, out);
  snprintf(want, sizeof want, "molecules  %lld rows checked, 1 damaged", n);
  cr_assert(strstr(out, want), "%s", out);
  cr_assert(strstr(out, "DAMAGED: 1 problem found"), "%s", out);
  free(out);
  tu_sh(&sum1, "sha256sum < %s", db);
  cr_assert_str_eq(sum0, sum1, "verify changed the database");
  free(sum0);
  free(sum1);

  /* downstream: the graph stage rejects that molecule, naming table and row */
  rc = tu_se3(&out, "run %s --until graph", wf);
  cr_assert_eq(rc, 0, "%s", out);
  free(out);
  char q[512];
  snprintf(q, sizeof q,
           "SELECT count(*) FROM rejects WHERE stage='graph' AND reason LIKE "
           "'molecules row id=%lld: molecule blob checksum mismatch (stored 0x%%, computed 0x%%)'",
           id);
  cr_assert_eq(tu_query_int(db, q), 1, "%s", tu_query(db, "SELECT stage, reason FROM rejects"));
  snprintf(q, sizeof q, "SELECT count(*) FROM graphs WHERE mol_id=%lld", id);
  cr_assert_eq(tu_query_int(db, q), 0, "a graph was built from the damaged coordinates");
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM graphs"), n - 1);
  free(wf);
  free(dir);
}

/* A coordinate flipped after scoring: the rank stage refuses to write hits.sdf
 * from it (naming molecules row) rather than write an atom at 1e34 Å. */
Test(verify, flipped_coordinate_never_reaches_hits_sdf) {
  char *dir = tu_tmpdir("verify_rank");
  char *wf = write_wf(dir, "  train: {ensemble: 1, target: gap, epochs: 1, batch_size: 4}\n  score: {set: train}\n"
                           "  rank: {top: 50, outputs: [hits.csv, hits.sdf]}\n");
  char *out = NULL, db[1200], wd[1100], sdf[1200];
  snprintf(wd, sizeof wd, "%s/work", dir);
  snprintf(db, sizeof db, "%s/screen.db", wd);
  snprintf(sdf, sizeof sdf, "%s/hits.sdf", wd);
  cr_assert_eq(tu_se3(&out, "run %s --until score", wf), 0, "%s", out);
  free(out);
  long long id = tu_query_int(db, "SELECT mol_id FROM scores ORDER BY score DESC LIMIT 1");
  cr_assert_gt(id, 0);
  flip_byte(db, "molecules", "id", "mol", id, MOL_X_HIGH(0), 0x40);
  int rc = tu_se3(&out, "run %s", wf);
  char want[256];
  snprintf(want, sizeof want, "molecules row id=%lld: molecule blob checksum mismatch", id);
  cr_assert_eq(rc, 1, "rank wrote hits from a damaged molecule:\n%s", out);
  cr_assert(strstr(out, want), "'%s' not in:\n%s", want, out);
  free(out);
  cr_assert_neq(access(sdf, F_OK), 0, "hits.sdf was written");
  free(wf);
  free(dir);
}

/* A graph flipped after training: scoring rejects that molecule naming graphs
 * row (no score from a changed graph) and scores the others. */
Test(verify, flipped_graph_is_rejected_by_score) {
  char *dir = tu_tmpdir("verify_score");
  char sets[1024];
  snprintf(sets, sizeof sets, "  library:\n    - {path: %s}\n", tu_src("workflows/data/delaney_first60.csv"));
  char *wf = write_wf_sets(dir, sets, "  train: {ensemble: 1, target: gap, epochs: 1, batch_size: 4}\n  score: {set: library}\n");
  char *out = NULL, db[1200], wd[1100];
  snprintf(wd, sizeof wd, "%s/work", dir);
  snprintf(db, sizeof db, "%s/screen.db", wd);
  cr_assert_eq(tu_se3(&out, "run %s --until train", wf), 0, "%s", out);
  free(out);
  long long n = tu_query_int(db, "SELECT count(*) FROM graphs g JOIN molecules m ON m.id = g.mol_id "
                                 "WHERE m.set_name = 'library'");
  cr_assert_gt(n, 5);
  long long gid = tu_query_int(db, "SELECT g.mol_id FROM graphs g JOIN molecules m ON m.id = g.mol_id "
                                   "WHERE m.set_name = 'library' ORDER BY 1 LIMIT 1 OFFSET 4");
  flip_byte(db, "graphs", "mol_id", "graph", gid, -8, 0x01);
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  free(out);
  char q[512];
  snprintf(q, sizeof q,
           "SELECT count(*) FROM rejects WHERE stage='score' AND reason LIKE "
           "'graphs row mol_id=%lld: graph blob checksum mismatch (stored 0x%%'",
           gid);
  cr_assert_eq(tu_query_int(db, q), 1, "%s", tu_query(db, "SELECT stage, reason FROM rejects"));
  snprintf(q, sizeof q, "SELECT count(*) FROM scores WHERE mol_id=%lld", gid);
  cr_assert_eq(tu_query_int(db, q), 0, "a score was computed from the damaged graph");
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM scores"), n - 1);
  free(wf);
  free(dir);
}

/* A flipped bit in a stored graph: verify names graphs row; training (which
 * reads every graph of its set) fails naming it instead of learning from a
 * silently changed feature. The bases table likewise. */
Test(verify, flipped_graph_and_basis_found) {
  char *dir = tu_tmpdir("verify_graph");
  char *wf = write_wf(dir, "  basis: {max_degree: 1, dtype: fp16}\n  train: {ensemble: 1, target: gap, epochs: 1, batch_size: 4}\n");
  char *out = NULL, db[1200], wd[1100];
  snprintf(wd, sizeof wd, "%s/work", dir);
  snprintf(db, sizeof db, "%s/screen.db", wd);
  cr_assert_eq(tu_se3(&out, "run %s --until basis", wf), 0, "%s", out);
  free(out);
  long long n = tu_query_int(db, "SELECT count(*) FROM bases");
  cr_assert_gt(n, 5);
  cr_assert_eq(tu_se3(&out, "verify %s", db), 0, "%s", out);
  free(out);
  long long gid = tu_query_int(db, "SELECT mol_id FROM graphs ORDER BY mol_id LIMIT 1 OFFSET 2");
  long long bid = tu_query_int(db, "SELECT mol_id FROM bases ORDER BY mol_id LIMIT 1 OFFSET 5");
  /* the lowest bit of the last relative position's z: a finite float still,
   * which the decoder alone would take for good */
  flip_byte(db, "graphs", "mol_id", "graph", gid, -8, 0x01);
  flip_byte(db, "bases", "mol_id", "basis", bid, 40, 0x01);
  int rc = tu_se3(&out, "verify %s --max-listed 5", wd);
  cr_assert_eq(rc, 1, "%s", out);
  char want[256];
  snprintf(want, sizeof want, "graphs row mol_id=%lld: graph blob checksum mismatch (stored 0x", gid);
  cr_assert(strstr(out, want), "'%s' not in:\n%s", want, out);
  snprintf(want, sizeof want, "bases row mol_id=%lld: basis blob checksum mismatch (stored 0x", bid);
  cr_assert(strstr(out, want), "'%s' not in:\n%s", want, out);
  cr_assert(strstr(out, "DAMAGED: 2 problems found"), "%s", out);
  free(out);
  /* the listing is capped */
  rc = tu_se3(&out, "verify %s --max-listed 1", wd);
  cr_assert_eq(rc, 1, "%s", out);
  cr_assert(strstr(out, "... and 1 more"), "%s", out);
  free(out);
  /* downstream: training names the damaged graph */
  rc = tu_se3(&out, "run %s", wf);
  cr_assert_eq(rc, 1, "training went on with a damaged graph:\n%s", out);
  snprintf(want, sizeof want, "graphs row mol_id=%lld: graph blob checksum mismatch", gid);
  cr_assert(strstr(out, want), "'%s' not in:\n%s", want, out);
  free(out);
  free(wf);
  free(dir);
}

/* A molecule blob of version 1 (no checksum, as written before) is still read
 * by the stages, and verify counts it as unchecked, not damaged. */
Test(verify, version_1_blobs_are_read_and_reported_unchecked) {
  char *dir = tu_tmpdir("verify_v1");
  char *wf = write_wf(dir, "");
  char *out = NULL, db[1200], wd[1100];
  snprintf(wd, sizeof wd, "%s/work", dir);
  snprintf(db, sizeof db, "%s/screen.db", wd);
  cr_assert_eq(tu_se3(&out, "run %s --stage ingest", wf), 0, "%s", out);
  free(out);
  long long id = tu_query_int(db, "SELECT min(id) FROM molecules");
  /* version 1: the version field set to 1 and the 4-byte trailer dropped */
  sqlite3 *h = NULL;
  cr_assert_eq(sqlite3_open_v2(db, &h, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
  sqlite3_stmt *st = NULL;
  char sql[256];
  snprintf(sql, sizeof sql, "SELECT mol FROM molecules WHERE id = %lld", id);
  cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
  cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
  int len = sqlite3_column_bytes(st, 0);
  uint8_t *b = malloc((size_t)len);
  memcpy(b, sqlite3_column_blob(st, 0), (size_t)len);
  sqlite3_finalize(st);
  cr_assert_eq(b[4], 2, "the stored blob is version 2");
  b[4] = 1;
  snprintf(sql, sizeof sql, "UPDATE molecules SET mol = ?1 WHERE id = %lld", id);
  cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
  sqlite3_bind_blob(st, 1, b, len - 4, SQLITE_TRANSIENT);
  cr_assert_eq(sqlite3_step(st), SQLITE_DONE);
  sqlite3_finalize(st);
  sqlite3_close(h);
  free(b);
  cr_assert_eq(tu_se3(&out, "verify %s", db), 0, "%s", out);
  cr_assert(strstr(out, "1 unchecked, old format"), "%s", out);
  free(out);
  cr_assert_eq(tu_se3(&out, "run %s --until graph", wf), 0, "%s", out);
  free(out);
  char q[128];
  snprintf(q, sizeof q, "SELECT count(*) FROM graphs WHERE mol_id=%lld", id);
  cr_assert_eq(tu_query_int(db, q), 1, "the version 1 molecule got no graph");
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM rejects WHERE stage='graph'"), 0);
  free(wf);
  free(dir);
}

/* A stored shape out of bounds in a blob that is otherwise intact (its
 * checksum written anew, as an earlier 3D generator left its stretched
 * rings): verify names the molecule, the conformer and the bond among a few
 * examples, warns that it is not damage and what makes it again, and exits
 * 0: its exit status says whether the files are damaged. Every conformer is
 * checked: the bond stretched is in the second. */
Test(verify, a_stretched_bond_is_reported_but_not_damage) {
  char *dir = tu_tmpdir("verify_shape");
  char *smi = tu_write(dir, "flex.smi", "OCCCCCCO diol\nCCOC(=O)CCCN ester\nCCCCCCCC octane\n");
  char yaml[1024];
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: work\nrun: {progress: none}\nsets:\n  lib:\n    - {path: %s}\n"
           "stages:\n  ingest: {workers: 1, conformers: 2}\n",
           smi);
  char *wf = tu_write(dir, "wf.yaml", yaml);
  char *out = NULL, db[1200], wd[1100];
  snprintf(wd, sizeof wd, "%s/work", dir);
  snprintf(db, sizeof db, "%s/screen.db", wd);
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  free(out);
  cr_assert_eq(tu_se3(&out, "verify %s", wd), 0, "%s", out);
  cr_assert(strstr(out, "shapes     3 molecules checked against the bounds of chem/shape.h, 0 out of bounds"), "%s",
            out);
  cr_assert(!strstr(out, "warning"), "%s", out);
  free(out);

  /* a molecule of two conformers; in its second, a hydrogen moved along its
   * bond to 6 Å from the heavy atom */
  sqlite3 *h = NULL;
  sqlite3_stmt *st = NULL;
  cr_assert_eq(sqlite3_open_v2(db, &h, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
  cr_assert_eq(sqlite3_prepare_v2(h, "SELECT id, name, mol FROM molecules ORDER BY id", -1, &st, NULL), SQLITE_OK);
  struct mol m;
  long long id = -1;
  char name[64] = "";
  struct se3_error e;
  while (id < 0 && sqlite3_step(st) == SQLITE_ROW) {
    cr_assert_eq(mol_from_blob(sqlite3_column_blob(st, 2), (size_t)sqlite3_column_bytes(st, 2), &m, &e), 0, "%s",
                 se3_error_str(&e).s);
    if (m.n_confs >= 1) {
      id = sqlite3_column_int64(st, 0);
      snprintf(name, sizeof name, "%s", (const char *)sqlite3_column_text(st, 1));
    } else {
      mol_free(&m);
    }
  }
  sqlite3_finalize(st);
  cr_assert_geq(id, 0, "no molecule got a second conformer");
  int heavy = -1, hyd = -1;
  for (int b = 0; b < m.n_bonds && hyd < 0; b++) {
    int a = (int)m.bonds[b].a, c = (int)m.bonds[b].b;
    if (m.atoms[a].z == 1 && m.atoms[c].z > 1) heavy = c, hyd = a;
    if (m.atoms[c].z == 1 && m.atoms[a].z > 1) heavy = a, hyd = c;
  }
  cr_assert_geq(hyd, 0, "no hydrogen in the stored molecule");
  double *x = m.confs; /* conformer 2 */
  double d[3], len = 0;
  for (int k = 0; k < 3; k++) {
    d[k] = x[3 * hyd + k] - x[3 * heavy + k];
    len += d[k] * d[k];
  }
  len = sqrt(len);
  for (int k = 0; k < 3; k++)
    x[3 * hyd + k] = x[3 * heavy + k] + 6.0 * d[k] / len;
  uint8_t *blob = NULL;
  size_t blen = 0;
  cr_assert_eq(mol_to_blob(&m, &blob, &blen), 0);
  cr_assert_eq(sqlite3_prepare_v2(h, "UPDATE molecules SET mol = ?1 WHERE id = ?2", -1, &st, NULL), SQLITE_OK);
  sqlite3_bind_blob(st, 1, blob, (int)blen, free);
  sqlite3_bind_int64(st, 2, id);
  cr_assert_eq(sqlite3_step(st), SQLITE_DONE);
  sqlite3_finalize(st);
  sqlite3_close(h);

  cr_assert_eq(tu_se3(&out, "verify %s", wd), 0, "a shape out of bounds taken for damage:\n%s", out);
  char want[256];
  cr_assert_lt(heavy, hyd, "the hydrogens added after the heavy atoms"); /* (a bond is named from its lower atom) */
  snprintf(want, sizeof want,
           "shape out of bounds: molecule %lld '%s' (generated coordinates): bond out of bounds: conformer 2 of 2: "
           "bond %s%d-H%d is 6.00 Å (",
           id, name, mol_element_symbol(m.atoms[heavy].z), heavy + 1, hyd + 1);
  mol_free(&m);
  cr_assert(strstr(out, "3 molecules checked against the bounds of chem/shape.h, 1 out of bounds"), "%s", out);
  cr_assert(strstr(out, want), "'%s' not in:\n%s", want, out);
  cr_assert(strstr(out, "warning: 1 stored shape out of bounds (chem/shape.h): not damage"), "%s", out);
  cr_assert(strstr(out, "`se3screen run` makes such shapes again"), "%s", out);
  cr_assert(strstr(out, "ok: no damage found"), "%s", out);
  free(out);
  free(wf);
  free(smi);
  free(dir);
}

/* Before (hardening IV): an atom at 1e300 (from Vina's output) was stored
 * as inf, `export --poses` wrote `inf` and verify said "no damage found";
 * numbers of +-inf in a table went unnoticed. Now each is damage naming
 * the row or the column, exit 1. */
Test(verify, coordinates_and_numbers_not_finite_are_damage) {
  char *dir = tu_tmpdir("verify_finite");
  char *smi = tu_write(dir, "lib.smi", "OCCCCCCO diol\nCCCCCCCC octane\n");
  char yaml[1024];
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: work\nrun: {progress: none}\nsets:\n  lib:\n    - {path: %s}\n"
           "stages:\n  ingest: {workers: 1, conformers: 2}\n",
           smi);
  char *wf = tu_write(dir, "wf.yaml", yaml);
  char *out = NULL, db[1200], wd[1100];
  snprintf(wd, sizeof wd, "%s/work", dir);
  snprintf(db, sizeof db, "%s/screen.db", wd);
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  free(out);
  cr_assert_eq(tu_se3(&out, "verify %s", wd), 0, "%s", out);
  cr_assert(strstr(out, "with a number not finite") && strstr(out, ", 0 with a number not finite"), "%s", out);
  free(out);
  /* the first molecule's atom 2 at x = inf (conformer 1), the second's last atom in its conformer 2 */
  sqlite3 *h = NULL;
  sqlite3_stmt *st = NULL;
  cr_assert_eq(sqlite3_open_v2(db, &h, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
  long long ids[2];
  for (int k = 0; k < 2; k++) {
    cr_assert_eq(sqlite3_prepare_v2(h, "SELECT id, mol FROM molecules ORDER BY id LIMIT 1 OFFSET ?1", -1, &st, NULL),
                 SQLITE_OK);
    sqlite3_bind_int(st, 1, k);
    cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
    struct mol m;
    struct se3_error e;
    ids[k] = sqlite3_column_int64(st, 0);
    cr_assert_eq(mol_from_blob(sqlite3_column_blob(st, 1), (size_t)sqlite3_column_bytes(st, 1), &m, &e), 0, "%s",
                 se3_error_str(&e).s);
    sqlite3_finalize(st);
    if (k == 0) {
      m.atoms[1].x = INFINITY;
    } else {
      cr_assert_geq(m.n_confs, 1, "octane got one conformer");
      m.confs[3 * m.n_atoms - 1] = -INFINITY;
    }
    uint8_t *blob = NULL;
    size_t blen = 0;
    cr_assert_eq(mol_to_blob(&m, &blob, &blen), 0);
    mol_free(&m);
    cr_assert_eq(sqlite3_prepare_v2(h, "UPDATE molecules SET mol = ?1 WHERE id = ?2", -1, &st, NULL), SQLITE_OK);
    sqlite3_bind_blob(st, 1, blob, (int)blen, free);
    sqlite3_bind_int64(st, 2, ids[k]);
    cr_assert_eq(sqlite3_step(st), SQLITE_DONE);
    sqlite3_finalize(st);
  }
  /* a label of -inf (as a stranger's tool could write one into the database) */
  char sql[200];
  snprintf(sql, sizeof sql, "INSERT INTO labels(mol_id, name, value) VALUES(%lld, 'logS', -9e999)", ids[0]);
  cr_assert_eq(sqlite3_exec(h, sql, NULL, NULL, NULL), SQLITE_OK, "%s", sqlite3_errmsg(h));
  sqlite3_close(h);
  cr_assert_eq(tu_se3(&out, "verify %s", wd), 1, "%s", out);
  char want[200];
  snprintf(want, sizeof want, "molecules row id=%lld: atom 2's coordinates are not finite (inf,", ids[0]);
  cr_assert(strstr(out, want), "'%s' not in:\n%s", want, out);
  snprintf(want, sizeof want, "molecules row id=%lld: conformer 2: atom ", ids[1]);
  cr_assert(strstr(out, want) && strstr(out, "'s coordinates are not finite"), "'%s' not in:\n%s", want, out);
  cr_assert(strstr(out, "labels.value: 1 row holds an infinite number"), "%s", out);
  cr_assert(strstr(out, "DAMAGED: 3 problems found"), "%s", out);
  free(out);
  free(wf);
  free(smi);
  free(dir);
}

Test(verify, usage_errors_exit_2) {
  char *out = NULL;
  cr_assert_eq(tu_se3(&out, "verify"), 2, "%s", out);
  free(out);
  cr_assert_eq(tu_se3(&out, "verify /nonexistent/screen.db"), 2, "%s", out);
  cr_assert(strstr(out, "/nonexistent/screen.db"), "%s", out);
  free(out);
  cr_assert_eq(tu_se3(&out, "verify x.db --frobnicate"), 2, "%s", out);
  free(out);
  cr_assert_eq(tu_se3(&out, "verify --help"), 0, "%s", out);
  cr_assert(strstr(out, "usage: se3screen verify"), "%s", out);
  free(out);
}
