/* ingest.c — the ingest stage: molecule files in, `molecules`, `labels`
 * and `rejects` out. Here: stage_ingest itself, begin's settings, the
 * steps of one chunk, finalize and end; the work is in the other files of
 * stages/ingest/ (internal.h lists them).
 *
 * Plan: every input of every set (globs expanded, in workflow order) is split
 * into records by chem/records.c, and each input's records into parts of
 * run.chunk_size: a chunk is one part of one file. A chunk's records are
 * parsed by Open Babel in worker processes (chem/workers.c), checked,
 * labelled and written.
 *
 * Keyed by file (issue 35). A molecule's id is its input's key * 1e9 + its
 * record number; the key comes from the input's set and path (ingest_files
 * keeps it while the file stays), so every shard and every rerun gives the
 * same ids, and adding, removing or reordering files moves no other file's.
 * Each part has a mol_key (its records' contents and how they are read),
 * each input a label_key (what its labels come from); ingest_parts lists
 * the parts read under them. A rerun reads a part again when its mol_key
 * changed (prune first deletes what its old records gave: an edited record
 * costs its part, not its file), reads only the labels of its records when
 * its file's label_key alone changed (the molecules stay; no Open Babel),
 * and skips it otherwise; a file gone takes its rows. A chunk reads its
 * part's records again (by the file's path) and checks them against the
 * part's planned mol_key, and a labels_csv's rows and its hash come from one
 * copy of its bytes: a file changed under a run is an error naming it,
 * never other records stored under the planned keys (issue 51). Dedupe
 * runs in finalize, once all chunks are in one database, so a sharded run
 * equals an unsharded one; it deletes nothing (`duplicates`).
 *
 * Nothing is lost quietly. Inputs must be regular files. Planning sniffs each
 * file's first bytes: when they clearly show another format than the
 * extension (an SDF named .mol2), the file is read in that format and the run
 * says so; a `format:` named in the workflow always wins. A non-empty file in
 * which the reader finds no record becomes one reject row (record 0) naming
 * the format tried. Empty records (a file of "$$$$" lines) get a reject row
 * each for the first 10 of a file and one row counting the rest, so hostile
 * input costs a scan, not a row per line. Finalize then fails the run when a
 * non-empty input gave no molecule at all (only rejects): every such file is
 * named in the error.
 *
 * Names. A molecule's name is its CSV/TSV name column (chem/records.h,
 * rec_pick_columns), else the title Open Babel read (SD, MOL2, the rest of a
 * SMILES line), else STEM:RECORD made from the file name and the record
 * number, so that every hit can be told apart and found again. A labels_csv
 * joins by the record's own name only, never by a made-up one.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Everything begin and the chunks allocated, the reader and the workers. */
static void ingest_free(struct ingest *g) {
  if (!g) return;
  for (int i = 0; i < g->n_in; i++) {
    free(g->in[i].set);
    free(g->in[i].path);
    free(g->in[i].stored);
    free(g->in[i].file_error);
    for (int c = 0; c < g->in[i].n_cols; c++)
      free(g->in[i].cols[c]);
    free(g->in[i].cols);
    free(g->in[i].part_key);
    ingest_side_free(g->in[i].side);
  }
  free(g->in);
  free(g->chunk_in);
  free(g->chunk_part);
  free(g->needed);
  free(g->relabel);
  if (g->rd) rec_close(g->rd);
  if (g->pool) wpool_stop(g->pool);
  free(g);
}

/* The stage's settings (stages.ingest), then the plan (plan.c). */
int ingest_begin(struct stage_ctx *ctx, int64_t *n_chunks, int64_t *n_items) {
  struct ingest *g = calloc(1, sizeof *g);
  ctx->state = g;
  ctx->inputs_hash = SE3_HASH_INIT;
  const struct cfg_node *c = ctx->cfg;
  g->chunk_size = cfg_int(ctx->root, "run.chunk_size");
  g->rd_in = -1;

  /* whose shapes (issue 54): coordinates: generated gives every record a
   * generated one; input keeps a file's, and gen3d says what records
   * without them get (the configuration settled the two: config.c) */
  const char *gen3d = cfg_str(c, "gen3d"), *coords = cfg_str(c, "coordinates");
  if (!strcmp(coords, "generated"))
    g->po.gen3d = OB_GEN3D_ALWAYS;
  else
    g->po.gen3d = !strcmp(gen3d, "never") ? OB_GEN3D_NEVER : OB_GEN3D_AUTO;
  if (!strcmp(gen3d, "always"))
    ctx->report->log(ctx, "note: stages.ingest.gen3d: always is the older spelling of stages.ingest.coordinates: "
                          "generated (the default now): write that, or leave both out");
  /* a file's own shape out of bounds (chem/shape.h): refused, or generated
   * instead (chem/workers.h) */
  g->input_shape =
      !strcmp(cfg_str(c, "input_shape"), "regenerate") ? WPOOL_INPUT_SHAPE_REGENERATE : WPOOL_INPUT_SHAPE_REJECT;
  const char *q = cfg_str(c, "gen3d_quality");
  g->po.quality = !strcmp(q, "fast") ? OB_Q_FAST : !strcmp(q, "best") ? OB_Q_BEST : OB_Q_MEDIUM;
  g->po.seed = (unsigned)cfg_int(c, "seed");
  g->po.conformers = (int)cfg_int(c, "conformers");
  g->po.add_hydrogens = cfg_bool(c, "add_hydrogens");
  const char *frag = cfg_str(c, "fragments");
  g->po.fragments = !strcmp(frag, "reject") ? OB_FRAG_REJECT : !strcmp(frag, "keep") ? OB_FRAG_KEEP : OB_FRAG_LARGEST;
  const struct cfg_node *prot = cfg_get(c, "protonate");
  if (prot && prot->type == CFG_T_FLOAT) {
    g->po.protonate = OB_PROT_PH;
    g->po.ph = prot->f;
  } else {
    const char *pv = cfg_str(c, "protonate");
    g->po.protonate = !strcmp(pv, "neutral") ? OB_PROT_NEUTRAL : OB_PROT_KEEP;
  }
  g->po.standardize = !strcmp(cfg_str(c, "standardize"), "none") ? OB_STD_NONE : OB_STD_BASIC;
  g->po.allow_radicals = cfg_bool(c, "allow_radicals");
  g->po.max_atoms = (int)cfg_int(c, "max_atoms");
  g->po.max_atom_conformers = (long)cfg_int(c, "max_atom_conformers");
  g->max_record_bytes = (size_t)cfg_int(c, "max_record_bytes");
  g->po.max_record_bytes = g->max_record_bytes;
  g->co.max_atoms = g->po.max_atoms;
  g->co.min_heavy_atoms = (int)cfg_int(c, "min_heavy_atoms");
  g->co.reject_lone_hydrogen = 1;
  g->co.min_distance = cfg_float(c, "min_distance");
  g->co.max_fragment_gap = cfg_float(c, "max_fragment_gap");
  const struct cfg_node *el = cfg_get(c, "elements");
  if (el && el->kind == CFG_LIST) {
    for (int i = 0; i < el->n_kids && i < 128; i++) {
      int z = mol_element_z(el->kids[i]->value);
      if (z <= 0)
        return stage_fail_at(ctx, el->kids[i], "stages.ingest.elements: '%s' is not an element", el->kids[i]->value);
      g->elements[g->co.n_elements++] = (uint8_t)z;
    }
    g->co.elements = g->elements;
  }
  g->workers = (int)cfg_int(c, "workers");
  if (g->workers <= 0) g->workers = stage_cores(); /* (an array task's allocation under Slurm) */
  g->timeout_s = cfg_float(c, "timeout_s");

  if (ingest_plan_inputs(ctx, g)) return STAGE_ERROR;
  *n_items = g->total;
  *n_chunks = g->n_chunks;
  return STAGE_OK;
}

/* One chunk, one part of one file, in four steps: its records read again
 * and held to the part's planned key (records.c); where the part's labels
 * alone changed, what is kept of each record (labels.c); the others parsed
 * in the worker processes (workers.c); its rows written (store.c). */
int ingest_chunk(struct stage_ctx *ctx, int64_t chunk, int64_t *n_ok, int64_t *n_rej) {
  struct ingest *g = ctx->state;
  if (chunk < 0 || chunk >= g->n_chunks) return STAGE_OK;
  const struct input *cin = &g->in[g->chunk_in[chunk]];
  int64_t part = g->chunk_part[chunk];
  int64_t g0 = cin->first + part * g->chunk_size, g1 = g0 + g->chunk_size;
  if (g1 > cin->first + cin->n_records) g1 = cin->first + cin->n_records;
  int n = (int)(g1 - g0);
  struct item *items = calloc((size_t)n + 1, sizeof *items);
  struct wjob *jobs = calloc((size_t)n + 1, sizeof *jobs);
  if (!items || !jobs) {
    free(items);
    free(jobs);
    se3_error_set(&ctx->err, SE3_ERR_MEMORY, "out of memory for a chunk of %d records", n);
    return STAGE_ERROR;
  }
  int ret = ingest_read_part(ctx, g, cin, part, g0, items, jobs, n);
  if (ret == STAGE_OK && g->relabel[chunk]) ret = ingest_relabel_look(ctx, cin, items, n);
  if (ret == STAGE_OK) ret = ingest_parse(ctx, g, items, jobs, n);
  if (ret == STAGE_OK) ret = ingest_store(ctx, g, chunk, items, jobs, n, n_ok, n_rej);
  for (int i = 0; i < n; i++) {
    ingest_item_free(&items[i], &jobs[i]);
  }
  free(items);
  free(jobs);
  return ret;
}

/* Once every chunk is in one database: every non-empty input gave a
 * molecule, then set-wide dedupe (dedupe.c). */
int ingest_finalize(struct stage_ctx *ctx) {
  if (ingest_check_yield(ctx) != STAGE_OK) return STAGE_ERROR;
  return ingest_dedupe(ctx);
}

void ingest_end(struct stage_ctx *ctx) {
  struct ingest *g = ctx->state;
  /* what the chunks of this run read: molecules parsed (and generated in
   * 3D; what the bounds of chem/shape.h made of their shapes), or only
   * their labels */
  if (g && (g->n_parsed || g->n_relabelled || g->n_shape_refused))
    ctx->report->log(ctx,
                     "%lld molecule%s parsed (%lld with 3D coordinates generated), %lld with only "
                     "their labels read again; 3D shapes: %lld fixed after the bounds check, %lld refused, %lld "
                     "input shape%s regenerated%s",
                     (long long)g->n_parsed, g->n_parsed == 1 ? "" : "s", (long long)g->n_gen3d,
                     (long long)g->n_relabelled, (long long)g->n_shape_fixed, (long long)g->n_shape_refused,
                     (long long)g->n_shape_regenerated, g->n_shape_regenerated == 1 ? "" : "s",
                     g->pool ? ingest_workers_said(g) : "");
  /* stereo the inputs left free, which the generated shapes fixed: said,
   * not chosen silently (issue 70) */
  if (g && g->n_stereo_free)
    ctx->report->log(ctx,
                     "%lld molecule%s had unspecified stereo (%lld centre%s/bond%s); each is scored and docked as "
                     "the isomer its 3D shape has (molecules.isomer_smiles, hits' isomer_smiles)",
                     (long long)g->n_stereo_free, g->n_stereo_free == 1 ? "" : "s", (long long)g->n_stereo_units,
                     g->n_stereo_units == 1 ? "" : "s", g->n_stereo_units == 1 ? "" : "s");
  ingest_free(g);
  ctx->state = NULL;
}

static const struct stage_keyed ingest_keyed = {.prune = ingest_prune}; /* by input file: ingest_files, ingest_parts */

const struct stage stage_ingest = {
    .name = "ingest",
    .tables = "duplicates labels ingest_parts ingest_plan ingest_files molecules", /* (status counts the last) */
    .flags = STAGE_USES_SETS | STAGE_CONTENT_PER_ROW | STAGE_ARRAY, /* content: molecules.mol_hash */
    .begin = ingest_begin,
    .run_chunk = ingest_chunk,
    .finalize = ingest_finalize,
    .end = ingest_end,
    .keyed = &ingest_keyed,
    .merge = {.hash = ingest_merge_hash, .fold = ingest_fold},
    .show = {.blob_column = "mol"},
    .explain = ingest_explain,
    .upgrade = ingest_upgrade,
};
