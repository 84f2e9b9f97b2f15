/* `se3screen export` through the binary, on a real screen: SDF read back
 * through Open Babel (the library se3screen links, and the obabel command
 * where it is installed) with the database's molecules, names and tags; CSV
 * read back by Python's csv module equal to `query --csv` and to the stored
 * values; SMILES lines; refused usages with their exit codes and messages,
 * and no file left behind by a failure; `top --json` and `query --json` read
 * by Python's json module. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "chem/mol.h"
#include "chem/obbridge.h"
#include "chem/records.h"
#include "tests/testutil.h"

/* The system's Python, with its csv, json and sqlite3 modules (the python3
 * on PATH may be another one). */
#define PY "/usr/bin/python3"

/* A screen to export from, made once per test run and shared by the tests
 * (each runs in its own process): train on the bundled QM9 records, score a
 * library of named molecules (QM9 titles) and unnamed ones (ESOL SMILES),
 * rank every score. The runner's pid in a marker file tells this run's
 * screen from a stale one. Returns the folder holding work/. */
static const char *screen(void) {
  static char dir[1024];
  snprintf(dir, sizeof dir, "%s/export", SE3_TEST_TMP);
  char marker[1100], want[32], lock[1100];
  snprintf(marker, sizeof marker, "%s/ready", dir);
  snprintf(want, sizeof want, "%d\n", (int)getppid());
  /* Criterion runs the tests in processes side by side: the first to come
   * builds the screen while the others wait on the lock (two built it at
   * once before, and one found the other's run holding screen.db) */
  snprintf(lock, sizeof lock, "%s/export.lock", SE3_TEST_TMP);
  mkdir(SE3_TEST_TMP, 0755);
  int fd = open(lock, O_RDWR | O_CREAT, 0644);
  cr_assert(fd >= 0 && flock(fd, LOCK_EX) == 0, "cannot lock %s", lock);
  char *have = tu_read(marker, NULL);
  int fresh = have && !strcmp(have, want);
  free(have);
  if (fresh) {
    close(fd); /* the lock goes with it */
    return dir;
  }
  char *d = tu_tmpdir("export");
  cr_assert_not_null(d);
  free(d);
  char yaml[2048];
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: work\nrun: {progress: none}\n"
           "sets:\n  train:\n    - path: %s\n      labels_csv: {path: %s, join: mol_id, columns: [gap]}\n"
           "  library:\n    - {path: %s}\n    - {path: %s}\n"
           /* one conformer a molecule: the files without conformer_sd (test_conformers has it) */
           "stages:\n  ingest: {workers: 1, conformers: 1}\n  graph: {edges: radius+bonds, cutoff: 4.0}\n"
           "  train: {ensemble: 1, target: gap, epochs: 2, batch_size: 4}\n  score: {set: library}\n  rank: {top: 0}\n",
           tu_src("workflows/data/qm9_mini.sdf"), tu_src("workflows/data/qm9_mini.sdf.csv"),
           tu_src("workflows/data/qm9_mini.sdf"), tu_src("workflows/data/delaney_first60.csv"));
  free(tu_write(dir, "wf.yaml", yaml));
  char *out = NULL;
  int rc = tu_se3(&out, "run %s/wf.yaml", dir);
  cr_assert_eq(rc, 0, "%s", out);
  free(out);
  free(tu_write(dir, "ready", want));
  close(fd);
  return dir;
}

/* dir/work/screen.db */
static const char *db_of(const char *dir) {
  static char db[1100];
  snprintf(db, sizeof db, "%s/work/screen.db", dir);
  return db;
}

static void premise(const char *db) {
  /* what the checks below need from the screen: names, more than a handful
   * of hits, no ensemble spread. (The ESOL rows were unnamed hits once;
   * since issue 31 every molecule has a name, a generated one where its
   * input gives none, and the checks take an empty name as they did.) */
  cr_assert_gt(tu_query_int(db, "SELECT count(*) FROM ranked_hits WHERE name <> ''"), 5);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM ranked_hits WHERE std IS NOT NULL"), 0);
}

/* Reads an SD file through Open Babel (ob_parse) and checks each record
 * against row `rank` of ranked_hits, in order: the title is the name, the
 * InChIKey's connectivity block is the molecule's (Open Babel may see stereo
 * in the 3D coordinates that the SMILES left open), the coordinates are 3D
 * with every stored atom, and the tags hold the row's values exactly.
 * Returns the number of records. */
static void check_record(int i, const struct mol *m, void *ctx) {
  const char *db = ctx;
  int n = i;
  char q[1024];
  /* tu_query writes a REAL with C's %.17g (SQLite's printf stops at 16 digits) */
  snprintf(q, sizeof q,
           "SELECT h.name, substr(h.inchikey, 1, 14), m.n_atoms, h.rank, h.score, h.smiles, h.inchikey, h.target, "
           "h.set_name, h.record_no, h.mol_id FROM ranked_hits h JOIN molecules m ON m.id = h.mol_id "
           "WHERE h.rank = %d",
           n + 1);
  char *want = tu_query(db, q);
  cr_assert(want && *want, "no hit of rank %d", n + 1);
  const char *score = mol_tag(m, "score");
  char got[2048], exact[64] = "(no score tag)";
  if (score) snprintf(exact, sizeof exact, "%.17g", strtod(score, NULL));
  snprintf(got, sizeof got, "%s|%.14s|%d|%s|%s|%s|%s|%s|%s|%s|%s\n", m->name ? m->name : "(no title)", m->inchikey,
           m->n_atoms, mol_tag(m, "rank"), exact, mol_tag(m, "smiles"), mol_tag(m, "inchikey"), mol_tag(m, "target"),
           mol_tag(m, "set_name"), mol_tag(m, "record_no"), mol_tag(m, "mol_id"));
  cr_assert_str_eq(got, want, "record %d:\n  sdf:  %s  view: %s", n + 1, got, want);
  cr_assert_null(mol_tag(m, "name"), "record %d: the name is the title, not a tag", n + 1);
  cr_assert_null(mol_tag(m, "std"), "record %d: a NULL is no tag", n + 1);
  cr_assert_not_null(mol_tag(m, "source_file"));
  free(want);
}

static int check_sdf(const char *path, const char *db) { return tu_sdf_each(path, check_record, (void *)db); }

Test(export, sdf_reads_back_through_open_babel) {
  const char *dir = screen(), *db = db_of(dir);
  premise(db);
  long long hits = tu_query_int(db, "SELECT count(*) FROM ranked_hits");
  char path[1200], *out = NULL;
  snprintf(path, sizeof path, "%s/all.sdf", dir);
  cr_assert_eq(tu_se3(&out, "export %s/work --format sdf -o %s", dir, path), 0, "%s", out);
  char said[1300];
  snprintf(said, sizeof said, "export: %lld rows written to %s", hits, path);
  cr_assert(strstr(out, said), "the count on stderr: %s", out);
  free(out);
  cr_assert_eq(check_sdf(path, db), hits);
  /* the obabel command reads the same number of molecules, with their titles */
  if (tu_sh(NULL, "command -v obabel") == 0) {
    cr_assert_eq(tu_sh(&out, "obabel -isdf %s -osmi 2>/dev/null | cut -f2", path), 0);
    char *names = tu_query(db, "SELECT name FROM ranked_hits ORDER BY rank");
    cr_assert_str_eq(out, names, "obabel's titles differ from ranked_hits' names");
    free(names);
    free(out);
  }
  /* --top N: the first N, given a database file rather than the workdir */
  snprintf(path, sizeof path, "%s/top7.sdf", dir);
  cr_assert_eq(tu_se3(&out, "export %s --format sdf --top 7 -o %s", db, path), 0, "%s", out);
  free(out);
  cr_assert_eq(check_sdf(path, db), 7);
  /* a query's rows: molecules by id, the title from molecules.name when the
   * row has no name column, every column a tag */
  snprintf(path, sizeof path, "%s/q.sdf", dir);
  cr_assert_eq(tu_se3(&out,
                      "export %s/work --format sdf -o %s --query \"SELECT id, inchikey, 'x,y' AS note FROM molecules "
                      "WHERE set_name = 'train' AND name = 'gdb_3'\"",
                      dir, path),
               0, "%s", out);
  free(out);
  cr_assert_eq(ob_init(), 0);
  char *text = tu_read(path, NULL);
  cr_assert_not_null(text);
  struct ob_parse_opts po = {.format = "sdf", .gen3d = OB_GEN3D_NEVER};
  struct mol m;
  char why[256];
  cr_assert_eq(ob_parse(text, strlen(text), &po, &m, why, sizeof why), 0, "%s", why);
  cr_assert_str_eq(m.name, "gdb_3");
  char *key = tu_query(db, "SELECT inchikey FROM molecules WHERE set_name = 'train' AND name = 'gdb_3'");
  key[strcspn(key, "\n")] = 0;
  cr_assert_str_eq(mol_tag(&m, "inchikey"), key);
  cr_assert_str_eq(mol_tag(&m, "note"), "x,y");
  cr_assert_eq(strncmp(m.inchikey, key, 14), 0, "%s is not %s", m.inchikey, key);
  cr_assert_eq(strstr(text, "$$$$") - text + 5, (long)strlen(text), "one record:\n%s", text);
  free(key);
  free(text);
  mol_free(&m);
}

/* A Python script comparing the export's CSV with `query --csv`'s and with
 * the database itself (argv: export.csv query.csv db sql): the same rows,
 * and every field the stored value (NULL empty, numbers read back exactly,
 * text as stored). */
static const char csv_check_py[] =
    "import csv, sqlite3, sys\n"
    "exp, qry, db, sql = sys.argv[1:5]\n"
    "def rows(p):\n"
    "    with open(p, newline='', encoding='utf-8') as f:\n"
    "        return list(csv.reader(f))\n"
    "a, b = rows(exp), rows(qry)\n"
    "if a != b: sys.exit('export and query --csv differ:\\n%r\\n%r' % (a[:3], b[:3]))\n"
    "con = sqlite3.connect('file:' + db + '?mode=ro', uri=True)\n"
    "cur = con.execute(sql)\n"
    "head = [d[0] for d in cur.description]\n"
    "if a[0] != head: sys.exit('header %r, columns %r' % (a[0], head))\n"
    "want = cur.fetchall()\n"
    "if len(a) - 1 != len(want): sys.exit('%d rows, the database has %d' % (len(a) - 1, len(want)))\n"
    "for i, (got, row) in enumerate(zip(a[1:], want)):\n"
    "    for name, g, v in zip(head, got, row):\n"
    "        ok = (g == '') if v is None else (float(g) == v and any(c in g for c in '.en')) if isinstance(v, float) "
    "else (int(g) == v) if isinstance(v, int) else (g == v)\n"
    "        if not ok: sys.exit('row %d, %s: %r, the database has %r' % (i + 1, name, g, v))\n"
    "print(len(want))\n";

static void csv_equal(const char *dir, const char *name, const char *sql) {
  const char *db = db_of(dir);
  char *sqlf = NULL, *py = tu_write(dir, "csv_check.py", csv_check_py);
  cr_assert_geq(asprintf(&sqlf, "%s/%s.sql", dir, name), 0);
  free(tu_write(dir, strrchr(sqlf, '/') + 1, sql));
  char *out = NULL;
  /* the default export is ranked_hits: compare it with that query */
  int is_default = !strcmp(name, "ranked_hits");
  cr_assert_eq(tu_se3(&out, "export %s/work --format csv -o %s/%s.csv %s%s%s", dir, dir, name,
                      is_default ? "" : "--query \"$(cat ", is_default ? "" : sqlf, is_default ? "" : ")\""),
               0, "%s", out);
  free(out);
  cr_assert_eq(tu_sh(&out, "%s query %s \"$(cat %s)\" --csv > %s/%s.query.csv", SE3_BINARY, db, sqlf, dir, name), 0,
               "%s", out);
  free(out);
  int rc = tu_sh(&out, "%s %s %s/%s.csv %s/%s.query.csv %s \"$(cat %s)\"", PY, py, dir, name, dir, name, db, sqlf);
  cr_assert_eq(rc, 0, "%s: %s", name, out);
  free(out);
  free(py);
  free(sqlf);
}

Test(export, csv_is_query_csv_and_the_stored_values) {
  const char *dir = screen();
  premise(db_of(dir));
  /* (one conformer a molecule: every column but conformer_sd, which no hit
   * has; isomer_smiles, which the hits whose SMILES left a stereocentre
   * unmarked have) */
  cr_assert_eq(tu_query_int(db_of(dir), "SELECT count(conformer_sd) FROM ranked_hits"), 0);
  cr_assert_gt(tu_query_int(db_of(dir), "SELECT count(isomer_smiles) FROM ranked_hits"), 0);
  csv_equal(dir, "ranked_hits",
            "SELECT rank, name, smiles, inchikey, target, score, std, set_name, source_file, record_no, mol_id, "
            "nearest_train, similarity, isomer_smiles FROM ranked_hits ORDER BY rank");
  /* commas, quotes, line breaks, NULL, a whole REAL and a blob-free mix */
  csv_equal(dir, "quoted",
            "SELECT rank, 'a,\"b\"' AS odd, name || char(10) || 'second line' AS two_lines, "
            "'say \"\"hi\"\", ok' AS quotes, score, score * 1e-300 AS tiny, 5.0 AS whole, NULL AS nada, "
            "std, mol_id FROM ranked_hits ORDER BY rank DESC");
  char *text = NULL;
  char path[1200];
  snprintf(path, sizeof path, "%s/quoted.csv", dir);
  text = tu_read(path, NULL);
  cr_assert(text && strstr(text, "\"a,\"\"b\"\"\""), "RFC 4180 quoting: %s", text ? text : "(no file)");
  free(text);
}

Test(export, smi_lines) {
  const char *dir = screen(), *db = db_of(dir);
  premise(db);
  char path[1200], *out = NULL;
  snprintf(path, sizeof path, "%s/all.smi", dir);
  cr_assert_eq(tu_se3(&out, "export %s/work --format smi -o %s", dir, path), 0, "%s", out);
  free(out);
  char *got = tu_read(path, NULL);
  char *want = tu_query(db, "SELECT smiles || CASE WHEN name = '' THEN '' ELSE char(9) || name END "
                            "FROM ranked_hits ORDER BY rank");
  cr_assert_str_eq(got, want);
  long long lines = 0;
  for (char *p = got; *p; p++)
    lines += *p == '\n';
  cr_assert_eq(lines, tu_query_int(db, "SELECT count(*) FROM ranked_hits"));
  free(got);
  free(want);
  /* rows without smiles or name: both from molecules by mol_id */
  cr_assert_eq(tu_sh(&out,
                     "%s export %s/work --format smi -o - --query \"SELECT mol_id, score FROM ranked_hits "
                     "WHERE name <> '' ORDER BY rank LIMIT 4\" 2>/dev/null",
                     SE3_BINARY, dir),
               0, "%s", out);
  want = tu_query(db, "SELECT m.smiles || char(9) || m.name FROM ranked_hits h JOIN molecules m ON m.id = h.mol_id "
                      "WHERE h.name <> '' ORDER BY h.rank LIMIT 4");
  cr_assert_str_eq(out, want);
  free(out);
  free(want);
  /* obabel reads every line */
  if (tu_sh(NULL, "command -v obabel") == 0) {
    cr_assert_eq(tu_sh(&out, "obabel -ismi %s -ocan 2>/dev/null | wc -l", path), 0);
    cr_assert_eq(atoll(out), tu_query_int(db, "SELECT count(*) FROM ranked_hits"), "%s", out);
    free(out);
  }
}

Test(export, refused_and_failed_leave_no_file) {
  const char *dir = screen(), *db = db_of(dir);
  char junk[1200];
  snprintf(junk, sizeof junk, "%s/junk.db", dir);
  free(tu_write(dir, "junk.db", "not a database\n"));
  struct {
    const char *args; /* after "export "; %1$s is the folder, OUT the output file */
    int rc;
    const char *says;
  } cases[] = {
      {"%1$s/work --format xml -o OUT", 2, "unknown --format 'xml'"},
      {"%1$s/work -o OUT", 2, "export needs --format"},
      {"%1$s/work --format csv", 2, "export needs -o FILE"},
      {"--format csv -o OUT", 2, "export needs DB or WORKDIR"},
      {"%1$s/work --format csv -o OUT --top 3 --query 'SELECT 1'", 2, "--query and --top exclude each other"},
      {"%1$s/work --format csv -o OUT --top 0", 2, "--top needs a whole number >= 1, got '0'"},
      {"%1$s/work --format csv -o OUT --top 5x", 2, "--top needs a whole number >= 1, got '5x'"},
      {"%1$s/work --format csv -o OUT --frobnicate", 2, "unknown option '--frobnicate'"},
      {"%1$s/nowhere --format csv -o OUT", 2, "nowhere"},
      {"%1$s/junk.db --format csv -o OUT", 2, "not a se3screen database"},
      {"%1$s/work --format csv -o OUT --query 'DELETE FROM ranks'", 2, "not allowed: DELETE from ranks"},
      {"%1$s/work --format csv -o OUT --query 'PRAGMA user_version = 9'", 2, "not allowed: PRAGMA user_version=9"},
      {"%1$s/work --format csv -o OUT --query 'SELECT 1; DROP TABLE ranks'", 2, "one statement only"},
      {"%1$s/work --format csv -o OUT --query ' -- nothing'", 2, "no statement"},
      {"%1$s/work --format csv -o OUT --query 'SELECT * FROM nosuch'", 1, "no such table: nosuch"},
      {"%1$s/work --format sdf -o OUT --query 'SELECT name, score FROM ranked_hits'", 2, "add a column mol_id"},
      {"%1$s/work --format smi -o OUT --query 'SELECT score FROM ranked_hits'", 2, "add smiles or mol_id"},
      {"%1$s/work --format sdf -o OUT --query 'SELECT 424242 AS mol_id'", 1, "mol_id 424242 not found in molecules"},
      {"%1$s/work --format sdf -o OUT --query 'SELECT NULL AS mol_id'", 1, "mol_id is NULL"},
      {"%1$s/work --format smi -o OUT --query 'SELECT NULL AS smiles'", 1, "no SMILES"},
      {"%1$s/work --format csv -o %1$s/no/such/folder/x.csv", 1, "no/such/folder/x.csv"},
      {"%1$s/work --format csv -o %1$s/work", 2, "is a folder"},
      {"%1$s/work --format csv -o %1$s/work/screen.db", 2, "this command reads: writing it would destroy it"},
      {"%1$s/work --format csv -o %1$s/work/screen.db-wal", 2, "this command reads: writing it would destroy it"},
      {"%1$s/work --format csv -o %1$s/work/screen.db.lock", 2, "this command reads: writing it would destroy it"},
      {"%1$s/work --format csv -o OUT --timeout -1", 2, "--timeout needs seconds >= 0, got '-1'"},
      {"%1$s/work --format csv -o OUT --timeout", 2, "--timeout needs a value"},
      {"%1$s/work --format csv -o OUT --max-rows 1k", 2, "--max-rows needs a whole number >= 0, got '1k'"},
      {"%1$s/work --format csv -o OUT --max-bytes 1T", 2, "--max-bytes needs a whole number >= 0"},
  };
  char before[256];
  char *sum = NULL;
  cr_assert_eq(tu_sh(&sum, "md5sum < %s", db), 0);
  snprintf(before, sizeof before, "%s", sum);
  free(sum);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char fmt[2600], args[4096], out_path[1200];
    snprintf(out_path, sizeof out_path, "%s/refused-%zu.out", dir, i);
    /* OUT: the output file, absent before */
    const char *o = strstr(cases[i].args, "OUT");
    if (o)
      snprintf(fmt, sizeof fmt, "%.*s%s%s", (int)(o - cases[i].args), cases[i].args, out_path, o + 3);
    else
      snprintf(fmt, sizeof fmt, "%s", cases[i].args);
    snprintf(args, sizeof args, fmt, dir);
    char *out = NULL;
    int rc = tu_se3(&out, "export %s", args);
    cr_expect_eq(rc, cases[i].rc, "export %s: exit %d, want %d\n%s", args, rc, cases[i].rc, out);
    cr_expect(strstr(out, cases[i].says), "export %s: no '%s' in\n%s", args, cases[i].says, out);
    if (cases[i].rc == 2 && !strstr(cases[i].says, "not allowed"))
      cr_expect(strlen(out) > 0 && strchr(out, '\n') - out < 200, "export %s: not one line first:\n%s", args, out);
    free(out);
    cr_expect_neq(tu_sh(NULL, "test -e %s", out_path), 0, "export %s left %s", args, out_path);
  }
  /* no temporary files left anywhere */
  char *left = NULL;
  cr_assert_eq(tu_sh(&left, "find %s -name '*.tmp-*'", dir), 0);
  cr_expect_str_empty(left, "left behind: %s", left);
  free(left);
  /* A failure part-way keeps the old file as it was: rows 1-2 are fine, row
   * 3 names a molecule that does not exist. */
  char keep[1200];
  snprintf(keep, sizeof keep, "%s/keep.sdf", dir);
  free(tu_write(dir, "keep.sdf", "the old file\n"));
  char *out = NULL;
  int rc = tu_se3(&out,
                  "export %s/work --format sdf -o %s --query \"SELECT mol_id FROM ranked_hits WHERE rank <= 2 "
                  "UNION ALL SELECT 31337\"",
                  dir, keep);
  cr_assert_eq(rc, 1, "%s", out);
  cr_assert(strstr(out, "row 3: mol_id 31337 not found in molecules"), "%s", out);
  free(out);
  char *text = tu_read(keep, NULL);
  cr_assert_str_eq(text, "the old file\n");
  free(text);
  /* and the database was never changed */
  cr_assert_eq(tu_sh(&sum, "md5sum < %s", db), 0);
  cr_assert_str_eq(sum, before, "export changed the database");
  free(sum);
  /* --help */
  cr_assert_eq(tu_se3(&out, "export --help"), 0);
  cr_assert(strstr(out, "usage: se3screen export DB|WORKDIR --format csv|sdf|smi"), "%s", out);
  free(out);
  cr_assert_eq(tu_se3(&out, "--help"), 0);
  cr_assert(strstr(out, "export DB -o FILE"), "%s", out);
  free(out);
}

Test(export, zero_rows_and_stdout) {
  const char *dir = screen();
  const char *none = "SELECT * FROM ranked_hits WHERE rank < 0";
  const char *formats[] = {"csv", "sdf", "smi"};
  /* (a query's own columns: the view's, conformer_sd and isomer_smiles included) */
  const char *contents[] = {"rank,name,smiles,inchikey,target,score,std,set_name,source_file,record_no,mol_id,"
                            "nearest_train,similarity,conformer_sd,isomer_smiles\n",
                            "", ""};
  for (int i = 0; i < 3; i++) {
    char path[1200], *out = NULL;
    snprintf(path, sizeof path, "%s/empty.%s", dir, formats[i]);
    cr_assert_eq(tu_se3(&out, "export %s/work --format %s -o %s --query \"%s\"", dir, formats[i], path, none), 0, "%s",
                 out);
    char said[1300];
    snprintf(said, sizeof said, "export: 0 rows written to %s", path);
    cr_assert(strstr(out, said), "%s", out);
    free(out);
    char *text = tu_read(path, NULL);
    cr_assert_not_null(text, "%s: no file", path);
    cr_assert_str_eq(text, contents[i], "%s", formats[i]);
    free(text);
  }
  /* -o -: the same bytes on stdout as in a file, the count on stderr */
  char path[1200], *file = NULL, *out = NULL;
  snprintf(path, sizeof path, "%s/top5.csv", dir);
  cr_assert_eq(tu_se3(&out, "export %s/work --format csv --top 5 -o %s", dir, path), 0, "%s", out);
  free(out);
  file = tu_read(path, NULL);
  cr_assert_eq(tu_sh(&out, "%s export %s/work --format csv --top 5 -o - 2>/dev/null", SE3_BINARY, dir), 0);
  cr_assert_str_eq(out, file);
  free(out);
  cr_assert_eq(tu_sh(&out, "%s export %s/work --format csv --top 5 -o - 2>&1 >/dev/null", SE3_BINARY, dir), 0);
  cr_assert_str_eq(out, "se3screen export: 5 rows written to stdout (csv)\n");
  free(out);
  free(file);
}

/* top --json and query --json for scripts: valid JSON (Python's parser),
 * numbers as numbers equal to the stored values, NULL as null, text escaped,
 * bytes that are not UTF-8 replaced rather than passed through. */
static const char json_check_py[] =
    "import json, sqlite3, sys\n"
    "db, top, odd = sys.argv[1:4]\n"
    "con = sqlite3.connect('file:' + db + '?mode=ro', uri=True)\n"
    "rows = json.load(open(top, encoding='utf-8'))\n"
    "keys = ['rank', 'name', 'smiles', 'target', 'score', 'std', 'source_file', 'record_no', 'isomer_smiles']\n"
    "want = con.execute('SELECT ' + ', '.join(keys) + ' FROM ranked_hits ORDER BY rank LIMIT 5').fetchall()\n"
    "if len(rows) != 5: sys.exit('%d rows' % len(rows))\n"
    "for r, w in zip(rows, want):\n"
    "    if list(r) != keys: sys.exit('keys %r' % list(r))\n"
    "    if not isinstance(r['score'], float) or not isinstance(r['rank'], int): sys.exit('types: %r' % r)\n"
    "    if tuple(r[k] for k in keys) != tuple(w): sys.exit('%r, the database has %r' % (r, w))\n"
    "o = json.load(open(odd, encoding='utf-8'))\n"
    "want = [{'q': 'a\"b\\\\c', 'nl': 'x\\ny\\tz', 'n': None, 'whole': 5.0, 'big': float('inf'), "
    "'i': 7, 'latin1': 'caf\\ufffd', 'utf8': 'caf\\u00e9'}]\n"
    "if o != want or not isinstance(o[0]['whole'], float): sys.exit('%r, want %r' % (o, want))\n";

Test(export, top_and_query_json_parse) {
  const char *dir = screen(), *db = db_of(dir);
  premise(db);
  char *out = NULL;
  cr_assert_eq(tu_sh(&out, "%s top %s/work -n 5 --json > %s/top.json", SE3_BINARY, dir, dir), 0, "%s", out);
  free(out);
  free(tu_write(dir, "odd.sql",
                "SELECT 'a\"b\\c' AS q, 'x' || char(10) || 'y' || char(9) || 'z' AS nl, NULL AS n, 5.0 AS whole, "
                "1e999 AS big, 7 AS i, CAST(x'636166e9' AS TEXT) AS latin1, 'caf' || char(233) AS utf8"));
  cr_assert_eq(tu_sh(&out, "%s query %s/work \"$(cat %s/odd.sql)\" --json > %s/odd.json", SE3_BINARY, dir, dir, dir), 0,
               "%s", out);
  free(out);
  char *py = tu_write(dir, "json_check.py", json_check_py);
  int rc = tu_sh(&out, "%s %s %s %s/top.json %s/odd.json", PY, py, db, dir, dir);
  char *top = NULL;
  if (rc) top = tu_read(py, NULL);
  cr_assert_eq(rc, 0, "%s", out);
  free(top);
  free(out);
  free(py);
}

/* ---- bounds, signals, SD records and CSV cells (issue 30: 7, 8, 9, 11) ---- */

/* A statement that never ends by itself: a recursive CTE counting up. */
#define ENDLESS "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) "

/* The names in folder dir, one a line ("" when it is empty). */
static char *folder_names(const char *dir) {
  DIR *d = opendir(dir);
  cr_assert_not_null(d, "cannot read %s", dir);
  char *s = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&s, &n);
  for (struct dirent *e; (e = readdir(d));)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) fprintf(f, "%s\n", e->d_name);
  closedir(d);
  fclose(f);
  return s;
}

/* export's --timeout, --max-rows and --max-bytes end a statement that would
 * never end: exit 1, a message naming the bound, and nothing in the output's
 * folder (neither the file nor its temporary). Each run is itself bounded by
 * timeout(1), so a bound that does not work fails rather than hangs. */
Test(export, bounds_stop_an_endless_statement) {
  const char *dir = screen();
  struct {
    const char *format, *bound, *says, *select;
  } cases[] = {
      /* rows keep coming: the bound is checked between rows */
      {"csv", "--timeout 2", "--timeout", "SELECT n, 'row' AS what FROM r WHERE n % 64 = 0"},
      /* no row ever comes: SQLite itself is stopped */
      {"csv", "--timeout 1", "--timeout", "SELECT n FROM r WHERE n < 0"},
      {"sdf", "--timeout 2", "--timeout", "SELECT (SELECT min(mol_id) FROM ranked_hits) AS mol_id, n FROM r"},
      {"sdf", "--max-rows 1000", "--max-rows", "SELECT (SELECT min(mol_id) FROM ranked_hits) AS mol_id, n FROM r"},
      {"smi", "--max-rows 1000", "--max-rows", "SELECT 'CCO' AS smiles, n AS name FROM r"},
      {"csv", "--max-bytes 100000", "--max-bytes", "SELECT n, printf('%.100c', 'x') AS pad FROM r"},
      {"csv", "--max-bytes 100K --max-rows 0", "--max-bytes", "SELECT n, printf('%.100c', 'x') AS pad FROM r"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char name[64], sql[1200], *od, *out = NULL;
    snprintf(name, sizeof name, "export-bound-%zu", i);
    od = tu_tmpdir(name);
    snprintf(sql, sizeof sql, "%s/bound-%zu.sql", dir, i);
    char text[1024];
    snprintf(text, sizeof text, "%s%s", ENDLESS, cases[i].select);
    free(tu_write(dir, strrchr(sql, '/') + 1, text));
    double t0 = tu_now();
    int rc = tu_sh(&out, "timeout -s KILL 120 %s export %s/work --format %s -o %s/out.%s %s --query \"$(cat %s)\"",
                   SE3_BINARY, dir, cases[i].format, od, cases[i].format, cases[i].bound, sql);
    cr_expect_eq(rc, 1, "%s %s: exit %d, want 1 (%.1f s)\n%s", cases[i].format, cases[i].bound, rc, tu_now() - t0, out);
    cr_expect(strstr(out, cases[i].says), "%s %s: the message does not name %s:\n%s", cases[i].format, cases[i].bound,
              cases[i].says, out);
    free(out);
    char *left = folder_names(od);
    cr_expect_str_empty(left, "%s %s left in %s:\n%s", cases[i].format, cases[i].bound, od, left);
    free(left);
    free(od);
  }
  /* a result exactly at a bound is the whole result: written, exit 0 */
  char path[1200], *out = NULL;
  snprintf(path, sizeof path, "%s/bound-exact.csv", dir);
  cr_assert_eq(tu_se3(&out,
                      "export %s/work --format csv -o %s --max-rows 1000 --timeout 0 --query \"%s SELECT n FROM r "
                      "LIMIT 1000\"",
                      dir, path, ENDLESS),
               0, "%s", out);
  cr_assert(strstr(out, "1000 rows written"), "%s", out);
  free(out);
  cr_assert_eq(tu_sh(&out, "wc -l < %s", path), 0);
  cr_assert_eq(atoi(out), 1001, "a header and 1000 rows: %s", out);
  free(out);
}

/* SIGTERM, SIGINT and SIGUSR1 (Slurm's --signal) stop an export at the next
 * row: exit 75, and neither the file nor its temporary is left. The signal
 * goes once the temporary has appeared in the output's folder (the export is
 * then writing rows of a statement that never ends). */
Test(export, signals_stop_with_75_and_leave_nothing) {
  const char *dir = screen();
  char sql[1200], work[1100];
  snprintf(sql, sizeof sql, "%s SELECT n, 'row' AS what FROM r", ENDLESS);
  snprintf(work, sizeof work, "%s/work", dir);
  const int sigs[] = {SIGTERM, SIGINT, SIGUSR1};
  for (int k = 0; k < 3; k++) {
    char name[64], outp[1200], logp[1200];
    snprintf(name, sizeof name, "export-signal-%d", sigs[k]);
    char *od = tu_tmpdir(name);
    snprintf(outp, sizeof outp, "%s/out.csv", od);
    snprintf(logp, sizeof logp, "%s/signal-%d.log", dir, sigs[k]);
    unlink(logp);
    char *argv[] = {"se3screen", "export", work, "--format", "csv", "-o", outp, "--query", sql, NULL};
    int pid = tu_spawn_se3(logp, argv), st = 0;
    double t0 = tu_now();
    for (;;) {
      char *names = folder_names(od);
      int some = names[0] != 0;
      free(names);
      if (some) break;
      pid_t w = waitpid((pid_t)pid, &st, WNOHANG);
      char *log = w == (pid_t)pid ? tu_read(logp, NULL) : NULL;
      cr_assert_neq(w, (pid_t)pid, "export ended (status %d) before its temporary appeared:\n%s", st, log);
      if (tu_now() - t0 > 60) {
        kill((pid_t)pid, SIGKILL);
        tu_wait(pid);
        cr_assert_fail("no temporary in %s after 60 s", od);
      }
      tu_sleep(0.005);
    }
    cr_assert_eq(kill((pid_t)pid, sigs[k]), 0);
    int rc = tu_wait(pid);
    char *log = tu_read(logp, NULL);
    cr_expect_eq(rc, 75, "signal %d: exit %d, want 75\n%s", sigs[k], rc, log ? log : "");
    cr_expect(log && strstr(log, "no file written"), "signal %d: the log does not say so:\n%s", sigs[k],
              log ? log : "");
    free(log);
    char *left = folder_names(od);
    cr_expect_str_empty(left, "signal %d left in %s:\n%s", sigs[k], od, left);
    free(left);
    free(od);
  }
}

/* Rows whose names and values would break SD records if written raw: a title
 * `$$$$` (and starting with it, with line breaks), values holding `$$$$`
 * lines, blank lines and a fake tag header, tag names with < > and a line
 * break. The file must hold exactly one record a row, read so by a plain
 * reader that splits on lines equal to `$$$$` (and reads each tag's value
 * up to its blank line), by the obabel command, and by se3screen's own SDF
 * reader with Open Babel; every title and value as export.h says it writes
 * them (line breaks flattened to one space, a leading `$$$$` prefixed with
 * '_', < > and line breaks in tag names made '_'). */
static const char sd_sql[] =
    "SELECT mol_id, CASE rank % 5 WHEN 0 THEN '$$$$' WHEN 1 THEN '$$$$ and more' || char(10) || '$$$$' "
    "WHEN 2 THEN '  $$$$' WHEN 3 THEN 'two' || char(13) || char(10) || 'lines' ELSE name END AS name, "
    "'a' || char(10) || '$$$$' || char(10) || char(10) || 'b' AS v_lines, "
    "char(10) || '$$$$' || char(10) AS v_dollars, "
    "'x' || char(10) || char(10) || '> <fake>' || char(10) || 'y' AS v_fake_tag, "
    "'$$$$' AS v_just, 'plain' AS \"odd<name>\", 'c' AS \"new\nline\", score "
    "FROM ranked_hits ORDER BY rank LIMIT 30";

static const char sd_check_py[] =
    "import sqlite3, sys\n"
    "sdf, db = sys.argv[1:3]\n"
    "text = open(sdf, encoding='utf-8', newline='').read()\n"
    "recs, cur = [], []\n"
    "for l in text.split('\\n'):\n"
    "    if l == '$$$$': recs.append(cur); cur = []\n"
    "    else: cur.append(l)\n"
    "if cur != ['']: sys.exit('text after the last $$$$: %r' % cur[:5])\n"
    "con = sqlite3.connect('file:' + db + '?mode=ro', uri=True)\n"
    "rows = con.execute('SELECT rank, name, score, mol_id FROM ranked_hits ORDER BY rank LIMIT 30').fetchall()\n"
    "if len(recs) != len(rows): sys.exit('%d records for %d rows' % (len(recs), len(rows)))\n"
    "titles = {0: '_$$$$', 1: '_$$$$ and more $$$$', 2: '_  $$$$', 3: 'two lines'}\n"
    "for i, (rank, name, score, mol_id) in enumerate(rows):\n"
    "    r = recs[i]\n"
    "    if r[0] != titles.get(rank % 5, name): sys.exit('record %d: title %r' % (i + 1, r[0]))\n"
    "    k, tags = r.index('M  END') + 1, {}\n"
    "    while k < len(r):\n"
    "        l = r[k]\n"
    "        k += 1\n"
    "        if not l.startswith('>'):\n"
    "            if l: sys.exit('record %d: %r outside a data item' % (i + 1, l))\n"
    "            continue\n"
    "        a = l.index('<') + 1\n"
    "        tag, vals = l[a:l.index('>', a)], []\n"
    "        while k < len(r) and r[k] != '':\n"
    "            vals.append(r[k]); k += 1\n"
    "        if tag in tags: sys.exit('record %d: tag %r twice' % (i + 1, tag))\n"
    "        tags[tag] = '\\n'.join(vals)\n"
    "    want = {'mol_id': str(mol_id), 'v_lines': 'a $$$$ b', 'v_dollars': '_$$$$', 'v_fake_tag': 'x > <fake> y',\n"
    "            'v_just': '_$$$$', 'odd_name_': 'plain', 'new_line': 'c', 'score': tags.get('score')}\n"
    "    if tags != want: sys.exit('record %d: tags %r, want %r' % (i + 1, tags, want))\n"
    "    if float(tags['score']) != score: sys.exit('record %d: score %r, stored %r' % (i + 1, tags['score'], score))\n"
    "print(len(recs))\n";

static void sd_check_record(int i, const struct mol *m, void *ctx) {
  const char *db = ctx;
  char q[256];
  snprintf(q, sizeof q, "SELECT rank %% 5, name, mol_id FROM ranked_hits WHERE rank = %d", i + 1);
  char *row = tu_query(db, q);
  cr_assert(row && *row, "no hit of rank %d", i + 1);
  row[strcspn(row, "\n")] = 0;
  int r5 = atoi(row);
  char *name = strchr(row, '|') + 1, *id = strrchr(row, '|') + 1;
  name[id - 1 - name] = 0;
  /* Open Babel trims a title's blanks at its ends */
  const char *titles[] = {"_$$$$", "_$$$$ and more $$$$", "_  $$$$", "two lines", name};
  cr_expect_str_eq(m->name, titles[r5], "record %d: title", i + 1);
  const char *tags[][2] = {
      {"mol_id", id},      {"v_lines", "a $$$$ b"}, {"v_dollars", "_$$$$"}, {"v_fake_tag", "x > <fake> y"},
      {"v_just", "_$$$$"}, {"odd_name_", "plain"},  {"new_line", "c"}};
  for (size_t k = 0; k < sizeof tags / sizeof tags[0]; k++) {
    const char *v = mol_tag(m, tags[k][0]);
    cr_expect(v && !strcmp(v, tags[k][1]), "record %d: tag %s is '%s', want '%s'", i + 1, tags[k][0], v ? v : "(none)",
              tags[k][1]);
  }
  cr_expect_eq(m->n_tags, 8, "record %d: %d tags, want 8", i + 1, m->n_tags);
  free(row);
}

Test(export, sdf_records_cannot_be_broken) {
  const char *dir = screen(), *db = db_of(dir);
  char path[1200], sqlf[1200], *out = NULL;
  snprintf(path, sizeof path, "%s/hostile.sdf", dir);
  snprintf(sqlf, sizeof sqlf, "%s/hostile.sql", dir);
  free(tu_write(dir, "hostile.sql", sd_sql));
  cr_assert_eq(tu_se3(&out, "export %s/work --format sdf -o %s --query \"$(cat %s)\"", dir, path, sqlf), 0, "%s", out);
  cr_assert(strstr(out, "30 rows written"), "%s", out);
  free(out);
  /* the plain reader */
  char *py = tu_write(dir, "sd_check.py", sd_check_py);
  int rc = tu_sh(&out, "%s %s %s %s", PY, py, path, db);
  cr_expect_eq(rc, 0, "plain reader: %s", out);
  free(out);
  free(py);
  /* the obabel command: one molecule a row */
  if (tu_sh(NULL, "command -v obabel") == 0) {
    cr_assert_eq(tu_sh(&out, "obabel -isdf %s -osmi 2>/dev/null | wc -l", path), 0);
    cr_expect_eq(atoi(out), 30, "obabel reads %s molecules, want 30", out);
    free(out);
  }
  /* se3screen's own reader and Open Babel: titles and tags as written */
  cr_expect_eq(tu_sdf_each(path, sd_check_record, (void *)db), 30);
}

/* CSV cells that a spreadsheet would run as a formula (text beginning with
 * = + - @, a tab or a carriage return) are written with a ' in front; a
 * number, stored as one or as text, is written as it is. */
Test(export, csv_formulas_are_neutralised) {
  const char *dir = screen();
  char path[1200], *out = NULL;
  snprintf(path, sizeof path, "%s/formula.csv", dir);
  free(tu_write(dir, "formula.sql",
                "SELECT '=1+1' AS eq, '+1+cmd' AS plus, '-2+3+cmd|'' /C calc''!A0' AS minus, '@SUM(A1)' AS at, "
                "char(9) || '=x' AS tab, char(13) || 'x' AS cr, '-1.5' AS num_text, -1.5 AS num, -7 AS int, "
                "'+3e5' AS exp_text, '-' AS dash, 'a=b' AS inner, '' AS empty, 1e999 * -1 AS minf, "
                "'=q' AS \"=head\""));
  cr_assert_eq(tu_se3(&out, "export %s/work --format csv -o %s --query \"$(cat %s/formula.sql)\"", dir, path, dir), 0,
               "%s", out);
  free(out);
  char *text = tu_read(path, NULL);
  cr_assert_not_null(text);
  cr_expect_str_eq(
      text, "eq,plus,minus,at,tab,cr,num_text,num,int,exp_text,dash,inner,empty,minf,'=head\n"
            "'=1+1,'+1+cmd,'-2+3+cmd|' /C calc'!A0,'@SUM(A1),'\t=x,\"'\rx\",-1.5,-1.5,-7,+3e5,'-,a=b,,-inf,'=q\n");
  free(text);
}

/* One convention for the hits (issue 31, docs/outputs.md): the rank stage's
 * hits.sdf carries the SD tags `export --format sdf` writes of ranked_hits
 * (its column names, in its column order, a NULL std left out; the name is
 * the title), and hits.csv's header is ranked_hits' column names. Before,
 * hits.sdf tagged the score with the target's name (<gap>) and hits.csv
 * said `set` where the view says set_name. */
Test(export, hits_files_use_the_view_column_names) {
  const char *dir = screen(), *db = db_of(dir);
  char path[1200], *out = NULL;
  snprintf(path, sizeof path, "%s/view.sdf", dir);
  cr_assert_eq(tu_se3(&out, "export %s/work --format sdf -o %s", dir, path), 0, "%s", out);
  free(out);
  /* every data header line of every record, in order: the tags and their order */
  char *want = NULL, *got = NULL;
  cr_assert_eq(tu_sh(&want, "grep '^>' %s", path), 0);
  cr_assert_eq(tu_sh(&got, "grep '^>' %s/work/hits.sdf", dir), 0, "hits.sdf has no tags: %s", got);
  cr_assert_gt(strlen(want), 0);
  cr_assert_str_eq(got, want, "hits.sdf's tags are not export's of ranked_hits");
  free(want);
  free(got);
  /* the titles: each hit's name */
  cr_assert_eq(tu_sh(&want, "awk 'NR == 1 || prev == \"$$$$\" {print} {prev = $0}' %s", path), 0);
  cr_assert_eq(tu_sh(&got, "awk 'NR == 1 || prev == \"$$$$\" {print} {prev = $0}' %s/work/hits.sdf", dir), 0);
  cr_assert_str_eq(got, want, "hits.sdf's titles are not export's");
  free(want);
  free(got);
  /* hits.csv: the view's column names (conformer_sd, last, only where a
   * hit has one: none here) */
  cr_assert_eq(tu_query_int(db, "SELECT count(conformer_sd) FROM ranked_hits"), 0);
  want = tu_query(db, "SELECT group_concat(name, ',') FROM (SELECT name FROM pragma_table_info('ranked_hits') "
                      "WHERE name <> 'conformer_sd' ORDER BY cid)");
  cr_assert_eq(tu_sh(&got, "head -n 1 %s/work/hits.csv", dir), 0);
  cr_assert_str_eq(got, want, "hits.csv's header is not ranked_hits' columns");
  free(want);
  free(got);
}
