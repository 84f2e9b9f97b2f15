/* Score-only workflows through the binary (issue 31): a model trained in
 * workdir A scores a library in workdir B, whose workflow has no train stage
 * and names A's checkpoint (a file, or A itself as a folder). B takes the
 * featurisation and rank's order from the model's card (its checkpoint's
 * "settings" record), so its scores equal A's bit for bit; a B that sets a
 * featurisation key otherwise is refused at `check` naming both values; a
 * checkpoint without a card is refused naming what it lacks, and scored
 * when the workflow sets it all. And `status` shows the latest run's state,
 * not an error an earlier run left. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/checkpoint.h"
#include "tests/testutil.h"

/* Training workflow A: a tiny model, 1 epoch, on the bundled QM9 records;
 * the library (SMILES, 3D generated) scored and ranked. Its featurisation is
 * far from the defaults (builder-only 3D with its own seed, bonds and radius
 * edges at 4 Å, a short element list) and it ranks ascending, so a B that
 * used the defaults would score and rank otherwise. */
static const char *A_INGEST = "{workers: 1, gen3d_quality: fast, seed: 7}";
static const char *A_GRAPH = "{edges: radius+bonds, cutoff: 4.0, elements: [H, C, N, O, F, S, Cl]}";

static char *library(void) { return strdup(tu_src("tests/data/score_only/library.smi")); }

/* Trains A in DIR/A (workflow DIR/a.yaml). Returns DIR (malloc'd). */
static char *train_a(const char *name) {
  char *dir = tu_tmpdir(name), *lib = library();
  char yaml[4096];
  snprintf(yaml, sizeof yaml,
           "workflow: a\nworkdir: A\nrun: {progress: none}\n"
           "sets:\n  train:\n    - path: %s\n      labels_csv: {path: %s, join: mol_id, columns: [gap]}\n"
           "  library:\n    - {path: %s}\n"
           "stages:\n  ingest: %s\n  graph: %s\n"
           "  train: {ensemble: 1, target: gap, epochs: 1, batch_size: 4, arch: {layers: 1, degrees: 2, channels: 4}}\n"
           "  score: {set: library}\n  rank: {order: ascending, top: 8}\n",
           tu_src("workflows/data/qm9_mini.sdf"), tu_src("workflows/data/qm9_mini.sdf.csv"), lib, A_INGEST, A_GRAPH);
  char *wf = tu_write(dir, "a.yaml", yaml), *out = NULL;
  int rc = tu_se3(&out, "run %s", wf);
  cr_assert_eq(rc, 0, "training workflow A failed:\n%s", out);
  free(out);
  free(wf);
  free(lib);
  return dir;
}

/* Score-only workflow B beside A (so the library's stored source_file is the
 * same relative path): no train stage; `stages` is the text after
 * "stages:\n" before score and rank (e.g. a graph section), `checkpoint`
 * the model path. */
static char *write_b(const char *dir, const char *file, const char *workdir, const char *stages,
                     const char *checkpoint) {
  char *lib = library();
  char yaml[4096];
  snprintf(yaml, sizeof yaml,
           "workflow: b\nworkdir: %s\nrun: {progress: none}\n"
           "sets:\n  library:\n    - {path: %s}\n"
           "stages:\n  ingest: {workers: 1}\n%s"
           "  score:\n    checkpoint: %s\n"
           "  rank: {target: gap, top: 8}\n",
           workdir, lib, stages, checkpoint);
  free(lib);
  return tu_write(dir, file, yaml);
}

/* Every library molecule's score, exactly: "source_file:record=score" lines. */
static char *scores_of(const char *dir, const char *workdir) {
  char db[2048];
  snprintf(db, sizeof db, "%s/%s/screen.db", dir, workdir);
  char *s = tu_query(db, "SELECT m.source_file || ':' || m.record_no || '=' || printf('%.17g', s.score) "
                         "FROM scores s JOIN molecules m ON m.id = s.mol_id WHERE m.set_name = 'library' "
                         "ORDER BY m.source_file, m.record_no");
  cr_assert_not_null(s, "no scores in %s", db);
  return s;
}

/* The hits, in rank order, with their exact scores. */
static char *hits_of(const char *dir, const char *workdir) {
  char db[2048];
  snprintf(db, sizeof db, "%s/%s/screen.db", dir, workdir);
  char *s = tu_query(db, "SELECT rank || ' ' || source_file || ':' || record_no || '=' || printf('%.17g', score) "
                         "FROM ranked_hits ORDER BY rank");
  cr_assert_not_null(s, "no hits in %s", db);
  return s;
}

/* Every library molecule's graph blob, as hex. */
static char *graphs_of(const char *dir, const char *workdir) {
  char db[2048];
  snprintf(db, sizeof db, "%s/%s/screen.db", dir, workdir);
  char *s = tu_query(db, "SELECT m.source_file || ':' || m.record_no || '=' || hex(g.graph) "
                         "FROM graphs g JOIN molecules m ON m.id = g.mol_id WHERE m.set_name = 'library' "
                         "ORDER BY m.source_file, m.record_no");
  cr_assert(s && strlen(s) > 0, "no graphs in %s", db);
  return s;
}

/* B scores with A's best.ckpt and gets A's scores and hits bit for bit,
 * with A's featurisation and rank order taken from the model's card. */
Test(score_only, a_saved_model_scores_as_it_did_where_it_was_trained) {
  char *dir = train_a("score_only_same");
  char ck[2048];
  snprintf(ck, sizeof ck, "%s/A/models/train-0/best.ckpt", dir);
  char *wf = write_b(dir, "b.yaml", "B", "", ck), *out = NULL;
  int rc = tu_se3(&out, "check %s", wf);
  cr_assert_eq(rc, 0, "check of the score-only workflow:\n%s", out);
  /* the resolved workflow shows the model's settings */
  cr_assert(strstr(out, "gen3d_quality: fast"), "%s", out);
  cr_assert(strstr(out, "elements: [H, C, N, O, F, S, Cl]"), "%s", out);
  cr_assert(strstr(out, "order: ascending"), "%s", out);
  free(out);
  rc = tu_se3(&out, "run %s", wf);
  cr_assert_eq(rc, 0, "run of the score-only workflow:\n%s", out);
  free(out);
  char db[2100];
  snprintf(db, sizeof db, "%s/B/screen.db", dir);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM stage_state WHERE stage='train'"), 0, "B ran train");
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM models"), 0);
  char *a = scores_of(dir, "A"), *b = scores_of(dir, "B");
  cr_assert_gt(strlen(a), 0);
  cr_assert_str_eq(b, a, "B's scores differ from A's:\nB:\n%s\nA:\n%s", b, a);
  free(a);
  free(b);
  a = hits_of(dir, "A");
  b = hits_of(dir, "B");
  cr_assert_gt(strlen(a), 0, "A has no hits");
  cr_assert_str_eq(b, a, "B's hits differ from A's:\nB:\n%s\nA:\n%s", b, a);
  free(a);
  free(b);
  /* ascending, as the model was ranked */
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM ranked_hits h JOIN ranked_hits n ON n.rank = h.rank + 1 "
                                "WHERE n.score < h.score"),
               0);
  cr_assert_gt(tu_query_int(db, "SELECT count(*) FROM ranked_hits"), 1);
  /* the graphs are A's to the bit */
  a = graphs_of(dir, "A");
  b = graphs_of(dir, "B");
  cr_assert_str_eq(b, a, "B's graphs differ from A's");
  free(a);
  free(b);
  /* the injected values hash as the same values written out: `status` of a
   * workflow that writes them finds every stage of B unchanged */
  char *lib = library(), yaml[4096];
  snprintf(yaml, sizeof yaml,
           "workflow: b\nworkdir: B\nrun: {progress: none}\nsets:\n  library:\n    - {path: %s}\nstages:\n"
           "  ingest: {workers: 1, gen3d_quality: fast, seed: 7}\n  graph: %s\n"
           "  score:\n    checkpoint: %s\n  rank: {target: gap, top: 8, order: ascending}\n",
           lib, A_GRAPH, ck);
  free(lib);
  char *written = tu_write(dir, "b_written.yaml", yaml);
  rc = tu_se3(&out, "status %s", written);
  cr_assert_eq(rc, 0, "%s", out);
  cr_assert_null(strstr(out, "CHANGED"), "%s", out);
  cr_assert(strstr(out, "graph ") && strstr(out, "unchanged"), "%s", out);
  free(out);
  free(written);
  /* on a cluster too: `slurm` writes no train step, a score step */
  rc = tu_se3(&out, "slurm %s", wf);
  cr_assert_eq(rc, 0, "%s", out);
  cr_assert_null(strstr(out, "-train.sbatch"), "%s", out);
  cr_assert(strstr(out, "-score.sbatch"), "%s", out);
  free(out);
  free(wf);
  free(dir);
}

/* A copy of checkpoint `from` at `to` whose card is `card` (NULL: none, as
 * checkpoints were written before cards existed). */
static void copy_with_card(const char *from, const char *to, const char *card) {
  struct se3_ckpt c;
  struct se3_ckpt_writer w;
  struct se3_error err;
  cr_assert_eq(se3_ckpt_load(&c, from, &err), 0, "%s", se3_error_str(&err).s);
  cr_assert_not_null(se3_ckpt_find(&c, "settings"), "%s has no card", from);
  cr_assert_eq(se3_ckpt_begin(&w, to, &err), 0, "%s", se3_error_str(&err).s);
  for (int i = 0; i < c.n_rec; i++)
    if (strcmp(c.rec[i].name, "settings") != 0)
      se3_ckpt_put(&w, c.rec[i].name, c.rec[i].type, c.rec[i].data, c.rec[i].count);
  if (card) se3_ckpt_put(&w, "settings", SE3_CK_U8, card, strlen(card));
  cr_assert_eq(se3_ckpt_commit(&w, &err), 0, "%s", se3_error_str(&err).s);
  se3_ckpt_free(&c);
}

/* The card of checkpoint `path` as text (malloc'd). */
static char *card_of(const char *path) {
  struct se3_ckpt c;
  struct se3_error err;
  cr_assert_eq(se3_ckpt_load(&c, path, &err), 0, "%s", se3_error_str(&err).s);
  const struct se3_ckpt_record *r = se3_ckpt_find(&c, "settings");
  cr_assert(r && r->type == SE3_CK_U8, "%s has no card", path);
  char *text = strndup((const char *)r->data, r->count);
  se3_ckpt_free(&c);
  return text;
}

/* A folder holding the model: A's workdir, or its models/ folder. */
Test(score_only, a_workdir_or_models_folder_names_the_model) {
  char *dir = train_a("score_only_dir");
  char ck[2048];
  snprintf(ck, sizeof ck, "%s/A", dir);
  char *wf = write_b(dir, "b.yaml", "B", "", ck), *out = NULL;
  int rc = tu_se3(&out, "run %s", wf);
  cr_assert_eq(rc, 0, "B with A's workdir as the model:\n%s", out);
  free(out);
  char *a = scores_of(dir, "A"), *b = scores_of(dir, "B");
  cr_assert_str_eq(b, a, "B's scores differ from A's:\nB:\n%s\nA:\n%s", b, a);
  free(a);
  free(b);
  free(wf);
  snprintf(ck, sizeof ck, "%s/A/models", dir);
  wf = write_b(dir, "c.yaml", "C", "", ck);
  rc = tu_se3(&out, "check %s", wf);
  cr_assert_eq(rc, 0, "C with A's models/ folder as the model:\n%s", out);
  free(out);
  free(wf);
  /* an ensemble folder whose members were trained otherwise: refused,
   * naming both files and the setting */
  char best[2100], m0[2200], m1[2200];
  snprintf(best, sizeof best, "%s/A/models/train-0/best.ckpt", dir);
  snprintf(m0, sizeof m0, "%s/ens/train-0/best.ckpt", dir);
  snprintf(m1, sizeof m1, "%s/ens/train-1/best.ckpt", dir);
  cr_assert_eq(tu_sh(NULL, "mkdir -p %s/ens/train-0 %s/ens/train-1 && cp %s %s", dir, dir, best, m0), 0);
  char *card = card_of(best), *at = strstr(card, "stages.graph.cutoff=4\n");
  cr_assert_not_null(at, "the card:\n%s", card);
  at[strlen("stages.graph.cutoff=")] = '5';
  copy_with_card(best, m1, card);
  free(card);
  snprintf(ck, sizeof ck, "%s/ens", dir);
  wf = write_b(dir, "e.yaml", "E", "", ck);
  rc = tu_se3(&out, "check %s", wf);
  cr_assert_eq(rc, 2, "%s", out);
  cr_assert(strstr(out, "the ensemble's members disagree on stages.graph.cutoff") && strstr(out, m0) && strstr(out, m1),
            "%s", out);
  free(out);
  free(wf);
  /* a folder without models is refused at check, naming it */
  snprintf(ck, sizeof ck, "%s", dir);
  wf = write_b(dir, "d.yaml", "D", "", ck);
  rc = tu_se3(&out, "check %s", wf);
  cr_assert_eq(rc, 2, "%s", out);
  cr_assert(strstr(out, "stages.score.checkpoint:") && strstr(out, "a folder without models"), "%s", out);
  free(out);
  free(wf);
  free(dir);
}

/* The elements of the node one-hot in another order: the same width, other
 * features. Refused at check with the line and column, both lists, and the
 * way out; nothing is written. */
Test(score_only, another_featurisation_is_refused_at_check) {
  char *dir = train_a("score_only_refused");
  char ck[2048];
  snprintf(ck, sizeof ck, "%s/A/models/train-0/best.ckpt", dir);
  /* line 9, column 24: the list's opening bracket */
  char *wf = write_b(dir, "b.yaml", "B", "  graph: {cutoff: 4.0, elements: [C, H, N, O, F, S, Cl]}\n", ck), *out = NULL;
  int rc = tu_se3(&out, "check %s", wf);
  cr_assert_eq(rc, 2, "%s", out);
  char want[4096];
  snprintf(want, sizeof want,
           "%s:9:24: stages.graph.elements: the model (%s) was trained with [H, C, N, O, F, S, Cl]; this workflow "
           "sets [C, H, N, O, F, S, Cl]: leave the key out to use the model's, or train a model with these settings",
           wf, ck);
  cr_assert(strstr(out, want), "wanted:\n%s\ngot:\n%s", want, out);
  /* cutoff 4.0 agrees with the model's 4 */
  cr_assert_null(strstr(out, "stages.graph.cutoff"), "%s", out);
  free(out);
  rc = tu_se3(&out, "run %s", wf);
  cr_assert_eq(rc, 2, "%s", out);
  free(out);
  char db[2100];
  snprintf(db, sizeof db, "%s/B", dir);
  cr_assert_neq(tu_sh(NULL, "test -e %s", db), 0, "the refused run made its workdir");
  free(wf);
  free(dir);
}

/* Issue 32 put fragments and protonate on the card. A card written before
 * them (se3screen read every fragment and kept the input's charges then)
 * reads as fragments=keep, protonate=keep: the workflow loads with those;
 * a workflow asking for another protonation than the model's is refused. */
Test(score_only, a_card_from_before_fragments_and_protonate_reads_as_keep) {
  char *dir = train_a("score_only_older_card");
  char ck[2048], old[2100];
  snprintf(ck, sizeof ck, "%s/A/models/train-0/best.ckpt", dir);
  snprintf(old, sizeof old, "%s/older.ckpt", dir);
  char *card = card_of(ck);
  cr_assert(strstr(card, "stages.ingest.fragments=largest\n") && strstr(card, "stages.ingest.protonate=keep\n"),
            "the card:\n%s", card);
  /* the card without the two lines */
  static const char *const gone[] = {"stages.ingest.fragments=", "stages.ingest.protonate="};
  for (int k = 0; k < 2; k++) {
    char *at = strstr(card, gone[k]), *nl = at ? strchr(at, '\n') : NULL;
    cr_assert(at && nl);
    memmove(at, nl + 1, strlen(nl + 1) + 1);
  }
  copy_with_card(ck, old, card);
  free(card);
  char *wf = write_b(dir, "b.yaml", "B", "", old), *out = NULL;
  int rc = tu_se3(&out, "check %s", wf); /* check prints the workflow as it will run */
  cr_assert_eq(rc, 0, "%s", out);
  cr_assert(strstr(out, "fragments: keep") && strstr(out, "protonate: keep"), "%s", out);
  free(out);
  free(wf);
  /* the new card: another protonation is refused, naming both */
  wf = write_b(dir, "c.yaml", "C", "", ck);
  rc = tu_se3(&out, "check %s --set ingest.protonate=7.4", wf);
  cr_assert_eq(rc, 2, "%s", out);
  cr_assert(strstr(out, "stages.ingest.protonate: the model (") &&
                strstr(out, "was trained with keep; this workflow sets 7.4: leave"),
            "the number as written, not 7.4000000000000004: %s", out);
  free(out);
  free(wf);
  free(dir);
}

/* A checkpoint from before cards: refused naming what it lacks and how to go
 * on; scored (as A scored) when the workflow sets every featurisation key. */
Test(score_only, a_checkpoint_without_a_card_needs_the_settings_written_out) {
  char *dir = train_a("score_only_old");
  char ck[2048], old[2100];
  snprintf(ck, sizeof ck, "%s/A/models/train-0/best.ckpt", dir);
  snprintf(old, sizeof old, "%s/old.ckpt", dir);
  copy_with_card(ck, old, NULL);
  char *wf = write_b(dir, "b.yaml", "B", "", old), *out = NULL;
  int rc = tu_se3(&out, "check %s", wf);
  cr_assert_eq(rc, 2, "%s", out);
  cr_assert(strstr(out, "stages.score.checkpoint: the model (") && strstr(out, old), "%s", out);
  const char *keys[] = {"stages.ingest.add_hydrogens", "stages.ingest.gen3d_quality", "stages.graph.edges",
                        "stages.graph.elements", "stages.graph.charge"};
  for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
    cr_assert(strstr(out, keys[i]), "%s not named:\n%s", keys[i], out);
  cr_assert(strstr(out, "set them in this workflow as they were when the model was trained"), "%s", out);
  /* rank's order is a preference, never required */
  cr_assert_null(strstr(out, "stages.rank.order"), "%s", out);
  free(out);
  free(wf);
  /* every key written out, as A had them (A's ingest and graph, the rest at
   * their defaults): accepted, and A's scores. The conformers too: a
   * preference, which a card-less model takes as 1 (what models were
   * trained on before the key), where A had the default, ten */
  char stages[1024];
  snprintf(stages, sizeof stages,
           "  ingest: {workers: 1, gen3d_quality: fast, seed: 7, add_hydrogens: true, gen3d: auto, conformers: 10}\n"
           "  graph: {edges: radius+bonds, cutoff: 4.0, elements: [H, C, N, O, F, S, Cl], max_neighbors: 0,\n"
           "          other_element: true, charge: true, atomic_number: false}\n");
  char *lib = library(), yaml[4096];
  snprintf(yaml, sizeof yaml,
           "workflow: b\nworkdir: B\nrun: {progress: none}\nsets:\n  library:\n    - {path: %s}\nstages:\n%s"
           "  score: {checkpoint: %s}\n  rank: {target: gap, order: ascending, top: 8}\n",
           lib, stages, old);
  free(lib);
  wf = tu_write(dir, "b.yaml", yaml);
  rc = tu_se3(&out, "check %s", wf);
  cr_assert_eq(rc, 0, "%s", out);
  free(out);
  rc = tu_se3(&out, "run %s", wf);
  cr_assert_eq(rc, 0, "%s", out);
  free(out);
  char *a = scores_of(dir, "A"), *b = scores_of(dir, "B");
  cr_assert_str_eq(b, a, "B's scores differ from A's:\nB:\n%s\nA:\n%s", b, a);
  free(a);
  free(b);
  free(wf);
  free(dir);
}

/* `status` after a failed run and then a successful one: the latest run's
 * state, with no error left over from the failed one. */
Test(score_only, status_shows_the_latest_run_not_an_old_error) {
  char *dir = tu_tmpdir("score_only_status");
  char yaml[2048];
  snprintf(yaml, sizeof yaml,
           "workflow: s\nworkdir: S\nrun: {progress: none}\nsets:\n  library:\n    - {path: %s}\n"
           "stages:\n  ingest: {workers: 1}\n  graph: {cutoff: 4.0}\n",
           tu_src("workflows/data/qm9_mini.sdf"));
  char *wf = tu_write(dir, "s.yaml", yaml), *out = NULL;
  /* graph before ingest: fails, and the failure is recorded */
  int rc = tu_se3(&out, "run %s --stage graph", wf);
  cr_assert_eq(rc, 1, "%s", out);
  free(out);
  rc = tu_se3(&out, "status %s", wf);
  cr_assert(strstr(out, "last error: ") && strstr(out, "graph reads the ingest stage's results"), "%s", out);
  free(out);
  rc = tu_se3(&out, "run %s", wf);
  cr_assert_eq(rc, 0, "%s", out);
  free(out);
  rc = tu_se3(&out, "status %s", wf);
  cr_assert_eq(rc, 0, "%s", out);
  cr_assert(strstr(out, ", done, finished "), "%s", out);
  cr_assert(strstr(out, "last error: none"), "the failed run's error is still shown:\n%s", out);
  free(out);
  free(wf);
  free(dir);
}
