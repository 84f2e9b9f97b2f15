/* train_confs.c — the train stage's molecules of several conformers
 * (train_confs.h). */
#include "train_confs.h"

#include <stdio.h>
#include <stdlib.h>

#include "common/error.h"
#include "models/trainer.h" /* se3_mix */

static int grow(struct train_confs *c, int i) {
  if (i < c->cap) return 0;
  int cap = c->cap ? 2 * c->cap : 256;
  while (cap <= i)
    cap *= 2;
  int *n = realloc(c->n, (size_t)cap * sizeof *n);
  if (n) c->n = n;
  struct graph **more = realloc(c->more, (size_t)cap * sizeof *more);
  if (more) c->more = more;
  if (!n || !more) return -1;
  for (int k = c->cap; k < cap; k++) {
    c->n[k] = 1;
    c->more[k] = NULL;
  }
  c->cap = cap;
  return 0;
}

int train_confs_load(struct train_confs *c, int i, const struct graph_settings *gs, const void *blob, size_t len,
                     int *edges, struct se3_error *err) {
  int nc = graph_row_conformers(blob, len);
  if (nc <= 1 && i >= c->cap) return 0; /* (nothing held for a molecule of one) */
  if (grow(c, i)) {
    se3_error_set(err, SE3_ERR_MEMORY, "out of memory");
    return -1;
  }
  c->n[i] = 1;
  c->more[i] = NULL;
  if (nc <= 1) return 0;
  if (!(c->more[i] = calloc((size_t)nc - 1, sizeof *c->more[i]))) {
    se3_error_set(err, SE3_ERR_MEMORY, "out of memory");
    return -1;
  }
  for (int k = 1; k < nc; k++) {
    graph_init(&c->more[i][k - 1]);
    if (graph_load_conf(gs, blob, len, k, &c->more[i][k - 1], err)) { return -1; }
    c->n[i] = k + 1;
    if (c->more[i][k - 1].n_edges > *edges) *edges = c->more[i][k - 1].n_edges;
  }
  return 0;
}

int train_confs_pick(uint64_t draw, int64_t id, int nconf) {
  if (!draw || nconf <= 1) return 0;
  return (int)(se3_mix(draw, (uint64_t)id) % (uint64_t)nconf);
}

int train_confs_lazy(uint64_t draw, int64_t id, sqlite3_stmt *st) {
  return train_confs_pick(draw, id, graph_row_conformers(sqlite3_column_blob(st, 0), (size_t)sqlite3_column_bytes(st, 0)));
}

const struct graph *train_confs_graph(const struct train_confs *c, int i, int64_t id, uint64_t draw,
                                      const struct graph *g0) {
  if (i >= c->cap || c->n[i] <= 1) return g0;
  int k = train_confs_pick(draw, id, c->n[i]);
  return k ? &c->more[i][k - 1] : g0;
}

void train_confs_free(struct train_confs *c) {
  for (int i = 0; i < c->cap; i++) {
    for (int k = 1; c->more[i] && k < c->n[i]; k++)
      graph_free(&c->more[i][k - 1]);
    free(c->more[i]);
  }
  free(c->n);
  free(c->more);
  c->cap = 0;
  c->n = NULL;
  c->more = NULL;
}
