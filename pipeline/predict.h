/* predict.h — `se3screen predict MODEL INPUT...`: score molecule files with
 * a saved model, as Chemprop's `predict --model-paths` does, leaving a
 * normal workdir behind.
 *
 * predict writes DIR/predict.yaml, an ordinary score-only workflow:
 *
 *   workflow: predict
 *   workdir: "DIR"                              (absolute)
 *   sets:
 *     library:
 *       - {path: "INPUT"}                       (each input, absolute)
 *   stages:
 *     ingest: {}
 *     graph: {}
 *     score: {set: library, checkpoint: "MODEL"}   (absolute)
 *     rank: {top: N, outputs: [hits.csv, hits.sdf]}
 *
 * and runs it through runner_run, the function `se3screen run` calls: the
 * model's card supplies the featurisation (how molecules are read, given
 * hydrogens and 3D coordinates, made into graphs) and the ranking order, so
 * the library is prepared exactly as the model's training set was. Because
 * DIR is a normal workdir, `top`, `query`, `report` and `status` work on it,
 * and because predict.yaml is rewritten only when its bytes would change, the
 * same command run again after a kill resumes where the run stopped (and a
 * changed command, e.g. another --top, redoes only what depends on it).
 */
#ifndef SE3_PREDICT_H
#define SE3_PREDICT_H

#include <stddef.h>

struct predict_opts {
  const char *model;         /* a checkpoint file, a workdir, or its models/ folder */
  const char *const *inputs; /* molecule files, any format ingest reads */
  int n_inputs;
  const char *out;         /* -o FILE (.csv or .sdf); NULL: none */
  long long top;           /* --top: hits kept; 0 = all */
  const char *workdir;     /* --workdir; NULL: predict-<stem of the first input> */
  const char *const *sets; /* --set overrides, as `run` takes them */
  int n_sets;
  const char *command_line; /* recorded in the runs table */
};

/* The workdir predict uses when --workdir is not given, for the first input
 * `input`: "predict-<stem>" in the current folder, the stem being the file's
 * last name without a compression suffix (.gz, .bz2, .xz, .zst) and without
 * its format's extension ("lib.smi.gz" -> "predict-lib"). Written into out
 * (at most len bytes, always terminated). */
void predict_default_workdir(const char *input, char *out, size_t len);

/* `se3screen predict`: checks the command (every refusal before any work,
 * exit SE3_EXIT_USAGE with a message naming the file), writes predict.yaml,
 * runs it, and copies the ranked hits to o->out. Returns the exit status of
 * the command (pipeline/runner.h): 0, 1, 2 or 75. */
int predict_run(const struct predict_opts *o);

#endif
