/* Every parser test file we have goes through ingest without the run failing;
 * every reject carries a reason; the Open Babel crashers are rejected in time. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "chem/records.h"
#include "tests/testutil.h"

/* Append every file under dir whose format se3screen knows to the YAML list. */
static void collect(const char *dir, char **yaml, size_t *len, int *n) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    struct stat sb;
    if (lstat(path, &sb) != 0) continue;
    if (S_ISDIR(sb.st_mode)) {
      collect(path, yaml, len, n);
      continue;
    }
    if (!S_ISREG(sb.st_mode) || rec_format_from_path(path) == MOL_FMT_UNKNOWN) continue;
    /* YAML double-quoted scalar. */
    char q[8192];
    size_t k = 0;
    for (const char *p = path; *p && k < sizeof q - 3; p++) {
      if (*p == '"' || *p == '\\') q[k++] = '\\';
      q[k++] = *p;
    }
    q[k] = 0;
    *yaml = realloc(*yaml, *len + k + 32);
    *len += (size_t)sprintf(*yaml + *len, "    - {path: \"%s\"}\n", q);
    (*n)++;
  }
  closedir(d);
}

Test(robustness, all_parser_test_files) {
  if (!tu_have_shared()) cr_skip_test("../shared/data is absent");
  char *dir = tu_tmpdir("robustness_all");
  cr_assert_eq(tu_sh(NULL,
                     "cd %s && for f in %s/data/robustness/*.tar.xz; do tar xJf \"$f\"; done && "
                     "cp %s/data/robustness/rdkit_witch-salts.sdf.gz .",
                     dir, SE3_SHARED_DIR, SE3_SHARED_DIR),
               0);
  char *yaml = NULL;
  size_t len = 0;
  yaml = malloc(256);
  len = (size_t)sprintf(yaml, "workflow: t\nworkdir: %s/work\nsets:\n  r:\n", dir);
  int n = 0;
  collect(dir, &yaml, &len, &n);
  cr_log_info("%d files", n);
  cr_assert_gt(n, 300);
  yaml = realloc(yaml, len + 256);
  sprintf(yaml + len, "stages:\n  ingest: {workers: 2, gen3d_quality: fast, timeout_s: 20}\n");
  char *wf = tu_write(dir, "wf.yaml", yaml);
  char *out = NULL;
  int rc = tu_se3(&out, "run %s --set run.progress=none", wf);
  cr_assert_eq(rc, 0, "run failed (%d):\n%s", rc, out);
  free(out);
  char db[1100];
  snprintf(db, sizeof db, "%s/work/screen.db", dir);
  long long planned = tu_query_int(db, "SELECT n_items FROM stage_state WHERE stage='ingest'");
  long long n_mol = tu_query_int(db, "SELECT count(*) FROM molecules");
  long long n_rej = tu_query_int(db, "SELECT count(*) FROM rejects");
  cr_log_info("%lld records: %lld stored, %lld rejected", planned, n_mol, n_rej);
  cr_assert_eq(n_mol + n_rej, planned, "records lost: %lld + %lld != %lld", n_mol, n_rej, planned);
  cr_assert_gt(n_rej, 0);
  cr_assert_gt(n_mol, 0);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM rejects WHERE length(trim(reason)) < 4"), 0);
  free(wf);
  free(yaml);
  free(dir);
}

/* A record that crashes Open Babel costs that record only (bundled crasher). */
Test(robustness, crash_costs_one_record) {
  char *dir = tu_tmpdir("robustness_crash");
  char yaml[2048];
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: work\nsets:\n  c:\n    - {path: %s}\n    - {path: %s}\n"
           "stages:\n  ingest: {workers: 2}\n",
           tu_src("tests/data/robustness/crash_attr0.mol2"), tu_src("workflows/data/qm9_mini.sdf"));
  char *wf = tu_write(dir, "wf.yaml", yaml);
  char *out = NULL;
  int rc = tu_se3(&out, "run %s --set run.progress=none", wf);
  cr_assert_eq(rc, 0, "run failed (%d):\n%s", rc, out);
  free(out);
  char db[1100];
  snprintf(db, sizeof db, "%s/work/screen.db", dir);
  char *rej = tu_query(db, "SELECT record_no, reason FROM rejects WHERE source_file LIKE '%crash_attr0.mol2'");
  cr_assert_str_eq(rej, "1|Open Babel crashed on this record (signal 11, Segmentation fault)\n");
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM molecules WHERE source_file LIKE '%qm9_mini.sdf'"), 20);
  free(rej);
  free(wf);
  free(dir);
}

/* The known Open Babel crashers and hangs are rejected, in time. */
Test(robustness, crashers_rejected_within_time_limit) {
  if (!tu_have_shared()) cr_skip_test("../shared/data is absent");
  char *dir = tu_tmpdir("robustness_crashers");
  char yaml[2048];
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: work\nsets:\n  c:\n"
           "    - {path: %s/data/robustness/crashers/cve-2026-2705.mol2}\n"
           "    - {path: %s/data/robustness/crashers/canon-deep-recursion.smi}\n"
           "    - {path: %s/data/robustness/crashers/truncated-record.mol2}\n"
           "    - {path: %s}\n"
           "stages:\n  ingest: {workers: 2, timeout_s: 5, max_atoms: 100000}\n",
           SE3_SHARED_DIR, SE3_SHARED_DIR, SE3_SHARED_DIR, tu_src("workflows/data/qm9_mini.sdf"));
  char *wf = tu_write(dir, "wf.yaml", yaml);
  double t0 = tu_now();
  char *out = NULL;
  int rc = tu_se3(&out, "run %s --set run.progress=none", wf);
  double took = tu_now() - t0;
  cr_assert_eq(rc, 0, "run failed (%d):\n%s", rc, out);
  free(out);
  char db[1100];
  snprintf(db, sizeof db, "%s/work/screen.db", dir);
  char *rej = tu_query(db, "SELECT source_file, record_no, reason FROM rejects ORDER BY source_file, record_no");
  cr_log_info("rejects:\n%s", rej);
  cr_assert(strstr(rej, "cve-2026-2705.mol2|1|"), "%s", rej);
  cr_assert(strstr(rej, "canon-deep-recursion.smi|1|"), "%s", rej);
  cr_assert(strstr(rej, "truncated-record.mol2|1|line 8: MOL2 atom line has 4 of its 6 columns"), "%s", rej);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM molecules WHERE source_file LIKE '%crashers%'"), 0);
  /* The good file next to them is whole. */
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM molecules WHERE source_file LIKE '%qm9_mini.sdf'"), 20);
  cr_assert_lt(took, 60, "took %.1f s", took);
  free(rej);
  free(wf);
  free(dir);
}

/* A record that takes longer than timeout_s is rejected as timed out, the
 * worker is restarted, and the records after it are parsed as usual. */
Test(robustness, slow_record_times_out) {
  char *dir = tu_tmpdir("robustness_timeout");
  /* A long flexible chain: thousands of force-field steps take far longer than 0.1 s. */
  char smi[4096] = "";
  strcat(smi, "CCO ethanol\n");
  strcat(smi, "CCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCC(CCCCCCCCCCCCCCCCCCCCCC)CCCCCCCCCCCCCO slow\n");
  strcat(smi, "c1ccccc1 benzene\n");
  free(tu_write(dir, "in.smi", smi));
  char yaml[512];
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: work\nsets:\n  s:\n    - {path: in.smi}\n"
           "stages:\n  ingest: {workers: 1, gen3d_quality: best, timeout_s: 0.1}\n");
  char *wf = tu_write(dir, "wf.yaml", yaml);
  char *out = NULL;
  int rc = tu_se3(&out, "run %s --set run.progress=none", wf);
  cr_assert_eq(rc, 0, "%s", out);
  char db[1100];
  snprintf(db, sizeof db, "%s/work/screen.db", dir);
  char *rej = tu_query(db, "SELECT record_no, name, reason FROM rejects");
  cr_assert(strstr(rej, "2||timed out after 0.1 s"), "%s", rej);
  free(rej);
  /* Every record is accounted for, the slow one is not stored. */
  cr_assert_eq(tu_query_int(db, "SELECT (SELECT count(*) FROM molecules) + (SELECT count(*) FROM rejects)"), 3);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM molecules WHERE name='slow'"), 0);
  free(out);
  free(wf);
  free(dir);
}
