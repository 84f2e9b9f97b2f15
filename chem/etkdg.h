// etkdg.h — RDKit's ETKDGv3 embedder as the last fallback of 3D generation
// (C++, internal to chem/: gen3d.cc calls it; nothing in C does).
//
// OBBuilder places ring systems from templates, and about one PDB ligand in
// a hundred comes out with a ring centre inverted that no turn, mirror or
// force field undoes (bench/gen3d.sh). Distance geometry builds every atom
// from the molecule's bounds and chirality constraints, so it embeds those
// too; it costs 10-30 ms a molecule, which only the molecules every cheaper
// fix failed pay. The molecule goes to RDKit as Open Babel's isomeric SMILES
// with explicit hydrogens kept as atoms, and comes back atom for atom
// through the SMILES's atom order; the caller checks the result as it checks
// the builder's.
//
// Compiled in when CMake finds RDKit's headers and libraries (Debian's
// librdkit-dev; SE3_HAVE_RDKIT): without them se3_etkdg_available() is false
// and a molecule the builder's fixes cannot save stays a reject.
#ifndef SE3_ETKDG_H
#define SE3_ETKDG_H

#include <string>

namespace OpenBabel {
class OBMol;
}

// true when this build has the fallback.
bool se3_etkdg_available();

// mol becomes a copy of input with 3D coordinates from ETKDGv3 under seed
// (hydrogens: those input has as atoms; the caller adds the rest). false with
// why ("could not embed", "RDKit could not read ...") and mol unspecified.
bool se3_etkdg_embed(OpenBabel::OBMol &mol, OpenBabel::OBMol &input, unsigned seed, std::string &why);

#endif
