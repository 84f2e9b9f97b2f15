/* scaffold.h — Bemis–Murcko frameworks, for splitting a data set by scaffold.
 *
 * The framework of a molecule is what is left after side chains are
 * stripped: atoms of degree 0 or 1 (counting bonds to atoms still present,
 * hydrogens included) are removed, again and again, until none is left. What
 * remains is every ring system and the chains linking ring systems; an
 * acyclic molecule loses every atom (its framework is empty). An atom
 * double-bonded to a framework atom (a ring or linker C=O, an exocyclic
 * C=C) is then put back, alone, as RDKit's Murcko scaffolds (and so
 * Chemprop's scaffold splits) keep it: without it 2-pyridone's ring is an
 * aromatic ring with no Kekulé structure, whose key Open Babel did not write
 * the same way from one process to the next.
 *
 * The key of a framework is Open Babel's canonical SMILES of the remaining
 * atoms (with their charges, aromatic flags and bonds), each remaining atom
 * given one implicit hydrogen per bond order it lost, so that "c1ccccc1" is
 * the key of benzene, toluene and phenol alike. The empty framework's key is
 * "". Two molecules share a key exactly when Open Babel's canonical labelling
 * maps their frameworks to the same SMILES.
 */
#ifndef SE3_SCAFFOLD_H
#define SE3_SCAFFOLD_H

#include <stdint.h>

#include "chem/mol.h"

/* keep[i] = 1 when atom i is in the framework, else 0 (n_atoms bytes).
 * Returns the number of framework atoms, or -1 on a bad bond or no memory. */
int scaffold_atoms(const struct mol *m, uint8_t *keep);

/* The framework as a molecule of its own (atoms, bonds; names and tags
 * empty); out is overwritten. 0, or -1 on a bad bond or no memory. */
int scaffold_mol(const struct mol *m, struct mol *out);

/* The framework's key (see above), malloc'd; NULL on failure (no memory, or
 * Open Babel refused it). Uses Open Babel: single-threaded callers only. */
char *scaffold_key(const struct mol *m);

/* A compound's key, the unit a split never divides: the first block of its
 * InChIKey (14 letters, the skeleton: stereo, charge and protonation are in
 * the other blocks), or "#<id>" (a compound of its own) where there is no
 * InChIKey. malloc'd; NULL when out of memory. */
char *mol_compound_key(long long id, const char *inchikey);

#endif
