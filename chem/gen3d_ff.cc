// gen3d_ff.cc — force fields for 3D generation (see gen3d_ff.h).
#include "chem/gen3d_ff.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "chem/gen3d_shape.h"
#include "chem/ob_headers.h"

using namespace OpenBabel;

namespace {

// A new instance of a force field, logging into a sink (Setup crashes on a
// new instance without a log file).
OBForceField *fresh_forcefield(const char *name) {
  static std::ostringstream sink;
  OBForceField *proto = OBForceField::FindForceField(name);
  if (!proto) return nullptr;
  OBForceField *ff = proto->MakeNewInstance();
  if (!ff) return nullptr;
  sink.str("");
  ff->SetLogFile(&sink);
  ff->SetLogLevel(OBFF_LOGLVL_NONE);
  return ff;
}

// UFF set up for mol, without the torsions it has no term for. Open Babel
// 3.1.1's OBForceFieldUFF::SetupCalculations gives a torsion a barrier only
// where both middle atoms are sp2 or sp3 (UFF has none about a linear
// centre), but adds the others too, with the barrier and periodicity of the
// torsion before them in its loop, and those before the first torsion with
// whatever its stack held: what the process ran before. A nitrile that a
// canonical SMILES writes first (N#CC...) got an energy of its own or NaN by
// the records its ingest worker had parsed, and another shape from the
// cleanup (issue 67; valgrind: "conditional jump depends on uninitialised
// value ... created by a stack allocation" in SetupCalculations). Where a
// torsion has such a middle atom (UFF's type, whose third character is its
// hybridisation: 2, R or 3 have a term), groups leave it out: every atom with
// its neighbours (the bonds, angles and inversions) and every other torsion
// bonded, every pair non-bonded, as without groups.
bool uff_torsion_centre(const std::string &type) {
  return type.size() > 2 && (type[2] == '2' || type[2] == 'R' || type[2] == '3');
}

std::unique_ptr<OBForceField> setup_uff(OBMol &mol) {
  std::unique_ptr<OBForceField> ff(fresh_forcefield("UFF"));
  if (!ff || !ff->Setup(mol)) return nullptr;
  OBMol typed(mol);
  if (!ff->GetAtomTypes(typed)) return nullptr;
  std::vector<char> centre(typed.NumAtoms() + 1, 0);
  FOR_ATOMS_OF_MOL(a, typed) {
    OBPairData *t = dynamic_cast<OBPairData *>(a->GetData("FFAtomType"));
    centre[a->GetIdx()] = t && uff_torsion_centre(t->GetValue());
  }
  std::vector<OBBitVec> torsions;
  bool left_out = false;
  FOR_TORSIONS_OF_MOL(t, typed) {
    if (!centre[(*t)[1] + 1] || !centre[(*t)[2] + 1]) {
      left_out = true;
      continue;
    }
    OBBitVec g;
    for (int k = 0; k < 4; k++)
      g.SetBitOn((*t)[k] + 1);
    torsions.push_back(g);
  }
  if (!left_out) return ff;
  ff.reset(fresh_forcefield("UFF"));
  if (!ff) return nullptr;
  OBBitVec all;
  FOR_ATOMS_OF_MOL(a, typed) {
    all.SetBitOn(a->GetIdx());
    OBBitVec star;
    star.SetBitOn(a->GetIdx());
    FOR_NBORS_OF_ATOM(n, &*a) star.SetBitOn(n->GetIdx());
    ff->AddIntraGroup(star);
  }
  for (OBBitVec &g : torsions)
    ff->AddIntraGroup(g);
  ff->AddInterGroup(all);
  if (!ff->Setup(mol)) return nullptr;
  return ff;
}

std::unique_ptr<OBForceField> setup_forcefield(const char *name, OBMol &mol) {
  if (std::strcmp(name, "UFF") == 0) return setup_uff(mol);
  std::unique_ptr<OBForceField> ff(fresh_forcefield(name));
  if (ff && !ff->Setup(mol)) ff.reset();
  return ff;
}

bool finite_coords(OBMol &mol) {
  FOR_ATOMS_OF_MOL(a, mol) {
    if (!std::isfinite(a->GetX()) || !std::isfinite(a->GetY()) || !std::isfinite(a->GetZ())) return false;
  }
  return true;
}

} // namespace

void se3_minimise(OBMol &mol, int steps, double econv, const char *first, const char *second) {
  std::unique_ptr<OBForceField> ff = setup_forcefield(first, mol);
  if (!ff) ff = setup_forcefield(second, mol);
  if (!ff) return;
  OBMol before(mol);
  ff->ConjugateGradients(steps, econv);
  ff->GetCoordinates(mol);
  if (!finite_coords(mol)) mol = before;
}

bool se3_relax_shape(OBMol &mol, Gen3dShape &shape, int steps, int chunk) {
  std::unique_ptr<OBForceField> ff = setup_forcefield("UFF", mol);
  if (!ff) ff = setup_forcefield("MMFF94", mol);
  if (!ff) return false;
  ff->ConjugateGradientsInitialize(steps, 1e-6);
  for (int done = 0; done < steps; done += chunk) {
    bool more = ff->ConjugateGradientsTakeNSteps(chunk);
    ff->GetCoordinates(mol);
    if (!finite_coords(mol)) return false;
    if (shape.check(mol, nullptr, nullptr) == 0) return true;
    if (!more) break; // converged, and still out of bounds
  }
  return false;
}
