/* checkpoint.c — named arrays in one atomically replaced file (checkpoint.h). */
#define _GNU_SOURCE
#include "models/checkpoint.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "common/fsutil.h"
#include "common/le.h"

#define CK_MAGIC "SE3C"
#define CK_END "END!"
#define CK_VERSION 1

static const size_t type_size[4] = {4, 8, 8, 1};

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++) {
    h ^= b[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

static void wr(struct se3_ckpt_writer *w, const void *p, size_t n) {
  if (w->failed || n == 0) return;
  if (fwrite(p, 1, n, w->af.f) != n) w->failed = errno ? errno : EIO;
  w->hash = fnv(w->hash, p, n);
}

int se3_ckpt_begin(struct se3_ckpt_writer *w, const char *path, struct se3_error *err) {
  memset(w, 0, sizeof *w);
  w->hash = 0xcbf29ce484222325ULL;
  if (atomic_file_open(&w->af, path, err)) { return -1; }
  uint8_t head[8];
  memcpy(head, CK_MAGIC, 4);
  le_put_u16(head + 4, CK_VERSION);
  le_put_u16(head + 6, 0);
  wr(w, head, sizeof head);
  return 0;
}

void se3_ckpt_put(struct se3_ckpt_writer *w, const char *name, enum se3_ck_type type, const void *data,
                  uint64_t count) {
  size_t nl = strlen(name);
  if (nl > 255 || (unsigned)type > SE3_CK_U8) {
    w->failed = EINVAL;
    return;
  }
  uint8_t head[2 + 255 + 2 + 8];
  le_put_u16(head, (uint16_t)nl);
  memcpy(head + 2, name, nl);
  head[2 + nl] = (uint8_t)type;
  head[3 + nl] = 0;
  le_put_u64(head + 4 + nl, count);
  wr(w, head, 12 + nl);
  /* values through a buffer, converted to little-endian */
  uint8_t buf[1 << 14];
  size_t per = type_size[type], batch = sizeof buf / per;
  const uint8_t *src = data;
  for (uint64_t i = 0; i < count; i += batch) {
    size_t n = count - i < batch ? (size_t)(count - i) : batch;
    for (size_t k = 0; k < n; k++) {
      const uint8_t *v = src + (i + k) * per;
      uint8_t *o = buf + k * per;
      if (type == SE3_CK_F32) {
        float x;
        memcpy(&x, v, 4);
        le_put_f32(o, x);
      } else if (type == SE3_CK_F64) {
        double x;
        memcpy(&x, v, 8);
        le_put_f64(o, x);
      } else if (type == SE3_CK_I64) {
        int64_t x;
        memcpy(&x, v, 8);
        le_put_u64(o, (uint64_t)x);
      } else {
        o[0] = v[0];
      }
    }
    wr(w, buf, n * per);
  }
}

void se3_ckpt_abort(struct se3_ckpt_writer *w) {
  atomic_file_abort(&w->af);
  memset(w, 0, sizeof *w);
}

int se3_ckpt_commit(struct se3_ckpt_writer *w, struct se3_error *err) {
  uint8_t tail[12];
  memcpy(tail, CK_END, 4);
  le_put_u64(tail + 4, w->hash);
  if (!w->failed && fwrite(tail, 1, sizeof tail, w->af.f) != sizeof tail) w->failed = errno ? errno : EIO;
  if (w->failed) {
    se3_error_set(err, SE3_ERR_IO, "cannot write the checkpoint: %s", strerror(w->failed));
    se3_error_at(err, w->af.tmp, 0, 0);
    se3_ckpt_abort(w);
    return -1;
  }
  int rc = atomic_file_commit(&w->af, err);
  memset(w, 0, sizeof *w);
  return rc;
}

/* ---- reading ------------------------------------------------------------------ */

size_t se3_ckpt_type_size(enum se3_ck_type type) {
  return (unsigned)type <= SE3_CK_U8 ? type_size[type] : 0;
}

void se3_ckpt_free(struct se3_ckpt *c) {
  if (c->has_fd) close(c->fd);
  free(c->buf);
  free(c->rec);
  free(c->small);
  memset(c, 0, sizeof *c);
  c->fd = -1;
}

/* n bytes at off: from the buffer once read, else through the descriptor.
 * 0, or -1 (a short read: the file shrank). */
static int fetch(const struct se3_ckpt *c, uint64_t off, void *dst, size_t n) {
  if (c->buf) {
    if (off > c->len || n > c->len - off) return -1;
    memcpy(dst, c->buf + off, n);
    return 0;
  }
  uint8_t *d = dst;
  while (n > 0) {
    ssize_t k = pread(c->fd, d, n, (off_t)off);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    d += k;
    off += (uint64_t)k;
    n -= (size_t)k;
  }
  return 0;
}

/* Sets err to the reason, of the kind, at the checkpoint's path (printed
 * "PATH: reason"); returns -1. */
static int refuse_as(const struct se3_ckpt *c, struct se3_error *err, enum se3_err_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int refuse_as(const struct se3_ckpt *c, struct se3_error *err, enum se3_err_kind kind, const char *fmt, ...) {
  char why[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  se3_error_set(err, kind, "%s", why);
  se3_error_at(err, c->path, 0, 0);
  return -1;
}
/* The checkpoint refused: what it holds is not what a checkpoint may hold. */
#define refuse(c, err, ...) refuse_as(c, err, SE3_ERR_MODEL, __VA_ARGS__)
/* The file could not be read through, or changed meanwhile. */
#define refuse_io(c, err, ...) refuse_as(c, err, SE3_ERR_IO, __VA_ARGS__)

/* The records' headers from byte 8 to the end marker, checked in place.
 * check 0: stores them in c->rec; 1: requires them to be what is stored
 * (the file read whole is the file whose headers were checked). */
static int walk(struct se3_ckpt *c, int check, struct se3_error *err) {
  uint64_t pos = 8, end = c->len - 12;
  int n = 0;
  while (pos < end) {
    if (n == SE3_CKPT_MAX_RECORDS)
      return refuse(c, err, "more than %d records (a checkpoint holds a dozen)", SE3_CKPT_MAX_RECORDS);
    uint8_t head[2 + 255 + 10];
    if (end - pos < 2) return refuse(c, err, "record %d runs past the end of the file", n + 1);
    if (fetch(c, pos, head, 2)) return refuse_io(c, err, "the file became shorter while it was read");
    size_t nl = le_get_u16(head);
    if (nl == 0 || nl > 255)
      return refuse(c, err, "record %d: its name is %zu bytes long (1 to 255 allowed)", n + 1, nl);
    if (end - pos < 12 + (uint64_t)nl) return refuse(c, err, "record %d runs past the end of the file", n + 1);
    if (fetch(c, pos + 2, head + 2, nl + 10)) return refuse_io(c, err, "the file became shorter while it was read");
    for (size_t i = 0; i < nl; i++)
      if (head[2 + i] <= 0x20 || head[2 + i] >= 0x7f)
        return refuse(c, err, "record %d: its name has the byte 0x%02x (printable ASCII only)", n + 1, head[2 + i]);
    char name[256];
    memcpy(name, head + 2, nl);
    name[nl] = 0;
    unsigned type = head[2 + nl];
    if (type > SE3_CK_U8) return refuse(c, err, "record \"%s\": unknown value type %u", name, type);
    uint64_t count = le_get_u64(head + 4 + nl), room = (end - pos - 12 - nl) / type_size[type];
    if (count > room)
      return refuse(c, err, "record \"%s\": %llu values run past the end of the file (room for %llu)", name,
                    (unsigned long long)count, (unsigned long long)room);
    uint64_t at = pos + 12 + nl;
    if (check) {
      const struct se3_ckpt_record *r = n < c->n_rec ? &c->rec[n] : NULL;
      if (!r || strcmp(r->name, name) || r->type != (enum se3_ck_type)type || r->count != count || r->offset != at)
        return refuse_io(c, err, "the file changed while it was read");
    } else {
      for (int i = 0; i < n; i++)
        if (!strcmp(c->rec[i].name, name)) return refuse(c, err, "record \"%s\" appears twice", name);
      struct se3_ckpt_record *g = realloc(c->rec, (size_t)(n + 1) * sizeof *g);
      if (!g) return refuse_as(c, err, SE3_ERR_MEMORY, "out of memory");
      c->rec = g;
      struct se3_ckpt_record *r = &c->rec[n];
      memset(r, 0, sizeof *r);
      memcpy(r->name, name, nl + 1);
      r->type = (enum se3_ck_type)type;
      r->count = count;
      r->offset = at;
      c->n_rec = n + 1;
    }
    n++;
    pos = at + count * type_size[type];
  }
  if (check && n != c->n_rec) return refuse_io(c, err, "the file changed while it was read");
  return 0;
}

int se3_ckpt_open(struct se3_ckpt *c, const char *path, uint64_t max_bytes, struct se3_error *err) {
  memset(c, 0, sizeof *c);
  c->fd = -1;
  snprintf(c->path, sizeof c->path, "%s", path);
  if (!max_bytes || max_bytes > SE3_CKPT_MAX_BYTES) max_bytes = SE3_CKPT_MAX_BYTES;
  /* (a FIFO is refused without waiting for a writer) */
  struct stat sb;
  int fd = se3_open_regular(path, &sb);
  if (fd < 0 && !sb.st_mode) {
    se3_error_set(err, SE3_ERR_IO, "%s", strerror(errno));
    se3_error_at(err, path, 0, 0);
    return -1;
  }
  if (fd < 0) {
    se3_error_set(err, SE3_ERR_INPUT, "not a regular file (%s): a checkpoint is read from a file",
                  S_ISDIR(sb.st_mode)    ? "a folder"
                  : S_ISFIFO(sb.st_mode) ? "a FIFO"
                  : S_ISSOCK(sb.st_mode) ? "a socket"
                                         : "a device");
    se3_error_at(err, path, 0, 0);
    return -1;
  }
  c->fd = fd;
  c->has_fd = 1;
  c->len = (size_t)sb.st_size;
  uint8_t head[8], tail[12];
  int r;
  if (sb.st_size < 8 + 12 || fetch(c, 0, head, 8) || memcmp(head, CK_MAGIC, 4) != 0)
    r = refuse(c, err, "not a se3screen checkpoint");
  else if (le_get_u16(head + 4) != CK_VERSION)
    r = refuse(c, err, "unsupported checkpoint version %u (this se3screen reads %d)", le_get_u16(head + 4), CK_VERSION);
  else if (le_get_u16(head + 6) != 0)
    r = refuse(c, err, "unknown header flags 0x%04x", le_get_u16(head + 6));
  else if ((uint64_t)sb.st_size > max_bytes)
    r = refuse(c, err, "%lld bytes, more than the %llu a checkpoint may have here", (long long)sb.st_size,
               (unsigned long long)max_bytes);
  else if (fetch(c, c->len - 12, tail, 12) || memcmp(tail, CK_END, 4) != 0)
    r = refuse(c, err, "the checkpoint is cut short");
  else
    r = walk(c, 0, err);
  /* the small records' values */
  uint64_t total = 0;
  for (int i = 0; r == 0 && i < c->n_rec; i++) {
    uint64_t bytes = c->rec[i].count * type_size[c->rec[i].type];
    if (bytes <= SE3_CKPT_SMALL) total += bytes;
  }
  if (r == 0 && total > SE3_CKPT_SMALL_TOTAL) total = SE3_CKPT_SMALL_TOTAL;
  if (r == 0 && total && !(c->small = malloc(total))) r = refuse_as(c, err, SE3_ERR_MEMORY, "out of memory");
  uint64_t at = 0;
  for (int i = 0; r == 0 && i < c->n_rec; i++) {
    struct se3_ckpt_record *q = &c->rec[i];
    uint64_t bytes = q->count * type_size[q->type];
    if (bytes > SE3_CKPT_SMALL || bytes > total - at) continue;
    if (fetch(c, q->offset, c->small + at, (size_t)bytes))
      r = refuse_io(c, err, "the file became shorter while it was read");
    q->data = c->small + at;
    at += bytes;
  }
  if (r) se3_ckpt_free(c);
  return r;
}

int se3_ckpt_read(struct se3_ckpt *c, struct se3_error *err) {
  int r = 0;
  if (!(c->buf = malloc(c->len ? c->len : 1))) r = refuse_as(c, err, SE3_ERR_MEMORY, "out of memory");
  /* through the descriptor opened (the file checked), every byte, and no more */
  size_t got = 0;
  while (r == 0 && got < c->len) {
    ssize_t k = pread(c->fd, c->buf + got, c->len - got, (off_t)got);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) r = refuse_io(c, err, "cannot read the checkpoint: %s", strerror(errno));
    if (k == 0) r = refuse_io(c, err, "the file became shorter while it was read");
    if (k > 0) got += (size_t)k;
  }
  uint8_t more;
  if (r == 0 && pread(c->fd, &more, 1, (off_t)c->len) != 0) r = refuse_io(c, err, "the file grew while it was read");
  if (r == 0 && (memcmp(c->buf, CK_MAGIC, 4) != 0 || memcmp(c->buf + c->len - 12, CK_END, 4) != 0))
    r = refuse_io(c, err, "the file changed while it was read");
  if (r == 0 && fnv(0xcbf29ce484222325ULL, c->buf, c->len - 12) != le_get_u64(c->buf + c->len - 8))
    r = refuse(c, err, "the checkpoint is corrupt (its checksum does not match)");
  if (r == 0) r = walk(c, 1, err);
  for (int i = 0; r == 0 && i < c->n_rec; i++) {
    struct se3_ckpt_record *q = &c->rec[i];
    const uint8_t *in = c->buf + q->offset;
    if (q->data && memcmp(q->data, in, q->count * type_size[q->type]) != 0)
      r = refuse_io(c, err, "the file changed while it was read");
    q->data = in;
  }
  if (r) {
    se3_ckpt_free(c);
    return -1;
  }
  free(c->small);
  c->small = NULL;
  close(c->fd);
  c->fd = -1;
  c->has_fd = 0;
  return 0;
}

int se3_ckpt_load_max(struct se3_ckpt *c, const char *path, uint64_t max_bytes, struct se3_error *err) {
  if (se3_ckpt_open(c, path, max_bytes, err)) return -1;
  return se3_ckpt_read(c, err);
}

int se3_ckpt_load(struct se3_ckpt *c, const char *path, struct se3_error *err) {
  return se3_ckpt_load_max(c, path, 0, err);
}

const struct se3_ckpt_record *se3_ckpt_find(const struct se3_ckpt *c, const char *name) {
  for (int i = 0; i < c->n_rec; i++)
    if (!strcmp(c->rec[i].name, name)) return &c->rec[i];
  return NULL;
}

int se3_ckpt_get(const struct se3_ckpt *c, const char *name, enum se3_ck_type type, void *out, uint64_t count) {
  const struct se3_ckpt_record *r = se3_ckpt_find(c, name);
  if (!r || !r->data || r->type != type || r->count != count) return -1;
  uint8_t *o = out;
  size_t per = type_size[type];
  for (uint64_t i = 0; i < count; i++) {
    const uint8_t *v = r->data + i * per;
    if (type == SE3_CK_F32) {
      float x = le_get_f32(v);
      memcpy(o + i * per, &x, 4);
    } else if (type == SE3_CK_F64) {
      double x = le_get_f64(v);
      memcpy(o + i * per, &x, 8);
    } else if (type == SE3_CK_I64) {
      int64_t x = (int64_t)le_get_u64(v);
      memcpy(o + i * per, &x, 8);
    } else {
      o[i] = v[0];
    }
  }
  return 0;
}
