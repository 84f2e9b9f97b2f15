// stereo_ob.h — stereo that a molecule's input left open, and the isomer a
// generated 3D shape made of it (C++, internal to the Open Babel bridge;
// stereo.cc). Issue 70: a molecule read as CC(N)C(=O)O gets a shape, and a
// shape has a configuration: it is said (molecules.isomer_smiles), not
// chosen silently.
#ifndef SE3_STEREO_OB_H
#define SE3_STEREO_OB_H

#include <string>

namespace OpenBabel {
class OBMol;
}

// The stereogenic units of mol (Open Babel's perception: tetrahedral
// centres, ring ones included, and cis/trans double bonds outside rings of
// fewer than 8 atoms) whose
// configuration mol does not give: the free ones, those a shape will fix.
// skip_nh: a tetrahedral nitrogen carrying a hydrogen is no unit (the
// standardiser and protonation drop its marks: its proton exchanges in
// water, chem/ionise.h). Counts go to *tetra and *cistrans.
void se3_stereo_free(OpenBabel::OBMol &mol, bool skip_nh, int *tetra, int *cistrans);

// The canonical isomeric SMILES of the configuration mol's 3D coordinates
// have, every unit's perceived from them (on a copy: mol keeps its stereo
// as given), no title; with skip_nh, nitrogens carrying a hydrogen left
// unmarked. "" when Open Babel writes nothing.
std::string se3_isomer_smiles(const OpenBabel::OBMol &mol, bool skip_nh);

#endif
