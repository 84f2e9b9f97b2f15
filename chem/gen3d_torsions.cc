// gen3d_torsions.cc — open-chain torsions set afresh (see gen3d_torsions.h).
#include "chem/gen3d_torsions.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "chem/ob_headers.h"

using namespace OpenBabel;

namespace {

// A pair of atoms closer than this (Å: heavy-heavy, heavy-H, H-H) crowds the
// molecule by (R - d)². Contacts in crystal structures of organic molecules
// start near 3.3 (C···C), 2.6 (C···H) and 2.2 Å (H···H); a little under, so
// that a gauche 1-4 pair (2.9-3.0 Å) counts a little against anti (3.8 Å).
// Measured on 600 PDB ligands (bench/gen3d.sh --offset 5000, the tuning
// set): R_HEAVY 2.8, 3.2 and 3.6 gave median RMSD 1.61, 1.60 and 1.61 Å;
// a reward for extension (the heavy atoms' radius of gyration, weights 0.3
// to 1.0 against the crowding) made it worse (1.61-1.70 Å). Those figures
// and the every-30° one below were taken while torsion() had the wrong
// sign (before e84dc55); after it, a reward for extension (the mean
// distance of turned to fixed heavy atoms, weights 0.1-1) was still worse:
// 1.63-1.65 Å against 1.62.
const double R_HEAVY = 3.2, R_MIXED = 2.5, R_H = 2.0;
const int SWEEPS = 3;
// A draw (se3_gen3d_set_torsions's draw > 0) takes any option crowding the
// molecule by at most this much (Å²) more than the least crowded one.
const double DRAW_SLACK = 0.5;

struct Rotor {
  int u, v;             // 0-based: the side of v turns
  int a, b;             // reference atoms: a on u, b on v (0-based)
  std::vector<int> side; // atoms turned (v's side)
  std::vector<double> options; // torsions a-u-v-b allowed (radians)
};

bool heavy(OBAtom *a) { return a->GetAtomicNum() != 1; }

int heavy_degree(OBAtom *a) {
  int n = 0;
  FOR_NBORS_OF_ATOM(x, a) n += heavy(&*x);
  return n;
}

// A heavy neighbour of `at` other than `not_this`, preferring one given by pred.
template <class P> OBAtom *ref_of(OBAtom *at, OBAtom *not_this, P pred) {
  OBAtom *any = nullptr;
  FOR_NBORS_OF_ATOM(x, at) {
    if (&*x == not_this || !heavy(&*x)) continue;
    if (pred(&*x)) return &*x;
    if (!any) any = &*x;
  }
  return any;
}

bool is_carbonyl_o(OBAtom *c, OBAtom *o) {
  if (o->GetAtomicNum() != 8 && o->GetAtomicNum() != 16) return false;
  OBBond *b = c->GetBond(o);
  return b && b->GetBondOrder() == 2;
}

bool has_carbonyl(OBAtom *c) {
  if (c->GetAtomicNum() != 6) return false;
  FOR_NBORS_OF_ATOM(x, c) if (is_carbonyl_o(c, &*x)) return true;
  return false;
}


double deg(double d) { return d * M_PI / 180; }

// Heavy substituents ortho to a biaryl bond on u's ring: heavy atoms bonded
// outside the ring to u's ring neighbours other than v.
int ortho_substituents(OBAtom *u, OBAtom *v) {
  int n = 0;
  FOR_BONDS_OF_ATOM(b, u) {
    OBAtom *x = b->GetNbrAtom(u);
    if (x == v || !heavy(x) || !b->IsInRing()) continue;
    FOR_BONDS_OF_ATOM(c, x) {
      OBAtom *y = c->GetNbrAtom(x);
      if (y != u && heavy(y) && !c->IsInRing()) n++;
    }
  }
  return n;
}

// A biaryl bond's twist (degrees; its options are ±t and ±(180 - t)), by
// the heavy substituents ortho to it and whether a ring is five-membered:
// PDB ligands' biaryls (the tuning set, bench/gen3d.sh --offset 5000) are
// 0-45° without ortho substituents between six-membered rings, near planar
// with a five-membered ring, 45-75° with one ortho substituent and 60-90°
// with two. Tuning set, median RMSD: one twist of 40° for all 1.624 Å (mean
// 1.684), this table 1.621 (1.677); 30° for the first row 1.634, planar
// for the second 1.622, 90° for the last 1.636.
double biaryl_twist(OBAtom *u, OBAtom *v) {
  const int o = ortho_substituents(u, v) + ortho_substituents(v, u);
  const bool five = u->IsInRingSize(5) || v->IsInRingSize(5);
  if (o >= 2) return 75;
  if (o == 1) return five ? 35 : 60;
  return five ? 15 : 40;
}

// The torsions a bond may take, as a-u-v-b with a and b chosen here; false
// for a bond that is no rotor (in a ring, not single, a terminal group, a
// linear end).
bool make_rotor(OBMol &mol, OBBond *bond, Rotor &r) {
  if (bond->GetBondOrder() != 1 || bond->IsAromatic() || bond->IsInRing()) return false;
  OBAtom *u = bond->GetBeginAtom(), *v = bond->GetEndAtom();
  if (heavy_degree(u) < 2 || heavy_degree(v) < 2) return false; // only hydrogens turn
  if (u->GetHyb() == 1 || v->GetHyb() == 1) return false;
  // an amide's or ester's carbonyl carbon on u: its reference the carbonyl's
  // other substituent, the other end's a heavy atom
  if (has_carbonyl(v) && !has_carbonyl(u)) std::swap(u, v);
  auto not_carbonyl_o = [&](OBAtom *x) { return !is_carbonyl_o(u, x); };
  auto any = [](OBAtom *) { return true; };
  OBAtom *a = has_carbonyl(u) ? ref_of(u, v, not_carbonyl_o) : ref_of(u, v, any);
  OBAtom *b = ref_of(v, u, any);
  if (!a || !b) return false;
  r.u = (int)u->GetIdx() - 1, r.v = (int)v->GetIdx() - 1, r.a = (int)a->GetIdx() - 1, r.b = (int)b->GetIdx() - 1;
  r.side = se3_atoms_beyond(mol, v, u);
  if (r.side.size() * 2 > mol.NumAtoms()) { // turn the smaller side: the same torsion
    std::swap(r.u, r.v), std::swap(r.a, r.b);
    r.side = se3_atoms_beyond(mol, u, v);
  }
  int hu = u->GetHyb(), hv = v->GetHyb();
  bool sp2u = hu == 2 || u->IsAromatic(), sp2v = hv == 2 || v->IsAromatic();
  r.options.clear();
  bool carbonyl = has_carbonyl(u) && (v->GetAtomicNum() == 7 || v->GetAtomicNum() == 8) && !v->IsAromatic();
  if (carbonyl && heavy_degree(v) == 2) {
    r.options = {deg(180)}; // secondary amide, ester: trans (Z)
  } else if (u->IsAromatic() && v->IsAromatic()) {
    const double t = biaryl_twist(u, v);
    r.options = {deg(t), deg(180 - t), deg(-t), deg(t - 180)};
  } else if (sp2u && sp2v) {
    r.options = {0, deg(180)}; // conjugated: planar
  } else if (sp2u || sp2v) {
    // one sp2 end: every 30° (tuning set: mean RMSD 1.666 Å; every 60°, 1.677)
    for (int k = 0; k < 12; k++)
      r.options.push_back(deg(30 * k));
  } else {
    r.options = {deg(60), deg(180), deg(300)}; // staggered
  }
  return true;
}

// The torsion a-b-c-d (radians, IUPAC's sign: positive when, looking from b
// to c, a turns clockwise onto d), so that turn()ing d's side about b->c by t
// adds t to it.
double torsion(const std::vector<vector3> &p, int a, int b, int c, int d) {
  vector3 b1 = p[b] - p[a], b2 = p[c] - p[b], b3 = p[d] - p[c];
  vector3 n1 = cross(b1, b2), n2 = cross(b2, b3);
  vector3 m = cross(n1, b2 / b2.length());
  return -std::atan2(dot(m, n2), dot(n1, n2));
}

vector3 turn(const vector3 &p, const vector3 &origin, const vector3 &k, double t) {
  vector3 r = p - origin;
  double c = std::cos(t), s = std::sin(t);
  return origin + r * c + cross(k, r) * s + k * (dot(k, r) * (1 - c));
}

struct Scorer {
  const std::vector<char> &is_heavy;
  // crowding between the atoms of `moved` (flagged in in_moved) and the rest
  double crowding(const std::vector<vector3> &p, const std::vector<int> &moved,
                  const std::vector<char> &in_moved) const {
    double s = 0;
    const int n = (int)p.size();
    for (int i : moved)
      for (int j = 0; j < n; j++) {
        if (in_moved[j]) continue;
        int hh = is_heavy[i] + is_heavy[j];
        double r0 = hh == 2 ? R_HEAVY : hh == 1 ? R_MIXED : R_H;
        vector3 d = p[i] - p[j];
        double d2 = dot(d, d);
        if (d2 >= r0 * r0) continue;
        double dd = r0 - std::sqrt(d2);
        s += dd * dd;
      }
    return s;
  }
};

} // namespace

void se3_gen3d_set_torsions(OBMol &mol, unsigned draw, se3_torsion_stats *stats) {
  if (stats) *stats = se3_torsion_stats();
  const int n = (int)mol.NumAtoms();
  std::vector<Rotor> rotors;
  FOR_BONDS_OF_MOL(b, mol) {
    Rotor r;
    if (make_rotor(mol, &*b, r)) rotors.push_back(r);
  }
  if (stats) stats->rotors = (int)rotors.size();
  if (rotors.empty()) return;
  std::vector<vector3> p(n);
  std::vector<char> is_heavy(n);
  for (int i = 0; i < n; i++) {
    OBAtom *a = mol.GetAtom(i + 1);
    p[i] = a->GetVector();
    is_heavy[i] = heavy(a);
  }
  Scorer sc{is_heavy};
  std::vector<char> in_side(n, 0);
  std::vector<vector3> trial(p);
  std::vector<std::pair<double, double>> score; // crowding, turn: of each option
  std::mt19937 rng(draw);
  for (int sweep = 0; sweep < SWEEPS; sweep++) {
    int changed = 0;
    for (const Rotor &r : rotors) {
      vector3 origin = p[r.u], axis = p[r.v] - p[r.u];
      if (!(axis.length() > 0)) continue; // two atoms on one spot: no axis (the checks will say)
      axis.normalize();
      for (int i : r.side)
        in_side[i] = 1;
      double now = torsion(p, r.a, r.u, r.v, r.b);
      // one of the options, whatever the builder gave (a turn under 5° is none)
      double best = HUGE_VAL, best_t = 0;
      score.clear();
      for (double target : r.options) {
        double t = std::remainder(target - now, 2 * M_PI);
        if (std::fabs(t) < deg(5)) t = 0;
        for (int i : r.side)
          trial[i] = turn(p[i], origin, axis, t);
        double s = sc.crowding(trial, r.side, in_side);
        score.push_back({s, t});
        if (s < best - 1e-6) best = s, best_t = t;
      }
      if (draw) { // any option near the least crowded one, at random
        std::vector<double> near;
        for (const auto &st : score)
          if (st.first <= best + DRAW_SLACK) near.push_back(st.second);
        best_t = near[rng() % near.size()];
      }
      for (int i : r.side) {
        if (best_t != 0) p[i] = turn(p[i], origin, axis, best_t);
        trial[i] = p[i];
        in_side[i] = 0;
      }
      changed += best_t != 0;
    }
    if (stats) stats->changed += changed;
    if (!changed && !draw) break;
  }
  for (int i = 0; i < n; i++)
    mol.GetAtom(i + 1)->SetVector(p[i]);
}

std::vector<int> se3_atoms_beyond(OBMol &mol, OBAtom *from, OBAtom *block) {
  std::vector<char> seen(mol.NumAtoms() + 1, 0);
  std::vector<int> out;
  std::vector<OBAtom *> stack{from};
  seen[from->GetIdx()] = seen[block->GetIdx()] = 1;
  while (!stack.empty()) {
    OBAtom *a = stack.back();
    stack.pop_back();
    out.push_back((int)a->GetIdx() - 1);
    FOR_NBORS_OF_ATOM(nb, a) {
      if (seen[nb->GetIdx()]) continue;
      seen[nb->GetIdx()] = 1;
      stack.push_back(&*nb);
    }
  }
  return out;
}
