/* Checkpoints: named arrays round-trip exactly; a torn, truncated, corrupted
 * or foreign file is refused with a message; an abandoned write leaves the
 * old checkpoint as it was. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "models/checkpoint.h"
#include "tests/testutil.h"

static char *ck_path(const char *name) {
  char *dir = tu_tmpdir(name), *p = NULL;
  cr_assert_geq(asprintf(&p, "%s/model.ckpt", dir), 0);
  free(dir);
  return p;
}

static void write_ck(const char *path, float scale) {
  struct se3_ckpt_writer w;
  struct se3_error err;
  cr_assert_eq(se3_ckpt_begin(&w, path, &err), 0, "%s", se3_error_str(&err).s);
  float p[1000];
  for (int i = 0; i < 1000; i++)
    p[i] = scale * sinf((float)i) * 1e3f;
  p[7] = -0.0f;
  p[8] = INFINITY;
  double best = 0.125 * scale;
  int64_t step = -42, order[5] = {4, 2, 0, 1, 3};
  uint8_t rng[3] = {1, 2, 255};
  se3_ckpt_put(&w, "params", SE3_CK_F32, p, 1000);
  se3_ckpt_put(&w, "best", SE3_CK_F64, &best, 1);
  se3_ckpt_put(&w, "step", SE3_CK_I64, &step, 1);
  se3_ckpt_put(&w, "order", SE3_CK_I64, order, 5);
  se3_ckpt_put(&w, "rng", SE3_CK_U8, rng, 3);
  se3_ckpt_put(&w, "empty", SE3_CK_F32, NULL, 0);
  cr_assert_eq(se3_ckpt_commit(&w, &err), 0, "%s", se3_error_str(&err).s);
}

Test(checkpoint, named_arrays_round_trip_exactly) {
  char *path = ck_path("ckpt_roundtrip");
  write_ck(path, 1);
  struct se3_ckpt c;
  struct se3_error err;
  cr_assert_eq(se3_ckpt_load(&c, path, &err), 0, "%s", se3_error_str(&err).s);
  cr_assert_eq(c.n_rec, 6);
  float p[1000];
  cr_assert_eq(se3_ckpt_get(&c, "params", SE3_CK_F32, p, 1000), 0);
  for (int i = 0; i < 1000; i++) {
    float want = i == 7 ? -0.0f : i == 8 ? INFINITY : sinf((float)i) * 1e3f;
    cr_assert(memcmp(&p[i], &want, 4) == 0, "params[%d]: %g, wrote %g", i, p[i], want);
  }
  double best;
  int64_t step, order[5];
  uint8_t rng[3];
  cr_assert_eq(se3_ckpt_get(&c, "best", SE3_CK_F64, &best, 1), 0);
  cr_assert_eq(best, 0.125);
  cr_assert_eq(se3_ckpt_get(&c, "step", SE3_CK_I64, &step, 1), 0);
  cr_assert_eq(step, -42);
  cr_assert_eq(se3_ckpt_get(&c, "order", SE3_CK_I64, order, 5), 0);
  cr_assert_eq(order[0], 4);
  cr_assert_eq(order[4], 3);
  cr_assert_eq(se3_ckpt_get(&c, "rng", SE3_CK_U8, rng, 3), 0);
  cr_assert_eq(rng[2], 255);
  cr_assert_eq(se3_ckpt_get(&c, "missing", SE3_CK_F32, p, 1), -1);
  cr_assert_eq(se3_ckpt_get(&c, "params", SE3_CK_F64, p, 1000), -1, "wrong type");
  cr_assert_eq(se3_ckpt_get(&c, "params", SE3_CK_F32, p, 999), -1, "wrong count");
  cr_assert_not_null(se3_ckpt_find(&c, "empty"));
  se3_ckpt_free(&c);
  /* no temporary file is left behind */
  char *ls = NULL;
  tu_sh(&ls, "ls %s.tmp-* 2>/dev/null | wc -l", path);
  cr_assert_eq(atoi(ls), 0);
  free(ls);
  free(path);
}

Test(checkpoint, damaged_files_are_refused_by_name) {
  char *path = ck_path("ckpt_damaged");
  write_ck(path, 1);
  size_t len = 0;
  char *good = tu_read(path, &len);
  struct se3_error err;
  struct se3_ckpt c;
  const struct {
    const char *what, *want;
    size_t pos, cut;
  } cases[] = {
      {"a flipped byte", "checksum", 100, 0},
      {"cut short", "cut short", 0, 40},
      {"another file", "not a se3screen checkpoint", 0, 0},
  };
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    char *bad = malloc(len);
    memcpy(bad, good, len);
    size_t n = len - cases[k].cut;
    if (k == 0) bad[cases[k].pos] ^= 0x10;
    if (k == 2) memcpy(bad, "GIF8", 4);
    FILE *f = fopen(path, "wb");
    fwrite(bad, 1, n, f);
    fclose(f);
    cr_assert_eq(se3_ckpt_load(&c, path, &err), -1, "%s was accepted", cases[k].what);
    cr_assert(strstr(se3_error_str(&err).s, path) && strstr(se3_error_str(&err).s, cases[k].want), "%s: %s",
              cases[k].what, se3_error_str(&err).s);
    free(bad);
  }
  free(good);
  free(path);
}

/* ---- a stranger's checkpoint (issue 51) ------------------------------------------ */

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "common/le.h"
#include "models/model_file.h"

/* The writer caps names at 255 bytes; the reader copied the stored length
 * into a 256-byte name unchecked (malloc(): invalid size, exit 134). */
Test(checkpoint, a_record_name_past_255_bytes_is_refused_not_copied) {
  char *path = ck_path("ckpt_long_name");
  write_ck(path, 1);
  tu_ckpt_append_record(path, 300);
  struct se3_ckpt c;
  struct se3_error err;
  cr_assert_eq(se3_ckpt_load(&c, path, &err), -1);
  cr_assert(strstr(se3_error_str(&err).s, path) &&
                strstr(se3_error_str(&err).s, "record 7: its name is 300 bytes long (1 to 255 allowed)"),
            "%s", se3_error_str(&err).s);
  /* at the bound it is a record like any other */
  write_ck(path, 1);
  tu_ckpt_append_record(path, 255);
  cr_assert_eq(se3_ckpt_load(&c, path, &err), 0, "%s", se3_error_str(&err).s);
  cr_assert_eq(c.n_rec, 7);
  se3_ckpt_free(&c);
  free(path);
}

/* Two records of one name, an unprintable name, more records than the
 * format allows: refused, named. */
Test(checkpoint, names_are_unique_and_printable) {
  char *path = ck_path("ckpt_names");
  struct se3_ckpt_writer w;
  struct se3_error err;
  float x = 1;
  cr_assert_eq(se3_ckpt_begin(&w, path, &err), 0, "%s", se3_error_str(&err).s);
  se3_ckpt_put(&w, "params", SE3_CK_F32, &x, 1);
  se3_ckpt_put(&w, "params", SE3_CK_F32, &x, 1);
  cr_assert_eq(se3_ckpt_commit(&w, &err), 0, "%s", se3_error_str(&err).s);
  struct se3_ckpt c;
  cr_assert_eq(se3_ckpt_load(&c, path, &err), -1);
  cr_assert(strstr(se3_error_str(&err).s, "record \"params\" appears twice"), "%s", se3_error_str(&err).s);
  cr_assert_eq(se3_ckpt_begin(&w, path, &err), 0, "%s", se3_error_str(&err).s);
  se3_ckpt_put(&w, "bad name", SE3_CK_F32, &x, 1);
  cr_assert_eq(se3_ckpt_commit(&w, &err), 0, "%s", se3_error_str(&err).s);
  cr_assert_eq(se3_ckpt_load(&c, path, &err), -1);
  cr_assert(strstr(se3_error_str(&err).s, "record 1: its name has the byte 0x20"), "%s", se3_error_str(&err).s);
  cr_assert_eq(se3_ckpt_begin(&w, path, &err), 0, "%s", se3_error_str(&err).s);
  for (int i = 0; i <= SE3_CKPT_MAX_RECORDS; i++) {
    char name[16];
    snprintf(name, sizeof name, "r%d", i);
    se3_ckpt_put(&w, name, SE3_CK_U8, NULL, 0);
  }
  cr_assert_eq(se3_ckpt_commit(&w, &err), 0, "%s", se3_error_str(&err).s);
  cr_assert_eq(se3_ckpt_load(&c, path, &err), -1);
  cr_assert(strstr(se3_error_str(&err).s, "more than 1024 records"), "%s", se3_error_str(&err).s);
  free(path);
}

/* A FIFO would block the open (no writer ever comes), a device would be
 * read forever: both refused, named, before anything is read. */
Test(checkpoint, a_fifo_or_a_device_is_refused_before_reading, .timeout = 20) {
  char *dir = tu_tmpdir("ckpt_fifo"), *fifo = NULL;
  cr_assert_geq(asprintf(&fifo, "%s/model.ckpt", dir), 0);
  cr_assert_eq(mkfifo(fifo, 0600), 0);
  struct se3_ckpt c;
  struct se3_error err;
  cr_assert_eq(se3_ckpt_load(&c, fifo, &err), -1);
  cr_assert(strstr(se3_error_str(&err).s, fifo) && strstr(se3_error_str(&err).s, "not a regular file (a FIFO)"), "%s",
            se3_error_str(&err).s);
  cr_assert_eq(se3_ckpt_load(&c, "/dev/zero", &err), -1);
  cr_assert(strstr(se3_error_str(&err).s, "/dev/zero: not a regular file (a device)"), "%s", se3_error_str(&err).s);
  cr_assert_eq(se3_ckpt_load(&c, dir, &err), -1);
  cr_assert(strstr(se3_error_str(&err).s, "a folder"), "%s", se3_error_str(&err).s);
  free(fifo);
  free(dir);
}

static long max_rss_kb(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

/* A sparse file of 1 GiB: read whole before its magic was checked (1.08 GB
 * RSS). Now the header and the size are checked first; and a file shaped
 * like a checkpoint, header, records and trailer, is held to what its
 * architecture needs before it is read. */
Test(checkpoint, a_large_file_is_checked_before_it_is_read) {
  char *path = ck_path("ckpt_sparse");
  const off_t gib = (off_t)1 << 30;
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  cr_assert_geq(fd, 0);
  cr_assert_eq(ftruncate(fd, gib), 0);
  close(fd);
  long before = max_rss_kb();
  struct se3_ckpt c;
  struct se3_error err;
  cr_assert_eq(se3_ckpt_load(&c, path, &err), -1);
  cr_assert(strstr(se3_error_str(&err).s, "not a se3screen checkpoint"), "%s", se3_error_str(&err).s);
  /* a header, a small "arch", one "params" record filling the rest, the end
   * marker: its checksum would need the whole file, its size is refused
   * first */
  const char *arch = "layers=1 degrees=2 channels=4 heads=2 channels_div=2 node_in=6 edge_in=6 radial_hidden=8 "
                     "mlp_hidden=8 pool_max=1 outputs=1";
  uint8_t head[8 + 2 + 4 + 10 + 256 + 2 + 6 + 10];
  size_t n = 0, al = strlen(arch);
  memcpy(head, "SE3C\x01\x00\x00\x00", 8);
  n = 8;
  le_put_u16(head + n, 4);
  memcpy(head + n + 2, "arch", 4);
  head[n + 6] = SE3_CK_U8;
  head[n + 7] = 0;
  le_put_u64(head + n + 8, al);
  memcpy(head + n + 16, arch, al);
  n += 16 + al;
  uint64_t rest = ((uint64_t)gib - 12 - n - 18) / 4;
  le_put_u16(head + n, 6);
  memcpy(head + n + 2, "params", 6);
  head[n + 8] = SE3_CK_F32;
  head[n + 9] = 0;
  le_put_u64(head + n + 10, rest);
  n += 18;
  fd = open(path, O_WRONLY);
  cr_assert_eq(pwrite(fd, head, n, 0), (ssize_t)n);
  uint8_t tail[12] = "END!";
  cr_assert_eq(pwrite(fd, tail, 12, (off_t)(n + rest * 4)), 12);
  cr_assert_eq(ftruncate(fd, (off_t)(n + rest * 4 + 12)), 0);
  close(fd);
  struct se3_model_file mf;
  struct se3_model_expect ex = {.edge_in = 6, .outputs = 1};
  cr_assert_eq(se3_model_file_read(path, &ex, 1, &mf, NULL, &err), -1);
  cr_assert(strstr(se3_error_str(&err).s, path) && strstr(se3_error_str(&err).s, "record \"params\": ") &&
                strstr(se3_error_str(&err).s, "values, expected"),
            "%s", se3_error_str(&err).s);
  long grown = max_rss_kb() - before;
  cr_assert_lt(grown, 64 * 1024, "reading the two files took %ld kB of memory", grown);
  unlink(path);
  free(path);
}

/* The file read whole must be the file whose headers were checked: a
 * checkpoint replaced in place between the two (same size, its checksum
 * right) is refused, not half of each used. */
Test(checkpoint, a_file_changed_between_open_and_read_is_refused) {
  char *path = ck_path("ckpt_changed");
  write_ck(path, 1);
  struct se3_ckpt c;
  struct se3_error err;
  cr_assert_eq(se3_ckpt_open(&c, path, 0, &err), 0, "%s", se3_error_str(&err).s);
  const struct se3_ckpt_record *best = se3_ckpt_find(&c, "best");
  cr_assert(best && best->data, "a small record is read by the open");
  /* the same records, other values (write_ck's scale), written in place */
  char *other = ck_path("ckpt_changed_other");
  write_ck(other, 2);
  size_t len = 0;
  char *bytes = tu_read(other, &len);
  int fd = open(path, O_WRONLY);
  cr_assert_eq(pwrite(fd, bytes, len, 0), (ssize_t)len);
  close(fd);
  cr_assert_eq(se3_ckpt_read(&c, &err), -1);
  cr_assert(strstr(se3_error_str(&err).s, "the file changed while it was read"), "%s", se3_error_str(&err).s);
  free(bytes);
  free(other);
  free(path);
}

/* A write that is abandoned (or a process killed before the rename) leaves
 * the previous checkpoint intact; a committed one replaces it. */
Test(checkpoint, replacement_is_atomic) {
  char *path = ck_path("ckpt_atomic");
  write_ck(path, 1);
  struct se3_ckpt_writer w;
  struct se3_error err;
  cr_assert_eq(se3_ckpt_begin(&w, path, &err), 0, "%s", se3_error_str(&err).s);
  float junk[10] = {0};
  se3_ckpt_put(&w, "params", SE3_CK_F32, junk, 10);
  se3_ckpt_abort(&w);
  struct se3_ckpt c;
  cr_assert_eq(se3_ckpt_load(&c, path, &err), 0, "%s", se3_error_str(&err).s);
  cr_assert_not_null(se3_ckpt_find(&c, "order"), "the old checkpoint was damaged");
  se3_ckpt_free(&c);
  /* a killed writer: the temporary file is there, the checkpoint is the old one */
  pid_t pid = fork();
  if (pid == 0) {
    struct se3_ckpt_writer w2;
    struct se3_error e2;
    if (se3_ckpt_begin(&w2, path, &e2) == 0) {
      se3_ckpt_put(&w2, "params", SE3_CK_F32, junk, 10);
      fflush(w2.af.f);
    }
    _exit(9); /* no commit */
  }
  cr_assert_eq(tu_wait(pid), 9);
  cr_assert_eq(se3_ckpt_load(&c, path, &err), 0, "%s", se3_error_str(&err).s);
  double best;
  cr_assert_eq(se3_ckpt_get(&c, "best", SE3_CK_F64, &best, 1), 0);
  cr_assert_eq(best, 0.125);
  se3_ckpt_free(&c);
  write_ck(path, 2);
  cr_assert_eq(se3_ckpt_load(&c, path, &err), 0, "%s", se3_error_str(&err).s);
  cr_assert_eq(se3_ckpt_get(&c, "best", SE3_CK_F64, &best, 1), 0);
  cr_assert_eq(best, 0.25, "the new checkpoint did not replace the old one");
  se3_ckpt_free(&c);
  free(path);
}

/* ---- the atomic-write helper (common/atomic_file.h) ---------------------------- */

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "common/atomic_file.h"
#include "common/error.h"

static int n_temps(const char *path) {
  char *ls = NULL;
  tu_sh(&ls, "ls -d %s.tmp-* 2>/dev/null | wc -l", path);
  int n = atoi(ls);
  free(ls);
  return n;
}

static void assert_content(const char *path, const char *want) {
  size_t n = 0;
  char *got = tu_read(path, &n);
  cr_assert_not_null(got, "%s missing", path);
  cr_assert_eq(n, strlen(want), "%s: %zu bytes, want %zu", path, n, strlen(want));
  cr_assert_str_eq(got, want);
  free(got);
}

Test(atomic_file, writes_and_replaces_without_leaving_a_temporary) {
  char *dir = tu_tmpdir("atomic_ok"), *path = NULL;
  cr_assert_geq(asprintf(&path, "%s/hits.csv", dir), 0);
  struct se3_error err = {0};
  cr_assert_eq(atomic_file_write(path, "first\n", 6, &err), 0, "%s", se3_error_str(&err).s);
  assert_content(path, "first\n");
  /* the streaming form replaces it */
  struct atomic_file a;
  cr_assert_eq(atomic_file_open(&a, path, &err), 0, "%s", se3_error_str(&err).s);
  cr_assert_eq(n_temps(path), 1, "the temporary file is beside the target");
  fputs("second, ", a.f);
  fprintf(a.f, "%d\n", 2);
  assert_content(path, "first\n"); /* untouched until the commit */
  cr_assert_eq(atomic_file_commit(&a, &err), 0, "%s", se3_error_str(&err).s);
  cr_assert_null(a.f);
  assert_content(path, "second, 2\n");
  cr_assert_eq(n_temps(path), 0);
  /* abort: the old file stays, the temporary goes */
  cr_assert_eq(atomic_file_open(&a, path, &err), 0, "%s", se3_error_str(&err).s);
  fputs("never", a.f);
  atomic_file_abort(&a);
  assert_content(path, "second, 2\n");
  cr_assert_eq(n_temps(path), 0);
  atomic_file_abort(&a); /* twice is harmless */
  free(path);
  free(dir);
}

/* Failures leave the old file as it was and no temporary behind, with a
 * message naming the file: an unwritable folder (as a non-root user), a
 * missing folder, a write that fails half-way (the file size limit), and a
 * rename that cannot happen (the target is a folder). */
Test(atomic_file, failures_keep_the_old_file) {
  char *dir = tu_tmpdir("atomic_fail"), *path = NULL, *sub = NULL;
  cr_assert_geq(asprintf(&sub, "%s/ro", dir), 0);
  cr_assert_eq(mkdir(sub, 0755), 0);
  cr_assert_geq(asprintf(&path, "%s/hits.sdf", sub), 0);
  struct se3_error err = {0};
  cr_assert_eq(atomic_file_write(path, "old\n", 4, &err), 0, "%s", se3_error_str(&err).s);

  /* an unwritable destination folder: root writes anyway, so only as a user */
  if (geteuid() != 0) {
    cr_assert_eq(chmod(sub, 0555), 0);
    se3_error_clear(&err);
    cr_assert_eq(atomic_file_write(path, "new\n", 4, &err), -1);
    cr_assert(strstr(se3_error_str(&err).s, path) && strstr(se3_error_str(&err).s, "Permission denied"), "%s",
              se3_error_str(&err).s);
    chmod(sub, 0755);
    assert_content(path, "old\n");
    cr_assert_eq(n_temps(path), 0);
  } else {
    cr_log_info("running as root: the unwritable-folder case is covered by the failures below");
  }

  /* a missing folder */
  char *missing = NULL;
  cr_assert_geq(asprintf(&missing, "%s/no/such/dir/x.csv", dir), 0);
  se3_error_clear(&err);
  cr_assert_eq(atomic_file_write(missing, "x", 1, &err), -1);
  cr_assert(strstr(se3_error_str(&err).s, missing) && strstr(se3_error_str(&err).s, "No such file or directory"), "%s",
            se3_error_str(&err).s);
  free(missing);

  /* a write that fails half-way: a child under a 1000-byte file size limit */
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {1000, 1000};
    setrlimit(RLIMIT_FSIZE, &rl);
    static char big[1 << 16];
    memset(big, 'x', sizeof big);
    struct se3_error e = {0};
    int rc = atomic_file_write(path, big, sizeof big, &e);
    _exit(rc == -1 && strstr(se3_error_str(&e).s, path) && strstr(se3_error_str(&e).s, "too large") ? 0 : 1);
  }
  int status = 0;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the half-written file was not refused cleanly");
  assert_content(path, "old\n");
  cr_assert_eq(n_temps(path), 0);

  /* the target is a non-empty folder: refused before anything is written
   * (common/atomic_file.h replaces regular files only) */
  char *folder = NULL, *inside = NULL;
  cr_assert_geq(asprintf(&folder, "%s/taken", dir), 0);
  cr_assert_geq(asprintf(&inside, "%s/keep", folder), 0);
  cr_assert_eq(mkdir(folder, 0755), 0);
  free(tu_write(folder, "keep", "kept"));
  se3_error_clear(&err);
  cr_assert_eq(atomic_file_write(folder, "new", 3, &err), -1);
  cr_assert(strstr(se3_error_str(&err).s, folder) && strstr(se3_error_str(&err).s, "is a folder, not a regular file"),
            "%s", se3_error_str(&err).s);
  assert_content(inside, "kept");
  cr_assert_eq(n_temps(folder), 0);
  free(folder);
  free(inside);
  free(path);
  free(sub);
  free(dir);
}
