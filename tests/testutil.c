/* testutil.c — helpers shared by the test programs. */
#define _GNU_SOURCE
#include "testutil.h"

#include "chem/mol.h"
#include "chem/obbridge.h"
#include "chem/records.h"
#include "chem/graph.h"
#include "common/error.h"
#include "models/se3.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

char *tu_tmpdir(const char *name) {
  char *dir = NULL;
  if (asprintf(&dir, "%s/%s", SE3_TEST_TMP, name) < 0) return NULL;
  char *cmd = NULL;
  if (asprintf(&cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir) < 0) return NULL;
  if (system(cmd) != 0) {
    free(cmd);
    free(dir);
    return NULL;
  }
  free(cmd);
  return dir;
}

char *tu_write(const char *dir, const char *name, const char *text) {
  char *path = NULL;
  if (asprintf(&path, "%s/%s", dir, name) < 0) return NULL;
  FILE *f = fopen(path, "w");
  if (!f) {
    free(path);
    return NULL;
  }
  fputs(text, f);
  fclose(f);
  return path;
}

char *tu_read(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  size_t r;
  while ((r = fread(buf + n, 1, cap - n - 1, f)) > 0) {
    n += r;
    if (cap - n < 2) {
      cap *= 2;
      buf = realloc(buf, cap);
    }
  }
  fclose(f);
  buf[n] = 0;
  if (len) *len = n;
  return buf;
}

int tu_sh(char **out, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *cmd = NULL;
  int rc = vasprintf(&cmd, fmt, ap);
  va_end(ap);
  if (rc < 0) return -1;
  char *full = NULL;
  if (asprintf(&full, "( %s ) 2>&1", cmd) < 0) return -1;
  free(cmd);
  FILE *p = popen(full, "r");
  free(full);
  if (!p) return -1;
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  size_t r;
  while ((r = fread(buf + n, 1, cap - n - 1, p)) > 0) {
    n += r;
    if (cap - n < 2) {
      cap *= 2;
      buf = realloc(buf, cap);
    }
  }
  buf[n] = 0;
  int st = pclose(p);
  if (out)
    *out = buf;
  else
    free(buf);
  if (WIFEXITED(st)) return WEXITSTATUS(st);
  if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
  return -1;
}

int tu_have_shared(void) {
  struct stat st;
  return stat(SE3_SHARED_DIR "/data", &st) == 0 && S_ISDIR(st.st_mode);
}

static const char *rot(const char *base, const char *rel) {
  static char bufs[8][4096];
  static int k;
  char *b = bufs[k++ & 7];
  snprintf(b, sizeof bufs[0], "%s/%s", base, rel);
  return b;
}
const char *tu_src(const char *rel) { return rot(SE3_SOURCE_DIR, rel); }
const char *tu_shared(const char *rel) { return rot(SE3_SHARED_DIR, rel); }

#include <sqlite3.h>

char *tu_query(const char *db, const char *sql) { return tu_query_wait(db, sql, 10000); }

char *tu_query_wait(const char *db, const char *sql, int busy_ms) {
  sqlite3 *h = NULL;
  if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
    sqlite3_close(h);
    return NULL;
  }
  sqlite3_busy_timeout(h, busy_ms);
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) != SQLITE_OK) {
    if (busy_ms > 0) fprintf(stderr, "tu_query: %s: %s\n", sql, sqlite3_errmsg(h));
    sqlite3_close(h);
    return NULL;
  }
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  buf[0] = 0;
  int nc = sqlite3_column_count(st), rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    for (int i = 0; i < nc; i++) {
      char tmp[64];
      const char *v;
      char *hex = NULL;
      int t = sqlite3_column_type(st, i);
      if (t == SQLITE_NULL) {
        v = "NULL";
      } else if (t == SQLITE_BLOB) {
        int len = sqlite3_column_bytes(st, i);
        const unsigned char *b = sqlite3_column_blob(st, i);
        hex = malloc((size_t)len * 2 + 1);
        for (int k = 0; k < len; k++)
          sprintf(hex + 2 * k, "%02x", b[k]);
        hex[2 * len] = 0;
        v = hex;
      } else if (t == SQLITE_FLOAT) {
        snprintf(tmp, sizeof tmp, "%.17g", sqlite3_column_double(st, i));
        v = tmp;
      } else {
        v = (const char *)sqlite3_column_text(st, i);
      }
      size_t need = strlen(v) + 2;
      while (n + need + 1 > cap) {
        cap *= 2;
        buf = realloc(buf, cap);
      }
      n += (size_t)sprintf(buf + n, "%s%s", i ? "|" : "", v);
      free(hex);
    }
    if (n + 2 > cap) {
      cap *= 2;
      buf = realloc(buf, cap);
    }
    buf[n++] = '\n';
    buf[n] = 0;
  }
  sqlite3_finalize(st);
  sqlite3_close(h);
  /* (busy_ms 0: a database locked by a frozen writer is "no answer", not a partial one) */
  if (busy_ms == 0 && rc != SQLITE_DONE) {
    free(buf);
    return NULL;
  }
  return buf;
}

long long tu_query_int(const char *db, const char *sql) {
  char *s = tu_query(db, sql);
  if (!s || !s[0]) {
    free(s);
    return -1;
  }
  long long v = atoll(s);
  free(s);
  return v;
}

int tu_se3(char **out, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *args = NULL;
  int rc = vasprintf(&args, fmt, ap);
  va_end(ap);
  if (rc < 0) return -1;
  rc = tu_sh(out, "%s %s", SE3_BINARY, args);
  free(args);
  return rc;
}

double tu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void tu_sleep(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
}

static uint64_t rng_state;
void tu_seed(uint64_t seed) { rng_state = seed; }
double tu_rnd(void) {
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(rng_state >> 11) / 9007199254740992.0;
}

void tu_add_atom(struct mol *m, int z, double x, double y, double zz) {
  m->atoms = realloc(m->atoms, (size_t)(m->n_atoms + 1) * sizeof *m->atoms);
  struct mol_atom *a = &m->atoms[m->n_atoms++];
  memset(a, 0, sizeof *a);
  a->z = (uint8_t)z;
  a->x = x;
  a->y = y;
  a->z_ = zz;
}

void tu_add_bond(struct mol *m, int a, int b, int order) {
  m->bonds = realloc(m->bonds, (size_t)(m->n_bonds + 1) * sizeof *m->bonds);
  struct mol_bond *bd = &m->bonds[m->n_bonds++];
  bd->a = (uint32_t)(a < b ? a : b);
  bd->b = (uint32_t)(a < b ? b : a);
  bd->order = (uint8_t)order;
}

void tu_chain_mol(struct mol *m, int n, int variant) {
  static const int elements[] = {1, 6, 7, 8};
  double p[3] = {0, 0, 0};
  for (int a = 0; a < n; a++) {
    for (int k = 0; k < 3; k++)
      p[k] += 1.4 * (2 * tu_rnd() - 1) / sqrt(3.0) * 1.2;
    tu_add_atom(m, elements[(a * 5 + variant) % 4], p[0], p[1], p[2]);
    if (a) tu_add_bond(m, a - 1, a, 1 + a % 2);
  }
  m->dim = 3;
}

void tu_graph_build(const struct mol *m, struct graph *g) {
  static const uint8_t elements[] = {1, 6, 7, 8};
  struct graph_opts go = {.cutoff = 2.6,
                          .edges = GRAPH_EDGES_RADIUS_BONDS,
                          .elements = elements,
                          .n_elements = 4,
                          .with_other = 1,
                          .with_charge = 1};
  struct se3_error e;
  cr_assert_eq(graph_build(m, &go, g, &e), 0, "%s", se3_error_str(&e).s);
}

void tu_batch_add_mol(struct se3_batch_buf *bb, const struct mol *m) {
  struct graph g;
  graph_init(&g);
  tu_graph_build(m, &g);
  cr_assert_eq(g.node_width, bb->node_in);
  cr_assert_eq(se3_batch_add(bb, g.n_nodes, g.node_feat, g.n_edges, g.src, g.dst, g.edge_feat, g.rel_pos), 0);
  graph_free(&g);
}

int tu_spawn_se3(const char *log, char *const argv[]) {
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    FILE *f = freopen(log, "a", stderr);
    (void)f;
    if (!freopen("/dev/null", "w", stdout)) _exit(126);
    execv(SE3_BINARY, argv);
    _exit(127);
  }
  return (int)pid;
}

int tu_wait(int pid) {
  int st = 0;
  cr_assert_eq(waitpid((pid_t)pid, &st, 0), (pid_t)pid);
  if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
  return WEXITSTATUS(st);
}

int tu_kill_randomly(const char *log, char *const argv[], double lo, double hi, int kills, int max_attempts) {
  return tu_kill_randomly_reset(log, argv, lo, hi, kills, max_attempts, NULL);
}

int tu_kill_randomly_reset(const char *log, char *const argv[], double lo, double hi, int kills, int max_attempts,
                           const char *reset) {
  static int seeded;
  if (!seeded) {
    srand((unsigned)time(NULL) ^ (unsigned)getpid());
    seeded = 1;
  }
  int n = 0;
  for (int round = 0;; round++) {
    n = 0;
    for (int attempt = 0; attempt < max_attempts && n < kills; attempt++) {
      int pid = tu_spawn_se3(log, argv);
      tu_sleep(lo + (double)rand() / RAND_MAX * (hi - lo));
      kill((pid_t)pid, SIGKILL);
      int st = tu_wait(pid);
      if (st != 128 + SIGKILL) {
        cr_assert_eq(st, 0, "run ended with %d before the kill (see %s)", st, log);
        break;
      }
      n++;
    }
    if (n >= kills || !reset || round == 4) return n;
    cr_log_info("the run ended after %d kills in [%.2f, %.2f] s: starting again with half the window", n, lo, hi);
    cr_assert_eq(tu_sh(NULL, "%s", reset), 0, "reset failed: %s", reset);
    hi = lo + (hi - lo) / 2;
  }
}

struct progress_at {
  const char *db, *stage;
  long long base;
  int min_left;
};

/* 1: the run committed a chunk of the stage of its own, min_left or more
 * left; -1: fewer than min_left left; 0: not yet */
static int in_progress(void *p) {
  struct progress_at *a = p;
  char sql[512];
  snprintf(sql, sizeof sql,
           "SELECT (SELECT count(*) FROM stage_chunks WHERE stage='%s'), "
           "(SELECT n_chunks FROM stage_state WHERE stage='%s')",
           a->stage, a->stage);
  char *t = tu_query_wait(a->db, sql, 0);
  long long done = -1, total = -1;
  if (!t || sscanf(t, "%lld|%lld", &done, &total) != 2) done = total = -1;
  free(t);
  if (done < 0 || total <= 0) return 0; /* no database or plan yet */
  if (total - done < a->min_left) return -1;
  return done > a->base ? 1 : 0;
}

int tu_kill_in_progress(const char *log, char *const argv[], const char *db, const char *stage, int kills,
                        int min_left) {
  int n = 0;
  while (n < kills) {
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM stage_chunks WHERE stage='%s'", stage);
    long long base = tu_query_int(db, sql); /* -1: no database yet */
    struct progress_at at = {db, stage, base > 0 ? base : 0, min_left};
    int pid = tu_spawn_se3(log, argv);
    int seen = tu_signal_in_state(&pid, 1, pid, SIGKILL, 120, in_progress, &at);
    int st = tu_wait(pid);
    cr_assert_neq(seen, -2, "the run made no progress in %s in 120 s (see %s)", stage, log);
    if (seen != 1) {
      /* it ended first, or too little was left and it was let run to its
       * end: either way it must have ended well */
      cr_assert_eq(st, 0, "the run ended with %d (see %s)", st, log);
      break;
    }
    cr_assert_eq(st, 128 + SIGKILL, "the kill in %s: exit %d (see %s)", stage, st, log);
    n++;
  }
  return n;
}

int tu_kills_mid_way(const char *log, char *const argv[], double lo, double hi, int need, const char *reset,
                     const char *db, const char *stage) {
  int n = tu_kill_randomly_reset(log, argv, lo, hi, need, 40, reset);
  if (n >= need) return n;
  n += tu_kill_in_progress(log, argv, db, stage, need - n, 2);
  if (n >= need) return n;
  cr_log_info("%d kills, too little of %s left for more: starting again, every kill in a state seen", n, stage);
  cr_assert_eq(tu_sh(NULL, "%s", reset), 0, "reset failed: %s", reset);
  return tu_kill_in_progress(log, argv, db, stage, need, 2);
}

void tu_assert_same_training(const char *ref, const char *wd, const char *const files[], int n) {
  for (int i = 0; i < n; i++) {
    char a[1200], b[1200];
    snprintf(a, sizeof a, "%s/models/train-0/%s", ref, files[i]);
    snprintf(b, sizeof b, "%s/models/train-0/%s", wd, files[i]);
    cr_assert_eq(tu_sh(NULL, "cmp -s %s %s", a, b), 0, "%s differs after resuming", files[i]);
  }
  char a_db[1100], b_db[1100];
  snprintf(a_db, sizeof a_db, "%s/screen.db", ref);
  snprintf(b_db, sizeof b_db, "%s/screen.db", wd);
  const char *q = "SELECT model, epoch, split, loss, mae, rmse, r2, spearman, lr FROM metrics ORDER BY 1, 2, 3";
  char *x = tu_query(a_db, q), *y = tu_query(b_db, q);
  cr_assert(x && y && strcmp(x, y) == 0, "metrics differ:\n%s\n--\n%s", x, y);
  free(x);
  free(y);
}

int tu_sdf_each(const char *path, void (*each)(int i, const struct mol *m, void *ctx), void *ctx) {
  cr_assert_eq(ob_init(), 0);
  struct rec_options ro = {0};
  struct se3_error e;
  struct rec_reader *rd = rec_open(path, MOL_FMT_SDF, &ro, &e);
  cr_assert(rd, "%s", se3_error_str(&e).s);
  struct ob_parse_opts po = {.format = "sdf", .gen3d = OB_GEN3D_NEVER};
  struct rec r;
  int n = 0;
  while (rec_next(rd, &r, &e) == 1) {
    struct mol m;
    char why[256];
    mol_init(&m);
    cr_assert_eq(ob_parse(r.text, r.len, &po, &m, why, sizeof why), 0, "%s record %d: %s", path, n + 1, why);
    cr_assert_eq(m.dim, 3, "%s record %d has no 3D coordinates", path, n + 1);
    each(n, &m, ctx);
    mol_free(&m);
    n++;
  }
  rec_close(rd);
  return n;
}

/* ---- Waiting for a state, not for a time (issue 30) ---------------------- */

#include <dirent.h>

int tu_wait_for_text(const char *path, const char *text, double limit) {
  double t0 = tu_now();
  for (;;) {
    char *t = tu_read(path, NULL);
    int seen = t && strstr(t, text);
    free(t);
    if (seen) return 0;
    if (tu_now() - t0 > limit) return -1;
    tu_sleep(0.02);
  }
}

/* 1 when every thread of pid is stopped, 0 when one is not (yet), -1 when
 * pid has ended: gone, or a zombie. A thread's state is the field after
 * the ')' that closes its name in /proc/PID/task/TID/stat. */
static int threads_stopped(int pid) {
  char dir[64];
  snprintf(dir, sizeof dir, "/proc/%d/task", pid);
  DIR *d = opendir(dir);
  if (!d) return -1;
  int all = 1, seen = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char path[384];
    snprintf(path, sizeof path, "%s/%s/stat", dir, e->d_name);
    char *t = tu_read(path, NULL);
    if (!t) continue; /* a thread that ended meanwhile */
    const char *paren = strrchr(t, ')');
    char state = paren && paren[1] == ' ' ? paren[2] : '?';
    int leader = atoi(e->d_name) == pid;
    free(t);
    seen = 1;
    if (leader && (state == 'Z' || state == 'X')) {
      closedir(d);
      return -1;
    }
    if (state != 'T' && state != 't') all = 0;
  }
  closedir(d);
  return seen ? all : -1;
}

int tu_freeze(int pid) {
  if (kill((pid_t)pid, SIGSTOP) != 0) return -1;
  /* A thread inside a system call stops when it leaves it: wait, with a
   * deadline only against a machine that has stopped making progress. */
  double t0 = tu_now();
  for (;;) {
    int s = threads_stopped(pid);
    if (s != 0) return s > 0 ? 0 : -1;
    cr_assert_lt(tu_now() - t0, 120, "process %d did not stop in 120 s after SIGSTOP", pid);
    tu_sleep(0.0005);
  }
}

void tu_thaw(int pid) { kill((pid_t)pid, SIGCONT); }

int tu_freeze_in_state(const int pids[], int n, double limit, int (*state)(void *ctx), void *ctx) {
  double t0 = tu_now();
  for (;;) {
    int frozen = 0, ended = 0;
    for (; frozen < n; frozen++)
      if (tu_freeze(pids[frozen]) != 0) {
        ended = 1;
        break;
      }
    int s = ended ? 0 : state(ctx);
    if (s > 0) return 1; /* left frozen, in the state seen */
    for (int i = 0; i < frozen; i++)
      tu_thaw(pids[i]);
    if (ended) return 0;
    if (s < 0) return -1;
    if (tu_now() - t0 > limit) return -2;
    tu_sleep(0.02);
  }
}

int tu_signal_in_state(const int pids[], int n, int target, int sig, double limit, int (*state)(void *ctx), void *ctx) {
  int r = tu_freeze_in_state(pids, n, limit, state, ctx);
  if (r != 1) return r;
  kill((pid_t)target, sig); /* pending until the thaw: it lands in the state seen */
  for (int i = 0; i < n; i++)
    tu_thaw(pids[i]);
  return 1;
}

int tu_signal_pending(int pid, int sig) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/status", pid);
  char *t = tu_read(path, NULL);
  if (!t) return 0;
  int pending = 0;
  for (const char *key = t; (key = strstr(key, "Pnd:\t")); key += 5) {
    unsigned long long mask = strtoull(key + 5, NULL, 16);
    if (mask & (1ull << (sig - 1))) pending = 1;
  }
  free(t);
  return pending;
}

/* A process's name and parent from /proc/PID/stat ("PID (NAME) S PPID ...";
 * the name may hold spaces and parentheses: it ends at the last ')'). */
static int proc_parent(const char *pid, char *name, size_t size) {
  char path[300];
  snprintf(path, sizeof path, "/proc/%s/stat", pid);
  char *t = tu_read(path, NULL);
  if (!t) return -1;
  const char *open = strchr(t, '('), *close = strrchr(t, ')');
  int ppid = -1;
  if (open && close && close > open) {
    size_t n = (size_t)(close - open - 1);
    if (n >= size) n = size - 1;
    memcpy(name, open + 1, n);
    name[n] = 0;
    char state;
    if (sscanf(close + 1, " %c %d", &state, &ppid) != 2) ppid = -1;
  }
  free(t);
  return ppid;
}

int tu_child_named(int parent, const char *name, double limit) {
  double t0 = tu_now();
  for (;;) {
    DIR *d = opendir("/proc");
    if (!d) return -1;
    int found = -1;
    struct dirent *e;
    while (found < 0 && (e = readdir(d))) {
      if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
      char comm[64];
      if (proc_parent(e->d_name, comm, sizeof comm) == parent && strcmp(comm, name) == 0) found = atoi(e->d_name);
    }
    closedir(d);
    if (found > 0) return found;
    if (threads_stopped(parent) < 0 || tu_now() - t0 > limit) return -1;
    tu_sleep(0.01);
  }
}

double tu_cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

long long tu_bytes_read(void) {
  char *t = tu_read("/proc/self/io", NULL);
  const char *key = t ? strstr(t, "rchar: ") : NULL;
  long long n = key ? strtoll(key + 7, NULL, 10) : -1;
  free(t);
  return n;
}

/* ---- a stranger's checkpoint ------------------------------------------------- */

#include "common/le.h"

void tu_ckpt_append_record(const char *path, size_t name_len) {
  size_t len = 0;
  uint8_t *old = (uint8_t *)tu_read(path, &len), *b = malloc(len + name_len + 13);
  cr_assert(old && b && len >= 20, "%s: not a checkpoint to append to", path);
  size_t n = len - 12;
  memcpy(b, old, n);
  le_put_u16(b + n, (uint16_t)name_len);
  memset(b + n + 2, 'x', name_len);
  b[n + 2 + name_len] = 3; /* SE3_CK_U8 */
  b[n + 3 + name_len] = 0;
  le_put_u64(b + n + 4 + name_len, 1);
  b[n + 12 + name_len] = 'a';
  n += 13 + name_len;
  uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a 64 of every byte before "END!" */
  for (size_t i = 0; i < n; i++)
    h = (h ^ b[i]) * 0x100000001b3ULL;
  memcpy(b + n, "END!", 4);
  le_put_u64(b + n + 4, h);
  FILE *f = fopen(path, "wb");
  cr_assert(f && fwrite(b, 1, n + 12, f) == n + 12 && fclose(f) == 0, "%s: cannot write", path);
  free(b);
  free(old);
}
