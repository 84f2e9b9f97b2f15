// standardize.cc — the standardiser of stages.ingest.standardize: basic
// (ionise.h): one way of writing each functional group, whatever the file
// wrote. A MOL2 file's nitro group reads as N(=O)=O, a SMILES file's as
// [N+](=O)[O-]; an SD file's sulfoxide as S=O or [S+][O-]: the same molecule
// would otherwise be two graphs and two canonical SMILES. The rules are a
// table of SMARTS with the charges and bond orders they change; they change
// no hydrogen, so no rule can make a radical of a closed shell.
#include "chem/ionise.h" // (its C part in extern "C" itself)

#include <memory>
#include <vector>

#include "chem/ob_headers.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wdeprecated-copy"
#include <openbabel/parsmart.h>
#pragma GCC diagnostic pop

using namespace OpenBabel;

namespace {

// The target forms are the charge-separated ones for nitrogen (which has no
// d orbitals to take a fifth bond: nitro, N-oxides, azides, diazo) and the
// double-bonded ones for S, Se, P and the halogens (sulfoxides, sulfones,
// phosphine oxides, phosphates, perchlorates), as RDKit's and ChEMBL's
// standardisers write them.
const std_rule RULES[] = {
    {"nitro, N-oxide: N=O on a five-valent N as [N+]-[O-]", "[#7;+0;v5]=[OX1;+0]", {1, -1, 0},
     {{0, 1, -1}, {0, 0, 0}}, "CN(=O)=O", "C[N+](=O)[O-]"},
    {"azide, diazo written N=N#N as N=[N+]=[N-]", "[NX1;+0]#[NX2;+0;v5]=[#6,#7]", {-1, 1, 0},
     {{0, 1, -1}, {0, 0, 0}}, "CN=N#N", "CN=[N+]=[N-]"},
    {"azide, diazo written [N-]-[N+]#N as N=[N+]=[N-]", "[NX1;+0]#[NX2;+1]-[#6,#7;-1]", {-1, 0, 1},
     {{0, 1, -1}, {1, 2, 1}}, "C[N-][N+]#N", "CN=[N+]=[N-]"},
    {"S, Se, P, halogen oxides: [X+]-[O-] as X=O", "[#15,#16,#34,#17,#35,#53;+1,+2,+3]-[OX1;-1]", {-1, 1, 0},
     {{0, 1, 1}, {0, 0, 0}}, "C[S+](C)[O-]", "CS(C)=O"},
};
const int N_RULES = (int)(sizeof RULES / sizeof RULES[0]);

std::vector<std::unique_ptr<OBSmartsPattern>> &patterns() {
  static std::vector<std::unique_ptr<OBSmartsPattern>> p;
  if (p.empty())
    for (int i = 0; i < N_RULES; i++) {
      p.emplace_back(new OBSmartsPattern);
      p.back()->Init(RULES[i].smarts);
    }
  return p;
}

// One application of rule r at match m; false when it would make a bond
// order outside 1..3 (then the rule stops for this molecule).
bool apply_rule(OBMol &mol, const std_rule &r, const std::vector<int> &m) {
  for (int j = 0; j < 2; j++) {
    if (!r.bond[j][2]) continue;
    OBBond *b = mol.GetBond(m[r.bond[j][0]], m[r.bond[j][1]]);
    int order = b ? (int)b->GetBondOrder() + r.bond[j][2] : 0;
    if (order < 1 || order > 3) return false;
  }
  for (int j = 0; j < 2; j++)
    if (r.bond[j][2]) {
      OBBond *b = mol.GetBond(m[r.bond[j][0]], m[r.bond[j][1]]);
      b->SetBondOrder((int)b->GetBondOrder() + r.bond[j][2]);
    }
  for (size_t k = 0; k < 3 && k < m.size(); k++)
    if (r.dq[k]) {
      OBAtom *a = mol.GetAtom(m[k]);
      a->SetFormalCharge(a->GetFormalCharge() + r.dq[k]);
    }
  return true;
}

bool ionic_metal(int z) {
  switch (z) {
  case 3: case 11: case 19: case 37: case 55:  // alkali metals
  case 12: case 20: case 38: case 56:          // alkaline earths
    return true;
  default:
    return false;
  }
}

bool metal_partner(int z) {
  return z == 7 || z == 8 || z == 9 || z == 16 || z == 17 || z == 34 || z == 35 || z == 53;
}

// Single bonds from an alkali or alkaline-earth metal to N, O, F, S, Cl,
// Se, Br or I broken into ions: C(=O)O[Na] becomes C(=O)[O-].[Na+], and the
// fragment step keeps the organic ion. Bonds to carbon (organolithiums,
// Grignard reagents) and every other metal stay; the elements list rejects
// those records by default.
void disconnect_metals(OBMol &mol) {
  std::vector<OBBond *> cut;
  FOR_BONDS_OF_MOL(b, mol) {
    OBAtom *x = b->GetBeginAtom(), *y = b->GetEndAtom();
    if (b->GetBondOrder() != 1) continue;
    if (ionic_metal((int)y->GetAtomicNum())) std::swap(x, y);
    if (ionic_metal((int)x->GetAtomicNum()) && metal_partner((int)y->GetAtomicNum())) cut.push_back(&*b);
  }
  if (cut.empty()) return;
  for (OBBond *b : cut) {
    OBAtom *x = b->GetBeginAtom(), *y = b->GetEndAtom();
    if (ionic_metal((int)y->GetAtomicNum())) std::swap(x, y);
    x->SetFormalCharge(x->GetFormalCharge() + 1);
    y->SetFormalCharge(y->GetFormalCharge() - 1);
  }
  mol.BeginModify();
  for (OBBond *b : cut)
    mol.DeleteBond(b);
  mol.EndModify(false);
}

} // namespace

extern "C" int std_n_rules(void) { return N_RULES; }

extern "C" const std_rule *std_rule_at(int i) { return i >= 0 && i < N_RULES ? &RULES[i] : nullptr; }

void se3_drop_nh_stereo(OBMol &mol) {
  if (!mol.HasChiralityPerceived()) PerceiveStereo(&mol);
  std::vector<OBGenericData *> drop;
  for (OBGenericData *d : mol.GetAllData(OBGenericDataType::StereoData)) {
    OBStereoBase *s = dynamic_cast<OBStereoBase *>(d);
    if (!s || s->GetType() != OBStereo::Tetrahedral) continue;
    OBAtom *c = mol.GetAtomById(static_cast<OBTetrahedralStereo *>(s)->GetConfig().center);
    if (c && c->GetAtomicNum() == 7 && c->GetImplicitHCount() + c->ExplicitHydrogenCount() > 0) drop.push_back(d);
  }
  for (OBGenericData *d : drop)
    mol.DeleteData(d);
}

void se3_standardize(OBMol &mol) {
  disconnect_metals(mol);
  std::vector<std::unique_ptr<OBSmartsPattern>> &pat = patterns();
  for (int i = 0; i < N_RULES; i++) {
    if (!pat[i]->IsValid()) continue;
    // one match at a time, matched afresh: a sulfone's two oxygens edit the
    // same sulfur's charge. Each application takes a charge off a pattern
    // atom, so the loop ends; the bound is a guard.
    for (int n = 0; n < 4 * (int)mol.NumAtoms() + 4; n++) {
      if (!pat[i]->Match(mol, true)) break;
      if (!apply_rule(mol, RULES[i], pat[i]->GetMapList()[0])) break;
    }
  }
  mol.SetAromaticPerceived(false);
}
