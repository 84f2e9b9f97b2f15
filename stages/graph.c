/* graph.c — `molecules` in, `graphs` out: one radius (or bond) graph per
 * molecule with node and edge features and relative positions (chem/graph.h
 * has the blob layout); for a molecule of several conformers
 * (stages.ingest.conformers) one a conformer, in a set (common/confset.h).
 *
 * Plan: the molecule ids, ascending, in chunks of run.chunk_size within one
 * input file, which the runner makes from the stage's declaration of its
 * rows (struct stage_rows, pipeline/keyed.c); every shard sees the same ids,
 * so chunk c is the same molecules everywhere. Keyed: a graph records the
 * hash of the molecule it was built from (graphs.mol_hash), and a rerun
 * redoes only the chunks holding a molecule without a graph of its present
 * contents (a new file's, a changed record's); the runner's prune deletes
 * the graphs of molecules gone or changed. A molecule
 * whose graph cannot be built (no 3D coordinates, too many edges) becomes a
 * reject of this stage; the others go on.
 *
 * With stages.graph.store: false a row keeps the graph's size and an empty
 * blob, and the stages that read graphs rebuild each from its molecule with
 * the same settings (chem/graph_settings.h, graph_load): the same graph, bit for bit, without
 * its tens of kilobytes a molecule on disk.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chem/graph.h"
#include "chem/graph_settings.h"
#include "chem/mol.h"
#include "common/confset.h"
#include "stage.h"

/* Edges the max_neighbors cap dropped, and all edges before it: added to
 * by compute (in parallel, atomically) for the chunk in flight, then to the
 * run's totals when the chunk is done. */
struct gcount {
  int64_t dropped, edges;
};

struct gstage {
  struct graph_settings gs;
  struct gcount *chunk, run; /* chunk: written by compute through the const state */
  int threads, store;
  char *select;
  sqlite3_stmt *insert;
};

static int graph_begin(struct stage_ctx *ctx, int64_t *n_chunks, int64_t *n_items) {
  struct gstage *g = calloc(1, sizeof *g);
  if (!g) return stage_fail_at(ctx, NULL, "out of memory");
  ctx->state = g;
  g->chunk = calloc(1, sizeof *g->chunk);
  if (!g->chunk) return stage_fail_at(ctx, NULL, "out of memory");
  if (stage_graph_settings(ctx, &g->gs)) return STAGE_ERROR;
  const struct cfg_node *c = ctx->cfg;
  g->store = cfg_bool(c, "store");
  g->threads = (int)cfg_int(c, "threads");
  (void)n_chunks; /* (the runner plans the molecules: struct stage_rows) */
  (void)n_items;
  g->select = sqlite3_mprintf("SELECT id, mol, mol_hash FROM \"%w\".molecules m WHERE id BETWEEN ?1 AND ?2 AND NOT "
                              "EXISTS (SELECT 1 FROM \"%w\".duplicates d WHERE d.mol_id = m.id) ORDER BY id",
                              ctx->src, ctx->src);
  return g->select ? STAGE_OK : stage_fail_at(ctx, NULL, "out of memory");
}

/* Every conformer's graph of one molecule: one stored as graph_to_blob
 * writes it, several as a set (common/confset.h). The row's n_nodes and
 * n_edges are conformer 0's. */
static void graph_compute(const void *state, struct stage_item *it) {
  const struct gstage *g = state;
  struct mol m;
  char err[200];
  struct se3_error e;
  mol_init(&m);
  if (mol_from_blob(it->in, it->in_len, &m, &e)) {
    snprintf(it->reason, sizeof it->reason, "molecules row id=%lld: %s", (long long)it->id,
             se3_error_format(&e, err, sizeof err));
    return;
  }
  int nc = mol_n_conformers(&m);
  uint8_t *blobs[MOL_MAX_CONFORMERS];
  size_t lens[MOL_MAX_CONFORMERS];
  int made = 0;
  int64_t dropped = 0, all = 0;
  for (int c = 0; c < nc; c++) {
    struct graph gr;
    graph_init(&gr);
    if (graph_of_conformer(&g->gs, &m, c, &gr, &e)) {
      snprintf(it->reason, sizeof it->reason, "%s", se3_error_format(&e, err, sizeof err));
    } else if (g->store && graph_to_blob(&gr, &blobs[made], &lens[made])) {
      snprintf(it->reason, sizeof it->reason, "graph: out of memory");
    } else {
      made += g->store;
      if (c == 0) {
        it->count[0] = gr.n_nodes;
        it->count[1] = gr.n_edges;
      }
      dropped += gr.edges_dropped;
      all += gr.n_edges + gr.edges_dropped;
    }
    graph_free(&gr);
    if (it->reason[0]) break;
  }
  if (!it->reason[0] && g->store) {
    if (nc == 1) {
      it->out = blobs[0], it->out_len = lens[0];
      made = 0;
    } else if (confset_build(blobs, lens, nc, &it->out, &it->out_len)) {
      snprintf(it->reason, sizeof it->reason, "graph: out of memory");
    }
  }
  for (int i = 0; i < made; i++)
    free(blobs[i]);
  mol_free(&m);
  if (it->reason[0]) return;
#pragma omp atomic
  g->chunk->dropped += dropped;
#pragma omp atomic
  g->chunk->edges += all;
}

static int graph_store(struct stage_ctx *ctx, int64_t chunk, struct stage_item *it) {
  struct gstage *g = ctx->state;
  if (!g->insert && sqlite3_prepare_v2(ctx->db,
                                       "INSERT OR REPLACE INTO graphs(mol_id, n_nodes, n_edges, chunk, graph, "
                                       "mol_hash) VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
                                       -1, &g->insert, NULL) != SQLITE_OK)
    return stage_sql_fail(ctx, "preparing the graph insert");
  sqlite3_reset(g->insert);
  sqlite3_bind_int64(g->insert, 1, it->id);
  sqlite3_bind_int64(g->insert, 2, it->count[0]);
  sqlite3_bind_int64(g->insert, 3, it->count[1]);
  sqlite3_bind_int64(g->insert, 4, chunk);
  if (it->out)
    sqlite3_bind_blob64(g->insert, 5, it->out, it->out_len, SQLITE_STATIC);
  else
    sqlite3_bind_zeroblob(g->insert, 5, 0); /* store: false, rebuilt where it is read */
  if (it->has_hash)
    sqlite3_bind_int64(g->insert, 6, it->mol_hash);
  else
    sqlite3_bind_null(g->insert, 6);
  int rc = sqlite3_step(g->insert);
  sqlite3_clear_bindings(g->insert);
  return rc == SQLITE_DONE ? STAGE_OK : stage_sql_fail(ctx, "writing a graph");
}

static int graph_chunk(struct stage_ctx *ctx, int64_t chunk, int64_t *n_ok, int64_t *n_rej) {
  struct gstage *g = ctx->state;
  *g->chunk = (struct gcount){0, 0};
  int rc = stage_map_chunk(ctx, &ctx->plan, chunk, g->select, g->threads, graph_compute, g, graph_store, n_ok, n_rej);
  if (rc == STAGE_OK) {
    g->run.dropped += g->chunk->dropped;
    g->run.edges += g->chunk->edges;
  }
  return rc;
}

static void graph_end(struct stage_ctx *ctx) {
  struct gstage *g = ctx->state;
  if (!g) return;
  /* what the cap cost this run (a cap makes the graph jump at near-ties) */
  if (g->gs.go.max_neighbors > 0 && g->gs.go.edges != GRAPH_EDGES_BONDS && g->run.edges > 0)
    ctx->report->log(ctx, "max_neighbors=%d dropped %lld of %lld edges (%.2f %%)", g->gs.go.max_neighbors,
                     (long long)g->run.dropped, (long long)g->run.edges,
                     100.0 * (double)g->run.dropped / (double)g->run.edges);
  free(g->chunk);
  sqlite3_finalize(g->insert);
  sqlite3_free(g->select);
  free(g);
  ctx->state = NULL;
}

/* One graph a molecule, but a duplicate's; pruned when its molecule is
 * gone, changed or a duplicate now. */
static const struct stage_rows graph_rows = {
    .table = "graphs",
    .index = "graphs_hash",
    .upstream = "molecules",
    .up_index = "molecules_hash",
    .no_duplicates = 1,
};
static const struct stage_keyed graph_keyed = {.rows = &graph_rows};

const struct stage stage_graph = {
    .name = "graph",
    .tables = "graphs",
    .after = "ingest",
    .reads = {.skipped = stage_dock_only},
    .flags = STAGE_SPREAD | STAGE_ARRAY,
    .begin = graph_begin,
    .run_chunk = graph_chunk,
    .end = graph_end,
    .keyed = &graph_keyed,
    .show = {.blob_column = "graph"},
};
