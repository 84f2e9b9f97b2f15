/* The geometry stages through the se3screen binary: graph and basis fill
 * their tables with exactly what the library computes, options reach them,
 * config changes redo the right stages, shards equal one run, and kill -9 at
 * random moments resumes to the same bytes. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chem/graph.h"
#include "chem/mol.h"
#include "common/error.h"
#include "models/basis.h"
#include "tests/testutil.h"

static char *db_in(const char *wd) {
  char *db = NULL;
  cr_assert_geq(asprintf(&db, "%s/screen.db", wd), 0);
  return db;
}

/* Every stored graph equals graph_build on the stored molecule with `go`, and
 * every stored basis equals basis_edge on the graph's edges (after the
 * table's rounding). Returns the number of molecules checked. */
static int check_against_library(const char *db_path, const struct graph_opts *go, int max_degree,
                                 enum basis_dtype dt) {
  sqlite3 *db;
  cr_assert_eq(sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  sqlite3_stmt *st;
  cr_assert_eq(sqlite3_prepare_v2(db,
                                  "SELECT m.id, m.mol, g.graph, g.n_nodes, g.n_edges, b.basis, b.n_edges, b.dtype "
                                  "FROM molecules m JOIN graphs g ON g.mol_id=m.id JOIN bases b ON b.mol_id=m.id "
                                  "ORDER BY m.id",
                                  -1, &st, NULL),
               SQLITE_OK, "%s", sqlite3_errmsg(db));
  struct basis_plan bp;
  cr_assert_eq(basis_plan_init(&bp, max_degree), 0);
  float *want = malloc(bp.per_edge * sizeof *want);
  uint8_t *enc = malloc(bp.per_edge * 4);
  const char *dt_name[] = {"fp32", "fp16", "bf16"};
  struct se3_error e;
  int n = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    long long id = sqlite3_column_int64(st, 0);
    struct mol m;
    struct graph g;
    mol_init(&m);
    graph_init(&g);
    cr_assert_eq(mol_from_blob(sqlite3_column_blob(st, 1), (size_t)sqlite3_column_bytes(st, 1), &m, &e), 0, "%s",
                 se3_error_str(&e).s);
    cr_assert_eq(graph_build(&m, go, &g, &e), 0, "%s", se3_error_str(&e).s);
    uint8_t *blob;
    size_t len;
    cr_assert_eq(graph_to_blob(&g, &blob, &len), 0);
    cr_assert_eq((size_t)sqlite3_column_bytes(st, 2), len, "molecule %lld: graph blob size", id);
    cr_assert_eq(memcmp(sqlite3_column_blob(st, 2), blob, len), 0, "molecule %lld: graph blob differs", id);
    cr_assert_eq(sqlite3_column_int(st, 3), g.n_nodes);
    cr_assert_eq(sqlite3_column_int(st, 4), g.n_edges);
    cr_assert_eq(sqlite3_column_int(st, 6), g.n_edges);
    cr_assert_str_eq((const char *)sqlite3_column_text(st, 7), dt_name[dt]);
    free(blob);
    struct basis_blob bb;
    cr_assert_eq(basis_blob_parse(sqlite3_column_blob(st, 5), (size_t)sqlite3_column_bytes(st, 5), &bb, &e), 0,
                 "molecule %lld: %s", id, se3_error_str(&e).s);
    cr_assert_eq(bb.n_edges, (uint32_t)g.n_edges);
    cr_assert_eq(bb.max_degree, max_degree);
    cr_assert_eq(bb.dtype, dt);
    size_t vs = basis_dtype_size(dt);
    for (int e = 0; e < g.n_edges; e++) {
      basis_edge(&bp, g.rel_pos + 3 * e, want);
      basis_encode(dt, want, bp.per_edge, enc);
      cr_assert_eq(memcmp(enc, bb.data + (size_t)e * bp.per_edge * vs, bp.per_edge * vs), 0,
                   "molecule %lld edge %d: stored basis differs", id, e);
    }
    graph_free(&g);
    mol_free(&m);
    n++;
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  basis_plan_free(&bp);
  free(want);
  free(enc);
  return n;
}

/* The bundled quickstart workflow: ingest -> graph -> basis fills all three
 * tables, with what the library computes, and status shows their sizes.
 * (--until basis: test_quickstart runs the whole workflow.) */
Test(geometry, quickstart_fills_all_three_tables) {
  char *dir = tu_tmpdir("geometry_quickstart");
  char *out = NULL;
  /* one conformer a molecule: a graph row is then one graph, rebuilt here
   * from the molecule (test_conformers checks the rows of several) */
  int rc = tu_se3(&out, "run %s --workdir %s/work --until basis --set ingest.conformers=1",
                  tu_src("workflows/quickstart.yaml"), dir);
  cr_assert_eq(rc, 0, "%s", out);
  free(out);
  char wd[1024];
  snprintf(wd, sizeof wd, "%s/work", dir);
  char *db = db_in(wd);
  long long n_mol = tu_query_int(db, "SELECT count(*) FROM molecules");
  cr_assert_gt(n_mol, 70);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM graphs"), n_mol);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM bases"), n_mol);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM rejects WHERE stage<>'ingest'"), 0);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM graphs g JOIN molecules m ON m.id=g.mol_id "
                                "WHERE g.n_nodes<>m.n_atoms"),
               0);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM graphs g JOIN bases b USING(mol_id) WHERE g.n_edges<>b.n_edges"),
               0);
  /* the workflow's settings: radius+bonds, 5 Å, no neighbour cap, default
   * node features, bases up to degree 1 */
  const uint8_t el[] = {1, 6, 7, 8, 9, 15, 16, 17, 35, 53};
  struct graph_opts go = {.cutoff = 5.0,
                          .max_neighbors = 0,
                          .edges = GRAPH_EDGES_RADIUS_BONDS,
                          .elements = el,
                          .n_elements = 10,
                          .with_other = 1,
                          .with_charge = 1};
  cr_assert_eq(check_against_library(db, &go, 1, BASIS_FP32), n_mol);

  rc = tu_se3(&out, "status %s/screen.db", wd);
  cr_assert_eq(rc, 0, "%s", out);
  cr_assert(strstr(out, "bytes/mol"), "%s", out);
  char want[64];
  snprintf(want, sizeof want, " %.0f ",
           (double)tu_query_int(db, "SELECT sum(length(basis)) FROM bases") / (double)n_mol);
  cr_assert(strstr(out, want), "status does not show the bases' bytes per molecule (%s):\n%s", want, out);
  free(out);
  /* A second run has nothing to do. */
  rc = tu_se3(&out, "run %s --workdir %s --until basis --set ingest.conformers=1", tu_src("workflows/quickstart.yaml"),
              wd);
  cr_assert_eq(rc, 0, "%s", out);
  cr_assert(strstr(out, "basis: nothing to do"), "%s", out);
  free(out);
  free(db);
  free(dir);
}

static char *write_wf(const char *dir, const char *input, const char *ingest, const char *graph, const char *basis) {
  char yaml[2048];
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: work\nrun: {chunk_size: 16, progress: lines, progress_interval_s: 60}\n"
           "sets:\n  s:\n    - {path: %s}\nstages:\n  ingest: {%s}\n  graph: {%s}\n  basis: {%s}\n",
           input, ingest, graph, basis);
  return tu_write(dir, "wf.yaml", yaml);
}

/* Runs the workflow written by write_wf, which must succeed; returns the
 * path of its database (dir/work/screen.db). */
static char *run_ok(const char *dir, const char *wf) {
  char *out = NULL;
  int rc = tu_se3(&out, "run %s", wf);
  cr_assert_eq(rc, 0, "%s", out);
  free(out);
  char wd[1024];
  snprintf(wd, sizeof wd, "%s/work", dir);
  return db_in(wd);
}

/* Non-default options reach the stored graph and bases: bond edges only,
 * another element list, the atomic number, fp16 at degree 1. */
Test(geometry, options_reach_the_tables) {
  char *dir = tu_tmpdir("geometry_options");
  char *wf = write_wf(dir, tu_src("workflows/data/qm9_mini.sdf"), "workers: 1",
                      "edges: bonds, elements: [C, O], other_element: false, charge: false, atomic_number: true",
                      "max_degree: 1, dtype: fp16");
  char *db = run_ok(dir, wf);
  const uint8_t el[] = {6, 8};
  struct graph_opts go = {.edges = GRAPH_EDGES_BONDS, .elements = el, .n_elements = 2, .with_atomic_number = 1};
  long long n = tu_query_int(db, "SELECT count(*) FROM molecules");
  cr_assert_gt(n, 10);
  cr_assert_eq(check_against_library(db, &go, 1, BASIS_FP16), n);
  /* 20-byte header + 34 fp16 values per edge at degree 1 + the 4-byte checksum */
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM bases WHERE length(basis) <> 20 + n_edges * 34 * 2 + 4"), 0);
  free(db);
  free(wf);
  free(dir);
}

/* Molecules without 3D coordinates are rejected by the graph stage with a
 * reason naming their file and record; the others go on. */
Test(geometry, molecules_without_3d_are_rejected_by_name) {
  char *dir = tu_tmpdir("geometry_no3d");
  char *smi = tu_write(dir, "in.smi", "CCO ethanol\nc1ccccc1 benzene\nCC(=O)O acetic\n");
  char *wf = write_wf(dir, smi, "workers: 1, gen3d: never", "edges: bonds", "max_degree: 1");
  char *db = run_ok(dir, wf);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM molecules"), 3);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM graphs"), 0);
  char *why = tu_query(db, "SELECT stage, source_file, record_no, name, reason FROM rejects ORDER BY record_no");
  cr_assert(why);
  cr_assert(strstr(why, "graph|in.smi|1|ethanol|no 3D coordinates"), "%s", why);
  cr_assert(strstr(why, "graph|in.smi|3|acetic|"), "%s", why);
  free(why);
  free(db);
  free(wf);
  free(smi);
  free(dir);
}

/* A changed basis setting redoes only the basis stage; a changed graph
 * setting redoes graph and basis, never ingest; each says so in one line. */
Test(geometry, config_changes_redo_the_right_stages) {
  char *dir = tu_tmpdir("geometry_changes");
  const char *sdf = tu_src("workflows/data/qm9_mini.sdf");
  char *wf = write_wf(dir, sdf, "workers: 1", "edges: radius, cutoff: 4.0", "max_degree: 2");
  char *db = run_ok(dir, wf);
  char *out = NULL;
  char *ingest0 = tu_query(db, "SELECT started, finished FROM stage_chunks WHERE stage='ingest' ORDER BY chunk");
  char *graph0 = tu_query(db, "SELECT mol_id, chunk, mol_hash, n_edges FROM graphs ORDER BY mol_id");
  long long e0 = tu_query_int(db, "SELECT sum(n_edges) FROM graphs");
  long long b0 = tu_query_int(db, "SELECT sum(length(basis)) FROM bases");
  tu_sleep(1.1); /* timestamps have 1 s resolution */

  free(wf);
  wf = write_wf(dir, sdf, "workers: 1", "edges: radius, cutoff: 4.0", "max_degree: 2, dtype: bf16");
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  cr_assert(strstr(out, "basis: the configuration changed"), "%s", out);
  cr_assert_null(strstr(out, "graph: the configuration changed"), "%s", out);
  free(out);
  char *graph1 = tu_query(db, "SELECT mol_id, chunk, mol_hash, n_edges FROM graphs ORDER BY mol_id");
  cr_assert_str_eq(graph1, graph0, "the graph stage was redone");
  long long n = tu_query_int(db, "SELECT count(*) FROM bases");
  cr_assert_eq(tu_query_int(db, "SELECT sum(length(basis)) FROM bases"), (b0 - 24 * n) / 2 + 24 * n,
               "bf16 values are half the size of fp32 ones");
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM bases WHERE dtype<>'bf16'"), 0);

  free(wf);
  wf = write_wf(dir, sdf, "workers: 1", "edges: radius, cutoff: 2.0", "max_degree: 2, dtype: bf16");
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  cr_assert(strstr(out, "graph: the configuration changed since the last run; discarding its"), "%s", out);
  cr_assert(strstr(out, "basis: what it is made from changed since the last run; discarding its"), "%s", out);
  free(out);
  cr_assert_lt(tu_query_int(db, "SELECT sum(n_edges) FROM graphs"), e0);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM graphs g JOIN bases b USING(mol_id) WHERE g.n_edges<>b.n_edges"),
               0);
  char *ingest1 = tu_query(db, "SELECT started, finished FROM stage_chunks WHERE stage='ingest' ORDER BY chunk");
  cr_assert_str_eq(ingest1, ingest0, "ingest was redone");
  free(ingest0);
  free(ingest1);
  free(graph0);
  free(graph1);
  free(db);
  free(wf);
  free(dir);
}

/* Rows of the geometry tables and ledger that differ between two databases
 * (both directions), compared in SQL: blobs byte for byte. */
static long long n_differing(const char *a, const char *b) {
  char sql[2048];
  long long total = 0;
  const char *tables[] = {"graphs", "bases"};
  for (int t = 0; t < 2; t++) {
    snprintf(sql, sizeof sql,
             "ATTACH '%s' AS o; SELECT (SELECT count(*) FROM (SELECT * FROM main.%s EXCEPT SELECT * FROM o.%s)) + "
             "(SELECT count(*) FROM (SELECT * FROM o.%s EXCEPT SELECT * FROM main.%s))",
             b, tables[t], tables[t], tables[t], tables[t]);
    char *out = NULL;
    int rc = tu_sh(&out, "sqlite3 -readonly '%s' \"%s\"", a, sql);
    cr_assert_eq(rc, 0, "%s", out);
    total += atoll(out);
    free(out);
  }
  char *x = tu_query(a, "SELECT stage, chunk, config_hash, n_ok, n_rejected FROM stage_chunks ORDER BY stage, chunk");
  char *y = tu_query(b, "SELECT stage, chunk, config_hash, n_ok, n_rejected FROM stage_chunks ORDER BY stage, chunk");
  if (strcmp(x, y)) total++;
  free(x);
  free(y);
  return total;
}

/* QM7 (7,100 molecules): kill -9 at random moments during the graph stage and
 * during the basis stage; the resumed tables equal an uninterrupted run's. */
Test(geometry, kill9_during_graph_and_basis_resumes_byte_identical) {
  if (!tu_have_shared()) cr_skip_test("../shared/data is absent");
  char *dir = tu_tmpdir("geometry_kill9");
  cr_assert_eq(tu_sh(NULL, "tar xzf %s -C %s gdb7.sdf", tu_shared("data/qm7/gdb7.tar.gz"), dir), 0);
  char sdf[1024], yaml[2048];
  snprintf(sdf, sizeof sdf, "%s/gdb7.sdf", dir);
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: ref\nrun: {chunk_size: 100, progress: none}\nsets:\n  qm7:\n    - {path: %s}\n"
           /* all of QM7: with its 864 records that carry M  RAD marks */
           "stages:\n  ingest: {workers: 2, allow_radicals: true, coordinates: input}\n"
           "  graph: {edges: radius+bonds, cutoff: 2.2, max_neighbors: 6}\n"
           "  basis: {max_degree: 2, dtype: fp16}\n",
           sdf);
  char *wf = tu_write(dir, "wf.yaml", yaml);
  char ref[1024], wd[1024], log[1024];
  snprintf(ref, sizeof ref, "%s/ref", dir);
  snprintf(wd, sizeof wd, "%s/killed", dir);
  snprintf(log, sizeof log, "%s/log.txt", dir);
  char *out = NULL;
  cr_assert_eq(tu_se3(&out, "run %s --stage ingest", wf), 0, "%s", out);
  free(out);
  /* The killed runs start from the same ingest. */
  cr_assert_eq(tu_sh(NULL, "mkdir -p %s && cp %s/screen.db %s/", wd, ref, wd), 0);
  /* The killed runs' starting state, restored if they must begin again. */
  char start[1100], reset[3300];
  snprintf(start, sizeof start, "%s/start", dir);
  snprintf(reset, sizeof reset, "rm -rf %s && cp -r %s %s", wd, start, wd);
  cr_assert_eq(tu_sh(NULL, "cp -r %s %s", wd, start), 0);
  double t0 = tu_now();
  cr_assert_eq(tu_se3(&out, "run %s --stage graph", wf), 0, "%s", out);
  free(out);
  double t_graph = tu_now() - t0;
  t0 = tu_now();
  cr_assert_eq(tu_se3(&out, "run %s --stage basis", wf), 0, "%s", out);
  free(out);
  double t_basis = tu_now() - t0;
  cr_log_info("uninterrupted: graph %.2f s, basis %.2f s", t_graph, t_basis);

  char *argv[] = {"se3screen", "run", wf, "--workdir", wd, "--stage", "graph", NULL};
  char kdb[1100];
  snprintf(kdb, sizeof kdb, "%s/screen.db", wd);
  int kg = tu_kills_mid_way(log, argv, 0.05, 0.05 + 0.3 * t_graph, 4, reset, kdb, "graph");
  cr_assert_eq(tu_se3(&out, "run %s --workdir %s --stage graph", wf, wd), 0, "%s", out);
  free(out);
  /* The basis kills start from the finished graph stage. */
  cr_assert_eq(tu_sh(NULL, "rm -rf %s && cp -r %s %s", start, wd, start), 0);
  argv[6] = "basis";
  int kb = tu_kills_mid_way(log, argv, 0.05, 0.05 + 0.3 * t_basis, 4, reset, kdb, "basis");
  cr_assert_eq(tu_se3(&out, "run %s --workdir %s", wf, wd), 0, "%s", out);
  free(out);
  cr_log_info("%d kills during graph, %d during basis", kg, kb);
  cr_assert_geq(kg, 4, "only %d graph runs were killed mid-way", kg);
  cr_assert_geq(kb, 4, "only %d basis runs were killed mid-way", kb);

  char *a = db_in(ref), *b = db_in(wd);
  /* (6,995 of QM7's 7,169: 112 of its radical records get a hydrogen placed
   * on top of another atom and are refused for it, issue 67) */
  cr_assert_gt(tu_query_int(a, "SELECT count(*) FROM bases"), 6800);
  cr_assert_eq(n_differing(a, b), 0, "the resumed tables differ from the uninterrupted run's");
  free(a);
  free(b);
  free(wf);
  tu_sh(NULL, "rm -rf '%s'", dir); /* a few hundred MB */
  free(dir);
}

/* Sharded graph and basis stages read screen.db, write their shard
 * databases, and after merge equal one unsharded run; a shard asked to run
 * before its upstream stage is finished says what to do. */
Test(geometry, shards_and_merge_equal_one_run) {
  char *dir = tu_tmpdir("geometry_shards");
  char yaml[1024];
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: ref\nrun: {chunk_size: 8, progress: none}\nsets:\n  s:\n    - {path: %s}\n"
           "stages:\n  ingest: {workers: 1}\n  graph: {edges: radius+bonds, cutoff: 3.0}\n"
           "  basis: {max_degree: 2, dtype: fp16}\n",
           tu_src("workflows/data/qm9_mini.sdf"));
  char *wf = tu_write(dir, "wf.yaml", yaml);
  char *out = NULL;
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  free(out);
  char wd[1024];
  snprintf(wd, sizeof wd, "%s/sharded", dir);
  /* basis before graph: refused, naming the missing stage */
  cr_assert_eq(tu_se3(&out, "run %s --workdir %s --stage ingest", wf, wd), 0, "%s", out);
  free(out);
  int rc = tu_se3(&out, "run %s --workdir %s --stage basis --shard 0/2", wf, wd);
  cr_assert_eq(rc, 1, "%s", out);
  cr_assert(strstr(out, "basis reads the graph stage's results"), "%s", out);
  free(out);
  for (int i = 0; i < 3; i++) {
    rc = tu_se3(&out, "run %s --workdir %s --stage graph --shard %d/3", wf, wd, i);
    cr_assert_eq(rc, 0, "%s", out);
    free(out);
  }
  /* not merged yet: basis refuses */
  rc = tu_se3(&out, "run %s --workdir %s --stage basis", wf, wd);
  cr_assert_eq(rc, 1, "%s", out);
  cr_assert(strstr(out, "basis reads the graph stage's results"), "%s", out);
  free(out);
  cr_assert_eq(tu_se3(&out, "merge %s/screen.db", wd), 0, "%s", out);
  free(out);
  cr_assert_eq(tu_sh(NULL, "rm -rf %s/shards", wd), 0);
  for (int i = 0; i < 2; i++) {
    rc = tu_se3(&out, "run %s --workdir %s --stage basis --shard %d/2", wf, wd, i);
    cr_assert_eq(rc, 0, "%s", out);
    free(out);
  }
  cr_assert_eq(tu_se3(&out, "merge %s/screen.db", wd), 0, "%s", out);
  free(out);
  char ref_db[1100], db[1100];
  snprintf(ref_db, sizeof ref_db, "%s/ref/screen.db", dir);
  snprintf(db, sizeof db, "%s/screen.db", wd);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM bases"), tu_query_int(ref_db, "SELECT count(*) FROM molecules"));
  cr_assert_eq(n_differing(ref_db, db), 0, "sharded + merged differs from one run");
  /* and an unsharded run afterwards has nothing to do */
  cr_assert_eq(tu_se3(&out, "run %s --workdir %s", wf, wd), 0, "%s", out);
  cr_assert(strstr(out, "basis: nothing to do"), "%s", out);
  free(out);
  free(wf);
  free(dir);
}

/* A molecule whose bases would not fit in one SQLite value is rejected with
 * a message saying what to change, and the other molecules get their bases. */
Test(geometry, too_many_edges_for_one_value_is_a_reject) {
  char *dir = tu_tmpdir("geometry_toobig");
  /* 500 unbonded carbons on a 1 Å grid: 249,500 edges within 100 Å, whose
   * degree-3 fp32 bases would take 1.09 GB (SQLite's limit is 1e9 bytes). */
  size_t cap = 64 * 1024, n = 0;
  char *sdf = malloc(cap);
  n += (size_t)snprintf(sdf + n, cap - n, "grid\n  test\n\n500  0  0  0  0  0  0  0  0  0999 V2000\n");
  for (int i = 0; i < 500; i++)
    n += (size_t)snprintf(sdf + n, cap - n, "%10.4f%10.4f%10.4f C   0  0  0  0  0  0  0  0  0  0  0  0\n",
                          (double)(i % 8), (double)(i / 8 % 8), (double)(i / 64));
  n += (size_t)snprintf(sdf + n, cap - n, "M  END\n$$$$\n");
  char *all = NULL;
  char *small = tu_read(tu_src("tests/data/chem/ethanol_benzene.sdf"), NULL);
  cr_assert(small);
  cr_assert_geq(asprintf(&all, "%s%s", sdf, small), 0);
  char *path = tu_write(dir, "in.sdf", all);
  char *wf = write_wf(dir, path, "workers: 1, add_hydrogens: false, dedupe: none, fragments: keep, coordinates: input",
                      "edges: radius, cutoff: 100, max_neighbors: 0", "max_degree: 3, dtype: fp32");
  char *db = run_ok(dir, wf);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM graphs"), 3);
  cr_assert_eq(tu_query_int(db, "SELECT n_edges FROM graphs WHERE n_nodes=500"), 500 * 499);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM bases"), 2);
  char *why = tu_query(db, "SELECT record_no, reason FROM rejects WHERE stage='basis'");
  cr_assert(why && strstr(why, "1|the bases of its 249500 edges would take 1090 MB"), "%s", why);
  cr_assert(strstr(why, "lower stages.graph.cutoff or max_neighbors"), "%s", why);
  free(why);
  free(db);
  free(wf);
  free(path);
  free(all);
  free(small);
  free(sdf);
  free(dir);
}
