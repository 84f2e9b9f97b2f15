/* train_confs.h — the train stage's molecules of several conformers
 * (stages.ingest.conformers): their other conformers' graphs held beside
 * conformer 0's, and the conformer a training step reads, one a molecule
 * each epoch, drawn from the trainer's conf_draw (models/trainer.h: the
 * member's seed and the epoch), so a resumed run reads the same ones. */
#ifndef SE3_TRAIN_CONFS_H
#define SE3_TRAIN_CONFS_H

#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

#include "chem/graph.h"
#include "chem/graph_settings.h"
#include "common/error.h"

struct train_confs {
  int cap;
  int *n;              /* per molecule: its conformers (1: none but conformer 0) */
  struct graph **more; /* per molecule: conformers 1..n-1 (NULL for one) */
};

/* Molecule i's other conformers from its graphs row's blob; *edges raised to
 * the most edges of any of them (the trainer reserves for the largest). 0,
 * or -1 with err set. */
int train_confs_load(struct train_confs *c, int i, const struct graph_settings *gs, const void *blob, size_t len,
                     int *edges, struct se3_error *err);
/* The conformer of molecule id (of nconf) a step reads under draw (0:
 * conformer 0). */
int train_confs_pick(uint64_t draw, int64_t id, int nconf);
/* train_confs_pick for the graphs row's blob in column 0 of st (a
 * data-parallel run reads each graph when a step needs it). */
int train_confs_lazy(uint64_t draw, int64_t id, sqlite3_stmt *st);
/* Molecule i's graph for draw: g0 (its conformer 0) or another's. */
const struct graph *train_confs_graph(const struct train_confs *c, int i, int64_t id, uint64_t draw,
                                      const struct graph *g0);
void train_confs_free(struct train_confs *c);

#endif
