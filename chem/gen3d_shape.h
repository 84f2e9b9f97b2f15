// gen3d_shape.h — the shape check (chem/shape.h) on an Open Babel molecule
// (C++, internal to chem/: gen3d.cc and conformers.cc use it).
#ifndef SE3_GEN3D_SHAPE_H
#define SE3_GEN3D_SHAPE_H

#include <string>
#include <vector>

extern "C" {
#include "chem/shape.h"
}

namespace OpenBabel {
class OBMol;
}

// The bounds of one molecule's graph, made on first use and again whenever
// the graph changes (hydrogens added, another embedding's atoms).
class Gen3dShape {
public:
  Gen3dShape() = default;
  Gen3dShape(const Gen3dShape &) = delete;
  Gen3dShape &operator=(const Gen3dShape &) = delete;
  ~Gen3dShape();
  // The failures of mol's coordinates at SHAPE_TOL_GENERATED (0: it
  // passes; -1: out of memory); *f the worst, *why it in words (1-based
  // atoms) when given.
  int check(OpenBabel::OBMol &mol, shape_fault *f, std::string *why);
  // The same for coordinates xyz (n x 3) of the graph last checked.
  int check_xyz(const std::vector<double> &xyz, shape_fault *f);

private:
  bool prepare(OpenBabel::OBMol &mol);
  struct mol graph_ {};       // atoms and bonds, no coordinates
  shape_bounds *bounds_ = nullptr;
  unsigned long signature_ = 0; // of the graph the bounds were made for
};

#endif
