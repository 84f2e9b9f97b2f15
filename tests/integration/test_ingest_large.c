/* Ingest of records that carry a lot of SD data (issue 30, defect 2).
 *
 * A record's request to a parser process and the molecule it sends back both
 * hold every SD tag, so records of 100 KB and more are bigger than a pipe's
 * buffer. Ingest once deadlocked on two such records in a row: the supervisor
 * blocked writing the second record while its worker blocked writing the
 * answer for the first, and timeout_s never fired. Each run here is watched:
 * a run that has not ended by itself within RUN_LIMIT_S is killed and the test
 * fails, instead of hanging. Every record must come out stored, its last tag
 * (a label written after the bulk data) intact: a long SD tag is ordinary
 * data, far below the documented cap (max_record_bytes, 16 MiB).
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/testutil.h"

#define RUN_LIMIT_S 120.0

/* Ethanol with hydrogens and 3D coordinates (Å). */
static const char ETHANOL[] =
    "  se3test  3D\n\n"
    "  9  8  0  0  0  0  0  0  0  0999 V2000\n"
    "   -0.9290    0.2960    0.0000 C   0  0  0  0  0  0  0  0  0  0  0  0\n"
    "    0.4950   -0.2360    0.0000 C   0  0  0  0  0  0  0  0  0  0  0  0\n"
    "    1.3690    0.8800    0.0000 O   0  0  0  0  0  0  0  0  0  0  0  0\n"
    "   -1.5670   -0.5860    0.0000 H   0  0  0  0  0  0  0  0  0  0  0  0\n"
    "   -1.1080    0.9060    0.8870 H   0  0  0  0  0  0  0  0  0  0  0  0\n"
    "   -1.1080    0.9060   -0.8870 H   0  0  0  0  0  0  0  0  0  0  0  0\n"
    "    0.6770   -0.8500    0.8870 H   0  0  0  0  0  0  0  0  0  0  0  0\n"
    "    0.6770   -0.8500   -0.8870 H   0  0  0  0  0  0  0  0  0  0  0  0\n"
    "    2.2720    0.5370    0.0000 H   0  0  0  0  0  0  0  0  0  0  0  0\n"
    "  1  2  1  0\n  2  3  1  0\n  1  4  1  0\n  1  5  1  0\n  1  6  1  0\n"
    "  2  7  1  0\n  2  8  1  0\n  3  9  1  0\n"
    "M  END\n";

/* An SD file of n ethanol records named big_1.. big_n, each with `bytes` of
 * SD data in n_tags tags (each value one line of letters), then a tag
 * <score> = record number + 0.5, read back as a label. */
static void write_sdf(const char *path, int n, size_t bytes, int n_tags) {
  FILE *f = fopen(path, "w");
  cr_assert(f, "%s: %s", path, strerror(errno));
  size_t per = bytes / (size_t)n_tags;
  char *val = malloc(per + 1);
  cr_assert(val);
  for (size_t i = 0; i < per; i++) val[i] = (char)('A' + (i * 7 + i / 61) % 26);
  val[per] = 0;
  for (int r = 1; r <= n; r++) {
    fprintf(f, "big_%d\n%s", r, ETHANOL);
    for (int t = 0; t < n_tags; t++) {
      fprintf(f, ">  <data_%d>\n", t);
      cr_assert_eq(fwrite(val, 1, per, f), per);
      fputs("\n\n", f);
    }
    fprintf(f, ">  <score>\n%d.5\n\n$$$$\n", r);
  }
  cr_assert_eq(fclose(f), 0);
  free(val);
}

/* Runs `se3screen run wf`, killing it (and so its parser processes, which die
 * with it) if it has not ended by itself within limit_s. Returns its exit
 * status, or -1 when it had to be killed; *took its wall time. */
static int run_watched(const char *dir, const char *wf, double limit_s, double *took) {
  char log[1100];
  snprintf(log, sizeof log, "%s/run.log", dir);
  char *argv[] = {"se3screen", "run", (char *)wf, "--set", "run.progress=none", NULL};
  double t0 = tu_now();
  int pid = tu_spawn_se3(log, argv);
  int st = 0;
  for (;;) {
    pid_t r = waitpid((pid_t)pid, &st, WNOHANG);
    cr_assert_geq(r, 0, "waitpid: %s", strerror(errno));
    if (r == (pid_t)pid) break;
    if (tu_now() - t0 > limit_s) {
      kill((pid_t)pid, SIGKILL);
      waitpid((pid_t)pid, &st, 0);
      *took = tu_now() - t0;
      return -1;
    }
    tu_sleep(0.02);
  }
  *took = tu_now() - t0;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

struct layout {
  const char *file;
  size_t bytes;
  int n_tags;
};

/* Ingests every file of `files` (one set each) with `workers` parser
 * processes; each must give n_rec molecules and no reject. */
static double ingest_all(const char *dir, const struct layout *files, int n_files, int n_rec, int workers) {
  char yaml[4096];
  int len = snprintf(yaml, sizeof yaml, "workflow: t\nworkdir: work-w%d\nsets:\n", workers);
  for (int i = 0; i < n_files; i++)
    len += snprintf(yaml + len, sizeof yaml - (size_t)len, "  s%d:\n    - {path: %s, labels: [score]}\n", i,
                    files[i].file);
  snprintf(yaml + len, sizeof yaml - (size_t)len, "stages:\n  ingest: {gen3d: never, workers: %d, timeout_s: 30}\n",
           workers);
  char name[64];
  snprintf(name, sizeof name, "wf-w%d.yaml", workers);
  char *wf = tu_write(dir, name, yaml);
  double took = 0;
  int rc = run_watched(dir, wf, RUN_LIMIT_S, &took);
  char logp[1100];
  snprintf(logp, sizeof logp, "%s/run.log", dir);
  char *log = tu_read(logp, NULL);
  cr_assert_neq(rc, -1, "%d records x %d files, workers: %d: the run had not ended after %.0f s (hung; killed)\n%s",
                n_rec, n_files, workers, took, log ? log : "");
  cr_assert_eq(rc, 0, "%d records, workers: %d: exit %d\n%s", n_rec, workers, rc, log ? log : "");
  free(log);
  cr_log_info("%d records x %d files, workers: %d: %.2f s", n_rec, n_files, workers, took);
  char db[1100];
  snprintf(db, sizeof db, "%s/work-w%d/screen.db", dir, workers);
  for (int i = 0; i < n_files; i++) {
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT (SELECT count(*) FROM molecules WHERE set_name='s%d') || '|' || "
             "(SELECT count(*) FROM rejects WHERE set_name='s%d') || '|' || "
             "(SELECT count(*) FROM molecules m JOIN labels l ON l.mol_id=m.id WHERE m.set_name='s%d' AND "
             "l.name='score' AND l.value = m.record_no + 0.5 AND m.name = 'big_' || m.record_no "
             "AND m.n_atoms = 9)",
             i, i, i);
    char *got = tu_query(db, sql);
    char want[64];
    snprintf(want, sizeof want, "%d|0|%d\n", n_rec, n_rec);
    char *rej = tu_query(db, "SELECT set_name, record_no, reason FROM rejects LIMIT 5");
    cr_assert(got && strcmp(got, want) == 0,
              "%s (%zu bytes of SD data a record in %d tag(s)), workers: %d: molecules|rejects|intact = %s, "
              "want %s; rejects: %s",
              files[i].file, files[i].bytes, files[i].n_tags, workers, got ? got : "(error)", want, rej ? rej : "");
    free(rej);
    free(got);
  }
  cr_assert_eq(tu_sh(NULL, "rm -rf %s/work-w%d", dir, workers), 0);
  free(wf);
  return took;
}

/* Writes files[0..n) with n_rec records each, into dir. */
static void write_all(const char *dir, const struct layout *files, int n, int n_rec) {
  for (int i = 0; i < n; i++) {
    char path[1100];
    snprintf(path, sizeof path, "%s/%s", dir, files[i].file);
    write_sdf(path, n_rec, files[i].bytes, files[i].n_tags);
  }
}

/* The sizes and layouts: 100 KB, 1 MB and 10 MB of SD data a record, in one
 * tag or in tags of 1 KB. */
static const struct layout SIZES[] = {
    {"one-100k.sdf", 100 << 10, 1}, {"many-100k.sdf", 100 << 10, 100}, {"one-1m.sdf", 1 << 20, 1},
    {"many-1m.sdf", 1 << 20, 1000}, {"one-10m.sdf", 10 << 20, 1},      {"many-10m.sdf", 10 << 20, 10000},
};

/* n_rec records of every size and layout: the 100 KB and 1 MB files with one
 * worker and with two; of the 10 MB files (most of the time), the one-tag
 * file with `one_tag_workers` workers and the many-tag file with the other
 * count. */
static void sizes_case(const char *tmpname, int n_rec, int one_tag_workers) {
  char *dir = tu_tmpdir(tmpname);
  write_all(dir, SIZES, 6, n_rec);
  for (int workers = 1; workers <= 2; workers++) {
    struct layout files[5];
    memcpy(files, SIZES, 4 * sizeof *files);
    files[4] = SIZES[workers == one_tag_workers ? 4 : 5];
    ingest_all(dir, files, 5, n_rec, workers);
  }
  cr_assert_eq(tu_sh(NULL, "rm -rf %s", dir), 0);
  free(dir);
}

/* 2 records a file. */
Test(ingest_large, two_records_100k_to_10m) { sizes_case("ingest_large_2", 2, 1); }

/* 10 records a file (the 10 MB ones are 100 MB files). */
Test(ingest_large, ten_records_100k_to_10m) { sizes_case("ingest_large_10", 10, 2); }

/* 1,000 records of 100 KB each (100 MB of input) in one run. */
Test(ingest_large, thousand_records_of_100k) {
  char *dir = tu_tmpdir("ingest_large_1000");
  struct layout files[] = {{"k-100k.sdf", 100 << 10, 1}};
  char path[1100];
  snprintf(path, sizeof path, "%s/%s", dir, files[0].file);
  write_sdf(path, 1000, files[0].bytes, files[0].n_tags);
  ingest_all(dir, files, 1, 1000, 2);
  cr_assert_eq(tu_sh(NULL, "rm -rf %s", dir), 0);
  free(dir);
}
