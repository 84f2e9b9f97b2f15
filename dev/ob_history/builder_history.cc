// builder_history.cc — Open Babel's OBBuilder gives one molecule different
// coordinates depending on what the process built before, with the same
// srand() seed: the history dependence of a built shape (issue 54), shown
// without se3screen.
//
//   g++ -O1 -w -I/usr/include/openbabel3 builder_history.cc -o builder_history -lopenbabel
//   ./builder_history TARGET [EARLIER ...]
//
// builds each EARLIER SMILES (seed 7), then TARGET (seed 42), and prints a
// hash of TARGET's coordinates. With Open Babel 3.1.1 (Debian 12) and
// TARGET daptomycin (Lipophilicity, chemprop_lipo.csv line 3594):
//   alone                          181f2347ab9ca033
//   after line 2 (a piperazine)    1f073b498a0aa37d
//   after line 3 (a sulfonamide)   9a3848d44ee937d1
//   after line 4                   181f2347ab9ca033 (as alone)
//   after line 3 then line 2       181f2347ab9ca033 (as alone)
// so the state is what one earlier Build left, and a later Build of most
// molecules clears it. In se3screen the first build then clashes or not,
// and the molecule is kept or rejected ("stereo not kept") by what its
// ingest worker parsed before. Perturbing malloc's heap first changes
// nothing; Open Babel's rand() is reseeded (srand) before each build.
//
// The cause (found 2026-11-27 with a traced copy of builder.cpp): the SMILES
// reader makes the molecule's stereo data from a std::map keyed by OBAtom*,
// so their order follows the addresses malloc handed out, which depend on
// what the process allocated before. OBBuilder::CorrectStereoAtoms swaps the
// inverted centres back one after another in that order (daptomycin has six),
// and each swap turns branches the next one moves again: the same centres,
// other coordinates. se3screen sorts the stereo data by atom id before
// building (order_stereo in chem/gen3d.cc): 0 of 902 such builds differ then,
// against 11 of 902 before.
#include <openbabel/atom.h>
#include <openbabel/builder.h>
#include <openbabel/math/vector3.h>
#include <openbabel/mol.h>
#include <openbabel/obconversion.h>
#include <openbabel/obiter.h>

#include <cstdlib>
#include <iostream>
#include <string>

using namespace OpenBabel;

static unsigned long long build(const std::string &smiles, unsigned seed) {
  OBConversion in;
  in.SetInFormat("smi");
  OBMol m;
  in.ReadString(&m, smiles);
  std::srand(seed);
  OBBuilder b;
  b.Build(m, false);
  unsigned long long h = 1469598103934665603ULL; // FNV-1a over the coordinates' bytes
  FOR_ATOMS_OF_MOL(a, m) {
    double v[3] = {a->GetX(), a->GetY(), a->GetZ()};
    const unsigned char *p = (const unsigned char *)v;
    for (int i = 0; i < 24; i++)
      h = (h ^ p[i]) * 1099511628211ULL;
  }
  return h;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    std::cerr << "usage: builder_history TARGET [EARLIER ...]\n";
    return 2;
  }
  vector3 v;
  v.randomUnitVector(); // Open Babel seeds rand() from the clock on first use: done now
  for (int i = 2; i < argc; i++)
    build(argv[i], 7);
  std::cout << std::hex << build(argv[1], 42) << "\n";
  return 0;
}
