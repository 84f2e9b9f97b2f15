/* train_stage.h — the train stage's state (struct tstage), shared by
 * train.c (the stage: data, model, epochs, tables) and train_split.c (the
 * split: drawing it, saying it, writing it). */
#ifndef SE3_TRAIN_STAGE_H
#define SE3_TRAIN_STAGE_H

#include <stdint.h>

#include "chem/fingerprint.h"
#include "chem/graph.h"
#include "chem/graph_settings.h"
#include "models/split.h"
#include "models/trainer.h"
#include "stage.h"
#include "train_confs.h"
#include "train_set.h"

/* The stage around models/trainer.h's trainer: what it trains on read from
 * the database, its split and atomref counts, its molecules' graphs served
 * to it (from memory, or read one by one in a data-parallel run), and its
 * results written to the tables. */
struct tstage {
  struct se3_trainer tr;
  struct stage_ctx *ctx;    /* the trainer's io hooks' */
  struct graph_settings gs; /* to rebuild graphs not stored */
  const char *set;
  int restart_epochs, low_memory;
  int balanced;            /* class_weight: balanced */
  char device[256];        /* the backend, its device and precision (models.device) */
  char profile[256];       /* the training set's charge states and shapes, for the card (set_profile.h) */
  struct train_set domain; /* the train split's fingerprints and names, in every checkpoint (train_set.h) */
  double *ens_sum;         /* an ensemble's test predictions summed over its members (finalize) */
  /* data: molecules with the target label, in id order (tr.n of them) */
  int64_t *ids;
  struct graph *g;          /* NULL when `lazy` */
  int lazy;                 /* data parallel: each process reads the graphs of its
                               share of each batch when it needs them (get_graph) */
  sqlite3_stmt *get_graph;  /* lazy: a graph by mol_id */
  struct graph one;         /* lazy: the graph read last */
  struct train_confs confs; /* not lazy: the other conformers' graphs (train_confs.h) */
  int node_width;
  double *split_label;               /* split.method column: the column's value (NAN: none) */
  char **scaffold;                   /* split.method scaffold: the framework's key; cluster: the cluster's */
  struct fp *fps;                    /* split.method cluster: Morgan fingerprints (radius 2) */
  char **compound;                   /* the compound's key: the InChIKey's first block ("#<id>" without an InChIKey) */
  struct se3_split_count split_n[3]; /* molecules, compounds and actives of each split */
  uint16_t *counts;                  /* atomref: n x SE3_ATOMREF_MAX element counts */
  unsigned char *split;
};

/* "name" (file record N) of molecule id, for messages. */
void train_mol_where(struct stage_ctx *ctx, int64_t id, char *out, size_t n);
/* t's split drawn by stages.train.split (random, scaffold, cluster, or a
 * column's), into t->split, t->tr.idx and cnt, and each split's counts
 * (t->split_n). STAGE_OK, or the stage's error. */
int train_make_split(struct stage_ctx *ctx, struct tstage *t);
/* Each split's molecules and compounds (and actives) in the log, and a
 * warning for a split of few actives. */
void train_log_split_counts(struct stage_ctx *ctx, const struct tstage *t, const char *method);
/* The split into `splits`, its counts into `split_counts`. */
int train_write_split(struct stage_ctx *ctx, struct tstage *t);

#endif
