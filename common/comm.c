/* comm.c — the processes of one data-parallel run (comm.h). */
#define _GNU_SOURCE
#include "common/comm.h"

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Variables a launcher sets in the processes it starts: Open MPI's mpirun,
 * PMIx (srun --mpi=pmix, prterun), PMI (MPICH's hydra, srun --mpi=pmi2). */
static int launched_size(int *known) {
  static const char *const sizes[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MPI_LOCALNRANKS"};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    const char *v = getenv(sizes[i]);
    if (v && *v) {
      *known = 1;
      return atoi(v);
    }
  }
  *known = 0;
  const char *r = getenv("PMIX_RANK");
  if (r && *r) return atoi(r) > 0 ? 2 : 1; /* PMIx names the rank, not the size */
  return 0;
}

#ifdef SE3_HAVE_MPI
#include <mpi.h>

/* A sum comm_sum_start queued for the background thread. */
struct bg_job {
  void *x;
  size_t n, lo, hi;
  int esz, scatter;
};

#define BG_QUEUE 256

struct se3_comm {
  MPI_Comm world, node;
  int rank, size, local_rank, local_size;
  void *scratch; /* the sums' receive buffer */
  size_t scratch_bytes;
  /* the background sums (comm_sum_start): one thread, started by the first,
   * that alone calls MPI while sums are queued; threads: MPI allows it
   * (MPI_THREAD_SERIALIZED), else the sums run at once in the caller */
  int threads, bg_started, bg_quit, bg_failed;
  pthread_t bg;
  pthread_mutex_t mu;
  pthread_cond_t work, done;
  struct bg_job q[BG_QUEUE];
  size_t head, tail; /* queued: q[head % BG_QUEUE] .. q[(tail - 1) % BG_QUEUE]; the one at head may be running */
  double bg_busy;    /* seconds the thread spent summing since the last comm_sum_wait */
};

static double mono_s(void);

/* comm_sum_f64_within's deadline for this thread's waits (CLOCK_MONOTONIC
 * seconds; 0: none), and whether a wait passed it. */
static _Thread_local double wait_deadline;
static _Thread_local int wait_timed_out;

/* Waits for r without holding a core: a short spin (a step's sum is often
 * ready within microseconds), then sleeps growing to max_ns. -1 when MPI
 * failed or the thread's deadline passed (wait_timed_out). */
static int wait_req_max(MPI_Request *r, long max_ns) {
  long ns = 2000;
  for (int spins = 0;; spins++) {
    int done = 0;
    if (MPI_Test(r, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return -1;
    if (done) return 0;
    if (spins < 1000) continue;
    if (wait_deadline > 0 && mono_s() > wait_deadline) { /* (the request is left: the caller ends the job) */
      wait_timed_out = 1;
      return -1;
    }
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
    if (ns < max_ns) ns *= 2;
  }
}

/* The sleeps grow to a millisecond: a process waiting for the others. */
static int wait_req(MPI_Request *r) { return wait_req_max(r, 1000000); }

int comm_open(struct se3_comm **out, struct se3_error *err) {
  *out = NULL;
  int known, n = launched_size(&known);
  /* SE3_COMM=mpi: join MPI even as the only process (a run of one then
   * takes the data-parallel paths: the tests, a check of a setup) */
  const char *want = getenv("SE3_COMM");
  int alone = want && !strcmp(want, "mpi");
  if (!alone && (n == 0 || (known && n == 1))) return 0; /* no launcher, or one process: no MPI at all */
  int provided;
  /* serialized: the background sums' thread calls MPI while the caller
   * computes (never both at once) */
  if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
    se3_error_set(err, SE3_ERR_RUN, "MPI failed to start (the launcher started %s processes)",
                  known ? "several" : "this");
    return -1;
  }
  struct se3_comm *c = calloc(1, sizeof *c);
  if (!c) {
    se3_error_set(err, SE3_ERR_MEMORY, "out of memory");
    return -1;
  }
  c->world = MPI_COMM_WORLD;
  c->threads = provided >= MPI_THREAD_SERIALIZED;
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->work, NULL);
  pthread_cond_init(&c->done, NULL);
  MPI_Comm_rank(c->world, &c->rank);
  MPI_Comm_size(c->world, &c->size);
  if (c->size == 1 && !alone) {
    free(c);
    MPI_Finalize();
    return 0;
  }
  if (MPI_Comm_split_type(c->world, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &c->node) != MPI_SUCCESS) {
    se3_error_set(err, SE3_ERR_RUN, "MPI could not tell which processes share this node");
    free(c);
    return -1;
  }
  MPI_Comm_rank(c->node, &c->local_rank);
  MPI_Comm_size(c->node, &c->local_size);
  *out = c;
  return 0;
}

static void bg_stop(struct se3_comm *c);

void comm_close(struct se3_comm *c) {
  if (!c) return;
  bg_stop(c);
  MPI_Comm_free(&c->node);
  free(c->scratch);
  free(c);
  MPI_Finalize();
}

void comm_abort(const struct se3_comm *c, int code) {
  if (c) MPI_Abort(c->world, code);
  exit(code);
}

const char *comm_library(void) {
  static char v[MPI_MAX_LIBRARY_VERSION_STRING];
  if (!v[0]) {
    int len = 0;
    MPI_Get_library_version(v, &len);
    v[strcspn(v, ",\n")] = 0; /* "Open MPI v4.1.4, package: ..." -> its first part */
  }
  return v;
}

static void *scratch(struct se3_comm *c, size_t bytes) {
  if (bytes > c->scratch_bytes) {
    void *p = realloc(c->scratch, bytes);
    if (!p) return NULL;
    c->scratch = p;
    c->scratch_bytes = bytes;
  }
  return c->scratch;
}

int comm_bcast(const struct se3_comm *c, void *buf, size_t bytes) {
  if (!c) return 0;
  for (size_t off = 0; off < bytes;) {
    int n = bytes - off < (1u << 30) ? (int)(bytes - off) : 1 << 30;
    MPI_Request r;
    if (MPI_Ibcast((char *)buf + off, n, MPI_BYTE, 0, c->world, &r) != MPI_SUCCESS || wait_req(&r)) return -1;
    off += (size_t)n;
  }
  return 0;
}

/* MPI's type for the elements of the sums and slices: float or double. */
static MPI_Datatype elem(int esz) { return esz == 4 ? MPI_FLOAT : MPI_DOUBLE; }

/* Slice j of m elements cut into slices of `slice`: counts[j] elements
 * from displs[j] (the last slices shorter or empty); MPI's int counts. */
static void slice_table(int N, size_t m, size_t slice, int *counts, int *displs) {
  for (int j = 0; j < N; j++) {
    size_t lo = (size_t)j * slice < m ? (size_t)j * slice : m, hi = lo + slice < m ? lo + slice : m;
    counts[j] = (int)(hi - lo);
    displs[j] = (int)lo;
  }
}

/* One piece of a sum in rank order: x[lo..hi) of an array of n elements
 * (float: esz 4, double: esz 8) cut into comm_slice's slices of n. Every
 * process's copy of the part of the piece inside this process's slice
 * comes here (straight from their x, no copy) and is added in rank order,
 * in double, over this process's part of x; unless scatter, all then
 * gather the summed parts in place. An element's sum depends on nothing
 * but the processes' values of it, so a whole array, its slices and any
 * buckets of it give the same bits. (N - 1) (hi - lo) elements must fit
 * MPI's int counts (sum_range cuts); tab: 4 N ints; waits sleep up to
 * max_ns. */
static int sum_part(struct se3_comm *c, void *x, size_t n, size_t lo, size_t hi, int esz, int scatter, long max_ns,
                    int *tab) {
  MPI_Datatype t = elem(esz);
  int N = c->size, *sc = tab, *sd = tab + N, *rc = tab + 2 * N, *rd = tab + 3 * N;
  size_t per = (n + (size_t)N - 1) / (size_t)N;
  for (int j = 0; j < N; j++) {
    size_t a = (size_t)j * per < n ? (size_t)j * per : n, b = a + per < n ? a + per : n;
    if (a < lo) a = lo;
    if (b > hi) b = hi;
    sc[j] = b > a ? (int)(b - a) : 0;
    sd[j] = b > a ? (int)(a - lo) : 0;
  }
  int mine = sc[c->rank];
  char *recv = scratch(c, (size_t)N * (size_t)mine * (size_t)esz + 1);
  if (!recv) return -1;
  for (int j = 0; j < N; j++) {
    rc[j] = mine;
    rd[j] = j * mine;
  }
  char *base = (char *)x + lo * (size_t)esz;
  MPI_Request r;
  if (MPI_Ialltoallv(base, sc, sd, t, recv, rc, rd, t, c->world, &r) != MPI_SUCCESS || wait_req_max(&r, max_ns))
    return -1;
  /* recv holds this part of process 0's copy, then of process 1's, ... */
  char *out = base + (size_t)sd[c->rank] * (size_t)esz;
  for (size_t i = 0; i < (size_t)mine; i++) {
    double s = 0;
    for (size_t j = 0; j < (size_t)N; j++)
      s += esz == 4 ? (double)((const float *)recv)[j * (size_t)mine + i]
                    : ((const double *)recv)[j * (size_t)mine + i];
    if (esz == 4)
      ((float *)out)[i] = (float)s;
    else
      ((double *)out)[i] = s;
  }
  if (scatter) return 0;
  return MPI_Iallgatherv(MPI_IN_PLACE, 0, t, base, sc, sd, t, c->world, &r) != MPI_SUCCESS || wait_req_max(&r, max_ns)
             ? -1
             : 0;
}

/* x[lo..hi) of an array of n elements summed over the processes in rank
 * order (sum_part), in pieces small enough for MPI's int counts. */
static int sum_range(struct se3_comm *c, void *x, size_t n, size_t lo, size_t hi, int esz, int scatter, long max_ns) {
  size_t N = (size_t)c->size, cap = (size_t)(1u << 30) / N;
  int *tab = malloc(4 * N * sizeof *tab);
  if (!tab) return -1;
  int rc = 0;
  for (size_t a = lo; a < hi && rc == 0; a += cap)
    rc = sum_part(c, x, n, a, hi - a < cap ? hi : a + cap, esz, scatter, max_ns, tab);
  free(tab);
  return rc;
}

/* The sum of x over the processes in rank order, element by element, for
 * float (esz 4) or double (esz 8): slice j of x is summed on process j,
 * which receives every process's copy of it, and all gather the summed
 * slices in place. */
static int sum_fixed(const struct se3_comm *cc, void *x, size_t n, int esz) {
  return sum_range((struct se3_comm *)cc, x, n, 0, n, esz, 0, 1000000);
}

static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The background thread: runs the queued sums in order until told to quit
 * with nothing queued. Its waits sleep at most 0.1 ms: the caller is
 * computing, and a late sum is late for the next bucket too. */
static void *bg_main(void *arg) {
  struct se3_comm *c = arg;
  pthread_mutex_lock(&c->mu);
  for (;;) {
    while (c->head == c->tail && !c->bg_quit)
      pthread_cond_wait(&c->work, &c->mu);
    if (c->head == c->tail) break;
    struct bg_job j = c->q[c->head % BG_QUEUE];
    pthread_mutex_unlock(&c->mu);
    double t0 = mono_s();
    int rc = sum_range(c, j.x, j.n, j.lo, j.hi, j.esz, j.scatter, 100000);
    double dt = mono_s() - t0;
    pthread_mutex_lock(&c->mu);
    c->bg_failed |= rc != 0;
    c->bg_busy += dt;
    c->head++;
    pthread_cond_broadcast(&c->done);
  }
  pthread_mutex_unlock(&c->mu);
  return NULL;
}

/* Starts the thread, with every signal blocked in it (the stage's
 * handlers run on the thread that computes). 0, or -1. */
static int bg_start(struct se3_comm *c) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&c->bg, NULL, bg_main, c);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc) return -1;
  c->bg_started = 1;
  return 0;
}

static void bg_stop(struct se3_comm *c) {
  if (!c->bg_started) return;
  pthread_mutex_lock(&c->mu);
  c->bg_quit = 1;
  pthread_cond_signal(&c->work);
  pthread_mutex_unlock(&c->mu);
  pthread_join(c->bg, NULL);
  c->bg_started = 0;
}

int comm_sum_start(const struct se3_comm *cc, void *x, size_t n, size_t lo, size_t hi, int esz, int scatter) {
  if (!cc || cc->size == 1 || hi <= lo) return 0;
  struct se3_comm *c = (struct se3_comm *)cc;
  pthread_mutex_lock(&c->mu);
  if (c->threads && !c->bg_started && bg_start(c)) c->threads = 0;
  if (!c->threads) { /* no thread: the sum now, in this one */
    pthread_mutex_unlock(&c->mu);
    double t0 = mono_s();
    int rc = sum_range(c, x, n, lo, hi, esz, scatter, 1000000);
    pthread_mutex_lock(&c->mu);
    c->bg_busy += mono_s() - t0;
    c->bg_failed |= rc != 0;
    pthread_mutex_unlock(&c->mu);
    return 0;
  }
  while (c->tail - c->head >= BG_QUEUE)
    pthread_cond_wait(&c->done, &c->mu);
  c->q[c->tail % BG_QUEUE] = (struct bg_job){x, n, lo, hi, esz, scatter};
  c->tail++;
  pthread_cond_signal(&c->work);
  pthread_mutex_unlock(&c->mu);
  return 0;
}

int comm_sum_wait(const struct se3_comm *cc, double *busy) {
  if (busy) *busy = 0;
  if (!cc || cc->size == 1) return 0;
  struct se3_comm *c = (struct se3_comm *)cc;
  pthread_mutex_lock(&c->mu);
  while (c->head != c->tail)
    pthread_cond_wait(&c->done, &c->mu);
  int failed = c->bg_failed;
  if (busy) *busy = c->bg_busy;
  c->bg_failed = 0;
  c->bg_busy = 0;
  pthread_mutex_unlock(&c->mu);
  return failed ? -1 : 0;
}

void comm_slice(const struct se3_comm *c, size_t n, size_t *lo, size_t *hi) {
  size_t N = (size_t)comm_size(c), per = (n + N - 1) / N, r = (size_t)comm_rank(c);
  *lo = r * per < n ? r * per : n;
  *hi = *lo + per < n ? *lo + per : n;
}

/* comm_slice's slices of n elements as the v-collectives' counts and
 * displacements (slice_table: 2 x size ints); NULL beyond MPI's int counts. */
static int *slice_counts(const struct se3_comm *c, size_t n) {
  if (n > (size_t)INT32_MAX) return NULL;
  int *cd = malloc(2 * (size_t)c->size * sizeof *cd);
  if (cd) slice_table(c->size, n, (n + (size_t)c->size - 1) / (size_t)c->size, cd, cd + c->size);
  return cd;
}

int comm_reduce_scatter(const struct se3_comm *c, void *x, size_t n, int esz) {
  if (!c || c->size == 1) return 0;
  return sum_range((struct se3_comm *)c, x, n, 0, n, esz, 1, 1000000);
}

int comm_allgather(const struct se3_comm *c, void *x, size_t n, int esz) {
  if (!c || c->size == 1) return 0;
  int *cd = slice_counts(c, n);
  if (!cd) return -1;
  MPI_Request r;
  int bad = MPI_Iallgatherv(MPI_IN_PLACE, 0, elem(esz), x, cd, cd + c->size, elem(esz), c->world, &r) != MPI_SUCCESS ||
            wait_req(&r);
  free(cd);
  return bad ? -1 : 0;
}

int comm_gather_slices(const struct se3_comm *c, const void *mine, void *all, size_t n, int esz) {
  if (!c || c->size == 1) return 0;
  int *cd = slice_counts(c, n);
  if (!cd) return -1;
  MPI_Request r;
  int bad = MPI_Igatherv(c->rank ? mine : MPI_IN_PLACE, cd[c->rank], elem(esz), all, cd, cd + c->size, elem(esz), 0,
                         c->world, &r) != MPI_SUCCESS ||
            wait_req(&r);
  free(cd);
  return bad ? -1 : 0;
}

int comm_scatter_slices(const struct se3_comm *c, const void *all, void *mine, size_t n, int esz) {
  if (!c || c->size == 1) return 0;
  int *cd = slice_counts(c, n);
  if (!cd) return -1;
  MPI_Request r;
  int bad = MPI_Iscatterv(all, cd, cd + c->size, elem(esz), c->rank ? mine : MPI_IN_PLACE, cd[c->rank], elem(esz), 0,
                          c->world, &r) != MPI_SUCCESS ||
            wait_req(&r);
  free(cd);
  return bad ? -1 : 0;
}

int comm_max_int(const struct se3_comm *c, int *x, int n) {
  if (!c) return 0;
  MPI_Request r;
  return MPI_Iallreduce(MPI_IN_PLACE, x, n, MPI_INT, MPI_MAX, c->world, &r) != MPI_SUCCESS || wait_req(&r) ? -1 : 0;
}

int comm_gather_f64(const struct se3_comm *c, const double *mine, const int *counts, double *all) {
  if (!c) {
    if (counts[0] > 0) memmove(all, mine, (size_t)counts[0] * sizeof *all);
    return 0;
  }
  int *displs = malloc((size_t)c->size * sizeof *displs);
  if (!displs) return -1;
  for (int i = 0, o = 0; i < c->size; o += counts[i], i++)
    displs[i] = o;
  MPI_Request r;
  int bad = MPI_Iallgatherv(mine, counts[c->rank], MPI_DOUBLE, all, counts, displs, MPI_DOUBLE, c->world, &r) !=
                MPI_SUCCESS ||
            wait_req(&r);
  free(displs);
  return bad ? -1 : 0;
}

int comm_rank(const struct se3_comm *c) { return c ? c->rank : 0; }
int comm_size(const struct se3_comm *c) { return c ? c->size : 1; }
int comm_local_rank(const struct se3_comm *c) { return c ? c->local_rank : 0; }
int comm_local_size(const struct se3_comm *c) { return c ? c->local_size : 1; }

#else /* no MPI in this build: one process */

struct se3_comm {
  int unused;
};

int comm_open(struct se3_comm **out, struct se3_error *err) {
  *out = NULL;
  int known, n = launched_size(&known);
  if (n > 1) {
    se3_error_set(err, SE3_ERR_RUN,
                  "a launcher started %s processes, but this se3screen was built without MPI: install "
                  "libopenmpi-dev and rebuild (cmake finds MPI by itself), or start one process",
                  known ? "several" : "more than one");
    return -1;
  }
  const char *want = getenv("SE3_COMM");
  if (want && !strcmp(want, "mpi")) {
    se3_error_set(err, SE3_ERR_RUN, "SE3_COMM=mpi, but this se3screen was built without MPI");
    return -1;
  }
  return 0;
}
void comm_close(struct se3_comm *c) { (void)c; }
void comm_abort(const struct se3_comm *c, int code) {
  (void)c;
  exit(code);
}
const char *comm_library(void) { return "none"; }
int comm_bcast(const struct se3_comm *c, void *buf, size_t bytes) {
  (void)c, (void)buf, (void)bytes;
  return 0;
}
static int sum_fixed(const struct se3_comm *c, void *x, size_t n, int esz) {
  (void)c, (void)x, (void)n, (void)esz;
  return 0;
}
int comm_max_int(const struct se3_comm *c, int *x, int n) {
  (void)c, (void)x, (void)n;
  return 0;
}
int comm_sum_start(const struct se3_comm *c, void *x, size_t n, size_t lo, size_t hi, int esz, int scatter) {
  return (void)c, (void)x, (void)n, (void)lo, (void)hi, (void)esz, (void)scatter, 0;
}
int comm_sum_wait(const struct se3_comm *c, double *busy) {
  if (busy) *busy = 0;
  return (void)c, 0;
}
void comm_slice(const struct se3_comm *c, size_t n, size_t *lo, size_t *hi) {
  (void)c;
  *lo = 0;
  *hi = n;
}
int comm_reduce_scatter(const struct se3_comm *c, void *x, size_t n, int esz) {
  return (void)c, (void)x, (void)n, (void)esz, 0;
}
int comm_allgather(const struct se3_comm *c, void *x, size_t n, int esz) {
  return (void)c, (void)x, (void)n, (void)esz, 0;
}
int comm_gather_slices(const struct se3_comm *c, const void *mine, void *all, size_t n, int esz) {
  return (void)c, (void)mine, (void)all, (void)n, (void)esz, 0;
}
int comm_scatter_slices(const struct se3_comm *c, const void *all, void *mine, size_t n, int esz) {
  return (void)c, (void)mine, (void)all, (void)n, (void)esz, 0;
}
int comm_gather_f64(const struct se3_comm *c, const double *mine, const int *counts, double *all) {
  (void)c;
  if (counts[0] > 0) memmove(all, mine, (size_t)counts[0] * sizeof *all);
  return 0;
}
int comm_rank(const struct se3_comm *c) { return (void)c, 0; }
int comm_size(const struct se3_comm *c) { return (void)c, 1; }
int comm_local_rank(const struct se3_comm *c) { return (void)c, 0; }
int comm_local_size(const struct se3_comm *c) { return (void)c, 1; }
#endif

int comm_sum_f32(const struct se3_comm *c, float *x, size_t n) { return c ? sum_fixed(c, x, n, 4) : 0; }
int comm_sum_f64(const struct se3_comm *c, double *x, size_t n) { return c ? sum_fixed(c, x, n, 8) : 0; }

int comm_sum_f64_within(const struct se3_comm *c, double *x, size_t n, double timeout_s) {
  if (!c) return 0;
#ifdef SE3_HAVE_MPI
  wait_deadline = mono_s() + timeout_s;
  wait_timed_out = 0;
  int rc = sum_fixed(c, x, n, 8);
  wait_deadline = 0;
  return rc && wait_timed_out ? -2 : rc;
#else
  (void)timeout_s;
  return sum_fixed(c, x, n, 8);
#endif
}
