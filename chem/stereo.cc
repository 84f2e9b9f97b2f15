// stereo.cc — the stereo a molecule's input left free, and the isomer its
// generated 3D shape has (stereo_ob.h).
//
// Open Babel's SMILES reader keeps stereo data only for what the SMILES
// marks (CC(N)C(=O)O has none at all), so the free units are found from the
// graph: FindStereogenicUnits over the graph's symmetry classes gives every
// tetrahedral centre and cis/trans bond that can have a configuration (ring
// ones too: cis/trans-1,4-dimethylcyclohexane; not a double bond in a ring
// of fewer than 8 atoms, which Open Babel lists but only cis can close),
// and a unit without a specified configuration is free. A shape fixes each free unit one way;
// StereoFrom3D on a copy reads every unit from the coordinates, and the
// canonical isomeric SMILES names the isomer.
#include "chem/stereo_ob.h"
#include "chem/ionise.h"

#include <vector>

#include "chem/ob_headers.h"

using namespace OpenBabel;

namespace {

bool nh_centre(OBAtom *a) { return a->GetAtomicNum() == 7 && a->GetImplicitHCount() + a->ExplicitHydrogenCount() > 0; }

std::string trimmed(const std::string &s) {
  size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

} // namespace

void se3_stereo_free(OBMol &mol, bool skip_nh, int *tetra, int *cistrans) {
  *tetra = *cistrans = 0;
  OBStereoFacade facade(&mol); // (perceives what was not yet)
  std::vector<unsigned int> sym;
  OBGraphSym graph(&mol);
  graph.GetSymmetry(sym);
  OBStereoUnitSet units = FindStereogenicUnits(&mol, sym);
  for (const OBStereoUnit &u : units) {
    if (u.type == OBStereo::Tetrahedral) {
      OBAtom *a = mol.GetAtomById(u.id);
      if (!a || (skip_nh && nh_centre(a))) continue;
      OBTetrahedralStereo *ts = facade.GetTetrahedralStereo(u.id);
      if (!ts || !ts->GetConfig().specified) ++*tetra;
    } else if (u.type == OBStereo::CisTrans) {
      OBBond *b = mol.GetBondById(u.id);
      if (!b) continue;
      // a double bond in a ring of fewer than 8 atoms is cis, whatever the
      // shape (SMILES marks none there: O=C1CCC(=C1)c1ccccc1 has no isomers)
      OBRing *ring = b->IsInRing() ? b->FindSmallestRing() : nullptr;
      if (ring && ring->Size() < 8) continue;
      OBCisTransStereo *ct = facade.GetCisTransStereo(u.id);
      if (!ct || !ct->GetConfig().specified) ++*cistrans;
    }
  }
}

std::string se3_isomer_smiles(const OBMol &mol, bool skip_nh) {
  static OBConversion *conv;
  if (!conv) {
    conv = new OBConversion;
    if (!conv->SetOutFormat("can")) {
      delete conv;
      conv = nullptr;
      return std::string();
    }
    conv->AddOption("n", OBConversion::OUTOPTIONS); // no title
  }
  OBMol copy(mol);
  StereoFrom3D(&copy, true); // every unit as the coordinates have it, whatever mol was told
  if (skip_nh) se3_drop_nh_stereo(copy);
  return trimmed(conv->WriteString(&copy, true));
}
