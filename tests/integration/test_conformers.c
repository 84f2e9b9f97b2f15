/* Conformer ensembles (stages.ingest.conformers, issue 54) through the
 * se3screen binary on 60 ESOL SMILES (shapes generated) and the bundled QM9
 * records (their own coordinates): ingest stores several distinct shapes of
 * a generated molecule and one of a record that keeps its coordinates,
 * conformer 0 being the shape one conformer gives; graph and basis rows hold
 * one graph and one basis a conformer; a score is the mean of the
 * per-conformer predictions (each scored alone through `predict` on the
 * conformer written out), with their spread in scores.conformer_sd; a
 * changed `conformers` redoes ingest and what follows, and --dry-run says
 * so; shards and merge give one run's rows; training on sampled conformers
 * resumes after kill -9 to identical checkpoints. And the aligned RMSD that
 * prunes conformers, on shapes whose answer is known. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chem/conformers.h"
#include "chem/mol.h"
#include "chem/obbridge.h"
#include "common/confset.h"
#include "common/error.h"
#include "tests/testutil.h"

#define TRAIN "target: logp, epochs: 2, batch_size: 8, model: small, arch: {degrees: 2}"

/* Set a: the ESOL SMILES (generated shapes, labelled); set b: QM9 records
 * with their coordinates (coordinates: input: one shape each, which
 * predict keeps for a conformer written out as SD). `stages` follows
 * ingest/graph/basis. */
static char *write_wf(const char *dir, const char *name, const char *workdir, int conformers, const char *stages) {
  char yaml[4096];
  snprintf(yaml, sizeof yaml,
           "workflow: t\nworkdir: %s\nrun: {chunk_size: 16, progress: none}\n"
           "sets:\n  a:\n    - {path: %s, labels: [logp]}\n  b:\n    - {path: %s}\n"
           "stages:\n  ingest: {workers: 2, conformers: %d, coordinates: input}\n  graph: {edges: radius+bonds, cutoff: 4.0}\n"
           "  basis: {max_degree: 1, dtype: fp32}\n%s",
           workdir, tu_src("workflows/data/delaney_first60.csv"), tu_src("workflows/data/qm9_mini.sdf"), conformers,
           stages ? stages : "");
  return tu_write(dir, name, yaml);
}

/* wf's stages, each in three shards and merged into db before the next. */
static void run_sharded(const char *wf, const char *db, const char *const stages[], int n) {
  char *out = NULL;
  for (int s = 0; s < n; s++) {
    for (int i = 0; i < 3; i++) {
      cr_assert_eq(tu_se3(&out, "run %s --stage %s --shard %d/3", wf, stages[s], i), 0, "%s", out);
      free(out);
    }
    cr_assert_eq(tu_se3(&out, "merge %s", db), 0, "%s", out);
    free(out);
  }
}

/* A molecules row's molecule, by id. */
static void load_mol(const char *db, long long id, struct mol *m) {
  char sql[128];
  snprintf(sql, sizeof sql, "SELECT hex(mol) FROM molecules WHERE id = %lld", id);
  char *hex = tu_query(db, sql);
  cr_assert(hex && *hex, "no molecule %lld", id);
  size_t n = strlen(hex) / 2;
  uint8_t *b = malloc(n);
  for (size_t i = 0; i < n; i++)
    sscanf(hex + 2 * i, "%2hhx", &b[i]);
  struct se3_error e;
  cr_assert_eq(mol_from_blob(b, n, m, &e), 0, "%s", se3_error_str(&e).s);
  free(b);
  free(hex);
}

/* The molecule's conformer c as 3n coordinates. */
static double *coords(struct mol *m, int c) {
  double *x = malloc((size_t)m->n_atoms * 3 * sizeof *x);
  mol_swap_conformer(m, c);
  for (int i = 0; i < m->n_atoms; i++) {
    x[3 * i] = m->atoms[i].x;
    x[3 * i + 1] = m->atoms[i].y;
    x[3 * i + 2] = m->atoms[i].z_;
  }
  mol_swap_conformer(m, c);
  return x;
}

/* Ids (a query's first column) as an array; *n of them. */
static long long *ids_of(const char *db, const char *sql, int *n) {
  char *rows = tu_query(db, sql);
  cr_assert(rows);
  long long *ids = calloc(strlen(rows) / 2 + 2, sizeof *ids);
  *n = 0;
  for (char *p = rows; *p;) {
    ids[(*n)++] = strtoll(p, &p, 10);
    while (*p == '\n')
      p++;
  }
  free(rows);
  return ids;
}

Test(conformers, aligned_rmsd_of_known_shapes) {
  /* a rigid motion of a cloud: 0; two points pulled apart by 1 on each side: 1 */
  double a[30], b[30];
  tu_seed(7);
  double c = cos(0.7), s = sin(0.7);
  for (int i = 0; i < 10; i++) {
    double x = tu_rnd() * 4 - 2, y = tu_rnd() * 4 - 2, z = tu_rnd() * 4 - 2;
    a[3 * i] = x, a[3 * i + 1] = y, a[3 * i + 2] = z;
    b[3 * i] = c * x - s * y + 3, b[3 * i + 1] = s * x + c * y - 1, b[3 * i + 2] = z + 5;
  }
  cr_assert_lt(conf_rmsd(a, b, NULL, 10), 1e-6);
  double p[6] = {1, 0, 0, -1, 0, 0}, q[6] = {0, 2, 0, 0, -2, 0};
  cr_assert_float_eq(conf_rmsd(p, q, NULL, 2), 1.0, 1e-9);
  int idx[2] = {0, 3}; /* only points 0 and 3 of a: the others are ignored */
  double u[12] = {1, 0, 0, 9, 9, 9, 9, 9, 9, -1, 0, 0}, v[12] = {0, 0, 2, -9, 0, 0, 0, 7, 0, 0, 0, -2};
  cr_assert_float_eq(conf_rmsd(u, v, idx, 2), 1.0, 1e-9);
  /* a molecule of one conformer keeps its blob version; several: version 4, read back */
  struct mol m, r;
  mol_init(&m);
  tu_chain_mol(&m, 4, 0);
  uint8_t *blob;
  size_t len;
  cr_assert_eq(mol_to_blob(&m, &blob, &len), 0);
  cr_assert_eq(blob[4], 2);
  free(blob);
  m.n_confs = 2;
  m.confs = malloc((size_t)m.n_atoms * 6 * sizeof *m.confs);
  for (int i = 0; i < m.n_atoms * 6; i++)
    m.confs[i] = 0.25 * i;
  cr_assert_eq(mol_to_blob(&m, &blob, &len), 0);
  cr_assert_eq(blob[4], 4);
  struct se3_error e;
  cr_assert_eq(mol_from_blob(blob, len, &r, &e), 0, "%s", se3_error_str(&e).s);
  cr_assert_eq(mol_n_conformers(&r), 3);
  for (int i = 0; i < m.n_atoms * 6; i++)
    cr_assert_float_eq(r.confs[i], 0.25 * i, 1e-6);
  blob[len - 10] ^= 1; /* damaged: refused */
  mol_free(&r);
  cr_assert_neq(mol_from_blob(blob, len, &r, &e), 0);
  free(blob);
  mol_free(&r);
  mol_free(&m);
}

/* Ingest, graph and basis with conformers: 3, beside the same run with one. */
Test(conformers, ingest_graph_and_basis_hold_each_conformer) {
  char *dir = tu_tmpdir("conf_ingest");
  char *one = write_wf(dir, "one.yaml", "one", 1, NULL), *three = write_wf(dir, "three.yaml", "three", 3, NULL);
  char *out = NULL;
  cr_assert_eq(tu_se3(&out, "run %s", one), 0, "%s", out);
  free(out);
  cr_assert_eq(tu_se3(&out, "run %s", three), 0, "%s", out);
  free(out);
  char db1[1024], db3[1024];
  snprintf(db1, sizeof db1, "%s/one/screen.db", dir);
  snprintf(db3, sizeof db3, "%s/three/screen.db", dir);
  int n = 0, counts[4] = {0};
  long long *ids = ids_of(db3, "SELECT id FROM molecules WHERE set_name = 'a' ORDER BY id", &n);
  cr_assert_eq(n, 60);
  for (int k = 0; k < n; k++) {
    struct mol m, m1;
    load_mol(db3, ids[k], &m);
    load_mol(db1, ids[k], &m1);
    int nc = mol_n_conformers(&m);
    cr_assert(nc >= 1 && nc <= 3, "molecule %lld: %d conformers", ids[k], nc);
    counts[nc]++;
    /* conformer 0 is the one shape of conformers: 1 */
    cr_assert_eq(m.n_atoms, m1.n_atoms);
    cr_assert_eq(mol_n_conformers(&m1), 1);
    for (int i = 0; i < m.n_atoms; i++)
      cr_assert(m.atoms[i].x == m1.atoms[i].x && m.atoms[i].y == m1.atoms[i].y && m.atoms[i].z_ == m1.atoms[i].z_,
                "molecule %lld: conformer 0 moved", ids[k]);
    /* pairwise distinct beyond the pruning threshold (heavy atoms, aligned) */
    int heavy[1000], nh = 0;
    for (int i = 0; i < m.n_atoms; i++)
      if (m.atoms[i].z != 1) heavy[nh++] = i;
    for (int c = 0; c < nc; c++)
      for (int d = c + 1; d < nc; d++) {
        double *x = coords(&m, c), *y = coords(&m, d);
        double r = conf_rmsd(x, y, heavy, nh);
        cr_assert_geq(r, CONF_PRUNE_RMSD, "molecule %lld: conformers %d and %d %.3f Å apart", ids[k], c, d, r);
        free(x);
        free(y);
      }
    /* the graph and basis rows hold one a conformer */
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT (SELECT hex(substr(graph, 1, 12)) FROM graphs WHERE mol_id = %lld) || '|' || (SELECT "
             "hex(substr(basis, 1, 12)) FROM bases WHERE mol_id = %lld)",
             ids[k], ids[k]);
    char *h = tu_query(db3, sql);
    cr_assert(h);
    if (nc == 1) {
      cr_assert(strncmp(h, "53453347", 8) == 0 && strstr(h, "|5345334B") == NULL, "molecule %lld: %s", ids[k], h);
    } else {
      char want[64];
      snprintf(want, sizeof want, "5345334B01000000%02X000000|5345334B01000000%02X000000", nc, nc);
      cr_assert(strncmp(h, want, strlen(want)) == 0, "molecule %lld: %s, want %s", ids[k], h, want);
    }
    free(h);
    mol_free(&m);
    mol_free(&m1);
  }
  cr_log_info("conformers kept: %d with 1, %d with 2, %d with 3", counts[1], counts[2], counts[3]);
  /* measured 27 of 60 with 3 (the rest rigid or small) */
  cr_assert_geq(counts[3], 15, "only %d molecules got 3 conformers", counts[3]);
  /* records with their own coordinates: one */
  cr_assert_gt(tu_query_int(db3, "SELECT count(*) FROM molecules WHERE set_name = 'b'"), 10);
  cr_assert_eq(tu_query_int(db3, "SELECT count(*) FROM molecules WHERE set_name = 'b' AND substr(mol, 5, 1) = x'04'"), 0);
  /* `se3screen verify` reads every conformer's blob */
  cr_assert_eq(tu_se3(&out, "verify %s/three", dir), 0, "%s", out);
  free(out);
  free(ids);
  free(one);
  free(three);
  free(dir);
}

/* The score is the mean of the per-conformer predictions, each scored alone
 * by predict on its conformer written out as SDF; conformer_sd is their
 * spread, NULL for one conformer; aggregate: max takes the largest. */
Test(conformers, score_is_the_mean_over_conformers) {
  char *dir = tu_tmpdir("conf_score");
  char *wf = write_wf(dir, "wf.yaml", "work", 3,
                      "  train: {ensemble: 1, set: a, " TRAIN "}\n  score: {set: a}\n  rank: {top: 0, dedupe: false}\n");
  char *out = NULL;
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  free(out);
  char db[1024];
  snprintf(db, sizeof db, "%s/work/screen.db", dir);
  /* conformer_sd where a molecule has several */
  int n1 = 0, n3 = 0;
  long long *one = ids_of(db, "SELECT s.mol_id FROM scores s JOIN molecules m ON m.id = s.mol_id WHERE substr(m.mol, "
                              "5, 1) <> x'04' AND s.conformer_sd IS NULL ORDER BY 1",
                          &n1);
  long long *three = ids_of(db, "SELECT s.mol_id FROM scores s JOIN molecules m ON m.id = s.mol_id WHERE substr(m.mol, "
                                "5, 1) = x'04' AND s.conformer_sd > 0 ORDER BY 1",
                            &n3);
  cr_assert_eq(n1 + n3, tu_query_int(db, "SELECT count(*) FROM scores"), "conformer_sd NULL iff one conformer");
  cr_assert_gt(n3, 10);
  /* the spread goes with the hits: hits.csv's last column, hits.sdf's tag, top's column */
  cr_assert_eq(tu_sh(&out, "head -n 1 %s/work/hits.csv", dir), 0);
  /* (then isomer_smiles, last, where a hit's SMILES left its stereo unmarked) */
  int iso = tu_query_int(db, "SELECT count(isomer_smiles) FROM ranked_hits") > 0;
  cr_assert(strstr(out, iso ? ",similarity,conformer_sd,isomer_smiles\n" : ",similarity,conformer_sd\n"), "%s", out);
  free(out);
  cr_assert_eq(tu_sh(&out, "grep -c '^>  <conformer_sd>' %s/work/hits.sdf", dir), 0);
  cr_assert_eq(atoi(out), n3, "%s hits.sdf records with conformer_sd, %d molecules of several conformers", out, n3);
  free(out);
  cr_assert_eq(tu_se3(&out, "top %s/work -n 5", dir), 0, "%s", out);
  cr_assert(strstr(out, "conformer_sd"), "%s", out);
  free(out);
  cr_assert_eq(tu_se3(&out, "report %s/work -o %s/report.html --no-depict", dir, dir), 0, "%s", out);
  free(out);
  cr_assert_eq(tu_sh(&out, "grep -c '<th scope=\"col\">conformer sd</th>' %s/report.html", dir), 0, "%s", out);
  free(out);
  /* three molecules of several conformers, each conformer scored alone */
  for (int k = 0; k < 3; k++) {
    struct mol m;
    load_mol(db, three[k * 5], &m);
    int nc = mol_n_conformers(&m);
    double sum = 0, each[3], mean;
    for (int c = 0; c < nc; c++) {
      mol_swap_conformer(&m, c);
      char *sdf = ob_write_sdf(&m);
      mol_swap_conformer(&m, c);
      cr_assert(sdf);
      char name[64], pdir[1200], pdb[1300];
      snprintf(name, sizeof name, "m%d_c%d.sdf", k, c);
      free(tu_write(dir, name, sdf));
      free(sdf);
      snprintf(pdir, sizeof pdir, "%s/p%d_%d", dir, k, c);
      cr_assert_eq(tu_se3(&out, "predict %s/work %s/%s --workdir %s", dir, dir, name, pdir), 0, "%s", out);
      free(out);
      snprintf(pdb, sizeof pdb, "%s/screen.db", pdir);
      char *v = tu_query(pdb, "SELECT score FROM scores");
      cr_assert(v && *v);
      each[c] = atof(v);
      sum += each[c];
      free(v);
      /* the conformer came in with its own coordinates: one shape */
      cr_assert_eq(tu_query_int(pdb, "SELECT count(*) FROM scores WHERE conformer_sd IS NULL"), 1);
    }
    char sql[200];
    snprintf(sql, sizeof sql, "SELECT printf('%%.17g|%%.17g', score, conformer_sd) FROM scores WHERE mol_id = %lld",
             three[k * 5]);
    char *v = tu_query(db, sql);
    double score = atof(v), sd = atof(strchr(v, '|') + 1), ss = 0;
    free(v);
    mean = sum / nc;
    for (int c = 0; c < nc; c++)
      ss += (each[c] - mean) * (each[c] - mean);
    cr_log_info("molecule %lld: %d conformers %.6f %.6f %.6f, mean %.6f, stored %.6f (sd %.6f, stored %.6f)",
                three[k * 5], nc, each[0], each[1], nc > 2 ? each[2] : NAN, mean, score, sqrt(ss / (nc - 1)), sd);
    /* (an SDF's coordinates are rounded to 1e-4 Å) */
    cr_assert_float_eq(score, mean, 1e-3, "score %.6f, mean of its conformers' %.6f", score, mean);
    cr_assert_float_eq(sd, sqrt(ss / (nc - 1)), 1e-3);
    mol_free(&m);
  }
  /* aggregate: max scores again: one conformer's score the same, the
   * others' at least their mean, and above it somewhere */
  cr_assert_eq(tu_sh(NULL, "cp %s %s/mean.db", db, dir), 0);
  char *before = tu_query(db, "SELECT mol_id, score FROM scores WHERE conformer_sd IS NULL ORDER BY 1");
  cr_assert_eq(tu_se3(&out, "run %s --set stages.score.aggregate=max", wf), 0, "%s", out);
  free(out);
  char *after = tu_query(db, "SELECT mol_id, score FROM scores WHERE conformer_sd IS NULL ORDER BY 1");
  cr_assert_str_eq(before, after, "one conformer: the same score whatever the aggregate");
  char *cmp = NULL;
  cr_assert_eq(tu_sh(&cmp,
                     "sqlite3 -readonly '%s' \"ATTACH '%s/mean.db' AS o; SELECT sum(a.score >= b.score - 1e-12) || ' ' || "
                     "sum(a.score > b.score + 1e-9) || ' ' || count(*) FROM main.scores a JOIN o.scores b USING "
                     "(mol_id) WHERE a.conformer_sd IS NOT NULL\"",
                     db, dir),
               0, "%s", cmp);
  int ge = 0, gt = 0, all = 0;
  cr_assert_eq(sscanf(cmp, "%d %d %d", &ge, &gt, &all), 3, "%s", cmp);
  cr_assert_eq(all, n3);
  cr_assert_eq(ge, all, "a max below the mean: %s", cmp);
  cr_assert_gt(gt, all / 2, "the max equals the mean for most molecules: %s", cmp);
  free(cmp);
  free(before);
  free(after);
  /* predict: the card's conformers by default; another seed (not a
   * featurisation key) draws other shapes; another N is taken */
  const char *lib = tu_src("workflows/data/delaney_first60.csv");
  const char *sets[] = {"", "--set stages.ingest.seed=7", "--set stages.ingest.conformers=1"};
  char *res[3];
  for (int i = 0; i < 3; i++) {
    char pdir[1100], pdb[1200];
    snprintf(pdir, sizeof pdir, "%s/lib%d", dir, i);
    cr_assert_eq(tu_se3(&out, "predict %s/work %s --workdir %s %s", dir, lib, pdir, sets[i]), 0, "%s", out);
    free(out);
    snprintf(pdb, sizeof pdb, "%s/screen.db", pdir);
    res[i] = tu_query(pdb, "SELECT group_concat(printf('%.17g', score)) FROM (SELECT score FROM scores ORDER BY mol_id)");
    long long n_sd = tu_query_int(pdb, "SELECT count(conformer_sd) FROM scores");
    if (i < 2)
      cr_assert_gt(n_sd, 10, "predict %s: %lld molecules with conformer_sd", sets[i], n_sd);
    else
      cr_assert_eq(n_sd, 0, "predict %s: %lld molecules with conformer_sd", sets[i], n_sd);
  }
  cr_assert(res[0] && res[1] && strcmp(res[0], res[1]) != 0, "another seed gave the same scores");
  for (int i = 0; i < 3; i++)
    free(res[i]);
  free(one);
  free(three);
  free(wf);
  free(dir);
}

/* Changing `conformers` redoes ingest and everything after it, and
 * --dry-run says so before; shards and merge give one run's rows. */
Test(conformers, keyed_rerun_and_shards) {
  char *dir = tu_tmpdir("conf_keyed");
  char *wf = write_wf(dir, "wf.yaml", "work", 1, NULL);
  char *out = NULL;
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  free(out);
  char db[1024];
  snprintf(db, sizeof db, "%s/work/screen.db", dir);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM graphs WHERE substr(graph, 1, 4) = CAST('SE3K' AS BLOB)"), 0);
  cr_assert_eq(tu_se3(&out, "run %s --dry-run --set stages.ingest.conformers=3", wf), 0, "%s", out);
  cr_log_info("%s", out);
  cr_assert(strstr(out, "ingest: its settings changed: redone whole") &&
                strstr(out, "graph: the settings of a stage before it changed: redone whole"),
            "the dry run does not say that ingest and graph are redone:\n%s", out);
  free(out);
  cr_assert_eq(tu_se3(&out, "run %s --set stages.ingest.conformers=3", wf), 0, "%s", out);
  free(out);
  long long sets = tu_query_int(db, "SELECT count(*) FROM graphs WHERE substr(graph, 1, 4) = CAST('SE3K' AS BLOB)");
  cr_assert_gt(sets, 15, "%lld graphs rows of several conformers after the rerun", sets);
  cr_assert_eq(tu_query_int(db, "SELECT count(*) FROM bases WHERE substr(basis, 1, 4) = CAST('SE3K' AS BLOB)"), sets);
  /* the same with three shards and merge */
  char *wf3 = write_wf(dir, "wf3.yaml", "sharded", 3, NULL);
  char merged[1024];
  snprintf(merged, sizeof merged, "%s/sharded/screen.db", dir);
  const char *const stages[] = {"ingest", "graph", "basis"};
  run_sharded(wf3, merged, stages, 3);
  const char *q[] = {"SELECT id, hex(mol) FROM molecules ORDER BY id", "SELECT mol_id, hex(graph) FROM graphs ORDER BY 1",
                     "SELECT mol_id, hex(basis) FROM bases ORDER BY 1"};
  for (int i = 0; i < 3; i++) {
    char *a = tu_query(db, q[i]), *b = tu_query(merged, q[i]);
    cr_assert(a && b && strcmp(a, b) == 0, "%s: merged shards differ from one run", q[i]);
    free(a);
    free(b);
  }
  free(wf3);
  free(wf);
  free(dir);
}

/* Scores with three shards of a score-only workflow and merge: those of one
 * run. */
Test(conformers, sharded_scores_equal_one_run) {
  char *dir = tu_tmpdir("conf_shard_score");
  char *wf = write_wf(dir, "wf.yaml", "model", 3, "  train: {ensemble: 1, set: a, " TRAIN "}\n");
  char *out = NULL;
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  free(out);
  char stages[1024];
  snprintf(stages, sizeof stages, "  score: {set: a, checkpoint: %s/model}\n", dir);
  char *one = write_wf(dir, "one.yaml", "one", 3, stages), *sh = write_wf(dir, "sh.yaml", "sh", 3, stages);
  cr_assert_eq(tu_se3(&out, "run %s", one), 0, "%s", out);
  free(out);
  char a_db[1024], b_db[1024];
  snprintf(a_db, sizeof a_db, "%s/one/screen.db", dir);
  snprintf(b_db, sizeof b_db, "%s/sh/screen.db", dir);
  const char *const order[] = {"ingest", "graph", "score"};
  run_sharded(sh, b_db, order, 3);
  const char *q = "SELECT mol_id, printf('%.17g %.17g', score, conformer_sd) FROM scores ORDER BY 1";
  char *a = tu_query(a_db, q), *b = tu_query(b_db, q);
  cr_assert(a && b);
  cr_assert_gt(tu_query_int(a_db, "SELECT count(*) FROM scores WHERE conformer_sd IS NOT NULL"), 10);
  cr_assert_str_eq(a, b, "sharded scores differ from one run's");
  free(a);
  free(b);
  free(one);
  free(sh);
  free(wf);
  free(dir);
}

/* kill -9 while training on sampled conformers: the resumed checkpoints are
 * those of an uninterrupted run, byte for byte. */
Test(conformers, kill9_resumes_training_on_conformers) {
  char *dir = tu_tmpdir("conf_kill9");
  char *wf = write_wf(dir, "wf.yaml", "ref", 3,
                      "  train: {ensemble: 1, set: a, target: logp, epochs: 12, batch_size: 4, model: small, arch: {degrees: 2}, "
                      "patience: 0}\n");
  char *out = NULL;
  cr_assert_eq(tu_se3(&out, "run %s --until basis", wf), 0, "%s", out);
  free(out);
  char ref[1024], wd[1024], log[1024], start[1100], reset[3300];
  snprintf(ref, sizeof ref, "%s/ref", dir);
  snprintf(wd, sizeof wd, "%s/killed", dir);
  snprintf(log, sizeof log, "%s/log.txt", dir);
  cr_assert_eq(tu_sh(NULL, "mkdir -p %s && cp %s/screen.db %s/", wd, ref, wd), 0);
  snprintf(start, sizeof start, "%s/start", dir);
  snprintf(reset, sizeof reset, "rm -rf %s && cp -r %s %s", wd, start, wd);
  cr_assert_eq(tu_sh(NULL, "cp -r %s %s", wd, start), 0);
  double t0 = tu_now();
  cr_assert_eq(tu_se3(&out, "run %s", wf), 0, "%s", out);
  free(out);
  double full = tu_now() - t0;
  cr_log_info("uninterrupted training: %.2f s", full);
  char *argv[] = {"se3screen", "run", (char *)wf, "--workdir", wd, NULL};
  char db[1100];
  snprintf(db, sizeof db, "%s/screen.db", wd);
  int kills = tu_kills_mid_way(log, argv, 0.1, 0.1 + 0.15 * full, 3, reset, db, "train");
  cr_assert_eq(tu_se3(&out, "run %s --workdir %s", wf, wd), 0, "%s", out);
  free(out);
  cr_log_info("%d kills", kills);
  cr_assert_geq(kills, 3, "only %d runs were killed mid-way", kills);
  const char *const files[] = {"epoch-12.ckpt", "epoch-11.ckpt", "best.ckpt"};
  tu_assert_same_training(ref, wd, files, 3);
  free(wf);
  free(dir);
}
