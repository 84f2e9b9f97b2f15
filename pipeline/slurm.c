/* slurm.c — `se3screen slurm` (slurm.h). */
#define _GNU_SOURCE
#include "pipeline/slurm.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "common/cfgtree.h"
#include "common/fsutil.h"
#include "common/atomic_file.h"
#include "pipeline/runner.h"
#include "pipeline/ledger.h"
#include "pipeline/config.h"
#include "stages/stage.h"

enum step_kind { STEP_ARRAY, STEP_MERGE, STEP_COLLECTIVE, STEP_SINGLE };

struct step {
  enum step_kind kind;
  const char *stage; /* the stage it runs (merges, for STEP_MERGE) */
  int round;         /* active learning: the round whose molecules the step works on (its stages
                        from dock to score), or the round it decides (acquire); -1: none */
  char file[64];     /* NN-name.sbatch, NN-rR-name.sbatch, NN-acquire-rR.sbatch */
};

/* (a workflow that goes round has its cycle's steps once a round) */
#define MAX_STEPS 512

/* The stages whose chunks an array's tasks share out (STAGE_ARRAY; the
 * others run as one job). */
static int chunked(const char *stage) { return (runner_stage_flags(stage) & STAGE_ARRAY) != 0; }

/* s as one bash word, in single quotes: inside them bash takes every byte
 * as it is but the closing quote, so a quote is written '\'' (close, an
 * escaped quote, open again). Any string comes through, newlines included. */
static void put_quoted(FILE *f, const char *s) {
  fputc('\'', f);
  for (; *s; s++)
    if (*s == '\'')
      fputs("'\\''", f);
    else
      fputc(*s, f);
  fputc('\'', f);
}

/* ---- what the scripts may hold ----------------------------------------------
 *
 * A script has three kinds of line that carry the workflow's values: shell
 * words (SE3=, WORKFLOW=, the merge's path, the --set words), written by
 * put_quoted whatever they hold; comments ("# ... workflow NAME ..."), which
 * bash ends at the first newline; and #SBATCH lines, which bash ignores and
 * sbatch reads itself (Slurm's opt.c): whitespace separates arguments, ' and
 * " quote, a backslash takes the next character as it is, an unquoted # ends
 * the line, "hetjob" or "packjob" anywhere in the line starts another job
 * component, and the first line that is not a comment ends the options. So a
 * control character (a newline, CR, tab, ... any byte below 0x20, or DEL)
 * in a value written into a comment or an #SBATCH line would start a
 * command: validation refuses them in every string and path of the
 * configuration (config_validate.c), and the generator refuses them again
 * here, for what validation does not see (a relative workdir resolved
 * against the workflow file's folder) or in case it is bypassed. */

/* The first control character of s (a byte below 0x20, or DEL), or NULL. */
static const char *control_char(const char *s) {
  for (; *s; s++)
    if ((unsigned char)*s < 0x20 || *s == 0x7f) return s;
  return NULL;
}

/* s as one argument of an #SBATCH line: as it is where sbatch would read it
 * so (the common case: short, --qos=long), else in double quotes with " and
 * \ escaped by a backslash. s holds no control character (checked first). */
static void put_sbatch(FILE *f, const char *s) {
  if (!s[strcspn(s, " \"'\\#")]) {
    fputs(s, f);
    return;
  }
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') fputc('\\', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

/* "#SBATCH --output=" the log file path, then pattern (Slurm's %j, %A, %a
 * placeholders): Slurm reads %% in it as one %, so every % of path is
 * doubled; a backslash would turn the placeholders off and cannot be
 * written (refused first). 0, or -1 out of memory. */
static int put_output(FILE *f, const char *path, const char *pattern) {
  char *word = malloc(2 * strlen(path) + strlen(pattern) + 1), *o = word;
  if (!word) return -1;
  for (const char *c = path; *c; c++) {
    if (*c == '%') *o++ = '%';
    *o++ = *c;
  }
  strcpy(o, pattern);
  fputs("#SBATCH --output=", f);
  put_sbatch(f, word);
  fputc('\n', f);
  free(word);
  return 0;
}

struct ctx {
  const struct slurm_opts *o;
  const struct cfg_node *root;
  char workflow[PATH_MAX], workdir[PATH_MAX], dir[PATH_MAX + 16], se3[PATH_MAX];
  const char *name; /* the workflow's name */
  struct step steps[MAX_STEPS];
  int n;
  const char *cycling; /* the stage that decides active learning's rounds (acquire), or NULL */
  int rounds;          /* its rounds after round 0 */
  int first_round_step; /* the first step of a round (c->n: none) */
  long long records;    /* the ingest's plan in screen.db: records; -1 when not known */
};

/* The slurm: values written into #SBATCH lines as they are. */
static const char *const sbatch_keys[] = {"slurm.time", "slurm.mem", "slurm.partition", "slurm.account"};

/* 0 where what goes into a comment or an #SBATCH line can be written there
 * (see above), else -1 with a message naming the value. */
static int check_value(const char *what, const char *v, int sbatch) {
  const char *bad = control_char(v);
  if (bad) {
    fprintf(stderr,
            "se3screen slurm: %s holds a control character (byte 0x%02x at character %d), which would end a line of "
            "the scripts and start a command; rename it\n",
            what, (unsigned char)*bad, (int)(bad - v) + 1);
    return -1;
  }
  if (sbatch && (strcasestr(v, "hetjob") || strcasestr(v, "packjob"))) {
    fprintf(stderr,
            "se3screen slurm: %s holds \"hetjob\" or \"packjob\", which sbatch reads in an #SBATCH line as the start "
            "of another job component: '%s'\n",
            what, v);
    return -1;
  }
  return 0;
}

/* Every value the scripts carry outside shell quotes, checked before any is
 * written. 0, or -1 with a message. */
static int check_values(const struct ctx *c) {
  const struct cfg_node *r = c->root;
  if (check_value("the workflow's name (workflow:)", c->name, 1) ||
      check_value("the workdir (workdir:, resolved)", c->workdir, 1))
    return -1;
  if (strchr(c->workdir, '\\')) {
    fprintf(stderr,
            "se3screen slurm: the workdir holds a backslash, which Slurm cannot take in a job's log path (#SBATCH "
            "--output: a backslash there turns off its %%j patterns): %s\n",
            c->workdir);
    return -1;
  }
  for (size_t i = 0; i < sizeof sbatch_keys / sizeof *sbatch_keys; i++) {
    const char *v = cfg_str_opt(r, sbatch_keys[i]);
    if (v && check_value(sbatch_keys[i], v, 1)) return -1;
  }
  const char *extra = cfg_str_opt(r, "slurm.extra");
  if (extra) {
    if (check_value("slurm.extra", extra, 1)) return -1;
    /* each word becomes an #SBATCH line of its own: an option */
    for (const char *w = extra + strspn(extra, " "); *w; w += strcspn(w, " "), w += strspn(w, " "))
      if (*w != '-') {
        fprintf(stderr,
                "se3screen slurm: slurm.extra: every word must be an sbatch option (-x or --name=VALUE), "
                "got '%.*s'\n",
                (int)strcspn(w, " "), w);
        return -1;
      }
  }
  return 0;
}

/* "#SBATCH OPTION=VALUE", the value as sbatch must read it. */
static void put_option(FILE *f, const char *option, const char *value) {
  fprintf(f, "#SBATCH %s=", option);
  put_sbatch(f, value);
  fputc('\n', f);
}

/* The #SBATCH lines every script shares. */
static void common_header(FILE *f, const struct ctx *c, const struct step *s) {
  const struct cfg_node *r = c->root;
  const char *part = cfg_str_opt(r, "slurm.partition"), *acct = cfg_str_opt(r, "slurm.account"),
             *extra = cfg_str_opt(r, "slurm.extra");
  char name[PATH_MAX + 96];
  snprintf(name, sizeof name, "se3-%s-%s%s", c->name, s->kind == STEP_MERGE ? "merge-" : "", s->stage);
  if (s->round >= 0) snprintf(name + strlen(name), sizeof name - strlen(name), "-r%d", s->round);
  put_option(f, "--job-name", name);
  put_option(f, "--time", cfg_str(r, "slurm.time"));
  fprintf(f, "#SBATCH --signal=B:USR1@%lld\n", (long long)cfg_int(r, "slurm.signal_s"));
  fprintf(f, "#SBATCH --requeue\n#SBATCH --open-mode=append\n");
  put_option(f, "--mem", cfg_str(r, "slurm.mem"));
  if (part) put_option(f, "--partition", part);
  if (acct) put_option(f, "--account", acct);
  if (extra) { /* one line an option (each word checked by check_values) */
    char *copy = strdup(extra), *save = NULL;
    for (char *t = copy ? strtok_r(copy, " ", &save) : NULL; t; t = strtok_r(NULL, " ", &save)) {
      fputs("#SBATCH ", f);
      put_sbatch(f, t);
      fputc('\n', f);
    }
    free(copy);
  }
}

/* The shell function every script runs se3screen through. */
static const char step_function[] =
    "# Runs its arguments. Slurm's USR1 (slurm.signal_s before the time limit)\n"
    "# and TERM (preemption, scancel) make se3screen stop at its next chunk or\n"
    "# step with its finished work kept (exit 75); the job then requeues itself,\n"
    "# at most REQUEUES times, and the rerun goes on where this one stopped.\n"
    "step() {\n"
    "  \"$@\" &\n"
    "  local pid=$! rc\n"
    "  trap 'kill -USR1 $pid 2>/dev/null' USR1\n"
    "  trap 'kill -TERM $pid 2>/dev/null' TERM\n"
    "  while :; do\n"
    "    wait \"$pid\"; rc=$?\n"
    "    # a trapped signal ends `wait` early: wait again while it runs\n"
    "    if [ \"$rc\" -gt 128 ] && kill -0 \"$pid\" 2>/dev/null; then continue; fi\n"
    "    break\n"
    "  done\n"
    "  if [ \"$rc\" -eq 75 ] && [ \"${SLURM_RESTART_COUNT:-0}\" -lt \"$REQUEUES\" ]; then\n"
    "    echo \"$(date -u +%FT%TZ) se3screen slurm: stopped, its work kept; requeueing job $SLURM_JOB_ID\" \\\n"
    "         \"(restart $((${SLURM_RESTART_COUNT:-0} + 1)) of $REQUEUES)\" >&2\n"
    "    # Slurm ends this run and starts the job again\n"
    "    scontrol requeue \"$SLURM_JOB_ID\" && sleep 600\n"
    "    echo \"$(date -u +%FT%TZ) se3screen slurm: scontrol did not requeue job $SLURM_JOB_ID (if Slurm is\" \\\n"
    "         \"requeueing it already, nothing is lost; else: se3screen slurm --resume $WORKFLOW)\" >&2\n"
    "  elif [ \"$rc\" -eq 75 ]; then\n"
    "    echo \"$(date -u +%FT%TZ) se3screen slurm: stopped before finishing, requeued $REQUEUES times already:\" \\\n"
    "         \"raise slurm.time, then run: se3screen slurm --resume $WORKFLOW\" >&2\n"
    "  elif [ \"$rc\" -ne 0 ]; then\n"
    "    echo \"$(date -u +%FT%TZ) se3screen slurm: job $SLURM_JOB_ID failed with status $rc (its message is\" \\\n"
    "         \"above); the steps after it are cancelled. Fix the cause, then: se3screen slurm --resume $WORKFLOW\" >&2\n"
    "  fi\n"
    "  exit \"$rc\"\n"
    "}\n";

/* The round step s decides (an acquire step of active learning), or -1. */
static int decides(const struct ctx *c, const struct step *s) {
  return s->kind == STEP_SINGLE && c->cycling && !strcmp(s->stage, c->cycling) ? s->round : -1;
}

/* se3screen run WORKFLOW --stage S with the --set overrides, as bash words
 * (and --round R for a step that decides round R). */
static void run_words(FILE *f, const struct ctx *c, const char *stage, int round) {
  fputs("\"$SE3\" run \"$WORKFLOW\" --stage ", f);
  fputs(stage, f);
  if (round >= 0) fprintf(f, " --round %d", round);
  for (int i = 0; i < c->o->n_sets; i++) {
    if (!strncmp(c->o->sets[i], "slurm.", 6)) continue; /* (the scripts' own settings) */
    fputs(" --set ", f);
    put_quoted(f, c->o->sets[i]);
  }
}

/* Opens path for writing through the atomic writer (a temporary file beside
 * it, renamed over it at commit: an interrupted `slurm` leaves the old
 * script or the new one, never half of one). The scripts are run as `bash
 * FILE` and `sbatch FILE`, which need no execute bit, only the owner's
 * read: they keep the mode atomic_file gives (today 0666 less the umask
 * for a new file, as fopen gave; a rewritten script keeps its old mode).
 * 0, or -1 with a message. */
static int open_script(struct atomic_file *a, const char *path) {
  struct se3_error err;
  if (atomic_file_open(a, path, &err) == 0) return 0;
  fprintf(stderr, "se3screen slurm: %s\n", se3_error_str(&err).s);
  return -1;
}

static int commit_script(struct atomic_file *a) {
  struct se3_error err;
  if (atomic_file_commit(a, &err) == 0) return 0;
  fprintf(stderr, "se3screen slurm: %s\n", se3_error_str(&err).s);
  return -1;
}

/* ---- how many tasks an array needs ------------------------------------------
 *
 * An array task takes every N-th chunk of its stage (N tasks), so a task
 * beyond the stage's last chunk has nothing to do: slurm.array_size 4 for a
 * stage of two chunks queued two idle tasks, and said nothing. The chunks
 * are known only once the stage is planned, in its own job; what is known
 * here is the ingest's plan, where WORKDIR/screen.db has one (an earlier
 * run, or `run --stage ingest` before `slurm`): its records, of which each
 * later stage keeps at most as many molecules (one molecule a record, then
 * one graph, basis or score a molecule). So no array stage has more than
 * records / run.chunk_size chunks (rounded up), and an array is cut to that.
 * A task too many loses no work either way (the tasks still take every
 * chunk between them); a cut too deep would only queue fewer of them, so a
 * plan is trusted only when it is newer than every file it counted: the
 * workflow, its includes and the sets' input files (a glob, which may match
 * new files, makes it unknown). */

/* Latest modification time (s) of the files node n was read from and, with
 * inputs, of the path values below it; -1 where one cannot be read. */
static int newest_file(const struct cfg_node *n, int inputs, time_t *newest) {
  struct stat st;
  if (!n) return 0;
  if (n->file && n->file[0] != '<' && stat(n->file, &st) == 0 && st.st_mtime > *newest) *newest = st.st_mtime;
  if (inputs && n->kind == CFG_SCALAR && n->type == CFG_T_PATH && n->value) {
    if (strpbrk(n->value, "*?[") || stat(n->value, &st) != 0) return -1;
    if (st.st_mtime > *newest) *newest = st.st_mtime;
  }
  for (int i = 0; i < n->n_kids; i++)
    if (newest_file(n->kids[i], inputs, newest)) return -1;
  return 0;
}

/* c->records from WORKDIR/screen.db's plan of the stage that reads the
 * sets' files (STAGE_USES_SETS: its plan counts their records), or -1. */
static void known_chunks(struct ctx *c) {
  c->records = -1;
  char db[PATH_MAX + 16];
  snprintf(db, sizeof db, "%s/screen.db", c->workdir);
  if (access(db, R_OK) != 0) return;
  time_t newest = 0;
  if (newest_file(c->root, 0, &newest) || newest_file(cfg_get(c->root, "sets"), 1, &newest)) return;
  struct store h;
  if (ledger_open_ro(&h, db, c->root, NULL)) return;
  struct ledger_stage plan;
  if (ledger_read_stage(h.db, NULL, ledger_stage_with(STAGE_USES_SETS), &plan) > 0) {
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    const char *end = plan.updated[0] ? strptime(plan.updated, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
    /* (the store writes times to the second: a file of the same second counts as older) */
    if (end && timegm(&tm) >= newest) c->records = plan.n_items;
  }
  store_close(&h);
}

/* The chunk size of stage: its own chunk_size (dock's), else run.chunk_size. */
static long long chunk_size_of(const struct ctx *c, const char *stage) {
  char key[96];
  snprintf(key, sizeof key, "stages.%s.chunk_size", stage ? stage : "");
  /* (only dock has one, without a default: cfg_get, not a getter) */
  long long size = cfg_get(c->root, key) ? cfg_int(c->root, key) : 0;
  return size > 0 ? size : cfg_int(c->root, "run.chunk_size");
}

/* The most chunks stage can have: the ingest plan's records in chunks of
 * the stage's chunk size; -1 where not known. */
static long long stage_max_chunks(const struct ctx *c, const char *stage) {
  long long size = chunk_size_of(c, stage);
  if (c->records < 0 || size <= 0) return -1;
  return c->records > 0 ? (c->records + size - 1) / size : 1;
}

/* The tasks of stage's array: slurm.array_size, or fewer where no more
 * chunks can be. */
static long long array_tasks(const struct ctx *c, const char *stage) {
  long long tasks = cfg_int(c->root, "slurm.array_size"), most = stage_max_chunks(c, stage);
  return most > 0 && most < tasks ? most : tasks;
}

static int write_step(const struct ctx *c, int k) {
  const struct step *s = &c->steps[k];
  const struct cfg_node *r = c->root;
  char path[PATH_MAX + 96], logs[PATH_MAX + 160];
  snprintf(path, sizeof path, "%s/%s", c->dir, s->file);
  snprintf(logs, sizeof logs, "%s/logs/%s", c->dir, s->file);
  struct atomic_file a;
  if (open_script(&a, path)) return -1;
  FILE *f = a.f;
  long long tasks = array_tasks(c, s->stage), cap = cfg_int(r, "slurm.max_running"),
            cpus = cfg_int(r, "slurm.cpus_per_task"), gpus = cfg_int(r, "slurm.gpus_per_task"),
            nodes = cfg_int(r, "slurm.nodes"), per_node = cfg_int(r, "slurm.tasks_per_node");
  fprintf(f, "#!/bin/bash\n");
  switch (s->kind) {
  case STEP_ARRAY:
    fprintf(f,
            "# se3screen slurm, workflow %s, step %d: the %s stage as an array of %lld tasks;\n"
            "# task I takes every %lld-th chunk from chunk I into %s/shards/%s-I.db,\n"
            "# and the next step merges them into screen.db.\n",
            c->name, k, s->stage, tasks, tasks, c->workdir, s->stage);
    if (tasks < cfg_int(r, "slurm.array_size"))
      fprintf(f,
              "# (slurm.array_size is %lld: cut to %lld, the most chunks this stage can have,\n"
              "# as screen.db's ingest plan of %lld records at a chunk size of %lld says.)\n",
              (long long)cfg_int(r, "slurm.array_size"), tasks, c->records, chunk_size_of(c, s->stage));
    break;
  case STEP_MERGE:
    fprintf(f, "# se3screen slurm, workflow %s, step %d: the %s stage's shards merged into screen.db.\n", c->name,
            k, s->stage);
    break;
  case STEP_COLLECTIVE:
    fprintf(f, "# se3screen slurm, workflow %s, step %d: the %s stage on %lld process%s (%lld node%s).\n", c->name, k,
            s->stage, nodes * per_node, nodes * per_node > 1 ? "es" : "", nodes, nodes > 1 ? "s" : "");
    break;
  case STEP_SINGLE:
    if (decides(c, s) >= 0)
      fprintf(f,
              "# se3screen slurm, workflow %s, step %d: active learning's round %d decided (the %s\n"
              "# stage), %s.\n",
              c->name, k, s->round, s->stage,
              s->round == 0 ? "at random" : "by the model the steps before trained on every docking score so far");
    else
      fprintf(f, "# se3screen slurm, workflow %s, step %d: the %s stage.\n", c->name, k, s->stage);
    break;
  }
  if (s->round >= 0 && decides(c, s) < 0)
    fprintf(f, "# (Active learning's round %d: the molecules it picked, the model learning them.)\n", s->round);
  fprintf(f, "# Written by `se3screen slurm`, edit freely; submit.sh submits the steps in order.\n");
  common_header(f, c, s);
  if (s->kind == STEP_ARRAY) {
    fprintf(f, "#SBATCH --array=0-%lld", tasks - 1);
    if (cap > 0) fprintf(f, "%%%lld", cap);
    fputc('\n', f);
  }
  if (put_output(f, logs, s->kind == STEP_ARRAY ? "-%A_%a.log" : "-%j.log")) {
    atomic_file_abort(&a);
    fprintf(stderr, "se3screen slurm: out of memory writing %s\n", path);
    return -1;
  }
  if (s->kind == STEP_COLLECTIVE) {
    fprintf(f, "#SBATCH --nodes=%lld\n#SBATCH --ntasks-per-node=%lld\n#SBATCH --cpus-per-task=%lld\n", nodes, per_node,
            cpus);
  } else {
    fprintf(f, "#SBATCH --ntasks=1\n#SBATCH --cpus-per-task=%lld\n", s->kind == STEP_MERGE ? 1 : cpus);
  }
  if (gpus > 0 && s->kind != STEP_MERGE && (runner_stage_flags(s->stage) & STAGE_USES_MODEL))
    fprintf(f, "#SBATCH --gpus-per-task=%lld\n", gpus);
  fprintf(f, "\nset -u\nSE3=");
  put_quoted(f, c->se3);
  fprintf(f, "\nWORKFLOW=");
  put_quoted(f, c->workflow);
  fprintf(f, "\nREQUEUES=%lld\n", (long long)cfg_int(r, "slurm.requeues"));
  fprintf(f, "export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-1}\n\n%s\n", step_function);
  switch (s->kind) {
  case STEP_ARRAY:
    fputs("step ", f);
    run_words(f, c, s->stage, decides(c, s));
    fputs(" --shard \"$SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT\"\n", f);
    break;
  case STEP_MERGE:
    fputs("step \"$SE3\" merge ", f);
    put_quoted(f, c->workdir);
    fputs("/screen.db\n", f);
    break;
  case STEP_COLLECTIVE:
    /* one process: no launcher; several: srun starts them, PMIx joins them */
    fputs("if [ \"${SLURM_NTASKS:-1}\" -gt 1 ]; then\n  step srun --mpi=pmix ", f);
    run_words(f, c, s->stage, decides(c, s));
    fputs("\nelse\n  step ", f);
    run_words(f, c, s->stage, decides(c, s));
    fputs("\nfi\n", f);
    break;
  case STEP_SINGLE:
    fputs("step ", f);
    run_words(f, c, s->stage, decides(c, s));
    fputc('\n', f);
    break;
  }
  return commit_script(&a);
}

static int write_submit(const struct ctx *c) {
  char path[PATH_MAX + 48];
  snprintf(path, sizeof path, "%s/submit.sh", c->dir);
  struct atomic_file a;
  if (open_script(&a, path)) return -1;
  FILE *f = a.f;
  fprintf(f,
          "#!/bin/bash\n"
          "# Submits the steps of workflow %s from step FIRST (default 0) on, each\n"
          "# after the one before has succeeded (afterok); a step whose dependency\n"
          "# failed is cancelled, not left pending (--kill-on-invalid-dep). Every\n"
          "# submission is added to jobs.tsv. Written by `se3screen slurm`;\n"
          "# `se3screen slurm --resume` runs it from the first unfinished step.\n"
          "#   usage: bash submit.sh [FIRST]\n"
          "set -euo pipefail\n"
          "cd \"$(dirname \"$0\")\"\n"
          "steps=(",
          c->name);
  for (int k = 0; k < c->n; k++)
    fprintf(f, "%s%s", k ? " " : "", c->steps[k].file);
  fprintf(f, ")\n"
             "first=${1:-0}\n"
             "dep=\"\"\n"
             "for ((i = first; i < ${#steps[@]}; i++)); do\n"
             "  id=$(sbatch --parsable --kill-on-invalid-dep=yes ${dep:+--dependency=afterok:$dep} \"${steps[i]}\")\n"
             "  id=${id%%%%;*}\n"
             "  printf '%%s\\t%%s\\t%%s\\n' \"$(date -u +%%FT%%TZ)\" \"${steps[i]}\" \"$id\" >>jobs.tsv\n"
             "  echo \"submitted ${steps[i]} as job $id${dep:+ (after job $dep)}\"\n"
             "  dep=$id\n"
             "done\n");
  return commit_script(&a);
}

/* Whether stage `name` is finished in WORKDIR/screen.db (0 where there is
 * no database yet); with since (UTC, as the store writes times), also begun
 * no earlier than then (a stage's begin stamps `updated`, and unfinishes it
 * when it has work). */
static int stage_finished(const struct ctx *c, const char *name, const char *since) {
  char db[PATH_MAX + 16];
  snprintf(db, sizeof db, "%s/screen.db", c->workdir);
  if (access(db, R_OK) != 0) return 0;
  struct store h;
  if (ledger_open_ro(&h, db, c->root, NULL)) return 0;
  int done = ledger_finished_since(h.db, name, since);
  store_close(&h);
  return done;
}

/* Active learning's rounds decided in WORKDIR/screen.db (0 where none),
 * and, when there are some, when the last was (UTC) into last. */
static long long rounds_decided(const struct ctx *c, char *last, size_t n) {
  char db[PATH_MAX + 16];
  snprintf(db, sizeof db, "%s/screen.db", c->workdir);
  last[0] = 0;
  if (access(db, R_OK) != 0) return 0;
  struct store h;
  long long decided = 0;
  if (!ledger_open_ro(&h, db, c->root, NULL)) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(h.db, "SELECT count(*), max(decided) FROM rounds", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
      decided = sqlite3_column_int64(st, 0);
      if (sqlite3_column_text(st, 1)) snprintf(last, n, "%s", (const char *)sqlite3_column_text(st, 1));
    }
    sqlite3_finalize(st);
    store_close(&h);
  }
  return decided;
}

/* Whether step k's work is in screen.db, `decided` rounds being decided
 * there, the last at `last`. A step before active learning's cycle (or of
 * a workflow without one): its stage finished. A round's decision: the
 * round decided. A step of round r's cycle: round r + 1 decided; or round
 * r the last decided and the stage of this step or of a later one of the
 * round finished since (the steps run in order, and a stage with nothing
 * to do in a round, as graph when no molecule is new, leaves its state as
 * it was). A step after the cycle: every round decided and the same of
 * the steps after the cycle. */
static int step_done(const struct ctx *c, int k, long long decided, const char *last) {
  const struct step *s = &c->steps[k];
  if (!c->cycling || (s->round < 0 && k < c->first_round_step)) return stage_finished(c, s->stage, NULL);
  if (decides(c, s) >= 0) return decided > s->round;
  if (s->round >= 0 && decided > s->round + 1) return 1;
  if (decided != (s->round >= 0 ? s->round + 1 : c->rounds + 1) || !last[0]) return 0;
  for (int j = k; j < c->n && c->steps[j].round == s->round && decides(c, &c->steps[j]) < 0; j++)
    if (stage_finished(c, c->steps[j].stage, last)) return 1;
  return 0;
}

/* The job ids jobs.tsv lists that Slurm still holds (queued or running),
 * into busy (a line of ids, as many as fit); 0, 1 where there are some, -1
 * where squeue could not be asked. One squeue call for this user's jobs;
 * then every line of jobs.tsv, however many submissions it holds. */
static int jobs_alive(const struct ctx *c, char *busy, size_t n) {
  busy[0] = 0;
  char path[PATH_MAX + 48];
  snprintf(path, sizeof path, "%s/jobs.tsv", c->dir);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  /* the queue's ids, each as " ID " in one string */
  FILE *q = popen("squeue --me -h -o %F 2>/dev/null", "r");
  if (!q) {
    fclose(f);
    return -1;
  }
  char *queued = NULL, line[1024];
  size_t len = 0;
  FILE *mem = open_memstream(&queued, &len);
  while (mem && fgets(line, sizeof line, q)) {
    line[strcspn(line, "\r\n")] = 0;
    if (line[0]) fprintf(mem, " %s ", line);
  }
  int rc = pclose(q);
  if (!mem || fclose(mem) != 0 || rc == -1 || !WIFEXITED(rc) || WEXITSTATUS(rc) != 0) {
    free(queued);
    fclose(f);
    return -1;
  }
  int found = 0;
  while (fgets(line, sizeof line, f)) {
    char *id = strrchr(line, '\t'), key[1100];
    if (!id) continue;
    id[strcspn(id, "\r\n")] = 0;
    snprintf(key, sizeof key, " %s ", id + 1);
    if (!strstr(queued, key)) continue;
    found = 1;
    if (strlen(busy) + strlen(id + 1) + 2 < n) strcat(strcat(busy, " "), id + 1);
  }
  fclose(f);
  free(queued);
  return found;
}

/* Runs `bash SUBMIT FIRST` as a child with an argument vector, no shell
 * between: the path reaches bash as one argument whatever it holds (quotes,
 * $( ), backticks, spaces). While it runs, a Ctrl-C or Ctrl-\ is left to
 * it (as system() does), so that this process stays to say how it ended and
 * where the steps submitted so far are listed. 0 once it has exited 0; else
 * -1 with that message. */
static int run_submit(const struct ctx *c, const char *sub, int first) {
  char arg[24];
  snprintf(arg, sizeof arg, "%d", first);
  fflush(stdout);
  fflush(stderr);
  struct sigaction ign = {.sa_handler = SIG_IGN}, old_int, old_quit;
  sigemptyset(&ign.sa_mask);
  sigaction(SIGINT, &ign, &old_int);
  sigaction(SIGQUIT, &ign, &old_quit);
  pid_t pid = fork();
  if (pid == 0) {
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGQUIT, &old_quit, NULL);
    /* "--": a path that began with '-' would be read as bash's option */
    char *const argv[] = {"bash", "--", (char *)sub, arg, NULL};
    execvp("bash", argv);
    fprintf(stderr, "se3screen slurm: cannot run bash: %s\n", strerror(errno));
    _exit(127);
  }
  int fork_err = errno, st = 0;
  pid_t waited = -1;
  if (pid > 0)
    while ((waited = waitpid(pid, &st, 0)) < 0 && errno == EINTR)
      ;
  int wait_err = errno;
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGQUIT, &old_quit, NULL);
  if (pid < 0) {
    fprintf(stderr, "se3screen slurm: cannot start bash to run %s: %s\n", sub, strerror(fork_err));
    return -1;
  }
  if (waited < 0) {
    fprintf(stderr, "se3screen slurm: waiting for bash %s: %s\n", sub, strerror(wait_err));
    return -1;
  }
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return 0;
  if (WIFEXITED(st))
    fprintf(stderr, "se3screen slurm: submitting failed: bash %s exited with status %d (sbatch's message is above)",
            sub, WEXITSTATUS(st));
  else
    fprintf(stderr, "se3screen slurm: submitting failed: bash %s was killed by signal %d (%s)", sub,
            WIFSIGNALED(st) ? WTERMSIG(st) : 0, WIFSIGNALED(st) ? strsignal(WTERMSIG(st)) : "?");
  fprintf(stderr, "; the steps submitted so far are in %s/jobs.tsv\n", c->dir);
  return -1;
}

/* A step of stage (and its merge, for an array stage) into c->steps. An
 * array of one task would be one job that writes screen.db itself (task 0
 * of 1 is no shard), after which a merge finds no shard and fails the
 * chain: such a stage is one job, without a merge. */
static void add_stage(struct ctx *c, const char *stage, int round) {
  enum step_kind kind = chunked(stage) ? STEP_ARRAY : runner_stage_collective(stage) ? STEP_COLLECTIVE : STEP_SINGLE;
  if (kind == STEP_ARRAY && array_tasks(c, stage) <= 1) kind = STEP_SINGLE;
  if (c->n < MAX_STEPS) c->steps[c->n++] = (struct step){kind, stage, round, ""};
  if (kind == STEP_ARRAY && c->n < MAX_STEPS) c->steps[c->n++] = (struct step){STEP_MERGE, stage, round, ""};
}

/* The steps: a step a stage, an array stage's followed by its merge. A
 * workflow that goes round (stages.acquire: active learning) has the
 * stages of its cycle (dock to score) once a round, and between the rounds
 * the step that decides the next (`run --stage acquire --round R`, which
 * refuses to decide while a step of the round before is missing): the
 * runner's cycle, unrolled into the chain. 0, or -1 with a message. */
static int make_steps(struct ctx *c) {
  const char *names[16];
  int ns = runner_stages(c->root, names, 16), cyc = -1, cyc_end = -1;
  c->cycling = runner_cycling_stage(c->root);
  if (c->cycling) {
    char key[64];
    snprintf(key, sizeof key, "stages.%s.rounds", c->cycling);
    c->rounds = (int)cfg_int(c->root, key);
    const char *end = runner_cycle_end(c->cycling);
    for (int i = 0; i < ns; i++) {
      if (!strcmp(names[i], c->cycling)) cyc = i;
      if (end && !strcmp(names[i], end)) cyc_end = i;
    }
    if (cyc < 0 || cyc_end <= cyc) c->cycling = NULL; /* (the workflow ends before its cycle does) */
  }
  for (int i = 0; i < ns; i++) {
    if (!c->cycling || i < cyc) {
      add_stage(c, names[i], -1);
    } else if (i == cyc) {
      for (int r = 0; r <= c->rounds; r++) {
        add_stage(c, names[cyc], r); /* decides round r */
        for (int j = cyc + 1; j <= cyc_end; j++)
          add_stage(c, names[j], r);
      }
    } else if (i > cyc_end) {
      add_stage(c, names[i], -1);
    }
  }
  if (c->n >= MAX_STEPS) {
    fprintf(stderr,
            "se3screen slurm: workflow %s would chain more than %d steps (stages.%s.rounds is %d): run it as one job "
            "instead, sbatch --signal=B:USR1@120 --wrap \"exec se3screen run %s\" (it resumes where it stopped when "
            "submitted again), or in fewer rounds\n",
            c->name, MAX_STEPS - 1, c->cycling ? c->cycling : "?", c->rounds, c->o->workflow);
    return -1;
  }
  c->first_round_step = c->n;
  for (int k = c->n - 1; k >= 0; k--)
    if (c->steps[k].round >= 0) c->first_round_step = k;
  int width = c->n > 100 ? 3 : 2;
  for (int k = 0; k < c->n; k++) {
    struct step *s = &c->steps[k];
    const char *merge = s->kind == STEP_MERGE ? "merge-" : "";
    if (decides(c, s) >= 0)
      snprintf(s->file, sizeof s->file, "%0*d-%s-r%d.sbatch", width, k, s->stage, s->round);
    else if (s->round >= 0)
      snprintf(s->file, sizeof s->file, "%0*d-r%d-%s%s.sbatch", width, k, s->round, merge, s->stage);
    else
      snprintf(s->file, sizeof s->file, "%0*d-%s%s.sbatch", width, k, merge, s->stage);
  }
  return 0;
}

int slurm_run(const struct slurm_opts *o) {
  struct ctx c = {.o = o};
  struct cfg_node *root = runner_config(o->workflow, o->sets, o->n_sets);
  if (!root) return SE3_EXIT_USAGE;
  c.root = root;
  int ret = SE3_EXIT_FAILED;
  if (!realpath(o->workflow, c.workflow)) snprintf(c.workflow, sizeof c.workflow, "%s", o->workflow);
  snprintf(c.workdir, sizeof c.workdir, "%s", cfg_str(root, "workdir"));
  snprintf(c.dir, sizeof c.dir, "%s/slurm", c.workdir);
  c.name = cfg_str(root, "workflow");
  /* the program the jobs run: this executable, or in a relocatable bundle
   * (scripts/bundle.sh) its launcher, which sets the library path and Open
   * Babel's folders that the binary alone would lack in a job started later */
  const char *launcher = getenv("SE3_LAUNCHER");
  ssize_t len = -1;
  if (launcher && launcher[0] == '/' && access(launcher, X_OK) == 0 && strlen(launcher) < sizeof c.se3) {
    snprintf(c.se3, sizeof c.se3, "%s", launcher);
  } else {
    len = readlink("/proc/self/exe", c.se3, sizeof c.se3 - 1);
    c.se3[len > 0 ? len : 0] = 0;
    if (len <= 0) snprintf(c.se3, sizeof c.se3, "se3screen");
  }
  if (check_values(&c)) {
    ret = SE3_EXIT_USAGE;
    goto out;
  }

  known_chunks(&c);
  if (make_steps(&c)) {
    ret = SE3_EXIT_USAGE;
    goto out;
  }
  char logs[PATH_MAX + 32];
  snprintf(logs, sizeof logs, "%s/logs", c.dir);
  if (se3_mkdirs(logs) != 0) {
    fprintf(stderr, "se3screen slurm: cannot create %s: %s\n", logs, strerror(errno));
    goto out;
  }
  /* --resume keeps the scripts as they are (they may have been edited);
   * otherwise they are written anew */
  char sub[PATH_MAX + 48];
  snprintf(sub, sizeof sub, "%s/submit.sh", c.dir);
  int write = !o->resume || access(sub, R_OK) != 0;
  for (int k = 0; write && k < c.n; k++)
    if (write_step(&c, k)) goto out;
  if (write && write_submit(&c)) goto out;
  if (write) {
    printf("wrote %d steps for workflow %s into %s:\n", c.n, c.name, c.dir);
    long long size = cfg_int(root, "slurm.array_size");
    int arrays = 0;
    for (int k = 0; k < c.n; k++) {
      long long tasks = array_tasks(&c, c.steps[k].stage);
      arrays += c.steps[k].kind == STEP_ARRAY;
      printf("  %s", c.steps[k].file);
      if (c.steps[k].kind == STEP_SINGLE && chunked(c.steps[k].stage) && size > 1)
        printf(": one job, not an array of %lld (slurm.array_size): the stage has at most 1 chunk (screen.db's "
               "ingest plan: %lld records, a chunk size of %lld)",
               size, c.records, chunk_size_of(&c, c.steps[k].stage));
      else if (c.steps[k].kind == STEP_ARRAY && tasks < size)
        printf(": an array of %lld task%s, not %lld (slurm.array_size): the stage has at most %lld chunk%s "
               "(screen.db's ingest plan: %lld records, a chunk size of %lld)",
               tasks, tasks == 1 ? "" : "s", size, tasks, tasks == 1 ? "" : "s", c.records,
               chunk_size_of(&c, c.steps[k].stage));
      printf("\n");
    }
    if (c.records < 0 && size > 1 && arrays)
      printf("the stages' chunks are not known yet (no ingest plan in %s/screen.db newer than the workflow and "
             "its inputs): each array has slurm.array_size %lld tasks, and a task with no chunk has nothing to do\n",
             c.workdir, size);
  }

  int first = 0;
  if (o->resume) {
    char busy[1024];
    int alive = jobs_alive(&c, busy, sizeof busy);
    if (alive < 0) {
      fprintf(stderr, "se3screen slurm --resume: squeue could not be asked which jobs are still queued (is this a "
                      "Slurm login node?)\n");
      goto out;
    }
    if (alive > 0) {
      fprintf(stderr,
              "se3screen slurm --resume: jobs of this workflow are still queued or running:%s; wait for them, or "
              "scancel them, then resume\n",
              busy);
      goto out;
    }
    char last[64];
    long long decided = rounds_decided(&c, last, sizeof last);
    while (first < c.n && step_done(&c, first, decided, last))
      first++;
    if (first == c.n) {
      printf("every stage of workflow %s is finished in %s/screen.db: nothing to submit\n", c.name, c.workdir);
      ret = SE3_EXIT_OK;
      goto out;
    }
    printf("resuming workflow %s from step %s (the stages before it are finished)\n", c.name, c.steps[first].file);
  }
  if (o->submit || o->resume) {
    if (run_submit(&c, sub, first)) goto out;
  } else {
    /* as a shell reads it, pasted */
    fputs("submit them with: bash ", stdout);
    put_quoted(stdout, sub);
    fputs("   (or: se3screen slurm --submit ", stdout);
    put_quoted(stdout, o->workflow);
    fputs(")\n", stdout);
  }
  ret = SE3_EXIT_OK;
out:
  cfg_node_free(root);
  return ret;
}
