// test_gen3d_another.cc — se3_gen3d_another (chem/gen3d.h), the cheap extra
// conformer from a built one, through the C++ API (it takes an OBMol): each
// draw passes the checks, keeps every bond length and the input's canonical
// isomeric SMILES perceived from 3D, is the same for the same draw, and the
// draws give several shapes of a flexible molecule; a rigid one has nothing
// to turn and stays as it was.
#include <criterion/criterion.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "chem/gen3d.h"
#include "chem/ob_headers.h"

using namespace OpenBabel;

namespace {

OBMol read_smiles(const char *smi) {
  OBConversion conv;
  cr_assert(conv.SetInFormat("smi"));
  OBMol mol;
  cr_assert(conv.ReadString(&mol, smi), "%s", smi);
  return mol;
}

std::string can_from_3d(OBMol &mol) {
  OBMol copy(mol);
  copy.DeleteHydrogens();
  StereoFrom3D(&copy, true);
  OBConversion conv;
  conv.SetOutFormat("can");
  conv.AddOption("n", OBConversion::OUTOPTIONS);
  std::string s = conv.WriteString(&copy, true);
  return s.substr(0, s.find_first_of(" \t\r\n"));
}

std::string can_as_read(const char *smi) {
  OBMol mol = read_smiles(smi);
  OBConversion conv;
  conv.SetOutFormat("can");
  conv.AddOption("n", OBConversion::OUTOPTIONS);
  std::string s = conv.WriteString(&mol, true);
  return s.substr(0, s.find_first_of(" \t\r\n"));
}

OBMol built(const char *smi) {
  OBMol mol = read_smiles(smi);
  ob_parse_opts o = {};
  o.add_hydrogens = 1;
  o.gen3d = OB_GEN3D_ALWAYS;
  o.quality = OB_Q_FAST;
  o.max_atoms = 999;
  std::string why;
  cr_assert(se3_gen3d(mol, &o, 42, why), "%s: %s", smi, why.c_str());
  return mol;
}

double heavy_rmsd_in_place(OBMol &a, OBMol &b) { // no superposition: the same frame
  double s = 0;
  int n = 0;
  FOR_ATOMS_OF_MOL(x, a) {
    if (x->GetAtomicNum() == 1) continue;
    s += (x->GetVector() - b.GetAtom(x->GetIdx())->GetVector()).length_2();
    n++;
  }
  return std::sqrt(s / n);
}

} // namespace

// aspartame's neighbour with a few more rotors, two centres, an E bond
static const char *FLEXIBLE = "CC(C)C[C@H](NC(=O)/C=C/c1ccccc1)C(=O)N[C@@H](Cc1ccc(O)cc1)C(=O)OCCN";

Test(gen3d_another, draws_pass_the_checks_and_differ) {
  OBMol first = built(FLEXIBLE);
  const std::string want = can_as_read(FLEXIBLE);
  const std::string got = can_from_3d(first);
  cr_assert_str_eq(got.c_str(), want.c_str());
  int differ = 0;
  for (unsigned draw = 1; draw <= 6; draw++) {
    OBMol m(first);
    std::string why;
    cr_assert(se3_gen3d_another(m, draw, why), "draw %u: %s", draw, why.c_str());
    cr_assert_eq(m.NumAtoms(), first.NumAtoms());
    const std::string now = can_from_3d(m);
    cr_expect_str_eq(now.c_str(), want.c_str(), "draw %u changed the stereo", draw);
    FOR_BONDS_OF_MOL(b, first) { // rigid turns: every bond length as it was
      OBBond *c = m.GetBond(b->GetBeginAtomIdx(), b->GetEndAtomIdx());
      cr_assert_not_null(c);
      cr_expect_lt(std::fabs(c->GetLength() - b->GetLength()), 1e-6, "draw %u: bond %u-%u", draw,
                   b->GetBeginAtomIdx(), b->GetEndAtomIdx());
    }
    differ += heavy_rmsd_in_place(m, first) > 0.5;
    OBMol again(first);
    cr_assert(se3_gen3d_another(again, draw, why));
    cr_expect_lt(heavy_rmsd_in_place(again, m), 1e-9, "draw %u twice: two shapes", draw);
  }
  fprintf(stderr, "gen3d_another: %d of 6 draws moved the heavy atoms by more than 0.5 A\n", differ);
  cr_expect_geq(differ, 4, "only %d of 6 draws moved the heavy atoms by more than 0.5 Å", differ);
}

Test(gen3d_another, a_rigid_molecule_stays) {
  OBMol first = built("c1ccc2ccccc2c1");
  OBMol m(first);
  std::string why;
  cr_assert(se3_gen3d_another(m, 3, why), "%s", why.c_str());
  cr_expect_lt(heavy_rmsd_in_place(m, first), 1e-9);
}
