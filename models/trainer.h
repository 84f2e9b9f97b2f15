/* trainer.h — training an SE(3)-Transformer on molecules in memory: the
 * epoch loop, evaluation, checkpoints with resume and replay, ensembles and
 * data parallel, with no database and no workflow in sight.
 *
 * The caller (stages/train.c, a test, a benchmark) fills a se3_trainer:
 * the settings, the data (labels, each molecule's graph size, the split)
 * and the io hooks through which the trainer reads a molecule's graph,
 * logs, counts progress and orders the other processes of a data-parallel
 * run; it creates the net and calls se3_trainer_open. Then, per member k
 * and epoch e (0-based):
 *   se3_trainer_state_before(t, k, e)   the state after epoch e - 1
 *   se3_trainer_epoch(t, e, 0, 1, ...)  train, validate, checkpoint
 * and at the end se3_trainer_ensure_final(t, k) (the checkpoints that
 * outlive training, recomputed where lost) and se3_trainer_evaluate.
 *
 * Everything random derives from the member's seed, the epoch and the step
 * (data order, rotations, initial parameters), so an epoch redone after a
 * kill, or recomputed from the checkpoint before it, computes exactly what
 * the lost run computed: a resumed run ends with bit-identical parameters.
 * Checkpoints go to <models_dir>/train-<k>/: epoch-<e+1>.ckpt (the last
 * two kept), best.ckpt when validation improved, step.ckpt mid-epoch
 * (checkpoint_every, or where a signal stopped an epoch) guarded by the
 * fingerprint of settings and data.
 *
 * Functions return SE3_TRAIN_OK, SE3_TRAIN_ERROR (t->err says why) or
 * SE3_TRAIN_STOPPED (*io.stop was seen; the state on disk is consistent).
 */
#ifndef SE3_TRAINER_H
#define SE3_TRAINER_H

#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "common/comm.h"
#include "models/checkpoint.h"
#include "models/metrics.h"
#include "common/error.h"
#include "models/model.h"

/* The trainer's returns are the one table's (common/error.h). */
#define SE3_TRAIN_OK SE3_RC_OK
#define SE3_TRAIN_ERROR SE3_RC_FAILED
#define SE3_TRAIN_STOPPED SE3_RC_STOPPED

enum { SE3_SPLIT_TRAIN = 0, SE3_SPLIT_VALID = 1, SE3_SPLIT_TEST = 2 };
extern const char *const se3_split_name[3]; /* "train", "valid", "test" */

/* distinct elements the atomref fit can hold */
#define SE3_ATOMREF_MAX 32

/* One molecule's graph as the batch takes it (arrays as chem/graph.h's). */
struct se3_sample {
  int n_nodes, n_edges;
  const float *node_feat, *edge_feat, *rel_pos;
  const int32_t *src, *dst;
  void *hold; /* the io's, for release */
};

/* An order of rank 0 to the other processes of a data-parallel run: an
 * epoch from a state, or predictions for a split (se3_trainer_follow). */
enum { SE3_ORDER_EPOCH = 10, SE3_ORDER_PREDICT = 11 };
struct se3_train_order {
  int64_t op;
  int64_t i[6];
  double f[2];
};

struct se3_trainer_io {
  void *user;
  const struct se3_comm *comm; /* NULL: one process */
  int writer;                  /* this process writes checkpoints (rank 0) */
  volatile sig_atomic_t *stop; /* set by a signal: stop at the next step */
  /* molecule i's graph into *s; 0, or -1 with a message in why */
  int (*sample)(void *user, int i, struct se3_sample *s, char *why, size_t whylen);
  void (*release)(void *user, struct se3_sample *s); /* NULL: nothing to give back */
  void (*log)(void *user, const char *line);
  void (*advance)(void *user, int64_t n);                  /* n training molecules done */
  int (*order)(void *user, struct se3_train_order *o);     /* rank 0: to the others; 0, or -1 when MPI failed */
  void (*put_card)(void *user, struct se3_ckpt_writer *w); /* extra records of every checkpoint (NULL: none) */
};

struct se3_trainer {
  struct se3_trainer_io io;
  /* settings */
  int classify, epochs, batch, patience, augment, ensemble, atomref, fp16;
  long ckpt_every;
  enum nn_loss loss;
  double pos_weight; /* NN_LOSS_BCE: an active's weight in the loss (class_weight); 0 or 1: unweighted */
  struct nn_adam adam;
  struct nn_schedule sched;
  double clip;
  uint64_t seed;
  int zero;                       /* shard Adam's moments over the processes (ZeRO stage 1) */
  size_t bucket_bytes;            /* gradient sums in buckets of this size while the backward runs (0: one after) */
  int dp_whole; /* data parallel on a GPU with NCCL: whole steps (se3_net_train_step_dp), recorded */
  const char *target;             /* the label's name, recorded in checkpoints */
  char arch[512];                 /* se3_config_format of the model */
  char models_dir[PATH_MAX - 32]; /* members in <models_dir>/train-<k> */
  /* data: n molecules, each with its label, graph size and split */
  int n;
  double *y;
  int *atoms, *edges;
  int *idx[3], cnt[3]; /* each split's molecules (indices 0..n-1) */
  double mean, std;    /* standardisation of regression targets (less base) */
  int nz;              /* atomref: elements */
  int64_t zs[SE3_ATOMREF_MAX];
  double ref[SE3_ATOMREF_MAX];
  double *base;         /* per molecule: its atomref sum (0 without) */
  uint64_t fingerprint; /* settings and data: guards mid-epoch checkpoints */
  /* Nonzero while a training step's molecules are read: a key drawn from
   * the member's seed and the epoch, from which io.sample picks a molecule
   * of several conformers its conformer for the epoch (the same on a resumed
   * run); 0 otherwise (evaluation, predictions: conformer 0). */
  uint64_t conf_draw;
  /* the model and the training state of `member` after `epoch_done` */
  struct se3_net *net;
  size_t np;
  real *params, *m, *v; /* host copies, for checkpoints and the other processes */
  size_t opt_lo, opt_hi, m_len;
  size_t reserved_bytes; /* the net's memory after se3_trainer_open reserved the largest batches */
  long step;
  struct nn_loss_scaler scaler; /* (fp16) part of the training state, checkpointed */
  long skipped;                 /* (fp16) steps skipped this epoch */
  int member, epoch_done;       /* epoch_done -2: nothing in memory */
  double best;
  int best_epoch; /* -1: none */
  struct se3_batch_buf bb;
  char dir[PATH_MAX]; /* <models_dir>/train-<member> */
  char why[512];      /* what the model or io said */
  struct se3_error net_err; /* the net's last failure, with its kind (its text also in why) */
  char err[768];      /* why a call failed */
  enum se3_err_kind err_kind; /* ... and what failed (common/error.h): SE3_ERR_RUN unless a checkpoint, the device
                                 or memory said otherwise */
};

/* Loss and metrics of a split, in the target's units. */
struct se3_eval {
  double loss;
  struct se3_reg_metrics reg;
  struct se3_cls_metrics cls;
};

/* Fisher-Yates with a stream seeded by seed; a hash of two words. */
void se3_shuffle(int *a, int n, uint64_t seed);
uint64_t se3_mix(uint64_t a, uint64_t b);

/* split[i] for n molecules: n_test and n_valid drawn at random (seeded), or
 * (groups) whole groups of equal key, largest first, filling train, then
 * valid, then test. perm: n ints of scratch. */
void se3_split_random(int n, unsigned char *split, int *perm, uint64_t seed, int n_test, int n_valid);
int se3_split_groups(int n, char *const *key, unsigned char *split, int *perm, uint64_t seed, int n_test, int n_valid);

/* Per-element references: least squares of y on the training split's element
 * counts (counts: n x SE3_ATOMREF_MAX, t->nz columns used) into t->ref, and
 * each molecule's sum into t->base. Then the standardisation of the targets
 * less base over the training split (regression). */
int se3_trainer_fit_atomref(struct se3_trainer *t, const uint16_t *counts);
int se3_trainer_standardize(struct se3_trainer *t);

/* With t->net created and every setting and array above filled: the
 * optimizer sharded (zero), the memory of the run's largest batches
 * reserved (-1 with err: they do not fit; the message says the batch),
 * host copies allocated, the schedule set from lr, min_lr, warmup and
 * restart_epochs. */
int se3_trainer_open(struct se3_trainer *t, double lr, double min_lr, long warmup, int restart_epochs);
void se3_trainer_free(struct se3_trainer *t); /* arrays, net, batch buffer */

void se3_trainer_member_dir(const struct se3_trainer *t, int k, char *out, size_t n);
void se3_trainer_epoch_file(char *out, size_t n, int e); /* epoch-<e+1>.ckpt */

int se3_trainer_state_before(struct se3_trainer *t, int k, int e);
/* Epoch e of the member in memory: trains (unless stopped early by
 * patience), validates, writes best.ckpt when it improved and, with
 * save_epoch, epoch-<e+1>.ckpt. A replay neither resumes mid-epoch nor
 * advances progress. */
int se3_trainer_epoch(struct se3_trainer *t, int e, int replay, int save_epoch, struct se3_eval *tr,
                      struct se3_eval *va, double *lr, int *stopped_early);
int se3_trainer_ensure_final(struct se3_trainer *t, int k);
/* Loads checkpoint `name` of the member in memory (after state_before or
 * ensure_final); *epoch is its epoch. */
int se3_trainer_restore(struct se3_trainer *t, const char *name, int *epoch);
/* keep (optional): each molecule's prediction in the target's units
 * (classification: the probability), in t->idx[which]'s order. 0, or -1
 * with t->why. */
int se3_trainer_evaluate(struct se3_trainer *t, int which, struct se3_eval *ev, double *keep);
/* Member k's checkpoints named from 0 by se3screen before schema 6
 * (epoch-<e>.ckpt holding epoch e) renamed epoch-<e+1>.ckpt, the highest
 * first; renaming(user, k, e, new name), when given, is called before each
 * rename (a nonzero return: -1, its message is the caller's). */
int se3_trainer_adopt_zero_based(struct se3_trainer *t, int k,
                                 int (*renaming)(void *user, int k, int from, const char *name), void *user);
/* Member folders past the ensemble (an earlier training's): their
 * checkpoints removed, and the folder when nothing else is in it. */
int se3_trainer_drop_stale_members(struct se3_trainer *t);
/* The log's last word: memory grown past the reservation, steps recorded. */
void se3_trainer_report(struct se3_trainer *t);
/* Ranks > 0: follows one order of rank 0's. */
int se3_trainer_follow(struct se3_trainer *t, const struct se3_train_order *o);

#endif
