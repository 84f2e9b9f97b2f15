// test_gen3d_another.cc — se3_gen3d_another (chem/gen3d.h), the cheap extra
// conformer from a built one, through the C++ API (it takes an OBMol): each
// draw passes the checks, keeps every bond length and the input's canonical
// isomeric SMILES perceived from 3D, is the same for the same draw, and the
// draws give several shapes of a flexible molecule; a rigid one has nothing
// to turn and stays as it was. Also se3_gen3d's own first shape: the same
// under any order of the molecule's stereo data (which Open Babel's SMILES
// reader makes in atom-address order), and the same for the first build in a
// process as for the next (Open Babel reseeds rand() from the clock when its
// random vectors are first used).
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

ob_parse_opts fast_opts() {
  ob_parse_opts o = {};
  o.add_hydrogens = 1;
  o.gen3d = OB_GEN3D_ALWAYS;
  o.quality = OB_Q_FAST;
  o.max_atoms = 999;
  return o;
}

OBMol built(const char *smi) {
  OBMol mol = read_smiles(smi);
  ob_parse_opts o = fast_opts();
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

// Daptomycin (Lipophilicity, chemprop_lipo.csv line 3594): thirteen centres,
// six of which OBBuilder inverts and swaps back one after another. With the
// stereo data in the reader's order or reversed, the same seed gives the same
// coordinates; before order_stereo it gave two shapes, and which one a
// library got depended on the records its worker had read before. Criterion
// runs each test in a fresh process, so as_read is the process's first build:
// without the priming in se3_ob_srand it is seeded from the clock.
Test(gen3d_another, the_shape_does_not_depend_on_the_order_of_stereo_data) {
  static const char *DAPTOMYCIN =
      "CCCCCCCCCC(=O)N[C@@H](Cc1c[nH]c2ccccc12)C(=O)N[C@@H](CC(=O)N)C(=O)N[C@@H](CC(=O)O)C(=O)N[C@H]3[C@@H](C)"
      "OC(=O)[C@H](CC(=O)c4ccccc4N)NC(=O)[C@@H](NC(=O)[C@@H](CO)NC(=O)CNC(=O)[C@H](CC(=O)O)NC(=O)[C@@H](C)NC(=O)"
      "[C@H](CC(=O)O)NC(=O)[C@H](CCCN)NC(=O)CNC3=O)[C@H](C)CC(=O)O";
  ob_parse_opts o = fast_opts();
  OBMol as_read = read_smiles(DAPTOMYCIN);
  OBMol reversed = read_smiles(DAPTOMYCIN);
  std::vector<OBGenericData *> all = reversed.GetAllData(OBGenericDataType::StereoData);
  cr_assert_geq(all.size(), 13u);
  std::vector<OBGenericData *> copies;
  for (auto it = all.rbegin(); it != all.rend(); ++it)
    copies.push_back((*it)->Clone(&reversed));
  reversed.DeleteData(all);
  for (OBGenericData *d : copies)
    reversed.SetData(d);
  std::string why_a, why_b;
  bool ok_a = se3_gen3d(as_read, &o, 42, why_a), ok_b = se3_gen3d(reversed, &o, 42, why_b);
  cr_expect_eq(ok_a, ok_b, "%s | %s", why_a.c_str(), why_b.c_str());
  cr_expect_str_eq(why_a.c_str(), why_b.c_str());
  cr_assert_eq(as_read.NumAtoms(), reversed.NumAtoms());
  cr_expect_lt(heavy_rmsd_in_place(as_read, reversed), 1e-9, "two shapes: %.3f A apart",
               heavy_rmsd_in_place(as_read, reversed));
}
