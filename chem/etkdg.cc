// etkdg.cc — RDKit's ETKDGv3 as gen3d's last fallback (see etkdg.h).
#include "chem/etkdg.h"

#ifndef SE3_HAVE_RDKIT

bool se3_etkdg_available() { return false; }
bool se3_etkdg_embed(OpenBabel::OBMol &, OpenBabel::OBMol &, unsigned, std::string &why) {
  why = "this build has no RDKit";
  return false;
}

#else

#include <cstdlib>
#include <memory>
#include <sstream>
#include <vector>

#include "chem/ob_headers.h"

// RDKit's headers are not -Wextra clean either.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wdeprecated-copy"
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include <GraphMol/Conformer.h>
#include <GraphMol/DistGeomHelpers/Embedder.h>
#include <GraphMol/MolOps.h>
#include <GraphMol/RWMol.h>
#include <GraphMol/SmilesParse/SmilesParse.h>
#include <RDGeneral/RDLog.h>
#pragma GCC diagnostic pop

using namespace OpenBabel;

bool se3_etkdg_available() { return true; }

namespace {

// Open Babel's isomeric SMILES of mol, explicit hydrogens written as atoms,
// and the 1-based index of the atom each SMILES atom is, in SMILES order.
bool smiles_with_order(OBMol &mol, std::string &smi, std::vector<int> &order) {
  OBConversion conv;
  if (!conv.SetOutFormat("smi")) return false;
  conv.AddOption("h", OBConversion::OUTOPTIONS); // explicit hydrogens stay atoms
  conv.AddOption("O", OBConversion::OUTOPTIONS); // "SMILES Atom Order"
  OBMol copy(mol);
  smi = conv.WriteString(&copy, true);
  std::string::size_type end = smi.find_first_of(" \t\r\n");
  if (end != std::string::npos) smi.resize(end);
  OBPairData *data = dynamic_cast<OBPairData *>(copy.GetData("SMILES Atom Order"));
  if (!data || smi.empty()) return false;
  std::istringstream in(data->GetValue());
  order.clear();
  for (int idx; in >> idx;)
    order.push_back(idx);
  return (int)order.size() == (int)mol.NumAtoms();
}

} // namespace

bool se3_etkdg_embed(OBMol &mol, OBMol &input, unsigned seed, std::string &why) {
  static bool quiet = false;
  if (!quiet) { // RDKit logs sanitisation and embedding warnings to stderr
    boost::logging::disable_logs("rdApp.*");
    quiet = true;
  }
  std::string smi;
  std::vector<int> order;
  if (!smiles_with_order(input, smi, order)) {
    why = "could not write the molecule for RDKit";
    return false;
  }
  try {
    RDKit::SmilesParserParams pp;
    pp.removeHs = false; // keep the input's explicit hydrogens: they are atoms of mol
    std::unique_ptr<RDKit::RWMol> rd(RDKit::SmilesToMol(smi, pp));
    if (!rd || rd->getNumAtoms() != order.size()) {
      why = "RDKit could not read " + smi;
      return false;
    }
    RDKit::MolOps::addHs(*rd); // the implicit ones, appended after the mapped atoms
    RDKit::DGeomHelpers::EmbedParameters params = RDKit::DGeomHelpers::ETKDGv3;
    params.randomSeed = (int)(seed & 0x7fffffffu);
    params.numThreads = 1;
    int cid = RDKit::DGeomHelpers::EmbedMolecule(*rd, params);
    if (cid < 0) {
      why = "ETKDG could not embed";
      return false;
    }
    const RDKit::Conformer &conf = rd->getConformer(cid);
    mol = input;
    for (size_t i = 0; i < order.size(); i++) {
      const RDGeom::Point3D &p = conf.getAtomPos((unsigned)i);
      mol.GetAtom(order[i])->SetVector(p.x, p.y, p.z);
    }
    mol.SetDimension(3);
    return true;
  } catch (const std::exception &e) {
    why = std::string("RDKit: ") + e.what();
  } catch (...) {
    why = "RDKit failed";
  }
  return false;
}

#endif
