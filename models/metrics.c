/* metrics.c — regression and classification metrics (metrics.h).
 *
 * Sorting is qsort over (value, index) pairs compared by value then index: a
 * total order, so the result never depends on qsort's algorithm. Sums are
 * serial in index or sorted order. */
#include <math.h>
#include <stdlib.h>

#include "models/metrics.h"

struct keyed {
  double v;
  int i;
};

/* Value order with NaN below every number and equal to any NaN. */
static int cmp_val(double a, double b) {
  int an = isnan(a), bn = isnan(b);
  if (an || bn) return bn - an;
  return a < b ? -1 : a > b ? 1 : 0;
}

static int cmp_asc(const void *pa, const void *pb) {
  const struct keyed *a = pa, *b = pb;
  int c = cmp_val(a->v, b->v);
  return c ? c : (a->i > b->i) - (a->i < b->i);
}

static int cmp_desc(const void *pa, const void *pb) {
  const struct keyed *a = pa, *b = pb;
  int c = cmp_val(b->v, a->v);
  return c ? c : (a->i > b->i) - (a->i < b->i);
}

/* x[0..n-1] sorted into k (n entries), ascending or descending. */
static void sort_keyed(struct keyed *k, const double *x, int n, int descending) {
  for (int i = 0; i < n; i++) {
    k[i].v = x[i];
    k[i].i = i;
  }
  qsort(k, (size_t)n, sizeof *k, descending ? cmp_desc : cmp_asc);
}

/* rank[i] = 1-based ascending rank of x[i], ties given their average rank;
 * k is scratch of n entries. */
static void average_ranks(double *rank, struct keyed *k, const double *x, int n) {
  sort_keyed(k, x, n, 0);
  for (int a = 0; a < n;) {
    int b = a + 1;
    while (b < n && cmp_val(k[b].v, k[a].v) == 0)
      b++;
    double r = 0.5 * ((a + 1) + b); /* mean of ranks a+1 .. b */
    for (int j = a; j < b; j++)
      rank[k[j].i] = r;
    a = b;
  }
}

static double pearson(const double *x, const double *y, int n) {
  double mx = 0, my = 0;
  for (int i = 0; i < n; i++) {
    mx += x[i];
    my += y[i];
  }
  mx /= n;
  my /= n;
  double sxy = 0, sxx = 0, syy = 0;
  for (int i = 0; i < n; i++) {
    double dx = x[i] - mx, dy = y[i] - my;
    sxy += dx * dy;
    sxx += dx * dx;
    syy += dy * dy;
  }
  if (!(sxx > 0) || !(syy > 0)) return NAN;
  return sxy / sqrt(sxx * syy);
}

void se3_regression_metrics(const double *pred, const double *y, int n, struct se3_reg_metrics *out) {
  out->mae = out->rmse = out->r2 = out->spearman = NAN;
  if (n < 1) return;
  double sa = 0, ss = 0, my = 0;
  for (int i = 0; i < n; i++) {
    double r = pred[i] - y[i];
    sa += fabs(r);
    ss += r * r;
    my += y[i];
  }
  out->mae = sa / n;
  out->rmse = sqrt(ss / n);
  if (n < 2) return;
  my /= n;
  double tot = 0;
  for (int i = 0; i < n; i++)
    tot += (y[i] - my) * (y[i] - my);
  if (tot > 0) out->r2 = 1 - ss / tot;

  double *rp = malloc((size_t)n * sizeof *rp), *ry = malloc((size_t)n * sizeof *ry);
  struct keyed *k = malloc((size_t)n * sizeof *k);
  if (rp && ry && k) {
    average_ranks(rp, k, pred, n);
    average_ranks(ry, k, y, n);
    out->spearman = pearson(rp, ry, n);
  } else {
    out->mae = out->rmse = out->r2 = NAN;
  }
  free(rp);
  free(ry);
  free(k);
}

void se3_classification_metrics(const double *score, const double *label, int n, struct se3_cls_metrics *out) {
  out->roc_auc = out->pr_auc = out->ef1 = NAN;
  if (n < 2) return;
  long P = 0;
  for (int i = 0; i < n; i++)
    P += label[i] > 0.5;
  long N = n - P;
  if (P == 0 || N == 0) return;
  struct keyed *k = malloc((size_t)n * sizeof *k);
  double *rank = malloc((size_t)n * sizeof *rank);
  if (!k || !rank) goto done;

  /* ROC-AUC: U = (sum of the actives' average ranks) - P (P + 1) / 2 counts
   * the (active, inactive) pairs won, ties 1/2. */
  average_ranks(rank, k, score, n);
  double rsum = 0;
  for (int i = 0; i < n; i++)
    if (label[i] > 0.5) rsum += rank[i];
  out->roc_auc = (rsum - 0.5 * (double)P * (double)(P + 1)) / ((double)P * (double)N);

  /* best first; groups of equal scores are one threshold for the AP */
  sort_keyed(k, score, n, 1);
  double ap = 0;
  long tp = 0;
  for (int a = 0; a < n;) {
    int b = a;
    long gp = 0;
    while (b < n && cmp_val(k[b].v, k[a].v) == 0)
      gp += label[k[b++].i] > 0.5;
    tp += gp;
    ap += (double)gp * ((double)tp / b);
    a = b;
  }
  out->pr_auc = ap / (double)P;

  /* EF1%: the top ceil(n / 100) of the same order (ties by index) */
  int top = n / 100 + (n % 100 != 0);
  long hits = 0;
  for (int j = 0; j < top; j++)
    hits += label[k[j].i] > 0.5;
  out->ef1 = ((double)hits / top) / ((double)P / n);

done:
  free(k);
  free(rank);
}

int se3_roc_curve(const double *score, const double *label, int n, double *fpr, double *tpr) {
  if (n < 1) return 0;
  long P = 0;
  for (int i = 0; i < n; i++)
    P += label[i] > 0.5;
  long N = n - P;
  if (P == 0 || N == 0) return 0;
  struct keyed *k = malloc((size_t)n * sizeof *k);
  if (!k) return -1;
  sort_keyed(k, score, n, 1);
  int m = 0;
  long tp = 0, fp = 0;
  fpr[m] = tpr[m] = 0;
  m++;
  for (int a = 0; a < n;) { /* one point per group of equal scores: a threshold */
    int b = a;
    while (b < n && cmp_val(k[b].v, k[a].v) == 0) {
      if (label[k[b].i] > 0.5)
        tp++;
      else
        fp++;
      b++;
    }
    fpr[m] = (double)fp / (double)N;
    tpr[m] = (double)tp / (double)P;
    m++;
    a = b;
  }
  free(k);
  return m;
}

double se3_enrichment_factor(const double *score, const double *label, int n, double fraction) {
  if (n < 1 || !(fraction > 0) || fraction > 1) return NAN;
  long P = 0;
  for (int i = 0; i < n; i++)
    P += label[i] > 0.5;
  if (P == 0 || P == n) return NAN;
  struct keyed *k = malloc((size_t)n * sizeof *k);
  if (!k) return NAN;
  sort_keyed(k, score, n, 1);
  /* the top ceil(n * fraction), as ef1 takes ceil(n / 100); the small
   * tolerance keeps 0.05 * 100 at 5, not 6 */
  int top = (int)ceil((double)n * fraction - 1e-9);
  if (top < 1) top = 1;
  long hits = 0;
  for (int j = 0; j < top; j++)
    hits += label[k[j].i] > 0.5;
  free(k);
  return ((double)hits / top) / ((double)P / n);
}

int se3_enrichment_curve(const double *score, const double *label, int n, double *x, double *y) {
  if (n < 1) return 0;
  long P = 0;
  for (int i = 0; i < n; i++)
    P += label[i] > 0.5;
  if (P == 0 || P == n) return 0;
  struct keyed *k = malloc((size_t)n * sizeof *k);
  if (!k) return -1;
  sort_keyed(k, score, n, 1);
  int m = 0;
  long tp = 0;
  x[m] = y[m] = 0;
  m++;
  for (int a = 0; a < n;) { /* one point per group of equal scores */
    int b = a;
    while (b < n && cmp_val(k[b].v, k[a].v) == 0)
      tp += label[k[b++].i] > 0.5;
    x[m] = (double)b / n;
    y[m] = (double)tp / (double)P;
    m++;
    a = b;
  }
  free(k);
  return m;
}

/* ---- bootstrap ---------------------------------------------------------------- */

/* splitmix64: the bootstrap's draws (seeded, the same on every machine) */
static unsigned long long next_draw(unsigned long long *s) {
  unsigned long long z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* a draw in [0, m), m < 2^31: the high 32 bits scaled (bias below 2^-32 x m) */
static int draw_below(unsigned long long *s, int m) {
  return (int)(((next_draw(s) >> 32) * (unsigned long long)m) >> 32);
}

static int cmp_double(const void *pa, const void *pb) { return cmp_val(*(const double *)pa, *(const double *)pb); }

/* the q-quantile of v[0..r) (sorted here), linear between order statistics */
static double quantile(double *v, int r, double q) {
  qsort(v, (size_t)r, sizeof *v, cmp_double);
  double at = q * (r - 1);
  int i = (int)floor(at);
  if (i >= r - 1) return v[r - 1];
  return v[i] + (at - i) * (v[i + 1] - v[i]);
}

int se3_classification_bootstrap(const double *score, const double *label, int n, int resamples,
                                 unsigned long long seed, double level, struct se3_cls_metrics *lo,
                                 struct se3_cls_metrics *hi) {
  lo->roc_auc = lo->pr_auc = lo->ef1 = hi->roc_auc = hi->pr_auc = hi->ef1 = NAN;
  int P = 0;
  for (int i = 0; i < n; i++)
    P += label[i] > 0.5;
  int N = n - P;
  if (n < 2 || P == 0 || N == 0 || resamples < 2) return 0;
  int *act = malloc((size_t)n * sizeof *act), *count = malloc((size_t)n * sizeof *count);
  double *s = malloc((size_t)n * sizeof *s), *y = malloc((size_t)n * sizeof *y);
  double *m = malloc(3 * (size_t)resamples * sizeof *m);
  int ret = -1;
  if (!act || !count || !s || !y || !m) goto done;
  /* the actives' indices first, then the inactives' */
  for (int i = 0, a = 0, b = P; i < n; i++)
    act[label[i] > 0.5 ? a++ : b++] = i;
  unsigned long long st = seed;
  for (int r = 0; r < resamples; r++) {
    for (int i = 0; i < n; i++)
      count[i] = 0;
    for (int k = 0; k < P; k++)
      count[act[draw_below(&st, P)]]++;
    for (int k = 0; k < N; k++)
      count[act[P + draw_below(&st, N)]]++;
    int j = 0; /* in index order: ties are broken as in the data */
    for (int i = 0; i < n; i++)
      for (int c = 0; c < count[i]; c++, j++) {
        s[j] = score[i];
        y[j] = label[i];
      }
    struct se3_cls_metrics one;
    se3_classification_metrics(s, y, n, &one);
    m[r] = one.roc_auc;
    m[resamples + r] = one.pr_auc;
    m[2 * resamples + r] = one.ef1;
  }
  double a = 0.5 * (1 - level), b = 1 - a;
  lo->roc_auc = quantile(m, resamples, a);
  hi->roc_auc = quantile(m, resamples, b);
  lo->pr_auc = quantile(m + resamples, resamples, a);
  hi->pr_auc = quantile(m + resamples, resamples, b);
  lo->ef1 = quantile(m + 2 * resamples, resamples, a);
  hi->ef1 = quantile(m + 2 * resamples, resamples, b);
  ret = 0;
done:
  free(act);
  free(count);
  free(s);
  free(y);
  free(m);
  return ret;
}
