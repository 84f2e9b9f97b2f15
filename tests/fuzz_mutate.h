/* fuzz_mutate.h — the seeded input generator of the fuzz tests
 * (tests/unit/test_fuzz.c, tests/integration/test_fuzz_ingest.c): a
 * splitmix64 generator, byte buffers, the seed corpus (tests/data/fuzz/ and
 * the folders in SE3_FUZZ_CORPUS) and the mutator. Everything here is static:
 * each test program has its own copy. Input i of a target depends only on
 * the seed, the target's name and i. */
#ifndef SE3_FUZZ_MUTATE_H
#define SE3_FUZZ_MUTATE_H

#include <ctype.h>
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <zlib.h>

#include "chem/records.h"
#include "common/cfgtree.h"
#include "tests/testutil.h"

#define FUZZ_MAX_INPUT ((size_t)3 << 20) /* mutants are cut back to this size */

/* ---- a deterministic generator (splitmix64) ------------------------------------ */

struct rng {
  uint64_t s;
};

static inline uint64_t rng_next(struct rng *r) {
  uint64_t z = (r->s += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/* Uniform in [0, n); 0 when n is 0. */
static inline size_t rng_below(struct rng *r, size_t n) { return n ? (size_t)(rng_next(r) % n) : 0; }

/* The generator of input `iter` of `target`: the same seed, target and
 * number give the same input on every machine. */
static inline struct rng rng_for(uint64_t seed, const char *target, uint64_t iter) {
  struct rng r = {seed ^ se3_hash_str(SE3_HASH_INIT, target)};
  r.s ^= rng_next(&r) + iter * 0xD1B54A32D192ED03ULL;
  rng_next(&r);
  return r;
}

/* ---- byte buffers ---------------------------------------------------------------- */

struct buf {
  unsigned char *p;
  size_t n, cap;
};

static inline void buf_reserve(struct buf *b, size_t n) {
  if (n + 1 <= b->cap) return;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < n + 1)
    cap *= 2;
  b->p = realloc(b->p, cap);
  if (!b->p) abort();
  b->cap = cap;
}

static inline void buf_set(struct buf *b, const void *p, size_t n) {
  buf_reserve(b, n);
  if (n) memcpy(b->p, p, n);
  b->n = n;
}

static inline void buf_insert(struct buf *b, size_t at, const void *p, size_t n) {
  if (at > b->n) at = b->n;
  buf_reserve(b, b->n + n);
  memmove(b->p + at + n, b->p + at, b->n - at);
  memcpy(b->p + at, p, n);
  b->n += n;
}

static inline void buf_erase(struct buf *b, size_t at, size_t n) {
  if (at >= b->n) return;
  if (n > b->n - at) n = b->n - at;
  memmove(b->p + at, b->p + at + n, b->n - at - n);
  b->n -= n;
}

static inline int write_file(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  int ok = fwrite(p, 1, n, f) == n;
  return fclose(f) == 0 && ok ? 0 : -1;
}

static inline int write_gz(const char *path, const void *p, size_t n) {
  gzFile g = gzopen(path, "wb1");
  if (!g) return -1;
  int ok = n == 0 || gzwrite(g, p, (unsigned)n) == (int)n;
  return gzclose(g) == Z_OK && ok ? 0 : -1;
}

/* ---- the corpus ---------------------------------------------------------------- */

struct seed {
  char *name;
  enum mol_format fmt; /* MOL_FMT_UNKNOWN for the others */
  int yaml;
  unsigned char *p;
  size_t n;
};

static struct seed *g_seeds;
static int g_n_seeds;

static inline int ends_with(const char *s, const char *tail) {
  size_t a = strlen(s), b = strlen(tail);
  return a >= b && strcasecmp(s + a - b, tail) == 0;
}

static inline void corpus_add_dir(const char *dir, int depth) {
  DIR *d = opendir(dir);
  if (!d || depth > 8) {
    if (d) closedir(d);
    return;
  }
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    struct stat sb;
    if (lstat(path, &sb) != 0) continue;
    if (S_ISDIR(sb.st_mode)) {
      corpus_add_dir(path, depth + 1);
      continue;
    }
    if (!S_ISREG(sb.st_mode) || sb.st_size > (4 << 20)) continue;
    enum mol_format fmt = rec_format_from_path(path);
    int yaml = ends_with(path, ".yaml") || ends_with(path, ".yml");
    if (fmt == MOL_FMT_UNKNOWN && !yaml) continue;
    size_t n = 0;
    char *text = NULL;
    if (ends_with(path, ".gz")) { /* seeds are kept plain: gunzip */
      gzFile g = gzopen(path, "rb");
      if (!g) continue;
      size_t cap = 1 << 16;
      text = malloc(cap);
      int got;
      while (text && (got = gzread(g, text + n, (unsigned)(cap - n))) > 0) {
        n += (size_t)got;
        if (n == cap && cap < FUZZ_MAX_INPUT) text = realloc(text, cap *= 2);
        if (n == cap) break;
      }
      gzclose(g);
    } else {
      text = tu_read(path, &n);
    }
    if (!text) continue;
    g_seeds = realloc(g_seeds, (size_t)(g_n_seeds + 1) * sizeof *g_seeds);
    g_seeds[g_n_seeds++] = (struct seed){strdup(path), fmt, yaml, (unsigned char *)text, n};
  }
  closedir(d);
}

static inline int seed_cmp(const void *a, const void *b) {
  return strcmp(((const struct seed *)a)->name, ((const struct seed *)b)->name);
}

static inline void corpus_load(void) {
  if (g_seeds) return;
  corpus_add_dir(tu_src("tests/data/fuzz"), 0);
  const char *extra = getenv("SE3_FUZZ_CORPUS");
  if (extra && *extra) {
    char *dup = strdup(extra), *save = NULL;
    for (char *t = strtok_r(dup, ":", &save); t; t = strtok_r(NULL, ":", &save))
      corpus_add_dir(t, 0);
    free(dup);
  }
  /* readdir order differs between file systems: sort, so that input i is
   * the same everywhere */
  qsort(g_seeds, (size_t)g_n_seeds, sizeof *g_seeds, seed_cmp);
}

/* A seed of the kind wanted (yaml, or a molecule format), chosen by r. */
static inline const struct seed *pick_seed(struct rng *r, int yaml) {
  int n = 0;
  for (int i = 0; i < g_n_seeds; i++)
    n += g_seeds[i].yaml == yaml;
  size_t k = rng_below(r, (size_t)n);
  for (int i = 0; i < g_n_seeds; i++)
    if (g_seeds[i].yaml == yaml && k-- == 0) return &g_seeds[i];
  return NULL;
}

/* ---- the mutator ------------------------------------------------------------------ */

static const unsigned char INTERESTING[] = {0,   0xff, '\n', '\r', ' ', '\t', '"', '\'', ',',  '$',  '@',  '<', '>',
                                            '/', '#',  '-',  ':',  '&', '*',  '{', '[',  0x80, 0xef, 0x7f, '0', '9'};

static const char *const TOKENS[] = {"$$$$\n",
                                     "\n$$$$\n",
                                     "$$$$",
                                     "@<TRIPOS>MOLECULE\n",
                                     "@<TRIPOS>ATOM\n",
                                     "@<TRIPOS>BOND\n",
                                     "END\n",
                                     "ENDMDL\n",
                                     "MODEL        1\n",
                                     "M  END\n",
                                     "> <tag>\n",
                                     "  999 V2000\n",
                                     "  0  0  0  0  0  0            999 V3000\n",
                                     "<molecule>",
                                     "</molecule>",
                                     "<molecule/>",
                                     "<cml:molecule xmlns:cml=\"x\">",
                                     "<!--",
                                     "-->",
                                     "\"",
                                     "\"\"",
                                     "99999999999999999999",
                                     "18446744073709551616",
                                     "2147483648",
                                     "-1",
                                     "-2147483648",
                                     "1e400",
                                     "-1e309",
                                     "nan",
                                     "inf",
                                     "0x10",
                                     "\xEF\xBB\xBF",
                                     "\r\n",
                                     "0\n",
                                     "1\n\nC 0 0 0\n",
                                     "\n\n",
                                     "\t",
                                     "smiles,name\n",
                                     "SMILES\tid\n",
                                     "HETATM    1  C   UNL     1       0.000   0.000   0.000  1.00  0.00           C\n",
                                     "&a ",
                                     "*a",
                                     "<<: *a\n",
                                     "include: [frag.yaml]\n",
                                     "{",
                                     "}",
                                     "[",
                                     "]",
                                     ": ",
                                     "- ",
                                     "? ",
                                     "!!str ",
                                     "!!binary ",
                                     "|\n",
                                     ">-\n",
                                     "---\n",
                                     "...\n",
                                     "%YAML 1.1\n",
                                     "'",
                                     "\\",
                                     "~",
                                     "null",
                                     "yes",
                                     "\\u0000",
                                     "\\x00",
                                     "stages:\n",
                                     "sets:\n",
                                     "path: ",
                                     "labels: [",
                                     "workers: 0\n",
                                     "model: ../../etc/passwd\n"};

static inline void put_number(struct rng *r, char *out, size_t len) {
  static const char *const fixed[] = {"0",          "-0",         "-1",          "4294967295", "4294967296",
                                      "2147483647", "2147483648", "-2147483649", "100000001",  "1e308",
                                      "1e-320",     "NaN",        "-inf",        "0x7fffffff", "000000000012"};
  if (rng_below(r, 2)) {
    snprintf(out, len, "%s", fixed[rng_below(r, sizeof fixed / sizeof fixed[0])]);
  } else {
    snprintf(out, len, "%lld", (long long)(rng_next(r) >> rng_below(r, 64)) * (rng_below(r, 2) ? -1 : 1));
  }
}

/* Lines past the record reader's 1 MiB buffer (not for YAML, whose files
 * stop at 1 MiB: they would only test that refusal). */
static int g_big_lines = 1;

/* One mutation of b; `other` is a second seed for splices. */
static inline void mutate_once(struct rng *r, struct buf *b, const struct seed *other) {
  size_t at = rng_below(r, b->n + 1);
  switch (rng_below(r, 13)) {
  case 0: /* flip a bit */
    if (b->n) b->p[rng_below(r, b->n)] ^= (unsigned char)(1u << rng_below(r, 8));
    break;
  case 1: /* an interesting byte over one */
    if (b->n) b->p[rng_below(r, b->n)] = INTERESTING[rng_below(r, sizeof INTERESTING)];
    break;
  case 2: { /* insert random bytes */
    unsigned char tmp[16];
    size_t n = 1 + rng_below(r, sizeof tmp);
    for (size_t i = 0; i < n; i++)
      tmp[i] = rng_below(r, 2) ? INTERESTING[rng_below(r, sizeof INTERESTING)] : (unsigned char)rng_next(r);
    buf_insert(b, at, tmp, n);
    break;
  }
  case 3: /* delete a run */
    buf_erase(b, at, 1 + rng_below(r, rng_below(r, 2) ? 8 : 256));
    break;
  case 4: { /* duplicate a chunk elsewhere */
    if (!b->n) break;
    size_t from = rng_below(r, b->n), n = 1 + rng_below(r, b->n - from);
    if (n > 8192) n = 8192;
    unsigned char *tmp = malloc(n);
    memcpy(tmp, b->p + from, n);
    buf_insert(b, at, tmp, n);
    free(tmp);
    break;
  }
  case 5: /* splice a chunk of another seed in */
    if (other && other->n) {
      size_t from = rng_below(r, other->n), n = 1 + rng_below(r, other->n - from);
      if (n > 8192) n = 8192;
      buf_insert(b, at, other->p + from, n);
    }
    break;
  case 6: /* truncate */
    if (b->n) b->n = rng_below(r, b->n + 1);
    break;
  case 7:
  case 8: { /* a format token, at a line start or anywhere */
    const char *t = TOKENS[rng_below(r, sizeof TOKENS / sizeof TOKENS[0])];
    if (rng_below(r, 2)) {
      while (at > 0 && b->p[at - 1] != '\n')
        at--;
    }
    buf_insert(b, at, t, strlen(t));
    break;
  }
  case 9: { /* replace a number by an odd one */
    size_t i = at;
    while (i < b->n && !isdigit(b->p[i]))
      i++;
    if (i >= b->n) break;
    size_t j = i;
    while (j < b->n && (isdigit(b->p[j]) || b->p[j] == '.'))
      j++;
    char num[48];
    put_number(r, num, sizeof num);
    buf_erase(b, i, j - i);
    buf_insert(b, i, num, strlen(num));
    break;
  }
  case 10: { /* repeat a line many times */
    if (!b->n) break;
    size_t s = at < b->n ? at : b->n - 1;
    while (s > 0 && b->p[s - 1] != '\n')
      s--;
    size_t e = s;
    while (e < b->n && b->p[e] != '\n')
      e++;
    if (e < b->n) e++;
    size_t len = e - s, times = 2 + rng_below(r, 600);
    if (!len || len * times > (1 << 20)) break;
    unsigned char *tmp = malloc(len * times);
    for (size_t k = 0; k < times; k++)
      memcpy(tmp + k * len, b->p + s, len);
    buf_insert(b, e, tmp, len * times);
    free(tmp);
    break;
  }
  case 11: { /* a very long line: mostly short of the 1 MiB buffer, sometimes past it */
    size_t n = rng_below(r, 8) || !g_big_lines ? 64 + rng_below(r, 70000) : (1 << 20) + rng_below(r, 4096);
    unsigned char c = rng_below(r, 2) ? 'C' : INTERESTING[rng_below(r, sizeof INTERESTING)];
    unsigned char *tmp = malloc(n);
    memset(tmp, c, n);
    buf_insert(b, at, tmp, n);
    free(tmp);
    break;
  }
  default: { /* swap two lines' order by moving a line */
    if (!b->n) break;
    size_t s = rng_below(r, b->n);
    while (s > 0 && b->p[s - 1] != '\n')
      s--;
    size_t e = s;
    while (e < b->n && b->p[e] != '\n')
      e++;
    if (e < b->n) e++;
    size_t len = e - s;
    if (!len || len > 8192) break;
    unsigned char *tmp = malloc(len);
    memcpy(tmp, b->p + s, len);
    buf_erase(b, s, len);
    buf_insert(b, rng_below(r, b->n + 1), tmp, len);
    free(tmp);
  }
  }
  if (b->n > FUZZ_MAX_INPUT) b->n = FUZZ_MAX_INPUT;
}

static inline void mutate(struct rng *r, struct buf *b, int yaml) {
  size_t n = 1 + rng_below(r, rng_below(r, 4) ? 3 : 8);
  for (size_t i = 0; i < n; i++)
    mutate_once(r, b, pick_seed(r, yaml && rng_below(r, 4) ? 1 : 0));
}

#endif
