// gen3d_build.h — a molecule's first 3D coordinates from Open Babel's
// fragment templates, each template laid on one rigid piece only (C++,
// internal to chem/: gen3d.cc calls it; nothing in C does).
//
// Open Babel 3.1.1's OBBuilder::Build cuts a molecule at its rotatable bonds
// into rigid pieces and gives each piece coordinates from a library of
// templates (rigid-fragments.txt by exact SMILES, ring-fragments.txt by
// generic SMARTS, largest first). It checks that a template fits the piece,
// then takes every match of that template in the whole molecule. A generic
// five-membered ring matched for a furan is then also laid on the five-ring of
// a benzofuran elsewhere in the molecule; the benzofuran's own template, and
// the benzene ring's, overlap those atoms and are skipped, so the benzene's
// other four atoms are placed one by one as a chain and the ring closes
// across a stretched bond (bench/gen3d.sh, issue 67: 26 of 200 PDB ligands
// and 33 of 300 Enamine SMILES had a ring bond 0.4-7 Å too long). Whether
// it happens depends on which piece comes first, not on the seed.
//
// This builder is the same scheme with that fixed: a template is tried on
// a piece as OBBuilder tries it (on the piece cut out, the cut bonds'
// valences filled with hydrogens), and laid only where all of a match's
// atoms lie in that piece and none is taken, so each piece keeps its own
// template wherever it sits in the molecule. Pieces are then joined depth
// first along the rotatable bonds and the chain atoms placed by OBBuilder's
// own geometry (OBBuilder::Connect, GetNewBondVector), in OBBuilder's order
// (which atom is placed from which, the order of each atom's bonds), and
// its stereo corrections run as before (CorrectStereoBonds,
// CorrectStereoAtoms; the second also where the first failed). A ring
// system no template covers whole still comes out with a ring bond
// stretched: se3_build says so (split_ring_bonds), and the shape check
// (chem/shape.h) sends it on to the fixes.
#ifndef SE3_GEN3D_BUILD_H
#define SE3_GEN3D_BUILD_H

namespace OpenBabel {
class OBMol;
}

struct se3_build_stats {
  int pieces;           // rigid pieces
  int templated;        // of them, laid from a template
  int split_ring_bonds; // ring bonds whose ends no one template match placed together
};

// Give mol (hydrogens as they are) 3D coordinates, drawing from rand() where
// a chain starts as OBBuilder does (seed it first: se3_ob_srand). Returns
// OBBuilder's stereo corrections' verdict (false: a centre or double bond it
// could not correct; the caller's checks decide). stats may be null. Where
// Open Babel's template files cannot be read, every atom is placed as a
// chain atom (and the shape check refuses the rings).
bool se3_build(OpenBabel::OBMol &mol, se3_build_stats *stats);

#endif
