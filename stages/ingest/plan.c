/* plan.c — ingest's plan, made by begin in every shard alike: the inputs of
 * every set in the workflow's order (globs expanded), each read by read.c;
 * each input's key (the database's, else one from its set and path); the
 * chunks, each a part of one file, and which of them have work. And the
 * plan told in words, in the run's log and for `run --dry-run`. */
#include "internal.h"

#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* An input's key: from its set and path (as stored), so that it does not
 * move when files are added, removed or reordered; below 2^23, so every id
 * (key * 1e9 + record) stays below 2^53, exact in JSON and JavaScript. */
#define INPUT_KEYS 8388607LL
static int64_t input_key_of(const char *set, const char *stored) {
  uint64_t h = ingest_hash_word(ingest_hash_word(SE3_HASH_INIT, set), stored);
  return 1 + (int64_t)(stage_hash_mix(h) % (uint64_t)INPUT_KEYS);
}

static int has_glob(const char *s) { return strpbrk(s, "*?[") != NULL; }

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
 * records against its part's key all the same: ingest_read_part.) */
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
    g->n_chunks += g->in[i].n_parts; /* (ingest_part_keys) */
  g->chunk_in = malloc(sizeof *g->chunk_in * (size_t)(g->n_chunks + 1));
  g->chunk_part = malloc(sizeof *g->chunk_part * (size_t)(g->n_chunks + 1));
  g->needed = calloc((size_t)g->n_chunks + 1, 1);
  g->relabel = calloc((size_t)g->n_chunks + 1, 1);
  if (!g->chunk_in || !g->chunk_part || !g->needed || !g->relabel)
    return stage_fail_at(ctx, NULL, "planning: out of memory");
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
void ingest_plan_say(struct stage_ctx *ctx, const struct ingest *g) {
  char line[2048];
  plan_describe(ctx, g, line, sizeof line, NULL, NULL, 0);
  if (line[0]) ctx->report->log(ctx, "%s", line);
}

/* run --dry-run: the plan's line, with the records to read. */
int ingest_explain(struct stage_ctx *ctx, char *line, size_t size, char *mol_sets, char *label_sets, size_t sets_size) {
  struct ingest *g = ctx->state;
  plan_describe(ctx, g, line, size, mol_sets, label_sets, sets_size);
  /* the labels that a file whose labels alone changed changes, read now */
  char said[1024] = "";
  for (int i = 0; i < g->n_in; i++) {
    if (g->in[i].status != IN_LABELS) continue;
    char names[512];
    int64_t n_rec = 0;
    int mols = 0;
    if (ingest_label_changes(ctx, g, i, names, sizeof names, &n_rec, &mols)) return STAGE_ERROR;
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
    if (g->relabel[c])
      relabel += n;
    else
      parse += n;
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

/* Begin's planning, after the settings: every input of every set added
 * (read.c), each one's parts keyed, the files found as they were when
 * planning began, then the inputs' keys and the chunks with work. */
int ingest_plan_inputs(struct stage_ctx *ctx, struct ingest *g) {
  const struct cfg_node *sets = cfg_get(ctx->root, "sets");
  for (int s = 0; sets && s < sets->n_kids; s++) {
    const struct cfg_node *set = sets->kids[s];
    for (int k = 0; k < set->n_kids; k++) {
      const struct cfg_node *item = set->kids[k];
      const char *path = cfg_str_opt(item, "path");
      if (!path) continue;
      if (has_glob(path)) {
        glob_t gl;
        int rc = glob(path, 0, NULL, &gl);
        if (rc != 0) {
          return stage_fail_at(ctx, cfg_get(item, "path"), "%s: %s", path,
                               rc == GLOB_NOMATCH ? "no file matches this pattern" : "cannot expand the pattern");
        }
        for (size_t i = 0; i < gl.gl_pathc; i++) {
          if (ingest_add_input(ctx, g, set->key, gl.gl_pathv[i], item)) {
            globfree(&gl);
            return STAGE_ERROR;
          }
        }
        globfree(&gl);
      } else {
        if (access(path, R_OK) != 0) return stage_fail_at(ctx, cfg_get(item, "path"), "%s: %s", path, strerror(errno));
        if (ingest_add_input(ctx, g, set->key, path, item)) return STAGE_ERROR;
      }
    }
  }
  if (g->n_in == 0) return stage_fail_at(ctx, sets, "no input files: add a set with at least one `path`");
  for (int i = 0; i < g->n_in; i++)
    if (ingest_part_keys(ctx, g, &g->in[i])) return STAGE_ERROR;
  if (inputs_unchanged(ctx, g) || assign_keys(ctx, g) || plan_parts(ctx, g)) return STAGE_ERROR;
  return STAGE_OK;
}
