/* main.c — the se3screen command line. Only this file exits. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "common/atomic_file.h"
#include "pipeline/config.h"
#include "pipeline/export.h"
#include "pipeline/fault.h"
#include "pipeline/ledger.h"
#include "pipeline/predict.h"
#include "pipeline/query.h"
#include "pipeline/runner.h"
#include "pipeline/slurm.h"
#include "pipeline/store.h"
#include "pipeline/usage.h"
#include "pipeline/verify.h"
#include "pipeline/run_files.h"
#include "stages/report_page.h"
#include "stages/stage.h"

static int wants_help(int argc, char **argv) {
  for (int i = 2; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return 1;
  return 0;
}

static int usage_error(const char *usage, const char *fmt, const char *arg) {
  fprintf(stderr, "se3screen: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n\n%s", usage);
  return SE3_EXIT_USAGE;
}

/* `report` (and `export`) write one file from a database opened read-only
 * and have nothing to finish: SIGINT, SIGTERM and SIGUSR1 remove the
 * temporary file being written (common/atomic_file.h) and exit 75 at once,
 * the status `run` gives when a signal stops it. Only async-signal-safe
 * calls in the handler. */
static void stop_now(int sig) {
  (void)sig;
  atomic_file_cleanup_on_signal();
  _exit(SE3_EXIT_STOPPED);
}

static void exit_75_on_signals(void) { se3_on_stop_signals(stop_now, 0, NULL); }

static char *join_args(int argc, char **argv) {
  size_t n = 1;
  for (int i = 0; i < argc; i++)
    n += strlen(argv[i]) + 3;
  char *s = calloc(n, 1);
  for (int i = 0; i < argc; i++) {
    if (i) strcat(s, " ");
    strcat(s, argv[i]);
  }
  return s;
}

/* Options shared by run/check/status: --set. Returns the positional argument. */
static int parse_common(int argc, char **argv, const char *usage, const char **pos, const char ***sets, int *n_sets,
                        struct run_opts *ro) {
  *pos = NULL;
  *sets = calloc((size_t)argc, sizeof **sets);
  *n_sets = 0;
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    const char *val = NULL;
    int takes =
        !strcmp(a, "--set") ||
        (ro && (!strcmp(a, "--stage") || !strcmp(a, "--until") || !strcmp(a, "--shard") || !strcmp(a, "--workdir") ||
                (!strcmp(a, "--round") && usage == usage_run)));
    if (takes) {
      if (i + 1 >= argc) return usage_error(usage, "%s needs a value", a);
      val = argv[++i];
    } else if (!strncmp(a, "--set=", 6)) {
      a = "--set";
      val = argv[i] + 6;
    }
    if (val && !strcmp(a, "--set")) {
      if (!strchr(val, '=')) return usage_error(usage, "--set wants KEY=VALUE, got '%s'", val);
      (*sets)[(*n_sets)++] = val;
    } else if (val && !strcmp(a, "--stage")) {
      ro->stage = val;
    } else if (val && !strcmp(a, "--until")) {
      ro->until = val;
    } else if (val && !strcmp(a, "--workdir")) {
      ro->workdir = val;
    } else if (val && !strcmp(a, "--round")) {
      char *end = NULL;
      long long n = strtoll(val, &end, 10);
      if (!end || end == val || *end || n < 0 || n > 100000)
        return usage_error(usage, "--round wants a round number 0 to 100000, got '%s'", val);
      ro->round = n;
      ro->round_given = 1;
    } else if (val && !strcmp(a, "--shard")) {
      int si, sn;
      char extra;
      if (sscanf(val, "%d/%d%c", &si, &sn, &extra) != 2 || sn < 1 || si < 0 || si >= sn)
        return usage_error(usage, "--shard wants I/N with 0 <= I < N, got '%s'", val);
      ro->shard = si;
      ro->n_shards = sn;
    } else if (ro && !strcmp(a, "--dry-run") && usage == usage_run) {
      ro->dry_run = 1;
    } else if (a[0] == '-' && a[1]) {
      return usage_error(usage, "unknown option '%s'", a);
    } else if (!*pos) {
      *pos = a;
    } else {
      return usage_error(usage, "unexpected argument '%s'", a);
    }
  }
  if (!*pos) return usage_error(usage, "%s", "missing the workflow file");
  if (ro && ro->stage && ro->until) return usage_error(usage, "%s", "--stage and --until exclude each other");
  return 0;
}

static int print_version(void) {
  struct stage_platform pi;
  stage_platform_info(&pi);
  printf("se3screen %s\n", SE3_VERSION);
  printf("sqlite %s\n", sqlite3_libversion());
  printf("open babel %s; 3D generation's fallback: %s\n", pi.openbabel,
         pi.gen3d_fallback ? pi.gen3d_fallback
                           : "none (librdkit-dev and libboost-dev and a new build add RDKit's ETKDG)");
  printf("model kernels: %s (widest this processor supports: %s; SE3_ISA=base|avx2|avx512 forces one)\n", pi.isa,
         pi.isa_best);
  printf("bf16: %s\n", pi.bf16 ? "yes (precision: bf16 scores with AVX512-BF16)"
                               : "no (precision: bf16 needs AVX512-BF16, which this processor lacks)");
  printf("openblas: core %s", pi.blas_core);
  if (pi.blas_detected)
    printf(" (OpenBLAS itself detected %s; chosen from the processor's features)", pi.blas_detected);
  else if (pi.blas_forced)
    printf(" (OPENBLAS_CORETYPE=%s is set%s%s%s)", pi.blas_forced, pi.blas_better ? "; this processor could run " : "",
           pi.blas_better ? pi.blas_better : "", pi.blas_better ? ": unset it for faster products" : "");
  printf(", %s\n", pi.blas_config);
  printf("threads: %d (OMP_NUM_THREADS), waiting: %s\n", pi.threads, pi.omp_wait);
  if (strcmp(comm_library(), "none"))
    printf("mpi: %s (data-parallel training under mpirun or srun --mpi=pmix)\n", comm_library());
  else
    printf("mpi: none (this build trains in one process; libopenmpi-dev and a new build add MPI)\n");
  return SE3_EXIT_OK;
}

/* ---- one function a verb ------------------------------------------------ */

static int verb_run(int argc, char **argv) {
  const char *pos = NULL;
  const char **sets = NULL;
  int n_sets = 0;
  int rc;
  struct run_opts ro;
  memset(&ro, 0, sizeof ro);
  if ((rc = parse_common(argc, argv, usage_run, &pos, &sets, &n_sets, &ro))) {
    free(sets);
    return rc;
  }
  ro.workflow = pos;
  ro.sets = sets;
  ro.n_sets = n_sets;
  if (ro.dry_run) {
    rc = runner_dry_run(&ro);
    free(sets);
    return rc;
  }
  char *cl = join_args(argc, argv);
  ro.command_line = cl;
  /* started by mpirun or srun: the processes of one data-parallel run */
  struct se3_comm *comm = NULL;
  struct se3_error why;
  if (comm_open(&comm, &why)) {
    fprintf(stderr, "se3screen: %s\n", se3_error_str(&why).s);
    free(cl);
    free(sets);
    return SE3_EXIT_FAILED;
  }
  ro.comm = comm;
  stage_share_cores(comm);
  rc = runner_run(&ro);
  comm_close(comm);
  free(cl);
  free(sets);
  return rc;
}

static int verb_check(int argc, char **argv) {
  const char *pos = NULL;
  const char **sets = NULL;
  int n_sets = 0;
  int rc;
  /* --no-inputs is check's own: taken out before the options all share */
  int no_inputs = 0, n = 0;
  char **args = calloc((size_t)argc + 1, sizeof *args);
  if (!args) return fprintf(stderr, "se3screen: out of memory\n"), SE3_EXIT_FAILED;
  for (int i = 0; i < argc; i++) {
    if (i >= 2 && !strcmp(argv[i], "--no-inputs") && strcmp(argv[i - 1], "--set"))
      no_inputs = 1;
    else
      args[n++] = argv[i];
  }
  rc = parse_common(n, args, usage_check, &pos, &sets, &n_sets, NULL);
  if (!rc) rc = runner_check(pos, sets, n_sets, no_inputs);
  free(args);
  free(sets);
  return rc;
}

static int verb_predict(int argc, char **argv) {
  const char **sets = NULL;
  int n_sets = 0;
  int rc;
  struct predict_opts po = {.top = 100};
  const char **inputs = calloc((size_t)argc, sizeof *inputs);
  sets = calloc((size_t)argc, sizeof *sets);
  rc = SE3_EXIT_OK;
  if (!inputs || !sets) {
    fprintf(stderr, "se3screen: out of memory\n");
    rc = SE3_EXIT_FAILED;
  }
  for (int i = 2; i < argc && rc == SE3_EXIT_OK; i++) {
    const char *a = argv[i], *v = NULL;
    if (!strncmp(a, "--set=", 6)) {
      a = "--set";
      v = argv[i] + 6;
    } else if (!strcmp(a, "-o") || !strcmp(a, "--top") || !strcmp(a, "--workdir") || !strcmp(a, "--set")) {
      if (i + 1 >= argc) {
        rc = usage_error(usage_predict, "%s needs a value", a);
        break;
      }
      v = argv[++i];
    }
    if (!v) {
      if (a[0] == '-' && a[1])
        rc = usage_error(usage_predict, "unknown option '%s'", a);
      else if (!po.model)
        po.model = a;
      else
        inputs[po.n_inputs++] = a;
    } else if (!strcmp(a, "--set")) {
      if (!strchr(v, '='))
        rc = usage_error(usage_predict, "--set wants KEY=VALUE, got '%s'", v);
      else
        sets[n_sets++] = v;
    } else if (!strcmp(a, "--top")) {
      char *end;
      errno = 0;
      po.top = strtoll(v, &end, 10);
      if (end == v || *end || errno || po.top < 0 || po.top > 1000000000)
        rc = usage_error(usage_predict, "--top needs a whole number from 0 (all) to 1000000000, got '%s'", v);
    } else if (!*v) {
      rc = usage_error(usage_predict, "%s needs a value", a);
    } else if (a[1] == 'o') {
      po.out = v;
    } else {
      po.workdir = v;
    }
  }
  if (rc == SE3_EXIT_OK && !po.model)
    rc = usage_error(usage_predict, "%s", "predict needs MODEL (a checkpoint, a workdir or its models/ folder)");
  else if (rc == SE3_EXIT_OK && !po.n_inputs)
    rc = usage_error(usage_predict, "%s", "predict needs at least one INPUT file after MODEL");
  if (rc == SE3_EXIT_OK) {
    char *cl = join_args(argc, argv);
    po.inputs = inputs;
    po.sets = sets;
    po.n_sets = n_sets;
    po.command_line = cl;
    rc = predict_run(&po);
    free(cl);
  }
  free(inputs);
  free(sets);
  return rc;
}

static int verb_status(int argc, char **argv) {
  const char *pos = NULL;
  const char **sets = NULL;
  int n_sets = 0;
  int rc;
  if ((rc = parse_common(argc, argv, usage_status, &pos, &sets, &n_sets, NULL))) {
    free(sets);
    return rc;
  }
  rc = runner_status(pos, sets, n_sets);
  free(sets);
  return rc;
}

static int verb_upgrade(int argc, char **argv) {
  const char *target = NULL, *workflow = NULL;
  const char **sets = calloc((size_t)argc, sizeof *sets);
  int n_sets = 0;
  if (!sets) return SE3_EXIT_FAILED;
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    if ((!strcmp(a, "--workflow") || !strcmp(a, "--set")) && i + 1 < argc) {
      if (!strcmp(a, "--set")) {
        if (!strchr(argv[i + 1], '=')) {
          free(sets);
          return usage_error(usage_upgrade, "--set wants KEY=VALUE, got '%s'", argv[i + 1]);
        }
        sets[n_sets++] = argv[++i];
      } else {
        workflow = argv[++i];
      }
    } else if (a[0] == '-' && a[1]) {
      free(sets);
      return usage_error(usage_upgrade, "unknown option or missing value: '%s'", a);
    } else if (!target) {
      target = a;
    } else {
      free(sets);
      return usage_error(usage_upgrade, "unexpected argument '%s'", a);
    }
  }
  int rc = !target ? usage_error(usage_upgrade, "%s", "missing the workdir")
           : n_sets && !workflow ? usage_error(usage_upgrade, "%s", "--set goes with --workflow")
                                 : runner_upgrade(target, workflow, sets, n_sets);
  free(sets);
  return rc;
}

static int verb_query(int argc, char **argv) {
  enum query_format fmt = QUERY_TABLE;
  const char *db = NULL, *sql = NULL;
  struct query_limits lim = {QUERY_DEFAULT_TIMEOUT_S, QUERY_DEFAULT_MAX_ROWS, QUERY_DEFAULT_MAX_BYTES};
  for (int i = 2; i < argc; i++) {
    const char *opt = argv[i];
    if (!strcmp(opt, "--timeout") || !strcmp(opt, "--max-rows") || !strcmp(opt, "--max-bytes")) {
      if (i + 1 >= argc) return usage_error(usage_query, "%s needs a value", opt);
      const char *v = argv[++i];
      char *end;
      if (!strcmp(opt, "--timeout")) {
        lim.timeout_s = strtod(v, &end);
        if (end == v || *end || !(lim.timeout_s >= 0) || lim.timeout_s > 1e9)
          return usage_error(usage_query, "--timeout needs seconds >= 0, got '%s'", v);
      } else {
        errno = 0;
        long long n = strtoll(v, &end, 10);
        int shift = *end == 'K' || *end == 'k' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : 0;
        if (shift && opt[6] == 'b') end++;
        if (end == v || *end || n < 0 || errno || n > (LLONG_MAX >> shift))
          return usage_error(usage_query,
                             opt[6] == 'r' ? "--max-rows needs a whole number >= 0, got '%s'"
                                           : "--max-bytes needs a whole number >= 0 (K/M/G allowed), got '%s'",
                             v);
        if (opt[6] == 'r')
          lim.max_rows = n;
        else
          lim.max_bytes = n << shift;
      }
    } else if (!strcmp(argv[i], "--csv"))
      fmt = QUERY_CSV;
    else if (!strcmp(argv[i], "--json"))
      fmt = QUERY_JSON;
    else if (!strcmp(argv[i], "--table"))
      fmt = QUERY_TABLE;
    else if (argv[i][0] == '-' && argv[i][1])
      return usage_error(usage_query, "unknown option '%s'", argv[i]);
    else if (!db)
      db = argv[i];
    else if (!sql)
      sql = argv[i];
    else
      return usage_error(usage_query, "unexpected argument '%s'", argv[i]);
  }
  if (!db || !sql) return usage_error(usage_query, "%s", "query needs DB and SQL");
  char path[4096];
  struct stat sb;
  if (stat(db, &sb) == 0 && S_ISDIR(sb.st_mode))
    snprintf(path, sizeof path, "%s/screen.db", db);
  else
    snprintf(path, sizeof path, "%s", db);
  return query_run(path, sql, fmt, &lim, stdout);
}

/* One number a query gives (the first column of its first row), or -1 with
 * the message printed when the database cannot say. */
static long long top_count(struct query_conn *qc, const char *sql) {
  sqlite3_stmt *st = NULL;
  if (query_prepare_one(qc, sql, &st)) return -1;
  long long n = -1;
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW)
    n = sqlite3_column_int64(st, 0);
  else
    query_step_failed(qc);
  sqlite3_finalize(st);
  return n;
}

/* top on a database without a hit to show says so, and why, rather than
 * print an empty table and succeed: no molecule scored (a workflow that
 * only trains, or one whose score stage has not run), scores but no rank
 * yet, or no hit of the --target asked for. SE3_EXIT_OK when there are
 * hits to show; else an exit code, the message printed. */
static int top_has_hits(const char *path, const char *db, const char *target, int *with_csd, int *with_iso) {
  struct query_conn *qc = NULL;
  int rc = query_open(&qc, path, "se3screen top", QUERY_DEFAULT_TIMEOUT_S);
  if (rc) return rc;
  /* conformer_sd shown where a hit has one (schema 13 on, several conformers) */
  *with_csd = top_count(qc, "SELECT count(*) FROM pragma_table_info('ranked_hits') WHERE name = 'conformer_sd'") > 0 &&
              top_count(qc, "SELECT count(*) FROM ranked_hits WHERE conformer_sd IS NOT NULL") > 0;
  /* and the isomer scored where a hit's input left stereo free (schema 16 on) */
  *with_iso = top_count(qc, "SELECT count(*) FROM pragma_table_info('ranked_hits') WHERE name = 'isomer_smiles'") > 0 &&
              top_count(qc, "SELECT count(*) FROM ranked_hits WHERE isomer_smiles IS NOT NULL") > 0;
  char *sql = target ? sqlite3_mprintf("SELECT count(*) FROM ranked_hits WHERE target = %Q", target)
                     : sqlite3_mprintf("SELECT count(*) FROM ranked_hits");
  long long hits = sql ? top_count(qc, sql) : -1;
  sqlite3_free(sql);
  long long all = hits == 0 && target ? top_count(qc, "SELECT count(*) FROM ranked_hits") : 0;
  long long scores = hits == 0 && all == 0 ? top_count(qc, "SELECT count(*) FROM scores") : 0;
  query_close(qc);
  if (hits < 0 || all < 0 || scores < 0) return SE3_EXIT_FAILED;
  if (hits > 0) return SE3_EXIT_OK;
  if (all > 0)
    fprintf(stderr, "se3screen top: nothing to rank in %s: no hit has target '%s' (`se3screen query %s \"SELECT "
                    "DISTINCT target FROM ranked_hits\"` lists the targets)\n",
            db, target, db);
  else if (scores > 0)
    fprintf(stderr, "se3screen top: nothing to rank in %s yet: %lld molecules are scored, but the rank stage has not "
                    "run (`se3screen status WORKFLOW` says what is left)\n",
            db, scores);
  else
    fprintf(stderr, "se3screen top: nothing to rank in %s: no molecule has been scored (a workflow without a score "
                    "stage has no hits, one that trains scores a library with `se3screen predict %s LIBRARY`; "
                    "`se3screen status WORKFLOW` says which stages are left)\n",
            db, db);
  return SE3_EXIT_FAILED;
}

static int verb_top(int argc, char **argv) {
  int rc;
  enum query_format fmt = QUERY_TABLE;
  const char *db = NULL, *target = NULL;
  long n = 20;
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "--csv"))
      fmt = QUERY_CSV;
    else if (!strcmp(argv[i], "--json"))
      fmt = QUERY_JSON;
    else if ((!strcmp(argv[i], "-n") || !strcmp(argv[i], "--target")) && i + 1 < argc) {
      if (argv[i][1] == 'n') {
        char *end;
        n = strtol(argv[++i], &end, 10);
        if (*end || n < 1) return usage_error(usage_top, "-n needs a positive number, got '%s'", argv[i]);
      } else {
        target = argv[++i];
      }
    } else if (argv[i][0] == '-')
      return usage_error(usage_top, "unknown option '%s'", argv[i]);
    else if (!db)
      db = argv[i];
    else
      return usage_error(usage_top, "unexpected argument '%s'", argv[i]);
  }
  if (!db) return usage_error(usage_top, "%s", "top needs DB");
  char path[4096];
  struct stat sb;
  if (stat(db, &sb) == 0 && S_ISDIR(sb.st_mode))
    snprintf(path, sizeof path, "%s/screen.db", db);
  else
    snprintf(path, sizeof path, "%s", db);
  int with_csd = 0, with_iso = 0;
  if ((rc = top_has_hits(path, db, target, &with_csd, &with_iso)) != SE3_EXIT_OK) return rc;
  char *where = target ? sqlite3_mprintf("WHERE target = %Q", target) : sqlite3_mprintf("%s", "");
  /* Rounded for people in the table; CSV and JSON are for scripts: the
   * numbers as stored (JSON numbers, null for no spread). */
  const char *cols = fmt == QUERY_TABLE ? "printf('%.6g', score) AS score, "
                                          "CASE WHEN std IS NULL THEN '' ELSE printf('%.3g', std) END AS std"
                                        : "score, std";
  const char *csd = !with_csd              ? ""
                    : fmt == QUERY_TABLE ? ", CASE WHEN conformer_sd IS NULL THEN '' ELSE printf('%.3g', conformer_sd) "
                                           "END AS conformer_sd"
                                         : ", conformer_sd";
  const char *iso = !with_iso            ? ""
                    : fmt == QUERY_TABLE ? ", coalesce(isomer_smiles, '') AS isomer_smiles"
                                         : ", isomer_smiles";
  char *sql = sqlite3_mprintf("SELECT rank, name, smiles, target, %s%s, source_file, record_no%s "
                              "FROM ranked_hits %s "
                              "ORDER BY rank LIMIT %ld",
                              cols, csd, iso, where, n);
  sqlite3_free(where);
  struct query_limits lim = {QUERY_DEFAULT_TIMEOUT_S, 0, 0};
  rc = query_run(path, sql, fmt, &lim, stdout);
  sqlite3_free(sql);
  return rc;
}

static int verb_export(int argc, char **argv) {
  struct export_opts eo = {0};
  export_default_bounds(&eo);
  const char *format = NULL;
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--timeout") || !strcmp(a, "--max-rows") || !strcmp(a, "--max-bytes")) {
      if (i + 1 >= argc) return usage_error(usage_export, "%s needs a value", a);
      char why[256];
      if (export_parse_bound(&eo, a, argv[++i], why, sizeof why)) return usage_error(usage_export, "%s", why);
    } else if (!strcmp(a, "--format") || !strcmp(a, "--query") || !strcmp(a, "--top") || !strcmp(a, "-o")) {
      if (i + 1 >= argc) return usage_error(usage_export, "%s needs a value", a);
      const char *v = argv[++i];
      if (!strcmp(a, "--format")) {
        format = v;
      } else if (!strcmp(a, "--query")) {
        eo.query = v;
      } else if (!strcmp(a, "-o")) {
        if (!*v) return usage_error(usage_export, "%s", "-o needs a file name (or - for stdout)");
        eo.out = v;
      } else {
        char *end;
        errno = 0;
        eo.top = strtoll(v, &end, 10);
        if (end == v || *end || errno || eo.top < 1)
          return usage_error(usage_export, "--top needs a whole number >= 1, got '%s'", v);
      }
    } else if (!strcmp(a, "--poses")) {
      eo.poses = 1;
    } else if (a[0] == '-' && a[1]) {
      return usage_error(usage_export, "unknown option '%s'", a);
    } else if (!eo.db) {
      eo.db = a;
    } else {
      return usage_error(usage_export, "unexpected argument '%s'", a);
    }
  }
  if (!eo.db) return usage_error(usage_export, "%s", "export needs DB or WORKDIR");
  if (!format) return usage_error(usage_export, "%s", "export needs --format csv, sdf or smi");
  if (export_parse_format(format, &eo.format))
    return usage_error(usage_export, "unknown --format '%s' (csv, sdf or smi)", format);
  if (!eo.out) return usage_error(usage_export, "%s", "export needs -o FILE (or -o - for stdout)");
  if (eo.query && eo.top) return usage_error(usage_export, "%s", "--query and --top exclude each other");
  if (eo.poses && eo.format != EXPORT_SDF)
    return usage_error(usage_export, "%s", "--poses writes 3D poses: it needs --format sdf");
  return export_run(&eo);
}

static int verb_report(int argc, char **argv) {
  struct report_opts ro = {.top = 50, .depict = 1, .bins = 40, .ledger = &ledger_stage_reads};
  const char *db = NULL, *out = NULL;
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--no-depict")) {
      ro.depict = 0;
    } else if (!strcmp(a, "-o") || !strcmp(a, "--top") || !strcmp(a, "--bins")) {
      if (i + 1 >= argc) return usage_error(usage_report, "%s needs a value", a);
      const char *v = argv[++i];
      if (a[1] == 'o') {
        if (!*v) return usage_error(usage_report, "%s", "-o needs a file name (or - for standard output)");
        out = v;
        continue;
      }
      char *end;
      long n = strtol(v, &end, 10);
      int bins = a[2] == 'b';
      if (*end || !*v || n < (bins ? 5 : 0) || n > (bins ? 500 : 10000))
        return usage_error(usage_report,
                           bins ? "--bins needs a whole number from 5 to 500, got '%s'"
                                : "--top needs a whole number from 0 to 10000, got '%s'",
                           v);
      if (bins)
        ro.bins = (int)n;
      else
        ro.top = (int)n;
    } else if (a[0] == '-' && a[1]) {
      return usage_error(usage_report, "unknown option '%s'", a);
    } else if (!db) {
      db = a;
    } else {
      return usage_error(usage_report, "unexpected argument '%s'", a);
    }
  }
  if (!db) return usage_error(usage_report, "%s", "report needs DB or WORKDIR");
  exit_75_on_signals();
  char path[4096], dflt[4096];
  struct stat sb;
  if (stat(db, &sb) != 0) {
    fprintf(stderr, "se3screen: %s: %s\n", db, strerror(errno));
    return SE3_EXIT_USAGE;
  }
  if (S_ISDIR(sb.st_mode))
    snprintf(path, sizeof path, "%s/screen.db", db);
  else
    snprintf(path, sizeof path, "%s", db);
  if (stat(path, &sb) != 0) {
    fprintf(stderr, "se3screen: %s: %s\n", path, strerror(errno));
    return SE3_EXIT_USAGE;
  }
  if (!out) {
    const char *slash = strrchr(path, '/');
    snprintf(dflt, sizeof dflt, "%.*sreport.html", slash ? (int)(slash - path + 1) : 0, path);
    out = dflt;
  }
  struct se3_error oe;
  /* The database first, as every reading verb opens it: a file that is no
   * se3screen database, or one another process keeps locked, is refused
   * before anything else reads it; held open to the end, the opening also
   * has the folder left as it was found (store.h) */
  struct store st;
  if (ledger_open_ro(&st, path, NULL, &oe)) {
    fprintf(stderr, "se3screen: %s\n", se3_error_str(&oe).s);
    return SE3_EXIT_FAILED;
  }
  if (st.note) fprintf(stderr, "se3screen: note: %s\n", st.note);
  /* -o must not name what the report reads: the database (whose page it
   * would become), its companions, shards, checkpoints, inputs */
  if (run_files_check_output(path, out, &oe)) {
    fprintf(stderr, "se3screen: report -o %s\n", se3_error_str(&oe).s);
    store_close(&st);
    return SE3_EXIT_USAGE;
  }
  int failed = report_write(st.db, path, &ro, out, &oe);
  store_close(&st);
  if (failed) {
    fprintf(stderr, "se3screen: %s\n", se3_error_str(&oe).s);
    return SE3_EXIT_FAILED;
  }
  if (strcmp(out, "-")) fprintf(stderr, "se3screen: wrote %s\n", out);
  return SE3_EXIT_OK;
}

static int verb_merge(int argc, char **argv) {
  if (argc != 3) return usage_error(usage_merge, "%s", "merge needs exactly one DB");
  char path[4096];
  struct stat sb;
  if (stat(argv[2], &sb) == 0 && S_ISDIR(sb.st_mode))
    snprintf(path, sizeof path, "%s/screen.db", argv[2]);
  else
    snprintf(path, sizeof path, "%s", argv[2]);
  return runner_merge(path);
}

static int verb_slurm(int argc, char **argv) {
  int rc;
  /* the options are slurm.* keys: --set slurm.KEY=VALUE, after the user's own --set */
  static const char *const keys[][2] = {{"--partition", "partition"},
                                        {"--account", "account"},
                                        {"--time", "time"},
                                        {"--array-size", "array_size"},
                                        {"--max-running", "max_running"},
                                        {"--nodes", "nodes"},
                                        {"--tasks-per-node", "tasks_per_node"},
                                        {"--gpus-per-task", "gpus_per_task"},
                                        {"--cpus-per-task", "cpus_per_task"},
                                        {"--mem", "mem"},
                                        {"--extra", "extra"}};
  struct slurm_opts so = {0};
  const char **all = calloc((size_t)argc + 1, sizeof *all);
  char **owned = calloc((size_t)argc + 1, sizeof *owned);
  int n_own = 0;
  if (!all || !owned) return fprintf(stderr, "se3screen: out of memory\n"), SE3_EXIT_FAILED;
  rc = SE3_EXIT_OK;
  for (int i = 2; i < argc && rc == SE3_EXIT_OK; i++) {
    const char *a = argv[i];
    size_t k = 0, nk = sizeof keys / sizeof *keys;
    while (k < nk && strcmp(a, keys[k][0]))
      k++;
    if (!strcmp(a, "--submit")) {
      so.submit = 1;
    } else if (!strcmp(a, "--resume")) {
      so.resume = 1;
    } else if (!strcmp(a, "--set") || k < nk) {
      if (i + 1 >= argc) {
        rc = usage_error(usage_slurm, "%s needs a value", a);
        break;
      }
      const char *v = argv[++i];
      if (k == nk) {
        if (!strchr(v, '=')) rc = usage_error(usage_slurm, "--set wants KEY=VALUE, got '%s'", v);
        all[so.n_sets++] = v;
      } else if (asprintf(&owned[n_own], "slurm.%s=%s", keys[k][1], v) >= 0) {
        all[so.n_sets++] = owned[n_own++];
      }
    } else if (a[0] == '-' && a[1]) {
      rc = usage_error(usage_slurm, "unknown option '%s'", a);
    } else if (!so.workflow) {
      so.workflow = a;
    } else {
      rc = usage_error(usage_slurm, "unexpected argument '%s'", a);
    }
  }
  if (rc == SE3_EXIT_OK && !so.workflow) rc = usage_error(usage_slurm, "%s", "missing the workflow file");
  if (rc == SE3_EXIT_OK && so.submit && so.resume)
    rc = usage_error(usage_slurm, "%s", "--submit and --resume exclude each other");
  if (rc == SE3_EXIT_OK) {
    so.sets = all;
    rc = slurm_run(&so);
  }
  for (int i = 0; i < n_own; i++)
    free(owned[i]);
  free(owned);
  free(all);
  return rc;
}

static int verb_verify(int argc, char **argv) {
  const char *db = NULL;
  int quick = 0;
  long max_listed = 20;
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "--quick")) {
      quick = 1;
    } else if (!strcmp(argv[i], "--max-listed") && i + 1 < argc) {
      char *end;
      max_listed = strtol(argv[++i], &end, 10);
      if (*end || max_listed < 0 || max_listed > 1000000)
        return usage_error(usage_verify, "--max-listed needs a number >= 0, got '%s'", argv[i]);
    } else if (argv[i][0] == '-' && argv[i][1]) {
      return usage_error(usage_verify, "unknown option '%s'", argv[i]);
    } else if (!db) {
      db = argv[i];
    } else {
      return usage_error(usage_verify, "unexpected argument '%s'", argv[i]);
    }
  }
  if (!db) return usage_error(usage_verify, "%s", "verify needs DB or WORKDIR");
  return verify_run(db, quick, (int)max_listed, stdout);
}

static int verb_schema(int argc, char **argv) {
  (void)argv;
  if (argc > 2) {
    fputs(usage_schema, stderr);
    return SE3_EXIT_USAGE;
  }
  return store_schema_doc(stdout) ? SE3_EXIT_FAILED : SE3_EXIT_OK;
}

static int verb_keys(int argc, char **argv) {
  (void)argv;
  if (argc > 2) {
    fputs(usage_keys, stderr);
    return SE3_EXIT_USAGE;
  }
  return cfg_doc_markdown(stdout) ? SE3_EXIT_FAILED : SE3_EXIT_OK;
}

/* ---- the verbs ------------------------------------------------------------
 * One row a verb, in the order `se3screen --help` lists them: its synopsis
 * and summary for that list, its --help text, and the function that runs it
 * (argv[1] is the verb). main answers --help for every verb from the row. */
struct verb {
  const char *name, *synopsis, *summary, *usage;
  int (*run)(int argc, char **argv);
};

static const struct verb verbs[] = {
    {"run", "run WORKFLOW.yaml", "run the workflow's stages (resumes where it stopped)", usage_run, verb_run},
    {"check", "check WORKFLOW.yaml", "validate and print the resolved configuration", usage_check, verb_check},
    {"predict", "predict MODEL INPUT...", "score and rank molecule files with a saved model (a workdir of its own)",
     usage_predict, verb_predict},
    {"status", "status WORKFLOW|DB", "chunks done, molecules stored/rejected, config changes, last error", usage_status,
     verb_status},
    {"upgrade", "upgrade WORKDIR", "convert a workdir of an earlier se3screen in place, keeping its work", usage_upgrade,
     verb_upgrade},
    {"query", "query DB \"SQL\"", "run SQL on a result database, read-only", usage_query, verb_query},
    {"top", "top DB [-n N]", "the best hits of the rank stage, as a table", usage_top, verb_top},
    {"export", "export DB -o FILE", "ranked hits or a query's rows as CSV, SDF or SMILES (--format)", usage_export,
     verb_export},
    {"report", "report DB|WORKDIR", "report.html: the run, training, scores, hits and rejects as one page",
     usage_report, verb_report},
    {"merge", "merge DB", "fold shard databases (shards/*.db) into DB", usage_merge, verb_merge},
    {"slurm", "slurm WORKFLOW.yaml", "sbatch scripts for every step, chained; --submit submits them", usage_slurm,
     verb_slurm},
    {"verify", "verify DB|WORKDIR", "check a database's pages and every stored blob's checksum", usage_verify,
     verb_verify},
    {"schema", "schema", "every table and column of the result databases, as Markdown", usage_schema, verb_schema},
    {"keys", "keys", "every configuration key of a workflow, as Markdown", usage_keys, verb_keys},
};

static void print_usage(FILE *f) {
  fputs("usage: se3screen VERB [options]\n\n", f);
  for (size_t i = 0; i < sizeof verbs / sizeof *verbs; i++)
    fprintf(f, "  %-22s %s\n", verbs[i].synopsis, verbs[i].summary);
  fprintf(f, "  %-22s %s\n", "--version", "version, and the kernels this processor gets (ISA, OpenBLAS core)");
  fputs("\n`se3screen VERB --help` describes a verb. Exit codes: 0 success, 1 run failure,\n"
        "2 usage or configuration error, 75 interrupted (run again to resume).\n",
        f);
}

int main(int argc, char **argv) {
  /* Keep freed memory instead of handing it back: the stages allocate and
   * free blobs of megabytes per molecule, and with glibc's defaults each one
   * is a fresh mmap whose first touch faults every page (a quarter of the
   * basis stage's time before this). */
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  stage_cpu_reexec(argv); /* before any work: OpenBLAS and libgomp read their settings at load time */
  struct se3_error fault_err;
  if (fault_init(&fault_err)) { /* SE3_FAULT (pipeline/fault.h): before SQLite is first used */
    fprintf(stderr, "se3screen: %s\n", se3_error_str(&fault_err).s);
    return SE3_EXIT_USAGE;
  }
  if (argc >= 2 && (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version"))) return print_version();
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    print_usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? SE3_EXIT_USAGE : SE3_EXIT_OK;
  }
  for (size_t i = 0; i < sizeof verbs / sizeof *verbs; i++) {
    if (strcmp(argv[1], verbs[i].name)) continue;
    if (wants_help(argc, argv)) return fputs(verbs[i].usage, stdout), SE3_EXIT_OK;
    return verbs[i].run(argc, argv);
  }
  fprintf(stderr, "se3screen: unknown verb '%s'\n\n", argv[1]);
  print_usage(stderr);
  return SE3_EXIT_USAGE;
}
