/* The checkpoint fuzzer (issue 51): a checkpoint is a stranger's file, and its
 * checksum is no defence, so every mutant here has its checksum recomputed.
 *
 * A valid model checkpoint (the records train writes, a small architecture,
 * a card) is built in memory as a list of records, each with its header
 * fields kept apart from its bytes, so that a mutation can make them
 * disagree: the header's magic, version and flags; a record's name length
 * (stretched past its bytes, 0, 256, 300, 65535), its name (unprintable,
 * another record's), its type, its count (off by one, huge, 2^64 - 1); the
 * values (NaN, infinities, extremes in the standardisation, atomref and the
 * task); every word of "arch" (0, -1, 7, 13, 64, 200, 1025, INT_MAX, 2^32 + 8,
 * text), with the parameter records padded to fit the new architecture
 * where it lays one out; the card's text (NUL, lines without '=', a key
 * twice); records dropped, doubled, added with random headers; the file cut
 * or lengthened. Each mutant goes through the one reader of models
 * (se3_model_file_read, as score and predict read a model), the card reader
 * (model_card_read: check and predict) and the plain checkpoint reader (the
 * trainer's, verify's). A mutant the model reader accepts must hold what the
 * scorer relies on, and is then scored: a net built from it runs a batch. In
 * the sanitizer build (tests/sanitize.sh) AddressSanitizer watches all of it.
 *
 * Budget: SE3_FUZZ_SECONDS (default 60 under AddressSanitizer, 8 otherwise;
 * ctest's limit for a unit test is 300 s, so run longer budgets as the
 * program itself: build/tests/test_fuzz_checkpoint); SE3_FUZZ_SEED (default
 * 51) fixes the mutants; mutant i depends only on the seed and i, and the
 * last one is left in the test's folder (current.ckpt) should one crash the
 * program; SE3_FUZZ_VERBOSE=1 prints each mutant's verdict. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chem/graph.h"
#include "chem/mol.h"
#include "common/le.h"
#include "models/checkpoint.h"
#include "models/cpu/table.h"
#include "models/model.h"
#include "models/model_file.h"
#include "stages/modelcard.h"
#include "tests/fuzz_mutate.h"
#include "tests/testutil.h"

#if defined(__SANITIZE_ADDRESS__)
#define DEFAULT_SECONDS 60.0
#else
#define DEFAULT_SECONDS 8.0
#endif

static const struct se3_config base_cfg = {.layers = 1,
                                           .degrees = 2,
                                           .channels = 4,
                                           .heads = 2,
                                           .channels_div = 2,
                                           .node_in = 6,
                                           .edge_in = GRAPH_EDGE_WIDTH,
                                           .radial_hidden = 8,
                                           .mlp_hidden = 8,
                                           .pool_max = 1,
                                           .outputs = 1,
                                           .envelope = SE3_ENVELOPE_POLY,
                                           .bonds_kept = 1,
                                           .cutoff = 2.6f};

/* One record: its header fields apart from its bytes. */
struct ckrec {
  struct buf name; /* the name's bytes */
  unsigned name_len; /* the header's u16 */
  unsigned type;     /* the header's u8 */
  uint64_t count;    /* the header's u64 */
  struct buf data;   /* the values' bytes */
};

struct ck {
  uint8_t head[8];
  struct ckrec r[64];
  int n;
  int bad_sum;      /* write a wrong checksum */
  size_t cut;       /* 0: whole; else the file cut to this many bytes */
  struct buf extra; /* bytes after the trailer */
};

static uint64_t fnv(uint64_t h, const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

static size_t tsize(unsigned t) { return t == 0 ? 4 : t == 3 ? 1 : 8; }

static void rec_set(struct ckrec *r, const char *name, unsigned type, const void *data, uint64_t count) {
  memset(r, 0, sizeof *r);
  buf_set(&r->name, name, strlen(name));
  r->name_len = (unsigned)strlen(name);
  r->type = type;
  r->count = count;
  buf_set(&r->data, data, (size_t)count * tsize(type));
}

static void rec_free(struct ckrec *r) {
  free(r->name.p);
  free(r->data.p);
  memset(r, 0, sizeof *r);
}

static struct ckrec *find(struct ck *c, const char *name) {
  for (int i = 0; i < c->n; i++)
    if (c->r[i].name.n == strlen(name) && !memcmp(c->r[i].name.p, name, c->r[i].name.n)) return &c->r[i];
  return NULL;
}

static void put_f32s(struct ckrec *r, size_t n, struct rng *g) {
  r->type = SE3_CK_F32;
  r->count = n;
  buf_reserve(&r->data, n * 4);
  for (size_t i = 0; i < n; i++)
    le_put_f32(r->data.p + 4 * i, (float)(rng_below(g, 2001) - 1000.0) / 4000.0f);
  r->data.n = n * 4;
}

/* The checkpoint train writes for base_cfg, with a card. */
static void ck_valid(struct ck *c, struct rng *g) {
  memset(c, 0, sizeof *c);
  memcpy(c->head, "SE3C\x01\x00\x00\x00", 8);
  struct se3_model m;
  struct se3_error err;
  char arch[512];
  cr_assert_eq(se3_model_init(&m, &base_cfg, &err), 0, "%s", se3_error_str(&err).s);
  size_t np = m.n_params;
  se3_model_free(&m);
  se3_config_format(&base_cfg, arch, sizeof arch);
  const char *names[3] = {"params", "adam_m", "adam_v"};
  for (int k = 0; k < 3; k++) {
    rec_set(&c->r[c->n], names[k], SE3_CK_F32, NULL, 0);
    put_f32s(&c->r[c->n++], np, g);
  }
  int64_t state[3] = {40, 3, 2}, seed = 7, task = 0, zs[4] = {1, 6, 7, 8};
  double stats[3] = {0.5, -12.0, 3.5}, refs[4] = {-0.5, -37.8, -54.6, -75.0};
  uint8_t st[24], ss[24], sd[8], tk[8], z[32], rf[32];
  for (int i = 0; i < 3; i++) {
    le_put_u64(st + 8 * i, (uint64_t)state[i]);
    le_put_f64(ss + 8 * i, stats[i]);
  }
  le_put_u64(sd, (uint64_t)seed);
  le_put_u64(tk, (uint64_t)task);
  for (int i = 0; i < 4; i++) {
    le_put_u64(z + 8 * i, (uint64_t)zs[i]);
    le_put_f64(rf + 8 * i, refs[i]);
  }
  const char *card = "stages.ingest.add_hydrogens=true\nstages.ingest.gen3d=auto\nstages.graph.edges=radius+bonds\n"
                     "stages.graph.cutoff=2.6000000000000001\nstages.graph.elements=[H, C, N, O]\n"
                     "stages.rank.order=descending\n";
  rec_set(&c->r[c->n++], "step_epoch_best", SE3_CK_I64, st, 3);
  rec_set(&c->r[c->n++], "best_mean_std", SE3_CK_F64, ss, 3);
  rec_set(&c->r[c->n++], "next_order_seed", SE3_CK_I64, sd, 1);
  rec_set(&c->r[c->n++], "arch", SE3_CK_U8, arch, strlen(arch));
  rec_set(&c->r[c->n++], "target", SE3_CK_U8, "u0_atom", 7);
  rec_set(&c->r[c->n++], "classification", SE3_CK_I64, tk, 1);
  rec_set(&c->r[c->n++], "atomref_z", SE3_CK_I64, z, 4);
  rec_set(&c->r[c->n++], "atomref", SE3_CK_F64, rf, 4);
  rec_set(&c->r[c->n++], "settings", SE3_CK_U8, card, strlen(card));
}

static void ck_free(struct ck *c) {
  for (int i = 0; i < c->n; i++)
    rec_free(&c->r[i]);
  free(c->extra.p);
  memset(c, 0, sizeof *c);
}

static void ck_bytes(const struct ck *c, struct buf *out) {
  out->n = 0;
  buf_insert(out, out->n, c->head, 8);
  for (int i = 0; i < c->n; i++) {
    const struct ckrec *r = &c->r[i];
    uint8_t h[2];
    le_put_u16(h, (uint16_t)r->name_len);
    buf_insert(out, out->n, h, 2);
    buf_insert(out, out->n, r->name.p, r->name.n);
    uint8_t t[10] = {(uint8_t)r->type, 0};
    le_put_u64(t + 2, r->count);
    buf_insert(out, out->n, t, 10);
    buf_insert(out, out->n, r->data.p, r->data.n);
  }
  uint8_t tail[12];
  memcpy(tail, "END!", 4);
  le_put_u64(tail + 4, fnv(0xcbf29ce484222325ULL, out->p, out->n) ^ (c->bad_sum ? 1 : 0));
  buf_insert(out, out->n, tail, 12);
  if (c->extra.n) buf_insert(out, out->n, c->extra.p, c->extra.n);
  if (c->cut && c->cut < out->n) out->n = c->cut;
}

/* ---- mutations ------------------------------------------------------------------ */

static const char *const WORD_VALUES[] = {"0",  "-1",   "1",    "2",          "7",          "13",         "64", "200",
                                          "1025", "4097", "2147483647", "4294967304", "-2147483648", "x",  "1e9", "",
                                          "0x10", "nan",  "inf",  "99999999999999999999"};

/* "arch" with one word's value replaced (or a word dropped, doubled, added). */
static void mutate_arch(struct ck *c, struct rng *g) {
  struct ckrec *r = find(c, "arch");
  if (!r) return;
  char text[1024];
  size_t n = r->data.n < sizeof text - 1 ? r->data.n : sizeof text - 1;
  memcpy(text, r->data.p, n);
  text[n] = 0;
  char *words[32];
  int nw = 0;
  for (char *w = strtok(text, " "); w && nw < 32; w = strtok(NULL, " "))
    words[nw++] = w;
  char out[2048] = "";
  int pick = (int)rng_below(g, (size_t)nw), how = (int)rng_below(g, 8);
  for (int i = 0; i < nw; i++) {
    char w[256];
    snprintf(w, sizeof w, "%s", words[i]);
    if (i == pick && how < 5) { /* a value replaced */
      char *eq = strchr(w, '=');
      const char *v = WORD_VALUES[rng_below(g, sizeof WORD_VALUES / sizeof *WORD_VALUES)];
      if (eq) snprintf(eq + 1, sizeof w - (size_t)(eq + 1 - w), "%s", v);
    }
    if (i == pick && how == 5) continue; /* dropped */
    snprintf(out + strlen(out), sizeof out - strlen(out), "%s%s", *out ? " " : "", w);
    if (i == pick && how == 6) snprintf(out + strlen(out), sizeof out - strlen(out), " %s", w); /* doubled */
  }
  if (how == 7) {
    static const char *const tails[] = {" envelope=gauss cutoff=5 bonds_kept=1", " envelope=poly cutoff=nan bonds_kept=1",
                                        " envelope=cosine cutoff=-1 bonds_kept=2", " junk", " envelope=poly"};
    snprintf(out + strlen(out), sizeof out - strlen(out), "%s", tails[rng_below(g, 5)]);
  }
  buf_set(&r->data, out, strlen(out));
  r->count = strlen(out);
  /* the parameter records padded to fit, where the new words lay a model out
   * (so that the checks behind the count are reached too) */
  struct se3_config cfg;
  struct se3_model m;
  if (rng_below(g, 4) && se3_config_parse(out, &cfg) == 0 && se3_model_init(&m, &cfg, NULL) == 0) {
    size_t np = m.n_params;
    se3_model_free(&m);
    if (np <= ((size_t)1 << 20)) {
      const char *names[3] = {"params", "adam_m", "adam_v"};
      for (int k = 0; k < 3; k++)
        if ((r = find(c, names[k]))) put_f32s(r, np, g);
    }
  }
}

static const uint64_t COUNTS[] = {0, 1, 2, 255, 256, 65535, 1ULL << 31, 1ULL << 32, 1ULL << 62, 1ULL << 63, ~0ULL};

static void mutate_record(struct ck *c, struct rng *g) {
  if (!c->n) return;
  struct ckrec *r = &c->r[rng_below(g, (size_t)c->n)];
  switch (rng_below(g, 9)) {
  case 0: { /* the name's length field */
    static const unsigned lens[] = {0, 1, 254, 255, 256, 300, 4096, 65535};
    r->name_len = rng_below(g, 2) ? lens[rng_below(g, 8)] : (unsigned)(r->name.n + rng_below(g, 5) - 2) & 0xffff;
    break;
  }
  case 1: { /* a long or unprintable name, its length field matching */
    size_t n = rng_below(g, 2) ? 300 : 1 + rng_below(g, 255);
    buf_reserve(&r->name, n);
    for (size_t i = 0; i < n; i++)
      r->name.p[i] = rng_below(g, 3) ? (uint8_t)('a' + rng_below(g, 26)) : (uint8_t)rng_below(g, 256);
    r->name.n = n;
    r->name_len = (unsigned)n & 0xffff;
    break;
  }
  case 2: /* another record's name */
    buf_set(&r->name, c->r[0].name.p, c->r[0].name.n);
    r->name_len = (unsigned)c->r[0].name.n;
    break;
  case 3:
    r->type = (unsigned)rng_below(g, 2) ? (unsigned)rng_below(g, 256) : (unsigned)rng_below(g, 4);
    break;
  case 4: /* the count field */
    r->count = rng_below(g, 2) ? COUNTS[rng_below(g, sizeof COUNTS / sizeof *COUNTS)] : r->count + rng_below(g, 5) - 2;
    break;
  case 5: { /* a value: NaN, infinities, extremes */
    if (!r->data.n) break;
    size_t per = tsize(r->type > 3 ? 3 : r->type), k = rng_below(g, r->data.n / per ? r->data.n / per : 1);
    uint8_t *v = r->data.p + k * per;
    if (k * per + per > r->data.n) break;
    static const double F[] = {NAN, INFINITY, -INFINITY, 1e300, -1e300, 3.4e38, 0.0, -0.0, 1e-320, 0.5};
    static const int64_t I[] = {INT64_MIN, INT64_MAX, -1, 0, 1, 2, 118, 119, 256};
    if (per == 4) le_put_f32(v, (float)F[rng_below(g, 10)]);
    if (per == 8 && r->type == SE3_CK_F64) le_put_f64(v, F[rng_below(g, 10)]);
    if (per == 8 && r->type != SE3_CK_F64) le_put_u64(v, (uint64_t)I[rng_below(g, 9)]);
    if (per == 1) v[0] = (uint8_t)rng_below(g, 256);
    break;
  }
  case 6: /* a value's bytes */
    if (r->data.n) r->data.p[rng_below(g, r->data.n)] ^= (uint8_t)(1u << rng_below(g, 8));
    break;
  case 7: /* bytes cut from or added to the values, the count as it was */
    if (rng_below(g, 2) && r->data.n)
      buf_erase(&r->data, rng_below(g, r->data.n), 1 + rng_below(g, 16));
    else
      buf_insert(&r->data, rng_below(g, r->data.n + 1), "\x00\xff\x7f\x80\x01\x02\x03\x04", 1 + rng_below(g, 8));
    break;
  default: { /* the count and values resized together */
    size_t per = tsize(r->type > 3 ? 3 : r->type), n = rng_below(g, 3) ? rng_below(g, 40) : rng_below(g, 70000);
    buf_reserve(&r->data, n * per);
    for (size_t i = 0; i < n * per; i++)
      r->data.p[i] = (uint8_t)rng_below(g, 256);
    r->data.n = n * per;
    r->count = n;
  }
  }
}

static void mutate_card(struct ck *c, struct rng *g) {
  struct ckrec *r = find(c, "settings");
  if (!r) return;
  static const char *const bits[] = {"\n", "=", "no equals sign\n", "stages.graph.elements=[H, C]\n",
                                     "stages.graph.elements=[H, C, N, O]\n", "x=y\n", "\x00", "\x01\x7f\xff",
                                     "stages.graph.cutoff=nan\n", "stages.graph.elements=[Xx, H, H]\n"};
  const char *b = bits[rng_below(g, sizeof bits / sizeof *bits)];
  size_t n = b[0] ? strlen(b) : 1;
  if (rng_below(g, 4) == 0 && r->data.n) buf_erase(&r->data, rng_below(g, r->data.n), 1 + rng_below(g, 40));
  buf_insert(&r->data, rng_below(g, r->data.n + 1), b, n);
  if (rng_below(g, 8) == 0) { /* a long line */
    struct buf lng = {0};
    buf_reserve(&lng, 70000);
    memset(lng.p, 'a', 70000);
    buf_insert(&r->data, 0, lng.p, 1 + rng_below(g, 70000));
    free(lng.p);
  }
  r->count = r->data.n;
}

static void mutate_structure(struct ck *c, struct rng *g) {
  switch (rng_below(g, 7)) {
  case 0: /* a record dropped */
    if (c->n) {
      int k = (int)rng_below(g, (size_t)c->n);
      rec_free(&c->r[k]);
      memmove(&c->r[k], &c->r[k + 1], (size_t)(c->n - k - 1) * sizeof *c->r);
      c->n--;
    }
    break;
  case 1: /* a record doubled */
    if (c->n && c->n < 64) {
      struct ckrec *r = &c->r[rng_below(g, (size_t)c->n)], *d = &c->r[c->n++];
      memset(d, 0, sizeof *d);
      buf_set(&d->name, r->name.p, r->name.n);
      buf_set(&d->data, r->data.p, r->data.n);
      d->name_len = r->name_len;
      d->type = r->type;
      d->count = r->count;
    }
    break;
  case 2: /* a record added: the 300-byte name, or random fields */
    if (c->n < 64) {
      struct ckrec *d = &c->r[c->n++];
      char name[301];
      memset(name, 'n', 300);
      name[300] = 0;
      if (rng_below(g, 2)) name[1 + rng_below(g, 40)] = 0;
      rec_set(d, name, SE3_CK_U8, "a", 1);
      if (rng_below(g, 2)) {
        d->type = (unsigned)rng_below(g, 5);
        d->count = COUNTS[rng_below(g, sizeof COUNTS / sizeof *COUNTS)];
      }
    }
    break;
  case 3: /* the file cut */
    c->cut = 1 + rng_below(g, 4000);
    break;
  case 4: /* bytes after the trailer */
    buf_insert(&c->extra, 0, "END!\x00\x00\x00\x00\x00\x00\x00\x00garbage", 1 + rng_below(g, 19));
    break;
  case 5: /* the header */
    c->head[rng_below(g, 8)] = (uint8_t)rng_below(g, 256);
    break;
  default: /* a wrong checksum */
    c->bad_sum = 1;
  }
}

/* ---- the run -------------------------------------------------------------------- */

/* A batch of two small molecules, as the scorer gives a model of node_in 6. */
static void batch_of_two(struct se3_batch_buf *bb) {
  se3_batch_buf_init(bb, 6, GRAPH_EDGE_WIDTH);
  for (int i = 0; i < 2; i++) {
    struct mol m;
    mol_init(&m);
    tu_chain_mol(&m, 4 + 3 * i, i);
    tu_batch_add_mol(bb, &m);
    mol_free(&m);
  }
  se3_batch_geometry(bb);
}

/* What the scorer relies on in a model the reader accepted, then a batch
 * scored with it. */
static void score_accepted(const struct se3_model_file *mf, const struct se3_batch_buf *bb) {
  cr_assert_eq(mf->cfg.edge_in, GRAPH_EDGE_WIDTH);
  cr_assert_eq(mf->cfg.outputs, 1);
  cr_assert_eq(mf->cfg.node_in, 6);
  cr_assert(isfinite(mf->mean) && isfinite(mf->std) && mf->std > 0);
  cr_assert(mf->n_atomref >= 0 && mf->n_atomref <= SE3_ATOMREF_MAX);
  cr_assert(strlen(mf->target) < sizeof mf->target);
  for (size_t i = 0; i < mf->n_params; i++)
    cr_assert(isfinite(mf->params[i]), "parameter %zu", i);
  struct se3_error err;
  struct se3_net *net = se3_net_create(nn_backend_cpu(), &mf->cfg, 0, &err);
  cr_assert(net, "an accepted model must build: %s", se3_error_str(&err).s);
  cr_assert_eq(se3_net_n_params(net), mf->n_params);
  se3_net_inference_only(net);
  se3_net_set(net, SE3_NET_PARAMS, mf->params);
  real out[2];
  cr_assert_eq(se3_net_predict_start(net, &bb->b, &err), 0, "%s", se3_error_str(&err).s);
  cr_assert_eq(se3_net_predict_finish(net, out, &err), 0, "%s", se3_error_str(&err).s);
  se3_net_free(net);
}

static double env_seconds(void) {
  const char *s = getenv("SE3_FUZZ_SECONDS");
  return s && *s ? atof(s) : DEFAULT_SECONDS;
}

static uint64_t env_seed(void) {
  const char *s = getenv("SE3_FUZZ_SEED");
  return s && *s ? strtoull(s, NULL, 0) : 51;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

Test(fuzz_checkpoint, mutants_are_refused_with_a_reason_or_score_safely) {
  char *dir = tu_tmpdir("fuzz_checkpoint"), *path = NULL;
  cr_assert_geq(asprintf(&path, "%s/current.ckpt", dir), 0);
  const struct se3_model_expect ex = {.node_in = 6, .edge_in = GRAPH_EDGE_WIDTH, .outputs = 1, .need_stats = 1};
  struct se3_batch_buf bb;
  batch_of_two(&bb);
  struct buf bytes = {0};
  uint64_t seed = env_seed();
  double budget = env_seconds(), t0 = now();
  long n = 0, accepted = 0, cards = 0;
  /* mutant 0 is the valid file itself: it must be accepted and scored */
  for (long i = 0; i == 0 || now() - t0 < budget; i++, n++) {
    struct rng g = rng_for(seed, "checkpoint", (uint64_t)i);
    struct ck c;
    ck_valid(&c, &g);
    for (size_t k = 0, m = i ? 1 + rng_below(&g, 3) : 0; k < m; k++) {
      size_t what = rng_below(&g, 10);
      if (what < 3)
        mutate_arch(&c, &g);
      else if (what < 7)
        mutate_record(&c, &g);
      else if (what < 8)
        mutate_card(&c, &g);
      else
        mutate_structure(&c, &g);
    }
    ck_bytes(&c, &bytes);
    ck_free(&c);
    cr_assert_eq(write_file(path, bytes.p, bytes.n), 0);
    char why[2048] = "";
    struct se3_model_file mf;
    struct se3_error e;
    int rc = se3_model_file_read(path, &ex, 1, &mf, NULL, &e);
    if (rc) se3_error_format(&e, why, sizeof why);
    if (getenv("SE3_FUZZ_VERBOSE")) fprintf(stderr, "mutant %ld: %s\n", i, rc ? why + strlen(path) + 2 : "accepted");
    if (rc == 0) {
      accepted++;
      score_accepted(&mf, &bb);
      se3_model_file_free(&mf);
    } else {
      /* a refusal names the file and says why */
      cr_assert(strncmp(why, path, strlen(path)) == 0 && strlen(why) > strlen(path) + 3,
                "mutant %ld (seed %llu): a refusal without the file or a reason: \"%s\"", i,
                (unsigned long long)seed, why);
    }
    cr_assert(i > 0 || rc == 0, "the valid checkpoint was refused: %s", why);
    struct model_card card;
    struct se3_error cerr;
    if (model_card_read(path, &card, &cerr) == 0) {
      cards++;
      /* the card's reader checks the same model but for the featurisation's
       * widths, node and edge, which the workflow decides */
      cr_assert(rc == 0 || strstr(why, "node_in") || strstr(why, "edge_in"),
                "mutant %ld: the card was read, the model refused: %s", i, why);
      model_card_free(&card);
    } else {
      struct se3_error_text said = se3_error_str(&cerr);
      cr_assert(strncmp(said.s, path, strlen(path)) == 0, "card refusal without the file: \"%s\"", said.s);
    }
    struct se3_ckpt k;
    if (se3_ckpt_load(&k, path, NULL) == 0) {
      float p[4];
      se3_ckpt_get(&k, "params", SE3_CK_F32, p, 4);
      se3_ckpt_free(&k);
    }
  }
  fprintf(stderr, "fuzz: checkpoint: %ld mutants in %.1f s (seed %llu): %ld accepted and scored, %ld cards read\n", n,
          now() - t0, (unsigned long long)seed, accepted, cards);
  cr_assert_gt(n, 50, "too few mutants ran (%ld)", n);
  cr_assert_lt(accepted, n, "every mutant accepted: the mutator does nothing");
  free(bytes.p);
  se3_batch_buf_free(&bb);
  free(path);
  free(dir);
}

/* ---- the kinds the hostile campaign found, each named ----------------------------- */

/* c's "arch" with the word of `word`'s key replaced by it, the parameter
 * records padded to fit where the words lay a model out. */
static void set_arch_word(struct ck *c, const char *word, struct rng *g) {
  struct ckrec *r = find(c, "arch");
  char text[1024], out[1024] = "", *save = NULL;
  memcpy(text, r->data.p, r->data.n);
  text[r->data.n] = 0;
  size_t klen = (size_t)(strchr(word, '=') - word);
  for (char *w = strtok_r(text, " ", &save); w; w = strtok_r(NULL, " ", &save))
    snprintf(out + strlen(out), sizeof out - strlen(out), "%s%s", *out ? " " : "",
             strncmp(w, word, klen + 1) == 0 ? word : w);
  buf_set(&r->data, out, strlen(out));
  r->count = strlen(out);
  struct se3_config cfg;
  struct se3_model m;
  if (se3_config_parse(out, &cfg) == 0 && se3_model_init(&m, &cfg, NULL) == 0) {
    const char *names[3] = {"params", "adam_m", "adam_v"};
    for (int k = 0; k < 3; k++)
      put_f32s(find(c, names[k]), m.n_params, g);
    se3_model_free(&m);
  }
}

static void set_f64(struct ck *c, const char *name, int at, double v) { le_put_f64(find(c, name)->data.p + 8 * at, v); }

Test(fuzz_checkpoint, each_kind_found_is_refused_naming_its_field) {
  char *dir = tu_tmpdir("fuzz_checkpoint_kinds"), *path = NULL;
  cr_assert_geq(asprintf(&path, "%s/kind.ckpt", dir), 0);
  const struct se3_model_expect ex = {.node_in = 6, .edge_in = GRAPH_EDGE_WIDTH, .outputs = 1, .need_stats = 1};
  static const struct {
    const char *word, *want;
  } words[] = {
      {"outputs=64", "arch: outputs=64, but scoring keeps 1 value a molecule"},
      {"outputs=2", "arch: outputs=2, but scoring keeps 1 value a molecule"},
      {"edge_in=200", "arch: edge_in=200 is out of range (1 to 64)"},
      {"edge_in=7", "arch: edge_in=7, but this se3screen's graphs have 6 edge features"},
      {"radial_hidden=2147483647", "arch: radial_hidden=2147483647 is out of range (1 to 1024)"},
      {"node_in=13", "arch: node_in=13, but the featurisation gives 6 node features an atom"},
  };
  struct buf bytes = {0};
  for (int k = 0; k < (int)(sizeof words / sizeof *words) + 5; k++) {
    struct rng g = rng_for(1, "kinds", (uint64_t)k);
    struct ck c;
    ck_valid(&c, &g);
    const char *want;
    if (k < (int)(sizeof words / sizeof *words)) {
      set_arch_word(&c, words[k].word, &g);
      want = words[k].want;
    } else if (k == 6) {
      struct ckrec *r = &c.r[c.n++];
      char name[301];
      memset(name, 'x', 300);
      name[300] = 0;
      rec_set(r, name, SE3_CK_U8, "a", 1);
      want = "record 13: its name is 300 bytes long (1 to 255 allowed)";
    } else if (k == 7) {
      le_put_f32(find(&c, "params")->data.p + 4 * 5, NAN);
      want = "record \"params\": value 6 of";
    } else if (k == 8) {
      set_f64(&c, "best_mean_std", 2, INFINITY);
      want = "record \"best_mean_std\": the target's standard deviation is inf";
    } else if (k == 9) {
      set_f64(&c, "best_mean_std", 1, NAN);
      want = "record \"best_mean_std\": the target's mean is nan";
    } else {
      set_f64(&c, "atomref", 2, -INFINITY);
      want = "record \"atomref\": value 3 is -inf";
    }
    ck_bytes(&c, &bytes);
    ck_free(&c);
    cr_assert_eq(write_file(path, bytes.p, bytes.n), 0);
    struct se3_model_file mf;
    struct se3_error e;
    char err[1024];
    cr_assert_eq(se3_model_file_read(path, &ex, 1, &mf, NULL, &e), -1, "kind %d accepted", k);
    se3_error_format(&e, err, sizeof err);
    cr_assert(strncmp(err, path, strlen(path)) == 0 && strstr(err, want), "kind %d: \"%s\", want \"%s\"", k, err, want);
  }
  free(bytes.p);
  free(path);
  free(dir);
}
