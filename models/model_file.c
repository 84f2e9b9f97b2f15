/* model_file.c — a trained model's checkpoint, read and checked as untrusted
 * input (model_file.h). */
#define _GNU_SOURCE
#include "models/model_file.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cfgtree.h"
#include "common/le.h"
#include "models/checkpoint.h"

/* Bytes a checkpoint may hold beyond its parameters and Adam's two moments:
 * the card, the standardisation, the training state (a dozen small records
 * in the files train writes). */
#define SLACK_BYTES ((uint64_t)16 << 20)

void se3_model_file_free(struct se3_model_file *mf) {
  free(mf->params);
  free(mf->card);
  free(mf->train_fps);
  free(mf->train_names);
  memset(mf, 0, sizeof *mf);
}

/* Sets err: the checkpoint refused (SE3_ERR_MODEL), at its path (printed
 * "PATH: reason"); returns -1. */
static int fail(struct se3_error *err, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(struct se3_error *err, const char *path, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  se3_error_vset(err, SE3_ERR_MODEL, fmt, ap);
  va_end(ap);
  se3_error_at(err, path, 0, 0);
  return -1;
}

/* err, set by se3_config_check or se3_model_init ("model: why"), as the
 * checkpoint's "arch" refused: "PATH: arch: why", of kind SE3_ERR_MODEL
 * (out of memory keeps its kind). Returns -1. */
static int arch_refused(struct se3_error *err, const char *path) {
  if (!err) return -1;
  if (!strncmp(err->message, "model: ", 7)) memmove(err->message, err->message + 7, strlen(err->message + 7) + 1);
  se3_error_context(err, "arch");
  if (err->kind != SE3_ERR_MEMORY) err->kind = SE3_ERR_MODEL;
  se3_error_at(err, path, 0, 0);
  return -1;
}

/* Sets err: out of memory (SE3_ERR_MEMORY) reading the checkpoint; -1. */
static int oom(struct se3_error *err, const char *path, const char *what) {
  se3_error_set(err, SE3_ERR_MEMORY, "%s", what);
  se3_error_at(err, path, 0, 0);
  return -1;
}

static const char *type_name(enum se3_ck_type t) {
  static const char *const names[] = {"f32", "f64", "i64", "u8"};
  return (unsigned)t <= SE3_CK_U8 ? names[t] : "?";
}

/* Record name: absent (NULL), or of type t with a count in [lo, hi]; else
 * -1 with the reason in err. */
static int record(const struct se3_ckpt *c, const char *path, const char *name, enum se3_ck_type t, uint64_t lo,
                  uint64_t hi, const struct se3_ckpt_record **out, struct se3_error *err) {
  const struct se3_ckpt_record *r = se3_ckpt_find(c, name);
  *out = r;
  if (!r) return 0;
  if (r->type != t)
    return fail(err, path, "record \"%s\": values of type %s, expected %s", name, type_name(r->type), type_name(t));
  const char *what = t == SE3_CK_U8 ? "bytes" : "values";
  if (r->count < lo || r->count > hi) {
    if (lo == hi)
      return fail(err, path, "record \"%s\": %llu %s, expected %llu", name, (unsigned long long)r->count, what,
                  (unsigned long long)lo);
    return fail(err, path, "record \"%s\": %llu %s (%llu to %llu allowed)", name, (unsigned long long)r->count, what,
                (unsigned long long)lo, (unsigned long long)hi);
  }
  return 0;
}

/* Text record r (u8, no NUL byte; control bytes refused unless lines) into
 * out[n]. 0, or -1 with the reason. */
static int text(const struct se3_ckpt_record *r, const char *path, int lines, char *out, size_t n,
                struct se3_error *err) {
  if (r->count >= n)
    return fail(err, path, "record \"%s\": %llu bytes of text (at most %zu)", r->name, (unsigned long long)r->count,
                n - 1);
  for (uint64_t i = 0; i < r->count; i++) {
    uint8_t b = r->data[i];
    if (b == 0 || (b < 0x20 && !(lines && b == '\n')) || b == 0x7f)
      return fail(err, path, "record \"%s\": byte %llu is 0x%02x, not text", r->name, (unsigned long long)i + 1, b);
  }
  memcpy(out, r->data, (size_t)r->count);
  out[r->count] = 0;
  return 0;
}

/* The architecture: parsed, in range, and what the caller feeds. */
static int read_arch(const struct se3_ckpt *c, const char *path, const struct se3_model_expect *ex,
                     struct se3_model_file *mf, struct se3_error *err) {
  const struct se3_ckpt_record *r;
  char arch[1024];
  if (record(c, path, "arch", SE3_CK_U8, 1, sizeof arch - 1, &r, err)) return -1;
  if (r) {
    if (text(r, path, 0, arch, sizeof arch, err)) return -1;
  } else if (ex && ex->arch) {
    snprintf(arch, sizeof arch, "%s", ex->arch);
  } else {
    return fail(err, path, "no record \"arch\": not a trained model's checkpoint");
  }
  if (se3_config_parse(arch, &mf->cfg)) return fail(err, path, "arch: \"%.200s\" is not a model configuration", arch);
  if (se3_config_check(&mf->cfg, err)) return arch_refused(err, path);
  const struct se3_config *g = &mf->cfg;
  if (ex && ex->edge_in && g->edge_in != ex->edge_in)
    return fail(err, path, "arch: edge_in=%d, but this se3screen's graphs have %d edge features", g->edge_in,
                ex->edge_in);
  if (ex && ex->outputs && g->outputs != ex->outputs)
    return fail(err, path, "arch: outputs=%d, but scoring keeps %d value%s a molecule", g->outputs, ex->outputs,
                ex->outputs == 1 ? "" : "s");
  if (ex && ex->node_in && g->node_in != ex->node_in)
    return fail(err, path, "arch: node_in=%d, but the featurisation gives %d node features an atom", g->node_in,
                ex->node_in);
  struct se3_model m;
  if (se3_model_init(&m, g, err)) return arch_refused(err, path);
  mf->n_params = m.n_params;
  se3_model_free(&m);
  return 0;
}

/* The small records scoring reads: target, task, standardisation, atomref,
 * card. */
static int read_small(const struct se3_ckpt *c, const char *path, const struct se3_model_expect *ex,
                      struct se3_model_file *mf, struct se3_error *err) {
  const struct se3_ckpt_record *r;
  if (record(c, path, "target", SE3_CK_U8, 1, sizeof mf->target - 1, &r, err)) return -1;
  if (r) {
    if (text(r, path, 0, mf->target, sizeof mf->target, err)) return -1;
    mf->has_target = 1;
  }
  if (record(c, path, "classification", SE3_CK_I64, 1, 1, &r, err)) return -1;
  if (r) {
    int64_t task = (int64_t)le_get_u64(r->data);
    if (task != 0 && task != 1)
      return fail(err, path, "record \"classification\": %lld (0 or 1 allowed)", (long long)task);
    mf->classify = (int)task;
  }
  if (record(c, path, "best_mean_std", SE3_CK_F64, 3, 3, &r, err)) return -1;
  if (r) {
    mf->has_stats = 1;
    mf->best = le_get_f64(r->data);
    mf->mean = le_get_f64(r->data + 8);
    mf->std = le_get_f64(r->data + 16);
    if (!(fabs(mf->mean) <= SE3_STAT_MAX))
      return fail(err, path, "record \"best_mean_std\": the target's mean is %g (within +-%g allowed)", mf->mean,
                  SE3_STAT_MAX);
    if (!(mf->std > 0 && mf->std <= SE3_STAT_MAX))
      return fail(err, path,
                  "record \"best_mean_std\": the target's standard deviation is %g (above 0, at most %g allowed)",
                  mf->std, SE3_STAT_MAX);
  } else if (ex && ex->need_stats) {
    return fail(err, path, "no record \"best_mean_std\": the model's standardisation is missing");
  }
  const struct se3_ckpt_record *z, *v;
  /* (a model without atomref writes both with no values) */
  if (record(c, path, "atomref_z", SE3_CK_I64, 0, SE3_ATOMREF_MAX, &z, err)) return -1;
  if (record(c, path, "atomref", SE3_CK_F64, z ? z->count : 0, z ? z->count : SE3_ATOMREF_MAX, &v, err)) return -1;
  if (!z != !v)
    return fail(err, path, "record \"%s\" without \"%s\"", z ? "atomref_z" : "atomref", z ? "atomref" : "atomref_z");
  if (z) {
    mf->n_atomref = (int)z->count;
    for (int i = 0; i < mf->n_atomref; i++) {
      int64_t e = (int64_t)le_get_u64(z->data + 8 * i);
      double ref = le_get_f64(v->data + 8 * i);
      if (e < 1 || e > 118)
        return fail(err, path, "record \"atomref_z\": value %d is %lld (an atomic number 1 to 118 allowed)", i + 1,
                    (long long)e);
      for (int j = 0; j < i; j++)
        if (mf->atomref_z[j] == e)
          return fail(err, path, "record \"atomref_z\": element %lld appears twice", (long long)e);
      if (!(fabs(ref) <= SE3_STAT_MAX))
        return fail(err, path, "record \"atomref\": value %d is %g (within +-%g allowed)", i + 1, ref, SE3_STAT_MAX);
      mf->atomref_z[i] = e;
      mf->atomref[i] = ref;
    }
  }
  if (record(c, path, "settings", SE3_CK_U8, 0, SE3_CKPT_SMALL, &r, err)) return -1;
  if (r) {
    if (!(mf->card = malloc((size_t)r->count + 1))) return oom(err, path, "out of memory");
    if (text(r, path, 1, mf->card, (size_t)r->count + 1, err)) return -1;
    mf->card_len = (size_t)r->count;
    mf->has_card = 1;
  }
  return 0;
}

/* The training set's records (model_file.h) by their headers, before the
 * file is read whole: all three or none, each of its type, and the
 * fingerprints a whole number within SE3_TRAIN_SET_MAX, the names' bytes
 * within what that many names can take. *bytes: what they hold. */
static int train_set_head(const struct se3_ckpt *c, const char *path, struct se3_model_file *mf, uint64_t *bytes,
                          struct se3_error *err) {
  static const char *const names[3] = {"train_fps_morgan2", "train_names", "train_molecules"};
  const struct se3_ckpt_record *r[3];
  *bytes = 0;
  for (int i = 0; i < 3; i++)
    r[i] = se3_ckpt_find(c, names[i]);
  if (!r[0] && !r[1] && !r[2]) return 0; /* a model from before 2026-11-29 */
  int there = r[0] ? 0 : r[1] ? 1 : 2;
  for (int i = 0; i < 3; i++)
    if (!r[i]) return fail(err, path, "record \"%s\" without \"%s\"", names[there], names[i]);
  const struct se3_ckpt_record *f;
  if (record(c, path, names[0], SE3_CK_I64, 0, UINT64_MAX, &f, err)) return -1;
  uint64_t n = f->count / SE3_TRAIN_FP_WORDS;
  if (f->count == 0 || f->count % SE3_TRAIN_FP_WORDS)
    return fail(err, path, "record \"%s\": %llu values, not a whole number of fingerprints (%d values each)", names[0],
                (unsigned long long)f->count, SE3_TRAIN_FP_WORDS);
  if (n > SE3_TRAIN_SET_MAX)
    return fail(err, path, "record \"%s\": %llu fingerprints (at most %d allowed)", names[0], (unsigned long long)n,
                SE3_TRAIN_SET_MAX);
  if (record(c, path, names[1], SE3_CK_U8, n, n * (SE3_TRAIN_NAME_MAX + 1), &r[1], err) ||
      record(c, path, names[2], SE3_CK_I64, 1, 1, &r[2], err))
    return -1;
  mf->train_n = (int64_t)n;
  *bytes = 8 * f->count + r[1]->count + 8;
  return 0;
}

/* The training set's values, the file read: as many names as fingerprints,
 * each text within SE3_TRAIN_NAME_MAX bytes, the training split at least
 * as large; kept when asked for. */
static int train_set_values(const struct se3_ckpt *c, const char *path, int keep, struct se3_model_file *mf,
                            struct se3_error *err) {
  if (!mf->train_n) return 0;
  const struct se3_ckpt_record *f = se3_ckpt_find(c, "train_fps_morgan2"), *nm = se3_ckpt_find(c, "train_names"),
                               *tot = se3_ckpt_find(c, "train_molecules");
  mf->train_total = (int64_t)le_get_u64(tot->data);
  if (mf->train_total < mf->train_n || mf->train_total > ((int64_t)1 << 40))
    return fail(err, path,
                "record \"train_molecules\": %lld (%lld to %lld allowed: the fingerprints carried, "
                "or more)",
                (long long)mf->train_total, (long long)mf->train_n, (long long)1 << 40);
  int64_t k = 0;
  uint64_t start = 0;
  for (uint64_t i = 0; i < nm->count; i++) {
    uint8_t b = nm->data[i];
    if (b == 0) {
      if (i - start > SE3_TRAIN_NAME_MAX)
        return fail(err, path, "record \"train_names\": name %lld is %llu bytes long (at most %d allowed)",
                    (long long)k + 1, (unsigned long long)(i - start), SE3_TRAIN_NAME_MAX);
      k++;
      start = i + 1;
    } else if (b < 0x20 || b == 0x7f) {
      return fail(err, path, "record \"train_names\": byte %llu is 0x%02x, not text", (unsigned long long)i + 1, b);
    }
  }
  if (k != mf->train_n || start != nm->count)
    return fail(err, path, "record \"train_names\": %lld name%s ended by a NUL byte%s, for %lld fingerprints",
                (long long)k, k == 1 ? "" : "s", start != nm->count ? " and bytes after the last" : "",
                (long long)mf->train_n);
  if (!keep) return 0;
  mf->train_fps = malloc((size_t)f->count * sizeof *mf->train_fps);
  mf->train_names = malloc((size_t)nm->count);
  if (!mf->train_fps || !mf->train_names) return oom(err, path, "out of memory for the training set");
  for (uint64_t i = 0; i < f->count; i++)
    mf->train_fps[i] = le_get_u64(f->data + 8 * i);
  memcpy(mf->train_names, nm->data, (size_t)nm->count);
  return 0;
}

int se3_model_file_read(const char *path, const struct se3_model_expect *ex, int want_params, struct se3_model_file *mf,
                        uint64_t *hash, struct se3_error *err) {
  memset(mf, 0, sizeof *mf);
  struct se3_ckpt c;
  if (se3_ckpt_open(&c, path, 0, err)) return -1;
  int bad = read_arch(&c, path, ex, mf, err);
  /* the big records against the architecture, before the file is read whole */
  enum se3_ck_type rt = sizeof(real) == 4 ? SE3_CK_F32 : SE3_CK_F64;
  uint64_t np = mf->n_params;
  const struct se3_ckpt_record *p = NULL, *m = NULL;
  if (!bad) bad = record(&c, path, "params", rt, np, np, &p, err);
  if (!bad && !p) bad = fail(err, path, "no record \"params\": the model's parameters are missing");
  if (!bad) bad = record(&c, path, "adam_m", rt, np, np, &m, err);
  if (!bad) bad = record(&c, path, "adam_v", rt, np, np, &m, err);
  uint64_t train_bytes = 0;
  if (!bad) bad = train_set_head(&c, path, mf, &train_bytes, err);
  uint64_t most = 3 * np * sizeof(real) + SLACK_BYTES + train_bytes;
  if (!bad && c.len > most)
    bad = fail(err, path, "%zu bytes, more than a model of %llu parameters needs (%llu)", c.len, (unsigned long long)np,
               (unsigned long long)most);
  if (bad)
    se3_ckpt_free(&c);
  else
    bad = se3_ckpt_read(&c, err); /* (frees c on a failure) */
  if (bad) {
    se3_model_file_free(mf);
    return -1;
  }
  bad = read_small(&c, path, ex, mf, err);
  if (!bad) bad = train_set_values(&c, path, ex && ex->want_train_set, mf, err);
  /* every parameter finite: a NaN scores every molecule NaN, an infinity ranks inf first */
  p = se3_ckpt_find(&c, "params");
  for (uint64_t i = 0; !bad && i < np; i++) {
    double x = rt == SE3_CK_F32 ? (double)le_get_f32(p->data + 4 * i) : le_get_f64(p->data + 8 * i);
    if (!isfinite(x))
      bad = fail(err, path, "record \"params\": value %llu of %llu is %g (finite numbers allowed)",
                 (unsigned long long)i + 1, (unsigned long long)np, x);
  }
  if (!bad && want_params) {
    if (!(mf->params = malloc((size_t)np * sizeof *mf->params)))
      bad = oom(err, path, "out of memory");
    else
      se3_ckpt_get(&c, "params", rt, mf->params, np);
  }
  if (!bad && hash) *hash = se3_hash_bytes(*hash, c.buf, c.len);
  se3_ckpt_free(&c);
  if (bad) se3_model_file_free(mf);
  return bad ? -1 : 0;
}
