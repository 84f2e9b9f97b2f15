// ob_headers.h — the Open Babel headers the C++ files of chem/ use, in one
// place, behind the pragmas their warnings need (C++, internal to chem/).
#ifndef SE3_OB_HEADERS_H
#define SE3_OB_HEADERS_H

// Open Babel's headers are not -Wextra clean.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wdeprecated-copy"
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include <openbabel/atom.h>
#include <openbabel/base.h>
#include <openbabel/bond.h>
#include <openbabel/builder.h>
#include <openbabel/canon.h>
#include <openbabel/elements.h>
#include <openbabel/forcefield.h>
#include <openbabel/generic.h>
#include <openbabel/graphsym.h>
#include <openbabel/kekulize.h>
#include <openbabel/math/vector3.h>
#include <openbabel/mol.h>
#include <openbabel/obconversion.h>
#include <openbabel/oberror.h>
#include <openbabel/obiter.h>
#include <openbabel/op.h>
#include <openbabel/ring.h>
#include <openbabel/stereo/cistrans.h>
#include <openbabel/stereo/stereo.h>
#include <openbabel/stereo/tetrahedral.h>
#pragma GCC diagnostic pop

#endif
