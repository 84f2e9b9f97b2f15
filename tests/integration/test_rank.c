/* The rank stage and `se3screen top` through the binary: the ranked_hits
 * view, hits.csv and hits.sdf agree (hits.sdf read back through Open Babel
 * with the same molecules and SD tags), filters, order, top-k and InChIKey
 * dedupe; the target without models rows (a score-only run's). */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chem/fingerprint.h"
#include "chem/mol.h"
#include "chem/obbridge.h"
#include "chem/records.h"
#include "common/error.h"
#include "stages/score_sql.h"
#include "stages/stage.h"
#include "tests/testutil.h"

/* The ESOL library's copy in dir (malloc'd path): a library given twice
 * lists the file and its copy, as one file listed twice in a set is
 * refused. */
static char *esol_again(const char *dir) {
  char *copy = NULL;
  cr_assert_geq(asprintf(&copy, "%s/delaney_again.csv", dir), 0);
  cr_assert_eq(tu_sh(NULL, "cp '%s' '%s'", tu_src("workflows/data/delaney_first60.csv"), copy), 0);
  return copy;
}

/* Train on the bundled QM9 records, score the ESOL library given twice (so
 * every molecule has a duplicate), rank with `rank`. Returns the workdir. */
static char *screen(const char *name, const char *rank) {
  char *dir = tu_tmpdir(name);
  char yaml[2048];
  const char *esol = tu_src("workflows/data/delaney_first60.csv");
  char *again = esol_again(dir);
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: work\nrun: {progress: none}\n"
           "sets:\n  train:\n    - path: %s\n      labels_csv: {path: %s, join: mol_id, columns: [gap]}\n"
           "  library:\n    - {path: %s}\n    - {path: %s}\n"
           "stages:\n  ingest: {workers: 1, dedupe: none}\n  graph: {edges: radius+bonds, cutoff: 4.0}\n"
           "  train: {ensemble: 1, target: gap, epochs: 2, batch_size: 4}\n  score: {set: library}\n  rank: {%s}\n",
           tu_src("workflows/data/qm9_mini.sdf"), tu_src("workflows/data/qm9_mini.sdf.csv"), esol, again, rank);
  free(again);
  char *wf = tu_write(dir, "wf.yaml", yaml);
  char *out = NULL;
  int rc = tu_se3(&out, "run %s", wf);
  cr_assert_eq(rc, 0, "%s", out);
  free(out);
  free(wf);
  char *wd = NULL;
  cr_assert_geq(asprintf(&wd, "%s/work", dir), 0);
  free(dir);
  return wd;
}

/* One record of hits.sdf against ranked_hits' row of its rank: the same
 * molecule (its InChIKey's connectivity block: Open Babel may see stereo in
 * the 3D coordinates that the input's SMILES left open) and the tags. */
static void check_hit(int i, const struct mol *m, void *ctx) {
  const char *db = ctx;
  char q[256];
  snprintf(q, sizeof q,
           "SELECT substr(inchikey, 1, 14) || '|' || inchikey || '|' || printf('%%.9g', score) || '|' || rank "
           "FROM ranked_hits WHERE rank = %d",
           i + 1);
  char *want = tu_query(db, q), got[512];
  snprintf(got, sizeof got, "%.14s|%s|%s|%s\n", m->inchikey, mol_tag(m, "inchikey"), mol_tag(m, "score"),
           mol_tag(m, "rank"));
  cr_assert_str_eq(got, want, "hits.sdf record %d: %s, the view: %s", i + 1, got, want);
  cr_assert_not_null(mol_tag(m, "source_file"));
  cr_assert_str_eq(mol_tag(m, "target"), "gap", "hits.sdf record %d: the target is a tag of its own", i + 1);
  free(want);
}

/* A score-only run has no models rows (issue 31): rank then ranks the
 * scores' one target, and refuses scores of several targets unless
 * stages.rank.target names one, naming them. Made from the trained run in
 * wd (top: 10) with its models rows deleted; a changed top reruns rank. */
static void rank_without_models(const char *wd) {
  char db[1100], wf[1100];
  snprintf(db, sizeof db, "%s/screen.db", wd);
  snprintf(wf, sizeof wf, "%s/../wf.yaml", wd);
  sqlite3 *h = NULL;
  cr_assert_eq(sqlite3_open(db, &h), SQLITE_OK);
  cr_assert_eq(sqlite3_exec(h, "DELETE FROM models", NULL, NULL, NULL), SQLITE_OK, "%s", sqlite3_errmsg(h));
  char *out = NULL;
  cr_assert_eq(tu_se3(&out, "run %s --stage rank --set stages.rank.top=3", wf), 0, "%s", out);
  free(out);
  char *got = tu_query(db, "SELECT count(*), min(target), max(target) FROM ranks");
  cr_assert_str_eq(got, "3|gap|gap\n", "ranks: %s", got);
  free(got);
  /* scores of two targets: which one is for the workflow to say */
  cr_assert_eq(sqlite3_exec(h, "UPDATE scores SET target = 'other' WHERE mol_id % 2 = 0", NULL, NULL, NULL), SQLITE_OK,
               "%s", sqlite3_errmsg(h));
  cr_assert_gt(tu_query_int(db, "SELECT count(*) FROM scores WHERE target = 'other'"), 0, "the premise");
  cr_assert_neq(tu_se3(&out, "run %s --stage rank --set stages.rank.top=4", wf), 0, "ranked one of two targets:\n%s",
                out);
  cr_assert(strstr(out, "stages.rank.target") && strstr(out, "'gap'") && strstr(out, "'other'"),
            "the refusal names neither the key nor the targets:\n%s", out);
  free(out);
  cr_assert_eq(tu_se3(&out, "run %s --stage rank --set stages.rank.top=4 --set stages.rank.target=other", wf), 0, "%s",
               out);
  free(out);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM ranks WHERE target = 'other'"), 4);
  sqlite3_close(h);
}

/* The fingerprint of molecules row id. */
static void row_fp(sqlite3 *h, long long id, struct fp *out) {
  sqlite3_stmt *st = NULL;
  cr_assert_eq(sqlite3_prepare_v2(h, "SELECT mol FROM molecules WHERE id = ?1", -1, &st, NULL), SQLITE_OK);
  sqlite3_bind_int64(st, 1, id);
  cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
  struct mol m;
  struct se3_error e;
  mol_init(&m);
  cr_assert_eq(mol_from_blob(sqlite3_column_blob(st, 0), (size_t)sqlite3_column_bytes(st, 0), &m, &e), 0, "%s",
               se3_error_str(&e).s);
  cr_assert_eq(fp_morgan(&m, 2, out), 0);
  mol_free(&m);
  sqlite3_finalize(st);
}

/* Each hit's nearest training molecule: a molecule of the train split, at
 * the highest Tanimoto similarity of any (computed again here, over the
 * whole split), ties to the lower id; in hits.csv by name. */
static void check_nearest(const char *db) {
  sqlite3 *h = NULL;
  cr_assert_eq(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  sqlite3_stmt *hits = NULL, *train = NULL;
  cr_assert_eq(sqlite3_prepare_v2(h, "SELECT rank, mol_id, nearest_id, similarity FROM ranks ORDER BY rank", -1, &hits,
                                  NULL),
               SQLITE_OK);
  cr_assert_eq(sqlite3_prepare_v2(h, "SELECT mol_id FROM splits WHERE split = 'train' ORDER BY mol_id", -1, &train, NULL),
               SQLITE_OK);
  int n = 0;
  while (sqlite3_step(hits) == SQLITE_ROW) {
    cr_assert_neq(sqlite3_column_type(hits, 2), SQLITE_NULL, "hit %d has no nearest training molecule", n + 1);
    double got = sqlite3_column_double(hits, 3);
    struct fp hf, tf;
    row_fp(h, sqlite3_column_int64(hits, 1), &hf);
    double best = -1;
    long long best_id = 0;
    sqlite3_reset(train);
    while (sqlite3_step(train) == SQLITE_ROW) {
      long long id = sqlite3_column_int64(train, 0);
      row_fp(h, id, &tf);
      double t = fp_tanimoto(&hf, &tf);
      if (t > best) {
        best = t;
        best_id = id;
      }
    }
    cr_assert(got >= 0 && got <= 1, "similarity %g", got);
    cr_assert_float_eq(got, best, 1e-12, "hit %d: similarity %g, the best in the train split %g", n + 1, got, best);
    cr_assert_eq(sqlite3_column_int64(hits, 2), best_id, "hit %d: another nearest molecule", n + 1);
    n++;
  }
  cr_assert_gt(n, 0);
  sqlite3_finalize(hits);
  sqlite3_finalize(train);
  sqlite3_close(h);
  char *names = tu_query(db, "SELECT count(*) FROM ranked_hits h JOIN ranks r ON r.rank = h.rank JOIN molecules m ON "
                             "m.id = r.nearest_id WHERE h.nearest_train = coalesce(nullif(m.name, ''), m.smiles)");
  char want[32];
  snprintf(want, sizeof want, "%d\n", n);
  cr_assert_str_eq(names, want, "ranked_hits.nearest_train does not name the nearest molecule");
  free(names);
}

Test(rank, view_csv_and_sdf_agree_and_target_without_models) {
  char *wd = screen("rank_files", "top: 10");
  char db[1100], path[1200];
  snprintf(db, sizeof db, "%s/screen.db", wd);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM ranked_hits"), 10);
  cr_assert_eq(tu_query_int(db, "SELECT count(DISTINCT inchikey) FROM ranked_hits"), 10, "dedupe by InChIKey");
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM ranks a JOIN ranks b ON b.rank = a.rank + 1 "
                                "WHERE b.score > a.score"),
               0, "not in descending order");
  cr_assert_eq(tu_query_int(db, "SELECT min(score) >= (SELECT max(s.score) FROM scores s JOIN molecules m ON "
                                "m.id = s.mol_id WHERE m.inchikey NOT IN (SELECT inchikey FROM ranked_hits)) "
                                "FROM ranks"),
               1, "a better molecule was left out");
  /* hits.csv: the view's rows */
  char *view = tu_query(db, "SELECT rank, smiles, mol_id FROM ranked_hits ORDER BY rank");
  snprintf(path, sizeof path, "%s/hits.csv", wd);
  char *csv = NULL;
  cr_assert_eq(tu_sh(&csv, "tail -n +2 %s | awk -F, '{print $1 \"|\" $3 \"|\" $11}'", path), 0);
  cr_assert_str_eq(csv, view, "hits.csv and ranked_hits differ");
  free(csv);
  free(view);
  check_nearest(db);
  /* hits.csv's last two columns: the nearest training molecule and the similarity */
  view = tu_query(db, "SELECT nearest_train || '|' || printf('%.9g', similarity) FROM ranked_hits ORDER BY rank");
  cr_assert_eq(tu_sh(&csv, "tail -n +2 %s | awk -F, '{print $12 \"|\" $13}'", path), 0);
  cr_assert_str_eq(csv, view, "hits.csv's nearest_train and similarity differ from ranked_hits'");
  free(csv);
  free(view);
  /* hits.sdf through Open Babel: same molecules in the same order, with the tags */
  snprintf(path, sizeof path, "%s/hits.sdf", wd);
  cr_assert_eq(tu_sdf_each(path, check_hit, (void *)db), 10);
  /* top */
  char *out = NULL;
  cr_assert_eq(tu_se3(&out, "top %s -n 3", wd), 0, "%s", out);
  char *first = tu_query(db, "SELECT name FROM ranked_hits WHERE rank = 1");
  first[strcspn(first, "\n")] = 0;
  cr_assert(strstr(out, first), "top does not show the best hit %s:\n%s", first, out);
  int lines = 0;
  for (char *p = out; *p; p++)
    lines += *p == '\n';
  cr_assert_eq(lines, 5, "a header, a rule and 3 hits:\n%s", out);
  free(first);
  free(out);
  /* nothing to show: top says why and fails, never an empty table */
  cr_assert_eq(tu_se3(&out, "top %s --target no-such-target", wd), 1, "%s", out);
  cr_assert(strstr(out, "nothing to rank") && strstr(out, "no hit has target 'no-such-target'"), "%s", out);
  free(out);
  char *copy = tu_tmpdir("rank_top_unranked");
  cr_assert_eq(tu_sh(&out, "cp %s %s/screen.db && sqlite3 %s/screen.db 'DELETE FROM ranks'", db, copy, copy), 0, "%s",
               out);
  free(out);
  cr_assert_eq(tu_se3(&out, "top %s", copy), 1, "%s", out);
  cr_assert(strstr(out, "nothing to rank") && strstr(out, "the rank stage has not run"), "%s", out);
  free(out);
  free(copy);
  /* last: it changes the database */
  rank_without_models(wd);
  free(wd);
}

Test(rank, filters_order_and_duplicates) {
  char *wd = screen("rank_filters", "order: ascending, top: 0, dedupe: false, max: 0.5, outputs: [hits.csv]");
  char db[1100], path[1200];
  snprintf(db, sizeof db, "%s/screen.db", wd);
  long long kept = tu_query_int(db, "SELECT count(*) FROM ranks");
  cr_assert_eq(kept, tu_query_int(db, "SELECT count(*) FROM scores WHERE score <= 0.5"), "max or top: 0 ignored");
  cr_assert_gt(kept, 0);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM ranks a JOIN ranks b ON b.rank = a.rank + 1 "
                                "WHERE b.score < a.score"),
               0, "not in ascending order");
  cr_assert_gt(kept, tu_query_int(db, "SELECT count(DISTINCT inchikey) FROM ranked_hits"),
               "without dedupe both copies of a molecule stay");
  snprintf(path, sizeof path, "%s/hits.sdf", wd);
  cr_assert_neq(tu_sh(NULL, "test -e %s", path), 0, "hits.sdf was not asked for");
  /* a file not asked for is not missed */
  char *out = NULL;
  cr_assert_eq(tu_se3(&out, "run %s/../wf.yaml", wd), 0, "%s", out);
  cr_assert_null(strstr(out, "gone"), "%s", out);
  cr_assert(strstr(out, "rank: nothing to do"), "%s", out);
  free(out);
  free(wd);
}

/* Before (hardening IV): hits.csv and hits.sdf deleted, the same run again
 * said "rank: nothing to do", exit 0, and wrote no files. Now a stage done
 * whole whose file in the workdir is gone is done again to write it (rank:
 * hits.csv, hits.sdf; report: report.html), the same files, and `run
 * --dry-run` says so beforehand. */
Test(rank, outputs_deleted_are_written_again) {
  char *wd = screen("rank_gone", "top: 5}\n  report: {top: 5");
  char wf[1200], csv[1200], sdf[1200], page[1200];
  snprintf(wf, sizeof wf, "%s/../wf.yaml", wd);
  snprintf(csv, sizeof csv, "%s/hits.csv", wd);
  snprintf(sdf, sizeof sdf, "%s/hits.sdf", wd);
  snprintf(page, sizeof page, "%s/report.html", wd);
  char *csv0 = tu_read(csv, NULL), *sdf0 = tu_read(sdf, NULL);
  cr_assert(csv0 && sdf0 && access(page, F_OK) == 0, "the first run wrote hits.csv, hits.sdf and report.html");
  char *out = NULL;
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  cr_assert(strstr(out, "rank: nothing to do") && !strstr(out, "gone"), "%s", out);
  free(out);
  cr_assert_eq(unlink(csv), 0);
  cr_assert_eq(unlink(sdf), 0);
  cr_assert_eq(unlink(page), 0);
  cr_assert_eq(tu_se3(&out, "run %s --dry-run", wf), 0, "%s", out);
  cr_assert(strstr(out, "redone: hits.csv is gone from the workdir"), "dry-run:\n%s", out);
  cr_assert(strstr(out, "report: redone"), "dry-run:\n%s", out);
  cr_assert_neq(access(csv, F_OK), 0, "dry-run wrote hits.csv");
  free(out);
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  cr_assert(strstr(out, "hits.csv is gone since the last run"), "%s", out);
  char *csv1 = tu_read(csv, NULL), *sdf1 = tu_read(sdf, NULL);
  cr_assert(csv1 && sdf1, "hits.csv and hits.sdf not written again:\n%s", out);
  cr_assert_str_eq(csv1, csv0, "hits.csv differs from the first run's");
  cr_assert_str_eq(sdf1, sdf0, "hits.sdf differs from the first run's");
  cr_assert_eq(access(page, F_OK), 0, "report.html not written again:\n%s", out);
  free(out);
  /* only the page gone: the report alone */
  cr_assert_eq(unlink(page), 0);
  cr_assert_eq(tu_se3(&out, "run %s --dry-run", wf), 0, "%s", out);
  cr_assert(strstr(out, "rank: nothing to do") && strstr(out, "report: redone: report.html is gone from the workdir"),
            "dry-run:\n%s", out);
  free(out);
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  cr_assert(strstr(out, "rank: nothing to do") && strstr(out, "report.html is gone since the last run"), "%s", out);
  cr_assert_eq(access(page, F_OK), 0, "report.html not written again:\n%s", out);
  free(out);
  free(csv1);
  free(sdf1);
  free(csv0);
  free(sdf0);
  free(wd);
}

/* A score stage in 12 shards (more than SQLite attaches at once: merge takes
 * one shard at a time) merged under stages.score.merge: hits: screen.db
 * keeps at most top scores of each shard, rank gives exactly the hits of an
 * unsharded run, a rank asking for more than was kept is refused with what
 * to do, and a merge under `all` brings every score back. Chunks of 10 in
 * both runs: a batch's composition may move a score in its last bits. */
static char *hits_workflow(const char *dir, const char *merge) {
  const char *esol = tu_src("workflows/data/delaney_first60.csv");
  char yaml[2048], *again = esol_again(dir);
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: work\nrun: {progress: none, chunk_size: 10}\n"
           "sets:\n  train:\n    - path: %s\n      labels_csv: {path: %s, join: mol_id, columns: [gap]}\n"
           "  library:\n    - {path: %s}\n    - {path: %s}\n"
           "stages:\n  ingest: {workers: 1, dedupe: none}\n  graph: {edges: radius+bonds, cutoff: 4.0}\n"
           "  train: {ensemble: 1, target: gap, epochs: 2, batch_size: 4}\n  score: {set: library, merge: %s}\n"
           "  rank: {top: 5}\n",
           tu_src("workflows/data/qm9_mini.sdf"), tu_src("workflows/data/qm9_mini.sdf.csv"), esol, again, merge);
  free(again);
  return tu_write(dir, "wf.yaml", yaml);
}

Test(rank, sharded_scores_merged_as_hits) {
  char *rdir = tu_tmpdir("rank_hits_ref"), *rwf = hits_workflow(rdir, "all");
  char *dir = tu_tmpdir("rank_hits"), *wf = hits_workflow(dir, "hits");
  char *out = NULL;
  cr_assert_eq(tu_se3(&out, "run %s", rwf), 0, "%s", out);
  free(out);
  cr_assert_eq(tu_se3(&out, "run %s --until train", wf), 0, "%s", out);
  free(out);
  for (int i = 0; i < 12; i++) {
    cr_assert_eq(tu_se3(&out, "run %s --stage score --shard %d/12", wf, i), 0, "%s", out);
    free(out);
  }
  char db[1100], refdb[1100];
  snprintf(db, sizeof db, "%s/work/screen.db", dir);
  snprintf(refdb, sizeof refdb, "%s/work/screen.db", rdir);
  cr_assert_eq(tu_se3(&out, "merge %s", db), 0, "%s", out);
  cr_assert(strstr(out, "candidates for rank's hits"), "merge did not say what it kept:\n%s", out);
  free(out);
  long long kept = tu_query_int(db, "SELECT count(*) FROM scores");
  cr_assert(kept > 5 && kept <= 12 * 5, "%lld scores kept: at most 5 a shard, and more than 5 in all", kept);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM stage_chunks WHERE stage='score'"), 12);
  cr_assert_eq(tu_se3(&out, "run %s --stage rank", wf), 0, "%s", out);
  free(out);
  /* the same hits as the unsharded run's, the same bits */
  char *want = tu_query(refdb, "SELECT rank, mol_id, printf('%%.17g', score) FROM ranks ORDER BY rank");
  char *got = tu_query(db, "SELECT rank, mol_id, printf('%%.17g', score) FROM ranks ORDER BY rank");
  cr_assert_str_eq(got, want, "hits differ from an unsharded run's");
  free(got);
  free(want);
  char a[1200], b[1200];
  snprintf(a, sizeof a, "%s/work/hits.csv", rdir);
  snprintf(b, sizeof b, "%s/work/hits.csv", dir);
  cr_assert_eq(tu_sh(&out, "cmp %s %s", a, b), 0, "hits.csv differs: %s", out);
  free(out);
  /* more hits than were kept: refused, saying how to get them */
  cr_assert_neq(tu_se3(&out, "run %s --stage rank --set rank.top=10", wf), 0, "ranked 10 from 5 kept a shard");
  cr_assert(strstr(out, "stages.score.merge: all"), "%s", out);
  free(out);
  /* merge: all brings every score back, and then any rank runs */
  cr_assert_eq(tu_se3(&out, "merge %s", db), 0, "%s", out); /* idempotent under hits */
  cr_assert(strstr(out, "score-11.db: merged already, nothing new"), "a merged shard was folded again:\n%s", out);
  free(out);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM scores"), kept);
  cr_assert_eq(tu_sh(&out, "sed -i 's/merge: hits/merge: all/' %s", wf), 0);
  free(out);
  cr_assert_eq(tu_se3(&out, "merge %s", db), 0, "%s", out);
  free(out);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM scores"), tu_query_int(refdb, "SELECT count(*) FROM scores"));
  cr_assert_eq(tu_se3(&out, "run %s --stage rank --set rank.top=10", wf), 0, "%s", out);
  free(out);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM ranks"), 10);
  free(wf);
  free(dir);
  free(rwf);
  free(rdir);
}

/* stages.graph.store: false keeps each graph's size and an empty blob, and
 * basis, train and score rebuild the graph from its molecule: the same
 * bases, checkpoints and scores, bit for bit, as with stored graphs, in a
 * database that holds no graph. verify accepts the empty blobs. */
Test(rank, graphs_not_stored_are_rebuilt_bit_for_bit) {
  char *dirs[2], *wfs[2], dbs[2][1100];
  for (int k = 0; k < 2; k++) {
    dirs[k] = tu_tmpdir(k ? "graphs_rebuilt" : "graphs_stored");
    const char *esol = tu_src("workflows/data/delaney_first60.csv");
    char yaml[2048];
    snprintf(yaml, sizeof yaml,
             "workflow: t\nworkdir: work\nrun: {progress: none}\n"
             "sets:\n  train:\n    - path: %s\n      labels_csv: {path: %s, join: mol_id, columns: [gap]}\n"
             "  library:\n    - {path: %s}\n"
             "stages:\n  ingest: {workers: 1}\n  graph: {edges: radius+bonds, cutoff: 4.0, store: %s}\n"
             "  basis: {max_degree: 1}\n"
             "  train: {ensemble: 1, target: gap, epochs: 2, batch_size: 4, arch: {degrees: 2}}\n  score: {set: library}\n"
             "  rank: {top: 5}\n",
             tu_src("workflows/data/qm9_mini.sdf"), tu_src("workflows/data/qm9_mini.sdf.csv"), esol,
             k ? "false" : "true");
    wfs[k] = tu_write(dirs[k], "wf.yaml", yaml);
    char *out = NULL;
    cr_assert_eq(tu_se3(&out, "run %s", wfs[k]), 0, "%s", out);
    free(out);
    snprintf(dbs[k], sizeof dbs[k], "%s/work/screen.db", dirs[k]);
  }
  cr_assert_eq(tu_query_int(dbs[1], "SELECT count(*) FROM graphs WHERE length(graph) > 0"), 0, "a graph was stored");
  cr_assert_eq(tu_query_int(dbs[1], "SELECT count(*) FROM graphs"),
               tu_query_int(dbs[0], "SELECT count(*) FROM graphs"));
  const char *same[] = {
      "SELECT mol_id, n_nodes, n_edges FROM graphs ORDER BY 1", "SELECT mol_id, hex(basis) FROM bases ORDER BY 1",
      "SELECT mol_id, printf('%.17g', score) FROM scores ORDER BY 1", "SELECT rank, mol_id FROM ranks ORDER BY 1"};
  for (size_t i = 0; i < sizeof same / sizeof *same; i++) {
    char *a = tu_query(dbs[0], same[i]), *b = tu_query(dbs[1], same[i]);
    cr_assert(a[0], "nothing from %s", same[i]);
    cr_assert_str_eq(a, b, "stored and rebuilt graphs differ in: %s", same[i]);
    free(a);
    free(b);
  }
  char *out = NULL;
  cr_assert_eq(tu_sh(&out, "cmp %s/work/models/train-0/best.ckpt %s/work/models/train-0/best.ckpt", dirs[0], dirs[1]),
               0, "the checkpoints differ: %s", out);
  free(out);
  cr_assert_eq(tu_se3(&out, "verify %s/work", dirs[1]), 0, "%s", out);
  free(out);
  for (int k = 0; k < 2; k++) {
    free(dirs[k]);
    free(wfs[k]);
  }
}

/* score reads each chunk by its range of ids, not by walking the set's
 * index (which made every chunk visit every molecule of the set: 70 instead
 * of 600 molecules/s a process at 10^6 molecules): the plan of its select on
 * a real screen.db, which has no statistics (no ANALYZE), as a screen's has
 * none. */
Test(rank, score_reads_a_chunk_by_its_ids) {
  char *wd = screen("rank_plan", "top: 5");
  char db[1100];
  snprintf(db, sizeof db, "%s/screen.db", wd);
  sqlite3 *h = NULL;
  cr_assert_eq(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  char *sql = score_chunk_sql("main");
  char *eqp = sqlite3_mprintf("EXPLAIN QUERY PLAN %s", sql);
  sqlite3_stmt *st = NULL;
  cr_assert_eq(sqlite3_prepare_v2(h, eqp, -1, &st, NULL), SQLITE_OK, "%s", sqlite3_errmsg(h));
  char plan[2048] = "";
  while (sqlite3_step(st) == SQLITE_ROW) {
    size_t n = strlen(plan);
    snprintf(plan + n, sizeof plan - n, "%s\n", (const char *)sqlite3_column_text(st, 3));
  }
  sqlite3_finalize(st);
  cr_log_info("score's chunk select:\n%s", plan);
  cr_assert(strstr(plan, "SEARCH g USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)"),
            "the chunk is not found by its ids:\n%s", plan);
  cr_assert(!strstr(plan, "molecules_set"), "the set's index drives the chunk's read:\n%s", plan);
  /* and it selects the set's molecules of the range, no more */
  cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
  sqlite3_bind_text(st, 1, "library", -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 2, 0);
  sqlite3_bind_int64(st, 3, INT64_MAX);
  int n = 0;
  while (sqlite3_step(st) == SQLITE_ROW)
    n++;
  sqlite3_finalize(st);
  cr_assert_eq(n, tu_query_int(db, "SELECT count(*) FROM graphs g JOIN molecules m ON m.id = g.mol_id "
                                   "WHERE m.set_name = 'library'"));
  cr_assert_lt(n, tu_query_int(db, "SELECT count(*) FROM graphs"), "the train set was selected too");
  sqlite3_free(eqp);
  sqlite3_free(sql);
  sqlite3_close(h);
  free(wd);
}

/* Molecule names that would break hits.sdf or run in a spreadsheet from
 * hits.csv (issue 30, 8 and 11): a library whose names are `$$$$`, start
 * with it, or begin with = + - @. hits.sdf: one record a hit for a plain
 * reader that splits on lines equal to `$$$$`, for the obabel command and
 * for se3screen's reader with Open Babel, titles prefixed with '_' where
 * they begin with `$$$$`; hits.csv: those names with a ' in front, a name
 * that is a number as it is. */
static const char hostile_library[] = "smiles,name\n"
                                      "CCO,$$$$\n"
                                      "CCN,$$$$ and more\n"
                                      "CCC,\"=HYPERLINK(\"\"http://example.com\"\",\"\"x\"\")\"\n"
                                      "CCCl,-2+3+cmd|' /C calc'!A0\n"
                                      "c1ccccc1,@SUM(1+1)\n"
                                      "CC(=O)O,+1+1\n"
                                      "CCCC,-1.5\n"
                                      "CO,-\n"
                                      "CCOC,plain\n";

/* What each name becomes in hits.sdf (sdf = 1) and hits.csv (sdf = 0). */
static const char *hostile_written(const char *name, int sdf) {
  static char buf[256];
  if (sdf)
    snprintf(buf, sizeof buf, "%s%s", strncmp(name, "$$$$", 4) ? "" : "_", name);
  else
    snprintf(buf, sizeof buf, "%s%s", strchr("=+-@", name[0]) && strcmp(name, "-1.5") ? "'" : "", name);
  return buf;
}

static void check_hostile_hit(int i, const struct mol *m, void *ctx) {
  const char *db = ctx;
  char q[128];
  snprintf(q, sizeof q, "SELECT name FROM ranked_hits WHERE rank = %d", i + 1);
  char *name = tu_query(db, q);
  cr_assert(name && *name, "no hit of rank %d", i + 1);
  name[strcspn(name, "\n")] = 0;
  cr_expect_str_eq(m->name, hostile_written(name, 1), "hits.sdf record %d: title", i + 1);
  free(name);
}

Test(rank, hostile_names_keep_hits_files_well_formed) {
  char *dir = tu_tmpdir("rank_hostile");
  char *lib = tu_write(dir, "library.csv", hostile_library);
  char yaml[2048];
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: work\nrun: {progress: none}\n"
           "sets:\n  train:\n    - path: %s\n      labels_csv: {path: %s, join: mol_id, columns: [gap]}\n"
           "  library:\n    - {path: %s}\n"
           "stages:\n  ingest: {workers: 1}\n  graph: {edges: radius+bonds, cutoff: 4.0}\n"
           "  train: {ensemble: 1, target: gap, epochs: 1, batch_size: 4}\n  score: {set: library}\n  rank: {top: 0}\n",
           tu_src("workflows/data/qm9_mini.sdf"), tu_src("workflows/data/qm9_mini.sdf.csv"), lib);
  char *wf = tu_write(dir, "wf.yaml", yaml), *out = NULL;
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  free(out);
  char db[1100], sdf[1100], csv[1100];
  snprintf(db, sizeof db, "%s/work/screen.db", dir);
  snprintf(sdf, sizeof sdf, "%s/work/hits.sdf", dir);
  snprintf(csv, sizeof csv, "%s/work/hits.csv", dir);
  long long hits = tu_query_int(db, "SELECT count(*) FROM ranked_hits");
  cr_assert_eq(hits, 9, "every library molecule a hit");
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM ranked_hits WHERE name = '$$$$'"), 1, "the premise");
  /* hits.sdf: the plain reader, obabel, se3screen's reader */
  cr_assert_eq(tu_sh(&out, "grep -c -x '[$][$][$][$]' %s", sdf), 0);
  cr_expect_eq(atoll(out), hits, "%s lines equal to $$$$ for %lld hits", out, hits);
  free(out);
  if (tu_sh(NULL, "command -v obabel") == 0) {
    cr_assert_eq(tu_sh(&out, "obabel -isdf %s -osmi 2>/dev/null | wc -l", sdf), 0);
    cr_expect_eq(atoll(out), hits, "obabel reads %s molecules for %lld hits", out, hits);
    free(out);
  }
  /* hits.csv through Python's csv module: the name column */
  cr_assert_eq(tu_sh(&out,
                     "/usr/bin/python3 -c \"import csv, sys; r = list(csv.reader(open(sys.argv[1], newline='')));"
                     " print(len(r) - 1); [print(x[1]) for x in r[1:]]\" %s",
                     csv),
               0, "%s", out);
  char *names = tu_query(db, "SELECT name FROM ranked_hits ORDER BY rank"), *want = NULL;
  size_t wn = 0;
  FILE *w = open_memstream(&want, &wn);
  fprintf(w, "%lld\n", hits);
  for (char *p = names, *nl; *p; p = nl + 1) {
    nl = strchr(p, '\n');
    *nl = 0;
    fprintf(w, "%s\n", hostile_written(p, 0));
  }
  fclose(w);
  cr_expect_str_eq(out, want, "hits.csv names:\n%s\nwant:\n%s", out, want);
  free(out);
  free(want);
  free(names);
  /* last: it stops the test at a record it cannot read */
  cr_expect_eq(tu_sdf_each(sdf, check_hostile_hit, db), hits);
  free(wf);
  free(lib);
  free(dir);
}
