/* The rejects table groups by kind (issue 32): a molecule's reason is one
 * text per kind, the atom it concerns and the specifics are in their own
 * columns. Through the se3screen binary: two SD records whose atoms are too
 * close, at different atoms, and two SMILES with a dummy atom ('*') at
 * different positions, beside molecules that pass; each pair is one group
 * of `SELECT reason, count(*) ... GROUP BY reason`, with its own atom and
 * detail; the report's rejects table shows the group once, its examples
 * with their specifics. (A rejected SD or SMILES record has no name in
 * rejects: only a CSV's name column reaches it.) */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/testutil.h"

/* ethanol (C C O) with each heavy atom's coordinates given, 3D */
static void sd_ethanol(FILE *f, const char *name, const double xyz[3][3]) {
  fprintf(f, "%s\n  se3test  3D\n\n  3  2  0  0  0  0  0  0  0  0999 V2000\n", name);
  static const char *const el[3] = {"C", "C", "O"};
  for (int i = 0; i < 3; i++)
    fprintf(f, "%10.4f%10.4f%10.4f %-3s 0  0  0  0  0  0  0  0  0  0  0  0\n", xyz[i][0], xyz[i][1], xyz[i][2], el[i]);
  fprintf(f, "  1  2  1  0\n  2  3  1  0\nM  END\n$$$$\n");
}

Test(ingest_rejects, one_group_per_kind_with_the_atom_and_detail_apart) {
  char *dir = tu_tmpdir("ingest_rejects");
  char sdf[1200], smi[1200];
  snprintf(sdf, sizeof sdf, "%s/close.sdf", dir);
  snprintf(smi, sizeof smi, "%s/dummy.smi", dir);
  FILE *f = fopen(sdf, "w");
  cr_assert(f);
  static const double good[3][3] = {{-0.929, 0.296, 0.3}, {0.495, -0.236, 0}, {1.369, 0.880, 0}};
  /* the O 0.20 Å from the second C; the first C 0.30 Å from the second */
  static const double close23[3][3] = {{-0.929, 0.296, 0.3}, {0.495, -0.236, 0}, {0.695, -0.236, 0}};
  static const double close12[3][3] = {{0.195, -0.236, 0}, {0.495, -0.236, 0}, {1.369, 0.880, 0.3}};
  sd_ethanol(f, "good", good);
  sd_ethanol(f, "o_on_c2", close23);
  sd_ethanol(f, "c1_on_c2", close12);
  cr_assert_eq(fclose(f), 0);
  cr_assert(tu_write(dir, "dummy.smi", "CCO ethanol\nC*CO star2\nCCC(=O)* star5\n"));
  char *yaml = NULL;
  cr_assert(asprintf(&yaml,
                     "workflow: t\nworkdir: work\nsets:\n  lib:\n    - {path: %s}\n    - {path: %s}\n"
                     "stages:\n  ingest: {workers: 1, gen3d_quality: fast, coordinates: input}\n",
                     sdf, smi) > 0); /* (input: the files' coordinates are what is checked) */
  char *wf = tu_write(dir, "wf.yaml", yaml);
  char *out = NULL;
  int rc = tu_se3(&out, "run %s --set run.progress=none", wf);
  cr_assert_eq(rc, 0, "%s", out);
  free(out);
  char db[1300];
  snprintf(db, sizeof db, "%s/work/screen.db", dir);
  char *got = tu_query(db, "SELECT name FROM molecules ORDER BY " TU_IN_ORDER(""));
  cr_assert_str_eq(got, "good\nethanol\n", "stored:\n%s", got);
  free(got);
  /* one group per kind, not one per atom */
  got = tu_query(db, "SELECT reason, count(*) FROM rejects GROUP BY reason ORDER BY reason");
  cr_assert_str_eq(got, "atoms too close|2\ndummy atom|2\n", "%s", got);
  free(got);
  /* each with its own atom (1-based, in the record's order) and specifics */
  got = tu_query(db, "SELECT record_no, atom, detail FROM rejects WHERE reason = 'atoms too close' "
                     "ORDER BY record_no");
  cr_assert_str_eq(got,
                   "2|2|atoms 2 and 3 are 0.20 Å apart (< 0.5)\n"
                   "3|1|atoms 1 and 2 are 0.30 Å apart (< 0.5)\n",
                   "%s", got);
  free(got);
  got = tu_query(db, "SELECT record_no, atom, detail FROM rejects WHERE reason = 'dummy atom' ORDER BY record_no");
  cr_assert_str_eq(got, "2|2|atom 2\n3|5|atom 5\n", "%s", got);
  free(got);
  /* each under the record's own name, whether Open Babel refused it (a
   * dummy atom) or a check after it did (atoms too close): issue 55 */
  got = tu_query(db, "SELECT coalesce(name, '') FROM rejects ORDER BY source_file, record_no");
  cr_assert_str_eq(got, "o_on_c2\nc1_on_c2\nstar2\nstar5\n", "%s", got);
  free(got);

  /* the report: the kind once, its examples with their atom and specifics */
  cr_assert_eq(tu_se3(&out, "report %s/work -o %s/report.html --no-depict", dir, dir), 0, "%s", out);
  free(out);
  char page[1300];
  snprintf(page, sizeof page, "%s/report.html", dir);
  char *html = tu_read(page, NULL);
  cr_assert(html);
  cr_assert(strstr(html, "4 records or molecules were rejected, for 2 distinct reasons"), "%s", html);
  const char *at = strstr(html, "<td>atoms too close</td>");
  cr_assert(at, "no row for the kind");
  cr_assert_null(strstr(at + 1, "<td>atoms too close</td>"), "the kind is shown twice");
  cr_assert(strstr(at, "close.sdf #2 o_on_c2 &mdash; atoms 2 and 3 are 0.20 Å apart (&lt; 0.5)<br>"
                      "close.sdf #3 c1_on_c2 &mdash; atoms 1 and 2 are 0.30 Å apart (&lt; 0.5)</td>"),
            "%s", at);
  cr_assert(strstr(html, "dummy.smi #2 star2 &mdash; atom 2<br>dummy.smi #3 star5 &mdash; atom 5</td>"), "%s", html);
  free(html);
  free(wf);
  free(yaml);
  free(dir);
}
