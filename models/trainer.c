/* trainer.c — the epoch loop, evaluation and checkpoints of trainer.h:
 * molecules in memory, graphs through the io's hooks, no database.
 *
 * Data parallel: rank 0 runs these functions and orders the other processes
 * (io.order) before each epoch and each prediction, sending its state; they
 * follow (se3_trainer_follow) and every process runs run_epoch or predict
 * together. */
#define _GNU_SOURCE
#include "models/trainer.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/cfgtree.h" /* se3_hash_str */
#include "models/model_file.h" /* SE3_STAT_MAX */
#include "models/so3.h"

const char *const se3_split_name[3] = {"train", "valid", "test"};

/* the loss's parameter (objective.h): an active's weight for binary
 * cross-entropy (class_weight), Huber's delta (1) otherwise */
static double loss_param(const struct se3_trainer *t) {
  return t->loss == NN_LOSS_BCE && t->pos_weight > 0 ? t->pos_weight : 1.0;
}

/* A net call's return: on a failure its error (t->net_err) as text in
 * t->why, as the trainer's other reasons are. */
static int net_call(struct se3_trainer *t, int rc) {
  if (rc) se3_error_format(&t->net_err, t->why, sizeof t->why);
  return rc;
}

static int tr_fail(struct se3_trainer *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int tr_fail(struct se3_trainer *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(t->err, sizeof t->err, fmt, ap);
  va_end(ap);
  t->err_kind = SE3_ERR_RUN;
  return SE3_TRAIN_ERROR;
}

/* tr_fail with a callee's error: its text and its kind. */
static int tr_fail_err(struct se3_trainer *t, const struct se3_error *e) {
  se3_error_format(e, t->err, sizeof t->err);
  t->err_kind = e->kind != SE3_ERR_NONE ? e->kind : SE3_ERR_RUN;
  return SE3_TRAIN_ERROR;
}

static void tr_log(struct se3_trainer *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tr_log(struct se3_trainer *t, const char *fmt, ...) {
  char line[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (t->io.log) t->io.log(t->io.user, line);
}

static void advance(struct se3_trainer *t, int64_t n) {
  if (t->io.advance) t->io.advance(t->io.user, n);
}

static void release(struct se3_trainer *t, struct se3_sample *s) {
  if (t->io.release) t->io.release(t->io.user, s);
}

uint64_t se3_mix(uint64_t a, uint64_t b) {
  uint64_t h = a ^ (b + 0x9e3779b97f4a7c15ULL + (a << 6) + (a >> 2));
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ULL;
  return h ^ (h >> 29);
}

void se3_shuffle(int *a, int n, uint64_t seed) {
  uint64_t r = seed | 1;
  for (int i = n - 1; i > 0; i--) {
    int j = (int)(so3_rng_uniform(&r) * (i + 1));
    if (j > i) j = i;
    int t = a[i];
    a[i] = a[j];
    a[j] = t;
  }
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The most atoms, edges and molecules any one batch of this run gives this
 * process: its share of every training step of every member and epoch (the
 * epochs' orders are drawn from the seed, as run_epoch draws them), and of
 * every batch `predict` makes of a split. Sizes are the graphs'; rotations
 * do not change them. */
struct batch_max {
  int N, E, G;
};
static void batch_max_add(struct batch_max *m, const struct se3_trainer *t, const int *idx, int k) {
  long N = 0, E = 0;
  for (int j = 0; j < k; j++) {
    N += t->atoms[idx[j]];
    E += t->edges[idx[j]];
  }
  if (N > m->N) m->N = N > INT_MAX ? INT_MAX : (int)N;
  if (E > m->E) m->E = E > INT_MAX ? INT_MAX : (int)E;
  if (k > m->G) m->G = k;
}

static int largest_batches(const struct se3_trainer *t, int nproc, int rank, struct batch_max *train,
                           struct batch_max *pred) {
  *train = *pred = (struct batch_max){0, 0, 0};
  int ntr = t->cnt[SE3_SPLIT_TRAIN];
  int *order = malloc(((size_t)ntr + 1) * sizeof *order);
  if (!order) return -1;
  for (int k = 0; k < t->ensemble; k++) {
    uint64_t seed = t->seed + (uint64_t)k;
    for (int e = 0; e < t->epochs; e++) {
      memcpy(order, t->idx[SE3_SPLIT_TRAIN], (size_t)ntr * sizeof *order);
      se3_shuffle(order, ntr, se3_mix(seed, (uint64_t)e + 1));
      for (int i = 0; i < ntr; i += t->batch) {
        int kk = ntr - i < t->batch ? ntr - i : t->batch;
        int lo = (int)((long)kk * rank / nproc), hi = (int)((long)kk * (rank + 1) / nproc);
        batch_max_add(train, t, order + i + lo, hi - lo);
      }
    }
  }
  free(order);
  int step = t->batch < 4096 ? t->batch : 4096; /* predict's */
  for (int w = 0; w < 3; w++) {
    int n = t->cnt[w], lo = (int)((long)n * rank / nproc), hi = (int)((long)n * (rank + 1) / nproc);
    for (int i = lo; i < hi; i += step)
      batch_max_add(pred, t, t->idx[w] + i, hi - i < step ? hi - i : step);
  }
  return 0;
}

/* ---- splits ---------------------------------------------------------------------------- */

void se3_split_random(int n, unsigned char *split, int *perm, uint64_t seed, int n_test, int n_valid) {
  for (int i = 0; i < n; i++)
    perm[i] = i;
  se3_shuffle(perm, n, se3_mix(seed, 0x5b1175));
  for (int i = 0; i < n; i++)
    split[perm[i]] = i < n_test ? SE3_SPLIT_TEST : i < n_test + n_valid ? SE3_SPLIT_VALID : SE3_SPLIT_TRAIN;
}

/* Scaffold groups, largest first (ties in an order drawn from the seed, then
 * by key), each filling the training split while it fits within its share,
 * then validation, then test. */
struct sgroup {
  int first, size; /* in the key-sorted order */
  uint64_t tie;
};
static char *const *sort_key;
static int by_key(const void *a, const void *b) {
  int i = *(const int *)a, j = *(const int *)b;
  int c = strcmp(sort_key[i], sort_key[j]);
  return c ? c : (i > j) - (i < j);
}
static const int *sort_perm;
static int by_size(const void *a, const void *b) {
  const struct sgroup *x = a, *y = b;
  if (x->size != y->size) return x->size > y->size ? -1 : 1;
  if (x->tie != y->tie) return x->tie < y->tie ? -1 : 1;
  return strcmp(sort_key[sort_perm[x->first]], sort_key[sort_perm[y->first]]);
}

int se3_split_groups(int n, char *const *key, unsigned char *split, int *perm, uint64_t seed, int n_test, int n_valid) {
  for (int i = 0; i < n; i++)
    perm[i] = i;
  sort_key = key;
  qsort(perm, (size_t)n, sizeof *perm, by_key);
  struct sgroup *gr = malloc((size_t)n * sizeof *gr);
  if (!gr) return -1;
  int ng = 0;
  for (int i = 0; i < n; i++) {
    if (i == 0 || strcmp(key[perm[i]], key[perm[i - 1]])) {
      const char *k = key[perm[i]];
      gr[ng++] = (struct sgroup){i, 0, se3_mix(seed, se3_hash_str(SE3_HASH_INIT, k))};
    }
    gr[ng - 1].size++;
  }
  sort_perm = perm;
  qsort(gr, (size_t)ng, sizeof *gr, by_size);
  int n_train = n - n_test - n_valid, got[3] = {0, 0, 0};
  for (int g = 0; g < ng; g++) {
    int s = got[SE3_SPLIT_TRAIN] + gr[g].size <= n_train   ? SE3_SPLIT_TRAIN
            : got[SE3_SPLIT_VALID] + gr[g].size <= n_valid ? SE3_SPLIT_VALID
                                                           : SE3_SPLIT_TEST;
    got[s] += gr[g].size;
    for (int k = 0; k < gr[g].size; k++)
      split[perm[gr[g].first + k]] = (unsigned char)s;
  }
  free(gr);
  return 0;
}

/* ---- atomref ------------------------------------------------------------------------------ */

/* Least squares of y on the training split's element counts, with a ridge
 * term 1e-12 x (mean diagonal of XᵀX) that keeps the normal equations
 * solvable when an element is absent (its reference is then 0); solved by
 * Cholesky in double. */
int se3_trainer_fit_atomref(struct se3_trainer *t, const uint16_t *counts) {
  int nz = t->nz, ntr = t->cnt[SE3_SPLIT_TRAIN];
  double A[SE3_ATOMREF_MAX * SE3_ATOMREF_MAX] = {0}, b[SE3_ATOMREF_MAX] = {0}, tr = 0;
  for (int r = 0; r < ntr; r++) {
    int i = t->idx[SE3_SPLIT_TRAIN][r];
    const uint16_t *x = counts + (size_t)i * SE3_ATOMREF_MAX;
    for (int p = 0; p < nz; p++) {
      if (!x[p]) continue;
      b[p] += x[p] * t->y[i];
      for (int q = 0; q < nz; q++)
        A[p * nz + q] += (double)x[p] * x[q];
    }
  }
  for (int p = 0; p < nz; p++)
    tr += A[p * nz + p];
  double lambda = 1e-12 * (nz ? tr / nz : 1) + 1e-300;
  for (int p = 0; p < nz; p++)
    A[p * nz + p] += lambda;
  /* A = L Lᵀ in place (lower triangle) */
  for (int p = 0; p < nz; p++) {
    for (int q = 0; q <= p; q++) {
      double s = A[p * nz + q];
      for (int k = 0; k < q; k++)
        s -= A[p * nz + k] * A[q * nz + k];
      if (p == q) {
        if (!(s > 0)) return tr_fail(t, "stages.train.atomref: the fit failed");
        A[p * nz + p] = sqrt(s);
      } else {
        A[p * nz + q] = s / A[q * nz + q];
      }
    }
  }
  double z[SE3_ATOMREF_MAX];
  for (int p = 0; p < nz; p++) {
    double s = b[p];
    for (int k = 0; k < p; k++)
      s -= A[p * nz + k] * z[k];
    z[p] = s / A[p * nz + p];
  }
  for (int p = nz - 1; p >= 0; p--) {
    double s = z[p];
    for (int k = p + 1; k < nz; k++)
      s -= A[k * nz + p] * t->ref[k];
    t->ref[p] = s / A[p * nz + p];
  }
  for (int p = 0; p < nz; p++) /* (what a checkpoint may hold: model_file.h) */
    if (!(fabs(t->ref[p]) <= SE3_STAT_MAX))
      return tr_fail(t,
                     "stages.train.atomref: the fit gives element Z=%lld a reference of %g, past what a model "
                     "holds (%g): leave atomref out for these labels",
                     (long long)t->zs[p], t->ref[p], SE3_STAT_MAX);
  for (int i = 0; i < t->n; i++) {
    double s = 0;
    for (int p = 0; p < nz; p++)
      s += counts[(size_t)i * SE3_ATOMREF_MAX + p] * t->ref[p];
    t->base[i] = s;
  }
  return SE3_TRAIN_OK;
}

void se3_trainer_member_dir(const struct se3_trainer *t, int k, char *out, size_t n) {
  snprintf(out, n, "%s/train-%d", t->models_dir, k);
}

/* The name of the checkpoint of the state after epoch e (0-based, as chunks
 * and the step_epoch_best record count): epochs are shown counted from 1,
 * so the file of the first is epoch-1.ckpt. */
void se3_trainer_epoch_file(char *out, size_t n, int e) { snprintf(out, n, "epoch-%d.ckpt", e + 1); }

/* ---- batches ------------------------------------------------------------------ */

/* Molecules idx[0..k-1] as a batch; with augment, each molecule's relative
 * positions turned by a rotation drawn from (seed, step, its position in
 * the whole batch: first + i, so a process's share of a batch turns its
 * molecules as one process with the whole batch would).
 * -1 with t->why set when a graph cannot be read or memory runs out. */
static int make_batch(struct se3_trainer *t, const int *idx, int k, int rotate, uint64_t rseed, int first) {
  se3_batch_clear(&t->bb);
  float *rel = NULL;
  size_t cap = 0;
  for (int i = 0; i < k; i++) {
    struct se3_sample one = {0}, *g = &one;
    if (t->io.sample(t->io.user, idx[i], g, t->why, sizeof t->why)) {
      free(rel);
      return -1;
    }
    const float *r = g->rel_pos;
    int bad = 0;
    if (rotate) {
      if ((size_t)g->n_edges * 3 > cap) {
        cap = (size_t)g->n_edges * 3;
        float *grown = realloc(rel, cap * sizeof *rel);
        if (!grown) {
          release(t, g);
          free(rel);
          snprintf(t->why, sizeof t->why, "out of memory building a batch");
          return -1;
        }
        rel = grown;
      }
      uint64_t s = se3_mix(rseed, (uint64_t)(first + i));
      double R[9];
      so3_random_rotation(&s, R);
      for (int e = 0; e < g->n_edges; e++) {
        double v[3] = {g->rel_pos[3 * e], g->rel_pos[3 * e + 1], g->rel_pos[3 * e + 2]}, w[3];
        so3_matvec(R, v, w);
        for (int a = 0; a < 3; a++)
          rel[3 * e + a] = (float)w[a];
      }
      r = rel;
    }
    bad = se3_batch_add(&t->bb, g->n_nodes, g->node_feat, g->n_edges, g->src, g->dst, g->edge_feat, r);
    release(t, g);
    if (bad) {
      free(rel);
      snprintf(t->why, sizeof t->why, "out of memory building a batch");
      return -1;
    }
  }
  free(rel);
  se3_batch_geometry(&t->bb); /* the bases: computed where the model runs */
  return 0;
}

/* Orders of rank 0 to the other processes of a data-parallel run (io.order):
 * an epoch from a state (member, epoch, position, step, replay; the running
 * loss; then the parameters and Adam moments), predictions for a split
 * (which; then the parameters). */

/* The Adam moments from rank 0's m and v to every process: whole, or with
 * shard_optimizer each process's slice. -1 when MPI failed. */
static int send_moments(struct se3_trainer *t) {
  size_t b = t->np * sizeof(real);
  if (!t->zero) return comm_bcast(t->io.comm, t->m, b) || comm_bcast(t->io.comm, t->v, b) ? -1 : 0;
  return comm_scatter_slices(t->io.comm, t->m, t->m, t->np, sizeof(real)) ||
                 comm_scatter_slices(t->io.comm, t->v, t->v, t->np, sizeof(real))
             ? -1
             : 0;
}

/* With shard_optimizer: every process's slice of the Adam moments into
 * rank 0's m and v (before a checkpoint, and when an epoch ends). A
 * collective: all processes call it at the same step. */
static int gather_moments(struct se3_trainer *t) {
  if (!t->zero) return SE3_TRAIN_OK;
  se3_net_get(t->net, SE3_NET_ADAM_M, t->m); /* rank 0's slice is the start of its m */
  se3_net_get(t->net, SE3_NET_ADAM_V, t->v);
  if (comm_gather_slices(t->io.comm, t->m, t->m, t->np, sizeof(real)) ||
      comm_gather_slices(t->io.comm, t->v, t->v, t->np, sizeof(real)))
    return tr_fail(t, "MPI failed gathering Adam's moments");
  return SE3_TRAIN_OK;
}

/* Rank 0: the order o to the others, followed by the parameters (and the
 * Adam moments with moments). Nothing in a run of one process. */
static int send_state(struct se3_trainer *t, struct se3_train_order *o, int moments) {
  if (!t->io.comm) return SE3_TRAIN_OK;
  size_t b = t->np * sizeof(real);
  se3_net_get(t->net, SE3_NET_PARAMS, t->params);
  if (moments && !t->zero) {
    se3_net_get(t->net, SE3_NET_ADAM_M, t->m);
    se3_net_get(t->net, SE3_NET_ADAM_V, t->v);
  }
  if (t->io.order(t->io.user, o) || comm_bcast(t->io.comm, t->params, b) || (moments && send_moments(t)))
    return tr_fail(t, "MPI failed sending the model to the other processes");
  return SE3_TRAIN_OK;
}

/* Ranks > 0: what send_state sent after its order. */
static int receive_state(struct se3_trainer *t, int moments) {
  size_t b = t->np * sizeof(real);
  if (comm_bcast(t->io.comm, t->params, b) || (moments && send_moments(t)))
    return tr_fail(t, "MPI failed receiving the model from rank 0");
  se3_net_set(t->net, SE3_NET_PARAMS, t->params);
  if (moments) {
    se3_net_set(t->net, SE3_NET_ADAM_M, t->m);
    se3_net_set(t->net, SE3_NET_ADAM_V, t->v);
  }
  return SE3_TRAIN_OK;
}

/* Predictions (the model's raw outputs) for every molecule of a split. In
 * a data-parallel run each process predicts a contiguous share and all of
 * them gather the whole (rank 0 first orders the others to). */
static int predict(struct se3_trainer *t, int which, double *out) {
  int n = t->cnt[which], np = comm_size(t->io.comm), rank = comm_rank(t->io.comm);
  if (t->io.comm && t->io.writer) {
    struct se3_train_order o = {.op = SE3_ORDER_PREDICT, .i = {which}};
    if (send_state(t, &o, 0)) {
      snprintf(t->why, sizeof t->why, "%.500s", t->err);
      return -1;
    }
  }
  int lo = (int)((long)n * rank / np), hi = (int)((long)n * (rank + 1) / np), failed = 0;
  real pred[4096];
  int step = t->batch < 4096 ? t->batch : 4096;
  for (int i = lo; i < hi && !failed; i += step) {
    int k = hi - i < step ? hi - i : step;
    if (make_batch(t, t->idx[which] + i, k, 0, 0, 0) ||
        net_call(t, se3_net_forward(t->net, &t->bb.b, pred, 0, &t->net_err))) {
      failed = 1;
      break;
    }
    for (int j = 0; j < k; j++)
      out[i + j] = pred[j];
  }
  if (!t->io.comm) return failed ? -1 : 0;
  int any = failed;
  if (comm_max_int(t->io.comm, &any, 1)) any = 1;
  if (any) {
    if (!failed) snprintf(t->why, sizeof t->why, "another process of the run failed to predict (its message is above)");
    return -1;
  }
  int *counts = malloc((size_t)np * sizeof *counts);
  double *mine = malloc((size_t)(hi - lo + 1) * sizeof *mine);
  int rc = counts && mine ? 0 : -1;
  if (rc == 0) {
    for (int q = 0; q < np; q++)
      counts[q] = (int)((long)n * (q + 1) / np - (long)n * q / np);
    memcpy(mine, out + lo, (size_t)(hi - lo) * sizeof *mine);
    rc = comm_gather_f64(t->io.comm, mine, counts, out);
  }
  /* every process must take part in the gather: an allocation that failed
   * here leaves the others waiting, so it ends the job */
  if (rc) comm_abort(t->io.comm, 1);
  free(counts);
  free(mine);
  return 0;
}

/* keep, when not NULL: each molecule's prediction as scoring gives it (the
 * target's units; classification: the probability), in t->idx[which]'s order. */
int se3_trainer_evaluate(struct se3_trainer *t, int which, struct se3_eval *ev, double *keep) {
  int n = t->cnt[which];
  memset(ev, 0, sizeof *ev);
  ev->loss = NAN;
  if (n == 0) return 0;
  double *raw = malloc((size_t)n * sizeof *raw), *y = malloc((size_t)n * sizeof *y);
  real *p = malloc((size_t)n * sizeof *p), *yt = malloc((size_t)n * sizeof *yt);
  int rc = -1;
  if (raw && y && p && yt)
    rc = predict(t, which, raw);
  else
    snprintf(t->why, sizeof t->why, "out of memory for %d predictions", n);
  if (rc == 0) {
    for (int i = 0; i < n; i++) {
      int k = t->idx[which][i];
      y[i] = t->y[k];
      p[i] = (real)raw[i];
      yt[i] = (real)((y[i] - t->base[k] - t->mean) / t->std);
    }
    ev->loss = nn_loss(t->loss, p, yt, NULL, n, loss_param(t), NULL);
    if (t->classify) {
      se3_classification_metrics(raw, y, n, &ev->cls);
      for (int i = 0; keep && i < n; i++)
        keep[i] = 1 / (1 + exp(-raw[i]));
    } else {
      for (int i = 0; i < n; i++)
        raw[i] = raw[i] * t->std + t->mean + t->base[t->idx[which][i]];
      se3_regression_metrics(raw, y, n, &ev->reg);
      if (keep) memcpy(keep, raw, (size_t)n * sizeof *keep);
    }
  }
  free(raw);
  free(y);
  free(p);
  free(yt);
  return rc;
}

/* ---- checkpoints -------------------------------------------------------------------- */

static void ckpt_path(const struct se3_trainer *t, char *out, size_t n, const char *name) {
  snprintf(out, n, "%s/%s", t->dir, name);
}

/* The training state, and what scoring needs (arch, task, target,
 * standardisation, atomref, the card). A mid-epoch checkpoint (pos >= 0) adds
 * its place in the epoch, the running loss and the fingerprint of settings
 * and data. */
static int save(struct se3_trainer *t, const char *name, int epoch, long pos, double loss_sum) {
  char path[PATH_MAX + 64];
  struct se3_error err;
  ckpt_path(t, path, sizeof path, name);
  struct se3_ckpt_writer w;
  if (se3_ckpt_begin(&w, path, &err)) return tr_fail_err(t, &err);
  size_t np = t->np;
  enum se3_ck_type rt = sizeof(real) == 4 ? SE3_CK_F32 : SE3_CK_F64;
  se3_net_get(t->net, SE3_NET_PARAMS, t->params);
  if (!t->zero) { /* sharded: gather_moments put them in m and v */
    se3_net_get(t->net, SE3_NET_ADAM_M, t->m);
    se3_net_get(t->net, SE3_NET_ADAM_V, t->v);
  }
  int64_t state[3] = {t->step, epoch, t->best_epoch};
  double stats[3] = {t->best, t->mean, t->std};
  int64_t order_seed = (int64_t)se3_mix(t->seed + (uint64_t)t->member, (uint64_t)epoch + 1);
  int64_t task = t->classify;
  se3_ckpt_put(&w, "params", rt, t->params, np);
  se3_ckpt_put(&w, "adam_m", rt, t->m, np);
  se3_ckpt_put(&w, "adam_v", rt, t->v, np);
  se3_ckpt_put(&w, "step_epoch_best", SE3_CK_I64, state, 3);
  se3_ckpt_put(&w, "best_mean_std", SE3_CK_F64, stats, 3);
  se3_ckpt_put(&w, "next_order_seed", SE3_CK_I64, &order_seed, 1);
  se3_ckpt_put(&w, "arch", SE3_CK_U8, t->arch, strlen(t->arch));
  se3_ckpt_put(&w, "target", SE3_CK_U8, t->target, strlen(t->target));
  se3_ckpt_put(&w, "classification", SE3_CK_I64, &task, 1);
  se3_ckpt_put(&w, "atomref_z", SE3_CK_I64, t->zs, t->atomref ? (uint64_t)t->nz : 0);
  se3_ckpt_put(&w, "atomref", SE3_CK_F64, t->ref, t->atomref ? (uint64_t)t->nz : 0);
  if (t->io.put_card) t->io.put_card(t->io.user, &w); /* the model card (the featurisation trained with) */
  double scaler[2] = {t->scaler.scale, (double)t->scaler.good};
  if (t->fp16) se3_ckpt_put(&w, "loss_scaler", SE3_CK_F64, scaler, 2);
  if (pos >= 0) {
    int64_t where[2] = {pos, (int64_t)t->fingerprint};
    se3_ckpt_put(&w, "position_fingerprint", SE3_CK_I64, where, 2);
    se3_ckpt_put(&w, "loss_sum", SE3_CK_F64, &loss_sum, 1);
  }
  return se3_ckpt_commit(&w, &err) ? tr_fail_err(t, &err) : SE3_TRAIN_OK;
}

/* Loads checkpoint `name` of the current member into the training state.
 * 0, or -1 with err naming the file (damaged, missing, or of another
 * model); the state may then be partly overwritten. */
static int load_state(struct se3_trainer *t, const char *name, int *epoch, struct se3_error *err) {
  char path[PATH_MAX + 64];
  ckpt_path(t, path, sizeof path, name);
  struct se3_ckpt c;
  size_t np = t->np;
  /* no bigger than this model's parameters and moments and a little state */
  if (se3_ckpt_load_max(&c, path, 3 * (uint64_t)np * sizeof(real) + ((uint64_t)16 << 20), err)) return -1;
  enum se3_ck_type rt = sizeof(real) == 4 ? SE3_CK_F32 : SE3_CK_F64;
  int64_t state[3];
  double stats[3], scaler[2];
  int bad = se3_ckpt_get(&c, "params", rt, t->params, np) || se3_ckpt_get(&c, "adam_m", rt, t->m, np) ||
            se3_ckpt_get(&c, "adam_v", rt, t->v, np) || se3_ckpt_get(&c, "step_epoch_best", SE3_CK_I64, state, 3) ||
            se3_ckpt_get(&c, "best_mean_std", SE3_CK_F64, stats, 3);
  /* fp16: the loss scale goes on from where it was (a checkpoint of an
   * fp32 or bf16 training starts it afresh) */
  nn_loss_scaler_init(&t->scaler);
  if (t->fp16 && se3_ckpt_get(&c, "loss_scaler", SE3_CK_F64, scaler, 2) == 0 && scaler[0] >= 1) {
    t->scaler.scale = scaler[0];
    t->scaler.good = (long)scaler[1];
  }
  se3_ckpt_free(&c);
  if (bad) {
    se3_error_set(err, SE3_ERR_MODEL, "not a checkpoint of this model (%zu parameters)", np);
    se3_error_at(err, path, 0, 0);
    return -1;
  }
  se3_net_set(t->net, SE3_NET_PARAMS, t->params);
  se3_net_set(t->net, SE3_NET_ADAM_M, t->m);
  se3_net_set(t->net, SE3_NET_ADAM_V, t->v);
  t->step = state[0];
  *epoch = (int)state[1];
  t->best_epoch = (int)state[2];
  t->best = stats[0];
  return 0;
}

int se3_trainer_restore(struct se3_trainer *t, const char *name, int *epoch) {
  struct se3_error err;
  return load_state(t, name, epoch, &err) ? tr_fail_err(t, &err) : SE3_TRAIN_OK;
}

/* A mid-epoch checkpoint of epoch e written under the same settings and
 * data: loads it and sets *pos (the next molecule of the epoch's order) and
 * *loss_sum; otherwise leaves everything alone and *pos = 0. */
static int resume_mid_epoch(struct se3_trainer *t, int e, long *pos, double *loss_sum) {
  char path[PATH_MAX + 64];
  struct se3_error err;
  *pos = 0;
  *loss_sum = 0;
  ckpt_path(t, path, sizeof path, "step.ckpt");
  if (access(path, F_OK) != 0) return SE3_TRAIN_OK;
  struct se3_ckpt c;
  if (se3_ckpt_load(&c, path, &err)) {
    /* damaged: the epoch is redone from its start, which computes the same */
    tr_log(t, "%s; epoch %d starts from its beginning instead", se3_error_str(&err).s, e + 1);
    return SE3_TRAIN_OK;
  }
  int64_t where[2], state[3];
  double ls;
  int usable = se3_ckpt_get(&c, "position_fingerprint", SE3_CK_I64, where, 2) == 0 &&
               se3_ckpt_get(&c, "step_epoch_best", SE3_CK_I64, state, 3) == 0 &&
               se3_ckpt_get(&c, "loss_sum", SE3_CK_F64, &ls, 1) == 0 && (uint64_t)where[1] == t->fingerprint &&
               state[1] == e;
  se3_ckpt_free(&c);
  if (!usable) return SE3_TRAIN_OK;
  int got;
  if (se3_trainer_restore(t, "step.ckpt", &got)) return SE3_TRAIN_ERROR; /* intact but of another model */
  *pos = (long)where[0];
  *loss_sum = ls;
  tr_log(t, "model %d epoch %d: resuming from its checkpoint at step %ld", t->member, e + 1, t->step);
  return SE3_TRAIN_OK;
}

/* Member k's state before its first epoch. */
static void state_fresh(struct se3_trainer *t, int k) {
  se3_net_init_params(t->net, se3_mix(t->seed + (uint64_t)k, 0x1a1));
  if (t->zero) { /* rank 0's copies are the moments (the others' are overwritten by each epoch's) */
    memset(t->m, 0, t->m_len * sizeof *t->m);
    memset(t->v, 0, t->m_len * sizeof *t->v);
  }
  t->step = 0;
  nn_loss_scaler_init(&t->scaler);
  t->best = INFINITY;
  t->best_epoch = -1;
}

/* Recovery from a damaged or lost checkpoint. Member k's state after epoch
 * `target`, recomputed: from the newest epoch checkpoint at or before
 * `max_start` that loads (each one that does not is reported in one line
 * naming the file and what is wrong), or from the start, then epoch by epoch
 * exactly as the first time (everything random derives from the seed, the
 * epoch and the step), so the recomputed checkpoints are the lost ones, byte
 * for byte. best.ckpt is rewritten where an epoch improved; epoch-<e+1>.ckpt
 * files too when save_epoch. */
static int replay_to(struct se3_trainer *t, int k, int target, int max_start, int save_epoch) {
  t->member = k;
  se3_trainer_member_dir(t, k, t->dir, sizeof t->dir);
  t->epoch_done = -2;
  int start = -1;
  char name[64];
  struct se3_error why;
  for (int j = max_start; j >= 0 && start < 0; j--) {
    char path[PATH_MAX + 64];
    int got = -1;
    se3_trainer_epoch_file(name, sizeof name, j);
    ckpt_path(t, path, sizeof path, name);
    if (access(path, F_OK) != 0) continue; /* kept are the last two only */
    se3_error_clear(&why);
    if (load_state(t, name, &got, &why) == 0 && got == j) {
      start = j;
    } else {
      if (why.kind == SE3_ERR_NONE)
        se3_error_set(&why, SE3_ERR_MODEL, "%s: holds epoch %d, not %d", path, got + 1, j + 1);
      tr_log(t, "%s", se3_error_str(&why).s);
    }
  }
  if (start < 0) state_fresh(t, k);
  char who[48] = "";
  if (t->ensemble > 1) snprintf(who, sizeof who, "model %d: ", k);
  if (start >= 0) se3_trainer_epoch_file(name, sizeof name, start);
  const char *from = start >= 0 ? name : "the start";
  if (target == start + 1)
    tr_log(t, "%srecomputing epoch %d from %s", who, target + 1, from);
  else
    tr_log(t, "%srecomputing epochs %d..%d from %s", who, start + 2, target + 1, from);
  t->epoch_done = start;
  for (int x = start + 1; x <= target; x++) {
    struct se3_eval tr, va;
    double lr;
    int stopped_early;
    int ret = se3_trainer_epoch(t, x, 1, save_epoch, &tr, &va, &lr, &stopped_early);
    if (ret != SE3_TRAIN_OK) {
      t->epoch_done = -2;
      return ret;
    }
  }
  return SE3_TRAIN_OK;
}

/* The state of member k after epoch e - 1: in memory, from its checkpoint,
 * or fresh. A checkpoint that is damaged, missing or of the wrong epoch is
 * reported and the state recomputed from the last good one (replay_to):
 * training goes on, never stuck on the file. */
int se3_trainer_state_before(struct se3_trainer *t, int k, int e) {
  if (t->member == k && t->epoch_done == e - 1) return SE3_TRAIN_OK;
  t->member = k;
  se3_trainer_member_dir(t, k, t->dir, sizeof t->dir);
  if (e == 0) {
    state_fresh(t, k);
  } else {
    char name[64];
    struct se3_error why;
    se3_error_clear(&why);
    int got = -1;
    se3_trainer_epoch_file(name, sizeof name, e - 1);
    if (load_state(t, name, &got, &why) != 0 || got != e - 1) {
      if (why.kind == SE3_ERR_NONE)
        se3_error_set(&why, SE3_ERR_MODEL, "%s/%s: holds epoch %d, not %d", t->dir, name, got + 1, e);
      tr_log(t, "%s", se3_error_str(&why).s);
      return replay_to(t, k, e - 1, e - 2, 1);
    }
  }
  t->epoch_done = e - 1;
  return SE3_TRAIN_OK;
}

/* ---- one epoch of one member ------------------------------------------------------------ */

/* One process: the running sum of the epoch's losses from the model's
 * backend into *loss_sum; this waits for the steps queued, and a failure of
 * the device in any of them fails the epoch here. */
static int loss_sum_read(struct se3_trainer *t, double *loss_sum) {
  if (t->io.comm && !t->dp_whole) return SE3_TRAIN_OK; /* summed on the host, step by step */
  if (se3_net_loss_sum(t->net, loss_sum, &t->net_err) == 0) return SE3_TRAIN_OK;
  return tr_fail_err(t, &t->net_err);
}

/* The longest wait for a peer process, in seconds: SE3_NCCL_TIMEOUT
 * (docs/cluster.md; the CUDA backend checked it when it joined NCCL),
 * default 600. */
static double peer_timeout(void) {
  const char *v = getenv("SE3_NCCL_TIMEOUT");
  char *end = NULL;
  double s = v && *v ? strtod(v, &end) : 0;
  return end && *end == 0 && s > 0 ? s : 600;
}

/* A training step's share of molecules (idx[0..k-1], from `first` in the
 * whole batch) as a batch, each molecule of several conformers at its
 * conformer for epoch e (t->conf_draw, from the member's seed). */
static int make_train_batch(struct se3_trainer *t, const int *idx, int k, uint64_t seed, int e, int first) {
  t->conf_draw = se3_mix(se3_mix(seed, 0xc0f), (uint64_t)e + 1) | 1;
  int rc = make_batch(t, idx, k, t->augment, se3_mix(se3_mix(seed, 0xa06), (uint64_t)t->step), first);
  t->conf_draw = 0;
  return rc;
}

/* run_epoch's state across its steps: the epoch's order of the training
 * molecules, a step's targets, whether rank 0's checkpoint failed (held:
 * the others learn it at the next step), and the seconds for the epoch's
 * log line: in the steps, in the per-step agreement (which waits for the
 * slowest process), waiting for the gradient's sums after the backward and
 * in those sums (most of them while the backward ran). */
struct epoch_run {
  struct se3_trainer *t;
  const struct se3_comm *comm;
  int e, replay, nproc, rank, ntr;
  uint64_t seed;
  int *order;
  real *yt;
  int held;
  double t_steps, t_agree, t_sum, t_sum_all, t_start;
  int buckets;
};

/* The epoch begun: the others ordered to run it (data parallel, rank 0),
 * its order drawn, the loss sum set, the order advanced to pos. */
static int epoch_begin(struct epoch_run *er, long pos, double *loss_sum) {
  struct se3_trainer *t = er->t;
  const struct se3_comm *comm = er->comm;
  if (comm && t->io.writer) {
    struct se3_train_order o = {.op = SE3_ORDER_EPOCH,
                                .i = {t->member, er->e, pos, t->step, er->replay, t->scaler.good},
                                .f = {*loss_sum, t->scaler.scale}};
    if (send_state(t, &o, 1)) return SE3_TRAIN_ERROR;
  }
  int ntr = er->ntr;
  er->order = malloc((size_t)ntr * sizeof *er->order);
  er->yt = malloc((size_t)t->batch * sizeof *er->yt);
  if (!er->order || !er->yt) {
    if (comm) comm_abort(comm, 1); /* the others would wait for this process's steps */
    return tr_fail(t, "out of memory");
  }
  memcpy(er->order, t->idx[SE3_SPLIT_TRAIN], (size_t)ntr * sizeof *er->order);
  se3_shuffle(er->order, ntr, se3_mix(er->seed, (uint64_t)er->e + 1));
  /* One process: the losses are summed on the model's backend, and the
   * host reads the sum where it needs it (checkpoints, the epoch's end), so
   * nothing waits for a GPU from one step to the next. Several: each step's
   * part is summed over the processes in the step's agreement. */
  if (!comm || t->dp_whole) se3_net_set_loss_sum(t->net, *loss_sum);
  if (pos && !er->replay) advance(t, pos);
  t->skipped = 0;
  return SE3_TRAIN_OK;
}

/* A step's batch (this process's share, molecules lo..lo+kr-1 of the batch
 * at i) and its forward; one process takes the whole step here. Then the
 * gradient; on several processes summed over them while the backward runs
 * (each process joins every sum, failed or not). A failed backward leaves
 * an incomplete gradient: the step is not taken. *dout: d loss / d
 * predictions for the backward (NULL: none, nothing to add); *whole:
 * se3_net_train_step took the whole step. */
static void step_forward(struct epoch_run *er, long i, int lo, int kr, const struct se3_loss_spec *ls, int *failed,
                         const real **dout, int *whole) {
  struct se3_trainer *t = er->t;
  const struct se3_comm *comm = er->comm;
  const int *order = er->order;
  real *yt = er->yt;
  if (er->held) {
    /* (its message is in t->err) */
  } else if (kr == 0) {
    /* an empty share: a zero gradient */
  } else if (make_train_batch(t, order + i + lo, kr, er->seed, er->e, lo)) {
    *failed = 1;
  } else {
    for (int j = 0; j < kr; j++)
      yt[j] = (real)((t->y[order[i + lo + j]] - t->base[order[i + lo + j]] - t->mean) / t->std);
    if (t->dp_whole) {
      /* the whole step once the processes agree (step_agree) */
    } else if (!comm) {
      /* one process: the whole step in one call (on a GPU, recorded once
       * per batch shape, and with fp16 per loss scale, and replayed) */
      if (net_call(t, se3_net_train_step(t->net, &t->bb.b, yt, ls, t->clip, &t->adam, t->step + 1,
                                         nn_schedule_lr(&t->sched, t->step), &t->net_err)))
        *failed = 1;
      else
        *whole = 1;
    } else if (net_call(t, se3_net_forward_loss(t->net, &t->bb.b, yt, ls, &t->net_err))) {
      *failed = 1;
    } else {
      *dout = se3_net_loss_grad(t->net);
    }
  }
  if (comm && !t->dp_whole) {
    struct se3_sum_stats ss;
    int rc = se3_net_backward_sum(t->net, *dout, comm, t->bucket_bytes, &ss, &t->net_err);
    if (rc && !*failed) {
      net_call(t, rc);
      *failed = 1;
    }
    er->t_sum += ss.wait_s;
    er->t_sum_all += ss.sum_s;
    er->buckets = ss.buckets;
  } else if (*dout && net_call(t, se3_net_backward_loss(t->net, &t->net_err))) {
    *failed = 1;
  }
}

/* Several processes: they agree on the step's loss (*part, summed), on
 * failures and on signals; with whole steps (dp_whole) every process then
 * takes the step (*whole). SE3_TRAIN_OK, or what ends the epoch. */
static int step_agree(struct epoch_run *er, int kr, const struct se3_loss_spec *ls, const real *dout, int failed,
                      double *part, int *whole) {
  struct se3_trainer *t = er->t;
  const struct se3_comm *comm = er->comm;
  int rank = er->rank;
  if (dout && !failed && net_call(t, se3_net_loss_part(t->net, part, &t->net_err))) failed = 1;
  double agree[3] = {*part, failed, t->io.stop && *t->io.stop != 0}, t0 = now_s();
  /* (whole steps: a peer that stopped leaves no wait on the GPU to time
   * out on, the host runs ahead of it: the agreement has the deadline) */
  int arc = t->dp_whole ? comm_sum_f64_within(comm, agree, 3, peer_timeout()) : comm_sum_f64(comm, agree, 3);
  if (arc == -2) {
    /* this GPU's wait (polled, the same deadline) names the collective
     * it is stuck in, if it is, and ends the job itself */
    (void)se3_net_sync(t->net, NULL);
    fprintf(stderr,
            "se3screen (rank %d): the processes' agreement before step %ld did not finish within %g s "
            "(SE3_NCCL_TIMEOUT): a peer process has stopped; ending the job\n",
            rank, t->step + 1, peer_timeout());
    comm_abort(comm, 1);
  }
  if (arc) return tr_fail(t, "MPI failed at step %ld", t->step + 1);
  if (agree[1] > 0) {
    if (er->held) return SE3_TRAIN_ERROR;
    if (failed) return tr_fail(t, "%s", t->why);
    return tr_fail(t, "step %ld failed on %.0f other process%s of the run (their messages are above)", t->step + 1,
                   agree[1], agree[1] > 1 ? "es" : "");
  }
  if (agree[2] > 0) /* a signal reached one of the processes: all stop before this step */
    return SE3_TRAIN_STOPPED;
  *part = agree[0];
  er->t_agree += now_s() - t0;
  if (t->dp_whole) {
    /* every process takes the step; one that cannot has queued part of
     * its collectives, and its peers' wait on their GPUs for the rest:
     * the job ends */
    if (se3_net_train_step_dp(t->net, kr ? &t->bb.b : NULL, er->yt, ls, t->clip, &t->adam, t->step + 1,
                              nn_schedule_lr(&t->sched, t->step), comm, t->bucket_bytes, &t->net_err)) {
      fprintf(stderr, "se3screen (rank %d): model %d epoch %d step %ld failed: %s; ending the job\n", rank, t->member,
              er->e + 1, t->step + 1, se3_error_str(&t->net_err).s);
      comm_abort(comm, 1);
    }
    *whole = 1;
  }
  return SE3_TRAIN_OK;
}

/* The step taken, or skipped (fp16: a gradient out of its range): Adam's
 * update here unless se3_net_train_step took it (whole). SE3_TRAIN_OK, or
 * an error. */
static int step_take(struct se3_trainer *t, int whole) {
  if (whole) { /* (se3_net_train_step took it, Adam's update included, or skipped it on the device) */
    int take = 1;
    if (t->fp16) { /* the scaler decides as the device did: the norm's finiteness */
      double norm;
      if (se3_net_step_norm(t->net, &norm, &t->net_err)) return tr_fail_err(t, &t->net_err);
      take = nn_loss_scaler_update(&t->scaler, norm, NN_LOSS_SCALE_GROW_EVERY);
    }
    if (take)
      t->step++;
    else
      t->skipped++;
  } else {
    int take = 1;
    if (t->fp16) /* every process holds the same summed gradient: the same decision */
      take = nn_loss_scaler_update(&t->scaler, se3_net_unscale_clip(t->net, t->scaler.scale, t->clip),
                                   NN_LOSS_SCALE_GROW_EVERY);
    else if (t->clip > 0)
      se3_net_clip_queued(t->net, t->clip);
    if (take) {
      double lr = nn_schedule_lr(&t->sched, t->step);
      t->step++;
      se3_net_adam(t->net, &t->adam, t->step, lr);
    } else {
      t->skipped++;
    }
  }
  return SE3_TRAIN_OK;
}

/* The epoch's end (ret: how its steps ended, the last at molecule i): the
 * steps' losses read, a checkpoint where a signal stopped it, the moments
 * gathered, the log lines. What the epoch returns. */
static int epoch_end(struct epoch_run *er, int ret, long i, long pos, double *loss_sum) {
  struct se3_trainer *t = er->t;
  const struct se3_comm *comm = er->comm;
  int e = er->e, replay = er->replay;
  double t_steps = er->t_steps;
  /* the steps' losses (and whether the device failed in any of them) */
  if ((ret == SE3_TRAIN_OK || ret == SE3_TRAIN_STOPPED) && loss_sum_read(t, loss_sum) != SE3_TRAIN_OK)
    ret = SE3_TRAIN_ERROR;
  /* stopped by a signal part-way: the steps taken are kept, and the epoch
   * resumes from here (resume_mid_epoch) */
  if (ret == SE3_TRAIN_STOPPED && !replay && i > pos &&
      (gather_moments(t) != SE3_TRAIN_OK || (t->io.writer && save(t, "step.ckpt", e, i, *loss_sum) != SE3_TRAIN_OK)))
    ret = SE3_TRAIN_ERROR;
  /* the epoch's end: rank 0 holds the moments again */
  if (ret == SE3_TRAIN_OK) ret = gather_moments(t);
  if (ret == SE3_TRAIN_OK && comm && !replay && t_steps > 0 && t->dp_whole)
    tr_log(t,
           "model %d epoch %d: of %.2f s of steps, %.1f %% agreeing before each (which waits for the slowest "
           "process's host; the gradients' sums run inside the steps, on the GPUs)",
           t->member, e + 1, t_steps, 100 * er->t_agree / t_steps);
  else if (ret == SE3_TRAIN_OK && comm && !replay && t_steps > 0)
    tr_log(t,
           "model %d epoch %d: of %.2f s of steps, %.1f %% waiting for the gradients' sums after the "
           "backward (the sums took %.1f %%, in %d bucket%s a step) and %.1f %% agreeing (which waits for "
           "the slowest process)",
           t->member, e + 1, t_steps, 100 * er->t_sum / t_steps, 100 * er->t_sum_all / t_steps, er->buckets,
           er->buckets == 1 ? "" : "s", 100 * er->t_agree / t_steps);
  if (ret == SE3_TRAIN_OK && t->fp16 && !replay)
    tr_log(t, "model %d epoch %d: loss scale %g; %ld step%s skipped (a gradient out of fp16's range)", t->member, e + 1,
           t->scaler.scale, t->skipped, t->skipped == 1 ? "" : "s");
  return ret;
}

/* Steps through the epoch's order from molecule `pos` on; a mid-epoch
 * checkpoint every ckpt_every steps (not after the last batch: the epoch's
 * own checkpoint follows), and one where a signal stopped it.
 *
 * Data parallel: every process runs this together (rank 0 first orders the
 * others to, with its state). Each takes a contiguous share of every batch,
 * its loss scaled by its share of the batch, and the gradients are summed
 * (comm.h's fixed order): the step is the one a single process takes with
 * the whole batch, up to the order of the sums. Each step the processes
 * agree on the loss, on failures and on signals, so all stop at the same
 * step. With whole steps (dp_whole: GPUs with NCCL) they agree before the
 * step, on failures and signals, and the loss is summed on the devices
 * inside it. The steps: epoch_begin, then a step's step_forward,
 * step_agree (several processes), step_take, and epoch_end. */
static int run_epoch(struct se3_trainer *t, int e, long pos, double *loss_sum, int replay) {
  const struct se3_comm *comm = t->io.comm;
  struct epoch_run er = {.t = t,
                         .comm = comm,
                         .e = e,
                         .replay = replay,
                         .nproc = comm_size(comm),
                         .rank = comm_rank(comm),
                         .ntr = t->cnt[SE3_SPLIT_TRAIN],
                         .seed = t->seed + (uint64_t)t->member};
  int ret = epoch_begin(&er, pos, loss_sum);
  if (ret != SE3_TRAIN_OK) {
    free(er.order), free(er.yt);
    return ret;
  }
  int ntr = er.ntr, nproc = er.nproc, rank = er.rank;
  long i;
  er.t_start = now_s();
  for (i = pos; i < ntr; i += t->batch) {
    if (!comm && t->io.stop && *t->io.stop) {
      ret = SE3_TRAIN_STOPPED;
      break;
    }
    int k = ntr - i < t->batch ? ntr - (int)i : t->batch;
    /* this process's share of the batch: molecules lo..hi-1 of it */
    int lo = (int)((long)k * rank / nproc), hi = (int)((long)k * (rank + 1) / nproc), kr = hi - lo, failed = er.held;
    double part = 0;
    const real *dout = NULL; /* d loss / d predictions, for the backward; NULL: none (nothing to add) */
    int whole = 0;           /* se3_net_train_step took the whole step */
    /* the loss on the model's backend: the mean over the whole batch, not
     * over this share (kr of k); with fp16, scaled so that the backward's
     * fp16 products keep small gradients */
    struct se3_loss_spec ls = {t->loss, loss_param(t), kr, k, t->fp16 ? t->scaler.scale : 1};
    step_forward(&er, i, lo, kr, &ls, &failed, &dout, &whole);
    if (comm) {
      ret = step_agree(&er, kr, &ls, dout, failed, &part, &whole);
      if (ret != SE3_TRAIN_OK) break;
    } else if (failed) {
      /* the epoch fails (the train stage rolls its chunk back): nothing of this step is kept */
      ret = tr_fail(t, "%s", t->why);
      break;
    }
    if (comm && !t->dp_whole) *loss_sum += part; /* (whole: summed on the devices) */
    ret = step_take(t, whole);
    if (ret != SE3_TRAIN_OK) break;
    er.t_steps = now_s() - er.t_start;
    if (replay) continue; /* recomputing a lost epoch: no progress, no mid-epoch checkpoints */
    advance(t, k);
    if (t->ckpt_every > 0 && t->step % t->ckpt_every == 0 && i + k < ntr) {
      ret = loss_sum_read(t, loss_sum);
      if (ret == SE3_TRAIN_OK) ret = gather_moments(t);
      if (ret == SE3_TRAIN_OK && t->io.writer) ret = save(t, "step.ckpt", e, i + k, *loss_sum);
    }
    if (ret != SE3_TRAIN_OK && comm) { /* told at the next step, which there is (i + k < ntr) */
      er.held = 1;
      ret = SE3_TRAIN_OK;
    }
    if (ret != SE3_TRAIN_OK) break;
  }
  ret = epoch_end(&er, ret, i, pos, loss_sum);
  free(er.order), free(er.yt);
  return ret;
}

/* Epoch e of member t->member from its state after epoch e - 1 (in memory):
 * trains (unless stopped early), evaluates on the validation split, writes
 * best.ckpt when validation improved and, when save_epoch, epoch-<e+1>.ckpt
 * (dropping the one two epochs back). A replay (replay_to) neither resumes
 * from nor writes mid-epoch checkpoints, nor advances the progress. */
int se3_trainer_epoch(struct se3_trainer *t, int e, int replay, int save_epoch, struct se3_eval *tr,
                      struct se3_eval *va, double *lr, int *stopped_early) {
  *stopped_early = t->patience > 0 && t->best_epoch >= 0 && e - 1 - t->best_epoch >= t->patience;
  tr->loss = NAN;
  *lr = NAN;
  if (!*stopped_early) {
    long pos = 0;
    double loss_sum = 0;
    if (!replay && resume_mid_epoch(t, e, &pos, &loss_sum)) {
      t->epoch_done = -2;
      return SE3_TRAIN_ERROR;
    }
    int ret = run_epoch(t, e, pos, &loss_sum, replay);
    if (ret != SE3_TRAIN_OK) {
      t->epoch_done = -2; /* the parameters are part-way through an epoch */
      return ret;
    }
    tr->loss = loss_sum / t->cnt[SE3_SPLIT_TRAIN];
    *lr = nn_schedule_lr(&t->sched, t->step - 1);
  }
  if (se3_trainer_evaluate(t, SE3_SPLIT_VALID, va, NULL)) return tr_fail(t, "evaluating: %s", t->why);
  double watch = t->cnt[SE3_SPLIT_VALID] ? va->loss : tr->loss;
  if (!*stopped_early && isfinite(watch) && watch < t->best) {
    t->best = watch;
    t->best_epoch = e;
    if (save(t, "best.ckpt", e, -1, 0)) return SE3_TRAIN_ERROR;
  }
  t->epoch_done = e;
  if (!save_epoch) return SE3_TRAIN_OK;
  char name[64], old[PATH_MAX + 64];
  se3_trainer_epoch_file(name, sizeof name, e);
  if (save(t, name, e, -1, 0)) return SE3_TRAIN_ERROR;
  /* the mid-epoch checkpoint is spent: were the epoch lost now, redoing the
   * epoch from its start computes the same (a replay of an earlier epoch
   * leaves the current epoch's alone) */
  if (!replay) {
    ckpt_path(t, old, sizeof old, "step.ckpt");
    unlink(old);
  }
  /* the checkpoint two epochs back is no longer needed once this one is */
  if (e >= 2) {
    se3_trainer_epoch_file(name, sizeof name, e - 2);
    ckpt_path(t, old, sizeof old, name);
    unlink(old);
  }
  return SE3_TRAIN_OK;
}

/* Member k's checkpoints that outlive training, epoch-<epochs>.ckpt and
 * best.ckpt (the model scoring reads), load; a damaged or lost one is
 * reported and recomputed (replay_to), byte for byte what it was. */
int se3_trainer_ensure_final(struct se3_trainer *t, int k) {
  t->member = k;
  se3_trainer_member_dir(t, k, t->dir, sizeof t->dir);
  t->epoch_done = -2;
  int last = t->epochs - 1, got = -1, ret;
  char name[64];
  struct se3_error why;
  se3_error_clear(&why);
  se3_trainer_epoch_file(name, sizeof name, last);
  if (load_state(t, name, &got, &why) != 0 || got != last) {
    if (why.kind == SE3_ERR_NONE)
      se3_error_set(&why, SE3_ERR_MODEL, "%s/%s: holds epoch %d, not %d", t->dir, name, got + 1, last + 1);
    tr_log(t, "%s", se3_error_str(&why).s);
    if ((ret = replay_to(t, k, last, last - 1, 1)) != SE3_TRAIN_OK) return ret;
  }
  /* the state after the last epoch names the best one */
  int best = t->best_epoch;
  char path[PATH_MAX + 64];
  ckpt_path(t, path, sizeof path, "best.ckpt");
  t->epoch_done = -2;
  if (best < 0) return SE3_TRAIN_OK; /* no epoch improved: there is no best.ckpt to have */
  se3_error_clear(&why);
  got = -1;
  if (load_state(t, "best.ckpt", &got, &why) == 0 && got == best) return SE3_TRAIN_OK;
  if (why.kind == SE3_ERR_NONE)
    se3_error_set(&why, SE3_ERR_MODEL, "%s: holds epoch %d, the best was %d", path, got + 1, best + 1);
  tr_log(t, "%s", se3_error_str(&why).s);
  /* from before the best epoch, without touching the epoch checkpoints */
  ret = replay_to(t, k, best, best - 1, 0);
  t->epoch_done = -2;
  return ret;
}

static int by_descending(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x < y) - (x > y);
}

/* A workdir trained before epochs were counted from 1 (schema 5 and
 * earlier) named the state after epoch e (0-based) epoch-<e>.ckpt, today's
 * name of the epoch before it. Each epoch-<N>.ckpt of member k whose
 * step_epoch_best record says it holds epoch N (0-based) is such a file: it
 * is renamed epoch-<N+1>.ckpt, the highest N first so that none is renamed
 * over another, and the log says so; training then resumes where it was.
 * A models row naming the file (a model none of whose epochs improved has no
 * best.ckpt) is made to name the new one first: were the run killed between
 * the two, the next run renames the file, and the row names it still.
 * A file that does not load, or whose new name is taken, is left alone:
 * every load checks the epoch it expects (state_before, replay_to,
 * ensure_final), so a file of another epoch is reported and its epoch
 * recomputed, never trained on. */
int se3_trainer_adopt_zero_based(struct se3_trainer *t, int k,
                                 int (*renaming)(void *user, int k, int from, const char *name), void *user) {
  char dir[PATH_MAX];
  se3_trainer_member_dir(t, k, dir, sizeof dir);
  DIR *d = opendir(dir);
  if (!d) return SE3_TRAIN_OK; /* nothing trained yet */
  int *num = NULL, n = 0, cap = 0, ret = SE3_TRAIN_OK;
  struct dirent *de;
  while ((de = readdir(d))) {
    int e;
    char canon[64];
    if (sscanf(de->d_name, "epoch-%d.ckpt", &e) != 1 || e < 0) continue;
    snprintf(canon, sizeof canon, "epoch-%d.ckpt", e);
    if (strcmp(canon, de->d_name)) continue; /* "epoch-01.ckpt", "epoch-1.ckpt.tmp-…": none of ours */
    if (n == cap) {
      cap = cap ? 2 * cap : 8;
      int *grown = realloc(num, (size_t)cap * sizeof *num);
      if (!grown) {
        ret = tr_fail(t, "out of memory listing %s", dir);
        break;
      }
      num = grown;
    }
    num[n++] = e;
  }
  closedir(d);
  if (n > 1) qsort(num, (size_t)n, sizeof *num, by_descending);
  for (int i = 0; i < n && ret == SE3_TRAIN_OK; i++) {
    char from[PATH_MAX + 64], to[PATH_MAX + 64], name[64];
    snprintf(from, sizeof from, "%s/epoch-%d.ckpt", dir, num[i]);
    struct se3_ckpt c;
    int64_t state[3];
    if (se3_ckpt_load(&c, from, NULL)) continue;
    int held = se3_ckpt_get(&c, "step_epoch_best", SE3_CK_I64, state, 3) == 0 ? (int)state[1] : -1;
    se3_ckpt_free(&c);
    if (held != num[i]) continue; /* named from 1 (it holds epoch N - 1), or no training state */
    se3_trainer_epoch_file(name, sizeof name, held);
    snprintf(to, sizeof to, "%s/%s", dir, name);
    if (access(to, F_OK) == 0) {
      tr_log(t, "%s holds epoch %d (named from 0 by an earlier se3screen); left alone, as %s is there", from, held + 1,
             name);
      continue;
    }
    if (renaming && renaming(user, k, num[i], name))
      ret = -1; /* (its message is the caller's) */
    else if (rename(from, to) != 0)
      ret = tr_fail(t, "renaming %s to %s: %s", from, name, strerror(errno));
    else
      tr_log(t, "%s holds epoch %d (named from 0 by an earlier se3screen): renamed %s", from, held + 1, name);
  }
  free(num);
  return ret;
}

/* Member folders past the ensemble (models/train-<k>, k >= ensemble) are
 * an earlier training's, whose models rows went when its configuration
 * changed; a workdir scored as an ensemble (stages.score.checkpoint: WORKDIR,
 * modelcard.h) must hold this training's members only, or it scores
 * otherwise than this workdir does. Their checkpoints (and temporaries) are
 * removed, and the folder with them when nothing else is in it. */
int se3_trainer_drop_stale_members(struct se3_trainer *t) {
  for (int k = t->ensemble;; k++) {
    char dir[PATH_MAX], path[PATH_MAX + 300];
    se3_trainer_member_dir(t, k, dir, sizeof dir);
    DIR *d = opendir(dir);
    if (!d) return SE3_TRAIN_OK;
    struct dirent *de;
    int removed = 0, failed = 0;
    while ((de = readdir(d))) {
      size_t len = strlen(de->d_name);
      if (!(len > 5 && !strcmp(de->d_name + len - 5, ".ckpt")) && !strstr(de->d_name, ".ckpt.tmp-")) continue;
      snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
      if (unlink(path) == 0)
        removed++;
      else
        failed = errno;
    }
    closedir(d);
    if (failed) return tr_fail(t, "%s: removing the checkpoints of an earlier training: %s", dir, strerror(failed));
    int gone = rmdir(dir) == 0;
    if (removed || gone) /* (a folder left with files of the user's in it is no member: said once) */
      tr_log(t, "%s: %d checkpoint%s of an earlier training (this one is an ensemble of %d) removed%s", dir, removed,
             removed == 1 ? "" : "s", t->ensemble, gone ? ", and the folder" : "");
  }
}

/* The end of a training, in the log: whether the memory grew past what
 * se3_trainer_open reserved, and how the steps ran (recorded or not). */
void se3_trainer_report(struct se3_trainer *t) {
  /* the reservation foresaw every batch: the memory did not grow since
   * (else largest_batches missed one: the test suite looks for this line) */
  size_t now = se3_net_memory_bytes(t->net);
  if (now > t->reserved_bytes)
    tr_log(t,
           "the model's memory grew by %.1f MB after the start: a batch was larger than the largest "
           "foreseen (a defect of se3screen; the run is not affected)",
           (double)(now - t->reserved_bytes) / 1e6);
  struct se3_step_stats st;
  se3_net_step_stats(t->net, &st);
  if (st.recorded || st.refused)
    tr_log(t,
           "training steps: %ld replayed from %ld recording%s (one per batch shape: CUDA graphs), %ld run "
           "eagerly (a shape's first), %ld recording%s refused",
           st.replayed, st.recorded, st.recorded == 1 ? "" : "s", st.eager, st.refused, st.refused == 1 ? "" : "s");
}

int se3_trainer_standardize(struct se3_trainer *t) {
  t->mean = 0;
  t->std = 1;
  if (t->classify) return SE3_TRAIN_OK;
  double *ytr = malloc((size_t)t->cnt[SE3_SPLIT_TRAIN] * sizeof *ytr);
  if (!ytr) return tr_fail(t, "out of memory");
  for (int i = 0; i < t->cnt[SE3_SPLIT_TRAIN]; i++)
    ytr[i] = t->y[t->idx[SE3_SPLIT_TRAIN][i]] - t->base[t->idx[SE3_SPLIT_TRAIN][i]];
  nn_standardize(&t->mean, &t->std, ytr, t->cnt[SE3_SPLIT_TRAIN]);
  free(ytr);
  if (!(fabs(t->mean) <= SE3_STAT_MAX && t->std <= SE3_STAT_MAX))
    return tr_fail(t, "the training labels' mean %g and standard deviation %g are past what a model holds (%g)",
                   t->mean, t->std, SE3_STAT_MAX);
  return SE3_TRAIN_OK;
}

int se3_trainer_open(struct se3_trainer *t, double lr, double min_lr, long warmup, int restart_epochs) {
  const struct se3_comm *comm = t->io.comm;
  struct se3_error err;
  t->best = INFINITY;
  t->best_epoch = -1;
  t->member = -1;
  t->epoch_done = -2; /* nothing in memory */
  t->fp16 = se3_net_backend(t->net)->precision == NN_PREC_FP16;
  nn_loss_scaler_init(&t->scaler);
  size_t np = t->np = se3_net_n_params(t->net);
  if (t->zero && se3_net_shard_optimizer(t->net, comm, &t->opt_lo, &t->opt_hi, &err)) return tr_fail_err(t, &err);
  size_t nm = t->zero && !t->io.writer ? t->opt_hi - t->opt_lo + 1 : np; /* rank 0: all of them */
  if (t->zero)
    tr_log(t, "Adam's moments sharded over %d process%s: %zu of %zu parameters' here", comm_size(comm),
           comm_size(comm) > 1 ? "es" : "", t->opt_hi - t->opt_lo, np);
  /* the memory of the run's largest batches, taken now: a batch too large
   * for the device fails here, not hours into the run */
  struct batch_max bt, bp;
  double t_res = now_s();
  /* steps padded to a few shapes and recorded (CUDA graphs) where the
   * backend records (se3_net_train_step; with fp16 per loss scale too, the
   * scaler's decision taken on the device and read back after the step);
   * data parallel on GPUs with NCCL, whole steps, their sums on the
   * devices, recorded alike; else (sums through the host) padded where the
   * backend records, not recorded; on the CPU as they come */
  if (comm) {
    int dp = se3_net_dp_steps(t->net, comm, &err);
    if (dp < 0) return tr_fail_err(t, &err);
    t->dp_whole = dp;
    if (!dp && se3_net_backend(t->net)->record_begin) se3_net_set_steps(t->net, SE3_STEPS_PADDED);
  }
  if (t->dp_whole && t->zero)
    tr_log(t,
           "data-parallel steps whole on each GPU, recorded once per batch shape, with %s's sums inside them "
           "(the gradient's slices by one reduce-scatter a step, the norm's squares, the loss, the parameters "
           "gathered)",
           se3_net_collectives(t->net));
  else if (t->dp_whole) {
    int nb = se3_net_buckets(t->net, t->bucket_bytes);
    tr_log(t,
           "data-parallel steps whole on each GPU, recorded once per batch shape, with %s's sums inside them "
           "(the gradient in %d bucket%s a step, during the backward; the loss)",
           se3_net_collectives(t->net), nb, nb == 1 ? "" : "s");
  }
  if (largest_batches(t, comm_size(comm), comm_rank(comm), &bt, &bp)) return tr_fail(t, "out of memory");
  if (se3_net_reserve(t->net, bt.N, bt.E, bt.G, 1, &err) || se3_net_reserve(t->net, bp.N, bp.E, bp.G, 0, &err)) {
    tr_fail(t,
            "the largest batch of this run (%d molecules, %d atoms, %d edges in a training step) does not "
            "fit: %s; lower stages.train.batch_size, or set stages.train.low_memory: true",
            bt.G, bt.N, bt.E, se3_error_str(&err).s);
    return -1;
  }
  t->reserved_bytes = se3_net_memory_bytes(t->net);
  tr_log(t,
         "memory for the run's largest batches taken at the start (a training step of %d molecules, %d "
         "atoms, %d edges; predictions of %d molecules): %.1f MB for activations and batches, %.2f s",
         bt.G, bt.N, bt.E, bp.G, (double)t->reserved_bytes / 1e6, now_s() - t_res);
  t->params = malloc(np * sizeof *t->params);
  t->m = malloc(nm * sizeof *t->m);
  t->v = malloc(nm * sizeof *t->v);
  t->m_len = nm;
  if (!t->params || !t->m || !t->v) return tr_fail(t, "out of memory for %zu parameters", np);
  long steps_per_epoch = (t->cnt[SE3_SPLIT_TRAIN] + t->batch - 1) / t->batch;
  long period = (restart_epochs ? restart_epochs : t->epochs) * steps_per_epoch;
  t->sched = (struct nn_schedule){lr, min_lr, warmup, period, 1.0};
  const struct se3_config *mc = &se3_net_model(t->net)->cfg;
  se3_batch_buf_init(&t->bb, mc->node_in, mc->edge_in);
  return SE3_TRAIN_OK;
}

void se3_trainer_free(struct se3_trainer *t) {
  free(t->y);
  free(t->atoms);
  free(t->edges);
  free(t->base);
  for (int i = 0; i < 3; i++)
    free(t->idx[i]);
  free(t->params);
  free(t->m);
  free(t->v);
  se3_net_free(t->net);
  se3_batch_buf_free(&t->bb);
}

/* Ranks > 0 of a data-parallel run: one of rank 0's epochs or predictions,
 * with its state. */
int se3_trainer_follow(struct se3_trainer *t, const struct se3_train_order *o) {
  if (o->op == SE3_ORDER_EPOCH) {
    if (receive_state(t, 1)) return -1;
    t->member = (int)o->i[0];
    t->step = (long)o->i[3];
    t->scaler.good = (long)o->i[5];
    t->scaler.scale = o->f[1];
    t->epoch_done = -2;
    double loss_sum = o->f[0];
    return run_epoch(t, (int)o->i[1], (long)o->i[2], &loss_sum, (int)o->i[4]);
  }
  if (o->op == SE3_ORDER_PREDICT && o->i[0] >= 0 && o->i[0] < 3) {
    if (receive_state(t, 0)) return -1;
    int which = (int)o->i[0];
    double *out = malloc(((size_t)t->cnt[which] + 1) * sizeof *out);
    if (!out) comm_abort(t->io.comm, 1); /* the others wait for this process's share */
    int ret = predict(t, which, out) ? tr_fail(t, "predicting: %s", t->why) : SE3_TRAIN_OK;
    free(out);
    return ret;
  }
  tr_fail(t, "rank 0 sent order %lld, which this process cannot follow", (long long)o->op);
  return -1;
}
