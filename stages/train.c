/* train.c — `graphs` and `labels` of one set in, trained SE(3)-Transformers
 * out: checkpoints under WORKDIR/models/train-<i>/ (one folder per ensemble
 * member), and the `splits`, `metrics` and `models` tables.
 *
 * Plan: one chunk per (member, epoch), member major, so the runner's ledger
 * records finished epochs. An epoch starts from the checkpoint of the epoch
 * before (kept on disk until the next one is committed), or from a mid-epoch
 * checkpoint (checkpoint_every) of the same epoch under the same settings and
 * data, and everything random is derived from the member's seed, the epoch
 * and the step (data order, rotations), so an epoch redone after a kill
 * computes exactly what the lost run computed: a resumed run ends with
 * bit-identical parameters. The chunk writes epoch-<N>.ckpt (and best.ckpt
 * when validation improves) atomically before its transaction commits, and
 * its metrics rows in that transaction. Epochs are counted from 1 wherever
 * they are shown or stored (the log, metrics.epoch, models.best_epoch, the
 * epoch-<N>.ckpt names); inside, e and the checkpoints' step_epoch_best
 * record count from 0, as the ledger's chunks do. finalize evaluates every
 * member's best checkpoint on the test split and writes the `models` rows and
 * each test molecule's prediction (`predictions`, for the report's plots).
 *
 * Regression targets: with atomref, a per-element reference (least squares
 * of the target on the element counts of the training split, with a tiny
 * ridge term) is taken off first; the residual is standardised with the
 * training split's mean and deviation. Metrics and scores add both back.
 * Every checkpoint carries what scoring needs: the architecture, task,
 * target, standardisation, the atomref coefficients and the model's card
 * (stages/modelcard.h: the featurisation it was trained with).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "chem/graph.h"
#include "chem/mol.h"
#include "chem/scaffold.h"
#include "models/checkpoint.h"
#include "models/metrics.h"
#include "models/model.h"
#include "models/so3.h"
#include "modelcard.h"
#include "stage.h"

enum { SPLIT_TRAIN = 0, SPLIT_VALID = 1, SPLIT_TEST = 2 };
static const char *const split_name[3] = {"train", "valid", "test"};

/* distinct elements the atomref fit can hold */
#define ATOMREF_MAX 32

struct tstage {
  struct graph_settings gs; /* to rebuild graphs not stored */
  /* configuration */
  const char *set, *target;
  int classify, epochs, batch, patience, augment, restart_epochs, ensemble, atomref, low_memory;
  long ckpt_every;
  enum nn_loss loss;
  struct nn_adam adam;
  struct nn_schedule sched;
  double clip;
  uint64_t seed;
  struct se3_config mc;
  char arch[512];
  char device[256]; /* the backend, its device and precision (models.device) */
  /* data: molecules with the target label, in id order */
  int n;
  int64_t *ids;
  struct graph *g;         /* NULL when `lazy` */
  int lazy;                /* data parallel: each process reads the graphs of its
                              share of each batch when it needs them (get_graph) */
  sqlite3_stmt *get_graph; /* lazy: a graph by mol_id */
  int node_width;
  double *y;
  int *atoms, *edges;  /* per molecule: its graph's nodes and edges (the batches' sizes) */
  double *split_label; /* split.method column: the column's value (NAN: none) */
  char **scaffold;     /* split.method scaffold: the framework's key */
  uint16_t *counts;    /* atomref: n x nz element counts */
  unsigned char *split;
  int *idx[3], cnt[3];
  double mean, std;
  int nz;                  /* atomref: elements seen */
  int64_t zs[ATOMREF_MAX]; /* their atomic numbers */
  double ref[ATOMREF_MAX]; /* fitted reference per element */
  double *base;            /* per molecule: sum of references (0 without atomref) */
  uint64_t fingerprint;    /* settings and data: guards mid-epoch checkpoints */
  /* the model and the training state of `member` after `epoch_done` */
  struct se3_net *net;
  size_t np;            /* parameters */
  real *params, *m, *v; /* host copies, for checkpoints */
  /* shard_optimizer on several processes (ZeRO stage 1): each keeps Adam's
   * moments of its slice [opt_lo, opt_hi) of the parameters only; rank 0's
   * m and v (all of them) are the moments whenever no epoch is running
   * (gather_moments), the others' m and v hold their slice */
  int zero;
  size_t opt_lo, opt_hi, m_len; /* m_len: the reals m and v hold */
  /* on several processes, the gradient is summed in buckets of this size
   * while the backward runs (0: one sum after it) */
  size_t bucket_bytes;
  size_t reserved_bytes; /* the net's memory for batches after se3_net_reserve */
  long step;
  int fp16;                     /* the backend computes in fp16: the loss is scaled */
  struct nn_loss_scaler scaler; /* (fp16) part of the training state, checkpointed */
  long skipped;                 /* (fp16) steps skipped this epoch for a non-finite gradient */
  int member, epoch_done;
  double best;    /* best validation loss so far (INFINITY: none) */
  int best_epoch; /* -1: none */
  struct se3_batch_buf bb;
  char dir[PATH_MAX]; /* WORKDIR/models/train-<member> */
  char why[512];      /* what the model said when a forward or backward failed */
};

static uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t h = a ^ (b + 0x9e3779b97f4a7c15ULL + (a << 6) + (a >> 2));
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ULL;
  return h ^ (h >> 29);
}

/* Fisher-Yates with a stream seeded by `seed`. */
static void shuffle(int *a, int n, uint64_t seed) {
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
static void batch_max_add(struct batch_max *m, const struct tstage *t, const int *idx, int k) {
  long N = 0, E = 0;
  for (int j = 0; j < k; j++) {
    N += t->atoms[idx[j]];
    E += t->edges[idx[j]];
  }
  if (N > m->N) m->N = N > INT_MAX ? INT_MAX : (int)N;
  if (E > m->E) m->E = E > INT_MAX ? INT_MAX : (int)E;
  if (k > m->G) m->G = k;
}

static int largest_batches(const struct tstage *t, int nproc, int rank, struct batch_max *train,
                           struct batch_max *pred) {
  *train = *pred = (struct batch_max){0, 0, 0};
  int ntr = t->cnt[SPLIT_TRAIN];
  int *order = malloc(((size_t)ntr + 1) * sizeof *order);
  if (!order) return -1;
  for (int k = 0; k < t->ensemble; k++) {
    uint64_t seed = t->seed + (uint64_t)k;
    for (int e = 0; e < t->epochs; e++) {
      memcpy(order, t->idx[SPLIT_TRAIN], (size_t)ntr * sizeof *order);
      shuffle(order, ntr, mix(seed, (uint64_t)e + 1));
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

/* "name" (file record N) of molecule id, for messages. */
static void mol_where(struct stage_ctx *ctx, int64_t id, char *out, size_t n) {
  char *sql = sqlite3_mprintf("SELECT name, source_file, record_no FROM \"%w\".molecules WHERE id=?1", ctx->src);
  sqlite3_stmt *st = NULL;
  snprintf(out, n, "molecule %lld", (long long)id);
  if (sql && sqlite3_prepare_v2(ctx->db, sql, -1, &st, NULL) == SQLITE_OK) {
    sqlite3_bind_int64(st, 1, id);
    if (sqlite3_step(st) == SQLITE_ROW)
      snprintf(out, n, "molecule %lld ('%s', %s record %lld)", (long long)id, sqlite3_column_text(st, 0),
               sqlite3_column_text(st, 1), (long long)sqlite3_column_int64(st, 2));
  }
  sqlite3_finalize(st);
  sqlite3_free(sql);
}

/* Element counts (hydrogens included, implicit ones too) of one molecule into
 * t->counts row i, adding new elements to t->zs. */
static int count_elements(struct stage_ctx *ctx, struct tstage *t, int i, const struct mol *m) {
  uint16_t *row = t->counts + (size_t)i * ATOMREF_MAX;
  memset(row, 0, ATOMREF_MAX * sizeof *row);
  for (int a = 0; a < m->n_atoms; a++) {
    int z[2] = {m->atoms[a].z, 1}, times[2] = {1, m->atoms[a].implicit_h};
    for (int k = 0; k < 2; k++) {
      if (!times[k]) continue;
      int c = 0;
      while (c < t->nz && t->zs[c] != z[k])
        c++;
      if (c == t->nz) {
        if (t->nz == ATOMREF_MAX)
          return stage_fail_at(ctx, NULL, "stages.train.atomref: more than %d distinct elements", ATOMREF_MAX);
        t->zs[t->nz++] = z[k];
      }
      row[c] = (uint16_t)(row[c] + times[k]);
    }
  }
  return STAGE_OK;
}

static int load_data(struct stage_ctx *ctx, struct tstage *t, const char *split_column, int need_mol) {
  char *sql = sqlite3_mprintf("SELECT g.mol_id, " STAGE_GRAPH_COLUMN ", l.value, s.value, %s FROM \"%w\".graphs g "
                              "JOIN \"%w\".molecules m ON m.id = g.mol_id "
                              "JOIN \"%w\".labels l ON l.mol_id = g.mol_id AND l.name = ?1 "
                              "LEFT JOIN \"%w\".labels s ON s.mol_id = g.mol_id AND s.name = ?3 "
                              "WHERE m.set_name = ?2 ORDER BY g.mol_id",
                              need_mol ? "m.mol" : "NULL", ctx->src, ctx->src, ctx->src, ctx->src);
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_prepare_v2(ctx->db, sql, -1, &st, NULL);
  sqlite3_free(sql);
  if (rc != SQLITE_OK) return stage_sql_fail(ctx, "reading the training molecules");
  sqlite3_bind_text(st, 1, t->target, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, t->set, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, split_column ? split_column : "", -1, SQLITE_STATIC);
  int cap = 0;
  uint64_t h = SE3_HASH_INIT;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    long long id = sqlite3_column_int64(st, 0);
    if (t->n == cap) {
      cap = cap ? 2 * cap : 256;
      t->ids = realloc(t->ids, (size_t)cap * sizeof *t->ids);
      if (!t->lazy) t->g = realloc(t->g, (size_t)cap * sizeof *t->g);
      t->y = realloc(t->y, (size_t)cap * sizeof *t->y);
      t->atoms = realloc(t->atoms, (size_t)cap * sizeof *t->atoms);
      t->edges = realloc(t->edges, (size_t)cap * sizeof *t->edges);
      t->split_label = realloc(t->split_label, (size_t)cap * sizeof *t->split_label);
      t->scaffold = realloc(t->scaffold, (size_t)cap * sizeof *t->scaffold);
      t->counts = realloc(t->counts, (size_t)cap * ATOMREF_MAX * sizeof *t->counts);
      if (!t->ids || (!t->g && !t->lazy) || !t->y || !t->atoms || !t->edges || !t->split_label || !t->scaffold ||
          !t->counts) {
        sqlite3_finalize(st);
        return stage_fail_at(ctx, NULL, "out of memory loading the training molecules");
      }
    }
    char err[256];
    const void *blob = sqlite3_column_blob(st, 1);
    size_t len = (size_t)sqlite3_column_bytes(st, 1);
    struct graph one, *g = t->lazy ? &one : &t->g[t->n]; /* lazy: only checked here */
    graph_init(g);
    t->scaffold[t->n] = NULL;
    if (graph_load(&t->gs, blob, len, g, err, sizeof err)) {
      graph_free(g);
      sqlite3_finalize(st);
      return stage_fail_at(ctx, NULL, "graphs row mol_id=%lld: %s (run `se3screen verify` on the workdir)", id, err);
    }
    if (t->n == 0) t->node_width = g->node_width;
    t->atoms[t->n] = g->n_nodes;
    t->edges[t->n] = g->n_edges;
    if (t->lazy) graph_free(&one);
    h = se3_hash_bytes(h, &id, sizeof id);
    h = se3_hash_bytes(h, blob, len);
    t->ids[t->n] = id;
    t->y[t->n] = sqlite3_column_double(st, 2);
    h = se3_hash_bytes(h, &t->y[t->n], sizeof(double));
    t->split_label[t->n] = sqlite3_column_type(st, 3) == SQLITE_NULL ? NAN : sqlite3_column_double(st, 3);
    t->n++;
    if (need_mol) {
      struct mol m;
      mol_init(&m);
      if (mol_from_blob(sqlite3_column_blob(st, 4), (size_t)sqlite3_column_bytes(st, 4), &m, err, sizeof err)) {
        sqlite3_finalize(st);
        return stage_fail_at(ctx, NULL, "molecules row id=%lld: %s (run `se3screen verify` on the workdir)", id, err);
      }
      int bad = t->atomref ? count_elements(ctx, t, t->n - 1, &m) : STAGE_OK;
      if (!bad && need_mol == 2) {
        t->scaffold[t->n - 1] = scaffold_key(&m);
        if (!t->scaffold[t->n - 1])
          bad = stage_fail_at(ctx, NULL, "stages.train.split: no scaffold for molecule %lld (Open Babel failed)", id);
      }
      mol_free(&m);
      if (bad) {
        sqlite3_finalize(st);
        return STAGE_ERROR;
      }
    }
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return stage_sql_fail(ctx, "reading the training molecules");
  t->fingerprint = h;
  return STAGE_OK;
}

/* ---- splits ---------------------------------------------------------------------------- */

static void split_random(struct tstage *t, int *perm, uint64_t seed, int n_test, int n_valid) {
  for (int i = 0; i < t->n; i++)
    perm[i] = i;
  shuffle(perm, t->n, mix(seed, 0x5b1175));
  for (int i = 0; i < t->n; i++)
    t->split[perm[i]] = i < n_test ? SPLIT_TEST : i < n_test + n_valid ? SPLIT_VALID : SPLIT_TRAIN;
}

/* Scaffold groups, largest first (ties in an order drawn from the seed, then
 * by key), each filling the training split while it fits within its share,
 * then validation, then test. */
struct sgroup {
  int first, size; /* in the key-sorted order */
  uint64_t tie;
};
static const struct tstage *sort_t;
static int by_key(const void *a, const void *b) {
  int i = *(const int *)a, j = *(const int *)b;
  int c = strcmp(sort_t->scaffold[i], sort_t->scaffold[j]);
  return c ? c : (i > j) - (i < j);
}
static const int *sort_perm;
static int by_size(const void *a, const void *b) {
  const struct sgroup *x = a, *y = b;
  if (x->size != y->size) return x->size > y->size ? -1 : 1;
  if (x->tie != y->tie) return x->tie < y->tie ? -1 : 1;
  return strcmp(sort_t->scaffold[sort_perm[x->first]], sort_t->scaffold[sort_perm[y->first]]);
}

static int split_scaffold(struct tstage *t, int *perm, uint64_t seed, int n_test, int n_valid) {
  for (int i = 0; i < t->n; i++)
    perm[i] = i;
  sort_t = t;
  qsort(perm, (size_t)t->n, sizeof *perm, by_key);
  struct sgroup *gr = malloc((size_t)t->n * sizeof *gr);
  if (!gr) return -1;
  int ng = 0;
  for (int i = 0; i < t->n; i++) {
    if (i == 0 || strcmp(t->scaffold[perm[i]], t->scaffold[perm[i - 1]])) {
      const char *k = t->scaffold[perm[i]];
      gr[ng++] = (struct sgroup){i, 0, mix(seed, se3_hash_str(SE3_HASH_INIT, k))};
    }
    gr[ng - 1].size++;
  }
  sort_perm = perm;
  qsort(gr, (size_t)ng, sizeof *gr, by_size);
  int n_train = t->n - n_test - n_valid, got[3] = {0, 0, 0};
  for (int g = 0; g < ng; g++) {
    int s = got[SPLIT_TRAIN] + gr[g].size <= n_train   ? SPLIT_TRAIN
            : got[SPLIT_VALID] + gr[g].size <= n_valid ? SPLIT_VALID
                                                       : SPLIT_TEST;
    got[s] += gr[g].size;
    for (int k = 0; k < gr[g].size; k++)
      t->split[perm[gr[g].first + k]] = (unsigned char)s;
  }
  free(gr);
  return 0;
}

static int make_split(struct stage_ctx *ctx, struct tstage *t) {
  const struct cfg_node *c = ctx->cfg;
  const char *method = cfg_str(c, "split.method", "random");
  int n_test = (int)floor(cfg_float(c, "split.test", 0.1) * t->n),
      n_valid = (int)floor(cfg_float(c, "split.valid", 0.1) * t->n);
  uint64_t seed = (uint64_t)cfg_int(c, "split.seed", 0);
  t->split = malloc((size_t)t->n);
  int *perm = malloc((size_t)t->n * sizeof *perm);
  if (!perm || !t->split) {
    free(perm);
    return stage_fail_at(ctx, NULL, "out of memory");
  }
  int ret = STAGE_OK;
  if (!strcmp(method, "column")) {
    for (int i = 0; i < t->n && ret == STAGE_OK; i++) {
      double v = t->split_label[i];
      if (v == 0 || v == 1 || v == 2) {
        t->split[i] = (unsigned char)v;
        continue;
      }
      char where[600];
      mol_where(ctx, t->ids[i], where, sizeof where);
      if (isnan(v))
        ret = stage_fail_at(ctx, cfg_get(c, "split.column"), "stages.train.split.column: %s has no label '%s'", where,
                            cfg_str(c, "split.column", ""));
      else
        ret = stage_fail_at(ctx, cfg_get(c, "split.column"),
                            "stages.train.split.column: %s has %s = %g; use 0 (train), 1 (valid) or 2 (test)", where,
                            cfg_str(c, "split.column", ""), v);
    }
  } else if (n_test + n_valid >= t->n) {
    ret =
        stage_fail_at(ctx, cfg_get(c, "split"), "stages.train.split: no molecules left to train on (%d in all)", t->n);
  } else if (!strcmp(method, "scaffold")) {
    if (split_scaffold(t, perm, seed, n_test, n_valid)) ret = stage_fail_at(ctx, NULL, "out of memory");
  } else {
    split_random(t, perm, seed, n_test, n_valid);
  }
  free(perm);
  if (ret != STAGE_OK) return ret;
  for (int i = 0; i < 3; i++) {
    t->idx[i] = malloc((size_t)t->n * sizeof(int));
    if (!t->idx[i]) return stage_fail_at(ctx, NULL, "out of memory");
  }
  for (int i = 0; i < t->n; i++)
    t->idx[t->split[i]][t->cnt[t->split[i]]++] = i; /* in id order within each split */
  if (t->cnt[SPLIT_TRAIN] == 0)
    return stage_fail_at(ctx, cfg_get(c, "split"), "stages.train.split: no molecules left to train on (%d in all)",
                         t->n);
  return STAGE_OK;
}

/* ---- atomref ------------------------------------------------------------------------------ */

/* Least squares of y on the training split's element counts, with a ridge
 * term 1e-12 x (mean diagonal of XᵀX) that keeps the normal equations
 * solvable when an element is absent (its reference is then 0); solved by
 * Cholesky in double. */
static int fit_atomref(struct stage_ctx *ctx, struct tstage *t) {
  int nz = t->nz, ntr = t->cnt[SPLIT_TRAIN];
  double A[ATOMREF_MAX * ATOMREF_MAX] = {0}, b[ATOMREF_MAX] = {0}, tr = 0;
  for (int r = 0; r < ntr; r++) {
    int i = t->idx[SPLIT_TRAIN][r];
    const uint16_t *x = t->counts + (size_t)i * ATOMREF_MAX;
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
        if (!(s > 0)) return stage_fail_at(ctx, cfg_get(ctx->cfg, "atomref"), "stages.train.atomref: the fit failed");
        A[p * nz + p] = sqrt(s);
      } else {
        A[p * nz + q] = s / A[q * nz + q];
      }
    }
  }
  double z[ATOMREF_MAX];
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
  for (int i = 0; i < t->n; i++) {
    double s = 0;
    for (int p = 0; p < nz; p++)
      s += t->counts[(size_t)i * ATOMREF_MAX + p] * t->ref[p];
    t->base[i] = s;
  }
  return STAGE_OK;
}

static void member_dir(const struct stage_ctx *ctx, int member, char *out, size_t n) {
  snprintf(out, n, "%s/models/train-%d", ctx->workdir, member);
}

/* The name of the checkpoint of the state after epoch e (0-based, as chunks
 * and the step_epoch_best record count): epochs are shown counted from 1,
 * so the file of the first is epoch-1.ckpt. */
static void epoch_file(char *out, size_t n, int e) { snprintf(out, n, "epoch-%d.ckpt", e + 1); }

static int ensure_final(struct stage_ctx *ctx, struct tstage *t, int k);

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
static int adopt_zero_based(struct stage_ctx *ctx, int k) {
  char dir[PATH_MAX];
  member_dir(ctx, k, dir, sizeof dir);
  DIR *d = opendir(dir);
  if (!d) return STAGE_OK; /* nothing trained yet */
  int *num = NULL, n = 0, cap = 0, ret = STAGE_OK;
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
        ret = stage_fail_at(ctx, NULL, "out of memory listing %s", dir);
        break;
      }
      num = grown;
    }
    num[n++] = e;
  }
  closedir(d);
  if (n > 1) qsort(num, (size_t)n, sizeof *num, by_descending);
  for (int i = 0; i < n && ret == STAGE_OK; i++) {
    char from[PATH_MAX + 64], to[PATH_MAX + 64], name[64], why[PATH_MAX + 256];
    snprintf(from, sizeof from, "%s/epoch-%d.ckpt", dir, num[i]);
    struct se3_ckpt c;
    int64_t state[3];
    if (se3_ckpt_load(&c, from, why, sizeof why)) continue;
    int held = se3_ckpt_get(&c, "step_epoch_best", SE3_CK_I64, state, 3) == 0 ? (int)state[1] : -1;
    se3_ckpt_free(&c);
    if (held != num[i]) continue; /* named from 1 (it holds epoch N - 1), or no training state */
    epoch_file(name, sizeof name, held);
    snprintf(to, sizeof to, "%s/%s", dir, name);
    if (access(to, F_OK) == 0) {
      ctx->report->log(ctx, "%s holds epoch %d (named from 0 by an earlier se3screen); left alone, as %s is there",
                       from, held + 1, name);
      continue;
    }
    char *sql = sqlite3_mprintf("UPDATE models SET checkpoint = 'models/train-%d/%q' WHERE id = 'train/%d' AND "
                                "checkpoint = 'models/train-%d/epoch-%d.ckpt'",
                                k, name, k, k, num[i]);
    int rc = sql ? sqlite3_exec(ctx->db, sql, NULL, NULL, NULL) : SQLITE_NOMEM;
    sqlite3_free(sql);
    if (rc != SQLITE_OK)
      ret = stage_sql_fail(ctx, "renaming a checkpoint in the models table");
    else if (rename(from, to) != 0)
      ret = stage_fail_at(ctx, NULL, "renaming %s to %s: %s", from, name, strerror(errno));
    else
      ctx->report->log(ctx, "%s holds epoch %d (named from 0 by an earlier se3screen): renamed %s", from, held + 1,
                       name);
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
static int drop_stale_members(struct stage_ctx *ctx, const struct tstage *t) {
  for (int k = t->ensemble;; k++) {
    char dir[PATH_MAX], path[PATH_MAX + 300];
    member_dir(ctx, k, dir, sizeof dir);
    DIR *d = opendir(dir);
    if (!d) return STAGE_OK;
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
    if (failed)
      return stage_fail_at(ctx, NULL, "%s: removing the checkpoints of an earlier training: %s", dir, strerror(failed));
    int gone = rmdir(dir) == 0;
    if (removed || gone) /* (a folder left with files of the user's in it is no member: said once) */
      ctx->report->log(ctx, "%s: %d checkpoint%s of an earlier training (this one is an ensemble of %d) removed%s", dir,
                       removed, removed == 1 ? "" : "s", t->ensemble, gone ? ", and the folder" : "");
  }
}

/* Before any chunk: checkpoints named from 0 by an earlier se3screen are
 * renamed (adopt_zero_based), and an earlier training's members past this
 * ensemble removed (drop_stale_members). A finished training's model rows name the
 * checkpoints scoring reads; one damaged since (or deleted) is recomputed
 * here, as the runner does not finalize a finished stage again. Only when the
 * member's last epoch checkpoint is there: a training of other settings is
 * not recomputed, its chunks are redone anyway. */
static int repair_finished(struct stage_ctx *ctx) {
  struct tstage *t = ctx->state;
  if (drop_stale_members(ctx, t)) return STAGE_ERROR;
  for (int k = 0; k < t->ensemble; k++) {
    if (adopt_zero_based(ctx, k)) return STAGE_ERROR;
    char id[32], last[PATH_MAX + 64], name[64], *ck = NULL;
    snprintf(id, sizeof id, "train/%d", k);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(ctx->db, "SELECT checkpoint FROM models WHERE id = ?1", -1, &st, NULL) == SQLITE_OK) {
      sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
      if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
        ck = strdup((const char *)sqlite3_column_text(st, 0));
    }
    sqlite3_finalize(st);
    if (!ck) continue;
    char path[2 * PATH_MAX], why[2 * PATH_MAX + 256];
    snprintf(path, sizeof path, "%s/%s", ctx->workdir, ck);
    free(ck);
    member_dir(ctx, k, t->dir, sizeof t->dir);
    epoch_file(name, sizeof name, t->epochs - 1);
    snprintf(last, sizeof last, "%s/%s", t->dir, name);
    struct se3_ckpt c;
    if (se3_ckpt_load(&c, path, why, sizeof why) == 0) {
      se3_ckpt_free(&c);
      continue;
    }
    if (access(last, F_OK) != 0) continue;
    ctx->report->log(ctx, "%s (the model of %s)", why, id);
    int ret = ensure_final(ctx, t, k);
    if (ret == STAGE_STOPPED) return stage_fail_at(ctx, NULL, "stopped while recomputing %s; run again", path);
    if (ret != STAGE_OK) return ret;
  }
  t->member = -1;
  t->epoch_done = -2;
  return STAGE_OK;
}

static int train_begin(struct stage_ctx *ctx, int64_t *n_chunks, int64_t *n_items) {
  struct tstage *t = calloc(1, sizeof *t);
  if (!t) return stage_fail_at(ctx, NULL, "out of memory");
  ctx->state = t;
  const struct cfg_node *c = ctx->cfg;
  if (ctx->n_shards > 1)
    return stage_fail_at(ctx, NULL, "train runs in one process; --shard is for the ingest, graph and basis stages");
  t->set = cfg_str(c, "set", "train");
  t->target = cfg_str(c, "target", NULL);
  if (!t->target)
    return stage_fail_at(ctx, c, "stages.train.target: name the label to learn (an SD tag or CSV column of set '%s')",
                         t->set);
  t->classify = !strcmp(cfg_str(c, "task", "regression"), "classification");
  t->epochs = (int)cfg_int(c, "epochs", 20);
  t->batch = (int)cfg_int(c, "batch_size", 32);
  t->patience = (int)cfg_int(c, "patience", 0);
  t->augment = cfg_bool(c, "augment", 0);
  t->low_memory = cfg_bool(c, "low_memory", 0);
  t->seed = (uint64_t)cfg_int(c, "seed", 42);
  t->ensemble = (int)cfg_int(c, "ensemble", 1);
  t->atomref = cfg_bool(c, "atomref", 0);
  t->ckpt_every = (long)cfg_int(c, "checkpoint_every", 0);
  if (t->atomref && t->classify)
    return stage_fail_at(ctx, cfg_get(c, "atomref"), "stages.train.atomref: only for regression, not classification");
  const char *method = cfg_str(c, "split.method", "random");
  const char *column = cfg_str(c, "split.column", NULL);
  if (!strcmp(method, "column") && !column)
    return stage_fail_at(ctx, cfg_get(c, "split.method"),
                         "stages.train.split.column: name the label holding 0 (train), 1 (valid) or 2 (test)");
  const char *loss = cfg_str(c, "loss", "l1");
  t->loss = t->classify              ? NN_LOSS_BCE
            : !strcmp(loss, "mse")   ? NN_LOSS_MSE
            : !strcmp(loss, "huber") ? NN_LOSS_HUBER
                                     : NN_LOSS_L1;
  t->adam = (struct nn_adam){0.9, 0.999, 1e-8, cfg_float(c, "weight_decay", 0),
                             strcmp(cfg_str(c, "optimizer", "adamw"), "adam") != 0};
  t->clip = cfg_float(c, "clip_norm", 0);
  t->zero = cfg_bool(c, "shard_optimizer", 0) && ctx->comm; /* (a job of one too: SE3_COMM=mpi) */
  t->bucket_bytes = (size_t)(cfg_float(c, "bucket_mb", 4) * 1048576.0);
  t->restart_epochs = (int)cfg_int(c, "restart_epochs", 0);
  t->best = INFINITY;
  t->best_epoch = -1;
  t->member = -1;
  t->epoch_done = -2; /* nothing in memory */

  int need_mol = !strcmp(method, "scaffold") ? 2 : t->atomref ? 1 : 0;
  t->lazy = comm_size(ctx->comm) > 1;
  if (stage_graph_settings(ctx, &t->gs)) return STAGE_ERROR;
  if (load_data(ctx, t, !strcmp(method, "column") ? column : NULL, need_mol)) return STAGE_ERROR;
  if (t->lazy) {
    char *sql = sqlite3_mprintf("SELECT " STAGE_GRAPH_COLUMN " FROM \"%w\".graphs g JOIN \"%w\".molecules m "
                                "ON m.id = g.mol_id WHERE g.mol_id = ?1",
                                ctx->src, ctx->src);
    int rc = sql ? sqlite3_prepare_v2(ctx->db, sql, -1, &t->get_graph, NULL) : SQLITE_NOMEM;
    sqlite3_free(sql);
    if (rc != SQLITE_OK) return stage_sql_fail(ctx, "reading the training graphs");
  }
  if (t->n < 2)
    return stage_fail_at(ctx, c,
                         "stages.train: set '%s' has %d molecule%s with a graph and the label '%s'; need 2 or more",
                         t->set, t->n, t->n == 1 ? "" : "s", t->target);
  if (make_split(ctx, t)) return STAGE_ERROR;
  t->fingerprint = cfg_hash(se3_hash_bytes(t->fingerprint, t->split, (size_t)t->n), c);
  t->base = calloc((size_t)t->n, sizeof *t->base);
  if (!t->base) return stage_fail_at(ctx, NULL, "out of memory");
  if (t->atomref && fit_atomref(ctx, t)) return STAGE_ERROR;
  /* standardise regression targets (less the references) with the training split's statistics */
  t->mean = 0;
  t->std = 1;
  if (!t->classify) {
    double *ytr = malloc((size_t)t->cnt[SPLIT_TRAIN] * sizeof *ytr);
    if (!ytr) return stage_fail_at(ctx, NULL, "out of memory");
    for (int i = 0; i < t->cnt[SPLIT_TRAIN]; i++)
      ytr[i] = t->y[t->idx[SPLIT_TRAIN][i]] - t->base[t->idx[SPLIT_TRAIN][i]];
    nn_standardize(&t->mean, &t->std, ytr, t->cnt[SPLIT_TRAIN]);
    free(ytr);
  } else {
    for (int i = 0; i < t->n; i++)
      if (t->y[i] != 0 && t->y[i] != 1) {
        char where[600];
        mol_where(ctx, t->ids[i], where, sizeof where);
        return stage_fail_at(ctx, cfg_get(c, "task"),
                             "stages.train.task: classification needs labels 0 or 1; %s has %g", where, t->y[i]);
      }
  }
  /* the model; its envelope fades radius edges out at the graph stage's
   * cutoff (the graph settings, read once in begin) */
  const char *envelope = cfg_str(c, "arch.envelope", "auto");
  int radius = t->gs.go.edges != GRAPH_EDGES_BONDS;
  t->mc = (struct se3_config){.layers = (int)cfg_int(c, "arch.layers", 2),
                              .degrees = (int)cfg_int(c, "arch.degrees", 3),
                              .channels = (int)cfg_int(c, "arch.channels", 8),
                              .heads = (int)cfg_int(c, "arch.heads", 2),
                              .channels_div = (int)cfg_int(c, "arch.channels_div", 2),
                              .node_in = t->node_width,
                              .edge_in = GRAPH_EDGE_WIDTH,
                              .radial_hidden = (int)cfg_int(c, "arch.radial_hidden", 16),
                              .mlp_hidden = (int)cfg_int(c, "arch.mlp_hidden", 32),
                              .pool_max = !strcmp(cfg_str(c, "arch.pooling", "max"), "max"),
                              .outputs = 1,
                              .envelope = !strcmp(envelope, "cosine") ? SE3_ENVELOPE_COSINE
                                          : !strcmp(envelope, "poly") || (!strcmp(envelope, "auto") && radius)
                                              ? SE3_ENVELOPE_POLY
                                              : SE3_ENVELOPE_NONE,
                              .bonds_kept = t->gs.go.edges != GRAPH_EDGES_RADIUS,
                              .cutoff = (float)t->gs.go.cutoff};
  char err[512];
  const char *bad = "device";
  const struct nn_backend *be = stage_backend(ctx->root, 1, &bad, err, sizeof err);
  if (!be) return stage_fail_at(ctx, cfg_get(ctx->root, bad), "%s", err);
  if (!(t->net = se3_net_create(be, &t->mc, t->low_memory, err, sizeof err)))
    return stage_fail_at(ctx, cfg_get(c, "arch"), "stages.train.arch: %s", err);
  t->fp16 = be->precision == NN_PREC_FP16;
  nn_loss_scaler_init(&t->scaler);
  const char *asked = cfg_str(ctx->root, "precision", "fp32");
  ctx->report->log(ctx, "the model runs on %s (%s) in %s%s", be->name, be->device, stage_precision_name(be),
                   strcmp(asked, stage_precision_name(be)) ? "; precision bf16 on the CPU is for scoring" : "");
  se3_config_format(&t->mc, t->arch, sizeof t->arch);
  snprintf(t->device, sizeof t->device, "%s (%s), %s%s", be->name, be->device, stage_precision_name(be),
           comm_size(ctx->comm) > 1 ? ", data parallel" : "");
  size_t np = t->np = se3_net_n_params(t->net);
  if (t->zero && se3_net_shard_optimizer(t->net, ctx->comm, &t->opt_lo, &t->opt_hi, err, sizeof err))
    return stage_fail_at(ctx, NULL, "%s", err);
  size_t nm = t->zero && !stage_writer(ctx) ? t->opt_hi - t->opt_lo + 1 : np; /* rank 0: all of them */
  if (t->zero)
    ctx->report->log(ctx, "Adam's moments sharded over %d process%s: %zu of %zu parameters' here", comm_size(ctx->comm),
                     comm_size(ctx->comm) > 1 ? "es" : "", t->opt_hi - t->opt_lo, np);
  /* the memory of the run's largest batches, taken now: a batch too large
   * for the device fails here, not hours into the run */
  struct batch_max bt, bp;
  double t_res = now_s();
  /* steps padded to a few shapes and recorded (CUDA graphs) where one
   * process trains without loss scaling (se3_net_train_step); else as
   * they come */
  if (ctx->comm || t->fp16) se3_net_set_steps(t->net, SE3_STEPS_PLAIN);
  if (largest_batches(t, comm_size(ctx->comm), comm_rank(ctx->comm), &bt, &bp))
    return stage_fail_at(ctx, NULL, "out of memory");
  if (se3_net_reserve(t->net, bt.N, bt.E, bt.G, 1, err, sizeof err) ||
      se3_net_reserve(t->net, bp.N, bp.E, bp.G, 0, err, sizeof err))
    return stage_fail_at(ctx, cfg_get(c, "batch_size"),
                         "the largest batch of this run (%d molecules, %d atoms, %d edges in a training step) does not "
                         "fit: %s; lower stages.train.batch_size, or set stages.train.low_memory: true",
                         bt.G, bt.N, bt.E, err);
  t->reserved_bytes = se3_net_memory_bytes(t->net);
  ctx->report->log(ctx,
                   "memory for the run's largest batches taken at the start (a training step of %d molecules, %d "
                   "atoms, %d edges; predictions of %d molecules): %.1f MB for activations and batches, %.2f s",
                   bt.G, bt.N, bt.E, bp.G, (double)t->reserved_bytes / 1e6, now_s() - t_res);
  t->params = malloc(np * sizeof *t->params);
  t->m = malloc(nm * sizeof *t->m);
  t->v = malloc(nm * sizeof *t->v);
  t->m_len = nm;
  if (!t->params || !t->m || !t->v) return stage_fail_at(ctx, NULL, "out of memory for %zu parameters", np);
  long steps_per_epoch = (t->cnt[SPLIT_TRAIN] + t->batch - 1) / t->batch;
  long period = (t->restart_epochs ? t->restart_epochs : t->epochs) * steps_per_epoch;
  t->sched = (struct nn_schedule){cfg_float(c, "lr", 2e-3), cfg_float(c, "min_lr", 2e-4),
                                  (long)cfg_int(c, "warmup_steps", 0), period, 1.0};
  se3_batch_buf_init(&t->bb, t->mc.node_in, GRAPH_EDGE_WIDTH);
  char tmp[PATH_MAX];
  snprintf(tmp, sizeof tmp, "%s/models", ctx->workdir);
  if (stage_writer(ctx)) mkdir(tmp, 0755);
  for (int k = 0; k < t->ensemble && stage_writer(ctx); k++) {
    member_dir(ctx, k, tmp, sizeof tmp);
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return stage_fail_at(ctx, NULL, "%s: %s", tmp, strerror(errno));
  }
  *n_chunks = (int64_t)t->ensemble * t->epochs;
  *n_items = (int64_t)t->ensemble * t->epochs * t->cnt[SPLIT_TRAIN];
  ctx->report->log(ctx, "%d molecules with '%s' in set '%s': %d train, %d valid, %d test (%s split); %zu parameters%s",
                   t->n, t->target, t->set, t->cnt[0], t->cnt[1], t->cnt[2], method, np,
                   t->ensemble > 1 ? "; an ensemble" : "");
  /* After a scaffold split Open Babel has run in this process: the count is
   * still the caller's (chem/obbridge.cc), and the log says what it is. */
  if (ctx->comm)
    ctx->report->log(ctx,
                     "training on %d process%s (each step's batch of %d shared among them, the gradients summed "
                     "by %s), %d OpenMP threads on rank 0",
                     comm_size(ctx->comm), comm_size(ctx->comm) > 1 ? "es" : "", t->batch, se3_net_collectives(t->net),
                     omp_get_max_threads());
  else
    ctx->report->log(ctx, "training on %d OpenMP threads", omp_get_max_threads());
  if (t->atomref) {
    char line[1024];
    int o = 0;
    for (int p = 0; p < t->nz && o < (int)sizeof line - 40; p++)
      o += snprintf(line + o, sizeof line - (size_t)o, "%s%s %.6g", p ? ", " : "", mol_element_symbol((int)t->zs[p]),
                    t->ref[p]);
    ctx->report->log(ctx, "atomref (per-element references of '%s'): %s", t->target, line);
  }
  return STAGE_OK;
}

/* ---- batches ------------------------------------------------------------------ */

/* Molecule i's graph: in memory, or (lazy) read into *tmp, which the
 * caller frees. NULL with t->why set when it cannot be read. */
static const struct graph *graph_of(struct tstage *t, int i, struct graph *tmp) {
  if (!t->lazy) return &t->g[i];
  char err[256];
  graph_init(tmp);
  sqlite3_stmt *q = t->get_graph;
  sqlite3_reset(q);
  sqlite3_bind_int64(q, 1, t->ids[i]);
  int rc = sqlite3_step(q);
  if (rc != SQLITE_ROW)
    snprintf(t->why, sizeof t->why, "reading graphs row mol_id=%lld: %s", (long long)t->ids[i],
             rc == SQLITE_DONE ? "it is gone" : sqlite3_errmsg(sqlite3_db_handle(q)));
  else if (graph_load(&t->gs, sqlite3_column_blob(q, 0), (size_t)sqlite3_column_bytes(q, 0), tmp, err, sizeof err)) {
    snprintf(t->why, sizeof t->why, "graphs row mol_id=%lld: %s", (long long)t->ids[i], err);
    graph_free(tmp);
  } else
    rc = SQLITE_DONE;
  sqlite3_reset(q); /* no read transaction held between steps */
  return rc == SQLITE_DONE ? tmp : NULL;
}

/* Molecules idx[0..k-1] as a batch; with augment, each molecule's relative
 * positions turned by a rotation drawn from (seed, step, its position in
 * the whole batch: first + i, so a process's share of a batch turns its
 * molecules as one process with the whole batch would).
 * -1 with t->why set when a graph cannot be read or memory runs out. */
static int make_batch(struct tstage *t, const int *idx, int k, int rotate, uint64_t rseed, int first) {
  se3_batch_clear(&t->bb);
  float *rel = NULL;
  size_t cap = 0;
  for (int i = 0; i < k; i++) {
    struct graph tmp;
    const struct graph *g = graph_of(t, idx[i], &tmp);
    if (!g) {
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
          if (g == &tmp) graph_free(&tmp);
          free(rel);
          snprintf(t->why, sizeof t->why, "out of memory building a batch");
          return -1;
        }
        rel = grown;
      }
      uint64_t s = mix(rseed, (uint64_t)(first + i));
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
    if (g == &tmp) graph_free(&tmp);
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

/* Orders of rank 0 to the other processes of a data-parallel run
 * (stage_order; 0 ends the stage): an epoch from a state (member, epoch,
 * position, step, replay; the running loss; then the parameters and Adam
 * moments), predictions for a split (which; then the parameters). */
enum { ORDER_EPOCH = 10, ORDER_PREDICT = 11 };

/* The Adam moments from rank 0's m and v to every process: whole, or with
 * shard_optimizer each process's slice. -1 when MPI failed. */
static int send_moments(struct stage_ctx *ctx, struct tstage *t) {
  size_t b = t->np * sizeof(real);
  if (!t->zero) return comm_bcast(ctx->comm, t->m, b) || comm_bcast(ctx->comm, t->v, b) ? -1 : 0;
  return comm_scatter_slices(ctx->comm, t->m, t->m, t->np, sizeof(real)) ||
                 comm_scatter_slices(ctx->comm, t->v, t->v, t->np, sizeof(real))
             ? -1
             : 0;
}

/* With shard_optimizer: every process's slice of the Adam moments into
 * rank 0's m and v (before a checkpoint, and when an epoch ends). A
 * collective: all processes call it at the same step. */
static int gather_moments(struct stage_ctx *ctx, struct tstage *t) {
  if (!t->zero) return STAGE_OK;
  se3_net_get(t->net, SE3_NET_ADAM_M, t->m); /* rank 0's slice is the start of its m */
  se3_net_get(t->net, SE3_NET_ADAM_V, t->v);
  if (comm_gather_slices(ctx->comm, t->m, t->m, t->np, sizeof(real)) ||
      comm_gather_slices(ctx->comm, t->v, t->v, t->np, sizeof(real)))
    return stage_fail_at(ctx, NULL, "MPI failed gathering Adam's moments");
  return STAGE_OK;
}

/* Rank 0: the order o to the others, followed by the parameters (and the
 * Adam moments with moments). Nothing in a run of one process. */
static int send_state(struct stage_ctx *ctx, struct tstage *t, struct stage_order *o, int moments) {
  if (!ctx->comm) return STAGE_OK;
  size_t b = t->np * sizeof(real);
  se3_net_get(t->net, SE3_NET_PARAMS, t->params);
  if (moments && !t->zero) {
    se3_net_get(t->net, SE3_NET_ADAM_M, t->m);
    se3_net_get(t->net, SE3_NET_ADAM_V, t->v);
  }
  if (stage_order(ctx, o) || comm_bcast(ctx->comm, t->params, b) || (moments && send_moments(ctx, t)))
    return stage_fail_at(ctx, NULL, "MPI failed sending the model to the other processes");
  return STAGE_OK;
}

/* Ranks > 0: what send_state sent after its order. */
static int receive_state(struct stage_ctx *ctx, struct tstage *t, int moments) {
  size_t b = t->np * sizeof(real);
  if (comm_bcast(ctx->comm, t->params, b) || (moments && send_moments(ctx, t)))
    return stage_fail_at(ctx, NULL, "MPI failed receiving the model from rank 0");
  se3_net_set(t->net, SE3_NET_PARAMS, t->params);
  if (moments) {
    se3_net_set(t->net, SE3_NET_ADAM_M, t->m);
    se3_net_set(t->net, SE3_NET_ADAM_V, t->v);
  }
  return STAGE_OK;
}

/* Predictions (the model's raw outputs) for every molecule of a split. In
 * a data-parallel run each process predicts a contiguous share and all of
 * them gather the whole (rank 0 first orders the others to). */
static int predict(struct stage_ctx *ctx, struct tstage *t, int which, double *out) {
  int n = t->cnt[which], np = comm_size(ctx->comm), rank = comm_rank(ctx->comm);
  if (ctx->comm && stage_writer(ctx)) {
    struct stage_order o = {.op = ORDER_PREDICT, .i = {which}};
    if (send_state(ctx, t, &o, 0)) {
      snprintf(t->why, sizeof t->why, "%.500s", ctx->err);
      return -1;
    }
  }
  int lo = (int)((long)n * rank / np), hi = (int)((long)n * (rank + 1) / np), failed = 0;
  real pred[4096];
  int step = t->batch < 4096 ? t->batch : 4096;
  for (int i = lo; i < hi && !failed; i += step) {
    int k = hi - i < step ? hi - i : step;
    if (make_batch(t, t->idx[which] + i, k, 0, 0, 0) ||
        se3_net_forward(t->net, &t->bb.b, pred, 0, t->why, sizeof t->why)) {
      failed = 1;
      break;
    }
    for (int j = 0; j < k; j++)
      out[i + j] = pred[j];
  }
  if (!ctx->comm) return failed ? -1 : 0;
  int any = failed;
  if (comm_max_int(ctx->comm, &any, 1)) any = 1;
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
    rc = comm_gather_f64(ctx->comm, mine, counts, out);
  }
  /* every process must take part in the gather: an allocation that failed
   * here leaves the others waiting, so it ends the job */
  if (rc) comm_abort(ctx->comm, 1);
  free(counts);
  free(mine);
  return 0;
}

/* Loss and metrics of a split, in the target's units; the loss on
 * standardised targets as in training. */
struct eval {
  double loss;
  struct se3_reg_metrics reg;
  struct se3_cls_metrics cls;
};

/* keep, when not NULL: each molecule's prediction as scoring gives it (the
 * target's units; classification: the probability), in t->idx[which]'s order. */
static int evaluate(struct stage_ctx *ctx, struct tstage *t, int which, struct eval *ev, double *keep) {
  int n = t->cnt[which];
  memset(ev, 0, sizeof *ev);
  ev->loss = NAN;
  if (n == 0) return 0;
  double *raw = malloc((size_t)n * sizeof *raw), *y = malloc((size_t)n * sizeof *y);
  real *p = malloc((size_t)n * sizeof *p), *yt = malloc((size_t)n * sizeof *yt);
  int rc = -1;
  if (raw && y && p && yt)
    rc = predict(ctx, t, which, raw);
  else
    snprintf(t->why, sizeof t->why, "out of memory for %d predictions", n);
  if (rc == 0) {
    for (int i = 0; i < n; i++) {
      int k = t->idx[which][i];
      y[i] = t->y[k];
      p[i] = (real)raw[i];
      yt[i] = (real)((y[i] - t->base[k] - t->mean) / t->std);
    }
    ev->loss = nn_loss(t->loss, p, yt, NULL, n, 1.0, NULL);
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

static void ckpt_path(const struct tstage *t, char *out, size_t n, const char *name) {
  snprintf(out, n, "%s/%s", t->dir, name);
}

/* The training state, and what scoring needs (arch, task, target,
 * standardisation, atomref, the card). A mid-epoch checkpoint (pos >= 0) adds
 * its place in the epoch, the running loss and the fingerprint of settings
 * and data. */
static int save(struct stage_ctx *ctx, struct tstage *t, const char *name, int epoch, long pos, double loss_sum) {
  char path[PATH_MAX + 64], err[512];
  ckpt_path(t, path, sizeof path, name);
  struct se3_ckpt_writer w;
  if (se3_ckpt_begin(&w, path, err, sizeof err)) return stage_fail_at(ctx, NULL, "%s", err);
  size_t np = t->np;
  enum se3_ck_type rt = sizeof(real) == 4 ? SE3_CK_F32 : SE3_CK_F64;
  se3_net_get(t->net, SE3_NET_PARAMS, t->params);
  if (!t->zero) { /* sharded: gather_moments put them in m and v */
    se3_net_get(t->net, SE3_NET_ADAM_M, t->m);
    se3_net_get(t->net, SE3_NET_ADAM_V, t->v);
  }
  int64_t state[3] = {t->step, epoch, t->best_epoch};
  double stats[3] = {t->best, t->mean, t->std};
  int64_t order_seed = (int64_t)mix(t->seed + (uint64_t)t->member, (uint64_t)epoch + 1);
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
  model_card_put(&w, ctx->root); /* the featurisation trained with: the model scores the same anywhere */
  double scaler[2] = {t->scaler.scale, (double)t->scaler.good};
  if (t->fp16) se3_ckpt_put(&w, "loss_scaler", SE3_CK_F64, scaler, 2);
  if (pos >= 0) {
    int64_t where[2] = {pos, (int64_t)t->fingerprint};
    se3_ckpt_put(&w, "position_fingerprint", SE3_CK_I64, where, 2);
    se3_ckpt_put(&w, "loss_sum", SE3_CK_F64, &loss_sum, 1);
  }
  return se3_ckpt_commit(&w, err, sizeof err) ? stage_fail_at(ctx, NULL, "%s", err) : STAGE_OK;
}

/* Loads checkpoint `name` of the current member into the training state.
 * 0, or -1 with a message naming the file in why (damaged, missing, or of
 * another model); the state may then be partly overwritten. */
static int load_state(struct tstage *t, const char *name, int *epoch, char *why, size_t whylen) {
  char path[PATH_MAX + 64];
  ckpt_path(t, path, sizeof path, name);
  struct se3_ckpt c;
  if (se3_ckpt_load(&c, path, why, whylen)) return -1;
  size_t np = t->np;
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
    snprintf(why, whylen, "%s: not a checkpoint of this model (%zu parameters)", path, np);
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

static int restore(struct stage_ctx *ctx, struct tstage *t, const char *name, int *epoch) {
  char why[PATH_MAX + 256];
  return load_state(t, name, epoch, why, sizeof why) ? stage_fail_at(ctx, NULL, "%s", why) : STAGE_OK;
}

/* A mid-epoch checkpoint of epoch e written under the same settings and
 * data: loads it and sets *pos (the next molecule of the epoch's order) and
 * *loss_sum; otherwise leaves everything alone and *pos = 0. */
static int resume_mid_epoch(struct stage_ctx *ctx, struct tstage *t, int e, long *pos, double *loss_sum) {
  char path[PATH_MAX + 64], err[512];
  *pos = 0;
  *loss_sum = 0;
  ckpt_path(t, path, sizeof path, "step.ckpt");
  if (access(path, F_OK) != 0) return STAGE_OK;
  struct se3_ckpt c;
  if (se3_ckpt_load(&c, path, err, sizeof err)) {
    /* damaged: the epoch is redone from its start, which computes the same */
    ctx->report->log(ctx, "%s; epoch %d starts from its beginning instead", err, e + 1);
    return STAGE_OK;
  }
  int64_t where[2], state[3];
  double ls;
  int usable = se3_ckpt_get(&c, "position_fingerprint", SE3_CK_I64, where, 2) == 0 &&
               se3_ckpt_get(&c, "step_epoch_best", SE3_CK_I64, state, 3) == 0 &&
               se3_ckpt_get(&c, "loss_sum", SE3_CK_F64, &ls, 1) == 0 && (uint64_t)where[1] == t->fingerprint &&
               state[1] == e;
  se3_ckpt_free(&c);
  if (!usable) return STAGE_OK;
  int got;
  if (restore(ctx, t, "step.ckpt", &got)) return STAGE_ERROR; /* intact but of another model */
  *pos = (long)where[0];
  *loss_sum = ls;
  ctx->report->log(ctx, "model %d epoch %d: resuming from its checkpoint at step %ld", t->member, e + 1, t->step);
  return STAGE_OK;
}

/* Member k's state before its first epoch. */
static void state_fresh(struct tstage *t, int k) {
  se3_net_init_params(t->net, mix(t->seed + (uint64_t)k, 0x1a1));
  if (t->zero) { /* rank 0's copies are the moments (the others' are overwritten by each epoch's) */
    memset(t->m, 0, t->m_len * sizeof *t->m);
    memset(t->v, 0, t->m_len * sizeof *t->v);
  }
  t->step = 0;
  nn_loss_scaler_init(&t->scaler);
  t->best = INFINITY;
  t->best_epoch = -1;
}

struct eval;
static int epoch_body(struct stage_ctx *ctx, struct tstage *t, int e, int replay, int save_epoch, struct eval *tr,
                      struct eval *va, double *lr, int *stopped_early);

/* Recovery from a damaged or lost checkpoint. Member k's state after epoch
 * `target`, recomputed: from the newest epoch checkpoint at or before
 * `max_start` that loads (each one that does not is reported in one line
 * naming the file and what is wrong), or from the start, then epoch by epoch
 * exactly as the first time (everything random derives from the seed, the
 * epoch and the step), so the recomputed checkpoints are the lost ones, byte
 * for byte. best.ckpt is rewritten where an epoch improved; epoch-<e+1>.ckpt
 * files too when save_epoch. */
static int replay_to(struct stage_ctx *ctx, struct tstage *t, int k, int target, int max_start, int save_epoch) {
  t->member = k;
  member_dir(ctx, k, t->dir, sizeof t->dir);
  t->epoch_done = -2;
  int start = -1;
  char name[64], why[PATH_MAX + 256];
  for (int j = max_start; j >= 0 && start < 0; j--) {
    char path[PATH_MAX + 64];
    int got = -1;
    epoch_file(name, sizeof name, j);
    ckpt_path(t, path, sizeof path, name);
    if (access(path, F_OK) != 0) continue; /* kept are the last two only */
    why[0] = 0;
    if (load_state(t, name, &got, why, sizeof why) == 0 && got == j) {
      start = j;
    } else {
      if (!why[0]) snprintf(why, sizeof why, "%s: holds epoch %d, not %d", path, got + 1, j + 1);
      ctx->report->log(ctx, "%s", why);
    }
  }
  if (start < 0) state_fresh(t, k);
  char who[48] = "";
  if (t->ensemble > 1) snprintf(who, sizeof who, "model %d: ", k);
  if (start >= 0) epoch_file(name, sizeof name, start);
  const char *from = start >= 0 ? name : "the start";
  if (target == start + 1)
    ctx->report->log(ctx, "%srecomputing epoch %d from %s", who, target + 1, from);
  else
    ctx->report->log(ctx, "%srecomputing epochs %d..%d from %s", who, start + 2, target + 1, from);
  t->epoch_done = start;
  for (int x = start + 1; x <= target; x++) {
    struct eval tr, va;
    double lr;
    int stopped_early;
    int ret = epoch_body(ctx, t, x, 1, save_epoch, &tr, &va, &lr, &stopped_early);
    if (ret != STAGE_OK) {
      t->epoch_done = -2;
      return ret;
    }
  }
  return STAGE_OK;
}

/* The state of member k after epoch e - 1: in memory, from its checkpoint,
 * or fresh. A checkpoint that is damaged, missing or of the wrong epoch is
 * reported and the state recomputed from the last good one (replay_to):
 * training goes on, never stuck on the file. */
static int state_before(struct stage_ctx *ctx, struct tstage *t, int k, int e) {
  if (t->member == k && t->epoch_done == e - 1) return STAGE_OK;
  t->member = k;
  member_dir(ctx, k, t->dir, sizeof t->dir);
  if (e == 0) {
    state_fresh(t, k);
  } else {
    char name[64], why[PATH_MAX + 256] = "";
    int got = -1;
    epoch_file(name, sizeof name, e - 1);
    if (load_state(t, name, &got, why, sizeof why) != 0 || got != e - 1) {
      if (!why[0]) snprintf(why, sizeof why, "%s/%s: holds epoch %d, not %d", t->dir, name, got + 1, e);
      ctx->report->log(ctx, "%s", why);
      return replay_to(ctx, t, k, e - 1, e - 2, 1);
    }
  }
  t->epoch_done = e - 1;
  return STAGE_OK;
}

/* A metrics row; epoch counted from 1. */
static int write_metrics(struct stage_ctx *ctx, const char *model, int epoch, int which, const struct eval *ev,
                         double lr, double seconds, int classify) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(ctx->db,
                         "INSERT OR REPLACE INTO metrics(model, epoch, split, loss, mae, rmse, r2, spearman, roc_auc, "
                         "pr_auc, ef1, lr, seconds) VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13)",
                         -1, &st, NULL) != SQLITE_OK)
    return stage_sql_fail(ctx, "writing metrics");
  const double v[8] = {ev->loss,         ev->reg.mae,     ev->reg.rmse,   ev->reg.r2,
                       ev->reg.spearman, ev->cls.roc_auc, ev->cls.pr_auc, ev->cls.ef1};
  sqlite3_bind_text(st, 1, model, -1, SQLITE_STATIC);
  sqlite3_bind_int(st, 2, epoch);
  sqlite3_bind_text(st, 3, split_name[which], -1, SQLITE_STATIC);
  for (int i = 0; i < 8; i++) {
    /* the loss always; metrics of the split's kind, not for the training split
     * (its loss is the running mean over the epoch's steps) */
    int applies = i == 0 || (which != SPLIT_TRAIN && (classify ? i >= 5 : i < 5));
    if (applies && isfinite(v[i]))
      sqlite3_bind_double(st, 4 + i, v[i]);
    else
      sqlite3_bind_null(st, 4 + i);
  }
  if (isfinite(lr)) sqlite3_bind_double(st, 12, lr);
  if (seconds >= 0) sqlite3_bind_double(st, 13, seconds);
  int rc = sqlite3_step(st);
  sqlite3_finalize(st);
  return rc == SQLITE_DONE ? STAGE_OK : stage_sql_fail(ctx, "writing metrics");
}

static int write_split(struct stage_ctx *ctx, struct tstage *t) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(ctx->db, "INSERT OR REPLACE INTO splits(mol_id, split) VALUES(?1, ?2)", -1, &st, NULL))
    return stage_sql_fail(ctx, "writing the split");
  for (int i = 0; i < t->n; i++) {
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, t->ids[i]);
    sqlite3_bind_text(st, 2, split_name[t->split[i]], -1, SQLITE_STATIC);
    if (sqlite3_step(st) != SQLITE_DONE) {
      sqlite3_finalize(st);
      return stage_sql_fail(ctx, "writing the split");
    }
  }
  sqlite3_finalize(st);
  return STAGE_OK;
}

/* ---- one epoch of one member ------------------------------------------------------------ */

/* One process: the running sum of the epoch's losses from the model's
 * backend into *loss_sum; this waits for the steps queued, and a failure of
 * the device in any of them fails the stage here. */
static int loss_sum_read(struct stage_ctx *ctx, struct tstage *t, double *loss_sum) {
  if (ctx->comm) return STAGE_OK; /* summed on the host, step by step */
  if (se3_net_loss_sum(t->net, loss_sum, t->why, sizeof t->why) == 0) return STAGE_OK;
  return stage_fail_at(ctx, NULL, "%s", t->why);
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
 * step. */
static int run_epoch(struct stage_ctx *ctx, struct tstage *t, int e, long pos, double *loss_sum, int replay) {
  const struct se3_comm *comm = ctx->comm;
  int nproc = comm_size(comm), rank = comm_rank(comm);
  if (comm && stage_writer(ctx)) {
    struct stage_order o = {.op = ORDER_EPOCH,
                            .i = {t->member, e, pos, t->step, replay, t->scaler.good},
                            .f = {*loss_sum, t->scaler.scale}};
    if (send_state(ctx, t, &o, 1)) return STAGE_ERROR;
  }
  int ntr = t->cnt[SPLIT_TRAIN];
  uint64_t seed = t->seed + (uint64_t)t->member;
  int *order = malloc((size_t)ntr * sizeof *order);
  real *yt = malloc((size_t)t->batch * sizeof *yt);
  if (!order || !yt) {
    free(order), free(yt);
    if (comm) comm_abort(comm, 1); /* the others would wait for this process's steps */
    return stage_fail_at(ctx, NULL, "out of memory");
  }
  memcpy(order, t->idx[SPLIT_TRAIN], (size_t)ntr * sizeof *order);
  shuffle(order, ntr, mix(seed, (uint64_t)e + 1));
  /* One process: the losses are summed on the model's backend, and the
   * host reads the sum where it needs it (checkpoints, the epoch's end), so
   * nothing waits for a GPU from one step to the next. Several: each step's
   * part is summed over the processes in the step's agreement. */
  if (!comm) se3_net_set_loss_sum(t->net, *loss_sum);
  if (pos && !replay) ctx->report->advance(ctx, pos);
  t->skipped = 0;
  int ret = STAGE_OK, held = 0; /* held: rank 0's checkpoint failed; the others learn it at the next step */
  long i;
  /* seconds in the steps, in the per-step agreement (which waits for the
   * slowest process), waiting for the gradient's sums after the backward
   * and in those sums (most of them while the backward ran), for the
   * epoch's log line */
  double t_steps = 0, t_agree = 0, t_sum = 0, t_sum_all = 0, t_start = now_s();
  int buckets = 0;
  for (i = pos; i < ntr; i += t->batch) {
    if (!comm && *ctx->stop) {
      ret = STAGE_STOPPED;
      break;
    }
    int k = ntr - i < t->batch ? ntr - (int)i : t->batch;
    /* this process's share of the batch: molecules lo..hi-1 of it */
    int lo = (int)((long)k * rank / nproc), hi = (int)((long)k * (rank + 1) / nproc), kr = hi - lo, failed = held;
    double part = 0;
    const real *dout = NULL; /* d loss / d predictions, for the backward; NULL: none (nothing to add) */
    int whole = 0;           /* se3_net_train_step took the whole step */
    if (held) {
      /* (its message is in ctx->err) */
    } else if (kr == 0) {
      /* an empty share: a zero gradient */
    } else if (make_batch(t, order + i + lo, kr, t->augment, mix(mix(seed, 0xa06), (uint64_t)t->step), lo)) {
      failed = 1;
    } else {
      for (int j = 0; j < kr; j++)
        yt[j] = (real)((t->y[order[i + lo + j]] - t->base[order[i + lo + j]] - t->mean) / t->std);
      /* the loss on the model's backend: the mean over the whole batch, not
       * over this share (kr of k); with fp16, scaled so that the backward's
       * fp16 products keep small gradients */
      struct se3_loss_spec ls = {t->loss, 1.0, kr, k, t->fp16 ? t->scaler.scale : 1};
      if (!comm && !t->fp16) {
        /* one process, no loss scaling: the whole step in one call (on a
         * GPU, recorded once per batch shape and replayed) */
        if (se3_net_train_step(t->net, &t->bb.b, yt, &ls, t->clip, &t->adam, t->step + 1,
                               nn_schedule_lr(&t->sched, t->step), t->why, sizeof t->why))
          failed = 1;
        else
          whole = 1;
      } else if (se3_net_forward_loss(t->net, &t->bb.b, yt, &ls, t->why, sizeof t->why)) {
        failed = 1;
      } else {
        dout = se3_net_loss_grad(t->net);
      }
    }
    /* The gradient; on several processes summed over them while the
     * backward runs (each process joins every sum, failed or not). A failed
     * backward leaves an incomplete gradient: the step is not taken. */
    if (comm) {
      struct se3_sum_stats ss;
      char why[512];
      int rc = se3_net_backward_sum(t->net, dout, comm, t->bucket_bytes, &ss, why, sizeof why);
      if (rc && !failed) {
        snprintf(t->why, sizeof t->why, "%s", why);
        failed = 1;
      }
      t_sum += ss.wait_s;
      t_sum_all += ss.sum_s;
      buckets = ss.buckets;
    } else if (dout && se3_net_backward_loss(t->net, t->why, sizeof t->why)) {
      failed = 1;
    }
    if (comm) {
      if (dout && !failed && se3_net_loss_part(t->net, &part, t->why, sizeof t->why)) failed = 1;
      double agree[3] = {part, failed, *ctx->stop != 0}, t0 = now_s();
      if (comm_sum_f64(comm, agree, 3)) {
        ret = stage_fail_at(ctx, NULL, "MPI failed at step %ld", t->step + 1);
        break;
      }
      if (agree[1] > 0) {
        if (held)
          ret = STAGE_ERROR;
        else if (failed)
          ret = stage_fail_at(ctx, NULL, "%s", t->why);
        else
          ret =
              stage_fail_at(ctx, NULL, "step %ld failed on %.0f other process%s of the run (their messages are above)",
                            t->step + 1, agree[1], agree[1] > 1 ? "es" : "");
        break;
      }
      if (agree[2] > 0) { /* a signal reached one of the processes: all stop before this step */
        ret = STAGE_STOPPED;
        break;
      }
      part = agree[0];
      t_agree += now_s() - t0;
    } else if (failed) {
      /* the epoch's transaction rolls back: nothing of this step is kept */
      ret = stage_fail_at(ctx, NULL, "%s", t->why);
      break;
    }
    if (comm) *loss_sum += part;
    if (whole) {
      t->step++; /* (se3_net_train_step took it, Adam's update included) */
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
    t_steps = now_s() - t_start;
    if (replay) continue; /* recomputing a lost epoch: no progress, no mid-epoch checkpoints */
    ctx->report->advance(ctx, k);
    if (t->ckpt_every > 0 && t->step % t->ckpt_every == 0 && i + k < ntr) {
      ret = loss_sum_read(ctx, t, loss_sum);
      if (ret == STAGE_OK) ret = gather_moments(ctx, t);
      if (ret == STAGE_OK && stage_writer(ctx)) ret = save(ctx, t, "step.ckpt", e, i + k, *loss_sum);
    }
    if (ret != STAGE_OK && comm) { /* told at the next step, which there is (i + k < ntr) */
      held = 1;
      ret = STAGE_OK;
    }
    if (ret != STAGE_OK) break;
  }
  /* the steps' losses (and whether the device failed in any of them) */
  if ((ret == STAGE_OK || ret == STAGE_STOPPED) && loss_sum_read(ctx, t, loss_sum) != STAGE_OK) ret = STAGE_ERROR;
  /* stopped by a signal part-way: the steps taken are kept, and the epoch
   * resumes from here (resume_mid_epoch) */
  if (ret == STAGE_STOPPED && !replay && i > pos &&
      (gather_moments(ctx, t) != STAGE_OK ||
       (stage_writer(ctx) && save(ctx, t, "step.ckpt", e, i, *loss_sum) != STAGE_OK)))
    ret = STAGE_ERROR;
  /* the epoch's end: rank 0 holds the moments again */
  if (ret == STAGE_OK) ret = gather_moments(ctx, t);
  if (ret == STAGE_OK && comm && !replay && t_steps > 0)
    ctx->report->log(ctx,
                     "model %d epoch %d: of %.2f s of steps, %.1f %% waiting for the gradients' sums after the "
                     "backward (the sums took %.1f %%, in %d bucket%s a step) and %.1f %% agreeing (which waits for "
                     "the slowest process)",
                     t->member, e + 1, t_steps, 100 * t_sum / t_steps, 100 * t_sum_all / t_steps, buckets,
                     buckets == 1 ? "" : "s", 100 * t_agree / t_steps);
  if (ret == STAGE_OK && t->fp16 && !replay)
    ctx->report->log(ctx, "model %d epoch %d: loss scale %g; %ld step%s skipped (a gradient out of fp16's range)",
                     t->member, e + 1, t->scaler.scale, t->skipped, t->skipped == 1 ? "" : "s");
  free(order), free(yt);
  return ret;
}

/* Epoch e of member t->member from its state after epoch e - 1 (in memory):
 * trains (unless stopped early), evaluates on the validation split, writes
 * best.ckpt when validation improved and, when save_epoch, epoch-<e+1>.ckpt
 * (dropping the one two epochs back). A replay (replay_to) neither resumes
 * from nor writes mid-epoch checkpoints, nor advances the progress. */
static int epoch_body(struct stage_ctx *ctx, struct tstage *t, int e, int replay, int save_epoch, struct eval *tr,
                      struct eval *va, double *lr, int *stopped_early) {
  *stopped_early = t->patience > 0 && t->best_epoch >= 0 && e - 1 - t->best_epoch >= t->patience;
  tr->loss = NAN;
  *lr = NAN;
  if (!*stopped_early) {
    long pos = 0;
    double loss_sum = 0;
    if (!replay && resume_mid_epoch(ctx, t, e, &pos, &loss_sum)) {
      t->epoch_done = -2;
      return STAGE_ERROR;
    }
    int ret = run_epoch(ctx, t, e, pos, &loss_sum, replay);
    if (ret != STAGE_OK) {
      t->epoch_done = -2; /* the parameters are part-way through an epoch */
      return ret;
    }
    tr->loss = loss_sum / t->cnt[SPLIT_TRAIN];
    *lr = nn_schedule_lr(&t->sched, t->step - 1);
  }
  if (evaluate(ctx, t, SPLIT_VALID, va, NULL)) return stage_fail_at(ctx, NULL, "evaluating: %s", t->why);
  double watch = t->cnt[SPLIT_VALID] ? va->loss : tr->loss;
  if (!*stopped_early && isfinite(watch) && watch < t->best) {
    t->best = watch;
    t->best_epoch = e;
    if (save(ctx, t, "best.ckpt", e, -1, 0)) return STAGE_ERROR;
  }
  t->epoch_done = e;
  if (!save_epoch) return STAGE_OK;
  char name[64], old[PATH_MAX + 64];
  epoch_file(name, sizeof name, e);
  if (save(ctx, t, name, e, -1, 0)) return STAGE_ERROR;
  /* the mid-epoch checkpoint is spent: were this chunk lost now, redoing the
   * epoch from its start computes the same (a replay of an earlier epoch
   * leaves the current epoch's alone) */
  if (!replay) {
    ckpt_path(t, old, sizeof old, "step.ckpt");
    unlink(old);
  }
  /* the checkpoint two epochs back is no longer needed once this one is */
  if (e >= 2) {
    epoch_file(name, sizeof name, e - 2);
    ckpt_path(t, old, sizeof old, name);
    unlink(old);
  }
  return STAGE_OK;
}

static int train_chunk(struct stage_ctx *ctx, int64_t chunk, int64_t *n_ok, int64_t *n_rej) {
  struct tstage *t = ctx->state;
  int k = (int)(chunk / t->epochs), e = (int)(chunk % t->epochs);
  char model[32];
  snprintf(model, sizeof model, "train/%d", k);
  *n_ok = *n_rej = 0;
  int ret = state_before(ctx, t, k, e);
  if (ret != STAGE_OK) return ret;
  if (chunk == 0 && write_split(ctx, t)) return STAGE_ERROR; /* the split, once */
  double t0 = now_s(), lr;
  int stopped_early;
  struct eval tr, va;
  ret = epoch_body(ctx, t, e, 0, 1, &tr, &va, &lr, &stopped_early);
  if (ret != STAGE_OK) return ret;
  double secs = now_s() - t0;
  if (!stopped_early &&
      (write_metrics(ctx, model, e + 1, SPLIT_TRAIN, &tr, lr, secs, t->classify) ||
       (t->cnt[SPLIT_VALID] && write_metrics(ctx, model, e + 1, SPLIT_VALID, &va, lr, secs, t->classify))))
    return STAGE_ERROR;
  char who[48] = "";
  if (t->ensemble > 1) snprintf(who, sizeof who, "model %d ", k);
  if (stopped_early)
    ctx->report->log(ctx, "%sepoch %d: stopped early (no better validation loss since epoch %d)", who, e + 1,
                     t->best_epoch + 1);
  else if (t->classify)
    ctx->report->log(ctx, "%sepoch %d: loss %.4f, valid loss %.4f ROC-AUC %.3f", who, e + 1, tr.loss, va.loss,
                     va.cls.roc_auc);
  else
    ctx->report->log(ctx, "%sepoch %d: loss %.4f, valid loss %.4f MAE %.4g", who, e + 1, tr.loss, va.loss, va.reg.mae);
  *n_ok = stopped_early ? 0 : t->cnt[SPLIT_TRAIN];
  return STAGE_OK;
}

/* Member k's checkpoints that outlive training, epoch-<epochs>.ckpt and
 * best.ckpt (the model scoring reads), load; a damaged or lost one is
 * reported and recomputed (replay_to), byte for byte what it was. */
static int ensure_final(struct stage_ctx *ctx, struct tstage *t, int k) {
  t->member = k;
  member_dir(ctx, k, t->dir, sizeof t->dir);
  t->epoch_done = -2;
  int last = t->epochs - 1, got = -1, ret;
  char name[64], why[PATH_MAX + 256] = "";
  epoch_file(name, sizeof name, last);
  if (load_state(t, name, &got, why, sizeof why) != 0 || got != last) {
    if (!why[0]) snprintf(why, sizeof why, "%s/%s: holds epoch %d, not %d", t->dir, name, got + 1, last + 1);
    ctx->report->log(ctx, "%s", why);
    if ((ret = replay_to(ctx, t, k, last, last - 1, 1)) != STAGE_OK) return ret;
  }
  /* the state after the last epoch names the best one */
  int best = t->best_epoch;
  char path[PATH_MAX + 64];
  ckpt_path(t, path, sizeof path, "best.ckpt");
  t->epoch_done = -2;
  if (best < 0) return STAGE_OK; /* no epoch improved: there is no best.ckpt to have */
  why[0] = 0;
  got = -1;
  if (load_state(t, "best.ckpt", &got, why, sizeof why) == 0 && got == best) return STAGE_OK;
  if (!why[0]) snprintf(why, sizeof why, "%s: holds epoch %d, the best was %d", path, got + 1, best + 1);
  ctx->report->log(ctx, "%s", why);
  /* from before the best epoch, without touching the epoch checkpoints */
  ret = replay_to(ctx, t, k, best, best - 1, 0);
  t->epoch_done = -2;
  return ret;
}

/* The predictions rows of a split (the report draws them): what was
 * there for this model is replaced. */
static int write_predictions(struct stage_ctx *ctx, struct tstage *t, const char *model, int which,
                             const double *pred) {
  sqlite3_stmt *del = NULL, *st = NULL;
  int rc = sqlite3_prepare_v2(ctx->db, "DELETE FROM predictions WHERE model = ?1 AND split = ?2", -1, &del, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_prepare_v2(ctx->db,
                            "INSERT OR REPLACE INTO predictions(model, mol_id, split, label, value) "
                            "VALUES(?1, ?2, ?3, ?4, ?5)",
                            -1, &st, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_bind_text(del, 1, model, -1, SQLITE_STATIC);
    sqlite3_bind_text(del, 2, split_name[which], -1, SQLITE_STATIC);
    rc = sqlite3_step(del) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
  }
  for (int i = 0; rc == SQLITE_OK && i < t->cnt[which]; i++) {
    int k = t->idx[which][i];
    sqlite3_reset(st);
    sqlite3_bind_text(st, 1, model, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, t->ids[k]);
    sqlite3_bind_text(st, 3, split_name[which], -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 4, t->y[k]);
    sqlite3_bind_double(st, 5, pred[i]);
    rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
  }
  sqlite3_finalize(del);
  sqlite3_finalize(st);
  return rc == SQLITE_OK ? STAGE_OK : stage_sql_fail(ctx, "writing the test predictions");
}

/* Member k's best checkpoint on the test split, its predictions there, and
 * its models row. */
static int finalize_member(struct stage_ctx *ctx, struct tstage *t, int k) {
  char path[PATH_MAX + 64], id[32];
  snprintf(id, sizeof id, "train/%d", k);
  int ret = ensure_final(ctx, t, k);
  if (ret != STAGE_OK) return ret;
  ckpt_path(t, path, sizeof path, "best.ckpt");
  const char *name = access(path, R_OK) == 0 ? "best.ckpt" : NULL;
  char last[64];
  if (!name) {
    epoch_file(last, sizeof last, t->epochs - 1);
    name = last;
  }
  int epoch;
  t->epoch_done = -2; /* memory now holds the best, not the last, epoch */
  if (restore(ctx, t, name, &epoch)) return STAGE_ERROR;
  struct eval te;
  int nt = t->cnt[SPLIT_TEST];
  double *pred = malloc((size_t)(nt + 1) * sizeof *pred);
  if (!pred) return stage_fail_at(ctx, NULL, "out of memory for %d test predictions", nt);
  if (evaluate(ctx, t, SPLIT_TEST, &te, pred)) {
    free(pred);
    return stage_fail_at(ctx, NULL, "evaluating: %s", t->why);
  }
  ret = write_predictions(ctx, t, id, SPLIT_TEST, pred);
  free(pred);
  if (ret != STAGE_OK) return ret;
  if (nt && write_metrics(ctx, id, epoch + 1, SPLIT_TEST, &te, NAN, -1, t->classify)) return STAGE_ERROR;
  char rel[PATH_MAX + 64];
  snprintf(rel, sizeof rel, "models/train-%d/%s", k, name);
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(ctx->db,
                         "INSERT OR REPLACE INTO models(id, target, task, checkpoint, arch, mean, std, best_epoch, "
                         "best_valid_loss, n_train, n_valid, n_test, device) "
                         "VALUES(?12,?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?13)",
                         -1, &st, NULL) != SQLITE_OK)
    return stage_sql_fail(ctx, "writing the model");
  sqlite3_bind_text(st, 1, t->target, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, t->classify ? "classification" : "regression", -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, rel, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 4, t->arch, -1, SQLITE_STATIC);
  sqlite3_bind_double(st, 5, t->mean);
  sqlite3_bind_double(st, 6, t->std);
  sqlite3_bind_int(st, 7, (t->best_epoch >= 0 ? t->best_epoch : epoch) + 1); /* counted from 1 */
  if (isfinite(t->best))
    sqlite3_bind_double(st, 8, t->best);
  else
    sqlite3_bind_null(st, 8);
  for (int i = 0; i < 3; i++)
    sqlite3_bind_int(st, 9 + i, t->cnt[i]);
  sqlite3_bind_text(st, 12, id, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 13, t->device, -1, SQLITE_STATIC);
  int rc = sqlite3_step(st);
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return stage_sql_fail(ctx, "writing the model");
  if (t->cnt[SPLIT_TEST]) {
    char who[48] = "";
    if (t->ensemble > 1) snprintf(who, sizeof who, "model %d ", k);
    if (t->classify)
      ctx->report->log(ctx, "%stest (%d molecules, best epoch %d): ROC-AUC %.3f, PR-AUC %.3f, EF1%% %.2f", who,
                       t->cnt[2], epoch + 1, te.cls.roc_auc, te.cls.pr_auc, te.cls.ef1);
    else
      ctx->report->log(ctx, "%stest (%d molecules, best epoch %d): MAE %.4g, RMSE %.4g, R2 %.3f", who, t->cnt[2],
                       epoch + 1, te.reg.mae, te.reg.rmse, te.reg.r2);
  }
  return STAGE_OK;
}

static int train_finalize(struct stage_ctx *ctx) {
  struct tstage *t = ctx->state;
  for (int k = 0; k < t->ensemble; k++)
    if (finalize_member(ctx, t, k)) return STAGE_ERROR;
  /* the reservation foresaw every batch: the memory did not grow since
   * (else largest_batches missed one: the test suite looks for this line) */
  size_t now = se3_net_memory_bytes(t->net);
  if (now > t->reserved_bytes)
    ctx->report->log(ctx,
                     "the model's memory grew by %.1f MB after the start: a batch was larger than the largest "
                     "foreseen (a defect of se3screen; the run is not affected)",
                     (double)(now - t->reserved_bytes) / 1e6);
  struct se3_step_stats st;
  se3_net_step_stats(t->net, &st);
  if (st.recorded || st.refused)
    ctx->report->log(ctx,
                     "training steps: %ld replayed from %ld recording%s (one per batch shape: CUDA graphs), %ld run "
                     "eagerly (a shape's first), %ld recording%s refused",
                     st.replayed, st.recorded, st.recorded == 1 ? "" : "s", st.eager, st.refused,
                     st.refused == 1 ? "" : "s");
  return STAGE_OK;
}

static void train_end(struct stage_ctx *ctx) {
  struct tstage *t = ctx->state;
  if (!t) return;
  for (int i = 0; t->g && i < t->n; i++)
    graph_free(&t->g[i]);
  free(t->g);
  sqlite3_finalize(t->get_graph);
  free(t->ids);
  free(t->y);
  free(t->atoms);
  free(t->edges);
  free(t->split);
  free(t->split_label);
  for (int i = 0; t->scaffold && i < t->n; i++)
    free(t->scaffold[i]);
  free(t->scaffold);
  free(t->counts);
  free(t->base);
  for (int i = 0; i < 3; i++)
    free(t->idx[i]);
  free(t->params);
  free(t->m);
  free(t->v);
  se3_net_free(t->net);
  se3_batch_buf_free(&t->bb);
  free(t);
  ctx->state = NULL;
}

/* Ranks > 0 of a data-parallel run: rank 0's epochs and predictions, with
 * its state, until it ends the stage. A failure is this process's to
 * report; rank 0 hears of it through the step's or the prediction's
 * agreement and decides. */
static int train_serve(struct stage_ctx *ctx) {
  struct tstage *t = ctx->state;
  int rank = comm_rank(ctx->comm);
  for (;;) {
    struct stage_order o;
    if (stage_order(ctx, &o)) return stage_fail_at(ctx, NULL, "MPI failed waiting for rank 0");
    int ret;
    if (o.op == 0) return STAGE_OK;
    if (o.op == ORDER_EPOCH) {
      if (receive_state(ctx, t, 1)) return STAGE_ERROR;
      t->member = (int)o.i[0];
      t->step = (long)o.i[3];
      t->scaler.good = (long)o.i[5];
      t->scaler.scale = o.f[1];
      t->epoch_done = -2;
      double loss_sum = o.f[0];
      ret = run_epoch(ctx, t, (int)o.i[1], (long)o.i[2], &loss_sum, (int)o.i[4]);
    } else if (o.op == ORDER_PREDICT && o.i[0] >= 0 && o.i[0] < 3) {
      if (receive_state(ctx, t, 0)) return STAGE_ERROR;
      int which = (int)o.i[0];
      double *out = malloc(((size_t)t->cnt[which] + 1) * sizeof *out);
      if (!out) comm_abort(ctx->comm, 1); /* the others wait for this process's share */
      ret = predict(ctx, t, which, out) ? stage_fail_at(ctx, NULL, "predicting: %s", t->why) : STAGE_OK;
      free(out);
    } else {
      return stage_fail_at(ctx, NULL, "rank 0 sent order %lld, which this process cannot follow", (long long)o.op);
    }
    if (ret == STAGE_ERROR) fprintf(stderr, "se3screen (rank %d): train: %s\n", rank, ctx->err);
  }
}

const struct stage stage_train = {
    .name = "train",
    .done = "trained on",
    .tables = "predictions metrics models splits",
    .uses_sets = 0,
    .after = "graph",
    .blob_column = NULL,
    .begin = train_begin,
    .run_chunk = train_chunk,
    .finalize = train_finalize,
    .end = train_end,
    .serve = train_serve,
    .ready = repair_finished,
    .uses_model = 1,
    .skipped = stage_score_only,
};
