// gen3d_shape.cc — the shape check on an OBMol (see gen3d_shape.h).
#include "chem/gen3d_shape.h"

#include <cstdlib>

#include "chem/ob_headers.h"

using namespace OpenBabel;

Gen3dShape::~Gen3dShape() {
  shape_bounds_free(bounds_);
  mol_free(&graph_);
}

namespace {
// The graph as it is stored (chem/obbridge.cc copies a molecule out the
// same way): elements, charges, aromatic flags, implicit hydrogens, bonds
// with their orders.
unsigned long graph_signature(OBMol &mol) {
  unsigned long h = 1469598103934665603ul ^ mol.NumAtoms();
  FOR_ATOMS_OF_MOL(a, mol) h = (h ^ (a->GetAtomicNum() * 31u + (a->IsAromatic() ? 7u : 0u))) * 1099511628211ul;
  FOR_BONDS_OF_MOL(b, mol) {
    h = (h ^ (b->GetBeginAtomIdx() * 131071u + b->GetEndAtomIdx())) * 1099511628211ul;
    h = (h ^ (b->IsAromatic() ? 5u : b->GetBondOrder())) * 1099511628211ul;
  }
  return h;
}
} // namespace

bool Gen3dShape::prepare(OBMol &mol) {
  unsigned long sig = graph_signature(mol);
  if (bounds_ && sig == signature_) return true;
  shape_bounds_free(bounds_);
  bounds_ = nullptr;
  mol_free(&graph_);
  mol_init(&graph_);
  graph_.dim = 3;
  graph_.n_atoms = (int)mol.NumAtoms();
  graph_.n_bonds = (int)mol.NumBonds();
  graph_.atoms = (mol_atom *)std::calloc(graph_.n_atoms + 1, sizeof *graph_.atoms);
  graph_.bonds = (mol_bond *)std::calloc(graph_.n_bonds + 1, sizeof *graph_.bonds);
  if (!graph_.atoms || !graph_.bonds) return false;
  int i = 0;
  FOR_ATOMS_OF_MOL(a, mol) {
    mol_atom &t = graph_.atoms[i++];
    t.z = (uint8_t)a->GetAtomicNum();
    t.charge = (int8_t)a->GetFormalCharge();
    t.aromatic = a->IsAromatic() ? 1 : 0;
    t.implicit_h = (uint8_t)a->GetImplicitHCount();
  }
  i = 0;
  FOR_BONDS_OF_MOL(b, mol) {
    mol_bond &t = graph_.bonds[i++];
    unsigned x = b->GetBeginAtomIdx() - 1, y = b->GetEndAtomIdx() - 1;
    t.a = x < y ? x : y;
    t.b = x < y ? y : x;
    int order = b->GetBondOrder();
    t.order = b->IsAromatic() ? MOL_BOND_AROMATIC : (order >= 1 && order <= 3 ? order : 1);
  }
  bounds_ = shape_bounds_make(&graph_);
  signature_ = sig;
  return bounds_ != nullptr;
}

int Gen3dShape::check(OBMol &mol, shape_fault *f, std::string *why) {
  if (!prepare(mol)) return -1;
  std::vector<double> xyz;
  xyz.reserve(3 * mol.NumAtoms());
  FOR_ATOMS_OF_MOL(a, mol) {
    xyz.push_back(a->GetX());
    xyz.push_back(a->GetY());
    xyz.push_back(a->GetZ());
  }
  shape_fault worst{};
  int bad = shape_check(bounds_, xyz.data(), SHAPE_TOL_GENERATED, SHAPE_PLANAR_TOL, &worst);
  if (f) *f = worst;
  if (bad && why) {
    char text[300];
    shape_fault_text(&graph_, &worst, text, sizeof text);
    *why = text;
  }
  return bad;
}

int Gen3dShape::check_xyz(const std::vector<double> &xyz, shape_fault *f) {
  if (!bounds_ || (int)xyz.size() != 3 * shape_bounds_atoms(bounds_)) return -1;
  return shape_check(bounds_, xyz.data(), SHAPE_TOL_GENERATED, SHAPE_PLANAR_TOL, f);
}
