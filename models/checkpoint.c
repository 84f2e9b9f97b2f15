/* checkpoint.c — named arrays in one atomically replaced file (checkpoint.h). */
#define _GNU_SOURCE
#include "models/checkpoint.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

int se3_ckpt_begin(struct se3_ckpt_writer *w, const char *path, char *err, size_t errlen) {
  memset(w, 0, sizeof *w);
  w->hash = 0xcbf29ce484222325ULL;
  if (atomic_file_open(&w->af, path, err, errlen)) return -1;
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

int se3_ckpt_commit(struct se3_ckpt_writer *w, char *err, size_t errlen) {
  uint8_t tail[12];
  memcpy(tail, CK_END, 4);
  le_put_u64(tail + 4, w->hash);
  if (!w->failed && fwrite(tail, 1, sizeof tail, w->af.f) != sizeof tail) w->failed = errno ? errno : EIO;
  if (w->failed) {
    snprintf(err, errlen, "%s: cannot write the checkpoint: %s", w->af.tmp, strerror(w->failed));
    se3_ckpt_abort(w);
    return -1;
  }
  int rc = atomic_file_commit(&w->af, err, errlen);
  memset(w, 0, sizeof *w);
  return rc;
}

/* ---- reading ------------------------------------------------------------------ */

void se3_ckpt_free(struct se3_ckpt *c) {
  free(c->buf);
  free(c->rec);
  memset(c, 0, sizeof *c);
}

int se3_ckpt_load(struct se3_ckpt *c, const char *path, char *err, size_t errlen) {
  memset(c, 0, sizeof *c);
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errlen, "%s: %s", path, strerror(errno));
    return -1;
  }
  size_t cap = 1 << 16;
  c->buf = malloc(cap);
  size_t n;
  while (c->buf && (n = fread(c->buf + c->len, 1, cap - c->len, f)) > 0) {
    c->len += n;
    if (c->len == cap) {
      uint8_t *g = realloc(c->buf, cap * 2);
      if (!g) break;
      c->buf = g;
      cap *= 2;
    }
  }
  int rerr = ferror(f);
  fclose(f);
  if (!c->buf || rerr) {
    snprintf(err, errlen, "%s: cannot read the checkpoint", path);
    se3_ckpt_free(c);
    return -1;
  }
  const char *why = NULL;
  if (c->len < 8 + 12 || memcmp(c->buf, CK_MAGIC, 4) != 0)
    why = "not a se3screen checkpoint";
  else if (le_get_u16(c->buf + 4) != CK_VERSION)
    why = "unsupported checkpoint version";
  else if (memcmp(c->buf + c->len - 12, CK_END, 4) != 0)
    why = "the checkpoint is cut short";
  else if (fnv(0xcbf29ce484222325ULL, c->buf, c->len - 12) != le_get_u64(c->buf + c->len - 8))
    why = "the checkpoint is corrupt (its checksum does not match)";
  size_t pos = 8, end = c->len - 12;
  while (!why && pos < end) {
    if (end - pos < 2) {
      why = "a record runs past the end";
      break;
    }
    size_t nl = le_get_u16(c->buf + pos);
    if (end - pos < 12 + nl) {
      why = "a record runs past the end";
      break;
    }
    unsigned type = c->buf[pos + 2 + nl];
    uint64_t count = le_get_u64(c->buf + pos + 4 + nl);
    if (type > SE3_CK_U8 || count > (end - pos - 12 - nl) / type_size[type]) {
      why = "a record runs past the end";
      break;
    }
    struct se3_ckpt_record *g = realloc(c->rec, (size_t)(c->n_rec + 1) * sizeof *g);
    if (!g) {
      why = "out of memory";
      break;
    }
    c->rec = g;
    struct se3_ckpt_record *r = &c->rec[c->n_rec++];
    memcpy(r->name, c->buf + pos + 2, nl);
    r->name[nl] = 0;
    r->type = (enum se3_ck_type)type;
    r->count = count;
    r->data = c->buf + pos + 12 + nl;
    pos += 12 + nl + (size_t)count * type_size[type];
  }
  if (why) {
    snprintf(err, errlen, "%s: %s", path, why);
    se3_ckpt_free(c);
    return -1;
  }
  return 0;
}

const struct se3_ckpt_record *se3_ckpt_find(const struct se3_ckpt *c, const char *name) {
  for (int i = 0; i < c->n_rec; i++)
    if (!strcmp(c->rec[i].name, name)) return &c->rec[i];
  return NULL;
}

int se3_ckpt_get(const struct se3_ckpt *c, const char *name, enum se3_ck_type type, void *out, uint64_t count) {
  const struct se3_ckpt_record *r = se3_ckpt_find(c, name);
  if (!r || r->type != type || r->count != count) return -1;
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
