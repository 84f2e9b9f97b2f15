/* test_fuzz_ingest.c — mutated molecule files through `se3screen run` (the
 * ingest stage: the record splitter, label columns and tags, Open Babel in
 * its worker processes, the rejects table), a bounded number of runs.
 * tests/unit/test_fuzz.c fuzzes the parsers in-process, thousands of inputs;
 * this is the same generator (tests/fuzz_mutate.h) end to end, a few runs.
 *
 * Each run ingests SE3_FUZZ_INGEST_FILES (default 6) mutated seeds of the
 * molecule formats (with the label columns or tags they carry), and must:
 *   - end by itself, within SE3_FUZZ_INGEST_SECONDS (default 120; the run is
 *     killed after that: a hang), with status 0, or 1 when some non-empty
 *     input yielded no molecule (reported by name): never a signal;
 *   - account for every record: molecules + rejects = the records planned,
 *     every reject with a reason, and every file whose records the splitter
 *     counts has each of them stored or rejected (no file silently dropped).
 * SE3_FUZZ_INGEST_RUNS (default 3) runs; SE3_FUZZ_SEED as in test_fuzz.
 * A failing run keeps its folder (workflow, inputs, screen.db) and names it. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chem/records.h"
#include "common/error.h"
#include "tests/fuzz_mutate.h"
#include "tests/testutil.h"

static double env_num(const char *name, double dflt) {
  const char *s = getenv(name);
  if (!s || !*s) return dflt;
  char *e;
  double v = strtod(s, &e);
  return e != s && v >= 0 ? v : dflt;
}

static const char *const EXT[] = {"bin", "sdf", "mol2", "smi", "csv", "tsv", "xyz", "pdb", "cml"};

Test(fuzz_ingest, mutated_inputs_end_to_end, .timeout = 1200) {
  corpus_load();
  cr_assert_gt(g_n_seeds, 20);
  const char *ss = getenv("SE3_FUZZ_SEED");
  uint64_t seed = ss && *ss ? strtoull(ss, NULL, 0) : 20261125ULL;
  int runs = (int)env_num("SE3_FUZZ_INGEST_RUNS", 3), files = (int)env_num("SE3_FUZZ_INGEST_FILES", 6);
  int limit = (int)env_num("SE3_FUZZ_INGEST_SECONDS", 120);
  double t0 = tu_now();
  for (int run = 0; run < runs; run++) {
    char name[64];
    snprintf(name, sizeof name, "fuzz_ingest_%d", run);
    char *dir = tu_tmpdir(name);
    struct rng r = rng_for(seed, "ingest", (uint64_t)run);
    char *yaml = NULL;
    size_t len = 0;
    FILE *y = open_memstream(&yaml, &len);
    fprintf(y, "workflow: fuzz\nworkdir: %s/work\nsets:\n  s:\n", dir);
    int64_t want_files = 0;
    for (int f = 0; f < files; f++) {
      const struct seed *sd;
      do
        sd = pick_seed(&r, 0);
      while (sd->n > 30000); /* Open Babel's time goes with the size */
      struct buf b = {0};
      buf_set(&b, sd->p, sd->n);
      mutate(&r, &b, 0);
      char path[1200];
      snprintf(path, sizeof path, "%s/in%d.%s", dir, f, EXT[sd->fmt]);
      cr_assert_eq(write_file(path, b.p, b.n), 0);
      free(b.p);
      /* labels: the seeds' own columns and tags, as a user would name them */
      const char *labels = "";
      if (strstr(sd->name, "delaney"))
        labels = ", labels: [logp]";
      else if (strstr(sd->name, "good_bad"))
        labels = ", labels: [ID]"; /* an SD tag of words, not numbers */
      fprintf(y, "    - {path: %s%s}\n", path, labels);
      struct rec_stats st;
      struct se3_error e;
      if (rec_scan(path, sd->fmt, NULL, &st, &e) == 0 && st.n_out > 0) want_files++;
    }
    fprintf(y, "stages:\n  ingest: {workers: 2, gen3d: never, timeout_s: 10}\n");
    fclose(y);
    char *wf = tu_write(dir, "wf.yaml", yaml);
    free(yaml);
    char *out = NULL;
    double r0 = tu_now();
    int rc = tu_sh(&out, "cd %s && timeout -s KILL %d %s run %s --set run.progress=none", dir, limit, SE3_BINARY, wf);
    double took = tu_now() - r0;
    cr_assert(rc == 0 || rc == 1,
              "fuzz_ingest: run %d (seed %llu) ended with status %d after %.1f s (137: killed at the %d s bound, a "
              "hang; > 128: a signal); kept in %s\n%s",
              run, (unsigned long long)seed, rc, took, limit, dir, out);
    char db[1300];
    snprintf(db, sizeof db, "%s/work/screen.db", dir);
    long long planned = tu_query_int(db, "SELECT n_items FROM stage_state WHERE stage='ingest'");
    long long n_mol = tu_query_int(db, "SELECT count(*) FROM molecules");
    long long n_rej = tu_query_int(db, "SELECT count(*) FROM rejects");
    cr_assert_eq(n_mol + n_rej, planned,
                 "fuzz_ingest: run %d (seed %llu): %lld stored + %lld rejected != %lld planned; kept in %s\n%s", run,
                 (unsigned long long)seed, n_mol, n_rej, planned, dir, out);
    cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM rejects WHERE length(trim(reason)) < 4"), 0,
                 "fuzz_ingest: run %d: a reject without a reason; kept in %s", run, dir);
    long long seen = tu_query_int(db, "SELECT count(DISTINCT f) FROM (SELECT source_file AS f FROM molecules "
                                      "UNION ALL SELECT source_file FROM rejects)");
    cr_assert_geq(seen, want_files,
                  "fuzz_ingest: run %d (seed %llu): %lld input files have records, only %lld appear in molecules or "
                  "rejects; kept in %s\n%s",
                  run, (unsigned long long)seed, (long long)want_files, seen, dir, out);
    if (rc == 1)
      cr_assert(strstr(out, "yielded no molecule"), "fuzz_ingest: run %d: status 1 for another reason:\n%s", run, out);
    fprintf(stderr, "fuzz_ingest: run %d: %lld records, %lld stored, %lld rejected, %.1f s\n", run, planned, n_mol,
            n_rej, took);
    free(out);
    free(wf);
    free(dir);
  }
  fprintf(stderr, "fuzz_ingest: %d runs in %.1f s, seed %llu\n", runs, tu_now() - t0, (unsigned long long)seed);
}
