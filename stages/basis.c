/* basis.c — `graphs` in, `bases` out (a set of one a conformer for a
 * molecule of several, common/confset.h): every edge's equivariant basis for the
 * degree pairs up to max_degree, in the graph's edge order, stored as fp32,
 * fp16 or bf16 (models/basis.h has the blob layout).
 *
 * Plan: the ids of `graphs`, ascending, in chunks as in the graph stage; a
 * basis records the hash its graph's molecule had (bases.mol_hash), and a
 * rerun redoes only the chunks holding a graph without a basis of its
 * present contents; prune deletes the bases of graphs gone or changed.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chem/graph.h"
#include "models/basis.h"
#include "common/confset.h"
#include "stage.h"

struct bstage {
  struct basis_plan bp;
  struct graph_settings gs; /* to rebuild graphs not stored */
  enum basis_dtype dtype;
  const char *dtype_name;
  int threads;
  int64_t max_blob; /* SQLite's largest value, in bytes */
  char *select;
  sqlite3_stmt *insert;
};

static int basis_begin(struct stage_ctx *ctx, int64_t *n_chunks, int64_t *n_items) {
  struct bstage *b = calloc(1, sizeof *b);
  if (!b) return stage_fail_at(ctx, NULL, "out of memory");
  ctx->state = b;
  int max_degree = (int)cfg_int(ctx->cfg, "max_degree");
  b->dtype_name = cfg_str(ctx->cfg, "dtype");
  b->dtype = !strcmp(b->dtype_name, "fp16") ? BASIS_FP16 : !strcmp(b->dtype_name, "bf16") ? BASIS_BF16 : BASIS_FP32;
  b->threads = (int)cfg_int(ctx->cfg, "threads");
  if (basis_plan_init(&b->bp, max_degree))
    return stage_fail_at(ctx, cfg_get(ctx->cfg, "max_degree"), "stages.basis.max_degree: %d is not in 0..%d",
                         max_degree, BASIS_MAX_DEGREE);
  b->max_blob = sqlite3_limit(ctx->db, SQLITE_LIMIT_LENGTH, -1);
  (void)n_chunks; /* (the runner plans the molecules: struct stage_rows) */
  (void)n_items;
  if (stage_graph_settings(ctx, &b->gs)) return STAGE_ERROR;
  b->select = sqlite3_mprintf("SELECT g.mol_id, " STAGE_GRAPH_COLUMN ", g.mol_hash FROM \"%w\".graphs g JOIN \"%w\".molecules m "
                              "ON m.id = g.mol_id WHERE g.mol_id BETWEEN ?1 AND ?2 ORDER BY g.mol_id",
                              ctx->src, ctx->src);
  return b->select ? STAGE_OK : stage_fail_at(ctx, NULL, "out of memory");
}

/* Every conformer's bases of one molecule: one stored as basis_to_blob
 * writes it, several as a set (common/confset.h). The row's n_edges is
 * conformer 0's. */
static void basis_compute(const void *state, struct stage_item *it) {
  const struct bstage *b = state;
  int nc = graph_row_conformers(it->in, it->in_len), made = 0;
  uint8_t *blobs[CONFSET_MAX];
  size_t lens[CONFSET_MAX];
  double bytes = 0;
  for (int c = 0; c < nc && !it->reason[0]; c++) {
    struct graph g;
    char err[200];
    struct se3_error e;
    graph_init(&g);
    if (graph_load_conf(&b->gs, it->in, it->in_len, c, &g, &e)) {
      snprintf(it->reason, sizeof it->reason, "graphs row mol_id=%lld: %s", (long long)it->id,
               se3_error_format(&e, err, sizeof err));
      graph_free(&g);
      break;
    }
    bytes += BASIS_BLOB_HEADER + BASIS_BLOB_CRC +
             (double)g.n_edges * (double)b->bp.per_edge * (double)basis_dtype_size(b->dtype);
    if (bytes > (double)b->max_blob)
      snprintf(it->reason, sizeof it->reason,
               "the bases of its %d edges%s would take %.0f MB, more than SQLite stores in one value (%.0f MB): "
               "lower stages.graph.cutoff or max_neighbors, or use a 16-bit dtype",
               g.n_edges, nc > 1 ? " (and its other conformers')" : "", bytes / 1e6, (double)b->max_blob / 1e6);
    else if (basis_to_blob(&b->bp, b->dtype, g.rel_pos, (uint32_t)g.n_edges, &blobs[made], &lens[made]))
      snprintf(it->reason, sizeof it->reason, "basis: out of memory for %d edges", g.n_edges);
    else if (++made == 1)
      it->count[0] = g.n_edges;
    graph_free(&g);
  }
  if (!it->reason[0] && nc == 1) {
    it->out = blobs[0], it->out_len = lens[0];
    made = 0;
  } else if (!it->reason[0] && confset_build(blobs, lens, nc, &it->out, &it->out_len)) {
    snprintf(it->reason, sizeof it->reason, "basis: out of memory");
  }
  for (int i = 0; i < made; i++)
    free(blobs[i]);
}

static int basis_store(struct stage_ctx *ctx, int64_t chunk, struct stage_item *it) {
  struct bstage *b = ctx->state;
  if (!b->insert && sqlite3_prepare_v2(ctx->db,
                                       "INSERT OR REPLACE INTO bases(mol_id, n_edges, max_degree, dtype, chunk, basis, "
                                       "mol_hash) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                                       -1, &b->insert, NULL) != SQLITE_OK)
    return stage_sql_fail(ctx, "preparing the basis insert");
  sqlite3_reset(b->insert);
  sqlite3_bind_int64(b->insert, 1, it->id);
  sqlite3_bind_int64(b->insert, 2, it->count[0]);
  sqlite3_bind_int(b->insert, 3, b->bp.max_degree);
  sqlite3_bind_text(b->insert, 4, b->dtype_name, -1, SQLITE_STATIC);
  sqlite3_bind_int64(b->insert, 5, chunk);
  sqlite3_bind_blob64(b->insert, 6, it->out, it->out_len, SQLITE_STATIC);
  if (it->has_hash)
    sqlite3_bind_int64(b->insert, 7, it->mol_hash);
  else
    sqlite3_bind_null(b->insert, 7);
  int rc = sqlite3_step(b->insert);
  sqlite3_clear_bindings(b->insert);
  return rc == SQLITE_DONE ? STAGE_OK : stage_sql_fail(ctx, "writing a basis");
}

static int basis_chunk(struct stage_ctx *ctx, int64_t chunk, int64_t *n_ok, int64_t *n_rej) {
  struct bstage *b = ctx->state;
  return stage_map_chunk(ctx, &ctx->plan, chunk, b->select, b->threads, basis_compute, b, basis_store, n_ok, n_rej);
}

static void basis_end(struct stage_ctx *ctx) {
  struct bstage *b = ctx->state;
  if (!b) return;
  sqlite3_finalize(b->insert);
  sqlite3_free(b->select);
  basis_plan_free(&b->bp);
  free(b);
  ctx->state = NULL;
}

/* One basis a graph; pruned when its graph is gone or changed. */
static const struct stage_rows basis_rows = {
    .table = "bases",
    .index = "bases_hash",
    .upstream = "graphs",
    .up_index = "graphs_hash",
};
static const struct stage_keyed basis_keyed = {.rows = &basis_rows};

const struct stage stage_basis = {
    .name = "basis",
    .tables = "bases",
    .after = "graph",
    /* optional: train and score recompute bases from the graphs; stored ones are not read */
    .flags = STAGE_OPTIONAL | STAGE_SPREAD | STAGE_ARRAY,
    .begin = basis_begin,
    .run_chunk = basis_chunk,
    .end = basis_end,
    .keyed = &basis_keyed,
    .show = {.blob_column = "basis"},
};
