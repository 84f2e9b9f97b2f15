/* perceive.h — the chemistry a 2D model reads off a molecule, perceived from
 * struct mol's atoms, bonds, hydrogens and 3D coordinates: rings, degree,
 * hydrogens, hybridisation, conjugation, and the handedness of stereocentres
 * and double bonds. The graph's optional atom and bond features
 * (chem/graph.h, stages.graph.atom_features and bond_features) are made of
 * these; every value is invariant under rotation and translation of the
 * coordinates, and the two stereo ones change sign under a mirror image.
 *
 * Definitions (a molecule's hydrogens may be atoms, or counts on their
 * heavy atom, or both; both count alike):
 *   degree        neighbours, hydrogens included (atoms bonded + implicit H)
 *   hydrogens     hydrogens on the atom (bonded H atoms + implicit H)
 *   ring          a bond is in a ring when its atoms stay connected without
 *                 it; its ring size is the smallest ring through it (found
 *                 up to PERCEIVE_MAX_RING; a larger ring counts as
 *                 PERCEIVE_MAX_RING); an atom's is the smallest of its bonds'
 *   unsaturated   an atom with a double, triple or aromatic bond
 *   lone pair     N, O or S that is not unsaturated (the conjugation's donors)
 *   conjugated    an aromatic bond; a single bond between two unsaturated
 *                 atoms, or an unsaturated atom and a lone-pair atom; a
 *                 double or triple bond one of whose atoms carries such a
 *                 conjugated single bond (C=C-C=C: all three; the amide's
 *                 C=O and C-N; an isolated C=O: none)
 *   hybridisation hydrogen: none (PERCEIVE_HYB_NONE); a triple bond or two
 *                 double bonds: sp; another unsaturated atom, or a lone-pair
 *                 atom with a conjugated bond (amide N, phenol O): sp2; else sp3
 *   chirality     an atom with exactly four neighbours (counting its implicit
 *                 H) whose neighbours fall in four different classes of the
 *                 molecule's graph symmetry (atom classes refined from the
 *                 element, degree, hydrogens, charge and aromaticity by their
 *                 neighbours' classes, as Morgan's algorithm does, to a fixed
 *                 point): +1 or -1 by the sign of the triple product of the
 *                 three highest-ranked neighbours' directions from the atom;
 *                 0 otherwise. An atom and its mirror image get opposite
 *                 signs; the sign is not R/S (ranks are not CIP priorities)
 *   stereo        a double bond outside rings smaller than 8 whose atoms
 *                 each have one or two other neighbours of different classes:
 *                 cis (+1) when the two highest-ranked of them are on the
 *                 same side (dihedral under 90 degrees), trans (-1) else; 0
 *                 otherwise
 * Ranks and classes depend on the bonds and atoms, never on their order in
 * the file: two orders of one molecule give the same values atom by atom.
 */
#ifndef SE3_PERCEIVE_H
#define SE3_PERCEIVE_H

#include <stdint.h>

#include "chem/mol.h"

#define PERCEIVE_MAX_RING 8

enum { PERCEIVE_HYB_NONE = 0, PERCEIVE_HYB_SP, PERCEIVE_HYB_SP2, PERCEIVE_HYB_SP3 };

struct perceive_atom {
  uint8_t degree, hydrogens, hybridisation;
  uint8_t ring; /* smallest ring size (3..PERCEIVE_MAX_RING), 0 when in no ring */
  int8_t chirality;
};

struct perceive_bond {
  uint8_t ring; /* as the atom's */
  uint8_t conjugated;
  int8_t stereo;
};

struct perceive {
  int n_atoms, n_bonds;
  struct perceive_atom *atom; /* n_atoms, in m's atom order */
  struct perceive_bond *bond; /* n_bonds, in m's bond order */
};

/* Perceives m (its bonds must be in range: graph_build checks first).
 * Returns 0, or -1 out of memory (p is then empty). */
int perceive(const struct mol *m, struct perceive *p);
void perceive_free(struct perceive *p);

#endif
