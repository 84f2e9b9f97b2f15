/* workers.c — the worker pool's side of a chunk: the records that reading
 * left to parse go to Open Babel in forked worker processes
 * (chem/workers.c), which start with the first record to parse and stay
 * for the chunks after; their results come back in the records' places.
 * And the pool's size, for the stage's last line. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>

static void advance_cb(void *arg, int64_t n) {
  struct stage_ctx *ctx = arg;
  ctx->report->advance(ctx, n);
}

/* A chunk's third step: the records neither rejected while read nor kept
 * (a part relabelled) are parsed and checked in the workers; those others
 * count as finished at once. STAGE_OK; STAGE_STOPPED when *ctx->stop was
 * seen; STAGE_ERROR with ctx->err. */
int ingest_parse(struct stage_ctx *ctx, struct ingest *g, struct item *items, struct wjob *jobs, int n) {
  int n_todo = 0;
  struct wjob *packed = calloc((size_t)n + 1, sizeof *packed);
  int *where = calloc((size_t)n + 1, sizeof *where);
  if (!packed || !where) {
    free(packed);
    free(where);
    se3_error_set(&ctx->err, SE3_ERR_MEMORY, "out of memory for a chunk of %d records", n);
    return STAGE_ERROR;
  }
  for (int i = 0; i < n; i++) {
    if (items[i].direct || items[i].kept) continue;
    where[n_todo] = i;
    packed[n_todo] = jobs[i];
    n_todo++;
  }
  if (n - n_todo > 0) ctx->report->advance(ctx, n - n_todo);
  /* (the workers start with the first record to parse: a run that reads
   * labels alone starts none) */
  if (n_todo > 0 && !g->pool && !(g->pool = wpool_start(g->workers, &g->po, &g->co, g->input_shape, &ctx->err))) {
    free(packed);
    free(where);
    return STAGE_ERROR;
  }
  int rc = n_todo > 0 ? wpool_run(g->pool, packed, n_todo, g->timeout_s, ctx->stop, advance_cb, ctx, &ctx->err) : 0;
  for (int k = 0; k < n_todo; k++)
    jobs[where[k]] = packed[k];
  free(packed);
  free(where);
  if (rc == 1) return STAGE_STOPPED;
  if (rc < 0) return STAGE_ERROR;
  return STAGE_OK;
}

/* "; N parser processes" for the log line of ingest's end */
const char *ingest_workers_said(const struct ingest *g) {
  static char said[64];
  snprintf(said, sizeof said, "; %d parser process%s", g->workers, g->workers == 1 ? "" : "es");
  return said;
}
