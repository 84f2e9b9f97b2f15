/* check_inputs.h — the mistakes in a workflow that only its input files can
 * show, found before any work starts.
 *
 * The configuration loader checks a workflow against the schema and that
 * its input files exist; it does not open them. A label column that the CSV
 * does not have, an SD tag that no record carries, a name or SMILES column
 * that is not there, or a training target that names no label would pass
 * it and fail only after the whole ingest (hours of 3D generation on a real
 * library). check_inputs reads what it takes to catch them and no more:
 * the header row of each CSV/TSV input and labels_csv file, and the SD tags
 * of the first records of each SD file (the first 50 records or 4 MB,
 * whichever comes first; gzip'd too). A text scan: Open Babel is never run
 * here (it stays in ingest's isolated worker processes), and no file is read
 * whole. Used by `se3screen check` and by `run` before its first stage.
 */
#ifndef SE3_CHECK_INPUTS_H
#define SE3_CHECK_INPUTS_H

#include "common/cfgtree.h"

/* Checks what the stages named in stages_that_run (space-separated stage
 * names; "*" = all) read of the inputs of the resolved workflow root:
 *   ingest  every input of every set: a CSV/TSV input's smiles_column,
 *           name_column and `labels: [...]` columns (a file without any
 *           SMILES column is bad input, which ingest rejects and goes on); an SD file's `labels: [...]`
 *           tags; `labels: [...]` on a SMILES file (which has neither), and
 *           smiles_column/name_column on an input that is no CSV/TSV; a
 *           labels_csv file's `join` column and `columns`; a molecule file
 *           listed twice in one set (the same device and inode: a path
 *           spelt twice, a symbolic or hard link, a pattern's match),
 *           named at both entries (and a molecule file in two sets, a
 *           warning: check_inputs_warn);
 *   train   stages.train.set names a set; stages.train.target, and
 *           stages.train.split.column with method column, name a label of
 *           that set (a `labels:` name, a constant label's name, a
 *           labels_csv column);
 *   rank    stages.rank.target, when set, is the training target or a label
 *           of the training set, when score runs too (rank alone may rank
 *           scores of another target that the database holds), and not in
 *           a score-only workflow (no train stage; the score stage names a
 *           checkpoint, whose target is ranked by).
 * Each problem goes to problem(arg, msg), msg formatted as the loader's
 *   FILE:LINE:COL: key.path: message
 * (just "key.path: message" for a value the workflow does not write), with
 * "did you mean" over the names the file really has. An input that is
 * missing or cannot be read is skipped: the loader, or ingest, says so.
 * Returns the number of problems. */
int check_inputs(const struct cfg_node *root, const char *stages_that_run, void (*problem)(void *arg, const char *msg),
                 void *arg);
/* check_inputs, and what is worth saying but no problem to warning(arg,
 * msg), formatted "FILE:LINE:COL: key.path: warning: message" (not
 * counted): a molecule file in two sets, naming both (its molecules are
 * stored in each: a library that holds the training set scores what the
 * model learnt). `se3screen check` and `run` before its first stage. */
int check_inputs_warn(const struct cfg_node *root, const char *stages_that_run,
                      void (*problem)(void *arg, const char *msg), void (*warning)(void *arg, const char *msg),
                      void *arg);

/* The rules above that need no file, for a workflow whose inputs need not
 * exist (`se3screen check --no-inputs`, workflows in documentation):
 * stages.train.set names a set, and the training target, the split column
 * and the rank target name labels the workflow itself gives (`labels:`
 * names, constant labels, labels_csv `columns`). No file is opened: a
 * training set with a labels_csv without `columns` has labels only its
 * file knows, and its target is not checked. */
int check_inputs_unread(const struct cfg_node *root, const char *stages_that_run,
                        void (*problem)(void *arg, const char *msg), void *arg);

#endif
