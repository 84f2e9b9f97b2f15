/* report_page.h — report.html from a result database (stages/report_page.c):
 * written by the report stage at the end of a run (stages/report.c) and by
 * `se3screen report` from a database alone. */
#ifndef SE3_REPORT_PAGE_H
#define SE3_REPORT_PAGE_H

#include <stddef.h>
#include <sqlite3.h>

#include "common/error.h"

struct stage_ledger; /* stages/stage.h */

struct report_opts {
  int top;    /* hits in the table */
  int depict; /* 1: each hit's 2D structure drawn (Open Babel) */
  int bins;   /* bars of each histogram */
  const struct stage_ledger *ledger; /* the runner's ledger, for the timeline; NULL: no timeline rows */
};
/* report.html of the result database db (tables in "main") into out_path,
 * written atomically ("-": standard output); db_label names the database on
 * the page. 0, or -1 with err set. */
int report_write(sqlite3 *db, const char *db_label, const struct report_opts *o, const char *out_path,
                 struct se3_error *err);
#endif
