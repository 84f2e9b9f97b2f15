/* The trainer (models/trainer.h) alone: molecules in memory, checkpoints in
 * a folder, no database and no workflow. The train stage's promises rest on
 * it: an epoch resumed from the checkpoint before it, an epoch stopped by a
 * signal part-way and resumed, and epochs recomputed after their
 * checkpoints were lost all end with the bits of an uninterrupted run; its
 * evaluation reports the target's units. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chem/graph.h"
#include "chem/mol.h"
#include "models/cpu/table.h"
#include "models/trainer.h"
#include "tests/testutil.h"

#define N 24
#define EPOCHS 3

static struct graph graphs[N];
static double labels[N];
static volatile sig_atomic_t stop_flag;
static int stop_after; /* io.advance raises the stop flag after this many steps (0: never) */
static int steps_seen;

static void data_make(void) {
  tu_seed(11);
  for (int i = 0; i < N; i++) {
    struct mol m;
    mol_init(&m);
    tu_chain_mol(&m, 3 + i % 7, i);
    graph_init(&graphs[i]);
    tu_graph_build(&m, &graphs[i]);
    double heavy = 0; /* a label the graph determines: heavy atoms and the mean edge length */
    for (int a = 0; a < m.n_atoms; a++)
      heavy += m.atoms[a].z > 1;
    double len = 0;
    for (int e = 0; e < graphs[i].n_edges; e++) {
      const float *r = graphs[i].rel_pos + 3 * e;
      len += sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2]);
    }
    labels[i] = 2.0 * heavy + (graphs[i].n_edges ? len / graphs[i].n_edges : 0);
    mol_free(&m);
  }
}

static void data_free(void) {
  for (int i = 0; i < N; i++)
    graph_free(&graphs[i]);
}

static int sample(void *user, int i, struct se3_sample *s, char *why, size_t whylen) {
  (void)user, (void)why, (void)whylen;
  const struct graph *g = &graphs[i];
  *s = (struct se3_sample){g->n_nodes, g->n_edges, g->node_feat, g->edge_feat, g->rel_pos, g->src, g->dst, NULL};
  return 0;
}

static char log_text[8192];
static void log_line(void *user, const char *line) {
  (void)user;
  size_t o = strlen(log_text);
  snprintf(log_text + o, sizeof log_text - o, "%s\n", line);
}

static void advance(void *user, int64_t n) {
  (void)user, (void)n;
  if (stop_after && ++steps_seen == stop_after) stop_flag = 1;
}

/* A trainer of member 0 writing under dir, as the train stage sets one up. */
static void trainer_make(struct se3_trainer *t, const char *dir) {
  memset(t, 0, sizeof *t);
  t->io =
      (struct se3_trainer_io){.writer = 1, .stop = &stop_flag, .sample = sample, .advance = advance, .log = log_line};
  t->epochs = EPOCHS;
  t->batch = 5;
  t->augment = 1;
  t->ensemble = 1;
  t->ckpt_every = 0;
  t->loss = NN_LOSS_L1;
  t->adam = (struct nn_adam){0.9, 0.999, 1e-8, 0.01, 1};
  t->seed = 7;
  t->target = "y";
  t->fingerprint = 0x5eed;
  t->n = N;
  t->y = malloc(N * sizeof *t->y);
  t->atoms = malloc(N * sizeof *t->atoms);
  t->edges = malloc(N * sizeof *t->edges);
  t->base = calloc(N, sizeof *t->base);
  unsigned char split[N];
  int perm[N];
  se3_split_random(N, split, perm, 3, 4, 4);
  for (int s = 0; s < 3; s++)
    t->idx[s] = malloc(N * sizeof(int));
  for (int i = 0; i < N; i++) {
    t->y[i] = labels[i];
    t->atoms[i] = graphs[i].n_nodes;
    t->edges[i] = graphs[i].n_edges;
    t->idx[split[i]][t->cnt[split[i]]++] = i;
  }
  cr_assert(t->cnt[SE3_SPLIT_TRAIN] == N - 8 && t->cnt[SE3_SPLIT_VALID] == 4 && t->cnt[SE3_SPLIT_TEST] == 4);
  struct se3_config mc = {.layers = 1,
                          .degrees = 2,
                          .channels = 4,
                          .heads = 2,
                          .channels_div = 2,
                          .node_in = graphs[0].node_width,
                          .edge_in = GRAPH_EDGE_WIDTH,
                          .radial_hidden = 8,
                          .mlp_hidden = 8,
                          .pool_max = 1,
                          .outputs = 1,
                          .envelope = SE3_ENVELOPE_POLY,
                          .bonds_kept = 1,
                          .cutoff = 2.6f};
  struct se3_error err;
  t->net = se3_net_create(nn_backend_cpu(), &mc, 0, &err);
  cr_assert(t->net, "%s", se3_error_str(&err).s);
  se3_config_format(&mc, t->arch, sizeof t->arch);
  snprintf(t->models_dir, sizeof t->models_dir, "%s", dir);
  cr_assert_eq(se3_trainer_standardize(t), SE3_TRAIN_OK, "%s", t->err);
  cr_assert_eq(se3_trainer_open(t, 2e-3, 2e-4, 0, 0), SE3_TRAIN_OK, "%s", t->err);
  char member[PATH_MAX];
  se3_trainer_member_dir(t, 0, member, sizeof member);
  mkdir(dir, 0755);
  mkdir(member, 0755);
}

/* Epochs from..to-1 of member 0; the return of the last call. */
static int train_epochs(struct se3_trainer *t, int from, int to) {
  for (int e = from; e < to; e++) {
    int rc = se3_trainer_state_before(t, 0, e);
    if (rc) return rc;
    struct se3_eval tr, va;
    double lr;
    int early;
    rc = se3_trainer_epoch(t, e, 0, 1, &tr, &va, &lr, &early);
    if (rc) return rc;
    cr_assert(isfinite(tr.loss) && isfinite(va.loss), "epoch %d: loss %g, valid loss %g", e + 1, tr.loss, va.loss);
  }
  return SE3_TRAIN_OK;
}

static void same_file(const char *a_dir, const char *b_dir, const char *name) {
  char a[PATH_MAX], b[PATH_MAX];
  snprintf(a, sizeof a, "%s/train-0/%s", a_dir, name);
  snprintf(b, sizeof b, "%s/train-0/%s", b_dir, name);
  size_t la = 0, lb = 0;
  char *x = tu_read(a, &la), *y = tu_read(b, &lb);
  cr_assert(x && y, "%s or %s is missing", a, b);
  cr_assert(la == lb && !memcmp(x, y, la), "%s and %s differ", a, b);
  free(x);
  free(y);
}

static char tmp_root[PATH_MAX];

/* One uninterrupted run of EPOCHS epochs into <root>/whole. */
static void whole_run(void) {
  struct se3_trainer t;
  char dir[PATH_MAX + 16];
  snprintf(dir, sizeof dir, "%s/whole", tmp_root);
  trainer_make(&t, dir);
  cr_assert_eq(train_epochs(&t, 0, EPOCHS), SE3_TRAIN_OK, "%s", t.err);
  se3_trainer_free(&t);
}

static void setup(void) {
  char name[64]; /* the tests run side by side, each in a process of its own */
  snprintf(name, sizeof name, "trainer-%d", (int)getpid());
  char *d = tu_tmpdir(name);
  cr_assert(d);
  snprintf(tmp_root, sizeof tmp_root, "%s", d);
  free(d);
  stop_flag = 0;
  stop_after = steps_seen = 0;
  data_make();
  whole_run();
}

static void teardown(void) {
  data_free();
  char *out = NULL;
  tu_sh(&out, "rm -rf '%s'", tmp_root);
  free(out);
}

TestSuite(trainer, .init = setup, .fini = teardown, .timeout = 300);

Test(trainer, a_run_resumed_from_an_epoch_checkpoint_ends_with_the_same_bits) {
  char whole[PATH_MAX + 16], dir[PATH_MAX + 16];
  snprintf(whole, sizeof whole, "%s/whole", tmp_root);
  snprintf(dir, sizeof dir, "%s/resumed", tmp_root);
  struct se3_trainer t;
  trainer_make(&t, dir);
  cr_assert_eq(train_epochs(&t, 0, 1), SE3_TRAIN_OK, "%s", t.err);
  se3_trainer_free(&t); /* as a process that ended after its first epoch */
  trainer_make(&t, dir);
  cr_assert_eq(train_epochs(&t, 1, EPOCHS), SE3_TRAIN_OK, "%s", t.err);
  se3_trainer_free(&t);
  same_file(whole, dir, "epoch-3.ckpt");
  same_file(whole, dir, "best.ckpt");
}

Test(trainer, an_epoch_stopped_part_way_resumes_from_its_step_checkpoint_with_the_same_bits) {
  char whole[PATH_MAX + 16], dir[PATH_MAX + 16], step[PATH_MAX + 64];
  snprintf(whole, sizeof whole, "%s/whole", tmp_root);
  snprintf(dir, sizeof dir, "%s/stopped", tmp_root);
  snprintf(step, sizeof step, "%s/train-0/step.ckpt", dir);
  struct se3_trainer t;
  trainer_make(&t, dir);
  stop_after = 5; /* the signal comes during epoch 2 (4 steps an epoch): after its first step */
  cr_assert_eq(train_epochs(&t, 0, EPOCHS), SE3_TRAIN_STOPPED, "%s", t.err);
  cr_assert_eq(access(step, F_OK), 0, "no mid-epoch checkpoint where the signal stopped the epoch");
  se3_trainer_free(&t);
  stop_flag = 0;
  stop_after = 0;
  log_text[0] = 0;
  trainer_make(&t, dir);
  cr_assert_eq(train_epochs(&t, 1, EPOCHS), SE3_TRAIN_OK, "%s", t.err);
  cr_assert(strstr(log_text, "model 0 epoch 2: resuming from its checkpoint at step 5"), "%s", log_text);
  cr_assert_neq(access(step, F_OK), 0, "the spent step.ckpt was left behind");
  se3_trainer_free(&t);
  same_file(whole, dir, "epoch-3.ckpt");
}

Test(trainer, lost_checkpoints_are_recomputed_to_the_same_bits) {
  char whole[PATH_MAX + 16], dir[PATH_MAX + 16], path[PATH_MAX + 64];
  snprintf(whole, sizeof whole, "%s/whole", tmp_root);
  snprintf(dir, sizeof dir, "%s/lost", tmp_root);
  struct se3_trainer t;
  trainer_make(&t, dir);
  cr_assert_eq(train_epochs(&t, 0, EPOCHS), SE3_TRAIN_OK, "%s", t.err);
  se3_trainer_free(&t);
  for (int e = 1; e <= EPOCHS; e++) { /* every epoch's checkpoint, and the best */
    snprintf(path, sizeof path, "%s/train-0/epoch-%d.ckpt", dir, e);
    unlink(path);
  }
  snprintf(path, sizeof path, "%s/train-0/best.ckpt", dir);
  FILE *f = fopen(path, "r+b"); /* damaged, not gone */
  cr_assert(f);
  fseek(f, 100, SEEK_SET);
  fputc('x', f);
  fclose(f);
  trainer_make(&t, dir);
  cr_assert_eq(se3_trainer_ensure_final(&t, 0), SE3_TRAIN_OK, "%s", t.err);
  se3_trainer_free(&t);
  same_file(whole, dir, "epoch-3.ckpt");
  same_file(whole, dir, "best.ckpt");
}

Test(trainer, evaluation_reports_the_targets_units) {
  char dir[PATH_MAX + 16];
  snprintf(dir, sizeof dir, "%s/whole", tmp_root);
  struct se3_trainer t;
  trainer_make(&t, dir);
  int epoch = -1;
  cr_assert_eq(se3_trainer_ensure_final(&t, 0), SE3_TRAIN_OK, "%s", t.err); /* member 0, as the stage does */
  cr_assert_eq(se3_trainer_restore(&t, "epoch-3.ckpt", &epoch), SE3_TRAIN_OK, "%s", t.err);
  cr_assert_eq(epoch, EPOCHS - 1);
  double keep[N];
  struct se3_eval ev;
  cr_assert_eq(se3_trainer_evaluate(&t, SE3_SPLIT_TEST, &ev, keep), 0, "%s", t.why);
  double mae = 0;
  for (int i = 0; i < t.cnt[SE3_SPLIT_TEST]; i++) {
    cr_assert(isfinite(keep[i]));
    mae += fabs(keep[i] - t.y[t.idx[SE3_SPLIT_TEST][i]]);
  }
  mae /= t.cnt[SE3_SPLIT_TEST];
  cr_assert_float_eq(ev.reg.mae, mae, 1e-9 * (1 + mae), "MAE %g, recomputed from the predictions %g", ev.reg.mae, mae);
  /* the standardisation is the training split's: its mean of the labels */
  double mean = 0;
  for (int i = 0; i < t.cnt[SE3_SPLIT_TRAIN]; i++)
    mean += t.y[t.idx[SE3_SPLIT_TRAIN][i]];
  cr_assert_float_eq(t.mean, mean / t.cnt[SE3_SPLIT_TRAIN], 1e-9);
  se3_trainer_free(&t);
}
