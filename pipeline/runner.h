/* runner.h — run a workflow's stages: ledger, chunks, signals, shards, merge.
 *
 * Exit codes (also of the se3screen command): */
#ifndef SE3_RUNNER_H
#define SE3_RUNNER_H

#include "common/error.h"

/* The one table of result codes (common/error.h, docs/commands.md). */
#define SE3_EXIT_OK SE3_RC_OK
#define SE3_EXIT_FAILED SE3_RC_FAILED   /* the run failed; the message says why */
#define SE3_EXIT_USAGE SE3_RC_USAGE     /* bad command line or configuration */
#define SE3_EXIT_STOPPED SE3_RC_STOPPED /* stopped by a signal; run again to resume */

struct sigaction;

/* The signals that stop se3screen with SE3_EXIT_STOPPED: SIGINT, SIGTERM
 * and SIGUSR1 (Slurm's --signal). */
enum { SE3_N_STOP_SIGNALS = 3 };
extern const int se3_stop_signals[SE3_N_STOP_SIGNALS];
/* Installs fn (with sa_flags flags) for each of them; the actions they had
 * go to old unless it is NULL. */
void se3_on_stop_signals(void (*fn)(int), int flags, struct sigaction *old);

struct se3_comm;

struct run_opts {
  const char *workflow;          /* the YAML file */
  const char *const *sets;       /* --set overrides */
  int n_sets;
  const char *stage;             /* --stage: only this one */
  const char *until;             /* --until: up to and including this one */
  const char *workdir;           /* --workdir override */
  int shard, n_shards;           /* --shard i/n; n_shards 0 = not given */
  const char *command_line;      /* recorded in runs */
  const struct se3_comm *comm;   /* the processes of a data-parallel run (common/comm.h);
                                    NULL: this one alone */
  int dry_run;                   /* --dry-run: runner_dry_run */
  int round_given;               /* --round N (with --stage acquire): decide round N of */
  long long round;               /* active learning, once the round before is done (slurm's steps) */
};

/* `run`. In a data-parallel run every process calls it: rank 0 runs the
 * workflow, the others take their part in its collective stages (train)
 * and return rank 0's exit status. */
int runner_run(const struct run_opts *o);
/* `run --dry-run`: what `run` with these options would do now, stage by
 * stage, and why, on stdout; writes nothing (the database is opened
 * read-only). */
int runner_dry_run(const struct run_opts *o);
/* `upgrade`: the database at target (a workdir or a file) of an earlier
 * se3screen converted in place to this one's schema, each stage keeping
 * what it can (pipeline/upgrade.c); workflow NULL: the one its last run
 * recorded, with that run's --set overrides. */
int runner_upgrade(const char *target, const char *workflow, const char *const *sets, int n_sets);
/* `check`: validate and print the resolved configuration. no_inputs
 * (`check --no-inputs`, for workflows in documentation): the schema and the
 * rules between keys only; input files need not exist and none is read
 * (cfg_load_no_inputs, check_inputs_unread). */
int runner_check(const char *workflow, const char *const *sets, int n_sets, int no_inputs);
/* `status`: per stage chunks done/total, molecules accepted/rejected, config changes, last error. */
int runner_status(const char *workflow_or_db, const char *const *sets, int n_sets);
/* `merge`: fold WORKDIR/shards/<stage>-<i>.db into the database: only the
 * shards of this workdir's workflow (screen.db's, or for a screen.db made by
 * merges alone the first shard's) made with the workflow as it is now
 * (configuration, input files' contents, the upstream results screen.db
 * holds). The others are refused by name with the reason, nothing of them
 * merged and nothing deleted, and merge then exits SE3_EXIT_FAILED after
 * folding the rest. A shard of the current workflow replaces a stage that
 * screen.db holds from before a change (and discards the stages after it,
 * as `run` does). */
int runner_merge(const char *db_path);

struct cfg_node;
/* The workflow's configuration with the --set overrides, every input
 * checked (`check`'s); NULL with the problems printed. Free with
 * cfg_node_free. */
struct cfg_node *runner_config(const char *workflow, const char *const *sets, int n_sets);
/* The stages `run` runs for this configuration, in order (up to the last
 * one the workflow configures, optional ones only where configured): their
 * names into names (at most max); returns the count. */
int runner_stages(const struct cfg_node *root, const char *names[], int max);
/* The stage of this workflow that runs again at the end of a cycle
 * (stage.h's struct stage_cycle: acquire, active learning's rounds), or NULL. */
const char *runner_cycling_stage(const struct cfg_node *root);
/* The stage after which `stage` runs again (its cycle.end: score for
 * acquire), or NULL. */
const char *runner_cycle_end(const char *stage);
/* What the stage of that name declares (stages/stage.h: STAGE_*), for the
 * commands that plan around the stages without running them (`slurm`); 0
 * for no such stage. Whether it is collective (struct stage's serve): its
 * processes share one job. */
int runner_stage_flags(const char *stage);
int runner_stage_collective(const char *stage);

#endif
