// gen3d_torsions.h — the builder's open-chain torsions set afresh (C++,
// internal to chem/: gen3d.cc calls it; nothing in C does).
//
// OBBuilder lays a chain atom by atom all-trans, but it joins every ring
// system to the rest at whatever torsion its rotation matrices give, so a
// phenyl on a CH2, an amide on an aryl or a ring on a ring points anywhere.
// This pass turns each open-chain single bond rigidly to one of a few
// torsions the bond's kind allows (staggered about an sp3 atom, planar
// between conjugated sp2 atoms, between two aromatic rings twisted by
// their ortho substituents, a secondary amide or ester trans), greedily,
// keeping the choice that least crowds the molecule. A rigid turn about a
// single bond changes no bond length, angle, stereocentre or double bond's
// side.
#ifndef SE3_GEN3D_TORSIONS_H
#define SE3_GEN3D_TORSIONS_H

#include <vector>

namespace OpenBabel {
class OBMol;
class OBAtom;
}

// What the pass did, for measurements.
struct se3_torsion_stats {
  int rotors;  // open-chain bonds the pass considered
  int changed; // turns made (over every sweep)
};

// Set mol's (3D, hydrogens as they are) open-chain torsions as above.
// draw 0: the least crowded choice at each bond, in up to three sweeps over
// the bonds; draw > 0: at each bond any option within a little of the least
// crowded, drawn from a generator seeded with draw (another conformer, for
// se3_gen3d_another). Deterministic for a given draw; 3 ms a PDB ligand on
// average (600 ligands, a loaded 2-core machine; the builder took 5 ms).
void se3_gen3d_set_torsions(OpenBabel::OBMol &mol, unsigned draw, se3_torsion_stats *stats);

// The atoms (0-based) reached from `from` without crossing `block`: the side
// of the bond from-block that turns with `from` (gen3d.cc's fixes use it too).
std::vector<int> se3_atoms_beyond(OpenBabel::OBMol &mol, OpenBabel::OBAtom *from, OpenBabel::OBAtom *block);

#endif
