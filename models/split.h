/* split.h — what a split owes the evaluation: the records of one compound
 * in one split, and the counts that say how thin each split is.
 *
 * A compound key is a text that two records of one compound share (train
 * uses the InChIKey's first block, the skeleton without stereo, charge or
 * protonation); a group key is what a split keeps together (a scaffold, a
 * cluster). se3_split_groups (models/trainer.h) takes group keys. */
#ifndef SE3_SPLIT_H
#define SE3_SPLIT_H

/* Group keys merged along compounds: records sharing a group key or a
 * compound key are one group (the connected components of both
 * relations), and every record's new key is the least (strcmp) group key of
 * its group. out[i] points at one of key[] (nothing is copied); with no
 * compound shared across group keys, out[i] == key[i]. 0, or -1 out of
 * memory. */
int se3_merge_groups(int n, char *const *key, char *const *compound, char **out);

/* After a split drawn per record: each compound's records moved into the
 * split of its first record (lowest index), so that none straddles two
 * splits; with every compound distinct nothing moves. Returns the number of
 * records moved, or -1 out of memory. */
int se3_split_keep_compounds(int n, char *const *compound, unsigned char *split);

/* Per split (index: SE3_SPLIT_TRAIN, _VALID, _TEST): its records, distinct
 * compounds, and where classify, its actives (y > 0.5) and their distinct
 * compounds (both -1 otherwise). 0, or -1 out of memory. */
struct se3_split_count {
  int molecules, compounds, actives, active_compounds;
};
int se3_split_counts(int n, const unsigned char *split, const double *y, int classify, char *const *compound,
                     struct se3_split_count out[3]);

#endif
