/* chunks.c — what the stages share beyond the configuration tree: error
 * messages, the graph settings, the orders of a collective stage, reject rows, and the plan and chunk loop of a
 * per-molecule stage (graph, basis: one output row per molecule, computed from one input blob). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chem/records.h"
#include "common/fsutil.h"
#include "stage.h"

int stage_fail_at(struct stage_ctx *ctx, const struct cfg_node *n, const char *fmt, ...) {
  char msg[SE3_ERROR_MESSAGE];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  se3_error_set(&ctx->err, SE3_ERR_RUN, "%s", msg);
  if (n && n->file && n->line > 0) se3_error_at(&ctx->err, n->file, n->line, n->col);
  return STAGE_ERROR;
}

int stage_error_at(struct stage_ctx *ctx, const struct cfg_node *n, const char *fmt, ...) {
  char what[1024];
  if (fmt) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
  }
  int at_node = n && n->file && n->line > 0;
  if (at_node || (fmt && ctx->err.file[0])) {
    /* the callee's place into its text, before the context */
    enum se3_err_kind kind = ctx->err.kind != SE3_ERR_NONE ? ctx->err.kind : SE3_ERR_RUN;
    struct se3_error_text t = se3_error_str(&ctx->err);
    se3_error_set(&ctx->err, kind, "%s", t.s);
  }
  if (fmt) se3_error_context(&ctx->err, "%s", what);
  if (at_node) se3_error_at(&ctx->err, n->file, n->line, n->col);
  return STAGE_ERROR;
}

int stage_workdir_file_gone(const struct stage_ctx *ctx, const char *name) {
  char path[4096 + 64];
  snprintf(path, sizeof path, "%s/%s", ctx->workdir, name);
  struct stat sb;
  return lstat(path, &sb) != 0 && errno == ENOENT;
}

int stage_graph_settings(struct stage_ctx *ctx, struct graph_settings *gs) {
  char err[256];
  const struct cfg_node *bad;
  struct se3_error e2;
  if (graph_settings_read(cfg_get(ctx->root, "stages.graph"), gs, &bad, &e2))
    return stage_fail_at(ctx, bad, "%s", se3_error_format(&e2, err, sizeof err));
  return STAGE_OK;
}

int stage_sql_fail(struct stage_ctx *ctx, const char *what) {
  se3_error_set(&ctx->err, SE3_ERR_DB, "%s: %s", what, sqlite3_errmsg(ctx->db));
  return STAGE_ERROR;
}

int stage_order(struct stage_ctx *ctx, struct stage_order *o) { return comm_bcast(ctx->comm, o, sizeof *o); }

int stage_serve_end(struct stage_ctx *ctx) {
  struct stage_order o;
  memset(&o, 0, sizeof o);
  return stage_order(ctx, &o);
}

int stage_writer(const struct stage_ctx *ctx) { return comm_rank(ctx->comm) == 0; }

int stage_reject_mol(struct stage_ctx *ctx, const char *stage, int64_t id, int64_t chunk, const char *reason) {
  return stage_reject_mol_detail(ctx, stage, id, chunk, reason, NULL);
}

int stage_reject_mol_detail(struct stage_ctx *ctx, const char *stage, int64_t id, int64_t chunk, const char *reason,
                            const char *detail) {
  char *sql = sqlite3_mprintf(
      "INSERT OR REPLACE INTO rejects(stage, set_name, source_file, record_no, line, name, chunk, reason, mol_id, "
      "mol_hash, detail) SELECT ?1, set_name, source_file, record_no, NULL, name, ?2, ?3, id, mol_hash, ?5 "
      "FROM \"%w\".molecules WHERE id=?4",
      ctx->src ? ctx->src : "main");
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_prepare_v2(ctx->db, sql, -1, &st, NULL);
  sqlite3_free(sql);
  if (rc != SQLITE_OK) return stage_sql_fail(ctx, "writing a reject");
  sqlite3_bind_text(st, 1, stage, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 2, chunk);
  sqlite3_bind_text(st, 3, reason, -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(st, 4, id);
  if (detail) sqlite3_bind_text(st, 5, detail, -1, SQLITE_TRANSIENT);
  rc = sqlite3_step(st);
  sqlite3_finalize(st);
  return rc == SQLITE_DONE ? STAGE_OK : stage_sql_fail(ctx, "writing a reject");
}

/* ---- files by content ----------------------------------------------------- */

/* A 64-bit hash of a file's bytes, read in 1 MiB blocks (never whole):
 * four lanes of 8-byte words, each word multiplied in and the lane rotated
 * and multiplied again, then the lanes, the length and a final mix. It keys
 * work by what the file holds (an edited label, a replaced molecule file
 * redo what depends on them; a `touch` or a copy redoes nothing), at
 * several GB/s: far less than planning's scan of the same file. Not a
 * defence against a forger, only against a change. 0, or -1 with errno. */
#define FH_P1 0x9e3779b185ebca87ULL
#define FH_P2 0xc2b2ae3d27d4eb4fULL
static uint64_t fh_rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
static uint64_t fh_word(const unsigned char *p) { /* little-endian, whatever the host */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  uint64_t w;
  memcpy(&w, p, sizeof w);
  return w;
#else
  uint64_t w = 0;
  for (int i = 7; i >= 0; i--)
    w = (w << 8) | p[i];
  return w;
#endif
}
uint64_t stage_hash_mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  return x ^ (x >> 33);
}
/* The hash of fd's bytes from offset 0 (pread: its offset is left as it
 * is), in BLOCK-byte blocks each filled whole but the last, as
 * stage_file_hash always read them; each block also written to `copy` when
 * it is >= 0. 0, or -1 with errno (EIO for a copy that could not be
 * written: *copy_failed is then set). */
static int fd_hash_blocks(int fd, int copy, uint64_t *out, int *copy_failed) {
  enum { BLOCK = 1 << 20 };
  unsigned char *buf = malloc(BLOCK);
  if (!buf) {
    errno = ENOMEM;
    return -1;
  }
  uint64_t lane[4] = {FH_P1, FH_P2, ~FH_P1, ~FH_P2}, total = 0;
  for (;;) {
    size_t n = 0;
    while (n < BLOCK) {
      ssize_t r = pread(fd, buf + n, BLOCK - n, (off_t)(total + n));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) {
        int e = errno;
        free(buf);
        errno = e;
        return -1;
      }
      if (r == 0) break;
      n += (size_t)r;
    }
    if (n == 0) break;
    total += n;
    size_t full = n & ~(size_t)31; /* whole stripes of 4 words; a block is whole but the last */
    for (size_t i = 0; i < full; i += 32)
      for (int k = 0; k < 4; k++)
        lane[k] = fh_rotl(lane[k] ^ (fh_word(buf + i + 8 * k) * FH_P2), 31) * FH_P1;
    for (size_t i = full; i < n; i++) /* the file's last bytes, one at a time */
      lane[i & 3] = fh_rotl(lane[i & 3] ^ ((uint64_t)buf[i] * FH_P2), 23) * FH_P1;
    for (size_t w = 0; copy >= 0 && w < n;) {
      ssize_t r = write(copy, buf + w, n - w);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        int e = r < 0 ? errno : EIO;
        free(buf);
        *copy_failed = 1;
        errno = e;
        return -1;
      }
      w += (size_t)r;
    }
    if (n < BLOCK) break;
  }
  free(buf);
  uint64_t h = total * FH_P1;
  for (int k = 0; k < 4; k++)
    h = stage_hash_mix(h ^ lane[k]) * FH_P2;
  *out = stage_hash_mix(h);
  return 0;
}

int stage_file_open(const char *path, int *fd, struct se3_error *err) {
  struct stat sb;
  if ((*fd = se3_open_regular(path, &sb)) >= 0) return 0;
  if (sb.st_mode)
    se3_error_set(err, SE3_ERR_INPUT, "not a regular file (%s); inputs must be regular files",
                  rec_file_kind(sb.st_mode));
  else
    se3_error_set(err, SE3_ERR_IO, "cannot open: %s", strerror(errno));
  se3_error_at(err, path, 0, 0);
  return -1;
}

int stage_fd_hash(int fd, uint64_t *out) {
  int copy_failed = 0;
  return fd_hash_blocks(fd, -1, out, &copy_failed);
}

int stage_fd_copy_fd(int fd, int out, uint64_t *hash, struct se3_error *err) {
  int copy_failed = 0;
  if (fd_hash_blocks(fd, out, hash, &copy_failed) == 0) return 0;
  se3_error_set(err, SE3_ERR_IO, "%s: %s", copy_failed ? "cannot write its copy" : "cannot read", strerror(errno));
  return -1;
}

int stage_fd_copy(int fd, const char *to, uint64_t *hash, struct se3_error *err) {
  int out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (out < 0) {
    se3_error_set(err, SE3_ERR_IO, "copying it to %s: %s", to, strerror(errno));
    return -1;
  }
  int copy_failed = 0;
  int bad = fd_hash_blocks(fd, out, hash, &copy_failed);
  int e = errno;
  if (close(out) != 0 && !bad) {
    bad = -1;
    copy_failed = 1;
    e = errno;
  }
  if (bad) {
    if (copy_failed)
      se3_error_set(err, SE3_ERR_IO, "copying it to %s: %s", to, strerror(e));
    else
      se3_error_set(err, SE3_ERR_IO, "cannot read: %s", strerror(e));
    unlink(to);
    return -1;
  }
  return 0;
}

int stage_file_hash(const char *path, uint64_t *out) {
  struct stat sb;
  int fd = se3_open_regular(path, &sb);
  if (fd < 0) return -1; /* (errno EINVAL: not a regular file) */
  int bad = stage_fd_hash(fd, out);
  int e = errno;
  close(fd);
  errno = e;
  return bad;
}

/* ---- per-molecule stages ------------------------------------------------- */

void stage_ids_free(struct stage_ids *p) {
  free(p->ids);
  free(p->start);
  free(p->needed);
  memset(p, 0, sizeof *p);
}

int stage_ids_load(struct stage_ctx *ctx, const char *sql, const char *param, struct stage_ids *p, int64_t *n_chunks) {
  memset(p, 0, sizeof *p);
  /* a stage's own chunk_size (dock's, written or not: no default), else the run's */
  p->chunk_size =
      cfg_get(ctx->cfg, "chunk_size") ? cfg_int(ctx->cfg, "chunk_size") : cfg_int(ctx->root, "run.chunk_size");
  p->hash = SE3_HASH_INIT;
  sqlite3_stmt *st = NULL;
  if (!sql || sqlite3_prepare_v2(ctx->db, sql, -1, &st, NULL) != SQLITE_OK) return stage_sql_fail(ctx, "planning");
  if (param) sqlite3_bind_text(st, 1, param, -1, SQLITE_TRANSIENT);
  int rc;
  int64_t cap = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (p->n == cap) {
      cap = cap ? 2 * cap : 4096;
      int64_t *grown = realloc(p->ids, (size_t)cap * sizeof *grown);
      if (!grown) {
        sqlite3_finalize(st);
        stage_ids_free(p);
        return stage_fail_at(ctx, NULL, "planning: out of memory");
      }
      p->ids = grown;
    }
    p->ids[p->n] = sqlite3_column_int64(st, 0);
    p->hash = se3_hash_bytes(p->hash, &p->ids[p->n], sizeof p->ids[p->n]);
    p->n++;
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) {
    stage_ids_free(p);
    return stage_sql_fail(ctx, "planning");
  }
  /* chunks of chunk_size, each within one input file (at most one a molecule) */
  p->start = malloc((size_t)(p->n + 1) * sizeof *p->start);
  if (!p->start) {
    stage_ids_free(p);
    return stage_fail_at(ctx, NULL, "planning: out of memory");
  }
  for (int64_t i = 0; i < p->n; i++) {
    int64_t c0 = p->n_chunks ? p->start[p->n_chunks - 1] : -1;
    if (c0 < 0 || i - c0 == p->chunk_size || p->ids[i] / STAGE_ID_STRIDE != p->ids[c0] / STAGE_ID_STRIDE)
      p->start[p->n_chunks++] = i;
  }
  p->start[p->n_chunks] = p->n;
  *n_chunks = p->n_chunks;
  return STAGE_OK;
}

int stage_ids_pending(struct stage_ctx *ctx, const char *sql, const char *const *params, int n_params,
                      struct stage_ids *p) {
  p->needed = calloc((size_t)p->n_chunks + 1, 1);
  if (!p->needed) return stage_fail_at(ctx, NULL, "planning: out of memory");
  p->n_needed = 0;
  sqlite3_stmt *st = NULL;
  if (!sql || sqlite3_prepare_v2(ctx->db, sql, -1, &st, NULL) != SQLITE_OK)
    return stage_sql_fail(ctx, "planning what to redo");
  for (int i = 0; i < n_params; i++)
    sqlite3_bind_text(st, i + 1, params[i], -1, SQLITE_TRANSIENT);
  int rc;
  int64_t c = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    int64_t id = sqlite3_column_int64(st, 0);
    while (c < p->n_chunks && p->ids[p->start[c + 1] - 1] < id) /* the chunk that would hold it */
      c++;
    if (c < p->n_chunks && !p->needed[c]) {
      p->needed[c] = 1;
      p->n_needed += p->start[c + 1] - p->start[c];
    }
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return stage_sql_fail(ctx, "planning what to redo");
  ctx->chunk_needed = p->needed;
  ctx->items_done = p->n - p->n_needed;
  return STAGE_OK;
}

int stage_ids_moved(struct stage_ctx *ctx, const char *sql, const char *const *params, int n_params,
                    struct stage_ids *p) {
  sqlite3_stmt *st = NULL;
  if (!p->needed) return stage_fail_at(ctx, NULL, "planning: stage_ids_moved before stage_ids_pending");
  if (!sql || sqlite3_prepare_v2(ctx->db, sql, -1, &st, NULL) != SQLITE_OK)
    return stage_sql_fail(ctx, "planning what moved");
  for (int i = 0; i < n_params; i++)
    sqlite3_bind_text(st, i + 1, params[i], -1, SQLITE_TRANSIENT);
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    /* the file's chunk it sat in (the last one starting below it) and
     * those after it (few ids: rows left behind by a change) */
    int64_t id = sqlite3_column_int64(st, 0), file = id / STAGE_ID_STRIDE, at = -1;
    for (int64_t c = 0; c < p->n_chunks; c++)
      if (p->ids[p->start[c]] / STAGE_ID_STRIDE == file && p->ids[p->start[c]] < id) at = c;
    for (int64_t c = 0; c < p->n_chunks; c++)
      if (!p->needed[c] && p->ids[p->start[c]] / STAGE_ID_STRIDE == file && (c == at || p->ids[p->start[c]] > id)) {
        p->needed[c] = 1;
        p->n_needed += p->start[c + 1] - p->start[c];
      }
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return stage_sql_fail(ctx, "planning what moved");
  ctx->chunk_needed = p->needed;
  ctx->items_done = p->n - p->n_needed;
  return STAGE_OK;
}

char *stage_absent(const struct stage_ctx *ctx, const char *fmt) {
  char *q = sqlite3_mprintf(fmt, ctx->src);
  if (q && strcmp(ctx->src, "main")) { /* and the rows this database holds itself */
    char *own = sqlite3_mprintf(fmt, "main");
    q = own ? sqlite3_mprintf("%z) AND NOT EXISTS (%z", q, own) : (sqlite3_free(q), NULL);
  }
  return q ? sqlite3_mprintf(" AND NOT EXISTS (%z)", q) : NULL;
}

int stage_word_listed(const char *list, const char *word) {
  size_t n = strlen(word);
  for (const char *q = list; n && (q = strstr(q, word)) != NULL; q += n)
    if ((q == list || q[-1] == ' ') && (q[n] == ' ' || !q[n])) return 1;
  return 0;
}

static void items_clear(struct stage_item *it, int n) {
  for (int i = 0; i < n; i++) {
    free(it[i].in);
    free(it[i].out);
    memset(&it[i], 0, sizeof it[i]);
  }
}

int stage_map_chunk(struct stage_ctx *ctx, const struct stage_ids *p, int64_t chunk, const char *select_sql,
                    int threads, void (*compute)(const void *state, struct stage_item *it), const void *state,
                    int (*store)(struct stage_ctx *ctx, int64_t chunk, struct stage_item *it), int64_t *n_ok,
                    int64_t *n_rejected) {
  *n_ok = *n_rejected = 0;
  if (chunk < 0 || chunk >= p->n_chunks) return STAGE_OK;
  int64_t lo = p->start[chunk], hi = p->start[chunk + 1];
  if (threads <= 0) threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (threads < 1) threads = 1;
  /* A few molecules per thread at a time: enough to balance, little memory. */
  enum { PER_THREAD = 4 };
  int batch = threads * PER_THREAD;
  struct stage_item *items = calloc((size_t)batch, sizeof *items);
  sqlite3_stmt *sel = NULL;
  int ret = STAGE_OK;
  if (!items) return stage_fail_at(ctx, NULL, "out of memory");
  if (sqlite3_prepare_v2(ctx->db, select_sql, -1, &sel, NULL) != SQLITE_OK) {
    free(items);
    return stage_sql_fail(ctx, "reading the chunk");
  }
  sqlite3_bind_int64(sel, 1, p->ids[lo]);
  sqlite3_bind_int64(sel, 2, p->ids[hi - 1]);
  int done_reading = 0;
  while (!done_reading && ret == STAGE_OK) {
    if (*ctx->stop) {
      ret = STAGE_STOPPED;
      break;
    }
    int n = 0;
    while (n < batch) {
      int rc = sqlite3_step(sel);
      if (rc == SQLITE_DONE) {
        done_reading = 1;
        break;
      }
      if (rc != SQLITE_ROW) {
        ret = stage_sql_fail(ctx, "reading the chunk");
        break;
      }
      struct stage_item *it = &items[n++];
      it->id = sqlite3_column_int64(sel, 0);
      it->has_hash = sqlite3_column_count(sel) > 2 && sqlite3_column_type(sel, 2) != SQLITE_NULL;
      it->mol_hash = it->has_hash ? sqlite3_column_int64(sel, 2) : 0;
      it->in_len = (size_t)sqlite3_column_bytes(sel, 1);
      it->in = malloc(it->in_len ? it->in_len : 1);
      if (!it->in) {
        ret = stage_fail_at(ctx, NULL, "out of memory");
        break;
      }
      if (it->in_len) memcpy(it->in, sqlite3_column_blob(sel, 1), it->in_len);
    }
    if (ret != STAGE_OK) {
      items_clear(items, n);
      break;
    }
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int i = 0; i < n; i++)
      compute(state, &items[i]);
    for (int i = 0; i < n && ret == STAGE_OK; i++) {
      if (items[i].reason[0]) {
        ret = stage_reject_mol(ctx, ctx->name, items[i].id, chunk, items[i].reason);
        ++*n_rejected;
      } else {
        ret = store(ctx, chunk, &items[i]);
        ctx->chunk_bytes += (int64_t)items[i].out_len;
        ++*n_ok;
      }
    }
    items_clear(items, n);
    ctx->report->advance(ctx, n);
  }
  sqlite3_finalize(sel);
  free(items);
  return ret;
}
