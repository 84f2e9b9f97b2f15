/* workdir.c — the files a run writes into its workdir (workdir.h). */
#define _GNU_SOURCE
#include "common/workdir.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* a database's companion files, by suffix */
static const char *const companions[] = {"-wal", "-shm", "-journal", ".lock"};

int workdir_add_fmt(struct atomic_file_keep *k, const char *a, const char *b, const char *c) {
  char p[PATH_MAX + 64];
  snprintf(p, sizeof p, "%s%s%s", a, b, c);
  return atomic_file_keep_add(k, p);
}

int workdir_add_db(struct atomic_file_keep *k, const char *db) {
  int bad = atomic_file_keep_add(k, db);
  for (size_t i = 0; i < sizeof companions / sizeof *companions && !bad; i++)
    bad = workdir_add_fmt(k, db, companions[i], "");
  return bad;
}

static int ends_with(const char *s, const char *tail) {
  size_t n = strlen(s), m = strlen(tail);
  return n >= m && !strcmp(s + n - m, tail);
}

/* Every regular file under folder, depth folders deep; shard databases
 * (name.db) with their companions. A folder that cannot be read adds
 * nothing. */
int workdir_add_tree(struct atomic_file_keep *k, const char *folder, int depth, int dbs) {
  DIR *d = opendir(folder);
  if (!d) return 0;
  int bad = 0;
  struct dirent *e;
  while (!bad && (e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s/%s", folder, e->d_name) >= (int)sizeof p) continue;
    struct stat st;
    if (stat(p, &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      if (depth > 1) bad = workdir_add_tree(k, p, depth - 1, dbs);
    } else if (dbs && ends_with(p, ".db")) {
      bad = workdir_add_db(k, p);
    } else {
      bad = atomic_file_keep_add(k, p);
    }
  }
  closedir(d);
  return bad;
}

int workdir_check_input(const char *workdir, const char *in, struct se3_error *err) {
  static const char *const written[] = {"hits.csv", "hits.sdf", "report.html"};
  struct atomic_file_keep k = {0};
  char db[PATH_MAX], shards[PATH_MAX], models[PATH_MAX];
  snprintf(db, sizeof db, "%s/screen.db", workdir);
  snprintf(shards, sizeof shards, "%s/shards", workdir);
  snprintf(models, sizeof models, "%s/models", workdir);
  int bad = workdir_add_db(&k, db) || workdir_add_tree(&k, shards, 1, 1) || workdir_add_tree(&k, models, 4, 0);
  for (size_t i = 0; i < sizeof written / sizeof *written && !bad; i++)
    bad = workdir_add_fmt(&k, workdir, "/", written[i]);
  int rc = -1;
  if (bad) {
    se3_error_set(err, SE3_ERR_MEMORY, "out of memory listing the files the run writes");
    se3_error_at(err, workdir, 0, 0);
  } else {
    for (size_t i = 0; i < k.n; i++)
      if (atomic_file_same(in, k.path[i])) {
        se3_error_set(err, SE3_ERR_USAGE,
                      "%s is %s, which this run writes (it would be replaced while it is an input): copy it out of "
                      "the workdir and name the copy",
                      in, k.path[i]);
        goto out;
      }
    rc = 0;
  }
out:
  atomic_file_keep_free(&k);
  return rc;
}
