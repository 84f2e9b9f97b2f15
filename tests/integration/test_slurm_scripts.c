/* `se3screen slurm` without a Slurm: the scripts it writes (valid bash, the
 * steps in order, the workflow's slurm: block and the options that override
 * it, the train job's processes, the --set overrides passed on), its errors,
 * and a script run by hand outside Slurm: a USR1 to the script stops the
 * stage at a chunk with its work kept, and the script exits 75 saying so;
 * `status` then names the run's Slurm job.
 * tests/slurm/test_slurm.sh runs them on a real Slurm. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/testutil.h"

/* The quickstart's data in dir, a workflow with a slurm: block. */
static char *workflow(const char *dir, const char *extra) {
  char yaml[4096];
  snprintf(yaml, sizeof yaml,
           "workflow: sl\nworkdir: wd\nrun: {progress: lines, chunk_size: 64}\n"
           "slurm: {array_size: 5, partition: short, time: \"00:30:00\"}\n"
           "sets:\n  train:\n    - path: %s\n      labels_csv: {path: %s, join: name, columns: [u0_atom]}\n"
           "  library:\n    - {path: %s, labels: [logp]}\n"
           "stages:\n  ingest: {add_hydrogens: true}\n  graph: {edges: bonds}\n"
           "  train: {target: u0_atom, model: small, epochs: 1}\n  score: {set: library}\n  rank: {top: 5}\n%s",
           tu_src("workflows/data/qm7_quick.sdf.gz"), tu_src("workflows/data/qm7_quick.csv"),
           tu_src("workflows/data/delaney_first60.csv"), extra);
  return tu_write(dir, "wf.yaml", yaml);
}

static char *script(const char *dir, const char *name) {
  char path[1200];
  snprintf(path, sizeof path, "%s/wd/slurm/%s", dir, name);
  char *s = tu_read(path, NULL);
  cr_assert(s, "%s was not written", path);
  return s;
}

static void has(const char *text, const char *what, const char *where) {
  cr_assert(strstr(text, what), "%s lacks \"%s\":\n%s", where, what, text);
}

Test(slurm_scripts, one_script_a_step_from_the_block_and_the_options) {
  char *dir = tu_tmpdir("slurm_scripts"), *out = NULL;
  char *wf = workflow(dir, "");
  cr_assert_eq(tu_se3(&out, "slurm %s --max-running 2 --account chem --extra '--qos=long --constraint=a100' "
                            "--nodes 2 --tasks-per-node 4 --gpus-per-task 1 --set stages.train.epochs=3",
                      wf),
               0, "%s", out);
  const char *steps[] = {"00-ingest.sbatch", "01-merge-ingest.sbatch", "02-graph.sbatch", "03-merge-graph.sbatch",
                         "04-train.sbatch",  "05-score.sbatch",        "06-merge-score.sbatch", "07-rank.sbatch"};
  for (int i = 0; i < 8; i++) {
    has(out, steps[i], "the command's output");
    char *s = script(dir, steps[i]);
    char *chk = NULL;
    cr_assert_eq(tu_sh(&chk, "bash -n %s/wd/slurm/%s", dir, steps[i]), 0, "%s: %s", steps[i], chk);
    free(chk);
    /* the block, the options, every script */
    has(s, "#SBATCH --partition=short\n", steps[i]);
    has(s, "#SBATCH --account=chem\n", steps[i]);
    has(s, "#SBATCH --time=00:30:00\n", steps[i]);
    has(s, "#SBATCH --qos=long\n#SBATCH --constraint=a100\n", steps[i]);
    has(s, "#SBATCH --signal=B:USR1@120\n", steps[i]);
    has(s, "#SBATCH --requeue\n", steps[i]);
    has(s, "REQUEUES=3\n", steps[i]);
    cr_assert(!strstr(s, "slurm.account"), "%s passes the slurm options on to se3screen:\n%s", steps[i], s);
    free(s);
  }
  /* chunked stages: arrays of array_size tasks, at most max_running at once */
  char *s = script(dir, "02-graph.sbatch");
  has(s, "#SBATCH --array=0-4%2\n", "the graph array");
  has(s, "run \"$WORKFLOW\" --stage graph --set 'stages.train.epochs=3' --shard "
         "\"$SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT\"",
      "the graph array");
  free(s);
  s = script(dir, "03-merge-graph.sbatch");
  has(s, "merge '", "the merge");
  has(s, "/wd'/screen.db", "the merge");
  cr_assert(!strstr(s, "--array"), "a merge is one task:\n%s", s);
  free(s);
  /* train: nodes x tasks-per-node processes through srun, GPUs a process */
  s = script(dir, "04-train.sbatch");
  has(s, "#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=4\n", "the train job");
  has(s, "#SBATCH --gpus-per-task=1\n", "the train job");
  has(s, "step srun --mpi=pmix \"$SE3\" run \"$WORKFLOW\" --stage train", "the train job");
  free(s);
  s = script(dir, "05-score.sbatch");
  has(s, "#SBATCH --gpus-per-task=1\n", "the score array");
  free(s);
  s = script(dir, "07-rank.sbatch");
  cr_assert(!strstr(s, "--gpus") && !strstr(s, "--array"), "rank is one task without a GPU:\n%s", s);
  free(s);
  /* submit.sh: the steps in order, each afterok the one before */
  s = script(dir, "submit.sh");
  has(s,
      "steps=(00-ingest.sbatch 01-merge-ingest.sbatch 02-graph.sbatch 03-merge-graph.sbatch 04-train.sbatch "
      "05-score.sbatch 06-merge-score.sbatch 07-rank.sbatch)",
      "submit.sh");
  has(s, "--kill-on-invalid-dep=yes ${dep:+--dependency=afterok:$dep}", "submit.sh");
  free(s);
  free(out);
  /* a flag overrides the block */
  cr_assert_eq(tu_se3(&out, "slurm %s --array-size 3", wf), 0, "%s", out);
  s = script(dir, "00-ingest.sbatch");
  has(s, "#SBATCH --array=0-2\n", "the ingest array with --array-size 3");
  free(s);
  free(out);
  free(wf);
  free(dir);
}

Test(slurm_scripts, bad_values_and_usage_are_refused) {
  char *dir = tu_tmpdir("slurm_bad");
  char *wf = workflow(dir, "");
  /* arguments after `slurm` (%s: the workflow), the exit status, what the output must say */
  static const struct {
    const char *args;
    int status;
    const char *says;
  } cases[] = {
      {"%s --array-size 0", 2, "slurm.array_size"},         {"%s --submit --resume", 2, "exclude each other"},
      {"%s --nodes", 2, "--nodes needs a value"},          {"", 2, "missing the workflow file"},
      {"--help", 0, "usage: se3screen slurm"},              {"%s --bogus", 2, "unknown option '--bogus'"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char args[1400], *out = NULL;
    snprintf(args, sizeof args, cases[i].args, wf);
    cr_assert_eq(tu_se3(&out, "slurm %s", args), cases[i].status, "slurm %s: %s", args, out);
    has(out, cases[i].says, cases[i].args);
    free(out);
  }
  free(wf);
  free(dir);
}

/* The ingest array's script run by hand as task 0 of 1, outside Slurm: a
 * USR1 to the script (what Slurm sends before the time limit) stops
 * se3screen at a chunk, the chunks done are kept, and the script, its
 * requeues used up (SLURM_RESTART_COUNT=3), exits 75 and says how to go on;
 * run again, it finishes the stage. */
Test(slurm_scripts, usr1_stops_the_step_with_its_work_kept) {
  char *dir = tu_tmpdir("slurm_usr1"), *out = NULL;
  char *wf = workflow(dir, "");
  cr_assert_eq(tu_se3(&out, "slurm %s --array-size 1 --set run.chunk_size=16", wf), 0, "%s", out);
  free(out);
  char path[1200], log[1200];
  snprintf(path, sizeof path, "%s/wd/slurm/00-ingest.sbatch", dir);
  snprintf(log, sizeof log, "%s/ingest.log", dir);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    if (!freopen(log, "w", stderr) || !freopen("/dev/null", "w", stdout)) _exit(126);
    setenv("SLURM_ARRAY_TASK_ID", "0", 1);
    setenv("SLURM_ARRAY_TASK_COUNT", "1", 1);
    setenv("SLURM_JOB_ID", "4242", 1);
    setenv("SLURM_RESTART_COUNT", "3", 1);
    execlp("bash", "bash", path, (char *)NULL);
    _exit(127);
  }
  /* into the ingest: its first chunk committed */
  char db[1200];
  snprintf(db, sizeof db, "%s/wd/screen.db", dir); /* (task 0 of 1: the database itself) */
  double t0 = tu_now();
  while (tu_query_int(db, "SELECT count(*) FROM stage_chunks WHERE stage = 'ingest'") < 1) {
    cr_assert_lt(tu_now() - t0, 60, "no ingest chunk was committed in 60 s");
    tu_sleep(0.02);
  }
  kill(pid, SIGUSR1);
  int st = tu_wait(pid);
  char *text = tu_read(log, NULL);
  cr_assert_eq(st, 75, "the script ended with %d, not 75:\n%s", st, text ? text : "");
  has(text, "stopped before finishing, requeued 3 times already", "the script's log");
  long long done = tu_query_int(db, "SELECT count(*) FROM stage_chunks WHERE stage = 'ingest'"),
            planned = tu_query_int(db, "SELECT n_chunks FROM stage_state WHERE stage = 'ingest'");
  cr_assert(done >= 1 && done < planned, "%lld of %lld chunks done: the signal did not stop the stage mid-way", done,
            planned);
  free(text);
  /* again: the rest */
  cr_assert_eq(tu_sh(&out, "SLURM_ARRAY_TASK_ID=0 SLURM_ARRAY_TASK_COUNT=1 SLURM_JOB_ID=4242 bash %s", path), 0, "%s",
               out);
  free(out);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM stage_chunks WHERE stage = 'ingest' AND status = 'done'"),
               planned);
  /* status names the Slurm job of the last run (runs.job) */
  cr_assert_eq(tu_se3(&out, "status %s/wd", dir), 0, "%s", out);
  has(out, ", Slurm job 4242\n", "status");
  free(out);
  free(wf);
  free(dir);
}
