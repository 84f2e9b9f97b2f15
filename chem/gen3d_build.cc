// gen3d_build.cc — 3D coordinates from fragment templates, each laid on one
// rigid piece (see gen3d_build.h).
#include "chem/gen3d_build.h"

#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "chem/ob_headers.h"
#include <openbabel/locale.h>
#include <openbabel/parsmart.h>
#include <openbabel/tokenst.h>

using namespace OpenBabel;

namespace {

// Open Babel's template files, read once a process (the worker that parses).
struct RingTemplate {
  std::unique_ptr<OBSmartsPattern> pattern;
  std::vector<vector3> xyz; // one a pattern atom, in the pattern's order
};
struct Templates {
  bool loaded = false;
  std::vector<RingTemplate> rings;              // as in the file: largest first
  std::unordered_map<std::string, long> rigid;  // canonical SMILES -> offset in rigid-fragments.txt
  std::unordered_map<std::string, std::vector<vector3>> rigid_xyz; // read on first use
};

Templates &templates() {
  static Templates t;
  if (t.loaded) return t;
  t.loaded = true;
  obLocale.SetLocale(); // numbers with a '.' whatever the process's locale
  std::ifstream in;
  if (!OpenDatafile(in, "rigid-fragments-index.txt").empty()) {
    std::string smiles;
    long offset;
    while (in >> smiles >> offset)
      t.rigid[smiles] = offset; // the last of a repeated SMILES, as OBBuilder reads it
  }
  in.close();
  in.clear();
  // ring-fragments.txt: a SMARTS alone on a line, then a line "x y z" for
  // each of its atoms; '#' starts a comment line
  if (!OpenDatafile(in, "ring-fragments.txt").empty()) {
    std::string line;
    std::vector<std::string> tok;
    RingTemplate cur;
    auto flush = [&]() {
      if (cur.pattern && !cur.xyz.empty() && cur.xyz.size() == cur.pattern->NumAtoms())
        t.rings.push_back(std::move(cur));
      cur = RingTemplate();
    };
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      tokenize(tok, line);
      if (tok.size() == 1) {
        flush();
        cur.pattern.reset(new OBSmartsPattern);
        if (!cur.pattern->Init(tok[0])) cur.pattern.reset();
      } else if (tok.size() == 3 && cur.pattern) {
        cur.xyz.push_back(vector3(std::atof(tok[0].c_str()), std::atof(tok[1].c_str()), std::atof(tok[2].c_str())));
      }
    }
    flush();
  }
  obLocale.RestoreLocale();
  return t;
}

// The coordinates of a rigid fragment by its canonical SMILES (empty when the
// library has none): the lines "Z x y z" after its SMILES line.
const std::vector<vector3> &rigid_coords(Templates &t, const std::string &smiles) {
  static const std::vector<vector3> none;
  auto it = t.rigid.find(smiles);
  if (it == t.rigid.end()) return none;
  auto cached = t.rigid_xyz.find(smiles);
  if (cached != t.rigid_xyz.end()) return cached->second;
  std::vector<vector3> &xyz = t.rigid_xyz[smiles];
  std::ifstream in;
  if (OpenDatafile(in, "rigid-fragments.txt").empty()) return xyz;
  obLocale.SetLocale();
  in.seekg(it->second);
  std::string line;
  std::vector<std::string> tok;
  bool header = true; // the offset points at the SMILES line
  while (std::getline(in, line)) {
    tokenize(tok, line);
    if (tok.size() == 4) {
      xyz.push_back(vector3(std::atof(tok[1].c_str()), std::atof(tok[2].c_str()), std::atof(tok[3].c_str())));
      header = false;
    } else if (tok.size() == 1 && !header) {
      break; // the next fragment's SMILES
    } else {
      header = false;
    }
  }
  obLocale.RestoreLocale();
  return xyz;
}

// Union-find over atoms (1-based) joined by bonds that are not rotors.
int find(std::vector<int> &up, int a) {
  while (up[a] != a)
    a = up[a] = up[up[a]];
  return a;
}

// Bond length for a new chain atom b on a: the covalent radii's sum (at
// least 1 Å) shortened for the bond's order as Open Babel's builder does
// (aromatic 0.9475, double 0.895, triple 0.8578).
double chain_bond_length(OBAtom *a, OBAtom *b, OBBond *bond) {
  double len = OBElements::GetCovalentRad(a->GetAtomicNum()) + OBElements::GetCovalentRad(b->GetAtomicNum());
  if (len < 1.0) len = 1.0;
  if (bond->IsAromatic())
    len *= 0.9475;
  else if (bond->GetBondOrder() == 2)
    len *= 0.895;
  else if (bond->GetBondOrder() == 3)
    len *= 0.8578;
  return len;
}

// Depth first over the molecule: a placed atom's whole template joins the
// atoms done through its first bond to them; a chain atom goes where its
// done neighbour's geometry puts a new bond (placed: the atoms templates
// laid in work).
void place_chains(OBMol &mol, OBMol &work, const OBBitVec &placed) {
  OBBitVec done;
  FOR_DFS_OF_MOL(a, mol) {
    const int ia = (int)a->GetIdx();
    if (done.BitIsSet(ia)) continue;
    OBAtom *prev = nullptr;
    FOR_NBORS_OF_ATOM(nb, &*a) {
      if (done.BitIsSet(nb->GetIdx())) prev = &*nb;
    }
    if (placed.BitIsSet(ia)) {
      if (prev) {
        OBBond *bond = mol.GetBond(prev, &*a);
        OBBuilder::Connect(work, (int)prev->GetIdx(), ia, bond->GetBondOrder());
        OBBond *joined = work.GetBond((int)prev->GetIdx(), ia);
        if (joined) joined->SetBondOrder(bond->GetBondOrder());
      }
      done |= OBBuilder::GetFragment(work.GetAtom(ia));
      continue;
    }
    vector3 at;
    if (prev) {
      OBBond *bond = mol.GetBond(prev, &*a);
      at = OBBuilder::GetNewBondVector(work.GetAtom(prev->GetIdx()), chain_bond_length(prev, &*a, bond));
    } else {
      // a tree's first atom: near the x axis, a little apart from other trees'
      vector3 jitter;
      jitter.randomUnitVector();
      at = VX + 0.1 * jitter;
    }
    work.GetAtom(ia)->SetVector(at);
    done.SetBitOn(ia);
    if (prev) work.AddBond(*mol.GetBond(prev, &*a));
  }
}

} // namespace

bool se3_build(OBMol &mol, se3_build_stats *stats) {
  se3_build_stats st{};
  const int n = (int)mol.NumAtoms();
  if (n == 0) {
    if (stats) *stats = st;
    return true;
  }
  Templates &lib = templates();
  mol.GetFirstAtom()->GetHyb(); // perceived now, so that the working copy carries it

  // The rigid pieces: atoms joined by bonds that do not rotate.
  std::vector<int> up(n + 1);
  for (int i = 0; i <= n; i++)
    up[i] = i;
  OBBitVec rotors;
  FOR_BONDS_OF_MOL(b, mol) {
    if (b->IsRotor())
      rotors.SetBitOn(b->GetIdx());
    else
      up[find(up, (int)b->GetBeginAtomIdx())] = find(up, (int)b->GetEndAtomIdx());
  }
  std::vector<int> piece(n + 1, 0); // 1-based piece number of each atom
  std::vector<std::vector<int>> members(1);
  for (int i = 1; i <= n; i++) {
    int r = find(up, i);
    if (!piece[r]) piece[r] = (int)members.size(), members.emplace_back();
    piece[i] = piece[r];
    members[piece[i]].push_back(i);
  }
  st.pieces = (int)members.size() - 1;

  // The working molecule: the same atoms, no bonds yet (a template's bonds
  // are added with its coordinates, a chain atom's as it is placed).
  OBMol work = mol;
  if (work.GetDimension() == 2) work.SetDimension(0);
  while (work.NumBonds())
    work.DeleteBond(work.GetBond(0));
  work.SetHybridizationPerceived(); // deleting bonds cleared it; keep mol's perception

  OBBitVec placed;                  // atoms with template coordinates
  std::vector<int> match_of(n + 1, 0); // which template match placed each atom (0: none)
  int matches = 0;
  auto lay = [&](const std::vector<int> &atoms, const std::vector<vector3> &xyz) {
    matches++;
    for (size_t k = 0; k < atoms.size(); k++) {
      work.GetAtom(atoms[k])->SetVector(xyz[k]);
      placed.SetBitOn(atoms[k]);
      match_of[atoms[k]] = matches;
    }
    // in the match's order, as OBBuilder adds them (AddBond refuses the
    // second copy): the order of an atom's bonds is the order in which
    // OBBuilder::GetNewBondVector reads its neighbours
    for (int a : atoms)
      for (int b : atoms) {
        OBBond *bond = mol.GetBond(a, b);
        if (bond) work.AddBond(*bond);
      }
  };
  // a match is usable when every atom lies in `want` (a piece number) and none is placed
  auto usable = [&](const std::vector<int> &m, int want) {
    for (int a : m)
      if (piece[a] != want || placed.BitIsSet(a)) return false;
    return true;
  };

  // Each piece as OBBuilder names and matches it: cut out, the rotors'
  // valences filled with hydrogens. A rigid fragment by its exact SMILES;
  // otherwise every ring template, largest first, that fits the cut piece
  // (OBBuilder's test: a template's [aH] then counts the hydrogen that
  // stands in for a cut bond), laid where it matches the molecule inside
  // this piece and on atoms no other match took.
  OBConversion can;
  can.SetOutFormat("can");
  std::vector<char> claimed(members.size(), 0);
  for (size_t p = 1; p < members.size(); p++) {
    if (members[p].size() < 2) continue;
    OBBitVec atoms;
    int ring_atoms = 0;
    for (int a : members[p]) {
      atoms.SetBitOn(a);
      ring_atoms += mol.GetAtom(a)->IsInRing();
    }
    OBMol cut;
    mol.CopySubstructure(cut, &atoms, &rotors);
    std::string smiles = can.WriteString(&cut, true);
    const std::vector<vector3> &xyz = rigid_coords(lib, smiles);
    if (!xyz.empty()) {
      OBSmartsPattern sp;
      if (sp.Init(smiles) && sp.Match(mol)) {
        for (const std::vector<int> &m : sp.GetUMapList())
          if (m.size() == xyz.size() && usable(m, (int)p)) {
            lay(m, xyz);
            claimed[p] = 1;
          }
      }
    }
    // Every atom of a template lies in its rings, so one larger than the
    // piece's ring atoms cannot fit it (OBBuilder tries every template up
    // to the whole molecule's ring atoms; none of those it skips here
    // could have matched).
    if (claimed[p] || ring_atoms < 3) continue;
    for (RingTemplate &rt : lib.rings) {
      if ((int)rt.pattern->NumAtoms() > ring_atoms || !rt.pattern->Match(cut)) continue;
      if (!rt.pattern->Match(mol)) continue;
      for (const std::vector<int> &m : rt.pattern->GetUMapList())
        if (usable(m, (int)p)) lay(m, rt.xyz);
    }
  }
  for (size_t p = 1; p < members.size(); p++) {
    bool any = claimed[p];
    for (int a : members[p])
      any = any || placed.BitIsSet(a);
    st.templated += any;
  }

  // Depth first over the molecule, the chains between templates placed.
  place_chains(mol, work, placed);

  // Ring bonds whose two ends came from different matches (or none): the
  // ring closes across whatever distance the chain left.
  FOR_BONDS_OF_MOL(b, mol) {
    if (!b->IsInRing()) continue;
    int u = (int)b->GetBeginAtomIdx(), v = (int)b->GetEndAtomIdx();
    st.split_ring_bonds += !match_of[u] || match_of[u] != match_of[v];
  }

  // The bonds again in mol's order, so that bond indices agree.
  while (work.NumBonds())
    work.DeleteBond(work.GetBond(0));
  FOR_BONDS_OF_MOL(b, mol) work.AddBond((int)b->GetBeginAtomIdx(), (int)b->GetEndAtomIdx(), b->GetBondOrder(), b->GetFlags());

  bool ok = OBBuilder::CorrectStereoBonds(work);
  ok = OBBuilder::CorrectStereoAtoms(work, false) && ok;
  mol = work;
  mol.SetChiralityPerceived();
  mol.SetDimension(3);
  if (stats) *stats = st;
  return ok;
}
