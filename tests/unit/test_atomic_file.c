/* The atomic writer (common/atomic_file.h) against what a hostile or
 * careless neighbour can put where it writes (issue 30, defect 5): a
 * symbolic link at the target or at the temporary name it used to take
 * (PATH.tmp-PID), a device node, a FIFO, a folder or a socket as the
 * target; the old file's mode; a temporary created exclusively and never
 * shared; the temporary removed when a signal stops the process; and the
 * comparison by device and inode that refuses to write over an input
 * (defect 3).
 *
 * The process runs as root in CI: every refusal is checked on the file
 * system afterwards (st_mode, st_rdev, contents), not only by the return
 * value. /dev/null itself is tried only after a private device node of the
 * same kind was refused, so a writer that replaced device nodes fails the
 * test before it could replace the system's. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/atomic_file.h"
#include "common/error.h"
#include "tests/testutil.h"

static char *join(const char *dir, const char *name) {
  char *p = NULL;
  cr_assert_geq(asprintf(&p, "%s/%s", dir, name), 0);
  return p;
}

static void assert_content(const char *path, const char *want) {
  size_t n = 0;
  char *got = tu_read(path, &n);
  cr_assert_not_null(got, "%s missing", path);
  cr_assert_eq(n, strlen(want), "%s: %zu bytes, want %zu ('%s')", path, n, strlen(want), got);
  cr_assert_str_eq(got, want);
  free(got);
}

/* names in dir that hold ".tmp-" (the writer's temporaries) */
static int n_temps(const char *dir) {
  char *ls = NULL;
  tu_sh(&ls, "ls -a '%s' | grep -c '\\.tmp-'", dir);
  int n = atoi(ls);
  free(ls);
  return n;
}

/* A symbolic link as the target is refused, and the file it points to is
 * left alone; so is the link itself (writing through it would let whoever
 * can plant a link in the output folder choose what root overwrites). */
Test(atomic_file, refuses_a_symlink_as_the_target) {
  char *dir = tu_tmpdir("af_link"), *victim = join(dir, "victim"), *out = join(dir, "hits.csv");
  free(tu_write(dir, "victim", "precious\n"));
  cr_assert_eq(symlink(victim, out), 0);
  struct se3_error err = {0};
  int rc = atomic_file_write(out, "new\n", 4, &err);
  cr_assert_eq(rc, -1, "a symlink as the target was written (through or over): %s", se3_error_str(&err).s);
  cr_assert(strstr(se3_error_str(&err).s, out) && strstr(se3_error_str(&err).s, "symbolic link"), "%s",
            se3_error_str(&err).s);
  assert_content(victim, "precious\n");
  struct stat st;
  cr_assert_eq(lstat(out, &st), 0);
  cr_assert(S_ISLNK(st.st_mode), "the link was replaced");
  cr_assert_eq(n_temps(dir), 0);
  /* a dangling link too: writing through it would create its target */
  char *gone = join(dir, "not-yet"), *dangling = join(dir, "report.html");
  cr_assert_eq(symlink(gone, dangling), 0);
  se3_error_clear(&err);
  cr_assert_eq(atomic_file_write(dangling, "x", 1, &err), -1);
  cr_assert_eq(access(gone, F_OK), -1, "the dangling link's target was created");
  cr_assert_eq(n_temps(dir), 0);
  free(gone);
  free(dangling);
  free(out);
  free(victim);
  free(dir);
}

/* A link planted at the old predictable temporary name PATH.tmp-PID (and at
 * PATH.tmp-PID-0 and PATH.tmp) is never opened: the temporary's name is
 * random and it is created with O_EXCL | O_NOFOLLOW. The write succeeds
 * and the links' target keeps its bytes. */
Test(atomic_file, does_not_follow_a_link_planted_at_the_temporary_name) {
  char *dir = tu_tmpdir("af_plant"), *victim = join(dir, "victim"), *out = join(dir, "hits.csv");
  free(tu_write(dir, "victim", "precious\n"));
  free(tu_write(dir, "hits.csv", "old\n"));
  const char *forms[] = {"%s.tmp-%d", "%s.tmp-%d-0", "%s.tmp"};
  char planted[3][1200];
  for (int i = 0; i < 3; i++) {
    snprintf(planted[i], sizeof planted[i], forms[i], out, (int)getpid());
    cr_assert_eq(symlink(victim, planted[i]), 0, "%s", planted[i]);
  }
  struct se3_error err = {0};
  cr_assert_eq(atomic_file_write(out, "new\n", 4, &err), 0, "%s", se3_error_str(&err).s);
  assert_content(victim, "precious\n");
  assert_content(out, "new\n");
  struct stat st;
  cr_assert_eq(lstat(out, &st), 0);
  cr_assert(S_ISREG(st.st_mode), "hits.csv is no longer a regular file");
  for (int i = 0; i < 3; i++) {
    cr_assert_eq(lstat(planted[i], &st), 0, "%s was removed", planted[i]);
    cr_assert(S_ISLNK(st.st_mode), "%s", planted[i]);
  }
  free(out);
  free(victim);
  free(dir);
}

/* Checks that writing `target` is refused with a message naming it and
 * saying what it is, and that it is the same node afterwards. */
static void assert_refused_and_kept(const char *target, const char *what) {
  struct stat before, after;
  cr_assert_eq(lstat(target, &before), 0, "%s", target);
  struct se3_error err = {0};
  int rc = atomic_file_write(target, "new\n", 4, &err);
  cr_assert_eq(lstat(target, &after), 0, "%s is gone", target);
  cr_assert_eq(rc, -1, "%s (%s) was written over", target, what);
  cr_assert_eq(err.kind, SE3_ERR_IO, "kind %d: %s", (int)err.kind, se3_error_str(&err).s);
  cr_assert(strstr(se3_error_str(&err).s, target) && strstr(se3_error_str(&err).s, what) &&
                strstr(se3_error_str(&err).s, "not a regular file"),
            "%s", se3_error_str(&err).s);
  cr_assert_eq(after.st_mode, before.st_mode, "%s: mode %o became %o", target, before.st_mode, after.st_mode);
  cr_assert_eq(after.st_ino, before.st_ino, "%s was replaced", target);
  cr_assert_eq(after.st_rdev, before.st_rdev);
}

/* A device node, a FIFO, a socket or a folder as the target: refused, left
 * as it was, no temporary left beside it (and nothing opened: opening a
 * FIFO would block). */
Test(atomic_file, refuses_devices_fifos_sockets_and_folders) {
  char *dir = tu_tmpdir("af_nodes");
  char *fifo = join(dir, "fifo"), *folder = join(dir, "folder"), *sock = join(dir, "sock");
  cr_assert_eq(mkfifo(fifo, 0644), 0);
  assert_refused_and_kept(fifo, "FIFO");
  cr_assert_eq(mkdir(folder, 0755), 0);
  assert_refused_and_kept(folder, "folder");
  int s = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock);
  cr_assert(s >= 0 && strlen(sock) < sizeof sa.sun_path && bind(s, (struct sockaddr *)&sa, sizeof sa) == 0,
            "cannot make the socket %s", sock);
  assert_refused_and_kept(sock, "socket");
  close(s);
  /* a private character device (a copy of /dev/null's numbers) where we may
   * make one (root), before the real /dev/null */
  char *dev = join(dir, "null");
  if (mknod(dev, S_IFCHR | 0666, makedev(1, 3)) == 0) {
    assert_refused_and_kept(dev, "character device");
  } else {
    cr_log_info("mknod: %s: the private device node is left out", strerror(errno));
  }
  cr_assert_eq(n_temps(dir), 0);
  assert_refused_and_kept("/dev/null", "character device");
  /* and /dev/null still works as one */
  int fd = open("/dev/null", O_WRONLY);
  cr_assert(fd >= 0 && write(fd, "x", 1) == 1);
  close(fd);
  free(dev);
  free(sock);
  free(folder);
  free(fifo);
  free(dir);
}

/* The replaced file keeps its permission bits (a 0600 file stays 0600); a new
 * file gets 0666 less the umask, as fopen gives. */
Test(atomic_file, keeps_the_old_files_mode) {
  char *dir = tu_tmpdir("af_mode"), *out = join(dir, "secret.csv"), *fresh = join(dir, "fresh.csv");
  free(tu_write(dir, "secret.csv", "old\n"));
  mode_t modes[] = {0600, 0640, 0444};
  struct se3_error err = {0};
  for (int i = 0; i < 3; i++) {
    cr_assert_eq(chmod(out, modes[i]), 0);
    cr_assert_eq(atomic_file_write(out, "new\n", 4, &err), 0, "%s", se3_error_str(&err).s);
    struct stat st;
    cr_assert_eq(stat(out, &st), 0);
    cr_assert_eq(st.st_mode & 07777, modes[i], "a %04o file came back %04o", modes[i], st.st_mode & 07777);
    assert_content(out, "new\n");
  }
  mode_t old = umask(027);
  int rc = atomic_file_write(fresh, "x", 1, &err);
  umask(old);
  cr_assert_eq(rc, 0, "%s", se3_error_str(&err).s);
  struct stat st;
  cr_assert_eq(stat(fresh, &st), 0);
  cr_assert_eq(st.st_mode & 07777, 0640, "a new file under umask 027 is %04o", st.st_mode & 07777);
  free(fresh);
  free(out);
  free(dir);
}

/* The temporary: beside the target, named PATH.tmp-PID-<random>, a regular
 * file readable by its owner alone while it is written; two writers of
 * one target at once in one process get two temporaries (the old fixed
 * name made the second truncate the first's). */
Test(atomic_file, temporary_is_private_and_never_shared) {
  char *dir = tu_tmpdir("af_temp"), *out = join(dir, "hits.sdf");
  free(tu_write(dir, "hits.sdf", "old\n"));
  struct se3_error err = {0};
  char prefix[1200];
  snprintf(prefix, sizeof prefix, "%s.tmp-%d-", out, (int)getpid());
  struct atomic_file a, b;
  cr_assert_eq(atomic_file_open(&a, out, &err), 0, "%s", se3_error_str(&err).s);
  cr_assert_eq(atomic_file_open(&b, out, &err), 0, "%s", se3_error_str(&err).s);
  cr_assert_str_neq(a.tmp, b.tmp, "two writers share the temporary %s", a.tmp);
  cr_assert(!strncmp(a.tmp, prefix, strlen(prefix)) && strlen(a.tmp) > strlen(prefix) + 8, "%s is not %s<random>",
            a.tmp, prefix);
  struct stat st;
  cr_assert_eq(lstat(a.tmp, &st), 0);
  cr_assert(S_ISREG(st.st_mode));
  cr_assert_eq(st.st_mode & 0077, 0, "the temporary is %04o while it is written", st.st_mode & 07777);
  fputs("from a\n", a.f);
  fputs("from b\n", b.f);
  cr_assert_eq(atomic_file_commit(&a, &err), 0, "%s", se3_error_str(&err).s);
  assert_content(out, "from a\n");
  cr_assert_eq(atomic_file_commit(&b, &err), 0, "%s", se3_error_str(&err).s);
  assert_content(out, "from b\n");
  cr_assert_eq(n_temps(dir), 0);
  free(out);
  free(dir);
}

/* A signal while a temporary is open: the product's handler calls
 * atomic_file_cleanup_on_signal() and exits 75; the temporary is gone and
 * the old file untouched. The child says when its temporary exists (a byte
 * on a pipe), so the signal always arrives mid-write. */
static void stop_now(int sig) {
  (void)sig;
  atomic_file_cleanup_on_signal();
  _exit(75);
}

Test(atomic_file, signal_removes_the_temporary) {
  char *dir = tu_tmpdir("af_signal"), *out = join(dir, "report.html");
  free(tu_write(dir, "report.html", "old\n"));
  int p[2];
  cr_assert_eq(pipe(p), 0);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    struct sigaction sa = {.sa_handler = stop_now};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    /* three at once, one already committed and one aborted: only the
     * open ones are left for the handler */
    struct atomic_file a, b, c, d;
    struct se3_error e = {0};
    char *o2 = join(dir, "hits.csv"), *o3 = join(dir, "hits.sdf"), *o4 = join(dir, "x.csv");
    if (atomic_file_open(&a, out, &e) || atomic_file_open(&b, o2, &e) || atomic_file_open(&c, o3, &e) ||
        atomic_file_open(&d, o4, &e))
      _exit(1);
    fputs("half a page", a.f);
    fflush(a.f);
    if (atomic_file_commit(&c, &e)) _exit(1);
    atomic_file_abort(&d);
    if (write(p[1], "r", 1) != 1) _exit(1);
    for (;;)
      pause();
  }
  close(p[1]);
  char c;
  cr_assert_eq(read(p[0], &c, 1), 1, "the child failed before its temporaries were open");
  cr_assert_eq(n_temps(dir), 2, "the two open temporaries exist before the signal");
  kill(pid, SIGTERM);
  int st = 0;
  cr_assert_eq(waitpid(pid, &st, 0), pid);
  cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 75, "status %d", st);
  cr_assert_eq(n_temps(dir), 0, "a temporary outlived the signal");
  assert_content(out, "old\n");
  char *sdf = join(dir, "hits.sdf");
  assert_content(sdf, ""); /* committed before the signal: kept */
  free(sdf);
  close(p[0]);
  free(out);
  free(dir);
}

/* atomic_file_same: the same file however it is named (another spelling of
 * the path, a hard link, a symbolic link to it), and a companion that does
 * not exist yet by its folder and name; different files are different. */
Test(atomic_file, same_file_by_device_and_inode) {
  char *dir = tu_tmpdir("af_same"), *db = join(dir, "screen.db");
  free(tu_write(dir, "screen.db", "db"));
  free(tu_write(dir, "other.db", "db"));
  char *hard = join(dir, "hard.html"), *soft = join(dir, "soft.html"), *dotted = join(dir, "./screen.db");
  char *wal = join(dir, "screen.db-wal"), *wal2 = join(dir, "./screen.db-wal"), *other = join(dir, "other.db");
  cr_assert_eq(link(db, hard), 0);
  cr_assert_eq(symlink("screen.db", soft), 0);
  cr_assert_eq(atomic_file_same(db, db), 1);
  cr_assert_eq(atomic_file_same(dotted, db), 1);
  cr_assert_eq(atomic_file_same(hard, db), 1);
  cr_assert_eq(atomic_file_same(soft, db), 1);
  cr_assert_eq(atomic_file_same(wal2, wal), 1, "a file not yet there, by folder and name");
  cr_assert_eq(atomic_file_same(other, db), 0);
  cr_assert_eq(atomic_file_same(wal, db), 0);
  /* the list form names what it refuses */
  struct atomic_file_keep k = {0};
  cr_assert_eq(atomic_file_keep_add(&k, other), 0);
  cr_assert_eq(atomic_file_keep_add(&k, db), 0);
  struct se3_error err = {0};
  cr_assert_eq(atomic_file_check_keep(&k, hard, &err), -1);
  cr_assert_eq(err.kind, SE3_ERR_USAGE, "an output that is an input is the command line's: kind %d", (int)err.kind);
  cr_assert(strstr(se3_error_str(&err).s, hard) && strstr(se3_error_str(&err).s, db), "%s", se3_error_str(&err).s);
  cr_assert_eq(atomic_file_check_keep(&k, wal, &err), 0, "%s", se3_error_str(&err).s);
  atomic_file_keep_free(&k);
  cr_assert_eq(k.n, 0);
  free(other);
  free(wal2);
  free(wal);
  free(dotted);
  free(soft);
  free(hard);
  free(db);
  free(dir);
}
