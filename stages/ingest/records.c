/* records.c — a chunk's records read again from its file (by path; one
 * reader stays open from one chunk of a file to the next), each folded
 * into a key as planning folded it, so that a part whose file changed since
 * the plan is refused instead of stored under the planned key; and what
 * each record holds until its rows are written. */
#include "internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What ingest_read_record (and ingest_relabel_look) allocated for one record. */
void ingest_item_free(struct item *it, struct wjob *job) {
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
int ingest_item_reject(struct item *it, struct wjob *job, const char *reason, const char *detail) {
  job->status = 1;
  free(it->reason);
  free(it->detail);
  it->reason = strdup(reason);
  it->detail = detail ? strdup(detail) : NULL;
  return it->reason && (!detail || it->detail) ? 0 : -1;
}

/* Read global record gi into *it and *job, and (key not NULL) fold it into
 * *key as ingest_part_keys folded it. 0 ok, -1 error (ctx->err). */
int ingest_read_record(struct stage_ctx *ctx, struct ingest *g, int64_t gi, struct item *it, struct wjob *job,
                       uint64_t *key) {
  int lo = 0, hi = g->n_in - 1;
  while (lo < hi) { /* last input with first <= gi */
    int mid = (lo + hi + 1) / 2;
    if (g->in[mid].first <= gi)
      lo = mid;
    else
      hi = mid - 1;
  }
  while (lo < g->n_in - 1 && g->in[lo].n_records == 0)
    lo++;
  struct input *in = &g->in[lo];
  int64_t want = gi - in->first + 1;
  if (in->file_error) {
    if (key) *key = ingest_hash_unlisted(*key, in);
    it->in = lo;
    it->record_no = 0;
    it->direct = 1;
    job->format = rec_format_ob(in->fmt);
    if (ingest_item_reject(it, job, in->file_error, NULL)) goto oom;
    return 0;
  }
  if (in->st.n_unlisted > 0 && want == in->n_records) {
    /* The input's last item: one row for the empty records not listed. */
    if (key) *key = ingest_hash_unlisted(*key, in);
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
    if (ingest_item_reject(it, job, why, NULL)) goto oom;
    return 0;
  }
  if (g->rd_in != lo || g->rd_next > want) {
    if (g->rd) rec_close(g->rd);
    g->rd = rec_open(in->path, in->fmt, &in->ropt, &ctx->err);
    if (!g->rd) {
      g->rd_in = -1;
      return -1;
    }
    g->rd_in = lo;
    g->rd_next = 1;
  }
  struct rec r;
  for (;;) {
    int rc = rec_next(g->rd, &r, &ctx->err);
    if (rc < 0) return -1;
    if (rc == 0) {
      se3_error_set(&ctx->err, SE3_ERR_INPUT, "fewer records than when the run was planned (was the file changed?)");
      se3_error_at(&ctx->err, in->path, 0, 0);
      return -1;
    }
    if (g->rd_next++ == want) break; /* the want-th record handed out (numbers skip unlisted empty ones) */
  }
  if (key) *key = ingest_hash_record(*key, &r);
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
    if (ingest_item_reject(it, job, r.error, NULL)) goto oom;
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
  se3_error_set(&ctx->err, SE3_ERR_MEMORY, "%s: out of memory reading record %lld", in->path, (long long)it->record_no);
  return -1;
}

/* A chunk's first step: part `part` of input cin (global records g0 on, n
 * of them) read into items and jobs, and checked against the key the plan
 * gave the part. The records read now must be those the plan keyed the part
 * by: a file written to or replaced since (the reader opens it again by its
 * path) would otherwise store other molecules under the planned key, which
 * a rerun of the file as planned takes for done (issue 51). STAGE_OK, or
 * STAGE_ERROR with ctx->err. */
int ingest_read_part(struct stage_ctx *ctx, struct ingest *g, const struct input *cin, int64_t part, int64_t g0,
                     struct item *items, struct wjob *jobs, int n) {
  uint64_t key = se3_hash_bytes(SE3_HASH_INIT, &cin->how, sizeof cin->how);
  for (int i = 0; i < n; i++) {
    mol_init(&jobs[i].mol);
    if (ingest_read_record(ctx, g, g0 + i, &items[i], &jobs[i], &key)) return STAGE_ERROR;
  }
  char now[17];
  snprintf(now, sizeof now, "%016" PRIx64, key);
  if (strcmp(now, cin->part_key[part]) != 0) {
    se3_error_set(&ctx->err, SE3_ERR_INPUT,
                  "%s: changed since this run planned it: its part %lld (records %lld to %lld) no longer holds the "
                  "records planned (the file was written to or replaced while the run read it); nothing of that part "
                  "is stored. Run again once the file is as it should be: it is planned afresh from what it holds then",
                  cin->path, (long long)part + 1, (long long)(n ? items[0].record_no : 0),
                  (long long)(n ? items[n - 1].record_no : 0));
    return STAGE_ERROR;
  }
  return STAGE_OK;
}
