/* chem/sdtext.h and common/csvcell.h: what the SD writers do to titles,
 * tag names and values, and which CSV cells get a ' in front (issue 30, 8
 * and 11). The files themselves are read back in test_export and test_rank. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chem/mol.h"
#include "chem/sdtext.h"
#include "common/csvcell.h"

static void value_is(const char *in, const char *want) {
  char *got = sd_safe_value(in);
  cr_assert_not_null(got);
  cr_expect_str_eq(got, want, "value '%s'", in);
  free(got);
}

static void title_is(const char *in, const char *want) {
  char *got = sd_safe_title(in);
  cr_assert_not_null(got);
  cr_expect_str_eq(got, want, "title '%s'", in);
  free(got);
}

Test(sdtext, values_are_one_line_and_never_start_a_record) {
  value_is("plain", "plain");
  value_is("", "");
  value_is(NULL, "");
  value_is("a\nb", "a b");
  value_is("a\r\nb", "a b");                                        /* CR LF is one break */
  value_is("a\n\n\r\n\rb", "a b");                                  /* a run of breaks is one space */
  value_is("\n\na\n", "a");                                         /* none at the ends */
  value_is("a\vb\fc\034d", "a b c d");                              /* what Python's splitlines breaks at */
  value_is("a\302\205b\342\200\250c\342\200\251d", "a b c d");      /* NEL, LS, PS */
  value_is("caf\xc3\xa9\xe2\x80\x94x", "caf\xc3\xa9\xe2\x80\x94x"); /* other UTF-8 untouched */
  value_is("a\tb", "a\tb");
  value_is("  \n \t ", ""); /* only blanks: empty */
  value_is("$$$$", "_$$$$");
  value_is("\n$$$$\n", "_$$$$");
  value_is("  $$$$x", "_  $$$$x");
  value_is("$$$", "$$$");
  value_is("x $$$$", "x $$$$");
  value_is("a\n$$$$\nb", "a $$$$ b");
  value_is("x\n\n> <fake>\ny", "x > <fake> y");
}

Test(sdtext, titles_and_tag_names) {
  title_is("gdb_3", "gdb_3");
  title_is("$$$$", "_$$$$");
  title_is("\t$$$$", "_ $$$$");
  title_is("two\r\nlines\tand a tab", "two lines and a tab");
  title_is("   ", "   "); /* a blank title is a line like any other */
  char *n = sd_safe_tag_name("a<b>c\r\nd\177e\342\200\250f");
  cr_expect_str_eq(n, "a_b_c__d_e___f");
  free(n);
  n = sd_safe_tag_name(NULL);
  cr_expect_str_eq(n, "");
  free(n);
  /* a whole molecule: title and every tag */
  struct mol m;
  mol_init(&m);
  m.name = strdup("$$$$");
  cr_assert_eq(mol_add_tag(&m, "x>y", "1\n$$$$\n\n2"), 0);
  cr_assert_eq(mol_add_tag(&m, "ok", "fine"), 0);
  cr_assert_eq(sd_make_safe(&m), 0);
  cr_expect_str_eq(m.name, "_$$$$");
  cr_expect_str_eq(m.tags[0].name, "x_y");
  cr_expect_str_eq(m.tags[0].value, "1 $$$$ 2");
  cr_expect_str_eq(m.tags[1].name, "ok");
  cr_expect_str_eq(m.tags[1].value, "fine");
  mol_free(&m);
}

static void cell_is(const char *in, int text, const char *want) {
  char *got = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&got, &n);
  csv_cell_write(f, in, text);
  fclose(f);
  cr_expect_str_eq(got, want, "cell '%s' (%s)", in ? in : "NULL", text ? "text" : "number");
  free(got);
}

Test(csvcell, formulas_get_a_quote_numbers_never) {
  cell_is("=1+1", 1, "'=1+1");
  cell_is("+cmd", 1, "'+cmd");
  cell_is("-2+3+cmd|' /C calc'!A0", 1, "'-2+3+cmd|' /C calc'!A0");
  cell_is("@SUM(A1)", 1, "'@SUM(A1)");
  cell_is("\t=x", 1, "'\t=x");
  cell_is("\r=x", 1, "\"'\r=x\"");
  cell_is("=a,b", 1, "\"'=a,b\"");
  cell_is("=\"q\"", 1, "\"'=\"\"q\"\"\"");
  cell_is("-", 1, "'-");
  cell_is("+", 1, "'+");
  cell_is("-.", 1, "'-.");
  cell_is("-1e", 1, "'-1e");
  cell_is("-inf", 1, "'-inf");
  cell_is("-0x10", 1, "'-0x10");
  cell_is("-1,5", 1, "\"'-1,5\"");
  /* numbers, as text or not */
  cell_is("-1.5", 1, "-1.5");
  cell_is("+3e5", 1, "+3e5");
  cell_is("-.5", 1, "-.5");
  cell_is("-5.", 1, "-5.");
  cell_is("-1E-300", 1, "-1E-300");
  cell_is("-inf", 0, "-inf");
  cell_is("-1.5", 0, "-1.5");
  /* ordinary text */
  cell_is("a=b", 1, "a=b");
  cell_is("", 1, "");
  cell_is(NULL, 1, "");
  cell_is(" =x", 1, " =x");
}
