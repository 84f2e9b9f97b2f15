/* check.c — what a workflow asks for: the stages `run` runs, named
 * (run_stage_names; which it skips and the last it runs are
 * runner_util.c's, the runner's leaf, which asks them too), the stage that
 * cycles, and `se3screen check` (the configuration resolved and printed,
 * the inputs' headers against what the stages read from them). check.c
 * calls down into runner_util.c, never the other way. */
#include <stdio.h>
#include <string.h>

#include "pipeline/config.h"
#include "pipeline/runner_internal.h"
#include "stages/check_inputs.h"
#include "stages/stage.h"

struct cfg_node *runner_config(const char *workflow, const char *const *sets, int n_sets) {
  return run_load_config(workflow, sets, n_sets, NULL, "*");
}

const char *runner_cycling_stage(const struct cfg_node *root) {
  for (int i = 0; i < N_STAGES; i++)
    if (run_all_stages[i]->cycle.end && !run_stage_skipped(root, run_all_stages[i])) return run_all_stages[i]->name;
  return NULL;
}

const char *runner_cycle_end(const char *stage) {
  int i = stage ? run_stage_index(stage) : -1;
  return i >= 0 ? run_all_stages[i]->cycle.end : NULL;
}

int runner_stage_flags(const char *stage) {
  int i = stage ? run_stage_index(stage) : -1;
  return i >= 0 ? run_all_stages[i]->flags : 0;
}

int runner_stage_collective(const char *stage) {
  int i = stage ? run_stage_index(stage) : -1;
  return i >= 0 && run_all_stages[i]->serve != NULL;
}

int runner_stages(const struct cfg_node *root, const char *names[], int max) {
  int last = run_last_configured(root, 0, N_STAGES - 1), n = 0;
  for (int i = 0; i <= last && n < max; i++)
    if (!run_stage_skipped(root, run_all_stages[i])) names[n++] = run_all_stages[i]->name;
  return n;
}

/* The inputs' headers against what the workflow reads from them (column
 * names, SD tags, the target among the labels: stages/check_inputs.h), for
 * the stages named in `stages`: each problem, and each warning (a molecule
 * file in two sets), on stderr. SE3_EXIT_USAGE when
 * there was one: a mistake found in milliseconds, not after hours of ingest. */
static void print_problem(void *arg, const char *msg) {
  (void)arg;
  fprintf(stderr, "%s\n", msg);
}
int run_check_input_files(const struct cfg_node *root, const char *stages, const char *workflow) {
  int bad = check_inputs_warn(root, stages, print_problem, print_problem, NULL);
  if (bad > 1) fprintf(stderr, "%d problems in %s; nothing was run\n", bad, workflow);
  return bad ? SE3_EXIT_USAGE : SE3_EXIT_OK;
}

void run_stage_names(const struct cfg_node *root, int first, int last, int named, char *names, size_t size) {
  names[0] = 0;
  for (int i = first; i <= last; i++) {
    if (run_stage_skipped(root, run_all_stages[i]) && !(named && i == first)) continue;
    size_t used = strlen(names);
    snprintf(names + used, size - used, "%s%s", used ? " " : "", run_all_stages[i]->name);
  }
}

/* One pass (issue 70): a schema error used to hide the inputs' problems
 * (a label column missing, a set that is not there), which showed only
 * once it was put right. Now the loader hands on its tree with stand-ins
 * for what it refused, and the inputs are checked on the rest of it. */
struct cfg_node *run_load_one_pass(const char *workflow, const char *const *sets, int n_sets, const char *workdir,
                                   const char *inputs, const char *stages, int first, int last, int named,
                                   int no_inputs) {
  struct cfg_errors errs = {0};
  struct cfg_node *root = run_load_partial(workflow, sets, n_sets, workdir, inputs, no_inputs, &errs);
  if (!errs.n) return root;
  run_print_errors(&errs);
  int bad = 0;
  if (root) {
    char names[256];
    if (!stages) {
      run_stage_names(root, first, named ? last : run_last_configured(root, first, last), named, names, sizeof names);
      stages = names;
    }
    bad = no_inputs ? check_inputs_unread(root, stages, print_problem, NULL)
                    : check_inputs_warn(root, stages, print_problem, print_problem, NULL);
  }
  if (errs.n + bad > 1)
    fprintf(stderr, "%d problems in %s%s\n", errs.n + bad, workflow, no_inputs ? "" : "; nothing was run");
  cfg_errors_free(&errs);
  cfg_node_free(root);
  return NULL;
}

int runner_check(const char *workflow, const char *const *sets, int n_sets, int no_inputs) {
  struct cfg_node *root =
      run_load_one_pass(workflow, sets, n_sets, NULL, no_inputs ? NULL : "*", "*", 0, 0, 0, no_inputs);
  if (!root) return SE3_EXIT_USAGE;
  int bad =
      no_inputs ? check_inputs_unread(root, "*", print_problem, NULL) : run_check_input_files(root, "*", workflow);
  if (no_inputs && bad > 1) fprintf(stderr, "%d problems in %s\n", bad, workflow);
  if (bad) {
    cfg_node_free(root);
    return SE3_EXIT_USAGE;
  }
  cfg_print(stdout, root);
  cfg_node_free(root);
  return SE3_EXIT_OK;
}
