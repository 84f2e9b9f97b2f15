/* slurm.h — `se3screen slurm`: a workflow as sbatch scripts, one a step,
 * chained by dependencies.
 *
 * The steps: each chunked stage (ingest, graph, basis, score) as an array
 * whose task i of N takes every N-th chunk into WORKDIR/shards/, then a
 * one-task job that merges the shards into screen.db; train as one job of
 * one or several processes (srun --mpi=pmix); any other stage (rank) as one
 * task. Every script asks Slurm for USR1 slurm.signal_s seconds before its
 * limit, passes it (and TERM) to se3screen, which stops at its next chunk or
 * step with its work kept (exit 75), and then requeues its own job, at most
 * slurm.requeues times; a rerun goes on where the last one stopped.
 *
 * Written to WORKDIR/slurm/: NN-STEP.sbatch, submit.sh (submits the steps
 * from a given one on, each `afterok` the one before and cancelled, not left
 * pending, when that one fails), logs/, and jobs.tsv (every submission:
 * time, script, job id).
 *
 * No value of the workflow runs as a command: paths and --set words are
 * single-quoted shell words; #SBATCH values are written so that sbatch
 * reads them back as they are (double-quoted where they hold a space, a
 * quote, a backslash or #; % doubled in the log paths); values with a
 * control character (a newline, CR, tab, ... or DEL) are refused, at
 * validation and again here (a workdir resolved into such a folder), and
 * so are a workdir with a backslash, values holding sbatch's "hetjob" or
 * "packjob", and slurm.extra words that are not options. --submit runs
 * `bash submit.sh FIRST` by fork and exec, without a shell. */
#ifndef SE3_SLURM_H
#define SE3_SLURM_H

struct slurm_opts {
  const char *workflow;    /* the YAML file */
  const char *const *sets; /* --set overrides (the slurm.* flags among them), passed on to every job */
  int n_sets;
  int submit; /* --submit: write, then submit every step */
  int resume; /* --resume: submit the steps from the first whose stage is not finished */
};

/* 0, or the command's exit status (runner.h) with a message printed. */
int slurm_run(const struct slurm_opts *o);

#endif
