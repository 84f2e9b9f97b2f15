// ionise.cc — protonation from our own table of ionisable groups (ionise.h),
// in the manner of Dimorphite-DL's substructure table: a SMARTS a group,
// its first atom the site that gains or loses the proton, a pKa that decides
// and the range the group's members span. It replaces Open Babel's pH model
// (phmodel.txt), which made N-methylpiperazines +2, deprotonated ring ether
// oxygens into radicals and left stereo tags on ammonium nitrogens.
//
// The molecule is first neutralised as far as hydrogens allow, so that the
// result does not depend on the charges it was given (an acid and its
// carboxylate, an amine and its ammonium give one canonical SMILES), then
// the table is applied at the pH.
#include "chem/ionise.h" // (its C part in extern "C" itself)
#include "common/error.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "chem/ob_headers.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wdeprecated-copy"
/* (openbabel/canon.h, which has no include guard, comes with ob_headers.h) */
#include <openbabel/graphsym.h>
#include <openbabel/parsmart.h>
#pragma GCC diagnostic pop

using namespace OpenBabel;

// Pieces of the SMARTS below. An amine-like nitrogen: no neighbour but
// carbon and hydrogen, none of its carbons a carbonyl or thiocarbonyl.
#define NOT_HETERO "!$(N~[!#6;!#1])"
#define NOT_ACYL "!$(N-[#6]=[O,S])"
#define NOT_CYANO "!$(N-C#N)"
// An aliphatic amine: every heavy neighbour an sp3 carbon, none of them
// bearing a heteroatom (aminals, N,O-acetals: hexamine 4.9), no CF3 or
// nitrile on it (2,2,2-trifluoroethylamine 5.7, aminoacetonitrile 5.3).
#define AMINE "NX3;+0;" NOT_HETERO ";!$(N-[#6;!X4]);!$(N-[CX4]-[#7,#8,#9]);!$(N-[CX4]-C(F)(F)F);!$(N-[CX4]-C#N)"
// An amidine's or a guanidine's nitrogens.
#define AMIDINE_N "NX3;+0;" NOT_HETERO ";" NOT_ACYL ";" NOT_CYANO
#define IMINE_N "NX2;+0;" NOT_HETERO ";" NOT_ACYL ";" NOT_CYANO

namespace {

// Sources of the pKa values: the usual textbook figures (Perrin's tables, as
// collected by Dimorphite-DL's site_substructures table and in Williams'
// pKa compilation); lo..hi the spread of the group's common members.
const ionise_group GROUPS[] = {
    // acids: the site is the O, N or S that loses its hydrogen
    {"sulfonic acid, sulfate monoester", "[OX2H1]-[SX4](=O)=O", 1, -1.0, -3.0, 1.0},
    {"sulfinic acid", "[OX2H1]-[SX3]=O", 1, 2.0, 1.5, 2.5},
    {"phosphoric, phosphonic acid (first OH of a P)", "[OX2H1]-[PX4]=O", 1, 2.0, 1.0, 3.0},
    {"carboxylic acid", "[OX2H1]-[CX3]=O", 1, 4.2, 3.0, 5.0},
    // (in a ring: an open-chain enol such as acetylacetone's is 9 and more)
    {"vinylogous acid: ring enol of a 1,3-dicarbonyl (tetronic acid, 4-hydroxypyranone, dimedone)",
     "[OX2H1]-[CX3;R]=[CX3]-[CX3;R]=O", 1, 4.5, 3.5, 6.7},
    {"tetrazole (1H or 2H)", "[nH1;$(n1:n:n:n:c:1),$(n1:n:n:c:n:1)]", 1, 4.9, 4.5, 5.0},
    {"acyl sulfonamide, sulfonylurea", "[NX3H1](-[CX3]=O)-[SX4](=O)=O", 1, 4.5, 3.5, 5.5},
    {"N-heteroaryl sulfonamide (sulfa drugs)", "[NX3H1](-c:n)-[SX4](=O)=O", 1, 6.5, 5.5, 8.5},
    {"thiophenol", "[SX2H1]-c", 1, 6.6, 6.0, 7.0},
    {"open-chain enol of a 1,3-dicarbonyl (acetylacetone)", "[OX2H1]-[CX3]=[CX3]-[CX3]=O", 1, 9.0, 8.5, 11.0},
    {"hydroxamic acid", "[OX2H1]-[NX3]-[CX3]=O", 1, 8.8, 8.5, 9.5},
    {"imide (and uracil-like NH between two C=O)", "[#7X3;H1](~[#6X3]=O)~[#6X3]=O", 1, 9.5, 7.5, 10.5},
    {"phenol", "[OX2H1]-c", 1, 10.0, 7.0, 10.5},
    {"sulfonamide NH", "[NX3;H2,H1]-[SX4](=O)=O", 1, 10.0, 8.0, 11.0},
    {"aliphatic thiol", "[SX2H1]-[CX4]", 1, 10.0, 8.3, 10.5},
    // bases: the site is the N that gains a hydrogen
    {"guanidine", "[" IMINE_N "]=[CX3](-[" AMIDINE_N "])-[" AMIDINE_N "]", 0, 13.0, 10.5, 13.6},
    {"amidine", "[" IMINE_N "]=[CX3;!$(C(=N)(-N)-[!#6;!#1])]-[" AMIDINE_N "]", 0, 12.0, 10.0, 12.5},
    {"4-aminopyridine", "[nX2;+0]1ccc(-[" AMIDINE_N "])cc1", 0, 9.2, 8.0, 9.7},
    {"secondary aliphatic amine", "[" AMINE ";H1]", 0, 10.8, 8.4, 11.2},
    {"primary aliphatic amine", "[" AMINE ";H2]", 0, 10.6, 9.0, 10.8},
    {"tertiary aliphatic amine", "[" AMINE ";H0]", 0, 9.8, 7.5, 10.5},
    {"weakened aliphatic amine (CF3 or nitrile beside, aminal)", "[NX3;+0;" NOT_HETERO ";!$(N-[#6;!X4])]", 0, 5.5,
     4.5, 6.5},
    {"imidazole, benzimidazole", "[nX2;+0]1:c:[nX3;+0]:c:c:1", 0, 7.0, 5.5, 8.0},
    {"pyridine, quinoline", "[nX2;+0]1:c:c:c:c:c:1", 0, 5.2, 4.5, 6.0},
    {"aniline (on a benzene ring)",
     "[NX3;+0;$(N-c1ccccc1);" NOT_HETERO ";!$(N(-a)-a);!$(N-[#6;!X4;!a])]", 0, 4.6, 3.5, 5.5},
};
const int N_GROUPS = (int)(sizeof GROUPS / sizeof GROUPS[0]);

// The compiled patterns, once a process (Open Babel runs single-threaded in
// a worker: chem/workers.h).
std::vector<std::unique_ptr<OBSmartsPattern>> &patterns() {
  static std::vector<std::unique_ptr<OBSmartsPattern>> p;
  if (p.empty())
    for (int i = 0; i < N_GROUPS; i++) {
      p.emplace_back(new OBSmartsPattern);
      p.back()->Init(GROUPS[i].smarts);
    }
  return p;
}

bool is_oxide_partner(OBAtom *a, int sign) { // a neighbour with a charge of the given sign
  FOR_NBORS_OF_ATOM(n, a) {
    if (sign > 0 && n->GetFormalCharge() > 0) return true;
    if (sign < 0 && n->GetFormalCharge() < 0) return true;
  }
  return false;
}

// Undo +1 and -1 charges that a hydrogen undoes (see ionise.h).
void neutralise_all(OBMol &mol) {
  mol.DeleteHydrogens(); // hydrogens as counts: what the table edits
  FOR_ATOMS_OF_MOL(a, mol) {
    int z = (int)a->GetAtomicNum(), q = a->GetFormalCharge();
    unsigned h = a->GetImplicitHCount();
    if (q == 1 && h > 0 && (z == 7 || z == 8 || z == 15 || z == 16) && !is_oxide_partner(&*a, -1)) {
      a->SetFormalCharge(0);
      a->SetImplicitHCount(h - 1);
    } else if (q == -1 && (z == 7 || z == 8 || z == 16 || z == 34) && !is_oxide_partner(&*a, +1)) {
      unsigned usual = z == 7 ? 3 : 2;
      if (a->GetTotalValence() + 1 > usual) continue;
      a->SetFormalCharge(0);
      a->SetImplicitHCount(h + 1);
    }
  }
  mol.SetAromaticPerceived(false);
}

struct Site {
  OBAtom *atom;
  int group;
  unsigned label; // Open Babel's canonical order: ties broken the same for any input order
};

// The table's sites in the molecule: each atom once, by the first row that
// matches it; acids with a hydrogen to lose, bases without a charge.
std::vector<Site> find_sites(OBMol &mol) {
  std::vector<Site> sites;
  std::vector<char> taken(mol.NumAtoms() + 1, 0);
  std::vector<std::unique_ptr<OBSmartsPattern>> &pat = patterns();
  for (int g = 0; g < N_GROUPS; g++) {
    if (!pat[g]->IsValid() || !pat[g]->Match(mol)) continue;
    for (const std::vector<int> &m : pat[g]->GetMapList()) {
      OBAtom *a = mol.GetAtom(m[0]);
      if (taken[m[0]]) continue;
      if (GROUPS[g].acid ? a->GetImplicitHCount() == 0 : a->GetFormalCharge() != 0) continue;
      taken[m[0]] = 1;
      sites.push_back({a, g, 0});
    }
  }
  if (sites.size() > 1) {
    OBGraphSym gs(&mol);
    std::vector<unsigned> sym, canon;
    gs.GetSymmetry(sym);
    CanonicalLabels(&mol, sym, canon);
    for (Site &s : sites)
      if (s.atom->GetIdx() - 1 < canon.size()) s.label = canon[s.atom->GetIdx() - 1];
  }
  // strongest first: an acid's lowest pKa, a base's highest
  std::sort(sites.begin(), sites.end(), [](const Site &x, const Site &y) {
    const ionise_group &a = GROUPS[x.group], &b = GROUPS[y.group];
    double ka = a.acid ? a.pka : -a.pka, kb = b.acid ? b.pka : -b.pka;
    if (a.acid != b.acid) return a.acid > b.acid;
    if (ka != kb) return ka < kb;
    return x.label < y.label;
  });
  return sites;
}

// How many of the atoms marked in changed lie within reach bonds of a.
int changed_within(OBMol &mol, OBAtom *a, int reach, const std::vector<char> &changed) {
  std::vector<int> dist(mol.NumAtoms() + 1, -1);
  std::vector<OBAtom *> frontier{a}, next;
  dist[a->GetIdx()] = 0;
  int n = 0;
  for (int d = 1; d <= reach && !frontier.empty(); d++) {
    next.clear();
    for (OBAtom *f : frontier)
      FOR_NBORS_OF_ATOM(nb, f) {
        unsigned i = nb->GetIdx();
        if (dist[i] >= 0) continue;
        dist[i] = d;
        n += changed[i];
        next.push_back(&*nb);
      }
    frontier.swap(next);
  }
  return n;
}

void set_state(OBAtom *a, bool acid) {
  if (acid) {
    a->SetFormalCharge(-1);
    a->SetImplicitHCount(a->GetImplicitHCount() - 1);
  } else {
    a->SetFormalCharge(1);
    a->SetImplicitHCount(a->GetImplicitHCount() + 1);
  }
}

// Each site takes the state its (shifted) pKa gives at ph; with
// max_acids >= 0 instead, that many of the strongest acids lose their proton
// whatever the pH and no base changes (the zwitterion rule of neutral).
void apply_table(OBMol &mol, double ph, int max_acids) {
  std::vector<Site> sites = find_sites(mol);
  std::vector<char> acid_done(mol.NumAtoms() + 1, 0), base_done(mol.NumAtoms() + 1, 0);
  int acids = 0;
  for (const Site &s : sites) {
    const ionise_group &g = GROUPS[s.group];
    if (max_acids >= 0) {
      if (!g.acid || acids >= max_acids) continue;
      set_state(s.atom, true);
      acids++;
      continue;
    }
    if (g.acid) {
      double pka = g.pka + IONISE_ACID_SHIFT * changed_within(mol, s.atom, IONISE_ACID_REACH, acid_done);
      if (ph <= pka) continue;
      acid_done[s.atom->GetIdx()] = 1;
    } else {
      double pka = g.pka - IONISE_BASE_SHIFT * changed_within(mol, s.atom, IONISE_BASE_REACH, base_done);
      if (ph >= pka) continue;
      base_done[s.atom->GetIdx()] = 1;
    }
    set_state(s.atom, g.acid != 0);
  }
  mol.SetAromaticPerceived(false);
}

} // namespace

extern "C" int ionise_n_groups(void) { return N_GROUPS; }

extern "C" const ionise_group *ionise_group_at(int i) { return i >= 0 && i < N_GROUPS ? &GROUPS[i] : nullptr; }

extern "C" int ionise_check_tables(struct se3_error *err) {
  try {
    for (int i = 0; i < N_GROUPS; i++) {
      OBSmartsPattern p;
      if (!p.Init(GROUPS[i].smarts)) {
        se3_error_set(err, SE3_ERR_RUN, "ionisable group '%s': SMARTS %s", GROUPS[i].name, GROUPS[i].smarts);
        return -1;
      }
    }
    for (int i = 0; i < std_n_rules(); i++) {
      OBSmartsPattern p;
      if (!p.Init(std_rule_at(i)->smarts)) {
        se3_error_set(err, SE3_ERR_RUN, "standardiser rule '%s': SMARTS %s", std_rule_at(i)->name,
                      std_rule_at(i)->smarts);
        return -1;
      }
    }
  } catch (...) {
    se3_error_set(err, SE3_ERR_RUN, "exception");
    return -1;
  }
  return 0;
}

void se3_neutralise(OBMol &mol) {
  neutralise_all(mol);
  int q = 0;
  FOR_ATOMS_OF_MOL(a, mol) q += a->GetFormalCharge(); // (GetTotalCharge may be the file's figure)
  if (q > 0) apply_table(mol, 0, q);
  se3_drop_nh_stereo(mol);
}

void se3_protonate(OBMol &mol, double ph) {
  neutralise_all(mol);
  apply_table(mol, ph, -1);
  se3_drop_nh_stereo(mol);
}
