/* labels_csv.c — a labels_csv: a table of labels beside a molecule file,
 * joined to its records by their order or by a column of names. Planning
 * reads it whole and once, from a sealed copy of its bytes, so that the
 * rows parsed and the hash that keys them come from the same contents. */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/workdir.h"

static int cmp_key(const void *a, const void *b, void *keys) {
  char **k = keys;
  return strcmp(k[*(const int *)a], k[*(const int *)b]);
}

void ingest_side_free(struct side_csv *s) {
  if (!s) return;
  for (int r = 0; r < s->n_rows; r++) {
    for (int c = 0; c < s->n_cols; c++)
      free(s->rows[r][c]);
    free(s->rows[r]);
    if (s->row_error) free(s->row_error[r]);
  }
  free(s->lines);
  free(s->row_error);
  for (int c = 0; c < s->n_cols; c++)
    free(s->header[c]);
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
 * *sb the file as it was opened; or -1 with err at the file. */
static int snapshot_file(const char *path, struct stat *sb, uint64_t *content, struct se3_error *err) {
  int fd = -1, copy = -1;
  if (stage_file_open(path, &fd, err) != 0) return -1;
  if (fstat(fd, sb) != 0) {
    se3_error_set(err, SE3_ERR_IO, "cannot open: %s", strerror(errno));
    se3_error_at(err, path, 0, 0);
  } else if ((copy = memfd_create("se3screen-input", MFD_CLOEXEC | MFD_ALLOW_SEALING)) < 0) {
    se3_error_set(err, SE3_ERR_IO, "cannot take a copy to read it once: %s", strerror(errno));
    se3_error_at(err, path, 0, 0);
  } else if (stage_fd_copy_fd(fd, copy, content, err) != 0) {
    se3_error_at(err, path, 0, 0);
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
static struct rec_reader *snapshot_reader(int copy, const char *path, const struct rec_options *ro,
                                          struct se3_error *err) {
  return rec_open_fd(fcntl(copy, F_DUPFD_CLOEXEC, 0), path, MOL_FMT_CSV, ro, err);
}

static int side_parse(struct stage_ctx *ctx, const struct cfg_node *n, int copy, struct side_csv **out);

int ingest_side_load(struct stage_ctx *ctx, const struct cfg_node *n, struct side_csv **out) {
  const char *path = cfg_str(n, "path"); /* (required: there whenever labels_csv is) */
  if (rec_check_regular(path, &ctx->err) != 0) return stage_error_at(ctx, cfg_get(n, "path"), "labels_csv");
  if (workdir_check_input(ctx->workdir, path, &ctx->err) != 0)
    return stage_error_at(ctx, cfg_get(n, "path"), "labels_csv");
  struct stat sb;
  uint64_t content = 0;
  int copy = snapshot_file(path, &sb, &content, &ctx->err);
  if (copy < 0) return stage_error_at(ctx, cfg_get(n, "path"), "labels_csv");
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
  const char *path = cfg_str(n, "path"); /* (required: there whenever labels_csv is) */
  const char *join = cfg_str(n, "join");
  struct rec_options ro = {0};
  /* The reader wants a SMILES column: give it any column; we only use fields. */
  struct rec_reader *rd = snapshot_reader(copy, path, &ro, NULL);
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
    rd = snapshot_reader(copy, path, &ro, &ctx->err);
    if (!rd) return stage_error_at(ctx, cfg_get(n, "path"), "labels_csv");
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
      ingest_side_free(s);
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
        ingest_side_free(s);
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
  struct se3_error e2;
  while ((rc = rec_next(rd, &r, &e2)) == 1) {
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
    s->rows[s->n_rows++] = row; /* ingest_side_free frees what is filled */
    if (r.error && !(s->row_error[s->n_rows - 1] = strdup(r.error))) goto oom_open;
    for (int c = 0; c < s->n_cols; c++)
      if (!(row[c] = strdup(r.fields && c < r.n_fields ? r.fields[c] : ""))) goto oom_open;
  }
  rec_close(rd);
  if (rc < 0) {
    ingest_side_free(s);
    return stage_fail_at(ctx, cfg_get(n, "path"), "labels_csv: %s", se3_error_str(&e2).s);
  }
  if (s->join_col >= 0) {
    s->keys = calloc((size_t)s->n_rows + 1, sizeof *s->keys);
    s->key_row = calloc((size_t)s->n_rows + 1, sizeof *s->key_row);
    if (!s->keys || !s->key_row) {
      ingest_side_free(s);
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
  ingest_side_free(s);
  return stage_fail_at(ctx, cfg_get(n, "path"), "labels_csv: out of memory reading %s", path);
}

/* Row of the side CSV for a record, or -1. */
int ingest_side_row(const struct side_csv *s, int64_t record_no, const char *name) {
  if (s->join_col < 0) return record_no >= 1 && record_no <= s->n_rows ? (int)(record_no - 1) : -1;
  if (!name) return -1;
  int lo = 0, hi = s->n_rows - 1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2;
    int c = strcmp(s->keys[s->key_row[mid]], name);
    if (c == 0) return s->key_row[mid];
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid - 1;
  }
  return -1;
}
