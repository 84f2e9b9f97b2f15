/* ingest.c — molecule files in, `molecules`, `labels` and `rejects` out.
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
#define _GNU_SOURCE
#include "stage.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <glob.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "chem/mol.h"
#include "chem/obbridge.h"
#include "chem/records.h"
#include "chem/workers.h"
#include "common/workdir.h"

#define ID_STRIDE STAGE_ID_STRIDE

struct side_csv {              /* labels_csv, loaded whole */
  int join_col;                /* -1: join by record order */
  int n_cols, n_rows;
  char **header;
  char ***rows;                /* rows[r][c] */
  int64_t *lines;              /* line of each row, for messages */
  char **row_error;            /* the reader's reason a row is bad (a NUL byte...), or NULL */
  char **keys;                 /* join values, sorted, for lookup ... */
  int *key_row;                /* ... and the row each belongs to */
  int *use;                    /* columns to read */
  int n_use;
  char *path;
  uint64_t content;            /* the hash of the bytes read (label_key), and ... */
  struct stat file_st;         /* ... the file as it was when they were read */
};

struct input {
  int64_t key;                 /* molecules.id / ID_STRIDE for its molecules: from its set and path */
  int position;                /* its place among the inputs (0 = first) */
  char mol_key[17];            /* its contents and how they are read: a part is read again when it changes */
  char label_key[17];          /* what its labels come from: only the labels are read again when it changes */
  int labels_from_mol;         /* its labels are SD tags, read with the molecule (so in mol_key too) */
  int64_t n_parts;             /* its chunks */
  char (*part_key)[17];        /* each part's mol_key: its records' contents and how they are read (a
                                  part is read again when its own changes, not when another part's does) */
  uint64_t how;                /* how its records are read (format, columns, a file error, SD-tag labels) */
  int n_changed;               /* parts whose mol_key changed (the plan's count) */
  int status, seen;            /* what the plan found of it (IN_*); seen: a part of it is stored */
  uint64_t content, side_content; /* its file's and its labels_csv's content hashes ... */
  int content_ok;              /* ... (0: the file could not be read) */
  char *set;
  char *path;                  /* absolute */
  char *stored;                /* as stored in source_file */
  enum mol_format fmt;
  struct rec_options ropt;
  int64_t n_records, first;    /* first: global index of its record 1 */
  const struct cfg_node *labels;
  struct side_csv *side;
  char *file_error;            /* the file cannot be split into records, or gave none: one reject, record 0 */
  struct rec_stats st;         /* what planning's scan found (empty records: the last item counts the unlisted) */
  char **cols;                 /* csv/tsv column names (copied from the reader) */
  int n_cols;
  struct stat file_st;         /* the file as planning began (inputs_unchanged) */
};

/* An input as the plan finds it, in the order that the worst part decides. */
enum { IN_SAME, IN_LABELS, IN_NEW, IN_CHANGED };

struct ingest {
  struct input *in;
  int n_in;
  int64_t total;
  int64_t chunk_size;
  struct ob_parse_opts po;
  struct mol_check_opts co;
  uint8_t elements[128];
  int workers;
  double timeout_s;
  size_t max_record_bytes;
  struct wpool *pool;
  int64_t n_chunks;            /* chunk c is part chunk_part[c] of input chunk_in[c] */
  int *chunk_in;
  int64_t *chunk_part;
  uint8_t *needed;             /* per chunk: 1 when it has work (ctx->chunk_needed) ... */
  uint8_t *relabel;            /* ... and 1 when that work is its labels alone */
  int64_t n_parsed, n_gen3d, n_relabelled; /* what this run did, for its last line */
  struct rec_reader *rd;       /* reader positioned in input rd_in ... */
  int rd_in;
  int64_t rd_next;             /* ... before record rd_next (1-based) */
};

/* ---- side CSV ------------------------------------------------------------- */

static int cmp_key(const void *a, const void *b, void *keys) {
  char **k = keys;
  return strcmp(k[*(const int *)a], k[*(const int *)b]);
}

static void side_free(struct side_csv *s) {
  if (!s) return;
  for (int r = 0; r < s->n_rows; r++) {
    for (int c = 0; c < s->n_cols; c++) free(s->rows[r][c]);
    free(s->rows[r]);
    if (s->row_error) free(s->row_error[r]);
  }
  free(s->lines);
  free(s->row_error);
  for (int c = 0; c < s->n_cols; c++) free(s->header[c]);
  free(s->header);
  free(s->rows);
  free(s->keys);
  free(s->key_row);
  free(s->use);
  free(s->path);
  free(s);
}

/* A labels_csv is read whole when planning, and its label_key is the hash
 * of its bytes: both come from one copy of the file, taken through one
 * descriptor (a regular file, else refused without blocking) into sealed
 * memory and hashed as it is copied, so that what is hashed is what is
 * parsed even when the file is written to meanwhile: never labels of one
 * content under the key of another (issue 51; inputs_unchanged makes a
 * change an error). The copy's descriptor, with *content its hash and in
 * *sb the file as it was opened; or -1 with err naming the file. */
static int snapshot_file(const char *path, struct stat *sb, uint64_t *content, char *err, size_t errlen) {
  int fd = -1, copy = -1;
  char why[256];
  if (stage_file_open(path, &fd, err, errlen) != 0) return -1;
  if (fstat(fd, sb) != 0) {
    snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
  } else if ((copy = memfd_create("se3screen-input", MFD_CLOEXEC | MFD_ALLOW_SEALING)) < 0) {
    snprintf(err, errlen, "%s: cannot take a copy to read it once: %s", path, strerror(errno));
  } else if (stage_fd_copy_fd(fd, copy, content, why, sizeof why) != 0) {
    snprintf(err, errlen, "%s: %s", path, why);
    close(copy);
    copy = -1;
  } else {
    /* (nobody writes to it now: not even through /proc/PID/fd) */
    fcntl(copy, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
  }
  close(fd);
  return copy;
}

/* A reader of the copy (a descriptor of its own), messages naming path. */
static struct rec_reader *snapshot_reader(int copy, const char *path, const struct rec_options *ro, char *err,
                                          size_t errlen) {
  return rec_open_fd(fcntl(copy, F_DUPFD_CLOEXEC, 0), path, MOL_FMT_CSV, ro, err, errlen);
}

static int side_parse(struct stage_ctx *ctx, const struct cfg_node *n, int copy, struct side_csv **out);

static int side_load(struct stage_ctx *ctx, const struct cfg_node *n, struct side_csv **out) {
  const char *path = cfg_str(n, "path", NULL);
  char err[PATH_MAX + 256];
  if (rec_check_regular(path, err, sizeof err) != 0)
    return stage_fail_at(ctx, cfg_get(n, "path"), "labels_csv: %s", err);
  char why[2 * PATH_MAX + 256];
  if (workdir_check_input(ctx->workdir, path, why, sizeof why) != 0)
    return stage_fail_at(ctx, cfg_get(n, "path"), "labels_csv: %s", why);
  struct stat sb;
  uint64_t content = 0;
  int copy = snapshot_file(path, &sb, &content, err, sizeof err);
  if (copy < 0) return stage_fail_at(ctx, cfg_get(n, "path"), "labels_csv: %s", err);
  int rc = side_parse(ctx, n, copy, out);
  close(copy);
  if (rc == STAGE_OK) {
    (*out)->content = content;
    (*out)->file_st = sb;
  }
  return rc;
}

/* The rows of a labels_csv, from its copy. */
static int side_parse(struct stage_ctx *ctx, const struct cfg_node *n, int copy, struct side_csv **out) {
  const char *path = cfg_str(n, "path", NULL);
  const char *join = cfg_str(n, "join", "record");
  struct rec_options ro = {0};
  char err[512];
  /* The reader wants a SMILES column: give it any column; we only use fields. */
  struct rec_reader *rd = snapshot_reader(copy, path, &ro, err, sizeof err);
  if (!rd) {
    /* No column named smiles: open again naming the first column. */
    char line[4096] = "";
    ssize_t got = pread(copy, line, sizeof line - 1, 0);
    if (got < 0) return stage_fail_at(ctx, cfg_get(n, "path"), "labels_csv: %s: %s", path, strerror(errno));
    line[got] = 0;
    line[strcspn(line, ",\r\n")] = 0;
    char *q = line;
    if (*q == '"') {
      q++;
      q[strcspn(q, "\"")] = 0;
    }
    ro.smiles_column = q;
    rd = snapshot_reader(copy, path, &ro, err, sizeof err);
    if (!rd) return stage_fail_at(ctx, cfg_get(n, "path"), "labels_csv: %s", err);
  }
  struct side_csv *s = calloc(1, sizeof *s);
  if (!s) {
    rec_close(rd);
    return stage_fail_at(ctx, cfg_get(n, "path"), "labels_csv: out of memory reading %s", path);
  }
  s->path = strdup(path);
  int n_cols = 0;
  const char *const *cols = rec_columns(rd, &n_cols);
  s->header = calloc((size_t)n_cols + 1, sizeof *s->header);
  if (!s->path || !s->header) goto oom_open;
  s->n_cols = n_cols;
  for (int c = 0; c < s->n_cols; c++)
    if (!(s->header[c] = strdup(cols[c]))) goto oom_open;
  s->join_col = -1;
  if (strcmp(join, "record")) {
    for (int c = 0; c < s->n_cols; c++)
      if (!strcmp(s->header[c], join)) s->join_col = c;
    if (s->join_col < 0) {
      rec_close(rd);
      side_free(s);
      return stage_fail_at(ctx, cfg_get(n, "join"), "labels_csv: %s has no column '%s'", path, join);
    }
  }
  const struct cfg_node *want = cfg_get(n, "columns");
  s->use = calloc((size_t)s->n_cols + 1, sizeof *s->use);
  if (!s->use) goto oom_open;
  if (want && want->kind == CFG_LIST) {
    for (int k = 0; k < want->n_kids; k++) {
      int found = -1;
      for (int c = 0; c < s->n_cols; c++)
        if (!strcmp(s->header[c], want->kids[k]->value)) found = c;
      if (found < 0) {
        rec_close(rd);
        side_free(s);
        return stage_fail_at(ctx, want->kids[k], "labels_csv: %s has no column '%s'", path, want->kids[k]->value);
      }
      s->use[s->n_use++] = found;
    }
  } else {
    for (int c = 0; c < s->n_cols; c++)
      if (c != s->join_col) s->use[s->n_use++] = c;
  }
  struct rec r;
  int rc, cap = 0;
  while ((rc = rec_next(rd, &r, err, sizeof err)) == 1) {
    if (s->n_rows == cap) {
      cap = cap ? cap * 2 : 1024;
      char ***grown = realloc(s->rows, sizeof *s->rows * (size_t)cap);
      if (!grown) goto oom_open;
      s->rows = grown;
      int64_t *lines = realloc(s->lines, sizeof *s->lines * (size_t)cap);
      if (lines) s->lines = lines;
      char **errs = lines ? realloc(s->row_error, sizeof *s->row_error * (size_t)cap) : NULL;
      if (!errs) goto oom_open;
      s->row_error = errs;
    }
    char **row = calloc((size_t)s->n_cols + 1, sizeof *row);
    if (!row) goto oom_open;
    s->lines[s->n_rows] = r.line;
    s->row_error[s->n_rows] = NULL;
    s->rows[s->n_rows++] = row; /* side_free frees what is filled */
    if (r.error && !(s->row_error[s->n_rows - 1] = strdup(r.error))) goto oom_open;
    for (int c = 0; c < s->n_cols; c++)
      if (!(row[c] = strdup(r.fields && c < r.n_fields ? r.fields[c] : ""))) goto oom_open;
  }
  rec_close(rd);
  if (rc < 0) {
    side_free(s);
    return stage_fail_at(ctx, cfg_get(n, "path"), "labels_csv: %s", err);
  }
  if (s->join_col >= 0) {
    s->keys = calloc((size_t)s->n_rows + 1, sizeof *s->keys);
    s->key_row = calloc((size_t)s->n_rows + 1, sizeof *s->key_row);
    if (!s->keys || !s->key_row) {
      side_free(s);
      return stage_fail_at(ctx, cfg_get(n, "path"), "labels_csv: out of memory indexing %s", path);
    }
    for (int i = 0; i < s->n_rows; i++) {
      s->keys[i] = s->rows[i][s->join_col];
      s->key_row[i] = i;
    }
    qsort_r(s->key_row, (size_t)s->n_rows, sizeof *s->key_row, cmp_key, s->keys);
  }
  *out = s;
  return STAGE_OK;
oom_open:
  rec_close(rd);
  side_free(s);
  return stage_fail_at(ctx, cfg_get(n, "path"), "labels_csv: out of memory reading %s", path);
}

/* Row of the side CSV for a record, or -1. */
static int side_row(const struct side_csv *s, int64_t record_no, const char *name) {
  if (s->join_col < 0) return record_no >= 1 && record_no <= s->n_rows ? (int)(record_no - 1) : -1;
  if (!name) return -1;
  int lo = 0, hi = s->n_rows - 1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2;
    int c = strcmp(s->keys[s->key_row[mid]], name);
    if (c == 0) return s->key_row[mid];
    if (c < 0) lo = mid + 1;
    else hi = mid - 1;
  }
  return -1;
}

/* ---- plan ------------------------------------------------------------------- */

static void ingest_free(struct ingest *g) {
  if (!g) return;
  for (int i = 0; i < g->n_in; i++) {
    free(g->in[i].set);
    free(g->in[i].path);
    free(g->in[i].stored);
    free(g->in[i].file_error);
    for (int c = 0; c < g->in[i].n_cols; c++) free(g->in[i].cols[c]);
    free(g->in[i].cols);
    free(g->in[i].part_key);
    side_free(g->in[i].side);
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

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- inputs by content --------------------------------------------------- */

/* A string into a hash, with a terminator (so "ab","c" and "a","bc" differ). */
static uint64_t hash_word(uint64_t h, const char *s) {
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
  uint64_t mk = hash_word(SE3_HASH_INIT, "molecules");
  mk = se3_hash_bytes(mk, &content, sizeof content);
  mk = hash_word(mk, p->file_error);
  mk = hash_word(mk, rec_format_name(p->fmt));
  mk = hash_word(mk, p->ropt.smiles_column);
  mk = hash_word(mk, p->ropt.name_column);
  uint64_t lk = hash_word(SE3_HASH_INIT, "labels");
  lk = cfg_hash(lk, p->labels);
  if (p->side) {
    const struct cfg_node *side = cfg_get(item, "labels_csv");
    uint64_t sc = p->side->content; /* (of the bytes its rows were read from: side_load) */
    lk = cfg_hash(lk, side);
    lk = se3_hash_bytes(lk, &sc, sizeof sc);
    p->side_content = sc;
  }
  p->labels_from_mol = p->labels && p->labels->kind == CFG_LIST && p->fmt != MOL_FMT_CSV && p->fmt != MOL_FMT_TSV;
  if (p->labels_from_mol) mk = se3_hash_bytes(mk, &lk, sizeof lk);
  uint64_t how = hash_word(SE3_HASH_INIT, "read");
  how = hash_word(how, p->file_error);
  how = hash_word(how, rec_format_name(p->fmt));
  how = hash_word(how, p->ropt.smiles_column);
  how = hash_word(how, p->ropt.name_column);
  if (p->labels_from_mol) how = se3_hash_bytes(how, &lk, sizeof lk);
  p->how = how;
  snprintf(p->mol_key, sizeof p->mol_key, "%016" PRIx64, mk);
  snprintf(p->label_key, sizeof p->label_key, "%016" PRIx64, lk);
  ctx->inputs_hash = se3_hash_bytes(ctx->inputs_hash, &mk, sizeof mk);
  ctx->inputs_hash = se3_hash_bytes(ctx->inputs_hash, &lk, sizeof lk);
  return STAGE_OK;
}

/* An input's key: from its set and path (as stored), so that it does not
 * move when files are added, removed or reordered; below 2^23, so every id
 * (key * 1e9 + record) stays below 2^53, exact in JSON and JavaScript. */
#define INPUT_KEYS 8388607LL
static int64_t input_key_of(const char *set, const char *stored) {
  uint64_t h = hash_word(hash_word(SE3_HASH_INIT, set), stored);
  return 1 + (int64_t)(stage_hash_mix(h) % (uint64_t)INPUT_KEYS);
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

static int plan_progress(void *arg, const struct rec_stats *st, char *err, size_t errlen) {
  struct plan_progress *pp = arg;
  if (st->last_no >= ID_STRIDE) {
    snprintf(err, errlen, "%s: more than %lld records; split the file", pp->path, ID_STRIDE - 1);
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

static int add_input(struct stage_ctx *ctx, struct ingest *g, const char *set, const char *path,
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
  const char *fmt = cfg_str(item, "format", "auto");
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
  /* A FIFO or a device could block or never end: refused before any open. */
  if (rec_check_regular(path, err, sizeof err) != 0) return stage_fail_at(ctx, cfg_get(item, "path"), "%s", err);
  if (stat(path, &p->file_st) != 0) return stage_fail_at(ctx, cfg_get(item, "path"), "%s: %s", path, strerror(errno));
  /* nor a file this run replaces (a previous screen's hits.sdf as a library) */
  char why[2 * PATH_MAX + 256];
  if (workdir_check_input(ctx->workdir, path, why, sizeof why) != 0)
    return stage_fail_at(ctx, cfg_get(item, "path"), "%s", why);
  /* What the contents look like. A read error here is left to the scan
   * below, which turns it into a reject row. */
  enum mol_format seen = MOL_FMT_UNKNOWN;
  int nonblank = 1;
  if (rec_sniff_file(path, p->fmt, &seen, &nonblank, err, sizeof err) != 0) {
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
  p->ropt.smiles_column = cfg_str(item, "smiles_column", NULL);
  p->ropt.name_column = cfg_str(item, "name_column", NULL);
  p->labels = cfg_get(item, "labels");
  const struct cfg_node *side = cfg_get(item, "labels_csv");
  if (side && side->kind == CFG_MAP && side_load(ctx, side, &p->side)) return STAGE_ERROR;
  p->ropt.max_record_bytes = g->max_record_bytes;
  struct plan_progress pp = {.ctx = ctx, .path = path, .t0 = now_s()};
  pp.last = pp.t0;
  pp.interval = cfg_float(ctx->root, "run.progress_interval_s", 5);
  pp.show = strcmp(cfg_str(ctx->root, "run.progress", "auto"), "none") != 0;
  p->ropt.progress = plan_progress;
  p->ropt.progress_arg = &pp;
  int rc = rec_scan(path, p->fmt, &p->ropt, &p->st, err, sizeof err);
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

static int has_glob(const char *s) { return strpbrk(s, "*?[") != NULL; }

/* A record into its part's key, as the reader handed it out: its number,
 * text, name, error and fields. Planning (part_keys) and the chunk that
 * reads the part again (read_record) fold the same records alike, so that
 * a chunk can tell that it read what was planned (issue 51). */
static uint64_t hash_record(uint64_t h, const struct rec *r) {
  h = se3_hash_bytes(h, &r->record_no, sizeof r->record_no);
  h = se3_hash_bytes(h, r->text ? r->text : "", r->text ? r->len : 0);
  h = hash_word(h, r->name);
  h = hash_word(h, r->error);
  for (int f = 0; f < r->n_fields; f++)
    h = hash_word(h, r->fields[f]);
  return h;
}

/* The item of an input without a record of its own (its empty records not
 * listed, or the error that kept it from being read) into its part's key. */
static uint64_t hash_unlisted(uint64_t h, const struct input *in) {
  h = se3_hash_bytes(h, &in->st.n_unlisted, sizeof in->st.n_unlisted);
  return hash_word(h, in->file_error);
}

/* Each part's mol_key: how its file is read, and its records as the reader
 * hands them out (number, text, name and fields, error), in parts of
 * chunk_size; the last item of a file with empty records not listed one by
 * one (read_record) counts in its part too. One pass of the reader over
 * the file, without Open Babel. */
static int part_keys(struct stage_ctx *ctx, struct ingest *g, struct input *in) {
  in->n_parts = (in->n_records + g->chunk_size - 1) / g->chunk_size;
  in->part_key = calloc((size_t)in->n_parts + 1, sizeof *in->part_key);
  if (!in->part_key) return stage_fail_at(ctx, NULL, "planning %s: out of memory", in->path);
  uint64_t h = se3_hash_bytes(SE3_HASH_INIT, &in->how, sizeof in->how);
  int64_t i = 0, k = 0;
  char err[512];
  struct rec_reader *rd = NULL;
  if (!in->file_error && in->n_records > 0) {
    rd = rec_open(in->path, in->fmt, &in->ropt, err, sizeof err);
    if (!rd) return stage_fail_at(ctx, NULL, "planning %s: %s", in->path, err);
    struct rec r;
    int rc;
    while ((rc = rec_next(rd, &r, err, sizeof err)) > 0) {
      h = hash_record(h, &r);
      if (++i % g->chunk_size == 0 && k < in->n_parts) {
        snprintf(in->part_key[k++], 17, "%016" PRIx64, h);
        h = se3_hash_bytes(SE3_HASH_INIT, &in->how, sizeof in->how);
      }
    }
    rec_close(rd);
    if (rc < 0) return stage_fail_at(ctx, NULL, "planning %s: %s", in->path, err);
  }
  if (in->st.n_unlisted > 0 || in->file_error) { /* the one item without a record of its own */
    h = hash_unlisted(h, in);
    i++;
  }
  if (i != in->n_records)
    return stage_fail_at(ctx, NULL, "planning %s: %lld records now, %lld when it was scanned (was the file changed?)",
                         in->path, (long long)i, (long long)in->n_records);
  if (k < in->n_parts) snprintf(in->part_key[k], 17, "%016" PRIx64, h);
  return STAGE_OK;
}

/* Whether a file is as it was (same file, size, times of its last write
 * and of its last change of any kind). */
static int same_file(const struct stat *a, const struct stat *b) {
  return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
         a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
         a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* Planning read each file several times (its format, its records, its
 * contents' hash, its parts): a file written to or replaced meanwhile is an
 * error naming it, not a plan made of two contents. (A chunk checks its
 * records against its part's key all the same: ingest_chunk.) */
static int inputs_unchanged(struct stage_ctx *ctx, const struct ingest *g) {
  for (int i = 0; i < g->n_in; i++) {
    const struct input *in = &g->in[i];
    struct stat now;
    const char *what = "";
    const char *path = in->path;
    int same = stat(path, &now) == 0 && same_file(&now, &in->file_st);
    if (same && in->side) {
      what = "labels_csv: ";
      path = in->side->path;
      same = stat(path, &now) == 0 && same_file(&now, &in->side->file_st);
    }
    if (!same)
      return stage_fail_at(ctx, NULL,
                           "%s%s: changed while this run planned it (written to, replaced or touched): nothing is "
                           "stored from it. Run again once it is as it should be",
                           what, path);
  }
  return STAGE_OK;
}

/* Each input's key: the one the database has for its set and path, else
 * the hash of both, stepped past keys another input of this plan has. */
static int assign_keys(struct stage_ctx *ctx, struct ingest *g) {
  sqlite3_stmt *q = NULL;
  char *sql = sqlite3_mprintf("SELECT input FROM \"%w\".ingest_files WHERE set_name=?1 AND source_file=?2", ctx->src);
  int rc = sql ? sqlite3_prepare_v2(ctx->db, sql, -1, &q, NULL) : SQLITE_NOMEM;
  sqlite3_free(sql);
  if (rc != SQLITE_OK) return stage_sql_fail(ctx, "reading the inputs of the last run");
  for (int pass = 0; pass < 2; pass++) /* those the database knows first, then the new ones */
    for (int i = 0; i < g->n_in; i++) {
      struct input *in = &g->in[i];
      if (in->key) continue;
      int64_t k = 0;
      if (pass == 0) {
        sqlite3_reset(q);
        sqlite3_bind_text(q, 1, in->set, -1, SQLITE_STATIC);
        sqlite3_bind_text(q, 2, in->stored, -1, SQLITE_STATIC);
        rc = sqlite3_step(q);
        if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
          sqlite3_finalize(q);
          return stage_sql_fail(ctx, "reading the inputs of the last run");
        }
        if (rc != SQLITE_ROW) continue;
        k = sqlite3_column_int64(q, 0);
      } else {
        k = input_key_of(in->set, in->stored);
      }
      for (int taken = 1; taken;) {
        taken = 0;
        for (int j = 0; j < g->n_in && !taken; j++)
          taken = g->in[j].key == k;
        if (taken && pass == 0) break; /* (the same file twice: the second gets a key of its own) */
        if (taken) k = k % INPUT_KEYS + 1;
      }
      for (int j = 0; j < g->n_in; j++)
        if (g->in[j].key == k) k = 0;
      in->key = k;
    }
  sqlite3_finalize(q);
  return STAGE_OK;
}

/* The chunks: each input's records in parts of chunk_size, in the
 * workflow's order; and which have work. A part the database lists as
 * read from the file as it is now, with its labels as they are now, is
 * done; one read from the same file but with other labels has its labels
 * read again only (in a shard: read again whole, merge replaces it); any
 * other is read. */
static int plan_parts(struct stage_ctx *ctx, struct ingest *g) {
  g->n_chunks = 0;
  for (int i = 0; i < g->n_in; i++)
    g->n_chunks += g->in[i].n_parts; /* (part_keys) */
  g->chunk_in = malloc(sizeof *g->chunk_in * (size_t)(g->n_chunks + 1));
  g->chunk_part = malloc(sizeof *g->chunk_part * (size_t)(g->n_chunks + 1));
  g->needed = calloc((size_t)g->n_chunks + 1, 1);
  g->relabel = calloc((size_t)g->n_chunks + 1, 1);
  if (!g->chunk_in || !g->chunk_part || !g->needed || !g->relabel) return stage_fail_at(ctx, NULL, "planning: out of memory");
  int shard = strcmp(ctx->src, "main") != 0;
  sqlite3_stmt *q[2] = {NULL, NULL};
  for (int d = 0; d <= shard; d++) { /* the database's own first (a shard's newer rows), then screen.db */
    char *sql = sqlite3_mprintf("SELECT mol_key, label_key FROM \"%w\".ingest_parts WHERE input=?1 AND part=?2",
                                d == 0 ? "main" : ctx->src);
    int rc = sql ? sqlite3_prepare_v2(ctx->db, sql, -1, &q[d], NULL) : SQLITE_NOMEM;
    sqlite3_free(sql);
    if (rc != SQLITE_OK) {
      sqlite3_finalize(q[0]);
      return stage_sql_fail(ctx, "reading the parts read before");
    }
  }
  int64_t c = 0, done_items = 0;
  int ret = STAGE_OK;
  for (int i = 0; i < g->n_in && ret == STAGE_OK; i++) {
    struct input *in = &g->in[i];
    for (int64_t k = 0; k < in->n_parts; k++, c++) {
      g->chunk_in[c] = i;
      g->chunk_part[c] = k;
      int found = 0, same_mol = 0, same_labels = 0;
      for (int d = 0; d <= shard && !found; d++) {
        sqlite3_reset(q[d]);
        sqlite3_bind_int64(q[d], 1, in->key);
        sqlite3_bind_int64(q[d], 2, k);
        int rc = sqlite3_step(q[d]);
        if (rc == SQLITE_ROW) {
          found = 1;
          same_mol = !strcmp((const char *)sqlite3_column_text(q[d], 0), in->part_key[k]);
          same_labels = !strcmp((const char *)sqlite3_column_text(q[d], 1), in->label_key);
        } else if (rc != SQLITE_DONE) {
          ret = stage_sql_fail(ctx, "reading the parts read before");
          break;
        }
      }
      int64_t n = in->n_records - k * g->chunk_size;
      if (n > g->chunk_size) n = g->chunk_size;
      if (found && same_mol && same_labels) {
        done_items += n;
      } else {
        g->needed[c] = 1;
        g->relabel[c] = found && same_mol && !shard;
      }
      /* what the plan says of the file: its worst part */
      int st = !found ? IN_NEW : !same_mol ? IN_CHANGED : !same_labels ? IN_LABELS : IN_SAME;
      in->n_changed += found && !same_mol;
      if (k == 0 || st > in->status) in->status = st;
      if (found) in->seen = 1;
    }
  }
  sqlite3_finalize(q[0]);
  sqlite3_finalize(q[1]);
  ctx->chunk_needed = g->needed;
  ctx->items_done = done_items;
  return ret;
}

/* What the plan found, in words, when anything is to be done (else ""):
 * the files new, changed, with changed labels only, and gone, by name (the
 * first few of each), and how many are unchanged; and the sets whose
 * molecules (a file new, changed or gone) and whose labels alone change,
 * space-separated, for `run --dry-run`. */
static void plan_describe(struct stage_ctx *ctx, const struct ingest *g, char *line, size_t size, char *mol_sets,
                          char *label_sets, size_t sets_size) {
  static const char *const what[] = {"unchanged", "labels changed, molecules kept", "new", "changed, read again"};
  int count[4] = {0}, resumed = 0;
  line[0] = 0;
  if (mol_sets) mol_sets[0] = label_sets[0] = 0;
  for (int i = 0; i < g->n_in; i++) {
    int st = g->in[i].status == IN_NEW && g->in[i].seen ? IN_SAME : g->in[i].status;
    resumed += g->in[i].status == IN_NEW && g->in[i].seen;
    count[st]++;
    char *to = g->in[i].status == IN_NEW || g->in[i].status == IN_CHANGED ? mol_sets : NULL;
    if (mol_sets && to && !stage_word_listed(to, g->in[i].set))
      snprintf(to + strlen(to), sets_size - strlen(to), "%s%s", to[0] ? " " : "", g->in[i].set);
  }
  /* the files of the last plan gone from this one */
  char gone[512] = "";
  int n_gone = 0;
  sqlite3_stmt *q = NULL;
  char *sql = sqlite3_mprintf("SELECT set_name, source_file FROM \"%w\".ingest_files ORDER BY position", ctx->src);
  if (sql && sqlite3_prepare_v2(ctx->db, sql, -1, &q, NULL) == SQLITE_OK) {
    while (sqlite3_step(q) == SQLITE_ROW) {
      const char *set = (const char *)sqlite3_column_text(q, 0), *file = (const char *)sqlite3_column_text(q, 1);
      int here = 0;
      for (int i = 0; i < g->n_in && !here; i++)
        here = !strcmp(g->in[i].set, set) && !strcmp(g->in[i].stored, file);
      if (here) continue;
      if (n_gone < 4) {
        size_t o = strlen(gone);
        snprintf(gone + o, sizeof gone - o, "%s%s", n_gone ? ", " : "", file);
      }
      if (mol_sets && !stage_word_listed(mol_sets, set))
        snprintf(mol_sets + strlen(mol_sets), sets_size - strlen(mol_sets), "%s%s", mol_sets[0] ? " " : "", set);
      n_gone++;
    }
  }
  sqlite3_finalize(q);
  sqlite3_free(sql);
  if (count[IN_LABELS] + count[IN_NEW] + count[IN_CHANGED] + n_gone + resumed == 0) return;
  size_t o = 0;
  for (int st = IN_NEW; st >= IN_LABELS; st = st == IN_NEW ? IN_CHANGED : st == IN_CHANGED ? IN_LABELS : -1) {
    if (!count[st] || o >= size - 64) continue;
    o += (size_t)snprintf(line + o, size - o, "%s%s: ", o ? "; " : "", what[st]);
    int shown = 0;
    for (int i = 0; i < g->n_in && o < size - 64; i++) {
      int s2 = g->in[i].status == IN_NEW && g->in[i].seen ? IN_SAME : g->in[i].status;
      if (s2 != st) continue;
      if (shown == 4) {
        o += (size_t)snprintf(line + o, size - o, ", ... (%d files)", count[st]);
        break;
      }
      o += (size_t)snprintf(line + o, size - o, "%s%s", shown ? ", " : "", g->in[i].stored);
      if (st == IN_CHANGED && g->in[i].n_changed < g->in[i].n_parts && o < size - 64)
        o += (size_t)snprintf(line + o, size - o, " (%d of %lld parts)", g->in[i].n_changed,
                              (long long)g->in[i].n_parts);
      shown++;
    }
  }
  if (n_gone && o < size - 64)
    o += (size_t)snprintf(line + o, size - o, "%sgone: %s%s (%s molecules and all made from them deleted)",
                          o ? "; " : "", gone, n_gone > 4 ? ", ..." : "", n_gone == 1 ? "its" : "their");
  if (resumed && o < size - 64)
    o += (size_t)snprintf(line + o, size - o, "%sread in part before, resumed: %d file%s", o ? "; " : "", resumed,
                          resumed == 1 ? "" : "s");
  if (count[IN_SAME] - resumed > 0 && o < size - 64)
    snprintf(line + o, size - o, "; %d file%s unchanged", count[IN_SAME] - resumed,
             count[IN_SAME] - resumed == 1 ? "" : "s");
}

/* The plan's line in the run's log. */
static void plan_say(struct stage_ctx *ctx, const struct ingest *g) {
  char line[2048];
  plan_describe(ctx, g, line, sizeof line, NULL, NULL, 0);
  if (line[0]) ctx->report->log(ctx, "%s", line);
}

/* run --dry-run: the plan's line, with the records to read. */
static int label_changes(struct stage_ctx *ctx, struct ingest *g, int ii, char *names, size_t size, int64_t *n_rec,
                         int *mols);

static int ingest_explain(struct stage_ctx *ctx, char *line, size_t size, char *mol_sets, char *label_sets,
                          size_t sets_size) {
  struct ingest *g = ctx->state;
  plan_describe(ctx, g, line, size, mol_sets, label_sets, sets_size);
  /* the labels that a file whose labels alone changed changes, read now */
  char said[1024] = "";
  for (int i = 0; i < g->n_in; i++) {
    if (g->in[i].status != IN_LABELS) continue;
    char names[512];
    int64_t n_rec = 0;
    int mols = 0;
    if (label_changes(ctx, g, i, names, sizeof names, &n_rec, &mols)) return STAGE_ERROR;
    if (mols && !stage_word_listed(mol_sets, g->in[i].set)) /* (a record rejected for its labels now, or no longer) */
      snprintf(mol_sets + strlen(mol_sets), sets_size - strlen(mol_sets), "%s%s", mol_sets[0] ? " " : "", g->in[i].set);
    size_t so = strlen(said);
    if (!names[0]) {
      snprintf(said + so, sizeof said - so, "%s%s: no label value changes", so ? "; " : "", g->in[i].stored);
      continue;
    }
    snprintf(said + so, sizeof said - so, "%s%s: %s change%s (%lld record%s)", so ? "; " : "", g->in[i].stored, names,
             strchr(names, ' ') ? "" : "s", (long long)n_rec, n_rec == 1 ? "" : "s");
    char *copy = strdup(names), *save = NULL;
    for (char *w = copy ? strtok_r(copy, " ", &save) : NULL; w; w = strtok_r(NULL, " ", &save)) {
      size_t lo = strlen(label_sets);
      snprintf(label_sets + lo, sets_size - lo, "%s%s:%s", lo ? " " : "", g->in[i].set, w);
    }
    free(copy);
  }

  int64_t parse = 0, relabel = 0;
  for (int64_t c = 0; c < g->n_chunks; c++) {
    if (!g->needed[c]) continue;
    const struct input *in = &g->in[g->chunk_in[c]];
    int64_t n = in->n_records - g->chunk_part[c] * g->chunk_size;
    if (n > g->chunk_size) n = g->chunk_size;
    if (g->relabel[c]) relabel += n;
    else parse += n;
  }
  size_t o = strlen(line);
  if (parse && o < size - 80)
    o += (size_t)snprintf(line + o, size - o, "%sreads %lld record%s (molecules parsed)", o ? "; " : "",
                          (long long)parse, parse == 1 ? "" : "s");
  if (relabel && o < size - 80)
    o += (size_t)snprintf(line + o, size - o, "%sreads the labels of %lld record%s (molecules kept)", o ? "; " : "",
                          (long long)relabel, relabel == 1 ? "" : "s");
  if (said[0] && o < size - 80) snprintf(line + o, size - o, "%slabels now: %s", o ? "; " : "", said);
  return STAGE_OK;
}

static int ingest_begin(struct stage_ctx *ctx, int64_t *n_chunks, int64_t *n_items) {
  struct ingest *g = calloc(1, sizeof *g);
  ctx->state = g;
  ctx->inputs_hash = SE3_HASH_INIT;
  const struct cfg_node *c = ctx->cfg;
  g->chunk_size = cfg_int(ctx->root, "run.chunk_size", 1024);
  g->rd_in = -1;

  const char *gen3d = cfg_str(c, "gen3d", "auto");
  g->po.gen3d = !strcmp(gen3d, "always") ? OB_GEN3D_ALWAYS : !strcmp(gen3d, "never") ? OB_GEN3D_NEVER : OB_GEN3D_AUTO;
  const char *q = cfg_str(c, "gen3d_quality", "fast");
  g->po.quality = !strcmp(q, "fast") ? OB_Q_FAST : !strcmp(q, "best") ? OB_Q_BEST : OB_Q_MEDIUM;
  g->po.seed = (unsigned)cfg_int(c, "seed", 42);
  g->po.add_hydrogens = cfg_bool(c, "add_hydrogens", 1);
  const char *frag = cfg_str(c, "fragments", "largest");
  g->po.fragments = !strcmp(frag, "reject") ? OB_FRAG_REJECT : !strcmp(frag, "keep") ? OB_FRAG_KEEP : OB_FRAG_LARGEST;
  const struct cfg_node *prot = cfg_get(c, "protonate");
  if (prot && prot->type == CFG_T_FLOAT) {
    g->po.protonate = OB_PROT_PH;
    g->po.ph = prot->f;
  } else {
    const char *pv = cfg_str(c, "protonate", "keep");
    g->po.protonate = !strcmp(pv, "neutral") ? OB_PROT_NEUTRAL : OB_PROT_KEEP;
  }
  g->po.allow_radicals = cfg_bool(c, "allow_radicals", 0);
  g->po.max_atoms = (int)cfg_int(c, "max_atoms", 999);
  g->max_record_bytes = (size_t)cfg_int(c, "max_record_bytes", 16 << 20);
  g->po.max_record_bytes = g->max_record_bytes;
  g->co.max_atoms = g->po.max_atoms;
  g->co.min_heavy_atoms = (int)cfg_int(c, "min_heavy_atoms", 1);
  g->co.reject_lone_hydrogen = 1;
  g->co.min_distance = cfg_float(c, "min_distance", 0.5);
  g->co.max_fragment_gap = cfg_float(c, "max_fragment_gap", 10);
  const struct cfg_node *el = cfg_get(c, "elements");
  if (el && el->kind == CFG_LIST) {
    for (int i = 0; i < el->n_kids && i < 128; i++) {
      int z = mol_element_z(el->kids[i]->value);
      if (z <= 0) return stage_fail_at(ctx, el->kids[i], "stages.ingest.elements: '%s' is not an element", el->kids[i]->value);
      g->elements[g->co.n_elements++] = (uint8_t)z;
    }
    g->co.elements = g->elements;
  }
  g->workers = (int)cfg_int(c, "workers", 0);
  if (g->workers <= 0) g->workers = stage_cores(); /* (an array task's allocation under Slurm) */
  g->timeout_s = cfg_float(c, "timeout_s", 60);

  const struct cfg_node *sets = cfg_get(ctx->root, "sets");
  for (int s = 0; sets && s < sets->n_kids; s++) {
    const struct cfg_node *set = sets->kids[s];
    for (int k = 0; k < set->n_kids; k++) {
      const struct cfg_node *item = set->kids[k];
      const char *path = cfg_str(item, "path", NULL);
      if (!path) continue;
      if (has_glob(path)) {
        glob_t gl;
        int rc = glob(path, 0, NULL, &gl);
        if (rc != 0) {
          return stage_fail_at(ctx, cfg_get(item, "path"), "%s: %s", path,
                         rc == GLOB_NOMATCH ? "no file matches this pattern" : "cannot expand the pattern");
        }
        for (size_t i = 0; i < gl.gl_pathc; i++) {
          if (add_input(ctx, g, set->key, gl.gl_pathv[i], item)) {
            globfree(&gl);
            return STAGE_ERROR;
          }
        }
        globfree(&gl);
      } else {
        if (access(path, R_OK) != 0)
          return stage_fail_at(ctx, cfg_get(item, "path"), "%s: %s", path, strerror(errno));
        if (add_input(ctx, g, set->key, path, item)) return STAGE_ERROR;
      }
    }
  }
  if (g->n_in == 0) return stage_fail_at(ctx, sets, "no input files: add a set with at least one `path`");
  for (int i = 0; i < g->n_in; i++)
    if (part_keys(ctx, g, &g->in[i])) return STAGE_ERROR;
  if (inputs_unchanged(ctx, g) || assign_keys(ctx, g) || plan_parts(ctx, g)) return STAGE_ERROR;
  *n_items = g->total;
  *n_chunks = g->n_chunks;
  return STAGE_OK;
}

/* ---- one chunk --------------------------------------------------------------- */

struct item {                  /* one record of the chunk */
  int in;                      /* input index */
  int64_t record_no, line;
  char *name;                  /* csv name column */
  char **fields;               /* csv fields */
  int n_fields;
  const char *const *cols;
  int n_cols;
  int direct;                  /* rejected before parsing (reason below) */
  int kept;                    /* labels alone read again: 1 its molecule is stored (name: its
                                  stored name), 2 it stands rejected for a reason not its labels' */
  char *stored_name;
  /* A rejection of ingest's own (the reader's, the labels'), kept whole
   * here (a record's error can name long paths): the reason and its
   * specifics (NULL: none). NULL reason: the worker's, in the job's why. */
  char *reason, *detail;
};

/* What read_record (and relabel_look) allocated for one record. */
static void item_free(struct item *it, struct wjob *job) {
  free((char *)job->text);
  mol_free(&job->mol);
  free(it->name);
  free(it->stored_name);
  free(it->reason);
  free(it->detail);
  for (int f = 0; f < it->n_fields; f++)
    free(it->fields[f]);
  free(it->fields);
}

/* Rejects record `it` with a reason of ingest's own (the text whole; detail
 * NULL for none). 0, or -1 out of memory. */
static int item_reject(struct item *it, struct wjob *job, const char *reason, const char *detail) {
  job->status = 1;
  free(it->reason);
  free(it->detail);
  it->reason = strdup(reason);
  it->detail = detail ? strdup(detail) : NULL;
  return it->reason && (!detail || it->detail) ? 0 : -1;
}

static void advance_cb(void *arg, int64_t n) {
  struct stage_ctx *ctx = arg;
  ctx->report->advance(ctx, n);
}

/* Read global record gi into *it and *job, and (key not NULL) fold it into
 * *key as part_keys folded it. 0 ok, -1 error (ctx->err). */
static int read_record(struct stage_ctx *ctx, struct ingest *g, int64_t gi, struct item *it, struct wjob *job,
                       uint64_t *key) {
  int lo = 0, hi = g->n_in - 1;
  while (lo < hi) { /* last input with first <= gi */
    int mid = (lo + hi + 1) / 2;
    if (g->in[mid].first <= gi) lo = mid;
    else hi = mid - 1;
  }
  while (lo < g->n_in - 1 && g->in[lo].n_records == 0) lo++;
  struct input *in = &g->in[lo];
  int64_t want = gi - in->first + 1;
  char err[512];
  if (in->file_error) {
    if (key) *key = hash_unlisted(*key, in);
    it->in = lo;
    it->record_no = 0;
    it->direct = 1;
    job->format = rec_format_ob(in->fmt);
    if (item_reject(it, job, in->file_error, NULL)) goto oom;
    return 0;
  }
  if (in->st.n_unlisted > 0 && want == in->n_records) {
    /* The input's last item: one row for the empty records not listed. */
    if (key) *key = hash_unlisted(*key, in);
    it->in = lo;
    it->record_no = in->st.first_unlisted;
    it->line = in->st.first_unlisted_line;
    it->direct = 1;
    job->format = rec_format_ob(in->fmt);
    char why[256];
    snprintf(why, sizeof why,
             "%lld more empty records, not listed one by one (this is the first of them; %lld empty records in "
             "the file)",
             (long long)in->st.n_unlisted, (long long)in->st.n_empty);
    if (item_reject(it, job, why, NULL)) goto oom;
    return 0;
  }
  if (g->rd_in != lo || g->rd_next > want) {
    if (g->rd) rec_close(g->rd);
    g->rd = rec_open(in->path, in->fmt, &in->ropt, err, sizeof err);
    if (!g->rd) {
      g->rd_in = -1;
      snprintf(ctx->err, sizeof ctx->err, "%s", err);
      return -1;
    }
    g->rd_in = lo;
    g->rd_next = 1;
  }
  struct rec r;
  for (;;) {
    int rc = rec_next(g->rd, &r, err, sizeof err);
    if (rc <= 0) {
      snprintf(ctx->err, sizeof ctx->err, "%s: %s", in->path,
               rc < 0 ? err : "fewer records than when the run was planned (was the file changed?)");
      return -1;
    }
    if (g->rd_next++ == want) break; /* the want-th record handed out (numbers skip unlisted empty ones) */
  }
  if (key) *key = hash_record(*key, &r);
  it->in = lo;
  it->record_no = r.record_no;
  it->line = r.line;
  it->name = r.name ? strdup(r.name) : NULL;
  if (r.name && !it->name) goto oom;
  if (r.fields) {
    it->fields = calloc((size_t)r.n_fields + 1, sizeof *it->fields);
    if (!it->fields) goto oom;
    it->n_fields = r.n_fields;
    for (int i = 0; i < r.n_fields; i++)
      if (!(it->fields[i] = strdup(r.fields[i] ? r.fields[i] : ""))) goto oom;
    if (!in->cols) {
      int nc = 0;
      const char *const *cols = rec_columns(g->rd, &nc);
      char **cc = calloc((size_t)nc + 1, sizeof *cc);
      if (!cc) goto oom;
      for (int c = 0; c < nc; c++)
        if (!(cc[c] = strdup(cols[c]))) {
          while (c-- > 0)
            free(cc[c]);
          free(cc);
          goto oom;
        }
      in->cols = cc;
      in->n_cols = nc;
    }
    it->cols = (const char *const *)in->cols;
    it->n_cols = in->n_cols;
  }
  job->format = rec_format_ob(in->fmt);
  if (r.error) { /* including a record over max_record_bytes (the reader's cap) */
    it->direct = 1;
    if (item_reject(it, job, r.error, NULL)) goto oom;
  } else {
    /* the record's bytes as read (the reader refuses a NUL inside one, but
     * len, not a terminator, is what the worker is sent) */
    char *text = malloc(r.len + 1);
    if (!text) goto oom;
    memcpy(text, r.text, r.len);
    text[r.len] = 0;
    job->text = text;
    job->len = r.len;
  }
  return 0;
oom:
  snprintf(ctx->err, sizeof ctx->err, "%s: out of memory reading record %lld", in->path, (long long)it->record_no);
  return -1;
}

/* Parse a label value; 0 ok, 1 missing (empty), -1 unparseable (why says
 * why). Decimal numbers only: strtod read 0x10 as 16 (chem/records.h). */
static int parse_label(const char *s, double *v, char *why, size_t whylen) {
  return rec_parse_label(s, v, why, whylen);
}

struct label { const char *name; double value; };

/* Collect the labels of a record; 0 ok, 1 rejected: *kind the reason (one
 * text per kind, so that rejects group by it), the specifics in detail. */
static int collect_labels(const struct input *in, const struct item *it, const struct mol *m, struct label *out,
                          int *n_out, int max_out, const char **kind, char *reason, size_t rlen) {
  *kind = "label not a number";
  *n_out = 0;
  const struct cfg_node *L = in->labels;
  if (L && L->kind == CFG_MAP) {
    for (int k = 0; k < L->n_kids && *n_out < max_out; k++)
      out[(*n_out)++] = (struct label){L->kids[k]->key, L->kids[k]->f};
  } else if (L && L->kind == CFG_LIST) {
    for (int k = 0; k < L->n_kids && *n_out < max_out; k++) {
      const char *name = L->kids[k]->value, *val = NULL;
      for (int c = 0; it->fields && c < it->n_cols && c < it->n_fields; c++)
        if (!strcmp(it->cols[c], name)) val = it->fields[c];
      int column = val != NULL;
      if (!val) val = mol_tag(m, name);
      if (!val) continue;
      double v;
      char why[128];
      int rc = parse_label(val, &v, why, sizeof why);
      if (rc < 0 && column) {
        snprintf(reason, rlen, "label '%s': cannot read '%.60s' as a number (%s:%lld, column '%s'): %s", name, val,
                 in->stored, (long long)it->line, name, why);
        return 1;
      }
      if (rc < 0) {
        snprintf(reason, rlen, "label '%s': cannot read '%.60s' as a number (%s, record %lld at line %lld, SD tag "
                 "'%s'): %s", name, val, in->stored, (long long)it->record_no, (long long)it->line, name, why);
        return 1;
      }
      if (rc == 0) out[(*n_out)++] = (struct label){name, v};
    }
  }
  if (in->side) {
    const struct side_csv *s = in->side;
    const char *name = it->name ? it->name : m->name;
    int row = side_row(s, it->record_no, name);
    if (row >= 0 && s->row_error[row]) { /* its cells may be cut short: no label from it */
      *kind = "bad labels_csv row";
      snprintf(reason, rlen, "labels_csv %s:%lld: %s", s->path, (long long)s->lines[row], s->row_error[row]);
      return 1;
    }
    for (int u = 0; row >= 0 && u < s->n_use && *n_out < max_out; u++) {
      const char *val = s->rows[row][s->use[u]];
      double v;
      char why[128];
      int rc = parse_label(val, &v, why, sizeof why);
      if (rc < 0) {
        snprintf(reason, rlen, "label '%s': cannot read '%.60s' as a number (%s:%lld, column '%s'): %s",
                 s->header[s->use[u]], val, s->path, (long long)s->lines[row], s->header[s->use[u]], why);
        return 1;
      }
      if (rc == 0) out[(*n_out)++] = (struct label){s->header[s->use[u]], v};
    }
  }
  return 0;
}

static int is_blank_name(const char *s) {
  for (; s && *s; s++)
    if (*s != ' ' && *s != '\t' && *s != '\r' && *s != '\n') return 0;
  return 1;
}

/* "STEM:RECORD": the input's file name without its folder and extensions
 * (qm7_quick.sdf.gz -> qm7_quick; a .gz, then one extension of up to 8
 * letters or digits), ':' and the record number, counted as the rejects
 * table and `record_no` count it (1 = the first molecule of the file). */
static const char *generated_name(const struct input *in, int64_t record_no, char *buf, size_t size) {
  const char *base = strrchr(in->path, '/');
  base = base ? base + 1 : in->path;
  size_t n = strlen(base);
  if (n > 3 && strcasecmp(base + n - 3, ".gz") == 0) n -= 3;
  size_t dot = n;
  while (dot > 0 && base[dot - 1] != '.' && n - dot < 9 &&
         ((base[dot - 1] >= 'a' && base[dot - 1] <= 'z') || (base[dot - 1] >= 'A' && base[dot - 1] <= 'Z') ||
          (base[dot - 1] >= '0' && base[dot - 1] <= '9')))
    dot--;
  if (dot > 1 && base[dot - 1] == '.' && dot < n) n = dot - 1;
  if (n > 256) n = 256;
  snprintf(buf, size, "%.*s:%lld", (int)n, base, (long long)record_no);
  return buf;
}

/* A record read again (its labels changed): its labels, its reject and,
 * unless keep_molecule, its molecule deleted. 0, or -1 with ctx->err. */
static int forget_record(struct stage_ctx *ctx, int64_t id, int keep_molecule) {
  char *sql = sqlite3_mprintf("DELETE FROM labels WHERE mol_id=%lld; DELETE FROM rejects WHERE stage='ingest' AND "
                              "mol_id=%lld;",
                              (long long)id, (long long)id);
  if (sql && !keep_molecule) sql = sqlite3_mprintf("%z DELETE FROM molecules WHERE id=%lld", sql, (long long)id);
  char *msg = NULL;
  int rc = sql ? sqlite3_exec(ctx->db, sql, NULL, NULL, &msg) : SQLITE_NOMEM;
  sqlite3_free(sql);
  if (rc != SQLITE_OK) {
    snprintf(ctx->err, sizeof ctx->err, "deleting what was stored of molecule %lld: %s", (long long)id,
             msg ? msg : sqlite3_errstr(rc));
    sqlite3_free(msg);
    return -1;
  }
  return 0;
}

/* Whether a reject's reason is its labels' (collect_labels's kinds). */
static int label_reason(const char *r) {
  return r && (!strcmp(r, "label not a number") || !strcmp(r, "bad labels_csv row"));
}

/* A part whose labels alone changed: each record with a stored molecule
 * keeps it (kept 1, its stored name with it), each rejected for a reason
 * other than its labels stays so (kept 2); the others (rejected for their
 * labels, or not found) are parsed as usual. */
static int relabel_look(struct stage_ctx *ctx, const struct input *in, struct item *items, int n) {
  sqlite3_stmt *m = NULL, *r = NULL;
  if (sqlite3_prepare_v2(ctx->db, "SELECT name FROM molecules WHERE id=?1", -1, &m, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(ctx->db, "SELECT reason FROM rejects WHERE stage='ingest' AND mol_id=?1", -1, &r, NULL) !=
          SQLITE_OK) {
    sqlite3_finalize(m);
    return stage_sql_fail(ctx, "finding the molecules stored before");
  }
  int ret = STAGE_OK;
  for (int i = 0; i < n && ret == STAGE_OK; i++) {
    struct item *it = &items[i];
    if (it->direct) continue;
    int64_t id = in->key * ID_STRIDE + it->record_no;
    sqlite3_reset(m);
    sqlite3_bind_int64(m, 1, id);
    int rc = sqlite3_step(m);
    if (rc == SQLITE_ROW) {
      it->kept = 1;
      if (!(it->stored_name = strdup((const char *)sqlite3_column_text(m, 0)))) ret = stage_fail_at(ctx, NULL, "out of memory");
      continue;
    }
    sqlite3_reset(r);
    sqlite3_bind_int64(r, 1, id);
    if (rc == SQLITE_DONE && (rc = sqlite3_step(r)) == SQLITE_ROW) {
      if (!label_reason((const char *)sqlite3_column_text(r, 0))) it->kept = 2;
      rc = SQLITE_DONE;
    }
    if (rc != SQLITE_DONE) ret = stage_sql_fail(ctx, "finding the molecules stored before");
  }
  sqlite3_finalize(m);
  sqlite3_finalize(r);
  return ret;
}

/* run --dry-run, for input ii whose labels alone changed: the labels its
 * records would get now (as a relabelling chunk reads them) against those
 * stored. names: the label names with a value changed, added or gone, or
 * of a record rejected for its labels now or no longer, space-separated;
 * *n_rec: the records with a change; *mols: 1 when a record is rejected
 * for its labels now or no longer (its molecule goes or comes). */
static int label_changes(struct stage_ctx *ctx, struct ingest *g, int ii, char *names, size_t size, int64_t *n_rec,
                         int *mols) {
  struct input *in = &g->in[ii];
  names[0] = 0;
  *n_rec = 0;
  *mols = 0;
  sqlite3_stmt *lab = NULL, *rej = NULL;
  if (sqlite3_prepare_v2(ctx->db, "SELECT name, value FROM labels WHERE mol_id=?1", -1, &lab, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(ctx->db, "SELECT name FROM rejects WHERE stage='ingest' AND mol_id=?1", -1, &rej, NULL) !=
          SQLITE_OK) {
    sqlite3_finalize(lab);
    return stage_sql_fail(ctx, "reading the labels stored");
  }
  int ret = STAGE_OK;
  for (int64_t c = 0; c < g->n_chunks && ret == STAGE_OK; c++) {
    if (g->chunk_in[c] != ii || !g->relabel[c]) continue;
    int64_t g0 = in->first + g->chunk_part[c] * g->chunk_size, g1 = g0 + g->chunk_size;
    if (g1 > in->first + in->n_records) g1 = in->first + in->n_records;
    for (int64_t gi = g0; gi < g1 && ret == STAGE_OK; gi++) {
      struct item it;
      struct wjob job;
      memset(&it, 0, sizeof it);
      memset(&job, 0, sizeof job);
      mol_init(&job.mol);
      if (read_record(ctx, g, gi, &it, &job, NULL) || relabel_look(ctx, in, &it, 1)) ret = STAGE_ERROR;
      int64_t id = in->key * ID_STRIDE + it.record_no;
      if (ret == STAGE_OK && !it.direct && it.kept != 2) {
        /* what it had: labels, or (kept 0) a reject for its labels, whose
         * row keeps the name the record had */
        struct label now[256];
        int n_now = 0, rejected_now = 0, rejected_then = it.kept == 0;
        const char *kind = NULL;
        char why[512];
        const char *own = "";
        char made[320];
        if (it.kept == 1)
          own = strcmp(it.stored_name, generated_name(in, it.record_no, made, sizeof made)) ? it.stored_name : "";
        sqlite3_reset(rej);
        sqlite3_bind_int64(rej, 1, id);
        if (!it.kept && sqlite3_step(rej) == SQLITE_ROW && sqlite3_column_text(rej, 0))
          snprintf(made, sizeof made, "%s", (const char *)sqlite3_column_text(rej, 0)), own = made;
        job.mol.name = strdup(own);
        rejected_now = collect_labels(in, &it, &job.mol, now, &n_now, 256, &kind, why, sizeof why) != 0;
        int changed = rejected_now != rejected_then;
        *mols |= changed;
        char these[512] = "";
        sqlite3_reset(lab);
        sqlite3_bind_int64(lab, 1, id);
        while (sqlite3_step(lab) == SQLITE_ROW) { /* stored labels gone or changed */
          const char *name = (const char *)sqlite3_column_text(lab, 0);
          double v = sqlite3_column_double(lab, 1);
          int same = 0;
          for (int k = 0; k < n_now && !rejected_now; k++)
            if (!strcmp(now[k].name, name)) same = now[k].value == v;
          if (!same && !stage_word_listed(these, name))
            snprintf(these + strlen(these), sizeof these - strlen(these), "%s%s", these[0] ? " " : "", name);
        }
        for (int k = 0; k < n_now && !rejected_now; k++) { /* labels new */
          int had = 0;
          sqlite3_reset(lab);
          sqlite3_bind_int64(lab, 1, id);
          while (sqlite3_step(lab) == SQLITE_ROW)
            had |= !strcmp((const char *)sqlite3_column_text(lab, 0), now[k].name);
          if (!had && !stage_word_listed(these, now[k].name))
            snprintf(these + strlen(these), sizeof these - strlen(these), "%s%s", these[0] ? " " : "", now[k].name);
        }
        if (these[0] || changed) {
          (*n_rec)++;
          char *copy = strdup(these), *save = NULL;
          for (char *w = copy ? strtok_r(copy, " ", &save) : NULL; w; w = strtok_r(NULL, " ", &save))
            if (!stage_word_listed(names, w)) snprintf(names + strlen(names), size - strlen(names), "%s%s", names[0] ? " " : "", w);
          free(copy);
        }
      }
      item_free(&it, &job);
    }
  }
  sqlite3_finalize(lab);
  sqlite3_finalize(rej);
  return ret;
}

/* The ledger of parts: part `part` of input `in` read under its present
 * keys, records first..last. */
static int write_part(struct stage_ctx *ctx, const struct input *in, int64_t part, int64_t first, int64_t last,
                      int64_t n_ok, int64_t n_rej) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(ctx->db,
                         "INSERT OR REPLACE INTO ingest_parts(input, part, mol_key, label_key, first_record, "
                         "last_record, n_ok, n_rejected) VALUES(?1,?2,?3,?4,?5,?6,?7,?8)",
                         -1, &st, NULL) != SQLITE_OK)
    return stage_sql_fail(ctx, "writing the part's row");
  sqlite3_bind_int64(st, 1, in->key);
  sqlite3_bind_int64(st, 2, part);
  sqlite3_bind_text(st, 3, in->part_key[part], -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 4, in->label_key, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 5, first);
  sqlite3_bind_int64(st, 6, last);
  sqlite3_bind_int64(st, 7, n_ok);
  sqlite3_bind_int64(st, 8, n_rej);
  int rc = sqlite3_step(st);
  sqlite3_finalize(st);
  return rc == SQLITE_DONE ? STAGE_OK : stage_sql_fail(ctx, "writing the part's row");
}

static int ingest_chunk(struct stage_ctx *ctx, int64_t chunk, int64_t *n_ok, int64_t *n_rej) {
  struct ingest *g = ctx->state;
  if (chunk < 0 || chunk >= g->n_chunks) return STAGE_OK;
  const struct input *cin = &g->in[g->chunk_in[chunk]];
  int64_t part = g->chunk_part[chunk];
  int64_t g0 = cin->first + part * g->chunk_size, g1 = g0 + g->chunk_size;
  if (g1 > cin->first + cin->n_records) g1 = cin->first + cin->n_records;
  int n = (int)(g1 - g0);
  int relabel = g->relabel[chunk];
  struct item *items = calloc((size_t)n + 1, sizeof *items);
  struct wjob *jobs = calloc((size_t)n + 1, sizeof *jobs);
  int ret = STAGE_ERROR, n_todo = 0;
  sqlite3_stmt *ins_mol = NULL, *ins_lab = NULL, *ins_rej = NULL;
  if (!items || !jobs) {
    free(items);
    free(jobs);
    snprintf(ctx->err, sizeof ctx->err, "out of memory for a chunk of %d records", n);
    return STAGE_ERROR;
  }
  /* The records read now must be those the plan keyed the part by: a file
   * written to or replaced since (the reader opens it again by its path)
   * would otherwise store other molecules under the planned key, which a
   * rerun of the file as planned takes for done (issue 51). */
  uint64_t key = se3_hash_bytes(SE3_HASH_INIT, &cin->how, sizeof cin->how);
  for (int i = 0; i < n; i++) {
    mol_init(&jobs[i].mol);
    if (read_record(ctx, g, g0 + i, &items[i], &jobs[i], &key)) goto out;
  }
  char now[17];
  snprintf(now, sizeof now, "%016" PRIx64, key);
  if (strcmp(now, cin->part_key[part]) != 0) {
    snprintf(ctx->err, sizeof ctx->err,
             "%s: changed since this run planned it: its part %lld (records %lld to %lld) no longer holds the "
             "records planned (the file was written to or replaced while the run read it); nothing of that part "
             "is stored. Run again once the file is as it should be: it is planned afresh from what it holds then",
             cin->path, (long long)part + 1, (long long)(n ? items[0].record_no : 0),
             (long long)(n ? items[n - 1].record_no : 0));
    goto out;
  }
  if (relabel && (ret = relabel_look(ctx, cin, items, n)) != STAGE_OK) goto out;
  ret = STAGE_ERROR;
  /* Parse what survived reading, in the worker processes. Records rejected
   * before parsing count as finished now. */
  struct wjob *packed = calloc((size_t)n + 1, sizeof *packed);
  int *where = calloc((size_t)n + 1, sizeof *where);
  if (!packed || !where) {
    free(packed);
    free(where);
    snprintf(ctx->err, sizeof ctx->err, "out of memory for a chunk of %d records", n);
    goto out;
  }
  for (int i = 0; i < n; i++) {
    if (items[i].direct || items[i].kept) continue;
    where[n_todo] = i;
    packed[n_todo] = jobs[i];
    n_todo++;
  }
  if (n - n_todo > 0) ctx->report->advance(ctx, n - n_todo);
  char err[512] = "";
  /* (the workers start with the first record to parse: a run that reads
   * labels alone starts none) */
  if (n_todo > 0 && !g->pool && !(g->pool = wpool_start(g->workers, &g->po, &g->co, err, sizeof err))) {
    free(packed);
    free(where);
    snprintf(ctx->err, sizeof ctx->err, "%s", err);
    goto out;
  }
  int rc = n_todo > 0 ? wpool_run(g->pool, packed, n_todo, g->timeout_s, ctx->stop, advance_cb, ctx, err, sizeof err)
                      : 0;
  for (int k = 0; k < n_todo; k++) jobs[where[k]] = packed[k];
  free(packed);
  free(where);
  if (rc == 1) {
    ret = STAGE_STOPPED;
    goto out;
  }
  if (rc < 0) {
    snprintf(ctx->err, sizeof ctx->err, "%s", err);
    goto out;
  }

  if (sqlite3_prepare_v2(ctx->db,
                         "INSERT INTO molecules(id, set_name, source_file, record_no, name, smiles, inchikey, "
                         "formula, n_atoms, n_heavy, charge, coords_from, chunk, mol, mol_hash, input_smiles) "
                         "VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16)",
                         -1, &ins_mol, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(ctx->db, "INSERT INTO labels(mol_id, name, value) VALUES(?1,?2,?3)", -1, &ins_lab, NULL) !=
          SQLITE_OK ||
      sqlite3_prepare_v2(ctx->db,
                         "INSERT OR REPLACE INTO rejects(stage, set_name, source_file, record_no, line, name, chunk, "
                         "reason, atom, detail, mol_id) VALUES('ingest',?1,?2,?3,?4,?5,?6,?7,?8,?9,?10)",
                         -1, &ins_rej, NULL) != SQLITE_OK) {
    ret = stage_sql_fail(ctx, "preparing inserts");
    goto out;
  }
  for (int i = 0; i < n; i++) {
    struct item *it = &items[i];
    struct wjob *j = &jobs[i];
    const struct input *in = &g->in[it->in];
    int64_t id = in->key * ID_STRIDE + it->record_no;
    struct label labels[256];
    int n_lab = 0;
    const char *kind = NULL;
    char detail[512];
    if (it->kept == 2) { /* its reject stands */
      (*n_rej)++;
      continue;
    }
    if (it->kept == 1) {
      /* The molecule stays as stored; its labels are read again, joined by
       * the name the record itself had (none when the stored one was made
       * up), from its columns, the labels_csv or the workflow. */
      char made[320];
      const char *own = strcmp(it->stored_name, generated_name(in, it->record_no, made, sizeof made)) ? it->stored_name : "";
      if (!(j->mol.name = strdup(own))) {
        snprintf(ctx->err, sizeof ctx->err, "out of memory relabelling");
        goto out;
      }
    }
    if (j->status == 0 && collect_labels(in, it, &j->mol, labels, &n_lab, 256, &kind, detail, sizeof detail) != 0 &&
        item_reject(it, j, kind, detail)) {
      snprintf(ctx->err, sizeof ctx->err, "out of memory for a reject");
      goto out;
    }
    /* (a record read again: what was stored of it before goes, unless it is kept) */
    if (relabel && forget_record(ctx, id, it->kept == 1 && j->status == 0)) goto out;
    const char *name = it->name ? it->name : j->mol.name ? j->mol.name : "";
    if (j->status != 0) {
      sqlite3_reset(ins_rej);
      sqlite3_bind_text(ins_rej, 1, in->set, -1, SQLITE_STATIC);
      sqlite3_bind_text(ins_rej, 2, in->stored, -1, SQLITE_STATIC);
      sqlite3_bind_int64(ins_rej, 3, it->record_no);
      sqlite3_bind_int64(ins_rej, 4, it->line);
      sqlite3_bind_text(ins_rej, 5, name, -1, SQLITE_STATIC);
      sqlite3_bind_int64(ins_rej, 6, chunk);
      sqlite3_bind_int64(ins_rej, 10, id);
      /* the reason alone in its column (rejects group by it); the atom
       * (NULL: none) and the specifics (NULL: none) in theirs */
      if (it->reason) {
        sqlite3_bind_text(ins_rej, 7, it->reason, -1, SQLITE_STATIC);
        sqlite3_bind_null(ins_rej, 8);
        if (it->detail)
          sqlite3_bind_text(ins_rej, 9, it->detail, -1, SQLITE_STATIC);
        else
          sqlite3_bind_null(ins_rej, 9);
      } else {
        sqlite3_bind_text(ins_rej, 7, j->why.reason[0] ? j->why.reason : "rejected (no reason given)", -1,
                          SQLITE_STATIC);
        if (j->why.atom > 0)
          sqlite3_bind_int(ins_rej, 8, j->why.atom);
        else
          sqlite3_bind_null(ins_rej, 8);
        if (j->why.detail[0])
          sqlite3_bind_text(ins_rej, 9, j->why.detail, -1, SQLITE_STATIC);
        else
          sqlite3_bind_null(ins_rej, 9);
      }
      if (sqlite3_step(ins_rej) != SQLITE_DONE) {
        ret = stage_sql_fail(ctx, "writing a reject");
        goto out;
      }
      (*n_rej)++;
      continue;
    }
    /* Every molecule has a name: one the record had no name at all gets
     * STEM:RECORD, stable across runs. Only here, for the stored name: the
     * labels above were joined by the record's own name (a made-up one
     * must never match a labels_csv row). */
    char made[320];
    if (is_blank_name(name)) name = generated_name(in, it->record_no, made, sizeof made);
    if (it->kept == 1) {
      g->n_relabelled++;
    } else {
      g->n_parsed++;
      g->n_gen3d += j->mol.coords_gen3d != 0;
    }
    uint8_t *blob = NULL;
    size_t blen = 0;
    if (it->kept != 1 && mol_to_blob(&j->mol, &blob, &blen) != 0) {
      snprintf(ctx->err, sizeof ctx->err, "out of memory encoding a molecule");
      goto out;
    }
    if (it->kept != 1) {
    sqlite3_reset(ins_mol);
    sqlite3_bind_int64(ins_mol, 1, id);
    sqlite3_bind_text(ins_mol, 2, in->set, -1, SQLITE_STATIC);
    sqlite3_bind_text(ins_mol, 3, in->stored, -1, SQLITE_STATIC);
    sqlite3_bind_int64(ins_mol, 4, it->record_no);
    sqlite3_bind_text(ins_mol, 5, name, -1, SQLITE_STATIC);
    sqlite3_bind_text(ins_mol, 6, j->mol.smiles ? j->mol.smiles : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(ins_mol, 7, j->mol.inchikey ? j->mol.inchikey : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(ins_mol, 8, j->mol.formula ? j->mol.formula : "", -1, SQLITE_STATIC);
    sqlite3_bind_int(ins_mol, 9, j->mol.n_atoms);
    sqlite3_bind_int(ins_mol, 10, mol_n_heavy(&j->mol));
    sqlite3_bind_int(ins_mol, 11, j->mol.charge);
    sqlite3_bind_text(ins_mol, 12, j->mol.coords_gen3d ? "gen3d" : "input", -1, SQLITE_STATIC);
    sqlite3_bind_int64(ins_mol, 13, chunk);
    ctx->chunk_bytes += (int64_t)blen;
    /* what the stages after this one key their rows by: the same molecule,
     * the same hash, whichever run or shard stored it */
    sqlite3_bind_int64(ins_mol, 15, (sqlite3_int64)se3_hash_bytes(SE3_HASH_INIT, blob, blen));
    sqlite3_bind_blob(ins_mol, 14, blob, (int)blen, free);
    /* a SMILES record's SMILES as written (its first word), which a table
     * of scores computed elsewhere is keyed by (stages.dock.oracle: table) */
    if ((in->fmt == MOL_FMT_SMI || in->fmt == MOL_FMT_CSV || in->fmt == MOL_FMT_TSV) && j->text) {
      size_t b = strspn(j->text, " \t"), w = strcspn(j->text + b, " \t\r\n");
      sqlite3_bind_text(ins_mol, 16, j->text + b, (int)w, SQLITE_TRANSIENT);
    } else {
      sqlite3_bind_null(ins_mol, 16);
    }
    if (sqlite3_step(ins_mol) != SQLITE_DONE) {
      ret = stage_sql_fail(ctx, "writing a molecule");
      goto out;
    }
    }
    for (int k = 0; k < n_lab; k++) {
      sqlite3_reset(ins_lab);
      sqlite3_bind_int64(ins_lab, 1, id);
      sqlite3_bind_text(ins_lab, 2, labels[k].name, -1, SQLITE_STATIC);
      sqlite3_bind_double(ins_lab, 3, labels[k].value);
      if (sqlite3_step(ins_lab) != SQLITE_DONE) {
        ret = stage_sql_fail(ctx, "writing a label");
        goto out;
      }
    }
    (*n_ok)++;
  }
  /* the part is read: under which keys, and what it holds */
  ret = write_part(ctx, cin, part, n ? items[0].record_no : 0, n ? items[n - 1].record_no : 0, *n_ok, *n_rej);
out:
  sqlite3_finalize(ins_mol);
  sqlite3_finalize(ins_lab);
  sqlite3_finalize(ins_rej);
  for (int i = 0; i < n; i++) {
    item_free(&items[i], &jobs[i]);
  }
  free(items);
  free(jobs);
  return ret;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* A non-empty input that yields no molecule is an error. Every such input
 * has reject rows (a file with no record at all got one at planning) and no
 * molecule (a duplicate reject counts as a molecule: dedupe may have run in
 * an earlier finalize). Found from the database alone, so that it works the
 * same after `merge`: files with molecules by a skip-scan over the id ranges
 * of the inputs, files with rejects by a skip-scan over the rejects' key. */
static int check_yield(struct stage_ctx *ctx) {
  char **have = NULL, *last = NULL;
  int n_have = 0, cap = 0, n_bad = 0, ret = STAGE_ERROR;
  size_t o = 0;
  char msg[sizeof ctx->err] = "";
  sqlite3_stmt *q = NULL, *f = NULL, *c = NULL;
  if (sqlite3_prepare_v2(ctx->db, "SELECT id, source_file FROM molecules WHERE id >= ?1 ORDER BY id LIMIT 1", -1, &q,
                         NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(ctx->db,
                         "SELECT source_file FROM rejects WHERE stage='ingest' AND source_file > ?1 "
                         "ORDER BY source_file LIMIT 1",
                         -1, &f, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(ctx->db,
                         "SELECT count(*), coalesce(sum(reason LIKE 'duplicate of molecule %'), 0), "
                         "(SELECT record_no || ': ' || reason || coalesce(': ' || detail, '') FROM rejects "
                         "WHERE stage='ingest' AND source_file=?1 "
                         "ORDER BY record_no LIMIT 1) FROM rejects WHERE stage='ingest' AND source_file=?1",
                         -1, &c, NULL) != SQLITE_OK) {
    ret = stage_sql_fail(ctx, "checking that every input gave molecules");
    goto out;
  }
  for (int64_t from = 0;;) {
    sqlite3_bind_int64(q, 1, from);
    int rc = sqlite3_step(q);
    if (rc != SQLITE_ROW) {
      if (rc != SQLITE_DONE) {
        ret = stage_sql_fail(ctx, "listing the inputs with molecules");
        goto out;
      }
      break;
    }
    int64_t id = sqlite3_column_int64(q, 0);
    if (n_have == cap) {
      cap = cap ? cap * 2 : 64;
      char **h = realloc(have, (size_t)cap * sizeof *have);
      if (!h) goto oom;
      have = h;
    }
    if (!(have[n_have] = strdup((const char *)sqlite3_column_text(q, 1)))) goto oom;
    n_have++;
    sqlite3_reset(q);
    from = (id / ID_STRIDE + 1) * ID_STRIDE;
  }
  if (n_have) qsort(have, (size_t)n_have, sizeof *have, cmp_str);
  if (!(last = strdup(""))) goto oom;
  for (;;) {
    sqlite3_bind_text(f, 1, last, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(f);
    if (rc != SQLITE_ROW) {
      if (rc != SQLITE_DONE) {
        ret = stage_sql_fail(ctx, "listing the inputs with rejects");
        goto out;
      }
      break;
    }
    free(last);
    if (!(last = strdup((const char *)sqlite3_column_text(f, 0)))) goto oom;
    sqlite3_reset(f);
    if (n_have && bsearch(&last, have, (size_t)n_have, sizeof *have, cmp_str)) continue;
    sqlite3_bind_text(c, 1, last, -1, SQLITE_TRANSIENT);
    if (sqlite3_step(c) != SQLITE_ROW) {
      ret = stage_sql_fail(ctx, "counting an input's rejects");
      goto out;
    }
    long long n_rej = sqlite3_column_int64(c, 0), n_dup = sqlite3_column_int64(c, 1);
    const char *first = (const char *)sqlite3_column_text(c, 2);
    if (n_dup == 0 && o < sizeof msg - 80) {
      o += (size_t)snprintf(msg + o, sizeof msg - o, "%s%s (%lld record%s rejected; record %.200s)", n_bad ? "; " : "",
                            last, n_rej, n_rej == 1 ? "" : "s", first ? first : "?");
      if (o >= sizeof msg) o = sizeof msg - 1;
    }
    if (n_dup == 0) n_bad++;
    sqlite3_reset(c);
  }
  if (n_bad == 0) {
    ret = STAGE_OK;
  } else {
    snprintf(ctx->err, sizeof ctx->err,
             "%d non-empty input%s yielded no molecule, an error (the rejects table lists every reason; fix or "
             "remove %s): %.880s",
             n_bad, n_bad == 1 ? "" : "s", n_bad == 1 ? "it" : "them", msg);
  }
  goto out;
oom:
  snprintf(ctx->err, sizeof ctx->err, "out of memory checking the inputs");
out:
  sqlite3_finalize(q);
  sqlite3_finalize(f);
  sqlite3_finalize(c);
  for (int i = 0; i < n_have; i++)
    free(have[i]);
  free(have);
  free(last);
  return ret;
}

/* Every non-empty input gave a molecule; then set-wide dedupe, decided
 * afresh from what is stored: of each set's molecules with the same key,
 * the first in the workflow's order (its file's place, then its record)
 * stays, and the others are listed in `duplicates` (the stages after ingest
 * leave them out) and get a reject row saying which one they repeat. Their
 * rows stay: a file added ahead of them, or removed, changes the choice
 * without reading any molecule again. */
static int ingest_finalize(struct stage_ctx *ctx) {
  if (check_yield(ctx) != STAGE_OK) return STAGE_ERROR;
  const char *mode = cfg_str(ctx->cfg, "dedupe", "none");
  const char *col = !strcmp(mode, "smiles") ? "smiles" : "inchikey";
  char *sql = sqlite3_mprintf(
      "DELETE FROM rejects WHERE stage='ingest' AND mol_id IN (SELECT mol_id FROM duplicates);"
      "DELETE FROM duplicates;"
      "INSERT INTO duplicates(mol_id, of_id, by) SELECT id, keep, %Q FROM ("
      "  SELECT m.id, first_value(m.id) OVER w AS keep, row_number() OVER w AS n "
      "  FROM molecules m JOIN ingest_files f ON f.input = m.id / %lld "
      "  WHERE %d AND (SELECT count(*) FROM molecules d WHERE d.set_name = m.set_name AND d.\"%w\" = m.\"%w\") > 1 "
      "  WINDOW w AS (PARTITION BY m.set_name, m.\"%w\" ORDER BY f.position, m.record_no, m.id)) WHERE n > 1;"
      "INSERT OR REPLACE INTO rejects(stage, set_name, source_file, record_no, line, name, chunk, reason, mol_id) "
      "  SELECT 'ingest', m.set_name, m.source_file, m.record_no, NULL, m.name, m.chunk, "
      "  'duplicate of molecule ' || k.id || ' (' || k.source_file || ' record ' || k.record_no || ') by %s', m.id "
      "  FROM duplicates d JOIN molecules m ON m.id = d.mol_id JOIN molecules k ON k.id = d.of_id;",
      col, ID_STRIDE, strcmp(mode, "none") != 0, col, col, col, mode);
  char *msg = NULL;
  int rc = sqlite3_exec(ctx->db, sql, NULL, NULL, &msg);
  sqlite3_free(sql);
  if (rc != SQLITE_OK) {
    snprintf(ctx->err, sizeof ctx->err, "dedupe: %s", msg ? msg : sqlite3_errmsg(ctx->db));
    sqlite3_free(msg);
    return STAGE_ERROR;
  }
  return STAGE_OK;
}

/* "; N parser processes" for the log line of ingest's end */
static const char *workers_said(const struct ingest *g) {
  static char said[64];
  snprintf(said, sizeof said, "; %d parser process%s", g->workers, g->workers == 1 ? "" : "es");
  return said;
}

static void ingest_end(struct stage_ctx *ctx) {
  struct ingest *g = ctx->state;
  /* what the chunks of this run read: molecules parsed (and generated in
   * 3D), or only their labels */
  if (g && (g->n_parsed || g->n_relabelled))
    ctx->report->log(ctx, "%lld molecule%s parsed (%lld with 3D coordinates generated), %lld with only "
                          "their labels read again%s",
                     (long long)g->n_parsed, g->n_parsed == 1 ? "" : "s", (long long)g->n_gen3d,
                     (long long)g->n_relabelled, g->pool ? workers_said(g) : "");
  ingest_free(g);
  ctx->state = NULL;
}

/* Deletes from main what ingest stored of an input `plan` does not have as
 * it is now (a table of input and mol_key: this run's plan, or a shard's
 * ingest_files): an input gone, or one now read from other contents or in
 * another way; and what a database of an earlier se3screen holds, whose
 * ids went by the input's place (molecules and rejects of an input with no
 * part listed). Counts the rows into *n. 0, or -1 with err set. */
static int delete_stale(sqlite3 *db, const char *plan, int64_t *n, char *err, size_t errlen) {
  int64_t *keys = NULL, before = sqlite3_total_changes64(db);
  int n_keys = 0, cap = 0, ret = -1;
  sqlite3_stmt *q = NULL;
  /* the parts read from other contents, or of files or parts gone: their
   * records' rows (a file gone loses every part, and then its key) */
  char *sql = sqlite3_mprintf(
      "SELECT p.input, p.part, p.first_record, p.last_record FROM main.ingest_parts p WHERE NOT EXISTS (SELECT 1 "
      "FROM %s q WHERE q.input = p.input AND q.part = p.part AND q.mol_key = p.mol_key)",
      plan);
  int rc = sql ? sqlite3_prepare_v2(db, sql, -1, &q, NULL) : SQLITE_NOMEM;
  sqlite3_free(sql);
  char *del = sqlite3_mprintf("%s", "");
  while (rc == SQLITE_OK && del && (rc = sqlite3_step(q)) == SQLITE_ROW) {
    long long key = sqlite3_column_int64(q, 0), part = sqlite3_column_int64(q, 1),
              lo = key * ID_STRIDE + sqlite3_column_int64(q, 2), hi = key * ID_STRIDE + sqlite3_column_int64(q, 3);
    del = sqlite3_mprintf("%z DELETE FROM main.labels WHERE mol_id BETWEEN %lld AND %lld;"
                          "DELETE FROM main.duplicates WHERE mol_id BETWEEN %lld AND %lld;"
                          "DELETE FROM main.molecules WHERE id BETWEEN %lld AND %lld;"
                          "DELETE FROM main.rejects WHERE stage = 'ingest' AND mol_id BETWEEN %lld AND %lld;"
                          "DELETE FROM main.ingest_parts WHERE input = %lld AND part = %lld;",
                          del, lo, hi, lo, hi, lo, hi, lo, hi, key, part);
    rc = SQLITE_OK;
  }
  sqlite3_finalize(q);
  q = NULL;
  char *msg0 = NULL;
  if (rc == SQLITE_DONE) rc = del ? sqlite3_exec(db, del, NULL, NULL, &msg0) : SQLITE_NOMEM;
  sqlite3_free(del);
  if (rc != SQLITE_OK) {
    snprintf(err, errlen, "deleting the parts of inputs changed or gone: %s", msg0 ? msg0 : sqlite3_errstr(rc));
    sqlite3_free(msg0);
    return -1;
  }
  /* the keys of rows no part covers: a database of an earlier se3screen
   * (ids by the input's place) */
  sql = sqlite3_mprintf("SELECT DISTINCT mol_id / %lld FROM main.rejects WHERE stage = 'ingest' AND mol_id IS NOT "
                        "NULL AND NOT EXISTS (SELECT 1 FROM main.ingest_parts p WHERE p.input = mol_id / %lld)",
                        ID_STRIDE, ID_STRIDE);
  rc = sql ? sqlite3_prepare_v2(db, sql, -1, &q, NULL) : SQLITE_NOMEM;
  sqlite3_free(sql);
  while (rc == SQLITE_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) {
    if (n_keys == cap) {
      cap = cap ? 2 * cap : 16;
      int64_t *k = realloc(keys, sizeof *keys * (size_t)cap);
      if (!k) {
        rc = SQLITE_NOMEM;
        break;
      }
      keys = k;
    }
    keys[n_keys++] = sqlite3_column_int64(q, 0);
    rc = SQLITE_OK;
  }
  sqlite3_finalize(q);
  q = NULL;
  if (rc != SQLITE_DONE) goto fail;
  /* the molecules' inputs with no part: a skip over the id ranges */
  rc = sqlite3_prepare_v2(db, "SELECT id FROM main.molecules WHERE id >= ?1 ORDER BY id LIMIT 1", -1, &q, NULL);
  for (int64_t from = 0; rc == SQLITE_OK;) {
    sqlite3_reset(q);
    sqlite3_bind_int64(q, 1, from);
    if ((rc = sqlite3_step(q)) != SQLITE_ROW) break;
    int64_t k = sqlite3_column_int64(q, 0) / ID_STRIDE;
    from = (k + 1) * ID_STRIDE;
    rc = SQLITE_OK;
    int listed = 0;
    for (int i = 0; i < n_keys && !listed; i++)
      listed = keys[i] == k;
    char *has = sqlite3_mprintf("SELECT count(*) FROM main.ingest_parts WHERE input = %lld", (long long)k);
    sqlite3_stmt *h = NULL;
    int parts = 0;
    if (has && sqlite3_prepare_v2(db, has, -1, &h, NULL) == SQLITE_OK && sqlite3_step(h) == SQLITE_ROW)
      parts = sqlite3_column_int(h, 0);
    else
      rc = SQLITE_ERROR;
    sqlite3_finalize(h);
    sqlite3_free(has);
    if (listed || parts || rc != SQLITE_OK) continue;
    if (n_keys == cap) {
      cap = cap ? 2 * cap : 16;
      int64_t *kk = realloc(keys, sizeof *keys * (size_t)cap);
      if (!kk) {
        rc = SQLITE_NOMEM;
        break;
      }
      keys = kk;
    }
    keys[n_keys++] = k;
  }
  sqlite3_finalize(q);
  if (rc != SQLITE_DONE) goto fail;
  sql = sqlite3_mprintf("DELETE FROM main.rejects WHERE stage = 'ingest' AND mol_id IS NULL;");
  for (int i = 0; i < n_keys && sql; i++) {
    long long lo = keys[i] * ID_STRIDE, hi = lo + ID_STRIDE - 1;
    sql = sqlite3_mprintf("%z DELETE FROM main.labels WHERE mol_id BETWEEN %lld AND %lld;"
                          "DELETE FROM main.duplicates WHERE mol_id BETWEEN %lld AND %lld;"
                          "DELETE FROM main.molecules WHERE id BETWEEN %lld AND %lld;"
                          "DELETE FROM main.rejects WHERE stage = 'ingest' AND mol_id BETWEEN %lld AND %lld;"
                          "DELETE FROM main.ingest_parts WHERE input = %lld;",
                          sql, lo, hi, lo, hi, lo, hi, lo, hi, (long long)keys[i]);
  }
  char *msg = NULL;
  rc = sql ? sqlite3_exec(db, sql, NULL, NULL, &msg) : SQLITE_NOMEM;
  sqlite3_free(sql);
  if (rc != SQLITE_OK) {
    snprintf(err, errlen, "deleting the molecules of inputs gone or changed: %s", msg ? msg : sqlite3_errstr(rc));
    sqlite3_free(msg);
    free(keys);
    return -1;
  }
  *n = sqlite3_total_changes64(db) - before;
  ret = 0;
  free(keys);
  return ret;
fail:
  snprintf(err, errlen, "finding the inputs gone or changed: %s", rc == SQLITE_NOMEM ? "out of memory" : sqlite3_errmsg(db));
  free(keys);
  return -1;
}

/* ingest_files' row of input `in` (st: its INSERT, prepared with
 * FILE_ROW_SQL). SQLITE_DONE, or SQLite's error. */
#define FILE_ROW_SQL                                                                                                   \
  "INSERT OR REPLACE INTO main.ingest_files(input, position, set_name, source_file, mol_key, label_key, n_records, "  \
  "n_parts) VALUES(?1,?2,?3,?4,?5,?6,?7,?8)"
static int file_row(sqlite3_stmt *st, const struct input *in) {
  sqlite3_reset(st);
  sqlite3_bind_int64(st, 1, in->key);
  sqlite3_bind_int(st, 2, in->position);
  sqlite3_bind_text(st, 3, in->set, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 4, in->stored, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 5, in->mol_key, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 6, in->label_key, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 7, in->n_records);
  sqlite3_bind_int64(st, 8, in->n_parts);
  return sqlite3_step(st);
}

/* Before the chunks, inside the runner's transaction: what is stored of
 * inputs gone or changed goes (not in a shard: `merge` does it there, from
 * the shard's plan), and ingest_files becomes this plan. */
static int ingest_prune(struct stage_ctx *ctx, int64_t *n) {
  struct ingest *g = ctx->state;
  *n = 0;
  plan_say(ctx, g); /* (before ingest_files becomes this plan: it tells the files gone) */
  char *msg = NULL;
  if (sqlite3_exec(ctx->db, "DELETE FROM main.ingest_plan; DELETE FROM main.ingest_files", NULL, NULL, &msg) !=
      SQLITE_OK) {
    snprintf(ctx->err, sizeof ctx->err, "planning: %s", msg ? msg : sqlite3_errmsg(ctx->db));
    sqlite3_free(msg);
    return STAGE_ERROR;
  }
  sqlite3_stmt *p = NULL, *f = NULL;
  if (sqlite3_prepare_v2(ctx->db, "INSERT OR REPLACE INTO main.ingest_plan(input, part, mol_key) VALUES(?1, ?2, ?3)",
                         -1, &p, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(ctx->db, FILE_ROW_SQL, -1, &f, NULL) != SQLITE_OK) {
    sqlite3_finalize(p);
    return stage_sql_fail(ctx, "planning");
  }
  int ret = STAGE_OK;
  for (int i = 0; i < g->n_in && ret == STAGE_OK; i++) {
    const struct input *in = &g->in[i];
    for (int64_t k = 0; k < in->n_parts && ret == STAGE_OK; k++) {
      sqlite3_reset(p);
      sqlite3_bind_int64(p, 1, in->key);
      sqlite3_bind_int64(p, 2, k);
      sqlite3_bind_text(p, 3, in->part_key[k], -1, SQLITE_STATIC);
      if (sqlite3_step(p) != SQLITE_DONE) ret = stage_sql_fail(ctx, "planning");
    }
    if (ret == STAGE_OK && file_row(f, in) != SQLITE_DONE) ret = stage_sql_fail(ctx, "planning");
  }
  sqlite3_finalize(p);
  sqlite3_finalize(f);
  if (ret == STAGE_OK && !strcmp(ctx->src, "main") &&
      delete_stale(ctx->db, "main.ingest_plan", n, ctx->err, sizeof ctx->err))
    ret = STAGE_ERROR;
  return ret;
}

/* merge of a shard: what screen.db holds of inputs the shard's plan has
 * gone or changed, and of the parts the shard read (their records), goes
 * before the shard's rows are copied in. */
static int ingest_fold(struct stage_fold *f) {
  int64_t n = 0;
  if (delete_stale(f->db, "shard.ingest_plan", &n, f->err, sizeof f->err)) return -1;
  sqlite3_stmt *q = NULL;
  char *sql = sqlite3_mprintf("DELETE FROM main.ingest_files; DELETE FROM main.ingest_plan;");
  int rc = sqlite3_prepare_v2(f->db, "SELECT input, first_record, last_record FROM shard.ingest_parts", -1, &q, NULL);
  while (rc == SQLITE_OK && sql && (rc = sqlite3_step(q)) == SQLITE_ROW) {
    long long base = sqlite3_column_int64(q, 0) * ID_STRIDE, lo = base + sqlite3_column_int64(q, 1),
              hi = base + sqlite3_column_int64(q, 2);
    sql = sqlite3_mprintf("%z DELETE FROM main.labels WHERE mol_id BETWEEN %lld AND %lld;"
                          "DELETE FROM main.molecules WHERE id BETWEEN %lld AND %lld;"
                          "DELETE FROM main.rejects WHERE stage = 'ingest' AND mol_id BETWEEN %lld AND %lld;",
                          sql, lo, hi, lo, hi, lo, hi);
    rc = SQLITE_OK;
  }
  sqlite3_finalize(q);
  char *msg = NULL;
  if (rc == SQLITE_DONE) rc = sql ? sqlite3_exec(f->db, sql, NULL, NULL, &msg) : SQLITE_NOMEM;
  sqlite3_free(sql);
  if (rc != SQLITE_OK) {
    snprintf(f->err, sizeof f->err, "ingest: replacing the parts a shard read: %s", msg ? msg : sqlite3_errmsg(f->db));
    sqlite3_free(msg);
    return -1;
  }
  return 0; /* then every row of the shard is copied */
}

/* merge: a shard's hash folds in the inputs' fingerprint (their mol_key
 * and label_key), which begin plans */
static int ingest_merge_hash(const struct cfg_node *root) {
  (void)root;
  return STAGE_HASH_FILES;
}

/* `se3screen upgrade` of a database of an earlier se3screen (schema < 9),
 * whose ids went by the input's place (key = place + 1) and whose ingest
 * hash folded its inputs' fingerprint: *legacy is that fingerprint for the
 * files as they are now (each molecule file's path and contents, then its
 * labels_csv's). write: the caller found the stage current under it, so the
 * files are those the stored molecules came from: each input keeps its
 * place's key (ingest_files), its parts are listed as read under their
 * present keys (ingest_parts), and its rejects name their would-be ids,
 * so that the next run reads nothing again. An input with a molecule that
 * the earlier dedupe deleted (now kept, and listed in `duplicates`) is
 * left to be read again: its rows go. note: what was done, in words. */
static int ingest_upgrade(struct stage_ctx *ctx, int write, uint64_t *legacy, char *note, size_t size) {
  struct ingest *g = ctx->state;
  uint64_t h = SE3_HASH_INIT;
  for (int i = 0; i < g->n_in; i++) {
    const struct input *in = &g->in[i];
    if (in->content_ok) {
      h = se3_hash_str(h, in->path);
      h = se3_hash_bytes(h, &in->content, sizeof in->content);
    }
    if (in->side) {
      h = se3_hash_str(h, in->side->path);
      h = se3_hash_bytes(h, &in->side_content, sizeof in->side_content);
    }
  }
  *legacy = h;
  note[0] = 0;
  if (!write) return STAGE_OK;
  int64_t kept = 0, again = 0;
  sqlite3_stmt *dup = NULL, *file = NULL;
  char *sql = NULL;
  if (sqlite3_prepare_v2(ctx->db,
                         "SELECT count(*) FROM rejects WHERE stage='ingest' AND set_name=?1 AND source_file=?2 AND "
                         "reason LIKE 'duplicate of molecule %'",
                         -1, &dup, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(ctx->db, FILE_ROW_SQL, -1, &file, NULL) != SQLITE_OK) {
    sqlite3_finalize(dup);
    return stage_sql_fail(ctx, "upgrading ingest");
  }
  int ret = STAGE_OK;
  for (int i = 0; i < g->n_in && ret == STAGE_OK; i++) {
    struct input *in = &g->in[i];
    in->key = i + 1; /* (the id an earlier se3screen gave: its place + 1) */
    long long lo = in->key * ID_STRIDE, hi = lo + ID_STRIDE - 1;
    sqlite3_reset(dup);
    sqlite3_bind_text(dup, 1, in->set, -1, SQLITE_STATIC);
    sqlite3_bind_text(dup, 2, in->stored, -1, SQLITE_STATIC);
    if (file_row(file, in) != SQLITE_DONE || sqlite3_step(dup) != SQLITE_ROW) {
      ret = stage_sql_fail(ctx, "upgrading ingest");
      break;
    }
    /* its rejects name the ids their records would have had */
    sql = sqlite3_mprintf("UPDATE rejects SET mol_id = %lld + record_no WHERE stage='ingest' AND set_name=%Q AND "
                          "source_file=%Q AND mol_id IS NULL;",
                          lo, in->set, in->stored);
    if (sqlite3_column_int64(dup, 0) > 0) { /* read again by the next run */
      sql = sqlite3_mprintf("%z DELETE FROM labels WHERE mol_id BETWEEN %lld AND %lld; DELETE FROM molecules WHERE id "
                            "BETWEEN %lld AND %lld; DELETE FROM rejects WHERE stage='ingest' AND mol_id BETWEEN %lld "
                            "AND %lld;",
                            sql, lo, hi, lo, hi, lo, hi);
      again++;
    } else {
      for (int64_t k = 0; k < in->n_parts && sql; k++) {
        int64_t i0 = in->first + k * g->chunk_size, i1 = i0 + g->chunk_size - 1;
        if (i1 > in->first + in->n_records - 1) i1 = in->first + in->n_records - 1;
        int64_t rec[2] = {0, 0};
        for (int e = 0; e < 2; e++) { /* the part's first and last records, as the reader numbers them */
          struct item it;
          struct wjob job;
          memset(&it, 0, sizeof it);
          memset(&job, 0, sizeof job);
          mol_init(&job.mol);
          int bad = read_record(ctx, g, e ? i1 : i0, &it, &job, NULL);
          rec[e] = it.record_no;
          item_free(&it, &job);
          if (bad) {
            sqlite3_free(sql);
            sqlite3_finalize(dup);
            sqlite3_finalize(file);
            return STAGE_ERROR;
          }
        }
        sql = sqlite3_mprintf(
            "%z INSERT OR REPLACE INTO ingest_parts(input, part, mol_key, label_key, first_record, last_record, "
            "n_ok, n_rejected) VALUES(%lld, %lld, %Q, %Q, %lld, %lld, (SELECT count(*) FROM molecules WHERE id "
            "BETWEEN %lld AND %lld), (SELECT count(*) FROM rejects WHERE stage='ingest' AND mol_id BETWEEN %lld AND "
            "%lld));",
            sql, (long long)in->key, (long long)k, in->part_key[k], in->label_key, (long long)rec[0], (long long)rec[1],
            lo + rec[0], lo + rec[1], lo + rec[0], lo + rec[1]);
      }
      kept++;
    }
    char *msg = NULL;
    if (!sql || sqlite3_exec(ctx->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
      snprintf(ctx->err, sizeof ctx->err, "upgrading ingest: %s", msg ? msg : "out of memory");
      sqlite3_free(msg);
      ret = STAGE_ERROR;
    }
    sqlite3_free(sql);
    sql = NULL;
  }
  sqlite3_finalize(dup);
  sqlite3_finalize(file);
  if (ret == STAGE_OK)
    snprintf(note, size, "%lld input file%s kept as read%s", (long long)kept, kept == 1 ? "" : "s",
             again ? "; files whose duplicates the earlier dedupe deleted are read again by the next run" : "");
  return ret;
}

const struct stage stage_ingest = {
    .name = "ingest",
    .tables = "duplicates labels ingest_parts ingest_plan ingest_files molecules", /* (status counts the last) */
    .blob_column = "mol",
    .uses_sets = 1,
    .begin = ingest_begin,
    .run_chunk = ingest_chunk,
    .finalize = ingest_finalize,
    .end = ingest_end,
    .merge_hash = ingest_merge_hash,
    .content_per_row = 1, /* molecules.mol_hash */
    .keyed = stage_keyed_always, /* by input file: ingest_files, ingest_parts */
    .prune = ingest_prune,
    .fold = ingest_fold,
    .explain = ingest_explain,
    .upgrade = ingest_upgrade,
};
