// gen3d.cc — 3D coordinates from a molecule's graph, checked (see gen3d.h).
//
// The builder (chem/gen3d_build.h: Open Babel's fragment templates, each on
// one rigid piece) gives coordinates, hydrogens are added from them,
// fragments that the builder stacked are laid side by side, the open-chain
// torsions are set afresh (chem/gen3d_torsions.h: the builder joins ring
// systems to chains at arbitrary torsions), and medium and best refine with
// MMFF94 (UFF where MMFF94 has no parameters; chem/gen3d_ff.h).
// rand() is seeded per molecule because Open Babel has no seed API and the
// builder draws from it.
//
// Then the checks, at every quality: finite, non-zero coordinates; every
// bond, 1-3 distance and aromatic ring within the bounds of chem/shape.h
// (a generic ring template's bond lengths come from whatever ring it was
// cut from; a ring system no template covers closes across Ångströms); no
// clash; the stereo the input specified kept. The builder corrects stereo
// itself but cannot always (ring stereo, its swaps and 180° flips are not
// re-checked), and about one Enamine molecule in ten comes out with atoms
// closer than 0.5 Å, one in four closer than 1 Å. Checks cost microseconds;
// only a molecule that fails pays for a fix, in order of cost:
//   mirror   all specified centres inverted and every double bond right:
//            reflecting the molecule inverts exactly the centres
//   invert   a centre inverted on its own: a half turn of two of its
//            non-ring branches exchanges them
//   torsion  a clash between atoms far apart in the graph: turn single bonds on
//            the path between them (microseconds; most clashes)
//   relax    a shape out of bounds by under 2 Å: up to 150 UFF steps, the
//            bounds checked every 15 (about 10 ms; one PDB ligand in five)
//   cleanup  15 UFF steps (MMFF94 where UFF has no parameters) from the
//            builder's geometry: pushes the remaining clashes apart
//   etkdg    RDKit's ETKDGv3 (chem/etkdg.h; where the build has RDKit), then
//            the quality's refinement: for what the builder's templates
//            cannot give, a ring centre inverted or flattened, a ring system
//            no template covers (a macrocycle), a ring a stereo swap tore
//   medium   the builder and 250 MMFF94 steps (fast only; for a clash, a
//            shape out of bounds, or a centre too flat to read)
// and the checks again after each. A molecule that no fix saves is refused,
// naming the check (for a shape: the bond or angle, its length, its bounds).
#include "chem/gen3d.h"
#include "chem/etkdg.h"
#include "chem/gen3d_build.h"
#include "chem/gen3d_ff.h"
#include "chem/gen3d_shape.h"
#include "chem/gen3d_torsions.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "chem/ob_headers.h"
#include <openbabel/stereo/squareplanar.h>

using namespace OpenBabel;

namespace {

// Atoms in no 1-2 or 1-3 relation closer than this clash. Closest such pair
// per molecule, 500 Enamine SMILES: the builder alone spreads from 0.1 Å up
// (88 under 0.7 Å, 137 under 1.0, 186 under 1.2); the same molecules after
// 250 MMFF94 steps have none between 0.7 and 1.4 Å (one at 0.5-0.7, the
// rest from 1.4, 485 from 1.8). Of 899 medium conformers (with 399 PDB
// ligands) 1 was flagged. 1.0 Å is a clash by any measure (H···H contact is
// ~2.2 Å) with 0.4 Å margin below what refined geometry shows; 1.2 would
// send 33 % of Enamine through a fix instead of 24 % (issue 32 report).
#ifndef SE3_GEN3D_CLASH // to measure other thresholds with
#define SE3_GEN3D_CLASH 1.0
#endif
const double CLASH_DISTANCE = SE3_GEN3D_CLASH;
// Any two atoms, bonded included, closer than this: mol_check's default
// min_distance, so that no checked molecule is rejected later for it.
const double MIN_DISTANCE = 0.5;
// |cos| of a double bond's substituent torsion below this (80-100°), or a
// centre's normalised signed volume below this: too flat to say.
const double FLAT = 0.17;
// The cleanup: UFF sets up in 1.4 ms against MMFF94's 11 ms (45 atoms with
// hydrogens) and 15 of its steps undid every clash that turning bonds left
// (40 of 2,500 Enamine molecules; 8 steps undid 39).
const int CLEANUP_STEPS = 15;
// Two other seeds saved none of the 15 PDB ligands (of 399) that turns,
// inversions and the cleanup left failing: the builder draws from rand() only
// where a chain starts, and those failures come from its ring templates. Off;
// a number to measure with.
#ifndef SE3_GEN3D_RESEEDS
#define SE3_GEN3D_RESEEDS 0
#endif
const int RESEEDS = SE3_GEN3D_RESEEDS;

typedef std::chrono::steady_clock Clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// A specified tetrahedral centre: refs[0..2] clockwise seen from the fourth
// neighbour (an implicit hydrogen or lone pair when the centre has one).
struct TetraWant {
  unsigned long centre;
  unsigned long from; // NoRef when implicit
  unsigned long refs[3];
};
// A specified double bond: a on begin, b on end, cis or trans.
struct CisTransWant {
  unsigned long begin, end, a, b;
  bool cis;
};
struct StereoWant {
  std::vector<TetraWant> tetra;
  std::vector<CisTransWant> cistrans;
};

bool real_ref(OBMol &mol, unsigned long id) {
  return id != OBStereo::ImplicitRef && id != OBStereo::NoRef && mol.GetAtomById(id) != nullptr;
}

// Open Babel keeps a molecule's stereo data in the order its reader made
// them, and its SMILES reader makes them from a map keyed by atom address, so
// the order depends on what the process allocated before. OBBuilder corrects
// inverted centres one after another in that order (and invert_centres below
// in want's), each swap moving branches the next one sees: the same molecule
// came out with other coordinates, clashing or not, after another record
// (dev/ob_history; 11 of 902 Lipophilicity builds). Sorted by atom id, the
// order is the molecule's own.
void order_stereo(OBMol &mol) {
  std::vector<OBGenericData *> all = mol.GetAllData(OBGenericDataType::StereoData);
  if (all.size() < 2) return;
  struct Item {
    int type;
    unsigned long a, b;
    OBGenericData *copy;
  };
  std::vector<Item> items;
  for (OBGenericData *d : all) {
    OBStereoBase *s = static_cast<OBStereoBase *>(d);
    Item it{(int)s->GetType(), 0, 0, d->Clone(&mol)};
    if (s->GetType() == OBStereo::Tetrahedral) {
      it.a = static_cast<OBTetrahedralStereo *>(d)->GetConfig().center;
    } else if (s->GetType() == OBStereo::CisTrans) {
      OBCisTransStereo::Config c = static_cast<OBCisTransStereo *>(d)->GetConfig();
      it.a = c.begin, it.b = c.end;
    } else if (s->GetType() == OBStereo::SquarePlanar) {
      it.a = static_cast<OBSquarePlanarStereo *>(d)->GetConfig().center;
    }
    items.push_back(it);
  }
  mol.DeleteData(all);
  std::stable_sort(items.begin(), items.end(), [](const Item &x, const Item &y) {
    if (x.type != y.type) return x.type < y.type;
    return x.a != y.a ? x.a < y.a : x.b < y.b;
  });
  for (const Item &it : items)
    mol.SetData(it.copy);
}

// The stereo the input specified, as read (before any building).
StereoWant wanted_stereo(OBMol &mol) {
  StereoWant w;
  OBStereoFacade facade(&mol);
  for (OBTetrahedralStereo *ts : facade.GetAllTetrahedralStereo()) {
    OBTetrahedralStereo::Config c = ts->GetConfig();
    if (!c.specified || !real_ref(mol, c.center)) continue;
    // Seen from the implicit neighbour when there is one, so that the three
    // refs are atoms with coordinates.
    bool implicit = c.from == OBStereo::ImplicitRef;
    for (unsigned long r : c.refs)
      implicit = implicit || r == OBStereo::ImplicitRef;
    OBTetrahedralStereo::Config v = implicit
                                        ? ts->GetConfig(OBStereo::ImplicitRef, OBStereo::Clockwise, OBStereo::ViewFrom)
                                        : ts->GetConfig(c.from, OBStereo::Clockwise, OBStereo::ViewFrom);
    if (v.refs.size() != 3 || !real_ref(mol, v.refs[0]) || !real_ref(mol, v.refs[1]) || !real_ref(mol, v.refs[2]))
      continue;
    w.tetra.push_back(
        {c.center, implicit ? (unsigned long)OBStereo::NoRef : v.from, {v.refs[0], v.refs[1], v.refs[2]}});
  }
  for (OBCisTransStereo *ct : facade.GetAllCisTransStereo()) {
    OBCisTransStereo::Config c = ct->GetConfig();
    if (!c.specified || !real_ref(mol, c.begin) || !real_ref(mol, c.end)) continue;
    OBAtom *begin = mol.GetAtomById(c.begin), *end = mol.GetAtomById(c.end);
    unsigned long a = OBStereo::NoRef, b = OBStereo::NoRef;
    for (unsigned long r : c.refs) {
      if (!real_ref(mol, r)) continue;
      OBAtom *at = mol.GetAtomById(r);
      if (a == OBStereo::NoRef && at->IsConnected(begin)) a = r;
      if (b == OBStereo::NoRef && at->IsConnected(end)) b = r;
    }
    if (a == OBStereo::NoRef || b == OBStereo::NoRef) continue;
    w.cistrans.push_back({c.begin, c.end, a, b, ct->IsCis(a, b)});
  }
  return w;
}

struct Verdict {
  se3_gen3d_check check = GEN3D_OK;
  double excess = 0; // a shape's: how far its worst distance lies outside its bounds (Å)
  int atom = 0, atom2 = 0; // 1-based; atom2: a clash's other atom
  std::string why;
  int tetra_wrong = 0; // quick check: centres inverted or flat
  int cistrans_wrong = 0;
  int flat = 0; // of those, too flat or twisted to say (a force field may settle them)
};

vector3 pos(OBMol &mol, unsigned long id) { return mol.GetAtomById(id)->GetVector(); }

// +1: the refs turn clockwise seen from the fourth neighbour; -1: anticlockwise;
// 0: too flat to say. Seen from the fourth neighbour the other three lie
// beyond the centre, so the sign of their triple product is the winding. A
// fourth atom on their side is no tetrahedron: 0 too (the canonical SMILES
// comparison then decides).
int winding(OBMol &mol, const TetraWant &t) {
  vector3 c = pos(mol, t.centre);
  vector3 v0 = pos(mol, t.refs[0]) - c, v1 = pos(mol, t.refs[1]) - c, v2 = pos(mol, t.refs[2]) - c;
  double norm = v0.length() * v1.length() * v2.length();
  if (!(norm > 0)) return 0;
  if (t.from != OBStereo::NoRef && dot(pos(mol, t.from) - c, v0 + v1 + v2) >= 0) return 0;
  double vol = dot(cross(v0, v1), v2) / norm;
  return vol > FLAT ? 1 : vol < -FLAT ? -1 : 0;
}

// A centre whose winding reads right from its three refs but whose fourth
// neighbour (an explicit atom, or the hydrogen added for an implicit one)
// lies near the plane of the centre and two refs: no tetrahedron, and a
// reader that takes another three neighbours (RDKit takes the first three)
// sees a flat or inverted centre. bench/gen3d.sh found such builder
// geometries at ring fusions and spiro centres passed as right. For a
// tetrahedron about its centre, replacing any ref by the fourth neighbour
// turns the triple product's sign; each of the three must, clearly.
bool distorted(OBMol &mol, const TetraWant &t) {
  OBAtom *centre = mol.GetAtomById(t.centre);
  OBAtom *fourth = t.from != OBStereo::NoRef ? mol.GetAtomById(t.from) : nullptr;
  if (!fourth) {
    FOR_NBORS_OF_ATOM(n, centre) {
      unsigned long id = n->GetId();
      if (id != t.refs[0] && id != t.refs[1] && id != t.refs[2]) fourth = &*n;
    }
  }
  if (!fourth) return false; // three neighbours (N, S+, an implicit H not added): the winding says it all
  vector3 c = centre->GetVector();
  vector3 v[4] = {pos(mol, t.refs[0]) - c, pos(mol, t.refs[1]) - c, pos(mol, t.refs[2]) - c, fourth->GetVector() - c};
  for (vector3 &x : v) {
    if (!(x.length() > 0)) return true;
    x.normalize();
  }
  double base = dot(cross(v[0], v[1]), v[2]);
  for (int k = 0; k < 3; k++) {
    vector3 u[3] = {v[0], v[1], v[2]};
    u[k] = v[3];
    if (!(dot(cross(u[0], u[1]), u[2]) * (base > 0 ? 1 : -1) < -FLAT)) return true;
  }
  return false;
}

// +1 cis, -1 trans, 0 twisted (substituents near 90° about the bond).
int cis_sign(OBMol &mol, const CisTransWant &d) {
  vector3 b = pos(mol, d.begin), e = pos(mol, d.end);
  vector3 axis = e - b;
  if (!(axis.length() > 0)) return 0;
  axis.normalize();
  vector3 u = pos(mol, d.a) - b, w = pos(mol, d.b) - e;
  u -= axis * dot(u, axis);
  w -= axis * dot(w, axis);
  double n = u.length() * w.length();
  if (!(n > 0)) return 0;
  double c = dot(u, w) / n;
  return c > FLAT ? 1 : c < -FLAT ? -1 : 0;
}

Verdict check_coords(OBMol &mol) {
  Verdict v;
  if (mol.NumAtoms() > 1 && !mol.HasNonZeroCoords()) {
    v.check = GEN3D_BAD_COORDS;
    v.why = "all coordinates zero";
    return v;
  }
  FOR_ATOMS_OF_MOL(a, mol) {
    if (!std::isfinite(a->GetX()) || !std::isfinite(a->GetY()) || !std::isfinite(a->GetZ())) {
      v.check = GEN3D_BAD_COORDS;
      v.atom = (int)a->GetIdx();
      v.why = "atom " + std::to_string(a->GetIdx()) + " has a non-finite coordinate";
      return v;
    }
  }
  return v;
}

// The closest offending pair: any two atoms under MIN_DISTANCE, or two atoms
// in no 1-2 or 1-3 relation under CLASH_DISTANCE.
Verdict check_clash(OBMol &mol) {
  Verdict v;
  const int n = (int)mol.NumAtoms();
  std::vector<double> xyz(3 * (size_t)n);
  FOR_ATOMS_OF_MOL(a, mol) {
    double *p = &xyz[3 * (a->GetIdx() - 1)];
    p[0] = a->GetX(), p[1] = a->GetY(), p[2] = a->GetZ();
  }
  const double *c = xyz.data();
  double best = 1e300;
  int bi = -1, bj = -1;
  for (int i = 0; i < n; i++) {
    const double *p = c + 3 * i;
    for (int j = i + 1; j < n; j++) {
      const double *q = c + 3 * j;
      double dx = p[0] - q[0], dy = p[1] - q[1], dz = p[2] - q[2];
      double d2 = dx * dx + dy * dy + dz * dz;
      if (d2 >= CLASH_DISTANCE * CLASH_DISTANCE || d2 >= best) continue;
      if (d2 >= MIN_DISTANCE * MIN_DISTANCE) {
        OBAtom *a = mol.GetAtom(i + 1), *b = mol.GetAtom(j + 1);
        if (a->IsConnected(b) || a->IsOneThree(b)) continue;
      }
      best = d2, bi = i, bj = j;
    }
  }
  if (bi >= 0) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "atoms %d and %d clash (%.2f Å)", bi + 1, bj + 1, std::sqrt(best));
    v.check = GEN3D_CLASH;
    v.atom = bi + 1;
    v.atom2 = bj + 1;
    v.why = buf;
  }
  return v;
}

// A bond whose rotation is a change of conformation only: single, in no
// ring, neither end linear, each end with another neighbour to turn.
bool turnable(OBBond *b) {
  if (b->GetBondOrder() != 1 || b->IsAromatic() || b->IsInRing()) return false;
  OBAtom *u = b->GetBeginAtom(), *v = b->GetEndAtom();
  return u->GetExplicitDegree() > 1 && v->GetExplicitDegree() > 1 && u->GetHyb() != 1 && v->GetHyb() != 1;
}


// The bonds on a shortest path between two atoms (1-based), empty when they
// are not connected.
std::vector<OBBond *> path_bonds(OBMol &mol, int from, int to) {
  std::vector<int> prev(mol.NumAtoms() + 1, 0);
  std::vector<int> queue{from};
  prev[from] = from;
  for (size_t h = 0; h < queue.size() && !prev[to]; h++)
    FOR_NBORS_OF_ATOM(nb, mol.GetAtom(queue[h])) {
      if (prev[nb->GetIdx()]) continue;
      prev[nb->GetIdx()] = queue[h];
      queue.push_back((int)nb->GetIdx());
    }
  std::vector<OBBond *> out;
  if (!prev[to]) return out;
  for (int a = to; a != from; a = prev[a])
    out.push_back(mol.GetBond(a, prev[a]));
  return out;
}

// Overlap of the moved atoms with the others: sum of (CONTACT - d)² over the
// pairs closer than CONTACT. Pairs across one bond keep their distances, so
// only 1-4 and farther pairs change.
const double CONTACT = 2.0;
double overlap(const std::vector<vector3> &xyz, const std::vector<int> &moved, const std::vector<char> &in_moved) {
  double p = 0;
  for (int a : moved)
    for (int b = 0; b < (int)xyz.size(); b++) {
      if (in_moved[b]) continue;
      double d = (xyz[a] - xyz[b]).length();
      if (d < CONTACT) p += (CONTACT - d) * (CONTACT - d);
    }
  return p;
}

// Rotate pts about the axis through origin along unit vector k by angle t
// (Rodrigues).
vector3 rotate(const vector3 &p, const vector3 &origin, const vector3 &k, double t) {
  vector3 r = p - origin;
  double c = std::cos(t), s = std::sin(t);
  return origin + r * c + cross(k, r) * s + k * (dot(k, r) * (1 - c));
}

// Most clashes the builder leaves are between atoms five or more bonds apart
// (a chain laid over a ring): turning a single bond on the path between them
// moves them apart without touching bond lengths, angles or any stereo (a
// rigid turn about a single bond keeps every centre's handedness and every
// double bond's side). Greedy: the turn of a bond on the closest pair's path
// that most lowers the overlap, a few rounds. Conjugated bonds (both ends
// sp2: amides, aryl-carbonyl) only turn by 180° to stay planar.
bool relieve_by_torsion(OBMol &mol) {
  const int ROUNDS = 6;
  const int n = (int)mol.NumAtoms();
  for (int round = 0; round < ROUNDS; round++) {
    Verdict c = check_clash(mol);
    if (c.check == GEN3D_OK) return true;
    std::vector<OBBond *> path = path_bonds(mol, c.atom, c.atom2);
    std::vector<vector3> xyz(n);
    for (int i = 0; i < n; i++)
      xyz[i] = mol.GetAtom(i + 1)->GetVector();
    // Each candidate turn costs |side| x n distances: a budget keeps a
    // 999-atom molecule from spending seconds here (it goes to the cleanup).
    double work = 0, best_gain = 1e-9, best_t = 0;
    std::vector<int> best_side;
    vector3 best_origin, best_axis;
    for (OBBond *b : path) {
      if (!turnable(b)) continue;
      OBAtom *u = b->GetBeginAtom(), *v = b->GetEndAtom();
      std::vector<int> side = se3_atoms_beyond(mol, v, u);
      if ((int)side.size() * 2 > n) side = se3_atoms_beyond(mol, u, v), std::swap(u, v);
      work += 5.0 * (double)side.size() * n;
      if (work > 2e7) break;
      std::vector<char> in_side(n, 0);
      for (int a : side)
        in_side[a] = 1;
      vector3 origin = u->GetVector(), axis = v->GetVector() - origin;
      if (!(axis.length() > 0)) continue;
      axis.normalize();
      double base = overlap(xyz, side, in_side);
      bool planar = u->GetHyb() == 2 && v->GetHyb() == 2;
      for (int step = planar ? 3 : 1; step < 6; step += planar ? 6 : 1) {
        double t = step * M_PI / 3;
        std::vector<vector3> turned(xyz);
        for (int a : side)
          turned[a] = rotate(xyz[a], origin, axis, t);
        double gain = base - overlap(turned, side, in_side);
        if (gain > best_gain) best_gain = gain, best_t = t, best_side = side, best_origin = origin, best_axis = axis;
      }
    }
    if (best_side.empty()) return false;
    for (int a : best_side)
      mol.GetAtom(a + 1)->SetVector(rotate(xyz[a], best_origin, best_axis, best_t));
  }
  return check_clash(mol).check == GEN3D_OK;
}

// Canonical isomeric SMILES (the comparison of last resort).
std::string canonical(OBMol &mol) {
  static OBConversion *conv;
  if (!conv) {
    conv = new OBConversion;
    conv->SetOutFormat("can");
    conv->AddOption("n", OBConversion::OUTOPTIONS);
  }
  return conv->WriteString(&mol, true);
}

// Stereo perceived from mol's coordinates, with what the input left free made
// unspecified again, written as canonical SMILES.
std::string canonical_from_3d(OBMol &mol, const StereoWant &want) {
  OBMol copy(mol);
  StereoFrom3D(&copy, true);
  std::set<unsigned long> centres;
  std::set<std::pair<unsigned long, unsigned long>> bonds;
  for (const TetraWant &t : want.tetra)
    centres.insert(t.centre);
  for (const CisTransWant &d : want.cistrans)
    bonds.insert({std::min(d.begin, d.end), std::max(d.begin, d.end)});
  OBStereoFacade facade(&copy, false);
  for (OBTetrahedralStereo *ts : facade.GetAllTetrahedralStereo()) {
    OBTetrahedralStereo::Config c = ts->GetConfig();
    if (centres.count(c.center)) continue;
    c.specified = false;
    ts->SetConfig(c);
  }
  for (OBCisTransStereo *ct : facade.GetAllCisTransStereo()) {
    OBCisTransStereo::Config c = ct->GetConfig();
    if (bonds.count({std::min(c.begin, c.end), std::max(c.begin, c.end)})) continue;
    c.specified = false;
    ct->SetConfig(c);
  }
  return canonical(copy);
}

// The per-centre geometry first (microseconds); where it disagrees, the
// canonical SMILES of the input against that of the stereo perceived from 3D
// decides: a centre the input marked but that is no stereocentre, or two
// centres inverted together in a symmetric molecule, are no change.
Verdict check_stereo(OBMol &mol, const StereoWant &want, OBMol &input, std::string &input_can) {
  Verdict v;
  int first = 0;
  std::string what;
  // Centres too flat to read, or that read right but are no tetrahedron: no
  // canonical SMILES excuses them (Open Babel reads a flat centre one way or
  // the other; bench/gen3d.sh found square-planar ring carbons passed so).
  int bent = 0;
  for (const TetraWant &t : want.tetra) {
    int w = winding(mol, t);
    // distorted whichever way it winds: a centre that reads inverted here
    // but is no tetrahedron may read right to Open Babel's perception from
    // another three neighbours, and the canonical SMILES below would excuse
    // it (bench/gen3d.sh: a 15-step cleanup left such a centre, C-C 1.75 Å,
    // angles of 67 and 78 degrees, and RDKit read it inverted)
    bool bad_shape = w == 0 || distorted(mol, t);
    bent += bad_shape;
    if (w != 1 || bad_shape) {
      v.tetra_wrong++;
      v.flat += w == 0 || bad_shape;
      if (!first) {
        first = (int)mol.GetAtomById(t.centre)->GetIdx();
        what = "stereo not kept at atom " + std::to_string(first);
      }
    }
  }
  for (const CisTransWant &d : want.cistrans) {
    int c = cis_sign(mol, d);
    if (c != (d.cis ? 1 : -1)) {
      v.cistrans_wrong++;
      v.flat += c == 0;
      if (!first) {
        int b = (int)mol.GetAtomById(d.begin)->GetIdx(), e = (int)mol.GetAtomById(d.end)->GetIdx();
        first = b;
        what = "cis/trans not kept at bond " + std::to_string(b) + "-" + std::to_string(e);
      }
    }
  }
  if (!first) return v;
  if (input_can.empty()) input_can = canonical(input);
  if (!bent && canonical_from_3d(mol, want) == input_can) {
    v.tetra_wrong = v.cistrans_wrong = v.flat = 0;
    return v;
  }
  v.check = GEN3D_STEREO;
  v.atom = first;
  v.why = what;
  return v;
}

// Every bond, 1-3 distance and aromatic ring against the bounds of
// chem/shape.h: a shape that passes the other checks can still have a ring
// closed across 5 Å (issue 67).
Verdict check_shape(OBMol &mol, Gen3dShape &shape) {
  Verdict v;
  shape_fault f{};
  std::string why;
  int bad = shape.check(mol, &f, &why);
  if (bad == 0) return v;
  v.check = GEN3D_SHAPE;
  v.atom = bad > 0 ? f.a + 1 : 0;
  v.excess = bad > 0 ? f.excess : HUGE_VAL;
  v.why = bad > 0 ? why : "out of memory checking the shape";
  return v;
}

struct Checker {
  OBMol &input;
  StereoWant want;
  std::string input_can; // filled on first need
  Gen3dShape shape;
  Verdict operator()(OBMol &mol) {
    Verdict v = check_coords(mol);
    if (v.check == GEN3D_OK) v = check_shape(mol, shape);
    if (v.check == GEN3D_OK) v = check_clash(mol);
    if (v.check == GEN3D_OK) v = check_stereo(mol, want, input, input_can);
    return v;
  }
};

// OBBuilder may stack disconnected fragments on top of each other (two
// benzenes came out superimposed): lay them out along x, each centred on the
// x axis, 3 Å between bounding boxes.
void separate_fragments(OBMol &mol) {
  std::vector<std::vector<int>> frags;
  mol.ContigFragList(frags);
  if (frags.size() < 2) return;
  double cursor = 0;
  for (const std::vector<int> &f : frags) {
    double lo[3] = {1e300, 1e300, 1e300}, hi[3] = {-1e300, -1e300, -1e300};
    for (int idx : f) {
      const double *c = mol.GetAtom(idx)->GetCoordinate();
      for (int k = 0; k < 3; k++)
        lo[k] = std::fmin(lo[k], c[k]), hi[k] = std::fmax(hi[k], c[k]);
    }
    vector3 shift(cursor - lo[0], -(lo[1] + hi[1]) / 2, -(lo[2] + hi[2]) / 2);
    for (int idx : f) {
      OBAtom *a = mol.GetAtom(idx);
      a->SetVector(a->GetVector() + shift);
    }
    cursor += hi[0] - lo[0] + 3.0;
  }
}

// OBBuilder places the four neighbours of a phosphorus with a P=O or P=S
// bond (phosphates, phosphonates, phosphine oxides) as if it had five: 90
// and 180 degree angles, which 250 MMFF94 steps do not undo (bench/gen3d.sh
// found every stereo change on its PDB ligands there). Such a centre off
// tetrahedral (an angle below 95 or above 135 degrees) gets its branches
// turned rigidly about the P onto a tetrahedron: the first neighbour stays,
// the second keeps its plane with the first, the other two take the two
// remaining corners in the order that keeps the centre's handedness. A P
// in a ring (whose branches meet again) is left as built.
void tetrahedral_phosphorus(OBMol &mol) {
  const double TETRA = std::acos(-1.0 / 3.0);
  FOR_ATOMS_OF_MOL(p, mol) {
    if (p->GetAtomicNum() != 15 || p->GetExplicitDegree() != 4 || p->IsInRing()) continue;
    std::vector<OBAtom *> nb;
    FOR_NBORS_OF_ATOM(x, &*p) nb.push_back(&*x);
    vector3 c = p->GetVector();
    std::vector<vector3> d;
    for (OBAtom *x : nb)
      d.push_back((x->GetVector() - c).normalize());
    bool off = false;
    for (int a = 0; a < 4; a++)
      for (int b = a + 1; b < 4; b++) {
        double ang = std::acos(std::max(-1.0, std::min(1.0, dot(d[a], d[b]))));
        off = off || ang < 95 * M_PI / 180 || ang > 135 * M_PI / 180;
      }
    if (!off) continue;
    // the ideal corners: t0 along d0, t1 in the plane of d0 and d1, t2 and t3
    // a third of a turn either way about t0
    vector3 t0 = d[0], side = d[1] - t0 * dot(d[1], t0);
    if (side.length() < 1e-6) side = t0.x() < 0.9 ? cross(t0, vector3(1, 0, 0)) : cross(t0, vector3(0, 1, 0));
    side.normalize();
    vector3 t1 = t0 * std::cos(TETRA) + side * std::sin(TETRA);
    vector3 t2 = rotate(c + t1, c, t0, 2 * M_PI / 3) - c, t3 = rotate(c + t1, c, t0, -2 * M_PI / 3) - c;
    // keep the sign of the triple product of d1, d2, d3 (the handedness)
    double had = dot(d[1], cross(d[2], d[3])), now = dot(t1, cross(t2, t3));
    if ((had < 0) != (now < 0)) std::swap(t2, t3);
    const vector3 target[4] = {t0, t1, t2, t3};
    for (int k = 1; k < 4; k++) {
      vector3 axis = cross(d[k], target[k]);
      double len = axis.length(), t = std::atan2(len, dot(d[k], target[k]));
      if (len < 1e-9) continue;
      axis /= len;
      for (int idx : se3_atoms_beyond(mol, nb[k], &*p)) {
        OBAtom *a = mol.GetAtom(idx + 1);
        a->SetVector(rotate(a->GetVector(), c, axis, t));
      }
    }
  }
}

// The builder's coordinates for input under seed, hydrogens when asked, the
// fragments apart. mol becomes a copy of input first.
void build(OBMol &mol, OBMol &input, const ob_parse_opts *o, unsigned seed, se3_gen3d_trace *tr) {
  Clock::time_point t0 = Clock::now();
  mol = input;
  se3_ob_srand(seed);
  // Its verdict on stereo is not the last word: the checks below are.
  se3_build(mol, nullptr);
  tetrahedral_phosphorus(mol);
  mol.SetDimension(3);
  if (tr) tr->builds++, tr->t_build += since(t0);
  t0 = Clock::now();
  if (o->add_hydrogens) mol.AddHydrogens();
  separate_fragments(mol);
  if (tr) tr->t_hydrogens += since(t0);
  t0 = Clock::now();
  se3_gen3d_set_torsions(mol, 0, nullptr);
  if (tr) tr->t_build += since(t0);
}

int refine_steps(ob_quality q) { return q == OB_Q_BEST ? 2000 : q == OB_Q_MEDIUM ? 250 : 0; }
double refine_econv(ob_quality q) { return q == OB_Q_BEST ? 1e-6 : 1e-4; }

// Reflect through the yz plane: every centre inverts, double bonds stay.
void mirror(OBMol &mol) { FOR_ATOMS_OF_MOL(a, mol) a->SetVector(-a->GetX(), a->GetY(), a->GetZ()); }

bool mirror_may_help(const Verdict &v, const StereoWant &want) {
  return v.check == GEN3D_STEREO && v.cistrans_wrong == 0 && v.tetra_wrong == (int)want.tetra.size();
}

// Invert each clearly inverted centre that has two substituents on non-ring
// bonds (the builder corrects such centres itself but not always: its swap is
// not checked again): a half turn about the bisector of the two bonds
// exchanges their directions, and turning both branches rigidly with them
// keeps their own centres and bond lengths. false when a wrong centre has no
// such pair.
bool invert_centres(OBMol &mol, const StereoWant &want) {
  for (const TetraWant &t : want.tetra) {
    if (winding(mol, t) != -1) continue;
    OBAtom *c = mol.GetAtomById(t.centre);
    std::vector<OBAtom *> free_nbrs;
    FOR_BONDS_OF_ATOM(b, c) {
      if (!b->IsInRing()) free_nbrs.push_back(b->GetNbrAtom(c));
    }
    if (free_nbrs.size() < 2) return false;
    OBAtom *a = free_nbrs[0], *b = free_nbrs[1];
    vector3 origin = c->GetVector();
    vector3 ua = a->GetVector() - origin, ub = b->GetVector() - origin;
    if (!(ua.length() > 0) || !(ub.length() > 0)) return false;
    vector3 axis = ua / ua.length() + ub / ub.length();
    if (!(axis.length() > 1e-3)) return false;
    axis.normalize();
    for (OBAtom *root : {a, b})
      for (int i : se3_atoms_beyond(mol, root, c)) {
        OBAtom *x = mol.GetAtom(i + 1);
        x->SetVector(rotate(x->GetVector(), origin, axis, M_PI));
      }
  }
  return true;
}

// The fixes that cost next to nothing, on a geometry that failed v, each
// tried once, the checks again after each: for wrong stereo the mirror image
// (every specified centre inverted) or single centres inverted; for a clash
// turns about single bonds. A molecule can need both (a clash hides wrong
// stereo, since the checks stop at the first failure). fix says which
// passed; mol is as it came when they did not.
Verdict quick_fixes(OBMol &mol, Verdict v, Checker &check, se3_gen3d_fix &fix) {
  const Verdict orig = v;
  OBMol before(mol);
  se3_gen3d_fix f = GEN3D_FIX_NONE;
  bool turned = false, inverted = false;
  while (v.check != GEN3D_OK) {
    if (v.check == GEN3D_STEREO && !inverted) {
      inverted = true;
      if (mirror_may_help(v, check.want))
        mirror(mol), f = GEN3D_FIX_MIRROR;
      else if (v.cistrans_wrong == 0 && invert_centres(mol, check.want))
        f = GEN3D_FIX_INVERT;
      else
        break;
    } else if (v.check == GEN3D_CLASH && !turned) {
      turned = true;
      relieve_by_torsion(mol);
      if (f == GEN3D_FIX_NONE) f = GEN3D_FIX_TORSION;
    } else {
      break;
    }
    v = check(mol);
  }
  if (v.check == GEN3D_OK) {
    fix = f;
    return v;
  }
  mol = before;
  return orig;
}

// The checks' verdict v on mol with the fixes that cost least applied: the
// quick fixes; for a shape out of bounds by less than RELAX_MAX_EXCESS (Å), the
// force field (relax_shape) and the quick fixes again. A ring closed across
// more (no template covered its ring system, a stereo swap tore it) is left
// for an embedding that knows rings. fix says which passed; mol is as it
// came when none did.
const double RELAX_MAX_EXCESS = 2.0;
// The relaxation's steps, and how often the shape is checked during it: a
// template's bond lengths need 15-30; a small strained ring system the
// builder left open (QM8's bicyclics) up to about 150, where ETKDG cannot
// embed it at all (2,000 molecules of bench/screen_scale.sh's library, one
// core: 27.0 s with 60 steps, 24.8 s so; relaxing any excess, the torn
// ring systems ETKDG mends too: 28.2 s; 12.7 s at 970c817, unchecked).
const int RELAX_STEPS = 150, RELAX_CHUNK = 15;
Verdict settle(OBMol &mol, Verdict v, Checker &check, se3_gen3d_fix &fix) {
  v = quick_fixes(mol, v, check, fix);
  if (v.check != GEN3D_SHAPE || !(v.excess < RELAX_MAX_EXCESS)) return v;
  OBMol kept(mol);
  if (se3_relax_shape(mol, check.shape, RELAX_STEPS, RELAX_CHUNK)) {
    se3_gen3d_fix f = GEN3D_FIX_NONE;
    Verdict r = quick_fixes(mol, check(mol), check, f);
    if (r.check == GEN3D_OK) {
      fix = GEN3D_FIX_RELAX;
      return r;
    }
  }
  mol = kept;
  return v;
}

} // namespace

void se3_ob_srand(unsigned seed) {
  static const bool clock_seeded = [] {
    vector3 v;
    v.randomUnitVector();
    return true;
  }();
  (void)clock_seeded;
  std::srand(seed);
}

bool se3_gen3d_traced(OBMol &mol, const ob_parse_opts *o, unsigned seed, std::string &why, se3_gen3d_trace *tr) {
  if (tr) *tr = se3_gen3d_trace();
  OBMol input(mol);
  order_stereo(input);
  Checker check{input, wanted_stereo(input), std::string(), {}};
  const int steps = refine_steps(o->quality);

  // The plain path: the builder, refined at medium and best.
  build(mol, input, o, seed, tr);
  if (steps) se3_minimise(mol, steps, refine_econv(o->quality));
  Clock::time_point t0 = Clock::now();
  Verdict v = check(mol);
  if (tr) {
    tr->t_checks += since(t0), tr->first_fail = v.check;
    std::snprintf(tr->first_why, sizeof tr->first_why, "%s", v.why.c_str());
  }
  if (v.check == GEN3D_OK) return true;

  t0 = Clock::now();
  se3_gen3d_fix fix = GEN3D_FIX_NONE;
  v = settle(mol, v, check, fix);
  if (v.check == GEN3D_CLASH && !steps) {
    // A clash no turn undid (within a ring system, or atoms close in the
    // graph): a short force-field push from the builder's geometry.
    se3_minimise(mol, CLEANUP_STEPS, 1e-4, "UFF", "MMFF94");
    v = quick_fixes(mol, check(mol), check, fix);
    if (v.check == GEN3D_OK) fix = GEN3D_FIX_CLEANUP;
  }
  for (int k = 1; v.check != GEN3D_OK && k <= RESEEDS; k++) {
    build(mol, input, o, seed + 7919u * (unsigned)k, tr);
    if (steps) se3_minimise(mol, steps, refine_econv(o->quality));
    v = settle(mol, check(mol), check, fix);
    if (v.check == GEN3D_OK) fix = GEN3D_FIX_RESEED;
  }
  // RDKit's ETKDGv3 next, where the build has it: distance geometry embeds
  // what the builder's templates cannot (an inverted ring centre, a flat
  // fusion, a ring system no template covers) in 10-70 ms, and its
  // conformers are closer to crystal ones than the medium path's
  // (bench/gen3d.sh), which costs 100-200 ms. Then the quality's own
  // refinement, and the checks as for the builder.
  if (v.check != GEN3D_OK && se3_etkdg_available()) {
    // Up to four draws: an embedding that misses a macrocycle's double bond
    // under one seed keeps it under another (test_gen3d's 14-ring, seeded
    // from its canonical SMILES, needs three); each costs 10-70 ms, and
    // only molecules the builder failed pay it. One that cannot be embedded
    // at all (ETKDG gives up on small bridged rings: bicyclo[1.1.1]pentane,
    // QM8's cages) is not tried again: each refusal took about 100 ms, and
    // other seeds refused it too (bench/screen_scale.sh, issue 67).
    std::string failed;
    OBMol kept(mol);
    for (unsigned k = 0; k < 4 && v.check != GEN3D_OK; k++) {
      if (!se3_etkdg_embed(mol, input, seed + 7919u * k, failed)) break; // mol as it was
      if (tr) tr->builds++;
      if (o->add_hydrogens) mol.AddHydrogens();
      separate_fragments(mol);
      if (steps) se3_minimise(mol, steps, refine_econv(o->quality));
      Verdict e = settle(mol, check(mol), check, fix);
      if (e.check == GEN3D_OK) v = e, fix = GEN3D_FIX_ETKDG;
      if (v.check != GEN3D_OK) mol = kept; // a failed fallback leaves the builder's verdict as the reason
    }
  }
  // The medium path as the last resort, where it can help: a clash, a shape
  // out of bounds, or a centre or double bond too flat to read. MMFF94 does
  // not carry a centre through inversion, so a clearly inverted one (the
  // builder's ring templates) stays a reject rather than costing 50-1000
  // ms for nothing.
  bool medium_may_help = v.check == GEN3D_CLASH || v.check == GEN3D_BAD_COORDS || v.check == GEN3D_SHAPE ||
                         (v.check == GEN3D_STEREO && v.flat);
  if (v.check != GEN3D_OK && !steps && medium_may_help) {
    OBMol kept(mol);
    const Verdict was = v;
    build(mol, input, o, seed, tr);
    se3_minimise(mol, refine_steps(OB_Q_MEDIUM), refine_econv(OB_Q_MEDIUM));
    v = settle(mol, check(mol), check, fix);
    if (v.check == GEN3D_OK) fix = GEN3D_FIX_MEDIUM;
    else if (was.check == GEN3D_SHAPE) mol = kept, v = was; // the first shape's bond is the one to name
  }
  if (tr) tr->t_fixes += since(t0), tr->fixed_by = fix, tr->last_fail = v.check, tr->atom = v.atom;
  if (v.check == GEN3D_OK) return true;
  why = v.why;
  return false;
}

bool se3_gen3d(OBMol &mol, const ob_parse_opts *o, unsigned seed, std::string &why) {
  return se3_gen3d_traced(mol, o, seed, why, nullptr);
}

bool se3_gen3d_another(OBMol &mol, unsigned draw, std::string &why) {
  OBMol first(mol);
  Checker check{first, wanted_stereo(first), std::string(), {}};
  se3_gen3d_set_torsions(mol, draw ? draw : 1u, nullptr);
  se3_gen3d_fix fix = GEN3D_FIX_NONE;
  Verdict v = check(mol);
  if (v.check != GEN3D_OK) v = quick_fixes(mol, v, check, fix);
  if (v.check == GEN3D_OK) return true;
  mol = first;
  why = v.why;
  return false;
}
