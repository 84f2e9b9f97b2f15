/* rank_select.h — rank's choice of hits (stages/rank_select.c): the score it
 * sorts by, its hits in one bounded pass, and its settings as one line. The
 * rank stage ranks with them; `merge` under stages.score.merge: hits keeps
 * only each score shard's candidates for those hits (the score stage's fold,
 * stages/score.c). */
#ifndef SE3_RANK_SELECT_H
#define SE3_RANK_SELECT_H

#include <stddef.h>
#include <stdint.h>
#include <sqlite3.h>

#include "common/cfgtree.h"
#include "common/error.h"

/* Up to `max` distinct targets of "<schema>".scores into out[] (256 bytes
 * each); returns how many. */
int rank_score_targets(sqlite3 *db, const char *schema, char out[][256], int max);
/* The score rank sorts by: cfg's `target` (rank's configuration), else the
 * first model's in "<schema>".models, else the one target of
 * "<schema>".scores (a score-only run trains no model). Returns 0, or -1 when
 * none names one (no scores, or scores of several targets). */
int rank_target(sqlite3 *db, const char *schema, const struct cfg_node *cfg, char *target, size_t n);
/* The hits of rank's configuration cfg (top > 0, min, max, dedupe) in
 * the given order among the rows of `scores` (a table or view as SQL names
 * it, "shard".scores or rank's view of the dockings, with the columns
 * rowid, score, mol_id, model and target) of `target`, the InChIKeys read
 * from "<mols>".molecules: their rowids, best first, in *rowids (malloc'd,
 * *n of them). One pass keeping the best `top`: memory bounded by top, not
 * by the number of scores. Returns 0, or -1 with err set. */
int rank_select(sqlite3 *db, const char *scores, const char *mols, const struct cfg_node *cfg, const char *target,
                int descending, int64_t **rowids, int64_t *n, struct se3_error *err);
/* rank's settings that decide its hits, as one line ("top=N target=... ..."). */
void rank_spec(const struct cfg_node *cfg, const char *target, char *out, size_t n);

#endif
