/* The SE(3)-Transformer in float (the product build) on molecules built by
 * hand, through the real graph and basis code: the prediction is unchanged,
 * to fp32 round-off, by rotating and translating the coordinates and by
 * permuting the atoms; degree-1 hidden features rotate with D_1. With the
 * smooth cutoff envelope, an atom moved across the cutoff by 1e-4 Å changes
 * the prediction by O(1e-4), where without it the prediction jumps. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chem/graph.h"
#include "chem/mol.h"
#include "common/error.h"
#include "models/cpu/real.h"
#include "models/se3.h"
#include "models/so3.h"
#include "tests/testutil.h"

enum { N_MOL = 3 };

static const uint8_t elements[] = {1, 6, 7, 8};

/* A batch made from molecules: their graphs through se3_batch_buf. */
static void batch_from(struct se3_batch_buf *bb, struct mol *mols, const struct se3_model *m) {
  se3_batch_buf_init(bb, m->cfg.node_in, GRAPH_EDGE_WIDTH);
  for (int i = 0; i < N_MOL; i++)
    tu_batch_add_mol(bb, &mols[i]);
  cr_assert_eq(se3_batch_bases(bb, &m->plan), 0);
}

/* Molecules of 7, 9 and 12 atoms: a chain of bonds, random positions. */
static void make_mols(struct mol *mols) {
  tu_seed(2024);
  const int sizes[N_MOL] = {7, 9, 12};
  for (int i = 0; i < N_MOL; i++) {
    mol_init(&mols[i]);
    tu_chain_mol(&mols[i], sizes[i], i);
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

/* 32 channels and 32 radial features: the convolution's fast tiles. */
static const struct se3_config cfg32 = {.layers = 2,
                                        .degrees = 4,
                                        .channels = 32,
                                        .heads = 8,
                                        .channels_div = 2,
                                        .node_in = 6,
                                        .edge_in = 6,
                                        .radial_hidden = 32,
                                        .mlp_hidden = 32,
                                        .pool_max = 1,
                                        .outputs = 1};

static void check_invariance(const struct se3_config *cf) {
  struct se3_config cfg = *cf;
  struct se3_model m;
  struct se3_error err;
  cr_assert_eq(se3_model_init(&m, &cfg, &err), 0, "%s", se3_error_str(&err).s);
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
  struct se3_batch_buf ba, bb, bc;
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
  cr_log_info("fp32, %d channels: rotation+translation %.2e, atom order %.2e relative; degree-1 features %.2e",
              cfg.channels, wr, wp, w1);
  cr_assert_lt(wr, 1e-5);
  cr_assert_lt(wp, 1e-5);
  cr_assert_gt(den, 1e-6);
  cr_assert_lt(w1, 1e-5);
  se3_tape_free(ta);
  se3_tape_free(tb);
  se3_batch_buf_free(&ba);
  se3_batch_buf_free(&bb);
  se3_batch_buf_free(&bc);
  for (int i = 0; i < N_MOL; i++) {
    mol_free(&a[i]);
    mol_free(&b[i]);
    mol_free(&c[i]);
  }
  free(p);
  se3_model_free(&m);
}

Test(model, prediction_is_invariant_in_float) { check_invariance(&cfg); }

Test(model, prediction_is_invariant_with_the_fast_tiles) { check_invariance(&cfg32); }

/* The graphs of batch_from: radius+bonds at 2.6 Å, bonds weigh 1. */
static struct se3_config with_envelope(const struct se3_config *c) {
  struct se3_config e = *c;
  e.envelope = SE3_ENVELOPE_COSINE;
  e.cutoff = 2.6f;
  e.bonds_kept = 1;
  return e;
}

Test(model, prediction_is_invariant_with_the_envelope) {
  struct se3_config e = with_envelope(&cfg);
  check_invariance(&e);
}

/* low_memory recomputes each block's per-edge work in the backward: the
 * same predictions and gradients bit for bit, from a smaller arena. */
static void check_low_memory(const struct se3_config *c) {
  struct se3_model m;
  struct se3_error err;
  cr_assert_eq(se3_model_init(&m, c, &err), 0, "%s", se3_error_str(&err).s);
  float *p = malloc(m.n_params * sizeof *p);
  float *g0 = calloc(m.n_params, sizeof *g0), *g1 = calloc(m.n_params, sizeof *g1);
  se3_model_init_params(&m, p, 3);
  struct mol mols[N_MOL];
  make_mols(mols);
  struct se3_batch_buf mb;
  batch_from(&mb, mols, &m);
  float y0[N_MOL], y1[N_MOL], dout[N_MOL] = {0.5f, -1, 2};
  struct nn_arena w0 = {0}, w1 = {0};
  struct se3_tape *t = se3_model_forward_ws(&m, p, &mb.b, y0, &w0);
  se3_model_backward(&m, p, &mb.b, t, dout, g0, NULL);
  se3_tape_free(t);
  m.low_memory = 1;
  t = se3_model_forward_ws(&m, p, &mb.b, y1, &w1);
  se3_model_backward(&m, p, &mb.b, t, dout, g1, NULL);
  se3_tape_free(t);
  cr_assert_eq(memcmp(y0, y1, sizeof y0), 0, "predictions differ");
  cr_assert_eq(memcmp(g0, g1, m.n_params * sizeof *g1), 0, "gradients differ");
  int moved = 0;
  for (size_t i = 0; i < m.n_params; i++)
    moved |= g0[i] != 0;
  cr_assert(moved);
  cr_log_info("arena peak: %zu bytes, %zu with low_memory", nn_arena_peak(&w0), nn_arena_peak(&w1));
  cr_assert_lt(nn_arena_peak(&w1), nn_arena_peak(&w0), "low_memory uses no less memory");
  nn_arena_free(&w0);
  nn_arena_free(&w1);
  se3_batch_buf_free(&mb);
  for (int i = 0; i < N_MOL; i++)
    mol_free(&mols[i]);
  free(p);
  free(g0);
  free(g1);
  se3_model_free(&m);
}

Test(model, low_memory_gives_identical_gradients) { check_low_memory(&cfg32); }

Test(model, low_memory_gives_identical_gradients_with_the_envelope) {
  struct se3_config e = with_envelope(&cfg32);
  check_low_memory(&e);
}

/* The backward's stages (se3_model_grad_stages), which the gradient's
 * buckets are summed by while the backward goes on: when stage k is
 * reported done, the gradient from from[k] on is already final (no later
 * stage writes it again), and every stage adds something there. */
struct stage_snap {
  const struct se3_model *m;
  const float *g;
  size_t from[SE3_MAX_LAYERS + 1];
  float *snap[SE3_MAX_LAYERS + 1];
  int calls;
};

static void snap_stage(void *ctx, int k) {
  struct stage_snap *s = ctx;
  cr_assert_eq(k, s->calls, "stage %d reported after %d stages", k, s->calls);
  size_t n = s->m->n_params - s->from[k];
  s->snap[k] = malloc((n ? n : 1) * sizeof(float));
  memcpy(s->snap[k], s->g + s->from[k], n * sizeof(float));
  s->calls++;
}

static void check_stages(int embed) {
  struct se3_model m;
  struct se3_error err;
  struct se3_config c = cfg32;
  c.layers = 3;
  c.embed = embed; /* the embedding's gradient belongs to the first block's stage */
  cr_assert_eq(se3_model_init(&m, &c, &err), 0, "%s", se3_error_str(&err).s);
  float *p = malloc(m.n_params * sizeof *p), *g = calloc(m.n_params, sizeof *g);
  se3_model_init_params(&m, p, 11);
  struct mol mols[N_MOL];
  make_mols(mols);
  struct se3_batch_buf mb;
  batch_from(&mb, mols, &m);
  float y[N_MOL], dout[N_MOL] = {0.5f, -1, 2};
  struct nn_arena ws = {0};
  struct stage_snap s = {.m = &m, .g = g};
  int stages = se3_model_grad_stages(&m, s.from);
  cr_assert_eq(stages, c.layers + 1);
  cr_assert_eq(s.from[stages - 1], 0);
  for (int k = 1; k < stages; k++)
    cr_assert_lt(s.from[k], s.from[k - 1], "stages must go from the end of the parameters down");
  struct se3_tape *t = se3_model_forward_ws(&m, p, &mb.b, y, &ws);
  cr_assert_eq(se3_model_backward_staged(&m, p, &mb.b, t, dout, g, NULL, snap_stage, &s), 0);
  cr_assert_eq(s.calls, stages);
  for (int k = 0; k < stages; k++) {
    size_t n = m.n_params - s.from[k], hi = k ? s.from[k - 1] : m.n_params;
    cr_assert_eq(memcmp(s.snap[k], g + s.from[k], n * sizeof *g), 0,
                 "the gradient from %zu on changed after stage %d was reported done", s.from[k], k);
    int moved = 0;
    for (size_t i = s.from[k]; i < hi; i++)
      moved |= g[i] != 0;
    cr_assert(moved, "stage %d left its stretch [%zu, %zu) at zero", k, s.from[k], hi);
    free(s.snap[k]);
  }
  se3_tape_free(t);
  nn_arena_free(&ws);
  se3_batch_buf_free(&mb);
  for (int i = 0; i < N_MOL; i++)
    mol_free(&mols[i]);
  free(p);
  free(g);
  se3_model_free(&m);
}

Test(model, each_backward_stage_finishes_its_stretch_of_the_gradient) {
  check_stages(0);
  check_stages(6);
}

/* Inference (se3_model_infer_ws, what scoring runs) gives the forward's
 * predictions bit for bit while its workspace holds one block at a time:
 * with 4 blocks, well under what the kept forward needs. */
static void check_infer(const struct se3_config *c) {
  struct se3_model m;
  struct se3_error err;
  cr_assert_eq(se3_model_init(&m, c, &err), 0, "%s", se3_error_str(&err).s);
  float *p = malloc(m.n_params * sizeof *p);
  se3_model_init_params(&m, p, 5);
  struct mol mols[N_MOL];
  make_mols(mols);
  struct se3_batch_buf mb;
  batch_from(&mb, mols, &m);
  float y0[N_MOL], y1[N_MOL], y2[N_MOL];
  struct nn_arena w0 = {0}, w1 = {0};
  se3_tape_free(se3_model_forward_ws(&m, p, &mb.b, y0, &w0));
  cr_assert_eq(se3_model_infer_ws(&m, p, &mb.b, y1, &w1), 0);
  cr_assert_eq(memcmp(y0, y1, sizeof y0), 0, "inference differs from the forward");
  cr_assert_eq(se3_model_infer_ws(&m, p, &mb.b, y2, &w1), 0); /* again, on the reused workspace */
  cr_assert_eq(memcmp(y0, y2, sizeof y0), 0, "a second inference differs");
  cr_log_info("arena peak: %zu bytes kept, %zu inference", nn_arena_peak(&w0), nn_arena_peak(&w1));
  cr_assert_lt(nn_arena_peak(&w1) * 2, nn_arena_peak(&w0), "inference holds more than half of the kept forward");
  nn_arena_free(&w0);
  nn_arena_free(&w1);
  se3_batch_buf_free(&mb);
  for (int i = 0; i < N_MOL; i++)
    mol_free(&mols[i]);
  free(p);
  se3_model_free(&m);
}

Test(model, inference_equals_the_forward_in_less_memory) {
  struct se3_config c4 = cfg32;
  c4.layers = 4;
  check_infer(&c4);
}

Test(model, inference_equals_the_forward_with_the_envelope) {
  struct se3_config c4 = with_envelope(&cfg32);
  c4.layers = 4;
  check_infer(&c4);
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
  struct se3_error err;
  cr_assert_eq(se3_model_init(&m, &cfg, &err), 0, "%s", se3_error_str(&err).s);
  float *p = malloc(m.n_params * sizeof *p);
  float *g0 = calloc(m.n_params, sizeof *g0), *g1 = calloc(m.n_params, sizeof *g1);
  se3_model_init_params(&m, p, 9);
  struct mol mols[N_MOL];
  make_mols(mols);
  struct se3_batch_buf mb;
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
  se3_batch_buf_free(&mb);
  for (int i = 0; i < N_MOL; i++)
    mol_free(&mols[i]);
  free(p);
  free(g0);
  free(g1);
  se3_model_free(&m);
}

/* Memory running out in the backward pass (an arena with a limit below what
 * it needs, at every point of the pass, in both modes) is an error the
 * caller gets back, never a crash or an abort; with just enough memory the
 * gradients are the usual ones. */
static void check_backward_oom(int low_memory) {
  struct se3_model m;
  struct se3_error err;
  cr_assert_eq(se3_model_init(&m, &cfg, &err), 0, "%s", se3_error_str(&err).s);
  m.low_memory = low_memory;
  float *p = malloc(m.n_params * sizeof *p);
  float *g0 = calloc(m.n_params, sizeof *g0), *g1 = calloc(m.n_params, sizeof *g1);
  se3_model_init_params(&m, p, 5);
  struct mol mols[N_MOL];
  make_mols(mols);
  struct se3_batch_buf mb;
  batch_from(&mb, mols, &m);
  float y[N_MOL], dout[N_MOL] = {1, -0.5f, 0.25f};
  struct nn_arena ws = {0};
  struct se3_tape *t = se3_model_forward_ws(&m, p, &mb.b, y, &ws);
  cr_assert_eq(se3_model_backward(&m, p, &mb.b, t, dout, g0, NULL), 0);
  se3_tape_free(t);
  size_t need = nn_arena_peak(&ws);
  nn_arena_free(&ws);
  int failed = 0;
  for (int k = 1; k <= 40; k++) { /* (a limit of 0 is none) */
    size_t limit = k < 40 ? need * (size_t)k / 40 : need;
    struct nn_arena a = {0};
    t = se3_model_forward_ws(&m, p, &mb.b, y, &a);
    cr_assert(t, "the forward runs without a limit");
    a.limit = limit;
    memset(g1, 0, m.n_params * sizeof *g1);
    int rc = se3_model_backward(&m, p, &mb.b, t, dout, g1, NULL);
    se3_tape_free(t);
    nn_arena_free(&a);
    if (k < 40) {
      cr_assert_eq(rc, -1, "a limit of %zu of %zu bytes: the backward must report running out", limit, need);
      failed++;
    } else {
      cr_assert_eq(rc, 0, "with the %zu bytes it needs the backward must succeed", need);
      cr_assert_eq(memcmp(g0, g1, m.n_params * sizeof *g1), 0, "gradients differ");
    }
  }
  cr_assert_eq(failed, 39);
  se3_batch_buf_free(&mb);
  for (int i = 0; i < N_MOL; i++)
    mol_free(&mols[i]);
  free(p);
  free(g0);
  free(g1);
  se3_model_free(&m);
}

Test(model, backward_out_of_memory_is_an_error) { check_backward_oom(0); }
Test(model, backward_out_of_memory_is_an_error_in_low_memory_mode) { check_backward_oom(1); }

/* The batch builder: sources shifted by each molecule's first node, CSR
 * offsets by target, molecule offsets, out-of-order targets refused, and a
 * cleared buffer reused. */
Test(model, batch_builder_concatenates_graphs) {
  struct se3_batch_buf bb;
  se3_batch_buf_init(&bb, 1, 1);
  struct basis_plan plan;
  cr_assert_eq(basis_plan_init(&plan, 1), 0);
  const float nf[3] = {1, 2, 3}, ef[3] = {0.1f, 0.2f, 0.3f}, rel[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  const int32_t src_a[3] = {1, 2, 0}, dst_a[3] = {0, 0, 2}; /* node 1 has no incoming edge */
  for (int round = 0; round < 2; round++) {
    se3_batch_clear(&bb);
    cr_assert_eq(se3_batch_add(&bb, 3, nf, 3, src_a, dst_a, ef, rel), 0);
    cr_assert_eq(se3_batch_add(&bb, 0, NULL, 0, NULL, NULL, NULL, NULL), 0); /* an empty molecule */
    cr_assert_eq(se3_batch_add(&bb, 2, nf, 2, (const int32_t[]){1, 0}, (const int32_t[]){0, 1}, ef, rel), 0);
    cr_assert_eq(se3_batch_bases(&bb, &plan), 0);
    const struct se3_batch *b = &bb.b;
    cr_assert_eq(b->N, 5);
    cr_assert_eq(b->E, 5);
    cr_assert_eq(b->G, 3);
    const int32_t want_src[5] = {1, 2, 0, 4, 3}, want_in[6] = {0, 2, 2, 3, 4, 5}, want_g[4] = {0, 3, 3, 5};
    cr_assert_eq(memcmp(b->src, want_src, sizeof want_src), 0);
    cr_assert_eq(memcmp(b->in_start, want_in, sizeof want_in), 0);
    cr_assert_eq(memcmp(b->graph_start, want_g, sizeof want_g), 0);
    cr_assert_float_eq(b->node_feat[4], 2.0f, 0);
    cr_assert_float_eq(b->edge_feat[3], 0.1f, 0);
    float want[34];
    basis_edge(&plan, rel + 3, want); /* the fifth edge is molecule 3's second: rel (0, 1, 0) */
    cr_assert_eq(memcmp(b->basis + 4 * plan.per_edge, want, plan.per_edge * sizeof *want), 0);
  }
  cr_assert_eq(se3_batch_add(&bb, 2, nf, 2, src_a, (const int32_t[]){1, 0}, ef, rel), -1, "targets out of order");
  se3_batch_buf_free(&bb);
  basis_plan_free(&plan);
}

/* The stored form of a configuration reads back to the same configuration;
 * a damaged one is refused. */
Test(model, config_words_round_trip) {
  char words[512];
  se3_config_format(&cfg, words, sizeof words);
  struct se3_config back;
  cr_assert_eq(se3_config_parse(words, &back), 0, "%s", words);
  cr_assert_eq(memcmp(&back, &cfg, sizeof cfg), 0, "%s", words);
  cr_assert_eq(se3_config_parse("layers=2 degrees=3", &back), -1);
  cr_assert_eq(cfg.envelope, SE3_ENVELOPE_NONE);
  cr_assert_eq(strstr(words, "envelope"), NULL, "without an envelope the words are as before: %s", words);
  /* with the envelope: its words follow, and read back */
  struct se3_config e = with_envelope(&cfg);
  e.cutoff = 4.7f;
  se3_config_format(&e, words, sizeof words);
  cr_assert(strstr(words, " envelope=cosine cutoff=4.69999981 bonds_kept=1"), "%s", words);
  cr_assert_eq(se3_config_parse(words, &back), 0, "%s", words);
  cr_assert_eq(memcmp(&back, &e, sizeof e), 0, "%s", words);
  /* words stored before the envelope existed: no envelope */
  const char *old = "layers=2 degrees=4 channels=8 heads=2 channels_div=2 node_in=6 edge_in=6 radial_hidden=8 "
                    "mlp_hidden=16 pool_max=1 outputs=1";
  cr_assert_eq(se3_config_parse(old, &back), 0);
  cr_assert_eq(memcmp(&back, &cfg, sizeof cfg), 0, "old words read as the old configuration");
  char bad[600];
  e.envelope = SE3_ENVELOPE_POLY;
  se3_config_format(&e, words, sizeof words);
  cr_assert_eq(se3_config_parse(words, &back), 0, "%s", words);
  cr_assert_eq(memcmp(&back, &e, sizeof e), 0, "%s", words);
  snprintf(bad, sizeof bad, "%s envelope=gauss cutoff=5 bonds_kept=0", old);
  cr_assert_eq(se3_config_parse(bad, &back), -1, "unknown envelope");
  snprintf(bad, sizeof bad, "%s envelope=cosine", old);
  cr_assert_eq(se3_config_parse(bad, &back), -1, "envelope without its cutoff");
  /* the embedding's word comes last, with or without the envelope's */
  struct se3_config x = e;
  x.embed = 16;
  se3_config_format(&x, words, sizeof words);
  cr_assert(strstr(words, " bonds_kept=1 embed=16") && !strstr(words, "embed=16 "), "%s", words);
  cr_assert_eq(se3_config_parse(words, &back), 0, "%s", words);
  cr_assert_eq(memcmp(&back, &x, sizeof x), 0, "%s", words);
  x = cfg;
  x.embed = 3;
  se3_config_format(&x, words, sizeof words);
  cr_assert_eq(se3_config_parse(words, &back), 0, "%s", words);
  cr_assert_eq(memcmp(&back, &x, sizeof x), 0, "%s", words);
  snprintf(bad, sizeof bad, "%s embed=0", old);
  cr_assert_eq(se3_config_parse(bad, &back), -1, "embed=0 is never written");
  snprintf(bad, sizeof bad, "%s embed=4 envelope=cosine cutoff=5 bonds_kept=0", old);
  cr_assert_eq(se3_config_parse(bad, &back), -1, "the embedding's word is the last");
  snprintf(bad, sizeof bad, "%s junk", old);
  cr_assert_eq(se3_config_parse(bad, &back), -1, "trailing words");
  struct se3_model m;
  struct se3_error err;
  e.cutoff = 0;
  cr_assert_eq(se3_model_init(&m, &e, &err), -1);
  cr_assert(strstr(se3_error_str(&err).s, "positive cutoff"), "%s", se3_error_str(&err).s);
  /* a stranger's words (a checkpoint's "arch"): a number past int's range is
   * refused by the parser, not wrapped; a size out of its range is named
   * with its value and the range before anything is laid out */
  snprintf(bad, sizeof bad, "%s", old);
  memcpy(strstr(bad, "radial_hidden=8") + 14, "9", 1);
  cr_assert_eq(se3_config_parse(bad, &back), 0, "%s", bad);
  cr_assert_eq(back.radial_hidden, 9);
  const char *huge = "layers=2 degrees=4 channels=8 heads=2 channels_div=2 node_in=6 edge_in=6 "
                     "radial_hidden=4294967304 mlp_hidden=16 pool_max=1 outputs=1";
  cr_assert_eq(se3_config_parse(huge, &back), -1, "radial_hidden past INT_MAX");
  cr_assert_eq(se3_config_parse("layers=2 degrees=4 channels=8x heads=2 channels_div=2 node_in=6 edge_in=6 "
                                "radial_hidden=8 mlp_hidden=16 pool_max=1 outputs=1",
                                &back),
               -1, "trailing letters in a number");
  struct se3_config big = cfg;
  big.radial_hidden = 2147483647;
  cr_assert_eq(se3_model_init(&m, &big, &err), -1);
  cr_assert(strstr(se3_error_str(&err).s, "radial_hidden=2147483647 is out of range (1 to 1024)"), "%s",
            se3_error_str(&err).s);
  big = cfg;
  big.outputs = -3;
  cr_assert_eq(se3_config_check(&big, &err), -1);
  cr_assert(strstr(se3_error_str(&err).s, "outputs=-3"), "%s", se3_error_str(&err).s);
  big = cfg;
  big.heads = 65;
  cr_assert_eq(se3_config_check(&big, &err), -1);
  cr_assert(strstr(se3_error_str(&err).s, "heads=65"), "%s", se3_error_str(&err).s);
  cr_assert_eq(se3_config_check(&cfg, &err), 0, "%s", se3_error_str(&err).s);
}

/* ---- the smooth cutoff ---------------------------------------------------------- */

/* Weights: 1 at r = 0, 1/2 at rc/2, 0 at and beyond rc with zero slope;
 * bonded edges (no-bond feature 0) weigh 1 only with bonds_kept. */
Test(model, envelope_weights) {
  struct se3_config c = cfg;
  c.envelope = SE3_ENVELOPE_COSINE;
  c.cutoff = 4.0f;
  float ef[6 * 6] = {0};
  const float r[6] = {0, 2, 3.999f, 4, 7, 3.999f};
  for (int e = 0; e < 6; e++) {
    ef[e * 6 + (e == 5 ? 1 : 0)] = 1; /* edge 5 is a single bond, the others none */
    ef[e * 6 + 5] = r[e];
  }
  float w[6];
  se3_edge_weights(&c, ef, 6, w);
  cr_assert_float_eq(w[0], 1.0f, 1e-7);
  cr_assert_float_eq(w[1], 0.5f, 1e-6);
  cr_assert(w[2] > 0 && w[2] < 2e-6, "%g: the slope vanishes at the cutoff", w[2]);
  cr_assert_eq(w[3], 0.0f);
  cr_assert_eq(w[4], 0.0f);
  cr_assert(w[5] < 2e-6, "a bond fades like any edge without bonds_kept");
  c.bonds_kept = 1;
  se3_edge_weights(&c, ef, 6, w);
  cr_assert_eq(w[5], 1.0f, "a bond in a radius+bonds graph always weighs 1");
  cr_assert(w[2] < 2e-6);
  /* the polynomial: flat near 0 (0.86 at rc/2), 0 with zero slope at rc */
  c.envelope = SE3_ENVELOPE_POLY;
  c.bonds_kept = 0;
  se3_edge_weights(&c, ef, 6, w);
  cr_assert_float_eq(w[0], 1.0f, 1e-7);
  cr_assert_float_eq(w[1], 1.0f - 28.0f / 64 + 48.0f / 128 - 21.0f / 256, 1e-6);
  cr_assert(w[2] >= 0 && w[2] < 1e-9, "%g: zero slope and curvature at the cutoff", w[2]);
  cr_assert_eq(w[3], 0.0f);
  cr_assert_eq(w[4], 0.0f);
  c.envelope = SE3_ENVELOPE_NONE;
  se3_edge_weights(&c, ef, 6, w);
  for (int e = 0; e < 6; e++)
    cr_assert_eq(w[e], 1.0f);
}

/* A molecule whose atom 4 sits at distance rc + s from atom 1 (other pairs
 * well away from rc; atom 5 fixed near atom 4, so the output moves with
 * atom 4 also through edges far from the cutoff), its graph built by
 * chem/graph.c, through the model: the predictions for each s. */
static void predict_across_cutoff(const struct se3_model *m, const float *p, enum graph_edges edges, const double *s,
                                  int ns, float *y, int *n_edges) {
  const double rc = 3.0;
  const double base[4][3] = {{0, 0, 0}, {1.5, 0, 0}, {1.6, 1.4, 0}, {-0.9, 1.1, 0.3}};
  const int z[6] = {6, 6, 8, 7, 1, 8};
  double u[3] = {0.5, -0.8, 0.3}, nu = sqrt(u[0] * u[0] + u[1] * u[1] + u[2] * u[2]);
  for (int k = 0; k < ns; k++) {
    struct mol mol;
    mol_init(&mol);
    for (int a = 0; a < 4; a++)
      tu_add_atom(&mol, z[a], base[a][0], base[a][1], base[a][2]);
    double q[3];
    for (int i = 0; i < 3; i++)
      q[i] = base[1][i] + (rc + s[k]) * u[i] / nu;
    tu_add_atom(&mol, z[4], q[0], q[1], q[2]);
    tu_add_atom(&mol, z[5], base[1][0] + (rc + 1.1) * u[0] / nu + 0.3, base[1][1] + (rc + 1.1) * u[1] / nu,
                base[1][2] + (rc + 1.1) * u[2] / nu - 0.2);
    tu_add_bond(&mol, 0, 1, 1);
    tu_add_bond(&mol, 1, 2, 2);
    tu_add_bond(&mol, 0, 3, 1);
    mol.dim = 3;
    for (int a = 0; a < 6; a++) /* only the pair (1, 4) is near the cutoff */
      for (int b = a + 1; b < 6; b++) {
        const struct mol_atom *A = &mol.atoms[a], *B = &mol.atoms[b];
        double dx = A->x - B->x, dy = A->y - B->y, dz = A->z_ - B->z_, d = sqrt(dx * dx + dy * dy + dz * dz);
        if (!(a == 1 && b == 4)) cr_assert_gt(fabs(d - rc), 0.1, "atoms %d and %d at %g Å", a, b, d);
      }
    struct graph_opts go = {
        .cutoff = rc, .edges = edges, .elements = elements, .n_elements = 4, .with_other = 1, .with_charge = 1};
    struct graph g;
    struct se3_error e;
    graph_init(&g);
    cr_assert_eq(graph_build(&mol, &go, &g, &e), 0, "%s", se3_error_str(&e).s);
    n_edges[k] = g.n_edges;
    struct se3_batch_buf bb;
    se3_batch_buf_init(&bb, m->cfg.node_in, GRAPH_EDGE_WIDTH);
    cr_assert_eq(se3_batch_add(&bb, g.n_nodes, g.node_feat, g.n_edges, g.src, g.dst, g.edge_feat, g.rel_pos), 0);
    cr_assert_eq(se3_batch_bases(&bb, &m->plan), 0);
    se3_tape_free(se3_model_forward(m, p, &bb.b, &y[k]));
    se3_batch_buf_free(&bb);
    graph_free(&g);
    mol_free(&mol);
  }
}

/* s = -3d, -d, +d, +3d with d = 1e-4 Å: the edge pair (1, 4) exists for the
 * first two only. With the envelope the step across the cutoff (-d to +d) is
 * like the steps on either side (the output moves smoothly with the atom)
 * and under 1e-3 of the prediction; without it, the same parameters jump by
 * far more. */
static void check_across_cutoff(int pool_max, enum graph_edges edges, int kind) {
  const double d = 1e-4, s[4] = {-3 * d, -d, d, 3 * d};
  struct se3_config c = cfg;
  c.pool_max = pool_max;
  c.envelope = kind;
  c.cutoff = 3.0f;
  c.bonds_kept = edges == GRAPH_EDGES_RADIUS_BONDS;
  struct se3_model m;
  struct se3_error err;
  cr_assert_eq(se3_model_init(&m, &c, &err), 0, "%s", se3_error_str(&err).s);
  float *p = malloc(m.n_params * sizeof *p);
  se3_model_init_params(&m, p, 19);
  float y[4], yn[4];
  int ne[4], nn[4];
  predict_across_cutoff(&m, p, edges, s, 4, y, ne);
  cr_assert(ne[0] == ne[1] && ne[1] == ne[2] + 2 && ne[2] == ne[3], "edges %d %d %d %d: the pair must cross", ne[0],
            ne[1], ne[2], ne[3]);
  se3_model_free(&m);
  c.envelope = SE3_ENVELOPE_NONE;
  cr_assert_eq(se3_model_init(&m, &c, &err), 0, "%s", se3_error_str(&err).s);
  predict_across_cutoff(&m, p, edges, s, 4, yn, nn);
  double scale = fabs(y[1]), across = fabs((double)y[2] - y[1]),
         beside = fmax(fabs((double)y[1] - y[0]), fabs((double)y[3] - y[2])), jump = fabs((double)yn[2] - yn[1]);
  cr_log_info("%s pooling, %s, %s envelope: y %.6f; change across the cutoff (2e-4 Å) %.2e relative with the envelope "
              "(%.2e beside it), %.2e without",
              pool_max ? "max" : "mean", edges == GRAPH_EDGES_RADIUS ? "radius" : "radius+bonds",
              kind == SE3_ENVELOPE_POLY ? "polynomial" : "cosine", y[1], across / scale, beside / scale,
              jump / fabs((double)yn[1]));
  cr_assert_gt(scale, 1e-3, "a degenerate model proves nothing");
  cr_assert_lt(across, 1e-3 * scale, "the output jumps at the cutoff: %g of %g", across, scale);
  cr_assert_lt(across, 3 * beside + 1e-6 * scale, "no step beyond the smooth trend: %g across, %g beside", across,
               beside);
  cr_assert_gt(jump, 1e-2 * fabs((double)yn[1]), "without the envelope the test must see the step (%g)", jump);
  free(p);
  se3_model_free(&m);
}

Test(model, no_jump_at_the_cutoff_radius_mean) { check_across_cutoff(0, GRAPH_EDGES_RADIUS, SE3_ENVELOPE_COSINE); }
Test(model, no_jump_at_the_cutoff_radius_max) { check_across_cutoff(1, GRAPH_EDGES_RADIUS, SE3_ENVELOPE_COSINE); }
Test(model, no_jump_at_the_cutoff_radius_bonds) {
  check_across_cutoff(0, GRAPH_EDGES_RADIUS_BONDS, SE3_ENVELOPE_COSINE);
}
Test(model, no_jump_at_the_cutoff_polynomial) { check_across_cutoff(1, GRAPH_EDGES_RADIUS_BONDS, SE3_ENVELOPE_POLY); }

/* nn_mm cuts a large product into row blocks, one an OpenMP thread; on 1,
 * 2 and 3 threads every row must come out the same bits (the cuts fall on
 * multiples of OpenBLAS's row tiles), as the forward pass's independence
 * of the thread count rests on it. Sizes as a batch's edges meet the
 * radial network: rows not a multiple of anything in particular. */
Test(model, products_do_not_depend_on_the_thread_count) {
#ifdef _OPENMP
  const int m = 1001, n = 37, k = 160;
  real *A = malloc((size_t)m * k * sizeof *A), *B = malloc((size_t)n * k * sizeof *B);
  real *C[3];
  tu_seed(77);
  for (int i = 0; i < m * k; i++)
    A[i] = (real)(2 * tu_rnd() - 1);
  for (int i = 0; i < n * k; i++)
    B[i] = (real)(2 * tu_rnd() - 1);
  nn_blas_init(); /* BLAS single-threaded inside OpenMP's threads, as the model runs it */
  int keep = omp_get_max_threads();
  for (int t = 0; t < 3; t++) {
    C[t] = calloc((size_t)m * n, sizeof *C[t]);
    omp_set_num_threads(t + 1);
    nn_mm(0, 1, m, n, k, 1, A, k, B, k, 0, C[t], n);
  }
  omp_set_num_threads(keep);
  for (int t = 1; t < 3; t++)
    cr_assert_eq(memcmp(C[0], C[t], (size_t)m * n * sizeof *C[0]), 0, "the product on %d threads differs from 1's",
                 t + 1);
  for (int t = 0; t < 3; t++)
    free(C[t]);
  free(A);
  free(B);
#else
  cr_skip_test("built without OpenMP");
#endif
}
