/* labels.c — a record's labels: constants from the workflow, columns of its
 * own file, SD tags, or a row of its labels_csv; the STEM:RECORD name of a
 * record that has none; and relabelling, for a part whose labels alone
 * changed: what is kept of each record, and for `run --dry-run` what its
 * labels would change. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Parse a label value; 0 ok, 1 missing (empty), -1 unparseable (why says
 * why). Decimal numbers only: strtod read 0x10 as 16 (chem/records.h). */
static int parse_label(const char *s, double *v, char *why, size_t whylen) {
  return rec_parse_label(s, v, why, whylen);
}

/* Collect the labels of a record; 0 ok, 1 rejected: *kind the reason (one
 * text per kind, so that rejects group by it), the specifics in detail. */
int ingest_collect_labels(const struct input *in, const struct item *it, const struct mol *m, struct label *out,
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
        snprintf(reason, rlen,
                 "label '%s': cannot read '%.60s' as a number (%s, record %lld at line %lld, SD tag "
                 "'%s'): %s",
                 name, val, in->stored, (long long)it->record_no, (long long)it->line, name, why);
        return 1;
      }
      if (rc == 0) out[(*n_out)++] = (struct label){name, v};
    }
  }
  if (in->side) {
    const struct side_csv *s = in->side;
    const char *name = it->name ? it->name : m->name;
    int row = ingest_side_row(s, it->record_no, name);
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

/* "STEM:RECORD": the input's file name without its folder and extensions
 * (qm7_quick.sdf.gz -> qm7_quick; a .gz, then one extension of up to 8
 * letters or digits), ':' and the record number, counted as the rejects
 * table and `record_no` count it (1 = the first molecule of the file). */
const char *ingest_generated_name(const struct input *in, int64_t record_no, char *buf, size_t size) {
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

/* Whether a reject's reason is its labels' (ingest_collect_labels's kinds). */
static int label_reason(const char *r) {
  return r && (!strcmp(r, "label not a number") || !strcmp(r, "bad labels_csv row"));
}

/* A part whose labels alone changed: each record with a stored molecule
 * keeps it (kept 1, its stored name with it), each rejected for a reason
 * other than its labels stays so (kept 2); the others (rejected for their
 * labels, or not found) are parsed as usual. */
int ingest_relabel_look(struct stage_ctx *ctx, const struct input *in, struct item *items, int n) {
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
      if (!(it->stored_name = strdup((const char *)sqlite3_column_text(m, 0))))
        ret = stage_fail_at(ctx, NULL, "out of memory");
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
int ingest_label_changes(struct stage_ctx *ctx, struct ingest *g, int ii, char *names, size_t size, int64_t *n_rec,
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
      if (ingest_read_record(ctx, g, gi, &it, &job, NULL) || ingest_relabel_look(ctx, in, &it, 1)) ret = STAGE_ERROR;
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
          own =
              strcmp(it.stored_name, ingest_generated_name(in, it.record_no, made, sizeof made)) ? it.stored_name : "";
        sqlite3_reset(rej);
        sqlite3_bind_int64(rej, 1, id);
        if (!it.kept && sqlite3_step(rej) == SQLITE_ROW && sqlite3_column_text(rej, 0)) {
          /* (a reject without a name of its own has its STEM:RECORD: made up, never joined by) */
          char gen[320];
          snprintf(made, sizeof made, "%s", (const char *)sqlite3_column_text(rej, 0));
          own = strcmp(made, ingest_generated_name(in, it.record_no, gen, sizeof gen)) ? made : "";
        }
        job.mol.name = strdup(own);
        rejected_now = ingest_collect_labels(in, &it, &job.mol, now, &n_now, 256, &kind, why, sizeof why) != 0;
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
            if (!stage_word_listed(names, w))
              snprintf(names + strlen(names), size - strlen(names), "%s%s", names[0] ? " " : "", w);
          free(copy);
        }
      }
      ingest_item_free(&it, &job);
    }
  }
  sqlite3_finalize(lab);
  sqlite3_finalize(rej);
  return ret;
}
