/* shape.h — is a 3D shape still its molecule? Every bond's length, every
 * 1-3 distance (the two ends of an angle) and every aromatic ring's
 * flatness held against bounds that follow from the graph alone.
 *
 * A median RMSD against crystal poses does not show one generated shape in
 * eight with a ring bond stretched by several Å (issue 67); a check of each
 * bond does. The bounds come from a table written here (shape.c):
 *
 *   bonds    a length range [lo, hi] by the two elements and the bond's
 *            order (single, double, triple, aromatic), wide enough for what
 *            conjugation, charge and strain do to it in crystal structures
 *            (an amide C-N 1.33 Å, an amine's 1.47-1.50); pairs the table
 *            lacks: covalent radii (Pyykkö's) with a wider range
 *   1-3      the angle at the middle atom from its hybridisation (from its
 *            bonds: sp, sp2 when aromatic or doubly bonded, sp3 otherwise,
 *            an N or O beside a π system either) and the smallest ring the
 *            angle lies in (3: 60°, 4: 88-90°, 5: 104-108°, the rest of a
 *            planar atom's 360° shared by its other angles; wider at a
 *            fusion or bridgehead atom of saturated rings, less so for an
 *            angle there that lies in no ring: 115 ± 15°, 122 ± 18° beside
 *            a three-ring, for one between two rings), turned into a
 *            distance range with the two bonds as they are, each held
 *            within its own range
 *   rings    each aromatic ring of up to 8 atoms: every atom within
 *            SHAPE_PLANAR_TOL of the ring's mean plane
 *
 * A distance fails when it lies more than tol outside its range: tol is
 * SHAPE_TOL_GENERATED for shapes se3screen made, SHAPE_TOL_INPUT for a
 * file's own coordinates (crystal structures carry their own errors).
 * Measured (2026-11-28): every DFT geometry of the bundled QM9 records,
 * and all but one of QM7's 1,192 (a methyl's H-C-H at 91°), pass at
 * SHAPE_TOL_GENERATED, all of them at SHAPE_TOL_INPUT; of the 1,000
 * held-out PDB crystal ligands of bench/gen3d.sh, 3 fail at SHAPE_TOL_INPUT
 * and 89 at SHAPE_TOL_GENERATED (an O-P-O of 82°, a C=O of 1.46 Å, a C≡N of
 * 1.33 Å: the structures' own errors); RDKit's bounds matrix, 0.25 Å past
 * it, fails 154 of the same crystal ligands, mostly at angles it takes as
 * ideal (a thiophene's C-S-C as 108°; the crystal's is 92°).
 *
 * Angles at metals and at atoms of more than four neighbours, and bonds
 * to an element outside the organic set (H B C N O F Si P S Cl Se Br I and
 * As, Ge, Te) are not judged. */
#ifndef SE3_SHAPE_H
#define SE3_SHAPE_H

#include <stddef.h>

#include "chem/mol.h"

/* How far outside its range a distance may lie (Å). */
#define SHAPE_TOL_GENERATED 0.15
#define SHAPE_TOL_INPUT 0.40
/* An aromatic ring's atoms this far from its mean plane (Å) and no further. */
#define SHAPE_PLANAR_TOL 0.15
#define SHAPE_PLANAR_TOL_INPUT 0.30

enum shape_kind { SHAPE_OK = 0, SHAPE_BOND, SHAPE_ANGLE, SHAPE_PLANAR };

/* The worst failure of a shape: kind, the atoms (0-based; a, b for a bond,
 * a-c-b for an angle's ends and centre, a: the ring atom farthest from the
 * plane and c: the ring's size for a ring), the distance found and its
 * range (for a ring: the atom's distance from the plane, range [0, 0]). */
struct shape_fault {
  enum shape_kind kind;
  int a, b, c;
  int in_ring; /* a bond or an angle inside a ring */
  double d, lo, hi;
  double excess;             /* how far outside [lo, hi] (Å) */
  double deg, deg_lo, deg_hi; /* an angle's degrees and its range */
};

struct shape_bounds;

/* The bounds of m's graph (atoms, bonds; coordinates unused). NULL when out
 * of memory. */
struct shape_bounds *shape_bounds_make(const struct mol *m);
void shape_bounds_free(struct shape_bounds *s);
/* The atoms the bounds were made for. */
int shape_bounds_atoms(const struct shape_bounds *s);

/* Hold the coordinates xyz (n_atoms x 3, Å) against s with tolerances tol
 * (distances) and planar_tol (rings). Returns the number of failures; *f
 * (may be NULL) the worst one (the largest excess). */
int shape_check(const struct shape_bounds *s, const double *xyz, double tol, double planar_tol, struct shape_fault *f);

/* f as words with m's elements and 1-based atoms: "ring bond C12-C13 is
 * 5.36 Å (1.36-1.43 Å)", "angle C3-N4-C5: 1-3 distance 2.98 Å (2.21-2.47 Å)",
 * "aromatic ring of 6 atoms not planar: atom 7 is 0.62 Å from its plane". */
void shape_fault_text(const struct mol *m, const struct shape_fault *f, char *buf, size_t len);

/* Every conformer of m (its atoms' own and m->confs) checked; 0 when all
 * pass, otherwise the number of failing conformers with why set (reason
 * "bond out of bounds", "angle out of bounds" or "aromatic ring not
 * planar", the detail naming the conformer, 1-based, when m has more than
 * one) and *conf (may be NULL) the first failing one, 0-based. -1 when out
 * of memory. A molecule without 3D coordinates passes. */
int mol_shape_check(const struct mol *m, double tol, double planar_tol, struct mol_why *why, int *conf);

#endif
