/* workers.c — parse records in isolated worker processes (see workers.h).
 *
 * Protocol over two pipes per worker, native byte order (same machine):
 *   request:  u32 format length, u32 text length, format bytes, text bytes
 *   response: i32 status (0 ok, 1 rejected), u32 length, then a packed
 *             molecule (mol_pack) or the reason text
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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct worker {
  pid_t pid;
  int to_fd;     /* supervisor writes requests */
  int from_fd;   /* supervisor reads responses */
  int job;       /* job index in flight, -1 when idle */
  double started;
};

struct wpool {
  int n;
  struct worker *w;
  struct ob_parse_opts parse;
  struct mol_check_opts check;
  uint8_t *elements;
  int restarts;
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int read_full(int fd, void *buf, size_t n) {
  uint8_t *p = buf;
  while (n) {
    ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    p += r;
    n -= (size_t)r;
  }
  return 0;
}

static int write_full(int fd, const void *buf, size_t n) {
  const uint8_t *p = buf;
  while (n) {
    ssize_t r = write(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    p += r;
    n -= (size_t)r;
  }
  return 0;
}

static int send_response(int fd, int32_t status, const void *payload, uint32_t len) {
  uint8_t hdr[8];
  memcpy(hdr, &status, 4);
  memcpy(hdr + 4, &len, 4);
  return write_full(fd, hdr, 8) || write_full(fd, payload, len) ? -1 : 0;
}

/* The worker's whole life: read a request, parse, check, answer; until EOF. */
static void worker_main(const struct wpool *p, int in_fd, int out_fd) {
  ob_init();
  struct ob_parse_opts o = p->parse;
  char fmt[32];
  size_t cap = 0;
  char *text = NULL;
  for (;;) {
    uint32_t hdr[2];
    if (read_full(in_fd, hdr, sizeof hdr)) break;
    if (hdr[0] >= sizeof fmt) break;
    if (read_full(in_fd, fmt, hdr[0])) break;
    fmt[hdr[0]] = 0;
    if (hdr[1] + 1 > cap) {
      cap = hdr[1] + 1;
      free(text);
      text = malloc(cap);
      if (!text) break;
    }
    if (read_full(in_fd, text, hdr[1])) break;
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
  p->w[k].job = -1;
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

/* Kill and restart worker k; its job (if any) is rejected with reason. */
static int fail_worker(struct wpool *p, int k, struct wjob *jobs, const char *reason, int timed_out, char *err,
                       size_t errlen) {
  struct worker *w = &p->w[k];
  if (timed_out && w->pid > 0) kill(w->pid, SIGKILL);
  int st = 0;
  reap(w, &st);
  if (w->job >= 0) {
    struct wjob *j = &jobs[w->job];
    j->status = 1;
    if (reason)
      snprintf(j->reason, sizeof j->reason, "%s", reason);
    else
      describe_death(st, j->reason, sizeof j->reason);
  }
  w->job = -1;
  p->restarts++;
  return spawn(p, k, err, errlen);
}

static int receive(struct wpool *p, int k, struct wjob *jobs, char *err, size_t errlen) {
  struct worker *w = &p->w[k];
  int32_t status;
  uint32_t len;
  uint8_t hdr[8];
  if (read_full(w->from_fd, hdr, 8)) return fail_worker(p, k, jobs, NULL, 0, err, errlen);
  memcpy(&status, hdr, 4);
  memcpy(&len, hdr + 4, 4);
  uint8_t *buf = malloc((size_t)len + 1);
  if (!buf || read_full(w->from_fd, buf, len)) {
    free(buf);
    return fail_worker(p, k, jobs, NULL, 0, err, errlen);
  }
  buf[len] = 0;
  struct wjob *j = &jobs[w->job];
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
  w->job = -1;
  return 0;
}

int wpool_run(struct wpool *p, struct wjob *jobs, int n, double timeout_s, volatile sig_atomic_t *stop,
              void (*advance)(void *arg, int64_t n), void *arg, char *err, size_t errlen) {
  int next = 0, done = 0;
  struct pollfd *pfd = calloc((size_t)p->n, sizeof *pfd);
  int *who = calloc((size_t)p->n, sizeof *who);
  int rc = 0;
  while (done < n) {
    if (stop && *stop) { rc = 1; break; }
    /* Hand out work to idle workers. */
    for (int k = 0; k < p->n && next < n; k++) {
      struct worker *w = &p->w[k];
      if (w->job >= 0) continue;
      struct wjob *j = &jobs[next];
      uint32_t hdr[2] = {(uint32_t)strlen(j->format), (uint32_t)j->len};
      w->job = next++;
      for (int attempt = 0;; attempt++) {
        w->started = now_s();
        if (!write_full(w->to_fd, hdr, sizeof hdr) && !write_full(w->to_fd, j->format, hdr[0]) &&
            !write_full(w->to_fd, j->text, j->len))
          break;
        /* The worker is gone before it took the record (it died at start-up):
         * restart it and try once more before blaming the record. */
        int keep = w->job;
        if (attempt == 0) w->job = -1;
        if (fail_worker(p, k, jobs, NULL, 0, err, errlen)) { rc = -1; goto out; }
        if (attempt == 1) {
          done++;
          if (advance) advance(arg, 1);
          break;
        }
        w->job = keep;
      }
    }
    /* Wait for answers, at most until the nearest deadline. */
    int m = 0;
    double t = now_s(), wait_s = 0.2;
    for (int k = 0; k < p->n; k++) {
      if (p->w[k].job < 0) continue;
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
      if (receive(p, who[i], jobs, err, errlen)) { rc = -1; goto out; }
      done++;
      if (advance) advance(arg, 1);
    }
    t = now_s();
    for (int k = 0; k < p->n; k++) {
      struct worker *w = &p->w[k];
      if (w->job < 0 || t - w->started < timeout_s) continue;
      char reason[128];
      snprintf(reason, sizeof reason, "timed out after %.1f s (Open Babel hung on this record)", timeout_s);
      if (fail_worker(p, k, jobs, reason, 1, err, errlen)) { rc = -1; goto out; }
      done++;
      if (advance) advance(arg, 1);
    }
  }
out:
  if (rc != 0) {
    /* Abandon jobs in flight: restart those workers so no stale answer is read later. */
    for (int k = 0; k < p->n; k++) {
      if (p->w[k].job < 0) continue;
      p->w[k].job = -1;
      kill(p->w[k].pid, SIGKILL);
      reap(&p->w[k], NULL);
      if (spawn(p, k, err, errlen)) rc = -1;
    }
  }
  free(pfd);
  free(who);
  return rc;
}
