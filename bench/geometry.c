/* geometry.c — the geometry stages without SQLite writes, and one training
 * batch read from the database versus recomputed, all in one process on a
 * screen.db that already holds molecules, graphs and bases.
 *
 *   geometry_bench DB [--dataset NAME] [--edges radius|bonds|radius+bonds]
 *                  [--cutoff A] [--max-neighbors N] [--elements H,C,N,...]
 *                  [--threads T] [--reps R] [--compute-reps R] [--batch N]
 *                  [--seed S] [--parts graph,basis,encode,batch]
 *
 * Prints one JSON object per line (times are the minimum over repetitions):
 *   graph_compute       (--reps repetitions; the others --compute-reps)
 *                       the graph stage's per-molecule work from the stored
 *                       mol blobs: mol_from_blob + graph_build + graph_to_blob
 *   basis_compute_f32   basis_edge over every edge of the stored graphs'
 *                       rel_pos (decoded before timing) into float32 arrays:
 *                       the number to compare with a PyTorch basis
 *   basis_compute_blob  the basis stage's per-molecule work: graph_from_blob +
 *                       basis_to_blob in the table's dtype
 *   batch_*             one batch of N molecules (the first N ids, and N ids
 *                       drawn at random) turned into float32 basis arrays by
 *                         read      SELECT basis + basis_blob_parse + basis_decode
 *                         coords    SELECT mol + mol_from_blob + graph_build + basis_edge
 *                         graphs    SELECT graph + graph_from_blob + basis_edge
 *                         fetch     SELECT basis only (the blob in memory, not
 *                                   decoded): the SQLite share of read
 *                       each thread with its own read-only connection, kept
 *                       open, its page cache emptied before each repetition
 *                       (the operating system's cache is warm), one read
 *                       transaction and statements prepared inside the timed
 *                       region; repetitions of the
 *                       methods are interleaved; every decoded or computed
 *                       result is checked against the coordinates one.
 * Graph options must be those the database was built with (the graph line
 * says whether the edge counts agree with the graphs table).
 */
#define _GNU_SOURCE
#include <math.h>
#include <omp.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chem/graph.h"
#include "chem/mol.h"
#include "common/error.h"
#include "models/basis.h"

enum { PART_GRAPH = 1, PART_BASIS = 2, PART_ENCODE = 4, PART_BATCH = 8 };

struct blob {
  int64_t id;
  uint8_t *p;
  size_t n;
};

static struct {
  const char *db, *dataset, *edges_name;
  struct graph_opts go;
  uint8_t elements[128];
  int threads, reps, compute_reps, batch, parts;
  uint64_t seed;
  /* from the database */
  int max_degree;
  enum basis_dtype dtype;
  char dtype_name[16];
} O;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

__attribute__((format(printf, 1, 2), noreturn)) static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "geometry_bench: ");
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(1);
}

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) die("out of memory");
  return p;
}

static sqlite3 *open_ro(void) {
  sqlite3 *db = NULL;
  if (sqlite3_open_v2(O.db, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK)
    die("cannot open %s", O.db);
  sqlite3_busy_timeout(db, 10000);
  return db;
}

static sqlite3_stmt *prep(sqlite3 *db, const char *sql) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) die("SQL error: %s", sqlite3_errmsg(db));
  return st;
}

/* Every row of a two-column (id, blob) query, in order. */
static struct blob *load_blobs(sqlite3 *db, const char *sql, int64_t *n_out) {
  sqlite3_stmt *st = prep(db, sql);
  size_t cap = 1024, n = 0;
  struct blob *b = xmalloc(cap * sizeof *b);
  while (sqlite3_step(st) == SQLITE_ROW) {
    if (n == cap) {
      cap *= 2;
      b = realloc(b, cap * sizeof *b);
      if (!b) die("out of memory");
    }
    b[n].id = sqlite3_column_int64(st, 0);
    b[n].n = (size_t)sqlite3_column_bytes(st, 1);
    b[n].p = xmalloc(b[n].n);
    memcpy(b[n].p, sqlite3_column_blob(st, 1), b[n].n);
    n++;
  }
  sqlite3_finalize(st);
  *n_out = (int64_t)n;
  return b;
}

static void free_blobs(struct blob *b, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    free(b[i].p);
  free(b);
}

/* ---- JSON ------------------------------------------------------------- */

static void head(const char *metric, int threads, int with_dtype) {
  printf("{\"bench\":\"geometry\",\"dataset\":\"%s\",\"edges\":\"%s\"", O.dataset, O.edges_name);
  if (O.go.edges != GRAPH_EDGES_BONDS) printf(",\"cutoff\":%g,\"max_neighbors\":%d", O.go.cutoff, O.go.max_neighbors);
  printf(",\"max_degree\":%d", O.max_degree);
  if (with_dtype) printf(",\"dtype\":\"%s\"", O.dtype_name);
  printf(",\"metric\":\"%s\",\"threads\":%d", metric, threads);
}

static void rate_line(const char *metric, int threads, int with_dtype, int64_t n_mol, int64_t n_edges, double s,
                      int reps, double checksum, const char *extra) {
  head(metric, threads, with_dtype);
  printf(",\"n_mol\":%lld,\"n_edges\":%lld,\"edges_per_mol\":%.1f,\"repetitions\":%d,\"s\":%.4f", (long long)n_mol,
         (long long)n_edges, n_mol ? (double)n_edges / (double)n_mol : 0.0, reps, s);
  printf(",\"mol_per_s\":%.1f,\"edges_per_s\":%.0f,\"checksum\":%.6g%s}\n", (double)n_mol / s, (double)n_edges / s,
         checksum, extra ? extra : "");
  fflush(stdout);
}

/* An empty parallel region just before a clock starts: idle OpenMP threads
 * sleep, and waking a halted vCPU on a VM can take milliseconds, which would
 * land in the timed region of a short batch. After this they still spin. */
static void wake(int threads) {
  int n = 0;
#pragma omp parallel num_threads(threads) reduction(+ : n)
  n++;
  if (n != threads) fprintf(stderr, "geometry_bench: %d threads instead of %d\n", n, threads);
}

/* ---- compute-only rates ----------------------------------------------------- */

/* The graph stage's work on every molecule; returns seconds, fills edges and a checksum. */
static double graph_pass(const struct blob *mols, int64_t n, int threads, int64_t *edges_out, double *cs_out,
                         int64_t *failed_out) {
  int64_t edges = 0, failed = 0;
  double cs = 0;
  wake(threads);
  double t0 = now();
#pragma omp parallel for schedule(dynamic, 8) num_threads(threads) reduction(+ : edges, failed, cs)
  for (int64_t i = 0; i < n; i++) {
    struct mol m;
    struct graph g;
    struct se3_error e;
    uint8_t *gb = NULL;
    size_t gl = 0;
    mol_init(&m);
    graph_init(&g);
    if (mol_from_blob(mols[i].p, mols[i].n, &m, &e) || graph_build(&m, &O.go, &g, &e) || graph_to_blob(&g, &gb, &gl)) {
      failed++;
    } else {
      edges += g.n_edges;
      cs += (double)gl + (g.n_edges ? g.rel_pos[0] : 0.0f);
    }
    free(gb);
    graph_free(&g);
    mol_free(&m);
  }
  double s = now() - t0;
  *edges_out = edges;
  *cs_out = cs;
  *failed_out = failed;
  return s;
}

struct relpos {
  int n_edges;
  float *rel;
};

static double basis_f32_pass(const struct basis_plan *bp, const struct relpos *rp, int64_t n, int threads,
                             int max_edges, double *cs_out) {
  double cs = 0;
  wake(threads);
  double t0 = now();
#pragma omp parallel num_threads(threads) reduction(+ : cs)
  {
    float *out = xmalloc((size_t)max_edges * bp->per_edge * sizeof *out);
#pragma omp for schedule(dynamic, 8)
    for (int64_t i = 0; i < n; i++) {
      for (int e = 0; e < rp[i].n_edges; e++)
        basis_edge(bp, rp[i].rel + 3 * (size_t)e, out + (size_t)e * bp->per_edge);
      if (rp[i].n_edges) cs += out[0] + out[(size_t)rp[i].n_edges * bp->per_edge - 1];
    }
    free(out);
  }
  double s = now() - t0;
  *cs_out = cs;
  return s;
}

static double basis_blob_pass(const struct basis_plan *bp, const struct blob *graphs, int64_t n, int threads,
                              double *cs_out, int64_t *failed_out) {
  double cs = 0;
  int64_t failed = 0;
  wake(threads);
  double t0 = now();
#pragma omp parallel for schedule(dynamic, 8) num_threads(threads) reduction(+ : cs, failed)
  for (int64_t i = 0; i < n; i++) {
    struct graph g;
    struct se3_error e;
    uint8_t *b = NULL;
    size_t len = 0;
    graph_init(&g);
    if (graph_from_blob(graphs[i].p, graphs[i].n, &g, &e) ||
        basis_to_blob(bp, O.dtype, g.rel_pos, (uint32_t)g.n_edges, &b, &len)) {
      failed++;
    } else {
      cs += (double)len + b[len - 1];
    }
    free(b);
    graph_free(&g);
  }
  double s = now() - t0;
  *cs_out = cs;
  *failed_out = failed;
  return s;
}

/* ---- one batch -------------------------------------------------------------- */

enum { M_READ, M_COORDS, M_GRAPHS, M_FETCH, N_METHODS };
static const char *method_name[N_METHODS] = {"read", "coords", "graphs", "fetch"};
static const char *method_sql[N_METHODS] = {
    "SELECT basis FROM bases WHERE mol_id = ?1",
    "SELECT mol FROM molecules WHERE id = ?1",
    "SELECT graph FROM graphs WHERE mol_id = ?1",
    "SELECT basis FROM bases WHERE mol_id = ?1",
};

struct batch {
  int n;
  int64_t *ids;
  int *n_edges;
  size_t *off; /* float offset of each molecule in the arena */
  size_t total;
  float *arena;
};

/* One method on the batch with T threads, each with its own connection (kept
 * open, as a loader would: a fresh one per batch would add the page faults of
 * a new page cache, which are dear on a VM). Before the clock starts every
 * connection's page cache is emptied, so the rows come from the operating
 * system's cache. Returns seconds, bytes and a checksum; -1 on a failure. */
static double run_method(int method, const struct basis_plan *bp, struct batch *b, int threads, sqlite3 **dbs,
                         int64_t *bytes_out, double *cs_out) {
  for (int t = 0; t < threads; t++)
    sqlite3_db_release_memory(dbs[t]);
  int64_t bytes = 0;
  int fail = 0;
  double cs = 0;
  wake(threads);
  double t0 = now();
#pragma omp parallel num_threads(threads) reduction(+ : bytes, fail, cs)
  {
    int t = omp_get_thread_num();
    /* one read transaction for the whole batch, as a loader would: without
     * it every row takes and drops the WAL read lock, and two connections
     * contend for it */
    if (sqlite3_exec(dbs[t], "BEGIN", NULL, NULL, NULL) != SQLITE_OK) fail++;
    sqlite3_stmt *st = prep(dbs[t], method_sql[method]);
    struct se3_error e;
    for (int i = t; i < b->n; i += threads) {
      float *out = b->arena + b->off[i];
      sqlite3_reset(st);
      sqlite3_bind_int64(st, 1, b->ids[i]);
      if (sqlite3_step(st) != SQLITE_ROW) {
        fail++;
        continue;
      }
      const uint8_t *p = sqlite3_column_blob(st, 0);
      size_t len = (size_t)sqlite3_column_bytes(st, 0);
      bytes += (int64_t)len;
      if (method == M_FETCH) { /* the blob in memory, not decoded */
        if (!p || len == 0)
          fail++;
        else
          cs += p[0] + p[len - 1];
        continue;
      }
      if (method == M_READ) {
        struct basis_blob bb;
        if (basis_blob_parse(p, len, &bb, NULL) || (int)bb.n_edges != b->n_edges[i] || bb.per_edge != bp->per_edge) {
          fail++;
          continue;
        }
        basis_decode(bb.dtype, bb.data, (size_t)bb.n_edges * bb.per_edge, out);
      } else {
        struct graph g;
        graph_init(&g);
        int bad;
        if (method == M_COORDS) {
          struct mol m;
          mol_init(&m);
          bad = mol_from_blob(p, len, &m, &e) || graph_build(&m, &O.go, &g, &e);
          mol_free(&m);
        } else {
          bad = graph_from_blob(p, len, &g, &e);
        }
        if (bad || g.n_edges != b->n_edges[i]) {
          fail++;
          graph_free(&g);
          continue;
        }
        for (int e = 0; e < g.n_edges; e++)
          basis_edge(bp, g.rel_pos + 3 * (size_t)e, out + (size_t)e * bp->per_edge);
        graph_free(&g);
      }
      if (b->n_edges[i]) cs += out[0] + out[(size_t)b->n_edges[i] * bp->per_edge - 1];
    }
    sqlite3_finalize(st);
    sqlite3_exec(dbs[t], "COMMIT", NULL, NULL, NULL);
  }
  double s = now() - t0;
  *bytes_out = bytes;
  *cs_out = cs;
  return fail ? -1 : s;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static void bench_batch(sqlite3 *db, const struct basis_plan *bp, const char *kind, int threads_max) {
  /* ids and edge counts of every stored basis */
  sqlite3_stmt *st = prep(db, "SELECT mol_id, n_edges FROM bases ORDER BY mol_id");
  size_t cap = 1024, n_all = 0;
  int64_t *all = xmalloc(cap * sizeof *all);
  int *all_e = xmalloc(cap * sizeof *all_e);
  while (sqlite3_step(st) == SQLITE_ROW) {
    if (n_all == cap) {
      cap *= 2;
      all = realloc(all, cap * sizeof *all);
      all_e = realloc(all_e, cap * sizeof *all_e);
      if (!all || !all_e) die("out of memory");
    }
    all[n_all] = sqlite3_column_int64(st, 0);
    all_e[n_all++] = sqlite3_column_int(st, 1);
  }
  sqlite3_finalize(st);
  if (n_all == 0) {
    free(all);
    free(all_e);
    return;
  }
  struct batch b = {0};
  b.n = O.batch < (int)n_all ? O.batch : (int)n_all;
  b.ids = xmalloc((size_t)b.n * sizeof *b.ids);
  b.n_edges = xmalloc((size_t)b.n * sizeof *b.n_edges);
  b.off = xmalloc((size_t)b.n * sizeof *b.off);
  if (!strcmp(kind, "first")) {
    for (int i = 0; i < b.n; i++)
      b.ids[i] = all[i], b.n_edges[i] = all_e[i];
  } else { /* partial Fisher-Yates over the indices, seeded */
    size_t *idx = xmalloc(n_all * sizeof *idx);
    uint64_t s = O.seed;
    for (size_t i = 0; i < n_all; i++)
      idx[i] = i;
    for (int i = 0; i < b.n; i++) {
      size_t j = (size_t)i + (size_t)(splitmix(&s) % (n_all - (size_t)i));
      size_t tmp = idx[i];
      idx[i] = idx[j];
      idx[j] = tmp;
      b.ids[i] = all[idx[i]];
      b.n_edges[i] = all_e[idx[i]];
    }
    free(idx);
  }
  free(all);
  free(all_e);
  int64_t batch_edges = 0;
  for (int i = 0; i < b.n; i++) {
    b.off[i] = b.total;
    b.total += (size_t)b.n_edges[i] * bp->per_edge;
    batch_edges += b.n_edges[i];
  }
  b.arena = xmalloc(b.total * sizeof *b.arena);
  float *ref = xmalloc(b.total * sizeof *ref);

  for (int threads = 1; threads <= threads_max && threads <= 64; threads++) {
    if (threads > 1 && threads != threads_max) continue; /* 1 and threads_max */
    sqlite3 *dbs[64];
    for (int k = 0; k < threads; k++) {
      dbs[k] = open_ro();
      sqlite3_stmt *w = prep(dbs[k], "SELECT count(*) FROM sqlite_master"); /* loads the schema */
      sqlite3_step(w);
      sqlite3_finalize(w);
    }
    double *t[N_METHODS];
    int64_t bytes[N_METHODS] = {0};
    double cs[N_METHODS] = {0}, maxdiff[N_METHODS] = {0};
    for (int m = 0; m < N_METHODS; m++)
      t[m] = xmalloc((size_t)O.reps * sizeof(double));
    /* The coordinates method first, once, untimed: the reference result. */
    for (size_t k = 0; k < b.total; k++)
      b.arena[k] = NAN;
    if (run_method(M_COORDS, bp, &b, threads, dbs, &bytes[M_COORDS], &cs[M_COORDS]) < 0)
      die("batch: recomputing from coordinates failed (do the graph options match the database?)");
    memcpy(ref, b.arena, b.total * sizeof *ref);
    for (int r = 0; r < O.reps; r++) {
      for (int m = 0; m < N_METHODS; m++) {
        for (size_t k = 0; k < b.total; k++)
          b.arena[k] = NAN; /* same state for every method */
        t[m][r] = run_method(m, bp, &b, threads, dbs, &bytes[m], &cs[m]);
        if (t[m][r] < 0) die("batch: method %s failed", method_name[m]);
        if (r == 0 && m != M_FETCH) {
          double d = 0;
          for (size_t k = 0; k < b.total; k++) {
            double x = fabs((double)b.arena[k] - (double)ref[k]);
            if (!(x <= d)) d = x; /* NaN (a value not written) wins */
          }
          maxdiff[m] = d;
        }
      }
    }
    double best[N_METHODS], med[N_METHODS];
    for (int m = 0; m < N_METHODS; m++) {
      qsort(t[m], (size_t)O.reps, sizeof(double), cmp_d);
      best[m] = t[m][0];
      med[m] = t[m][O.reps / 2];
    }
    for (int m = 0; m < N_METHODS; m++) {
      char metric[64], diff[64] = "";
      snprintf(metric, sizeof metric, "batch_%s", method_name[m]);
      if (m != M_FETCH) snprintf(diff, sizeof diff, ",\"max_abs_diff_vs_coords\":%.3g", maxdiff[m]);
      head(metric, threads, m == M_READ || m == M_FETCH);
      printf(",\"batch\":\"%s\",\"n_mol\":%d,\"n_edges\":%lld,\"floats\":%zu,\"repetitions\":%d,\"ms\":%.3f,"
             "\"ms_median\":%.3f,\"mol_per_s\":%.1f,\"bytes_read\":%lld%s,\"checksum\":%.6g,"
             "\"cache\":\"os_warm_sqlite_emptied\"}\n",
             kind, b.n, (long long)batch_edges, m == M_FETCH ? (size_t)0 : b.total, O.reps, 1e3 * best[m], 1e3 * med[m],
             b.n / best[m], (long long)bytes[m], diff, cs[m]);
    }
    head("batch_read_vs_recompute", threads, 1);
    printf(",\"batch\":\"%s\",\"n_mol\":%d,\"n_edges\":%lld,\"read_ms\":%.3f,\"recompute_from_coords_ms\":%.3f,"
           "\"recompute_from_graphs_ms\":%.3f,\"ratio_read_over_coords\":%.3f,\"ratio_read_over_graphs\":%.3f,"
           "\"fetch_only_ms\":%.3f,\"basis_mb\":%.2f}\n",
           kind, b.n, (long long)batch_edges, 1e3 * best[M_READ], 1e3 * best[M_COORDS], 1e3 * best[M_GRAPHS],
           best[M_READ] / best[M_COORDS], best[M_READ] / best[M_GRAPHS], 1e3 * best[M_FETCH],
           (double)bytes[M_READ] / 1e6);
    fflush(stdout);
    for (int m = 0; m < N_METHODS; m++)
      free(t[m]);
    for (int k = 0; k < threads; k++)
      sqlite3_close(dbs[k]);
  }
  free(ref);
  free(b.arena);
  free(b.ids);
  free(b.n_edges);
  free(b.off);
}

/* ---- main ------------------------------------------------------------------- */

static void usage(void) {
  fprintf(stderr, "usage: geometry_bench DB [--dataset NAME] [--edges radius|bonds|radius+bonds] [--cutoff A]\n"
                  "         [--max-neighbors N] [--elements H,C,N,O,F,P,S,Cl,Br,I] [--threads T] [--reps R]\n"
                  "         [--compute-reps R] [--batch N] [--seed S] [--parts graph,basis,encode,batch]\n");
  exit(2);
}

static void set_elements(const char *list) {
  char *copy = strdup(list), *save = NULL;
  if (!copy) die("out of memory");
  O.go.n_elements = 0;
  for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    int z = mol_element_z(tok);
    if (z <= 0) die("--elements: '%s' is not an element", tok);
    if (O.go.n_elements < (int)sizeof O.elements) O.elements[O.go.n_elements++] = (uint8_t)z;
  }
  free(copy);
  O.go.elements = O.elements;
}

int main(int argc, char **argv) {
  if (argc < 2 || argv[1][0] == '-') usage();
  O.db = argv[1];
  O.dataset = NULL;
  O.edges_name = "radius";
  O.go.edges = GRAPH_EDGES_RADIUS;
  O.go.cutoff = 5.0;
  O.go.max_neighbors = 32; /* the stage's default */
  O.go.with_other = 1;
  O.go.with_charge = 1;
  O.go.with_atomic_number = 0;
  set_elements("H,C,N,O,F,P,S,Cl,Br,I");
  O.threads = 2;
  O.reps = 5;
  O.compute_reps = 3;
  O.batch = 100;
  O.seed = 12345;
  O.parts = PART_GRAPH | PART_BASIS | PART_ENCODE | PART_BATCH;
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) usage();
    i++;
    if (!strcmp(a, "--dataset"))
      O.dataset = v;
    else if (!strcmp(a, "--edges")) {
      O.edges_name = v;
      if (!strcmp(v, "radius"))
        O.go.edges = GRAPH_EDGES_RADIUS;
      else if (!strcmp(v, "bonds"))
        O.go.edges = GRAPH_EDGES_BONDS;
      else if (!strcmp(v, "radius+bonds"))
        O.go.edges = GRAPH_EDGES_RADIUS_BONDS;
      else
        usage();
    } else if (!strcmp(a, "--cutoff"))
      O.go.cutoff = atof(v);
    else if (!strcmp(a, "--max-neighbors"))
      O.go.max_neighbors = atoi(v);
    else if (!strcmp(a, "--elements"))
      set_elements(v);
    else if (!strcmp(a, "--threads"))
      O.threads = atoi(v);
    else if (!strcmp(a, "--reps"))
      O.reps = atoi(v);
    else if (!strcmp(a, "--compute-reps"))
      O.compute_reps = atoi(v);
    else if (!strcmp(a, "--batch"))
      O.batch = atoi(v);
    else if (!strcmp(a, "--seed"))
      O.seed = strtoull(v, NULL, 10);
    else if (!strcmp(a, "--parts")) {
      O.parts = 0;
      if (strstr(v, "graph")) O.parts |= PART_GRAPH;
      if (strstr(v, "basis")) O.parts |= PART_BASIS;
      if (strstr(v, "encode")) O.parts |= PART_ENCODE;
      if (strstr(v, "batch")) O.parts |= PART_BATCH;
    } else
      usage();
  }
  if (O.threads < 1 || O.reps < 1 || O.compute_reps < 1 || O.batch < 1) usage();
  if (!O.dataset) {
    const char *s = strrchr(O.db, '/');
    O.dataset = s ? s + 1 : O.db;
  }

  sqlite3 *db = open_ro();
  /* basis settings from the table */
  O.max_degree = 3;
  O.dtype = BASIS_FP32;
  snprintf(O.dtype_name, sizeof O.dtype_name, "fp32");
  sqlite3_stmt *st = prep(db, "SELECT max_degree, dtype FROM bases LIMIT 1");
  if (sqlite3_step(st) == SQLITE_ROW) {
    O.max_degree = sqlite3_column_int(st, 0);
    snprintf(O.dtype_name, sizeof O.dtype_name, "%s", (const char *)sqlite3_column_text(st, 1));
    O.dtype = !strcmp(O.dtype_name, "fp16") ? BASIS_FP16 : !strcmp(O.dtype_name, "bf16") ? BASIS_BF16 : BASIS_FP32;
  } else {
    O.parts &= ~PART_BATCH;
  }
  sqlite3_finalize(st);
  struct basis_plan bp;
  if (basis_plan_init(&bp, O.max_degree)) die("bad max_degree");

  if (O.parts & PART_GRAPH) {
    int64_t n, db_edges = 0;
    struct blob *mols =
        load_blobs(db, "SELECT id, mol FROM molecules WHERE id IN (SELECT mol_id FROM graphs) ORDER BY id", &n);
    st = prep(db, "SELECT coalesce(sum(n_edges), 0) FROM graphs");
    if (sqlite3_step(st) == SQLITE_ROW) db_edges = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    for (int threads = 1; threads <= O.threads; threads++) {
      if (threads > 1 && threads != O.threads) continue;
      double best = 1e300, cs = 0;
      int64_t edges = 0, failed = 0;
      for (int r = 0; r < O.reps; r++) {
        double s = graph_pass(mols, n, threads, &edges, &cs, &failed);
        if (s < best) best = s;
      }
      char extra[160];
      snprintf(extra, sizeof extra, ",\"failed\":%lld,\"edges_match_db\":%s", (long long)failed,
               edges == db_edges ? "true" : "false");
      rate_line("graph_compute", threads, 0, n, edges, best, O.reps, cs, extra);
    }
    free_blobs(mols, n);
  }

  if (O.parts & (PART_BASIS | PART_ENCODE)) {
    int64_t n;
    struct blob *graphs = load_blobs(db, "SELECT mol_id, graph FROM graphs ORDER BY mol_id", &n);
    int64_t edges = 0;
    int max_edges = 0;
    if (O.parts & PART_BASIS) {
      struct relpos *rp = xmalloc((size_t)(n ? n : 1) * sizeof *rp);
      for (int64_t i = 0; i < n; i++) {
        struct graph g;
        struct se3_error e;
        graph_init(&g);
        if (graph_from_blob(graphs[i].p, graphs[i].n, &g, &e)) die("stored graph: %s", se3_error_str(&e).s);
        rp[i].n_edges = g.n_edges;
        rp[i].rel = xmalloc((size_t)g.n_edges * 3 * sizeof(float));
        memcpy(rp[i].rel, g.rel_pos, (size_t)g.n_edges * 3 * sizeof(float));
        edges += g.n_edges;
        if (g.n_edges > max_edges) max_edges = g.n_edges;
        graph_free(&g);
      }
      for (int threads = 1; threads <= O.threads; threads++) {
        if (threads > 1 && threads != O.threads) continue;
        double best = 1e300, cs = 0;
        for (int r = 0; r < O.compute_reps; r++) {
          double s = basis_f32_pass(&bp, rp, n, threads, max_edges, &cs);
          if (s < best) best = s;
        }
        char extra[96];
        snprintf(extra, sizeof extra, ",\"floats_per_edge\":%zu", bp.per_edge);
        rate_line("basis_compute_f32", threads, 0, n, edges, best, O.compute_reps, cs, extra);
      }
      for (int64_t i = 0; i < n; i++)
        free(rp[i].rel);
      free(rp);
    }
    if (O.parts & PART_ENCODE) {
      edges = 0;
      for (int64_t i = 0; i < n; i++)
        if (graphs[i].n >= GRAPH_BLOB_HEADER)
          edges += (int64_t)graphs[i].p[12] | (int64_t)graphs[i].p[13] << 8 | (int64_t)graphs[i].p[14] << 16 |
                   (int64_t)graphs[i].p[15] << 24;
      for (int threads = 1; threads <= O.threads; threads++) {
        if (threads > 1 && threads != O.threads) continue;
        double best = 1e300, cs = 0;
        int64_t failed = 0;
        for (int r = 0; r < O.compute_reps; r++) {
          double s = basis_blob_pass(&bp, graphs, n, threads, &cs, &failed);
          if (s < best) best = s;
        }
        char extra[64];
        snprintf(extra, sizeof extra, ",\"failed\":%lld", (long long)failed);
        rate_line("basis_compute_blob", threads, 1, n, edges, best, O.compute_reps, cs, extra);
      }
    }
    free_blobs(graphs, n);
  }

  if (O.parts & PART_BATCH) {
    bench_batch(db, &bp, "first", O.threads);
    bench_batch(db, &bp, "random", O.threads);
  }
  basis_plan_free(&bp);
  sqlite3_close(db);
  return 0;
}
