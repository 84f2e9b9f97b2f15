/* A damaged or lost checkpoint never blocks training: the rerun reports the
 * file and what is wrong in one line, recomputes from the last good
 * checkpoint, and ends exactly where an uninterrupted run ends (checkpoints
 * byte-equal, metrics and scores equal). Before, the ledger said the epoch
 * was done and every rerun failed on the file. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/testutil.h"

enum { EPOCHS = 6 };

static char *write_wf(const char *dir, const char *extra) {
  char yaml[2048];
  snprintf(
      yaml, sizeof yaml,
      "workflow: t\nworkdir: ref\nrun: {progress: none}\n"
      "sets:\n  train:\n    - path: %s\n      labels_csv: {path: %s, join: mol_id, columns: [gap, u0]}\n"
      "stages:\n  ingest: {workers: 1}\n  graph: {edges: radius+bonds, cutoff: 4.0}\n"
      "  train: {ensemble: 1, target: u0, epochs: %d, batch_size: 4, augment: true, arch: {layers: 1, degrees: 2, channels: 4}}\n%s",
      tu_src("workflows/data/qm9_mini.sdf"), tu_src("workflows/data/qm9_mini.sdf.csv"), EPOCHS, extra);
  return tu_write(dir, "wf.yaml", yaml);
}

/* The reference run in DIR/ref, and DIR/wd holding its database as the graph
 * stage left it. */
static void reference(const char *dir, const char *wf, const char *until) {
  char *out = NULL;
  cr_assert_eq(tu_se3(&out, "run %s --until graph", wf), 0, "%s", out);
  free(out);
  cr_assert_eq(tu_sh(NULL, "mkdir -p %s/wd && cp %s/ref/screen.db %s/wd/", dir, dir, dir), 0);
  cr_assert_eq(tu_se3(&out, "run %s %s%s", wf, until ? "--until " : "", until ? until : ""), 0, "%s", out);
  free(out);
}

/* Runs training in DIR/wd until epoch `fail_at` + 1 cannot be saved (its
 * checkpoint's name, epoch-<fail_at + 1>.ckpt, is taken by a folder): the
 * `fail_at` epochs before it are done in the ledger, their last two
 * checkpoints on disk. */
static void train_until_failing(const char *dir, const char *wf, int fail_at) {
  char *out = NULL;
  cr_assert_eq(tu_sh(NULL, "mkdir -p %s/wd/models/train-0/epoch-%d.ckpt", dir, fail_at + 1), 0);
  int rc = tu_se3(&out, "run %s --workdir %s/wd", wf, dir);
  cr_assert_eq(rc, 1, "%s", out);
  char want[64];
  snprintf(want, sizeof want, "epoch-%d.ckpt", fail_at + 1);
  cr_assert(strstr(out, want), "%s", out);
  free(out);
  cr_assert_eq(tu_sh(NULL, "rmdir %s/wd/models/train-0/epoch-%d.ckpt", dir, fail_at + 1), 0);
  char db[1100];
  snprintf(db, sizeof db, "%s/wd/screen.db", dir);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM stage_chunks WHERE stage='train'"), fail_at);
}

static void flip_middle_byte(const char *path) {
  cr_assert_eq(tu_sh(NULL,
                     "f=%s; n=$(stat -c %%s $f); printf '\\x5a' | "
                     "dd of=$f bs=1 seek=$((n / 2)) conv=notrunc status=none",
                     path),
               0);
}

static const char *const final_files[] = {"epoch-6.ckpt", "epoch-5.ckpt", "best.ckpt"};

/* Runs DIR/wd again (with `args`): it must succeed, print `damage` (the
 * file and what is wrong) and `recompute` (NULL: not checked), and end where
 * the reference ended. */
static void rerun_recovers(const char *dir, const char *wf, const char *args, const char *damage,
                           const char *recompute) {
  char *out = NULL;
  int rc = tu_se3(&out, "run %s --workdir %s/wd %s", wf, dir, args);
  cr_assert_eq(rc, 0, "the rerun is stuck on the damaged checkpoint:\n%s", out);
  cr_assert(strstr(out, damage), "'%s' not in:\n%s", damage, out);
  if (recompute) cr_assert(strstr(out, recompute), "'%s' not in:\n%s", recompute, out);
  free(out);
  char ref[1100], wd[1100];
  snprintf(ref, sizeof ref, "%s/ref", dir);
  snprintf(wd, sizeof wd, "%s/wd", dir);
  tu_assert_same_training(ref, wd, final_files, 3);
}

/* The latest epoch checkpoint damaged (one byte changed): recomputed from the
 * one before it. */
Test(train_recovery, damaged_epoch_checkpoint_is_recomputed) {
  char *dir = tu_tmpdir("recover_flip");
  char *wf = write_wf(dir, "");
  reference(dir, wf, NULL);
  train_until_failing(dir, wf, 3);
  char path[1200];
  snprintf(path, sizeof path, "%s/wd/models/train-0/epoch-3.ckpt", dir);
  flip_middle_byte(path);
  char want[1400];
  snprintf(want, sizeof want, "%s: the checkpoint is corrupt (its checksum does not match)", path);
  /* epoch 3's file damaged: epoch 3 recomputed from epoch 2's */
  rerun_recovers(dir, wf, "", want, "recomputing epoch 3 from epoch-2.ckpt");
  free(wf);
  free(dir);
}

/* The latest epoch checkpoint cut short and the one before it deleted:
 * recomputed from the start; also a plain deleted one. */
Test(train_recovery, truncated_and_deleted_checkpoints_are_recomputed) {
  char *dir = tu_tmpdir("recover_trunc");
  char *wf = write_wf(dir, "");
  reference(dir, wf, NULL);
  train_until_failing(dir, wf, 4);
  char path[1200];
  snprintf(path, sizeof path, "%s/wd/models/train-0/epoch-4.ckpt", dir);
  cr_assert_eq(tu_sh(NULL, "truncate -s 1000 %s && rm %s/wd/models/train-0/epoch-3.ckpt", path, dir), 0);
  char want[1400];
  snprintf(want, sizeof want, "%s: the checkpoint is cut short", path);
  rerun_recovers(dir, wf, "", want, "recomputing epochs 1..4 from the start");
  free(wf);
  free(dir);
}

/* best.ckpt, the model scoring reads, damaged after training finished: verify
 * names it, and the next run recomputes it before scoring (the scores are the
 * reference's). Before, scoring failed on it at every run. */
Test(train_recovery, damaged_best_checkpoint_is_recomputed_before_scoring) {
  char *dir = tu_tmpdir("recover_best");
  char *wf = write_wf(dir, "  score: {set: train}\n");
  reference(dir, wf, NULL);
  char *out = NULL;
  cr_assert_eq(tu_se3(&out, "run %s --workdir %s/wd --until train", wf, dir), 0, "%s", out);
  free(out);
  char path[1200];
  snprintf(path, sizeof path, "%s/wd/models/train-0/best.ckpt", dir);
  flip_middle_byte(path);
  int rc = tu_se3(&out, "verify %s/wd", dir);
  cr_assert_eq(rc, 1, "%s", out);
  char want[1400];
  snprintf(want, sizeof want, "checkpoint %s: the checkpoint is corrupt", path);
  cr_assert(strstr(out, want), "'%s' not in:\n%s", want, out);
  free(out);
  rc = tu_se3(&out, "run %s --workdir %s/wd", wf, dir);
  cr_assert_eq(rc, 0, "scoring is stuck on the damaged model:\n%s", out);
  snprintf(want, sizeof want, "%s: the checkpoint is corrupt (its checksum does not match) (the model of train/0)",
           path);
  cr_assert(strstr(out, want), "'%s' not in:\n%s", want, out);
  cr_assert(strstr(out, "recomputing epoch"), "%s", out);
  free(out);
  char ref[1100], wd[1100];
  snprintf(ref, sizeof ref, "%s/ref", dir);
  snprintf(wd, sizeof wd, "%s/wd", dir);
  tu_assert_same_training(ref, wd, final_files, 3);
  char a[1200], b[1200];
  snprintf(a, sizeof a, "%s/screen.db", ref);
  snprintf(b, sizeof b, "%s/screen.db", wd);
  char *x = tu_query(a, "SELECT mol_id, score FROM scores ORDER BY 1"),
       *y = tu_query(b, "SELECT mol_id, score FROM scores ORDER BY 1");
  cr_assert(x && y && strlen(x) > 10 && !strcmp(x, y), "scores differ:\n%s\n--\n%s", x, y);
  free(x);
  free(y);
  cr_assert_eq(tu_se3(&out, "verify %s/wd", dir), 0, "%s", out);
  free(out);
  free(wf);
  free(dir);
}

/* A damaged mid-epoch checkpoint (checkpoint_every): reported, and its epoch
 * starts from the beginning, which computes the same. */
Test(train_recovery, damaged_step_checkpoint_restarts_its_epoch) {
  char *dir = tu_tmpdir("recover_step");
  char *wf = write_wf(dir, "");
  char *out = NULL;
  /* checkpoint_every through --set, in the reference too */
  cr_assert_eq(tu_se3(&out, "run %s --until graph", wf), 0, "%s", out);
  free(out);
  cr_assert_eq(tu_sh(NULL, "mkdir -p %s/wd && cp %s/ref/screen.db %s/wd/", dir, dir, dir), 0);
  cr_assert_eq(tu_se3(&out, "run %s --set train.checkpoint_every=2", wf), 0, "%s", out);
  free(out);
  /* epoch 3 cannot be saved: its checkpoint's name is taken by a folder */
  cr_assert_eq(tu_sh(NULL, "mkdir -p %s/wd/models/train-0/epoch-3.ckpt", dir), 0);
  cr_assert_eq(tu_se3(&out, "run %s --workdir %s/wd --set train.checkpoint_every=2", wf, dir), 1, "%s", out);
  free(out);
  cr_assert_eq(tu_sh(NULL, "rmdir %s/wd/models/train-0/epoch-3.ckpt", dir), 0);
  char path[1200];
  snprintf(path, sizeof path, "%s/wd/models/train-0/step.ckpt", dir);
  cr_assert_eq(access(path, F_OK), 0, "no mid-epoch checkpoint was left");
  flip_middle_byte(path);
  char want[1400];
  snprintf(want, sizeof want,
           "%s: the checkpoint is corrupt (its checksum does not match); epoch 3 starts from its beginning instead",
           path);
  rerun_recovers(dir, wf, "--set train.checkpoint_every=2", want, NULL);
  free(wf);
  free(dir);
}
