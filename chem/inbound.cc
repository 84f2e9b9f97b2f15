// inbound.cc — chemistry on the way in, between Open Babel's reading of a
// record and the standardiser (obbridge.cc's parse): a MOL2 file's formal
// charges from its atom types and partial charges, the radical check, and
// the fragments a salt's record holds. C++ on OBMol, internal to the Open
// Babel bridge (inbound_ob.h).
#include "chem/inbound_ob.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "chem/ob_headers.h"

using namespace OpenBabel;

namespace {

// Nothing but blanks (a line to skip).
bool blank(const std::string &s) {
  for (char c : s)
    if (!std::isspace((unsigned char)c)) return false;
  return true;
}

// The Tripos atom type and partial charge of each atom of a MOL2 record, in
// the order of its @<TRIPOS>ATOM lines (Open Babel's atom order); empty when
// the section cannot be read. has_charges: every line had a charge column.
struct Mol2Atoms {
  std::vector<std::string> type;
  std::vector<double> charge;
  bool has_charges = true;
};

Mol2Atoms mol2_atoms(const char *text, size_t len) {
  Mol2Atoms t;
  std::istringstream is(std::string(text, len));
  std::string line;
  bool in_atoms = false;
  while (std::getline(is, line)) {
    if (line.compare(0, 9, "@<TRIPOS>") == 0) {
      if (in_atoms) break;
      in_atoms = line.compare(0, 13, "@<TRIPOS>ATOM") == 0;
      continue;
    }
    if (!in_atoms || blank(line)) continue;
    std::istringstream ls(line);
    std::string id, name, x, y, z, type, subst_id, subst_name;
    double q = 0;
    if (!(ls >> id >> name >> x >> y >> z >> type)) return Mol2Atoms();
    if (!(ls >> subst_id >> subst_name >> q) || !std::isfinite(q)) t.has_charges = false;
    t.type.push_back(type);
    t.charge.push_back(q);
  }
  return t;
}

// Unpaired electrons of an atom from its element, charge and valence; see below.
int unpaired_electrons(int z, int charge, int valence);

// DUD-E and ZINC write charged groups by atom type and partial charges alone,
// with no formal charges: a carboxylate's two O.co2 oxygens, N.4 of an
// ammonium, a deprotonated sulfonamide N.2 or thiolate S.3. Open Babel 3.1.1
// reads them as radicals (C(=O)[O], [N], [S]). Give each group the formal
// charges its types imply: a terminal O.co2 with one single bond
// (carboxylate, phosphate, sulfonate) -1; N.4, and any neutral nitrogen with
// four bonds (iminium, amidinium, pyridinium typed N.pl3 or N.ar), +1 (N.4
// without its hydrogens in the file gets them as implicit ones). Then, where
// the partial charges sum to a net charge the formal ones do not reach yet,
// atoms left with one unpaired electron take -1 (the most negative partial
// charge first) or +1 (the most positive first) until they do. What remains
// is a radical, and the radical check rejects it.
void mol2_formal_charges(OBMol &mol, const Mol2Atoms &t) {
  if (t.type.size() != mol.NumAtoms()) return;
  int total = 0;
  double partial = 0;
  FOR_ATOMS_OF_MOL(a, mol) {
    size_t k = a->GetIdx() - 1;
    const std::string &type = t.type[k];
    partial += t.charge[k];
    if (a->GetFormalCharge() == 0) {
      unsigned val = a->GetTotalValence(); // bond orders (Kekulé) + implicit hydrogens
      if (type == "O.co2" && a->GetAtomicNum() == 8 && a->GetExplicitDegree() == 1 && val == 1) {
        a->SetFormalCharge(-1);
      } else if (a->GetAtomicNum() == 7 && (val == 4 || type == "N.4")) {
        a->SetFormalCharge(1);
        if (val < 4) a->SetImplicitHCount(a->GetImplicitHCount() + 4 - val);
      }
    }
    total += a->GetFormalCharge();
  }
  if (!t.has_charges) return;
  int net = (int)std::lround(partial);
  if (net == total) return;
  std::vector<std::pair<double, OBAtom *>> lone; // radicals by partial charge
  FOR_ATOMS_OF_MOL(a, mol)
  if (a->GetFormalCharge() == 0 && unpaired_electrons((int)a->GetAtomicNum(), 0, (int)a->GetTotalValence()) == 1)
    lone.emplace_back(t.charge[a->GetIdx() - 1], &*a);
  std::sort(lone.begin(), lone.end(), [](const std::pair<double, OBAtom *> &x, const std::pair<double, OBAtom *> &y) {
    return x.first < y.first;
  });
  for (size_t k = 0; k < lone.size() && total > net; k++) {
    OBAtom *a = lone[k].second;
    if (unpaired_electrons((int)a->GetAtomicNum(), -1, (int)a->GetTotalValence()) != 0) continue;
    a->SetFormalCharge(-1);
    total--;
  }
  for (size_t k = lone.size(); k-- > 0 && total < net;) {
    OBAtom *a = lone[k].second;
    if (a->GetFormalCharge() != 0 || unpaired_electrons((int)a->GetAtomicNum(), 1, (int)a->GetTotalValence()) != 0)
      continue;
    a->SetFormalCharge(1);
    total++;
  }
}

// Unpaired electrons of an atom from its element, charge and valence (the sum
// of its bond orders in a Kekulé structure plus its hydrogens); 0 for the
// elements this does not judge (metals, noble gases) and for valences above
// what the element allows (the valence check's business). An odd count of
// non-bonding electrons is a radical; so is a valence below the element's
// usual one at that charge with an even count (a carbene, a nitrene).
int unpaired_electrons(int z, int charge, int valence) {
  int ve;
  // clang-format off
  switch (z) {
  case 1: ve = 1; break;
  case 5: ve = 3; break;
  case 6: ve = 4; break;
  case 7: ve = 5; break;
  case 8: ve = 6; break;
  case 9: ve = 7; break;
  case 14: ve = 4; break;
  case 15: ve = 5; break;
  case 16: ve = 6; break;
  case 17: ve = 7; break;
  case 33: ve = 5; break;
  case 34: ve = 6; break;
  case 35: ve = 7; break;
  case 52: ve = 6; break;
  case 53: ve = 7; break;
  default: return 0;
  }
  // clang-format on
  int e = ve - charge;                               // valence electrons of the charged atom
  if (z == 1) return e == 1 && valence == 0 ? 1 : 0; // H atom; H+ and H- pass
  if (e < 0 || valence > e) return 0;
  int lone = e - valence;
  int usual = e <= 4 ? e : 8 - e;
  if (lone % 2) return valence < usual ? usual - valence : 1;
  return valence < usual ? usual - valence : 0; // above: S 4 and 6, P 5 (expanded, even)
}

} // namespace

void se3_mol2_formal_charges(OBMol &mol, const char *text, size_t len) {
  mol2_formal_charges(mol, mol2_atoms(text, len));
}

// The first atom with unpaired electrons (1-based), 0 when none. A record
// with a lone neutral hydrogen atom (QM7's methane lost two of its four to
// another fragment) or with no heavy atom is broken rather than a radical:
// mol_check names that ("hydrogen without a bond", "too few heavy atoms").
int se3_first_radical(OBMol &mol, int *unpaired) {
  bool heavy = false;
  FOR_ATOMS_OF_MOL(a, mol) {
    if (a->GetAtomicNum() != 1)
      heavy = true;
    else if (a->GetExplicitDegree() == 0 && a->GetFormalCharge() == 0 && mol.NumAtoms() > 1)
      return 0;
  }
  if (!heavy) return 0;
  FOR_ATOMS_OF_MOL(a, mol) {
    int u = unpaired_electrons((int)a->GetAtomicNum(), a->GetFormalCharge(), (int)a->GetTotalValence());
    if (u > 0) {
      *unpaired = u;
      return (int)a->GetIdx();
    }
  }
  return 0;
}

// The molecule's fragments, less lone neutral hydrogen atoms: those are a
// broken record (QM7's methane has two), not a salt's counter-ion, and
// mol_check rejects them ("hydrogen without a bond") whatever the policy.
std::vector<std::vector<int>> se3_fragments(OBMol &mol) {
  std::vector<std::vector<int>> frags, out;
  mol.ContigFragList(frags);
  for (std::vector<int> &f : frags) {
    if (f.size() == 1) {
      OBAtom *a = mol.GetAtom(f[0]);
      if (a->GetAtomicNum() == 1 && a->GetFormalCharge() == 0) continue;
    }
    out.push_back(std::move(f));
  }
  return out;
}

// Keep one of frags: the most heavy atoms among fragments with carbon (any
// fragment when none has carbon), then the most atoms, then the first.
void se3_keep_largest_fragment(OBMol &mol, const std::vector<std::vector<int>> &frags) {
  size_t best = 0;
  auto score = [&](const std::vector<int> &f) {
    int heavy = 0, carbon = 0;
    for (int idx : f) {
      int z = (int)mol.GetAtom(idx)->GetAtomicNum();
      heavy += z != 1;
      carbon += z == 6;
    }
    return std::make_tuple(carbon > 0, heavy, (int)f.size());
  };
  for (size_t k = 1; k < frags.size(); k++)
    if (score(frags[k]) > score(frags[best])) best = k;
  std::vector<OBAtom *> drop;
  for (size_t k = 0; k < frags.size(); k++)
    if (k != best)
      for (int idx : frags[k])
        drop.push_back(mol.GetAtom(idx));
  mol.BeginModify();
  for (OBAtom *a : drop)
    mol.DeleteAtom(a);
  mol.EndModify(false);
}
