/* workers.c — parse records in isolated worker processes (see workers.h).
 *
 * Protocol over two pipes per worker, native byte order (same machine):
 *   request:  u32 format length, u32 text length, format bytes, text bytes
 *   response: i32 status (0 ok, 1 rejected), u32 length, then a packed
 *             molecule (mol_pack) or the reason text
 *
 * Each worker has up to QUEUE_DEPTH records sent to it, so it never waits for
 * the supervisor between records; it answers them in order, so the oldest
 * unanswered record is the one in flight: a crash or a timeout is blamed on
 * it alone and the records queued behind it are sent again.
 */
#define _GNU_SOURCE
#include "chem/workers.h"

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

/* Buffered reading of a pipe: a message usually arrives in one read (and the
 * next queued one with it), and every system call is dear on these machines. */
#define RBUF_CAP 65536
struct rbuf {
  uint8_t *b;
  size_t s, e;
};

#define QUEUE_DEPTH 2

struct worker {
  pid_t pid;
  struct rbuf in;        /* answers read ahead */
  int to_fd;             /* supervisor writes requests */
  int from_fd;           /* supervisor reads responses */
  int q[QUEUE_DEPTH];    /* job indices sent, oldest (in flight) first */
  int nq;
  double started;        /* when the job in flight started */
};

struct wpool {
  int n;
  struct worker *w;
  struct ob_parse_opts parse;
  struct mol_check_opts check;
  uint8_t *elements;
  int restarts;
  int idle_deaths;       /* workers that died holding no record, in a row */
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

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

/* The worker's whole life: read a request, parse, check, answer; until EOF. */
static void worker_main(const struct wpool *p, int in_fd, int out_fd) {
  ob_init();
  struct ob_parse_opts o = p->parse;
  char fmt[32];
  size_t cap = 0;
  char *text = NULL;
  struct rbuf rb = {malloc(RBUF_CAP), 0, 0};
  if (!rb.b) return;
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
    char reason[512] = "";
    int rc = ob_parse(text, hdr[1], &o, &m, reason, sizeof reason);
    if (rc == 0 && mol_check(&m, &p->check, reason, sizeof reason) != 0) rc = 1;
    int bad;
    if (rc == 0) {
      uint8_t *buf = NULL;
      size_t len = 0;
      if (mol_pack(&m, &buf, &len) != 0) {
        const char *msg = "out of memory packing the molecule";
        bad = send_response(out_fd, 1, msg, (uint32_t)strlen(msg));
      } else {
        bad = send_response(out_fd, 0, buf, (uint32_t)len);
      }
      free(buf);
    } else {
      if (!reason[0]) snprintf(reason, sizeof reason, "rejected (no reason given)");
      bad = send_response(out_fd, 1, reason, (uint32_t)strlen(reason));
    }
    mol_free(&m);
    if (bad) break;
  }
  free(rb.b);
  free(text);
}

static int spawn(struct wpool *p, int k, char *err, size_t errlen) {
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
  p->w[k].pid = pid;
  p->w[k].to_fd = req[1];
  p->w[k].from_fd = resp[0];
  p->w[k].nq = 0;
  p->w[k].in.s = p->w[k].in.e = 0;
  return 0;
syserr:
  snprintf(err, errlen, "cannot start a parser process: %s", strerror(errno));
  return -1;
}

static void reap(struct worker *w, int *wstatus) {
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
                          char *err, size_t errlen) {
  struct wpool *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->n = n < 1 ? 1 : n;
  p->w = calloc((size_t)p->n, sizeof *p->w);
  p->parse = *parse;
  p->check = *check;
  if (check->n_elements > 0) {
    p->elements = malloc((size_t)check->n_elements);
    memcpy(p->elements, check->elements, (size_t)check->n_elements);
    p->check.elements = p->elements;
  }
  signal(SIGPIPE, SIG_IGN); /* a crashed worker must not take us with it */
  for (int k = 0; k < p->n; k++) {
    p->w[k].pid = -1;
    p->w[k].to_fd = p->w[k].from_fd = -1;
    p->w[k].in.b = malloc(RBUF_CAP);
    if (!p->w[k].in.b) {
      snprintf(err, errlen, "out of memory");
      wpool_stop(p);
      return NULL;
    }
    if (spawn(p, k, err, errlen)) {
      wpool_stop(p);
      return NULL;
    }
  }
  return p;
}

void wpool_stop(struct wpool *p) {
  if (!p) return;
  for (int k = 0; k < p->n; k++) {
    if (p->w[k].pid > 0) kill(p->w[k].pid, SIGKILL);
    reap(&p->w[k], NULL);
    free(p->w[k].in.b);
  }
  free(p->w);
  free(p->elements);
  free(p);
}

int wpool_restarts(const struct wpool *p) { return p->restarts; }

static void describe_death(int st, char *out, size_t n) {
  if (WIFSIGNALED(st))
    snprintf(out, n, "Open Babel crashed on this record (signal %d, %s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
  else
    snprintf(out, n, "the parser process exited unexpectedly (status %d)", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
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

/* Kill and restart worker k. Its job in flight (if any) is rejected with
 * reason (or how the worker died); the jobs queued behind it go back to the
 * feed. Returns the number of jobs finished (0 or 1), or -1 on a system error. */
static int fail_worker(struct wpool *p, int k, struct wjob *jobs, struct feed *f, const char *reason, int timed_out,
                       char *err, size_t errlen) {
  struct worker *w = &p->w[k];
  if (timed_out && w->pid > 0) kill(w->pid, SIGKILL);
  int st = 0;
  reap(w, &st);
  int finished = 0;
  if (w->nq > 0) {
    struct wjob *j = &jobs[w->q[0]];
    j->status = 1;
    if (reason)
      snprintf(j->reason, sizeof j->reason, "%s", reason);
    else
      describe_death(st, j->reason, sizeof j->reason);
    finished = 1;
    for (int i = w->nq - 1; i >= 1; i--) f->again[f->n_again++] = w->q[i];
  }
  w->nq = 0;
  p->restarts++;
  return spawn(p, k, err, errlen) ? -1 : finished;
}

static int receive(struct wpool *p, int k, struct wjob *jobs, struct feed *f, char *err, size_t errlen) {
  struct worker *w = &p->w[k];
  int32_t status;
  uint32_t len;
  uint8_t hdr[8];
  if (rb_read(w->from_fd, &w->in, hdr, 8)) return fail_worker(p, k, jobs, f, NULL, 0, err, errlen);
  memcpy(&status, hdr, 4);
  memcpy(&len, hdr + 4, 4);
  uint8_t *buf = malloc((size_t)len + 1);
  if (!buf || rb_read(w->from_fd, &w->in, buf, len)) {
    free(buf);
    return fail_worker(p, k, jobs, f, NULL, 0, err, errlen);
  }
  buf[len] = 0;
  struct wjob *j = &jobs[w->q[0]];
  if (status == 0) {
    mol_init(&j->mol);
    if (mol_unpack(buf, len, &j->mol) != 0) {
      j->status = 1;
      snprintf(j->reason, sizeof j->reason, "internal error: bad molecule from the parser process");
    } else {
      j->status = 0;
    }
  } else {
    j->status = 1;
    snprintf(j->reason, sizeof j->reason, "%s", (char *)buf);
  }
  free(buf);
  p->idle_deaths = 0;
  memmove(w->q, w->q + 1, sizeof w->q[0] * (size_t)(QUEUE_DEPTH - 1));
  w->nq--;
  w->started = now_s(); /* the next queued job starts now */
  return 1;
}

/* Send job j to worker k. 0 sent; otherwise the worker is dead: the caller
 * gets the finished count of fail_worker in *finished and j goes back to the feed. */
static int send_job(struct wpool *p, int k, struct wjob *jobs, int j, struct feed *f, int *finished, char *err,
                    size_t errlen) {
  struct worker *w = &p->w[k];
  const struct wjob *jb = &jobs[j];
  uint32_t hdr[2] = {(uint32_t)strlen(jb->format), (uint32_t)jb->len};
  struct iovec iov[3] = {{hdr, sizeof hdr}, {(void *)jb->format, hdr[0]}, {(void *)jb->text, jb->len}};
  if (writev_full(w->to_fd, iov, 3) == 0) {
    if (w->nq == 0) w->started = now_s();
    w->q[w->nq++] = j;
    return 0;
  }
  /* The worker is gone: it crashed on the job it had in flight (blamed on
   * it now), or died idle. Restart it; j is sent again. */
  f->again[f->n_again++] = j;
  if (w->nq == 0 && ++p->idle_deaths > 5) {
    snprintf(err, errlen, "parser processes keep dying before they get any record (Open Babel set-up fails?)");
    *finished = -1;
    return 1;
  }
  *finished = fail_worker(p, k, jobs, f, NULL, 0, err, errlen);
  return 1;
}

int wpool_run(struct wpool *p, struct wjob *jobs, int n, double timeout_s, volatile sig_atomic_t *stop,
              void (*advance)(void *arg, int64_t n), void *arg, char *err, size_t errlen) {
  struct feed f = {0, n, calloc((size_t)n + (size_t)p->n * QUEUE_DEPTH + 1, sizeof(int)), 0};
  struct pollfd *pfd = calloc((size_t)p->n, sizeof *pfd);
  int *who = calloc((size_t)p->n, sizeof *who);
  int done = 0, rc = 0;
  while (done < n) {
    if (stop && *stop) { rc = 1; break; }
    /* Keep every worker's queue full. */
    for (int k = 0; k < p->n; k++) {
      while (p->w[k].nq < QUEUE_DEPTH && !feed_empty(&f)) {
        int j = feed_take(&f), fin = 0;
        if (send_job(p, k, jobs, j, &f, &fin, err, errlen) == 0) continue;
        if (fin < 0) { rc = -1; goto out; }
        done += fin;
        if (fin && advance) advance(arg, fin);
        break; /* a fresh worker: fill it on the next round */
      }
    }
    /* Answers already read ahead need no waiting. */
    for (int k = 0; k < p->n; k++) {
      while (p->w[k].nq > 0 && p->w[k].in.s < p->w[k].in.e) {
        int fin = receive(p, k, jobs, &f, err, errlen);
        if (fin < 0) { rc = -1; goto out; }
        done += fin;
        if (fin && advance) advance(arg, fin);
      }
    }
    /* Wait for answers, at most until the nearest deadline. */
    int m = 0;
    double t = now_s(), wait_s = 0.2;
    for (int k = 0; k < p->n; k++) {
      if (p->w[k].nq == 0) continue;
      double left = p->w[k].started + timeout_s - t;
      if (left < wait_s) wait_s = left;
      pfd[m].fd = p->w[k].from_fd;
      pfd[m].events = POLLIN;
      who[m++] = k;
    }
    if (m == 0) continue;
    int ms = wait_s <= 0 ? 0 : (int)(wait_s * 1000) + 1;
    int r = poll(pfd, (nfds_t)m, ms);
    if (r < 0 && errno != EINTR) {
      snprintf(err, errlen, "poll: %s", strerror(errno));
      rc = -1;
      goto out;
    }
    for (int i = 0; r > 0 && i < m; i++) {
      if (!(pfd[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      int fin = receive(p, who[i], jobs, &f, err, errlen);
      if (fin < 0) { rc = -1; goto out; }
      done += fin;
      if (fin && advance) advance(arg, fin);
    }
    t = now_s();
    for (int k = 0; k < p->n; k++) {
      struct worker *w = &p->w[k];
      if (w->nq == 0 || t - w->started < timeout_s) continue;
      char reason[128];
      snprintf(reason, sizeof reason, "timed out after %.1f s (Open Babel hung on this record)", timeout_s);
      int fin = fail_worker(p, k, jobs, &f, reason, 1, err, errlen);
      if (fin < 0) { rc = -1; goto out; }
      done += fin;
      if (fin && advance) advance(arg, fin);
    }
  }
out:
  if (rc != 0) {
    /* Abandon jobs in flight: restart those workers so no stale answer is read later. */
    for (int k = 0; k < p->n; k++) {
      if (p->w[k].nq == 0) continue;
      p->w[k].nq = 0;
      kill(p->w[k].pid, SIGKILL);
      reap(&p->w[k], NULL);
      if (spawn(p, k, err, errlen)) rc = -1;
    }
  }
  free(f.again);
  free(pfd);
  free(who);
  return rc;
}
