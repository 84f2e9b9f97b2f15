// conformers_ob.h — a molecule's other conformers from se3_gen3d (C++,
// internal to the Open Babel bridge; chem/conformers.h says how they are
// drawn and pruned).
#ifndef SE3_CONFORMERS_OB_H
#define SE3_CONFORMERS_OB_H

#include <vector>

extern "C" {
#include "chem/obbridge.h"
}

namespace OpenBabel {
class OBMol;
}

// Conformers 1..o->conformers-1 of a molecule whose conformer 0, first, was
// generated at seed. Each kept conformer appends first.NumAtoms() x 3
// coordinates to out, atoms in first's order; returns how many were kept
// (0 .. o->conformers - 1).
int se3_more_conformers(const OpenBabel::OBMol &first, const ob_parse_opts *o, unsigned seed,
                        std::vector<double> &out);

#endif
