/* dock.c — `molecules` of one set in, `docking` out: each molecule docked
 * into the workflow's receptor by AutoDock Vina (chem/dock.h), its best
 * affinity and its pose stored.
 *
 * Optional: it runs when the workflow names stages.dock. Plan: the set's
 * molecules (duplicates left out), ascending, in chunks of
 * stages.dock.chunk_size (default run.chunk_size) within one input file
 * (the runner plans them from the stage's struct stage_rows, as graph's). Keyed: a
 * docking records the hash of the molecule docked (docking.mol_hash) and of
 * the set-up it was docked under (docking.setup: Vina's version, the
 * receptor file's bytes, the box, exhaustiveness and seed); a rerun docks
 * only the molecules without a docking of their present contents under the
 * present set-up. A set-up that changes discards every docking and dock
 * reject (meta 'dock_setup' says which set-up they belong to).
 *
 * A docking takes seconds to minutes, so a chunk does not wait for its end
 * to keep its work: each docking is committed as it finishes (the runner's
 * chunk transaction is committed and begun again), and a chunk cut short —
 * kill -9, a signal, a failure — leaves its finished dockings stored; the
 * rerun plans that chunk again and docks only the rest. The ledger row
 * comes when the whole chunk is done.
 *
 * A molecule whose docking fails (its ligand cannot be prepared, Vina
 * fails or crashes, it runs out of time or out of its memory limit,
 * stages.dock.memory_limit_mb) becomes a reject of this stage with the
 * reason and Vina's last words; the others go on.
 *
 * The files it reads are opened once (stage_file_open: a FIFO, a device
 * or a folder refused unread, naming the file and its key, before anything
 * is run): the receptor and the table are hashed for the set-up through
 * that descriptor, and later copied through it into this run's folder,
 * where Open Babel, Vina and the CSV reader read them by path, the copy's
 * bytes checked against the set-up's key; the box ligand is copied the
 * same way into a folder of its own for Open Babel. What is keyed is what
 * is used, whatever happens to the workflow's files meanwhile.
 *
 * With stages.dock.oracle: table the scores come from a CSV file instead
 * (a benchmark's, or another program's): each molecule's score is looked
 * up by the SMILES its input file wrote (molecules.input_smiles) or by its
 * name, stored with an empty pose; a molecule the table has no score for is
 * a reject, `no score in the table`. The set-up is then the table's bytes
 * and how it is read.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "chem/dock.h"
#include "chem/records.h"
#include "common/fsutil.h"
#include "dock_work.h"
#include "stage.h"

/* A list of three numbers (center:, size:) into v. */
static int three(struct stage_ctx *ctx, const char *key, double v[3]) {
  const struct cfg_node *n = cfg_get(ctx->cfg, key);
  if (!n || n->kind != CFG_LIST || n->n_kids != 3)
    return stage_fail_at(ctx, n ? n : ctx->cfg, "stages.dock.%s: three numbers (x, y, z in Å) are needed", key);
  for (int k = 0; k < 3; k++)
    v[k] = n->kids[k]->f;
  return STAGE_OK;
}

/* stages.dock.KEY's file opened once (stage_file_open): a FIFO, a device
 * or a folder refused unread, without blocking, naming the file and the
 * key. */
static int open_input(struct stage_ctx *ctx, const char *key, const char *path, int *fd) {
  if (stage_file_open(path, fd, &ctx->err)) return stage_error_at(ctx, cfg_get(ctx->cfg, key), "stages.dock.%s", key);
  return STAGE_OK;
}

/* msg with each `copy` (a private copy's path, which the readers name in
 * their messages) written as `orig`, the file the workflow names. */
static void own_name(char *msg, size_t size, const char *copy, const char *orig) {
  size_t cl = strlen(copy);
  if (!cl || !strstr(msg, copy)) return;
  char *out = malloc(size);
  if (!out) return;
  size_t o = 0;
  for (const char *p = msg; *p && o + 1 < size;) {
    if (!strncmp(p, copy, cl)) {
      int w = snprintf(out + o, size - o, "%s", orig);
      o += w < 0 ? 0 : (size_t)w < size - o ? (size_t)w : size - o - 1;
      p += cl;
    } else {
      out[o++] = *p++;
    }
  }
  out[o] = 0;
  memcpy(msg, out, o + 1);
  free(out);
}

/* The bytes of stages.dock.KEY's file, read through fd (opened once), into
 * dir/SUB/NAME, NAME the file's own name (Open Babel reads a format by its
 * extension), into out: what a program then reads by path is the very
 * bytes that were hashed. With want, the bytes must hash to it (the key of
 * the set-up): a file changed since the set-up was read is an error
 * naming it, never a mix. */
static int private_copy(struct stage_ctx *ctx, const char *dir, const char *key, const char *path, int fd,
                        const uint64_t *want, char *out, size_t size) {
  const struct cfg_node *at = cfg_get(ctx->cfg, key);
  const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  if (!base[0]) base = key;
  if ((size_t)snprintf(out, size, "%s/%s/%s", dir, key, base) >= size)
    return stage_fail_at(ctx, at, "stages.dock.%s: %s: this run's copy of it under %s: %s", key, path, dir,
                         strerror(ENAMETOOLONG));
  snprintf(out, size, "%s/%s", dir, key);
  if (mkdir(out, 0700) != 0 && errno != EEXIST)
    return stage_fail_at(ctx, at, "stages.dock.%s: %s: a folder for this run's copy of it: %s: %s", key, path, out,
                         strerror(errno));
  snprintf(out, size, "%s/%s/%s", dir, key, base);
  unlink(out);
  uint64_t h;
  if (stage_fd_copy(fd, out, &h, &ctx->err)) return stage_error_at(ctx, at, "stages.dock.%s: %s", key, path);
  if (want && h != *want) {
    unlink(out);
    return stage_fail_at(ctx, at, "stages.dock.%s: %s changed while this run used it (its bytes are not those the "
                                  "set-up was keyed by): run again",
                         key, path);
  }
  return STAGE_OK;
}

/* A folder of its own under $TMPDIR (or /tmp), for a copy read at once. */
static int temp_dir(struct stage_ctx *ctx, const char *what, char *dir, size_t size) {
  const char *base = getenv("TMPDIR");
  if (!base || !base[0]) base = "/tmp";
  if ((size_t)snprintf(dir, size, "%s/se3screen-%s-XXXXXX", base, what) < size && mkdtemp(dir)) return STAGE_OK;
  int e = errno;
  dir[0] = 0;
  return stage_fail_at(ctx, NULL, "a temporary folder under %s: %s", base, strerror(e));
}

/* The box from stages.dock.box_ligand: the file opened once, its bytes
 * copied through that descriptor into a folder of its own, where Open
 * Babel's process reads them. */
static int box_from_ligand(struct stage_ctx *ctx, struct dstage *d, const char *ligand) {
  int fd = -1;
  if (open_input(ctx, "box_ligand", ligand, &fd)) return STAGE_ERROR;
  char dir[4096], copy[4400], err[2048];
  int rc = temp_dir(ctx, "box", dir, sizeof dir);
  if (rc == STAGE_OK) rc = private_copy(ctx, dir, "box_ligand", ligand, fd, NULL, copy, sizeof copy);
  close(fd);
  struct se3_error e;
  if (rc == STAGE_OK && dock_box_from_ligand(copy, cfg_float(ctx->cfg, "padding"), 120, &d->ds.box, &e)) {
    se3_error_format(&e, err, sizeof err);
    own_name(err, sizeof err, copy, ligand);
    rc = stage_fail_at(ctx, cfg_get(ctx->cfg, "box_ligand"), "%s", err);
  }
  se3_rm_tree(dir[0] ? dir : NULL);
  return rc;
}

/* The set-up: Vina, the receptor, the box; its key. */
static int dock_setup(struct stage_ctx *ctx, struct dstage *d) {
  const struct cfg_node *c = ctx->cfg;
  d->set = cfg_str(c, "set");
  d->table = !strcmp(cfg_str(c, "oracle"), "table");
  if (d->table) {
    d->table_path = cfg_str_opt(c, "table");
    if (!d->table_path)
      return stage_fail_at(ctx, cfg_get(c, "oracle"), "stages.dock.table: `oracle: table` needs the table of scores "
                                                      "(a CSV file with a header)");
    d->table_key = cfg_str(c, "table_key");
    d->key_column = cfg_str_opt(c, "key_column"); /* no default: the key's own name */
    if (!d->key_column) d->key_column = d->table_key;
    d->score_column = cfg_str(c, "score_column");
    if (open_input(ctx, "table", d->table_path, &d->table_fd)) return STAGE_ERROR;
    if (stage_fd_hash(d->table_fd, &d->table_hash))
      return stage_fail_at(ctx, cfg_get(c, "table"), "stages.dock.table: %s: %s", d->table_path, strerror(errno));
    uint64_t content = d->table_hash;
    uint64_t h = se3_hash_bytes(se3_hash_str(SE3_HASH_INIT, "table"), &content, sizeof content);
    h = se3_hash_str(se3_hash_str(se3_hash_str(h, d->table_key), d->key_column), d->score_column);
    snprintf(d->setup, sizeof d->setup, "%016" PRIx64, h);
    return STAGE_OK;
  }
  d->receptor_in = cfg_str_opt(c, "receptor");
  if (!d->receptor_in)
    return stage_fail_at(ctx, c, "stages.dock.receptor: the receptor to dock into is not given (a PDB, PDBQT or any "
                                 "file Open Babel reads)");
  /* opened (a FIFO or a device refused) and hashed before anything else is run */
  if (open_input(ctx, "receptor", d->receptor_in, &d->receptor_fd)) return STAGE_ERROR;
  if (stage_fd_hash(d->receptor_fd, &d->receptor_hash))
    return stage_fail_at(ctx, cfg_get(c, "receptor"), "stages.dock.receptor: %s: %s", d->receptor_in, strerror(errno));
  d->ds.vina = cfg_str(c, "vina");
  d->ds.exhaustiveness = (int)cfg_int(c, "exhaustiveness");
  d->ds.seed = (unsigned)cfg_int(c, "seed");
  d->ds.modes = (int)cfg_int(c, "modes");
  d->ds.energy_range = cfg_float(c, "energy_range");
  d->ds.timeout_s = cfg_float(c, "timeout_s");
  d->ds.memory_limit = (uint64_t)cfg_int(c, "memory_limit_mb") << 20;
  d->workers = (int)cfg_int(c, "workers");
  if (d->workers <= 0) d->workers = stage_cores(); /* (an array task's allocation under Slurm) */
  struct se3_error e;
  if (dock_vina_version(d->ds.vina, d->vina_version, sizeof d->vina_version, &e))
    return stage_fail_at(ctx, cfg_get(c, "vina") ? cfg_get(c, "vina") : c, "%s", se3_error_str(&e).s);
  const char *ligand = cfg_str_opt(c, "box_ligand");
  const struct cfg_node *center = cfg_get(c, "center");
  if (ligand && center)
    return stage_fail_at(ctx, center, "stages.dock: give the box either by `box_ligand` or by `center` and `size`, "
                                      "not both");
  if (ligand) {
    if (box_from_ligand(ctx, d, ligand)) return STAGE_ERROR;
  } else if (center) {
    if (three(ctx, "center", d->ds.box.center) || three(ctx, "size", d->ds.box.size)) return STAGE_ERROR;
  } else {
    return stage_fail_at(ctx, c, "stages.dock: the box to dock into is not given: `box_ligand` (a ligand placed in "
                                 "the receptor; the box is its extent and `padding` on every side) or `center` and "
                                 "`size`");
  }
  for (int k = 0; k < 3; k++)
    if (!(d->ds.box.size[k] > 0 && d->ds.box.size[k] <= 200))
      return stage_fail_at(ctx, cfg_get(c, "size") ? cfg_get(c, "size") : c,
                           "stages.dock: the box's size %g Å is not between 0 and 200 Å", d->ds.box.size[k]);
  uint64_t content = d->receptor_hash;
  uint64_t h = se3_hash_bytes(se3_hash_str(SE3_HASH_INIT, d->vina_version), &content, sizeof content);
  /* the box as Vina is given it (4 decimals) */
  char box[256];
  snprintf(box, sizeof box, "%.4f %.4f %.4f %.4f %.4f %.4f %d %u", d->ds.box.center[0], d->ds.box.center[1],
           d->ds.box.center[2], d->ds.box.size[0], d->ds.box.size[1], d->ds.box.size[2], d->ds.exhaustiveness,
           d->ds.seed);
  h = se3_hash_str(h, box);
  /* the poses kept, where they differ from Vina's one best (a set-up from
   * before stages.dock.modes keeps its key) */
  if (d->ds.modes != 1 || d->ds.energy_range != 3.0) {
    char modes[64];
    snprintf(modes, sizeof modes, "modes %d %.4f", d->ds.modes, d->ds.energy_range);
    h = se3_hash_str(h, modes);
  }
  snprintf(d->setup, sizeof d->setup, "%016" PRIx64, h);
  return STAGE_OK;
}

static int prepare_receptor(struct stage_ctx *ctx, struct dstage *d);

static int dock_begin(struct stage_ctx *ctx, int64_t *n_chunks, int64_t *n_items) {
  struct dstage *d = calloc(1, sizeof *d);
  if (!d) return stage_fail_at(ctx, NULL, "out of memory");
  ctx->state = d;
  d->ctx = ctx;
  d->receptor_fd = d->table_fd = -1;
  d->ahead_chunk = -1;
  d->prepare = prepare_receptor;
  if (dock_setup(ctx, d)) return STAGE_ERROR;
  /* the set's molecules (those acquired, when the workflow acquires) are
   * the runner's to plan (struct stage_rows; then dock_planned); a
   * docking's key is the set-up it was made under */
  ctx->key[0] = d->setup;
  (void)n_chunks;
  (void)n_items;
  return STAGE_OK;
}

/* After the runner's plan: a set without molecules to dock is refused, but
 * where the workflow acquires (nothing acquired yet). */
static int dock_planned(struct stage_ctx *ctx) {
  struct dstage *d = ctx->state;
  if (ctx->plan.n == 0 && !stage_acquiring(ctx->root))
    return stage_fail_at(ctx, cfg_get(ctx->cfg, "set") ? cfg_get(ctx->cfg, "set") : ctx->cfg,
                         "stages.dock.set: the set '%s' has no molecules to dock (is it one of the workflow's sets, "
                         "and were its records all rejected?)",
                         d->set);
  return STAGE_OK;
}

/* This run's folder under $TMPDIR (or /tmp): the prepared receptor, and
 * each molecule's folder while it docks. Its name is a hash of the workdir
 * and the shard, so the next run of the same work finds what a run killed
 * with -9 left there and removes it first (the database's lock makes the
 * folder this run's alone); where that name cannot be had (another user's
 * file of that name), a folder of a random name, as mkdtemp makes. */
static int make_run_dir(struct stage_ctx *ctx, struct dstage *d) {
  if (d->tmp[0]) return STAGE_OK;
  const char *base = getenv("TMPDIR");
  if (!base || !base[0]) base = "/tmp";
  int64_t shard[2] = {ctx->shard, ctx->n_shards};
  uint64_t h = se3_hash_bytes(se3_hash_str(SE3_HASH_INIT, ctx->workdir), shard, sizeof shard);
  snprintf(d->tmp, sizeof d->tmp, "%s/se3screen-dock-%016llx", base, (unsigned long long)h);
  se3_rm_tree(d->tmp);
  if (mkdir(d->tmp, 0700) == 0) return STAGE_OK;
  snprintf(d->tmp, sizeof d->tmp, "%s/se3screen-dock-XXXXXX", base);
  if (mkdtemp(d->tmp)) return STAGE_OK;
  int e = errno;
  d->tmp[0] = 0;
  return stage_fail_at(ctx, NULL, "a temporary folder for docking under %s: %s", base, strerror(e));
}

/* The receptor, prepared once a run (not in --dry-run, which docks
 * nothing), from this run's copy of the bytes its set-up was keyed by. */
static int prepare_receptor(struct stage_ctx *ctx, struct dstage *d) {
  if (d->ds.receptor) return STAGE_OK;
  if (make_run_dir(ctx, d) != STAGE_OK) return STAGE_ERROR;
  d->ds.tmpdir = d->tmp;
  char copy[4400];
  if (private_copy(ctx, d->tmp, "receptor", d->receptor_in, d->receptor_fd, &d->receptor_hash, copy, sizeof copy))
    return STAGE_ERROR;
  close(d->receptor_fd);
  d->receptor_fd = -1;
  snprintf(d->receptor, sizeof d->receptor, "%s/receptor.pdbqt", d->tmp);
  char err[2048];
  struct se3_error e;
  if (dock_prepare_receptor(copy, d->receptor, 300, &e)) {
    se3_error_format(&e, err, sizeof err);
    own_name(err, sizeof err, copy, d->receptor_in);
    return stage_fail_at(ctx, cfg_get(ctx->cfg, "receptor"), "%s", err);
  }
  d->ds.receptor = d->receptor;
  ctx->report->log(ctx, "docking into %s with %s (box centre %.2f %.2f %.2f Å, size %.1f x %.1f x %.1f Å, "
                        "exhaustiveness %d, seed %u, %d at once)",
                   d->receptor_in, d->vina_version, d->ds.box.center[0], d->ds.box.center[1], d->ds.box.center[2],
                   d->ds.box.size[0], d->ds.box.size[1], d->ds.box.size[2], d->ds.exhaustiveness, d->ds.seed,
                   d->workers);
  return STAGE_OK;
}

/* The table of scores into temp.dock_table (key, score, why), once a run:
 * the score read as a label is (rec_parse_label: decimal and finite); a row
 * without one, blank or refused, leaves its key without a score, and why
 * (its row and what it holds) goes to the molecule's reject row; of a key
 * repeated, the first row counts. */
static int load_table(struct stage_ctx *ctx, struct dstage *d) {
  const struct cfg_node *at = cfg_get(ctx->cfg, "table");
  struct rec_options ro = {.smiles_column = d->key_column, .max_empty_listed = -1};
  /* read from this run's copy of the bytes the set-up was keyed by */
  char copy[4400];
  if (make_run_dir(ctx, d) != STAGE_OK ||
      private_copy(ctx, d->tmp, "table", d->table_path, d->table_fd, &d->table_hash, copy, sizeof copy))
    return STAGE_ERROR;
  close(d->table_fd);
  d->table_fd = -1;
  char err[2048];
  struct se3_error e;
  struct rec_reader *rd = rec_open(copy, MOL_FMT_CSV, &ro, &e);
  if (!rd) {
    se3_error_format(&e, err, sizeof err);
    own_name(err, sizeof err, copy, d->table_path);
    return stage_fail_at(ctx, at, "stages.dock.table: %s", err);
  }
  int n_cols = 0, key = -1, score = -1;
  const char *const *cols = rec_columns(rd, &n_cols);
  for (int i = 0; i < n_cols; i++) {
    const char *twice = !strcmp(cols[i], d->key_column) && key >= 0       ? d->key_column
                        : !strcmp(cols[i], d->score_column) && score >= 0 ? d->score_column
                                                                          : NULL;
    if (twice) { /* (check refuses it first; the file may have changed since) */
      rec_close(rd);
      return stage_fail_at(ctx, at,
                           "stages.dock.table: column '%s' is named twice in the header of %s (columns %d and %d): "
                           "which one is meant cannot be told; rename one",
                           twice, d->table_path, (twice == d->key_column ? key : score) + 1, i + 1);
    }
    if (!strcmp(cols[i], d->key_column)) key = i;
    if (!strcmp(cols[i], d->score_column)) score = i;
  }
  if (key < 0 || score < 0) {
    rec_close(rd);
    return stage_fail_at(ctx, at, "stages.dock.table: %s has no column '%s' (its columns are named in its first line)",
                         d->table_path, key < 0 ? d->key_column : d->score_column);
  }
  sqlite3_stmt *ins = NULL;
  char *msg = NULL;
  if (sqlite3_exec(ctx->db,
                   "CREATE TEMP TABLE IF NOT EXISTS dock_table(key TEXT PRIMARY KEY, score REAL, why TEXT) WITHOUT "
                   "ROWID; DELETE FROM temp.dock_table",
                   NULL, NULL, &msg) != SQLITE_OK ||
      sqlite3_prepare_v2(ctx->db, "INSERT OR IGNORE INTO temp.dock_table(key, score, why) VALUES(?1, ?2, ?3)", -1, &ins,
                         NULL) != SQLITE_OK) {
    se3_error_set(&ctx->err, SE3_ERR_DB, "loading the table of scores: %s", msg ? msg : sqlite3_errmsg(ctx->db));
    sqlite3_free(msg);
    rec_close(rd);
    return STAGE_ERROR;
  }
  struct rec r;
  int rc;
  long long rows = 0, kept = 0, no_score = 0, bad_rows = 0;
  while ((rc = rec_next(rd, &r, &e)) == 1) {
    rows++;
    if (r.error || !r.fields || r.n_fields <= (key > score ? key : score) || !r.fields[key][0]) {
      bad_rows++;
      continue;
    }
    /* the score read as a label is (one parser: no 0x10, nan or inf); a row
     * without one is kept with why, for the molecule's reject row */
    double v;
    char why[160], line[400] = "";
    int pr = rec_parse_label(r.fields[score], &v, why, sizeof why);
    if (pr != 0) {
      no_score++;
      snprintf(line, sizeof line, "row %lld of %.100s: %s '%.60s'%s%s", rows, d->table_path,
               pr > 0 ? "no score in" : "the score in", d->score_column, pr > 0 ? "" : " is ", pr > 0 ? "" : why);
      if (pr < 0) snprintf(line + strlen(line), sizeof line - strlen(line), " ('%.40s')", r.fields[score]);
    }
    sqlite3_reset(ins);
    sqlite3_bind_text(ins, 1, r.fields[key], -1, SQLITE_TRANSIENT);
    if (pr == 0) { /* a score, or why there is none */
      sqlite3_bind_double(ins, 2, v);
      sqlite3_bind_null(ins, 3);
    } else {
      sqlite3_bind_null(ins, 2);
      sqlite3_bind_text(ins, 3, line, -1, SQLITE_TRANSIENT);
    }
    if (sqlite3_step(ins) != SQLITE_DONE) {
      sqlite3_finalize(ins);
      rec_close(rd);
      return stage_sql_fail(ctx, "loading the table of scores");
    }
    kept += pr == 0 ? sqlite3_changes(ctx->db) : 0;
  }
  sqlite3_finalize(ins);
  rec_close(rd);
  unlink(copy);
  if (rc < 0) {
    se3_error_format(&e, err, sizeof err);
    own_name(err, sizeof err, copy, d->table_path);
    return stage_fail_at(ctx, at, "stages.dock.table: %s", err);
  }
  if (kept == 0)
    return stage_fail_at(ctx, at, "stages.dock.table: %s has no row with a key and a number in '%s' (%lld rows)",
                         d->table_path, d->score_column, rows);
  ctx->report->log(ctx, "scores from %s: %lld rows, %lld keys with a score%s%lld without a number in '%s'%s%lld "
                        "unreadable; %lld repeated (the first row kept)",
                   d->table_path, rows, kept, ", ", no_score, d->score_column, ", ", bad_rows,
                   rows - no_score - bad_rows - kept);
  d->table_loaded = 1;
  return STAGE_OK;
}

/* A chunk by the table: each molecule's score looked up by its key. */
static int table_chunk(struct stage_ctx *ctx, struct dstage *d, int64_t chunk, int64_t lo, int64_t hi) {
  if (!d->table_loaded && load_table(ctx, d)) return STAGE_ERROR;
  int by_name = !strcmp(d->table_key, "name");
  sqlite3_stmt *st = NULL;
  int ret = STAGE_OK;
  if (dock_chunk_pending(ctx, d, by_name ? "m.id, m.name, m.mol_hash" : "m.id, m.input_smiles, m.mol_hash", lo, hi,
                         &st))
    return STAGE_ERROR;
  if ((!d->lookup && sqlite3_prepare_v2(ctx->db, "SELECT score, why FROM temp.dock_table WHERE key = ?1", -1,
                                        &d->lookup, NULL) != SQLITE_OK) ||
      (!d->insert && sqlite3_prepare_v2(ctx->db,
                                        "INSERT OR REPLACE INTO docking(mol_id, score, pose, seconds, chunk, mol_hash, "
                                        "setup) VALUES(?1, ?2, x'', 0, ?3, ?4, ?5)",
                                        -1, &d->insert, NULL) != SQLITE_OK)) {
    sqlite3_finalize(st);
    return stage_sql_fail(ctx, "looking scores up");
  }
  int rc;
  while (ret == STAGE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
    int64_t id = sqlite3_column_int64(st, 0);
    const char *k = (const char *)sqlite3_column_text(st, 1);
    int found = 0;
    double v = 0;
    char why[600] = "";
    if (k) {
      sqlite3_reset(d->lookup);
      sqlite3_bind_text(d->lookup, 1, k, -1, SQLITE_TRANSIENT);
      if ((rc = sqlite3_step(d->lookup)) == SQLITE_ROW) {
        found = sqlite3_column_type(d->lookup, 0) != SQLITE_NULL;
        v = sqlite3_column_double(d->lookup, 0);
        if (!found) snprintf(why, sizeof why, "%s", (const char *)sqlite3_column_text(d->lookup, 1));
      } else if (rc != SQLITE_DONE) {
        ret = stage_sql_fail(ctx, "looking a score up");
        break;
      }
    }
    if (found) {
      sqlite3_reset(d->insert);
      sqlite3_bind_int64(d->insert, 1, id);
      sqlite3_bind_double(d->insert, 2, v);
      sqlite3_bind_int64(d->insert, 3, chunk);
      if (sqlite3_column_type(st, 2) == SQLITE_NULL)
        sqlite3_bind_null(d->insert, 4);
      else
        sqlite3_bind_int64(d->insert, 4, sqlite3_column_int64(st, 2));
      sqlite3_bind_text(d->insert, 5, d->setup, -1, SQLITE_STATIC);
      if (sqlite3_step(d->insert) != SQLITE_DONE) ret = stage_sql_fail(ctx, "writing a score");
      d->n_ok++;
      d->docked++;
    } else {
      char detail[600];
      if (why[0])
        snprintf(detail, sizeof detail, "%s", why);
      else if (k)
        snprintf(detail, sizeof detail, "no row of %s has %s '%.400s'", d->table_path, d->key_column, k);
      else
        snprintf(detail, sizeof detail, "the molecule has no SMILES as written to look up (not read from a SMILES "
                                        "or CSV file, or ingested before schema version 10): use table_key: name");
      ret = stage_reject_mol_detail(ctx, "dock", id, chunk, "no score in the table", detail);
      d->n_rej++;
      d->rejected++;
    }
    ctx->report->advance(ctx, 1);
  }
  if (ret == STAGE_OK && rc != SQLITE_DONE) ret = stage_sql_fail(ctx, "looking scores up");
  sqlite3_finalize(st);
  return ret;
}

static int dock_chunk(struct stage_ctx *ctx, int64_t chunk, int64_t *n_ok, int64_t *n_rej) {
  struct dstage *d = ctx->state;
  if (!d->table) return dock_work_chunk(ctx, d, chunk, n_ok, n_rej);
  const struct stage_ids *p = &ctx->plan;
  int64_t lo = p->ids[p->start[chunk]], hi = p->ids[p->start[chunk + 1] - 1];
  d->n_ok = d->n_rej = 0;
  int r = table_chunk(ctx, d, chunk, lo, hi);
  *n_ok = d->n_ok;
  *n_rej = d->n_rej;
  return r;
}

static void dock_end(struct stage_ctx *ctx) {
  struct dstage *d = ctx->state;
  if (!d) return;
  if (d->docked + d->rejected > 0 && d->table)
    ctx->report->log(ctx, "scored %lld molecules from the table, %lld without a score there; %lld scored before",
                     (long long)d->docked, (long long)d->rejected, (long long)(d->before + ctx->items_done));
  else if (d->docked + d->rejected > 0)
    ctx->report->log(ctx, "docked %lld molecules (%.1f s each on average), %lld rejected%s%lld docked before",
                     (long long)d->docked, d->docked ? d->seconds / (double)d->docked : 0.0, (long long)d->rejected,
                     "; ", (long long)(d->before + ctx->items_done));
  dock_work_end(d); /* (what still docks killed before its folder goes) */
  se3_rm_tree(d->tmp[0] ? d->tmp : NULL);
  if (d->receptor_fd >= 0) close(d->receptor_fd);
  if (d->table_fd >= 0) close(d->table_fd);
  sqlite3_finalize(d->lookup);
  free(d);
  ctx->state = NULL;
}

/* --dry-run: the molecules to dock; the set whose docking label that changes. */
static int dock_explain(struct stage_ctx *ctx, char *line, size_t size, char *mol_sets, char *label_sets,
                        size_t sets_size) {
  struct dstage *d = ctx->state;
  int64_t todo = ctx->plan.n - ctx->items_done, before = 0;
  (void)mol_sets;
  if (todo <= 0) {
    line[0] = 0;
    return STAGE_OK;
  }
  /* (molecules of a needed chunk docked by a run cut short are not redone) */
  char *sql = dock_pending_sql(ctx, "count(*)", "");
  sqlite3_stmt *st = NULL;
  if (sql && sqlite3_prepare_v2(ctx->db, sql, -1, &st, NULL) == SQLITE_OK) {
    sqlite3_bind_text(st, 1, d->set, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, d->setup, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW) before = todo - sqlite3_column_int64(st, 0);
  }
  sqlite3_finalize(st);
  sqlite3_free(sql);
  snprintf(line, size, "%lld of %lld molecules of '%s' to dock (new or changed, or never docked under this set-up)",
           (long long)(todo - before), (long long)ctx->plan.n, d->set);
  snprintf(label_sets, sets_size, "%s:%s", d->set, stage_dock_label(ctx->root) ? stage_dock_label(ctx->root) : "dock");
  return STAGE_OK;
}

/* The workflow's acquisitions, when it acquires: dock docks only those. */
static const char *dock_within(const struct cfg_node *root) { return stage_acquiring(root) ? "acquisitions" : NULL; }

/* One docking a molecule of the set (not a duplicate), under this set-up
 * (setup; the rejects' set-up in meta dock_setup); pruned when its
 * molecule is gone, changed or a duplicate, or the set-up changed, but
 * kept when the molecule only left the set or the acquisitions: a docking
 * is dear. */
static const struct stage_rows dock_rows = {
    .table = "docking",
    .index = "docking_hash",
    .upstream = "molecules",
    .up_index = "molecules_hash",
    .set = "stages.dock.set",
    .no_duplicates = 1,
    .keep_out_of_set = 1,
    .key = {"setup"},
    .rejects_meta = "dock_setup",
    .within = dock_within,
    .planned = dock_planned,
};
static const struct stage_keyed dock_keyed = {.rows = &dock_rows};

const struct stage stage_dock = {
    .name = "dock",
    .tables = "poses docking", /* (children first: status counts the last) */
    .after = "ingest",
    .flags = STAGE_OPTIONAL | STAGE_ARRAY,
    .begin = dock_begin,
    .run_chunk = dock_chunk,
    .end = dock_end,
    .keyed = &dock_keyed,
    .merge = {.meta_key = "dock_setup"},
    .reads = {.set = "stages.dock.set"},
    .show = {.done = "docked", .blob_column = "pose"},
    .explain = dock_explain,
};
