/* test_fingerprint.c — Morgan fingerprints, Tanimoto and Butina clustering
 * (chem/fingerprint.h): the same molecule gives the same bits whatever its
 * atom order and however its hydrogens are held; similarity orders
 * analogues above strangers; Butina's clusters on hand-made fingerprints
 * and on two chemical series. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "chem/fingerprint.h"
#include "chem/mol.h"
#include "chem/obbridge.h"

static void setup(void) { cr_assert_eq(ob_init(), 0, "ob_init"); }

static void fp_of(const char *smi, int add_h, struct fp *f) {
  struct ob_parse_opts o = {
      .format = "smi", .add_hydrogens = add_h, .gen3d = OB_GEN3D_NEVER, .seed = 1, .max_atoms = 999};
  char why[512] = "";
  struct mol m;
  cr_assert_eq(ob_parse(smi, strlen(smi), &o, &m, why, sizeof why), 0, "'%s': %s", smi, why);
  cr_assert_eq(fp_morgan(&m, 2, f), 0, "%s", smi);
  mol_free(&m);
}

static double sim(const char *a, const char *b) {
  struct fp fa, fb;
  fp_of(a, 1, &fa);
  fp_of(b, 1, &fb);
  double s = fp_tanimoto(&fa, &fb);
  cr_assert_float_eq(s, fp_tanimoto(&fb, &fa), 1e-15, "not symmetric");
  return s;
}

Test(fingerprint, one_molecule_one_fingerprint, .init = setup) {
  struct fp a, b, c;
  /* ethane: both carbons alike, one identifier per radius */
  fp_of("CC", 1, &a);
  cr_assert_eq(a.n_set, 3);
  /* ethanol: three unlike heavy atoms, three radii (no bit collides for these) */
  fp_of("CCO", 1, &a);
  cr_assert_eq(a.n_set, 9);
  /* hydrogens as atoms or as counts, and any atom order: the same bits */
  fp_of("OC(=O)c1ccccc1N", 1, &a);
  fp_of("OC(=O)c1ccccc1N", 0, &b);
  fp_of("Nc1ccccc1C(O)=O", 1, &c);
  cr_assert_eq(memcmp(a.w, b.w, sizeof a.w), 0, "explicit hydrogens changed the fingerprint");
  cr_assert_eq(memcmp(a.w, c.w, sizeof a.w), 0, "atom order changed the fingerprint");
  cr_assert_float_eq(fp_tanimoto(&a, &c), 1.0, 1e-15);
  int bits = 0;
  for (int k = 0; k < FP_BITS / 64; k++)
    bits += __builtin_popcountll(a.w[k]);
  cr_assert_eq(bits, a.n_set);
  /* a ring atom is not a chain atom: cyclohexane and hexane share no bit at radius 0 */
  struct fp ring, chain;
  fp_of("C1CCCCC1", 1, &ring);
  fp_of("CCCCCC", 1, &chain);
  cr_assert_lt(fp_tanimoto(&ring, &chain), 0.2, "%g", fp_tanimoto(&ring, &chain));
  struct fp empty = {0};
  cr_assert_float_eq(fp_tanimoto(&empty, &empty), 1.0, 1e-15);
  cr_assert_float_eq(fp_tanimoto(&empty, &a), 0.0, 1e-15);
  struct mol m;
  mol_init(&m);
  cr_assert_eq(fp_morgan(&m, 7, &a), -1, "radius 7 is refused");
}

Test(fingerprint, analogues_are_nearer_than_strangers, .init = setup) {
  double toluene_xylene = sim("Cc1ccccc1", "Cc1ccc(C)cc1"), toluene_hexanol = sim("Cc1ccccc1", "CCCCCCO");
  double para_meta = sim("Cc1ccc(O)cc1", "Cc1cccc(O)c1");
  cr_log_info("toluene/p-xylene %.3f, toluene/hexanol %.3f, p-/m-cresol %.3f", toluene_xylene, toluene_hexanol,
              para_meta);
  cr_assert_gt(toluene_xylene, 0.3);
  cr_assert_lt(toluene_hexanol, 0.1);
  cr_assert(para_meta > 0.2 && para_meta < 1, "%g", para_meta);
  /* two members of a series share more than a member with a stranger */
  cr_assert_gt(sim("CC(=O)Nc1ccc(O)cc1", "CC(=O)Nc1ccc(OC)cc1"), sim("CC(=O)Nc1ccc(O)cc1", "c1ccc2ccccc2c1"));
}

/* fingerprints of chosen bits: k and k + 1 share 3 of their 4 bits (similarity 3/5) */
static void bits(struct fp *f, const int *on, int n) {
  memset(f, 0, sizeof *f);
  for (int i = 0; i < n; i++) {
    f->w[on[i] / 64] |= 1ull << (on[i] % 64);
    f->n_set++;
  }
}

Test(fingerprint, butina_by_hand) {
  /* 0, 1, 2 near one another (similarity 0.6 in a chain, 0.33 from 0 to 2); 3 and 4 alike; 5 alone */
  static const int b[6][4] = {{1, 2, 3, 4},         {2, 3, 4, 5},         {3, 4, 5, 6},
                              {100, 101, 102, 103}, {100, 101, 102, 104}, {200, 300, 400, 500}};
  struct fp f[6];
  for (int i = 0; i < 6; i++)
    bits(&f[i], b[i], 4);
  cr_assert_float_eq(fp_tanimoto(&f[0], &f[1]), 0.6, 1e-15);
  cr_assert_float_eq(fp_tanimoto(&f[0], &f[2]), 2.0 / 6, 1e-15);
  int c[6];
  /* cutoff 0.5 (similarity >= 0.5): 1 has two neighbours and takes 0 and 2 */
  cr_assert_eq(fp_butina(f, 6, 0.5, c), 3);
  cr_assert(c[0] == 0 && c[1] == 0 && c[2] == 0, "%d %d %d", c[0], c[1], c[2]);
  cr_assert(c[3] == 1 && c[4] == 1 && c[5] == 2, "%d %d %d", c[3], c[4], c[5]);
  /* cutoff 0.3: nothing joins */
  cr_assert_eq(fp_butina(f, 6, 0.3, c), 6);
  /* cutoff 0.7 (similarity >= 0.3): 0 and 2 are neighbours too; 0 has most (ties: lower index) and takes both */
  cr_assert_eq(fp_butina(f, 6, 0.7, c), 3);
  cr_assert(c[0] == 0 && c[1] == 0 && c[2] == 0);
  /* cutoff 1: everything is one cluster */
  cr_assert_eq(fp_butina(f, 6, 1.0, c), 1);
  cr_assert_eq(fp_butina(f, 0, 0.6, c), 0);
}

Test(fingerprint, butina_separates_two_series, .init = setup) {
  static const char *const smi[] = {/* para-substituted acetanilides */
                                    "CC(=O)Nc1ccc(O)cc1", "CC(=O)Nc1ccc(OC)cc1", "CC(=O)Nc1ccc(Cl)cc1",
                                    "CC(=O)Nc1ccc(F)cc1", "CC(=O)Nc1ccc(C)cc1",
                                    /* long-chain alcohols */
                                    "CCCCCCCCO", "CCCCCCCCCO", "CCCCCCCCCCO", "CCCCCCCCCCCO"};
  enum { N = sizeof smi / sizeof *smi };
  struct fp f[N];
  for (int i = 0; i < N; i++)
    fp_of(smi[i], 1, &f[i]);
  int c[N];
  int nc = fp_butina(f, N, 0.6, c);
  cr_log_info("%d clusters: %d %d %d %d %d | %d %d %d %d", nc, c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8]);
  cr_assert_eq(nc, 2);
  for (int i = 1; i < 5; i++)
    cr_assert_eq(c[i], c[0], "acetanilide %d left its series", i);
  for (int i = 6; i < N; i++)
    cr_assert_eq(c[i], c[5], "alcohol %d left its series", i);
  cr_assert_neq(c[0], c[5]);
}
