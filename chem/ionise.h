/* ionise.h — one standard form for a molecule on its way in (issue 54): the
 * standardiser's rule table (standardize.cc) and the table of ionisable
 * groups that protonation at a pH follows (ionise.cc). Both tables are ours,
 * written and tested here (tests/unit/test_ionise.c) and printed in
 * docs/chemistry.md; obbridge.cc applies them to the OBMol it has read.
 *
 * The C part (the tables as data, their check) is for tests and docs; the
 * C++ part works on an Open Babel molecule and is internal to chem/.
 */
#ifndef SE3_IONISE_H
#define SE3_IONISE_H

#include <stddef.h>

struct se3_error;

#ifdef __cplusplus
extern "C" {
#endif

/* A row of the ionisable-group table. The first atom of smarts is the site:
 * an acid's site loses a hydrogen (charge -1) when the pH is above pka, a
 * base's gains one (+1) when the pH is below it. lo..hi is the range of pKa
 * that the group's members span (what the row stands for); pka alone
 * decides. Rows are matched in the table's order and an atom belongs to the
 * first row that matches it, so specific rows come before general ones. */
struct ionise_group {
  const char *name;
  const char *smarts;
  int acid; /* 1: an acid (loses H+); 0: a base (gains H+) */
  double pka, lo, hi;
};
int ionise_n_groups(void);
const struct ionise_group *ionise_group_at(int i);

/* A standardiser rule: the atoms of smarts change their formal charges by
 * dq[k] (k: the pattern's atom) and the bond between pattern atoms
 * bond[j][0] and bond[j][1] its order by bond[j][2] (two edits at most;
 * {0,0,0}: none). Applied until the pattern no longer matches. example_in
 * reads as example_out. */
struct std_rule {
  const char *name;
  const char *smarts;
  int dq[3];
  int bond[2][3];
  const char *example_in, *example_out;
};
int std_n_rules(void);
const struct std_rule *std_rule_at(int i);

/* 0 when every SMARTS of both tables is one Open Babel reads; -1 with err
 * (SE3_ERR_RUN; may be NULL) naming the first row it refuses. */
int ionise_check_tables(struct se3_error *err);

/* How far a second site of a kind near one already changed moves: a base
 * within IONISE_BASE_REACH bonds of a base this table protonated has its pKa
 * lowered by IONISE_BASE_SHIFT (N-C-C-N: piperazine 9.7 and 5.3,
 * ethylenediamine 9.9 and 6.9); an acid within IONISE_ACID_REACH bonds of one
 * deprotonated has it raised by IONISE_ACID_SHIFT (O-P-O: phosphoric acid
 * 2.1, 7.2 and 12.3), once for each such neighbour. */
#define IONISE_BASE_REACH 3
#define IONISE_BASE_SHIFT 4.0
#define IONISE_ACID_REACH 2
#define IONISE_ACID_SHIFT 5.0

#ifdef __cplusplus
}

namespace OpenBabel {
class OBMol;
}

// The standardiser (stages.ingest.standardize: basic), before the fragment
// step: bonds from alkali and alkaline-earth metals to N, O, S and halogens
// broken into ions (the fragment step then drops the metal), the rule table
// applied. (Its third part, no stereo on a nitrogen that carries a
// hydrogen, is se3_drop_nh_stereo, which the caller runs after protonation:
// an ammonium's stereo is dropped, a cage amine's survives its
// neutralisation.)
void se3_standardize(OpenBabel::OBMol &mol);

// stages.ingest.protonate: neutral. Hydrogens become implicit; every +1
// atom (N, O, S, P) with a hydrogen loses it, every -1 O, S, Se or N gains
// one, except in charge-separated groups (an ion beside an opposite charge:
// nitro, N-oxides, azides). A molecule left positive by charges no hydrogen
// undoes (a quaternary ammonium) keeps as many anions, its most acidic
// groups by the table, so a betaine stays a zwitterion.
void se3_neutralise(OpenBabel::OBMol &mol);

// stages.ingest.protonate: <pH>. Neutralised as above but completely (no
// zwitterion kept: the result depends on the molecule, not on the charges
// it came with), then each site of the table takes the state its pKa gives
// at ph; sites of a kind are taken strongest first (a base's highest pKa,
// an acid's lowest; ties by Open Babel's canonical atom order) and the
// shifts above apply to the later ones. No stereo stays on a protonated N.
void se3_protonate(OpenBabel::OBMol &mol, double ph);

// Tetrahedral stereo on nitrogens that carry a hydrogen dropped (perceived
// first where it was not yet): such a nitrogen inverts, or trades its
// proton, in water, and a 3D file's ammonium would otherwise get a stereo
// tag its SMILES lacks. The two above end with it.
void se3_drop_nh_stereo(OpenBabel::OBMol &mol);
#endif

#endif
