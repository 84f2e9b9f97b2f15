// inbound_ob.h — chemistry on the way in (C++ on OBMol, internal to the
// Open Babel bridge; inbound.cc): what obbridge.cc's parse does to a record
// read before it standardises, protonates and names it.
#ifndef SE3_INBOUND_OB_H
#define SE3_INBOUND_OB_H

#include <cstddef>
#include <vector>

namespace OpenBabel {
class OBMol;
}

// A MOL2 record's formal charges, from its atom types and partial charges
// (text, len: the record, read again for them): DUD-E and ZINC write
// charged groups so, and Open Babel reads them as radicals. Nothing when the
// ATOM section does not match mol's atoms.
void se3_mol2_formal_charges(OpenBabel::OBMol &mol, const char *text, size_t len);

// The first atom with unpaired electrons (1-based, their count in
// *unpaired), 0 when none or when the record is broken rather than a
// radical (a lone neutral hydrogen atom, no heavy atom).
int se3_first_radical(OpenBabel::OBMol &mol, int *unpaired);

// The molecule's fragments (atom indices, 1-based), less lone neutral
// hydrogen atoms.
std::vector<std::vector<int>> se3_fragments(OpenBabel::OBMol &mol);

// Keeps one of frags: the most heavy atoms among fragments with carbon (any
// fragment when none has carbon), then the most atoms, then the first.
void se3_keep_largest_fragment(OpenBabel::OBMol &mol, const std::vector<std::vector<int>> &frags);

#endif
