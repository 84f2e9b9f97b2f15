/* shape_check.c — every record of an SD file held against se3screen's own
 * geometry bounds (chem/shape.h: each bond, each 1-3 distance, each aromatic
 * ring's flatness), for bench/gen3d.sh.
 *
 *   shape_check FILE.sdf [--tol T] [--planar-tol P] [--input]
 *
 * Defaults: SHAPE_TOL_GENERATED and SHAPE_PLANAR_TOL (shapes a generator
 * made); --input: SHAPE_TOL_INPUT and SHAPE_PLANAR_TOL_INPUT. Each record is
 * read as the file has it, through the product's Open Babel bridge (no
 * hydrogens added, no 3D generation, no standardiser, every fragment kept,
 * radicals allowed; aromaticity perceived afresh, as ingest does), and every
 * conformer it holds is checked (an SD record holds one). Prints one JSON
 * line: records, read, unreadable, molecules_out, by_reason (molecules by
 * the reason of their worst failure) and up to 5 examples (name, record_no
 * tag where there is one, mol_why text).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chem/mol.h"
#include "chem/obbridge.h"
#include "chem/records.h"
#include "chem/shape.h"
#include "common/error.h"

#define MAX_EXAMPLES 5
#define MAX_REASONS 8

/* s as a JSON string, quotes included. */
static void put_json_str(const char *s) {
  putchar('"');
  for (; s && *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      printf("\\%c", c);
    else if (c < 0x20)
      printf("\\u%04x", c);
    else
      putchar(c);
  }
  putchar('"');
}

static const char *tag(const struct mol *m, const char *name) {
  for (int i = 0; i < m->n_tags; i++)
    if (!strcmp(m->tags[i].name, name)) return m->tags[i].value;
  return NULL;
}

int main(int argc, char **argv) {
  const char *path = NULL;
  double tol = SHAPE_TOL_GENERATED, planar_tol = SHAPE_PLANAR_TOL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--tol") && i + 1 < argc)
      tol = atof(argv[++i]);
    else if (!strcmp(argv[i], "--planar-tol") && i + 1 < argc)
      planar_tol = atof(argv[++i]);
    else if (!strcmp(argv[i], "--input"))
      tol = SHAPE_TOL_INPUT, planar_tol = SHAPE_PLANAR_TOL_INPUT;
    else if (argv[i][0] != '-' && !path)
      path = argv[i];
    else {
      fprintf(stderr, "usage: shape_check FILE.sdf [--tol T] [--planar-tol P] [--input]\n");
      return 2;
    }
  }
  if (!path) {
    fprintf(stderr, "usage: shape_check FILE.sdf [--tol T] [--planar-tol P] [--input]\n");
    return 2;
  }
  if (ob_init() != 0) {
    fprintf(stderr, "shape_check: Open Babel failed to start\n");
    return 1;
  }
  struct se3_error e;
  struct rec_options ro = {0};
  struct rec_reader *rd = rec_open(path, MOL_FMT_SDF, &ro, &e);
  if (!rd) {
    fprintf(stderr, "shape_check: %s\n", se3_error_str(&e).s);
    return 1;
  }
  struct ob_parse_opts o = {.format = "sdf", .gen3d = OB_GEN3D_NEVER, .add_hydrogens = 0, .max_atoms = 999,
                            .fragments = OB_FRAG_KEEP, .standardize = OB_STD_NONE, .allow_radicals = 1};
  long records = 0, read = 0, unreadable = 0, out = 0;
  char reasons[MAX_REASONS][128];
  long reason_n[MAX_REASONS];
  int n_reasons = 0, n_examples = 0;
  char ex_name[MAX_EXAMPLES][128], ex_rec[MAX_EXAMPLES][32], ex_why[MAX_EXAMPLES][600];
  struct rec r;
  int rc;
  while ((rc = rec_next(rd, &r, &e)) > 0) {
    records++;
    struct mol m;
    struct mol_why why;
    mol_init(&m);
    if (r.error || ob_parse_why(r.text, r.len, &o, &m, &why) != 0) {
      unreadable++;
      mol_free(&m);
      continue;
    }
    read++;
    mol_why_clear(&why);
    int bad = mol_shape_check(&m, tol, planar_tol, &why, NULL);
    if (bad < 0) {
      fprintf(stderr, "shape_check: out of memory\n");
      return 1;
    }
    if (bad > 0) {
      out++;
      int k = 0;
      while (k < n_reasons && strcmp(reasons[k], why.reason)) k++;
      if (k == n_reasons && n_reasons < MAX_REASONS) {
        snprintf(reasons[k], sizeof reasons[k], "%s", why.reason);
        reason_n[k] = 0;
        n_reasons++;
      }
      if (k < n_reasons) reason_n[k]++;
      if (n_examples < MAX_EXAMPLES) {
        const char *rec_no = tag(&m, "record_no");
        snprintf(ex_name[n_examples], sizeof ex_name[0], "%s", m.name ? m.name : "");
        snprintf(ex_rec[n_examples], sizeof ex_rec[0], "%s", rec_no ? rec_no : "");
        mol_why_text(&why, ex_why[n_examples], sizeof ex_why[0]);
        n_examples++;
      }
    }
    mol_free(&m);
  }
  rec_close(rd);
  if (rc < 0) {
    fprintf(stderr, "shape_check: %s\n", se3_error_str(&e).s);
    return 1;
  }
  printf("{\"file\":");
  put_json_str(path);
  printf(",\"tol\":%g,\"planar_tol\":%g,\"records\":%ld,\"read\":%ld,\"unreadable\":%ld,\"molecules_out\":%ld,"
         "\"by_reason\":{",
         tol, planar_tol, records, read, unreadable, out);
  for (int k = 0; k < n_reasons; k++) {
    if (k) putchar(',');
    put_json_str(reasons[k]);
    printf(":%ld", reason_n[k]);
  }
  printf("},\"examples\":[");
  for (int k = 0; k < n_examples; k++) {
    fputs(k ? ",{\"name\":" : "{\"name\":", stdout);
    put_json_str(ex_name[k]);
    printf(",\"record_no\":");
    put_json_str(ex_rec[k]);
    printf(",\"why\":");
    put_json_str(ex_why[k]);
    printf("}");
  }
  printf("]}\n");
  return 0;
}
