/* A shape is a function of the molecule, the settings and the generator
 * alone (issue 67): the first 300 ESOL SMILES, three conformers each,
 * ingested by two parser processes twice, and by one with another chunk
 * size, store byte-identical molecules (every coordinate of every
 * conformer). Before the fix, how the records fell to the two processes
 * changed rows 87 and 128 in about one run of two: Open Babel's UFF set up
 * their leading nitrile's torsions from whatever its stack held, which
 * depended on what the process had parsed before (chem/gen3d_ff.cc). */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/testutil.h"

static char *write_wf(const char *dir, const char *name, const char *csv, int workers, int chunk) {
  char yaml[2048], workdir[600];
  snprintf(workdir, sizeof workdir, "%s/%s.out", dir, name);
  snprintf(yaml, sizeof yaml,
           "workflow: shapes\nworkdir: %s\nrun: {chunk_size: %d, progress: none}\n"
           "sets:\n  a:\n    - {path: %s}\n"
           "stages:\n  ingest: {workers: %d, conformers: 3}\n",
           workdir, chunk, csv, workers);
  return tu_write(dir, name, yaml);
}

/* Every stored molecule of a run: "id|hex(mol)" lines in id order. */
static char *molecules(const char *dir, const char *name) {
  char db[700];
  snprintf(db, sizeof db, "%s/%s.out/screen.db", dir, name);
  char *rows = tu_query(db, "SELECT id, hex(mol) FROM molecules ORDER BY id");
  cr_assert_not_null(rows, "%s", db);
  return rows;
}

Test(shape_determinism, two_workers_twice_and_one_worker_agree) {
  char *dir = tu_tmpdir("shape_determinism");
  char csv[600];
  snprintf(csv, sizeof csv, "%s/esol300.csv", dir);
  cr_assert_eq(tu_sh(NULL, "head -301 '%s' > '%s'", tu_src("workflows/data/esol.csv"), csv), 0);
  const char *names[3] = {"two_a.yaml", "two_b.yaml", "one.yaml"};
  const int workers[3] = {2, 2, 1}, chunk[3] = {50, 50, 37};
  char *rows[3];
  for (int k = 0; k < 3; k++) {
    char *wf = write_wf(dir, names[k], csv, workers[k], chunk[k]), *out = NULL;
    cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
    free(out);
    free(wf);
    rows[k] = molecules(dir, names[k]);
  }
  /* 300 rows, every one stored */
  int n = 0;
  for (const char *p = rows[0]; (p = strchr(p, '\n')); p++)
    n++;
  cr_assert_geq(n, 299, "%d molecules stored of 300", n);
  for (int k = 1; k < 3; k++) {
    if (strcmp(rows[0], rows[k]) == 0) continue;
    /* name the first molecule that differs */
    const char *a = rows[0], *b = rows[k];
    while (*a && *a == *b)
      a++, b++;
    while (a > rows[0] && a[-1] != '\n')
      a--;
    cr_assert_fail("%s and %s stored other shapes, from the row of molecule %.*s on", names[0], names[k],
                   (int)strcspn(a, "|"), a);
  }
  for (int k = 0; k < 3; k++)
    free(rows[k]);
  free(dir);
}
