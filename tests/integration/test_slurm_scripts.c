/* `se3screen slurm` without a Slurm: the scripts it writes (valid bash, the
 * steps in order, the workflow's slurm: block and the options that override
 * it, the train job's processes, the --set overrides passed on), its errors,
 * and a script run by hand outside Slurm: a USR1 to the script stops the
 * stage at a chunk with its work kept, and the script exits 75 saying so;
 * `status` then names the run's Slurm job. And what no workflow may do
 * through them (issue 30): control characters in names, paths and slurm:
 * values refused at `check` and by `slurm`; names and paths holding quotes,
 * $( ), backticks, ;, # and % read back by bash and by sbatch's own parser
 * exactly as they are, the scripts and submit.sh run with stand-ins for
 * se3screen and sbatch; --submit and the printed hint running no command
 * from a path.
 * tests/slurm/test_slurm.sh runs them on a real Slurm. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/error.h"
#include "pipeline/store.h"
#include "tests/testutil.h"

/* The quickstart's data in dir, a workflow whose first lines are head
 * (name, workdir, slurm: block). */
static char *workflow_with(const char *dir, const char *head, const char *extra) {
  char yaml[4096];
  snprintf(yaml, sizeof yaml,
           "%s"
           "sets:\n  train:\n    - path: %s\n      labels_csv: {path: %s, join: name, columns: [u0_atom]}\n"
           "  library:\n    - {path: %s, labels: [logp]}\n"
           "stages:\n  ingest: {add_hydrogens: true, coordinates: input}\n  graph: {edges: bonds}\n"
           "  train: {ensemble: 1, target: u0_atom, model: small, epochs: 1}\n  score: {set: library}\n  rank: {top: 5}\n%s",
           head, tu_src("workflows/data/qm7_quick.sdf.gz"), tu_src("workflows/data/qm7_quick.csv"),
           tu_src("workflows/data/delaney_first60.csv"), extra);
  return tu_write(dir, "wf.yaml", yaml);
}

/* The same with a slurm: block. */
static char *workflow(const char *dir, const char *extra) {
  return workflow_with(dir,
                       "workflow: sl\nworkdir: wd\nrun: {progress: lines, chunk_size: 64}\n"
                       "slurm: {array_size: 5, partition: short, time: \"00:30:00\"}\n",
                       extra);
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

/* wd/screen.db holding an ingest plan of n_items records made at `updated`
 * (SQL: a time), as a run of the ingest stage leaves it. */
static void ingest_planned(const char *dir, long long n_items, const char *updated) {
  char wd[1100], db[1200];
  struct se3_error err = {0};
  snprintf(wd, sizeof wd, "%s/wd", dir);
  snprintf(db, sizeof db, "%s/screen.db", wd);
  mkdir(wd, 0755);
  struct store st;
  cr_assert_eq(store_open(&st, db, STORE_WRITE, "wal", 1000, &err), 0, "%s", se3_error_str(&err).s);
  char *sql =
      sqlite3_mprintf("INSERT OR REPLACE INTO stage_state(stage, config_hash, settings_hash, n_chunks, n_items, "
                      "updated) VALUES('ingest', 'h', 'h', (%lld + 63) / 64, %lld, %s)",
                      n_items, n_items, updated);
  cr_assert_eq(store_exec(st.db, sql, &err), 0, "%s", se3_error_str(&err).s);
  sqlite3_free(sql);
  store_close(&st);
}

/* An array has at most as many tasks as its stage can have chunks, where
 * screen.db knows it (issue 31: `--array-size 4` made four tasks for two
 * chunks without a word): the ingest's plan counts the records, and no
 * later stage has more molecules. A plan older than the workflow or its
 * inputs says nothing (they may have grown), nor does one of more chunks
 * than tasks. */
Test(slurm_scripts, arrays_capped_at_the_chunks_screen_db_knows) {
  char *dir = tu_tmpdir("slurm_capped"), *out = NULL;
  char *wf = workflow(dir, ""); /* array_size 5, chunk_size 64 */
  ingest_planned(dir, 100, "strftime('%Y-%m-%dT%H:%M:%SZ', 'now')");
  cr_assert_eq(tu_se3(&out, "slurm %s", wf), 0, "%s", out);
  const char *arrays[] = {"00-ingest.sbatch", "02-graph.sbatch", "05-score.sbatch"};
  for (int i = 0; i < 3; i++) {
    char *s = script(dir, arrays[i]);
    has(s, "#SBATCH --array=0-1\n", arrays[i]);
    has(s, "as an array of 2 tasks", arrays[i]);
    free(s);
    char said[256];
    snprintf(said, sizeof said, "%s: an array of 2 tasks, not 5 (slurm.array_size)", arrays[i]);
    has(out, said, "slurm's output");
  }
  has(out, "100 records", "slurm's output");
  free(out);
  /* the same plan made before the workflow was written: not known */
  ingest_planned(dir, 100, "'2000-01-01T00:00:00Z'");
  cr_assert_eq(tu_se3(&out, "slurm %s", wf), 0, "%s", out);
  char *s = script(dir, "02-graph.sbatch");
  has(s, "#SBATCH --array=0-4\n", "the graph array, the plan older than the workflow");
  free(s);
  cr_assert(!strstr(out, "not 5"), "capped by a plan older than the workflow:\n%s", out);
  free(out);
  /* more chunks than tasks: every task has work */
  ingest_planned(dir, 1000, "strftime('%Y-%m-%dT%H:%M:%SZ', 'now')");
  cr_assert_eq(tu_se3(&out, "slurm %s", wf), 0, "%s", out);
  s = script(dir, "02-graph.sbatch");
  has(s, "#SBATCH --array=0-4\n", "the graph array of 16 chunks");
  free(s);
  cr_assert(!strstr(out, "not 5"), "%s", out);
  free(out);
  free(wf);
  free(dir);
}

/* Active learning (stages.acquire): the cycle's steps once a round, each
 * round decided by a step of its own (`run --stage acquire --round R`)
 * between them; a chain too long for `slurm` is refused. An array stage
 * with one chunk is one job without a merge (a task 0 of 1 writes screen.db
 * itself, and the merge after it found no shard and failed the chain). */
Test(slurm_scripts, active_learning_rounds_chained) {
  char *dir = tu_tmpdir("slurm_active"), *out = NULL;
  char yaml[2048];
  snprintf(yaml, sizeof yaml,
           "workflow: al\nworkdir: wd\nrun: {progress: lines, chunk_size: 64}\nslurm: {array_size: 2}\n"
           "sets:\n  library:\n    - path: %s\n"
           "stages:\n  ingest: {}\n  acquire: {initial: 12, batch: 8, rounds: 2}\n"
           "  dock: {oracle: table, table: %s}\n  graph: {cutoff: 5.0}\n"
           "  train: {ensemble: 1, set: library, target: dock, epochs: 1}\n  score: {set: library}\n  rank: {top: 5}\n",
           tu_src("tests/data/active/library.csv"), tu_src("tests/data/active/scores.csv"));
  char *wf = tu_write(dir, "wf.yaml", yaml);
  cr_assert_eq(tu_se3(&out, "slurm %s", wf), 0, "%s", out);
  const char *want[] = {"00-ingest.sbatch",         "01-merge-ingest.sbatch", "02-acquire-r0.sbatch",
                        "03-r0-dock.sbatch",        "04-r0-merge-dock.sbatch", "05-r0-graph.sbatch",
                        "06-r0-merge-graph.sbatch", "07-r0-train.sbatch",      "08-r0-score.sbatch",
                        "09-r0-merge-score.sbatch", "10-acquire-r1.sbatch",    "11-r1-dock.sbatch"};
  for (size_t i = 0; i < sizeof want / sizeof *want; i++) has(out, want[i], "slurm's output");
  has(out, "wrote 27 steps", "slurm's output"); /* 2 + 3 x (1 + 7) + rank */
  has(out, "18-acquire-r2.sbatch", "slurm's output");
  has(out, "26-rank.sbatch", "slurm's output");
  static const struct {
    const char *file, *what;
  } wants[] = {
      {"10-acquire-r1.sbatch", "--stage acquire --round 1\n"},
      {"10-acquire-r1.sbatch", "round 1 decided"},
      {"10-acquire-r1.sbatch", "--job-name=se3-al-acquire-r1\n"},
      {"02-acquire-r0.sbatch", "--stage acquire --round 0\n"},
      {"12-r1-merge-dock.sbatch", "--job-name=se3-al-merge-dock-r1\n"},
      {"12-r1-merge-dock.sbatch", "Active learning's round 1"},
      {"submit.sh", "steps=(00-ingest.sbatch 01-merge-ingest.sbatch 02-acquire-r0.sbatch 03-r0-dock.sbatch"},
  };
  for (size_t i = 0; i < sizeof wants / sizeof *wants; i++) {
    char *t = script(dir, wants[i].file);
    has(t, wants[i].what, wants[i].file);
    free(t);
  }
  char *s = script(dir, "26-rank.sbatch");
  cr_assert(!strstr(s, "--round"), "rank decides no round:\n%s", s);
  free(s);
  free(out);
  /* the library known to be one chunk: its arrays are single jobs */
  ingest_planned(dir, 60, "strftime('%Y-%m-%dT%H:%M:%SZ', 'now')");
  cr_assert_eq(tu_se3(&out, "slurm %s", wf), 0, "%s", out);
  has(out, "wrote 17 steps", "slurm's output"); /* 1 + 3 x (1 + 4) + rank */
  has(out, "00-ingest.sbatch: one job, not an array of 2 (slurm.array_size): the stage has at most 1 chunk",
      "slurm's output");
  cr_assert(!strstr(out, "merge"), "a stage of one chunk got a merge:\n%s", out);
  s = script(dir, "02-r0-dock.sbatch");
  cr_assert(!strstr(s, "--array") && !strstr(s, "--shard"), "a one-chunk stage is an array:\n%s", s);
  free(s);
  free(out);
  /* too many rounds for a chain */
  cr_assert_eq(tu_se3(&out, "slurm %s --set stages.acquire.rounds=200", wf), 2, "%s", out);
  has(out, "would chain more than 511 steps (stages.acquire.rounds is 200)", "slurm's refusal");
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

/* Chunks of the ingest: done (committed) and planned. */
struct chunks_at {
  const char *db;
  long long done, total;
};

/* The state a stop is meant for, asked while se3screen is frozen: a chunk
 * committed and two or more left. A locked or not yet created database is
 * "not yet" (no wait for a lock that the frozen process holds). */
static int ingest_with_work_left(void *p) {
  struct chunks_at *c = p;
  char *t = tu_query_wait(c->db,
                          "SELECT (SELECT count(*) FROM stage_chunks WHERE stage='ingest'), "
                          "(SELECT n_chunks FROM stage_state WHERE stage='ingest')",
                          0);
  long long done = -1, total = -1;
  if (!t || sscanf(t, "%lld|%lld", &done, &total) != 2) done = total = -1;
  free(t);
  if (done < 1 || total < 0) return 0;
  c->done = done;
  c->total = total;
  return total - done >= 2 ? 1 : -1;
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
  /* Into the ingest, with work left: the script's se3screen is frozen when
   * it has committed a chunk (past start-up, its handlers in place) and two
   * or more are left (the chunk in flight ends, the next one sees the
   * signal). The USR1 goes to the script, which is not frozen: its trap
   * forwards it to se3screen, where it waits, pending, until the thaw. It
   * used to be sent once the first chunk was polled, with nothing to show
   * that work remained: a fast machine could have finished the stage. */
  char db[1200];
  snprintf(db, sizeof db, "%s/wd/screen.db", dir); /* (task 0 of 1: the database itself) */
  int se3 = tu_child_named(pid, "se3screen", 120);
  if (se3 < 0) {
    kill(pid, SIGKILL);
    int st = tu_wait(pid);
    cr_assert_fail("the script (exit %d) was not seen running se3screen in 120 s (see %s)", st, log);
  }
  struct chunks_at at = {db, 0, 0};
  int frozen = tu_freeze_in_state(&se3, 1, 120, ingest_with_work_left, &at);
  if (frozen != 1) {
    kill(se3, SIGKILL);
    kill(pid, SIGKILL);
    int st = tu_wait(pid);
    cr_assert_fail("the script's se3screen was not seen inside the ingest with two chunks left (%s; exit %d; "
                   "%lld of %lld chunks done; see %s)",
                   frozen == 0    ? "it ended first"
                   : frozen == -1 ? "too few were left when first seen: the workload is too small for this machine"
                                  : "not in 120 s",
                   st, at.done, at.total, log);
  }
  cr_log_info("USR1 sent with %lld of %lld chunks done", at.done, at.total);
  kill(pid, SIGUSR1);
  double t0 = tu_now();
  while (!tu_signal_pending(se3, SIGUSR1)) {
    if (tu_now() - t0 > 120) {
      kill(se3, SIGKILL);
      tu_thaw(se3);
      kill(pid, SIGKILL);
      tu_wait(pid);
      cr_assert_fail("the script did not forward USR1 to its se3screen in 120 s (see %s)", log);
    }
    tu_sleep(0.005);
  }
  tu_thaw(se3);
  int st = tu_wait(pid);
  char *text = tu_read(log, NULL);
  cr_assert_eq(st, 75, "the script ended with %d, not 75:\n%s", st, text ? text : "");
  has(text, "stopped before finishing, requeued 3 times already", "the script's log");
  long long done = tu_query_int(db, "SELECT count(*) FROM stage_chunks WHERE stage = 'ingest'"),
            planned = tu_query_int(db, "SELECT n_chunks FROM stage_state WHERE stage = 'ingest'");
  cr_log_info("stopped with %lld of %lld chunks done", done, planned);
  cr_assert(done >= at.done && done < planned,
            "%lld of %lld chunks done (%lld when signalled): the signal did not stop the stage mid-way", done, planned,
            at.done);
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

/* ---- hostile names and paths (issue 30, defect 1) --------------------------------------------- */

/* s as one sh word, in single quotes (malloc'd). */
static char *sq(const char *s) {
  size_t n = 3;
  for (const char *c = s; *c; c++)
    n += *c == '\'' ? 4 : 1;
  char *q = malloc(n), *o = q;
  cr_assert(q);
  *o++ = '\'';
  for (; *s; s++)
    if (*s == '\'')
      o = stpcpy(o, "'\\''");
    else
      *o++ = *s;
  *o++ = '\'';
  *o = 0;
  return q;
}

/* Whether a file named PWNED exists anywhere under dir or in the current folder. */
static int pwned(const char *dir) {
  char *qd = sq(dir), *out = NULL;
  tu_sh(&out, "find %s -name PWNED; ls PWNED 2>/dev/null", qd);
  int found = out && strstr(out, "PWNED") != NULL;
  free(out);
  free(qd);
  return found;
}

/* The arguments sbatch reads from a script's #SBATCH lines, each after a
 * newline, the last one followed by one (malloc'd), split the way Slurm's
 * sbatch splits them (src/sbatch/opt.c): the lines from the top up to the
 * first that is not a comment; in each, after "#SBATCH", whitespace
 * separates arguments, ' and " quote, a backslash takes the next character
 * as it is, and an unquoted # ends the line; a line that holds "hetjob" or
 * "packjob" anywhere starts another job component (an error here). */
static char *sbatch_args(const char *script, const char *where) {
  char *args = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&args, &len);
  cr_assert(m);
  fputc('\n', m);
  for (const char *line = script; *line;) {
    const char *end = strchr(line, '\n');
    if (!end) end = line + strlen(line);
    const char *c = line;
    while (c < end && (*c == ' ' || *c == '\t'))
      c++;
    if (c < end && *c != '#') break; /* a command: Slurm reads no further */
    if (!strncmp(line, "#SBATCH", 7)) {
      char *copy = strndup(line, (size_t)(end - line));
      cr_assert(copy);
      cr_assert(!strcasestr(copy, "hetjob") && !strcasestr(copy, "packjob"),
                "%s: Slurm would split the job at this line: %s", where, copy);
      free(copy);
      c = line + 7;
      for (;;) {
        while (c < end && (*c == ' ' || *c == '\t' || *c == '\r' || *c == '\v' || *c == '\f'))
          c++;
        if (c >= end || *c == '#') break;
        char q = 0;
        int esc = 0;
        for (; c < end && (q || !(*c == ' ' || *c == '\t' || *c == '\r' || *c == '\v' || *c == '\f')); c++) {
          if (esc) {
            esc = 0;
          } else if (*c == '\\') {
            esc = 1;
            continue;
          } else if (q) {
            if (*c == q) {
              q = 0;
              continue;
            }
          } else if (*c == '"' || *c == '\'') {
            q = *c;
            continue;
          } else if (*c == '#') {
            break;
          }
          fputc(*c, m);
        }
        fputc('\n', m);
        if (c < end && *c == '#' && !q) break;
      }
    }
    line = *end ? end + 1 : end;
  }
  cr_assert_eq(fclose(m), 0);
  return args;
}

/* s with every % doubled (Slurm's filename patterns read %% as %). */
static char *pct_doubled(const char *s) {
  char *out = malloc(2 * strlen(s) + 1), *o = out;
  cr_assert(out);
  for (; *s; s++) {
    if (*s == '%') *o++ = '%';
    *o++ = *s;
  }
  *o = 0;
  return out;
}

/* The stand-ins in dir/bin: sbatch, which records its working folder and
 * arguments in bin/sbatch.log and answers as sbatch --parsable does (job
 * ids 1, 2, ...; FAKE_SBATCH_FAIL_AT=N: the N-th submission fails), and,
 * with se3 set, se3screen, which records its arguments in bin/se3screen.log
 * (the scripts run the se3screen that wrote them: a copy there). Returns
 * the folder (malloc'd). */
static char *fake_bin(const char *dir) {
  char *bin = NULL, *out = NULL;
  cr_assert(asprintf(&bin, "%s/bin", dir) > 0);
  cr_assert_eq(tu_sh(&out, "mkdir -p '%s'", bin), 0, "%s", out);
  free(out);
  char *p = tu_write(bin, "sbatch",
                     "#!/bin/bash\n"
                     "n=$(( $(cat \"$0.n\" 2>/dev/null || echo 0) + 1 ))\n"
                     "echo \"$n\" >\"$0.n\"\n"
                     "{ printf 'cwd=%s\\n' \"$PWD\"; printf 'arg=%s\\n' \"$@\"; echo end; } >>\"$0.log\"\n"
                     "if [ \"$n\" -ge \"${FAKE_SBATCH_FAIL_AT:-999999}\" ]; then\n"
                     "  echo 'sbatch: error: Batch job submission failed' >&2; exit 1\n"
                     "fi\n"
                     "case \" $* \" in *' --parsable '*) echo \"$n\" ;; *) echo \"Submitted batch job $n\" ;; esac\n");
  cr_assert(p);
  cr_assert_eq(chmod(p, 0755), 0);
  free(p);
  return bin;
}

/* Replaces the copy of se3screen in bin with a stand-in that records its arguments. */
static void fake_se3(const char *bin) {
  char path[1200];
  snprintf(path, sizeof path, "%s/se3screen", bin);
  unlink(path);
  char *p = tu_write(bin, "se3screen", "#!/bin/bash\n{ printf 'arg=%s\\n' \"$@\"; echo end; } >>\"$0.log\"\n");
  cr_assert(p);
  cr_assert_eq(chmod(p, 0755), 0);
  free(p);
}

static const char *const all_steps[] = {"00-ingest.sbatch",      "01-merge-ingest.sbatch", "02-graph.sbatch",
                                        "03-merge-graph.sbatch", "04-train.sbatch",        "05-score.sbatch",
                                        "06-merge-score.sbatch", "07-rank.sbatch"};

/* The scripts that `bin/se3screen slurm` wrote into WD/slurm for the
 * workflow wf (its real path) named name, where se3screen got the extra
 * word `set` (NULL: none): every script is valid bash; its #SBATCH lines
 * read back, as Slurm reads them, as exactly the options meant (the job's
 * name and its log under WD, whatever they hold); run, each script runs
 * se3screen with exactly WD and wf as arguments, and submit.sh submits every
 * step from WD/slurm, all without running anything the names hold. */
static void check_hostile_scripts(const char *dir, const char *bin, const char *wd, const char *wf, const char *name,
                                  const char *set) {
  fake_se3(bin);
  char sdir[2048], path[2300], *out = NULL, *expect = NULL;
  size_t elen = 0;
  snprintf(sdir, sizeof sdir, "%s/slurm", wd);
  FILE *e = open_memstream(&expect, &elen);
  cr_assert(e);
  for (int k = 0; k < 8; k++) {
    const char *f = all_steps[k];
    int merge = strstr(f, "-merge-") != NULL, array = !merge && (k == 0 || k == 2 || k == 5);
    char stage[32];
    snprintf(stage, sizeof stage, "%s", f + (merge ? 9 : 3));
    *strchr(stage, '.') = 0;
    snprintf(path, sizeof path, "%s/%s", sdir, f);
    char *qp = sq(path);
    cr_assert_eq(tu_sh(&out, "bash -n %s", qp), 0, "%s: %s", f, out);
    free(out);
    /* the #SBATCH lines as Slurm reads them */
    char *text = tu_read(path, NULL);
    cr_assert(text, "%s was not written", path);
    char *args = sbatch_args(text, f), *want = NULL, *logs = NULL;
    for (char *a = args + 1; *a; a = strchr(a, '\n') + 1)
      cr_assert(!strncmp(a, "--", 2), "%s: Slurm reads an argument that is no option:\n%s\nin\n%s", f, a, text);
    cr_assert(asprintf(&want, "\n--job-name=se3-%s-%s%s\n", name, merge ? "merge-" : "", stage) > 0);
    cr_assert(strstr(args, want), "%s: Slurm reads no%s in:%s\nfrom\n%s", f, want, args, text);
    free(want);
    char logpath[2400];
    snprintf(logpath, sizeof logpath, "%s/logs/%s", sdir, f);
    logs = pct_doubled(logpath);
    cr_assert(asprintf(&want, "\n--output=%s-%s\n", logs, array ? "%A_%a.log" : "%j.log") > 0);
    cr_assert(strstr(args, want), "%s: Slurm reads no%s in:%s\nfrom\n%s", f, want, args, text);
    free(want);
    free(logs);
    free(args);
    free(text);
    /* run by hand: se3screen gets the paths as they are */
    cr_assert_eq(
        tu_sh(&out, "cd '%s' && SLURM_ARRAY_TASK_ID=0 SLURM_ARRAY_TASK_COUNT=1 SLURM_JOB_ID=7 bash %s", dir, qp), 0,
        "%s: %s", f, out);
    free(out);
    free(qp);
    if (merge) {
      fprintf(e, "arg=merge\narg=%s/screen.db\nend\n", wd);
    } else {
      fprintf(e, "arg=run\narg=%s\narg=--stage\narg=%s\n", wf, stage);
      if (set) fprintf(e, "arg=--set\narg=%s\n", set);
      fprintf(e, "%send\n", array ? "arg=--shard\narg=0/1\n" : "");
    }
  }
  cr_assert_eq(fclose(e), 0);
  snprintf(path, sizeof path, "%s/se3screen.log", bin);
  char *got = tu_read(path, NULL);
  cr_assert(got && !strcmp(got, expect), "the scripts ran se3screen with\n%s\nnot\n%s", got ? got : "(nothing)",
            expect);
  free(got);
  free(expect);
  /* submit.sh, run from elsewhere, with sbatch first in PATH */
  snprintf(path, sizeof path, "%s/submit.sh", sdir);
  char *qp = sq(path);
  cr_assert_eq(tu_sh(&out, "bash -n %s", qp), 0, "submit.sh: %s", out);
  free(out);
  cr_assert_eq(tu_sh(&out, "cd '%s' && PATH='%s':\"$PATH\" bash %s", dir, bin, qp), 0, "submit.sh: %s", out);
  free(qp);
  has(out, "submitted 07-rank.sbatch as job 8 (after job 7)", "submit.sh's output");
  free(out);
  e = open_memstream(&expect, &elen);
  cr_assert(e);
  for (int k = 0; k < 8; k++) {
    fprintf(e, "cwd=%s\narg=--parsable\narg=--kill-on-invalid-dep=yes\n", sdir);
    if (k) fprintf(e, "arg=--dependency=afterok:%d\n", k);
    fprintf(e, "arg=%s\nend\n", all_steps[k]);
  }
  cr_assert_eq(fclose(e), 0);
  snprintf(path, sizeof path, "%s/sbatch.log", bin);
  got = tu_read(path, NULL);
  cr_assert(got && !strcmp(got, expect), "submit.sh ran sbatch with\n%s\nnot\n%s", got ? got : "(nothing)", expect);
  free(got);
  free(expect);
  snprintf(path, sizeof path, "%s/jobs.tsv", sdir);
  got = tu_read(path, NULL);
  cr_assert(got && strstr(got, "\t07-rank.sbatch\t8\n"), "jobs.tsv: %s", got ? got : "(not written)");
  free(got);
  cr_assert(!pwned(dir), "a command inside a name or path was run");
}

/* A newline (or another control character: CR, tab, DEL, ...) in the
 * workflow's name, its workdir or a slurm: value would end a comment or
 * #SBATCH line of the scripts and start a command: `check` refuses it at
 * its key's line and column, and so does `slurm` before it writes anything;
 * as an option (--partition, --set: YAML, where "\n" is a newline) it is
 * refused by name. (A raw newline in an option's value is folded into a
 * space by YAML, as in a file: the scripts then carry it as one value.) */
Test(slurm_scripts, control_characters_are_refused_at_check) {
  char *dir = tu_tmpdir("slurm_controls");
  static const struct {
    const char *head, *says;
  } cases[] = {
      {"workflow: \"nl\\ntouch PWNED\\n\"\nworkdir: wd\n", "wf.yaml:1:1: workflow: "},
      {"workflow: sl\nworkdir: \"wd\\ntouch PWNED\"\n", "wf.yaml:2:1: workdir: "},
      {"workflow: sl\nworkdir: wd\nslurm:\n  partition: \"short\\ntouch PWNED\"\n", "wf.yaml:4:3: slurm.partition: "},
      {"workflow: sl\nworkdir: wd\nslurm:\n  account: \"chem\\ntouch PWNED\"\n", "wf.yaml:4:3: slurm.account: "},
      {"workflow: sl\nworkdir: wd\nslurm:\n  time: \"00:30:00\\ntouch PWNED\"\n", "wf.yaml:4:3: slurm.time: "},
      {"workflow: sl\nworkdir: wd\nslurm:\n  mem: \"8G\\rtouch PWNED\"\n", "wf.yaml:4:3: slurm.mem: "},
      {"workflow: sl\nworkdir: wd\nslurm:\n  extra: \"--qos=long\\t--hold\"\n", "wf.yaml:4:3: slurm.extra: "},
      {"workflow: sl\nworkdir: wd\nslurm:\n  account: \"chem\\x7f\"\n", "wf.yaml:4:3: slurm.account: "},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char *wf = workflow_with(dir, cases[i].head, ""), *out = NULL;
    int st = tu_se3(&out, "check %s", wf);
    cr_assert_eq(st, 2, "check accepted\n%s(exit %d):\n%s", cases[i].head, st, out);
    has(out, cases[i].says, "check's message");
    has(out, "control character", "check's message");
    free(out);
    st = tu_sh(&out, "cd '%s' && '%s' slurm %s", dir, SE3_BINARY, wf);
    cr_assert_eq(st, 2, "slurm accepted\n%s(exit %d):\n%s", cases[i].head, st, out);
    has(out, cases[i].says, "slurm's message");
    free(out);
    char sub[1200];
    snprintf(sub, sizeof sub, "%s/wd/slurm", dir);
    cr_assert_neq(access(sub, F_OK), 0, "slurm wrote %s for\n%s", sub, cases[i].head);
    free(wf);
  }
  /* the options */
  char *wf = workflow(dir, ""), *out = NULL, *v = sq("\"short\\ntouch PWNED\"");
  int st = tu_sh(&out, "cd '%s' && '%s' slurm %s --partition %s", dir, SE3_BINARY, wf, v);
  cr_assert_eq(st, 2, "slurm --partition with a newline: exit %d:\n%s", st, out);
  has(out, "--set slurm.partition=", "slurm's message");
  has(out, "control character", "slurm's message");
  free(out);
  free(v);
  v = sq("workdir=\"wd\\ntouch PWNED\"");
  st = tu_sh(&out, "cd '%s' && '%s' slurm %s --set %s", dir, SE3_BINARY, wf, v);
  cr_assert_eq(st, 2, "slurm --set workdir= with a newline: exit %d:\n%s", st, out);
  has(out, "--set workdir=", "slurm's message");
  has(out, "control character", "slurm's message");
  free(out);
  free(v);
  v = sq("short\ntouch PWNED\r\ntouch PWNED");
  st = tu_sh(&out, "cd '%s' && '%s' slurm %s --partition %s", dir, SE3_BINARY, wf, v);
  free(v);
  if (st == 0)
    for (int i = 0; i < 8; i++) {
      char *text = script(dir, all_steps[i]);
      cr_assert(!strstr(text, "\ntouch PWNED"), "%s starts a line with the option's text:\n%s", all_steps[i], text);
      free(text);
    }
  else
    cr_assert_eq(st, 2, "slurm --partition with a raw newline: exit %d:\n%s", st, out);
  free(out);
  cr_assert(!pwned(dir), "a command inside a value was run");
  free(wf);
  free(dir);
}

/* What validation cannot see: the folder of the workflow file, into which a
 * relative workdir resolves, holds a newline; or the workdir holds a
 * backslash, which Slurm's --output cannot express (a backslash there turns
 * off its %j patterns). `slurm` refuses both, naming the workdir, and
 * writes no script. */
Test(slurm_scripts, unwritable_workdirs_are_refused_by_slurm) {
  char *dir = tu_tmpdir("slurm_unwritable"), *out = NULL;
  char loc[1200];
  snprintf(loc, sizeof loc, "%s/loc\ntouch PWNED", dir);
  cr_assert_eq(mkdir(loc, 0755), 0);
  char *wf = workflow_with(loc, "workflow: sl\nworkdir: wd\n", ""), *qwf = sq(wf);
  int st = tu_sh(&out, "cd '%s' && '%s' slurm %s", dir, SE3_BINARY, qwf);
  cr_assert_eq(st, 2, "slurm wrote scripts for a workdir with a newline (exit %d):\n%s", st, out);
  has(out, "workdir", "slurm's message");
  has(out, "control character", "slurm's message");
  free(out);
  char sub[1300];
  snprintf(sub, sizeof sub, "%s/wd/slurm/00-ingest.sbatch", loc);
  cr_assert_neq(access(sub, F_OK), 0, "slurm wrote %s", sub);
  free(qwf);
  free(wf);
  wf = workflow(dir, "");
  char *v = NULL;
  cr_assert(asprintf(&v, "'workdir=%s/back\\slash'", dir) > 0);
  st = tu_sh(&out, "cd '%s' && '%s' slurm %s --set %s", dir, SE3_BINARY, wf, v);
  cr_assert_eq(st, 2, "slurm wrote scripts for a workdir with a backslash (exit %d):\n%s", st, out);
  has(out, "backslash", "slurm's message");
  free(out);
  free(v);
  snprintf(sub, sizeof sub, "%s/back\\slash/slurm/00-ingest.sbatch", dir);
  cr_assert_neq(access(sub, F_OK), 0, "slurm wrote %s", sub);
  cr_assert(!pwned(dir), "a command inside a path was run");
  free(wf);
  free(dir);
}

/* Names and paths that hold quotes, $( ), backticks, ;, #, % and spaces:
 * the workflow's folder and name and its workdir from the file, then a
 * workdir given on the command line. (The # follows no space: a --set
 * value is YAML, where " #" starts a comment.) */
#define HOSTILE "w'd $(touch PWNED) `touch PWNED`; x#5 %j \"q\" 'z"
#define HOSTILE_YAML "w'd $(touch PWNED) `touch PWNED`; x#5 %j \\\"q\\\" 'z"

Test(slurm_scripts, hostile_names_and_paths_are_quoted) {
  char *dir = tu_tmpdir("slurm_hostile"), *out = NULL;
  char *bin = fake_bin(dir);
  /* 1: from the workflow file, itself in such a folder */
  char loc[1200], real[4096], wd[4200];
  snprintf(loc, sizeof loc, "%s/%s", dir, HOSTILE);
  cr_assert_eq(mkdir(loc, 0755), 0);
  char *wf = workflow_with(loc,
                           "workflow: \"it's $(touch PWNED) `x`; \\\"q\\\" #1 %j\"\nworkdir: \"" HOSTILE_YAML "\"\n"
                           "slurm: {partition: short}\n",
                           ""),
       *qwf = sq(wf);
  cr_assert_eq(
      tu_sh(&out, "cp '%s' '%s/se3screen' && cd '%s' && '%s/se3screen' slurm %s", SE3_BINARY, bin, dir, bin, qwf), 0,
      "%s", out);
  free(out);
  /* the workdir, relative in the file: beside it */
  cr_assert(realpath(wf, real));
  snprintf(wd, sizeof wd, "%.*s/%s", (int)(strrchr(real, '/') - real), real, HOSTILE);
  check_hostile_scripts(dir, bin, wd, real, "it's $(touch PWNED) `x`; \"q\" #1 %j", NULL);
  free(qwf);
  free(wf);
  /* 2: a workdir given on the command line */
  wf = workflow(dir, "");
  qwf = sq(wf);
  char set[4300], *qset;
  snprintf(wd, sizeof wd, "%s/cli %s", dir, HOSTILE);
  snprintf(set, sizeof set, "workdir=%s", wd);
  qset = sq(set);
  cr_assert_eq(tu_sh(&out,
                     "rm -f '%s'/*.log '%s'/*.n && cp '%s' '%s/se3screen' && cd '%s' && '%s/se3screen' slurm %s "
                     "--set %s",
                     bin, bin, SE3_BINARY, bin, dir, bin, qwf, qset),
               0, "%s", out);
  free(out);
  cr_assert(realpath(wf, real));
  check_hostile_scripts(dir, bin, wd, real, "sl", set);
  free(qset);
  free(qwf);
  free(wf);
  free(bin);
  free(dir);
}

/* --submit runs submit.sh through bash with the path as one argument (no
 * shell between), so a workdir such as HOSTILE runs nothing and every step
 * is submitted; its exit status is reported. The hint printed without
 * --submit, pasted into a shell, does the same. */
Test(slurm_scripts, submit_runs_no_command_from_the_path) {
  char *dir = tu_tmpdir("slurm_submit"), *out = NULL;
  char *bin = fake_bin(dir), *wf = workflow(dir, ""), *qwf = sq(wf);
  char wd[1400], set[1500], sdir[1500], path[1600];
  snprintf(wd, sizeof wd, "%s/%s", dir, HOSTILE);
  snprintf(set, sizeof set, "workdir=%s", wd);
  snprintf(sdir, sizeof sdir, "%s/slurm", wd);
  char *qset = sq(set);
  int st =
      tu_sh(&out, "cd '%s' && PATH='%s':\"$PATH\" '%s' slurm %s --set %s --submit", dir, bin, SE3_BINARY, qwf, qset);
  cr_assert(!pwned(dir), "slurm --submit ran a command from the workdir's path (exit %d):\n%s", st, out);
  cr_assert_eq(st, 0, "slurm --submit: exit %d:\n%s", st, out);
  has(out, "submitted 00-ingest.sbatch as job 1\n", "slurm --submit");
  has(out, "submitted 07-rank.sbatch as job 8 (after job 7)\n", "slurm --submit");
  free(out);
  snprintf(path, sizeof path, "%s/sbatch.log", bin);
  char *log = tu_read(path, NULL), *want = NULL;
  cr_assert(
      asprintf(&want, "cwd=%s\narg=--parsable\narg=--kill-on-invalid-dep=yes\narg=00-ingest.sbatch\nend\n", sdir) > 0);
  cr_assert(log && !strncmp(log, want, strlen(want)), "sbatch ran with\n%s\nnot\n%s...", log ? log : "(nothing)", want);
  free(want);
  free(log);
  /* the third step refused: the status, and where the steps submitted are listed */
  st = tu_sh(
      &out,
      "cd '%s' && rm -f bin/sbatch.n && FAKE_SBATCH_FAIL_AT=3 PATH='%s':\"$PATH\" '%s' slurm %s --set %s --submit", dir,
      bin, SE3_BINARY, qwf, qset);
  cr_assert_eq(st, 1, "slurm --submit with sbatch failing: exit %d:\n%s", st, out);
  has(out, "exited with status 1", "slurm --submit with sbatch failing");
  has(out, "jobs.tsv", "slurm --submit with sbatch failing");
  free(out);
  /* the hint, as a shell reads it */
  cr_assert_eq(tu_se3(&out, "slurm %s --set %s", qwf, qset), 0, "%s", out);
  char *hint = strstr(out, "submit them with: ");
  cr_assert(hint, "no hint in:\n%s", out);
  hint += strlen("submit them with: ");
  char *stop = strstr(hint, "   (or:");
  cr_assert(stop, "%s", out);
  *stop = 0;
  char *file = tu_write(dir, "hint.sh", hint), *out2 = NULL;
  st = tu_sh(&out2, "cd '%s' && PATH='%s':\"$PATH\" sh hint.sh", dir, bin);
  cr_assert_eq(st, 0, "the hint `%s` failed:\n%s", hint, out2);
  cr_assert(!pwned(dir), "the hint `%s` ran a command from the path:\n%s", hint, out2);
  has(out2, "submitted 07-rank.sbatch as job", "the hint");
  free(out2);
  free(file);
  free(out);
  free(qset);
  free(qwf);
  free(wf);
  free(bin);
  free(dir);
}
