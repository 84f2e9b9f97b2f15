/* split.c — compounds kept whole across a split, and the splits' counts
 * (split.h). Everything sorts (text, index) pairs: a total order, so the
 * results never depend on qsort's algorithm. */
#include <stdlib.h>
#include <string.h>

#include "models/split.h"

struct named {
  const char *s;
  int i;
};

static int by_text(const void *pa, const void *pb) {
  const struct named *a = pa, *b = pb;
  int c = strcmp(a->s, b->s);
  return c ? c : (a->i > b->i) - (a->i < b->i);
}

/* the (text, index) pairs of t[0..n) sorted by text, then index; NULL out of memory */
static struct named *sorted(int n, char *const *t) {
  struct named *v = malloc(((size_t)n + 1) * sizeof *v);
  if (!v) return NULL;
  for (int i = 0; i < n; i++)
    v[i] = (struct named){t[i], i};
  qsort(v, (size_t)n, sizeof *v, by_text);
  return v;
}

static int root_of(int *up, int i) {
  while (up[i] != i) {
    up[i] = up[up[i]];
    i = up[i];
  }
  return i;
}

/* joins the records of equal text in the sorted v */
static void join_equal(int *up, const struct named *v, int n) {
  for (int k = 1; k < n; k++) {
    if (strcmp(v[k].s, v[k - 1].s)) continue;
    int a = root_of(up, v[k].i), b = root_of(up, v[k - 1].i);
    if (a != b) up[a > b ? a : b] = a < b ? a : b;
  }
}

int se3_merge_groups(int n, char *const *key, char *const *compound, char **out) {
  int *up = malloc(((size_t)n + 1) * sizeof *up);
  struct named *byk = sorted(n, key), *byc = sorted(n, compound);
  int ret = -1;
  if (up && byk && byc) {
    for (int i = 0; i < n; i++) {
      up[i] = i;
      out[i] = NULL;
    }
    join_equal(up, byk, n);
    join_equal(up, byc, n);
    /* each group's least key: byk is in key order, so the first seen */
    for (int k = 0; k < n; k++) {
      int r = root_of(up, byk[k].i);
      if (!out[r]) out[r] = key[byk[k].i];
    }
    for (int i = 0; i < n; i++)
      out[i] = out[root_of(up, i)];
    ret = 0;
  }
  free(up);
  free(byk);
  free(byc);
  return ret;
}

int se3_split_keep_compounds(int n, char *const *compound, unsigned char *split) {
  struct named *v = sorted(n, compound);
  if (!v) return -1;
  int moved = 0;
  for (int a = 0; a < n;) { /* a run of one compound, its first record (least index) first */
    int b = a + 1;
    for (; b < n && !strcmp(v[b].s, v[a].s); b++)
      if (split[v[b].i] != split[v[a].i]) {
        split[v[b].i] = split[v[a].i];
        moved++;
      }
    a = b;
  }
  free(v);
  return moved;
}

int se3_split_counts(int n, const unsigned char *split, const double *y, int classify, char *const *compound,
                     struct se3_split_count out[3]) {
  for (int s = 0; s < 3; s++)
    out[s] = (struct se3_split_count){0, 0, classify ? 0 : -1, classify ? 0 : -1};
  struct named *v = sorted(n, compound);
  if (!v) return -1;
  for (int a = 0; a < n;) {
    int b = a, seen[3] = {0, 0, 0}, seen_active[3] = {0, 0, 0};
    for (; b < n && !strcmp(v[b].s, v[a].s); b++) {
      int i = v[b].i, s = split[i];
      out[s].molecules++;
      seen[s] = 1;
      if (classify && y[i] > 0.5) {
        out[s].actives++;
        seen_active[s] = 1;
      }
    }
    for (int s = 0; s < 3; s++) {
      out[s].compounds += seen[s];
      if (classify) out[s].active_compounds += seen_active[s];
    }
    a = b;
  }
  free(v);
  return 0;
}
