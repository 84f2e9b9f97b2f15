/* fingerprint.h — circular (Morgan) fingerprints of struct mol, Tanimoto
 * similarity, and Butina clustering on them: for a split by cluster, and
 * for anything that asks how near one molecule is to others.
 *
 * The fingerprint is of the heavy atoms; hydrogens, whether atoms of their
 * own or counted on their atom (implicit_h), enter only as each heavy
 * atom's hydrogen count, so adding hydrogens changes nothing. An atom's
 * identifier at radius 0 is a hash of its element, heavy-atom degree,
 * hydrogen count, formal charge, aromatic flag and whether it is in a ring;
 * at radius r it is a hash of r, its identifier at r - 1 and the sorted
 * (bond order, neighbour's identifier at r - 1) pairs. Every atom's
 * identifier at every radius 0..radius sets bit (identifier mod FP_BITS).
 * This is the ECFP idea (radius 2: ECFP4-like) written here, not RDKit's
 * code: environments found twice are not pruned and the hash is another, so
 * the bits match no other toolkit's; similarities are of the same kind and
 * size. Isotopes, stereo and coordinates are left out. */
#ifndef SE3_FINGERPRINT_H
#define SE3_FINGERPRINT_H

#include <stdint.h>

#include "chem/mol.h"

#define FP_BITS 2048

struct fp {
  uint64_t w[FP_BITS / 64];
  int n_set; /* bits set in w: fp_tanimoto counts on it (fp_morgan keeps it) */
};

/* m's fingerprint of the given radius (0..6) into out. 0, or -1 (a bond to
 * an atom that does not exist, a radius out of range, or no memory). */
int fp_morgan(const struct mol *m, int radius, struct fp *out);

/* |a AND b| / |a OR b|; 1 when both are empty (nothing tells them apart). */
double fp_tanimoto(const struct fp *a, const struct fp *b);

/* Butina clustering (Butina, J. Chem. Inf. Comput. Sci. 1999) of n
 * fingerprints with Tanimoto distance 1 - similarity: two are neighbours at
 * distance <= cutoff. In order of most neighbours (ties: lower index
 * first), each molecule not yet in a cluster starts one and takes its
 * neighbours not yet in one. cluster[i] is i's cluster, numbered from 0 in
 * the order they were made (cluster 0 is the largest centroid's). Every
 * pair is compared twice: O(n^2) time, O(n) memory. Returns the number of
 * clusters, or -1 out of memory. */
int fp_butina(const struct fp *fps, int n, double cutoff, int *cluster);

#endif
