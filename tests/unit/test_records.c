/* test_records.c — splitting molecule files into records: every format,
 * line numbers, CSV quoting and bad rows, XYZ resync, trailing SDF records,
 * gzip input, long lines, the record size cap and the shared data sets. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "chem/records.h"
#include "common/error.h"
#include "tests/testutil.h"

/* ---- helpers ---------------------------------------------------------------- */

struct got {
  int n;
  struct {
    int64_t no, line;
    char *text, *name, *error;
    int n_fields;
    char *fields[8];
  } r[64];
};

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

static void got_free(struct got *g) {
  for (int i = 0; i < g->n && i < 64; i++) {
    free(g->r[i].text);
    free(g->r[i].name);
    free(g->r[i].error);
    for (int k = 0; k < g->r[i].n_fields && k < 8; k++)
      free(g->r[i].fields[k]);
  }
  g->n = 0;
}
static int starts_with(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

/* Reads every record of path (at most 64 kept) into g; returns rec_next's last result. */
static int collect(const char *path, enum mol_format fmt, const struct rec_options *opt, struct got *g) {
  struct se3_error e = {0};
  memset(g, 0, sizeof *g);
  struct rec_reader *r = rec_open(path, fmt, opt, &e);
  cr_assert_not_null(r, "rec_open(%s): %s", path, se3_error_str(&e).s);
  struct rec rec;
  int k;
  while ((k = rec_next(r, &rec, &e)) == 1) {
    cr_assert_eq(rec.record_no, g->n + 1);
    cr_assert_eq(rec.len, strlen(rec.text));
    if (g->n < 64) {
      g->r[g->n].no = rec.record_no;
      g->r[g->n].line = rec.line;
      g->r[g->n].text = strdup(rec.text);
      g->r[g->n].name = dup_or_null(rec.name);
      g->r[g->n].error = dup_or_null(rec.error);
      g->r[g->n].n_fields = rec.n_fields;
      for (int i = 0; i < rec.n_fields && i < 8; i++)
        g->r[g->n].fields[i] = strdup(rec.fields[i]);
    }
    g->n++;
  }
  cr_assert_eq(k, 0, "rec_next failed: %s", se3_error_str(&e).s);
  cr_assert_eq(rec_next(r, &rec, &e), 0, "EOF is sticky");
  rec_close(r);
  return k;
}

static char *write_tmp(const char *test, const char *name, const char *text) {
  char *dir = tu_tmpdir(test);
  cr_assert_not_null(dir);
  char *p = tu_write(dir, name, text);
  cr_assert_not_null(p);
  free(dir);
  return p;
}

static char *write_gz(const char *test, const char *name, const char *text) {
  char *dir = tu_tmpdir(test);
  char *p = NULL;
  cr_assert_geq(asprintf(&p, "%s/%s", dir, name), 0);
  gzFile gz = gzopen(p, "wb");
  cr_assert_not_null(gz);
  cr_assert_eq(gzwrite(gz, text, (unsigned)strlen(text)), (int)strlen(text));
  cr_assert_eq(gzclose(gz), Z_OK);
  free(dir);
  return p;
}

/* ---- formats ------------------------------------------------------------------- */

Test(records, format_names) {
  cr_assert_eq(rec_format_from_path("a/b/x.sdf"), MOL_FMT_SDF);
  cr_assert_eq(rec_format_from_path("x.SDF.gz"), MOL_FMT_SDF);
  cr_assert_eq(rec_format_from_path("x.mol"), MOL_FMT_SDF);
  cr_assert_eq(rec_format_from_path("x.mol2.gz"), MOL_FMT_MOL2);
  cr_assert_eq(rec_format_from_path("x.smiles"), MOL_FMT_SMI);
  cr_assert_eq(rec_format_from_path("x.smi"), MOL_FMT_SMI);
  cr_assert_eq(rec_format_from_path("x.csv"), MOL_FMT_CSV);
  cr_assert_eq(rec_format_from_path("x.tsv.gz"), MOL_FMT_TSV);
  cr_assert_eq(rec_format_from_path("x.xyz"), MOL_FMT_XYZ);
  cr_assert_eq(rec_format_from_path("x.pdb"), MOL_FMT_PDB);
  cr_assert_eq(rec_format_from_path("x.ent"), MOL_FMT_PDB);
  cr_assert_eq(rec_format_from_path("x.cml"), MOL_FMT_CML);
  cr_assert_eq(rec_format_from_path("x.txt"), MOL_FMT_UNKNOWN);
  cr_assert_eq(rec_format_from_path("sdf"), MOL_FMT_UNKNOWN);
  cr_assert_eq(rec_format_from_path("x.gz"), MOL_FMT_UNKNOWN);
  cr_assert_eq(rec_format_from_name("MOL2"), MOL_FMT_MOL2);
  cr_assert_eq(rec_format_from_name("nope"), MOL_FMT_UNKNOWN);
  cr_assert_str_eq(rec_format_name(MOL_FMT_TSV), "tsv");
  cr_assert_str_eq(rec_format_ob(MOL_FMT_CSV), "smi");
  cr_assert_str_eq(rec_format_ob(MOL_FMT_SDF), "sdf");
  cr_assert_str_eq(rec_format_ob(MOL_FMT_CML), "cml");
  cr_assert_null(rec_format_ob(MOL_FMT_UNKNOWN));
}

Test(records, open_errors) {
  struct se3_error e = {0};
  cr_assert_null(rec_open("/nonexistent/dir/x.sdf", MOL_FMT_UNKNOWN, NULL, &e));
  cr_assert(strstr(se3_error_str(&e).s, "/nonexistent/dir/x.sdf"), "%s", se3_error_str(&e).s);
  cr_assert_eq(e.kind, SE3_ERR_IO);
  cr_assert_str_eq(e.file, "/nonexistent/dir/x.sdf", "the path is the error's place");
  char *p = write_tmp("rec_open_errors", "x.dat", "CCO\n");
  cr_assert_null(rec_open(p, MOL_FMT_UNKNOWN, NULL, &e));
  cr_assert(strstr(se3_error_str(&e).s, "x.dat") && strstr(se3_error_str(&e).s, "format"), "%s", se3_error_str(&e).s);
  cr_assert_eq(e.kind, SE3_ERR_INPUT);
  cr_assert_eq(rec_count(p, MOL_FMT_UNKNOWN, NULL, &e), -1);
  cr_assert_eq(rec_count(p, MOL_FMT_SMI, NULL, &e), 1);
  free(p);
}

/* ---- sdf ----------------------------------------------------------------------- */

static const char *SDF3 = "first\n  prog\n\n  0  0  0  0  0  0  0  0  0  0999 V2000\nM  END\n$$$$\n" /* lines 1-6 */
                          "\n  prog\n\n  0  0  0  0  0  0  0  0  0  0999 V2000\nM  END\n> <tag>\nx\n\n$$$$\n" /* 7-15 */
                          "third\n  prog\n\n  0  0  0  0  0  0  0  0  0  0999 V2000\nM  END\n"; /* 16-20 */

Test(records, sdf_records_lines_and_trailing) {
  char *p = write_tmp("rec_sdf", "a.sdf", SDF3);
  struct got g;
  collect(p, MOL_FMT_UNKNOWN, NULL, &g);
  cr_assert_eq(g.n, 3);
  cr_assert_eq(g.r[0].line, 1);
  cr_assert_eq(g.r[1].line, 7, "a blank title line starts the record");
  cr_assert_eq(g.r[2].line, 16);
  cr_assert(starts_with(g.r[0].text, "first\n"));
  cr_assert(strstr(g.r[0].text, "$$$$\n") == g.r[0].text + strlen(g.r[0].text) - 5);
  cr_assert(starts_with(g.r[1].text, "\n  prog"));
  cr_assert(strstr(g.r[1].text, "> <tag>\nx\n"));
  cr_assert(starts_with(g.r[2].text, "third\n"), "trailing record without $$$$");
  cr_assert_null(g.r[2].error);
  cr_assert_eq(rec_count(p, MOL_FMT_SDF, NULL, NULL), 3);
  got_free(&g);
  free(p);
}

Test(records, sdf_blank_tail_is_not_a_record) {
  char *p =
      write_tmp("rec_sdf_tail", "a.sdf", "m\n\n\n  0  0  0  0  0  0  0  0  0  0999 V2000\nM  END\n$$$$\n\n  \n\n");
  struct got g;
  collect(p, MOL_FMT_SDF, NULL, &g);
  cr_assert_eq(g.n, 1);
  got_free(&g);
  free(p);
}

Test(records, sdf_crlf_and_no_final_newline) {
  char *p = write_tmp("rec_sdf_crlf", "a.sdf", "a\r\n\r\n\r\nM  END\r\n$$$$\r\nb\r\n\r\n\r\nM  END\r\n$$$$");
  struct got g;
  collect(p, MOL_FMT_SDF, NULL, &g);
  cr_assert_eq(g.n, 2);
  cr_assert_eq(g.r[1].line, 6);
  cr_assert_str_eq(g.r[1].text, "b\r\n\r\n\r\nM  END\r\n$$$$\n", "a final newline is added");
  got_free(&g);
  free(p);
}

Test(records, sdf_gzip_same_as_plain) {
  char *p = write_gz("rec_sdf_gz", "a.sdf.gz", SDF3);
  cr_assert_eq(rec_format_from_path(p), MOL_FMT_SDF);
  struct got g;
  collect(p, MOL_FMT_UNKNOWN, NULL, &g);
  cr_assert_eq(g.n, 3);
  cr_assert_eq(g.r[0].line, 1);
  cr_assert_eq(g.r[1].line, 7);
  cr_assert_eq(g.r[2].line, 16);
  cr_assert(starts_with(g.r[2].text, "third\n"));
  got_free(&g);
  free(p);
}

Test(records, truncated_gzip_is_an_io_error) {
  char *p = write_gz("rec_gz_trunc", "a.sdf.gz", SDF3);
  size_t n;
  char *bytes = tu_read(p, &n);
  FILE *f = fopen(p, "wb");
  fwrite(bytes, 1, n - 12, f); /* cut the trailer and some data */
  fclose(f);
  struct se3_error e = {0};
  struct rec_reader *r = rec_open(p, MOL_FMT_SDF, NULL, &e);
  cr_assert_not_null(r);
  struct rec rec;
  int k;
  while ((k = rec_next(r, &rec, &e)) == 1) {}
  cr_assert_eq(k, -1);
  cr_assert(strstr(se3_error_str(&e).s, "a.sdf.gz"), "%s", se3_error_str(&e).s);
  cr_assert_eq(e.kind, SE3_ERR_INPUT, "damaged compressed data is bad input");
  /* its place: the file and the line being read when the data ran out */
  int lines = 0;
  for (const char *c = SDF3; *c; c++)
    lines += *c == '\n';
  cr_assert(strstr(e.file, "a.sdf.gz"), "%s", e.file);
  cr_assert(e.line >= 1 && e.line <= lines + 1, "line %d of %d", e.line, lines);
  rec_close(r);
  free(bytes);
  free(p);
}

/* ---- mol2 ---------------------------------------------------------------------- */

Test(records, mol2_records) {
  char *p = write_tmp("rec_mol2", "a.mol2",
                      "# comment before\n"                                       /* 1 */
                      "@<TRIPOS>MOLECULE\nm1\n 1 0 0 0 0\nSMALL\nNO_CHARGES\n\n" /* 2-7 */
                      "@<TRIPOS>ATOM\n      1 C1 0 0 0 C.3 1 LIG 0\n"            /* 8-9 */
                      "########## Name: m2\n"                                    /* 10 */
                      "@<TRIPOS>MOLECULE  \r\nm2\n 1 0 0 0 0\n"                  /* 11-13 */
                      "@<TRIPOS>ATOM\n      1 N1 0 0 0 N.3 1 LIG 0\n");          /* 14-15 */
  struct got g;
  collect(p, MOL_FMT_UNKNOWN, NULL, &g);
  cr_assert_eq(g.n, 2);
  cr_assert_eq(g.r[0].line, 2);
  cr_assert_eq(g.r[1].line, 11);
  cr_assert(starts_with(g.r[0].text, "@<TRIPOS>MOLECULE\nm1\n"));
  cr_assert(strstr(g.r[1].text, "N.3"));
  cr_assert_null(strstr(g.r[0].text, "N.3"));
  cr_assert_eq(rec_count(p, MOL_FMT_MOL2, NULL, NULL), 2);
  got_free(&g);
  free(p);
}

/* Open Babel silently misreads a MOL2 atom line with missing columns, so the
 * splitter marks such records (and a wrong atom count) as errors. */
Test(records, mol2_cut_short_records_are_errors) {
  char *p = write_tmp("mol2_short", "a.mol2",
                      "@<TRIPOS>MOLECULE\nok\n 2 1 0 0 0\nSMALL\nNO_CHARGES\n\n"              /* 1-6 */
                      "@<TRIPOS>ATOM\n 1 C1 0 0 0 C.3\n 2 O1 1.4 0 0 O.3\n"                   /* 7-9 */
                      "@<TRIPOS>BOND\n 1 1 2 1\n"                                             /* 10-11 */
                      "@<TRIPOS>MOLECULE\ncut\n 2 1 0 0 0\nSMALL\nNO_CHARGES\n\n"             /* 12-17 */
                      "@<TRIPOS>ATOM\n 1 C1 1 2 3 C.3\n 2 O1 0 0\n@<TRIPOS>BOND\n 1 1 2 1\n"  /* 18-22 */
                      "@<TRIPOS>MOLECULE\ncount\n 3 0 0 0 0\nSMALL\nNO_CHARGES\n\n"           /* 23-28 */
                      "# a comment line\n@<TRIPOS>ATOM\n 1 C1 1 2 3 C.3\n");                /* 29-31 */
  struct got g;
  collect(p, MOL_FMT_MOL2, NULL, &g);
  cr_assert_eq(g.n, 3);
  cr_assert_null(g.r[0].error, "%s", g.r[0].error);
  cr_assert_str_eq(g.r[1].error, "line 20: MOL2 atom line has 4 of its 6 columns (record cut short?)");
  cr_assert_str_eq(g.r[2].error, "line 23: MOL2 header declares 3 atoms, the ATOM section has 1");
  got_free(&g);
  free(p);
}

/* ---- smi ----------------------------------------------------------------------- */

Test(records, smi_lines_comments_blanks) {
  char *p = write_tmp("rec_smi", "a.smi",
                      "# header comment\n"      /* 1 */
                      "CCO ethanol\n"           /* 2 */
                      "\n"                      /* 3 */
                      "   \t\n"                 /* 4 */
                      "  c1ccccc1\tbenzene\r\n" /* 5 */
                      "  # indented comment\n"  /* 6 */
                      "C");                     /* 7 */
  struct got g;
  collect(p, MOL_FMT_UNKNOWN, NULL, &g);
  cr_assert_eq(g.n, 3);
  cr_assert_str_eq(g.r[0].text, "CCO ethanol\n");
  cr_assert_eq(g.r[0].line, 2);
  cr_assert_null(g.r[0].name);
  cr_assert_str_eq(g.r[1].text, "c1ccccc1\tbenzene\n");
  cr_assert_eq(g.r[1].line, 5);
  cr_assert_str_eq(g.r[2].text, "C\n");
  cr_assert_eq(g.r[2].line, 7);
  got_free(&g);
  free(p);
}

Test(records, smi_utf8_bom_dropped) {
  char *p = write_tmp("rec_smi_bom", "a.smi",
                      "\xEF\xBB\xBF"
                      "CCO\nCC\n");
  struct got g;
  collect(p, MOL_FMT_SMI, NULL, &g);
  cr_assert_eq(g.n, 2);
  cr_assert_str_eq(g.r[0].text, "CCO\n");
  cr_assert_eq(g.r[0].line, 1);
  got_free(&g);
  free(p);
}

Test(records, long_lines_cross_the_buffer) {
  size_t n = 3u << 20; /* 3 MiB, three times the read buffer */
  char *big = malloc(n + 64);
  strcpy(big, "CCO first\n");
  size_t at = strlen(big);
  for (size_t i = 0; i < n; i++)
    big[at++] = 'C';
  strcpy(big + at, " long\nN last\n");
  char *p = write_tmp("rec_long", "a.smi", big);
  struct se3_error e = {0};
  struct rec_reader *r = rec_open(p, MOL_FMT_SMI, NULL, &e);
  struct rec rec;
  cr_assert_eq(rec_next(r, &rec, &e), 1);
  cr_assert_str_eq(rec.text, "CCO first\n");
  cr_assert_eq(rec_next(r, &rec, &e), 1);
  cr_assert_eq(rec.len, n + 6);
  cr_assert_eq(rec.line, 2);
  cr_assert(strcmp(rec.text + n, " long\n") == 0);
  cr_assert_eq(rec_next(r, &rec, &e), 1);
  cr_assert_str_eq(rec.text, "N last\n");
  cr_assert_eq(rec.line, 3);
  cr_assert_eq(rec_next(r, &rec, &e), 0);
  rec_close(r);
  free(big);
  free(p);
}

Test(records, record_size_cap) {
  /* The middle record is over the cap: an error record, then reading goes on. */
  char *p = write_tmp("rec_cap", "a.sdf",
                      "a\n\n\nM  END\n$$$$\n"
                      "b\n0123456789012345678901234567890123456789012345678901234567890123456789\n"
                      "0123456789012345678901234567890123456789012345678901234567890123456789\n$$$$\n"
                      "c\n\n\nM  END\n$$$$\n");
  struct rec_options o = {.max_record_bytes = 100};
  struct got g;
  collect(p, MOL_FMT_SDF, &o, &g);
  cr_assert_eq(g.n, 3);
  cr_assert_null(g.r[0].error);
  cr_assert_not_null(g.r[1].error);
  cr_assert(strstr(g.r[1].error, "record 2 (line 6) is longer than max_record_bytes (100 bytes)"), "%s", g.r[1].error);
  cr_assert_str_eq(g.r[1].text, "");
  cr_assert_eq(g.r[1].line, 6);
  cr_assert_null(g.r[2].error);
  cr_assert_eq(g.r[2].line, 10);
  got_free(&g);
  free(p);
}

/* ---- csv/tsv ------------------------------------------------------------------- */

Test(records, csv_quoting_names_and_bad_rows) {
  char *p = write_tmp("rec_csv", "a.csv",
                      "id,SMILES,note\n"                          /* 1 */
                      "m1,CCO,plain\n"                            /* 2 */
                      "\"m,2\",\"c1ccccc1\",\"say \"\"hi\"\"\"\n" /* 3 */
                      "m3,CC,\"two\nlines\"\n"                    /* 4-5 */
                      "m4,CCC\n"                                  /* 6: too few fields */
                      "\n"                                        /* 7: blank, skipped */
                      "m5, N ,x,extra\r\n"                        /* 8: too many */
                      "m6,,empty\n"                               /* 9 */
                      "m7,O,last");                               /* 10 */
  struct got g;
  collect(p, MOL_FMT_UNKNOWN, NULL, &g);
  cr_assert_eq(g.n, 7);
  cr_assert_str_eq(g.r[0].text, "CCO m1\n");
  cr_assert_str_eq(g.r[0].name, "m1");
  cr_assert_eq(g.r[0].line, 2);
  cr_assert_eq(g.r[0].n_fields, 3);
  cr_assert_str_eq(g.r[0].fields[2], "plain");
  cr_assert_str_eq(g.r[1].name, "m,2");
  cr_assert_str_eq(g.r[1].text, "c1ccccc1 m,2\n");
  cr_assert_str_eq(g.r[1].fields[2], "say \"hi\"");
  cr_assert_eq(g.r[1].line, 3);
  cr_assert_str_eq(g.r[2].fields[2], "two\nlines");
  cr_assert_eq(g.r[2].line, 4);
  cr_assert_null(g.r[2].error);
  cr_assert_eq(g.r[3].line, 6);
  cr_assert_str_eq(g.r[3].error, "row has 2 fields, header has 3");
  cr_assert_str_eq(g.r[3].text, "");
  cr_assert_eq(g.r[4].line, 8);
  cr_assert_str_eq(g.r[4].error, "row has 4 fields, header has 3");
  cr_assert_eq(g.r[5].line, 9);
  cr_assert_str_eq(g.r[5].error, "empty SMILES");
  cr_assert_str_eq(g.r[6].text, "O m7\n");
  cr_assert_eq(g.r[6].line, 10);
  cr_assert_eq(rec_count(p, MOL_FMT_CSV, NULL, NULL), 7);
  got_free(&g);
  free(p);
}

Test(records, csv_columns_and_options) {
  char *p = write_tmp("rec_csv_cols", "a.csv",
                      "\xEF\xBB\xBF"
                      "mol,Class,Title\nCCO,1,eth\n");
  struct se3_error e = {0};
  cr_assert_null(rec_open(p, MOL_FMT_CSV, NULL, &e));
  cr_assert(strstr(se3_error_str(&e).s, "'mol', 'Class', 'Title'"), "the message lists the columns: %s",
            se3_error_str(&e).s);
  cr_assert(strstr(se3_error_str(&e).s, "a.csv"), "%s", se3_error_str(&e).s);
  struct rec_options o = {.smiles_column = "MOL"};
  struct rec_reader *r = rec_open(p, MOL_FMT_CSV, &o, &e);
  cr_assert_not_null(r, "%s", se3_error_str(&e).s);
  int n = 0;
  const char *const *cols = rec_columns(r, &n);
  cr_assert_eq(n, 3);
  cr_assert_str_eq(cols[0], "mol", "the byte order mark is dropped");
  struct rec rec;
  cr_assert_eq(rec_next(r, &rec, &e), 1);
  cr_assert_str_eq(rec.text, "CCO eth\n", "Title is a name column");
  rec_close(r);
  struct rec_options o2 = {.smiles_column = "mol", .name_column = "nope"};
  cr_assert_null(rec_open(p, MOL_FMT_CSV, &o2, &e));
  cr_assert(strstr(se3_error_str(&e).s, "nope"), "%s", se3_error_str(&e).s);
  struct rec_options o3 = {.smiles_column = "mol", .name_column = "Class"};
  r = rec_open(p, MOL_FMT_CSV, &o3, &e);
  cr_assert_eq(rec_next(r, &rec, &e), 1);
  cr_assert_str_eq(rec.text, "CCO 1\n");
  rec_close(r);
  free(p);
}

Test(records, tsv_and_unterminated_quote) {
  char *p = write_tmp("rec_tsv", "a.tsv", "smiles\tname\nCCO\tethanol, 95%\nN\t\"open\n");
  struct got g;
  collect(p, MOL_FMT_UNKNOWN, NULL, &g);
  cr_assert_eq(g.n, 2);
  cr_assert_str_eq(g.r[0].text, "CCO ethanol, 95%\n");
  cr_assert_str_eq(g.r[1].error, "unterminated quoted field");
  cr_assert_eq(g.r[1].line, 3);
  got_free(&g);
  free(p);
}

Test(records, csv_header_only_and_empty) {
  char *p = write_tmp("rec_csv_empty", "a.csv", "smiles,y\n");
  cr_assert_eq(rec_count(p, MOL_FMT_CSV, NULL, NULL), 0);
  free(p);
  struct se3_error e = {0};
  p = write_tmp("rec_csv_empty2", "b.csv", "");
  cr_assert_null(rec_open(p, MOL_FMT_CSV, NULL, &e));
  cr_assert(strstr(se3_error_str(&e).s, "header"), "%s", se3_error_str(&e).s);
  free(p);
}

/* ---- xyz ----------------------------------------------------------------------- */

Test(records, xyz_records_and_resync) {
  char *p = write_tmp("rec_xyz", "a.xyz",
                      "3\nwater\nO 0 0 0\nH 1 0 0\nH 0 1 0\n" /* 1-5 */
                      "\n"                                    /* 6 */
                      "garbage here\nmore garbage\n"          /* 7-8 */
                      "  2  \nh2\nH 0 0 0\nH 0.7 0 0\n"       /* 9-12 */
                      "1\n\nHe 0 0 0\n"                       /* 13-15 */
                      "x 1\n"                                 /* 16 */
                      "2\ncut\nH 0 0 0\n");                   /* 17-19 */
  struct got g;
  collect(p, MOL_FMT_UNKNOWN, NULL, &g);
  cr_assert_eq(g.n, 6);
  cr_assert_str_eq(g.r[0].text, "3\nwater\nO 0 0 0\nH 1 0 0\nH 0 1 0\n");
  cr_assert_eq(g.r[0].line, 1);
  cr_assert_null(g.r[0].error);
  cr_assert_eq(g.r[1].line, 7);
  cr_assert_str_eq(g.r[1].error, "line 7: expected an atom count, got 'garbage here'");
  cr_assert_eq(g.r[2].line, 9);
  cr_assert_str_eq(g.r[2].text, "  2  \nh2\nH 0 0 0\nH 0.7 0 0\n");
  cr_assert_eq(g.r[3].line, 13);
  cr_assert_str_eq(g.r[3].text, "1\n\nHe 0 0 0\n", "an empty comment line is kept");
  cr_assert_eq(g.r[4].line, 16);
  cr_assert_str_eq(g.r[4].error, "line 16: expected an atom count, got 'x 1'");
  cr_assert_eq(g.r[5].line, 17);
  cr_assert(strstr(g.r[5].error, "truncated"), "%s", g.r[5].error);
  got_free(&g);
  free(p);
}

/* ---- pdb ----------------------------------------------------------------------- */

Test(records, pdb_models_and_empty_chunks) {
  char *p = write_tmp("rec_pdb", "a.pdb",
                      "HEADER    TEST\n"                                                                 /* 1 */
                      "MODEL        1\n"                                                                 /* 2 */
                      "HETATM    1  O   HOH A   1       0.000   0.000   0.000  1.00  0.00           O\n" /* 3 */
                      "ENDMDL\n"                                                                         /* 4 */
                      "MODEL        2\n"                                                                 /* 5 */
                      "ATOM      1  N   GLY A   1       1.000   0.000   0.000  1.00  0.00           N\n" /* 6 */
                      "ENDMDL\n"                                                                         /* 7 */
                      "CONECT    1    2\n"                                                               /* 8 */
                      "END\n"                                                                            /* 9 */
                      "ATOM      1  C   GLY A   1       2.000   0.000   0.000  1.00  0.00           C\n" /* 10 */
                      "ENDROOT\n"                                                                        /* 11 */
                      "END   \n");                                                                       /* 12 */
  struct got g;
  collect(p, MOL_FMT_UNKNOWN, NULL, &g);
  cr_assert_eq(g.n, 3, "the chunk CONECT..END has no atoms and is dropped");
  cr_assert_eq(g.r[0].line, 1);
  cr_assert(starts_with(g.r[0].text, "HEADER"));
  cr_assert(strstr(g.r[0].text, "ENDMDL\n") && !strstr(g.r[0].text, "MODEL        2"));
  cr_assert_eq(g.r[1].line, 5);
  cr_assert_eq(g.r[2].line, 10);
  cr_assert(strstr(g.r[2].text, "ENDROOT\nEND   \n"), "ENDROOT does not end a record");
  got_free(&g);
  free(p);
}

Test(records, pdb_trailing_chunk) {
  char *p = write_tmp("rec_pdb2", "a.pdb",
                      "ATOM      1  N   GLY A   1       1.000   0.000   0.000  1.00  0.00           N\n"
                      "TER\n");
  cr_assert_eq(rec_count(p, MOL_FMT_PDB, NULL, NULL), 1);
  free(p);
}

/* ---- cml ----------------------------------------------------------------------- */

Test(records, cml_top_level_molecules) {
  char *p = write_tmp("rec_cml", "a.cml",
                      "<?xml version=\"1.0\"?>\n"                                      /* 1 */
                      "<cml xmlns=\"http://www.xml-cml.org/schema\">\n"                /* 2 */
                      "<!-- <molecule id=\"fake\"> -->\n"                              /* 3 */
                      " <molecule id=\"m1\" title=\"a /> b\">\n"                       /* 4 */
                      "  <atomArray><atom id=\"a1\" elementType=\"C\"/></atomArray>\n" /* 5 */
                      "  <molecule id=\"inner\"><!-- </molecule> --></molecule>\n"     /* 6 */
                      " </molecule><molecule id=\"m2\"/>\n"                            /* 7 */
                      " <cml:molecule id=\"m3\"><atomArray/></cml:molecule>\n"         /* 8 */
                      "</cml>\n");
  struct got g;
  collect(p, MOL_FMT_UNKNOWN, NULL, &g);
  cr_assert_eq(g.n, 3, "m1, m2, m3");
  cr_assert_eq(g.r[0].line, 4);
  cr_assert(starts_with(g.r[0].text, "<molecule id=\"m1\" title=\"a /> b\">\n"), "%s", g.r[0].text);
  cr_assert(strstr(g.r[0].text, "id=\"inner\""));
  cr_assert(strstr(g.r[0].text, "<!-- </molecule> -->"), "comments inside are kept");
  size_t n = strlen(g.r[0].text);
  cr_assert(strcmp(g.r[0].text + n - 12, "</molecule>\n") == 0, "%s", g.r[0].text);
  cr_assert_null(strstr(g.r[0].text, "fake"));
  cr_assert_str_eq(g.r[1].error, "empty record (a <molecule/> element)");
  cr_assert_str_eq(g.r[1].text, "");
  cr_assert_eq(g.r[1].line, 7);
  cr_assert_str_eq(g.r[2].text, "<cml:molecule id=\"m3\"><atomArray/></cml:molecule>\n");
  cr_assert_eq(g.r[2].line, 8);
  got_free(&g);
  free(p);
}

Test(records, cml_namespace_prefix_is_declared) {
  char *p = write_tmp("rec_cml_ns", "a.cml",
                      "<c:cml xmlns:c=\"http://www.xml-cml.org/schema\" xmlns:x='urn:x'>\n"
                      "<c:molecule id=\"p\"><c:atomArray><c:atom id=\"a1\" elementType=\"N\"/></c:atomArray>"
                      "</c:molecule>\n"
                      "<c:molecule xmlns:c=\"urn:own\"><c:atomArray/></c:molecule>\n"
                      "</c:cml>\n");
  struct got g;
  collect(p, MOL_FMT_CML, NULL, &g);
  cr_assert_eq(g.n, 2);
  cr_assert(starts_with(g.r[0].text, "<c:molecule xmlns:c=\"http://www.xml-cml.org/schema\" id=\"p\">"
                                     "<c:atomArray>"),
            "%s", g.r[0].text);
  cr_assert_str_eq(g.r[1].text, "<c:molecule xmlns:c=\"urn:own\"><c:atomArray/></c:molecule>\n",
                   "a tag's own declaration wins");
  got_free(&g);
  free(p);
}

Test(records, cml_unterminated) {
  char *p = write_tmp("rec_cml2", "a.cml", "<molecule id=\"a\"></molecule>\n<molecule id=\"b\">\n<atomArray>\n");
  struct got g;
  collect(p, MOL_FMT_CML, NULL, &g);
  cr_assert_eq(g.n, 2);
  cr_assert_null(g.r[0].error);
  cr_assert_str_eq(g.r[1].error, "unterminated <molecule> element");
  cr_assert_eq(g.r[1].line, 2);
  got_free(&g);
  free(p);
}

/* ---- shared data sets ----------------------------------------------------------- */

Test(records, shared_data_counts) {
  if (!tu_have_shared()) cr_skip_test("no shared data");
  struct se3_error e = {0};
  cr_assert_eq(rec_count(tu_shared("data/qm9/qm9_mini.sdf"), MOL_FMT_UNKNOWN, NULL, &e), 21, "%s", se3_error_str(&e).s);
  cr_assert_eq(rec_count(tu_shared("data/qm9/gdb1k.sdf.gz"), MOL_FMT_UNKNOWN, NULL, &e), 1000);
  cr_assert_eq(rec_count(tu_shared("data/screening/dude_fabp4/actives_final.mol2.gz"), MOL_FMT_UNKNOWN, NULL, &e), 57);
  cr_assert_eq(rec_count(tu_shared("data/nci/rdkit-data_Data_NCI_first_5K.smi.gz"), MOL_FMT_UNKNOWN, NULL, &e), 4999);
  cr_assert_eq(rec_count(tu_shared("data/moleculenet/chemprop_delaney.csv"), MOL_FMT_UNKNOWN, NULL, &e), 1128);
  cr_assert_eq(rec_count(tu_shared("data/qm9/chemprop_qm9_first499_12targets.csv"), MOL_FMT_UNKNOWN, NULL, &e), 499);
}

/* ---- content sniffing ------------------------------------------------------------ */

Test(records, sniff_formats_from_contents) {
  static const char *sdf = "x\n  prog\n\n  1  0  0  0  0  0  0  0  0  0999 V2000\n"
                           "    0.0000    0.0000    0.0000 C   0  0\nM  END\n$$$$\n";
  static const char *v3000 = "x\n  prog\n\n  0  0  0     0  0            999 V3000\n";
  static const char *mol2 = "# comment\n@<TRIPOS>MOLECULE\nx\n 1 0\n";
  static const char *cml = "<?xml version=\"1.0\"?>\n<cml><molecule id=\"a\"/></cml>\n";
  static const char *cmlns = "<c:list xmlns:c=\"u\"><c:molecule id=\"a\"/></c:list>\n";
  static const char *pdb = "ATOM      1  N   GLY A   1       1.000   0.000   0.000  1.00  0.00           N\nEND\n";
  static const char *xyz = "2\nwater-ish\nO 0.0 0.0 0.0\nH 0.96 0 0\n";
  static const char *csv = "id,SMILES,y\nm1,CCO,1\n";
  static const char *tsv = "id\tsmiles\nm1\tCCO\n";
  static const char *smi = "CCO ethanol\nc1ccccc1 benzene\n";
  cr_assert_eq(rec_sniff(sdf, strlen(sdf), MOL_FMT_MOL2), MOL_FMT_SDF);
  cr_assert_eq(rec_sniff(v3000, strlen(v3000), MOL_FMT_PDB), MOL_FMT_SDF);
  cr_assert_eq(rec_sniff(sdf, strlen(sdf), MOL_FMT_SDF), MOL_FMT_SDF);
  cr_assert_eq(rec_sniff(mol2, strlen(mol2), MOL_FMT_SDF), MOL_FMT_MOL2);
  cr_assert_eq(rec_sniff(cml, strlen(cml), MOL_FMT_SMI), MOL_FMT_CML);
  cr_assert_eq(rec_sniff(cmlns, strlen(cmlns), MOL_FMT_UNKNOWN), MOL_FMT_CML);
  cr_assert_eq(rec_sniff(pdb, strlen(pdb), MOL_FMT_XYZ), MOL_FMT_PDB);
  cr_assert_eq(rec_sniff(xyz, strlen(xyz), MOL_FMT_SDF), MOL_FMT_XYZ);
  cr_assert_eq(rec_sniff(csv, strlen(csv), MOL_FMT_SMI), MOL_FMT_CSV);
  cr_assert_eq(rec_sniff(tsv, strlen(tsv), MOL_FMT_CSV), MOL_FMT_TSV);
  cr_assert_eq(rec_sniff("smiles\nCCO\n", 11, MOL_FMT_TSV), MOL_FMT_TSV, "one column: either is right");
  /* SMILES has no sign of its own: no opinion, and the extension stands. */
  cr_assert_eq(rec_sniff(smi, strlen(smi), MOL_FMT_SMI), MOL_FMT_UNKNOWN);
  cr_assert_eq(rec_sniff(smi, strlen(smi), MOL_FMT_SDF), MOL_FMT_UNKNOWN);
  cr_assert_eq(rec_sniff("", 0, MOL_FMT_SDF), MOL_FMT_UNKNOWN);
  /* through a file, gzip'd */
  char *p = write_gz("rec_sniff_gz", "x.mol2.gz", sdf);
  enum mol_format f;
  int nonblank = 0;
  struct se3_error e = {0};
  cr_assert_eq(rec_sniff_file(p, MOL_FMT_MOL2, &f, &nonblank, &e), 0, "%s", se3_error_str(&e).s);
  cr_assert_eq(f, MOL_FMT_SDF);
  cr_assert_eq(nonblank, 1);
  free(p);
  p = write_tmp("rec_sniff_blank", "x.sdf", " \n\n\t\n");
  cr_assert_eq(rec_sniff_file(p, MOL_FMT_SDF, &f, &nonblank, &e), 0, "%s", se3_error_str(&e).s);
  cr_assert_eq(nonblank, 0);
  free(p);
}

/* A FIFO is refused at once (opening it for reading would wait for a writer),
 * and so is a device. */
Test(records, non_regular_files_refused_without_blocking) {
  char *dir = tu_tmpdir("rec_fifo");
  char *fifo = NULL;
  cr_assert(asprintf(&fifo, "%s/p.sdf", dir) > 0);
  cr_assert_eq(tu_sh(NULL, "mkfifo %s", fifo), 0);
  struct se3_error e = {0};
  cr_assert_eq(rec_check_regular(fifo, &e), -1);
  cr_assert(strstr(se3_error_str(&e).s, "p.sdf: not a regular file (a FIFO)"), "%s", se3_error_str(&e).s);
  se3_error_clear(&e);
  cr_assert_null(rec_open(fifo, MOL_FMT_SDF, NULL, &e));
  cr_assert(strstr(se3_error_str(&e).s, "(a FIFO)"), "%s", se3_error_str(&e).s);
  enum mol_format f;
  int nb;
  cr_assert_eq(rec_sniff_file(fifo, MOL_FMT_SDF, &f, &nb, &e), -1);
  cr_assert_null(rec_open("/dev/zero", MOL_FMT_SDF, NULL, &e));
  cr_assert(strstr(se3_error_str(&e).s, "/dev/zero: not a regular file (a character device)"), "%s",
            se3_error_str(&e).s);
  cr_assert_eq(rec_check_regular(dir, &e), -1);
  cr_assert(strstr(se3_error_str(&e).s, "(a directory)"), "%s", se3_error_str(&e).s);
  free(fifo);
  free(dir);
}

/* ---- empty records ------------------------------------------------------------- */

Test(records, empty_records_listed_then_counted) {
  /* record 1 a molecule, 2..26 empty (blank lines count as empty), 27 a molecule */
  char text[4096] = "a\n\n\nM  END\n$$$$\n";
  for (int i = 0; i < 25; i++)
    strcat(text, i == 3 ? "\n  \n$$$$\n" : "$$$$\n");
  strcat(text, "b\n\n\nM  END\n$$$$\n");
  char *p = write_tmp("rec_empty", "a.sdf", text);
  struct se3_error e = {0};
  struct rec_options o = {.max_empty_listed = 3};
  struct rec_reader *r = rec_open(p, MOL_FMT_SDF, &o, &e);
  cr_assert_not_null(r, "%s", se3_error_str(&e).s);
  struct rec rec;
  int64_t nos[8];
  int n = 0;
  while (rec_next(r, &rec, &e) == 1 && n < 8) {
    nos[n] = rec.record_no;
    if (n >= 1 && n <= 3)
      cr_assert_str_eq(rec.error, "empty record (nothing before its $$$$ line)");
    else
      cr_assert_null(rec.error);
    n++;
  }
  cr_assert_eq(n, 5, "1, three listed empties, and the last molecule");
  cr_assert(nos[0] == 1 && nos[1] == 2 && nos[3] == 4 && nos[4] == 27, "numbers count every record");
  struct rec_stats st;
  rec_get_stats(r, &st);
  cr_assert_eq(st.n_out, 5);
  cr_assert_eq(st.n_empty, 25);
  cr_assert_eq(st.n_unlisted, 22);
  cr_assert_eq(st.first_unlisted, 5);
  cr_assert_eq(st.first_unlisted_line, 9);
  cr_assert_eq(st.last_no, 27);
  rec_close(r);
  cr_assert_eq(rec_count(p, MOL_FMT_SDF, NULL, &e), 12, "10 listed by default, 2 molecules");
  free(p);
  /* other formats' empty records */
  p = write_tmp("rec_empty_xyz", "a.xyz", "0\nnothing\n1\none\nC 0 0 0\n0\n\n");
  struct got g;
  collect(p, MOL_FMT_XYZ, NULL, &g);
  cr_assert_eq(g.n, 3);
  cr_assert_str_eq(g.r[0].error, "empty record (an XYZ frame of 0 atoms)");
  cr_assert_null(g.r[1].error);
  cr_assert_eq(g.r[2].line, 6);
  got_free(&g);
  free(p);
  p = write_tmp("rec_empty_mol2", "a.mol2", "@<TRIPOS>MOLECULE\n\n@<TRIPOS>MOLECULE\nm\n 0 0\n");
  collect(p, MOL_FMT_MOL2, NULL, &g);
  cr_assert_eq(g.n, 2);
  cr_assert_str_eq(g.r[0].error, "empty record (nothing after its @<TRIPOS>MOLECULE line)");
  got_free(&g);
  free(p);
}

static int stop_at_first(void *arg, const struct rec_stats *st, struct se3_error *err) {
  *(int64_t *)arg = st->lines;
  se3_error_set(err, SE3_ERR_LIMIT, "enough after %lld lines", (long long)st->lines);
  return 1;
}

/* Progress every 2^20 lines, and the callback can stop the reading. */
Test(records, progress_callback_can_stop) {
  char *dir = tu_tmpdir("rec_progress");
  char *p = NULL;
  cr_assert(asprintf(&p, "%s/e.sdf.gz", dir) > 0);
  gzFile gz = gzopen(p, "wb1");
  for (int i = 0; i < 1100000; i++)
    gzputs(gz, "$$$$\n");
  gzclose(gz);
  int64_t seen = 0;
  struct rec_options o = {.progress = stop_at_first, .progress_arg = &seen};
  struct rec_stats st;
  struct se3_error e = {0};
  cr_assert_eq(rec_scan(p, MOL_FMT_SDF, &o, &st, &e), -1);
  cr_assert_eq(seen, 1 << 20);
  cr_assert_str_eq(se3_error_str(&e).s, "enough after 1048576 lines");
  cr_assert_eq(e.kind, SE3_ERR_LIMIT, "the callback's kind is kept");
  cr_assert_eq(rec_scan(p, MOL_FMT_SDF, NULL, &st, &e), 0, "%s", se3_error_str(&e).s);
  cr_assert_eq(st.n_empty, 1100000);
  cr_assert_eq(st.n_out, 10);
  free(p);
  free(dir);
}

/* ---- NUL bytes ------------------------------------------------------------------ */

/* Writes n bytes (NUL bytes included) to a fresh file; returns its path. */
static char *write_bytes(const char *test, const char *name, const char *bytes, size_t n) {
  char *dir = tu_tmpdir(test);
  cr_assert_not_null(dir);
  char *p = NULL;
  cr_assert_geq(asprintf(&p, "%s/%s", dir, name), 0);
  FILE *f = fopen(p, "wb");
  cr_assert_not_null(f);
  cr_assert_eq(fwrite(bytes, 1, n, f), n);
  cr_assert_eq(fclose(f), 0);
  free(dir);
  return p;
}

/* A NUL byte inside a record would cut the record's text short wherever it is
 * handled as a C string (`CC\0O` became ethane): every text format makes
 * such a record an error record naming the byte's line and column, and the
 * records after it are read as usual. */
Test(records, nul_byte_makes_an_error_record) {
  static const char SDF_OK[] = "ok\n  prog\n\n  1  0  0  0  0  0  0  0  0  0999 V2000\n"
                               "    0.0000    0.0000    0.0000 C   0  0  0  0  0  0  0  0  0  0  0  0\nM  END\n$$$$\n";
#define BYTES(s) s, sizeof s - 1 /* a literal with its NUL bytes, without the final one */
  static const struct {
    const char *name;
    enum mol_format fmt;
    const char *bytes;
    size_t n;
    int64_t line, col; /* of the NUL byte */
    int bad;           /* index of the bad record; the other record is intact */
  } cases[] = {
      {"a.smi", MOL_FMT_SMI, BYTES("CC\0O bad\nCCO good\n"), 1, 3, 0},
      {"b.smi", MOL_FMT_SMI, BYTES("CCO good\nCCO na\0me\n"), 2, 7, 1},
      {"a.csv", MOL_FMT_CSV, BYTES("smiles,name\nCC\0O,bad\nCCO,good\n"), 2, 3, 0},
      {"b.csv", MOL_FMT_CSV, BYTES("smiles,name\nCCO,good\n\"CCO\",b\0d\n"), 3, 8, 1},
      {"a.tsv", MOL_FMT_TSV, BYTES("smiles\tname\nCC\0O\tbad\nCCO\tgood\n"), 2, 3, 0},
      {"a.xyz", MOL_FMT_XYZ, BYTES("1\ncomment\nC 0 0 \0\n1\n\nO 0 0 0\n"), 3, 7, 0},
      {"a.pdb", MOL_FMT_PDB,
       BYTES("HETATM    1  C   UNL     1       0.000   0.000   0.000  1.00  0.00           C\nEND\n"
             "HETATM    1  O   UNL     1       0.000   0.0\0\0   0.000  1.00  0.00           O\nEND\n"),
       3, 45, 1},
      {"a.mol2", MOL_FMT_MOL2,
       BYTES("@<TRIPOS>MOLECULE\nm\0\n 1 0 0 0 0\nSMALL\nNO_CHARGES\n\n@<TRIPOS>ATOM\n"
             "      1 C           0.0000    0.0000    0.0000 C.3     1  UNL1        0.0000\n"
             "@<TRIPOS>MOLECULE\nn\n 1 0 0 0 0\nSMALL\nNO_CHARGES\n\n@<TRIPOS>ATOM\n"
             "      1 C           0.0000    0.0000    0.0000 C.3     1  UNL1        0.0000\n"),
       2, 2, 0},
      {"a.cml", MOL_FMT_CML,
       BYTES("<cml>\n<molecule id=\"a\"><atomArray><atom id=\"a1\" elementType=\"C\"/></atomArray></molecule>\n"
             "<molecule id=\"b\"><atomArray><atom id=\"a1\" elementType=\"O\0\"/></atomArray></molecule>\n</cml>\n"),
       3, 57, 1},
  };
#undef BYTES
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *p = write_bytes("rec_nul", cases[i].name, cases[i].bytes, cases[i].n);
    struct got g;
    collect(p, cases[i].fmt, NULL, &g);
    cr_assert_eq(g.n, 2, "%s: %d records", cases[i].name, g.n);
    int bad = cases[i].bad, good = 1 - bad;
    char want[64];
    snprintf(want, sizeof want, "NUL byte at line %lld column %lld", (long long)cases[i].line, (long long)cases[i].col);
    cr_assert_not_null(g.r[bad].error, "%s: the record with a NUL byte was read as '%s'", cases[i].name, g.r[bad].text);
    cr_assert(strstr(g.r[bad].error, want), "%s: '%s' lacks '%s'", cases[i].name, g.r[bad].error, want);
    cr_assert_null(g.r[good].error, "%s: the other record: %s", cases[i].name, g.r[good].error);
    got_free(&g);
    free(p);
  }
  /* SDF: a NUL in the second record; the first and the third are intact */
  char sdf[1024];
  size_t n = 0;
  memcpy(sdf + n, SDF_OK, sizeof SDF_OK - 1), n += sizeof SDF_OK - 1;
  memcpy(sdf + n, SDF_OK, sizeof SDF_OK - 1), sdf[n + 1] = 0, n += sizeof SDF_OK - 1; /* "o\0" on line 8 */
  memcpy(sdf + n, SDF_OK, sizeof SDF_OK - 1), n += sizeof SDF_OK - 1;
  char *p = write_bytes("rec_nul_sdf", "a.sdf", sdf, n);
  struct got g;
  collect(p, MOL_FMT_SDF, NULL, &g);
  cr_assert_eq(g.n, 3);
  cr_assert_null(g.r[0].error);
  cr_assert_not_null(g.r[1].error, "the record with a NUL byte was read as '%s'", g.r[1].text);
  cr_assert(strstr(g.r[1].error, "NUL byte at line 8 column 2"), "%s", g.r[1].error);
  cr_assert_eq(g.r[1].line, 8);
  cr_assert_null(g.r[2].error);
  got_free(&g);
  free(p);
}

/* ---- label values --------------------------------------------------------------- */

/* strtod read 0x10 as 16: labels are decimal numbers only, and a refusal
 * says why. NaN, inf and 1e400 were refused before and still are. */
Test(records, label_values_are_decimal) {
  static const struct {
    const char *text;
    double v;
  } ok[] = {{"1.5", 1.5},    {" 1.5 ", 1.5}, {"\t-2\r\n", -2},   {"+3", 3},    {".5", 0.5},
            {"5.", 5},       {"1e3", 1000},  {"-2.5E-1", -0.25}, {"0010", 10}, {"6.02e+23", 6.02e23},
            {"-1e30", -1e30}};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    double v = -99;
    char why[160] = "";
    cr_assert_eq(rec_parse_label(ok[i].text, &v, why, sizeof why), 0, "'%s': %s", ok[i].text, why);
    cr_assert_eq(v, ok[i].v, "'%s' read as %g", ok[i].text, v);
  }
  static const struct {
    const char *text, *why;
  } bad[] = {{"0x10", "hexadecimal"},
             {"-0X1F", "hexadecimal"},
             {"0x1p4", "hexadecimal"},
             {"nan", "not a finite number"},
             {"NaN(1)", "not a finite number"},
             {"-inf", "not a finite number"},
             {"Infinity", "not a finite number"},
             {"1e400", "out of range"},
             {"-1e400", "out of range"},
             {"1e31", "out of range for a label"},     /* (hardening IV: 1e308 reached a model's */
             {"-1.5e300", "out of range for a label"}, /* standardisation) */
             {"1,5", "comma"},
             {"1,000", "comma"},
             {"1.5.2", "not a decimal number"},
             {"1e", "not a decimal number"},
             {"e5", "not a decimal number"},
             {"1 5", "not a decimal number"},
             {"--1", "not a decimal number"},
             {"abc", "not a decimal number"},
             {"1.5x", "not a decimal number"},
             {".", "not a decimal number"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    double v = -99;
    char why[160] = "";
    int rc = rec_parse_label(bad[i].text, &v, why, sizeof why);
    cr_assert_eq(rc, -1, "'%s' accepted as %g", bad[i].text, v);
    cr_assert(strstr(why, bad[i].why), "'%s': '%s' lacks '%s'", bad[i].text, why, bad[i].why);
  }
  double v;
  char why[8];
  cr_assert_eq(rec_parse_label("", &v, why, sizeof why), 1, "blank: no value");
  cr_assert_eq(rec_parse_label("  \t", &v, why, sizeof why), 1);
  cr_assert_eq(rec_parse_label(NULL, &v, why, sizeof why), 1);
}

/* ---- silent truncation (issue 30: fuzz regressions) ------------------------------ */

/* A SMILES cell with white space inside reaches Open Babel as "SMILES title"
 * and is read as the part before the space: "CC O" would be stored as
 * ethane. Such a row is an error record naming its line; the other rows go
 * on, and a name with spaces is still fine. */
Test(records, csv_smiles_cell_with_white_space_is_an_error) {
  char *p = write_tmp("csv_ws", "a.csv",
                      "smiles,name,logp\n"               /* 1 */
                      "\"CC O\",space_inside,1.5\n"      /* 2 */
                      "CC\tO,tab_inside,2\n"             /* 3 */
                      "\"CCN\nO\",line_break_inside,3\n" /* 4-5 */
                      "c1ccccc1 C,space_then_atom,4\n"   /* 6 */
                      "  CCO  ,intact with spaces,5\n"); /* 7 */
  struct got g;
  collect(p, MOL_FMT_CSV, NULL, &g);
  cr_assert_eq(g.n, 5);
  static const int64_t lines[] = {2, 3, 4, 6};
  static const char *const before[] = {"'CC'", "'CC'", "'CCN'", "'c1ccccc1'"};
  for (int i = 0; i < 4; i++) {
    cr_assert_eq(g.r[i].line, lines[i]);
    cr_assert_not_null(g.r[i].error, "row at line %lld read as '%s'", (long long)lines[i], g.r[i].text);
    char want[32];
    snprintf(want, sizeof want, "line %lld", (long long)lines[i]);
    cr_assert(strstr(g.r[i].error, want), "%s", g.r[i].error);
    cr_assert(strstr(g.r[i].error, "white space"), "%s", g.r[i].error);
    cr_assert(strstr(g.r[i].error, before[i]), "%s", g.r[i].error);
  }
  cr_assert_null(g.r[4].error, "%s", g.r[4].error);
  cr_assert_str_eq(g.r[4].text, "CCO intact with spaces\n");
  got_free(&g);
  /* the colleague's fuzz input, and TSV: same rule */
  {
    const char *in = tu_src("tests/data/fuzz/regress_csv_smiles_whitespace.csv");
    collect(in, MOL_FMT_CSV, NULL, &g);
    cr_assert_eq(g.n, 5);
    for (int i = 0; i < 4; i++)
      cr_assert_not_null(g.r[i].error, "row %d read as '%s'", i + 1, g.r[i].text);
    cr_assert_str_eq(g.r[4].text, "CCO intact\n");
    got_free(&g);
  }
  char *t = write_tmp("tsv_ws", "a.tsv", "smiles\tname\nC C\tx y\nCCO\tethanol 95%\n");
  collect(t, MOL_FMT_TSV, NULL, &g);
  cr_assert_eq(g.n, 2);
  cr_assert_not_null(g.r[0].error);
  cr_assert(strstr(g.r[0].error, "line 2"), "%s", g.r[0].error);
  cr_assert_str_eq(g.r[1].text, "CCO ethanol 95%\n");
  got_free(&g);
  free(t);
  free(p);
}

/* A damaged or missing $$$$ line joins two SD records; Open Babel reads the
 * first molecule and drops the second without a word. A record with two
 * "M  END" lines is an error record saying where the second molecule
 * starts, and the records after it are read as usual. */
Test(records, sdf_record_with_two_molecules_is_an_error) {
  static const char mol[] = "\n  test\n\n  1  0  0  0  0  0  0  0  0  0999 V2000\n"
                            "    0.0000    0.0000    0.0000 C   0  0  0  0  0  0  0  0  0  0  0  0\nM  END\n";
  /* each molecule is 6 lines: title, program, comment, counts, atom, M  END */
  char text[2048];
  snprintf(text, sizeof text, "a%s$$$$\nb%s$$$$x\nc%s$$$$\nd%s> <tag>\nv\n\n$$$$\n", mol, mol, mol, mol);
  char *p = write_tmp("sdf_two", "a.sdf", text);
  struct got g;
  collect(p, MOL_FMT_SDF, NULL, &g);
  cr_assert_eq(g.n, 3, "records: %d", g.n);
  cr_assert_null(g.r[0].error, "%s", g.r[0].error);
  cr_assert_eq(g.r[1].line, 8);
  cr_assert_not_null(g.r[1].error, "two molecules read as one record: '%s'", g.r[1].text);
  cr_assert(strstr(g.r[1].error, "2 molecules"), "%s", g.r[1].error);
  cr_assert(strstr(g.r[1].error, "line 14"), "names the line after the first M  END: %s", g.r[1].error);
  cr_assert(strstr(g.r[1].error, "line 20"), "names the second M  END: %s", g.r[1].error);
  cr_assert_null(g.r[2].error, "%s", g.r[2].error);
  cr_assert_eq(g.r[2].line, 22);
  cr_assert(starts_with(g.r[2].text, "d\n"));
  got_free(&g);
  /* V3000: one "M  END" ends the whole block, after "M  V30 END CTAB" */
  char *v3 = write_tmp("sdf_two_v3", "b.sdf",
                       "x\n  t\n\n  0  0  0     0  0            999 V3000\nM  V30 BEGIN CTAB\nM  V30 COUNTS 1 0 0 0 0\n"
                       "M  V30 BEGIN ATOM\nM  V30 1 C 0 0 0 0\nM  V30 END ATOM\nM  V30 END CTAB\nM  END\n"
                       "y\n  t\n\n  0  0  0     0  0            999 V3000\nM  V30 BEGIN CTAB\nM  V30 COUNTS 1 0 0 0 0\n"
                       "M  V30 BEGIN ATOM\nM  V30 1 N 0 0 0 0\nM  V30 END ATOM\nM  V30 END CTAB\nM  END\n$$$$\n");
  collect(v3, MOL_FMT_SDF, NULL, &g);
  cr_assert_eq(g.n, 1);
  cr_assert_not_null(g.r[0].error, "two V3000 molecules read as one: '%s'", g.r[0].text);
  cr_assert(strstr(g.r[0].error, "line 12"), "%s", g.r[0].error);
  got_free(&g);
  {
    const char *in = tu_src("tests/data/fuzz/regress_sdf_damaged_delimiter.sdf");
    collect(in, MOL_FMT_SDF, NULL, &g);
    cr_assert_eq(g.n, 3, "records: %d", g.n);
    cr_assert_not_null(g.r[0].error, "gdb_1 and gdb_2 (its $$$$ line cut to $$$) read as one molecule");
    cr_assert(strstr(g.r[0].error, "starts at line 15"), "%s", g.r[0].error);
    cr_assert(starts_with(g.r[1].text, "gdb_3\n"));
    cr_assert(starts_with(g.r[2].text, "gdb_4\n"));
    got_free(&g);
  }
  free(v3);
  free(p);
}

/* A damaged first @<TRIPOS>MOLECULE line made the whole first record vanish:
 * text before the first record that is neither blank nor a comment is one
 * error record naming its first line. */
Test(records, mol2_text_before_the_first_record_is_an_error) {
  char *p = write_tmp("mol2_pre", "a.mol2",
                      "# a comment\n\n"                                          /* 1-2 */
                      "@<TRIPOS>MOLECULX\nm1\n 1 0 0 0 0\nSMALL\nNO_CHARGES\n\n" /* 3-8 */
                      "@<TRIPOS>ATOM\n 1 C1 0 0 0 C.3\n"                         /* 9-10 */
                      "@<TRIPOS>MOLECULE\nm2\n 1 0 0 0 0\nSMALL\nNO_CHARGES\n\n" /* 11-16 */
                      "@<TRIPOS>ATOM\n 1 N1 0 0 0 N.3\n");                       /* 17-18 */
  struct got g;
  collect(p, MOL_FMT_MOL2, NULL, &g);
  cr_assert_eq(g.n, 2, "records: %d", g.n);
  cr_assert_not_null(g.r[0].error, "the damaged record vanished; first record '%s'", g.r[0].text);
  cr_assert_eq(g.r[0].line, 3);
  cr_assert(strstr(g.r[0].error, "line 3"), "%s", g.r[0].error);
  cr_assert(strstr(g.r[0].error, "@<TRIPOS>MOLECULE"), "%s", g.r[0].error);
  cr_assert_null(g.r[1].error, "%s", g.r[1].error);
  cr_assert_eq(g.r[1].no, 2);
  cr_assert_eq(g.r[1].line, 11);
  cr_assert(strstr(g.r[1].text, "N.3"));
  cr_assert_eq(rec_count(p, MOL_FMT_MOL2, NULL, NULL), 2);
  got_free(&g);
  {
    const char *in = tu_src("tests/data/fuzz/regress_mol2_damaged_first_tag.mol2");
    collect(in, MOL_FMT_MOL2, NULL, &g);
    cr_assert_eq(g.n, 3, "records: %d", g.n);
    cr_assert_not_null(g.r[0].error);
    cr_assert_eq(g.r[0].line, 1);
    got_free(&g);
  }
  free(p);
}

/* A blank tail after the last $$$$ is no record, however long: one longer
 * than max_record_bytes came out as an error record "longer than
 * max_record_bytes" (found by test_fuzz, seed 4242). */
Test(records, sdf_long_blank_tail_is_not_a_record) {
  char text[4096];
  int n = snprintf(text, sizeof text, "m\n  x\n\n  0  0  0  0  0  0  0  0  0  0999 V2000\nM  END\n$$$$\n");
  memset(text + n, ' ', 3000);
  text[n + 3000] = 0;
  char *p = write_tmp("sdf_long_blank", "a.sdf", text);
  struct rec_options o = {.max_record_bytes = 627};
  struct got g;
  collect(p, MOL_FMT_SDF, &o, &g);
  cr_assert_eq(g.n, 1, "records: %d (the second: %s)", g.n, g.n > 1 ? g.r[1].error : "");
  cr_assert_null(g.r[0].error, "%s", g.r[0].error);
  got_free(&g);
  free(p);
}
