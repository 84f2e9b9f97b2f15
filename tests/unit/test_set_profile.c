/* stages/set_profile.h: which canonical SMILES hold a protonated amine, the
 * card lines written and read back, and when a library's shares differ
 * clearly from a training set's (and when they do not). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "stages/set_profile.h"

Test(set_profile, protonated_amines_from_smiles) {
  static const char *const yes[] = {"C[NH3+]",   "C[NH2+]C",      "C[NH+](C)C",        "c1cc[nH+]cc1",
                                    "C[15NH3+]", "C[N@@H+](CC)C", "[O-]C(=O)CC[NH3+]", "NC(=[NH2+])N"};
  static const char *const no[] = {"CN",     "C[N+](C)(C)C", "C[N+](=O)[O-]",    "[Na+].[Cl-]",
                                   "C[NH-]", "C[NH2+2]",     "CC(=O)[O-]",       "c1ccncc1",
                                   "[NH4]",  "C[Nb+]",       "unterminated[NH3+"};
  for (size_t i = 0; i < sizeof yes / sizeof *yes; i++)
    cr_expect(set_profile_protonated_amine(yes[i]), "%s has a protonated amine", yes[i]);
  for (size_t i = 0; i < sizeof no / sizeof *no; i++)
    cr_expect(!set_profile_protonated_amine(no[i]), "%s has no protonated amine", no[i]);
  cr_expect(!set_profile_protonated_amine(NULL));
}

Test(set_profile, card_lines_read_back) {
  struct set_profile p = {.has = 1, .molecules = 22, .ionised = 16, .protonated_amines = 10, .input_coordinates = 3};
  char text[512], card[700];
  set_profile_text(&p, text, sizeof text);
  cr_assert_str_eq(text, "profile.molecules=22\nprofile.ionised=16\nprofile.protonated_amines=10\n"
                         "profile.input_coordinates=3\n");
  /* among the settings lines, as model_card_put writes them */
  snprintf(card, sizeof card, "stages.ingest.add_hydrogens=true\n%sstages.rank.order=descending", text);
  struct set_profile q;
  set_profile_parse(card, strlen(card), &q);
  cr_assert(q.has);
  cr_assert_eq(q.molecules, 22);
  cr_assert_eq(q.ionised, 16);
  cr_assert_eq(q.protonated_amines, 10);
  cr_assert_eq(q.input_coordinates, 3);
  /* a card without them (trained before profiles), or with one missing */
  const char *old = "stages.ingest.add_hydrogens=true\nstages.rank.order=descending\n";
  set_profile_parse(old, strlen(old), &q);
  cr_assert(!q.has);
  const char *part = "profile.molecules=22\nprofile.ionised=16\n";
  set_profile_parse(part, strlen(part), &q);
  cr_assert(!q.has);
}

Test(set_profile, clear_differences_only) {
  char msg[2048];
  struct set_profile train = {
      .has = 1, .molecules = 100, .ionised = 30, .protonated_amines = 15, .input_coordinates = 0};
  struct set_profile lib = {.has = 1, .molecules = 5000, .ionised = 5, .protonated_amines = 1, .input_coordinates = 0};
  /* 30 % against 0.1 %, 15 % against 0.02 %: two warnings with both figures */
  cr_assert_eq(set_profile_compare(&train, &lib, msg, sizeof msg), 2, "%s", msg);
  cr_assert(strstr(msg, "30.0 % of the training set's molecules are ionised"), "%s", msg);
  cr_assert(strstr(msg, "0.1 % of this set's (5 of 5000)"), "%s", msg);
  cr_assert(strstr(msg, "stages.ingest.protonate: 7.4"), "%s", msg);
  /* 30 % against 25 %: no */
  lib.ionised = 1250, lib.protonated_amines = 600;
  cr_assert_eq(set_profile_compare(&train, &lib, msg, sizeof msg), 0, "%s", msg);
  cr_assert_str_eq(msg, "");
  /* 10 points apart but less than twice: no; twice but 5 points apart: no */
  train.ionised = 30, lib.ionised = 2000; /* 30 % against 40 % */
  cr_assert_eq(set_profile_compare(&train, &lib, msg, sizeof msg), 0, "%s", msg);
  train.ionised = 5, lib.ionised = 500; /* 5 % against 10 % */
  cr_assert_eq(set_profile_compare(&train, &lib, msg, sizeof msg), 0, "%s", msg);
  /* shapes: a training set of its files' coordinates, a library generated */
  train.input_coordinates = 80;
  cr_assert_eq(set_profile_compare(&train, &lib, msg, sizeof msg), 1, "%s", msg);
  cr_assert(strstr(msg, "3D shapes differ: 80.0 %"), "%s", msg);
  /* nothing is compared without a profile */
  train.has = 0;
  cr_assert_eq(set_profile_compare(&train, &lib, msg, sizeof msg), 0);
}
