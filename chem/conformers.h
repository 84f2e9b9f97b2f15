/* conformers.h — a molecule's other conformers (stages.ingest.conformers)
 * and the aligned RMSD that prunes them.
 *
 * Conformer 0 is the shape ingest always made (chem/gen3d.h at the
 * molecule's seed). Conformers 1..N-1 are conformer 0 with torsions of
 * its rotatable bonds (Open Babel's rotors: single, not in a ring, not an
 * amide) drawn again, at seeds derived from the molecule's seed and the
 * draw's number (conf_seed): one to three rotors a draw, each turned by 120
 * or 240 degrees (180 where an end is sp2 or aromatic), the smaller side
 * turning, so staggered stays staggered, and every stereocentre and double bond, the
 * rings, bond lengths, angles and hydrogens are conformer 0's. Not
 * se3_gen3d at other seeds: measured on 60 ESOL molecules its builder gave
 * 0.000 A heavy-atom RMSD between draws for most of them (bench/RESULTS.md,
 * issue 54). A draw with a clash (two atoms more than three bonds apart
 * closer than 2.5 A, or 1.5 A with a hydrogen) is dropped, and so is one
 * within CONF_PRUNE_RMSD A heavy-atom RMSD, after the best superposition,
 * of a conformer already kept. At most CONF_MAX_DRAWS(N) draws are made,
 * and drawing stops after CONF_MAX_MISSES(N) dropped in a row, so a
 * molecule may keep fewer than N conformers (a molecule without a rotatable
 * bond keeps one and costs no draw); never more. A draw costs microseconds
 * (turns, a clash check, RMSDs), against milliseconds for conformer 0.
 */
#ifndef SE3_CONFORMERS_H
#define SE3_CONFORMERS_H

#ifdef __cplusplus
extern "C" {
#endif

#define CONF_PRUNE_RMSD 0.5
#define CONF_MAX_DRAWS(n) (10 * ((n) - 1))
#define CONF_MAX_MISSES(n) (5 * ((n) - 1))

/* The seed of draw d (1, 2, ...) of a molecule whose conformer 0 was made
 * at seed: a mix of both, so that nearby seeds give unrelated draws. */
unsigned conf_seed(unsigned seed, int d);

/* The RMSD (Å) between two sets of n points (x, y, z each, 3n doubles),
 * after the rotation and translation that minimise it (Horn's quaternion
 * method); only the points idx[0..n) when idx is not NULL (a and b are then
 * indexed by idx). 0 for n <= 0. */
double conf_rmsd(const double *a, const double *b, const int *idx, int n);

#ifdef __cplusplus
}
#endif

#endif
