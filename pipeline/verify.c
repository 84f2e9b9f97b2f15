/* verify.c — `se3screen verify DB|WORKDIR`: SQLite's own integrity check,
 * then every stored blob decoded and its checksum compared (verify.h).
 *
 * Blobs of version 2 and later end with a CRC-32C (chem/mol.h, chem/graph.h,
 * models/basis.h); version 1 blobs carry none: they are decoded (so a torn
 * header or a size that does not add up is still found) and counted as
 * "unchecked, old format", not as damage. The database is opened read-only:
 * verify never changes what it looks at. Each molecule's shapes are then
 * held against the bounds of chem/shape.h: one out of bounds is reported,
 * as a warning, not as damage.
 */
#define _GNU_SOURCE
#include "pipeline/verify.h"

#include <dirent.h>
#include <stdarg.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chem/graph.h"
#include "chem/mol.h"
#include "chem/shape.h"
#include "common/confset.h"
#include "common/le.h"
#include "models/basis.h"
#include "models/checkpoint.h"
#include "pipeline/runner.h"
#include "pipeline/ledger.h"
#include "pipeline/store.h"
#include "pipeline/config.h"

enum blob_kind { BLOB_MOL, BLOB_GRAPH, BLOB_BASIS, BLOB_POSE };

/* The tables that hold blobs: name, row key, blob column. */
static const struct {
  const char *table, *key, *column;
  enum blob_kind kind;
} blob_tables[] = {
    {"molecules", "id", "mol", BLOB_MOL},
    {"graphs", "mol_id", "graph", BLOB_GRAPH},
    {"bases", "mol_id", "basis", BLOB_BASIS},
    {"docking", "mol_id", "pose", BLOB_POSE}, /* since schema version 10 */
    {"poses", "mol_id", "pose", BLOB_POSE},   /* since schema version 12: every pose kept (one row a mode) */
};

struct damage {
  long long n_bad;
  int max_listed;
  char **listed;
  int n_listed;
};

static void damage_add(struct damage *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void damage_add(struct damage *d, const char *fmt, ...) {
  d->n_bad++;
  if (d->n_listed >= d->max_listed) return;
  char **grown = realloc(d->listed, (size_t)(d->n_listed + 1) * sizeof *grown);
  if (!grown) return;
  d->listed = grown;
  va_list ap;
  va_start(ap, fmt);
  if (vasprintf(&d->listed[d->n_listed], fmt, ap) >= 0) d->n_listed++;
  va_end(ap);
}

/* 0 intact, -1 damaged (why in err, of kind db); *old = 1 for a version 1
 * blob (no checksum). */
static int check_blob(enum blob_kind kind, const uint8_t *blob, size_t len, int *old, struct se3_error *err) {
  *old = blob && len >= 6 && le_get_u16(blob + 4) == 1 && !confset_is(blob, len); /* (a set's version is 1 too) */
  if (kind == BLOB_POSE && len == 0) return 0; /* a score from a table (stages.dock.oracle): no pose */
  if (kind == BLOB_MOL || kind == BLOB_POSE) {
    struct mol m;
    int rc = mol_from_blob(blob, len, &m, err);
    if (rc && err) err->kind = SE3_ERR_DB;         /* (a blob of the database) */
    for (int a = 0; rc == 0 && a < m.n_atoms; a++) /* (an atom at 1e300 was once stored as inf) */
      if (!isfinite(m.atoms[a].x) || !isfinite(m.atoms[a].y) || !isfinite(m.atoms[a].z_)) {
        se3_error_set(err, SE3_ERR_DB, "atom %d's coordinates are not finite (%g, %g, %g)", a + 1, m.atoms[a].x,
                      m.atoms[a].y, m.atoms[a].z_);
        rc = -1;
      }
    for (long k = 0; rc == 0 && m.confs && k < 3L * m.n_atoms * m.n_confs; k++)
      if (!isfinite(m.confs[k])) {
        se3_error_set(err, SE3_ERR_DB, "conformer %ld: atom %ld's coordinates are not finite", k / (3L * m.n_atoms) + 2,
                      k % (3L * m.n_atoms) / 3 + 1);
        rc = -1;
      }
    mol_free(&m);
    return rc;
  }
  if (kind == BLOB_GRAPH && len == 0) return 0; /* stages.graph.store: false: rebuilt from the molecule where read */
  if (!blob) {
    se3_error_set(err, SE3_ERR_DB, "not a %s blob (NULL)", kind == BLOB_GRAPH ? "graph" : "basis");
    return -1;
  }
  /* one blob, or a set of one a conformer (common/confset.h): each checked */
  int nc = confset_count(blob, len);
  for (int c = 0; c < nc; c++) {
    const uint8_t *p = NULL;
    size_t pl = 0;
    int rc = confset_get(blob, len, c, &p, &pl, err);
    if (rc) {
      if (err) err->kind = SE3_ERR_DB; /* (a blob of the database) */
      return -1;
    }
    if (kind == BLOB_GRAPH) {
      struct graph g;
      rc = graph_from_blob(p, pl, &g, err);
      graph_free(&g);
    } else {
      struct basis_blob b;
      rc = basis_blob_parse(p, pl, &b, err);
    }
    if (rc) {
      if (err) err->kind = SE3_ERR_DB;                       /* (a blob of the database) */
      if (nc > 1) se3_error_context(err, "conformer %d", c); /* say which conformer */
      return -1;
    }
  }
  return 0;
}

/* Every blob of one table. -1 when the table cannot be read at all. */
static int verify_table(sqlite3 *db, int t, struct damage *d, FILE *out) {
  char *sql = sqlite3_mprintf("SELECT \"%w\", \"%w\" FROM \"%w\" ORDER BY 1", blob_tables[t].key, blob_tables[t].column,
                              blob_tables[t].table);
  sqlite3_stmt *st = NULL;
  int rc = sql ? sqlite3_prepare_v2(db, sql, -1, &st, NULL) : SQLITE_NOMEM;
  sqlite3_free(sql);
  if (rc != SQLITE_OK) {
    damage_add(d, "%s: cannot be read: %s", blob_tables[t].table, sqlite3_errmsg(db));
    fprintf(out, "  %-10s cannot be read\n", blob_tables[t].table);
    return -1;
  }
  long long n = 0, bad = 0, old = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    long long id = sqlite3_column_int64(st, 0);
    struct se3_error err;
    int is_old = 0;
    n++;
    if (sqlite3_column_type(st, 1) != SQLITE_BLOB) {
      bad++;
      damage_add(d, "%s row %s=%lld: the %s column holds no blob", blob_tables[t].table, blob_tables[t].key, id,
                 blob_tables[t].column);
      continue;
    }
    const uint8_t *blob = sqlite3_column_blob(st, 1);
    size_t len = (size_t)sqlite3_column_bytes(st, 1);
    if (check_blob(blob_tables[t].kind, blob, len, &is_old, &err)) {
      bad++;
      damage_add(d, "%s row %s=%lld: %s", blob_tables[t].table, blob_tables[t].key, id, se3_error_str(&err).s);
    } else if (is_old) {
      old++;
    }
  }
  if (rc != SQLITE_DONE) {
    damage_add(d, "%s: reading stopped after %lld rows: %s", blob_tables[t].table, n, sqlite3_errmsg(db));
    bad++;
  }
  sqlite3_finalize(st);
  fprintf(out, "  %-10s %lld rows checked, %lld damaged", blob_tables[t].table, n, bad);
  if (old) fprintf(out, ", %lld unchecked, old format (version 1, no checksum)", old);
  fputc('\n', out);
  return 0;
}

/* The numbers of the results hold finite values (SQLite keeps an infinity;
 * a NaN it stores as NULL): every REAL column of the tables of labels,
 * scores, ranks, dockings, poses and test predictions, and a model's
 * standardisation: a score, a docking term or a label of +-inf is damage
 * (once, a Vina that printed -1e308 had it stored and ranked first). The
 * bookkeeping (the ledger's times of each stage's runs, metrics) is left
 * alone. */
static void verify_numbers(sqlite3 *db, struct damage *d, FILE *out) {
  sqlite3_stmt *tabs = NULL;
  long long cols = 0, bad = 0;
  if (sqlite3_prepare_v2(
          db,
          "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('labels', 'scores', 'ranks', "
          "'docking', 'poses', 'predictions', 'models') ORDER BY name",
          -1, &tabs, NULL) != SQLITE_OK) {
    damage_add(d, "numbers: the tables cannot be listed: %s", sqlite3_errmsg(db));
    return;
  }
  while (sqlite3_step(tabs) == SQLITE_ROW) {
    const char *t = (const char *)sqlite3_column_text(tabs, 0);
    char *sql = sqlite3_mprintf("SELECT name FROM pragma_table_info(%Q) WHERE upper(type) = 'REAL' AND "
                                "(%Q <> 'models' OR name IN ('mean', 'std'))",
                                t, t);
    sqlite3_stmt *cs = NULL;
    if (sql && sqlite3_prepare_v2(db, sql, -1, &cs, NULL) == SQLITE_OK)
      while (sqlite3_step(cs) == SQLITE_ROW) {
        const char *c = (const char *)sqlite3_column_text(cs, 0);
        char *q = sqlite3_mprintf("SELECT count(*) FROM \"%w\" WHERE abs(\"%w\") = 9e999", t, c);
        long long n = q ? store_int(db, q, -1) : -1;
        sqlite3_free(q);
        cols++;
        if (n != 0) {
          bad++;
          if (n > 0)
            damage_add(d, "%s.%s: %lld row%s hold%s an infinite number", t, c, n, n == 1 ? "" : "s", n == 1 ? "s" : "");
          else
            damage_add(d, "%s.%s cannot be read: %s", t, c, sqlite3_errmsg(db));
        }
      }
    sqlite3_finalize(cs);
    sqlite3_free(sql);
  }
  sqlite3_finalize(tabs);
  fprintf(out, "  %-10s %lld columns of numbers checked, %lld with a number not finite\n", "numbers", cols, bad);
}

/* Shapes out of bounds (verify_shapes): how many, and the first few. */
enum { SHAPE_EXAMPLES = 5 };
struct shapes {
  long long n, bad, unchecked;
  int n_listed;
  char listed[SHAPE_EXAMPLES][640];
};

/* Every stored molecule's every conformer held against the bounds of
 * chem/shape.h: a generated shape (coords_from gen3d) at the tolerances
 * generation holds it to, a file's own at the wider input ones. A shape out
 * of bounds is not damage (its blob is as it was written: an earlier 3D
 * generator made it, or ingest kept a file's coordinates before it checked
 * them), so it is a warning with examples (shapes_say) and leaves the exit
 * status alone. A blob that cannot be decoded is damage, counted above, and
 * skipped here. */
static void verify_shapes(sqlite3 *db, int max_listed, struct shapes *sh, FILE *out) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db, "SELECT id, name, coords_from, mol FROM molecules ORDER BY id", -1, &st, NULL) !=
      SQLITE_OK) {
    fprintf(out, "  %-10s not checked: %s\n", "shapes", sqlite3_errmsg(db));
    return;
  }
  int n_examples = max_listed < SHAPE_EXAMPLES ? max_listed : SHAPE_EXAMPLES;
  while (sqlite3_step(st) == SQLITE_ROW) {
    if (sqlite3_column_type(st, 3) != SQLITE_BLOB) continue;
    struct mol m;
    if (mol_from_blob(sqlite3_column_blob(st, 3), (size_t)sqlite3_column_bytes(st, 3), &m, NULL)) {
      mol_free(&m);
      continue;
    }
    const char *from = (const char *)sqlite3_column_text(st, 2);
    int made = from && !strcmp(from, "gen3d");
    struct mol_why why;
    mol_why_clear(&why);
    int rc = mol_shape_check(&m, made ? SHAPE_TOL_GENERATED : SHAPE_TOL_INPUT,
                             made ? SHAPE_PLANAR_TOL : SHAPE_PLANAR_TOL_INPUT, &why, NULL);
    mol_free(&m);
    sh->n++;
    if (rc < 0) sh->unchecked++;
    if (rc <= 0) continue;
    sh->bad++;
    if (sh->n_listed < n_examples) {
      char text[512];
      mol_why_text(&why, text, sizeof text);
      const char *name = (const char *)sqlite3_column_text(st, 1);
      snprintf(sh->listed[sh->n_listed++], sizeof sh->listed[0], "molecule %lld '%.80s' (%s coordinates): %s",
               (long long)sqlite3_column_int64(st, 0), name ? name : "", made ? "generated" : "its file's", text);
    }
  }
  sqlite3_finalize(st);
  fprintf(out, "  %-10s %lld molecules checked against the bounds of chem/shape.h, %lld out of bounds", "shapes", sh->n,
          sh->bad);
  if (sh->unchecked) fprintf(out, ", %lld not checked (out of memory)", sh->unchecked);
  fputc('\n', out);
}

/* The shapes out of bounds, after the damage: the examples and what they mean. */
static void shapes_say(const struct shapes *sh, FILE *out) {
  for (int i = 0; i < sh->n_listed; i++)
    fprintf(out, "  shape out of bounds: %s\n", sh->listed[i]);
  if (sh->bad > sh->n_listed) fprintf(out, "  ... and %lld more shapes out of bounds\n", sh->bad - sh->n_listed);
  if (sh->bad)
    fprintf(out,
            "warning: %lld stored shape%s out of bounds (chem/shape.h): not damage, each blob is as it was "
            "written, but a broken molecule that the stages after ingest learn from or score. An earlier 3D "
            "generator made it, or ingest kept a file's coordinates before it checked them: `se3screen run` makes "
            "such shapes again (ingest keys its parts by the 3D generator's version) and holds a file's own to "
            "the bounds (stages.ingest.input_shape)\n",
            sh->bad, sh->bad == 1 ? "" : "s");
}

/* SQLite's own check of pages, indexes and constraints. */
static void verify_sqlite(sqlite3 *db, int quick, struct damage *d, FILE *out) {
  sqlite3_stmt *st = NULL;
  const char *pragma = quick ? "PRAGMA quick_check(20)" : "PRAGMA integrity_check(20)";
  if (sqlite3_prepare_v2(db, pragma, -1, &st, NULL) != SQLITE_OK) {
    damage_add(d, "%s: %s", pragma, sqlite3_errmsg(db));
    fprintf(out, "  %s: failed\n", quick ? "quick_check" : "integrity_check");
    return;
  }
  int rc, ok = 0, n = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    const char *line = (const char *)sqlite3_column_text(st, 0);
    if (line && !strcmp(line, "ok"))
      ok = 1;
    else
      damage_add(d, "sqlite %s: %s", quick ? "quick_check" : "integrity_check", line ? line : "(null)"), n++;
  }
  if (rc != SQLITE_DONE) {
    damage_add(d, "sqlite %s: %s", quick ? "quick_check" : "integrity_check", sqlite3_errmsg(db));
    ok = 0;
  }
  sqlite3_finalize(st);
  fprintf(out, "  %-10s %s\n", "sqlite", ok && !n ? (quick ? "quick_check ok" : "integrity_check ok") : "DAMAGED");
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && !strcmp(s + n - m, suffix);
}

/* The checkpoints *.ckpt in dir, and in its folders down to depth more. */
static void verify_ckpt_dir(const char *dir, int depth, long long *n, long long *bad, struct damage *d) {
  DIR *sub = opendir(dir);
  if (!sub) return;
  struct dirent *f;
  while ((f = readdir(sub))) {
    if (f->d_name[0] == '.') continue;
    char path[4096 + 512];
    snprintf(path, sizeof path, "%s/%s", dir, f->d_name);
    if (!ends_with(f->d_name, ".ckpt")) {
      struct stat sb;
      if (depth > 0 && lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) verify_ckpt_dir(path, depth - 1, n, bad, d);
      continue;
    }
    struct se3_ckpt c;
    (*n)++;
    struct se3_error e2;
    if (se3_ckpt_load(&c, path, &e2)) {
      (*bad)++;
      damage_add(d, "checkpoint %s", se3_error_str(&e2).s);
    } else {
      se3_ckpt_free(&c);
    }
  }
  closedir(sub);
}

/* Every checkpoint WORKDIR/models/<model>/<name>.ckpt, and those kept for
 * active learning's rounds, WORKDIR/models/rounds/<round>/<model>.ckpt. */
static void verify_checkpoints(const char *workdir, struct damage *d, FILE *out) {
  char models[4096];
  snprintf(models, sizeof models, "%s/models", workdir);
  if (access(models, F_OK) != 0) return; /* nothing trained here */
  long long n = 0, bad = 0;
  verify_ckpt_dir(models, 2, &n, &bad, d);
  fprintf(out, "  %-10s %lld files checked, %lld damaged\n", "checkpoints", n, bad);
}

int verify_run(const char *path, int quick, int max_listed, FILE *out) {
  char db_path[4096];
  struct stat sb;
  if (stat(path, &sb) != 0) {
    fprintf(stderr, "se3screen verify: %s: %s\n", path, strerror(errno));
    return SE3_EXIT_USAGE;
  }
  int is_dir = S_ISDIR(sb.st_mode);
  if (is_dir)
    snprintf(db_path, sizeof db_path, "%s/screen.db", path);
  else
    snprintf(db_path, sizeof db_path, "%s", path);
  if (is_dir && access(db_path, F_OK) != 0) {
    fprintf(stderr, "se3screen verify: %s: no screen.db in this folder\n", path);
    return SE3_EXIT_USAGE;
  }
  struct store s;
  struct se3_error err;
  if (ledger_open_ro(&s, db_path, NULL, &err)) {
    fprintf(stderr, "se3screen verify: %s\n", se3_error_str(&err).s);
    return SE3_EXIT_FAILED;
  }
  sqlite3_exec(s.db, "PRAGMA query_only=1", NULL, NULL, NULL);
  struct damage d = {.max_listed = max_listed};
  fprintf(out, "verifying %s\n", db_path);
  verify_sqlite(s.db, quick, &d, out);
  for (int t = 0; t < (int)(sizeof blob_tables / sizeof blob_tables[0]); t++) {
    /* (a database of an earlier schema lacks the later tables) */
    char *has = sqlite3_mprintf("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = %Q",
                                blob_tables[t].table);
    long long there = has ? store_int(s.db, has, 1) : 1;
    sqlite3_free(has);
    if (there) verify_table(s.db, t, &d, out);
  }
  verify_numbers(s.db, &d, out);
  struct shapes sh = {0};
  verify_shapes(s.db, max_listed, &sh, out);
  store_close(&s);
  if (is_dir) verify_checkpoints(path, &d, out);
  for (int i = 0; i < d.n_listed; i++) {
    fprintf(out, "  damaged: %s\n", d.listed[i]);
    free(d.listed[i]);
  }
  free(d.listed);
  if (d.n_bad > d.n_listed) fprintf(out, "  ... and %lld more\n", d.n_bad - d.n_listed);
  shapes_say(&sh, out);
  if (d.n_bad)
    fprintf(out, "DAMAGED: %lld problem%s found\n", d.n_bad, d.n_bad == 1 ? "" : "s");
  else
    fprintf(out, "ok: no damage found\n");
  return d.n_bad ? SE3_EXIT_FAILED : SE3_EXIT_OK;
}
