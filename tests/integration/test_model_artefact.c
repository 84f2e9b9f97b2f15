/* The model as an artefact (issue 31), through the se3screen binary on the
 * bundled QM9 records with tiny models: epochs counted from 1 in the log,
 * the database and the checkpoint names, and a workdir whose checkpoints were
 * named from 0 resumed at the right epoch; every checkpoint carries its card;
 * an ensemble scored from its directory by a score-only workflow gives its
 * own workdir's scores bit for bit, under the same model_hash and a model id
 * as written in the workflow, also after a retraining with fewer members. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "models/checkpoint.h"
#include "tests/testutil.h"

#define TINY "epochs: %d, batch_size: 4, arch: {layers: 1, degrees: 2, channels: 4}"

/* DIR/SUB/wf.yaml: the 20 QM9 records as set `train` (label gap), workdir
 * `work` beside the file, a train stage (target gap, `train` appended to the
 * tiny settings) when train is not NULL and `score` when not NULL. Returns
 * its path. */
static char *write_wf(const char *dir, const char *sub, int epochs, const char *train, const char *score) {
  char yaml[3072], tr[512] = "", folder[1100];
  if (train) snprintf(tr, sizeof tr, "  train: {target: gap, " TINY "%s%s}\n", epochs, train[0] ? ", " : "", train);
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: work\nrun: {progress: none}\n"
           "sets:\n  train:\n    - path: %s\n      labels_csv: {path: %s, join: mol_id, columns: [gap]}\n"
           "stages:\n  ingest: {workers: 1}\n  graph: {edges: radius+bonds, cutoff: 4.0}\n"
           "%s%s%s%s",
           tu_src("workflows/data/qm9_mini.sdf"), tu_src("workflows/data/qm9_mini.sdf.csv"), tr,
           score ? "  score: {" : "", score ? score : "", score ? "}\n" : "");
  snprintf(folder, sizeof folder, "%s/%s", dir, sub);
  cr_assert_eq(tu_sh(NULL, "mkdir -p '%s'", folder), 0);
  return tu_write(folder, "wf.yaml", yaml);
}

/* The number after `key` in text (-1 when it is not there). */
static int number_after(const char *text, const char *key) {
  const char *p = strstr(text, key);
  return p ? atoi(p + strlen(key)) : -1;
}

/* Epochs count from 1 everywhere, and agree: for each member of an
 * ensemble, the log's "best epoch N", models.best_epoch, the test metrics
 * row's epoch, and the epoch checkpoint best.ckpt is a byte copy of
 * (epoch-N.ckpt); the train and valid metrics rows are epochs 1..E. Every
 * checkpoint carries the card (the record "settings"). */
Test(model_artefact, epochs_count_from_one_everywhere) {
  char *dir = tu_tmpdir("artefact_epochs");
  char *wf = write_wf(dir, "a", 2, "ensemble: 2", NULL);
  char *out = NULL;
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  char db[1100];
  snprintf(db, sizeof db, "%s/a/work/screen.db", dir);
  for (int k = 0; k < 2; k++) {
    char key[64], q[256], ck[1200];
    snprintf(key, sizeof key, "model %d test (2 molecules, best epoch ", k);
    int logged = number_after(out, key);
    cr_assert(logged == 1 || logged == 2, "no best epoch 1 or 2 of model %d in the log:\n%s", k, out);
    snprintf(q, sizeof q, "SELECT best_epoch FROM models WHERE id = 'train/%d'", k);
    cr_assert_eq(tu_query_int(db, q), logged, "model %d: the log says best epoch %d, models.best_epoch %lld", k, logged,
                 tu_query_int(db, q));
    snprintf(q, sizeof q, "SELECT epoch FROM metrics WHERE model = 'train/%d' AND split = 'test'", k);
    cr_assert_eq(tu_query_int(db, q), logged, "model %d: the test metrics row is of epoch %lld, the best was %d", k,
                 tu_query_int(db, q), logged);
    for (int s = 0; s < 2; s++) {
      snprintf(q, sizeof q,
               "SELECT group_concat(epoch) FROM (SELECT epoch FROM metrics WHERE model = 'train/%d' "
               "AND split = '%s' ORDER BY epoch)",
               k, s ? "valid" : "train");
      char *epochs = tu_query(db, q);
      cr_assert(epochs && !strcmp(epochs, "1,2\n"), "model %d's %s metrics are of epochs %s", k, s ? "valid" : "train",
                epochs);
      free(epochs);
    }
    cr_assert_eq(tu_sh(NULL, "cmp -s %s/a/work/models/train-%d/best.ckpt %s/a/work/models/train-%d/epoch-%d.ckpt", dir,
                       k, dir, k, logged),
                 0, "model %d: best.ckpt is not epoch-%d.ckpt, its best epoch", k, logged);
    snprintf(ck, sizeof ck, "%s/a/work/models/train-%d/epoch-0.ckpt", dir, k);
    cr_assert_neq(access(ck, F_OK), 0, "%s: no epoch is epoch 0", ck);
    /* the card, in every checkpoint */
    const char *files[] = {"best.ckpt", "epoch-1.ckpt", "epoch-2.ckpt"};
    for (int f = 0; f < 3; f++) {
      snprintf(ck, sizeof ck, "%s/a/work/models/train-%d/%s", dir, k, files[f]);
      struct se3_ckpt c;
      struct se3_error err;
      cr_assert_eq(se3_ckpt_load(&c, ck, &err), 0, "%s", se3_error_str(&err).s);
      const struct se3_ckpt_record *r = se3_ckpt_find(&c, "settings");
      cr_assert(r && r->type == SE3_CK_U8, "%s carries no card (record \"settings\")", ck);
      char *card = strndup((const char *)r->data, r->count);
      cr_assert(strstr(card, "stages.graph.cutoff=4\n") && strstr(card, "stages.graph.edges=radius+bonds\n"),
                "%s: its card does not hold the graph settings:\n%s", ck, card);
      free(card);
      se3_ckpt_free(&c);
    }
  }
  free(out);
  free(wf);
  free(dir);
}

/* A workdir trained before epochs were counted from 1 named the state after
 * the first epoch epoch-0.ckpt. Such a workdir, interrupted after epoch 2 of
 * 3, resumes at epoch 3 from the file that holds epoch 2 (renamed, the log
 * says so), nothing recomputed, and ends where an uninterrupted training
 * does, byte for byte; a finished one whose model row names an epoch's file
 * has the row renamed with the file, so scoring reads the same epoch. */
Test(model_artefact, a_workdir_with_checkpoints_named_from_zero_resumes_at_the_right_epoch) {
  char *dir = tu_tmpdir("artefact_legacy");
  char *wf = write_wf(dir, "a", 3, "ensemble: 1", NULL);
  char *out = NULL;
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  free(out);
  /* "old": the reference's workdir as an earlier se3screen left it after
   * epoch 2 (chunk 1): epoch 2's state named epoch-1.ckpt, epoch 1's
   * epoch-0.ckpt is not there (it was kept, but need not be), epoch 3 not done */
  char ref[1100], old[1100], db[1200], ck[1300];
  snprintf(ref, sizeof ref, "%s/a/work", dir);
  snprintf(old, sizeof old, "%s/old", dir);
  snprintf(db, sizeof db, "%s/screen.db", old);
  snprintf(ck, sizeof ck, "%s/models/train-0", old);
  cr_assert_eq(
      tu_sh(NULL, "cp -r %s %s && rm %s/epoch-3.ckpt && mv %s/epoch-2.ckpt %s/epoch-1.ckpt", ref, old, ck, ck, ck), 0);
  cr_assert_eq(
      tu_sh(NULL,
            "sqlite3 %s \"DELETE FROM stage_chunks WHERE stage = 'train' AND chunk = 2; "
            "DELETE FROM metrics WHERE epoch = 3 OR split = 'test'; DELETE FROM models; DELETE FROM predictions; "
            "UPDATE stage_state SET finalized = 0 WHERE stage = 'train'\"",
            db),
      0);
  cr_assert_eq(tu_se3(&out, "run %s --workdir %s", wf, old), 0, "%s", out);
  cr_assert(strstr(out, "epoch-1.ckpt holds epoch 2 (named from 0 by an earlier se3screen): renamed epoch-2.ckpt"),
            "%s", out);
  cr_assert_null(strstr(out, "recomputing"), "%s", out);
  free(out);
  const char *const files[] = {"epoch-3.ckpt", "epoch-2.ckpt", "best.ckpt"};
  tu_assert_same_training(ref, old, files, 3);
  /* a finished one whose model row names its last epoch's file (no epoch
   * improved: no best.ckpt), epoch-2.ckpt then: renamed, the row follows */
  char fin[1100], fdb[1200], fck[1300];
  snprintf(fin, sizeof fin, "%s/fin", dir);
  snprintf(fdb, sizeof fdb, "%s/screen.db", fin);
  snprintf(fck, sizeof fck, "%s/models/train-0", fin);
  cr_assert_eq(tu_sh(NULL,
                     "cp -r %s %s && cd %s && rm best.ckpt && mv epoch-2.ckpt epoch-1.ckpt && "
                     "mv epoch-3.ckpt epoch-2.ckpt && sqlite3 %s \"UPDATE models SET checkpoint = "
                     "'models/train-0/epoch-2.ckpt'\"",
                     ref, fin, fck, fdb),
               0);
  cr_assert_eq(tu_se3(&out, "run %s --workdir %s", wf, fin), 0, "%s", out);
  cr_assert(strstr(out, "epoch-2.ckpt holds epoch 3 (named from 0 by an earlier se3screen): renamed epoch-3.ckpt"),
            "%s", out);
  free(out);
  char *row = tu_query(fdb, "SELECT checkpoint FROM models");
  cr_assert(row && !strcmp(row, "models/train-0/epoch-3.ckpt\n"), "the model row names %s", row);
  free(row);
  cr_assert_eq(tu_sh(NULL, "cmp -s %s/models/train-0/epoch-3.ckpt %s/epoch-3.ckpt", ref, fck), 0,
               "the model row's file is not the last epoch's");
  free(wf);
  free(dir);
}

/* An ensemble of 2 trained and scored in workdir A; A's directory scored
 * by workflow B, which has no train stage (stages.score.checkpoint:
 * ../a/work): B's scores are A's,
 * mean and std bit for bit, with the same model_hash, and the model id is the
 * path as B's workflow writes it. Each member alone has a model_hash of its
 * own (member 1 is the same training with another seed). */
Test(model_artefact, an_ensemble_scores_the_same_from_its_directory) {
  char *dir = tu_tmpdir("artefact_ensemble");
  char *wa = write_wf(dir, "a", 2, "ensemble: 2", "set: train");
  char *out = NULL;
  cr_assert_eq(tu_se3(&out, "run %s", wa), 0, "%s", out);
  free(out);
  char *wb = write_wf(dir, "b", 0, NULL, "set: train, checkpoint: ../a/work");
  cr_assert_eq(tu_se3(&out, "run %s", wb), 0, "%s", out);
  free(out);
  char a[1100], b[1100];
  snprintf(a, sizeof a, "%s/a/work/screen.db", dir);
  snprintf(b, sizeof b, "%s/b/work/screen.db", dir);
  cr_assert_eq(tu_query_int(a, "SELECT count(*) FROM scores WHERE model = 'train' AND std > 0 AND "
                               "model_hash GLOB '"
                               "[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]"
                               "[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'"),
               20, "A's scores are not 20 ensemble rows with a model_hash of 16 hex digits");
  cr_assert_eq(tu_query_int(b, "SELECT count(*) FROM scores WHERE model = '../a/work'"), 20,
               "B's scores do not name the model as B's workflow writes it");
  /* compared as stored, molecule by molecule (the same records in both) */
  char *diff = NULL;
  cr_assert_eq(tu_sh(&diff,
                     "sqlite3 -readonly '%s' \"ATTACH '%s' AS o; SELECT count(*) FROM main.scores x "
                     "JOIN main.molecules m ON m.id = x.mol_id JOIN o.molecules n ON n.record_no = m.record_no "
                     "JOIN o.scores y ON y.mol_id = n.id WHERE x.score = y.score AND x.std = y.std AND "
                     "x.model_hash = y.model_hash\"",
                     a, b),
               0, "%s", diff);
  cr_assert_eq(atoi(diff), 20, "only %d of 20 molecules have the same score, std and model_hash in A and B",
               atoi(diff));
  free(diff);
  /* each member alone: a model_hash of its own, neither the ensemble's */
  char *hash[3];
  hash[2] = tu_query(a, "SELECT DISTINCT model_hash FROM scores");
  for (int k = 0; k < 2; k++) {
    cr_assert_eq(tu_se3(&out, "run %s --set score.checkpoint=%s/a/work/models/train-%d/best.ckpt", wb, dir, k), 0, "%s",
                 out);
    free(out);
    hash[k] = tu_query(b, "SELECT group_concat(DISTINCT model_hash) FROM scores");
    cr_assert(hash[k] && strlen(hash[k]) == 17, "member %d: model_hash '%s'", k, hash[k]);
  }
  cr_assert(strcmp(hash[0], hash[1]) && strcmp(hash[0], hash[2]) && strcmp(hash[1], hash[2]),
            "model hashes: member 0 %s, member 1 %s, the ensemble %s", hash[0], hash[1], hash[2]);
  for (int k = 0; k < 3; k++)
    free(hash[k]);
  /* A retrained as one model: its folder holds that one member only (the
   * earlier training's second is gone), so B scores what A scores */
  cr_assert_eq(tu_se3(&out, "run %s --set train.ensemble=1", wa), 0, "%s", out);
  cr_assert(strstr(out, "/a/work/models/train-1: 3 checkpoints of an earlier training (this one is an ensemble of 1) "
                        "removed, and the folder"),
            "%s", out);
  free(out);
  cr_assert_eq(tu_se3(&out, "run %s", wb), 0, "%s", out);
  free(out);
  cr_assert_eq(tu_sh(&diff,
                     "sqlite3 -readonly '%s' \"ATTACH '%s' AS o; SELECT count(*) FROM main.scores x "
                     "JOIN main.molecules m ON m.id = x.mol_id JOIN o.molecules n ON n.record_no = m.record_no "
                     "JOIN o.scores y ON y.mol_id = n.id WHERE x.score = y.score AND x.std IS NULL AND y.std IS NULL "
                     "AND x.model_hash = y.model_hash\"",
                     a, b),
               0, "%s", diff);
  cr_assert_eq(atoi(diff), 20, "only %d of 20 molecules have the same score and model_hash in A and B", atoi(diff));
  free(diff);
  free(wa);
  free(wb);
  free(dir);
}
