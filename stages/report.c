/* report.c — the report stage: WORKDIR/report.html at the end of any run,
 * in one chunk, written by report_page.c (the page, which `se3screen report`
 * also writes from a database alone). */
#define _GNU_SOURCE
#include <limits.h>
#include <stdio.h>

#include "report_page.h"
#include "stage.h"

static int report_begin(struct stage_ctx *ctx, int64_t *n_chunks, int64_t *n_items) {
  ctx->outputs_gone = stage_workdir_file_gone(ctx, "report.html") ? "report.html" : NULL;
  *n_chunks = 1;
  *n_items = 1;
  return STAGE_OK;
}

static int report_chunk(struct stage_ctx *ctx, int64_t chunk, int64_t *n_ok, int64_t *n_rej) {
  (void)chunk;
  struct report_opts o = {
      .top = (int)cfg_int(ctx->cfg, "top"),
      .depict = cfg_bool(ctx->cfg, "depict"),
      .bins = (int)cfg_int(ctx->cfg, "bins"),
      .ledger = ctx->ledger,
  };
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/report.html", ctx->workdir);
  if (report_write(ctx->db, "screen.db", &o, path, &ctx->err)) return STAGE_ERROR;
  *n_ok = 1;
  *n_rej = 0;
  ctx->report->advance(ctx, 1);
  ctx->report->log(ctx, "%s", path);
  return STAGE_OK;
}

const struct stage stage_report = {
    .name = "report",
    .tables = "",
    .after = "rank",
    .flags = STAGE_OPTIONAL | STAGE_READS_ANY, /* any workflow may end with it */
    .begin = report_begin,
    .run_chunk = report_chunk,
    .show = {.unit = "page", .done = "written"},
};
