// conformers.cc — a molecule's other conformers (conformers_ob.h): its
// first conformer with the torsions of its rotatable bonds drawn again at
// seeds derived from the molecule's, each draw checked for clashes and held
// against the bounds of chem/shape.h, pruned by aligned heavy-atom RMSD
// (chem/conformers.h says why not se3_gen3d at other seeds: its builder
// gives the same shape).
#include "chem/conformers_ob.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

extern "C" {
#include "chem/conformers.h"
}
#include "chem/gen3d_shape.h"
#include "chem/ob_headers.h"

using namespace OpenBabel;

namespace {

struct Rotor {
  int a, b;              // 0-based: the bond a-b, b's side turns
  std::vector<int> side; // b and every atom reached from it without crossing a
  int steps;             // 3: a turn of 120 or 240 degrees (sp3-sp3), 2: of 180 (an sp2 end)
};

// xorshift64*: the draws' torsions, from the draw's seed
struct Rng {
  unsigned long long s;
  explicit Rng(unsigned seed) : s(0x9e3779b97f4a7c15ull ^ ((unsigned long long)seed << 1 | 1)) {}
  unsigned next() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return (unsigned)((s * 2685821657736338717ull) >> 33);
  }
};

std::vector<Rotor> rotors_of(OBMol &m, const std::vector<std::vector<int>> &nbr) {
  std::vector<Rotor> out;
  FOR_BONDS_OF_MOL(bd, m) {
    if (!bd->IsRotor() || bd->IsAmide() || bd->IsInRing()) continue;
    Rotor r;
    r.a = (int)bd->GetBeginAtomIdx() - 1;
    r.b = (int)bd->GetEndAtomIdx() - 1;
    std::vector<char> seen(nbr.size(), 0);
    seen[r.a] = seen[r.b] = 1;
    r.side.push_back(r.b);
    for (size_t i = 0; i < r.side.size(); i++)
      for (int n : nbr[r.side[i]])
        if (!seen[n]) seen[n] = 1, r.side.push_back(n);
    if (r.side.size() * 2 > nbr.size()) { // turn the smaller side
      std::vector<int> other;
      for (size_t i = 0; i < nbr.size(); i++)
        if (!seen[i] || (int)i == r.a) other.push_back((int)i);
      std::swap(r.a, r.b);
      r.side = other;
    }
    OBAtom *x = bd->GetBeginAtom(), *y = bd->GetEndAtom();
    bool flat = x->GetHyb() == 2 || y->GetHyb() == 2 || x->IsAromatic() || y->IsAromatic();
    r.steps = flat ? 2 : 3;
    out.push_back(r);
  }
  return out;
}

void turn(std::vector<double> &x, const Rotor &r, double angle) {
  double o[3] = {x[3 * r.a], x[3 * r.a + 1], x[3 * r.a + 2]};
  double k[3] = {x[3 * r.b] - o[0], x[3 * r.b + 1] - o[1], x[3 * r.b + 2] - o[2]};
  double len = std::sqrt(k[0] * k[0] + k[1] * k[1] + k[2] * k[2]);
  if (!(len > 0)) return;
  for (double &c : k) c /= len;
  double c = std::cos(angle), s = std::sin(angle);
  for (int i : r.side) { // Rodrigues' rotation about the axis a->b
    double v[3] = {x[3 * i] - o[0], x[3 * i + 1] - o[1], x[3 * i + 2] - o[2]};
    double kv = k[0] * v[0] + k[1] * v[1] + k[2] * v[2];
    double kx[3] = {k[1] * v[2] - k[2] * v[1], k[2] * v[0] - k[0] * v[2], k[0] * v[1] - k[1] * v[0]};
    for (int d = 0; d < 3; d++) x[3 * i + d] = o[d] + v[d] * c + kx[d] * s + k[d] * kv * (1 - c);
  }
}

// A clash: two atoms more than three bonds apart closer than 2.5 Å (both
// heavy) or 1.5 Å (a hydrogen among them).
bool clashes(const std::vector<double> &x, const std::vector<int> &z, const std::vector<std::vector<char>> &near) {
  int n = (int)z.size();
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++) {
      if (near[i][j]) continue;
      double d2 = 0;
      for (int d = 0; d < 3; d++) d2 += (x[3 * i + d] - x[3 * j + d]) * (x[3 * i + d] - x[3 * j + d]);
      double lim = z[i] != 1 && z[j] != 1 ? 2.5 : 1.5;
      if (d2 < lim * lim) return true;
    }
  return false;
}

} // namespace

namespace {
int more_conformers(const OBMol &first_in, const ob_parse_opts *o, unsigned seed, std::vector<double> &out);
}

// SE3_CONF_TRACE=1, for measurements: each draw's nearest kept conformer and
// each molecule's time in the draws (stderr)
int se3_more_conformers(const OBMol &first_in, const ob_parse_opts *o, unsigned seed, std::vector<double> &out) {
  static const bool trace = std::getenv("SE3_CONF_TRACE") != nullptr;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  int kept = more_conformers(first_in, o, seed, out);
  if (trace)
    std::fprintf(stderr, "conf-time atoms=%u kept=%d us=%.1f\n", first_in.NumAtoms(), kept,
                 1e6 * std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return kept;
}

namespace {
int more_conformers(const OBMol &first_in, const ob_parse_opts *o, unsigned seed, std::vector<double> &out) {
  int want = o->conformers - 1;
  if (want <= 0) return 0;
  OBMol first(first_in);
  int n = (int)first.NumAtoms();
  std::vector<std::vector<int>> nbr(n);
  std::vector<int> z(n), heavy;
  std::vector<double> x0;
  FOR_ATOMS_OF_MOL(a, first) {
    int i = (int)a->GetIdx() - 1;
    z[i] = a->GetAtomicNum();
    if (z[i] != 1) heavy.push_back(i);
    x0.push_back(a->GetX());
    x0.push_back(a->GetY());
    x0.push_back(a->GetZ());
  }
  FOR_BONDS_OF_MOL(bd, first) {
    int a = (int)bd->GetBeginAtomIdx() - 1, b = (int)bd->GetEndAtomIdx() - 1;
    nbr[a].push_back(b);
    nbr[b].push_back(a);
  }
  std::vector<Rotor> rot = rotors_of(first, nbr);
  if (rot.empty()) return 0; // one shape
  // pairs within three bonds: never a clash
  std::vector<std::vector<char>> near(n, std::vector<char>(n, 0));
  for (int i = 0; i < n; i++) {
    std::vector<int> frontier{i};
    near[i][i] = 1;
    for (int depth = 0; depth < 3; depth++) {
      std::vector<int> next;
      for (int f : frontier)
        for (int m : nbr[f])
          if (!near[i][m]) near[i][m] = 1, next.push_back(m);
      frontier = next;
    }
  }
  // every draw held against the same bounds as the first conformer (chem/shape.h):
  // a rigid turn about a bond outside rings keeps them, and this says so
  Gen3dShape shape;
  if (shape.check(first, nullptr, nullptr) != 0) return 0; // the first is out of bounds: no others from it
  std::vector<std::vector<double>> kept{x0};
  int misses = 0;
  static const bool trace = std::getenv("SE3_CONF_TRACE") != nullptr;
  for (int d = 1; d <= CONF_MAX_DRAWS(o->conformers) && (int)kept.size() <= want && misses < CONF_MAX_MISSES(o->conformers);
       d++) {
    Rng rng(conf_seed(seed, d));
    std::vector<double> x = x0;
    // one to three rotors turned, each by a step other than none (turning
    // them all at random clashes in nearly every draw of a flexible molecule)
    unsigned nr = (unsigned)rot.size(), m = 1 + rng.next() % (nr < 3 ? nr : 3);
    for (unsigned t = 0; t < m; t++) {
      const Rotor &r = rot[rng.next() % nr];
      unsigned k = 1 + rng.next() % (unsigned)(r.steps - 1);
      turn(x, r, 2 * M_PI * k / r.steps);
    }
    if (clashes(x, z, near) || shape.check_xyz(x, nullptr) != 0) {
      misses++;
      continue;
    }
    double closest = 1e9;
    for (const std::vector<double> &k : kept) {
      double r = conf_rmsd(k.data(), x.data(), heavy.data(), (int)heavy.size());
      if (r < closest) closest = r;
    }
    if (trace) std::fprintf(stderr, "conf-trace heavy=%d rotors=%d draw=%d closest_rmsd=%.3f\n", (int)heavy.size(),
                            (int)rot.size(), d, closest);
    if (closest < CONF_PRUNE_RMSD) {
      misses++;
      continue;
    }
    misses = 0;
    kept.push_back(x);
    out.insert(out.end(), x.begin(), x.end());
  }
  return (int)kept.size() - 1;
}
} // namespace
