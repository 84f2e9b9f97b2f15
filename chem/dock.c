/* dock.c — AutoDock Vina, one molecule per isolated process (dock.h). */
#define _GNU_SOURCE
#include "chem/dock.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "chem/obbridge.h"
#include "common/error.h"
#include "common/fsutil.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void sleep_s(double s) {
  struct timespec t = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&t, &t) != 0 && errno == EINTR) {
  }
}

static int write_all(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n > 0) {
    ssize_t w = write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    c += w;
    n -= (size_t)w;
  }
  return 0;
}

static int write_file(const char *path, const char *text, size_t len) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  int bad = write_all(fd, text, len);
  if (close(fd) != 0) bad = -1;
  return bad;
}

/* The whole file, NUL-terminated (malloc'd), or NULL; with max > 0 a file
 * of more than max bytes is not read (NULL, errno EFBIG), whatever it grows
 * to while read. */
static char *read_file_max(const char *path, size_t *len, size_t max) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  struct stat sb;
  if (max && fstat(fileno(f), &sb) == 0 && (uint64_t)sb.st_size > max) {
    fclose(f);
    errno = EFBIG;
    return NULL;
  }
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  for (size_t r; buf && (r = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
    n += r;
    if (max && n > max) {
      free(buf);
      fclose(f);
      errno = EFBIG;
      return NULL;
    }
    if (cap - n - 1 == 0) {
      char *b = realloc(buf, cap * 2);
      if (!b) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = b;
      cap *= 2;
    }
  }
  fclose(f);
  if (buf) buf[n] = 0;
  if (len) *len = n;
  return buf;
}

static char *read_file(const char *path, size_t *len) { return read_file_max(path, len, 0); }

/* The most bytes Vina's out.pdbqt takes for `modes` poses of a ligand of
 * n_map atoms: per model its atoms and at most two torsion-tree lines an
 * atom (BRANCH, ENDBRANCH), REMARKs and the rest, 100 bytes a line, and
 * 64 KiB over. A file past it is refused unread: one Vina that wrote 1.5 GB
 * once drove a run to 1.6 GB of memory (a worker holds its file whole). */
static size_t out_bound(int modes, int n_map) {
  return (size_t)(modes > 0 ? modes : 1) * ((size_t)3 * (size_t)(n_map > 0 ? n_map : 1) + 64) * 100 + 65536;
}

/* How much of a tool's log is read for its last words: its end only, so
 * that a log of any size costs this much memory and no more. */
#define LOG_TAIL_BYTES 4096

void dock_log_tail(const char *path, int lines, char *out, size_t size) {
  if (size == 0) return;
  out[0] = 0;
  struct stat sb;
  int fd = se3_open_regular(path, &sb);
  if (fd < 0) return;
  off_t from = sb.st_size > LOG_TAIL_BYTES ? sb.st_size - LOG_TAIL_BYTES : 0;
  char buf[LOG_TAIL_BYTES + 1];
  size_t n = 0;
  while (n < LOG_TAIL_BYTES) {
    ssize_t r = pread(fd, buf + n, LOG_TAIL_BYTES - n, from + (off_t)n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    n += (size_t)r;
  }
  close(fd);
  /* control characters and NUL bytes (a sparse or binary log) as blanks */
  for (size_t i = 0; i < n; i++)
    if (((unsigned char)buf[i] < 0x20 && buf[i] != '\n') || buf[i] == 0x7f) buf[i] = ' ';
  buf[n] = 0;
  char *t = buf, *end = buf + n;
  if (from > 0) { /* the first line read is the end of a line cut: from the next */
    char *nl = memchr(buf, '\n', n);
    if (nl && nl + 1 < end) t = nl + 1;
  }
  int got = 0;
  char *start = end;
  while (start > t && got < lines) {
    char *e = start;
    while (e > t && (e[-1] == '\n' || e[-1] == ' '))
      e--;
    char *b = e;
    while (b > t && b[-1] != '\n')
      b--;
    if (e > b) got++;
    start = b;
    if (b == t) break;
  }
  size_t o = 0;
  for (char *line = start; line < end && o + 1 < size;) {
    char *nl = memchr(line, '\n', (size_t)(end - line));
    char *e = nl ? nl : end;
    while (e > line && e[-1] == ' ')
      e--;
    char *b = line;
    while (b < e && *b == ' ')
      b++;
    if (e > b) {
      int w = snprintf(out + o, size - o, "%s%.*s", o ? " | " : "", (int)(e - b), b);
      if (w < 0) break;
      o += (size_t)w < size - o ? (size_t)w : size - o - 1;
    }
    line = nl ? nl + 1 : end;
  }
}

static int make_dir(const struct dock_setup *s, const char *what, char *dir, size_t size) {
  const char *base = s && s->tmpdir ? s->tmpdir : getenv("TMPDIR");
  if (!base || !base[0]) base = "/tmp";
  if ((size_t)snprintf(dir, size, "%s/se3screen-%s-XXXXXX", base, what) >= size) return -1;
  return mkdtemp(dir) ? 0 : -1;
}

/* In a child, first thing: its own process group, killed with its parent,
 * the signals as a fresh program has them. */
static void child_setup(pid_t parent) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(126);
  setpgid(0, 0);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  int sigs[] = {SIGINT, SIGTERM, SIGUSR1, SIGHUP, SIGPIPE, SIGCHLD, SIGALRM};
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
    signal(sigs[i], SIG_DFL);
}

/* Kill a child's group and reap it. */
static void kill_child(pid_t pid) {
  kill(-pid, SIGKILL);
  kill(pid, SIGKILL);
  while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
  }
}

/* A docking's supervisor (child_dock) asked to end Vina and what it left
 * (SIGTERM), given a second to, then its group killed and reaped. */
static void end_docking(pid_t pid) {
  kill(pid, SIGTERM);
  for (int i = 0; i < 100; i++) {
    pid_t r = waitpid(pid, NULL, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR)) {
      kill(-pid, SIGKILL); /* (its group's last, had any outlived it) */
      return;
    }
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  kill_child(pid);
}

/* ---- a small job in a child process -------------------------------------- */

/* A child (child_setup done) with a pipe to its parent: in the child 0,
 * p[1] its end; in the parent the child's pid, p[0] its end (the other
 * ends closed); -1 with err. */
static pid_t fork_piped(int p[2], struct se3_error *err) {
  if (pipe2(p, O_CLOEXEC) != 0) {
    se3_error_set(err, SE3_ERR_RUN, "pipe: %s", strerror(errno));
    return -1;
  }
  pid_t parent = getpid();
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    se3_error_set(err, SE3_ERR_RUN, "fork: %s", strerror(errno));
    close(p[0]);
    close(p[1]);
    return -1;
  }
  if (pid == 0) {
    child_setup(parent);
    close(p[0]);
    return 0;
  }
  setpgid(pid, pid);
  close(p[1]);
  return pid;
}

/* A child's failure, e, written to fd for its parent (isolated): a letter
 * for its kind, then its text; returns 1 (fn's failure). */
static int child_fail(int fd, const struct se3_error *e) {
  char kind = (char)('A' + (e && (unsigned)e->kind < SE3_ERR_N_KINDS ? (int)e->kind : (int)SE3_ERR_RUN));
  write_all(fd, &kind, 1);
  const char *text = se3_error_str(e).s;
  write_all(fd, text, strlen(text));
  return 1;
}

/* Runs fn(arg, fd) in a child process (Open Babel's work): what the child
 * writes to fd comes back in out (at most size - 1 bytes, NUL-terminated);
 * fn returns 0, or non-zero having written its failure (child_fail). 0, or
 * -1 with err (the child's failure, its kind kept; "timed out",
 * "crashed"). */
static int isolated(int (*fn)(void *arg, int fd), void *arg, double timeout_s, char *out, size_t size,
                    struct se3_error *err) {
  int p[2];
  pid_t pid = fork_piped(p, err);
  if (pid < 0) return -1;
  if (pid == 0) _exit(fn(arg, p[1]) ? 1 : 0);
  size_t n = 0;
  double deadline = now_s() + timeout_s;
  int timed_out = 0;
  for (;;) {
    double left = deadline - now_s();
    if (left <= 0) {
      timed_out = 1;
      break;
    }
    struct pollfd pf = {p[0], POLLIN, 0};
    int r = poll(&pf, 1, (int)(left * 1000) + 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    char buf[4096];
    ssize_t got = read(p[0], buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    size_t take = n + (size_t)got < size ? (size_t)got : size - 1 - n;
    memcpy(out + n, buf, take);
    n += take;
  }
  close(p[0]);
  out[n] = 0;
  if (timed_out) {
    kill_child(pid);
    se3_error_set(err, SE3_ERR_RUN, "timed out after %.0f s", timeout_s);
    return -1;
  }
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(st)) {
    se3_error_set(err, SE3_ERR_RUN, "Open Babel crashed (signal %d)", WTERMSIG(st));
    return -1;
  }
  if (WEXITSTATUS(st) != 0) {
    int kind = n ? out[0] - 'A' : -1;
    if (kind > SE3_ERR_NONE && kind < SE3_ERR_N_KINDS)
      se3_error_set(err, (enum se3_err_kind)kind, "%s", out + 1);
    else
      se3_error_set(err, SE3_ERR_RUN, "%s", n ? out : "failed");
    return -1;
  }
  return 0;
}

struct receptor_arg {
  const char *in, *out;
};

static int receptor_child(void *arg, int fd) {
  struct receptor_arg *a = arg;
  struct se3_error e;
  char *text = ob_receptor_pdbqt(a->in, 7.4, &e);
  if (!text) return child_fail(fd, &e);
  if (write_file(a->out, text, strlen(text))) {
    se3_error_set(&e, SE3_ERR_IO, "%s", strerror(errno));
    se3_error_at(&e, a->out, 0, 0);
    free(text);
    return child_fail(fd, &e);
  }
  free(text);
  return 0;
}

static int ends_with(const char *s, const char *suffix) {
  size_t a = strlen(s), b = strlen(suffix);
  return a >= b && strcasecmp(s + a - b, suffix) == 0;
}

/* err: a system call's failure on path (SE3_ERR_IO, its file path);
 * returns -1. */
static int io_error(struct se3_error *err, const char *path, int e) {
  se3_error_set(err, SE3_ERR_IO, "%s", strerror(e));
  se3_error_at(err, path, 0, 0);
  return -1;
}

int dock_prepare_receptor(const char *in, const char *out, double timeout_s, struct se3_error *err) {
  char tmp[4096];
  if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%d", out, (int)getpid()) >= sizeof tmp) {
    se3_error_set(err, SE3_ERR_IO, "path too long");
    se3_error_at(err, out, 0, 0);
    return -1;
  }
  if (ends_with(in, ".pdbqt")) {
    size_t n = 0;
    char *text = read_file(in, &n);
    if (!text) return io_error(err, in, errno);
    int bad = write_file(tmp, text, n);
    int e = errno;
    free(text);
    if (bad) {
      unlink(tmp);
      return io_error(err, tmp, e);
    }
  } else {
    struct receptor_arg a = {in, tmp};
    char msg[1024];
    if (isolated(receptor_child, &a, timeout_s, msg, sizeof msg, err)) {
      se3_error_context(err, "preparing the receptor %s", in);
      unlink(tmp);
      return -1;
    }
  }
  if (rename(tmp, out) != 0) {
    int e = errno;
    unlink(tmp);
    return io_error(err, out, e);
  }
  return 0;
}

static int extent_child(void *arg, int fd) {
  double lo[3], hi[3];
  int n = 0;
  char text[512];
  struct se3_error e;
  if (ob_file_extent((const char *)arg, lo, hi, &n, &e)) return child_fail(fd, &e);
  int len = snprintf(text, sizeof text, "%d %.17g %.17g %.17g %.17g %.17g %.17g", n, lo[0], lo[1], lo[2], hi[0], hi[1],
                     hi[2]);
  return write_all(fd, text, (size_t)len) ? 1 : 0;
}

int dock_box_from_ligand(const char *path, double padding, double timeout_s, struct dock_box *b,
                         struct se3_error *err) {
  char out[512];
  if (isolated(extent_child, (void *)path, timeout_s, out, sizeof out, err)) {
    se3_error_context(err, "the box's reference ligand");
    return -1;
  }
  int n = 0;
  double lo[3], hi[3];
  if (sscanf(out, "%d %lf %lf %lf %lf %lf %lf", &n, &lo[0], &lo[1], &lo[2], &hi[0], &hi[1], &hi[2]) != 7 || n <= 0) {
    se3_error_set(err, SE3_ERR_INPUT, "the box's reference ligand %s: no atoms read", path);
    return -1;
  }
  for (int k = 0; k < 3; k++) {
    b->center[k] = 0.5 * (lo[k] + hi[k]);
    b->size[k] = hi[k] - lo[k] + 2 * padding;
  }
  return 0;
}

int dock_vina_version(const char *vina, char *out, size_t size, struct se3_error *err) {
  int p[2];
  pid_t pid = fork_piped(p, err);
  if (pid < 0) return -1;
  if (pid == 0) {
    dup2(p[1], 1);
    dup2(p[1], 2);
    execlp(vina, vina, "--version", (char *)NULL);
    dprintf(1, "cannot run %s: %s", vina, strerror(errno));
    _exit(127);
  }
  char buf[1024];
  size_t n = 0;
  double deadline = now_s() + 30;
  while (n + 1 < sizeof buf && now_s() < deadline) {
    struct pollfd pf = {p[0], POLLIN, 0};
    int r = poll(&pf, 1, 100);
    if (r < 0 && errno != EINTR) break;
    if (r <= 0) continue;
    ssize_t got = read(p[0], buf + n, sizeof buf - 1 - n);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    n += (size_t)got;
  }
  close(p[0]);
  buf[n] = 0;
  kill_child(pid); /* (reaped; it has finished by now, or ran out of time) */
  char *nl = strchr(buf, '\n');
  if (nl) *nl = 0;
  if (strncmp(buf, "AutoDock Vina", 13) != 0) {
    se3_error_set(err, SE3_ERR_RUN,
                  "%s --version said \"%s\", not AutoDock Vina's version (install Debian's autodock-vina, or set "
                  "stages.dock.vina)",
                  vina, buf);
    return -1;
  }
  snprintf(out, size, "%s", buf);
  return 0;
}

/* ---- the docking of one molecule ----------------------------------------- */

/* The poses a molecule keeps under s (1..DOCK_MAX_MODES). */
static int dock_modes(const struct dock_setup *s) {
  return s->modes <= 0 ? 1 : s->modes > DOCK_MAX_MODES ? DOCK_MAX_MODES : s->modes;
}

/* The supervisor of a docking (child_dock): SIGTERM asks it to end Vina. */
static volatile sig_atomic_t supervisor_stop;
static void on_stop_supervisor(int sig) {
  (void)sig;
  supervisor_stop = 1;
}

/* The parent process id in /proc/PID/stat (after the command's closing
 * parenthesis: " S PPID"), or -1. */
static pid_t parent_of(const char *pid) {
  char path[320], buf[512];
  snprintf(path, sizeof path, "/proc/%.255s/stat", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = 0;
  char *close_paren = strrchr(buf, ')');
  char state;
  int ppid;
  if (!close_paren || sscanf(close_paren + 1, " %c %d", &state, &ppid) != 2) return -1;
  return (pid_t)ppid;
}

/* In a subreaper: kills its children (every descendant that outlived its
 * parent is one) until none is left, each reaped. Bounded: 1000 rounds. */
static void end_descendants(void) {
  pid_t me = getpid();
  for (int round = 0; round < 1000; round++) {
    int found = 0;
    DIR *d = opendir("/proc");
    for (struct dirent *e; d && (e = readdir(d));) {
      if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
      if (parent_of(e->d_name) == me) {
        kill((pid_t)atol(e->d_name), SIGKILL);
        found++;
      }
    }
    if (d) closedir(d);
    pid_t r;
    while ((r = waitpid(-1, NULL, WNOHANG)) > 0) {}
    if (r < 0 && errno == ECHILD) return;
    if (!found) sleep_s(0.001);
  }
}

static void child_dock(const struct dock_setup *s, const struct dock_job *j, const char *dir, pid_t parent) {
  child_setup(parent);
  if (chdir(dir) != 0) _exit(125);
  int log = open("log", O_WRONLY | O_CREAT | O_TRUNC, 0644);
  int devnull = open("/dev/null", O_RDONLY);
  if (log < 0 || devnull < 0) _exit(125);
  dup2(devnull, 0);
  dup2(log, 1);
  dup2(log, 2);
  struct mol m;
  char err[512];
  struct se3_error e;
  mol_init(&m);
  if (mol_from_blob(j->mol, j->mol_len, &m, &e)) {
    se3_error_format(&e, err, sizeof err);
    dprintf(2, "the stored molecule: %s\n", err);
    write_file("why", err, strlen(err));
    _exit(3);
  }
  int *map = NULL, n_map = 0;
  char *pdbqt = ob_write_pdbqt(&m, &map, &n_map, &e);
  if (!pdbqt) {
    se3_error_format(&e, err, sizeof err);
    write_file("why", err, strlen(err));
    _exit(3);
  }
  /* which atom of the molecule each serial number is (one number a line) */
  FILE *f = fopen("map", "w");
  if (!f) _exit(125);
  for (int i = 0; i < n_map; i++)
    fprintf(f, "%d\n", map[i]);
  if (fclose(f) != 0 || write_file("ligand.pdbqt", pdbqt, strlen(pdbqt))) _exit(125);
  char num[10][40];
  for (int k = 0; k < 3; k++) {
    snprintf(num[k], sizeof num[k], "%.4f", s->box.center[k]);
    snprintf(num[3 + k], sizeof num[k], "%.4f", s->box.size[k]);
  }
  snprintf(num[6], sizeof num[6], "%d", s->exhaustiveness);
  snprintf(num[7], sizeof num[7], "%u", s->seed);
  snprintf(num[8], sizeof num[8], "%d", dock_modes(s));
  snprintf(num[9], sizeof num[9], "%.4f", s->energy_range > 0 ? s->energy_range : 3.0);
  const char *argv[] = {s->vina,       "--receptor",       s->receptor, "--ligand",         "ligand.pdbqt",
                        "--center_x",  num[0],             "--center_y", num[1],            "--center_z",
                        num[2],        "--size_x",         num[3],      "--size_y",         num[4],
                        "--size_z",    num[5],             "--exhaustiveness", num[6],      "--seed",
                        num[7],        "--cpu",            "1",         "--num_modes",      num[8],
                        "--energy_range", num[9],          "--out",     "out.pdbqt",        NULL};
  /* Vina's address space bounded (its grids, its search): a ligand that
   * would take gigabytes fails its allocation instead (bad_alloc: Vina says
   * "insufficient memory" and exits 1), a reject and not the machine's
   * memory. After Open Babel's work above, so the limit is Vina's alone. */
  /* This process stays, Vina's parent, to end whatever Vina leaves
   * behind: a subreaper, it inherits each of Vina's descendants that its
   * parent leaves (one that left its session with setsid too), and kills
   * them when Vina ends, or when se3screen stops the docking (SIGTERM, or
   * se3screen's death: the parent-death signal, SIGTERM now). */
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop_supervisor; /* (no SA_RESTART: the wait below returns) */
  sigaction(SIGTERM, &sa, NULL);
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != parent) _exit(126);
  pid_t me = getpid();
  pid_t vina = fork();
  if (vina < 0) _exit(125);
  if (vina == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != me) _exit(126);
    signal(SIGTERM, SIG_DFL);
    if (s->memory_limit > 0) {
      struct rlimit rl = {(rlim_t)s->memory_limit, (rlim_t)s->memory_limit};
      if (setrlimit(RLIMIT_AS, &rl) != 0) {
        snprintf(err, sizeof err, "cannot set Vina's memory limit (stages.dock.memory_limit_mb): %s", strerror(errno));
        write_file("why", err, strlen(err));
        _exit(4);
      }
    }
    execvp(s->vina, (char *const *)argv);
    snprintf(err, sizeof err, "cannot run %s: %s", s->vina, strerror(errno));
    write_file("why", err, strlen(err));
    _exit(4);
  }
  int st = 0;
  for (;;) { /* (polled: a SIGTERM between a look at the flag and a blocking wait would wait out the docking) */
    if (supervisor_stop) kill(vina, SIGKILL);
    pid_t r = waitpid(vina, &st, WNOHANG);
    if (r == vina) break;
    if (r < 0 && errno != EINTR) _exit(125);
    sleep_s(0.01);
  }
  end_descendants();
  /* Vina's end as it was: its exit status, or the signal that ended it */
  if (WIFSIGNALED(st)) {
    signal(WTERMSIG(st), SIG_DFL);
    prctl(PR_SET_PDEATHSIG, 0);
    raise(WTERMSIG(st));
  }
  _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 125);
}

/* Whether a tool's last words say its memory ran out: Vina's "Error:
 * insufficient memory!" (its std::bad_alloc caught), an uncaught
 * std::bad_alloc (terminate), an allocation's ENOMEM, the loader unable to
 * map Vina's libraries. */
static int says_out_of_memory(const char *words) {
  static const char *const signs[] = {"insufficient memory", "bad_alloc", "cannot allocate memory", "out of memory",
                                      "failed to map segment"};
  for (size_t i = 0; i < sizeof signs / sizeof signs[0]; i++)
    if (strcasestr(words, signs[i])) return 1;
  return 0;
}

/* A molecule whose Vina hit stages.dock.memory_limit_mb: the reason says
 * so, the detail names the key, its value and Vina's last words. */
static void out_of_memory(const struct dock_setup *s, struct dock_job *j, const char *what, const char *words) {
  unsigned long long mib = (unsigned long long)(s->memory_limit >> 20);
  char limit[64];
  if (mib >= 1024 && mib % 1024 == 0)
    snprintf(limit, sizeof limit, "%llu GiB", mib / 1024);
  else
    snprintf(limit, sizeof limit, "%llu MiB", mib);
  snprintf(j->reason, sizeof j->reason, "out of memory");
  snprintf(j->detail, sizeof j->detail,
           "Vina ran out of its memory limit (stages.dock.memory_limit_mb: %s): %s%s%.300s",
           limit, what, words[0] ? "; " : "", words);
}

/* What the molecule's process left in dir: j docked, or rejected. */
static void collect(const struct dock_setup *s, struct dock_job *j, const char *dir, int st) {
  char path[4200];
  if (WIFSIGNALED(st)) {
    snprintf(j->reason, sizeof j->reason, "docking crashed");
    snprintf(path, sizeof path, "%s/log", dir);
    char tail[400], what[32];
    dock_log_tail(path, 2, tail, sizeof tail);
    snprintf(what, sizeof what, "signal %d", WTERMSIG(st));
    if (s->memory_limit > 0 && says_out_of_memory(tail))
      out_of_memory(s, j, what, tail);
    else
      snprintf(j->detail, sizeof j->detail, "%s%s%s", what, tail[0] ? "; " : "", tail);
    return;
  }
  int code = WEXITSTATUS(st);
  if (code == 3 || code == 4) {
    snprintf(j->reason, sizeof j->reason, code == 3 ? "ligand preparation failed" : "Vina failed");
    snprintf(path, sizeof path, "%s/why", dir);
    char *why = read_file(path, NULL);
    if (code == 4 && s->memory_limit > 0 && why && says_out_of_memory(why))
      out_of_memory(s, j, "it could not start", why);
    else
      snprintf(j->detail, sizeof j->detail, "%s", why ? why : "");
    free(why);
    return;
  }
  if (code != 0) {
    snprintf(j->reason, sizeof j->reason, "Vina failed");
    snprintf(path, sizeof path, "%s/log", dir);
    char tail[464], what[32];
    dock_log_tail(path, 3, tail, sizeof tail);
    snprintf(what, sizeof what, "exit status %d", code);
    if (s->memory_limit > 0 && says_out_of_memory(tail))
      out_of_memory(s, j, what, tail);
    else
      snprintf(j->detail, sizeof j->detail, "%s%s%s", what, tail[0] ? ": " : "", tail);
    return;
  }
  struct mol m, pose;
  char err[400];
  struct se3_error e;
  mol_init(&m);
  if (mol_from_blob(j->mol, j->mol_len, &m, &e)) {
    snprintf(j->reason, sizeof j->reason, "no pose");
    snprintf(j->detail, sizeof j->detail, "the stored molecule: %s", se3_error_format(&e, err, sizeof err));
    return;
  }
  size_t len = 0, map_len = 0;
  snprintf(path, sizeof path, "%s/map", dir);
  char *map_text = read_file(path, &map_len);
  /* the serial numbers' atoms of the molecule (the child's map) */
  int n_map = 0;
  for (size_t i = 0; map_text && i < map_len; i++)
    n_map += map_text[i] == '\n';
  snprintf(path, sizeof path, "%s/out.pdbqt", dir);
  size_t bound = out_bound(dock_modes(s), n_map);
  errno = 0;
  char *text = map_text ? read_file_max(path, &len, bound) : NULL;
  int too_big = !text && errno == EFBIG;
  int *map = malloc(sizeof *map * (size_t)(n_map ? n_map : 1));
  double *xyz = malloc(sizeof *xyz * 3 * (size_t)(m.n_atoms ? m.n_atoms : 1));
  uint8_t *seen = calloc((size_t)(m.n_atoms ? m.n_atoms : 1), 1);
  double *sxyz = malloc(sizeof *sxyz * 3 * (size_t)(n_map ? n_map : 1));
  uint8_t *sseen = malloc((size_t)(n_map ? n_map : 1));
  int bad = !text || !map_text || !map || !xyz || !seen || !sxyz || !sseen;
  if (bad && too_big)
    snprintf(err, sizeof err, "Vina's out.pdbqt is larger than %zu bytes, all that %d poses of %d atoms take: not read",
             bound, dock_modes(s), n_map);
  else if (bad)
    snprintf(err, sizeof err, "%s",
             !map_text ? "the ligand's atom map is missing"
             : !text   ? "Vina wrote no out.pdbqt"
                       : "out of memory");
  for (int i = 0, k = 0; !bad && i < n_map; i++) {
    char *end;
    long v = strtol(map_text + k, &end, 10);
    if (end == map_text + k || *end != '\n' || v < -1 || v >= m.n_atoms) {
      snprintf(err, sizeof err, "the ligand's atom map is damaged");
      bad = 1;
    }
    map[i] = (int)v;
    k = (int)(end - map_text) + 1;
  }
  /* each model Vina wrote, best first, up to the modes asked for */
  for (int model = 1; !bad && model <= dock_modes(s); model++) {
    struct dock_pose *p = &j->poses[model - 1];
    int r = dock_parse_model(text, len, model, n_map, sxyz, sseen, p, err, sizeof err);
    if (r == 1) break;
    bad = r != 0;
    memset(seen, 0, (size_t)(m.n_atoms ? m.n_atoms : 1));
    for (int a = 0; !bad && a < n_map; a++)
      if (sseen[a] && map[a] >= 0) {
        memcpy(xyz + 3 * map[a], sxyz + 3 * a, 3 * sizeof *xyz);
        seen[map[a]] = 1;
      }
    if (!bad) bad = dock_pose_mol(&m, xyz, seen, &pose, err, sizeof err);
    if (!bad) {
      bad = mol_to_blob(&pose, &p->mol, &p->len) != 0;
      if (bad) snprintf(err, sizeof err, "out of memory");
      mol_free(&pose);
    }
    if (!bad) j->n_poses = model;
    if (bad && model > 1) {
      /* a later model that cannot be read: the molecule's output is damaged */
      char why[sizeof err];
      snprintf(why, sizeof why, "pose %d: %.360s", model, err);
      memcpy(err, why, sizeof err);
    }
  }
  if (bad) {
    dock_job_free_poses(j);
    snprintf(j->reason, sizeof j->reason, "no pose");
    snprintf(j->detail, sizeof j->detail, "%s", err);
  } else {
    j->score = j->poses[0].score;
    j->status = 0;
  }
  free(text);
  free(map_text);
  free(map);
  free(xyz);
  free(seen);
  free(sxyz);
  free(sseen);
  mol_free(&m);
}

struct slot {
  pid_t pid;
  struct dock_job *job;
  double start;
  char dir[4096];
};

struct dock_pool {
  const struct dock_setup *s;
  int workers, active;
  pid_t parent;
  struct slot *sl;
};

struct dock_pool *dock_pool_open(const struct dock_setup *s, int workers, struct se3_error *err) {
  /* Open Babel started once here, so each child has it ready */
  if (ob_init() != 0) {
    se3_error_set(err, SE3_ERR_RUN, "Open Babel did not start");
    return NULL;
  }
  struct dock_pool *p = calloc(1, sizeof *p);
  if (p) p->sl = calloc((size_t)(workers > 0 ? workers : 1), sizeof *p->sl);
  if (!p || !p->sl) {
    free(p);
    se3_error_set(err, SE3_ERR_MEMORY, "out of memory");
    return NULL;
  }
  p->s = s;
  p->workers = workers > 0 ? workers : 1;
  p->parent = getpid();
  return p;
}

int dock_pool_idle(const struct dock_pool *p) { return p->workers - p->active; }

int dock_pool_start(struct dock_pool *p, struct dock_job *j, struct se3_error *err) {
  struct slot *t = NULL;
  for (int w = 0; w < p->workers && !t; w++)
    if (!p->sl[w].pid) t = &p->sl[w];
  if (!t) {
    se3_error_set(err, SE3_ERR_RUN, "no docking slot free");
    return -1;
  }
  j->status = -1;
  j->n_poses = 0;
  j->reason[0] = j->detail[0] = 0;
  if (make_dir(p->s, "dock", t->dir, sizeof t->dir)) {
    se3_error_set(err, SE3_ERR_IO, "a folder for docking under %s: %s", p->s->tmpdir ? p->s->tmpdir : "$TMPDIR or /tmp",
                  strerror(errno));
    return -1;
  }
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    se3_error_set(err, SE3_ERR_RUN, "fork: %s", strerror(errno));
    se3_rm_tree(t->dir);
    t->dir[0] = 0;
    return -1;
  }
  if (pid == 0) child_dock(p->s, j, t->dir, p->parent);
  setpgid(pid, pid);
  t->pid = pid;
  t->job = j;
  t->start = now_s();
  p->active++;
  return 0;
}

/* Slot t's docking, ended (r: waitpid's answer, st its status) or timed
 * out, into its job; the slot freed. */
static void slot_ended(struct dock_pool *p, struct slot *t, pid_t r, int st, double took) {
  struct dock_job *j = t->job;
  j->status = 1;
  j->seconds = took;
  if (r == 0) { /* still running past its time */
    end_docking(t->pid);
    snprintf(j->reason, sizeof j->reason, "timed out");
    snprintf(j->detail, sizeof j->detail, "after %.0f s (stages.dock.timeout_s)", p->s->timeout_s);
  } else {
    kill(-t->pid, SIGKILL); /* (what of its group outlived it) */
    collect(p->s, j, t->dir, st);
  }
  se3_rm_tree(t->dir);
  t->pid = 0;
  t->job = NULL;
  t->dir[0] = 0;
  p->active--;
}

int dock_pool_wait(struct dock_pool *p, double wait_s, struct dock_job **done, struct se3_error *err) {
  *done = NULL;
  double until = now_s() + wait_s;
  for (;;) {
    for (int w = 0; w < p->workers; w++) {
      struct slot *t = &p->sl[w];
      if (!t->pid) continue;
      int st = 0;
      pid_t r = waitpid(t->pid, &st, WNOHANG);
      double took = now_s() - t->start;
      if (r < 0 && errno != EINTR) {
        se3_error_set(err, SE3_ERR_RUN, "waiting for a docking: %s", strerror(errno));
        return -1;
      }
      if (r == t->pid || (r == 0 && took > p->s->timeout_s)) {
        *done = t->job;
        slot_ended(p, t, r, st, took);
        return 1;
      }
    }
    if (now_s() >= until) return 0;
    sleep_s(0.01);
  }
}

int dock_pool_running(const struct dock_pool *p, const struct dock_job **jobs, double *seconds, int max) {
  int n = 0;
  double t = now_s();
  for (int w = 0; w < p->workers && n < max; w++)
    if (p->sl[w].pid) {
      jobs[n] = p->sl[w].job;
      seconds[n++] = t - p->sl[w].start;
    }
  return n;
}

void dock_pool_close(struct dock_pool *p) {
  if (!p) return;
  for (int w = 0; w < p->workers; w++)
    if (p->sl[w].pid) {
      end_docking(p->sl[w].pid);
      se3_rm_tree(p->sl[w].dir);
      p->sl[w].job->status = -1;
    }
  free(p->sl);
  free(p);
}
