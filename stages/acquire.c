/* acquire.c — active learning: which molecules of a set to dock next.
 *
 * Optional: it runs when the workflow names stages.acquire. With it, dock
 * docks only the molecules acquired, train learns their docking scores
 * (stages.train.target: dock), score predicts the whole set, and the runner
 * goes round: after score it runs acquire again (struct stage's
 * cycle_end), which decides the next round, and then dock, graph, basis,
 * train and score again, until `rounds` rounds after the first are
 * decided. Each round is one chunk of this stage, decided in one
 * transaction with its ledger row:
 *
 *   - round 0: `initial` molecules of the set (a count, or a fraction of
 *     it, rounded up), at random: the molecules ordered by a hash of the
 *     seed and their id, the first taken (the same seed, the same sample,
 *     whatever order the plan reads them in);
 *   - round r >= 1: `batch` molecules not acquired before, the best by
 *     `rule` over the scores of the model trained on every label so far:
 *     `greedy` the predicted score; `ucb` the prediction plus (minus, for
 *     `order: ascending`) `beta` times the ensemble's spread, calibrated on
 *     the test split (below); `thompson` one member's prediction per
 *     molecule, the member drawn by a hash of the seed, round and molecule
 *     (Thompson sampling over the ensemble); `random` at random (seed and
 *     round hashed).
 *     Ties go to the lower id.
 *
 * Every decision is a row of `acquisitions` (its round, rule, value,
 * prediction, uncertainty and rank in the round) and every round one of
 * `rounds` (the model's hash, the labels it had, the calibration), so one
 * query says when a molecule was picked and why. A molecule is acquired
 * once; one the oracle cannot score (a table without it, a failed
 * docking) has cost its place and is never labelled, as MolPAL counts it.
 *
 * Calibration (rule ucb): the ensemble's members share their split, so
 * the test split is held out from all of them; c^2 is the mean square of
 * (label - mean) over its molecules divided by the mean square of the
 * spread (the members' sample standard deviation), and the uncertainty
 * used is c times the spread: the factor that makes the spread as wide as
 * the held-out errors on average (variance scaling by a ratio of means).
 * Not the mean of the ratios (label - mean)^2 / spread^2: a spread drawn
 * from a few members is often near zero, and with two members that mean
 * does not even exist (the ratio of two chi-square variables of one
 * degree of freedom), so it came out at 7 to 55 and the uncertainty term
 * drowned the prediction. Without a test split, or with no spread on it,
 * or fewer than 5 molecules there, c = 1; the round records c and the
 * molecules it had.
 *
 * Each round r >= 1 also keeps what decided it, which the next round
 * redoes in place (keep_round): the models with their test metrics and
 * best checkpoints (round_models, models/rounds/<r>/), the set's scores
 * (round_scores, unless keep_scores is false) and the ledger rows of the
 * work since round r - 1 (round_chunks).
 *
 * Under `se3screen slurm` no runner goes round: each round is decided by a
 * step of its own, `run --stage acquire --round R` (ctx->round), after the
 * steps of round R - 1; it decides only the next round, and only once
 * every molecule of round R - 1 is docked or rejected and the scores come
 * from a model trained since (round_ready).
 *
 * Killed anywhere, a run resumes: a round is decided whole or not at all,
 * and the stages around it are keyed or ledgered as always. The decisions
 * depend only on the seed and the stored scores, so a rerun decides the
 * same molecules.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/fsutil.h"
#include "stage.h"

enum rule { RULE_GREEDY, RULE_UCB, RULE_THOMPSON, RULE_RANDOM };

struct astage {
  const char *set;
  enum rule rule;
  double initial, batch, beta;
  int64_t rounds, decided, pool;
  int ascending, keep_scores;
  uint64_t seed;
  uint8_t *needed;
};

/* The model whose scores decide: this workflow's training, as score names
 * it (one model: its id; an ensemble: "train"). */
#define MODEL_SQL "(SELECT CASE WHEN count(*) > 1 THEN 'train' ELSE min(id) END FROM models)"

struct cand {
  int64_t id;
  double pred, spread, value, draw; /* draw: thompson's member prediction */
  uint64_t key;
};

static const char *rule_name(enum rule r) {
  return r == RULE_UCB ? "ucb" : r == RULE_THOMPSON ? "thompson" : r == RULE_RANDOM ? "random" : "greedy";
}

/* A count (>= 1) or a fraction (< 1, rounded up) of n. */
static int64_t how_many(double x, int64_t n) {
  int64_t k = x >= 1 ? (int64_t)x : (int64_t)ceil(x * (double)n - 1e-9);
  return k < 0 ? 0 : k > n ? n : k;
}

static uint64_t mix(uint64_t seed, uint64_t round, int64_t id) {
  uint64_t h = se3_hash_bytes(SE3_HASH_INIT, &seed, sizeof seed);
  h = se3_hash_bytes(h, &round, sizeof round);
  return se3_hash_bytes(h, &id, sizeof id);
}

static int64_t query_int(sqlite3 *db, const char *sql, const char *p1, int64_t dflt) {
  sqlite3_stmt *st = NULL;
  int64_t v = dflt;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
    if (p1) sqlite3_bind_text(st, 1, p1, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) v = sqlite3_column_int64(st, 0);
  }
  sqlite3_finalize(st);
  return v;
}

/* Whether round r >= 1 may be decided now, when the runner is not the one
 * going round (`--round`): every molecule round r - 1 picked is docked or
 * a reject of dock, and, if any was docked, the scores come from a model
 * other than the one that decided round r - 1 (trained since). Else
 * STAGE_ERROR saying what is missing: the steps of round r - 1 did not all
 * run. */
static int round_ready(struct stage_ctx *ctx, int64_t r) {
  char *sql = sqlite3_mprintf("SELECT count(*) FROM acquisitions q WHERE q.round = %lld AND NOT EXISTS (SELECT 1 "
                              "FROM docking k WHERE k.mol_id = q.mol_id) AND NOT EXISTS (SELECT 1 FROM rejects j "
                              "WHERE j.stage = 'dock' AND j.mol_id = q.mol_id)",
                              (long long)r - 1);
  int64_t undocked = query_int(ctx->db, sql, NULL, -1);
  sqlite3_free(sql);
  if (undocked != 0)
    return stage_fail_at(ctx, NULL, "round %lld cannot be decided yet: %lld molecule%s of round %lld %s not docked "
                                    "(run the dock stage first)",
                         (long long)r, (long long)undocked, undocked == 1 ? "" : "s", (long long)r - 1,
                         undocked == 1 ? "is" : "are");
  sql = sqlite3_mprintf("SELECT (SELECT count(*) FROM acquisitions q JOIN docking k ON k.mol_id = q.mol_id WHERE "
                        "q.round = %lld) > 0 AND (SELECT max(model_hash) FROM scores WHERE model = " MODEL_SQL
                        ") IS (SELECT model_hash FROM rounds WHERE round = %lld)",
                        (long long)r - 1, (long long)r - 1);
  int64_t stale = query_int(ctx->db, sql, NULL, 1);
  sqlite3_free(sql);
  if (stale)
    return stage_fail_at(ctx, NULL, "round %lld cannot be decided yet: the set's scores do not come from a model "
                                    "trained since round %lld's molecules were docked (run train and score first)",
                         (long long)r, (long long)r - 1);
  return STAGE_OK;
}

static int acquire_begin(struct stage_ctx *ctx, int64_t *n_chunks, int64_t *n_items) {
  struct astage *a = calloc(1, sizeof *a);
  if (!a) return stage_fail_at(ctx, NULL, "out of memory");
  ctx->state = a;
  const struct cfg_node *c = ctx->cfg;
  a->set = cfg_str(c, "set");
  const char *rule = cfg_str(c, "rule");
  a->rule = !strcmp(rule, "ucb")        ? RULE_UCB
            : !strcmp(rule, "thompson") ? RULE_THOMPSON
            : !strcmp(rule, "random")   ? RULE_RANDOM
                                        : RULE_GREEDY;
  a->initial = cfg_float(c, "initial");
  a->batch = cfg_float(c, "batch");
  a->beta = cfg_float(c, "beta");
  a->rounds = cfg_int(c, "rounds");
  a->ascending = !strcmp(cfg_str(c, "order"), "ascending");
  a->seed = (uint64_t)cfg_int(c, "seed");
  a->keep_scores = cfg_bool(c, "keep_scores");
  const char *label = stage_dock_label(ctx->root);
  if (!label)
    return stage_fail_at(ctx, c, "stages.acquire: active learning labels the molecules it acquires by docking them: "
                                 "the workflow needs stages.dock (Vina, or oracle: table)");
  if (strcmp(cfg_str(ctx->root, "stages.dock.set"), a->set))
    return stage_fail_at(ctx, cfg_get(c, "set") ? cfg_get(c, "set") : c,
                         "stages.acquire.set '%s' is not the set dock docks ('%s', stages.dock.set)", a->set,
                         cfg_str(ctx->root, "stages.dock.set"));
  char *sql = sqlite3_mprintf("SELECT count(*) FROM \"%w\".molecules m WHERE set_name = ?1 AND NOT EXISTS (SELECT 1 "
                              "FROM \"%w\".duplicates d WHERE d.mol_id = m.id)",
                              ctx->src, ctx->src);
  a->pool = query_int(ctx->db, sql, a->set, 0);
  sqlite3_free(sql);
  if (a->pool == 0)
    return stage_fail_at(ctx, cfg_get(c, "set") ? cfg_get(c, "set") : c,
                         "stages.acquire.set: the set '%s' has no molecules", a->set);
  a->decided = query_int(ctx->db, "SELECT count(*) FROM rounds", NULL, 0);
  /* one chunk a round: the next undecided one is due at the run's start
   * (round 0) or at the end of a cycle (the others) */
  *n_chunks = a->rounds + 1;
  if (a->decided > *n_chunks) *n_chunks = a->decided; /* (fewer rounds asked for now: those decided stand) */
  *n_items = *n_chunks;
  a->needed = calloc((size_t)*n_chunks + 1, 1);
  if (!a->needed) return stage_fail_at(ctx, NULL, "out of memory");
  if (ctx->round >= 0) {
    /* `run --stage acquire --round N` (a Slurm step between rounds) */
    if (ctx->round > a->rounds)
      return stage_fail_at(ctx, cfg_get(c, "rounds") ? cfg_get(c, "rounds") : c,
                           "round %lld is beyond the budget: stages.acquire.rounds is %lld (rounds 0 to %lld)",
                           (long long)ctx->round, (long long)a->rounds, (long long)a->rounds);
    if (ctx->round > a->decided)
      return stage_fail_at(ctx, NULL, "round %lld cannot be decided yet: %lld round%s decided, round %lld comes first",
                           (long long)ctx->round, (long long)a->decided, a->decided == 1 ? "" : "s",
                           (long long)a->decided);
    if (ctx->round == a->decided) {
      if (a->decided > 0 && round_ready(ctx, a->decided) != STAGE_OK) return STAGE_ERROR;
      a->needed[a->decided] = 1;
    } else {
      ctx->report->log(ctx, "round %lld is decided already", (long long)ctx->round);
    }
  } else if (a->decided < a->rounds + 1 && (a->decided == 0 || ctx->cycle)) {
    a->needed[a->decided] = 1;
  }
  ctx->chunk_needed = a->needed;
  ctx->items_done = *n_items - (a->needed[a->decided] ? 1 : 0);
  return STAGE_OK;
}

static int cmp_cand(const void *x, const void *y) {
  const struct cand *p = x, *q = y;
  if (p->value < q->value) return -1;
  if (p->value > q->value) return 1;
  return p->id < q->id ? -1 : p->id > q->id;
}

static int cmp_key(const void *x, const void *y) {
  const struct cand *p = x, *q = y;
  if (p->key != q->key) return p->key < q->key ? -1 : 1;
  return p->id < q->id ? -1 : p->id > q->id;
}

/* Fewer held-out molecules than this leave the spread as it is (c = 1). */
#define CAL_MIN 5

/* rule ucb: the factor that makes the ensemble's spread one held-out error wide (see the top). */
static double calibration(struct stage_ctx *ctx, int64_t *n_used) {
  const char *sql = "SELECT sum((label - mu) * (label - mu)) / sum(var), count(*) FROM (SELECT p.mol_id, "
                    "max(p.label) AS label, avg(p.value) AS mu, max(0.0, (sum(p.value * p.value) - sum(p.value) * "
                    "sum(p.value) / count(*)) / (count(*) - 1)) AS var FROM predictions p JOIN models d ON d.id = "
                    "p.model WHERE p.split = 'test' GROUP BY p.mol_id HAVING count(*) > 1)";
  sqlite3_stmt *st = NULL;
  double c = 1;
  *n_used = 0;
  if (sqlite3_prepare_v2(ctx->db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW &&
      sqlite3_column_type(st, 0) != SQLITE_NULL) {
    double ms = sqlite3_column_double(st, 0);
    *n_used = sqlite3_column_int64(st, 1);
    if (ms > 0 && isfinite(ms) && *n_used >= CAL_MIN) c = sqrt(ms);
  }
  sqlite3_finalize(st);
  return c;
}

/* Round r >= 1 is decided by the work done since round r - 1 was: dock of
 * its molecules, the training on every label so far and the scores. The
 * next round redoes them in place, so the decision keeps a copy: the
 * ledger rows (round_chunks), the models with their test metrics and their
 * best checkpoints (round_models, the files under models/rounds/<r>/) and,
 * with keep_scores, the set's scores (round_scores). In the round's
 * transaction. */
static int keep_round(struct stage_ctx *ctx, struct astage *a, int64_t round) {
  char *sql = sqlite3_mprintf(
      "DELETE FROM round_chunks WHERE round = %lld; DELETE FROM round_models WHERE round = %lld; "
      "DELETE FROM round_scores WHERE round = %lld; "
      "INSERT INTO round_models(round, model, target, checkpoint, best_epoch, best_valid_loss, n_train, n_valid, "
      "n_test, test_mae, test_rmse, test_spearman) SELECT %lld, m.id, m.target, NULL, m.best_epoch, "
      "m.best_valid_loss, m.n_train, m.n_valid, m.n_test, t.mae, t.rmse, t.spearman FROM models m LEFT JOIN "
      "metrics t ON t.model = m.id AND t.split = 'test' AND t.epoch = (SELECT max(epoch) FROM metrics u WHERE "
      "u.model = m.id AND u.split = 'test');",
      (long long)round, (long long)round, (long long)round, (long long)round);
  if (a->keep_scores && sql) {
    char *more = sqlite3_mprintf("%s INSERT INTO round_scores(round, mol_id, score, std, members) SELECT %lld, "
                                 "s.mol_id, s.score, s.std, s.members FROM scores s JOIN \"%w\".molecules m ON "
                                 "m.id = s.mol_id WHERE s.model = " MODEL_SQL " AND m.set_name = %Q;",
                                 sql, (long long)round, ctx->src, a->set);
    sqlite3_free(sql);
    sql = more;
  }
  char *msg = NULL;
  /* (the ledger's rows: those of the chunks the round's work committed) */
  if (!sql || sqlite3_exec(ctx->db, sql, NULL, NULL, &msg) != SQLITE_OK ||
      ctx->ledger->copy_round(ctx->db, "round_chunks", round, round - 1, ctx->name, &msg) != SQLITE_OK) {
    se3_error_set(&ctx->err, SE3_ERR_DB, "round %lld: keeping what decided it: %s", (long long)round,
                  msg ? msg : "out of memory");
    sqlite3_free(msg);
    sqlite3_free(sql);
    return STAGE_ERROR;
  }
  sqlite3_free(sql);
  /* the checkpoints */
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(ctx->db, "SELECT id, checkpoint FROM models ORDER BY id", -1, &st, NULL) != SQLITE_OK)
    return stage_sql_fail(ctx, "reading the models");
  char dir[PATH_MAX], src[PATH_MAX + 512], dst[PATH_MAX + 512];
  snprintf(dir, sizeof dir, "%s/models/rounds/%lld", ctx->workdir, (long long)round);
  int ret = STAGE_OK, made = 0;
  while (ret == STAGE_OK && sqlite3_step(st) == SQLITE_ROW) {
    const char *id = (const char *)sqlite3_column_text(st, 0), *ck = (const char *)sqlite3_column_text(st, 1);
    const char *slash = id ? strrchr(id, '/') : NULL;
    if (!id || !ck || !slash) continue;
    if (!made && se3_mkdirs(dir) != 0) {
      ctx->report->log(ctx, "round %lld: %s: %s; its models' checkpoints are not kept", (long long)round, dir,
                       strerror(errno));
      break;
    }
    made = 1;
    snprintf(src, sizeof src, "%s/%s", ctx->workdir, ck);
    snprintf(dst, sizeof dst, "%s/train-%s.ckpt", dir, slash + 1);
    if (se3_keep_file(src, dst) != 0) {
      ctx->report->log(ctx, "round %lld: keeping %s as %s: %s; round_models.checkpoint is NULL", (long long)round, src,
                       dst, strerror(errno));
      continue;
    }
    char *u = sqlite3_mprintf("UPDATE round_models SET checkpoint = 'models/rounds/%lld/train-%q.ckpt' WHERE round = "
                              "%lld AND model = %Q",
                              (long long)round, slash + 1, (long long)round, id);
    if (!u || sqlite3_exec(ctx->db, u, NULL, NULL, NULL) != SQLITE_OK) ret = stage_sql_fail(ctx, "keeping a model");
    sqlite3_free(u);
  }
  sqlite3_finalize(st);
  return ret;
}

/* Reads the candidates of a round into *out (*n of them): the set's
 * molecules not acquired yet, with the model's scores (round 0, or rule
 * random: every molecule, no score). *no_spread: some candidate has no
 * spread. */
static int read_candidates(struct stage_ctx *ctx, const struct astage *a, int64_t round, enum rule rule,
                           struct cand **out, int64_t *n_out, int *no_spread_out) {
  char *sql = round == 0 || rule == RULE_RANDOM
                  ? sqlite3_mprintf("SELECT m.id, NULL, NULL FROM \"%w\".molecules m WHERE m.set_name = ?1 AND NOT "
                                    "EXISTS (SELECT 1 FROM \"%w\".duplicates d WHERE d.mol_id = m.id) AND NOT EXISTS "
                                    "(SELECT 1 FROM acquisitions q WHERE q.mol_id = m.id)",
                                    ctx->src, ctx->src)
                  : sqlite3_mprintf(
                        "SELECT m.id, s.score, s.std, s.members FROM \"%w\".molecules m JOIN scores s ON s.mol_id = "
                        "m.id AND s.model = " MODEL_SQL " WHERE m.set_name = ?1 AND NOT EXISTS (SELECT 1 "
                        "FROM \"%w\".duplicates d "
                        "WHERE d.mol_id = m.id) AND NOT EXISTS (SELECT 1 FROM acquisitions q WHERE "
                        "q.mol_id = m.id)",
                        ctx->src, ctx->src);
  sqlite3_stmt *st = NULL;
  if (!sql || sqlite3_prepare_v2(ctx->db, sql, -1, &st, NULL) != SQLITE_OK) {
    sqlite3_free(sql);
    return stage_sql_fail(ctx, "reading the candidates");
  }
  sqlite3_free(sql);
  sqlite3_bind_text(st, 1, a->set, -1, SQLITE_STATIC);
  struct cand *cs = NULL;
  int64_t n = 0, cap = 0;
  int rc, no_spread = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (n == cap) {
      cap = cap ? 2 * cap : 4096;
      struct cand *g = realloc(cs, (size_t)cap * sizeof *g);
      if (!g) {
        free(cs);
        sqlite3_finalize(st);
        return stage_fail_at(ctx, NULL, "out of memory");
      }
      cs = g;
    }
    struct cand *x = &cs[n++];
    x->id = sqlite3_column_int64(st, 0);
    x->pred = sqlite3_column_double(st, 1);
    no_spread |= sqlite3_column_type(st, 2) == SQLITE_NULL;
    x->spread = sqlite3_column_double(st, 2);
    x->key = mix(a->seed, (uint64_t)round, x->id);
    if (rule == RULE_THOMPSON) {
      /* one member's prediction, the member drawn by the seed, round and molecule */
      const uint8_t *b = sqlite3_column_blob(st, 3);
      int nb = sqlite3_column_bytes(st, 3) / 8;
      if (!b || nb < 2) {
        free(cs);
        sqlite3_finalize(st);
        return stage_fail_at(ctx, cfg_get(ctx->cfg, "rule"),
                             "stages.acquire.rule: thompson draws from an "
                             "ensemble's members: stages.train.ensemble >= 2");
      }
      int j = (int)(x->key % (uint64_t)nb);
      uint64_t u = 0;
      for (int k = 0; k < 8; k++)
        u |= (uint64_t)b[8 * j + k] << (8 * k);
      memcpy(&x->draw, &u, 8);
    }
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) {
    free(cs);
    return stage_sql_fail(ctx, "reading the candidates");
  }
  *out = cs;
  *n_out = n;
  *no_spread_out = no_spread;
  return STAGE_OK;
}

/* Writes the first `want` candidates of cs, in order, as the round's
 * acquisitions; c is ucb's calibration, sign the direction of the score. */
static int write_acquisitions(struct stage_ctx *ctx, int64_t round, enum rule rule, const struct cand *cs, int64_t want,
                              double sign, double c, int no_spread) {
  sqlite3_stmt *ins = NULL;
  if (sqlite3_prepare_v2(ctx->db,
                         "INSERT INTO acquisitions(round, mol_id, rule, value, prediction, uncertainty, rank) "
                         "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                         -1, &ins, NULL) != SQLITE_OK)
    return stage_sql_fail(ctx, "writing the acquisitions");
  int ret = STAGE_OK;
  for (int64_t i = 0; i < want && ret == STAGE_OK; i++) {
    const struct cand *x = &cs[i];
    sqlite3_reset(ins);
    sqlite3_bind_int64(ins, 1, round);
    sqlite3_bind_int64(ins, 2, x->id);
    sqlite3_bind_text(ins, 3, rule_name(rule), -1, SQLITE_STATIC);
    if (rule == RULE_RANDOM) {
      sqlite3_bind_null(ins, 4);
    } else {
      sqlite3_bind_double(ins, 4, sign * x->value); /* in the score's direction */
    }
    if (round == 0 || rule == RULE_RANDOM) {
      sqlite3_bind_null(ins, 5);
      sqlite3_bind_null(ins, 6);
    } else {
      sqlite3_bind_double(ins, 5, x->pred);
      if (no_spread)
        sqlite3_bind_null(ins, 6);
      else
        sqlite3_bind_double(ins, 6, c * x->spread);
    }
    sqlite3_bind_int64(ins, 7, i + 1);
    if (sqlite3_step(ins) != SQLITE_DONE) ret = stage_sql_fail(ctx, "writing an acquisition");
  }
  sqlite3_finalize(ins);
  return ret;
}

/* The round's row of `rounds`: what was acquired from how many
 * candidates, the labels so far, the model and the calibration. */
static int write_round(struct stage_ctx *ctx, int64_t round, enum rule rule, int64_t want, int64_t n, int64_t labelled,
                       double c, int64_t n_cal) {
  char when[32];
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
  char cal[64] = "NULL";
  if (rule == RULE_UCB) snprintf(cal, sizeof cal, "%.17g", c);
  char *r = sqlite3_mprintf(
      "INSERT INTO rounds(round, rule, n_acquired, n_candidates, n_labelled, model_hash, calibration, n_calibration, "
      "decided) VALUES(%lld, %Q, %lld, %lld, %lld, %s, %s, %lld, %Q)",
      (long long)round, rule_name(rule), (long long)want, (long long)n, (long long)labelled,
      round == 0 || rule == RULE_RANDOM ? "NULL" : "(SELECT max(model_hash) FROM scores WHERE model = " MODEL_SQL ")",
      cal, (long long)n_cal, when);
  char *msg = NULL;
  if (!r || sqlite3_exec(ctx->db, r, NULL, NULL, &msg) != SQLITE_OK) {
    se3_error_set(&ctx->err, SE3_ERR_DB, "writing round %lld: %s", (long long)round, msg ? msg : "out of memory");
    sqlite3_free(msg);
    sqlite3_free(r);
    return STAGE_ERROR;
  }
  sqlite3_free(r);
  return STAGE_OK;
}

static int decide(struct stage_ctx *ctx, struct astage *a, int64_t round, int64_t *n_ok) {
  int64_t want = how_many(round == 0 ? a->initial : a->batch, a->pool);
  enum rule rule = round == 0 ? RULE_RANDOM : a->rule;
  struct cand *cs = NULL;
  int64_t n = 0;
  int no_spread = 0;
  int ret = read_candidates(ctx, a, round, rule, &cs, &n, &no_spread);
  if (ret != STAGE_OK) return ret;
  if (round > 0 && rule != RULE_RANDOM && n == 0) {
    free(cs);
    return stage_fail_at(ctx, NULL,
                         "round %lld: no molecule of '%s' not yet acquired has a score: score the set "
                         "(stages.score.set: %s) before acquiring",
                         (long long)round, a->set, a->set);
  }
  double c = 1;
  int64_t n_cal = 0;
  if (rule == RULE_UCB) {
    if (no_spread) {
      free(cs);
      return stage_fail_at(ctx, cfg_get(ctx->cfg, "rule"),
                           "stages.acquire.rule: ucb needs the spread of an "
                           "ensemble's predictions: stages.train.ensemble >= 2");
    }
    c = calibration(ctx, &n_cal);
  }
  int64_t labelled = 0;
  {
    char *q = sqlite3_mprintf("SELECT count(*) FROM docking k JOIN \"%w\".molecules m ON m.id = k.mol_id WHERE "
                              "m.set_name = ?1",
                              ctx->src);
    labelled = query_int(ctx->db, q, a->set, 0);
    sqlite3_free(q);
  }
  double sign = a->ascending ? 1 : -1; /* the best first: lowest value */
  for (int64_t i = 0; i < n; i++) {
    struct cand *x = &cs[i];
    if (rule == RULE_GREEDY)
      x->value = sign * x->pred;
    else if (rule == RULE_UCB)
      x->value = sign * x->pred - a->beta * c * x->spread;
    else if (rule == RULE_THOMPSON)
      x->value = sign * x->draw;
  }
  if (rule == RULE_RANDOM)
    qsort(cs, (size_t)n, sizeof *cs, cmp_key);
  else
    qsort(cs, (size_t)n, sizeof *cs, cmp_cand);
  if (want > n) want = n;
  ret = write_acquisitions(ctx, round, rule, cs, want, sign, c, no_spread);
  free(cs);
  if (ret != STAGE_OK) return ret;
  if (round > 0 && (ret = keep_round(ctx, a, round)) != STAGE_OK) return ret;
  if ((ret = write_round(ctx, round, rule, want, n, labelled, c, n_cal)) != STAGE_OK) return ret;
  *n_ok = want;
  ctx->report->advance(ctx, 1);
  if (rule == RULE_UCB)
    ctx->report->log(ctx,
                     "round %lld: %lld of %lld candidates by ucb (beta %g, the spread x %.3f%s from %lld held-out "
                     "molecules); %lld labelled so far",
                     (long long)round, (long long)want, (long long)n, a->beta, c,
                     n_cal < CAL_MIN ? ", not calibrated" : "", (long long)n_cal, (long long)labelled);
  else
    ctx->report->log(ctx, "round %lld: %lld of %lld candidates by %s; %lld labelled so far", (long long)round,
                     (long long)want, (long long)n, rule_name(rule), (long long)labelled);
  return STAGE_OK;
}

static int acquire_chunk(struct stage_ctx *ctx, int64_t chunk, int64_t *n_ok, int64_t *n_rej) {
  struct astage *a = ctx->state;
  *n_rej = 0;
  *n_ok = 0;
  if (chunk != a->decided) return stage_fail_at(ctx, NULL, "round %lld is not the next (%lld)", (long long)chunk,
                                                (long long)a->decided);
  return decide(ctx, a, chunk, n_ok);
}

static void acquire_end(struct stage_ctx *ctx) {
  struct astage *a = ctx->state;
  if (!a) return;
  free(a->needed);
  free(a);
  ctx->state = NULL;
}

/* The runner, after score: 1 while a round is still to be decided. */
static int acquire_due(sqlite3 *db, const struct cfg_node *root) {
  int64_t decided = query_int(db, "SELECT count(*) FROM rounds", NULL, 0);
  return decided > 0 && decided < cfg_int(root, "stages.acquire.rounds") + 1;
}

static const struct stage_keyed acquire_keyed = {0}; /* by round: its rows are never pruned */

const struct stage stage_acquire = {
    .name = "acquire",
    .tables = "acquisitions rounds round_models round_scores round_chunks",
    .after = "ingest",
    .flags = STAGE_OPTIONAL,
    .begin = acquire_begin,
    .run_chunk = acquire_chunk,
    .end = acquire_end,
    .keyed = &acquire_keyed,
    .reads = {.set = "stages.acquire.set"},
    .show = {.unit = "round", .done = "decided"},
    .cycle = {.end = "score", .due = acquire_due},
};
