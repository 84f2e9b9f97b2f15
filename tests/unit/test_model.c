/* The SE(3)-Transformer in float (the product build) on molecules built by
 * hand, through the real graph and basis code: the prediction is unchanged,
 * to fp32 round-off, by rotating and translating the coordinates and by
 * permuting the atoms; degree-1 hidden features rotate with D_1. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "chem/graph.h"
#include "chem/mol.h"
#include "models/cpu/model.h"
#include "models/so3.h"
#include "tests/testutil.h"

enum { N_MOL = 3 };

/* A batch made from molecules: graphs concatenated, bases recomputed. */
struct mbatch {
  struct se3_batch b;
  float *node, *edge, *basis;
  int32_t *src, *in_start, graph_start[N_MOL + 1];
};

static const uint8_t elements[] = {1, 6, 7, 8};

static void batch_from(struct mbatch *mb, struct mol *mols, const struct se3_model *m) {
  struct graph_opts go = {.cutoff = 2.6,
                          .edges = GRAPH_EDGES_RADIUS_BONDS,
                          .elements = elements,
                          .n_elements = 4,
                          .with_other = 1,
                          .with_charge = 1};
  struct graph g[N_MOL];
  int N = 0, E = 0;
  char err[256];
  for (int i = 0; i < N_MOL; i++) {
    graph_init(&g[i]);
    cr_assert_eq(graph_build(&mols[i], &go, &g[i], err, sizeof err), 0, "%s", err);
    cr_assert_eq(g[i].node_width, m->cfg.node_in);
    N += g[i].n_nodes;
    E += g[i].n_edges;
  }
  memset(mb, 0, sizeof *mb);
  mb->node = malloc((size_t)N * (size_t)m->cfg.node_in * sizeof(float));
  mb->edge = malloc((size_t)E * 6 * sizeof(float));
  mb->basis = malloc((size_t)E * m->plan.per_edge * sizeof(float));
  mb->src = malloc((size_t)E * sizeof(int32_t));
  mb->in_start = calloc((size_t)N + 1, sizeof(int32_t));
  int n0 = 0, e0 = 0;
  for (int i = 0; i < N_MOL; i++) {
    mb->graph_start[i] = n0;
    memcpy(mb->node + (size_t)n0 * (size_t)m->cfg.node_in, g[i].node_feat,
           (size_t)g[i].n_nodes * (size_t)m->cfg.node_in * sizeof(float));
    memcpy(mb->edge + (size_t)e0 * 6, g[i].edge_feat, (size_t)g[i].n_edges * 6 * sizeof(float));
    for (int e = 0; e < g[i].n_edges; e++) {
      mb->src[e0 + e] = n0 + g[i].src[e];
      mb->in_start[n0 + g[i].dst[e] + 1]++;
      basis_edge(&m->plan, g[i].rel_pos + 3 * e, mb->basis + (size_t)(e0 + e) * m->plan.per_edge);
    }
    n0 += g[i].n_nodes;
    e0 += g[i].n_edges;
    graph_free(&g[i]);
  }
  mb->graph_start[N_MOL] = n0;
  for (int n = 0; n < N; n++)
    mb->in_start[n + 1] += mb->in_start[n];
  mb->b = (struct se3_batch){N, E, N_MOL, mb->node, mb->edge, mb->src, mb->in_start, mb->graph_start, mb->basis};
}

static void batch_free(struct mbatch *mb) {
  free(mb->node);
  free(mb->edge);
  free(mb->basis);
  free(mb->src);
  free(mb->in_start);
}

/* Molecules of 7, 9 and 12 atoms: a chain of bonds, random positions. */
static void make_mols(struct mol *mols) {
  tu_seed(2024);
  const int sizes[N_MOL] = {7, 9, 12};
  for (int i = 0; i < N_MOL; i++) {
    mol_init(&mols[i]);
    double p[3] = {0, 0, 0};
    for (int a = 0; a < sizes[i]; a++) {
      for (int k = 0; k < 3; k++)
        p[k] += 1.4 * (2 * tu_rnd() - 1) / sqrt(3.0) * 1.2;
      tu_add_atom(&mols[i], elements[(a * 5 + i) % 4], p[0], p[1], p[2]);
      if (a) tu_add_bond(&mols[i], a - 1, a, 1 + a % 2);
    }
    mols[i].dim = 3;
  }
}

static void transform(struct mol *mols, const double Q[9], const double t[3]) {
  for (int i = 0; i < N_MOL; i++)
    for (int a = 0; a < mols[i].n_atoms; a++) {
      struct mol_atom *at = &mols[i].atoms[a];
      double v[3] = {at->x, at->y, at->z_}, r[3];
      so3_matvec(Q, v, r);
      at->x = r[0] + t[0];
      at->y = r[1] + t[1];
      at->z_ = r[2] + t[2];
    }
}

/* Atom a of the result is atom perm(a) of the original: reverse the order. */
static void reverse_atoms(struct mol *mols) {
  for (int i = 0; i < N_MOL; i++) {
    struct mol *m = &mols[i];
    int n = m->n_atoms;
    for (int a = 0; a < n / 2; a++) {
      struct mol_atom tmp = m->atoms[a];
      m->atoms[a] = m->atoms[n - 1 - a];
      m->atoms[n - 1 - a] = tmp;
    }
    for (int k = 0; k < m->n_bonds; k++) {
      uint32_t a = (uint32_t)(n - 1) - m->bonds[k].a, b = (uint32_t)(n - 1) - m->bonds[k].b;
      m->bonds[k].a = a < b ? a : b;
      m->bonds[k].b = a < b ? b : a;
    }
  }
}

static const struct se3_config cfg = {.layers = 2,
                                      .degrees = 4,
                                      .channels = 8,
                                      .heads = 2,
                                      .channels_div = 2,
                                      .node_in = 6, /* H C N O, other, charge */
                                      .edge_in = 6,
                                      .radial_hidden = 8,
                                      .mlp_hidden = 16,
                                      .pool_max = 1,
                                      .outputs = 1};

Test(model, prediction_is_invariant_in_float) {
  struct se3_model m;
  char err[256];
  cr_assert_eq(se3_model_init(&m, &cfg, err, sizeof err), 0, "%s", err);
  float *p = malloc(m.n_params * sizeof *p);
  se3_model_init_params(&m, p, 5);
  struct mol a[N_MOL], b[N_MOL], c[N_MOL];
  make_mols(a);
  make_mols(b);
  make_mols(c);
  uint64_t rng = 77;
  double Q[9], t[3] = {3.5, -12.25, 0.75};
  so3_random_rotation(&rng, Q);
  transform(b, Q, t);
  reverse_atoms(c);
  struct mbatch ba, bb, bc;
  batch_from(&ba, a, &m);
  batch_from(&bb, b, &m);
  batch_from(&bc, c, &m);
  cr_assert_eq(bb.b.E, ba.b.E, "the rotated graphs have other edges");
  float ya[N_MOL], yb[N_MOL], yc[N_MOL];
  struct se3_tape *ta = se3_model_forward(&m, p, &ba.b, ya), *tb = se3_model_forward(&m, p, &bb.b, yb);
  se3_tape_free(se3_model_forward(&m, p, &bc.b, yc));
  double wr = 0, wp = 0, scale = 0;
  for (int i = 0; i < N_MOL; i++) {
    scale = fmax(scale, fabs(ya[i]));
    wr = fmax(wr, fabs((double)yb[i] - ya[i]));
    wp = fmax(wp, fabs((double)yc[i] - ya[i]));
  }
  cr_assert_gt(scale, 1e-3);
  wr /= scale;
  wp /= scale;
  /* degree-1 features after the first block rotate with D_1 */
  double D1[9];
  so3_wigner_d(1, Q, D1);
  const float *ha = se3_tape_hidden(ta, &m, 0, 1), *hb = se3_tape_hidden(tb, &m, 0, 1);
  double num = 0, den = 0;
  for (int n = 0; n < ba.b.N; n++)
    for (int i = 0; i < 3; i++)
      for (int ch = 0; ch < cfg.channels; ch++) {
        double want = 0;
        for (int j = 0; j < 3; j++)
          want += D1[i * 3 + j] * ha[(n * 3 + j) * cfg.channels + ch];
        double got = hb[(n * 3 + i) * cfg.channels + ch];
        num += (got - want) * (got - want);
        den += want * want;
      }
  double w1 = sqrt(num / den);
  cr_log_info("fp32: rotation+translation %.2e, atom order %.2e relative; degree-1 features %.2e", wr, wp, w1);
  cr_assert_lt(wr, 1e-5);
  cr_assert_lt(wp, 1e-5);
  cr_assert_gt(den, 1e-6);
  cr_assert_lt(w1, 1e-5);
  se3_tape_free(ta);
  se3_tape_free(tb);
  batch_free(&ba);
  batch_free(&bb);
  batch_free(&bc);
  for (int i = 0; i < N_MOL; i++) {
    mol_free(&a[i]);
    mol_free(&b[i]);
    mol_free(&c[i]);
  }
  free(p);
  se3_model_free(&m);
}

/* The step arena hands out the same memory in the same order after a reset,
 * aligned, and a release frees exactly what came after its mark. */
Test(model, arena_reuses_its_memory) {
  struct nn_arena a = {0};
  void *p1 = nn_arena_alloc(&a, 100), *p2 = nn_arena_alloc(&a, (size_t)70 << 20), *p3 = nn_arena_alloc(&a, 8);
  cr_assert(p1 && p2 && p3);
  cr_assert_eq((uintptr_t)p1 % 64, 0);
  cr_assert_eq((uintptr_t)p3 % 64, 0);
  memset(p2, 1, (size_t)70 << 20);
  size_t held = nn_arena_bytes(&a);
  struct nn_arena_mark mk = nn_arena_mark(&a);
  void *p4 = nn_arena_alloc(&a, 1000);
  nn_arena_release(&a, mk);
  cr_assert_eq(nn_arena_alloc(&a, 1000), p4, "a release frees what came after the mark");
  nn_arena_reset(&a);
  cr_assert_eq(nn_arena_alloc(&a, 100), p1);
  cr_assert_eq(nn_arena_alloc(&a, (size_t)70 << 20), p2);
  cr_assert_eq(nn_arena_alloc(&a, 8), p3);
  cr_assert_eq(nn_arena_bytes(&a), held, "a reset keeps the memory and a second step needs no more");
  nn_arena_free(&a);
  cr_assert_eq(nn_arena_bytes(&a), 0);
}

/* Steps in a kept workspace give bit-identical predictions and gradients to
 * steps with fresh memory, every time. */
Test(model, workspace_steps_are_identical) {
  struct se3_model m;
  char err[256];
  cr_assert_eq(se3_model_init(&m, &cfg, err, sizeof err), 0, "%s", err);
  float *p = malloc(m.n_params * sizeof *p);
  float *g0 = calloc(m.n_params, sizeof *g0), *g1 = calloc(m.n_params, sizeof *g1);
  se3_model_init_params(&m, p, 9);
  struct mol mols[N_MOL];
  make_mols(mols);
  struct mbatch mb;
  batch_from(&mb, mols, &m);
  float y0[N_MOL], y1[N_MOL], dout[N_MOL] = {1, -0.5f, 0.25f};
  struct se3_tape *t = se3_model_forward(&m, p, &mb.b, y0);
  se3_model_backward(&m, p, &mb.b, t, dout, g0, NULL);
  se3_tape_free(t);
  struct nn_arena ws = {0};
  for (int step = 0; step < 3; step++) {
    memset(g1, 0, m.n_params * sizeof *g1);
    t = se3_model_forward_ws(&m, p, &mb.b, y1, &ws);
    se3_model_backward(&m, p, &mb.b, t, dout, g1, NULL);
    se3_tape_free(t);
    cr_assert_eq(memcmp(y0, y1, sizeof y0), 0, "step %d: predictions differ", step);
    cr_assert_eq(memcmp(g0, g1, m.n_params * sizeof *g1), 0, "step %d: gradients differ", step);
  }
  nn_arena_free(&ws);
  batch_free(&mb);
  for (int i = 0; i < N_MOL; i++)
    mol_free(&mols[i]);
  free(p);
  free(g0);
  free(g1);
  se3_model_free(&m);
}
