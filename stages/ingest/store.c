/* store.c — a chunk's rows, written in the transaction the runner opened
 * for it: each record's molecule and labels, or its reject row; in a part
 * whose labels alone changed, what was stored of a record before goes
 * first (its molecule stays when it is kept); last, the part's row in
 * ingest_parts, under the keys it was read with. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_blank_name(const char *s) {
  for (; s && *s; s++)
    if (*s != ' ' && *s != '\t' && *s != '\r' && *s != '\n') return 0;
  return 1;
}

/* The name a record's own text gives, read without Open Babel, for the
 * reject of a record that has no molecule to say it (one its parser timed
 * out on or crashed over): a SMILES line's words after the SMILES, an SD
 * record's first line; at most 200 bytes, control bytes as '?'. "" for
 * none. */
static const char *raw_name(const struct wjob *j, char *buf, size_t size) {
  buf[0] = 0;
  if (!j->text || !j->format || size < 2) return buf;
  const char *p = j->text, *end = j->text + j->len;
  if (!strcmp(j->format, "smi")) {
    while (p < end && *p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
      p++;
    while (p < end && (*p == ' ' || *p == '\t'))
      p++;
  } else if (strcmp(j->format, "sdf")) {
    return buf;
  }
  size_t n = 0, cap = size - 1 < 200 ? size - 1 : 200;
  for (; p < end && *p != '\n' && *p != '\r' && n < cap; p++)
    buf[n++] = (unsigned char)*p < 0x20 || *p == 0x7f ? '?' : *p;
  while (n && (buf[n - 1] == ' ' || buf[n - 1] == '\t'))
    n--;
  buf[n] = 0;
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
    se3_error_set(&ctx->err, SE3_ERR_DB, "deleting what was stored of molecule %lld: %s", (long long)id,
                  msg ? msg : sqlite3_errstr(rc));
    sqlite3_free(msg);
    return -1;
  }
  return 0;
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

/* The statements a chunk writes its rows with. */
struct rows {
  sqlite3_stmt *mol, *lab, *rej;
};

static int rows_prepare(struct stage_ctx *ctx, struct rows *s) {
  if (sqlite3_prepare_v2(ctx->db,
                         "INSERT INTO molecules(id, set_name, source_file, record_no, name, smiles, inchikey, "
                         "formula, n_atoms, n_heavy, charge, coords_from, chunk, mol, mol_hash, input_smiles, "
                         "shape, stereo_free, isomer_smiles) "
                         "VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19)",
                         -1, &s->mol, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(ctx->db, "INSERT INTO labels(mol_id, name, value) VALUES(?1,?2,?3)", -1, &s->lab, NULL) !=
          SQLITE_OK ||
      sqlite3_prepare_v2(ctx->db,
                         "INSERT OR REPLACE INTO rejects(stage, set_name, source_file, record_no, line, name, chunk, "
                         "reason, atom, detail, mol_id) VALUES('ingest',?1,?2,?3,?4,?5,?6,?7,?8,?9,?10)",
                         -1, &s->rej, NULL) != SQLITE_OK)
    return stage_sql_fail(ctx, "preparing inserts");
  return STAGE_OK;
}

static void rows_finalize(struct rows *s) {
  sqlite3_finalize(s->mol);
  sqlite3_finalize(s->lab);
  sqlite3_finalize(s->rej);
}

/* The reject row of record `it` (molecule id), named `name`. */
static int store_reject(struct stage_ctx *ctx, sqlite3_stmt *ins_rej, const struct input *in, const struct item *it,
                        const struct wjob *j, const char *name, int64_t chunk, int64_t id) {
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
    sqlite3_bind_text(ins_rej, 7, j->why.reason[0] ? j->why.reason : "rejected (no reason given)", -1, SQLITE_STATIC);
    if (j->why.atom > 0)
      sqlite3_bind_int(ins_rej, 8, j->why.atom);
    else
      sqlite3_bind_null(ins_rej, 8);
    if (j->why.detail[0])
      sqlite3_bind_text(ins_rej, 9, j->why.detail, -1, SQLITE_STATIC);
    else
      sqlite3_bind_null(ins_rej, 9);
  }
  if (sqlite3_step(ins_rej) != SQLITE_DONE) return stage_sql_fail(ctx, "writing a reject");
  return STAGE_OK;
}

/* molecules.shape of a struct mol's shape (MOL_SHAPE_*) */
static const char *shape_word(int shape) {
  return shape == MOL_SHAPE_FIXED ? "fixed" : shape == MOL_SHAPE_REGENERATED ? "regenerated" : "ok";
}

/* 1 when a reject's reason is a shape out of bounds: a generated one no fix
 * saved, or a file's own (chem/workers.h) */
static int shape_refused(const char *reason) {
  return reason && (!strcmp(reason, "3D generation: shape out of bounds") || !strncmp(reason, "input shape: ", 13));
}

/* The molecules row of a record parsed (molecule id), named `name`. */
static int store_molecule(struct stage_ctx *ctx, sqlite3_stmt *ins_mol, const struct input *in, const struct item *it,
                          const struct wjob *j, const char *name, int64_t chunk, int64_t id) {
  uint8_t *blob = NULL;
  size_t blen = 0;
  if (mol_to_blob(&j->mol, &blob, &blen) != 0) {
    se3_error_set(&ctx->err, SE3_ERR_MEMORY, "out of memory encoding a molecule");
    return STAGE_ERROR;
  }
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
  /* what the bounds of chem/shape.h made of its shape, kept for the report */
  sqlite3_bind_text(ins_mol, 17, shape_word(j->mol.shape), -1, SQLITE_STATIC);
  /* the stereo its input left free, and the isomer its shape made of it */
  sqlite3_bind_int(ins_mol, 18, j->mol.stereo_free);
  if (j->mol.isomer_smiles)
    sqlite3_bind_text(ins_mol, 19, j->mol.isomer_smiles, -1, SQLITE_STATIC);
  else
    sqlite3_bind_null(ins_mol, 19);
  if (sqlite3_step(ins_mol) != SQLITE_DONE) return stage_sql_fail(ctx, "writing a molecule");
  return STAGE_OK;
}

/* The labels rows of molecule id. */
static int store_labels(struct stage_ctx *ctx, sqlite3_stmt *ins_lab, int64_t id, const struct label *labels,
                        int n_lab) {
  for (int k = 0; k < n_lab; k++) {
    sqlite3_reset(ins_lab);
    sqlite3_bind_int64(ins_lab, 1, id);
    sqlite3_bind_text(ins_lab, 2, labels[k].name, -1, SQLITE_STATIC);
    sqlite3_bind_double(ins_lab, 3, labels[k].value);
    if (sqlite3_step(ins_lab) != SQLITE_DONE) return stage_sql_fail(ctx, "writing a label");
  }
  return STAGE_OK;
}

/* One record's rows: its labels read (a record kept by a relabelling part
 * has them read again), then its reject, or its molecule (unless kept) and
 * its labels; counted into *n_ok or *n_rej. */
static int store_item(struct stage_ctx *ctx, struct ingest *g, const struct rows *s, int64_t chunk, int relabel,
                      struct item *it, struct wjob *j, int64_t *n_ok, int64_t *n_rej) {
  const struct input *in = &g->in[it->in];
  int64_t id = in->key * ID_STRIDE + it->record_no;
  struct label labels[256];
  int n_lab = 0;
  const char *kind = NULL;
  char detail[512];
  if (it->kept == 2) { /* its reject stands */
    (*n_rej)++;
    return STAGE_OK;
  }
  if (it->kept == 1) {
    /* The molecule stays as stored; its labels are read again, joined by
     * the name the record itself had (none when the stored one was made
     * up), from its columns, the labels_csv or the workflow. */
    char made[320];
    const char *own =
        strcmp(it->stored_name, ingest_generated_name(in, it->record_no, made, sizeof made)) ? it->stored_name : "";
    if (!(j->mol.name = strdup(own))) {
      se3_error_set(&ctx->err, SE3_ERR_MEMORY, "out of memory relabelling");
      return STAGE_ERROR;
    }
  }
  if (j->status == 0 &&
      ingest_collect_labels(in, it, &j->mol, labels, &n_lab, 256, &kind, detail, sizeof detail) != 0 &&
      ingest_item_reject(it, j, kind, detail)) {
    se3_error_set(&ctx->err, SE3_ERR_MEMORY, "out of memory for a reject");
    return STAGE_ERROR;
  }
  /* (a record read again: what was stored of it before goes, unless it is kept) */
  if (relabel && forget_record(ctx, id, it->kept == 1 && j->status == 0)) return STAGE_ERROR;
  const char *name = it->name ? it->name : j->mol.name ? j->mol.name : "";
  if (j->status != 0) {
    /* every reject named: its own name as its text gives it, else STEM:RECORD
     * (a 10,000-character SMILES that crashed Open Babel had none) */
    char own[256], made[320];
    if (is_blank_name(name)) name = raw_name(j, own, sizeof own);
    if (is_blank_name(name)) name = ingest_generated_name(in, it->record_no, made, sizeof made);
    if (store_reject(ctx, s->rej, in, it, j, name, chunk, id) != STAGE_OK) return STAGE_ERROR;
    g->n_shape_refused += !it->reason && shape_refused(j->why.reason);
    (*n_rej)++;
    return STAGE_OK;
  }
  /* Every molecule has a name: one the record had no name at all gets
   * STEM:RECORD, stable across runs. Only here, for the stored name: the
   * labels above were joined by the record's own name (a made-up one
   * must never match a labels_csv row). */
  char made[320];
  if (is_blank_name(name)) name = ingest_generated_name(in, it->record_no, made, sizeof made);
  if (it->kept == 1) {
    g->n_relabelled++;
  } else {
    g->n_parsed++;
    g->n_gen3d += j->mol.coords_gen3d != 0;
    g->n_shape_fixed += j->mol.shape == MOL_SHAPE_FIXED;
    g->n_shape_regenerated += j->mol.shape == MOL_SHAPE_REGENERATED;
    g->n_stereo_free += j->mol.stereo_free > 0;
    g->n_stereo_units += j->mol.stereo_free > 0 ? j->mol.stereo_free : 0;
  }
  if (it->kept != 1 && store_molecule(ctx, s->mol, in, it, j, name, chunk, id) != STAGE_OK) return STAGE_ERROR;
  if (store_labels(ctx, s->lab, id, labels, n_lab) != STAGE_OK) return STAGE_ERROR;
  (*n_ok)++;
  return STAGE_OK;
}

/* A chunk's last step: every record's rows, in order, then the part's row
 * (under which keys it was read, and what it holds). */
int ingest_store(struct stage_ctx *ctx, struct ingest *g, int64_t chunk, struct item *items, struct wjob *jobs, int n,
                 int64_t *n_ok, int64_t *n_rej) {
  const struct input *cin = &g->in[g->chunk_in[chunk]];
  struct rows s = {NULL, NULL, NULL};
  int ret = rows_prepare(ctx, &s);
  for (int i = 0; i < n && ret == STAGE_OK; i++)
    ret = store_item(ctx, g, &s, chunk, g->relabel[chunk], &items[i], &jobs[i], n_ok, n_rej);
  if (ret == STAGE_OK)
    ret = write_part(ctx, cin, g->chunk_part[chunk], n ? items[0].record_no : 0, n ? items[n - 1].record_no : 0, *n_ok,
                     *n_rej);
  rows_finalize(&s);
  return ret;
}
