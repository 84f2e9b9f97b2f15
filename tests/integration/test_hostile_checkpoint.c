/* A stranger's checkpoint (issue 51): every kind of crafted model file the
 * third hostile campaign made, its checksum recomputed, is refused by
 * `predict` and `check` with exit 2 and a message naming the file and the
 * record or field; `verify` reports one as damaged instead of aborting.
 * Before, these aborted with "malloc(): invalid size" (a 300-byte record
 * name), "double free or corruption" (outputs=64), SIGSEGV (edge_in=200,
 * outputs=2 on 200 molecules), read past the batch (edge_in=7), ranked inf
 * scores or ended in "NOT NULL constraint failed" (NaN or infinite values),
 * or rejected every molecule and ended with an unrelated "nothing to rank"
 * (node_in=13, a card with fewer elements).
 *
 * The model is the tiny one of test_predict (one block, degrees 0-1, 4
 * channels, one epoch on 20 QM9 records); every variant is written from it
 * with the checkpoint writer, the parameter records padded to fit the
 * changed architecture where it lays one out, as an attacker would. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "models/checkpoint.h"
#include "models/model_file.h"
#include "models/se3.h"
#include "tests/testutil.h"

/* What a variant changes. */
struct edit {
  const char *name;       /* the variant's file name */
  const char *arch_word;  /* "key=value" replacing the arch word of that key */
  const char *record;     /* a record whose value `at` becomes `value` */
  int at;
  double value;
  const char *card_from, *card_to; /* a text replaced in the card */
  size_t long_name;                /* > 0: one more record with a name this long */
  int long_target;                 /* the target 256 characters long */
  const char *resize;              /* a record given this many values (zeros added), or left out (-1) */
  long long resize_to;
  const char *want;                /* what the refusal says */
};

static void put_host(struct se3_ckpt_writer *w, const struct se3_ckpt_record *r, const void *host) {
  se3_ckpt_put(w, r->name, r->type, host, r->count);
}

/* src's records into dst with edit e applied, the checksum the writer's. */
static void craft(const char *src, const char *dst, const struct edit *e) {
  struct se3_ckpt c;
  struct se3_error err;
  char arch[1024] = "";
  cr_assert_eq(se3_ckpt_load(&c, src, &err), 0, "%s", se3_error_str(&err).s);
  const struct se3_ckpt_record *a = se3_ckpt_find(&c, "arch");
  cr_assert(a && a->count < sizeof arch);
  memcpy(arch, a->data, a->count);
  if (e->arch_word) { /* the word replaced */
    char out[1024] = "", *save = NULL;
    size_t klen = (size_t)(strchr(e->arch_word, '=') - e->arch_word);
    for (char *wd = strtok_r(arch, " ", &save); wd; wd = strtok_r(NULL, " ", &save))
      snprintf(out + strlen(out), sizeof out - strlen(out), "%s%s", *out ? " " : "",
               strncmp(wd, e->arch_word, klen + 1) == 0 ? e->arch_word : wd);
    snprintf(arch, sizeof arch, "%s", out);
  }
  /* the parameter records padded to fit the architecture, where it lays one out */
  size_t np = 0;
  struct se3_config cfg;
  struct se3_model m;
  if (se3_config_parse(arch, &cfg) == 0 && se3_model_init(&m, &cfg, &err) == 0) {
    np = m.n_params;
    se3_model_free(&m);
  }
  struct se3_ckpt_writer w;
  cr_assert_eq(se3_ckpt_begin(&w, dst, &err), 0, "%s", se3_error_str(&err).s);
  for (int i = 0; i < c.n_rec; i++) {
    const struct se3_ckpt_record *r = &c.rec[i];
    size_t per = se3_ckpt_type_size(r->type);
    uint8_t *host = malloc((size_t)r->count * per + 1);
    cr_assert_eq(se3_ckpt_get(&c, r->name, r->type, host, r->count), 0);
    if (!strcmp(r->name, "arch")) {
      se3_ckpt_put(&w, "arch", SE3_CK_U8, arch, strlen(arch));
    } else if (np && r->type == SE3_CK_F32 && r->count != np &&
               (!strcmp(r->name, "params") || !strcmp(r->name, "adam_m") || !strcmp(r->name, "adam_v"))) {
      float *p = calloc(np, sizeof *p);
      for (size_t k = 0; k < np; k++)
        p[k] = k < r->count ? ((float *)host)[k] : 0.01f;
      se3_ckpt_put(&w, r->name, SE3_CK_F32, p, np);
      free(p);
    } else if (e->record && !strcmp(r->name, e->record)) {
      if (r->type == SE3_CK_F32) ((float *)host)[e->at] = (float)e->value;
      if (r->type == SE3_CK_F64) ((double *)host)[e->at] = e->value;
      put_host(&w, r, host);
    } else if (e->card_from && !strcmp(r->name, "settings")) {
      char *text = strndup((const char *)host, r->count), *at = strstr(text, e->card_from);
      cr_assert(at, "the card lacks \"%s\": %s", e->card_from, text);
      char *out = NULL;
      cr_assert_geq(asprintf(&out, "%.*s%s%s", (int)(at - text), text, e->card_to, at + strlen(e->card_from)), 0);
      se3_ckpt_put(&w, "settings", SE3_CK_U8, out, strlen(out));
      free(out);
      free(text);
    } else if (e->resize && !strcmp(r->name, e->resize)) {
      if (e->resize_to >= 0) {
        uint8_t *grown = calloc((size_t)e->resize_to + 1, per);
        memcpy(grown, host, (size_t)(e->resize_to < (long long)r->count ? e->resize_to : (long long)r->count) * per);
        se3_ckpt_put(&w, r->name, r->type, grown, (uint64_t)e->resize_to);
        free(grown);
      }
    } else if (e->long_target && !strcmp(r->name, "target")) {
      char t[257];
      memset(t, 't', 256);
      se3_ckpt_put(&w, "target", SE3_CK_U8, t, 256);
    } else {
      put_host(&w, r, host);
    }
    free(host);
  }
  se3_ckpt_free(&c);
  cr_assert_eq(se3_ckpt_commit(&w, &err), 0, "%s", se3_error_str(&err).s);
  if (e->long_name) tu_ckpt_append_record(dst, e->long_name);
}

static const struct edit EDITS[] = {
    {.name = "long_name", .long_name = 300, .want = "its name is 300 bytes long (1 to 255 allowed)"},
    {.name = "outputs64", .arch_word = "outputs=64", .want = "arch: outputs=64, but scoring keeps 1 value a molecule"},
    {.name = "outputs2", .arch_word = "outputs=2", .want = "arch: outputs=2, but scoring keeps 1 value a molecule"},
    {.name = "edge200", .arch_word = "edge_in=200", .want = "arch: edge_in=200 is out of range (1 to 64)"},
    {.name = "edge7",
     .arch_word = "edge_in=7",
     .want = "arch: edge_in=7, but its featurisation (stages.graph.bond_features) gives 6 edge features"},
    {.name = "edge5", .arch_word = "edge_in=5", .want = "arch: edge_in=5, but this se3screen's graphs have 6 to 64"},
    {.name = "radial", .arch_word = "radial_hidden=2147483647", .want = "radial_hidden=2147483647 is out of range"},
    {.name = "node13", .arch_word = "node_in=13", .want = "arch: node_in=13, but its featurisation"},
    {.name = "nan_param", .record = "params", .at = 3, .value = NAN, .want = "record \"params\": value 4 of"},
    {.name = "inf_param", .record = "params", .at = 0, .value = INFINITY, .want = "is inf (finite numbers allowed)"},
    {.name = "inf_std",
     .record = "best_mean_std",
     .at = 2,
     .value = INFINITY,
     .want = "the target's standard deviation is inf"},
    {.name = "nan_mean", .record = "best_mean_std", .at = 1, .value = NAN, .want = "the target's mean is nan"},
    /* finite but past what training gives (hardening IV: every molecule scored +-inf and ranked) */
    {.name = "huge_std",
     .record = "best_mean_std",
     .at = 2,
     .value = 1e308,
     .want = "the target's standard deviation is 1e+308 (above 0, at most 1e+33 allowed)"},
    {.name = "huge_mean",
     .record = "best_mean_std",
     .at = 1,
     .value = -1e300,
     .want = "the target's mean is -1e+300 (within +-1e+33 allowed)"},
    {.name = "huge_atomref",
     .record = "atomref",
     .at = 0,
     .value = 1e300,
     .want = "record \"atomref\": value 1 is 1e+300 (within +-1e+33 allowed)"},
    {.name = "fewer_elements", .card_from = ", I]", .card_to = "]", .want = "gives 11 node features an atom"},
    {.name = "long_target", .long_target = 1, .want = "record \"target\": 256 bytes (1 to 255 allowed)"},
    /* the training set a model carries (issue 70): bounded, whole, named */
    {.name = "train_too_many",
     .resize = "train_fps_morgan2",
     .resize_to = 32LL * (SE3_TRAIN_SET_MAX + 1),
     .want = "record \"train_fps_morgan2\": 100001 fingerprints (at most 100000 allowed)"},
    {.name = "train_torn",
     .resize = "train_fps_morgan2",
     .resize_to = 32 * 3 - 5,
     .want = "record \"train_fps_morgan2\": 91 values, not a whole number of fingerprints (32 values each)"},
    {.name = "train_names_cut",
     .resize = "train_names",
     .resize_to = 16 * 4,
     .want = "names ended by a NUL byte and bytes after the last, for "},
    {.name = "train_no_names",
     .resize = "train_names",
     .resize_to = -1,
     .want = "record \"train_fps_morgan2\" without \"train_names\""},
};

/* A's workflow: train on the QM9 records (atomref on, so the model has
 * references to spoil), score and rank `library`. */
static void train_a(const char *dir) {
  char yaml[4096], *out = NULL;
  free(tu_write(dir, "lib.smi", "CCO\tethanol\nCC(=O)C\tacetone\nc1ccccc1\tbenzene\nCCN\tethylamine\n"));
  snprintf(yaml, sizeof yaml,
           "workflow: a\nworkdir: A\nrun: {progress: none}\n"
           "sets:\n  train:\n    - path: %s\n      labels_csv: {path: %s, join: mol_id, columns: [gap]}\n"
           "  library:\n    - {path: lib.smi}\n"
           "stages:\n  ingest: {workers: 1, gen3d_quality: fast}\n  graph: {edges: radius+bonds, cutoff: 4.0}\n"
           "  train: {ensemble: 1, target: gap, model: small, arch: {layers: 1, degrees: 2, channels: 4}, epochs: 1, "
           "batch_size: 4, atomref: true}\n  score: {set: library}\n",
           tu_src("workflows/data/qm9_mini.sdf"), tu_src("workflows/data/qm9_mini.sdf.csv"));
  char *wf = tu_write(dir, "a.yaml", yaml);
  cr_assert_eq(tu_se3(&out, "run %s --until train", wf), 0, "%s", out);
  free(out);
  free(wf);
}

Test(hostile_checkpoint, every_crafted_kind_is_refused_naming_file_and_field, .timeout = 600) {
  char *dir = tu_tmpdir("hostile_checkpoint"), good[1024], lib[1024];
  train_a(dir);
  snprintf(good, sizeof good, "%s/A/models/train-0/best.ckpt", dir);
  snprintf(lib, sizeof lib, "%s/lib.smi", dir);
  char *out = NULL;
  /* the model as trained scores */
  cr_assert_eq(tu_se3(&out, "predict %s %s --workdir %s/P-good", good, lib, dir), 0, "%s", out);
  free(out);
  for (size_t k = 0; k < sizeof EDITS / sizeof *EDITS; k++) {
    const struct edit *e = &EDITS[k];
    char path[1200];
    snprintf(path, sizeof path, "%s/%s.ckpt", dir, e->name);
    craft(good, path, e);
    int rc = tu_se3(&out, "predict %s %s --workdir %s/P-%s", path, lib, dir, e->name);
    cr_assert_eq(rc, 2, "%s: predict exited %d, not 2: %s", e->name, rc, out);
    cr_assert(strstr(out, path) && strstr(out, e->want), "%s: the refusal does not name the file and \"%s\": %s",
              e->name, e->want, out);
    free(out);
  }
  /* `check` of a score-only workflow refuses the same, at the key naming it */
  char yaml[2048];
  snprintf(yaml, sizeof yaml,
           "workflow: s\nsets:\n  library:\n    - {path: lib.smi}\nstages:\n  score: {checkpoint: outputs64.ckpt}\n");
  char *wf = tu_write(dir, "s.yaml", yaml);
  int rc = tu_se3(&out, "check %s", wf);
  cr_assert_eq(rc, 2, "check exited %d: %s", rc, out);
  cr_assert(strstr(out, "s.yaml:6:") && strstr(out, "stages.score.checkpoint") && strstr(out, "outputs=64"), "%s", out);
  free(out);
  free(wf);
  /* `verify` of a workdir holding the 300-byte name reports it damaged */
  cr_assert_eq(tu_sh(NULL, "cp %s/long_name.ckpt %s/A/models/train-0/best.ckpt", dir, dir), 0);
  rc = tu_se3(&out, "verify %s/A", dir);
  cr_assert(rc != 0 && rc < 128, "verify exited %d: %s", rc, out);
  cr_assert(strstr(out, "its name is 300 bytes long"), "%s", out);
  free(out);
  /* a FIFO in the checkpoint's place is refused at once, not waited on */
  char fifo[1100];
  snprintf(fifo, sizeof fifo, "%s/fifo.ckpt", dir);
  cr_assert_eq(mkfifo(fifo, 0600), 0);
  rc = tu_sh(&out, "timeout 60 %s predict %s %s --workdir %s/P-fifo 2>&1", SE3_BINARY, fifo, lib, dir);
  cr_assert_eq(rc, 2, "predict on a FIFO exited %d: %s", rc, out);
  cr_assert(strstr(out, fifo), "%s", out);
  free(out);
  free(dir);
}

/* A 256-character target trained, then dropped when its model was read
 * (scores.target empty, no word said): refused by `check` instead, at its
 * key, and a model carrying one is refused by its reader (EDITS above). */
Test(hostile_checkpoint, a_target_past_255_bytes_is_refused_at_its_key) {
  char *dir = tu_tmpdir("hostile_long_target"), name[257], text[1024], yaml[1024], *out = NULL;
  memset(name, 't', 256);
  name[256] = 0;
  snprintf(text, sizeof text, "smiles,%s\nCCO,1\nCCC,2\nCCCC,3\n", name);
  free(tu_write(dir, "lt.csv", text));
  snprintf(yaml, sizeof yaml, "workflow: lt\nsets:\n  train:\n    - {path: lt.csv, labels: [%s]}\nstages:\n"
                              "  train: {target: %s}\n", name, name);
  char *wf = tu_write(dir, "lt.yaml", yaml);
  int rc = tu_se3(&out, "check %s", wf);
  cr_assert_eq(rc, 2, "check exited %d: %s", rc, out);
  cr_assert(strstr(out, "lt.yaml:6:11: stages.train.target: a name of 256 bytes: at most 255 are allowed"), "%s", out);
  free(out);
  free(wf);
  free(dir);
}
