/* The train stage's options through the se3screen binary: atomref, scaffold
 * and column splits, ensembles (and their scores' std), mid-epoch
 * checkpoints under kill -9, scoring with a checkpoint file, and
 * classification of actives vs decoys. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <ctype.h>
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "chem/fingerprint.h"
#include "chem/mol.h"
#include "chem/obbridge.h"
#include "chem/scaffold.h"
#include "common/error.h"
#include "tests/testutil.h"

/* per-element references of the synthetic target */
static double ref_of(const char *el) {
  return !strcmp(el, "C")   ? -38.0
         : !strcmp(el, "H") ? -0.6
         : !strcmp(el, "N") ? -54.5
         : !strcmp(el, "O") ? -75.0
         : !strcmp(el, "F") ? -99.75
                            : NAN;
}

/* sum over a formula's elements ("C3H8O") of count x reference */
static double linear_of_formula(const char *f) {
  double s = 0;
  while (*f) {
    char el[4] = {0};
    int n = 0;
    el[n++] = *f++;
    if (islower((unsigned char)*f)) el[n++] = *f++;
    int count = 0;
    while (isdigit((unsigned char)*f))
      count = 10 * count + (*f++ - '0');
    double r = ref_of(el);
    cr_assert(!isnan(r), "unexpected element %s", el);
    s += (count ? count : 1) * r;
  }
  return s;
}

/* A CSV of labels by record for qm9_mini.sdf: lin (exactly linear in the
 * element counts), wavy (lin plus a non-linear part), fold (0/1/2),
 * badfold (fold, with 7 for record 5). The formulas come from an ingest. */
static char *labels_csv(const char *dir) {
  char yaml[1024];
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: probe\nrun: {progress: none}\nsets:\n  train:\n    - path: %s\n"
           "stages:\n  ingest: {workers: 1}\n",
           tu_src("workflows/data/qm9_mini.sdf"));
  char *wf = tu_write(dir, "probe.yaml", yaml), *out = NULL;
  cr_assert_eq(tu_se3(&out, "run %s --until ingest", wf), 0, "%s", out);
  free(out);
  char db[1100];
  snprintf(db, sizeof db, "%s/probe/screen.db", dir);
  size_t cap = 8192, len = 0;
  char *csv = malloc(cap);
  len += (size_t)snprintf(csv, cap, "lin,wavy,fold,badfold\n");
  int i = 0;
  for (int rec = 1; rec <= 21; rec++) { /* record 9 of the 21 is rejected at ingest */
    char q[128];
    snprintf(q, sizeof q, "SELECT formula FROM molecules WHERE record_no = %d", rec);
    char *f = tu_query(db, q);
    cr_assert_not_null(f);
    f[strcspn(f, "\n")] = 0;
    if (!f[0]) {
      len += (size_t)snprintf(csv + len, cap - len, "0,0,0,0\n");
      free(f);
      continue;
    }
    double lin = linear_of_formula(f);
    free(f);
    int fold = i % 5 == 0 ? 2 : i % 5 == 1 ? 1 : 0;
    len += (size_t)snprintf(csv + len, cap - len, "%.10f,%.10f,%d,%d\n", lin, lin + 3 * sin(1.7 * i), fold,
                            rec == 5 ? 7 : fold);
    i++;
  }
  cr_assert_eq(i, 20);
  char *path = tu_write(dir, "labels.csv", csv);
  free(csv);
  free(wf);
  return path;
}

static char *qm9_wf(const char *dir, const char *labels, const char *train, const char *score) {
  char yaml[2048];
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: work\nrun: {progress: lines, progress_interval_s: 60}\n"
           "sets:\n  train:\n    - path: %s\n      labels_csv: {path: %s, join: record}\n"
           "stages:\n  ingest: {workers: 1}\n  graph: {edges: radius+bonds, cutoff: 4.0}\n  train: {%s}\n%s%s%s",
           tu_src("workflows/data/qm9_mini.sdf"), labels, train, score ? "  score: {" : "", score ? score : "",
           score ? "}\n" : "");
  return tu_write(dir, "wf.yaml", yaml);
}

static double query_double(const char *db, const char *sql) {
  char *s = tu_query(db, sql);
  cr_assert(s && s[0], "no value: %s", sql);
  double v = atof(s);
  free(s);
  return v;
}

/* On a target that is exactly linear in the element counts, atomref
 * recovers the references and the test error vanishes after one epoch;
 * without it the error is large. The score stage adds the references back. */
Test(train_options, atomref_recovers_a_linear_target) {
  char *dir = tu_tmpdir("train_atomref");
  char *labels = labels_csv(dir);
  char *wf = qm9_wf(dir, labels, "ensemble: 1, target: lin, epochs: 1, batch_size: 4, atomref: true", "set: train");
  char *out = NULL;
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  /* (no fluorine in these molecules) */
  cr_assert(strstr(out, "atomref (per-element references of 'lin'): C -38, H -0.6, N -54.5, O -75\n"), "%s", out);
  free(out);
  char db[1100];
  snprintf(db, sizeof db, "%s/work/screen.db", dir);
  double mae_on = query_double(db, "SELECT mae FROM metrics WHERE split='test'");
  cr_assert_lt(mae_on, 1e-6, "test MAE %g with atomref", mae_on);
  /* every score is the label (in the target's units) */
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM scores s JOIN labels l ON l.mol_id = s.mol_id AND l.name = 'lin' "
                                "WHERE abs(s.score - l.value) < 1e-6"),
               20);
  cr_assert_eq(tu_se3(&out, "run %s --set train.atomref=false", wf), 0, "%s", out);
  free(out);
  double mae_off = query_double(db, "SELECT mae FROM metrics WHERE split='test'");
  cr_assert_gt(mae_off, 1.0, "test MAE %g without atomref", mae_off);
  /* a non-linear remainder: the scores reproduce the recorded test MAE */
  cr_assert_eq(tu_se3(&out, "run %s --set train.target=wavy --set train.atomref=true --set train.epochs=2", wf), 0,
               "%s", out);
  free(out);
  double mae_wavy = query_double(db, "SELECT mae FROM metrics WHERE split='test'");
  cr_assert_lt(mae_wavy, 10, "test MAE %g on the wavy target", mae_wavy);
  double from_scores = query_double(db, "SELECT avg(abs(s.score - l.value)) FROM scores s JOIN labels l ON "
                                        "l.mol_id = s.mol_id AND l.name = 'wavy' JOIN splits p ON p.mol_id = s.mol_id "
                                        "WHERE p.split = 'test'");
  cr_assert_lt(fabs(from_scores / mae_wavy - 1), 1e-6, "scores give MAE %.9g, the metric %.9g", from_scores, mae_wavy);
  free(labels);
  free(wf);
  free(dir);
}

/* split.method column honours the column, and names a molecule whose value
 * is not 0, 1 or 2. */
Test(train_options, column_split_follows_the_column) {
  char *dir = tu_tmpdir("train_column");
  char *labels = labels_csv(dir);
  char *wf = qm9_wf(dir, labels, "ensemble: 1, target: lin, epochs: 1, batch_size: 4, split: {method: column, column: fold}", NULL);
  char *out = NULL;
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  cr_assert(strstr(out, "12 train, 4 valid, 4 test (column split)"), "%s", out);
  free(out);
  char db[1100];
  snprintf(db, sizeof db, "%s/work/screen.db", dir);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM splits s JOIN labels l ON l.mol_id = s.mol_id AND l.name='fold' "
                                "WHERE s.split = CASE CAST(l.value AS INTEGER) WHEN 0 THEN 'train' WHEN 1 THEN 'valid' "
                                "ELSE 'test' END"),
               20);
  cr_assert_eq(tu_se3(&out, "run %s --set train.split.column=badfold", wf), 1, "%s", out);
  cr_assert(strstr(out, "stages.train.split.column: molecule ") && strstr(out, "record 5) has badfold = 7; use 0"),
            "%s", out);
  free(out);
  /* a column that is no label of the set: refused before any work (the
   * inputs' labels are read at the start: stages/check_inputs.h) */
  cr_assert_eq(tu_se3(&out, "run %s --set train.split.column=nosuch", wf), 2, "%s", out);
  cr_assert(strstr(out, "stages.train.split.column: 'nosuch' is no label of set 'train'"), "%s", out);
  free(out);
  free(labels);
  free(wf);
  free(dir);
}

/* Scaffold split of 60 drug-like molecules: every framework in exactly one
 * split, the same split for the same seed, another for another seed. */
Test(train_options, scaffold_split_keeps_frameworks_together) {
  char *dir = tu_tmpdir("train_scaffold");
  char yaml[2048];
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: a\nrun: {progress: lines, progress_interval_s: 60}\n"
           "sets:\n  train:\n    - {path: %s, labels: [logp]}\n"
           "stages:\n  ingest: {workers: 2, gen3d_quality: fast}\n  graph: {edges: bonds}\n"
           "  train: {ensemble: 1, target: logp, epochs: 1, batch_size: 8, arch: {layers: 1, channels: 4}, "
           "split: {method: scaffold, seed: 1, valid: 0.15, test: 0.15}}\n",
           tu_src("workflows/data/delaney_first60.csv"));
  char *wf = tu_write(dir, "wf.yaml", yaml), *out = NULL;
  cr_assert_eq(tu_se3(&out, "run %s --until graph", wf), 0, "%s", out);
  free(out);
  cr_assert_eq(tu_sh(NULL, "cd %s && mkdir -p b c && cp a/screen.db b/ && cp a/screen.db c/", dir), 0);
  setenv("OMP_NUM_THREADS", "2", 1); /* the scaffold split must not change it (it went to 1) */
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  cr_assert(strstr(out, "(scaffold split)"), "%s", out);
  cr_assert(strstr(out, "training on 2 OpenMP threads"), "%s", out);
  free(out);
  char dbs[3][1100];
  for (int i = 0; i < 3; i++)
    snprintf(dbs[i], sizeof dbs[i], "%s/%c/screen.db", dir, 'a' + i);
  cr_assert_eq(tu_se3(&out, "run %s --workdir %s/b", wf, dir), 0, "%s", out);
  free(out);
  cr_assert_eq(tu_se3(&out, "run %s --workdir %s/c --set train.split.seed=7", wf, dir), 0, "%s", out);
  free(out);
  const char *q = "SELECT mol_id, split FROM splits ORDER BY mol_id";
  char *sa = tu_query(dbs[0], q), *sb = tu_query(dbs[1], q), *sc = tu_query(dbs[2], q);
  cr_assert(sa && sb && sc);
  cr_assert_str_eq(sa, sb, "the same seed gave another split");
  cr_assert_str_neq(sa, sc, "another seed gave the same split");
  free(sa), free(sb), free(sc);
  /* frameworks: each in one split (keys computed here from the stored molecules) */
  cr_assert_eq(ob_init(), 0);
  for (int d = 0; d < 3; d += 2) {
    sqlite3 *h = NULL;
    cr_assert_eq(sqlite3_open_v2(dbs[d], &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *st = NULL;
    cr_assert_eq(
        sqlite3_prepare_v2(h, "SELECT m.mol, s.split FROM splits s JOIN molecules m ON m.id = s.mol_id", -1, &st, NULL),
        SQLITE_OK);
    char *keys[100], splits[100];
    int n = 0, per[3] = {0};
    while (sqlite3_step(st) == SQLITE_ROW && n < 100) {
      struct mol m;
      struct se3_error e;
      mol_init(&m);
      cr_assert_eq(mol_from_blob(sqlite3_column_blob(st, 0), (size_t)sqlite3_column_bytes(st, 0), &m, &e), 0);
      keys[n] = scaffold_key(&m);
      cr_assert_not_null(keys[n]);
      const char *sp = (const char *)sqlite3_column_text(st, 1);
      splits[n] = sp[0];
      per[sp[0] == 't' && sp[1] == 'r' ? 0 : sp[0] == 'v' ? 1 : 2]++;
      mol_free(&m);
      n++;
    }
    sqlite3_finalize(st);
    sqlite3_close(h);
    cr_assert_eq(n, tu_query_int(dbs[d], "SELECT count(*) FROM splits"));
    cr_assert_geq(n, 50);
    int groups = 0;
    for (int i = 0; i < n; i++) {
      int first = 1;
      for (int j = 0; j < n; j++) {
        if (strcmp(keys[i], keys[j])) continue;
        cr_assert_eq(splits[i], splits[j], "framework '%s' is in two splits", keys[i]);
        if (j < i) first = 0;
      }
      groups += first;
    }
    cr_log_info("%d frameworks; %d train, %d valid, %d test", groups, per[0], per[1], per[2]);
    cr_assert_gt(groups, 10);
    cr_assert(per[1] >= 5 && per[1] <= 9 && per[2] >= 5 && per[2] <= 12, "%d valid, %d test", per[1], per[2]);
    for (int i = 0; i < n; i++)
      free(keys[i]);
  }
  free(wf);
  free(dir);
}

/* ensemble: 2 trains two different models; the scores are their mean and
 * sample std, checked against each member scored alone from its checkpoint
 * file (stages.score.checkpoint). */
Test(train_options, ensemble_scores_are_mean_and_std_of_members) {
  char *dir = tu_tmpdir("train_ensemble");
  char *labels = labels_csv(dir);
  char *wf = qm9_wf(dir, labels, "target: wavy, epochs: 2, batch_size: 4, ensemble: 2, atomref: true", "set: train");
  char *out = NULL;
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  cr_assert(strstr(out, "model 1 test (2 molecules"), "%s", out);
  cr_assert(strstr(out, "the ensemble of 2, test (2 molecules): MAE "), "%s", out);
  free(out);
  char db[1100], ck[2][1100], wd[2][1100], mdb[2][1200];
  snprintf(db, sizeof db, "%s/work/screen.db", dir);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM models WHERE id IN ('train/0', 'train/1')"), 2);
  /* the ensemble's test metrics: those of its members' mean prediction (and not of either member) */
  char *ens = tu_query(db, "SELECT printf('%.6f %.6f', mae, rmse) FROM metrics WHERE model = 'ensemble' AND "
                           "split = 'test' AND epoch = 0");
  char *mean = tu_query(db, "SELECT printf('%.6f %.6f', avg(abs(v - l)), sqrt(avg((v - l) * (v - l)))) FROM "
                            "(SELECT avg(value) AS v, label AS l FROM predictions WHERE split = 'test' "
                            "GROUP BY mol_id)");
  char *one = tu_query(db, "SELECT printf('%.6f %.6f', mae, rmse) FROM metrics WHERE model = 'train/0' AND "
                           "split = 'test'");
  cr_assert(ens && mean && one);
  cr_assert_str_eq(ens, mean);
  cr_assert_str_neq(ens, one);
  free(ens);
  free(mean);
  free(one);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM metrics WHERE split = 'train' AND model = 'train/1'"), 2);
  for (int k = 0; k < 2; k++) {
    snprintf(ck[k], sizeof ck[k], "%s/work/models/train-%d/best.ckpt", dir, k);
    snprintf(wd[k], sizeof wd[k], "%s/member%d", dir, k);
    snprintf(mdb[k], sizeof mdb[k], "%.1100s/screen.db", wd[k]);
  }
  cr_assert_neq(tu_sh(NULL, "cmp -s %s %s", ck[0], ck[1]), 0, "the two members are the same model");
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM scores WHERE model = 'train' AND std > 0"), 20);
  for (int k = 0; k < 2; k++) {
    cr_assert_eq(tu_sh(NULL, "mkdir -p %s && cp %s %s/", wd[k], db, wd[k]), 0);
    cr_assert_eq(tu_se3(&out, "run %s --workdir %s --set score.checkpoint=%s", wf, wd[k], ck[k]), 0, "%s", out);
    cr_assert(strstr(out, "score: the configuration changed"), "%s", out);
    cr_assert_null(strstr(out, "train: the configuration changed"), "%s", out);
    free(out);
    /* the model named by its path from the workflow's folder, as a workflow there writes it */
    char q[1300];
    snprintf(q, sizeof q, "SELECT count(*) FROM scores WHERE model = 'work/models/train-%d/best.ckpt' AND std IS NULL",
             k);
    cr_assert_eq(tu_query_int(mdb[k], q), 20);
  }
  char *bad = NULL;
  cr_assert_eq(tu_sh(&bad,
                     "sqlite3 -readonly '%s' \"ATTACH '%s' AS a; ATTACH '%s' AS b; SELECT count(*) FROM main.scores e "
                     "JOIN a.scores x USING (mol_id) JOIN b.scores y USING (mol_id) WHERE "
                     "abs(e.score - (x.score + y.score) / 2) > 1e-9 * (1 + abs(e.score)) OR "
                     "abs(e.std - abs(x.score - y.score) / sqrt(2)) > 1e-9 * (1 + e.std) OR x.score = y.score\"",
                     db, mdb[0], mdb[1]),
               0, "%s", bad);
  cr_assert_eq(atoi(bad), 0, "%s molecules' ensemble scores are not the members' mean and std", bad);
  free(bad);
  free(labels);
  free(wf);
  free(dir);
}

/* stages.score.checkpoint: a missing or damaged file is an error naming it. */
Test(train_options, a_bad_score_checkpoint_is_explained) {
  char *dir = tu_tmpdir("score_checkpoint");
  char *labels = labels_csv(dir);
  char *wf = qm9_wf(dir, labels, "ensemble: 1, target: lin, epochs: 1, batch_size: 8", "set: train");
  char *out = NULL;
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  free(out);
  /* a missing one is a configuration error, found before anything runs */
  cr_assert_eq(tu_se3(&out, "run %s --set score.checkpoint=%s/none.ckpt", wf, dir), 2, "%s", out);
  cr_assert(strstr(out, "stages.score.checkpoint: ") && strstr(out, "none.ckpt"), "%s", out);
  free(out);
  cr_assert_eq(tu_sh(NULL,
                     "cp %s/work/models/train-0/best.ckpt %s/damaged.ckpt && printf 'XXXX' | "
                     "dd of=%s/damaged.ckpt bs=1 seek=200 conv=notrunc 2>/dev/null",
                     dir, dir, dir),
               0);
  /* a damaged one too: its card is read when the workflow is loaded */
  cr_assert_eq(tu_se3(&out, "run %s --set score.checkpoint=%s/damaged.ckpt", wf, dir), 2, "%s", out);
  cr_assert(strstr(out, "stages.score.checkpoint: ") && strstr(out, "damaged.ckpt"), "%s", out);
  free(out);
  free(labels);
  free(wf);
  free(dir);
}

/* Whether a run is mid-epoch with its mid-epoch checkpoint written, past
 * its first epoch: the folder ckpt (models/train-0) holds an epoch-*.ckpt
 * and step.ckpt, newer than every epoch-*.ckpt (each epoch's end writes
 * epoch-E.ckpt, then removes step.ckpt). Asked while the run is frozen: a
 * SIGKILL now must make the next run resume from that step. */
static int mid_epoch_checkpointed(void *ckpt) {
  char path[1200];
  struct stat st, ep;
  snprintf(path, sizeof path, "%s/step.ckpt", (const char *)ckpt);
  if (stat(path, &st) != 0) return 0;
  DIR *d = opendir(ckpt);
  if (!d) return 0;
  int newest = 1, epochs = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (!strncmp(e->d_name, "epoch-", 6) && strlen(e->d_name) > 11 &&
        !strcmp(e->d_name + strlen(e->d_name) - 5, ".ckpt")) { /* (not a writer's temporary) */
      epochs++;
      snprintf(path, sizeof path, "%s/%s", (const char *)ckpt, e->d_name);
      /* (timestamps are as coarse as the kernel's clock tick: equal is not newer) */
      if (stat(path, &ep) != 0) continue;
      int later = st.st_mtim.tv_sec != ep.st_mtim.tv_sec ? st.st_mtim.tv_sec > ep.st_mtim.tv_sec
                                                         : st.st_mtim.tv_nsec > ep.st_mtim.tv_nsec;
      if (!later) newest = 0;
    }
  closedir(d);
  return newest && epochs > 0;
}

/* checkpoint_every: one kill -9 in a state chosen to be mid-epoch with its
 * checkpoint written, then kill -9 at random moments; the resumed runs pick
 * up from the mid-epoch checkpoints and still end with checkpoints
 * byte-identical to an uninterrupted run's. The mid-epoch resume is
 * required of the chosen kill only: whether a random one lands mid-epoch
 * is chance (it used to be required of them, and failed by chance when
 * none did). */
Test(train_options, kill9_mid_epoch_resumes_to_identical_checkpoints) {
  char *dir = tu_tmpdir("train_kill9_steps");
  char *labels = labels_csv(dir);
  /* 32 channels: the default 8 now train an epoch of these 16 molecules in
   * a few milliseconds, so most random kills landed in start-up and none
   * mid-epoch; at 32 the run lasts about 2.7 s */
  char *wf =
      qm9_wf(dir, labels,
             "ensemble: 1, target: wavy, epochs: 10, batch_size: 2, augment: true, checkpoint_every: 1, arch: {channels: 32}", NULL);
  char ref[1024], wd[1024], log[1024];
  snprintf(ref, sizeof ref, "%s/work", dir);
  snprintf(wd, sizeof wd, "%s/killed", dir);
  snprintf(log, sizeof log, "%s/log.txt", dir);
  char *out = NULL;
  cr_assert_eq(tu_se3(&out, "run %s --until graph", wf), 0, "%s", out);
  free(out);
  cr_assert_eq(tu_sh(NULL, "mkdir -p %s && cp %s/screen.db %s/", wd, ref, wd), 0);
  /* The killed runs' starting state, restored if they must begin again. */
  char start[1100], reset[3300];
  snprintf(start, sizeof start, "%s/start", dir);
  snprintf(reset, sizeof reset, "rm -rf %s && cp -r %s %s", wd, start, wd);
  cr_assert_eq(tu_sh(NULL, "cp -r %s %s", wd, start), 0);
  double t0 = tu_now();
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  free(out);
  double full = tu_now() - t0;
  cr_log_info("uninterrupted training: %.2f s", full);
  /* the chosen kill, in a workdir of its own: frozen mid-epoch with
   * step.ckpt written, killed, then run to the end, which must resume there */
  char chosen[1100], chosen_ckpt[1200], chosen_log[1100];
  snprintf(chosen, sizeof chosen, "%s/chosen", dir);
  snprintf(chosen_ckpt, sizeof chosen_ckpt, "%s/models/train-0", chosen);
  snprintf(chosen_log, sizeof chosen_log, "%s/chosen-log.txt", dir);
  cr_assert_eq(tu_sh(NULL, "cp -r %s %s", start, chosen), 0);
  char *cargv[] = {"se3screen", "run", (char *)wf, "--workdir", chosen, NULL};
  int cpid = tu_spawn_se3(chosen_log, cargv);
  int sent = tu_signal_in_state(&cpid, 1, cpid, SIGKILL, 120, mid_epoch_checkpointed, chosen_ckpt);
  int cst = tu_wait(cpid);
  cr_assert_eq(sent, 1, "the run was not seen mid-epoch with step.ckpt written (%s; exit %d; see %s)",
               sent == 0 ? "it ended first" : "not in 120 s", cst, chosen_log);
  cr_assert_eq(cst, 128 + SIGKILL, "the chosen kill: exit %d (see %s)", cst, chosen_log);
  cr_assert_eq(tu_se3(&out, "run %s --workdir %s", wf, chosen), 0, "%s", out);
  const char *resume = strstr(out, "resuming from its checkpoint at step");
  cr_assert(resume, "the run after a kill mid-epoch, step.ckpt written, did not resume from it:\n%s", out);
  cr_log_info("the chosen kill: %.*s", (int)strcspn(resume, "\n"), resume);
  free(out);
  const char *const files[] = {"epoch-10.ckpt", "epoch-9.ckpt", "best.ckpt"};
  tu_assert_same_training(ref, chosen, files, 3);
  /* random kills */
  char *argv[] = {"se3screen", "run", (char *)wf, "--workdir", wd, NULL};
  char db[1100];
  snprintf(db, sizeof db, "%s/screen.db", wd);
  int kills = tu_kills_mid_way(log, argv, 0.1, 0.1 + 0.2 * full, 6, reset, db, "train");
  cr_assert_eq(tu_se3(&out, "run %s --workdir %s", wf, wd), 0, "%s", out);
  free(out);
  cr_assert_geq(kills, 6, "only %d runs were killed mid-way", kills);
  char *resumed = NULL;
  tu_sh(&resumed, "grep -c 'resuming from its checkpoint at step' %s", log);
  cr_log_info("%d random kills, %d resumed mid-epoch", kills, resumed ? atoi(resumed) : 0);
  free(resumed);
  tu_assert_same_training(ref, wd, files, 3);
  free(labels);
  free(wf);
  free(dir);
}

/* dir/actives.mol2 and dir/decoys.mol2: the first n_act and n_dec records
 * of DUD-E FABP4's actives and decoys (../shared/data). */
static void fabp4_sample(const char *dir, int n_act, int n_dec) {
  const char *files[2] = {tu_shared("data/screening/dude_fabp4/actives_final.mol2.gz"),
                          tu_shared("data/screening/dude_fabp4/decoys_final.mol2.gz")};
  const char *names[2] = {"actives", "decoys"};
  const int n[2] = {n_act, n_dec};
  for (int i = 0; i < 2; i++)
    cr_assert_eq(tu_sh(NULL, "zcat %s | awk -v n=%d '/^@<TRIPOS>MOLECULE/{k++} k>n{exit} {print}' > %s/%s.mol2",
                       files[i], n[i], dir, names[i]),
                 0);
}

/* Classification: FABP4 actives vs decoys (a handful of each from DUD-E),
 * binary cross-entropy; ROC-AUC, PR-AUC and EF1% recorded for validation and
 * test; scores are probabilities. */
Test(train_options, classification_records_screening_metrics) {
  if (!tu_have_shared()) cr_skip_test("../shared/data is absent");
  char *dir = tu_tmpdir("train_classify");
  fabp4_sample(dir, 12, 28);
  char yaml[2048];
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: work\nrun: {progress: lines, progress_interval_s: 60}\n"
           "sets:\n  train:\n    - {path: actives.mol2, labels: {active: 1}}\n"
           "    - {path: decoys.mol2, labels: {active: 0}}\n"
           "stages:\n  ingest: {workers: 2, coordinates: input}\n  graph: {edges: bonds}\n"
           "  train: {ensemble: 1, target: active, task: classification, epochs: 3, batch_size: 8, lr: 0.003, "
           "arch: {layers: 1, channels: 4}, split: {valid: 0.25, test: 0.3, seed: 3}}\n"
           "  score: {set: train}\n  report: {}\n");
  char *wf = tu_write(dir, "wf.yaml", yaml), *out = NULL;
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  cr_assert(strstr(out, "ROC-AUC") && strstr(out, "EF1%"), "%s", out);
  /* each split's molecules and actives logged, a warning for a split of
   * fewer than 20 actives (12 in all here), the test metrics with their
   * bootstrap intervals */
  cr_assert(strstr(out, "train: split: train ") && strstr(out, " actives ("), "%s", out);
  cr_assert(strstr(out, "warning: the test split holds "), "%s", out);
  cr_assert(!strstr(out, "a scaffold split keeps"), "a random split told about scaffolds: %s", out);
  cr_assert(strstr(out, "in brackets the 95% bootstrap interval (1000 resamples)"), "%s", out);
  free(out);
  /* the same by scaffolds (in a copy): the warning says why and what to try (issue 70) */
  cr_assert_eq(tu_sh(NULL, "cp -r %s/work %s/work_scaffold", dir, dir), 0);
  cr_assert_eq(
      tu_se3(&out, "run %s --workdir %s/work_scaffold --set stages.train.split.method=scaffold --until train", wf, dir),
      0, "%s", out);
  cr_assert(strstr(out, "a scaffold split keeps each scaffold's molecules together") &&
                strstr(out, "`split: {method: cluster}`"),
            "%s", out);
  free(out);
  char db[1100];
  snprintf(db, sizeof db, "%s/work/screen.db", dir);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM molecules"), 40);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM metrics WHERE split = 'valid' AND roc_auc BETWEEN 0 AND 1 AND "
                                "pr_auc BETWEEN 0 AND 1 AND ef1 >= 0 AND mae IS NULL"),
               3);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM metrics WHERE split = 'test' AND roc_auc BETWEEN 0 AND 1 AND "
                                "pr_auc BETWEEN 0 AND 1 AND ef1 >= 0"),
               1);
  /* the test split holds both classes, or its metrics would be undefined */
  cr_assert_eq(tu_query_int(db, "SELECT count(DISTINCT l.value) FROM splits s JOIN labels l ON l.mol_id = s.mol_id "
                                "WHERE s.split = 'test'"),
               2);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM scores WHERE score > 0 AND score < 1 AND std IS NULL"), 40);
  /* the scores give the recorded test ROC-AUC: the fraction of (active, decoy)
   * pairs of the test split ordered correctly, ties counting 1/2 */
  double auc = query_double(db, "SELECT roc_auc FROM metrics WHERE split = 'test'");
  double from_scores = query_double(
      db, "WITH t AS (SELECT s.score AS v, l.value AS y FROM scores s JOIN labels l ON l.mol_id = s.mol_id "
          "JOIN splits p ON p.mol_id = s.mol_id WHERE p.split = 'test') "
          "SELECT avg(CASE WHEN a.v > d.v THEN 1.0 WHEN a.v = d.v THEN 0.5 ELSE 0.0 END) FROM t a, t d "
          "WHERE a.y = 1 AND d.y = 0");
  cr_assert_lt(fabs(auc - from_scores), 1e-9, "scores give ROC-AUC %g, the metric %g", from_scores, auc);
  /* the split's counts as the tables give them */
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM split_counts"), 3);
  cr_assert_eq(tu_query_int(db, "SELECT sum(molecules) FROM split_counts"), 40);
  cr_assert_eq(tu_query_int(db, "SELECT sum(actives) FROM split_counts"), 12);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM split_counts c WHERE actives = (SELECT count(*) FROM splits s "
                                "JOIN labels l ON l.mol_id = s.mol_id AND l.name = 'active' WHERE s.split = c.split "
                                "AND l.value = 1) AND molecules = (SELECT count(*) FROM splits s WHERE s.split = "
                                "c.split) AND compounds <= molecules AND active_compounds <= actives"),
               3);
  /* no compound (the InChIKey's first block) in two splits */
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM (SELECT substr(m.inchikey, 1, 14) FROM splits s JOIN molecules "
                                "m ON m.id = s.mol_id GROUP BY 1 HAVING count(DISTINCT s.split) > 1)"),
               0);
  /* each interval holds its estimate */
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM metrics WHERE split = 'test' AND roc_auc_lo <= roc_auc AND "
                                "roc_auc <= roc_auc_hi AND pr_auc_lo <= pr_auc AND pr_auc <= pr_auc_hi AND "
                                "ef1_lo <= ef1 AND ef1 <= ef1_hi AND roc_auc_lo < roc_auc_hi"),
               1);
  /* the report shows the stored interval, and the splits' counts */
  char *cell = tu_query(db, "SELECT printf('%.3f (%.3f&ndash;%.3f)', roc_auc, roc_auc_lo, roc_auc_hi) FROM metrics "
                            "WHERE split = 'test'");
  cr_assert(cell && cell[0]);
  cell[strcspn(cell, "\n")] = 0;
  char path[1100];
  snprintf(path, sizeof path, "%s/work/report.html", dir);
  size_t len = 0;
  char *html = tu_read(path, &len);
  cr_assert(html, "no report");
  cr_assert(strstr(html, cell), "the report lacks the test ROC-AUC with its interval, %s", cell);
  cr_assert(strstr(html, "Evaluation: the splits") && strstr(html, "Warning: the test split holds "),
            "the report lacks the splits' counts or the warning");
  free(html);
  free(cell);
  free(wf);
  free(dir);
}

/* Cluster split: Butina clusters of Morgan fingerprints, each whole in one
 * split (the clusters computed again here from the stored molecules); the
 * counts of a regression have no actives. */
Test(train_options, cluster_split_keeps_clusters_together) {
  char *dir = tu_tmpdir("train_cluster");
  char yaml[2048];
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: a\nrun: {progress: lines, progress_interval_s: 60}\n"
           "sets:\n  train:\n    - {path: %s, labels: [logp]}\n"
           "stages:\n  ingest: {workers: 2, gen3d_quality: fast}\n  graph: {edges: bonds}\n"
           "  train: {ensemble: 1, target: logp, epochs: 1, batch_size: 8, arch: {layers: 1, channels: 4}, "
           "split: {method: cluster, cluster_distance: 0.7, seed: 1, valid: 0.15, test: 0.15}}\n",
           tu_src("workflows/data/delaney_first60.csv"));
  char *wf = tu_write(dir, "wf.yaml", yaml), *out = NULL;
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  cr_assert(strstr(out, "Butina clusters of ") && strstr(out, "(cluster split)"), "%s", out);
  cr_assert_null(strstr(out, " actives ("), "a regression has no actives: %s", out);
  free(out);
  char db[1100];
  snprintf(db, sizeof db, "%s/a/screen.db", dir);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM split_counts WHERE actives IS NULL AND compounds > 0"), 3);
  cr_assert_eq(ob_init(), 0);
  sqlite3 *h = NULL;
  cr_assert_eq(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  sqlite3_stmt *st = NULL;
  cr_assert_eq(sqlite3_prepare_v2(h,
                                  "SELECT m.mol, s.split FROM splits s JOIN molecules m ON m.id = s.mol_id "
                                  "ORDER BY s.mol_id",
                                  -1, &st, NULL),
               SQLITE_OK);
  struct fp fps[100];
  char splits[100];
  int n = 0, per[3] = {0};
  while (sqlite3_step(st) == SQLITE_ROW && n < 100) {
    struct mol m;
    struct se3_error e;
    mol_init(&m);
    cr_assert_eq(mol_from_blob(sqlite3_column_blob(st, 0), (size_t)sqlite3_column_bytes(st, 0), &m, &e), 0);
    cr_assert_eq(fp_morgan(&m, 2, &fps[n]), 0);
    const char *sp = (const char *)sqlite3_column_text(st, 1);
    splits[n] = sp[0];
    per[sp[0] == 't' && sp[1] == 'r' ? 0 : sp[0] == 'v' ? 1 : 2]++;
    mol_free(&m);
    n++;
  }
  sqlite3_finalize(st);
  sqlite3_close(h);
  cr_assert_geq(n, 50);
  int cl[100];
  int nc = fp_butina(fps, n, 0.7, cl);
  cr_log_info("%d clusters; %d train, %d valid, %d test", nc, per[0], per[1], per[2]);
  cr_assert(nc > 5 && nc < n, "%d clusters of %d", nc, n);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      if (cl[i] == cl[j]) cr_assert_eq(splits[i], splits[j], "cluster %d is in two splits", cl[i]);
  cr_assert(per[1] >= 4 && per[2] >= 4, "%d valid, %d test", per[1], per[2]);
  /* class weights are for classification: a regression refuses them, naming the key */
  cr_assert_neq(tu_se3(&out, "run %s --set train.class_weight=balanced", wf), 0, "%s", out);
  cr_assert(strstr(out, "stages.train.class_weight: balanced is for classification"), "%s", out);
  free(out);
  free(wf);
  free(dir);
}

/* class_weight: balanced weighs each active N / P (the train split's) in
 * the loss: the log says the weight the split's counts give, and the
 * training loss is not the unweighted run's. */
Test(train_options, class_weight_balanced_weighs_actives) {
  if (!tu_have_shared()) cr_skip_test("../shared/data is absent");
  char *dir = tu_tmpdir("train_class_weight");
  fabp4_sample(dir, 8, 40);
  char yaml[2048];
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: a\nrun: {progress: lines, progress_interval_s: 60}\n"
           "sets:\n  train:\n    - {path: actives.mol2, labels: {active: 1}}\n"
           "    - {path: decoys.mol2, labels: {active: 0}}\n"
           "stages:\n  ingest: {workers: 2, coordinates: input}\n  graph: {edges: bonds}\n"
           "  train: {ensemble: 1, target: active, task: classification, epochs: 1, batch_size: 8, "
           "arch: {layers: 1, channels: 4}, split: {valid: 0.2, test: 0.2, seed: 2}}\n");
  char *wf = tu_write(dir, "wf.yaml", yaml), *out = NULL;
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  cr_assert_null(strstr(out, "class_weight balanced"), "%s", out);
  free(out);
  cr_assert_eq(tu_sh(NULL, "cd %s && mkdir b && cp a/screen.db b/", dir), 0);
  cr_assert_eq(tu_se3(&out, "run %s --workdir %s/b --set train.class_weight=balanced", wf, dir), 0, "%s", out);
  char dba[1100], dbb[1100];
  snprintf(dba, sizeof dba, "%s/a/screen.db", dir);
  snprintf(dbb, sizeof dbb, "%s/b/screen.db", dir);
  int n = tu_query_int(dbb, "SELECT molecules FROM split_counts WHERE split = 'train'"),
      p = tu_query_int(dbb, "SELECT actives FROM split_counts WHERE split = 'train'");
  cr_assert(p > 0 && p < n, "%d actives of %d", p, n);
  char want[256];
  snprintf(want, sizeof want,
           "class_weight balanced: an active weighs %.4g in the loss (the train split's %d inactives "
           "over its %d actives)",
           (double)(n - p) / p, n - p, p);
  cr_assert(strstr(out, want), "no '%s' in:\n%s", want, out);
  free(out);
  /* the same split, another loss */
  char *sa = tu_query(dba, "SELECT mol_id, split FROM splits ORDER BY mol_id"),
       *sb = tu_query(dbb, "SELECT mol_id, split FROM splits ORDER BY mol_id");
  cr_assert_str_eq(sa, sb);
  free(sa), free(sb);
  double la = query_double(dba, "SELECT loss FROM metrics WHERE split = 'train'"),
         lb = query_double(dbb, "SELECT loss FROM metrics WHERE split = 'train'");
  cr_log_info("training loss: unweighted %.6f, balanced %.6f", la, lb);
  cr_assert_gt(fabs(la - lb), 1e-6, "the weights changed nothing: %g and %g", la, lb);
  free(wf);
  free(dir);
}
