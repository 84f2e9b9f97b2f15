/* test_fuzz.c — a bounded, deterministic fuzz of every parser se3screen runs
 * on input a user hands it: the record splitter for each molecule format
 * (chem/records.h: SDF, MOL2, SMILES, CSV, TSV, XYZ, PDB, CML), its format
 * sniffer and its label reader (rec_parse_label: CSV cells), the YAML
 * workflow loader (pipeline/config.h), the stored molecule and graph blobs
 * with the graph builder behind them (chem/mol.h, chem/graph.h: a damaged
 * screen.db row), and the records through the product's Open Babel worker
 * pool (chem/workers.h: Open Babel crashes and hangs on hostile input, which
 * is why the product runs it only in those forked workers; it is never
 * called in this process). tests/integration/test_fuzz_ingest.c runs the
 * same generator (tests/fuzz_mutate.h) through `se3screen run`, a few runs.
 *
 * Inputs. The seed corpus is tests/data/fuzz/ (small files from
 * ../shared/data/robustness/ and the bundled workflows; tests/data/SOURCES.md),
 * plus every file under the folders in SE3_FUZZ_CORPUS (colon-separated) when
 * set. Each input is a seed put through 1 to 8 mutations drawn by a seeded
 * generator: bit flips, "interesting" bytes (NUL, 0xff, line ends, quotes,
 * '$', '@', '<'), byte runs inserted or deleted, chunks duplicated, spliced
 * in from another seed, or truncated, format tokens ("$$$$" lines,
 * "@<TRIPOS>MOLECULE", END, "<molecule>", "M  END", YAML anchors and flow
 * brackets), numbers replaced by huge, negative or overflowing ones, lines
 * repeated hundreds of times, and very long lines (up to past the reader's
 * 1 MiB buffer). Input number i of a target depends only on the seed and i,
 * so any input can be made again (SE3_FUZZ_FROM=i starts there).
 *
 * What is checked, for every input:
 *   no crash  each batch of inputs runs in a forked child; a death by a
 *             signal is a failure naming the signal and the input;
 *   no hang   alarm(): each input must finish within SE3_FUZZ_INPUT_SECONDS
 *             (default 10 s; a parse takes milliseconds);
 *   no silent truncation, as invariants a correct reader keeps:
 *     - every reader reads to the end of the file (its line count equals the
 *       file's), and fails only on a gzip stream that is broken;
 *     - no record's text is cut short: its length is strlen(text) (a NUL
 *       byte makes an error record, never a shorter molecule), a record
 *       that is not an error holds something and ends with a line end;
 *     - record numbers grow, every number is either handed out or counted
 *       (n_out + n_unlisted = last record number), lines grow;
 *     - SDF and SMILES are compared record by record with a reference
 *       splitter written here from records.h's rules (text, line, record
 *       number, error or not), and MOL2 by its count of records;
 *     - an SD record holding two molecules (two "M  END" lines: a $$$$ line
 *       damaged or missing) is an error record, not a molecule: Open Babel
 *       would read the first and drop the second without a word;
 *     - MOL2 text before the first @<TRIPOS>MOLECULE line that is neither
 *       blank nor a comment (a record whose MOLECULE line is damaged) comes
 *       out as an error record, not nothing;
 *     - a file whose records are all intact but one (SDF, MOL2, SMILES,
 *       "structured" inputs: one record's body mutated, its delimiter kept)
 *       still yields every other record, unchanged;
 *     - a gzip'd copy of an input reads exactly as the plain one;
 *     - CSV/TSV: a row that is not an error has the header's field count
 *       and its record text carries the SMILES cell whole (a SMILES cell
 *       with white space in it would reach Open Babel as a shorter SMILES
 *       and a title);
 *     - XYZ, PDB, CML, MOL2 records have their format's shape;
 *     - a label cell is a value only when it is a finite decimal number,
 *       read as strtod reads it; blank is no value; the rest is refused
 *       with a reason (CSV cells, and generated number-like strings);
 *     - a workflow either loads or fails with at least one message (those
 *       naming the file give a 1-based line:col, or 0:0 for the whole
 *       file), and a workflow that
 *       loads prints to YAML that loads again to the same tree and prints
 *       the same (so no value is lost between the two);
 *     - a molecule blob is refused or decodes to bonds within its atoms; a
 *       graph built from it survives its own blob round trip;
 *     - workers: up to 6 records of each input through a pool of 2 workers
 *       (3 s a record): the pool answers for every record, a reject has a
 *       reason, a molecule has atoms and a SMILES, and an SD (V2000) or XYZ
 *       record comes out with at least the atoms it declares (more where SD
 *       aliases expand).
 * fuzz/seeds_as_they_are runs every seed unmutated through the same checks,
 * the regression inputs (tests/data/fuzz/regress_*) among them.
 *
 * A failure prints the target, the seed, the input number and the path of a
 * copy of the input under the test's tmp folder; SE3_FUZZ_REPLAY=FILE runs
 * just that file through the target (records: format from its extension).
 *
 * Budget: SE3_FUZZ_SECONDS (default 25) split over the targets (records
 * 45 %, workers 25 %, yaml 20 %, blobs 10 %; each checks the clock between
 * inputs, so a target may run over by one input); SE3_FUZZ_SEED
 * (default fixed, so CI is reproducible); SE3_FUZZ_MAX_FAILURES (default 1:
 * stop a target at its first failure; more to collect several when fuzzing
 * longer by hand). Each target prints "fuzz: TARGET: N inputs in T s, seed S".
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "chem/graph.h"
#include "chem/mol.h"
#include "chem/records.h"
#include "chem/workers.h"
#include "common/crc32c.h"
#include "common/error.h"
#include "pipeline/config.h"
#include "tests/fuzz_mutate.h"
#include "tests/testutil.h"

#define DEFAULT_SEED 20261125ULL
#define DEFAULT_SECONDS 25.0

/* ---- settings ---------------------------------------------------------------- */

static double env_double(const char *name, double dflt) {
  const char *s = getenv(name);
  if (!s || !*s) return dflt;
  char *e;
  double v = strtod(s, &e);
  return e != s && v >= 0 ? v : dflt;
}

static uint64_t fuzz_seed(void) {
  const char *s = getenv("SE3_FUZZ_SEED");
  return s && *s ? strtoull(s, NULL, 0) : DEFAULT_SEED;
}

/* ---- the harness: batches of inputs in forked children ------------------------------ */

struct shared {
  volatile int64_t iter; /* input in progress */
  volatile int64_t done; /* inputs finished */
  char path[1024];       /* the file holding the input in progress */
  char msg[8192];        /* why the input failed */
};

static struct shared *g_sh;
static void (*g_child_cleanup)(void); /* set by a target; run by a child before it exits */

static void child_exit(int status) {
  if (g_child_cleanup) g_child_cleanup();
  _exit(status);
}

/* Failure message of the current input (the child then exits 1). */
static const char *failf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *failf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_sh->msg, sizeof g_sh->msg, fmt, ap);
  va_end(ap);
  return g_sh->msg;
}

struct target {
  const char *name;
  double share;       /* of SE3_FUZZ_SECONDS */
  unsigned min_alarm; /* the per-input bound is at least this many seconds */
  /* Makes input iter (or reads the replay file), runs it; NULL or a failure. */
  const char *(*one)(const char *dir, uint64_t seed, int64_t iter, const char *replay);
  const char *replay; /* this file alone, unmutated (else SE3_FUZZ_REPLAY, or fuzzing) */
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Runs a target for its share of the budget (or its replay file once);
 * returns the number of failing inputs, the first one's report in `first`. */
static int run_target(const struct target *t, char *first, size_t first_len) {
  corpus_load();
  cr_assert_gt(g_n_seeds, 20, "fuzz corpus %s: %d seeds", tu_src("tests/data/fuzz"), g_n_seeds);
  char tmpname[64];
  snprintf(tmpname, sizeof tmpname, "fuzz_%s", t->name);
  char *dir = tu_tmpdir(tmpname);
  cr_assert_not_null(dir);
  uint64_t seed = fuzz_seed();
  double seconds = env_double("SE3_FUZZ_SECONDS", DEFAULT_SECONDS) * t->share;
  unsigned per_input = (unsigned)env_double("SE3_FUZZ_INPUT_SECONDS", 10);
  if (per_input < t->min_alarm) per_input = t->min_alarm;
  if (per_input < 1) per_input = 1;
  int max_fail = (int)env_double("SE3_FUZZ_MAX_FAILURES", 1);
  if (max_fail < 1) max_fail = 1;
  const char *replay = t->replay ? t->replay : getenv("SE3_FUZZ_REPLAY");
  if (replay && !*replay) replay = NULL;
  int64_t iter = (int64_t)env_double("SE3_FUZZ_FROM", 0);

  g_sh = mmap(NULL, sizeof *g_sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  cr_assert_neq(g_sh, MAP_FAILED);
  double t0 = now_s(), deadline = t0 + seconds;
  int failures = 0;
  first[0] = 0;
  int64_t inputs = 0;
  for (;;) {
    memset(g_sh, 0, sizeof *g_sh);
    g_sh->iter = g_sh->done = iter;
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
    if (pid == 0) {
      /* the child: default dispositions, so a crash or the alarm kills it */
      static const int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGALRM};
      for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        signal(sigs[i], SIG_DFL);
      for (int64_t i = iter;; i++) {
        g_sh->iter = i;
        alarm(per_input);
        const char *why = t->one(dir, seed, i, replay);
        alarm(0);
        if (why) child_exit(1);
        g_sh->done = i + 1;
        if (replay || now_s() >= deadline) child_exit(0);
      }
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    inputs = g_sh->done - (int64_t)env_double("SE3_FUZZ_FROM", 0);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) break;
    /* a failure: keep the input, say how to make it again */
    failures++;
    char why[8400];
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM)
      snprintf(why, sizeof why, "hang: no result within %u s (SE3_FUZZ_INPUT_SECONDS)", per_input);
    else if (WIFSIGNALED(st))
      snprintf(why, sizeof why, "crash: killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    else
      snprintf(why, sizeof why, "%s", g_sh->msg[0] ? g_sh->msg : "exited with status 1 (a sanitizer report above?)");
    char kept[1400] = "(no file)";
    if (g_sh->path[0]) {
      const char *base = strrchr(g_sh->path, '/');
      base = base ? base + 1 : g_sh->path;
      snprintf(kept, sizeof kept, "%s/failed-%lld-%s", dir, (long long)g_sh->iter, base);
      if (rename(g_sh->path, kept) != 0) snprintf(kept, sizeof kept, "%s (could not keep it)", g_sh->path);
    }
    char report[16384]; /* why, kept twice and the rest: the compiler checks the sum */
    if (replay)
      snprintf(report, sizeof report,
               "fuzz: %s: %s failed: %s\n  again: SE3_FUZZ_REPLAY=%s test_fuzz --filter 'fuzz/%s'", t->name, replay,
               why, replay, t->name);
    else
      snprintf(report, sizeof report,
               "fuzz: %s: input %lld (seed %llu) failed: %s\n  input kept at %s\n  again: SE3_FUZZ_SEED=%llu "
               "SE3_FUZZ_FROM=%lld test_fuzz --filter 'fuzz/%s', or SE3_FUZZ_REPLAY=%s test_fuzz --filter 'fuzz/%s'",
               t->name, (long long)g_sh->iter, (unsigned long long)seed, why, kept, (unsigned long long)seed,
               (long long)g_sh->iter, t->name, kept, t->name);
    fprintf(stderr, "%s\n", report);
    if (!first[0] && first_len) { /* the first failure, cut to fit */
      size_t l = strlen(report);
      if (l >= first_len) l = first_len - 1;
      memcpy(first, report, l);
      first[l] = 0;
    }
    if (failures >= max_fail || replay || now_s() >= deadline) break;
    iter = g_sh->iter + 1;
  }
  double took = now_s() - t0;
  if (!t->replay)
    fprintf(stderr, "fuzz: %s: %lld inputs in %.1f s, seed %llu, %d failure%s\n", t->name, (long long)inputs, took,
            (unsigned long long)seed, failures, failures == 1 ? "" : "s");
  munmap(g_sh, sizeof *g_sh);
  g_sh = NULL;
  free(dir);
  if (!failures && !replay && inputs <= 0) {
    snprintf(first, first_len, "fuzz: %s: no input finished", t->name);
    failures = 1;
  }
  return failures;
}

static void fuzz_test(const struct target *t) {
  static char first[10000];
  int failures = run_target(t, first, sizeof first);
  cr_assert_eq(failures, 0, "%s", first);
}

/* Bytes as printable text (\xNN for the others), for messages. */
static const char *show(const char *p, size_t n) {
  static char out[4][160];
  static int k;
  char *o = out[k++ & 3];
  size_t w = 0;
  for (size_t i = 0; i < n && w + 5 < sizeof out[0]; i++) {
    unsigned char c = (unsigned char)p[i];
    if (c >= 32 && c < 127 && c != '\\')
      o[w++] = (char)c;
    else
      w += (size_t)snprintf(o + w, sizeof out[0] - w, "\\x%02x", c);
  }
  o[w] = 0;
  return o;
}

/* ---- labels: a CSV cell or SD tag value as a number ------------------------------------- */

/* The decimal grammar of rec_parse_label: blanks, [+-], digits with one
 * optional '.', at least one digit, an optional exponent, blanks. */
static int is_decimal(const char *s) {
  while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n')
    s++;
  if (*s == '+' || *s == '-') s++;
  int digits = 0;
  while (isdigit((unsigned char)*s))
    s++, digits++;
  if (*s == '.') {
    s++;
    while (isdigit((unsigned char)*s))
      s++, digits++;
  }
  if (!digits) return 0;
  if (*s == 'e' || *s == 'E') {
    const char *e = s + 1;
    if (*e == '+' || *e == '-') e++;
    if (isdigit((unsigned char)*e)) {
      while (isdigit((unsigned char)*e))
        e++;
      s = e;
    }
  }
  while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n')
    s++;
  return *s == 0;
}

/* A label cell: a value only when it is a finite decimal number, read as
 * strtod reads it; blank is no value; anything else refused with a reason. */
static const char *check_label(const char *cell) {
  double v = 12345;
  char why[256] = "";
  int rc = rec_parse_label(cell, &v, why, sizeof why);
  int blank = 1;
  for (const char *c = cell; *c && blank; c++)
    blank = isspace((unsigned char)*c);
  if (rc == 1 && !blank) return failf("label '%s' read as blank", show(cell, strlen(cell)));
  if (rc == -1 && !why[0]) return failf("label '%s' refused without a reason", show(cell, strlen(cell)));
  if (rc == 0) {
    if (!is_decimal(cell) || !isfinite(v))
      return failf("label '%s' accepted as %g: not a finite decimal number", show(cell, strlen(cell)), v);
    char *end;
    double x = strtod(cell, &end);
    if (x != v) return failf("label '%s' read as %.17g, strtod reads %.17g", show(cell, strlen(cell)), v, x);
  }
  if (rc < -1 || rc > 1) return failf("rec_parse_label returned %d", rc);
  return NULL;
}

/* Label-like strings: numbers, then mutated. */
static const char *labels_fuzz(struct rng *r) {
  static const char *const parts[] = {"1",  "-",     "+",   ".",   "e",      "E",
                                      "0x", "1e400", "inf", "nan", ",",      " ",
                                      "\t", "\r\n",  "5",   "-0",  "1e-400", "9999999999999999999999",
                                      "x",  "1.5",   "2e",  "e5",  "..",     "\xEF\xBB\xBF",
                                      "\"", "0"};
  for (int k = 0; k < 8; k++) {
    char cell[300] = "";
    size_t n = 1 + rng_below(r, 6);
    for (size_t i = 0; i < n; i++)
      strncat(cell, parts[rng_below(r, sizeof parts / sizeof parts[0])], sizeof cell - strlen(cell) - 1);
    if (rng_below(r, 8) == 0) { /* a very long run of digits */
      size_t l = strlen(cell), add = rng_below(r, sizeof cell - l - 1);
      memset(cell + l, '7', add);
      cell[l + add] = 0;
    }
    const char *why = check_label(cell);
    if (why) return why;
  }
  return NULL;
}

/* ---- the records target ------------------------------------------------------------- */

/* The records a reader handed out, copied. */
struct got_rec {
  int64_t no, line;
  char *text; /* NULL for an error record */
  size_t len;
};
struct got {
  struct got_rec *r;
  int n, cap;
  struct rec_stats st;
  int open_failed, read_failed;
  struct se3_error err;
};

static void got_free(struct got *g) {
  for (int i = 0; i < g->n; i++)
    free(g->r[i].text);
  free(g->r);
  memset(g, 0, sizeof *g);
}

static const char *const EXT[] = {"bin", "sdf", "mol2", "smi", "csv", "tsv", "xyz", "pdb", "cml"};

static int64_t count_lines(const unsigned char *p, size_t n) {
  if (n >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0) {
    p += 3;
    n -= 3;
  }
  int64_t k = 0;
  for (size_t i = 0; i < n; i++)
    k += p[i] == '\n';
  return k + (n && p[n - 1] != '\n');
}

/* Reads every record of path, checking what holds for every format. NULL or a failure. */
static const char *read_all(const char *path, enum mol_format fmt, const struct rec_options *opt,
                            const unsigned char *bytes, size_t n, int gz, struct got *g) {
  memset(g, 0, sizeof *g);
  struct rec_reader *rd = rec_open(path, fmt, opt, &g->err);
  int gzmagic = n >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b;
  if (!rd) {
    g->open_failed = 1;
    if (g->err.kind == SE3_ERR_NONE || !g->err.message[0]) return failf("rec_open failed without a message");
    if (fmt != MOL_FMT_CSV && fmt != MOL_FMT_TSV && !gzmagic)
      return failf("rec_open(%s) of a regular file failed: %s", rec_format_name(fmt), se3_error_str(&g->err).s);
    return NULL;
  }
  struct rec rec;
  int k;
  int64_t prev_no = 0, prev_line = 0;
  int strict = fmt != MOL_FMT_CML;
  int64_t lines = count_lines(bytes, n);
  while ((k = rec_next(rd, &rec, &g->err)) == 1) {
    if (rec.record_no <= prev_no)
      return failf("record number %lld after %lld", (long long)rec.record_no, (long long)prev_no);
    if (rec.line < 1 || (!gz && rec.line > lines + 1) || rec.line < prev_line || (strict && rec.line == prev_line))
      return failf("record %lld starts at line %lld (previous at %lld, file has %lld lines)", (long long)rec.record_no,
                   (long long)rec.line, (long long)prev_line, (long long)lines);
    if (!rec.text) return failf("record %lld has no text", (long long)rec.record_no);
    size_t sl = strlen(rec.text);
    if (sl != rec.len)
      return failf("record %lld (line %lld) cut short: %zu bytes, strlen %zu: read as '%s'%s", (long long)rec.record_no,
                   (long long)rec.line, rec.len, sl, show(rec.text, sl),
                   rec.error ? " (an error record)" : " (not an error record)");
    if (rec.error) {
      if (!rec.error[0]) return failf("record %lld: an empty error message", (long long)rec.record_no);
    } else {
      int blank = 1;
      for (size_t i = 0; i < rec.len && blank; i++)
        blank = isspace((unsigned char)rec.text[i]);
      if (blank)
        return failf("record %lld (line %lld) is blank and not an error", (long long)rec.record_no,
                     (long long)rec.line);
      if (rec.text[rec.len - 1] != '\n')
        return failf("record %lld (line %lld) does not end with a line end", (long long)rec.record_no,
                     (long long)rec.line);
    }
    if (g->n == g->cap) {
      g->cap = g->cap ? 2 * g->cap : 16;
      g->r = realloc(g->r, (size_t)g->cap * sizeof *g->r);
    }
    struct got_rec *o = &g->r[g->n++];
    o->no = rec.record_no;
    o->line = rec.line;
    o->len = rec.len;
    o->text = rec.error ? NULL : malloc(rec.len + 1);
    if (o->text) memcpy(o->text, rec.text, rec.len + 1);
    /* format shapes */
    if (!rec.error && (fmt == MOL_FMT_CSV || fmt == MOL_FMT_TSV)) {
      int nc = 0;
      rec_columns(rd, &nc);
      if (rec.n_fields != nc)
        return failf("row %lld (line %lld) has %d fields, header %d, and is not an error", (long long)rec.record_no,
                     (long long)rec.line, rec.n_fields, nc);
      const char *want = opt && opt->smiles_column ? opt->smiles_column : "smiles";
      const char *const *cols = rec_columns(rd, &nc);
      int sc = -1;
      for (int i = 0; i < nc && sc < 0; i++)
        if (strcasecmp(cols[i], want) == 0) sc = i;
      if (sc < 0) return failf("no SMILES column '%s' yet rows were read", want);
      const char *cell = rec.fields[sc];
      while (isspace((unsigned char)*cell))
        cell++;
      size_t cl = strlen(cell);
      while (cl && isspace((unsigned char)cell[cl - 1]))
        cl--;
      size_t tok = 0;
      while (tok < rec.len && !isspace((unsigned char)rec.text[tok]))
        tok++;
      for (int i = 0; i < rec.n_fields; i++) {
        const char *why = check_label(rec.fields[i]);
        if (why) return why;
      }
      if (tok != cl || memcmp(rec.text, cell, cl) != 0)
        return failf("row %lld (line %lld): SMILES cell '%s' reaches Open Babel as SMILES '%s' (record text '%s')",
                     (long long)rec.record_no, (long long)rec.line, show(cell, cl), show(rec.text, tok),
                     show(rec.text, rec.len));
    }
    if (!rec.error && fmt == MOL_FMT_MOL2 && strncmp(rec.text, "@<TRIPOS>MOLECULE", 17) != 0)
      return failf("MOL2 record %lld does not start with @<TRIPOS>MOLECULE: '%s'", (long long)rec.record_no,
                   show(rec.text, rec.len < 60 ? rec.len : 60));
    if (!rec.error && fmt == MOL_FMT_SDF) {
      /* two molecules in one record (a $$$$ line damaged or missing): Open
       * Babel reads the first and the second would be lost without a word */
      int ends = 0;
      for (const char *p = rec.text; p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (!strncmp(p, "M  END", 6) && (p[6] == '\n' || p[6] == '\r' || p[6] == ' ' || p[6] == '\t' || !p[6])) ends++;
      if (ends > 1)
        return failf("SD record %lld (line %lld) holds %d molecules (%d \"M  END\" lines) and is not an error: "
                     "all but the first would be lost",
                     (long long)rec.record_no, (long long)rec.line, ends, ends);
    }
    if (!rec.error && fmt == MOL_FMT_CML && rec.text[0] != '<')
      return failf("CML record %lld does not start with a tag: '%s'", (long long)rec.record_no,
                   show(rec.text, rec.len < 60 ? rec.len : 60));
    if (!rec.error && fmt == MOL_FMT_PDB) {
      int atoms = 0;
      for (const char *p = rec.text; p && !atoms; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        atoms = !strncmp(p, "ATOM", 4) || !strncmp(p, "HETATM", 6);
      if (!atoms)
        return failf("PDB record %lld (line %lld) has no ATOM/HETATM line", (long long)rec.record_no,
                     (long long)rec.line);
    }
    if (!rec.error && fmt == MOL_FMT_XYZ) {
      char *e;
      long na = strtol(rec.text, &e, 10);
      int64_t nl = 0;
      for (size_t i = 0; i < rec.len; i++)
        nl += rec.text[i] == '\n';
      if (e == rec.text || na < 1 || nl != na + 2)
        return failf("XYZ record %lld (line %lld): count %ld, %lld lines", (long long)rec.record_no,
                     (long long)rec.line, na, (long long)nl);
    }
    prev_no = rec.record_no;
    prev_line = rec.line;
  }
  rec_get_stats(rd, &g->st);
  rec_close(rd);
  if (k < 0) {
    g->read_failed = 1;
    if (g->err.kind == SE3_ERR_NONE || !g->err.message[0]) return failf("rec_next failed without a message");
    if (!gzmagic && !gz) return failf("rec_next failed on a plain file: %s", se3_error_str(&g->err).s);
    return NULL;
  }
  if (k != 0) return failf("rec_next returned %d", k);
  if (g->st.n_out != g->n) return failf("stats: n_out %lld, handed out %d", (long long)g->st.n_out, g->n);
  if (g->st.last_no != g->st.n_out + g->st.n_unlisted)
    return failf("stats: last record %lld, handed out %lld + counted only %lld", (long long)g->st.last_no,
                 (long long)g->st.n_out, (long long)g->st.n_unlisted);
  if (!gzmagic && g->st.lines != lines)
    return failf("the reader stopped early: %lld of the file's %lld lines read", (long long)g->st.lines,
                 (long long)lines);
  return NULL;
}

/* The reference splitter: what records.h says an SDF (or SMILES) file holds. */
struct want {
  int64_t line;
  int error; /* 1: an error record (empty, over the cap, NUL byte), 2: counted only */
  const unsigned char *p;
  size_t n;   /* text (without a line end added at the end of the file) */
  int add_nl; /* the reader adds "\n" */
};

static int is_space_run(const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!isspace(p[i])) return 0;
  return 1;
}

static size_t trim_end(const unsigned char *p, size_t n) {
  while (n && (p[n - 1] == '\n' || p[n - 1] == '\r' || p[n - 1] == ' ' || p[n - 1] == '\t'))
    n--;
  return n;
}

/* Lines "M  END" in p[0, n): more than one is two molecules in one record. */
static int m_end_lines(const unsigned char *p, size_t n) {
  int k = 0;
  for (size_t s = 0; s < n;) {
    const unsigned char *nl = memchr(p + s, '\n', n - s);
    size_t e = nl ? (size_t)(nl - p) + 1 : n;
    if (e - s >= 6 && !memcmp(p + s, "M  END", 6) &&
        (e - s == 6 || p[s + 6] == '\n' || p[s + 6] == '\r' || p[s + 6] == ' ' || p[s + 6] == '\t'))
      k++;
    s = e;
  }
  return k;
}

static int reference(enum mol_format fmt, const unsigned char *p, size_t n, const struct rec_options *opt,
                     struct want **out) {
  size_t cap = opt && opt->max_record_bytes ? opt->max_record_bytes : REC_MAX_RECORD_DEFAULT;
  long max_empty = opt && opt->max_empty_listed ? opt->max_empty_listed : 10;
  long n_empty = 0;
  int nw = 0, capw = 16;
  struct want *w = malloc((size_t)capw * sizeof *w);
  if (n >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0) {
    p += 3;
    n -= 3;
  }
  size_t rs = 0; /* start of the record (SDF) */
  int64_t line = 0, rline = 0;
  /* a SMILES file's header line, as the reader decides from the first
   * 64 KiB (rec_smi_header, tested on its own in test_records_header), is
   * no record; every other rule below is the reference's own */
  int64_t header = 0;
  if (fmt == MOL_FMT_SMI) {
    const size_t head = (size_t)64 << 10;
    if (!rec_smi_header((const char *)p, n < head ? n : head, n < head, &header)) header = 0;
  }
  for (size_t s = 0; s < n;) {
    const unsigned char *nl = memchr(p + s, '\n', n - s);
    size_t e = nl ? (size_t)(nl - p) + 1 : n; /* line [s, e) */
    line++;
    if (nw + 1 >= capw) w = realloc(w, (size_t)(capw *= 2) * sizeof *w);
    if (fmt == MOL_FMT_SMI) {
      size_t t = trim_end(p + s, e - s), b = 0;
      while (b < t && isspace(p[s + b]))
        b++;
      if (line == header)
        ; /* the header */
      else if (e - s > cap)
        w[nw++] = (struct want){line, 1, NULL, 0, 0};
      else if (b < t && p[s + b] != '#')
        w[nw++] = (struct want){line, memchr(p + s + b, 0, t - b) ? 1 : 0, p + s + b, t - b, 1};
    } else { /* SDF */
      if (!rline) rline = line;
      size_t t = trim_end(p + s, e - s);
      if (t == 4 && memcmp(p + s, "$$$$", 4) == 0) {
        int blank = is_space_run(p + rs, s - rs);
        if (e - rs > cap) {
          w[nw++] = (struct want){rline, 1, NULL, 0, 0};
        } else if (blank) {
          n_empty++;
          w[nw++] = (struct want){rline, max_empty < 0 || n_empty <= max_empty ? 1 : 2, NULL, 0, 0};
        } else {
          w[nw++] = (struct want){rline, memchr(p + rs, 0, e - rs) || m_end_lines(p + rs, e - rs) > 1, p + rs, e - rs,
                                  p[e - 1] != '\n'};
        }
        rs = e;
        rline = 0;
      }
    }
    s = e;
  }
  if (fmt == MOL_FMT_SDF && rs < n && !is_space_run(p + rs, n - rs)) {
    if (n - rs > cap)
      w[nw++] = (struct want){rline, 1, NULL, 0, 0};
    else
      w[nw++] = (struct want){rline, memchr(p + rs, 0, n - rs) || m_end_lines(p + rs, n - rs) > 1, p + rs, n - rs,
                              p[n - 1] != '\n'};
  }
  *out = w;
  return nw;
}

static const char *compare_reference(enum mol_format fmt, const unsigned char *p, size_t n,
                                     const struct rec_options *opt, const struct got *g) {
  struct want *w;
  int nw = reference(fmt, p, n, opt, &w);
  const char *why = NULL;
  int k = 0; /* handed-out records matched */
  for (int i = 0; i < nw && !why; i++) {
    if (w[i].error == 2) continue;
    if (k >= g->n) {
      why = failf("%s: the reader stopped after %d records; record %d (line %lld) is missing", rec_format_name(fmt),
                  g->n, i + 1, (long long)w[i].line);
      break;
    }
    const struct got_rec *r = &g->r[k++];
    if (r->no != i + 1 || r->line != w[i].line)
      why = failf("%s: record %d of the file (line %lld) came out as record %lld at line %lld", rec_format_name(fmt),
                  i + 1, (long long)w[i].line, (long long)r->no, (long long)r->line);
    else if (w[i].error && r->text)
      why =
          failf("%s: record %d (line %lld) should be an error record (%s) but was read as '%s'", rec_format_name(fmt),
                i + 1, (long long)w[i].line,
                w[i].p ? "a NUL byte or two molecules in it" : "empty or over max_record_bytes", show(r->text, r->len));
    else if (!w[i].error && !r->text)
      why = failf("%s: record %d (line %lld) '%s' was made an error record", rec_format_name(fmt), i + 1,
                  (long long)w[i].line, show((const char *)w[i].p, w[i].n));
    else if (!w[i].error && (r->len != w[i].n + (w[i].add_nl ? 1 : 0) || memcmp(r->text, w[i].p, w[i].n) != 0)) {
      size_t d = 0;
      while (d < r->len && d < w[i].n && r->text[d] == (char)w[i].p[d])
        d++;
      size_t from = d > 40 ? d - 40 : 0;
      why =
          failf("%s: record %d (line %lld) read as %zu bytes, the file has %zu%s; they differ from byte %zu: "
                "read '%s', file '%s'",
                rec_format_name(fmt), i + 1, (long long)w[i].line, r->len, w[i].n, w[i].add_nl ? " (+ a line end)" : "",
                d, show(r->text + from, (r->len > from ? r->len - from : 0) > 80 ? 80 : r->len - from),
                show((const char *)w[i].p + from, (w[i].n > from ? w[i].n - from : 0) > 80 ? 80 : w[i].n - from));
    }
  }
  if (!why && k != g->n) why = failf("%s: %d records read, the file has %d", rec_format_name(fmt), g->n, k);
  if (!why && g->st.last_no != nw)
    why = failf("%s: last record number %lld, the file has %d records", rec_format_name(fmt), (long long)g->st.last_no,
                nw);
  free(w);
  return why;
}

/* MOL2: one record per @<TRIPOS>MOLECULE line. */
static const char *check_mol2_count(const unsigned char *p, size_t n, const struct got *g) {
  int64_t k = 0, line = 0, first = 0, garbage = 0;
  for (size_t s = 0; s < n;) {
    const unsigned char *nl = memchr(p + s, '\n', n - s);
    size_t e = nl ? (size_t)(nl - p) + 1 : n;
    size_t t = trim_end(p + s, e - s), b = s == 0 && n >= 3 && !memcmp(p, "\xEF\xBB\xBF", 3) ? 3 : 0;
    line++;
    if (t >= b + 17 && t - b == 17 && memcmp(p + s + b, "@<TRIPOS>MOLECULE", 17) == 0 && e - s < (1 << 20)) {
      k++;
      if (!first) first = line;
    } else if (!first && !garbage && t > b && p[s + b] != '#' && !is_space_run(p + s + b, t - b)) {
      garbage = line;
    }
    s = e;
  }
  if (g->st.last_no != k + (g->n && !g->r[0].text && g->r[0].line < first))
    return failf("mol2: %lld records numbered, the file has %lld @<TRIPOS>MOLECULE lines", (long long)g->st.last_no,
                 (long long)k);
  /* text before the first record (a record whose MOLECULE line is damaged)
   * must come out as an error record, not vanish */
  if (k && garbage && !(g->n && !g->r[0].text && g->r[0].line <= garbage))
    return failf("mol2: line %lld, before the first @<TRIPOS>MOLECULE line (line %lld), is neither blank nor a "
                 "comment, and no error record reports it: a record whose MOLECULE line is damaged would vanish",
                 (long long)garbage, (long long)first);
  return NULL;
}

/* Byte ranges [s, e) of the records of a seed by the reference rules, with
 * the body (the part a structured input mutates): SDF without its $$$$
 * line, MOL2 without its first line, SMILES the line without its end. */
struct span {
  size_t s, e, bs, be;
};

static int split_seed(enum mol_format fmt, const unsigned char *p, size_t n, struct span *sp, int max) {
  int k = 0, have = 0;
  size_t rs = 0, rbs = 0; /* start and body start of the record being read */
  for (size_t s = 0; s < n && k < max;) {
    const unsigned char *nl = memchr(p + s, '\n', n - s);
    if (!nl) break; /* only complete lines */
    size_t e = (size_t)(nl - p) + 1, t = trim_end(p + s, e - s);
    if (fmt == MOL_FMT_SDF) {
      if (t == 4 && !memcmp(p + s, "$$$$", 4)) {
        if (!is_space_run(p + rs, s - rs) && !memchr(p + rs, 0, e - rs)) sp[k++] = (struct span){rs, e, rs, s};
        rs = e;
      }
    } else if (fmt == MOL_FMT_MOL2) {
      if (t == 17 && !memcmp(p + s, "@<TRIPOS>MOLECULE", 17)) {
        if (have) sp[k++] = (struct span){rs, s, rbs, s};
        rs = s;
        rbs = e;
        have = 1;
      }
    } else if (fmt == MOL_FMT_SMI) {
      size_t b = 0;
      while (b < t && isspace(p[s + b]))
        b++;
      if (b == 0 && t > 0 && p[s] != '#' && t == e - s - 1 && !memchr(p + s, 0, t))
        sp[k++] = (struct span){s, e, s, s + t};
    }
    s = e;
  }
  if (fmt == MOL_FMT_MOL2 && have && k < max && p[n - 1] == '\n') sp[k++] = (struct span){rs, n, rbs, n};
  return k;
}

/* The records of a buffer as read through a file. */
static const char *read_buf(const char *dir, enum mol_format fmt, const struct rec_options *opt, const unsigned char *p,
                            size_t n, struct got *g) {
  char path[1100];
  snprintf(path, sizeof path, "%s/orig.%s", dir, EXT[fmt]);
  if (write_file(path, p, n) != 0) return failf("cannot write %s", path);
  return read_all(path, fmt, opt, p, n, 0, g);
}

static const char *records_one(const char *dir, uint64_t seed, int64_t iter, const char *replay) {
  struct rng r = rng_for(seed, "records", (uint64_t)iter);
  struct buf b = {0};
  enum mol_format fmt;
  struct rec_options opt = {0};
  const struct seed *sd = NULL;
  int structured = 0;
  struct span sp[64];
  int nsp = 0, j = -1;
  if (replay) {
    size_t n;
    char *text = tu_read(replay, &n);
    if (!text) return failf("cannot read %s", replay);
    buf_set(&b, text, n);
    free(text);
    fmt = rec_format_from_path(replay);
    if (fmt == MOL_FMT_UNKNOWN) return failf("%s: no molecule format in its name", replay);
  } else {
    sd = pick_seed(&r, 0);
    buf_set(&b, sd->p, sd->n);
    fmt = sd->fmt;
    if ((fmt == MOL_FMT_SDF || fmt == MOL_FMT_MOL2 || fmt == MOL_FMT_SMI) && rng_below(&r, 4) == 0)
      nsp = split_seed(fmt, sd->p, sd->n, sp, 64);
    if (nsp >= 2) { /* one record's body mutated, the rest intact */
      structured = 1;
      j = (int)rng_below(&r, (size_t)nsp);
      struct buf body = {0};
      buf_set(&body, sd->p + sp[j].bs, sp[j].be - sp[j].bs);
      mutate(&r, &body, 0);
      /* the body must end at a line start, or the next delimiter would join it */
      if (fmt != MOL_FMT_SMI && body.n && body.p[body.n - 1] != '\n') buf_insert(&body, body.n, "\n", 1);
      b.n = 0;
      buf_insert(&b, 0, sd->p, sp[j].bs);
      buf_insert(&b, b.n, body.p, body.n);
      buf_insert(&b, b.n, sd->p + sp[j].be, sd->n - sp[j].be);
      free(body.p);
    } else {
      mutate(&r, &b, 0);
      if (rng_below(&r, 10) == 0) fmt = (enum mol_format)(1 + rng_below(&r, 8));
    }
    if (rng_below(&r, 8) == 0) opt.max_record_bytes = 16 + rng_below(&r, 4096);
    if (rng_below(&r, 8) == 0) opt.max_empty_listed = rng_below(&r, 2) ? -1 : 1 + (long)rng_below(&r, 3);
    if ((fmt == MOL_FMT_CSV || fmt == MOL_FMT_TSV) && rng_below(&r, 4) == 0)
      opt.name_column = rng_below(&r, 2) ? "name" : "id";
  }
  snprintf(g_sh->path, sizeof g_sh->path, "%s/input.%s", dir, EXT[fmt]);
  if (write_file(g_sh->path, b.p, b.n) != 0) return failf("cannot write %s", g_sh->path);
  char optdesc[160];
  snprintf(optdesc, sizeof optdesc, " [%s, max_record_bytes %zu, max_empty_listed %ld%s]", rec_format_name(fmt),
           opt.max_record_bytes, opt.max_empty_listed, structured ? ", one record mutated" : "");

  if (!replay) {
    const char *lw = labels_fuzz(&r);
    if (lw) {
      free(b.p);
      return lw;
    }
  }
  /* the sniffer reads any bytes */
  enum mol_format sn = rec_sniff((const char *)b.p, b.n, fmt);
  if ((int)sn < 0 || sn > MOL_FMT_CML) return failf("rec_sniff returned %d", (int)sn);

  struct got g;
  const char *why = read_all(g_sh->path, fmt, &opt, b.p, b.n, 0, &g);
  if (!why && !g.open_failed && !g.read_failed && (fmt == MOL_FMT_SDF || fmt == MOL_FMT_SMI))
    why = compare_reference(fmt, b.p, b.n, &opt, &g);
  if (!why && !g.open_failed && !g.read_failed && fmt == MOL_FMT_MOL2) why = check_mol2_count(b.p, b.n, &g);
  if (!why && !g.open_failed && !g.read_failed && fmt == MOL_FMT_XYZ && !is_space_run(b.p, b.n) && g.st.last_no == 0 &&
      !(b.n >= 3 && memcmp(b.p, "\xEF\xBB\xBF", 3) == 0))
    why = failf("xyz: a non-blank file gave no record and no error");
  if (!why && structured) { /* every other record as before */
    struct got o;
    why = read_buf(dir, fmt, &opt, sd->p, sd->n, &o);
    int m = 0;
    int64_t jline = 1;
    for (size_t q = 0; q < sp[j].s; q++)
      jline += sd->p[q] == '\n';
    for (int i = 0; i < o.n && !why; i++) {
      if (!o.r[i].text) continue;
      /* the seed's record j (the mutated one) is skipped: it is known by
       * its line (a seed may hold the same record twice) */
      if (o.r[i].line == jline) continue;
      while (m < g.n && !(g.r[m].text && g.r[m].len == o.r[i].len && !memcmp(g.r[m].text, o.r[i].text, o.r[i].len)))
        m++;
      if (m == g.n)
        why = failf("record %d of the seed (line %lld), not the mutated one, is gone: '%s'", i + 1,
                    (long long)o.r[i].line, show(o.r[i].text, o.r[i].len < 80 ? o.r[i].len : 80));
      else
        m++;
    }
    got_free(&o);
  }
  if (!why && !replay && !g.open_failed && rng_below(&r, 16) == 0) { /* gzip'd: the same records */
    char gzp[1100];
    snprintf(gzp, sizeof gzp, "%s/input_gz.%s.gz", dir, EXT[fmt]);
    if (write_gz(gzp, b.p, b.n) != 0) {
      why = failf("cannot write %s", gzp);
    } else {
      struct got z;
      why = read_all(gzp, fmt, &opt, b.p, b.n, 1, &z);
      if (!why && (z.n != g.n || z.read_failed != g.read_failed || z.open_failed != g.open_failed))
        why = failf("gzip'd copy: %d records (read failed %d), plain: %d (%d)", z.n, z.read_failed, g.n, g.read_failed);
      for (int i = 0; !why && i < g.n; i++)
        if (z.r[i].no != g.r[i].no || z.r[i].line != g.r[i].line || !z.r[i].text != !g.r[i].text ||
            (g.r[i].text && (z.r[i].len != g.r[i].len || memcmp(z.r[i].text, g.r[i].text, g.r[i].len))))
          why = failf("gzip'd copy: record %d differs", i + 1);
      got_free(&z);
    }
  }
  got_free(&g);
  free(b.p);
  if (why) {
    size_t l = strlen(g_sh->msg);
    snprintf(g_sh->msg + l, sizeof g_sh->msg - l, "%s", optdesc);
    if (sd) {
      l = strlen(g_sh->msg);
      snprintf(g_sh->msg + l, sizeof g_sh->msg - l, " (from seed %s)", sd->name);
    }
  }
  return why;
}

/* ---- the YAML target ------------------------------------------------------------------- */

static char *print_tree(const char *path, const struct cfg_node *t) {
  FILE *f = fopen(path, "w");
  if (!f) return NULL;
  cfg_print(f, t);
  fclose(f);
  return tu_read(path, NULL);
}

/* Each message names the file with line:col >= 1, or is of another source. */
static const char *check_msgs(const struct cfg_errors *e, const char *path) {
  size_t pl = strlen(path);
  for (int i = 0; i < e->n; i++) {
    const char *m = e->msgs[i];
    if (!m || !*m) return failf("config error %d is empty", i);
    if (strncmp(m, path, pl) == 0 && m[pl] == ':' && isdigit((unsigned char)m[pl + 1])) {
      char *q;
      long line = strtol(m + pl + 1, &q, 10);
      long col = *q == ':' ? strtol(q + 1, &q, 10) : 0;
      /* 0:0 is the whole file (it cannot be read); otherwise both are 1-based */
      if (line < 0 || col < 0 || (line == 0) != (col == 0) || *q != ':')
        return failf("config error without a 1-based line:col: %s", m);
    }
  }
  return NULL;
}

static const char *yaml_one(const char *dir, uint64_t seed, int64_t iter, const char *replay) {
  struct rng r = rng_for(seed, "yaml", (uint64_t)iter);
  struct buf b = {0};
  const struct seed *sd = NULL;
  const char *sets[2];
  char setbuf[2][512];
  int n_sets = 0;
  if (replay) {
    size_t n;
    char *text = tu_read(replay, &n);
    if (!text) return failf("cannot read %s", replay);
    buf_set(&b, text, n);
    free(text);
  } else {
    sd = pick_seed(&r, 1);
    buf_set(&b, sd->p, sd->n);
    g_big_lines = 0;
    mutate(&r, &b, 1);
    if (rng_below(&r, 4) == 0) { /* a --set override, mutated too */
      static const char *const base[] = {"ingest.workers=2",
                                         "stages.train.epochs=3",
                                         "workflow=x",
                                         "sets.train.0.path=a.sdf",
                                         "graph.cutoff=4.5",
                                         "train.arch.degrees=2",
                                         "stages.rank.outputs=[hits.csv]"};
      struct buf s = {0};
      const char *t = base[rng_below(&r, sizeof base / sizeof base[0])];
      buf_set(&s, t, strlen(t));
      if (rng_below(&r, 2)) mutate_once(&r, &s, NULL);
      size_t k = 0;
      for (size_t i = 0; i < s.n && k < sizeof setbuf[0] - 1; i++)
        setbuf[0][k++] = s.p[i] ? (char)s.p[i] : 'x';
      setbuf[0][k] = 0;
      sets[n_sets++] = setbuf[0];
      free(s.p);
    }
  }
  static int frag_written;
  if (!frag_written) { /* the fragment the seeds include */
    char fp[1100];
    snprintf(fp, sizeof fp, "%s/frag.yaml", dir);
    frag_written = write_file(fp, "run: {chunk_size: 77}\n", 22) == 0;
  }
  snprintf(g_sh->path, sizeof g_sh->path, "%s/wf.yaml", dir);
  if (write_file(g_sh->path, b.p, b.n) != 0) return failf("cannot write %s", g_sh->path);
  free(b.p);
  struct cfg_errors e = {0};
  int checked = !replay && rng_below(&r, 4) == 0;
  struct cfg_node *t =
      checked ? cfg_load_checked(g_sh->path, sets, n_sets, "*", &e) : cfg_load(g_sh->path, sets, n_sets, &e);
  const char *why = NULL;
  if (!t && e.n == 0) why = failf("the workflow was refused without a message");
  if (!why) why = check_msgs(&e, g_sh->path);
  if (!why && t) {
    char p1[1100], p2[1100];
    snprintf(p1, sizeof p1, "%s/printed.yaml", dir);
    snprintf(p2, sizeof p2, "%s/printed2.yaml", dir);
    char *t1 = print_tree(p1, t);
    struct cfg_errors e2 = {0};
    struct cfg_node *t2 = cfg_load(p1, NULL, 0, &e2);
    if (!t2) {
      why = failf("the loaded workflow, printed, does not load again: %s\n--- printed:\n%.3000s",
                  e2.n ? e2.msgs[0] : "(no message)", t1 ? t1 : "(none)");
    } else {
      char *t2s = print_tree(p2, t2);
      if (cfg_hash(SE3_HASH_INIT, t2) != cfg_hash(SE3_HASH_INIT, t))
        why = failf("the loaded workflow, printed and loaded again, is another tree\n--- printed:\n%.3000s",
                    t1 ? t1 : "");
      else if (!t1 || !t2s || strcmp(t1, t2s) != 0)
        why = failf("the loaded workflow prints differently once reloaded\n--- first:\n%.2000s\n--- second:\n%.2000s",
                    t1 ? t1 : "", t2s ? t2s : "");
      free(t2s);
      cfg_node_free(t2);
    }
    cfg_errors_free(&e2);
    free(t1);
  }
  cfg_node_free(t);
  cfg_errors_free(&e);
  if (why && n_sets) {
    size_t l = strlen(g_sh->msg);
    snprintf(g_sh->msg + l, sizeof g_sh->msg - l, " [with --set '%s']", show(sets[0], strlen(sets[0])));
  }
  if (why && sd) {
    size_t l = strlen(g_sh->msg);
    snprintf(g_sh->msg + l, sizeof g_sh->msg - l, " (from seed %s)", sd->name);
  }
  return why;
}

/* ---- the blob target ---------------------------------------------------------------------- */

static const char *blob_one(const char *dir, uint64_t seed, int64_t iter, const char *replay) {
  struct rng r = rng_for(seed, "blobs", (uint64_t)iter);
  struct buf b = {0};
  int graph_blob = 0;
  if (replay) {
    size_t n;
    char *text = tu_read(replay, &n);
    if (!text) return failf("cannot read %s", replay);
    buf_set(&b, text, n);
    free(text);
    graph_blob = n >= 4 && !memcmp(b.p, GRAPH_BLOB_MAGIC, 4);
  } else {
    struct mol m;
    mol_init(&m);
    tu_seed(rng_next(&r));
    tu_chain_mol(&m, 1 + (int)rng_below(&r, 30), (int)rng_below(&r, 4));
    uint8_t *blob;
    size_t len;
    if (mol_to_blob(&m, &blob, &len) != 0) return failf("mol_to_blob failed");
    graph_blob = rng_below(&r, 3) == 0;
    if (graph_blob) {
      static const uint8_t el[] = {1, 6, 7, 8};
      struct graph_opts go = {.cutoff = 3.0,
                              .edges = GRAPH_EDGES_RADIUS_BONDS,
                              .elements = el,
                              .n_elements = 4,
                              .with_other = 1,
                              .with_charge = 1};
      struct graph gr;
      graph_init(&gr);
      struct se3_error e;
      se3_error_clear(&e);
      free(blob);
      if (graph_build(&m, &go, &gr, &e) != 0 || graph_to_blob(&gr, &blob, &len) != 0)
        return failf("graph of a chain molecule: %s", se3_error_str(&e).s);
      graph_free(&gr);
    }
    mol_free(&m);
    buf_set(&b, blob, len);
    free(blob);
    size_t ops = 1 + rng_below(&r, 4);
    for (size_t i = 0; i < ops; i++) {
      size_t at = rng_below(&r, b.n);
      switch (rng_below(&r, 6)) {
      case 0:
        if (b.n) b.p[at] ^= (unsigned char)(1u << rng_below(&r, 8));
        break;
      case 1:
        if (b.n) b.p[at] = INTERESTING[rng_below(&r, sizeof INTERESTING)];
        break;
      case 2: { /* a count or index made huge, negative or off by one */
        static const uint32_t v[] = {0, 1, 0xffffffffu, 0x7fffffffu, 0x80000000u, 0x40000000u, 2, 1000000};
        size_t off = rng_below(&r, 2) ? 8 + 4 * rng_below(&r, 2) : at & ~(size_t)3;
        uint32_t x = v[rng_below(&r, sizeof v / sizeof v[0])];
        if (off + 4 <= b.n)
          for (int k = 0; k < 4; k++)
            b.p[off + k] = (unsigned char)(x >> (8 * k));
        break;
      }
      case 3: { /* a coordinate or feature made NaN, inf or huge */
        static const uint32_t f[] = {0x7fc00000u, 0x7f800000u, 0xff800000u, 0x7f7fffffu, 0x00000001u};
        size_t off = (at & ~(size_t)3);
        uint32_t x = f[rng_below(&r, sizeof f / sizeof f[0])];
        if (off + 4 <= b.n)
          for (int k = 0; k < 4; k++)
            b.p[off + k] = (unsigned char)(x >> (8 * k));
        break;
      }
      case 4:
        buf_erase(&b, at, 1 + rng_below(&r, 16));
        break;
      default:
        b.n = rng_below(&r, b.n + 1);
      }
    }
    int v = (int)rng_below(&r, 4); /* 0, 1: reseal the checksum so the structure is what gets tested; 2: version 1 */
    if (v < 2 && b.n >= 24) crc32c_seal(b.p, b.n);
    if (v == 2 && b.n >= 6) {
      b.p[4] = 1;
      b.p[5] = 0;
    }
  }
  snprintf(g_sh->path, sizeof g_sh->path, "%s/input.%s", dir, graph_blob ? "graph" : "mol");
  if (write_file(g_sh->path, b.p, b.n) != 0) return failf("cannot write %s", g_sh->path);
  struct se3_error be;
  se3_error_clear(&be);
  const char *why = NULL;
  if (graph_blob) {
    struct graph gr;
    graph_init(&gr);
    int rc = graph_from_blob(b.p, b.n, &gr, &be);
    if (rc != 0 && !be.message[0]) why = failf("graph_from_blob refused without a message");
    for (int e = 0; !why && rc == 0 && e < gr.n_edges; e++)
      if (gr.src[e] < 0 || gr.src[e] >= gr.n_nodes || gr.dst[e] < 0 || gr.dst[e] >= gr.n_nodes ||
          gr.src[e] == gr.dst[e])
        why = failf("graph_from_blob accepted edge %d: %d -> %d of %d nodes", e, gr.src[e], gr.dst[e], gr.n_nodes);
    graph_free(&gr);
  } else {
    struct mol m;
    int rc = mol_from_blob(b.p, b.n, &m, &be);
    if (rc != 0 && !be.message[0]) why = failf("mol_from_blob refused without a message");
    for (int i = 0; !why && rc == 0 && i < m.n_bonds; i++)
      if (m.bonds[i].a >= m.bonds[i].b || m.bonds[i].b >= (uint32_t)m.n_atoms)
        why = failf("mol_from_blob accepted bond %d: %u-%u of %d atoms", i, m.bonds[i].a, m.bonds[i].b, m.n_atoms);
    if (!why && rc == 0) { /* the graph stage on what came out */
      static const uint8_t el[] = {1, 6, 7, 8};
      struct graph_opts go = {.cutoff = 5.0,
                              .max_neighbors = (int)rng_below(&r, 3) * 4,
                              .edges = (enum graph_edges)rng_below(&r, 3),
                              .elements = el,
                              .n_elements = 4,
                              .with_other = 1,
                              .with_charge = 1,
                              .with_atomic_number = 1};
      struct graph gr, back;
      graph_init(&gr);
      graph_init(&back);
      struct se3_error ge;
      se3_error_clear(&ge);
      if (graph_build(&m, &go, &gr, &ge) == 0) {
        uint8_t *gb;
        size_t gl;
        if (graph_to_blob(&gr, &gb, &gl) != 0) {
          why = failf("graph_to_blob failed on a built graph");
        } else {
          if (graph_from_blob(gb, gl, &back, &ge) != 0)
            why = failf("a graph built from a decoded molecule (%d atoms) does not read back: %s", m.n_atoms,
                        se3_error_str(&ge).s);
          free(gb);
        }
      } else if (!ge.message[0]) {
        why = failf("graph_build failed without a message");
      }
      graph_free(&gr);
      graph_free(&back);
    }
    mol_free(&m);
  }
  free(b.p);
  return why;
}

/* ---- the workers target: records through the product's Open Babel workers --------------- */

static struct wpool *g_pool; /* one pool per forked batch */

static void stop_pool(void) {
  if (g_pool) wpool_stop(g_pool);
  g_pool = NULL;
}

/* The atom count a V2000 SD record or an XYZ record declares, or -1. */
static long declared_atoms(enum mol_format fmt, const char *t) {
  if (fmt == MOL_FMT_XYZ) {
    char *e;
    long n = strtol(t, &e, 10);
    return e != t ? n : -1;
  }
  const char *l = t;
  for (int k = 0; k < 3 && l; k++) { /* the counts line is the fourth */
    l = strchr(l, '\n');
    if (l) l++;
  }
  if (!l) return -1;
  const char *e = strchr(l, '\n');
  if (!e || e - l < 39 || memcmp(e - 5 - (e[-1] == '\r'), "V2000", 5) != 0) return -1;
  char aaa[4] = {l[0], l[1], l[2], 0};
  char *q;
  long n = strtol(aaa, &q, 10);
  return q != aaa && !*q ? n : -1;
}

static const char *workers_one(const char *dir, uint64_t seed, int64_t iter, const char *replay) {
  struct rng r = rng_for(seed, "workers", (uint64_t)iter);
  if (!g_pool) {
    /* every fragment kept: the invariant below counts the atoms a record declares */
    struct ob_parse_opts po = {
        .format = "sdf", .add_hydrogens = 0, .gen3d = OB_GEN3D_NEVER, .max_atoms = 2000, .fragments = OB_FRAG_KEEP};
    struct mol_check_opts co = {.max_atoms = 5000, .min_distance = 0.0};
    struct se3_error e;
    g_pool = wpool_start(2, &po, &co, WPOOL_INPUT_SHAPE_REJECT, &e);
    if (!g_pool) return failf("wpool_start: %s", se3_error_str(&e).s);
    g_child_cleanup = stop_pool;
  }
  struct buf b = {0};
  enum mol_format fmt;
  const struct seed *sd = NULL;
  if (replay) {
    size_t n;
    char *text = tu_read(replay, &n);
    if (!text) return failf("cannot read %s", replay);
    buf_set(&b, text, n);
    free(text);
    fmt = rec_format_from_path(replay);
  } else {
    do
      sd = pick_seed(&r, 0);
    while (sd->n > 20000); /* Open Babel's time goes with the size */
    buf_set(&b, sd->p, sd->n);
    fmt = sd->fmt;
    mutate(&r, &b, 0);
  }
  snprintf(g_sh->path, sizeof g_sh->path, "%s/input.%s", dir, EXT[fmt]);
  if (write_file(g_sh->path, b.p, b.n) != 0) return failf("cannot write %s", g_sh->path);
  free(b.p);
  struct se3_error e;
  struct rec_options ro = {.max_record_bytes = 1 << 20};
  struct rec_reader *rd = rec_open(g_sh->path, fmt, &ro, &e);
  if (!rd) return NULL; /* a CSV without its header: checked by the records target */
  enum { MAXJ = 6 };
  struct wjob jobs[MAXJ];
  char *texts[MAXJ];
  int nj = 0;
  struct rec rec;
  while (nj < MAXJ && rec_next(rd, &rec, &e) == 1) {
    if (rec.error) continue;
    texts[nj] = malloc(rec.len + 1);
    memcpy(texts[nj], rec.text, rec.len + 1);
    memset(&jobs[nj], 0, sizeof jobs[nj]);
    jobs[nj].text = texts[nj];
    jobs[nj].len = rec.len;
    jobs[nj].format = rec_format_ob(fmt);
    nj++;
  }
  rec_close(rd);
  const char *why = NULL;
  if (nj) {
    volatile sig_atomic_t stop = 0;
    int rc = wpool_run(g_pool, jobs, nj, 3.0, &stop, NULL, NULL, &e);
    if (rc != 0) why = failf("wpool_run returned %d: %s", rc, se3_error_str(&e).s);
    for (int i = 0; i < nj && !why; i++) {
      if (jobs[i].status == 1 && !jobs[i].why.reason[0])
        why = failf("record %d rejected without a reason", i + 1);
      else if (jobs[i].status == 0 && (jobs[i].mol.n_atoms < 1 || !jobs[i].mol.smiles || !jobs[i].mol.smiles[0]))
        why = failf("record %d accepted with %d atoms and SMILES '%s'", i + 1, jobs[i].mol.n_atoms,
                    jobs[i].mol.smiles ? jobs[i].mol.smiles : "(null)");
      else if (jobs[i].status != 0 && jobs[i].status != 1)
        why = failf("record %d: status %d", i + 1, jobs[i].status);
      if (!why && jobs[i].status == 0 && (fmt == MOL_FMT_SDF || fmt == MOL_FMT_XYZ)) {
        long want = declared_atoms(fmt, texts[i]);
        if (want >= 0 && jobs[i].mol.n_atoms < want) /* more is fine: SD aliases expand */
          why = failf("record %d declares %ld atoms and was accepted with %d (%s): '%s'", i + 1, want,
                      jobs[i].mol.n_atoms, jobs[i].mol.smiles,
                      show(texts[i], strlen(texts[i]) < 300 ? strlen(texts[i]) : 300));
      }
    }
  }
  for (int i = 0; i < nj; i++) {
    mol_free(&jobs[i].mol);
    free(texts[i]);
  }
  if (why && sd) {
    size_t l = strlen(g_sh->msg);
    snprintf(g_sh->msg + l, sizeof g_sh->msg - l, " [%s] (from seed %s)", rec_format_name(fmt), sd->name);
  }
  return why;
}

/* ---- the tests ---------------------------------------------------------------------------- */

Test(fuzz, records, .timeout = 900) { fuzz_test(&(struct target){"records", 0.45, 0, records_one, NULL}); }

Test(fuzz, yaml, .timeout = 900) { fuzz_test(&(struct target){"yaml", 0.2, 0, yaml_one, NULL}); }

Test(fuzz, blobs, .timeout = 900) { fuzz_test(&(struct target){"blobs", 0.1, 0, blob_one, NULL}); }

Test(fuzz, workers, .timeout = 900) { fuzz_test(&(struct target){"workers", 0.25, 30, workers_one, NULL}); }

/* Every seed as it is, the regression inputs (regress_*) among them: the
 * same checks, no mutation, so a defect once found fails here every time. */
Test(fuzz, seeds_as_they_are, .timeout = 300) {
  corpus_load();
  static char first[10000], all[40000];
  int n = 0, bad = 0;
  all[0] = 0;
  for (int i = 0; i < g_n_seeds; i++) {
    const struct seed *s = &g_seeds[i];
    if (ends_with(s->name, ".gz")) continue; /* read whole by the target: plain files only */
    struct target t = {s->yaml ? "yaml" : "records", 0, 0, s->yaml ? yaml_one : records_one, s->name};
    if (run_target(&t, first, sizeof first)) {
      bad++;
      size_t l = strlen(all);
      snprintf(all + l, sizeof all - l, "%s\n", first);
    }
    n++;
  }
  cr_assert_gt(n, 20);
  cr_assert_eq(bad, 0, "%d of %d seeds fail:\n%s", bad, n, all);
}

/* Found by the yaml target: `workdir:` with nothing after it was dropped as
 * "absent" by validation after the default had been decided, so the loaded
 * workflow had no workdir at all (the run wrote into the current folder),
 * and `check` printed a workflow that reloads with another one. An empty
 * workdir is the default, runs/<workflow> beside the file, like a missing one. */
Test(fuzz, regress_null_workdir_gets_the_default) {
  char *dir = tu_tmpdir("fuzz_null_workdir");
  char *wf = tu_write(dir, "wf.yaml", "workflow: nullwd\nworkdir:\nsets:\n  s:\n    - {path: a.smi}\n");
  struct cfg_errors e = {0};
  struct cfg_node *t = cfg_load(wf, NULL, 0, &e);
  cr_assert_not_null(t, "%s", e.n ? e.msgs[0] : "");
  char want[1200];
  snprintf(want, sizeof want, "%s/runs/nullwd", dir);
  const char *wd = cfg_str_opt(t, "workdir"); /* (absent was the bug: not an abort here) */
  cr_assert_not_null(wd, "no workdir");
  cr_assert_str_eq(wd, want);
  cfg_node_free(t);
  free(wf);
  free(dir);
}

/* Found by the blobs target: coordinates are checked to be finite, but two
 * bonded atoms at x = -3e38 and +3e38 Å (finite as doubles and as floats)
 * are 6e38 Å apart, past the largest float: graph_build stored an infinite
 * distance feature, the graph stage wrote that blob, the basis stage then
 * refused it as damaged and `se3screen verify` reported the database
 * DAMAGED (tests/data/fuzz/regress_mol2_far_bonded_atoms.mol2 does it end to
 * end). A graph_build that succeeds must give a graph its own blob reader
 * takes back; refusing such a molecule, with a message, is as good. */
Test(fuzz, regress_far_bonded_atoms_graph_reads_back) {
  struct mol m;
  mol_init(&m);
  tu_add_atom(&m, 6, -3e38, 0, 0);
  tu_add_atom(&m, 6, 3e38, 0, 0);
  tu_add_bond(&m, 0, 1, 1);
  m.dim = 3;
  static const uint8_t el[] = {1, 6, 7, 8};
  for (int mode = 0; mode < 3; mode++) {
    struct graph_opts go = {.cutoff = 5.0, .edges = (enum graph_edges)mode, .elements = el, .n_elements = 4};
    struct graph g, back;
    graph_init(&g);
    graph_init(&back);
    struct se3_error e;
    se3_error_clear(&e);
    if (graph_build(&m, &go, &g, &e) != 0) {
      cr_assert_neq(e.message[0], 0, "graph_build refused without a message");
      continue;
    }
    uint8_t *blob;
    size_t len;
    cr_assert_eq(graph_to_blob(&g, &blob, &len), 0);
    cr_assert_eq(graph_from_blob(blob, len, &back, &e), 0,
                 "edges mode %d: graph_build made a graph of %d edges its blob reader refuses: %s", mode, g.n_edges,
                 se3_error_str(&e).s);
    free(blob);
    graph_free(&g);
    graph_free(&back);
  }
  mol_free(&m);
}
