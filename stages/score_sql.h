/* score_sql.h — the score stage's select of one chunk's molecules, here
 * rather than exported by stages/score.c so that test_rank can check its
 * query plan. */
#ifndef SE3_SCORE_SQL_H
#define SE3_SCORE_SQL_H

#include <sqlite3.h>

#include "stage.h" /* STAGE_GRAPH_COLUMN */

/* In schema src (?1 the set, ?2 and ?3 the chunk's first and last id),
 * sqlite3_malloc'd: a chunk reads its own rows only, whatever the library's
 * size. The chunk's rows are found by the graphs' id range, and set_name only
 * filters them (the unary + keeps SQLite from driving the join by the
 * set_name index): driven by that index, every chunk walked every molecule
 * of the set, and scoring 10^6 molecules slowed from about 600 to 70
 * molecules/s a process. */
static inline char *score_chunk_sql(const char *src) {
  return sqlite3_mprintf("SELECT g.mol_id, " STAGE_GRAPH_COLUMN ", m.mol FROM \"%w\".graphs g "
                         "JOIN \"%w\".molecules m ON m.id = g.mol_id "
                         "WHERE g.mol_id BETWEEN ?2 AND ?3 AND +m.set_name = ?1 ORDER BY g.mol_id",
                         src, src);
}

#endif
