// gen3d.h — 3D coordinates for a molecule read without them (C++, internal to
// the Open Babel bridge: obbridge.cc calls it; nothing in C does).
//
// Every quality builds (fast: Open Babel's templates, each on one rigid
// piece (chem/gen3d_build.h), its open-chain torsions set afresh by
// chem/gen3d_torsions.h; medium, best: + 250, 2000 MMFF94 steps), then
// checks the result: finite, non-zero coordinates; every bond, 1-3 distance
// and aromatic ring within bounds (chem/shape.h); no clash; the stereo the
// input specified (tetrahedral centres, cis/trans bonds) kept. Only a
// molecule that fails a check pays for a fix (see gen3d.cc): at every
// quality the fixes that cost microseconds (turning single bonds, inverting
// centres, the mirror image) and a short UFF relaxation of a shape a little
// out of bounds; at fast also a short UFF cleanup and the medium path; last,
// at every quality, RDKit's ETKDGv3 where this build has it (chem/etkdg.h).
// One that no fix saves is refused with the failed check named, never
// passed on silently.
//
// The caller runs it on one OpenMP thread, in a worker process (see
// obbridge.h).
#ifndef SE3_GEN3D_H
#define SE3_GEN3D_H

#include <string>

extern "C" {
#include "chem/obbridge.h"
}

namespace OpenBabel {
class OBMol;
}

// srand(seed) for Open Babel's draws (the builder's chain starts, hydrogens
// placed on a 3D molecule). Its random vectors come from a static generator
// that reseeds rand() from the clock when first used, which could be after
// this srand: it is used once first, so the seed is the last word.
void se3_ob_srand(unsigned seed);

// Give mol 3D coordinates (hydrogens added when o->add_hydrogens) at
// o->quality, deterministically for a given seed. true when the checks pass;
// false with why naming the check that failed last ("stereo not kept at atom
// 7", "atoms 3 and 18 clash (0.41 Å)", ...) otherwise.
bool se3_gen3d(OpenBabel::OBMol &mol, const ob_parse_opts *o, unsigned seed, std::string &why);

// What se3_gen3d_traced did, for measurements and tests.
enum se3_gen3d_check { GEN3D_OK = 0, GEN3D_BAD_COORDS, GEN3D_CLASH, GEN3D_STEREO, GEN3D_SHAPE };
enum se3_gen3d_fix {
  GEN3D_FIX_NONE = 0,
  GEN3D_FIX_TORSION,
  GEN3D_FIX_MIRROR,
  GEN3D_FIX_INVERT,
  GEN3D_FIX_CLEANUP,
  GEN3D_FIX_RESEED,
  GEN3D_FIX_MEDIUM,
  GEN3D_FIX_ETKDG,
  GEN3D_FIX_RELAX
};
struct se3_gen3d_trace {
  se3_gen3d_check first_fail;                     // the first build's failed check (GEN3D_OK: none)
  se3_gen3d_check last_fail;                      // after every fix (GEN3D_OK: saved or never failed)
  se3_gen3d_fix fixed_by;                         // the fix that passed the checks (NONE: none needed, or none worked)
  int atom;                                       // 1-based atom of the last failed check, 0 none
  int builds;                                     // OBBuilder runs
  double t_build, t_hydrogens, t_checks, t_fixes; // seconds
  char first_why[160];                            // the first build's failed check in words ("" none)
};

// se3_gen3d telling what happened in *trace (may be null).
bool se3_gen3d_traced(OpenBabel::OBMol &mol, const ob_parse_opts *o, unsigned seed, std::string &why,
                      se3_gen3d_trace *trace);

// Another conformer of mol, a molecule se3_gen3d gave coordinates (its
// stereo as read still attached, hydrogens as they are), for an ensemble at
// a fraction of a build's cost (no builder run; the torsion pass took 3 ms
// a PDB ligand where the builder took 5): each open-chain single bond turned rigidly to one of its allowed
// torsions near the least crowded, drawn under draw (0 counts as 1; another
// draw, most often another shape), then checked as se3_gen3d checks (shape,
// clash, stereo) and fixed by the cheap fixes. Deterministic for a given draw.
// false with why, mol unchanged, when the checks fail. A rigid turn about a
// single bond outside rings keeps every bond length, angle, stereocentre
// and double bond; ring conformations stay those of the first conformer.
bool se3_gen3d_another(OpenBabel::OBMol &mol, unsigned draw, std::string &why);

#endif
