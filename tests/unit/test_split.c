/* test_split.c — compounds kept whole (models/split.h): scaffold or cluster
 * groups joined through a compound they share, a random split repaired so
 * that no compound straddles two splits, and each split's counts. */
#include <criterion/criterion.h>
#include <string.h>

#include "models/split.h"
#include "models/trainer.h"

Test(split, groups_join_through_a_shared_compound) {
  /* scaffolds A, B, C, D; compound x has records under A and C (a charged
   * ring atom gave one of them another scaffold), so A and C are one group */
  char *key[6] = {"B", "A", "C", "D", "C", "A"}, *comp[6] = {"p", "x", "x", "q", "r", "s"}, *out[6];
  cr_assert_eq(se3_merge_groups(6, key, comp, out), 0);
  cr_assert_str_eq(out[0], "B");
  cr_assert_str_eq(out[1], "A");
  cr_assert_str_eq(out[2], "A", "C joined A through compound x: the least key names the group");
  cr_assert_str_eq(out[3], "D");
  cr_assert_str_eq(out[4], "A");
  cr_assert_str_eq(out[5], "A");
  /* every compound distinct: the keys as they were (the same split as before) */
  char *uniq[6] = {"1", "2", "3", "4", "5", "6"};
  cr_assert_eq(se3_merge_groups(6, key, uniq, out), 0);
  for (int i = 0; i < 6; i++)
    cr_assert_eq(out[i], key[i]);
  /* a chain: A-x-B-y-C is one group */
  char *k2[4] = {"A", "B", "B", "C"}, *c2[4] = {"x", "x", "y", "y"};
  cr_assert_eq(se3_merge_groups(4, k2, c2, out), 0);
  for (int i = 0; i < 4; i++)
    cr_assert_str_eq(out[i], "A");
}

Test(split, a_random_split_keeps_compounds_whole) {
  enum { N = 200 };
  static char names[N][8];
  char *comp[N];
  unsigned char split[N], before[N];
  int perm[N];
  for (int i = 0; i < N; i++) {
    snprintf(names[i], sizeof names[i], "c%d",
             i % 70 == 0 ? 0 : i / 3); /* threes, and one compound of 3 at 0, 70, 140 */
    comp[i] = names[i];
  }
  se3_split_random(N, split, perm, 9, 30, 30);
  memcpy(before, split, sizeof split);
  int moved = se3_split_keep_compounds(N, comp, split);
  cr_assert_gt(moved, 0, "records of one compound were drawn into different splits");
  int changed = 0;
  for (int i = 0; i < N; i++) {
    changed += split[i] != before[i];
    for (int j = 0; j < N; j++)
      if (!strcmp(comp[i], comp[j])) cr_assert_eq(split[i], split[j], "compound %s in two splits", comp[i]);
  }
  cr_assert_eq(changed, moved);
  /* the first record keeps its split */
  cr_assert_eq(split[0], before[0]);
  cr_assert_eq(split[140], before[0]);
  /* distinct compounds: nothing moves */
  char *uniq[N];
  for (int i = 0; i < N; i++) {
    snprintf(names[i], sizeof names[i], "u%d", i);
    uniq[i] = names[i];
  }
  se3_split_random(N, split, perm, 9, 30, 30);
  memcpy(before, split, sizeof split);
  cr_assert_eq(se3_split_keep_compounds(N, uniq, split), 0);
  cr_assert_eq(memcmp(before, split, sizeof split), 0);
}

Test(split, counts_of_molecules_compounds_and_actives) {
  /* train: x x y (x active twice); valid: z; test: w (active) v */
  char *comp[6] = {"x", "y", "x", "z", "w", "v"};
  unsigned char split[6] = {SE3_SPLIT_TRAIN, SE3_SPLIT_TRAIN, SE3_SPLIT_TRAIN,
                            SE3_SPLIT_VALID, SE3_SPLIT_TEST,  SE3_SPLIT_TEST};
  double y[6] = {1, 0, 1, 0, 1, 0};
  struct se3_split_count c[3];
  cr_assert_eq(se3_split_counts(6, split, y, 1, comp, c), 0);
  cr_assert(c[0].molecules == 3 && c[0].compounds == 2 && c[0].actives == 2 && c[0].active_compounds == 1);
  cr_assert(c[1].molecules == 1 && c[1].compounds == 1 && c[1].actives == 0 && c[1].active_compounds == 0);
  cr_assert(c[2].molecules == 2 && c[2].compounds == 2 && c[2].actives == 1 && c[2].active_compounds == 1);
  cr_assert_eq(se3_split_counts(6, split, y, 0, comp, c), 0);
  cr_assert(c[0].molecules == 3 && c[0].compounds == 2 && c[0].actives == -1 && c[0].active_compounds == -1);
}
