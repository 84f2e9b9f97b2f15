/* workers.c — parse records in isolated worker processes (see workers.h).
 *
 * Protocol over two pipes per worker, native byte order (same machine):
 *   hello:    once, when the worker has loaded Open Babel: i32 status 2, u32 0
 *   request:  u32 format length, u32 text length, format bytes, text bytes
 *   response: i32 status (0 ok, 1 rejected), u32 length, then a packed
 *             molecule (mol_pack), or why it was rejected: i32 atom (1-based,
 *             0 none), the reason, a NUL byte, the detail (struct mol_why),
 *             a NUL byte, the record's name (empty: none)
 *
 * Each worker has up to QUEUE_DEPTH records sent to it, so it never waits for
 * the supervisor between records; it answers them in order, so the oldest
 * unanswered record is the one in flight: a crash or a timeout is blamed on
 * it alone and the records queued behind it are sent again.
 *
 * A request and its response both carry every SD tag of the record, so either
 * can be far bigger than a pipe's buffer (64 KiB). The worker reads a whole
 * request, then writes a whole response, blocking; the supervisor must
 * therefore never block on either pipe: were it blocked writing the next
 * request while the worker is blocked writing the answer to the last one,
 * both would wait for ever (issue 30). The supervisor's ends are non-blocking
 * and one poll() serves every pipe in both directions: requests are written,
 * answers read, as far as each pipe allows, and the deadline of the record in
 * flight is checked whatever the state of its request or answer.
 */
#define _GNU_SOURCE
#include "chem/workers.h"
#include "common/error.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "chem/shape.h"

/* Buffered reading of a pipe: a message usually arrives in one read (and the
 * next queued one with it), and every system call is dear on these machines. */
#define RBUF_CAP 65536
struct rbuf {
  uint8_t *b;
  size_t s, e;
};

#define QUEUE_DEPTH 2
#define STATUS_HELLO 2
/* A worker that has not said hello this long after its start is stuck in
 * Open Babel's set-up: killed and started again. Not a record's time (no
 * record is blamed), so not timeout_s, which may be a fraction of a second. */
#define START_LIMIT_S 60.0
/* Workers that die (or never get ready) before their hello, in a row, before
 * the run gives up: Open Babel's set-up itself fails. */
#define MAX_START_DEATHS 5

struct worker {
  pid_t pid;
  int to_fd;             /* supervisor writes requests (non-blocking) */
  int from_fd;           /* supervisor reads responses (non-blocking) */
  unsigned gen;          /* counts starts: tells poll results of a replaced worker apart */
  int ready;             /* its hello has come */
  double spawned;        /* when it was started */
  int q[QUEUE_DEPTH];    /* job indices given, oldest (in flight) first */
  int nq;
  int n_sent;            /* of q, the requests written whole (a prefix) */
  size_t out_off;        /* bytes of request q[n_sent] written so far */
  struct rbuf in;        /* answer bytes read ahead */
  uint8_t hdr[8];        /* the header of the answer being read */
  size_t hdr_got;
  uint8_t *msg;          /* its payload, once the header is whole (NULL before) */
  uint32_t msg_len;
  size_t msg_got;
  double started;        /* when the job in flight started */
};

struct wpool {
  int n;
  struct worker *w;
  struct ob_parse_opts parse;
  struct mol_check_opts check;
  enum wpool_input_shape input_shape;
  uint8_t *elements;
  int restarts;
  int idle_deaths;       /* workers that died before their hello, in a row */
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Blocking read of exactly n bytes through rb: the worker's side. */
static int rb_read(int fd, struct rbuf *rb, void *dst, size_t n) {
  uint8_t *d = dst;
  while (n) {
    if (rb->s < rb->e) {
      size_t k = rb->e - rb->s < n ? rb->e - rb->s : n;
      memcpy(d, rb->b + rb->s, k);
      rb->s += k;
      d += k;
      n -= k;
      continue;
    }
    uint8_t *into = n >= RBUF_CAP ? d : rb->b; /* big payloads go straight to their place */
    size_t want = n >= RBUF_CAP ? n : RBUF_CAP;
    ssize_t r = read(fd, into, want);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    if (into == d) {
      d += r;
      n -= (size_t)r;
    } else {
      rb->s = 0;
      rb->e = (size_t)r;
    }
  }
  return 0;
}

/* All of iov[0..n) in as few system calls as the pipe allows. */
static int writev_full(int fd, struct iovec *iov, int n) {
  while (n > 0) {
    ssize_t r = writev(fd, iov, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    while (n > 0 && (size_t)r >= iov->iov_len) {
      r -= (ssize_t)iov->iov_len;
      iov++;
      n--;
    }
    if (n > 0) {
      iov->iov_base = (char *)iov->iov_base + r;
      iov->iov_len -= (size_t)r;
    }
  }
  return 0;
}

static int send_response(int fd, int32_t status, const void *payload, uint32_t len) {
  uint8_t hdr[8];
  memcpy(hdr, &status, 4);
  memcpy(hdr + 4, &len, 4);
  struct iovec iov[2] = {{hdr, 8}, {(void *)payload, len}};
  return writev_full(fd, iov, 2);
}

/* A rejection's answer: the atom, the reason, NUL, the detail, NUL, the
 * record's name (name NULL: none). */
enum { NAME_MAX_SENT = 512 };
static int send_why(int fd, const struct mol_why *why, const char *name) {
  char buf[4 + sizeof why->reason + sizeof why->detail + NAME_MAX_SENT + 1];
  int32_t atom = why->atom;
  memcpy(buf, &atom, 4);
  size_t nr = strnlen(why->reason, sizeof why->reason - 1), nd = strnlen(why->detail, sizeof why->detail - 1);
  size_t nn = name ? strnlen(name, NAME_MAX_SENT) : 0;
  memcpy(buf + 4, why->reason, nr);
  buf[4 + nr] = 0;
  memcpy(buf + 5 + nr, why->detail, nd);
  buf[5 + nr + nd] = 0;
  if (nn) memcpy(buf + 6 + nr + nd, name, nn);
  return send_response(fd, 1, buf, (uint32_t)(6 + nr + nd + nn));
}

/* A molecule that keeps its file's 3D coordinates, held against the shape
 * bounds at the input tolerances (workers.h, wpool_input_shape): a crystal
 * structure's or a docking pose's coordinates carry errors of their own,
 * but a bond of 9,000 Å is no molecule. 0 when within them, or when m was
 * parsed again from text with a generated shape (m replaced); 1 rejected,
 * with why. */
static int input_shape(const struct wpool *p, const char *text, size_t len, const struct ob_parse_opts *o,
                       struct mol *m, struct mol_why *why) {
  if (m->coords_gen3d || m->dim != 3) return 0;
  struct mol_why out;
  mol_why_clear(&out);
  int n = mol_shape_check(m, SHAPE_TOL_INPUT, SHAPE_PLANAR_TOL_INPUT, &out, NULL);
  if (n == 0) return 0;
  if (n < 0) {
    *why = out;
    return 1;
  }
  /* refused with the file's fault as the reason (rejects group by it),
   * whether or not a generated shape was tried */
  char reason[sizeof why->reason];
  snprintf(reason, sizeof reason, "input shape: %.100s", out.reason);
  if (p->input_shape != WPOOL_INPUT_SHAPE_REGENERATE) {
    mol_why_set(why, out.atom, reason,
                "%.300s, in the file's coordinates (stages.ingest.input_shape: regenerate generates a shape "
                "instead)",
                out.detail);
    return 1;
  }
  /* a generated shape instead, as a record without 3D coordinates gets */
  struct ob_parse_opts again = *o;
  again.gen3d = OB_GEN3D_ALWAYS;
  struct mol g;
  mol_init(&g);
  struct mol_why gw;
  mol_why_clear(&gw);
  if (ob_parse_why(text, len, &again, &g, &gw) != 0 || mol_check_why(&g, &p->check, &gw) != 0) {
    mol_free(&g);
    mol_why_set(why, out.atom, reason,
                "%.150s, in the file's coordinates; a generated shape failed too: %.100s%s%.120s", out.detail,
                gw.reason[0] ? gw.reason : "3D generation failed", gw.detail[0] ? ": " : "", gw.detail);
    return 1;
  }
  g.shape = MOL_SHAPE_REGENERATED;
  mol_free(m);
  *m = g;
  return 0;
}

/* The worker's whole life: read a request, parse, check, answer; until EOF. */
static void worker_main(const struct wpool *p, int in_fd, int out_fd) {
  ob_init();
  struct ob_parse_opts o = p->parse;
  char fmt[32];
  size_t cap = 0;
  char *text = NULL;
  struct rbuf rb = {malloc(RBUF_CAP), 0, 0};
  if (!rb.b) return;
  /* Ready: from now on a death or a delay is the record's doing. */
  if (send_response(out_fd, STATUS_HELLO, "", 0)) {
    free(rb.b);
    return;
  }
  for (;;) {
    uint32_t hdr[2];
    if (rb_read(in_fd, &rb, hdr, sizeof hdr)) break;
    if (hdr[0] >= sizeof fmt) break;
    if (rb_read(in_fd, &rb, fmt, hdr[0])) break;
    fmt[hdr[0]] = 0;
    if (hdr[1] + 1 > cap) {
      cap = hdr[1] + 1;
      free(text);
      text = malloc(cap);
      if (!text) break;
    }
    if (rb_read(in_fd, &rb, text, hdr[1])) break;
    text[hdr[1]] = 0;
    o.format = fmt;
    struct mol m;
    mol_init(&m);
    struct mol_why why;
    mol_why_clear(&why);
    int rc = ob_parse_why(text, hdr[1], &o, &m, &why);
    if (rc == 0 && mol_check_why(&m, &p->check, &why) != 0) rc = 1;
    if (rc == 0 && input_shape(p, text, hdr[1], &o, &m, &why) != 0) rc = 1;
    int bad;
    if (rc == 0) {
      uint8_t *buf = NULL;
      size_t len = 0;
      if (mol_pack(&m, &buf, &len) != 0) {
        mol_why_set(&why, 0, "out of memory", "packing the molecule (%d atoms)", m.n_atoms);
        bad = send_why(out_fd, &why, m.name);
      } else {
        bad = send_response(out_fd, 0, buf, (uint32_t)len);
      }
      free(buf);
    } else {
      if (!why.reason[0]) snprintf(why.reason, sizeof why.reason, "rejected (no reason given)");
      bad = send_why(out_fd, &why, m.name); /* the name a failed check or a refused parse leaves */
    }
    mol_free(&m);
    if (bad) break;
  }
  free(rb.b);
  free(text);
}

/* Forget a worker's half-done transfers (it is being replaced). */
static void clear_transfers(struct worker *w) {
  w->nq = 0;
  w->n_sent = 0;
  w->out_off = 0;
  w->in.s = w->in.e = 0;
  w->hdr_got = 0;
  free(w->msg);
  w->msg = NULL;
  w->msg_len = 0;
  w->msg_got = 0;
}

static int spawn(struct wpool *p, int k, struct se3_error *err) {
  int req[2], resp[2];
  if (pipe2(req, O_CLOEXEC) != 0) goto syserr;
  if (pipe2(resp, O_CLOEXEC) != 0) {
    close(req[0]);
    close(req[1]);
    goto syserr;
  }
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    close(req[0]); close(req[1]); close(resp[0]); close(resp[1]);
    goto syserr;
  }
  if (pid == 0) {
    /* Die with the supervisor, leave its signals to it, and hold no other
     * descriptor (the database, the workdir lock, other workers' pipes). */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_DFL);
    signal(SIGUSR1, SIG_IGN);
    signal(SIGPIPE, SIG_DFL);
    long max_fd = sysconf(_SC_OPEN_MAX);
    if (max_fd < 0 || max_fd > 65536) max_fd = 65536;
    for (int fd = 3; fd < max_fd; fd++)
      if (fd != req[0] && fd != resp[1]) close(fd);
    worker_main(p, req[0], resp[1]);
    _exit(0);
  }
  close(req[0]);
  close(resp[1]);
  /* Only the supervisor's ends are non-blocking (O_NONBLOCK belongs to the
   * open file description, which the worker's ends do not share): the
   * worker's blocking reads and writes are what it should do. */
  if (fcntl(req[1], F_SETFL, fcntl(req[1], F_GETFL) | O_NONBLOCK) != 0 ||
      fcntl(resp[0], F_SETFL, fcntl(resp[0], F_GETFL) | O_NONBLOCK) != 0) {
    se3_error_set(err, SE3_ERR_RUN, "cannot make a parser process's pipes non-blocking: %s", strerror(errno));
    kill(pid, SIGKILL);
    close(req[1]);
    close(resp[0]);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
    return -1;
  }
  struct worker *w = &p->w[k];
  w->pid = pid;
  w->to_fd = req[1];
  w->from_fd = resp[0];
  w->gen++;
  w->ready = 0;
  w->spawned = now_s();
  clear_transfers(w);
  return 0;
syserr:
  se3_error_set(err, SE3_ERR_RUN, "cannot start a parser process: %s", strerror(errno));
  return -1;
}

/* Kill worker w (whatever it is doing: running, stopped, already exiting)
 * and collect its exit status. A worker that is already exiting keeps the
 * status it had: a signal to a dying process changes nothing. */
static void reap(struct worker *w, int *wstatus) {
  if (w->pid > 0) kill(w->pid, SIGKILL);
  if (w->to_fd >= 0) close(w->to_fd);
  if (w->from_fd >= 0) close(w->from_fd);
  w->to_fd = w->from_fd = -1;
  int st = 0;
  if (w->pid > 0) {
    while (waitpid(w->pid, &st, 0) < 0 && errno == EINTR) {
    }
  }
  w->pid = -1;
  if (wstatus) *wstatus = st;
}

struct wpool *wpool_start(int n, const struct ob_parse_opts *parse, const struct mol_check_opts *check,
                          enum wpool_input_shape input_shape, struct se3_error *err) {
  struct wpool *p = calloc(1, sizeof *p);
  if (!p) {
    se3_error_set(err, SE3_ERR_MEMORY, "out of memory");
    return NULL;
  }
  p->n = n < 1 ? 1 : n;
  p->w = calloc((size_t)p->n, sizeof *p->w);
  if (!p->w) {
    free(p);
    se3_error_set(err, SE3_ERR_MEMORY, "out of memory");
    return NULL;
  }
  p->parse = *parse;
  p->check = *check;
  p->input_shape = input_shape;
  if (check->n_elements > 0) {
    p->elements = malloc((size_t)check->n_elements);
    if (!p->elements) {
      free(p->w);
      free(p);
      se3_error_set(err, SE3_ERR_MEMORY, "out of memory");
      return NULL;
    }
    memcpy(p->elements, check->elements, (size_t)check->n_elements);
    p->check.elements = p->elements;
  }
  signal(SIGPIPE, SIG_IGN); /* a crashed worker must not take us with it */
  for (int k = 0; k < p->n; k++) {
    p->w[k].pid = -1;
    p->w[k].to_fd = p->w[k].from_fd = -1;
  }
  for (int k = 0; k < p->n; k++) {
    p->w[k].in.b = malloc(RBUF_CAP);
    if (!p->w[k].in.b) {
      se3_error_set(err, SE3_ERR_MEMORY, "out of memory");
      wpool_stop(p);
      return NULL;
    }
    if (spawn(p, k, err)) {
      wpool_stop(p);
      return NULL;
    }
  }
  return p;
}

void wpool_stop(struct wpool *p) {
  if (!p) return;
  for (int k = 0; k < p->n; k++) {
    reap(&p->w[k], NULL);
    clear_transfers(&p->w[k]);
    free(p->w[k].in.b);
  }
  free(p->w);
  free(p->elements);
  free(p);
}

int wpool_restarts(const struct wpool *p) { return p->restarts; }

pid_t wpool_worker_pid(const struct wpool *p, int k) { return k >= 0 && k < p->n ? p->w[k].pid : -1; }

static void describe_death(int st, struct mol_why *why) {
  if (WIFSIGNALED(st))
    mol_why_set(why, 0, "Open Babel crashed", "signal %d, %s", WTERMSIG(st), strsignal(WTERMSIG(st)));
  else
    mol_why_set(why, 0, "parser process exited", "status %d", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

/* Jobs to hand out: those sent again after a worker died come first. */
struct feed {
  int next, n;
  int *again;
  int n_again;
};

static int feed_take(struct feed *f) {
  if (f->n_again > 0) return f->again[--f->n_again];
  return f->next < f->n ? f->next++ : -1;
}

static int feed_empty(const struct feed *f) { return f->n_again == 0 && f->next >= f->n; }

/* Kill and restart worker k. With a reason (it ran out of time, or broke the
 * protocol: a fixed text, the specifics in detail), its job in flight is
 * rejected with that reason; without one (it died), the job in flight is
 * rejected with how it died if the worker had the whole record: it cannot
 * have died of a record it never had. A worker that never said hello had
 * begun no record. The other jobs it held go back to the feed. Returns the
 * number of jobs finished (0 or 1), or -1 with err (a system error, or
 * workers that keep dying before they take any record). */
static int fail_worker(struct wpool *p, int k, struct wjob *jobs, struct feed *f, const char *reason,
                       const char *detail, struct se3_error *err) {
  struct worker *w = &p->w[k];
  int ready = w->ready;
  int st = 0;
  reap(w, &st);
  int finished = 0, first_again = 0;
  if (ready && w->nq > 0 && (reason || w->n_sent > 0)) {
    struct wjob *j = &jobs[w->q[0]];
    j->status = 1;
    if (reason)
      mol_why_set(&j->why, 0, reason, "%s", detail ? detail : "");
    else
      describe_death(st, &j->why);
    finished = 1;
    first_again = 1;
  }
  for (int i = w->nq - 1; i >= first_again; i--) f->again[f->n_again++] = w->q[i];
  clear_transfers(w);
  p->restarts++;
  if (finished == 0) {
    /* Nothing to blame it on: a start-up that fails (or a worker killed from
     * outside) would otherwise be restarted for ever. */
    if (++p->idle_deaths > MAX_START_DEATHS) {
      char how[160];
      if (reason)
        snprintf(how, sizeof how, "%s%s%s", reason, detail && detail[0] ? ": " : "", detail ? detail : "");
      else if (WIFSIGNALED(st))
        snprintf(how, sizeof how, "signal %d, %s", WTERMSIG(st), strsignal(WTERMSIG(st)));
      else
        snprintf(how, sizeof how, "exit status %d", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
      se3_error_set(err, SE3_ERR_RUN,
                    "parser processes keep dying before they take any record (%d in a row; the last: %s): does Open "
                    "Babel start (try `obabel -L formats`)?",
                    p->idle_deaths, how);
      return -1;
    }
  }
  return spawn(p, k, err) ? -1 : finished;
}

/* Write as much of worker k's unsent requests as its pipe takes now.
 * 0: all written or the pipe is full; -1: the worker is gone. */
static int pump_out(struct worker *w, const struct wjob *jobs) {
  while (w->n_sent < w->nq) {
    const struct wjob *jb = &jobs[w->q[w->n_sent]];
    uint32_t hdr[2] = {(uint32_t)strlen(jb->format), (uint32_t)jb->len};
    size_t part[3] = {sizeof hdr, hdr[0], jb->len};
    const char *base[3] = {(const char *)hdr, jb->format, jb->text};
    struct iovec iov[3];
    int n = 0;
    size_t skip = w->out_off, total = 0;
    for (int i = 0; i < 3; i++) {
      total += part[i];
      if (skip >= part[i]) {
        skip -= part[i];
        continue;
      }
      iov[n].iov_base = (void *)(base[i] + skip);
      iov[n].iov_len = part[i] - skip;
      skip = 0;
      n++;
    }
    if (n == 0) { /* nothing left of this one (cannot happen: a header is never empty) */
      w->n_sent++;
      w->out_off = 0;
      continue;
    }
    ssize_t r = writev(w->to_fd, iov, n);
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
      return -1; /* EPIPE: the worker has closed its end, it is dead or dying */
    }
    w->out_off += (size_t)r;
    if (w->out_off >= total) {
      w->n_sent++;
      w->out_off = 0;
    }
  }
  return 0;
}

/* Read worker k's pipe until one whole message is in w->hdr/w->msg.
 * 1: a message is whole; 0: the pipe is empty for now; -1: end of file or a
 * read error (the worker is gone); -2: out of memory (err filled). */
static int pump_in(struct worker *w, struct se3_error *err) {
  for (;;) {
    struct rbuf *rb = &w->in;
    if (!w->msg) {
      size_t k = rb->e - rb->s < 8 - w->hdr_got ? rb->e - rb->s : 8 - w->hdr_got;
      memcpy(w->hdr + w->hdr_got, rb->b + rb->s, k);
      rb->s += k;
      w->hdr_got += k;
      if (w->hdr_got == 8) {
        memcpy(&w->msg_len, w->hdr + 4, 4);
        w->msg = malloc((size_t)w->msg_len + 1);
        if (!w->msg) {
          se3_error_set(err, SE3_ERR_MEMORY, "out of memory for a parsed record of %u bytes", w->msg_len);
          return -2;
        }
        w->msg_got = 0;
      }
    }
    if (w->msg) {
      size_t want = w->msg_len - w->msg_got;
      size_t k = rb->e - rb->s < want ? rb->e - rb->s : want;
      memcpy(w->msg + w->msg_got, rb->b + rb->s, k);
      rb->s += k;
      w->msg_got += k;
      if (w->msg_got == w->msg_len) return 1;
    }
    /* The buffer is drained: read more. */
    size_t left = w->msg ? w->msg_len - w->msg_got : 0;
    int direct = left >= RBUF_CAP; /* big payloads go straight to their place */
    ssize_t r = direct ? read(w->from_fd, w->msg + w->msg_got, left) : read(w->from_fd, rb->b, RBUF_CAP);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    if (r <= 0) return -1;
    if (direct) {
      w->msg_got += (size_t)r;
    } else {
      rb->s = 0;
      rb->e = (size_t)r;
    }
  }
}

/* The whole message now in worker k: a hello, or the answer for its oldest
 * job. Returns the number of jobs finished (0 or 1), or -1 on a system error. */
static int take_message(struct wpool *p, int k, struct wjob *jobs, struct feed *f, struct se3_error *err) {
  struct worker *w = &p->w[k];
  int32_t status;
  memcpy(&status, w->hdr, 4);
  uint8_t *buf = w->msg;
  uint32_t len = w->msg_len;
  buf[len] = 0;
  w->msg = NULL;
  w->hdr_got = 0;
  if (status == STATUS_HELLO && !w->ready) {
    free(buf);
    w->ready = 1;
    p->idle_deaths = 0;
    w->started = now_s(); /* the job in flight, if any, starts now */
    return 0;
  }
  if (!w->ready || w->n_sent == 0 || (status != 0 && status != 1)) {
    free(buf);
    return fail_worker(p, k, jobs, f, "internal error", "the parser process broke the protocol on this record", err);
  }
  struct wjob *j = &jobs[w->q[0]];
  if (status == 0) {
    mol_init(&j->mol);
    if (mol_unpack(buf, len, &j->mol) != 0) {
      j->status = 1;
      mol_why_set(&j->why, 0, "internal error", "bad molecule from the parser process");
    } else {
      j->status = 0;
    }
  } else {
    /* atom, reason, NUL, detail, NUL, name (buf[len] is 0: the name ends
     * there) */
    const char *nul = len >= 4 ? memchr(buf + 4, 0, len - 4) : NULL;
    const char *nul2 = nul ? memchr(nul + 1, 0, (size_t)((const char *)buf + len - (nul + 1))) : NULL;
    j->status = 1;
    if (!nul) {
      mol_why_set(&j->why, 0, "internal error", "a rejection of %u bytes without its reason from the parser process",
                  len);
    } else {
      int32_t atom;
      memcpy(&atom, buf, 4);
      mol_why_set(&j->why, atom > 0 ? atom : 0, (const char *)buf + 4, "%s", nul + 1);
      free(j->mol.name);
      j->mol.name = nul2 && nul2[1] ? strdup(nul2 + 1) : NULL; /* (no name when out of memory) */
    }
  }
  free(buf);
  memmove(w->q, w->q + 1, sizeof w->q[0] * (size_t)(QUEUE_DEPTH - 1));
  w->nq--;
  w->n_sent--;
  w->started = now_s(); /* the next queued job starts now */
  return 1;
}

/* Take every whole message waiting in worker k's pipe (an end of file: the
 * worker died). Returns the number of jobs finished, or -1 on a system error. */
static int drain(struct wpool *p, int k, struct wjob *jobs, struct feed *f, struct se3_error *err) {
  struct worker *w = &p->w[k];
  int total = 0;
  for (;;) {
    int got = pump_in(w, err);
    if (got == -2) return -1;
    if (got == 0) return total;
    if (got < 0) {
      int fin = fail_worker(p, k, jobs, f, NULL, NULL, err);
      return fin < 0 ? -1 : total + fin;
    }
    unsigned before = w->gen;
    int fin = take_message(p, k, jobs, f, err);
    if (fin < 0) return -1;
    total += fin;
    if (w->gen != before) return total; /* replaced: its pipe is a new one */
  }
}

/* How far the job in flight on w had got when it ran out of time (the
 * detail of its "timed out"). */
static void timeout_detail(const struct worker *w, const struct wjob *jobs, double timeout_s, char *out, size_t n) {
  if (w->n_sent == 0) {
    const struct wjob *j = &jobs[w->q[0]];
    snprintf(out, n, "after %g s: the parser process had taken %zu of the record's %zu bytes (it stopped reading)",
             timeout_s, w->out_off, sizeof(uint32_t) * 2 + strlen(j->format) + j->len);
  } else if (w->msg) {
    snprintf(out, n, "after %g s: the parser process had sent %zu of the %u bytes of its answer", timeout_s,
             w->msg_got, w->msg_len);
  } else {
    snprintf(out, n, "after %g s (Open Babel hung on this record)", timeout_s);
  }
}

int wpool_run(struct wpool *p, struct wjob *jobs, int n, double timeout_s, volatile sig_atomic_t *stop,
              void (*advance)(void *arg, int64_t n), void *arg, struct se3_error *err) {
  struct feed f = {0, n, calloc((size_t)n + (size_t)p->n * QUEUE_DEPTH + 1, sizeof(int)), 0};
  struct pollfd *pfd = calloc((size_t)p->n * 2, sizeof *pfd);
  int *who = calloc((size_t)p->n * 2, sizeof *who);
  unsigned *gen = calloc((size_t)p->n * 2, sizeof *gen);
  int done = 0, rc = 0;
  if (!f.again || !pfd || !who || !gen) {
    se3_error_set(err, SE3_ERR_MEMORY, "out of memory");
    rc = -1;
    goto out;
  }
  /* Counts what a step finished (its value, evaluated once), or leaves on a system error. */
#define FINISHED(step)                   \
  do {                                   \
    int fin_ = (step);                   \
    if (fin_ < 0) {                      \
      rc = -1;                           \
      goto out;                          \
    }                                    \
    done += fin_;                        \
    if (fin_ && advance) advance(arg, fin_); \
  } while (0)
  while (done < n) {
    if (stop && *stop) { rc = 1; break; }
    /* Keep every worker's queue full, and write what the pipes take now. */
    for (int k = 0; k < p->n; k++) {
      struct worker *w = &p->w[k];
      while (w->nq < QUEUE_DEPTH && !feed_empty(&f)) {
        if (w->nq == 0) w->started = now_s();
        w->q[w->nq++] = feed_take(&f);
      }
      if (w->n_sent < w->nq && pump_out(w, jobs) != 0) FINISHED(fail_worker(p, k, jobs, &f, NULL, NULL, err));
    }
    /* One poll over every pipe: answers in, requests out, at most until the
     * nearest deadline (and a fifth of a second, to see *stop). */
    int m = 0;
    double t = now_s(), wait_s = 0.2;
    for (int k = 0; k < p->n; k++) {
      struct worker *w = &p->w[k];
      double left = 1e9;
      if (!w->ready) left = w->spawned + (timeout_s > START_LIMIT_S ? timeout_s : START_LIMIT_S) - t;
      else if (w->nq > 0) left = w->started + timeout_s - t;
      if (left < wait_s) wait_s = left;
      pfd[m] = (struct pollfd){.fd = w->from_fd, .events = POLLIN};
      who[m] = k;
      gen[m++] = w->gen;
      if (w->n_sent < w->nq) {
        pfd[m] = (struct pollfd){.fd = w->to_fd, .events = POLLOUT};
        who[m] = k;
        gen[m++] = w->gen;
      }
    }
    int ms = wait_s <= 0 ? 0 : (int)(wait_s * 1000) + 1;
    int r = poll(pfd, (nfds_t)m, ms);
    if (r < 0 && errno != EINTR) {
      se3_error_set(err, SE3_ERR_RUN, "poll: %s", strerror(errno));
      rc = -1;
      goto out;
    }
    for (int i = 0; r > 0 && i < m; i++) {
      int k = who[i];
      struct worker *w = &p->w[k];
      if (!pfd[i].revents || gen[i] != w->gen) continue; /* nothing, or a worker replaced meanwhile */
      if (pfd[i].events & POLLOUT) {
        if (pump_out(w, jobs) != 0) FINISHED(fail_worker(p, k, jobs, &f, NULL, NULL, err));
        continue;
      }
      FINISHED(drain(p, k, jobs, &f, err));
    }
    /* Deadlines, whatever the state of the job in flight: its request half
     * written, Open Babel at work, its answer half read. */
    t = now_s();
    for (int k = 0; k < p->n; k++) {
      struct worker *w = &p->w[k];
      if (!w->ready) {
        double limit = timeout_s > START_LIMIT_S ? timeout_s : START_LIMIT_S;
        if (t - w->spawned < limit) continue;
        char detail[160];
        snprintf(detail, sizeof detail, "%g s after its start", limit);
        FINISHED(fail_worker(p, k, jobs, &f, "not ready", detail, err));
        continue;
      }
      if (w->nq == 0 || t - w->started < timeout_s) continue;
      /* An answer already in the pipe is in time: the supervisor may have
       * been busy with other workers' answers since the poll. */
      FINISHED(drain(p, k, jobs, &f, err));
      if (!w->ready || w->nq == 0 || now_s() - w->started < timeout_s) continue;
      char detail[256];
      timeout_detail(w, jobs, timeout_s, detail, sizeof detail);
      FINISHED(fail_worker(p, k, jobs, &f, "timed out", detail, err));
    }
  }
#undef FINISHED
out:
  if (rc != 0) {
    /* Abandon jobs in flight: restart those workers so no stale answer is read later. */
    for (int k = 0; k < p->n; k++) {
      struct worker *w = &p->w[k];
      if (w->nq == 0 && !w->msg && w->hdr_got == 0) continue;
      reap(w, NULL);
      struct se3_error e2;
      if (spawn(p, k, &e2) && rc == 1) {
        if (err) *err = e2;
        rc = -1;
      }
    }
  }
  free(f.again);
  free(pfd);
  free(who);
  free(gen);
  return rc;
}
