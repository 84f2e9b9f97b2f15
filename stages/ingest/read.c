/* read.c — one input file, as planning reads it: refused unless a regular
 * file that this run does not itself write; its format, the one named by
 * `format:`, else its extension's, unless its first bytes clearly show
 * another; its records scanned (a file that gives none becomes one reject);
 * its mol_key and label_key; and each part's key, from one more pass of the
 * reader. No Open Babel here: parsing is the chunks' work. */
#include "internal.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chem/shape.h"
#include "common/workdir.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A string into a hash, with a terminator (so "ab","c" and "a","bc" differ). */
uint64_t ingest_hash_word(uint64_t h, const char *s) {
  h = se3_hash_str(h, s ? s : "");
  return se3_hash_bytes(h, "", 1);
}

/* What an input's molecules depend on (its contents, its format and
 * columns) and what its labels do (the labels: setting, the labels_csv
 * and that file's contents), each a 64-bit hash, as text. Labels that are
 * SD tags are read with the molecule: they count in both. Not its time (a
 * touched or copied file is the same input). 0, or STAGE_ERROR. */
static int input_keys(struct stage_ctx *ctx, struct input *p, const struct cfg_node *item) {
  uint64_t content = 0;
  char err[PATH_MAX + 128];
  p->content_ok = stage_file_hash(p->path, &content) == 0;
  if (!p->content_ok && !p->file_error) {
    snprintf(err, sizeof err, "%s: cannot read it to fingerprint it: %s", p->path, strerror(errno));
    return stage_fail_at(ctx, cfg_get(item, "path"), "%s", err);
  }
  p->content = content;
  uint64_t mk = ingest_hash_word(SE3_HASH_INIT, "molecules");
  mk = se3_hash_bytes(mk, &content, sizeof content);
  mk = ingest_hash_word(mk, p->file_error);
  mk = ingest_hash_word(mk, rec_format_name(p->fmt));
  mk = ingest_hash_word(mk, p->ropt.smiles_column);
  mk = ingest_hash_word(mk, p->ropt.name_column);
  /* shapes made by another 3D generator are made again (where any are made) */
  const struct ingest *g = ctx->state;
  const char *generator = g && g->po.gen3d != OB_GEN3D_NEVER ? "gen3d " OB_GEN3D_VERSION : NULL;
  if (generator) mk = ingest_hash_word(mk, generator);
  /* where files' coordinates are kept, they are held to the shape bounds
   * (chem/workers.h): what becomes of those out of bounds changes what a
   * part yields (stages.ingest.input_shape, out of the stage's hash) */
  char held[96] = "";
  if (g && g->po.gen3d != OB_GEN3D_ALWAYS)
    snprintf(held, sizeof held, "input shapes %s %.2f %.2f",
             g->input_shape == WPOOL_INPUT_SHAPE_REGENERATE ? "regenerated" : "refused", SHAPE_TOL_INPUT,
             SHAPE_PLANAR_TOL_INPUT);
  if (held[0]) mk = ingest_hash_word(mk, held);
  uint64_t lk = ingest_hash_word(SE3_HASH_INIT, "labels");
  lk = cfg_hash(lk, p->labels);
  if (p->side) {
    const struct cfg_node *side = cfg_get(item, "labels_csv");
    uint64_t sc = p->side->content; /* (of the bytes its rows were read from: ingest_side_load) */
    lk = cfg_hash(lk, side);
    lk = se3_hash_bytes(lk, &sc, sizeof sc);
    p->side_content = sc;
  }
  p->labels_from_mol = p->labels && p->labels->kind == CFG_LIST && p->fmt != MOL_FMT_CSV && p->fmt != MOL_FMT_TSV;
  if (p->labels_from_mol) mk = se3_hash_bytes(mk, &lk, sizeof lk);
  uint64_t how = ingest_hash_word(SE3_HASH_INIT, "read");
  how = ingest_hash_word(how, p->file_error);
  how = ingest_hash_word(how, rec_format_name(p->fmt));
  how = ingest_hash_word(how, p->ropt.smiles_column);
  how = ingest_hash_word(how, p->ropt.name_column);
  if (generator) how = ingest_hash_word(how, generator);
  if (held[0]) how = ingest_hash_word(how, held);
  if (p->labels_from_mol) how = se3_hash_bytes(how, &lk, sizeof lk);
  p->how = how;
  snprintf(p->mol_key, sizeof p->mol_key, "%016" PRIx64, mk);
  snprintf(p->label_key, sizeof p->label_key, "%016" PRIx64, lk);
  ctx->inputs_hash = se3_hash_bytes(ctx->inputs_hash, &mk, sizeof mk);
  ctx->inputs_hash = se3_hash_bytes(ctx->inputs_hash, &lk, sizeof lk);
  return STAGE_OK;
}

/* "SDF", "MOL2", ... for messages. */
static const char *fmt_upper(enum mol_format f) {
  static char buf[4][16];
  static int k;
  char *b = buf[k++ & 3];
  snprintf(b, sizeof buf[0], "%s", rec_format_name(f));
  for (char *c = b; *c; c++)
    *c = (char)(*c >= 'a' && *c <= 'z' ? *c - 'a' + 'A' : *c);
  return b;
}

/* Planning a huge file takes a while: a line every run.progress_interval_s,
 * and a stop before record numbers would run past ID_STRIDE. */
struct plan_progress {
  struct stage_ctx *ctx;
  const char *path;
  double t0, last, interval;
  int show, logged;
};

static int plan_progress(void *arg, const struct rec_stats *st, struct se3_error *err) {
  struct plan_progress *pp = arg;
  if (st->last_no >= ID_STRIDE) {
    se3_error_set(err, SE3_ERR_LIMIT, "more than %lld records; split the file", ID_STRIDE - 1);
    se3_error_at(err, pp->path, 0, 0);
    return 1;
  }
  double now = now_s();
  if (pp->show && now - pp->last >= pp->interval) {
    pp->last = now;
    pp->logged = 1;
    pp->ctx->report->log(pp->ctx, "planning: %s: %lld lines read, %lld records so far (%lld empty), %.0f s", pp->path,
                         (long long)st->lines, (long long)st->last_no, (long long)st->n_empty, now - pp->t0);
  }
  return 0;
}

int ingest_add_input(struct stage_ctx *ctx, struct ingest *g, const char *set, const char *path,
                     const struct cfg_node *item) {
  struct input in;
  memset(&in, 0, sizeof in);
  in.set = strdup(set);
  in.path = strdup(path);
  size_t wl = strlen(ctx->workflow_dir);
  if (!strncmp(path, ctx->workflow_dir, wl) && path[wl] == '/')
    in.stored = strdup(path + wl + 1);
  else
    in.stored = strdup(path);
  const char *fmt = cfg_str(item, "format");
  int explicit_fmt = strcmp(fmt, "auto") != 0;
  in.fmt = explicit_fmt ? rec_format_from_name(fmt) : rec_format_from_path(path);
  struct input *grown = in.set && in.path && in.stored ? realloc(g->in, sizeof *g->in * (size_t)(g->n_in + 1)) : NULL;
  if (!grown) {
    free(in.set);
    free(in.path);
    free(in.stored);
    return stage_fail_at(ctx, cfg_get(item, "path"), "out of memory planning %s", path);
  }
  g->in = grown;
  g->in[g->n_in++] = in;
  struct input *p = &g->in[g->n_in - 1];
  char err[512];
  struct se3_error e2;
  /* A FIFO or a device could block or never end: refused before any open. */
  if (rec_check_regular(path, &e2) != 0) return stage_fail_at(ctx, cfg_get(item, "path"), "%s", se3_error_str(&e2).s);
  if (stat(path, &p->file_st) != 0) return stage_fail_at(ctx, cfg_get(item, "path"), "%s: %s", path, strerror(errno));
  /* nor a file this run replaces (a previous screen's hits.sdf as a library) */
  if (workdir_check_input(ctx->workdir, path, &ctx->err) != 0) return stage_error_at(ctx, cfg_get(item, "path"), NULL);
  /* What the contents look like. A read error here is left to the scan
   * below, which turns it into a reject row. */
  enum mol_format seen = MOL_FMT_UNKNOWN;
  int nonblank = 1;
  if (rec_sniff_file(path, p->fmt, &seen, &nonblank, NULL) != 0) {
    seen = MOL_FMT_UNKNOWN;
    nonblank = 1;
  }
  if (!explicit_fmt && seen != MOL_FMT_UNKNOWN && seen != p->fmt) {
    if (p->fmt == MOL_FMT_UNKNOWN)
      ctx->report->log(ctx, "%s: no format in its name; contents look like %s; reading as %s", path, fmt_upper(seen),
                       fmt_upper(seen));
    else
      ctx->report->log(ctx, "%s: contents look like %s, not %s (extension); reading as %s", path, fmt_upper(seen),
                       fmt_upper(p->fmt), fmt_upper(seen));
    p->fmt = seen;
  }
  if (p->fmt == MOL_FMT_UNKNOWN)
    return stage_fail_at(ctx, cfg_get(item, "path"),
                         "%s: cannot tell the format from the name or the contents; set `format:`", path);
  p->ropt.smiles_column = cfg_str_opt(item, "smiles_column");
  p->ropt.name_column = cfg_str_opt(item, "name_column");
  p->labels = cfg_get(item, "labels");
  const struct cfg_node *side = cfg_get(item, "labels_csv");
  if (side && side->kind == CFG_MAP && ingest_side_load(ctx, side, &p->side)) return STAGE_ERROR;
  p->ropt.max_record_bytes = g->max_record_bytes;
  struct plan_progress pp = {.ctx = ctx, .path = path, .t0 = now_s()};
  pp.last = pp.t0;
  pp.interval = cfg_float(ctx->root, "run.progress_interval_s");
  pp.show = strcmp(cfg_str(ctx->root, "run.progress"), "none") != 0;
  p->ropt.progress = plan_progress;
  p->ropt.progress_arg = &pp;
  int rc = rec_scan(path, p->fmt, &p->ropt, &p->st, &e2);
  if (rc != 0) se3_error_format(&e2, err, sizeof err);
  p->ropt.progress = NULL; /* pp lives on this stack */
  p->ropt.progress_arg = NULL;
  if (rc == 0 && p->st.last_no >= ID_STRIDE) {
    snprintf(err, sizeof err, "%s: more than %lld records; split the file", path, ID_STRIDE - 1);
    rc = -1;
  }
  if (rc != 0) {
    /* A file we cannot read as its format is bad input, not a failed run:
     * it becomes one reject row (record 0) and the other files go on. */
    p->file_error = strdup(err);
    p->n_records = 1;
  } else {
    p->n_records = p->st.n_out + (p->st.n_unlisted > 0);
    if (p->st.n_unlisted > 0)
      ctx->report->log(ctx,
                       "%s: %lld empty records; the first %lld have a reject row each, one more row counts the "
                       "other %lld",
                       path, (long long)p->st.n_empty, (long long)(p->st.n_empty - p->st.n_unlisted),
                       (long long)p->st.n_unlisted);
    if (p->n_records == 0 && nonblank) {
      /* Something is there, but not one record of the format tried. */
      char what[256];
      if (seen != MOL_FMT_UNKNOWN && seen != p->fmt)
        snprintf(what, sizeof what, "; its contents look like %s", fmt_upper(seen));
      else
        snprintf(what, sizeof what, "; its contents do not look like any format se3screen reads");
      snprintf(err, sizeof err, "%s: no %s record found (format %s)%s", path, fmt_upper(p->fmt),
               explicit_fmt ? "named by `format:`" : "from the extension", what);
      p->file_error = strdup(err);
      p->n_records = 1;
    } else if (p->n_records == 0) {
      ctx->report->log(ctx, "%s: empty file, nothing to read", path);
    }
  }
  if (pp.logged)
    ctx->report->log(ctx, "planning: %s: %lld records in %.1f s", path, (long long)p->n_records, now_s() - pp.t0);
  p->first = g->total;
  g->total += p->n_records;
  p->position = g->n_in - 1;
  /* Every file this input reads enters its keys by its contents: the
   * molecule file, and the labels_csv beside it (an edited label must redo
   * the labels and all that learned from them). A molecule file that
   * cannot be read is a reject row already (file_error). */
  return input_keys(ctx, p, item);
}

/* A record into its part's key, as the reader handed it out: its number,
 * text, name, error and fields. Planning (ingest_part_keys) and the chunk that
 * reads the part again (ingest_read_record) fold the same records alike, so that
 * a chunk can tell that it read what was planned (issue 51). */
uint64_t ingest_hash_record(uint64_t h, const struct rec *r) {
  h = se3_hash_bytes(h, &r->record_no, sizeof r->record_no);
  h = se3_hash_bytes(h, r->text ? r->text : "", r->text ? r->len : 0);
  h = ingest_hash_word(h, r->name);
  h = ingest_hash_word(h, r->error);
  for (int f = 0; f < r->n_fields; f++)
    h = ingest_hash_word(h, r->fields[f]);
  return h;
}

/* The item of an input without a record of its own (its empty records not
 * listed, or the error that kept it from being read) into its part's key. */
uint64_t ingest_hash_unlisted(uint64_t h, const struct input *in) {
  h = se3_hash_bytes(h, &in->st.n_unlisted, sizeof in->st.n_unlisted);
  return ingest_hash_word(h, in->file_error);
}

/* Each part's mol_key: how its file is read, and its records as the reader
 * hands them out (number, text, name and fields, error), in parts of
 * chunk_size; the last item of a file with empty records not listed one by
 * one (ingest_read_record) counts in its part too. One pass of the reader over
 * the file, without Open Babel. */
int ingest_part_keys(struct stage_ctx *ctx, struct ingest *g, struct input *in) {
  in->n_parts = (in->n_records + g->chunk_size - 1) / g->chunk_size;
  in->part_key = calloc((size_t)in->n_parts + 1, sizeof *in->part_key);
  if (!in->part_key) return stage_fail_at(ctx, NULL, "planning %s: out of memory", in->path);
  uint64_t h = se3_hash_bytes(SE3_HASH_INIT, &in->how, sizeof in->how);
  int64_t i = 0, k = 0;
  struct se3_error e2;
  struct rec_reader *rd = NULL;
  if (!in->file_error && in->n_records > 0) {
    rd = rec_open(in->path, in->fmt, &in->ropt, &e2);
    if (!rd) return stage_fail_at(ctx, NULL, "planning %s: %s", in->path, se3_error_str(&e2).s);
    struct rec r;
    int rc;
    while ((rc = rec_next(rd, &r, &e2)) > 0) {
      h = ingest_hash_record(h, &r);
      if (++i % g->chunk_size == 0 && k < in->n_parts) {
        snprintf(in->part_key[k++], 17, "%016" PRIx64, h);
        h = se3_hash_bytes(SE3_HASH_INIT, &in->how, sizeof in->how);
      }
    }
    rec_close(rd);
    if (rc < 0) return stage_fail_at(ctx, NULL, "planning %s: %s", in->path, se3_error_str(&e2).s);
  }
  if (in->st.n_unlisted > 0 || in->file_error) { /* the one item without a record of its own */
    h = ingest_hash_unlisted(h, in);
    i++;
  }
  if (i != in->n_records)
    return stage_fail_at(ctx, NULL, "planning %s: %lld records now, %lld when it was scanned (was the file changed?)",
                         in->path, (long long)i, (long long)in->n_records);
  if (k < in->n_parts) snprintf(in->part_key[k], 17, "%016" PRIx64, h);
  return STAGE_OK;
}
