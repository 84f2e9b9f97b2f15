/* `se3screen predict MODEL INPUT...` (issue 31): a model trained in workdir A
 * scores SMILES, SDF and CSV files exactly as a workflow in A scores them;
 * a killed predict resumes to the same hits; -o copies the hits and refuses
 * to replace an input; a missing model or input is a usage error.
 *
 * The model is tiny (one attention block, degrees 0-1, 4 channels, one
 * epoch on the 20 bundled QM9 records) and trained with a featurisation
 * that is not the default (3D generation "fast", radius+bonds graph with a
 * 4 Å cutoff): predict must take it from the model, or its scores differ. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include "chem/fingerprint.h"
#include "chem/mol.h"
#include "common/error.h"
#include "models/checkpoint.h"
#include "models/trainer.h"
#include "stages/train_set.h"
#include "tests/testutil.h"

/* A's workflow: train on the QM9 records, score and rank `library`. The QM9
 * records keep their coordinates (coordinates: input): generated, they
 * were built in the workflow's ingest worker before the library's records,
 * and a built shape can still depend on what its process built before
 * (Open Babel's builder: dev/ob_history/builder_history.cc, issue 54), so
 * the library's shapes differed from predict's for 4 of 9 molecules in one
 * clean checkout (not in another of the same commit). The two causes found
 * since (stereo data in atom-address order, the clock-seeded generator: see
 * chem/gen3d.cc, order_stereo and se3_ob_srand) do not touch these molecules, which specify no
 * stereo, and with generated QM9 shapes this test passed 7 of 7 runs on
 * 2026-11-27; the cause of that failure is not known, so the records keep
 * their coordinates. */
static char *write_a_graph(const char *dir, const char *library, const char *graph_extra) {
  char yaml[4096];
  snprintf(yaml, sizeof yaml,
           "workflow: a\nworkdir: A\nrun: {progress: none}\n"
           "sets:\n  train:\n    - path: %s\n      labels_csv: {path: %s, join: mol_id, columns: [gap]}\n"
           "  library:\n    - {path: %s}\n"
           "stages:\n  ingest: {workers: 1, gen3d_quality: fast, coordinates: input}\n  graph: {edges: radius+bonds, "
           "cutoff: 4.0%s}\n"
           "  train: {ensemble: 1, target: gap, model: small, arch: {layers: 1, degrees: 2, channels: 4}, epochs: 1, "
           "batch_size: 4}\n  score: {set: library}\n  rank: {top: 100}\n",
           tu_src("workflows/data/qm9_mini.sdf"), tu_src("workflows/data/qm9_mini.sdf.csv"), library, graph_extra);
  return tu_write(dir, "a.yaml", yaml);
}

static char *write_a(const char *dir, const char *library) { return write_a_graph(dir, library, ""); }

/* The first ten molecules of the bundled Delaney set as dir/lib.smi
 * (SMILES, tab, name) and dir/lib.csv (smiles,name with a header). One of
 * them is rejected at ingest (two atoms too close after 3D generation):
 * predict keeps the rejects as a workflow does. */
static void write_libraries(const char *dir) {
  char *csv = tu_read(tu_src("workflows/data/delaney_first60.csv"), NULL);
  cr_assert_not_null(csv);
  char smi[8192] = "", two[8192] = "smiles,name\n";
  char *line = strchr(csv, '\n') + 1;
  for (int i = 1; i <= 10; i++) {
    char *end = strchr(line, '\n'), *comma = strchr(line, ',');
    cr_assert(end && comma && comma < end);
    snprintf(smi + strlen(smi), sizeof smi - strlen(smi), "%.*s\td%d\n", (int)(comma - line), line, i);
    snprintf(two + strlen(two), sizeof two - strlen(two), "%.*s,d%d\n", (int)(comma - line), line, i);
    line = end + 1;
  }
  free(csv);
  free(tu_write(dir, "lib.smi", smi));
  free(tu_write(dir, "lib.csv", two));
}

/* Trains A's model (dir/A) with `library` named in the workflow. */
static void train_a(const char *dir, const char *library) {
  char *wf = write_a(dir, library), *out = NULL;
  cr_assert_eq(tu_se3(&out, "run %s --until train", wf), 0, "%s", out);
  free(out);
  free(wf);
}

/* Asserts that db_a (a workflow's) and db_p (a predict's) hold the same
 * scores of the library, matched by record, bit for bit, and the same
 * rejects. */
static void assert_same_scores(const char *db_a, const char *db_p) {
  long long n_a = tu_query_int(db_a, "SELECT count(*) FROM scores s JOIN molecules m ON m.id = s.mol_id "
                                     "WHERE m.set_name = 'library'");
  long long n_p = tu_query_int(db_p, "SELECT count(*) FROM scores");
  cr_assert_gt(n_a, 5, "A scored %lld molecules", n_a);
  cr_assert_eq(n_p, n_a, "predict scored %lld molecules, the workflow %lld", n_p, n_a);
  char *same = NULL;
  /* compared as stored: the same doubles */
  cr_assert_eq(tu_sh(&same,
                     "sqlite3 -readonly '%s' \"ATTACH '%s' AS p; SELECT count(*) FROM main.scores a "
                     "JOIN main.molecules ma ON ma.id = a.mol_id AND ma.set_name = 'library' "
                     "JOIN p.molecules mp ON mp.record_no = ma.record_no "
                     "JOIN p.scores b ON b.mol_id = mp.id AND b.score = a.score AND b.target = a.target\"",
                     db_a, db_p),
               0, "%s", same);
  cr_assert_eq(atoll(same), n_a, "only %s of %lld scores are the workflow's, bit for bit", same, n_a);
  free(same);
  static const char rejects[] = "SELECT record_no, stage, reason FROM rejects WHERE set_name = 'library' "
                                "ORDER BY record_no";
  char *ra = tu_query(db_a, rejects), *rp = tu_query(db_p, rejects);
  cr_assert(ra && rp);
  cr_assert_str_eq(rp, ra, "predict's rejects differ from the workflow's");
  free(ra);
  free(rp);
}

/* ranked_hits as text: rank, record, name, score. */
static char *hits_of(const char *db) {
  char *t = tu_query(db, "SELECT rank, record_no, name, score FROM ranked_hits ORDER BY rank");
  cr_assert_not_null(t, "%s: no ranked_hits", db);
  return t;
}

/* (a) predict on a SMILES file, a CSV and an SDF holding the same molecules
 * gives the scores (bit for bit, matched by record) and the hits a workflow
 * in A gives for the same file; MODEL named as the workdir, its models/
 * folder and the checkpoint file. */
Test(predict, scores_as_the_workflow_does_for_smi_csv_sdf) {
  char *dir = tu_tmpdir("predict_same");
  write_libraries(dir);
  char lib[1024], db_a[1100], db_p[1200], model[1100], wd[1100];
  snprintf(lib, sizeof lib, "%s/lib.smi", dir);
  train_a(dir, lib);
  snprintf(db_a, sizeof db_a, "%s/A/screen.db", dir);
  static const char *const formats[] = {"smi", "csv", "sdf"};
  static const char *const models[] = {"A", "A/models", "A/models/train-0/best.ckpt"};
  for (int k = 0; k < 3; k++) {
    if (k == 2) /* the SDF: the last run's hits, with their generated 3D coordinates */
      cr_assert_eq(tu_sh(NULL, "cp %s/A/hits.sdf %s/lib.sdf", dir, dir), 0);
    snprintf(lib, sizeof lib, "%s/lib.%s", dir, formats[k]);
    char *wf = write_a(dir, lib), *out = NULL;
    cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
    free(out);
    free(wf);
    snprintf(model, sizeof model, "%s/%s", dir, models[k]);
    if (k == 0) { /* the default workdir: predict-<stem> in the current folder, relative names */
      snprintf(wd, sizeof wd, "%s/predict-lib", dir);
      cr_assert_eq(tu_sh(&out, "cd %s && %s predict %s lib.smi", dir, SE3_BINARY, models[k]), 0, "%s", out);
    } else {
      snprintf(wd, sizeof wd, "%s/P-%s", dir, formats[k]);
      cr_assert_eq(tu_se3(&out, "predict %s %s --workdir %s", model, lib, wd), 0, "%s", out);
    }
    free(out);
    snprintf(db_p, sizeof db_p, "%s/screen.db", wd);
    assert_same_scores(db_a, db_p);
    char *ha = hits_of(db_a), *hp = hits_of(db_p);
    cr_assert_str_eq(hp, ha, "%s: predict's hits differ from the workflow's", formats[k]);
    free(ha);
    free(hp);
    /* a normal workdir: `top` reads it */
    cr_assert_eq(tu_se3(&out, "top %s -n 3", wd), 0, "%s", out);
    cr_assert(strstr(out, "gap"), "%s", out);
    free(out);
  }
  /* a CSV whose SMILES column has a name of its own, named with --set as
   * `predict --help` and docs/commands.md say (issue 70): the CSV's hits */
  char *out = NULL;
  cr_assert_eq(tu_sh(NULL, "cd %s && sed '1s/^smiles,/mol,/' lib.csv > libmol.csv", dir), 0);
  cr_assert_neq(tu_se3(&out, "predict %s/A %s/libmol.csv --workdir %s/P-mol0", dir, dir, dir), 0,
                "a CSV without a SMILES column it knows was read:\n%s", out);
  free(out);
  cr_assert_eq(tu_se3(&out, "predict %s/A %s/libmol.csv --workdir %s/P-mol --set sets.library.0.smiles_column=mol", dir,
                      dir, dir),
               0, "%s", out);
  free(out);
  snprintf(db_p, sizeof db_p, "%s/P-mol/screen.db", dir);
  snprintf(lib, sizeof lib, "%s/P-csv/screen.db", dir);
  char *hm = hits_of(db_p), *hc = hits_of(lib);
  cr_assert_str_eq(hm, hc, "the renamed column's hits differ from the CSV's");
  free(hm);
  free(hc);
  free(dir);
}

struct predict_at {
  const char *db;
  long long done;
};

/* Inside the run: ingest has committed a chunk and rank has not begun (so
 * the kill lands with work left, whatever the machine's speed). */
static int mid_predict(void *p) {
  struct predict_at *g = p;
  char *t = tu_query_wait(g->db,
                          "SELECT (SELECT count(*) FROM stage_chunks WHERE stage = 'ingest'), "
                          "(SELECT count(*) FROM stage_chunks WHERE stage = 'rank')",
                          0);
  long long ingested = -1, ranked = -1;
  if (t && sscanf(t, "%lld|%lld", &ingested, &ranked) != 2) ingested = ranked = -1;
  free(t);
  if (ingested < 1) return 0;
  g->done = ingested;
  return ranked == 0 ? 1 : -1;
}

/* (b) kill -9 during predict; the same command again ends with exit 0 and
 * the hits of an uninterrupted predict. */
Test(predict, killed_predict_resumes_to_the_same_hits) {
  char *dir = tu_tmpdir("predict_kill9");
  write_libraries(dir);
  char lib[1024], model[1024], ref[1024], wd[1024], db[1100], log[1024];
  snprintf(lib, sizeof lib, "%s/lib.smi", dir);
  train_a(dir, lib);
  snprintf(model, sizeof model, "%s/A", dir);
  snprintf(ref, sizeof ref, "%s/ref", dir);
  snprintf(wd, sizeof wd, "%s/killed", dir);
  snprintf(db, sizeof db, "%s/screen.db", wd);
  snprintf(log, sizeof log, "%s/log.txt", dir);
  char *out = NULL;
  /* chunks of two molecules: five ingest chunks to be killed among */
  cr_assert_eq(tu_se3(&out, "predict %s %s --workdir %s --set run.chunk_size=2", model, lib, ref), 0, "%s", out);
  free(out);
  char *argv[] = {"se3screen", "predict", model, lib, "--workdir", wd, "--set", "run.chunk_size=2", NULL};
  struct predict_at at = {db, 0};
  int pid = tu_spawn_se3(log, argv);
  int seen = tu_signal_in_state(&pid, 1, pid, SIGKILL, 120, mid_predict, &at);
  int st = tu_wait(pid);
  cr_assert_eq(seen, 1, "predict was not killed inside its run (%d; exit %d; see %s)", seen, st, log);
  cr_assert_eq(st, 128 + SIGKILL, "exit %d (see %s)", st, log);
  cr_log_info("killed with %lld ingest chunks committed", at.done);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM stage_chunks WHERE stage = 'rank'"), 0);
  cr_assert_eq(tu_se3(&out, "predict %s %s --workdir %s --set run.chunk_size=2", model, lib, wd), 0, "%s", out);
  cr_assert(strstr(out, "resuming predict.yaml"), "the same command rewrote its workflow: %s", out);
  free(out);
  char a[1100], b[1100];
  snprintf(a, sizeof a, "%s/hits.csv", ref);
  snprintf(b, sizeof b, "%s/hits.csv", wd);
  char *ha = tu_read(a, NULL), *hb = tu_read(b, NULL);
  cr_assert(ha && hb && strchr(ha, '\n') != strrchr(ha, '\n'), "hits.csv missing or empty");
  cr_assert_str_eq(hb, ha, "the resumed predict's hits differ from an uninterrupted one's");
  free(ha);
  free(hb);
  char ref_db[1100];
  snprintf(ref_db, sizeof ref_db, "%s/screen.db", ref);
  char *x = tu_query(ref_db, "SELECT mol_id, score FROM scores ORDER BY mol_id");
  char *y = tu_query(db, "SELECT mol_id, score FROM scores ORDER BY mol_id");
  cr_assert(x && y);
  cr_assert_str_eq(y, x);
  free(x);
  free(y);
  free(dir);
}

/* (c) -o FILE.csv is DIR/hits.csv and -o FILE.sdf DIR/hits.sdf, byte for
 * byte; -o naming an input, a file of the workdir or another kind of file
 * is refused before any work, the file left as it was. */
Test(predict, o_copies_the_hits_and_refuses_an_input) {
  char *dir = tu_tmpdir("predict_out");
  write_libraries(dir);
  char lib[1024], model[1024], wd[1024];
  snprintf(lib, sizeof lib, "%s/lib.smi", dir);
  train_a(dir, lib);
  snprintf(model, sizeof model, "%s/A", dir);
  snprintf(wd, sizeof wd, "%s/P", dir);
  char csv_in[1100];
  snprintf(csv_in, sizeof csv_in, "%s/lib.csv", dir);
  char *before = tu_read(csv_in, NULL);
  char *out = NULL;
  /* refusals before any work: no workdir made, the input unchanged. The
   * input is named as given and as another spelling of it. */
  const char *bad[] = {"hits.txt", "lib.csv", "./out/../lib.csv"};
  const char *why[] = {"name a file ending in one", "this command reads", "this command reads"};
  cr_assert_eq(tu_sh(NULL, "mkdir -p %s/out", dir), 0);
  for (int k = 0; k < 3; k++) {
    int rc = tu_sh(&out, "cd %s && %s predict %s lib.csv --workdir %s -o %s", dir, SE3_BINARY, model, wd, bad[k]);
    cr_assert_eq(rc, 2, "-o %s: exit %d: %s", bad[k], rc, out);
    cr_assert(strstr(out, why[k]), "-o %s: %s", bad[k], out);
    free(out);
    struct stat sb;
    cr_assert_neq(stat(wd, &sb), 0, "a refused predict made its workdir");
  }
  char *after = tu_read(csv_in, NULL);
  cr_assert_str_eq(after, before, "a refused -o changed the input");
  free(after);
  free(before);
  /* the hits, both kinds */
  static const char *const kinds[] = {"csv", "sdf"};
  for (int k = 0; k < 2; k++) {
    char o[1100], h[1100];
    snprintf(o, sizeof o, "%s/out/hits-copy.%s", dir, kinds[k]);
    snprintf(h, sizeof h, "%s/hits.%s", wd, kinds[k]);
    cr_assert_eq(tu_se3(&out, "predict %s %s --workdir %s -o %s --top 5", model, lib, wd, o), 0, "%s", out);
    free(out);
    size_t no = 0, nh = 0;
    char *a = tu_read(o, &no), *b = tu_read(h, &nh);
    cr_assert(a && b && nh > 0, "%s or %s missing", o, h);
    cr_assert(no == nh && !memcmp(a, b, nh), "-o %s is not %s", o, h);
    free(a);
    free(b);
  }
  /* --top 5: five hits (a header line and five rows) */
  char h[1100];
  snprintf(h, sizeof h, "%s/hits.csv", wd);
  char *text = tu_read(h, NULL);
  int lines = 0;
  for (char *p = text; p && *p; p++)
    lines += *p == '\n';
  cr_assert_eq(lines, 6, "%s", text);
  free(text);
  /* a file of the workdir */
  int rc = tu_se3(&out, "predict %s %s --workdir %s -o %s", model, lib, wd, h);
  cr_assert_eq(rc, 2, "-o %s: exit %d: %s", h, rc, out);
  cr_assert(strstr(out, "this command reads"), "%s", out);
  free(out);
  free(dir);
}

/* (d) a missing model or input: exit 2 naming it, nothing made. The
 * workdir of another workflow is refused, its database untouched. */
Test(predict, missing_model_or_input_is_a_usage_error) {
  char *dir = tu_tmpdir("predict_usage");
  write_libraries(dir);
  char *out = NULL;
  int rc = tu_sh(&out, "cd %s && %s predict no-such-model lib.smi", dir, SE3_BINARY);
  cr_assert_eq(rc, 2, "exit %d: %s", rc, out);
  cr_assert(strstr(out, "model no-such-model: No such file or directory"), "%s", out);
  free(out);
  rc = tu_sh(&out, "cd %s && %s predict lib.csv no-such-library.smi", dir, SE3_BINARY);
  cr_assert_eq(rc, 2, "exit %d: %s", rc, out);
  cr_assert(strstr(out, "input no-such-library.smi: No such file or directory"), "%s", out);
  free(out);
  /* a folder that holds no model */
  rc = tu_sh(&out, "cd %s && %s predict . lib.smi", dir, SE3_BINARY);
  cr_assert_eq(rc, 2, "exit %d: %s", rc, out);
  cr_assert(strstr(out, "se3screen predict: model ") && strstr(out, "without models"), "%s", out);
  free(out);
  rc = tu_sh(&out, "cd %s && %s predict lib.csv", dir, SE3_BINARY);
  cr_assert_eq(rc, 2, "exit %d: %s", rc, out);
  cr_assert(strstr(out, "predict needs at least one INPUT"), "%s", out);
  free(out);
  struct stat sb;
  char p[1100];
  snprintf(p, sizeof p, "%s/predict-lib", dir);
  cr_assert_neq(stat(p, &sb), 0, "a refused predict made its workdir");
  snprintf(p, sizeof p, "%s/predict-no-such-library", dir);
  cr_assert_neq(stat(p, &sb), 0, "a refused predict made its workdir");
  /* another workflow's workdir */
  char *wf = write_a(dir, "lib.smi");
  cr_assert_eq(tu_se3(&out, "run %s --until ingest", wf), 0, "%s", out);
  free(out);
  char db[1100];
  snprintf(db, sizeof db, "%s/A/screen.db", dir);
  long long n = tu_query_int(db, "SELECT count(*) FROM molecules");
  rc = tu_sh(&out, "cd %s && %s predict lib.csv lib.smi --workdir A", dir, SE3_BINARY);
  cr_assert_eq(rc, 2, "exit %d: %s", rc, out);
  cr_assert(strstr(out, "not of a predict"), "%s", out);
  free(out);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM molecules"), n);
  snprintf(p, sizeof p, "%s/A/predict.yaml", dir);
  cr_assert_neq(stat(p, &sb), 0, "predict wrote into another workflow's workdir");
  free(wf);
  free(dir);
}

/* A --set the model's card refuses (another protonation than the model was
 * trained with) is a usage error naming both values as written (7.4, not
 * 7.4000000000000004), and leaves nothing behind: no predict.yaml, no
 * workdir it made. A workdir of an earlier predict keeps its predict.yaml,
 * so the earlier command still resumes. */
Test(predict, a_refused_set_leaves_nothing) {
  char *dir = tu_tmpdir("predict_refused_set");
  write_libraries(dir);
  char lib[1024];
  snprintf(lib, sizeof lib, "%s/lib.smi", dir);
  train_a(dir, lib);
  char *out = NULL;
  int rc = tu_sh(&out, "cd %s && %s predict A lib.smi --workdir P --set ingest.protonate=7.4", dir, SE3_BINARY);
  cr_assert_eq(rc, 2, "exit %d: %s", rc, out);
  cr_assert(strstr(out, "was trained with keep; this workflow sets 7.4: leave") && !strstr(out, "7.4000"), "%s", out);
  free(out);
  struct stat sb;
  char p[1100];
  snprintf(p, sizeof p, "%s/P", dir);
  cr_assert_neq(stat(p, &sb), 0, "a refused predict left its workdir %s", p);
  /* an earlier predict's workdir: its predict.yaml stays as it was */
  cr_assert_eq(tu_sh(&out, "cd %s && %s predict A lib.smi --workdir Q", dir, SE3_BINARY), 0, "%s", out);
  free(out);
  snprintf(p, sizeof p, "%s/Q/predict.yaml", dir);
  char *yaml = tu_read(p, NULL);
  rc = tu_sh(&out, "cd %s && %s predict A lib.smi lib.csv --workdir Q --set ingest.protonate=7.4", dir, SE3_BINARY);
  cr_assert_eq(rc, 2, "exit %d: %s", rc, out);
  free(out);
  char *now = tu_read(p, NULL);
  cr_assert_str_eq(now, yaml, "a refused predict left Q's predict.yaml rewritten");
  free(now);
  free(yaml);
  free(dir);
}

/* A model trained with atom and bond features (issue 68) carries them on
 * its card: predict takes them from it and scores, and refuses a --set of
 * other features naming both lists. */
Test(predict, the_model_card_carries_the_features) {
  char *dir = tu_tmpdir("predict_features");
  write_libraries(dir);
  char lib[1024];
  snprintf(lib, sizeof lib, "%s/lib.smi", dir);
  char *wf = write_a_graph(dir, lib, ", atom_features: [ring, hybridisation], bond_features: [conjugated]"),
       *out = NULL;
  cr_assert_eq(tu_se3(&out, "run %s --until train", wf), 0, "%s", out);
  free(out);
  char *card = NULL;
  cr_assert_eq(tu_sh(&card,
                     "grep -a -c -e 'stages.graph.atom_features=\\[ring, hybridisation\\]' "
                     "-e 'stages.graph.bond_features=\\[conjugated\\]' %s/A/models/train-0/best.ckpt",
                     dir),
               0, "%s", card);
  cr_assert_str_eq(card, "2\n", "both card lines: %s", card);
  free(card);
  cr_assert_eq(tu_sh(&out, "cd %s && %s predict A lib.smi --workdir P", dir, SE3_BINARY), 0, "%s", out);
  free(out);
  char db[1100];
  snprintf(db, sizeof db, "%s/P/screen.db", dir);
  cr_assert_gt(tu_query_int(db, "SELECT count(*) FROM scores"), 0);
  int rc = tu_sh(&out, "cd %s && %s predict A lib.smi --workdir R --set graph.atom_features=[ring]", dir, SE3_BINARY);
  cr_assert_eq(rc, 2, "exit %d: %s", rc, out);
  cr_assert(strstr(out, "was trained with [ring, hybridisation]; this workflow sets [ring]"), "%s", out);
  free(out);
  rc = tu_sh(&out, "cd %s && %s predict A lib.smi --workdir R --set graph.bond_features=[]", dir, SE3_BINARY);
  cr_assert_eq(rc, 2, "exit %d: %s", rc, out);
  cr_assert(strstr(out, "was trained with [conjugated]; this workflow sets []"), "%s", out);
  free(out);
  free(wf);
  free(dir);
}

/* ---- the applicability domain travels with the model (issue 70) ---------- */

/* The Morgan fingerprint (radius 2) of the molecule stored in column c of st. */
static void stored_fp(sqlite3_stmt *st, int c, struct fp *out) {
  struct mol m;
  struct se3_error e;
  mol_init(&m);
  cr_assert_eq(mol_from_blob(sqlite3_column_blob(st, c), (size_t)sqlite3_column_bytes(st, c), &m, &e), 0, "%s",
               se3_error_str(&e).s);
  cr_assert_eq(fp_morgan(&m, 2, out), 0);
  mol_free(&m);
}

/* Each hit of db_p (a predict's, whose database holds no training set)
 * against db_a's train split, computed again here: ranked_hits.nearest_train
 * names the train-split molecule of the highest Tanimoto similarity (ties:
 * the lower id; its name, else its SMILES), and similarity is that
 * similarity; hits.csv's last columns (in wd) are the view's. Returns the
 * hits' median similarity, as rank's log gives it. */
static double check_nearest_from_model(const char *db_a, const char *db_p, const char *wd) {
  sqlite3 *a = NULL, *p = NULL;
  cr_assert_eq(sqlite3_open_v2(db_a, &a, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  cr_assert_eq(sqlite3_open_v2(db_p, &p, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  cr_assert_eq(tu_query_int(db_p, "SELECT count(*) FROM splits"), 0, "predict's database holds a split");
  sqlite3_stmt *tr = NULL, *hits = NULL;
  cr_assert_eq(sqlite3_prepare_v2(a,
                                  "SELECT coalesce(nullif(m.name, ''), m.smiles), m.mol FROM splits s JOIN molecules m "
                                  "ON m.id = s.mol_id WHERE s.split = 'train' ORDER BY m.id",
                                  -1, &tr, NULL),
               SQLITE_OK);
  cr_assert_eq(
      sqlite3_prepare_v2(p,
                         "SELECT h.rank, h.nearest_train, h.similarity, m.mol FROM ranked_hits h JOIN molecules "
                         "m ON m.id = h.mol_id ORDER BY h.rank",
                         -1, &hits, NULL),
      SQLITE_OK);
  struct fp train[64];
  char names[64][64];
  int n_train = 0;
  while (sqlite3_step(tr) == SQLITE_ROW) {
    cr_assert_lt(n_train, 64);
    snprintf(names[n_train], sizeof names[n_train], "%s", sqlite3_column_text(tr, 0));
    stored_fp(tr, 1, &train[n_train++]);
  }
  cr_assert_gt(n_train, 5, "A's train split holds %d molecules", n_train);
  double sims[256];
  int n = 0;
  while (sqlite3_step(hits) == SQLITE_ROW) {
    cr_assert_lt(n, 256);
    cr_assert_neq(sqlite3_column_type(hits, 1), SQLITE_NULL, "hit %d has no nearest training molecule", n + 1);
    struct fp h;
    stored_fp(hits, 3, &h);
    double best = -1;
    int at = -1;
    for (int i = 0; i < n_train; i++) {
      double t = fp_tanimoto(&h, &train[i]);
      if (t > best) best = t, at = i;
    }
    double got = sqlite3_column_double(hits, 2);
    cr_assert(got >= 0 && got <= 1, "hit %d: similarity %g", n + 1, got);
    cr_assert_float_eq(got, best, 1e-12, "hit %d: similarity %g, the best of A's train split %g", n + 1, got, best);
    cr_assert_str_eq((const char *)sqlite3_column_text(hits, 1), names[at], "hit %d: another nearest molecule", n + 1);
    sims[n++] = got;
  }
  cr_assert_gt(n, 5, "%d hits", n);
  sqlite3_finalize(tr);
  sqlite3_finalize(hits);
  sqlite3_close(a);
  sqlite3_close(p);
  /* hits.csv's nearest_train and similarity: the view's */
  char *view =
           tu_query(db_p, "SELECT nearest_train || '|' || printf('%.9g', similarity) FROM ranked_hits ORDER BY rank"),
       *csv = NULL;
  cr_assert_eq(tu_sh(&csv, "tail -n +2 %s/hits.csv | awk -F, '{print $12 \"|\" $13}'", wd), 0);
  cr_assert_str_eq(csv, view, "hits.csv's nearest_train and similarity differ from ranked_hits'");
  free(csv);
  free(view);
  /* and hits.sdf's tags, one of each a hit */
  cr_assert_eq(tu_sh(&csv, "grep -c -e '^>  *<nearest_train>' %s/hits.sdf", wd), 0);
  cr_assert_eq(atoi(csv), n, "hits.sdf: %s nearest_train tags for %d hits", csv, n);
  free(csv);
  for (int i = 1; i < n; i++) /* sorted, for the median */
    for (int j = i; j > 0 && sims[j - 1] > sims[j]; j--) {
      double t = sims[j];
      sims[j] = sims[j - 1];
      sims[j - 1] = t;
    }
  return n % 2 ? sims[n / 2] : 0.5 * (sims[n / 2 - 1] + sims[n / 2]);
}

/* src without the records of its training set: a model trained before
 * they were written. */
static void strip_train_set(const char *src, const char *dst) {
  struct se3_ckpt c;
  struct se3_ckpt_writer w;
  struct se3_error err;
  cr_assert_eq(se3_ckpt_load(&c, src, &err), 0, "%s", se3_error_str(&err).s);
  cr_assert_eq(se3_ckpt_begin(&w, dst, &err), 0, "%s", se3_error_str(&err).s);
  int dropped = 0;
  for (int i = 0; i < c.n_rec; i++) {
    const struct se3_ckpt_record *r = &c.rec[i];
    if (!strncmp(r->name, "train_", 6)) {
      dropped++;
      continue;
    }
    void *host = malloc((size_t)r->count * se3_ckpt_type_size(r->type) + 1);
    cr_assert_eq(se3_ckpt_get(&c, r->name, r->type, host, r->count), 0);
    se3_ckpt_put(&w, r->name, r->type, host, r->count);
    free(host);
  }
  se3_ckpt_free(&c);
  cr_assert_eq(dropped, 3, "%s: %d records of a training set", src, dropped);
  cr_assert_eq(se3_ckpt_commit(&w, &err), 0, "%s", se3_error_str(&err).s);
}

/* predict fills each hit's nearest training molecule from the training set
 * the model carries (its database holds none), as A's own workflow does
 * from its split: a library unlike the training set (Delaney's pesticides
 * against QM9's small molecules) is warned about with its median; the
 * training molecules themselves are their own nearest at 1; a model from
 * before the training set travelled still scores, its hits without one and
 * the log saying why, once. */
Test(predict, the_nearest_training_molecule_travels_with_the_model) {
  char *dir = tu_tmpdir("predict_domain");
  write_libraries(dir);
  char lib[1024], wd[1100], db_a[1100], db_p[1200], want[256];
  snprintf(lib, sizeof lib, "%s/lib.smi", dir);
  train_a(dir, lib);
  snprintf(db_a, sizeof db_a, "%s/A/screen.db", dir);
  char *out = NULL;
  /* far: every hit under 0.3 */
  snprintf(wd, sizeof wd, "%s/P", dir);
  cr_assert_eq(tu_se3(&out, "predict %s/A %s --workdir %s", dir, lib, wd), 0, "%s", out);
  snprintf(db_p, sizeof db_p, "%s/screen.db", wd);
  double median = check_nearest_from_model(db_a, db_p, wd);
  cr_assert_lt(median, 0.3, "Delaney's first ten against QM9: median %g", median);
  snprintf(want, sizeof want,
           "warning: the library is far from the model's training set: the median similarity of %lld "
           "hits to their nearest training molecule is %.2f (",
           tu_query_int(db_p, "SELECT count(*) FROM ranks"), median);
  cr_assert(strstr(out, want) && strstr(out, "% under 0.3; "), "no warning \"%s\":\n%s", want, out);
  free(out);
  /* near: the training molecules themselves */
  snprintf(wd, sizeof wd, "%s/Q", dir);
  cr_assert_eq(tu_se3(&out, "predict %s/A %s --workdir %s", dir, tu_src("workflows/data/qm9_mini.sdf"), wd), 0, "%s",
               out);
  snprintf(db_p, sizeof db_p, "%s/screen.db", wd);
  median = check_nearest_from_model(db_a, db_p, wd);
  snprintf(want, sizeof want, "nearest training molecules: the median similarity of 20 hits is %.2f (", median);
  cr_assert(strstr(out, want) && !strstr(out, "far from"), "not \"%s\":\n%s", want, out);
  free(out);
  cr_assert_float_eq(median, 1.0, 1e-12);
  long long n_train = tu_query_int(db_a, "SELECT count(*) FROM splits WHERE split = 'train'");
  cr_assert_eq(tu_query_int(db_p, "SELECT count(*) FROM ranked_hits WHERE nearest_train = name AND similarity = 1"),
               n_train, "the training molecules are not their own nearest at 1");
  /* a model from before: scored, no nearest, the log says why once */
  char old[1100];
  snprintf(old, sizeof old, "%s/old.ckpt", dir);
  char best[1100];
  snprintf(best, sizeof best, "%s/A/models/train-0/best.ckpt", dir);
  strip_train_set(best, old);
  snprintf(wd, sizeof wd, "%s/O", dir);
  cr_assert_eq(tu_se3(&out, "predict %s %s --workdir %s", old, lib, wd), 0, "%s", out);
  const char *note = "carries no training set (trained before 2026-11-29)";
  char *at = strstr(out, note);
  cr_assert(at && !strstr(at + 1, note) && strstr(out, old), "the note, once, naming the file:\n%s", out);
  free(out);
  snprintf(db_p, sizeof db_p, "%s/screen.db", wd);
  cr_assert_gt(tu_query_int(db_p, "SELECT count(*) FROM ranks"), 5);
  cr_assert_eq(tu_query_int(db_p, "SELECT count(*) FROM ranked_hits WHERE nearest_train IS NOT NULL OR similarity IS "
                                  "NOT NULL"),
               0);
  free(dir);
}

/* A train split larger than the bound a model carries (SE3_TRAIN_SET_MAX;
 * here 5 of 20) travels as an evenly spaced sample of it, in id order,
 * each molecule with its own fingerprint and name; a split marks which of
 * the molecules are the training set's. */
Test(predict, a_large_training_set_travels_as_an_even_sample) {
  char *dir = tu_tmpdir("predict_domain_sample");
  write_libraries(dir);
  char lib[1024], db[1100];
  struct se3_error err = {0};
  snprintf(lib, sizeof lib, "%s/lib.smi", dir);
  char *wf = write_a(dir, lib), *out = NULL;
  cr_assert_eq(tu_se3(&out, "run %s --until ingest", wf), 0, "%s", out);
  free(out);
  free(wf);
  snprintf(db, sizeof db, "%s/A/screen.db", dir);
  sqlite3 *h = NULL;
  sqlite3_stmt *st = NULL;
  cr_assert_eq(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  cr_assert_eq(
      sqlite3_prepare_v2(h, "SELECT id, name, mol FROM molecules WHERE set_name = 'train' ORDER BY id", -1, &st, NULL),
      SQLITE_OK);
  int64_t ids[32];
  char names[32][64];
  struct fp fps[32];
  int n = 0;
  while (sqlite3_step(st) == SQLITE_ROW && n < 32) {
    ids[n] = sqlite3_column_int64(st, 0);
    snprintf(names[n], sizeof names[n], "%s", sqlite3_column_text(st, 1));
    stored_fp(st, 2, &fps[n++]);
  }
  sqlite3_finalize(st);
  cr_assert_eq(n, 20);
  struct train_set ts;
  cr_assert_eq(train_set_build(h, "main", ids, NULL, n, 5, &ts, &err), 0, "%s", se3_error_str(&err).s);
  cr_assert_eq(ts.n, 5);
  cr_assert_eq(ts.total, 20);
  for (int k = 0; k < 5; k++) {
    cr_assert_eq(ts.ids[k], ids[4 * k], "sample %d: molecule %lld, not %lld", k, (long long)ts.ids[k],
                 (long long)ids[4 * k]);
    cr_assert_str_eq(ts.names[k], names[4 * k]);
    cr_assert(!memcmp(ts.fps[k].w, fps[4 * k].w, sizeof fps[0].w) && ts.fps[k].n_set == fps[4 * k].n_set);
  }
  train_set_free(&ts);
  unsigned char split[32];
  for (int i = 0; i < n; i++)
    split[i] = i % 2 ? SE3_SPLIT_VALID : SE3_SPLIT_TRAIN;
  cr_assert_eq(train_set_build(h, "main", ids, split, n, 0, &ts, &err), 0, "%s", se3_error_str(&err).s);
  cr_assert_eq(ts.n, 10);
  cr_assert_eq(ts.total, 10);
  for (int k = 0; k < 10; k++)
    cr_assert_eq(ts.ids[k], ids[2 * k]);
  train_set_free(&ts);
  sqlite3_close(h);
  free(dir);
}
