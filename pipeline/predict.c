/* predict.c — `se3screen predict`: a saved model over molecule files, as a
 * score-only workflow written into the workdir and run by the runner
 * (predict.h).
 *
 * Order of work: everything that can refuse the command (the model and the
 * inputs exist, the workdir is not another screen's, -o is a .csv or .sdf
 * file that is none of the run's files) is checked before predict.yaml is
 * written or any stage runs, so a mistake costs nothing. Then predict.yaml,
 * then the run, then -o: a copy of the rank stage's hits file, written
 * through a temporary file and renamed (so FILE is the old one or the new
 * one, never a torn one).
 *
 * It includes common/atomic_file.h and pipeline/run_files.h as export.c,
 * slurm.c and main.c do: they are the file utilities every command that
 * writes a file uses (no stage stands between), and run_files knows which
 * files a workdir's run reads and writes.
 */
#define _GNU_SOURCE
#include "pipeline/predict.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "common/fsutil.h"
#include "common/atomic_file.h"
#include "common/workdir.h"
#include "pipeline/run_files.h"
#include "pipeline/runner.h"
#include "pipeline/ledger.h"
#include "pipeline/config.h"
#include "stages/modelcard.h"

#define WHO "se3screen predict"
#define YAML_NAME "predict.yaml"
/* The first line of every predict.yaml: how predict knows a predict.yaml it
 * may rewrite from a file of the user's that it must not touch. */
#define YAML_HEAD "# se3screen predict: a score-only workflow"

/* SIGINT, SIGTERM, SIGUSR1 outside the run (while predict.yaml or -o is
 * written): remove the temporary file, exit 75 as a stopped run does. The
 * run itself installs its own handlers (finish the chunk, then 75). */
static void stop_now(int sig) {
  (void)sig;
  atomic_file_cleanup_on_signal();
  _exit(SE3_EXIT_STOPPED);
}

/* A refusal: the message on stderr, SE3_EXIT_USAGE (nothing was done). */
__attribute__((format(printf, 1, 2))) static int refuse(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, WHO ": ");
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  return SE3_EXIT_USAGE;
}

/* The last name of path without its compression suffix and its format's
 * extension. */
void predict_default_workdir(const char *input, char *out, size_t len) {
  const char *slash = strrchr(input, '/');
  char stem[NAME_MAX + 1];
  snprintf(stem, sizeof stem, "%s", slash ? slash + 1 : input);
  static const char *const packed[] = {".gz", ".bz2", ".xz", ".zst"};
  for (size_t i = 0; i < sizeof packed / sizeof *packed; i++) {
    size_t n = strlen(stem), k = strlen(packed[i]);
    if (n > k && !strcasecmp(stem + n - k, packed[i])) {
      stem[n - k] = 0;
      break;
    }
  }
  char *dot = strrchr(stem, '.');
  if (dot && dot != stem) *dot = 0; /* ".smi" alone keeps its name */
  snprintf(out, len, "predict-%s", stem[0] && strcmp(stem, ".") && strcmp(stem, "..") ? stem : "input");
}

/* "csv" or "sdf" for an -o name ending .csv or .sdf (any case), else NULL. */
static const char *out_kind(const char *out) {
  const char *dot = strrchr(out, '.');
  const char *slash = strrchr(out, '/');
  if (!dot || (slash && dot < slash) || dot == out || (slash && dot == slash + 1)) return NULL;
  if (!strcasecmp(dot, ".csv")) return "csv";
  if (!strcasecmp(dot, ".sdf")) return "sdf";
  return NULL;
}

/* 1 when s is valid UTF-8 without control characters other than tab: what a
 * YAML double-quoted scalar can hold byte for byte (libyaml refuses other
 * bytes, and an escape would name another file). */
static int yaml_safe(const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  while (*p) {
    unsigned c = *p;
    int more = c < 0x80 ? 0 : (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : (c & 0xF8) == 0xF0 ? 3 : -1;
    if (more < 0 || (c < 0x20 && c != '\t') || c == 0x7f || (c & 0xFE) == 0xC0) return 0;
    p++;
    for (int i = 0; i < more; i++, p++)
      if ((*p & 0xC0) != 0x80) return 0;
  }
  return 1;
}

/* s as a YAML double-quoted scalar: " and \ escaped, a tab as \t. */
static void yaml_quoted(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\')
      fputc('\\', f), fputc(*s, f);
    else if (*s == '\t')
      fputs("\\t", f);
    else
      fputc(*s, f);
  }
  fputc('"', f);
}

/* The workflow predict runs (predict.h shows its shape). Its bytes depend
 * only on what changes the results (the model, the inputs, the workdir,
 * --top), so the same command gives the same file. NULL out of memory. */
static char *workflow_text(const char *workdir, const char *model, char *const *inputs, int n, long long top) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (!f) return NULL;
  fprintf(f, YAML_HEAD " that `se3screen predict` wrote and rewrites\n"
                       "# (run again, the same command resumes; `se3screen run` on this file does the same).\n"
                       "# The model's card gives the featurisation (ingest, graph) and the ranking order.\n"
                       "workflow: predict\n"
                       "workdir: ");
  yaml_quoted(f, workdir);
  fputs("\nsets:\n  library:\n", f);
  for (int i = 0; i < n; i++) {
    fputs("    - {path: ", f);
    yaml_quoted(f, inputs[i]);
    fputs("}\n", f);
  }
  fputs("stages:\n  ingest: {}\n  graph: {}\n  score: {set: library, checkpoint: ", f);
  yaml_quoted(f, model);
  fprintf(f, "}\n  rank: {top: %lld, outputs: [hits.csv, hits.sdf]}\n", top);
  if (fclose(f)) {
    free(text);
    return NULL;
  }
  return text;
}

/* Reads a whole small file (NUL-terminated; *n its length). NULL with errno
 * set when it cannot. */
static char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len + 65536 + 1 > cap) {
      cap = (len + 65536 + 1) * 2;
      char *b = realloc(buf, cap);
      if (!b) {
        free(buf);
        fclose(f);
        errno = ENOMEM;
        return NULL;
      }
      buf = b;
    }
    size_t got = fread(buf + len, 1, cap - len - 1, f);
    len += got;
    if (got == 0) break;
  }
  int bad = ferror(f);
  fclose(f);
  if (bad) {
    free(buf);
    errno = EIO;
    return NULL;
  }
  buf[len] = 0;
  if (n) *n = len;
  return buf;
}

/* The workdir must hold no screen.db but predict's own: a workflow's
 * database with other molecules, models and ranks would be mixed with this
 * library (and its stages redone under another configuration). The
 * database's meta row `workflow` names the workflow file its runs ran; a
 * database without that row has had no run. A predict workdir that was
 * moved names a predict.yaml that is no longer there. 0 fine; else a
 * refusal's exit status, the message printed. */
static int workdir_is_ours(const char *workdir, const char *yaml) {
  char db[PATH_MAX + 16];
  snprintf(db, sizeof db, "%s/screen.db", workdir);
  struct stat sb;
  /* none, or an empty file (a run killed as it created the database) */
  if (stat(db, &sb) != 0 || (S_ISREG(sb.st_mode) && sb.st_size == 0)) return 0;
  struct store h;
  struct se3_error err;
  sqlite3_stmt *st = NULL;
  int rc = ledger_open_ro(&h, db, NULL, &err) ? SQLITE_CANTOPEN : SQLITE_OK;
  if (rc == SQLITE_OK)
    rc = sqlite3_prepare_v2(h.db, "SELECT value FROM meta WHERE key = 'workflow'", -1, &st, NULL);
  else if (!strcmp(err.file, db))
    err.file[0] = 0; /* (the file is named once) */
  int ret = 0;
  if (rc != SQLITE_OK) {
    ret = refuse("%s is not a result database of se3screen (%s): name another --workdir", db,
                 h.db ? sqlite3_errmsg(h.db) : se3_error_str(&err).s);
  } else if ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    const char *wf = (const char *)sqlite3_column_text(st, 0);
    const char *last = wf ? strrchr(wf, '/') : NULL;
    int moved = last && !strcmp(last + 1, YAML_NAME) && access(wf, F_OK) != 0;
    if (wf && !atomic_file_same(wf, yaml) && !moved) {
      fprintf(stderr,
              WHO ": %s holds the results of the workflow %s, not of a predict: name another --workdir "
                  "(predict does not mix its library into another screen)\n",
              db, wf);
      ret = SE3_EXIT_USAGE;
    }
  } else if (rc != SQLITE_DONE) {
    ret = refuse("%s cannot be read: %s", db, sqlite3_errmsg(h.db));
  }
  sqlite3_finalize(st);
  store_close(&h);
  return ret;
}

/* -o before any work: a .csv or .sdf name, a folder that exists, no
 * symbolic link, device or folder where the file goes, and none of the
 * files the command reads or the run writes. `keep` holds the inputs, the
 * model, predict.yaml and the workdir's hits files. 0 or a refusal's exit
 * status, the message printed. */
static int check_out(const char *out, const char *workdir, const struct atomic_file_keep *keep) {
  struct se3_error err;
  if (!out_kind(out)) return refuse("-o %s: the hits are written as .csv or .sdf: name a file ending in one", out);
  struct stat sb;
  if (lstat(out, &sb) == 0 && !S_ISREG(sb.st_mode))
    return refuse("-o %s is %s: name a regular file", out,
                  S_ISLNK(sb.st_mode)   ? "a symbolic link (predict replaces a file, never writes through a link)"
                  : S_ISDIR(sb.st_mode) ? "a folder"
                                        : "not a regular file");
  char *copy = strdup(out);
  if (!copy) return refuse("%s", "out of memory");
  char *slash = strrchr(copy, '/');
  const char *folder = slash ? (slash == copy ? "/" : (*slash = 0, copy)) : ".";
  if (stat(folder, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
    int rc = refuse("-o %s: its folder %s is not there", out, folder);
    free(copy);
    return rc;
  }
  free(copy);
  if (atomic_file_check_keep(keep, out, &err)) return refuse("-o %s", se3_error_str(&err).s);
  char db[PATH_MAX + 16];
  snprintf(db, sizeof db, "%s/screen.db", workdir);
  if (run_files_check_output(db, out, &err)) return refuse("-o %s", se3_error_str(&err).s);
  return 0;
}

/* Copies the workdir's hits file of out's kind to out, atomically. */
static int write_out(const char *workdir, const char *out) {
  char from[PATH_MAX + 16];
  struct se3_error err;
  snprintf(from, sizeof from, "%s/hits.%s", workdir, out_kind(out));
  size_t n = 0;
  char *data = slurp(from, &n);
  if (!data) {
    fprintf(stderr, WHO ": -o %s: cannot read %s: %s\n", out, from, strerror(errno));
    return SE3_EXIT_FAILED;
  }
  int bad = atomic_file_write(out, data, n, &err);
  free(data);
  if (bad) {
    fprintf(stderr, WHO ": -o %s\n", se3_error_str(&err).s);
    return SE3_EXIT_FAILED;
  }
  fprintf(stderr, WHO ": wrote %s (a copy of %s)\n", out, from);
  return SE3_EXIT_OK;
}

/* ---- the command, step by step ------------------------------------------- */

/* What predict_run's steps share, filled in as they go. */
struct predict_job {
  const struct predict_opts *o;
  char **inputs;                /* the inputs' real paths, in o->inputs' order */
  struct atomic_file_keep keep; /* the files -o must not replace */
  char model[PATH_MAX];         /* the model's real path */
  char dflt[NAME_MAX + 16];     /* the default workdir's name, when --workdir is not given */
  const char *wd;               /* --workdir as given, or dflt */
  char workdir[PATH_MAX];       /* wd, absolute (then as the system resolves it, once made) */
  char yaml[PATH_MAX + 16];     /* workdir/predict.yaml */
  char *old;                    /* predict.yaml as found (NULL: none) */
  char *text;                   /* predict.yaml as this command writes it */
  int made_workdir;             /* the workdir did not exist before this command */
};

/* The model: a checkpoint file or a folder holding a model's members
 * (a workdir, its models/). Whether the files are checkpoints and carry
 * a card, the run's configuration check says (stages.score.checkpoint).
 * Each step returns 0, or the exit status of its refusal or failure, the
 * message printed. */
static int check_model(struct predict_job *j) {
  struct se3_error err;
  struct stat sb;
  if (stat(j->o->model, &sb) != 0 || !realpath(j->o->model, j->model))
    return refuse("model %s: %s (a checkpoint file, a workdir or its models/ folder)", j->o->model, strerror(errno));
  char **members = NULL;
  int n_members = 0;
  if (model_card_members(j->model, &members, &n_members, &err)) return refuse("model %s", se3_error_str(&err).s);
  int kept = 0; /* its files, which -o must not replace */
  while (kept < n_members && !atomic_file_keep_add(&j->keep, members[kept]))
    kept++;
  model_card_members_free(members, n_members);
  if (kept < n_members) return refuse("%s", "out of memory");
  if (!yaml_safe(j->model))
    return refuse("model %s: a path that is not UTF-8 text without control characters cannot go into a "
                  "workflow: rename it or link it from a plain name",
                  j->model);
  return 0;
}

/* The inputs: files that exist, each named once, none the model. */
static int check_inputs(struct predict_job *j) {
  const struct predict_opts *o = j->o;
  struct stat sb;
  for (int i = 0; i < o->n_inputs; i++) {
    const char *in = o->inputs[i];
    if (stat(in, &sb) != 0 || !(j->inputs[i] = realpath(in, NULL))) return refuse("input %s: %s", in, strerror(errno));
    if (!S_ISREG(sb.st_mode))
      return refuse("input %s is %s: name a molecule file", in,
                    S_ISDIR(sb.st_mode) ? "a folder" : "not a regular file");
    if (!yaml_safe(j->inputs[i]))
      return refuse("input %s: a path that is not UTF-8 text without control characters cannot go into a "
                    "workflow: rename it or link it from a plain name",
                    j->inputs[i]);
    if (atomic_file_same(in, j->model))
      return refuse("input %s is the model %s: name the molecule files to score", in, o->model);
    for (int k = 0; k < i; k++)
      if (atomic_file_same(j->inputs[k], j->inputs[i]))
        return refuse("input %s is named twice (as %s): each file once", in, o->inputs[k]);
    if (atomic_file_keep_add(&j->keep, j->inputs[i])) return refuse("%s", "out of memory");
  }
  return 0;
}

/* The workdir, absolute in the workflow so that the file runs from
 * anywhere. It is made only once every check has passed (make_workdir):
 * a refused command leaves nothing behind. */
static int find_workdir(struct predict_job *j) {
  struct stat sb;
  j->wd = j->o->workdir;
  if (!j->wd) {
    predict_default_workdir(j->o->inputs[0], j->dflt, sizeof j->dflt);
    j->wd = j->dflt;
  }
  const char *wd = j->wd;
  if (stat(wd, &sb) == 0) {
    if (!S_ISDIR(sb.st_mode)) return refuse("--workdir %s is a file, not a folder", wd);
    if (!realpath(wd, j->workdir)) return refuse("--workdir %s: %s", wd, strerror(errno));
  } else if (wd[0] == '/') {
    snprintf(j->workdir, sizeof j->workdir, "%s", wd);
  } else {
    char cwd[PATH_MAX];
    errno = 0;
    if (!getcwd(cwd, sizeof cwd) || snprintf(j->workdir, sizeof j->workdir, "%s/%s", cwd, wd) >= (int)sizeof j->workdir)
      return refuse("--workdir %s: %s", wd, errno ? strerror(errno) : "path too long");
  }
  if (!yaml_safe(j->workdir))
    return refuse("--workdir %s: a path that is not UTF-8 text without control characters cannot go into a "
                  "workflow",
                  j->workdir);
  return 0;
}

/* What the workdir holds: no input inside it, no other screen's database,
 * and a predict.yaml, if any, that predict wrote (kept in j->old). */
static int check_workdir(struct predict_job *j) {
  struct se3_error err;
  snprintf(j->yaml, sizeof j->yaml, "%s/" YAML_NAME, j->workdir);
  for (int i = 0; i < j->o->n_inputs; i++)
    if (workdir_check_input(j->workdir, j->inputs[i], &err)) return refuse("input %s", se3_error_str(&err).s);
  int rc = workdir_is_ours(j->workdir, j->yaml);
  if (rc) return rc;
  size_t old_len = 0;
  j->old = slurp(j->yaml, &old_len);
  if (!j->old && errno != ENOENT) return refuse("%s: %s", j->yaml, strerror(errno));
  if (j->old && strncmp(j->old, YAML_HEAD, strlen(YAML_HEAD)))
    return refuse("%s exists and is not one that se3screen predict wrote: name another --workdir (it is left as it "
                  "is)",
                  j->yaml);
  return 0;
}

/* -o: every refusal now, before the work. It copies the rank stage's
 * file of its kind, which must then be one the run writes. */
static int check_out_early(struct predict_job *j) {
  const struct predict_opts *o = j->o;
  if (!o->out) return 0;
  for (int i = 0; i < o->n_sets; i++)
    if (!strncmp(o->sets[i], "rank.outputs", 12) || !strncmp(o->sets[i], "stages.rank.outputs", 19))
      return refuse("-o copies the hits the rank stage writes (hits.csv, hits.sdf): leave stages.rank.outputs as "
                    "predict sets it (--set %s)",
                    o->sets[i]);
  char hits[PATH_MAX + 16];
  static const char *const written[] = {"hits.csv", "hits.sdf", "report.html"};
  for (size_t i = 0; i < sizeof written / sizeof *written; i++) {
    snprintf(hits, sizeof hits, "%s/%s", j->workdir, written[i]);
    if (atomic_file_keep_add(&j->keep, hits)) return refuse("%s", "out of memory");
  }
  if (atomic_file_keep_add(&j->keep, j->yaml)) return refuse("%s", "out of memory");
  return check_out(o->out, j->workdir, &j->keep);
}

/* Every check passed: the workdir is made, and named as the system
 * resolves it (a folder given through a link or with .. in it). */
static int make_workdir(struct predict_job *j) {
  char made[PATH_MAX];
  j->made_workdir = access(j->workdir, F_OK) != 0;
  if (se3_mkdirs(j->workdir) != 0 || !realpath(j->workdir, made))
    return refuse("--workdir %s: cannot create it: %s", j->wd, strerror(errno));
  memcpy(j->workdir, made, sizeof j->workdir);
  snprintf(j->yaml, sizeof j->yaml, "%s/" YAML_NAME, j->workdir);
  return 0;
}

/* predict.yaml, rewritten only when it changes: the same command finds
 * the same workflow, and the runner's ledger resumes its work. */
static int write_workflow(struct predict_job *j) {
  struct se3_error err;
  j->text = workflow_text(j->workdir, j->model, j->inputs, j->o->n_inputs, j->o->top);
  if (!j->text) return refuse("%s", "out of memory");
  if (!j->old || strcmp(j->old, j->text)) {
    if (atomic_file_write(j->yaml, j->text, strlen(j->text), &err)) {
      fprintf(stderr, WHO ": %s\n", se3_error_str(&err).s);
      return SE3_EXIT_FAILED;
    }
  }
  fprintf(stderr, WHO ": %s %s in %s\n", j->old ? (strcmp(j->old, j->text) ? "rewrote" : "resuming") : "wrote",
          YAML_NAME, j->workdir);
  return 0;
}

/* The workflow refused (the model's card against a --set, say): what this
 * command wrote goes. A predict.yaml it made is removed, with the workdir
 * when this command made it and nothing else is in it; one it rewrote
 * gets its earlier text back, so the earlier command still resumes. */
static void undo_workflow(struct predict_job *j) {
  struct se3_error err;
  if (!j->old) {
    if (unlink(j->yaml) == 0) {
      if (j->made_workdir) rmdir(j->workdir); /* (only when empty) */
      fprintf(stderr, WHO ": removed %s: the workflow was refused\n", j->yaml);
    }
  } else if (j->text && strcmp(j->old, j->text) && atomic_file_write(j->yaml, j->old, strlen(j->old), &err) == 0) {
    fprintf(stderr, WHO ": %s as it was: the workflow was refused\n", j->yaml);
  }
}

/* The run: `se3screen run predict.yaml`, one process, every stage (a
 * Slurm array's task variables do not shard it); then -o's copy. */
static int run_workflow(struct predict_job *j) {
  const struct predict_opts *o = j->o;
  struct se3_error err;
  struct run_opts ro;
  memset(&ro, 0, sizeof ro);
  ro.workflow = j->yaml;
  ro.sets = o->sets;
  ro.n_sets = o->n_sets;
  ro.shard = 0;
  ro.n_shards = 1;
  ro.command_line = o->command_line;
  int rc = runner_run(&ro);
  se3_on_stop_signals(stop_now, 0, NULL);
  if (rc == SE3_EXIT_USAGE) undo_workflow(j); /* refused before any work: leave nothing of it */
  if (rc != SE3_EXIT_OK) return rc;

  if (o->out) {
    /* the database now lists the run's inputs too (run_files_list) */
    char db[PATH_MAX + 16];
    snprintf(db, sizeof db, "%s/screen.db", j->workdir);
    if (run_files_check_output(db, o->out, &err)) return refuse("-o %s", se3_error_str(&err).s);
    if ((rc = write_out(j->workdir, o->out))) return rc;
  }
  fprintf(stderr, WHO ": hits in %s/hits.csv and hits.sdf; `se3screen top %s` lists them\n", j->workdir, j->workdir);
  return SE3_EXIT_OK;
}

int predict_run(const struct predict_opts *o) {
  se3_on_stop_signals(stop_now, 0, NULL);
  struct predict_job j;
  memset(&j, 0, sizeof j);
  j.o = o;
  j.inputs = calloc((size_t)o->n_inputs + 1, sizeof *j.inputs);
  if (!j.inputs) return refuse("%s", "out of memory");
  /* every refusal first, so that a mistake costs nothing; then the work */
  int rc = check_model(&j);
  if (!rc) rc = check_inputs(&j);
  if (!rc) rc = find_workdir(&j);
  if (!rc) rc = check_workdir(&j);
  if (!rc) rc = check_out_early(&j);
  if (!rc) rc = make_workdir(&j);
  if (!rc) rc = write_workflow(&j);
  if (!rc) rc = run_workflow(&j);
  for (int i = 0; i < o->n_inputs; i++)
    free(j.inputs[i]);
  free(j.inputs);
  atomic_file_keep_free(&j.keep);
  free(j.text);
  free(j.old);
  return rc;
}
