/* The whole SE(3)-Transformer in double precision on a small configuration:
 * the backward against finite differences for every parameter tensor and the
 * node features (without and with the smooth cutoff envelope), and the
 * prediction's invariance under rotating the molecules (their bases) and
 * permuting atoms. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/se3.h"
#include "models/so3.h"
#include "tests/gradcheck.h"

/* Two random molecules of 5 and 4 atoms, every ordered pair an edge. */
struct tbatch {
  int N, E, G;
  int32_t src[64], in_start[16], graph_start[3];
  double pos[16 * 3], node[16 * 8], edge[64 * 6], *basis;
  struct se3_batch b;
};

static void make_batch(struct tbatch *t, const struct se3_model *m, const double Q[9], const int *perm, uint64_t seed) {
  memset(t, 0, sizeof *t);
  uint64_t rng = seed;
  int sizes[2] = {5, 4};
  t->G = 2;
  t->N = 9;
  for (int i = 0; i < t->N * 3; i++)
    t->pos[i] = 1.5 * gc_rand(&rng);
  for (int i = 0; i < t->N * m->cfg.node_in; i++)
    t->node[i] = gc_rand(&rng);
  double bond[64];
  for (int i = 0; i < 64; i++)
    bond[i] = gc_rand(&rng);
  /* atom order: node j of the batch is atom perm[j] of the same molecule */
  double pos[16 * 3], node[16 * 8];
  for (int j = 0; j < t->N; j++) {
    int a = perm ? perm[j] : j;
    for (int k = 0; k < 3; k++)
      pos[3 * j + k] = t->pos[3 * a + k];
    for (int k = 0; k < m->cfg.node_in; k++)
      node[j * m->cfg.node_in + k] = t->node[a * m->cfg.node_in + k];
  }
  memcpy(t->node, node, sizeof node);
  int first = 0;
  t->E = 0;
  t->in_start[0] = 0;
  for (int g = 0; g < 2; g++) {
    t->graph_start[g] = first;
    for (int j = first; j < first + sizes[g]; j++) {
      for (int i = first; i < first + sizes[g]; i++) {
        if (i == j) continue;
        int ai = perm ? perm[i] : i, aj = perm ? perm[j] : j;
        double rel[3], rr[3];
        for (int k = 0; k < 3; k++)
          rel[k] = pos[3 * j + k] - pos[3 * i + k];
        if (Q)
          so3_matvec(Q, rel, rr);
        else
          memcpy(rr, rel, sizeof rr);
        double dist = sqrt(rel[0] * rel[0] + rel[1] * rel[1] + rel[2] * rel[2]);
        int lo = ai < aj ? ai : aj, hi = ai < aj ? aj : ai; /* a symmetric "bond" value */
        for (int k = 0; k < 5; k++)
          t->edge[t->E * 6 + k] = bond[(lo * 7 + hi + k) % 64];
        t->edge[t->E * 6 + 5] = dist;
        t->src[t->E] = i;
        float rf[3] = {(float)rr[0], (float)rr[1], (float)rr[2]};
        float *bb = malloc(m->plan.per_edge * sizeof *bb);
        basis_edge(&m->plan, rf, bb);
        t->basis = realloc(t->basis, (size_t)(t->E + 1) * m->plan.per_edge * sizeof *t->basis);
        for (size_t k = 0; k < m->plan.per_edge; k++)
          t->basis[(size_t)t->E * m->plan.per_edge + k] = bb[k];
        free(bb);
        t->E++;
      }
      t->in_start[j + 1] = t->E;
    }
    first += sizes[g];
  }
  t->graph_start[2] = first;
  t->b = (struct se3_batch){t->N, t->E, t->G, t->node, t->edge, t->src, t->in_start, t->graph_start, t->basis, NULL, 0};
}

static const struct se3_config small = {.layers = 2,
                                        .degrees = 3,
                                        .channels = 4,
                                        .heads = 2,
                                        .channels_div = 2,
                                        .node_in = 3,
                                        .edge_in = 6,
                                        .radial_hidden = 4,
                                        .mlp_hidden = 6,
                                        .pool_max = 0,
                                        .outputs = 2};

struct mcase {
  struct se3_model m;
  double *p, out[4], G[4];
  struct tbatch t;
};

static double loss(void *ctx) {
  struct mcase *c = ctx;
  struct se3_tape *tape = se3_model_forward(&c->m, c->p, &c->t.b, c->out);
  cr_assert(tape);
  se3_tape_free(tape);
  return c->G[0] * c->out[0] + c->G[1] * c->out[1] + c->G[2] * c->out[2] + c->G[3] * c->out[3];
}

/* envelope: 0 none; 1 cosine at 2.5 Å (the random pairs lie about 0.3 to
 * 3.5 Å apart: weights from 0 to near 1); 2 the polynomial envelope with
 * bonds_kept (edges whose random "no bond" feature is below 0.5 weigh 1). The envelope cases
 * check a quarter of the parameters (spread over every tensor), to keep the
 * suite's time. */
static void check_model(int pool_max, int envelope, int embed, int layers) {
  struct mcase c;
  struct se3_error err;
  struct se3_config cfg = small;
  cfg.pool_max = pool_max;
  cfg.embed = embed;
  cfg.layers = layers;
  cfg.envelope = envelope == 2 ? SE3_ENVELOPE_POLY : envelope ? SE3_ENVELOPE_COSINE : SE3_ENVELOPE_NONE;
  cfg.cutoff = 2.5f;
  cfg.bonds_kept = envelope == 2;
  cr_assert_eq(se3_model_init(&c.m, &cfg, &err), 0, "%s", se3_error_str(&err).s);
  c.p = malloc(c.m.n_params * sizeof *c.p);
  se3_model_init_params(&c.m, c.p, 7);
  uint64_t rng = 11;
  /* layer-norm gains and shifts off their initial 1 and 0, so every term counts */
  gc_fill(c.p, c.m.n_params, &rng, 0.6);
  make_batch(&c.t, &c.m, NULL, NULL, 5);
  gc_fill(c.G, 4, &rng, 1.0);
  if (envelope) { /* the weights span (0, 1), some edges at 0 and, with bonds_kept, some at 1 */
    double w[64];
    se3_edge_weights(&cfg, c.t.edge, c.t.E, w);
    int zero = 0, one = 0, between = 0;
    for (int e = 0; e < c.t.E; e++) {
      zero += w[e] == 0;
      one += w[e] == 1;
      between += w[e] > 0.05 && w[e] < 0.95;
    }
    cr_log_info("envelope weights: %d of %d edges at 0, %d at 1, %d between 0.05 and 0.95", zero, c.t.E, one, between);
    if (envelope == 1)
      cr_assert(zero > 0 && between > c.t.E / 4 && one == 0);
    else
      cr_assert(one > 0 && zero + between >= 2);
  }
  double *dp = calloc(c.m.n_params, sizeof *dp), dnode[16 * 8];
  struct se3_tape *tape = se3_model_forward(&c.m, c.p, &c.t.b, c.out);
  se3_model_backward(&c.m, c.p, &c.t.b, tape, c.G, dp, dnode);
  se3_tape_free(tape);
  double wn = gc_worst(loss, &c, c.t.node, dnode, (size_t)(c.t.N * cfg.node_in), 1000);
  double wp = gc_worst(loss, &c, c.p, dp, c.m.n_params, envelope ? 1000 : 4000);
  cr_log_info("model (%s pooling, envelope %d, embed %d, %d layers, %zu parameters): worst gradient error %.2e "
              "(node features), %.2e (parameters)",
              pool_max ? "max" : "mean", envelope, embed, layers, c.m.n_params, wn, wp);
  cr_assert_lt(wn, 1e-6);
  cr_assert_lt(wp, 1e-6);
  free(dp);
  free(c.p);
  free(c.t.basis);
  se3_model_free(&c.m);
}

Test(grad_model, mean_pooled_model_gradients_match_finite_differences) { check_model(0, 0, 0, 2); }
Test(grad_model, max_pooled_model_gradients_match_finite_differences) { check_model(1, 0, 0, 2); }
Test(grad_model, gradients_with_the_envelope_match_finite_differences) { check_model(0, 1, 0, 2); }
Test(grad_model, gradients_with_the_envelope_and_bonds_match_finite_differences) { check_model(1, 2, 0, 2); }
/* the node features' embedding (arch.embed), before the first block and,
 * without blocks, before the head */
Test(grad_model, gradients_with_an_embedding_match_finite_differences) {
  check_model(0, 1, 5, 2);
  check_model(1, 1, 2, 0);
}

/* Rotating every molecule and permuting atoms leaves the prediction alone. */
Test(grad_model, prediction_is_invariant) {
  struct se3_model m;
  struct se3_error err;
  struct se3_config cfg = small;
  cfg.pool_max = 1;
  cr_assert_eq(se3_model_init(&m, &cfg, &err), 0, "%s", se3_error_str(&err).s);
  double *p = malloc(m.n_params * sizeof *p);
  se3_model_init_params(&m, p, 3);
  double Q[9];
  uint64_t rng = 42;
  so3_random_rotation(&rng, Q);
  const int perm[9] = {3, 0, 4, 1, 2, 8, 6, 5, 7};
  struct tbatch a, b, c;
  make_batch(&a, &m, NULL, NULL, 9);
  make_batch(&b, &m, Q, NULL, 9);
  make_batch(&c, &m, NULL, perm, 9);
  double ya[4], yb[4], yc[4];
  se3_tape_free(se3_model_forward(&m, p, &a.b, ya));
  se3_tape_free(se3_model_forward(&m, p, &b.b, yb));
  se3_tape_free(se3_model_forward(&m, p, &c.b, yc));
  double worst_r = 0, worst_p = 0, scale = 0;
  for (int i = 0; i < 4; i++) {
    scale = fmax(scale, fabs(ya[i]));
    worst_r = fmax(worst_r, fabs(yb[i] - ya[i]));
    worst_p = fmax(worst_p, fabs(yc[i] - ya[i]));
  }
  cr_log_info("invariance: rotation %.2e, permutation %.2e (outputs ~%.2f; bases in fp32)", worst_r / scale,
              worst_p / scale, scale);
  cr_assert_gt(scale, 1e-3, "a degenerate model proves nothing");
  cr_assert_lt(worst_r / scale, 1e-5);
  cr_assert_lt(worst_p / scale, 1e-12);
  free(p);
  free(a.basis);
  free(b.basis);
  free(c.basis);
  se3_model_free(&m);
}
