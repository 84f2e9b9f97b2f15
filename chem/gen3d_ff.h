// gen3d_ff.h — Open Babel's force fields as 3D generation uses them (C++,
// internal to chem/: gen3d.cc calls it; nothing in C does).
//
// Each call sets up a fresh instance for the molecule: Open Babel's shared
// instance skips its setup when the previous molecule looks alike and then
// minimises with that molecule's terms; and its UFF is set up around a bug
// that made a shape depend on what the process ran before (gen3d_ff.cc).
#ifndef SE3_GEN3D_FF_H
#define SE3_GEN3D_FF_H

class Gen3dShape;
namespace OpenBabel {
class OBMol;
}

// Conjugate gradients, `steps` of them or until the energy changes by less
// than econv, with the force field `first` ("MMFF94", "UFF"), `second` where
// `first` has no parameters for the molecule. The geometry is kept as it
// was when neither applies or a coordinate comes out not finite.
void se3_minimise(OpenBabel::OBMol &mol, int steps, double econv, const char *first = "MMFF94",
                  const char *second = "UFF");

// A shape out of the bounds of chem/shape.h by a little, relaxed: UFF
// (MMFF94 where UFF has no parameters), `chunk` steps at a time, until the
// shape passes or `steps` are spent. true when it passes; mol holds the last
// steps either way (the caller keeps a copy to go back to).
bool se3_relax_shape(OpenBabel::OBMol &mol, Gen3dShape &shape, int steps, int chunk);

#endif
